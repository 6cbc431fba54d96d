/* Element-wise epilogues (elementwise.h): the statement becomes loops made of
 * ordinary nodes, so the checker and the code generator see plain kernels.
 * Every node made here carries the statement's span, except the user's own
 * code (the channel block and the value), which keeps its spans for errors. */
#include "elementwise.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "generic.h"

typedef struct ew {
    ql_arena *ar;
    ql_span sp;
} ew;

/* Names the loops use: '.' keeps them out of the user's namespace. */
#define N_AXIS "ew.axis"
#define N_CH "ew.ch"
#define N_INNER "ew.inner"
#define N_OUTER "ew.outer"
#define N_D "ew.d"
#define N_O "ew.o"
#define N_K "ew.k"
#define N_I "ew.i"
#define N_R "ew.r"
#define N_FILL "ew.fill"
#define N_TAB "ew.tab" /* + the channel let's number: ew.tab0, ew.tab1, ... */
#define N_BITS "ew.bits"
#define N_UBITS "ew.ubits"
#define N_FROM_BITS "ew.from_bits"

static const char *const tile_params[QC_TILE_EXTRA_PARAMS] = {"c0", "rows", "cols", "acc_rs", "y_off", "y_rs"};

static ql_node *node(ew *e, ql_kind k)
{
    return ql_node_new(e->ar, k, e->sp);
}

/* "ew.tab<i>": the table of channel let i in the channels-last kernel */
static const char *tab_name(ew *e, int i)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%s%d", N_TAB, i);
    char *s = ql_alloc(e->ar, (size_t)n + 1);
    memcpy(s, buf, (size_t)n + 1);
    return s;
}

static ql_node *name(ew *e, const char *s)
{
    ql_node *n = node(e, QL_NAME);
    n->name = s;
    return n;
}

static ql_node *num(ew *e, int64_t v)
{
    ql_node *n = node(e, QL_INT);
    n->op = QL_TOK_INT;
    n->ival = (uint64_t)v;
    return n;
}

static ql_node *bin(ew *e, ql_tok op, ql_node *a, ql_node *b)
{
    ql_node *n = ql_node_bin(e->ar, op, a, b);
    n->span = e->sp;
    return n;
}

static ql_node *call(ew *e, ql_node *callee, ql_node *a0, ql_node *a1, ql_node *a2)
{
    ql_node *n = node(e, QL_CALL);
    n->a = callee;
    ql_node_add(e->ar, n, a0);
    ql_node_add(e->ar, n, a1);
    ql_node_add(e->ar, n, a2);
    n->span = e->sp;
    return n;
}

static ql_node *field(ew *e, const char *obj, const char *f)
{
    ql_node *n = node(e, QL_FIELD);
    n->a = name(e, obj);
    n->name = f;
    return n;
}

/* t.dim(d) */
static ql_node *dim(ew *e, const char *t, ql_node *d)
{
    return call(e, field(e, t, "dim"), d, NULL, NULL);
}

static ql_node *index1(ew *e, const char *t, ql_node *i)
{
    ql_node *n = node(e, QL_INDEX);
    n->a = name(e, t);
    ql_node_add(e->ar, n, i);
    n->span = e->sp;
    return n;
}

static ql_node *i64_type(ew *e)
{
    ql_node *t = node(e, QL_TYPE);
    t->op = QL_TOK_I64;
    return t;
}

static ql_node *let(ew *e, const char *n, ql_node *value, int var)
{
    ql_node *l = node(e, QL_LET);
    l->name = n;
    l->name_span = e->sp;
    l->a = var ? i64_type(e) : NULL;
    l->b = value;
    l->flag = var;
    return l;
}

static ql_node *assign(ew *e, ql_tok op, ql_node *target, ql_node *value)
{
    ql_node *n = node(e, QL_ASSIGN);
    n->op = op;
    n->a = target;
    n->b = value;
    return n;
}

/* for v in from .. to { body }, body a BLOCK filled by the caller */
static ql_node *loop(ew *e, const char *v, ql_node *from, ql_node *to, ql_node **body)
{
    ql_node *f = node(e, QL_FOR);
    f->name = v;
    f->name_span = e->sp;
    f->a = from;
    f->b = to;
    f->c = *body = node(e, QL_BLOCK);
    return f;
}

