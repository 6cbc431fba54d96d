/* Convolutions and pools on float tensors: Conv, ConvTranspose, MaxPool,
 * AveragePool, GlobalAveragePool, GlobalMaxPool, MaxUnpool.
 * Conv is im2col + GEMM per (image, group); ConvTranspose is GEMM + col2im;
 * the pools walk the kernel positions over the window offsets of
 * qr_conv_offsets. f32 computes in float, f64 in double, f16 through float. */
#include "conv_geom.h"
#include "sconv.h"
#include "sgemm.h"
#include "wino.h"
#include "wino_nchw.h"
#include "window_f32.h"
#include "options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- geometry (shared with quant.c through conv_geom.h) ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* An ints attribute with one value per spatial axis (n values), each >= min;
 * absent or empty means every value is def. */
/* Bound on kernel sizes, strides, dilations and pads: far beyond any real model,
 * small enough that the geometry below cannot overflow int64. */
#define GEOM_MAX ((int64_t)1 << 24)

static qr_status axis_ints(qr_kctx *k, const char *name, int n, int64_t def, int64_t min, int64_t *v)
{
    const int64_t *a;
    int c = qr_attr_ints(k->node, name, &a);
    if (c <= 0) {
        for (int i = 0; i < n; i++)
            v[i] = def;
        return QR_OK;
    }
    if (c != n)
        return QR_KERR(k, "attribute '%s' has %d values, expected %d for an input with %d spatial axes",
                       name, c, n, n / (strcmp(name, "pads") == 0 ? 2 : 1));
    for (int i = 0; i < n; i++) {
        if (a[i] < min)
            return QR_KERR(k, "attribute '%s' value %lld must be at least %lld", name, (long long)a[i],
                           (long long)min);
        if (a[i] > GEOM_MAX)
            return QR_KERR(k, "attribute '%s' value %lld is too large (at most %lld)", name, (long long)a[i],
                           (long long)GEOM_MAX);
        v[i] = a[i];
    }
    return QR_OK;
}

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

static qr_status auto_pad_mode(qr_kctx *k, int *mode)
{
    const char *s = qr_attr_s(k->node, "auto_pad", "NOTSET");
    if (!*s || strcmp(s, "NOTSET") == 0)
        *mode = PAD_NOTSET;
    else if (strcmp(s, "SAME_UPPER") == 0)
        *mode = PAD_SAME_UPPER;
    else if (strcmp(s, "SAME_LOWER") == 0)
        *mode = PAD_SAME_LOWER;
    else if (strcmp(s, "VALID") == 0)
        *mode = PAD_VALID;
    else
        return QR_KERR(k, "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", s);
    return QR_OK;
}

/* ConvTranspose: the small side is the input, the big side the output. */
static qr_status transpose_geom(qr_kctx *k, const qr_tensor *x, int mode, const int64_t *pads, qr_conv_geom *g)
{
    int r = g->r;
    int64_t opad[QR_MAX_DIMS];
    if (axis_ints(k, "output_padding", r, 0, 0, opad) != QR_OK)
        return QR_ERR;
    const int64_t *os;
    int nos = qr_attr_ints(k->node, "output_shape", &os);
    if (nos == r + 2) /* some exporters give the whole N x C x spatial shape */
        os += 2;
    else if (nos > 0 && nos != r)
        return QR_KERR(k, "attribute 'output_shape' has %d values, expected %d (one per spatial axis)", nos, r);
    for (int i = 0; i < r; i++) {
        int64_t in = x->dims[2 + i], s = g->stride[i];
        int64_t full = s * (in - 1) + opad[i] + (g->kernel[i] - 1) * g->dilation[i] + 1, out, pb, pe;
        if (nos > 0 || mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
            /* The spec: pads follow from the requested size; the odd unit goes
             * to the end for SAME_UPPER and to the beginning otherwise. A
             * negative total extends the output with bias-only positions. */
            out = nos > 0 ? os[i] : in * s;
            if (out < 0 || out > ((int64_t)1 << 40))
                return QR_KERR(k, "output_shape value %lld is negative or too large", (long long)out);
            int64_t total = full - out;
            if (mode == PAD_SAME_UPPER) {
                pb = floor_div(total, 2);
                pe = total - pb;
            } else {
                pe = floor_div(total, 2);
                pb = total - pe;
            }
        } else {
            pb = pads[i];
            pe = pads[r + i];
            out = full - pb - pe;
            if (out < 0)
                return QR_KERR(k, "spatial axis %d: pads %lld+%lld exceed the output size %lld", i,
                               (long long)pb, (long long)pe, (long long)full);
        }
        g->small[i] = in;
        g->big[i] = out;
        g->pad_begin[i] = pb;
        g->pad_end[i] = pe;
    }
    return QR_OK;
}

qr_status qr_conv_geom_init(qr_kctx *k, const qr_tensor *x, const int64_t *wkernel, qr_win_kind kind,
                            qr_conv_geom *g)
{
    memset(g, 0, sizeof *g);
    if (x->ndim < 3)
        return QR_KERR(k, "input must have rank 3 or more (N x C x spatial axes), got rank %d", x->ndim);
    int r = g->r = x->ndim - 2;
    const int64_t *ks;
    int nk = qr_attr_ints(k->node, "kernel_shape", &ks);
    if (nk > 0) {
        if (nk != r)
            return QR_KERR(k, "attribute 'kernel_shape' has %d values, expected %d (one per spatial axis)", nk, r);
        for (int i = 0; i < r; i++) {
            if (ks[i] < 1 || ks[i] > GEOM_MAX)
                return QR_KERR(k, "kernel_shape value %lld must be from 1 to %lld", (long long)ks[i],
                               (long long)GEOM_MAX);
            if (wkernel && wkernel[i] != ks[i])
                return QR_KERR(k, "kernel_shape[%d] = %lld differs from the weights' spatial size %lld", i,
                               (long long)ks[i], (long long)wkernel[i]);
            g->kernel[i] = ks[i];
        }
    } else if (wkernel) {
        for (int i = 0; i < r; i++) {
            if (wkernel[i] < 1 || wkernel[i] > GEOM_MAX)
                return QR_KERR(k, "the weights' spatial size %lld must be from 1 to %lld", (long long)wkernel[i],
                               (long long)GEOM_MAX);
            g->kernel[i] = wkernel[i];
        }
    } else {
        return QR_KERR(k, "attribute 'kernel_shape' is required");
    }
    int64_t pads[2 * QR_MAX_DIMS];
    int mode;
    if (axis_ints(k, "strides", r, 1, 1, g->stride) != QR_OK ||
        axis_ints(k, "dilations", r, 1, 1, g->dilation) != QR_OK || axis_ints(k, "pads", 2 * r, 0, 0, pads) != QR_OK ||
        auto_pad_mode(k, &mode) != QR_OK)
        return QR_ERR;
    if (mode == PAD_VALID)
        memset(pads, 0, sizeof pads);
    g->kernel_n = 1;
    for (int i = 0; i < r; i++)
        if (__builtin_mul_overflow(g->kernel_n, g->kernel[i], &g->kernel_n) || g->kernel_n > QR_MAX_TENSOR_BYTES)
            return QR_KERR(k, "the window (kernel_shape) is too large");

    if (kind == QR_WIN_TRANSPOSE) {
        if (transpose_geom(k, x, mode, pads, g) != QR_OK)
            return QR_ERR;
    } else {
        int ceil_mode = kind == QR_WIN_POOL && qr_attr_i(k->node, "ceil_mode", 0) != 0;
        for (int i = 0; i < r; i++) {
            int64_t in = x->dims[2 + i], s = g->stride[i], eff = (g->kernel[i] - 1) * g->dilation[i] + 1;
            int64_t out, pb, pe;
            if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
                out = ceil_div(in, s);
                int64_t total = (out - 1) * s + eff - in;
                if (total < 0)
                    total = 0;
                pb = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
                pe = total - pb;
            } else {
                pb = pads[i];
                pe = pads[r + i];
                int64_t span = in + pb + pe - eff;
                if (span < 0)
                    return QR_KERR(k, "spatial axis %d: the window (%lld with dilation) is larger than the padded input (%lld)",
                                   i, (long long)eff, (long long)(in + pb + pe));
                out = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
                /* With ceil_mode a last window that would start in the end
                 * padding is dropped (spec, PyTorch and onnxruntime agree). */
                if (ceil_mode && (out - 1) * s >= in + pb)
                    out--;
            }
            g->big[i] = in;
            g->small[i] = out;
            g->pad_begin[i] = pb;
            g->pad_end[i] = pe;
        }
    }
    g->big_n = g->small_n = 1;
    for (int i = 0; i < r; i++)
        if (g->big[i] < 0 || g->small[i] < 0 || __builtin_mul_overflow(g->big_n, g->big[i], &g->big_n) ||
            __builtin_mul_overflow(g->small_n, g->small[i], &g->small_n) || g->big_n > QR_MAX_TENSOR_BYTES ||
            g->small_n > QR_MAX_TENSOR_BYTES)
            return QR_KERR(k, "the spatial output size is too large");
    return QR_OK;
}

void qr_conv_offsets(const qr_conv_geom *g, int64_t kflat, int64_t *offs)
{
    int r = g->r, last = r - 1;
    int64_t kk[QR_MAX_DIMS], bstride[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0};
    if (g->small_n == 0)
        return;
    for (int d = r - 1; d >= 0; d--) {
        kk[d] = kflat % g->kernel[d];
        kflat /= g->kernel[d];
    }
    int64_t bs = 1;
    for (int d = r - 1; d >= 0; d--) {
        bstride[d] = bs;
        bs *= g->big[d];
    }
    /* All axes but the last are fixed per row of small positions; the last
     * axis runs in the inner loop. */
    int64_t rows = g->small_n / g->small[last], n_last = g->small[last], big_last = g->big[last];
    int64_t s_last = g->stride[last], k_last = kk[last] * g->dilation[last] - g->pad_begin[last];
    int64_t j = 0;
    for (int64_t row = 0; row < rows; row++) {
        int64_t base = 0;
        int valid = 1;
        for (int d = 0; d < last; d++) {
            int64_t p = idx[d] * g->stride[d] - g->pad_begin[d] + kk[d] * g->dilation[d];
            if (p < 0 || p >= g->big[d])
                valid = 0;
            base += p * bstride[d];
        }
        for (int64_t x = 0; x < n_last; x++) {
            int64_t p = x * s_last + k_last;
            offs[j++] = valid && p >= 0 && p < big_last ? base + p : -1;
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < g->small[d])
                break;
            idx[d] = 0;
        }
    }
}

/* ---- float kernels, instantiated for float and double ---- */

/* C[m x n] = A[m x kdim] * B[kdim x n] (+ bias per row); A(r, q) = a[r*a_rs + q*a_cs]. */
typedef struct gemm_job {
    const void *a, *b, *bias;
    void *c;
    int64_t a_rs, a_cs, m, n, kdim;
    const qr_act *act; /* applied to every output last (f32; NULL: none) */
} gemm_job;

/* A forward convolution's operands (of the macro's type T) and per-thread scratch. */
typedef struct conv_job {
    const qr_conv_geom *g;
    const void *x, *w, *b;
    void *y;
    int64_t ch, m, group, cg, mg, ck;
    void *col;     /* slots x ck x small_n, NULL for a direct 1x1 */
    int64_t *offs; /* slots x small_n */
    const qr_sgemm_kernel *sk; /* f32's FMA GEMM (NULL: gemm_rows) and its slots' panels */
    float *pk;
    /* conv_image_runs: per window position (c, ky, kx) where its run starts in the padded planes
     * (NULL: im2col), the planes' rows and columns, their elements, and a slot's buffer */
    const int64_t *rows;
    int64_t hp, wp, plen, slot_len;
    int64_t php; /* stride 2: the planes' four phases (as dw_runs), each php elements; 0: stride 1 */
    const qr_act *act; /* a Conv's fused activation (NULL: none) */
} conv_job;

/* A depthwise convolution as runs (dw_runs_*): the plane (stride 1) or its four phases (stride 2,
 * plen apart) in dlen elements a slot, then alen of sums, n = OH * wrow of them. */
typedef struct dw_runs_job {
    const conv_job *cj;
    int phased;
    int64_t wrow, n, plen, dlen, alen;
    const int64_t *off; /* per window position: where its run starts in the slot's plane */
    int taps_avx2;      /* f32 on a CPU with AVX2 and no AVX-512: the taps by qr_dw_taps_f32_avx2 (same bits) */
} dw_runs_job;

/* Rows are computed four at a time, so each row of b is loaded once for four
 * rows of c; the loops are cloned per instruction set (the CPU's best is
 * chosen when the program loads) without contracting a*b+c into FMA, so
 * every clone rounds exactly as the portable one. The bias is added once the
 * products are summed, not used as the sum's start: a BatchNorm-folded bias
 * is often large next to the sum, and starting from it rounds every partial
 * sum at the bias's magnitude (M-LSD's first Conv had 3x the rms error, and
 * the depthwise Conv after it amplifies that: its offsets output was up to
 * 0.05 from ONNX Runtime's, which adds the bias last). */
/* Images a float Conv folds into one GEMM: as many as keep it within 1024 columns and its im2col
 * within 512 KB (written, then read by the GEMM, in L2), when one image's columns leave the GEMM's
 * last 32-column tile partly empty; 1: image by image. col_bytes: one column's bytes in the im2col. */
static int64_t conv_fold(int64_t small_n, int64_t col_bytes)
{
    if (small_n <= 0 || small_n % 32 == 0 || col_bytes <= 0)
        return 1;
    int64_t by_cols = 1024 / small_n, by_bytes = (512 << 10) / (col_bytes * small_n);
    return by_cols < by_bytes ? by_cols : by_bytes;
}

/* Columns per register tile of the float GEMM: 32 floats, two zmm per row. */
#define GEMM_XT 32

/* Half a tile row as one GCC vector (each clone lowers it to its own registers: one zmm, two
 * ymm, four xmm); U_ the same for unaligned loads and stores. w - zero broadcasts w exactly
 * (-0, infinities and NaN included). */
typedef float V_f32 __attribute__((vector_size(GEMM_XT / 2 * sizeof(float))));
typedef float U_f32 __attribute__((vector_size(GEMM_XT / 2 * sizeof(float)), aligned(4), may_alias));
typedef double V_f64 __attribute__((vector_size(GEMM_XT / 2 * sizeof(double))));
typedef double U_f64 __attribute__((vector_size(GEMM_XT / 2 * sizeof(double)), aligned(8), may_alias));

/* The FMA GEMM's panels for each of k's threads; NULL with the error set when the workspace fails. */
static float *sgemm_panels(qr_kctx *k, const qr_sgemm_kernel *sk)
{
    return qr_kwork(k, qr_pool_threads(k->pool), qr_sgemm_work(sk), sizeof(float), "packed GEMM panels");
}

/* The FMA GEMM for a float type's products (f64 and CPUs without FMA: NULL, gemm_rows) and its
 * panels for every thread; *pk NULL with the error set when the workspace fails. */
static const qr_sgemm_kernel *sgemm_for(qr_kctx *k, size_t elem, float **pk)
{
    const qr_sgemm_kernel *sk = elem == sizeof(float) ? qr_sgemm_best() : NULL;
    *pk = sk ? sgemm_panels(k, sk) : NULL;
    return sk;
}

/* One slot's panels of pk (NULL stays NULL). */
static float *sgemm_slot(const qr_sgemm_kernel *sk, float *pk, int slot)
{
    return pk ? pk + slot * qr_sgemm_work(sk) : NULL;
}

/* f32 depthwise planes [p0, p1) (plane p = n * C + c) with the AVX-512 window kernel; cj->col holds
 * each slot's padded plane, cj->slot_len floats apart. */
static void dw_planes_avx512(void *arg, int64_t p0, int64_t p1, int slot)
{
    const conv_job *cj = arg;
    const float *x = cj->x, *w = cj->w, *b = cj->b;
    const qr_conv_geom *g = cj->g;
    float *work = (float *)cj->col + slot * cj->slot_len;
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % cj->ch;
        qr_dw_plane_f32_avx512(g, x + p * g->big_n, w + c * g->kernel_n, b ? b + c : NULL, cj->act, work,
                               (float *)cj->y + p * g->small_n);
    }
}

/* ---- f32 convolution with the output channels in vectors (sconv.h) ---- */

/* Whether a float Conv runs on sconv (the CPU permitting): group 1 when K (C x window) is at least
 * 64 (below it the NCHW transposes of its input and output cost more than the GEMM path's ragged
 * tiles), except a 1x1 at stride 1 without padding, which the GEMM reads in place: that one only
 * on images of at most 256 pixels, where its columns are ragged (MobileNetV2's 14 x 14 and 7 x 7
 * layers 0.10 against 0.13 ms, 0.19 against 0.26; on 28 x 28 and larger the GEMM is faster), and
 * depthwise convolutions of at most 32 x 32 outputs a plane (channels in vectors: the NCHW
 * kernel's 16-wide rows were 7 wide on 7 x 7 planes; 576 channels of 14 x 14, 0.100 -> 0.051 ms).
 * Measured on AMD Zen 5, 1 thread. */
