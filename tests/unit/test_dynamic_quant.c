/* Run-time quantization (dynamic recipes): the runtime's DynamicQuantizeRows (domain qrl) against
 * numpy's DynamicQuantizeLinear formula row by row, bit for bit, on rows of both signs, rows all
 * equal, rows all 0, a one-element row and rows with NaN and infinities; and MatMulInteger with a
 * zero point per row of A (the u8s8 microkernel's path and the general one) against numpy's
 * integer product.
 * NaN policy: a NaN does not widen a row's range and is quantized as 0 (to the zero point), as
 * QuantizeLinear quantizes it here; the other values of its row are unaffected. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/f32_rows.h"
#include "parallel.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

TestSuite(dynamic_quant, .init = setup, .fini = teardown, .timeout = 120);

/* One node of the op table run on inputs (ins[i] NULL: absent), its outputs allocated here. */
static void run_op(const char *domain, const char *op, const qr_tensor **ins, int n_in, qr_tensor *outs, int n_out)
{
    const qr_op_def *d = qr_op_find(domain, op);
    cr_assert(d, "%s is not in the op table", op);
    qr_node n = {.name = "n", .op = op, .domain = domain, .opset = 17, .n_in = n_in, .n_out = n_out, .def = d};
    qr_tensor *o[4];
    for (int i = 0; i < n_out; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        o[i] = &outs[i];
    }
    qr_error e = {{0}};
    qr_kctx k = {.node = &n, .opset = 17, .n_in = n_in, .n_out = n_out, .in = ins, .out = o, .err = &e};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    for (int i = 0; i < n_out; i++)
        cr_assert_eq(qr_tensor_alloc(&outs[i], &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
}

/* DynamicQuantizeRows with a GELU chain g fused before it (k->pre_gelu: the executor's fuse_gelu), on
 * `threads` threads; outputs allocated here. */
static void run_rows_gelu(const qr_tensor *x, const qr_gelu_consts *g, int threads, qr_tensor *outs)
{
    const qr_op_def *d = qr_op_find("qrl", "DynamicQuantizeRows");
    cr_assert(d && d->gelu_in, "DynamicQuantizeRows takes a GELU chain before it");
    qr_node n = {.name = "n", .op = "DynamicQuantizeRows", .domain = "qrl", .opset = 1, .n_in = 1, .n_out = 3, .def = d};
    qr_tensor *o[3];
    for (int i = 0; i < 3; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        o[i] = &outs[i];
    }
    const qr_tensor *ins[1] = {x};
    qr_error e = {{0}};
    qr_pool *pool = qr_pool_new(threads);
    qr_kctx k = {.node = &n, .opset = 1, .n_in = 1, .n_out = 3, .in = ins, .out = o, .err = &e, .pool = pool,
                 .pre_gelu = g};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(qr_tensor_alloc(&outs[i], &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    qr_pool_free(pool);
}

static void save(const char *name, const qr_tensor *t) { tu_npy_save(dir, name, t); }

static qr_tensor load(const char *name) { return tu_npy_load(dir, name); }

static void python(const char *code)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 -c \"%s\"", dir, code);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* numpy's DynamicQuantizeLinear, all in float32 (the ONNX reference's formula; a range of 0 has
 * scale 1, as ONNX Runtime gives it), on each row of x's last axis: y, scale, zero as .npy. */
static const char *const numpy_rows =
    "import numpy as np\n"
    "x = np.load('x.npy'); k = x.shape[-1]; r = x.reshape(-1, k)\n"
    "with np.errstate(all='ignore'):\n"
    "  lo = np.minimum(np.nanmin(np.where(np.isnan(r), 0, r), axis=1), np.float32(0))\n"
    "  hi = np.maximum(np.nanmax(np.where(np.isnan(r), 0, r), axis=1), np.float32(0))\n"
    "  s = np.where(hi == lo, np.float32(1), (hi - lo) / np.float32(255)).astype(np.float32)\n"
    "  z = np.round(np.clip(np.float32(0) - lo / s, 0, 255)).astype(np.float32)\n"
    "  q = np.round((r / s[:, None]).astype(np.float32))\n"
    "  q = np.where(np.isnan(q), 0, q) + z[:, None]\n"
    "  y = np.clip(q, 0, 255).astype(np.uint8)\n"
    "shp = x.shape[:-1] + (1,)\n"
    "np.save('y.npy', y.reshape(x.shape)); np.save('s.npy', s.reshape(shp)); np.save('z.npy', z.astype(np.uint8).reshape(shp))\n";

/* Rows of K values of every kind (ties, NaN, infinity, one sign, 0 only, a tiny range) against
 * numpy, on the AVX-512 loops where the CPU has them or the portable ones (portable: the quant option). */
static void check_rows(int64_t K, int portable)
{
    /* 44 rows: the AVX-512 path's two blocks of sixteen and a rest; each kind of row in all three */
    enum { ROWS = 44 };
    if (portable)
        tu_option("quant", "portable");
    qr_tensor x = {.dtype = QR_F32, .ndim = 3, .dims = {4, 11, K}};
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&x, &e), QR_OK);
    float *xf = x.data;
    unsigned seed = 7;
    for (int row = 0; row < ROWS; row++)
        for (int c = 0, r = row % 12; c < K; c++) {
            seed = seed * 1103515245u + 12345u;
            float v = ((float)(seed >> 16 & 0xffff) / 65536.0f - 0.5f) * 8.0f; /* both signs */
            xf[row * K + c] = r == 1 ? 2.5f                         /* all equal, positive */
                            : r == 2 ? -0.75f                       /* all equal, negative */
                            : r == 3 ? 0.0f                         /* 0 only: scale 1 */
                            : r == 4 ? (c == 5 || c == 20 || c == K - 1 ? NAN : v) /* NaNs, one last */
                            : r == 5 ? fabsf(v) + 0.5f              /* positive only: zero point 0 */
                            : r == 6 ? -fabsf(v) - 0.5f             /* negative only: zero point 255 */
                            : r == 7 ? (c == 0 ? 1e-30f : 0.0f)     /* a tiny range */
                            : r == 8 ? (c == 3 ? INFINITY : v)      /* an infinity */
                            : r == 9 ? v * 1000.0f                  /* large */
                            : r == 11 ? (c == 0 ? -INFINITY : c == 1 ? INFINITY : v) /* zero point NaN */
                                      : v;
        }
    /* range [-128.5, 126.5]: scale 1, the zero point 128.5 and every value a tie, rounded to even */
    for (int row = 10; row < ROWS; row += 12)
        for (int c = 0; c < K; c++)
            xf[row * K + c] = c == K - 1 ? 126.5f : (float)c - 128.5f;
    save("x", &x);
    python(numpy_rows);
    const qr_tensor *ins[1] = {&x};
    qr_tensor out[3];
    run_op("qrl", "DynamicQuantizeRows", ins, 1, out, 3);
    qr_tensor y = load("y"), s = load("s"), z = load("z");
    cr_assert_eq(out[1].ndim, 3);
    cr_assert_eq(out[1].dims[2], 1, "the scales keep the row axis as 1");
    cr_assert_eq(memcmp(out[0].data, y.data, (size_t)(ROWS * K)), 0, "K %lld%s: the integers differ from numpy's",
                 (long long)K, portable ? " (portable)" : "");
    for (int r = 0; r < ROWS; r++) {
        float a = ((float *)out[1].data)[r], b = ((float *)s.data)[r];
        cr_expect(memcmp(&a, &b, 4) == 0, "K %lld, row %d: scale %.9g, numpy %.9g", (long long)K, r, a, b);
        cr_expect_eq(((uint8_t *)out[2].data)[r], ((uint8_t *)z.data)[r], "K %lld, row %d: zero point", (long long)K,
                     r);
    }
    cr_expect_eq(((float *)out[1].data)[3], 1.0f, "a row of 0s has scale 1");
    if (K > 5)
        cr_expect_eq(((uint8_t *)out[0].data)[4 * K + 5], ((uint8_t *)out[2].data)[4],
                     "NaN is quantized to the zero point");
    /* DynamicQuantizeLinear on one row alone gives that row's bits */
    qr_tensor row = {.dtype = QR_F32, .ndim = 1, .dims = {K}, .data = xf + 4 * K};
    const qr_tensor *rin[1] = {&row};
    qr_tensor dq[3];
    run_op("", "DynamicQuantizeLinear", rin, 1, dq, 3);
    cr_expect_eq(memcmp(dq[0].data, (uint8_t *)out[0].data + 4 * K, K), 0);
    cr_expect_eq(*(float *)dq[1].data, ((float *)out[1].data)[4]);
    for (int i = 0; i < 3; i++) {
        qr_tensor_free(&out[i]);
        qr_tensor_free(&dq[i]);
    }
    qr_tensor_free(&x);
    qr_tensor_free(&y);
    qr_tensor_free(&s);
    qr_tensor_free(&z);
    tu_option("quant", "");
}