/* The channel block's statements (a copy of them), then the element loop. */
static void channel_body(ew *e, const ql_node *st, ql_node *into, ql_node *elem_loop)
{
    for (int i = 0; st->c && i < st->c->nkids; i++)
        ql_node_add(e->ar, into, qc_clone(e->ar, st->c->kids[i]));
    ql_node_add(e->ar, into, elem_loop);
}

/* let a = acc[at]; y[to] = value */
static void element(ew *e, const ql_node *st, ql_node *into, ql_node *at, ql_node *to)
{
    const char *acc = st->a->name, *y = st->kids[0]->name;
    ql_node *l = let(e, st->name, index1(e, acc, at), 0);
    l->name_span = st->name_span;
    ql_node_add(e->ar, into, l);
    ql_node *v = qc_clone(e->ar, st->d);
    ql_node *set = assign(e, QL_TOK_ASSIGN, index1(e, y, to), v);
    set->span = v->span; /* a value of the wrong type is reported there */
    ql_node_add(e->ar, into, set);
}

/* The whole-tensor walk, in place of the statement:
 *   let ew.axis = select(axis < 0, acc.rank + axis, axis)
 *   let ew.ch = acc.dim(ew.axis)
 *   var ew.inner: i64 = 1
 *   for ew.d in ew.axis + 1 .. acc.rank { ew.inner *= acc.dim(ew.d) }
 *   let ew.outer = acc.numel / max(ew.ch * ew.inner, 1)
 *   for ew.o in 0 .. ew.outer { for c in 0 .. ew.ch { channel...
 *     for ew.k in 0 .. ew.inner { let ew.i = (ew.o * ew.ch + c) * ew.inner + ew.k
 *       let a = acc[ew.i]; y[ew.i] = value } } } */
static void whole(ew *e, const ql_node *st, ql_node *body)
{
    const char *acc = st->a->name, *c = st->kids[1]->name;
    ql_node *ax = st->b;
    ql_node *sel = call(e, name(e, "select"), bin(e, QL_TOK_LT, qc_clone(e->ar, ax), num(e, 0)),
                        bin(e, QL_TOK_PLUS, field(e, acc, "rank"), qc_clone(e->ar, ax)), qc_clone(e->ar, ax));
    ql_node_add(e->ar, body, let(e, N_AXIS, sel, 0));
    ql_node_add(e->ar, body, let(e, N_CH, dim(e, acc, name(e, N_AXIS)), 0));
    ql_node_add(e->ar, body, let(e, N_INNER, num(e, 1), 1));
    ql_node *db;
    ql_node_add(e->ar, body, loop(e, N_D, bin(e, QL_TOK_PLUS, name(e, N_AXIS), num(e, 1)), field(e, acc, "rank"), &db));
    ql_node_add(e->ar, db, assign(e, QL_TOK_STAREQ, name(e, N_INNER), dim(e, acc, name(e, N_D))));
    ql_node *per = bin(e, QL_TOK_STAR, name(e, N_CH), name(e, N_INNER));
    ql_node_add(e->ar, body, let(e, N_OUTER, bin(e, QL_TOK_SLASH, field(e, acc, "numel"),
                                                 call(e, name(e, "max"), per, num(e, 1), NULL)), 0));
    ql_node *ob, *cb, *kb;
    ql_node_add(e->ar, body, loop(e, N_O, num(e, 0), name(e, N_OUTER), &ob));
    ql_node_add(e->ar, ob, loop(e, c, num(e, 0), name(e, N_CH), &cb));
    ql_node *kl = loop(e, N_K, num(e, 0), name(e, N_INNER), &kb);
    channel_body(e, st, cb, kl);
    ql_node *at = bin(e, QL_TOK_PLUS,
                      bin(e, QL_TOK_STAR, bin(e, QL_TOK_PLUS, bin(e, QL_TOK_STAR, name(e, N_O), name(e, N_CH)), name(e, c)),
                          name(e, N_INNER)),
                      name(e, N_K));
    ql_node_add(e->ar, kb, let(e, N_I, at, 0));
    element(e, st, kb, name(e, N_I), name(e, N_I));
}

/* The tile kernel's body after the layer's lets:
 *   for ew.r in 0 .. rows { let c = c0 + ew.r; channel...
 *     for ew.k in 0 .. cols { let a = acc[ew.r * acc_rs + ew.k]
 *       y[y_off + ew.r * y_rs + ew.k] = value } } */
