/* The u8s8 GEMM with AVX-512 VNNI: vpdpbusd multiplies 16 columns of four u8
 * by four s8 of one weight row and adds the four products to each int32 lane,
 * wrapping (the non-saturating form, so sums wrap modulo 2^32 as QRL's
 * contract says). Four weight rows share each load of the activations. Only
 * called when the CPU reports avx512vnni (igemm.c). */
#include <immintrin.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

TARGET static inline __m512i bcast4(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

TARGET void qr_igemm_u8s8_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                     int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4;
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mask = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        const uint8_t *bj = b + j * 4;
        int64_t m = m0;
        for (; m + 4 <= m1; m += 4) {
            const int8_t *a0 = a + m * k4, *a1 = a0 + k4, *a2 = a1 + k4, *a3 = a2 + k4;
            __m512i c0 = _mm512_set1_epi32(init[m]), c1 = _mm512_set1_epi32(init[m + 1]),
                    c2 = _mm512_set1_epi32(init[m + 2]), c3 = _mm512_set1_epi32(init[m + 3]);
            for (int64_t q = 0; q < kq; q++) {
                __m512i v = _mm512_loadu_si512((const void *)(bj + q * n16 * 4));
                c0 = _mm512_dpbusd_epi32(c0, v, bcast4(a0 + 4 * q));
                c1 = _mm512_dpbusd_epi32(c1, v, bcast4(a1 + 4 * q));
                c2 = _mm512_dpbusd_epi32(c2, v, bcast4(a2 + 4 * q));
                c3 = _mm512_dpbusd_epi32(c3, v, bcast4(a3 + 4 * q));
            }
            _mm512_mask_storeu_epi32(c + m * c_rs + j, mask, c0);
            _mm512_mask_storeu_epi32(c + (m + 1) * c_rs + j, mask, c1);
            _mm512_mask_storeu_epi32(c + (m + 2) * c_rs + j, mask, c2);
            _mm512_mask_storeu_epi32(c + (m + 3) * c_rs + j, mask, c3);
        }
        for (; m < m1; m++) {
            const int8_t *a0 = a + m * k4;
            __m512i c0 = _mm512_set1_epi32(init[m]);
            for (int64_t q = 0; q < kq; q++)
                c0 = _mm512_dpbusd_epi32(c0, _mm512_loadu_si512((const void *)(bj + q * n16 * 4)), bcast4(a0 + 4 * q));
            _mm512_mask_storeu_epi32(c + m * c_rs + j, mask, c0);
        }
    }
}
