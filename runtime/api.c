/* The public API of include/qrl.h over the runtime's graph and executor. */
#include "qrl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "op.h"
#include "onnx_import.h"
#include "passes.h"

struct qrl_model {
    qr_graph *g;
    qr_exec *x;
};

static int fail(const qr_error *e, char *err, size_t n)
{
    if (err && n)
        snprintf(err, n, "%s", e->msg);
    return 1;
}

const char *qrl_version(void) { return QRL_VERSION; }

int qrl_model_load(const char *path, int threads, qrl_model **out, char *err, size_t errlen)
{
    qr_error e;
    *out = NULL;
    qrl_model *m = calloc(1, sizeof *m);
    if (!m) {
        qr_errorf(&e, "out of memory");
        return fail(&e, err, errlen);
    }
    qr_exec_opts o = {.threads = threads};
    if (qr_onnx_load(path, &m->g, &e) != QR_OK)
        goto bad;
    if (qr_graph_optimize(m->g, &e) != QR_OK) {
        qr_error_prefix(&e, "%s", path);
        goto bad;
    }
    if (qr_exec_new(m->g, &o, &m->x, &e) != QR_OK)
        goto bad;
    *out = m;
    return 0;
bad:
    qrl_model_free(m);
    return fail(&e, err, errlen);
}

void qrl_model_free(qrl_model *m)
{
    if (!m)
        return;
    qr_exec_free(m->x);
    qr_graph_free(m->g);
    free(m);
}

int qrl_model_num_inputs(const qrl_model *m) { return m->g->n_inputs; }
int qrl_model_num_outputs(const qrl_model *m) { return m->g->n_outputs; }

const char *qrl_model_input(const qrl_model *m, int i)
{
    return i >= 0 && i < m->g->n_inputs ? m->g->inputs[i]->name : NULL;
}

const char *qrl_model_output(const qrl_model *m, int i)
{
    return i >= 0 && i < m->g->n_outputs ? m->g->outputs[i]->name : NULL;
}

static void to_qr(const qrl_tensor *a, qr_tensor *b)
{
    memset(b, 0, sizeof *b);
    b->dtype = qr_dtype_from_onnx(a->dtype);
    b->ndim = a->ndim;
    for (int i = 0; i < a->ndim && i < QR_MAX_DIMS; i++)
        b->dims[i] = a->dims[i];
    b->data = a->data;
}

int qrl_model_run(qrl_model *m, const qrl_tensor *inputs, qrl_tensor *outputs, char *err, size_t errlen)
{
    qr_error e;
    int ni = m->g->n_inputs, no = m->g->n_outputs;
    qr_tensor *in = calloc((size_t)ni + 1, sizeof *in), *out = calloc((size_t)no + 1, sizeof *out);
    int rc = 0;
    if (!in || !out) {
        qr_errorf(&e, "out of memory");
        rc = fail(&e, err, errlen);
        goto done;
    }
    for (int i = 0; i < ni; i++) {
        if (inputs[i].ndim < 0 || inputs[i].ndim > QR_MAX_DIMS) {
            qr_errorf(&e, "input '%s': rank %d is not supported", m->g->inputs[i]->name, inputs[i].ndim);
            rc = fail(&e, err, errlen);
            goto done;
        }
        to_qr(&inputs[i], &in[i]);
    }
    if (qr_exec_run(m->x, in, out, &e) != QR_OK) {
        rc = fail(&e, err, errlen);
        goto done;
    }
    for (int i = 0; i < no; i++) {
        memset(&outputs[i], 0, sizeof outputs[i]);
        outputs[i].dtype = qr_dtype_get(out[i].dtype)->onnx;
        outputs[i].ndim = out[i].ndim;
        memcpy(outputs[i].dims, out[i].dims, sizeof out[i].dims);
        outputs[i].data = out[i].data;
    }
done:
    free(in);
    free(out);
    return rc;
}

void qrl_tensor_free(qrl_tensor *t)
{
    free(t->data);
    t->data = NULL;
}

int qrl_model_num_nodes(const qrl_model *m) { return m->g->n_nodes; }

static const qr_node *node_at(const qrl_model *m, int i)
{
    return i >= 0 && i < m->g->n_nodes ? m->g->nodes[i] : NULL;
}

const char *qrl_node_op(const qrl_model *m, int node)
{
    const qr_node *n = node_at(m, node);
    return n ? n->op : NULL;
}

const char *qrl_node_name(const qrl_model *m, int node)
{
    const qr_node *n = node_at(m, node);
    return n ? n->name : NULL;
}

int qrl_node_num_inputs(const qrl_model *m, int node)
{
    const qr_node *n = node_at(m, node);
    return n ? n->n_in : -1;
}

int qrl_node_num_outputs(const qrl_model *m, int node)
{
    const qr_node *n = node_at(m, node);
    return n ? n->n_out : -1;
}

const char *qrl_node_input(const qrl_model *m, int node, int i)
{
    const qr_node *n = node_at(m, node);
    return n && i >= 0 && i < n->n_in && n->in[i] ? n->in[i]->name : NULL;
}

const char *qrl_node_output(const qrl_model *m, int node, int i)
{
    const qr_node *n = node_at(m, node);
    return n && i >= 0 && i < n->n_out && n->out[i] ? n->out[i]->name : NULL;
}

int qrl_value_get(const qrl_model *m, const char *name, qrl_value_info *out)
{
    const qr_value *v = qr_graph_find(m->g, name);
    if (!v)
        return 1;
    memset(out, 0, sizeof *out);
    out->name = v->name;
    out->dtype = qr_dtype_get(v->t.dtype)->onnx;
    out->ndim = v->t.ndim;
    for (int i = 0; i < v->t.ndim; i++)
        out->dims[i] = v->t.dims[i];
    out->is_constant = v->is_const;
    out->is_input = v->is_input;
    out->is_output = v->is_output;
    if (v->q) {
        out->has_quant = 1;
        out->quant = (qrl_quant){.dtype = qr_dtype_get(v->q->dtype)->onnx, .axis = v->q->axis, .count = v->q->n,
                                 .scale = v->q->scale, .zero_point = v->q->zero, .clip_min = v->q->clip_min,
                                 .clip_max = v->q->clip_max, .accumulator = qr_dtype_get(v->q->acc)->onnx};
    }
    return 0;
}

int qrl_op_known(const char *op)
{
    return op && qr_op_find("", op) != NULL;
}

int qrl_op_count(void)
{
    const qr_op_def *const *defs;
    return qr_op_list(&defs);
}

const char *qrl_op_name(int i)
{
    const qr_op_def *const *defs;
    int n = qr_op_list(&defs);
    return i >= 0 && i < n ? defs[i]->name : NULL;
}
