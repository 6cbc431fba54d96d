#include "weight_only.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "op.h"
#include "passes.h"
#include "quantize_plan.h"

int qr_weight_only_recipe(const qr_recipe *r)
{
    const qr_setting *a = qr_recipe_setting(r, QR_SET_ACTIVATION);
    return a && !strcmp(a->type, "f32");
}

typedef qr_wo wo;

/* One group of n weights (a block, a channel or the tensor) through a fresh instance of the
 * weight calibrator: its scale and zero point. */
static qr_status solve_group(const wo *w, float *x, int64_t n, float *scale, int32_t *zero)
{
    qr_calib *cal;
    qrl_qparams qp;
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = x};
    if (qr_calib_new(w->m, w->s->calibrator, w->s->nargs, w->s->argnames, w->args, &cal, w->e) != QR_OK)
        return QR_ERR;
    qr_status st = qr_calib_observe(cal, &t, w->e);
    if (st == QR_OK)
        st = qr_calib_solve(cal, &w->qt, &qp, w->e);
    qr_calib_free(cal);
    if (st == QR_OK && (!isfinite(qp.scale) || !(qp.scale > 0)))
        return qr_errorf(w->e, "the weight calibrator gives scale %g", qp.scale);
    if (st == QR_OK && (qp.zero < w->qt.qmin || qp.zero > w->qt.qmax))
        return qr_errorf(w->e, "the weight calibrator gives zero point %lld, outside %s's %lld..%lld",
                         (long long)qp.zero, qr_dtype_name(w->dt), (long long)w->qt.qmin, (long long)w->qt.qmax);
    *scale = (float)qp.scale;
    *zero = (int32_t)qp.zero;
    return st;
}

static int64_t round_weight(const wo *w, float x, float s, int64_t z)
{
    if (!w->round_away)
        return qr_plan_round(x, s, z, w->qt.qmin, w->qt.qmax);
    double v = (double)roundf(x / s) + (double)z;
    return v < w->qt.qmin ? w->qt.qmin : v > w->qt.qmax ? w->qt.qmax : (int64_t)v;
}

/* A new constant value named base + suffix holding t. */
static qr_value *new_const(qr_graph *d, const char *base, const char *suffix, const qr_tensor *t, qr_error *e)
{
    char name[1024];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    qr_value *v = qr_graph_new_value(d, name);
    if (!v) {
        qr_errorf(e, "out of memory");
        return NULL;
    }
    return qr_value_try_set_const(d, v, t, e) == QR_OK ? v : NULL;
}

/* Whether node n (reading weight B) can become a MatMulNBits: a MatMul whose A has rank 2 or
 * more, or a Gemm without transA, alpha or beta whose C is absent or a constant [N]. */
static int nbits_fits(const qr_node *n, int64_t N)
{
    if (!n->in[0] || n->in[0]->t.ndim < 2)
        return 0;
    if (!strcmp(n->op, "MatMul"))
        return 1;
    const qr_value *c = n->n_in > 2 ? n->in[2] : NULL;
    return !qr_attr_i(n, "transA", 0) && qr_attr_f(n, "alpha", 1) == 1 && qr_attr_f(n, "beta", 1) == 1 &&
           (!c || (c->is_const && c->t.dtype == QR_F32 && c->t.ndim == 1 && c->t.dims[0] == N));
}

/* n replaced by a com.microsoft MatMulNBits with the same output: B the codes of q (4-bit,
 * unsigned: a signed one + 8) column by column, block_size / 2 bytes a block, low nibble first;
 * scales [N * n_blocks]; zero points (+ 8 for signed codes) packed the same way per column, left
 * out when all are 8, ONNX Runtime's default. */
