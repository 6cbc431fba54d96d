/* The f32 transformer ops (Softmax, LogSoftmax, LayerNormalization, Erf, Tanh on
 * ops/f32_rows_avx512.c; MatMul's batched, flattened and packed products, Gemm; Transpose and
 * Slice by runs, ops/permute.c) through the op table, against an independent float64 oracle:
 * numpy (tools/f32_rows_ref.py, run by /usr/bin/python3) for every op, and libm's double erf
 * and tanh on sweeps of the float line. Both paths
 * (AVX-512 when the CPU has it, f32-rows=portable), serial and on two threads. Data of both
 * signs, odd row lengths (not multiples of 16), -inf entries (causal masks), rows all -inf and
 * rows with NaN or +inf, several head counts. Bounds in ulps of the exact result, per path. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "op.h"
#include "ops/f32_rows.h"
#include "parallel.h"
#include "tensor_io.h"
#include "testutil.h"

#define MAX_OUT 3

/* Inputs run() marks constant (bit i: input i), and the node's buffer kept across runs it gives
 * the kernel (NULL: none): what an executor gives a node whose weights are initializers. */
static unsigned const_mask;
static qr_kcache *node_cache;

/* Runs op on in (opset 17) into outs (allocated here). */
static void run(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin, qr_tensor *outs, int nout,
                qr_pool *pool)
{
    const qr_op_def *d = qr_op_find("", op);
    cr_assert(d);
    qr_value vals[8] = {0};
    qr_value *vp[8];
    cr_assert(nin <= 8);
    for (int i = 0; i < nin; i++) {
        vals[i].t = *in[i];
        vals[i].is_const = (const_mask >> i) & 1;
        vp[i] = &vals[i];
    }
    qr_node n = {.name = "t", .op = op, .domain = "", .opset = 17, .n_in = nin, .n_out = nout, .n_attr = nattr,
                 .attr = attrs, .def = d, .in = vp};
    qr_tensor *o[MAX_OUT];
    for (int j = 0; j < nout; j++) {
        memset(&outs[j], 0, sizeof outs[j]);
        o[j] = &outs[j];
    }
    qr_error e = {{0}};
    qr_kctx k = {.node = &n, .opset = 17, .n_in = nin, .n_out = nout, .in = in, .out = o, .err = &e, .pool = pool,
                 .cache = node_cache};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    for (int j = 0; j < nout; j++) {
        cr_assert_eq(qr_tensor_alloc(&outs[j], &e), QR_OK);
        memset(outs[j].data, 0xa5, qr_tensor_nbytes(&outs[j])); /* every element must be written */
    }
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
}

static unsigned next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Uniform in (-r, r), every mantissa bit used. */
static float rnd(unsigned *s, float r) { return ((float)(next(s) & 0xffffff) / (float)(1 << 23) - 1.0f) * r; }

static qr_tensor f32_tensor(int ndim, const int64_t *dims)
{
    qr_tensor t = {.dtype = QR_F32, .ndim = ndim};
    if (ndim > 0)
        memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&t, &e), QR_OK);
    return t;
}

/* ---- the oracle ---- */

static char *dir; /* the suite's temporary folder */

static void save(const char *name, const qr_tensor *t)
{
    char path[512];
    qr_error e = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(qr_npy_write(path, t, &e), QR_OK, "%s", e.msg);
}

static qr_tensor load(const char *name)
{
    char path[512];
    qr_tensor t;
    qr_error e = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(qr_npy_read(path, &t, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(t.dtype, QR_F64);
    return t;
}

/* Runs tools/f32_rows_ref.py with args (file names are relative to dir). */
static void oracle(const char *args)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 '%s/tools/f32_rows_ref.py' %s 2>&1", dir, tu_root(), args);
    int rc = tu_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s: %s", cmd, out ? out : "");
    free(out);
}

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

/* |got - want| in ulps of want rounded to f32 (NaN must meet NaN, inf the same inf); both under
 * FLT_MIN count as equal (subnormal results may be flushed to 0). */
static double ulps(float got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got))
        return got == want ? 0 : INFINITY;
    if (fabs(want) < FLT_MIN && fabsf(got) < FLT_MIN)
        return 0;
    float a = fabsf((float)want);
    a = a < FLT_MIN ? FLT_MIN : a;
    double ulp = (double)nextafterf(a, INFINITY) - (double)a;
    return fabs((double)got - want) / ulp;
}

/* The worst error of got against want (n values), checked against bound; returns it. */
static double check_ulps(const char *what, const qr_tensor *got, const qr_tensor *want, double bound)
{
    int64_t n = qr_tensor_numel(got);
    cr_assert_eq(n, qr_tensor_numel(want), "%s: sizes differ", what);
    const float *g = got->data;
    const double *w = want->data;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double u = ulps(g[i], w[i]);
        cr_assert(u <= bound, "%s: element %lld is %.9g, exact %.17g: %.2f ulp (bound %.1f)", what, (long long)i,
                  (double)g[i], w[i], u, bound);
        worst = u > worst ? u : worst;
    }
    return worst;
}

/* The two paths: the CPU's kernels (when it has AVX-512) and the portable loops. */
static int use_path(int p)
{
    if (p == 0 && !qr_f32_rows_avx512())
        return 0;
    if (p == 1)
        tu_option("f32-rows", "portable");
    else
        tu_option("f32-rows", "");
    return 1;
}

/* Worst errors seen per path (printed at the end of a test, for the docs' bounds). */
static const char *const path_name[2] = {"avx512", "portable"};

/* ---- Softmax, LogSoftmax ---- */

/* rows x n logits: attention scores of both signs (offset + [-spread, spread)), a causal mask's
 * -inf above the diagonal (row r keeps r % n + 1 values; without causal, every row whole), and the
 * special rows: all -inf, one NaN, one +inf. */
static qr_tensor logits_at(int64_t heads, int64_t rows, int64_t n, unsigned seed, int specials, float offset,
                           float spread, int causal)
{
    int64_t dims[3] = {heads, rows, n};
    qr_tensor t = f32_tensor(3, dims);
    float *x = t.data;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++)
                x[(h * rows + r) * n + i] = !causal || i <= r % n ? offset + rnd(&seed, spread) : -INFINITY;
    if (specials && heads * rows >= 4) {
        for (int64_t i = 0; i < n; i++)
            x[i] = -INFINITY;
        x[n + n / 2] = NAN;
        x[2 * n + n / 3] = INFINITY;
        x[3 * n] = 80.0f; /* the others far below: exp underflows */
    }
    return t;
}

static void check_softmax_at(const char *op, int64_t heads, int64_t rows, int64_t n, unsigned seed, double bound_fast,
                             float offset, float spread, int causal)
{
    qr_tensor x = logits_at(heads, rows, n, seed, 1, offset, spread, causal);
    save("x.npy", &x);
    char args[128];
    snprintf(args, sizeof args, "%s x.npy want.npy", strcmp(op, "Softmax") ? "logsoftmax" : "softmax");
    oracle(args);
    qr_tensor want = load("want.npy");
    qr_pool *pool2 = qr_pool_new(2);
    const qr_tensor *in[1] = {&x};
    for (int p = 0; p < 2; p++) {
        if (!use_path(p))
            continue;
        for (int t = 0; t < 2; t++) {
            qr_tensor y;
            run(op, NULL, 0, in, 1, &y, 1, t ? pool2 : NULL);
            char what[128];
            snprintf(what, sizeof what, "%s [%lld,%lld,%lld] %g +- %g %s %d thread(s)", op, (long long)heads,
                     (long long)rows, (long long)n, (double)offset, (double)spread, path_name[p], t + 1);
            double w = check_ulps(what, &y, &want, p ? 1.0 : bound_fast);
            cr_log_info("%s: worst %.2f ulp", what, w);
            qr_tensor_free(&y);
        }
    }
    tu_option("f32-rows", "");
    qr_pool_free(pool2);
    qr_tensor_free(&want);
    qr_tensor_free(&x);
}

static void check_softmax(const char *op, int64_t heads, int64_t rows, int64_t n, unsigned seed, double bound_fast)
{
    check_softmax_at(op, heads, rows, n, seed, bound_fast, 0.0f, 12.0f, 1);
}

TestSuite(f32_rows, .init = setup, .fini = teardown);

