/* samples.h: whether a graph keeps each sample apart, node by node, from what each op's table
 * entry says of its inputs (qr_op_def.samples) and, for pointwise ops, element by element. */
#include "samples.h"

#include "op.h"

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
    if (n->def && n->def->samples) {
        for (int j = 0; j < n->n_in; j++) {
            const qr_value *v = n->in[j];
            if (!v)
                continue;
            int use = n->def->samples(n, j);
            int ok = use == QR_SAMPLES_EACH ? j == 0 || batched_like(v, y) : use == QR_SAMPLES_WHOLE && v->is_const;
            if (!ok)
                return 0;
        }
        return 1;
    }
    if (n->def && n->def->pointwise) {
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