static qr_status emit_nbits(const wo *w, qr_graph *d, qr_node *n, const qr_value *wv, int kax, const qr_tensor *q,
                            const qr_tensor *sc, const qr_tensor *zp)
{
    int64_t K = wv->t.dims[kax], N = wv->t.dims[1 - kax], nb = (K + w->block - 1) / w->block, blob = w->block / 2;
    int off = w->dt == QR_I4 ? 8 : 0, need_zero = 0;
    qr_tensor b = {.dtype = QR_U8, .ndim = 3, .dims = {N, nb, blob}}, s = {.dtype = QR_F32, .ndim = 1, .dims = {N * nb}};
    qr_tensor z = {.dtype = QR_U8, .ndim = 1, .dims = {N * ((nb + 1) / 2)}};
    qr_status st = qr_tensor_alloc(&b, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&s, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&z, w->e);
    if (st == QR_OK) {
        memset(b.data, 0, qr_tensor_nbytes(&b));
        memset(z.data, 0, qr_tensor_nbytes(&z));
        for (int64_t c = 0; c < N; c++)
            for (int64_t k = 0; k < K; k++) {
                int code = (int)qr_get_i64(q->data, q->dtype, kax ? c * K + k : k * N + c) + off;
                qr_nibble_set(b.data, (c * nb + k / w->block) * blob * 2 + k % w->block, code);
            }
        for (int64_t c = 0; c < N; c++)
            for (int64_t bl = 0; bl < nb; bl++) {
                int64_t si = kax ? c * nb + bl : bl * N + c;
                ((float *)s.data)[c * nb + bl] = ((const float *)sc->data)[si];
                int zc = (int)qr_get_i64(zp->data, zp->dtype, si) + off;
                need_zero |= zc != 8;
                qr_nibble_set(z.data, c * ((nb + 1) / 2) * 2 + bl, zc);
            }
    }
    qr_value *bv = NULL, *sv = NULL, *zv = NULL;
    if (st == QR_OK && (!(bv = new_const(d, wv->name, "_nbits", &b, w->e)) ||
                        !(sv = new_const(d, wv->name, "_nbits_scale", &s, w->e)) ||
                        (need_zero && !(zv = new_const(d, wv->name, "_nbits_zero_point", &z, w->e)))))
        st = QR_ERR;
    /* n becomes the MatMulNBits in place (its slot, name and output kept; its attributes go) */
    qr_value *bias = n->n_in > 2 ? n->in[2] : NULL;
    int nin = bias ? 6 : zv ? 4 : 3;
    qr_value **in = st == QR_OK ? qr_arena_alloc(&d->arena, sizeof *in * (size_t)nin) : NULL;
    const char *dom = st == QR_OK ? qr_arena_strdup(&d->arena, "com.microsoft") : NULL;
    if (st == QR_OK && (!in || !dom))
        st = qr_errorf(w->e, "out of memory");
    if (st == QR_OK) {
        memset(in, 0, sizeof *in * (size_t)nin);
        in[0] = n->in[0];
        in[1] = bv;
        in[2] = sv;
        in[3] = zv;
        if (bias)
            in[5] = bias;
        n->in = in;
        n->n_in = nin;
        n->op = "MatMulNBits";
        n->domain = dom;
        n->opset = 1;
        n->def = qr_op_find("com.microsoft", "MatMulNBits");
        n->n_attr = 0;
        qr_node *mn = n;
        qr_node_add_attr_i(d, mn, "K", K);
        qr_node_add_attr_i(d, mn, "N", N);
        qr_node_add_attr_i(d, mn, "bits", 4);
        qr_node_add_attr_i(d, mn, "block_size", w->block);
        if (w->int8) /* ONNX Runtime's CompInt8: A quantized to int8 per block at run time */
            qr_node_add_attr_i(d, mn, "accuracy_level", 4);
        st = qr_graph_check_oom(d, w->e);
    }
    qr_tensor_free(&b);
    qr_tensor_free(&s);
    qr_tensor_free(&z);
    return st;
}

static qr_status emit_weight(const wo *w, qr_graph *d, qr_node *n, qr_value *wv, int kax, const qr_tensor *q,
                             const qr_tensor *sc, const qr_tensor *zp, int any_zero);

/* Weight wv ([K, N] when kax is 0, [N, K] when 1) of node n quantized: its integers, scales and
 * zero points as constants, a DequantizeLinear in front of n's input 1. */
static qr_status quantize_one(const wo *w, qr_graph *d, qr_node *n, qr_value *wv, int kax);

qr_status qr_wo_quantize(const qr_wo *w, qr_graph *d, qr_node *n, int kax)
{
    return quantize_one(w, d, n, n->in[1], kax);
}

