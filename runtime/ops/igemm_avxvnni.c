/* The u8s8 GEMM with AVX-VNNI (the VEX form of vpdpbusd on 256-bit registers,
 * for CPUs with VNNI but no AVX-512): eight columns of four u8 against four
 * s8 broadcast from one weight row, the wrapping form as in the AVX-512
 * kernel. Tile: 4 weight rows x 16 columns (two registers per row). Only
 * called when the CPU reports avxvnni (igemm.c). */
#include <immintrin.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx2,avxvnni")))

TARGET static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
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

TARGET void qr_igemm_u8s8_4x16_avxvnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                       int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4;
    for (int64_t j = 0; j < n; j += 16) {
        const uint8_t *bj = b + j * 4;
        int64_t cols = n - j;
        for (int64_t m = m0; m < m1; m += 4) {
            int rows = m1 - m < 4 ? (int)(m1 - m) : 4;
            const int8_t *ar[4];
            __m256i lo[4], hi[4];
            #pragma GCC unroll 4 /* the tile stays in registers */
            for (int r = 0; r < 4; r++) {
                int rr = r < rows ? r : 0; /* a short tile repeats row 0, not stored */
                ar[r] = a + (m + rr) * k4;
                lo[r] = hi[r] = _mm256_set1_epi32(init[m + rr]);
            }
            for (int64_t q = 0; q < kq; q++) {
                const uint8_t *bq = bj + q * n16 * 4;
                __m256i v0 = _mm256_loadu_si256((const __m256i *)bq), v1 = _mm256_loadu_si256((const __m256i *)(bq + 32));
                #pragma GCC unroll 4 /* the tile stays in registers */
                for (int r = 0; r < 4; r++) {
                    __m256i w = bcast4(ar[r] + 4 * q);
                    lo[r] = _mm256_dpbusd_avx_epi32(lo[r], v0, w);
                    hi[r] = _mm256_dpbusd_avx_epi32(hi[r], v1, w);
                }
            }
            for (int r = 0; r < rows; r++) {
                store(c + (m + r) * c_rs + j, lo[r], cols);
                if (cols > 8)
                    store(c + (m + r) * c_rs + j + 8, hi[r], cols - 8);
            }
        }
    }
}
