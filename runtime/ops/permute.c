/* Transpose by runs and blocks (permute.h). */
#include "permute.h"

#include <immintrin.h>
#include <string.h>

#include "tensor.h" /* QR_MAX_DIMS */

/* An odometer over n dims (sizes d) tracking an input and an output offset in elements. */
typedef struct odo {
    int n;
    int64_t d[QR_MAX_DIMS], is[QR_MAX_DIMS], os[QR_MAX_DIMS], idx[QR_MAX_DIMS];
    int64_t in, out;
} odo;

static void odo_next(odo *o)
{
    for (int k = o->n - 1; k >= 0; k--) {
        o->in += o->is[k];
        o->out += o->os[k];
        if (++o->idx[k] < o->d[k])
            return;
        o->in -= o->is[k] * o->d[k];
        o->out -= o->os[k] * o->d[k];
        o->idx[k] = 0;
    }
}

/* d[j * ds + i] = s[i * ss + j] for i, j < 16: four rounds of SSE2 unpacks, each interleaving
 * rows i and i + 8 in elements of 1, 2, 4 then 8 bytes; with the source rows taken in bit-reversed
 * order, row r ends up holding column r. */
#define TR_ROUND(LO, HI)                                                                                  \
    do {                                                                                                       \
        __m128i t[16];                                                                                         \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                                    \
            t[2 * i] = LO(v[i], v[i + 8]), t[2 * i + 1] = HI(v[i], v[i + 8]);                                  \
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)                                                  \
            v[i] = t[i];                                                                                       \
    } while (0)

static inline __attribute__((always_inline)) void transpose_16x16(uint8_t *d, int64_t ds, const uint8_t *s,
                                                                  int64_t ss)
{
    static const int rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    __m128i v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        v[i] = _mm_loadu_si128((const __m128i *)(const void *)(s + rev[i] * ss));
    TR_ROUND(_mm_unpacklo_epi8, _mm_unpackhi_epi8);
    TR_ROUND(_mm_unpacklo_epi16, _mm_unpackhi_epi16);
    TR_ROUND(_mm_unpacklo_epi32, _mm_unpackhi_epi32);
    TR_ROUND(_mm_unpacklo_epi64, _mm_unpackhi_epi64);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        _mm_storeu_si128((__m128i *)(void *)(d + i * ds), v[i]);
}

/* d[j * ds + i] = s[i * ss + j] for i < n, j < m: 16 x 16 tiles, the ragged edges one byte at a
 * time. */
static void transpose_tiles(uint8_t *d, int64_t ds, const uint8_t *s, int64_t ss, int64_t n, int64_t m)
{
    int64_t n16 = n & ~(int64_t)15, m16 = m & ~(int64_t)15;
    for (int64_t i = 0; i < n16; i += 16)
        for (int64_t j = 0; j < m16; j += 16)
            transpose_16x16(d + j * ds + i, ds, s + i * ss + j, ss);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i < n16 ? m16 : 0; j < m; j++)
            d[j * ds + i] = s[i * ss + j];
}

/* Blocks of 64 x 64 bytes: each block's source and destination lines stay in L1 while it is copied,
 * whatever the stride of the other side. */
void qr_transpose_bytes(uint8_t *d, int64_t ds, const uint8_t *s, int64_t ss, int64_t n, int64_t m)
{
    enum { TB = 64 };
    for (int64_t i = 0; i < n; i += TB)
        for (int64_t j = 0; j < m; j += TB)
            transpose_tiles(d + j * ds + i, ds, s + i * ss + j, ss, n - i < TB ? n - i : TB, m - j < TB ? m - j : TB);
}

/* dst[a * so + b] = src[a + b * sb] over a block of 4-byte elements: 4 x 4 squares by SSE
 * shuffles (moves only: the bits as they are, NaN payloads too), the ragged edges one by one. One
 * element at a time, the CNN's NHWC -> NCHW Transpose (32 x 49 an image, batch 64) took 0.069 ms on
 * the Intel Xeon model 167 against ONNX Runtime's 0.027 ReorderOutput (docs/runtime.md, stop 48). */
static inline __attribute__((always_inline)) void transpose_block_4(char *dst, const char *src, int64_t a0, int64_t a1,
                                                                    int64_t b0, int64_t b1, int64_t so, int64_t sb)
{
    const float *s = (const float *)(const void *)src;
    float *d = (float *)(void *)dst;
    int64_t a4 = a0 + (a1 - a0) / 4 * 4, b4 = b0 + (b1 - b0) / 4 * 4;
    for (int64_t a = a0; a < a4; a += 4) {
        for (int64_t b = b0; b < b4; b += 4) {
            __m128 r0 = _mm_loadu_ps(s + a + b * sb), r1 = _mm_loadu_ps(s + a + (b + 1) * sb);
            __m128 r2 = _mm_loadu_ps(s + a + (b + 2) * sb), r3 = _mm_loadu_ps(s + a + (b + 3) * sb);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(d + a * so + b, r0);
            _mm_storeu_ps(d + (a + 1) * so + b, r1);
            _mm_storeu_ps(d + (a + 2) * so + b, r2);
            _mm_storeu_ps(d + (a + 3) * so + b, r3);
        }
        for (int64_t i = a; i < a + 4; i++)
            for (int64_t b = b4; b < b1; b++)
                memcpy(d + i * so + b, s + i + b * sb, 4);
    }
    for (int64_t a = a4; a < a1; a++)
        for (int64_t b = b0; b < b1; b++)
            memcpy(d + a * so + b, s + a + b * sb, 4);
}

