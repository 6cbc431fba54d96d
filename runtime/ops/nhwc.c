/* NHWC kernels of the integer graph (nhwc.h): a pixel's channels are
 * contiguous, so every loop here runs over channels, the vectors' lanes, and
 * a window is a rectangle of taps [ky0, ky1) x [kx0, kx1) found once per
 * output pixel: no tap tests padding. */
#include "nhwc.h"
#include "permute.h"

#include <assert.h>
#include <immintrin.h>
#include <string.h>

/* The taps k in [k0, k1) of a window whose tap k reads i0 + k * d that land in [0, n);
 * k0 = k1 when none does. */
static inline void tap_range(int64_t i0, int64_t d, int64_t K, int64_t n, int64_t *k0, int64_t *k1)
{
    int64_t lo = i0 >= 0 ? 0 : (-i0 + d - 1) / d, hi = i0 > n - 1 ? 0 : (n - 1 - i0) / d + 1;
    lo = lo < K ? lo : K;
    hi = hi < K ? hi : K;
    *k0 = lo;
    *k1 = hi > lo ? hi : lo;
}

/* ---- depthwise convolution ----
 * One kernel per instruction set, chosen at run time (qr_nhwc_dw_u8_isa): GCC 12 lowers the
 * byte-to-int32 widening of its generic vectors (__builtin_convertvector) to one byte at a time,
 * so the AVX-512 and AVX2 kernels widen with vpmovzxbd / vpmovsxbd intrinsics. i8 bytes (sgn) are
 * sign-extended with the zero point lowered by 128: (x ^ 0x80) - xz = (int8_t)x - (xz - 128).
 * Products and sums wrap as uint32 (vpmulld, vpaddd keep the low 32 bits). */

/* One output pixel, portable: a[c] = init[c] + sum over taps (i, j) < (nky, nkx) of
 * (x0[i * ys + j * xs + c] - z) * w0[i * wys + j * C + c], for c0 <= c < C; a loop over channels a
 * tap, which GCC vectorizes. */
static inline __attribute__((always_inline)) void dw_pixel_portable(uint32_t *restrict a, const uint8_t *x0,
                                                                    int64_t ys, int64_t xs, const int32_t *w0,
                                                                    int64_t wys, int64_t nky, int64_t nkx, int64_t c0,
                                                                    int64_t C, const int32_t *init, int32_t z, int sgn)
{
    for (int64_t c = c0; c < C; c++)
        a[c] = (uint32_t)init[c];
    for (int64_t i = 0; i < nky; i++)
        for (int64_t j = 0; j < nkx; j++) {
            const uint8_t *restrict p = x0 + i * ys + j * xs;
            const int32_t *restrict w = w0 + i * wys + j * C;
            for (int64_t c = c0; c < C; c++) {
                int32_t v = sgn ? (int32_t)(int8_t)p[c] : (int32_t)p[c];
                a[c] += (uint32_t)(v - z) * (uint32_t)w[c];
            }
        }
}

/* The same with VL-lane vectors (VL = 16 for AVX-512, 8 for AVX2) whose sums stay in registers
 * across the taps: 4 VL channels at a time, then VL; a last partial vector recomputes the VL
 * channels ending at C (the same values again); fewer than VL channels in all go one at a time.
 * Called with constant nky, nkx for the interior, GCC unrolls the taps. */
