/* f32 sliding-window kernels (ops/window_avx512.c: depthwise Conv and MaxPool over 2-D planes in
 * place; ops/window_avx2.c: the depthwise runs' sums without AVX-512) through the op table, bit for
 * bit against the definition summed or compared in the kernels' order, on the CPU's path (AVX-512,
 * AVX2: the depthwise sums and MaxPool) and the portable one (window=portable), serial and on two threads. Planes wider than 16 and taller than 4 rows reach the
 * kernels' interior blocks (plain loads) as well as their masked borders. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/window_f32.h"
#include "parallel.h"
#include "testutil.h"

static qr_tensor run(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin, qr_pool *pool)
{
    return tu_op_run("", op, 17, attrs, nattr, in, nin, pool, NULL);
}

/* The window geometry of one case: kernel, strides, dilations, pads (top, left, bottom, right). */
typedef struct win {
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int ceil;
} win;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int ceil)
{
    int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= in + p0) /* the last window must start inside the input or its left pad */
        o--;
    return o;
}

static void set_attrs(const win *w, qr_attr *a, int64_t *ks, int64_t *st, int64_t *dl, int64_t *pads)
{
    ks[0] = w->kh, ks[1] = w->kw, st[0] = w->sh, st[1] = w->sw, dl[0] = w->dh, dl[1] = w->dw;
    pads[0] = w->pt, pads[1] = w->pl, pads[2] = w->pb, pads[3] = w->pr;
    a[0] = (qr_attr){.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks};
    a[1] = (qr_attr){.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st};
    a[2] = (qr_attr){.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = dl};
    a[3] = (qr_attr){.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads};
}

/* Both paths (the CPU's: AVX-512, else AVX2 for the depthwise sums; portable), serial and on two
 * threads: every output's bits. */
static const char *const paths[2] = {"the CPU's", "portable"};

static void check_maxpool(int64_t N, int64_t C, int64_t H, int64_t W, win w)
{
    int64_t nx = N * C * H * W;
    float *x = malloc(sizeof(float) * (size_t)nx);
    cr_assert(x);
    unsigned seed = 77;
    for (int64_t i = 0; i < nx; i++) {
        unsigned v = tu_lcg(&seed) % 40;
        /* NaN, -0, +0, -inf and a few ties among values of both signs */
        x[i] = v == 0 ? NAN : v == 1 ? -0.0f : v == 2 ? 0.0f : v == 3 ? -INFINITY : (float)((int)v - 20) / 4.0f;
    }
    int64_t ks[2], st[2], dl[2], pads[4];
    qr_attr a[5];
    set_attrs(&w, a, ks, st, dl, pads);
    a[4] = (qr_attr){.name = "ceil_mode", .kind = QR_ATTR_INT, .i = w.ceil};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x};
    const qr_tensor *in[1] = {&tx};
    int64_t OH = out_dim(H, w.kh, w.sh, w.dh, w.pt, w.pb, w.ceil), OW = out_dim(W, w.kw, w.sw, w.dw, w.pl, w.pr, w.ceil);
    qr_pool *pool2 = qr_pool_new(2);
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            if (p == 1)
                tu_option("window", "portable");
            qr_tensor y = run("MaxPool", a, 5, in, 1, t ? pool2 : NULL);
            tu_option("window", "");
            cr_assert(y.dims[2] == OH && y.dims[3] == OW, "%lld x %lld", (long long)y.dims[2], (long long)y.dims[3]);
            for (int64_t pl = 0; pl < N * C; pl++)
                for (int64_t oy = 0; oy < OH; oy++)
                    for (int64_t ox = 0; ox < OW; ox++) {
                        float m = -INFINITY; /* the first maximum in window order; NaN never wins */
                        for (int64_t ky = 0; ky < w.kh; ky++)
                            for (int64_t kx = 0; kx < w.kw; kx++) {
                                int64_t iy = oy * w.sh - w.pt + ky * w.dh, ix = ox * w.sw - w.pl + kx * w.dw;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W && x[(pl * H + iy) * W + ix] > m)
                                    m = x[(pl * H + iy) * W + ix];
                            }
                        float got = ((float *)y.data)[(pl * OH + oy) * OW + ox];
                        cr_assert(memcmp(&got, &m, sizeof m) == 0,
                                  "%s, %d threads, %lldx%lld/%lldx%lld on %lldx%lld: plane %lld (%lld, %lld): %g vs %g",
                                  paths[p], t + 1, (long long)w.kh, (long long)w.kw, (long long)w.sh,
                                  (long long)w.sw, (long long)H, (long long)W, (long long)pl, (long long)oy,
                                  (long long)ox, got, m);
                    }
            qr_tensor_free(&y);
        }
    qr_pool_free(pool2);
    free(x);
}

