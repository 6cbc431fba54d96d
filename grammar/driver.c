/* Drives the Lemon parser with the re2c lexer; the constructors the grammar's
 * actions call; syntax errors that say what was expected. */
#include "parse_int.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "../lang/lexer.h"
#include "grammar/qrl.h" /* Lemon's TK_ codes (generated into build/gen/grammar) */

void *qp_ParseAlloc(void *(*malloc_fn)(size_t));
void qp_ParseFree(void *p, void (*free_fn)(void *));
void qp_Parse(void *p, int major, ql_token minor, qp_state *ps);
int qp_expected(void *parser, int *codes, int max);

/* lang/ token kind -> Lemon code, and back. */
static const int to_lemon[QL_TOK_COUNT] = {
    [QL_TOK_EOF] = 0,
#define MAP(n, s) [QL_TOK_##n] = TK_##n,
    QL_TOKENS(MAP)
#undef MAP
};

static ql_tok from_lemon(int code)
{
    for (int t = 0; t < QL_TOK_COUNT; t++)
        if (to_lemon[t] == code)
            return (ql_tok)t;
    return QL_TOK_EOF;
}

ql_node *qp_node(qp_state *ps, ql_kind k, ql_span sp)
{
    return ql_node_new(ps->arena, k, sp);
}

ql_node *qp_tok(qp_state *ps, ql_kind k, const ql_token *t)
{
    return ql_node_tok(ps->arena, k, t);
}

ql_node *qp_named(qp_state *ps, ql_kind k, const ql_token *name, ql_span sp)
{
    ql_node *n = ql_node_new(ps->arena, k, ql_span_join(name->span, sp));
    n->name = name->s;
    n->name_span = name->span;
    return n;
}

ql_node *qp_fix(ql_node *n, ql_node *a, ql_node *b, ql_node *c)
{
    if (a)
        n->a = a;
    if (b)
        n->b = b;
    if (c)
        n->c = c;
    return n;
}

ql_node *qp_step(qp_state *ps, ql_node *step, ql_node *rest)
{
    (void)ps;
    step->d = rest->d; /* the steps parsed so far follow this one */
    rest->d = step;
    rest->span = ql_span_join(step->span, rest->span);
    return rest;
}

ql_node *qp_add(qp_state *ps, ql_node *list, ql_node *kid)
{
    return ql_node_add(ps->arena, list, kid);
}

/* Expressions, types and statements nest at most QP_MAX_DEPTH deep: deeper
 * ones are reported once and cut (a part stands for the whole), so no later
 * pass recurses deeper. what: "expression", "type" or "statement". */
static int too_deep(qp_state *ps, int depth, ql_span sp, const char *what)
{
    if (depth <= QP_MAX_DEPTH)
        return 0;
    if (!ps->too_deep)
        ql_error(ps->diags, sp, "%s nested more than %d levels deep", what, QP_MAX_DEPTH);
    ps->too_deep = 1;
    return 1;
}

static int depth_of(const ql_node *n)
{
    return n ? n->depth : 0;
}

ql_node *qp_bin(qp_state *ps, ql_tok op, ql_node *a, ql_node *b)
{
    int d = (depth_of(a) > depth_of(b) ? depth_of(a) : depth_of(b)) + 1;
    if (too_deep(ps, d, ql_span_join(a->span, b->span), "expression"))
        return a->depth < b->depth ? a : b;
    ql_node *n = ql_node_bin(ps->arena, op, a, b);
    n->depth = d;
    return n;
}

ql_node *qp_un(qp_state *ps, const ql_token *op, ql_node *a)
{
    if (too_deep(ps, a->depth + 1, ql_span_join(op->span, a->span), "expression"))
        return a;
    ql_node *n = ql_node_un(ps->arena, op->kind, op->span, a);
    n->depth = a->depth + 1;
    return n;
}

