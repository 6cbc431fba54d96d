/* Kernels called directly through the op table: the integer and edge cases
 * that the ONNX conformance data does not reach (division by zero, wrap-around,
 * saturating casts, broadcasting corner shapes, in-place aliasing). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/sgemm.h"
#include "parallel.h"
#include "testutil.h"

/* Runs op on the given inputs on pool's threads (NULL: serial); out is allocated here (free with
 * qr_tensor_free). */
static qr_status run_op_pool(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin,
                             qr_tensor *out, qr_error *e, qr_pool *pool)
{
    const qr_op_def *d = qr_op_find("", op);
    cr_assert(d, "op %s is registered", op);
    qr_node n = {.name = "t", .op = op, .domain = "", .opset = 17, .n_in = nin, .n_out = 1, .n_attr = nattr,
                 .attr = attrs, .def = d};
    memset(out, 0, sizeof *out);
    qr_tensor *outs[1] = {out};
    qr_kctx k = {.node = &n, .opset = 17, .n_in = nin, .n_out = 1, .in = in, .out = outs, .err = e, .pool = pool};
    qr_status st = d->infer(&k);
    if (st != QR_OK)
        return st;
    cr_assert_eq(qr_tensor_alloc(out, e), QR_OK);
    st = qr_op_run(&k);
    if (st != QR_OK)
        qr_tensor_free(out);
    return st;
}

static qr_status run_op(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin, qr_tensor *out,
                        qr_error *e)
{
    return run_op_pool(op, attrs, nattr, in, nin, out, e, NULL);
}

static qr_tensor vec(qr_dtype t, int64_t n, void *data)
{
    return (qr_tensor){.dtype = t, .ndim = 1, .dims = {n}, .data = data};
}

