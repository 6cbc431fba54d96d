/* Lowering of QDQ graphs to integer ops (see passes.h, qr_pass_lower_qdq).
 *
 * A QDQ model says, with QuantizeLinear/DequantizeLinear pairs, which
 * tensors are integers; this pass makes the integers real:
 *
 *   DQ(x) -> Conv(DQ(w), DQ(b)) [-> Relu] -> Q      =>  QLinearConv
 *   DQ(x) -> Gemm/MatMul(DQ(w), DQ(b)) [-> Relu] -> Q
 *                        =>  MatMulInteger -> Add(b) -> DQ(s_x s_w) -> Q
 *   DQ(x) -> MaxPool | Reshape | Flatten | ... -> Q with the same qparams
 *                        =>  the op on the integers
 *
 * Accumulation is int32; requantization is ONNX's (float multiplier, round
 * half to even, saturate), so results equal those of ONNX Runtime's fused
 * kernels. A Relu folds in only where the output's zero point is its type's
 * minimum (saturation then is the Relu). What matches none of these keeps
 * its DQ/Q pairs and runs in f32. */
#include <stdio.h>
#include <string.h>

#include "op.h"
#include "passes.h"

static int is(const qr_node *n, const char *op)
{
    return n && !n->dead && !n->domain[0] && !strcmp(n->op, op);
}

/* The one live node reading v, or NULL (none, several, or v is a graph output). */
static qr_node *sole_consumer(const qr_graph *g, const qr_value *v)
{
    if (!v || v->is_output)
        return NULL;
    qr_node *found = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead)
            continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) {
                if (found)
                    return NULL;
                found = n;
                break;
            }
    }
    return found;
}

/* A DequantizeLinear with constant scale and zero point producing v. */
static qr_node *dq_of(const qr_value *v)
{
    qr_node *n = v ? v->producer : NULL;
    if (!is(n, "DequantizeLinear") || n->n_in < 3 || !n->in[1]->is_const || !n->in[2] || !n->in[2]->is_const)
        return NULL;
    return n;
}

static int q_params_const(const qr_node *q)
{
    return is(q, "QuantizeLinear") && q->n_in >= 3 && q->in[1]->is_const && q->in[2] && q->in[2]->is_const &&
           qr_tensor_numel(&q->in[1]->t) == 1;
}

static int64_t zero_of(const qr_node *q)
{
    return qr_get_i64(q->in[2]->t.data, q->in[2]->t.dtype, 0);
}

static int64_t type_min(qr_dtype t)
{
    return t == QR_I8 ? -128 : t == QR_I16 ? -32768 : 0;
}

/* From the op's output: an optional Relu, then the QuantizeLinear. */
static qr_node *find_q(const qr_graph *g, const qr_node *op, qr_node **relu)
{
    *relu = NULL;
    qr_node *next = sole_consumer(g, op->out[0]);
    if (is(next, "Relu")) {
        *relu = next;
        next = sole_consumer(g, next->out[0]);
    }
    if (!q_params_const(next))
        return NULL;
    if (*relu && zero_of(next) != type_min(next->in[2]->t.dtype))
        return NULL; /* saturation would not be the Relu */
    return next;
}

static qr_node *new_node(qr_graph *g, const char *op, const char *name, int n_in, int n_out, int opset)
{
    qr_node *n = qr_graph_add_node(g, op, name, n_in, n_out);
    n->def = qr_op_find("", op);
    n->opset = opset;
    return n;
}

static void kill(qr_node *n)
{
    if (n)
        n->dead = 1;
}

/* DQ(x) -> Conv(DQ(w), DQ(b)) [-> Relu] -> Q  =>  QLinearConv */
static int lower_conv(qr_graph *g, qr_node *c)
{
    if (c->n_in < 2 || c->n_in > 3)
        return 0;
    qr_node *dx = dq_of(c->in[0]), *dw = dq_of(c->in[1]), *db = c->n_in > 2 ? dq_of(c->in[2]) : NULL, *relu;
    if (!dx || !dw || !dw->in[0]->is_const || (c->n_in > 2 && c->in[2] && (!db || !db->in[0]->is_const)))
        return 0;
    if (qr_tensor_numel(&dx->in[1]->t) != 1 || (db && db->in[0]->t.dtype != QR_I32))
        return 0;
    qr_node *q = find_q(g, c, &relu);
    if (!q)
        return 0;
    qr_node *n = new_node(g, "QLinearConv", c->name, db ? 9 : 8, 1, c->opset < 10 ? 10 : c->opset);
    qr_value *in[9] = {dx->in[0], dx->in[1], dx->in[2], dw->in[0], dw->in[1], dw->in[2], q->in[1], q->in[2],
                       db ? db->in[0] : NULL};
    memcpy(n->in, in, sizeof(qr_value *) * (size_t)n->n_in);
    n->attr = c->attr;
    n->n_attr = c->n_attr;
    n->out[0] = q->out[0];
    q->out[0]->producer = n;
    kill(c);
    kill(relu);
    kill(q);
    return 1;
}