static void tile(ew *e, const ql_node *st, ql_node *body)
{
    const char *c = st->kids[1]->name;
    ql_node *rb, *kb;
    ql_node_add(e->ar, body, loop(e, N_R, num(e, 0), name(e, "rows"), &rb));
    ql_node_add(e->ar, rb, let(e, c, bin(e, QL_TOK_PLUS, name(e, "c0"), name(e, N_R)), 0));
    ql_node *kl = loop(e, N_K, num(e, 0), name(e, "cols"), &kb);
    channel_body(e, st, rb, kl);
    ql_node *at = bin(e, QL_TOK_PLUS, bin(e, QL_TOK_STAR, name(e, N_R), name(e, "acc_rs")), name(e, N_K));
    ql_node *to = bin(e, QL_TOK_PLUS, name(e, "y_off"),
                      bin(e, QL_TOK_PLUS, bin(e, QL_TOK_STAR, name(e, N_R), name(e, "y_rs")), name(e, N_K)));
    element(e, st, kb, at, to);
}

/* The number of channel lets of st (the grammar allows only lets there), or -1 when the block
 * is not whole lets (what a parse error left): no channels-last kernel then. */
static int channel_lets(const ql_node *st)
{
    for (int i = 0; st->c && i < st->c->nkids; i++)
        if (st->c->kids[i]->kind != QL_LET || !st->c->kids[i]->name || !st->c->kids[i]->b)
            return -1;
    return st->c ? st->c->nkids : 0;
}

/* The most tables a channels-last kernel gets; past it, no uniform ones (below). */
#define MAX_TABLES 32

static const ql_node *param(const ql_node *kernel, const char *n);

static int is_channel_let(const ql_node *st, const char *n)
{
    for (int i = 0; st->c && i < st->c->nkids; i++)
        if (!strcmp(st->c->kids[i]->name, n))
            return 1;
    return 0;
}

/* The names the value reads that are neither the element, the channel, a channel let nor a
 * tensor parameter (the layer's lets, scalar parameters, constants), each once, in order: the
 * vector form of the value (compiler/vecmap.h) reads them from tables as it reads channel lets. */
static void uniform_names(const ql_node *kernel, const ql_node *st, const ql_node *t, const char **out, int *n, int cap)
{
    if (!t)
        return;
    if (t->kind == QL_NAME && t->name && strcmp(t->name, st->name) && strcmp(t->name, st->kids[1]->name) &&
        !is_channel_let(st, t->name)) {
        const ql_node *p = param(kernel, t->name);
        int seen = p && p->a && p->a->kind == QL_TYPE_TENSOR;
        for (int i = 0; i < *n && !seen; i++)
            seen = !strcmp(out[i], t->name);
        if (!seen && *n < cap)
            out[(*n)++] = t->name;
        else if (!seen)
            *n = cap + 1; /* too many: none */
    }
    if (t->kind != QL_CALL || t->a->kind != QL_NAME) /* a callee's name is no value */
        uniform_names(kernel, st, t->a, out, n, cap);
    uniform_names(kernel, st, t->b, out, n, cap);
    uniform_names(kernel, st, t->c, out, n, cap);
    if (t->kind != QL_NAME) /* a generic instance's type arguments */
        uniform_names(kernel, st, t->d, out, n, cap);
    for (int i = 0; i < t->nkids; i++)
        uniform_names(kernel, st, t->kids[i], out, n, cap);
}

/* The uniform names of the value (above), or none when there are too many. */
static int uniforms(const ql_node *kernel, const ql_node *st, const char **out)
{
    int n = 0, cap = MAX_TABLES - channel_lets(st);
    if (cap <= 0)
        return 0;
    uniform_names(kernel, st, st->d, out, &n, cap);
    return n > cap ? 0 : n;
}

/* The channels-last kernel's body after the layer's lets (see elementwise.h); the tables are
 * indexed by channel, so a block may start at any channel c0:
 *   if ew.fill != 0 { for ew.k in 0 .. cols { let c = c0 + ew.k; channel...
 *                       ew.tab<i>[c] = ew.bits(<let i>) } }
 *   for ew.r in 0 .. rows { for ew.k in 0 .. cols { let c = c0 + ew.k
 *     let <let i> = ew.from_bits(ew.tab<i>[c], <let i's value>)   (typed as the value; not evaluated)
 *     let a = acc[ew.r * acc_rs + ew.k]; y[y_off + ew.r * y_rs + ew.k] = value } } */
