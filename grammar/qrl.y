/* The QRL grammar (Lemon). Actions are one line and call the constructors of
 * grammar/parse_int.h; the AST is described in lang/ast.h and the language in
 * docs/language.md. Statements end with SEMI, which the lexer also inserts at
 * line ends (see lang/lexer.h); the last statement of a block needs none. */

%name qp_Parse
%token_prefix TK_
%token_type { ql_token }
%default_type { ql_node * }
%extra_argument { qp_state *ps }
%stack_size 0

%include {
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "parse_int.h"
#define P ps->arena
}

%syntax_error { qp_syntax_error(ps, yypParser, yymajor, &yyminor); }
%parse_failure { ps->root = NULL; }

/* Every token of lang/token.h, so that each has a TK_ code. */
%token IDENT INT FLOAT STRING SEMI LP RP LB RB LBRACE RBRACE COMMA COLON DOT DOTDOT ARROW FATARROW
       QUESTION ASSIGN PLUSEQ MINUSEQ STAREQ SLASHEQ PLUS MINUS STAR SLASH PERCENT SHL SHR AMP PIPE
       CARET TILDE EQ NE LT TLT LE GT GE IMPORT CONST FN KERNEL CALIBRATOR STATE OBSERVE MERGE SOLVE
       PATTERN MATCH WHERE QUANTIZE LOWER AFFINE SAME FIXED TABLE REQUANTIZE RECIPE USE BY WHEN LET
       VAR IF ELSE FOR IN WHILE RETURN BREAK CONTINUE TRUE FALSE AND OR NOT SAT TENSOR QTYPE QPARAMS
       HISTOGRAM BOOL I4 U4 I8 U8 I16 U16 I32 I64 F32 F64 ELEMENTWISE ALONG CHANNEL TRANSFORM GRAM THEN.

%left OR.
%left AND.
%right NOT.
%nonassoc EQ NE LT LE GT GE.
%left PIPE.
%left CARET.
%left AMP.
%left SHL SHR.
%left PLUS MINUS.
%left STAR SLASH PERCENT.
%right TILDE.

/* ------------------------------------------------------------- module */

module ::= items(L).                                  { ps->root = L; }

items(A) ::= .                                        { A = qp_node(ps, QL_MODULE, (ql_span){ps->src, 0, 0}); }
items(A) ::= items(L) SEMI.                           { A = L; }
items(A) ::= items(L) item(I) SEMI.                   { A = qp_add(ps, L, I); }
items(A) ::= items(L) error.                          { A = L; }