#define NHWC_DW_PIXEL(ISA, TARGET, VT, VL, LOADX, SUB, MUL, ADD, LOADW, STORE, SET1)                          \
    static inline __attribute__((always_inline, target(TARGET))) VT dw_mac_##ISA(const uint8_t *p,             \
                                                                                const int32_t *w, VT z, int sgn) \
    {                                                                                                          \
        return MUL(SUB(LOADX(p, sgn), z), LOADW(w));                                                           \
    }                                                                                                          \
    static inline __attribute__((always_inline, target(TARGET))) void dw_pixel_##ISA(                          \
        uint32_t *restrict a, const uint8_t *x0, int64_t ys, int64_t xs, const int32_t *w0, int64_t wys,       \
        int64_t nky, int64_t nkx, int64_t c0, int64_t C, const int32_t *init, int32_t z, int sgn)              \
    {                                                                                                          \
        const VT zv = SET1(z);                                                                                 \
        int64_t c = c0;                                                                                        \
        for (; c + 4 * VL <= C; c += 4 * VL) {                                                                 \
            VT s0 = LOADW(init + c), s1 = LOADW(init + c + VL), s2 = LOADW(init + c + 2 * VL),                 \
               s3 = LOADW(init + c + 3 * VL);                                                                  \
            for (int64_t i = 0; i < nky; i++)                                                                  \
                for (int64_t j = 0; j < nkx; j++) {                                                            \
                    const uint8_t *p = x0 + i * ys + j * xs + c;                                               \
                    const int32_t *w = w0 + i * wys + j * C + c;                                               \
                    s0 = ADD(s0, dw_mac_##ISA(p, w, zv, sgn));                                                 \
                    s1 = ADD(s1, dw_mac_##ISA(p + VL, w + VL, zv, sgn));                                       \
                    s2 = ADD(s2, dw_mac_##ISA(p + 2 * VL, w + 2 * VL, zv, sgn));                               \
                    s3 = ADD(s3, dw_mac_##ISA(p + 3 * VL, w + 3 * VL, zv, sgn));                               \
                }                                                                                              \
            STORE(a + c, s0), STORE(a + c + VL, s1), STORE(a + c + 2 * VL, s2), STORE(a + c + 3 * VL, s3);     \
        }                                                                                                      \
        if (c < C && C >= VL) /* whole vectors, the last one ending at C */                                    \
            for (;; c += VL) {                                                                                 \
                if (c + VL > C)                                                                                \
                    c = C - VL;                                                                                \
                VT s0 = LOADW(init + c);                                                                       \
                for (int64_t i = 0; i < nky; i++)                                                              \
                    for (int64_t j = 0; j < nkx; j++)                                                          \
                        s0 = ADD(s0, dw_mac_##ISA(x0 + i * ys + j * xs + c, w0 + i * wys + j * C + c, zv, sgn)); \
                STORE(a + c, s0);                                                                              \
                if (c + VL == C) {                                                                             \
                    c = C;                                                                                     \
                    break;                                                                                     \
                }                                                                                              \
            }                                                                                                  \
        if (c < C) /* fewer than VL channels */                                                                \
            dw_pixel_portable(a, x0, ys, xs, w0, wys, nky, nkx, c, C, init, z, sgn);                           \
    }

#define NHWC_X512(p, sgn)                                                                                      \
    ((sgn) ? _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))                         \
           : _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define NHWC_W512(p) _mm512_loadu_si512((const void *)(p))
#define NHWC_S512(p, v) _mm512_storeu_si512((void *)(p), v)
NHWC_DW_PIXEL(avx512, "avx512f", __m512i, 16, NHWC_X512, _mm512_sub_epi32, _mm512_mullo_epi32, _mm512_add_epi32,
              NHWC_W512, NHWC_S512, _mm512_set1_epi32)

#define NHWC_X256(p, sgn)                                                                                      \
    ((sgn) ? _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))                         \
           : _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define NHWC_W256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define NHWC_S256(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
NHWC_DW_PIXEL(avx2, "avx2", __m256i, 8, NHWC_X256, _mm256_sub_epi32, _mm256_mullo_epi32, _mm256_add_epi32,
              NHWC_W256, NHWC_S256, _mm256_set1_epi32)

/* Output rows [oy0, oy1) with ISA's pixel kernel: border pixels with their own tap rectangles,
 * the interior (every tap inside) between them with the whole window; 3x3 windows, the common
 * case, with constant trip counts. */
#define NHWC_DW_ROWS(ISA, TARGET)                                                                              \
    static inline __attribute__((always_inline, target(TARGET))) void dw_rows_##ISA(                           \
        uint32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g, const int32_t *wk,  \
        const int32_t *init, int32_t z, int64_t oy0, int64_t oy1, int sgn)                                     \
    {                                                                                                          \
        const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1];    \
        const int64_t sh = g->stride[0], sw = g->stride[1], dh = g->dilation[0], dw = g->dilation[1];          \
        const int64_t ys = dh * W * C, xs = dw * C, wys = KW * C, pl = g->pad_begin[1];                        \
        /* the interior columns: ox * sw - pl >= 0 and ox * sw - pl + (KW - 1) * dw < W */                     \
        int64_t ilo = (pl + sw - 1) / sw, ihi = W - 1 - (KW - 1) * dw + pl;                                    \
        ihi = ihi < 0 ? 0 : ihi / sw + 1;                                                                      \
        ihi = ihi < OW ? ihi : OW;                                                                             \
        ilo = ilo < ihi ? ilo : ihi;                                                                           \
        for (int64_t oy = oy0; oy < oy1; oy++) {                                                               \
            int64_t iy0 = oy * sh - g->pad_begin[0], ky0, ky1;                                                 \
            tap_range(iy0, dh, KH, H, &ky0, &ky1);                                                             \
            uint32_t *arow = acc + (oy - oy0) * OW * acc_ps;                                                   \
            const uint8_t *xrow = x + (iy0 + ky0 * dh) * W * C; /* the first tap row inside */                 \
            const int32_t *wrow = wk + ky0 * wys;                                                              \
            int full = ky0 == 0 && ky1 == KH;                                                                  \
            for (int64_t ox = 0; ox < OW; ox++) {                                                              \
                int64_t ix0 = ox * sw - pl, kx0, kx1;                                                          \
                if (full && ox == ilo && ilo < ihi) { /* the interior of an interior row */                    \
                    for (; ox < ihi; ox++) {                                                                   \
                        uint32_t *ap = arow + ox * acc_ps;                                                     \
                        const uint8_t *xp = xrow + (ox * sw - pl) * C;                                         \
                        if (KH == 3 && KW == 3)                                                                \
                            dw_pixel_##ISA(ap, xp, ys, xs, wrow, wys, 3, 3, 0, C, init, z, sgn);               \
                        else                                                                                   \
                            dw_pixel_##ISA(ap, xp, ys, xs, wrow, wys, KH, KW, 0, C, init, z, sgn);             \
                    }                                                                                          \
                    if (ox == OW)                                                                              \
                        break;                                                                                 \
                    ix0 = ox * sw - pl;                                                                        \
                }                                                                                              \
                tap_range(ix0, dw, KW, W, &kx0, &kx1);                                                         \
                dw_pixel_##ISA(arow + ox * acc_ps, xrow + (ix0 + kx0 * dw) * C, ys, xs, wrow + kx0 * C, wys,   \
                               ky1 - ky0, kx1 - kx0, 0, C, init, z, sgn);                                      \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    static __attribute__((target(TARGET))) void dw_##ISA(int32_t *acc, int64_t acc_ps, const uint8_t *x,       \
                                                         int64_t C, const qr_conv_geom *g, const int32_t *wk,  \
                                                         const int32_t *init, uint8_t flip, int32_t xz,        \
                                                         int64_t oy0, int64_t oy1)                             \
    {                                                                                                          \
        assert(g->r == 2 && acc_ps >= C && (flip == 0 || flip == 0x80) && 0 <= oy0 && oy0 <= oy1 &&           \
               oy1 <= g->small[0]);                                                                            \
        if (flip)                                                                                              \
            dw_rows_##ISA((uint32_t *)acc, acc_ps, x, C, g, wk, init, xz - 128, oy0, oy1, 1);                  \
        else                                                                                                   \
            dw_rows_##ISA((uint32_t *)acc, acc_ps, x, C, g, wk, init, xz, oy0, oy1, 0);                        \
    }
NHWC_DW_ROWS(avx512, "avx512f")
NHWC_DW_ROWS(avx2, "avx2")
NHWC_DW_ROWS(portable, "arch=x86-64") /* the baseline: any x86-64 */

/* fn over rows [oy0, oy1): all at once without done, else one row at a time into acc's first row,
 * each followed by done (qr_nhwc_dw_u8_rows) */
static inline __attribute__((always_inline)) void dw_each_row(qr_nhwc_dw_fn fn, int32_t *acc, int64_t acc_ps,
                                                               const uint8_t *x, int64_t C, const qr_conv_geom *g,
                                                               const int32_t *wk, const int32_t *init, uint8_t flip,
                                                               int32_t xz, int64_t oy0, int64_t oy1,
                                                               qr_nhwc_dw_row_done done, void *ctx)
{
    if (!done) {
        fn(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1);
        return;
    }
    for (int64_t oy = oy0; oy < oy1; oy++) {
        fn(acc, acc_ps, x, C, g, wk, init, flip, xz, oy, oy + 1);
        done(ctx, oy);
    }
}

/* AVX-512 VNNI, when every weight (w - w_zero) fits s8: each tap's 16 input bytes widened to
 * dwords (the byte low, zeros above) and multiplied into the sums with one vpdpbusd by the
 * weights' dwords, whose low byte is the weight as s8 (the bytes above meet the zeros): 2 uops a
 * tap and 16 channels where vpmulld's path took 5 or 6. vpdpbusd reads x as u8, so the zero
 * point leaves the products: sum (x - z) w = sum x w - z sum w, and a tap outside the image
 * reads a row of z (its (z - z) w = 0 is the skipped tap's nothing), so every pixel takes the
 * whole window from start[c] = init[c] - z sum_t w[t][c]. All exact modulo 2^32, as the others. */
#define DW_VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512vnni"
#define DW_VNNI_CMAX 4096 /* channels: the row of z and the starting sums are on the stack */
#define DW_VNNI_TAPS 64

/* 16 input bytes as dwords, flipped (x ^ 0x80 for i8) when FLIP (a constant in each copy: the
 * xor took a port the widening and vpdpbusd share). */
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) __m512i dw_vnni_x(const int FLIP, const uint8_t *p,
                                                                                       __m128i flip)
{
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm512_cvtepu8_epi32(FLIP ? _mm_xor_si128(b, flip) : b);
}

/* NV (1, 4 or 8) vectors of 16 channels from c of one pixel: a[c..] = start[c..] + the taps'
 * products. Named sums, not an array: GCC kept an array's sums in memory. */
#define DW_VNNI_V8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) void dw_vnni_block(
    const int NV, const int FLIP, uint32_t *a, const uint8_t *const *p, int64_t taps, const int32_t *wk, int64_t C,
    const int32_t *start, int64_t c, __m128i flip)
{
    __m512i s0, s1, s2, s3, s4, s5, s6, s7;
#define DW_VNNI_INIT(v)                                                                                      \
    if (v < NV)                                                                                               \
        s##v = _mm512_loadu_si512((const void *)(start + c + 16 * v));                                       \
    else                                                                                                      \
        s##v = _mm512_setzero_si512();
    DW_VNNI_V8(DW_VNNI_INIT)
    for (int64_t t = 0; t < taps; t++) {
        const uint8_t *xp = p[t] + c;
        const int32_t *w = wk + t * C + c;
#define DW_VNNI_TAP(v)                                                                                       \
    if (v < NV)                                                                                               \
        s##v = _mm512_dpbusd_epi32(s##v, dw_vnni_x(FLIP, xp + 16 * v, flip),                                    \
                                   _mm512_loadu_si512((const void *)(w + 16 * v)));
        DW_VNNI_V8(DW_VNNI_TAP)
    }
#define DW_VNNI_STORE(v)                                                                                     \
    if (v < NV)                                                                                               \
        _mm512_storeu_si512((void *)(a + c + 16 * v), s##v);
    DW_VNNI_V8(DW_VNNI_STORE)
#undef DW_VNNI_INIT
#undef DW_VNNI_TAP
#undef DW_VNNI_STORE
}

/* Fewer than 16 channels from c (n of them): masked loads and store. */
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) void dw_vnni_tail(
    uint32_t *a, const uint8_t *const *p, int64_t taps, const int32_t *wk, int64_t C, const int32_t *start, int64_t c,
    int64_t n, __m128i flip)
{
    __mmask16 m = (__mmask16)((1u << n) - 1);
    __m512i s = _mm512_maskz_loadu_epi32(m, start + c);
    for (int64_t t = 0; t < taps; t++) {
        __m128i xb = _mm_xor_si128(_mm_maskz_loadu_epi8(m, p[t] + c), flip);
        s = _mm512_dpbusd_epi32(s, _mm512_cvtepu8_epi32(xb), _mm512_maskz_loadu_epi32(m, wk + t * C + c));
    }
    _mm512_mask_storeu_epi32(a + c, m, s);
}

/* Four pixels of one output row at once, NV (1, 2 or 4) vectors of 16 channels from c: pixel q's
 * tap t reads p[t] + q * ps[t] (ps[t]: the stride in bytes between the pixels' windows, 0 for a tap
 * on a row of padding, which all four read from the row of z). One pixel's taps are one chain of
 * dependent vpdpbusd, whose latency (not the throughput) set the pace of dw_vnni_block on Zen 5:
 * four pixels are 4 * NV independent chains, and each weight vector is loaded once for the four. */