Test(f32_rows, softmax_matches_numpy_within_3_ulp)
{
    check_softmax("Softmax", 4, 128, 128, 1, 3.0); /* BERT's scores, 4 heads */
    check_softmax("Softmax", 3, 17, 77, 2, 3.0);   /* odd rows */
    check_softmax("Softmax", 12, 5, 16, 3, 3.0);   /* one vector a row, 12 heads */
    check_softmax("Softmax", 1, 9, 1, 4, 3.0);     /* rows of one */
    check_softmax("Softmax", 2, 6, 300, 5, 3.0);
}

/* Logits far from 0 (x - max must be exact: rounded, it cost 30 ulp at 1000 +- 30), spreads whose
 * exps cross the flush to 0 (-87.3), rows long enough for the sum's f32 pairs to add up (4096),
 * and lengths around the kernel's 32-value steps (its second vector empty or partly masked). */
Test(f32_rows, softmax_far_from_zero_long_and_ragged_rows_within_3_ulp)
{
    check_softmax_at("Softmax", 2, 40, 96, 21, 3.0, 1000.0f, 30.0f, 1);
    check_softmax_at("Softmax", 2, 40, 96, 22, 3.0, -1000.0f, 30.0f, 0);
    check_softmax_at("Softmax", 1, 50, 200, 23, 3.0, 0.0f, 70.0f, 0);
    check_softmax_at("Softmax", 1, 8, 4096, 24, 3.0, 0.0f, 4.0f, 0);
    check_softmax_at("Softmax", 1, 8, 4099, 25, 3.0, 20.0f, 0.01f, 0); /* near-equal exps: the sum matters */
    for (int64_t n = 15; n <= 49; n += 2)
        check_softmax_at("Softmax", 1, 5, n, 26 + (unsigned)n, 3.0, -3.0f, 12.0f, n % 4 == 1);
}

Test(f32_rows, logsoftmax_matches_numpy_within_1_ulp)
{
    check_softmax("LogSoftmax", 4, 33, 129, 6, 1.0); /* the double loop on both paths */
    check_softmax("LogSoftmax", 1, 7, 5, 7, 1.0);
}

/* ---- LayerNormalization ---- */

/* LayerNormalization of [2, rows, n] X (values offset + up to spread x 1..5 by row) against numpy
 * float64: over the last axis, or (axis 1) over [rows, n] with Scale and B of that shape (the
 * oracle's rows then the flattened [rows * n]); every output within 1 ulp, 1 and 2 threads the
 * same bits. */
static void check_layernorm_at(int64_t rows, int64_t n, float offset, float spread, int with_bias, float eps, int axis,
                               unsigned seed)
{
    int64_t dims[3] = {2, rows, n}, pd[2] = {rows, n}, flat[2] = {2, rows * n}, sd[3] = {2, axis == 1 ? 1 : rows, 1};
    int64_t inner = axis == 1 ? rows * n : n;
    qr_tensor x = f32_tensor(3, dims), sc = f32_tensor(axis == 1 ? 2 : 1, axis == 1 ? pd : pd + 1),
              b = f32_tensor(axis == 1 ? 2 : 1, axis == 1 ? pd : pd + 1);
    float *xv = x.data, *sv = sc.data, *bv = b.data;
    for (int64_t i = 0; i < 2 * rows * n; i++)
        xv[i] = offset + rnd(&seed, spread) * (float)(1 + i / n % 5); /* rows of several spreads */
    for (int64_t i = 0; i < inner; i++) {
        sv[i] = rnd(&seed, 2.0f);
        bv[i] = with_bias ? rnd(&seed, 1.0f) : 0.0f;
    }
    qr_tensor xo = x, so = sc, bo = b; /* the oracle's views: rows of the normalized elements */
    if (axis == 1) {
        xo.ndim = 2, memcpy(xo.dims, flat, sizeof flat);
        so.ndim = bo.ndim = 1, so.dims[0] = bo.dims[0] = inner;
    }
    save("x.npy", &xo);
    save("s.npy", &so);
    save("b.npy", &bo);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "layernorm x.npy s.npy b.npy %.9g want.npy mean.npy inv.npy", (double)eps);
    oracle(cmd);
    qr_tensor want = load("want.npy"), mean = load("mean.npy"), inv = load("inv.npy");
    qr_pool *pool2 = qr_pool_new(2);
    const qr_tensor *in[3] = {&x, &sc, &b};
    qr_attr a[2] = {{.name = "epsilon", .kind = QR_ATTR_FLOAT, .f = eps}, {.name = "axis", .kind = QR_ATTR_INT, .i = axis}};
    for (int p = 0; p < 2; p++) {
        if (!use_path(p))
            continue;
        qr_tensor y1[3];
        for (int t = 0; t < 2; t++) {
            qr_tensor y[3];
            run("LayerNormalization", a, 2, in, with_bias ? 3 : 2, y, 3, t ? pool2 : NULL);
            cr_assert_eq(y[1].ndim, 3);
            cr_assert_eq(y[1].dims[2], 1);
            cr_assert_eq(y[1].dims[1], sd[1]);
            char what[160];
            snprintf(what, sizeof what, "LayerNormalization [2,%lld,%lld] axis %d eps %g, %g + %g %s %d thread(s)",
                     (long long)rows, (long long)n, axis, (double)eps, (double)offset, (double)spread, path_name[p],
                     t + 1);
            double w = check_ulps(what, &y[0], &want, 1.0);
            check_ulps(what, &y[1], &mean, 1.0);
            check_ulps(what, &y[2], &inv, 1.0);
            cr_log_info("%s: worst %.2f ulp", what, w);
            for (int j = 0; j < 3; j++) {
                if (!t) {
                    y1[j] = y[j];
                    continue;
                }
                cr_assert(!memcmp(y[j].data, y1[j].data, qr_tensor_nbytes(&y[j])), "%s: output %d differs from 1 thread's", what, j);
                qr_tensor_free(&y[j]);
                qr_tensor_free(&y1[j]);
            }
        }
    }
    tu_option("f32-rows", "");
    qr_pool_free(pool2);
    qr_tensor_free(&want);
    qr_tensor_free(&mean);
    qr_tensor_free(&inv);
    qr_tensor_free(&x);
    qr_tensor_free(&sc);
    qr_tensor_free(&b);
}

static void check_layernorm(int64_t rows, int64_t n, float offset, int with_bias, unsigned seed)
{
    check_layernorm_at(rows, n, offset, 3.0f, with_bias, 1e-5f, -1, seed);
}

/* The bias is numpy's b (zeros when left out, which adds nothing). */
Test(f32_rows, layernorm_matches_numpy_within_1_ulp)
{
    check_layernorm(128, 256, 0.0f, 1, 11); /* BERT's */
    check_layernorm(7, 33, -40.0f, 1, 12);  /* odd rows, a mean far from 0 */
    check_layernorm(5, 1000, 3.0f, 0, 13);  /* no bias */
    check_layernorm(3, 1, 0.0f, 1, 14);     /* rows of one: x - mean is 0 */
}

/* The AVX-512 kernel's variance from one pass's sums, and the second pass where the mean is far
 * from 0 against the spread (f32_rows_avx512.c LN_ONE_PASS): both sides of its test, ragged rows
 * around the 16- and 32-value steps, a non-default epsilon and axis. */
Test(f32_rows, layernorm_one_pass_and_its_fallback_within_1_ulp)
{
    check_layernorm_at(9, 256, 100.0f, 3.0f, 1, 1e-5f, -1, 21);    /* mean^2 / var ~ 1e3: one pass */
    check_layernorm_at(9, 256, -1000.0f, 0.05f, 1, 1e-5f, -1, 22); /* ~1e8: the second pass */
    check_layernorm_at(6, 255, 30.0f, 0.1f, 1, 1e-5f, -1, 23);     /* near the test's bound */
    check_layernorm_at(5, 257, 1e4f, 1.0f, 0, 1e-5f, -1, 24);
    for (int64_t n = 15; n <= 49; n += 17)
        check_layernorm_at(3, n, -2.0f, 1.5f, 1, 1e-5f, -1, 25 + (unsigned)n);
    check_layernorm_at(4, 100, 0.0f, 1e-3f, 1, 0.25f, -1, 60);     /* epsilon against var */
    check_layernorm_at(7, 24, 5.0f, 2.0f, 1, 1e-3f, 1, 61);        /* axis 1: rows of 168 */
    check_layernorm_at(3, 40, -300.0f, 0.01f, 1, 1e-5f, 1, 62);
}

/* ---- Erf ---- */

/* Every 61st float of [-top, top] through kernel f against the double function ref, each
 * within bound ulp; the worst. */
