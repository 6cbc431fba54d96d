/* The lowering of `for` loops (see jit.c): loop versioning (a copy of an
 * innermost loop's body whose element indices are proven in range once,
 * before the loop, so it runs without their checks and GCC can vectorize it)
 * and, for a proven loop that may run again harmlessly, blocks of
 * QRL_JIT_BLOCK iterations with an overlapping last one. */
#include "jit_int.h"

#include <string.h>

/* ------------------------------------------------------ loop versioning */
/* An innermost `for k in lo .. hi` whose element indices are k plus a loop-invariant offset gets a
 * second copy of its body without those indices' bounds checks. One test before the loop proves
 * every such index in range for the whole trip; when it fails, the checked copy runs and traps
 * where it always did. The copy reads each tensor's data pointer once (a store through u8 may
 * alias the view, so GCC could not hoist the load itself) and burns the trip's fuel in one step:
 * no exit is left in the body, so GCC can vectorize it. The trip is bounded by the tensor's
 * size, so the time limit still holds. */

/* Whether n contains a loop. */
static int has_loop(const ql_node *n)
{
    if (!n)
        return 0;
    if (n->kind == QL_FOR || n->kind == QL_WHILE)
        return 1;
    if (has_loop(n->a) || has_loop(n->b) || has_loop(n->c) || has_loop(n->d))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (has_loop(n->kids[i]))
            return 1;
    return 0;
}

/* Whether n contains node x (a declaration inside the loop body), or assigns the variable s. */
static int contains(const ql_node *n, const ql_node *x, const qc_sym *s)
{
    if (!n)
        return 0;
    if (n == x || (s && n->kind == QL_ASSIGN && n->a->kind == QL_NAME && n->a->sym == s))
        return 1;
    if (contains(n->a, x, s) || contains(n->b, x, s) || contains(n->c, x, s) || contains(n->d, x, s))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (contains(n->kids[i], x, s))
            return 1;
    return 0;
}

/* A name whose value cannot change while the loop runs. */
static int invariant_name(const ql_node *loop, const qc_sym *s)
{
    switch (s->kind) {
    case QC_SYM_PARAM:
    case QC_SYM_DIM:
    case QC_SYM_CONST: return 1;
    case QC_SYM_LOOP:
    case QC_SYM_LOCAL: return s->decl != loop && !contains(loop->c, s->decl, s->mutable_ ? s : NULL);
    default: return 0;
    }
}

/* An integer expression free of effects and traps whose value cannot change while the loop runs. */
static int invariant(const ql_node *loop, const ql_node *e)
{
    switch (e->kind) {
    case QL_INT: return 1;
    case QL_NAME: return e->sym && invariant_name(loop, e->sym) && qc_is_int(jit_ty(e));
    case QL_BINARY:
        return (e->op == QL_TOK_PLUS || e->op == QL_TOK_MINUS || e->op == QL_TOK_STAR) && qc_is_int(jit_ty(e)) &&
               invariant(loop, e->a) && invariant(loop, e->b);
    case QL_FIELD:
        return (!strcmp(e->name, "numel") || !strcmp(e->name, "len")) && e->a->kind == QL_NAME && e->a->sym &&
               (jit_ty(e->a)->k == QC_TENSOR || jit_ty(e->a)->k == QC_ARRAY) && invariant_name(loop, e->a->sym);
    default: return 0;
    }
}

static gcc_jit_rvalue *wrap_op(jit *j, enum gcc_jit_binary_op op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return jit_cast(j, jit_bin(j, op, j->t_u64, jit_cast(j, a, j->t_u64), jit_cast(j, b, j->t_u64)), j->t_i64);
}

/* e as k * coef + off with coef 0 or 1 (returned; -1: not of that form), off emitted now, before
 * the loop. The body computes e in wrapping i64, so off wraps the same way. */
