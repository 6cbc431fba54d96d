/* The vector form of element-wise epilogues (compiler/vecmap.h) and the
 * convolution kernels it is fused into (compiler/iconv_jit.h, phase 2 of
 * the integer back end): which epilogues get one, its program for the
 * stdlib's requantization (derived by hand from stdlib/kernels.qrl's
 * qlinear), and the fused kernels' bytes against the recipe's own
 * channels-last kernel run on the same accumulator (phase 1), which is held
 * to a C transcription of the integer epilogue on accumulators summed by a
 * naive loop here, for epilogues
 * that use every instruction, with channel values of both signs, zero, NaN
 * and accumulators that wrap. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../compiler/iconv_jit.h"
#include "ops/igemm.h"
#include "recipe.h"
#include "testutil.h"
#include "vecjoin.h"

static char *cache_dir;

static void make_cache_dir(const char *out, void *user)
{
    (void)user;
    cr_assert_eq(mkdir(out, 0700), 0, "cannot make %s", out);
}

/* The fused kernels compiled go to a module cache (XDG_CACHE_HOME) that the tests of one run share
 * (tu_shared), made empty before the first: what runs was compiled by this build, and a kernel of
 * the same program and shape that two tests ask for (the stdlib's requantization at the channel
 * counts the packed tail's and its lean forms' tests share) is compiled once. */
static void run_cache(void)
{
    cache_dir = tu_shared("xdg_cache", make_cache_dir, NULL);
    setenv("XDG_CACHE_HOME", cache_dir, 1);
}

static void drop_cache(void)
{
    qc_iconv_jit_release();
    free(cache_dir);
}

TestSuite(vecmap, .init = run_cache, .fini = drop_cache);

