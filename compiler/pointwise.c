/* Pointwise kernels (pointwise.h): an abstract walk of a kernel's checked
 * body and, at each call, of the called fn's body with what its parameters
 * are bound to. Every expression is one of
 *   clean   a value that does not depend on which element is being computed:
 *           it may read the current element of tensors, but neither the
 *           element's position nor other elements;
 *   tensor  one of the kernel's tensor parameters (or a fn parameter bound
 *           to one);
 *   index   the variable of the pointwise loop (or a fn parameter bound to
 *           it): the position of the current element;
 *   numel   t.numel of a tensor.
 * and the kernel is pointwise when
 *   - a tensor is only indexed (one index, which is the index or
 *     broadcast_index(t, u, index) of tensors t, u: with one shape, that is
 *     the index), read for .numel, passed to broadcast_index as above, or
 *     passed to a fn (whose body then obeys these rules);
 *   - the index is only an index as above, or passed to a fn;
 *   - a pointwise loop is `for v in 0 .. t.numel` of a tensor t, not inside
 *     another one (the index would then be the outer element's);
 *   - .numel is only a pointwise loop's bound or an operand of a
 *     comparison (a.numel == y.numel: with one shape, the same either way);
 *   - a tensor is written only at the index, and inside the pointwise loop a
 *     variable only when it was declared inside the loop (or in a fn the
 *     loop calls): nothing carries over from one element to the next; no
 *     array element is written (an array may be a view of a parameter);
 *     `break` and `return` do not leave it early (continue may);
 *   - outside it, no tensor element is read or written (there is no index);
 *   - everything else is clean of tensors and the index: operators,
 *     built-ins other than broadcast_index, arrays, scalars, constants.
 * Anything not listed (a kernel's array output, a tensor local, .dim, .rank,
 * len of a tensor, the index used as a number) is not proven: 0. */
#include "pointwise.h"

#include <string.h>

typedef enum pv { V_NO, V_CLEAN, V_TENSOR, V_INDEX, V_NUMEL } pv;

/* Calls nest at most this deep, and a walk visits at most this many nodes
 * (each call walks its fn again): past them, not proven. */
#define PW_MAX_DEPTH 64
#define PW_BUDGET 1000000L

typedef struct pw {
    const qc_sym *loop;       /* the pointwise loop's variable; NULL outside the loop */
    const ql_node *loop_node; /* its FOR */
    int owner;                /* the depth of the frame whose loop it is */
    int inner;                /* loops around here inside it, in that frame */
    int depth;                /* the current frame (0: the kernel) */
    long budget;
} pw;

/* What a frame's parameters are bound to (V_CLEAN, V_TENSOR or V_INDEX), by position. */
typedef struct frame {
    const unsigned char *bind;
    int nparams;
} frame;

static pv expr(pw *p, const frame *f, const ql_node *n);
static int stmt(pw *p, const frame *f, const ql_node *n);

static int clean(pw *p, const frame *f, const ql_node *n)
{
    return expr(p, f, n) == V_CLEAN;
}

static int spend(pw *p)
{
    return --p->budget > 0;
}

static int is_builtin(const ql_node *callee, const char *name)
{
    return callee->kind == QL_NAME && !callee->sym && callee->name && !strcmp(callee->name, name);
}

/* An index of a tensor: the pointwise index, or broadcast_index(t, u, index). */
static int index_ok(pw *p, const frame *f, const ql_node *n)
{
    if (n->kind == QL_CALL && is_builtin(n->a, "broadcast_index")) {
        if (n->nkids != 3)
            return 0;
        for (int i = 0; i < 3; i++)
            if (n->kids[i]->kind == QL_NAMED_ARG)
                return 0;
        return expr(p, f, n->kids[0]) == V_TENSOR && expr(p, f, n->kids[1]) == V_TENSOR &&
               expr(p, f, n->kids[2]) == V_INDEX;
    }
    return expr(p, f, n) == V_INDEX;
}

