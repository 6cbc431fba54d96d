/* Out of memory is an error value, never an abort: every entry point that builds a graph
 * (import, clone, the optimizing passes, the opset upgrade, quantizing, the QDQ export)
 * is run with an allocation failing (qr_arena_fail_nth: arenas' records and the graph's own
 * arrays) at every place the entry point allocates; each failed run must return the error
 * "out of memory" without crashing, and (under ASan, `make test-asan`) without a leak or a read
 * of freed memory. The front end's parse and check likewise, with the AST arena's allocations
 * failing (ql_arena_fail_nth).
 *
 * A place is the call path of an allocation (SITE_FRAMES return addresses): one run that fails
 * nothing records the path of each allocation (qr_arena_on_count), then the first allocation of
 * each path fails, one run each. Failing every allocation, the 1st, 2nd, 3rd, ... (set
 * QRL_TEST_OOM_EVERY=1), fails the same places many times over: aciq.qrl's check alone makes
 * over 26000 allocations at fewer than 700 paths, each run parsing the stdlib again. */
#include <criterion/criterion.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "graph.h"
#include "onnx_export.h"
#include "onnx_import.h"
#include "passes.h"
#include "quantize.h"
#include "recipe.h"
#include "testutil.h"

#include "../../compiler/check.h"
#include "../../compiler/unit.h"

TestSuite(oom, .timeout = 600);

/* Under ASan the runs must leave no leak: checked here, as LeakSanitizer's report at exit
 * does not change a Criterion worker's status. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define ASSERT_NO_LEAKS(what) cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "%s: leaks (LeakSanitizer's report above)", what)
#else
#define ASSERT_NO_LEAKS(what) ((void)(what))
#endif

typedef qr_status (*attempt_fn)(void *user, qr_error *e);

/* Runs f with allocation n failing; 1 when the run made that allocation (it must then fail with
 * "out of memory"), 0 when it made fewer (it must then succeed). */
static int fail_at(long (*fail_nth)(long), const char *what, attempt_fn f, void *user, long n)
{
    qr_error e = {{0}};
    fail_nth(n);
    qr_status st = f(user, &e);
    long left = fail_nth(0);
    if (left > 0) {
        cr_assert_eq(st, QR_OK, "%s: no allocation failed, yet: %s", what, e.msg);
        return 0;
    }
    cr_assert_neq(st, QR_OK, "%s: allocation %ld failed, and it succeeded anyway", what, n);
    cr_assert(strstr(e.msg, "out of memory"), "%s: allocation %ld failed: %s", what, n, e.msg);
    return 1;
}

/* The call path of each allocation of the recording run, hashed; frame 0 is count_site. */
enum { SITE_FRAMES = 6, MAX_COUNTED = 1 << 20 };
static uint64_t *site_of;
static _Atomic long counted;

static void count_site(void)
{
    void *bt[SITE_FRAMES + 1];
    int n = backtrace(bt, SITE_FRAMES + 1);
    uint64_t h = 1469598103934665603u; /* FNV-1a over the return addresses */
    for (int i = 1; i < n; i++)
        h = (h ^ (uint64_t)(uintptr_t)bt[i]) * 1099511628211u;
    long k = atomic_fetch_add(&counted, 1);
    if (k < MAX_COUNTED)
        site_of[k] = h;
}

/* Fails each place f allocates at (its first allocation there), or with QRL_TEST_OOM_EVERY set,
 * allocation n = 1, 2, ... until a run makes no more than n - 1; returns the allocations f makes. */
