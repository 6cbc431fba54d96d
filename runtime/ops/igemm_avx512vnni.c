/* The u8s8 GEMM with AVX-512 VNNI: vpdpbusd multiplies 16 columns of four u8
 * by four s8 of one weight row and adds the four products to each int32 lane,
 * wrapping (the non-saturating form, so sums wrap modulo 2^32 as QRL's
 * contract says). Tile: 8 weight rows x 32 columns (4 rows for the last
 * ones), or 6 x 64 when the packing's rows are 4 KiB apart (strip64). Only called when the CPU
 * reports avx512vnni (igemm.c). */
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
/* Sixteen sums to p: a plain store when all sixteen columns are real (masked stores are slow on
 * Zen 5). */
TARGET static inline void store16(int32_t *p, __mmask16 k, __m512i v)
{
    if (k == (__mmask16)0xffff)
        _mm512_storeu_si512((void *)p, v);
    else
        _mm512_mask_storeu_epi32(p, k, v);
}
/* Row r's sums start at init[r] + the columns' starts cv, less rz[r] times the columns' sv when
 * there is a zero point per row (rz not NULL; igemm.h, qr_igemm_rc_fn). */
TARGET static inline __m512i start(const int32_t *init, const int32_t *rz, int r, __m512i cv, __m512i sv)
{
    __m512i s = _mm512_add_epi32(_mm512_set1_epi32(init[r]), cv);
    return rz ? _mm512_sub_epi32(s, _mm512_mullo_epi32(_mm512_set1_epi32(rz[r]), sv)) : s;
}
#define START(r, cv, sv) start(init, rz, r, cv, sv)
TARGET static void tile_8x32(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                             __m512i cv0, __m512i cv1, const int32_t *rz, __m512i sv0, __m512i sv1,
                             const uint8_t *bj, int64_t kq, int64_t step, __mmask16 k0, __mmask16 k1)
{
    __m512i l0 = START(0, cv0, sv0), l1 = START(1, cv0, sv0), l2 = START(2, cv0, sv0), l3 = START(3, cv0, sv0),
            l4 = START(4, cv0, sv0), l5 = START(5, cv0, sv0), l6 = START(6, cv0, sv0), l7 = START(7, cv0, sv0);
    __m512i h0 = START(0, cv1, sv1), h1 = START(1, cv1, sv1), h2 = START(2, cv1, sv1), h3 = START(3, cv1, sv1),
            h4 = START(4, cv1, sv1), h5 = START(5, cv1, sv1), h6 = START(6, cv1, sv1), h7 = START(7, cv1, sv1);
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
    /* the sums stored by name: an array of them was copied to the stack first (a third of a
     * 64-deep tile's time) */
#define ST2(r, L, H) (store16(c + r * c_rs, k0, L), store16(c + r * c_rs + 16, k1, H))
    ST2(0, l0, h0), ST2(1, l1, h1), ST2(2, l2, h2), ST2(3, l3, h3);
    ST2(4, l4, h4), ST2(5, l5, h5), ST2(6, l6, h6), ST2(7, l7, h7);
#undef ST2
}

TARGET static void tile_8x16(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                             __m512i cv0, const int32_t *rz, __m512i sv0, const uint8_t *bj, int64_t kq,
                             int64_t step, __mmask16 k0)
{
    __m512i l0 = START(0, cv0, sv0), l1 = START(1, cv0, sv0), l2 = START(2, cv0, sv0), l3 = START(3, cv0, sv0),
            l4 = START(4, cv0, sv0), l5 = START(5, cv0, sv0), l6 = START(6, cv0, sv0), l7 = START(7, cv0, sv0);
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
    store16(c, k0, l0), store16(c + c_rs, k0, l1), store16(c + 2 * c_rs, k0, l2), store16(c + 3 * c_rs, k0, l3);
    store16(c + 4 * c_rs, k0, l4), store16(c + 5 * c_rs, k0, l5), store16(c + 6 * c_rs, k0, l6);
    store16(c + 7 * c_rs, k0, l7);
}