Test(ops, integer_division_by_zero_is_an_error)
{
    int32_t a[3] = {7, -7, 1}, b[3] = {2, 0, 1};
    qr_tensor ta = vec(QR_I32, 3, a), tb = vec(QR_I32, 3, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e = {{0}};
    cr_assert_eq(run_op("Div", NULL, 0, in, 2, &y, &e), QR_ERR);
    cr_assert(strstr(e.msg, "division by zero"), "%s", e.msg);
    cr_assert_eq(run_op("Mod", NULL, 0, in, 2, &y, &e), QR_ERR);
}

Test(ops, integer_division_truncates_and_wraps)
{
    int64_t a[3] = {7, -7, INT64_MIN}, b[3] = {2, 2, -1};
    qr_tensor ta = vec(QR_I64, 3, a), tb = vec(QR_I64, 3, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Div", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
    const int64_t *r = y.data;
    cr_assert(r[0] == 3 && r[1] == -3 && r[2] == INT64_MIN, "%lld %lld %lld", (long long)r[0], (long long)r[1],
              (long long)r[2]);
    qr_tensor_free(&y);
}

Test(ops, mod_follows_divisor_sign_unless_fmod)
{
    int32_t a[4] = {-4, 4, -4, 4}, b[4] = {3, -3, -3, 3};
    qr_tensor ta = vec(QR_I32, 4, a), tb = vec(QR_I32, 4, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Mod", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
    const int32_t *r = y.data;
    cr_assert(r[0] == 2 && r[1] == -2 && r[2] == -1 && r[3] == 1);
    qr_tensor_free(&y);
    qr_attr fm = {.name = "fmod", .kind = QR_ATTR_INT, .i = 1};
    cr_assert_eq(run_op("Mod", &fm, 1, in, 2, &y, &e), QR_OK, "%s", e.msg);
    r = y.data;
    cr_assert(r[0] == -1 && r[1] == 1 && r[2] == -1 && r[3] == 1);
    qr_tensor_free(&y);
}

Test(ops, int8_add_wraps)
{
    int8_t a[2] = {127, -128}, b[2] = {1, -1};
    qr_tensor ta = vec(QR_I8, 2, a), tb = vec(QR_I8, 2, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Add", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
    cr_assert(((int8_t *)y.data)[0] == -128 && ((int8_t *)y.data)[1] == 127);
    qr_tensor_free(&y);
}

Test(ops, cast_float_to_int_saturates_and_nan_is_zero)
{
    float x[4] = {300.f, -300.f, NAN, -2.7f};
    qr_tensor tx = vec(QR_F32, 4, x), y;
    const qr_tensor *in[1] = {&tx};
    qr_attr to = {.name = "to", .kind = QR_ATTR_INT, .i = 3}; /* INT8 */
    qr_error e;
    cr_assert_eq(run_op("Cast", &to, 1, in, 1, &y, &e), QR_OK, "%s", e.msg);
    const int8_t *r = y.data;
    cr_assert(r[0] == 127 && r[1] == -128 && r[2] == 0 && r[3] == -2, "%d %d %d %d", r[0], r[1], r[2], r[3]);
    qr_tensor_free(&y);
}

Test(ops, broadcast_both_ways)
{
    /* [2,1,3] + [4,1] -> [2,4,3] */
    float a[6] = {0, 1, 2, 10, 11, 12}, b[4] = {100, 200, 300, 400};
    qr_tensor ta = {.dtype = QR_F32, .ndim = 3, .dims = {2, 1, 3}, .data = a};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 2, .dims = {4, 1}, .data = b}, y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Add", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
    cr_assert(y.ndim == 3 && y.dims[0] == 2 && y.dims[1] == 4 && y.dims[2] == 3);
    const float *r = y.data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                cr_assert_float_eq(r[(i * 4 + j) * 3 + k], a[i * 3 + k] + b[j], 0);
    qr_tensor_free(&y);
}

Test(ops, broadcast_mismatch_is_an_error)
{
    float a[3] = {0}, b[2] = {0};
    qr_tensor ta = vec(QR_F32, 3, a), tb = vec(QR_F32, 2, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Mul", NULL, 0, in, 2, &y, &e), QR_ERR);
    cr_assert(strstr(e.msg, "broadcast"), "%s", e.msg);
}

Test(ops, mixed_types_are_an_error)
{
    float a[2] = {0};
    int32_t b[2] = {0};
    qr_tensor ta = vec(QR_F32, 2, a), tb = vec(QR_I32, 2, b), y;
    const qr_tensor *in[2] = {&ta, &tb};
    qr_error e;
    cr_assert_eq(run_op("Sub", NULL, 0, in, 2, &y, &e), QR_ERR);
    cr_assert(strstr(e.msg, "type"), "%s", e.msg);
}

Test(ops, variadic_max_broadcasts_and_propagates_nan)
{
    float a[2] = {1, NAN}, b[1] = {5}, c[2] = {7, 0};
    qr_tensor ta = vec(QR_F32, 2, a), tb = vec(QR_F32, 1, b), tc = vec(QR_F32, 2, c), y;
    const qr_tensor *in[3] = {&ta, &tb, &tc};
    qr_error e;
    cr_assert_eq(run_op("Max", NULL, 0, in, 3, &y, &e), QR_OK, "%s", e.msg);
    cr_assert_float_eq(((float *)y.data)[0], 7, 0);
    cr_assert(isnan(((float *)y.data)[1]));
    qr_tensor_free(&y);
}

Test(ops, elementwise_ops_are_safe_in_place)
{
    /* The executor may hand a kernel the same buffer as input 0 and output. */
    static const char *const ops[] = {"Relu", "Neg", "Sigmoid", "Tanh", "Exp", "Abs"};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        const qr_op_def *d = qr_op_find("", ops[o]);
        cr_assert(d && d->inplace, "%s is marked in-place", ops[o]);
        float buf[40000], ref[40000];
        for (int i = 0; i < 40000; i++)
            buf[i] = (float)(i % 17) - 8.f;
        qr_tensor x = vec(QR_F32, 40000, buf), y;
        const qr_tensor *in[1] = {&x};
        qr_error e;
        cr_assert_eq(run_op(ops[o], NULL, 0, in, 1, &y, &e), QR_OK);
        memcpy(ref, y.data, sizeof ref);
        qr_tensor_free(&y);
        qr_node n = {.name = "t", .op = ops[o], .domain = "", .opset = 17, .n_in = 1, .n_out = 1, .def = d};
        qr_tensor *outs[1] = {&x};
        qr_kctx k = {.node = &n, .opset = 17, .n_in = 1, .n_out = 1, .in = in, .out = outs, .err = &e};
        cr_assert_eq(qr_op_run(&k), QR_OK);
        cr_assert(memcmp(buf, ref, sizeof ref) == 0, "%s in place differs", ops[o]);
    }
}

/* MatMulInteger accumulates in int32 (wrapping, as the 32-bit accumulator
 * does): a sum past 2^31 equals the exact sum taken modulo 2^32, on the
 * instruction-set clone of the inner loop this CPU selects. Rows long enough
 * for the vector path and odd enough for its tail. */
Test(ops, matmul_integer_wraps_like_an_exact_sum)
{
    enum { M = 3, K = 90001, N = 37 };
    uint8_t *a = malloc(M * K);
    int8_t *b = malloc((size_t)K * N);
    for (int i = 0; i < M * K; i++)
        a[i] = i % 97 ? 255 : (uint8_t)(i * 7919 % 256);
    for (int i = 0; i < K * N; i++)
        b[i] = (int8_t)(i % 89 ? -128 : (i * 31) % 256 - 128);
    uint8_t az = 3;
    int8_t bz = -5;
    qr_tensor ta = {.dtype = QR_U8, .ndim = 2, .dims = {M, K}, .data = a};
    qr_tensor tb = {.dtype = QR_I8, .ndim = 2, .dims = {K, N}, .data = b};
    qr_tensor tz = {.dtype = QR_U8, .ndim = 0, .data = &az}, tbz = {.dtype = QR_I8, .ndim = 0, .data = &bz};
    const qr_tensor *in[4] = {&ta, &tb, &tz, &tbz};
    qr_tensor y;
    qr_error e;
    cr_assert_eq(run_op("MatMulInteger", NULL, 0, in, 4, &y, &e), QR_OK, "%s", e.msg);
    const int32_t *r = y.data;
    int wrapped = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t s = 0;
            for (int q = 0; q < K; q++)
                s += (int64_t)(a[i * K + q] - az) * (b[q * N + j] - bz);
            wrapped |= s > INT32_MAX || s < INT32_MIN;
            cr_assert_eq(r[i * N + j], (int32_t)(uint32_t)(uint64_t)s, "[%d,%d]", i, j);
        }
    cr_assert(wrapped, "the test sums must pass the int32 range");
    qr_tensor_free(&y);
    free(a);
    free(b);
}

/* n pseudo-random bytes as u8 and as the same bytes shifted to i8 (v - 128). */
static void fill_8bit(uint8_t *xu, int8_t *xs, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        int v = (int)((seed >> 16) % 256);
        xu[i] = (uint8_t)v;
        xs[i] = (int8_t)(v - 128);
    }
}

/* A pooling op on a [1, C, H, W] image of 8-bit integers (i8 when signed8, else u8) and on the same
 * values as f32 (xf, filled here): *yf and *yi, of the same size. */
static void pool_8bit_and_f32(const char *op, qr_attr *attrs, int nattr, int64_t C, int64_t H, int64_t W,
                              const uint8_t *xu, const int8_t *xs, float *xf, int signed8, qr_tensor *yf, qr_tensor *yi)
{
    for (int64_t i = 0; i < C * H * W; i++)
        xf[i] = signed8 ? (float)xs[i] : (float)xu[i];
    qr_tensor tf = {.dtype = QR_F32, .ndim = 4, .dims = {1, C, H, W}, .data = xf};
    qr_tensor ti = {.dtype = signed8 ? QR_I8 : QR_U8, .ndim = 4, .dims = {1, C, H, W},
                    .data = signed8 ? (void *)xs : (void *)xu};
    const qr_tensor *inf[1] = {&tf}, *ini[1] = {&ti};
    qr_error e;
    cr_assert_eq(run_op(op, attrs, nattr, inf, 1, yf, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(run_op(op, attrs, nattr, ini, 1, yi, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_tensor_numel(yf), qr_tensor_numel(yi));
}

/* MaxPool on u8 and i8 runs on the integers as they are: the same result as the f32 kernel (which
 * the ONNX conformance data checks) on the same values. */
static void check_maxpool_8bit(int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                               const int64_t pads[4], int ceil_mode)
{
    int64_t n = C * H * W;
    float *xf = malloc((size_t)n * sizeof(float));
    uint8_t *xu = malloc((size_t)n);
    int8_t *xs = malloc((size_t)n);
    cr_assert(xf && xu && xs);
    fill_8bit(xu, xs, n, 5);
    int64_t ks[2] = {kh, kw}, st[2] = {sh, sw}, pd[4] = {pads[0], pads[1], pads[2], pads[3]};
    qr_attr attrs[4] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pd},
                        {.name = "ceil_mode", .kind = QR_ATTR_INT, .i = ceil_mode}};
    for (int signed8 = 0; signed8 < 2; signed8++) {
        qr_tensor yf, yi;
        pool_8bit_and_f32("MaxPool", attrs, 4, C, H, W, xu, xs, xf, signed8, &yf, &yi);
        for (int64_t i = 0; i < qr_tensor_numel(&yf); i++) {
            float want = ((float *)yf.data)[i];
            float got = signed8 ? (float)((int8_t *)yi.data)[i] : (float)((uint8_t *)yi.data)[i];
            cr_assert_eq(got, want, "%s %lldx%lld/%lldx%lld on %lldx%lld element %lld: %g vs %g",
                         signed8 ? "i8" : "u8", (long long)kh, (long long)kw, (long long)sh, (long long)sw,
                         (long long)H, (long long)W, (long long)i, got, want);
        }
        qr_tensor_free(&yf);
        qr_tensor_free(&yi);
    }
    free(xf);
    free(xu);
    free(xs);
}

/* Padding, strides and ceil mode (the row-wise kernel), and windows that tile the plane (2x2/2 and
 * 3x3/3, the tiled kernel; 400 planes of 4 output rows span more than one of its blocks). */
Test(ops, maxpool_on_8bit_integers_matches_f32)
{
    static const int64_t no_pads[4] = {0, 0, 0, 0}, pads[4] = {1, 0, 1, 1};
    check_maxpool_8bit(3, 7, 6, 3, 2, 2, 2, pads, 1);
    check_maxpool_8bit(3, 8, 6, 2, 2, 2, 2, no_pads, 0);
    check_maxpool_8bit(400, 8, 6, 2, 2, 2, 2, no_pads, 0);
    check_maxpool_8bit(5, 6, 9, 3, 3, 3, 3, no_pads, 0);
    check_maxpool_8bit(4, 6, 8, 3, 2, 3, 2, no_pads, 0);
}

/* f32 MaxPool 2x2/2 (its own kernel) against the definition: the first maximum in window order,
 * NaN never wins, -0 and +0 keep the earlier one, a window of NaN only gives -inf. */
Test(ops, maxpool_2x2_f32_keeps_the_first_maximum)
{
    enum { C = 3, H = 6, W = 8 };
    float x[C * H * W];
    unsigned seed = 21;
    for (int i = 0; i < C * H * W; i++) {
        seed = seed * 1103515245u + 12345u;
        int v = (int)((seed >> 16) % 9);
        x[i] = v == 0 ? NAN : v == 1 ? -0.0f : v == 2 ? 0.0f : v == 3 ? -INFINITY : (float)(v - 6);
    }
    x[0] = x[1] = x[W] = x[W + 1] = NAN; /* an all-NaN window */
    int64_t ks[2] = {2, 2}, st[2] = {2, 2};
    qr_attr attrs[2] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st}};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {1, C, H, W}, .data = x};
    const qr_tensor *in[1] = {&tx};
    qr_tensor y;
    qr_error e;
    cr_assert_eq(run_op("MaxPool", attrs, 2, in, 1, &y, &e), QR_OK, "%s", e.msg);
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < H / 2; oy++)
            for (int ox = 0; ox < W / 2; ox++) {
                float m = -INFINITY;
                for (int ky = 0; ky < 2; ky++)
                    for (int kx = 0; kx < 2; kx++) {
                        float v = x[(c * H + 2 * oy + ky) * W + 2 * ox + kx];
                        if (v > m)
                            m = v;
                    }
                float got = ((float *)y.data)[(c * H / 2 + oy) * (W / 2) + ox];
                cr_assert(memcmp(&got, &m, sizeof m) == 0, "c %d (%d, %d): %g vs %g", c, oy, ox, got, m);
            }
    cr_assert(isinf(((float *)y.data)[0]) && ((float *)y.data)[0] < 0);
    qr_tensor_free(&y);
}

