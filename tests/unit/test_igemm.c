/* The u8 x s8 GEMM microkernels (runtime/ops/igemm*.c) against the portable
 * reference on ragged shapes and sums that wrap int32, and ConvInteger on
 * the microkernel against ConvInteger on the portable int32 path
 * (igemm=portable) with padding, strides, dilations, groups (depthwise
 * too, which has a kernel of its own) and a nonzero input zero point. On a CPU without a microkernel the comparisons
 * are skipped and say so. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/igemm.h"

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static void pack_b(const uint8_t *b, int64_t k, int64_t n, uint8_t *p)
{
    int64_t n16 = qr_igemm_n16(n);
    memset(p, 0, (size_t)(qr_igemm_k4(k) * n16));
    for (int64_t q = 0; q < k; q++)
        for (int64_t j = 0; j < n; j++)
            p[((q >> 2) * n16 + j) * 4 + (q & 3)] = b[q * n + j];
}

static void check_kernel(const char *isa, qr_igemm_fn fn);

/* The oracle, written here and sharing nothing with the product: init plus the sum of the products
 * in int64, wrapped to int32 at the end (the kernels' 32-bit lanes wrap, two's complement). */
static int32_t wrap32(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)v;
}

/* Row i, column j of A (s8, rows k4 apart) times B (u8, k x n, row-major, unpacked). */
static int32_t exact_ab(const int8_t *a, int64_t k4, const uint8_t *b, int64_t k, int64_t n, int32_t init, int64_t i,
                        int64_t j)
{
    int64_t acc = init;
    for (int64_t q = 0; q < k; q++)
        acc += (int64_t)a[i * k4 + q] * (int64_t)b[q * n + j];
    return wrap32(acc);
}

/* Every ISA's kernel this CPU runs, on shapes with ragged rows, K and columns, and sums that wrap;
 * each computes its rows in two calls (the row ranges threads get). */
Test(igemm, kernels_match_reference_on_ragged_and_wrapping_shapes)
{
    static const char *const isas[] = {"avx512vnni", "avxvnni", "avx2"};
    int tested = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        qr_igemm_fn fn = qr_igemm_u8s8_isa(isas[i]);
        if (!fn) {
            cr_log_info("this CPU has no %s: its u8s8 kernel is not tested here", isas[i]);
            continue;
        }
        check_kernel(isas[i], fn);
        tested++;
    }
    cr_assert(qr_igemm_u8s8_isa("sse9") == NULL);
    if (!tested)
        cr_log_info("no u8s8 microkernel on this CPU: nothing to compare");
}

static void check_kernel(const char *isa, qr_igemm_fn fn)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {4, 4, 16}, {5, 37, 17}, {9, 64, 33}, {8, 3, 100},
                                 {7, 11, 8}, {6, 9, 24}, {2, 70000, 19},
                                 /* halves of eight rows and more: the 8-row tiles, with 32 and 16 columns */
                                 {16, 20, 16}, {17, 37, 45}, {24, 13, 70}, {38, 70000, 33},
                                 /* packing rows 4 KiB apart (N16 1024, 2048): six-row tiles of 64 columns, rows
                                  * not a multiple of six, the last columns under masks */
                                 {13, 37, 1024}, {7, 9, 1013}, {25, 70000, 1024}, {1, 5, 2040}};
    unsigned seed = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2], k4 = qr_igemm_k4(k);
        int wrap = k > 60000; /* 255 * 127 * k exceeds 2^31: the sums must wrap exactly */
        int8_t *a = calloc((size_t)(m * k4), 1);
        uint8_t *b = malloc((size_t)(k * n)), *bp = malloc((size_t)(k4 * qr_igemm_n16(n)));
        int32_t *init = malloc(sizeof *init * (size_t)m), *c1 = malloc(sizeof *c1 * (size_t)(m * n)),
                *c2 = malloc(sizeof *c2 * (size_t)(m * n));
        cr_assert(a && b && bp && init && c1 && c2);
        for (int64_t i = 0; i < m; i++)
            for (int64_t q = 0; q < k; q++)
                a[i * k4 + q] = wrap ? 127 : (int8_t)(rnd(&seed) & 0xff);
        for (int64_t i = 0; i < k * n; i++)
            b[i] = wrap ? 255 : (uint8_t)(rnd(&seed) & 0xff);
        for (int64_t i = 0; i < m; i++)
            init[i] = (int32_t)rnd(&seed) - (1 << 23);
        pack_b(b, k, n, bp);
        qr_igemm_u8s8_ref(c1, n, a, init, 0, m, bp, k4, n);
        fn(c2, n, a, init, 0, m / 2, bp, k4, n);
        fn(c2, n, a, init, m / 2, m, bp, k4, n);
        for (int64_t i = 0; i < m * n; i++)
            cr_assert_eq(c2[i], c1[i], "%s, shape %lldx%lldx%lld element %lld: %d vs %d", isa, (long long)m,
                         (long long)k, (long long)n, (long long)i, c2[i], c1[i]);
        /* the reference and the kernel against the exact sum (every row; the largest shape's first and
         * last rows) */
        for (int64_t i = 0; i < m; i += m * n * k > 100000000 && i + 1 < m ? m - 1 : 1)
            for (int64_t j = 0; j < n; j++) {
                int32_t want = exact_ab(a, k4, b, k, n, init[i], i, j);
                cr_assert_eq(c1[i * n + j], want, "reference, shape %lldx%lldx%lld, row %lld column %lld: %d, exact %d",
                             (long long)m, (long long)k, (long long)n, (long long)i, (long long)j, c1[i * n + j], want);
                cr_assert_eq(c2[i * n + j], want, "%s, shape %lldx%lldx%lld, row %lld column %lld: %d, exact %d", isa,
                             (long long)m, (long long)k, (long long)n, (long long)i, (long long)j, c2[i * n + j], want);
            }
        /* its twin on the rows widened to i16 (as quant.c packs constant weights for it) */
        qr_igemm16_fn wide = qr_igemm_wide_twin(fn);
        int16_t *a16 = wide ? malloc(sizeof *a16 * (size_t)(m * k4)) : NULL;
        for (int64_t i = 0; a16 && i < m * k4; i++)
            a16[i] = a[i];
        if (wide) {
            cr_assert(a16);
            for (int64_t i = 0; i < m * n; i++)
                c2[i] = (int32_t)0xdeadbeef;
            wide(c2, n, a16, init, 0, m / 2, bp, k4, n);
            wide(c2, n, a16, init, m / 2, m, bp, k4, n);
            for (int64_t i = 0; i < m * n; i++)
                cr_assert_eq(c2[i], c1[i], "%s on i16 rows, shape %lldx%lldx%lld element %lld: %d vs %d", isa,
                             (long long)m, (long long)k, (long long)n, (long long)i, c2[i], c1[i]);
        }
        free(a16);
        free(a);
        free(b);
        free(bp);
        free(init);
        free(c1);
        free(c2);
    }
}

/* The GEMV (few rows) against its reference: ragged column counts around its 128- and 16-column
 * steps, column ranges split where threads split them, and sums that wrap. */
Test(igemm, gemv_matches_reference_on_ragged_and_wrapping_shapes)
{
    qr_igemv_fn fn = qr_igemv_u8s8();
    if (!fn) {
        cr_log_info("no AVX-512 VNNI GEMV on this CPU: nothing to compare");
        return;
    }
    const int64_t shapes[][2] = {{1, 1}, {7, 3}, {16, 16}, {33, 127}, {64, 128}, {100, 129}, {1568, 128},
                                 {9, 300}, {70000, 19}, {70000, 150}, {1568, 64}, {9, 40}, {5, 64}, {1, 50},
                                 {13, 200}};
    unsigned seed = 11;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t k = shapes[s][0], n = shapes[s][1], k4 = qr_igemm_k4(k), n16 = qr_igemm_n16(n);
        int wrap = k > 60000; /* 255 * 127 * k exceeds 2^31 */
        uint8_t *x = calloc((size_t)k4, 1);
        int8_t *w = calloc((size_t)(k4 * n16), 1), *wk = malloc((size_t)(k * n)); /* wk: unpacked, k x n */
        int32_t *init = malloc(sizeof *init * (size_t)n), *y1 = malloc(sizeof *y1 * (size_t)n),
                *y2 = malloc(sizeof *y2 * (size_t)n);
        cr_assert(x && w && wk && init && y1 && y2);
        for (int64_t q = 0; q < k; q++)
            x[q] = wrap ? 255 : (uint8_t)(rnd(&seed) & 0xff);
        for (int64_t q = 0; q < k; q++)
            for (int64_t j = 0; j < n; j++)
                w[((q >> 2) * n16 + j) * 4 + (q & 3)] = wk[q * n + j] = wrap ? 127 : (int8_t)(rnd(&seed) & 0xff);
        for (int64_t j = 0; j < n; j++)
            init[j] = (int32_t)rnd(&seed) - (1 << 23);
        qr_igemv_u8s8_ref(y1, x, w, init, k4, 0, n16, n);
        int64_t mid = n16 / 32 * 16; /* two ranges, as two threads take them */
        fn(y2, x, w, init, k4, 0, mid, n);
        fn(y2, x, w, init, k4, mid, n16, n);
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(y2[j], y1[j], "K %lld, N %lld, column %lld: %d vs %d", (long long)k, (long long)n,
                         (long long)j, y2[j], y1[j]);
        for (int64_t j = 0; j < n; j++) { /* both against the exact sum, from the unpacked weights */
            int64_t acc = init[j];
            for (int64_t q = 0; q < k; q++)
                acc += (int64_t)x[q] * (int64_t)wk[q * n + j];
            cr_assert_eq(y1[j], wrap32(acc), "reference, K %lld, N %lld, column %lld: %d, exact %d", (long long)k,
                         (long long)n, (long long)j, y1[j], wrap32(acc));
            cr_assert_eq(y2[j], wrap32(acc), "K %lld, N %lld, column %lld: %d, exact %d", (long long)k, (long long)n,
                         (long long)j, y2[j], wrap32(acc));
        }
        free(x);
        free(w);
        free(wk);
        free(init);
        free(y1);
        free(y2);
    }
}