/* Up to four rows (the ones past the last eight): a short tile repeats row 0, not stored. */
TARGET static void tile_4(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                          __m512i cv0, __m512i cv1, const int32_t *rz, __m512i sv0, __m512i sv1, int rows, const uint8_t *bj, int64_t kq, int64_t step, int two,
                          __mmask16 k0, __mmask16 k1)
{
    const int8_t *ar[4];
    __m512i lo[4], hi[4];
    #pragma GCC unroll 4 /* the tile stays in registers */
    for (int r = 0; r < 4; r++) {
        int rr = r < rows ? r : 0;
        ar[r] = a + rr * k4;
        lo[r] = START(rr, cv0, sv0);
        hi[r] = START(rr, cv1, sv1);
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

/* Six rows by 64 columns (24 sums; each broadcast of a weight serves four vectors): for a packing
 * whose rows are a multiple of 4 KiB apart (N16 a multiple of 1024), where a 32-column strip's
 * lines all fall in the same few L1 sets and leave the cache between tiles, the wider strip halves
 * the loads of b per product (measured on Zen 5, M 128, K 256: N 1024 370 -> 415 GMAC/s, N 2048
 * 339 -> 389; M 1024, N 1024: 290 -> 375). Rows past `rows` repeat row 0 and are not stored. */
#define DP4(S0, S1, S2, S3, W)                                                                                 \
    (S0 = _mm512_dpbusd_epi32(S0, v0, W), S1 = _mm512_dpbusd_epi32(S1, v1, W), S2 = _mm512_dpbusd_epi32(S2, v2, W), \
     S3 = _mm512_dpbusd_epi32(S3, v3, W))
TARGET static void tile_6x64(int32_t *c, int64_t c_rs, const int8_t *a, int64_t k4, const int32_t *init,
                             const __m512i cv[4], const uint8_t *bj, int64_t kq, int64_t step, const __mmask16 km[4],
                             int rows)
{
    const int8_t *a0 = a, *a1 = a + (rows > 1) * k4, *a2 = a + (rows > 2) * 2 * k4, *a3 = a + (rows > 3) * 3 * k4;
    const int8_t *a4 = a + (rows > 4) * 4 * k4, *a5 = a + (rows > 5) * 5 * k4;
    __m512i i0 = _mm512_set1_epi32(init[0]), i1 = _mm512_set1_epi32(init[rows > 1]);
    __m512i i2 = _mm512_set1_epi32(init[(rows > 2) * 2]), i3 = _mm512_set1_epi32(init[(rows > 3) * 3]);
    __m512i i4 = _mm512_set1_epi32(init[(rows > 4) * 4]), i5 = _mm512_set1_epi32(init[(rows > 5) * 5]);
    __m512i s00 = _mm512_add_epi32(i0, cv[0]), s01 = _mm512_add_epi32(i0, cv[1]), s02 = _mm512_add_epi32(i0, cv[2]),
            s03 = _mm512_add_epi32(i0, cv[3]);
    __m512i s10 = _mm512_add_epi32(i1, cv[0]), s11 = _mm512_add_epi32(i1, cv[1]), s12 = _mm512_add_epi32(i1, cv[2]),
            s13 = _mm512_add_epi32(i1, cv[3]);
    __m512i s20 = _mm512_add_epi32(i2, cv[0]), s21 = _mm512_add_epi32(i2, cv[1]), s22 = _mm512_add_epi32(i2, cv[2]),
            s23 = _mm512_add_epi32(i2, cv[3]);
    __m512i s30 = _mm512_add_epi32(i3, cv[0]), s31 = _mm512_add_epi32(i3, cv[1]), s32 = _mm512_add_epi32(i3, cv[2]),
            s33 = _mm512_add_epi32(i3, cv[3]);
    __m512i s40 = _mm512_add_epi32(i4, cv[0]), s41 = _mm512_add_epi32(i4, cv[1]), s42 = _mm512_add_epi32(i4, cv[2]),
            s43 = _mm512_add_epi32(i4, cv[3]);
    __m512i s50 = _mm512_add_epi32(i5, cv[0]), s51 = _mm512_add_epi32(i5, cv[1]), s52 = _mm512_add_epi32(i5, cv[2]),
            s53 = _mm512_add_epi32(i5, cv[3]);
    for (int64_t q = 0; q < kq; q++) {
        const uint8_t *bq = bj + q * step;
        __m512i v0 = _mm512_loadu_si512((const void *)bq), v1 = _mm512_loadu_si512((const void *)(bq + 64));
        __m512i v2 = _mm512_loadu_si512((const void *)(bq + 128)), v3 = _mm512_loadu_si512((const void *)(bq + 192));
        DP4(s00, s01, s02, s03, bcast4(a0 + 4 * q));
        DP4(s10, s11, s12, s13, bcast4(a1 + 4 * q));
        DP4(s20, s21, s22, s23, bcast4(a2 + 4 * q));
        DP4(s30, s31, s32, s33, bcast4(a3 + 4 * q));
        DP4(s40, s41, s42, s43, bcast4(a4 + 4 * q));
        DP4(s50, s51, s52, s53, bcast4(a5 + 4 * q));
    }
    __m512i o[6][4] = {{s00, s01, s02, s03}, {s10, s11, s12, s13}, {s20, s21, s22, s23},
                       {s30, s31, s32, s33}, {s40, s41, s42, s43}, {s50, s51, s52, s53}};
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < 4; v++)
            _mm512_mask_storeu_epi32(c + r * c_rs + 16 * v, km[v], o[r][v]);
}

/* Columns [j, j + 64) of rows [m0, m1) by six-row tiles (j + 64 <= N16). */
TARGET static void strip64(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                           int64_t m0, int64_t m1, const uint8_t *b, int64_t k4, int64_t n, int64_t j)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4, step = n16 * 4;
    __mmask16 km[4];
    __m512i cv[4];
    for (int v = 0; v < 4; v++) {
        km[v] = cols_mask(n - j - 16 * v);
        cv[v] = cinit ? _mm512_maskz_loadu_epi32(km[v], cinit + j + 16 * v) : _mm512_setzero_si512();
    }
    for (int64_t m = m0; m < m1; m += 6)
        tile_6x64(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, cv, b + j * 4, kq, step, km,
                  m1 - m < 6 ? (int)(m1 - m) : 6);
}

