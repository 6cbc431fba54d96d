/* QuantizeLinear of f32 to u8, i8, u16 and i16 with one scale (quant.c: the AVX-512 loop, when the CPU has
 * it, and the portable one, quant=portable) through the op table, bit for bit against the
 * definition: y = saturate(rint(x / scale) + zero_point), NaN as 0, on values of both signs,
 * halves (ties to even), -0, infinities and NaN, tensors whose size is not a multiple of 16, on
 * one thread and two. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "parallel.h"
#include "testutil.h"

static qr_tensor run_q(const qr_tensor *x, const qr_tensor *sc, const qr_tensor *zp, qr_pool *pool)
{
    const qr_tensor *in[3] = {x, sc, zp};
    return tu_op_run("", "QuantizeLinear", 19, NULL, 0, in, 3, pool, NULL);
}

/* The definition in double: x / scale rounded to float (the reference divides in the input's
 * precision), then rint, + zero point, clamped. */
static int64_t want_q(float x, float s, int64_t z, int64_t lo, int64_t hi)
{
    float q = x / s;
    if (q != q)
        return z < lo ? lo : z > hi ? hi : z;
    double r = rint((double)q) + (double)z;
    return r < (double)lo ? lo : r > (double)hi ? hi : (int64_t)r;
}

static void check(int64_t n, qr_dtype t, float s, int64_t z)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    cr_assert(x);
    tu_quant_inputs(x, n, z, s, 1.0f);
    int64_t lo = t == QR_U8 || t == QR_U16 ? 0 : t == QR_I8 ? -128 : -32768;
    int64_t hi = t == QR_U8 ? 255 : t == QR_I8 ? 127 : t == QR_U16 ? 65535 : 32767;
    union {
        uint8_t u8;
        uint16_t u16;
        int16_t i16;
    } zb = {0};
    if (t == QR_U16)
        zb.u16 = (uint16_t)z;
    else if (t == QR_I16)
        zb.i16 = (int16_t)z;
    else
        zb.u8 = (uint8_t)z; /* i8's bits too */
    qr_tensor tx = {.dtype = QR_F32, .ndim = 2, .dims = {1, n}, .data = x};
    qr_tensor ts = {.dtype = QR_F32, .ndim = 0, .data = &s};
    qr_tensor tz = {.dtype = t, .ndim = 0, .data = &zb};
    qr_pool *pool2 = qr_pool_new(2);
    for (int p = 0; p < 2; p++)
        for (int th = 0; th < 2; th++) {
            if (p == 1)
                tu_option("quant", "portable");
            qr_tensor y = run_q(&tx, &ts, &tz, th ? pool2 : NULL);
            tu_option("quant", "");
            cr_assert_eq(y.dtype, t);
            for (int64_t i = 0; i < n; i++) {
                int64_t got = t == QR_U8    ? ((uint8_t *)y.data)[i]
                              : t == QR_I8  ? ((int8_t *)y.data)[i]
                              : t == QR_U16 ? ((uint16_t *)y.data)[i]
                                            : ((int16_t *)y.data)[i];
                int64_t want = want_q(x[i], s, z, lo, hi);
                cr_assert_eq(got, want, "%s, %s, %d threads, n %lld: x[%lld] = %g / %g + %lld: %lld, want %lld",
                             p ? "portable" : "avx512", qr_dtype_name(t), th + 1, (long long)n, (long long)i,
                             x[i], s, (long long)z, (long long)got, (long long)want);
            }
            qr_tensor_free(&y);
        }
    qr_pool_free(pool2);
    free(x);
}

Test(quantize_linear, f32_to_8bit_matches_the_definition_bit_for_bit)
{
    check(1, QR_U8, 0.5f, 3);
    check(15, QR_I8, 0.25f, -5);
    check(4099, QR_U8, 0.0235294122f, 0);  /* MobileNetV2's Clip(0, 6) outputs */
    check(4100, QR_U8, 0.0569471046f, 124);
    check(333, QR_I8, 0.1f, 0);
    check(1000, QR_I8, 3.0f, 127);
    check(64, QR_U8, 1e-3f, 255);
}

/* 16-bit outputs (a16w8.qrl, and the u16 outputs of `activation for`): their own loop */
Test(quantize_linear, f32_to_16bit_matches_the_definition_bit_for_bit)
{
    check(1, QR_U16, 0.5f, 3);
    check(17, QR_I16, 0.25f, -5);
    check(4099, QR_U16, 1.5e-5f, 0);
    check(4100, QR_U16, 2e-3f, 30000);
    check(333, QR_I16, 0.01f, 0);
    check(1000, QR_I16, 3.0f, 32767);
    check(64, QR_U16, 1e-3f, 65535);
}

/* The AVX-512 loop multiplies by 1 / scale where that gives the division's rint, and divides where
 * a quotient lies near a half-integer (quant.c quantize_f32_8bit_avx512): values a few ulps around
 * (k + 1/2) * scale, one to a vector among values far from any half (so a vector's one near lane
 * decides its path), and everywhere, on scales whose reciprocal rounds up, down, is exact, or is
 * not a normal float (every vector divides), against the definition's division. */
Test(quantize_linear, near_halves_round_as_the_division)
{
    static const float scales[] = {0.1f, 1.0f / 3.0f, 0.0235294122f, 0.0569471046f, 3.0f, 7e-3f, 0.5f, 1e-39f,
                                   3e38f, 1.17549435e-38f};
    unsigned seed = 99;
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        float s = scales[si];
        int64_t n = 16 * 200 + 5;
        float *x = malloc(sizeof(float) * (size_t)n);
        uint8_t zb = (uint8_t)(tu_lcg(&seed) % 256);
        cr_assert(x);
        for (int64_t i = 0; i < n; i++) {
            float h = ((float)((int)(tu_lcg(&seed) % 601) - 300) + 0.5f) * s;
            int ulps = (int)(tu_lcg(&seed) % 9) - 4;
            float v = h;
            for (int u = 0; u < (ulps < 0 ? -ulps : ulps); u++)
                v = nextafterf(v, ulps < 0 ? -INFINITY : INFINITY);
            /* lane 5 of every other vector near a half, the rest a quarter off one; every lane of
             * the others near a half */
            int near = (i / 16) % 2 ? i % 16 == 5 : 1;
            x[i] = near ? v : h + 0.25f * s;
        }
        qr_tensor tx = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = x};
        qr_tensor ts = {.dtype = QR_F32, .ndim = 0, .data = &s};
        qr_tensor tz = {.dtype = QR_U8, .ndim = 0, .data = &zb};
        qr_tensor y = run_q(&tx, &ts, &tz, NULL);
        for (int64_t i = 0; i < n; i++)
            cr_assert_eq(((uint8_t *)y.data)[i], want_q(x[i], s, zb, 0, 255), "scale %g: x[%lld] = %.9g: %d, want %lld",
                         s, (long long)i, x[i], ((uint8_t *)y.data)[i], (long long)want_q(x[i], s, zb, 0, 255));
        qr_tensor_free(&y);
        free(x);
    }
}