static int sconv_takes(const qr_conv_geom *g, int64_t c, int64_t m, int64_t group)
{
    if (g->r != 2 || !qr_sconv_available())
        return 0;
    if (group > 1) /* on larger planes the transposes' memory traffic costs more than the NCHW kernel */
        return group == c && m == c && g->kernel_n <= QR_SCONV_DW_TAPS && g->small_n <= 1024;
    int direct = g->kernel_n == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->pad_begin[0] == 0 &&
                 g->pad_begin[1] == 0 && g->pad_end[0] == 0 && g->pad_end[1] == 0;
    if (direct)
        return g->small_n <= 256 && c >= 8;
    return c * g->kernel_n >= 64;
}

/* Image bytes from which the thin tiles without the border's taps read a channels-last input in
 * place (qr_sconv_reads_inside): below, the padded copy stays in L1 and costs less than the
 * border columns' runs of rows (the Fashion-MNIST CNN's 32 -> 32 on 7 x 7, 6.3 KB an image: 0.38-0.40
 * ms a batch of 64 copied, 0.43-0.44 in place; the small ResNet's 64 -> 64 on 8 x 8, 16 KB: 1.68-1.72
 * -> 1.38-1.41; Intel Xeon model 167, frozen). */
#define DIRECT_MIN_IMAGE_BYTES (8 * 1024)

/* Image bytes above which a channels-last depthwise layer reads its input in place. */
#define DW_DIRECT_BYTES (512 * 1024)

/* Packed weights above which a channels-last convolution over several images runs them stacked
 * (qr_sconv_block), in groups of padded copies of at most STACK_IMAGE_BYTES: each panel's K
 * blocks then pass over every image's tiles from L2, where image by image they came again from
 * memory or L3 for each image (ResNet-18's layer3 and layer4, 2.4 and 9.4 MB a layer), and a 7 x
 * 7 image's 49 pixels share tiles of 6 with the next image's (alone: 4 tiles of 6, 5 of 5). Its
 * layer4 in parts of 4 images: 10% faster (docs/runtime.md, "Stop 38"). */
#define STACK_WEIGHT_BYTES (512 * 1024)

/* Packed weights up to which a layer of several panels runs its tasks row-block major
 * (sconv_blocks): every panel's weights stay in L2 while the row blocks pass. */
#define ROWMAJOR_WEIGHT_BYTES (512 * 1024)
#define STACK_IMAGE_BYTES (2 * 1024 * 1024)

typedef struct sconv_job {
    const qr_sconv *p;
    const float *x, *packed;
    float *xp, *blk, *y;
    int has_bias;
    const qr_act *act;
    int64_t rb, nrb, blk_len;
    int64_t rows;   /* output rows of this pass: OH times the images stacked */
    int64_t xp_img; /* floats from one image's padded copy (or NHWC input read in place) to the next */
    int dw;     /* depthwise (qr_sconv_dw_block) */
    int rowmajor; /* tasks row-block major (sconv_blocks) */
    int dw_direct; /* depthwise reading its channels-last input in place */
    int x_direct;  /* qr_sconv_reads_inside: the tiles read the channels-last input in place */
    int x_nhwc; /* x is channels-last */
    int y_nhwc; /* y is channels-last: the tiles write it in place */
    const qr_sconv_epi *epi; /* y_nhwc: after the bias (epi->res the whole batch's) */
    qr_sconv_epi img_epi;    /* this image's */
} sconv_job;

/* Rows [r0, r1) of the stacked padded images (image r / Hp's row r % Hp). */
static void sconv_image_rows(void *arg, int64_t r0, int64_t r1)
{
    const sconv_job *j = arg;
    const int64_t hp = j->p->Hp, xn = j->p->C * j->p->H * j->p->W;
    for (int64_t r = r0; r < r1;) {
        int64_t i = r / hp, e = (i + 1) * hp < r1 ? (i + 1) * hp : r1;
        qr_sconv_image_rows(j->p, j->x + i * xn, j->x_nhwc, j->xp + i * j->xp_img, r - i * hp, e - i * hp);
        r = e;
    }
}

/* Tasks [t0, t1): (panel, row block), each on its slot's row block. Panel-major, so a panel's
 * packed weights stay in cache; a depthwise panel's weights are a few KB, so its tasks go row-block
 * major instead (rowmajor) and the image rows, read by every panel, stay in cache between panels (a
 * 112x112x96 image at stride 2 is read once from memory instead of twice); so do layers of small
 * weights (ROWMAJOR_WEIGHT_BYTES). */
static void sconv_blocks(void *arg, int64_t t0, int64_t t1, int slot)
{
    const sconv_job *j = arg;
    const int64_t np = j->p->panels;
    for (int64_t t = t0; t < t1; t++) {
        int64_t panel = j->rowmajor ? t % np : t / j->nrb, oy0 = (j->rowmajor ? t / np : t % j->nrb) * j->rb,
                oy1 = oy0 + j->rb < j->rows ? oy0 + j->rb : j->rows;
        if (j->dw)
            qr_sconv_dw_block(j->p, j->xp, j->dw_direct, j->packed, j->has_bias, j->act, j->blk + slot * j->blk_len,
                              j->y, panel, oy0, oy1, j->y_nhwc, j->epi ? &j->img_epi : NULL);
        else
            qr_sconv_block(j->p, j->xp, j->xp_img, j->x_direct, j->packed, j->has_bias, j->act, j->blk + slot * j->blk_len, j->y,
                           panel, oy0, oy1, j->y_nhwc, j->epi ? &j->img_epi : NULL);
    }
}

/* One pass of sconv_run over images [n, n + gn) (stacked), its steps split on pool (NULL: this
 * thread alone): the padded copy, then every (panel, row block) task. */
static void sconv_pass(qr_pool *pool, sconv_job *j, int64_t n, int64_t gn, const float *x, float *y,
                       const qr_sconv_epi *epi, int in_place)
{
    const qr_sconv *p = j->p;
    j->x = x + n * p->C * p->H * p->W;
    j->y = y + n * p->M * p->OH * p->OW;
    j->rows = gn * p->OH;
    j->nrb = (j->rows + j->rb - 1) / j->rb;
    if (epi) {
        j->img_epi = *epi;
        if (epi->res)
            j->img_epi.res = epi->res + n * p->M * p->OH * p->OW;
    }
    if (in_place)
        j->xp = (float *)j->x;
    else
        qr_parallel_for(pool, gn * p->Hp, 8, sconv_image_rows, j);
    qr_parallel_for_slots(pool, p->panels * j->nrb, 1, sconv_blocks, j);
}

typedef struct sconv_units_job {
    const sconv_job *j;
    const float *x;
    float *y;
    const qr_sconv_epi *epi;
    int64_t n_img, g;
    int in_place;
} sconv_units_job;

/* Passes [u0, u1) of g images each, whole on this thread, in its slot's padded copy and row
 * blocks. */
static void sconv_units(void *arg, int64_t u0, int64_t u1, int slot)
{
    const sconv_units_job *u = arg;
    sconv_job j = *u->j;
    if (!u->in_place)
        j.xp += slot * u->g * j.xp_img;
    if (j.blk)
        j.blk += slot * j.blk_len;
    for (int64_t t = u0; t < u1; t++) {
        int64_t n = t * u->g;
        sconv_pass(NULL, &j, n, u->n_img - n < u->g ? u->n_img - n : u->g, u->x, u->y, u->epi, u->in_place);
    }
}

/* y = conv(x, w) + b on sconv, image by image: the weights packed on the first run when they are
 * the same every run (constants, or a QDQ graph's weight DequantizeLinear: repacked on every run,
 * ResNet-18's took 0.7 of the 1.7 s its convolutions cost over 64 images), every run when
 * computed. Each output is computed alone in a fixed order, so 1 and 2 threads give the same bits. */
static qr_status sconv_run(qr_kctx *k, const qr_sconv *p, const float *x, const float *w, const float *b, float *y,
                           int64_t n_img, const qr_act *act, int dw, int x_nhwc, int y_nhwc, const qr_sconv_epi *epi)
{
    int fresh = 1, keep = qr_kinput_fixed(k, 1) && (!b || qr_kinput_fixed(k, 2));
    int64_t pf = dw ? qr_sconv_dw_packed_floats(p) : qr_sconv_packed_floats(p);
    float *packed = keep ? qr_kcache_get(k, (size_t)pf * sizeof(float), "packed convolution weights", &fresh)
                         : qr_kscratch(k, pf, 1, sizeof(float), "packed convolution weights");
    if (!packed)
        return QR_ERR;
    /* images stacked per pass (1: image by image) */
    const int64_t ifl = (qr_sconv_image_floats(p) + 15) / 16 * 16;
    int64_t g = 1;
    if (y_nhwc && !dw && n_img > 1 && qr_sconv_weight_floats(p) * (int64_t)sizeof(float) > STACK_WEIGHT_BYTES) {
        g = STACK_IMAGE_BYTES / (ifl * (int64_t)sizeof(float));
        g = g < 1 ? 1 : g < n_img ? g : n_img;
    }
    sconv_job j = {.p = p, .packed = packed, .has_bias = b != NULL, .act = act, .rb = qr_sconv_block_rows(p, g),
                   .blk_len = qr_sconv_block_floats(p), .dw = dw, .x_nhwc = x_nhwc, .y_nhwc = y_nhwc, .epi = epi};
    if (fresh)
        (dw ? qr_sconv_dw_pack : qr_sconv_pack)(p, w, b, packed);
    /* several panels over small weights: each row block's panels one after another, so a pixel's
     * output channels are written together while its row block is in cache (MobileNetV2's 16 -> 96
     * on 112 x 112, 4.8 MB of output: panel by panel each pass wrote 4 or 2 of a pixel's 6 lines
     * across the whole image, 0.517 -> 0.443 ms; docs/runtime.md, stop 51) */
    j.rowmajor = dw || (p->panels > 1 && qr_sconv_weight_floats(p) * (int64_t)sizeof(float) <= ROWMAJOR_WEIGHT_BYTES);
    /* a channels-last input without padding (a 1x1 at stride 1) is read in place, and so is one
     * whose tiles take only the taps inside the image (the thin tiles without the border's: the
     * small ResNet's 3 x 3 layers but its stem and the 32 -> 64 at stride 2), which need no
     * padded copy */
    j.x_direct = x_nhwc && !dw && p->C * p->H * p->W * (int64_t)sizeof(float) >= DIRECT_MIN_IMAGE_BYTES &&
                 qr_sconv_reads_inside(p, packed);
    int in_place = x_nhwc && !dw && ((p->Hp == p->H && p->Wp == p->W) || j.x_direct);
    j.xp_img = in_place ? p->C * p->H * p->W : ifl;
    /* and a depthwise layer's whole-vector channels on a large image: its padded copy (a read and
     * a write of it past L2, 6% of MobileNetV2's batch-1 time) costs more than the windows that
     * leave the image, whose taps take their own addresses; on a small one the copy stays in L2
     * and the border is a larger share (MobileNetV3-small's 5 x 5 layers on 14 x 14 x 240, 188 KB:
     * 0.028 ms copied, 0.036 in place) */
    j.dw_direct = x_nhwc && dw && p->C % 16 == 0 && p->H * p->W * p->C * (int64_t)sizeof(float) > DW_DIRECT_BYTES;
    in_place |= j.dw_direct;
    /* passes of g images (units) on the threads, each pass whole on one thread, when there are
     * enough of them to share evenly: the small ResNet's 64 images split image by image (two
     * parallel steps an image, of 10 to 40 us at 2 threads) ran no faster on 2 threads than on 1
     * (docs/runtime.md, "f32 on two threads (stop 46)") */
    const int slots = qr_pool_threads(k->pool);
    int64_t units = (n_img + g - 1) / g;
    units = slots > 1 && units >= 2 * slots ? units : 0;
    j.xp = in_place ? NULL : qr_kwork(k, units ? slots * g : g, ifl, sizeof(float), "channels-last image");
    j.blk = (in_place || j.xp) && !y_nhwc ? qr_kwork(k, slots, j.blk_len, sizeof(float),
                                                    "convolution row blocks")
                                         : NULL;
    if ((!in_place && !j.xp) || (!y_nhwc && !j.blk)) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    if (units) {
        sconv_units_job u = {&j, x, y, epi, n_img, g, in_place};
        qr_parallel_for_slots(k->pool, units, 1, sconv_units, &u);
    } else {
        for (int64_t n = 0; n < n_img; n += g)
            sconv_pass(k->pool, &j, n, n_img - n < g ? n_img - n : g, x, y, epi, in_place);
    }
    qr_kcache_done(k, packed);
    return QR_OK;
}