/* Whether the packing's rows (N16 * 4 bytes) are a multiple of 4 KiB apart: then strip64. */
static int wide_strips(int64_t n) { return qr_igemm_n16(n) % 1024 == 0; }

/* Columns [j, j + 32) of rows [m0, m1); cinit (NULL: none) adds each column's starting value, rz
 * (NULL: none) takes rz[m] times csum off each (igemm.h, qr_igemm_rc_fn). pitch 0: b is packed in
 * panels of 32 columns (igemm.h, qr_igemm_rc_panels), the strip's one contiguous. */
TARGET static void strip(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                         const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b, int64_t k4,
                         int64_t n, int64_t pitch, int64_t j)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4, step = pitch ? pitch * 4 : 128;
    /* the second half of the tile reads columns j + 16.. only where the packing has them */
    int two = j + 16 < n16;
    __mmask16 k0 = cols_mask(n - j), k1 = cols_mask(n - j - 16);
    __m512i cv0 = cinit ? _mm512_maskz_loadu_epi32(k0, cinit + j) : _mm512_setzero_si512();
    __m512i cv1 = cinit ? _mm512_maskz_loadu_epi32(k1, cinit + j + 16) : _mm512_setzero_si512();
    __m512i sv0 = rz ? _mm512_maskz_loadu_epi32(k0, csum + j) : _mm512_setzero_si512();
    __m512i sv1 = rz ? _mm512_maskz_loadu_epi32(k1, csum + j + 16) : _mm512_setzero_si512();
    const uint8_t *bj = pitch ? b + j * 4 : b + j * k4;
    int64_t m = m0;
    for (; m + 8 <= m1; m += 8) {
        if (two)
            tile_8x32(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, cv0, cv1, rz ? rz + m : NULL, sv0, sv1, bj,
                      kq, step, k0, k1);
        else
            tile_8x16(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, cv0, rz ? rz + m : NULL, sv0, bj, kq, step,
                      k0);
    }
    for (; m < m1; m += 4)
        tile_4(c + m * c_rs + j, c_rs, a + m * k4, k4, init + m, cv0, cv1, rz ? rz + m : NULL, sv0, sv1,
               m1 - m < 4 ? (int)(m1 - m) : 4, bj, kq, step, two, k0, k1);
}

