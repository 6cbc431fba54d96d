/* The u8s8 GEMM with AVX2 and no VNNI: four u8 activations and four s8 weights
 * widened to i16, then vpmaddwd: each product is at most 255 * 128 in
 * magnitude and a pair's sum fits i16 x i16 -> i32 exactly (vpmaddubsw would
 * saturate the pair at 32767: 2 * 255 * 127 does not fit). The two pair sums
 * of a column stay in neighbouring lanes until the tile is stored (int32 adds
 * wrap, so the order of the adds does not change the sum modulo 2^32). Tile:
 * 4 weight rows x 8 columns. Only called when the CPU reports avx2 (igemm.c). */
#include <immintrin.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx2")))

/* The four s8 weights at p as i16, repeated across the register. */
TARGET static inline __m256i weights4(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm256_broadcastq_epi64(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(v)));
}

/* Columns 0-3 in lo and 4-7 in hi, each column as two pair sums: the eight column sums in order. */
TARGET static inline __m256i fold(__m256i lo, __m256i hi)
{
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xd8);
}

TARGET static inline void store(int32_t *c, __m256i v, int64_t cols)
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

TARGET void qr_igemm_u8s8_4x8_avx2(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                   int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4;
    for (int64_t j = 0; j < n; j += 8) {
        const uint8_t *bj = b + j * 4;
        int64_t cols = n - j;
        int64_t m = m0;
        for (; m < m1; m += 4) {
            int rows = m1 - m < 4 ? (int)(m1 - m) : 4;
            const int8_t *ar[4];
            #pragma GCC unroll 4 /* the tile stays in registers */
            for (int r = 0; r < 4; r++)
                ar[r] = a + (m + (r < rows ? r : 0)) * k4; /* a short tile repeats row 0, not stored */
            __m256i lo[4], hi[4];
            #pragma GCC unroll 4 /* the tile stays in registers */
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = _mm256_setzero_si256();
            for (int64_t q = 0; q < kq; q++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(bj + q * n16 * 4));
                __m256i vlo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v));
                __m256i vhi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1));
                #pragma GCC unroll 4 /* the tile stays in registers */
                for (int r = 0; r < 4; r++) {
                    __m256i w = weights4(ar[r] + 4 * q);
                    lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(vlo, w));
                    hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(vhi, w));
                }
            }
            for (int r = 0; r < rows; r++)
                store(c + (m + r) * c_rs + j, _mm256_add_epi32(fold(lo[r], hi[r]), _mm256_set1_epi32(init[m + r])),
                      cols);
        }
    }
}