/* f32 Conv against a direct loop summing each output's products in (c, ky, kx) order from 0 (with
 * fmaf when the CPU has the FMA GEMM, plainly otherwise), the bias last, bit for bit: unit strides
 * (the GEMM over padded planes), stride 2 (over their phases; a 7x7 window too), asymmetric pads,
 * dilation 2, two groups, a 1x3 window, two images, on 1 and 2 threads. */
static void check_conv_f32(int64_t n_img, int64_t c, int64_t m, int64_t h, int64_t w, int64_t kh, int64_t kw,
                           int64_t s, int64_t d, int64_t group, const int64_t pads[4], int threads)
{
    int64_t cg = c / group, mg = m / group;
    int64_t oh = (h + pads[0] + pads[2] - d * (kh - 1) - 1) / s + 1, ow = (w + pads[1] + pads[3] - d * (kw - 1) - 1) / s + 1;
    float *x = malloc(sizeof(float) * (size_t)(n_img * c * h * w)), *wt = malloc(sizeof(float) * (size_t)(m * cg * kh * kw));
    float bias[16];
    cr_assert(x && wt && m <= 16);
    unsigned seed = 17;
    for (int64_t i = 0; i < n_img * c * h * w; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 8) % 20001) - 10000) / 3331.0f;
    }
    for (int64_t i = 0; i < m * cg * kh * kw; i++) {
        seed = seed * 1103515245u + 12345u;
        wt[i] = (float)((int)((seed >> 8) % 20001) - 10000) / 7777.0f;
    }
    for (int64_t i = 0; i < m; i++)
        bias[i] = (float)i * 3.7f - 20.0f;
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {n_img, c, h, w}, .data = x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {m, cg, kh, kw}, .data = wt};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {m}, .data = bias};
    int64_t st[2] = {s, s}, dl[2] = {d, d};
    qr_attr attrs[4] = {{.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = (int64_t *)pads},
                        {.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = dl},
                        {.name = "group", .kind = QR_ATTR_INT, .i = group}};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_tensor y;
    qr_error e;
    qr_pool *pool = threads > 1 ? qr_pool_new(threads) : NULL;
    cr_assert_eq(run_op_pool("Conv", attrs, 4, in, 3, &y, &e, pool), QR_OK, "%s", e.msg);
    qr_pool_free(pool);
    cr_assert(y.dims[2] == oh && y.dims[3] == ow);
    int fma = qr_sgemm_best() != NULL;
    for (int64_t n = 0; n < n_img; n++)
        for (int64_t o = 0; o < m; o++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    float acc = 0;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ky = 0; ky < kh; ky++)
                            for (int64_t kx = 0; kx < kw; kx++) {
                                int64_t iy = oy * s - pads[0] + ky * d, ix = ox * s - pads[1] + kx * d;
                                float xv = iy >= 0 && iy < h && ix >= 0 && ix < w
                                               ? x[((n * c + o / mg * cg + ci) * h + iy) * w + ix]
                                               : 0.0f;
                                float wv = wt[((o * cg + ci) * kh + ky) * kw + kx];
                                acc = fma ? fmaf(wv, xv, acc) : acc + wv * xv;
                            }
                    acc += bias[o];
                    float got = ((float *)y.data)[((n * m + o) * oh + oy) * ow + ox];
                    cr_assert(memcmp(&got, &acc, sizeof acc) == 0,
                              "%lldx%lld k%lldx%lld s%lld d%lld g%lld t%d (%lld,%lld,%lld,%lld): %.9g vs %.9g",
                              (long long)h, (long long)w, (long long)kh, (long long)kw, (long long)s, (long long)d,
                              (long long)group, threads, (long long)n, (long long)o, (long long)oy, (long long)ox,
                              got, acc);
                }
    qr_tensor_free(&y);
    free(x);
    free(wt);
}

