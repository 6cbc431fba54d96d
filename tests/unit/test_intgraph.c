/* The integer graph a recipe lowers to (quantizer/intgraph.c), on a model that
 * uses every op the stdlib quantizes (tools/make_zoo_model.py, made at test
 * time): what is lowered how, its structure against a golden file (reviewed by hand), and its
 * outputs against ONNX Runtime on the QDQ export and on fp32. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "exec.h"
#include "intgraph.h"
#include "onnx_export.h"
#include "onnx_import.h"
#include "op.h"
#include "passes.h"
#include "quantize.h"
#include "recipe.h"
#include "tensor_io.h"
#include "../../compiler/iconv_jit.h"
#include "ops/igemm.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/make_zoo_model.py %s", tu_root(), dir);
    int rc = tu_run(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(intgraph, .init = setup, .fini = teardown, .timeout = 300);

static void load(const char *name, qr_graph **g, qr_tensor *t)
{
    char path[1024];
    qr_error e;
    if (g) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        cr_assert_eq(qr_onnx_load(path, g, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_graph_optimize(*g, &e), QR_OK, "%s", e.msg);
    } else {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        cr_assert_eq(qr_npy_read(path, t, &e), QR_OK, "%s", e.msg);
    }
}

/* g quantized by the compiled recipe m on the zoo's calibration samples (a module serves any
 * number of quantizations: the run-time switches act when the integer graph is built). */
static qr_quantized *quantize_with(const qr_graph *g, qrl_module *m, const char *samples)
{
    qr_tensor calib = {0};
    load(samples, NULL, &calib);
    qr_quant_opts o = {.module = m, .batch = 16};
    qr_quantized *q = NULL;
    qr_error e;
    cr_assert_eq(qr_quantize(g, &calib, &o, &q, &e), QR_OK, "%s", e.msg);
    qr_tensor_free(&calib);
    return q;
}

/* g quantized by m twice on the zoo's calibration samples: *apart with the separate kernels
 * (fuse=0), *fused with the convolutions channels last (nhwc = `nhwc`) and fused. */
static void quantize_apart_and_fused(const qr_graph *g, qrl_module *m, const char *nhwc, qr_quantized **apart,
                                     qr_quantized **fused)
{
    tu_option("fuse", "0");
    *apart = quantize_with(g, m, "zoo_calib.npy");
    tu_option("fuse", "");
    tu_option("nhwc", nhwc);
    *fused = quantize_with(g, m, "zoo_calib.npy");
    tu_option("nhwc", "");
}

