/* Pointwise kernels (compiler/pointwise.h): which kernels the compiler proves
 * layout-free and registers so (qr_fn_desc.is_pointwise, set_pointwise,
 * qr_module_kernel_pointwise): the stdlib's through the bundled recipes'
 * modules, and small kernels written here, each pointwise or not by reading
 * its code (the expectations are derived by hand from the definition in
 * docs/language.md, "Pointwise kernels": element i of the output from element
 * i of the inputs and scalars alone). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "../../compiler/pointwise.h"
#include "../../compiler/reads.h"
#include "recipe.h"
#include "testutil.h"

TestSuite(pointwise);

typedef struct want {
    const char *kernel;
    int pointwise;
} want;

static qrl_module *compile_path(const char *rel)
{
    char err[1200];
    qrl_module *m = tu_compile(rel, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

static void expect(const qrl_module *m, const char *from, const want *w, int n)
{
    for (int i = 0; i < n; i++) {
        const qr_fn_desc *d = qr_module_fn(m, w[i].kernel);
        cr_assert(d && d->is_kernel == 1, "%s has no kernel %s", from, w[i].kernel);
        cr_expect_eq(d->is_pointwise, w[i].pointwise, "%s: %s is%s pointwise", from, w[i].kernel,
                     w[i].pointwise ? " not" : "");
        cr_expect_eq(qr_module_kernel_pointwise(m, w[i].kernel), w[i].pointwise, "%s", w[i].kernel);
    }
}

Test(pointwise, stdlib_kernels_of_the_onnx_recipe)
{
    static const want w[] = {
        {"qadd<u8>", 1},          {"qadd<i8>", 1},          {"qmul<u8>", 1},          {"qmul<i8>", 1},
        {"qact<u8>", 1},          {"qact<i8>", 1},          {"qmean_spatial<u8>", 0}, {"qmean_spatial<i8>", 0},
        {"qreduce_mean<u8>", 0},  {"qreduce_mean<i8>", 0},  {"qlinear<u8>", 0},       {"qlinear<i8>", 0},
        {"qlinear.tile<u8>", 0},  {"qlinear.tile<i8>", 0},
    };
    qrl_module *m = compile_path("recipes/int8.qrl");
    expect(m, "recipes/int8.qrl", w, (int)(sizeof w / sizeof w[0]));
    /* not a kernel, or no such thing */
    cr_expect_eq(qr_module_kernel_pointwise(m, "qadd"), 0, "a generic itself is not registered");
    cr_expect_eq(qr_module_kernel_pointwise(m, "no_such_kernel"), 0);
    qr_module_free(m);
}

Test(pointwise, stdlib_kernels_of_the_tflite_recipe)
{
    static const want w[] = {
        {"tfl_add_kernel", 1}, {"tfl_mul_kernel", 1}, {"tfl_linear", 0}, {"tfl_linear.tile", 0},
    };
    qrl_module *m = compile_path("recipes/int8-tflite.qrl");
    expect(m, "recipes/int8-tflite.qrl", w, (int)(sizeof w / sizeof w[0]));
    qr_module_free(m);
}

