/* The public API of include/qrl.h over the runtime's graph and executor. */
#include "qrl.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_model.h"
#include "cpu.h"
#include "dump.h"
#include "exec.h"
#include "fileio.h"
#include "text.h"
#include "op.h"
#include "onnx_import.h"
#include "options.h"
#include "passes.h"
#include "recipe.h"
#include "samples.h"
#include "tensor_io.h"

int qr_api_fail(const qr_error *e, char *err, size_t n)
{
    if (err && n)
        snprintf(err, n, "%s", e->msg);
    return 1;
}

#define fail qr_api_fail

qr_status qr_api_model_wrap(qr_graph *g, void *kernel_user, int threads, qrl_model **out, qr_error *e)
{
    qrl_model *m = calloc(1, sizeof *m);
    if (!m)
        return qr_errorf(e, "out of memory");
    m->g = g;
    m->kernel_user = kernel_user;
    if (qr_api_model_exec(m, threads, 0, e) != QR_OK) {
        free(m);
        return QR_ERR;
    }
    m->borrowed = 1;
    *out = m;
    return QR_OK;
}

void qr_api_model_unwrap(qrl_model *m)
{
    if (!m)
        return;
    qr_exec_free(m->x);
    free(m);
}

qr_status qr_api_model_exec(qrl_model *m, int threads, int profile, qr_error *e)
{
    qr_exec *x;
    if (m->layout && !m->xg) { /* the channels-last f32 graph, on a copy (once) */
        m->layout = 0;
        qr_graph *c = qr_graph_clone_shared(m->g);
        int changed = 0;
        if (!c)
            return qr_errorf(e, "out of memory");
        if (qr_pass_nhwc_f32(c, &changed, e) != QR_OK) {
            qr_graph_free(c);
            return QR_ERR;
        }
        if (changed)
            m->xg = c;
        else
            qr_graph_free(c);
    }
    /* inference keeps its packed weights: up to a quarter of the memory budget (op.h) */
    qr_exec_opts o = {.threads = threads, .kernel_user = m->kernel_user, .profile = profile,
                      .cache_max = qr_exec_default_max_memory() / 4};
    if (qr_exec_new(m->xg ? m->xg : m->g, &o, &x, e) != QR_OK)
        return QR_ERR; /* m->x stays as it was */
    qr_exec_free(m->x);
    m->x = x;
    m->threads = threads;
    m->profile = profile;
    m->apart = m->xg && qr_graph_samples_apart(m->xg);
    m->sample_peak = 0;
    m->prof_runs = m->prof_exec_runs = 0;
    return QR_OK;
}

const char *qrl_version(void) { return QRL_VERSION; }

void qrl_cpu_describe(char *buf, size_t n) { qr_cpu_describe(buf, n); }

int qrl_model_load(const char *path, int threads, qrl_model **out, char *err, size_t errlen)
{
    qr_error e;
    *out = NULL;
    qrl_model *m = calloc(1, sizeof *m);
    if (!m) {
        qr_errorf(&e, "out of memory");
        return fail(&e, err, errlen);
    }
    if (!(m->path = strdup(path))) {
        qr_errorf(&e, "out of memory");
        goto bad;
    }
    if (qr_onnx_load(path, &m->g, &e) != QR_OK)
        goto bad;
    if (qr_graph_optimize(m->g, &e) != QR_OK) {
        qr_error_prefix(&e, "%s", path);
        goto bad;
    }
    m->layout = 1;
    if (qr_api_model_exec(m, threads, 0, &e) != QR_OK)
        goto bad;
    *out = m;
    return 0;
bad:
    qrl_model_free(m);
    return fail(&e, err, errlen);
}