static void channels_last(ew *e, const ql_node *kernel, const ql_node *st, ql_node *body)
{
    const char *c = st->kids[1]->name;
    int nl = channel_lets(st);
    const char *un[MAX_TABLES];
    int nu = uniforms(kernel, st, un);
    ql_node *iff = node(e, QL_IF), *fb, *kb;
    iff->a = bin(e, QL_TOK_NE, name(e, N_FILL), num(e, 0));
    iff->b = node(e, QL_BLOCK);
    ql_node_add(e->ar, body, iff);
    ql_node_add(e->ar, iff->b, loop(e, N_K, num(e, 0), name(e, "cols"), &fb));
    ql_node_add(e->ar, fb, let(e, c, bin(e, QL_TOK_PLUS, name(e, "c0"), name(e, N_K)), 0));
    for (int i = 0; i < nl; i++)
        ql_node_add(e->ar, fb, qc_clone(e->ar, st->c->kids[i]));
    for (int i = 0; i < nl; i++) {
        const ql_node *l = st->c->kids[i];
        ql_node *bits = node(e, QL_CALL), *v = name(e, l->name);
        bits->a = name(e, N_BITS);
        v->span = l->b->span; /* a let that is no scalar is reported at its value */
        ql_node_add(e->ar, bits, v);
        ql_node_add(e->ar, fb, assign(e, QL_TOK_ASSIGN, index1(e, tab_name(e, i), name(e, c)), bits));
    }
    for (int i = 0; i < nu; i++) { /* ew.tab<nl + i>[c] = ew.ubits(<uniform i>): 0 unless a scalar */
        ql_node *bits = node(e, QL_CALL);
        bits->a = name(e, N_UBITS);
        ql_node_add(e->ar, bits, name(e, un[i]));
        ql_node_add(e->ar, fb, assign(e, QL_TOK_ASSIGN, index1(e, tab_name(e, nl + i), name(e, c)), bits));
    }
    ql_node *rb;
    ql_node_add(e->ar, body, loop(e, N_R, num(e, 0), name(e, "rows"), &rb));
    ql_node_add(e->ar, rb, loop(e, N_K, num(e, 0), name(e, "cols"), &kb));
    ql_node_add(e->ar, kb, let(e, c, bin(e, QL_TOK_PLUS, name(e, "c0"), name(e, N_K)), 0));
    for (int i = 0; i < nl; i++) {
        const ql_node *l = st->c->kids[i];
        ql_node *from = node(e, QL_CALL);
        from->a = name(e, N_FROM_BITS);
        ql_node_add(e->ar, from, index1(e, tab_name(e, i), name(e, c)));
        ql_node_add(e->ar, from, qc_clone(e->ar, l->b));
        ql_node *nl_let = let(e, l->name, from, 0);
        nl_let->a = l->a ? qc_clone(e->ar, l->a) : NULL; /* a declared type stays */
        nl_let->name_span = l->name_span;
        ql_node_add(e->ar, kb, nl_let);
    }
    ql_node *at = bin(e, QL_TOK_PLUS, bin(e, QL_TOK_STAR, name(e, N_R), name(e, "acc_rs")), name(e, N_K));
    ql_node *to = bin(e, QL_TOK_PLUS, name(e, "y_off"),
                      bin(e, QL_TOK_PLUS, bin(e, QL_TOK_STAR, name(e, N_R), name(e, "y_rs")), name(e, N_K)));
    element(e, st, kb, at, to);
}

/* ---------------------------------------------------------------- checks */

static const ql_node *param(const ql_node *kernel, const char *n)
{
    for (int i = 0; kernel->a && i < kernel->a->nkids; i++)
        if (!strcmp(kernel->a->kids[i]->name, n))
            return kernel->a->kids[i];
    return NULL;
}

/* The first NAME n in tree t (not a field's name), or NULL. */
static const ql_node *find_name(const ql_node *t, const char *n)
{
    if (!t)
        return NULL;
    if (t->kind == QL_NAME && t->name && !strcmp(t->name, n))
        return t;
    const ql_node *sub[4] = {t->a, t->b, t->c, t->d}, *r;
    for (int i = 0; i < 4; i++)
        if ((r = find_name(sub[i], n)))
            return r;
    for (int i = 0; i < t->nkids; i++)
        if ((r = find_name(t->kids[i], n)))
            return r;
    return NULL;
}

