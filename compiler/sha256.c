#include "sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void block(qc_sha256_ctx *s, const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

int qc_sha256_portable;

#if defined(__x86_64__)
/* nb blocks with the SHA extensions (SHA-NI: AMD since Zen, Intel since Ice Lake), several times
 * faster than block(): what matters when the ranks of a distributed quantize hash the model and the
 * calibration data (api/quantize.c), and the export hashes the samples. The state goes in the
 * lanes sha256rnds2 wants (ABEF, CDGH) and back; each group of 4 rounds adds its 4 words of K, the
 * message schedule runs 3 groups ahead (sha256msg1, then sha256msg2 with the words 7 back). */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_ni(uint32_t h[8], const unsigned char *p, size_t nb)
{
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL); /* big-endian words */
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);    /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);     /* EFGH */
    __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                          /* ABEF */
    s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                               /* CDGH */
    for (; nb > 0; nb--, p += 64) {
        __m128i abef = s0, cdgh = s1, m[4];
        for (int g = 0; g < 16; g++) { /* rounds 4g .. 4g + 3 */
            if (g < 4)
                m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), mask);
            __m128i msg = _mm_add_epi32(m[g % 4], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
            if (g >= 3 && g <= 14) { /* the words of group g + 1 */
                __m128i t = _mm_alignr_epi8(m[g % 4], m[(g + 3) % 4], 4);
                m[(g + 1) % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(m[(g + 1) % 4], t), m[g % 4]);
            }
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(msg, 0x0E));
            if (g >= 1 && g <= 12)
                m[(g + 3) % 4] = _mm_sha256msg1_epu32(m[(g + 3) % 4], m[g % 4]);
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    tmp = _mm_shuffle_epi32(s0, 0x1B);    /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);     /* DCHG */
    s0 = _mm_blend_epi16(tmp, s1, 0xF0);  /* DCBA */
    s1 = _mm_alignr_epi8(s1, tmp, 8);     /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], s0);
    _mm_storeu_si128((__m128i *)&h[4], s1);
}

/* Whether this CPU has the SHA extensions and SSE4.1 (cpuid: leaf 7 ebx bit 29, leaf 1 ecx bit 19). */
static int have_ni(void)
{
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        int sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c >> 19 & 1) && (c >> 9 & 1);
        known = sse41 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1);
    }
    return known;
}
#endif

/* nb consecutive blocks. */
static void blocks(qc_sha256_ctx *s, const unsigned char *p, size_t nb)
{
#if defined(__x86_64__)
    if (!qc_sha256_portable && have_ni()) {
        blocks_ni(s->h, p, nb);
        return;
    }
#endif
    for (; nb > 0; nb--, p += 64)
        block(s, p);
}

void qc_sha256_init(qc_sha256_ctx *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->nbytes = 0;
    s->nbuf = 0;
}

void qc_sha256_update(qc_sha256_ctx *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->nbytes += n;
    if (s->nbuf) {
        size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, p, k);
        s->nbuf += k;
        p += k;
        n -= k;
        if (s->nbuf < 64)
            return;
        blocks(s, s->buf, 1);
        s->nbuf = 0;
    }
    blocks(s, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(s->buf, p, n);
    s->nbuf = n;
}

void qc_sha256_final(qc_sha256_ctx *s, unsigned char out[QC_SHA256_LEN])
{
    uint64_t bits = s->nbytes * 8;
    /* 0x80, zeros up to 56 mod 64, then the bit length big-endian. */
    unsigned char pad[72] = {0x80};
    size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    qc_sha256_update(s, pad, npad + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void qc_sha256(const void *p, size_t n, unsigned char out[QC_SHA256_LEN])
{
    qc_sha256_ctx s;
    qc_sha256_init(&s);
    qc_sha256_update(&s, p, n);
    qc_sha256_final(&s, out);
}
