/* f32_rows.h's kernels with AVX-512F: 16 values a vector, tails by masks. Only called when the
 * CPU reports avx512f (qr_f32_rows_avx512 checks).
 *
 * exp: Cephes' expf (Cody-Waite reduction by ln 2 in two parts, degree-5 polynomial on
 * [-ln2/2, ln2/2], relative error under 1 ulp there) with FMA, and the power of two by vscalefps,
 * which gives inf above 88.7; below ln(FLT_MIN) = -87.34 it gives 0 (subnormal results, under
 * 1.2e-38, are flushed).
 * erf: |x| <= 0.921875: x * P(x^2), degree 6 (relative error of the polynomial 4e-10);
 * up to 3.925: 1 - exp(-x^2) * R(|x| - 1.5), R of degree 8 fitted to erfc(x) * exp(x^2) weighted
 * by exp(-x^2) (absolute error of erfc 4.3e-9, 0.07 ulp of 1); beyond: +-1. Coefficients fitted with numpy (least squares on Chebyshev nodes,
 * reweighted towards minimax); tests/unit/test_f32_rows.c measures the whole function at most
 * 1.5 ulp from the exact erf on [-6, 6] (1.07 measured). */
#include <immintrin.h>
#include <math.h>

#include "f32_rows.h"

#define TARGET __attribute__((target("avx512f,fma")))

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* exp(x + lo) for x in [-87.3, 88.7] (no range handling), lo a correction far below x's ulp. */
TARGET static inline __m512 exp_core(__m512 x, __m512 lo)
{
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    r = _mm512_add_ps(r, lo);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* The sum of v's 16 floats into two vectors of 8 doubles. */
TARGET static inline void add_pd(__m512d *s0, __m512d *s1, __m512 v)
{
    *s0 = _mm512_add_pd(*s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *s1 = _mm512_add_pd(*s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

TARGET static inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
TARGET static inline __m512d hi_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
TARGET static inline __m512 join_ps(__m512d lo, __m512d hi)
{
    __m256 l = _mm512_cvtpd_ps(lo), h = _mm512_cvtpd_ps(hi);
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(l)), _mm256_castps_pd(h), 1));
}

/* exp(x - max) of one softmax vector, nmx = -max, zero outside k: x - max exactly, as d + lo
 * (Knuth's TwoSum; rounding d alone cost up to 8 ulp of exp at |d| ~ 20, and 30 at 80). d <= 0 or
 * NaN (x <= max), so only the lower clamp: below ln(FLT_MIN) the result is 0 (a causal mask's
 * -inf, whose NaN lo goes with it; no subnormal goes through the arithmetic); NaN stays NaN. */
TARGET static inline __m512 softmax_exp(__m512 v, __m512 nmx, __mmask16 k)
{
    __m512 d = _mm512_add_ps(v, nmx), bv = _mm512_sub_ps(d, v), av = _mm512_sub_ps(d, bv);
    __m512 lo = _mm512_add_ps(_mm512_sub_ps(v, av), _mm512_sub_ps(nmx, bv));
    __mmask16 keep = _mm512_mask_cmp_ps_mask(k, d, _mm512_set1_ps(-87.33654f), _CMP_NLT_UQ);
    return _mm512_maskz_mov_ps(keep, exp_core(_mm512_max_ps(_mm512_set1_ps(-87.33654f), d), lo));
}

TARGET static inline __mmask16 tail_mask2(int64_t left) { return left > 0 ? tail_mask(left) : 0; }

/* Three passes over a row (it stays in L1): the max; exp(x - max) stored, and summed in double
 * from pairs of vectors added in f32 (one rounding, 2^-24 of the sum at most: the conversions to
 * double were a fifth of the row's time); the quotients e / s by the reciprocal of s's f32 part
 * and one Markstein correction against both parts of s (e - q s_hi - q s_lo, exact to 2^-48 of
 * e): the correctly rounded e / s up to s's own error, where a vector division was a quarter of
 * the time (one every 10 cycles). Quotients under ~2^-100 may be an ulp off (the correction's
 * residual is subnormal there). */
TARGET static void softmax_avx512(const float *x, float *y, int64_t rows, int64_t n)
{
    const __m512 minf = _mm512_set1_ps(-INFINITY);
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        __m512 m0 = minf, m1 = minf;
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
            m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
        }
        for (; i < n; i += 16)
            m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(minf, tail_mask(n - i), x + i));
        /* a NaN max_ps dropped still makes its exp NaN, and with it the sum and the row */
        __m512 nmx = _mm512_set1_ps(-_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
        __m512d s0 = _mm512_setzero_pd(), s1 = s0;
        for (i = 0; i < n; i += 32) {
            __mmask16 k0 = tail_mask(n - i), k1 = tail_mask2(n - i - 16);
            __m512 e0 = softmax_exp(_mm512_maskz_loadu_ps(k0, x + i), nmx, k0);
            __m512 e1 = softmax_exp(_mm512_maskz_loadu_ps(k1, x + i + 16), nmx, k1);
            _mm512_mask_storeu_ps(y + i, k0, e0);
            _mm512_mask_storeu_ps(y + i + 16, k1, e1);
            add_pd(&s0, &s1, _mm512_add_ps(e0, e1));
        }
        /* s >= 1 (the max's exp), or NaN: then every quotient is NaN */
        double s = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        float shi = (float)s, slo = (float)(s - (double)shi);
        __m512 rv = _mm512_set1_ps(1.0f / shi), hv = _mm512_set1_ps(shi), lv = _mm512_set1_ps(slo);
        for (i = 0; i < n; i += 16) {
            __mmask16 k = tail_mask(n - i);
            __m512 e = _mm512_maskz_loadu_ps(k, y + i), q = _mm512_mul_ps(e, rv);
            __m512 res = _mm512_fnmadd_ps(q, lv, _mm512_fnmadd_ps(q, hv, e));
            _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(res, rv, q));
        }
    }
}