/* Each kernel's name says what it does; the expectations are by hand. */
static const char small_src[] =
    "fn at(x: tensor<i8>, k: i64) -> i32 { return i32(x[k]) }\n"
    "fn first(x: tensor<i8>) -> i32 { return i32(x[0]) }\n"
    "fn plus(v: i32, d: i32) -> i32 { return v + d }\n"
    "fn at_t<T: u8 | i8>(x: tensor<T>, k: i64) -> i32 { return i32(x[k]) }\n"
    /* y[i] = a[i] + 1 */
    "kernel plus_one(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(i32(a[i]) + 1) }\n"
    "}\n"
    /* the index through a fn, and scalars through another; a's count for the bound */
    "kernel plus_through_fns(a: tensor<i8>, d: i32, y: tensor<i8>) {\n"
    "  for i in 0 .. a.numel { y[i] = sat<i8>(plus(at(a, i), d)) }\n"
    "}\n"
    /* broadcast_index, and qadd's fast path on equal counts */
    "kernel both_paths(a: tensor<i8>, b: tensor<i8>, y: tensor<i8>) {\n"
    "  if a.numel == y.numel and b.numel == y.numel {\n"
    "    for i in 0 .. y.numel { y[i] = sat<i8>(i32(a[i]) + i32(b[i])) }\n"
    "    return\n"
    "  }\n"
    "  for i in 0 .. y.numel {\n"
    "    var s: i32 = i32(a[broadcast_index(a, y, i)])\n"
    "    for k in 0 .. 3 { s += i32(k) }\n"
    "    if s < 0 { continue }\n"
    "    y[i] = sat<i8>(s + i32(b[broadcast_index(b, y, i)]))\n"
    "  }\n"
    "}\n"
    /* a generic */
    "kernel twice<T: u8 | i8>(a: tensor<T>, s: f32[], y: tensor<T>) {\n"
    "  let k = s[0]\n"
    "  for i in 0 .. y.numel { y[i] = sat<T>(f32(a[i]) * 2.0 * k) }\n"
    "}\n"
    /* a generic fn, named arguments, a break out of an inner loop */
    "kernel generic_fn<T: u8 | i8>(a: tensor<T>, y: tensor<T>) {\n"
    "  for i in 0 .. y.numel {\n"
    "    var s: i32 = 0\n"
    "    for k in 0 .. 4 {\n"
    "      if k == 2 { break }\n"
    "      s += at_t(k = i, x = a)\n"
    "    }\n"
    "    y[i] = sat<T>(s)\n"
    "  }\n"
    "}\n"
    /* y[i] = a[y.numel - 1 - i] */
    "kernel reversed(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = a[y.numel - 1 - i] }\n"
    "}\n"
    /* y[j] = a[j] with j a var counted by hand */
    "kernel reassigned(a: tensor<i8>, y: tensor<i8>) {\n"
    "  var j: i64 = 0\n"
    "  for i in 0 .. y.numel {\n"
    "    y[j] = a[j]\n"
    "    j += 1\n"
    "  }\n"
    "}\n"
    /* the loop variable copied to a var that is then reassigned */
    "kernel copied_index(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel {\n"
    "    var k = i\n"
    "    k = y.numel - 1 - k\n"
    "    y[k] = a[k]\n"
    "  }\n"
    "}\n"
    /* x.dim(1) */
    "kernel reads_dim(x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(i32(x[i]) + i32(x.dim(1))) }\n"
    "}\n"
    /* a fn indexing a tensor at 0 */
    "kernel fn_reads_first(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(i32(a[i]) - first(a)) }\n"
    "}\n"
    /* a fn indexing a tensor at a value that is not the loop's */
    "kernel fn_reads_other(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(at(a, y.numel - 1 - i)) }\n"
    "}\n"
    /* the position itself as a value */
    "kernel index_as_value(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(i32(a[i]) + i32(i)) }\n"
    "}\n"
    /* a running sum: state from one element to the next */
    "kernel running_sum(a: tensor<i8>, y: tensor<i8>) {\n"
    "  var s: i32 = 0\n"
    "  for i in 0 .. y.numel {\n"
    "    s += i32(a[i])\n"
    "    y[i] = sat<i8>(s)\n"
    "  }\n"
    "}\n"
    /* every element from all of a (a loop over numel inside another) */
    "kernel nested(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel {\n"
    "    var s: i32 = 0\n"
    "    for k in 0 .. a.numel { s += i32(a[k]) }\n"
    "    y[i] = sat<i8>(s)\n"
    "  }\n"
    "}\n"
    /* stops at the first negative element */
    "kernel stops_early(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel {\n"
    "    if a[i] < 0 { break }\n"
    "    y[i] = a[i]\n"
    "  }\n"
    "}\n"
    /* numel as a number */
    "kernel numel_value(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(i32(a[i]) + i32(a.numel)) }\n"
    "}\n"
    /* a loop from 1 */
    "kernel from_one(a: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 1 .. y.numel { y[i] = a[i] }\n"
    "}\n"
    /* writes its array output */
    "kernel array_out(a: tensor<i8>, y: tensor<i8>, out: i32[]) {\n"
    "  for i in 0 .. y.numel { y[i] = a[i] }\n"
    "  out[0] = 1\n"
    "}\n";

static const want small_want[] = {
    {"plus_one", 1},     {"plus_through_fns", 1}, {"both_paths", 1},  {"twice<u8>", 1},      {"twice<i8>", 1},
    {"generic_fn<u8>", 1}, {"generic_fn<i8>", 1},
    {"reversed", 0},     {"reassigned", 0},       {"copied_index", 0}, {"reads_dim", 0},     {"fn_reads_first", 0},
    {"fn_reads_other", 0}, {"index_as_value", 0}, {"running_sum", 0}, {"nested", 0},         {"stops_early", 0},
    {"numel_value", 0},  {"from_one", 0},         {"array_out", 0},
};

