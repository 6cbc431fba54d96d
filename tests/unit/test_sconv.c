/* sconv (ops/sconv_avx512.c): f32 convolutions with the output channels in vectors, through the op
 * table, on ragged shapes (channels not multiples of 16, odd and one-pixel images, stride 2,
 * uneven pads, dilations, depthwise and other groups, K over a 1024 block, several 64-channel
 * panels, several images stacked in one pass), values of both signs, with and without bias and a
 * fused Relu or Clip:
 *   - Conv (NCHW) and QrlConvF32Nhwc (channels-last, and reading NCHW with x_nchw) against a
 *     float64 direct convolution, within the rounding bound of a float chain over K terms;
 *   - the same with sgemm=ref (the GEMM path, a second implementation) within the same bound;
 *   - 1 and 2 threads bit for bit, and the NHWC op bit for bit against the NCHW one and against
 *     fmaf chains from 0 in (ky, kx, c) order (sconv's), then + bias, then the activation;
 *   - the thin tiles that skip the zero border's taps (qr_sconv.edge) on those same checks, and a
 *     weight that is not finite, where they must not skip (NaN where the chain over every tap is);
 *   - QrlMaxPoolF32Nhwc against the definition (first maximum in window order, NaN never wins, of
 *     -0 and +0 the earlier) and QrlGlobalAveragePoolF32Nhwc against GlobalAveragePool, bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/sconv.h"
#include "parallel.h"
#include "testutil.h"

static qr_tensor run(const char *domain, const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin,
                     qr_pool *pool, const qr_act *act)
{
    return tu_op_run(domain, op, 17, attrs, nattr, in, nin, pool, act);
}

/* [N][C][H][W] <-> [N][H][W][C] */
static float *to_nhwc(const float *x, int64_t N, int64_t C, int64_t H, int64_t W)
{
    float *d = malloc(sizeof(float) * (size_t)(N * C * H * W) + 1);
    cr_assert(d);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < H * W; p++)
                d[(n * H * W + p) * C + c] = x[(n * C + c) * H * W + p];
    return d;
}