#define DEFINE_FLOAT_KERNELS(T, S)                                                                            \
    /* c[r][x] += bias[r] for rows rows of n values each. */                                                  \
    static void add_bias_##S(T *c, int64_t n, const T *bias, int64_t rows)                                    \
    {                                                                                                         \
        for (int64_t i = 0; i < rows; i++)                                                                    \
            for (int64_t x = 0; x < n; x++)                                                                   \
                c[i * n + x] += bias[i];                                                                      \
    }                                                                                                         \
                                                                                                              \
    /* y[i] = act(y[i]) for n values (act NULL: none), in T, with qr_act_apply's compares. */                 \
    /* the two forms' loops apart and cloned, so each vectorizes (MobileNetV2's Clips after its f32         \
     * depthwise layers were 8.6% of its run on Zen 3 as one loop testing relu per element) */               \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void act_post_##S(T *y, int64_t n,    \
                                                                                          const qr_act *act)  \
    {                                                                                                         \
        if (!act)                                                                                             \
            return;                                                                                           \
        if (act->relu) {                                                                                      \
            for (int64_t i = 0; i < n; i++)                                                                   \
                y[i] = y[i] <= 0 ? 0 : y[i];                                                                  \
            return;                                                                                           \
        }                                                                                                     \
        const T lo = act->lo, hi = act->hi;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                     \
            T v = y[i] < lo ? lo : y[i];                                                                      \
            y[i] = v > hi ? hi : v;                                                                           \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off"))) static void     \
    gemm_rows_##S(void *arg, int64_t r0, int64_t r1)                                                          \
    {                                                                                                         \
        const gemm_job *jb = arg;                                                                             \
        const T *a = jb->a, *b = jb->b, *bias = jb->bias;                                                     \
        int64_t n = jb->n, r = r0, nfull = n / GEMM_XT * GEMM_XT, r4 = r0 + (r1 - r0) / 4 * 4;                \
        const V_##S zero = {0};                                                                               \
        /* Blocks of B's columns that stay in cache while every group of four rows passes over them           \
         * (about 256 KB: B streamed once per row group was memory-bound on large images). */                 \
        int64_t xb_cols = (int64_t)(262144 / sizeof(T)) / (jb->kdim > 0 ? jb->kdim : 1) / GEMM_XT * GEMM_XT;  \
        if (xb_cols < GEMM_XT)                                                                                \
            xb_cols = GEMM_XT;                                                                                \
        int64_t r8 = r0 + (r1 - r0) / 8 * 8;                                                                  \
        for (int64_t xb = 0; xb < nfull; xb += xb_cols) {                                                     \
            int64_t xe = xb + xb_cols < nfull ? xb + xb_cols : nfull;                                         \
            /* eight rows: sixteen sums, independent chains enough for two adders a cycle */                  \
            for (r = r0; r < r8; r += 8) {                                                                    \
                T *restrict cr = (T *)jb->c + r * n;                                                          \
                const T *ar = a + r * jb->a_rs;                                                               \
                for (int64_t x0 = xb; x0 < xe; x0 += GEMM_XT) {                                               \
                    V_##S s[8][2] = {{{0}}};                                                                  \
                    for (int64_t q = 0; q < jb->kdim; q++) {                                                  \
                        const T *aq = ar + q * jb->a_cs;                                                      \
                        const T *br = b + q * n + x0;                                                         \
                        V_##S b0 = *(const U_##S *)br, b1 = *(const U_##S *)(br + GEMM_XT / 2);               \
                        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                 \
                            V_##S wi = aq[i * jb->a_rs] - zero;                                               \
                            s[i][0] += wi * b0, s[i][1] += wi * b1;                                           \
                        }                                                                                     \
                    }                                                                                         \
                    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                     \
                        *(U_##S *)(cr + i * n + x0) = s[i][0];                                                \
                        *(U_##S *)(cr + i * n + x0 + GEMM_XT / 2) = s[i][1];                                  \
                    }                                                                                         \
                }                                                                                             \
            }                                                                                                 \
            for (r = r8; r < r4; r += 4) {                                                                    \
                T *restrict c0 = (T *)jb->c + r * n, *restrict c1 = c0 + n, *restrict c2 = c1 + n,            \
                            *restrict c3 = c2 + n;                                                            \
                const T *ar = a + r * jb->a_rs;                                                               \
                /* GEMM_XT columns at a time in eight vector registers, the four rows' sums kept there        \
                 * across the whole k loop (each sum adds its products in k order, as summing in place        \
                 * would) */                                                                                  \
                for (int64_t x0 = xb; x0 < xe; x0 += GEMM_XT) {                                               \
                    V_##S s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};\
                    for (int64_t q = 0; q < jb->kdim; q++) {                                                  \
                        const T *aq = ar + q * jb->a_cs;                                                      \
                        const T *br = b + q * n + x0;                                                         \
                        V_##S b0 = *(const U_##S *)br, b1 = *(const U_##S *)(br + GEMM_XT / 2);               \
                        V_##S w0 = aq[0] - zero, w1 = aq[jb->a_rs] - zero;                                    \
                        V_##S w2 = aq[2 * jb->a_rs] - zero, w3 = aq[3 * jb->a_rs] - zero;                     \
                        s00 += w0 * b0, s01 += w0 * b1, s10 += w1 * b0, s11 += w1 * b1;                       \
                        s20 += w2 * b0, s21 += w2 * b1, s30 += w3 * b0, s31 += w3 * b1;                       \
                    }                                                                                         \
                    *(U_##S *)(c0 + x0) = s00, *(U_##S *)(c0 + x0 + GEMM_XT / 2) = s01;                       \
                    *(U_##S *)(c1 + x0) = s10, *(U_##S *)(c1 + x0 + GEMM_XT / 2) = s11;                       \
                    *(U_##S *)(c2 + x0) = s20, *(U_##S *)(c2 + x0 + GEMM_XT / 2) = s21;                       \
                    *(U_##S *)(c3 + x0) = s30, *(U_##S *)(c3 + x0 + GEMM_XT / 2) = s31;                       \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
        /* The last columns, fewer than GEMM_XT: the same vector tile over a zero-padded copy of them         \
         * (each sum still in k order); only the real columns are stored. */                                  \
        T *bt = nfull < n && r4 > r0 ? malloc((size_t)jb->kdim * GEMM_XT * sizeof(T) + 1) : NULL;             \
        if (bt)                                                                                               \
            for (int64_t q = 0; q < jb->kdim; q++)                                                            \
                for (int64_t x = 0; x < GEMM_XT; x++)                                                         \
                    bt[q * GEMM_XT + x] = nfull + x < n ? b[q * n + nfull + x] : 0;                           \
        for (r = r0; r < r4; r += 4) {                                                                        \
            T *restrict c0 = (T *)jb->c + r * n, *restrict c1 = c0 + n, *restrict c2 = c1 + n,                \
                        *restrict c3 = c2 + n;                                                                \
            const T *ar = a + r * jb->a_rs;                                                                   \
            int64_t x0 = nfull, xn = n - nfull;                                                               \
            if (xn > 0 && bt) {                                                                               \
                V_##S s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0}; \
                for (int64_t q = 0; q < jb->kdim; q++) {                                                      \
                    const T *aq = ar + q * jb->a_cs;                                                          \
                    const T *br = bt + q * GEMM_XT;                                                           \
                    V_##S b0 = *(const U_##S *)br, b1 = *(const U_##S *)(br + GEMM_XT / 2);                   \
                    V_##S w0 = aq[0] - zero, w1 = aq[jb->a_rs] - zero;                                        \
                    V_##S w2 = aq[2 * jb->a_rs] - zero, w3 = aq[3 * jb->a_rs] - zero;                         \
                    s00 += w0 * b0, s01 += w0 * b1, s10 += w1 * b0, s11 += w1 * b1;                           \
                    s20 += w2 * b0, s21 += w2 * b1, s30 += w3 * b0, s31 += w3 * b1;                           \
                }                                                                                             \
                T t[4][GEMM_XT];                                                                              \
                *(U_##S *)t[0] = s00, *(U_##S *)(t[0] + GEMM_XT / 2) = s01;                                   \
                *(U_##S *)t[1] = s10, *(U_##S *)(t[1] + GEMM_XT / 2) = s11;                                   \
                *(U_##S *)t[2] = s20, *(U_##S *)(t[2] + GEMM_XT / 2) = s21;                                   \
                *(U_##S *)t[3] = s30, *(U_##S *)(t[3] + GEMM_XT / 2) = s31;                                   \
                for (int64_t x = 0; x < xn; x++)                                                              \
                    c0[x0 + x] = t[0][x], c1[x0 + x] = t[1][x], c2[x0 + x] = t[2][x], c3[x0 + x] = t[3][x];   \
            } else if (xn > 0) { /* no memory for the copy: the same sums, column by column */                \
                T t0[GEMM_XT] = {0}, t1[GEMM_XT] = {0}, t2[GEMM_XT] = {0}, t3[GEMM_XT] = {0};                 \
                for (int64_t q = 0; q < jb->kdim; q++) {                                                      \
                    const T *aq = ar + q * jb->a_cs;                                                          \
                    T w0 = aq[0], w1 = aq[jb->a_rs], w2 = aq[2 * jb->a_rs], w3 = aq[3 * jb->a_rs];            \
                    const T *restrict br = b + q * n + x0;                                                    \
                    for (int64_t x = 0; x < xn; x++) {                                                        \
                        T v = br[x];                                                                          \
                        t0[x] += w0 * v;                                                                      \
                        t1[x] += w1 * v;                                                                      \
                        t2[x] += w2 * v;                                                                      \
                        t3[x] += w3 * v;                                                                      \
                    }                                                                                         \
                }                                                                                             \
                for (int64_t x = 0; x < xn; x++)                                                              \
                    c0[x0 + x] = t0[x], c1[x0 + x] = t1[x], c2[x0 + x] = t2[x], c3[x0 + x] = t3[x];           \
            }                                                                                                 \
            if (bias)                                                                                         \
                add_bias_##S(c0, n, bias + r, 4);                                                             \
        }                                                                                                     \
        free(bt);                                                                                             \
        r = r4;                                                                                               \
        for (; r < r1; r++) {                                                                                 \
            T *restrict cr = (T *)jb->c + r * n;                                                              \
            for (int64_t x = 0; x < n; x++)                                                                   \
                cr[x] = 0;                                                                                    \
            for (int64_t q = 0; q < jb->kdim; q++) {                                                          \
                T w = a[r * jb->a_rs + q * jb->a_cs];                                                         \
                const T *restrict br = b + q * n;                                                             \
                for (int64_t x = 0; x < n; x++)                                                               \
                    cr[x] += w * br[x];                                                                       \
            }                                                                                                 \
            if (bias)                                                                                         \
                add_bias_##S(cr, n, bias + r, 1);                                                             \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* The product of jb on pool's threads (NULL: this one): the packed FMA GEMM when sk is given         \
     * (f32 only; pk its panels for pool's threads, or this thread's), else gemm_rows. */                  \
    static void gemm_run_##S(qr_pool *pool, const gemm_job *jb, const qr_sgemm_kernel *sk, float *pk)         \
    {                                                                                                         \
        if (sk) {                                                                                             \
            qr_sgemm_job sj = {.a = jb->a, .b = jb->b, .bias = jb->bias, .c = jb->c, .a_rs = jb->a_rs,        \
                               .a_cs = jb->a_cs, .ldb = jb->n, .ldc = jb->n, .m = jb->m, .n = jb->n,          \
                               .k = jb->kdim, .act = jb->act};                                                \
            qr_sgemm(pool, sk, &sj, pk);                                                                      \
            return;                                                                                           \
        }                                                                                                     \
        if (pool)                                                                                             \
            qr_parallel_for(pool, jb->m, 1, gemm_rows_##S, (void *)jb);                                       \
        else                                                                                                  \
            gemm_rows_##S((void *)jb, 0, jb->m);                                                              \
        act_post_##S(jb->c, jb->m * jb->n, jb->act);                                                          \
    }                                                                                                         \
                                                                                                              \
    /* col[(c*K + kf) x small_n] = x[c] read through the windows, 0 in the padding. Images a row of   \
     * windows at a time: the columns whose window lies inside the row are copied without a test. */        \
    static void im2col_##S(const qr_conv_geom *g, const T *x, int64_t channels, T *col, int64_t ld, int64_t *offs) \
    {                                                                                                         \
        if (g->r == 2) {                                                                                      \
            const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1];                   \
            const int64_t KH = g->kernel[0], KW = g->kernel[1], s1 = g->stride[1];                            \
            for (int64_t c = 0; c < channels; c++)                                                            \
                for (int64_t ky = 0; ky < KH; ky++)                                                           \
                    for (int64_t kx = 0; kx < KW; kx++) {                                                     \
                        T *row = col + ((c * KH + ky) * KW + kx) * ld;                                        \
                        int64_t x0 = kx * g->dilation[1] - g->pad_begin[1];                                   \
                        int64_t lo = x0 >= 0 ? 0 : (-x0 + s1 - 1) / s1;                                       \
                        int64_t hi = x0 > W - 1 ? 0 : (W - 1 - x0) / s1 + 1;                                  \
                        hi = hi < OW ? hi : OW;                                                               \
                        lo = lo < hi ? lo : hi;                                                               \
                        for (int64_t oy = 0; oy < OH; oy++) {                                                 \
                            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];           \
                            T *d = row + oy * OW;                                                             \
                            if (iy < 0 || iy >= H) {                                                          \
                                for (int64_t ox = 0; ox < OW; ox++)                                           \
                                    d[ox] = 0;                                                                \
                                continue;                                                                     \
                            }                                                                                 \
                            const T *src = x + (c * H + iy) * W + x0;                                         \
                            for (int64_t ox = 0; ox < lo; ox++)                                               \
                                d[ox] = 0;                                                                    \
                            if (s1 == 1)                                                                      \
                                for (int64_t ox = lo; ox < hi; ox++)                                          \
                                    d[ox] = src[ox];                                                          \
                            else if (s1 == 2) /* a constant stride: a loop GCC vectorizes */                  \
                                for (int64_t ox = lo; ox < hi; ox++)                                          \
                                    d[ox] = src[2 * ox];                                                      \
                            else                                                                              \
                                for (int64_t ox = lo; ox < hi; ox++)                                          \
                                    d[ox] = src[ox * s1];                                                     \
                            for (int64_t ox = hi; ox < OW; ox++)                                              \
                                d[ox] = 0;                                                                    \
                        }                                                                                     \
                    }                                                                                         \
            return;                                                                                           \
        }                                                                                                     \
        for (int64_t kf = 0; kf < g->kernel_n; kf++) {                                                        \
            qr_conv_offsets(g, kf, offs);                                                                     \
            for (int64_t c = 0; c < channels; c++) {                                                          \
                const T *xc = x + c * g->big_n;                                                               \
                T *row = col + (c * g->kernel_n + kf) * ld;                                                   \
                for (int64_t j = 0; j < g->small_n; j++)                                                      \
                    row[j] = offs[j] >= 0 ? xc[offs[j]] : 0;                                                  \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* The adjoint of im2col: y[c] += col scattered through the windows. */                                   \
    static void col2im_##S(const qr_conv_geom *g, const T *col, int64_t channels, T *y, int64_t *offs)       \
    {                                                                                                         \
        for (int64_t kf = 0; kf < g->kernel_n; kf++) {                                                        \
            qr_conv_offsets(g, kf, offs);                                                                     \
            for (int64_t c = 0; c < channels; c++) {                                                          \
                T *yc = y + c * g->big_n;                                                                     \
                const T *row = col + (c * g->kernel_n + kf) * g->small_n;                                     \
                for (int64_t j = 0; j < g->small_n; j++)                                                      \
                    if (offs[j] >= 0)                                                                         \
                        yc[offs[j]] += row[j];                                                                \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* One image, every group: im2col into col (NULL: a 1x1 window reads x as is), then the GEMM              \
     * of all the group's rows, split across threads when pool is given. */                                   \
    static void conv_image_##S(const conv_job *cj, int64_t n, T *col, int64_t *offs, qr_pool *pool, float *pk)\
    {                                                                                                         \
        const qr_conv_geom *g = cj->g;                                                                        \
        const T *x = cj->x, *w = cj->w, *b = cj->b;                                                           \
        T *y = cj->y;                                                                                         \
        for (int64_t gi = 0; gi < cj->group; gi++) {                                                          \
            const T *xg = x + (n * cj->ch + gi * cj->cg) * g->big_n;                                          \
            if (col)                                                                                          \
                im2col_##S(g, xg, cj->cg, col, g->small_n, offs);                                             \
            gemm_job jb = {.a = w + gi * cj->mg * cj->ck, .a_rs = cj->ck, .a_cs = 1, .b = col ? col : xg,     \
                           .bias = b ? b + gi * cj->mg : NULL, .c = y + (n * cj->m + gi * cj->mg) * g->small_n,\
                           .m = cj->mg, .n = g->small_n, .kdim = cj->ck, .act = cj->act};                     \
            gemm_run_##S(pool, &jb, cj->sk, pk);                                                              \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* One image over padded planes (f32, 2-D, strides 1, or 2 over the planes' four phases:                  \
     * conv_job.rows): each window position's row of B is a run of the padded planes (cj->rows), over         \
     * OH rows of wp columns of which the first OW are outputs, so the GEMM reads the planes in place,        \
     * with no im2col. Each output sums the same products in the same order as through im2col (its            \
     * zeros are the padding's). buf: the slot's planes (plen) then the product [mg][OH * wp]. */             \
    static void conv_image_runs_##S(const conv_job *cj, int64_t n, T *buf, qr_pool *pool, float *pk)          \
    {                                                                                                         \
        const qr_conv_geom *g = cj->g;                                                                        \
        const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1];                       \
        const int64_t hp = cj->hp, wp = cj->wp, pt = g->pad_begin[0], pl = g->pad_begin[1];                   \
        T *planes = buf, *prod = buf + cj->plen;                                                              \
        for (int64_t gi = 0; gi < cj->group; gi++) {                                                          \
            const T *xg = (const T *)cj->x + (n * cj->ch + gi * cj->cg) * g->big_n;                           \
            memset(planes, 0, (size_t)cj->plen * sizeof(T));                                                  \
            for (int64_t c = 0; c < cj->cg; c++)                                                              \
                for (int64_t yy = 0; yy < H; yy++) {                                                          \
                    const T *src = xg + (c * H + yy) * W;                                                     \
                    if (!cj->php) {                                                                           \
                        memcpy(planes + (c * hp + yy + pt) * wp + pl, src, (size_t)W * sizeof(T));            \
                        continue;                                                                             \
                    }                                                                                         \
                    int64_t py = (yy + pt) & 1, r = (yy + pt) >> 1;                                           \
                    for (int64_t px = 0; px < 2; px++) {                                                      \
                        int64_t x0 = (px - pl) & 1; /* the first column of this phase */                      \
                        T *dr = planes + (c * 4 + py * 2 + px) * cj->php + r * wp + ((x0 + pl) >> 1);         \
                        for (int64_t t = 0; t < (W - x0 + 1) / 2; t++)                                        \
                            dr[t] = src[x0 + 2 * t];                                                          \
                    }                                                                                         \
                }                                                                                             \
            qr_sgemm_job sj = {.a = (const float *)cj->w + gi * cj->mg * cj->ck, .a_rs = cj->ck, .a_cs = 1,   \
                               .b = (const float *)planes, .b_rows = cj->rows,                                \
                               .bias = cj->b ? (const float *)cj->b + gi * cj->mg : NULL, .c = (float *)prod, \
                               .ldc = OH * wp, .m = cj->mg, .n = OH * wp, .k = cj->ck, .act = cj->act};       \
            qr_sgemm(pool, cj->sk, &sj, pk);                                                                  \
            T *y = (T *)cj->y + (n * cj->m + gi * cj->mg) * g->small_n;                                       \
            for (int64_t r = 0; r < cj->mg; r++)                                                              \
                for (int64_t oy = 0; oy < OH; oy++)                                                           \
                    memcpy(y + r * g->small_n + oy * OW, prod + (r * OH + oy) * wp, (size_t)OW * sizeof(T));  \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* Images [i0, i1) on one thread, with that thread's scratch. */                                          \
    static void conv_images_##S(void *arg, int64_t i0, int64_t i1, int slot)                                  \
    {                                                                                                         \
        const conv_job *cj = arg;                                                                             \
        for (int64_t n = i0; n < i1; n++)                                                                     \
            if (cj->rows)                                                                                     \
                conv_image_runs_##S(cj, n, (T *)cj->col + slot * cj->slot_len, NULL,                          \
                                    sgemm_slot(cj->sk, cj->pk, slot));                                        \
            else                                                                                              \
                conv_image_##S(cj, n, cj->col ? (T *)cj->col + slot * cj->ck * cj->g->small_n : NULL,         \
                           cj->offs + slot * cj->g->small_n, NULL, sgemm_slot(cj->sk, cj->pk, slot));         \
    }                                                                                                         \
                                                                                                              \
    /* Small images (one group): nb of them side by side in one im2col, [ck][nb * small_n], and one           \
     * GEMM over all their columns into the slot's product [m][nb * small_n], copied out to y image           \
     * by image. Each output sums the same products in the same order as one image's GEMM; the                \
     * GEMM's tiles are full where one image's few columns left most of the last one empty. */                \
    static void conv_batches_##S(void *arg, int64_t c0, int64_t c1, int slot)                                 \
    {                                                                                                         \
        const conv_job *cj = arg;                                                                             \
        const qr_conv_geom *g = cj->g;                                                                        \
        const int64_t sn = g->small_n, nb = cj->group; /* group: images per chunk here */                     \
        T *col = (T *)cj->col + slot * (cj->ck + cj->m) * nb * sn, *prod = col + cj->ck * nb * sn;            \
        for (int64_t chunk = c0; chunk < c1; chunk++) {                                                       \
            int64_t n0 = chunk * nb, nn = cj->mg - n0 < nb ? cj->mg - n0 : nb; /* mg: the batch's images */   \
            for (int64_t b = 0; b < nn; b++) {                                                                \
                const T *xb = (const T *)cj->x + (n0 + b) * cj->ch * g->big_n;                                \
                im2col_##S(g, xb, cj->ch, col + b * sn, nn * sn, cj->offs + slot * sn);                       \
            }                                                                                                 \
            gemm_job jb = {.a = cj->w, .a_rs = cj->ck, .a_cs = 1, .b = col, .bias = cj->b, .c = prod,         \
                           .m = cj->m, .n = nn * sn, .kdim = cj->ck, .act = cj->act};                         \
            gemm_run_##S(NULL, &jb, cj->sk, sgemm_slot(cj->sk, cj->pk, slot));                                \
            for (int64_t b = 0; b < nn; b++)                                                                  \
                for (int64_t r = 0; r < cj->m; r++)                                                           \
                    memcpy((T *)cj->y + ((n0 + b) * cj->m + r) * sn, prod + r * nn * sn + b * sn,             \
                           (size_t)sn * sizeof(T));                                                           \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* Depthwise 2-D planes [p0, p1) (plane p = n * C + c, one input channel per output channel):             \
     * every output summed over the window in its order, (ky, kx), as the GEMM would, without im2col:         \
     * the plane's sums take one window position at a time, whose columns inside the row (found               \
     * once per position) need no test. Taps on the padding (products with 0) are skipped, so a sum           \
     * of zeros may differ in its sign; the bias is added last. */                                            \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void dw_planes_##S(void *arg,         \
                                                                                          int64_t p0, int64_t p1)\
    {                                                                                                         \
        const conv_job *cj = arg;                                                                             \
        const qr_conv_geom *g = cj->g;                                                                        \
        const T *x = cj->x, *w = cj->w, *b = cj->b;                                                           \
        T *y = cj->y;                                                                                         \
        const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],    \
                      KW = g->kernel[1], s1 = g->stride[1];                                                   \
        for (int64_t p = p0; p < p1; p++) {                                                                   \
            int64_t c = p % cj->ch;                                                                           \
            const T *xp = x + p * H * W, *wc = w + c * KH * KW;                                               \
            T *yp = y + p * OH * OW;                                                                          \
            for (int64_t i = 0; i < OH * OW; i++)                                                             \
                yp[i] = 0;                                                                                    \
            for (int64_t ky = 0; ky < KH; ky++)                                                               \
                for (int64_t kx = 0; kx < KW; kx++) {                                                         \
                    T wv = wc[ky * KW + kx];                                                                  \
                    int64_t x0 = kx * g->dilation[1] - g->pad_begin[1];                                       \
                    int64_t lo = x0 >= 0 ? 0 : (-x0 + s1 - 1) / s1, hi = x0 > W - 1 ? 0 : (W - 1 - x0) / s1 + 1;\
                    hi = hi < OW ? hi : OW;                                                                   \
                    for (int64_t oy = 0; oy < OH; oy++) {                                                     \
                        int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];               \
                        if (iy < 0 || iy >= H)                                                                \
                            continue;                                                                         \
                        T *restrict a = yp + oy * OW;                                                         \
                        const T *restrict r = xp + iy * W + x0;                                               \
                        if (s1 == 1)                                                                          \
                            for (int64_t ox = lo; ox < hi; ox++)                                              \
                                a[ox] += wv * r[ox];                                                          \
                        else if (s1 == 2) /* a constant stride: a loop GCC vectorizes */                      \
                            for (int64_t ox = lo; ox < hi; ox++)                                              \
                                a[ox] += wv * r[2 * ox];                                                      \
                        else                                                                                  \
                            for (int64_t ox = lo; ox < hi; ox++)                                              \
                                a[ox] += wv * r[ox * s1];                                                     \
                    }                                                                                         \
                }                                                                                             \
            if (b)                                                                                            \
                for (int64_t i = 0; i < OH * OW; i++)                                                         \
                    yp[i] += b[c];                                                                            \
            act_post_##S(yp, OH * OW, cj->act);                                                               \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* a[i] = sum over the taps t, in order, of wv[t] * d[off[t] + i], for i < n: blocks of 4 vectors         \
     * of outputs keep their sums in registers across the taps (a pass per tap loaded and stored              \
     * every sum again); each sum adds the same products in the same order as the pass per tap. */            \
    static inline __attribute__((always_inline)) void dw_taps_##S(T *restrict a, const T *restrict d,         \
                                                                  const int64_t *off, const T *wv, int64_t ntaps, \
                                                                  int64_t n)                                  \
    {                                                                                                         \
        enum { VL = GEMM_XT / 2 };                                                                            \
        const V_##S zero = {0};                                                                               \
        int64_t i0 = 0;                                                                                       \
        for (; i0 + 4 * VL <= n; i0 += 4 * VL) {                                                              \
            V_##S s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                                                     \
            for (int64_t t = 0; t < ntaps; t++) {                                                             \
                const T *src = d + off[t] + i0;                                                               \
                V_##S wt = wv[t] - zero;                                                                      \
                s0 += wt * *(const U_##S *)src, s1 += wt * *(const U_##S *)(src + VL);                        \
                s2 += wt * *(const U_##S *)(src + 2 * VL), s3 += wt * *(const U_##S *)(src + 3 * VL);         \
            }                                                                                                 \
            *(U_##S *)(a + i0) = s0, *(U_##S *)(a + i0 + VL) = s1;                                            \
            *(U_##S *)(a + i0 + 2 * VL) = s2, *(U_##S *)(a + i0 + 3 * VL) = s3;                               \
        }                                                                                                     \
        for (int64_t i = i0; i < n; i++)                                                                      \
            a[i] = 0;                                                                                         \
        for (int64_t t = 0; t < ntaps; t++)                                                                   \
            for (int64_t i = i0; i < n; i++)                                                                  \
                a[i] += wv[t] * d[off[t] + i];                                                                \
    }                                                                                                         \
                                                                                                              \
    /* Depthwise planes as runs over a copy of the plane (border 0), each window position adding              \
     * w * d[off + j] to every sum j in one run, in (ky, kx) order with the padding's products, as            \
     * the GEMM sums; the bias last; the real sums are copied out. Stride 1: the padded plane,                \
     * sum j = oy * Wp + ox. Stride 2 (no dilation): its four phases (even or odd rows by even or             \
     * odd columns), plen apart; position (ky, kx) reads phase (ky & 1, kx & 1) shifted by                    \
     * (ky / 2, kx / 2); sum j = oy * Wq + ox; the split reads rows at a constant stride of 2. */             \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void dw_runs_##S(void *arg, int64_t p0, \
                                                                                        int64_t p1, int slot) \
    {                                                                                                         \
        const dw_runs_job *P = arg;                                                                           \
        const conv_job *cj = P->cj;                                                                           \
        const qr_conv_geom *g = cj->g;                                                                        \
        const T *x = cj->x, *w = cj->w, *b = cj->b;                                                           \
        T *y = cj->y;                                                                                         \
        const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],    \
                      KW = g->kernel[1], pt = g->pad_begin[0], pl = g->pad_begin[1], wrow = P->wrow;          \
        T *restrict d = (T *)cj->col + slot * (P->dlen + P->alen), *restrict a = d + P->dlen;                 \
        for (int64_t p = p0; p < p1; p++) {                                                                   \
            int64_t c = p % cj->ch;                                                                           \
            const T *xp = x + p * H * W, *wc = w + c * KH * KW;                                               \
            for (int64_t i = 0; i < P->dlen; i++)                                                             \
                d[i] = 0;                                                                                     \
            for (int64_t yy = 0; yy < H; yy++) {                                                              \
                if (!P->phased) {                                                                             \
                    for (int64_t xx = 0; xx < W; xx++)                                                        \
                        d[(yy + pt) * wrow + pl + xx] = xp[yy * W + xx];                                      \
                    continue;                                                                                 \
                }                                                                                             \
                int64_t py = (yy + pt) & 1, r = (yy + pt) >> 1;                                               \
                for (int64_t px = 0; px < 2; px++) {                                                          \
                    int64_t x0 = (px - pl) & 1; /* the first column of this phase */                          \
                    T *restrict dr = d + (py * 2 + px) * P->plen + r * wrow + ((x0 + pl) >> 1);               \
                    const T *restrict src = xp + yy * W + x0;                                                 \
                    for (int64_t t = 0; t < (W - x0 + 1) / 2; t++)                                            \
                        dr[t] = src[2 * t];                                                                   \
                }                                                                                             \
            }                                                                                                 \
            if (sizeof(T) == sizeof(float) && P->taps_avx2)                                                  \
                qr_dw_taps_f32_avx2((float *)a, (const float *)d, P->off, (const float *)wc, KH * KW, P->n);   \
            else                                                                                              \
                dw_taps_##S(a, d, P->off, wc, KH * KW, P->n);                                                 \
            T *out = y + p * OH * OW;                                                                         \
            if (b) { /* the bias test out of the loops, so they vectorize */                                  \
                T bc = b[c];                                                                                  \
                for (int64_t oy = 0; oy < OH; oy++)                                                           \
                    for (int64_t ox = 0; ox < OW; ox++)                                                       \
                        out[oy * OW + ox] = a[oy * wrow + ox] + bc;                                           \
            } else                                                                                            \
                for (int64_t oy = 0; oy < OH; oy++)                                                           \
                    memcpy(out + oy * OW, a + oy * wrow, (size_t)OW * sizeof(T));                             \
            act_post_##S(out, OH * OW, cj->act);                                                              \
        }                                                                                                     \
    }                                                                                                         \
                                                                                                              \
    /* y[N, M, small] = conv(x[N, C, big], w[M, C/group, K]) + b[M]: a batch splits its images across         \
     * the threads (each with its own im2col buffer), one image splits its rows. Either way every             \
     * output is computed alone, in the same order: 1 and 2 threads give the same bits. */                    \
    static qr_status conv_fwd_##S(qr_kctx *k, const qr_conv_geom *g, const T *x, const T *w, const T *b,      \
                                  T *y, int64_t n_img, int64_t ch, int64_t m, int64_t group, const qr_act *act) \
    {                                                                                                         \
        int64_t cg = ch / group, mg = m / group, ck = cg * g->kernel_n;                                       \
        /* A 1x1 window with unit strides and no padding reads the input as is. */                            \
        int direct = g->kernel_n == 1;                                                                        \
        for (int i = 0; i < g->r; i++)                                                                        \
            direct &= g->stride[i] == 1 && g->pad_begin[i] == 0 && g->pad_end[i] == 0;                        \
        int dw_s1 = g->stride[0] == 1 && g->stride[1] == 1;                                                   \
        int dw_s2 = g->stride[0] == 2 && g->stride[1] == 2 && g->dilation[0] == 1 && g->dilation[1] == 1;     \
        qr_sconv sp;                                                                                          \
        if (sizeof(T) == sizeof(float) && sconv_takes(g, ch, m, group) && qr_sconv_plan(&sp, g, ch, m))       \
            return sconv_run(k, &sp, (const float *)x, (const float *)w, (const float *)b, (float *)y, n_img, act, \
                             group > 1, 0, 0, NULL);                                                          \
        if (sizeof(T) == sizeof(float) && g->r == 2 && group == ch && m == ch && (dw_s1 || dw_s2) &&          \
            qr_dw_f32_avx512_fits(g) && qr_window_avx512()) {                                                 \
            /* the same sums as dw_runs, from padded copies of each plane's rows */                                  \
            conv_job dj = {g, x, w, b, y, ch, m, group, cg, mg, ck, NULL, NULL};                              \
            dj.act = act;                                                                                     \
            dj.slot_len = qr_dw_f32_avx512_work(g);                                                           \
            dj.col = qr_kwork(k, qr_pool_threads(k->pool), dj.slot_len, sizeof(float), "depthwise planes");   \
            if (!dj.col)                                                                                      \
                return QR_ERR;                                                                                \
            qr_parallel_for_slots(k->pool, n_img * ch, 1, dw_planes_avx512, &dj);                             \
            return QR_OK;                                                                                     \
        }                                                                                                     \
        if (g->r == 2 && group == ch && m == ch && (dw_s1 || dw_s2) && g->small_n > 0) {                      \
            /* depthwise at stride 1 over padded planes, at stride 2 over their phases */                     \
            int64_t hp = g->big[0] + g->pad_begin[0] + g->pad_end[0];                                         \
            int64_t wp = g->big[1] + g->pad_begin[1] + g->pad_end[1], KW = g->kernel[1];                      \
            dw_runs_job P = {.phased = dw_s2, .wrow = dw_s2 ? (wp + 1) / 2 : wp,                              \
                             .taps_avx2 = sizeof(T) == sizeof(float) && qr_window_avx2()};                     \
            P.n = g->small[0] * P.wrow;                                                                       \
            P.alen = (P.n + 15) / 16 * 16;                                                                    \
            /* the last window position reads (KW - 1) * dilation past the plane's last row, (KW - 1) / 2     \
             * past a phase's */                                                                              \
            if (dw_s2) {                                                                                      \
                P.plen = ((hp + 1) / 2 * P.wrow + (KW - 1) / 2 + 15) / 16 * 16;                               \
                P.dlen = 4 * P.plen;                                                                          \
            } else {                                                                                          \
                P.dlen = (hp * wp + (KW - 1) * g->dilation[1] + 15) / 16 * 16;                                \
            }                                                                                                 \
            int slots = qr_pool_threads(k->pool);                                                             \
            T *buf = qr_kwork(k, slots, P.dlen + P.alen, sizeof(T), "depthwise planes");                      \
            int64_t *off = buf ? qr_kwork(k, g->kernel_n, 1, sizeof(int64_t), "tap offsets") : NULL;          \
            if (!off)                                                                                         \
                return QR_ERR;                                                                                \
            for (int64_t t = 0; t < g->kernel_n; t++) { /* window position t's run */                         \
                int64_t ky = t / KW, kx = t % KW;                                                             \
                off[t] = dw_s2 ? ((ky & 1) * 2 + (kx & 1)) * P.plen + (ky >> 1) * P.wrow + (kx >> 1)          \
                               : ky * g->dilation[0] * wp + kx * g->dilation[1];                              \
            }                                                                                                 \
            P.off = off;                                                                                      \
            conv_job dj = {g, x, w, b, y, ch, m, group, cg, mg, ck, buf, NULL};                               \
            dj.act = act;                                                                                     \
            P.cj = &dj;                                                                                       \
            qr_parallel_for_slots(k->pool, n_img * ch, 1, dw_runs_##S, &P);                                   \
            return QR_OK;                                                                                     \
        }                                                                                                     \
        if (g->r == 2 && group == ch && m == ch) { /* depthwise, strided: plane by plane */                   \
            conv_job dj = {g, x, w, b, y, ch, m, group, cg, mg, ck, NULL, NULL};                              \
            dj.act = act;                                                                                     \
            qr_parallel_for(k->pool, n_img * ch, 1, dw_planes_##S, &dj);                                      \
            return QR_OK;                                                                                     \
        }                                                                                                     \
        if (sizeof(T) == sizeof(float) && qr_wino_nchw_takes(g, ch, m, group)) {                              \
            int done = 0;                                                                                     \
            if (qr_wino_nchw_run(k, g, ch, m, (const float *)x, (const float *)w, (const float *)b, (float *)y,  \
                                 n_img, act, &done) != QR_OK)                                                 \
                return QR_ERR;                                                                                \
            if (done)                                                                                         \
                return QR_OK;                                                                                 \
        }                                                                                                     \
        /* the FMA GEMM's panels are taken after each path's own scratch, whose size errors name */           \
        const qr_sgemm_kernel *sk = sizeof(T) == sizeof(float) ? qr_sgemm_best() : NULL;                      \
        float *pk = NULL;                                                                                     \
        int s1 = g->r == 2 && g->stride[0] == 1 && g->stride[1] == 1;                                         \
        int s2 = g->r == 2 && g->stride[0] == 2 && g->stride[1] == 2 && g->dilation[0] == 1 && g->dilation[1] == 1; \
        if (sk && !direct && (s1 || s2) && g->small_n > 0) {                                                  \
            /* the FMA GEMM over padded planes (or their phases), no im2col (conv_image_runs) */              \
            conv_job cj = {g, x, w, b, y, ch, m, group, cg, mg, ck, NULL, NULL, sk, pk, NULL, 0, 0, 0, 0, 0}; \
            cj.act = act;                                                                                     \
            cj.hp = g->big[0] + g->pad_begin[0] + g->pad_end[0];                                              \
            cj.wp = g->big[1] + g->pad_begin[1] + g->pad_end[1];                                              \
            if (s2) {                                                                                         \
                cj.wp = (cj.wp + 1) / 2;                                                                      \
                cj.php = (cj.hp + 1) / 2 * cj.wp;                                                             \
            }                                                                                                 \
            /* the last position's run ends (KW - 1) * dilation past the planes, (KW - 1) / 2 past a phase */ \
            cj.plen = s2 ? cg * 4 * cj.php + (g->kernel[1] - 1) / 2                                           \
                         : cg * cj.hp * cj.wp + (g->kernel[1] - 1) * g->dilation[1];                          \
            cj.plen = (cj.plen + 15) / 16 * 16;                                                               \
            cj.slot_len = cj.plen + mg * g->small[0] * cj.wp;                                                 \
            int slots = n_img > 1 ? qr_pool_threads(k->pool) : 1;                                             \
            cj.col = qr_kwork(k, slots, cj.slot_len, sizeof(T), "padded planes and product");                 \
            int64_t *rows = cj.col ? qr_kwork(k, ck, 1, sizeof(int64_t), "window runs") : NULL;               \
            if (!rows || !(pk = cj.pk = sgemm_panels(k, sk)))                                                 \
                return QR_ERR;                                                                                \
            for (int64_t q = 0; q < ck; q++) {                                                                \
                int64_t c = q / g->kernel_n, t = q % g->kernel_n, ky = t / g->kernel[1], kx = t % g->kernel[1]; \
                rows[q] = s2 ? (c * 4 + (ky & 1) * 2 + (kx & 1)) * cj.php + (ky >> 1) * cj.wp + (kx >> 1)     \
                             : (c * cj.hp + ky * g->dilation[0]) * cj.wp + kx * g->dilation[1];               \
            }                                                                                                 \
            cj.rows = rows;                                                                                   \
            if (slots > 1)                                                                                    \
                qr_parallel_for_slots(k->pool, n_img, 1, conv_images_##S, &cj);                               \
            else                                                                                              \
                for (int64_t n = 0; n < n_img; n++)                                                           \
                    conv_image_runs_##S(&cj, n, cj.col, k->pool, pk);                                         \
            return QR_OK;                                                                                     \
        }                                                                                                     \
        int64_t fold = conv_fold(g->small_n, ck * (int64_t)sizeof(T));                                        \
        if (group == 1 && n_img > 1 && fold > 1) {                                                            \
            /* images of few outputs: several to one GEMM */                                                  \
            int64_t nb = fold < n_img ? fold : n_img, chunks;                                                 \
            chunks = (n_img + nb - 1) / nb;                                                                   \
            int slots = qr_pool_threads(k->pool);                                                             \
            T *buf = qr_kwork(k, slots, (ck + m) * nb * g->small_n, sizeof(T), "batched im2col and product"); \
            int64_t *offs = buf ? qr_kwork(k, slots, g->small_n, sizeof(int64_t), "im2col offsets") : NULL;   \
            if (!offs || (sk && !(pk = sgemm_panels(k, sk))))                                                 \
                return QR_ERR;                                                                                \
            /* conv_job's group carries the images per chunk, mg the batch's images */                        \
            conv_job cj = {g, x, w, b, y, ch, m, nb, cg, n_img, ck, buf, offs, sk, pk, NULL, 0, 0, 0, 0, 0};     \
            cj.act = act;                                                                                     \
            qr_parallel_for_slots(k->pool, chunks, 1, conv_batches_##S, &cj);                                 \
            return QR_OK;                                                                                     \
        }                                                                                                     \
        int slots = n_img > 1 ? qr_pool_threads(k->pool) : 1;                                                 \
        T *col = direct ? NULL : qr_kwork(k, ck * slots, g->small_n, sizeof(T), "im2col buffer");             \
        if (!direct && !col)                                                                                  \
            return QR_ERR;                                                                                    \
        int64_t *offs = qr_kwork(k, slots, g->small_n, sizeof(int64_t), "im2col offsets");                    \
        if (!offs || (sk && !(pk = sgemm_panels(k, sk))))                                                     \
            return QR_ERR;                                                                                    \
        conv_job cj = {g, x, w, b, y, ch, m, group, cg, mg, ck, col, offs, sk, pk, NULL, 0, 0, 0, 0, 0};         \
        cj.act = act;                                                                                         \
        if (slots > 1)                                                                                        \
            qr_parallel_for_slots(k->pool, n_img, 1, conv_images_##S, &cj);                                   \
        else                                                                                                  \
            for (int64_t n = 0; n < n_img; n++)                                                               \
                conv_image_##S(&cj, n, col, offs, k->pool, cj.pk);                                            \
        return QR_OK;                                                                                         \
    }                                                                                                         \
                                                                                                              \
                                                                                                              \
    /* y[N, M, big] = conv_transpose(x[N, C, small], w[C, M/group, K]) + b[M] */                              \
    static qr_status conv_tr_##S(qr_kctx *k, const qr_conv_geom *g, const T *x, const T *w, const T *b,      \
                                 T *y, int64_t n_img, int64_t ch, int64_t m, int64_t group)                  \
    {                                                                                                         \
        int64_t cg = ch / group, mg = m / group, mk = mg * g->kernel_n;                                       \
        T *col = qr_kwork(k, mk, g->small_n, sizeof(T), "col2im buffer");                                     \
        int64_t *offs = col ? qr_kwork(k, g->small_n, 1, sizeof(int64_t), "col2im offsets") : NULL;           \
        if (!offs)                                                                                            \
            return QR_ERR;                                                                                    \
        float *pk;                                                                                            \
        const qr_sgemm_kernel *sk = sgemm_for(k, sizeof(T), &pk);                                             \
        if (sk && !pk)                                                                                        \
            return QR_ERR;                                                                                    \
        for (int64_t n = 0; n < n_img; n++)                                                                   \
            for (int64_t gi = 0; gi < group; gi++) {                                                          \
                /* col = w_g^T x_g: one row per (output channel, kernel position). */                         \
                gemm_job jb = {.a = w + gi * cg * mk, .a_rs = 1, .a_cs = mk,                                  \
                               .b = x + (n * ch + gi * cg) * g->small_n, .c = col, .m = mk,                   \
                               .n = g->small_n, .kdim = cg};                                                  \
                gemm_run_##S(k->pool, &jb, sk, pk);                                                           \
                T *yg = y + (n * m + gi * mg) * g->big_n;                                                     \
                for (int64_t j = 0; j < mg * g->big_n; j++)                                                   \
                    yg[j] = 0;                                                                                \
                col2im_##S(g, col, mg, yg, offs);                                                             \
                if (b) /* last, as in gemm_rows */                                                            \
                    add_bias_##S(yg, g->big_n, b + gi * mg, mg);                                              \
            }                                                                                                 \
        return QR_OK;                                                                                         \
    }

DEFINE_FLOAT_KERNELS(float, f32)
DEFINE_FLOAT_KERNELS(double, f64)

/* Products [p0, p1) of a batch (qr_gemm_f32), each on one thread with its slot's panels. */
typedef struct gemm_batch_job {
    gemm_job jb;
    const int64_t *aoff, *boff;
    const qr_sgemm_kernel *sk;
    float *pk;
} gemm_batch_job;

static void gemm_batch(void *arg, int64_t p0, int64_t p1, int slot)
{
    const gemm_batch_job *bj = arg;
    for (int64_t p = p0; p < p1; p++) {
        gemm_job jb = bj->jb;
        jb.a = (const float *)jb.a + (bj->aoff ? bj->aoff[p] : 0);
        jb.b = (const float *)jb.b + (bj->boff ? bj->boff[p] : 0);
        jb.c = (float *)jb.c + p * jb.m * jb.n;
        gemm_run_f32(NULL, &jb, bj->sk, sgemm_slot(bj->sk, bj->pk, slot));
    }
}

qr_status qr_gemm_f32(qr_kctx *k, const float *a, int64_t a_rs, int64_t a_cs, const float *b, float *c, int64_t m,
                      int64_t n, int64_t kdim, int64_t nbatch, const int64_t *aoff, const int64_t *boff)
{
    gemm_batch_job bj = {.jb = {.a = a, .b = b, .c = c, .a_rs = a_rs, .a_cs = a_cs, .m = m, .n = n, .kdim = kdim},
                         .aoff = aoff, .boff = boff};
    bj.sk = sgemm_for(k, sizeof(float), &bj.pk);
    if (bj.sk && !bj.pk)
        return QR_ERR;
    if (nbatch > 1) { /* the threads take whole products */
        qr_parallel_for_slots(k->pool, nbatch, 1, gemm_batch, &bj);
        return QR_OK;
    }
    bj.jb.a = a + (aoff ? aoff[0] : 0);
    bj.jb.b = b + (boff ? boff[0] : 0);
    if (bj.sk)
        gemm_run_f32(k->pool, &bj.jb, bj.sk, bj.pk);
    else
        qr_parallel_for(k->pool, m, 8, gemm_rows_f32, &bj.jb);
    return QR_OK;
}

/* float copy of a float16 tensor (NULL stays NULL); *fail set on out of memory. */
static float *to_f32(const qr_tensor *t, int *fail)
{
    if (!t)
        return NULL;
    int64_t n = qr_tensor_numel(t);
    float *f = malloc((size_t)n * sizeof(float) + 1);
    if (!f) {
        *fail = 1;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)qr_get_f64(t->data, t->dtype, i);
    return f;
}

/* ---- Conv / ConvTranspose ---- */

typedef struct conv_shape {
    int64_t n, c, m, group;
    qr_conv_geom g;
} conv_shape;

static qr_status conv_check(qr_kctx *k, int transpose, conv_shape *cs)
{
    const qr_tensor *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    const char *op = transpose ? "ConvTranspose" : "Conv";
    if (!qr_dtype_is_float(x->dtype))
        return QR_KERR(k, "%s takes float16, float32 or float64 input, not %s", op, qr_dtype_name(x->dtype));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return QR_KERR(k, "weights and bias must have the input's type %s", qr_dtype_name(x->dtype));
    if (x->ndim < 3 || w->ndim != x->ndim)
        return QR_KERR(k, "input (rank %d) and weights (rank %d) must have the same rank, 3 or more", x->ndim,
                       w->ndim);
    cs->group = qr_attr_i(k->node, "group", 1);
    if (cs->group < 1)
        return QR_KERR(k, "group %lld must be positive", (long long)cs->group);
    cs->n = x->dims[0];
    cs->c = x->dims[1];
    if (cs->c % cs->group)
        return QR_KERR(k, "%lld input channels are not divisible by group %lld", (long long)cs->c,
                       (long long)cs->group);
    if (!transpose) {
        cs->m = w->dims[0];
        if (w->dims[1] * cs->group != cs->c)
            return QR_KERR(k, "input has %lld channels but the weights expect %lld x group %lld", (long long)cs->c,
                           (long long)w->dims[1], (long long)cs->group);
    } else {
        cs->m = w->dims[1] * cs->group;
        if (w->dims[0] != cs->c)
            return QR_KERR(k, "input has %lld channels but the weights have %lld", (long long)cs->c,
                           (long long)w->dims[0]);
    }
    if (cs->m % cs->group)
        return QR_KERR(k, "%lld output channels are not divisible by group %lld", (long long)cs->m,
                       (long long)cs->group);
    if (b && (b->ndim != 1 || b->dims[0] != cs->m))
        return QR_KERR(k, "bias must be a vector of %lld values", (long long)cs->m);
    return qr_conv_geom_init(k, x, w->dims + 2, transpose ? QR_WIN_TRANSPOSE : QR_WIN_CONV, &cs->g);
}

static void conv_set_out(qr_kctx *k, const conv_shape *cs, int transpose)
{
    qr_tensor *y = k->out[0];
    y->dtype = k->in[0]->dtype;
    y->ndim = cs->g.r + 2;
    y->dims[0] = cs->n;
    y->dims[1] = cs->m;
    for (int i = 0; i < cs->g.r; i++)
        y->dims[2 + i] = transpose ? cs->g.big[i] : cs->g.small[i];
}

static qr_status conv_infer(qr_kctx *k)
{
    conv_shape cs;
    if (conv_check(k, 0, &cs) != QR_OK)
        return QR_ERR;
    conv_set_out(k, &cs, 0);
    return QR_OK;
}

static qr_status conv_tr_infer(qr_kctx *k)
{
    conv_shape cs;
    if (conv_check(k, 1, &cs) != QR_OK)
        return QR_ERR;
    conv_set_out(k, &cs, 1);
    return QR_OK;
}

static qr_status conv_any_run(qr_kctx *k, int transpose)
{
    conv_shape cs;
    if (conv_check(k, transpose, &cs) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    if (transpose && x->dtype == QR_F32)
        return conv_tr_f32(k, &cs.g, x->data, w->data, b ? b->data : NULL, y->data, cs.n, cs.c, cs.m, cs.group);
    if (transpose && x->dtype == QR_F64)
        return conv_tr_f64(k, &cs.g, x->data, w->data, b ? b->data : NULL, y->data, cs.n, cs.c, cs.m, cs.group);
    const qr_act *act = transpose ? NULL : k->act; /* a fused Relu or Clip (qr_op_def.act) */
    if (x->dtype == QR_F32)
        return conv_fwd_f32(k, &cs.g, x->data, w->data, b ? b->data : NULL, y->data, cs.n, cs.c, cs.m, cs.group, act);
    if (x->dtype == QR_F64)
        return conv_fwd_f64(k, &cs.g, x->data, w->data, b ? b->data : NULL, y->data, cs.n, cs.c, cs.m, cs.group, act);
    /* float16: compute in float, round once at the end. */
    int fail = 0;
    float *xf = to_f32(x, &fail), *wf = to_f32(w, &fail), *bf = to_f32(b, &fail);
    int64_t ny = qr_tensor_numel(y);
    float *yf = malloc((size_t)ny * sizeof(float) + 1);
    qr_status st = QR_ERR;
    if (fail || !yf)
        st = QR_KERR(k, "out of memory");
    else
        st = transpose ? conv_tr_f32(k, &cs.g, xf, wf, bf, yf, cs.n, cs.c, cs.m, cs.group)
                       : conv_fwd_f32(k, &cs.g, xf, wf, bf, yf, cs.n, cs.c, cs.m, cs.group, act);
    if (st == QR_OK)
        for (int64_t i = 0; i < ny; i++)
            qr_set_f64(y->data, y->dtype, i, yf[i]);
    free(xf);
    free(wf);
    free(bf);
    free(yf);
    return st;
}

static qr_status conv_run(qr_kctx *k) { return conv_any_run(k, 0); }
static qr_status conv_tr_run(qr_kctx *k) { return conv_any_run(k, 1); }

/* ---- MaxPool / AveragePool ---- */

static qr_status pool_check(qr_kctx *k, int is_max, qr_conv_geom *g)
{
    const qr_tensor *x = k->in[0];
    /* integers: quantized data (an average rounds half to even, on the input's scale) */
    int ok = qr_dtype_is_float(x->dtype) || x->dtype == QR_I8 || x->dtype == QR_U8 || x->dtype == QR_I16 ||
             x->dtype == QR_U16;
    if (!ok)
        return QR_KERR(k, "%s does not take %s input", is_max ? "MaxPool" : "AveragePool", qr_dtype_name(x->dtype));
    if (is_max) {
        int64_t so = qr_attr_i(k->node, "storage_order", 0);
        if (so != 0 && so != 1)
            return QR_KERR(k, "storage_order %lld must be 0 (row major) or 1 (column major)", (long long)so);
    }
    return qr_conv_geom_init(k, x, NULL, QR_WIN_POOL, g);
}

static qr_status pool_infer_common(qr_kctx *k, int is_max)
{
    qr_conv_geom g;
    if (pool_check(k, is_max, &g) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    for (int o = 0; o < k->n_out; o++) {
        qr_tensor *y = k->out[o];
        y->dtype = o == 0 ? x->dtype : QR_I64;
        y->ndim = x->ndim;
        y->dims[0] = x->dims[0];
        y->dims[1] = x->dims[1];
        for (int i = 0; i < g.r; i++)
            y->dims[2 + i] = g.small[i];
    }
    return QR_OK;
}

static qr_status maxpool_infer(qr_kctx *k) { return pool_infer_common(k, 1); }
static qr_status avgpool_infer(qr_kctx *k) { return pool_infer_common(k, 0); }

/* A double copy of any float or integer tensor. */
static double *to_f64(const qr_tensor *t)
{
    int64_t n = qr_tensor_numel(t);
    double *d = malloc((size_t)n * sizeof(double) + 1);
    if (!d)
        return NULL;
    if (t->dtype == QR_F32) {
        const float *f = t->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = f[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            d[i] = qr_get_f64(t->data, t->dtype, i);
    }
    return d;
}

static void store_f64(qr_tensor *t, const double *v, int64_t n)
{
    if (t->dtype == QR_F32) {
        float *f = t->data;
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)v[i];
    } else if (qr_dtype_is_int(t->dtype)) { /* averages of quantized data: round half to even */
        for (int64_t i = 0; i < n; i++)
            qr_set_f64(t->data, t->dtype, i, nearbyint(v[i]));
    } else {
        for (int64_t i = 0; i < n; i++)
            qr_set_f64(t->data, t->dtype, i, v[i]);
    }
}

/* Converts a row-major offset within one spatial plane to column-major order
 * (MaxPool's storage_order = 1). */
static int64_t col_major(const qr_conv_geom *g, int64_t off)
{
    int64_t c[QR_MAX_DIMS];
    for (int d = g->r - 1; d >= 0; d--) {
        c[d] = off % g->big[d];
        off /= g->big[d];
    }
    int64_t idx = 0, s = 1;
    for (int d = 0; d < g->r; d++) {
        idx += c[d] * s;
        s *= g->big[d];
    }
    return idx;
}

/* 2-D MaxPool of integers, a row of windows at a time: the element-wise
 * maximum of the window's input rows into a row with TMIN borders, then the
 * maximum across each window's columns; neither loop tests bounds, so both
 * vectorize. The maximum of integers does not depend on the order it is
 * taken in (f32 keeps the window order: -0 and +0 tie). tmp holds
 * pool_row_len(g) elements. */
static int64_t pool_row_len(const qr_conv_geom *g)
{
    int64_t reach = (g->small[1] - 1) * g->stride[1] + (g->kernel[1] - 1) * g->dilation[1] + 1;
    int64_t wide = g->pad_begin[1] + g->big[1];
    return reach > wide ? reach : wide;
}

#define POOL_MAX_ROWS(S, T, TMIN)                                                                              \
    static void pool_max_rows_##S(const qr_conv_geom *g, const T *x, T *y, int64_t planes, T *tmp)            \
    {                                                                                                          \
        int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], len = pool_row_len(g);      \
        int64_t pl = g->pad_begin[1], s = g->stride[1], d = g->dilation[1];                                   \
        for (int64_t i = 0; i < len; i++)                                                                      \
            tmp[i] = TMIN;                                                                                     \
        for (int64_t p = 0; p < planes; p++)                                                                   \
            for (int64_t oy = 0; oy < OH; oy++) {                                                              \
                T *t = tmp + pl;                                                                               \
                for (int64_t ix = 0; ix < W; ix++)                                                             \
                    t[ix] = TMIN;                                                                              \
                for (int64_t ky = 0; ky < g->kernel[0]; ky++) {                                                \
                    int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];                    \
                    if (iy < 0 || iy >= H)                                                                     \
                        continue;                                                                              \
                    const T *row = x + (p * H + iy) * W;                                                       \
                    for (int64_t ix = 0; ix < W; ix++)                                                         \
                        t[ix] = row[ix] > t[ix] ? row[ix] : t[ix];                                             \
                }                                                                                              \
                T *yr = y + (p * OH + oy) * OW;                                                                \
                if (s == 2) { /* a constant stride: loops GCC vectorizes */                                    \
                    for (int64_t ox = 0; ox < OW; ox++)                                                        \
                        yr[ox] = tmp[2 * ox];                                                                  \
                    for (int64_t kx = 1; kx < g->kernel[1]; kx++) {                                            \
                        const T *c = tmp + kx * d;                                                             \
                        for (int64_t ox = 0; ox < OW; ox++)                                                    \
                            yr[ox] = c[2 * ox] > yr[ox] ? c[2 * ox] : yr[ox];                                  \
                    }                                                                                          \
                    continue;                                                                                  \
                }                                                                                              \
                for (int64_t ox = 0; ox < OW; ox++)                                                            \
                    yr[ox] = tmp[ox * s];                                                                      \
                for (int64_t kx = 1; kx < g->kernel[1]; kx++) {                                                \
                    const T *c = tmp + kx * d;                                                                 \
                    for (int64_t ox = 0; ox < OW; ox++)                                                        \
                        yr[ox] = c[ox * s] > yr[ox] ? c[ox * s] : yr[ox];                                      \
                }                                                                                              \
            }                                                                                                  \
    }
POOL_MAX_ROWS(u8, uint8_t, 0)
POOL_MAX_ROWS(i8, int8_t, INT8_MIN)

/* Windows that tile the plane (kernel = stride, no padding or dilation, the
 * plane exactly OH x stride rows of OW x stride columns), as 2x2/2 pooling
 * usually is: every plane's rows follow one rule, so a block of output rows
 * from any planes is one vertical maximum of whole rows and one horizontal
 * maximum over the block's flat columns; both are long unit-stride loops,
 * not a short loop per row. */
static int pool_tiles_plane(const qr_conv_geom *g)
{
    for (int d = 0; d < 2; d++)
        if (g->kernel[d] != g->stride[d] || g->dilation[d] != 1 || g->pad_begin[d] || g->pad_end[d] ||
            g->small[d] * g->stride[d] != g->big[d])
            return 0;
    return 1;
}

/* Output rows per block of the tiled path: the block's input rows' maxima (B x W bytes) in L1. */
static int64_t pool_tile_rows(const qr_conv_geom *g)
{
    int64_t b = 8192 / g->big[1];
    return b < 1 ? 1 : b;
}

#define POOL_MAX_TILED(S, T)                                                                                   \
    static void pool_max_tiled_##S(const qr_conv_geom *g, const T *x, T *y, int64_t planes, T *tmp)           \
    {                                                                                                          \
        int64_t W = g->big[1], OW = g->small[1], k0 = g->kernel[0], k1 = g->kernel[1];                         \
        int64_t rows = planes * g->small[0], block = pool_tile_rows(g);                                        \
        for (int64_t r0 = 0; r0 < rows; r0 += block) {                                                         \
            int64_t nr = rows - r0 < block ? rows - r0 : block;                                                \
            for (int64_t r = 0; r < nr; r++) {                                                                 \
                const T *in = x + (r0 + r) * k0 * W;                                                           \
                T *t = tmp + r * W;                                                                            \
                for (int64_t ix = 0; ix < W; ix++)                                                             \
                    t[ix] = in[ix];                                                                            \
                for (int64_t ky = 1; ky < k0; ky++)                                                            \
                    for (int64_t ix = 0; ix < W; ix++)                                                         \
                        t[ix] = in[ky * W + ix] > t[ix] ? in[ky * W + ix] : t[ix];                             \
            }                                                                                                  \
            T *yb = y + r0 * OW;                                                                               \
            int64_t n = nr * OW;                                                                               \
            if (k1 == 2) {                                                                                     \
                for (int64_t j = 0; j < n; j++)                                                                \
                    yb[j] = tmp[2 * j + 1] > tmp[2 * j] ? tmp[2 * j + 1] : tmp[2 * j];                         \
                continue;                                                                                      \
            }                                                                                                  \
            for (int64_t j = 0; j < n; j++)                                                                    \
                yb[j] = tmp[j * k1];                                                                           \
            for (int64_t kx = 1; kx < k1; kx++)                                                                \
                for (int64_t j = 0; j < n; j++)                                                                \
                    yb[j] = tmp[j * k1 + kx] > yb[j] ? tmp[j * k1 + kx] : yb[j];                               \
        }                                                                                                      \
    }
POOL_MAX_TILED(u8, uint8_t)
POOL_MAX_TILED(i8, int8_t)

typedef struct pool8_job {
    const qr_conv_geom *g;
    const void *x;
    void *y;
    uint8_t *tmp; /* slots x len */
    int64_t len;
    int is_i8;
} pool8_job;

/* Planes [p0, p1) of an 8-bit MaxPool, with thread slot's row buffer. */
static void pool8_planes(void *arg, int64_t p0, int64_t p1, int slot)
{
    const pool8_job *j = arg;
    int64_t in = j->g->big_n * p0, out = j->g->small_n * p0;
    uint8_t *tmp = j->tmp + slot * j->len;
    if (pool_tiles_plane(j->g)) {
        if (j->is_i8)
            pool_max_tiled_i8(j->g, (const int8_t *)j->x + in, (int8_t *)j->y + out, p1 - p0, (int8_t *)tmp);
        else
            pool_max_tiled_u8(j->g, (const uint8_t *)j->x + in, (uint8_t *)j->y + out, p1 - p0, tmp);
        return;
    }
    if (j->is_i8)
        pool_max_rows_i8(j->g, (const int8_t *)j->x + in, (int8_t *)j->y + out, p1 - p0, (int8_t *)tmp);
    else
        pool_max_rows_u8(j->g, (const uint8_t *)j->x + in, (uint8_t *)j->y + out, p1 - p0, tmp);
}

/* MaxPool on f32 and 8-bit integers (quantized data) as they are, without
 * the f64 path: the same windows, the first maximum (NaN never wins); a
 * window of padding only gives the type's minimum (-inf), as the f64 path. */
#define POOL_MAX_INT(S, T, TMIN)                                                                              \
    static void pool_max_##S(const qr_conv_geom *g, const T *x, T *y, int64_t planes, int64_t *offs)         \
    {                                                                                                         \
        int64_t sn = g->small_n;                                                                              \
        if (g->r == 2) { /* images: each window read in place, no offsets table */                           \
            int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1];                         \
            for (int64_t p = 0; p < planes; p++)                                                              \
                for (int64_t oy = 0; oy < OH; oy++)                                                           \
                    for (int64_t ox = 0; ox < OW; ox++) {                                                     \
                        T m = TMIN;                                                                           \
                        for (int64_t ky = 0; ky < g->kernel[0]; ky++) {                                       \
                            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];           \
                            if (iy < 0 || iy >= H)                                                            \
                                continue;                                                                     \
                            const T *row = x + (p * H + iy) * W;                                              \
                            for (int64_t kx = 0; kx < g->kernel[1]; kx++) {                                   \
                                int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];       \
                                if (ix >= 0 && ix < W && row[ix] > m)                                         \
                                    m = row[ix];                                                              \
                            }                                                                                 \
                        }                                                                                     \
                        y[(p * OH + oy) * OW + ox] = m;                                                       \
                    }                                                                                         \
            return;                                                                                           \
        }                                                                                                     \
        for (int64_t i = 0; i < planes * sn; i++)                                                             \
            y[i] = TMIN;                                                                                      \
        for (int64_t kf = 0; kf < g->kernel_n; kf++) {                                                        \
            qr_conv_offsets(g, kf, offs);                                                                     \
            for (int64_t p = 0; p < planes; p++) {                                                            \
                const T *xp = x + p * g->big_n;                                                               \
                T *yp = y + p * sn;                                                                           \
                for (int64_t j = 0; j < sn; j++)                                                              \
                    if (offs[j] >= 0 && xp[offs[j]] > yp[j])                                                  \
                        yp[j] = xp[offs[j]];                                                                  \
            }                                                                                                 \
        }                                                                                                     \
    }
POOL_MAX_INT(u8, uint8_t, 0)
POOL_MAX_INT(i8, int8_t, INT8_MIN)
POOL_MAX_INT(u16, uint16_t, 0)
POOL_MAX_INT(i16, int16_t, INT16_MIN)
POOL_MAX_INT(f32, float, -INFINITY)

/* f32 2x2 windows at stride 2 tiling the plane: each output the first maximum of its four
 * values in window order (row 0 then row 1, left then right; NaN never wins), as
 * pool_max_f32, in one pass over a row pair whose even and odd columns GCC reads as vectors. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void pool_max_2x2_f32(const qr_conv_geom *g,
                                                                                        const float *x, float *y,
                                                                                        int64_t planes)
{
    int64_t W = g->big[1], OW = g->small[1], rows = planes * g->small[0];
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict r0 = x + 2 * r * W, *restrict r1 = r0 + W;
        float *restrict yr = y + r * OW;
        for (int64_t j = 0; j < OW; j++) {
            float m = -INFINITY, c = r0[2 * j];
            m = c > m ? c : m;
            c = r0[2 * j + 1];
            m = c > m ? c : m;
            c = r1[2 * j];
            m = c > m ? c : m;
            c = r1[2 * j + 1];
            yr[j] = c > m ? c : m;
        }
    }
}

/* The positions each output window counts (cnt[j], for an AveragePool's division): inside the
 * input, or inside the input widened by its pads (count_include_pad). */
static void pool_counts(const qr_kctx *k, const qr_conv_geom *g, int64_t *offs, int64_t *cnt)
{
    qr_conv_geom gp = *g;
    if (qr_attr_i(k->node, "count_include_pad", 0))
        for (int i = 0; i < g->r; i++) { /* the same windows over the input widened by the pads */
            gp.big[i] = g->big[i] + g->pad_begin[i] + g->pad_end[i];
            gp.pad_begin[i] = gp.pad_end[i] = 0;
        }
    for (int64_t j = 0; j < g->small_n; j++)
        cnt[j] = 0;
    for (int64_t kf = 0; kf < g->kernel_n; kf++) {
        qr_conv_offsets(&gp, kf, offs);
        for (int64_t j = 0; j < g->small_n; j++)
            cnt[j] += offs[j] >= 0;
    }
}

/* AveragePool of 8-bit integers (quantized data, the output on the input's qparams): exact
 * integer sums divided with one rounding half to even, what the f64 path computes (its sums and
 * quotient are exact enough: a tie is exactly representable, anything else is at least 1/(2n)
 * away from one), without converting every element to f64. */
#define POOL_AVG_INT(S, T, LO, HI)                                                                             \
    static void pool_avg_##S(const qr_conv_geom *g, const T *x, T *y, int64_t planes, int64_t *offs,          \
                             const int64_t *cnt, int64_t *acc)                                                 \
    {                                                                                                          \
        int64_t sn = g->small_n;                                                                               \
        for (int64_t i = 0; i < planes * sn; i++)                                                              \
            acc[i] = 0;                                                                                        \
        for (int64_t kf = 0; kf < g->kernel_n; kf++) {                                                         \
            qr_conv_offsets(g, kf, offs);                                                                      \
            for (int64_t p = 0; p < planes; p++) {                                                             \
                const T *xp = x + p * g->big_n;                                                                \
                int64_t *ap = acc + p * sn;                                                                    \
                for (int64_t j = 0; j < sn; j++)                                                               \
                    if (offs[j] >= 0)                                                                          \
                        ap[j] += xp[offs[j]];                                                                  \
            }                                                                                                  \
        }                                                                                                      \
        for (int64_t p = 0; p < planes; p++)                                                                   \
            for (int64_t j = 0; j < sn; j++) {                                                                 \
                int64_t s = acc[p * sn + j], c = cnt[j], q, r;                                                 \
                if (c <= 0) { /* a window of padding only: 0 / 0, which the f64 path stores as 0 */           \
                    y[p * sn + j] = 0;                                                                         \
                    continue;                                                                                  \
                }                                                                                              \
                q = s / c, r = s % c; /* truncated: r has s's sign */                                          \
                if (r < 0)                                                                                     \
                    q--, r += c; /* floor: 0 <= r < c */                                                       \
                if (2 * r > c || (2 * r == c && (q & 1)))                                                      \
                    q++;                                                                                       \
                y[p * sn + j] = (T)(q < LO ? LO : q > HI ? HI : q);                                            \
            }                                                                                                  \
    }
POOL_AVG_INT(u8, uint8_t, 0, 255)
POOL_AVG_INT(i8, int8_t, -128, 127)

/* f32 MaxPool planes [p0, p1) with a window kernel of window_f32.h (AVX-512's, or AVX2's: ResNet-18's
 * 3 x 3 / 2 pool was 4% of its f32 run on AMD Zen 3 in the scalar loop). */
typedef struct pool_f32_job {
    const qr_conv_geom *g;
    const float *x;
    float *y;
    void (*plane)(const qr_conv_geom *g, const float *x, float *y);
} pool_f32_job;

static void pool_max_planes(void *arg, int64_t p0, int64_t p1)
{
    const pool_f32_job *j = arg;
    for (int64_t p = p0; p < p1; p++)
        j->plane(j->g, j->x + p * j->g->big_n, j->y + p * j->g->small_n);
}

/* MaxPool of f32, 8- or 16-bit data as it is (no index output): 8-bit images by planes across the
 * threads, each with its row buffer; the rest through an offsets table (16-bit images read each
 * window in place). */
static qr_status pool_max_native(qr_kctx *k, const qr_conv_geom *g, const qr_tensor *x, qr_tensor *y)
{
    int64_t planes = x->dims[0] * x->dims[1];
    if (g->r == 2 && (x->dtype == QR_U8 || x->dtype == QR_I8)) {
        int slots = qr_pool_threads(k->pool);
        int64_t len = pool_tiles_plane(g) ? pool_tile_rows(g) * g->big[1] : pool_row_len(g);
        len = (len + 127) / 64 * 64; /* a cache line apart: no false sharing */
        void *tmp = qr_kwork(k, slots, len, 1, "pooling row buffers");
        if (!tmp)
            return QR_ERR;
        pool8_job pj = {g, x->data, y->data, tmp, len, x->dtype == QR_I8};
        qr_parallel_for_slots(k->pool, planes, 1, pool8_planes, &pj);
        return QR_OK;
    }
    pool_f32_job pj = {g, x->data, y->data, NULL};
    if (x->dtype == QR_F32 && qr_window_avx512_fits(g) && qr_window_avx512())
        pj.plane = qr_maxpool_plane_f32_avx512;
    else if (x->dtype == QR_F32 && g->r == 2 && qr_window_avx2())
        pj.plane = qr_maxpool_plane_f32_avx2;
    if (pj.plane) {
        qr_parallel_for(k->pool, planes, 1, pool_max_planes, &pj);
        return QR_OK;
    }
    int64_t *o = qr_kwork(k, g->small_n, 1, sizeof(int64_t), "window offsets");
    if (!o)
        return QR_ERR;
    if (x->dtype == QR_U8)
        pool_max_u8(g, x->data, y->data, planes, o);
    else if (x->dtype == QR_I8)
        pool_max_i8(g, x->data, y->data, planes, o);
    else if (x->dtype == QR_U16)
        pool_max_u16(g, x->data, y->data, planes, o);
    else if (x->dtype == QR_I16)
        pool_max_i16(g, x->data, y->data, planes, o);
    else if (g->r == 2 && pool_tiles_plane(g) && g->kernel[0] == 2 && g->kernel[1] == 2)
        pool_max_2x2_f32(g, x->data, y->data, planes);
    else
        pool_max_f32(g, x->data, y->data, planes, o);
    return QR_OK;
}

/* AveragePool of 8-bit data on the integers: exact window sums, one rounding. */
static qr_status pool_avg_native(qr_kctx *k, const qr_conv_geom *g, const qr_tensor *x, qr_tensor *y)
{
    int64_t planes = x->dims[0] * x->dims[1], sn = g->small_n;
    int64_t *ia = qr_kwork(k, planes, sn, sizeof(int64_t), "window sums");
    int64_t *io = ia ? qr_kwork(k, sn, 1, sizeof(int64_t), "window offsets") : NULL;
    int64_t *ic = io ? qr_kwork(k, sn, 1, sizeof(int64_t), "window counts") : NULL;
    if (!ic)
        return QR_ERR;
    pool_counts(k, g, io, ic);
    if (x->dtype == QR_U8)
        pool_avg_u8(g, x->data, y->data, planes, io, ic, ia);
    else
        pool_avg_i8(g, x->data, y->data, planes, io, ic, ia);
    return QR_OK;
}

/* The windows' maxima (with their flat indices into arg when given) or sums, in f64: kernel
 * positions outer, planes inner, one offsets table of the output size at a time. Strict > keeps
 * the first maximum in window order. */
static void pool_windows_f64(const qr_conv_geom *g, const double *xd, double *acc, int64_t *arg, int64_t *offs,
                             int64_t planes, int is_max)
{
    int64_t sn = g->small_n;
    for (int64_t i = 0; i < planes * sn; i++)
        acc[i] = is_max ? -INFINITY : 0;
    for (int64_t i = 0; arg && i < planes * sn; i++)
        arg[i] = -1;
    for (int64_t kf = 0; kf < g->kernel_n; kf++) {
        qr_conv_offsets(g, kf, offs);
        for (int64_t p = 0; p < planes; p++) {
            const double *xp = xd + p * g->big_n;
            double *ap = acc + p * sn;
            if (is_max) {
                for (int64_t j = 0; j < sn; j++)
                    if (offs[j] >= 0 && xp[offs[j]] > ap[j]) {
                        ap[j] = xp[offs[j]];
                        if (arg)
                            arg[p * sn + j] = offs[j];
                    }
            } else {
                for (int64_t j = 0; j < sn; j++)
                    if (offs[j] >= 0)
                        ap[j] += xp[offs[j]];
            }
        }
    }
}

/* Every other case (f64 and f16 data, MaxPool's indices, AveragePool of floats) through f64. */
static qr_status pool_run_f64(qr_kctx *k, const qr_conv_geom *g, int is_max)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0], *yi = is_max && k->n_out > 1 ? k->out[1] : NULL;
    int64_t planes = x->dims[0] * x->dims[1], sn = g->small_n;
    double *xd = to_f64(x), *acc = malloc((size_t)(planes * sn) * sizeof(double) + 1);
    int64_t *cnt = malloc((size_t)sn * sizeof(int64_t) + 1);
    int64_t *offs = malloc((size_t)sn * sizeof(int64_t) + 1);
    int64_t *arg = yi ? yi->data : NULL;
    if (!xd || !acc || !cnt || !offs) {
        free(xd);
        free(acc);
        free(cnt);
        free(offs);
        return QR_KERR(k, "out of memory");
    }
    pool_windows_f64(g, xd, acc, arg, offs, planes, is_max);
    if (!is_max) {
        pool_counts(k, g, offs, cnt);
        for (int64_t p = 0; p < planes; p++)
            for (int64_t j = 0; j < sn; j++)
                acc[p * sn + j] /= (double)cnt[j];
    }
    store_f64(y, acc, planes * sn);
    if (arg) {
        int col = qr_attr_i(k->node, "storage_order", 0) == 1;
        for (int64_t p = 0; p < planes; p++)
            for (int64_t j = 0; j < sn; j++) {
                int64_t *a = &arg[p * sn + j];
                if (*a >= 0)
                    *a = p * g->big_n + (col ? col_major(g, *a) : *a);
            }
    }
    free(xd);
    free(acc);
    free(cnt);
    free(offs);
    return QR_OK;
}

static qr_status pool_run_common(qr_kctx *k, int is_max)
{
    qr_conv_geom g;
    if (pool_check(k, is_max, &g) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int has_indices = is_max && k->n_out > 1 && k->out[1];
    if (is_max && !has_indices && x->dtype == y->dtype &&
        (x->dtype == QR_U8 || x->dtype == QR_I8 || x->dtype == QR_U16 || x->dtype == QR_I16 || x->dtype == QR_F32))
        return pool_max_native(k, &g, x, y);
    if (!is_max && x->dtype == y->dtype && (x->dtype == QR_U8 || x->dtype == QR_I8))
        return pool_avg_native(k, &g, x, y);
    return pool_run_f64(k, &g, is_max);
}

static qr_status maxpool_run(qr_kctx *k) { return pool_run_common(k, 1); }
static qr_status avgpool_run(qr_kctx *k) { return pool_run_common(k, 0); }

/* ---- GlobalAveragePool / GlobalMaxPool ---- */

static qr_status global_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int q = x->dtype == QR_I8 || x->dtype == QR_U8 || x->dtype == QR_I16 || x->dtype == QR_U16;
    if (!qr_dtype_is_float(x->dtype) && !q)
        return QR_KERR(k, "global pools take float or quantized (8- or 16-bit integer) input, not %s",
                       qr_dtype_name(x->dtype));
    if (x->ndim < 2)
        return QR_KERR(k, "input must have rank 2 or more (N x C x spatial axes), got rank %d", x->ndim);
    qr_tensor *y = k->out[0];
    qr_same_as(y, x);
    for (int i = 2; i < x->ndim; i++)
        y->dims[i] = 1;
    return QR_OK;
}

/* f32 planes read in place: the mean's sum in double over 8 chains (one chain, after a copy of
 * the input to double, was bound by the add's latency: 6% of MobileNetV3-small's f32 time in its
 * squeeze-excitation pools), the max in float (the same in any order; NaN skipped as the
 * portable loop skips it). */
static void global_f32(const float *x, float *y, int64_t planes, int64_t n, int is_max)
{
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * n;
        int64_t i = 0;
        if (is_max) {
            float m[8];
            for (int l = 0; l < 8; l++)
                m[l] = -INFINITY;
            for (; i + 8 <= n; i += 8)
                for (int l = 0; l < 8; l++)
                    m[l] = xp[i + l] > m[l] ? xp[i + l] : m[l];
            for (; i < n; i++)
                m[0] = xp[i] > m[0] ? xp[i] : m[0];
            for (int l = 1; l < 8; l++)
                m[0] = m[l] > m[0] ? m[l] : m[0];
            y[p] = m[0];
        } else {
            double s[8] = {0};
            for (; i + 8 <= n; i += 8)
                for (int l = 0; l < 8; l++)
                    s[l] += xp[i + l];
            for (; i < n; i++)
                s[0] += xp[i];
            double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            y[p] = (float)(t / (double)n);
        }
    }
}

static qr_status global_run_common(qr_kctx *k, int is_max)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int64_t planes = x->dims[0] * x->dims[1], n = planes ? qr_tensor_numel(x) / planes : 0;
    if (x->dtype == QR_F32 && y->dtype == QR_F32) {
        global_f32(x->data, y->data, planes, n, is_max);
        return QR_OK;
    }
    double *xd = to_f64(x), *out = malloc((size_t)planes * sizeof(double) + 1);
    if (!xd || !out) {
        free(xd);
        free(out);
        return QR_KERR(k, "out of memory");
    }
    for (int64_t p = 0; p < planes; p++) {
        const double *xp = xd + p * n;
        double a = is_max ? -INFINITY : 0;
        for (int64_t i = 0; i < n; i++)
            if (is_max ? xp[i] > a : 1)
                a = is_max ? xp[i] : a + xp[i];
        out[p] = is_max ? a : a / (double)n;
    }
    store_f64(y, out, planes);
    free(xd);
    free(out);
    return QR_OK;
}

static qr_status gap_run(qr_kctx *k) { return global_run_common(k, 0); }
static qr_status gmp_run(qr_kctx *k) { return global_run_common(k, 1); }

/* ---- MaxUnpool ---- */

/* The unpooled shape (N, C, (in - 1) * stride - pads + kernel) into inferred,
 * and the output shape into y: output_shape when given, which may only grow
 * the inferred shape (the reference places the result at its origin). */
static qr_status unpool_shape(qr_kctx *k, int64_t *inferred, qr_tensor *y)
{
    const qr_tensor *x = k->in[0], *ind = k->in[1], *os = k->n_in > 2 ? k->in[2] : NULL;
    if (!qr_dtype_is_float(x->dtype))
        return QR_KERR(k, "MaxUnpool takes float input, not %s", qr_dtype_name(x->dtype));
    if (ind->dtype != QR_I64 || !qr_tensor_same_shape(ind, x))
        return QR_KERR(k, "the indices must be int64 with the input's shape");
    if (x->ndim < 3)
        return QR_KERR(k, "input must have rank 3 or more (N x C x spatial axes), got rank %d", x->ndim);
    int r = x->ndim - 2;
    const int64_t *ks;
    if (qr_attr_ints(k->node, "kernel_shape", &ks) != r)
        return QR_KERR(k, "attribute 'kernel_shape' is required, with one value per spatial axis (%d)", r);
    int64_t strides[QR_MAX_DIMS], pads[2 * QR_MAX_DIMS];
    if (axis_ints(k, "strides", r, 1, 1, strides) != QR_OK || axis_ints(k, "pads", 2 * r, 0, 0, pads) != QR_OK)
        return QR_ERR;
    inferred[0] = x->dims[0];
    inferred[1] = x->dims[1];
    for (int i = 0; i < r; i++) {
        if (ks[i] < 1)
            return QR_KERR(k, "kernel_shape value %lld must be positive", (long long)ks[i]);
        inferred[2 + i] = (x->dims[2 + i] - 1) * strides[i] - pads[i] - pads[r + i] + ks[i];
        if (inferred[2 + i] < 0)
            return QR_KERR(k, "spatial axis %d: the pads exceed the unpooled size", i);
    }
    y->dtype = x->dtype;
    y->ndim = x->ndim;
    memcpy(y->dims, inferred, (size_t)x->ndim * sizeof(int64_t));
    if (os) {
        if (!os->data)
            return QR_NEED_DATA;
        int64_t v[QR_MAX_DIMS];
        if (qr_read_ints(os, v, QR_MAX_DIMS) != x->ndim)
            return QR_KERR(k, "output_shape must be an integer vector of %d values", x->ndim);
        for (int d = 0; d < x->ndim; d++) {
            if (v[d] < inferred[d] || (d < 2 && v[d] != inferred[d]))
                return QR_KERR(k, "output_shape[%d] = %lld is smaller than the unpooled size %lld", d,
                               (long long)v[d], (long long)inferred[d]);
            y->dims[d] = v[d];
        }
    }
    return QR_OK;
}

static qr_status unpool_infer(qr_kctx *k)
{
    int64_t inferred[QR_MAX_DIMS];
    return unpool_shape(k, inferred, k->out[0]);
}

static qr_status unpool_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *ind = k->in[1];
    qr_tensor *y = k->out[0];
    int64_t inferred[QR_MAX_DIMS], total = 1, ystride[QR_MAX_DIMS];
    qr_tensor shape = {0};
    if (unpool_shape(k, inferred, &shape) != QR_OK)
        return QR_ERR;
    for (int d = 0; d < x->ndim; d++)
        total *= inferred[d];
    qr_tensor_strides(y, ystride);
    size_t es = qr_dtype_size(y->dtype);
    memset(y->data, 0, qr_tensor_nbytes(y));
    const int64_t *iv = ind->data;
    int64_t n = qr_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx = iv[i], off = 0;
        if (idx < 0 || idx >= total)
            return QR_KERR(k, "index %lld is outside the unpooled tensor of %lld elements", (long long)idx,
                           (long long)total);
        /* Flat index in the inferred shape -> offset in the output shape. */
        for (int d = x->ndim - 1; d >= 0; d--) {
            off += (idx % inferred[d]) * ystride[d];
            idx /= inferred[d];
        }
        memcpy((char *)y->data + (size_t)off * es, (const char *)x->data + (size_t)i * es, es);
    }
    return QR_OK;
}