static qrl_module *compile(const char *recipe)
{
    char err[512] = "";
    qrl_module *m = tu_compile(recipe, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

static qr_quantized *quantize_on(const qr_graph *g, const char *recipe, const char *samples, qrl_module **m)
{
    *m = compile(recipe);
    return quantize_with(g, *m, samples);
}

static qr_quantized *quantize(const qr_graph *g, const char *recipe, qrl_module **m)
{
    return quantize_on(g, recipe, "zoo_calib.npy", m);
}

/* The first output of g on x (kernel_user: the integer graph's calls). */
static void run(const qr_graph *g, void *user, const qr_tensor *x, qr_tensor *y)
{
    qr_exec_opts o = {.kernel_user = user};
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, &o, &ex, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_run(ex, x, y, &e), QR_OK, "%s", e.msg);
    qr_exec_free(ex);
}

static double sqnr(const qr_tensor *ref, const qr_tensor *t)
{
    const float *a = ref->data, *b = t->data;
    double s = 0, n = 0;
    cr_assert_eq(qr_tensor_numel(ref), qr_tensor_numel(t));
    for (int64_t i = 0; i < qr_tensor_numel(ref); i++)
        s += (double)a[i] * a[i], n += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return n > 0 ? 10 * log10(s / n) : INFINITY;
}

/* Copies a dump line with its calibrated numbers masked (scale=* zero=*) and a newline; returns the length. */
static size_t mask_numbers(const char *l, char *out)
{
    size_t n = 0;
    while (*l) {
        int sc = !strncmp(l, "scale=", 6), zp = !strncmp(l, "zero=", 5);
        if (sc || zp) {
            n += (size_t)sprintf(out + n, "%s=*", sc ? "scale" : "zero");
            l += sc ? 6 : 5;
            while (*l && *l != ' ' && *l != ')')
                l++;
        } else
            out[n++] = *l++;
    }
    out[n++] = '\n';
    out[n] = 0;
    return n;
}

/* Writes a recipe into the test's folder; path receives where. */
static void write_recipe(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* The SQNR of the integer graph's output yi against ONNX Runtime's (an oracle independent of
 * QRL's executor) on the model g, saved as ONNX, run on zoo_test.npy. */
static double sqnr_vs_ort(const qr_graph *g, const char *tag, const qr_tensor *yi)
{
    char model[1024], got[1024], cmd[4096], *log;
    qr_error e;
    snprintf(model, sizeof model, "%s/%s.onnx", dir, tag);
    cr_assert_eq(qr_onnx_save(g, model, &e), QR_OK, "%s", e.msg);
    snprintf(got, sizeof got, "%s/%s.int.npy", dir, tag);
    cr_assert_eq(qr_npy_write(got, yi, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s/ort_%s' && node '%s/tools/ort_run.js' '%s' '%s/zoo_test.npy' -o '%s/ort_%s' && "
             "/usr/bin/python3 -c \"import glob, numpy as np; [f] = glob.glob('%s/ort_%s/*.npy'); "
             "r = np.load(f).astype(np.float64); q = np.load('%s').astype(np.float64); assert r.shape == q.shape; "
             "n = ((r - q) ** 2).sum(); print(10 * np.log10((r ** 2).sum() / n) if n else 999)\" 2>&1",
             dir, tag, tu_root(), model, dir, dir, tag, dir, tag, got);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    double db = atof(log);
    free(log);
    return db;
}

/* The integer graph on the test samples against ONNX Runtime on fp32 and on the QDQ export (ONNX
 * numerics; QRL's own QDQ simulation is no oracle for the graph it lowers to). */
static void compare(const char *recipe, double min_vs_qdq, double min_vs_fp32, int golden)
{
    qr_graph *g;
    qr_tensor x = {0}, yi = {0};
    qrl_module *m;
    load("zoo.onnx", &g, NULL);
    load("zoo_test.npy", NULL, &x);
    qr_quantized *q = quantize(g, recipe, &m);
    run(q->ig->g, q->ig, &x, &yi);
    const char *base = strrchr(recipe, '/') ? strrchr(recipe, '/') + 1 : recipe;
    char tag[256];
    snprintf(tag, sizeof tag, "%.*s", (int)strcspn(base, "."), base);
    double vs_qdq = sqnr_vs_ort(q->qdq, tag, &yi);
    snprintf(tag + strlen(tag), sizeof tag - strlen(tag), ".fp32");
    double vs_fp32 = sqnr_vs_ort(g, tag, &yi);
    cr_log_info("%s: vs ORT on the QDQ export %.1f dB, vs ORT on fp32 %.1f dB", recipe, vs_qdq, vs_fp32);
    cr_assert_geq(vs_qdq, min_vs_qdq, "%s: integer graph vs ORT on the QDQ export %.1f dB", recipe, vs_qdq);
    cr_assert_geq(vs_fp32, min_vs_fp32, "%s: integer graph vs ORT on fp32 %.1f dB", recipe, vs_fp32);
    const qr_intgraph *ig = q->ig;
    cr_assert_eq(ig->islands, 0, "%s: %d groups left in f32", recipe, ig->islands);
    /* the quantizer's own ops (domain qrl) come from its table: the runtime's core table lacks them */
    int own = 0;
    for (int i = 0; i < ig->g->n_nodes; i++) {
        const qr_node *n = ig->g->nodes[i];
        cr_assert(n->def, "%s: node %s (%s) has no op definition", recipe, n->name, n->op);
        if (n->domain && !strcmp(n->domain, "qrl")) {
            own++;
            cr_assert_null(qr_op_find("qrl", n->op), "%s: %s is in the core op table", recipe, n->op);
        }
    }
    cr_assert_gt(own, 0, "%s", recipe);
    /* 4 Conv, Add, Mul, Gemm, MatMul, and GAP as a requantized mean (patterns.qrl; TFLite's patterns
     * keep it on the input's scale: an integer op) */
    int tfl = strstr(recipe, "tflite") != NULL;
    cr_assert_eq(ig->kernels, tfl ? 8 : 9, "%s", recipe);
    cr_assert_eq(ig->lookups, 4, "%s", recipe); /* Sigmoid, HardSwish, Tanh, LeakyRelu */
    cr_assert_eq(ig->int_ops, tfl ? 6 : 5, "%s", recipe); /* Concat, AveragePool, Pad, MaxPool, Flatten (GAP) */
    /* the report says how each tensor is computed */
    int seen = 0;
    for (int i = 0; i < q->nlayers; i++) {
        cr_assert(q->layers[i].runs && q->layers[i].runs[0], "%s: layer %s", recipe, q->layers[i].value);
        /* measured on the integers, it is what the simulation predicted, within a few tenths of a dB */
        double a = q->layers[i].sqnr, b = q->layers[i].sqnr_int;
        cr_assert(!isnan(b), "%s: %s has no integer-graph SQNR", recipe, q->layers[i].value);
        cr_assert(isinf(a) || fabs(a - b) < 1.5, "%s: %s %.2f vs %.2f dB", recipe, q->layers[i].value, a, b);
        if (!strcmp(q->layers[i].value, "s2")) {
            seen = 1;
            cr_assert_str_eq(q->layers[i].runs, "Sigmoid as a lookup table");
        }
    }
    cr_assert(seen);
    if (golden) { /* the structure: node lines of the dump against the golden file */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        qr_graph_dump(ig->g, f);
        fclose(f);
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/golden/zoo_int8.intgraph", tu_root());
        FILE *gf = fopen(path, "r");
        cr_assert(gf, "missing %s", path);
        char want[65536];
        size_t wn = fread(want, 1, sizeof want - 1, gf);
        want[wn] = 0;
        fclose(gf);
        char got[65536] = "";
        size_t gn = 0;
        for (char *s = NULL, *l = strtok_r(buf, "\n", &s); l; l = strtok_r(NULL, "\n", &s))
            if (!strncmp(l, "node ", 5) && gn + strlen(l) + 2 < sizeof got)
                gn += mask_numbers(l, got + gn);
        free(buf);
        cr_assert_str_eq(got, want, "integer graph differs from tests/golden/zoo_int8.intgraph:\n%s", got);
    }
    qr_quantized_free(q);
    qr_module_free(m);
    qr_tensor_free(&x);
    qr_tensor_free(&yi);
    qr_graph_free(g);
}

Test(intgraph, int8_recipe_lowers_every_op_and_agrees_with_qdq)
{
    compare("recipes/int8.qrl", 45, 32, 1);
}

Test(intgraph, i8_activations_pick_the_i8_kernels)
{
    compare("recipes/int8-percentile.qrl", 45, 32, 0);
}

Test(intgraph, tflite_fixed_point_kernels_agree_with_float_numerics)
{
    /* fixed-point multipliers differ from float requantization by at most one step per value */
    compare("recipes/int8-tflite.qrl", 38, 32, 0);
}

/* The first output of the integer graph on x with this many threads. */
static void run_threads(const qr_quantized *q, const qr_tensor *x, int threads, qr_tensor *y)
{
    qr_exec_opts o = {.kernel_user = q->ig, .threads = threads};
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(q->ig->g, &o, &ex, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_run(ex, x, y, &e), QR_OK, "%s", e.msg);
    qr_exec_free(ex);
}

/* got's integer graph gives want's outputs to the bit on the batch x and on its first image, on 1
 * and 2 threads (want's on 1), its NHWC epilogues channels last (the default) and turned
 * (epilogue=turn); what names the case in a failure. */
static void assert_same_outputs(const qr_quantized *want_q, const qr_quantized *got_q, const qr_tensor *x,
                                const char *what)
{
    qr_tensor one = *x;
    one.dims[0] = 1;
    const qr_tensor *inputs[2] = {x, &one};
    for (int in = 0; in < 2; in++) {
        qr_tensor want = {0};
        run_threads(want_q, inputs[in], 1, &want);
        for (int t = 1; t <= 2; t++)
            for (int turn = 0; turn < 2; turn++) {
                qr_tensor got = {0};
                if (turn)
                    tu_option("epilogue", "turn");
                run_threads(got_q, inputs[in], t, &got);
                tu_option("epilogue", "");
                cr_assert_eq(qr_tensor_nbytes(&got), qr_tensor_nbytes(&want), "%s", what);
                cr_assert(!memcmp(got.data, want.data, qr_tensor_nbytes(&want)),
                          "%s, batch %lld, %d threads, epilogue %s: outputs differ", what,
                          (long long)inputs[in]->dims[0], t, turn ? "turned" : "channels last");
                qr_tensor_free(&got);
            }
        qr_tensor_free(&want);
    }
}

static int count_op(const qr_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !strcmp(g->nodes[i]->op, op);
    return n;
}

/* Nodes of op with integer attribute attr set (nonzero). */
static int count_attr(const qr_graph *g, const char *op, const char *attr)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !strcmp(g->nodes[i]->op, op) && qr_attr_i(g->nodes[i], attr, 0);
    return n;
}

/* A convolution fused with its element-wise epilogue (QrlConvKernel: the recipe's tile kernel on
 * blocks of the accumulator) computes what the ConvInteger and the QrlKernel compute apart
 * (fuse=0, the reference), to the bit, for the onnx and tflite epilogues, u8 and i8, on one
 * and two threads, a batch and one image: the zoo's four convolutions (im2col and padded planes)
 * and a MobileNet block's (depthwise at stride 1 and 2, whose 96 planes of 16 x 16 reach the
 * epilogue in chunks of 64); in NCHW (nhwc=0) and in the NHWC layout (nhwc=all), where
 * every one of them runs channels last (the implicit GEMM and the NHWC depthwise, quantizer/layout.c). */
Test(intgraph, fused_conv_epilogues_equal_the_separate_kernels)
{
    const char *recipes[] = {"recipes/int8.qrl", "recipes/int8-percentile.qrl", "recipes/int8-tflite.qrl"};
    const char *models[] = {"zoo.onnx", "depthwise.onnx"};
    qr_tensor x = {0};
    load("zoo_test.npy", NULL, &x);
    qrl_module *m[3]; /* each compiled once: 24 compiles took most of the test's time */
    for (int r = 0; r < 3; r++)
        m[r] = compile(recipes[r]);
    for (int mi = 0; mi < 4; mi++) {
        int nhwc = mi >= 2;
        qr_graph *g;
        load(models[mi % 2], &g, NULL);
        for (int r = 0; r < 3; r++) {
            qr_quantized *apart, *fused;
            quantize_apart_and_fused(g, m[r], nhwc ? "all" : "0", &apart, &fused);
            cr_assert_eq(count_op(apart->ig->g, "QrlConvKernel"), 0, "%s", recipes[r]);
            cr_assert_eq(count_op(fused->ig->g, "QrlConvKernel"), 4, "%s %s: its four convolutions", models[mi],
                         recipes[r]);
            cr_assert_eq(count_attr(fused->ig->g, "QrlConvKernel", "nhwc"), nhwc ? 4 : 0, "%s %s", models[mi],
                         recipes[r]);
            cr_assert_eq(count_op(fused->ig->g, "ConvInteger"), 0, "%s", recipes[r]);
            /* the zoo's MaxPool after a convolution runs channels last too */
            cr_assert_eq(count_op(fused->ig->g, "QrlMaxPoolNhwc"), nhwc && mi % 2 == 0, "%s %s", models[mi % 2],
                         recipes[r]);
            /* a batch splits its images across threads; one image its channels (blocks from mid-channel) */
            char what[256];
            snprintf(what, sizeof what, "%s %s, %s", models[mi % 2], recipes[r], nhwc ? "NHWC" : "NCHW");
            assert_same_outputs(apart, fused, &x, what);
            qr_quantized_free(apart);
            qr_quantized_free(fused);
        }
        qr_graph_free(g);
    }
    for (int r = 0; r < 3; r++)
        qr_module_free(m[r]);
    qr_tensor_free(&x);
}

/* Nodes of op with an integer attribute attr >= 0. */
static int count_attr_set(const qr_graph *g, const char *op, const char *attr)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !strcmp(g->nodes[i]->op, op) && qr_attr_i(g->nodes[i], attr, -1) >= 0;
    return n;
}

/* A residual Add (the stdlib's qadd, proven pointwise) after an NHWC convolution runs as its
 * second stage, on each block of the convolution's y: the ResNet block's integer graph keeps no
 * QrlKernel for it, and its outputs are those of the separate NCHW kernels (fuse=0), bit for
 * bit, onnx u8 and i8 and tflite, batch 32 and 1, 1 and 2 threads; the first stage by the rows
 * epilogue (qc_rows_ep_jit) where the recipe's epilogue has a vector form. */
Test(intgraph, residual_add_runs_as_the_convolutions_second_stage)
{
    const char *recipes[] = {"recipes/int8.qrl", "recipes/int8-percentile.qrl", "recipes/int8-tflite.qrl"};
    /* the epilogue's vector form compiled alone (as the API registers it) runs the blocks before
     * the second stage, which must still run after it */
    qr_rows_ep_set_specializer(qc_rows_ep_jit);
    qr_tensor x = {0};
    qr_graph *g;
    load("zoo_test.npy", NULL, &x);
    load("residual.onnx", &g, NULL);
    for (int r = 0; r < 3; r++) {
        qrl_module *m = compile(recipes[r]);
        qr_quantized *apart, *fused;
        quantize_apart_and_fused(g, m, "all", &apart, &fused);
        cr_assert_eq(count_attr_set(fused->ig->g, "QrlConvKernel", "then_call"), 1, "%s: the Add is a second stage",
                     recipes[r]);
        cr_assert_eq(count_attr(fused->ig->g, "QrlConvKernel", "nhwc"), 4, "%s", recipes[r]);
        /* one transpose, before the mean: the first convolution gathers its windows from NCHW */
        cr_assert_eq(count_op(fused->ig->g, "Transpose"), 1, "%s: only at the region's borders", recipes[r]);
        assert_same_outputs(apart, fused, &x, recipes[r]);
        qr_quantized_free(apart);
        qr_quantized_free(fused);
        qr_module_free(m);
    }
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* The fused kernels the runtime was handed (phase 2 with the epilogue's vector form), and those of
 * them with a second stage joined (their programs read the skip tensor: skip.u8, skip.i8). */
static int ep_handed, ep_joined;

static qr_iconv_ep_fn counting_ep(int64_t taps, int64_t k4, int64_t n, const char *prog)
{
    qr_iconv_ep_fn f = qc_iconv_jit_ep(taps, k4, n, prog);
    if (f)
        __atomic_add_fetch(&ep_handed, 1, __ATOMIC_RELAXED);
    if (f && strstr(prog, "skip."))
        __atomic_add_fetch(&ep_joined, 1, __ATOMIC_RELAXED);
    return f;
}

/* The NHWC convolutions' output channels cut into parts of whole 64-channel strips, a task each
 * (split=cols, on one thread too), give the bits of blocks of pixels (split=rows) and of
 * the choice by shape, which are the separate NCHW kernels' (fuse=0): wide.onnx's layers of
 * 80 and 200 channels (a last strip of 16 and 8), its residual Adds as second stages (run on whole
 * rows of y once every part is done, or with onnx u8's kernels compiled per shape in the fused
 * kernels' registers), batch 32 and 1, 1 and 2 threads, epilogues channels last and turned, onnx u8
 * and tflite. */
Test(intgraph, channel_parts_give_the_same_outputs)
{
    const char *recipes[] = {"recipes/int8.qrl", "recipes/int8-tflite.qrl"};
    const char *splits[] = {"cols", "rows", NULL};
    qr_tensor x = {0};
    qr_graph *g;
    load("zoo_test.npy", NULL, &x);
    load("wide.onnx", &g, NULL);
    for (int r = 0; r < 2; r++) {
        qrl_module *m = compile(recipes[r]);
        qr_quantized *apart, *fused;
        quantize_apart_and_fused(g, m, "all", &apart, &fused);
        cr_assert_eq(count_attr_set(fused->ig->g, "QrlConvKernel", "then_call"), 2, "%s: the Adds are second stages",
                     recipes[r]);
        cr_assert_eq(count_attr(fused->ig->g, "QrlConvKernel", "nhwc"), 5, "%s", recipes[r]);
        for (int sp = 0; sp < 3; sp++) {
            char what[256];
            snprintf(what, sizeof what, "%s, split=%s", recipes[r], splits[sp] ? splits[sp] : "(unset)");
            if (splits[sp])
                tu_option("split", splits[sp]);
            assert_same_outputs(apart, fused, &x, what);
            /* with kernels compiled per shape, the epilogue fused where there is no second stage (the
             * VNNI path's: AMX, where the CPU has it, hands out no such kernels) */
            tu_option("amx", "0");
            qr_iconv_set_specializer(qc_iconv_jit);
            qr_iconv_set_ep_specializer(counting_ep);
            ep_handed = ep_joined = 0;
            snprintf(what, sizeof what, "%s, split=%s, iconv-jit=1", recipes[r], splits[sp] ? splits[sp] : "(unset)");
            assert_same_outputs(apart, fused, &x, what);
            qr_iconv_set_ep_specializer(NULL);
            qr_iconv_set_specializer(NULL);
            tu_option("amx", "");
            cr_assert(r == 1 || !qc_iconv_jit(9, 24, 24) || ep_handed > 0, "%s: no fused kernel ran", what);
            /* the Adds in the kernels' registers (stop 40), with the channels in parts too */
            cr_assert(r == 1 || !qc_iconv_jit(9, 24, 24) || ep_joined > 0, "%s: no Add ran in a fused kernel", what);
            tu_option("split", "");
        }
        qr_quantized_free(apart);
        qr_quantized_free(fused);
        qr_module_free(m);
    }
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* The rows epilogues the runtime was handed (qc_rows_ep_jit's), each behind a wrapper that counts
 * its calls on AMX blocks of sums (rows 64 apart, at most 32 rows: qr_iconv_u8s8_amx_sink's, where
 * a whole block's accumulator has the layer's channels, 80 or 200 here, between rows). */
enum { ROWS_SLOTS = 4 };
static qr_rows_ep_fn rows_real[ROWS_SLOTS];
static const char *rows_prog[ROWS_SLOTS];
static int amx_blocks;

#define ROWS_WRAP(k)                                                                                                 \
    static void rows_wrap##k(uint8_t *y, int64_t y_rs, const int32_t *acc, int64_t acc_rs, int64_t rows,           \
                             int64_t cols, int64_t c0, const int32_t *const *tabs)                                 \
    {                                                                                                                \
        if (acc_rs == 64 && rows <= 32)                                                                              \
            __atomic_add_fetch(&amx_blocks, 1, __ATOMIC_RELAXED);                                                    \
        rows_real[k](y, y_rs, acc, acc_rs, rows, cols, c0, tabs);                                                    \
    }
ROWS_WRAP(0)
ROWS_WRAP(1)
ROWS_WRAP(2)
ROWS_WRAP(3)

static qr_rows_ep_fn counting_rows(const char *prog)
{
    static const qr_rows_ep_fn wraps[ROWS_SLOTS] = {rows_wrap0, rows_wrap1, rows_wrap2, rows_wrap3};
    qr_rows_ep_fn f = qc_rows_ep_jit(prog);
    if (!f)
        return NULL;
    for (int k = 0; k < ROWS_SLOTS; k++) /* the runtime asks from one thread (the plan's first run) */
        if (!rows_prog[k] || rows_prog[k] == prog) {
            rows_prog[k] = prog, rows_real[k] = f;
            return wraps[k];
        }
    return f;
}

/* On AMX (where the CPU has it), the dense convolutions' rows epilogue runs on each 32 x 64 block of
 * sums as the tiles give them (qr_iconv_u8s8_amx_sink), before the residual Add's second stage on
 * the block's rows: wide.onnx's 80- and 200-channel layers (ragged last strips of 16 and 8, K 720
 * and more), onnx u8 and i8 asymmetric (the stdlib's kernels: vector forms; zero points of both
 * kinds) and tflite (none: the generic path), split by rows, by channels (y_split: the stage after
 * every part) and by shape, batch 32 and 1, 1 and 2 threads, give the bits of the separate NCHW
 * kernels (fuse=0); the u8 and i8 runs' blocks went that way. */
Test(intgraph, amx_blocks_run_the_rows_epilogue_as_the_separate_kernels)
{
    if (!qr_amx_usable()) {
        cr_log_info("this CPU (or OS) has no AMX-INT8: not tested here");
        return;
    }
    const char *recipes[] = {"recipes/int8.qrl", "tests/recipes/i8-asym-minmax.qrl", "recipes/int8-tflite.qrl"};
    const char *splits[] = {"cols", "rows", NULL};
    qr_tensor x = {0};
    qr_graph *g;
    load("zoo_test.npy", NULL, &x);
    load("wide.onnx", &g, NULL);
    qr_rows_ep_set_specializer(counting_rows);
    for (int r = 0; r < 3; r++) {
        qrl_module *m = compile(recipes[r]);
        qr_quantized *apart, *fused;
        quantize_apart_and_fused(g, m, "all", &apart, &fused);
        for (int sp = 0; sp < 3; sp++) {
            char what[256];
            snprintf(what, sizeof what, "%s, split=%s, amx=auto", recipes[r], splits[sp] ? splits[sp] : "(unset)");
            tu_option("split", splits[sp] ? splits[sp] : "");
            amx_blocks = 0;
            assert_same_outputs(apart, fused, &x, what);
            cr_log_info("%s: %d AMX blocks through the rows epilogue", what, amx_blocks);
            cr_assert(r == 2 || amx_blocks > 0, "%s: no AMX block ran the rows epilogue", what); /* tflite: no vector form */
        }
        tu_option("split", "");
        qr_quantized_free(apart);
        qr_quantized_free(fused);
        qr_module_free(m);
        memset(rows_prog, 0, sizeof rows_prog); /* the module's programs are gone */
    }
    qr_rows_ep_set_specializer(NULL);
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* A convolution whose residual Add runs as its second stage runs it in the fused kernel's
 * registers (the Add's element joined to the epilogue's vector form, the skip tensor's bytes
 * loaded there: vecjoin.h) where both have vector forms, and else takes its y's bytes from the
 * fused kernel into the block's rows for the stage: odd_residual.onnx's 21 channels over 14 x 14
 * pixels (ragged row tiles, a last vector of 5 channels), Adds with the convolution as either
 * operand, with and without a Relu, give the bits of the separate NCHW kernels (fuse=0: the
 * stdlib's qadd as compiled scalar code), onnx u8, i8 asymmetric with ONNX numerics and tflite i8
 * (zero points not 0), a batch and one image, 1 and 2 threads; every dense convolution ran fused
 * with the stdlib's kernels, the two before an Add joined to it (tflite's: neither). */
Test(intgraph, second_stages_read_the_fused_kernels_bytes)
{
    tu_option("amx", "0"); /* the specialized kernels are the VNNI path's (AMX hands out none) */
    qr_iconv_set_specializer(qc_iconv_jit);
    int have = qr_iconv_specialized(9, 24, 24) != NULL;
    qr_iconv_set_specializer(NULL);
    if (!have) {
        cr_log_info("no AVX-512 VNNI: no specialized kernels");
        return;
    }
    /* u8 and i8 activations of the stdlib's kernels (vector forms), and TFLite's (none) */
    const char *recipes[] = {"recipes/int8.qrl", "tests/recipes/i8-asym-minmax.qrl", "recipes/int8-tflite.qrl"};
    qr_tensor x = {0};
    qr_graph *g;
    load("zoo_test.npy", NULL, &x);
    load("odd_residual.onnx", &g, NULL);
    for (int r = 0; r < 3; r++) {
        qrl_module *m = compile(recipes[r]);
        qr_quantized *apart, *fused;
        quantize_apart_and_fused(g, m, "all", &apart, &fused);
        cr_assert_eq(count_attr_set(fused->ig->g, "QrlConvKernel", "then_call"), 2, "%s: the Adds are second stages",
                     recipes[r]);
        cr_assert_eq(count_attr(fused->ig->g, "QrlConvKernel", "nhwc"), 4, "%s", recipes[r]);
        qr_iconv_set_specializer(qc_iconv_jit);
        qr_iconv_set_ep_specializer(counting_ep);
        ep_handed = ep_joined = 0;
        qr_tensor y = {0};
        run_threads(fused, &x, 1, &y);
        int handed = ep_handed, joined = ep_joined;
        qr_tensor_free(&y);
        cr_log_info("%s: %d fused, %d joined", recipes[r], handed, joined);
        assert_same_outputs(apart, fused, &x, recipes[r]);
        qr_iconv_set_ep_specializer(NULL);
        qr_iconv_set_specializer(NULL);
        /* the stdlib's epilogue has a vector form: all four, the two before an Add among them, and
         * those two with qadd joined (its element's vector form, vecmap.h qc_vecmap_stage) */
        cr_assert(r == 2 || handed == 4, "%s: %d of the 4 convolutions ran fused", recipes[r], handed);
        cr_assert_eq(joined, r == 2 ? 0 : 2, "%s: %d convolutions ran their Add in the kernel", recipes[r], joined);
        qr_quantized_free(apart);
        qr_quantized_free(fused);
        qr_module_free(m);
    }
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* Phase 2: the NHWC convolutions on kernels libgccjit compiled for each layer's shape (extended-asm
 * vpdpbusd, compiler/iconv_jit.c) give the bits of the generic microkernels, on the ResNet block
 * (a 3-channel window gathered, 3x3, dilated, strided), with the stdlib's requantization fused
 * into them (its vector form: all four, the one before the residual Add writing its bytes for
 * the second stage) and without
 * (epilogue=rows). Skipped on a CPU without AVX-512 VNNI. */
Test(intgraph, shape_specialized_kernels_equal_the_generic_ones)
{
    tu_option("amx", "0"); /* the specialized kernels are the VNNI path's (AMX hands out none) */
    qr_iconv_set_specializer(qc_iconv_jit);
    int have = qr_iconv_specialized(9, 24, 24) != NULL;
    qr_iconv_set_specializer(NULL);
    if (!have) {
        cr_log_info("no AVX-512 VNNI: no specialized kernels");
        return;
    }
    qr_tensor x = {0}, want = {0}, got = {0};
    qr_graph *g;
    load("zoo_test.npy", NULL, &x);
    load("residual.onnx", &g, NULL);
    qrl_module *m0, *m1;
    tu_option("nhwc", "all");
    qr_quantized *generic = quantize(g, "recipes/int8.qrl", &m0);
    qr_iconv_set_specializer(qc_iconv_jit);
    qr_iconv_set_ep_specializer(counting_ep);
    qr_quantized *special = quantize(g, "recipes/int8.qrl", &m1);
    tu_option("nhwc", "");
    ep_handed = 0;
    run_threads(special, &x, 2, &got);
    int fused = ep_handed;
    tu_option("epilogue", "rows");
    qr_tensor rows = {0};
    run_threads(special, &x, 1, &rows);
    tu_option("epilogue", "");
    qr_iconv_set_ep_specializer(NULL);
    qr_iconv_set_specializer(NULL);
    run_threads(generic, &x, 1, &want);
    cr_assert_eq(count_attr(special->ig->g, "QrlConvKernel", "nhwc"), 4);
    cr_assert_eq(fused, 4, "the four convolutions, one with a second stage, ran fused (%d)", fused);
    cr_assert_eq(ep_handed, fused, "epilogue=rows: no fused kernel");
    cr_assert(!memcmp(got.data, want.data, qr_tensor_nbytes(&want)), "fused kernels' outputs differ");
    cr_assert(!memcmp(rows.data, want.data, qr_tensor_nbytes(&want)), "specialized kernels' outputs differ");
    qr_tensor_free(&rows);
    qr_tensor_free(&got);
    qr_tensor_free(&want);
    qr_quantized_free(generic);
    qr_quantized_free(special);
    qr_module_free(m0);
    qr_module_free(m1);
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* 8-bit pools in an NHWC region run channels last (QrlMaxPoolNhwc, QrlAveragePoolNhwc), their
 * planes split into tasks of output rows (32 x 32 x 32 bytes: two tasks), and the Flatten before
 * the Gemm reads the NHWC pool (the Gemm's weight rows permuted): no transpose is left. The
 * outputs are the separate NCHW kernels' bits (fuse=0), batch 4 and 1, 1 and 2 threads. */
/* pools.onnx (into *g) and its test input (into *x), and its integer graph with every kernel apart
 * (fuse=0): the reference the pool tests compare with; *m holds its module. */
static qr_quantized *pools_reference(qr_graph **g, qr_tensor *x, qrl_module **m)
{
    load("pools_test.npy", NULL, x);
    load("pools.onnx", g, NULL);
    tu_option("fuse", "0");
    qr_quantized *apart = quantize_on(*g, "recipes/int8.qrl", "pools_test.npy", m);
    tu_option("fuse", "");
    return apart;
}

Test(intgraph, pools_run_channels_last)
{
    qr_tensor x = {0};
    qr_graph *g;
    qrl_module *m0, *m1;
    qr_quantized *apart = pools_reference(&g, &x, &m0);
    tu_option("nhwc", "all");
    qr_quantized *nhwc = quantize_on(g, "recipes/int8.qrl", "pools_test.npy", &m1);
    tu_option("nhwc", "");
    cr_assert_eq(count_op(nhwc->ig->g, "QrlMaxPoolNhwc"), 2);
    cr_assert_eq(count_op(nhwc->ig->g, "Transpose"), 0, "the Flatten is folded into the Gemm's weights");
    cr_assert_eq(count_op(nhwc->ig->g, "QrlAveragePoolNhwc"), 1);
    /* by default only where it pays: the 32 -> 32 convolution, not the first (3 input channels) */
    qrl_module *m2;
    qr_quantized *dflt = quantize_on(g, "recipes/int8.qrl", "pools_test.npy", &m2);
    cr_assert_eq(count_attr(dflt->ig->g, "QrlConvKernel", "nhwc"), 1);
    cr_assert_eq(count_attr(nhwc->ig->g, "QrlConvKernel", "nhwc"), 2);
    qr_quantized_free(dflt);
    qr_module_free(m2);
    assert_same_outputs(apart, nhwc, &x, "pools.onnx");
    qr_quantized_free(apart);
    qr_quantized_free(nhwc);
    qr_module_free(m0);
    qr_module_free(m1);
    qr_graph_free(g);
    qr_tensor_free(&x);
}

/* A recipe's own element-wise epilogue (an accelerator that rounds half away from zero, odd
 * channels one step up), its axis a literal: its tile kernel says rows are channels of axis 1 (no
 * parameter), the runtime fuses it to every convolution (depthwise too), and the fused outputs are
 * the separate kernels'. Fused, the convolutions run NHWC, so the channel lets (f32, i32, bool,
 * f64 and i64) go through the channels-last kernel's tables. */
Test(intgraph, recipe_epilogue_written_elementwise_is_fused)
{
    char path[1024];
    write_recipe("away.qrl",
                 "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                 "kernel away<T: u8 | i8>(acc: tensor<i32>, x: tensor<T>, x_scale: f32, x_zero: i32, w: tensor<i8>,\n"
                 "                        w_scale: f32[], w_zero: i32[], b: tensor<i32>, y: tensor<T>, y_scale: f32,\n"
                 "                        y_zero: i32) {\n"
                 "  elementwise a in acc along 1 -> y {\n"
                 "    channel c {\n"
                 "      let m = x_scale * w_scale[c % len(w_scale)] / y_scale\n"
                 "      let bias = b[c % b.numel]\n"
                 "      let odd = c % 2 == 1\n"
                 "      let half = f64(m) / 2.0\n"
                 "      let shift = i64(bias) - c\n"
                 "    }\n"
                 "    sat<T>(round_away(f32(i64(a) + shift + c) * f32(half * 2.0)) + f32(y_zero) + select(odd, 1.0, 0.0))\n"
                 "  }\n"
                 "}\n"
                 "pattern conv_away {\n"
                 "  numerics onnx\n"
                 "  priority 100\n"
                 "  match y = Conv(x, w, b?) where const(w)\n"
                 "  quantize x: activation, w: weight(axis = 0), b: bias(x, w), y: activation\n"
                 "  lower y = away(x, w, b)\n"
                 "}\n"
                 "recipe away_int8 {\n"
                 "  activation = u8 asymmetric by minmax()\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                 "}\n",
                 path, sizeof path);
    qr_graph *g;
    qr_tensor x = {0};
    load("depthwise.onnx", &g, NULL);
    load("zoo_test.npy", NULL, &x);
    qrl_module *m0, *m1;
    tu_option("fuse", "0");
    qr_quantized *apart = quantize(g, path, &m0);
    tu_option("fuse", "");
    tu_option("nhwc", "all");
    qr_quantized *fused = quantize(g, path, &m1);
    tu_option("nhwc", "");
    const qr_fn_desc *k = qr_module_fn(m1, "away<u8>"), *t = k ? qr_module_tile(m1, k) : NULL;
    cr_assert(t && t->is_tile && t->tile_axis_param == -1 && t->tile_axis == 1, "away.tile<u8>: rows of axis 1");
    int tables = -1;
    const qr_fn_desc *cl = k ? qr_module_nhwc(m1, k, &tables) : NULL;
    cr_assert(cl && !strcmp(cl->name, "away.nhwc<u8>") && tables == 6,
              "away.nhwc<u8>: a table per channel let and one for y_zero, which the value reads (%d)", tables);
    cr_assert_null(cl->vector_epilogue, "i64, f64 and round_away have no vector form: %s", cl->vector_epilogue);
    cr_assert_eq(count_op(fused->ig->g, "QrlConvKernel"), 4, "the block's four convolutions run fused");
    for (int i = 0; i < fused->ig->g->n_nodes; i++) /* the recipe's pattern and kernel, not the stdlib's */
        if (!strcmp(fused->ig->g->nodes[i]->op, "QrlConvKernel"))
            cr_assert(!strncmp(fused->ig->g->nodes[i]->name, "conv_away_away_", 15), "%s", fused->ig->g->nodes[i]->name);
    cr_assert_eq(count_op(apart->ig->g, "QrlConvKernel"), 0);
    cr_assert_gt(count_op(fused->ig->g, "Transpose"), 0, "the fused block runs NHWC");
    assert_same_outputs(apart, fused, &x, "away.qrl");
    qr_quantized_free(apart);
    qr_quantized_free(fused);
    qr_module_free(m0);
    qr_module_free(m1);
    qr_tensor_free(&x);
    qr_graph_free(g);
}

/* Layers the recipe's fallback sends back to f32 run as f32 between
 * DequantizeLinear/QuantizeLinear borders; the rest stays on the integers. */
Test(intgraph, fallback_layers_run_in_f32_between_borders)
{
    char path[1024];
    write_recipe("fallback.qrl",
                 "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                 "recipe fb {\n"
                 "  activation = u8 asymmetric by minmax()\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                 "  fallback = f32 when sqnr < 32\n"
                 "}\n",
                 path, sizeof path);
    qr_graph *g;
    qr_tensor x = {0}, yq = {0}, yi = {0};
    qrl_module *m;
    load("zoo.onnx", &g, NULL);
    load("zoo_test.npy", NULL, &x);
    qr_quantized *q = quantize(g, path, &m);
    cr_assert_gt(q->fallbacks, 0);
    cr_assert_gt(q->ig->islands + q->ig->kernels, 0);
    int f32_convs = 0;
    for (int i = 0; i < q->ig->g->n_nodes; i++)
        f32_convs += !strcmp(q->ig->g->nodes[i]->op, "Conv");
    cr_assert_gt(f32_convs, 0, "a Conv that fell back runs in f32");
    cr_assert_lt(q->ig->kernels, 9);
    run(q->qdq, NULL, &x, &yq);
    run(q->ig->g, q->ig, &x, &yi);
    cr_assert_geq(sqnr(&yq, &yi), 30);
    qr_quantized_free(q);
    qr_module_free(m);
    qr_tensor_free(&x);
    qr_tensor_free(&yq);
    qr_tensor_free(&yi);
    qr_graph_free(g);
}

/* A pattern whose only kernel takes u8 under a recipe of i8 activations: a
 * recipe error naming the pattern, the kernel and the types. */
Test(intgraph, kernel_of_the_wrong_type_is_a_clear_error)
{
    char path[1024];
    write_recipe("u8only.qrl",
                 "import \"calibrators.qrl\"\n"
               "kernel k8(x: tensor<u8>, x_scale: f32, x_zero: i32, y: tensor<u8>, y_scale: f32, y_zero: i32) {\n"
               "  for i in 0 .. y.numel { y[i] = x[i] }\n"
               "}\n"
               "pattern tanh8 {\n"
               "  match y = Tanh(x)\n"
               "  quantize x: activation, y: activation\n"
               "  lower y = k8(x)\n"
               "}\n"
               "recipe r {\n"
               "  activation = i8 asymmetric by minmax()\n"
               "  weight = i8 symmetric by minmax()\n"
               "}\n",
                 path, sizeof path);
    char err[512] = "";
    qrl_module *m = tu_compile(path, err, sizeof err);
    cr_assert(m, "%s", err);
    qr_graph *g;
    qr_tensor calib = {0};
    load("zoo.onnx", &g, NULL);
    load("zoo_calib.npy", NULL, &calib);
    qr_quant_opts o = {.module = m};
    qr_quantized *q = NULL;
    qr_error e;
    cr_assert_eq(qr_quantize(g, &calib, &o, &q, &e), QR_ERR);
    char where[1200];
    snprintf(where, sizeof where, "%s:5:9: pattern 'tanh8' has no lowering for the types the recipe chose", path);
    cr_assert(strstr(e.msg, where) &&
                  strstr(e.msg, "kernel 'k8' takes 'x' as tensor<u8>, but the recipe makes it i8 (the model's 'mp')"),
              "want '%s' in: %s", where, e.msg);
    qr_tensor_free(&calib);
    qr_module_free(m);
    qr_graph_free(g);
}

/* A text buffer for generated recipes. */
static void append(char *b, size_t n, const char *fmt, ...)
{
    size_t at = strlen(b);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b + at, n - at, fmt, ap);
    va_end(ap);
    cr_assert(k >= 0 && (size_t)k < n - at, "recipe buffer too small");
}

/* A calibrator of 40 parameters (the language allows 64): every argument
 * reaches it. The runtime took at most 32 (names[32], values[32]): the
 * JIT-compiled argument function wrote past values[32] on the stack, and the
 * margin, the 40th argument, was silently its default. The recipe with the
 * 40-argument calibrator must give the same qparams as one passing the
 * margin alone. */
Test(intgraph, calibrator_with_forty_arguments)
{
    static char text[16384];
    text[0] = 0;
    append(text, sizeof text, "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n");
    for (int wide = 0; wide < 2; wide++) {
        append(text, sizeof text, "calibrator %s(", wide ? "wide" : "narrow");
        for (int i = 0; wide && i < 39; i++)
            append(text, sizeof text, "a%d: f64 = 0.0, ", i);
        append(text, sizeof text,
               "margin: f64 = 0.0) {\n"
               "  state lo: f64 = inf\n  state hi: f64 = -inf\n"
               "  observe(x: tensor<f32>) {\n    lo = min(lo, x.min())\n    hi = max(hi, x.max())\n  }\n"
               "  merge(o) {\n    lo = min(lo, o.lo)\n    hi = max(hi, o.hi)\n  }\n"
               "  solve(t: qtype) -> qparams {\n    let w = (hi - lo) * margin\n");
        if (wide) { /* every argument counts: the recipe passes a_i = i, and a0 + ... + a38 is 741 */
            append(text, sizeof text, "    let s = ");
            for (int i = 0; i < 39; i++)
                append(text, sizeof text, "%sa%d", i ? " + " : "", i);
            append(text, sizeof text, "\n    return asymmetric(lo - w, hi + w + (s - 741.0), t)\n  }\n}\n");
        } else {
            append(text, sizeof text, "    return asymmetric(lo - w, hi + w, t)\n  }\n}\n");
        }
    }
    append(text, sizeof text, "recipe r_narrow {\n  activation = u8 asymmetric by narrow(margin = 0.25)\n"
                              "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    append(text, sizeof text, "recipe r_wide {\n  activation = u8 asymmetric by wide(");
    for (int i = 0; i < 39; i++)
        append(text, sizeof text, "%d.0, ", i);
    append(text, sizeof text, "0.25)\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    char path[1024];
    write_recipe("wide.qrl", text, path, sizeof path);
    char err[512] = "";
    qrl_module *m = tu_compile(path, err, sizeof err);
    cr_assert(m, "%s", err);
    qr_graph *g;
    qr_tensor calib = {0};
    load("zoo.onnx", &g, NULL);
    load("zoo_calib.npy", NULL, &calib);
    qr_quantized *q[2];
    for (int k = 0; k < 2; k++) {
        qr_quant_opts o = {.module = m, .recipe = k ? "r_wide" : "r_narrow", .batch = 16};
        qr_error e;
        cr_assert_eq(qr_quantize(g, &calib, &o, &q[k], &e), QR_OK, "%s", e.msg);
    }
    cr_assert_eq(q[0]->nlayers, q[1]->nlayers);
    for (int i = 0; i < q[0]->nlayers; i++) {
        const qr_qlayer *a = &q[0]->layers[i], *b = &q[1]->layers[i];
        cr_assert_str_eq(a->value, b->value);
        cr_assert(a->scale == b->scale && a->zero == b->zero, "%s: scale %g zero %lld vs %g %lld", a->value,
                  a->scale, (long long)a->zero, b->scale, (long long)b->zero);
    }
    qr_quantized_free(q[0]);
    qr_quantized_free(q[1]);
    qr_tensor_free(&calib);
    qr_module_free(m);
    qr_graph_free(g);
}

/* Two lower clauses of 55 constant arguments each (a kernel of 61
 * parameters): the pattern's constants function writes all 110 (numbered on across the clauses), into a
 * double consts[64] on lower_match's stack, and the second clause's read as
 * 0 (ci >= 64). The first clause's kernel takes i8, so the second runs: its
 * output is y_zero (real 0) exactly when all of its constants arrive. */
Test(intgraph, lowering_constants_past_sixty_four)
{
    enum { NC = 55 };
    static char text[32768];
    text[0] = 0;
    append(text, sizeof text, "import \"calibrators.qrl\"\n");
    for (int k = 0; k < 2; k++) {
        append(text, sizeof text, "kernel k%d(x: tensor<%s>, x_scale: f32, x_zero: i32, ", k, k ? "u8" : "i8");
        for (int i = 0; i < NC; i++)
            append(text, sizeof text, "c%d: f64, ", i);
        append(text, sizeof text, "y: tensor<%s>, y_scale: f32, y_zero: i32) {\n  let s = ", k ? "u8" : "i8");
        for (int i = 0; i < NC; i++)
            append(text, sizeof text, "%sc%d", i ? " + " : "", i);
        /* the constants passed are 1000 + i */
        append(text, sizeof text, "\n  for i in 0 .. y.numel {\n    y[i] = sat<%s>(f32(y_zero) + f32(s - %d.0))\n  }\n}\n",
               k ? "u8" : "i8", 1000 * NC + NC * (NC - 1) / 2);
    }
    append(text, sizeof text, "pattern tanh_consts {\n  match y = Tanh(x)\n  quantize x: activation, y: activation\n");
    for (int k = 0; k < 2; k++) {
        append(text, sizeof text, "  lower y = k%d(x", k);
        for (int i = 0; i < NC; i++)
            append(text, sizeof text, ", %d.0", 1000 + i);
        append(text, sizeof text, ")\n");
    }
    append(text, sizeof text, "}\nrecipe r {\n  activation = u8 asymmetric by minmax()\n"
                              "  weight = i8 symmetric by minmax(symmetric = true)\n}\n");
    char path[1024], err[512] = "";
    write_recipe("consts.qrl", text, path, sizeof path);
    qrl_module *m = tu_compile(path, err, sizeof err);
    cr_assert(m, "%s", err);
    /* x -> Tanh -> y */
    qr_graph *g = qr_graph_new();
    const int64_t xd[2] = {1, 8};
    qr_value *x = tu_input(g, "x", 2, xd);
    tu_output(g, tu_node(g, "Tanh", "tanh", 1, &x, 1)->out[0]);
    g->opset = 13;
    qr_tensor calib = {.dtype = QR_F32, .ndim = 2, .dims = {16, 8}}, y = {0};
    qr_error e;
    cr_assert_eq(qr_tensor_alloc(&calib, &e), QR_OK);
    for (int i = 0; i < 128; i++)
        ((float *)calib.data)[i] = (float)(i % 17) / 4.0f - 2.0f;
    qr_quant_opts o = {.module = m, .batch = 1};
    qr_quantized *q = NULL;
    cr_assert_eq(qr_quantize(g, &calib, &o, &q, &e), QR_OK, "%s", e.msg);
    /* k1 is pointwise with one 8-bit input: it ran once on the 256 integers and the graph looks its
     * results up (the table is what it computed, so the constants still all arrive) */
    cr_assert_eq(q->ig->kernels + q->ig->lookups, 1);
    qr_tensor x1 = {.dtype = QR_F32, .ndim = 2, .dims = {1, 8}, .data = calib.data};
    run(q->ig->g, q->ig, &x1, &y);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(((const float *)y.data)[i], 0.0f, "y[%d] = %g: the constants did not all arrive", i,
                     ((const float *)y.data)[i]);
    qr_tensor_free(&y);
    qr_tensor_free(&calib);
    qr_quantized_free(q);
    qr_module_free(m);
    qr_graph_free(g);
}

/* The kernels' scratch comes from the executor's workspace: the first run of the zoo model's
 * integer graph and of its f32 graph allocate it (spills past an empty workspace, which then
 * grows), every later run allocates none, and the outputs stay the same bits. */
static void runs_without_scratch_allocations(const qr_graph *g, void *user, const qr_tensor *x)
{
    qr_exec_opts o = {.kernel_user = user};
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, &o, &ex, &e), QR_OK, "%s", e.msg);
    qr_tensor y0, y;
    qr_exec_stats s;
    cr_assert_eq(qr_exec_run(ex, x, &y0, &e), QR_OK, "%s", e.msg);
    qr_exec_get_stats(ex, &s);
    cr_assert_gt(s.work_spills, 0, "the first run found the workspace empty");
    cr_assert_gt(s.work_bytes, 0);
    size_t grown = s.work_bytes;
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(qr_exec_run(ex, x, &y, &e), QR_OK, "%s", e.msg);
        qr_exec_get_stats(ex, &s);
        cr_assert_eq(s.work_spills, 0, "run %d allocated %ld scratch buffers", r + 2, s.work_spills);
        cr_assert_eq(s.work_bytes, grown);
        cr_assert(qr_tensor_same_shape(&y, &y0));
        cr_assert(memcmp(y.data, y0.data, qr_tensor_nbytes(&y)) == 0, "run %d differs from the first", r + 2);
        qr_tensor_free(&y);
    }
    qr_tensor_free(&y0);
    qr_exec_free(ex);
}

Test(intgraph, kernels_take_scratch_from_the_workspace)
{
    qr_graph *g;
    qr_tensor x = {0};
    qrl_module *m;
    load("zoo.onnx", &g, NULL);
    load("zoo_test.npy", NULL, &x);
    qr_quantized *q = quantize(g, "recipes/int8.qrl", &m);
    runs_without_scratch_allocations(g, NULL, &x);
    runs_without_scratch_allocations(q->ig->g, q->ig, &x);
    qr_quantized_free(q);
    qr_module_free(m);
    qr_tensor_free(&x);
    qr_graph_free(g);
}

/* A MaxPool between a convolution that stays NCHW (pools.onnx's first, 3 input channels) and one
 * that runs channels last runs channels last by default too (quantizer/layout.c pool_leads),
 * reading its NCHW input itself (x_nchw): no transpose is left, and the outputs are the separate
 * NCHW kernels' bits (fuse=0), batch 4 and 1, 1 and 2 threads. The zoo's pools, read by a Pad
 * and a lookup (which could run channels last) but by no convolution, stay NCHW: nothing there
 * runs channels last by default. */
Test(intgraph, maxpool_before_an_nhwc_region_runs_channels_last)
{
    qr_tensor x = {0};
    qr_graph *g;
    qrl_module *m0, *m1;
    qr_quantized *apart = pools_reference(&g, &x, &m0);
    qr_quantized *dflt = quantize_on(g, "recipes/int8.qrl", "pools_test.npy", &m1);
    const qr_graph *ig = dflt->ig->g;
    cr_assert_eq(count_attr(ig, "QrlConvKernel", "nhwc"), 1, "the first convolution stays NCHW");
    cr_assert_eq(count_op(ig, "MaxPool"), 0);
    cr_assert_eq(count_op(ig, "QrlMaxPoolNhwc"), 2, "the pool after the NCHW convolution runs channels last");
    cr_assert_eq(count_attr(ig, "QrlMaxPoolNhwc", "x_nchw"), 1);
    cr_assert_eq(count_op(ig, "Transpose"), 0);
    assert_same_outputs(apart, dflt, &x, "pools.onnx, by default");
    qrl_module *m2;
    qr_graph *zoo;
    load("zoo.onnx", &zoo, NULL);
    qr_quantized *z = quantize(zoo, "recipes/int8.qrl", &m2);
    cr_assert_eq(count_op(z->ig->g, "MaxPool") + count_op(z->ig->g, "AveragePool"), 2);
    cr_assert_eq(count_op(z->ig->g, "Transpose"), 0);
    qr_quantized_free(z);
    qr_module_free(m2);
    qr_graph_free(zoo);
    qr_quantized_free(apart);
    qr_quantized_free(dflt);
    qr_module_free(m0);
    qr_module_free(m1);
    qr_graph_free(g);
    qr_tensor_free(&x);
}
