/* The f32 GEMM tile with AVX-512: up to 12 rows x 32 columns in 24 zmm sums, enough independent
 * FMA chains for CPUs that issue two a cycle with four cycles' latency (Zen 5); per k, two loads
 * of B serve the rows' broadcasts of A. One copy of the loop per row count, so a short
 * tile does only its rows' FMAs. Only called when the CPU reports avx512f (sgemm.c). */
#include <immintrin.h>

#include "sgemm.h"

#define TARGET __attribute__((target("avx512f,fma")))

static inline __mmask16 cols_mask(int cols)
{
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
}

/* The sums are named registers: an array of them made GCC copy registers (igemm_avx512vnni.c). */
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ZERO(r) __m512 l##r = _mm512_setzero_ps(), h##r = l##r;
#define LOAD(r)                                                                                              \
    if (r < R) {                                                                                             \
        l##r = _mm512_maskz_loadu_ps(k0, c + r * ldc);                                                       \
        h##r = _mm512_maskz_loadu_ps(k1, c + r * ldc + 16);                                                  \
    }
#define FMA(r)                                                                                               \
    if (r < R) {                                                                                             \
        __m512 w = _mm512_set1_ps(ap[q * acs + r * ars]);                                                           \
        l##r = _mm512_fmadd_ps(w, b0, l##r);                                                                 \
        h##r = _mm512_fmadd_ps(w, b1, h##r);                                                                 \
    }
#define STORE(r)                                                                                             \
    if (r < R) {                                                                                             \
        if (bias) {                                                                                          \
            __m512 bv = _mm512_set1_ps(bias[r]);                                                             \
            l##r = _mm512_add_ps(l##r, bv);                                                                  \
            h##r = _mm512_add_ps(h##r, bv);                                                                  \
        }                                                                                                    \
        _mm512_mask_storeu_ps(c + r * ldc, k0, l##r);                                                        \
        _mm512_mask_storeu_ps(c + r * ldc + 16, k1, h##r);                                                   \
    }

/* R rows (a constant in each copy); B's columns past cols are not read (masked loads unless the
 * tile is full, F), so B may be read in place. */
TARGET static inline __attribute__((always_inline)) void tile(const int R, const int F, const float *ap, int64_t ars,
                                                              int64_t acs, const float *bp, const int64_t *boff, int64_t kc,
                                                              float *c, int64_t ldc, int cols, int load_c,
                                                              const float *bias)
{
    __mmask16 k0 = cols_mask(cols), k1 = cols_mask(cols - 16);
    ROWS(ZERO)
    if (load_c) {
        ROWS(LOAD)
    }
    for (int64_t q = 0; q < kc; q++) {
        const float *bq = bp + boff[q];
        __m512 b0 = F ? _mm512_loadu_ps(bq) : _mm512_maskz_loadu_ps(k0, bq);
        __m512 b1 = F ? _mm512_loadu_ps(bq + 16) : _mm512_maskz_loadu_ps(k1, bq + 16);
        ROWS(FMA)
    }
    ROWS(STORE)
}

#define CASE(r)                                                                                              \
    case r + 1:                                                                                              \
        if (cols == 32)                                                                                      \
            tile(r + 1, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias);                          \
        else                                                                                                 \
            tile(r + 1, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias);                          \
        break;

TARGET void qr_sgemm_tile_12x32_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp,
                                       const int64_t *boff, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                                       int load_c, const float *bias)
{
    switch (rows) {
        ROWS(CASE)
    default:
        break;
    }
}