/* Column strips outer: a strip of packed activations stays in cache while
 * every row passes over it. */
TARGET void qr_igemm_u8s8_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                          int64_t m1, const uint8_t *b, int64_t k4, int64_t n)
{
    if (wide_strips(n)) {
        for (int64_t j = 0; j < n; j += 64)
            strip64(c, c_rs, a, init, NULL, m0, m1, b, k4, n, j);
        return;
    }
    for (int64_t j = 0; j < n; j += 32)
        strip(c, c_rs, a, init, NULL, NULL, NULL, m0, m1, b, k4, n, qr_igemm_n16(n), j);
}

/* The same with a starting value per column too, and a zero point per row times the column sums
 * (igemm.h, qr_igemm_rc_fn): added to the rows' when the tile's sums start, so the product needs
 * no second pass over c. */
TARGET void qr_igemm_u8s8_rc_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init,
                                             const int32_t *cinit, const int32_t *rz, const int32_t *csum, int64_t m0,
                                             int64_t m1, const uint8_t *b, int64_t k4, int64_t n, int64_t pitch)
{
    /* a padded packing (qr_igemm_rc_pitch) already keeps the strips' lines apart; strip64 reads the
     * unpadded one and takes no row zero points */
    if (wide_strips(n) && !rz && pitch == qr_igemm_n16(n)) {
        for (int64_t j = 0; j < n; j += 64)
            strip64(c, c_rs, a, init, cinit, m0, m1, b, k4, n, j);
        return;
    }
    for (int64_t j = 0; j < n; j += 32)
        strip(c, c_rs, a, init, cinit, rz, csum, m0, m1, b, k4, n, pitch, j);
}

/* The same on b packed in panels (igemm.h, qr_igemm_rc_panels; pitch not read). */
TARGET void qr_igemm_u8s8_rc_panels_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init,
                                               const int32_t *cinit, const int32_t *rz, const int32_t *csum,
                                               int64_t m0, int64_t m1, const uint8_t *b, int64_t k4, int64_t n,
                                               int64_t pitch)
{
    (void)pitch;
    for (int64_t j = 0; j < n; j += 32)
        strip(c, c_rs, a, init, cinit, rz, csum, m0, m1, b, k4, n, 0, j);
}

/* The last G groups of sixteen columns (G <= 4, fewer than the eight of a full step), columns [j,
 * j + left): four chains a group, over the quads of K by q mod 4, added at the end (int32 sums
 * wrap alike in any order: the same bits), so that 4 G chains hide vpdpbusd's latency where one
 * chain a group waited on it (a classifier of 64 columns: 392 dependent steps a group; two chains,
 * 196 steps each, still waited: the bundled CNN's 1568 x 64 classifier at batch 1 ran 1-4% of the
 * model's time faster with four). */
#define GEMV_G(X) X(0) X(1) X(2) X(3)
#define GEMV_INIT(g)                                                                                         \
    __m512i a##g = _mm512_setzero_si512(), b##g = a##g, c##g = a##g, d##g = a##g;                             \
    if (g < G)                                                                                               \
        a##g = _mm512_maskz_loadu_epi32(cols_mask(left - 16 * g), init + j + 16 * g);
#define GEMV_Q0(g)                                                                                           \
    if (g < G)                                                                                               \
        a##g = _mm512_dpbusd_epi32(a##g, x0, _mm512_loadu_si512((const void *)(wq + 64 * g)));