Test(dynamic_quant, rows_match_numpy_bit_for_bit)
{
    /* rows shorter than a vector, of whole vectors, of two vectors and a tail (a head's 64, a
     * model's 256, a feed-forward's 1000) */
    static const int64_t ks[] = {1, 5, 16, 37, 64, 100, 256, 1000};
    for (int portable = 0; portable <= 1; portable++)
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
            check_rows(ks[i], portable);
}

/* acc = (A - z_row) B over int64 in numpy, for A u8 [2, 5, K] with zero points [2, 5, 1] and for a
 * matrix A [M, K] with 1-D zero points; B s8 [K, N] (the microkernel's path) and u8 (the general). */
static void check_matmul(qr_dtype bt, int matrix)
{
    enum { K = 19, N = 21 };
    int64_t rows = matrix ? 7 : 10;
    qr_tensor a = {.dtype = QR_U8, .ndim = matrix ? 2 : 3}, z = {.dtype = QR_U8, .ndim = matrix ? 1 : 3};
    if (matrix) {
        a.dims[0] = rows, a.dims[1] = K;
        z.dims[0] = rows;
    } else {
        a.dims[0] = 2, a.dims[1] = 5, a.dims[2] = K;
        z.dims[0] = 2, z.dims[1] = 5, z.dims[2] = 1;
    }
    qr_tensor b = {.dtype = bt, .ndim = 2, .dims = {K, N}};
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&a, &e), QR_OK);
    cr_assert_eq(qr_tensor_alloc(&z, &e), QR_OK);
    cr_assert_eq(qr_tensor_alloc(&b, &e), QR_OK);
    unsigned seed = 3;
    for (int64_t i = 0; i < rows * K; i++)
        ((uint8_t *)a.data)[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
    for (int64_t i = 0; i < rows; i++)
        ((uint8_t *)z.data)[i] = (uint8_t)(i == 0 ? 0 : i == 1 ? 255 : (seed = seed * 1103515245u + 12345u) >> 16);
    for (int64_t i = 0; i < K * N; i++)
        ((uint8_t *)b.data)[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
    save("a", &a);
    save("za", &z);
    save("b", &b);
    python("import numpy as np\n"
           "a = np.load('a.npy').astype(np.int64); z = np.load('za.npy').astype(np.int64)\n"
           "z = z.reshape(a.shape[:-1] + (1,))\n"
           "np.save('acc.npy', ((a - z) @ np.load('b.npy').astype(np.int64)).astype(np.int32))\n");
    const qr_tensor *ins[4] = {&a, &b, &z, NULL};
    qr_tensor out[1];
    run_op("", "MatMulInteger", ins, 3, out, 1);
    qr_tensor want = load("acc");
    cr_assert_eq(qr_tensor_numel(&out[0]), rows * N);
    cr_expect_eq(memcmp(out[0].data, want.data, (size_t)(rows * N) * 4), 0, "B %s, A %s: the accumulators differ",
                 qr_dtype_name(bt), matrix ? "a matrix, 1-D zero points" : "batched, zero points [..., 1]");
    qr_tensor_free(&out[0]);
    qr_tensor_free(&want);
    qr_tensor_free(&a);
    qr_tensor_free(&z);
    qr_tensor_free(&b);
}

Test(dynamic_quant, matmul_integer_takes_a_zero_point_per_row)
{
    check_matmul(QR_I8, 0);
    check_matmul(QR_I8, 1);
    check_matmul(QR_U8, 0);
    check_matmul(QR_U8, 1);
}

/* QrlMatMulScaled (runtime/pass_dynrows.c's product of a dynamic export fused with its scaling)
 * against numpy: acc = (A - z_row) B over int64, wrapped to int32, then ((f32(acc) * s) * w
 * [+ bias]) [* or / k], each step in float32, bit for bit. A u8 batched [2, 5, K] with s and zero
 * points [2, 5, 1] (scales of both signs' rows) and a matrix [rows, K] with s [rows, 1]; B s8 (the
 * microkernel's blocks of rows) and u8 (the general path, one block); w one a column or one; with
 * and without the bias and the factor, and the executor's fused Add of a row vector after them;
 * K 70000 where the sums wrap. */
static void check_scaled(qr_dtype bt, int matrix, int64_t rows, int64_t K, int64_t N, int per_col, int bias_on,
                         int last, int ebias_on)
{
    qr_tensor a = {.dtype = QR_U8, .ndim = matrix ? 2 : 3}, z = {.dtype = QR_U8, .ndim = matrix ? 2 : 3};
    qr_tensor s = {.dtype = QR_F32, .ndim = matrix ? 2 : 3};
    if (matrix) {
        a.dims[0] = rows, a.dims[1] = K;
        z.dims[0] = s.dims[0] = rows, z.dims[1] = s.dims[1] = 1;
    } else {
        rows = 10;
        a.dims[0] = 2, a.dims[1] = 5, a.dims[2] = K;
        z.dims[0] = s.dims[0] = 2, z.dims[1] = s.dims[1] = 5, z.dims[2] = s.dims[2] = 1;
    }
    qr_tensor b = {.dtype = bt, .ndim = 2, .dims = {K, N}}, w = {.dtype = QR_F32, .ndim = 1, .dims = {per_col ? N : 1}};
    qr_tensor bias = {.dtype = QR_F32, .ndim = 1, .dims = {N}}, kk = {.dtype = QR_F32, .ndim = 0};
    qr_error e = {{0}};
    qr_tensor eb = {.dtype = QR_F32, .ndim = 1, .dims = {N}};
    qr_tensor *all[] = {&a, &z, &s, &b, &w, &bias, &kk, &eb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cr_assert_eq(qr_tensor_alloc(all[i], &e), QR_OK);
    unsigned seed = 7;
#define RND() ((seed = seed * 1103515245u + 12345u) >> 16)
    int wrap = K > 65536;
    for (int64_t i = 0; i < rows * K; i++) /* wrapping: 255 * 127 * 70000 > 2^31 */
        ((uint8_t *)a.data)[i] = wrap ? 255 : (uint8_t)RND();
    for (int64_t i = 0; i < rows; i++) {
        ((uint8_t *)z.data)[i] = (uint8_t)(wrap ? 0 : i == 0 ? 0 : i == 1 ? 255 : RND());
        ((float *)s.data)[i] = (float)((int)(RND() % 2001) - 1000) * 1.37e-5f;
    }
    for (int64_t i = 0; i < K * N; i++)
        ((uint8_t *)b.data)[i] = wrap ? (uint8_t)(i % N == 0 ? 0x81 : 127) : (uint8_t)RND();
    for (int64_t i = 0; i < N; i++) {
        ((float *)w.data)[i % w.dims[0]] = (float)((int)(RND() % 999) + 1) * 3.1e-4f;
        ((float *)bias.data)[i] = (float)((int)(RND() % 2001) - 1000) * 0.0123f;
        ((float *)eb.data)[i] = (float)((int)(RND() % 2001) - 1000) * 0.0071f;
    }
    ((float *)kk.data)[0] = 0.3f;
#undef RND
    save("a", &a);
    save("za", &z);
    save("b", &b);
    save("s", &s);
    save("w", &w);
    save("bias", &bias);
    save("eb", &eb);
    char code[2048];
    snprintf(code, sizeof code,
             "import numpy as np\n"
             "a = np.load('a.npy').astype(np.int64); z = np.load('za.npy').astype(np.int64)\n"
             "acc = ((a - z) @ np.load('b.npy').astype(np.int64)).astype(np.int32)\n"
             "y = acc.astype(np.float32) * np.load('s.npy')\n"
             "y = y * np.load('w.npy')\n"
             "%s\n%s\n%s\n"
             "np.save('y.npy', y.astype(np.float32))\n",
             bias_on ? "y = y + np.load('bias.npy')" : "", last == 1 ? "y = y * np.float32(0.3)" : last == 2 ? "y = y / np.float32(0.3)" : "",
             ebias_on ? "y = y + np.load('eb.npy')" : "");
    python(code);
    const qr_tensor *ins[8] = {&a, &b, &z, NULL, &s, &w, bias_on ? &bias : NULL, last ? &kk : NULL};
    const qr_op_def *d = qr_op_find("qrl", "QrlMatMulScaled");
    cr_assert(d, "QrlMatMulScaled is not in the op table");
    int64_t lastv = last;
    qr_attr at = {.name = "last", .kind = QR_ATTR_INT, .i = lastv};
    qr_node n = {.name = "n", .op = "QrlMatMulScaled", .domain = "qrl", .opset = 1, .n_in = last ? 8 : bias_on ? 7 : 6,
                 .n_out = 1, .def = d, .attr = &at, .n_attr = 1};
    qr_tensor out = {0}, *o[1] = {&out};
    qr_kctx k = {.node = &n, .opset = 1, .n_in = n.n_in, .n_out = 1, .in = ins, .out = o, .err = &e,
                 .bias = ebias_on ? &eb : NULL}; /* (the executor's fused Add of a row vector) */
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_tensor_alloc(&out, &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    qr_tensor want = load("y");
    cr_assert_eq(qr_tensor_numel(&out), rows * N);
    cr_expect_eq(memcmp(out.data, want.data, (size_t)(rows * N) * 4), 0,
                 "B %s, %s, K %lld, N %lld, w %s, bias %d, last %d: the outputs differ (first: %g against %g)",
                 qr_dtype_name(bt), matrix ? "a matrix" : "batched", (long long)K, (long long)N,
                 per_col ? "a column's" : "one", bias_on, last, ((float *)out.data)[0], ((float *)want.data)[0]);
    qr_tensor_free(&out);
    qr_tensor_free(&want);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        qr_tensor_free(all[i]);
}

Test(dynamic_quant, scaled_product_matches_numpy_bit_for_bit)
{
    check_scaled(QR_I8, 0, 0, 19, 21, 1, 1, 0, 0);
    check_scaled(QR_I8, 1, 67, 37, 50, 1, 0, 0, 1); /* 64-row blocks and a ragged one; a fused Add */
    check_scaled(QR_I8, 1, 9, 64, 33, 0, 0, 2, 0);
    check_scaled(QR_I8, 1, 3, 19, 21, 1, 1, 1, 1);  /* the GEMV's rows: one block */
    check_scaled(QR_U8, 0, 0, 19, 21, 0, 1, 2, 1);  /* the general path */
    check_scaled(QR_U8, 1, 11, 23, 17, 1, 0, 1, 0);
    check_scaled(QR_I8, 1, 9, 70000, 5, 1, 1, 0, 0); /* sums that wrap */
}

/* GELU then DynamicQuantizeRows in one pass (exec.c fuse_gelu hands the chain to the node: each
 * sixteen rows through the chain into a slot, then quantized from there): on the portable f32
 * loops against numpy (GELU's steps in float32, erf and tanh in float64 rounded once, as
 * f32_rows.c's portable chain; then numpy_rows), bit for bit; on the AVX-512 table against the
 * executor's unfused pair (qr_gelu_f32's pass, then the op alone). Both GELU forms; 39 rows of
 * K (two groups of sixteen and a ragged seven; K 5 shorter than a vector, 70 a tail, 1000 a
 * feed-forward's), values of both signs, a row of zeros; 1 and 2 threads give the same bytes. */
static void check_rows_gelu(int tanh_form, int64_t K, int portable)
{
    enum { ROWS = 39 };
    const qr_gelu_consts g = tanh_form ? (qr_gelu_consts){1, {0.044715f, 0.797884560802865356f, 1.0f, 0.5f}}
                                       : (qr_gelu_consts){0, {1.41421356237309505f, 1.0f, 0.5f, 0}};
    tu_option("f32-rows", portable ? "portable" : "auto");
    qr_tensor x = {.dtype = QR_F32, .ndim = 3, .dims = {3, 13, K}};
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&x, &e), QR_OK);
    float *xf = x.data;
    unsigned seed = 11;
    for (int row = 0; row < ROWS; row++)
        for (int c = 0; c < K; c++) {
            seed = seed * 1103515245u + 12345u;
            float v = ((float)(seed >> 16 & 0xffff) / 65536.0f - 0.5f) * (row % 3 == 1 ? 12.0f : 5.0f);
            xf[row * K + c] = row == 5 ? 0.0f : row % 7 == 2 ? -fabsf(v) : v; /* both signs, negatives only, 0s */
        }
    qr_tensor out[3], two[3];
    run_rows_gelu(&x, &g, 1, out);
    run_rows_gelu(&x, &g, 2, two);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(memcmp(out[i].data, two[i].data, qr_tensor_nbytes(&out[i])), 0,
                     "K %lld: output %d differs on 2 threads", (long long)K, i);
    qr_tensor ref[3];
    if (portable) {
        save("x", &x);
        char code[4096];
        snprintf(code, sizeof code,
                 "import numpy as np, math\n"
                 "x = np.load('x.npy'); f = np.float32; c = [f(v) for v in (%.9g, %.9g, %.9g, %.9g)]\n"
                 "if %d:\n"
                 "  u = x + c[0] * (x * (x * x))\n"
                 "  t = np.vectorize(lambda v: f(math.tanh(float(v))))(c[1] * u).astype(f)\n"
                 "  g = c[3] * (x * (c[2] + t))\n"
                 "else:\n"
                 "  t = np.vectorize(lambda v: f(math.erf(float(v))))(x / c[0]).astype(f)\n"
                 "  g = (t + c[1]) * x * c[2]\n"
                 "np.save('x.npy', g.astype(f))\n",
                 g.c[0], g.c[1], g.c[2], g.c[3], tanh_form);
        python(code);
        python(numpy_rows);
        ref[0] = load("y"), ref[1] = load("s"), ref[2] = load("z");
    } else {
        qr_tensor gx = x;
        gx.data = NULL;
        cr_assert_eq(qr_tensor_alloc(&gx, &e), QR_OK);
        qr_gelu_f32(qr_f32_rows_best(), &g, xf, gx.data, ROWS * K);
        const qr_tensor *ins[1] = {&gx};
        run_op("qrl", "DynamicQuantizeRows", ins, 1, ref, 3);
        qr_tensor_free(&gx);
    }
    const char *what[3] = {"integers", "scales", "zero points"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(qr_tensor_nbytes(&out[i]), qr_tensor_nbytes(&ref[i]));
        cr_assert_eq(memcmp(out[i].data, ref[i].data, qr_tensor_nbytes(&out[i])), 0,
                     "%s form, K %lld%s: the %s differ from %s", tanh_form ? "tanh" : "erf", (long long)K,
                     portable ? " (portable)" : "", what[i], portable ? "numpy's" : "the unfused pair's");
        qr_tensor_free(&out[i]);
        qr_tensor_free(&two[i]);
        qr_tensor_free(&ref[i]);
    }
    qr_tensor_free(&x);
    tu_option("f32-rows", "auto");
}

Test(dynamic_quant, gelu_then_rows_match_numpy_bit_for_bit)
{
    static const int64_t ks[] = {5, 70, 1000};
    for (int portable = 0; portable <= 1; portable++)
        for (int tanh_form = 0; tanh_form <= 1; tanh_form++)
            for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
                check_rows_gelu(tanh_form, ks[i], portable);
}
