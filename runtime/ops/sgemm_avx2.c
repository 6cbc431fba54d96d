/* The f32 GEMM tile with AVX2 and FMA: up to 6 rows x 16 columns in 12 ymm sums (of the 16
 * registers, two hold B and one the broadcast); one copy of the loop per row count. Only called
 * when the CPU reports avx2 and fma (sgemm.c). */
#include <immintrin.h>

#include "sgemm.h"

#include "op.h"

#define TARGET __attribute__((target("avx2,fma")))

/* The activation (op.h's qr_act_apply) on 8 sums: ordered compares, so NaN stays. */
TARGET static inline __m256 act_ymm(const qr_act *a, __m256 v)
{
    if (a->relu) {
        __m256 zero = _mm256_setzero_ps();
        return _mm256_blendv_ps(v, zero, _mm256_cmp_ps(v, zero, _CMP_LE_OQ));
    }
    __m256 lo = _mm256_set1_ps(a->lo), hi = _mm256_set1_ps(a->hi);
    v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define ZERO(r) __m256 l##r = _mm256_setzero_ps(), h##r = l##r;
#define FMA(r)                                                                                               \
    if (r < R) {                                                                                             \
        __m256 w = _mm256_broadcast_ss(ap + q * acs + r * ars);                                                      \
        l##r = _mm256_fmadd_ps(w, b0, l##r);                                                                 \
        h##r = _mm256_fmadd_ps(w, b1, h##r);                                                                 \
    }
/* Full tiles load and store in place; partial ones go through t (16 columns a row). */
#define LOAD(r)                                                                                              \
    if (r < R) {                                                                                             \
        if (cols == 16) {                                                                                    \
            l##r = _mm256_loadu_ps(c + r * ldc);                                                             \
            h##r = _mm256_loadu_ps(c + r * ldc + 8);                                                         \
        } else {                                                                                             \
            float t[16] = {0};                                                                               \
            for (int x = 0; x < cols; x++)                                                                   \
                t[x] = c[r * ldc + x];                                                                       \
            l##r = _mm256_loadu_ps(t);                                                                       \
            h##r = _mm256_loadu_ps(t + 8);                                                                   \
        }                                                                                                    \
    }
#define STORE(r)                                                                                             \
    if (r < R) {                                                                                             \
        if (bias) {                                                                                          \
            __m256 bv = _mm256_set1_ps(bias[r]);                                                             \
            l##r = _mm256_add_ps(l##r, bv);                                                                  \
            h##r = _mm256_add_ps(h##r, bv);                                                                  \
        }                                                                                                    \
        if (act) {                                                                                           \
            l##r = act_ymm(act, l##r);                                                                       \
            h##r = act_ymm(act, h##r);                                                                       \
        }                                                                                                    \
        if (cols == 16) {                                                                                    \
            _mm256_storeu_ps(c + r * ldc, l##r);                                                             \
            _mm256_storeu_ps(c + r * ldc + 8, h##r);                                                         \
        } else {                                                                                             \
            float t[16];                                                                                     \
            _mm256_storeu_ps(t, l##r);                                                                       \
            _mm256_storeu_ps(t + 8, h##r);                                                                   \
            for (int x = 0; x < cols; x++)                                                                   \
                c[r * ldc + x] = t[x];                                                                       \
        }                                                                                                    \
    }

/* R rows (a constant in each copy); B's columns past cols are not read (masked loads on a short
 * tile), so B may be read in place. */
TARGET static inline __attribute__((always_inline)) void tile(const int R, const float *ap, int64_t ars,
                                                              int64_t acs, const float *bp, const int64_t *boff,
                                                              int64_t kc, float *c, int64_t ldc, int cols,
                                                              int load_c, const float *bias, const qr_act *act)
{
    ROWS(ZERO)
    if (load_c) {
        ROWS(LOAD)
    }
    /* boff NULL: a packed panel, row q at bp + q * 16 (a copy of each loop: no test a k) */
    if (cols == 16 && boff)
        for (int64_t q = 0; q < kc; q++) {
            __m256 b0 = _mm256_loadu_ps(bp + boff[q]), b1 = _mm256_loadu_ps(bp + boff[q] + 8);
            ROWS(FMA)
        }
    else if (cols == 16)
        for (int64_t q = 0; q < kc; q++) {
            __m256 b0 = _mm256_loadu_ps(bp + q * 16), b1 = _mm256_loadu_ps(bp + q * 16 + 8);
            ROWS(FMA)
        }
    else {
        __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
        __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
        for (int64_t q = 0; q < kc; q++) {
            const float *bq = boff ? bp + boff[q] : bp + q * 16;
            __m256 b0 = _mm256_maskload_ps(bq, m0), b1 = _mm256_maskload_ps(bq + 8, m1);
            ROWS(FMA)
        }
    }
    ROWS(STORE)
}

#define CASE(r)                                                                                              \
    case r + 1:                                                                                              \
        tile(r + 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act);                               \
        break;

TARGET void qr_sgemm_tile_6x16_avx2(const float *ap, int64_t ars, int64_t acs, const float *bp,
                                    const int64_t *boff, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                                    int load_c, const float *bias, const qr_act *act)
{
    switch (rows) {
        ROWS(CASE)
    default:
        break;
    }
}