/* Tiles per chunk of a Winograd layer: its transformed inputs and products (16 x (C + M) floats a
 * tile) about this many bytes, so they stay in L2 from the input transform through the 16
 * products to the output transform. */
#define WINO_CHUNK_BYTES (1024 * 1024)
/* The 16 products' packed weights up to which chunks run whole on the threads (wino_run) */
#define WINO_WHOLE_WEIGHT_BYTES (1024 * 1024)

/* At least this many 2 x 2 tiles an image for Winograd: its weights are 16/9 of the direct
 * kernel's and stream from memory once per chunk of tiles, so few tiles do not pay for them
 * (ResNet-18's 512-channel 7 x 7 layers, 16 tiles: 2.40-2.69 ms against 2.34-2.36 direct; its
 * 256-channel 14 x 14, 49 tiles: 1.46-1.55 against 2.14; Zen 4, batch 1, frozen). Counted per
 * image, not per call, so an image's outputs are the same bits in parts of any size. */
#define WINO_MIN_TILES 48

/* Input channels from which Winograd pays. 16 where a 512-bit FMA is double-pumped or one pipe
 * (AMD Zen 4: the Fashion-MNIST CNN's 16 -> 32 on 14 x 14 by Winograd 1.849 ms at batch 64 against
 * 1.892 direct, "Stop 43"); 32 on CPUs with AVX512-FP16 (Intel Sapphire Rapids and later Xeons,
 * two full 512-bit FMA pipes), whose direct kernel runs twice as fast while the 16 products' K of 16
 * and the transforms do not: that layer 0.985, 0.894 ms by Winograd against 0.856, 0.784 direct
 * (Xeon model 167, batch 64, frozen, stop 48). The feature stands for the pipes, which CPUID does
 * not report. 64 there since stop 50: the small ResNet's 32 -> 32 on 16 x 16 (products of K 32) ran
 * 2.32, 2.45, 2.36, 2.42 ms at batch 64 by Winograd against 2.12, 2.09, 2.10, 2.03 direct (four
 * rounds in turns, frozen, 1 thread); ResNet-18's 64 channels and more keep Winograd (not
 * measured against direct here). */
