#include "gram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sgemm.h"

void qr_gram_gemm(qr_pool *pool, const float *a, int64_t a_rs, int64_t a_cs, const float *b, float *c, int64_t m,
                  int64_t n, int64_t k)
{
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    if (!kn)
        kn = qr_sgemm_isa("ref");
    float *work = malloc(sizeof *work * (size_t)(qr_sgemm_work(kn) * qr_pool_threads(pool) + 1));
    if (!work) { /* out of memory for the panels: the same sums, slowly */
        for (int64_t r = 0; r < m; r++)
            for (int64_t x = 0; x < n; x++) {
                float s = 0;
                for (int64_t q = 0; q < k; q++)
                    s = fmaf(a[r * a_rs + q * a_cs], b[q * n + x], s);
                c[r * n + x] = s;
            }
        return;
    }
    qr_sgemm_job j = {.a = a, .b = b, .c = c, .a_rs = a_rs, .a_cs = a_cs, .ldb = n, .ldc = n, .m = m, .n = n, .k = k};
    qr_sgemm(pool, kn, &j, work);
    free(work);
}

void qr_gram_xtx(qr_pool *pool, const float *x, int64_t rows, int64_t k, float *out)
{
    if (rows <= 0) {
        memset(out, 0, sizeof *out * (size_t)(k * k));
        return;
    }
    qr_gram_gemm(pool, x, 1, k, x, out, k, k, rows); /* a(i, r) = x[r][i]: X^T */
}

/* Rows summed in f32 before the f64 total: few enough that a block's sums stay near f32's precision. */
#define GRAM_BLOCK_ROWS 256

qr_status qr_gram_add(qr_gram *g, const float *x, int64_t numel, int64_t k, qr_error *e)
{
    if (k <= 0 || numel % k)
        return qr_errorf(e, "gram: %lld values are not rows of %lld", (long long)numel, (long long)k);
    if (g->k && g->k != k)
        return qr_errorf(e, "gram: rows of %lld values after rows of %lld", (long long)k, (long long)g->k);
    if (!g->k) {
        if (k > 46340) /* k * k doubles past 16 GB */
            return qr_errorf(e, "gram: %lld columns are too many for a %lld x %lld matrix", (long long)k,
                             (long long)k, (long long)k);
        g->h = calloc((size_t)(k * k), sizeof *g->h);
        g->tmp = malloc(sizeof *g->tmp * (size_t)(k * k));
        if (!g->h || !g->tmp) {
            qr_gram_free(g);
            return qr_errorf(e, "out of memory for a %lld x %lld gram", (long long)k, (long long)k);
        }
        g->k = k;
    }
    int64_t rows = numel / k;
    for (int64_t r0 = 0; r0 < rows; r0 += GRAM_BLOCK_ROWS) {
        int64_t n = rows - r0 < GRAM_BLOCK_ROWS ? rows - r0 : GRAM_BLOCK_ROWS;
        qr_gram_xtx(NULL, x + r0 * k, n, k, g->tmp);
        for (int64_t i = 0; i < k * k; i++)
            g->h[i] += g->tmp[i];
    }
    g->rows += (double)rows;
    return QR_OK;
}

qr_status qr_gram_merge(qr_gram *g, const qr_gram *o, qr_error *e)
{
    if (!o->k)
        return QR_OK;
    if (!g->k) {
        g->h = calloc((size_t)(o->k * o->k), sizeof *g->h);
        g->tmp = malloc(sizeof *g->tmp * (size_t)(o->k * o->k));
        if (!g->h || !g->tmp) {
            qr_gram_free(g);
            return qr_errorf(e, "out of memory");
        }
        g->k = o->k;
    }
    if (g->k != o->k)
        return qr_errorf(e, "gram: merging %lld columns into %lld", (long long)o->k, (long long)g->k);
    for (int64_t i = 0; i < g->k * g->k; i++)
        g->h[i] += o->h[i];
    g->rows += o->rows;
    return QR_OK;
}

void qr_gram_free(qr_gram *g)
{
    free(g->h);
    free(g->tmp);
    memset(g, 0, sizeof *g);
}