#define GEMV_Q1(g)                                                                                           \
    if (g < G)                                                                                               \
        b##g = _mm512_dpbusd_epi32(b##g, x1, _mm512_loadu_si512((const void *)(wq + step + 64 * g)));
#define GEMV_Q2(g)                                                                                           \
    if (g < G)                                                                                               \
        c##g = _mm512_dpbusd_epi32(c##g, x2, _mm512_loadu_si512((const void *)(wq + 2 * step + 64 * g)));
#define GEMV_Q3(g)                                                                                           \
    if (g < G)                                                                                               \
        d##g = _mm512_dpbusd_epi32(d##g, x3, _mm512_loadu_si512((const void *)(wq + 3 * step + 64 * g)));
#define GEMV_STORE(g)                                                                                        \
    if (g < G)                                                                                               \
        _mm512_mask_storeu_epi32(y + j + 16 * g, cols_mask(left - 16 * g),                                  \
                                 _mm512_add_epi32(_mm512_add_epi32(a##g, b##g), _mm512_add_epi32(c##g, d##g)));
TARGET static inline __attribute__((always_inline)) void gemv_last(const int G, int32_t *y, const uint8_t *x,
                                                                   const int8_t *w, const int32_t *init, int64_t kq,
                                                                   int64_t step, int64_t j, int64_t left)
{
    GEMV_G(GEMV_INIT)
    const int8_t *wq = w + j * 4;
    int64_t q = 0;
    for (; q + 3 < kq; q += 4, wq += 4 * step) {
        __m512i x0 = bcast4((const int8_t *)(x + 4 * q)), x1 = bcast4((const int8_t *)(x + 4 * q + 4));
        __m512i x2 = bcast4((const int8_t *)(x + 4 * q + 8)), x3 = bcast4((const int8_t *)(x + 4 * q + 12));
        GEMV_G(GEMV_Q0)
        GEMV_G(GEMV_Q1)
        GEMV_G(GEMV_Q2)
        GEMV_G(GEMV_Q3)
    }
    for (; q < kq; q++, wq += step) {
        __m512i x0 = bcast4((const int8_t *)(x + 4 * q));
        GEMV_G(GEMV_Q0)
    }
    GEMV_G(GEMV_STORE)
}

/* y[j] for columns [j0, j1): eight groups of sixteen at a time (eight independent vpdpbusd chains
 * for each four bytes of x broadcast), then the last groups four at a time (gemv_last); the last
 * group under a mask. */
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
    for (; j < j1; j += 64) {
        int64_t left = j1 - j;
        if (left > 48)
            gemv_last(4, y, x, w, init, kq, step, j, left);
        else if (left > 32)
            gemv_last(3, y, x, w, init, kq, step, j, left);
        else if (left > 16)
            gemv_last(2, y, x, w, init, kq, step, j, left);
        else
            gemv_last(1, y, x, w, init, kq, step, j, left);
    }
}

/* Four rows of bytes into the packing's words (igemm.h), 64 columns a step: bytes paired by
 * vpunpck*bw, pairs by vpunpck*wd (within 128-bit lanes), then the lanes put in column order
 * by a 4x4 transpose of lanes; the last columns under masks. Needs AVX-512BW only. */
#define TARGET_BW __attribute__((target("avx512f,avx512bw")))
/* o[q]: the words of columns 16 q .. 16 q + 15 of rows a, b, c, e. */
TARGET_BW static inline void words64(__m512i a, __m512i b, __m512i c, __m512i e, __m512i o[4])
{
    __m512i ab0 = _mm512_unpacklo_epi8(a, b), ab1 = _mm512_unpackhi_epi8(a, b);
    __m512i ce0 = _mm512_unpacklo_epi8(c, e), ce1 = _mm512_unpackhi_epi8(c, e);
    __m512i w0 = _mm512_unpacklo_epi16(ab0, ce0), w1 = _mm512_unpackhi_epi16(ab0, ce0);
    __m512i w2 = _mm512_unpacklo_epi16(ab1, ce1), w3 = _mm512_unpackhi_epi16(ab1, ce1);
    __m512i t0 = _mm512_shuffle_i32x4(w0, w1, 0x44), t1 = _mm512_shuffle_i32x4(w0, w1, 0xEE);
    __m512i t2 = _mm512_shuffle_i32x4(w2, w3, 0x44), t3 = _mm512_shuffle_i32x4(w2, w3, 0xEE);
    o[0] = _mm512_shuffle_i32x4(t0, t2, 0x88);
    o[1] = _mm512_shuffle_i32x4(t0, t2, 0xDD);
    o[2] = _mm512_shuffle_i32x4(t1, t3, 0x88);
    o[3] = _mm512_shuffle_i32x4(t1, t3, 0xDD);
}

TARGET_BW static inline void interleave64(uint32_t *d, __m512i a, __m512i b, __m512i c, __m512i e, __m512i x,
                                          int64_t left)
{
    __m512i o[4];
    words64(a, b, c, e, o);
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

/* The first min(left, 64) bytes at p, zeros after: whole vectors by plain loads, 32 bytes (a
 * head's dimension) by a plain 256-bit load, the rest under the mask lm. */
TARGET static inline __m512i load_cols(const uint8_t *p, int64_t left, __mmask64 lm)
{
    if (left >= 64)
        return _mm512_loadu_si512((const void *)p);
    if (left == 32)
        return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_maskz_loadu_epi8(lm, p);
}

/* qr_igemm_pack_b (igemm.h): 64 columns at a time down all the groups of four rows, the column
 * sums by vpdpbusd of the packed words against ones (exact: four u8 by 1 into each lane). Rows past
 * k load as zeros and are not flipped, columns past n are zeroed by the masked xor. */
TARGET void qr_igemm_pack_b_avx512vnni(uint8_t *dst, const uint8_t *src, int64_t src_rs, int64_t k, int64_t n,
                                       uint8_t flip, int32_t *colsum, int64_t pitch)
{
    int64_t kq = qr_igemm_k4(k) / 4, n16 = qr_igemm_n16(n);
    __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    for (int64_t j = 0; j < n; j += 64) {
        int64_t left = n - j;
        __mmask64 lm = left >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1;
        __m512i s[4] = {zero, zero, zero, zero};
        for (int64_t g = 0; g < kq; g++) {
            const uint8_t *r = src + 4 * g * src_rs + j;
            int have = k - 4 * g < 4 ? (int)(k - 4 * g) : 4;
            __m512i v[4];
            for (int t = 0; t < 4; t++) /* masked loads only where a row ends (they are slow on Zen 5) */
                v[t] = t >= have ? zero : load_cols(r + t * src_rs, left, lm);
            /* the flip on the real rows' bytes only */
            __m512i x = _mm512_set1_epi32((int)(flip * 0x01010101u & 0xffffffffu >> (32 - 8 * have)));
            __m512i o[4];
            words64(v[0], v[1], v[2], v[3], o);
            uint8_t *d = dst + (g * pitch + j) * 4;
            for (int q = 0; q < 4 && j + 16 * q < n16; q++) {
                __m512i w = _mm512_maskz_xor_epi32(cols_mask(left - 16 * q), o[q], x);
                _mm512_storeu_si512((void *)(d + 64 * q), w);
                s[q] = _mm512_dpbusd_epi32(s[q], w, ones);
            }
        }
        for (int q = 0; colsum && q < 4; q++)
            _mm512_mask_storeu_epi32(colsum + j + 16 * q, cols_mask(left - 16 * q), s[q]);
    }
}

/* Lane r of the result: the sum of s[r]'s sixteen lanes, for sixteen rows at once (pairs of rows
 * interleaved and added, then quads, then the 128-bit lanes): about 3 instructions a row, where a
 * row's own reduction was about 10 and most of the packing's time for rows of 32 bytes. */
TARGET static inline __m512i sum16(const __m512i s[16])
{
    __m512i y[4];
    for (int g = 0; g < 4; g++) {
        const __m512i *t = s + 4 * g;
        __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(t[0], t[1]), _mm512_unpackhi_epi32(t[0], t[1]));
        __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(t[2], t[3]), _mm512_unpackhi_epi32(t[2], t[3]));
        /* each 128-bit lane holds rows 4g .. 4g + 3 */
        y[g] = _mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23));
    }
    __m512i w01 = _mm512_add_epi32(_mm512_shuffle_i32x4(y[0], y[1], 0x88), _mm512_shuffle_i32x4(y[0], y[1], 0xDD));
    __m512i w23 = _mm512_add_epi32(_mm512_shuffle_i32x4(y[2], y[3], 0x88), _mm512_shuffle_i32x4(y[2], y[3], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w01, w23, 0x88), _mm512_shuffle_i32x4(w01, w23, 0xDD));
}