/* The GEMM path's order (c, ky, kx); sgemm=avx2 keeps it on AVX-512 CPUs too, where sconv would
 * take these convolutions in its (ky, kx, c) order (test_sconv.c checks that one). */
Test(ops, float_conv_sums_in_k_order)
{
    static const int64_t p1[4] = {1, 1, 1, 1}, pa[4] = {0, 2, 1, 0}, p0[4] = {0, 0, 0, 0}, p3[4] = {3, 3, 3, 3};
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        tu_option("sgemm", "avx2");
    for (int threads = 1; threads <= 2; threads++) {
        check_conv_f32(2, 5, 13, 9, 11, 3, 3, 1, 1, 1, p1, threads);
        check_conv_f32(1, 6, 8, 10, 7, 3, 3, 1, 2, 2, pa, threads);
        check_conv_f32(2, 4, 16, 6, 13, 1, 3, 1, 1, 1, p0, threads);
        check_conv_f32(2, 5, 7, 9, 11, 3, 3, 2, 1, 1, p1, threads);
        check_conv_f32(1, 3, 9, 40, 40, 3, 3, 1, 1, 1, pa, threads);
        check_conv_f32(1, 3, 8, 21, 19, 7, 7, 2, 1, 1, p3, threads);
        check_conv_f32(2, 4, 6, 10, 9, 3, 3, 2, 1, 2, pa, threads);
    }
    tu_option("sgemm", "");
}

/* MatMul and Gemm (transA) on the float GEMM: every output the products added in k order from 0,
 * as a plain loop here adds them in float, bit for bit, with fmaf when the CPU has the packed FMA
 * GEMM (ops/sgemm.h) and without it otherwise; ragged sizes (rows past a multiple of 12, 8 and 4,
 * columns past 32). */
