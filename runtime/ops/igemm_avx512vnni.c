/* The u8s8 GEMM with AVX-512 VNNI: vpdpbusd multiplies 16 columns of four u8
 * by four s8 of one weight row and adds the four products to each int32 lane,
 * wrapping (the non-saturating form, so sums wrap modulo 2^32 as QRL's
 * contract says). Tile: 4 weight rows x 32 columns, eight independent sums,
 * enough to cover vpdpbusd's latency; each load of activations serves four
 * rows. Only called when the CPU reports avx512vnni (igemm.c). */
#include <immintrin.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

TARGET static inline __m512i bcast4(const int8_t *p)
{
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static inline __mmask16 cols_mask(int64_t cols)
{
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
}

TARGET void qr_igemm_u8s8_4x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                          int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4, step = n16 * 4;
    for (int64_t j = 0; j < n; j += 32) {
        /* the second half of the tile reads columns j + 16.. only where the packing has them */
        int two = j + 16 < n16;
        __mmask16 k0 = cols_mask(n - j), k1 = cols_mask(n - j - 16);
        const uint8_t *bj = b + j * 4;
        for (int64_t m = m0; m < m1; m += 4) {
            int rows = m1 - m < 4 ? (int)(m1 - m) : 4;
            const int8_t *ar[4];
            __m512i lo[4], hi[4];
            #pragma GCC unroll 4 /* the tile stays in registers */
            for (int r = 0; r < 4; r++) {
                int rr = r < rows ? r : 0; /* a short tile repeats row 0, not stored */
                ar[r] = a + (m + rr) * k4;
                lo[r] = hi[r] = _mm512_set1_epi32(init[m + rr]);
            }
            if (two) { /* eight named sums: an array of them made GCC copy registers every step */
                __m512i l0 = lo[0], l1 = lo[1], l2 = lo[2], l3 = lo[3], h0 = hi[0], h1 = hi[1], h2 = hi[2], h3 = hi[3];
                const int8_t *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3];
                for (int64_t q = 0; q < kq; q++) {
                    __m512i v0 = _mm512_loadu_si512((const void *)(bj + q * step));
                    __m512i v1 = _mm512_loadu_si512((const void *)(bj + q * step + 64));
                    __m512i w0 = bcast4(a0 + 4 * q), w1 = bcast4(a1 + 4 * q);
                    l0 = _mm512_dpbusd_epi32(l0, v0, w0);
                    h0 = _mm512_dpbusd_epi32(h0, v1, w0);
                    l1 = _mm512_dpbusd_epi32(l1, v0, w1);
                    h1 = _mm512_dpbusd_epi32(h1, v1, w1);
                    __m512i w2 = bcast4(a2 + 4 * q), w3 = bcast4(a3 + 4 * q);
                    l2 = _mm512_dpbusd_epi32(l2, v0, w2);
                    h2 = _mm512_dpbusd_epi32(h2, v1, w2);
                    l3 = _mm512_dpbusd_epi32(l3, v0, w3);
                    h3 = _mm512_dpbusd_epi32(h3, v1, w3);
                }
                lo[0] = l0, lo[1] = l1, lo[2] = l2, lo[3] = l3, hi[0] = h0, hi[1] = h1, hi[2] = h2, hi[3] = h3;
            } else {
                __m512i l0 = lo[0], l1 = lo[1], l2 = lo[2], l3 = lo[3];
                const int8_t *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3];
                for (int64_t q = 0; q < kq; q++) {
                    __m512i v0 = _mm512_loadu_si512((const void *)(bj + q * step));
                    l0 = _mm512_dpbusd_epi32(l0, v0, bcast4(a0 + 4 * q));
                    l1 = _mm512_dpbusd_epi32(l1, v0, bcast4(a1 + 4 * q));
                    l2 = _mm512_dpbusd_epi32(l2, v0, bcast4(a2 + 4 * q));
                    l3 = _mm512_dpbusd_epi32(l3, v0, bcast4(a3 + 4 * q));
                }
                lo[0] = l0, lo[1] = l1, lo[2] = l2, lo[3] = l3;
            }
            for (int r = 0; r < rows; r++) {
                _mm512_mask_storeu_epi32(c + (m + r) * c_rs + j, k0, lo[r]);
                if (two)
                    _mm512_mask_storeu_epi32(c + (m + r) * c_rs + j + 16, k1, hi[r]);
            }
        }
    }
}
