/* The fused activation (op.h's qr_act_apply) on 16 f32 values with AVX-512, for the kernels
 * that apply it in their stores (sgemm_avx512.c, window_avx512.c): ordered compares, so NaN
 * stays, as qr_act_apply leaves it. Only for functions compiled for AVX-512F. */
#ifndef QR_ACT_AVX512_H
#define QR_ACT_AVX512_H

#include <immintrin.h>

#include "op.h"

__attribute__((target("avx512f"))) static inline __m512 qr_act_zmm(const qr_act *a, __m512 v)
{
    if (a->relu) {
        __m512 zero = _mm512_setzero_ps();
        return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LE_OQ), zero);
    }
    __m512 lo = _mm512_set1_ps(a->lo), hi = _mm512_set1_ps(a->hi);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
}

#endif