Test(ops, float_matmul_sums_in_k_order)
{
    enum { M = 45, K = 29, N = 70 };
    static float a[M * K], b[K * N], at[K * M];
    unsigned seed = 5;
    for (int i = 0; i < M * K; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 37.0f;
    }
    for (int i = 0; i < K * N; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 53.0f;
    }
    for (int i = 0; i < M; i++)
        for (int q = 0; q < K; q++)
            at[q * M + i] = a[i * K + q];
    qr_tensor ta = {.dtype = QR_F32, .ndim = 2, .dims = {M, K}, .data = a};
    qr_tensor tat = {.dtype = QR_F32, .ndim = 2, .dims = {K, M}, .data = at};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 2, .dims = {K, N}, .data = b};
    qr_attr trans_a = {.name = "transA", .kind = QR_ATTR_INT, .i = 1};
    int fma = qr_sgemm_best() != NULL;
    for (int form = 0; form < 2; form++) {
        const qr_tensor *in[2] = {form ? &tat : &ta, &tb};
        qr_tensor y;
        qr_error e;
        cr_assert_eq(form ? run_op("Gemm", &trans_a, 1, in, 2, &y, &e) : run_op("MatMul", NULL, 0, in, 2, &y, &e),
                     QR_OK, "%s", e.msg);
        for (int i = 0; i < M; i++)
            for (int x = 0; x < N; x++) {
                float s = 0;
                for (int q = 0; q < K; q++)
                    s = fma ? fmaf(a[i * K + q], b[q * N + x], s) : s + a[i * K + q] * b[q * N + x];
                float got = ((float *)y.data)[i * N + x];
                cr_assert(memcmp(&got, &s, sizeof s) == 0, "%s (%d, %d): %.9g vs %.9g", form ? "Gemm" : "MatMul", i,
                          x, got, s);
            }
        qr_tensor_free(&y);
    }
}

/* A batched MatMul ([3, M, K] x [K, N], B broadcast) sums as the 2-D one: in k order from 0, with
 * fmaf when the CPU has the FMA GEMM (whose threads take whole products), plainly otherwise. */
Test(ops, batched_float_matmul_sums_in_k_order)
{
    enum { NB = 3, M = 14, K = 37, N = 40 };
    static float a[NB * M * K], b[K * N];
    unsigned seed = 9;
    for (int i = 0; i < NB * M * K; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 37.0f;
    }
    for (int i = 0; i < K * N; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 53.0f;
    }
    qr_tensor ta = {.dtype = QR_F32, .ndim = 3, .dims = {NB, M, K}, .data = a};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 2, .dims = {K, N}, .data = b};
    const qr_tensor *in[2] = {&ta, &tb};
    qr_tensor y;
    qr_error e;
    cr_assert_eq(run_op("MatMul", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
    int fma = qr_sgemm_best() != NULL;
    for (int p = 0; p < NB; p++)
        for (int i = 0; i < M; i++)
            for (int x = 0; x < N; x++) {
                float s = 0;
                for (int q = 0; q < K; q++) {
                    float av = a[(p * M + i) * K + q], bv = b[q * N + x];
                    s = fma ? fmaf(av, bv, s) : s + av * bv;
                }
                float got = ((float *)y.data)[(p * M + i) * N + x];
                cr_assert(memcmp(&got, &s, sizeof s) == 0, "(%d, %d, %d): %.9g vs %.9g", p, i, x, got, s);
            }
    qr_tensor_free(&y);
}

/* AveragePool on u8 and i8 (integer sums, one rounding half to even) against the f32 kernel
 * (which the ONNX conformance data checks) on the same values, rounded half to even here:
 * padding counted or not, ceil mode, a window of 2x2 and of 3x3 (no near-ties at these counts). */
static void check_avgpool_8bit(int64_t k, int64_t st, int64_t pad, int include_pad, int ceil_mode)
{
    enum { C = 3, H = 7, W = 6 };
    float xf[C * H * W];
    uint8_t xu[C * H * W];
    int8_t xs[C * H * W];
    fill_8bit(xu, xs, C * H * W, 11);
    int64_t ks[2] = {k, k}, sts[2] = {st, st}, pads[4] = {pad, pad, pad, pad};
    qr_attr attrs[5] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = sts},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                        {.name = "count_include_pad", .kind = QR_ATTR_INT, .i = include_pad},
                        {.name = "ceil_mode", .kind = QR_ATTR_INT, .i = ceil_mode}};
    int ties = 0;
    for (int signed8 = 0; signed8 < 2; signed8++) {
        qr_tensor yf, yi;
        pool_8bit_and_f32("AveragePool", attrs, 5, C, H, W, xu, xs, xf, signed8, &yf, &yi);
        for (int64_t i = 0; i < qr_tensor_numel(&yf); i++) {
            float mean = ((float *)yf.data)[i];
            ties += mean - floorf(mean) == 0.5f;
            float want = nearbyintf(mean);
            float got = signed8 ? (float)((int8_t *)yi.data)[i] : (float)((uint8_t *)yi.data)[i];
            cr_assert_eq(got, want, "%s %lldx%lld/%lld pads %lld include %d: element %lld: %g, mean %g",
                         signed8 ? "i8" : "u8", (long long)k, (long long)k, (long long)st, (long long)pad, include_pad,
                         (long long)i, got, (double)mean);
        }
        qr_tensor_free(&yf);
        qr_tensor_free(&yi);
    }
    if (k == 2)
        cr_assert(ties > 0, "2x2 windows give some exact halves (the rounding is tested)");
}

Test(ops, averagepool_on_8bit_integers_rounds_half_to_even)
{
    check_avgpool_8bit(3, 2, 1, 0, 0);
    check_avgpool_8bit(3, 2, 1, 1, 0);
    check_avgpool_8bit(3, 2, 1, 0, 1);
    check_avgpool_8bit(2, 2, 0, 0, 1);
    check_avgpool_8bit(2, 1, 1, 1, 0);
}