static int64_t wino_min_channels(void)
{
    return qr_options_get()->no_winograd == 2 || !__builtin_cpu_supports("avx512fp16") ? 16 : 64;
}

/* Whether a channels-last f32 Conv runs by Winograd F(2x2, 3x3) (wino.h): 3 x 3, stride 1, no
 * dilation, group 1, a channels-last input, at least wino_min_channels() in and as many out as the GEMM
 * tile's columns (the small ResNet's 16 -> 16 on 32 x 32 filled half of the 12 x 32 tile: 4.9 ms
 * against 2.8 direct at batch 64; its 32 -> 32 on 16 x 16 2.2 against 2.6, the Fashion-MNIST
 * CNN's 16 -> 32 on 14 x 14 faster too, on Zen 4), WINO_MIN_TILES, the AVX-512 GEMM, and not `--option
 * winograd=0`. */
static int wino_takes(const qr_conv_geom *g, int64_t c, int64_t m, int64_t group, int x_nhwc)
{
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    return qr_options_get()->no_winograd != 1 && x_nhwc && group == 1 && g->r == 2 && g->kernel[0] == 3 &&
           g->kernel[1] == 3 && g->stride[0] == 1 && g->stride[1] == 1 && g->dilation[0] == 1 &&
           g->dilation[1] == 1 && kn && c >= wino_min_channels() && m >= kn->nr &&
           ((g->small[0] + 1) / 2) * ((g->small[1] + 1) / 2) >= WINO_MIN_TILES &&
           !strcmp(kn->isa, "avx512") && qr_sconv_available();
}

