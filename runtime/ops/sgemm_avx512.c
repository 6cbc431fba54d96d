/* The f32 GEMM tile with AVX-512: up to 12 rows x 32 columns in 24 zmm sums, enough independent
 * FMA chains for CPUs that issue two a cycle with four cycles' latency (Zen 5); per k, two loads
 * of B serve the rows' broadcasts of A. One copy of the loop per row count, so a short
 * tile does only its rows' FMAs. Only called when the CPU reports avx512f (sgemm.c). */
#include <immintrin.h>

#include "sgemm.h"
#include "act_avx512.h"

#include "op.h"

#define TARGET __attribute__((target("avx512f,fma,prfchw")))
/* Rows of a packed panel ahead of the loop that it prefetches (tile's PB); 16, 24 and 32 measured
 * alike, 64 into L2 worse (stop 47) */
#define SG_PF_ROWS 32

static inline __mmask16 cols_mask(int cols)
{
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
}

/* The sums are named registers: an array of them made GCC copy registers (igemm_avx512vnni.c). */
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ZERO(r) __m512 l##r = _mm512_setzero_ps(), h##r = l##r;
#define LOAD(r)                                                                                              \
    if (r < R) {                                                                                             \
        l##r = _mm512_maskz_loadu_ps(k0, c + r * ldc);                                                       \
        h##r = _mm512_maskz_loadu_ps(k1, c + r * ldc + 16);                                                  \
    }
/* C's two lines of row r fetched for writing (PREFETCHW) while the k loop runs */
#define PFW(r)                                                                                               \
    if (r < R) {                                                                                             \
        __builtin_prefetch(c + r * ldc, 1, 3);                                                               \
        __builtin_prefetch(c + r * ldc + 16, 1, 3);                                                          \
    }
#define FMA(r)                                                                                               \
    if (r < R) {                                                                                             \
        __m512 w = _mm512_set1_ps(PA ? ap[q * 12 + r] : ap[q * acs + r * ars]);                              \
        l##r = _mm512_fmadd_ps(w, b0, l##r);                                                                 \
        h##r = _mm512_fmadd_ps(w, b1, h##r);                                                                 \
    }
#define STORE(r)                                                                                             \
    if (r < R) {                                                                                             \
        if (bias) {                                                                                          \
            __m512 bv = _mm512_set1_ps(bias[r]);                                                             \
            l##r = _mm512_add_ps(l##r, bv);                                                                  \
            h##r = _mm512_add_ps(h##r, bv);                                                                  \
        }                                                                                                    \
        if (cb) {                                                                                            \
            l##r = _mm512_add_ps(l##r, cb0);                                                                 \
            h##r = _mm512_add_ps(h##r, cb1);                                                                 \
        }                                                                                                    \
        if (act) {                                                                                           \
            l##r = qr_act_zmm(act, l##r);                                                                       \
            h##r = qr_act_zmm(act, h##r);                                                                       \
        }                                                                                                    \
        _mm512_mask_storeu_ps(c + r * ldc, k0, l##r);                                                        \
        _mm512_mask_storeu_ps(c + r * ldc + 16, k1, h##r);                                                   \
    }

/* R rows (a constant in each copy); B's columns past cols are not read (masked loads unless the
 * tile is full, F), so B may be read in place. PB: B a packed panel (boff NULL), row q at bp + q * 32,
 * without the load of boff[q] a k, and the panel SG_PF_ROWS rows ahead prefetched: a constant weight
 * packed once comes from L3 on the first row tile (bert's products with B out of L2: 78-85 GMAC/s
 * without, 82-92 with, on the Xeon of stop 47; docs/runtime.md). PA: A packed by the driver (ars 1,
 * acs 12), its twelve rows at constant offsets where rows in place need twelve offsets (three were
 * reloaded from the stack a k). */
TARGET static inline __attribute__((always_inline)) void tile(const int R, const int F, const int PA, const int PB,
                                                              const float *ap,
                                                              int64_t ars, int64_t acs, const float *bp,
                                                              const int64_t *boff, int64_t kc, float *c, int64_t ldc,
                                                              int cols, int load_c, const float *bias,
                                                              const qr_act *act, const float *cb)
{
    __mmask16 k0 = cols_mask(cols), k1 = cols_mask(cols - 16);
    /* the column bias (cb: cols values, or NULL) added to each row's sums in registers */
    __m512 cb0 = cb ? _mm512_maskz_loadu_ps(k0, cb) : _mm512_setzero_ps();
    __m512 cb1 = cb ? _mm512_maskz_loadu_ps(k1, cb + 16) : _mm512_setzero_ps();
    ROWS(ZERO)
    if (load_c) {
        ROWS(LOAD)
    } else {
        ROWS(PFW)
    }
    for (int64_t q = 0; q < kc; q++) {
        const float *bq = PB ? bp + q * 32 : bp + boff[q];
        if (PB && SG_PF_ROWS) {
            _mm_prefetch((const char *)(bq + SG_PF_ROWS * 32), _MM_HINT_T0);
            _mm_prefetch((const char *)(bq + SG_PF_ROWS * 32 + 16), _MM_HINT_T0);
        }
        __m512 b0 = F ? _mm512_loadu_ps(bq) : _mm512_maskz_loadu_ps(k0, bq);
        __m512 b1 = F ? _mm512_loadu_ps(bq + 16) : _mm512_maskz_loadu_ps(k1, bq + 16);
        ROWS(FMA)
    }
    ROWS(STORE)
}

#define CASE(r)                                                                                              \
    case r + 1:                                                                                              \
        if (!boff && cols == 32 && ars == 1 && acs == 12)                                                    \
            tile(r + 1, 1, 1, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act, cb);           \
        else if (!boff && cols == 32)                                                                        \
            tile(r + 1, 1, 0, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act, cb);           \
        else if (!boff)                                                                                      \
            tile(r + 1, 0, 0, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act, cb);           \
        else if (cols == 32)                                                                                 \
            tile(r + 1, 1, 0, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act, cb);           \
        else                                                                                                 \
            tile(r + 1, 0, 0, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act, cb);           \
        break;

TARGET void qr_sgemm_tile_12x32_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp,
                                       const int64_t *boff, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                                       int load_c, const float *bias, const qr_act *act)
{
    const float *cb = NULL;
    switch (rows) {
        ROWS(CASE)
    default:
        break;
    }
}

/* The same tile + col_bias[x] on every row's sums before the store (sgemm.h's tile_cols): one f32
 * add of the finished sum, as qr_sgemm_add_cols_avx512's, without reading the stored tile back
 * (that pass was 2.9% of bert's f32 run at batch 64, perf). */
TARGET void qr_sgemm_tile_cols_12x32_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp,
                                            const int64_t *boff, int64_t kc, float *c, int64_t ldc, int rows,
                                            int cols, int load_c, const float *bias, const qr_act *act,
                                            const float *cb)
{
    switch (rows) {
        ROWS(CASE)
    default:
        break;
    }
}

