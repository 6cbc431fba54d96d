/* The NHWC indirect GEMM (qr_iconv_fn, igemm.h) with AVX-512 VNNI: four u8
 * activations of one output pixel broadcast against 16 columns of packed s8
 * weights per vpdpbusd (the wrapping form: sums wrap modulo 2^32 as QRL's
 * contract says; vpdpbusds would saturate). Tile: 6 rows x 64 columns, 24
 * zmm sums, the four weight vectors of a k group loaded once for the six
 * rows; ragged last rows in tiles of 3, 2 and 1, ragged last columns under
 * masks. Only called when the CPU reports avx512vnni (igemm.c). */
#include <immintrin.h>
#include <string.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define INLINE TARGET static inline __attribute__((always_inline))

INLINE __m512i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static inline __mmask16 cols_mask(int64_t cols)
{
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
}

/* acc = vpdpbusd(acc, u8 b, s8 w) with acc tied to its register. Through the intrinsic GCC 12
 * gave each sum of the 6x4 tile a second register and copied it there and back (and to the
 * stack) every k group: 63 moves in the loop where there are none now (objdump of tile_6x4). */
#define DPBUSD(acc, b, w) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(b), "v"(w))

/* The tile's parts, for rows r < 6 and vectors v < 4; those past MR x NV are dead code. The sums
 * are named variables (an array of them was copied through the stack). */
#define FOR_V(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3)
#define FOR_RV(X) FOR_V(X, 0) FOR_V(X, 1) FOR_V(X, 2) FOR_V(X, 3) FOR_V(X, 4) FOR_V(X, 5)
#define FOR_R(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define DECL(r, v) __m512i s##r##v = _mm512_setzero_si512();
#define PTR(r) const uint8_t *p##r = a[(MR > r ? r : 0) * taps + t];
#define LOADW(v) __m512i w##v = NV > v ? _mm512_loadu_si512((const void *)(wq + 64 * v)) : _mm512_setzero_si512();
#define DP(r, v)                                                                                                    \
    if (MR > r && NV > v)                                                                                         \
        DPBUSD(s##r##v, b##r, w##v);
/* one row's broadcast, used at once (six live together would not leave registers for the sums) */
#define ROW_DP(r)                                                                                                   \
    if (MR > r) {                                                                                                 \
        __m512i b##r = bcast4(p##r + o);                                                                          \
        FOR_V(DP, r)                                                                                              \
    }
#define STORE(r, v)                                                                                                 \
    if (MR > r && NV > v)                                                                                         \
        _mm512_mask_storeu_epi32(c + r * c_rs + 16 * v, k##v, _mm512_add_epi32(s##r##v, i##v));

/* MR rows (their tap pointers from a) x NV vectors of 16 columns from wj (the strip's first
 * column in the panels), cols columns stored; MR and NV are constants where this is inlined. The
 * sums start at zero and init is added at the store; the loops are do-while (taps and kq are at
 * least 1); the masks are computed before the loops. (Each of these keeps GCC 12 from copying
 * sums in the k loop again, as objdump of tile_6x4 shows: fragile, look there after a change.)
 * The k groups of one tap are one loop, its four weight vectors loaded once for the rows. */
INLINE void tile(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, const int8_t *wj,
                 const int32_t *init, int64_t kq, int64_t step, int64_t cols, const int MR, const int NV)
{
    __mmask16 k0 = cols_mask(cols), k1 = cols_mask(cols - 16), k2 = cols_mask(cols - 32), k3 = cols_mask(cols - 48);
    FOR_RV(DECL)
    int64_t t = 0;
    do {
        FOR_R(PTR)
        const int8_t *wq = wj + t * kq * step, *wend = wq + kq * step;
        int64_t o = 0;
        do {
            LOADW(0) LOADW(1) LOADW(2) LOADW(3)
            FOR_R(ROW_DP)
            wq += step;
            o += 4;
        } while (wq != wend);
    } while (++t < taps);
    __m512i i0 = _mm512_maskz_loadu_epi32(k0, init), i1 = _mm512_maskz_loadu_epi32(k1, init + 16),
            i2 = _mm512_maskz_loadu_epi32(k2, init + 32), i3 = _mm512_maskz_loadu_epi32(k3, init + 48);
    FOR_RV(STORE)
}

/* One function per tile shape: the sums of each stay in registers. */
#define SHAPE(MR, NV)                                                                                               \
    TARGET static void tile_##MR##x##NV(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps,          \
                                        const int8_t *wj, const int32_t *init, int64_t kq, int64_t step,          \
                                        int64_t cols)                                                             \
    {                                                                                                             \
        tile(c, c_rs, a, taps, wj, init, kq, step, cols, MR, NV);                                                 \
    }
#define SHAPES(MR) SHAPE(MR, 1) SHAPE(MR, 2) SHAPE(MR, 3) SHAPE(MR, 4)
SHAPES(6)
SHAPES(3)
SHAPES(2)
SHAPES(1)

typedef void (*tile_fn)(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, const int8_t *wj,
                        const int32_t *init, int64_t kq, int64_t step, int64_t cols);
#define ROW(MR) {tile_##MR##x1, tile_##MR##x2, tile_##MR##x3, tile_##MR##x4}
static const tile_fn tiles[4][4] = {ROW(1), ROW(2), ROW(3), ROW(6)}; /* [rows: 1, 2, 3, 6][vectors - 1] */

/* The rows of the tile at row i: 6, else 3, 2, 1. */
static inline int tile_rows(int64_t m, int64_t i)
{
    return m - i >= 6 ? 6 : m - i >= 3 ? 3 : (int)(m - i);
}

/* The tile at row i over columns [j, j1). */
TARGET static void tile_at(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                           const int8_t *w, const int32_t *init, int64_t kq, int64_t n16, int64_t i, int64_t j,
                           int64_t j1)
{
    int64_t cols = j1 - j, step;
    int nv = cols >= 64 ? 4 : (int)((cols + 15) / 16); /* only vectors with a column to store */
    int rows = tile_rows(m, i);
    const int8_t *wj = qr_iconv_col(w, taps * kq * 4, n16, j, &step);
    tiles[rows == 6 ? 3 : rows - 1][nv - 1](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
}

/* When all the columns' weights fit in L1 (a 1x1 convolution's, say), rows outer: each row
 * block's activations are read from memory once for all column strips. Else column strips of 64
 * outer: a strip's weights (taps * k4 * 64 bytes) stay in L1 or L2 while every row passes over
 * them. (m 3136, taps 1, k4 64, n 256, best of 25 on a shared Zen 5: 147 -> 166 GMAC/s rows
 * outer; the 3x3 layers of bench/iconv_gmacs.c within the noise either way.) */
TARGET void qr_iconv_u8s8_6x64_avx512vnni(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps,
                                          int64_t m, const int8_t *w, const int32_t *init, int64_t k4, int64_t j0,
                                          int64_t j1, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), kq = k4 / 4;
    if (j1 > n)
        j1 = n;
    if (taps * kq * n16 * 4 <= 32 * 1024) {
        for (int64_t i = 0; i < m; i += tile_rows(m, i))
            for (int64_t j = j0; j < j1; j += 64)
                tile_at(c, c_rs, a, taps, m, w, init, kq, n16, i, j, j1);
    } else {
        for (int64_t j = j0; j < j1; j += 64)
            for (int64_t i = 0; i < m; i += tile_rows(m, i))
                tile_at(c, c_rs, a, taps, m, w, init, kq, n16, i, j, j1);
    }
}