item(A) ::= IMPORT STRING(S).                         { A = qp_tok(ps, QL_IMPORT, &S); }
item(A) ::= CONST IDENT(N) typeopt(T) ASSIGN expr(E). { A = qp_fix(qp_named(ps, QL_CONST, &N, E->span), T, E, NULL); }
item(A) ::= FN IDENT(N) tparams(G) LP params(P) RP result(R) block(B).     { A = qp_fix(qp_named(ps, QL_FN, &N, B->span), P, R, B); A->d = G; }
item(A) ::= KERNEL IDENT(N) tparams(G) LP params(P) RP result(R) block(B). { A = qp_fix(qp_named(ps, QL_KERNEL, &N, B->span), P, R, B); A->d = G; }
item(A) ::= CALIBRATOR IDENT(N) cparams(P) LBRACE citems(L) RBRACE(E).        { A = qp_fix(L, P, NULL, NULL); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= CALIBRATOR IDENT(N) cparams(P) LBRACE citems(L) citem(I) RBRACE(E). { A = qp_fix(qp_add(ps, L, I), P, NULL, NULL); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= PATTERN IDENT(N) LBRACE pitems(L) RBRACE(E).                      { A = L; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= PATTERN IDENT(N) LBRACE pitems(L) pitem(I) RBRACE(E).             { A = qp_add(ps, L, I); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
/* transform smoothquant(alpha: f64 = 0.5) { match ...; scale(act: f64, weight: f64) -> f64 { ... } } */
item(A) ::= TRANSFORM IDENT(N) cparams(P) LBRACE pitems(L) RBRACE(E).          { A = qp_fix(L, P, NULL, NULL); L->kind = QL_TRANSFORM; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= TRANSFORM IDENT(N) cparams(P) LBRACE pitems(L) pitem(I) RBRACE(E). { A = qp_fix(qp_add(ps, L, I), P, NULL, NULL); L->kind = QL_TRANSFORM; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= AFFINE IDENT(N) affargs(L) affwhere(W) ARROW affresult(R) affbody(B). { A = qp_fix(L, R, W, B); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, R->span); }
item(A) ::= RECIPE IDENT(N) LBRACE ritems(L) RBRACE(E).                       { A = L; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= RECIPE IDENT(N) LBRACE ritems(L) ritem(I) RBRACE(E).              { A = qp_add(ps, L, I); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
/* recipe int8_best : int8 { ... }: the settings of int8 but those it writes (compiler/check_items.c) */
item(A) ::= RECIPE IDENT(N) COLON IDENT(B) LBRACE ritems(L) RBRACE(E).          { A = qp_fix(L, qp_tok(ps, QL_NAME, &B), NULL, NULL); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }
item(A) ::= RECIPE IDENT(N) COLON IDENT(B) LBRACE ritems(L) ritem(I) RBRACE(E). { A = qp_fix(qp_add(ps, L, I), qp_tok(ps, QL_NAME, &B), NULL, NULL); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E.span); }

/* <T: u8 | i8, ...>: the type parameters of a generic fn or kernel, each with its finite set */
tparams(A) ::= .                                      { A = NULL; }
tparams(A) ::= LT tplist(L) GT.                       { A = L; }
tplist(A) ::= tparam(P).                              { A = qp_add(ps, qp_node(ps, QL_TPARAMS, P->span), P); }
tplist(A) ::= tplist(L) COMMA tparam(P).              { A = qp_add(ps, L, P); }
tparam(A) ::= IDENT(N) COLON scalar(T).               { A = qp_add(ps, qp_named(ps, QL_TPARAM, &N, T->span), T); }
tparam(A) ::= tparam(L) PIPE scalar(T).               { A = qp_add(ps, L, T); }

typeopt(A) ::= .                                      { A = NULL; }
typeopt(A) ::= COLON type(T).                         { A = T; }
result(A) ::= .                                       { A = NULL; }
result(A) ::= ARROW type(T).                          { A = T; }

params(A) ::= .                                       { A = qp_node(ps, QL_PARAMS, (ql_span){0}); }
params(A) ::= plist(L).                               { A = L; }
params(A) ::= plist(L) COMMA.                         { A = L; }
plist(A) ::= param(P).                                { A = qp_add(ps, qp_node(ps, QL_PARAMS, P->span), P); }
plist(A) ::= plist(L) COMMA param(P).                 { A = qp_add(ps, L, P); }
param(A) ::= IDENT(N) COLON type(T).                  { A = qp_fix(qp_named(ps, QL_PARAM, &N, T->span), T, NULL, NULL); }
param(A) ::= IDENT(N) COLON type(T) ASSIGN expr(E).   { A = qp_fix(qp_named(ps, QL_PARAM, &N, E->span), T, E, NULL); }

/* -------------------------------------------------------------- types */

type(A) ::= scalar(T).                                { A = T; }
type(A) ::= IDENT(T).                                 { A = qp_tok(ps, QL_TYPE, &T); } /* a type parameter */
/* i4, u4: what a recipe setting stores (weight = i4 ...); the checker says they are no value type */
type(A) ::= I4(T).                                    { A = qp_tok(ps, QL_TYPE, &T); }
type(A) ::= U4(T).                                    { A = qp_tok(ps, QL_TYPE, &T); }
type(A) ::= QTYPE(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
type(A) ::= QPARAMS(T).                               { A = qp_tok(ps, QL_TYPE, &T); }
type(A) ::= type(E) LB RB(R).                         { A = qp_type_nest(ps, qp_fix(qp_node(ps, QL_TYPE_ARRAY, ql_span_join(E->span, R.span)), E, NULL, NULL)); }
/* T[n]: a state array's size; tensor<T>[.., M, K]: a kernel parameter's declared shape */
type(A) ::= type(E) LB dims(L) RB(R).                 { A = qp_type_dims(ps, E, L, R.span); }
dims(A) ::= dim(D).                                   { A = qp_add(ps, qp_node(ps, QL_TYPE_TENSOR, D->span), D); }
dims(A) ::= dims(L) COMMA dim(D).                     { A = qp_add(ps, L, D); }
dim(A) ::= expr(E).                                   { A = E; }
dim(A) ::= DOTDOT(T).                                 { A = qp_node(ps, QL_DIM_REST, T.span); }
type(A) ::= TENSOR(T) LT type(E) GT(R).               { A = qp_type_nest(ps, qp_fix(qp_node(ps, QL_TYPE_TENSOR, ql_span_join(T.span, R.span)), E, NULL, NULL)); }
type(A) ::= HISTOGRAM(T) LP args(L) RP(R).            { A = L; L->kind = QL_TYPE_HIST; L->span = ql_span_join(T.span, R.span); }
type(A) ::= GRAM(T).                                  { A = qp_tok(ps, QL_TYPE, &T); }

scalar(A) ::= BOOL(T).                                { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= I8(T).                                  { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= U8(T).                                  { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= I16(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= U16(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= I32(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= I64(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= F32(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }
scalar(A) ::= F64(T).                                 { A = qp_tok(ps, QL_TYPE, &T); }

/* --------------------------------------------------------- calibrator */

cparams(A) ::= .                                      { A = qp_node(ps, QL_PARAMS, (ql_span){0}); }
cparams(A) ::= LP params(P) RP.                       { A = P; }

citems(A) ::= .                                       { A = qp_node(ps, QL_CALIBRATOR, (ql_span){0}); }
citems(A) ::= citems(L) SEMI.                         { A = L; }
citems(A) ::= citems(L) citem(I) SEMI.                { A = qp_add(ps, L, I); }
citems(A) ::= citems(L) error.                        { A = L; }

citem(A) ::= STATE IDENT(N) COLON type(T).            { A = qp_fix(qp_named(ps, QL_STATE, &N, T->span), T, NULL, NULL); }
citem(A) ::= STATE IDENT(N) COLON type(T) ASSIGN expr(E). { A = qp_fix(qp_named(ps, QL_STATE, &N, E->span), T, E, NULL); }
citem(A) ::= OBSERVE(K) LP params(P) RP block(B).     { A = qp_fix(qp_node(ps, QL_OBSERVE, ql_span_join(K.span, B->span)), P, NULL, B); }
citem(A) ::= MERGE(K) LP IDENT(N) RP block(B).        { A = qp_fix(qp_named(ps, QL_MERGE, &N, K.span), NULL, NULL, B); A->span = ql_span_join(K.span, B->span); }
citem(A) ::= SOLVE(K) LP params(P) RP ARROW type(T) block(B). { A = qp_fix(qp_node(ps, QL_SOLVE, ql_span_join(K.span, B->span)), P, T, B); }
/* a layer calibrator's solve writes the weight it is given and returns nothing */
citem(A) ::= SOLVE(K) LP params(P) RP block(B).       { A = qp_fix(qp_node(ps, QL_SOLVE, ql_span_join(K.span, B->span)), P, NULL, B); }

/* ------------------------------------------------------------ pattern */

pitems(A) ::= .                                       { A = qp_node(ps, QL_PATTERN, (ql_span){0}); }
pitems(A) ::= pitems(L) SEMI.                         { A = L; }
pitems(A) ::= pitems(L) pitem(I) SEMI.                { A = qp_add(ps, L, I); }
pitems(A) ::= pitems(L) error.                        { A = L; }

pitem(A) ::= MATCH(K) bind(B).                        { A = qp_add(ps, qp_node(ps, QL_MATCH, K.span), B); }
pitem(A) ::= MATCH(K) LBRACE binds(L) RBRACE(E).      { A = L; L->span = ql_span_join(K.span, E.span); }
pitem(A) ::= MATCH(K) LBRACE binds(L) bind(B) RBRACE(E). { A = qp_add(ps, L, B); L->span = ql_span_join(K.span, E.span); }
pitem(A) ::= WHERE(K) expr(E).                        { A = qp_fix(qp_node(ps, QL_WHERE, ql_span_join(K.span, E->span)), E, NULL, NULL); }
/* numerics tflite: the recipe numerics the pattern's kernels implement */
pitem(A) ::= IDENT(K) IDENT(V).                       { A = qp_fix(qp_named(ps, QL_SETTING, &K, ql_span_join(K.span, V.span)), qp_tok(ps, QL_NAME, &V), NULL, NULL); }
/* priority 3: tried before patterns of lower priority (default: its number of nodes) */
pitem(A) ::= IDENT(K) INT(V).                         { A = qp_fix(qp_named(ps, QL_SETTING, &K, ql_span_join(K.span, V.span)), qp_tok(ps, QL_INT, &V), NULL, NULL); }
pitem(A) ::= QUANTIZE(K) roles(L).                    { A = ql_node_extend(L, K.span); }
/* a transform's function: scale(act: f64, weight: f64) -> f64 { ... } */
pitem(A) ::= IDENT(N) LP params(P) RP result(R) block(B). { A = qp_fix(qp_named(ps, QL_FN, &N, B->span), P, R, B); }
pitem(A) ::= LOWER(K) IDENT(N) ASSIGN postfix(E).     { A = qp_fix(qp_named(ps, QL_LOWER, &N, K.span), E, NULL, NULL); A->span = ql_span_join(K.span, E->span); }

binds(A) ::= .                                        { A = qp_node(ps, QL_MATCH, (ql_span){0}); }
binds(A) ::= binds(L) SEMI.                           { A = L; }
binds(A) ::= binds(L) bind(B) SEMI.                   { A = qp_add(ps, L, B); }

bind(A) ::= IDENT(N) ASSIGN alts(L).                  { A = L; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, L->span); }
bind(A) ::= IDENT(N) ASSIGN alts(L) WHERE expr(E).    { A = qp_fix(L, E, NULL, NULL); L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, E->span); }
alts(A) ::= opcall(O).                                { A = qp_add(ps, qp_node(ps, QL_BIND, O->span), O); }
alts(A) ::= alts(L) PIPE opcall(O).                   { A = qp_add(ps, L, O); }
opcall(A) ::= IDENT(N) LP opargs(L) RP(R).            { A = L; L->kind = QL_OPCALL; L->name = N.s; L->name_span = N.span; L->span = ql_span_join(N.span, R.span); }

opargs(A) ::= .                                       { A = qp_node(ps, QL_OPCALL, (ql_span){0}); }
opargs(A) ::= oplist(L).                              { A = L; }
oplist(A) ::= oparg(O).                               { A = qp_add(ps, qp_node(ps, QL_OPCALL, O->span), O); }
oplist(A) ::= oplist(L) COMMA oparg(O).               { A = qp_add(ps, L, O); }
oparg(A) ::= IDENT(N).                                { A = qp_named(ps, QL_OPARG, &N, N.span); }
oparg(A) ::= IDENT(N) QUESTION(Q).                    { A = qp_named(ps, QL_OPARG, &N, Q.span); A->flag = 1; }

roles(A) ::= role(R).                                 { A = qp_add(ps, qp_node(ps, QL_QUANTIZE, R->span), R); }
roles(A) ::= roles(L) COMMA role(R).                  { A = qp_add(ps, L, R); }
role(A) ::= IDENT(N) COLON expr(E).                   { A = qp_fix(qp_named(ps, QL_ROLE, &N, E->span), E, NULL, NULL); }

/* ------------------------------------------------------------- affine */

affargs(A) ::= .                                      { A = qp_node(ps, QL_AFFINE, (ql_span){0}); }
affargs(A) ::= LP opargs(L) RP.                       { A = L; L->kind = QL_AFFINE; }
affresult(A) ::= SAME(K).                             { A = qp_node(ps, QL_AFF_SAME, K.span); }
affresult(A) ::= REQUANTIZE(K).                       { A = qp_node(ps, QL_AFF_REQUANTIZE, K.span); }
affresult(A) ::= FIXED(K) LP expr(S) COMMA expr(Z) RP(R). { A = qp_fix(qp_node(ps, QL_AFF_FIXED, ql_span_join(K.span, R.span)), S, Z, NULL); }
/* fixed(t => qparams(...)): the output's qparams for the recipe's type t */
affresult(A) ::= FIXED(K) LP IDENT(N) FATARROW expr(E) RP(R). { A = qp_fix(qp_named(ps, QL_AFF_FIXED, &N, ql_span_join(K.span, R.span)), E, NULL, NULL); }
affwhere(A) ::= .                                     { A = NULL; }
affwhere(A) ::= WHERE expr(E).                        { A = E; }
affbody(A) ::= .                                      { A = NULL; }
affbody(A) ::= block(B).                              { A = B; }
/* in f32: the op runs on the real values between Q/DQ borders */
affbody(A) ::= IN(K) F32(T).                          { A = qp_node(ps, QL_AFF_F32, ql_span_join(K.span, T.span)); }
affbody(A) ::= TABLE(K) LP IDENT(N) FATARROW expr(E) RP(R). { A = qp_fix(qp_named(ps, QL_TABLE, &N, K.span), E, NULL, NULL); A->span = ql_span_join(K.span, R.span); }

/* ------------------------------------------------------------- recipe */

ritems(A) ::= .                                       { A = qp_node(ps, QL_RECIPE, (ql_span){0}); }
ritems(A) ::= ritems(L) SEMI.                         { A = L; }
ritems(A) ::= ritems(L) ritem(I) SEMI.                { A = qp_add(ps, L, I); }
ritems(A) ::= ritems(L) error.                        { A = L; }

ritem(A) ::= USE(K) names(L).                         { A = ql_node_extend(L, K.span); }
ritem(A) ::= IDENT(N) ASSIGN expr(E).                 { A = qp_fix(qp_named(ps, QL_SETTING, &N, E->span), E, NULL, NULL); }
ritem(A) ::= TRANSFORM(K) ASSIGN expr(E).             { A = qp_fix(qp_node(ps, QL_SETTING, ql_span_join(K.span, E->span)), E, NULL, NULL); A->name = "transform"; A->name_span = K.span; }
ritem(A) ::= IDENT(N) ASSIGN qspec(Q).                { A = qp_fix(qp_named(ps, QL_SETTING, &N, Q->span), Q, NULL, NULL); }
/* activation for LayerNormalization, "/enc/Softmax" = u16 ...: the type of the values those ops
 * (op types) or nodes (names) produce */
ritem(A) ::= IDENT(N) FOR targets(L) ASSIGN qspec(Q).  { A = qp_fix(qp_named(ps, QL_SETTING, &N, Q->span), Q, L, NULL); }
targets(A) ::= target(T).                             { A = qp_add(ps, qp_node(ps, QL_USE, T->span), T); }
targets(A) ::= targets(L) COMMA target(T).            { A = qp_add(ps, L, T); }
target(A) ::= IDENT(N).                               { A = qp_tok(ps, QL_NAME, &N); }
target(A) ::= STRING(S).                              { A = qp_tok(ps, QL_STR, &S); }

names(A) ::= IDENT(N).                                { A = qp_add(ps, qp_node(ps, QL_USE, N.span), qp_tok(ps, QL_NAME, &N)); }
names(A) ::= names(L) COMMA IDENT(N).                 { A = qp_add(ps, L, qp_tok(ps, QL_NAME, &N)); }

/* i8 symmetric narrow per_channel by minmax()  |  i32  |  f32 when sqnr < 20 */
qspec(A) ::= scalar(T) mods(M) byopt(B) whenopt(W).   { A = qp_fix(M, T, B, W); M->span = ql_span_join(T->span, M->span); }
/* i4 symmetric per_block by minmax(): 4-bit, packed two to a byte; only a setting stores them */
qspec(A) ::= I4(T) mods(M) byopt(B) whenopt(W).       { ql_node *t = qp_tok(ps, QL_TYPE, &T); A = qp_fix(M, t, B, W); M->span = ql_span_join(t->span, M->span); }
qspec(A) ::= U4(T) mods(M) byopt(B) whenopt(W).       { ql_node *t = qp_tok(ps, QL_TYPE, &T); A = qp_fix(M, t, B, W); M->span = ql_span_join(t->span, M->span); }
/* a name where the type goes (i4 symmetric ..., u7 by ...): parsed so the checker can say it is no type */
qspec(A) ::= IDENT(T) IDENT(N) mods(M) byopt(B) whenopt(W). { A = qp_fix(qp_add(ps, M, qp_tok(ps, QL_NAME, &N)), qp_tok(ps, QL_TYPE, &T), B, W); M->span = T.span; }
qspec(A) ::= IDENT(T) BY postfix(B) whenopt(W).       { A = qp_fix(qp_node(ps, QL_QSPEC, T.span), qp_tok(ps, QL_TYPE, &T), B, W); }
/* u16 then f32 when sqnr < 20: the fallback's steps, a type alone each before the last (the
 * checker says which): the last spec, its d the steps before it in order */
qspec(A) ::= scalar(T) mods(M) THEN qspec(Q).         { M->span = ql_span_join(T->span, M->span); A = qp_step(ps, qp_fix(M, T, NULL, NULL), Q); }
qspec(A) ::= I4(T) mods(M) THEN qspec(Q).             { ql_node *t = qp_tok(ps, QL_TYPE, &T); M->span = ql_span_join(t->span, M->span); A = qp_step(ps, qp_fix(M, t, NULL, NULL), Q); }
qspec(A) ::= U4(T) mods(M) THEN qspec(Q).             { ql_node *t = qp_tok(ps, QL_TYPE, &T); M->span = ql_span_join(t->span, M->span); A = qp_step(ps, qp_fix(M, t, NULL, NULL), Q); }
qspec(A) ::= IDENT(T) THEN qspec(Q).                  { ql_node *t = qp_tok(ps, QL_TYPE, &T); A = qp_step(ps, qp_fix(qp_node(ps, QL_QSPEC, T.span), t, NULL, NULL), Q); }
mods(A) ::= .                                         { A = qp_node(ps, QL_QSPEC, (ql_span){0}); }
mods(A) ::= mods(L) IDENT(N).                         { A = qp_add(ps, L, qp_tok(ps, QL_NAME, &N)); }
byopt(A) ::= .                                        { A = NULL; }
byopt(A) ::= BY postfix(E).                           { A = E; }
whenopt(A) ::= .                                      { A = NULL; }
whenopt(A) ::= WHEN expr(E).                          { A = E; }

/* --------------------------------------------------------- statements */

block(A) ::= LBRACE(L) stmts(S) RBRACE(R).            { A = qp_block(S); S->span = ql_span_join(L.span, R.span); }
block(A) ::= LBRACE(L) stmts(S) stmt(T) RBRACE(R).    { A = qp_block(qp_add(ps, S, T)); S->span = ql_span_join(L.span, R.span); }

stmts(A) ::= .                                        { A = qp_node(ps, QL_BLOCK, (ql_span){0}); }
stmts(A) ::= stmts(L) SEMI.                           { A = L; }
stmts(A) ::= stmts(L) stmt(S) SEMI.                   { A = qp_add(ps, L, S); }
stmts(A) ::= stmts(L) error.                          { A = L; }

stmt(A) ::= LET(K) IDENT(N) typeopt(T) ASSIGN expr(E). { A = qp_fix(qp_named(ps, QL_LET, &N, K.span), T, E, NULL); A->span = ql_span_join(K.span, E->span); }
stmt(A) ::= VAR(K) IDENT(N) typeopt(T) ASSIGN expr(E). { A = qp_fix(qp_named(ps, QL_LET, &N, K.span), T, E, NULL); A->span = ql_span_join(K.span, E->span); A->flag = 1; }
stmt(A) ::= expr(E).                                  { A = qp_fix(qp_node(ps, QL_EXPR_STMT, E->span), E, NULL, NULL); }
stmt(A) ::= expr(L) assignop(O) expr(R).              { A = qp_fix(qp_node(ps, QL_ASSIGN, ql_span_join(L->span, R->span)), L, R, NULL); A->op = O->op; }
stmt(A) ::= ifstmt(S).                                { A = S; }
stmt(A) ::= FOR(K) IDENT(N) IN expr(F) DOTDOT expr(T) block(B). { A = qp_fix(qp_named(ps, QL_FOR, &N, K.span), F, T, B); A->span = ql_span_join(K.span, B->span); A = qp_stmt_nest(ps, A); }
stmt(A) ::= WHILE(K) expr(C) block(B).                { A = qp_stmt_nest(ps, qp_fix(qp_node(ps, QL_WHILE, ql_span_join(K.span, B->span)), C, NULL, B)); }
stmt(A) ::= RETURN(K).                                { A = qp_node(ps, QL_RETURN, K.span); }
stmt(A) ::= RETURN(K) expr(E).                        { A = qp_fix(qp_node(ps, QL_RETURN, ql_span_join(K.span, E->span)), E, NULL, NULL); }
/* elementwise a in acc along axis -> y { channel c { lets } value }: an epilogue's
 * element-wise form (compiler/elementwise.c turns it into loops) */
stmt(A) ::= ELEMENTWISE(K) IDENT(E) IN IDENT(X) ALONG expr(AX) ARROW IDENT(Y) LBRACE semis CHANNEL IDENT(C) block(B) SEMI semis expr(V) semis RBRACE(R).
    { A = qp_elementwise(ps, &K, &E, &X, AX, &Y, &C, B, V, &R); }
stmt(A) ::= BREAK(K).                                 { A = qp_node(ps, QL_BREAK, K.span); }
stmt(A) ::= CONTINUE(K).                              { A = qp_node(ps, QL_CONTINUE, K.span); }

semis ::= .
semis ::= semis SEMI.

assignop(A) ::= ASSIGN(T).                            { A = qp_tok(ps, QL_NAME, &T); }
assignop(A) ::= PLUSEQ(T).                            { A = qp_tok(ps, QL_NAME, &T); }
assignop(A) ::= MINUSEQ(T).                           { A = qp_tok(ps, QL_NAME, &T); }
assignop(A) ::= STAREQ(T).                            { A = qp_tok(ps, QL_NAME, &T); }
assignop(A) ::= SLASHEQ(T).                           { A = qp_tok(ps, QL_NAME, &T); }

/* 'else' after a newline: the '}' before it ended the if. Said plainly, and the
 * else's block is consumed so that no error follows from it. */
stmt(A) ::= ELSE(K) block(B).                         { A = B; ql_error(ps->diags, K.span, "'else' must be on the same line as the '}' that ends the if"); }
stmt(A) ::= ELSE(K) ifstmt(B).                        { A = B; ql_error(ps->diags, K.span, "'else' must be on the same line as the '}' that ends the if"); }

ifstmt(A) ::= IF(K) expr(C) block(B).                 { A = qp_stmt_nest(ps, qp_fix(qp_node(ps, QL_IF, ql_span_join(K.span, B->span)), C, B, NULL)); }
ifstmt(A) ::= IF(K) expr(C) block(B) ELSE block(E).   { A = qp_stmt_nest(ps, qp_fix(qp_node(ps, QL_IF, ql_span_join(K.span, E->span)), C, B, E)); }
ifstmt(A) ::= IF(K) expr(C) block(B) ELSE ifstmt(E).  { A = qp_stmt_nest(ps, qp_fix(qp_node(ps, QL_IF, ql_span_join(K.span, E->span)), C, B, E)); }

/* -------------------------------------------------------- expressions */

expr(A) ::= expr(L) OR(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) AND(O) expr(R).                   { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= NOT(O) expr(E).                           { A = qp_un(ps, &O, E); }
expr(A) ::= expr(L) EQ(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) NE(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) LT(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) LE(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) GT(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) GE(O) expr(R).                    { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) PIPE(O) expr(R).                  { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) CARET(O) expr(R).                 { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) AMP(O) expr(R).                   { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) SHL(O) expr(R).                   { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) SHR(O) expr(R).                   { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) PLUS(O) expr(R).                  { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) MINUS(O) expr(R).                 { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) STAR(O) expr(R).                  { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) SLASH(O) expr(R).                 { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= expr(L) PERCENT(O) expr(R).               { A = qp_bin(ps, O.kind, L, R); }
expr(A) ::= MINUS(O) expr(E). [TILDE]                 { A = qp_un(ps, &O, E); }
expr(A) ::= TILDE(O) expr(E).                         { A = qp_un(ps, &O, E); }
expr(A) ::= postfix(E).                               { A = E; }

postfix(A) ::= primary(E).                            { A = E; }
postfix(A) ::= postfix(F) LP args(L) RP(R).           { L->kind = QL_CALL; L->span = ql_span_join(F->span, R.span); A = qp_nest(ps, qp_fix(L, F, NULL, NULL)); }
postfix(A) ::= postfix(F) LB exprs(L) RB(R).          { L->kind = QL_INDEX; L->span = ql_span_join(F->span, R.span); A = qp_nest(ps, qp_fix(L, F, NULL, NULL)); }
postfix(A) ::= postfix(F) DOT IDENT(N).               { A = qp_nest(ps, qp_fix(qp_named(ps, QL_FIELD, &N, F->span), F, NULL, NULL)); A->span = ql_span_join(F->span, N.span); }

primary(A) ::= IDENT(T).                              { A = qp_tok(ps, QL_NAME, &T); }
/* a generic's instance: k<i8>(...) (TLT: a '<' right after the name, see lexer.re) */
primary(A) ::= IDENT(T) TLT targs(L) GT(R).           { A = qp_tok(ps, QL_NAME, &T); A->d = L; A->span = ql_span_join(T.span, R.span); }
targs(A) ::= type(T).                                 { A = qp_add(ps, qp_node(ps, QL_TARGS, T->span), T); }
targs(A) ::= targs(L) COMMA type(T).                  { A = qp_add(ps, L, T); }
primary(A) ::= INT(T).                                { A = qp_tok(ps, QL_INT, &T); }
primary(A) ::= FLOAT(T).                              { A = qp_tok(ps, QL_FLOAT, &T); }
primary(A) ::= STRING(T).                             { A = qp_tok(ps, QL_STR, &T); }
primary(A) ::= TRUE(T).                               { A = qp_node(ps, QL_BOOL, T.span); A->ival = 1; }
primary(A) ::= FALSE(T).                              { A = qp_node(ps, QL_BOOL, T.span); }
primary(A) ::= LP expr(E) RP.                         { A = E; }
primary(A) ::= QPARAMS(K) LP args(L) RP(R).           { L->kind = QL_CALL; L->span = ql_span_join(K.span, R.span); ql_node *f = qp_tok(ps, QL_NAME, &K); f->name = "qparams"; A = qp_nest(ps, qp_fix(L, f, NULL, NULL)); }
primary(A) ::= CONST(K) LP args(L) RP(R).             { L->kind = QL_CALL; L->span = ql_span_join(K.span, R.span); ql_node *f = qp_tok(ps, QL_NAME, &K); f->name = "const"; A = qp_nest(ps, qp_fix(L, f, NULL, NULL)); }
primary(A) ::= scalar(T) LP expr(E) RP(R).            { A = qp_nest(ps, qp_fix(qp_node(ps, QL_CAST, ql_span_join(T->span, R.span)), T, E, NULL)); }
primary(A) ::= SAT(K) LT scalar(T) GT LP expr(E) RP(R). { A = qp_nest(ps, qp_fix(qp_node(ps, QL_SAT, ql_span_join(K.span, R.span)), T, E, NULL)); }
primary(A) ::= SAT(K) LT IDENT(T) GT LP expr(E) RP(R). { A = qp_nest(ps, qp_fix(qp_node(ps, QL_SAT, ql_span_join(K.span, R.span)), qp_tok(ps, QL_TYPE, &T), E, NULL)); }

args(A) ::= .                                         { A = qp_node(ps, QL_CALL, (ql_span){0}); }
args(A) ::= alist(L).                                 { A = L; }
args(A) ::= alist(L) COMMA.                           { A = L; }
alist(A) ::= arg(E).                                  { A = qp_add(ps, qp_node(ps, QL_CALL, E->span), E); }
alist(A) ::= alist(L) COMMA arg(E).                   { A = qp_add(ps, L, E); }
arg(A) ::= expr(E).                                   { A = E; }
arg(A) ::= IDENT(N) ASSIGN expr(E).                   { A = qp_fix(qp_named(ps, QL_NAMED_ARG, &N, E->span), E, NULL, NULL); }

exprs(A) ::= expr(E).                                 { A = qp_add(ps, qp_node(ps, QL_INDEX, E->span), E); }
exprs(A) ::= exprs(L) COMMA expr(E).                  { A = qp_add(ps, L, E); }

%code {
/* The terminals the parser could shift next, by simulating its reductions
 * from the current stack for each candidate (Lemon's tables alone hide them
 * behind default reductions). Fills codes[]; returns the count. */
int qp_expected(void *parser, int *codes, int max)
{
    yyParser *p = parser;
    int n = 0, depth = (int)(p->yytos - p->yystack) + 1;
    YYACTIONTYPE *st = malloc(sizeof *st * (size_t)(depth + 64));
    if (!st)
        return 0;
    for (int tok = 1; tok < YYNTOKEN && n < max; tok++) {
        if (tok == YYERRORSYMBOL)
            continue;
        int sp = depth - 1;
        for (int i = 0; i < depth; i++)
            st[i] = p->yystack[i].stateno;
        YYACTIONTYPE act = st[sp];
        for (int steps = 0; steps < 10000; steps++) {
            act = yy_find_shift_action((YYCODETYPE)tok, act);
            if (act >= YY_MIN_REDUCE && act <= YY_MAX_REDUCE) {
                int rule = act - YY_MIN_REDUCE;
                sp += yyRuleInfoNRhs[rule];
                if (sp < 0 || sp + 1 >= depth + 64)
                    break;
                act = yy_find_reduce_action(st[sp], (YYCODETYPE)yyRuleInfoLhs[rule]);
                st[++sp] = act;
                continue;
            }
            if (act <= YY_MAX_SHIFTREDUCE || act == YY_ACCEPT_ACTION)
                codes[n++] = tok;
            break;
        }
    }
    free(st);
    return n;
}
}