static pv name_value(const frame *f, const pw *p, const ql_node *n)
{
    const qc_sym *s = n->sym;
    if (!s)
        return V_NO;
    switch (s->kind) {
    case QC_SYM_PARAM: return s->index >= 0 && s->index < f->nparams ? (pv)f->bind[s->index] : V_NO;
    case QC_SYM_LOOP: return s == p->loop ? V_INDEX : V_CLEAN;
    case QC_SYM_LOCAL: return s->type && (s->type->k == QC_TENSOR || s->type->k == QC_ERROR) ? V_NO : V_CLEAN;
    case QC_SYM_CONST:
    case QC_SYM_BUILTIN: return V_CLEAN;
    default: return V_NO;
    }
}

/* A call of fn s: its body walked with its parameters bound to what the arguments are. */
static pv call_fn(pw *p, const frame *f, const ql_node *call, const qc_sym *s)
{
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    if (np > QC_MAX_PARAMS || p->depth >= PW_MAX_DEPTH || !s->decl->c)
        return V_NO;
    unsigned char bind[QC_MAX_PARAMS];
    memset(bind, V_CLEAN, sizeof bind); /* a default value is a constant */
    for (int i = 0; i < call->nkids; i++) {
        const ql_node *a;
        int at = ql_call_param(ps, call->kids[i], i, &a);
        pv v = expr(p, f, a);
        if (at < 0 || at >= np || (v != V_CLEAN && v != V_TENSOR && v != V_INDEX))
            return V_NO;
        bind[at] = (unsigned char)v;
    }
    frame callee = {bind, np};
    p->depth++;
    int inner = p->inner;
    int ok = stmt(p, &callee, s->decl->c);
    p->inner = inner;
    p->depth--;
    return ok ? V_CLEAN : V_NO;
}

static pv call_value(pw *p, const frame *f, const ql_node *n)
{
    const ql_node *callee = n->a;
    if (callee->kind == QL_NAME && callee->sym) {
        const qc_sym *s = callee->sym;
        /* kernels call no kernels; a generic here would be one not resolved to its instance */
        return s->kind == QC_SYM_FN && s->decl && s->decl->kind == QL_FN && !s->decl->d ? call_fn(p, f, n, s) : V_NO;
    }
    if (callee->kind == QL_NAME) { /* a built-in: broadcast_index only as an index */
        if (is_builtin(callee, "broadcast_index"))
            return V_NO;
    } else if (callee->kind != QL_FIELD || !clean(p, f, callee->a)) /* a method of a tensor: .dim(...) */
        return V_NO;
    for (int i = 0; i < n->nkids; i++)
        if (!clean(p, f, n->kids[i]->kind == QL_NAMED_ARG ? n->kids[i]->a : n->kids[i]))
            return V_NO;
    return V_CLEAN;
}

static int comparison(ql_tok op)
{
    return op == QL_TOK_EQ || op == QL_TOK_NE || op == QL_TOK_LT || op == QL_TOK_LE || op == QL_TOK_GT ||
           op == QL_TOK_GE;
}

static pv expr(pw *p, const frame *f, const ql_node *n)
{
    if (!n || !spend(p))
        return V_NO;
    switch (n->kind) {
    case QL_INT:
    case QL_FLOAT:
    case QL_BOOL:
    case QL_STR: return V_CLEAN;
    case QL_NAME: return name_value(f, p, n);
    case QL_FIELD: {
        pv b = expr(p, f, n->a);
        if (b == V_TENSOR)
            return n->name && !strcmp(n->name, "numel") ? V_NUMEL : V_NO;
        return b == V_CLEAN ? V_CLEAN : V_NO;
    }
    case QL_INDEX: {
        pv b = expr(p, f, n->a);
        if (b == V_TENSOR)
            return n->nkids == 1 && index_ok(p, f, n->kids[0]) ? V_CLEAN : V_NO;
        if (b != V_CLEAN)
            return V_NO;
        for (int i = 0; i < n->nkids; i++)
            if (!clean(p, f, n->kids[i]))
                return V_NO;
        return V_CLEAN;
    }
    case QL_UNARY: return clean(p, f, n->a) ? V_CLEAN : V_NO;
    case QL_BINARY: {
        pv a = expr(p, f, n->a), b = expr(p, f, n->b);
        if (comparison(n->op) && (a == V_NUMEL || a == V_CLEAN) && (b == V_NUMEL || b == V_CLEAN))
            return V_CLEAN;
        return a == V_CLEAN && b == V_CLEAN ? V_CLEAN : V_NO;
    }
    case QL_CAST:
    case QL_SAT: return clean(p, f, n->b) ? V_CLEAN : V_NO;
    case QL_CALL: return call_value(p, f, n);
    default: return V_NO;
    }
}

