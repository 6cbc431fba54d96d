/* Integer convolutions on NHWC activations (channels last): the layout the
 * integer graph keeps between its convolutions (quantizer/layout.c).
 *
 * A dense convolution is an implicit GEMM whose rows are output pixels and
 * whose columns are output channels: each row reads its window's positions
 * straight from the input through a table of row pointers (a padding position
 * points to a row of the input zero point), so nothing is copied per window
 * as NCHW's im2col does. A depthwise one sums its taps a vector of channels at
 * a time. Either way the int32 accumulator goes to the recipe's epilogue one
 * block of pixels at a time, turned so its rows are channels (the tile
 * kernels' form, conv_epilogue.h), and the epilogue's y is turned back into
 * NHWC rows; the block stays in cache throughout. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "conv_epilogue.h"
#include "conv_geom.h"
#include "igemm.h"
#include "options.h"
#include "nhwc.h"
#include "requant_prog.h"
#include "../parallel.h"

/* x's dims as ConvInteger reads them (N, C, H, W), the data unchanged: for the geometry only. An
 * input the node takes in NCHW (attribute x_nchw: a first layer's few channels, gathered) is that. */
static qr_tensor nchw_view(const qr_kctx *k, const qr_tensor *x)
{
    qr_tensor v = *x;
    if (qr_attr_i(k->node, "x_nchw", 0))
        return v;
    v.dims[1] = x->dims[3];
    v.dims[2] = x->dims[1];
    v.dims[3] = x->dims[2];
    return v;
}

qr_status qr_convint_infer_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                                const qr_tensor *wzp, qr_dtype t)
{
    if (x->ndim != 4 || w->ndim != 4)
        return QR_KERR(k, "an NHWC convolution takes 4-D input and weights, not %d-D and %d-D", x->ndim, w->ndim);
    qr_tensor v = nchw_view(k, x);
    if (qr_convint_infer_as(k, &v, xzp, w, wzp, t) != QR_OK)
        return QR_ERR;
    qr_tensor *y = k->out[0];
    int64_t m = y->dims[1];
    y->dims[1] = y->dims[2];
    y->dims[2] = y->dims[3];
    y->dims[3] = m;
    return QR_OK;
}

/* What every block needs: the geometry, the operands as the kernels read them, the epilogue. */
typedef struct nhwc_job {
    const qr_conv_geom *g;
    int64_t c, m, taps, k4, mb, blocks_per_image; /* depthwise: blocks of output rows per image */
    int64_t total;                                  /* dense: the batch's output pixels, in blocks of mb */
    int64_t p0, p1; /* dense: the output pixels computed (a band of rows, or all of them) */
    int64_t img, oyb0, oyb1; /* depthwise with a band: its image and output rows (else img < 0) */
    int64_t parts, strips; /* dense: each block's 64-column strips in `parts` ranges, one task each */
    uint8_t *y_split;      /* parts > 1 with a second stage: the whole y the stage runs on afterwards */
    const uint8_t *x; /* N x H x W x cs bytes, u8 (i8 already turned by ^ 0x80) unless flip */
    int64_t cs;       /* the input's pixel stride */
    uint8_t flip;     /* depthwise only: reads x ^ flip */
    int ahead;        /* depthwise: x taken to come from memory (qr_nhwc_dw_ahead) */
    int32_t xz;       /* the input zero point, in the domain the kernels read */
    const int8_t *wp; /* dense: panels [taps * k4 / 4][n16][4] */
    const int32_t *wk; /* depthwise: taps x C, w - w_zero */
    const int32_t *init;
    const uint8_t *zrow; /* k4 bytes of xz: what padding positions read */
    const int64_t *tap_off; /* dense: each tap's byte offset from its window's first position */
    const int64_t *run_off; /* dense, up to 16 taps: the offsets of the taps of RUN_BLOCK windows
                             * along a row from the first's position (window_run_avx512), else NULL */
    int64_t oy0, oy1, ox0, ox1; /* dense: the output pixels whose windows lie inside the image */
    int gather;          /* few input channels: each pixel's window copied into one row (gather_rows) */
    int one_by_one;      /* dense 1 x 1 windows without padding: window_rows_1x1 */
    int x_nchw;          /* gather: x is N x C x H x W */
    int cols;            /* gather by columns (gather_cols_avx512): rows overlap, weights in (kx, c, ky) order */
    int stack;           /* gather by output columns (gather_stack): windows overlap down a column, weights in
                          * (ky, c, kx) order */
    int64_t col_period;  /* cols: the 64-byte vectors after which the tables repeat */
    const uint8_t *col_idx;   /* cols: col_period x 64 vpermb indices */
    const uint64_t *col_mask; /* cols: col_period x C * KH byte masks, one per padded row */
    size_t at_rows;      /* gather: the block's rows in the slot */
    qr_iconv_fn fn;
    qr_iconv16_fn fn16;    /* fn's twin on the input widened to i16 once (qr_iconv_wide_twin: AVX2), or NULL */
    const int16_t *x16;    /* fn16: x's pixels [q16, ...) as i16, x16[0] the first of pixel q16 */
    const int16_t *zrow16; /* fn16: zrow as i16 */
    int64_t q16;
    qr_iconv_ep_fn fused; /* the epilogue's vector form fused into a specialized kernel: no block epilogue */
    int joined;           /* fused is the epilogue joined to the second stage (ep->jprog): no stage after */
    qr_rows_ep_fn rows_ep; /* the epilogue's vector form compiled alone, for channels-last blocks */
    /* depthwise: the epilogue's per-channel requantization (requant_prog.h) that the kernel applies to
     * its sums in registers, or rq_on 0 */
    int rq_on;
    qr_nhwc_dw_requant rq;
    int amx_sink;          /* fn is the AMX kernel and rows_ep the epilogue: run per block of its sums (amx_rows) */
    int direct;            /* the AMX kernel on the input padded once (qr_iconv_u8s8_amx_direct): no row pointers */
    qr_amx_direct dir;     /* direct: the padded input and its geometry */
    uint8_t *y;
    size_t esize; /* y's element size */
    uint8_t *work; /* per slot: pointers, the block's accumulator, it turned, the epilogue's y */
    size_t slot_bytes, at_acc, at_acct, at_y;
    const qr_acc_epilogue *ep;
    int failed; /* set by the first block that fails, which then owns err */
    qr_error *err;
} nhwc_job;

/* Pixels per block: the batch's pixels in equal blocks (every block streams all the weights once,
 * so a ragged last block of a few rows costs as much as a full one; the epilogue pays per channel
 * and block, so blocks are as wide as fit) of at most about 256 KB of
 * accumulator and at least 24 rows, a multiple of 6 (the microkernels' row tile); at least as
 * many blocks as threads when there is one image. */
static int64_t block_rows(int64_t m, int64_t pixels, int64_t images, int threads)
{
    int64_t most = 65536 / (m > 0 ? m : 1);
    most = most < 24 ? 24 : most > 960 ? 960 : most;
    int64_t blocks = (pixels + most - 1) / most;
    if (images == 1 && blocks < threads && pixels >= 24 * (int64_t)threads)
        blocks = threads;
    int64_t r = blocks > 0 ? (pixels + blocks - 1) / blocks : pixels;
    r = (r + 5) / 6 * 6;
    return pixels < r ? pixels : r;
}

/* How many parts a dense layer's output channels are cut into, each block's parts separate tasks
 * (1: the blocks of pixels alone are the tasks). Every block streams the weights of the channels
 * it computes, so when one thread would take fewer blocks than there are threads (one image of
 * few pixels: ResNet-18's last layers, 49 pixels against 2.4 MB of weights), cutting more blocks
 * of pixels only adds passes over all the weights, while parts of the channels (whole strips of 64:
 * qr_iconv_col) share them out: each thread reads its part. the split option (qr_options: rows or cols) forces either
 * (cols: at least two parts, on one thread too, for the tests), where there are two strips. */
static int64_t channel_parts(int64_t m, int64_t pixels, int64_t images, int threads)
{
    int64_t strips = (m + 63) / 64, want = threads, one = block_rows(m, pixels, images, 1);
    int split = qr_options_get()->split;
    if (split == QR_SPLIT_ROWS)
        return 1;
    if (split == QR_SPLIT_COLS)
        want = threads > 2 ? threads : 2;
    else if (threads < 2 || (one > 0 && (pixels + one - 1) / one >= threads))
        return 1;
    return strips < want ? strips : want;
}

/* Output positions o in [lo, hi) whose windows o * s - pb + [0, span] lie in [0, big) (span:
 * (kernel - 1) * dilation), of small positions. */
static void interior(int64_t pb, int64_t s, int64_t span, int64_t big, int64_t small, int64_t *lo, int64_t *hi)
{
    int64_t l = (pb + s - 1) / s, top = big - 1 - span + pb;
    int64_t h = top < 0 ? 0 : top / s + 1;
    *lo = l < small ? l : small;
    *hi = h < small ? h : small;
    if (*hi < *lo)
        *hi = *lo;
}

/* Windows a block of window_run_avx512 points at once. */
enum { RUN_BLOCK = 8 };

/* The taps' offsets within a window and the interior pixels, for window_rows; with up to 16 taps
 * (tap_off has room for RUN_BLOCK + 1 times taps), RUN_BLOCK windows' offsets after them: pointer
 * i of the block, i = q * taps + t, is the block's first position + q * stride + tap_off[t]. */
static void window_setup(nhwc_job *j, int64_t *tap_off)
{
    const qr_conv_geom *g = j->g;
    for (int64_t ky = 0; ky < g->kernel[0]; ky++)
        for (int64_t kx = 0; kx < g->kernel[1]; kx++)
            tap_off[ky * g->kernel[1] + kx] = (ky * g->dilation[0] * g->big[1] + kx * g->dilation[1]) * j->cs;
    j->tap_off = tap_off;
    j->run_off = NULL;
    if (j->taps <= 16) {
        int64_t *run = tap_off + j->taps, *at = run;
        for (int64_t q = 0; q < RUN_BLOCK; q++) /* no division per offset: about 1% of the small ResNet's samples at batch 1 */
            for (int64_t t = 0; t < j->taps; t++)
                *at++ = q * g->stride[1] * j->cs + tap_off[t];
        j->run_off = run;
    }
    interior(g->pad_begin[0], g->stride[0], (g->kernel[0] - 1) * g->dilation[0], g->big[0], g->small[0], &j->oy0, &j->oy1);
    interior(g->pad_begin[1], g->stride[1], (g->kernel[1] - 1) * g->dilation[1], g->big[1], g->small[1], &j->ox0, &j->ox1);
    j->one_by_one = !j->gather && g->r == 2 && g->kernel_n == 1 && !g->pad_begin[0] && !g->pad_begin[1] &&
                    !g->pad_end[0] && !g->pad_end[1];
}