Test(window, maxpool_f32_matches_the_definition_bit_for_bit)
{
    cr_log_info("AVX-512 window kernels: %s", qr_window_avx512() ? "yes" : "no (portable path only)");
    check_maxpool(2, 3, 37, 70, (win){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}); /* ResNet's 3x3/2, pads 1 */
    check_maxpool(1, 2, 23, 41, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}); /* stride 1 */
    check_maxpool(1, 2, 20, 45, (win){3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1}); /* ceil mode: a last window past the edge */
    check_maxpool(1, 2, 19, 50, (win){2, 3, 3, 2, 2, 2, 1, 0, 2, 1, 0}); /* row stride 3, dilations, uneven pads */
    check_maxpool(2, 1, 9, 7, (win){3, 2, 1, 2, 1, 3, 0, 2, 2, 0, 1});   /* narrower than a vector */
    check_maxpool(1, 2, 12, 36, (win){2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0}); /* 2x2/2 (its own kernel) */
    check_maxpool(1, 1, 10, 40, (win){5, 5, 3, 3, 1, 1, 2, 2, 2, 2, 0}); /* row stride 3, column 3: portable */
    /* rows of 64: the last full block's last window column is the row's last column */
    check_maxpool(1, 2, 13, 64, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0});
    check_maxpool(1, 2, 13, 64, (win){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0});
}

/* Depthwise Conv: y = sum over the window in (ky, kx) order, from 0, of w * x (0 on the padding,
 * whose products are added too), each a multiply then an add, then + b when there is a bias. */
