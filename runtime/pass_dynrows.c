/* ---- per-row dynamic quantization in float ops -> DynamicQuantizeRows and MatMulInteger ----
 * A dynamic recipe's export with per-row activations (int8-dynamic.qrl) writes each row's
 * quantization in standard opset-13 float ops, since ONNX has no operator for it (docs/quantizer.md,
 * "Dynamic quantization"): with lo = Min(ReduceMin(x, last axis), 0), hi = Max(ReduceMax(x), 0),
 *   S = Where(Equal(hi - lo, 0), 1, (hi - lo) / 255)
 *   Z = Round(Clip(0 - lo / S, 0, 255))
 *   x' = (Clip(Round(x / S) + Z, 0, 255) - Z) * S
 * and the MatMul reads x' and a DequantizeLinear of its i8 weight. Run as written that is 19 float
 * ops on every activation and an f32 product. Here the chain becomes the runtime's
 * DynamicQuantizeRows (the same formula row by row, the same bits: ops/quant.c) and each MatMul
 * that reads x' with such a weight MatMulInteger(q, w, z) -> Cast -> Mul by S -> Mul by the
 * weight's scales: the integer sums exact, then the two scales in f32 (the export's f32 MatMul
 * rounds the same real product otherwise). Attention's products, whose B is a per-tensor
 * DynamicQuantizeLinear's DequantizeLinear, take its integers and zero point the same way. Every node of the chain is checked, constants included,
 * so only this formula is rewritten; a reader of x' that is not such a MatMul keeps the chain. A
 * Gemm that is a MatMul plus a constant bias takes the same form with an Add (its transposed
 * weight transposed once, here). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "options.h"
#include "passes.h"

typedef struct rows_ctx {
    qr_graph *g;
    qr_node **producer; /* by value id, live nodes */
    qr_error *e;
} rows_ctx;

/* v's producer when it is a live node of the default domain with op `op` and n_in inputs. */
static qr_node *made_by(const rows_ctx *c, const qr_value *v, const char *op, int n_in)
{
    qr_node *n = v ? c->producer[v->id] : NULL;
    return n && !n->dead && !n->domain[0] && !strcmp(n->op, op) && n->n_in == n_in ? n : NULL;
}

/* v is the f32 constant c, one value. */
static int is_scalar(const qr_value *v, float c)
{
    return v && v->is_const && v->t.dtype == QR_F32 && qr_tensor_numel(&v->t) == 1 && ((const float *)v->t.data)[0] == c;
}

/* A ReduceMin/ReduceMax of x over its last axis, keeping it (opset 13's axes attribute). */
static int reduces_last(const rows_ctx *c, const qr_value *v, const char *op, const qr_value *x)
{
    const qr_node *n = made_by(c, v, op, 1);
    const int64_t *axes;
    return n && n->in[0] == x && qr_attr_i(n, "keepdims", 1) == 1 && qr_attr_ints(n, "axes", &axes) == 1 &&
           axes[0] == -1;
}

/* Whether deq is x' of the formula above; *x the chain's input. */
static int rows_chain(const rows_ctx *c, const qr_value *deq, qr_value **x)
{
    const qr_node *m = made_by(c, deq, "Mul", 2), *cen = m ? made_by(c, m->in[0], "Sub", 2) : NULL;
    const qr_node *clip = cen ? made_by(c, cen->in[0], "Clip", 3) : NULL;
    const qr_node *add = clip ? made_by(c, clip->in[0], "Add", 2) : NULL;
    const qr_node *rnd = add ? made_by(c, add->in[0], "Round", 1) : NULL;
    const qr_node *div = rnd ? made_by(c, rnd->in[0], "Div", 2) : NULL;
    if (!div || !is_scalar(clip->in[1], 0) || !is_scalar(clip->in[2], 255))
        return 0;
    const qr_value *s = m->in[1], *z = cen->in[1], *in = div->in[0];
    if (add->in[1] != z || div->in[1] != s)
        return 0;
    /* Z = Round(Clip(0 - lo / S, 0, 255)) */
    const qr_node *zr = made_by(c, z, "Round", 1), *zc = zr ? made_by(c, zr->in[0], "Clip", 3) : NULL;
    const qr_node *zs = zc ? made_by(c, zc->in[0], "Sub", 2) : NULL, *ld = zs ? made_by(c, zs->in[1], "Div", 2) : NULL;
    if (!ld || !is_scalar(zc->in[1], 0) || !is_scalar(zc->in[2], 255) || !is_scalar(zs->in[0], 0) || ld->in[1] != s)
        return 0;
    /* S = Where(Equal(range, 0), 1, range / 255), range = hi - lo */
    const qr_node *w = made_by(c, s, "Where", 3), *eq = w ? made_by(c, w->in[0], "Equal", 2) : NULL;
    const qr_node *st = eq ? made_by(c, w->in[2], "Div", 2) : NULL, *rg = st ? made_by(c, eq->in[0], "Sub", 2) : NULL;
    if (!rg || !is_scalar(w->in[1], 1) || !is_scalar(eq->in[1], 0) || st->in[0] != eq->in[0] || !is_scalar(st->in[1], 255))
        return 0;
    /* lo = Min(ReduceMin(x), 0), hi = Max(ReduceMax(x), 0) */
    const qr_node *hi = made_by(c, rg->in[0], "Max", 2), *lo = made_by(c, rg->in[1], "Min", 2);
    if (!hi || !lo || ld->in[0] != rg->in[1] || !is_scalar(hi->in[1], 0) || !is_scalar(lo->in[1], 0) ||
        !reduces_last(c, hi->in[0], "ReduceMax", in) || !reduces_last(c, lo->in[0], "ReduceMin", in))
        return 0;
    *x = (qr_value *)in;
    return 1;
}

