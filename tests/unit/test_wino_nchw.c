/* Winograd F(2x2, 3x3) on the channels-first f32 Conv (ops/wino_nchw.h), which runs where the best
 * FMA GEMM is AVX2's: forced here with `--option sgemm=avx2` on any CPU that has AVX2 (on an AVX-512
 * CPU that option also turns the channels-last kernels off), on ragged shapes (channels not
 * multiples of 8, odd output sizes whose last tile is cut, no pads and uneven pads, several chunks
 * of tile rows, several images), values of both signs, with and without bias, Relu or Clip:
 *   - against numpy in float64 (tools/wino_ref.py, the oracle of test_wino.c: it takes channels-last
 *     images, so x goes in transposed and its outputs come back so), within (C + 8) unit roundoffs
 *     of each output's magnitude through the transforms (docs/runtime.md "Stop 43");
 *   - 1 and 2 threads bit for bit, and the last image alone bit for bit against the batch;
 *   - the direct GEMM (--option winograd=0) within the same bound and not the same bits;
 *   - a NaN input: every output whose window holds it is NaN;
 *   - a layer of fewer than 48 tiles an image, and a weight that is not finite: the direct GEMM's bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/sgemm.h"
#include "parallel.h"
#include "testutil.h"

typedef struct wc {
    int64_t N, C, H, W, M, pt, pl, pb, pr;
    int bias, act; /* act: 0 none, 1 Relu, 2 Clip(-0.5, 0.7) */
} wc;

typedef struct layer {
    wc c;
    int64_t OH, OW, nx, nw, ny;
    float *x, *w, *b; /* x [N][C][H][W] */
} layer;

static layer make(wc c, unsigned seed)
{
    layer L = {.c = c, .OH = c.H + c.pt + c.pb - 2, .OW = c.W + c.pl + c.pr - 2};
    L.nx = c.N * c.C * c.H * c.W, L.nw = c.M * c.C * 9, L.ny = c.N * c.M * L.OH * L.OW;
    L.x = malloc(sizeof(float) * (size_t)L.nx), L.w = malloc(sizeof(float) * (size_t)L.nw);
    L.b = malloc(sizeof(float) * (size_t)c.M);
    cr_assert(L.x && L.w && L.b);
    for (int64_t i = 0; i < L.nx; i++)
        L.x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 700.0f;
    for (int64_t i = 0; i < L.nw; i++)
        L.w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 1500.0f;
    for (int64_t m = 0; m < c.M; m++)
        L.b[m] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 50.0f;
    return L;
}

static void drop(layer *L)
{
    free(L->x), free(L->w), free(L->b);
}

/* The Conv op on images [n0, n0 + nn) of L, with pool and the options as set. */
static qr_tensor run_layer(const layer *L, int64_t n0, int64_t nn, qr_pool *pool)
{
    const wc *c = &L->c;
    int64_t ks[2] = {3, 3}, pads[4] = {c->pt, c->pl, c->pb, c->pr};
    qr_attr a[2] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads}};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {nn, c->C, c->H, c->W}, .data = L->x + n0 * c->C * c->H * c->W};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {c->M, c->C, 3, 3}, .data = L->w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {c->M}, .data = L->b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_act relu = {.relu = 1}, clip = {.relu = 0, .lo = -0.5f, .hi = 0.7f};
    return tu_op_run("", "Conv", 17, a, 2, in, c->bias ? 3 : 2, pool,
                     c->act == 1 ? &relu : c->act == 2 ? &clip : NULL);
}

static int avx2_here(void)
{
    return qr_sgemm_isa("avx2") != NULL;
}