static void check_depthwise(int64_t N, int64_t C, int64_t H, int64_t W, win w, int with_bias)
{
    int64_t nx = N * C * H * W, nw = C * w.kh * w.kw;
    float *x = malloc(sizeof(float) * (size_t)nx), *wt = malloc(sizeof(float) * (size_t)nw), b[8];
    cr_assert(x && wt && C <= 8);
    unsigned seed = 31;
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 300.0f;
    x[0] = -0.0f;
    for (int64_t i = 0; i < nw; i++)
        wt[i] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 70.0f;
    for (int64_t c = 0; c < C; c++)
        b[c] = (float)(c - 2) * 0.37f;
    int64_t ks[2], st[2], dl[2], pads[4];
    qr_attr a[5];
    set_attrs(&w, a, ks, st, dl, pads);
    a[4] = (qr_attr){.name = "group", .kind = QR_ATTR_INT, .i = C};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {C, 1, w.kh, w.kw}, .data = wt};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {C}, .data = b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    int64_t OH = out_dim(H, w.kh, w.sh, w.dh, w.pt, w.pb, 0), OW = out_dim(W, w.kw, w.sw, w.dw, w.pl, w.pr, 0);
    qr_pool *pool2 = qr_pool_new(2);
    /* the window kernels, not sconv (which takes small planes with FMA chains: test_sconv.c) */
    tu_option("sgemm", "portable");
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            if (p == 1)
                tu_option("window", "portable");
            qr_tensor y = run("Conv", a, 5, in, with_bias ? 3 : 2, t ? pool2 : NULL);
            tu_option("window", "");
            cr_assert(y.dims[2] == OH && y.dims[3] == OW);
            for (int64_t pl = 0; pl < N * C; pl++)
                for (int64_t oy = 0; oy < OH; oy++)
                    for (int64_t ox = 0; ox < OW; ox++) {
                        int64_t c = pl % C;
                        float s = 0;
                        for (int64_t ky = 0; ky < w.kh; ky++)
                            for (int64_t kx = 0; kx < w.kw; kx++) {
                                int64_t iy = oy * w.sh - w.pt + ky * w.dh, ix = ox * w.sw - w.pl + kx * w.dw;
                                float v = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[(pl * H + iy) * W + ix] : 0;
                                float prod = wt[(c * w.kh + ky) * w.kw + kx] * v;
                                s = s + prod;
                            }
                        if (with_bias)
                            s = s + b[c];
                        float got = ((float *)y.data)[(pl * OH + oy) * OW + ox];
                        cr_assert(memcmp(&got, &s, sizeof s) == 0,
                                  "%s, %d threads, %lldx%lld/%lldx%lld on %lldx%lld: plane %lld (%lld, %lld): %g vs %g",
                                  paths[p], t + 1, (long long)w.kh, (long long)w.kw, (long long)w.sh,
                                  (long long)w.sw, (long long)H, (long long)W, (long long)pl, (long long)oy,
                                  (long long)ox, got, s);
                    }
            qr_tensor_free(&y);
        }
    tu_option("sgemm", "");
    qr_pool_free(pool2);
    free(wt);
    free(x);
}

Test(window, depthwise_f32_matches_the_definition_bit_for_bit)
{
    cr_log_info("AVX2 depthwise sums: %s", qr_window_avx2() ? "yes" : "no");
    check_depthwise(2, 3, 29, 70, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, 1); /* MobileNet's 3x3, stride 1 */
    check_depthwise(2, 3, 30, 75, (win){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}, 1); /* ... and stride 2 */
    check_depthwise(1, 2, 21, 50, (win){3, 3, 2, 2, 1, 1, 0, 1, 1, 0, 0}, 0); /* uneven pads, no bias */
    check_depthwise(1, 2, 18, 44, (win){3, 3, 1, 1, 2, 3, 2, 3, 2, 3, 0}, 1); /* dilations */
    check_depthwise(1, 2, 17, 40, (win){5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0}, 1); /* a 5x5 window */
    check_depthwise(1, 3, 11, 9, (win){3, 2, 2, 2, 1, 1, 2, 0, 1, 1, 0}, 0);  /* narrower than a vector */
    check_depthwise(1, 2, 7, 7, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, 1);   /* 7x7, as the last blocks' */
    /* rows of 64: the last full block's last window column is the row's last column */
    check_depthwise(1, 2, 13, 64, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, 1);
    check_depthwise(1, 2, 13, 64, (win){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}, 1);
    /* the kernel's padded rows: a 5x5 window at stride 2 (two rows of each phase), rows of 32 and
     * 48 outputs (pairs of blocks, then one alone), and pads wider than a vector (whole vectors of
     * padding); planes of 29 to 61 rows wrap the ring of rows many times */
    check_depthwise(2, 3, 61, 67, (win){5, 5, 2, 2, 1, 1, 2, 2, 2, 1, 0}, 1);
    check_depthwise(1, 2, 29, 32, (win){3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, 1);
    check_depthwise(1, 2, 30, 96, (win){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}, 0);
    check_depthwise(1, 2, 9, 20, (win){3, 3, 1, 1, 1, 1, 3, 18, 2, 17, 0}, 1);
    check_depthwise(1, 2, 9, 20, (win){3, 3, 2, 2, 1, 1, 3, 19, 2, 20, 0}, 1);
}