static int affine_in(fgen *f, const ql_node *loop, const ql_node *e, gcc_jit_rvalue **off)
{
    jit *j = f->j;
    if (jit_ty(e)->k != QC_I64 && jit_ty(e)->k != QC_INTLIT)
        return -1;
    if (e->kind == QL_NAME && e->sym == loop->sym) {
        *off = jit_lng(j, j->t_i64, 0);
        return 1;
    }
    if (invariant(loop, e)) {
        *off = jit_now(f, jit_cast(j, jit_expr(f, e), j->t_i64));
        return 0;
    }
    const qc_sym *s = e->kind == QL_NAME ? e->sym : NULL;
    if (s && s->kind == QC_SYM_LOCAL && !s->mutable_ && s->decl && s->decl->kind == QL_LET && s->decl->b)
        return affine_in(f, loop, s->decl->b, off); /* a let of the body: its initializer */
    if (e->kind == QL_BINARY && (e->op == QL_TOK_PLUS || e->op == QL_TOK_MINUS)) {
        gcc_jit_rvalue *oa, *ob;
        int ca = affine_in(f, loop, e->a, &oa);
        if (ca < 0)
            return -1;
        int cb = affine_in(f, loop, e->b, &ob);
        if (cb < 0 || ca + cb > 1 || (e->op == QL_TOK_MINUS && cb))
            return -1;
        *off = jit_now(f, wrap_op(j, e->op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS : GCC_JIT_BINARY_OP_MINUS, oa, ob));
        return ca + cb;
    }
    return -1;
}

/* ew.from_bits(bits, v) (compiler/elementwise.c): v is only typed, never run. */
static int typed_only(const ql_node *call, int arg)
{
    return call->kind == QL_CALL && arg == 1 && call->a->kind == QL_NAME && !call->a->sym &&
           !strcmp(call->a->name, "ew.from_bits");
}

/* The one-dimensional element accesses of body into invariant arrays and tensors. */
static void index_nodes(const ql_node *loop, const ql_node *n, const ql_node **out, int *nout, int cap)
{
    if (!n)
        return;
    if (n->kind == QL_INDEX && n->nkids == 1 && n->a->kind == QL_NAME && n->a->sym &&
        (jit_ty(n->a)->k == QC_TENSOR || jit_ty(n->a)->k == QC_ARRAY) && invariant_name(loop, n->a->sym) && *nout < cap)
        out[(*nout)++] = n;
    const ql_node *sub[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; i++)
        index_nodes(loop, sub[i], out, nout, cap);
    for (int i = 0; i < n->nkids; i++)
        if (!typed_only(n, i))
            index_nodes(loop, n->kids[i], out, nout, cap);
}

static gcc_jit_rvalue *and_rv(jit *j, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return a ? jit_bin(j, GCC_JIT_BINARY_OP_LOGICAL_AND, j->t_bool, a, b) : b;
}

/* Emits the test that proves the body's affine indices in range for k in lo .. hi, and records
 * them (with their data pointers, for the proven copy to read once) in f->hoist. Returns the test, or NULL when no
 * index depends on k (nothing bounds the trip then). */
