/* lookup.h's kernels. AVX-512 VBMI: the 256 bytes of the table sit in four registers; vpermi2b
 * picks from the first two by an index's low 7 bits, again from the last two, and the index's top
 * bit (vpmovb2m) chooses between both results. An i8 index x reads table[x + 128], whose top bit
 * is x's flipped: the same code with the halves swapped. Tails by byte masks. */
#include "lookup.h"

#include <immintrin.h>

void qr_lookup8_portable(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t table[256], uint8_t flip)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = table[x[i] ^ flip];
}

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

TARGET static inline __m512i lookup64(__m512i idx, __m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
    __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1), hi = _mm512_permutex2var_epi8(t2, idx, t3);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

TARGET static void lookup8_avx512vbmi(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t table[256], uint8_t flip)
{
    const uint8_t *first = flip & 0x80 ? table + 128 : table, *second = flip & 0x80 ? table : table + 128;
    const __m512i t0 = _mm512_loadu_si512(first), t1 = _mm512_loadu_si512(first + 64);
    const __m512i t2 = _mm512_loadu_si512(second), t3 = _mm512_loadu_si512(second + 64);
    /* flip's low 7 bits (0 for QrlLookup's indexes) apply to the index itself */
    const __m512i low = _mm512_set1_epi8((char)(flip & 0x7f));
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m512i a = _mm512_xor_si512(_mm512_loadu_si512(x + i), low);
        __m512i b = _mm512_xor_si512(_mm512_loadu_si512(x + i + 64), low);
        _mm512_storeu_si512(y + i, lookup64(a, t0, t1, t2, t3));
        _mm512_storeu_si512(y + i + 64, lookup64(b, t0, t1, t2, t3));
    }
    for (; i < n; i += 64) {
        __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - i)) - 1;
        __m512i a = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), low);
        _mm512_mask_storeu_epi8(y + i, m, lookup64(a, t0, t1, t2, t3));
    }
}

qr_lookup8_fn qr_lookup8_avx512vbmi(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vbmi")
               ? lookup8_avx512vbmi
               : NULL;
}

qr_lookup8_fn qr_lookup8_best(void)
{
    static qr_lookup8_fn best;
    if (!best) {
        qr_lookup8_fn f = qr_lookup8_avx512vbmi();
        best = f ? f : qr_lookup8_portable;
    }
    return best;
}
