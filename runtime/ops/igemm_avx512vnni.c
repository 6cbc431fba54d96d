/* The u8s8 GEMM with AVX-512 VNNI: vpdpbusd multiplies 16 columns of four u8
 * by four s8 of one weight row and adds the four products to each int32 lane,
 * wrapping (the non-saturating form, so sums wrap modulo 2^32 as QRL's
 * contract says). Tile: 8 weight rows x 32 columns (4 rows for the last
 * ones). Only called when the CPU reports avx512vnni (igemm.c). */
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

/* Eight full rows: sixteen sums (32 columns) or eight (the last 16), enough
 * independent vpdpbusd chains for CPUs that issue two a cycle (Zen 5); each
 * load of activations serves eight rows. The sums are named registers: an
 * array of them made GCC copy registers every step of the k loop. */
#define DP2(L, H, W) (L = _mm512_dpbusd_epi32(L, v0, W), H = _mm512_dpbusd_epi32(H, v1, W))
TARGET static void tile_8x32(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                             const uint8_t *bj, int64_t kq, int64_t step, __mmask16 k0, __mmask16 k1)
{
    __m512i l0 = _mm512_set1_epi32(init[0]), l1 = _mm512_set1_epi32(init[1]), l2 = _mm512_set1_epi32(init[2]),
            l3 = _mm512_set1_epi32(init[3]), l4 = _mm512_set1_epi32(init[4]), l5 = _mm512_set1_epi32(init[5]),
            l6 = _mm512_set1_epi32(init[6]), l7 = _mm512_set1_epi32(init[7]);
    __m512i h0 = l0, h1 = l1, h2 = l2, h3 = l3, h4 = l4, h5 = l5, h6 = l6, h7 = l7;
    for (int64_t q = 0; q < kq; q++) {
        __m512i v0 = _mm512_loadu_si512((const void *)(bj + q * step));
        __m512i v1 = _mm512_loadu_si512((const void *)(bj + q * step + 64));
        const int8_t *aq = a + 4 * q;
        DP2(l0, h0, bcast4(aq));
        DP2(l1, h1, bcast4(aq + k4));
        DP2(l2, h2, bcast4(aq + 2 * k4));
        DP2(l3, h3, bcast4(aq + 3 * k4));
        DP2(l4, h4, bcast4(aq + 4 * k4));
        DP2(l5, h5, bcast4(aq + 5 * k4));
        DP2(l6, h6, bcast4(aq + 6 * k4));
        DP2(l7, h7, bcast4(aq + 7 * k4));
    }
    __m512i lo[8] = {l0, l1, l2, l3, l4, l5, l6, l7}, hi[8] = {h0, h1, h2, h3, h4, h5, h6, h7};
    for (int r = 0; r < 8; r++) {
        _mm512_mask_storeu_epi32(c + r * c_rs, k0, lo[r]);
        _mm512_mask_storeu_epi32(c + r * c_rs + 16, k1, hi[r]);
    }
}

TARGET static void tile_8x16(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                             const uint8_t *bj, int64_t kq, int64_t step, __mmask16 k0)
{
    __m512i l0 = _mm512_set1_epi32(init[0]), l1 = _mm512_set1_epi32(init[1]), l2 = _mm512_set1_epi32(init[2]),
            l3 = _mm512_set1_epi32(init[3]), l4 = _mm512_set1_epi32(init[4]), l5 = _mm512_set1_epi32(init[5]),
            l6 = _mm512_set1_epi32(init[6]), l7 = _mm512_set1_epi32(init[7]);
    for (int64_t q = 0; q < kq; q++) {
        __m512i v0 = _mm512_loadu_si512((const void *)(bj + q * step));
        const int8_t *aq = a + 4 * q;
        l0 = _mm512_dpbusd_epi32(l0, v0, bcast4(aq));
        l1 = _mm512_dpbusd_epi32(l1, v0, bcast4(aq + k4));
        l2 = _mm512_dpbusd_epi32(l2, v0, bcast4(aq + 2 * k4));
        l3 = _mm512_dpbusd_epi32(l3, v0, bcast4(aq + 3 * k4));
        l4 = _mm512_dpbusd_epi32(l4, v0, bcast4(aq + 4 * k4));
        l5 = _mm512_dpbusd_epi32(l5, v0, bcast4(aq + 5 * k4));
        l6 = _mm512_dpbusd_epi32(l6, v0, bcast4(aq + 6 * k4));
        l7 = _mm512_dpbusd_epi32(l7, v0, bcast4(aq + 7 * k4));
    }
    __m512i lo[8] = {l0, l1, l2, l3, l4, l5, l6, l7};
    for (int r = 0; r < 8; r++)
        _mm512_mask_storeu_epi32(c + r * c_rs, k0, lo[r]);
}