static gcc_jit_rvalue *prove_indices(fgen *f, const ql_node *loop, gcc_jit_rvalue *lo, gcc_jit_rvalue *hi)
{
    jit *j = f->j;
    const ql_node *body = loop->c;
    const qc_sym *k = loop->sym;
    if (k->type->k != QC_I64 || has_loop(body))
        return NULL;
    const ql_node *idx[QRL_JIT_MAX_HOIST];
    int n = 0, with_k = 0;
    index_nodes(loop, body, idx, &n, QRL_JIT_MAX_HOIST);
    gcc_jit_rvalue *ok = NULL;
    gcc_jit_rvalue *zero = jit_lng(j, j->t_i64, 0);
    f->nhoist = 0;
    for (int i = 0; i < n; i++) {
        gcc_jit_rvalue *off;
        int coef = affine_in(f, loop, idx[i]->kids[0], &off);
        if (coef < 0)
            continue;
        const qc_type *bt = jit_ty(idx[i]->a);
        gcc_jit_rvalue *base = jit_now(f, jit_expr(f, idx[i]->a));
        gcc_jit_rvalue *size = jit_now(f, gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(
                                          base, NULL, bt->k == QC_ARRAY ? j->f_arr_len : j->f_tv_numel)));
        if (coef) { /* 0 <= off, off <= size, 0 <= lo, hi <= size - off: off + k in [0, size), no overflow */
            ok = and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_GE, off, zero));
            ok = and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_LE, off, size));
            ok = and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_GE, lo, zero));
            ok = and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_LE, hi, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, size, off)));
            with_k = 1;
        } else {
            ok = and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_LT, jit_cast(j, off, j->t_u64), jit_cast(j, size, j->t_u64)));
        }
        gcc_jit_type *pt = gcc_jit_type_get_pointer(jit_type_of(j, bt->elem));
        gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(
            gcc_jit_rvalue_dereference_field(base, NULL, bt->k == QC_ARRAY ? j->f_arr_data : j->f_tv_data));
        f->hoist[f->nhoist].at = idx[i];
        f->hoist[f->nhoist].ptr = jit_temp(f, pt);
        f->hoist[f->nhoist++].data = jit_cast(j, data, pt);
    }
    if (!with_k) {
        f->nhoist = 0;
        return NULL;
    }
    return and_rv(j, ok, jit_cmp(j, GCC_JIT_COMPARISON_LT, lo, hi));
}


/* The loop proper, from iv's current value: test, body, step. The proven copy (fast) burns no
 * fuel per iteration: its caller burned the whole trip. */
static void loop_copy(fgen *f, const ql_node *n, gcc_jit_rvalue *hi, int fast)
{
    jit *j = f->j;
    const qc_sym *v = n->sym;
    gcc_jit_type *t = jit_type_of(j, v->type);
    gcc_jit_lvalue *iv = f->locals[v->index];
    gcc_jit_block *test = jit_new_block(f), *body = jit_new_block(f), *step = jit_new_block(f), *done = jit_new_block(f);
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, test);
    gcc_jit_block_end_with_conditional(test, NULL, jit_cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(iv), hi),
                                       body, done);
    /* i in lo .. len(a) with lo a non-negative literal: a[i] needs no check */
    int64_t lo;
    const qc_sym *arr = jit_bounded_by(n->b);
    int pushed = 0;
    if (arr && n->a->kind == QL_INT && (lo = (int64_t)n->a->ival) >= 0 && f->nbound < 256) {
        f->loop_var[f->nbound] = v;
        f->loop_arr[f->nbound++] = arr;
        pushed = 1;
    }
    f->brk[f->nloops] = done;
    f->cont[f->nloops++] = step;
    f->b = body;
    jit_stmts(f, n->c);
    if (f->b)
        gcc_jit_block_end_with_jump(f->b, NULL, step);
    gcc_jit_block_add_assignment(step, NULL, iv,
                                 jit_bin(j, GCC_JIT_BINARY_OP_PLUS, t, gcc_jit_lvalue_as_rvalue(iv), gcc_jit_context_one(j->c, t)));
    f->b = step;
    if (!fast)
        jit_burn_fuel(f, n, jit_lng(j, j->t_i64, 1));
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, test);
    f->nloops--;
    f->nbound -= pushed;
    f->b = done;
}

/* ---- blocks with an overlapping last one ----
 * A proven loop whose iterations can run again without changing what it computes runs in blocks
 * of QRL_JIT_BLOCK iterations, the last block moved back to end at hi (overlapping the one
 * before): each block is a fixed-trip loop GCC vectorizes whole, with no scalar remainder. The
 * remainder is what costs in an epilogue's rows of 49 or 196 elements: in scalar code GCC turns
 * the clamps into branches on the data, mispredicted half the time. Running again is harmless
 * when the body only declares lets, assigns its own locals and stores `t[k + off] = ...` into a
 * tensor or array it never reads (nor any other of the same element type, which could be the
 * same memory), and calls nothing that could write memory. */
