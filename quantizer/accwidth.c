#include "accwidth.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "intgraph.h"
#include "ops/conv_geom.h"
#include "parallel.h"
#include "recipe.h" /* QR_ACC_MIN_BITS */

/* One partial sum: acc + p kept to bits (an overflow counted when acc + p leaves the range). */
static inline int64_t acc_step(int64_t acc, int64_t p, int bits, int saturate, int64_t *over)
{
    int64_t s = acc + p, hi = ((int64_t)1 << (bits - 1)) - 1, lo = -hi - 1;
    if (s <= hi && s >= lo)
        return s;
    ++*over;
    if (saturate)
        return s > hi ? hi : lo;
    return (int64_t)((uint64_t)(s - lo) & (((uint64_t)1 << bits) - 1)) + lo; /* modulo 2^bits */
}

static const qr_tensor *opt_in(const qr_kctx *k, int i)
{
    return i < k->n_in && k->in[i] ? k->in[i] : NULL;
}

/* The op whose shapes and checks this one shares. */
static const qr_op_def *base_op(const qr_kctx *k)
{
    return qr_op_find("", qr_attr_i(k->node, "conv", 0) ? "ConvInteger" : "MatMulInteger");
}

qr_status qr_accint_infer(qr_kctx *k)
{
    int64_t bits = qr_attr_i(k->node, "bits", 32);
    if (bits < QR_ACC_MIN_BITS || bits > QR_ACC_MAX_BITS)
        return QR_KERR(k, "QrlAccInteger: %lld-bit accumulators (%d to %d are simulated)", (long long)bits,
                       QR_ACC_MIN_BITS, QR_ACC_MAX_BITS);
    return base_op(k)->infer(k);
}

/* t's integers minus zero point z (one, or one per index i / inner along t's flat order), as int32. */
static int32_t *centred(const qr_tensor *t, const qr_tensor *zp, int64_t inner, int64_t nz)
{
    int64_t n = qr_tensor_numel(t);
    int32_t *o = malloc(sizeof *o * (size_t)(n + 1));
    if (!o)
        return NULL;
    int64_t zn = zp ? qr_tensor_numel(zp) : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t z = !zn ? 0 : zn == 1 ? qr_get_i64(zp->data, zp->dtype, 0)
                                       : qr_get_i64(zp->data, zp->dtype, (i / inner) % nz);
        o[i] = (int32_t)(qr_get_i64(t->data, t->dtype, i) - z);
    }
    return o;
}

/* t's values divided by its scale (one, or one per index (i / inner) % nz), rounded: the integers
 * (minus zero point) a fake-quantized f32 tensor holds; 0 where the scale is not positive. */
static int32_t *unscaled(const qr_tensor *t, const qr_tensor *scale, int64_t inner, int64_t nz)
{
    int64_t n = qr_tensor_numel(t), ns = qr_tensor_numel(scale);
    int32_t *o = malloc(sizeof *o * (size_t)(n + 1));
    if (!o)
        return NULL;
    const float *v = t->data, *sc = scale->data;
    for (int64_t i = 0; i < n; i++) {
        double sv = sc[ns == 1 ? 0 : (i / inner) % nz], q = sv > 0 ? nearbyint(v[i] / sv) : 0;
        o[i] = (int32_t)(q > INT32_MAX ? INT32_MAX : q < -INT32_MAX ? -INT32_MAX : q);
    }
    return o;
}

/* The shape of a reduction: Conv (conv geometry g, x [N, C, ...], w [M, C/group, ...]) or MatMul
 * (A [..., M, K] by B [K, N] or by B of A's batch). */
typedef struct reduction {
    int conv, transb; /* transb: a Gemm's B is [N, K] (transB = 1) */
    qr_conv_geom g;
    int64_t N, C, M, Cg, Mg;     /* Conv */
    int64_t batch, rows, K, cols, bbatch; /* MatMul */
    int64_t nout;
} reduction;