/* A depthwise float Conv (its own kernels: strided, stride 2 over phase planes, stride 1 over padded
 * planes) against the definition summed in double here: dilations, asymmetric pads, strides 1, 2
 * and 3, with and without a bias, values of both signs; two images. */
static void check_depthwise(int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl, int64_t pb,
                            int64_t pr, int with_bias)
{
    enum { N = 2, C = 5, H = 9, W = 11, KH = 3, KW = 2 };
    float x[N * C * H * W], w[C * KH * KW], b[C];
    unsigned seed = 9;
    for (int i = 0; i < N * C * H * W; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 250.0f;
    }
    for (int i = 0; i < C * KH * KW; i++) {
        seed = seed * 1103515245u + 12345u;
        w[i] = (float)((int)((seed >> 16) % 201) - 100) / 50.0f;
    }
    for (int c = 0; c < C; c++)
        b[c] = (float)(c - 2) * 0.75f;
    int64_t ks[2] = {KH, KW}, st[2] = {sy, sx}, dl[2] = {dy, dx}, pads[4] = {pt, pl, pb, pr};
    qr_attr attrs[5] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                        {.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = dl},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                        {.name = "group", .kind = QR_ATTR_INT, .i = C}};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {C, 1, KH, KW}, .data = w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {C}, .data = b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_tensor y;
    qr_error e;
    cr_assert_eq(run_op("Conv", attrs, 5, in, with_bias ? 3 : 2, &y, &e), QR_OK, "%s", e.msg);
    int64_t OH = (H + pt + pb - dy * (KH - 1) - 1) / sy + 1, OW = (W + pl + pr - dx * (KW - 1) - 1) / sx + 1;
    cr_assert(y.ndim == 4 && y.dims[0] == N && y.dims[1] == C && y.dims[2] == OH && y.dims[3] == OW);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    double s = with_bias ? b[c] : 0;
                    for (int ky = 0; ky < KH; ky++)
                        for (int kx = 0; kx < KW; kx++) {
                            int64_t iy = oy * sy - pt + ky * dy, ix = ox * sx - pl + kx * dx;
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                s += (double)w[(c * KH + ky) * KW + kx] * x[((n * C + c) * H + iy) * W + ix];
                        }
                    float got = ((float *)y.data)[((n * C + c) * OH + oy) * OW + ox];
                    cr_assert(fabs(got - s) <= 1e-5 * (1 + fabs(s)), "n %d c %d (%lld, %lld): %g vs %g", n, c,
                              (long long)oy, (long long)ox, got, s);
                }
    qr_tensor_free(&y);
}

Test(ops, depthwise_conv_matches_the_definition)
{
    check_depthwise(2, 1, 1, 2, 1, 2, 0, 1, 1); /* strided */
    check_depthwise(2, 2, 1, 1, 1, 1, 1, 1, 1); /* stride 2 both ways, as MobileNet's: phase planes */
    check_depthwise(2, 2, 1, 1, 0, 1, 2, 0, 0); /* ... with pads of either parity, without a bias */
    check_depthwise(2, 2, 1, 1, 2, 0, 0, 1, 1);
    check_depthwise(1, 3, 1, 1, 0, 1, 0, 1, 0);
    check_depthwise(1, 1, 2, 2, 2, 0, 1, 3, 1); /* stride 1: padded planes */
    check_depthwise(1, 1, 1, 1, 0, 0, 0, 0, 1);
    check_depthwise(1, 1, 1, 1, 1, 1, 1, 1, 0); /* without a bias */
}

/* A float Conv over a batch of small images, which folds several images into one GEMM (a last chunk
 * of fewer images too), against the definition summed in double, and bit for bit against each
 * image convolved alone (the same products in the same order). */
static void check_conv_batch(int64_t N, int64_t C, int64_t M, int64_t H, int64_t W)
{
    enum { K = 3 };
    int64_t nx = N * C * H * W, nw = M * C * K * K;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw), b[16];
    cr_assert(x && w && M <= 16);
    unsigned seed = 5;
    for (int64_t i = 0; i < nx; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 16) % 2001) - 1000) / 250.0f;
    }
    for (int64_t i = 0; i < nw; i++) {
        seed = seed * 1103515245u + 12345u;
        w[i] = (float)((int)((seed >> 16) % 201) - 100) / 50.0f;
    }
    for (int64_t m = 0; m < M; m++)
        b[m] = (float)(m - 2) * 0.5f;
    int64_t ks[2] = {K, K}, pads[4] = {1, 1, 1, 1};
    qr_attr attrs[2] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads}};
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x};
    qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {M, C, K, K}, .data = w};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {M}, .data = b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_tensor y, y1;
    qr_error e;
    cr_assert_eq(run_op("Conv", attrs, 2, in, 3, &y, &e), QR_OK, "%s", e.msg);
    cr_assert(y.ndim == 4 && y.dims[0] == N && y.dims[1] == M && y.dims[2] == H && y.dims[3] == W);
    const float *yd = y.data;
    for (int64_t n = 0; n < N; n++) {
        qr_tensor one = {.dtype = QR_F32, .ndim = 4, .dims = {1, C, H, W}, .data = x + n * C * H * W};
        const qr_tensor *in1[3] = {&one, &tw, &tb};
        cr_assert_eq(run_op("Conv", attrs, 2, in1, 3, &y1, &e), QR_OK, "%s", e.msg);
        cr_assert(memcmp(y1.data, yd + n * M * H * W, sizeof(float) * (size_t)(M * H * W)) == 0,
                  "image %lld of %lld differs from its convolution alone", (long long)n, (long long)N);
        qr_tensor_free(&y1);
        for (int64_t m = 0; m < M; m++)
            for (int64_t oy = 0; oy < H; oy++)
                for (int64_t ox = 0; ox < W; ox++) {
                    double s = b[m];
                    for (int64_t c = 0; c < C; c++)
                        for (int ky = 0; ky < K; ky++)
                            for (int kx = 0; kx < K; kx++) {
                                int64_t iy = oy - 1 + ky, ix = ox - 1 + kx;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                    s += (double)w[((m * C + c) * K + ky) * K + kx] * x[((n * C + c) * H + iy) * W + ix];
                            }
                    float got = yd[((n * M + m) * H + oy) * W + ox];
                    cr_assert(fabs(got - s) <= 1e-4 * (1 + fabs(s)), "n %lld m %lld (%lld, %lld): %g vs %g",
                              (long long)n, (long long)m, (long long)oy, (long long)ox, got, s);
                }
    }
    qr_tensor_free(&y);
    free(x);
    free(w);
}