/* DQ(x) -> Gemm/MatMul(DQ(w) [, DQ(b)]) [-> Relu] -> Q
 *   => MatMulInteger(x, w') [-> Add(b)] -> DQ(acc, s_x s_w) -> Q
 * with w' the integer weight transposed when Gemm says transB. */
static int lower_matmul(qr_graph *g, qr_node *m)
{
    int gemm = is(m, "Gemm");
    if (gemm && (qr_attr_i(m, "transA", 0) || qr_attr_f(m, "alpha", 1) != 1 || qr_attr_f(m, "beta", 1) != 1))
        return 0;
    if (m->n_in < 2 || (!gemm && m->n_in != 2))
        return 0;
    qr_node *dx = dq_of(m->in[0]), *dw = dq_of(m->in[1]), *db = gemm && m->n_in > 2 ? dq_of(m->in[2]) : NULL, *relu;
    if (!dx || !dw || !dw->in[0]->is_const || dw->in[0]->t.ndim != 2 || (gemm && m->n_in > 2 && m->in[2] && !db))
        return 0;
    if (qr_tensor_numel(&dx->in[1]->t) != 1 || (db && (!db->in[0]->is_const || db->in[0]->t.dtype != QR_I32)))
        return 0;
    const qr_tensor *wt = &dw->in[0]->t, *ws = &dw->in[1]->t, *wz = &dw->in[2]->t;
    int trans = gemm && qr_attr_i(m, "transB", 0);
    int64_t kdim = trans ? wt->dims[1] : wt->dims[0], ndim = trans ? wt->dims[0] : wt->dims[1];
    int64_t nsc = qr_tensor_numel(ws);
    if (nsc != 1 && (nsc != ndim || qr_attr_i(dw, "axis", 1) != (trans ? 0 : 1)))
        return 0; /* per-channel scales must run along the output columns */
    for (int64_t i = 0; i < qr_tensor_numel(wz); i++)
        if (qr_get_i64(wz->data, wz->dtype, i))
            return 0; /* MatMulInteger takes one weight zero point per column only when it is 0 here */
    qr_node *q = find_q(g, m, &relu);
    if (!q)
        return 0;
    char name[512];
    /* w' [K, N] as integers */
    qr_tensor w2 = {.dtype = wt->dtype, .ndim = 2, .dims = {kdim, ndim}};
    qr_error e;
    if (qr_tensor_alloc(&w2, &e) != QR_OK)
        return 0;
    size_t es = qr_dtype_size(wt->dtype);
    for (int64_t r = 0; r < kdim; r++)
        for (int64_t c = 0; c < ndim; c++)
            memcpy((char *)w2.data + (size_t)(r * ndim + c) * es,
                   (const char *)wt->data + (size_t)(trans ? c * kdim + r : r * ndim + c) * es, es);
    snprintf(name, sizeof name, "%s_int", dw->in[0]->name);
    qr_value *wv = qr_graph_new_value(g, name);
    qr_value_set_const(g, wv, &w2);
    qr_tensor_free(&w2);
    /* acc = MatMulInteger(x, w', x_zero) */
    snprintf(name, sizeof name, "%s_acc", m->out[0]->name);
    qr_value *acc = qr_graph_new_value(g, name);
    qr_node *mm = new_node(g, "MatMulInteger", m->name, 3, 1, m->opset < 10 ? 10 : m->opset);
    mm->in[0] = dx->in[0];
    mm->in[1] = wv;
    mm->in[2] = dx->in[2];
    mm->out[0] = acc;
    acc->producer = mm;
    if (db) {
        snprintf(name, sizeof name, "%s_acc_bias", m->out[0]->name);
        qr_value *ab = qr_graph_new_value(g, name);
        snprintf(name, sizeof name, "%s_bias", m->name);
        qr_node *add = new_node(g, "Add", name, 2, 1, m->opset < 7 ? 7 : m->opset);
        add->in[0] = acc;
        add->in[1] = db->in[0];
        add->out[0] = ab;
        ab->producer = add;
        acc = ab;
    }
    /* real = acc * s_x * s_w (per column), then Q to the output's parameters */
    qr_tensor sc = {.dtype = QR_F32, .ndim = nsc > 1 ? 1 : 0, .dims = {nsc}};
    if (qr_tensor_alloc(&sc, &e) != QR_OK)
        return 0;
    float sx = (float)qr_get_f64(dx->in[1]->t.data, dx->in[1]->t.dtype, 0);
    for (int64_t c = 0; c < nsc; c++)
        ((float *)sc.data)[c] = sx * (float)qr_get_f64(ws->data, ws->dtype, c);
    snprintf(name, sizeof name, "%s_acc_scale", m->out[0]->name);
    qr_value *scv = qr_graph_new_value(g, name);
    qr_value_set_const(g, scv, &sc);
    qr_tensor_free(&sc);
    int32_t zero = 0;
    qr_tensor zt = {.dtype = QR_I32, .ndim = nsc > 1 ? 1 : 0, .dims = {nsc}};
    if (qr_tensor_alloc(&zt, &e) != QR_OK)
        return 0;
    for (int64_t c = 0; c < nsc; c++)
        ((int32_t *)zt.data)[c] = zero;
    snprintf(name, sizeof name, "%s_acc_zero", m->out[0]->name);
    qr_value *zv = qr_graph_new_value(g, name);
    qr_value_set_const(g, zv, &zt);
    qr_tensor_free(&zt);
    snprintf(name, sizeof name, "%s_requant", m->name);
    qr_node *dq = new_node(g, "DequantizeLinear", name, 3, 1, 13);
    dq->in[0] = acc;
    dq->in[1] = scv;
    dq->in[2] = zv;
    if (nsc > 1)
        qr_node_add_attr_i(g, dq, "axis", 1);
    qr_value *real = m->out[0];
    if (relu)
        real = relu->out[0]; /* the Relu is the saturation of Q */
    dq->out[0] = real;
    real->producer = dq;
    q->in[0] = real;
    kill(m);
    kill(relu);
    return 1;
}