/* a[t] = first + off[t] for t < taps, eight pointers a step (a scalar loop of them was most of
 * the row pointers' cost: 9% of fmnist int8 at batch 64). */
__attribute__((target("avx512f"))) static void window_avx512(const uint8_t **a, const uint8_t *first,
                                                             const int64_t *off, int64_t taps)
{
    __m512i base = _mm512_set1_epi64((long long)(intptr_t)first);
    int64_t t = 0;
    for (; t + 8 <= taps; t += 8)
        _mm512_storeu_si512((void *)(a + t), _mm512_add_epi64(base, _mm512_loadu_si512((const void *)(off + t))));
    if (t < taps) {
        __mmask8 k = (__mmask8)((1u << (taps - t)) - 1);
        _mm512_mask_storeu_epi64((void *)(a + t), k, _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(k, off + t)));
    }
}

/* The pointers of `run` neighbouring windows inside the image, each `step` bytes past the one before,
 * the first at first: a[q * taps + t] = first + q * step + off[t]. Up to 16 taps: blocks of
 * RUN_BLOCK windows as taps whole vectors of 8 pointers, first + run_off (window_setup), the
 * rest in two vectors added to once a window (the call per window and the taps' reload took 15%
 * of the small ResNet at batch 1, whose 16-channel 3 x 3 layers do little work a window; then the
 * two masked stores a window, of 8 and of taps - 8 pointers, 5% of it). */
__attribute__((target("avx512f"))) static void window_run_avx512(const uint8_t **a, const uint8_t *first,
                                                                 const int64_t *off, const int64_t *run_off,
                                                                 int64_t taps, int64_t run, int64_t step)
{
    if (taps > 16) {
        for (int64_t q = 0; q < run; q++, a += taps)
            window_avx512(a, first + q * step, off, taps);
        return;
    }
    if (run_off && run >= RUN_BLOCK) {
        __m512i base = _mm512_set1_epi64((long long)(intptr_t)first), d = _mm512_set1_epi64((long long)(RUN_BLOCK * step));
        int64_t q = 0;
        for (; q + RUN_BLOCK <= run; q += RUN_BLOCK, a += RUN_BLOCK * taps) {
            for (int64_t k = 0; k < taps; k++)
                _mm512_storeu_si512((void *)(a + 8 * k), _mm512_add_epi64(base, _mm512_loadu_si512((const void *)(run_off + 8 * k))));
            base = _mm512_add_epi64(base, d);
        }
        first += q * step;
        run -= q;
    }
    __mmask8 k0 = (__mmask8)(taps >= 8 ? 0xff : (1u << taps) - 1);
    __mmask8 k1 = (__mmask8)(taps > 8 ? (1u << (taps - 8)) - 1 : 0);
    __m512i base = _mm512_set1_epi64((long long)(intptr_t)first), d = _mm512_set1_epi64((long long)step);
    __m512i v0 = _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(k0, off));
    __m512i v1 = _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(k1, off + 8));
    for (int64_t q = 0; q < run; q++, a += taps) {
        _mm512_mask_storeu_epi64((void *)a, k0, v0);
        if (k1)
            _mm512_mask_storeu_epi64((void *)(a + 8), k1, v1);
        v0 = _mm512_add_epi64(v0, d);
        v1 = _mm512_add_epi64(v1, d);
    }
}

/* A border window's pointers, up to 16 taps: a[t] = first + off[t] where bit t of `in` is set (the
 * tap lies inside the image), else zrow; first, an address that may lie outside the image, is an
 * integer (no pointer to outside the tensor is formed). */
__attribute__((target("avx512f"))) static void window_border_avx512(const uint8_t **a, intptr_t first,
                                                                    const int64_t *off, int64_t taps, uint32_t in,
                                                                    const uint8_t *zrow)
{
    __mmask8 k0 = (__mmask8)(taps >= 8 ? 0xff : (1u << taps) - 1);
    __mmask8 k1 = (__mmask8)(taps > 8 ? (1u << (taps - 8)) - 1 : 0);
    __m512i base = _mm512_set1_epi64((long long)first), z = _mm512_set1_epi64((long long)(intptr_t)zrow);
    __m512i v0 = _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(k0, off));
    _mm512_mask_storeu_epi64((void *)a, k0, _mm512_mask_blend_epi64((__mmask8)in, z, v0));
    if (k1) {
        __m512i v1 = _mm512_add_epi64(base, _mm512_maskz_loadu_epi64(k1, off + 8));
        _mm512_mask_storeu_epi64((void *)(a + 8), k1, _mm512_mask_blend_epi64((__mmask8)(in >> 8), z, v1));
    }
}

/* window_rows of 1 x 1 windows without padding (every window inside the image; MobileNetV2's and
 * the small ResNet's 1 x 1 layers): one pointer a pixel, a step of the stride along an output row.
 * The general loop's tests and call per pixel took 6% of MobileNetV2 int8 at batch 1. */
static void window_rows_1x1(const nhwc_job *j, int64_t r0, int64_t rows, const uint8_t **a)
{
    const qr_conv_geom *g = j->g;
    const int64_t OW = g->small[1], P = g->small_n, cs = j->cs, img = g->big_n * cs;
    const int64_t sx = g->stride[1] * cs, sy = g->stride[0] * g->big[1] * cs;
    int64_t n = r0 / P, oy = r0 % P / OW, ox = r0 % P % OW;
    for (int64_t i = 0; i < rows;) {
        const uint8_t *p = j->x + n * img + oy * sy + ox * sx;
        int64_t run = OW - ox < rows - i ? OW - ox : rows - i;
        for (int64_t q = 0; q < run; q++)
            a[i + q] = p + q * sx;
        i += run;
        if ((ox += run) == OW && (ox = 0, ++oy == g->small[0])) {
            oy = 0;
            n++;
        }
    }
}

/* The row pointers of output pixels [r0, r0 + rows) of the batch (its images' pixels one after
 * another: a block may span images), taps each (ky, kx row-major). A window inside the image is
 * its first position plus the taps' offsets; only border windows check each position (a small
 * layer's rows cost as much to point as to multiply when every position was checked). */
static void window_rows(const nhwc_job *j, int64_t r0, int64_t rows, const uint8_t **a)
{
    const qr_conv_geom *g = j->g;
    const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], P = g->small_n, taps = j->taps;
    int64_t n = r0 / P, oy = r0 % P / OW, ox = r0 % P % OW;
    static int avx512 = -1;
    if (avx512 < 0)
        avx512 = __builtin_cpu_supports("avx512f");
    for (int64_t i = 0; i < rows; i++) {
        const uint8_t *img = j->x + n * H * W * j->cs;
        if (oy >= j->oy0 && oy < j->oy1 && ox >= j->ox0 && ox < j->ox1) {
            const uint8_t *first =
                img + ((oy * g->stride[0] - g->pad_begin[0]) * W + ox * g->stride[1] - g->pad_begin[1]) * j->cs;
            if (avx512) { /* the run of interior windows of this row */
                int64_t run = j->ox1 - ox < rows - i ? j->ox1 - ox : rows - i;
                window_run_avx512(a, first, j->tap_off, j->run_off, taps, run, g->stride[1] * j->cs);
                a += run * taps;
                i += run - 1;
                ox += run - 1;
            } else {
                for (int64_t t = 0; t < taps; t++)
                    a[t] = first + j->tap_off[t];
                a += taps;
            }
        } else if (avx512 && taps <= 16) { /* which taps lie inside: a row's columns, for each row inside */
            const int64_t KW = g->kernel[1], iy0 = oy * g->stride[0] - g->pad_begin[0];
            const int64_t ix0 = ox * g->stride[1] - g->pad_begin[1];
            uint32_t cols = 0, in = 0;
            for (int64_t kx = 0; kx < KW; kx++) {
                int64_t ix = ix0 + kx * g->dilation[1];
                cols |= (uint32_t)(ix >= 0 && ix < W) << kx;
            }
            for (int64_t ky = 0; ky < g->kernel[0]; ky++) {
                int64_t iy = iy0 + ky * g->dilation[0];
                if (iy >= 0 && iy < H)
                    in |= cols << (ky * KW);
            }
            window_border_avx512(a, (intptr_t)img + (iy0 * W + ix0) * j->cs, j->tap_off, taps, in, j->zrow);
            a += taps;
        } else {
            for (int64_t ky = 0; ky < g->kernel[0]; ky++) {
                int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
                for (int64_t kx = 0; kx < g->kernel[1]; kx++) {
                    int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];
                    *a++ = iy >= 0 && iy < H && ix >= 0 && ix < W ? img + (iy * W + ix) * j->cs : j->zrow;
                }
            }
        }
        if (++ox == OW && (ox = 0, ++oy == g->small[0])) {
            oy = 0;
            n++;
        }
    }
}

/* 16 x 16 int32s: dst[c * ds + i] = src[i * ss + c]. Two unpack stages put each column's four
 * rows of a group together in 128-bit lanes; two lane shuffles gather a column's four groups. */
__attribute__((target("avx512f"))) static void turn16_avx512(const int32_t *src, int64_t ss, int32_t *dst, int64_t ds)
{
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512(src + i * ss);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* r[4i + q], lane L: column 4L + q of rows 4i .. 4i + 3 */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int q = 0; q < 4; q++) {
        __m512i v0 = _mm512_shuffle_i32x4(r[q], r[4 + q], 0x44), v1 = _mm512_shuffle_i32x4(r[q], r[4 + q], 0xee);
        __m512i v2 = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0x44), v3 = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0xee);
        _mm512_storeu_si512(dst + (0 + q) * ds, _mm512_shuffle_i32x4(v0, v2, 0x88));
        _mm512_storeu_si512(dst + (4 + q) * ds, _mm512_shuffle_i32x4(v0, v2, 0xdd));
        _mm512_storeu_si512(dst + (8 + q) * ds, _mm512_shuffle_i32x4(v1, v3, 0x88));
        _mm512_storeu_si512(dst + (12 + q) * ds, _mm512_shuffle_i32x4(v1, v3, 0xdd));
    }
}