/* Runs a three-input integer op (x or a, w or b, x or a zero point) through the op table. */
static void run3(const char *op, const qr_tensor *x, const qr_tensor *w, const qr_tensor *xz, qr_attr *attrs, int nattr,
                 qr_tensor *y)
{
    const qr_op_def *d = qr_op_find("", op);
    cr_assert(d);
    qr_node n = {.name = "n", .op = op, .domain = "", .opset = 13, .n_in = 3, .n_out = 1, .n_attr = nattr,
                 .attr = attrs, .def = d};
    const qr_tensor *in[3] = {x, w, xz};
    qr_tensor *out[1] = {y};
    qr_error e;
    qr_kctx k = {.node = &n, .opset = 13, .n_in = 3, .n_out = 1, .in = in, .out = out, .err = &e};
    memset(y, 0, sizeof *y);
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_tensor_alloc(y, &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
}

/* The op on the portable int32 path (qr_igemm_force("portable"), as igemm=portable), then on
 * each ISA's microkernel this CPU runs: the same int32 results. */
static void assert_same_both_ways(const char *op, const qr_tensor *x, const qr_tensor *w, const qr_tensor *xz,
                                  qr_attr *attrs, int nattr, size_t c)
{
    static const char *const isas[] = {"avx512vnni", "avxvnni", "avx2"};
    qr_tensor fast, slow;
    qr_igemm_force("portable");
    run3(op, x, w, xz, attrs, nattr, &slow);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!qr_igemm_u8s8_isa(isas[i]))
            continue;
        qr_igemm_force(isas[i]);
        run3(op, x, w, xz, attrs, nattr, &fast);
        cr_assert(qr_tensor_same_shape(&fast, &slow));
        for (int64_t e = 0; e < qr_tensor_numel(&fast); e++)
            cr_assert_eq(((int32_t *)fast.data)[e], ((int32_t *)slow.data)[e], "%s on %s, case %zu element %lld", op,
                         isas[i], c, (long long)e);
        qr_tensor_free(&fast);
    }
    qr_igemm_force(NULL);
    qr_tensor_free(&slow);
}

/* The interleave of four byte rows into the packing's words (the im2col's inner step), on every
 * length around its 64-column step and with and without the i8 flip, against the reference. */
Test(igemm, interleave_matches_the_reference)
{
    uint8_t r[4][200];
    uint32_t want[201], got[201];
    unsigned seed = 17;
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 200; i++)
            r[t][i] = (uint8_t)(rnd(&seed) & 0xff);
    qr_igemm_interleave_fn fn = qr_igemm_interleave4();
    for (int flip = 0; flip <= 0x80; flip += 0x80)
        for (int64_t n = 0; n <= 200; n++) {
            memset(want, 0xab, sizeof want);
            memset(got, 0xab, sizeof got);
            qr_igemm_interleave4_ref(want, r[0], r[1], r[2], r[3], n, (uint8_t)flip);
            fn(got, r[0], r[1], r[2], r[3], n, (uint8_t)flip);
            for (int64_t i = 0; i <= n && i < 201; i++)
                cr_assert_eq(got[i], want[i], "n %lld, flip %d, word %lld: %08x vs %08x", (long long)n, flip,
                             (long long)i, got[i], want[i]);
            /* both against the definition, byte by byte: byte t of word i is row t's byte i, flipped;
             * the word past the end is untouched */
            for (int64_t i = 0; i < n; i++)
                for (int t = 0; t < 4; t++)
                    cr_assert_eq((got[i] >> (8 * t)) & 0xff, (uint32_t)(r[t][i] ^ flip), "n %lld, flip %d, word %lld byte %d",
                                 (long long)n, flip, (long long)i, t);
            cr_assert_eq(got[n], 0xababababu, "n %lld: word %lld written", (long long)n, (long long)n);
        }
    cr_assert_eq(want[0], ((uint32_t)r[0][0] | (uint32_t)r[1][0] << 8 | (uint32_t)r[2][0] << 16 |
                           (uint32_t)r[3][0] << 24) ^ 0x80808080u);
}

Test(igemm, conv_integer_on_the_microkernel_matches_the_portable_path)
{
    if (!qr_igemm_u8s8()) {
        cr_log_info("no u8s8 microkernel on this CPU: nothing to compare");
        return;
    }
    /* N, C, H, W, M, kh, kw, group, stride, dilation, pad */
    const int cases[][11] = {{2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1}, {1, 8, 10, 10, 8, 3, 3, 8, 2, 1, 1},
                             {1, 6, 11, 9, 4, 3, 2, 2, 1, 2, 0}, {3, 16, 5, 5, 33, 1, 1, 1, 1, 1, 0},
                             {1, 4, 8, 8, 7, 5, 5, 1, 3, 1, 2}, {2, 5, 7, 6, 9, 3, 3, 1, 1, 1, 1},
                             /* depthwise (its own kernels): stride 2 over phase planes (5x5, many
                              * channels, wide rows), stride 1 over padded planes (dilated), stride 3 and
                              * dilated stride 2 over strided plane rows */
                             {2, 6, 9, 11, 6, 3, 3, 6, 1, 2, 2}, {1, 5, 7, 7, 5, 5, 5, 5, 2, 1, 2},
                             {1, 70, 9, 9, 70, 3, 3, 70, 2, 1, 1}, {2, 130, 7, 7, 130, 3, 3, 130, 1, 1, 1},
                             {1, 4, 10, 70, 4, 3, 3, 4, 2, 1, 1}, {1, 3, 8, 40, 3, 3, 3, 3, 1, 2, 2},
                             {1, 4, 10, 30, 4, 3, 3, 4, 3, 1, 1}, {1, 5, 12, 12, 5, 3, 3, 5, 2, 2, 2},
                             /* stride 1 on wide enough rows: over padded planes */
                             {1, 8, 12, 20, 12, 3, 3, 1, 1, 1, 1}, {2, 4, 10, 24, 6, 3, 3, 1, 1, 2, 2},
                             {1, 6, 6, 16, 4, 3, 3, 2, 1, 1, 1},
                             /* stride 2 (each row's even bytes), 7x7 as ResNet's first conv, and 1x1 */
                             {1, 3, 15, 37, 8, 7, 7, 1, 2, 1, 3}, {2, 3, 16, 41, 9, 7, 7, 1, 2, 1, 3},
                             {2, 6, 12, 34, 10, 3, 3, 1, 2, 1, 1}, {1, 8, 9, 40, 16, 1, 1, 1, 2, 1, 0},
                             /* stride 2 over phase planes with even padding (none, and 2 with 5x5) */
                             {1, 4, 11, 20, 6, 3, 3, 1, 2, 1, 0}, {2, 5, 10, 21, 7, 5, 5, 1, 2, 1, 2}};
    unsigned seed = 11;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int *p = cases[c];
        int N = p[0], C = p[1], H = p[2], W = p[3], M = p[4], kh = p[5], kw = p[6], g = p[7];
        int64_t nx = (int64_t)N * C * H * W, nw = (int64_t)M * (C / g) * kh * kw;
        uint8_t *xd = malloc((size_t)nx), zx = (uint8_t)(rnd(&seed) & 0xff);
        int8_t *wd = malloc((size_t)nw);
        cr_assert(xd && wd);
        for (int64_t i = 0; i < nx; i++)
            xd[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int64_t i = 0; i < nw; i++)
            wd[i] = (int8_t)(rnd(&seed) & 0xff);
        /* u8 activations in the even cases, the same bytes as i8 (shifted by x ^ 0x80) in the odd */
        qr_dtype xt = c % 2 ? QR_I8 : QR_U8;
        qr_tensor x = {.dtype = xt, .ndim = 4, .dims = {N, C, H, W}, .data = xd};
        qr_tensor w = {.dtype = QR_I8, .ndim = 4, .dims = {M, C / g, kh, kw}, .data = wd};
        qr_tensor xz = {.dtype = xt, .ndim = 0, .data = &zx};
        int64_t ks[2] = {kh, kw}, st[2] = {p[8], p[8]}, dl[2] = {p[9], p[9]}, pd[4] = {p[10], p[10], p[10], p[10]};
        qr_attr attrs[5] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                            {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                            {.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = dl},
                            {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pd},
                            {.name = "group", .kind = QR_ATTR_INT, .i = g}};
        assert_same_both_ways("ConvInteger", &x, &w, &xz, attrs, 5, c);
        free(xd);
        free(wd);
    }
}