static qr_status quantize_one(const wo *w, qr_graph *d, qr_node *n, qr_value *wv, int kax)
{
    const float *data = wv->t.data;
    int64_t K = wv->t.dims[kax], N = wv->t.dims[1 - kax];
    int64_t gsize = w->block ? w->block : w->per_channel ? K : K * N; /* weights per group */
    int64_t nb = w->block ? (K + w->block - 1) / w->block : 1;         /* groups along K */
    int64_t ngroups = w->block ? nb * N : w->per_channel ? N : 1;
    for (int64_t i = 0; i < K * N; i++)
        if (!isfinite(data[i]))
            return qr_errorf(w->e, "weight '%s' holds %s at element %lld: it cannot be quantized", wv->name,
                             isnan(data[i]) ? "NaN" : "an infinity", (long long)i);
    qr_tensor sc = {.dtype = QR_F32}, zp = {.dtype = w->dt}, q = {.dtype = w->dt, .ndim = 2};
    memcpy(q.dims, wv->t.dims, sizeof q.dims);
    if (w->block) { /* the weight's shape with K's dim the number of blocks */
        sc.ndim = 2;
        sc.dims[kax] = nb;
        sc.dims[1 - kax] = N;
    } else if (w->per_channel) {
        sc.ndim = 1;
        sc.dims[0] = N;
    }
    memcpy(zp.dims, sc.dims, sizeof zp.dims);
    zp.ndim = sc.ndim;
    float *tmp = malloc(sizeof(float) * (size_t)gsize);
    qr_status st = tmp ? QR_OK : qr_errorf(w->e, "out of memory");
    if (st == QR_OK)
        st = qr_tensor_alloc(&sc, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&zp, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&q, w->e);
    if (st == QR_OK) {
        memset(zp.data, 0, qr_tensor_nbytes(&zp));
        memset(q.data, 0, qr_tensor_nbytes(&q));
    }
    int any_zero = 0;
    /* group g: channel c = g / nb, block b = g % nb (nb = 1 without blocks); element (k, c) of
     * the group at flat index k * N + c (kax 0) or c * K + k (kax 1) */
    for (int64_t g = 0; g < ngroups && st == QR_OK; g++) {
        int64_t c = g / nb, b = g % nb, k0 = w->block ? b * w->block : 0;
        int64_t k1 = w->block ? (k0 + w->block < K ? k0 + w->block : K) : K;
        int64_t m = 0;
        if (!w->block && !w->per_channel)
            memcpy(tmp, data, sizeof(float) * (size_t)(K * N)), m = K * N;
        else
            for (int64_t k = k0; k < k1; k++)
                tmp[m++] = data[kax ? c * K + k : k * N + c];
        float s = 1;
        int32_t z = 0;
        if ((st = solve_group(w, tmp, m, &s, &z)) != QR_OK) {
            qr_error_prefix(w->e, "weight '%s'", wv->name);
            break;
        }
        int64_t si = w->block ? (kax ? c * nb + b : b * N + c) : w->per_channel ? c : 0;
        ((float *)sc.data)[si] = s;
        qr_set_i64(zp.data, w->dt, si, z);
        any_zero |= z != 0;
        for (int64_t k = k0; k < k1; k++)
            for (int64_t cc = (w->block || w->per_channel) ? c : 0; cc < ((w->block || w->per_channel) ? c + 1 : N); cc++) {
                int64_t i = kax ? cc * K + k : k * N + cc;
                qr_set_i64(q.data, w->dt, i, round_weight(w, data[i], s, z));
            }
    }
    free(tmp);
    if (st == QR_OK)
        st = emit_weight(w, d, n, wv, kax, &q, &sc, &zp, any_zero);
    qr_tensor_free(&sc);
    qr_tensor_free(&zp);
    qr_tensor_free(&q);
    return st;
}

/* n's weight wv replaced by its quantized form: integers q, scales sc and zero points zp (in the
 * layouts quantize_one describes) as constants with a DequantizeLinear in front of n, or n as a
 * MatMulNBits when the recipe's options ask for it and it fits. */