#define QRL_JIT_BLOCK 32
/* Trips of 16 to 31 run in blocks of this many: left to the plain copy, a channels-last epilogue's
 * rows of 16 channels (fmnist's first convolution) took 8x as long as in blocks of 16, and blocks
 * of 16 throughout were slower on longer trips (ResNet-18 int8 b1: 7.5 ms against 7.0). */
#define QRL_JIT_SHORT_BLOCK 16
/* Longer trips run the plain copy: its scalar remainder is a small part of them, and the blocks
 * measured slower there (rows of 1024: 1.6x). */
#define QRL_JIT_BLOCK_TRIPS 256

static const char *const pure_builtins[] = {"min", "max", "abs", "clamp", "select", "floor", "ceil", "trunc",
                                            "round_even", "round_away", "round_up", "sqrt", "exp", "log", "log2",
                                            "tanh", "erf", "pow", "isnan", "isinf", "len", "ew.bits", "ew.from_bits", "ew.ubits"};

typedef struct overlap_scan {
    const ql_node *body;
    const qc_sym *stored[8]; /* the tensors and arrays the body stores into */
    int nstored, ok;
} overlap_scan;

static const qc_type *elem_of(const ql_node *e)
{
    const qc_type *t = jit_ty(e);
    return t->k == QC_TENSOR || t->k == QC_ARRAY ? t->elem : NULL;
}

/* Expressions: calls only to pure builtins, `x.dim(i)` and fns of scalars (they cannot reach memory). */
static void overlap_expr(overlap_scan *o, const ql_node *e)
{
    if (!e || !o->ok)
        return;
    if (e->kind == QL_CALL) {
        const qc_sym *s = e->a->sym;
        int pure = 0;
        if (e->a->kind == QL_FIELD)
            pure = !strcmp(e->a->name, "dim");
        else if (s && s->kind == QC_SYM_FN) {
            pure = 1;
            const ql_node *ps = s->decl->a;
            for (int i = 0; ps && i < ps->nkids; i++)
                if (ps->kids[i]->type->k == QC_TENSOR || ps->kids[i]->type->k == QC_ARRAY ||
                    ps->kids[i]->type->k == QC_HIST)
                    pure = 0;
        } else if (!s && e->a->kind == QL_NAME)
            for (size_t i = 0; i < sizeof pure_builtins / sizeof pure_builtins[0]; i++)
                pure |= !strcmp(e->a->name, pure_builtins[i]);
        if (!pure) {
            o->ok = 0;
            return;
        }
    }
    overlap_expr(o, e->a);
    overlap_expr(o, e->b);
    overlap_expr(o, e->c);
    overlap_expr(o, e->d);
    for (int i = 0; i < e->nkids; i++)
        if (!typed_only(e, i))
            overlap_expr(o, e->kids[i]);
}

static void overlap_stmts(overlap_scan *o, const ql_node *loop, const ql_node *b);

static void overlap_stmt(overlap_scan *o, const ql_node *loop, const ql_node *st)
{
    switch (st->kind) {
    case QL_LET: overlap_expr(o, st->b); break;
    case QL_BLOCK: overlap_stmts(o, loop, st); break;
    case QL_IF:
        overlap_expr(o, st->a);
        overlap_stmts(o, loop, st->b);
        if (st->c)
            overlap_stmt(o, loop, st->c);
        break;
    case QL_ASSIGN: {
        const ql_node *t = st->a;
        const qc_sym *ts = t->sym, *as = t->kind == QL_INDEX ? t->a->sym : NULL;
        overlap_expr(o, st->b);
        if (t->kind == QL_NAME && ts && ts->decl && contains(o->body, ts->decl, NULL))
            break; /* a local of the body: fresh every iteration */
        if (st->op != QL_TOK_ASSIGN || t->kind != QL_INDEX || t->nkids != 1 || t->a->kind != QL_NAME || !as ||
            !elem_of(t->a) || !invariant_name(loop, as) || o->nstored == 8) {
            o->ok = 0;
            break;
        }
        overlap_expr(o, t->kids[0]);
        o->stored[o->nstored++] = as;
        break;
    }
    default: o->ok = 0; break;
    }
}