static double sweep(void (*f)(const float *, float *, int64_t), double (*ref)(double), float topf, double bound,
                    const char *name)
{
    enum { N = 4096 };
    static float x[N], y[N];
    double worst = 0;
    float worst_x = 0;
    uint32_t top;
    memcpy(&top, &topf, 4);
    int64_t m = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t b = 0; b <= top; b += 61) {
            uint32_t bits = b | sign << 31;
            memcpy(&x[m], &bits, 4);
            if (++m == N || (sign == 1 && b + 61 > top)) {
                f(x, y, m);
                for (int64_t i = 0; i < m; i++) {
                    double u = ulps(y[i], ref((double)x[i]));
                    cr_assert(u <= bound, "%s(%.9g) = %.9g, exact %.17g: %.2f ulp", name, (double)x[i], (double)y[i],
                              ref((double)x[i]), u);
                    if (u > worst)
                        worst = u, worst_x = x[i];
                }
                m = 0;
            }
        }
    cr_log_info("%s: worst %.2f ulp at %.9g", name, worst, (double)worst_x);
    return worst;
}

Test(f32_rows, tanh_kernel_within_2_ulp_of_libm_on_a_sweep)
{
    const qr_f32_rows *fr = qr_f32_rows_avx512();
    if (!fr) {
        cr_skip_test("no AVX-512 on this CPU: the tanh kernel is not tested here");
    }
    sweep(fr->tanh, tanh, 12.0f, 2.0, "tanh");
    const float sp[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-40f, -1e-40f, 100.0f, -0.625f, 9.5f};
    float y[10];
    fr->tanh(sp, y, 10);
    cr_assert(y[0] == 1.0f && y[1] == -1.0f && isnan(y[2]) && y[7] == 1.0f);
    cr_assert(y[3] == 0.0f && !signbit(y[3]) && y[4] == 0.0f && signbit(y[4]), "tanh(+-0) = %g, %g", (double)y[3],
              (double)y[4]);
    for (int i = 5; i < 10; i++)
        cr_assert(ulps(y[i], tanh((double)sp[i])) <= 2.0, "tanh(%g) = %g", (double)sp[i], (double)y[i]);
}

/* ---- Sigmoid ---- */

/* The exact sigmoid in long double (expl: neither the kernel's polynomial nor libm's double exp). */
static double sigmoid_exact(double x)
{
    long double e = expl(-fabsl((long double)x));
    return (double)(x >= 0 ? 1.0L / (1.0L + e) : e / (1.0L + e));
}

/* elementwise.c's portable loop, in double with libm's exp, rounded once. */
static float sigmoid_portable(float xf)
{
    double x = xf;
    if (x >= 0)
        return (float)(1.0 / (1.0 + exp(-x)));
    double e = exp(x);
    return (float)(e / (1.0 + e));
}

/* Every 61st float of [-120, 120]: within half an ulp of the exact value and a hair (the double's
 * few ulps), and the portable loop's bits on all but a few; the specials as the loop has them. */
Test(f32_rows, sigmoid_kernel_rounds_the_exact_value_on_a_sweep)
{
    if (!qr_sigmoid_f32_vector())
        cr_skip_test("no AVX2 and FMA on this CPU: the sigmoid kernel is not tested here");
    sweep(qr_sigmoid_f32_avx2, sigmoid_exact, 120.0f, 0.5001, "sigmoid");
    enum { N = 1 << 16 };
    static float x[N], y[N];
    unsigned seed = 41;
    int64_t differ = 0, total = 0;
    for (int round = 0; round < 16; round++) {
        for (int64_t i = 0; i < N; i++)
            x[i] = rnd(&seed, round < 8 ? 8.0f : 90.0f);
        qr_sigmoid_f32_avx2(x, y, N - round); /* ragged lengths: the padded last vector */
        for (int64_t i = 0; i < N - round; i++, total++) {
            float p = sigmoid_portable(x[i]);
            differ += memcmp(&p, &y[i], 4) != 0;
            cr_assert(ulps(y[i], (double)p) <= 1.0, "sigmoid(%.9g) = %.9g, the loop's %.9g", (double)x[i],
                      (double)y[i], (double)p);
        }
    }
    cr_log_info("sigmoid: %lld of %lld values differ from the portable loop's bits", (long long)differ,
                (long long)total);
    cr_assert(differ * 100000 <= total, "%lld of %lld differ from the portable loop", (long long)differ, (long long)total);
    const float sp[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-40f, -1e-40f, 700.0f, -700.0f, 88.0f, -104.0f};
    float o[11];
    qr_sigmoid_f32_avx2(sp, o, 11);
    cr_assert(o[0] == 1.0f && o[1] == 0.0f && !signbit(o[1]) && isnan(o[2]) && o[7] == 1.0f && o[8] == 0.0f);
    for (int i = 3; i < 11; i++)
        if (i != 7 && i != 8)
            cr_assert(o[i] == sigmoid_portable(sp[i]), "sigmoid(%g) = %g, the loop's %g", (double)sp[i], (double)o[i],
                      (double)sigmoid_portable(sp[i]));
}

Test(f32_rows, tanh_op_matches_numpy)
{
    int64_t dims[2] = {2, 1001};
    qr_tensor x = f32_tensor(2, dims);
    unsigned seed = 22;
    for (int64_t i = 0; i < 2002; i++)
        ((float *)x.data)[i] = rnd(&seed, i < 1001 ? 1.0f : 6.0f);
    save("x.npy", &x);
    oracle("tanh x.npy want.npy");
    qr_tensor want = load("want.npy");
    const qr_tensor *in[1] = {&x};
    for (int p = 0; p < 2; p++) {
        if (!use_path(p))
            continue;
        qr_tensor y;
        run("Tanh", NULL, 0, in, 1, &y, 1, NULL);
        check_ulps(p ? "Tanh portable" : "Tanh avx512", &y, &want, p ? 0.5 : 2.0);
        qr_tensor_free(&y);
    }
    tu_option("f32-rows", "");
    qr_tensor_free(&want);
    qr_tensor_free(&x);
}

/* Every 61st float of [-6, 6] (and the specials) against libm's double erf. */
Test(f32_rows, erf_kernel_within_1_5_ulp_of_libm_on_a_sweep)
{
    const qr_f32_rows *fr = qr_f32_rows_avx512();
    if (!fr) {
        cr_skip_test("no AVX-512 on this CPU: the erf kernel is not tested here");
    }
    sweep(fr->erf, erf, 6.0f, 1.5, "erf");
    float y[10];
    const float sp[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-40f, -1e-40f, 100.0f, -3.925f, 0.921875f};
    fr->erf(sp, y, 10);
    cr_assert(y[0] == 1.0f && y[1] == -1.0f && isnan(y[2]));
    cr_assert(y[3] == 0.0f && !signbit(y[3]) && y[4] == 0.0f && signbit(y[4]), "erf(+-0) = %g, %g", (double)y[3],
              (double)y[4]);
    cr_assert(y[7] == 1.0f && y[8] == -1.0f);
    for (int i = 5; i < 10; i++)
        cr_assert(ulps(y[i], erf((double)sp[i])) <= 1.5, "erf(%g) = %g", (double)sp[i], (double)y[i]);
}

Test(f32_rows, erf_op_matches_math_erf)
{
    int64_t dims[2] = {3, 1001};
    qr_tensor x = f32_tensor(2, dims);
    unsigned seed = 21;
    float *xv = x.data;
    for (int64_t i = 0; i < 3003; i++)
        xv[i] = rnd(&seed, i < 1001 ? 1.0f : i < 2002 ? 4.0f : 9.0f);
    save("x.npy", &x);
    oracle("erf x.npy want.npy");
    qr_tensor want = load("want.npy");
    qr_pool *pool2 = qr_pool_new(2);
    const qr_tensor *in[1] = {&x};
    for (int p = 0; p < 2; p++) {
        if (!use_path(p))
            continue;
        for (int t = 0; t < 2; t++) {
            qr_tensor y;
            run("Erf", NULL, 0, in, 1, &y, 1, t ? pool2 : NULL);
            check_ulps(p ? "Erf portable" : "Erf avx512", &y, &want, p ? 0.5 : 1.5);
            qr_tensor_free(&y);
        }
    }
    tu_option("f32-rows", "");
    qr_pool_free(pool2);
    qr_tensor_free(&want);
    qr_tensor_free(&x);
}

/* ---- MatMul ---- */