static qr_status emit_weight(const wo *w, qr_graph *d, qr_node *n, qr_value *wv, int kax, const qr_tensor *q,
                             const qr_tensor *sc, const qr_tensor *zp, int any_zero)
{
    qr_status st = QR_OK;
    int64_t N = wv->t.dims[1 - kax];
    int nbits = w->matmulnbits && w->block && qr_dtype_is_packed(w->dt) && nbits_fits(n, N);
    if (w->int8 && !nbits) /* the DequantizeLinear form cannot say int8 activations */
        return qr_errorf(w->e, "node '%s' (%s): compute = int8 needs its weight as a MatMulNBits (%s), which "
                               "carries the int8 activations as its accuracy_level", n->name ? n->name : "", n->op,
                         !w->matmulnbits ? "--weight-format matmulnbits"
                         : !qr_dtype_is_packed(w->dt) ? "4-bit weights" : "a MatMul, or a Gemm without transA, alpha, beta");
    if (nbits) {
        return emit_nbits(w, d, n, wv, kax, q, sc, zp);
    }
    qr_value *qv = NULL, *sv = NULL, *zv = NULL, *out = NULL;
    qr_node *dq = NULL;
    if (st == QR_OK && (!(qv = new_const(d, wv->name, "_quantized", q, w->e)) ||
                        !(sv = new_const(d, wv->name, "_scale", sc, w->e)) ||
                        (any_zero && !(zv = new_const(d, wv->name, "_zero_point", zp, w->e)))))
        st = QR_ERR;
    if (st == QR_OK) {
        char name[1024];
        snprintf(name, sizeof name, "%s_DequantizeLinear", wv->name);
        out = qr_graph_new_value(d, name);
        dq = out ? qr_plan_new_node(d, "DequantizeLinear", "", name, zv ? 3 : 2, 1) : NULL;
        if (!dq)
            st = qr_errorf(w->e, "out of memory");
    }
    if (st == QR_OK) {
        dq->in[0] = qv;
        dq->in[1] = sv;
        if (zv)
            dq->in[2] = zv;
        dq->out[0] = out;
        out->producer = dq;
        out->t = wv->t;
        out->t.data = NULL;
        if (w->block || w->per_channel)
            qr_node_add_attr_i(d, dq, "axis", w->block ? kax : 1 - kax);
        if (w->block)
            qr_node_add_attr_i(d, dq, "block_size", w->block);
        n->in[1] = out;
        st = qr_graph_check_oom(d, w->e);
    }
    return st;
}

int qr_wo_takes_weight(const qr_node *n, int *kax)
{
    if (n->dead || n->domain[0] || n->n_in < 2 || !n->in[1])
        return 0;
    const qr_value *b = n->in[1];
    if (!b->is_const || b->t.dtype != QR_F32 || b->t.ndim != 2)
        return 0;
    if (!strcmp(n->op, "MatMul")) {
        *kax = 0;
        return 1;
    }
    if (!strcmp(n->op, "Gemm")) {
        *kax = qr_attr_i(n, "transB", 0) ? 1 : 0;
        return 1;
    }
    return 0;
}

#define MAX_INPUTS 64

/* in[i]: samples s0 .. s0 + n of calibration tensor i (a view, no copy). */
static qr_status slice_inputs(const qr_graph *g, const qr_tensor *calib, int64_t s0, int64_t n, qr_tensor *in,
                              qr_error *e)
{
    if (g->n_inputs > MAX_INPUTS)
        return qr_errorf(e, "weight-only quantization: more than %d inputs", MAX_INPUTS);
    for (int i = 0; i < g->n_inputs; i++) {
        in[i] = calib[i];
        int64_t per = qr_tensor_numel(&calib[i]) / (calib[i].dims[0] ? calib[i].dims[0] : 1);
        in[i].data = (char *)calib[i].data + qr_dtype_bytes(calib[i].dtype, s0 * per);
        in[i].dims[0] = n;
    }
    return QR_OK;
}

/* The calibration samples in all (*total) and how many one run takes: the batch the model declares
 * (a fixed first dim), else all at once. */
static void sample_slices(const qr_graph *g, const qr_tensor *calib, int64_t *total, int64_t *slice)
{
    *total = g->n_inputs && calib[0].ndim ? calib[0].dims[0] : 1;
    *slice = *total;
    if (g->n_inputs && g->inputs[0]->t.ndim > 0 && g->inputs[0]->t.dims[0] > 0)
        *slice = g->inputs[0]->t.dims[0];
}

/* Runs g on samples s0 .. s0 + n of the calibration tensors: its outputs (n_outputs tensors the
 * caller frees). */
static qr_status run_graph(qr_exec *x, const qr_graph *g, const qr_tensor *calib, int64_t s0, int64_t n,
                           qr_tensor *outs, qr_error *e)
{
    qr_tensor in[MAX_INPUTS];
    qr_status st = slice_inputs(g, calib, s0, n, in, e);
    return st == QR_OK ? qr_exec_run(x, in, outs, e) : st;
}

/* ---------------------------------------- layer calibrators (GPTQ) */