/* The MatMul's B: a DequantizeLinear of a constant i8 [K, N] ([N, K] for a Gemm with transB: chan
 * is N's axis) with f32 scales per tensor or per column and zero points 0 (or none), or of a DynamicQuantizeLinear's outputs (attention's
 * second operand, per tensor): *w the integers, *ws the scales, *wz the zero point (NULL: 0). */
static int int8_weight(const rows_ctx *c, const qr_value *b, int chan, qr_value **w, qr_value **ws, qr_value **wz)
{
    const qr_node *dq = b ? c->producer[b->id] : NULL;
    if (!dq || dq->dead || dq->domain[0] || strcmp(dq->op, "DequantizeLinear") || dq->n_in < 2)
        return 0;
    const qr_value *q = dq->in[0], *s = dq->in[1], *z = qr_node_input(dq, 2);
    const qr_node *dyn = q ? c->producer[q->id] : NULL;
    if (dyn && !dyn->dead && !dyn->domain[0] && !strcmp(dyn->op, "DynamicQuantizeLinear") && dyn->n_out == 3 &&
        dyn->out[0] == q && dyn->out[1] == s && dyn->out[2] == z) {
        *w = (qr_value *)q, *ws = (qr_value *)s, *wz = (qr_value *)z;
        return 1;
    }
    *wz = NULL;
    if (!q || !q->is_const || q->t.dtype != QR_I8 || q->t.ndim != 2 || !s || !s->is_const || s->t.dtype != QR_F32)
        return 0;
    int64_t ns = qr_tensor_numel(&s->t), axis = qr_attr_i(dq, "axis", 1);
    if (ns != 1 && !(s->t.ndim == 1 && ns == q->t.dims[chan] && (axis == chan || axis == chan - 2)))
        return 0;
    if (z) {
        if (!z->is_const || z->t.dtype != QR_I8)
            return 0;
        for (int64_t i = 0; i < qr_tensor_numel(&z->t); i++)
            if (((const int8_t *)z->t.data)[i])
                return 0;
    }
    *w = (qr_value *)q;
    *ws = (qr_value *)s;
    return 1;
}

static qr_node *new_node(rows_ctx *c, const char *dom, const char *op, const char *name, int n_in, int n_out)
{
    qr_node *n = qr_graph_add_node(c->g, op, name, n_in, n_out);
    if (!n)
        return NULL;
    if (dom[0] && !(n->domain = qr_arena_strdup(&c->g->arena, dom)))
        return NULL;
    n->def = qr_op_find(dom, op);
    if (dom[0])
        n->opset = 1;
    return n;
}

static qr_value *new_value(rows_ctx *c, const char *base, const char *suffix)
{
    char name[1024];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    return qr_graph_new_value(c->g, name);
}

/* x's DynamicQuantizeRows (made once per x: rows[x->id]); NULL when out of memory. */
static qr_node *rows_of(rows_ctx *c, qr_node **rows, qr_value *x)
{
    if (rows[x->id])
        return rows[x->id];
    qr_node *n = new_node(c, "qrl", "DynamicQuantizeRows", "", 1, 3);
    if (!n)
        return NULL;
    n->in[0] = x;
    static const char *const suf[] = {"_rows_quantized", "_rows_scale", "_rows_zero_point"};
    for (int o = 0; o < 3; o++) {
        if (!(n->out[o] = new_value(c, x->name, suf[o])))
            return NULL;
        n->out[o]->producer = n;
    }
    n->name = n->out[0]->name;
    return rows[x->id] = n;
}