/* |got - want| <= bound (an f32 dot product's: K * 2^-23 * sum |a||b|) for every output. */
static void check_bound(const char *what, const qr_tensor *got, const qr_tensor *want, const qr_tensor *bound)
{
    int64_t n = qr_tensor_numel(got);
    cr_assert_eq(n, qr_tensor_numel(want), "%s: sizes differ", what);
    const float *g = got->data;
    const double *w = want->data, *b = bound->data;
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs((double)g[i] - w[i]) <= b[i] + 1e-30, "%s: element %lld is %.9g, exact %.17g (bound %.3g)",
                  what, (long long)i, (double)g[i], w[i], b[i]);
}

/* A [ad] x B [bd] against numpy, both paths, serial and on two threads. */
static void check_matmul(int na, const int64_t *ad, int nb, const int64_t *bd, unsigned seed)
{
    qr_tensor a = f32_tensor(na, ad), b = f32_tensor(nb, bd);
    for (int64_t i = 0; i < qr_tensor_numel(&a); i++)
        ((float *)a.data)[i] = rnd(&seed, 2.0f);
    for (int64_t i = 0; i < qr_tensor_numel(&b); i++)
        ((float *)b.data)[i] = rnd(&seed, 2.0f);
    save("a.npy", &a);
    save("b.npy", &b);
    oracle("matmul a.npy b.npy want.npy bound.npy");
    qr_tensor want = load("want.npy"), bound = load("bound.npy");
    qr_pool *pool2 = qr_pool_new(2);
    const qr_tensor *in[2] = {&a, &b};
    /* B in memory, then B a constant (packed once into the node's buffer, read from it again) */
    qr_kcache cache = {0};
    for (int t = 0; t < 6; t++) {
        qr_tensor y;
        const_mask = t >= 2 ? 2 : 0;
        node_cache = t >= 2 ? &cache : NULL;
        run("MatMul", NULL, 0, in, 2, &y, 1, t % 2 ? pool2 : NULL);
        cr_assert_eq(y.ndim, want.ndim);
        for (int d = 0; d < y.ndim; d++)
            cr_assert_eq(y.dims[d], want.dims[d]);
        check_bound(t >= 2 ? "MatMul, B constant" : "MatMul", &y, &want, &bound);
        qr_tensor_free(&y);
    }
    const_mask = 0;
    node_cache = NULL;
    free(cache.data);
    qr_pool_free(pool2);
    qr_tensor_free(&want);
    qr_tensor_free(&bound);
    qr_tensor_free(&a);
    qr_tensor_free(&b);
}

Test(f32_rows, matmul_attention_and_projections_match_numpy)
{
    /* [B, S, K] x [K, N]: one product of B * S rows (the projections) */
    check_matmul(3, (int64_t[]){2, 37, 33}, 2, (int64_t[]){33, 70}, 31);
    check_matmul(3, (int64_t[]){3, 1, 19}, 2, (int64_t[]){19, 5}, 32);
    check_matmul(4, (int64_t[]){2, 3, 5, 17}, 2, (int64_t[]){17, 9}, 33);
    check_matmul(3, (int64_t[]){2, 30, 600}, 2, (int64_t[]){600, 40}, 38); /* K blocks of the GEMM */
    check_matmul(3, (int64_t[]){1, 50, 20}, 2, (int64_t[]){20, 1100}, 39); /* column blocks */
    check_matmul(2, (int64_t[]){2, 20}, 2, (int64_t[]){20, 70}, 40);       /* the few rows' kernel */
    /* one product, [1, S, K] (a GPT layer at batch 1) and [S, K]: B packed once as above */
    check_matmul(3, (int64_t[]){1, 64, 40}, 2, (int64_t[]){40, 70}, 41);
    check_matmul(3, (int64_t[]){1, 13, 300}, 2, (int64_t[]){300, 45}, 42);
    check_matmul(2, (int64_t[]){50, 20}, 2, (int64_t[]){20, 1100}, 43);
    /* Q.K^T and P.V per head: [B*H, S, hd] x [B*H, hd, S], 1, 3 and 12 heads */
    for (int heads = 1; heads <= 12; heads = heads == 1 ? 3 : 12 + heads) {
        check_matmul(3, (int64_t[]){heads, 21, 13}, 3, (int64_t[]){heads, 13, 21}, 34 + (unsigned)heads);
        check_matmul(4, (int64_t[]){2, heads, 21, 21}, 4, (int64_t[]){2, heads, 21, 13}, 35 + (unsigned)heads);
    }
    /* broadcast batches: [2, 1, M, K] x [3, K, N], and a 2-D A against a batch of B */
    check_matmul(4, (int64_t[]){2, 1, 7, 9}, 3, (int64_t[]){3, 9, 11}, 36);
    check_matmul(2, (int64_t[]){7, 9}, 3, (int64_t[]){3, 9, 11}, 37);
}

/* ---- Where (exact selections) ---- */

static void check_exact(const char *what, const qr_tensor *got, const qr_tensor *want);

/* scores [b, h, s, s] masked by a causal [s, s] bool (or [b, 1, 1, s], a padding mask) with
 * -inf or a [1] fill, and the other way round */
static void check_where(int nc, const int64_t *cd, int nx, const int64_t *xd, int ny, const int64_t *yd, unsigned seed)
{
    qr_tensor c = {.dtype = QR_BOOL, .ndim = nc}, x = f32_tensor(nx, xd), y = f32_tensor(ny, yd);
    memcpy(c.dims, cd, sizeof(int64_t) * (size_t)nc);
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&c, &e), QR_OK);
    for (int64_t i = 0; i < qr_tensor_numel(&c); i++)
        ((uint8_t *)c.data)[i] = cd[nc - 1] > 1 && nc >= 2 ? i % cd[nc - 1] <= i / cd[nc - 1] % cd[nc - 2] : next(&seed) % 2;
    for (int64_t i = 0; i < qr_tensor_numel(&x); i++)
        ((float *)x.data)[i] = rnd(&seed, 5.0f);
    for (int64_t i = 0; i < qr_tensor_numel(&y); i++)
        ((float *)y.data)[i] = qr_tensor_numel(&y) == 1 ? -INFINITY : rnd(&seed, 5.0f);
    save("c.npy", &c);
    save("x.npy", &x);
    save("y.npy", &y);
    oracle("where c.npy x.npy y.npy want.npy");
    qr_tensor want = load("want.npy");
    const qr_tensor *in[3] = {&c, &x, &y};
    qr_tensor out;
    run("Where", NULL, 0, in, 3, &out, 1, NULL);
    check_exact("Where", &out, &want);
    qr_tensor_free(&out);
    qr_tensor_free(&want);
    qr_tensor_free(&c);
    qr_tensor_free(&x);
    qr_tensor_free(&y);
}

Test(f32_rows, where_matches_numpy)
{
    check_where(2, (int64_t[]){17, 17}, 4, (int64_t[]){2, 3, 17, 17}, 1, (int64_t[]){1}, 51); /* causal, -inf */
    check_where(4, (int64_t[]){2, 1, 1, 19}, 4, (int64_t[]){2, 4, 5, 19}, 0, NULL, 52);      /* padding, scalar */
    check_where(3, (int64_t[]){3, 1, 7}, 1, (int64_t[]){1}, 2, (int64_t[]){5, 7}, 53);       /* X broadcast */
}

/* ---- Transpose, Slice (exact copies) ---- */

static void check_exact(const char *what, const qr_tensor *got, const qr_tensor *want)
{
    cr_assert_eq(got->ndim, want->ndim, "%s: rank", what);
    for (int d = 0; d < got->ndim; d++)
        cr_assert_eq(got->dims[d], want->dims[d], "%s: dim %d", what, d);
    for (int64_t i = 0; i < qr_tensor_numel(got); i++)
        cr_assert_eq((double)((float *)got->data)[i], ((double *)want->data)[i], "%s: element %lld", what,
                     (long long)i);
}

static qr_tensor iota(int nd, const int64_t *dims)
{
    qr_tensor x = f32_tensor(nd, dims);
    for (int64_t i = 0; i < qr_tensor_numel(&x); i++)
        ((float *)x.data)[i] = (float)(i % 2 ? -i : i); /* every element its own value */
    return x;
}