static void overlap_stmts(overlap_scan *o, const ql_node *loop, const ql_node *b)
{
    for (int i = 0; i < b->nkids && o->ok; i++)
        overlap_stmt(o, loop, b->kids[i]);
}

/* Whether e reads a stored tensor or one of its element type; skip is the store target itself. */
static int reads_stored(const overlap_scan *o, const ql_node *e, const ql_node *skip)
{
    if (!e)
        return 0;
    if (e != skip && e->kind == QL_NAME && e->sym && elem_of(e))
        for (int i = 0; i < o->nstored; i++)
            if ((const qc_sym *)e->sym == o->stored[i] || elem_of(e)->k == o->stored[i]->type->elem->k)
                return 1;
    if (reads_stored(o, e->a, skip) || reads_stored(o, e->b, skip) || reads_stored(o, e->c, skip) ||
        reads_stored(o, e->d, skip))
        return 1;
    for (int i = 0; i < e->nkids; i++)
        if (reads_stored(o, e->kids[i], skip))
            return 1;
    return 0;
}

/* Whether no stored tensor (or one that could be its memory) is read anywhere in the body. */
static int stores_unread(const overlap_scan *o, const ql_node *b)
{
    for (int i = 0; i < b->nkids; i++) {
        const ql_node *st = b->kids[i];
        const ql_node *skip = st->kind == QL_ASSIGN && st->a->kind == QL_INDEX ? st->a->a : NULL;
        if (reads_stored(o, st, skip))
            return 0;
    }
    return 1;
}

static int overlap_ok(const ql_node *loop)
{
    overlap_scan o = {.body = loop->c, .ok = 1};
    overlap_stmts(&o, loop, loop->c);
    return o.ok && o.nstored > 0 && stores_unread(&o, loop->c);
}

/* The proven copy in blocks of blk iterations, the last moved back to end at hi (hi - lo >= blk). */
static void block_copy(fgen *f, const ql_node *n, gcc_jit_rvalue *lo, gcc_jit_rvalue *hi, int64_t blk)
{
    jit *j = f->j;
    gcc_jit_type *t = j->t_i64;
    gcc_jit_lvalue *iv = f->locals[((const qc_sym *)n->sym)->index], *kb = jit_temp(f, t), *k0 = jit_temp(f, t), *kk = jit_temp(f, t);
    gcc_jit_rvalue *len = jit_lng(j, t, blk), *last = jit_now(f, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, t, hi, len));
    gcc_jit_block_add_assignment(jit_cur(f), NULL, kb, lo);
    gcc_jit_block *otest = jit_new_block(f), *ohead = jit_new_block(f), *itest = jit_new_block(f), *ibody = jit_new_block(f),
                  *ostep = jit_new_block(f), *done = jit_new_block(f);
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, otest);
    gcc_jit_block_end_with_conditional(otest, NULL, jit_cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(kb), hi),
                                       ohead, done);
    f->b = ohead;
    gcc_jit_rvalue *b0 = gcc_jit_lvalue_as_rvalue(kb);
    gcc_jit_block_add_assignment(jit_cur(f), NULL, k0, jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, b0, last), b0, last, t));
    gcc_jit_block_add_assignment(jit_cur(f), NULL, kk, jit_lng(j, t, 0));
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, itest);
    gcc_jit_block_end_with_conditional(itest, NULL, jit_cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(kk), len),
                                       ibody, ostep);
    f->b = ibody;
    gcc_jit_block_add_assignment(ibody, NULL, iv,
                                 jit_bin(j, GCC_JIT_BINARY_OP_PLUS, t, gcc_jit_lvalue_as_rvalue(k0), gcc_jit_lvalue_as_rvalue(kk)));
    f->brk[f->nloops] = done; /* (the body has no break or continue) */
    f->cont[f->nloops++] = ostep;
    jit_stmts(f, n->c);
    f->nloops--;
    gcc_jit_block_add_assignment_op(jit_cur(f), NULL, kk, GCC_JIT_BINARY_OP_PLUS, jit_lng(j, t, 1));
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, itest);
    gcc_jit_block_add_assignment_op(ostep, NULL, kb, GCC_JIT_BINARY_OP_PLUS, len);
    gcc_jit_block_end_with_jump(ostep, NULL, otest);
    f->b = done;
}