/* The accumulator and the output are whole tensors only in the kernel: the
 * tile kernel gets a block of them, so the layer's lets, the channel block
 * and the value may not name them. */
static int tensors_unread(const ql_node *st, const ql_node *t, const char *where, ql_diags *d)
{
    const char *names[2] = {st->a->name, st->kids[0]->name};
    for (int i = 0; i < 2; i++) {
        const ql_node *at = find_name(t, names[i]);
        if (at) {
            if (i == 0)
                ql_error(d, at->span,
                         "'%s' cannot be read in %s: an element-wise epilogue sees one element of it, as '%s'",
                         names[i], where, st->name);
            else
                ql_error(d, at->span, "'%s' cannot be read in %s: the value is what an element-wise epilogue writes to it",
                         names[i], where);
            return 1;
        }
    }
    return 0;
}

static int tensor_param(const ql_node *kernel, const ql_node *nm, const char *role, ql_diags *d)
{
    const ql_node *p = param(kernel, nm->name);
    if (p && p->a && p->a->kind == QL_TYPE_TENSOR)
        return 0;
    ql_error(d, nm->span, "the %s of an elementwise statement must be a tensor parameter of kernel '%s'", role,
             kernel->name);
    return 1;
}

static int check_form(const ql_node *kernel, int at, ql_diags *d)
{
    const ql_node *body = kernel->c, *st = body->kids[at];
    int errs = 0;
    if (at != body->nkids - 1) {
        ql_error(d, st->span, "an elementwise statement must be the last statement of its kernel");
        errs++;
    }
    for (int i = 0; i < at; i++)
        if (body->kids[i]->kind != QL_LET) {
            ql_error(d, body->kids[i]->span,
                     "only let and var may come before an elementwise statement: the runtime runs them once for "
                     "each block of the accumulator");
            errs++;
        } else
            errs += tensors_unread(st, body->kids[i], "the lets before an elementwise statement", d);
    errs += tensor_param(kernel, st->a, "accumulator", d);
    errs += tensor_param(kernel, st->kids[0], "output", d);
    if (!errs) {
        errs += tensors_unread(st, st->c, "a channel block", d);
        errs += tensors_unread(st, st->d, "the value", d);
    }
    const ql_node *ax = st->b;
    int lit = ax->kind == QL_INT || (ax->kind == QL_UNARY && ax->op == QL_TOK_MINUS && ax->a && ax->a->kind == QL_INT);
    if (!lit && !(ax->kind == QL_NAME && param(kernel, ax->name))) {
        ql_error(d, ax->span, "an elementwise statement's axis must be a parameter of kernel '%s' or an integer "
                 "literal: the runtime reads it to know which axis a block's rows are", kernel->name);
        errs++;
    }
    for (int i = 0; i < QC_TILE_EXTRA_PARAMS && !errs; i++)
        if (param(kernel, tile_params[i])) {
            ql_error(d, param(kernel, tile_params[i])->span,
                     "a kernel with an elementwise statement cannot have a parameter named '%s' (its tile kernel "
                     "adds one)", tile_params[i]);
            errs++;
        }
    return errs;
}

/* ----------------------------------------------------------------- lower */

static void add_param(ew *e, ql_node *params, const char *n, ql_node *type)
{
    ql_node *p = node(e, QL_PARAM);
    p->name = n;
    p->name_span = e->sp;
    p->a = type;
    ql_node_add(e->ar, params, p);
}

/* k.tile (nhwc 0): k's parameters and lets, the six of the block, and the tile walk; k.nhwc
 * (nhwc 1): the same six, ew.fill and one table per channel let, and the channels-last walk. */