/* The variance from one pass's sums where that is as good as two passes': s and ss (the sums of
 * x and x^2 in double; each x^2 exact) have errors under n 2^-53 of sum |x| and sum x^2, so
 * ss / n - mean^2 is off by at most ~3 n 2^-53 (var + mean^2); while 3 n (var + mean^2) <= 2^23 var
 * that is under 2^-30 of var, far below the f32 output's rounding. Otherwise (a mean far from 0
 * against the spread, a NaN or inf) the second pass over x - mean, as before. */
#define LN_ONE_PASS (double)(1 << 23)

TARGET static void layernorm_avx512(const float *x, float *y, int64_t rows, int64_t n, const float *scale,
                                    const float *bias, double eps, float *mean_out, float *inv_out)
{
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        /* four chains of sums and of squares: one add's latency a vector was the loop's bound */
        __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            __m512 v = _mm512_loadu_ps(x + i), w = _mm512_loadu_ps(x + i + 16);
            __m512d a = lo_pd(v), b = hi_pd(v), c = lo_pd(w), d = hi_pd(w);
            s0 = _mm512_add_pd(s0, a), s1 = _mm512_add_pd(s1, b), s2 = _mm512_add_pd(s2, c), s3 = _mm512_add_pd(s3, d);
            q0 = _mm512_fmadd_pd(a, a, q0), q1 = _mm512_fmadd_pd(b, b, q1);
            q2 = _mm512_fmadd_pd(c, c, q2), q3 = _mm512_fmadd_pd(d, d, q3);
        }
        for (; i < n; i += 16) { /* masked lanes load 0: nothing to either sum */
            __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
            __m512d a = lo_pd(v), b = hi_pd(v);
            s0 = _mm512_add_pd(s0, a), s1 = _mm512_add_pd(s1, b);
            q0 = _mm512_fmadd_pd(a, a, q0), q1 = _mm512_fmadd_pd(b, b, q1);
        }
        double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
        double ss = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(q0, q1), _mm512_add_pd(q2, q3)));
        double mean = s / (double)n, msq = ss / (double)n, var = msq - mean * mean;
        __m512d md = _mm512_set1_pd(mean);
        if (!(3.0 * (double)n * msq <= LN_ONE_PASS * var)) {
            __m512d p0 = _mm512_setzero_pd(), p1 = p0;
            for (i = 0; i < n; i += 16) {
                __mmask16 k = tail_mask(n - i);
                __m512 v = _mm512_maskz_loadu_ps(k, x + i);
                /* masked lanes hold 0 - mean: keep them out of the sum */
                __m512d d0 = _mm512_maskz_sub_pd((__mmask8)k, lo_pd(v), md);
                __m512d d1 = _mm512_maskz_sub_pd((__mmask8)(k >> 8), hi_pd(v), md);
                p0 = _mm512_add_pd(p0, _mm512_mul_pd(d0, d0));
                p1 = _mm512_add_pd(p1, _mm512_mul_pd(d1, d1));
            }
            var = _mm512_reduce_add_pd(_mm512_add_pd(p0, p1)) / (double)n;
        }
        double inv = 1.0 / sqrt(var + eps);
        __m512d id = _mm512_set1_pd(inv);
        for (i = 0; i < n; i += 16) {
            __mmask16 k = tail_mask(n - i);
            __m512 v = _mm512_maskz_loadu_ps(k, x + i), sc = _mm512_maskz_loadu_ps(k, scale + i);
            __m512d lo = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(lo_pd(v), md), id), lo_pd(sc));
            __m512d hi = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(hi_pd(v), md), id), hi_pd(sc));
            if (bias) {
                __m512 b = _mm512_maskz_loadu_ps(k, bias + i);
                lo = _mm512_add_pd(lo, lo_pd(b));
                hi = _mm512_add_pd(hi, hi_pd(b));
            }
            _mm512_mask_storeu_ps(y + i, k, join_ps(lo, hi));
        }
        if (mean_out)
            mean_out[r] = (float)mean;
        if (inv_out)
            inv_out[r] = (float)inv;
    }
}

