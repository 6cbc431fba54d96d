/* The checker (see check.h). One pass collects every file's items; a second
 * checks each item's body with nested scopes; a last one refuses recursion. */
#include "check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "generic.h"
#include "qrl.h" /* qrl_op_known: the runtime's op table */

typedef struct scope scope;
struct scope {
    scope *up;
    qc_sym **v;
    int n, cap;
    qc_names idx; /* by name, once the scope outgrows a scan */
    int indexed;
};

/* What the code being checked is part of: decides what it may touch. */
typedef enum where {
    W_CONST,   /* module const, param default, state size: constant expressions */
    W_FN,
    W_KERNEL,
    W_OBSERVE, /* state writable */
    W_MERGE,   /* state writable, other readable */
    W_SOLVE,   /* state read only */
    W_PATTERN, /* where predicates and roles */
    W_AFFINE,
    W_TABLE,
    W_AFF_PRED,  /* an affine rule's where clause */
    W_FIXED,     /* fixed(t => ...) */
    W_RECIPE,
} where;

typedef struct ctx {
    qc_unit *u;
    ql_arena *ar;
    ql_diags *d;
    qc_file *file;
    unsigned char *visible; /* visible[i]: u->files[i] is this file or one it imports */
    scope *sc;
    where w;
    const qc_type *ret; /* result type of the function being checked; &qc_void for none */
    int loops;          /* enclosing loops */
    qc_sym *fn;         /* caller, for the recursion check */
    ql_node *cal;       /* calibrator being checked */
    int nlocals;
    int assigned_y;     /* affine: the output was assigned */
    int ninstances;     /* generics' instances made so far */
} ctx;

#define TN(t, b) qc_type_name((t), (b), sizeof(b))

static void err(ctx *c, const ql_node *n, const char *fmt, ...) QL_PRINTF(3, 4);
static void err(ctx *c, const ql_node *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ql_error(c->d, n->span, "%s", buf);
}

/* An error at a declaration's name (the whole declaration is too much to underline). */
static void err_decl(ctx *c, const ql_node *n, const char *fmt, ...) QL_PRINTF(3, 4);
static void err_decl(ctx *c, const ql_node *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ql_error(c->d, n->name_span.src ? n->name_span : n->span, "%s", buf);
}

static ql_span decl_span(const ql_node *n)
{
    return n->name_span.src ? n->name_span : n->span;
}

static qc_sym *new_sym(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl)
{
    qc_sym *s = ql_alloc(c->ar, sizeof *s);
    s->name = name;
    s->kind = k;
    s->type = t;
    s->decl = decl;
    s->file = c->file;
    s->defined = 1;
    return s;
}

/* ------------------------------------------------------------- scopes */

static void push_scope(ctx *c, scope *s)
{
    memset(s, 0, sizeof *s);
    s->up = c->sc;
    c->sc = s;
}

static void pop_scope(ctx *c)
{
    free(c->sc->v);
    qc_names_free(&c->sc->idx);
    c->sc = c->sc->up;
}

enum { SCOPE_SCAN_MAX = 8 };

static qc_sym *scope_find(const scope *s, const char *name)
{
    if (s->indexed) {
        int i = qc_names_find(&s->idx, s->v, name);
        return i < 0 ? NULL : s->v[i];
    }
    for (int i = s->n - 1; i >= 0; i--)
        if (strcmp(s->v[i]->name, name) == 0)
            return s->v[i];
    return NULL;
}

static void scope_add(ctx *c, qc_sym *s)
{
    scope *sc = c->sc;
    if (sc->n == sc->cap) {
        int cap = sc->cap ? sc->cap * 2 : 8;
        qc_sym **v = realloc(sc->v, sizeof *v * (size_t)cap);
        if (!v)
            return;
        sc->v = v;
        sc->cap = cap;
    }
    sc->v[sc->n++] = s;
    if (sc->n <= SCOPE_SCAN_MAX)
        return;
    /* Names are unique within a scope, so the index and a scan agree; out of
     * memory for the index only costs speed. */
    int ok = 1;
    for (int i = sc->indexed ? sc->n - 1 : 0; i < sc->n && ok; i++)
        ok = qc_names_add(&sc->idx, sc->v, i) == 0;
    sc->indexed = ok;
    if (!ok)
        qc_names_free(&sc->idx);
}

/* Declares name in the innermost scope; a second declaration there is an error. */
static qc_sym *declare(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl)
{
    qc_sym *old = scope_find(c->sc, name);
    if (old && old->defined) {
        err(c, decl, "'%s' is already defined in this scope", name);
        if (old->decl)
            ql_note(c->d, decl_span(old->decl), "'%s' was defined here", name);
        return old;
    }
    if (old) { /* announced by the block pre-scan: this is its definition */
        old->kind = k;
        old->type = t;
        old->decl = decl;
        old->defined = 1;
        return old;
    }
    qc_sym *s = new_sym(c, name, k, t, decl);
    scope_add(c, s);
    return s;
}

static int item_visible(const ctx *c, const qc_sym *s)
{
    for (int i = 0; i < c->u->nfiles; i++)
        if (c->u->files[i] == s->file)
            return c->visible[i];
    return 0;
}

qc_sym *qc_find_item(const qc_unit *u, const char *name)
{
    int i = qc_names_find(&u->item_names, u->items, name);
    return i < 0 ? NULL : u->items[i];
}

static const struct { const char *name; const qc_type *type; } builtin_consts[] = {
    {"inf", &qc_f64}, {"nan", &qc_f64}, {"pi", &qc_f64},
};

/* Built-in functions; the typing is in check_builtin. */
static const char *const builtin_fns[] = {
    "min", "max", "abs", "clamp", "select", "floor", "ceil", "trunc", "round_even", "round_away", "round_up",
    "sqrt", "exp", "log", "log2", "tanh", "erf", "pow", "isnan", "isinf", "len", "qparams", "const", "rank",
    "dim", "present", "value", "attr", "attr_ints", "broadcast_index",
};

static int in_affine_rule(const ctx *c)
{
    return c->w == W_AFFINE || c->w == W_TABLE || c->w == W_AFF_PRED || c->w == W_FIXED;
}

static int is_builtin_fn(const char *name)
{
    for (size_t i = 0; i < sizeof builtin_fns / sizeof builtin_fns[0]; i++)
        if (strcmp(builtin_fns[i], name) == 0)
            return 1;
    return 0;
}

/* Every name the current position can see, for "did you mean". */
static const char *suggest(ctx *c, const char *name)
{
    const char *cands[512];
    int n = 0;
    for (scope *s = c->sc; s; s = s->up)
        for (int i = 0; i < s->n && n < 512; i++)
            cands[n++] = s->v[i]->name;
    for (int i = 0; i < c->u->nitems && n < 512; i++)
        if (c->u->items[i]->kind != QC_SYM_AFFINE && item_visible(c, c->u->items[i]))
            cands[n++] = c->u->items[i]->name;
    for (size_t i = 0; i < sizeof builtin_fns / sizeof builtin_fns[0] && n < 512; i++)
        cands[n++] = builtin_fns[i];
    for (size_t i = 0; i < sizeof builtin_consts / sizeof builtin_consts[0] && n < 512; i++)
        cands[n++] = builtin_consts[i].name;
    return ql_suggest(name, cands, n);
}

static qc_sym *builtin_const(ctx *c, const char *name)
{
    for (size_t i = 0; i < sizeof builtin_consts / sizeof builtin_consts[0]; i++)
        if (strcmp(builtin_consts[i].name, name) == 0)
            return new_sym(c, builtin_consts[i].name, QC_SYM_BUILTIN, builtin_consts[i].type, NULL);
    return NULL;
}

/* Resolves a name; reports unknown names (with a hint) and uses before definition. */
static qc_sym *lookup(ctx *c, ql_node *at, const char *name, int report)
{
    qc_sym *pending = NULL;
    for (scope *s = c->sc; s; s = s->up) {
        qc_sym *sym = scope_find(s, name);
        if (sym && sym->defined)
            return sym;
        if (sym && !pending)
            pending = sym;
    }
    qc_sym *item = qc_find_item(c->u, name);
    if (item && item_visible(c, item))
        return item;
    qc_sym *b = builtin_const(c, name);
    if (b)
        return b;
    if (!report)
        return NULL;
    if (pending) {
        err(c, at, "'%s' is used before its definition", name);
        if (pending->decl)
            ql_note(c->d, decl_span(pending->decl), "'%s' is defined here", name);
        return NULL;
    }
    if (item) {
        err(c, at, "'%s' is defined in %s, which this file does not import", name, item->file->src->path);
        return NULL;
    }
    const char *hint = suggest(c, name);
    if (hint)
        err(c, at, "unknown name '%s'; did you mean '%s'?", name, hint);
    else
        err(c, at, "unknown name '%s'", name);
    return NULL;
}

/* ----------------------------------------------------------- literals */

/* The value of an integer literal, possibly negated; 0 when n is not one. */
static int int_literal(const ql_node *n, int64_t *v)
{
    if (n->kind == QL_INT) {
        *v = n->ival > (uint64_t)INT64_MAX ? INT64_MIN : (int64_t)n->ival;
        return n->ival <= (uint64_t)INT64_MAX ? 1 : 2; /* 2: too big for i64 */
    }
    if (n->kind == QL_UNARY && n->op == QL_TOK_MINUS && n->a->kind == QL_INT) {
        if (n->a->ival > (uint64_t)INT64_MAX + 1)
            return 2;
        *v = n->a->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->a->ival;
        return 1;
    }
    return 0;
}

/* The value of an integer constant expression known at check time: literals, named constants,
 * and -, +, * of them (without overflow). Returns 0 when it is not one. */
static int const_int(const ql_node *n, int64_t *v, int depth)
{
    int64_t a, b;
    if (depth > 32)
        return 0;
    switch (n->kind) {
    case QL_INT: return int_literal(n, v) == 1;
    case QL_NAME: {
        const qc_sym *s = n->sym;
        return s && s->kind == QC_SYM_CONST && s->decl && s->decl->b && s->type && qc_is_int(s->type) &&
               const_int(s->decl->b, v, depth + 1);
    }
    case QL_UNARY:
        if (n->op != QL_TOK_MINUS || !const_int(n->a, &a, depth + 1))
            return 0;
        return !__builtin_sub_overflow((int64_t)0, a, v);
    case QL_BINARY:
        if (!const_int(n->a, &a, depth + 1) || !const_int(n->b, &b, depth + 1))
            return 0;
        switch (n->op) {
        case QL_TOK_PLUS: return !__builtin_add_overflow(a, b, v);
        case QL_TOK_MINUS: return !__builtin_sub_overflow(a, b, v);
        case QL_TOK_STAR: return !__builtin_mul_overflow(a, b, v);
        default: return 0;
        }
    default: return 0;
    }
}

/* Gives a literal expression its final type, pushing it down to the literal
 * leaves (1.0 / 256 as f32 makes both literals f32), and checks ranges. */
static void settle(ctx *c, ql_node *n, const qc_type *t)
{
    if (!n || !n->type || t->k == QC_ERROR)
        return;
    if (n->type->k != QC_INTLIT && n->type->k != QC_FLOATLIT)
        return;
    int64_t v;
    int lit = int_literal(n, &v);
    if (lit && qc_is_int(t)) {
        char tb[64];
        if (lit == 2 || !qc_int_fits(v, t)) {
            if (lit == 2)
                err(c, n, "integer literal does not fit in i64");
            else
                err(c, n, "%lld does not fit in %s", (long long)v, TN(t, tb));
        }
    }
    /* Integer-only operators on literals (1 << 3, 7 % 2, ~0) cannot become floats. */
    int int_op = n->kind == QL_UNARY ? n->op == QL_TOK_TILDE
               : n->kind == QL_BINARY && (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR || n->op == QL_TOK_AMP ||
                                          n->op == QL_TOK_PIPE || n->op == QL_TOK_CARET || n->op == QL_TOK_PERCENT);
    if (int_op && qc_is_float(t)) {
        char tb[64];
        if (n->kind == QL_UNARY)
            err(c, n, "'~' takes an integer, not %s", TN(t, tb));
        else
            err(c, n, "operator %s takes integers, not %s", ql_tok_desc(n->op), TN(t, tb));
        n->type = &qc_error;
        return;
    }
    n->type = t;
    switch (n->kind) {
    case QL_UNARY: settle(c, n->a, t); break;
    case QL_BINARY:
        if (n->op >= QL_TOK_EQ && n->op <= QL_TOK_GE) /* comparison of literals: settled apart */
            break;
        if (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR) {
            settle(c, n->a, t);
            settle(c, n->b, &qc_i64);
            break;
        }
        settle(c, n->a, t);
        settle(c, n->b, t);
        break;
    default: break;
    }
}

/* Checks that a value of type `from` (expression n) can be used as `to`. */
static int convert(ctx *c, ql_node *n, const qc_type *from, const qc_type *to, const char *what)
{
    char a[64], b[64];
    if (!qc_widens(from, to)) {
        if (qc_is_numeric(from) && qc_is_numeric(to) && from->k != QC_FLOATLIT && from->k != QC_INTLIT)
            err(c, n, "%s has type %s, expected %s; convert explicitly with %s(...)", what, TN(from, a), TN(to, b),
                TN(to, b));
        else
            err(c, n, "%s has type %s, expected %s", what, TN(from, a), TN(to, b));
        return 0;
    }
    settle(c, n, to);
    return 1;
}