/* Up to 3 rows x 128 columns (8 zmm sums a row): a tile of 1 or 2 rows x 32 columns is two or
 * four FMA chains, bound by the FMA's latency (a Gemm of one image: 1 x 512 x 1000). B is read in
 * place (boff), masked past cols unless the tile is full (F). */
#define W8(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3) X(r, 4) X(r, 5) X(r, 6) X(r, 7)
#define WZERO(r, v) __m512 s##r##v = _mm512_setzero_ps();
#define WLOAD(r, v)                                                                                          \
    if (r < R)                                                                                               \
        s##r##v = _mm512_maskz_loadu_ps(cols_mask(cols - 16 * v), c + r * ldc + 16 * v);
#define WB(r, v)                                                                                             \
    __m512 b##v = F ? _mm512_loadu_ps(bq + 16 * v) : _mm512_maskz_loadu_ps(cols_mask(cols - 16 * v), bq + 16 * v);
#define WFMA(r, v) s##r##v = _mm512_fmadd_ps(w##r, b##v, s##r##v);
#define WROW(r)                                                                                              \
    if (r < R) {                                                                                             \
        __m512 w##r = _mm512_set1_ps(ap[q * acs + r * ars]);                                                 \
        W8(WFMA, r)                                                                                          \
    }
#define WSTORE(r, v)                                                                                         \
    if (r < R) {                                                                                             \
        if (bias)                                                                                            \
            s##r##v = _mm512_add_ps(s##r##v, _mm512_set1_ps(bias[r]));                                       \
        if (act)                                                                                             \
            s##r##v = qr_act_zmm(act, s##r##v);                                                                 \
        _mm512_mask_storeu_ps(c + r * ldc + 16 * v, cols_mask(cols - 16 * v), s##r##v);                      \
    }

TARGET static inline __attribute__((always_inline)) void wide(const int R, const int F, const float *ap, int64_t ars,
                                                              int64_t acs, const float *bp, const int64_t *boff,
                                                              int64_t kc, float *c, int64_t ldc, int cols,
                                                              int load_c, const float *bias, const qr_act *act)
{
    W8(WZERO, 0) W8(WZERO, 1) W8(WZERO, 2)
    if (load_c) {
        W8(WLOAD, 0) W8(WLOAD, 1) W8(WLOAD, 2)
    }
    for (int64_t q = 0; q < kc; q++) {
        const float *bq = bp + boff[q];
        W8(WB, 0)
        WROW(0) WROW(1) WROW(2)
    }
    W8(WSTORE, 0) W8(WSTORE, 1) W8(WSTORE, 2)
}

TARGET void qr_sgemm_wide_3x128_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp,
                                       const int64_t *boff, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                                       int load_c, const float *bias, const qr_act *act)
{
    int f = cols == 128;
    if (rows == 1)
        f ? wide(1, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act)
          : wide(1, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act);
    else if (rows == 2)
        f ? wide(2, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act)
          : wide(2, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act);
    else if (rows == 3)
        f ? wide(3, 1, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act)
          : wide(3, 0, ap, ars, acs, bp, boff, kc, c, ldc, cols, load_c, bias, act);
}

