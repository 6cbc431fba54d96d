/* The QRL abstract syntax tree. Every node has the same shape: a kind, a
 * span, up to four fixed children (a..d, their meaning per kind below) and a
 * list (kids). All nodes live in the compilation's arena. The checker fills
 * `type` and `sym`. */
#ifndef QL_AST_H
#define QL_AST_H

#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "source.h"
#include "token.h"

/* X(kind, "dump name") -- children per kind:
 *   MODULE       kids = items
 *   IMPORT       name = path
 *   CONST        name; a = type?; b = value
 *   FN, KERNEL   name; a = PARAMS; b = result type?; c = BLOCK; d = TPARAMS? (a generic)
 *   TPARAMS      kids = TPARAM
 *   TPARAM       name; kids = TYPE (the scalar types it ranges over)
 *   PARAMS       kids = PARAM
 *   PARAM        name; a = type; b = default?
 *   TYPE         op = scalar/qtype/qparams token kind; or op = IDENT, name = a type parameter
 *   TYPE_ARRAY   a = element type; b = length (state arrays) or NULL (a view)
 *   TYPE_TENSOR  a = element type; flag = 1 when a shape is declared ([.., M, 4]): kids = its dims,
 *                each a NAME, an INT or a DIM_REST ('..', the leading dims)
 *   TYPE_HIST    kids = constructor arguments
 *   CALIBRATOR   name; a = PARAMS; kids = STATE, OBSERVE, MERGE, SOLVE
 *   STATE        name; a = type; b = initial value?
 *   OBSERVE      a = PARAMS; c = BLOCK
 *   MERGE        name = the other state; c = BLOCK
 *   SOLVE        a = PARAMS; b = result type; c = BLOCK
 *   PATTERN      name; kids = MATCH, WHERE, QUANTIZE, LOWER
 *   TRANSFORM    name; a = PARAMS; kids = MATCH, WHERE, FN (its scale function)
 *   MATCH        kids = BIND
 *   BIND         name = bound value; kids = OPCALL alternatives; a = where-predicate?
 *   OPCALL       name = ONNX op; kids = OPARG
 *   OPARG        name ("_" = anything); flag = optional ('?')
 *   WHERE        a = predicate
 *   QUANTIZE     kids = ROLE
 *   ROLE         name = value; a = role expression
 *   LOWER        name = result value; a = CALL
 *   AFFINE       name = ONNX op; kids = OPARG (maybe none); a = result; b = where predicate?;
 *                c = BLOCK, TABLE or AFF_F32?
 *   AFF_SAME, AFF_REQUANTIZE, AFF_F32   (no children)
 *   AFF_FIXED    a = scale; b = zero point; or name = qtype variable; a = qparams expression
 *   TABLE        name = lambda variable; a = body expression
 *   RECIPE       name; kids = USE, SETTING; a = NAME of the recipe it derives from (recipe x : base)?
 *   USE          kids = NAME
 *   SETTING      name; a = value (QSPEC or an expression); b = USE of the ops (NAME) and nodes (STR)
 *                it applies to (activation for ...)?
 *   QSPEC        a = TYPE; kids = NAME modifiers; b = by-calibrator?; c = when-condition?; d = the steps
 *                before it (fallback = u16 then f32 when ...: QSPECs of a type and modifiers, chained
 *                by d, first step first)?
 *   BLOCK        kids = statements
 *   LET          name; a = type?; b = value; flag = 1 for var (mutable)
 *   ASSIGN       op = ASSIGN/PLUSEQ/...; a = target; b = value
 *   EXPR_STMT    a = expression
 *   IF           a = condition; b = BLOCK; c = else (BLOCK or IF)?
 *   FOR          name; a = from; b = to (exclusive); c = BLOCK
 *   WHILE        a = condition; c = BLOCK
 *   RETURN       a = value?
 *   ELEMENTWISE  name = element variable; a = NAME accumulator; b = channel axis; c = channel BLOCK;
 *                d = element value; kids = NAME output, NAME channel variable
 *   BREAK, CONTINUE
 *   INT          ival;  FLOAT fval;  BOOL ival;  STR name (+ slen)
 *   NAME         name; d = TARGS? (a generic's instance: k<i8>)
 *   TARGS        kids = TYPE
 *   UNARY        op; a
 *   BINARY       op; a; b
 *   CALL         a = callee; kids = arguments (expressions or NAMED_ARG)
 *   NAMED_ARG    name; a = value
 *   INDEX        a = indexed; kids = indices
 *   FIELD        a = object; name
 *   CAST         a = TYPE; b = value        (i32(x): wrapping/truncating conversion)
 *   SAT          a = TYPE; b = value        (sat<i8>(x): saturating conversion) */
