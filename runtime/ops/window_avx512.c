/* The f32 window kernels of window_f32.h with AVX-512 (only called when the CPU reports avx512f).
 * An output vector's inputs for one window position are 16 columns of one input row at stride 1,
 * or the even ones of 32 at stride 2; columns outside the row are masked off and read as the
 * padding's value (0 for a convolution, -inf for a maximum), so no bounds test per element. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "window_f32.h"
#include "act_avx512.h"

#include "op.h"
#include "options.h"

#define TARGET __attribute__((target("avx512f")))

int qr_window_avx512(void)
{
    if (qr_options_get()->window_portable)
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

static inline __mmask16 out_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* Output rows a pass: four independent sums (one chain of adds was bound by their latency). */
#define WR 4
/* Window positions the depthwise kernel takes at most (its table of their inputs is on the stack). */
#define DW_TAPS_MAX 64
/* Vectors a padded row (or phase of one) holds at most (their masks are on the stack too). */
#define DW_VEC_MAX 64
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

/* The in-place kernel for planes one vector wide (OW <= 16): a row group's column block of four
 * rows' sums, each window position a masked load of the input row. On MobileNetV2's 14x14 and 7x7
 * planes it measured faster than copying rows into the ring (1 block a row: the copies and the
 * per-plane setup did not pay). */
TARGET static inline __attribute__((always_inline)) void dwi_block(const int S, const int KW, const int IN,
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
            a##r = qr_act_zmm(act, a##r);                                                                        \
        _mm512_mask_storeu_ps(y + (oy + r) * OW + ob * 16, out_mask(OW - ob * 16), a##r);                      \
    }
    ROWS4(DW_STORE)
#undef DW_STORE
}

/* The loops over one plane, with the column stride (S) and, when not 0, the window's width (KW)
 * constants in each copy. */
TARGET static inline __attribute__((always_inline)) void dwi_plane(const int S, const int KW, const qr_conv_geom *g,
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
                dwi_block(S, KW, 1, g, x, w, bias, act, y, oy, ob, mk, table);
            else
                dwi_block(S, KW, 0, g, x, w, bias, act, y, oy, ob, mk, table);
    }
}

/* The depthwise kernel reads padded copies of the plane's rows (0 on the padding, so every load is
 * a plain one and the padding's products are added as before), at column stride 2 each row's even
 * padded columns then its odd ones, wq apart, so a window column's 16 inputs are again one load.
 * The copies live in a ring of the rows one row group reads, copied as the groups reach them:
 * small enough to stay in L1 (a whole padded plane, 72 KB at 112x112, did not, and copying it
 * took 2.5x the time of reading the input). The masked taps this replaces (row tests and a mask
 * per tap) took 3-4x the time of the products on MobileNetV2's planes. */
static int64_t dw_blocks(const qr_conv_geom *g)
{
    return (g->small[1] + 15) / 16;
}

/* Padded rows one row group of WR output rows reads: the ring's length. */
static int64_t dw_ring(const qr_conv_geom *g)
{
    return (WR - 1) * g->stride[0] + (g->kernel[0] - 1) * g->dilation[0] + 1;
}

/* Elements of one phase's row (stride 2) or of the row (stride 1), a multiple of 16. */
static int64_t dw_phase_width(const qr_conv_geom *g)
{
    int64_t reach = (g->kernel[1] - 1) * g->dilation[1];
    int64_t n = dw_blocks(g) * 16 + (g->stride[1] == 2 ? reach >> 1 : reach);
    return (n + 15) / 16 * 16;
}

int64_t qr_dw_f32_avx512_work(const qr_conv_geom *g)
{
    return 2 * (dw_ring(g) + WR * g->stride[0]) * g->stride[1] * dw_phase_width(g);
}

/* A plane's padded-row copy, worked out once a plane: vectors of 16 (stride 1) or 32 (stride 2)
 * input columns a row, each from column col0 + vector * 16 * S with the lanes inside the row
 * masked (the rest read as 0). */
typedef struct dw_copy {
    int64_t H, W, pt, wq, nvec, col0;
    uint32_t mask[DW_VEC_MAX];
} dw_copy;