/* -------------------------------------------------------- expressions */

static const qc_type *expr(ctx *c, ql_node *n, const qc_type *want);
static const qc_type *check_type(ctx *c, ql_node *n);

static const qc_type *set_type(ql_node *n, const qc_type *t)
{
    n->type = t;
    return t;
}

static const qc_type *binary(ctx *c, ql_node *n, const qc_type *want)
{
    char a[64], b[64];
    ql_tok op = n->op;
    if (op == QL_TOK_AND || op == QL_TOK_OR) {
        const qc_type *l = expr(c, n->a, &qc_bool), *r = expr(c, n->b, &qc_bool);
        convert(c, n->a, l, &qc_bool, "the left operand");
        convert(c, n->b, r, &qc_bool, "the right operand");
        return set_type(n, &qc_bool);
    }
    int cmp = op >= QL_TOK_EQ && op <= QL_TOK_GE;
    const qc_type *l = expr(c, n->a, cmp ? NULL : want), *r = expr(c, n->b, cmp ? NULL : want);
    if (l->k == QC_ERROR || r->k == QC_ERROR)
        return set_type(n, cmp ? &qc_bool : &qc_error);
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) && l->k == QC_STR && r->k == QC_STR &&
        n->a->kind != QL_STR && n->b->kind != QL_STR) {
        err(c, n, "strings are compared with a string literal: %s", "attr(\"mode\", \"nearest\") == \"linear\"");
        return set_type(n, &qc_bool);
    }
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) &&
        ((l->k == QC_BOOL && r->k == QC_BOOL) || (l->k == QC_STR && r->k == QC_STR)))
        return set_type(n, &qc_bool);
    if (op == QL_TOK_SHL || op == QL_TOK_SHR) {
        if (!qc_is_int(l) || !qc_is_int(r)) {
            err(c, n, "shifts take integers, not %s and %s", TN(l, a), TN(r, b));
            return set_type(n, &qc_error);
        }
        settle(c, n->b, r->k == QC_INTLIT ? &qc_i64 : r);
        return set_type(n, l);
    }
    if (!qc_is_numeric(l) || !qc_is_numeric(r)) {
        err(c, n, "operator %s takes numbers, not %s and %s", ql_tok_desc(op), TN(l, a), TN(r, b));
        return set_type(n, cmp ? &qc_bool : &qc_error);
    }
    const qc_type *t = qc_common(l, r);
    if (!t) {
        err(c, n, "mismatched types %s and %s for %s; convert one explicitly", TN(l, a), TN(r, b), ql_tok_desc(op));
        return set_type(n, cmp ? &qc_bool : &qc_error);
    }
    int bitwise = op == QL_TOK_AMP || op == QL_TOK_PIPE || op == QL_TOK_CARET;
    if ((bitwise || op == QL_TOK_PERCENT) && !qc_is_int(t)) {
        err(c, n, "operator %s takes integers, not %s", ql_tok_desc(op), TN(t, a));
        return set_type(n, &qc_error);
    }
    if (cmp) {
        const qc_type *ct = t->k == QC_INTLIT || t->k == QC_FLOATLIT ? qc_default(t) : t;
        settle(c, n->a, ct);
        settle(c, n->b, ct);
        return set_type(n, &qc_bool);
    }
    if (t->k != QC_INTLIT && t->k != QC_FLOATLIT) {
        settle(c, n->a, t);
        settle(c, n->b, t);
    }
    int64_t v;
    if ((op == QL_TOK_SLASH || op == QL_TOK_PERCENT) && (t->k == QC_INTLIT || qc_is_int(t)) && const_int(n->b, &v, 0) &&
        v == 0)
        err(c, n->b, "integer %s by zero", op == QL_TOK_SLASH ? "division" : "remainder of a division");
    return set_type(n, t);
}

static const qc_type *unary(ctx *c, ql_node *n, const qc_type *want)
{
    char a[64];
    if (n->op == QL_TOK_NOT) {
        const qc_type *t = expr(c, n->a, &qc_bool);
        convert(c, n->a, t, &qc_bool, "the operand of 'not'");
        return set_type(n, &qc_bool);
    }
    const qc_type *t = expr(c, n->a, want);
    if (t->k == QC_ERROR)
        return set_type(n, t);
    if (n->op == QL_TOK_TILDE && !qc_is_int(t)) {
        err(c, n, "'~' takes an integer, not %s", TN(t, a));
        return set_type(n, &qc_error);
    }
    if (!qc_is_numeric(t)) {
        err(c, n, "'-' takes a number, not %s", TN(t, a));
        return set_type(n, &qc_error);
    }
    if (n->op == QL_TOK_MINUS && qc_is_int(t) && !qc_is_signed(t)) {
        err(c, n, "'-' on unsigned %s; convert to a signed type first", TN(t, a));
        return set_type(n, &qc_error);
    }
    return set_type(n, t);
}

/* The positional or named argument i of a call: returns its expression and name (or NULL). */
static ql_node *arg_expr(ql_node *arg, const char **name)
{
    if (arg->kind == QL_NAMED_ARG) {
        *name = arg->name;
        return arg->a;
    }
    *name = NULL;
    return arg;
}

static int expect_args(ctx *c, ql_node *call, const char *fname, int lo, int hi)
{
    for (int i = 0; i < call->nkids; i++)
        if (call->kids[i]->kind == QL_NAMED_ARG) {
            err(c, call->kids[i], "%s takes no named arguments", fname);
            return 0;
        }
    if (call->nkids < lo || call->nkids > hi) {
        if (lo == hi)
            err(c, call, "%s takes %d argument%s, not %d", fname, lo, lo == 1 ? "" : "s", call->nkids);
        else
            err(c, call, "%s takes %d to %d arguments, not %d", fname, lo, hi, call->nkids);
        return 0;
    }
    return 1;
}

static void note_call(ctx *c, qc_sym *callee)
{
    qc_sym *f = c->fn;
    if (!f)
        return;
    for (int i = 0; i < f->ncallees; i++)
        if (f->callees[i] == callee)
            return;
    if (f->ncallees == f->capcallees) {
        int cap = f->capcallees ? f->capcallees * 2 : 4;
        qc_sym **v = ql_alloc(c->ar, sizeof *v * (size_t)cap);
        if (f->ncallees)
            memcpy(v, f->callees, sizeof *v * (size_t)f->ncallees);
        f->callees = v;
        f->capcallees = cap;
    }
    f->callees[f->ncallees++] = callee;
}

/* Arguments against a parameter list (PARAMS node): positional first, then
 * named; defaults fill the rest. */
static void check_args(ctx *c, ql_node *call, const char *what, const ql_node *params)
{
    int np = params ? params->nkids : 0, seen_named = 0;
    unsigned char given[QC_MAX_PARAMS] = {0};
    if (np > QC_MAX_PARAMS)
        np = QC_MAX_PARAMS; /* more are reported at the declaration */
    for (int i = 0; i < call->nkids; i++) {
        const char *name;
        ql_node *e = arg_expr(call->kids[i], &name);
        int at = -1;
        if (name) {
            seen_named = 1;
            for (int j = 0; j < np; j++)
                if (strcmp(params->kids[j]->name, name) == 0)
                    at = j;
            if (at < 0) {
                const char *cands[QC_MAX_PARAMS];
                for (int j = 0; j < np; j++)
                    cands[j] = params->kids[j]->name;
                const char *hint = ql_suggest(name, cands, np);
                if (hint)
                    err(c, call->kids[i], "%s has no parameter '%s'; did you mean '%s'?", what, name, hint);
                else
                    err(c, call->kids[i], "%s has no parameter '%s'", what, name);
                expr(c, e, NULL);
                continue;
            }
        } else {
            if (seen_named) {
                err(c, call->kids[i], "a positional argument cannot follow named ones");
                expr(c, e, NULL);
                continue;
            }
            if (i >= np) {
                err(c, call->kids[i], "too many arguments to %s (it takes %d)", what, np);
                expr(c, e, NULL);
                break;
            }
            at = i;
        }
        if (given[at]) {
            err(c, call->kids[i], "parameter '%s' of %s is given twice", params->kids[at]->name, what);
            continue;
        }
        given[at] = 1;
        const qc_type *pt = params->kids[at]->type ? params->kids[at]->type : &qc_error;
        const qc_type *t = expr(c, e, pt);
        char msg[160];
        snprintf(msg, sizeof msg, "argument '%s'", params->kids[at]->name);
        convert(c, e, t, pt, msg);
    }
    for (int j = 0; j < np; j++)
        if (!given[j] && !params->kids[j]->b)
            err(c, call, "missing argument '%s' of %s", params->kids[j]->name, what);
}

static const qc_type *numeric_arg(ctx *c, ql_node *e, const qc_type *want, const char *fname)
{
    char a[64];
    const qc_type *t = expr(c, e, want);
    if (!qc_is_numeric(t)) {
        err(c, e, "%s takes numbers, not %s", fname, TN(t, a));
        return &qc_error;
    }
    return t;
}