#define ERF_SPLIT 0.921875f
#define ERF_ONE 3.925f
#define ERF_CENTER 1.5f
#define ERF_C0_HI 1.12837922573089599609375f /* 2/sqrt(pi) = HI + LO */
#define ERF_C0_LO -5.86353834e-08f

static const float erf_small[] = {ERF_C0_HI,     -0.37612634897232056f,  0.11283695697784424f,
                                  -0.026859398931264877f, 0.005201032850891352f, -0.0008142709848470986f,
                                  8.37012121337466e-05f};
static const float erf_big[] = {0.32158538699150085f,   -0.16362272202968597f,  0.07615397870540619f,
                                -0.0329316072165966f,   0.013346467167139053f,  -0.005148180760443211f,
                                0.0019832500256597996f, -0.0006862533045932651f, 0.0001280078722629696f};

TARGET static inline __m512 horner(const float *c, int deg, __m512 t)
{
    __m512 p = _mm512_set1_ps(c[deg]);
    for (int i = deg - 1; i >= 0; i--)
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
    return p;
}

/* Bit operations on floats with AVX-512F alone (the _ps forms are AVX-512DQ). */
#define BITS(op, a, b) _mm512_castsi512_ps(op(_mm512_castps_si512(a), _mm512_castps_si512(b)))

TARGET static inline __m512 erf_zmm(__m512 x)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = BITS(_mm512_andnot_si512, sign, x);
    /* x * (2/sqrt(pi) + t * Q(t)) with 2/sqrt(pi) in two parts: its f32 rounding alone cost
     * 0.5 ulp, and 2 ulp in all near 0 */
    __m512 t = _mm512_mul_ps(x, x);
    __m512 q = _mm512_fmadd_ps(horner(erf_small + 1, 5, t), t, _mm512_set1_ps(ERF_C0_LO));
    __m512 y = _mm512_fmadd_ps(x, _mm512_set1_ps(ERF_C0_HI), _mm512_mul_ps(x, q));
    /* not <= (ordered): NaN goes the big way, whose exp keeps it */
    __mmask16 big = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(ERF_SPLIT), _CMP_NLE_UQ);
    if (big) {
        __m512 c = _mm512_min_ps(_mm512_set1_ps(ERF_ONE), ax); /* NaN stays */
        __m512 rr = horner(erf_big, 8, _mm512_sub_ps(c, _mm512_set1_ps(ERF_CENTER)));
        /* -c^2 in [-15.4, -0.85]: no range handling (NaN passes through) */
        __m512 e = exp_core(_mm512_mul_ps(BITS(_mm512_xor_si512, c, sign), c), _mm512_setzero_ps());
        __m512 v = _mm512_fnmadd_ps(e, rr, _mm512_set1_ps(1.0f));
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(ERF_ONE), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
        y = _mm512_mask_mov_ps(y, big, v);
    }
    /* the sign of x (erf(-0) = -0, where x * c + x * q gave +0) */
    return BITS(_mm512_or_si512, BITS(_mm512_andnot_si512, sign, y), BITS(_mm512_and_si512, x, sign));
}