void qrl_model_free(qrl_model *m)
{
    if (!m || m->borrowed)
        return;
    qr_exec_free(m->x);
    qr_graph_free(m->xg);
    qr_graph_free(m->g);
    free(m->path);
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

void qr_api_tensor_in(const qrl_tensor *a, qr_tensor *b)
{
    memset(b, 0, sizeof *b);
    b->dtype = qr_dtype_from_onnx(a->dtype);
    b->ndim = a->ndim;
    for (int i = 0; i < a->ndim && i < QR_MAX_DIMS; i++)
        b->dims[i] = a->dims[i];
    b->data = a->data;
}

void qr_api_tensor_out(const qr_tensor *a, qrl_tensor *b)
{
    memset(b, 0, sizeof *b);
    b->dtype = qr_dtype_get(a->dtype)->onnx;
    b->ndim = a->ndim;
    memcpy(b->dims, a->dims, sizeof a->dims);
    b->data = a->data;
}

/* The L2 cache's bytes of the core the process runs on (1 MB where neither the system nor CPUID
 * says). A batch of an f32 CNN whose samples are computed apart (m->apart) runs in parts of about
 * this many input bytes: its layers' activations then stay in cache from one layer to the next,
 * where the whole batch's went through memory at every layer (MobileNetV2 at batch 64: 6.6 against
 * 3.9 ms an image, Zen 5, 1 thread). Each sample's outputs are the same bits either way. */
static size_t l2_bytes(void) { return qr_cpu_cache_bytes(2, (size_t)1 << 20); }

/* Samples per part for inputs in (0: the batch at once). Once a run has measured the bytes a
 * sample keeps live (m->sample_peak), a part is also at most as many samples as that fits in L2
 * where the part would keep more than 8 L2s live:
 * the small ResNet's 3 x 32 x 32 inputs (12 KB) made parts of 85 samples, whole batches of 64, while
 * its layers keep 197 KB a sample live, so each layer read the last one's 12 MB from L3 (batch 64:
 * 7.6-7.8k images/s, in parts of 5 8.3-8.5k, Zen 5, 1 thread). */
static int64_t part_size(const qrl_model *m, const qr_tensor *in)
{
    const qr_graph *g = m->xg;
    if (!m->apart || !g || in[0].ndim < 1 || in[0].dims[0] < 2)
        return 0;
    int64_t n = in[0].dims[0];
    /* --option parts: a fixed size, to measure the rule against (docs/runtime.md, "Stop 39": on
     * Zen 4 at batch 64 no fixed size beat it on the four bench CNNs beyond the runs' spread) */
    int forced = qr_options_get()->parts;
    if (forced == QR_PARTS_WHOLE)
        return 0;
    if (forced >= QR_PARTS_1) {
        int64_t f = (int64_t)1 << (forced - QR_PARTS_1);
        return f < n ? f : 0;
    }
    size_t per = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        if (in[i].ndim < 1 || in[i].dims[0] != n)
            return 0;
        per += qr_tensor_nbytes(&in[i]) / (size_t)n;
    }
    int64_t s = per ? (int64_t)(l2_bytes() / per) : n;
    s = s < 1 ? 1 : s;
    /* only where a part would keep more than 8 L2s live: the Fashion-MNIST CNN's whole batch of 64
     * keeps 4.2 MB and ran 2-4% slower in parts of 15 (an executor run per part; Zen). On CPUs with
     * AVX512-FP16 (Intel Sapphire Rapids and later Xeons, whose mesh L3 feeds a core more slowly),
     * where half an L2 holds two samples or more, more than half of one, and parts of half an L2:
     * there the CNN at 64 ran 1.98-2.09 ms whole, 1.71-1.85 in parts of 16, 1.65-1.73 in parts of 8
     * (Xeon model 167, frozen, stop 48). Samples of more than a quarter of an L2 keep the 8 L2s:
     * ResNet-18 f32 at 64 (4 MB a sample) ran 1404-1580 ms in parts of 3, 1668-1944 in parts of 1.
     * One thread only: on 2 the CNN at 64 ran 1.28-1.30 ms in parts of 8 against 1.06-1.10 whole */
    int64_t k = s < n ? s : n;
    size_t half = l2_bytes() / 2;
    int wide = m->threads <= 1 && m->sample_peak && half / m->sample_peak >= 2 && __builtin_cpu_supports("avx512fp16");
    size_t budget = wide ? half : 8 * l2_bytes();
    if (m->sample_peak && (size_t)k * m->sample_peak > budget) {
        int64_t c = (int64_t)((wide ? half : l2_bytes()) / m->sample_peak);
        c = c < 1 ? 1 : c;
        /* parts of one size where one of at least half of c divides the batch (one plan for all) */
        for (int64_t d = c; d >= 1 && 2 * d >= c; d--)
            if (n % d == 0) {
                c = d;
                break;
            }
        s = c < s ? c : s;
    }
    return s < n ? s : 0;
}

