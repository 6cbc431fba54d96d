/* The u8s8 GEMM with AVX2 and no VNNI: four u8 activations and four s8 weights
 * widened to i16, then vpmaddwd: each product is at most 255 * 128 in
 * magnitude and a pair's sum fits i16 x i16 -> i32 exactly (vpmaddubsw would
 * saturate the pair at 32767: 2 * 255 * 127 does not fit). The two pair sums
 * of a column stay in neighbouring lanes until the tile is stored (int32 adds
 * wrap, so the order of the adds does not change the sum modulo 2^32). Tile:
 * 6 weight rows x 8 columns (12 accumulators), the last rows in tiles of 3:
 * 6 rows share each widening of the columns (ResNet-18's 3 x 3 layers as
 * GEMMs, 1 thread, Zen 3: 36-41 GMAC/s against 31-36 with 4 rows). Only
 * called when the CPU reports avx2 (igemm.c).
 *
 * qr_igemm_i16s8_6x8_avx2 reads the rows (the constant weights, quant.c packs
 * them once) widened to i16 beforehand: a row's four weights are then one
 * broadcast load, the widenings (6 of every 8 in a step) gone. */
#include <immintrin.h>
#include <string.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx2")))
#define INLINE TARGET static inline __attribute__((always_inline))

/* The four s8 weights at p as i16, repeated across the register. */
INLINE __m256i weights4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_cvtepi8_epi16(_mm_set1_epi32(v));
}

/* The four i16 weights at p, repeated across the register. */
INLINE __m256i weights4_wide(const int16_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

/* Columns 0-3 in lo and 4-7 in hi, each column as two pair sums: the eight column sums in order. */
INLINE __m256i fold(__m256i lo, __m256i hi)
{
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xd8);
}

INLINE void store(int32_t *c, __m256i v, int64_t cols)
{
    if (cols >= 8) {
        _mm256_storeu_si256((__m256i *)c, v);
        return;
    }
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    for (int64_t i = 0; i < cols; i++)
        c[i] = t[i];
}

/* Rows [m, m + rows) (rows <= MR; a short tile repeats row m, not stored) x 8 columns from bj; a
 * s8 rows, or with WIDE i16 rows. */
INLINE void tile(int32_t *c, int64_t c_rs, const void *a, const int32_t *init, int64_t m, int rows,
                 const uint8_t *bj, int64_t k4, int64_t n16, int64_t cols, const int MR, const int WIDE)
{
    const void *ar[6];
    #pragma GCC unroll 6 /* the tile stays in registers */
    for (int r = 0; r < MR; r++)
        ar[r] = WIDE ? (const void *)((const int16_t *)a + (m + (r < rows ? r : 0)) * k4)
                     : (const void *)((const int8_t *)a + (m + (r < rows ? r : 0)) * k4);
    __m256i lo[6], hi[6];
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        lo[r] = hi[r] = _mm256_setzero_si256();
    for (int64_t q = 0; q < k4 / 4; q++) {
        const uint8_t *bq = bj + q * n16 * 4;
        __m256i vlo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)bq));
        __m256i vhi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(bq + 16)));
        #pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            __m256i w = WIDE ? weights4_wide((const int16_t *)ar[r] + 4 * q) : weights4((const int8_t *)ar[r] + 4 * q);
            lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(vlo, w));
            hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(vhi, w));
        }
    }
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        if (r < rows)
            store(c + (m + r) * c_rs, _mm256_add_epi32(fold(lo[r], hi[r]), _mm256_set1_epi32(init[m + r])), cols);
}

#define SHAPES(WIDE, T6, T3)                                                                                      \
    TARGET static void T6(int32_t *c, int64_t c_rs, const void *a, const int32_t *init, int64_t m,              \
                          const uint8_t *bj, int64_t k4, int64_t n16, int64_t cols)                             \
    {                                                                                                          \
        tile(c, c_rs, a, init, m, 6, bj, k4, n16, cols, 6, WIDE);                                              \
    }                                                                                                          \
    TARGET static void T3(int32_t *c, int64_t c_rs, const void *a, const int32_t *init, int64_t m, int rows,    \
                          const uint8_t *bj, int64_t k4, int64_t n16, int64_t cols)                             \
    {                                                                                                          \
        tile(c, c_rs, a, init, m, rows, bj, k4, n16, cols, 3, WIDE);                                           \
    }
SHAPES(0, tile_6, tile_3)
SHAPES(1, tile_6_wide, tile_3_wide)

/* Every column block of rows [m0, m1): tiles of 6 rows, then of 3 (t6, t3). */
#define GEMM(T6, T3)                                                                                               \
    int64_t n16 = qr_igemm_n16(n);                                                                              \
    for (int64_t j = 0; j < n; j += 8) {                                                                        \
        const uint8_t *bj = b + j * 4;                                                                          \
        int64_t m = m0;                                                                                         \
        for (; m + 6 <= m1; m += 6)                                                                             \
            T6(c + j, c_rs, a, init, m, bj, k4, n16, n - j);                                                    \
        for (; m < m1; m += 3)                                                                                  \
            T3(c + j, c_rs, a, init, m, m1 - m < 3 ? (int)(m1 - m) : 3, bj, k4, n16, n - j);                    \
    }

TARGET void qr_igemm_u8s8_6x8_avx2(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                   int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    GEMM(tile_6, tile_3)
}

TARGET void qr_igemm_i16s8_6x8_avx2(int32_t *c, int64_t c_rs, const int16_t *a, const int32_t *init, int64_t m0,
                                    int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    GEMM(tile_6_wide, tile_3_wide)
}
