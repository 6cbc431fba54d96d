/* Winograd F(2x2, 3x3) (ops/wino.h, conv.c's wino_run): QrlConvF32Nhwc's 3 x 3 stride-1 layers of
 * at least 48 tiles an image and 32 output channels, on ragged shapes (channels not multiples of
 * 16, odd output sizes whose last tile is cut, no pads and uneven pads, C over the GEMM's K
 * block, several images whose tiles run in chunks across them), values of both signs, with and
 * without bias, a fused residual Add, Relu or Clip:
 *   - against numpy in float64 (tools/wino_ref.py), within (C + 8) unit roundoffs of each
 *     output's magnitude through the transforms (the bound docs/runtime.md "Stop 43" states);
 *   - 1 and 2 threads bit for bit, and each image alone bit for bit against the batch;
 *   - the direct kernel (--option winograd=0) within the same bound, and not the same bits
 *     (Winograd ran);
 *   - NaN and inf inputs: every output whose window holds one is not finite (NaN for NaN);
 *   - a weight that is not finite, and layers under the thresholds: the direct kernel's bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/sconv.h"
#include "parallel.h"
#include "testutil.h"

static qr_tensor run(const qr_tensor **in, int nin, int64_t *pads, qr_pool *pool, const qr_act *act)
{
    static int64_t ks[2] = {3, 3};
    qr_attr a[2] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads}};
    return tu_op_run("qrl", "QrlConvF32Nhwc", 17, a, 2, in, nin, pool, act);
}

typedef struct wc {
    int64_t N, C, H, W, M, pt, pl, pb, pr;
    int bias, res, act; /* act: 0 none, 1 Relu, 2 Clip(-0.5, 0.7) */
} wc;

typedef struct layer {
    wc c;
    int64_t OH, OW, nx, nw, ny;
    float *x, *w, *b, *r;
} layer;

static layer make(wc c, unsigned seed)
{
    layer L = {.c = c, .OH = c.H + c.pt + c.pb - 2, .OW = c.W + c.pl + c.pr - 2};
    L.nx = c.N * c.H * c.W * c.C, L.nw = c.M * c.C * 9, L.ny = c.N * L.OH * L.OW * c.M;
    L.x = malloc(sizeof(float) * (size_t)L.nx), L.w = malloc(sizeof(float) * (size_t)L.nw);
    L.b = malloc(sizeof(float) * (size_t)c.M), L.r = malloc(sizeof(float) * (size_t)L.ny);
    cr_assert(L.x && L.w && L.b && L.r);
    for (int64_t i = 0; i < L.nx; i++)
        L.x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 700.0f;
    for (int64_t i = 0; i < L.nw; i++)
        L.w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 1500.0f;
    for (int64_t m = 0; m < c.M; m++)
        L.b[m] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 50.0f;
    for (int64_t i = 0; i < L.ny; i++)
        L.r[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 300.0f;
    return L;
}

static void drop(layer *L)
{
    free(L->x), free(L->w), free(L->b), free(L->r);
}

/* The op on L (images [n0, n0 + nn)), with pool and the options as set. */
static qr_tensor run_layer(const layer *L, int64_t n0, int64_t nn, qr_pool *pool)
{
    const wc *c = &L->c;
    int64_t pads[4] = {c->pt, c->pl, c->pb, c->pr};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {nn, c->H, c->W, c->C},
                    .data = L->x + n0 * c->H * c->W * c->C};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {c->M, c->C, 3, 3}, .data = L->w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {c->M}, .data = L->b};
    qr_tensor tr = {.dtype = QR_F32, .ndim = 4, .dims = {nn, L->OH, L->OW, c->M},
                    .data = L->r + n0 * L->OH * L->OW * c->M};
    const qr_tensor *in[4] = {&tx, &tw, &tb, &tr};
    qr_act relu = {.relu = 1}, clip = {.relu = 0, .lo = -0.5f, .hi = 0.7f};
    return run(in, c->res ? 4 : c->bias ? 3 : 2, pads, pool, c->act == 1 ? &relu : c->act == 2 ? &clip : NULL);
}

/* reps: how many times the 2-thread run repeats, each compared bit for bit with 1 thread (a
 * sharing of buffers between the threads shows only where their chunks overlap in time). */