Test(ops, conv_over_a_batch_of_small_images)
{
    check_conv_batch(7, 3, 5, 6, 5);   /* 30 outputs an image: the whole batch in one GEMM */
    check_conv_batch(7, 4, 9, 15, 20); /* 300: three images a GEMM, the last of one */
    check_conv_batch(3, 2, 3, 40, 30); /* 1200: image by image */
}

/* HardSigmoid (alpha 0.3, beta -0.1: not the defaults) and HardSwish on f32, both signs, the clamps'
 * both ends and past them, infinities and NaN, against the definition written out here in double
 * (ONNX's max(0, min(1, alpha x + beta)); numpy's max and min keep a NaN); f64 the same. */
Test(ops, hard_sigmoid_and_hard_swish_match_the_definition)
{
    static const double xs[] = {-7.5, -3.0, -2.999, -0.5, -0.0, 0.0, 0.25, 1.5, 2.999, 3.0, 3.5, 12.0,
                                INFINITY, -INFINITY, NAN};
    enum { N = sizeof xs / sizeof xs[0] };
    float xf[N];
    double xd[N];
    for (int i = 0; i < N; i++)
        xf[i] = (float)xs[i], xd[i] = xs[i];
    qr_attr at[2] = {{.name = "alpha", .kind = QR_ATTR_FLOAT, .f = 0.3f}, {.name = "beta", .kind = QR_ATTR_FLOAT, .f = -0.1f}};
    for (int dt = 0; dt < 2; dt++)
        for (int swish = 0; swish < 2; swish++) {
            qr_tensor tx = dt ? vec(QR_F64, N, xd) : vec(QR_F32, N, xf), y;
            const qr_tensor *in[1] = {&tx};
            qr_error e;
            cr_assert_eq(run_op(swish ? "HardSwish" : "HardSigmoid", swish ? NULL : at, swish ? 0 : 2, in, 1, &y, &e),
                         QR_OK, "%s", e.msg);
            for (int i = 0; i < N; i++) {
                double x = dt ? xd[i] : (double)xf[i];
                double v = swish ? x / 6 + 0.5 : (double)0.3f * x + (double)-0.1f;
                double c = v > 1 ? 1 : v < 0 ? 0 : v, want = swish ? x * c : c;
                double got = dt ? ((double *)y.data)[i] : ((float *)y.data)[i];
                if (!dt)
                    want = (float)want;
                cr_assert(isnan(want) ? isnan(got) : got == want, "%s %s(%g) = %.9g, want %.9g", dt ? "f64" : "f32",
                          swish ? "HardSwish" : "HardSigmoid", x, got, want);
            }
            qr_tensor_free(&y);
        }
}

/* f32 GlobalAveragePool and GlobalMaxPool read the planes in place (8 sums in double, the max in
 * float): against the mean summed in long double and rounded once, and the max found by hand
 * (a NaN skipped, -inf kept), over planes of 35 values (four blocks of 8 and a tail), both signs. */
