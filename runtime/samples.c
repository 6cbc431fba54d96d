/* samples.h: a list of ops that keep each sample apart, checked node by node. The op names are the
 * runtime's own kernels' (mechanism: which kernels compute a sample alone), not quantization policy. */
#include "samples.h"

#include <string.h>

#include "op.h"

static int is(const qr_node *n, const char *domain, const char *op)
{
    return !strcmp(n->domain, domain) && !strcmp(n->op, op);
}

/* v is a runtime value with axis 0 the batch: rank at least 1, the same recorded axis 0 as ref. */
static int batched_like(const qr_value *v, const qr_value *ref)
{
    return v && !v->is_const && v->t.ndim >= 1 && ref->t.ndim >= 1 && v->t.dims[0] == ref->t.dims[0];
}

static int node_apart(const qr_node *n)
{
    if (n->n_out != 1 || !n->out[0] || n->n_in < 1 || !n->in[0] || n->in[0]->is_const)
        return 0;
    const qr_value *x = n->in[0], *y = n->out[0];
    if (!batched_like(x, y))
        return 0;
    /* one data input; the others constants (weights, bias) */
    int consts_after = 1;
    for (int i = 1; i < n->n_in; i++)
        consts_after &= !n->in[i] || n->in[i]->is_const;
    if (is(n, "", "Conv") || is(n, "", "MaxPool") || is(n, "", "AveragePool") || is(n, "", "GlobalAveragePool") ||
        is(n, "", "GlobalMaxPool") || is(n, "qrl", "QrlMaxPoolF32Nhwc") || is(n, "qrl", "QrlGlobalAveragePoolF32Nhwc"))
        return consts_after && n->n_out == 1;
    if (is(n, "qrl", "QrlConvF32Nhwc")) /* its fourth input, a fused residual, is y's shape */
        return n->n_in < 4 || !n->in[3] || batched_like(n->in[3], y);
    if (is(n, "", "Flatten"))
        return qr_attr_i(n, "axis", 1) >= 1;
    if (is(n, "", "Transpose")) {
        const int64_t *perm;
        int np = qr_attr_ints(n, "perm", &perm);
        return np >= 1 && perm[0] == 0;
    }
    if (is(n, "", "Gemm")) /* A [N, K] row by row (its rows' sums do not depend on the others) */
        return consts_after && qr_attr_i(n, "transA", 0) == 0 && x->t.ndim == 2 &&
               (n->n_in < 3 || !n->in[2] || n->in[2]->t.ndim <= 1 ||
                (n->in[2]->t.ndim == 2 && n->in[2]->t.dims[0] == 1));
    if (n->def && (n->def->pointwise || is(n, "", "Clip"))) {
        /* element by element: every runtime input batched as y, the constants single values */
        for (int i = 0; i < n->n_in; i++) {
            const qr_value *v = n->in[i];
            if (!v)
                continue;
            if (v->is_const ? qr_tensor_numel(&v->t) != 1 : !batched_like(v, y))
                return 0;
        }
        return 1;
    }
    return 0;
}

int qr_graph_samples_apart(const qr_graph *g)
{
    if (g->n_inputs < 1 || g->n_outputs < 1)
        return 0;
    const qr_value *ref = g->inputs[0];
    for (int i = 0; i < g->n_inputs; i++)
        if (!batched_like(g->inputs[i], ref))
            return 0;
    for (int i = 0; i < g->n_outputs; i++)
        if (!g->outputs[i] || g->outputs[i]->is_const || g->outputs[i]->t.ndim < 1)
            return 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && !node_apart(g->nodes[i]))
            return 0;
    return 1;
}