/* m->sample_peak from the executor's last run, of k samples. */
static void note_peak(qrl_model *m, int64_t k)
{
    qr_exec_stats st;
    qr_exec_get_stats(m->x, &st);
    if (k > 0 && st.peak_bytes)
        m->sample_peak = st.peak_bytes / (size_t)k;
}

/* in's batch in parts of s samples, each part's outputs copied into out at its place. */
static qr_status run_parts(qrl_model *m, const qr_tensor *in, qr_tensor *out, int64_t s, qr_error *e)
{
    const qr_graph *g = m->xg;
    int ni = g->n_inputs, no = g->n_outputs;
    int64_t n = in[0].dims[0];
    qr_tensor *vin = calloc((size_t)ni, sizeof *vin), *vout = calloc((size_t)no, sizeof *vout);
    qr_status st = vin && vout ? QR_OK : qr_errorf(e, "out of memory");
    for (int o = 0; o < no; o++)
        memset(&out[o], 0, sizeof out[o]);
    for (int64_t b0 = 0; b0 < n && st == QR_OK; b0 += s) {
        int64_t k = n - b0 < s ? n - b0 : s;
        for (int i = 0; i < ni; i++) {
            vin[i] = in[i];
            vin[i].dims[0] = k;
            vin[i].data = (char *)in[i].data + (size_t)b0 * (qr_tensor_nbytes(&in[i]) / (size_t)n);
        }
        if ((st = qr_exec_run(m->x, vin, vout, e)) != QR_OK)
            break;
        note_peak(m, k);
        m->prof_exec_runs++;
        for (int o = 0; o < no && st == QR_OK; o++) {
            qr_tensor *t = &vout[o];
            if (b0 == 0) {
                out[o] = *t;
                out[o].data = NULL;
                out[o].dims[0] = t->ndim >= 1 ? n : 0;
                st = t->ndim >= 1 && t->dims[0] == k ? qr_tensor_alloc(&out[o], e)
                                                     : qr_errorf(e, "output '%s' is not batched as the inputs",
                                                                 g->outputs[o]->name);
            } else {
                out[o].dims[0] = k;
                if (!qr_tensor_same_shape(t, &out[o]) || t->dtype != out[o].dtype)
                    st = qr_errorf(e, "output '%s' changed its shape between parts of the batch",
                                   g->outputs[o]->name);
                out[o].dims[0] = n;
            }
            if (st == QR_OK && qr_tensor_nbytes(t))
                memcpy((char *)out[o].data + (size_t)b0 * (qr_tensor_nbytes(&out[o]) / (size_t)n), t->data,
                       qr_tensor_nbytes(t));
        }
        for (int o = 0; o < no; o++)
            qr_tensor_free(&vout[o]);
    }
    if (st != QR_OK)
        for (int o = 0; o < no; o++)
            qr_tensor_free(&out[o]);
    free(vin);
    free(vout);
    return st;
}

int qrl_model_run(qrl_model *m, const qrl_tensor *inputs, qrl_tensor *outputs, char *err, size_t errlen)
{
    qr_error e;
    int ni = m->g->n_inputs, no = m->g->n_outputs;
    if (!m->x) {
        qr_errorf(&e, "the model cannot run: its executor could not be made");
        return fail(&e, err, errlen);
    }
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
        qr_api_tensor_in(&inputs[i], &in[i]);
    }
    int64_t part = part_size(m, in);
    if (part ? run_parts(m, in, out, part, &e) != QR_OK : qr_exec_run(m->x, in, out, &e) != QR_OK) {
        rc = fail(&e, err, errlen);
        goto done;
    }
    if (!part && m->apart && in[0].ndim >= 1)
        note_peak(m, in[0].dims[0]);
    m->prof_runs++;
    m->prof_exec_runs += !part;
    for (int i = 0; i < no; i++)
        qr_api_tensor_out(&out[i], &outputs[i]);
done:
    free(in);
    free(out);
    return rc;
}

void qrl_tensor_free(qrl_tensor *t)
{
    qr_data_free(t->data); /* calibration data may be a mapping (qr_tensor_read_calib) */
    t->data = NULL;
}

