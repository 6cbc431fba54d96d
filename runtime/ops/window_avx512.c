/* The f32 window kernels of window_f32.h with AVX-512 (only called when the CPU reports avx512f).
 * An output vector's inputs for one window position are 16 columns of one input row at stride 1,
 * or the even ones of 32 at stride 2; columns outside the row are masked off and read as the
 * padding's value (0 for a convolution, -inf for a maximum), so no bounds test per element. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "window_f32.h"

#include "op.h"

#define TARGET __attribute__((target("avx512f")))

int qr_window_avx512(void)
{
    const char *force = getenv("QRL_WINDOW");
    if (force && !strcmp(force, "portable"))
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

int qr_window_avx512_fits(const qr_conv_geom *g)
{
    return g->r == 2 && (g->stride[1] == 1 || g->stride[1] == 2) && g->stride[0] >= 1 && g->small_n > 0;
}

/* Lanes [lo, hi) of n (n <= 32) set, where column c + lane lies in [0, w). */
static inline uint32_t cols_in(int64_t c, int64_t w, int n)
{
    int64_t lo = c < 0 ? -c : 0, hi = w - c < n ? w - c : n;
    if (hi <= lo)
        return 0;
    uint32_t upto = hi >= 32 ? 0xffffffffu : (1u << hi) - 1;
    return upto & ~((1u << lo) - 1);
}

/* Columns c, c + s, ..., c + 15 s (s = 1 or 2) of row, fill where mask m (cols_in of the 16 s
 * columns from c) is clear. The address is formed as an integer: masked-off lanes may lie before
 * or past the row. */
TARGET static inline __m512 row_load(const float *row, int64_t c, uint32_t m, int s, __m512 fill)
{
    const float *p = (const float *)((uintptr_t)row + (uintptr_t)(c * (int64_t)sizeof(float)));
    if (s == 1)
        return _mm512_mask_loadu_ps(fill, (__mmask16)m, p);
    __m512 lo = _mm512_mask_loadu_ps(fill, (__mmask16)m, p);
    __m512 hi = _mm512_mask_loadu_ps(fill, (__mmask16)(m >> 16), p + 16);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, even, hi);
}

/* The activation (op.h's qr_act_apply) on 16 outputs: ordered compares, so NaN stays. */
TARGET static inline __m512 act_zmm(const qr_act *a, __m512 v)
{
    if (a->relu) {
        __m512 zero = _mm512_setzero_ps();
        return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LE_OQ), zero);
    }
    __m512 lo = _mm512_set1_ps(a->lo), hi = _mm512_set1_ps(a->hi);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
}

static inline __mmask16 out_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* Output rows a pass: four independent sums (one chain of adds was bound by their latency). */
#define WR 4
/* Column blocks x window columns whose masks are tabled once a plane (wider planes compute them). */
#define WIN_MASKS 256

/* Each window position's first column (c) and lanes inside the row (m) for column block ob. */
#define TAP_COL(ob, kx) ((ob) * 16 * S - g->pad_begin[1] + (kx) * g->dilation[1])
#define TAP_MASK(ob, kx) (table ? mk[(ob) * kw + (kx)] : cols_in(TAP_COL(ob, kx), W, 16 * S))

/* Output row oy + r's input row for window row ky: its start and a mask of all lanes when it lies
 * inside the plane, else of none (the loads then read nothing: a row of padding). */
#define ROWS4(X) X(0) X(1) X(2) X(3)
#define ROW_AT(r)                                                                                            \
    int64_t iy##r = (oy + r) * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];                          \
    int in##r = oy + r < OH && iy##r >= 0 && iy##r < H;                                                       \
    const float *row##r = x + (in##r ? iy##r : 0) * W;                                                        \
    uint32_t im##r = in##r ? 0xffffffffu : 0;

/* Row group oy's and column block ob's loads all inside the plane (the interior: plain loads, no
 * masks): every output row of the group exists and reads rows inside, every window column of the
 * block lies inside the row. */
