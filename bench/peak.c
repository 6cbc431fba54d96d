/* The machine's compute limit for `make bench`: u8 x s8 -> s32 multiply-accumulates with
 * AVX-512 VNNI (vpdpbusd on zmm, the wrapping form QRL's microkernel uses) and f32 FMAs on zmm,
 * one core, in GMAC/s. Twelve independent accumulator chains hide the instructions' latency, so
 * the loop runs at the issue rate. Prints JSON: {"vnni_gmacs": X, "fma_gflop_pairs": Y} (null
 * where the CPU lacks the feature). Build: cc -O2 bench/peak.c -o peak (the ISA code is enabled
 * per function; what runs is chosen by CPUID at run time). */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12
#define ITERS 20000000L

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f,avx512vnni"))) static double vnni_gmacs(void)
{
    __m512i acc[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_epi32(c);
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
    double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
#pragma GCC unroll 12 /* the chains stay in registers */
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    double t = now_s() - t0;
    int32_t sink = 0; /* keeps the loop: its result is used */
    for (int c = 0; c < CHAINS; c++)
        sink ^= _mm512_reduce_add_epi32(acc[c]);
    if (sink == 42)
        fputs(" ", stderr);
    return (double)ITERS * CHAINS * 64 / t * 1e-9; /* 64 u8 x s8 products per instruction */
}

__attribute__((target("avx512f,fma"))) static double fma_gflop_pairs(void)
{
    __m512 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)c);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
#pragma GCC unroll 12
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    double t = now_s() - t0;
    float sink = 0;
    for (int c = 0; c < CHAINS; c++)
        sink += _mm512_reduce_add_ps(acc[c]);
    if (sink == 42.0f)
        fputs(" ", stderr);
    return (double)ITERS * CHAINS * 16 / t * 1e-9;
}

int main(void)
{
    __builtin_cpu_init();
    int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512f");
    int fma = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    printf("{\"vnni_gmacs\": ");
    if (vnni)
        printf("%.1f", vnni_gmacs());
    else
        printf("null");
    printf(", \"fma_gflop_pairs\": ");
    if (fma)
        printf("%.1f", fma_gflop_pairs());
    else
        printf("null");
    printf("}\n");
    return 0;
}