static ql_node *tile_kernel(ew *e, const ql_node *kernel, const ql_node *st, int nhwc)
{
    ql_node *t = qc_clone(e->ar, kernel);
    const char *suffix = nhwc ? ".nhwc" : ".tile";
    size_t nl = strlen(kernel->name) + strlen(suffix) + 1;
    char *nm = ql_alloc(e->ar, nl);
    snprintf(nm, nl, "%s%s", kernel->name, suffix);
    t->name = nm;
    for (int i = 0; i < QC_TILE_EXTRA_PARAMS; i++)
        add_param(e, t->a, tile_params[i], i64_type(e));
    if (nhwc) {
        add_param(e, t->a, N_FILL, i64_type(e));
        const char *un[MAX_TABLES];
        for (int i = 0; i < channel_lets(st) + uniforms(kernel, st, un); i++) {
            ql_node *tt = node(e, QL_TYPE_TENSOR);
            tt->a = i64_type(e);
            add_param(e, t->a, tab_name(e, i), tt);
        }
    }
    t->a->span = kernel->a->span;
    ql_node *body = node(e, QL_BLOCK);
    for (int i = 0; i + 1 < kernel->c->nkids; i++)
        ql_node_add(e->ar, body, qc_clone(e->ar, kernel->c->kids[i]));
    if (nhwc)
        channels_last(e, kernel, st, body);
    else
        tile(e, st, body);
    body->span = kernel->c->span;
    t->c = body;
    t->kids = NULL; /* its one kid: the axis, for the runtime (compiler/jit_items.c set_tile_axis) */
    t->nkids = t->capkids = 0;
    ql_node_add(e->ar, t, qc_clone(e->ar, st->b));
    t->span = kernel->span;
    return t;
}

static int lower_items(ql_node *module, ql_arena *ar, ql_diags *d);

/* Removes every elementwise statement under n that is not where one may be; item is the top-level
 * declaration n is in: the message says whether the statement is in a kernel at all. */
static int misplaced(ql_node *n, const ql_node *item, ql_diags *d)
{
    if (!n)
        return 0;
    int errs = misplaced(n->a, item, d) + misplaced(n->b, item, d) + misplaced(n->c, item, d) +
               misplaced(n->d, item, d);
    int out = 0;
    for (int i = 0; i < n->nkids; i++) {
        if (n->kids[i]->kind == QL_ELEMENTWISE) {
            if (item->kind == QL_KERNEL)
                ql_error(d, n->kids[i]->span, "an elementwise statement must be the last statement of a kernel");
            else
                ql_error(d, n->kids[i]->span, "an elementwise statement is the last statement of a kernel's body, "
                                              "and '%s' is not a kernel", item->name ? item->name : "this");
            errs++;
            continue;
        }
        errs += misplaced(n->kids[i], item, d);
        n->kids[out++] = n->kids[i];
    }
    n->nkids = out;
    return errs;
}

int qc_elementwise_lower(ql_node *module, ql_arena *ar, ql_diags *d)
{
    if (!module)
        return 0;
    /* Out of memory jumps back here (lang/arena.h): a kernel is rewritten only once its new
     * bodies are whole, so what is left is checked as it was parsed. */
    jmp_buf oom, *outer = ar->on_oom;
    if (setjmp(oom)) {
        ar->on_oom = outer;
        ql_error_file(d, module->span.src ? module->span.src->path : NULL, "out of memory");
        return 1;
    }
    ar->on_oom = &oom;
    int errs = lower_items(module, ar, d);
    ar->on_oom = outer;
    return errs;
}

static int lower_items(ql_node *module, ql_arena *ar, ql_diags *d)
{
    int errs = 0, nitems = module->nkids;
    for (int i = 0; i < nitems; i++) {
        ql_node *k = module->kids[i];
        int at = -1;
        for (int s = 0; k->kind == QL_KERNEL && k->c && s < k->c->nkids && at < 0; s++)
            if (k->c->kids[s]->kind == QL_ELEMENTWISE)
                at = s;
        if (at >= 0) {
            ql_node *st = k->c->kids[at];
            if (!st->c || !st->d || check_form(k, at, d)) {
                errs++;
                k->c->kids[at] = ql_node_new(ar, QL_BLOCK, st->span); /* checked as nothing */
            } else {
                ew e = {ar, st->span};
                ql_node *t = tile_kernel(&e, k, st, 0), *cl = channel_lets(st) >= 0 ? tile_kernel(&e, k, st, 1) : NULL;
                ql_node *body = ql_node_new(ar, QL_BLOCK, k->c->span);
                for (int s = 0; s < at; s++)
                    ql_node_add(ar, body, k->c->kids[s]);
                whole(&e, st, body);
                body->span = k->c->span;
                k->c = body;
                ql_node_add(ar, module, t);
                if (cl)
                    ql_node_add(ar, module, cl);
            }
        }
        errs += misplaced(k, k, d);
    }
    return errs;
}