/* Ops that commute with quantization when input and output share qparams. */
static int moves_integers(const qr_node *n)
{
    static const char *const ops[] = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
                                      "Slice", "Gather", "Split", "Expand", "GlobalMaxPool"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (is(n, ops[i]))
            return 1;
    return 0;
}

static int same_const(const qr_value *a, const qr_value *b)
{
    return a && b && a->is_const && b->is_const && a->t.dtype == b->t.dtype && qr_tensor_same_shape(&a->t, &b->t) &&
           !memcmp(a->t.data, b->t.data, qr_tensor_nbytes(&a->t));
}

/* DQ(x) -> op -> Q(same params)  =>  op on the integers */
static int lower_move(qr_graph *g, qr_node *n)
{
    if (!moves_integers(n) || n->n_out != 1)
        return 0;
    qr_node *dx = dq_of(n->in[0]);
    qr_node *q = sole_consumer(g, n->out[0]);
    if (!dx || !q_params_const(q) || qr_tensor_numel(&dx->in[1]->t) != 1)
        return 0;
    if (!same_const(dx->in[1], q->in[1]) || !same_const(dx->in[2], q->in[2]))
        return 0;
    n->in[0] = dx->in[0];
    n->out[0] = q->out[0];
    q->out[0]->producer = n;
    kill(q);
    return 1;
}

int qr_pass_lower_qdq(qr_graph *g, qr_error *e)
{
    int lowered = 0;
    /* the graph grows while we walk it: only the original nodes are candidates */
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || n->domain[0])
            continue;
        if (is(n, "Conv"))
            lowered += lower_conv(g, n);
        else if (is(n, "Gemm") || is(n, "MatMul"))
            lowered += lower_matmul(g, n);
        else
            lowered += lower_move(g, n);
    }
    if (lowered) {
        qr_graph_drop_unused(g); /* DequantizeLinears whose real tensor nobody reads any more */
        qr_graph_compact(g);
        if (qr_graph_toposort(g, e) != QR_OK)
            return -1;
    }
    return lowered;
}