/* A layer whose weight a layer calibrator rounds from the rows it reads. */
typedef struct layer {
    const wo *w; /* its weight setting */
    qr_node *n;  /* in the quantized graph */
    qr_value *wv;
    int kax;
    int64_t x_id; /* the id in the f32 graph of the value it reads as rows */
    qr_calib *cal;
} layer;

typedef struct layers {
    layer *l;
    int n;
    qr_status st; /* the first failure of an observe, in e */
    qr_error *e;
} layers;

static void observe_rows(layers *ls, const qr_value *v, const qr_tensor *t)
{
    for (int i = 0; i < ls->n && ls->st == QR_OK; i++)
        if (ls->l[i].x_id == v->id && t->dtype == QR_F32 && (ls->st = qr_calib_observe(ls->l[i].cal, t, ls->e)) != QR_OK)
            qr_error_prefix(ls->e, "layer '%s'", ls->l[i].n->name);
}

static void on_value(void *user, const qr_node *node, const qr_value *v, qr_tensor *t)
{
    (void)node;
    observe_rows(user, v, t);
}

/* Every layer's calibrator observes its rows over the calibration samples (the f32 model g). */
static qr_status observe_layers(const qr_graph *g, const qr_tensor *calib, int threads, layers *ls, qr_error *e)
{
    int64_t total, slice;
    sample_slices(g, calib, &total, &slice);
    qr_exec_opts eo = {.threads = threads, .observer = on_value, .observer_user = ls};
    qr_exec *x = NULL;
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out), in[MAX_INPUTS];
    qr_status st = out ? qr_exec_new(g, &eo, &x, e) : qr_errorf(e, "out of memory");
    for (int64_t s0 = 0; st == QR_OK && s0 + slice <= total; s0 += slice) {
        if ((st = slice_inputs(g, calib, s0, slice, in, e)) != QR_OK)
            break;
        for (int i = 0; i < g->n_inputs; i++) /* the executor reports only what nodes compute */
            observe_rows(ls, g->inputs[i], &in[i]);
        if (ls->st == QR_OK)
            st = qr_exec_run(x, in, out, e);
        for (int i = 0; i < g->n_outputs; i++)
            qr_tensor_free(&out[i]);
        if (st == QR_OK && ls->st != QR_OK)
            st = QR_ERR; /* the message is in e already */
    }
    qr_exec_free(x);
    free(out);
    return st;
}

/* Layer l's weight rounded by its calibrator's solve (w as [N, K] f64, qparams [N, blocks]), then
 * written into d in the layouts quantize_one uses. */
static qr_status round_layer(const wo *w, qr_graph *d, layer *l)
{
    qr_value *wv = l->wv;
    int kax = l->kax;
    int64_t K = wv->t.dims[kax], N = wv->t.dims[1 - kax], blk = w->block ? w->block : K, nb = (K + blk - 1) / blk;
    const float *data = wv->t.data;
    for (int64_t i = 0; i < K * N; i++)
        if (!isfinite(data[i]))
            return qr_errorf(w->e, "weight '%s' holds %s at element %lld: it cannot be quantized", wv->name,
                             isnan(data[i]) ? "NaN" : "an infinity", (long long)i);
    qr_tensor wt = {.dtype = QR_F64, .ndim = 2, .dims = {N, K}}, st_ = {.dtype = QR_F64, .ndim = 2, .dims = {N, nb}};
    qr_tensor zt = st_, q = {.dtype = w->dt, .ndim = 2}, sc = {.dtype = QR_F32}, zp = {.dtype = w->dt};
    memcpy(q.dims, wv->t.dims, sizeof q.dims);
    sc.ndim = zp.ndim = w->block ? 2 : 1;
    if (w->block) {
        sc.dims[kax] = zp.dims[kax] = nb;
        sc.dims[1 - kax] = zp.dims[1 - kax] = N;
    } else {
        sc.dims[0] = zp.dims[0] = N;
    }
    qr_status st = qr_tensor_alloc(&wt, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&st_, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&zt, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&q, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&sc, w->e);
    if (st == QR_OK)
        st = qr_tensor_alloc(&zp, w->e);
    if (st == QR_OK) {
        double *wd = wt.data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++)
                wd[n * K + k] = data[kax ? n * K + k : k * N + n];
        if ((st = qr_calib_solve_layer(l->cal, &w->qt, blk, &wt, &st_, &zt, w->e)) != QR_OK)
            qr_error_prefix(w->e, "weight '%s' of '%s'", wv->name, l->n->name);
    }
    int any_zero = 0;
    if (st == QR_OK) {
        const double *wd = wt.data, *sd = st_.data, *zd = zt.data;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < K; k++)
                qr_set_i64(q.data, w->dt, kax ? n * K + k : k * N + n, (int64_t)wd[n * K + k]);
            for (int64_t b = 0; b < nb; b++) {
                int64_t si = w->block ? (kax ? n * nb + b : b * N + n) : n;
                ((float *)sc.data)[si] = (float)sd[n * nb + b];
                qr_set_i64(zp.data, w->dt, si, (int64_t)zd[n * nb + b]);
                any_zero |= zd[n * nb + b] != 0;
            }
        }
        st = emit_weight(w, d, l->n, wv, kax, &q, &sc, &zp, any_zero);
    }
    qr_tensor_free(&wt);
    qr_tensor_free(&st_);
    qr_tensor_free(&zt);
    qr_tensor_free(&q);
    qr_tensor_free(&sc);
    qr_tensor_free(&zp);
    return st;
}

