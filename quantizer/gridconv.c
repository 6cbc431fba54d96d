#include "gridconv.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_epilogue.h"
#include "quantize_plan.h"

enum { IN_X, IN_W, IN_WSCALE, IN_WZERO, IN_XSCALE, IN_XZERO, IN_B, N_IN };

static const qr_tensor *opt_in(const qr_kctx *k, int i)
{
    return i < k->n_in && k->in[i] ? k->in[i] : NULL;
}

/* x's stand-in for ConvInteger's checks and shapes: u8 of x's dims (no data). */
static qr_tensor as_u8(const qr_tensor *x)
{
    qr_tensor t = *x;
    t.dtype = QR_U8;
    t.data = NULL;
    return t;
}

/* The checks the run relies on: f32 x and b, 8-bit w, scalar f32 x_scale, w_scale and w_zero of
 * one value or one per output channel, b of one per output channel. */
static qr_status check(qr_kctx *k)
{
    if (k->n_in <= IN_XSCALE || !k->in[IN_WSCALE] || !k->in[IN_XSCALE])
        return QR_KERR(k, "QrlGridConv takes x, w, w_scale, w_zero?, x_scale, x_zero? and b?");
    const qr_tensor *x = k->in[IN_X], *w = k->in[IN_W], *ws = k->in[IN_WSCALE], *wz = opt_in(k, IN_WZERO),
                    *xs = k->in[IN_XSCALE], *b = opt_in(k, IN_B);
    int64_t m = w->ndim > 0 ? w->dims[0] : 0;
    const qr_tensor *xz = opt_in(k, IN_XZERO);
    if (x->dtype != QR_F32 || (w->dtype != QR_I8 && w->dtype != QR_U8) || xs->dtype != QR_F32 ||
        qr_tensor_numel(xs) != 1 || ws->dtype != QR_F32 || (b && b->dtype != QR_F32) ||
        (wz && wz->dtype != w->dtype) || (xz && ((xz->dtype != QR_U8 && xz->dtype != QR_I8) || qr_tensor_numel(xz) != 1)))
        return QR_KERR(k, "QrlGridConv takes f32 x, 8-bit w, f32 w_scale, w_zero of w's type, a scalar f32 x_scale, "
                          "a scalar 8-bit x_zero and an f32 b");
    if ((qr_tensor_numel(ws) != 1 && qr_tensor_numel(ws) != m) || (wz && qr_tensor_numel(wz) != 1 &&
                                                                   qr_tensor_numel(wz) != m) ||
        (b && qr_tensor_numel(b) != m))
        return QR_KERR(k, "QrlGridConv: w_scale, w_zero and b must have one value per output channel (%lld)",
                       (long long)m);
    return QR_OK;
}

qr_status qr_gridconv_infer(qr_kctx *k)
{
    if (check(k) != QR_OK)
        return QR_ERR;
    qr_tensor x = as_u8(k->in[IN_X]);
    return qr_convint_infer_as(k, &x, NULL, k->in[IN_W], opt_in(k, IN_WZERO), QR_F32);
}

double qr_gridconv_macs(const qr_kctx *k)
{
    const qr_tensor *w = k->in[IN_W], *y = k->out[0];
    if (!w || w->ndim < 1 || w->dims[0] <= 0 || !y)
        return 0;
    return (double)qr_tensor_numel(y) * (double)qr_tensor_numel(w) / (double)w->dims[0];
}

/* Whether every x[i] is (float)c * s for an integer c = rint(x[i] * inv) (NaN is not); lo and hi
 * the least and largest c. One pass, in lanes the compiler turns into vectors. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static int on_grid(const float *x, int64_t n, float s,
                                                                                  float *lo, float *hi)
{
    enum { LANES = 16 };
    const float inv = 1.0f / s;
    float l[LANES], h[LANES];
    int bad[LANES];
    for (int j = 0; j < LANES; j++)
        l[j] = INFINITY, h[j] = -INFINITY, bad[j] = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float c = __builtin_rintf(x[i + j] * inv);
            bad[j] |= c * s != x[i + j];
            l[j] = c < l[j] ? c : l[j];
            h[j] = c > h[j] ? c : h[j];
        }
    for (; i < n; i++) {
        float c = __builtin_rintf(x[i] * inv);
        bad[0] |= c * s != x[i];
        l[0] = c < l[0] ? c : l[0];
        h[0] = c > h[0] ? c : h[0];
    }
    int any = 0;
    for (int j = 0; j < LANES; j++) {
        any |= bad[j];
        l[0] = l[j] < l[0] ? l[j] : l[0];
        h[0] = h[j] > h[0] ? h[j] : h[0];
    }
    *lo = l[0], *hi = h[0];
    return !any;
}

/* q[i] = c + zero, c as on_grid found it, as a byte (u8, or i8's two's complement: the caller
 * checked the range). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void to_ints(const float *x, int64_t n, float s,
                                                                                   float zero, uint8_t *q)
{
    const float inv = 1.0f / s;
    for (int64_t i = 0; i < n; i++)
        q[i] = (uint8_t)(int32_t)(__builtin_rintf(x[i] * inv) + zero);
}

/* The epilogue's per-channel factors: y = acc * m[c] + b[c], in double. */
typedef struct grid_ep {
    const double *m, *b;
    float *y;
} grid_ep;

