/* The NHWC indirect GEMM (qr_iconv_fn, igemm.h) with AVX-VNNI (the VEX form of
 * vpdpbusd on 256-bit registers, for CPUs with VNNI but no AVX-512): four u8
 * activations of one output pixel broadcast against 8 columns of packed s8
 * weights, the wrapping form as in the AVX-512 kernel. Tile: 4 rows x 16
 * columns (8 sums, two weight vectors per k group for the four rows); ragged
 * last rows in tiles of 2 and 1, ragged last columns under masks. Only
 * called when the CPU reports avxvnni (igemm.c). */
#include <immintrin.h>
#include <string.h>

#include "igemm.h"

#define TARGET __attribute__((target("avx2,avxvnni")))
#define INLINE TARGET static inline __attribute__((always_inline))

INLINE __m256i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Lanes below cols all ones (vpmaskmovd's mask). */
INLINE __m256i cols_mask(int64_t cols)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols > 8 ? 8 : cols < 0 ? 0 : (int)cols),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define FOR_V(X, r) X(r, 0) X(r, 1)
#define FOR_RV(X) FOR_V(X, 0) FOR_V(X, 1) FOR_V(X, 2) FOR_V(X, 3)
#define FOR_R(X) X(0) X(1) X(2) X(3)
#define DECL(r, v) __m256i s##r##v = _mm256_setzero_si256();
#define LOADW(v) __m256i w##v = NV > v ? _mm256_loadu_si256((const __m256i *)(wq + 32 * v)) : _mm256_setzero_si256();
#define DP(r, v)                                                                                                    \
    if (NV > v)                                                                                                   \
        s##r##v = _mm256_dpbusd_avx_epi32(s##r##v, b, w##v);
#define ROW_DP(r)                                                                                                   \
    if (MR > r) {                                                                                                 \
        __m256i b = bcast4(p##r + o);                                                                             \
        FOR_V(DP, r)                                                                                              \
    }
#define PTR(r) const uint8_t *p##r = a[(MR > r ? r : 0) * taps + t];
#define STORE(r, v)                                                                                                 \
    if (MR > r && NV > v)                                                                                         \
        _mm256_maskstore_epi32(c + r * c_rs + 8 * v, k##v, _mm256_add_epi32(s##r##v, i##v));

/* MR rows x NV vectors of 8 columns, cols of them stored; MR and NV constants where inlined, the
 * sums named variables (zero at first, init added at the store) and the loops do-while (taps
 * and kq are at least 1), as in the AVX-512 kernel. GCC 12 still moves some of the 4x2 tile's
 * sums between registers each k group (12 register moves in the loop; through an asm vpdpbusd as
 * in the AVX-512 kernel it was more, the 16 ymm registers being short). */
INLINE void tile(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, const int8_t *wj,
                 const int32_t *init, int64_t kq, int64_t step, int64_t cols, const int MR, const int NV)
{
    FOR_RV(DECL)
    int64_t t = 0;
    do {
        FOR_R(PTR)
        const int8_t *wq = wj + t * kq * step, *wend = wq + kq * step;
        int64_t o = 0;
        do {
            LOADW(0) LOADW(1)
            FOR_R(ROW_DP)
            wq += step;
            o += 4;
        } while (wq != wend);
    } while (++t < taps);
    __m256i k0 = cols_mask(cols), k1 = cols_mask(cols - 8);
    __m256i i0 = _mm256_maskload_epi32(init, k0), i1 = _mm256_maskload_epi32(init + 8, k1);
    FOR_RV(STORE)
}

#define SHAPE(MR, NV)                                                                                               \
    TARGET static void tile_##MR##x##NV(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps,          \
                                        const int8_t *wj, const int32_t *init, int64_t kq, int64_t step,          \
                                        int64_t cols)                                                             \
    {                                                                                                             \
        tile(c, c_rs, a, taps, wj, init, kq, step, cols, MR, NV);                                                 \
    }
SHAPE(4, 1) SHAPE(4, 2) SHAPE(2, 1) SHAPE(2, 2) SHAPE(1, 1) SHAPE(1, 2)

typedef void (*tile_fn)(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, const int8_t *wj,
                        const int32_t *init, int64_t kq, int64_t step, int64_t cols);
static const tile_fn tiles[3][2] = {{tile_1x1, tile_1x2}, {tile_2x1, tile_2x2}, {tile_4x1, tile_4x2}};

TARGET void qr_iconv_u8s8_4x16_avxvnni(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                       const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1,
                                       int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), step, kq = k4 / 4;
    if (j1 > n)
        j1 = n;
    for (int64_t j = j0; j < j1; j += 16) {
        int64_t cols = j1 - j;
        int nv = cols > 8 ? 2 : 1;
        const int8_t *wj = qr_iconv_col(w, taps * k4, n16, j, &step);
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            tiles[2][nv - 1](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
        while (i < m) {
            int rows = m - i >= 2 ? 2 : 1;
            tiles[rows - 1][nv - 1](c + i * c_rs + j, c_rs, a + i * taps, taps, wj, init + j, kq, step, cols);
            i += rows;
        }
    }
}