TARGET static void erf_avx512(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, k, erf_zmm(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

/* tanh: |x| <= 0.625: x + x^3 Q(x^2), Q of degree 4 (relative error of 1 + x^2 Q 3.9e-9); beyond:
 * 1 - 2 / (exp(2|x|) + 1) with |x| clamped to 10 (tanh(10) rounds to 1), the sign of x. */
#define TANH_SPLIT 0.625f
static const float tanh_small[] = {-0.3333325982093811f, 0.13331127166748047f, -0.053721070289611816f,
                                   0.020590992644429207f, -0.005659993272274733f};

TARGET static inline __m512 tanh_zmm(__m512 x)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = BITS(_mm512_andnot_si512, sign, x), t = _mm512_mul_ps(x, x);
    __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(x, t), horner(tanh_small, 4, t), x);
    __mmask16 big = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(TANH_SPLIT), _CMP_GT_OQ); /* NaN stays small */
    if (big) {
        __m512 a = _mm512_min_ps(ax, _mm512_set1_ps(10.0f));
        __m512 e = exp_core(_mm512_add_ps(a, a), _mm512_setzero_ps());
        __m512 q = _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
        __m512 v = _mm512_sub_ps(_mm512_set1_ps(1.0f), q);
        y = _mm512_mask_mov_ps(y, big, v);
    }
    /* the sign of x (tanh(-0) = -0, where x t Q + x gave +0) */
    return BITS(_mm512_or_si512, BITS(_mm512_andnot_si512, sign, y), BITS(_mm512_and_si512, x, sign));
}

TARGET static void tanh_avx512(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, k, tanh_zmm(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

/* The portable loop's operations in double, in its order (a * x, then + b; x / 6, then + 0.5),
 * the clamp as two masked moves that a NaN's false compares leave alone. */
TARGET static inline __m512d hard_pd(__m512d x, __m512d a, __m512d b, int swish)
{
    const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
    __m512d v = swish ? _mm512_add_pd(_mm512_div_pd(x, _mm512_set1_pd(6.0)), _mm512_set1_pd(0.5))
                      : _mm512_add_pd(_mm512_mul_pd(a, x), b);
    v = _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, one, _CMP_GT_OQ), one);
    v = _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, zero, _CMP_LT_OQ), zero);
    return swish ? _mm512_mul_pd(x, v) : v;
}

TARGET static void hard_avx512(const float *x, float *y, int64_t n, double a, double b, int swish)
{
    const __m512d va = _mm512_set1_pd(a), vb = _mm512_set1_pd(b);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        _mm512_mask_storeu_ps(y + i, k, join_ps(hard_pd(lo_pd(v), va, vb, swish), hard_pd(hi_pd(v), va, vb, swish)));
    }
}

/* The GELU chain in one pass (f32_rows.h's qr_gelu_consts): the nodes' operations in their order,
 * each rounded as the node rounds it (a divide stays a divide, no FMA), erf_zmm and tanh_zmm as
 * the Erf and Tanh nodes run them: the nodes' bits, without writing and reading four or eight
 * intermediate tensors (bert's FFN: 0.5 MB each at batch 1). */
TARGET static void gelu_avx512(const float *x, float *y, int64_t n, const qr_gelu_consts *g)
{
    const __m512 c0 = _mm512_set1_ps(g->c[0]), c1 = _mm512_set1_ps(g->c[1]), c2 = _mm512_set1_ps(g->c[2]),
                 c3 = _mm512_set1_ps(g->c[3]);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i), r;
        if (g->tanh_form) {
            __m512 u = _mm512_add_ps(v, _mm512_mul_ps(c0, _mm512_mul_ps(v, _mm512_mul_ps(v, v))));
            r = _mm512_mul_ps(c3, _mm512_mul_ps(v, _mm512_add_ps(c2, tanh_zmm(_mm512_mul_ps(c1, u)))));
        } else {
            r = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(erf_zmm(_mm512_div_ps(v, c0)), c1), v), c2);
        }
        _mm512_mask_storeu_ps(y + i, k, r);
    }
}

static const qr_f32_rows table = {"avx512",    softmax_avx512, layernorm_avx512, erf_avx512,
                                  tanh_avx512, hard_avx512,    gelu_avx512};

const qr_f32_rows *qr_f32_rows_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? &table : NULL;
}