static qr_status grid_block(const qr_acc_epilogue *ep, const qr_acc_block *blk, qr_error *e)
{
    (void)e;
    const grid_ep *g = ep->user;
    for (int64_t r = 0; r < blk->rows; r++) {
        int64_t c = blk->c0 + r;
        const double m = g->m[c], b = g->b[c];
        const int32_t *a = blk->acc + r * blk->acc_rs;
        float *y = g->y + blk->y_off + r * blk->y_rs;
        for (int64_t i = 0; i < blk->cols; i++)
            y[i] = (float)((double)a[i] * m + b);
    }
    return QR_OK;
}

/* The f32 Conv of x by w dequantized ((float)(w - w_zero) * w_scale, DequantizeLinear's f32),
 * with b: what the replaced nodes computed. */
static qr_status run_f32(qr_kctx *k)
{
    const qr_tensor *x = k->in[IN_X], *w = k->in[IN_W], *ws = k->in[IN_WSCALE], *wz = opt_in(k, IN_WZERO),
                    *b = opt_in(k, IN_B);
    int64_t n = qr_tensor_numel(w), m = w->dims[0], per = m > 0 ? n / m : 0;
    float *wf = qr_kwork(k, 1, n, sizeof(float), "QrlGridConv's dequantized weights");
    if (!wf)
        return QR_ERR;
    const float *sd = ws->data;
    for (int64_t o = 0; o < m; o++) {
        float s = sd[qr_tensor_numel(ws) == 1 ? 0 : o];
        int64_t z = wz ? qr_get_i64(wz->data, wz->dtype, qr_tensor_numel(wz) == 1 ? 0 : o) : 0;
        for (int64_t i = o * per; i < (o + 1) * per; i++)
            wf[i] = (float)(int32_t)(qr_get_i64(w->data, w->dtype, i) - z) * s;
    }
    const qr_op_def *conv = qr_op_find("", "Conv");
    qr_tensor wt = *w;
    wt.dtype = QR_F32;
    wt.data = wf;
    const qr_tensor *in[3] = {x, &wt, b};
    /* a Conv node of the same attributes whose weight is no constant: nothing of it is kept */
    qr_value *vals[3] = {k->node->in[IN_X], NULL, b ? k->node->in[IN_B] : NULL};
    qr_node fake = *k->node;
    fake.op = "Conv", fake.domain = "", fake.def = conv, fake.in = vals, fake.n_in = b ? 3 : 2;
    qr_kctx kc = *k;
    kc.node = &fake, kc.in = in, kc.n_in = fake.n_in, kc.cache = NULL, kc.shared = NULL, kc.act = NULL,
    kc.bias = NULL;
    return conv->run(&kc);
}

