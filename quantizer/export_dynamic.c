/* Dynamically quantized convolutions in ONNX Runtime's integer operators (export_dynamic.h).
 * A QDQ export would say DynamicQuantizeLinear -> DequantizeLinear -> Conv, which ONNX Runtime
 * runs as a float convolution of dequantized values (its QDQ fusions want a QuantizeLinear after
 * the Conv, and a dynamic Conv's output is real); ConvInteger computes the same sums in integers.
 * ONNX Runtime's ConvInteger takes u8 x and u8 or i8 weights, but one weight zero point only
 * ("Non per-tensor quantization is not supported"): per-channel scales are fine (they go in the
 * Mul), per-channel zero points (asymmetric weights) keep the QDQ form. */
#include "export_dynamic.h"

#include <stdio.h>
#include <string.h>

#include "quantize_plan.h"

/* p when it is a live node of op `op`, else NULL. */
static qr_node *producer_op(const qr_value *v, const char *op)
{
    qr_node *p = v ? v->producer : NULL;
    return p && !p->dead && !strcmp(p->op, op) && !p->domain[0] ? p : NULL;
}

/* Whether live nodes of d read v (or v is a graph output). */
static int read_by_others(const qr_graph *d, const qr_value *v)
{
    for (int i = 0; i < d->n_outputs; i++)
        if (d->outputs[i] == v)
            return 1;
    for (int i = 0; i < d->n_nodes; i++)
        for (int j = 0; !d->nodes[i]->dead && j < d->nodes[i]->n_in; j++)
            if (d->nodes[i]->in[j] == v)
                return 1;
    return 0;
}

/* A new value of d named after `base` and produced by a new node op(a, b) of n_in inputs. */
static qr_value *emit(qr_graph *d, const char *op, const char *base, const char *suffix, int n_in, qr_value *a,
                      qr_value *b)
{
    char name[512];
    snprintf(name, sizeof name, "%s_%s", base, suffix);
    qr_value *out = qr_graph_new_value(d, name);
    snprintf(name, sizeof name, "%s_%s_node", base, suffix);
    qr_node *n = out && a && (n_in < 2 || b) ? qr_plan_new_node(d, op, "", name, n_in, 1) : NULL;
    if (!n)
        return NULL;
    n->in[0] = a;
    if (n_in > 1)
        n->in[1] = b;
    n->out[0] = out;
    out->producer = n;
    return out;
}

/* A copy of the f32 values of t (numel c) shaped [c, 1, ...] with rank rank - 1: one per channel
 * of an accumulator of rank `rank` (channels on axis 1), broadcast along the spatial axes. */
static qr_value *per_channel(qr_graph *d, const char *base, const char *suffix, const qr_tensor *t, int rank)
{
    qr_tensor c = {.dtype = QR_F32, .ndim = rank - 1, .data = t->data};
    c.dims[0] = qr_tensor_numel(t);
    for (int k = 1; k < rank - 1; k++)
        c.dims[k] = 1;
    char name[512];
    snprintf(name, sizeof name, "%s_%s", base, suffix);
    return qr_plan_const(d, name, &c);
}