/* The weight settings of a weight-only recipe: [0] the recipe's `weight`, then each `weight for`. */
typedef struct wo_set {
    wo *w;
    int n;
} wo_set;

/* Node n's weight setting: the `weight for` naming it (by name, else op), else the recipe's. */
static const wo *wo_for(const wo_set *ws, const qr_recipe *r, const qr_node *n)
{
    const qr_setting *s = qr_recipe_setting_for(r, QR_SET_WEIGHT, n->op, n->name);
    for (int i = 1; s && i < ws->n; i++)
        if (ws->w[i].s == s)
            return &ws->w[i];
    return &ws->w[0];
}

static int wo_layer(const wo *w)
{
    const qr_cal_desc *cd = qr_module_calibrator(w->m, w->s->calibrator);
    return cd && cd->layer;
}

/* The layers whose setting has a layer calibrator (gptq) rounded by it: each weight a MatMul or Gemm
 * reads, from the rows its first input carries over the calibration samples. The others are left
 * to quantize_one. */
static qr_status layer_calibrate(const wo_set *ws, const qr_recipe *r, const qr_graph *g, qr_graph *d,
                                 const qr_tensor *calib, int threads, qr_quantized *res, qr_error *e)
{
    int n0 = d->n_nodes;
    layers ls = {.l = calloc((size_t)n0 + 1, sizeof *ls.l), .e = e};
    qr_status st = ls.l ? QR_OK : qr_errorf(e, "out of memory");
    for (int i = 0; i < n0 && st == QR_OK; i++) {
        int kax;
        qr_node *n = d->nodes[i];
        const wo *w = qr_wo_takes_weight(n, &kax) ? wo_for(ws, r, n) : NULL;
        if (!w || !wo_layer(w))
            continue;
        if (!w->block && !w->per_channel) {
            st = qr_errorf(e, "calibrator '%s' rounds a weight by blocks or by output channel: set block = N or "
                              "per_channel", w->s->calibrator);
            break;
        }
        if (!calib) {
            st = qr_errorf(e, "calibrator '%s' rounds each weight from its layer's inputs: give calibration data "
                              "(--calib)", w->s->calibrator);
            break;
        }
        const qr_value *x = n->in[0] ? qr_graph_find(g, n->in[0]->name) : NULL;
        if (!strcmp(n->op, "Gemm") && qr_attr_i(n, "transA", 0))
            st = qr_errorf(e, "'%s': calibrator '%s' reads a layer's rows from its input; a Gemm with transA has "
                              "them in its columns", n->name, w->s->calibrator);
        else if (!x)
            st = qr_errorf(e, "'%s': its input is not a value of the model", n->name);
        else {
            layer *l = &ls.l[ls.n++];
            *l = (layer){.w = w, .n = n, .wv = n->in[1], .kax = kax, .x_id = x->id};
            st = qr_calib_new(w->m, w->s->calibrator, w->s->nargs, w->s->argnames, w->args, &l->cal, w->e);
        }
    }
    if (st == QR_OK && ls.n)
        st = observe_layers(g, calib, threads, &ls, e);
    for (int i = 0; i < ls.n && st == QR_OK; i++) {
        int64_t n = qr_tensor_numel(&ls.l[i].wv->t);
        if ((st = round_layer(ls.l[i].w, d, &ls.l[i])) == QR_OK)
            qr_plan_count_weight(res, ls.l[i].w->dt, n);
        qr_calib_free(ls.l[i].cal); /* its gram, k x k doubles, goes as soon as the layer is done */
        ls.l[i].cal = NULL;
    }
    for (int i = 0; i < ls.n; i++)
        qr_calib_free(ls.l[i].cal);
    free(ls.l);
    return st;
}