static long fail_each_of(long (*fail_nth)(long), void (*on_count)(void (*)(void)), const char *what, attempt_fn f,
                         void *user)
{
    const char *every = getenv("QRL_TEST_OOM_EVERY");
    if (every && *every && strcmp(every, "0")) {
        long n = 1;
        while (fail_at(fail_nth, what, f, user, n))
            n++;
        ASSERT_NO_LEAKS(what);
        cr_log_info("%s: %ld allocations, each failure an error", what, n - 1);
        return n - 1;
    }
    qr_error e = {{0}};
    cr_assert_eq(f(user, &e), QR_OK, "%s: %s", what, e.msg); /* what a first run does once stays out */
    site_of = calloc(MAX_COUNTED, sizeof *site_of);
    cr_assert(site_of);
    void *warm[2];
    backtrace(warm, 2); /* loads libgcc's unwinder before counting */
    atomic_store(&counted, 0);
    fail_nth(0);
    on_count(count_site);
    qr_status st = f(user, &e);
    on_count(NULL);
    cr_assert_eq(st, QR_OK, "%s: %s", what, e.msg);
    long total = atomic_load(&counted);
    cr_assert_lt(total, MAX_COUNTED, "%s", what);
    /* the first allocation of each path, in order (an open-addressing set of the paths seen) */
    long cap = 1;
    while (cap < 2 * total + 2)
        cap *= 2;
    uint64_t *seen = calloc((size_t)cap, sizeof *seen);
    cr_assert(seen);
    long places = 0, made = 0;
    for (long n = 1; n <= total; n++) {
        uint64_t h = site_of[n - 1] ? site_of[n - 1] : 1;
        long k = (long)(h & (uint64_t)(cap - 1));
        while (seen[k] && seen[k] != h)
            k = (k + 1) & (cap - 1);
        if (seen[k])
            continue;
        seen[k] = h;
        places++;
        made += fail_at(fail_nth, what, f, user, n);
    }
    free(seen);
    free(site_of);
    site_of = NULL;
    ASSERT_NO_LEAKS(what);
    cr_log_info("%s: %ld allocations at %ld places, a failure at each an error (%ld runs reached it)", what, total,
                places, made);
    return total;
}

static long fail_each(const char *what, attempt_fn f, void *user)
{
    return fail_each_of(qr_arena_fail_nth, qr_arena_on_count, what, f, user);
}

static char model_path[600];

