#include "accwidth.h"

#include <stdlib.h>
#include <string.h>

#include "intgraph.h"
#include "ops/conv_geom.h"
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

int64_t qr_acc_sum(const int64_t *prod, int64_t n, int bits, int saturate, int64_t *over)
{
    int64_t acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc = acc_step(acc, prod[i], bits, saturate, over);
    return acc;
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

static void store(qr_tensor *y, int64_t i, int64_t v)
{
    if (y->dtype == QR_I64)
        ((int64_t *)y->data)[i] = v;
    else
        ((int32_t *)y->data)[i] = (int32_t)v;
}

/* ConvInteger's sums, each output's k ascending: input channel of its group, then the kernel
 * position in row-major order. */
static qr_status conv_run(qr_kctx *k, int bits, int sat, int64_t *sums, int64_t *over)
{
    const qr_tensor *x = k->in[0], *w = k->in[1], *xz = opt_in(k, 2), *wz = opt_in(k, 3);
    qr_tensor *y = k->out[0];
    qr_conv_geom g;
    if (qr_conv_geom_init(k, x, &w->dims[2], QR_WIN_CONV, &g) != QR_OK)
        return QR_ERR;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], Cg = w->dims[1], G = C / Cg, Mg = M / G;
    if (wz && qr_tensor_numel(wz) != 1 && qr_tensor_numel(wz) != M)
        return QR_KERR(k, "QrlAccInteger: w_zero_point has %lld values for %lld output channels",
                       (long long)qr_tensor_numel(wz), (long long)M);
    if (xz && qr_tensor_numel(xz) != 1)
        return QR_KERR(k, "QrlAccInteger: x_zero_point must be a scalar");
    int32_t *xc = centred(x, xz, 1, 1), *wc = centred(w, wz, Cg * g.kernel_n, M);
    int64_t *offs = malloc(sizeof *offs * (size_t)(g.kernel_n * g.small_n + 1));
    qr_status st = QR_OK;
    if (!xc || !wc || !offs) {
        st = QR_KERR(k, "out of memory");
        goto done;
    }
    for (int64_t kk = 0; kk < g.kernel_n; kk++)
        qr_conv_offsets(&g, kk, &offs[kk * g.small_n]);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            const int32_t *wm = &wc[m * Cg * g.kernel_n];
            const int32_t *xg = &xc[(n * C + m / Mg * Cg) * g.big_n];
            for (int64_t j = 0; j < g.small_n; j++) {
                int64_t acc = 0;
                for (int64_t c = 0; c < Cg; c++)
                    for (int64_t kk = 0; kk < g.kernel_n; kk++) {
                        int64_t off = offs[kk * g.small_n + j];
                        int64_t p = off < 0 ? 0 : (int64_t)xg[c * g.big_n + off] * wm[c * g.kernel_n + kk];
                        acc = acc_step(acc, p, bits, sat, over);
                    }
                store(y, (n * M + m) * g.small_n + j, acc);
            }
            *sums += g.small_n * Cg * g.kernel_n;
        }
done:
    free(xc);
    free(wc);
    free(offs);
    return st;
}

/* MatMulInteger's sums, k ascending: A [..., M, K] by B [K, N] or by B of A's batch. */
static qr_status matmul_run(qr_kctx *k, int bits, int sat, int64_t *sums, int64_t *over)
{
    const qr_tensor *a = k->in[0], *b = k->in[1], *az = opt_in(k, 2), *bz = opt_in(k, 3);
    qr_tensor *y = k->out[0];
    if (a->ndim < 2 || b->ndim < 2)
        return QR_KERR(k, "QrlAccInteger: a matrix product of vectors is not simulated");
    int64_t M = a->dims[a->ndim - 2], K = a->dims[a->ndim - 1], N = b->dims[b->ndim - 1];
    int64_t ba = M && K ? qr_tensor_numel(a) / (M * K) : 0, bb = K && N ? qr_tensor_numel(b) / (K * N) : 0;
    if ((bb != 1 && bb != ba) || qr_tensor_numel(y) != ba * M * N)
        return QR_KERR(k, "QrlAccInteger: B's batch must be 1 or A's (broadcasting is not simulated)");
    int64_t azn = az ? qr_tensor_numel(az) : 1, bzn = bz ? qr_tensor_numel(bz) : 1;
    if ((azn != 1 && azn != ba * M) || (bzn != 1 && bzn != N))
        return QR_KERR(k, "QrlAccInteger: zero points per tensor, per row of A or per column of B");
    int32_t *ac = centred(a, az, K, ba * M), *bc = centred(b, bz, 1, N);
    qr_status st = QR_OK;
    if (!ac || !bc)
        st = QR_KERR(k, "out of memory");
    for (int64_t t = 0; st == QR_OK && t < ba; t++) {
        const int32_t *bt = &bc[(bb == 1 ? 0 : t) * K * N];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const int32_t *ar = &ac[(t * M + i) * K];
                int64_t acc = 0;
                for (int64_t kk = 0; kk < K; kk++)
                    acc = acc_step(acc, (int64_t)ar[kk] * bt[kk * N + j], bits, sat, over);
                store(y, (t * M + i) * N + j, acc);
            }
    }
    *sums += ba * M * N * K;
    free(ac);
    free(bc);
    return st;
}

qr_status qr_accint_run(qr_kctx *k)
{
    int bits = (int)qr_attr_i(k->node, "bits", 32), sat = (int)qr_attr_i(k->node, "saturate", 0);
    int64_t sums = 0, over = 0, ci = qr_attr_i(k->node, "counter", -1);
    qr_status st = qr_attr_i(k->node, "conv", 0) ? conv_run(k, bits, sat, &sums, &over)
                                                 : matmul_run(k, bits, sat, &sums, &over);
    const qr_intgraph *ig = k->user;
    if (st == QR_OK && ig && ci >= 0 && ci < ig->naccs) {
        __atomic_fetch_add(&ig->accs[ci].sums, sums, __ATOMIC_RELAXED);
        __atomic_fetch_add(&ig->accs[ci].overflows, over, __ATOMIC_RELAXED);
    }
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
