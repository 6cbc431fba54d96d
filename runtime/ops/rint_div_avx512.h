/* rint(x / s) on 16 f32 lanes with AVX-512, the division's bits without its cost, for the
 * quantizing loops (QuantizeLinear's and DynamicQuantizeRows' in quant.c, SimQuant's fake
 * quantization in quantizer/quantize.c). Only for functions compiled for AVX-512F.
 *
 * x * r with r = RN(1 / s) in place of x / s where it gives the same rint: RN(x r) is within
 * (2^-23 + 2^-24 + 2^-48) |x / s| of x / s, RN(x / s) within 2^-24 |x / s|, so the two quotients
 * are less than 2^-21 |q| apart, and their rints differ only where a half-integer lies within that
 * of q = RN(x r). Such lanes, and any not finite, take the vector back to vdivps (one in some 250
 * vectors of real data), the rest keep the product. r not a normal float: every vector divides.
 * A NaN quotient gives 0, as the portable loops' `q == q ? q : 0`. */
#ifndef QR_RINT_DIV_AVX512_H
#define QR_RINT_DIV_AVX512_H

#include <immintrin.h>

/* The reciprocal the lanes multiply by, and whether it may be used (`mul`). */
typedef struct {
    __m512 s, r;
    int mul;
} qr_rint_div;

__attribute__((target("avx512f"))) static inline qr_rint_div qr_rint_div_init(float s)
{
    const float rf = 1.0f / s;
    qr_rint_div d = {_mm512_set1_ps(s), _mm512_set1_ps(__builtin_isnormal(rf) ? rf : 1.0f), __builtin_isnormal(rf)};
    return d;
}

__attribute__((target("avx512f"))) static inline __m512 qr_rint_div_zmm(const qr_rint_div *d, __m512 x)
{
    const __m512 half = _mm512_set1_ps(0.5f), eps = _mm512_set1_ps(0x1p-21f);
    __m512 q = _mm512_mul_ps(x, d->r), rq = _mm512_roundscale_ps(q, _MM_FROUND_CUR_DIRECTION);
    /* | |q - rint(q)| - 1/2 |: q's distance to the nearest half-integer (NaN when q is not finite) */
    __m512 dist = _mm512_abs_ps(_mm512_sub_ps(_mm512_abs_ps(_mm512_sub_ps(q, rq)), half));
    if (!d->mul || _mm512_cmp_ps_mask(dist, _mm512_mul_ps(_mm512_abs_ps(q), eps), _CMP_GT_OQ) != 0xffff) {
        q = _mm512_div_ps(x, d->s);
        q = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(q, q, _CMP_ORD_Q), q); /* NaN as 0 */
        rq = _mm512_roundscale_ps(q, _MM_FROUND_CUR_DIRECTION);
    }
    return rq;
}

#endif