/* min, max, abs, rounding, math, len, qparams, and the pattern predicates. */
static const qc_type *builtin_call(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    if (!strcmp(f, "min") || !strcmp(f, "max") || !strcmp(f, "clamp")) {
        int na = strcmp(f, "clamp") ? 2 : 3;
        if (!expect_args(c, n, f, na, na))
            return set_type(n, &qc_error);
        const qc_type *t = numeric_arg(c, k[0], want, f);
        for (int i = 1; i < na; i++) {
            const qc_type *u = numeric_arg(c, k[i], want, f);
            const qc_type *m = qc_common(t, u);
            if (!m) {
                char b[64];
                err(c, n, "%s of mismatched types %s and %s; convert one explicitly", f, TN(t, a), TN(u, b));
                return set_type(n, &qc_error);
            }
            t = m;
        }
        if (t->k != QC_INTLIT && t->k != QC_FLOATLIT)
            for (int i = 0; i < na; i++)
                settle(c, k[i], t);
        return set_type(n, t);
    }
    if (!strcmp(f, "select")) {
        if (!expect_args(c, n, f, 3, 3))
            return set_type(n, &qc_error);
        convert(c, k[0], expr(c, k[0], &qc_bool), &qc_bool, "the condition of select");
        const qc_type *t = expr(c, k[1], want), *u = expr(c, k[2], want), *m = qc_common(t, u);
        if (!m) {
            char b[64];
            err(c, n, "select between mismatched types %s and %s", TN(t, a), TN(u, b));
            return set_type(n, &qc_error);
        }
        settle(c, k[1], m);
        settle(c, k[2], m);
        return set_type(n, m);
    }
    if (!strcmp(f, "abs")) {
        if (!expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        return set_type(n, numeric_arg(c, k[0], want, f));
    }
    static const char *const float1[] = {"floor", "ceil", "trunc", "round_even", "round_away", "round_up",
                                         "sqrt", "exp", "log", "log2", "tanh", "erf", "isnan", "isinf"};
    for (size_t i = 0; i < sizeof float1 / sizeof float1[0]; i++) {
        if (strcmp(f, float1[i]))
            continue;
        if (!expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        const qc_type *t = expr(c, k[0], want && qc_is_float(want) ? want : NULL);
        if (t->k == QC_INTLIT || t->k == QC_FLOATLIT) /* a literal takes the wanted float type */
            t = want && (want->k == QC_F32 || want->k == QC_F64) ? want : &qc_f64;
        if (!qc_is_float(t) && t->k != QC_ERROR) {
            err(c, k[0], "%s takes a float, not %s; convert with f32(...) or f64(...)", f, TN(t, a));
            return set_type(n, &qc_error);
        }
        t = t->k == QC_FLOATLIT ? qc_default(t) : t;
        settle(c, k[0], t);
        return set_type(n, !strcmp(f, "isnan") || !strcmp(f, "isinf") ? &qc_bool : t);
    }
    if (!strcmp(f, "pow")) {
        if (!expect_args(c, n, f, 2, 2))
            return set_type(n, &qc_error);
        const qc_type *t = expr(c, k[0], NULL), *u = expr(c, k[1], NULL), *m = qc_common(t, u);
        if (m && m->k == QC_INTLIT)
            m = &qc_f64;
        if (!m || !qc_is_float(m)) {
            err(c, n, "pow takes floats");
            return set_type(n, &qc_error);
        }
        m = qc_default(m);
        settle(c, k[0], m);
        settle(c, k[1], m);
        return set_type(n, m);
    }
    if (!strcmp(f, "broadcast_index")) { /* broadcast_index(a, y, i): a's element that y[i] reads */
        if (!expect_args(c, n, f, 3, 3))
            return set_type(n, &qc_error);
        for (int i = 0; i < 2; i++) {
            const qc_type *t = expr(c, k[i], NULL);
            if (t->k != QC_TENSOR && t->k != QC_ERROR)
                err(c, k[i], "broadcast_index takes two tensors and an index, not %s", TN(t, a));
        }
        convert(c, k[2], expr(c, k[2], &qc_i64), &qc_i64, "the index");
        return set_type(n, &qc_i64);
    }
    if (!strcmp(f, "len")) {
        if (!expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        const qc_type *t = expr(c, k[0], NULL);
        if (t->k != QC_ARRAY && t->k != QC_ERROR)
            err(c, k[0], "len takes an array, not %s", TN(t, a));
        return set_type(n, &qc_i64);
    }
    if (!strcmp(f, "qparams")) {
        if (!expect_args(c, n, f, 2, 2))
            return set_type(n, &qc_error);
        convert(c, k[0], expr(c, k[0], &qc_f64), &qc_f64, "the scale");
        convert(c, k[1], expr(c, k[1], &qc_i64), &qc_i64, "the zero point");
        return set_type(n, &qc_qparams);
    }
    /* An affine rule's node: attr("alpha", 0.01), attr("mode", "nearest"), attr_ints("pads"). */
    if (!strcmp(f, "attr") || !strcmp(f, "attr_ints")) {
        int na = !strcmp(f, "attr") ? 2 : 1;
        if (!in_affine_rule(c)) {
            err(c, n, "%s(...) reads the node an affine rule is applied to: it is only allowed in affine rules%s", f,
                na == 2 ? " (in a pattern, v.attr(name, default))" : "");
            return set_type(n, &qc_error);
        }
        if (!expect_args(c, n, f, na, na))
            return set_type(n, &qc_error);
        const qc_type *nt = expr(c, k[0], NULL);
        if (k[0]->kind != QL_STR) {
            err(c, k[0], "the attribute name must be a string literal");
            return set_type(n, &qc_error);
        }
        (void)nt;
        if (na == 1)
            return set_type(n, qc_array_of(c->ar, &qc_i64, -1));
        const qc_type *dt = qc_default(expr(c, k[1], NULL));
        settle(c, k[1], dt);
        if (dt->k == QC_STR && k[1]->kind != QL_STR)
            err(c, k[1], "a string attribute's default must be a string literal");
        else if (dt->k != QC_I64 && dt->k != QC_F64 && dt->k != QC_STR && dt->k != QC_ERROR) {
            err(c, k[1], "an attribute default is an integer, a float or a string");
            dt = &qc_error;
        }
        return set_type(n, dt);
    }
    /* value(c) in an affine rule: the node's input c as a scalar constant (NaN when it is none). */
    if (!strcmp(f, "value") && in_affine_rule(c)) {
        if (!expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        qc_sym *s = k[0]->kind == QL_NAME ? lookup(c, k[0], k[0]->name, 1) : NULL;
        if (!s || s->kind != QC_SYM_AFF_IN) {
            if (s || k[0]->kind != QL_NAME)
                err(c, k[0], "value takes one of the rule's inputs");
            return set_type(n, &qc_error);
        }
        k[0]->sym = s;
        set_type(k[0], &qc_i32);
        return set_type(n, &qc_f64);
    }
    /* Pattern predicates on bound values. */
    if (!strcmp(f, "const") || !strcmp(f, "present") || !strcmp(f, "rank") || !strcmp(f, "dim") ||
        !strcmp(f, "value")) {
        int na = strcmp(f, "dim") ? 1 : 2;
        if (c->w != W_PATTERN) {
            err(c, n, "%s(...) is a pattern predicate: it is only allowed in a pattern's where clause", f);
            return set_type(n, &qc_error);
        }
        if (!expect_args(c, n, f, na, na))
            return set_type(n, &qc_error);
        const qc_type *t = expr(c, k[0], NULL);
        if (t->k != QC_VALUE && t->k != QC_ERROR)
            err(c, k[0], "%s takes a value bound by the pattern, not %s", f, TN(t, a));
        if (na == 2)
            convert(c, k[1], expr(c, k[1], &qc_i64), &qc_i64, "the axis");
        return set_type(n, !strcmp(f, "const") || !strcmp(f, "present") ? &qc_bool
                            : !strcmp(f, "value")                        ? &qc_f64
                                                                         : &qc_i64);
    }
    err(c, n, "'%s' cannot be called here", f);
    return set_type(n, &qc_error);
}

/* Methods of built-in types: tensors, histograms, pattern values. */
static const qc_type *method_call(ctx *c, ql_node *n, const qc_type *recv, const char *m)
{
    char a[64];
    ql_node *obj = n->a->a;
    if (recv->k == QC_TENSOR) {
        if (!strcmp(m, "min") || !strcmp(m, "max") || !strcmp(m, "absmax") || !strcmp(m, "sum")) {
            expect_args(c, n, m, 0, 0);
            return set_type(n, &qc_f64);
        }
        if (!strcmp(m, "dim")) {
            if (expect_args(c, n, m, 1, 1))
                convert(c, n->kids[0], expr(c, n->kids[0], &qc_i64), &qc_i64, "the axis");
            return set_type(n, &qc_i64);
        }
    } else if (recv->k == QC_HIST) {
        if (!strcmp(m, "add") || !strcmp(m, "add_abs")) {
            if (c->w != W_OBSERVE)
                err(c, n, "a histogram is filled only in observe");
            if (expect_args(c, n, m, 1, 1)) {
                const qc_type *t = expr(c, n->kids[0], NULL);
                if (t->k != QC_TENSOR && t->k != QC_ERROR)
                    err(c, n->kids[0], "%s takes a tensor, not %s", m, TN(t, a));
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "merge")) {
            if (c->w != W_MERGE)
                err(c, n, "histograms are merged only in merge");
            if (expect_args(c, n, m, 1, 1)) {
                const qc_type *t = expr(c, n->kids[0], NULL);
                if (t->k != QC_HIST && t->k != QC_ERROR)
                    err(c, n->kids[0], "merge takes a histogram, not %s", TN(t, a));
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "quantile") || !strcmp(m, "bin") || !strcmp(m, "edge")) {
            const qc_type *want = strcmp(m, "quantile") ? &qc_i64 : &qc_f64;
            if (expect_args(c, n, m, 1, 1))
                convert(c, n->kids[0], expr(c, n->kids[0], want), want, "the argument");
            return set_type(n, &qc_f64);
        }
    } else if (recv->k == QC_VALUE) {
        if (!strcmp(m, "dim")) {
            if (expect_args(c, n, m, 1, 1))
                convert(c, n->kids[0], expr(c, n->kids[0], &qc_i64), &qc_i64, "the axis");
            return set_type(n, &qc_i64);
        }
        if (!strcmp(m, "attr_ints")) {
            /* v.attr_ints("axes"): an int-list attribute of v's producer (empty when absent) */
            if (!expect_args(c, n, m, 1, 1))
                return set_type(n, &qc_error);
            expr(c, n->kids[0], NULL);
            if (n->kids[0]->kind != QL_STR)
                err(c, n->kids[0], "the attribute name must be a string literal");
            return set_type(n, qc_array_of(c->ar, &qc_i64, -1));
        }
        if (!strcmp(m, "attr")) {
            /* v.attr("group", 1): the default's type is the attribute's */
            if (!expect_args(c, n, m, 2, 2))
                return set_type(n, &qc_error);
            const qc_type *nt = expr(c, n->kids[0], NULL);
            if (nt->k != QC_STR)
                err(c, n->kids[0], "the attribute name must be a string");
            if (n->kids[0]->kind != QL_STR)
                err(c, n->kids[0], "the attribute name must be a string literal");
            const qc_type *dt = qc_default(expr(c, n->kids[1], NULL));
            settle(c, n->kids[1], dt);
            if (dt->k != QC_I64 && dt->k != QC_F64 && dt->k != QC_ERROR) {
                err(c, n->kids[1], "an attribute default is an integer or a float");
                dt = &qc_error;
            }
            return set_type(n, dt);
        }
    }
    (void)obj;
    err(c, n->a, "%s has no method '%s'", TN(recv, a), m);
    return set_type(n, &qc_error);
}

static qc_sym *instance_for_call(ctx *c, ql_node *n, qc_sym *g);
static qc_sym *explicit_instance(ctx *c, ql_node *name, qc_sym *g);

static const qc_type *call(ctx *c, ql_node *n, const qc_type *want)
{
    ql_node *f = n->a;
    if (f->kind == QL_FIELD) {
        const qc_type *recv = expr(c, f->a, NULL);
        if (recv->k == QC_ERROR) {
            for (int i = 0; i < n->nkids; i++)
                expr(c, n->kids[i], NULL);
            return set_type(n, &qc_error);
        }
        return method_call(c, n, recv, f->name);
    }
    if (f->kind != QL_NAME) {
        err(c, f, "this cannot be called");
        return set_type(n, &qc_error);
    }
    qc_sym *s = lookup(c, f, f->name, 0);
    if (!s && is_builtin_fn(f->name))
        return builtin_call(c, n, f->name, want);
    if (!s) {
        lookup(c, f, f->name, 1);
        for (int i = 0; i < n->nkids; i++) {
            const char *nm;
            expr(c, arg_expr(n->kids[i], &nm), NULL);
        }
        return set_type(n, &qc_error);
    }
    if (f->d && s->kind != QC_SYM_GENERIC) {
        err(c, f->d, "'%s' has no type parameters", f->name);
        s = NULL;
    } else if (s->kind == QC_SYM_GENERIC)
        s = f->d ? explicit_instance(c, f, s) : instance_for_call(c, n, s);
    if (!s) {
        for (int i = 0; i < n->nkids; i++) {
            const char *nm;
            expr(c, arg_expr(n->kids[i], &nm), NULL);
        }
        return set_type(n, &qc_error);
    }
    f->sym = s;
    if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL) {
        if (c->w == W_CONST || c->w == W_RECIPE) { /* (patterns and affine rules may call fns) */
            err(c, f, "'%s' cannot be called here: %s", f->name,
                c->w == W_CONST ? "constant expressions call no functions" : "a recipe's settings call no functions");
            return set_type(n, &qc_error);
        }
        if (s->kind == QC_SYM_KERNEL && c->w != W_KERNEL) {
            err(c, f, "kernel '%s' is run by the runtime (from a pattern's lower), not called", f->name);
            return set_type(n, &qc_error);
        }
        note_call(c, s);
        char what[160];
        snprintf(what, sizeof what, "'%s'", s->name);
        check_args(c, n, what, s->decl->a);
        return set_type(n, s->decl->b ? s->decl->b->type : &qc_void);
    }
    if (s->kind == QC_SYM_CALIBRATOR) {
        err(c, f, "calibrator '%s' is used in a recipe (activation = i8 by %s(...)), not called", f->name, f->name);
        return set_type(n, &qc_error);
    }
    err(c, f, "'%s' is not a function", f->name);
    return set_type(n, &qc_error);
}

static const qc_type *field(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *t = expr(c, n->a, NULL);
    const char *m = n->name;
    qc_sym *base = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (base && base->kind == QC_SYM_AFF_IN) {
        if (!strcmp(m, "zero"))
            return set_type(n, &qc_i32);
        if (!strcmp(m, "scale"))
            return set_type(n, &qc_f64);
        err(c, n, "an affine input has .zero and .scale, not '.%s'", m);
        return set_type(n, &qc_error);
    }
    switch (t->k) {
    case QC_ERROR: return set_type(n, t);
    case QC_TENSOR:
        if (!strcmp(m, "numel") || !strcmp(m, "rank"))
            return set_type(n, &qc_i64);
        break;
    case QC_ARRAY:
        if (!strcmp(m, "len"))
            return set_type(n, &qc_i64);
        break;
    case QC_HIST:
        if (!strcmp(m, "count") || !strcmp(m, "lo") || !strcmp(m, "hi") || !strcmp(m, "width") || !strcmp(m, "min") ||
            !strcmp(m, "max"))
            return set_type(n, &qc_f64);
        if (!strcmp(m, "bins"))
            return set_type(n, &qc_i64);
        break;
    case QC_QTYPE:
        if (!strcmp(m, "bits") || !strcmp(m, "qmin") || !strcmp(m, "qmax") || !strcmp(m, "axis"))
            return set_type(n, &qc_i64);
        if (!strcmp(m, "signed") || !strcmp(m, "narrow") || !strcmp(m, "symmetric"))
            return set_type(n, &qc_bool);
        break;
    case QC_QPARAMS:
        if (!strcmp(m, "scale"))
            return set_type(n, &qc_f64);
        if (!strcmp(m, "zero"))
            return set_type(n, &qc_i64);
        break;
    case QC_VALUE:
        if (!strcmp(m, "rank"))
            return set_type(n, &qc_i64);
        if (!strcmp(m, "const") || !strcmp(m, "present"))
            return set_type(n, &qc_bool);
        if (!strcmp(m, "op"))
            return set_type(n, &qc_str);
        break;
    case QC_STATE: {
        const ql_node *cal = t->decl;
        for (int i = 0; i < cal->nkids; i++)
            if (cal->kids[i]->kind == QL_STATE && !strcmp(cal->kids[i]->name, m)) {
                n->sym = cal->kids[i]->sym;
                return set_type(n, cal->kids[i]->sym ? ((qc_sym *)cal->kids[i]->sym)->type : &qc_error);
            }
        const char *cands[64];
        int nc = 0;
        for (int i = 0; i < cal->nkids && nc < 64; i++)
            if (cal->kids[i]->kind == QL_STATE)
                cands[nc++] = cal->kids[i]->name;
        const char *hint = ql_suggest(m, cands, nc);
        if (hint)
            err(c, n, "the state has no field '%s'; did you mean '%s'?", m, hint);
        else
            err(c, n, "the state has no field '%s'", m);
        return set_type(n, &qc_error);
    }
    default: break;
    }
    err(c, n, "%s has no field '%s'", TN(t, a), m);
    return set_type(n, &qc_error);
}

static const qc_type *index_expr(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *t = expr(c, n->a, NULL);
    for (int i = 0; i < n->nkids; i++) {
        const qc_type *it = expr(c, n->kids[i], &qc_i64);
        if (!qc_is_int(it) && it->k != QC_ERROR)
            err(c, n->kids[i], "an index is an integer, not %s", TN(it, a));
        else
            settle(c, n->kids[i], it->k == QC_INTLIT ? &qc_i64 : it);
    }
    if (t->k == QC_ERROR)
        return set_type(n, t);
    if (t->k != QC_ARRAY && t->k != QC_TENSOR) {
        err(c, n->a, "%s cannot be indexed", TN(t, a));
        return set_type(n, &qc_error);
    }
    if (t->k == QC_ARRAY && n->nkids != 1) {
        err(c, n, "an array takes one index, not %d", n->nkids);
        return set_type(n, &qc_error);
    }
    return set_type(n, t->elem);
}

static const qc_type *name_expr(ctx *c, ql_node *n)
{
    if (n->d) {
        err(c, n, "type arguments come with a call: %s<...>(...)", n->name);
        return set_type(n, &qc_error);
    }
    qc_sym *s = lookup(c, n, n->name, 1);
    if (!s)
        return set_type(n, &qc_error);
    n->sym = s;
    switch (s->kind) {
    case QC_SYM_FN:
    case QC_SYM_KERNEL:
    case QC_SYM_GENERIC:
        err(c, n, "'%s' is a function: call it with (...)", n->name);
        return set_type(n, &qc_error);
    case QC_SYM_CALIBRATOR:
    case QC_SYM_PATTERN:
    case QC_SYM_RECIPE:
        err(c, n, "'%s' is a %s, not a value", n->name,
            s->kind == QC_SYM_CALIBRATOR ? "calibrator" : s->kind == QC_SYM_PATTERN ? "pattern" : "recipe");
        return set_type(n, &qc_error);
    case QC_SYM_CONST:
        if (!s->type) {
            err(c, n, "constant '%s' is used before its definition", n->name);
            return set_type(n, &qc_error);
        }
        break;
    case QC_SYM_STATE:
        if (c->w == W_CONST) {
            err(c, n, "state '%s' is not a constant", n->name);
            return set_type(n, &qc_error);
        }
        break;
    case QC_SYM_LOCAL:
    case QC_SYM_LOOP:
        if (c->w == W_CONST) {
            err(c, n, "'%s' is not a constant", n->name);
            return set_type(n, &qc_error);
        }
        break;
    default: break;
    }
    return set_type(n, s->type ? s->type : &qc_error);
}

static const qc_type *cast(ctx *c, ql_node *n)
{
    char a[64], b[64];
    const qc_type *to = check_type(c, n->a);
    const qc_type *from = expr(c, n->b, NULL);
    if (from->k == QC_ERROR || to->k == QC_ERROR)
        return set_type(n, to);
    if (!qc_is_scalar(from)) {
        err(c, n->b, "cannot convert %s to %s", TN(from, a), TN(to, b));
        return set_type(n, &qc_error);
    }
    if (n->kind == QL_SAT && !qc_is_int(to)) {
        err(c, n->a, "sat<...> converts to an integer type, not %s", TN(to, a));
        return set_type(n, &qc_error);
    }
    settle(c, n->b, qc_default(from));
    return set_type(n, to);
}

static const qc_type *expr(ctx *c, ql_node *n, const qc_type *want)
{
    switch (n->kind) {
    case QL_INT:
        if (n->ival > (uint64_t)INT64_MAX + 1)
            err(c, n, "integer literal does not fit in i64");
        return set_type(n, &qc_intlit);
    case QL_FLOAT: return set_type(n, &qc_floatlit);
    case QL_BOOL: return set_type(n, &qc_bool);
    case QL_STR: return set_type(n, &qc_str);
    case QL_NAME: return name_expr(c, n);
    case QL_UNARY: return unary(c, n, want);
    case QL_BINARY: return binary(c, n, want);
    case QL_CALL: return call(c, n, want);
    case QL_FIELD: return field(c, n);
    case QL_INDEX: return index_expr(c, n);
    case QL_CAST:
    case QL_SAT: return cast(c, n);
    case QL_NAMED_ARG:
        err(c, n, "a named argument is only allowed in a call");
        return set_type(n, &qc_error);
    default:
        err(c, n, "expected an expression");
        return set_type(n, &qc_error);
    }
}

/* An expression whose literals get their default types (let x = 3 is i64). */
static const qc_type *value_expr(ctx *c, ql_node *n, const qc_type *want)
{
    const qc_type *t = expr(c, n, want);
    if (t->k == QC_INTLIT || t->k == QC_FLOATLIT) {
        t = want && qc_widens(t, want) ? want : qc_default(t);
        settle(c, n, t);
    }
    return t;
}

/* -------------------------------------------------------------- types */

/* A histogram's number of bins known at check time (a constant, or the default of the calibrator
 * parameter it names) is even and in range, as the runtime requires. */
static void check_bins(ctx *c, const ql_node *at, int64_t v)
{
    if (v < 2 || v > QRL_MAX_HIST_BINS || v % 2)
        err(c, at, "a histogram needs an even number of bins from 2 to %d, not %lld", QRL_MAX_HIST_BINS, (long long)v);
}

static void hist_bins(ctx *c, const ql_node *e)
{
    int64_t v;
    if (const_int(e, &v, 0)) {
        check_bins(c, e, v);
        return;
    }
    const qc_sym *s = e->kind == QL_NAME ? e->sym : NULL;
    if (s && s->kind == QC_SYM_PARAM && s->decl && s->decl->b && const_int(s->decl->b, &v, 0))
        check_bins(c, s->decl->b, v);
}

/* In a recipe's `by cal(..., bins = N)`: a constant argument for a parameter that sizes one of the
 * calibrator's histograms is checked as its default is. */
static void hist_bins_arg(ctx *c, const ql_node *cal, const char *param, const ql_node *arg)
{
    int64_t v;
    if (!const_int(arg, &v, 0))
        return;
    for (int i = 0; i < cal->nkids; i++) {
        const ql_node *k = cal->kids[i];
        if (k->kind == QL_STATE && k->a && k->a->kind == QL_TYPE_HIST && k->a->nkids == 1 &&
            k->a->kids[0]->kind == QL_NAME && !strcmp(k->a->kids[0]->name, param)) {
            check_bins(c, arg, v);
            return;
        }
    }
}

/* A constant integer expression (literals, consts and calibrator params
 * are taken at face value only when literal). */
static const qc_type *check_type(ctx *c, ql_node *n)
{
    char a[64];
    if (!n)
        return &qc_error;
    const qc_type *t = &qc_error;
    switch (n->kind) {
    case QL_TYPE:
        switch (n->op) {
        case QL_TOK_BOOL: t = &qc_bool; break;
        case QL_TOK_I8: t = &qc_i8; break;
        case QL_TOK_U8: t = &qc_u8; break;
        case QL_TOK_I16: t = &qc_i16; break;
        case QL_TOK_U16: t = &qc_u16; break;
        case QL_TOK_I32: t = &qc_i32; break;
        case QL_TOK_I64: t = &qc_i64; break;
        case QL_TOK_F32: t = &qc_f32; break;
        case QL_TOK_F64: t = &qc_f64; break;
        case QL_TOK_QTYPE: t = &qc_qtype; break;
        case QL_TOK_QPARAMS: t = &qc_qparams; break;
        case QL_TOK_IDENT:
            err(c, n, "unknown type '%s'", n->name); /* not a type parameter of this fn */
            break;
        default: break;
        }
        break;
    case QL_TYPE_ARRAY: {
        const qc_type *e = check_type(c, n->a);
        if (!qc_is_scalar(e) && e->k != QC_ERROR) {
            err(c, n->a, "array elements are numbers or bools, not %s", TN(e, a));
            e = &qc_error;
        }
        int64_t len = -1;
        if (n->b) {
            if (c->cal == NULL || c->w != W_CONST) {
                err(c, n->b, "only calibrator state arrays have a size; write %s[] for an array parameter", TN(e, a));
            } else {
                const qc_type *lt = expr(c, n->b, &qc_i64);
                convert(c, n->b, lt, &qc_i64, "an array size");
                len = 0; /* known at instantiation, from the calibrator's parameters */
            }
        }
        t = qc_array_of(c->ar, e, len);
        break;
    }
    case QL_TYPE_TENSOR: {
        const qc_type *e = check_type(c, n->a);
        if (!qc_is_numeric(e) && e->k != QC_ERROR) {
            err(c, n->a, "tensor elements are numbers, not %s", TN(e, a));
            e = &qc_error;
        }
        t = qc_tensor_of(c->ar, e);
        break;
    }
    case QL_TYPE_HIST:
        if (!c->cal || c->w != W_CONST) {
            err(c, n, "a histogram is calibrator state: declare it with 'state NAME: histogram(bins)'");
            break;
        }
        if (n->nkids < 1 || n->nkids > 1) {
            err(c, n, "histogram takes one argument (the number of bins), not %d", n->nkids);
            break;
        }
        convert(c, n->kids[0], expr(c, n->kids[0], &qc_i64), &qc_i64, "the number of bins");
        hist_bins(c, n->kids[0]);
        t = &qc_hist;
        break;
    default: err(c, n, "expected a type"); break;
    }
    n->type = t;
    return t;
}

/* --------------------------------------------------------- statements */

static int block(ctx *c, ql_node *b); /* returns 1 when the block always ends in return */

static int is_lvalue_mutable(ctx *c, ql_node *n, const char **why)
{
    switch (n->kind) {
    case QL_NAME: {
        qc_sym *s = n->sym;
        if (!s)
            return 1; /* already reported */
        switch (s->kind) {
        case QC_SYM_LOCAL:
            *why = s->mutable_ ? NULL : "it is declared with let (use var for a variable)";
            return s->mutable_;
        case QC_SYM_STATE:
            if (c->w == W_SOLVE) {
                *why = "state is read only in solve";
                return 0;
            }
            return c->w == W_OBSERVE || c->w == W_MERGE;
        case QC_SYM_AFF_OUT: c->assigned_y = 1; return 1;
        case QC_SYM_LOOP: *why = "it is a loop variable"; return 0;
        case QC_SYM_PARAM: *why = "it is a parameter"; return 0;
        case QC_SYM_CONST: *why = "it is a constant"; return 0;
        case QC_SYM_OTHER: *why = "it is the other state (read only)"; return 0;
        default: *why = "it is not a variable"; return 0;
        }
    }
    case QL_INDEX: {
        const qc_type *t = n->a->type;
        if (t && t->k == QC_TENSOR && c->w != W_KERNEL) {
            *why = "tensors are written only in kernels";
            return 0;
        }
        if (n->a->kind == QL_NAME && n->a->sym && ((qc_sym *)n->a->sym)->kind == QC_SYM_STATE)
            return is_lvalue_mutable(c, n->a, why);
        if (n->a->kind == QL_FIELD) {
            *why = "the other state is read only";
            return 0;
        }
        return 1;
    }
    case QL_FIELD: *why = "fields of built-in values are read only"; return 0;
    default: *why = "it is not a variable"; return 0;
    }
}

static void assign(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *lt = expr(c, n->a, NULL);
    const char *why = "it is not a variable";
    if (lt->k != QC_ERROR && !is_lvalue_mutable(c, n->a, &why)) {
        const char *what = n->a->kind == QL_NAME ? n->a->name : NULL;
        if (what)
            err(c, n->a, "cannot assign to '%s': %s", what, why);
        else
            err(c, n->a, "cannot assign to this: %s", why);
    }
    if (lt->k == QC_HIST || lt->k == QC_TENSOR || (lt->k == QC_ARRAY && n->a->kind != QL_INDEX)) {
        err(c, n->a, "a %s cannot be assigned as a whole", TN(lt, a));
        expr(c, n->b, NULL);
        return;
    }
    const qc_type *rt = expr(c, n->b, lt);
    if (n->op != QL_TOK_ASSIGN && !qc_is_numeric(lt)) {
        err(c, n, "%s needs a number on the left, not %s", ql_tok_desc(n->op), TN(lt, a));
        return;
    }
    convert(c, n->b, rt, lt, "the assigned value");
}

/* Names declared by a block's lets, announced before the statements so a
 * use that comes first is "used before its definition", not "unknown". */
static void announce_lets(ctx *c, ql_node *b)
{
    for (int i = 0; i < b->nkids; i++) {
        ql_node *s = b->kids[i];
        if (s->kind == QL_LET && !scope_find(c->sc, s->name)) {
            qc_sym *sym = new_sym(c, s->name, QC_SYM_LOCAL, &qc_error, s);
            sym->defined = 0;
            scope_add(c, sym);
        }
    }
}

static int stmt(ctx *c, ql_node *n)
{
    char a[64];
    switch (n->kind) {
    case QL_LET: {
        const qc_type *dt = n->a ? check_type(c, n->a) : NULL;
        if (dt && (dt->k == QC_HIST || dt->k == QC_TENSOR)) {
            err(c, n->a, "a local cannot be a %s", TN(dt, a));
            dt = &qc_error;
        }
        const qc_type *t = value_expr(c, n->b, dt);
        if (dt)
            convert(c, n->b, t, dt, "the initial value");
        else if (t->k == QC_VOID) {
            err(c, n->b, "this has no value");
            t = &qc_error;
        } else if (t->k == QC_STR || t->k == QC_STATE || t->k == QC_VALUE) {
            /* no run-time representation: usable only where they appear */
            err(c, n->b, "a local cannot be a %s", TN(t, a));
            t = &qc_error;
        }
        qc_sym *s = declare(c, n->name, QC_SYM_LOCAL, dt ? dt : t, n);
        s->mutable_ = n->flag;
        s->index = c->nlocals++;
        n->sym = s;
        return 0;
    }
    case QL_ASSIGN: assign(c, n); return 0;
    case QL_EXPR_STMT: {
        if (n->a->kind != QL_CALL) {
            err(c, n, "this expression does nothing (a statement is a call, an assignment or a declaration)");
            expr(c, n->a, NULL);
            return 0;
        }
        const qc_type *t = expr(c, n->a, NULL);
        if (t->k != QC_VOID && t->k != QC_ERROR && n->a->a->kind == QL_NAME && n->a->a->sym &&
            ((qc_sym *)n->a->a->sym)->kind == QC_SYM_FN)
            return 0; /* a function's result may be dropped */
        if (t->k != QC_VOID && t->k != QC_ERROR)
            err(c, n, "the result of this call is unused");
        return 0;
    }
    case QL_IF: {
        convert(c, n->a, expr(c, n->a, &qc_bool), &qc_bool, "the condition");
        int t = block(c, n->b);
        int e = 0;
        if (n->c)
            e = n->c->kind == QL_IF ? stmt(c, n->c) : block(c, n->c);
        return t && e && n->c;
    }
    case QL_WHILE:
        convert(c, n->a, expr(c, n->a, &qc_bool), &qc_bool, "the condition");
        c->loops++;
        block(c, n->c);
        c->loops--;
        return 0;
    case QL_FOR: {
        const qc_type *lo = expr(c, n->a, NULL), *hi = expr(c, n->b, NULL);
        const qc_type *t = qc_common(lo, hi);
        if (!t || !qc_is_int(t)) {
            char b[64];
            if (lo->k != QC_ERROR && hi->k != QC_ERROR)
                err(c, n, "a for loop runs over integers, not %s .. %s", TN(lo, a), TN(hi, b));
            t = &qc_i64;
        }
        t = qc_default(t);
        settle(c, n->a, t);
        settle(c, n->b, t);
        scope sc;
        push_scope(c, &sc);
        qc_sym *v = declare(c, n->name, QC_SYM_LOOP, t, n);
        v->index = c->nlocals++;
        n->sym = v;
        c->loops++;
        block(c, n->c);
        c->loops--;
        pop_scope(c);
        return 0;
    }
    case QL_RETURN:
        if (c->w == W_AFFINE || c->w == W_OBSERVE || c->w == W_MERGE) {
            if (n->a) {
                err(c, n->a, "%s returns nothing", c->w == W_AFFINE ? "an affine body" : "this");
                expr(c, n->a, NULL);
            }
            return 1;
        }
        if (!c->ret || c->ret->k == QC_VOID) {
            if (n->a) {
                err(c, n->a, "this function returns nothing (declare its result with -> TYPE)");
                expr(c, n->a, NULL);
            }
            return 1;
        }
        if (!n->a) {
            err(c, n, "return needs a value of type %s", TN(c->ret, a));
            return 1;
        }
        convert(c, n->a, expr(c, n->a, c->ret), c->ret, "the returned value");
        return 1;
    case QL_BREAK:
    case QL_CONTINUE:
        if (!c->loops)
            err(c, n, "'%s' outside a loop", n->kind == QL_BREAK ? "break" : "continue");
        return 1; /* what follows in the block is unreachable */
    case QL_BLOCK: return block(c, n);
    default: err(c, n, "expected a statement"); return 0;
    }
}

static int block(ctx *c, ql_node *b)
{
    scope sc;
    push_scope(c, &sc);
    announce_lets(c, b);
    int ends = 0, reported = 0;
    for (int i = 0; i < b->nkids; i++) {
        if (ends && !reported) {
            err(c, b->kids[i], "unreachable statement");
            reported = 1;
        }
        int r = stmt(c, b->kids[i]);
        /* break/continue end the block but not the function */
        if (b->kids[i]->kind == QL_BREAK || b->kids[i]->kind == QL_CONTINUE)
            ends = ends ? ends : 2;
        else if (r)
            ends = 1;
    }
    pop_scope(c);
    return ends == 1;
}

/* ------------------------------------------------------------- items */

static void params(ctx *c, ql_node *ps, int scalars_only, const char *owner)
{
    char a[64];
    if (ps && ps->nkids > QC_MAX_PARAMS)
        err(c, ps->kids[QC_MAX_PARAMS], "%s takes at most %d parameters", owner, QC_MAX_PARAMS);
    for (int i = 0; ps && i < ps->nkids; i++) {
        ql_node *p = ps->kids[i];
        where w = c->w;
        c->w = W_CONST;
        const qc_type *t = p->type ? p->type : check_type(c, p->a); /* fn signatures are checked first */
        c->w = w;
        if (scalars_only && !qc_is_scalar(t) && t->k != QC_ERROR) {
            err(c, p->a, "a parameter of %s is a number or a bool, not %s", owner, TN(t, a));
            t = &qc_error;
        }
        if (p->b) {
            w = c->w;
            c->w = W_CONST;
            convert(c, p->b, expr(c, p->b, t), t, "the default value");
            c->w = w;
        }
        p->type = t;
        qc_sym *s = declare(c, p->name, QC_SYM_PARAM, t, p);
        s->index = i;
        p->sym = s;
    }
}

static void function(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    scope sc;
    push_scope(c, &sc);
    c->w = s->kind == QC_SYM_KERNEL ? W_KERNEL : W_FN;
    c->fn = s;
    c->nlocals = 0;
    params(c, n->a, 0, "a function");
    c->ret = n->b ? n->b->type : &qc_void;
    if (s->kind == QC_SYM_KERNEL && n->b)
        err(c, n->b, "a kernel returns nothing: it writes its output arrays or tensors");
    int returns = block(c, n->c);
    if (!returns && c->ret->k != QC_VOID && c->ret->k != QC_ERROR) {
        ql_span end = n->c->span;
        end.start = end.end > 0 ? end.end - 1 : 0;
        ql_error(c->d, end, "missing return at the end of '%s' (it returns %s)", s->name,
                 qc_type_name(c->ret, (char[64]){0}, 64));
    }
    c->fn = NULL;
    c->ret = NULL;
    pop_scope(c);
}

static void calibrator(ctx *c, qc_sym *s)
{
    char a[64];
    ql_node *n = s->decl;
    scope sc;
    push_scope(c, &sc);
    c->cal = n;
    c->w = W_CONST;
    params(c, n->a, 1, "a calibrator");
    ql_node *seen[4] = {0}; /* observe, merge, solve */
    /* State first: the bodies may use any field. */
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind != QL_STATE)
            continue;
        c->w = W_CONST;
        const qc_type *t = check_type(c, k->a);
        if (t->k == QC_TENSOR || t->k == QC_QTYPE || t->k == QC_QPARAMS) {
            err(c, k->a, "state is numbers, bools, sized arrays or histograms, not %s", TN(t, a));
            t = &qc_error;
        }
        if (t->k == QC_ARRAY && !k->a->b) {
            err(c, k->a, "a state array needs a size: %s[N]", TN(t->elem, a));
        }
        if (k->b) {
            if (t->k == QC_HIST || t->k == QC_ARRAY)
                err(c, k->b, "%s state starts empty (zero); it takes no initial value", TN(t, a));
            else
                convert(c, k->b, expr(c, k->b, t), t, "the initial value");
        }
        qc_sym *st = declare(c, k->name, QC_SYM_STATE, t, k);
        st->mutable_ = 1;
        k->sym = st;
    }
    qc_type *state_t = ql_alloc(c->ar, sizeof *state_t);
    state_t->k = QC_STATE;
    state_t->decl = n;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        int slot = k->kind == QL_OBSERVE ? 0 : k->kind == QL_MERGE ? 1 : k->kind == QL_SOLVE ? 2 : -1;
        if (slot < 0)
            continue;
        if (seen[slot]) {
            err(c, k, "calibrator '%s' has two %s blocks", s->name, slot == 0 ? "observe" : slot == 1 ? "merge" : "solve");
            continue;
        }
        seen[slot] = k;
        scope fs;
        push_scope(c, &fs);
        c->nlocals = 0;
        c->fn = NULL;
        if (slot == 0) {
            c->w = W_CONST;
            params(c, k->a, 0, "observe");
            c->w = W_OBSERVE;
            if (!k->a || k->a->nkids != 1 || !k->a->kids[0]->type || k->a->kids[0]->type->k != QC_TENSOR)
                err(c, k, "observe takes one tensor: observe(x: tensor<f32>)");
            c->ret = &qc_void;
        } else if (slot == 1) {
            c->w = W_MERGE;
            qc_sym *o = declare(c, k->name, QC_SYM_OTHER, state_t, k);
            k->sym = o;
            c->ret = &qc_void;
        } else {
            c->w = W_CONST;
            params(c, k->a, 0, "solve");
            c->w = W_SOLVE;
            if (!k->a || k->a->nkids != 1 || !k->a->kids[0]->type || k->a->kids[0]->type->k != QC_QTYPE)
                err(c, k, "solve takes the target type: solve(t: qtype) -> qparams");
            const qc_type *rt = check_type(c, k->b);
            if (rt->k != QC_QPARAMS && rt->k != QC_ERROR)
                err(c, k->b, "solve returns qparams, not %s", TN(rt, a));
            c->ret = &qc_qparams;
        }
        int returns = block(c, k->c);
        if (slot == 2 && !returns) {
            ql_span end = k->c->span;
            end.start = end.end > 0 ? end.end - 1 : 0;
            ql_error(c->d, end, "missing return at the end of solve (it returns qparams)");
        }
        pop_scope(c);
    }
    if (!seen[0])
        err_decl(c, n, "calibrator '%s' has no observe block", s->name);
    if (!seen[1])
        err_decl(c, n, "calibrator '%s' has no merge block: its state could not be combined across threads", s->name);
    if (!seen[2])
        err_decl(c, n, "calibrator '%s' has no solve block", s->name);
    c->cal = NULL;
    c->ret = NULL;
    pop_scope(c);
}