void jit_for_loop(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_sym *v = n->sym;
    gcc_jit_type *t = jit_type_of(j, v->type);
    gcc_jit_rvalue *lo = jit_now(f, jit_cast(j, jit_expr(f, n->a), t));
    gcc_jit_block_add_assignment(jit_cur(f), NULL, f->locals[v->index], lo);
    gcc_jit_rvalue *hi = jit_now(f, jit_cast(j, jit_expr(f, n->b), t));
    gcc_jit_rvalue *proven = prove_indices(f, n, lo, hi);
    if (!proven) {
        loop_copy(f, n, hi, 0);
        return;
    }
    gcc_jit_block *fast = jit_new_block(f), *slow = jit_new_block(f), *join = jit_new_block(f);
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL, proven, fast, slow);
    f->b = fast;
    for (int h = 0; h < f->nhoist; h++)
        gcc_jit_block_add_assignment(fast, NULL, f->hoist[h].ptr, f->hoist[h].data);
    jit_burn_fuel(f, n, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, hi, lo));
    if (overlap_ok(n)) { /* blocks for short trips that hold one, else the plain copy */
        gcc_jit_block *blocks = jit_new_block(f), *other = jit_new_block(f), *shorter = jit_new_block(f),
                      *plain = jit_new_block(f), *after = jit_new_block(f);
        gcc_jit_rvalue *trip = jit_now(f, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, hi, lo));
        gcc_jit_block_end_with_conditional(
            jit_cur(f), NULL,
            and_rv(j, jit_cmp(j, GCC_JIT_COMPARISON_GE, trip, jit_lng(j, j->t_i64, QRL_JIT_BLOCK)),
                   jit_cmp(j, GCC_JIT_COMPARISON_LT, trip, jit_lng(j, j->t_i64, QRL_JIT_BLOCK_TRIPS))),
            blocks, other);
        f->b = blocks;
        block_copy(f, n, lo, hi, QRL_JIT_BLOCK);
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, after);
        gcc_jit_block_end_with_conditional(
            other, NULL, and_rv(j, jit_cmp(j, GCC_JIT_COMPARISON_GE, trip, jit_lng(j, j->t_i64, QRL_JIT_SHORT_BLOCK)),
                                jit_cmp(j, GCC_JIT_COMPARISON_LT, trip, jit_lng(j, j->t_i64, QRL_JIT_BLOCK))),
            shorter, plain);
        f->b = shorter;
        block_copy(f, n, lo, hi, QRL_JIT_SHORT_BLOCK);
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, after);
        f->b = plain;
        gcc_jit_block_add_assignment(plain, NULL, f->locals[((const qc_sym *)n->sym)->index], lo);
        loop_copy(f, n, hi, 1);
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, after);
        f->b = after;
    } else
        loop_copy(f, n, hi, 1);
    f->nhoist = 0;
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, join);
    f->b = slow;
    loop_copy(f, n, hi, 0);
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, join);
    f->b = join;
}