static inline int rows_inside(const qr_conv_geom *g, int64_t oy)
{
    int64_t top = oy * g->stride[0] - g->pad_begin[0];
    int64_t bottom = (oy + WR - 1) * g->stride[0] - g->pad_begin[0] + (g->kernel[0] - 1) * g->dilation[0];
    return oy + WR <= g->small[0] && top >= 0 && bottom < g->big[0];
}

static inline int cols_inside(const qr_conv_geom *g, int64_t ob, int s)
{
    int64_t left = ob * 16 * s - g->pad_begin[1];
    int64_t right = left + 16 * s - 1 + (g->kernel[1] - 1) * g->dilation[1];
    return left >= 0 && right < g->big[1];
}

/* The masks of every column block's window columns, when they fit the table. */
#define FILL_MASKS()                                                                                         \
    uint32_t mk[WIN_MASKS];                                                                                   \
    int table = blocks * kw <= WIN_MASKS;                                                                     \
    for (int64_t ob = 0; table && ob < blocks; ob++)                                                          \
        for (int64_t kx = 0; kx < kw; kx++)                                                                   \
            mk[ob * kw + kx] = cols_in(TAP_COL(ob, kx), W, 16 * S);

/* Columns c, c + S, ... of row: masked (row_load) unless in the interior (IN). */
#define LOAD(IN, row, c, m, fill)                                                                            \
    (IN ? (S == 1 ? _mm512_loadu_ps((row) + (c))                                                              \
                  : _mm512_permutex2var_ps(_mm512_loadu_ps((row) + (c)), even, _mm512_loadu_ps((row) + (c) + 16))) \
        : row_load(row, c, m, S, fill))

/* One row group's column block of a depthwise plane: four rows' sums. */
TARGET static inline __attribute__((always_inline)) void dw_block(const int S, const int KW, const int IN,
                                                                  const qr_conv_geom *g, const float *x,
                                                                  const float *w, const float *bias, const qr_act *act,
                                                                  float *y, int64_t oy, int64_t ob, const uint32_t *mk,
                                                                  int table)
{
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],
                  kw = KW ? KW : g->kernel[1];
    const __m512 zero = _mm512_setzero_ps();
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    (void)even;
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    for (int64_t ky = 0; ky < KH; ky++) {
        ROWS4(ROW_AT)
        for (int64_t kx = 0; kx < kw; kx++) {
            int64_t c = TAP_COL(ob, kx);
            uint32_t m = IN ? 0 : TAP_MASK(ob, kx);
            __m512 wv = _mm512_set1_ps(w[ky * kw + kx]);
            /* a row of padding still adds its products (w * 0), as dw_runs does */
#define DW_TAP(r) a##r = _mm512_add_ps(a##r, _mm512_mul_ps(wv, LOAD(IN, row##r, c, m & im##r, zero)));
            ROWS4(DW_TAP)
#undef DW_TAP
        }
    }
#define DW_STORE(r)                                                                                          \
    if (oy + r < OH) {                                                                                        \
        if (bias) /* last, and only when there is one (0 + -0 would be +0) */                                 \
            a##r = _mm512_add_ps(a##r, _mm512_set1_ps(*bias));                                                \
        if (act)                                                                                              \
            a##r = act_zmm(act, a##r);                                                                        \
        _mm512_mask_storeu_ps(y + (oy + r) * OW + ob * 16, out_mask(OW - ob * 16), a##r);                      \
    }
    ROWS4(DW_STORE)
#undef DW_STORE
}

/* The loops over one plane, with the column stride (S) and, when not 0, the window's width (KW)
 * constants in each copy. */
