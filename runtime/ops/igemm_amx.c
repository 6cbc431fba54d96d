/* The integer matrix products' kernel (qr_igemm_rc_fn, igemm.h: MatMulInteger, QLinearMatMul and
 * the dynamic recipes' per-row zero points) on AMX-INT8: tdpbsud multiplies a 16 x 64 tile of s8
 * rows of A by a 64 x 16 tile of u8 columns of B into 16 x 16 int32 sums, wrapping as vpdpbusd's
 * do, so the results are the VNNI kernel's bits.
 *
 * No operand is copied on the main path: an A tile is 16 of its rows (k4 bytes apart), a B tile
 * 16 k groups of 16 columns of the packing as it is ([K4/4][pitch][4]: 64 bytes a group, the next
 * group pitch * 4 bytes on). A ragged last 64 of K is copied, for A and B, into zeroed 1 KB tiles
 * (a whole tile would read past A's last row and B's end). A ragged last 16 rows load the 16
 * rows that end at m1 (rows before m0 are A's too: the kernel's rows are absolute) and store only
 * the new ones, so no row is copied; m1 < 16 leaves no such 16 and runs the VNNI kernel.
 * Blocking: 2 x 2 tiles of sums (32 rows x 32 columns), 2 A and 2 B tiles: the eight tiles.
 * Column pairs outer, row pairs inner: a pair's B (K * 32 bytes) stays in L1/L2 while the rows
 * pass. The epilogue (init per row, cinit per column, - rz[row] * csum[column]) is added where
 * the sums leave the tiles. The tiles are configured at each call and released at its end.
 * Only called after qr_amx_usable(). */
#include <immintrin.h>
#include <string.h>

#include "igemm.h"

#define TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw")))

void qr_igemm_u8s8_rc_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init,
                                      const int32_t *cinit, const int32_t *rz, const int32_t *csum, int64_t m0,
                                      int64_t m1, const uint8_t *b, int64_t k4, int64_t n, int64_t pitch);

/* Rows r0 .. r0 + rows of c's columns j .. j + cols (cols <= 16) from a tile's sums (sums: the
 * tile's row of r0), with init[r] + cinit[j] - rz[r] * csum[j] added, wrapping. */
TARGET static void store_rc(int32_t *c, int64_t c_rs, const int32_t *sums, int64_t r0, int64_t rows, int64_t j,
                            int64_t cols, const int32_t *init, const int32_t *cinit, const int32_t *rz,
                            const int32_t *csum)
{
    __mmask16 k = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    __m512i cv = cinit ? _mm512_maskz_loadu_epi32(k, cinit + j) : _mm512_setzero_si512();
    __m512i cs = rz ? _mm512_maskz_loadu_epi32(k, csum + j) : _mm512_setzero_si512();
    for (int64_t r = 0; r < rows; r++) {
        int64_t m = r0 + r;
        __m512i v = _mm512_add_epi32(_mm512_load_si512(sums + 16 * r), _mm512_add_epi32(cv, _mm512_set1_epi32(init[m])));
        if (rz)
            v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(rz[m]), cs));
        _mm512_mask_storeu_epi32(c + m * c_rs + j, k, v);
    }
}

/* The ragged last q groups of four k (t of them, 0 < t < 16) of 16 rows of A from row s, as a tile
 * of 64-byte rows, zero past them. */
static void copy_a_tail(int8_t *d, const int8_t *a, int64_t s, int64_t k4, int64_t full, int64_t t)
{
    memset(d, 0, 1024);
    for (int r = 0; r < 16; r++)
        memcpy(d + r * 64, a + (s + r) * k4 + full * 64, (size_t)(t * 4));
}

