/* The shape-specialized NHWC convolution kernels of compiler/iconv_jit.c on one thread: GMAC/s of
 * the generated kernel on 3x3 and 1x1 convolutions over a zero-point-padded NHWC image (the row
 * pointers an indirection buffer gives), the compile time of each shape and its load time from the
 * module cache (a private temporary one), and for scale the
 * runtime's im2col GEMM microkernel (qr_igemm_u8s8, weights as rows) on the same product, its
 * packing not counted. Not part of `make bench`. Build and run (after `make`):
 *   cc -O2 -Iruntime -Icompiler -I/usr/lib/gcc/x86_64-linux-gnu/12/include bench/iconv_jit.c \
 *      build/libqrl.a -lprotobuf-c -L/usr/lib/gcc/x86_64-linux-gnu/12 -lgccjit -ldl -lm -lpthread \
 *      -o build/iconv_jit_bench && build/iconv_jit_bench */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "iconv_jit.h"
#include "ops/igemm.h"

enum { TIMINGS = 2000 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char cache_home[64] = "/tmp/qrl-iconv-bench-XXXXXX";

static double cpu_s(void)
{
    struct rusage s, k;
    getrusage(RUSAGE_SELF, &s);
    getrusage(RUSAGE_CHILDREN, &k);
    return (double)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + k.ru_utime.tv_sec + k.ru_stime.tv_sec) +
           (double)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + k.ru_utime.tv_usec + k.ru_stime.tv_usec) * 1e-6;
}

static void shape(int64_t side, int64_t taps, int64_t k4, int64_t n)
{
    int64_t m = side * side, n16 = (n + 15) / 16 * 16, kw = taps == 9 ? 3 : 1, pad = kw / 2, ps = side + 2 * pad;
    uint8_t *img = malloc((size_t)(ps * ps * k4));
    for (int64_t i = 0; i < ps * ps * k4; i++)
        img[i] = (uint8_t)(rand() & 255);
    const uint8_t **a = malloc((size_t)(m * taps) * sizeof *a);
    for (int64_t y = 0; y < side; y++)
        for (int64_t x = 0; x < side; x++)
            for (int64_t t = 0; t < taps; t++)
                a[(y * side + x) * taps + t] = img + ((y + t / kw) * ps + x + t % kw) * k4;
    int8_t *w = malloc((size_t)(taps * k4 * n16));
    for (int64_t i = 0; i < taps * k4 * n16; i++)
        w[i] = (int8_t)(rand() % 255 - 127);
    int32_t *init = calloc((size_t)n, sizeof *init), *c = malloc((size_t)(m * n) * sizeof *c);

    /* wall time, and CPU time with libgccjit's assembler and linker processes (the machine is shared):
     * compiled with no cache to use, then loaded from a cache that has it */
    double compile = 1e9, compile_cpu = 1e9, load = 1e9;
    qr_iconv_fn fn = NULL;
    setenv("XDG_CACHE_HOME", "/dev/null", 1);
    for (int r = 0; r < 5; r++) {
        qc_iconv_jit_release();
        double t0 = now_s(), c0 = cpu_s();
        fn = qc_iconv_jit(taps, k4, n);
        double t = now_s() - t0, c = cpu_s() - c0;
        compile = t < compile ? t : compile;
        compile_cpu = c < compile_cpu ? c : compile_cpu;
    }
    setenv("XDG_CACHE_HOME", cache_home, 1);
    for (int r = 0; r < 6; r++) {
        qc_iconv_jit_release();
        double t0 = now_s();
        fn = qc_iconv_jit(taps, k4, n);
        double t = now_s() - t0;
        load = r && t < load ? t : load; /* the first run stores it */
    }
    if (!fn) {
        printf("m=%lld taps=%lld k4=%lld n=%lld: no kernel (this CPU lacks AVX-512 VNNI?)\n", (long long)m,
               (long long)taps, (long long)k4, (long long)n);
        return;
    }
    /* the fastest of many single calls: the machine is shared, and a call (well under a time slice)
     * that ran alone is the kernel's own speed */
    double macs = (double)m * taps * k4 * n, best = 1e9;
    for (int r = 0; r < TIMINGS; r++) {
        double t0 = now_s();
        fn(c, n, a, taps, m, w, init, k4, 0, n, n);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }

    /* the im2col GEMM on the same product: rows = output channels (weights), columns = pixels */
    double gbest = 0;
    qr_igemm_fn g = qr_igemm_u8s8();
    if (g) {
        int64_t K = taps * k4, m16 = (m + 15) / 16 * 16;
        int8_t *wa = malloc((size_t)(n * K));
        uint8_t *b = calloc((size_t)(K * m16), 1);
        for (int64_t i = 0; i < n * K; i++)
            wa[i] = (int8_t)(rand() % 255 - 127);
        for (int64_t q = 0; q < K; q++)
            for (int64_t p = 0; p < m; p++)
                b[((q / 4) * m16 + p) * 4 + q % 4] = a[p * taps + q / k4][q % k4];
        int32_t *gc = malloc((size_t)(n * m) * sizeof *gc);
        gbest = 1e9;
        for (int r = 0; r < TIMINGS; r++) {
            double t0 = now_s();
            g(gc, m, wa, init, 0, n, b, K, m);
            double t = now_s() - t0;
            gbest = t < gbest ? t : gbest;
        }
        free(wa);
        free(b);
        free(gc);
    }
    int rows, vecs;
    qc_iconv_jit_tile(taps, k4, n, &rows, &vecs);
    printf("m=%-5lld taps=%lld k4=%-4lld n=%-4lld tile %dx%d | JIT iconv %6.1f GMAC/s (%.3f ms) | compile %.0f ms (CPU %.0f ms), from the cache %.1f ms"
           " | im2col GEMM kernel %6.1f GMAC/s\n",
           (long long)m, (long long)taps, (long long)k4, (long long)n, rows, 16 * vecs, macs / best / 1e9, best * 1e3,
           compile * 1e3, compile_cpu * 1e3, load * 1e3, gbest ? macs / gbest / 1e9 : 0.0);
    free(img);
    free(a);
    free(w);
    free(init);
    free(c);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!mkdtemp(cache_home))
        return 1;
    shape(56, 9, 64, 64);
    shape(28, 9, 128, 128);
    shape(56, 1, 64, 256);
    /* the bundled Fashion-MNIST CNN's conv2 (16 -> 32 at 14x14) and conv3 (32 -> 32 at 7x7), one image */
    shape(14, 9, 16, 32);
    shape(7, 9, 32, 32);
    long compiled, loaded;
    qc_iconv_jit_counts(&compiled, &loaded);
    printf("kernels compiled %ld, loaded from the cache %ld\n", compiled, loaded);
    qc_iconv_jit_release();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_home);
    return system(cmd) != 0;
}