static qr_status reduction_init(qr_kctx *k, const qr_tensor *x, const qr_tensor *w, reduction *r)
{
    memset(r, 0, sizeof *r);
    r->conv = (int)qr_attr_i(k->node, "conv", 0);
    if (r->conv) {
        if (qr_conv_geom_init(k, x, &w->dims[2], QR_WIN_CONV, &r->g) != QR_OK)
            return QR_ERR;
        r->N = x->dims[0], r->C = x->dims[1], r->M = w->dims[0], r->Cg = w->dims[1];
        r->Mg = r->M / (r->C / r->Cg);
        r->nout = r->N * r->M * r->g.small_n;
        return QR_OK;
    }
    if (x->ndim < 2 || w->ndim < 2)
        return QR_KERR(k, "%s: a matrix product of vectors is not simulated", k->node->op);
    r->transb = (int)qr_attr_i(k->node, "transB", 0);
    r->rows = x->dims[x->ndim - 2], r->K = x->dims[x->ndim - 1], r->cols = w->dims[w->ndim - (r->transb ? 2 : 1)];
    r->batch = r->rows && r->K ? qr_tensor_numel(x) / (r->rows * r->K) : 0;
    r->bbatch = r->K && r->cols ? qr_tensor_numel(w) / (r->K * r->cols) : 0;
    r->nout = r->batch * r->rows * r->cols;
    if ((r->bbatch != 1 && r->bbatch != r->batch) || qr_tensor_numel(k->out[0]) != r->nout)
        return QR_KERR(k, "%s: B's batch must be 1 or A's (broadcasting is not simulated)", k->node->op);
    return QR_OK;
}

/* Output i's channel: the weight's output channel (Conv) or column (MatMul). */
static int64_t out_channel(const reduction *r, int64_t i)
{
    return r->conv ? i / r->g.small_n % r->M : i % r->cols;
}

/* One reduce job: the centred integers, the accumulators it writes, its overflows (atomic). */
typedef struct reduce_job {
    const reduction *r;
    const int32_t *xc, *wc;
    const int64_t *offs; /* Conv: offs[kk * small_n + j], the input offset of kernel position kk at output j */
    int bits, sat;
    int64_t *acc, over;
} reduce_job;

/* Conv: planes [begin, end) of n * M + m; MatMul: rows [begin, end) of batch * rows. */
static void reduce_range(void *arg, int64_t begin, int64_t end)
{
    reduce_job *J = arg;
    const reduction *r = J->r;
    int64_t over = 0;
    for (int64_t p = begin; p < end; p++) {
        if (!r->conv) { /* row p of A: t = p / rows */
            const int32_t *bt = &J->wc[(r->bbatch == 1 ? 0 : p / r->rows) * r->K * r->cols], *ar = &J->xc[p * r->K];
            for (int64_t j = 0; j < r->cols; j++) {
                int64_t a = 0;
                for (int64_t kk = 0; kk < r->K; kk++)
                    a = acc_step(a, (int64_t)ar[kk] * bt[r->transb ? j * r->K + kk : kk * r->cols + j], J->bits, J->sat,
                                 &over);
                J->acc[p * r->cols + j] = a;
            }
            continue;
        }
        const qr_conv_geom *g = &r->g;
        int64_t n = p / r->M, m = p % r->M;
        const int32_t *wm = &J->wc[m * r->Cg * g->kernel_n];
        const int32_t *xg = &J->xc[(n * r->C + m / r->Mg * r->Cg) * g->big_n];
        for (int64_t j = 0; j < g->small_n; j++) {
            int64_t a = 0;
            for (int64_t c = 0; c < r->Cg; c++)
                for (int64_t kk = 0; kk < g->kernel_n; kk++) {
                    int64_t off = J->offs[kk * g->small_n + j];
                    int64_t v = off < 0 ? 0 : (int64_t)xg[c * g->big_n + off] * wm[c * g->kernel_n + kk];
                    a = acc_step(a, v, J->bits, J->sat, &over);
                }
            J->acc[p * g->small_n + j] = a;
        }
    }
    __atomic_fetch_add(&J->over, over, __ATOMIC_RELAXED);
}