/* The unit of small_src, checked (no error). */
static qc_unit *checked_small(char **dir)
{
    *dir = tu_tmpdir();
    char path[600], stdlib[600];
    snprintf(path, sizeof path, "%s/small.qrl", *dir);
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load_text(u, path, small_src, sizeof small_src - 1);
    if (!u->diags.errors)
        qc_check(u);
    if (u->diags.errors) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ql_diags_print(&u->diags, f);
        fclose(f);
        cr_assert_fail("small.qrl does not check:\n%s", buf);
    }
    return u;
}

Test(pointwise, small_kernels_registered)
{
    char *dir;
    qc_unit *u = checked_small(&dir);
    qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    cr_assert(m, "%s", u->diags.n ? u->diags.v[0].msg : "cannot compile");
    expect(m, "small.qrl", small_want, (int)(sizeof small_want / sizeof small_want[0]));
    cr_expect_eq(qr_module_kernel_pointwise(m, "plus"), 0, "a fn is not a kernel");
    qr_module_free(m);
    qc_unit_free(u);
    tu_rmdir(dir);
}

/* The analysis alone, on the checked items: a generic itself is not proven (its instances are). */
Test(pointwise, analysis_of_checked_items)
{
    char *dir;
    qc_unit *u = checked_small(&dir);
    for (size_t i = 0; i < sizeof small_want / sizeof small_want[0]; i++) {
        const qc_sym *k = qc_find_item(u, small_want[i].kernel);
        cr_assert(k, "%s", small_want[i].kernel);
        cr_expect_eq(qc_pointwise(k), small_want[i].pointwise, "%s", small_want[i].kernel);
    }
    const qc_sym *g = qc_find_item(u, "twice");
    cr_assert(g && g->kind == QC_SYM_GENERIC);
    cr_expect_eq(qc_pointwise(g), 0);
    cr_expect_eq(qc_pointwise(qc_find_item(u, "plus")), 0, "a fn");
    qc_unit_free(u);
    tu_rmdir(dir);
}

/* set_pointwise marks the kernel just added; after a fn, or first, the module is refused. */
static void dummy_fn(void) {}
static void pointwise_kernel(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_TENSOR, QR_I8);
    im->set_pointwise(m);
    im->add_fn(m, "j", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
}
static void pointwise_fn(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->set_pointwise(m);
}
static void pointwise_first(qrl_module *m, const qrl_imports *im)
{
    im->set_pointwise(m);
}