static void check_transpose(int nd, const int64_t *dims, const int64_t *perm)
{
    qr_tensor x = iota(nd, dims);
    save("x.npy", &x);
    char args[128] = "transpose x.npy want.npy ", *p = args + strlen(args);
    for (int d = 0; d < nd; d++)
        p += sprintf(p, d ? ",%lld" : "%lld", (long long)perm[d]);
    oracle(args);
    qr_tensor want = load("want.npy");
    qr_attr a[1] = {{.name = "perm", .kind = QR_ATTR_INTS, .n = nd, .ints = (int64_t *)perm}};
    const qr_tensor *in[1] = {&x};
    qr_tensor y;
    run("Transpose", a, 1, in, 1, &y, 1, NULL);
    check_exact(args, &y, &want);
    qr_tensor_free(&y);
    qr_tensor_free(&want);
    qr_tensor_free(&x);
}

Test(f32_rows, transpose_matches_numpy)
{
    check_transpose(3, (int64_t[]){5, 3, 19}, (int64_t[]){1, 0, 2});      /* [S, B, D] -> [B, S, D]: runs */
    check_transpose(3, (int64_t[]){37, 6, 17}, (int64_t[]){1, 2, 0});     /* K^T per head: blocks */
    check_transpose(4, (int64_t[]){2, 33, 3, 17}, (int64_t[]){0, 2, 1, 3}); /* [B, S, H, hd] -> [B, H, S, hd] */
    check_transpose(4, (int64_t[]){2, 3, 33, 17}, (int64_t[]){0, 1, 3, 2}); /* last two */
    check_transpose(4, (int64_t[]){2, 1, 33, 17}, (int64_t[]){2, 1, 3, 0}); /* a dim of 1 dropped */
    check_transpose(3, (int64_t[]){4, 5, 6}, (int64_t[]){2, 1, 0});
    check_transpose(2, (int64_t[]){1, 7}, (int64_t[]){1, 0}); /* only a copy */
    check_transpose(5, (int64_t[]){2, 3, 4, 5, 6}, (int64_t[]){4, 0, 3, 1, 2});
}

static void check_slice(int nd, const int64_t *dims, int n, const int64_t *st, const int64_t *en, const int64_t *ax,
                        const int64_t *sp)
{
    qr_tensor x = iota(nd, dims);
    save("x.npy", &x);
    char args[256] = "slice x.npy want.npy", *p = args + strlen(args);
    const int64_t *lists[4] = {st, en, ax, sp};
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < n; i++)
            p += sprintf(p, i ? ",%lld" : " %lld", (long long)lists[l][i]);
    oracle(args);
    qr_tensor want = load("want.npy");
    qr_tensor ts[4];
    for (int l = 0; l < 4; l++) {
        ts[l] = (qr_tensor){.dtype = QR_I64, .ndim = 1, .dims = {n}, .data = (void *)lists[l]};
    }
    const qr_tensor *in[5] = {&x, &ts[0], &ts[1], &ts[2], &ts[3]};
    qr_tensor y;
    run("Slice", NULL, 0, in, 5, &y, 1, NULL);
    check_exact(args, &y, &want);
    qr_tensor_free(&y);
    qr_tensor_free(&want);
    qr_tensor_free(&x);
}

Test(f32_rows, slice_matches_numpy)
{
    /* q, k, v out of one [S, B, 3D] projection */
    check_slice(3, (int64_t[]){5, 2, 51}, 1, (int64_t[]){17}, (int64_t[]){34}, (int64_t[]){2}, (int64_t[]){1});
    check_slice(3, (int64_t[]){5, 2, 51}, 2, (int64_t[]){1, 0}, (int64_t[]){4, 50}, (int64_t[]){0, 2},
                (int64_t[]){2, 3}); /* a step on the last axis: element by element */
    check_slice(2, (int64_t[]){9, 13}, 1, (int64_t[]){-1}, (int64_t[]){-10}, (int64_t[]){0}, (int64_t[]){-2});
    check_slice(1, (int64_t[]){19}, 1, (int64_t[]){3}, (int64_t[]){18}, (int64_t[]){0}, (int64_t[]){1});
}

/* Gemm with a bias C per column ([N], as exported Linear layers), per row ([M, 1]) or whole. */
static void check_gemm(int64_t m, int64_t k, int64_t n, int cnd, const int64_t *cd, float alpha, float beta, int tb,
                       unsigned seed)
{
    int64_t ad[2] = {m, k}, bd[2] = {tb ? n : k, tb ? k : n};
    qr_tensor a = f32_tensor(2, ad), b = f32_tensor(2, bd), c = f32_tensor(cnd, cd);
    for (int64_t i = 0; i < m * k; i++)
        ((float *)a.data)[i] = rnd(&seed, 2.0f);
    for (int64_t i = 0; i < k * n; i++)
        ((float *)b.data)[i] = rnd(&seed, 2.0f);
    for (int64_t i = 0; i < qr_tensor_numel(&c); i++)
        ((float *)c.data)[i] = rnd(&seed, 4.0f);
    save("a.npy", &a);
    save("b.npy", &b);
    save("c.npy", &c);
    char args[160];
    snprintf(args, sizeof args, "gemm a.npy b.npy c.npy %.9g %.9g %d want.npy bound.npy", (double)alpha, (double)beta,
             tb);
    oracle(args);
    qr_tensor want = load("want.npy"), bound = load("bound.npy");
    qr_attr at[3] = {{.name = "alpha", .kind = QR_ATTR_FLOAT, .f = alpha},
                     {.name = "beta", .kind = QR_ATTR_FLOAT, .f = beta},
                     {.name = "transB", .kind = QR_ATTR_INT, .i = tb}};
    const qr_tensor *in[3] = {&a, &b, &c};
    qr_kcache cache = {0};
    for (int t = 0; t < 3; t++) { /* B in memory, then constant: packed, then read packed */
        qr_tensor y;
        const_mask = t ? 6 : 0;
        node_cache = t ? &cache : NULL;
        run("Gemm", at, 3, in, 3, &y, 1, NULL);
        check_bound(args, &y, &want, &bound);
        qr_tensor_free(&y);
    }
    const_mask = 0;
    node_cache = NULL;
    free(cache.data);
    qr_tensor_free(&want);
    qr_tensor_free(&bound);
    qr_tensor_free(&a);
    qr_tensor_free(&b);
    qr_tensor_free(&c);
}

Test(f32_rows, gemm_with_bias_matches_numpy)
{
    check_gemm(37, 33, 70, 1, (int64_t[]){70}, 1.0f, 1.0f, 1, 41);         /* Linear: x W^T + b */
    check_gemm(5, 17, 19, 2, (int64_t[]){5, 1}, 0.5f, -2.0f, 0, 42);      /* a value per row */
    check_gemm(9, 8, 23, 2, (int64_t[]){9, 23}, 1.0f, 0.25f, 1, 43);      /* a whole C */
    check_gemm(4, 3, 2, 2, (int64_t[]){1, 1}, -1.5f, 1.0f, 0, 44);        /* one value */
    check_gemm(60, 300, 530, 1, (int64_t[]){530}, 1.0f, 1.0f, 1, 45);     /* K and column blocks */
    check_gemm(2, 30, 50, 1, (int64_t[]){50}, 1.0f, 1.0f, 1, 46);         /* few rows, B transposed */
}

/* ---- GELU's node chains as one pass (exec.c fuse_gelu, qr_gelu_f32) ---- */

#include "exec.h"
#include "passes.h"

static qr_value *scalar(qr_graph *g, const char *name, float v) { return tu_const_f32(g, name, 0, NULL, &v); }

static qr_value *op2(qr_graph *g, const char *op, const char *name, qr_value *a, qr_value *b)
{
    return tu_node(g, op, name, 2, (qr_value *[]){a, b}, 1)->out[0];
}

static qr_value *op1(qr_graph *g, const char *op, const char *name, qr_value *a)
{
    return tu_node(g, op, name, 1, &a, 1)->out[0];
}

/* PyTorch's erf GELU of x, its nodes named p_div, p_erf, p_add, p_mul, p_half; the last constant
 * half. When tap, the Erf's output is also a graph output. */
static qr_value *gelu_erf(qr_graph *g, const char *p, qr_value *x, float half, int tap)
{
    char n[5][32], c[3][32];
    const char *nn[5] = {"div", "erf", "add", "mul", "half"};
    for (int i = 0; i < 5; i++)
        snprintf(n[i], sizeof n[i], "%s_%s", p, nn[i]);
    for (int i = 0; i < 3; i++)
        snprintf(c[i], sizeof c[i], "%s_c%d", p, i);
    qr_value *e = op1(g, "Erf", n[1], op2(g, "Div", n[0], x, scalar(g, c[0], 1.41421356237f)));
    if (tap)
        tu_output(g, e);
    qr_value *a = op2(g, "Add", n[2], e, scalar(g, c[1], 1.0f));
    return op2(g, "Mul", n[4], op2(g, "Mul", n[3], x, a), scalar(g, c[2], half));
}

