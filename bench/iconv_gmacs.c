/* One-thread timing of the NHWC indirect GEMM microkernels (qr_iconv_u8s8_isa, runtime/ops/igemm.h)
 * on ResNet-like layers, in GMAC/s (m * taps * k4 * n multiply-accumulates per call): a 3x3
 * convolution over a padded 56x56x64 NHWC image (m 3136, taps 9, k4 64, n 64), one over 28x28x128
 * (m 784, taps 9, k4 128, n 128) and a 1x1 (m 3136, taps 1, k4 64, n 256). Not a test and not part
 * of `make bench`. Build and run (after `make`):
 *   cc -O2 -Iruntime bench/iconv_gmacs.c build/libqrl.a -lpthread -o build/iconv_gmacs && build/iconv_gmacs
 * Prints one line per layer and ISA: the best of 25 timings of enough calls for 0.04 s each, taken
 * in turns with the same count of timings of vpdpbusd's peak (24 independent sums on zmm, as many
 * as the AVX-512 kernel's tile; bench/peak.c's 12 chains measured less than the kernel here), so
 * that the machine's load, shared with other work, weighs on both alike; and the kernel's share of
 * that peak. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/igemm.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define DP(s) __asm__("vpdpbusd %2, %1, %0" : "+v"(s) : "v"(a), "v"(b)) /* asm: GCC keeps every chain */
#define DP4(s0, s1, s2, s3) DP(s0); DP(s1); DP(s2); DP(s3)

/* u8 x s8 multiply-accumulates per second of 24 independent vpdpbusd chains for about 0.04 s. */
__attribute__((target("avx512f,avx512vnni"))) static double vnni_peak(void)
{
    __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
    __m512i s[24];
    for (int i = 0; i < 24; i++)
        s[i] = _mm512_set1_epi32(i);
    __m512i s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5], s6 = s[6], s7 = s[7], s8 = s[8],
            s9 = s[9], s10 = s[10], s11 = s[11], s12 = s[12], s13 = s[13], s14 = s[14], s15 = s[15], s16 = s[16],
            s17 = s[17], s18 = s[18], s19 = s[19], s20 = s[20], s21 = s[21], s22 = s[22], s23 = s[23];
    long iters = 0;
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < 1000; i++) {
            DP4(s0, s1, s2, s3);
            DP4(s4, s5, s6, s7);
            DP4(s8, s9, s10, s11);
            DP4(s12, s13, s14, s15);
            DP4(s16, s17, s18, s19);
            DP4(s20, s21, s22, s23);
        }
        iters += 1000;
    } while ((t = now_s() - t0) < 0.04);
    __m512i x[24] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19, s20,
                     s21, s22, s23};
    int32_t sink = 0; /* the sums are used: the loop stays */
    for (int i = 0; i < 24; i++)
        sink ^= _mm512_reduce_add_epi32(x[i]);
    if (sink == 42)
        fputs(" ", stderr);
    return (double)iters * 24 * 64 / t;
}

/* hw x hw output pixels of a k x k convolution, stride 1, padding k / 2, c input channels (a
 * multiple of 4), n output channels. */
static void layer(int hw, int k, int c, int n)
{
    int pad = k / 2, side = hw + 2 * pad;
    int64_t m = (int64_t)hw * hw, taps = (int64_t)k * k, n16 = qr_igemm_n16(n);
    uint8_t *img = malloc((size_t)side * side * c);
    int8_t *w = malloc((size_t)(taps * c * n16));
    int32_t *init = malloc(sizeof *init * (size_t)n), *out = malloc(sizeof *out * (size_t)(m * n));
    const uint8_t **a = malloc(sizeof *a * (size_t)(m * taps));
    if (!img || !w || !init || !out || !a)
        exit(1);
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)side * side * c; i++)
        img[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 24);
    for (size_t i = 0; i < (size_t)(taps * c * n16); i++)
        w[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
    for (int j = 0; j < n; j++)
        init[j] = j;
    for (int y = 0; y < hw; y++)
        for (int x = 0; x < hw; x++)
            for (int ty = 0; ty < k; ty++)
                for (int tx = 0; tx < k; tx++)
                    a[((int64_t)y * hw + x) * taps + ty * k + tx] = img + ((size_t)(y + ty) * side + x + tx) * c;
    static const char *const isas[] = {"avx512vnni", "avxvnni", "avx2", "portable"};
    enum { NISA = sizeof isas / sizeof isas[0] };
    double macs = (double)m * taps * c * n, best[NISA] = {0}, peak = 0;
    int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512f");
    for (int rep = 0; rep < 25; rep++) {
        if (vnni) {
            double p = vnni_peak();
            peak = p > peak ? p : peak;
        }
        for (int i = 0; i < NISA; i++) {
            qr_iconv_fn fn = qr_iconv_u8s8_isa(isas[i]);
            if (!fn || (rep >= 3 && !strcmp(isas[i], "portable"))) /* the portable one is slow; 3 timings */
                continue;
            int calls = 0;
            double t0 = now_s(), t;
            do {
                fn(out, n, a, taps, m, w, init, c, 0, n, n);
                calls++;
            } while ((t = now_s() - t0) < 0.04);
            if (calls * macs / t > best[i])
                best[i] = calls * macs / t;
        }
    }
    for (int i = 0; i < NISA; i++)
        if (best[i] > 0)
            printf("m %lld taps %lld k4 %d n %d  %-10s %7.1f GMAC/s  (%.0f%% of vpdpbusd's %.1f)\n", (long long)m,
                   (long long)taps, c, n, isas[i], best[i] * 1e-9, peak > 0 ? 100 * best[i] / peak : 0.0,
                   peak * 1e-9);
    free(img);
    free(w);
    free(init);
    free(out);
    free(a);
}

int main(void)
{
    __builtin_cpu_init();
    layer(56, 3, 64, 64);
    layer(28, 3, 128, 128);
    layer(56, 1, 64, 256);
    return 0;
}