/* Rewrites Conv node c (see export_dynamic.h): 1 done, 0 not of that form, -1 out of memory. */
static int rewrite(qr_graph *d, qr_node *c)
{
    qr_node *xdq = producer_op(c->in[0], "DequantizeLinear"), *wdq = c->n_in > 1 ? producer_op(c->in[1], "DequantizeLinear") : NULL;
    qr_node *dql = xdq && xdq->n_in == 3 ? producer_op(xdq->in[0], "DynamicQuantizeLinear") : NULL;
    qr_value *b = c->n_in > 2 ? c->in[2] : NULL, *y = c->out[0];
    if (!dql || xdq->in[1] != dql->out[1] || xdq->in[2] != dql->out[2] || !wdq || wdq->n_in < 3)
        return 0;
    const qr_value *wi = wdq->in[0], *ws = wdq->in[1], *wz = wdq->in[2];
    if (!wi->is_const || !ws->is_const || !wz || !wz->is_const || ws->t.dtype != QR_F32 ||
        (wi->t.dtype != QR_I8 && wi->t.dtype != QR_U8) || wi->t.ndim < 3 || (b && (!b->is_const || b->t.dtype != QR_F32)))
        return 0;
    int64_t m = wi->t.dims[0], nz = qr_tensor_numel(&wz->t), ns = qr_tensor_numel(&ws->t);
    for (int64_t k = 1; k < nz; k++)
        if (qr_get_i64(wz->t.data, wz->t.dtype, k) != qr_get_i64(wz->t.data, wz->t.dtype, 0))
            return 0; /* per-channel zero points: ONNX Runtime's ConvInteger refuses them */
    if ((ns != 1 && (ns != m || qr_attr_i(wdq, "axis", 1) != 0)) || (b && qr_tensor_numel(&b->t) != m))
        return 0;
    int rank = wi->t.ndim; /* the accumulator's: N, M, then the weight's spatial axes */
    const char *base = y->name;
    char name[512];
    unsigned char zero[8] = {0};
    qr_set_i64(zero, wi->t.dtype, 0, qr_get_i64(wz->t.data, wz->t.dtype, 0));
    qr_tensor zt = {.dtype = wi->t.dtype, .ndim = 0, .data = zero};
    snprintf(name, sizeof name, "%s_w_zero_point", base);
    qr_value *wzs = qr_plan_const(d, name, &zt);
    snprintf(name, sizeof name, "%s_acc", base);
    qr_value *acc = qr_graph_new_value(d, name);
    snprintf(name, sizeof name, "%s_integer", c->name);
    qr_node *ci = wzs && acc ? qr_plan_new_node(d, "ConvInteger", "", name, 4, 1) : NULL;
    if (!ci)
        return -1;
    ci->in[0] = dql->out[0];
    ci->in[1] = (qr_value *)wi;
    ci->in[2] = dql->out[2];
    ci->in[3] = wzs;
    ci->out[0] = acc;
    acc->producer = ci;
    ci->attr = c->attr; /* the Conv's geometry: strides, pads, dilations, group, kernel_shape, auto_pad */
    ci->n_attr = c->n_attr;
    qr_value *accf = emit(d, "Cast", base, "acc_f32", 1, acc, NULL);
    if (accf)
        qr_node_add_attr_i(d, accf->producer, "to", 1); /* ONNX's FLOAT */
    qr_value *wsc = per_channel(d, base, "w_scale", &ws->t, rank);
    qr_value *k = emit(d, "Mul", base, "scale", 2, dql->out[1], wsc);
    qr_value *out = emit(d, "Mul", base, "scaled", 2, accf, k);
    if (out && b)
        out = emit(d, "Add", base, "biased", 2, out, per_channel(d, base, "bias", &b->t, rank));
    if (!out || qr_graph_oom(d))
        return -1;
    /* the last node writes y itself: y keeps its name and its readers; the dead Conv takes the
     * last node's own value, which nothing reads */
    qr_node *last = out->producer;
    last->out[0] = y;
    y->producer = last;
    c->out[0] = out;
    out->producer = c;
    c->dead = 1;
    if (!read_by_others(d, c->in[0]))
        xdq->dead = 1;
    if (!read_by_others(d, c->in[1]))
        wdq->dead = 1;
    return 1;
}

int qr_export_dynamic_convs(qr_graph *d)
{
    int n = 0, total = d->n_nodes;
    for (int i = 0; i < total; i++) {
        qr_node *c = d->nodes[i];
        if (c->dead || strcmp(c->op, "Conv") || c->domain[0])
            continue;
        int r = rewrite(d, c);
        if (r < 0)
            return -1;
        n += r;
    }
    return n;
}