/* PyTorch's tanh GELU of x (nodes p_sq, p_cube, p_c, p_add, p_s, p_tanh, p_one, p_mul, p_half),
 * the cubic term's constant cubic; when tap, x + 0.044715 x^3 is also read by a Neg (an output). */
static qr_value *gelu_tanh(qr_graph *g, const char *p, qr_value *x, float cubic, int tap)
{
    char n[9][32], c[4][32];
    const char *nn[9] = {"sq", "cube", "c", "add", "s", "tanh", "one", "mul", "half"};
    for (int i = 0; i < 9; i++)
        snprintf(n[i], sizeof n[i], "%s_%s", p, nn[i]);
    for (int i = 0; i < 4; i++)
        snprintf(c[i], sizeof c[i], "%s_c%d", p, i);
    qr_value *cube = op2(g, "Mul", n[1], x, op2(g, "Mul", n[0], x, x));
    qr_value *u = op2(g, "Add", n[3], x, op2(g, "Mul", n[2], scalar(g, c[0], cubic), cube));
    if (tap)
        tu_output(g, op1(g, "Neg", "tap_neg", u));
    qr_value *t = op1(g, "Tanh", n[5], op2(g, "Mul", n[4], scalar(g, c[1], 0.7978845608f), u));
    qr_value *w = op2(g, "Add", n[6], scalar(g, c[2], 1.0f), t);
    return op2(g, "Mul", n[8], scalar(g, c[3], 0.5f), op2(g, "Mul", n[7], x, w));
}

/* Outputs: 0 the erf GELU of x, 1 the tanh GELU (both fused); then chains that almost match and
 * run node by node: 2 the erf form halved by 0.25, 3 and 4 the erf form whose Erf output is also
 * an output, 5 the tanh form with 0.045, 6 and 7 the tanh form whose inner sum has another reader;
 * 8 the tanh GELU of -x (fused); with dynamic a NonZero's (its shape known from the data only: allocated as it runs). */
static qr_graph *gelu_graph(int64_t rows, int64_t n, int dynamic)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[2] = {rows, n};
    qr_value *x = tu_input(g, "x", 2, d);
    tu_output(g, gelu_erf(g, "e", x, 0.5f, 0));
    tu_output(g, gelu_tanh(g, "t", x, 0.044715f, 0));
    tu_output(g, gelu_erf(g, "n1", x, 0.25f, 0));
    tu_output(g, gelu_erf(g, "n2", x, 0.5f, 1));
    tu_output(g, gelu_tanh(g, "n3", x, 0.045f, 0));
    tu_output(g, gelu_tanh(g, "n4", x, 0.044715f, 1));
    /* fused, its input dying there: the pass writes over it when the plan allows */
    tu_output(g, gelu_tanh(g, "r", op1(g, "Neg", "neg", x), 0.044715f, 0));
    if (dynamic)
        tu_output(g, op1(g, "NonZero", "nz", x));
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    return g;
}

static int gelu_node(const qr_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i]->name, name))
            return i;
    cr_assert_fail("no node %s", name);
    return -1;
}

static void gelu_run(const qr_graph *g, int threads, const qr_tensor *x, qr_tensor *outs, int64_t *runs)
{
    qr_exec_opts o = {.threads = threads, .profile = 1};
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, &o, &ex, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_run(ex, x, outs, &e), QR_OK, "%s", e.msg);
    const qr_node_prof *p = qr_exec_profile(ex);
    for (int i = 0; i < g->n_nodes; i++)
        runs[i] = p[i].runs;
    qr_exec_free(ex);
}

/* Bits equal to the nodes' (fuse=0) on every path and thread count; what runs; numpy's GELU. */
static void check_gelu_graph(int64_t rows, int64_t n, int dynamic)
{
    qr_graph *g = gelu_graph(rows, n, dynamic);
    int n_out = g->n_outputs;
    int64_t dims[2] = {rows, n}, cnt = rows * n;
    qr_tensor x = f32_tensor(2, dims);
    float *xv = x.data;
    unsigned seed = 31;
    for (int64_t i = 0; i < cnt; i++) /* both signs; |x| past 5.6, where erf(x / sqrt 2) rounds to +-1 */
        xv[i] = rnd(&seed, i % 3 ? 4.0f : 12.0f);
    const float sp[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, -0.0f, 0.0f, 1e-40f, -1e-40f, 5.7f, -5.7f, -9.0f};
    for (int i = 0; i < (int)(sizeof sp / sizeof sp[0]) && i < cnt; i++)
        xv[cnt - 1 - 3 * i] = sp[i];
    save("x.npy", &x);
    oracle("gelu x.npy want_erf.npy");
    oracle("gelu_tanh x.npy want_tanh.npy");
    qr_tensor want[2] = {load("want_erf.npy"), load("want_tanh.npy")};
    int64_t *runs = calloc((size_t)g->n_nodes, sizeof *runs);
    qr_tensor ref[10], got[10];
    cr_assert(runs && n_out <= 10);
    static const char *const fused_away[] = {"e_erf", "e_add", "e_mul", "e_half", "t_cube", "t_c", "t_add",
                                             "t_s",   "t_tanh", "t_one", "t_mul", "t_half"};
    for (int p = 0; p < 2; p++) {
        if (!use_path(p))
            continue;
        tu_option("fuse", "0"); /* the reference: every node on its own */
        gelu_run(g, 1, &x, ref, runs);
        tu_option("fuse", "");
        for (int threads = 1; threads <= 2; threads++) {
            gelu_run(g, threads, &x, got, runs);
            cr_assert_eq(runs[gelu_node(g, "e_div")], 1);
            cr_assert_eq(runs[gelu_node(g, "t_sq")], 1);
            cr_assert_eq(runs[gelu_node(g, "r_sq")], 1);
            cr_assert_eq(runs[gelu_node(g, "r_half")], 0);
            for (size_t i = 0; i < sizeof fused_away / sizeof *fused_away; i++)
                cr_assert_eq(runs[gelu_node(g, fused_away[i])], 0, "%s runs in its chain's pass", fused_away[i]);
            for (int i = 0; i < g->n_nodes; i++)
                if (!strncmp(g->nodes[i]->name, "n", 1) && strcmp(g->nodes[i]->name, "nz"))
                    cr_assert_eq(runs[i], 1, "%s (a chain that almost matches) runs", g->nodes[i]->name);
            for (int o = 0; o < n_out; o++) {
                cr_assert(qr_tensor_same_shape(&got[o], &ref[o]), "output %d's shape", o);
                cr_assert(memcmp(got[o].data, ref[o].data, qr_tensor_nbytes(&ref[o])) == 0,
                          "output %d (%s) differs fused, %s, %d threads", o, g->outputs[o]->name, path_name[p],
                          threads);
            }
            for (int o = 0; o < 2; o++) { /* the chain's own error: |x| 2^-21 (1 + erf or tanh) + 2^-22 |y| */
                const float *gv = got[o].data;
                const double *wv = want[o].data;
                double worst = 0;
                for (int64_t i = 0; i < cnt; i++) {
                    double w = wv[i], d = fabs((double)gv[i] - w);
                    if (isnan(w) || isinf(w)) {
                        cr_assert(isnan(w) ? isnan(gv[i]) : gv[i] == w, "GELU(%g) = %g, numpy %g", (double)xv[i],
                                  (double)gv[i], w);
                        continue;
                    }
                    /* (plus half a subnormal step: 0.5 x rounds there) */
                    double bound = fabs((double)xv[i]) * 0x1p-21 + fabs(w) * 0x1p-22 + 0x1p-150;
                    cr_assert(d <= bound, "%s GELU(%.9g) = %.9g, numpy %.17g (%s)", o ? "tanh" : "erf", (double)xv[i],
                              (double)gv[i], w, path_name[p]);
                    worst = bound > 0 && d / bound > worst ? d / bound : worst;
                }
                cr_log_info("%s GELU, %s, %d thread(s): worst error %.3f of the bound", o ? "tanh" : "erf",
                            path_name[p], threads, worst);
            }
            for (int o = 0; o < n_out; o++)
                qr_tensor_free(&got[o]);
        }
        for (int o = 0; o < n_out; o++)
            qr_tensor_free(&ref[o]);
    }
    tu_option("f32-rows", "");
    free(runs);
    qr_tensor_free(&want[0]);
    qr_tensor_free(&want[1]);
    qr_tensor_free(&x);
    qr_graph_free(g);
}