/* The dot product of a and b (n doubles) in four interleaved sums, so the loop is not one chain of
 * dependent adds (the sums, then their total, in a fixed order: the same bits every run). */
static double dot4(const double *a, const double *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t p = 0;
    for (; p + 4 <= n; p += 4) {
        s0 += a[p] * b[p];
        s1 += a[p + 1] * b[p + 1];
        s2 += a[p + 2] * b[p + 2];
        s3 += a[p + 3] * b[p + 3];
    }
    for (; p < n; p++)
        s0 += a[p] * b[p];
    return (s0 + s1) + (s2 + s3);
}

/* a (n x n, row-major) = l l^T, l lower triangular, in place (the upper part zeroed); 0 when a is
 * not positive definite. */
static int cholesky_lower(double *a, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j] - dot4(a + j * n, a + j * n, j);
        if (!(d > 0) || !isfinite(d))
            return 0;
        d = sqrt(d);
        a[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++)
            a[i * n + j] = (a[i * n + j] - dot4(a + i * n, a + j * n, j)) / d;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++)
            a[i * n + j] = 0;
    return 1;
}

qr_status qr_gram_inverse_factor(const qr_gram *g, double c, double lambda, double *u, qr_error *e)
{
    int64_t n = g->k;
    if (n <= 0)
        return qr_errorf(e, "gram: nothing was observed (no rows reached the layer)");
    if (!isfinite(lambda) || lambda < 0)
        return qr_errorf(e, "gram: damping %g is not a finite number >= 0", lambda);
    if (!isfinite(c) || !(c > 0))
        return qr_errorf(e, "gram: scale %g is not a positive finite number", c);
    double *a = malloc(sizeof *a * (size_t)(n * n)), *li = calloc((size_t)(n * n), sizeof *li);
    if (!a || !li) {
        free(a);
        free(li);
        return qr_errorf(e, "out of memory for a %lld x %lld inverse", (long long)n, (long long)n);
    }
    for (int64_t i = 0; i < n * n; i++)
        a[i] = c * g->h[i];
    for (int64_t i = 0; i < n; i++)
        a[i * n + i] = (a[i * n + i] == 0 ? 1 : a[i * n + i]) + lambda;
    qr_status st = QR_OK;
    if (!cholesky_lower(a, n)) {
        st = qr_errorf(e, "gram: %g H + %g I is not positive definite (raise the damping)", c, lambda);
        goto done;
    }
    /* li = l^-1 (lower), row by row: row i = -(sum over p < i of l[i][p] li[p]) / l[i][i], plus
     * 1 / l[i][i] on the diagonal; rows added whole, so the inner loops run along rows */
    for (int64_t i = 0; i < n; i++) {
        double *ri = li + i * n;
        for (int64_t p = 0; p < i; p++) {
            const double f = a[i * n + p], *rp = li + p * n;
            for (int64_t c = 0; c <= p; c++)
                ri[c] -= f * rp[c];
        }
        const double d = a[i * n + i];
        for (int64_t c = 0; c < i; c++)
            ri[c] /= d;
        ri[i] = 1 / d;
    }
    /* A^-1 = li^T li = sum over rows p of li[p]^T li[p] (row p is 0 past p), into a */
    memset(a, 0, sizeof *a * (size_t)(n * n));
    for (int64_t p = 0; p < n; p++) {
        const double *rp = li + p * n;
        for (int64_t i = 0; i <= p; i++) {
            const double f = rp[i];
            double *ai = a + i * n;
            for (int64_t j = 0; j <= p; j++)
                ai[j] += f * rp[j];
        }
    }
    /* u = chol(A^-1)^T: upper with u^T u = A^-1 */
    if (!cholesky_lower(a, n)) {
        st = qr_errorf(e, "gram: the inverse of %g H + %g I is not positive definite in floating point (raise the "
                          "damping)", c, lambda);
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            u[i * n + j] = j >= i ? a[j * n + i] : 0;
done:
    free(a);
    free(li);
    return st;
}
