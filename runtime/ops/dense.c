/* Dense ops: Gemm, MatMul, Softmax, LogSoftmax, BatchNormalization,
 * LayerNormalization, InstanceNormalization.
 * Matrix products have typed kernels (float accumulation for f32, double for
 * f64, wrapping 64-bit for integers); f16 and narrow integers are widened to
 * those first. The normalizations read and write through ld/st below, which
 * stay cheap for f32/f64 and fall back to qr_get_f64 for the rare dtypes. */
#include "ops_common.h"
#include "f32_rows.h"
#include "sgemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An empty input name leaves a slot NULL even where the op requires it. */
static qr_status need_inputs(qr_kctx *k, int n)
{
    for (int i = 0; i < n; i++)
        if (i >= k->n_in || !k->in[i])
            return QR_KERR(k, "input %d is required", i);
    return QR_OK;
}

static qr_status need_float(qr_kctx *k, const qr_tensor *t, const char *what)
{
    if (!qr_dtype_is_float(t->dtype))
        return QR_KERR(k, "%s must be a float tensor, not %s", what, qr_dtype_name(t->dtype));
    return QR_OK;
}

/* ---- matrix product kernels ---------------------------------------------- */

/* Y[b] = op(A[b]) * op(B[b]) for nbatch products of (M x K) by (K x N); the
 * work is split over the nbatch*M output rows. aoff/boff are element offsets
 * of each product's A and B (NULL: a single product at offset 0). */
typedef struct mm_job {
    const void *a, *b;
    void *y;
    int64_t m, n, k;
    int ta, tb;
    const int64_t *aoff, *boff;
    const float *bias; /* f32: n values mm_run adds to every row of y last (a fused Add), or NULL */
} mm_job;

/* i-k-j order when B is not transposed (rows of B and Y stream contiguously);
 * dot products when it is (rows of B are then contiguous in k). */