#define DW4_Q(X, v) X(0, v) X(1, v) X(2, v) X(3, v)
#define DW4_ALL(X) DW4_Q(X, 0) DW4_Q(X, 1) DW4_Q(X, 2) DW4_Q(X, 3)
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) void dw_vnni_block4(
    const int NV, const int FLIP, uint32_t *a, int64_t acc_ps, const uint8_t *const *p, const int64_t *ps,
    int64_t taps, const int32_t *wk, int64_t C, const int32_t *start, int64_t c, __m128i flip)
{
#define DW4_INIT(q, v)                                                                                       \
    __m512i s##q##v = v < NV ? _mm512_loadu_si512((const void *)(start + c + 16 * v)) : _mm512_setzero_si512();
    DW4_ALL(DW4_INIT)
    for (int64_t t = 0; t < taps; t++) {
        const uint8_t *x0 = p[t] + c;
        const int64_t st = ps[t];
        const int32_t *w = wk + t * C + c;
#define DW4_W(v) __m512i w##v = v < NV ? _mm512_loadu_si512((const void *)(w + 16 * v)) : _mm512_setzero_si512();
        DW4_W(0) DW4_W(1) DW4_W(2) DW4_W(3)
#define DW4_TAP(q, v)                                                                                        \
    if (v < NV)                                                                                               \
        s##q##v = _mm512_dpbusd_epi32(s##q##v, dw_vnni_x(FLIP, x0 + q * st + 16 * v, flip), w##v);
        DW4_ALL(DW4_TAP)
    }
#define DW4_STORE(q, v)                                                                                      \
    if (v < NV)                                                                                               \
        _mm512_storeu_si512((void *)(a + q * acc_ps + c + 16 * v), s##q##v);
    DW4_ALL(DW4_STORE)
#undef DW4_INIT
#undef DW4_W
#undef DW4_TAP
#undef DW4_STORE
}

/* Output rows [oy0, oy1), pixel by pixel over a slice of channels [c0, c1) at a time: all C
 * when the weights (int32) fit in half of L1, else 128 at a time, whose weights stay in L1 across
 * the pixels (960 channels' 34 KB came from L2 for every pixel, and the loads, not the arithmetic,
 * set the pace; slicing smaller layers only repeated the pixels' tap pointers). */
#define DW_VNNI_L1_WEIGHTS (24 << 10)
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) void dw_vnni_rows(
    const int FLIP, uint32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
    const int32_t *wk, const int32_t *start, const uint8_t *zrow, uint8_t flip, int64_t oy0, int64_t oy1)
{
    const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1],
                  taps = KH * KW;
    const int64_t slice = taps * C * (int64_t)sizeof(int32_t) <= DW_VNNI_L1_WEIGHTS ? C : 128;
    const __m128i fv = _mm_set1_epi8((char)flip);
    const uint8_t *p[DW_VNNI_TAPS], *rowp[DW_VNNI_TAPS];
    int64_t ps[DW_VNNI_TAPS];
    for (int64_t c0 = 0; c0 < C; c0 += slice) {
        int64_t c1 = C - c0 > slice ? c0 + slice : C;
        for (int64_t oy = oy0; oy < oy1; oy++) {
            for (int64_t ky = 0; ky < KH; ky++) {
                int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
                rowp[ky] = iy >= 0 && iy < H ? x + iy * W * C : NULL;
            }
            for (int64_t ox = 0; ox < OW; ox++) {
                int64_t ix0 = ox * g->stride[1] - g->pad_begin[1];
                /* four pixels whose windows lie inside the row: dw_vnni_block4 */
                if (ox + 4 <= OW && ix0 >= 0 && ix0 + 3 * g->stride[1] + (KW - 1) * g->dilation[1] < W) {
                    for (int64_t kx = 0; kx < KW; kx++)
                        for (int64_t ky = 0; ky < KH; ky++) {
                            int64_t t = ky * KW + kx;
                            p[t] = rowp[ky] ? rowp[ky] + (ix0 + kx * g->dilation[1]) * C : zrow;
                            ps[t] = rowp[ky] ? g->stride[1] * C : 0;
                        }
                    uint32_t *a = acc + ((oy - oy0) * OW + ox) * acc_ps;
                    int64_t c = c0;
                    for (; c + 64 <= c1; c += 64)
                        dw_vnni_block4(4, FLIP, a, acc_ps, p, ps, taps, wk, C, start, c, fv);
                    for (; c + 32 <= c1; c += 32)
                        dw_vnni_block4(2, FLIP, a, acc_ps, p, ps, taps, wk, C, start, c, fv);
                    for (; c + 16 <= c1; c += 16)
                        dw_vnni_block4(1, FLIP, a, acc_ps, p, ps, taps, wk, C, start, c, fv);
                    for (int64_t q = 0; c < c1 && q < 4; q++) {
                        const uint8_t *pq[DW_VNNI_TAPS];
                        for (int64_t t = 0; t < taps; t++)
                            pq[t] = p[t] + q * ps[t];
                        dw_vnni_tail(a + q * acc_ps, pq, taps, wk, C, start, c, c1 - c, fv);
                    }
                    ox += 3;
                    continue;
                }
                for (int64_t kx = 0; kx < KW; kx++) {
                    int64_t ix = ix0 + kx * g->dilation[1];
                    int in = ix >= 0 && ix < W;
                    for (int64_t ky = 0; ky < KH; ky++)
                        p[ky * KW + kx] = in && rowp[ky] ? rowp[ky] + ix * C : zrow;
                }
                uint32_t *a = acc + ((oy - oy0) * OW + ox) * acc_ps;
                int64_t c = c0;
                for (; c + 128 <= c1; c += 128)
                    dw_vnni_block(8, FLIP, a, p, taps, wk, C, start, c, fv);
                for (; c + 64 <= c1; c += 64)
                    dw_vnni_block(4, FLIP, a, p, taps, wk, C, start, c, fv);
                for (; c + 16 <= c1; c += 16)
                    dw_vnni_block(1, FLIP, a, p, taps, wk, C, start, c, fv);
                if (c < c1)
                    dw_vnni_tail(a, p, taps, wk, C, start, c, c1 - c, fv);
            }
        }
    }
}

/* ---- depthwise, four taps a dword (AVX-512 VNNI and VBMI, dilation 1) ----
 * The kernel above widens every tap's 16 bytes to dwords, so each vpdpbusd does 16 products and
 * costs a widening shuffle as well. Here a dword holds four taps of one channel, four columns of a
 * window row, so one vpdpbusd does 64 products. Each input row the block reads is first copied
 * into a padded row P, 16 channels at a time: P[s][q] is the 16 bytes of channels 16 s .. of
 * padded column q (the zero point outside the image, the flip applied, 0 past C), so the four
 * pixels q .. q + 3 a window row's group of taps reads are 64 contiguous bytes, and one vpermb
 * turns them into the dwords (x[q][c], x[q+1][c], x[q+2][c], x[q+3][c]): per 16 channels and
 * 4 taps a load, a vpermb and a vpdpbusd, where the widening took 4 of each. Taps past KW in a
 * row's last group read P's bytes against weights of 0. */
#define DWR_TARGET DW_VNNI_TARGET ",avx512vbmi"
#define DWR_BYTES (128 << 10) /* P's rows on the stack, at most */
#define DWR_W_BYTES (32 << 10) /* the packed weights on the stack, at most */

/* Whether a layer is this kernel's: dilation 1, at most 8 taps a window row, and P's rows (KH,
 * a ring indexed by input row mod KH, and one of padding: Wp pixels of C16 bytes) fit. */
static int dwr_fits(int64_t C, const qr_conv_geom *g, int64_t *wp, int64_t *c16, int64_t *groups)
{
    if (g->dilation[0] != 1 || g->dilation[1] != 1 || g->kernel[1] > 8 || C > DW_VNNI_CMAX)
        return 0;
    *c16 = (C + 15) / 16 * 16;
    *groups = (g->kernel[1] + 3) / 4;
    /* whole 64-byte lines a block's row, so that column 4 k starts one (dwr_out_row_lines) */
    *wp = ((g->small[1] - 1) * g->stride[1] + 4 * *groups + 3) / 4 * 4;
    return (g->kernel[0] + 1) * *wp * *c16 <= DWR_BYTES && g->kernel[0] * *groups * *c16 * 4 <= DWR_W_BYTES;
}

/* Input row iy (or, iy < 0, padding) as P's row: for each 16 channels s, Wp pixels of 16 bytes
 * from padded column 0, which is input column -pad_begin[1].
 * AHEAD: the first pass over the row also prefetches the row stride[0] below it (when there is
 * one), which the next output row copies: its lines come into L1 while this output row's sums
 * run (qr_nhwc_dw_ahead says when; into L2 only, _MM_HINT_T1, 112 x 112 x 96 at stride 2 from
 * memory ran 12% slower). */