/* Columns the epilogue runs on for a block of `rows` pixels: whole vector steps of the tile
 * kernels' loops (32, or 64 from 256 on), whose scalar remainder costs ten times a vector lane;
 * the columns past the block's are computed and dropped. */
static int64_t epilogue_cols(int64_t rows)
{
    return rows >= 256 ? (rows + 63) & ~(int64_t)63 : (rows + 31) & ~(int64_t)31;
}

/* The block's accumulator [rows][m] (rows acc_rs apart) turned to [m][ts] (ts >= rows: columns
 * past rows are zero), the epilogue's form. */
static void turn_acc(const int32_t *restrict acc, int64_t acc_rs, int64_t rows, int64_t m, int32_t *restrict t,
                     int64_t ts)
{
    static int avx512 = -1;
    if (avx512 < 0)
        avx512 = __builtin_cpu_supports("avx512f");
    int64_t r16 = avx512 ? rows & ~(int64_t)15 : 0, m16 = avx512 ? m & ~(int64_t)15 : 0;
    for (int64_t i0 = 0; i0 < r16; i0 += 16)
        for (int64_t c0 = 0; c0 < m16; c0 += 16)
            turn16_avx512(acc + i0 * acc_rs + c0, acc_rs, t + c0 * ts + i0, ts);
    for (int64_t i0 = 0; i0 < rows; i0 += 16) /* what the 16 x 16 blocks left: ragged edges, or all */
        for (int64_t c = i0 < r16 ? m16 : 0; c < m; c++)
            for (int64_t i = i0; i < rows && i < i0 + 16; i++)
                t[c * ts + i] = acc[i * acc_rs + c];
    for (int64_t c = 0; c < m && ts > rows; c++)
        memset(t + c * ts + rows, 0, (size_t)(ts - rows) * sizeof *t);
}

/* The epilogue's y [cols][ys_rs] turned into NHWC rows [rows][m] at y, cols of their m channels. */
static void turn_y(const nhwc_job *j, const uint8_t *restrict ys, int64_t ys_rs, uint8_t *restrict y, int64_t rows,
                   int64_t cols)
{
    int64_t m = j->m;
    if (j->esize == 1 && cols == m) {
        qr_nchw_to_nhwc_u8(y, ys, m, ys_rs, 0, rows);
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < cols; c++)
            memcpy(y + (i * m + c) * (int64_t)j->esize, ys + (c * ys_rs + i) * (int64_t)j->esize, j->esize);
}

static void nhwc_failed(nhwc_job *j, const qr_error *e)
{
    if (!__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL))
        *j->err = *e;
}

/* The epilogue of output pixels [r0, r0 + rows) of the batch, channels [c0, c1), their accumulator
 * in acc (rows m apart, from channel 0). A second stage takes whole rows of y: with the channels in
 * parts, each part's y goes to y_split and the stage runs once all parts are done (split_then). */
static void block_epilogue(nhwc_job *j, uint8_t *slot, int32_t *acc, int64_t r0, int64_t rows, int64_t c0,
                           int64_t c1)
{
    qr_error e;
    int64_t off = r0 * j->m, n = c1 - c0, es = (int64_t)j->esize;
    int then = j->ep->then && !j->y_split; /* the stage on this block's rows */
    if (j->ep->run_rows) { /* channels last as they are: y straight into the output, or the block's rows */
        uint8_t *ys = j->y_split ? j->y_split + off * es : slot + j->at_y;
        qr_acc_block b = {acc + c0, j->m, rows, n, c0, j->ep->then ? c0 : off + c0, j->m, j->ep->then ? ys : NULL};
        if (j->rows_ep) /* the same bytes (vecmap.h), 16 lanes an instruction */
            j->rows_ep(j->ep->then ? ys + c0 : j->y + off + c0, j->m, acc + c0, j->m, rows, n, c0, j->ep->vtabs);
        else if (j->ep->run_rows(j->ep, &b, &e) != QR_OK) {
            nhwc_failed(j, &e);
            return;
        }
        if (then && j->ep->then(j->ep, ys, off, rows * j->m, &e) != QR_OK)
            nhwc_failed(j, &e);
        return;
    }
    int32_t *acct = (int32_t *)(void *)(slot + j->at_acct);
    uint8_t *ys = slot + j->at_y;
    int64_t cols = epilogue_cols(rows);
    turn_acc(acc + c0, j->m, rows, n, acct, cols);
    qr_acc_block b = {acct, cols, n, cols, c0, 0, cols, ys};
    if (j->ep->run(j->ep, &b, &e) != QR_OK) {
        nhwc_failed(j, &e);
        return;
    }
    if (!j->ep->then || j->y_split) {
        turn_y(j, ys, cols, (j->y_split ? j->y_split : j->y) + (off + c0) * es, rows, n);
        return;
    }
    /* the block's y rows go to the second stage, which writes the output */
    uint8_t *rows_y = (uint8_t *)acct; /* free again: the epilogue has read it */
    turn_y(j, ys, cols, rows_y, rows, n);
    if (j->ep->then(j->ep, rows_y, off, rows * j->m, &e) != QR_OK)
        nhwc_failed(j, &e);
}

/* The second stage on y_split's pixels j->p0 + [p0, p1), once every part of their channels is made. */
static void split_then(void *arg, int64_t p0, int64_t p1)
{
    nhwc_job *j = arg;
    p0 += j->p0;
    p1 += j->p0;
    qr_error e;
    if (!__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE) &&
        j->ep->then(j->ep, j->y_split + p0 * j->m * (int64_t)j->esize, p0 * j->m, (p1 - p0) * j->m, &e) != QR_OK)
        nhwc_failed(j, &e);
}

/* gather_rows, one byte at a time: any geometry (windows too wide for gather_rows' stack rows). */
static void gather_rows_bytes(const nhwc_job *j, int64_t r0, int64_t rows, uint8_t *buf, const uint8_t **a)
{
    const qr_conv_geom *g = j->g;
    const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], C = j->c, KW = g->kernel[1], P = g->small_n;
    const int64_t cs = j->x_nchw ? H * W : 1, ps = j->x_nchw ? 1 : C; /* channel and pixel strides */
    const uint8_t flip = j->flip, xz = (uint8_t)j->xz;
    int64_t n = r0 / P, oy = r0 % P / OW, ox = r0 % P % OW;
    for (int64_t i = 0; i < rows; i++) {
        const uint8_t *img = j->x + n * g->big_n * C;
        uint8_t *d = buf + i * j->k4;
        for (int64_t c = 0; c < C; c++)
            for (int64_t ky = 0; ky < g->kernel[0]; ky++, d += KW) {
                int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
                const uint8_t *r = img + c * cs + iy * W * ps;
                for (int64_t kx = 0; kx < KW; kx++) {
                    int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];
                    d[kx] = iy >= 0 && iy < H && ix >= 0 && ix < W ? r[ix * ps] ^ flip : xz;
                }
            }
        memset(d, 0, (size_t)(j->k4 - C * j->taps));
        a[i] = buf + i * j->k4;
        if (++ox == OW && (ox = 0, ++oy == g->small[0])) {
            oy = 0;
            n++;
        }
    }
}

/* Bytes of the padded input rows gather_rows keeps on the stack for a run of pixels. */
enum { GATHER_STACK = 8192 };

/* One padded row of gather_rows (bytes [q0, q1) read from src + q and flipped, xz elsewhere, up
 * to span + 8) in whole 64-byte stores. Written byte by byte and word by word, the row made most
 * pixels' word loads straddle two stores still in flight, which store-to-load forwarding cannot
 * serve: the load waited for both to reach the cache (12% of the bundled CNN's batch-1 run, in
 * its 1-channel stem). A load within one 64-byte store is served from it. The masked-off bytes
 * are never read (src + q outside [q0, q1) may lie outside the image). */
__attribute__((target("avx512f,avx512bw"))) static void pad_row_avx512(uint8_t *p, uintptr_t src, int64_t q0,
                                                                       int64_t q1, int64_t span, uint8_t xz,
                                                                       uint8_t flip)
{
    const __m512i fill = _mm512_set1_epi8((char)xz), fl = _mm512_set1_epi8((char)flip);
    for (int64_t c = 0; c < span + 8; c += 64) {
        int64_t lo = q0 - c > 0 ? q0 - c : 0, hi = q1 - c < 64 ? q1 - c : 64;
        __mmask64 m = 0;
        if (hi > lo)
            m = (hi - lo == 64 ? ~0ull : (1ull << (hi - lo)) - 1) << lo;
        __m512i v = _mm512_mask_loadu_epi8(fill, m, (const void *)(src + (uintptr_t)c));
        v = _mm512_mask_blend_epi8(m, v, _mm512_xor_si512(v, fl));
        _mm512_storeu_si512(p + c, v);
    }
}

/* Input row iy of channel c of image img as gather_rows' padded row p: bytes [q0, q1) from
 * ix0 + q on (flipped), xz elsewhere up to span (a row above or below the image: all xz). */
static void padded_row(const nhwc_job *j, uint8_t *p, const uint8_t *img, int64_t c, int64_t iy, int64_t ix0,
                       int64_t q0, int64_t q1, int64_t span)
{
    static int avx512bw = -1;
    if (avx512bw < 0)
        avx512bw = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    const int64_t H = j->g->big[0], W = j->g->big[1], C = j->c;
    const int64_t cs = j->x_nchw ? H * W : 1, ps = j->x_nchw ? 1 : C; /* channel and pixel strides */
    const uint8_t flip = j->flip, xz = (uint8_t)j->xz;
    if (avx512bw && ps == 1) {
        int inside = iy >= 0 && iy < H;
        pad_row_avx512(p, (uintptr_t)(img + c * cs + (inside ? iy : 0) * W) + (uintptr_t)ix0, inside ? q0 : 0,
                       inside ? q1 : 0, span, xz, flip);
        return;
    }
    if (iy < 0 || iy >= H) {
        memset(p, xz, (size_t)span);
        return;
    }
    const uint8_t *r = img + c * cs + iy * W * ps;
    memset(p, xz, (size_t)q0);
    if (ps == 1) {
        const uint64_t flip8 = flip * 0x0101010101010101ull;
        int64_t q = q0;
        for (; q + 8 <= q1; q += 8) { /* words: GCC -O2 leaves this byte loop scalar */
            uint64_t v;
            memcpy(&v, r + ix0 + q, 8);
            v ^= flip8;
            memcpy(p + q, &v, 8);
        }
        for (; q < q1; q++)
            p[q] = r[ix0 + q] ^ flip;
    } else
        for (int64_t q = q0; q < q1; q++)
            p[q] = r[(ix0 + q) * ps] ^ flip;
    memset(p + q1, xz, (size_t)(span - q1));
}