/* A new node op(a, b) -> a new value named base + suffix. */
static qr_value *binary(rows_ctx *c, const char *op, qr_value *a, qr_value *b, const char *base, const char *suffix)
{
    qr_node *n = new_node(c, "", op, "", b ? 2 : 1, 1);
    qr_value *y = new_value(c, base, suffix);
    if (!n || !y)
        return NULL;
    n->name = y->name;
    n->in[0] = a;
    if (b)
        n->in[1] = b;
    n->out[0] = y;
    y->producer = n;
    return y;
}

/* mm = MatMul(x', DequantizeLinear(w, ws)) (or a Gemm's x' w + bias, or a MatMul of x' / k for a
 * constant k: attention's scaled Q) becomes MatMulInteger(q, w, z) -> Cast -> Mul(S) -> Mul(ws)
 * [-> Add(bias)] [-> Div(k)], the last in mm's place (its output, its name). */
static qr_status rewrite(rows_ctx *c, qr_node *mm, qr_node *dqr, qr_value *w, qr_value *ws, qr_value *wz,
                         qr_value *bias, const qr_node *div)
{
    if (!qr_options_get()->no_fuse) {
        /* one node, the product and its scaling by blocks of rows while they are in cache, the same
         * f32 operations in the same order (QrlMatMulScaled, ops/quant.c); fuse=0 keeps the chain */
        qr_value **fin = qr_arena_alloc(&c->g->arena, sizeof *fin * 8);
        const char *dom = qr_arena_strdup(&c->g->arena, "qrl");
        if (!fin || !dom)
            return qr_errorf(c->e, "out of memory rewriting '%s'", mm->name);
        qr_value *k = div ? div->in[1] : NULL;
        qr_value *v[8] = {dqr->out[0], w, dqr->out[2], wz, dqr->out[1], ws, bias, k};
        int nin = k ? 8 : bias ? 7 : 6;
        memcpy(fin, v, sizeof v);
        mm->op = "QrlMatMulScaled", mm->domain = dom, mm->opset = 1;
        mm->def = qr_op_find(dom, mm->op);
        mm->in = fin;
        mm->n_in = nin;
        mm->n_attr = 0;
        qr_node_add_attr_i(c->g, mm, "last", !div ? 0 : strcmp(div->op, "Div") ? 1 : 2);
        return qr_graph_check_oom(c->g, c->e);
    }
    const char *base = mm->out[0]->name;
    qr_node *mi = new_node(c, "", "MatMulInteger", "", wz ? 4 : 3, 1);
    qr_value *acc = new_value(c, base, "_rows_int32");
    qr_value **in = qr_arena_alloc(&c->g->arena, sizeof *in * 2);
    if (!mi || !acc || !in)
        return qr_errorf(c->e, "out of memory rewriting '%s'", mm->name);
    mi->name = acc->name;
    mi->in[0] = dqr->out[0], mi->in[1] = w, mi->in[2] = dqr->out[2], mi->out[0] = acc, acc->producer = mi;
    if (wz)
        mi->in[3] = wz;
    qr_value *y = binary(c, "Cast", acc, NULL, base, "_rows_sums");
    if (y)
        qr_node_add_attr_i(c->g, y->producer, "to", 1); /* FLOAT */
    /* what follows the sums, in order; the last one becomes mm */
    const char *ops[4] = {"Mul", "Mul"};
    qr_value *arg[4] = {dqr->out[1], ws};
    int nops = 2;
    if (bias)
        ops[nops] = "Add", arg[nops++] = bias;
    if (div)
        ops[nops] = div->op, arg[nops++] = div->in[1];
    static const char *const suf[] = {"_rows_scaled", "_rows_real", "_rows_biased"};
    for (int i = 0; y && i + 1 < nops; i++)
        y = binary(c, ops[i], y, arg[i], base, suf[i]);
    if (!y)
        return qr_errorf(c->e, "out of memory rewriting '%s'", mm->name);
    in[0] = y, in[1] = arg[nops - 1];
    mm->op = ops[nops - 1];
    mm->def = qr_op_find("", mm->op);
    mm->in = in;
    mm->n_in = 2;
    mm->n_attr = 0;
    return qr_graph_check_oom(c->g, c->e);
}