static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_row(const int FLIP, const int AHEAD,
                                                                              uint8_t *prow, const uint8_t *x,
                                                                              int64_t iy, int64_t C,
                                                                              const qr_conv_geom *g, int64_t wp,
                                                                              int64_t c16, uint8_t xz)
{
    const int64_t W = g->big[1], pl = g->pad_begin[1], ns = c16 / 16;
    const __m128i zv = _mm_set1_epi8((char)xz), fv = _mm_set1_epi8((char)(FLIP ? 0x80 : 0));
    /* the padded columns inside the image: [lo, hi) */
    int64_t lo = iy < 0 ? wp : pl < wp ? pl : wp, hi = iy < 0 ? wp : pl + W < wp ? pl + W : wp;
    hi = hi > lo ? hi : lo;
    for (int64_t s = 0; s < ns; s++) {
        __m128i *d = (__m128i *)(void *)(prow + s * wp * 16);
        /* column q (lo <= q < hi) at src + (q - lo) * C */
        const uint8_t *src = x + ((iy < 0 ? 0 : iy) * W + (lo - pl)) * C + 16 * s;
        for (int64_t q = 0; q < lo; q++)
            _mm_storeu_si128(d + q, zv);
        if (AHEAD && s == 0 && iy >= 0 && iy + g->stride[0] < g->big[0] && hi > lo) {
            /* the row below, from the same column on: its bytes [0, (hi - lo) C), a line at a time */
            const char *ahead = (const char *)(src + g->stride[0] * W * C);
            for (int64_t q = lo, off = 0; q < hi; q++) {
                for (; off < (q - lo + 1) * C; off += 64)
                    _mm_prefetch(ahead + off, _MM_HINT_T0);
                __m128i v = C >= 16 ? _mm_loadu_si128((const __m128i *)(const void *)(src + (q - lo) * C))
                                    : _mm_maskz_loadu_epi8((__mmask16)((1u << C) - 1), src + (q - lo) * C);
                _mm_storeu_si128(d + q, FLIP ? _mm_xor_si128(v, fv) : v);
            }
        } else if (C - 16 * s >= 16)
            for (int64_t q = lo; q < hi; q++) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + (q - lo) * C));
                _mm_storeu_si128(d + q, FLIP ? _mm_xor_si128(v, fv) : v);
            }
        else {
            __mmask16 m = (__mmask16)((1u << (C - 16 * s)) - 1);
            for (int64_t q = lo; q < hi; q++) {
                __m128i v = _mm_maskz_loadu_epi8(m, src + (q - lo) * C);
                _mm_storeu_si128(d + q, FLIP ? _mm_xor_si128(v, fv) : v);
            }
        }
        for (int64_t q = hi; q < wp; q++)
            _mm_storeu_si128(d + q, zv);
    }
}

/* The weights as the sums read them: for window row ky, group gi and channel c, the dword
 * wpk[(ky * groups + gi) * C16 + c] holds the bytes w[ky][4 gi + j][c], j = 0..3 (0 past KW or C). */
static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_pack_w(int32_t *wpk, const int32_t *wk,
                                                                                 int64_t C, int64_t KH, int64_t KW,
                                                                                 int64_t groups, int64_t c16)
{
    const __m512i lo = _mm512_set1_epi32(0xff);
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t gi = 0; gi < groups; gi++)
            for (int64_t c = 0; c < c16; c += 16) {
                __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
                __m512i v = _mm512_setzero_si512();
                for (int64_t j = 0; j < 4 && 4 * gi + j < KW; j++) {
                    __m512i w = _mm512_maskz_loadu_epi32(m, wk + (ky * KW + 4 * gi + j) * C + c);
                    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(w, lo), (unsigned)(8 * j)));
                }
                _mm512_storeu_si512((void *)(wpk + ((ky * groups + gi) * c16 + c)), v);
            }
}

/* The vpermb indices that turn four pixels' 16 channels (64 bytes, pixel-major) into dwords of four
 * taps: byte 4 c + j from pixel j's channel c, 16 j + c. */
static inline __attribute__((always_inline, target(DWR_TARGET))) __m512i dwr_taps_index(void)
{
    return _mm512_set_epi32(0x3f2f1f0f, 0x3e2e1e0e, 0x3d2d1d0d, 0x3c2c1c0c, 0x3b2b1b0b, 0x3a2a1a0a, 0x39291909,
                            0x38281808, 0x37271707, 0x36261606, 0x35251505, 0x34241404, 0x33231303, 0x32221202,
                            0x31211101, 0x30201000);
}

/* Sum S of 16 channels += the 4 taps whose pixels are the 64 bytes at p (P's block of those
 * channels), by their weights' dwords at w. */
#define DWR_TAP(S, p, w, idx)                                                                                  \
    S = _mm512_dpbusd_epi32(S, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512((const void *)(p))),           \
                            _mm512_loadu_si512((const void *)(w)))

/* NV (1 to 4) blocks of 16 channels from c0 of one output row's pixels, from the KH rows of P at
 * prow[ky]; KH and groups constant in the copies GCC unrolls (3 x 3 windows). The sums are named
 * variables: GCC kept an array's in memory. */
static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_out_block(
    const int NV, uint32_t *arow, int64_t acc_ps, const uint8_t *const *prow, const int32_t *wpk,
    const int32_t *start, int64_t C, int64_t OW, int64_t sx, int64_t wp, int64_t c16, int64_t c0, const int64_t KH,
    const int64_t groups)
{
    const __m512i idx = dwr_taps_index();
    __mmask16 m[4];
    __m512i t[4];
    for (int r = 0; r < 4; r++) {
        int64_t c = c0 + 16 * r;
        m[r] = r >= NV ? 0 : C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
        t[r] = _mm512_maskz_loadu_epi32(m[r], start + c);
    }
    const int64_t bs = wp * 16; /* from one block of P to the next */
    for (int64_t ox = 0; ox < OW; ox++) {
        __m512i a0 = t[0], a1 = t[1], a2 = t[2], a3 = t[3];
#pragma GCC unroll 8
        for (int64_t ky = 0; ky < KH; ky++)
#pragma GCC unroll 2
            for (int64_t gi = 0; gi < groups; gi++) {
                const uint8_t *pb = prow[ky] + c0 * wp + (ox * sx + 4 * gi) * 16; /* block c0 / 16 */
                const int32_t *w = wpk + (ky * groups + gi) * c16 + c0;
                DWR_TAP(a0, pb, w, idx);
                if (NV > 1)
                    DWR_TAP(a1, pb + bs, w + 16, idx);
                if (NV > 2)
                    DWR_TAP(a2, pb + 2 * bs, w + 32, idx);
                if (NV > 3)
                    DWR_TAP(a3, pb + 3 * bs, w + 48, idx);
            }
        uint32_t *a = arow + ox * acc_ps + c0;
        _mm512_mask_storeu_epi32(a, m[0], a0);
        if (NV > 1)
            _mm512_mask_storeu_epi32(a + 16, m[1], a1);
        if (NV > 2)
            _mm512_mask_storeu_epi32(a + 32, m[2], a2);
        if (NV > 3)
            _mm512_mask_storeu_epi32(a + 48, m[3], a3);
    }
}

static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_out_row(
    uint32_t *arow, int64_t acc_ps, const uint8_t *const *prow, const int32_t *wpk, const int32_t *start, int64_t C,
    int64_t OW, int64_t sx, int64_t wp, int64_t c16, const int64_t KH, const int64_t groups)
{
    int64_t c0 = 0;
    for (; c0 + 64 <= c16; c0 += 64)
        dwr_out_block(4, arow, acc_ps, prow, wpk, start, C, OW, sx, wp, c16, c0, KH, groups);
    if (c16 - c0 == 48)
        dwr_out_block(3, arow, acc_ps, prow, wpk, start, C, OW, sx, wp, c16, c0, KH, groups);
    else if (c16 - c0 == 32)
        dwr_out_block(2, arow, acc_ps, prow, wpk, start, C, OW, sx, wp, c16, c0, KH, groups);
    else if (c16 - c0 == 16)
        dwr_out_block(1, arow, acc_ps, prow, wpk, start, C, OW, sx, wp, c16, c0, KH, groups);
}

/* dwr_out_row for one group of four taps a window row (KW <= 4) at stride SX = 1 or 2, U = 4 / SX
 * output pixels at a time. Their windows, columns ox SX + u SX .. + 3, lie in the two 64-byte lines of
 * P from column 4 k = ox SX (P's rows are whole lines, dwr_fits), and one two-source byte permute
 * (vpermt2b) takes each window's dwords from the two: two aligned loads for U windows, where
 * dwr_out_block loads each window on its own, three of four across a line at stride 1. On Zen 5
 * those split loads cost more than the permutes (stop 55, tools/nhwc_dw_timing: MobileNetV2's 3 x 3
 * layers at stride 1 17-44% faster, at stride 2, where half the windows' loads split, 3-12%).
 * The last U pixels may pass OW: their windows read past the row's last column (at most a line past
 * wp: the next block's columns, or the slack after P's last row) and are not stored. */