typedef struct wino_job {
    const qr_wino *p;
    const float *x, *bias, *res;
    float *v, *mm, *y;
    const qr_act *act;
    int64_t ldv, ldm, tb, nt; /* nt tiles from tile tb in this chunk */
    int64_t tiles;            /* wino_chunks: all the tiles */
    const qr_sgemm_kernel *kn;
    const float *packed; /* the 16 products' packed weights, pf floats apart */
    int64_t pf;
    float *work; /* each slot's packed GEMM panels */
} wino_job;

/* Products [x0, x1) of the 16 (one per point of the 4 x 4 transformed tile) over the chunk's
 * tiles, on this thread: each output the same bits however the products are shared. */
static void wino_gemms(void *arg, int64_t x0, int64_t x1, int slot)
{
    const wino_job *j = arg;
    const int64_t c = j->p->C, m = j->p->M;
    for (int64_t xi = x0; xi < x1; xi++) {
        qr_sgemm_job sj = {.a = j->v + xi * j->ldv, .a_rs = c, .a_cs = 1, .m = j->nt, .k = c, .n = m,
                           .b_packed = j->packed + xi * j->pf, .c = j->mm + xi * j->ldm, .ldc = m};
        qr_sgemm(NULL, j->kn, &sj, j->work + slot * qr_sgemm_work(j->kn));
    }
}