/* dst[a * so + b] = src[a + b * sb] for a < na, b < nb, in 16 x 16 blocks (bytes by
 * qr_transpose_bytes). Its loops start on 32 bytes: where the code before it moved the f32 block
 * loop 16 bytes on (stop 42), the CNN's NHWC -> NCHW Transpose at batch 64 took 0.060 ms, not 0.036. */
__attribute__((optimize("align-loops=32"))) static void transpose_2d(char *dst, const char *src, int64_t na, int64_t nb, int64_t so, int64_t sb, size_t es)
{
    enum { BLK = 16 };
    if (es == 1) {
        qr_transpose_bytes((uint8_t *)dst, so, (const uint8_t *)src, sb, nb, na);
        return;
    }
    for (int64_t a0 = 0; a0 < na; a0 += BLK)
        for (int64_t b0 = 0; b0 < nb; b0 += BLK) {
            int64_t a1 = a0 + BLK < na ? a0 + BLK : na, b1 = b0 + BLK < nb ? b0 + BLK : nb;
            if (es == 4) {
                transpose_block_4(dst, src, a0, a1, b0, b1, so, sb);
            } else {
                for (int64_t a = a0; a < a1; a++)
                    for (int64_t b = b0; b < b1; b++)
                        memcpy(dst + (size_t)(a * so + b) * es, src + (size_t)(a + b * sb) * es, es);
            }
        }
}

void qr_permute_copy(void *dst, const void *src, int ndim, const int64_t *dims, const int *perm, size_t es)
{
    /* the input's axes of size > 1, renumbered; then the output's order of them */
    int keep[QR_MAX_DIMS], r = 0, p[QR_MAX_DIMS], np = 0;
    int64_t n = 1;
    for (int a = 0; a < ndim; a++) {
        keep[a] = dims[a] != 1 ? r++ : -1;
        n *= dims[a];
    }
    if (n == 0)
        return;
    for (int i = 0; i < ndim; i++)
        if (keep[perm[i]] >= 0)
            p[np++] = keep[perm[i]];
    int64_t d[QR_MAX_DIMS];
    for (int a = 0, k = 0; a < ndim; a++)
        if (dims[a] != 1)
            d[k++] = dims[a];
    /* groups: runs of output axes whose input axes follow each other; first[g] is the group's
     * first input axis, in output order */
    int first[QR_MAX_DIMS], ng = 0;
    int64_t gsize[QR_MAX_DIMS];
    for (int i = 0; i < np; i++) {
        if (i > 0 && p[i] == p[i - 1] + 1) {
            gsize[ng - 1] *= d[p[i]];
            continue;
        }
        first[ng] = p[i];
        gsize[ng++] = d[p[i]];
    }
    /* the groups' order in the input: rank[g] */
    int rank[QR_MAX_DIMS];
    for (int g = 0; g < ng; g++) {
        rank[g] = 0;
        for (int h = 0; h < ng; h++)
            rank[g] += first[h] < first[g];
    }
    if (ng <= 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    /* input dims and strides (elements) in input order; output strides in output order */
    int64_t id[QR_MAX_DIMS], is[QR_MAX_DIMS], os[QR_MAX_DIMS];
    for (int g = 0; g < ng; g++)
        id[rank[g]] = gsize[g];
    for (int k = ng - 1, s = 1; k >= 0; k--) {
        is[k] = s;
        s *= id[k];
    }
    for (int g = ng - 1, s = 1; g >= 0; g--) {
        os[g] = s;
        s *= gsize[g];
    }
    const char *sp = src;
    char *dp = dst;
    odo o = {0};
    if (rank[ng - 1] == ng - 1) { /* the last axis stays last: runs of gsize[ng - 1] elements */
        size_t run = (size_t)gsize[ng - 1] * es;
        for (int g = 0; g < ng - 1; g++) {
            o.d[o.n] = gsize[g];
            o.is[o.n] = is[rank[g]];
            o.os[o.n++] = os[g];
        }
        for (int64_t i = 0, runs = n / gsize[ng - 1]; i < runs; i++, odo_next(&o))
            memcpy(dp + (size_t)o.out * es, sp + (size_t)o.in * es, run);
        return;
    }
    /* the input's last axis is output group ga; the output's last is input axis rank[ng - 1] */
    int ga = 0;
    while (rank[ga] != ng - 1)
        ga++;
    for (int g = 0; g < ng - 1; g++)
        if (g != ga) {
            o.d[o.n] = gsize[g];
            o.is[o.n] = is[rank[g]];
            o.os[o.n++] = os[g];
        }
    int64_t na = gsize[ga], nb = gsize[ng - 1], so = os[ga], sb = is[rank[ng - 1]];
    for (int64_t i = 0, outer = n / (na * nb); i < outer; i++, odo_next(&o))
        transpose_2d(dp + (size_t)o.out * es, sp + (size_t)o.in * es, na, nb, so, sb, es);
}