Test(igemm, matmul_integer_on_the_microkernel_matches_the_portable_path)
{
    if (!qr_igemm_u8s8()) {
        cr_log_info("no u8s8 microkernel on this CPU: nothing to compare");
        return;
    }
    /* batch, M, K, N: a batch folded into the rows, ragged K and N */
    /* rows <= 4 take the GEMV: fmnist's first fully connected layer, ragged N past 128, K that
     * wraps int32 (70000 x 255 x 127 > 2^31) */
    const int cases[][4] = {{1, 1, 1, 1},  {1, 5, 7, 3},     {3, 4, 33, 17}, {2, 19, 64, 10}, {1, 200, 5, 40},
                            {1, 1, 1568, 128}, {1, 3, 100, 170}, {2, 2, 9, 33}, {1, 1, 70000, 17}};
    unsigned seed = 13;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int B = cases[c][0], M = cases[c][1], K = cases[c][2], N = cases[c][3];
        uint8_t *ad = malloc((size_t)(B * M * K)), za = (uint8_t)(rnd(&seed) & 0xff);
        int8_t *bd = malloc((size_t)(K * N));
        cr_assert(ad && bd);
        for (int i = 0; i < B * M * K; i++)
            ad[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int i = 0; i < K * N; i++)
            bd[i] = (int8_t)(rnd(&seed) & 0xff);
        qr_dtype at = c % 2 ? QR_I8 : QR_U8; /* i8 rows go in as a ^ 0x80 */
        qr_tensor a = {.dtype = at, .ndim = 3, .dims = {B, M, K}, .data = ad};
        qr_tensor b = {.dtype = QR_I8, .ndim = 2, .dims = {K, N}, .data = bd};
        qr_tensor az = {.dtype = at, .ndim = 0, .data = &za};
        assert_same_both_ways("MatMulInteger", &a, &b, &az, NULL, 0, c);
        free(ad);
        free(bd);
    }
}

/* The NHWC indirect GEMM (qr_iconv_fn): every ISA's kernel this CPU runs and the portable one,
 * against the reference and against a naive loop over the unpacked weights written here (int64
 * sums wrapped at the end), so a wrong packing (qr_iconv_pack_w) fails too. Rows point into an
 * image of pixels of k4 bytes; a few pointers per row go to one zero-point row, as padding does. */
static const char *const iconv_isas[] = {"amx", "avx512vnni", "avxvnni", "avx2", "portable"};

/* c[i][j] = init[j] + sum_t sum_k<cin a[i * taps + t][k] * wt[t][k][j] (wt unpacked, [taps][cin][n]). */
static void iconv_naive(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                        const int8_t *wt, int64_t cin, const int32_t *init, int64_t j0, int64_t j1, int64_t n)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = j0; j < j1; j++) {
            int64_t s = init[j];
            for (int64_t t = 0; t < taps; t++)
                for (int64_t k = 0; k < cin; k++)
                    s += (int64_t)a[i * taps + t][k] * wt[(t * cin + k) * n + j];
            c[i * c_rs + j] = (int32_t)(uint32_t)(uint64_t)s;
        }
}

/* Every one of count sums of a kernel (what: which, and the shape) against the naive loop's. */
static void assert_iconv_sums(const int32_t *got, const int32_t *want, int64_t count, const char *what, int64_t n,
                              int64_t j0, int64_t j1, int64_t c_rs)
{
    for (int64_t i = 0; i < count; i++)
        cr_assert_eq(got[i], want[i], "%s n %lld [%lld, %lld) c_rs %lld element %lld: %d vs %d", what, (long long)n,
                     (long long)j0, (long long)j1, (long long)c_rs, (long long)i, got[i], want[i]);
}

/* One shape: m rows, taps, cin input channels (k4 = cin rounded up to 4; the bytes past cin are
 * the padding of the pixel rows, any value as the weights there are 0), n columns, columns
 * [j0, j1), row stride c_rs; vals 0 random, 1 all 255 x -128 from init near INT32_MIN, 2 all
 * 255 x 127 from near INT32_MAX (sums that wrap). */
static void check_iconv_shape(int64_t m, int64_t taps, int64_t cin, int64_t n, int64_t j0, int64_t j1, int64_t c_rs,
                              int vals, unsigned *seed)
{
    int64_t k4 = qr_igemm_k4(cin), n16 = qr_igemm_n16(n), npix = m + taps + 3;
    uint8_t *img = malloc((size_t)((npix + 1) * k4)), *zrow = img + npix * k4; /* the last row: the zero point */
    const uint8_t **a = malloc(sizeof *a * (size_t)(m * taps + 1));
    int8_t *wt = malloc((size_t)(taps * cin * n)), *wp = malloc((size_t)(taps * k4 * n16));
    int32_t *init = malloc(sizeof *init * (size_t)n), *want = malloc(sizeof *want * (size_t)(m * c_rs + 1)),
            *ref = malloc(sizeof *ref * (size_t)(m * c_rs + 1)), *got = malloc(sizeof *got * (size_t)(m * c_rs + 1));
    cr_assert(img && a && wt && wp && init && want && ref && got);
    for (int64_t i = 0; i < (npix + 1) * k4; i++)
        img[i] = vals == 0 ? (uint8_t)(rnd(seed) & 0xff) : 255;
    memset(zrow, (int)(rnd(seed) & 0xff), (size_t)k4);
    for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < taps; t++) /* the pixel rows of a sliding window; every fifth a padding row */
            a[i * taps + t] = (i + t) % 5 == 3 && vals == 0 ? zrow : img + ((i + t * 2) % npix) * k4;
    for (int64_t i = 0; i < taps * cin * n; i++)
        wt[i] = vals == 1 ? -128 : vals == 2 ? 127 : (int8_t)(rnd(seed) & 0xff);
    for (int64_t j = 0; j < n; j++)
        init[j] = vals == 1 ? INT32_MIN + 0x100 : vals == 2 ? 0x7fffff00 : (int32_t)rnd(seed) - (1 << 23);
    if (vals) { /* the exact sum is past int32: the kernels must wrap it */
        int64_t exact = (int64_t)init[0] + taps * cin * 255 * (vals == 1 ? -128 : 127);
        cr_assert(exact < INT32_MIN || exact > INT32_MAX, "%lld", (long long)exact);
    }
    /* wt is [taps][cin][n]: tap stride cin * n, channel stride n, column stride 1 */
    qr_iconv_pack_w(wp, wt, taps, cin, k4, n, cin * n, n, 1);
    for (int64_t i = 0; i < m * c_rs + 1; i++)
        want[i] = ref[i] = (int32_t)0xdeadbeef; /* what is outside [j0, j1) stays */
    iconv_naive(want, c_rs, a, taps, m, wt, cin, init, j0, j1, n);
    qr_iconv_u8s8_ref(ref, c_rs, a, taps, m, wp, init, k4, j0, j1, n);
    for (int64_t i = 0; i < m * c_rs + 1; i++)
        cr_assert_eq(ref[i], want[i], "reference, m %lld taps %lld cin %lld n %lld [%lld, %lld) element %lld: %d vs %d",
                     (long long)m, (long long)taps, (long long)cin, (long long)n, (long long)j0, (long long)j1,
                     (long long)i, ref[i], want[i]);
    for (size_t s = 0; s < sizeof iconv_isas / sizeof iconv_isas[0]; s++) {
        qr_iconv_fn fn = qr_iconv_u8s8_isa(iconv_isas[s]);
        if (!fn)
            continue;
        for (int64_t i = 0; i < m * c_rs + 1; i++)
            got[i] = (int32_t)0xdeadbeef;
        fn(got, c_rs, a, taps, m, wp, init, k4, j0, j1, n);
        char what[64];
        snprintf(what, sizeof what, "%s, m %lld taps %lld cin %lld", iconv_isas[s], (long long)m, (long long)taps,
                 (long long)cin);
        assert_iconv_sums(got, want, m * c_rs + 1, what, n, j0, j1, c_rs);
        /* its twin on the rows widened to i16 (the input as iconv_nhwc.c widens it once) */
        qr_iconv16_fn wide = qr_iconv_wide_twin(fn);
        if (!wide)
            continue;
        int16_t *img16 = malloc(sizeof *img16 * (size_t)((npix + 1) * k4));
        const int16_t **a16 = malloc(sizeof *a16 * (size_t)(m * taps + 1));
        cr_assert(img16 && a16);
        for (int64_t i = 0; i < (npix + 1) * k4; i++)
            img16[i] = img[i];
        for (int64_t i = 0; i < m * taps; i++)
            a16[i] = img16 + (a[i] - img);
        for (int64_t i = 0; i < m * c_rs + 1; i++)
            got[i] = (int32_t)0xdeadbeef;
        wide(got, c_rs, a16, taps, m, wp, init, k4, j0, j1, n);
        snprintf(what, sizeof what, "%s on i16, m %lld taps %lld cin %lld", iconv_isas[s], (long long)m,
                 (long long)taps, (long long)cin);
        assert_iconv_sums(got, want, m * c_rs + 1, what, n, j0, j1, c_rs);
        free(img16);
        free(a16);
    }
    free(img);
    free(a);
    free(wt);
    free(wp);
    free(init);
    free(want);
    free(ref);
    free(got);
}