qr_status qr_gridconv_run(qr_kctx *k)
{
    if (check(k) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[IN_X], *w = k->in[IN_W], *ws = k->in[IN_WSCALE], *wz = opt_in(k, IN_WZERO),
                    *b = opt_in(k, IN_B);
    float s = *(const float *)k->in[IN_XSCALE]->data, lo, hi;
    int64_t n = qr_tensor_numel(x), m = w->dims[0], ck = m > 0 ? qr_tensor_numel(w) / m : 0;
    if (!(s > 0) || !isfinite(s) || !isfinite(1.0f / s) || !on_grid(x->data, n, s, &lo, &hi) || hi - lo > 255)
        return run_f32(k);
    /* the integers c + zero: x_zero's type and value (a constant: the packing, which folds it in, is
     * kept), or u8 with a zero of this run's (packed again each run) */
    const qr_tensor *xzt = opt_in(k, IN_XZERO);
    qr_dtype qt = xzt ? xzt->dtype : QR_U8;
    float zero = xzt ? (float)qr_get_i64(xzt->data, xzt->dtype, 0) : lo < 0 ? -lo : 0;
    float qmin = qt == QR_I8 ? -128 : 0, qmax = qt == QR_I8 ? 127 : 255;
    /* the sums fit int32: |c| <= 255 by |w - w_zero| <= 128 (i8, zero 0) or 255 */
    int wide_w = w->dtype == QR_U8;
    for (int64_t i = 0; wz && i < qr_tensor_numel(wz) && !wide_w; i++)
        wide_w = qr_get_i64(wz->data, wz->dtype, i) != 0;
    double cmax = fmax(fabs((double)lo), fabs((double)hi));
    if (n > 0 && (lo + zero < qmin || hi + zero > qmax || (double)ck * cmax * (wide_w ? 255 : 128) > (double)INT32_MAX))
        return run_f32(k);
    uint8_t *q = qr_kwork(k, 1, n, 1, "QrlGridConv's integers of x");
    double *f = qr_kwork(k, 2, m, sizeof(double), "QrlGridConv's multipliers");
    if (!q || !f)
        return QR_ERR;
    to_ints(x->data, n, s, zero, q);
    const float *sd = ws->data, *bd = b ? b->data : NULL;
    for (int64_t c = 0; c < m; c++) {
        f[c] = (double)s * (double)sd[qr_tensor_numel(ws) == 1 ? 0 : c]; /* exact: two floats' product */
        f[m + c] = bd ? (double)bd[c] : 0;
    }
    qr_tensor xq = *x, xz = {.dtype = qt, .ndim = 0};
    uint8_t zb = (uint8_t)(int32_t)zero;
    xq.dtype = qt, xq.data = q, xz.data = &zb;
    grid_ep g = {f, f + m, k->out[0]->data};
    qr_acc_epilogue ep = {.run = grid_block, .user = &g};
    return qr_convint_run_epilogue(k, &xq, &xz, w, wz, xzt != NULL, &ep);
}

/* ------------------------------------------------------------ lowering */

static int is_op(const qr_node *n, const char *op)
{
    return n && !n->dead && !n->domain[0] && !strcmp(n->op, op);
}

static int const_f32(const qr_value *v)
{
    return v && v->is_const && v->t.dtype == QR_F32;
}

/* A DequantizeLinear of the 8-bit constant w: its scale one value or one per w's axis 0. */
static int weight_dq(const qr_node *d)
{
    if (!is_op(d, "DequantizeLinear") || d->n_in < 2 || !d->in[0] || !d->in[0]->is_const || !const_f32(d->in[1]))
        return 0;
    const qr_tensor *w = &d->in[0]->t;
    const qr_value *z = d->n_in > 2 ? d->in[2] : NULL;
    int64_t ns = qr_tensor_numel(&d->in[1]->t), axis = qr_attr_i(d, "axis", 1);
    if ((w->dtype != QR_I8 && w->dtype != QR_U8) || w->ndim < 3 || (z && (!z->is_const || z->t.dtype != w->dtype)))
        return 0;
    return ns == 1 || (ns == w->dims[0] && (axis == 0 || axis == -w->ndim) && d->in[1]->t.ndim == 1);
}

/* A DequantizeLinear of one scale and zero point: its values on one grid. */
static int input_dq(const qr_node *d)
{
    const qr_value *z = d && d->n_in > 2 ? d->in[2] : NULL;
    return is_op(d, "DequantizeLinear") && d->n_in >= 2 && d->in[0] && const_f32(d->in[1]) &&
           qr_tensor_numel(&d->in[1]->t) == 1 &&
           (!z || (z->is_const && qr_tensor_numel(&z->t) == 1 && (z->t.dtype == QR_U8 || z->t.dtype == QR_I8)));
}

int qr_gridconv_lower(qr_graph *g)
{
    const qr_op_def *def = qr_op_find_in(qr_ops_quantizer, "qrl", "QrlGridConv");
    int turned = 0;
    for (int i = 0; def && i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (!is_op(n, "Conv") || n->n_in < 2 || !n->in[0] || !n->in[1] || n->n_out != 1)
            continue;
        const qr_node *xd = n->in[0]->producer, *wd = n->in[1]->producer;
        if (!input_dq(xd) || !weight_dq(wd))
            continue;
        qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * N_IN);
        if (!in)
            return turned; /* out of memory: the rest stay f32 Convs */
        in[IN_X] = n->in[0];
        in[IN_W] = wd->in[0];
        in[IN_WSCALE] = wd->in[1];
        in[IN_WZERO] = wd->n_in > 2 ? wd->in[2] : NULL;
        in[IN_XSCALE] = xd->in[1];
        in[IN_XZERO] = xd->n_in > 2 ? xd->in[2] : NULL;
        in[IN_B] = n->n_in > 2 ? n->in[2] : NULL;
        n->in = in;
        n->n_in = N_IN;
        n->op = "QrlGridConv";
        n->domain = "qrl";
        n->opset = 1;
        n->def = def;
        turned++;
    }
    if (!turned)
        return 0;
    /* weight DequantizeLinears no node reads any more: out of the node list (values stay) */
    int *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
    if (!uses)
        return turned;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++)
            if (g->nodes[i]->in[j])
                uses[g->nodes[i]->in[j]->id]++;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        qr_value *o = n->n_out == 1 ? n->out[0] : NULL;
        if (weight_dq(n) && o && !uses[o->id] && !o->is_output) {
            o->producer = NULL;
            continue;
        }
        n->id = k;
        g->nodes[k++] = n;
    }
    g->n_nodes = k;
    free(uses);
    return turned;
}
