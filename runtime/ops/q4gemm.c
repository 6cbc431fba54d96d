/* Blocked 4-bit weight GEMV: the packing, the portable kernels (the definition, in the order
 * every ISA's kernel keeps) and the choice of kernel; see q4gemm.h. */
#include "q4gemm.h"

#include <math.h>
#include <string.h>

#include "igemm.h"
#include "options.h"

void qr_q4_i8_avx512vnni(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum,
                         int64_t rows, const qr_q4w *w, const float *bias, int64_t g0, int64_t g1);
void qr_q4_f32_avx512(float *y, int64_t y_rs, const float *af, const float *asum, int64_t rows, const qr_q4w *w,
                      const float *bias, int64_t g0, int64_t g1);
void qr_q4_quant_avx512(const float *a, int64_t K, int64_t block, int8_t *qa, float *sa, int32_t *asum);

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

static void q4_layout(qr_q4w *w, int64_t K, int64_t N, int64_t block, size_t *chunk_bytes, size_t *zero_bytes,
                      int has_zp)
{
    w->K = K, w->N = N, w->block = block;
    w->nb = (K + block - 1) / block;
    w->kp = w->nb * block;
    w->groups = (N + 15) / 16;
    w->chunk = block * 8 + 64;
    *chunk_bytes = (size_t)(w->groups * w->nb * w->chunk);
    *zero_bytes = has_zp ? align64((size_t)(w->groups * w->nb * 16)) : 0;
}

size_t qr_q4_bytes(int64_t K, int64_t N, int64_t block, int has_zp)
{
    qr_q4w w;
    size_t c, z;
    q4_layout(&w, K, N, block, &c, &z, has_zp);
    return c + z;
}

void qr_q4_view(qr_q4w *w, const void *buf, int64_t K, int64_t N, int64_t block, int has_zp)
{
    size_t cb, zb;
    q4_layout(w, K, N, block, &cb, &zb, has_zp);
    w->chunks = buf;
    w->zeros = has_zp ? (const uint8_t *)buf + cb : NULL;
}

void qr_q4_pack(qr_q4w *w, void *buf, const uint8_t *b, const float *scales, const uint8_t *zp, int64_t K, int64_t N,
                int64_t block)
{
    size_t cb, zb;
    q4_layout(w, K, N, block, &cb, &zb, zp != NULL);
    uint8_t *chunks = buf, *zeros = (uint8_t *)buf + cb;
    memset(buf, 0, cb + zb);
    int64_t nb = w->nb, blob = block / 2, zrow = (nb + 1) / 2, chunk = w->chunk;
    for (int64_t n = 0; n < N; n++) {
        int64_t g = n / 16, j = n % 16;
        const uint8_t *col = b + n * nb * blob;
        for (int64_t k = 0; k < K; k++) {
            int64_t bl = k / block, kk = k % block;
            int c = (col[bl * blob + kk / 2] >> ((kk & 1) * 4)) & 15;
            chunks[(g * nb + bl) * chunk + ((kk / 8) * 16 + j) * 4 + (kk & 3)] |= (uint8_t)(c << (kk % 8 < 4 ? 0 : 4));
        }
        for (int64_t bl = 0; bl < nb; bl++) {
            float s = scales[n * nb + bl];
            memcpy(chunks + (g * nb + bl) * chunk + block * 8 + j * 4, &s, sizeof s);
            if (zp)
                zeros[(g * nb + bl) * 16 + j] = (zp[n * zrow + bl / 2] >> ((bl & 1) * 4)) & 15;
        }
    }
    qr_q4_view(w, buf, K, N, block, zp != NULL);
}

/* Code k (within block b) of column j of group g, its block's scale and zero point. */
static inline int q4_code(const qr_q4w *w, int64_t g, int64_t b, int64_t j, int64_t k)
{
    uint8_t byte = w->chunks[(g * w->nb + b) * w->chunk + ((k / 8) * 16 + j) * 4 + (k & 3)];
    return (k & 4) ? byte >> 4 : byte & 15;
}

static inline float q4_scale(const qr_q4w *w, int64_t g, int64_t b, int64_t j)
{
    float s;
    memcpy(&s, w->chunks + (g * w->nb + b) * w->chunk + w->block * 8 + j * 4, sizeof s);
    return s;
}

static inline int q4_zero(const qr_q4w *w, int64_t g, int64_t b, int64_t j)
{
    return w->zeros ? w->zeros[(g * w->nb + b) * 16 + j] : 8;
}

void qr_q4_dequant(const qr_q4w *w, int64_t g0, int64_t g1, float *dst, int64_t ldd)
{
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < w->nb; b++) {
            float sc[16], zf[16];
            for (int j = 0; j < 16; j++)
                sc[j] = q4_scale(w, g, b, j), zf[j] = (float)q4_zero(w, g, b, j);
            const uint8_t *c = w->chunks + (g * w->nb + b) * w->chunk;
            for (int64_t k = 0; k < w->block && b * w->block + k < w->K; k++) {
                float *d = dst + (b * w->block + k) * ldd + (g - g0) * 16;
                const uint8_t *ck = c + (k / 8) * 64 + (k & 3);
                int sh = (k & 4) ? 4 : 0;
                for (int j = 0; j < 16; j++) /* 16 columns of one k: a vector */
                    d[j] = ((float)((ck[4 * j] >> sh) & 15) - zf[j]) * sc[j];
            }
        }
}