/* Bytes gather_rows keeps free after its padded rows: pad_row_avx512's last 64-byte store, and
 * for gather_cols_avx512 its 64-byte loads past a row's last column. */
enum { GATHER_SLACK = 192 };

/* Pixels gather_rows takes in one run (its padded rows on the stack), < 1 when a window is too
 * wide for that (then gather_rows_bytes). */
static int64_t gather_most(const nhwc_job *j)
{
    const qr_conv_geom *g = j->g;
    int64_t nseg = j->c * g->kernel[0], reach = (g->kernel[1] - 1) * g->dilation[1] + 1;
    int64_t most = (GATHER_STACK - GATHER_SLACK) / nseg - 8 - reach;
    return most < 0 ? 0 : most / g->stride[1] + 1;
}

/* The column layout's tables (j->cols): a run's gathered bytes are its padded rows' columns one
 * after the other, byte q * S + s = padded row s's byte q (S = C * KH rows). Output vector o reads
 * each row from byte 64 o / S on: its byte t is row (64 o + t) % S's byte (64 o + t) / S - 64 o / S,
 * which repeats every S / gcd(S, 64) vectors. idx: period x 64, mask: period x S. */
static void gather_cols_tables(int64_t S, int64_t period, uint8_t *idx, uint64_t *mask)
{
    for (int64_t r = 0; r < period; r++) {
        for (int64_t s = 0; s < S; s++)
            mask[r * S + s] = 0;
        for (int64_t t = 0; t < 64; t++) {
            int64_t b = 64 * r + t;
            idx[r * 64 + t] = (uint8_t)(b / S - 64 * r / S);
            mask[r * S + b % S] |= 1ull << t;
        }
    }
}

/* S's column tables (gather_cols_tables, period p = S / gcd(S, 64)), made once in the process and
 * shared by every run and executor: they depend on S alone, and making them on each run (two
 * divisions a byte) was 2% of the bundled CNN's run at batch 1. S <= 32 (j->cols). NULL when out
 * of memory: the caller makes them in its workspace. */
static const uint8_t *col_tables_shared(int64_t S, int64_t p)
{
    static uint8_t *made[33];
    if (S < 1 || S > 32)
        return NULL;
    uint8_t *t = __atomic_load_n(&made[S], __ATOMIC_ACQUIRE), *was = NULL;
    if (t)
        return t;
    if (!(t = malloc((size_t)(p * 64 + p * S * 8))))
        return NULL;
    gather_cols_tables(S, p, t, (uint64_t *)(void *)(t + p * 64));
    if (__atomic_compare_exchange_n(&made[S], &was, t, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return t;
    free(t); /* another thread's came first: the same bytes */
    return was;
}

/* nv vectors of a run's column layout from its S padded rows (pstride bytes apart): a masked
 * vpermb of each row a vector. With 1 or 3 channels a pixel's window bytes copied one row segment
 * at a time (a word each, KW bytes apart) were most of a stem's time (the CNN's 1-channel stem at
 * batch 64: 60%, each word store over the last one's tail); in columns a pixel's window is
 * contiguous, its row a pointer into them, and 64 bytes take S permutes whatever the pixels.
 * Loads reach up to 64 + 64 / S bytes past a row's last column: GATHER_SLACK. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void gather_cols_avx512(
    uint8_t *out, const uint8_t *pad, int64_t pstride, int64_t S, int64_t nv, const uint8_t *idx,
    const uint64_t *mask, int64_t period)
{
    for (int64_t o = 0, r = 0; o < nv; o++, r = r + 1 == period ? 0 : r + 1) {
        const uint8_t *src = pad + 64 * o / S;
        const uint64_t *mk = mask + r * S;
        __m512i ix = _mm512_loadu_si512((const void *)(idx + 64 * r)), v = _mm512_setzero_si512();
        for (int64_t s = 0; s < S; s++, src += pstride)
            v = _mm512_mask_permutexvar_epi8(v, mk[s], ix, _mm512_loadu_si512((const void *)src));
        _mm512_storeu_si512((void *)(out + 64 * o), v);
    }
}

/* gather_cols_avx512 reading the S input rows where they are, not copies: row s's bytes [q0, q1)
 * from its start at src[s] (flipped), xz elsewhere and in the rows outside the image (in[s] 0), each
 * vector's bytes of a row one masked load (the bytes past q1 are read against zero weights or not
 * at all). For inputs whose row's pixels are contiguous (one channel, or NCHW): the padded rows
 * were a store a row that the gather's straddling loads could not forward from, and pad_row_avx512,
 * padded_row and gather_cols_avx512 took 7% of the bundled CNN's run at batch 1. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void gather_cols_img_avx512(
    uint8_t *out, const uintptr_t *src, const uint8_t *in, int64_t q0, int64_t q1, int64_t S, int64_t nv,
    const uint8_t *idx, const uint64_t *mask, int64_t period, uint8_t xz, uint8_t flip)
{
    const __m512i fill = _mm512_set1_epi8((char)xz), fl = _mm512_set1_epi8((char)flip);
    for (int64_t o = 0, r = 0; o < nv; o++, r = r + 1 == period ? 0 : r + 1) {
        int64_t off = 64 * o / S, lo = q0 - off > 0 ? q0 - off : 0, hi = q1 - off < 64 ? q1 - off : 64;
        __mmask64 m = 0;
        if (hi > lo)
            m = (hi - lo == 64 ? ~0ull : (1ull << (hi - lo)) - 1) << lo;
        const uint64_t *mk = mask + r * S;
        __m512i ix = _mm512_loadu_si512((const void *)(idx + 64 * r)), v = _mm512_setzero_si512();
        for (int64_t s = 0; s < S; s++) {
            __mmask64 ms = in[s] ? m : 0; /* no byte read of a row outside the image */
            __m512i x = _mm512_mask_loadu_epi8(fill, ms, (const void *)(src[s] + (uintptr_t)off));
            x = _mm512_mask_blend_epi8(ms, x, _mm512_xor_si512(x, fl));
            v = _mm512_mask_permutexvar_epi8(v, mk[s], ix, x);
        }
        _mm512_storeu_si512((void *)(out + 64 * o), v);
    }
}

/* With few input channels (a first layer's 1 or 3) a window position is less than one word of
 * k: each pixel's whole window goes into one row of C * taps bytes in the weights' own order (c,
 * ky, kx; padding as xz, i8 turned into u8, zeros past K up to k4), and the kernel runs with one
 * tap. The input may be NCHW (x_nchw). Byte by byte this costs ~50 cycles a pixel, more than the
 * GEMM: instead, for each run of pixels along one output row, each (c, ky) input row the run reads
 * is copied once into a padded row (flipped, xz outside the image), and a pixel's KW bytes of it
 * are then one unaligned word (KW <= 8, no dilation) written over the row; a word's spill past KW
 * is overwritten by the next segment, the zero tail or the next row (buf has 8 bytes of slack). */
static void gather_rows(const nhwc_job *j, int64_t r0, int64_t rows, uint8_t *buf, const uint8_t **a)
{
    const qr_conv_geom *g = j->g;
    const int64_t W = g->big[1], OH = g->small[0], OW = g->small[1], C = j->c, P = g->small_n;
    const int64_t KH = g->kernel[0], KW = g->kernel[1], sx = g->stride[1], dx = g->dilation[1];
    const int64_t nseg = C * KH, K = C * j->taps, reach = (KW - 1) * dx + 1;
    /* each segment's padded row: the run's span and a word of slack for the last pixel's load */
    int64_t most = gather_most(j); /* pixels per run */
    if (most < 1) {
        gather_rows_bytes(j, r0, rows, buf, a);
        return;
    }
    _Alignas(64) uint8_t pad[GATHER_STACK];
    /* the last segment's word with its bytes past KW zeroed: the row's zeros from K to K + 8 - KW
     * (reading the row back to mask it would stall on the words just stored) */
    const uint64_t last = KW >= 8 ? ~0ull : (1ull << (8 * KW)) - 1;
    const int64_t zeros = dx == 1 && KW <= 8 ? K + 8 - KW : K; /* where the loop must zero from */
    int64_t n = r0 / P, oy = r0 % P / OW, ox = r0 % P % OW;
    for (int64_t i = 0; i < rows;) {
        int64_t run = OW - ox < rows - i ? OW - ox : rows - i;
        run = run < most ? run : most;
        const int64_t span = (run - 1) * sx + reach, pstride = span + 8, ix0 = ox * sx - g->pad_begin[1];
        /* the span's part inside the image: [q0, q1) (pads may be wider than a window) */
        int64_t q0 = ix0 < 0 ? -ix0 : 0, q1 = W - ix0 < span ? W - ix0 : span;
        q0 = q0 < span ? q0 : span;
        q1 = q1 > q0 ? q1 : q0;
        const uint8_t *img = j->x + n * g->big_n * C;
        /* by columns from the rows in place where a row's pixels are contiguous */
        const int in_place = j->cols && (j->x_nchw || C == 1);
        for (int64_t c = 0; c < C && !in_place; c++)
            for (int64_t ky = 0; ky < KH; ky++)
                padded_row(j, pad + (c * KH + ky) * pstride, img, c,
                           oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0], ix0, q0, q1, span);
        if (j->cols) { /* pixel t's window: the columns from t * sx on, k4 - K bytes of the next
                        * ones after it, read against zero weights */
            int64_t step = sx * nseg, nv = ((run - 1) * step + j->k4 + 63) / 64;
            if (in_place) {
                uintptr_t src[32]; /* nseg <= 32 (j->cols) */
                uint8_t in[32];
                const int64_t H = g->big[0], cs = j->x_nchw ? H * W : 1;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t ky = 0; ky < KH; ky++) {
                        int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0], sg = c * KH + ky;
                        in[sg] = iy >= 0 && iy < H;
                        src[sg] = (uintptr_t)(img + c * cs + (in[sg] ? iy : 0) * W) + (uintptr_t)ix0;
                    }
                gather_cols_img_avx512(buf, src, in, q0, q1, nseg, nv, j->col_idx, j->col_mask, j->col_period,
                                       (uint8_t)j->xz, j->flip);
            } else
                gather_cols_avx512(buf, pad, pstride, nseg, nv, j->col_idx, j->col_mask, j->col_period);
            for (int64_t t = 0; t < run; t++)
                a[i + t] = buf + t * step;
            buf += nv * 64;
        } else {
            for (int64_t t = 0; t < run; t++) {
                uint8_t *row = buf + (i + t) * j->k4, *d = row;
                const uint8_t *p = pad + t * sx;
                if (dx == 1 && KW <= 8) {
                    uint64_t v;
                    for (int64_t sg = 1; sg < nseg; sg++, d += KW, p += pstride) {
                        memcpy(&v, p, 8);
                        memcpy(d, &v, 8);
                    }
                    memcpy(&v, p, 8);
                    v &= last; /* little-endian: the low bytes are the first */
                    memcpy(d, &v, 8);
                } else {
                    for (int64_t sg = 0; sg < nseg; sg++, d += KW, p += pstride)
                        for (int64_t kx = 0; kx < KW; kx++)
                            d[kx] = p[kx * dx];
                }
                for (int64_t b = zeros; b < j->k4; b++)
                    row[b] = 0;
                a[i + t] = row;
            }
        }
        i += run;
        if ((ox += run) == OW && (ox = 0, ++oy == OH)) {
            oy = 0;
            n++;
        }
    }
}