Test(igemm, iconv_kernels_match_a_naive_loop_on_ragged_shapes)
{
    for (size_t s = 0; s < sizeof iconv_isas / sizeof iconv_isas[0]; s++)
        if (!qr_iconv_u8s8_isa(iconv_isas[s]))
            cr_log_info("this CPU has no %s: its iconv kernel is not tested here", iconv_isas[s]);
    cr_assert(qr_iconv_u8s8_isa("portable") && !qr_iconv_u8s8_isa("sse9") && qr_iconv_u8s8());
    static const int64_t ms[] = {0, 1, 2, 5, 6, 7, 12, 13, 20};
    static const int64_t taps[] = {1, 3, 9};
    static const int64_t cins[] = {1, 4, 8, 13, 64, 100, 576};
    static const int64_t ns[] = {1, 15, 16, 17, 48, 63, 65, 200};
    unsigned seed = 23;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ti = 0; ti < sizeof taps / sizeof taps[0]; ti++)
            for (size_t ci = 0; ci < sizeof cins / sizeof cins[0]; ci++) {
                int64_t n = ns[ni], t = taps[ti], cin = cins[ci], m = ms[(ni + ti + ci) % (sizeof ms / sizeof ms[0])];
                if (t * cin > 1200 && m > 7)
                    m = 7; /* the long sums on fewer rows: the suite stays quick */
                check_iconv_shape(m, t, cin, n, 0, n, n, 0, &seed);
            }
    /* every row count through the 6-row tiles and the 3, 2, 1 of the ragged end */
    for (int64_t m = 0; m <= 19; m++)
        check_iconv_shape(m, 3, 8, 70, 0, 70, 70, 0, &seed);
    /* the AMX kernel's pairs of 16-row tiles: a full second tile, ragged ones past it */
    static const int64_t tall[] = {31, 32, 33, 47, 48, 49, 63, 64, 65, 97};
    for (size_t r = 0; r < sizeof tall / sizeof tall[0]; r++)
        check_iconv_shape(tall[r], r % 2 ? 9 : 1, r % 3 ? 64 : 24, 70 + 16 * (int64_t)r, 0, 70 + 16 * (int64_t)r,
                          70 + 16 * (int64_t)r, 0, &seed);
    /* column ranges as threads would split them (j0 a multiple of 64, a strip's first column; one
     * empty), c_rs past n; the 1x1 shapes whose weights fit L1 (the AVX-512 kernel's rows-outer
     * order) too; n16 200 -> 208: strips of 64, 64, 64 and 16 */
    const int64_t ranges[][4] = {{200, 64, 200, 203}, {200, 0, 64, 200}, {200, 64, 130, 256}, {65, 64, 65, 65},
                                 {17, 0, 17, 17},     {130, 128, 129, 131}, {64, 0, 48, 64},   {200, 128, 150, 200},
                                 {64, 64, 64, 64} /* empty */};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
        for (int64_t m = 1; m <= 8; m += 7)
            for (int64_t t = 1; t <= 9; t += 8)
                check_iconv_shape(m, t, 12, ranges[r][0], ranges[r][1], ranges[r][2], ranges[r][3], 0, &seed);
}

/* The AMX kernel's sink (qr_iconv_u8s8_amx_sink): each block's sums, copied out where the
 * callback says they are, with the block's geometry checked (rows <= 32 from a multiple of 32,
 * columns <= 64 from a strip's first column, each element once). */
typedef struct sink_rec {
    int32_t *c;
    int64_t c_rs, m, j0, j1;
    int *seen;
    int bad;
} sink_rec;

static void sink_copy(void *ctx, const int32_t *acc, int64_t acc_rs, int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    sink_rec *r = ctx;
    if (i0 % 32 || rows < 1 || rows > 32 || i0 + rows > r->m || j0 % 64 || cols < 1 || cols > 64 || j0 < r->j0 ||
        j0 + cols > r->j1)
        r->bad = 1;
    for (int64_t i = 0; i < rows && !r->bad; i++)
        for (int64_t j = 0; j < cols; j++) {
            r->c[(i0 + i) * r->c_rs + j0 + j] = acc[i * acc_rs + j];
            r->seen[(i0 + i) * r->c_rs + j0 + j]++;
        }
}

/* One shape for the AMX kernel alone: m rows of one tap or more; the pixels one run of rows stride
 * apart (gap bytes past k4 between them: the tiles read them in place when K is a multiple of 64),
 * or with a padding row every `brk` rows (brk 0: none; copied); columns [j0, j1) of n; vals as
 * check_iconv_shape's. Both entries, the plain one into c (c_rs > n) and the sink, against the
 * naive int64 loop. */
static void check_amx_shape(int64_t m, int64_t taps, int64_t cin, int64_t gap, int64_t brk, int64_t n, int64_t j0,
                            int64_t j1, int vals, unsigned *seed)
{
    int64_t k4 = qr_igemm_k4(cin), n16 = qr_igemm_n16(n), ps = k4 + gap, npix = m + 2 * taps + 1, c_rs = n + 3;
    uint8_t *img = malloc((size_t)(npix * ps + k4)), *zrow = malloc((size_t)k4);
    const uint8_t **a = malloc(sizeof *a * (size_t)(m * taps + 1));
    int8_t *wt = malloc((size_t)(taps * cin * n)), *wp = malloc((size_t)(taps * k4 * n16));
    int32_t *init = malloc(sizeof *init * (size_t)n), *want = malloc(sizeof *want * (size_t)(m * c_rs + 1)),
            *got = malloc(sizeof *got * (size_t)(m * c_rs + 1));
    int *seen = calloc((size_t)(m * c_rs + 1), sizeof *seen);
    cr_assert(img && zrow && a && wt && wp && init && want && got && seen);
    for (int64_t i = 0; i < npix * ps + k4; i++)
        img[i] = vals ? 255 : (uint8_t)(rnd(seed) & 0xff);
    memset(zrow, (int)(rnd(seed) & 0xff), (size_t)k4);
    for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < taps; t++)
            a[i * taps + t] = brk && i % brk == brk - 1 ? zrow : img + (i + 2 * t) * ps;
    for (int64_t i = 0; i < taps * cin * n; i++)
        wt[i] = vals == 1 ? -128 : vals == 2 ? 127 : (int8_t)(rnd(seed) & 0xff);
    for (int64_t j = 0; j < n; j++)
        init[j] = vals == 1 ? INT32_MIN + 0x100 : vals == 2 ? 0x7fffff00 : (int32_t)rnd(seed) - (1 << 23);
    qr_iconv_pack_w(wp, wt, taps, cin, k4, n, cin * n, n, 1);
    for (int64_t i = 0; i < m * c_rs + 1; i++)
        want[i] = got[i] = (int32_t)0xdeadbeef;
    iconv_naive(want, c_rs, a, taps, m, wt, cin, init, j0, j1, n);
    const char *what = "plain";
    qr_iconv_u8s8_amx(got, c_rs, a, taps, m, wp, init, k4, j0, j1, n);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < m * c_rs + 1; i++)
            cr_assert_eq(got[i], want[i],
                         "AMX %s, m %lld taps %lld cin %lld gap %lld brk %lld n %lld [%lld, %lld) element %lld: %d vs %d",
                         what, (long long)m, (long long)taps, (long long)cin, (long long)gap, (long long)brk,
                         (long long)n, (long long)j0, (long long)j1, (long long)i, got[i], want[i]);
        if (pass)
            break;
        for (int64_t i = 0; i < m * c_rs + 1; i++)
            got[i] = (int32_t)0xdeadbeef;
        int32_t *scratch = malloc(sizeof *scratch * (size_t)(m * c_rs + 1)); /* c: written only by the fallback */
        cr_assert(scratch);
        sink_rec r = {got, c_rs, m, j0, j1 < n ? j1 : n, seen, 0};
        qr_iconv_u8s8_amx_sink(scratch, c_rs, a, taps, m, wp, init, k4, j0, j1, n, sink_copy, &r);
        free(scratch);
        cr_assert(!r.bad, "AMX sink: a block out of its bounds, m %lld n %lld", (long long)m, (long long)n);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < c_rs; j++)
                cr_assert_eq(seen[i * c_rs + j], j >= j0 && j < j1 && j < n, "AMX sink: element (%lld, %lld) %d times",
                             (long long)i, (long long)j, seen[i * c_rs + j]);
        what = "sink";
    }
    free(img);
    free(zrow);
    free(a);
    free(wt);
    free(wp);
    free(init);
    free(want);
    free(got);
    free(seen);
}

