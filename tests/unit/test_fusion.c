/* A Conv's fused activation (qr_kctx.act: the Relu or Clip the executor folds into it) through
 * every path of the f32 Conv: 1x1 read in place, 3x3 over padded planes at strides 1 and 2, the
 * im2col GEMM (stride 3), small images folded into one GEMM, groups, depthwise (AVX-512 window
 * kernel, portable runs, plane by plane), the portable GEMM (QRL_SGEMM=portable), f64: each equals
 * the Conv without it, then Relu or Clip, bit for bit, NaN kept. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "parallel.h"

static unsigned next(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 16;
}

static qr_tensor run_conv(qr_attr *attrs, int nattr, const qr_tensor **in, const qr_act *act, qr_pool *pool)
{
    const qr_op_def *d = qr_op_find("", "Conv");
    cr_assert(d && d->act, "Conv applies a fused activation");
    qr_node n = {.name = "t", .op = "Conv", .domain = "", .opset = 17, .n_in = 3, .n_out = 1, .n_attr = nattr,
                 .attr = attrs, .def = d};
    qr_tensor out;
    memset(&out, 0, sizeof out);
    qr_tensor *outs[1] = {&out};
    qr_error e = {{0}};
    qr_kctx k = {.node = &n, .opset = 17, .n_in = 3, .n_out = 1, .in = in, .out = outs, .err = &e, .pool = pool,
                 .act = act};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_tensor_alloc(&out, &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    return out;
}

typedef struct conv_case {
    int64_t n, c, m, h, w, k, stride, pad, group;
} conv_case;

static const qr_act acts[] = {{1, 0, 0}, {0, 0.0f, 6.0f}, {0, -0.5f, 0.3f}};

static void check_case(conv_case cc, qr_dtype dt, qr_pool *pool, const char *what)
{
    int64_t nx = cc.n * cc.c * cc.h * cc.w, nw = cc.m * (cc.c / cc.group) * cc.k * cc.k;
    size_t es = dt == QR_F64 ? sizeof(double) : sizeof(float);
    void *x = malloc(es * (size_t)nx), *w = malloc(es * (size_t)nw), *b = malloc(es * (size_t)cc.m);
    cr_assert(x && w && b);
    unsigned seed = 3;
    for (int64_t i = 0; i < nx + nw + cc.m; i++) {
        double v = (double)((int)(next(&seed) % 2001) - 1000) / 400.0;
        void *dst = i < nx ? x : i < nx + nw ? w : b;
        int64_t j = i < nx ? i : i < nx + nw ? i - nx : i - nx - nw;
        if (dt == QR_F64)
            ((double *)dst)[j] = v;
        else
            ((float *)dst)[j] = (float)v;
    }
    if (dt == QR_F64) /* one NaN input: its outputs stay NaN */
        ((double *)x)[nx / 2] = NAN;
    else
        ((float *)x)[nx / 2] = NAN;
    int64_t ks[2] = {cc.k, cc.k}, st[2] = {cc.stride, cc.stride}, pads[4] = {cc.pad, cc.pad, cc.pad, cc.pad};
    qr_attr a[4] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                    {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                    {.name = "group", .kind = QR_ATTR_INT, .i = cc.group}};
    qr_tensor tx = {.dtype = dt, .ndim = 4, .dims = {cc.n, cc.c, cc.h, cc.w}, .data = x};
    qr_tensor tw = {.dtype = dt, .ndim = 4, .dims = {cc.m, cc.c / cc.group, cc.k, cc.k}, .data = w};
    qr_tensor tb = {.dtype = dt, .ndim = 1, .dims = {cc.m}, .data = b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_tensor plain = run_conv(a, 4, in, NULL, pool);
    int64_t ny = qr_tensor_numel(&plain), nan = 0;
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++) {
        qr_tensor fused = run_conv(a, 4, in, &acts[t], pool);
        int64_t changed = 0;
        for (int64_t i = 0; i < ny; i++) {
            if (dt == QR_F64) {
                double v = ((double *)plain.data)[i], got = ((double *)fused.data)[i];
                double want = acts[t].relu ? (v <= 0 ? 0 : v) : v < acts[t].lo ? acts[t].lo : v > acts[t].hi ? acts[t].hi : v;
                changed += want != v;
                nan += isnan(got);
                cr_assert(memcmp(&got, &want, sizeof want) == 0, "%s f64 act %zu element %lld: %g vs %g", what, t,
                          (long long)i, got, want);
            } else {
                float v = ((float *)plain.data)[i], got = ((float *)fused.data)[i];
                float want = qr_act_apply(&acts[t], v);
                changed += want != v;
                nan += isnan(got);
                cr_assert(memcmp(&got, &want, sizeof want) == 0, "%s act %zu element %lld: %g vs %g", what, t,
                          (long long)i, got, want);
            }
        }
        cr_assert(changed > 0, "%s: act %zu changed nothing", what, t);
        qr_tensor_free(&fused);
    }
    cr_assert(nan > 0, "%s: the NaN reached an output", what);
    qr_tensor_free(&plain);
    free(x);
    free(w);
    free(b);
}

static const struct {
    conv_case cc;
    const char *what;
} cases[] = {
    {{2, 8, 12, 9, 11, 1, 1, 0, 1}, "1x1 in place"},
    {{1, 6, 20, 13, 17, 3, 1, 1, 1}, "3x3/1 over padded planes"},
    {{2, 5, 14, 15, 12, 3, 2, 1, 1}, "3x3/2 over phases"},
    {{1, 4, 9, 14, 13, 3, 3, 1, 1}, "3x3/3 through im2col"},
    {{7, 6, 10, 4, 5, 1, 1, 0, 1}, "small images folded into one GEMM"},
    {{7, 3, 5, 6, 5, 3, 3, 1, 1}, "small images, im2col folded"},
    {{2, 8, 6, 10, 9, 3, 1, 1, 2}, "groups"},
    {{2, 6, 6, 21, 37, 3, 1, 1, 6}, "depthwise 3x3/1"},
    {{2, 6, 6, 22, 36, 3, 2, 1, 6}, "depthwise 3x3/2"},
    {{1, 4, 4, 12, 13, 3, 3, 1, 4}, "depthwise 3x3/3 plane by plane"},
};

Test(fusion, conv_activation_is_conv_then_relu_or_clip)
{
    qr_pool *pool = qr_pool_new(2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(cases[i].cc, QR_F32, NULL, cases[i].what);
        check_case(cases[i].cc, QR_F32, pool, cases[i].what);
        check_case(cases[i].cc, QR_F64, NULL, cases[i].what);
    }
    setenv("QRL_SGEMM", "portable", 1);
    setenv("QRL_WINDOW", "portable", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i].cc, QR_F32, NULL, cases[i].what);
    unsetenv("QRL_SGEMM");
    unsetenv("QRL_WINDOW");
    qr_pool_free(pool);
}
