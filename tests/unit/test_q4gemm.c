/* The blocked 4-bit GEMV (runtime/ops/q4gemm*.c, MatMulNBits): each kernel against a definition
 * written here from MatMulNBits' own layout (B [N][n_blocks][block / 2], low nibble first), in
 * double, and the AVX-512 kernels against the portable ones bit for bit. Shapes: odd K and ragged
 * last blocks, N not a multiple of 16, one row and several (the 4-row tiles and the rest), zero
 * points present and absent, a bias or none, activations and weights of both signs. On a CPU
 * without AVX-512 VNNI the bit-for-bit comparisons are skipped and say so. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/q4gemm.h"

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static float frand(unsigned *s) { return (float)((int)(rnd(s) % 2001) - 1000) / 500.0f; }

typedef struct cse {
    int64_t K, N, block, M;
    int zp, bias;
} cse;

static const cse cases[] = {
    {37, 5, 16, 1, 0, 1},    {37, 5, 16, 3, 1, 0},    {200, 70, 32, 1, 1, 1}, {200, 70, 32, 5, 0, 1},
    {129, 33, 64, 9, 1, 1},  {256, 64, 128, 4, 0, 0}, {96, 16, 32, 2, 0, 1},  {1000, 100, 32, 1, 1, 1},
    {1000, 100, 128, 7, 0, 1},
};

typedef struct data {
    int64_t nb, zrow;
    uint8_t *b, *zp;
    float *scales, *bias, *a;
} data;

static void make(const cse *c, unsigned seed, data *d)
{
    unsigned s = seed;
    d->nb = (c->K + c->block - 1) / c->block;
    d->zrow = (d->nb + 1) / 2;
    d->b = calloc((size_t)(c->N * d->nb * c->block / 2), 1);
    d->zp = c->zp ? calloc((size_t)(c->N * d->zrow), 1) : NULL;
    d->scales = malloc(sizeof(float) * (size_t)(c->N * d->nb));
    d->bias = c->bias ? malloc(sizeof(float) * (size_t)c->N) : NULL;
    d->a = malloc(sizeof(float) * (size_t)(c->M * c->K));
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t k = 0; k < c->K; k++) {
            int64_t bl = k / c->block, kk = k % c->block;
            d->b[(n * d->nb + bl) * (c->block / 2) + kk / 2] |= (uint8_t)((rnd(&s) % 16) << (4 * (kk & 1)));
        }
    for (int64_t i = 0; i < c->N * d->nb; i++)
        d->scales[i] = 0.01f + (float)(rnd(&s) % 100) / 1000.0f;
    for (int64_t i = 0; d->zp && i < c->N * d->zrow; i++)
        d->zp[i] = (uint8_t)(rnd(&s) & 0xff);
    for (int64_t i = 0; d->bias && i < c->N; i++)
        d->bias[i] = frand(&s);
    for (int64_t i = 0; i < c->M * c->K; i++)
        d->a[i] = frand(&s) * (i % 7 == 0 ? 4.0f : 1.0f);
    if (c->M > 1) /* a row of zeros: scale 0, as MLAS's inverse 0 */
        memset(d->a + c->K, 0, sizeof(float) * (size_t)c->K);
}

static void drop(data *d)
{
    free(d->b), free(d->zp), free(d->scales), free(d->bias), free(d->a);
}

static int code(const cse *c, const data *d, int64_t n, int64_t k)
{
    int64_t bl = k / c->block, kk = k % c->block;
    return (d->b[(n * d->nb + bl) * (c->block / 2) + kk / 2] >> (4 * (kk & 1))) & 15;
}

static int zero(const data *d, int64_t n, int64_t bl)
{
    return d->zp ? (d->zp[n * d->zrow + bl / 2] >> (4 * (bl & 1))) & 15 : 8;
}

/* MLAS's CompInt8 quantization of one block of a row, written from its definition. */
static void quant_block(const float *x, int64_t len, int64_t block, int8_t *q, float *scale)
{
    float amax = 0;
    for (int64_t i = 0; i < len; i++)
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    *scale = amax / 127.0f;
    float inv = amax != 0 ? 127.0f / amax : 0;
    for (int64_t i = 0; i < block; i++)
        q[i] = (int8_t)(i < len ? nearbyintf(x[i] * inv) : 0);
}

/* The kernels' y against the definition in double: f32 numerics on A as it is, int8 ones on A
 * quantized here; both within 1e-5 of the largest |y|. */
