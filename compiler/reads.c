/* Which tensor parameters a kernel touches the elements of (reads.h): a walk
 * of the kernel's checked body and, at each call of a fn, of the fn's body
 * with each of its parameters bound to the kernel parameters the argument
 * names. A name bound to kernel parameters is "touched" wherever it occurs,
 * but in these shape-only places:
 *   t.numel, t.rank        fields of a tensor's shape;
 *   t.dim(k)               a method of its shape (k is walked);
 *   broadcast_index(t, u, i)  t and u for their shapes (i is walked);
 *   f(t)                   an argument of a fn whose body leaves its
 *                          parameter untouched (the fn walked with it bound).
 * Everything else that names one touches it: an index t[i], an assignment to
 * t[i], a method that reduces it (t.max()), a let of it (an alias), an
 * argument of a built-in or of a fn the walk cannot follow. Past the depth or
 * node bounds the walk gives up: every tensor parameter touched. */
#include "reads.h"

#include <string.h>

#define RD_MAX_DEPTH 64
#define RD_BUDGET 1000000L

typedef struct rd {
    uint64_t touched; /* parameters whose elements (a tensor's) or values (any other's) are read or written */
    uint64_t named;   /* parameters named at all, their shapes too (t.numel, t.dim(k), ...) */
    uint64_t written; /* tensor parameters an element of which is assigned */
    int depth;
    long budget;
    int gave_up;
} rd;

/* What each parameter of the frame's fn (or the kernel) is bound to: the kernel parameters it
 * names, by position (0: none, a scalar or an expression's value). */
typedef struct frame {
    const uint64_t *bind;
    int nparams;
} frame;

static void walk(rd *r, const frame *f, const ql_node *n);

/* The kernel parameters name n stands for: a parameter of the frame's fn bound to them. */
static uint64_t bound(const frame *f, const ql_node *n)
{
    const qc_sym *s = n && n->kind == QL_NAME ? n->sym : NULL;
    if (!s || s->kind != QC_SYM_PARAM || s->index < 0 || s->index >= f->nparams)
        return 0;
    return f->bind[s->index];
}

static int is_builtin(const ql_node *callee, const char *name)
{
    return callee->kind == QL_NAME && !callee->sym && callee->name && !strcmp(callee->name, name);
}

/* A call of fn s, whose body is walked with its parameters bound to the kernel parameters its
 * arguments name; other arguments are walked as values. */
static void call_fn(rd *r, const frame *f, const ql_node *call, const qc_sym *s)
{
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    if (np > QC_MAX_PARAMS || r->depth >= RD_MAX_DEPTH) {
        r->gave_up = 1;
        return;
    }
    uint64_t bind[QC_MAX_PARAMS] = {0}; /* a default value is a constant */
    for (int i = 0; i < call->nkids; i++) {
        const ql_node *a;
        int at = ql_call_param(ps, call->kids[i], i, &a);
        uint64_t b = bound(f, a);
        if (b && at >= 0 && at < np)
            bind[at] |= b;
        else
            walk(r, f, a);
    }
    frame callee = {bind, np};
    r->depth++;
    walk(r, &callee, s->decl->c);
    r->depth--;
}

static void call(rd *r, const frame *f, const ql_node *n)
{
    const ql_node *callee = n->a;
    const qc_sym *s = callee->kind == QL_NAME ? callee->sym : NULL;
    /* a fn with a body (kernels call no kernels; a generic here would be one not resolved to its
     * instance, walked as a built-in below) */
    if (s && s->kind == QC_SYM_FN && s->decl && s->decl->kind == QL_FN && !s->decl->d && s->decl->c) {
        call_fn(r, f, n, s);
        return;
    }
    int from = 0;
    if (is_builtin(callee, "broadcast_index")) /* the shapes of its two tensors */
        for (; from < 2 && from < n->nkids && bound(f, n->kids[from]); from++)
            r->named |= bound(f, n->kids[from]);
    else if (callee->kind == QL_FIELD && callee->name && !strcmp(callee->name, "dim") && bound(f, callee->a))
        r->named |= bound(f, callee->a); /* t.dim(k): its shape */
    else
        walk(r, f, callee);
    for (int i = from; i < n->nkids; i++)
        walk(r, f, n->kids[i]);
}