/* The walk is of the model as loaded, its names the file's (a back end maps qparams by them); the
 * profile is of the graph the executor runs (qr_api_run_graph), which may differ (qrl_model_profile). */
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
    for (int i = 0; i < v->t.ndim; i++) {
        out->dims[i] = v->t.dims[i];
        out->dim_param[i] = v->dim_param[i];
    }
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

/* One batch's correct answers: the first output's largest class against labels[s..s+b). */
static qr_status top1_batch(const qr_tensor *o, const qr_tensor *y, int64_t s, int64_t b, int64_t *correct,
                            qr_error *e)
{
    int64_t classes = o->ndim >= 1 && o->dims[0] == b ? qr_tensor_numel(o) / (b ? b : 1) : 0;
    if (!classes || !qr_dtype_is_float(o->dtype)) {
        char tb[160];
        return qr_errorf(e, "the first output %s is not a [batch, classes] float tensor",
                         qr_tensor_type_str(o, tb, sizeof tb));
    }
    for (int64_t i = 0; i < b; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (qr_get_f64(o->data, o->dtype, i * classes + c) > qr_get_f64(o->data, o->dtype, i * classes + best))
                best = c;
        *correct += best == qr_get_i64(y->data, y->dtype, s + i);
    }
    return QR_OK;
}

/* Top-1 of g's first output over x (samples along dim 0, one tensor per input) against labels y, run
 * by ex in batches. */
static qr_status top1(qr_exec *ex, const qr_graph *g, const qr_tensor *x, const qr_tensor *y, int batch,
                      int64_t *correct, qr_error *e)
{
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out), *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    if (!out || !in) {
        free(out);
        free(in);
        return qr_errorf(e, "out of memory");
    }
    int64_t n = x[0].dims[0];
    qr_status st = QR_OK;
    *correct = 0;
    for (int64_t s = 0; s < n && st == QR_OK; s += batch) {
        int64_t b = n - s < batch ? n - s : batch;
        for (int i = 0; i < g->n_inputs; i++) { /* samples s .. s + b of every input */
            size_t row = qr_tensor_nbytes(&x[i]) / (size_t)(n ? n : 1);
            in[i] = x[i];
            in[i].dims[0] = b;
            in[i].data = (char *)x[i].data + (size_t)s * row;
        }
        if (qr_exec_run(ex, in, out, e) != QR_OK) {
            qr_error_prefix(e, "samples %lld..%lld", (long long)s, (long long)(s + b - 1));
            st = QR_ERR;
            break;
        }
        st = top1_batch(&out[0], y, s, b, correct, e);
        for (int j = 0; j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
        for (int i = 0; i < g->n_inputs; i++) /* a mapped .npy keeps a batch in memory, not the file */
            qr_data_release(x[i].data, (size_t)s * (qr_tensor_nbytes(&x[i]) / (size_t)n), qr_tensor_nbytes(&in[i]));
    }
    free(out);
    free(in);
    return st;
}

int qrl_model_eval_top1(qrl_model *m, const qrl_tensor *data, const qrl_tensor *labels, int batch, int64_t *correct,
                        char *err, size_t errlen)
{
    qr_error e;
    int ni = m->g->n_inputs;
    qr_tensor *x = calloc((size_t)ni + 1, sizeof *x), y;
    *correct = 0;
    if (!x) {
        qr_errorf(&e, "out of memory");
        return fail(&e, err, errlen);
    }
    qr_api_tensor_in(labels, &y);
    qr_status st = QR_OK;
    for (int i = 0; i < ni && st == QR_OK; i++) {
        if (data[i].ndim < 1 || data[i].ndim > QR_MAX_DIMS) {
            st = qr_errorf(&e, "input '%s': rank %d is not supported", m->g->inputs[i]->name, data[i].ndim);
            break;
        }
        qr_api_tensor_in(&data[i], &x[i]);
        if (x[i].ndim < 1 || y.ndim != 1 || x[i].dims[0] != y.dims[0] || !qr_dtype_is_int(y.dtype)) {
            char a[160], b[160];
            st = qr_errorf(&e, "data %s and labels %s do not match (need N samples and N integer labels)",
                           qr_tensor_type_str(&x[i], a, sizeof a), qr_tensor_type_str(&y, b, sizeof b));
        }
    }
    if (st == QR_OK && ni < 1)
        st = qr_errorf(&e, "the model has no input");
    if (st == QR_OK && !m->x)
        st = qr_errorf(&e, "the model cannot run: its executor could not be made");
    if (st == QR_OK)
        st = top1(m->x, qr_api_run_graph(m), x, &y, batch > 0 ? batch : 100, correct, &e);
    free(x);
    return st == QR_OK ? 0 : fail(&e, err, errlen);
}

