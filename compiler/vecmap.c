/* The vector form of an element-wise epilogue's value (vecmap.h): a walk of
 * the channels-last kernel's checked value, calls inlined, each node one
 * instruction of i32 or f32 lanes, or no program. The channels-last kernel
 * (compiler/elementwise.c) is
 *   ...layer lets
 *   if ew.fill != 0 { for ew.k { let c; channel lets; ew.tab<i>[c] = ew.bits(let i)
 *                                 ew.tab<nl + j>[c] = ew.ubits(uniform j) } }
 *   for ew.r { for ew.k { let c; let <let i> = ew.from_bits(ew.tab<i>[c], ...)
 *                         let a = acc[...]; y[...] = value } }
 * so the value's names are the element (acc), a channel let (its table), a
 * uniform (a layer let, a parameter or a constant: its table, filled with
 * its bits), or what an inlined fn binds. */
#include "vecmap.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Lane types: 32-bit numbers, or y's 8-bit type (a sat's result, held in i32 lanes); VT_F64 only
 * for a stage's f64 parameter, which has no lanes until converted to f32 (pard). */
enum { VT_I32, VT_F32, VT_U8, VT_I8, VT_F64 };

/* A name bound to a value: a table, the accumulator, or an inlined fn's parameter or let. */
typedef struct bind {
    const void *key; /* a qc_sym, or its LET node */
    int value;
} bind;

#define VM_MAX_BINDS 128
#define VM_MAX_DEPTH 16

typedef struct vm {
    char *buf;
    size_t n, len;
    int ninsn, ok;
    unsigned char vtype[QC_VEC_MAX_INSNS];
    bind binds[VM_MAX_BINDS];
    int nbinds, depth;
    /* a stage (qc_vecmap_stage): its kernel's parameters, the loop's variable */
    const ql_node *params;
    const qc_sym *loop;
} vm;

/* A stage's f64 parameter P as a value: no instruction until it is converted (pard P). */
#define VM_F64_PARAM (1 << 20)