#define MM_KERNEL(NAME, T)                                                             \
    static void NAME(void *arg, int64_t r0, int64_t r1)                                \
    {                                                                                  \
        const mm_job *j = arg;                                                         \
        int64_t M = j->m, N = j->n, K = j->k;                                          \
        for (int64_t r = r0; r < r1; r++) {                                            \
            int64_t b = r / M, i = r % M;                                              \
            const T *A = (const T *)j->a + (j->aoff ? j->aoff[b] : 0);                 \
            const T *B = (const T *)j->b + (j->boff ? j->boff[b] : 0);                 \
            T *y = (T *)j->y + r * N;                                                  \
            int64_t as = j->ta ? M : 1; /* stride of A(i, k) along k */               \
            const T *arow = j->ta ? A + i : A + i * K;                                 \
            if (!j->tb) {                                                              \
                for (int64_t n = 0; n < N; n++)                                        \
                    y[n] = 0;                                                          \
                for (int64_t kk = 0; kk < K; kk++) {                                   \
                    T a = arow[kk * as];                                               \
                    const T *brow = B + kk * N;                                        \
                    for (int64_t n = 0; n < N; n++)                                    \
                        y[n] += a * brow[n];                                           \
                }                                                                      \
            } else {                                                                   \
                for (int64_t n = 0; n < N; n++) {                                      \
                    const T *brow = B + n * K;                                         \
                    T s = 0;                                                           \
                    for (int64_t kk = 0; kk < K; kk++)                                 \
                        s += arow[kk * as] * brow[kk];                                 \
                    y[n] = s;                                                          \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }

MM_KERNEL(mm_f32, float)
MM_KERNEL(mm_f64, double)
MM_KERNEL(mm_u64, uint64_t) /* integers: unsigned so overflow wraps instead of being UB */

/* Which kernel computes a dtype, and in what element type. */
static qr_dtype mm_compute_type(qr_dtype t)
{
    if (t == QR_F64)
        return QR_F64;
    if (qr_dtype_is_float(t))
        return QR_F32;
    return QR_U64;
}

/* Copies n elements of src (dtype t) into a new buffer of the compute type ct. */
static void *widen(const void *src, qr_dtype t, qr_dtype ct, int64_t n)
{
    void *dst = malloc((size_t)(n ? n : 1) * qr_dtype_size(ct));
    if (!dst)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (ct == QR_F32)
            ((float *)dst)[i] = (float)qr_get_f64(src, t, i);
        else if (ct == QR_F64)
            ((double *)dst)[i] = qr_get_f64(src, t, i);
        else
            ((uint64_t *)dst)[i] = (uint64_t)qr_get_i64(src, t, i);
    }
    return dst;
}

/* dst[K, N] = src[N, K]^T for elements of es bytes, in blocks that stay in cache. */
static void transpose(void *dst, const void *src, int64_t n, int64_t kd, size_t es)
{
    enum { BLK = 32 };
    for (int64_t n0 = 0; n0 < n; n0 += BLK)
        for (int64_t q0 = 0; q0 < kd; q0 += BLK) {
            int64_t n1 = n0 + BLK < n ? n0 + BLK : n, q1 = q0 + BLK < kd ? q0 + BLK : kd;
            if (es == 4) {
                const uint32_t *s = src;
                uint32_t *d = dst;
                for (int64_t i = n0; i < n1; i++)
                    for (int64_t q = q0; q < q1; q++)
                        d[q * n + i] = s[i * kd + q];
            } else {
                for (int64_t i = n0; i < n1; i++)
                    for (int64_t q = q0; q < q1; q++)
                        memcpy((char *)dst + (size_t)(q * n + i) * es, (const char *)src + (size_t)(i * kd + q) * es, es);
            }
        }
}

/* Runs the products of j over tensors of dtype t: when t is not the compute
 * type itself, the operands are widened and the result narrowed back. */
static qr_status mm_run(qr_kctx *k, mm_job j, qr_dtype t, int64_t nbatch, int64_t na, int64_t nb)
{
    qr_dtype ct = mm_compute_type(t);
    int native = ct == t || (ct == QR_U64 && (t == QR_I64 || t == QR_U64));
    int64_t ny = nbatch * j.m * j.n;
    void *wa = NULL, *wb = NULL, *wy = NULL;
    void *y = j.y;
    if (!native) {
        wa = widen(j.a, t, ct, na);
        wb = widen(j.b, t, ct, nb);
        wy = malloc((size_t)(ny ? ny : 1) * qr_dtype_size(ct));
        if (!wa || !wb || !wy) {
            free(wa);
            free(wb);
            free(wy);
            return QR_KERR(k, "out of memory");
        }
        j.a = wa;
        j.b = wb;
        j.y = wy;
    }
    const qr_sgemm_kernel *sk = ct == QR_F32 && native && nbatch == 1 && !j.aoff && !j.boff && j.m > 0 &&
                                        qr_kinput_fixed(k, 1) ? qr_sgemm_best() : NULL;
    if (sk) {
        /* a constant B (a weight, or a QDQ graph's weight DequantizeLinear: qr_kinput_fixed, as
         * sconv's): packed into the GEMM's panels on the first run only, from B or its transpose in
         * place; the products are the same FMA chains as the packing per run's */
        int fresh = 1;
        float *pb = qr_kcache_get(k, (size_t)qr_sgemm_packed_size(sk, j.k, j.n) * sizeof(float) + 1, "packed B",
                                  &fresh);
        float *work = pb ? qr_kwork(k, qr_pool_threads(k->pool), qr_sgemm_work(sk), sizeof(float),
                                    "packed GEMM panels")
                         : NULL;
        if (!work) {
            qr_kcache_done(k, pb);
            return QR_ERR;
        }
        if (fresh)
            qr_sgemm_pack_b(sk, j.b, j.tb ? 1 : j.n, j.tb ? j.k : 1, j.k, j.n, pb);
        qr_sgemm_job sj = {.a = j.a, .b = j.tb ? NULL : j.b, .c = j.y, .a_rs = j.ta ? 1 : j.k, .a_cs = j.ta ? j.m : 1,
                           .ldb = j.n, .ldc = j.n, .m = j.m, .n = j.n, .k = j.k, .b_packed = pb,
                           .col_bias = j.bias};
        qr_sgemm(k->pool, sk, &sj, work);
        qr_kcache_done(k, pb);
        return QR_OK;
    }
    void *bt = NULL;
    if (j.tb && !j.boff && j.n * j.k > 0) {
        /* B^T as [K, N] once: every output then sums over k in the same order
         * as the dot product did (bit for bit), with its inner loop along n,
         * which vectorizes. Constant weights (or made from constants alone) are transposed on
         * the first run only. */
        size_t es = qr_dtype_size(ct);
        int fresh = 1, keep = native && qr_kinput_fixed(k, 1);
        bt = keep ? qr_kcache_get(k, (size_t)(j.k * j.n) * es, "transposed B", &fresh)
                  : qr_kscratch(k, j.k, j.n, es, "transposed B");
        if (!bt) {
            free(wa);
            free(wb);
            free(wy);
            return QR_ERR;
        }
        if (fresh)
            transpose(bt, j.b, j.n, j.k, es);
        j.b = bt;
        j.tb = 0;
    }
    qr_range_fn fn = ct == QR_F32 ? mm_f32 : ct == QR_F64 ? mm_f64 : mm_u64;
    int64_t rows = nbatch * j.m;
    if (ct == QR_F32 && !j.tb && rows > 0 && ((nbatch == 1 && !j.aoff && !j.boff) || qr_sgemm_best())) {
        /* the FMA or register-tiled GEMM, each sum in k order (qr_gemm_f32); batches too with FMA,
         * so that every f32 product rounds alike */
        if (qr_gemm_f32(k, j.a, j.ta ? 1 : j.k, j.ta ? j.m : 1, j.b, j.y, j.m, j.n, j.k, nbatch, j.aoff, j.boff) !=
            QR_OK) {
            qr_kcache_done(k, bt);
            free(wa);
            free(wb);
            free(wy);
            return QR_ERR;
        }
        fn = NULL;
    }
    int64_t per_row = j.n * j.k + 1;
    int64_t grain = per_row >= 65536 ? 1 : 65536 / per_row;
    if (rows > 0 && fn)
        qr_parallel_for(k->pool, rows, grain, fn, &j);
    qr_kcache_done(k, bt);
    for (int64_t r = 0; j.bias && r < rows; r++) /* after the sums, as the fused Add did (f32 only) */
        for (int64_t x = 0; x < j.n; x++)
            ((float *)j.y)[r * j.n + x] += j.bias[x];
    if (!native) {
        for (int64_t i = 0; i < ny; i++) {
            if (ct == QR_U64)
                qr_set_i64(y, t, i, (int64_t)((uint64_t *)wy)[i]);
            else
                qr_set_f64(y, t, i, ((float *)wy)[i]);
        }
        free(wa);
        free(wb);
        free(wy);
    }
    return QR_OK;
}

static qr_status mm_types(qr_kctx *k, const qr_tensor *a, const qr_tensor *b)
{
    if (a->dtype != b->dtype)
        return QR_KERR(k, "A and B must have the same type, got %s and %s", qr_dtype_name(a->dtype),
                       qr_dtype_name(b->dtype));
    if (a->dtype == QR_BOOL || a->dtype == QR_STRING || a->dtype == QR_UNDEF)
        return QR_KERR(k, "%s operands are not supported, only numbers", qr_dtype_name(a->dtype));
    return QR_OK;
}

/* ---- Gemm ---------------------------------------------------------------- */

static qr_status gemm_infer(qr_kctx *k)
{
    if (need_inputs(k, 2) != QR_OK)
        return QR_ERR;
    const qr_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 ? k->in[2] : NULL;
    if (a->ndim != 2 || b->ndim != 2)
        return QR_KERR(k, "A and B must be 2-D, got ranks %d and %d", a->ndim, b->ndim);
    if (mm_types(k, a, b) != QR_OK)
        return QR_ERR;
    int ta = qr_attr_i(k->node, "transA", 0) != 0, tb = qr_attr_i(k->node, "transB", 0) != 0;
    int64_t m = a->dims[ta], ka = a->dims[!ta], kb = b->dims[tb], n = b->dims[!tb];
    if (ka != kb)
        return QR_KERR(k, "inner dimensions differ: A gives K=%lld, B gives K=%lld", (long long)ka, (long long)kb);
    if (c) {
        if (c->dtype != a->dtype)
            return QR_KERR(k, "C must have the type of A (%s), not %s", qr_dtype_name(a->dtype),
                           qr_dtype_name(c->dtype));
        int64_t want[2] = {m, n};
        int ok = c->ndim <= 2;
        for (int d = 0; ok && d < c->ndim; d++) {
            int64_t x = c->dims[d], w = want[2 - c->ndim + d];
            ok = x == w || x == 1;
        }
        if (!ok) {
            char buf[128];
            return QR_KERR(k, "C of shape %s cannot be broadcast to [%lld,%lld]",
                           qr_tensor_type_str(c, buf, sizeof buf), (long long)m, (long long)n);
        }
    }
    k->out[0]->dtype = a->dtype;
    k->out[0]->ndim = 2;
    k->out[0]->dims[0] = m;
    k->out[0]->dims[1] = n;
    return QR_OK;
}

static qr_status gemm_run(qr_kctx *k)
{
    const qr_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    int ta = qr_attr_i(k->node, "transA", 0) != 0, tb = qr_attr_i(k->node, "transB", 0) != 0;
    double alpha = qr_attr_f(k->node, "alpha", 1.0f), beta = qr_attr_f(k->node, "beta", 1.0f);
    int64_t m = y->dims[0], n = y->dims[1];
    mm_job j = {.a = a->data, .b = b->data, .y = y->data, .m = m, .n = n, .k = a->dims[!ta], .ta = ta, .tb = tb};
    if (mm_run(k, j, a->dtype, 1, qr_tensor_numel(a), qr_tensor_numel(b)) != QR_OK)
        return QR_ERR;
    /* Y = alpha * AB + beta * C; beta * C is skipped when beta is 0 so a C
     * holding inf or NaN does not leak into the result. */
    int64_t cs[2] = {0, 0};
    int use_c = c && beta != 0;
    if (use_c)
        qr_broadcast_strides(c, y, cs);
    int is_int = !qr_dtype_is_float(y->dtype);
    if (y->dtype == QR_F32) {
        /* the loop below's f32 arithmetic by rows, which vectorizes (it tested the type per element) */
        float fa = (float)alpha, fb = (float)beta, *yv = y->data;
        const float *cv = use_c ? c->data : NULL;
        for (int64_t i = 0; i < m; i++) {
            float *row = yv + i * n;
            if (!use_c) {
                for (int64_t jn = 0; fa != 1.0f && jn < n; jn++)
                    row[jn] = fa * row[jn];
            } else if (cs[1] == 1) {
                const float *crow = cv + i * cs[0];
                for (int64_t jn = 0; jn < n; jn++)
                    row[jn] = fa * row[jn] + fb * crow[jn];
            } else {
                float cb = fb * cv[i * cs[0]];
                for (int64_t jn = 0; jn < n; jn++)
                    row[jn] = fa * row[jn] + cb;
            }
        }
        return QR_OK;
    }
    for (int64_t i = 0; i < m; i++) {
        for (int64_t jn = 0; jn < n; jn++) {
            int64_t o = i * n + jn;
            if (y->dtype == QR_F32) {
                float v = (float)alpha * ((float *)y->data)[o];
                if (use_c)
                    v += (float)beta * ((const float *)c->data)[i * cs[0] + jn * cs[1]];
                ((float *)y->data)[o] = v;
            } else if (is_int && alpha == 1 && (!use_c || beta == 1)) {
                /* Exact integer path for the common unit coefficients. */
                uint64_t v = (uint64_t)qr_get_i64(y->data, y->dtype, o);
                if (use_c)
                    v += (uint64_t)qr_get_i64(c->data, c->dtype, i * cs[0] + jn * cs[1]);
                qr_set_i64(y->data, y->dtype, o, (int64_t)v);
            } else {
                double v = alpha * qr_get_f64(y->data, y->dtype, o);
                if (use_c)
                    v += beta * qr_get_f64(c->data, c->dtype, i * cs[0] + jn * cs[1]);
                qr_set_f64(y->data, y->dtype, o, v);
            }
        }
    }
    return QR_OK;
}

/* ---- MatMul -------------------------------------------------------------- */

/* numpy matmul shapes: a 1-D A is a row [1,K] and a 1-D B a column [K,1],
 * the added dimension being dropped from the result; batch dims broadcast. */
typedef struct mm_shape {
    int64_t m, n, k;
    qr_tensor abatch, bbatch, ybatch; /* shapes only */
} mm_shape;

static qr_status matmul_shape(qr_kctx *k, mm_shape *s)
{
    if (need_inputs(k, 2) != QR_OK)
        return QR_ERR;
    const qr_tensor *a = k->in[0], *b = k->in[1];
    if (a->ndim < 1 || b->ndim < 1)
        return QR_KERR(k, "MatMul inputs must have rank >= 1, got ranks %d and %d", a->ndim, b->ndim);
    if (mm_types(k, a, b) != QR_OK)
        return QR_ERR;
    memset(s, 0, sizeof *s);
    s->m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    int64_t ka = a->dims[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    s->n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (ka != kb)
        return QR_KERR(k, "inner dimensions differ: A has %lld columns, B has %lld rows", (long long)ka, (long long)kb);
    s->k = ka;
    s->abatch.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
    s->bbatch.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
    memcpy(s->abatch.dims, a->dims, sizeof(int64_t) * (size_t)s->abatch.ndim);
    memcpy(s->bbatch.dims, b->dims, sizeof(int64_t) * (size_t)s->bbatch.ndim);
    const qr_tensor *both[2] = {&s->abatch, &s->bbatch};
    return qr_broadcast_shapes(k, both, 2, &s->ybatch);
}

static qr_status matmul_infer(qr_kctx *k)
{
    mm_shape s;
    if (matmul_shape(k, &s) != QR_OK)
        return QR_ERR;
    qr_tensor *y = k->out[0];
    y->dtype = k->in[0]->dtype;
    y->ndim = s.ybatch.ndim;
    memcpy(y->dims, s.ybatch.dims, sizeof(int64_t) * (size_t)y->ndim);
    if (k->in[0]->ndim > 1)
        y->dims[y->ndim++] = s.m;
    if (k->in[1]->ndim > 1)
        y->dims[y->ndim++] = s.n;
    return QR_OK;
}

/* ---- MatMul on strided operands (the executor's folded Transposes) ------ */

/* Products [p0, p1) of a strided MatMul, each on one thread with its slot's workspace: product
 * p's A, B and C from off[3p], off[3p + 1], off[3p + 2] elements on; B packed from its strides
 * first when its columns are not contiguous (b_cs != 1), else read in place (row stride ldb). */
typedef struct mm_view_job {
    const qr_sgemm_kernel *sk;
    qr_sgemm_job base;
    const int64_t *off;
    int64_t b_rs, b_cs, per_slot;
    float *work;
} mm_view_job;

static void mm_view_one(const mm_view_job *vj, int64_t p, float *slot_work, float *pk, qr_pool *pool)
{
    qr_sgemm_job sj = vj->base;
    sj.a += vj->off[3 * p];
    sj.c += vj->off[3 * p + 2];
    const float *b = sj.b + vj->off[3 * p + 1];
    if (vj->b_cs != 1) {
        qr_sgemm_pack_b(vj->sk, b, vj->b_rs, vj->b_cs, sj.k, sj.n, pk);
        sj.b = NULL; /* every route then reads the panels (qr_sgemm) */
        sj.b_packed = pk;
    } else
        sj.b = b;
    qr_sgemm(pool, vj->sk, &sj, slot_work);
}

static void mm_view_products(void *arg, int64_t p0, int64_t p1, int slot)
{
    const mm_view_job *vj = arg;
    for (int64_t p = p0; p < p1; p++)
    {
        float *w = vj->work + slot * vj->per_slot;
        mm_view_one(vj, p, w, w + (qr_sgemm_work(vj->sk) + 15) / 16 * 16, NULL);
    }
}

static qr_status matmul_run(qr_kctx *k);

/* Copies t's elements between its strided layout st (its data) and row-major order (dense):
 * dense = t when gather, else t = dense. */
static void mm_restride(void *dense, const qr_tensor *t, const int64_t *st, int gather)
{
    qr_iter it;
    qr_iter_init(&it, t, 1);
    memcpy(it.stride[0], st, sizeof(int64_t) * (size_t)t->ndim);
    size_t es = qr_dtype_size(t->dtype);
    char *d = dense, *src = t->data;
    for (int64_t i = 0, n = qr_tensor_numel(t); i < n; i++, qr_iter_next(&it))
        if (gather)
            memcpy(d + (size_t)i * es, src + (size_t)it.off[0] * es, es);
        else
            memcpy(src + (size_t)it.off[0] * es, d + (size_t)i * es, es);
}

/* The operands as contiguous copies, then the product as without strides, written back through
 * out_strides: the same sums in the same order as the strided GEMM's (both qr_sgemm's, or both
 * the portable kernels' when the CPU has no FMA kernel), for what it does not take. */
static qr_status matmul_copied(qr_kctx *k)
{
    const qr_tensor *in[2];
    qr_tensor tmp[3];
    void *buf[3] = {NULL, NULL, NULL};
    qr_kctx c = *k;
    qr_status st = QR_OK;
    for (int i = 0; i < 2; i++) {
        in[i] = k->in[i];
        if (!k->in_strides[i])
            continue;
        tmp[i] = *k->in[i];
        if (!(buf[i] = qr_kscratch(k, qr_tensor_numel(&tmp[i]), 1, qr_dtype_size(tmp[i].dtype),
                                   "MatMul operand copy"))) {
            st = QR_ERR;
            goto done;
        }
        mm_restride(buf[i], k->in[i], k->in_strides[i], 1);
        tmp[i].data = buf[i];
        in[i] = &tmp[i];
    }
    const qr_tensor *ins[QR_MAX_DIMS] = {0};
    for (int i = 0; i < k->n_in && i < QR_MAX_DIMS; i++)
        ins[i] = i < 2 ? in[i] : k->in[i];
    qr_tensor *outs[1] = {k->out[0]};
    if (k->out_strides) {
        tmp[2] = *k->out[0];
        if (!(buf[2] = qr_kscratch(k, qr_tensor_numel(&tmp[2]), 1, qr_dtype_size(tmp[2].dtype),
                                   "MatMul output copy"))) {
            st = QR_ERR;
            goto done;
        }
        tmp[2].data = buf[2];
        outs[0] = &tmp[2];
    }
    c.in = ins;
    c.out = outs;
    c.in_strides[0] = c.in_strides[1] = NULL;
    c.out_strides = NULL;
    if ((st = matmul_run(&c)) == QR_OK && k->out_strides)
        mm_restride(buf[2], k->out[0], k->out_strides, 0);
done:
    for (int i = 0; i < 3; i++)
        free(buf[i]);
    return st;
}

/* A MatMul whose operands or output have strides (qr_kctx.in_strides, out_strides): each product
 * reads A through its row and column strides and B through its row stride, or packs B from its
 * strides, and stores C with its row stride; the GEMM's sums are those of the contiguous route
 * (qr_sgemm's FMA chains in k order, whatever the packing), so the bits are. f32 of rank >= 2 with
 * C's columns contiguous; anything else through contiguous copies (matmul_copied). */
static qr_status matmul_strided(qr_kctx *k, const mm_shape *s, const float *bias)
{
    const qr_tensor *a = k->in[0], *b = k->in[1], *y = k->out[0];
    const qr_sgemm_kernel *sk = a->dtype == QR_F32 ? qr_sgemm_best() : NULL;
    int64_t sa[QR_MAX_DIMS], sb[QR_MAX_DIMS], sy[QR_MAX_DIMS];
    if (k->in_strides[0])
        memcpy(sa, k->in_strides[0], sizeof(int64_t) * (size_t)a->ndim);
    else
        qr_tensor_strides(a, sa);
    if (k->in_strides[1])
        memcpy(sb, k->in_strides[1], sizeof(int64_t) * (size_t)b->ndim);
    else
        qr_tensor_strides(b, sb);
    if (k->out_strides)
        memcpy(sy, k->out_strides, sizeof(int64_t) * (size_t)y->ndim);
    else
        qr_tensor_strides(y, sy);
    if (!sk || a->ndim < 2 || b->ndim < 2 || (s->n > 1 && sy[y->ndim - 1] != 1))
        return matmul_copied(k);
    int64_t nbatch = qr_tensor_numel(&s->ybatch);
    if (nbatch == 0 || s->m == 0 || s->n == 0)
        return QR_OK;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(3 * nbatch));
    if (!off)
        return QR_KERR(k, "out of memory");
    /* each product's offsets: the batch dims' strides, 0 along a broadcast one */
    int yb = s->ybatch.ndim, ab = s->abatch.ndim, bb = s->bbatch.ndim;
    qr_iter it;
    qr_iter_init(&it, &s->ybatch, 3);
    for (int d = 0; d < yb; d++) {
        int da = d - (yb - ab), db = d - (yb - bb);
        it.stride[0][d] = da >= 0 && a->dims[da] > 1 ? sa[da] : 0;
        it.stride[1][d] = db >= 0 && b->dims[db] > 1 ? sb[db] : 0;
        it.stride[2][d] = sy[d];
    }
    for (int64_t p = 0; p < nbatch; p++, qr_iter_next(&it))
        for (int o = 0; o < 3; o++)
            off[3 * p + o] = it.off[o];
    mm_view_job vj = {.sk = sk,
                      .base = {.a = a->data, .b = b->data, .c = y->data, .a_rs = sa[a->ndim - 2],
                               .a_cs = sa[a->ndim - 1], .ldb = sb[b->ndim - 2], .ldc = sy[y->ndim - 2], .m = s->m,
                               .n = s->n, .k = s->k, .col_bias = bias},
                      .off = off, .b_rs = sb[b->ndim - 2], .b_cs = sb[b->ndim - 1]};
    if (s->n == 1) /* one column: its stride is never stepped */
        vj.b_cs = 1;
    if (s->m == 1) /* one row: ldc is never stepped */
        vj.base.ldc = s->n;
    int threads = nbatch > 1 ? qr_pool_threads(k->pool) : 1;
    int64_t pack = vj.b_cs != 1 ? qr_sgemm_packed_size(sk, s->k, s->n) : 0;
    vj.per_slot = (qr_sgemm_work(sk) + 15) / 16 * 16 + (pack + 15) / 16 * 16;
    /* one product: the GEMM's threads split it (their slots after the first, which packs B) */
    int64_t slots = nbatch > 1 ? threads : 1 + qr_pool_threads(k->pool);
    vj.work = qr_kwork(k, slots, vj.per_slot, sizeof(float), "strided GEMM panels");
    if (!vj.work) {
        free(off);
        return QR_ERR;
    }
    if (nbatch > 1)
        qr_parallel_for_slots(k->pool, nbatch, 1, mm_view_products, &vj);
    else
        mm_view_one(&vj, 0, vj.work, vj.work + (slots - 1) * ((qr_sgemm_work(sk) + 15) / 16 * 16), k->pool);
    free(off);
    return QR_OK;
}

static qr_status matmul_run(qr_kctx *k)
{
    mm_shape s;
    if (matmul_shape(k, &s) != QR_OK)
        return QR_ERR;
    const qr_tensor *a = k->in[0], *b = k->in[1];
    int64_t nbatch = qr_tensor_numel(&s.ybatch);
    /* a fused Add's row vector (the executor's, for an f32 MatMul whose output is at least 1-D) */
    const float *bias = k->bias ? k->bias->data : NULL;
    if (bias && (a->dtype != QR_F32 || k->bias->dtype != QR_F32 || qr_tensor_numel(k->bias) != s.n))
        return QR_KERR(k, "a fused bias of %lld values for %lld columns", (long long)qr_tensor_numel(k->bias),
                       (long long)s.n);
    if (k->in_strides[0] || k->in_strides[1] || k->out_strides)
        return matmul_strided(k, &s, bias);
    if (qr_tensor_numel(&s.bbatch) == 1 && qr_tensor_numel(&s.abatch) == nbatch) {
        /* One B for every product and A's batches contiguous ([B, S, K] x [K, N]): one product of
         * nbatch * M rows, whose rows are the same sums (one GEMM instead of nbatch thin ones). A
         * single product ([1, S, K] or [S, K]) comes here too: without batch offsets a constant B
         * is packed on the first run only (with them, every run packed it: a quarter of a GPT
         * layer's f32 time). */
        mm_job j = {.a = a->data, .b = b->data, .y = k->out[0]->data, .m = nbatch * s.m, .n = s.n, .k = s.k,
                    .bias = bias};
        return mm_run(k, j, a->dtype, 1, qr_tensor_numel(a), qr_tensor_numel(b));
    }
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(2 * nbatch + 1));
    if (!off)
        return QR_KERR(k, "out of memory");
    /* Element offsets of each product's operands, following broadcast batch dims. */
    qr_iter it;
    qr_iter_init(&it, &s.ybatch, 2);
    qr_broadcast_strides(&s.abatch, &s.ybatch, it.stride[0]);
    qr_broadcast_strides(&s.bbatch, &s.ybatch, it.stride[1]);
    for (int64_t i = 0; i < nbatch; i++, qr_iter_next(&it)) {
        off[i] = it.off[0] * s.m * s.k;
        off[nbatch + i] = it.off[1] * s.k * s.n;
    }
    mm_job j = {.a = a->data, .b = b->data, .y = k->out[0]->data, .m = s.m, .n = s.n, .k = s.k,
                .aoff = off, .boff = off + nbatch, .bias = bias};
    qr_status st = mm_run(k, j, a->dtype, nbatch, qr_tensor_numel(a), qr_tensor_numel(b));
    free(off);
    return st;
}

/* ---- Softmax, LogSoftmax ------------------------------------------------- */

/* The softmax runs over `n` elements spaced `inner` apart, for each of
 * outer*inner such groups. Before opset 13 the input is coerced to 2-D at
 * axis, so the group is the whole flattened tail; from 13 it is one axis. */
typedef struct sm_layout { int64_t outer, n, inner; } sm_layout;

static qr_status softmax_layout(qr_kctx *k, sm_layout *l)
{
    const qr_tensor *x = k->in[0];
    int new_rule = k->opset >= 13;
    int axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", new_rule ? -1 : 1), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    if (x->ndim == 0) {
        *l = (sm_layout){1, 1, 1};
        return QR_OK;
    }
    l->outer = qr_dims_prod(x->dims, 0, axis);
    l->n = new_rule ? x->dims[axis] : qr_dims_prod(x->dims, axis, x->ndim);
    l->inner = new_rule ? qr_dims_prod(x->dims, axis + 1, x->ndim) : 1;
    return QR_OK;
}