/* One row of a (qr_igemm_pack_a) 64 bytes at a time: flipped, stored (d not NULL), and summed
 * into lanes by vpdpbusd of ones against the bytes as s8. Plain loads and stores where they can
 * be: masked byte stores took most of the time on Zen 5. */
TARGET static inline __m512i pack_row(int8_t *d, const uint8_t *r, int64_t k, int64_t k4, __m512i x)
{
    __m512i ones = _mm512_set1_epi8(1), s = _mm512_setzero_si512();
    int64_t q = 0;
    for (; q + 64 <= k; q += 64) {
        __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void *)(r + q)), x);
        if (d)
            _mm512_storeu_si512((void *)(d + q), v);
        s = _mm512_dpbusd_epi32(s, ones, v);
    }
    if (k - q == 32) { /* a head's 32 dimensions: plain 256-bit moves */
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(r + q)),
                                     _mm512_castsi512_si256(x));
        if (d)
            _mm256_storeu_si256((__m256i *)(void *)(d + q), v);
        s = _mm512_dpbusd_epi32(s, ones, _mm512_zextsi256_si512(v));
    } else if (q < k4) {
        __mmask64 lm = ((__mmask64)1 << (k - q)) - 1; /* k - q < 64 */
        __mmask64 sm = k4 - q >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (k4 - q)) - 1;
        /* bytes past k: 0, not the flip */
        __m512i v = _mm512_maskz_mov_epi8(lm, _mm512_xor_si512(_mm512_maskz_loadu_epi8(lm, r + q), x));
        if (d)
            _mm512_mask_storeu_epi8(d + q, sm, v);
        s = _mm512_dpbusd_epi32(s, ones, v);
    }
    return s;
}

