/* The fused 1 x 1 kernels of compiler/iconv_jit.c (qc_iconv_jit_ep, the stdlib's qlinear.nhwc
 * program fused) on MobileNetV2's 1 x 1 layer shapes, one thread: microseconds per layer (best of
 * 15 rounds of 5 calls, rows in blocks of 256 as runtime/ops/iconv_nhwc.c hands them) and a hash
 * of the output bytes, so that two generators can be compared for time and bits (docs/runtime.md,
 * stop 37). Channel values of a real layer's kind: multipliers 1e-4 to 1e-2, biases within
 * +-1000, the output zero point at T's bottom and a Relu. Not part of `make bench`. Build and run
 * (after `make`; `u8` or `i8` output; ONLY=i times shape i alone; MUL=k takes k times the pixels;
 * a second argument `3x3`: the small ResNet's 3 x 3 shapes instead, 9 taps a pixel pointed at rows
 * of random bytes and random panels, for time and bits, not a convolution's meaning, docs/runtime.md
 * stop 39; COLD=mb: every call after mb MB of other bytes written, not timed, so that the weights
 * and rows come from L3 (8) or memory (64); BLOCK=r: rows in blocks of r, the runtime's
 * block_rows; MEDIAN=1: the median round instead of the best; docs/runtime.md stop 45):
 *   cc -O2 -Iruntime -Icompiler -Iinclude -I/usr/lib/gcc/x86_64-linux-gnu/12/include bench/iconv_ep.c \
 *      build/libqrl.a -lprotobuf-c -L/usr/lib/gcc/x86_64-linux-gnu/12 -lgccjit -ldl -lm -lpthread \
 *      -o build/iconv_ep_bench && bash tools/freeze.sh build/iconv_ep_bench u8
 * Another generator: compile its compiler/iconv_jit.c with -DQC_ICONV_JIT_ID='"other"' (its own
 * cache key) and put that object before build/libqrl.a. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iconv_jit.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int i8 = argc > 1 && argv[1][0] == 'i', k3 = argc > 2 && !strcmp(argv[2], "3x3");
    /* COLD=mb: each call after mb MB (1 to 1024) of other bytes, written (its time alone counted) */
    size_t cold_bytes = getenv("COLD") ? (size_t)atoi(getenv("COLD")) << 20 : 0;
    cold_bytes = cold_bytes > ((size_t)1 << 30) ? 0 : cold_bytes;
    volatile uint8_t *cold = cold_bytes ? calloc(cold_bytes, 1) : NULL;
    /* BLOCK=r: rows in blocks of r (at most 256) */
    int64_t bl = getenv("BLOCK") ? atoll(getenv("BLOCK")) : 256;
    bl = bl < 1 || bl > 256 ? 256 : bl;
    /* stdlib/kernels.qrl qlinear.nhwc<T>'s program (tests/unit/test_vecmap.c the_stdlib_requantization) */
    char prog[256];
    snprintf(prog, sizeof prog,
             "tabi 2;tabf 3;tabf 4;tabf 0;tabi 1;acc;addi 5 4;cvtf 6;mulf 7 3;rint 8;cvtf 0;addf 9 10;maxf 11 1;"
             "minf 12 2;satf.%s 13", i8 ? "i8" : "u8");
    /* K, N, pixels at batch 1 */
    static const int64_t shapes[][3] = {{32, 16, 12544}, {16, 96, 12544}, {96, 24, 3136}, {24, 144, 3136},
                                        {144, 24, 3136}, {32, 192, 784},  {192, 32, 784}, {64, 384, 196},
                                        {320, 1280, 49}, {96, 576, 196}};
    /* the small ResNet's 3 x 3 layers at batch 1: K, N, pixels */
    static const int64_t shapes3[][3] = {{16, 16, 1024}, {16, 32, 256}, {32, 32, 256}, {32, 64, 64}, {64, 64, 64}};
    int64_t taps = k3 ? 9 : 1;
    size_t nshapes = k3 ? sizeof shapes3 / sizeof shapes3[0] : sizeof shapes / sizeof shapes[0];
    const char *only = getenv("ONLY"), *mul = getenv("MUL");
    int64_t times = mul ? atoll(mul) : 1;
    for (size_t s = 0; s < nshapes; s++) {
        if (only && (size_t)atoi(only) != s)
            continue;
        const int64_t *sh = k3 ? shapes3[s] : shapes[s];
        int64_t given[3];
        if (getenv("SHAPE")) { /* SHAPE=K,N,pixels: that shape alone (parts measured apart) */
            if (s || sscanf(getenv("SHAPE"), "%lld,%lld,%lld", (long long *)&given[0], (long long *)&given[1], (long long *)&given[2]) != 3)
                continue;
            sh = given;
        }
        int64_t k4 = sh[0], n = sh[1], m = sh[2] * (times > 0 ? times : 1), n16 = (n + 15) / 16 * 16;
        uint8_t *x = malloc((size_t)(m * k4)), *y = malloc((size_t)(m * n));
        const uint8_t **a = malloc((size_t)(m * taps) * sizeof *a);
        int8_t *w = aligned_alloc(64, (size_t)(taps * k4 * n16 * 4)), *wt = malloc((size_t)(k4 * n));
        int32_t *init = malloc((size_t)n16 * 4), *lanes = malloc((size_t)(5 * n) * 4);
        if (!x || !y || !a || !w || !wt || !init || !lanes)
            return 1;
        for (int64_t i = 0; i < m * k4; i++)
            x[i] = (uint8_t)next();
        for (int64_t i = 0; i < m * taps; i++)
            a[i] = x + (i / taps + i % taps * 37) % m * k4;
        for (int64_t i = 0; i < k4 * n; i++)
            wt[i] = (int8_t)next();
        if (taps == 1)
            qr_iconv_pack_w(w, wt, 1, k4, k4, n, k4 * n, n, 1);
        else
            for (int64_t i = 0; i < taps * k4 * n16; i++)
                w[i] = (int8_t)next();
        for (int64_t j = 0; j < n; j++) {
            init[j] = (int32_t)(next() % 20001) - 10000;
            float mm = 1e-4f * (float)(1 + next() % 100), lo = i8 ? -128.0f : 0.0f, hi = 1e30f;
            memcpy(&lanes[j], &mm, 4);
            lanes[n + j] = (int32_t)(next() % 2001) - 1000;
            lanes[2 * n + j] = i8 ? -128 : 0;
            memcpy(&lanes[3 * n + j], &lo, 4);
            memcpy(&lanes[4 * n + j], &hi, 4);
        }
        const int32_t *tabs[5];
        for (int t = 0; t < 5; t++)
            tabs[t] = lanes + t * n;
        qr_iconv_ep_fn f = qc_iconv_jit_ep(taps, k4, n, prog);
        qr_iconv_fn fp = getenv("PLAIN") ? qc_iconv_jit(taps, k4, n) : NULL;
        int32_t *acc = fp ? malloc((size_t)(256 * n) * 4) : NULL;
        if (!f || (getenv("PLAIN") && (!fp || !acc))) {
            fprintf(stderr, "no fused kernel (AVX-512 VNNI, libgccjit)\n");
            return 1;
        }
        double best = 1e9, times[15];
        for (int rep = 0; rep < (mul ? 3 : 15); rep++) {
            double t0 = now_s(), out = 0;
            for (int it = 0; it < 5; it++) {
                if (cold) { /* the caches' lines taken by COLD MB of other bytes, not timed: with 8 the
                             * layer's weights and rows come from L3, with 64 from memory */
                    double e0 = now_s();
                    for (size_t i = 0; i < cold_bytes; i += 64)
                        cold[i]++;
                    out += now_s() - e0;
                }
                for (int64_t r0 = 0; r0 < m; r0 += bl)
                    if (fp) /* the sums alone, into one block's int32 (PLAIN=1: the epilogue's share by difference) */
                        fp(acc, n, a + r0 * taps, taps, m - r0 < bl ? m - r0 : bl, w, init, k4, 0, n, n);
                    else
                        f(y + r0 * n, n, a + r0 * taps, taps, m - r0 < bl ? m - r0 : bl, w, init, k4, 0, n, n, tabs, NULL, 0);
            }
            double t = (now_s() - t0 - out) / 5;
            best = t < best ? t : best;
            times[rep] = t;
        }
        int nrep = mul ? 3 : 15;
        qsort(times, (size_t)nrep, sizeof *times, cmp_double);
        if (getenv("MEDIAN"))
            best = times[nrep / 2];
        uint64_t h = 1469598103934665603ull;
        for (int64_t i = 0; i < m * n; i++)
            h = (h ^ y[i]) * 1099511628211ull;
        printf("K %4lld N %4lld pixels %6lld: %8.1f us %6.1f GMAC/s  bytes %016llx\n", (long long)(k4 * taps), (long long)n,
               (long long)m, best * 1e6, (double)(taps * k4 * n * m) / best * 1e-9, (unsigned long long)h);
        free(x);
        free(y);
        free((void *)a);
        free(w);
        free(wt);
        free(init);
        free(lanes);
        free(acc);
    }
    return 0;
}