TARGET static inline __attribute__((always_inline)) void dw_plane(const int S, const int KW, const qr_conv_geom *g,
                                                                  const float *x, const float *w, const float *bias,
                                                                  const qr_act *act, float *y)
{
    const int64_t W = g->big[1], OH = g->small[0], OW = g->small[1], kw = KW ? KW : g->kernel[1],
                  blocks = (OW + 15) / 16;
    FILL_MASKS()
    for (int64_t oy = 0; oy < OH; oy += WR) {
        int rin = rows_inside(g, oy);
        for (int64_t ob = 0; ob < blocks; ob++)
            if (rin && cols_inside(g, ob, S) && OW - ob * 16 >= 16)
                dw_block(S, KW, 1, g, x, w, bias, act, y, oy, ob, mk, table);
            else
                dw_block(S, KW, 0, g, x, w, bias, act, y, oy, ob, mk, table);
    }
}

TARGET void qr_dw_plane_f32_avx512(const qr_conv_geom *g, const float *x, const float *w, const float *bias,
                                   const qr_act *act, float *y)
{
    int s2 = g->stride[1] == 2, k3 = g->kernel[1] == 3;
    if (k3)
        s2 ? dw_plane(2, 3, g, x, w, bias, act, y) : dw_plane(1, 3, g, x, w, bias, act, y);
    else
        s2 ? dw_plane(2, 0, g, x, w, bias, act, y) : dw_plane(1, 0, g, x, w, bias, act, y);
}

/* One row group's column block of a MaxPool plane. */
TARGET static inline __attribute__((always_inline)) void max_block(const int S, const int KW, const int IN,
                                                                   const qr_conv_geom *g, const float *x, float *y,
                                                                   int64_t oy, int64_t ob, const uint32_t *mk,
                                                                   int table)
{
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],
                  kw = KW ? KW : g->kernel[1];
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    (void)even;
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    for (int64_t ky = 0; ky < KH; ky++) {
        ROWS4(ROW_AT)
        for (int64_t kx = 0; kx < kw; kx++) {
            int64_t c = TAP_COL(ob, kx);
            uint32_t m = IN ? 0 : TAP_MASK(ob, kx);
            /* v > a ? v : a: the earlier of equals, never NaN; padding reads -inf, which never wins,
             * as skipping it */
#define MAX_TAP(r) a##r = _mm512_max_ps(LOAD(IN, row##r, c, m & im##r, ninf), a##r);
            ROWS4(MAX_TAP)
#undef MAX_TAP
        }
    }
#define MAX_STORE(r)                                                                                         \
    if (oy + r < OH)                                                                                          \
        _mm512_mask_storeu_ps(y + (oy + r) * OW + ob * 16, out_mask(OW - ob * 16), a##r);
    ROWS4(MAX_STORE)
#undef MAX_STORE
}

TARGET static inline __attribute__((always_inline)) void max_plane(const int S, const int KW, const qr_conv_geom *g,
                                                                   const float *x, float *y)
{
    const int64_t W = g->big[1], OH = g->small[0], OW = g->small[1], kw = KW ? KW : g->kernel[1],
                  blocks = (OW + 15) / 16;
    FILL_MASKS()
    for (int64_t oy = 0; oy < OH; oy += WR) {
        int rin = rows_inside(g, oy);
        for (int64_t ob = 0; ob < blocks; ob++)
            if (rin && cols_inside(g, ob, S) && OW - ob * 16 >= 16)
                max_block(S, KW, 1, g, x, y, oy, ob, mk, table);
            else
                max_block(S, KW, 0, g, x, y, oy, ob, mk, table);
    }
}

TARGET void qr_maxpool_plane_f32_avx512(const qr_conv_geom *g, const float *x, float *y)
{
    int s2 = g->stride[1] == 2, k3 = g->kernel[1] == 3;
    if (k3)
        s2 ? max_plane(2, 3, g, x, y) : max_plane(1, 3, g, x, y);
    else
        s2 ? max_plane(2, 0, g, x, y) : max_plane(1, 0, g, x, y);
}