/* qr_igemm_pack_a (igemm.h): rows of up to 64 bytes sixteen at a time, their sums reduced
 * together (longer rows amortize their own reduction: 1024 rows of 128 bytes took 2.0 us so,
 * 2.4 us in sixteens; of 32 bytes 1.9 us so, 1.2 us in sixteens). */
TARGET void qr_igemm_pack_a_avx512vnni(int8_t *dst, const uint8_t *src, int64_t src_rs, int64_t rows, int64_t k,
                                       uint8_t flip, int32_t *rowsum)
{
    int64_t k4 = qr_igemm_k4(k), i = 0;
    __m512i x = _mm512_set1_epi8((char)flip);
    for (; k4 <= 64 && i + 16 <= rows; i += 16) {
        __m512i s[16];
        for (int r = 0; r < 16; r++)
            s[r] = pack_row(dst ? dst + (i + r) * k4 : NULL, src + (i + r) * src_rs, k, k4, x);
        if (rowsum)
            _mm512_storeu_si512((void *)(rowsum + i), sum16(s));
    }
    for (; i < rows; i++) {
        __m512i s = pack_row(dst ? dst + i * k4 : NULL, src + i * src_rs, k, k4, x);
        if (rowsum)
            rowsum[i] = _mm512_reduce_add_epi32(s);
    }
}