/* The outputs of the quantized graph d against g's on the calibration samples: SQNR in dB and
 * cosine similarity over all outputs together, as the integer recipes' summary gives them. */
static qr_status measure(const qr_graph *g, const qr_graph *d, const qr_tensor *calib, int threads, qr_quantized *res,
                         qr_error *e)
{
    int n = g->n_outputs;
    /* in slices of the batch the model declares (a fixed first dim), else all at once */
    int64_t total, slice;
    sample_slices(g, calib, &total, &slice);
    qr_tensor *ref = calloc((size_t)n + 1, sizeof *ref), *got = calloc((size_t)n + 1, sizeof *got);
    qr_exec *xg = NULL, *xd = NULL;
    qr_exec_opts eo = {.threads = threads};
    qr_status st = ref && got ? QR_OK : qr_errorf(e, "out of memory");
    if (st == QR_OK && (st = qr_exec_new(g, &eo, &xg, e)) == QR_OK)
        st = qr_exec_new(d, &eo, &xd, e);
    double sig = 0, err = 0, dot = 0, gg = 0;
    int64_t bad = 0;
    for (int64_t s0 = 0; s0 + slice <= total && st == QR_OK; s0 += slice) {
        if ((st = run_graph(xg, g, calib, s0, slice, ref, e)) == QR_OK)
            st = run_graph(xd, d, calib, s0, slice, got, e);
        for (int o = 0; o < n && st == QR_OK; o++) {
            int64_t k = qr_tensor_numel(&ref[o]);
            if (ref[o].dtype != QR_F32 || got[o].dtype != QR_F32 || qr_tensor_numel(&got[o]) != k)
                continue;
            const float *r = ref[o].data, *t = got[o].data;
            for (int64_t i = 0; i < k; i++) {
                if (!isfinite(t[i])) {
                    bad++;
                    continue;
                }
                sig += (double)r[i] * r[i];
                err += ((double)r[i] - t[i]) * ((double)r[i] - t[i]);
                dot += (double)r[i] * t[i];
                gg += (double)t[i] * t[i];
            }
        }
        for (int o = 0; o < n; o++) { /* qr_exec_run leaves them empty on failure */
            qr_tensor_free(&ref[o]);
            qr_tensor_free(&got[o]);
        }
    }
    qr_exec_free(xg);
    qr_exec_free(xd);
    free(ref);
    free(got);
    if (st == QR_OK) {
        res->output_sqnr = res->output_sqnr_calib = err > 0 ? 10 * log10(sig / err) : INFINITY;
        res->output_cosine = sig > 0 && gg > 0 ? dot / sqrt(sig * gg) : 1;
        res->output_nonfinite = bad;
        res->samples = total / slice * slice;
    }
    return st;
}

qr_status qr_wo_init(qr_wo *w, const qr_quant_opts *o, const qr_recipe *r, const qr_setting *s, qr_error *e)
{
    const qr_setting *blk = qr_recipe_setting(r, QR_SET_BLOCK), *rnd = qr_recipe_setting(r, QR_SET_ROUNDING);
    const qr_setting *cmp = qr_recipe_setting(r, QR_SET_COMPUTE);
    *w = (wo){.m = o->module, .s = s, .dt = qr_dtype_from_name(s->type), .e = e, .matmulnbits = o->matmulnbits};
    if (!qr_dtype_is_int(w->dt))
        return qr_errorf(e, "recipe '%s': weight type %s is not an integer type", r->name, s->type);
    w->block = blk ? (int)blk->value : 0;
    w->per_channel = (s->mods & QR_MOD_PER_CHANNEL) != 0;
    w->round_away = rnd && !strcmp(rnd->type, "half_away");
    w->int8 = cmp && !strcmp(cmp->type, "int8");
    int axis = w->block || w->per_channel ? 0 : -1;
    w->qt = qr_qtype_of(w->dt, 0, axis);
    if ((s->mods & QR_MOD_NARROW) && qr_plan_narrow_qtype(o->module, r, w->dt, axis, &w->qt, e) != QR_OK)
        return QR_ERR;
    w->qt.symmetric = (s->mods & QR_MOD_SYMMETRIC) != 0;
    if (s->nargs > QRL_MAX_PARAMS)
        return qr_errorf(e, "recipe '%s': %s passes its calibrator more than %d arguments", r->name, s->key,
                         QRL_MAX_PARAMS);
    if (!(w->args = calloc(QRL_MAX_PARAMS, sizeof *w->args)))
        return qr_errorf(e, "out of memory");
    if (s->args && s->nargs) {
        qrl_rt rt;
        qr_rt_init(&rt);
        s->args(&rt, w->args);
        if (qr_rt_status(&rt, e) != QR_OK)
            return QR_ERR;
    }
    if (!qr_module_calibrator(w->m, s->calibrator))
        return qr_errorf(e, "recipe '%s': %s uses calibrator '%s', which the recipe's module does not define", r->name,
                         s->key, s->calibrator);
    return QR_OK;
}