/* Every output's accumulator into acc[r->nout] from the centred integers xc and wc, k ascending:
 * for a Conv, the input channel of its group, then the kernel position in row-major order (the
 * weight's flat order); for a MatMul, K. Outputs are independent: they run in parallel. */
static qr_status reduce(qr_kctx *k, const reduction *r, const int32_t *xc, const int32_t *wc, int bits, int sat,
                        int64_t *acc, int64_t *over)
{
    reduce_job J = {.r = r, .xc = xc, .wc = wc, .bits = bits, .sat = sat, .acc = acc};
    int64_t *offs = NULL;
    if (r->conv) {
        const qr_conv_geom *g = &r->g;
        if (!(offs = malloc(sizeof *offs * (size_t)(g->kernel_n * g->small_n + 1))))
            return QR_KERR(k, "out of memory");
        for (int64_t kk = 0; kk < g->kernel_n; kk++)
            qr_conv_offsets(g, kk, &offs[kk * g->small_n]);
        J.offs = offs;
    }
    int64_t n = r->conv ? r->N * r->M : r->batch * r->rows, per = r->conv ? r->g.small_n : r->cols;
    int64_t work = per * (r->conv ? r->Cg * r->g.kernel_n : r->K);
    qr_parallel_for(k->pool, n, work > 0 ? 1 + 16384 / work : 1, reduce_range, &J);
    free(offs);
    *over += J.over;
    return QR_OK;
}

/* The products one output adds. */
static int64_t reduction_len(const reduction *r)
{
    return r->conv ? r->Cg * r->g.kernel_n : r->K;
}

qr_status qr_accint_run(qr_kctx *k)
{
    int bits = (int)qr_attr_i(k->node, "bits", 32), sat = (int)qr_attr_i(k->node, "saturate", 0);
    int64_t over = 0, ci = qr_attr_i(k->node, "counter", -1);
    const qr_tensor *x = k->in[0], *w = k->in[1], *xz = opt_in(k, 2), *wz = opt_in(k, 3);
    qr_tensor *y = k->out[0];
    reduction r;
    if (reduction_init(k, x, w, &r) != QR_OK)
        return QR_ERR;
    int64_t nw = r.conv ? r.M : r.cols, xzn = xz ? qr_tensor_numel(xz) : 1, wzn = wz ? qr_tensor_numel(wz) : 1;
    if ((wzn != 1 && wzn != nw) || (xzn != 1 && (r.conv || xzn != r.batch * r.rows)))
        return QR_KERR(k, "QrlAccInteger: zero points per tensor, per row of A or per output channel");
    int32_t *xc = centred(x, xz, r.conv ? 1 : r.K, r.conv ? 1 : r.batch * r.rows);
    int32_t *wc = centred(w, wz, r.conv ? r.Cg * r.g.kernel_n : 1, nw);
    int64_t *acc = malloc(sizeof *acc * (size_t)(r.nout + 1));
    qr_status st = xc && wc && acc ? reduce(k, &r, xc, wc, bits, sat, acc, &over) : QR_KERR(k, "out of memory");
    for (int64_t i = 0; st == QR_OK && i < r.nout; i++) {
        if (y->dtype == QR_I64)
            ((int64_t *)y->data)[i] = acc[i];
        else
            ((int32_t *)y->data)[i] = (int32_t)acc[i];
    }
    free(xc);
    free(wc);
    free(acc);
    const qr_intgraph *ig = k->user;
    if (st == QR_OK && ig && ci >= 0 && ci < ig->naccs) {
        __atomic_fetch_add(&ig->accs[ci].sums, r.nout * reduction_len(&r), __ATOMIC_RELAXED);
        __atomic_fetch_add(&ig->accs[ci].overflows, over, __ATOMIC_RELAXED);
    }
    return st;
}

