/* The tutorial of docs/language.md: its two examples are the files in
 * examples/recipes/ (checked verbatim here), they compile, and they compute
 * what the tutorial says, against the same arithmetic in C. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "recipe.h"
#include "testutil.h"

static char *slurp(const char *rel)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tu_root(), rel);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    b[fread(b, 1, (size_t)n, f)] = 0;
    fclose(f);
    return b;
}

static qrl_module *compile_file(const char *rel)
{
    char err[1200];
    qrl_module *m = tu_compile(rel, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

Test(docs, tutorial_examples_are_in_the_text)
{
    char *doc = slurp("docs/language.md");
    const char *files[] = {"examples/recipes/meanstd.qrl", "examples/recipes/scale_pattern.qrl"};
    for (int i = 0; i < 2; i++) {
        char *src = slurp(files[i]);
        cr_assert(strstr(doc, src), "docs/language.md does not show %s as it is", files[i]);
        free(src);
    }
    free(doc);
}

Test(docs, meanstd_calibrator_matches_c)
{
    qrl_module *m = compile_file("examples/recipes/meanstd.qrl");
    enum { N = 5000 };
    static float x[N];
    unsigned seed = 3;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(((seed >> 8) & 0xffff) / 65536.0 * 2.0 + 0.5);
    }
    const char *names[1] = {"k"};
    const double vals[1] = {2.0};
    qr_calib *one, *a, *b;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &one, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &a, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &b, &e), QR_OK, "%s", e.msg);
    qr_tensor all = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = x};
    qr_tensor p1 = {.dtype = QR_F32, .ndim = 2, .dims = {10, 100}, .data = x};
    qr_tensor p2 = {.dtype = QR_F32, .ndim = 1, .dims = {N - 1000}, .data = x + 1000};
    cr_assert_eq(qr_calib_observe(one, &all, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(a, &p1, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(b, &p2, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_merge(a, b, &e), QR_OK, "%s", e.msg);
    double n = N, s = 0, ss = 0;
    for (int i = 0; i < N; i++) {
        s += x[i];
        ss += (double)x[i] * x[i];
    }
    double mean = s / n, sd = sqrt(fmax(ss / n - mean * mean, 0)), lo = mean - 2 * sd, hi = mean + 2 * sd;
    /* u8 (unsigned): asymmetric over [min(lo,0), max(hi,0)] */
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams q1, q2;
    cr_assert_eq(qr_calib_solve(one, &u8, &q1, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_solve(a, &u8, &q2, &e), QR_OK, "%s", e.msg);
    double scale = (fmax(hi, 0) - fmin(lo, 0)) / 255.0;
    cr_assert_float_eq(q1.scale, scale, 1e-12 * scale, "one pass %.17g, C %.17g", q1.scale, scale);
    cr_assert_float_eq(q2.scale, scale, 1e-12 * scale, "merged %.17g, C %.17g", q2.scale, scale);
    cr_assert_eq(q1.zero, (int64_t)nearbyint(-fmin(lo, 0) / scale));
    cr_assert_eq(q1.zero, q2.zero);
    qr_calib_free(one);
    qr_calib_free(a);
    qr_calib_free(b);
    qr_module_free(m);
}

Test(docs, scale_pattern_kernel_matches_c)
{
    qrl_module *m = compile_file("examples/recipes/scale_pattern.qrl");
    const qr_fn_desc *d = qr_module_fn(m, "scale_kernel");
    cr_assert(d && d->is_kernel);
    cr_assert_str_eq(d->sig, "void(tensor<u8>,f32,i32,tensor<f32>,tensor<u8>,f32,i32)");
    void (*k)(qrl_rt *, qrl_tview *, float, int32_t, qrl_tview *, qrl_tview *, float, int32_t) = d->fn;
    uint8_t xi[256], yi[256];
    float c = 0.37f;
    for (int i = 0; i < 256; i++)
        xi[i] = (uint8_t)i;
    qrl_tview x = {.data = xi, .numel = 256, .rank = 1, .dims = {256}};
    qrl_tview cv = {.data = &c, .numel = 1, .rank = 0};
    qrl_tview y = {.data = yi, .numel = 256, .rank = 1, .dims = {256}};
    qrl_rt rt;
    qr_rt_init(&rt);
    float xs = 0.05f, ys = 0.02f;
    k(&rt, &x, xs, 128, &cv, &y, ys, 10);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    float mult = xs * c / ys;
    for (int i = 0; i < 256; i++) {
        float v = nearbyintf((float)(i - 128) * mult) + 10.0f;
        uint8_t want = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
        cr_assert_eq(yi[i], want, "x=%d: %d vs %d", i, yi[i], want);
    }
    /* the generic entry the runtime calls: the same kernel, arguments by pointer */
    uint8_t yg[256];
    qrl_tview yv = {.data = yg, .numel = 256, .rank = 1, .dims = {256}};
    int32_t xz = 128, yz = 10;
    void *args[7] = {&x, &xs, &xz, &cv, &yv, &ys, &yz};
    cr_assert(d->call);
    d->call(&rt, args);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert_arr_eq(yg, yi, sizeof yi);
    qr_module_free(m);
}