typedef struct cv {
    int64_t N, C, H, W, M, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, group;
    int bias, act; /* act: 0 none, 1 Relu, 2 Clip(-0.5, 0.7) */
} cv;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1)
{
    return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

static void check_conv(cv c)
{
    int64_t cg = c.C / c.group, mg = c.M / c.group, kk = c.kh * c.kw;
    int64_t OH = out_dim(c.H, c.kh, c.sh, c.dh, c.pt, c.pb), OW = out_dim(c.W, c.kw, c.sw, c.dw, c.pl, c.pr);
    int64_t nx = c.N * c.C * c.H * c.W, nw = c.M * cg * kk, ny = c.N * c.M * OH * OW;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw),
          *b = malloc(sizeof(float) * (size_t)c.M);
    double *ref = malloc(sizeof(double) * (size_t)ny), *mag = malloc(sizeof(double) * (size_t)ny);
    cr_assert(x && w && b && ref && mag);
    unsigned seed = (unsigned)(c.C * 131 + c.M * 7 + c.H);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 700.0f;
    for (int64_t i = 0; i < nw; i++)
        w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 1500.0f;
    for (int64_t m = 0; m < c.M; m++)
        b[m] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 50.0f;
    /* sconv's own chain, for its bits: fmaf from 0 over (ky, kx, c), the padding's products (w * 0)
     * included, then + bias, then the activation */
    float *chain = malloc(sizeof(float) * (size_t)ny);
    cr_assert(chain);
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t m = 0; m < c.M; m++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    float acc = 0;
                    int64_t g = m / mg;
                    for (int64_t ky = 0; ky < c.kh; ky++)
                        for (int64_t kx = 0; kx < c.kw; kx++)
                            for (int64_t ci = 0; ci < cg; ci++) {
                                int64_t iy = oy * c.sh - c.pt + ky * c.dh, ix = ox * c.sw - c.pl + kx * c.dw;
                                float xv = iy < 0 || iy >= c.H || ix < 0 || ix >= c.W
                                               ? 0.0f
                                               : x[((n * c.C + g * cg + ci) * c.H + iy) * c.W + ix];
                                acc = fmaf(w[((m * cg + ci) * c.kh + ky) * c.kw + kx], xv, acc);
                            }
                    if (c.bias)
                        acc += b[m];
                    chain[((n * c.M + m) * OH + oy) * OW + ox] = tu_act_ref(c.act, acc);
                }
    /* float64 reference and the sum of the terms' magnitudes (the rounding bound's scale) */
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t m = 0; m < c.M; m++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    double s = 0, a = 0;
                    int64_t g = m / mg;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ky = 0; ky < c.kh; ky++)
                            for (int64_t kx = 0; kx < c.kw; kx++) {
                                int64_t iy = oy * c.sh - c.pt + ky * c.dh, ix = ox * c.sw - c.pl + kx * c.dw;
                                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W)
                                    continue;
                                double t = (double)w[((m * cg + ci) * c.kh + ky) * c.kw + kx] *
                                           x[((n * c.C + g * cg + ci) * c.H + iy) * c.W + ix];
                                s += t, a += fabs(t);
                            }
                    int64_t o = ((n * c.M + m) * OH + oy) * OW + ox;
                    ref[o] = s + (c.bias ? b[m] : 0);
                    mag[o] = a + (c.bias ? fabs(b[m]) : 0);
                }
    int64_t ks[2] = {c.kh, c.kw}, st[2] = {c.sh, c.sw}, dl[2] = {c.dh, c.dw}, pads[4] = {c.pt, c.pl, c.pb, c.pr};
    qr_attr a[6] = {
        {.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
        {.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = dl},
        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
        {.name = "group", .kind = QR_ATTR_INT, .i = c.group},
        {.name = "x_nchw", .kind = QR_ATTR_INT, .i = 1},
    };
    qr_act relu = {.relu = 1}, clip = {.relu = 0, .lo = -0.5f, .hi = 0.7f};
    const qr_act *act = c.act == 1 ? &relu : c.act == 2 ? &clip : NULL;
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {c.N, c.C, c.H, c.W}, .data = x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {c.M, cg, c.kh, c.kw}, .data = w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {c.M}, .data = b};
    float *xh = to_nhwc(x, c.N, c.C, c.H, c.W);
    qr_tensor txh = {.dtype = QR_F32, .ndim = 4, .dims = {c.N, c.H, c.W, c.C}, .data = xh};
    const qr_tensor *in[3] = {&tx, &tw, &tb}, *inh[3] = {&txh, &tw, &tb};
    int nin = c.bias ? 3 : 2, dw = c.group == c.C && c.M == c.C && c.group > 1;
    qr_pool *pool2 = qr_pool_new(2);
    tu_option("f32-split", "all"); /* the small layers split too (conv.c's F32_SPLIT_MACS) */
    tu_option("winograd", "0"); /* the direct kernel's chains (test_wino tests Winograd's) */
    /* runs: NCHW 1 and 2 threads, NHWC 1 and 2 threads, NHWC from NCHW, the GEMM path (sgemm=ref) */
    qr_tensor y[6];
    y[0] = run("", "Conv", a, 5, in, nin, NULL, act);
    y[1] = run("", "Conv", a, 5, in, nin, pool2, act);
    int nhwc = (c.group == 1 || dw) && qr_sconv_available(); /* the NHWC op runs on AVX-512F only */
    if (nhwc) {
        y[2] = run("qrl", "QrlConvF32Nhwc", a, 5, inh, nin, NULL, act);
        y[3] = run("qrl", "QrlConvF32Nhwc", a, 5, inh, nin, pool2, act);
        y[4] = run("qrl", "QrlConvF32Nhwc", a, 6, in, nin, NULL, act);
        cr_assert(y[2].dims[1] == OH && y[2].dims[2] == OW && y[2].dims[3] == c.M);
    }
    tu_option("sgemm", "ref");
    y[5] = run("", "Conv", a, 5, in, nin, NULL, act);
    tu_option("sgemm", "");
    cr_assert(y[0].dims[2] == OH && y[0].dims[3] == OW);
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t m = 0; m < c.M; m++)
            for (int64_t p = 0; p < OH * OW; p++) {
                int64_t o = (n * c.M + m) * OH * OW + p, oh = (n * OH * OW + p) * c.M + m;
                /* a chain of K float roundings, then the bias and the activation (which only clamp) */
                double tol = (double)(cg * kk + 2) * 0x1p-23 * mag[o] + 1e-30;
                float want = tu_act_ref(c.act, (float)ref[o]);
                const float *y0 = y[0].data, *y1 = y[1].data, *y5 = y[5].data;
                cr_assert(fabs(y0[o] - want) <= tol,
                          "C%lld M%lld %lldx%lld k%lldx%lld s%lld d%lld g%lld: out %lld: %.9g vs %.9g (tol %g)",
                          (long long)c.C, (long long)c.M, (long long)c.H, (long long)c.W, (long long)c.kh,
                          (long long)c.kw, (long long)c.sh, (long long)c.dh, (long long)c.group, (long long)o, y0[o],
                          want, tol);
                cr_assert(fabs(y5[o] - want) <= tol, "sgemm=ref: out %lld: %.9g vs %.9g", (long long)o, y5[o], want);
                cr_assert(memcmp(&y0[o], &y1[o], sizeof(float)) == 0, "2 threads: out %lld: %.9g vs %.9g",
                          (long long)o, y1[o], y0[o]);
                if (!nhwc)
                    continue;
                const float *y2 = y[2].data, *y3 = y[3].data, *y4 = y[4].data;
                cr_assert(fabs(y2[oh] - want) <= tol, "NHWC: out %lld: %.9g vs %.9g", (long long)o, y2[oh], want);
                cr_assert(memcmp(&y2[oh], &y3[oh], sizeof(float)) == 0, "NHWC, 2 threads: out %lld", (long long)o);
                cr_assert(memcmp(&y2[oh], &y4[oh], sizeof(float)) == 0, "NHWC from NCHW: out %lld", (long long)o);
                if (qr_sconv_available()) { /* both sconv's chains */
                    cr_assert(memcmp(&y2[oh], &chain[o], sizeof(float)) == 0, "NHWC against the chain: out %lld: %.9g vs %.9g",
                              (long long)o, y2[oh], chain[o]);
                    /* the NCHW Conv runs on sconv too where K is at least 64 (conv.c's sconv_takes; the
                     * GEMM path below it, the thin layers' other order) */
                    if (dw || cg * kk >= 64)
                        cr_assert(memcmp(&y2[oh], &y0[o], sizeof(float)) == 0,
                                  "NHWC against NCHW: out %lld: %.9g vs %.9g", (long long)o, y2[oh], y0[o]);
                }
            }
    for (int i = 0; i < 6; i++)
        if (nhwc || i < 2 || i == 5)
            qr_tensor_free(&y[i]);
    qr_pool_free(pool2);
    free(xh);
    free(x);
    free(w);
    free(b);
    free(ref);
    free(mag);
    free(chain);
}