Test(pointwise, registration)
{
    cr_assert_eq(qr_recipe_imports()->abi, 31, "the import table changed: QR_RECIPE_ABI 31");
    qr_error e;
    qrl_module *m = NULL;
    cr_assert_eq(qr_module_load(pointwise_kernel, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    cr_expect_eq(qr_module_kernel_pointwise(m, "k"), 1);
    cr_expect_eq(qr_module_kernel_pointwise(m, "j"), 0);
    qr_module_free(m);
    m = NULL;
    cr_expect_neq(qr_module_load(pointwise_fn, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
    cr_expect_neq(qr_module_load(pointwise_first, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
}

/* Which tensor parameters a kernel touches the elements of (compiler/reads.h, qr_fn_desc.param_reads,
 * set_param_reads): x of each kernel below is read (or written) or taken for its type and shape
 * alone, as its code says (by hand: reading x[k], writing it, or handing it to a fn or built-in that
 * does, touches it; x.numel, x.rank, x.dim(k), broadcast_index's shapes and a fn that uses only
 * those do not). */
static const char reads_src[] =
    "fn count(t: tensor<i8>) -> i64 { return t.numel + t.rank + t.dim(0) }\n"
    "fn first(t: tensor<i8>) -> i32 { return i32(t[0]) }\n"
    "fn at(t: tensor<i8>, k: i64) -> i32 { return i32(t[k]) }\n"
    "fn pass_on(t: tensor<i8>, k: i64) -> i32 { return at(t, k) }\n"
    "fn shape_on(t: tensor<i8>) -> i64 { return count(t) }\n"
    /* qlinear's use: x for its type only */
    "kernel typed<T: u8 | i8>(acc: tensor<i32>, x: tensor<T>, y: tensor<T>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<T>(acc[i]) }\n"
    "}\n"
    /* its shape: fields, dim, broadcast_index, a fn (two deep) */
    "kernel shaped(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  let n = x.numel + x.rank + x.dim(0) + count(x) + shape_on(x)\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[broadcast_index(x, y, i)] + i32(n)) }\n"
    "}\n"
    /* its values: indexed, through a fn, two fns deep, by a named argument, written */
    "kernel indexed(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[i] + i32(x[x.numel - 1])) }\n"
    "}\n"
    "kernel through_fn(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[i] + first(x)) }\n"
    "}\n"
    "kernel two_deep(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[i] + pass_on(x, 0)) }\n"
    "}\n"
    "kernel named(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[i] + at(k = 0, t = x)) }\n"
    "}\n"
    "kernel written(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  x[0] = 1\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[i]) }\n"
    "}\n"
    /* its values as broadcast_index's index: the third argument is walked */
    "kernel index_of_index(acc: tensor<i32>, x: tensor<i8>, y: tensor<i8>) {\n"
    "  for i in 0 .. y.numel { y[i] = sat<i8>(acc[broadcast_index(acc, y, i64(x[i]))]) }\n"
    "}\n"
    /* qlinear's shape, in the element-wise form: x in a channel let */
    "kernel epilogue_reads<T: u8 | i8>(acc: tensor<i32>, x: tensor<T>, b: tensor<i32>, y: tensor<T>) {\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c { let bias = b[c % b.numel] + i32(x[x.numel - 1]) }\n"
    "    sat<T>(a + bias)\n"
    "  }\n"
    "}\n"
    "kernel epilogue_typed<T: u8 | i8>(acc: tensor<i32>, x: tensor<T>, b: tensor<i32>, y: tensor<T>) {\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c { let bias = b[c % b.numel] + i32(x.rank) }\n"
    "    sat<T>(a + bias)\n"
    "  }\n"
    "}\n";

typedef struct reads_want {
    const char *kernel;
    int x_read; /* parameter 1, x */
} reads_want;

static const reads_want reads_wants[] = {
    {"typed<u8>", 0},        {"typed<i8>", 0},         {"shaped", 0},         {"indexed", 1},
    {"through_fn", 1},       {"two_deep", 1},          {"named", 1},          {"written", 1},
    {"index_of_index", 1},   {"epilogue_reads<u8>", 1}, {"epilogue_reads.tile<u8>", 1},
    {"epilogue_reads.nhwc<i8>", 1}, {"epilogue_typed<u8>", 0}, {"epilogue_typed.tile<u8>", 0},
    {"epilogue_typed.nhwc<i8>", 0},
};

Test(pointwise, param_reads_of_small_kernels)
{
    char *dir = tu_tmpdir(), path[600], stdlib[600];
    snprintf(path, sizeof path, "%s/reads.qrl", dir);
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load_text(u, path, reads_src, sizeof reads_src - 1);
    if (!u->diags.errors)
        qc_check(u);
    cr_assert_eq(u->diags.errors, 0, "reads.qrl: %s", u->diags.n ? u->diags.v[0].msg : "");
    qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    cr_assert(m, "%s", u->diags.n ? u->diags.v[0].msg : "cannot compile");
    for (size_t i = 0; i < sizeof reads_wants / sizeof reads_wants[0]; i++) {
        const reads_want *w = &reads_wants[i];
        const qc_sym *s = qc_find_item(u, w->kernel);
        cr_assert(s, "%s", w->kernel);
        uint64_t mask = qc_param_reads(s);
        cr_expect_eq((int)(mask >> 1 & 1), w->x_read, "%s: x %sread", w->kernel, w->x_read ? "not " : "");
        cr_expect(mask & 1, "%s: acc is read", w->kernel);
        const qr_fn_desc *d = qr_module_fn(m, w->kernel);
        cr_assert(d && d->is_kernel == 1, "no kernel %s in the module", w->kernel);
        cr_expect_eq(d->param_reads, mask, "%s: registered %#llx, the analysis %#llx", w->kernel,
                     (unsigned long long)d->param_reads, (unsigned long long)mask);
        cr_expect_eq(qr_fn_reads_param(d, 1), w->x_read, "%s", w->kernel);
    }
    /* y is written (a touch); scalars and a generic itself are never "read" */
    cr_expect_eq(qc_param_reads(qc_find_item(u, "typed<u8>")), 5u, "acc and y, not x");
    cr_expect_eq(qc_param_reads(qc_find_item(u, "typed")), UINT64_MAX, "a generic: all");
    cr_expect_eq(qc_param_reads(qc_find_item(u, "first")), UINT64_MAX, "a fn: all");
    qr_module_free(m);
    qc_unit_free(u);
    tu_rmdir(dir);
}

/* The stdlib's epilogues take the convolution's input x (parameter 1) and weights w (4) for their
 * types alone, and read the accumulator (0) and the bias (7) and write y (11): in the kernel and in
 * the tile and channels-last forms that run fused to the convolution. */
Test(pointwise, param_reads_of_the_stdlib_epilogues)
{
    qrl_module *m = compile_path("recipes/int8.qrl");
    static const char *const names[] = {"qlinear<u8>", "qlinear<i8>", "qlinear.tile<u8>", "qlinear.nhwc<i8>"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const qr_fn_desc *d = qr_module_fn(m, names[i]);
        cr_assert(d && d->is_kernel == 1, "%s", names[i]);
        /* qlinear's 14 (the tile forms' own block parameters and tables come after them) */
        cr_expect_eq(d->param_reads & 0x3fff, (1u << 0) | (1u << 7) | (1u << 11), "%s: %#llx", names[i],
                     (unsigned long long)d->param_reads);
    }
    qr_module_free(m);
}

/* set_param_reads marks the kernel just added; a kernel without it reads every parameter; after a
 * fn, or first, the module is refused. */
static void reads_kernel(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_TENSOR, QR_I8);
    im->add_fn_param(m, "y", QR_PARAM_TENSOR, QR_I8);
    im->set_param_reads(m, 2);
    im->add_fn(m, "j", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_TENSOR, QR_I8);
}
static void reads_fn(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->set_param_reads(m, 0);
}
static void reads_first(qrl_module *m, const qrl_imports *im)
{
    im->set_param_reads(m, 0);
}

Test(pointwise, param_reads_registration)
{
    qr_error e;
    qrl_module *m = NULL;
    cr_assert_eq(qr_module_load(reads_kernel, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    const qr_fn_desc *k = qr_module_fn(m, "k"), *j = qr_module_fn(m, "j");
    cr_assert(k && j);
    cr_expect_eq(qr_fn_reads_param(k, 0), 0);
    cr_expect_eq(qr_fn_reads_param(k, 1), 1);
    cr_expect_eq(qr_fn_reads_param(j, 0), 1, "never registered: read");
    qr_module_free(m);
    m = NULL;
    cr_expect_neq(qr_module_load(reads_fn, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
    cr_expect_neq(qr_module_load(reads_first, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
}

/* What the fill of a channels-last kernel's tables reads (compiler/reads.h qc_fill_reads,
 * qr_fn_desc.fill_uses/fill_elems, set_fill_reads), so that the runtime keeps the tables from one run
 * of a node to the next while those values stay the same (qr_fill_key; quantizer/intgraph.c). By
 * hand from each kernel's code: `scaled`'s channel lets and layer let name s, w, b, d and z (b's
 * elements), its value reads z too; acc, x and y are not named there. */
static const char fill_src[] =
    /* qlinear's shape: a multiplier per channel from scalars and an array, a bias from a tensor */
    "kernel scaled<T: u8 | i8>(acc: tensor<i32>, x: tensor<T>, s: f32, w: f32[], b: tensor<i32>, d: f32, z: i32,\n"
    "                          y: tensor<T>) {\n"
    "  let top = f32(z) + 100.0\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c {\n"
    "      let m = s * w[c % len(w)] / d\n"
    "      let bias = b[c % b.numel]\n"
    "    }\n"
    "    sat<T>(min(round_even(f32(a + bias) * m) + f32(z), top))\n"
    "  }\n"
    "}\n"
    /* x's shape alone in a channel let; x's elements in another */
    "kernel shape_let(acc: tensor<i32>, x: tensor<i8>, b: tensor<i32>, y: tensor<i8>) {\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c { let bias = b[c % b.numel] + i32(x.rank) }\n"
    "    sat<i8>(a + bias)\n"
    "  }\n"
    "}\n"
    "kernel element_let(acc: tensor<i32>, x: tensor<i8>, b: tensor<i32>, y: tensor<i8>) {\n"
    "  elementwise a in acc along 1 -> y {\n"
    "    channel c { let bias = b[c % b.numel] + i32(x[0]) }\n"
    "    sat<i8>(a + bias)\n"
    "  }\n"
    "}\n";

/* The block's six, ew.fill, as a channels-last kernel numbers them after the kernel's own n. */
static uint64_t block_bits(int n)
{
    return (uint64_t)1 << (n + QR_TILE_C0) | (uint64_t)1 << (n + QR_TILE_COLS) | (uint64_t)1 << (n + QR_TILE_NPARAMS);
}

static qc_unit *fill_unit(char **dir, qrl_module **m)
{
    char path[600], stdlib[600];
    *dir = tu_tmpdir();
    snprintf(path, sizeof path, "%s/fill.qrl", *dir);
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load_text(u, path, fill_src, sizeof fill_src - 1);
    if (!u->diags.errors)
        qc_check(u);
    cr_assert_eq(u->diags.errors, 0, "fill.qrl: %s", u->diags.n ? u->diags.v[0].msg : "");
    *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    cr_assert(*m, "%s", u->diags.n ? u->diags.v[0].msg : "cannot compile");
    return u;
}

Test(pointwise, fill_reads_of_channels_last_kernels)
{
    char *dir;
    qrl_module *m;
    qc_unit *u = fill_unit(&dir, &m);
    static const struct {
        const char *kernel;
        int known, n;
        uint64_t uses, elems;
    } w[] = {
        /* s 2, w 3, b 4, d 5, z 6 (the layer let and the value's uniform), b's elements */
        {"scaled.nhwc<u8>", 1, 8, 0x7c, 1u << 4},
        {"scaled.nhwc<i8>", 1, 8, 0x7c, 1u << 4},
        /* x (1) for its shape, b (2) */
        {"shape_let.nhwc", 1, 4, 0x6, 1u << 2},
        {"element_let.nhwc", 1, 4, 0x6, 0x6},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        uint64_t uses, elems;
        const qc_sym *s = qc_find_item(u, w[i].kernel);
        cr_assert(s, "%s", w[i].kernel);
        int known = qc_fill_reads(s, &uses, &elems);
        cr_expect_eq(known, w[i].known, "%s", w[i].kernel);
        uint64_t want_uses = w[i].known ? w[i].uses | block_bits(w[i].n) : 0;
        cr_expect_eq(uses, want_uses, "%s: uses %#llx, not %#llx", w[i].kernel, (unsigned long long)uses,
                     (unsigned long long)want_uses);
        cr_expect_eq(elems, w[i].elems, "%s: elems %#llx", w[i].kernel, (unsigned long long)elems);
        const qr_fn_desc *d = qr_module_fn(m, w[i].kernel);
        cr_assert(d, "%s", w[i].kernel);
        cr_expect_eq(d->fill_known, known, "%s: registered", w[i].kernel);
        cr_expect_eq(d->fill_uses, uses, "%s", w[i].kernel);
        cr_expect_eq(d->fill_elems, elems, "%s", w[i].kernel);
    }
    /* the kernels and their tile forms are no channels-last kernels */
    uint64_t uses, elems;
    cr_expect_eq(qc_fill_reads(qc_find_item(u, "scaled<u8>"), &uses, &elems), 0);
    cr_expect_eq(qc_fill_reads(qc_find_item(u, "scaled.tile<u8>"), &uses, &elems), 0);
    qr_module_free(m);
    qc_unit_free(u);
    tu_rmdir(dir);
}

/* The stdlib's qlinear forms: x_scale 2, w_scale 5, b 7 (its elements), lo 9, hi 10, y_scale 12,
 * y_zero 13; not acc, x, w, w_zero, axis or y. */
Test(pointwise, fill_reads_of_the_stdlib_epilogue)
{
    qrl_module *m = compile_path("recipes/int8.qrl");
    static const char *const names[] = {"qlinear.nhwc<u8>", "qlinear.nhwc<i8>"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const qr_fn_desc *d = qr_module_fn(m, names[i]);
        cr_assert(d && d->is_kernel == 1, "%s", names[i]);
        cr_expect_eq(d->fill_known, 1, "%s", names[i]);
        uint64_t want = 1u << 2 | 1u << 5 | 1u << 7 | 1u << 9 | 1u << 10 | 1u << 12 | 1u << 13 | block_bits(14);
        cr_expect_eq(d->fill_uses, want, "%s: %#llx, not %#llx", names[i], (unsigned long long)d->fill_uses,
                     (unsigned long long)want);
        cr_expect_eq(d->fill_elems, 1u << 7, "%s", names[i]);
    }
    qr_module_free(m);
}

/* One channels-last call's arguments: scaled's eight, the block's six, ew.fill and the tables. */
typedef struct fill_call {
    qrl_tview acc, x, b, y, tabs[8];
    float s, d, w[8];
    int32_t z, bias[128];
    int8_t xd[4];
    qrl_array wa;
    int64_t six[QR_TILE_NPARAMS], fill, tab[8][128];
    void *args[32];
} fill_call;

static void fill_call_init(fill_call *f, int64_t m, int nw, int tables)
{
    memset(f, 0, sizeof *f);
    f->acc = (qrl_tview){.data = NULL, .numel = 0, .rank = 1, .dims = {0}};
    f->x = (qrl_tview){.data = f->xd, .numel = 4, .rank = 2, .dims = {1, 4}};
    f->y = (qrl_tview){.data = NULL, .numel = 0, .rank = 1, .dims = {0}};
    f->b = (qrl_tview){.data = f->bias, .numel = m, .rank = 1, .dims = {m}};
    f->wa = (qrl_array){f->w, nw};
    f->six[QR_TILE_COLS] = m;
    f->fill = 1;
    void *a[] = {&f->acc, &f->x, &f->s, &f->wa, &f->b, &f->d, &f->z, &f->y};
    for (int i = 0; i < 8; i++)
        f->args[i] = a[i];
    for (int i = 0; i < QR_TILE_NPARAMS; i++)
        f->args[8 + i] = &f->six[i];
    f->args[8 + QR_TILE_NPARAMS] = &f->fill;
    for (int i = 0; i < tables; i++) {
        f->tabs[i] = (qrl_tview){.data = f->tab[i], .numel = m, .rank = 1, .dims = {m}};
        f->args[8 + QR_TILE_NPARAMS + 1 + i] = &f->tabs[i];
    }
}

/* Table 0 (m, an f32's bits) and 1 (bias) of channel c against the definition, in C's f32. */
static void expect_tables(const fill_call *f, int64_t m, const char *what)
{
    for (int64_t c = 0; c < m; c++) {
        float mul = f->s * f->w[c % f->wa.len] / f->d;
        uint32_t bits;
        memcpy(&bits, &mul, 4);
        uint32_t got = (uint32_t)f->tab[0][c];
        float gotf;
        memcpy(&gotf, &got, 4);
        cr_expect_eq(got, bits, "%s: channel %lld's multiplier %a, not %a", what, (long long)c, (double)gotf, (double)mul);
        cr_expect_eq(f->tab[1][c], (int64_t)f->bias[c % f->b.numel], "%s: channel %lld's bias", what, (long long)c);
    }
}

/* Kept tables as quantizer/intgraph.c keeps them across runs of a node: the key of what the fill
 * read, compared on each run, the fill run again when it differs. The scalars change between runs of
 * the same compiled kernel, an array's and a tensor's elements change in place; ragged channel
 * counts (a w of 3 over 17 channels), both signs of every value, u8 and i8 forms. */
Test(pointwise, kept_tables_follow_what_the_fill_reads)
{
    char *dir;
    qrl_module *mod;
    qc_unit *u = fill_unit(&dir, &mod);
    static const char *const forms[] = {"scaled<u8>", "scaled<i8>"};
    static const int64_t counts[] = {17, 5, 100};
    for (int fi = 0; fi < 2; fi++)
        for (int ci = 0; ci < 3; ci++) {
            const qr_fn_desc *k = qr_module_fn(mod, forms[fi]);
            int tables = -1;
            const qr_fn_desc *nh = k ? qr_module_nhwc(mod, k, &tables) : NULL;
            cr_assert(nh && tables >= 2 && tables <= 8, "%s: tables %d", forms[fi], tables);
            int64_t m = counts[ci];
            static fill_call f;
            fill_call_init(&f, m, 3, tables);
            f.s = 0.5f, f.d = 0.03f, f.z = -7;
            f.w[0] = 0.011f, f.w[1] = -0.027f, f.w[2] = 0.0043f;
            for (int64_t c = 0; c < m; c++)
                f.bias[c] = (int32_t)((c * 7919) % 2001) - 1000;
            unsigned char key[4096];
            int same;
            /* the first run: nothing kept; fill, then keep its key */
            int64_t len = qr_fill_key(nh, f.args, 0, NULL, 0, NULL);
            cr_assert(len > 0 && len <= (int64_t)sizeof key, "%lld", (long long)len);
            qrl_rt rt;
            qr_rt_init(&rt);
            nh->call(&rt, f.args);
            cr_assert_eq(qr_fill_key(nh, f.args, 0, key, len, NULL), len);
            expect_tables(&f, m, "first run");
            /* the same values: the same key, nothing to do */
            cr_expect_eq(qr_fill_key(nh, f.args, 0, key, len, &same), len);
            cr_expect_eq(same, 1, "%s, %lld channels: the same values", forms[fi], (long long)m);
            /* what the fill does not read (x's elements, the output, the accumulator) */
            f.xd[0] = 99;
            cr_expect_eq(qr_fill_key(nh, f.args, 0, key, len, &same), len);
            cr_expect_eq(same, 1, "x is not read by the fill");
            /* each value it reads, changed alone: another key; the tables made again are the new ones */
            for (int change = 0; change < 6; change++) {
                switch (change) {
                case 0: f.s = -0.25f; break;         /* a scalar of the channel lets */
                case 1: f.d = 0.5f; break;
                case 2: f.w[1] = 0.019f; break;      /* an array's element, in place */
                case 3: f.bias[m - 1] = 12345; break; /* a tensor's element, in place */
                case 4: f.z = 3; break;              /* the layer let's and the value's */
                case 5: f.wa.len = 2; break;         /* an array's length */
                }
                /* (a shorter array: a shorter key) */
                cr_expect_eq(qr_fill_key(nh, f.args, 0, key, len, &same), change == 5 ? len - 4 : len);
                cr_expect_eq(same, 0, "%s, %lld channels: change %d kept the old tables", forms[fi], (long long)m, change);
                for (int i = 0; i < tables; i++)
                    memset(f.tab[i], 0xA5, sizeof f.tab[i]);
                qr_rt_init(&rt);
                nh->call(&rt, f.args);
                len = qr_fill_key(nh, f.args, 0, key, sizeof key, NULL);
                char what[64];
                snprintf(what, sizeof what, "%s, %lld channels, change %d", forms[fi], (long long)m, change);
                expect_tables(&f, m, what);
            }
            /* a tensor said fixed (b: bit 4) is keyed by its address: elements written in place then
             * go unseen, which is why only values the same on every run are said fixed */
            cr_assert_eq(qr_fill_key(nh, f.args, 1u << 4, key, sizeof key, NULL), len - 4 * m);
            f.bias[0] = -f.bias[0] - 1;
            cr_expect_eq(qr_fill_key(nh, f.args, 1u << 4, key, len - 4 * m, &same), len - 4 * m);
            cr_expect_eq(same, 1);
            int32_t other[128];
            f.b.data = other;
            cr_expect_eq(qr_fill_key(nh, f.args, 1u << 4, key, len - 4 * m, &same), len - 4 * m);
            cr_expect_eq(same, 0, "another address");
        }
    qr_module_free(mod);
    qc_unit_free(u);
    tu_rmdir(dir);
}

/* set_fill_reads marks the kernel just added; after a fn, or first, the module is refused. */
static void fill_kernel(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "s", QR_PARAM_SCALAR, QR_F32);
    im->set_fill_reads(m, 1, 0);
    im->add_fn(m, "j", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
}
static void fill_fn(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->set_fill_reads(m, 0, 0);
}
static void fill_first(qrl_module *m, const qrl_imports *im)
{
    im->set_fill_reads(m, 0, 0);
}

Test(pointwise, fill_reads_registration)
{
    qr_error e;
    qrl_module *m = NULL;
    cr_assert_eq(qr_module_load(fill_kernel, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    const qr_fn_desc *k = qr_module_fn(m, "k"), *j = qr_module_fn(m, "j");
    cr_assert(k && j);
    cr_expect_eq(k->fill_known, 1);
    cr_expect_eq(k->fill_uses, 1u);
    cr_expect_eq(j->fill_known, 0, "never registered: not known");
    float s = 2;
    void *args[1] = {&s};
    unsigned char key[8];
    cr_expect_eq(qr_fill_key(k, args, 0, key, sizeof key, NULL), 4, "the scalar's four bytes");
    cr_expect_eq(qr_fill_key(j, args, 0, key, sizeof key, NULL), -1);
    qr_module_free(m);
    m = NULL;
    cr_expect_neq(qr_module_load(fill_fn, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
    cr_expect_neq(qr_module_load(fill_first, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK);
    cr_expect_null(m);
}