static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_out_row_lines(
    const int SX, const int RQ, uint32_t *arow, int64_t acc_ps, const uint8_t *const *prow, const int32_t *wpk,
    const int32_t *start, int64_t C, int64_t OW, int64_t wp, int64_t c16, const qr_nhwc_dw_requant *rq, uint8_t *yrow)
{
    const int U = 4 / SX;
    /* window u: byte 4 c + j from pixel u SX + j's channel c, byte 16 (u SX + j) + c of the two lines */
    const __m512i i0 = dwr_taps_index();
    const __m512i i1 = _mm512_add_epi8(i0, _mm512_set1_epi8((char)(16 * SX))),
                  i2 = _mm512_add_epi8(i0, _mm512_set1_epi8(32)), i3 = _mm512_add_epi8(i0, _mm512_set1_epi8(48));
    for (int64_t c = 0; c < c16; c += 16) {
        const __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
        __m512i t = _mm512_maskz_loadu_epi32(m, start + c);
        __m512 qm = _mm512_setzero_ps(), qlo = qm, qhi = qm;
        __m512i qz = _mm512_setzero_si512();
        if (RQ) { /* the bias in the starting sums: the same sums modulo 2^32 */
            t = _mm512_add_epi32(t, _mm512_maskz_loadu_epi32(m, rq->bias + c));
            qm = _mm512_maskz_loadu_ps(m, rq->m + c), qlo = _mm512_maskz_loadu_ps(m, rq->lo + c);
            qhi = _mm512_maskz_loadu_ps(m, rq->hi + c), qz = _mm512_maskz_loadu_epi32(m, rq->z + c);
        }
        const __m512i w0 = _mm512_loadu_si512((const void *)(wpk + c)),
                      w1 = _mm512_loadu_si512((const void *)(wpk + c16 + c)),
                      w2 = _mm512_loadu_si512((const void *)(wpk + 2 * c16 + c));
        const uint8_t *p0 = prow[0] + c * wp, *p1 = prow[1] + c * wp, *p2 = prow[2] + c * wp;
        uint32_t *a = arow + c;
        for (int64_t ox = 0; ox < OW; ox += U) {
            __m512i a0 = t, a1 = t, a2 = t, a3 = t;
#define DWR_LINES(P, W)                                                                                        \
    do {                                                                                                       \
        const __m512i A = _mm512_load_si512((const void *)((P) + ox * SX * 16)),                               \
                      B = _mm512_load_si512((const void *)((P) + ox * SX * 16 + 64));                           \
        a0 = _mm512_dpbusd_epi32(a0, _mm512_permutexvar_epi8(i0, A), W);                                      \
        a1 = _mm512_dpbusd_epi32(a1, _mm512_permutex2var_epi8(A, i1, B), W);                                  \
        if (U > 2) {                                                                                           \
            a2 = _mm512_dpbusd_epi32(a2, _mm512_permutex2var_epi8(A, i2, B), W);                              \
            a3 = _mm512_dpbusd_epi32(a3, _mm512_permutex2var_epi8(A, i3, B), W);                              \
        }                                                                                                      \
    } while (0)
            DWR_LINES(p0, w0);
            DWR_LINES(p1, w1);
            DWR_LINES(p2, w2);
#undef DWR_LINES
            if (RQ) {
#define DWR_REQUANT(A, K)                                                                                      \
    do {                                                                                                       \
        __m512 f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(A), qm), qlo), qhi);          \
        __m512i r = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), \
                                     qz);                                                                      \
        _mm_mask_storeu_epi8(yrow + (ox + (K)) * C + c, m, _mm512_cvtepi32_epi8(r));                         \
    } while (0)
                DWR_REQUANT(a0, 0);
                if (ox + 1 < OW)
                    DWR_REQUANT(a1, 1);
                if (U > 2 && ox + 2 < OW)
                    DWR_REQUANT(a2, 2);
                if (U > 3 && ox + 3 < OW)
                    DWR_REQUANT(a3, 3);
#undef DWR_REQUANT
                continue;
            }
            _mm512_mask_storeu_epi32(a + ox * acc_ps, m, a0);
            if (ox + 1 < OW)
                _mm512_mask_storeu_epi32(a + (ox + 1) * acc_ps, m, a1);
            if (U > 2 && ox + 2 < OW)
                _mm512_mask_storeu_epi32(a + (ox + 2) * acc_ps, m, a2);
            if (U > 3 && ox + 3 < OW)
                _mm512_mask_storeu_epi32(a + (ox + 3) * acc_ps, m, a3);
        }
    }
}

static inline __attribute__((always_inline, target(DWR_TARGET))) void dwr_rows(
    const int FLIP, const int AHEAD, uint32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
    const int32_t *wk, const int32_t *start, uint8_t xz, int64_t oy0, int64_t oy1, int64_t wp, int64_t c16,
    int64_t groups, qr_nhwc_dw_row_done done, void *ctx, const qr_nhwc_dw_requant *rq)
{
    const int64_t H = g->big[0], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1], rb = wp * c16;
    /* the requantization in the kernel where the rows are made by dwr_out_row_lines */
    const int lines = KH == 3 && groups == 1 && (g->stride[1] == 1 || g->stride[1] == 2);
    if (!lines)
        rq = NULL;
    _Alignas(64) uint8_t buf[DWR_BYTES + 128]; /* + the lines dwr_out_row_lines reads past the last row */
    _Alignas(64) int32_t wpk[DWR_W_BYTES / 4];
    dwr_pack_w(wpk, wk, C, KH, KW, groups, c16);
    int64_t held[DW_VNNI_TAPS]; /* the input row in each slot of the ring, or -1 */
    for (int64_t k = 0; k < KH; k++)
        held[k] = -1;
    uint8_t *zp = buf + KH * rb; /* the row of padding, made when first needed */
    int zmade = 0;
    const uint8_t *prow[DW_VNNI_TAPS];
    for (int64_t oy = oy0; oy < oy1; oy++) {
        for (int64_t ky = 0; ky < KH; ky++) {
            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky;
            if (iy < 0 || iy >= H) {
                if (!zmade)
                    dwr_row(FLIP, 0, zp, x, -1, C, g, wp, c16, xz), zmade = 1;
                prow[ky] = zp;
                continue;
            }
            int64_t slot = iy % KH; /* the KH rows of one output row fall in distinct slots */
            uint8_t *r = buf + slot * rb;
            if (held[slot] != iy)
                dwr_row(FLIP, AHEAD, r, x, iy, C, g, wp, c16, xz), held[slot] = iy;
            prow[ky] = r;
        }
        uint32_t *arow = done ? acc : acc + (oy - oy0) * OW * acc_ps;
        if (rq) {
            uint8_t *yrow = rq->y + oy * OW * C;
            if (g->stride[1] == 1)
                dwr_out_row_lines(1, 1, arow, acc_ps, prow, wpk, start, C, OW, wp, c16, rq, yrow);
            else
                dwr_out_row_lines(2, 1, arow, acc_ps, prow, wpk, start, C, OW, wp, c16, rq, yrow);
            continue;
        }
        if (KH == 3 && groups == 1 && g->stride[1] == 1)
            dwr_out_row_lines(1, 0, arow, acc_ps, prow, wpk, start, C, OW, wp, c16, NULL, NULL);
        else if (KH == 3 && groups == 1 && g->stride[1] == 2)
            dwr_out_row_lines(2, 0, arow, acc_ps, prow, wpk, start, C, OW, wp, c16, NULL, NULL);
        else if (KH == 3 && groups == 1)
            dwr_out_row(arow, acc_ps, prow, wpk, start, C, OW, g->stride[1], wp, c16, 3, 1);
        else
            dwr_out_row(arow, acc_ps, prow, wpk, start, C, OW, g->stride[1], wp, c16, KH, groups);
        if (done)
            done(ctx, oy);
    }
}

static __attribute__((noinline, target(DWR_TARGET))) void dwr_any(uint32_t *acc, int64_t acc_ps, const uint8_t *x,
                                                                  int64_t C, const qr_conv_geom *g, const int32_t *wk,
                                                                  const int32_t *start, uint8_t flip, uint8_t xz,
                                                                  int64_t oy0, int64_t oy1, int64_t wp, int64_t c16,
                                                                  int64_t groups, qr_nhwc_dw_row_done done, void *ctx,
                                                                  const qr_nhwc_dw_requant *rq)
{
    if (flip)
        dwr_rows(1, 0, acc, acc_ps, x, C, g, wk, start, xz, oy0, oy1, wp, c16, groups, done, ctx, rq);
    else
        dwr_rows(0, 0, acc, acc_ps, x, C, g, wk, start, xz, oy0, oy1, wp, c16, groups, done, ctx, rq);
}

static __attribute__((noinline, target(DWR_TARGET))) void dwr_any_ahead(uint32_t *acc, int64_t acc_ps,
                                                                        const uint8_t *x, int64_t C,
                                                                        const qr_conv_geom *g, const int32_t *wk,
                                                                        const int32_t *start, uint8_t flip,
                                                                        uint8_t xz, int64_t oy0, int64_t oy1,
                                                                        int64_t wp, int64_t c16, int64_t groups,
                                                                        qr_nhwc_dw_row_done done, void *ctx,
                                                                        const qr_nhwc_dw_requant *rq)
{
    if (flip)
        dwr_rows(1, 1, acc, acc_ps, x, C, g, wk, start, xz, oy0, oy1, wp, c16, groups, done, ctx, rq);
    else
        dwr_rows(0, 1, acc, acc_ps, x, C, g, wk, start, xz, oy0, oy1, wp, c16, groups, done, ctx, rq);
}