static void check_case(const cse *c, int i8, qr_q4_i8_fn fi, qr_q4_f32_fn ff, qr_q4_quant_fn fq, float *y)
{
    data d;
    make(c, (unsigned)(c->K * 31 + c->N), &d);
    qr_q4w w;
    void *buf = aligned_alloc(64, (qr_q4_bytes(c->K, c->N, c->block, c->zp) + 63) / 64 * 64);
    qr_q4_pack(&w, buf, d.b, d.scales, d.zp, c->K, c->N, c->block);
    int8_t *qa = calloc((size_t)(c->M * w.kp), 1);
    float *af = calloc((size_t)(c->M * w.kp), sizeof(float)), *sa = calloc((size_t)(c->M * w.nb), sizeof(float));
    float *fsum = calloc((size_t)(c->M * w.nb), sizeof(float));
    int32_t *qsum = calloc((size_t)(c->M * w.nb), sizeof(int32_t));
    for (int64_t m = 0; m < c->M; m++) {
        fq(d.a + m * c->K, c->K, c->block, qa + m * w.kp, sa + m * w.nb, qsum + m * w.nb);
        qr_q4_prep_f32(d.a + m * c->K, c->K, c->block, af + m * w.kp, fsum + m * w.nb);
    }
    /* the quantizer against its definition, bit for bit */
    int8_t *q = malloc((size_t)c->block);
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t bl = 0; bl < w.nb; bl++) {
            float scale;
            int64_t k0 = bl * c->block, len = c->K - k0 < c->block ? c->K - k0 : c->block;
            quant_block(d.a + m * c->K + k0, len, c->block, q, &scale);
            cr_assert(memcmp(q, qa + m * w.kp + k0, (size_t)c->block) == 0, "K %lld row %lld block %lld: A's int8",
                      (long long)c->K, (long long)m, (long long)bl);
            cr_assert_eq(scale, sa[m * w.nb + bl]);
            int32_t s = 0;
            for (int64_t i = 0; i < c->block; i++)
                s += q[i];
            cr_assert_eq(s, qsum[m * w.nb + bl]);
        }
    free(q);
    /* two calls, as threads split the groups */
    int64_t half = w.groups / 2;
    for (int part = 0; part < 2; part++) {
        int64_t g0 = part ? half : 0, g1 = part ? w.groups : half;
        if (i8)
            fi(y, c->N, qa, sa, qsum, c->M, &w, d.bias, g0, g1);
        else
            ff(y, c->N, af, fsum, c->M, &w, d.bias, g0, g1);
    }
    double ymax = 0, err = 0;
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            double want = d.bias ? d.bias[n] : 0;
            for (int64_t bl = 0; bl < w.nb; bl++) {
                double s = 0;
                for (int64_t k = bl * c->block; k < c->K && k < (bl + 1) * c->block; k++) {
                    double wv = (double)(code(c, &d, n, k) - zero(&d, n, bl)) * d.scales[n * w.nb + bl];
                    s += wv * (i8 ? (double)qa[m * w.kp + k] * sa[m * w.nb + bl] : (double)d.a[m * c->K + k]);
                }
                want += s;
            }
            ymax = fmax(ymax, fabs(want));
            err = fmax(err, fabs(want - y[m * c->N + n]));
        }
    cr_assert(err <= 1e-5 * ymax, "K %lld N %lld block %lld M %lld zp %d %s: %g of %g", (long long)c->K,
              (long long)c->N, (long long)c->block, (long long)c->M, c->zp, i8 ? "int8" : "f32", err, ymax);
    free(qa), free(af), free(sa), free(fsum), free(qsum), free(buf);
    drop(&d);
}

Test(q4gemm, portable_kernels_match_the_definition)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int i8 = 0; i8 < 2; i8++) {
            float *y = malloc(sizeof(float) * (size_t)(cases[i].M * cases[i].N));
            check_case(&cases[i], i8, qr_q4_i8_ref, qr_q4_f32_ref, qr_q4_quant_ref, y);
            free(y);
        }
}

/* The CPU's kernels (AVX-512 VNNI, AVX-512F) give the portable ones' bits. */
Test(q4gemm, cpu_kernels_match_portable_bit_for_bit)
{
    qr_q4_i8_fn fi = qr_q4_i8_kernel();
    qr_q4_f32_fn ff = qr_q4_f32_kernel();
    qr_q4_quant_fn fq = qr_q4_quant_kernel();
    if (fi == qr_q4_i8_ref || ff == qr_q4_f32_ref || fq == qr_q4_quant_ref) {
        cr_skip_test("no AVX-512 VNNI on this CPU: only the portable kernels ran");
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int i8 = 0; i8 < 2; i8++) {
            size_t n = (size_t)(cases[i].M * cases[i].N);
            float *y = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n);
            check_case(&cases[i], i8, fi, ff, fq, y);
            check_case(&cases[i], i8, qr_q4_i8_ref, qr_q4_f32_ref, qr_q4_quant_ref, r);
            cr_assert(memcmp(y, r, sizeof(float) * n) == 0, "case %zu %s: the AVX-512 kernel's bits differ", i,
                      i8 ? "int8" : "f32");
            free(y), free(r);
        }
}
