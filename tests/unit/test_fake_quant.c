/* The quantizer's fake quantization (qr_plan_fake_quant: calibration's SimQuant on every activation
 * of every batch, and the simulated graph's weights): QuantizeLinear then DequantizeLinear in f32,
 * bit for bit against an independent numpy oracle (tools/fake_quant_ref.py: float32 division,
 * rint, saturation, (q - zero) * scale). Both paths: the AVX-512 loop (x * (1 / scale) where that
 * rounds as the division, the division where a quotient lies near a half-integer) when the CPU has
 * it, and the portable one (quant=portable). Values of both signs, -0, NaN, infinities, values that
 * saturate, exact halves of the scale (ties) and values a few ulps around them, one to a vector
 * among values far from any half (so one lane decides its vector's path); sizes that are not
 * multiples of 16, in place and not; scales whose reciprocal rounds up, down, is exact or is not a
 * normal float; u8, i8 and u16 ranges. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantize_plan.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

TestSuite(fake_quant, .init = setup, .fini = teardown);

/* The oracle's y for x (n values). */
static float *oracle(const float *x, int64_t n, float s, int64_t z, int64_t lo, int64_t hi)
{
    char path[512], cmd[2048], *out = NULL;
    qr_error e = {{0}};
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = (void *)x};
    snprintf(path, sizeof path, "%s/x.npy", dir);
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 '%s/tools/fake_quant_ref.py' x.npy %a %lld %lld %lld y.npy 2>&1",
             dir, tu_root(), (double)s, (long long)z, (long long)lo, (long long)hi);
    int rc = tu_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s: %s", cmd, out ? out : "");
    free(out);
    qr_tensor y;
    snprintf(path, sizeof path, "%s/y.npy", dir);
    cr_assert_eq(qr_npy_read(path, &y, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(y.dtype, QR_F32);
    cr_assert_eq(qr_tensor_numel(&y), n);
    float *r = malloc(sizeof(float) * (size_t)n);
    cr_assert(r);
    memcpy(r, y.data, sizeof(float) * (size_t)n);
    qr_tensor_free(&y);
    return r;
}

/* x (n values) through both paths, in place and into another buffer, against the oracle. */
static void check(const char *what, const float *x, int64_t n, float s, int64_t z, int64_t lo, int64_t hi)
{
    float *want = oracle(x, n, s, z, lo, hi);
    float *y = malloc(sizeof(float) * (size_t)n);
    cr_assert(y);
    for (int p = 0; p < 2; p++)
        for (int inplace = 0; inplace < 2; inplace++) {
            tu_option("quant", p ? "portable" : "");
            if (inplace) {
                memcpy(y, x, sizeof(float) * (size_t)n);
                qr_plan_fake_quant(y, y, n, s, z, lo, hi);
            } else {
                memset(y, 0xa5, sizeof(float) * (size_t)n);
                qr_plan_fake_quant(x, y, n, s, z, lo, hi);
            }
            tu_option("quant", "");
            for (int64_t i = 0; i < n; i++)
                cr_assert(!memcmp(&y[i], &want[i], sizeof(float)),
                          "%s, %s path%s, n %lld, scale %a, zero %lld: x[%lld] = %.9g (%a) gives %.9g, numpy %.9g", what,
                          p ? "portable" : "the CPU's", inplace ? " in place" : "", (long long)n, (double)s,
                          (long long)z, (long long)i, (double)x[i], (double)x[i], (double)y[i], (double)want[i]);
        }
    free(y);
    free(want);
}

/* A mix: NaN, -0, +0, infinities, exact halves of the scale, saturating values, both signs in range. */
static void mixed(int64_t n, float s, int64_t z, int64_t lo, int64_t hi)
{
    float *x = malloc(sizeof(float) * ((size_t)n + 1));
    cr_assert(x);
    tu_quant_inputs(x, n, z, s, s);
    check("mixed", x, n, s, z, lo, hi);
    free(x);
}

Test(fake_quant, matches_numpy_bit_for_bit_on_both_paths)
{
    mixed(1, 0.5f, 3, 0, 255);
    mixed(15, 0.25f, -5, -128, 127);
    mixed(16, 0.1f, 0, -128, 127);
    mixed(17, 0.0235294122f, 0, 0, 255); /* MobileNetV2's Clip(0, 6) outputs */
    mixed(4099, 0.0569471046f, 124, 0, 255);
    mixed(333, 1.0f / 3.0f, 0, -128, 127);
    mixed(1000, 3.0f, 127, 0, 255);
    mixed(70, 1e-3f, 255, 0, 255);
    mixed(4100, 1.5e-5f, 30000, 0, 65535); /* a 16-bit range */
    mixed(128, 0.0235294122f, 0, 0, 255);    /* one whole vector to each of the AVX-512 loop's 8 streams */
    mixed(16 * 8 * 3 + 16 * 5 + 7, 0.1f, 3, -128, 127); /* 3 to each, 5 left over, a tail of 7 */
}

/* Values a few ulps around (k + 1/2) * scale: lane 5 of every other vector near a half, the rest a
 * quarter off one; every lane of the others near a half; on scales whose reciprocal rounds up,
 * down, is exact, or is not a normal float (every vector divides). */
Test(fake_quant, near_halves_round_as_the_division)
{
    static const float scales[] = {0.1f, 1.0f / 3.0f, 0.0235294122f, 0.0569471046f, 3.0f, 7e-3f, 0.5f, 1e-39f,
                                   3e38f, 1.17549435e-38f};
    unsigned seed = 99;
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        float s = scales[si];
        int64_t n = 16 * 200 + 5;
        float *x = malloc(sizeof(float) * (size_t)n);
        int64_t z = (int64_t)(tu_lcg(&seed) % 256);
        cr_assert(x);
        for (int64_t i = 0; i < n; i++) {
            float h = ((float)((int)(tu_lcg(&seed) % 601) - 300) + 0.5f) * s;
            int ulps = (int)(tu_lcg(&seed) % 9) - 4;
            float v = h;
            for (int u = 0; u < (ulps < 0 ? -ulps : ulps); u++)
                v = nextafterf(v, ulps < 0 ? -INFINITY : INFINITY);
            int near = (i / 16) % 2 ? i % 16 == 5 : 1;
            x[i] = near ? v : h + 0.25f * s;
        }
        check("near halves", x, n, s, z, 0, 255);
        free(x);
    }
}