/* The AMX kernel on MobileNetV2's and ResNet-18's kinds of 1 x 1 layers and ragged ones: one tap of
 * K 64, 128, 192, 320, 576 (whole 64s: the rows read in place when they are a run of 16, also with
 * a gap after each pixel's bytes; a padding row every 7 or 20 rows: those 16 copied) and 96, 100,
 * 160 (a ragged last 64: copied), taps 3 and 9 (also of 16- to 48-byte taps), 5; rows 1 to 97 (16-row tiles full, ragged, one of a
 * pair); n 24 to 200 (ragged strips) and threads' column ranges; sums that wrap. Into c and through
 * the sink, against the naive int64 loop. */
Test(igemm, amx_kernel_and_its_sink_match_a_naive_loop)
{
    if (!qr_amx_usable()) {
        cr_log_info("this CPU (or OS) has no AMX-INT8: not tested here");
        return;
    }
    static const int64_t ms[] = {1, 15, 16, 17, 31, 32, 33, 47, 48, 50, 64, 97};
    static const int64_t cins[] = {64, 128, 192, 320, 576, 96, 100, 160};
    static const int64_t ns[] = {64, 70, 24, 130, 200};
    unsigned seed = 31;
    for (size_t ci = 0; ci < sizeof cins / sizeof cins[0]; ci++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int64_t n = ns[(ci + mi) % 5], m = ms[mi];
            check_amx_shape(m, 1, cins[ci], (int64_t)(mi % 3) * 32, mi % 4 == 3 ? 7 : mi % 4 == 1 ? 20 : 0, n, 0, n, 0,
                            &seed);
        }
    for (int64_t m = 30; m <= 50; m += 4) {
        check_amx_shape(m, 3, 24, 0, 0, 96, 0, 96, 0, &seed);
        check_amx_shape(m, 9, 64, 4, m % 8 == 2 ? 5 : 0, 130, 0, 130, 0, &seed);
        /* taps of 16, 32, 48 and 20 bytes (3 x 3 layers of thin channels: each tap moved under a
         * mask, zeros from K to the row's 64s' end), a padding row in some */
        check_amx_shape(m, 9, 16, 0, m % 8 == 2 ? 5 : 0, 64, 0, 64, 0, &seed);
        check_amx_shape(m, 9, 32, 16, 0, 70, 0, 70, 0, &seed);
        check_amx_shape(m, 9, 45, 0, m % 8 == 6 ? 3 : 0, 24, 0, 24, 0, &seed);
        check_amx_shape(m, 5, 17, 8, 0, 64, 0, 64, 0, &seed);
    }
    const int64_t ranges[][3] = {{200, 64, 200}, {200, 0, 64}, {200, 128, 150}, {130, 128, 130}, {64, 64, 64}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
        check_amx_shape(40, 1, 192, 0, 0, ranges[r][0], ranges[r][1], ranges[r][2], 0, &seed);
    for (int vals = 1; vals <= 2; vals++)
        check_amx_shape(33, 1, 70016, 0, 0, 40, 0, 40, vals, &seed);
}

/* The direct AMX kernel (qr_iconv_u8s8_amx_direct): runs of pixels along an output row, each once,
 * within the block and one strip. */
typedef struct direct_rec {
    int32_t *c;
    int64_t c_rs, r0, m, OW, j0, j1;
    int *seen;
    int bad;
} direct_rec;

static void direct_sink(void *ctx, const int32_t *acc, int64_t acc_rs, int64_t i0, int64_t rows, int64_t j0,
                        int64_t cols)
{
    direct_rec *r = ctx;
    if (i0 < 0 || rows < 1 || rows > 32 || i0 + rows > r->m || (r->r0 + i0) % r->OW + rows > r->OW || j0 % 64 ||
        cols < 1 || cols > 64 || j0 < r->j0 || j0 + cols > r->j1)
        r->bad = 1;
    for (int64_t i = 0; i < rows && !r->bad; i++)
        for (int64_t j = 0; j < cols; j++) {
            r->c[(r->r0 + i0 + i) * r->c_rs + j0 + j] = acc[i * acc_rs + j];
            r->seen[(r->r0 + i0 + i) * r->c_rs + j0 + j]++;
        }
}

/* One layer for the direct kernel: nimg images whose padded input is (OH + KH - 1) x (OW + KW - 1)
 * pixels of k4 bytes (every byte random: borders, the channels past cin, the slack after the last
 * image), n columns of which [j0, j1), the output pixels in `blocks` uneven blocks; vals as
 * check_iconv_shape's. Oracle: the naive int64 loop over row pointers the test makes from the
 * geometry. Into c (c_rs past n) and through the sink. */
static void check_amx_direct(int64_t nimg, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t cin, int64_t n,
                             int64_t j0, int64_t j1, int64_t blocks, int vals, unsigned *seed)
{
    int64_t k4 = qr_igemm_k4(cin), n16 = qr_igemm_n16(n), taps = KH * KW, Hp = OH + KH - 1, Wp = OW + KW - 1;
    int64_t M = nimg * OH * OW, c_rs = n + 3, xbytes = nimg * Hp * Wp * k4 + qr_iconv_amx_slack(k4, KW);
    qr_amx_direct d = {.OH = OH, .OW = OW, .KH = KH, .KW = KW, .Hp = Hp, .Wp = Wp, .k4 = k4,
                       .piece = qr_iconv_amx_piece(KW * k4)};
    cr_assert(d.piece, "no piece for KW %lld k4 %lld", (long long)KW, (long long)k4);
    uint8_t *xp = malloc((size_t)xbytes);
    const uint8_t **a = malloc(sizeof *a * (size_t)(M * taps));
    int8_t *wt = malloc((size_t)(taps * cin * n)), *wp = malloc((size_t)(taps * k4 * n16));
    int32_t *init = malloc(sizeof *init * (size_t)n), *want = malloc(sizeof *want * (size_t)(M * c_rs)),
            *got = malloc(sizeof *got * (size_t)(M * c_rs));
    int *seen = calloc((size_t)(M * c_rs), sizeof *seen);
    cr_assert(xp && a && wt && wp && init && want && got && seen);
    for (int64_t i = 0; i < xbytes; i++)
        xp[i] = vals ? 255 : (uint8_t)(rnd(seed) & 0xff);
    for (int64_t i = 0; i < taps * cin * n; i++)
        wt[i] = vals == 1 ? -128 : vals == 2 ? 127 : (int8_t)(rnd(seed) & 0xff);
    for (int64_t j = 0; j < n; j++)
        init[j] = vals == 1 ? INT32_MIN + 0x100 : vals == 2 ? 0x7fffff00 : (int32_t)rnd(seed) - (1 << 23);
    for (int64_t img = 0, i = 0; img < nimg; img++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++, i++)
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++)
                        a[i * taps + ky * KW + kx] = xp + ((img * Hp + oy + ky) * Wp + ox + kx) * k4;
    qr_iconv_pack_w(wp, wt, taps, cin, k4, n, cin * n, n, 1);
    for (int64_t i = 0; i < M * c_rs; i++)
        want[i] = got[i] = (int32_t)0xdeadbeef;
    iconv_naive(want, c_rs, a, taps, M, wt, cin, init, j0, j1, n);
    d.xp = xp;
    for (int pass = 0; pass < 2; pass++) {
        direct_rec r = {got, c_rs, 0, 0, OW, j0, j1 < n ? j1 : n, seen, 0};
        for (int64_t b = 0; b < blocks; b++) { /* uneven blocks: odd ones 5 rows longer */
            int64_t r0 = b * M / blocks + (b % 2 == 0 && b ? 5 : 0), r1 = (b + 1) * M / blocks + (b % 2 ? 5 : 0);
            r0 = r0 > M ? M : r0, r1 = r1 > M ? M : b == blocks - 1 ? M : r1;
            if (pass == 0)
                qr_iconv_u8s8_amx_direct(&d, r0, r1 - r0, wp, init, j0, j1, n, got + r0 * c_rs, c_rs, NULL, NULL);
            else {
                r.r0 = r0, r.m = r1 - r0;
                qr_iconv_u8s8_amx_direct(&d, r0, r1 - r0, wp, init, j0, j1, n, NULL, 0, direct_sink, &r);
            }
        }
        cr_assert(!r.bad, "AMX direct sink: a run out of its bounds, %lld x %lld, n %lld", (long long)OH,
                  (long long)OW, (long long)n);
        for (int64_t i = 0; i < M * c_rs; i++) {
            cr_assert_eq(got[i], want[i],
                         "AMX direct (%s), %lld x %lld x %lld images, %lld x %lld over cin %lld, n %lld [%lld, %lld), %lld blocks, "
                         "element %lld: %d vs %d",
                         pass ? "sink" : "into c", (long long)OH, (long long)OW, (long long)nimg, (long long)KH,
                         (long long)KW, (long long)cin, (long long)n, (long long)j0, (long long)j1, (long long)blocks,
                         (long long)i, got[i], want[i]);
            if (pass)
                cr_assert_eq(seen[i], i % c_rs >= j0 && i % c_rs < j1 && i % c_rs < n, "AMX direct sink: element %lld %d times",
                             (long long)i, seen[i]);
        }
        for (int64_t i = 0; i < M * c_rs; i++)
            got[i] = (int32_t)0xdeadbeef;
    }
    free(xp);
    free(a);
    free(wt);
    free(wp);
    free(init);
    free(want);
    free(got);
    free(seen);
}

