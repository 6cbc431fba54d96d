/* One-thread timing of the NHWC depthwise kernels (qr_nhwc_dw_u8_isa, runtime/ops/nhwc.h) on
 * MobileNetV2's depthwise layers (3x3, pads 1): 112x112x32, 112x112x96 stride 2, 56x56x144 at
 * strides 1 and 2, 28x28x192 at strides 1 and 2, 14x14x384, 14x14x576 at strides 1 and 2 and
 * 7x7x960, in GMAC/s (useful multiply-accumulates: OH * OW * C * 9 per call) and in ns per
 * output pixel. Not a test and not part of `make bench`. Build and run (after `make`):
 *   cc -O2 -Iruntime bench/dw_gmacs.c build/libqrl.a -lpthread -lm -o build/dw_gmacs && build/dw_gmacs [N [R]]
 * N (default 1): copies of the input, each call taking the next, so that with 48 of them the
 * input comes from memory, as in a batch of 64 (qr_nhwc_dw_ahead); R (default 60): the rounds.
 * The ISAs' lines write all of a call's sums to one block (1.8 MB at 56x56x144: past L2); the
 * "rows" line runs the kernel as the runtime does, a row of sums at a time in L1.
 * Each line: the best of R timings of enough calls for 0.02 s each, the ISAs taken in turns so
 * that the machine's load weighs on all alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/nhwc.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void row_done(void *ctx, int64_t oy)
{
    (void)ctx;
    (void)oy;
}

/* one image: fn, or (fn NULL) qr_nhwc_dw_u8_rows, with the requantization rq or none */
static void call(qr_nhwc_dw_fn fn, const qr_nhwc_dw_requant *rq, int32_t *acc, const uint8_t *x, int64_t C,
                 const qr_conv_geom *g, const int32_t *wk, const int32_t *init, int ahead)
{
    if (fn)
        fn(acc, C, x, C, g, wk, init, 0, 3, 0, g->small[0]);
    else
        qr_nhwc_dw_u8_rows(acc, C, x, C, g, wk, init, 0, 3, 0, g->small[0], ahead, row_done, NULL, rq);
}

typedef struct layer {
    int64_t h, c, s;
} layer;

int main(int argc, char **argv)
{
    const int64_t nx = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 1;
    static const layer layers[] = {{112, 32, 1}, {112, 96, 2}, {56, 144, 1}, {56, 144, 2}, {28, 192, 1},
                                    {28, 192, 2}, {14, 384, 1}, {14, 576, 1}, {14, 576, 2}, {7, 960, 1}};
    /* the last, "rows": qr_nhwc_dw_u8_rows as iconv_nhwc.c calls it (each output row's sums in the same
     * place, read by a callback: here none; ahead with N > 1), the CPU's best kernel; "rows-rq": the same
     * with the requantization in the kernel (qr_nhwc_dw_requant), bytes out where "rows" leaves sums */
    static const char *const isas[] = {"avx512vnni", "avx512vnni-ahead", "avx512vnni-pixels", "avx512f", "avx2",
                                       "rows",       "rows-rq"};
    enum { NISA = 7, ROWS = 5 };
    const int ROUNDS = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 60;
    for (size_t li = 0; li < sizeof layers / sizeof *layers; li++) {
        const layer *L = &layers[li];
        qr_conv_geom g = {0};
        g.r = 2;
        g.big[0] = g.big[1] = L->h;
        g.kernel[0] = g.kernel[1] = 3;
        g.stride[0] = g.stride[1] = L->s;
        g.dilation[0] = g.dilation[1] = 1;
        g.pad_begin[0] = g.pad_begin[1] = g.pad_end[0] = g.pad_end[1] = 1;
        g.small[0] = g.small[1] = (L->h + 2 - 3) / L->s + 1;
        g.big_n = L->h * L->h, g.small_n = g.small[0] * g.small[1], g.kernel_n = 9;
        int64_t C = L->c, P = g.small_n;
        const int64_t xn = L->h * L->h * C;
        uint8_t *xs = malloc((size_t)(xn * nx));
        int64_t xi = 0;
        int32_t *wk = malloc((size_t)(9 * C) * 4), *init = malloc((size_t)C * 4), *acc = malloc((size_t)(P * C) * 4);
        srand(1);
        for (int64_t i = 0; i < xn * nx; i++)
            xs[i] = (uint8_t)rand();
        for (int64_t i = 0; i < 9 * C; i++)
            wk[i] = rand() % 255 - 127;
        for (int64_t i = 0; i < C; i++)
            init[i] = rand() % 1000;
        int32_t *zb = calloc((size_t)(2 * C), 4);
        float *mf = malloc((size_t)(3 * C) * 4);
        uint8_t *y = malloc((size_t)(P * C));
        for (int64_t i = 0; i < C; i++)
            mf[i] = 1e-3f, mf[C + i] = 0, mf[2 * C + i] = 255;
        const qr_nhwc_dw_requant rq = {.bias = zb, .z = zb + C, .m = mf, .lo = mf + C, .hi = mf + 2 * C, .y = y};
        double best[NISA];
        long calls[NISA];
        for (int i = 0; i < NISA; i++) {
            best[i] = 1e9;
            calls[i] = 0;
            qr_nhwc_dw_fn fn = i >= ROWS ? NULL : qr_nhwc_dw_u8_isa(isas[i]);
            if (!fn && i < ROWS)
                continue;
            double t0 = now_s();
            do {
                call(fn, i == NISA - 1 ? &rq : NULL, acc, xs + xi++ % nx * xn, C, &g, wk, init, nx > 1);
                calls[i]++;
            } while (now_s() - t0 < 0.02);
        }
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < NISA; i++) {
                qr_nhwc_dw_fn fn = i >= ROWS ? NULL : qr_nhwc_dw_u8_isa(isas[i]);
                if (!fn && i < ROWS)
                    continue;
                double t0 = now_s();
                for (long k = 0; k < calls[i]; k++)
                    call(fn, i == NISA - 1 ? &rq : NULL, acc, xs + xi++ % nx * xn, C, &g, wk, init, nx > 1);
                double t = (now_s() - t0) / (double)calls[i];
                if (t < best[i])
                    best[i] = t;
            }
        for (int i = 0; i < NISA; i++)
            if (calls[i])
                printf("%3lldx%-3lld c %4lld s %lld  %-10s  %6.1f GMAC/s  %6.2f ns/pixel  %7.1f us\n", (long long)L->h,
                       (long long)L->h, (long long)C, (long long)L->s, isas[i], (double)(P * C * 9) / best[i] * 1e-9,
                       best[i] / (double)P * 1e9, best[i] * 1e6);
        free(xs), free(wk), free(init), free(acc), free(zb), free(mf), free(y);
    }
    return 0;
}