/* by_rows: the four-taps-a-dword kernel where dwr_fits (2: prefetching the rows ahead), else (0,
 * the tests' second path) the pixel one */
static inline __attribute__((always_inline, target(DW_VNNI_TARGET))) void dw_vnni_any(
    int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g, const int32_t *wk,
    const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0, int64_t oy1, int by_rows, qr_nhwc_dw_row_done done,
    void *ctx, const qr_nhwc_dw_requant *rq)
{
    int64_t taps = g->kernel_n;
    int fits = C <= DW_VNNI_CMAX && taps <= DW_VNNI_TAPS && g->kernel[0] <= DW_VNNI_TAPS;
    /* whether every weight fits s8, and start = init - z sum w: vectors over the channels a tap,
     * once a call (a loop over each channel's taps was a third of a 7x7 layer's time) */
    int32_t start[DW_VNNI_CMAX];
    uint8_t zrow[DW_VNNI_CMAX];
    if (fits) {
        const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127), zv = _mm512_set1_epi32(xz);
        __mmask16 bad = 0;
        for (int64_t c = 0; c < C; c += 16) {
            __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
            __m512i st = _mm512_maskz_loadu_epi32(m, init + c);
            for (int64_t t = 0; t < taps; t++) {
                __m512i w = _mm512_maskz_loadu_epi32(m, wk + t * C + c);
                bad |= _mm512_cmplt_epi32_mask(w, lo) | _mm512_cmpgt_epi32_mask(w, hi);
                st = _mm512_sub_epi32(st, _mm512_mullo_epi32(zv, w));
            }
            _mm512_mask_storeu_epi32(start + c, m, st);
        }
        fits = !bad;
    }
    if (!fits) {
        dw_each_row(dw_avx512, acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, done, ctx);
        return;
    }
    assert(g->r == 2 && acc_ps >= C && (flip == 0 || flip == 0x80) && 0 <= oy0 && oy0 <= oy1 && oy1 <= g->small[0]);
    int64_t wp, c16, groups;
    if (by_rows && __builtin_cpu_supports("avx512vbmi") && dwr_fits(C, g, &wp, &c16, &groups)) {
        (by_rows == 2 ? dwr_any_ahead : dwr_any)((uint32_t *)acc, acc_ps, x, C, g, wk, start, flip, (uint8_t)xz, oy0,
                                                 oy1, wp, c16, groups, done, ctx, rq);
        return;
    }
    memset(zrow, (uint8_t)xz ^ flip, (size_t)C); /* read back flipped: z */
    /* the pixel kernel reads x in place: a row at a time costs nothing more */
    for (int64_t r0 = oy0, r1 = done ? oy0 + 1 : oy1; r0 < oy1; r0 = r1, r1 = done ? r1 + 1 : oy1) {
        if (flip)
            dw_vnni_rows(1, (uint32_t *)acc, acc_ps, x, C, g, wk, start, zrow, flip, r0, r1);
        else
            dw_vnni_rows(0, (uint32_t *)acc, acc_ps, x, C, g, wk, start, zrow, flip, r0, r1);
        if (done)
            done(ctx, r0);
    }
}

static __attribute__((target(DW_VNNI_TARGET))) void dw_avx512vnni(int32_t *acc, int64_t acc_ps, const uint8_t *x,
                                                                   int64_t C, const qr_conv_geom *g, const int32_t *wk,
                                                                   const int32_t *init, uint8_t flip, int32_t xz,
                                                                   int64_t oy0, int64_t oy1)
{
    dw_vnni_any(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, 1, NULL, NULL, NULL);
}

static __attribute__((target(DW_VNNI_TARGET))) void dw_avx512vnni_ahead(int32_t *acc, int64_t acc_ps,
                                                                         const uint8_t *x, int64_t C,
                                                                         const qr_conv_geom *g, const int32_t *wk,
                                                                         const int32_t *init, uint8_t flip,
                                                                         int32_t xz, int64_t oy0, int64_t oy1)
{
    dw_vnni_any(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, 2, NULL, NULL, NULL);
}

static __attribute__((target(DW_VNNI_TARGET))) void dw_avx512vnni_px(int32_t *acc, int64_t acc_ps, const uint8_t *x,
                                                                      int64_t C, const qr_conv_geom *g,
                                                                      const int32_t *wk, const int32_t *init,
                                                                      uint8_t flip, int32_t xz, int64_t oy0,
                                                                      int64_t oy1)
{
    dw_vnni_any(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, 0, NULL, NULL, NULL);
}

static __attribute__((target(DW_VNNI_TARGET))) void dw_vnni_rows_entry(int32_t *acc, int64_t acc_ps, const uint8_t *x,
                                                                        int64_t C, const qr_conv_geom *g,
                                                                        const int32_t *wk, const int32_t *init,
                                                                        uint8_t flip, int32_t xz, int64_t oy0,
                                                                        int64_t oy1, int by_rows,
                                                                        qr_nhwc_dw_row_done done, void *ctx,
                                                                        const qr_nhwc_dw_requant *rq)
{
    dw_vnni_any(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, by_rows, done, ctx, rq);
}