static void dw_copy_init(const int S, const qr_conv_geom *g, dw_copy *c)
{
    c->H = g->big[0], c->W = g->big[1], c->pt = g->pad_begin[0], c->wq = dw_phase_width(g), c->nvec = c->wq / 16;
    c->col0 = -g->pad_begin[1];
    for (int64_t k = 0; k < c->nvec; k++)
        c->mask[k] = cols_in(c->col0 + k * 16 * S, c->W, 16 * S);
}

/* Padded row r (input row r - pad top; 0 outside the plane) of plane x into dr and its twin dr2. */
TARGET static inline __attribute__((always_inline)) void dw_pad_row(const int S, const dw_copy *c, const float *x,
                                                                    int64_t r, float *dr, float *dr2)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const int64_t iy = r - c->pt, wq = c->wq;
    if (iy < 0 || iy >= c->H) {
        const __m512 zero = _mm512_setzero_ps();
        for (int64_t i = 0; i < S * wq; i += 16) {
            _mm512_storeu_ps(dr + i, zero);
            _mm512_storeu_ps(dr2 + i, zero);
        }
        return;
    }
    /* formed as an integer: masked-off lanes may lie before or past the row */
    const float *p = (const float *)((uintptr_t)(x + iy * c->W) + (uintptr_t)(c->col0 * (int64_t)sizeof(float)));
    for (int64_t k = 0; k < c->nvec; k++, p += 16 * S) {
        uint32_t m = c->mask[k];
        __m512 lo = _mm512_maskz_loadu_ps((__mmask16)m, p);
        if (S == 1) {
            _mm512_storeu_ps(dr + k * 16, lo);
            _mm512_storeu_ps(dr2 + k * 16, lo);
            continue;
        }
        __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), p + 16);
        __m512 ev = _mm512_permutex2var_ps(lo, even, hi), od = _mm512_permutex2var_ps(lo, odd, hi);
        _mm512_storeu_ps(dr + k * 16, ev);
        _mm512_storeu_ps(dr + wq + k * 16, od);
        _mm512_storeu_ps(dr2 + k * 16, ev);
        _mm512_storeu_ps(dr2 + wq + k * 16, od);
    }
}

/* The bias (only when there is one: 0 + -0 would be +0) and the activation on one output vector,
 * stored with the row's last block masked. */
TARGET static inline void dw_store(const qr_conv_geom *g, const float *bias, const qr_act *act, float *y,
                                   int64_t oy, int64_t ob, __m512 v)
{
    if (oy >= g->small[0])
        return;
    if (bias)
        v = _mm512_add_ps(v, _mm512_set1_ps(*bias));
    if (act)
        v = qr_act_zmm(act, v);
    _mm512_mask_storeu_ps(y + oy * g->small[1] + ob * 16, out_mask(g->small[1] - ob * 16), v);
}

/* Output rows oy .. oy + WR - 1, column blocks ob .. ob + NB - 1 (NB 1 or 2) of a depthwise plane:
 * each sum from 0 over the window positions t in (ky, kx) order, w[t] times the 16 inputs at
 * d + toff[t] + r * rstep + 16 * block, a multiply then an add; then dw_store. The positions are a
 * loop: unrolled, GCC spilled the sums and interleaved loads to the stack. */