/* One row of c, columns [x0, x1) (x0 a multiple of 32), from B packed in panels of 32 columns
 * (qr_sgemm_pack_b: panel p's k rows contiguous at bp + p * k * 32): four panels at a time, each
 * output one FMA chain from 0 over the whole K in a register (the bits of the tiles' chains, which
 * go through c between K blocks), + bias[0], then act. A product of one row reads B once: four
 * panels side by side are four streams from memory for the prefetchers, where the tiles went
 * through B one panel's K block at a time (MobileNetV2's classifier, 1280 x 1000). */
TARGET void qr_sgemm_row_32_avx512(const float *a, int64_t acs, const float *bp, int64_t k, int64_t x0, int64_t x1,
                                   float *c, const float *bias, const qr_act *act)
{
    for (int64_t x = x0; x < x1; x += 128) {
        int np = x1 - x >= 128 ? 4 : (int)((x1 - x + 31) / 32);
        const float *p0 = bp + x / 32 * k * 32, *p1 = np > 1 ? p0 + k * 32 : p0, *p2 = np > 2 ? p0 + 2 * k * 32 : p0,
                    *p3 = np > 3 ? p0 + 3 * k * 32 : p0;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int64_t q = 0; q < k; q++) {
            __m512 w = _mm512_set1_ps(a[q * acs]);
            s0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p0 + q * 32), s0);
            s1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p0 + q * 32 + 16), s1);
            s2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p1 + q * 32), s2);
            s3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p1 + q * 32 + 16), s3);
            s4 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p2 + q * 32), s4);
            s5 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p2 + q * 32 + 16), s5);
            s6 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p3 + q * 32), s6);
            s7 = _mm512_fmadd_ps(w, _mm512_loadu_ps(p3 + q * 32 + 16), s7);
        }
        __m512 s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
        for (int v = 0; v < 2 * np; v++) {
            int64_t x16 = x + 16 * v;
            if (x16 >= x1)
                break;
            __m512 r = s[v];
            if (bias)
                r = _mm512_add_ps(r, _mm512_set1_ps(bias[0]));
            if (act)
                r = qr_act_zmm(act, r);
            _mm512_mask_storeu_ps(c + x16, cols_mask((int)(x1 - x16)), r);
        }
    }
}

/* c[r][x] += b[x], sixteen columns a vector, the last under a mask: a fused Add's bias after a
 * tile's sums (the scalar loop was 3.4% of a BERT layer's f32 run). */
TARGET void qr_sgemm_add_cols_avx512(float *c, int64_t ldc, int64_t rows, int64_t w, const float *b)
{
    for (int64_t x = 0; x < w; x += 16) {
        __mmask16 k = cols_mask((int)(w - x < 16 ? w - x : 16));
        __m512 bv = _mm512_maskz_loadu_ps(k, b + x);
        for (int64_t r = 0; r < rows; r++)
            _mm512_mask_storeu_ps(c + r * ldc + x, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, c + r * ldc + x), bv));
    }
}

/* v[i] = column i's 16 values (from row 0), transposed in place: v[q] = row q's 16 columns. */
TARGET static inline void transpose16(__m512 *v)
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* One 32-column panel of a transposed B (column x's k values at b + x * b_cs, w of them real):
 * dst[q * 32 + x], 0 past w; 16 x 16 blocks transposed in registers, where the scalar copy
 * did a load and a store per value. The same values (sgemm.h's qr_sgemm_pack_b). */
TARGET void qr_sgemm_pack_bt_32_avx512(const float *b, int64_t b_cs, int64_t k, int w, float *dst)
{
    for (int64_t q0 = 0; q0 < k; q0 += 16) {
        int rows = k - q0 < 16 ? (int)(k - q0) : 16;
        __mmask16 m = cols_mask(rows);
        for (int g = 0; g < 2; g++) {
            __m512 v[16];
            /* the next 16 columns' lines asked for now: a transposed B's columns are rows of the
             * source far apart (an attention's keys 8 KB apart at batch 8), one page each, which
             * no hardware prefetcher follows */
            if (q0 + 16 < k || g == 0)
                for (int i = 0; i < 16; i++) {
                    int x = g == 0 ? 16 + i : i;
                    if (x < w)
                        _mm_prefetch((const char *)(b + x * b_cs + (g == 0 ? q0 : q0 + 16)), _MM_HINT_T0);
                }
            for (int i = 0; i < 16; i++) {
                int x = g * 16 + i;
                v[i] = x < w ? _mm512_maskz_loadu_ps(m, b + x * b_cs + q0) : _mm512_setzero_ps();
            }
            transpose16(v);
            for (int i = 0; i < rows; i++)
                _mm512_storeu_ps(dst + (q0 + i) * 32 + g * 16, v[i]);
        }
    }
}