Test(f32_rows, gelu_chains_run_as_one_pass_with_the_nodes_bits)
{
    check_gelu_graph(5, 4099, 0); /* two threads' parts; rows not a multiple of 16 */
    check_gelu_graph(3, 37, 0);
    check_gelu_graph(2, 41, 1); /* allocated as it runs */
}

/* ---- Transposes folded into the MatMul beside them (exec.c's fold_transposes) ---- */

static qr_value *transpose_node(qr_graph *g, const char *name, qr_value *x, int r, const int *perm)
{
    qr_node *n = tu_node(g, "Transpose", name, 1, &x, 1);
    int64_t p[QR_MAX_DIMS];
    for (int d = 0; d < r; d++)
        p[d] = perm[d];
    qr_node_add_attr_ints(g, n, "perm", r, p);
    return n->out[0];
}

static const char *perm_str(char *buf, int r, const int *perm)
{
    int at = 0;
    for (int d = 0; d < r; d++)
        at += snprintf(buf + at, 64 - (size_t)at, d ? ",%d" : "%d", perm[d]);
    return buf;
}

/* The attention's shape of a product, x [xd] and y [yd] of rank r: out = T(T(x, px) @ T(y, py), po),
 * all three Transposes folded, and mm5 = (T(x, px) / 3) @ T(y, py), both folded (the Div runs on
 * x's layout); then what must not fold: mm2 = T(x, px) @ T(y, py) where T(x, px) is also read by a
 * Neg (two readers), out3 = T(T(x, px) @ T(y, py), pbad) whose permutation moves the last axis,
 * mm4 = T(x, px) @ w (w 2-D: a weight's product stays one GEMM) and mm6 = (T(x, px) / 3) @ T(y, py)
 * whose quotient is also an output. Against numpy
 * float64 (both signs, NaN and inf in x), and bit for bit against every node on its own (fuse=0),
 * on 1 and 2 threads, with the FMA GEMM and the portable one (sgemm=portable). */
static void check_folds(int r, const int64_t *xd, const int *px, const int64_t *yd, const int *py, const int *po,
                        const int *pbad, unsigned seed)
{
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", r, xd), *y = tu_input(g, "y", r, yd);
    int64_t kd = xd[px[r - 1]], wd[2] = {kd, 7};
    qr_value *w = tu_input(g, "w", 2, wd);
    qr_value *mm = op2(g, "MatMul", "mm", transpose_node(g, "tx", x, r, px), transpose_node(g, "ty", y, r, py));
    tu_output(g, transpose_node(g, "to", mm, r, po));
    qr_value *tx2 = transpose_node(g, "tx2", x, r, px);
    tu_output(g, op2(g, "MatMul", "mm2", tx2, transpose_node(g, "ty2", y, r, py)));
    tu_output(g, op1(g, "Neg", "neg2", tx2));
    qr_value *mm3 = op2(g, "MatMul", "mm3", transpose_node(g, "tx3", x, r, px), transpose_node(g, "ty3", y, r, py));
    tu_output(g, transpose_node(g, "to3", mm3, r, pbad));
    tu_output(g, op2(g, "MatMul", "mm4", transpose_node(g, "tx4", x, r, px), w));
    qr_value *q5 = op2(g, "Div", "div5", transpose_node(g, "tx5", x, r, px), scalar(g, "c5", 3.0f));
    tu_output(g, op2(g, "MatMul", "mm5", q5, transpose_node(g, "ty5", y, r, py)));
    qr_value *q6 = op2(g, "Div", "div6", transpose_node(g, "tx6", x, r, px), scalar(g, "c6", 3.0f));
    tu_output(g, op2(g, "MatMul", "mm6", q6, transpose_node(g, "ty6", y, r, py)));
    tu_output(g, q6);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_tensor in[3] = {f32_tensor(r, xd), f32_tensor(r, yd), f32_tensor(2, wd)};
    for (int i = 0; i < 3; i++)
        for (int64_t j = 0; j < qr_tensor_numel(&in[i]); j++)
            ((float *)in[i].data)[j] = rnd(&seed, 2.0f);
    float *xv = in[0].data;
    int64_t nx = qr_tensor_numel(&in[0]);
    xv[nx / 3] = NAN;
    xv[nx / 2] = INFINITY;
    xv[nx - 1] = -INFINITY;
    save("x.npy", &in[0]);
    save("y.npy", &in[1]);
    save("w.npy", &in[2]);
    char a[64], b[64], c[64], cmd[512];
    int id[QR_MAX_DIMS], id2[2] = {0, 1};
    for (int d = 0; d < r; d++)
        id[d] = d;
    const char *names[6] = {"to", "mm2", "to3", "mm4", "mm5", "mm6"};
    const int outs[6] = {0, 1, 3, 4, 5, 6};
    for (int o = 0; o < 6; o++) {
        snprintf(cmd, sizeof cmd, "matmul_t x.npy %s %s %s %s want%d.npy bound%d.npy %s", perm_str(a, r, px),
                 o == 3 ? "w.npy" : "y.npy", o == 3 ? perm_str(b, 2, id2) : perm_str(b, r, py),
                 perm_str(c, r, o == 0 ? po : o == 2 ? pbad : id), o, o, o >= 4 ? "3" : "1");
        oracle(cmd);
    }
    int64_t *runs = calloc((size_t)g->n_nodes, sizeof *runs);
    cr_assert(runs && g->n_outputs == 8);
    qr_tensor ref[8], got[8];
    static const char *const folded[] = {"tx", "ty", "to", "ty2", "tx3", "ty3", "tx5", "ty5", "ty6"},
                             *const kept[] = {"tx2", "to3", "tx4", "tx6", "div5", "div6"};
    for (int path = 0; path < 2; path++) {
        tu_option("sgemm", path ? "portable" : "");
        tu_option("fuse", "0");
        gelu_run(g, 1, in, ref, runs);
        tu_option("fuse", "");
        for (int threads = 1; threads <= 2; threads++) {
            gelu_run(g, threads, in, got, runs);
            for (size_t i = 0; i < sizeof folded / sizeof *folded; i++)
                cr_assert_eq(runs[gelu_node(g, folded[i])], 0, "%s is folded into its MatMul", folded[i]);
            for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
                cr_assert_eq(runs[gelu_node(g, kept[i])], 1, "%s runs", kept[i]);
            for (int o = 0; o < 8; o++)
                cr_assert(qr_tensor_same_shape(&got[o], &ref[o]) &&
                              memcmp(got[o].data, ref[o].data, qr_tensor_nbytes(&ref[o])) == 0,
                          "output %d (%s) differs folded, %s, %d threads", o, g->outputs[o]->name,
                          path ? "portable" : "FMA", threads);
            for (int o = 0; o < 6 && threads == 1; o++) {
                char f[32];
                snprintf(f, sizeof f, "want%d.npy", o);
                qr_tensor want = load(f);
                snprintf(f, sizeof f, "bound%d.npy", o);
                qr_tensor bound = load(f);
                const qr_tensor *t = &got[outs[o]];
                cr_assert(qr_tensor_same_shape(t, &want), "%s's shape", names[o]);
                const float *gv = t->data;
                const double *wv = want.data, *bv = bound.data;
                for (int64_t i = 0; i < qr_tensor_numel(t); i++) {
                    if (isnan(wv[i]) || isinf(wv[i]))
                        cr_assert(isnan(wv[i]) ? isnan(gv[i]) : gv[i] == wv[i], "%s[%lld] = %g, numpy %g", names[o],
                                  (long long)i, (double)gv[i], wv[i]);
                    else
                        cr_assert(fabs((double)gv[i] - wv[i]) <= bv[i] + 1e-30,
                                  "%s[%lld] = %.9g, numpy %.17g (bound %.3g)", names[o], (long long)i, (double)gv[i],
                                  wv[i], bv[i]);
                }
                qr_tensor_free(&want);
                qr_tensor_free(&bound);
            }
            for (int o = 0; o < 8; o++)
                qr_tensor_free(&got[o]);
        }
        for (int o = 0; o < 8; o++)
            qr_tensor_free(&ref[o]);
    }
    tu_option("sgemm", "");
    free(runs);
    for (int i = 0; i < 3; i++)
        qr_tensor_free(&in[i]);
    qr_graph_free(g);
}