static int emit(vm *v, int type, const char *fmt, ...)
{
    if (!v->ok || v->ninsn >= QC_VEC_MAX_INSNS) {
        v->ok = 0;
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    if (v->len && v->len < v->n)
        v->buf[v->len++] = ';';
    int w = v->len < v->n ? vsnprintf(v->buf + v->len, v->n - v->len, fmt, ap) : -1;
    va_end(ap);
    if (w < 0 || v->len + (size_t)w >= v->n) {
        v->ok = 0;
        return -1;
    }
    v->len += (size_t)w;
    v->vtype[v->ninsn] = (unsigned char)type;
    return v->ninsn++;
}

static int lane_type(const qc_type *t)
{
    return !t ? -1 : t->k == QC_I32 ? VT_I32 : t->k == QC_F32 ? VT_F32 : t->k == QC_U8 ? VT_U8 : t->k == QC_I8 ? VT_I8 : -1;
}

/* An inlined fn's parameter type: its lanes, or VT_F64 for an f64 one (which only a stage's f64
 * parameter passes: any other value fails to convert to it). */
static int param_type(const qc_type *t)
{
    return t && t->k == QC_F64 ? VT_F64 : lane_type(t);
}

static int fail(vm *v)
{
    v->ok = 0;
    return -1;
}

/* Value x as lanes of type to: i32 to f32 as C converts; f32 to i32 has no exact lane form here. */
static int convert(vm *v, int x, int to)
{
    if (x >= VM_F64_PARAM) /* a stage's f64 parameter: as itself, or its f32 as C converts it */
        return to == VT_F64 ? x : to == VT_F32 ? emit(v, VT_F32, "pard %d", x - VM_F64_PARAM) : fail(v);
    if (x < 0 || to < 0 || to == VT_F64)
        return fail(v);
    if (v->vtype[x] == to)
        return x;
    int from = v->vtype[x] == VT_U8 || v->vtype[x] == VT_I8 ? VT_I32 : v->vtype[x]; /* a byte is its i32 */
    if (from == to)
        return x;
    if (from == VT_I32 && to == VT_F32)
        return emit(v, VT_F32, "cvtf %d", x);
    return fail(v);
}

static int lookup(const vm *v, const void *key)
{
    for (int i = v->nbinds - 1; i >= 0; i--)
        if (v->binds[i].key == key)
            return v->binds[i].value;
    return -1;
}

static void bind_to(vm *v, const void *key, int value)
{
    if (v->nbinds >= VM_MAX_BINDS || value < 0) { /* (VM_F64_PARAM + P binds too) */
        v->ok = 0;
        return;
    }
    v->binds[v->nbinds++] = (bind){key, value};
}

static int expr(vm *v, const ql_node *n, int want);

/* A literal's value in lanes of type want (as the scalar code's cast of it). */
static int literal(vm *v, const ql_node *n, int want)
{
    int64_t iv = n->kind == QL_INT ? (int64_t)n->ival : 0;
    double fv = n->kind == QL_FLOAT ? n->fval : (double)iv;
    if (want == VT_F32) {
        float f = (float)fv;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        return emit(v, VT_F32, "constf %x", bits);
    }
    if (want == VT_I32 && n->kind == QL_INT && iv >= INT32_MIN && iv <= INT32_MAX)
        return emit(v, VT_I32, "consti %x", (uint32_t)(int32_t)iv);
    return fail(v);
}

/* -x: a literal's negation folded (so -128 is one constant), else negi / negf. */
static int negate(vm *v, const ql_node *n, int want)
{
    if (n->a && (n->a->kind == QL_INT || n->a->kind == QL_FLOAT)) {
        ql_node lit = {.kind = QL_FLOAT, .fval = n->a->kind == QL_INT ? -(double)n->a->ival : -n->a->fval};
        if (n->a->kind == QL_INT && want == VT_I32)
            return n->a->ival > (uint64_t)INT32_MAX + 1 ? fail(v)
                                                         : emit(v, VT_I32, "consti %x", (uint32_t)(0u - (uint32_t)n->a->ival));
        return want == VT_F32 ? literal(v, &lit, want) : fail(v);
    }
    int t = lane_type(n->type);
    int x = convert(v, expr(v, n->a, t), t);
    return x < 0 || t > VT_F32 ? fail(v) : emit(v, t, t == VT_F32 ? "negf %d" : "negi %d", x);
}

static int binary(vm *v, const ql_node *n)
{
    int t = lane_type(n->type);
    const char *op = n->op == QL_TOK_PLUS ? "add" : n->op == QL_TOK_MINUS ? "sub" : n->op == QL_TOK_STAR ? "mul"
                   : n->op == QL_TOK_SLASH && t == VT_F32 ? "div" : NULL;
    if (t < 0 || !op)
        return fail(v);
    int a = convert(v, expr(v, n->a, t), t), b = convert(v, expr(v, n->b, t), t);
    return a < 0 || b < 0 ? -1 : emit(v, t, "%s%c %d %d", op, t == VT_F32 ? 'f' : 'i', a, b);
}

/* A call of a fn whose body is lets and a return: inlined, its parameters bound to the
 * arguments as the fn's types have them. */
static int inline_fn(vm *v, const ql_node *call, const qc_sym *s)
{
    const ql_node *fn = s->decl, *ps = fn->a, *body = fn->c;
    int np = ps ? ps->nkids : 0;
    if (!body || fn->d || call->nkids != np || v->depth >= VM_MAX_DEPTH)
        return fail(v);
    int args[QC_MAX_PARAMS];
    for (int i = 0; i < np; i++) {
        if (call->kids[i]->kind == QL_NAMED_ARG)
            return fail(v);
        int t = param_type(ps->kids[i]->type);
        args[i] = convert(v, expr(v, call->kids[i], t), t);
        if (args[i] < 0)
            return -1;
    }
    int mark = v->nbinds;
    for (int i = 0; i < np; i++)
        bind_to(v, ps->kids[i], args[i]); /* a parameter's uses name its PARAM node (below) */
    v->depth++;
    int r = -1;
    for (int i = 0; i < body->nkids && v->ok; i++) {
        const ql_node *st = body->kids[i];
        if (st->kind == QL_LET && !st->flag) {
            int t = st->sym ? lane_type(((const qc_sym *)st->sym)->type) : -1; /* a declared type converts */
            bind_to(v, st, convert(v, expr(v, st->b, t), t));
        } else if (st->kind == QL_RETURN && st->a && i == body->nkids - 1) {
            int t = lane_type(call->type);
            r = convert(v, expr(v, st->a, t), t);
        } else {
            fail(v);
        }
    }
    v->depth--;
    v->nbinds = mark;
    return v->ok ? r : -1;
}

static int builtin(vm *v, const ql_node *n, const char *f)
{
    int t = lane_type(n->type);
    if (t < 0 || t > VT_F32)
        return fail(v);
    char s = t == VT_F32 ? 'f' : 'i';
    int a = n->nkids > 0 ? convert(v, expr(v, n->kids[0], t), t) : -1;
    if (!strcmp(f, "min") || !strcmp(f, "max")) {
        int b = n->nkids == 2 ? convert(v, expr(v, n->kids[1], t), t) : -1;
        return a < 0 || b < 0 ? fail(v) : emit(v, t, "%s%c %d %d", f, s, a, b);
    }
    if (!strcmp(f, "clamp")) {
        int lo = n->nkids == 3 ? convert(v, expr(v, n->kids[1], t), t) : -1;
        int hi = lo >= 0 ? convert(v, expr(v, n->kids[2], t), t) : -1;
        return a < 0 || hi < 0 ? fail(v) : emit(v, t, "clamp%c %d %d %d", s, a, lo, hi);
    }
    if (n->nkids != 1 || a < 0)
        return fail(v);
    if (!strcmp(f, "round_even") && t == VT_F32)
        return emit(v, t, "rint %d", a);
    if (!strcmp(f, "abs") && t == VT_F32)
        return emit(v, t, "absf %d", a);
    return fail(v);
}

static int call(vm *v, const ql_node *n)
{
    const ql_node *callee = n->a;
    if (callee->kind != QL_NAME)
        return fail(v);
    const qc_sym *s = callee->sym;
    if (s)
        return s->kind == QC_SYM_FN && s->decl && s->decl->kind == QL_FN ? inline_fn(v, n, s) : fail(v);
    return builtin(v, n, callee->name);
}

/* sat<T>(x) or T(x) to an 8-bit type: one instruction from i32 or f32 lanes. */
static int to_byte(vm *v, const ql_node *n, int to)
{
    int ft = lane_type(n->b->type);
    if (ft < 0 || ft > VT_F32 || (n->kind == QL_CAST && ft == VT_I32)) /* an i32 cast to a byte wraps: no lane form */
        return fail(v);
    int x = expr(v, n->b, ft);
    return x < 0 ? -1 : emit(v, to, "sat%c.%s %d", ft == VT_F32 ? 'f' : 'i', to == VT_U8 ? "u8" : "i8", x);
}

/* A stage's scalar parameter (once: its uses share the value): pari / parf P, or the f64 one as
 * VM_F64_PARAM + P. */
static int stage_param(vm *v, const qc_sym *s)
{
    int t = param_type(s->type), r;
    if (t == VT_F64)
        r = VM_F64_PARAM + s->index;
    else if (t == VT_I32 || t == VT_F32)
        r = emit(v, t, t == VT_F32 ? "parf %d" : "pari %d", s->index);
    else
        return fail(v);
    bind_to(v, s->decl, r);
    return r;
}

/* A stage's t[i]: t an 8-bit tensor parameter, i the loop's variable. */
static int element(vm *v, const ql_node *n)
{
    const ql_node *t = n->a, *i = n->nkids == 1 ? n->kids[0] : NULL;
    const qc_sym *ts = t && t->kind == QL_NAME ? t->sym : NULL;
    int et = lane_type(n->type);
    if (!v->params || !ts || ts->kind != QC_SYM_PARAM || ts->index < 0 || ts->index >= v->params->nkids ||
        ts->decl != v->params->kids[ts->index] || !i || i->kind != QL_NAME || !i->sym || i->sym != v->loop ||
        (et != VT_U8 && et != VT_I8))
        return fail(v);
    return emit(v, et, "in.%s %d", et == VT_U8 ? "u8" : "i8", ts->index);
}

static int expr(vm *v, const ql_node *n, int want)
{
    if (!v->ok || !n)
        return fail(v);
    switch (n->kind) {
    case QL_INT:
    case QL_FLOAT: return literal(v, n, want >= 0 ? want : lane_type(n->type));
    case QL_NAME: {
        const qc_sym *s = n->sym;
        if (!s)
            return fail(v);
        int r = lookup(v, s->decl);
        if (r < 0)
            r = lookup(v, s);
        if (r < 0 && v->params && s->kind == QC_SYM_PARAM && s->index >= 0 && s->index < v->params->nkids &&
            s->decl == v->params->kids[s->index])
            return stage_param(v, s);
        if (r < 0 && s->kind == QC_SYM_CONST && s->decl && s->decl->b &&
            (s->decl->b->kind == QL_INT || s->decl->b->kind == QL_FLOAT))
            return literal(v, s->decl->b, lane_type(s->type));
        return r < 0 ? fail(v) : r;
    }
    case QL_UNARY:
        if (n->op != QL_TOK_MINUS)
            return fail(v);
        return negate(v, n, want >= 0 ? want : lane_type(n->type));
    case QL_BINARY: return binary(v, n);
    case QL_CAST:
    case QL_SAT: {
        int to = lane_type(n->type);
        if (to == VT_U8 || to == VT_I8)
            return to_byte(v, n, to);
        if (n->kind == QL_SAT || to < 0)
            return fail(v);
        return convert(v, expr(v, n->b, lane_type(n->b->type)), to);
    }
    case QL_CALL: return call(v, n);
    case QL_INDEX: return element(v, n);
    default: return fail(v);
    }
}

/* "ew.tab<i>" -> i, or -1 */
static int table_of(const ql_node *n)
{
    int i;
    char end;
    if (!n || n->kind != QL_NAME || !n->name || sscanf(n->name, "ew.tab%d%c", &i, &end) != 1)
        return -1;
    return i;
}

static const ql_node *last_kid(const ql_node *b)
{
    return b && b->nkids ? b->kids[b->nkids - 1] : NULL;
}

static int is_call_of(const ql_node *n, const char *f)
{
    return n && n->kind == QL_CALL && n->a && n->a->kind == QL_NAME && !n->a->sym && n->a->name &&
           !strcmp(n->a->name, f);
}

/* Binds the uniforms of the fill loop: ew.tab<i>[c] = ew.ubits(name) */
static void bind_uniforms(vm *v, const ql_node *fill)
{
    const ql_node *loop = fill && fill->b ? last_kid(fill->b) : NULL;
    if (!loop || loop->kind != QL_FOR || !loop->c)
        return;
    for (int i = 0; i < loop->c->nkids; i++) {
        const ql_node *st = loop->c->kids[i];
        if (st->kind != QL_ASSIGN || !st->a || st->a->kind != QL_INDEX || !is_call_of(st->b, "ew.ubits"))
            continue;
        int t = table_of(st->a->a);
        const ql_node *x = st->b->kids[0];
        int lt = x->kind == QL_NAME && x->sym ? lane_type(x->type) : -1;
        if (t >= 0 && lt >= 0)
            bind_to(v, x->sym, emit(v, lt, lt == VT_F32 ? "tabf %d" : "tabi %d", t));
    }
}

int qc_vecmap(const qc_sym *k, char *buf, size_t n)
{
    const ql_node *body = k && k->decl ? k->decl->c : NULL;
    vm v = {.buf = buf, .n = n, .ok = 1};
    if (!body || !n)
        return 0;
    buf[0] = 0;
    const ql_node *rows = last_kid(body), *fill = NULL;
    for (int i = 0; i < body->nkids; i++)
        if (body->kids[i]->kind == QL_IF && body->kids[i]->a && body->kids[i]->a->kind == QL_BINARY &&
            body->kids[i]->a->a && body->kids[i]->a->a->kind == QL_NAME && body->kids[i]->a->a->name &&
            !strcmp(body->kids[i]->a->a->name, "ew.fill"))
            fill = body->kids[i];
    const ql_node *cols = rows && rows->kind == QL_FOR && rows->c ? last_kid(rows->c) : NULL;
    const ql_node *elem = cols && cols->kind == QL_FOR ? cols->c : NULL;
    if (!fill || !elem || elem->nkids < 3)
        return 0;
    const ql_node *set = elem->kids[elem->nkids - 1], *a = elem->kids[elem->nkids - 2];
    if (set->kind != QL_ASSIGN || set->op != QL_TOK_ASSIGN || a->kind != QL_LET || lane_type(a->b ? a->b->type : NULL) != VT_I32)
        return 0;
    bind_uniforms(&v, fill);
    for (int i = 1; i < elem->nkids - 2 && v.ok; i++) { /* 0 is the channel */
        const ql_node *l = elem->kids[i];
        if (l->kind != QL_LET || !is_call_of(l->b, "ew.from_bits") || l->b->kids[0]->kind != QL_INDEX)
            return 0;
        int t = table_of(l->b->kids[0]->a), lt = lane_type(l->b->type);
        if (t >= 0 && lt >= 0) /* a channel let of another type is no operand: an error if read */
            bind_to(&v, l, emit(&v, lt, lt == VT_F32 ? "tabf %d" : "tabi %d", t));
    }
    bind_to(&v, a, emit(&v, VT_I32, "acc"));
    int yt = lane_type(set->a->type); /* y's element */
    if (!v.ok || (yt != VT_U8 && yt != VT_I8))
        return 0;
    int r = convert(&v, expr(&v, set->b, yt), yt);
    return v.ok && r == v.ninsn - 1; /* y's element is the last instruction */
}

/* a.numel == b.numel, and chains of such tests joined by `and` */
static int numels_equal(const ql_node *c)
{
    if (!c || c->kind != QL_BINARY)
        return 0;
    if (c->op == QL_TOK_AND)
        return numels_equal(c->a) && numels_equal(c->b);
    return c->op == QL_TOK_EQ && c->a && c->b && c->a->kind == QL_FIELD && c->b->kind == QL_FIELD && c->a->name &&
           c->b->name && !strcmp(c->a->name, "numel") && !strcmp(c->b->name, "numel");
}

/* `for i in 0 .. y.numel { y[i] = value }` with y a tensor parameter: its assignment, *loop the
 * variable's symbol. */
static const ql_node *element_loop(const ql_node *f, const ql_node *ps, const qc_sym **loop)
{
    const ql_node *set = f && f->kind == QL_FOR && f->c && f->c->nkids == 1 ? f->c->kids[0] : NULL;
    if (!set || set->kind != QL_ASSIGN || set->op != QL_TOK_ASSIGN || !set->a || set->a->kind != QL_INDEX ||
        !f->a || f->a->kind != QL_INT || f->a->ival != 0 || !f->b || f->b->kind != QL_FIELD || !f->b->name ||
        strcmp(f->b->name, "numel") || !f->b->a || f->b->a->kind != QL_NAME || !set->a->a ||
        set->a->a->kind != QL_NAME || f->b->a->sym != set->a->a->sym || set->a->nkids != 1)
        return NULL;
    const qc_sym *y = set->a->a->sym, *i = set->a->kids[0]->kind == QL_NAME ? set->a->kids[0]->sym : NULL;
    if (!y || y->kind != QC_SYM_PARAM || y->index < 0 || y->index >= ps->nkids || !i || i->kind != QC_SYM_LOOP ||
        i->decl != f)
        return NULL;
    *loop = i;
    return set;
}

int qc_vecmap_stage(const qc_sym *k, char *buf, size_t n)
{
    const ql_node *d = k && k->kind == QC_SYM_KERNEL ? k->decl : NULL;
    const ql_node *body = d ? d->c : NULL, *set = NULL;
    vm v = {.buf = buf, .n = n, .ok = 1, .params = d ? d->a : NULL};
    if (!body || !v.params || !n)
        return 0;
    buf[0] = 0;
    /* layer lets, then the loop: alone, or in an `if` of equal sizes that returns after it */
    for (int i = 0; i < body->nkids && v.ok && !set; i++) {
        const ql_node *st = body->kids[i];
        if (st->kind == QL_LET && !st->flag) {
            int t = st->sym ? lane_type(((const qc_sym *)st->sym)->type) : -1;
            bind_to(&v, st, convert(&v, expr(&v, st->b, t), t));
        } else if (st->kind == QL_IF && !st->c && numels_equal(st->a) && st->b && st->b->nkids == 2 &&
                   st->b->kids[1]->kind == QL_RETURN && !st->b->kids[1]->a) {
            if (!(set = element_loop(st->b->kids[0], v.params, &v.loop)))
                return 0;
        } else if (st->kind == QL_FOR) {
            if (!(set = element_loop(st, v.params, &v.loop)))
                return 0;
        } else {
            return 0;
        }
    }
    int yt = set ? lane_type(set->a->type) : -1;
    if (!v.ok || (yt != VT_U8 && yt != VT_I8))
        return 0;
    int r = convert(&v, expr(&v, set->b, yt), yt);
    return v.ok && r == v.ninsn - 1;
}
