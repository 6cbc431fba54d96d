/* The blocked 4-bit GEMV with AVX-512 (q4gemm.h): the codes of 16 columns x 8 k in one 64-byte
 * load, unpacked in registers. int8 (AVX-512 VNNI): the low nibbles (and 0x0f) and the high ones
 * (and 0xf0: 16 times the code) are four unsigned bytes per column lane, vpdpbusd'd against four
 * signed activations broadcast, int32 sums per block (the high ones' shifted back by 4), then the
 * block's term in f32. f32:
 * each lane's eight codes shifted out, converted and fma'd against one activation broadcast.
 * Tiles: 4 groups (64 columns) of one row, or 1 group of up to 4 rows sharing the unpacked codes;
 * each row's operations are the portable kernels', in their order. Only called when the CPU
 * reports the features (q4gemm.c). */
#include <immintrin.h>
#include <string.h>

#include "q4gemm.h"

#define TARGET_F __attribute__((target("avx512f,avx512bw,avx512dq")))
#define TARGET_V __attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni")))
#define INLINE static inline __attribute__((always_inline))
#ifndef PF
#define PF 4
#endif

TARGET_F INLINE __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Group g's columns of row m: acc (+ bias), only the real ones stored. */
TARGET_F INLINE void store_cols(float *y, const qr_q4w *w, const float *bias, int64_t g, __m512 acc)
{
    int64_t n0 = g * 16, left = w->N - n0;
    __mmask16 k = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    if (bias)
        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, bias + n0));
    if (left >= 16)
        _mm512_storeu_ps(y + n0, acc);
    else
        _mm512_mask_storeu_ps(y + n0, k, acc);
}

/* The 16 zero points of group g's block b: the file's, or 8. */
TARGET_F INLINE __m512i zeros16(const qr_q4w *w, int64_t g, int64_t b)
{
    if (!w->zeros)
        return _mm512_set1_epi32(8);
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(w->zeros + (g * w->nb + b) * 16)));
}

/* Group g's chunk of block b, and a prefetch of the one PF blocks on (all its lines, its scales
 * too): the hardware's prefetch of a tile's four streams fell behind on weights past the L3
 * cache (4096 x 11008 at level 4: 1.6 ms a run without, 1.2 with; PF 8 no better). */
TARGET_F INLINE const uint8_t *chunk_at(const qr_q4w *w, int64_t g, int64_t b)
{
    const uint8_t *p = w->chunks + (g * w->nb + b) * w->chunk;
    for (int64_t o = PF * w->chunk; o < (PF + 1) * w->chunk; o += 64)
        _mm_prefetch((const char *)p + o, _MM_HINT_T0);
    return p;
}

/* NG groups from g of R rows (NG * R <= 4). */
TARGET_V INLINE void i8_tile(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum,
                             const qr_q4w *w, const float *bias, int64_t g, const int NG, const int R)
{
    const int64_t bo = w->block / 8, nb = w->nb;
    const __m512i m4 = _mm512_set1_epi8(0x0f), h4 = _mm512_set1_epi8((char)0xf0);
    __m512 acc[4];
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i lo[4], hi[4];
        const uint8_t *cp[4];
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            lo[t] = hi[t] = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int j = 0; j < NG; j++)
            cp[j] = chunk_at(w, g + j, b);
        const int8_t *xb = qa + b * w->block;
                for (int64_t q = 0; q < bo; q++) {
            __m512i x0[4], x1[4];
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                x0[r] = bcast4(xb + r * w->kp + 8 * q);
                x1[r] = bcast4(xb + r * w->kp + 8 * q + 4);
            }
            #pragma GCC unroll 4
            for (int j = 0; j < NG; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(cp[j] + q * 64));
                /* the high nibbles left in place, 16 times the code (240 at most, still a u8): their
                 * sums are 16 times the codes', shifted back per block, which saves a shift per load */
                __m512i cl = _mm512_and_si512(v, m4), ch = _mm512_and_si512(v, h4);
                #pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    lo[j * R + r] = _mm512_dpbusd_epi32(lo[j * R + r], cl, x0[r]);
                    hi[j * R + r] = _mm512_dpbusd_epi32(hi[j * R + r], ch, x1[r]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int j = 0; j < NG; j++) {
            __m512 sb = _mm512_loadu_ps((const float *)(const void *)(cp[j] + w->block * 8));
            __m512i z = zeros16(w, g + j, b);
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512i d = _mm512_add_epi32(lo[j * R + r], _mm512_srai_epi32(hi[j * R + r], 4));
                __m512i zs = w->zeros ? _mm512_mullo_epi32(z, _mm512_set1_epi32(asum[r * nb + b]))
                                      : _mm512_set1_epi32((int32_t)(8u * (uint32_t)asum[r * nb + b]));
                __m512i t = _mm512_sub_epi32(d, zs);
                __m512 s = _mm512_mul_ps(_mm512_set1_ps(sa[r * nb + b]), sb);
                acc[j * R + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), s, acc[j * R + r]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < NG; j++)
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            store_cols(y + r * y_rs, w, bias, g + j, acc[j * R + r]);
}