/* Few input channels, windows taller than the vertical stride (ResNet-18's 7 x 7 stride 2 stem
 * over 3 channels, 42 > 32 bytes a pixel for gather_cols_avx512): pixel (oy, ox)'s window and
 * (oy + 1, ox)'s share KH - sy input rows, so in an output column's bytes laid out by input row,
 * each row's C segments of KW bytes (ox * sx - pad + kx) one after the other, a window in the
 * order (ky, c, kx) is contiguous: C * KW bytes a row on from its first row. Each input row's
 * segments are copied once a column (sy x C words a pixel, against C x KH for a row each, 21 of
 * the stem's: 8 ms of its 44 at batch 64); a column's last word spills up to 8 - KW bytes, and a
 * zero word after it covers the k4 - K bytes its last window reads against zero weights. buf:
 * stack_bytes(j, rows). dx 1, KW <= 8, a padded row within GATHER_STACK (j->stack). */
static void gather_stack(const nhwc_job *j, int64_t r0, int64_t rows, uint8_t *buf, const uint8_t **a)
{
    const qr_conv_geom *g = j->g;
    const int64_t W = g->big[1], OW = g->small[1], C = j->c, P = g->small_n, KH = g->kernel[0], KW = g->kernel[1];
    const int64_t sy = g->stride[0], sx = g->stride[1], CKW = C * KW;
    _Alignas(64) uint8_t pad[GATHER_STACK];
    for (int64_t i = 0; i < rows;) {
        /* a piece: the block's pixels [p, p + len) of image n */
        int64_t n = (r0 + i) / P, p = (r0 + i) % P, len = P - p < rows - i ? P - p : rows - i;
        int64_t oyA = p / OW, oyB = (p + len - 1) / OW;
        int64_t oxlo = oyA == oyB ? p % OW : 0, oxhi = oyA == oyB ? (p + len - 1) % OW : OW - 1;
        int64_t iyA = oyA * sy - g->pad_begin[0], nIy = (oyB - oyA) * sy + KH;
        int64_t cst = nIy * CKW + 8; /* a column's bytes: its rows, then the zero word */
        int64_t span = (oxhi - oxlo) * sx + KW, ix0 = oxlo * sx - g->pad_begin[1];
        int64_t q0 = ix0 < 0 ? -ix0 : 0, q1 = W - ix0 < span ? W - ix0 : span;
        q0 = q0 < span ? q0 : span;
        q1 = q1 > q0 ? q1 : q0;
        const uint8_t *img = j->x + n * g->big_n * C;
        for (int64_t r = 0; r < nIy; r++)
            for (int64_t c = 0; c < C; c++) {
                padded_row(j, pad, img, c, iyA + r, ix0, q0, q1, span);
                uint8_t *d = buf + r * CKW + c * KW;
                const uint8_t *s = pad;
                for (int64_t ox = oxlo; ox <= oxhi; ox++, d += cst, s += sx) {
                    uint64_t v;
                    memcpy(&v, s, 8);
                    memcpy(d, &v, 8);
                }
            }
        for (int64_t ox = oxlo; ox <= oxhi; ox++)
            memset(buf + (ox - oxlo) * cst + nIy * CKW, 0, 8);
        for (int64_t t = 0, ox = p % OW, down = 0; t < len; t++) { /* no division a pixel */
            a[i + t] = buf + (ox - oxlo) * cst + down;
            if (++ox == OW)
                ox = 0, down += sy * CKW;
        }
        buf += (oxhi - oxlo + 1) * cst;
        i += len;
    }
}

/* Bytes gather_stack takes for a block of rows pixels: at most (rows - 2) / P + 2 pieces (one an
 * image it touches; counted with room to spare), each at most OW columns of (oyB - oyA) sy + KH
 * input rows and the zero word, where the pieces' oyB - oyA add up to less than rows / OW + pieces. */
static size_t stack_bytes(const nhwc_job *j, int64_t rows)
{
    const qr_conv_geom *g = j->g;
    int64_t OW = g->small[1], CKW = j->c * g->kernel[1], pieces = (rows + g->small_n - 2) / g->small_n + 3;
    return (size_t)(CKW * g->stride[0] * (rows + OW * pieces) + pieces * OW * (g->kernel[0] * CKW + 8) + 64);
}

/* The AMX kernel's blocks of sums (qr_iconv_sink) into y's bytes by the rows epilogue while they
 * are in L1: y the block's first row's bytes (the output, the stage's rows or y_split), rows m apart. */
typedef struct amx_rows_ctx {
    const nhwc_job *j;
    uint8_t *y;
} amx_rows_ctx;

static void amx_rows(void *arg, const int32_t *acc, int64_t acc_rs, int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    const amx_rows_ctx *x = arg;
    x->j->rows_ep(x->y + i0 * x->j->m + j0, x->j->m, acc, acc_rs, rows, cols, j0, x->j->ep->vtabs);
}

/* The n row pointers at a, into x or zrow, made pointers to the same rows of x16 or zrow16, in place. */
static const int16_t *const *wide_rows(const nhwc_job *j, const uint8_t **a, int64_t n)
{
    const uint8_t *x0 = j->x + j->q16 * j->cs;
    for (int64_t i = 0; i < n; i++) {
        const int16_t *p = a[i] == j->zrow ? j->zrow16 : j->x16 + (a[i] - x0);
        memcpy(&a[i], &p, sizeof p); /* the slot's bytes hold i16 pointers from here on */
    }
    return (const int16_t *const *)(void *)a;
}

static void dense_blocks(void *arg, int64_t b0, int64_t b1, int slot)
{
    nhwc_job *j = arg;
    uint8_t *s = j->work + (size_t)slot * j->slot_bytes;
    const uint8_t **a = (const uint8_t **)(void *)s;
    int32_t *acc = (int32_t *)(void *)(s + j->at_acc);
    for (int64_t b = b0; b < b1 && !__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE); b++) {
        int64_t r0 = j->p0 + b / j->parts * j->mb, rows = j->p1 - r0 < j->mb ? j->p1 - r0 : j->mb;
        int64_t part = b % j->parts, c0 = part * j->strips / j->parts * 64;
        int64_t c1 = (part + 1) * j->strips / j->parts * 64;
        c1 = c1 < j->m ? c1 : j->m;
        if (j->direct) { /* the tiles read the padded input; the rows epilogue on each run of sums, else
                          * the sums into the block's accumulator and block_epilogue's */
            int64_t off = r0 * j->m;
            uint8_t *ys = j->y_split ? j->y_split + off : s + j->at_y;
            amx_rows_ctx x = {j, j->ep->then ? ys : j->y + off};
            if (j->amx_sink) {
                qr_iconv_u8s8_amx_direct(&j->dir, r0, rows, j->wp, j->init, c0, c1, j->m, NULL, 0, amx_rows, &x);
                qr_error e;
                if (j->ep->then && !j->y_split && j->ep->then(j->ep, ys, off, rows * j->m, &e) != QR_OK)
                    nhwc_failed(j, &e);
            } else {
                qr_iconv_u8s8_amx_direct(&j->dir, r0, rows, j->wp, j->init, c0, c1, j->m, acc, j->m, NULL, NULL);
                block_epilogue(j, s, acc, r0, rows, c0, c1);
            }
            continue;
        }
        if (j->stack)
            gather_stack(j, r0, rows, s + j->at_rows, a);
        else if (j->gather)
            gather_rows(j, r0, rows, s + j->at_rows, a);
        else if (j->one_by_one)
            window_rows_1x1(j, r0, rows, a);
        else
            window_rows(j, r0, rows, a);
        if (j->joined) { /* the stage's bytes from the registers, its skip tensor read there too */
            j->fused(j->y + r0 * j->m, j->m, a, j->gather ? 1 : j->taps, rows, j->wp, j->init, j->k4, c0, c1, j->m,
                     j->ep->jtabs, j->ep->skip + r0 * j->m, j->m);
            continue;
        }
        if (j->fused) { /* y's bytes straight from the registers: into the output, or for the second stage
                         * the block's rows (whole: one part) or y_split (split_then runs it) */
            uint8_t *yd = j->y_split ? j->y_split + r0 * j->m : j->ep->then ? s + j->at_y : j->y + r0 * j->m;
            j->fused(yd, j->m, a, j->gather ? 1 : j->taps, rows, j->wp, j->init, j->k4, c0, c1, j->m,
                     j->ep->vtabs, NULL, 0);
            qr_error e;
            if (j->ep->then && !j->y_split && j->ep->then(j->ep, s + j->at_y, r0 * j->m, rows * j->m, &e) != QR_OK)
                nhwc_failed(j, &e);
            continue;
        }
        if (j->amx_sink) { /* the rows epilogue a block of 32 x 64 sums at a time, as block_epilogue's */
            int64_t off = r0 * j->m;
            uint8_t *ys = j->y_split ? j->y_split + off : s + j->at_y;
            amx_rows_ctx x = {j, j->ep->then ? ys : j->y + off};
            qr_iconv_u8s8_amx_sink(acc, j->m, a, j->gather ? 1 : j->taps, rows, j->wp, j->init, j->k4, c0, c1, j->m,
                                   amx_rows, &x);
            qr_error e;
            if (j->ep->then && !j->y_split && j->ep->then(j->ep, ys, off, rows * j->m, &e) != QR_OK)
                nhwc_failed(j, &e);
            continue;
        }
        if (j->fn16) /* the rows' pointers moved onto the i16 input */
            j->fn16(acc, j->m, wide_rows(j, a, rows * j->taps), j->taps, rows, j->wp, j->init, j->k4, c0, c1, j->m);
        else
            j->fn(acc, j->m, a, j->gather ? 1 : j->taps, rows, j->wp, j->init, j->k4, c0, c1, j->m);
        block_epilogue(j, s, acc, r0, rows, c0, c1);
    }
}