static const char *op_hint(const char *op)
{
    const char *cands[512];
    int n = qrl_op_count();
    if (n > 512)
        n = 512;
    for (int i = 0; i < n; i++)
        cands[i] = qrl_op_name(i);
    return ql_suggest(op, cands, n);
}

static void check_op_name(ctx *c, ql_node *at, const char *op)
{
    if (qrl_op_known(op))
        return;
    const char *hint = op_hint(op);
    if (hint)
        err(c, at, "unknown ONNX op '%s'; did you mean '%s'?", op, hint);
    else
        err(c, at, "unknown ONNX op '%s'", op);
}

static qc_sym *value_sym(ctx *c, ql_node *at, const char *name)
{
    if (!strcmp(name, "_"))
        return NULL;
    qc_sym *s = scope_find(c->sc, name);
    if (!s) {
        s = new_sym(c, name, QC_SYM_VALUE, &qc_value, at);
        s->index = c->sc->n; /* the pattern's value table: in order of first appearance */
        if (s->index == QRL_PATTERN_MAX_VALUES) /* the matcher's table (runtime/match.h) */
            err(c, at, "'%s' is value %d of this pattern; a pattern names at most %d values", name, s->index + 1,
                QRL_PATTERN_MAX_VALUES);
        scope_add(c, s);
    }
    return s;
}