/* Chunks [c0, c1) of j->nt tiles each (the last to j->tiles), whole on this thread in its slot's
 * inputs, products and GEMM panels: the same steps as wino_run's shared ones, the same bits. */
static void wino_chunks(void *arg, int64_t c0, int64_t c1, int slot)
{
    const wino_job *sj = arg;
    wino_job j = *sj;
    j.v += slot * 16 * j.ldv, j.mm += slot * 16 * j.ldm;
    j.work += slot * qr_sgemm_work(j.kn);
    for (int64_t ci = c0; ci < c1; ci++) {
        j.tb = ci * sj->nt;
        j.nt = sj->tiles - j.tb < sj->nt ? sj->tiles - j.tb : sj->nt;
        qr_wino_input(j.p, j.x, j.v, j.ldv, j.tb, j.tb, j.tb + j.nt);
        for (int64_t xi = 0; xi < 16; xi++) {
            qr_sgemm_job g = {.a = j.v + xi * j.ldv, .a_rs = j.p->C, .a_cs = 1, .m = j.nt, .k = j.p->C, .n = j.p->M,
                              .b_packed = j.packed + xi * j.pf, .c = j.mm + xi * j.ldm, .ldc = j.p->M};
            qr_sgemm(NULL, j.kn, &g, j.work);
        }
        qr_wino_output(j.p, j.mm, j.ldm, j.tb, j.tb, j.tb + j.nt, j.bias, j.res, j.act, j.y);
    }
}