TARGET static inline __attribute__((always_inline)) void dw_group(const int NB, const qr_conv_geom *g, const float *d,
                                                                  const int64_t *toff, int64_t rstep, const float *w,
                                                                  const float *bias, const qr_act *act, float *y,
                                                                  int64_t oy, int64_t ob)
{
    const __m512 zero = _mm512_setzero_ps();
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero, b0 = zero, b1 = zero, b2 = zero, b3 = zero;
    d += ob * 16;
    for (int64_t t = 0; t < g->kernel_n; t++) {
        const float *p = d + toff[t];
        __m512 wv = _mm512_set1_ps(w[t]);
#define DW_TAP(r)                                                                                            \
    a##r = _mm512_add_ps(a##r, _mm512_mul_ps(wv, _mm512_loadu_ps(p + r * rstep)));                           \
    if (NB == 2)                                                                                              \
        b##r = _mm512_add_ps(b##r, _mm512_mul_ps(wv, _mm512_loadu_ps(p + r * rstep + 16)));
        ROWS4(DW_TAP)
#undef DW_TAP
    }
#define DW_OUT(r)                                                                                            \
    dw_store(g, bias, act, y, oy + r, ob, a##r);                                                              \
    if (NB == 2)                                                                                              \
        dw_store(g, bias, act, y, oy + r, ob + 1, b##r);
    ROWS4(DW_OUT)
#undef DW_OUT
}

/* Copies padded rows [from, to) of the plane into the ring of L rows (work), each twice, L slots
 * apart. */
TARGET static inline __attribute__((always_inline)) void dw_fill(const int S, const dw_copy *cp, const float *x,
                                                                 int64_t from, int64_t to, int64_t L, int64_t rs,
                                                                 float *work)
{
    int64_t slot = from % L;
    for (int64_t r = from; r < to; r++) {
        dw_pad_row(S, cp, x, r, work + slot * rs, work + (slot + L) * rs);
        slot = slot + 1 == L ? 0 : slot + 1;
    }
}

/* One plane: row groups of WR rows by pairs of column blocks (eight sums in flight: four left the
 * adds' latency exposed). Each group reads n padded rows from a ring of L = n + WR * stride rows,
 * each held twice (L slots apart, so a group's rows are contiguous from its first one's slot and
 * every window position is a constant offset). A group first copies the rows the next group adds:
 * the taps' loads, straddling the copies' stores, waited for them to leave the store buffer when
 * a group read the rows it had just copied. */
TARGET static inline __attribute__((always_inline)) void dw_plane(const int S, const qr_conv_geom *g, const float *x,
                                                                  const float *w, const float *bias, const qr_act *act,
                                                                  float *work, float *y)
{
    const int64_t blocks = dw_blocks(g), OH = g->small[0], n = dw_ring(g), wq = dw_phase_width(g), rs = S * wq,
                  KW = g->kernel[1], sy = g->stride[0], rstep = sy * rs, L = n + WR * sy;
    int64_t toff[DW_TAPS_MAX];
    for (int64_t t = 0; t < g->kernel_n; t++) {
        int64_t col = t % KW * g->dilation[1];
        toff[t] = t / KW * g->dilation[0] * rs + (S == 2 ? (col & 1) * wq + (col >> 1) : col);
    }
    dw_copy cp;
    dw_copy_init(S, g, &cp);
    dw_fill(S, &cp, x, 0, n, L, rs, work);
    for (int64_t oy = 0; oy < OH; oy += WR) {
        int64_t first = oy * sy, next = first + WR * sy;
        if (oy + WR < OH) /* the next group's rows past this one's */
            dw_fill(S, &cp, x, next > first + n ? next : first + n, next + n, L, rs, work);
        const float *d = work + first % L * rs;
        int64_t ob = 0;
        for (; ob + 2 <= blocks; ob += 2)
            dw_group(2, g, d, toff, rstep, w, bias, act, y, oy, ob);
        if (ob < blocks)
            dw_group(1, g, d, toff, rstep, w, bias, act, y, oy, ob);
    }
}

int qr_dw_f32_avx512_fits(const qr_conv_geom *g)
{
    return qr_window_avx512_fits(g) && g->kernel_n <= DW_TAPS_MAX && dw_phase_width(g) <= 16 * DW_VEC_MAX;
}

TARGET void qr_dw_plane_f32_avx512(const qr_conv_geom *g, const float *x, const float *w, const float *bias,
                                   const qr_act *act, float *work, float *y)
{
    int s2 = g->stride[1] == 2;
    if (dw_blocks(g) == 1) {
        int k3 = g->kernel[1] == 3;
        if (k3)
            s2 ? dwi_plane(2, 3, g, x, w, bias, act, y) : dwi_plane(1, 3, g, x, w, bias, act, y);
        else
            s2 ? dwi_plane(2, 0, g, x, w, bias, act, y) : dwi_plane(1, 0, g, x, w, bias, act, y);
    } else if (s2)
        dw_plane(2, g, x, w, bias, act, work, y);
    else
        dw_plane(1, g, x, w, bias, act, work, y);
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