void qr_wo_free(qr_wo *w)
{
    free(w->args);
    w->args = NULL;
}

qr_status qr_wo_finish(qr_graph *d, qr_error *e)
{
    int any_dq = 0; /* MatMulNBits alone needs no opset 21 */
    for (int i = 0; i < d->n_nodes; i++)
        any_dq |= !d->nodes[i]->dead && !strcmp(d->nodes[i]->op, "DequantizeLinear");
    qr_status st = any_dq ? qr_pass_raise_opset(d, 21, e) : QR_OK;
    return st == QR_OK ? qr_graph_toposort(d, e) : st;
}

qr_status qr_weight_only(const qr_graph *g, const qr_graph *ref, const qr_tensor *calib, const qr_quant_opts *o,
                         const qr_recipe *r, qr_quantized **out, qr_error *e)
{
    int threads = o->threads;
    *out = NULL;
    const qr_setting *s = qr_recipe_setting(r, QR_SET_WEIGHT);
    if (!s)
        return qr_errorf(e, "recipe '%s' must set weight", r->name);
    if (qr_recipe_setting(r, QR_SET_CANDIDATE)) /* candidate = ...: each layer its own type, under a budget */
        return qr_mixed(g, calib, o, r, out, e);
    wo_set ws = {.w = calloc((size_t)r->nsettings + 1, sizeof *ws.w)};
    qr_status st = ws.w ? qr_wo_init(&ws.w[ws.n++], o, r, s, e) : qr_errorf(e, "out of memory");
    for (int i = 0; i < r->nsettings && st == QR_OK; i++) /* weight for ...: their own types and calibrators */
        if (r->settings[i].id == QR_SET_WEIGHT && r->settings[i].ntargets)
            st = qr_wo_init(&ws.w[ws.n++], o, r, &r->settings[i], e);
    qr_quantized *res = st == QR_OK ? calloc(1, sizeof *res) : NULL;
    qr_graph *d = st == QR_OK ? qr_graph_clone_shared(g) : NULL;
    if (st == QR_OK && (!res || !d))
        st = qr_errorf(e, "out of memory");
    int n0 = d ? d->n_nodes : 0;
    if (st == QR_OK)
        st = layer_calibrate(&ws, r, g, d, calib, threads, res, e);
    for (int i = 0; i < n0 && st == QR_OK; i++) {
        int kax;
        const wo *w = qr_wo_takes_weight(d->nodes[i], &kax) ? wo_for(&ws, r, d->nodes[i]) : NULL;
        if (!w || wo_layer(w))
            continue;
        int64_t n = qr_tensor_numel(&d->nodes[i]->in[1]->t);
        if ((st = quantize_one(w, d, d->nodes[i], d->nodes[i]->in[1], kax)) == QR_OK)
            qr_plan_count_weight(res, w->dt, n);
    }
    if (st == QR_OK)
        st = qr_wo_finish(d, e);
    for (int i = 0; i < ws.n; i++)
        qr_wo_free(&ws.w[i]);
    free(ws.w);
    if (st != QR_OK) {
        qr_graph_free(d);
        free(res);
        return QR_ERR;
    }
    res->qdq = d;
    res->top1_fp32 = res->top1_int8 = NAN;
    res->output_agreement = NAN;
    if (calib && measure(ref ? ref : g, d, calib, threads, res, e) != QR_OK) {
        qr_quantized_free(res);
        return QR_ERR;
    }
    res->recipe = r->name;
    *out = res;
    return QR_OK;
}
