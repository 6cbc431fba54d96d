/* The NHWC indirect GEMM (qr_iconv_fn, igemm.h) with AVX2 and no VNNI: eight
 * columns of four s8 weights widened to i16 (columns 0-3 in one register,
 * 4-7 in another), four u8 activations of one pixel widened to i16 and
 * repeated, then vpmaddwd: each product is at most 255 * 128 in magnitude and
 * a pair's sum fits i16 x i16 -> i32 exactly (vpmaddubsw would saturate the
 * pair at 32767: 2 * 255 * 127 does not fit). A column's two pair sums stay
 * in neighbouring lanes until the tile is stored (int32 adds wrap, so the
 * order of the adds does not change the sum modulo 2^32). Tile: 6 rows x 8
 * columns (12 accumulators, the two weight registers and an activation: 15 of
 * the 16 ymm), ragged last rows in tiles of 4, 2 and 1: 6 rows convert the
 * weights for 12 vpmaddwd, 4 rows for 8, and an activation is one broadcast
 * load and one widening, not a load, a widening and a broadcast (ResNet-18's
 * 3 x 3 layers alone, 1 thread, Zen 3: 40-43 GMAC/s against 33-37 with 4
 * rows). Only called when the CPU reports avx2 (igemm.c).
 *
 * qr_iconv_i16s8_6x8_avx2 reads activations widened to i16 beforehand (the
 * input image once per call, iconv_nhwc.c): an activation is then one
 * broadcast load, no widening, and the widenings were the bound, not vpmaddwd
 * (two a cycle on Zen 3, as f32 FMA: measured 62-66 against 39-42 GMAC/s on
 * ResNet-18's 3 x 3 layers, 1 thread, a standalone copy of the tile). */
#include <immintrin.h>
#include <string.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx2")))
#define INLINE TARGET static inline __attribute__((always_inline))

/* The four u8 activations at p as i16, repeated across the register. */
INLINE __m256i acts4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_cvtepu8_epi16(_mm_set1_epi32(v));
}

/* The four i16 activations at p, repeated across the register. */
INLINE __m256i acts4_wide(const int16_t *p)
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

/* MR rows x 8 columns, cols of them stored; MR and WIDE constants where inlined. a: u8 rows, or
 * with WIDE i16 rows (as const int16_t *). */
INLINE void tile(int32_t *c, int64_t c_rs, const void *const *a, int64_t taps, const int8_t *wj,
                 const int32_t *init, int64_t kq, int64_t step, int64_t cols, const int MR, const int WIDE)
{
    __m256i lo[6], hi[6];
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        lo[r] = hi[r] = _mm256_setzero_si256();
    for (int64_t t = 0; t < taps; t++) {
        const void *p[6];
        #pragma GCC unroll 6
        for (int r = 0; r < MR; r++)
            p[r] = a[r * taps + t];
        const int8_t *wt = wj + t * kq * step;
        for (int64_t q = 0; q < kq; q++) {
            __m256i wlo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wt + q * step)));
            __m256i whi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wt + q * step + 16)));
            #pragma GCC unroll 6
            for (int r = 0; r < MR; r++) {
                __m256i x = WIDE ? acts4_wide((const int16_t *)p[r] + 4 * q) : acts4((const uint8_t *)p[r] + 4 * q);
                lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(x, wlo));
                hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(x, whi));
            }
        }
    }
    __m256i km = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols > 8 ? 8 : (int)cols),
                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i i0 = _mm256_maskload_epi32(init, km);
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        _mm256_maskstore_epi32(c + r * c_rs, km, _mm256_add_epi32(fold(lo[r], hi[r]), i0));
}

#define SHAPE(MR, WIDE, NAME)                                                                                      \
    TARGET static void NAME(int32_t *c, int64_t c_rs, const void *const *a, int64_t taps, const int8_t *wj,      \
                            const int32_t *init, int64_t kq, int64_t step, int64_t cols)                        \
    {                                                                                                            \
        tile(c, c_rs, a, taps, wj, init, kq, step, cols, MR, WIDE);                                              \
    }
SHAPE(6, 0, tile_6) SHAPE(4, 0, tile_4) SHAPE(2, 0, tile_2) SHAPE(1, 0, tile_1)
SHAPE(6, 1, tile_6_wide) SHAPE(4, 1, tile_4_wide) SHAPE(2, 1, tile_2_wide) SHAPE(1, 1, tile_1_wide)

typedef void (*tile_fn)(int32_t *c, int64_t c_rs, const void *const *a, int64_t taps, const int8_t *wj,
                        const int32_t *init, int64_t kq, int64_t step, int64_t cols);

/* Columns [j0, j1) of rows [0, m) in tiles of 6, then 4, 2 and 1 rows (t: those four). */
INLINE void columns(int32_t *c, int64_t c_rs, const void *const *a, int64_t taps, int64_t m, const int8_t *w,
                    const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n, const tile_fn t[4])
{
    int64_t n16 = qr_igemm_n16(n), step, kq = k4 / 4;
    if (j1 > n)
        j1 = n;
    for (int64_t j = j0; j < j1; j += 8) {
        int64_t cols = j1 - j;
        const int8_t *wj = qr_iconv_col(w, taps * k4, n16, j, &step);
        int64_t i = 0;
        for (; i + 6 <= m; i += 6)
            t[0](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
        if (m - i >= 4) {
            t[1](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
            i += 4;
        }
        if (m - i >= 2) {
            t[2](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
            i += 2;
        }
        if (i < m)
            t[3](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
    }
}

TARGET void qr_iconv_u8s8_6x8_avx2(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                   const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1,
                                   int64_t n)
{
    static const tile_fn t[4] = {tile_6, tile_4, tile_2, tile_1};
    columns(c, c_rs, (const void *const *)a, taps, m, w, init, k4, j0, j1, n, t);
}

TARGET void qr_iconv_i16s8_6x8_avx2(int32_t *c, int64_t c_rs, const int16_t *const *a, int64_t taps, int64_t m,
                                    const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1,
                                    int64_t n)
{
    static const tile_fn t[4] = {tile_6_wide, tile_4_wide, tile_2_wide, tile_1_wide};
    columns(c, c_rs, (const void *const *)a, taps, m, w, init, k4, j0, j1, n, t);
}
