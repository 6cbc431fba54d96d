/* A QDQ model back to the float graph it quantizes (see quantize.h,
 * qr_qdq_strip). Annotation (qr_pass_annotate_qdq) has already given every
 * tensor between a QuantizeLinear and its DequantizeLinears, and every
 * constant a DequantizeLinear folded into floats, the file's qparams
 * (value->q); here the pairs go, so that the quantizer's own patterns and
 * affine rules match the model as they match an fp32 one, with the file's
 * qparams in place of calibration. */
#include <string.h>

#include "quantize.h"

static int is_op(const qr_node *n, const char *op)
{
    return n && !n->dead && !n->domain[0] && !strcmp(n->op, op);
}

/* The same constant tensor (scale or zero point), element for element. */
static int same_const(const qr_value *a, const qr_value *b)
{
    if (a == b)
        return 1;
    if (!a || !b || !a->is_const || !b->is_const || a->t.dtype != b->t.dtype ||
        qr_tensor_numel(&a->t) != qr_tensor_numel(&b->t))
        return 0;
    return !memcmp(a->t.data, b->t.data, qr_tensor_nbytes(&a->t));
}

/* Whether DequantizeLinear d undoes QuantizeLinear q exactly: same scale, zero point and axis. */
static int undoes(const qr_node *q, const qr_node *d)
{
    if (!is_op(d, "DequantizeLinear") || d->n_in < 2 || !d->in[1] || !d->in[1]->is_const)
        return 0;
    const qr_value *qz = q->n_in > 2 ? q->in[2] : NULL, *dz = d->n_in > 2 ? d->in[2] : NULL;
    return same_const(q->in[1], d->in[1]) && (qz == dz || same_const(qz, dz)) &&
           qr_attr_i(q, "axis", 1) == qr_attr_i(d, "axis", 1);
}

int qr_qdq_strip(qr_graph *g)
{
    int pairs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *q = g->nodes[i];
        if (!is_op(q, "QuantizeLinear") || q->n_in < 2 || !q->in[1] || !q->in[1]->is_const || !q->in[0] ||
            !q->in[0]->q || q->n_out < 1 || !q->out[0] || q->out[0]->is_output)
            continue;
        qr_value *x = q->in[0], *xi = q->out[0];
        int uses = 0, all_dq = 1;
        for (int k = 0; k < g->n_nodes && all_dq; k++) {
            const qr_node *d = g->nodes[k];
            for (int j = 0; !d->dead && j < d->n_in; j++)
                if (d->in[j] == xi) {
                    uses++;
                    all_dq &= j == 0 && undoes(q, d) && !d->out[0]->is_const;
                }
        }
        if (!uses || !all_dq)
            continue; /* the integers are used as integers (QLinearConv, ...): the pair stays */
        for (int k = 0; k < g->n_nodes; k++) {
            qr_node *d = g->nodes[k];
            if (d->dead || d->n_in < 1 || d->in[0] != xi)
                continue;
            qr_value *r = d->out[0];
            if (r->is_output) { /* the model's output keeps its name */
                const char *name = r->name;
                r->name = x->name;
                x->name = name;
                x->is_output = 1;
                r->is_output = 0;
            }
            qr_graph_replace_uses(g, r, x);
            d->dead = 1;
        }
        q->dead = 1;
        pairs++;
    }
    if (pairs)
        qr_graph_drop_unused(g);
    return pairs;
}