Test(f32_rows, matmul_reads_and_writes_folded_transposes)
{
    /* Q.K^T: [S, BH, D] -> [BH, S, D] by [S, BH, D] -> [BH, D, S] (B packed from its strides), the
     * product back to [S, BH, S] */
    check_folds(3, (int64_t[]){13, 6, 9}, (int[]){1, 0, 2}, (int64_t[]){11, 6, 9}, (int[]){1, 2, 0},
                (int[]){1, 0, 2}, (int[]){0, 2, 1}, 61);
    /* P.V: B read in place with its row stride; 50 rows (B's blocks packed), K 300 (two K blocks) */
    check_folds(3, (int64_t[]){50, 3, 300}, (int[]){1, 0, 2}, (int64_t[]){300, 3, 37}, (int[]){1, 0, 2},
                (int[]){1, 0, 2}, (int[]){2, 1, 0}, 62);
    /* [B, S, H, D] -> [B, H, S, D] (4-D), the output to [S, B, H, N] */
    check_folds(4, (int64_t[]){2, 17, 3, 5}, (int[]){0, 2, 1, 3}, (int64_t[]){2, 19, 3, 5}, (int[]){0, 2, 3, 1},
                (int[]){2, 0, 1, 3}, (int[]){0, 1, 3, 2}, 63);
    /* one row a product (the one-row kernel on B packed), and three (the few rows' kernel, B in place) */
    check_folds(3, (int64_t[]){1, 5, 40}, (int[]){1, 0, 2}, (int64_t[]){33, 5, 40}, (int[]){1, 2, 0},
                (int[]){1, 0, 2}, (int[]){0, 2, 1}, 64);
    check_folds(3, (int64_t[]){3, 4, 20}, (int[]){1, 0, 2}, (int64_t[]){20, 4, 70}, (int[]){1, 0, 2},
                (int[]){1, 0, 2}, (int[]){0, 2, 1}, 65);
}

/* ---- A MatMul's output read by Slices alone (exec.c plan_splits) ---- */

static qr_value *i64_const(qr_graph *g, const char *name, int64_t v)
{
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {1}, .data = &v};
    qr_value *c = qr_graph_new_value(g, name);
    qr_value_set_const(g, c, &t); /* copies the data */
    return c;
}

static qr_value *slice_node(qr_graph *g, const char *name, qr_value *x, int64_t s, int64_t e, int64_t ax, int64_t step)
{
    char b[4][64];
    const char *what[4] = {"s", "e", "a", "p"};
    int64_t v[4] = {s, e, ax, step};
    qr_value *in[5] = {x};
    for (int i = 0; i < 4; i++) {
        snprintf(b[i], sizeof b[i], "%s_%s", name, what[i]);
        in[i + 1] = i64_const(g, b[i], v[i]);
    }
    return tu_node(g, "Slice", name, step ? 5 : 4, in, 1)->out[0];
}

/* X [2, rows, K] by a constant W [K, N] (+ a constant bias, as bert's input projection), the
 * output read by Slices of the last axis alone: they compute their columns themselves (the MatMul
 * does not run), the same bits as the unsplit route (fuse=0: the MatMul, the Add and the copies)
 * on 1 and 2 threads, within the f32 dot product's bound of numpy's float64. Ragged column ranges
 * (not panels of 32), a negative start, an end past N, an explicit step 1, an axis given as r - 1.
 * A second MatMul whose output also has a Slice of another axis keeps its run. */
static void check_split(int64_t rows, int64_t k, int64_t n, unsigned seed)
{
    qr_graph *g = qr_graph_new();
    int64_t xd[3] = {2, rows, k}, wd[2] = {k, n}, bd[1] = {n};
    qr_value *x = tu_input(g, "x", 3, xd);
    float *wv = malloc(sizeof(float) * (size_t)(k * n)), *bv = malloc(sizeof(float) * (size_t)n);
    cr_assert(wv && bv);
    for (int64_t i = 0; i < k * n; i++)
        wv[i] = rnd(&seed, 1.0f);
    for (int64_t i = 0; i < n; i++)
        bv[i] = rnd(&seed, 1.0f);
    qr_value *w = tu_const_f32(g, "w", 2, wd, wv), *b = tu_const_f32(g, "b", 1, bd, bv);
    qr_value *a = op2(g, "Add", "add", b, op2(g, "MatMul", "mm", x, w));
    int64_t c1 = n / 3 + 1, c2 = n - 7;
    tu_output(g, slice_node(g, "s1", a, 0, c1, -1, 0));
    tu_output(g, slice_node(g, "s2", a, c1, c2, 2, 1));
    tu_output(g, slice_node(g, "s3", a, -7, n + 100, -1, 0));
    tu_output(g, slice_node(g, "s4", a, 5, n / 2, -1, 1)); /* overlapping the others */
    qr_value *m2 = op2(g, "MatMul", "mm2", x, w);
    tu_output(g, slice_node(g, "t1", m2, 0, n / 2, -1, 0));
    tu_output(g, slice_node(g, "t2", m2, 0, 1, 1, 0)); /* rows: the MatMul runs */
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_tensor in[1] = {f32_tensor(3, xd)};
    for (int64_t j = 0; j < qr_tensor_numel(&in[0]); j++)
        ((float *)in[0].data)[j] = rnd(&seed, 2.0f);
    qr_tensor wt = f32_tensor(2, wd), bt = f32_tensor(1, bd);
    memcpy(wt.data, wv, sizeof(float) * (size_t)(k * n));
    memcpy(bt.data, bv, sizeof(float) * (size_t)n);
    save("x.npy", &in[0]);
    save("w.npy", &wt);
    oracle("matmul x.npy w.npy want.npy bound.npy");
    qr_tensor want = load("want.npy"), bound = load("bound.npy");
    const int64_t lo[6] = {0, c1, n - 7, 5, 0, 0}, hi[6] = {c1, c2, n, n / 2, n / 2, n};
    int64_t *runs = calloc((size_t)g->n_nodes, sizeof *runs);
    cr_assert(runs && g->n_outputs == 6);
    qr_tensor ref[6], got[6];
    tu_option("fuse", "0");
    gelu_run(g, 1, in, ref, runs);
    tu_option("fuse", "");
    for (int threads = 1; threads <= 2; threads++) {
        gelu_run(g, threads, in, got, runs);
        cr_assert_eq(runs[gelu_node(g, "mm")], 0, "mm is split into its Slices");
        cr_assert_eq(runs[gelu_node(g, "mm2")], 1, "mm2 runs");
        for (int o = 0; o < 6; o++) {
            cr_assert(qr_tensor_same_shape(&got[o], &ref[o]) &&
                          memcmp(got[o].data, ref[o].data, qr_tensor_nbytes(&ref[o])) == 0,
                      "output %d (%s) differs split, %d threads", o, g->outputs[o]->name, threads);
            if (o == 5)
                continue; /* one row of each batch */
            const float *gv = got[o].data;
            const double *ww = want.data, *bb = bound.data;
            int64_t len = hi[o] - lo[o];
            cr_assert_eq(got[o].dims[2], len, "%s's columns", g->outputs[o]->name);
            for (int64_t r = 0; r < 2 * rows; r++)
                for (int64_t c = 0; c < len; c++) {
                    double add = o < 4 ? (double)bv[lo[o] + c] : 0.0, wnt = ww[r * n + lo[o] + c] + add;
                    double bnd = bb[r * n + lo[o] + c] + 0x1p-24 * fabs(wnt); /* the sums', the Add's */
                    cr_assert(fabs((double)gv[r * len + c] - wnt) <= bnd + 1e-30, "%s[%lld][%lld] = %.9g, numpy %.17g",
                              g->outputs[o]->name, (long long)r, (long long)c, (double)gv[r * len + c], wnt);
                }
        }
        for (int o = 0; o < 6; o++)
            qr_tensor_free(&got[o]);
    }
    for (int o = 0; o < 6; o++)
        qr_tensor_free(&ref[o]);
    free(runs);
    free(wv);
    free(bv);
    qr_tensor_free(&want);
    qr_tensor_free(&bound);
    qr_tensor_free(&wt);
    qr_tensor_free(&bt);
    qr_tensor_free(&in[0]);
    qr_graph_free(g);
}

Test(f32_rows, slices_of_a_weights_product_compute_their_columns)
{
    check_split(64, 256, 768, 71); /* bert's projection, 128 rows */
    check_split(9, 37, 101, 72);   /* 18 rows, ragged K and N */
    check_split(40, 300, 70, 73);  /* K past one block of 256 */
}