/* The f32 op QrlAccSim stands for. */
static const char *sim_op(const qr_kctx *k)
{
    return qr_attr_i(k->node, "conv", 0) ? "Conv" : qr_attr_i(k->node, "gemm", 0) ? "Gemm" : "MatMul";
}

/* QrlAccSim(x, w, b?, x_scale, w_scale): the f32 op the simulated graph runs for a Conv, Gemm or MatMul
 * of fake-quantized operands: their integers (x / x_scale, w / w_scale rounded), the narrow
 * accumulator, then acc * x_scale * w_scale + b in f32. An x_scale that is not positive (a
 * batch calibration left unrounded) computes the product in double instead. */
qr_status qr_accsim_infer(qr_kctx *k)
{
    const qr_op_def *d = qr_op_find("", sim_op(k));
    const qr_tensor *xs = opt_in(k, 3), *ws = opt_in(k, 4);
    if (!xs || !ws || xs->dtype != QR_F32 || ws->dtype != QR_F32 || qr_tensor_numel(xs) != 1 || k->in[0]->dtype != QR_F32 ||
        k->in[1]->dtype != QR_F32)
        return QR_KERR(k, "QrlAccSim takes f32 x, w, a scalar x_scale and w_scale");
    return d->infer(k);
}

qr_status qr_accsim_run(qr_kctx *k)
{
    int bits = (int)qr_attr_i(k->node, "bits", 32), sat = (int)qr_attr_i(k->node, "saturate", 0);
    const qr_tensor *x = k->in[0], *w = k->in[1], *b = opt_in(k, 2), *xs = k->in[3], *ws = k->in[4];
    reduction r;
    if (reduction_init(k, x, w, &r) != QR_OK)
        return QR_ERR;
    float sx = ((const float *)xs->data)[0];
    int64_t nw = r.conv ? r.M : r.cols, nws = qr_tensor_numel(ws), over = 0;
    if ((nws != 1 && nws != nw) || (b && qr_tensor_numel(b) != 1 && qr_tensor_numel(b) != nw))
        return QR_KERR(k, "QrlAccSim: w_scale has %lld values and b %lld for %lld output channels", (long long)nws,
                       (long long)(b ? qr_tensor_numel(b) : 0), (long long)nw);
    if (!(sx > 0) || !isfinite(sx)) /* the plain product: this batch was not rounded */
        return qr_op_find("", sim_op(k))->run(k);
    qr_tensor one = {.dtype = QR_F32, .ndim = 0, .data = &sx};
    int32_t *xc = unscaled(x, &one, 1, 1);
    int32_t *wc = unscaled(w, ws, r.conv ? r.Cg * r.g.kernel_n : r.transb ? r.K : 1, nw);
    int64_t *acc = malloc(sizeof *acc * (size_t)(r.nout + 1));
    qr_status st = xc && wc && acc ? reduce(k, &r, xc, wc, bits, sat, acc, &over) : QR_KERR(k, "out of memory");
    const float *wsd = ws->data;
    float *y = k->out[0]->data;
    for (int64_t i = 0; st == QR_OK && i < r.nout; i++) {
        int64_t c = out_channel(&r, i);
        double bias = b ? ((const float *)b->data)[qr_tensor_numel(b) == 1 ? 0 : c] : 0;
        y[i] = (float)((double)acc[i] * (double)sx * (double)wsd[nws == 1 ? 0 : c] + bias);
    }
    free(xc);
    free(wc);
    free(acc);
    return st;
}

/* The products it adds: what ConvInteger or MatMulInteger would do. */
double qr_accint_macs(const qr_kctx *k)
{
    const qr_tensor *w = k->n_in > 1 ? k->in[1] : NULL, *y = k->out[0];
    if (!w || !y || w->ndim < 2 || !w->dims[0])
        return 0;
    if (qr_attr_i(k->node, "conv", 0))
        return (double)qr_tensor_numel(y) * (double)qr_tensor_numel(w) / (double)w->dims[0];
    return (double)qr_tensor_numel(y) * (double)k->in[0]->dims[k->in[0]->ndim - 1];
}