static void walk(rd *r, const frame *f, const ql_node *n)
{
    if (!n || r->gave_up)
        return;
    if (--r->budget <= 0) {
        r->gave_up = 1;
        return;
    }
    switch (n->kind) {
    case QL_NAME:
        r->touched |= bound(f, n);
        r->named |= bound(f, n);
        return;
    case QL_FIELD:
        if (n->name && (!strcmp(n->name, "numel") || !strcmp(n->name, "rank")) && bound(f, n->a)) {
            r->named |= bound(f, n->a);
            return;
        }
        break;
    case QL_ASSIGN: /* t[i] = v (or t = v): a write of what t is bound to */
        if (n->a)
            r->written |= bound(f, n->a->kind == QL_INDEX ? n->a->a : n->a);
        break;
    case QL_CALL: call(r, f, n); return;
    default: break;
    }
    walk(r, f, n->a);
    walk(r, f, n->b);
    walk(r, f, n->c);
    walk(r, f, n->d);
    for (int i = 0; i < n->nkids; i++)
        walk(r, f, n->kids[i]);
}

uint64_t qc_param_reads(const qc_sym *k)
{
    const ql_node *d = k ? k->decl : NULL;
    if (!d || k->kind != QC_SYM_KERNEL || d->kind != QL_KERNEL || d->d || !d->c)
        return UINT64_MAX;
    const ql_node *ps = d->a;
    int np = ps ? ps->nkids : 0;
    if (np > QC_MAX_PARAMS)
        return UINT64_MAX;
    uint64_t bind[QC_MAX_PARAMS] = {0}, tensors = 0;
    for (int i = 0; i < np; i++) {
        const qc_type *t = ps->kids[i]->type;
        if (!t || t->k == QC_ERROR)
            return UINT64_MAX;
        if (t->k == QC_TENSOR)
            bind[i] = (uint64_t)1 << i, tensors |= bind[i];
    }
    frame f = {bind, np};
    rd r = {.budget = RD_BUDGET};
    walk(&r, &f, d->c);
    return r.gave_up ? tensors : r.touched & tensors;
}

int qc_fill_reads(const qc_sym *k, uint64_t *uses, uint64_t *elems)
{
    const ql_node *d = k ? k->decl : NULL;
    *uses = *elems = 0;
    /* a tile kernel (its one kid, the axis) whose last statement is the row walk */
    if (!d || k->kind != QC_SYM_KERNEL || d->kind != QL_KERNEL || d->d || !d->c || d->nkids != 1 || d->c->nkids < 1)
        return 0;
    const ql_node *ps = d->a, *last = d->c->kids[d->c->nkids - 1];
    int np = ps ? ps->nkids : 0, fill = 0;
    if (np > QC_MAX_PARAMS || np > 64 || last->kind != QL_FOR || !last->name || strcmp(last->name, "ew.r"))
        return 0;
    uint64_t bind[QC_MAX_PARAMS] = {0}, tensors = 0, tables = 0;
    for (int i = 0; i < np; i++) {
        const qc_type *t = ps->kids[i]->type;
        const char *n = ps->kids[i]->name;
        if (!t || t->k == QC_ERROR || !n)
            return 0;
        bind[i] = (uint64_t)1 << i; /* every parameter, scalars too: a key holds their values */
        if (t->k == QC_TENSOR)
            tensors |= bind[i];
        if (!strncmp(n, "ew.tab", 6))
            tables |= bind[i];
        fill |= !strcmp(n, "ew.fill");
    }
    if (!fill)
        return 0;
    frame f = {bind, np};
    rd r = {.budget = RD_BUDGET};
    for (int i = 0; i + 1 < d->c->nkids; i++)
        walk(&r, &f, d->c->kids[i]);
    if (r.gave_up || (r.written & ~tables))
        return 0;
    *uses = r.named & ~tables;
    *elems = r.touched & tensors & ~tables;
    return 1;
}