static void check_reps(wc c, int reps)
{
    layer L = make(c, (unsigned)(c.C * 131 + c.M * 7 + c.H));
    /* the oracle: numpy in float64 */
    char *dir = tu_tmpdir();
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {c.N, c.H, c.W, c.C}, .data = L.x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {c.M, c.C, 3, 3}, .data = L.w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {c.M}, .data = L.b};
    qr_tensor tr = {.dtype = QR_F32, .ndim = 4, .dims = {c.N, L.OH, L.OW, c.M}, .data = L.r};
    tu_npy_save(dir, "x", &tx);
    tu_npy_save(dir, "w", &tw);
    if (c.bias || c.res)
        tu_npy_save(dir, "b", &tb);
    if (c.res)
        tu_npy_save(dir, "res", &tr);
    free(tu_sh("/usr/bin/python3 '%s/tools/wino_ref.py' '%s' %lld %lld %lld %lld", tu_root(), dir, (long long)c.pt,
               (long long)c.pl, (long long)c.pb, (long long)c.pr));
    qr_tensor ref = tu_npy_load(dir, "ref"), scale = tu_npy_load(dir, "scale");
    cr_assert(ref.dtype == QR_F64 && qr_tensor_numel(&ref) == L.ny && qr_tensor_numel(&scale) == L.ny);
    qr_pool *pool2 = qr_pool_new(2);
    tu_option("f32-split", "all"); /* the small layers split too (conv.c's F32_SPLIT_MACS) */
    tu_option("winograd", "all");  /* from 16 channels on every CPU (conv.c's wino_min_channels) */
    qr_tensor y1 = run_layer(&L, 0, c.N, NULL), y2 = run_layer(&L, 0, c.N, pool2);
    for (int r = 1; r < reps; r++) {
        qr_tensor again = run_layer(&L, 0, c.N, pool2);
        cr_assert(memcmp(again.data, y1.data, qr_tensor_nbytes(&y1)) == 0,
                  "2 threads, run %d of %d: not 1 thread's bits", r + 1, reps);
        qr_tensor_free(&again);
    }
    qr_tensor last = run_layer(&L, c.N - 1, 1, NULL);
    tu_option("winograd", "0");
    qr_tensor yd = run_layer(&L, 0, c.N, NULL);
    tu_option("winograd", "");
    const float *o1 = y1.data, *o2 = y2.data, *od = yd.data, *ol = last.data;
    const double *rf = ref.data, *sc = scale.data;
    int64_t differ = 0, per = L.OH * L.OW * c.M;
    double worst = 0, worst_d = 0;
    for (int64_t i = 0; i < L.ny; i++) {
        double tol = (double)(c.C + 8) * 0x1p-23 * sc[i] + 1e-30;
        float want = tu_act_ref(c.act, (float)rf[i]);
        worst = fmax(worst, fabs(o1[i] - want) / tol), worst_d = fmax(worst_d, fabs(od[i] - want) / tol);
        cr_assert(fabs(o1[i] - want) <= tol, "N%lld C%lld %lldx%lld M%lld: out %lld: %.9g vs %.9g (tol %g)",
                  (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, (long long)c.M, (long long)i, o1[i],
                  want, tol);
        cr_assert(fabs(od[i] - want) <= tol, "direct: out %lld: %.9g vs %.9g", (long long)i, od[i], want);
        cr_assert(memcmp(&o1[i], &o2[i], sizeof(float)) == 0, "2 threads: out %lld: %.9g vs %.9g", (long long)i,
                  o2[i], o1[i]);
        if (i >= (c.N - 1) * per)
            cr_assert(memcmp(&o1[i], &ol[i - (c.N - 1) * per], sizeof(float)) == 0, "the last image alone: out %lld",
                      (long long)i);
        differ += memcmp(&o1[i], &od[i], sizeof(float)) != 0;
    }
    cr_log_info("N%lld C%lld %lldx%lld M%lld: largest error %.4f of the bound (direct %.4f), %lld of %lld outputs not "
                "the direct kernel's bits", (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W,
                (long long)c.M, worst, worst_d, (long long)differ, (long long)L.ny);
    cr_assert(differ > 0, "the same bits as the direct kernel: Winograd did not run");
    qr_tensor_free(&y1), qr_tensor_free(&y2), qr_tensor_free(&yd), qr_tensor_free(&last);
    qr_tensor_free(&ref), qr_tensor_free(&scale);
    qr_pool_free(pool2);
    tu_rmdir(dir);
    drop(&L);
}

static void check(wc c)
{
    check_reps(c, 1);
}

Test(wino, matches_float64_on_ragged_shapes)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F: the layers run on the GEMM path");
    /*     N  C    H   W   M   pt pl pb pr bias res act */
    check((wc){2, 17, 15, 13, 40, 1, 1, 1, 1, 1, 0, 1});   /* ragged C and M, odd outputs: cut tiles */
    check((wc){1, 64, 14, 14, 64, 1, 1, 1, 1, 1, 1, 1});   /* ResNet-18's block: residual Add, Relu */
    check((wc){1, 33, 16, 17, 70, 0, 0, 0, 0, 0, 0, 0});   /* no pads, no bias, 14 x 15 */
    check((wc){1, 300, 15, 15, 40, 2, 0, 1, 2, 1, 1, 2});  /* uneven pads, C over the K block, Clip */
    check((wc){2, 200, 14, 13, 180, 1, 1, 1, 1, 1, 0, 0}); /* 98 tiles in 3 chunks across the images */
    check((wc){3, 16, 14, 14, 32, 1, 1, 1, 1, 1, 1, 1});   /* the Fashion-MNIST CNN's 16 -> 32 */
    /* chunks whole on the threads (conv.c's wino_chunks: at least 4 chunks of 48 tiles on 2
     * threads, weights under 1 MB): 4 chunks of one image each, 4 of 61 and 60 tiles across 3
     * images of 81 with a residual Add and Clip, and 5 of 120 (about 0.1 ms each, so that the
     * second thread takes some even on a loaded machine) */
    check((wc){4, 16, 14, 14, 32, 1, 1, 1, 1, 1, 0, 1});
    check((wc){3, 24, 17, 17, 36, 1, 1, 1, 1, 1, 1, 2});
    check((wc){6, 64, 20, 20, 64, 1, 1, 1, 1, 1, 1, 1});
}

