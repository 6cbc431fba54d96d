/* Sigmoid over f32 values with AVX2 and FMA (f32_rows.h): elementwise.c's portable form in double,
 * 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|) (never past 1, so never overflowing),
 * four values a vector, rounded once to f32. exp(t) for t in [-700, 0] (exp(-700) is under the
 * smallest f32 by far: both forms then round to 1 or to 0 as with the exact e): t = k ln2 + r, |r| <=
 * ln2 / 2 (Cody-Waite: ln2 in two parts), exp(r) by its Taylor series to r^13 / 13! (the first term
 * left out is 2.6e-17 of exp(r)), 2^k put in the exponent bits. Its double differs from libm's exp by
 * a few units of the last place, about 2^-28 of an f32 step: the f32 results are the portable loop's
 * but where the exact sigmoid lies that close to a rounding boundary (test_elementwise counts them).
 * libm's exp called per value was 68% of EfficientNet-B0's f32 run on AMD Zen 3 (its 49 Sigmoid
 * nodes: the SiLU activations and the squeeze-and-excitation gates).
 *
 * The Horner form is a chain of 13 dependent FMAs a vector: one vector at a time left the FMA units
 * idle for their latency (5.05 ns a value on Zen 3, 1.2M values of EfficientNet-B0's first expanded
 * SiLU, 36% of its int8-dynamic-fallback quantize). Six vectors go through each step together
 * (1.3 ns); each value sees the same operations in the same order, so the same bits. */
#include <immintrin.h>

#include "f32_rows.h"
#include "options.h"

int qr_sigmoid_f32_vector(void)
{
    if (qr_options_get()->f32_rows_portable)
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE TARGET static inline __attribute__((always_inline))

/* sigmoid of the n (a constant where inlined) vectors of four doubles x, step by step across them:
 * exp(t) for t = max(-700, -|x|) (NaN stays NaN), then elementwise.c's u_sigmoid's forms. */
INLINE void sigmoid_pd(const __m256d *x, __m256d *y, const int n)
{
    const __m256d log2e = _mm256_set1_pd(1.4426950408889634074), ln2_hi = _mm256_set1_pd(6.93145751953125e-1),
                  ln2_lo = _mm256_set1_pd(1.42860682030941723212e-6), one = _mm256_set1_pd(1.0),
                  sign = _mm256_set1_pd(-0.0);
    /* 1/i!, Horner from 1/13! down to 1 */
    static const double c[14] = {1.0,
                                 1.0,
                                 1.0 / 2,
                                 1.0 / 6,
                                 1.0 / 24,
                                 1.0 / 120,
                                 1.0 / 720,
                                 1.0 / 5040,
                                 1.0 / 40320,
                                 1.0 / 362880,
                                 1.0 / 3628800,
                                 1.0 / 39916800,
                                 1.0 / 479001600,
                                 1.0 / 6227020800.0};
    __m256d k[6], r[6], p[6];
    #pragma GCC unroll 6
    for (int j = 0; j < n; j++) {
        __m256d t = _mm256_or_pd(x[j], sign);        /* -|x| (NaN stays NaN) */
        t = _mm256_max_pd(_mm256_set1_pd(-700.0), t); /* max(lo, NaN) is NaN: the second operand */
        k[j] = _mm256_round_pd(_mm256_mul_pd(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r[j] = _mm256_fnmadd_pd(k[j], ln2_lo, _mm256_fnmadd_pd(k[j], ln2_hi, t));
        p[j] = _mm256_set1_pd(c[13]);
    }
    for (int i = 12; i >= 0; i--) {
        #pragma GCC unroll 6
        for (int j = 0; j < n; j++)
            p[j] = _mm256_fmadd_pd(p[j], r[j], _mm256_set1_pd(c[i]));
    }
    #pragma GCC unroll 6
    for (int j = 0; j < n; j++) {
        /* 2^k: k in [-1010, 0], a normal double; NaN's k is a garbage exponent times a NaN p */
        __m128i ki = _mm256_cvtpd_epi32(k[j]);
        __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(ki), _mm256_set1_epi64x(1023)), 52);
        __m256d e = _mm256_mul_pd(p[j], _mm256_castsi256_pd(bits)), d = _mm256_add_pd(one, e);
        __m256d ge = _mm256_cmp_pd(x[j], _mm256_setzero_pd(), _CMP_GE_OQ); /* -0 >= 0, NaN not */
        y[j] = _mm256_div_pd(_mm256_blendv_pd(e, one, ge), d);
    }
}

/* The n vectors of four values at x, rounded to f32 at y. */
INLINE void sigmoid_ps(const float *x, float *y, const int n)
{
    __m256d v[6], s[6];
    #pragma GCC unroll 6
    for (int j = 0; j < n; j++)
        v[j] = _mm256_cvtps_pd(_mm_loadu_ps(x + 4 * j));
    sigmoid_pd(v, s, n);
    #pragma GCC unroll 6
    for (int j = 0; j < n; j++)
        _mm_storeu_ps(y + 4 * j, _mm256_cvtpd_ps(s[j]));
}

TARGET void qr_sigmoid_f32_avx2(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 24 <= n; i += 24)
        sigmoid_ps(x + i, y + i, 6);
    for (; i + 4 <= n; i += 4)
        sigmoid_ps(x + i, y + i, 1);
    if (i < n) { /* the last few through a padded vector */
        float in[4] = {0}, out[4];
        for (int64_t j = i; j < n; j++)
            in[j - i] = x[j];
        sigmoid_ps(in, out, 1);
        for (int64_t j = i; j < n; j++)
            y[j] = out[j - i];
    }
}