_Static_assert(QRL_MAX_DIMS == QR_MAX_DIMS, "qrl_tensor and qr_tensor have the same dimensions");

int qrl_model_configure(qrl_model *m, int threads, int flags, char *err, size_t errlen)
{
    qr_error e;
    return qr_api_model_exec(m, threads, (flags & QRL_RUN_PROFILE) != 0, &e) == QR_OK ? 0 : fail(&e, err, errlen);
}

void qrl_model_stats(const qrl_model *m, qrl_run_stats *out)
{
    qr_exec_stats st = {0};
    if (m->x)
        qr_exec_get_stats(m->x, &st);
    *out = (qrl_run_stats){.arena_bytes = st.arena_bytes, .sum_bytes = st.sum_bytes, .peak_bytes = st.peak_bytes,
                           .dynamic = st.dynamic, .work_bytes = st.work_bytes};
}

int qrl_model_banded_nodes(const qrl_model *m)
{
    qr_exec_stats st = {0};
    if (m->x)
        qr_exec_get_stats(m->x, &st);
    return st.banded_nodes;
}

int qrl_model_profile(const qrl_model *m, int node, qrl_node_profile *out)
{
    const qr_node_prof *p = m->x ? qr_exec_profile(m->x) : NULL;
    const qr_graph *g = qr_api_run_graph(m);
    if (!p || node < 0 || node >= g->n_nodes)
        return 1;
    /* the model's runs: a batch run in parts ran the executor once a part */
    int64_t runs = p[node].runs;
    if (m->prof_exec_runs > m->prof_runs && m->prof_runs > 0)
        runs = (runs * m->prof_runs + m->prof_exec_runs / 2) / m->prof_exec_runs;
    *out = (qrl_node_profile){.seconds = p[node].seconds, .runs = runs, .macs = p[node].macs};
    return 0;
}

int qrl_model_profile_node(const qrl_model *m, int node, const char **op, const char **name)
{
    const qr_node_prof *p = m->x ? qr_exec_profile(m->x) : NULL;
    const qr_graph *g = qr_api_run_graph(m);
    if (!p || node < 0 || node >= g->n_nodes)
        return 1;
    *op = g->nodes[node]->op;
    *name = g->nodes[node]->name;
    return 0;
}

void qrl_model_profile_reset(qrl_model *m)
{
    if (m->x)
        qr_exec_profile_reset(m->x);
    m->prof_runs = m->prof_exec_runs = 0;
}

void qrl_model_dump(const qrl_model *m, FILE *f)
{
    qr_graph_dump(m->g, f);
}

/* The input of g that spec names ("NAME=FILE"), or the next one not yet bound ("FILE"); -1 with e set. */
static int input_slot(const char *label, const qr_graph *g, const char *spec, const int *bound, int *next,
                      qr_error *e)
{
    const char *eq = strchr(spec, '=');
    if (eq) {
        int slot = -1;
        for (int j = 0; j < g->n_inputs; j++)
            if (strlen(g->inputs[j]->name) == (size_t)(eq - spec) && !strncmp(g->inputs[j]->name, spec, (size_t)(eq - spec)))
                slot = j;
        if (slot < 0)
            qr_errorf(e, "%s: the model has no input named '%.*s'", label, (int)(eq - spec), spec);
        return slot;
    }
    while (*next < g->n_inputs && bound[*next])
        (*next)++;
    if (*next >= g->n_inputs) {
        qr_errorf(e, "%s: more input files than graph inputs (%d)", label, g->n_inputs);
        return -1;
    }
    return *next;
}