static qrl_module *compile_path(const char *rel)
{
    char err[1200];
    qrl_module *m = tu_compile(rel, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

static const char *program(const qrl_module *m, const char *kernel)
{
    const qr_fn_desc *d = qr_module_fn(m, kernel);
    cr_assert(d && d->is_kernel == 1, "no kernel %s", kernel);
    return d->vector_epilogue;
}

/* qlinear: min(max(round_even(f32(acc + bias) * m) + f32(y_zero), floor), top) saturated to T;
 * tables: the channel lets m (0, f32) and bias (1, i32), then what the value reads of the layer in
 * order of appearance: y_zero (2, i32), floor (3, f32), top (4, f32). */
Test(vecmap, the_stdlib_requantization)
{
    qrl_module *m = compile_path("recipes/int8.qrl");
    static const char *const body = "tabi 2;tabf 3;tabf 4;tabf 0;tabi 1;acc;addi 5 4;cvtf 6;mulf 7 3;rint 8;cvtf 0;"
                                    "addf 9 10;maxf 11 1;minf 12 2;satf.";
    const char *u8 = program(m, "qlinear.nhwc<u8>"), *i8 = program(m, "qlinear.nhwc<i8>");
    cr_assert(u8 && i8, "qlinear has a vector form");
    char want[512];
    snprintf(want, sizeof want, "%su8 13", body);
    cr_expect_str_eq(u8, want);
    snprintf(want, sizeof want, "%si8 13", body);
    cr_expect_str_eq(i8, want);
    cr_expect_null(program(m, "qlinear<u8>"), "only the channels-last kernel has one");
    cr_expect_null(program(m, "qlinear.tile<u8>"));
    qr_module_free(m);
}

/* TFLite's fixed-point requantization multiplies in i64 (srdhm): no lane form, so it runs
 * through the channels-last kernel. */
Test(vecmap, none_for_i64_arithmetic)
{
    qrl_module *m = compile_path("recipes/int8-tflite.qrl");
    cr_expect_null(program(m, "tfl_linear.nhwc"));
    qr_module_free(m);
}

/* ------------------------------------------------ fused kernels vs phase 1 */

static const char *const EPILOGUES =
    "# every f32 instruction; channel values of both signs, zero and NaN (d), each NaN one operand\n"
    "# of a min, max or clamp whose result is a number as the scalar code has it\n"
    "fn scaled(a: i32, bias: i32, m: f32, z: i32) -> f32 {\n"
    "  let r = round_even(f32(a + bias) * m)\n"
    "  return r + f32(z)\n"
    "}\n"
    "kernel ep_f<T: u8 | i8>(acc: tensor<i32>, y: tensor<T>, s: f32, z: i32, lo: f32, hi: f32) {\n"
    "  let top = hi * 2.0\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c {\n"
    "      let m = s * f32(c % 7 - 3)\n"
    "      let bias = i32(c) * 977 - 20000\n"
    "      let d = select(c % 5 == 0, f32(nan), f32(c + 1) / 4.0)\n"
    "    }\n"
    "    sat<T>(clamp(scaled(a, bias, m, z), lo, top) + min(abs(f32(a) / d), 3.0) - max(-f32(a) * m, d) + min(d, f32(a) * 1e-6) + min(clamp(f32(a) / d, lo, hi), 5.0))\n"
    "  }\n"
    "}\n"
    "# every i32 instruction, wrapping products\n"
    "kernel ep_i<T: u8 | i8>(acc: tensor<i32>, y: tensor<T>, z: i32, k: i32) {\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c {\n"
    "      let b = i32(c) * 3 - 50\n"
    "      let q = 1 - i32(c % 4)\n"
    "    }\n"
    "    sat<T>(clamp(-(a * q) + b - k, -200, 300) + min(a, z) - max(b, 7) + a * 65537)\n"
    "  }\n"
    "}\n";

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* One layer: rows x n accumulators from random bytes and weights, and the kernel's arguments. */
typedef struct layer {
    int64_t taps, k4, n, rows;
    uint8_t *x;
    const uint8_t **a;
    int8_t *w;
    int8_t *wt; /* the weights unpacked, [taps][k4][n] (w is their packing) */
    int32_t *init, *acc;
    uint8_t *want, *got;
} layer;

static void make_layer(layer *l, int64_t taps, int64_t k4, int64_t n, int64_t rows)
{
    *l = (layer){.taps = taps, .k4 = k4, .n = n, .rows = rows};
    int64_t n16 = (n + 15) / 16 * 16, px = rows * taps;
    l->x = malloc((size_t)(px * k4));
    for (int64_t i = 0; i < px * k4; i++)
        l->x[i] = (uint8_t)next();
    l->a = malloc((size_t)px * sizeof *l->a);
    for (int64_t i = 0; i < px; i++)
        l->a[i] = l->x + (int64_t)(next() % (uint32_t)px) * k4;
    l->w = malloc((size_t)(taps * k4 * n16));
    l->wt = malloc((size_t)(taps * k4 * n));
    for (int64_t i = 0; i < taps * k4 * n; i++)
        l->wt[i] = (int8_t)next();
    qr_iconv_pack_w(l->w, l->wt, taps, k4, k4, n, k4 * n, n, 1);
    l->init = malloc((size_t)n * sizeof *l->init);
    for (int64_t j = 0; j < n; j++) /* small, large and near the ends: some sums wrap */
        l->init[j] = j % 4 == 0 ? (int32_t)(next() % 2001) - 1000 : j % 4 == 1 ? INT32_MAX - (int32_t)(next() % 50000) : (int32_t)next();
    /* the accumulators by a naive loop written here, int64 sums wrapped at the end (not the product's
     * reference kernel) */
    l->acc = malloc((size_t)(rows * n) * sizeof *l->acc);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t sum = l->init[j];
            for (int64_t t = 0; t < taps; t++)
                for (int64_t q = 0; q < k4; q++)
                    sum += (int64_t)l->a[i * taps + t][q] * l->wt[(t * k4 + q) * n + j];
            l->acc[i * n + j] = (int32_t)(uint32_t)(uint64_t)sum;
        }
    l->want = malloc((size_t)(rows * n) + 1);
    l->got = malloc((size_t)(rows * n) + 1);
}

static void drop_layer(layer *l)
{
    free(l->x);
    free((void *)l->a);
    free(l->w);
    free(l->wt);
    free(l->init);
    free(l->acc);
    free(l->want);
    free(l->got);
}

/* y by the channels-last kernel (fill, then one block of all rows) and its tables' low 32 bits */
static void phase1(const qr_fn_desc *k, int tables, void **scalars, int nscalars, layer *l, int32_t *lanes)
{
    int64_t n = l->n, span = l->rows * n;
    qrl_tview acc = {.data = l->acc, .numel = span, .rank = 1, .dims = {span}};
    qrl_tview y = {.data = l->want, .numel = span, .rank = 1, .dims = {span}};
    int64_t *tab = calloc((size_t)(tables * n), sizeof *tab);
    qrl_tview tv[32];
    void *args[64];
    int np = 0;
    args[np++] = &acc;
    args[np++] = &y;
    for (int i = 0; i < nscalars; i++)
        args[np++] = scalars[i];
    int64_t six[6], fill;
    for (int i = 0; i < 6; i++)
        args[np + i] = &six[i];
    args[np + 6] = &fill;
    for (int i = 0; i < tables; i++) {
        tv[i] = (qrl_tview){.data = tab + i * n, .numel = n, .rank = 1, .dims = {n}};
        args[np + 7 + i] = &tv[i];
    }
    for (int pass = 0; pass < 2; pass++) {
        int64_t v[6] = {0, pass ? l->rows : 0, n, n, 0, n}; /* c0 rows cols acc_rs y_off y_rs */
        memcpy(six, v, sizeof six);
        fill = !pass;
        qrl_rt rt;
        qr_rt_init(&rt);
        k->call(&rt, args);
        cr_assert_eq(rt.failed, 0, "%s: %s", k->name, rt.msg);
    }
    for (int64_t i = 0; i < tables * n; i++)
        lanes[i] = (int32_t)(uint32_t)(uint64_t)tab[i];
    free(tab);
}

/* ep_i's value written out here in C, from its QRL text (EPILOGUES): i32 arithmetic wraps, sat<T>
 * saturates to u8 or i8; z and k are its scalars. The oracle the channels-last kernel is held to. */
static uint8_t ep_i_oracle(int32_t a, int64_t c, int32_t z, int32_t k, int is_u8)
{
#define W(x) ((int32_t)(uint32_t)(x))
    int32_t b = W((uint32_t)(int32_t)c * 3u - 50u), q = 1 - (int32_t)(c % 4);
    int32_t t = W(W(0u - (uint32_t)W((uint32_t)a * (uint32_t)q)) + (uint32_t)b - (uint32_t)k);
    t = t < -200 ? -200 : t > 300 ? 300 : t;
    int32_t v = W((uint32_t)t + (uint32_t)(a < z ? a : z) - (uint32_t)(b > 7 ? b : 7) + (uint32_t)a * 65537u);
#undef W
    if (is_u8)
        return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    return (uint8_t)(int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

static void check_fused(const qrl_module *m, const char *kernel, void **scalars, int nscalars)
{
    const qr_fn_desc *base = qr_module_fn(m, kernel);
    cr_assert(base, "no kernel %s", kernel);
    int tables = -1;
    const qr_fn_desc *k = qr_module_nhwc(m, base, &tables);
    cr_assert(k && k->vector_epilogue, "%s has a vector form", kernel);
    static const int64_t shapes[][4] = {{1, 4, 16, 1},  {9, 20, 40, 7},  {1, 64, 64, 13},
                                        {9, 8, 80, 50}, {1, 32, 200, 6}, {4, 12, 131, 23}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        layer l;
        make_layer(&l, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        int32_t *lanes = malloc((size_t)(tables * l.n) * sizeof *lanes);
        phase1(k, tables, scalars, nscalars, &l, lanes);
        if (!strncmp(kernel, "ep_i<", 5)) /* the channels-last kernel against the C oracle */
            for (int64_t i = 0; i < l.rows * l.n; i++) {
                uint8_t want = ep_i_oracle(l.acc[i], i % l.n, *(int32_t *)scalars[0], *(int32_t *)scalars[1],
                                           !strcmp(kernel, "ep_i<u8>"));
                cr_assert_eq(l.want[i], want, "%s phase 1, n %lld: y[%lld][%lld] = %d, the C oracle %d (acc %d)", kernel,
                             (long long)l.n, (long long)(i / l.n), (long long)(i % l.n), l.want[i], want, l.acc[i]);
            }
        const int32_t *tabs[32];
        for (int i = 0; i < tables; i++)
            tabs[i] = lanes + i * l.n;
        qr_iconv_ep_fn fused = qc_iconv_jit_ep(l.taps, l.k4, l.n, k->vector_epilogue);
        cr_assert(fused, "%s: no fused kernel for taps %lld k4 %lld n %lld", kernel, (long long)l.taps, (long long)l.k4,
                  (long long)l.n);
        memset(l.got, 0xa5, (size_t)(l.rows * l.n) + 1);
        fused(l.got, l.n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, l.n, l.n, tabs, NULL, 0);
        for (int64_t i = 0; i < l.rows * l.n; i++)
            cr_assert_eq(l.got[i], l.want[i], "%s, taps %lld k4 %lld n %lld: y[%lld][%lld] = %d, phase 1 %d (acc %d)",
                         kernel, (long long)l.taps, (long long)l.k4, (long long)l.n, (long long)(i / l.n),
                         (long long)(i % l.n), l.got[i], l.want[i], l.acc[i]);
        cr_assert_eq(l.got[l.rows * l.n], 0xa5, "written past the last row");
        /* the rows epilogue alone (qc_rows_ep_jit): all of y, then columns [c0, c1) of rows [1, rows)
         * (a ragged start and end, tables read at c0), nothing outside them written */
        qr_rows_ep_fn rows_ep = qc_rows_ep_jit(k->vector_epilogue);
        cr_assert(rows_ep, "%s: no rows epilogue", kernel);
        for (int part = 0; part < 2; part++) {
            int64_t c0 = part ? l.n / 3 + 1 : 0, c1 = part ? l.n - l.n / 5 : l.n, r0 = part && l.rows > 1;
            memset(l.got, 0xa5, (size_t)(l.rows * l.n) + 1);
            rows_ep(l.got + r0 * l.n + c0, l.n, l.acc + r0 * l.n + c0, l.n, l.rows - r0, c1 - c0, c0, tabs);
            for (int64_t i = 0; i <= l.rows * l.n; i++) {
                int64_t r = i / l.n, c = i % l.n;
                int in = i < l.rows * l.n && r >= r0 && c >= c0 && c < c1;
                cr_assert_eq(l.got[i], in ? l.want[i] : 0xa5,
                             "%s rows epilogue, n %lld, columns [%lld, %lld) of rows from %lld: y[%lld][%lld] = %d, "
                             "want %d (acc %d)", kernel, (long long)l.n, (long long)c0, (long long)c1, (long long)r0,
                             (long long)r, (long long)c, l.got[i], in ? l.want[i] : 0xa5, i < l.rows * l.n ? l.acc[i] : 0);
            }
        }
        free(lanes);
        drop_layer(&l);
    }
}

static int has_vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

Test(vecmap, fused_kernels_write_the_bytes_of_the_channels_last_kernel)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    char *dir = tu_tmpdir(), path[1024];
    snprintf(path, sizeof path, "%s/ep.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(EPILOGUES, f);
    fclose(f);
    qrl_module *m = compile_path(path);
    float s = 0.0123f, lo = -90.5f, hi = 70.25f, s2 = -0.5f;
    int32_t z = 7, zn = -3, k = 11;
    void *f_args[] = {&s, &z, &lo, &hi}, *f_neg[] = {&s2, &zn, &lo, &hi}, *i_args[] = {&z, &k};
    check_fused(m, "ep_f<u8>", f_args, 4);
    check_fused(m, "ep_f<i8>", f_args, 4);
    check_fused(m, "ep_f<i8>", f_neg, 4);
    check_fused(m, "ep_i<u8>", i_args, 2);
    check_fused(m, "ep_i<i8>", i_args, 2);
    qr_module_free(m);
    tu_rmdir(dir);
}

/* ------------------------------------- the requantization tail (vfast) */

/* The tables of channel c: m (0), bias (1), y_zero (2), floor (3), top (4). Vectors of 16 channels
 * are of three kinds by c / 16 % 3: ordinary layers' values (the fast tail), values at the fast
 * tail's edges that it still takes (products that overflow to infinities, bounds outside T's range
 * or crossed, a zero point of 2^23, no bounds, ties), and one lane in 16 that it does not take (m NaN or
 * infinite, zero points past 2^23, bounds NaN or not integers), so that vector runs the program. */
static void tail_tables(int64_t n, int32_t *lanes, int i8)
{
    for (int64_t c = 0; c < n; c++) {
        float m = (float)((int)(next() % 2001) - 1000) * 2e-6f, lo = -INFINITY, hi = INFINITY;
        int32_t bias = (int32_t)(next() % 200001) - 100000, yz = (int32_t)(next() % 256) - (c % 2 ? 128 : 0);
        if (c % 3 == 0)
            lo = (float)yz; /* Relu */
        if (c % 4 == 1) {
            lo = (float)(yz - 30);
            hi = (float)(yz + 40); /* Clip */
        }
        int kind = (int)(c / 16 % 3), lane = (int)(c % 16);
        if (kind == 1) {
            static const float ms[] = {1e30f, -1e30f, 0.0f, -0.0f, 3e-45f, 1.5f};
            m = lane < 6 ? ms[lane] : m;
            yz = lane == 6 ? 1 << 23 : lane == 7 ? -(1 << 23) : lane == 8 ? 300 : yz;
            lo = lane == 9 ? 400.0f : lane == 10 ? 50.0f : lane == 11 ? -1e9f : lo;
            hi = lane == 9 ? 500.0f : lane == 10 ? 20.0f : lane == 12 ? -300.0f : lane == 11 ? 1e9f : hi;
            if (lane >= 13) { /* halves and quarters of small sums: ties, which round to even */
                m = lane == 13 ? 0.5f : lane == 14 ? -0.25f : 1.5f;
                bias = (int32_t)(next() % 21) - 10;
                yz = i8 ? 0 : 128;
            }
        } else if (kind == 2) {
            int bad = (int)(c / 48 % 9);
            if (lane == 5)
                switch (bad) {
                case 0: m = NAN; break;
                case 1: m = INFINITY; break;
                case 2: m = -INFINITY; break;
                case 3: yz = (1 << 23) + 1; break;
                case 4: yz = INT32_MIN; break;
                case 5: lo = NAN; break;
                case 6: hi = NAN; break;
                case 7: lo = 3.5f; break;
                default: hi = 100.25f; break;
                }
        }
        memcpy(&lanes[0 * n + c], &m, 4);
        lanes[1 * n + c] = bias;
        lanes[2 * n + c] = yz;
        memcpy(&lanes[3 * n + c], &lo, 4);
        memcpy(&lanes[4 * n + c], &hi, 4);
    }
}

static uint8_t tail_want(const int32_t *lanes, int64_t n, int64_t c, int32_t acc, int i8)
{
    float m, lo, hi;
    memcpy(&m, &lanes[c], 4);
    memcpy(&lo, &lanes[3 * n + c], 4);
    memcpy(&hi, &lanes[4 * n + c], 4);
    return tu_qlinear_byte(acc, m, lanes[n + c], lanes[2 * n + c], lo, hi, i8);
}

/* A layer's requantization tables (channels n, y's type i8) and which channels hold the rounding
 * ties, whose sums the test sets near zero. */
typedef struct tail_kind {
    void (*tables)(int64_t n, int32_t *lanes, int i8);
    int (*tie)(int64_t c);
} tail_kind;

static int tail_tie(int64_t c) { return c / 16 % 3 == 1 && c % 16 >= 13; }

/* The stdlib's requantization program in the fused kernels (over all columns, and by two calls split
 * at column 64 as two threads split them) and the rows epilogue, against the C oracle on the
 * tables of kind k. */
static void run_tail(const qrl_module *m, const int64_t (*shapes)[4], size_t nshapes, const tail_kind *k)
{
    for (int i8 = 0; i8 < 2; i8++) {
        const char *prog = program(m, i8 ? "qlinear.nhwc<i8>" : "qlinear.nhwc<u8>");
        cr_assert(prog);
        qr_rows_ep_fn rows_ep = qc_rows_ep_jit(prog);
        cr_assert(rows_ep, "no rows epilogue");
        for (size_t s = 0; s < nshapes; s++) {
            layer l;
            make_layer(&l, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            int64_t n = l.n;
            int32_t *lanes = malloc((size_t)(5 * n) * sizeof *lanes);
            k->tables(n, lanes, i8);
            /* some sums near zero, and all of the tie channels' (rows epilogue: the fused kernel sums the
             * layer's own), where the rounding ties lie */
            int ties = 0;
            for (int64_t i = 0; i < l.rows * n; i++)
                if (i % 7 == 0 || k->tie(i % n)) {
                    l.acc[i] = (int32_t)(next() % 2001) - 1000;
                    float m, x;
                    memcpy(&m, &lanes[i % n], 4);
                    x = (float)(l.acc[i] + lanes[n + i % n]) * m;
                    ties += fabsf(x - truncf(x)) == 0.5f && fabsf(x) < 100.0f;
                }
            cr_assert(n < 32 || ties > 0, "no ties");
            const int32_t *tabs[5];
            for (int t = 0; t < 5; t++)
                tabs[t] = lanes + t * n;
            for (int64_t i = 0; i < l.rows * n; i++)
                l.want[i] = tail_want(lanes, n, i % n, l.acc[i], i8);
            qr_iconv_ep_fn fused = qc_iconv_jit_ep(l.taps, l.k4, n, prog);
            cr_assert(fused);
            /* the fused kernel's sums are the layer's, its bytes the oracle's of them; all columns in one
             * call, then in two split at column 64 */
            for (int split = 0; split < 1 + (n > 64); split++) {
                memset(l.got, 0xa5, (size_t)(l.rows * n) + 1);
                if (split) {
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 64, n, n, tabs, NULL, 0);
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, 64, n, tabs, NULL, 0);
                } else {
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, n, n, tabs, NULL, 0);
                }
                for (int64_t i = 0; i < l.rows * n; i++) {
                    uint8_t want = l.want[i];
                    if (i % 7 == 0 || k->tie(i % n)) { /* acc changed above: the fused kernel summed the original */
                        int64_t sum = l.init[i % n];
                        for (int64_t t = 0; t < l.taps; t++)
                            for (int64_t q = 0; q < l.k4; q++)
                                sum += (int64_t)l.a[i / n * l.taps + t][q] * l.wt[(t * l.k4 + q) * n + i % n];
                        want = tail_want(lanes, n, i % n, (int32_t)(uint32_t)(uint64_t)sum, i8);
                    }
                    cr_assert_eq(l.got[i], want, "%s fused%s, taps %lld k4 %lld n %lld: y[%lld][%lld] = %d, the oracle %d",
                                 i8 ? "i8" : "u8", split ? " (split at 64)" : "", (long long)l.taps, (long long)l.k4,
                                 (long long)n, (long long)(i / n), (long long)(i % n), l.got[i], want);
                }
                cr_assert_eq(l.got[l.rows * n], 0xa5, "written past the last row");
            }
            for (int part = 0; part < 2; part++) {
                int64_t c0 = part ? n / 3 + 1 : 0, c1 = part ? n - n / 5 : n, r0 = part && l.rows > 1;
                memset(l.got, 0xa5, (size_t)(l.rows * n) + 1);
                rows_ep(l.got + r0 * n + c0, n, l.acc + r0 * n + c0, n, l.rows - r0, c1 - c0, c0, tabs);
                for (int64_t i = 0; i <= l.rows * n; i++) {
                    int64_t r = i / n, c = i % n;
                    int in = i < l.rows * n && r >= r0 && c >= c0 && c < c1;
                    cr_assert_eq(l.got[i], in ? l.want[i] : 0xa5,
                                 "%s rows epilogue, n %lld, columns [%lld, %lld) from row %lld: y[%lld][%lld] = %d, "
                                 "want %d (acc %d)", i8 ? "i8" : "u8", (long long)n, (long long)c0, (long long)c1,
                                 (long long)r0, (long long)r, (long long)c, l.got[i], in ? l.want[i] : 0xa5,
                                 i < l.rows * n ? l.acc[i] : 0);
                }
            }
            free(lanes);
            drop_layer(&l);
        }
    }
}

/* The stdlib's requantization program (the fast tail, or the program where a vector's values do
 * not allow it) in the fused kernels and the rows epilogue, against the C oracle: ragged channel
 * counts, tiles of 1 to 4 vectors, several strips of several row tiles, columns from a ragged start. */
Test(vecmap, requantization_tail_gives_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    qrl_module *m = compile_path("recipes/int8.qrl");
    /* (taps, k4, n, rows); {2, 4, 200, 20}: four strips (the last of one vector) of four row tiles, taken
     * and refused vectors mixed in a strip (the check runs once per strip, its tiles reuse it) */
    static const int64_t shapes[][4] = {{1, 16, 150, 13}, {9, 8, 61, 9}, {1, 4, 200, 7}, {3, 12, 37, 20}, {1, 32, 451, 6},
                                        {2, 4, 200, 20}};
    static const tail_kind kind = {tail_tables, tail_tie};
    run_tail(m, shapes, sizeof shapes / sizeof shapes[0], &kind);
    qr_module_free(m);
}

/* The fused kernels' k loop (iconv_jit.c emit_tile: more than 16 k groups, a loop of 8 and the rest
 * after it), whose accumulators go through the tile's stack slots to the epilogue (acc_put,
 * acc_get, stop 46), against the C oracle: u8 and i8; 9 and 3 taps; 19 and 33 groups (3 and 1
 * left after the loop); strips of 4 vectors, a ragged last strip of 3 vectors (4 lanes in the last)
 * or of one half vector; row tiles of both heights, the last ragged; all columns in one call and
 * split at 64 (run_tail). The other tests' k4 of at most 64 unroll every group. */
Test(vecmap, fused_k_loops_give_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    qrl_module *m = compile_path("recipes/int8.qrl");
    static const int64_t shapes[][4] = {{9, 76, 200, 29}, {3, 132, 100, 13}};
    static const tail_kind kind = {tail_tables, tail_tie};
    run_tail(m, shapes, sizeof shapes / sizeof shapes[0], &kind);
    qr_module_free(m);
}

/* Tables for the packed tail (emit_packed_rows: a strip's vectors packed into one store when every
 * lane has |m| < 1 and |y_zero| <= 2^14 besides the fast tail's conditions), by strip of 64
 * channels, s = c / 64: s % 3 == 0, every lane takes it: ordinary layers' values and its edges (m
 * just under 1 in magnitude on sums up to 2^31, so that rounded values saturate the words, zero,
 * subnormal; zero points of +-2^14; bounds above or below T's range, crossed, far out; ties); s % 3
 * == 1: the same with lanes it refuses that the fast tail takes (m of 1 or +-3e4, or a zero point of
 * 2^14 + 1), so the strip's vectors each take the fast tail; s % 3 == 2: the same with one lane
 * (m NaN) that takes the program. Relu and Clip bounds on some channels of all three. */
static void packed_tables(int64_t n, int32_t *lanes, int i8)
{
    for (int64_t c = 0; c < n; c++) {
        float m = (float)((int)(next() % 2001) - 1000) * 2e-6f, lo = -INFINITY, hi = INFINITY;
        int32_t bias = (int32_t)(next() % 200001) - 100000, yz = (int32_t)(next() % 256) - (c % 2 ? 128 : 0);
        if (c % 3 == 0)
            lo = (float)yz; /* Relu */
        if (c % 4 == 1) {
            lo = (float)(yz - 30);
            hi = (float)(yz + 40); /* Clip */
        }
        int64_t s = c / 64;
        int lane = (int)(c % 64);
        switch (lane % 16) {
        case 1: m = 0.99999994f; break;
        case 2: m = -0.99999994f; break;
        case 3: m = lane < 16 ? 0.0f : -0.0f; break;
        case 4: m = 3e-45f; break;
        case 5: yz = lane < 32 ? 1 << 14 : -(1 << 14); break;
        case 6: lo = 400.0f, hi = 500.0f; break;
        case 7: lo = 50.0f, hi = 20.0f; break;
        case 8: lo = -1e9f, hi = 1e9f; break;
        case 9: hi = -300.0f; break;
        case 10: m = 0.5f; break; /* ties, on sums near zero (packed_tie) */
        case 11: m = -0.25f; break;
        case 12: m = 0.75f; break;
        default: break;
        }
        if (lane % 16 >= 10 && lane % 16 <= 12) {
            bias = (int32_t)(next() % 21) - 10;
            yz = i8 ? 0 : 128;
        }
        if (s % 3 == 1 && lane == 37) {
            if (s / 3 % 2 == 0)
                m = 1.0f;
            else
                yz = (1 << 14) + 1;
        }
        if (s % 3 == 1 && (lane == 46 || lane == 47))
            m = lane == 46 ? -3e4f : 3e4f; /* |x| past 2^31 on the sums of random inits (make_layer), + on one */
        if (s % 3 == 2 && lane == 50)
            m = NAN;
        memcpy(&lanes[0 * n + c], &m, 4);
        lanes[1 * n + c] = bias;
        lanes[2 * n + c] = yz;
        memcpy(&lanes[3 * n + c], &lo, 4);
        memcpy(&lanes[4 * n + c], &hi, 4);
    }
}

static int packed_tie(int64_t c) { return c % 16 >= 10 && c % 16 <= 12; }

/* The packed tail against the C oracle: u8 and i8; strips of 2 to 4 vectors (and of 1), full and ragged
 * (the store's byte mask), alone and after full strips; several row tiles, the last ragged; strips
 * that take it, that the fast tail takes instead and that run the program (packed_tables). */
Test(vecmap, packed_tail_gives_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    qrl_module *m = compile_path("recipes/int8.qrl");
    /* n: 8 (1 vector, 8 lanes), 16 (1 full, 11 rows; one vector runs the fast tail), 24 (2 vectors, 8 lanes of the
     * second), 32 (2 full), 37 (3, 5), 48 (3 full), 64 (4 full), 80 (4 + 1 full, 5 rows), 96 (4 + 2 full: the
     * unmasked stores), 100 (4 + 3 ragged), 150 (4, 4, 2 ragged), 216 (3 strips of 4 + 2 ragged), 400 (6 full
     * strips + 1 vector); rows 49, 29 and 55: tiles of 6 and 5 rows (8 and 7 where a strip is 2 or 3 vectors) */
    static const int64_t shapes[][4] = {{1, 4, 8, 6},    {9, 8, 16, 11}, {1, 16, 24, 19}, {1, 8, 32, 9},  {1, 4, 37, 17},
                                        {1, 16, 48, 9},  {1, 16, 64, 13}, {1, 4, 80, 5},  {1, 16, 96, 14}, {1, 8, 100, 7},
                                        {2, 4, 150, 11}, {1, 4, 216, 6},  {1, 4, 400, 8},  {1, 16, 96, 49}, {1, 8, 32, 49},
                                        {1, 24, 160, 29}, {1, 16, 64, 55}};
    static const tail_kind kind = {packed_tables, packed_tie};
    run_tail(m, shapes, sizeof shapes / sizeof shapes[0], &kind);
    qr_module_free(m);
}

/* Tables for the packed tail's lean forms (iconv_jit.c emit_lean_check: a strip whose stored lanes
 * all have A and B at T's bounds skips the byte clamp, and with Z 0 too the zero point's add), by
 * strip of 64 channels, s = c / 64: s % 4 == 0, every lane Z 0 and no bound inside T's range (none,
 * far out, or a Relu at T's bottom): both skipped; s % 4 == 1, zero points of both signs, no bounds
 * inside: the clamp skipped, Z added; s % 4 == 2, as 0 but one lane's Clip inside T's range (its
 * place moves with s): neither skipped; s % 4 == 3, as 0 but one lane with Z 3: Z added. Lanes 10
 * of each 16 hold ties (lean_tie). */
static void lean_tables(int64_t n, int32_t *lanes, int i8)
{
    for (int64_t c = 0; c < n; c++) {
        int64_t s = c / 64;
        int lane = (int)(c % 64), odd = (int)(s / 4 % 2);
        float m = (float)((int)(next() % 2001) - 1000) * 2e-6f, lo = -INFINITY, hi = INFINITY;
        int32_t bias = (int32_t)(next() % 200001) - 100000, yz = 0;
        if (lane % 3 == 1)
            lo = i8 ? -128.0f : 0.0f; /* a Relu at T's bottom */
        if (lane % 5 == 2)
            lo = -1e9f, hi = 1e9f;
        if (lane % 16 == 10) {
            m = 0.5f;
            bias = (int32_t)(next() % 21) - 10;
        }
        if (s % 4 == 1)
            yz = (int32_t)(next() % 100) + 1, yz = lane % 2 ? -yz : yz, lo = lane % 3 == 1 ? -1e9f : lo;
        if (s % 4 == 2 && lane == (odd ? 63 : 5 + (int)(s % 7) * 9))
            lo = -30.0f, hi = 40.0f; /* a Clip inside T's range */
        if (s % 4 == 3 && lane == (odd ? 1 : 47))
            yz = 3;
        memcpy(&lanes[0 * n + c], &m, 4);
        lanes[1 * n + c] = bias;
        lanes[2 * n + c] = yz;
        memcpy(&lanes[3 * n + c], &lo, 4);
        memcpy(&lanes[4 * n + c], &hi, 4);
    }
}

static int lean_tie(int64_t c) { return c % 16 == 10; }

/* The packed tail's lean forms against the C oracle: u8 and i8; strips of 2 to 4 vectors, full and
 * ragged (the lanes masked off are not looked at), each of the four kinds of lean_tables in full
 * strips and in the ragged last one; row tiles of both heights, the last ragged; 1 and 9 taps. */
Test(vecmap, packed_tail_lean_forms_give_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    qrl_module *m = compile_path("recipes/int8.qrl");
    /* n 24 and 40 (one ragged strip: kind 0), 96 (4 + 2 full: kinds 0, 1), 150 (kinds 0, 1, 2 ragged), 216
     * (0..3, the last ragged), 485 (eight strips: both places of kinds 2 and 3, the last of 5 lanes); taps and k4
     * those of packed_tail_gives_the_oracle_bytes' shapes of 24, 96, 150 and 216 channels, whose kernels (the
     * same program) the run's module cache then holds */
    static const int64_t shapes[][4] = {{1, 16, 24, 19}, {9, 4, 40, 11}, {1, 16, 96, 49}, {2, 4, 150, 29},
                                        {1, 4, 216, 13}, {9, 8, 485, 6}, {1, 24, 485, 55}};
    static const tail_kind kind = {lean_tables, lean_tie};
    run_tail(m, shapes, sizeof shapes / sizeof shapes[0], &kind);
    qr_module_free(m);
}

/* Hand-written programs whose bias the fused kernels fold into the sums' start (iconv_jit.c
 * bias_fold: `addi acc T`, T an i32 table, the accumulator read by nothing else), and ones they must
 * not fold, against their C transcription: y = sat(acc + T0) with the addi's operands in both
 * orders, T0 read again after the addi (acc + 2 T0), the accumulator read twice (2 acc + T0: no
 * fold), and the bias on the second table with the first one's bytes unused by the addi
 * (acc + T1 - T0). Biases of both signs and near the ends of i32 (the sums wrap, as addi does),
 * init near the ends too (make_layer); u8 and i8; 1, 2 and 9 taps; strips of 1 to 4 vectors, full
 * and ragged, several row tiles, the last ragged; all columns in one call and in two split at 64
 * (as two threads split them). Each (program, shape) once, of type u8 or i8 by turns ((p + s) % 2):
 * every program meets every shape, and each of them both types (a kernel is compiled per program
 * and shape, seconds of libgccjit each: the full cross of 70 was the binary's longest test). */
static int32_t fold_oracle(int p, int32_t a, int32_t t0, int32_t t1)
{
    uint32_t ua = (uint32_t)a, u0 = (uint32_t)t0, u1 = (uint32_t)t1;
    switch (p) {
    case 0:
    case 1: return (int32_t)(ua + u0);
    case 2: return (int32_t)(ua + u0 + u0);
    case 3: return (int32_t)(ua + ua + u0);
    default: return (int32_t)(ua + u1 - u0);
    }
}

Test(vecmap, folded_bias_gives_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    static const char *const progs[] = {
        "acc;tabi 0;addi 0 1;sati.%s 2",                 /* acc + T0 */
        "tabi 0;acc;addi 0 1;sati.%s 2",                 /* T0 + acc */
        "acc;tabi 0;addi 0 1;addi 2 1;sati.%s 3",        /* T0 read again */
        "acc;tabi 0;addi 0 1;addi 2 0;sati.%s 3",        /* acc read twice: no fold */
        "tabi 0;tabi 1;acc;addi 1 2;subi 3 0;sati.%s 4", /* the bias in T1 */
    };
    static const int64_t shapes[][4] = {{1, 4, 8, 6},  {9, 8, 16, 11}, {1, 16, 24, 19}, {2, 4, 37, 17},
                                        {1, 16, 64, 13}, {1, 8, 100, 7}, {1, 4, 150, 11}};
    for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int i8 = (int)((p + s) % 2);
            char prog[128];
            snprintf(prog, sizeof prog, progs[p], i8 ? "i8" : "u8");
            layer l;
            make_layer(&l, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            int32_t *t = malloc((size_t)(2 * l.n) * sizeof *t);
            for (int64_t c = 0; c < 2 * l.n; c++) /* small of both signs, and near the ends of i32 */
                t[c] = c % 3 == 0 ? (int32_t)(next() % 601) - 300 : c % 3 == 1 ? INT32_MIN + (int32_t)(next() % 400) : (int32_t)next();
            const int32_t *tabs[2] = {t, t + l.n};
            for (int64_t i = 0; i < l.rows * l.n; i++) {
                int64_t c = i % l.n;
                int32_t v = fold_oracle((int)p, l.acc[i], t[c], t[l.n + c]);
                l.want[i] = i8 ? (uint8_t)(int8_t)(v < -128 ? -128 : v > 127 ? 127 : v) : (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
            qr_iconv_ep_fn fused = qc_iconv_jit_ep(l.taps, l.k4, l.n, prog);
            cr_assert(fused, "%s: no fused kernel", prog);
            for (int split = 0; split < 2; split++) {
                memset(l.got, 0xa5, (size_t)(l.rows * l.n) + 1);
                int64_t mid = split && l.n > 64 ? 64 : l.n;
                fused(l.got, l.n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, mid, l.n, tabs, NULL, 0);
                if (mid < l.n)
                    fused(l.got, l.n, l.a, l.taps, l.rows, l.w, l.init, l.k4, mid, l.n, l.n, tabs, NULL, 0);
                for (int64_t i = 0; i < l.rows * l.n; i++)
                    cr_assert_eq(l.got[i], l.want[i], "%s, taps %lld k4 %lld n %lld, split %d: y[%lld][%lld] = %d, want %d (acc %d)",
                                 prog, (long long)l.taps, (long long)l.k4, (long long)l.n, split,
                                 (long long)(i / l.n), (long long)(i % l.n), l.got[i], l.want[i], l.acc[i]);
                cr_assert_eq(l.got[l.rows * l.n], 0xa5, "written past the last row");
            }
            free(t);
            drop_layer(&l);
        }
}

/* ------------------------------------- a joined stage's tail (vprog.stage, stop 42) */

/* stdlib qadd's value on the epilogue's byte a and the skip tensor's byte b (kernels.qrl: add_real,
 * then sat<T>(max(v, floor)), floor = bound(lo, y_scale, y_zero) = round_even(lo / y_scale) +
 * f32(y_zero)), written out here in C with the language's rules (as tu_qlinear_byte). */
static uint8_t qadd_oracle(int32_t a, int32_t b, float as, int32_t az, float bs, int32_t bz, float ys, int32_t yz, float lo,
                           int i8)
{
    volatile float pa = (float)(int32_t)((uint32_t)a - (uint32_t)az) * as; /* volatile: no contraction */
    volatile float pb = (float)(int32_t)((uint32_t)b - (uint32_t)bz) * bs;
    volatile float real = pa + pb, floor = rintf(lo / ys) + (float)yz;
    float v = tu_vmax(rintf(real / ys) + (float)yz, floor);
    if (isnan(v))
        return 0;
    float tl = i8 ? -128.0f : 0.0f, th = i8 ? 127.0f : 255.0f;
    v = v > th ? th : v < tl ? tl : v;
    return i8 ? (uint8_t)(int8_t)truncf(v) : (uint8_t)truncf(v);
}

/* The stage's parameters of channel c (the stage reads per-tensor scalars; per channel here, so
 * that vectors of one kernel take the fast tails and others the program): vectors by c / 16 % 3,
 * ordinary residual Adds of both signs of scale and zero point, with and without the Relu's floor
 * (the fast tails); the fast tail's edges it still takes (|a_scale| just under 2^95, a tiny y_scale
 * whose quotients overflow to infinities, an infinite one, y_zero of +-2^23, ties); one lane in 16
 * it does not take (y_scale 0 or NaN, a scale of 2^95 or NaN, y_zero past 2^23, floor NaN or not an
 * integer), so that vector runs the program (and a_zero far from the epilogue's y_zero: the test's
 * loop). */
enum { ST_AS, ST_AZ, ST_BS, ST_BZ, ST_YS, ST_YZ, ST_LO, ST_N };

static void stage_params(int64_t c, float *f, int32_t *z, int i8)
{
    int kind = (int)(c / 16 % 3), lane = (int)(c % 16);
    f[ST_AS] = (float)((int)(next() % 2001) - 1000) * 1e-4f;
    f[ST_BS] = (float)((int)(next() % 2001) - 1000) * 1e-4f;
    f[ST_YS] = (float)((int)(next() % 1000) + 1) * 1e-4f * (c % 5 == 2 ? -1.0f : 1.0f);
    z[ST_AZ] = (int32_t)(next() % 256) - (i8 ? 128 : 0);
    z[ST_BZ] = (int32_t)(next() % 256) - (i8 ? 128 : 0);
    z[ST_YZ] = (int32_t)(next() % 256) - (i8 ? 128 : 0);
    f[ST_LO] = c % 3 == 0 ? 0.0f : -INFINITY;
    if (kind == 1) {
        if (lane == 1)
            f[ST_AS] = 3.9e28f; /* under 2^95 = 3.96e28 */
        if (lane == 2)
            f[ST_YS] = 1e-38f;
        if (lane == 3)
            f[ST_YS] = INFINITY;
        if (lane == 4 || lane == 5)
            z[ST_YZ] = lane == 4 ? 1 << 23 : -(1 << 23);
        if (lane == 6)
            f[ST_LO] = 1e30f;
        if (lane >= 13) { /* quotients of halves: ties, which round to even */
            f[ST_AS] = f[ST_BS] = 0.5f;
            f[ST_YS] = 1.0f;
        }
    } else if (kind == 2 && lane == 9) {
        switch (c / 48 % 8) {
        case 0: f[ST_YS] = 0.0f; break;
        case 1: f[ST_YS] = NAN; break;
        case 2: f[ST_AS] = 0x1p95f; break;
        case 3: f[ST_BS] = NAN; break;
        case 4: z[ST_YZ] = (1 << 23) + 1; break;
        case 5: f[ST_LO] = NAN; break;
        case 6: f[ST_LO] = 3.25f; break;
        default: f[ST_BS] = -INFINITY; break;
        }
    }
}

/* The stdlib's requantization joined to its qadd (quantizer/vecjoin.h, as fuse_stages joins a
 * convolution to its residual Add) in the fused kernels, against the C oracles (qlinear's byte, then
 * qadd's of it and the skip byte): u8 and i8; ragged channel counts, tiles of 1 to 4 vectors, several
 * row tiles, the last ragged; all columns in one call and in two split at 64; skip bytes of the
 * whole range. */
Test(vecmap, joined_stage_tail_gives_the_oracle_bytes)
{
    if (!has_vnni()) {
        cr_log_info("no AVX-512 VNNI: no fused kernels");
        return;
    }
    qrl_module *m = compile_path("recipes/int8.qrl");
    /* {1, 4, 500, 5}: the kind 2 vectors' eight refused lanes */
    static const int64_t shapes[][4] = {{9, 4, 16, 21}, {9, 8, 21, 9}, {1, 16, 37, 13}, {9, 16, 64, 14}, {1, 8, 150, 7},
                                        {2, 4, 200, 20}, {1, 4, 500, 5}};
    for (int i8 = 0; i8 < 2; i8++) {
        char joined[4096];
        qi_join_param ps[QI_JOIN_MAX_PARAMS];
        int np = 0;
        const char *ep = program(m, i8 ? "qlinear.nhwc<i8>" : "qlinear.nhwc<u8>"), *st = program(m, i8 ? "qadd<i8>" : "qadd<u8>");
        cr_assert(ep && st);
        /* qadd(a, a_scale, a_zero, b, b_scale, b_zero, lo, y, y_scale, y_zero): a is the epilogue's y */
        cr_assert(qi_vec_join(ep, st, 0, 3, 5, joined, sizeof joined, ps, &np), "no join");
        static const int slot[10] = {-1, ST_AS, ST_AZ, -1, ST_BS, ST_BZ, ST_LO, -1, ST_YS, ST_YZ};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            layer l;
            make_layer(&l, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            int64_t n = l.n;
            int32_t *lanes = malloc((size_t)((5 + np) * n) * sizeof *lanes);
            float (*f)[ST_N] = malloc((size_t)n * sizeof *f);
            int32_t (*z)[ST_N] = malloc((size_t)n * sizeof *z);
            uint8_t *skip = malloc((size_t)(l.rows * n));
            tail_tables(n, lanes, i8);
            for (int64_t c = 0; c < n; c++) {
                stage_params(c, f[c], z[c], i8);
                /* a_zero against the epilogue's y_zero Z (the fast tail's f32(y - a_zero) as the float
                 * r + f32(Z - a_zero), checked |Z - a_zero| <= 2^24): 2^24 away, so that y - a_zero is past
                 * 2^24 and rounded (taken: kind 1); 2^24 + 1 away (f32(Z - a_zero) would be rounded) and
                 * near INT32_MIN, wrapping (refused: one lane of some kind 0 vectors, whose other lanes
                 * all take the fast tails, so that only this check refuses them). With b's terms as large
                 * and of the other sign and y_zero against Z, so that the byte is y - b (+ 128): a rounding
                 * of either shows. */
                int kind = (int)(c / 16 % 3), lane = (int)(c % 16), which = (int)(c / 48 % 3);
                int far = kind == 1 && lane == 10 ? 1 : kind == 0 && lane == 9 && which ? which + 1 : 0;
                if (far) {
                    z[c][ST_AZ] = far == 1 ? lanes[2 * n + c] - (1 << 24) : far == 2 ? lanes[2 * n + c] + (1 << 24) + 1 : INT32_MIN + 3;
                    f[c][ST_AS] = f[c][ST_YS] = 1.0f;
                    f[c][ST_BS] = -1.0f;
                    f[c][ST_LO] = -INFINITY;
                    z[c][ST_BZ] = far == 1 ? -(1 << 24) + 50 : (1 << 24) - 50;
                    z[c][ST_YZ] = lanes[2 * n + c] + (far == 1 ? -50 : 51); /* bytes y - b (+ 128) */
                }
                for (int p = 0; p < np; p++) {
                    int k = slot[ps[p].param];
                    cr_assert(k >= 0, "qadd's parameter %d read as a table", ps[p].param);
                    if (ps[p].kind == 'i')
                        lanes[(5 + p) * n + c] = z[c][k];
                    else
                        memcpy(&lanes[(5 + p) * n + c], &f[c][k], 4);
                }
            }
            for (int64_t i = 0; i < l.rows * n; i++)
                skip[i] = (uint8_t)next();
            const int32_t *tabs[5 + QI_JOIN_MAX_PARAMS];
            for (int t = 0; t < 5 + np; t++)
                tabs[t] = lanes + t * n;
            for (int64_t i = 0; i < l.rows * n; i++) {
                int64_t c = i % n;
                uint8_t y = tail_want(lanes, n, c, l.acc[i], i8);
                int32_t a = i8 ? (int8_t)y : y, b = i8 ? (int8_t)skip[i] : skip[i];
                l.want[i] = qadd_oracle(a, b, f[c][ST_AS], z[c][ST_AZ], f[c][ST_BS], z[c][ST_BZ], f[c][ST_YS], z[c][ST_YZ],
                                        f[c][ST_LO], i8);
            }
            qr_iconv_ep_fn fused = qc_iconv_jit_ep(l.taps, l.k4, n, joined);
            cr_assert(fused);
            for (int split = 0; split < 1 + (n > 64); split++) {
                memset(l.got, 0xa5, (size_t)(l.rows * n) + 1);
                if (split) {
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 64, n, n, tabs, skip, n);
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, 64, n, tabs, skip, n);
                } else {
                    fused(l.got, n, l.a, l.taps, l.rows, l.w, l.init, l.k4, 0, n, n, tabs, skip, n);
                }
                for (int64_t i = 0; i < l.rows * n; i++)
                    cr_assert_eq(l.got[i], l.want[i],
                                 "%s joined%s, taps %lld k4 %lld n %lld: y[%lld][%lld] = %d, the oracle %d (skip %d)",
                                 i8 ? "i8" : "u8", split ? " (split at 64)" : "", (long long)l.taps, (long long)l.k4,
                                 (long long)n, (long long)(i / n), (long long)(i % n), l.got[i], l.want[i], skip[i]);
                cr_assert_eq(l.got[l.rows * n], 0xa5, "written past the last row");
            }
            free(skip);
            free(z);
            free(f);
            free(lanes);
            drop_layer(&l);
        }
    }
    qr_module_free(m);
}

/* A program the generator does not accept gets no kernel (the caller keeps phase 1). */
Test(vecmap, malformed_programs_get_no_kernel)
{
    if (!has_vnni())
        return;
    static const char *const bad[] = {
        "",                           /* empty */
        "acc;addi 0 1;satf.u8 1",     /* an operand not yet defined */
        "acc;cvtf 0",                 /* the last value is no byte */
        "tabf 0;satf.u8 0",           /* y does not depend on the accumulator */
        "acc;addf 0 0;satf.u8 1",     /* an i32 where an f32 belongs */
        "acc;nosuch 0;sati.u8 1",     /* an unknown opcode */
        "acc;sati.u8 0 junk",         /* trailing text */
        "tabi 99;acc;addi 0 1;sati.u8 2", /* a table past the limit */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_null(qc_iconv_jit_ep(1, 4, 16, bad[i]), "accepted '%s'", bad[i]);
    cr_expect_not_null(qc_iconv_jit_ep(1, 4, 16, "acc;sati.u8 0"), "the smallest program");
}

/* set_vector_epilogue gives the kernel just added its program; after a fn, or first, the module
 * is refused. */
static void dummy_fn(void) {}
static void ep_kernel(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k.nhwc", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->set_vector_epilogue(m, "acc;sati.u8 0");
    im->add_fn(m, "j", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
}
static void ep_fn(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->set_vector_epilogue(m, "acc;sati.u8 0");
}
static void ep_first(qrl_module *m, const qrl_imports *im)
{
    im->set_vector_epilogue(m, "acc;sati.u8 0");
}

Test(vecmap, registration)
{
    qr_error e;
    qrl_module *m = NULL;
    cr_assert_eq(qr_module_load(ep_kernel, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    cr_expect_str_eq(qr_module_fn(m, "k.nhwc")->vector_epilogue, "acc;sati.u8 0");
    cr_expect_null(qr_module_fn(m, "j")->vector_epilogue);
    qr_module_free(m);
    m = NULL;
    cr_expect_neq(qr_module_load(ep_fn, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
    cr_expect_neq(qr_module_load(ep_first, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
}