static const char *fmnist(void)
{
    snprintf(model_path, sizeof model_path, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    return model_path;
}

static qr_graph *load_fmnist(void)
{
    qr_graph *g;
    qr_error e;
    cr_assert_eq(qr_onnx_load(fmnist(), &g, &e), QR_OK, "%s", e.msg);
    return g;
}

static qr_status import(void *user, qr_error *e)
{
    (void)user;
    qr_graph *g = NULL;
    qr_status st = qr_onnx_load(fmnist(), &g, e);
    if (st == QR_OK)
        cr_assert(g && g->n_nodes > 0 && !qr_graph_oom(g));
    else
        cr_assert_null(g);
    qr_graph_free(g);
    return st;
}

Test(oom, import)
{
    cr_assert_gt(fail_each("import", import, NULL), 50);
}

static qr_status clone_optimize(void *user, qr_error *e)
{
    qr_graph *c = qr_graph_clone(user);
    if (!c)
        return qr_errorf(e, "out of memory (clone)");
    qr_status st = qr_graph_optimize(c, e);
    qr_graph_free(c);
    return st;
}

Test(oom, clone_and_optimize)
{
    qr_graph *g = load_fmnist();
    cr_assert_gt(fail_each("clone and optimize", clone_optimize, g), 50);
    qr_graph_free(g);
}

/* Conv -> BatchNormalization and Gemm -> BatchNormalization, which the optimizer folds into new
 * constants; a QuantizeLinear/DequantizeLinear pair it annotates with qparams. */
static qr_graph *foldable(void)
{
    qr_graph *g = qr_graph_new();
    g->opset = 13;
    float w[2 * 1 * 3 * 3], one[2] = {1, 1}, zero[2] = {0, 0}, wg[6 * 2], sc[1] = {0.5f};
    for (int i = 0; i < 18; i++)
        w[i] = (float)i / 9 - 1;
    for (int i = 0; i < 12; i++)
        wg[i] = (float)i / 6 - 1;
    const int64_t xd[] = {1, 1, 4, 4}, wd[] = {2, 1, 3, 3}, cd[] = {2}, gd[] = {1, 6}, wgd[] = {6, 2}, sd[] = {1};
    qr_value *x = tu_input(g, "x", 4, xd);
    qr_value *in[5] = {x, tu_const_f32(g, "w", 4, wd, w)};
    qr_node *conv = tu_node(g, "Conv", "conv", 2, in, 1);
    qr_value *bn_in[5] = {conv->out[0], tu_const_f32(g, "s", 1, cd, one), tu_const_f32(g, "b", 1, cd, zero),
                          tu_const_f32(g, "m", 1, cd, zero), tu_const_f32(g, "v", 1, cd, one)};
    tu_output(g, tu_node(g, "BatchNormalization", "bn", 5, bn_in, 1)->out[0]);
    qr_value *gin[2] = {tu_input(g, "a", 2, gd), tu_const_f32(g, "wg", 2, wgd, wg)};
    qr_node *gemm = tu_node(g, "Gemm", "gemm", 2, gin, 1);
    tu_attr_float(g, gemm, "alpha", 2.f);
    qr_value *gbn[5] = {gemm->out[0], bn_in[1], bn_in[2], bn_in[3], bn_in[4]};
    qr_node *bn2 = tu_node(g, "BatchNormalization", "bn2", 5, gbn, 1);
    qr_value *q_in[2] = {bn2->out[0], tu_const_f32(g, "qs", 1, sd, sc)};
    qr_node *q = tu_node(g, "QuantizeLinear", "q", 2, q_in, 1);
    qr_value *dq_in[2] = {q->out[0], q_in[1]};
    tu_output(g, tu_node(g, "DequantizeLinear", "dq", 2, dq_in, 1)->out[0]);
    return g;
}

Test(oom, fold_batchnorm)
{
    qr_graph *g = foldable();
    qr_error e;
    qr_graph *c = qr_graph_clone(g);
    cr_assert_eq(qr_graph_optimize(c, &e), QR_OK, "%s", e.msg);
    int bn = 0;
    for (int i = 0; i < c->n_nodes; i++)
        bn += !strcmp(c->nodes[i]->op, "BatchNormalization");
    cr_assert_eq(bn, 0, "the test graph's BatchNormalizations were not folded");
    qr_graph_free(c);
    fail_each("fold BatchNormalization", clone_optimize, g);
    qr_graph_free(g);
}

/* Old-opset nodes each rewrite of the upgrade touches: Softmax-11 on its coerced 2-D form
 * (Flatten, Shape, Reshape), Resize-10 scaling up and down (two Resizes), PRelu-6 with a
 * per-channel slope (Unsqueeze), Clip-6 and Slice-9 (attributes to constant inputs). */
static qr_graph *old_opset(void)
{
    qr_graph *g = qr_graph_new();
    g->opset = 9;
    const int64_t d4[] = {2, 3, 4, 6}, d1[] = {4}, c1[] = {3};
    float scales[4] = {1, 1, 2, 0.5f}, slope[3] = {0.1f, 0.2f, 0.3f};
    qr_value *x = tu_input(g, "x", 4, d4);
    x->t.dims[0] = -1; /* the Softmax's Shape node: a dim known only at run time */
    qr_node *sm = tu_node(g, "Softmax", "sm", 1, &x, 1);
    sm->opset = 11;
    tu_output(g, sm->out[0]);
    qr_value *rin[2] = {x, tu_const_f32(g, "scales", 1, d1, scales)};
    qr_node *rs = tu_node(g, "Resize", "rs", 2, rin, 1);
    rs->opset = 10;
    tu_output(g, rs->out[0]);
    qr_value *pin[2] = {x, tu_const_f32(g, "slope", 1, c1, slope)};
    qr_node *pr = tu_node(g, "PRelu", "pr", 2, pin, 1);
    pr->opset = 6;
    tu_output(g, pr->out[0]);
    qr_node *cl = tu_node(g, "Clip", "cl", 1, &x, 1);
    cl->opset = 6;
    tu_attr_float(g, cl, "min", -0.5f);
    tu_output(g, cl->out[0]);
    qr_node *sl = tu_node(g, "Slice", "sl", 1, &x, 1);
    tu_attr_ints(g, sl, "starts", 1, (int64_t[]){1});
    tu_attr_ints(g, sl, "ends", 1, (int64_t[]){3});
    tu_attr_ints(g, sl, "axes", 1, (int64_t[]){2});
    tu_output(g, sl->out[0]);
    return g;
}

static qr_status upgrade(void *user, qr_error *e)
{
    qr_graph *u = qr_graph_upgraded(user, 13, e);
    if (u) {
        for (int i = 0; i < u->n_nodes; i++)
            cr_assert(u->nodes[i]->dead || u->nodes[i]->opset == 13, "node '%s' not upgraded", u->nodes[i]->name);
    }
    qr_graph_free(u);
    return u ? QR_OK : QR_ERR;
}

Test(oom, opset_upgrade)
{
    qr_graph *g = old_opset();
    cr_assert_gt(fail_each("opset upgrade", upgrade, g), 50);
    qr_graph_free(g);
}

typedef struct save_case {
    const qr_graph *g;
    char *dir;
} save_case;

static qr_status save(void *user, qr_error *e)
{
    save_case *c = user;
    char path[700];
    snprintf(path, sizeof path, "%s/out.onnx", c->dir);
    remove(path);
    qr_status st = qr_onnx_save(c->g, path, e);
    cr_assert_eq(tu_file_exists(path), st == QR_OK, "%s: %s", path, st == QR_OK ? "missing" : "left behind");
    return st;
}

Test(oom, export)
{
    save_case c = {load_fmnist(), tu_tmpdir()};
    cr_assert_gt(fail_each("export", save, &c), 50);
    qr_graph_free((qr_graph *)c.g);
    tu_rmdir(c.dir);
}

typedef struct quant_case {
    const qr_graph *g;
    qr_tensor calib;
    qrl_module *m;
} quant_case;

static qr_status quantize(void *user, qr_error *e)
{
    quant_case *c = user;
    qr_quant_opts o = {.module = c->m, .batch = 8};
    qr_quantized *q = NULL;
    qr_status st = qr_quantize(c->g, &c->calib, &o, &q, e);
    cr_assert_eq(q != NULL, st == QR_OK);
    qr_quantized_free(q);
    return st;
}

/* The simulated graph, the QDQ graph and the integer graph, built with each allocation failing. */
static void quantize_with(const char *recipe)
{
    char err[512] = "";
    quant_case c = {.g = load_fmnist()};
    qr_error e;
    cr_assert_eq(qr_graph_optimize((qr_graph *)c.g, &e), QR_OK, "%s", e.msg);
    cr_assert(c.m = tu_compile(recipe, err, sizeof err), "%s", err);
    c.calib = (qr_tensor){.dtype = QR_F32, .ndim = 4, .dims = {8, 1, 28, 28}};
    cr_assert_eq(qr_tensor_alloc(&c.calib, &e), QR_OK);
    srand(1);
    for (int64_t i = 0; i < qr_tensor_numel(&c.calib); i++)
        ((float *)c.calib.data)[i] = (float)rand() / RAND_MAX;
    cr_assert_gt(fail_each(recipe, quantize, &c), 50);
    qr_tensor_free(&c.calib);
    qr_module_free(c.m);
    qr_graph_free((qr_graph *)c.g);
}

Test(oom, quantize, .timeout = 900)
{
    quantize_with("recipes/int8.qrl");
}

/* Convs quantized at run time: their export as ConvInteger, the ranges the reports show. */
Test(oom, quantize_dynamic, .timeout = 900)
{
    quantize_with("recipes/int8-dynamic-tensor.qrl");
}

/* ---- the front end: parse and check a recipe with its imports */

static qr_status front(void *user, qr_error *e)
{
    char path[600], stdlib[600];
    snprintf(path, sizeof path, "%s/%s", tu_root(), (const char *)user);
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    cr_assert(u);
    qc_file *f = qc_unit_load(u, path);
    if (!u->diags.errors)
        qc_check(u);
    qr_status st = u->diags.errors ? qr_errorf(e, "%s", u->diags.v[u->diags.n - 1].msg) : QR_OK;
    cr_assert(st != QR_OK || (f && f->ast), "%s: no AST and no error", path);
    qc_unit_free(u);
    return st;
}

Test(oom, parse_and_check)
{
    cr_assert_gt(fail_each_of(ql_arena_fail_nth, ql_arena_on_count, "parse and check meanstd.qrl", front,
                              "examples/recipes/meanstd.qrl"),
                 200);
    cr_assert_gt(fail_each_of(ql_arena_fail_nth, ql_arena_on_count, "parse and check aciq.qrl", front,
                              "examples/recipes/aciq.qrl"),
                 200);
}