int qrl_model_read_inputs(const qrl_model *m, const char *label, const char *option, int n, char *const *specs,
                          int samples, qrl_tensor *inputs, char *err, size_t errlen)
{
    const qr_graph *g = m->g;
    qr_error e;
    int *bound = calloc((size_t)g->n_inputs + 1, sizeof *bound);
    qr_tensor *t = calloc((size_t)g->n_inputs + 1, sizeof *t);
    qr_status st = QR_OK;
    if (!bound || !t)
        st = qr_errorf(&e, "out of memory");
    for (int k = 0, next = 0; k < n && st == QR_OK; k++) {
        const char *eq = strchr(specs[k], '='), *file = eq ? eq + 1 : specs[k];
        int slot = input_slot(label, g, specs[k], bound, &next, &e);
        if (slot < 0) {
            st = QR_ERR;
            break;
        }
        if (bound[slot]) {
            st = qr_errorf(&e, "input '%s' is given twice", g->inputs[slot]->name);
            break;
        }
        bound[slot] = 1;
        if ((!strcmp(option, "--calib") ? qr_tensor_read_calib : qr_tensor_read_input)(file, &t[slot], &e) != QR_OK)
            st = QR_ERR;
        else if ((samples ? qr_exec_check_samples : qr_exec_check_input)(g->inputs[slot], &t[slot], &e) != QR_OK) {
            qr_error_prefix(&e, "%s does not fit %s", file, label);
            st = QR_ERR;
        } else if (!strcmp(option, "--calib") && t[slot].dtype == QR_F32) {
            /* the quantizer refuses them too; here the message can name the file */
            const float *d = t[slot].data;
            int64_t cnt = qr_tensor_numel(&t[slot]), per = t[slot].dims[0] ? cnt / t[slot].dims[0] : cnt;
            for (int64_t i = 0; i < cnt && st == QR_OK; i++) {
                if (!isfinite(d[i]))
                    st = qr_errorf(&e, "%s: sample %lld holds %s (element %lld of its %lld): calibration needs finite "
                                   "numbers", file, (long long)(i / per), isnan(d[i]) ? "NaN" : "an infinity",
                                   (long long)(i % per), (long long)per);
                /* a mapped file's pages leave once read (the page cache keeps them): the quantizer
                 * reads the samples again as it needs them, not the whole file held from here */
                if (per > 0 && (i + 1) % per == 0)
                    qr_data_release(d, (size_t)(i + 1 - per) * sizeof *d, (size_t)per * sizeof *d);
            }
        }
    }
    for (int j = 0; st == QR_OK && j < g->n_inputs; j++)
        if (!bound[j]) {
            char tb[160];
            st = qr_errorf(&e, "%s: missing input '%s' (%s); pass it with %s %s=FILE", label, g->inputs[j]->name,
                           qr_value_type_str(g->inputs[j], tb, sizeof tb), option, g->inputs[j]->name);
        }
    for (int j = 0; t && j < g->n_inputs; j++) {
        if (st == QR_OK)
            qr_api_tensor_out(&t[j], &inputs[j]);
        else
            qr_tensor_free(&t[j]);
    }
    free(bound);
    free(t);
    return st == QR_OK ? 0 : fail(&e, err, errlen);
}

int qrl_tensor_read_npy(const char *path, qrl_tensor *t, char *err, size_t errlen)
{
    qr_error e;
    qr_tensor r;
    memset(t, 0, sizeof *t);
    if (qr_npy_read(path, &r, &e) != QR_OK)
        return fail(&e, err, errlen);
    qr_api_tensor_out(&r, t);
    return 0;
}

int qrl_tensor_write_npy(const char *path, const qrl_tensor *t, char *err, size_t errlen)
{
    qr_error e;
    qr_tensor w;
    qr_api_tensor_in(t, &w);
    return qr_npy_write(path, &w, &e) == QR_OK ? 0 : fail(&e, err, errlen);
}

int qrl_tensor_write_npy_header(FILE *f, const qrl_tensor *t, char *err, size_t errlen)
{
    qr_error e;
    qr_tensor w;
    qr_api_tensor_in(t, &w);
    return qr_npy_write_header(f, &w, &e) == QR_OK ? 0 : fail(&e, err, errlen);
}

void qrl_tensor_release(const qrl_tensor *t, size_t from, size_t len)
{
    qr_data_release(t->data, from, len);
}