static int dw_has_vnni(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

qr_nhwc_dw_fn qr_nhwc_dw_u8_isa(const char *isa)
{
    if (!strcmp(isa, "avx512vnni"))
        return dw_has_vnni() ? dw_avx512vnni : NULL;
    if (!strcmp(isa, "avx512vnni-ahead"))
        return dw_has_vnni() ? dw_avx512vnni_ahead : NULL;
    if (!strcmp(isa, "avx512vnni-pixels"))
        return dw_has_vnni() ? dw_avx512vnni_px : NULL;
    if (!strcmp(isa, "avx512f"))
        return __builtin_cpu_supports("avx512f") ? dw_avx512 : NULL;
    if (!strcmp(isa, "avx2"))
        return __builtin_cpu_supports("avx2") ? dw_avx2 : NULL;
    return !strcmp(isa, "portable") ? dw_portable : NULL;
}

void qr_nhwc_dw_u8_rows(int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
                        const int32_t *wk, const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0, int64_t oy1,
                        int ahead, qr_nhwc_dw_row_done done, void *ctx, const qr_nhwc_dw_requant *rq)
{
    if (dw_has_vnni()) {
        dw_vnni_rows_entry(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, ahead ? 2 : 1, done, ctx, rq);
        return;
    }
    dw_each_row(__builtin_cpu_supports("avx512f") ? dw_avx512 : __builtin_cpu_supports("avx2") ? dw_avx2 : dw_portable,
                acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1, done, ctx);
}

void qr_nhwc_dw_u8(int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
                   const int32_t *wk, const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0, int64_t oy1,
                   int ahead)
{
    qr_nhwc_dw_fn fn = dw_has_vnni()                       ? (ahead ? dw_avx512vnni_ahead : dw_avx512vnni)
                       : __builtin_cpu_supports("avx512f") ? dw_avx512
                       : __builtin_cpu_supports("avx2")    ? dw_avx2
                                                           : dw_portable;
    fn(acc, acc_ps, x, C, g, wk, init, flip, xz, oy0, oy1);
}

/* ---- pools ---- */

/* MaxPool separably: the maximum over a window is the maximum over its columns of the maximum
 * over its rows. For each output row, the window's rows inside the image are reduced once into one
 * row v whose pixels outside the image are TMIN (max's identity: padding is ignored, and a window
 * of padding only gives TMIN), and each output pixel is the maximum of its KW pixels of v. The
 * loops run over runs of pixels' bytes, not over one pixel's C channels (16 channels a pixel left
 * most of a vector idle and paid a loop's overhead per pixel). v is on the stack: chunks of output
 * pixels, and slices of channels when one window row of all C does not fit. */
enum { NHWC_MAXV = 16384 };

#define NHWC_MAX_ROWS(S, T, TMIN)                                                                              \
    /* v[p * cb + c] = max over r < nr of x[r * rs + p * xs + c], for p < np, c < cb (TMIN for nr = 0) */      \
    static inline __attribute__((always_inline)) void max_v_##S(T *restrict v, const T *x, int64_t rs,         \
                                                                int64_t xs, int64_t nr, int64_t np,            \
                                                                int64_t cb)                                    \
    {                                                                                                          \
        if (xs == cb) /* whole pixels: one run of np * cb */                                                   \
            cb *= np, np = 1;                                                                                  \
        for (int64_t p = 0; p < np; p++) {                                                                     \
            T *restrict d = v + p * cb;                                                                        \
            const T *s0 = x + p * xs;                                                                          \
            if (nr == 0)                                                                                       \
                for (int64_t c = 0; c < cb; c++)                                                               \
                    d[c] = TMIN;                                                                               \
            else                                                                                               \
                for (int64_t c = 0; c < cb; c++)                                                               \
                    d[c] = s0[c];                                                                              \
            for (int64_t r = 1; r < nr; r++) {                                                                 \
                const T *restrict u = s0 + r * rs;                                                             \
                for (int64_t c = 0; c < cb; c++)                                                               \
                    d[c] = u[c] > d[c] ? u[c] : d[c];                                                          \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    /* y[o * ys + c] = max over kx < KW of v[(o * sx + kx * dx) * cb + c], for o < n, c < cb; inlined with    \
     * constant cb for the usual channel counts */                                                             \
    static inline __attribute__((always_inline)) void max_h_##S(T *restrict y, int64_t ys, const T *restrict v, \
                                                                int64_t n, int64_t cb, int64_t sx, int64_t dx, \
                                                                int64_t KW)                                    \
    {                                                                                                          \
        if (sx == 1 && ys == cb) { /* n * cb bytes of y, each the maximum of KW bytes of v dx * cb apart */   \
            for (int64_t j = 0; j < n * cb; j++)                                                               \
                y[j] = v[j];                                                                                   \
            for (int64_t kx = 1; kx < KW; kx++) {                                                              \
                const T *restrict u = v + kx * dx * cb;                                                        \
                for (int64_t j = 0; j < n * cb; j++)                                                           \
                    y[j] = u[j] > y[j] ? u[j] : y[j];                                                          \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t o = 0; o < n; o++) {                                                                      \
            T *restrict d = y + o * ys;                                                                        \
            const T *p = v + o * sx * cb;                                                                      \
            for (int64_t c = 0; c < cb; c++)                                                                   \
                d[c] = p[c];                                                                                   \
            for (int64_t kx = 1; kx < KW; kx++)                                                                \
                for (int64_t c = 0; c < cb; c++)                                                               \
                    d[c] = p[kx * dx * cb + c] > d[c] ? p[kx * dx * cb + c] : d[c];                            \
        }                                                                                                      \
    }                                                                                                          \
    static inline __attribute__((always_inline)) void max_h_any_##S(T *y, int64_t ys, const T *v, int64_t n,   \
                                                                    int64_t cb, int64_t sx, int64_t dx,        \
                                                                    int64_t KW)                                \
    {                                                                                                          \
        switch (cb) {                                                                                          \
        case 16:                                                                                               \
            max_h_##S(y, ys, v, n, 16, sx, dx, KW);                                                            \
            break;                                                                                             \
        case 32:                                                                                               \
            max_h_##S(y, ys, v, n, 32, sx, dx, KW);                                                            \
            break;                                                                                             \
        case 64:                                                                                               \
            max_h_##S(y, ys, v, n, 64, sx, dx, KW);                                                            \
            break;                                                                                             \
        default:                                                                                               \
            max_h_##S(y, ys, v, n, cb, sx, dx, KW);                                                            \
        }                                                                                                      \
    }                                                                                                          \
    static void max_rows_wide_##S(T *y, const T *x, int64_t xrow0, int64_t C, const qr_conv_geom *g,           \
                                  int64_t oy0, int64_t oy1)                                                    \
    {                                                                                                          \
        const int64_t H = g->big[0], W = g->big[1], OW = g->small[1];                                          \
        for (int64_t oy = oy0; oy < oy1; oy++)                                                                 \
            for (int64_t ox = 0; ox < OW; ox++) {                                                              \
                int64_t iy0 = oy * g->stride[0] - g->pad_begin[0], ix0 = ox * g->stride[1] - g->pad_begin[1];  \
                int64_t ky0, ky1, kx0, kx1;                                                                    \
                tap_range(iy0, g->dilation[0], g->kernel[0], H, &ky0, &ky1);                                   \
                tap_range(ix0, g->dilation[1], g->kernel[1], W, &kx0, &kx1);                                   \
                for (int64_t c = 0; c < C; c++) {                                                              \
                    T m = TMIN;                                                                                \
                    for (int64_t ky = ky0; ky < ky1; ky++)                                                     \
                        for (int64_t kx = kx0; kx < kx1; kx++) {                                               \
                            T u = x[((iy0 + ky * g->dilation[0] - xrow0) * W + ix0 + kx * g->dilation[1]) * C + c]; \
                            m = u > m ? u : m;                                                                 \
                        }                                                                                      \
                    y[(oy * OW + ox) * C + c] = m;                                                             \
                }                                                                                              \
            }                                                                                                  \
    }                                                                                                          \
    /* x holds the image's input rows from xrow0 on */                                                         \
    static inline __attribute__((always_inline)) void max_rows_##S(T *y, const T *x, int64_t xrow0, int64_t C, \
                                                                   const qr_conv_geom *g, int64_t oy0,         \
                                                                   int64_t oy1)                                \
    {                                                                                                          \
        const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1];    \
        const int64_t sh = g->stride[0], sx = g->stride[1], dh = g->dilation[0], dx = g->dilation[1];          \
        const int64_t reach = (KW - 1) * dx + 1; /* a window's pixels of v */                                  \
        if (reach > NHWC_MAXV) { /* a window wider than v: each output on its own */                           \
            max_rows_wide_##S(y, x, xrow0, C, g, oy0, oy1);                                                    \
            return;                                                                                            \
        }                                                                                                      \
        _Alignas(64) T v[NHWC_MAXV];                                                                           \
        /* channels a slice: all C, or whole vectors' worth that fit one output pixel's window */              \
        int64_t cb = C * reach <= NHWC_MAXV ? C : NHWC_MAXV / reach / 64 * 64;                                 \
        cb = cb > 0 ? cb : 1;                                                                                  \
        const int64_t chunk = (NHWC_MAXV / cb - reach) / sx + 1; /* output pixels a chunk */                   \
        for (int64_t oy = oy0; oy < oy1; oy++) {                                                               \
            int64_t iy0 = oy * sh - g->pad_begin[0], ky0, ky1;                                                 \
            tap_range(iy0, dh, KH, H, &ky0, &ky1);                                                             \
            const T *xr = x + (ky1 > ky0 ? (iy0 + ky0 * dh - xrow0) * W * C : 0);                              \
            for (int64_t ox0 = 0; ox0 < OW; ox0 += chunk) {                                                    \
                int64_t n = OW - ox0 < chunk ? OW - ox0 : chunk, q0 = ox0 * sx - g->pad_begin[1];              \
                int64_t span = (n - 1) * sx + reach; /* v's pixels, input columns q0 .. q0 + span */           \
                int64_t lo = q0 < 0 ? -q0 : 0, hi = W - q0 < span ? W - q0 : span;                             \
                lo = lo < span ? lo : span;                                                                    \
                hi = hi > lo ? hi : lo;                                                                        \
                for (int64_t c0 = 0; c0 < C; c0 += cb) {                                                       \
                    int64_t nc = C - c0 < cb ? C - c0 : cb;                                                    \
                    for (int64_t i = 0; i < lo * nc; i++)                                                      \
                        v[i] = TMIN;                                                                           \
                    for (int64_t i = hi * nc; i < span * nc; i++)                                              \
                        v[i] = TMIN;                                                                           \
                    if (hi > lo)                                                                               \
                        max_v_##S(v + lo * nc, xr + (q0 + lo) * C + c0, dh * W * C, C, ky1 - ky0, hi - lo, nc); \
                    max_h_any_##S(y + (oy * OW + ox0) * C + c0, C, v, n, nc, sx, dx, KW);                      \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
NHWC_MAX_ROWS(u8, uint8_t, 0)
NHWC_MAX_ROWS(i8, int8_t, INT8_MIN)

/* AveragePool's rounding (conv.c's pool_avg): s / n (n > 0) rounded half to even, clamped to
 * [lo, hi], without branches so that a pixel's channels vectorize. The quotient truncated through
 * double is exact: when s / n is no integer it is at least 1 / n from one, far more than the
 * division's rounding error at |s| n < 2^53. */
static inline int32_t avg_round(int32_t s, int32_t n, double dn, int32_t lo, int32_t hi)
{
    int32_t q = (int32_t)((double)s / dn), r = s - q * n; /* truncated: r has s's sign */
    int32_t neg = r < 0;
    q -= neg, r += neg * n; /* floor: 0 <= r < n */
    q += (2 * r > n) | ((2 * r == n) & q & 1);
    return q < lo ? lo : q > hi ? hi : q;
}

/* One output pixel of AveragePool: channel blocks of 64 summed in int32 over the taps, then
 * rounded. */
#define NHWC_AVG_PIXEL(S, T, LO, HI)                                                                           \
    static inline __attribute__((always_inline)) void avg_pixel_##S(T *restrict y, const T *x0, int64_t ys,   \
                                                                    int64_t xs, int64_t nky, int64_t nkx,      \
                                                                    int64_t C, int32_t n)                      \
    {                                                                                                          \
        enum { B = 64 };                                                                                       \
        for (int64_t c0 = 0; c0 < C; c0 += B) {                                                                \
            int64_t nb = C - c0 < B ? C - c0 : B;                                                              \
            int32_t s[B];                                                                                      \
            for (int64_t c = 0; c < nb; c++)                                                                   \
                s[c] = 0;                                                                                      \
            for (int64_t i = 0; i < nky; i++)                                                                  \
                for (int64_t j = 0; j < nkx; j++) {                                                            \
                    const T *restrict p = x0 + i * ys + j * xs + c0;                                           \
                    for (int64_t c = 0; c < nb; c++)                                                           \
                        s[c] += p[c];                                                                          \
                }                                                                                              \
            for (int64_t c = 0; c < nb; c++) /* a window of padding only: 0 / 0, stored as 0 */                \
                y[c0 + c] = n > 0 ? (T)avg_round(s[c], n, (double)n, LO, HI) : 0;                              \
        }                                                                                                      \
    }
NHWC_AVG_PIXEL(u8, uint8_t, 0, 255)
NHWC_AVG_PIXEL(i8, int8_t, -128, 127)

/* Output rows [oy0, oy1) of AveragePool: each pixel's window as a rectangle of taps inside the
 * image, its sum divided by its count (n_pad: count_include_pad). */
#define NHWC_AVG_ROWS(S, T)                                                                                   \
    static inline __attribute__((always_inline)) void avg_rows_##S(T *y, const T *x, int64_t C,               \
                                                                    const qr_conv_geom *g, int n_pad,          \
                                                                    int64_t oy0, int64_t oy1)                  \
    {                                                                                                          \
        const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1];    \
        const int64_t sh = g->stride[0], sw = g->stride[1], dh = g->dilation[0], dw = g->dilation[1];          \
        const int64_t pt = g->pad_begin[0], pl = g->pad_begin[1];                                              \
        const int64_t Hp = H + pt + g->pad_end[0], Wp = W + pl + g->pad_end[1];                                \
        for (int64_t oy = oy0; oy < oy1; oy++) {                                                               \
            int64_t iy0 = oy * sh - pt, ky0, ky1, py0, py1;                                                    \
            tap_range(iy0, dh, KH, H, &ky0, &ky1);                                                             \
            tap_range(iy0 + pt, dh, KH, Hp, &py0, &py1);                                                       \
            const T *xrow = x + (iy0 + ky0 * dh) * W * C;                                                      \
            for (int64_t ox = 0; ox < OW; ox++) {                                                              \
                int64_t ix0 = ox * sw - pl, kx0, kx1, px0, px1;                                                \
                tap_range(ix0, dw, KW, W, &kx0, &kx1);                                                         \
                T *yp = y + (oy * OW + ox) * C;                                                                \
                const T *xp = xrow + (ix0 + kx0 * dw) * C;                                                     \
                tap_range(ix0 + pl, dw, KW, Wp, &px0, &px1);                                                   \
                int64_t n = n_pad ? (py1 - py0) * (px1 - px0) : (ky1 - ky0) * (kx1 - kx0);                    \
                avg_pixel_##S(yp, xp, dh * W * C, dw * C, ky1 - ky0, kx1 - kx0, C, (int32_t)n);                \
            }                                                                                                  \
        }                                                                                                      \
    }