ql_node *qp_nest(qp_state *ps, ql_node *n)
{
    int d = depth_of(n->a);
    if (depth_of(n->b) > d)
        d = depth_of(n->b);
    for (int i = 0; i < n->nkids; i++)
        if (n->kids[i]->depth > d)
            d = n->kids[i]->depth;
    if (too_deep(ps, d + 1, n->span, "expression")) {
        /* Keep the node but drop its nested parts. */
        n->a = n->kind == QL_CAST || n->kind == QL_SAT ? n->a : NULL;
        n->b = NULL;
        n->nkids = 0;
        if (n->kind == QL_FIELD || n->kind == QL_CALL || n->kind == QL_INDEX)
            n->kind = QL_NAME, n->name = "<error>";
        return n;
    }
    n->depth = d + 1;
    return n;
}

/* i64[][]..., tensor<tensor<...>>: each level holds the element type in a. */
ql_node *qp_type_nest(qp_state *ps, ql_node *n)
{
    int d = depth_of(n->a) + 1;
    if (too_deep(ps, d, n->span, "type"))
        return n->a; /* one level fewer */
    n->depth = d;
    return n;
}

/* E[dims]. On tensor<T> (written once), the dims are its declared shape (names, integers, '..');
 * on any other type one expression is an array's size, as before the shapes. */
ql_node *qp_type_dims(qp_state *ps, ql_node *e, ql_node *dims, ql_span end)
{
    ql_span sp = ql_span_join(e->span, end);
    if (e->kind == QL_TYPE_TENSOR && !e->flag) {
        e->kids = dims->kids, e->nkids = dims->nkids, e->capkids = dims->capkids;
        e->flag = 1;
        e->span = sp;
        return e;
    }
    ql_node *len = dims->kids[0];
    if (dims->nkids != 1 || len->kind == QL_DIM_REST)
        ql_error(ps->diags, dims->span, "only a tensor type takes a shape; an array type has one size, T[n]");
    return qp_type_nest(ps, qp_fix(qp_node(ps, QL_TYPE_ARRAY, sp), e, len->kind == QL_DIM_REST ? NULL : len, NULL));
}

/* A block is as deep as its deepest statement. */
ql_node *qp_block(ql_node *b)
{
    for (int i = 0; i < b->nkids; i++)
        if (b->kids[i]->depth > b->depth)
            b->depth = b->kids[i]->depth;
    return b;
}

ql_node *qp_elementwise(qp_state *ps, const ql_token *kw, const ql_token *elem, const ql_token *acc, ql_node *axis,
                        const ql_token *y, const ql_token *chan, ql_node *block, ql_node *value, const ql_token *end)
{
    ql_node *n = qp_named(ps, QL_ELEMENTWISE, elem, ql_span_join(kw->span, end->span));
    n->a = qp_tok(ps, QL_NAME, acc);
    n->b = axis;
    n->c = block;
    n->d = value;
    qp_add(ps, n, qp_tok(ps, QL_NAME, y));
    qp_add(ps, n, qp_tok(ps, QL_NAME, chan));
    n->span = ql_span_join(kw->span, end->span); /* qp_add widened it */
    /* as deep as a for holding the block and a statement of the value */
    int d = block->depth > value->depth ? block->depth : value->depth;
    if (too_deep(ps, d + 2, n->span, "statement")) {
        n->c = NULL;
        n->d = NULL;
        return n;
    }
    n->depth = d + 2;
    return n;
}

/* if, for, while: one level deeper than their blocks (an else-if chain nests
 * too: the if holds the next in c). */
ql_node *qp_stmt_nest(qp_state *ps, ql_node *n)
{
    int d = depth_of(n->c);
    if (n->kind == QL_IF && depth_of(n->b) > d)
        d = depth_of(n->b);
    if (too_deep(ps, d + 1, n->span, "statement")) {
        /* Keep the statement but drop its blocks. */
        if (n->kind == QL_IF)
            n->b = NULL;
        n->c = NULL;
        return n;
    }
    n->depth = d + 1;
    return n;
}