/* Up to four rows (the ones past the last eight): a short tile repeats row 0, not stored. */
TARGET static void tile_4(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init, int rows,
                          const uint8_t *bj, int64_t kq, int64_t step, int two, __mmask16 k0, __mmask16 k1)
{
    const int8_t *ar[4];
    __m512i lo[4], hi[4];
    #pragma GCC unroll 4 /* the tile stays in registers */
    for (int r = 0; r < 4; r++) {
        int rr = r < rows ? r : 0;
        ar[r] = a + rr * k4;
        lo[r] = hi[r] = _mm512_set1_epi32(init[rr]);
    }
    if (two) {
        __m512i l0 = lo[0], l1 = lo[1], l2 = lo[2], l3 = lo[3], h0 = hi[0], h1 = hi[1], h2 = hi[2], h3 = hi[3];
        const int8_t *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3];
        for (int64_t q = 0; q < kq; q++) {
            __m512i v0 = _mm512_loadu_si512((const void *)(bj + q * step));
            __m512i v1 = _mm512_loadu_si512((const void *)(bj + q * step + 64));
            DP2(l0, h0, bcast4(a0 + 4 * q));
            DP2(l1, h1, bcast4(a1 + 4 * q));
            DP2(l2, h2, bcast4(a2 + 4 * q));
            DP2(l3, h3, bcast4(a3 + 4 * q));
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
        _mm512_mask_storeu_epi32(c + r * c_rs, k0, lo[r]);
        if (two)
            _mm512_mask_storeu_epi32(c + r * c_rs + 16, k1, hi[r]);
    }
}

/* Columns [j, j + 32) of rows [m0, m1). */
TARGET static void strip(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                         const uint8_t *b, int64_t k4, int64_t n, int64_t j)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4, step = n16 * 4;
    /* the second half of the tile reads columns j + 16.. only where the packing has them */
    int two = j + 16 < n16;
    __mmask16 k0 = cols_mask(n - j), k1 = cols_mask(n - j - 16);
    const uint8_t *bj = b + j * 4;
    int64_t m = m0;
    for (; m + 8 <= m1; m += 8) {
        if (two)
            tile_8x32(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, bj, kq, step, k0, k1);
        else
            tile_8x16(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, bj, kq, step, k0);
    }
    for (; m < m1; m += 4)
        tile_4(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, m1 - m < 4 ? (int)(m1 - m) : 4, bj, kq, step, two,
               k0, k1);
}

/* Column strips outer: a strip of packed activations stays in cache while
 * every row passes over it. */
TARGET void qr_igemm_u8s8_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                          int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    for (int64_t j = 0; j < n; j += 32)
        strip(c, c_rs, a, init, m0, m1, b, k4, n, j);
}

/* y[j] for columns [j0, j1): eight groups of sixteen at a time (eight independent vpdpbusd chains
 * for each four bytes of x broadcast), then one group at a time; the last group under a mask. */