/* The direct kernel on the small CNNs' kinds of layers and ragged ones: 3 x 3 over 16, 32, 64 and 13
 * channels (pieces of 48, 48 (two a row), 64, 48), 2 x 2 and 1 x 3 windows; outputs from 2 x 3 to
 * 32 x 32, one to three images (runs that cross rows and images); n 16 to 130 (ragged strips, column
 * ranges of a thread's part); blocks of pixels that start and end mid-row; sums that wrap. */
Test(igemm, amx_direct_kernel_matches_a_naive_loop)
{
    if (!qr_amx_usable()) {
        cr_log_info("this CPU (or OS) has no AMX-INT8: not tested here");
        return;
    }
    unsigned seed = 47;
    cr_assert_eq(qr_iconv_amx_piece(48), 48);
    cr_assert_eq(qr_iconv_amx_piece(96), 48);
    cr_assert_eq(qr_iconv_amx_piece(192), 64);
    cr_assert_eq(qr_iconv_amx_piece(60), 0);
    check_amx_direct(1, 32, 32, 3, 3, 16, 16, 0, 16, 1, 0, &seed);
    check_amx_direct(1, 32, 32, 3, 3, 16, 16, 0, 16, 3, 0, &seed);
    check_amx_direct(2, 14, 14, 3, 3, 16, 32, 0, 32, 2, 0, &seed);
    check_amx_direct(1, 7, 7, 3, 3, 32, 64, 0, 64, 1, 0, &seed);
    check_amx_direct(2, 5, 9, 3, 3, 64, 70, 0, 70, 4, 0, &seed);
    check_amx_direct(1, 3, 2, 3, 3, 13, 24, 0, 24, 1, 0, &seed);
    check_amx_direct(3, 6, 5, 2, 2, 16, 130, 64, 130, 2, 0, &seed);
    check_amx_direct(3, 6, 5, 2, 2, 16, 130, 0, 64, 5, 0, &seed);
    check_amx_direct(1, 9, 11, 1, 3, 16, 17, 0, 17, 3, 0, &seed);
    check_amx_direct(2, 16, 16, 3, 3, 32, 48, 0, 48, 3, 0, &seed);
    for (int vals = 1; vals <= 2; vals++)
        check_amx_direct(1, 8, 8, 3, 3, 64, 40, 0, 40, 2, vals, &seed);
}

/* Sums past int32 in both directions: 255 x -128 over 9 x 7000 and 70000 products from near
 * INT32_MIN, 255 x 127 from near INT32_MAX; the naive loop's int64 sum wrapped at the end is the
 * oracle. */
Test(igemm, iconv_kernels_wrap_as_an_exact_sum_would)
{
    unsigned seed = 29;
    for (int vals = 1; vals <= 2; vals++) {
        check_iconv_shape(7, 9, 7000, 33, 0, 33, 40, vals, &seed);
        check_iconv_shape(13, 1, 70000, 70, 0, 70, 70, vals, &seed);
    }
    /* hand-derived: one row, one tap, k4 4, all 255 x -128, init 0: 4 * 255 * -128 = -130560 */
    uint8_t x[4] = {255, 255, 255, 255};
    const uint8_t *a[1] = {x};
    int8_t w[64];
    memset(w, -128, sizeof w);
    int32_t init[16] = {0}, c[16];
    for (size_t s = 0; s < sizeof iconv_isas / sizeof iconv_isas[0]; s++) {
        qr_iconv_fn fn = qr_iconv_u8s8_isa(iconv_isas[s]);
        if (!fn)
            continue;
        fn(c, 16, a, 1, 1, w, init, 4, 0, 16, 16);
        for (int j = 0; j < 16; j++)
            cr_assert_eq(c[j], -130560, "%s column %d: %d", iconv_isas[s], j, c[j]);
    }
}

/* The packing from ONNX's [M][C][kh][kw] weights (strides as igemm.h says) and the column sums,
 * against hand-placed bytes. */
Test(igemm, iconv_pack_and_colsums)
{
    enum { M = 3, C = 5, KH = 2, KW = 2, TAPS = KH * KW, K4 = 8, N16 = 16 };
    int8_t w[M][C][KH][KW], p[TAPS * K4 * N16];
    for (int o = 0; o < M; o++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < TAPS; t++)
                w[o][c][t / KW][t % KW] = (int8_t)(o * 40 + c * 4 + t - 60);
    memset(p, 0x55, sizeof p);
    qr_iconv_pack_w(p, &w[0][0][0][0], TAPS, C, K4, M, 1, KH * KW, C * KH * KW);
    for (int t = 0; t < TAPS; t++)
        for (int k = 0; k < K4; k++)
            for (int j = 0; j < N16; j++) {
                int q = t * K4 + k;
                int8_t want = k < C && j < M ? w[j][k][t / KW][t % KW] : 0;
                cr_assert_eq(p[((q / 4) * N16 + j) * 4 + q % 4], want, "tap %d k %d column %d", t, k, j);
            }
    int32_t s[M];
    qr_iconv_colsums(s, p, TAPS, K4, M);
    for (int o = 0; o < M; o++) {
        /* sum over c < 5, t < 4 of o*40 + c*4 + t - 60 = 20 * (o*40 - 60) + 4 * 4 * 10 + 5 * 6 */
        int32_t want = 20 * (o * 40 - 60) + 160 + 30;
        cr_assert_eq(s[o], want, "column %d: %d vs %d", o, s[o], want);
    }
}

/* Strips: 70 columns (n16 80) are a strip of 64 columns and one of 16, each strip's k groups after
 * one another; the byte of each (k, column), hand-placed as igemm.h describes the layout. */
Test(igemm, iconv_pack_in_strips_of_64_columns)
{
    enum { M = 70, C = 6, TAPS = 2, K4 = 8, K = TAPS * K4, N16 = 80 };
    static int8_t w[M][C][TAPS], p[K * N16];
    for (int o = 0; o < M; o++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < TAPS; t++)
                w[o][c][t] = (int8_t)(o - c * 7 + t * 50);
    memset(p, 0x55, sizeof p);
    qr_iconv_pack_w(p, &w[0][0][0], TAPS, C, K4, M, 1, TAPS, C * TAPS);
    for (int t = 0; t < TAPS; t++)
        for (int k = 0; k < K4; k++)
            for (int j = 0; j < N16; j++) {
                int q = t * K4 + k;
                /* strip 0: columns 0..63, 64 * 4 bytes per k group; strip 1 after its K groups */
                int at = j < 64 ? (q / 4) * 256 + j * 4 + q % 4 : 64 * K + (q / 4) * 64 + (j - 64) * 4 + q % 4;
                int8_t want = k < C && j < M ? w[j][k][t] : 0;
                cr_assert_eq(p[at], want, "tap %d k %d column %d", t, k, j);
            }
    int32_t s[M];
    qr_iconv_colsums(s, p, TAPS, K4, M);
    for (int o = 0; o < M; o++) {
        int32_t want = 0;
        for (int c = 0; c < C; c++)
            for (int t = 0; t < TAPS; t++)
                want += w[o][c][t];
        cr_assert_eq(s[o], want, "column %d: %d vs %d", o, s[o], want);
    }
}