/* Whole chunks on two threads that really run at the same time (conv.c's wino_chunks, each in its
 * slot's inputs, products and GEMM panels): 16 chunks of 128 tiles (about 0.1 ms each) a run, the
 * run 8 times, so that on a loaded machine the second thread takes chunks while the first works on
 * its own; 1 thread against numpy, each 2-thread run against 1 thread's bits. The layers above
 * share too few chunks to overlap for sure: there every slot on slot 0's Winograd inputs and
 * products passed (stop 46). */
Test(wino, whole_chunks_on_two_threads_keep_their_own_buffers)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F: the layers run on the GEMM path");
    /*          N  C   H   W   M   pt pl pb pr bias res act */
    check_reps((wc){8, 64, 32, 32, 64, 1, 1, 1, 1, 1, 1, 1}, 8);
}

/* A NaN or an inf input: every output whose window holds it is not finite (NaN for a NaN; an inf
 * may be NaN: the tile's transforms subtract it from itself), 1 and 2 threads the same bits. */
Test(wino, nan_and_inf_inputs_reach_their_windows)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int bi = 0; bi < 3; bi++) {
        layer L = make((wc){1, 20, 14, 14, 40, 1, 1, 1, 1, 1, 0, 0}, 5);
        const int64_t iy = 6, ix = 9;
        L.x[(iy * 14 + ix) * 20 + 7] = bad[bi];
        qr_pool *pool2 = qr_pool_new(2);
        tu_option("f32-split", "all");
        tu_option("winograd", "all");
        qr_tensor y1 = run_layer(&L, 0, 1, NULL), y2 = run_layer(&L, 0, 1, pool2);
        const float *o1 = y1.data, *o2 = y2.data;
        for (int64_t oy = 0; oy < 14; oy++)
            for (int64_t ox = 0; ox < 14; ox++)
                for (int64_t m = 0; m < 40; m++) {
                    int64_t o = (oy * 14 + ox) * 40 + m;
                    int held = oy - 1 <= iy && iy <= oy + 1 && ox - 1 <= ix && ix <= ox + 1;
                    if (held)
                        cr_assert(bi == 0 ? isnan(o1[o]) : !isfinite(o1[o]), "x %g: (%lld, %lld, %lld): %g",
                                  bad[bi], (long long)oy, (long long)ox, (long long)m, o1[o]);
                    cr_assert(memcmp(&o1[o], &o2[o], sizeof(float)) == 0, "2 threads: %lld", (long long)o);
                }
        qr_tensor_free(&y1), qr_tensor_free(&y2);
        qr_pool_free(pool2);
        drop(&L);
    }
}