static void role(ctx *c, ql_node *r)
{
    ql_node *e = r->a;
    const char *fname = e->kind == QL_NAME ? e->name : e->kind == QL_CALL && e->a->kind == QL_NAME ? e->a->name : NULL;
    static const char *const roles[] = {"activation", "output", "weight", "bias"};
    int known = 0;
    for (size_t i = 0; fname && i < sizeof roles / sizeof roles[0]; i++)
        known |= !strcmp(fname, roles[i]);
    if (!known) {
        const char *hint = fname ? ql_suggest(fname, roles, 4) : NULL;
        if (hint)
            err(c, e, "unknown role '%s'; did you mean '%s'?", fname, hint);
        else
            err(c, e, "a role is activation, output, weight, weight(axis = N) or bias(x, w)");
        return;
    }
    e->type = &qc_role;
    if (e->kind == QL_NAME) {
        if (!strcmp(fname, "bias"))
            err(c, e, "bias needs arguments: bias(x, w)");
        return;
    }
    if (!strcmp(fname, "weight")) {
        for (int i = 0; i < e->nkids; i++) {
            const char *an;
            ql_node *v = arg_expr(e->kids[i], &an);
            if (!an || strcmp(an, "axis")) {
                err(c, e->kids[i], "weight takes one named argument, axis = N");
                continue;
            }
            convert(c, v, expr(c, v, &qc_i64), &qc_i64, "the axis");
        }
    } else if (!strcmp(fname, "bias")) {
        int want = 2;
        if (!expect_args(c, e, fname, want, want))
            return;
        for (int i = 0; i < want; i++) {
            const qc_type *t = expr(c, e->kids[i], NULL);
            if (t->k != QC_VALUE && t->k != QC_ERROR)
                err(c, e->kids[i], "%s takes values of the pattern", fname);
        }
    } else {
        err(c, e, "%s takes no arguments", fname);
    }
}