/* qr_iconv_u8s8 follows the igemm option's choice (here through qr_igemm_force): "portable" gives the
 * portable kernel, an ISA the CPU has gives that one, and no choice the best the CPU has. */
Test(igemm, iconv_dispatch_follows_the_forced_choice)
{
    qr_igemm_force("portable");
    cr_assert_eq(qr_iconv_u8s8(), qr_iconv_u8s8_isa("portable"));
    qr_iconv_fn best = NULL;
    for (size_t s = 0; s < sizeof iconv_isas / sizeof iconv_isas[0]; s++) {
        qr_iconv_fn fn = qr_iconv_u8s8_isa(iconv_isas[s]);
        if (!fn)
            continue;
        if (!best)
            best = fn;
        qr_igemm_force(iconv_isas[s]);
        cr_assert_eq(qr_iconv_u8s8(), fn, "forced %s", iconv_isas[s]);
    }
    qr_igemm_force(NULL);
    cr_assert_eq(qr_iconv_u8s8(), best);
    /* per layer: AMX (where the CPU has it) only for K >= 64 bytes and >= 64 output channels; a thin
     * layer keeps the best vector kernel; forced, every layer takes the forced one */
    qr_iconv_fn amx = qr_iconv_u8s8_isa("amx"), vec = NULL;
    for (size_t s = 0; s < sizeof iconv_isas / sizeof iconv_isas[0] && !vec; s++)
        if (strcmp(iconv_isas[s], "amx"))
            vec = qr_iconv_u8s8_isa(iconv_isas[s]);
    /* k4 is a tap's bytes (what the convolution passes): K = taps x k4 bytes */
    cr_assert_eq(qr_iconv_u8s8_for(9, 16, 64), amx ? amx : vec);
    cr_assert_eq(qr_iconv_u8s8_for(1, 64, 64), amx ? amx : vec);
    cr_assert_eq(qr_iconv_u8s8_for(2, 32, 64), amx ? amx : vec);
    cr_assert_eq(qr_iconv_u8s8_for(1, 16, 64), vec, "K 16 bytes");
    cr_assert_eq(qr_iconv_u8s8_for(1, 32, 96), vec, "K 32 bytes");
    cr_assert_eq(qr_iconv_u8s8_for(1, 60, 96), vec, "K 60 bytes");
    cr_assert_eq(qr_iconv_u8s8_for(9, 16, 32), vec, "32 output channels");
    qr_igemm_force("portable");
    cr_assert_eq(qr_iconv_u8s8_for(9, 16, 64), qr_iconv_u8s8_isa("portable"));
    qr_igemm_force(NULL);
}

/* The kernels with column starting values and zero points per row (qr_igemm_rc_fn) against the
 * reference, and the packings of computed operands (qr_igemm_pack_a / _b, with their sums and the
 * i8/u8 flip) against theirs, on ragged shapes: rows past k and columns past n must be 0, or the kernels'
 * padded sums and the column sums would count them. */
Test(igemm, rc_kernels_and_packings_match_the_references)
{
    static const char *const isas[] = {"avx512vnni", "avxvnni", "avx2"};
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {9, 13, 33}, {17, 64, 65}, {8, 130, 16}, {20, 3, 100},
                                 /* rows of a head's 32 bytes (alone and after 64), sixteen rows at a time */
                                 {33, 32, 40}, {16, 96, 20},
                                 /* groups of columns 1 and 4 KB apart: the AVX-512 kernel's padded pitch */
                                 {9, 64, 256}, {10, 130, 1024},
                                 /* packing rows 4 KiB apart: the six-row, 64-column tiles */
                                 {19, 37, 1024}, {11, 64, 1001}, {2, 9, 2048}};
    unsigned seed = 23;
    qr_igemm_pack_a_fn pack_a = qr_igemm_pack_a();
    qr_igemm_pack_b_fn pack_b = qr_igemm_pack_b();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2], k4 = qr_igemm_k4(k), n16 = qr_igemm_n16(n);
        uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(k * n));
        int8_t *ap1 = malloc((size_t)(m * k4)), *ap2 = malloc((size_t)(m * k4));
        int64_t wide = n16 + 16; /* a padded pitch: every kernel takes one (igemm.h, qr_igemm_rc_pitch) */
        uint8_t *bp1 = malloc((size_t)(k4 * n16)), *bp2 = malloc((size_t)(k4 * n16)), *bp3 = malloc((size_t)(k4 * wide)),
                *bp4 = malloc((size_t)(k4 * wide));
        int32_t *rs1 = malloc(sizeof(int32_t) * (size_t)m), *rs2 = malloc(sizeof(int32_t) * (size_t)m),
                *cs1 = malloc(sizeof(int32_t) * (size_t)n), *cs2 = malloc(sizeof(int32_t) * (size_t)n),
                *c1 = malloc(sizeof(int32_t) * (size_t)(m * n)), *c2 = malloc(sizeof(int32_t) * (size_t)(m * n));
        cr_assert(a && b && ap1 && ap2 && bp1 && bp2 && bp3 && bp4 && rs1 && rs2 && cs1 && cs2 && c1 && c2);
        for (int64_t i = 0; i < m * k; i++)
            a[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int64_t i = 0; i < k * n; i++)
            b[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int flip = 0; flip <= 0x80; flip += 0x80) {
            memset(ap2, 0x5a, (size_t)(m * k4));
            memset(bp2, 0x5a, (size_t)(k4 * n16));
            qr_igemm_pack_a_ref(ap1, a, k, m, k, (uint8_t)flip, rs1);
            pack_a(ap2, a, k, m, k, (uint8_t)flip, rs2);
            cr_assert(!memcmp(ap1, ap2, (size_t)(m * k4)), "pack_a %lldx%lld flip %d", (long long)m, (long long)k, flip);
            cr_assert(!memcmp(rs1, rs2, sizeof(int32_t) * (size_t)m), "row sums %lldx%lld flip %d", (long long)m,
                      (long long)k, flip);
            qr_igemm_pack_b_ref(bp1, b, n, k, n, (uint8_t)flip, cs1, n16);
            pack_b(bp2, b, n, k, n, (uint8_t)flip, cs2, n16);
            cr_assert(!memcmp(bp1, bp2, (size_t)(k4 * n16)), "pack_b %lldx%lld flip %d", (long long)k, (long long)n, flip);
            memset(bp3, 0x5a, (size_t)(k4 * wide)); /* the pad columns are not written: the same in both */
            memset(bp4, 0x5a, (size_t)(k4 * wide));
            qr_igemm_pack_b_ref(bp3, b, n, k, n, (uint8_t)flip, NULL, wide);
            pack_b(bp4, b, n, k, n, (uint8_t)flip, NULL, wide);
            cr_assert(!memcmp(bp3, bp4, (size_t)(k4 * wide)), "pack_b %lldx%lld flip %d, pitch %lld", (long long)k,
                      (long long)n, flip, (long long)wide);
            cr_assert(!memcmp(cs1, cs2, sizeof(int32_t) * (size_t)n), "column sums %lldx%lld flip %d", (long long)k,
                      (long long)n, flip);
        }
        for (int64_t i = 0; i < m; i++) {
            rs1[i] = (int32_t)rnd(&seed) - (1 << 23);
            rs2[i] = (int32_t)(rnd(&seed) & 0x1ff) - 256; /* zero points per row, moved: both signs */
        }
        for (int64_t j = 0; j < n; j++) {
            cs1[j] = (int32_t)rnd(&seed) - (1 << 23);
            cs2[j] = (int32_t)rnd(&seed) - (1 << 23); /* column sums: large, so rz * csum wraps */
        }
        /* column starts alone, a zero point per row times the column sums alone, and both */
        for (int mode = 0; mode < 3; mode++) {
            const int32_t *cinit = mode != 1 ? cs1 : NULL, *rz = mode != 0 ? rs2 : NULL;
            /* ap1 and bp1 hold the last packings: a ^ 0x80 and b ^ 0x80 */
            qr_igemm_u8s8_rc_ref(c1, n, ap1, rs1, cinit, rz, cs2, 0, m, bp1, k4, n, n16);
            for (int64_t i = 0; i < m; i++) /* the reference against the definition at a row's ends */
                for (int64_t j = 0; j < n; j += n - 1 > 0 ? n - 1 : 1) {
                    uint32_t sum = (uint32_t)rs1[i] + (cinit ? (uint32_t)cinit[j] : 0) -
                                   (rz ? (uint32_t)rz[i] * (uint32_t)cs2[j] : 0);
                    for (int64_t q = 0; q < k; q++)
                        sum += (uint32_t)((int32_t)(int8_t)(a[i * k + q] ^ 0x80) *
                                          (int32_t)(uint8_t)(b[q * n + j] ^ 0x80));
                    cr_assert_eq(c1[i * n + j], (int32_t)sum, "mode %d", mode);
                }
            for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
                qr_igemm_rc_fn fn = qr_igemm_u8s8_rc_isa(isas[i]);
                if (!fn)
                    continue;
                /* B packed N16 columns a group apart, and wider (bp3: flip 0x80 as bp1) */
                for (int padded = 0; padded <= 1; padded++) {
                    memset(c2, 0xa5, sizeof(int32_t) * (size_t)(m * n));
                    fn(c2, n, ap1, rs1, cinit, rz, cs2, 0, m / 2, padded ? bp3 : bp1, k4, n, padded ? wide : n16);
                    fn(c2, n, ap1, rs1, cinit, rz, cs2, m / 2, m, padded ? bp3 : bp1, k4, n, padded ? wide : n16);
                    cr_assert(!memcmp(c1, c2, sizeof(int32_t) * (size_t)(m * n)), "%s rc %lldx%lldx%lld mode %d%s",
                              isas[i], (long long)m, (long long)k, (long long)n, mode, padded ? ", padded" : "");
                }
                int64_t pitch = qr_igemm_rc_pitch(fn, k4, n);
                cr_assert(pitch == n16 || (pitch == wide && !strcmp(isas[i], "avx512vnni") && n16 % 256 == 0),
                          "%s pitch %lld for n %lld", isas[i], (long long)pitch, (long long)n);
                /* its twin on the rows widened to i16 (as quant.c's mmq widens A once), B at N16 */
                qr_igemm_rc16_fn twin = qr_igemm_rc_wide_twin(fn);
                int16_t *ap16 = twin ? malloc(sizeof *ap16 * (size_t)(m * k4)) : NULL;
                cr_assert(!twin || ap16);
                for (int64_t e = 0; twin && e < m * k4; e++)
                    ap16[e] = ap1[e];
                if (twin) {
                    memset(c2, 0xa5, sizeof(int32_t) * (size_t)(m * n));
                    twin(c2, n, ap16, rs1, cinit, rz, cs2, 0, m / 2, bp1, k4, n, n16);
                    twin(c2, n, ap16, rs1, cinit, rz, cs2, m / 2, m, bp1, k4, n, n16);
                    cr_assert(!memcmp(c1, c2, sizeof(int32_t) * (size_t)(m * n)), "%s rc on i16 %lldx%lldx%lld mode %d",
                              isas[i], (long long)m, (long long)k, (long long)n, mode);
                }
                free(ap16);
            }
        }
        free(a), free(b), free(ap1), free(ap2), free(bp1), free(bp2), free(bp3), free(bp4);
        free(rs1), free(rs2), free(cs1), free(cs2), free(c1), free(c2);
    }
}