static int contains(pw *p, const ql_node *t, const ql_node *n)
{
    if (!t || !spend(p))
        return 0;
    if (t == n)
        return 1;
    if (contains(p, t->a, n) || contains(p, t->b, n) || contains(p, t->c, n) || contains(p, t->d, n))
        return 1;
    for (int i = 0; i < t->nkids; i++)
        if (contains(p, t->kids[i], n))
            return 1;
    return 0;
}

/* Whether local s may be written here: inside the pointwise loop, only one declared in it (or
 * in a fn it calls, whose locals are new for each element). */
static int local_writable(pw *p, const qc_sym *s)
{
    if (!s || s->kind != QC_SYM_LOCAL || !s->mutable_)
        return 0;
    return !p->loop || p->owner != p->depth || contains(p, p->loop_node->c, s->decl);
}

static int assign_stmt(pw *p, const frame *f, const ql_node *n)
{
    const ql_node *t = n->a;
    if (!clean(p, f, n->b))
        return 0;
    if (t->kind == QL_NAME)
        return local_writable(p, t->sym);
    /* a tensor only at the index itself; an array may be a view of a parameter's */
    return t->kind == QL_INDEX && expr(p, f, t->a) == V_TENSOR && p->loop && t->nkids == 1 &&
           expr(p, f, t->kids[0]) == V_INDEX;
}

static int loop_body(pw *p, const frame *f, const ql_node *body)
{
    int mine = p->loop && p->owner == p->depth;
    p->inner += mine;
    int ok = stmt(p, f, body);
    p->inner -= mine;
    return ok;
}

static int for_stmt(pw *p, const frame *f, const ql_node *n)
{
    int from0 = n->a && n->a->kind == QL_INT && n->a->ival == 0;
    pv to = expr(p, f, n->b);
    if (from0 && to == V_NUMEL) {
        if (p->loop || !n->sym)
            return 0; /* nested: its index would be the outer element's */
        p->loop = n->sym;
        p->loop_node = n;
        p->owner = p->depth;
        p->inner = 0;
        int ok = stmt(p, f, n->c);
        p->loop = NULL;
        p->loop_node = NULL;
        return ok;
    }
    return to == V_CLEAN && clean(p, f, n->a) && loop_body(p, f, n->c);
}

static int stmt(pw *p, const frame *f, const ql_node *n)
{
    if (!n || !spend(p))
        return 0;
    int mine = p->loop && p->owner == p->depth;
    switch (n->kind) {
    case QL_BLOCK:
        for (int i = 0; i < n->nkids; i++)
            if (!stmt(p, f, n->kids[i]))
                return 0;
        return 1;
    case QL_LET: return !n->b || clean(p, f, n->b);
    case QL_ASSIGN: return assign_stmt(p, f, n);
    case QL_EXPR_STMT: return clean(p, f, n->a);
    case QL_IF: return clean(p, f, n->a) && stmt(p, f, n->b) && (!n->c || stmt(p, f, n->c));
    case QL_FOR: return for_stmt(p, f, n);
    case QL_WHILE: return clean(p, f, n->a) && loop_body(p, f, n->c);
    case QL_RETURN: return !mine && (!n->a || clean(p, f, n->a));
    case QL_BREAK: return !mine || p->inner > 0;
    case QL_CONTINUE: return 1;
    default: return 0;
    }
}

int qc_pointwise(const qc_sym *k)
{
    const ql_node *d = k ? k->decl : NULL;
    if (!d || k->kind != QC_SYM_KERNEL || d->kind != QL_KERNEL || d->d || !d->c)
        return 0;
    const ql_node *ps = d->a;
    int np = ps ? ps->nkids : 0;
    if (np > QC_MAX_PARAMS)
        return 0;
    unsigned char bind[QC_MAX_PARAMS];
    for (int i = 0; i < np; i++) {
        const qc_type *t = ps->kids[i]->type;
        if (!t || t->k == QC_ERROR)
            return 0;
        bind[i] = t->k == QC_TENSOR ? V_TENSOR : V_CLEAN;
    }
    frame f = {bind, np};
    pw p = {.budget = PW_BUDGET};
    return stmt(&p, &f, d->c);
}