void qr_q4_quant_ref(const float *a, int64_t K, int64_t block, int8_t *qa, float *sa, int32_t *asum)
{
    int64_t nb = (K + block - 1) / block;
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * block, len = K - k0 < block ? K - k0 : block;
        float amax = 0.0f;
        for (int64_t i = 0; i < len; i++)
            amax = fmaxf(amax, fabsf(a[k0 + i]));
        /* MLAS's: the scale amax / 127, the values times 127 / amax (one rounding, not 1 / scale),
         * rounded half to even */
        sa[b] = amax / 127.0f;
        float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0;
        for (int64_t i = 0; i < block; i++) {
            int q = i < len ? (int)rintf(a[k0 + i] * inv) : 0;
            qa[k0 + i] = (int8_t)q;
            s += q;
        }
        asum[b] = s;
    }
}

void qr_q4_prep_f32(const float *a, int64_t K, int64_t block, float *af, float *asum)
{
    int64_t nb = (K + block - 1) / block;
    memcpy(af, a, sizeof(float) * (size_t)K);
    memset(af + K, 0, sizeof(float) * (size_t)(nb * block - K));
    for (int64_t b = 0; b < nb; b++) {
        float s = 0.0f;
        for (int64_t k = b * block; k < K && k < (b + 1) * block; k++)
            s += a[k];
        asum[b] = s;
    }
}

void qr_q4_i8_ref(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum, int64_t rows,
                  const qr_q4w *w, const float *bias, int64_t g0, int64_t g1)
{
    for (int64_t m = 0; m < rows; m++)
        for (int64_t g = g0; g < g1; g++)
            for (int64_t j = 0; j < 16 && g * 16 + j < w->N; j++) {
                float acc = 0.0f;
                for (int64_t b = 0; b < w->nb; b++) {
                    uint32_t d = 0;
                    for (int64_t k = 0; k < w->block; k++)
                        d += (uint32_t)((int32_t)qa[m * w->kp + b * w->block + k] * q4_code(w, g, b, j, k));
                    int32_t t = (int32_t)(d - (uint32_t)q4_zero(w, g, b, j) * (uint32_t)asum[m * w->nb + b]);
                    acc = fmaf((float)t, sa[m * w->nb + b] * q4_scale(w, g, b, j), acc);
                }
                y[m * y_rs + g * 16 + j] = bias ? acc + bias[g * 16 + j] : acc;
            }
}

void qr_q4_f32_ref(float *y, int64_t y_rs, const float *af, const float *asum, int64_t rows, const qr_q4w *w,
                   const float *bias, int64_t g0, int64_t g1)
{
    for (int64_t m = 0; m < rows; m++)
        for (int64_t g = g0; g < g1; g++)
            for (int64_t j = 0; j < 16 && g * 16 + j < w->N; j++) {
                float acc = 0.0f;
                const float *a = af + m * w->kp;
                for (int64_t b = 0; b < w->nb; b++) {
                    float lo = 0.0f, hi = 0.0f;
                    const float *ab = a + b * w->block;
                    for (int64_t k = 0; k < w->block; k += 8) {
                        for (int i = 0; i < 4; i++)
                            lo = fmaf(ab[k + i], (float)q4_code(w, g, b, j, k + i), lo);
                        for (int i = 4; i < 8; i++)
                            hi = fmaf(ab[k + i], (float)q4_code(w, g, b, j, k + i), hi);
                    }
                    float t = fmaf(-(float)q4_zero(w, g, b, j), asum[m * w->nb + b], lo + hi);
                    acc = fmaf(t, q4_scale(w, g, b, j), acc);
                }
                y[m * y_rs + g * 16 + j] = bias ? acc + bias[g * 16 + j] : acc;
            }
}

/* The AVX-512 kernels unless --kernels portable, or an integer ISA without AVX-512 VNNI for the
 * int8 one (the f32 ones keep the CPU's best, as --kernels says of the f32 kernels). */
static int has_avx512(void)
{
    __builtin_cpu_init();
    return !qr_igemm_portable_forced() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

qr_q4_i8_fn qr_q4_i8_kernel(void)
{
    const char *isa = qr_options_get()->igemm;
    if (has_avx512() && __builtin_cpu_supports("avx512vnni") && (!isa[0] || !strcmp(isa, "avx512vnni")))
        return qr_q4_i8_avx512vnni;
    return qr_q4_i8_ref;
}

qr_q4_f32_fn qr_q4_f32_kernel(void)
{
    return has_avx512() ? qr_q4_f32_avx512 : qr_q4_f32_ref;
}

qr_q4_quant_fn qr_q4_quant_kernel(void)
{
    return has_avx512() ? qr_q4_quant_avx512 : qr_q4_quant_ref;
}