int qrl_tensor_alloc(qrl_tensor *t, char *err, size_t errlen)
{
    qr_error e;
    qr_tensor a;
    if (t->ndim < 0 || t->ndim > QR_MAX_DIMS) {
        qr_errorf(&e, "rank %d is not supported", t->ndim);
        return fail(&e, err, errlen);
    }
    qr_api_tensor_in(t, &a);
    if (qr_tensor_alloc(&a, &e) != QR_OK)
        return fail(&e, err, errlen);
    t->data = a.data;
    return 0;
}

int64_t qrl_tensor_numel(const qrl_tensor *t)
{
    qr_tensor a;
    qr_api_tensor_in(t, &a);
    return qr_tensor_numel(&a);
}

void qrl_tensor_set_f64(qrl_tensor *t, int64_t i, double v)
{
    qr_set_f64(t->data, qr_dtype_from_onnx(t->dtype), i, v);
}

const char *qrl_tensor_type_str(const qrl_tensor *t, char *buf, size_t n)
{
    qr_tensor a;
    qr_api_tensor_in(t, &a);
    return qr_tensor_type_str(&a, buf, n);
}

int qrl_dtype_is_float(int dtype)
{
    return qr_dtype_is_float(qr_dtype_from_onnx(dtype));
}

int qrl_dtype_is_int(int dtype)
{
    return qr_dtype_is_int(qr_dtype_from_onnx(dtype));
}

size_t qrl_dtype_size(int dtype)
{
    qr_dtype t = qr_dtype_from_onnx(dtype);
    return t == QR_STRING ? 0 : qr_dtype_size(t);
}

int qrl_make_dirs(const char *dir, char *err, size_t errlen)
{
    qr_error e;
    return qr_make_dirs(dir, &e) == QR_OK ? 0 : fail(&e, err, errlen);
}

struct qrl_output {
    qr_atomic_file a;
};

int qrl_output_open(const char *path, qrl_output **out, char *err, size_t errlen)
{
    qr_error e;
    qrl_output *o = calloc(1, sizeof *o);
    *out = NULL;
    if (!o) {
        qr_errorf(&e, "out of memory");
        return fail(&e, err, errlen);
    }
    if (qr_atomic_open(&o->a, path, &e) != QR_OK) {
        free(o);
        return fail(&e, err, errlen);
    }
    *out = o;
    return 0;
}

FILE *qrl_output_stream(qrl_output *o)
{
    return o->a.f;
}

int qrl_output_commit(qrl_output *o, char *err, size_t errlen)
{
    qr_error e;
    qr_status st = qr_atomic_commit(&o->a, &e);
    free(o);
    return st == QR_OK ? 0 : fail(&e, err, errlen);
}

void qrl_output_abort(qrl_output *o)
{
    if (!o)
        return;
    qr_atomic_abort(&o->a);
    free(o);
}

char *qrl_text_printable(const char *s, char *out, size_t n)
{
    return qr_text_printable(s, out, n);
}

void qrl_fput_json_string(FILE *f, const char *s)
{
    qr_fput_json_str(f, s);
}

int qrl_output_check(const char *path, char *err, size_t errlen)
{
    qr_error e;
    if (qr_output_check(path, &e) != QR_OK) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

void qrl_outputs_begin(void)
{
    qr_atomic_group_begin();
}

int qrl_outputs_commit(char *err, size_t errlen)
{
    qr_error e;
    if (qr_atomic_group_commit(&e) != QR_OK) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

void qrl_outputs_abort(void)
{
    qr_atomic_group_abort();
}

void qrl_cleanup_on_signals(void)
{
    qr_atomic_cleanup_on_signals();
}

void qrl_set_max_memory(size_t bytes)
{
    qr_exec_set_default_max_memory(bytes);
}

size_t qrl_max_memory(void)
{
    return qr_exec_default_max_memory();
}

void qrl_set_recipe_time_limit(double seconds)
{
    qr_set_recipe_time_limit(seconds);
}

int qrl_set_option(const char *name, const char *value, char *err, size_t errlen)
{
    qr_options o = *qr_options_get();
    qr_error e;
    if (qr_options_parse(&o, name, value, &e) != QR_OK)
        return fail(&e, err, errlen);
    qr_options_set(&o);
    return 0;
}