/* One output row of a depthwise block, made in the slot's accumulator's first row: its epilogue. */
typedef struct dw_row_ctx {
    nhwc_job *j;
    uint8_t *slot;
    int32_t *acc;
    int64_t first; /* the image's first output pixel */
} dw_row_ctx;

static void depthwise_row_done(void *arg, int64_t oy)
{
    dw_row_ctx *r = arg;
    int64_t OW = r->j->g->small[1];
    if (!__atomic_load_n(&r->j->failed, __ATOMIC_ACQUIRE))
        block_epilogue(r->j, r->slot, r->acc, r->first + oy * OW, OW, 0, r->j->c);
}

static void depthwise_blocks(void *arg, int64_t b0, int64_t b1, int slot)
{
    nhwc_job *j = arg;
    uint8_t *s = j->work + (size_t)slot * j->slot_bytes;
    int32_t *acc = (int32_t *)(void *)(s + j->at_acc);
    const qr_conv_geom *g = j->g;
    for (int64_t b = b0; b < b1 && !__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE); b++) {
        int64_t n = b / j->blocks_per_image, oy0 = b % j->blocks_per_image * j->mb, end = g->small[0];
        if (j->img >= 0) { /* a band: its rows of its image */
            n = j->img;
            oy0 += j->oyb0;
            end = j->oyb1;
        }
        int64_t oy1 = oy0 + j->mb < end ? oy0 + j->mb : end;
        /* each row's epilogue as soon as it is made, while its sums are in L1 (a block's, made first
         * and read back from L2, took as long as its sums on MobileNetV2) */
        dw_row_ctx r = {j, s, acc, n * g->small_n};
        qr_nhwc_dw_requant rq = j->rq;
        rq.y = j->y + n * g->small_n * j->c;
        qr_nhwc_dw_u8_rows(acc, j->c, j->x + n * g->big_n * j->c, j->c, g, j->wk, j->init, j->flip, j->xz, oy0, oy1,
                           j->ahead, depthwise_row_done, &r, j->rq_on ? &rq : NULL);
    }
}

/* The dense panels and starting values: w (M x C x KH x KW, s8, zero point 0) as igemm.h's panels,
 * init[m] = -xz * sum w[m] (the padding rows read xz, so every position contributes x - xz). */
static void pack_dense(const nhwc_job *j, const int8_t *w, int8_t *wp, int32_t *init)
{
    int64_t taps = j->gather ? 1 : j->taps;
    if (j->cols) { /* one tap of k = kx * S + s (S = C * KH rows s = c * KH + ky): w's k = s * KW + kx */
        int64_t K = j->c * j->taps, KW = j->g->kernel[1], S = K / KW, n16 = qr_igemm_n16(j->m), step;
        for (int64_t m = 0; m < n16; m++) {
            int8_t *d = (int8_t *)qr_iconv_col(wp, j->k4, n16, m, &step);
            for (int64_t q = 0; q < j->k4; q++)
                d[(q >> 2) * step + (q & 3)] = q < K && m < j->m ? w[m * K + q % S * KW + q / S] : 0;
        }
    } else if (j->stack) { /* one tap of k = ky * C * KW + c * KW + kx: w's k = (c * KH + ky) * KW + kx */
        int64_t K = j->c * j->taps, KH = j->g->kernel[0], KW = j->g->kernel[1], CKW = j->c * KW;
        int64_t n16 = qr_igemm_n16(j->m), step;
        for (int64_t m = 0; m < n16; m++) {
            int8_t *d = (int8_t *)qr_iconv_col(wp, j->k4, n16, m, &step);
            for (int64_t q = 0; q < j->k4; q++)
                d[(q >> 2) * step + (q & 3)] =
                    q < K && m < j->m ? w[m * K + (q % CKW / KW * KH + q / CKW) * KW + q % KW] : 0;
        }
    } else if (j->gather) /* one tap of k = c * taps + t: the weights' own order */
        qr_iconv_pack_w(wp, w, 1, j->c * j->taps, j->k4, j->m, 0, 1, j->c * j->taps);
    else
        qr_iconv_pack_w(wp, w, j->taps, j->c, j->k4, j->m, 1, j->taps, j->c * j->taps);
    qr_iconv_colsums(init, wp, taps, j->k4, j->m);
    for (int64_t m = 0; m < j->m; m++)
        init[m] = (int32_t)(0u - (uint32_t)j->xz * (uint32_t)init[m]);
}

/* The depthwise weights as taps x C int32, w - w_zero[c], and zero starting values. */
static void pack_depthwise(const nhwc_job *j, const qr_tensor *w, const qr_tensor *wzp, int32_t *wk, int32_t *init)
{
    int64_t nwz = wzp ? qr_tensor_numel(wzp) : 0;
    for (int64_t c = 0; c < j->c; c++) {
        int64_t wz = nwz ? qr_get_i64(wzp->data, wzp->dtype, nwz == 1 ? 0 : c) : 0;
        for (int64_t t = 0; t < j->taps; t++)
            wk[t * j->c + c] = (int32_t)(qr_get_i64(w->data, w->dtype, c * j->taps + t) - wz);
        init[c] = 0;
    }
}

/* The input as the dense kernels read it: pixels of k4 bytes (channels past C are read against
 * zero weights), i8 turned into u8 by ^ 0x80. x itself when it already is that. Of a copy, only
 * pixels [q0, q1) are made (a band's input rows; the rest is not read). */
static const uint8_t *dense_input(qr_kctx *k, const qr_tensor *x, int64_t k4, int64_t q0, int64_t q1, int64_t *cs)
{
    int64_t c = x->dims[3], px = x->dims[0] * x->dims[1] * x->dims[2];
    uint8_t flip = x->dtype == QR_I8 ? 0x80 : 0;
    if (!flip && c == k4) {
        *cs = c;
        return x->data;
    }
    uint8_t *s = qr_kwork(k, px, k4, 1, "NHWC convolution's input, padded to whole words");
    if (!s)
        return NULL;
    const uint8_t *xd = x->data;
    for (int64_t p = q0; p < q1; p++) {
        for (int64_t i = 0; i < c; i++)
            s[p * k4 + i] = xd[p * c + i] ^ flip;
        for (int64_t i = c; i < k4; i++)
            s[p * k4 + i] = 0;
    }
    *cs = k4;
    return s;
}

/* Each thread slot's scratch for blocks of up to `rows` pixels: the row pointers (or the gathered
 * rows), the accumulator block, it turned, the epilogue's y block. */
static void slot_layout(nhwc_job *j, int64_t rows, int depthwise)
{
    size_t ptrs = depthwise ? 0 : (size_t)(rows * j->taps) * sizeof(void *);
    size_t cols = (size_t)epilogue_cols(rows); /* the epilogue's columns of the largest block */
    size_t accb = cols * (size_t)j->m * sizeof(int32_t), yb = cols * (size_t)j->m * j->esize;
    size_t gathered = j->gather ? (size_t)(rows * j->k4) + 8 : 0; /* a word past the last row: gather_rows */
    if (j->cols) { /* each run's columns, whole vectors: at most a row's runs of most pixels, and one more */
        const qr_conv_geom *g = j->g;
        int64_t most = gather_most(j), OW = g->small[1], per = most < OW ? most : OW;
        int64_t runs = (rows + per - 1) / per + 1;
        gathered = (size_t)(rows * g->stride[1] * j->c * g->kernel[0] + runs * (j->k4 + 64));
    } else if (j->stack)
        gathered = stack_bytes(j, rows);
    j->at_rows = (ptrs + 63) / 64 * 64;
    j->at_acc = j->at_rows + (gathered + 63) / 64 * 64;
    j->at_acct = j->at_acc + (accb + 63) / 64 * 64;
    j->at_y = j->at_acct + (j->ep->run_rows ? 0 : (accb + 63) / 64 * 64); /* channels last: nothing turned */
    j->slot_bytes = j->at_y + (yb + 63) / 64 * 64;
}

/* The specialized kernel with epilogue program prog fused, the plan's when it found one before. */
static qr_iconv_ep_fn planned_ep(qr_nhwc_plan *p, int64_t taps, int64_t k4, int64_t m, const char *prog)
{
    for (int i = 0; p && i < 2; i++)
        if (p->ep_fn[i] && p->ep_prog[i] == prog)
            return p->ep_fn[i];
    qr_iconv_ep_fn f = qr_iconv_specialized_ep(taps, k4, m, prog);
    for (int i = 0; p && f && i < 2; i++)
        if (!p->ep_fn[i]) {
            p->ep_prog[i] = prog, p->ep_fn[i] = f;
            break;
        }
    return f;
}

/* qr_rqp_match of prog, kept in the plan (parsing it took over a microsecond a run) */
static int planned_rq(qr_nhwc_plan *p, const char *prog, qr_rqp *out)
{
    if (!p)
        return qr_rqp_match(prog, out);
    if (p->rq_prog != prog) {
        p->rq_ok = qr_rqp_match(prog, &p->rq);
        p->rq_prog = prog;
    }
    *out = p->rq;
    return p->rq_ok;
}