NHWC_AVG_ROWS(u8, uint8_t)
NHWC_AVG_ROWS(i8, int8_t)

#define NHWC_POOL_ASSERT(g, oy0, oy1) assert((g)->r == 2 && 0 <= (oy0) && (oy0) <= (oy1) && (oy1) <= (g)->small[0])

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void
qr_nhwc_maxpool_u8(uint8_t *y, const uint8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1)
{
    NHWC_POOL_ASSERT(g, oy0, oy1);
    max_rows_u8(y, x, 0, C, g, oy0, oy1);
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void
qr_nhwc_maxpool_i8(int8_t *y, const int8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1)
{
    NHWC_POOL_ASSERT(g, oy0, oy1);
    max_rows_i8(y, x, 0, C, g, oy0, oy1);
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void
qr_nhwc_avgpool_u8(uint8_t *y, const uint8_t *x, int64_t C, const qr_conv_geom *g, int count_include_pad,
                   int64_t oy0, int64_t oy1)
{
    NHWC_POOL_ASSERT(g, oy0, oy1);
    assert(g->kernel_n < (int64_t)1 << 23);
    avg_rows_u8(y, x, C, g, count_include_pad, oy0, oy1);
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void
qr_nhwc_avgpool_i8(int8_t *y, const int8_t *x, int64_t C, const qr_conv_geom *g, int count_include_pad,
                   int64_t oy0, int64_t oy1)
{
    NHWC_POOL_ASSERT(g, oy0, oy1);
    assert(g->kernel_n < (int64_t)1 << 23);
    avg_rows_i8(y, x, C, g, count_include_pad, oy0, oy1);
}

/* ---- transposes ---- */

/* Blocks of 64 pixels by 64 channels: each block's source and destination lines stay in L1 while
 * it is copied, whatever the stride of the other side. */
enum { NHWC_TB = 64 };

void qr_nhwc_to_nchw_u8(uint8_t *dst, const uint8_t *src, int64_t C, int64_t HW, int64_t p0, int64_t p1)
{
    assert(0 <= p0 && p0 <= p1 && p1 <= HW);
    for (int64_t pb = p0; pb < p1; pb += NHWC_TB)
        for (int64_t cb = 0; cb < C; cb += NHWC_TB)
            qr_transpose_bytes(dst + cb * HW + pb, HW, src + pb * C + cb, C, p1 - pb < NHWC_TB ? p1 - pb : NHWC_TB,
                            C - cb < NHWC_TB ? C - cb : NHWC_TB);
}

/* Pixels [p0, p1) of NCHW src into NHWC rows from at on (at[(p - p0) * C + c]). */
static void nchw_to_nhwc_from(uint8_t *at, const uint8_t *src, int64_t C, int64_t HW, int64_t p0, int64_t p1)
{
    for (int64_t pb = p0; pb < p1; pb += NHWC_TB)
        for (int64_t cb = 0; cb < C; cb += NHWC_TB)
            qr_transpose_bytes(at + (pb - p0) * C + cb, C, src + cb * HW + pb, HW, C - cb < NHWC_TB ? C - cb : NHWC_TB,
                            p1 - pb < NHWC_TB ? p1 - pb : NHWC_TB);
}

void qr_nchw_to_nhwc_u8(uint8_t *dst, const uint8_t *src, int64_t C, int64_t HW, int64_t p0, int64_t p1)
{
    assert(0 <= p0 && p0 <= p1 && p1 <= HW);
    nchw_to_nhwc_from(dst + p0 * C, src, C, HW, p0, p1);
}

/* ---- MaxPool of NCHW input ---- */

/* The input rows [*r0, *r1) output rows [oy0, oy1) read (padding rows left out). */
static void slab_rows(const qr_conv_geom *g, int64_t oy0, int64_t oy1, int64_t *r0, int64_t *r1)
{
    int64_t H = g->big[0], lo = oy0 * g->stride[0] - g->pad_begin[0];
    int64_t hi = (oy1 - 1) * g->stride[0] - g->pad_begin[0] + (g->kernel[0] - 1) * g->dilation[0] + 1;
    lo = lo < 0 ? 0 : lo > H ? H : lo;
    hi = oy1 <= oy0 || hi < lo ? lo : hi > H ? H : hi;
    *r0 = lo, *r1 = hi;
}

size_t qr_nhwc_maxpool_nchw_scratch(int64_t C, const qr_conv_geom *g, int64_t rows)
{
    int64_t span = rows > 0 ? (rows - 1) * g->stride[0] + (g->kernel[0] - 1) * g->dilation[0] + 1 : 0;
    span = span < g->big[0] ? span : g->big[0];
    return (size_t)(span * g->big[1] * C);
}

/* The rows' input slab transposed into scratch (in L2 while the pool reads it), then pooled as NHWC:
 * the input is read once, where a Transpose node before the pool wrote and read it again. */
#define NHWC_MAX_NCHW(S, T)                                                                                    \
    __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void qr_nhwc_maxpool_nchw_##S(       \
        T *y, const T *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1, uint8_t *scratch)        \
    {                                                                                                          \
        NHWC_POOL_ASSERT(g, oy0, oy1);                                                                         \
        int64_t r0, r1, W = g->big[1];                                                                         \
        slab_rows(g, oy0, oy1, &r0, &r1);                                                                      \
        nchw_to_nhwc_from(scratch, (const uint8_t *)x, C, g->big_n, r0 * W, r1 * W);                           \
        max_rows_##S(y, (const T *)(const void *)scratch, r0, C, g, oy0, oy1);                                 \
    }
NHWC_MAX_NCHW(u8, uint8_t)
NHWC_MAX_NCHW(i8, int8_t)