/* The role expression a pattern's quantize clause gives value `name`, or NULL. */
static const ql_node *role_of(const ql_node *pat, const char *name)
{
    for (int i = 0; i < pat->nkids; i++)
        if (pat->kids[i]->kind == QL_QUANTIZE)
            for (int r = 0; r < pat->kids[i]->nkids; r++)
                if (!strcmp(pat->kids[i]->kids[r]->name, name))
                    return pat->kids[i]->kids[r]->a;
    return NULL;
}

static const char *role_name(const ql_node *re)
{
    return re->kind == QL_NAME ? re->name : re->kind == QL_CALL && re->a->kind == QL_NAME ? re->a->name : "";
}

/* The lowering calling convention: `lower y = K(a, ...)` calls kernel K with,
 * for each value argument, its integer tensor, scale and zero point when the
 * pattern quantizes it (arrays of them for per-channel weights; a bias is its
 * i32 tensor alone), or its f32 tensor when it stays float; other arguments
 * as they are; and last the output y as tensor, scale and zero point. */
static void lower_convention(ctx *c, const ql_node *pat, ql_node *lower)
{
    char a[64], b[64];
    ql_node *cl = lower->a;
    const qc_sym *ks = cl->a->sym;
    const ql_node *kp = ks->decl->a;
    int np = kp ? kp->nkids : 0, p = 0;
    /* expected[i]: the type parameter i must have; NULL = any scalar (a constant argument) */
    const qc_type *want[128];
    const char *why[128];
    char whybuf[128][96]; /* the texts why[] points to; per call, so concurrent checks do not share them */
    int nw = 0;
    for (int j = 0; j < cl->nkids; j++) {
        const char *an;
        expr(c, arg_expr(cl->kids[j], &an), NULL);
    }
    for (int j = 0; j <= cl->nkids && nw < 120; j++) {
        const ql_node *e;
        const char *vname;
        if (j < cl->nkids) {
            const char *an;
            e = arg_expr(cl->kids[j], &an);
            if (an) {
                err(c, cl->kids[j], "lower passes arguments by position");
                return;
            }
            vname = e->kind == QL_NAME && e->sym && ((qc_sym *)e->sym)->kind == QC_SYM_VALUE ? e->name : NULL;
            if (!vname) {
                want[nw] = e->type;
                why[nw++] = "a constant argument";
                continue;
            }
        } else {
            e = lower;
            vname = lower->name;
        }
        const ql_node *re = role_of(pat, vname);
        const char *rn = re ? role_name(re) : NULL;
        if (!re) {
            if (j == cl->nkids) {
                err(c, lower, "the lowered output '%s' needs a role in quantize (activation or output)", vname);
                return;
            }
            want[nw] = qc_tensor_of(c->ar, &qc_f32);
            snprintf(whybuf[nw], sizeof whybuf[nw], "'%s' is not quantized: it arrives as its f32 tensor", vname);
            why[nw] = whybuf[nw];
            nw++;
            continue;
        }
        if (!strcmp(rn, "bias")) {
            want[nw] = qc_tensor_of(c->ar, &qc_i32);
            snprintf(whybuf[nw], sizeof whybuf[nw], "'%s' is a bias: its i32 tensor", vname);
            why[nw] = whybuf[nw];
            nw++;
            continue;
        }
        int per_channel = !strcmp(rn, "weight") && re->kind == QL_CALL;
        const qc_type *three[3] = {NULL, per_channel ? qc_array_of(c->ar, &qc_f32, -1) : &qc_f32,
                                   per_channel ? qc_array_of(c->ar, &qc_i32, -1) : &qc_i32};
        static const char *const what[3] = {"integer tensor", "scale", "zero point"};
        for (int k = 0; k < 3; k++) {
            want[nw] = three[k]; /* NULL for the tensor: any integer tensor */
            snprintf(whybuf[nw], sizeof whybuf[nw], "the %s of '%s' (%s%s)", what[k], vname, rn,
                     per_channel ? ", per channel" : "");
            why[nw] = whybuf[nw];
            nw++;
        }
    }
    /* A first parameter `acc: tensor<i32>` receives the int32 accumulator the
     * runtime computes for the matched node (an epilogue kernel). */
    int skip = np > 0 && !strcmp(kp->kids[0]->name, "acc") && kp->kids[0]->type &&
               qc_type_eq(kp->kids[0]->type, qc_tensor_of(c->ar, &qc_i32));
    if (np - skip != nw) {
        err(c, cl, "kernel '%s' takes %d parameters but this lowering passes %d (quantized values pass tensor, "
                   "scale and zero point; see the lowering convention in docs/language.md)",
            ks->generic ? ks->generic->name : ks->name, np - skip, nw);
        return;
    }
    for (p = 0; p < nw; p++) {
        const ql_node *kpar = kp->kids[p + skip];
        const qc_type *pt = kpar->type ? kpar->type : &qc_error;
        int ok;
        if (!want[p]) /* the integer tensor of a quantized value */
            ok = pt->k == QC_TENSOR && qc_is_int(pt->elem);
        else if (want[p]->k == QC_TENSOR || want[p]->k == QC_ARRAY)
            ok = qc_type_eq(pt, want[p]);
        else
            ok = qc_widens(want[p], pt);
        if (!ok && pt->k != QC_ERROR)
            err(c, kpar, "parameter '%s' of kernel '%s' is %s, but pattern '%s' passes %s here (%s)",
                kpar->name, ks->generic ? ks->generic->name : ks->name, qc_type_name(pt, a, sizeof a), pat->name,
                want[p] ? qc_type_name(want[p], b, sizeof b) : "an integer tensor", why[p]);
    }
}

/* `lower y = k(...)` with k generic: one lowering per instance of k, in
 * order, so the runtime runs the one whose types the recipe chose. A copy
 * keeps its source lowering in d, to report its errors once. */
static void expand_lowers(ctx *c, ql_node *n)
{
    ql_node *list = ql_node_new(c->ar, QL_PATTERN, n->span);
    int any = 0;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        qc_sym *g = k->kind == QL_LOWER && k->a->kind == QL_CALL && k->a->a->kind == QL_NAME
                        ? lookup(c, k->a->a, k->a->a->name, 0)
                        : NULL;
        if (g && g->kind == QC_SYM_GENERIC && k->a->a->d) { /* lower y = k<i8>(...): that instance alone */
            qc_sym *inst = explicit_instance(c, k->a->a, g);
            if (inst) {
                k->a->a->name = inst->name;
                k->a->a->d = NULL;
            }
            ql_node_add(c->ar, list, k);
            continue;
        }
        if (!g || g->kind != QC_SYM_GENERIC || !g->ninstances) {
            ql_node_add(c->ar, list, k);
            continue;
        }
        any = 1;
        for (int j = 0; j < g->ninstances; j++) {
            ql_node *cl = qc_clone(c->ar, k);
            cl->a->a->name = g->instances[j]->name;
            cl->d = k;
            ql_node_add(c->ar, list, cl);
        }
    }
    if (any) {
        n->kids = list->kids;
        n->nkids = list->nkids;
        n->capkids = list->capkids;
    }
}

static void pattern(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    expand_lowers(c, n);
    scope sc;
    push_scope(c, &sc);
    c->w = W_PATTERN;
    ql_node *match = NULL, *lower = NULL;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind != QL_MATCH)
            continue;
        if (match) {
            err(c, k, "pattern '%s' has two match clauses; list several nodes in one: match { ... }", s->name);
            continue;
        }
        match = k;
        /* the matcher's limits (runtime/match.h) */
        if (k->nkids > QRL_PATTERN_MAX_NODES)
            err(c, k->kids[QRL_PATTERN_MAX_NODES], "pattern '%s' lists %d nodes; a pattern matches at most %d",
                s->name, k->nkids, QRL_PATTERN_MAX_NODES);
        for (int b = 0, forms = 0; b < k->nkids; b++)
            for (int alt = 0; alt < k->kids[b]->nkids; alt++)
                if (++forms == QRL_PATTERN_MAX_FORMS + 1)
                    err(c, k->kids[b]->kids[alt], "pattern '%s' lists more than %d op forms (alternatives count)",
                        s->name, QRL_PATTERN_MAX_FORMS);
        /* Outputs first, so later nodes may consume earlier ones. */
        for (int b = 0; b < k->nkids; b++) {
            ql_node *bind = k->kids[b];
            qc_sym *old = scope_find(c->sc, bind->name);
            if (old && old->decl && old->decl->kind == QL_BIND) {
                err(c, bind, "'%s' is produced twice in this pattern", bind->name);
                continue;
            }
            qc_sym *v = value_sym(c, bind, bind->name);
            if (v) {
                v->decl = bind;
                bind->sym = v;
            }
        }
        for (int b = 0; b < k->nkids; b++) {
            ql_node *bind = k->kids[b];
            for (int alt = 0; alt < bind->nkids; alt++) {
                ql_node *op = bind->kids[alt];
                check_op_name(c, op, op->name);
                if (op->nkids > QRL_PATTERN_MAX_INPUTS)
                    err(c, op->kids[QRL_PATTERN_MAX_INPUTS], "%s lists %d inputs; a pattern's node lists at most %d",
                        op->name, op->nkids, QRL_PATTERN_MAX_INPUTS);
                for (int j = 0; j < op->nkids; j++) {
                    ql_node *arg = op->kids[j];
                    if (!strcmp(arg->name, bind->name))
                        err(c, arg, "'%s' cannot be an input of the node that produces it", arg->name);
                    arg->sym = value_sym(c, arg, arg->name);
                }
            }
        }
        for (int b = 0; b < k->nkids; b++)
            if (k->kids[b]->a)
                convert(c, k->kids[b]->a, expr(c, k->kids[b]->a, &qc_bool), &qc_bool, "a where clause");
    }
    if (!match)
        err_decl(c, n, "pattern '%s' has no match clause", s->name);
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind == QL_WHERE) {
            convert(c, k->a, expr(c, k->a, &qc_bool), &qc_bool, "a where clause");
        } else if (k->kind == QL_SETTING) { /* numerics onnx | tflite | pytorch; priority N */
            static const char *const modes[] = {"onnx", "tflite", "pytorch"};
            int ok = 0, numerics = !strcmp(k->name, "numerics"), priority = !strcmp(k->name, "priority");
            for (int j = 0; numerics && k->a->kind == QL_NAME && j < 3; j++)
                ok |= !strcmp(k->a->name, modes[j]);
            if (!numerics && !priority)
                err(c, k, "a pattern has match, where, quantize, lower, numerics and priority clauses, not '%s'",
                    k->name);
            else if (numerics && !ok)
                err(c, k->a, "numerics is onnx, tflite or pytorch");
            else if (priority && (k->a->kind != QL_INT || k->a->ival > 1000))
                err(c, k->a, "priority is a whole number from 0 to 1000");
            for (int j = 0; j < i; j++)
                if (n->kids[j]->kind == QL_SETTING && !strcmp(n->kids[j]->name, k->name))
                    err(c, k, "pattern '%s' states its %s twice", s->name, k->name);
        } else if (k->kind == QL_QUANTIZE) {
            for (int r = 0; r < k->nkids; r++) {
                ql_node *rn = k->kids[r];
                qc_sym *v = scope_find(c->sc, rn->name);
                if (!v) {
                    err(c, rn, "'%s' is not a value of this pattern", rn->name);
                    continue;
                }
                for (int q = 0; q < r; q++)
                    if (!strcmp(k->kids[q]->name, rn->name))
                        err(c, rn, "'%s' is given two roles", rn->name);
                rn->sym = v;
                role(c, rn);
            }
        } else if (k->kind == QL_LOWER) {
            if (lower && strcmp(lower->name, k->name)) {
                err(c, k, "every lower clause of pattern '%s' computes the same value ('%s', not '%s')", s->name,
                    lower->name, k->name);
                continue;
            }
            if (!lower)
                lower = k;
            qc_sym *v = scope_find(c->sc, k->name);
            if (!v)
                err(c, k, "'%s' is not a value of this pattern", k->name);
            ql_node *cl = k->a;
            if (cl->kind != QL_CALL || cl->a->kind != QL_NAME) {
                err(c, cl, "lower runs a kernel: lower y = kernel(args)");
                continue;
            }
            qc_sym *ks = lookup(c, cl->a, cl->a->name, 1);
            if (!ks)
                continue;
            if (ks->kind == QC_SYM_GENERIC && cl->a->d)
                continue; /* its type arguments were reported */
            if (ks->kind != QC_SYM_KERNEL) {
                err(c, cl->a, "'%s' is not a kernel", cl->a->name);
                continue;
            }
            cl->a->sym = ks;
        }
    }
    const ql_node *failed = NULL; /* a generic's lowering with errors: its other instances stay quiet */
    for (int i = 0; i < n->nkids; i++) /* each lowering follows the convention */
        if (n->kids[i]->kind == QL_LOWER && n->kids[i]->a->kind == QL_CALL && n->kids[i]->a->a->sym) {
            int mark = c->d->n, errors = c->d->errors;
            lower_convention(c, n, n->kids[i]);
            if (n->kids[i]->d && n->kids[i]->d == failed)
                ql_diags_truncate(c->d, mark);
            else if (n->kids[i]->d && c->d->errors > errors)
                failed = n->kids[i]->d;
        }
    if (match && !lower)
        err_decl(c, n, "pattern '%s' has no lower clause (which kernel runs it)", s->name);
    pop_scope(c);
}

