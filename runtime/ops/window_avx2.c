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

/* Output columns [lo, hi) whose input column ox * s + b lies in [0, W). */
static void valid_cols(int64_t b, int64_t s, int64_t W, int64_t OW, int64_t *lo, int64_t *hi)
{
    *lo = b < 0 ? (-b + s - 1) / s : 0;
    *hi = W - 1 - b >= 0 ? (W - 1 - b) / s + 1 : 0;
    *hi = *hi < OW ? *hi : OW;
    *lo = *lo < *hi ? *lo : *hi;
}

/* One output row's maxima: the row starts at -inf and takes each window position's values in
 * window order, _mm256_max_ps(v, a) being v > a ? v : a (the earlier of equals, never NaN), as
 * the scalar tails; padding is skipped, as the definition. Stride 1 and 2 columns in vectors
 * (stride 2 from two loads' even elements), others one at a time. */
TARGET void qr_maxpool_plane_f32_avx2(const qr_conv_geom *g, const float *x, float *y)
{
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], sw = g->stride[1];
    for (int64_t oy = 0; oy < OH; oy++) {
        float *yr = y + oy * OW;
        for (int64_t ox = 0; ox < OW; ox++)
            yr[ox] = -__builtin_inff();
        for (int64_t ky = 0; ky < g->kernel[0]; ky++) {
            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
            if (iy < 0 || iy >= H)
                continue;
            const float *row = x + iy * W;
            for (int64_t kx = 0; kx < g->kernel[1]; kx++) {
                int64_t b = kx * g->dilation[1] - g->pad_begin[1], lo, hi, ox;
                valid_cols(b, sw, W, OW, &lo, &hi);
                ox = lo;
                if (sw == 1)
                    for (; ox + 8 <= hi; ox += 8)
                        _mm256_storeu_ps(yr + ox, _mm256_max_ps(_mm256_loadu_ps(row + ox + b), _mm256_loadu_ps(yr + ox)));
                else if (sw == 2)
                    for (; ox + 8 <= hi && 2 * ox + b + 16 <= W; ox += 8) {
                        __m256 p = _mm256_loadu_ps(row + 2 * ox + b), q = _mm256_loadu_ps(row + 2 * ox + b + 8);
                        __m256 ev = _mm256_castpd_ps(
                            _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(p, q, 0x88)), 0xd8));
                        _mm256_storeu_ps(yr + ox, _mm256_max_ps(ev, _mm256_loadu_ps(yr + ox)));
                    }
                for (; ox < hi; ox++) {
                    float v = row[ox * sw + b];
                    yr[ox] = v > yr[ox] ? v : yr[ox];
                }
            }
        }
    }
}