static void check(wc c)
{
    layer L = make(c, (unsigned)(c.C * 131 + c.M * 7 + c.H));
    char *dir = tu_tmpdir();
    /* the oracle reads channels-last images */
    float *xh = malloc(sizeof(float) * (size_t)L.nx);
    cr_assert(xh);
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t ch = 0; ch < c.C; ch++)
            for (int64_t p = 0; p < c.H * c.W; p++)
                xh[(n * c.H * c.W + p) * c.C + ch] = L.x[(n * c.C + ch) * c.H * c.W + p];
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {c.N, c.H, c.W, c.C}, .data = xh};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {c.M, c.C, 3, 3}, .data = L.w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {c.M}, .data = L.b};
    tu_npy_save(dir, "x", &tx);
    tu_npy_save(dir, "w", &tw);
    if (c.bias)
        tu_npy_save(dir, "b", &tb);
    free(tu_sh("/usr/bin/python3 '%s/tools/wino_ref.py' '%s' %lld %lld %lld %lld", tu_root(), dir, (long long)c.pt,
               (long long)c.pl, (long long)c.pb, (long long)c.pr));
    qr_tensor ref = tu_npy_load(dir, "ref"), scale = tu_npy_load(dir, "scale");
    cr_assert(ref.dtype == QR_F64 && qr_tensor_numel(&ref) == L.ny && qr_tensor_numel(&scale) == L.ny);
    qr_pool *pool2 = qr_pool_new(2);
    tu_option("sgemm", "avx2");
    qr_tensor y1 = run_layer(&L, 0, c.N, NULL), y2 = run_layer(&L, 0, c.N, pool2);
    qr_tensor last = run_layer(&L, c.N - 1, 1, NULL);
    tu_option("winograd", "0");
    qr_tensor yd = run_layer(&L, 0, c.N, NULL);
    tu_option("winograd", "");
    tu_option("sgemm", "");
    const float *o1 = y1.data, *o2 = y2.data, *od = yd.data, *ol = last.data;
    const double *rf = ref.data, *sc = scale.data;
    int64_t differ = 0, per = c.M * L.OH * L.OW;
    double worst = 0;
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t m = 0; m < c.M; m++)
            for (int64_t p = 0; p < L.OH * L.OW; p++) {
                int64_t i = (n * c.M + m) * L.OH * L.OW + p, h = (n * L.OH * L.OW + p) * c.M + m;
                double tol = (double)(c.C + 8) * 0x1p-23 * sc[h] + 1e-30;
                float want = tu_act_ref(c.act, (float)rf[h]);
                worst = fmax(worst, fabs(o1[i] - want) / tol);
                cr_assert(fabs(o1[i] - want) <= tol, "N%lld C%lld %lldx%lld M%lld: out %lld: %.9g vs %.9g (tol %g)",
                          (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, (long long)c.M, (long long)i,
                          o1[i], want, tol);
                cr_assert(fabs(od[i] - want) <= tol, "direct: out %lld: %.9g vs %.9g", (long long)i, od[i], want);
                cr_assert(memcmp(&o1[i], &o2[i], sizeof(float)) == 0, "2 threads: out %lld: %.9g vs %.9g",
                          (long long)i, o2[i], o1[i]);
                if (n == c.N - 1)
                    cr_assert(memcmp(&o1[i], &ol[i - n * per], sizeof(float)) == 0, "the last image alone: out %lld",
                              (long long)i);
                differ += memcmp(&o1[i], &od[i], sizeof(float)) != 0;
            }
    cr_log_info("N%lld C%lld %lldx%lld M%lld: largest error %.4f of the bound, %lld of %lld outputs not the direct "
                "GEMM's bits", (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, (long long)c.M, worst,
                (long long)differ, (long long)L.ny);
    cr_assert(differ > 0, "the same bits as the direct GEMM: Winograd did not run");
    qr_tensor_free(&y1), qr_tensor_free(&y2), qr_tensor_free(&yd), qr_tensor_free(&last);
    qr_tensor_free(&ref), qr_tensor_free(&scale);
    qr_pool_free(pool2);
    free(xh);
    tu_rmdir(dir);
    drop(&L);
}

Test(wino_nchw, matches_float64_on_ragged_shapes)
{
    if (!avx2_here())
        cr_skip_test("no AVX2 with FMA");
    /*     N  C    H   W   M   pt pl pb pr bias act */
    check((wc){2, 17, 15, 13, 40, 1, 1, 1, 1, 1, 1});   /* ragged C and M, odd outputs: cut tiles */
    check((wc){1, 64, 14, 14, 64, 1, 1, 1, 1, 1, 1});   /* ResNet-18's 64-channel block, 49 tiles */
    check((wc){1, 33, 16, 17, 70, 0, 0, 0, 0, 0, 0});   /* no pads, no bias, 14 x 15 */
    check((wc){1, 300, 15, 15, 41, 2, 0, 1, 2, 1, 2});  /* uneven pads, C over the K block, Clip */
    check((wc){2, 200, 14, 13, 180, 1, 1, 1, 1, 1, 0}); /* two images */
    check((wc){3, 16, 14, 14, 32, 1, 1, 1, 1, 1, 1});   /* the Fashion-MNIST CNN's 16 -> 32 */
    check((wc){1, 256, 40, 39, 256, 1, 1, 1, 1, 1, 1}); /* 20 x 20 tiles in three chunks of tile rows */
}

/* A NaN input: every output whose window holds it is NaN (the tile's other outputs may be too: its
 * transforms add it in), with Relu after (which keeps NaN). */
Test(wino_nchw, a_nan_input_reaches_its_window)
{
    if (!avx2_here())
        cr_skip_test("no AVX2 with FMA");
    wc c = {1, 32, 16, 16, 32, 1, 1, 1, 1, 1, 1};
    layer L = make(c, 5);
    int64_t cy = 7, cx = 10;
    L.x[(3 * c.H + cy) * c.W + cx] = NAN;
    tu_option("sgemm", "avx2");
    qr_tensor y = run_layer(&L, 0, 1, NULL);
    tu_option("sgemm", "");
    const float *o = y.data;
    for (int64_t m = 0; m < c.M; m++)
        for (int64_t oy = cy - 1; oy <= cy + 1; oy++)
            for (int64_t ox = cx - 1; ox <= cx + 1; ox++)
                cr_assert(isnan(o[(m * L.OH + oy) * L.OW + ox]), "channel %lld (%lld, %lld)", (long long)m,
                          (long long)oy, (long long)ox);
    qr_tensor_free(&y);
    drop(&L);
}

/* Fewer than 48 tiles an image (ResNet-18's 7 x 7 layers), or an inf weight: the direct GEMM's bits. */
Test(wino_nchw, small_layers_and_inf_weights_run_the_direct_gemm)
{
    if (!avx2_here())
        cr_skip_test("no AVX2 with FMA");
    const wc cs[2] = {{2, 64, 7, 7, 64, 1, 1, 1, 1, 1, 1}, {1, 32, 16, 16, 32, 1, 1, 1, 1, 1, 0}};
    for (int i = 0; i < 2; i++) {
        layer L = make(cs[i], 3);
        if (i == 1)
            L.w[100] = INFINITY;
        tu_option("sgemm", "avx2");
        qr_tensor y = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "0");
        qr_tensor yd = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "");
        tu_option("sgemm", "");
        cr_assert(memcmp(y.data, yd.data, qr_tensor_nbytes(&y)) == 0, "case %d", i);
        qr_tensor_free(&y), qr_tensor_free(&yd);
        drop(&L);
    }
}