TARGET void qr_igemm_u8s8_rc_amx(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                                 const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                                 int64_t k4, int64_t n, int64_t pitch)
{
    if (m1 <= m0 || n <= 0)
        return;
    if (m1 < 16) { /* not 16 rows of A to load: the same sums by VNNI */
        qr_igemm_u8s8_rc_8x32_avx512vnni(c, c_rs, a, init, cinit, rz, csum, m0, m1, b, k4, n, pitch);
        return;
    }
    int64_t full = k4 / 64, t = k4 % 64 / 4, bs = pitch * 4;
    int8_t at[2][1024] __attribute__((aligned(64)));
    uint8_t bt[2][1024] __attribute__((aligned(64)));
    int32_t sums[256] __attribute__((aligned(64)));

    qr_amx_tiles_16x64();
    for (int64_t j = 0; j < n; j += 32) {
        int two = j + 16 < n; /* a second column tile with columns to store */
        const uint8_t *bj = b + j * 4;
        if (t) {
            memset(bt, 0, sizeof bt);
            for (int64_t q = 0; q < t; q++) {
                memcpy(bt[0] + q * 64, bj + (full * 16 + q) * bs, 64);
                if (two)
                    memcpy(bt[1] + q * 64, bj + (full * 16 + q) * bs + 64, 64);
            }
        }
        for (int64_t i = m0; i < m1; i += 32) {
            int down = i + 16 < m1; /* a second row tile with rows to store */
            /* the tiles' first rows: the 16 rows ending at m1 where fewer than 16 are left */
            int64_t s0 = i + 16 <= m1 ? i : m1 - 16, s1 = i + 32 <= m1 ? i + 16 : m1 - 16;
            const int8_t *a0 = a + s0 * k4, *a1 = a + s1 * k4;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t q = 0; q < full; q++) {
                const uint8_t *b0 = bj + q * 16 * bs;
                _tile_loadd(4, a0 + q * 64, k4);
                _tile_loadd(6, b0, bs);
                _tile_dpbsud(0, 4, 6);
                if (down) {
                    _tile_loadd(5, a1 + q * 64, k4);
                    _tile_dpbsud(1, 5, 6);
                }
                if (two) {
                    _tile_loadd(7, b0 + 64, bs);
                    _tile_dpbsud(2, 4, 7);
                    if (down)
                        _tile_dpbsud(3, 5, 7);
                }
            }
            if (t) {
                copy_a_tail(at[0], a, s0, k4, full, t);
                _tile_loadd(4, at[0], 64);
                _tile_loadd(6, bt[0], 64);
                _tile_dpbsud(0, 4, 6);
                if (down) {
                    copy_a_tail(at[1], a, s1, k4, full, t);
                    _tile_loadd(5, at[1], 64);
                    _tile_dpbsud(1, 5, 6);
                }
                if (two) {
                    _tile_loadd(7, bt[1], 64);
                    _tile_dpbsud(2, 4, 7);
                    if (down)
                        _tile_dpbsud(3, 5, 7);
                }
            }
            int64_t r0 = m1 - i < 16 ? m1 - i : 16, r1 = m1 - i - 16 < 16 ? m1 - i - 16 : 16;
            int64_t c0 = n - j < 16 ? n - j : 16, c1 = n - j - 16 < 16 ? n - j - 16 : 16;
            _tile_stored(0, sums, 64);
            store_rc(c, c_rs, sums + 16 * (i - s0), i, r0, j, c0, init, cinit, rz, csum);
            if (down) {
                _tile_stored(1, sums, 64);
                store_rc(c, c_rs, sums + 16 * (i + 16 - s1), i + 16, r1, j, c0, init, cinit, rz, csum);
            }
            if (two) {
                _tile_stored(2, sums, 64);
                store_rc(c, c_rs, sums + 16 * (i - s0), i, r0, j + 16, c1, init, cinit, rz, csum);
                if (down) {
                    _tile_stored(3, sums, 64);
                    store_rc(c, c_rs, sums + 16 * (i + 16 - s1), i + 16, r1, j + 16, c1, init, cinit, rz, csum);
                }
            }
        }
    }
    _tile_release();
}