#define QL_NODE_KINDS(X)                                                                              \
    X(MODULE, "module") X(IMPORT, "import") X(CONST, "const") X(FN, "fn") X(KERNEL, "kernel")       \
    X(TPARAMS, "tparams") X(TPARAM, "tparam") X(TARGS, "targs") X(PARAMS, "params") X(PARAM, "param") X(TYPE, "type") X(TYPE_ARRAY, "array")                     \
    X(TYPE_TENSOR, "tensor") X(TYPE_HIST, "histogram") X(CALIBRATOR, "calibrator") X(STATE, "state") \
    X(OBSERVE, "observe") X(MERGE, "merge") X(SOLVE, "solve") X(PATTERN, "pattern") X(MATCH, "match") \
    X(BIND, "bind") X(OPCALL, "op") X(OPARG, "oparg") X(WHERE, "where") X(QUANTIZE, "quantize")      \
    X(ROLE, "role") X(LOWER, "lower") X(AFFINE, "affine") X(AFF_SAME, "same")                         \
    X(AFF_REQUANTIZE, "requantize") X(AFF_FIXED, "fixed") X(AFF_F32, "in") X(TABLE, "table") X(RECIPE, "recipe")      \
    X(USE, "use") X(SETTING, "setting") X(QSPEC, "qspec") X(BLOCK, "block") X(LET, "let")            \
    X(ASSIGN, "assign") X(EXPR_STMT, "expr") X(IF, "if") X(FOR, "for") X(WHILE, "while")             \
    X(RETURN, "return") X(BREAK, "break") X(CONTINUE, "continue") X(INT, "int") X(FLOAT, "float")    \
    X(BOOL, "bool") X(STR, "str") X(NAME, "name") X(UNARY, "unary") X(BINARY, "binary")              \
    X(CALL, "call") X(NAMED_ARG, "named") X(INDEX, "index") X(FIELD, "field") X(CAST, "cast")        \
    X(SAT, "sat") X(ELEMENTWISE, "elementwise") X(TRANSFORM, "transform") X(DIM_REST, "rest")

typedef enum ql_kind {
#define QL_KIND_ENUM(k, s) QL_##k,
    QL_NODE_KINDS(QL_KIND_ENUM)
#undef QL_KIND_ENUM
    QL_KIND_COUNT
} ql_kind;

typedef struct ql_node ql_node;
struct ql_node {
    ql_kind kind;
    ql_span span;
    ql_span name_span; /* named nodes: just the name (for errors about a declaration) */
    const char *name;
    ql_tok op;
    int flag;
    int slen;
    uint64_t ival;
    double fval;
    ql_node *a, *b, *c, *d;
    ql_node **kids;
    int nkids, capkids;
    int depth; /* nesting of expressions, types and statements, bounded by the parser */
    /* Filled by the checker. */
    const struct qc_type *type;
    void *sym;
};

ql_node *ql_node_new(ql_arena *ar, ql_kind kind, ql_span span);
/* Appends kid (ignored when NULL) to n's list; returns n. */
ql_node *ql_node_add(ql_arena *ar, ql_node *n, ql_node *kid);
/* Node from a token: NAME/INT/FLOAT/STR take its value. */
ql_node *ql_node_tok(ql_arena *ar, ql_kind kind, const ql_token *t);
ql_node *ql_node_bin(ql_arena *ar, ql_tok op, ql_node *a, ql_node *b);
ql_node *ql_node_un(ql_arena *ar, ql_tok op, ql_span sp, ql_node *a);
/* Widens n's span to cover sp; returns n. */
ql_node *ql_node_extend(ql_node *n, ql_span sp);
/* The parameter (an index into params' kids; params may be NULL) that argument i of a call binds:
 * i when positional, the parameter of its name when named (-1 when no parameter has it); *value
 * becomes the argument's expression. */
int ql_call_param(const ql_node *params, const ql_node *arg, int i, const ql_node **value);

const char *ql_kind_name(ql_kind k);
/* Indented text dump, one node per line with its line:col (golden files). */
void ql_ast_dump(const ql_node *n, FILE *f);

#endif