TARGET_V void qr_q4_i8_avx512vnni(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum,
                                  int64_t rows, const qr_q4w *w, const float *bias, int64_t g0, int64_t g1)
{
    int64_t m = 0, kp = w->kp, nb = w->nb;
    for (; m + 4 <= rows; m += 4)
        for (int64_t g = g0; g < g1; g++)
            i8_tile(y + m * y_rs, y_rs, qa + m * kp, sa + m * nb, asum + m * nb, w, bias, g, 1, 4);
    for (; m < rows; m++) {
        int64_t g = g0;
        for (; g + 4 <= g1; g += 4)
            i8_tile(y + m * y_rs, y_rs, qa + m * kp, sa + m * nb, asum + m * nb, w, bias, g, 4, 1);
        for (; g < g1; g++)
            i8_tile(y + m * y_rs, y_rs, qa + m * kp, sa + m * nb, asum + m * nb, w, bias, g, 1, 1);
    }
}

/* The same tiles on f32 activations: two fma chains per column and row (k % 8 < 4, >= 4). */
TARGET_F INLINE void f32_tile(float *y, int64_t y_rs, const float *af, const float *asum, const qr_q4w *w,
                              const float *bias, int64_t g, const int NG, const int R)
{
    const int64_t bo = w->block / 8, nb = w->nb;
    const __m512i m4 = _mm512_set1_epi32(0x0f);
    __m512 acc[4];
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512 lo[4], hi[4];
        const uint8_t *cp[4];
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            lo[t] = hi[t] = _mm512_setzero_ps();
        #pragma GCC unroll 4
        for (int j = 0; j < NG; j++)
            cp[j] = chunk_at(w, g + j, b);
        const float *ab = af + b * w->block;
                for (int64_t q = 0; q < bo; q++) {
            #pragma GCC unroll 4
            for (int j = 0; j < NG; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(cp[j] + q * 64));
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    __m512 c = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * i), m4));
                    #pragma GCC unroll 4
                    for (int r = 0; r < R; r++)
                        lo[j * R + r] = _mm512_fmadd_ps(_mm512_set1_ps(ab[r * w->kp + 8 * q + i]), c, lo[j * R + r]);
                }
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    __m512 c = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * i + 4), m4));
                    #pragma GCC unroll 4
                    for (int r = 0; r < R; r++)
                        hi[j * R + r] =
                            _mm512_fmadd_ps(_mm512_set1_ps(ab[r * w->kp + 8 * q + 4 + i]), c, hi[j * R + r]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int j = 0; j < NG; j++) {
            __m512 sb = _mm512_loadu_ps((const float *)(const void *)(cp[j] + w->block * 8));
            __m512 z = _mm512_cvtepi32_ps(zeros16(w, g + j, b));
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512 dot = _mm512_add_ps(lo[j * R + r], hi[j * R + r]);
                __m512 t = _mm512_fnmadd_ps(z, _mm512_set1_ps(asum[r * nb + b]), dot);
                acc[j * R + r] = _mm512_fmadd_ps(t, sb, acc[j * R + r]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < NG; j++)
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            store_cols(y + r * y_rs, w, bias, g + j, acc[j * R + r]);
}

TARGET_F void qr_q4_f32_avx512(float *y, int64_t y_rs, const float *af, const float *asum, int64_t rows,
                               const qr_q4w *w, const float *bias, int64_t g0, int64_t g1)
{
    int64_t m = 0, kp = w->kp, nb = w->nb;
    for (; m + 4 <= rows; m += 4)
        for (int64_t g = g0; g < g1; g++)
            f32_tile(y + m * y_rs, y_rs, af + m * kp, asum + m * nb, w, bias, g, 1, 4);
    for (; m < rows; m++) {
        int64_t g = g0;
        for (; g + 4 <= g1; g += 4)
            f32_tile(y + m * y_rs, y_rs, af + m * kp, asum + m * nb, w, bias, g, 4, 1);
        for (; g < g1; g++)
            f32_tile(y + m * y_rs, y_rs, af + m * kp, asum + m * nb, w, bias, g, 1, 1);
    }
}

/* One row per block: amax, then a * (127 / amax) rounded half to even (vrndscaleps), as
 * qr_q4_quant_ref. */
TARGET_F void qr_q4_quant_avx512(const float *a, int64_t K, int64_t block, int8_t *qa, float *sa, int32_t *asum)
{
    int64_t nb = (K + block - 1) / block;
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * block, len = K - k0 < block ? K - k0 : block;
        __m512 mx = _mm512_setzero_ps();
        for (int64_t i = 0; i < len; i += 16) {
            __mmask16 k = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
            mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(k, a + k0 + i)));
        }
        float amax = _mm512_reduce_max_ps(mx);
        sa[b] = amax / 127.0f;
        __m512 inv = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m512i s = _mm512_setzero_si512();
        for (int64_t i = 0; i < block; i += 16) {
            int64_t left = len - i;
            __mmask16 k = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + k0 + i), inv);
            __m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            s = _mm512_add_epi32(s, q);
            _mm_storeu_si128((__m128i *)(void *)(qa + k0 + i), _mm512_cvtepi32_epi8(q));
        }
        asum[b] = _mm512_reduce_add_epi32(s);
    }
}