static void affine(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    scope sc;
    push_scope(c, &sc);
    if (!qrl_op_known(n->name)) {
        const char *hint = op_hint(n->name);
        if (hint)
            err_decl(c, n, "unknown ONNX op '%s'; did you mean '%s'?", n->name, hint);
        else
            err_decl(c, n, "unknown ONNX op '%s'", n->name);
    }
    if (n->nkids > QRL_AFFINE_MAX_INPUTS) /* the runtime's view of the node (qr_aff_view) */
        err(c, n->kids[QRL_AFFINE_MAX_INPUTS], "affine %s names %d inputs; an affine rule names at most %d", n->name,
            n->nkids, QRL_AFFINE_MAX_INPUTS);
    for (int i = 0; i < n->nkids; i++) {
        ql_node *arg = n->kids[i];
        qc_sym *in = declare(c, arg->name, QC_SYM_AFF_IN, &qc_i32, arg);
        in->index = i;
        arg->sym = in;
    }
    if (n->b) { /* where: over the node's attributes and shapes */
        c->w = W_AFF_PRED;
        convert(c, n->b, expr(c, n->b, &qc_bool), &qc_bool, "a where clause");
    }
    ql_node *res = n->a;
    if (res->kind == QL_AFF_FIXED && !res->b) { /* fixed(t => qparams for the recipe's type t) */
        scope fs;
        push_scope(c, &fs);
        qc_sym *t = declare(c, res->name, QC_SYM_TABLE_VAR, &qc_qtype, res);
        res->sym = t;
        c->w = W_FIXED;
        const qc_type *qt = expr(c, res->a, NULL);
        if (qt->k != QC_QPARAMS && qt->k != QC_ERROR) {
            char a[64];
            err(c, res->a, "fixed(%s => ...) gives the output's qparams, not %s", res->name, TN(qt, a));
        }
        pop_scope(c);
    } else if (res->kind == QL_AFF_FIXED) {
        c->w = W_AFF_PRED; /* constants, and the node's attributes */
        convert(c, res->a, expr(c, res->a, &qc_f64), &qc_f64, "the scale");
        convert(c, res->b, expr(c, res->b, &qc_i64), &qc_i64, "the zero point");
    }
    ql_node *body = n->c;
    if (body && body->kind == QL_AFF_F32 && res->kind == QL_AFF_FIXED)
        err(c, body, "fixed output qparams need a table(v => ...) computing the op, not 'in f32'");
    if (body && body->kind == QL_BLOCK) {
        if (res->kind == QL_AFF_REQUANTIZE)
            err(c, body, "requantize takes no body: the runtime requantizes to the output's qparams");
        if (!n->nkids)
            err(c, body, "a body needs the op's inputs named: affine %s(x) -> ...", n->name);
        scope bs;
        push_scope(c, &bs);
        qc_sym *y = declare(c, "y", QC_SYM_AFF_OUT, &qc_i32, body);
        y->mutable_ = 1;
        c->w = W_AFFINE;
        c->assigned_y = 0;
        c->nlocals = 0;
        block(c, body);
        if (!c->assigned_y)
            err(c, body, "the body never assigns the output y");
        pop_scope(c);
    } else if (body && body->kind == QL_TABLE) {
        scope bs;
        push_scope(c, &bs);
        qc_sym *v = declare(c, body->name, QC_SYM_TABLE_VAR, &qc_f64, body);
        body->sym = v;
        c->w = W_TABLE;
        const qc_type *t = expr(c, body->a, &qc_f64);
        convert(c, body->a, t, &qc_f64, "the table's value");
        pop_scope(c);
    } else if (!body && res->kind == QL_AFF_FIXED) {
        err(c, res, "fixed output qparams need a table(v => ...) computing the op");
    }
    pop_scope(c);
}

static void qspec(ctx *c, ql_node *setting, int kind)
{
    /* kind 0: activation/weight (int type, modifiers, by calibrator); 1: a type only; 2: fallback */
    char a[64];
    ql_node *q = setting->a;
    if (q->kind != QL_QSPEC) {
        err(c, q, "%s takes a type%s", setting->name,
            kind == 0 ? " and a calibrator: i8 symmetric by minmax()" : kind == 2 ? ": f32 when sqnr < 20" : "");
        return;
    }
    const qc_type *t = check_type(c, q->a);
    if (kind == 0 && t->k != QC_I8 && t->k != QC_U8 && t->k != QC_I16 && t->k != QC_U16)
        err(c, q->a, "%s is quantized to i8, u8, i16 or u16, not %s", setting->name, TN(t, a));
    if (kind == 1 && t->k != QC_I32 && t->k != QC_I64 && t->k != QC_I16)
        err(c, q->a, "%s is i16, i32 or i64, not %s", setting->name, TN(t, a));
    if (kind == 2 && t->k != QC_F32)
        err(c, q->a, "the fallback runs in f32, not %s", TN(t, a));
    static const char *const mods[] = {"symmetric", "asymmetric", "narrow", "per_channel", "per_tensor"};
    for (int i = 0; i < q->nkids; i++) {
        const char *m = q->kids[i]->name;
        int ok = 0;
        for (int j = 0; j < 5; j++)
            ok |= !strcmp(m, mods[j]);
        if (kind != 0)
            err(c, q->kids[i], "%s takes no modifiers", setting->name);
        else if (!ok) {
            const char *hint = ql_suggest(m, mods, 5);
            if (hint)
                err(c, q->kids[i], "unknown modifier '%s'; did you mean '%s'?", m, hint);
            else
                err(c, q->kids[i], "unknown modifier '%s' (symmetric, asymmetric, narrow, per_channel, per_tensor)", m);
        }
    }
    if (q->b) {
        if (kind != 0) {
            err(c, q->b, "%s takes no calibrator", setting->name);
        } else {
            ql_node *cl = q->b;
            ql_node *fname = cl->kind == QL_CALL ? cl->a : cl;
            qc_sym *cs = fname->kind == QL_NAME ? lookup(c, fname, fname->name, 1) : NULL;
            if (fname->kind != QL_NAME)
                err(c, cl, "by names a calibrator: by minmax() or by percentile(p = 99.9)");
            else if (cs && cs->kind != QC_SYM_CALIBRATOR)
                err(c, fname, "'%s' is not a calibrator", fname->name);
            else if (cs) {
                fname->sym = cs;
                if (cl->kind == QL_CALL) {
                    char what[160];
                    snprintf(what, sizeof what, "calibrator '%s'", cs->name);
                    c->w = W_CONST;
                    check_args(c, cl, what, cs->decl->a);
                    for (int i = 0; i < cl->nkids; i++) {
                        const char *name;
                        const ql_node *e = arg_expr(cl->kids[i], &name);
                        const ql_node *ps = cs->decl->a;
                        if (!name && ps && i < ps->nkids)
                            name = ps->kids[i]->name;
                        if (name)
                            hist_bins_arg(c, cs->decl, name, e);
                    }
                    c->w = W_RECIPE;
                }
            }
        }
    } else if (kind == 0) {
        err(c, q, "%s needs a calibrator: ... by minmax()", setting->name);
    }
    if (q->c) {
        if (kind != 2) {
            err(c, q->c, "only the fallback takes a condition");
        } else {
            scope ms;
            push_scope(c, &ms);
            declare(c, "sqnr", QC_SYM_BUILTIN, &qc_f64, q->c);        /* the layer's own SQNR in dB */
            declare(c, "output_sqnr", QC_SYM_BUILTIN, &qc_f64, q->c); /* the model's outputs' SQNR in dB */
            convert(c, q->c, expr(c, q->c, &qc_bool), &qc_bool, "the fallback condition");
            pop_scope(c);
        }
    } else if (kind == 2) {
        err(c, q, "the fallback needs a condition: f32 when sqnr < 20, or f32 when output_sqnr < 30");
    }
}

static void recipe(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    static const char *const keys[] = {"activation", "weight", "bias", "accumulate", "numerics", "fallback", "input",
                                       "output", "tolerance", "rounding"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    c->w = W_RECIPE;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind == QL_USE) {
            for (int j = 0; j < k->nkids; j++) {
                ql_node *nm = k->kids[j];
                qc_sym *ps = lookup(c, nm, nm->name, 0);
                int is_affine = 0;
                int first = qc_names_find(&c->u->affine_names, c->u->items, nm->name);
                for (qc_sym *t = first < 0 ? NULL : c->u->items[first]; t && !is_affine; t = t->next_same)
                    is_affine = item_visible(c, t);
                if (ps && ps->kind == QC_SYM_PATTERN)
                    nm->sym = ps;
                else if (!is_affine) {
                    if (ps)
                        err(c, nm, "'%s' is not a pattern or an affine rule", nm->name);
                    else
                        lookup(c, nm, nm->name, 1);
                }
            }
            continue;
        }
        int key = -1;
        for (int j = 0; j < NKEYS; j++)
            if (!strcmp(k->name, keys[j]))
                key = j;
        for (int j = 0; j < i; j++)
            if (n->kids[j]->kind == QL_SETTING && !strcmp(n->kids[j]->name, k->name)) {
                err(c, k, "'%s' is set twice", k->name);
                ql_note(c->d, n->kids[j]->span, "first set here");
            }
        if (key < 0) {
            const char *hint = ql_suggest(k->name, keys, NKEYS);
            if (hint)
                err(c, k, "unknown recipe setting '%s'; did you mean '%s'?", k->name, hint);
            else
                err(c, k, "unknown recipe setting '%s' (activation, weight, bias, accumulate, numerics, fallback, input, "
                          "output, tolerance, rounding)",
                    k->name);
            continue;
        }
        if (key == 8) { /* tolerance = 3: dB the integer graph may lose against the QDQ simulation */
            ql_node *v = k->a;
            if ((v->kind != QL_INT && v->kind != QL_FLOAT) || (v->kind == QL_FLOAT && !(v->fval >= 0)))
                err(c, v, "tolerance is a number of dB: tolerance = 3");
            continue;
        }
        if (key == 4 || key == 9) { /* numerics = onnx; rounding = half_even */
            ql_node *v = k->a;
            static const char *const modes[2][3] = {{"onnx", "tflite", "pytorch"}, {"half_even", "half_away", "half_even"}};
            int ok = v->kind == QL_NAME;
            if (ok) {
                ok = 0;
                for (int j = 0; j < 3; j++)
                    ok |= !strcmp(v->name, modes[key == 9][j]);
            }
            if (!ok)
                err(c, v, key == 4 ? "numerics is onnx, tflite or pytorch" : "rounding is half_even or half_away");
            continue;
        }
        qspec(c, k, key <= 1 || key >= 6 ? 0 : key <= 3 ? 1 : 2);
    }
    for (int j = 0; j < 2; j++) {
        int found = 0;
        for (int i = 0; i < n->nkids; i++)
            found |= n->kids[i]->kind == QL_SETTING && !strcmp(n->kids[i]->name, keys[j]);
        if (!found)
            err_decl(c, n, "recipe '%s' does not say how %ss are quantized (%s = ...)", s->name, keys[j], keys[j]);
    }
}

static void const_item(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    c->w = W_CONST;
    const qc_type *dt = n->a ? check_type(c, n->a) : NULL;
    if (dt && !qc_is_scalar(dt) && dt->k != QC_ERROR) {
        char a[64];
        err(c, n->a, "a constant is a number or a bool, not %s", TN(dt, a));
        dt = &qc_error;
    }
    const qc_type *t = value_expr(c, n->b, dt);
    if (dt)
        convert(c, n->b, t, dt, "the value");
    s->type = dt ? dt : t;
}

/* ------------------------------------------------------------ generics */

/* Binds the type parameters that type node pt mentions from t, an argument's
 * type; 0 after reporting two different types for one parameter. */
static int unify(ctx *c, const ql_node *call, const qc_sym *g, const ql_node *pt, const qc_type *t, const char *arg,
                 const qc_type **bound, const char **from)
{
    const ql_node *tp = g->decl->d;
    if (!pt || !t || t->k == QC_ERROR)
        return 1;
    if ((pt->kind == QL_TYPE_TENSOR && t->k == QC_TENSOR) || (pt->kind == QL_TYPE_ARRAY && t->k == QC_ARRAY))
        return unify(c, call, g, pt->a, t->elem, arg, bound, from);
    if (pt->kind != QL_TYPE || pt->op != QL_TOK_IDENT || t->k == QC_INTLIT || t->k == QC_FLOATLIT || !qc_is_scalar(t))
        return 1;
    for (int i = 0; i < tp->nkids; i++) {
        if (strcmp(tp->kids[i]->name, pt->name))
            continue;
        if (!bound[i]) {
            bound[i] = t;
            from[i] = arg;
        } else if (!qc_type_eq(bound[i], t)) {
            char a[64], b[64];
            err(c, call, "'%s' is called with %s = %s (argument '%s') and %s = %s (argument '%s'); one %s is one type",
                g->name, tp->kids[i]->name, TN(bound[i], a), from[i], tp->kids[i]->name, TN(t, b), arg,
                tp->kids[i]->name);
            return 0;
        }
    }
    return 1;
}

