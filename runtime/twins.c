/* Channels-last twins of 4-D values (twins.h). */
#include "twins.h"

#include <stdio.h>
#include <stdlib.h>

#include "op.h"

const int64_t qr_twins_to_nhwc[4] = {0, 2, 3, 1};
const int64_t qr_twins_to_nchw[4] = {0, 3, 1, 2};

int qr_twins_init(qr_twins *T, qr_graph *g)
{
    *T = (qr_twins){.g = g, .twin = calloc((size_t)g->n_values + 1, sizeof(qr_value *)), .ntwin = g->n_values};
    return T->twin ? 0 : -1;
}

void qr_twins_free(qr_twins *T)
{
    free(T->twin);
    T->twin = NULL;
}

int qr_twins_has(const qr_twins *T, const qr_value *v)
{
    return v && v->id < T->ntwin && T->twin[v->id];
}

qr_value *qr_twins_new_value(qr_twins *T, const qr_value *v, const int64_t *perm)
{
    char name[512];
    snprintf(name, sizeof name, "%s" QR_TWINS_SUFFIX, v->name);
    qr_value *t = qr_graph_new_value(T->g, name);
    if (!t)
        return NULL;
    t->t = v->t;
    t->t.data = NULL;
    for (int d = 0; d < 4; d++) {
        t->t.dims[d] = v->t.dims[perm[d]];
        t->dim_param[d] = v->dim_param[perm[d]];
    }
    t->q = v->q;
    return t;
}

qr_value *qr_twins_write_twin(qr_twins *T, qr_node *n)
{
    qr_value *out = n->out[0], *t = qr_twins_new_value(T, out, qr_twins_to_nhwc);
    if (!t || out->id >= T->ntwin)
        return NULL;
    n->out[0] = t;
    t->producer = n;
    out->producer = NULL;
    return T->twin[out->id] = t;
}

qr_node *qr_twins_transpose(qr_twins *T, qr_value *from, qr_value *to, const int64_t *perm)
{
    char name[512];
    snprintf(name, sizeof name, "layout_%s", to->name);
    qr_node *n = qr_graph_add_node(T->g, "Transpose", name, 1, 1);
    if (!n || !(n->domain = qr_arena_strdup(&T->g->arena, "")))
        return NULL;
    n->def = qr_op_find("", "Transpose");
    n->opset = T->g->opset;
    qr_node_add_attr_ints(T->g, n, "perm", 4, perm);
    n->in[0] = from;
    n->out[0] = to;
    to->producer = n;
    return n;
}

qr_value *qr_twins_nhwc_of(qr_twins *T, qr_value *v)
{
    if (qr_twins_has(T, v))
        return T->twin[v->id];
    qr_value *t = qr_twins_new_value(T, v, qr_twins_to_nhwc);
    if (!t || !qr_twins_transpose(T, v, t, qr_twins_to_nhwc) || v->id >= T->ntwin)
        return NULL;
    return T->twin[v->id] = t;
}

int qr_twins_restore_nchw(qr_twins *T)
{
    int nvalues = T->ntwin;
    char *read = calloc((size_t)nvalues + 1, 1);
    if (!read)
        return -1;
    for (int i = 0; i < T->g->n_nodes; i++) {
        const qr_node *n = T->g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++)
            if (n->in[j] && n->in[j]->id < nvalues)
                read[n->in[j]->id] = 1;
    }
    int st = 0;
    for (int id = 0; id < nvalues && !st; id++) {
        qr_value *v = T->g->values[id];
        if (T->twin[id] && !v->producer && !v->is_input && !v->is_const && (read[id] || v->is_output))
            st = qr_twins_transpose(T, T->twin[id], v, qr_twins_to_nchw) ? 0 : -1;
    }
    free(read);
    return st;
}