/* The AVX-512 VNNI rc kernel (the static and dynamic integer products' on AMD's path, amx=0),
 * on B packed in rows ([K4/4][pitch][4], N16 and the padded pitch) and in panels of 32 columns
 * (qr_igemm_u8s8_rc_panels_avx512vnni, as quant.c packs a constant B for it), against a naive
 * int64 loop, called as quant.c's mmq_rows_ep calls them: tasks of 64 rows, each into a buffer of
 * its own rows (rows 0.. of a shifted A), with ragged rows, K and columns (a last panel of 16
 * columns and of fewer), column starts and per-row zero points, both signs at their extremes among
 * random bytes. The panels here are packed by hand from B; qr_igemm_rc_panels must give the same
 * bytes from the rows' packing. */
Test(igemm, vnni_rc_kernels_in_tasks_match_a_naive_loop)
{
    qr_igemm_rc_fn rows = qr_igemm_u8s8_rc_isa("avx512vnni");
    if (!rows) {
        cr_log_info("this CPU has no AVX-512 VNNI: nothing to compare");
        return;
    }
    static const int64_t ms[] = {1, 7, 8, 9, 63, 64, 65, 130};
    static const int64_t ks[] = {4, 61, 256, 260};
    static const int64_t ns[] = {17, 33, 47, 100, 256, 261};
    unsigned seed = 51;
    int ran = 0;
    for (size_t x = 0; x < sizeof ms / sizeof ms[0]; x++)
        for (size_t y = 0; y < sizeof ks / sizeof ks[0]; y++)
            for (size_t z = 0; z < sizeof ns / sizeof ns[0]; z++) {
                int64_t m = ms[x], k = ks[y], n = ns[z], k4 = qr_igemm_k4(k), n16 = qr_igemm_n16(n);
                int64_t n32 = qr_igemm_n32(n), kq = k4 / 4, pitch = (x + y + z) % 2 ? n16 + 16 : n16;
                int8_t *a = calloc((size_t)(m * k4), 1);
                uint8_t *b = malloc((size_t)(k * n)), *bp = calloc((size_t)(k4 * pitch), 1),
                        *pan = calloc((size_t)(k4 * n32), 1), *pan2 = malloc((size_t)(k4 * n32));
                int32_t *init = malloc(sizeof(int32_t) * (size_t)m), *rz = malloc(sizeof(int32_t) * (size_t)m),
                        *cinit = malloc(sizeof(int32_t) * (size_t)n), *csum = malloc(sizeof(int32_t) * (size_t)n),
                        *buf = malloc(sizeof(int32_t) * (size_t)(64 * n));
                cr_assert(a && b && bp && pan && pan2 && init && rz && cinit && csum && buf);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t q = 0; q < k; q++) {
                        unsigned r = rnd(&seed);
                        a[i * k4 + q] = r % 7 == 0 ? -128 : r % 7 == 1 ? 127 : (int8_t)(r & 0xff);
                    }
                for (int64_t i = 0; i < k * n; i++) {
                    unsigned r = rnd(&seed);
                    b[i] = r % 5 == 0 ? 255 : r % 5 == 1 ? 0 : (uint8_t)(r & 0xff);
                }
                for (int64_t q = 0; q < k; q++)
                    for (int64_t j = 0; j < n; j++) {
                        bp[((q >> 2) * pitch + j) * 4 + (q & 3)] = b[q * n + j];
                        pan[((j / 32 * kq + (q >> 2)) * 32 + j % 32) * 4 + (q & 3)] = b[q * n + j];
                    }
                memset(pan2, 0x5a, (size_t)(k4 * n32));
                qr_igemm_rc_panels(pan2, bp, k4, n, pitch);
                cr_assert(!memcmp(pan, pan2, (size_t)(k4 * n32)), "%lldx%lld pitch %lld: panels differ", (long long)k,
                          (long long)n, (long long)pitch);
                for (int64_t i = 0; i < m; i++) {
                    init[i] = (int32_t)rnd(&seed) - (1 << 23);
                    rz[i] = (int32_t)(rnd(&seed) & 0x1ff) - 256;
                }
                for (int64_t j = 0; j < n; j++) {
                    cinit[j] = (int32_t)rnd(&seed) - (1 << 23);
                    csum[j] = (int32_t)(rnd(&seed) << 8); /* large: rz * csum wraps */
                }
                for (int mode = 0; mode < 6; mode++) {
                    const int32_t *ci = mode % 3 != 1 ? cinit : NULL, *r = mode % 3 != 0 ? rz : NULL;
                    int panels = mode >= 3;
                    qr_igemm_rc_fn fn = panels ? qr_igemm_u8s8_rc_panels_avx512vnni : rows;
                    for (int64_t r0 = 0; r0 < m; r0 += 64) {
                        int64_t r1 = r0 + 64 < m ? r0 + 64 : m;
                        memset(buf, 0xa5, sizeof(int32_t) * (size_t)(64 * n));
                        fn(buf, n, a + r0 * k4, init + r0, ci, r ? r + r0 : NULL, csum, 0, r1 - r0, panels ? pan : bp,
                           k4, n, pitch);
                        for (int64_t i = r0; i < r1; i++)
                            for (int64_t j = 0; j < n; j++) {
                                int64_t s = (int64_t)init[i] + (ci ? ci[j] : 0) - (r ? (int64_t)r[i] * csum[j] : 0);
                                for (int64_t q = 0; q < k; q++)
                                    s += (int64_t)a[i * k4 + q] * b[q * n + j];
                                cr_assert_eq(buf[(i - r0) * n + j], wrap32(s),
                                             "%lldx%lldx%lld pitch %lld mode %d at %lld,%lld", (long long)m,
                                             (long long)k, (long long)n, (long long)pitch, mode, (long long)i,
                                             (long long)j);
                            }
                        for (int64_t i = (r1 - r0) * n; i < 64 * n; i++) /* rows past the task's unwritten */
                            cr_assert_eq((uint32_t)buf[i], 0xa5a5a5a5u, "%lldx%lldx%lld: element %lld written",
                                         (long long)m, (long long)k, (long long)n, (long long)i);
                    }
                    ran++;
                }
                free(a), free(b), free(bp), free(pan), free(pan2), free(init), free(rz), free(cinit), free(csum),
                    free(buf);
            }
    cr_assert_eq(ran, 8 * 4 * 6 * 6);
}