TARGET void qr_igemv_u8s8_avx512vnni(int32_t *y, const uint8_t *x, const int8_t *w, const int32_t *init, int64_t k4,
                                     int64_t j0, int64_t j1, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4, step = n16 * 4;
    if (j1 > n)
        j1 = n;
    int64_t j = j0;
    for (; j + 128 <= j1; j += 128) {
        __m512i s[8];
        #pragma GCC unroll 8
        for (int g = 0; g < 8; g++)
            s[g] = _mm512_loadu_si512((const void *)(init + j + 16 * g));
        __m512i s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5], s6 = s[6], s7 = s[7];
        const int8_t *wj = w + j * 4;
        for (int64_t q = 0; q < kq; q++) {
            __m512i xb = bcast4((const int8_t *)(x + 4 * q));
            const int8_t *wq = wj + q * step;
            s0 = _mm512_dpbusd_epi32(s0, xb, _mm512_loadu_si512((const void *)wq));
            s1 = _mm512_dpbusd_epi32(s1, xb, _mm512_loadu_si512((const void *)(wq + 64)));
            s2 = _mm512_dpbusd_epi32(s2, xb, _mm512_loadu_si512((const void *)(wq + 128)));
            s3 = _mm512_dpbusd_epi32(s3, xb, _mm512_loadu_si512((const void *)(wq + 192)));
            s4 = _mm512_dpbusd_epi32(s4, xb, _mm512_loadu_si512((const void *)(wq + 256)));
            s5 = _mm512_dpbusd_epi32(s5, xb, _mm512_loadu_si512((const void *)(wq + 320)));
            s6 = _mm512_dpbusd_epi32(s6, xb, _mm512_loadu_si512((const void *)(wq + 384)));
            s7 = _mm512_dpbusd_epi32(s7, xb, _mm512_loadu_si512((const void *)(wq + 448)));
        }
        __m512i o[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
        #pragma GCC unroll 8
        for (int g = 0; g < 8; g++)
            _mm512_storeu_si512((void *)(y + j + 16 * g), o[g]);
    }
    for (; j < j1; j += 16) {
        __mmask16 m = cols_mask(j1 - j);
        __m512i s = _mm512_maskz_loadu_epi32(m, init + j);
        const int8_t *wj = w + j * 4;
        for (int64_t q = 0; q < kq; q++)
            s = _mm512_dpbusd_epi32(s, bcast4((const int8_t *)(x + 4 * q)), _mm512_loadu_si512((const void *)(wj + q * step)));
        _mm512_mask_storeu_epi32(y + j, m, s);
    }
}

/* Four rows of bytes into the packing's words (igemm.h), 64 columns a step: bytes paired by
 * vpunpck*bw, pairs by vpunpck*wd (within 128-bit lanes), then the lanes put in column order
 * by a 4x4 transpose of lanes; the last columns under masks. Needs AVX-512BW only. */
#define TARGET_BW __attribute__((target("avx512f,avx512bw")))
TARGET_BW static inline void interleave64(uint32_t *d, __m512i a, __m512i b, __m512i c, __m512i e, __m512i x,
                                          int64_t left)
{
    __m512i ab0 = _mm512_unpacklo_epi8(a, b), ab1 = _mm512_unpackhi_epi8(a, b);
    __m512i ce0 = _mm512_unpacklo_epi8(c, e), ce1 = _mm512_unpackhi_epi8(c, e);
    __m512i w0 = _mm512_unpacklo_epi16(ab0, ce0), w1 = _mm512_unpackhi_epi16(ab0, ce0);
    __m512i w2 = _mm512_unpacklo_epi16(ab1, ce1), w3 = _mm512_unpackhi_epi16(ab1, ce1);
    __m512i t0 = _mm512_shuffle_i32x4(w0, w1, 0x44), t1 = _mm512_shuffle_i32x4(w0, w1, 0xEE);
    __m512i t2 = _mm512_shuffle_i32x4(w2, w3, 0x44), t3 = _mm512_shuffle_i32x4(w2, w3, 0xEE);
    __m512i o[4] = {_mm512_shuffle_i32x4(t0, t2, 0x88), _mm512_shuffle_i32x4(t0, t2, 0xDD),
                    _mm512_shuffle_i32x4(t1, t3, 0x88), _mm512_shuffle_i32x4(t1, t3, 0xDD)};
    for (int q = 0; q < 4; q++) {
        __m512i v = _mm512_xor_si512(o[q], x);
        if (left >= 64)
            _mm512_storeu_si512((void *)(d + 16 * q), v);
        else
            _mm512_mask_storeu_epi32(d + 16 * q, cols_mask(left - 16 * q), v);
    }
}

TARGET_BW void qr_igemm_interleave4_avx512bw(uint32_t *d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                                             const uint8_t *r3, int64_t n, uint8_t flip)
{
    __m512i x = _mm512_set1_epi8((char)flip);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        interleave64(d + i, _mm512_loadu_si512((const void *)(r0 + i)), _mm512_loadu_si512((const void *)(r1 + i)),
                     _mm512_loadu_si512((const void *)(r2 + i)), _mm512_loadu_si512((const void *)(r3 + i)), x, 64);
    if (i < n) {
        __mmask64 m = ((__mmask64)1 << (n - i)) - 1; /* n - i < 64 */
        interleave64(d + i, _mm512_maskz_loadu_epi8(m, r0 + i), _mm512_maskz_loadu_epi8(m, r1 + i),
                     _mm512_maskz_loadu_epi8(m, r2 + i), _mm512_maskz_loadu_epi8(m, r3 + i), x, n - i);
    }
}