Test(sconv, conv_matches_float64_on_ragged_shapes)
{
    cr_log_info("sconv (AVX-512F): %s", qr_sconv_available() ? "yes" : "no (the op's GEMM path only)");
    /*            N  C   H   W   M  kh kw sh sw dh dw pt pl pb pr group bias act */
    check_conv((cv){2, 17, 9, 13, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});   /* odd image, ragged C and M */
    check_conv((cv){1, 3, 23, 21, 70, 7, 7, 2, 2, 1, 1, 3, 3, 2, 3, 1, 1, 0});   /* a stem: C 3, uneven pads */
    check_conv((cv){1, 130, 7, 7, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2});  /* K 1170: two blocks, 3 panels */
    check_conv((cv){1, 33, 11, 10, 40, 3, 3, 2, 2, 2, 2, 2, 1, 2, 0, 1, 1, 0});  /* dilation 2, stride 2 */
    check_conv((cv){2, 96, 5, 5, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0});    /* 1x1 on a small image */
    check_conv((cv){1, 64, 1, 1, 150, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1});   /* 1x1 on one pixel (SE) */
    check_conv((cv){1, 80, 9, 8, 16, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0, 0});    /* 1x1 at stride 2 */
    check_conv((cv){1, 20, 6, 17, 36, 2, 5, 1, 2, 3, 1, 0, 2, 1, 2, 1, 1, 2});   /* 2x5, row dilation 3 */
    /* thin first layers (C 1 or 3 at stride 1: each row in tiles of consecutive pixels): rows of 29
     * (tiles 10, 10, 9), 7 and 1 pixels, V 1 to 4, a ragged panel, dilation, uneven pads */
    check_conv((cv){2, 1, 13, 29, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 3, 9, 29, 40, 3, 3, 1, 1, 1, 1, 1, 0, 2, 1, 1, 1, 2});
    check_conv((cv){1, 1, 12, 11, 70, 5, 5, 1, 1, 2, 2, 4, 3, 4, 5, 1, 0, 0});
    check_conv((cv){2, 3, 6, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 3, 5, 1, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    /* one vector of channels in the bench models' row lengths: rows of 28 (tiles of 10, 9, 9: the
     * Fashion-MNIST stem's), 32 (11, 11, 10: the small ResNet's), 31 (11, 10, 10) and 13 (7, 6, with
     * a ragged mask of 13 channels), C 16 as well (pixels 16 floats apart) */
    check_conv((cv){2, 1, 5, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 3, 4, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2});
    check_conv((cv){1, 3, 3, 33, 13, 3, 3, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0});
    check_conv((cv){2, 16, 4, 31, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 1, 3, 13, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    /* and pixels 16 or 32 floats apart in small layers of one or two vectors: C 16 at stride 1 and
     * 2, C 32 at stride 1 (a ragged M, rows of 30, 20 and 13 pixels, a 1 x 1 at stride 2) */
    check_conv((cv){2, 16, 9, 30, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 16, 16, 40, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0});
    check_conv((cv){1, 32, 7, 13, 16, 3, 3, 1, 1, 1, 1, 2, 1, 0, 1, 1, 0, 2});
    /* images stacked (NHWC, several images, packed weights over 512 KB: conv.c's STACK_WEIGHT_BYTES):
     * a block's rows and tiles cross from one image into the next. 3 images of 7 x 5 (K 1170 in two
     * blocks, 2 panels), stride 2 with dilation and uneven pads, the thin tiles (C 3, 15 panels),
     * and images of 828 KB (C 230, 28 x 28) in groups of 2 and 1 (STACK_IMAGE_BYTES) */
    check_conv((cv){3, 130, 7, 5, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2});
    check_conv((cv){3, 150, 9, 8, 70, 3, 3, 2, 2, 2, 1, 2, 1, 0, 2, 1, 1, 1});
    check_conv((cv){2, 3, 5, 6, 900, 7, 7, 1, 1, 1, 1, 3, 3, 3, 2, 1, 1, 0});
    check_conv((cv){3, 230, 28, 28, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){2, 70, 13, 11, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 70, 1, 2}); /* depthwise, 2 panels */
    check_conv((cv){1, 24, 14, 15, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 24, 0, 1}); /* depthwise stride 2 */
    check_conv((cv){1, 70, 40, 23, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 70, 1, 1}); /* depthwise, 2 panels x 4 row blocks */
    check_conv((cv){1, 16, 9, 9, 16, 5, 5, 1, 1, 2, 2, 4, 4, 4, 4, 16, 1, 0});   /* depthwise 5x5, dilation 2 */
    /* depthwise with whole vectors of channels: small images copied with their border, */
    check_conv((cv){1, 32, 13, 12, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 32, 1, 2});     /* stride 2 */
    check_conv((cv){2, 144, 11, 9, 144, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 144, 1, 1});  /* 3 panels */
    check_conv((cv){1, 48, 7, 10, 48, 3, 3, 1, 2, 2, 1, 0, 2, 2, 1, 48, 0, 0});     /* uneven pads, dilation */
    check_conv((cv){1, 64, 3, 5, 64, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 64, 1, 0});      /* window past the image */
    /* and over 512 KB (conv.c's DW_DIRECT_BYTES; output planes of at most 1024, where the NCHW
     * Conv runs on sconv too): NHWC read in place, windows leaving it on each side */
    check_conv((cv){1, 64, 48, 44, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 64, 1, 2});
    check_conv((cv){2, 144, 33, 29, 144, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 144, 1, 1});
    check_conv((cv){1, 96, 40, 35, 96, 3, 3, 1, 2, 2, 1, 0, 2, 2, 1, 96, 0, 0});
    check_conv((cv){1, 192, 3, 230, 192, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 192, 1, 0});
    check_conv((cv){1, 40, 8, 9, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1});    /* group 2: the GEMM path */
    /* the thin tiles without the border's taps (qr_sconv.edge): the Fashion-MNIST CNN's 16 -> 32 on
     * 14 x 14 and 32 -> 32 on 7 x 7, a ragged M with uneven pads (two border columns on the left,
     * none on the right; top rows with one and two kernel rows outside), C 16 at stride 2 (pixels
     * 32 floats apart) with a dilated kernel row (a run of K per tap), odd widths, a row of 3
     * pixels (one inside), a 5 x 5 kernel with pads of 2 (four border columns, each its own
     * pack), no bias and no act */
    check_conv((cv){3, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){2, 32, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){1, 16, 9, 11, 29, 3, 3, 1, 1, 1, 1, 2, 2, 0, 0, 1, 1, 2});
    check_conv((cv){2, 16, 11, 13, 20, 3, 3, 2, 2, 1, 2, 1, 2, 0, 1, 1, 0, 1});
    check_conv((cv){1, 32, 5, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    check_conv((cv){2, 16, 9, 17, 16, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 1, 0, 0});
    /* pixels 64 floats apart (C 64 at stride 1, C 32 at stride 2) in layers whose weights stay in
     * L2: the thin tiles, with the border's taps skipped where the layer has a border. The small
     * ResNet's 64 -> 64 on 8 x 8 (4 vectors, tiles of 6 inside, images stacked in a block) and its
     * 32 -> 64 at stride 2 (one border column), a ragged M over two panels (64 + 6: a 1-vector
     * panel) with uneven pads and odd sizes, a ragged 4th vector (M 50), a 1 x 1 at stride 2 (no
     * border: the thin tiles without edges), a row dilation */
    check_conv((cv){3, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){2, 32, 16, 16, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    check_conv((cv){2, 64, 9, 11, 70, 3, 3, 1, 1, 1, 1, 2, 1, 0, 2, 1, 0, 2});
    check_conv((cv){1, 32, 13, 15, 50, 3, 3, 2, 2, 1, 1, 1, 0, 1, 1, 1, 1, 1});
    check_conv((cv){2, 32, 9, 13, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0});
    check_conv((cv){1, 64, 10, 7, 33, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 1, 1, 2});
    /* depthwise 3-wide undilated windows at stride 1 and 2 (the row tile sharing each kernel row's
     * inputs): V 1 to 4 with ragged channels (24, 40, 72: a masked last vector), copied with their
     * border or (over 512 KB, whole vectors) read in place, odd widths so that rows end in a
     * partial tile, uneven pads, a row dilation, a 3 x 3 with a column dilation (the general tile) */
    check_conv((cv){2, 24, 11, 13, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24, 1, 1});
    check_conv((cv){1, 40, 15, 17, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 40, 1, 2});
    check_conv((cv){2, 72, 9, 21, 72, 3, 3, 1, 2, 1, 1, 0, 1, 2, 0, 72, 0, 0});
    check_conv((cv){1, 48, 12, 19, 48, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 48, 1, 1});
    check_conv((cv){1, 96, 41, 37, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 96, 1, 2});
    check_conv((cv){1, 128, 33, 31, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 128, 1, 1});
    check_conv((cv){1, 48, 60, 50, 48, 3, 3, 2, 2, 1, 1, 0, 1, 1, 0, 48, 0, 0});
    check_conv((cv){1, 32, 10, 14, 32, 3, 3, 1, 1, 1, 2, 1, 2, 1, 2, 32, 1, 1});
    /* batches of at least twice the threads' images: each image (or stacked group) whole on one
     * thread (conv.c's sconv_units), in its slot's padded copy: 5 images of a 3 x 3 (odd, so the
     * threads' shares differ), 4 of a 1 x 1 read in place, 6 depthwise at stride 2, and 7 images
     * of 903 KB under weights of 532 KB stacked in pairs (4 passes, the last of one image) */
    check_conv((cv){5, 16, 9, 10, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    check_conv((cv){4, 32, 7, 9, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
    check_conv((cv){6, 48, 9, 11, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 48, 1, 1});
    check_conv((cv){7, 512, 19, 19, 260, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0});
}

/* Stop 51's MobileNetV2 paths, each against float64, the fmaf chain from 0 bit for bit, 2 threads
 * and NHWC from NCHW: RGB stems at stride 2 (pixels 6 floats apart: the XS-6 thin tiles) with one
 * and two vectors of channels, ragged (20, 40) and whole (32), odd sizes and uneven pads; 1 x 1
 * layers of 256 input channels or more (K blocks of 128, the chain through memory between them):
 * C 300 (blocks 128, 128, 44) into M 100 (panels 64 + 36, row-block major) on 9 x 7, C 256 into
 * M 24 over 3 images, C 320 at stride 2 into M 130 (3 panels), C 960 into M 70 with Clip; and
 * small-weight layers of several panels run row-block major: a 16 -> 96 1 x 1 on 41 x 37 (several
 * row blocks) and a 24 -> 150 3 x 3. */
Test(sconv, mobilenet_stems_blocked_1x1_and_row_major_panels)
{
    /*            N  C   H   W   M  kh kw sh sw dh dw pt pl pb pr group bias act */
    check_conv((cv){1, 3, 31, 29, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2});
    check_conv((cv){2, 3, 15, 17, 20, 3, 3, 2, 2, 1, 1, 1, 0, 0, 1, 1, 0, 1});
    check_conv((cv){1, 3, 24, 25, 40, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 1, 0});
    check_conv((cv){1, 300, 9, 7, 100, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
    check_conv((cv){3, 256, 5, 6, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0});
    check_conv((cv){1, 320, 9, 11, 130, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0, 1});
    check_conv((cv){1, 960, 7, 7, 70, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
    check_conv((cv){1, 16, 41, 37, 96, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2});
    check_conv((cv){2, 24, 13, 11, 150, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
}

/* Images on the threads with a fused residual Add and Relu (the epilogue's residual is each
 * image's own): every output the fmaf chain from 0 over the taps in (ky, kx, c) order, + bias,
 * + the residual, then Relu, bit for bit, on 1 and 2 threads; a group-1 3 x 3 over 6 images, a
 * depthwise one over 5 and a 1 x 1 read in place over 4. */
/* The thin tiles without the border's taps read a channels-last input in place (conv.c's
 * x_direct, sconv_avx512.c's thin_edges_direct: no padded copy), each border column's rows in runs
 * of the same kernel rows inside: check_conv's NHWC runs then take it, its "NHWC from NCHW" run the
 * padded copy, bit for bit with it, the fmaf chain and 2 threads. C 16 at stride 2 with uneven pads
 * (the small ResNet's 16 -> 32), C 64 at stride 1 in two panels (64 and a ragged 6: the 64 -> 64),
 * rows and a column without a kernel row or column inside (pads of 3 on a 3 x 3), dilation 2 (4
 * border columns), 5 images (on the threads whole: conv.c's sconv_units) of C 32; every image at
 * least conv.c's DIRECT_MIN_IMAGE_BYTES (8 KB). */
Test(sconv, thin_tiles_read_the_channels_last_image_in_place)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    /*            N  C   H   W   M  kh kw sh sw dh dw pt pl pb pr group bias act */
    check_conv((cv){2, 16, 11, 13, 24, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0, 1, 1, 1});
    check_conv((cv){2, 64, 8, 8, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    check_conv((cv){1, 16, 3, 45, 16, 3, 3, 1, 1, 1, 1, 3, 1, 3, 3, 1, 1, 2});
    check_conv((cv){1, 16, 12, 12, 32, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 0, 1});
    check_conv((cv){5, 32, 6, 12, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
}

Test(sconv, images_on_threads_add_their_own_residual)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    /* N, C, H, W, M, K, group */
    const int64_t cs[3][7] = {{6, 16, 9, 10, 20, 3, 1}, {5, 32, 8, 7, 32, 3, 32}, {4, 32, 6, 9, 48, 1, 1}};
    qr_pool *pool2 = qr_pool_new(2);
    tu_option("f32-split", "all"); /* the small layers split too (conv.c's F32_SPLIT_MACS) */
    tu_option("winograd", "0");
    for (int ci = 0; ci < 3; ci++) {
        const int64_t N = cs[ci][0], C = cs[ci][1], H = cs[ci][2], W = cs[ci][3], M = cs[ci][4], K = cs[ci][5],
                      G = cs[ci][6], cg = C / G, pad = K / 2, ny = N * H * W * M;
        float *x = malloc(sizeof(float) * (size_t)(N * H * W * C)), *w = malloc(sizeof(float) * (size_t)(M * cg * K * K));
        float *b = malloc(sizeof(float) * (size_t)M), *r = malloc(sizeof(float) * (size_t)ny);
        cr_assert(x && w && b && r);
        unsigned seed = 23 + (unsigned)ci;
        for (int64_t i = 0; i < N * H * W * C; i++) /* NHWC */
            x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 700.0f;
        for (int64_t i = 0; i < M * cg * K * K; i++)
            w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 1500.0f;
        for (int64_t m = 0; m < M; m++)
            b[m] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 50.0f;
        for (int64_t i = 0; i < ny; i++)
            r[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 300.0f;
        int64_t ks[2] = {K, K}, pads[4] = {pad, pad, pad, pad};
        qr_attr a[3] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                        {.name = "group", .kind = QR_ATTR_INT, .i = G}};
        qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, H, W, C}, .data = x};
        qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {M, cg, K, K}, .data = w};
        qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {M}, .data = b};
        qr_tensor tr = {.dtype = QR_F32, .ndim = 4, .dims = {N, H, W, M}, .data = r};
        const qr_tensor *in[4] = {&tx, &tw, &tb, &tr};
        qr_act relu = {.relu = 1};
        qr_tensor y1 = run("qrl", "QrlConvF32Nhwc", a, 3, in, 4, NULL, &relu);
        qr_tensor y2 = run("qrl", "QrlConvF32Nhwc", a, 3, in, 4, pool2, &relu);
        cr_assert(qr_tensor_numel(&y1) == ny && qr_tensor_numel(&y2) == ny);
        const float *o1 = y1.data, *o2 = y2.data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t oy = 0; oy < H; oy++)
                for (int64_t ox = 0; ox < W; ox++)
                    for (int64_t m = 0; m < M; m++) {
                        float acc = 0;
                        int64_t c0 = G > 1 ? m : 0;
                        for (int64_t ky = 0; ky < K; ky++)
                            for (int64_t kx = 0; kx < K; kx++)
                                for (int64_t c = c0; c < c0 + cg; c++) {
                                    int64_t iy = oy - pad + ky, ix = ox - pad + kx;
                                    float xv = iy < 0 || iy >= H || ix < 0 || ix >= W
                                                   ? 0.0f
                                                   : x[((n * H + iy) * W + ix) * C + c];
                                    acc = fmaf(w[((m * cg + c - c0) * K + ky) * K + kx], xv, acc);
                                }
                        int64_t o = ((n * H + oy) * W + ox) * M + m;
                        acc += b[m];
                        acc += r[o];
                        acc = acc > 0 ? acc : 0;
                        cr_assert(memcmp(&acc, &o1[o], sizeof acc) == 0,
                                  "case %d: image %lld m %lld (%lld, %lld): %.9g vs the chain's %.9g", ci, (long long)n,
                                  (long long)m, (long long)oy, (long long)ox, o1[o], acc);
                        cr_assert(memcmp(&o1[o], &o2[o], sizeof(float)) == 0, "case %d, 2 threads: image %lld m %lld",
                                  ci, (long long)n, (long long)m);
                    }
        qr_tensor_free(&y1), qr_tensor_free(&y2);
        free(x), free(w), free(b), free(r);
    }
    tu_option("winograd", "");
    qr_pool_free(pool2);
}

/* A weight that is not finite: the border's products are inf * 0 = NaN, so the thin tiles must
 * not skip them (qr_sconv.edge's flag): each output NaN where the fmaf chain over every tap is, and
 * 1 and 2 threads the same bits. */
Test(sconv, a_weight_not_finite_keeps_the_borders_nan)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    const float bad[2] = {INFINITY, -INFINITY};
    for (int bi = 0; bi < 2; bi++) {
        const int64_t C = 16, H = 6, W = 7, M = 20, K = 3, OH = 6, OW = 7;
        float x[16 * 6 * 7], w[20 * 16 * 9], b[20];
        unsigned seed = 11;
        for (int64_t i = 0; i < C * H * W; i++)
            x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 700.0f;
        for (int64_t i = 0; i < M * C * K * K; i++)
            w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 1500.0f;
        for (int64_t m = 0; m < M; m++)
            b[m] = (float)m / 8.0f - 1.0f;
        w[(3 * C + 5) * 9 + 0] = bad[bi]; /* output channel 3, input channel 5, tap (0, 0) */
        float *xh = to_nhwc(x, 1, C, H, W);
        int64_t ks[2] = {3, 3}, pads[4] = {1, 1, 1, 1};
        qr_attr a[2] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads}};
        qr_tensor txh = {.dtype = QR_F32, .ndim = 4, .dims = {1, H, W, C}, .data = xh};
        qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {M, C, K, K}, .data = w};
        qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {M}, .data = b};
        const qr_tensor *in[3] = {&txh, &tw, &tb};
        qr_pool *pool2 = qr_pool_new(2);
        tu_option("f32-split", "all");
        qr_tensor y1 = run("qrl", "QrlConvF32Nhwc", a, 2, in, 3, NULL, NULL);
        qr_tensor y2 = run("qrl", "QrlConvF32Nhwc", a, 2, in, 3, pool2, NULL);
        const float *o1 = y1.data, *o2 = y2.data;
        int nans = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    float acc = 0;
                    for (int64_t ky = 0; ky < K; ky++)
                        for (int64_t kx = 0; kx < K; kx++)
                            for (int64_t c = 0; c < C; c++) {
                                int64_t iy = oy - 1 + ky, ix = ox - 1 + kx;
                                float xv = iy < 0 || iy >= H || ix < 0 || ix >= W ? 0.0f : x[(c * H + iy) * W + ix];
                                acc = fmaf(w[((m * C + c) * K + ky) * K + kx], xv, acc);
                            }
                    acc += b[m];
                    int64_t o = (oy * OW + ox) * M + m;
                    nans += isnan(acc);
                    cr_assert(isnan(acc) ? isnan(o1[o]) : memcmp(&acc, &o1[o], sizeof acc) == 0,
                              "w %g: m %lld (%lld, %lld): %.9g vs the chain's %.9g", bad[bi], (long long)m,
                              (long long)oy, (long long)ox, o1[o], acc);
                    cr_assert(memcmp(&o1[o], &o2[o], sizeof(float)) == 0, "2 threads: m %lld (%lld, %lld)",
                              (long long)m, (long long)oy, (long long)ox);
                }
        /* channel 3's top row and left column: the tap (0, 0) on the border */
        cr_assert_eq(nans, OH + OW - 1, "NaN outputs: %d", nans);
        qr_tensor_free(&y1);
        qr_tensor_free(&y2);
        qr_pool_free(pool2);
        free(xh);
    }
}

Test(sconv, maxpool_nhwc_matches_the_definition_bit_for_bit)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    /* 70: a full block of 64 channels and a ragged one; 5, 113 (a last mask of 1..48 and of 49..63
     * channels) and 128 (two full blocks, no tail); 16, 40 and 96 (a last block of one whole
     * vector, of three vectors, and a full block then two whole vectors: the tails' own kernels);
     * 16, 32, 96 and 128 take the 2 x 2 windows' row kernel (maxpool_row_2x2) at strides 1, 2 and 3,
     * with a border of padding whose windows stay on the generic path */
    const int64_t Cs[] = {70, 5, 113, 128, 16, 40, 96, 32};
    for (size_t cj = 0; cj < sizeof Cs / sizeof Cs[0]; cj++) {
        const int64_t N = 2, C = Cs[cj], H = 13, W = 12;
        struct {
            int64_t k, s, p;
        } cases[] = {{3, 2, 1}, {2, 2, 0}, {3, 1, 1}, {2, 1, 0}, {2, 2, 1}, {2, 3, 1}};
        float *x = malloc(sizeof(float) * (size_t)(N * C * H * W));
        cr_assert(x);
        unsigned seed = 5;
        for (int64_t i = 0; i < N * C * H * W; i++) {
            unsigned v = tu_lcg(&seed) % 40;
            x[i] = v == 0 ? NAN : v == 1 ? -0.0f : v == 2 ? 0.0f : v == 3 ? -INFINITY : (float)((int)v - 20) / 4.0f;
        }
        qr_pool *pool2 = qr_pool_new(2);
        tu_option("f32-split", "all");
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int64_t k = cases[ci].k, s = cases[ci].s, p = cases[ci].p;
            int64_t ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {p, p, p, p};
            qr_attr a[3] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                            {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                            {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads}};
            qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, H, W, C}, .data = x}; /* read as NHWC */
            const qr_tensor *in[1] = {&tx};
            int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
            for (int t = 0; t < 2; t++) {
                qr_tensor y = run("qrl", "QrlMaxPoolF32Nhwc", a, 3, in, 1, t ? pool2 : NULL, NULL);
                cr_assert(y.dims[1] == OH && y.dims[2] == OW && y.dims[3] == C);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t oy = 0; oy < OH; oy++)
                        for (int64_t ox = 0; ox < OW; ox++)
                            for (int64_t c = 0; c < C; c++) {
                                float m = -INFINITY;
                                for (int64_t ky = 0; ky < k; ky++)
                                    for (int64_t kx = 0; kx < k; kx++) {
                                        int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
                                        float v = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[((n * H + iy) * W + ix) * C + c]
                                                                                         : -INFINITY;
                                        if (v > m)
                                            m = v;
                                    }
                                float got = ((float *)y.data)[((n * OH + oy) * OW + ox) * C + c];
                                cr_assert(memcmp(&got, &m, sizeof m) == 0, "C %lld, %lldx%lld/%lld, %d threads: (%lld,%lld,%lld,%lld): %g vs %g",
                                          (long long)C, (long long)k, (long long)k, (long long)s, t + 1, (long long)n, (long long)oy,
                                          (long long)ox, (long long)c, got, m);
                            }
                qr_tensor_free(&y);
            }
        }
        qr_pool_free(pool2);
        free(x);
    }
}

Test(sconv, global_average_pool_nhwc_gives_the_nchw_bits)
{
    const int64_t N = 2, C = 37;
    const int64_t sizes[][2] = {{7, 7}, {1, 1}, {3, 5}, {14, 14}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t H = sizes[si][0], W = sizes[si][1], nx = N * C * H * W;
        float *x = malloc(sizeof(float) * (size_t)nx);
        cr_assert(x);
        unsigned seed = 9;
        for (int64_t i = 0; i < nx; i++)
            x[i] = (float)((int)(tu_lcg(&seed) % 20001) - 10000) / 3.0f;
        /* channel 0: 2^60 in chain 1, -2^60 on the last pixel (chain 0's when n % 8 != 0): the
         * double sums drop the other values of the chain that holds both, so the pixels' chains
         * show in the bits */
        for (int64_t b = 0; b < N && H * W > 8; b++) {
            x[b * C * H * W + 1] = 0x1p60f;
            x[b * C * H * W + H * W - 1] = -0x1p60f;
        }
        float *xh = to_nhwc(x, N, C, H, W);
        qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x};
        qr_tensor txh = {.dtype = QR_F32, .ndim = 4, .dims = {N, H, W, C}, .data = xh};
        const qr_tensor *in[1] = {&tx}, *inh[1] = {&txh};
        qr_tensor y = run("", "GlobalAveragePool", NULL, 0, in, 1, NULL, NULL);
        qr_tensor yh = run("qrl", "QrlGlobalAveragePoolF32Nhwc", NULL, 0, inh, 1, NULL, NULL);
        cr_assert(yh.dims[1] == 1 && yh.dims[2] == 1 && yh.dims[3] == C);
        cr_assert(memcmp(y.data, yh.data, sizeof(float) * (size_t)(N * C)) == 0, "%lldx%lld", (long long)H,
                  (long long)W);
        qr_tensor_free(&y);
        qr_tensor_free(&yh);
        free(xh);
        free(x);
    }
}