/* Tokens that can start an expression: listed together as "an expression". */
static int starts_expression(ql_tok t)
{
    switch (t) {
    case QL_TOK_IDENT: case QL_TOK_INT: case QL_TOK_FLOAT: case QL_TOK_STRING: case QL_TOK_LP:
    case QL_TOK_MINUS: case QL_TOK_TILDE: case QL_TOK_NOT: case QL_TOK_TRUE: case QL_TOK_FALSE:
    case QL_TOK_SAT: case QL_TOK_CONST: case QL_TOK_QPARAMS: case QL_TOK_BOOL: case QL_TOK_I8: case QL_TOK_U8:
    case QL_TOK_I16: case QL_TOK_U16:
    case QL_TOK_I32: case QL_TOK_I64: case QL_TOK_F32: case QL_TOK_F64:
        return 1;
    default:
        return 0;
    }
}

static const char *found_desc(const ql_token *t)
{
    if (t->kind == QL_TOK_SEMI && t->span.src && t->span.start < t->span.src->len &&
        t->span.src->text[t->span.start] == '\n')
        return "end of line";
    return ql_tok_desc(t->kind);
}

static int starts_type(ql_tok t)
{
    switch (t) {
    case QL_TOK_TENSOR: case QL_TOK_QTYPE: case QL_TOK_QPARAMS: case QL_TOK_HISTOGRAM: case QL_TOK_GRAM: case QL_TOK_BOOL:
    case QL_TOK_I4: case QL_TOK_U4:
    case QL_TOK_I8: case QL_TOK_U8: case QL_TOK_I16: case QL_TOK_U16: case QL_TOK_I32: case QL_TOK_I64:
    case QL_TOK_F32: case QL_TOK_F64:
        return 1;
    default:
        return 0;
    }
}

static int starts_item(ql_tok t)
{
    return t == QL_TOK_IMPORT || t == QL_TOK_CONST || t == QL_TOK_FN || t == QL_TOK_KERNEL ||
           t == QL_TOK_CALIBRATOR || t == QL_TOK_PATTERN || t == QL_TOK_AFFINE || t == QL_TOK_RECIPE ||
           t == QL_TOK_TRANSFORM;
}

/* `qrl N`, the file's first statement: an error when N is not a version this parser knows; after a
 * newer one nothing more is parsed (ps->stop). */
static void version_statement(qp_state *ps, const ql_token *key, const ql_token *v)
{
    (void)key;
    if (v->i < 1)
        ql_error(ps->diags, v->span, "there is no QRL language version 0; versions start at 1 (this qrl implements "
                                     "version%s %d)", QP_LANG_VERSION > 1 ? "s 1 to" : "", QP_LANG_VERSION);
    else if (v->i > QP_LANG_VERSION) {
        ql_error(ps->diags, v->span, "this file needs QRL language version %llu; this qrl implements version%s %d "
                                     "(a newer qrl reads it)",
                 (unsigned long long)v->i, QP_LANG_VERSION > 1 ? "s 1 to" : "", QP_LANG_VERSION);
        ps->stop = 1;
    }
}

/* "unexpected X; expected A, B or C": what the parser could take instead,
 * with families of tokens named as one ("an expression", "a type", ...). */