static void wino_in(void *arg, int64_t t0, int64_t t1)
{
    const wino_job *j = arg;
    qr_wino_input(j->p, j->x, j->v, j->ldv, j->tb, j->tb + t0, j->tb + t1);
}

static void wino_out(void *arg, int64_t t0, int64_t t1)
{
    const wino_job *j = arg;
    qr_wino_output(j->p, j->mm, j->ldm, j->tb, j->tb + t0, j->tb + t1, j->bias, j->res, j->act, j->y);
}

/* y = conv(x, w) + b (+ res, then act) by wino.h over n_img channels-last images. *done 0 (and
 * nothing written) when the weights are not all finite: the caller runs the direct kernel. The
 * transformed weights are packed once for the GEMM (16 panels sets) when they are the same every
 * run, as sconv_run's; the flag of finite weights is kept after them. */
static qr_status wino_run(qr_kctx *k, const qr_conv_geom *g, int64_t c, int64_t m, const float *x, const float *w,
                          const float *b, float *y, int64_t n_img, const qr_act *act, const float *res, int *done)
{
    *done = 0;
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    const int64_t pf = qr_sgemm_packed_size(kn, c, m);
    float *packed;
    if (qr_wino_packed_weights(k, kn, w, c, m, &packed) != QR_OK)
        return QR_ERR;
    if (!packed)
        return QR_OK;
    qr_wino p = {.C = c, .H = g->big[0], .W = g->big[1], .M = m, .OH = g->small[0], .OW = g->small[1],
                 .pt = g->pad_begin[0], .pl = g->pad_begin[1]};
    p.TH = (p.OH + 1) / 2, p.TW = (p.OW + 1) / 2;
    const int64_t tiles = n_img * p.TH * p.TW;
    int64_t tb = WINO_CHUNK_BYTES / (16 * (c + m) * (int64_t)sizeof(float));
    tb = tb < WINO_MIN_TILES ? WINO_MIN_TILES : tb; /* rows enough for the GEMM's tiles */
    int64_t chunks = (tiles + tb - 1) / tb;
    /* chunks whole on the threads when the 16 products' weights sit well in a core's L2 (each
     * thread reads them all): a chunk's transformed inputs and products then stay in the cache of
     * the core that made them (the Fashion-MNIST CNN's 16 -> 32 at batch 64, 3 chunks of 1046
     * tiles shared step by step, ran no faster on 2 threads than on 1); at least twice as many
     * chunks as threads, as small as WINO_MIN_TILES */
    const int slots = qr_pool_threads(k->pool);
    int whole = slots > 1 && 16 * pf * (int64_t)sizeof(float) <= WINO_WHOLE_WEIGHT_BYTES &&
                tiles >= 2 * slots * WINO_MIN_TILES;
    if (whole && chunks < 2 * slots)
        chunks = 2 * slots;
    tb = (tiles + chunks - 1) / chunks; /* chunks of equal size: each streams all the weights */
    float *v = qr_kwork(k, (whole ? slots : 1) * 16 * tb, c, sizeof(float), "Winograd inputs");
    float *mm = qr_kwork(k, (whole ? slots : 1) * 16 * tb, m, sizeof(float), "Winograd products");
    float *work = qr_kwork(k, slots, qr_sgemm_work(kn), sizeof(float), "packed GEMM panels");
    if (!v || !mm || !work) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    wino_job j = {.p = &p, .x = x, .mm = mm, .bias = b, .res = res, .v = v, .y = y, .act = act,
                  .ldv = tb * c, .ldm = tb * m, .kn = kn, .packed = packed, .pf = pf, .work = work};
    if (whole) {
        j.nt = tb; /* the chunk size; the last one's own count in wino_chunks */
        j.tiles = tiles;
        qr_parallel_for_slots(k->pool, (tiles + tb - 1) / tb, 1, wino_chunks, &j);
    } else {
        for (j.tb = 0; j.tb < tiles; j.tb += tb) {
            int64_t nt = tiles - j.tb < tb ? tiles - j.tb : tb;
            j.nt = nt;
            qr_parallel_for(k->pool, nt, 8, wino_in, &j);
            /* the 16 products whole on the threads, in one step: split one by one, each (a few us
             * at batch 1: ResNet-18's 64-channel layers, 112 tiles) cost two waits, and the layers
             * ran slower on 2 threads than on 1 */
            qr_parallel_for_slots(k->pool, 16, 1, wino_gemms, &j);
            qr_parallel_for(k->pool, nt, 8, wino_out, &j);
        }
    }
    qr_kcache_done(k, packed);
    *done = 1;
    return QR_OK;
}

/* ---- channels-last f32 ops of the layout pass (runtime/pass_nhwc_f32.c) ---- */

/* x [N, H, W, C] (x_nchw: x is [N, C, H, W]) as the NCHW shape the geometry reads. */
static void nchw_view(const qr_tensor *x, int x_nchw, qr_tensor *v)
{
    *v = *x;
    if (!x_nchw) {
        v->dims[1] = x->dims[3];
        v->dims[2] = x->dims[1];
        v->dims[3] = x->dims[2];
    }
}

static qr_status conv_nhwc_check(qr_kctx *k, qr_conv_geom *g, int64_t *c, int64_t *m, int64_t *group)
{
    const qr_tensor *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    if (x->dtype != QR_F32 || w->dtype != QR_F32 || (b && b->dtype != QR_F32) || x->ndim != 4 || w->ndim != 4)
        return QR_KERR(k, "takes f32 input and weights of rank 4");
    qr_tensor v;
    nchw_view(x, (int)qr_attr_i(k->node, "x_nchw", 0), &v);
    *group = qr_attr_i(k->node, "group", 1), *c = v.dims[1], *m = w->dims[0];
    if (!(*group == 1 && w->dims[1] == *c) && !(*group == *c && *m == *c && w->dims[1] == 1))
        return QR_KERR(k, "input of %lld channels, weights [%lld, %lld, ...] and group %lld: neither a group-1 nor "
                          "a depthwise convolution", (long long)*c, (long long)w->dims[0], (long long)w->dims[1],
                       (long long)*group);
    if (b && (b->ndim != 1 || b->dims[0] != *m))
        return QR_KERR(k, "bias must be a vector of %lld values", (long long)*m);
    return qr_conv_geom_init(k, &v, w->dims + 2, QR_WIN_CONV, g);
}

static qr_status conv_nhwc_infer(qr_kctx *k)
{
    qr_conv_geom g;
    int64_t c, m, group;
    if (conv_nhwc_check(k, &g, &c, &m, &group) != QR_OK)
        return QR_ERR;
    qr_tensor *y = k->out[0];
    y->dtype = QR_F32;
    y->ndim = 4;
    y->dims[0] = k->in[0]->dims[0];
    y->dims[1] = g.small[0];
    y->dims[2] = g.small[1];
    y->dims[3] = m;
    return QR_OK;
}

static double conv_nhwc_macs(const qr_kctx *k);

/* Multiply-adds under which a channels-last f32 convolution runs on one thread (a depthwise
 * one's count 8 times: its kernel does about an eighth as many a second, MobileNetV2's 7 x 7 x
 * 960 layer of 0.42 M gains from 2 threads), unless `--option f32-split=all` */
#define F32_SPLIT_MACS 3e6

static qr_status conv_nhwc_run(qr_kctx *k)
{
    qr_conv_geom g;
    int64_t c, m, group;
    if (conv_nhwc_check(k, &g, &c, &m, &group) != QR_OK)
        return QR_ERR;
    /* its kernels are AVX-512F's (sconv_avx512.c): the NHWC pass makes this op only where the CPU
     * has it, so elsewhere a graph that holds one is refused, not run into an illegal instruction */
    if (!qr_sconv_available())
        return QR_KERR(k, "the channels-last f32 convolution needs a CPU with AVX-512F (this one has none)");
    qr_sconv sp;
    if (!qr_sconv_plan(&sp, &g, c, m))
        return QR_KERR(k, "the window has too many runs for the channels-last kernel");
    const qr_tensor *b = k->n_in > 2 ? k->in[2] : NULL, *r = k->n_in > 3 ? k->in[3] : NULL;
    qr_sconv_epi epi = {.hswish = qr_attr_i(k->node, "hswish", 0) != 0,
                        .alpha = qr_attr_f(k->node, "hs_alpha", 0.2f), .beta = qr_attr_f(k->node, "hs_beta", 0.5f)};
    if (r) {
        const qr_tensor *y = k->out[0];
        if (r->dtype != QR_F32 || !qr_tensor_same_shape(r, y))
            return QR_KERR(k, "the added input must be f32 of the output's shape");
        epi.res = r->data;
    }
    int x_nhwc = !qr_attr_i(k->node, "x_nchw", 0);
    /* a layer of few MACs on this thread alone: split, its threads' steps cost more than they
     * share (the image and products crossing between the cores' caches: the Fashion-MNIST CNN's
     * 16 -> 32 on 14 x 14 by Winograd, 0.9 M, took 12 us on 1 thread and 25 on 2; the small
     * ResNet at batch 1, 1.2 to 2.4 M a layer, 0.158 ms on 2 against 0.140 on 1) */
    qr_pool *pool = k->pool;
    if (!qr_options_get()->f32_split_all && conv_nhwc_macs(k) * (group > 1 ? 8 : 1) < F32_SPLIT_MACS)
        k->pool = NULL;
    qr_status st = QR_OK;
    int done = 0;
    if (!epi.hswish && wino_takes(&g, c, m, group, x_nhwc))
        st = wino_run(k, &g, c, m, k->in[0]->data, k->in[1]->data, b ? b->data : NULL, k->out[0]->data,
                      k->in[0]->dims[0], k->act, epi.res, &done);
    if (st == QR_OK && !done)
        st = sconv_run(k, &sp, k->in[0]->data, k->in[1]->data, b ? b->data : NULL, k->out[0]->data,
                       k->in[0]->dims[0], k->act, group > 1, x_nhwc, 1, epi.res || epi.hswish ? &epi : NULL);
    k->pool = pool;
    return st;
}

static double conv_nhwc_macs(const qr_kctx *k)
{
    const qr_tensor *w = k->in[1], *y = k->out[0];
    return (double)qr_tensor_numel(y) * (double)(w->dims[1] * w->dims[2] * w->dims[3]);
}

static qr_status pool_nhwc_check(qr_kctx *k, qr_win_kind kind, qr_conv_geom *g)
{
    const qr_tensor *x = k->in[0];
    if (x->dtype != QR_F32 || x->ndim != 4)
        return QR_KERR(k, "takes f32 input of rank 4");
    qr_tensor v;
    nchw_view(x, 0, &v);
    return qr_conv_geom_init(k, &v, NULL, kind, g);
}

static qr_status maxpool_nhwc_infer(qr_kctx *k)
{
    qr_conv_geom g;
    if (pool_nhwc_check(k, QR_WIN_POOL, &g) != QR_OK)
        return QR_ERR;
    qr_tensor *y = k->out[0];
    qr_same_as(y, k->in[0]);
    y->dims[1] = g.small[0];
    y->dims[2] = g.small[1];
    return QR_OK;
}

typedef struct pool_nhwc_job {
    const qr_conv_geom *g;
    const float *x;
    float *y;
    int64_t c;
} pool_nhwc_job;

/* Tasks [t0, t1): (image, output row). */
static void maxpool_nhwc_rows(void *arg, int64_t t0, int64_t t1)
{
    const pool_nhwc_job *j = arg;
    const qr_conv_geom *g = j->g;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / g->small[0], oy = t % g->small[0];
        qr_sconv_maxpool_nhwc(g, j->c, j->x + n * g->big_n * j->c, j->y + n * g->small_n * j->c, oy, oy + 1);
    }
}

static qr_status maxpool_nhwc_run(qr_kctx *k)
{
    qr_conv_geom g;
    if (pool_nhwc_check(k, QR_WIN_POOL, &g) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    pool_nhwc_job j = {&g, x->data, k->out[0]->data, x->dims[3]};
    qr_parallel_for(k->pool, x->dims[0] * g.small[0], 4, maxpool_nhwc_rows, &j);
    return QR_OK;
}

static qr_status gap_nhwc_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    if (x->dtype != QR_F32 || x->ndim != 4)
        return QR_KERR(k, "takes f32 input of rank 4");
    qr_tensor *y = k->out[0];
    qr_same_as(y, x);
    y->dims[1] = y->dims[2] = 1;
    return QR_OK;
}

/* The mean of each channel of [N, H, W, C] as global_f32 takes it of a plane: the sum in double
 * over 8 chains (pixel p in chain p % 8, the last n % 8 pixels in chain 0), the chains added in
 * global_f32's order, divided once: its bits. */
static qr_status gap_nhwc_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    const int64_t N = x->dims[0], n = x->dims[1] * x->dims[2], C = x->dims[3], n8 = n / 8 * 8;
    double *s = qr_kwork(k, 8, C, sizeof(double), "channel sums");
    if (!s)
        return QR_ERR;
    const float *xd = x->data;
    float *yd = k->out[0]->data;
    for (int64_t b = 0; b < N && qr_sconv_available(); b++)
        qr_sconv_gap_nhwc(xd + b * n * C, yd + b * C, n, C, s);
    for (int64_t b = 0; b < N && !qr_sconv_available(); b++) {
        const float *xb = xd + b * n * C;
        for (int64_t i = 0; i < 8 * C; i++)
            s[i] = 0;
        for (int64_t p = 0; p < n; p++) {
            double *sl = s + (p < n8 ? p % 8 : 0) * C;
            const float *xp = xb + p * C;
            for (int64_t c = 0; c < C; c++)
                sl[c] += xp[c];
        }
        for (int64_t c = 0; c < C; c++) {
            double t = ((s[c] + s[C + c]) + (s[2 * C + c] + s[3 * C + c])) +
                       ((s[4 * C + c] + s[5 * C + c]) + (s[6 * C + c] + s[7 * C + c]));
            yd[b * C + c] = (float)(t / (double)n);
        }
    }
    return QR_OK;
}

/* its fourth input, a fused residual, has y's shape: read sample by sample */
static int conv_nhwc_samples(const qr_node *n, int j)
{
    return j == 3 ? QR_SAMPLES_EACH : qr_op_samples_window(n, j);
}

#define CONV_ATTRS "auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints"

const qr_op_def qr_ops_conv[] = {
    {"Conv", "", 2, 3, 1, 1, CONV_ATTRS, conv_infer, conv_run, 0, .ins = "X:f3+ W:f3+ B?:f1", .act = 1,
     .writes_all = qr_op_writes_all, .samples = qr_op_samples_window},
    {"ConvTranspose", "", 2, 3, 1, 1, CONV_ATTRS " output_padding:ints output_shape:ints", conv_tr_infer,
     conv_tr_run, 0, .ins = "X:f3+ W:f3+ B?:f1"},
    {"MaxPool", "", 1, 1, 1, 2,
     "auto_pad:s ceil_mode:i dilations:ints kernel_shape:ints pads:ints storage_order:i strides:ints",
     maxpool_infer, maxpool_run, 0, .ins = "X:3+", .writes_all = qr_op_writes_all,
     .samples = qr_op_samples_window},
    {"AveragePool", "", 1, 1, 1, 1,
     "auto_pad:s ceil_mode:i count_include_pad:i dilations:ints kernel_shape:ints pads:ints strides:ints",
     avgpool_infer, avgpool_run, 0, .ins = "X:3+", .samples = qr_op_samples_window},
    {"GlobalAveragePool", "", 1, 1, 1, 1, "", global_infer, gap_run, 0, .ins = "X:3+", .samples = qr_op_samples_window},
    {"GlobalMaxPool", "", 1, 1, 1, 1, "", global_infer, gmp_run, 0, .ins = "X:3+", .samples = qr_op_samples_window},
    {"MaxUnpool", "", 2, 3, 1, 1, "kernel_shape:ints pads:ints strides:ints", unpool_infer, unpool_run, 0, .ins = "X:3+ I:x output_shape?:x1"},
    /* the channels-last f32 graph's (runtime/pass_nhwc_f32.c): x and y [N, H, W, C] */
    /* + input R (a fused Add) after the bias, then the activation, then x * HardSigmoid(x) when
     * hswish (a fused HardSigmoid and Mul, its alpha and beta hs_alpha, hs_beta) */
    {"QrlConvF32Nhwc", "qrl", 2, 4, 1, 1, CONV_ATTRS " x_nchw:i hswish:i hs_alpha:f hs_beta:f", conv_nhwc_infer,
     conv_nhwc_run, 0, .ins = "X:f4 W:f4 B?:f1 R?:f4", .act = 1, .writes_all = qr_op_writes_all,
     .macs = conv_nhwc_macs, .samples = conv_nhwc_samples},
    {"QrlMaxPoolF32Nhwc", "qrl", 1, 1, 1, 1,
     "auto_pad:s ceil_mode:i dilations:ints kernel_shape:ints pads:ints storage_order:i strides:ints",
     maxpool_nhwc_infer, maxpool_nhwc_run, 0, .ins = "X:f4", .writes_all = qr_op_writes_all,
     .samples = qr_op_samples_window},
    {"QrlGlobalAveragePoolF32Nhwc", "qrl", 1, 1, 1, 1, "", gap_nhwc_infer, gap_nhwc_run, 0, .ins = "X:f4",
     .writes_all = qr_op_writes_all, .samples = qr_op_samples_window},
    {0},
};