Test(ops, global_pools_f32_match_the_definition)
{
    enum { N = 2, C = 3, H = 5, W = 7, P = H * W };
    static float x[N * C * P];
    for (int i = 0; i < N * C * P; i++)
        x[i] = (float)((i * 37 % 101) - 50) * 0.173f + (i % 3 ? 1e-3f : -2e4f);
    x[P + 3] = NAN;          /* plane 1: the max skips it */
    x[2 * P + 34] = 1e30f;    /* plane 2: the max is in the tail */
    for (int i = 3 * P; i < 4 * P; i++)
        x[i] = -INFINITY;     /* plane 3: every value -inf */
    qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = x}, y;
    const qr_tensor *in[1] = {&tx};
    qr_error e;
    cr_assert_eq(run_op("GlobalMaxPool", NULL, 0, in, 1, &y, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(y.ndim, 4);
    for (int p = 0; p < N * C; p++) {
        float m = -INFINITY;
        for (int i = 0; i < P; i++)
            if (x[p * P + i] > m)
                m = x[p * P + i];
        cr_assert_eq(((float *)y.data)[p], m, "max of plane %d: %g, want %g", p, ((float *)y.data)[p], m);
    }
    cr_assert_eq(((float *)y.data)[2], 1e30f);
    cr_assert(isinf(((float *)y.data)[3]) && ((float *)y.data)[3] < 0);
    qr_tensor_free(&y);
    x[P + 3] = 0.5f;
    for (int i = 3 * P; i < 4 * P; i++)
        x[i] = (float)(i % 11) - 5.25f;
    cr_assert_eq(run_op("GlobalAveragePool", NULL, 0, in, 1, &y, &e), QR_OK, "%s", e.msg);
    for (int p = 0; p < N * C; p++) {
        long double s = 0;
        for (int i = 0; i < P; i++)
            s += x[p * P + i];
        float want = (float)(double)(s / P);
        cr_assert_eq(((float *)y.data)[p], want, "mean of plane %d: %.9g, want %.9g", p, ((float *)y.data)[p], want);
    }
    qr_tensor_free(&y);
}

/* A gate times features with the gate first ([1,C,1,1] * [1,C,H,W], MobileNetV3's squeeze-excitation
 * Mul), and the other way round: every product as float multiplies it. */
Test(ops, mul_broadcasts_a_gate_on_either_side)
{
    enum { C = 3, H = 2, W = 19 };
    float g[C] = {-1.5f, 0.25f, 3.0f}, f[C * H * W];
    for (int i = 0; i < C * H * W; i++)
        f[i] = (float)(i * 7 % 23) - 11.5f;
    qr_tensor tg = {.dtype = QR_F32, .ndim = 4, .dims = {1, C, 1, 1}, .data = g};
    qr_tensor tf = {.dtype = QR_F32, .ndim = 4, .dims = {1, C, H, W}, .data = f};
    for (int gate_first = 0; gate_first < 2; gate_first++) {
        const qr_tensor *in[2] = {gate_first ? &tg : &tf, gate_first ? &tf : &tg};
        qr_tensor y;
        qr_error e;
        cr_assert_eq(run_op("Mul", NULL, 0, in, 2, &y, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(y.dims[3], W);
        for (int i = 0; i < C * H * W; i++)
            cr_assert_eq(((float *)y.data)[i], g[i / (H * W)] * f[i], "element %d, gate %s", i,
                         gate_first ? "first" : "second");
        qr_tensor_free(&y);
    }
}

/* f32 and i32 arithmetic whose outer dims continue the row in both inputs (bin_apply joins them into
 * one row, up to a parallel chunk) against each element computed here: a scalar and a per-channel
 * operand on an image (joined whole, and but for the channels), a last-axis vector (not joined), a
 * tensor past the chunk (joined in part), either operand first, serial and on 2 threads. */
Test(ops, arithmetic_rows_joined_across_dims)
{
    static const int64_t shapes[][4] = {{1, 1, 28, 28}, {2, 3, 5, 7}, {3, 2, 200, 100}};
    const char *ops[] = {"Sub", "Div", "Add", "Mul"};
    for (int s = 0; s < 3; s++) {
        const int64_t *d = shapes[s];
        int64_t n = d[0] * d[1] * d[2] * d[3];
        float *x = malloc((size_t)n * sizeof *x);
        int32_t *xi = malloc((size_t)n * sizeof *xi);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)((i * 37) % 101) * 0.173f - 8.5f;
            xi[i] = (int32_t)((i * 37) % 101) - 50;
        }
        float bs[7] = {0.353f, -1.75f, 2.5f, -0.125f, 3.0f, -7.25f, 0.5f};
        int32_t bi[7] = {3, -5, 7, -2, 11, -13, 4};
        /* b's shapes: a scalar as [1,1,1,1], per channel [1,C,1,1], along the last axis [W] (W <= 7) */
        for (int kind = 0; kind < 3; kind++) {
            if (kind == 2 && d[3] > 7)
                continue;
            qr_tensor tb = kind == 0   ? (qr_tensor){.ndim = 4, .dims = {1, 1, 1, 1}}
                           : kind == 1 ? (qr_tensor){.ndim = 4, .dims = {1, d[1], 1, 1}}
                                       : (qr_tensor){.ndim = 1, .dims = {d[3]}};
            for (int o = 0; o < 4; o++)
                for (int integer = 0; integer < 2; integer++)
                    for (int first = 0; first < 2; first++)
                        for (int threads = 1; threads <= 2; threads++) {
                            if (integer && o == 1)
                                continue; /* integer division: its own tests */
                            qr_tensor ta = {.dtype = integer ? QR_I32 : QR_F32, .ndim = 4, .dims = {d[0], d[1], d[2], d[3]},
                                            .data = integer ? (void *)xi : (void *)x};
                            tb.dtype = ta.dtype;
                            tb.data = integer ? (void *)bi : (void *)bs;
                            const qr_tensor *in[2] = {first ? &tb : &ta, first ? &ta : &tb};
                            qr_pool *pool = threads > 1 ? qr_pool_new(threads) : NULL;
                            qr_tensor y;
                            qr_error e;
                            cr_assert_eq(run_op_pool(ops[o], NULL, 0, in, 2, &y, &e, pool), QR_OK, "%s", e.msg);
                            qr_pool_free(pool);
                            cr_assert_eq(qr_tensor_numel(&y), n);
                            for (int64_t i = 0; i < n; i++) {
                                int64_t c = i / (d[2] * d[3]) % d[1], w = i % d[3];
                                int64_t bj = kind == 0 ? 0 : kind == 1 ? c : w;
                                if (integer) {
                                    int32_t u = first ? bi[bj] : xi[i], v = first ? xi[i] : bi[bj];
                                    int32_t want = o == 0 ? u - v : o == 2 ? u + v : u * v;
                                    cr_assert_eq(((int32_t *)y.data)[i], want, "%s i32 shape %d b %d element %lld",
                                                 ops[o], s, kind, (long long)i);
                                } else {
                                    float u = first ? bs[bj] : x[i], v = first ? x[i] : bs[bj];
                                    float want = o == 0 ? u - v : o == 1 ? u / v : o == 2 ? u + v : u * v;
                                    cr_assert_eq(((float *)y.data)[i], want, "%s f32 shape %d b %d element %lld: %g, not %g",
                                                 ops[o], s, kind, (long long)i, ((float *)y.data)[i], want);
                                }
                            }
                            qr_tensor_free(&y);
                        }
        }
        free(x);
        free(xi);
    }
}