/* A Gemm that is a MatMul plus a bias: alpha = beta = 1, no transA, C absent or a constant [N];
 * with transB its i8 weight is transposed into a new constant [K, N] (*w). */
static int gemm_fits(rows_ctx *c, const qr_node *n, qr_value **w, qr_value **bias)
{
    const qr_value *cv = qr_node_input(n, 2);
    if (qr_attr_f(n, "alpha", 1.f) != 1.f || qr_attr_f(n, "beta", 1.f) != 1.f || qr_attr_i(n, "transA", 0))
        return 0;
    int64_t K = (*w)->t.dims[0], N = (*w)->t.dims[1];
    if (qr_attr_i(n, "transB", 0))
        K = (*w)->t.dims[1], N = (*w)->t.dims[0];
    if (cv && (!cv->is_const || cv->t.dtype != QR_F32 || cv->t.ndim != 1 || cv->t.dims[0] != N))
        return 0;
    *bias = (qr_value *)cv;
    if (!qr_attr_i(n, "transB", 0))
        return 1;
    qr_tensor t = {.dtype = QR_I8, .ndim = 2, .dims = {K, N}};
    if (qr_tensor_alloc(&t, c->e) != QR_OK)
        return 0;
    const int8_t *src = (*w)->t.data;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++)
            ((int8_t *)t.data)[k * N + j] = src[j * K + k];
    qr_value *v = new_value(c, (*w)->name, "_kn");
    if (v)
        qr_value_set_const(c->g, v, &t);
    free(t.data);
    *w = v;
    return v != NULL;
}

qr_status qr_pass_dynamic_rows(qr_graph *g, qr_error *e)
{
    rows_ctx c = {.g = g, .e = e, .producer = calloc((size_t)g->n_values + 1, sizeof *c.producer)};
    qr_node **rows = calloc((size_t)g->n_values + 1, sizeof *rows);
    if (!c.producer || !rows) {
        free(c.producer);
        free(rows);
        return qr_errorf(e, "out of memory");
    }
    int nd = g->n_nodes, nv = g->n_values, changed = 0;
    for (int i = 0; i < nd; i++)
        for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_out; j++)
            if (g->nodes[i]->out[j])
                c.producer[g->nodes[i]->out[j]->id] = g->nodes[i];
    qr_status st = QR_OK;
    for (int i = 0; i < nd && st == QR_OK; i++) {
        qr_node *mm = g->nodes[i];
        qr_value *x, *w, *ws, *wz, *bias = NULL;
        int gemm = !mm->dead && !mm->domain[0] && !strcmp(mm->op, "Gemm") && mm->n_in >= 2;
        int matmul = !mm->dead && !mm->domain[0] && !strcmp(mm->op, "MatMul") && mm->n_in == 2;
        int chan = gemm && qr_attr_i(mm, "transB", 0) ? 0 : 1;
        /* x' / k or x' * k, k a constant (attention's scaled Q), moves past the product */
        const qr_node *div = matmul && mm->in[0] ? c.producer[mm->in[0]->id] : NULL;
        if (div && (div->dead || div->domain[0] || (strcmp(div->op, "Div") && strcmp(div->op, "Mul")) ||
                    div->n_in != 2 || !div->in[1] || !div->in[1]->is_const || div->in[1]->t.dtype != QR_F32 ||
                    qr_tensor_numel(&div->in[1]->t) != 1 || !rows_chain(&c, div->in[0], &x)))
            div = NULL;
        if ((!matmul && !gemm) || !mm->in[0] || !mm->in[1] || !rows_chain(&c, div ? div->in[0] : mm->in[0], &x) ||
            x->id >= nv || !int8_weight(&c, mm->in[1], chan, &w, &ws, &wz))
            continue;
        if (gemm && (wz || !gemm_fits(&c, mm, &w, &bias))) /* a Gemm's B is a constant weight */
            continue;
        qr_node *dqr = rows_of(&c, rows, x);
        st = dqr ? rewrite(&c, mm, dqr, w, ws, wz, bias, div) : qr_errorf(e, "out of memory");
        changed = 1;
    }
    free(c.producer);
    free(rows);
    if (st == QR_OK && changed) { /* the chains and weight dequantizations no one reads any more go */
        qr_graph_drop_unused(g);
        st = qr_graph_toposort(g, e);
    }
    return st;
}