static qr_status softmax_infer(qr_kctx *k)
{
    sm_layout l;
    if (need_inputs(k, 1) != QR_OK || need_float(k, k->in[0], "the input") != QR_OK || softmax_layout(k, &l) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* Rows of a last-axis f32 softmax on an f32_rows.h kernel, in parallel. */
typedef struct sm_rows_job {
    const qr_f32_rows *fr;
    const float *x;
    float *y;
    int64_t n;
} sm_rows_job;

static void sm_rows(void *arg, int64_t r0, int64_t r1)
{
    const sm_rows_job *j = arg;
    j->fr->softmax(j->x + r0 * j->n, j->y + r0 * j->n, r1 - r0, j->n);
}

static qr_status softmax_common(qr_kctx *k, int log_out)
{
    sm_layout l;
    if (softmax_layout(k, &l) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    qr_dtype t = x->dtype;
    /* LogSoftmax keeps the double loop: f32 exps' error grows in log(sum) near 0 */
    const qr_f32_rows *fr = t == QR_F32 && l.inner == 1 && !log_out ? qr_f32_rows_best() : NULL;
    if (fr) {
        sm_rows_job j = {fr, x->data, y->data, l.n};
        int64_t grain = l.n >= 4096 ? 1 : 4096 / (l.n ? l.n : 1);
        qr_parallel_for(k->pool, l.outer, grain, sm_rows, &j);
        return QR_OK;
    }
    for (int64_t o = 0; o < l.outer; o++) {
        for (int64_t in = 0; in < l.inner; in++) {
            int64_t base = o * l.n * l.inner + in, s = l.inner;
            /* Subtracting the max keeps exp() from overflowing. */
            double mx = -INFINITY;
            for (int64_t i = 0; i < l.n; i++) {
                double v = qr_ld(x->data, t, base + i * s);
                if (v > mx || isnan(v))
                    mx = v;
            }
            double sum = 0;
            for (int64_t i = 0; i < l.n; i++)
                sum += exp(qr_ld(x->data, t, base + i * s) - mx);
            double lsum = log(sum);
            for (int64_t i = 0; i < l.n; i++) {
                double d = qr_ld(x->data, t, base + i * s) - mx;
                qr_st(y->data, t, base + i * s, log_out ? d - lsum : exp(d) / sum);
            }
        }
    }
    return QR_OK;
}

static qr_status softmax_run(qr_kctx *k) { return softmax_common(k, 0); }
static qr_status logsoftmax_run(qr_kctx *k) { return softmax_common(k, 1); }

/* ---- BatchNormalization -------------------------------------------------- */

/* Scale, B, mean and var hold one value per channel, or (opsets before 9 with
 * spatial=0) one per channel and spatial position. */
static qr_status bn_infer(qr_kctx *k)
{
    if (need_inputs(k, 5) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (qr_attr_i(k->node, "training_mode", 0) != 0)
        return QR_KERR(k, "training_mode=1 is not supported: this runtime only runs inference");
    if (x->ndim < 2)
        return QR_KERR(k, "input must have rank >= 2 (N x C x ...), got rank %d", x->ndim);
    if (need_float(k, x, "the input") != QR_OK)
        return QR_ERR;
    int64_t c = x->dims[1], per_elem = c * qr_dims_prod(x->dims, 2, x->ndim);
    static const char *const names[] = {"", "scale", "B", "mean", "var"};
    for (int i = 1; i < 5; i++) {
        const qr_tensor *p = k->in[i];
        if (need_float(k, p, names[i]) != QR_OK)
            return QR_ERR;
        int64_t np = qr_tensor_numel(p);
        if ((np != c && np != per_elem) || np != qr_tensor_numel(k->in[1]))
            return QR_KERR(k, "'%s' has %lld elements, expected one per channel (%lld)", names[i], (long long)np,
                           (long long)c);
    }
    qr_same_as(k->out[0], x);
    /* Older opsets list running/saved mean and var outputs; in inference they are the inputs. */
    for (int j = 1; j < k->n_out; j++)
        qr_same_as(k->out[j], k->in[j % 2 ? 3 : 4]);
    return QR_OK;
}

static qr_status bn_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *sc = k->in[1], *bias = k->in[2], *mean = k->in[3], *var = k->in[4];
    qr_tensor *y = k->out[0];
    double eps = qr_attr_f(k->node, "epsilon", 1e-5f);
    int64_t n = x->dims[0], c = x->dims[1], inner = qr_dims_prod(x->dims, 2, x->ndim);
    int64_t np = qr_tensor_numel(sc);
    int per_elem = np != c; /* infer checked np is c or c*inner */
    /* y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a. */
    double *ab = malloc(sizeof(double) * (size_t)(2 * np + 1));
    if (!ab)
        return QR_KERR(k, "out of memory");
    for (int64_t i = 0; i < np; i++) {
        double a = qr_get_f64(sc->data, sc->dtype, i) / sqrt(qr_get_f64(var->data, var->dtype, i) + eps);
        ab[2 * i] = a;
        ab[2 * i + 1] = qr_get_f64(bias->data, bias->dtype, i) - qr_get_f64(mean->data, mean->dtype, i) * a;
    }
    for (int64_t b = 0; b < n; b++) {
        for (int64_t ch = 0; ch < c; ch++) {
            int64_t base = (b * c + ch) * inner;
            for (int64_t i = 0; i < inner; i++) {
                int64_t p = per_elem ? ch * inner + i : ch;
                qr_st(y->data, y->dtype, base + i, qr_ld(x->data, x->dtype, base + i) * ab[2 * p] + ab[2 * p + 1]);
            }
        }
    }
    free(ab);
    for (int j = 1; j < k->n_out; j++) {
        const qr_tensor *src = k->in[j % 2 ? 3 : 4];
        memcpy(k->out[j]->data, src->data, qr_tensor_nbytes(src));
    }
    return QR_OK;
}

/* ---- LayerNormalization -------------------------------------------------- */

/* t broadcasts to x's shape in one direction (numpy rules, t never grows x). */
static int broadcasts_to(const qr_tensor *t, const qr_tensor *x)
{
    if (t->ndim > x->ndim)
        return 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t a = t->dims[d], b = x->dims[x->ndim - t->ndim + d];
        if (a != b && a != 1)
            return 0;
    }
    return 1;
}

static qr_status ln_infer(qr_kctx *k)
{
    if (need_inputs(k, 2) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *sc = k->in[1], *bias = k->n_in > 2 ? k->in[2] : NULL;
    int axis;
    if (need_float(k, x, "X") != QR_OK || qr_norm_axis(k, qr_attr_i(k->node, "axis", -1), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    if (x->ndim == 0)
        return QR_KERR(k, "X must have rank >= 1");
    const qr_tensor *params[2] = {sc, bias};
    for (int i = 0; i < 2; i++) {
        const qr_tensor *p = params[i];
        if (!p)
            continue;
        if (need_float(k, p, i ? "B" : "Scale") != QR_OK)
            return QR_ERR;
        if (!broadcasts_to(p, x)) {
            char b1[128], b2[128];
            return QR_KERR(k, "%s of shape %s does not broadcast to X's shape %s", i ? "B" : "Scale",
                           qr_tensor_type_str(p, b1, sizeof b1), qr_tensor_type_str(x, b2, sizeof b2));
        }
    }
    int64_t stash = qr_attr_i(k->node, "stash_type", 1);
    qr_dtype u = qr_dtype_from_onnx((int)stash);
    if (stash != (int)stash || !qr_dtype_is_float(u))
        return QR_KERR(k, "stash_type %lld is not a supported float type", (long long)stash);
    qr_same_as(k->out[0], x);
    /* Mean and InvStdDev keep X's leading dims and have 1 in the normalized ones. */
    for (int j = 1; j < k->n_out && j < 3; j++) {
        k->out[j]->dtype = u;
        k->out[j]->ndim = x->ndim;
        for (int d = 0; d < x->ndim; d++)
            k->out[j]->dims[d] = d < axis ? x->dims[d] : 1;
    }
    return QR_OK;
}

/* Rows of an f32 LayerNormalization on an f32_rows.h kernel, in parallel. */
typedef struct ln_rows_job {
    const qr_f32_rows *fr;
    const float *x;
    float *y;
    int64_t n;
    const float *scale, *bias;
    double eps;
    float *mean, *inv;
} ln_rows_job;

static void ln_rows(void *arg, int64_t r0, int64_t r1)
{
    const ln_rows_job *j = arg;
    j->fr->layernorm(j->x + r0 * j->n, j->y + r0 * j->n, r1 - r0, j->n, j->scale, j->bias, j->eps,
                     j->mean ? j->mean + r0 : NULL, j->inv ? j->inv + r0 : NULL);
}

static qr_status ln_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *sc = k->in[1], *bias = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    int axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", -1), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    double eps = qr_attr_f(k->node, "epsilon", 1e-5f);
    int64_t outer = qr_dims_prod(x->dims, 0, axis), inner = qr_dims_prod(x->dims, axis, x->ndim);
    qr_dtype t = x->dtype;
    const qr_f32_rows *fr = qr_f32_rows_best();
    if (fr && t == QR_F32 && sc->dtype == QR_F32 && qr_tensor_numel(sc) == inner && (!bias || (bias->dtype == QR_F32 &&
        qr_tensor_numel(bias) == inner)) && (k->n_out < 2 || k->out[1]->dtype == QR_F32) &&
        (k->n_out < 3 || k->out[2]->dtype == QR_F32)) {
        /* Scale and B of the normalized shape (no broadcast within it): contiguous rows */
        ln_rows_job j = {fr, x->data, y->data, inner, sc->data, bias ? bias->data : NULL, eps,
                         k->n_out > 1 ? k->out[1]->data : NULL, k->n_out > 2 ? k->out[2]->data : NULL};
        int64_t grain = inner >= 4096 ? 1 : 4096 / (inner ? inner : 1);
        qr_parallel_for(k->pool, outer, grain, ln_rows, &j);
        return QR_OK;
    }
    /* One iterator walks X in order and tracks where Scale and B are read. */
    qr_iter it;
    qr_iter_init(&it, x, 2);
    qr_broadcast_strides(sc, x, it.stride[0]);
    if (bias)
        qr_broadcast_strides(bias, x, it.stride[1]);
    for (int64_t o = 0; o < outer; o++) {
        int64_t base = o * inner;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++)
            mean += qr_ld(x->data, t, base + i);
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++) {
            double d = qr_ld(x->data, t, base + i) - mean;
            var += d * d;
        }
        var /= (double)inner;
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < inner; i++, qr_iter_next(&it)) {
            double v = (qr_ld(x->data, t, base + i) - mean) * inv * qr_ld(sc->data, sc->dtype, it.off[0]);
            if (bias)
                v += qr_ld(bias->data, bias->dtype, it.off[1]);
            qr_st(y->data, t, base + i, v);
        }
        if (k->n_out > 1)
            qr_st(k->out[1]->data, k->out[1]->dtype, o, mean);
        if (k->n_out > 2)
            qr_st(k->out[2]->data, k->out[2]->dtype, o, inv);
    }
    return QR_OK;
}

/* ---- InstanceNormalization ----------------------------------------------- */

static qr_status in_infer(qr_kctx *k)
{
    if (need_inputs(k, 3) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (x->ndim < 2)
        return QR_KERR(k, "input must have rank >= 2 (N x C x ...), got rank %d", x->ndim);
    if (need_float(k, x, "the input") != QR_OK)
        return QR_ERR;
    for (int i = 1; i < 3; i++) {
        const qr_tensor *p = k->in[i];
        if (need_float(k, p, i == 1 ? "scale" : "B") != QR_OK)
            return QR_ERR;
        if (qr_tensor_numel(p) != x->dims[1])
            return QR_KERR(k, "'%s' has %lld elements, expected one per channel (%lld)", i == 1 ? "scale" : "B",
                           (long long)qr_tensor_numel(p), (long long)x->dims[1]);
    }
    qr_same_as(k->out[0], x);
    return QR_OK;
}

static qr_status in_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *sc = k->in[1], *bias = k->in[2];
    qr_tensor *y = k->out[0];
    double eps = qr_attr_f(k->node, "epsilon", 1e-5f);
    int64_t c = x->dims[1], inner = qr_dims_prod(x->dims, 2, x->ndim), planes = x->dims[0] * c;
    qr_dtype t = x->dtype;
    for (int64_t p = 0; p < planes; p++) {
        int64_t base = p * inner;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++)
            mean += qr_ld(x->data, t, base + i);
        mean /= (double)(inner ? inner : 1);
        for (int64_t i = 0; i < inner; i++) {
            double d = qr_ld(x->data, t, base + i) - mean;
            var += d * d;
        }
        var /= (double)(inner ? inner : 1);
        double a = qr_get_f64(sc->data, sc->dtype, p % c) / sqrt(var + eps);
        double b = qr_get_f64(bias->data, bias->dtype, p % c);
        for (int64_t i = 0; i < inner; i++)
            qr_st(y->data, t, base + i, (qr_ld(x->data, t, base + i) - mean) * a + b);
    }
    return QR_OK;
}