/* The instance of generic g that name's type arguments (k<i8>) name. */
static qc_sym *explicit_instance(ctx *c, ql_node *name, qc_sym *g)
{
    const ql_node *tp = g->decl->d, *ta = name->d;
    if (ta->nkids != tp->nkids) {
        err(c, ta, "'%s' takes %d type argument%s, not %d", g->name, tp->nkids, tp->nkids == 1 ? "" : "s", ta->nkids);
        return NULL;
    }
    const qc_type *args[QC_GENERIC_MAX_PARAMS];
    for (int i = 0; i < ta->nkids; i++) {
        char set[128], a[64];
        args[i] = check_type(c, ta->kids[i]);
        if (args[i]->k == QC_ERROR)
            return NULL;
        int in = 0;
        for (int j = 0; j < tp->kids[i]->nkids; j++)
            in |= qc_type_eq(qc_generic_member(tp->kids[i]->kids[j]), args[i]);
        if (!in) {
            err(c, ta->kids[i], "'%s' takes %s = %s, not %s", g->name, tp->kids[i]->name,
                qc_generic_set(g->decl, i, set, sizeof set), TN(args[i], a));
            return NULL;
        }
    }
    int k = qc_generic_index(g->decl, args);
    return k >= 0 && k < g->ninstances ? g->instances[k] : NULL;
}

/* The instance of generic g that call n's arguments select: each type
 * parameter takes the type of the arguments whose parameter mentions it. */
static qc_sym *instance_for_call(ctx *c, ql_node *n, qc_sym *g)
{
    const ql_node *tp = g->decl->d, *ps = g->decl->a;
    int np = ps ? ps->nkids : 0, mark = c->d->n, errors = c->d->errors;
    const qc_type *bound[QC_GENERIC_MAX_PARAMS] = {0}, *types[QC_MAX_PARAMS] = {0};
    const char *from[QC_GENERIC_MAX_PARAMS] = {0};
    ql_node *at[QC_MAX_PARAMS] = {0};
    int ok = 1;
    /* the arguments' types, quietly: check_args types them again, for real. An
     * argument typed already (an outer call's quiet pass) keeps its type, so
     * nested generic calls are typed a quadratic number of times, not 2^depth. */
    for (int i = 0; i < n->nkids && i < QC_MAX_PARAMS; i++) {
        const char *nm;
        ql_node *e = arg_expr(n->kids[i], &nm);
        int p = i;
        if (nm)
            for (p = 0; p < np && strcmp(ps->kids[p]->name, nm); p++)
                ;
        const qc_type *t = e->type ? e->type : expr(c, e, NULL);
        if (p < np && p < QC_MAX_PARAMS)
            types[p] = t, at[p] = n->kids[i];
    }
    ql_diags_truncate(c->d, mark);
    c->d->errors = errors;
    for (int p = 0; p < np && p < QC_MAX_PARAMS && ok; p++)
        ok = unify(c, n, g, ps->kids[p]->a, types[p], ps->kids[p]->name, bound, from);
    if (!ok)
        return NULL;
    for (int i = 0; i < tp->nkids; i++) {
        char set[128], a[64];
        if (!bound[i]) {
            err(c, n->a, "no argument of this call tells the type %s of '%s' (%s)", tp->kids[i]->name, g->name,
                qc_generic_set(g->decl, i, set, sizeof set));
            return NULL;
        }
        int in = 0;
        for (int j = 0; j < tp->kids[i]->nkids; j++)
            in |= qc_type_eq(qc_generic_member(tp->kids[i]->kids[j]), bound[i]);
        int p = 0;
        while (p < np && p < QC_MAX_PARAMS && strcmp(ps->kids[p]->name, from[i]))
            p++;
        if (!in) {
            err(c, p < np && p < QC_MAX_PARAMS && at[p] ? at[p] : n, "'%s' takes %s = %s, not %s (argument '%s')",
                g->name, tp->kids[i]->name, qc_generic_set(g->decl, i, set, sizeof set), TN(bound[i], a), from[i]);
            return NULL;
        }
    }
    int k = qc_generic_index(g->decl, bound);
    return k >= 0 && k < g->ninstances ? g->instances[k] : NULL;
}

/* An instance's diagnostics are its generic's, and said once: the first
 * instance with errors reports them, with a note naming its type arguments;
 * the other instances are checked quietly (their errors would repeat the
 * same lines). mark: the number of diagnostics before this part of s. */
static void instance_done(ctx *c, qc_sym *s, int mark)
{
    qc_sym *g = s->generic;
    if (!g)
        return;
    if (g->failed && g->failed != s->index + 1) {
        ql_diags_truncate(c->d, mark);
        return;
    }
    int errs = 0;
    for (int i = mark; i < c->d->n; i++)
        errs |= c->d->v[i].sev == QL_ERROR;
    if (errs && !g->failed) {
        char a[128];
        g->failed = s->index + 1;
        ql_note(c->d, decl_span(g->decl), "in '%s', the instance of '%s' for %s", s->name, g->name,
                qc_generic_args(g->decl, s->index, a, sizeof a));
    }
}

/* The instances of generic g, after it as items: each an ordinary fn or
 * kernel, named by its type arguments. */
static void add_item(ctx *c, qc_sym *s);
static void instantiate(ctx *c, qc_sym *g)
{
    ql_node *n = g->decl, *tp = n->d;
    char tb[64];
    int errors = c->d->errors;
    for (int i = 0; i < tp->nkids; i++) {
        ql_node *p = tp->kids[i];
        for (int j = 0; j < i; j++)
            if (!strcmp(tp->kids[j]->name, p->name))
                err_decl(c, p, "'%s' has two type parameters named '%s'", g->name, p->name);
        for (int k = 0; k < p->nkids; k++)
            for (int j = 0; j < k; j++)
                if (p->kids[j]->op == p->kids[k]->op)
                    err(c, p->kids[k], "%s lists %s twice", p->name, TN(qc_generic_member(p->kids[k]), tb));
    }
    if (c->d->errors > errors)
        return;
    int count = qc_generic_count(n);
    if (!count) {
        long combos = 1;
        for (int i = 0; i < tp->nkids && combos <= 1L << 40; i++)
            combos *= tp->kids[i]->nkids;
        if (tp->nkids > QC_GENERIC_MAX_PARAMS)
            err_decl(c, n, "'%s' has %d type parameters; a generic has at most %d", g->name, tp->nkids,
                     QC_GENERIC_MAX_PARAMS);
        else
            err_decl(c, n, "'%s' has %ld instances (one per combination of its type parameters' members); a generic "
                     "has at most %d", g->name, combos, QC_GENERIC_MAX_INSTANCES);
        return;
    }
    if (c->ninstances + count > QC_GENERIC_MAX_UNIT_INSTANCES) {
        err_decl(c, n, "'%s' has %d instances, which make %d with the generics before it; a recipe with its imports "
                 "has at most %d", g->name, count, c->ninstances + count, QC_GENERIC_MAX_UNIT_INSTANCES);
        return;
    }
    c->ninstances += count;
    g->instances = ql_alloc(c->ar, sizeof *g->instances * (size_t)count);
    for (int k = 0; k < count; k++) {
        const qc_type *args[QC_GENERIC_MAX_PARAMS];
        ql_node *d = qc_generic_instance(c->ar, n, k, args);
        qc_sym *s = new_sym(c, d->name, n->kind == QL_KERNEL ? QC_SYM_KERNEL : QC_SYM_FN, NULL, d);
        s->generic = g;
        s->index = k;
        d->sym = s;
        g->instances[g->ninstances++] = s;
        add_item(c, s);
    }
}

/* --------------------------------------------------------- recursion */

static int find_cycle(ctx *c, qc_sym *s, qc_sym **stack, int depth)
{
    if (s->mark == 2)
        return 0;
    if (s->mark == 1) {
        char path[512];
        int len = 0, from = depth - 1;
        while (from > 0 && stack[from] != s)
            from--;
        for (int i = from; i < depth && len < (int)sizeof path - 64; i++)
            len += snprintf(path + len, sizeof path - (size_t)len, "%s -> ", stack[i]->name);
        snprintf(path + len, sizeof path - (size_t)len, "%s", s->name);
        err_decl(c, s->decl, "recursion is not allowed: %s", path);
        return 1;
    }
    if (depth >= 256)
        return 0;
    s->mark = 1;
    stack[depth] = s;
    for (int i = 0; i < s->ncallees; i++)
        if (find_cycle(c, s->callees[i], stack, depth + 1))
            break;
    s->mark = 2;
    return 0;
}

/* --------------------------------------------------------------- main */

static void add_item(ctx *c, qc_sym *s)
{
    qc_unit *u = c->u;
    /* several affine rules may cover one op (the first whose where holds
     * applies), so only the other items clash */
    qc_sym *o = s->kind == QC_SYM_AFFINE ? NULL : qc_find_item(u, s->name);
    if (o) {
        err_decl(c, s->decl, "'%s' is defined twice", s->name);
        ql_note(c->d, decl_span(o->decl), "the first definition is here");
        return;
    }
    if (is_builtin_fn(s->name) && s->kind != QC_SYM_AFFINE) {
        err_decl(c, s->decl, "'%s' is a built-in function; choose another name", s->name);
        return;
    }
    if (u->nitems == u->capitems) {
        int cap = u->capitems ? u->capitems * 2 : 32;
        qc_sym **v = ql_alloc(c->ar, sizeof *v * (size_t)cap);
        if (u->nitems)
            memcpy(v, u->items, sizeof *v * (size_t)u->nitems);
        u->items = v;
        u->capitems = cap;
    }
    u->items[u->nitems++] = s;
    qc_names *idx = s->kind == QC_SYM_AFFINE ? &u->affine_names : &u->item_names;
    int first = qc_names_find(idx, u->items, s->name);
    if (first >= 0) { /* another rule for the op: chained after the first */
        s->next_same = u->items[first]->next_same;
        u->items[first]->next_same = s;
    } else if (qc_names_add(idx, u->items, u->nitems - 1) != 0) {
        u->nitems--;
        err_decl(c, s->decl, "out of memory");
    }
}

static void collect(ctx *c, qc_file *f)
{
    c->file = f;
    for (int i = 0; f->ast && i < f->ast->nkids; i++) {
        ql_node *n = f->ast->kids[i];
        qc_symkind k;
        switch (n->kind) {
        case QL_CONST: k = QC_SYM_CONST; break;
        case QL_FN: k = n->d ? QC_SYM_GENERIC : QC_SYM_FN; break;
        case QL_KERNEL: k = n->d ? QC_SYM_GENERIC : QC_SYM_KERNEL; break;
        case QL_CALIBRATOR: k = QC_SYM_CALIBRATOR; break;
        case QL_PATTERN: k = QC_SYM_PATTERN; break;
        case QL_AFFINE: k = QC_SYM_AFFINE; break;
        case QL_RECIPE: k = QC_SYM_RECIPE; break;
        default: continue;
        }
        if (!n->name)
            continue;
        qc_sym *s = new_sym(c, n->name, k, NULL, n);
        n->sym = s;
        int before = c->u->nitems;
        add_item(c, s);
        if (k == QC_SYM_GENERIC && c->u->nitems > before)
            instantiate(c, s);
    }
}

/* visible[i] = 1 for f and every file it imports, directly or not. */
static void mark_visible(qc_unit *u, qc_file *f, unsigned char *vis)
{
    for (int i = 0; i < u->nfiles; i++)
        if (u->files[i] == f) {
            if (vis[i])
                return;
            vis[i] = 1;
        }
    for (int i = 0; i < f->nimports; i++)
        mark_visible(u, f->imports[i], vis);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int qc_check(qc_unit *u)
{
    double t0 = now_ms();
    int before = u->diags.errors;
    ctx c = {.u = u, .ar = &u->arena, .d = &u->diags};
    c.visible = calloc((size_t)u->nfiles + 1, 1);
    if (!c.visible)
        return 1;
    for (int i = 0; i < u->nfiles; i++)
        collect(&c, u->files[i]);
    /* Function signatures first: calls anywhere need their parameter types. */
    for (int i = 0; i < u->nitems; i++) {
        qc_sym *s = u->items[i];
        if (s->kind != QC_SYM_FN && s->kind != QC_SYM_KERNEL)
            continue;
        c.file = s->file;
        memset(c.visible, 0, (size_t)u->nfiles);
        mark_visible(u, s->file, c.visible);
        c.w = W_CONST;
        int mark = u->diags.n;
        for (int p = 0; s->decl->a && p < s->decl->a->nkids; p++) {
            ql_node *pn = s->decl->a->kids[p];
            pn->type = check_type(&c, pn->a);
        }
        if (s->decl->b)
            check_type(&c, s->decl->b);
        instance_done(&c, s, mark);
    }
    for (int i = 0; i < u->nitems && !ql_diags_full(&u->diags); i++) {
        qc_sym *s = u->items[i];
        c.file = s->file;
        memset(c.visible, 0, (size_t)u->nfiles);
        mark_visible(u, s->file, c.visible);
        switch (s->kind) {
        case QC_SYM_CONST: const_item(&c, s); break;
        case QC_SYM_FN:
        case QC_SYM_KERNEL: {
            int mark = u->diags.n;
            function(&c, s);
            instance_done(&c, s, mark);
            break;
        }
        case QC_SYM_CALIBRATOR: calibrator(&c, s); break;
        case QC_SYM_PATTERN: pattern(&c, s); break;
        case QC_SYM_AFFINE: affine(&c, s); break;
        case QC_SYM_RECIPE: recipe(&c, s); break;
        default: break;
        }
    }
    qc_sym *stack[256];
    for (int i = 0; i < u->nitems; i++)
        if (u->items[i]->kind == QC_SYM_FN || u->items[i]->kind == QC_SYM_KERNEL)
            find_cycle(&c, u->items[i], stack, 0);
    free(c.visible);
    u->t_check += now_ms() - t0;
    return u->diags.errors - before;
}