/* A weight that is not finite would make inf - inf in the transformed weights: the layer runs on
 * the direct kernel instead, its bits. */
Test(wino, a_weight_not_finite_runs_the_direct_kernel)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    layer L = make((wc){1, 20, 14, 14, 40, 1, 1, 1, 1, 1, 0, 1}, 9);
    L.w[(3 * 20 + 5) * 9 + 4] = INFINITY;
    tu_option("winograd", "all");
    qr_tensor y = run_layer(&L, 0, 1, NULL);
    tu_option("winograd", "0");
    qr_tensor yd = run_layer(&L, 0, 1, NULL);
    tu_option("winograd", "");
    cr_assert(memcmp(y.data, yd.data, qr_tensor_nbytes(&y)) == 0);
    qr_tensor_free(&y), qr_tensor_free(&yd);
    drop(&L);
}

/* Under conv.c's thresholds (fewer than 48 tiles an image, fewer output channels than the GEMM
 * tile's 32 columns) the direct kernel runs: its bits. */
Test(wino, small_layers_run_the_direct_kernel)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    const wc cs[2] = {{2, 64, 7, 7, 64, 1, 1, 1, 1, 1, 0, 1}, {1, 16, 14, 14, 16, 1, 1, 1, 1, 1, 0, 1}};
    for (int i = 0; i < 2; i++) {
        layer L = make(cs[i], 3);
        qr_tensor y = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "0");
        qr_tensor yd = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "");
        cr_assert(memcmp(y.data, yd.data, qr_tensor_nbytes(&y)) == 0, "case %d", i);
        qr_tensor_free(&y), qr_tensor_free(&yd);
        drop(&L);
    }
}

/* The CPU picks Winograd's channel floor (conv.c's wino_min_channels): with AVX512-FP16 (two full
 * 512-bit FMA pipes) layers of fewer than 64 input channels run the direct kernel under auto, its
 * bits (the Fashion-MNIST CNN's 16 -> 32 on 14 x 14, 24 -> 36, the small ResNet's 32 -> 32 and a
 * ragged 40 -> 48 on an odd image); elsewhere they run by Winograd, all's bits; a 64-channel layer
 * runs by Winograd on both (not the direct kernel's bits). */
Test(wino, the_cpu_sets_the_channels_winograd_needs)
{
    if (!qr_sconv_available())
        cr_skip_test("no AVX-512F");
    int wide = __builtin_cpu_supports("avx512fp16");
    const wc cs[5] = {{2, 16, 14, 14, 32, 1, 1, 1, 1, 1, 0, 1}, {1, 24, 17, 15, 36, 1, 0, 1, 1, 1, 0, 0},
                      {2, 32, 16, 16, 32, 1, 1, 1, 1, 1, 1, 1}, {1, 40, 15, 13, 48, 1, 1, 0, 1, 0, 0, 2},
                      {1, 64, 14, 14, 64, 1, 1, 1, 1, 1, 0, 1}};
    for (int i = 0; i < 5; i++) {
        layer L = make(cs[i], 11);
        tu_option("winograd", "");
        qr_tensor ya = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "all");
        qr_tensor yw = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "0");
        qr_tensor yd = run_layer(&L, 0, cs[i].N, NULL);
        tu_option("winograd", "");
        size_t nb = qr_tensor_nbytes(&ya);
        cr_assert(memcmp(yw.data, yd.data, nb) != 0, "case %d: all ran the direct kernel", i);
        int direct = wide && cs[i].C < 64;
        cr_assert(memcmp(ya.data, direct ? yd.data : yw.data, nb) == 0, "case %d (C %lld, avx512fp16 %d): auto is not %s",
                  i, (long long)cs[i].C, wide != 0, direct ? "the direct kernel" : "Winograd");
        qr_tensor_free(&ya), qr_tensor_free(&yw), qr_tensor_free(&yd);
        drop(&L);
    }
}
