/* conv.c's depthwise runs' taps with AVX2 (window_f32.h). GCC's avx2 clone of the generic
 * 16-float vectors that dw_runs' portable loop is written in kept them on the stack between
 * operations (MobileNetV2's depthwise layers were 58% of its f32 run on AMD Zen 3); here 8 sums of
 * 8 floats stay in registers over every tap. Each output is the same multiplies and adds in the
 * same order as the loop's (vmulps then vaddps: no FMA, which target "avx2" alone cannot emit),
 * so the same bits. */
#include <immintrin.h>

#include "options.h"
#include "window_f32.h"

int qr_window_avx2(void)
{
    if (qr_options_get()->window_portable)
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f");
}

#define TARGET __attribute__((target("avx2")))

/* Sums [i, i + 8 * NV) over the taps, NV vectors of 8 in registers (NV a constant where inlined). */
TARGET static inline __attribute__((always_inline)) void block(float *restrict a, const float *restrict d,
                                                               const int64_t *off, const float *w, int64_t ntaps,
                                                               int64_t i, const int NV)
{
    __m256 s[8];
    #pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
        s[v] = _mm256_setzero_ps();
    for (int64_t t = 0; t < ntaps; t++) {
        const float *src = d + off[t] + i;
        __m256 wt = _mm256_set1_ps(w[t]);
        #pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            s[v] = _mm256_add_ps(s[v], _mm256_mul_ps(wt, _mm256_loadu_ps(src + 8 * v)));
    }
    #pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
        _mm256_storeu_ps(a + i + 8 * v, s[v]);
}

TARGET void qr_dw_taps_f32_avx2(float *restrict a, const float *restrict d, const int64_t *off, const float *w,
                                int64_t ntaps, int64_t n)
{
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        block(a, d, off, w, ntaps, i, 8);
    for (; i + 8 <= n; i += 8)
        block(a, d, off, w, ntaps, i, 1);
    for (int64_t r = i; r < n; r++) { /* the last few: the loop's own order */
        float s = 0;
        for (int64_t t = 0; t < ntaps; t++)
            s += w[t] * d[off[t] + r];
        a[r] = s;
    }
}