/* qr_op_def.samples: A [N, K] row by row (its rows' sums do not depend on the others), B and a
 * bias C of at most one row read whole */
static int gemm_samples(const qr_node *n, int j)
{
    const qr_value *a = n->in[0], *c = n->n_in > 2 ? n->in[2] : NULL;
    if (qr_attr_i(n, "transA", 0) != 0 || a->t.ndim != 2 ||
        (c && c->t.ndim > 1 && !(c->t.ndim == 2 && c->t.dims[0] == 1)))
        return QR_SAMPLES_MIXED;
    return j == 0 ? QR_SAMPLES_EACH : QR_SAMPLES_WHOLE;
}

const qr_op_def qr_ops_dense[] = {
    {"Gemm", "", 2, 3, 1, 1, "alpha:f beta:f transA:i transB:i broadcast:i", gemm_infer, gemm_run, 0, .ins = "A:2 B:2 C?",
     .writes_all = qr_op_writes_all, .samples = gemm_samples},
    {"MatMul", "", 2, 2, 1, 1, "", matmul_infer, matmul_run, 0, .ins = "A:1+ B:1+",
     .writes_all = qr_op_writes_all, .bias = 1},
    /* in place: every pass reads a group before its last pass writes it, element by element (the
     * scores' buffer is written over instead of a fresh one: 2 MB a layer of bert at batch 8) */
    {"Softmax", "", 1, 1, 1, 1, "axis:i", softmax_infer, softmax_run, 1, .ins = "input", .writes_all = qr_op_writes_all},
    {"LogSoftmax", "", 1, 1, 1, 1, "axis:i", softmax_infer, logsoftmax_run, 1, .ins = "input",
     .writes_all = qr_op_writes_all},
    {"BatchNormalization", "", 5, 5, 1, 5,
     "epsilon:f momentum:f spatial:i is_test:i training_mode:i consumed_inputs:ints", bn_infer, bn_run, 0, .ins = "X scale B input_mean input_var"},
    {"LayerNormalization", "", 2, 3, 1, 3, "axis:i epsilon:f stash_type:i", ln_infer, ln_run, 0, .ins = "X:1+ Scale B?",
     .writes_all = qr_op_writes_all},
    {"InstanceNormalization", "", 3, 3, 1, 1, "epsilon:f", in_infer, in_run, 0, .ins = "input scale:1 B:1"},
    {0},
};