static qr_rows_ep_fn planned_rows(qr_nhwc_plan *p, const char *prog)
{
    if (p && p->rows_fn && p->rows_prog == prog)
        return p->rows_fn;
    qr_rows_ep_fn f = qr_rows_ep_specialized(prog);
    if (p && f)
        p->rows_prog = prog, p->rows_fn = f;
    return f;
}

qr_status qr_convint_run_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                              const qr_tensor *wzp, int wconst, const qr_acc_epilogue *ep, qr_nhwc_plan *plan)
{
    if (x->ndim != 4 || w->ndim != 4 || (x->dtype != QR_U8 && x->dtype != QR_I8) || w->dtype != QR_I8)
        return QR_KERR(k, "an NHWC convolution takes 4-D u8 or i8 input and 4-D i8 weights");
    int planned = plan && plan->ready;
    qr_conv_geom g;
    if (planned)
        g = plan->g;
    else {
        qr_tensor xv = nchw_view(k, x);
        if (qr_conv_geom_init(k, &xv, w->dims + 2, QR_WIN_CONV, &g) != QR_OK)
            return QR_ERR;
    }
    int x_nchw = planned ? plan->x_nchw : (int)qr_attr_i(k->node, "x_nchw", 0);
    int64_t nimg = x->dims[0];
    nhwc_job j = {.g = &g, .c = x_nchw ? x->dims[1] : x->dims[3], .m = w->dims[0], .taps = g.kernel_n, .parts = 1, .ep = ep, .err = k->err};
    int depthwise;
    if (planned)
        depthwise = plan->depthwise;
    else {
        int64_t group = qr_attr_i(k->node, "group", 1);
        depthwise = group == j.c && j.m == j.c && w->dims[1] == 1;
        if (!depthwise && (group != 1 || w->dims[1] != j.c))
            return QR_KERR(k, "an NHWC convolution has group 1 or is depthwise, not group %lld", (long long)group);
    }
    uint8_t flip = x->dtype == QR_I8 ? 0x80 : 0;
    j.xz = (int32_t)(xzp ? qr_get_i64(xzp->data, xzp->dtype, 0) : 0) + (flip ? 128 : 0);
    if (!depthwise && wzp && !(planned && plan->wzp_fixed && plan->wzp_zero)) {
        /* every run unless fixed: a loop of qr_get_i64 was 1-2% of MobileNetV2 at batch 1 */
        int64_t n = qr_tensor_numel(wzp), i = 0;
        if (wzp->dtype == QR_I8 || wzp->dtype == QR_U8) {
            const uint8_t *b = wzp->data;
            while (i < n && !b[i])
                i++;
        } else
            while (i < n && !qr_get_i64(wzp->data, wzp->dtype, i))
                i++;
        if (i < n)
            return QR_KERR(k, "an NHWC convolution's weights have zero point 0");
    }
    /* a band of output rows (k->band0/1, one image's), or all of them */
    int64_t OH = g.small[0], OW = g.small[1], img = -1, oyb0 = 0, oyb1 = OH;
    if (k->band1 > 0) {
        img = OH > 0 ? k->band0 / OH : 0;
        oyb0 = k->band0 - img * OH;
        oyb1 = k->band1 - img * OH;
        if (img >= nimg || oyb0 < 0 || oyb1 <= oyb0 || oyb1 > OH)
            return QR_KERR(k, "an NHWC convolution's band of rows [%lld, %lld) is not within one image",
                           (long long)k->band0, (long long)k->band1);
    }
    j.img = img;
    j.oyb0 = oyb0;
    j.oyb1 = oyb1;
    int threads = qr_pool_threads(k->pool);
    j.y = k->out[0]->data;
    j.esize = ep->then ? ep->y_size : qr_dtype_size(k->out[0]->dtype);
    if (j.esize > sizeof(int32_t))
        return QR_KERR(k, "an NHWC convolution's epilogue writes at most 4-byte elements, not %zu", j.esize);
    if (ep->run_rows && ep->vprog && ep->vtabs && j.esize == 1)
        j.rows_ep = planned_rows(plan, ep->vprog);
    if (depthwise) {
        /* output rows: an accumulator block of about 256 KB */
        j.mb = 1 + (65536 / (j.c > 0 ? j.c : 1)) / (g.small[1] > 0 ? g.small[1] : 1);
        if (img >= 0) { /* a band: its rows in at least as many blocks as threads */
            int64_t share = (oyb1 - oyb0 + threads - 1) / threads;
            j.mb = j.mb < share ? j.mb : share;
        }
        j.blocks_per_image = (oyb1 - oyb0 + j.mb - 1) / j.mb;
    } else {
        j.x_nchw = x_nchw;
        j.gather = j.x_nchw || (j.c < 16 && j.taps > 1);
        j.k4 = qr_igemm_k4(j.gather ? j.taps * j.c : j.c);
        /* gathered by columns (gather_cols_avx512: AVX512-VBMI's vpermb) where the rows are undilated
         * and a pixel's stride of S columns takes fewer permutes than its S words (S x sx x S / 64
         * against S: sx x S at most 32; ResNet-18's 7 x 7 stride 2 over 3 channels, 42, was 2%
         * slower by columns at batch 1); every kernel sums exact products, in any order of k */
        static int vbmi = -1;
        if (vbmi < 0)
            vbmi = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vbmi");
        j.cols = j.gather && vbmi && g.r == 2 && g.dilation[1] == 1 && g.stride[1] * j.c * g.kernel[0] <= 32 &&
                 gather_most(&j) >= 1 && !qr_options_get()->gather_rows;
        /* else by output columns where windows overlap down them and a padded row fits the stack */
        j.stack = j.gather && !j.cols && g.r == 2 && g.dilation[0] == 1 && g.dilation[1] == 1 &&
                  g.kernel[1] <= 8 && g.kernel[0] > g.stride[0] &&
                  (g.small[1] - 1) * g.stride[1] + g.kernel[1] + GATHER_SLACK <= GATHER_STACK &&
                  !qr_options_get()->gather_rows;
        /* the batch folded into the rows: a block may span images, so small images share weight passes */
        j.total = nimg * g.small_n;
        j.p0 = img >= 0 ? (img * OH + oyb0) * OW : 0;
        j.p1 = img >= 0 ? (img * OH + oyb1) * OW : j.total;
        int64_t pixels = j.p1 - j.p0, images = img >= 0 ? 1 : nimg;
        j.strips = (j.m + 63) / 64;
        j.parts = channel_parts(j.m, pixels, images, threads);
        j.mb = block_rows(j.m, pixels, images, j.parts > 1 ? 1 : threads);
        /* AMX on the input where it is: stride 1, undilated 2-D windows of more than one tap and K of
         * a tile row or more, at least a column tile of output channels, whole images (not a band:
         * its padded rows would be made per band). From 64 channels, where the copying AMX kernel
         * takes the layer, only where the padded grid's dropped pixels are at most 1/8 of the output:
         * they cost what real ones do, and ResNet-18 at batch 64 (its 28 x 28 to 7 x 7 layers,
         * 15-65% dropped) ran 195 -> 241 ms with every layer direct */
        int64_t piece = qr_iconv_amx_piece(g.kernel[1] * j.k4);
        int64_t grid = (OH + g.kernel[0] - 1) * (OW + g.kernel[1] - 1);
        j.direct = !j.gather && g.r == 2 && g.stride[0] == 1 && g.stride[1] == 1 && g.dilation[0] == 1 &&
                   g.dilation[1] == 1 && j.taps > 1 && j.taps * j.k4 >= 64 && j.m >= 16 && img < 0 && piece &&
                   g.small_n > 0 && (j.m < 64 || 8 * grid <= 9 * g.small_n) && qr_iconv_amx_chosen();
        if (j.direct)
            j.dir = (qr_amx_direct){.OH = OH, .OW = OW, .KH = g.kernel[0], .KW = g.kernel[1],
                                    .Hp = OH + g.kernel[0] - 1, .Wp = OW + g.kernel[1] - 1, .k4 = j.k4, .piece = piece};
    }
    int64_t rows = depthwise ? j.mb * g.small[1] : j.mb;
    size_t wbytes = depthwise ? (size_t)(j.taps * j.c) * 4
                              : (size_t)((j.gather ? 1 : j.taps) * j.k4 * qr_igemm_n16(j.m));
    size_t pbytes = (wbytes + 63) / 64 * 64 + (size_t)j.m * sizeof(int32_t);
    int fresh = 1;
    /* the column gather's order apart: an executor sharing this one's packing (qr_kcache_get) must
     * have packed in the same order */
    const char *what = j.cols ? "packed weights, column order" : j.stack ? "packed weights, row order" : "packed weights";
    uint8_t *packed = wconst ? qr_kcache_get(k, pbytes, what, &fresh) : qr_kscratch(k, 1, (int64_t)pbytes, 1, what);
    if (!packed)
        return QR_ERR;
    int32_t *init = (int32_t *)(void *)(packed + (wbytes + 63) / 64 * 64);
    if (depthwise) {
        j.wk = (const int32_t *)(void *)packed;
        if (fresh)
            pack_depthwise(&j, w, wzp, (int32_t *)(void *)packed, init);
        j.flip = flip;
        j.x = x->data;
        j.cs = j.c;
        j.ahead = !(img >= 0 && k->band_in0_cached) && qr_nhwc_dw_ahead(nimg * g.big_n * j.c);
        /* the epilogue's requantization in the kernel where its program reduces to one per channel
         * that every channel passes (requant_prog.h): the sums never leave the registers */
        qr_rqp rqp;
        if (j.rows_ep && !ep->then && __builtin_cpu_supports("avx512f") && planned_rq(plan, ep->vprog, &rqp)) {
            int64_t c16 = (j.c + 15) / 16 * 16;
            int32_t *v = qr_kwork(k, 5, c16, sizeof(int32_t), "depthwise requantization's channel values");
            if (!v) {
                qr_kcache_done(k, packed);
                return QR_ERR;
            }
            float *f = (float *)(void *)(v + 2 * c16);
            j.rq = (qr_nhwc_dw_requant){.bias = v, .z = v + c16, .m = f, .lo = f + c16, .hi = f + 2 * c16};
            j.rq_on = qr_rqp_fill(&rqp, ep->vtabs, j.c, v, f, f + c16, f + 2 * c16, v + c16);
        }
    } else {
        j.wp = (const int8_t *)packed;
        if (fresh)
            pack_dense(&j, w->data, (int8_t *)packed, init);
        /* a kernel compiled for this layer's shape when the API registered a specializer
         * (iconv-jit=1), else the CPU's */
        j.fn = j.direct ? qr_iconv_u8s8_amx
               : plan && plan->fn ? plan->fn
                                  : qr_iconv_specialized(j.gather ? 1 : j.taps, j.k4, j.m);
        if (plan && j.fn && !j.direct)
            plan->fn = j.fn; /* a NULL (compiling, or none) is asked again on the next run */
        if (!j.fn)
            j.fn = qr_iconv_u8s8_for(j.gather ? 1 : j.taps, j.k4, j.m);
        /* phase 2: the epilogue in the kernel too (before a second stage, y's bytes for it, or the
         * stage joined to it: the node's output) */
        if (!j.direct && ep->then && ep->jprog && ep->jtabs && ep->skip && j.esize == 1 &&
            qr_dtype_size(k->out[0]->dtype) == 1)
            j.joined = (j.fused = planned_ep(plan, j.gather ? 1 : j.taps, j.k4, j.m, ep->jprog)) != NULL;
        if (!j.direct && !j.fused && ep->vprog && ep->vtabs && j.esize == 1)
            j.fused = planned_ep(plan, j.gather ? 1 : j.taps, j.k4, j.m, ep->vprog);
        /* on AMX, the rows epilogue (vecmap.h's 16 lanes) on each 32 x 64 block of sums from the tiles,
         * where block_epilogue's would read them back from the whole block's accumulator */
        j.amx_sink = !j.fused && j.fn == qr_iconv_u8s8_amx && j.rows_ep && ep->run_rows;
        j.flip = flip;
        /* the input pixels the output rows read: a band's window rows, or all */
        int64_t H = g.big[0], W = g.big[1], q0 = 0, q1 = nimg * H * W;
        if (img >= 0) {
            int64_t iy0 = oyb0 * g.stride[0] - g.pad_begin[0];
            int64_t iy1 = (oyb1 - 1) * g.stride[0] - g.pad_begin[0] + (g.kernel[0] - 1) * g.dilation[0] + 1;
            iy0 = iy0 < 0 ? 0 : iy0 > H ? H : iy0;
            iy1 = iy1 < iy0 ? iy0 : iy1 > H ? H : iy1;
            q0 = (img * H + iy0) * W;
            q1 = (img * H + iy1) * W;
        }
        j.x = j.gather ? x->data : dense_input(k, x, j.k4, q0, q1, &j.cs);
        j.xz &= 0xff;
        /* AVX2 without VNNI: the input's pixels widened to i16 once, not in the tiles for every 8
         * columns (qr_iconv_wide_twin), where the memory budget leaves room for them */
        j.fn16 = !j.gather && !j.direct && !j.fused && !j.amx_sink && j.x ? qr_iconv_wide_twin(j.fn) : NULL;
        int64_t n16 = (q1 - q0) * j.cs;
        if (j.fn16 && !qr_kwork_fits(k, 1, n16 + j.k4, sizeof(int16_t)))
            j.fn16 = NULL;
        if (j.fn16) {
            int16_t *x16 = qr_kwork(k, 1, n16 + j.k4, sizeof(int16_t), "NHWC convolution's input as i16");
            if (!x16) {
                qr_kcache_done(k, packed);
                return QR_ERR;
            }
            const uint8_t *src = j.x + q0 * j.cs;
            for (int64_t i = 0; i < n16; i++)
                x16[i] = src[i];
            for (int64_t i = 0; i < j.k4; i++)
                x16[n16 + i] = (int16_t)j.xz;
            j.x16 = x16, j.zrow16 = x16 + n16, j.q16 = q0;
        }
        if (j.direct && j.x) { /* the padded images: xz, the input's pixels at (iy + pad top, ix + pad left) */
            int64_t Hp = j.dir.Hp, Wp = j.dir.Wp, k4 = j.k4, pt = g.pad_begin[0], pl = g.pad_begin[1];
            int64_t bytes = nimg * Hp * Wp * k4 + qr_iconv_amx_slack(k4, j.dir.KW);
            uint8_t *xp = qr_kwork(k, 1, bytes, 1, "NHWC convolution's padded input");
            if (!xp) {
                qr_kcache_done(k, packed);
                return QR_ERR;
            }
            memset(xp, (uint8_t)j.xz, (size_t)bytes);
            for (int64_t n = 0; n < nimg; n++)
                for (int64_t iy = 0; iy < H; iy++) {
                    int64_t py = iy + pt, px0 = pl < 0 ? 0 : pl, ix0 = px0 - pl, ix1 = W < Wp - pl ? W : Wp - pl;
                    if (py < 0 || py >= Hp || ix1 <= ix0)
                        continue;
                    uint8_t *d = xp + ((n * Hp + py) * Wp + px0) * k4;
                    const uint8_t *src = j.x + ((n * H + iy) * W + ix0) * j.cs;
                    if (j.cs == k4)
                        memcpy(d, src, (size_t)((ix1 - ix0) * k4));
                    else
                        for (int64_t ix = ix0; ix < ix1; ix++)
                            memcpy(d + (ix - ix0) * k4, src + (ix - ix0) * j.cs, (size_t)k4);
                }
            j.dir.xp = xp;
        }
    }
    j.init = init;
    int slots = threads;
    slot_layout(&j, rows, depthwise);
    uint8_t *zrow = depthwise ? NULL : qr_kwork(k, 1, j.k4 + 64, 1, "NHWC convolution's padding row");
    /* the taps' offsets: the plan's (made on its first run) when they fit it */
    int keep_taps = plan && !depthwise && j.taps <= QR_NHWC_PLAN_TAPS && (!planned || plan->taps_kept);
    int64_t *tap_off = depthwise ? NULL
                       : keep_taps ? plan->tap_off
                                   : qr_kwork(k, 1, (RUN_BLOCK + 1) * j.taps, sizeof(int64_t), "NHWC convolution's tap offsets");
    j.work = (depthwise || (zrow && tap_off)) && (depthwise || j.x)
                 ? qr_kwork(k, slots, (int64_t)j.slot_bytes, 1, "NHWC convolution's blocks")
                 : NULL;
    if (j.work && j.parts > 1 && ep->then && !j.joined) {
        j.y_split = qr_kwork(k, j.total, j.m * (int64_t)j.esize, 1, "NHWC convolution's y for its second stage");
        if (!j.y_split)
            j.work = NULL;
    }
    if (!j.work) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    if (j.cols) {
        int64_t S = j.c * g.kernel[0], p = S;
        for (int64_t b = 64; b % 2 == 0 && p % 2 == 0; b /= 2) /* S / gcd(S, 64) */
            p /= 2;
        const uint8_t *t = col_tables_shared(S, p);
        if (!t) {
            uint8_t *w = qr_kwork(k, 1, p * 64 + p * S * 8, 1, "NHWC convolution's column tables");
            if (!w) {
                qr_kcache_done(k, packed);
                return QR_ERR;
            }
            gather_cols_tables(S, p, w, (uint64_t *)(void *)(w + p * 64));
            t = w;
        }
        j.col_period = p;
        j.col_idx = t;
        j.col_mask = (const uint64_t *)(const void *)(t + p * 64);
    }
    if (zrow)
        memset(zrow, (uint8_t)j.xz, (size_t)j.k4);
    if (tap_off && planned && keep_taps && plan->cs == j.cs) {
        j.tap_off = tap_off;
        j.run_off = j.taps <= 16 ? tap_off + j.taps : NULL;
        j.oy0 = plan->oy0, j.oy1 = plan->oy1, j.ox0 = plan->ox0, j.ox1 = plan->ox1;
        j.one_by_one = plan->one_by_one;
    } else if (tap_off) {
        window_setup(&j, tap_off);
        if (keep_taps) {
            plan->cs = j.cs;
            plan->oy0 = j.oy0, plan->oy1 = j.oy1, plan->ox0 = j.ox0, plan->ox1 = j.ox1;
            plan->one_by_one = j.one_by_one;
        }
    }
    j.zrow = zrow;
    int64_t blocks = depthwise ? (img >= 0 ? 1 : nimg) * j.blocks_per_image
                     : j.mb > 0   ? (j.p1 - j.p0 + j.mb - 1) / j.mb * j.parts
                                  : 0;
    qr_parallel_for_slots(k->pool, blocks, 1, depthwise ? depthwise_blocks : dense_blocks, &j);
    if (j.y_split) /* pixels of at least 16 KB of y a task */
        qr_parallel_for(k->pool, j.p1 - j.p0, (16384 + j.m - 1) / j.m, split_then, &j);
    qr_kcache_done(k, packed);
    if (j.failed)
        return QR_ERR;
    if (plan && !planned) { /* what later runs of these shapes take as it is */
        plan->g = g;
        plan->depthwise = depthwise;
        plan->x_nchw = x_nchw;
        plan->wzp_zero = 1; /* checked above (or none, or depthwise: not read) */
        plan->taps_kept = keep_taps;
        plan->ready = 1;
    }
    return QR_OK;
}

int qr_convint_band_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *w, qr_band_geom *bg)
{
    if (x->ndim != 4 || w->ndim != 4)
        return 0;
    qr_tensor xv = nchw_view(k, x);
    qr_conv_geom g;
    qr_error e, *keep = k->err;
    k->err = &e; /* a geometry it cannot take is no band, not an error */
    qr_status st = qr_conv_geom_init(k, &xv, w->dims + 2, QR_WIN_CONV, &g);
    k->err = keep;
    if (st != QR_OK || g.r != 2)
        return 0;
    /* an input read NCHW (a first layer's, gathered) is whole, never a chain's link: its rows are no
     * NHWC rows of a node before it, so in_rows 0 (no node makes 0 rows) lets it only start a chain */
    int nchw = (int)qr_attr_i(k->node, "x_nchw", 0);
    *bg = (qr_band_geom){x->dims[0], g.small[0], nchw ? 0 : g.big[0], g.stride[0], g.pad_begin[0],
                         (g.kernel[0] - 1) * g.dilation[0]};
    return 1;
}