void qp_syntax_error(qp_state *ps, void *parser, int major, const ql_token *t)
{
    (void)major;
    if (ps->stop)
        return; /* after a version this parser does not know */
    int codes[128], n = qp_expected(parser, codes, 128);
    int has[QL_TOK_COUNT] = {0};
    for (int i = 0; i < n; i++)
        has[from_lemon(codes[i])] = 1;
    int expr = has[QL_TOK_INT], type = has[QL_TOK_TENSOR], item = has[QL_TOK_FN] && has[QL_TOK_CALIBRATOR];
    const char *want[QL_TOK_COUNT + 3];
    int nwant = 0;
    for (int k = 1; k < QL_TOK_COUNT; k++) {
        if (!has[k] || (expr && starts_expression((ql_tok)k)) || (type && starts_type((ql_tok)k)) ||
            (item && starts_item((ql_tok)k)))
            continue;
        if ((k >= QL_TOK_PLUS && k <= QL_TOK_GE && k != QL_TOK_TILDE) || k == QL_TOK_TLT)
            continue; /* after an operand any operator fits: not worth listing */
        if (k == QL_TOK_AND || k == QL_TOK_OR || (item && k == QL_TOK_SEMI))
            continue;
        want[nwant++] = ql_tok_desc((ql_tok)k);
    }
    if (item)
        want[nwant++] = "a declaration (import, const, fn, kernel, calibrator, pattern, transform, affine or recipe)";
    if (type)
        want[nwant++] = "a type";
    if (expr)
        want[nwant++] = "an expression";
    char buf[512];
    int len = snprintf(buf, sizeof buf, "unexpected %s", found_desc(t));
    if (nwant > 0 && nwant <= 6) {
        len += snprintf(buf + len, sizeof buf - (size_t)len, "; expected ");
        for (int i = 0; i < nwant && len < (int)sizeof buf; i++)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%s", i == 0 ? "" : i == nwant - 1 ? " or " : ", ",
                            want[i]);
    }
    if (item && t->kind == QL_TOK_IDENT && t->s && !strcmp(t->s, "qrl") && len < (int)sizeof buf)
        snprintf(buf + len, sizeof buf - (size_t)len, "; the language version ('qrl %d') is stated first in the file",
                 QP_LANG_VERSION);
    ql_span sp = t->span;
    if (t->kind == QL_TOK_SEMI && sp.end > sp.start)
        sp.end = sp.start + 1;
    ql_error(ps->diags, sp, "%s", buf);
}

ql_node *qp_parse(const ql_source *src, ql_arena *ar, ql_diags *d)
{
    qp_state ps = {.arena = ar, .diags = d, .src = src};
    void *p = qp_ParseAlloc(malloc);
    if (!p) {
        ql_error_file(d, src->path, "out of memory");
        return NULL;
    }
    /* Out of memory in the lexer or a grammar action jumps back here (lang/arena.h): the
     * parser's stack is freed, the nodes are the arena's. */
    jmp_buf oom, *outer = ar->on_oom;
    if (setjmp(oom)) {
        ar->on_oom = outer;
        qp_ParseFree(p, free);
        ql_error_file(d, src->path, "out of memory");
        return NULL;
    }
    ar->on_oom = &oom;
    ql_lexer lx;
    ql_lexer_init(&lx, src, ar, d);
    ql_token t;
    int first = 1; /* no statement yet: `qrl N` may come (lexed here, not by the grammar) */
    do {
        ql_lex(&lx, &t);
        if (first && t.kind == QL_TOK_IDENT && !strcmp(t.s, "qrl")) {
            ql_token v;
            int errors = d->errors;
            ql_lex(&lx, &v);
            if (v.kind == QL_TOK_INT) {
                if (d->errors == errors) /* a number too large for 64 bits: the lexer said so */
                    version_statement(&ps, &t, &v);
                else
                    ps.stop = 1;
                first = 0;
                continue;
            }
            qp_Parse(p, to_lemon[t.kind], t, &ps);
            t = v;
        }
        first = first && t.kind == QL_TOK_SEMI;
        qp_Parse(p, to_lemon[t.kind], t, &ps);
    } while (t.kind != QL_TOK_EOF && !ql_diags_full(d) && !ps.stop);
    if (t.kind != QL_TOK_EOF) {
        ql_token eof = {.kind = QL_TOK_EOF, .span = {src, (uint32_t)src->len, (uint32_t)src->len}};
        qp_Parse(p, 0, eof, &ps);
    }
    ar->on_oom = outer;
    qp_ParseFree(p, free);
    return ps.root;
}
