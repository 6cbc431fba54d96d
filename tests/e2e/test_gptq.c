/* GPTQ (QRL-I): stdlib/gptq.qrl's `gptq`, a layer calibrator written in QRL, against numpy's
 * run of the reference algorithm (tests/e2e/gptq_oracle.py) on layers whose Hessian is the graph
 * input's own X^T X, summed exactly on both sides (tools/make_gptq_models.py): the export's
 * integers, scales and zero points must be numpy's, bit for bit. Then the export runs in QRL and in
 * ONNX Runtime alike, and the misuses give messages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_gptq_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(gptq, .init = setup, .fini = teardown, .timeout = 300);

/* A weight-only recipe of `weight` (and `block`) written beside the stdlib's calibrators. */
static void write_recipe(const char *tag, const char *weight, int block, char *path, size_t n)
{
    snprintf(path, n, "%s/%s.qrl", dir, tag);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"gptq.qrl\"\nrecipe %s {\n  activation = f32\n  weight = %s\n", tag, weight);
    if (block)
        fprintf(f, "  block = %d\n", block);
    fprintf(f, "}\n");
    fclose(f);
}

/* qrl quantize with the recipe file, then numpy's GPTQ of every layer (MODE, BLOCK, DAMP as the
 * oracle reads them) must be the export's, and GPTQ's layer error below round-to-nearest's. */
static void check_gptq(const char *tag, const char *recipe, const char *mode, int block, const char *damp)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "%s quantize %s/gptq_layers.onnx --recipe %s --calib %s/x.npy -o %s/%s.onnx", tu_qrl(), dir,
             recipe, dir, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "2 quantized (weight-only"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/gptq_oracle.py' %s/gptq_layers.onnx %s/%s.onnx %s/x.npy %s %d %s",
             tu_root(), dir, dir, tag, dir, mode, block, damp);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    cr_assert(strstr(log, "ok 2"), "%s: %s", tag, log);
    /* the objective GPTQ minimizes: each layer's output error on the calibration rows */
    for (const char *p = log; (p = strstr(p, "GPTQ ")); p++) {
        double g = atof(p + 5), r = atof(strstr(p, "round-to-nearest ") + 17);
        cr_assert(g < r, "%s: GPTQ's layer error %g is not below round-to-nearest's %g: %s", tag, g, r, log);
    }
    free(log);
}

Test(gptq, w4_gptq_recipe_matches_numpy_reference)
{
    char recipe[4096];
    snprintf(recipe, sizeof recipe, "%s/recipes/w4-gptq.qrl", tu_root());
    check_gptq("w4_gptq", recipe, "sym", 32, "0.01");
}

Test(gptq, u4_zero_points_blocks_of_16_match_numpy_reference)
{
    char recipe[4096];
    write_recipe("u4_b16", "u4 asymmetric by gptq()", 16, recipe, sizeof recipe);
    check_gptq("u4_b16", recipe, "asym", 16, "0.01");
}

/* One group per output channel: its qparams from the weights before any update; more damping. */
Test(gptq, per_channel_with_damping_matches_numpy_reference)
{
    char recipe[4096];
    write_recipe("i4_pc", "i4 symmetric narrow per_channel by gptq(damp = 0.1)", 0, recipe, sizeof recipe);
    check_gptq("i4_pc", recipe, "sym", 0, "0.1");
}

/* The export in both forms runs the same in QRL and in ONNX Runtime on rows never calibrated on. */
Test(gptq, export_runs_alike_in_qrl_and_ort)
{
    char cmd[8192], *log, recipe[4096], a[4096], b[4096];
    snprintf(recipe, sizeof recipe, "%s/recipes/w4-gptq.qrl", tu_root());
    for (int nbits = 0; nbits < 2; nbits++) {
        snprintf(cmd, sizeof cmd, "%s quantize %s/gptq_layers.onnx --recipe %s --calib %s/x.npy -o %s/e%d.onnx%s", tu_qrl(),
                 dir, recipe, dir, dir, nbits, nbits ? " --weight-format matmulnbits" : "");
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s run %s/e%d.onnx -i %s/x_test.npy -o %s/qrl_e%d && node '%s/tools/ort_run.js' "
                 "%s/e%d.onnx %s/x_test.npy -o %s/ort_e%d", tu_qrl(), dir, nbits, dir, dir, nbits, tu_root(), dir, nbits,
                 dir, dir, nbits);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        for (int y = 1; y <= 2; y++) {
            snprintf(a, sizeof a, "%s/ort_e%d/Y%d.npy", dir, nbits, y);
            snprintf(b, sizeof b, "%s/qrl_e%d/Y%d.npy", dir, nbits, y);
            double d = tu_npy_rel_diff(a, b);
            cr_assert(d >= 0 && d < 1e-5, "form %d, Y%d: ORT vs QRL %g", nbits, y, d);
        }
    }
}

static void expect_failure(const char *args, const char *want)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "%s quantize %s/gptq_layers.onnx %s -o %s/bad.onnx", tu_qrl(), dir, args, dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, want), "expected '%s' in: %s", want, log);
    cr_assert(!strstr(log, "Sanitizer"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/bad.onnx", dir);
    cr_assert(!tu_file_exists(cmd), "an output file was left behind");
}

Test(gptq, misuses_are_refused_with_a_message)
{
    char recipe[4096], args[8192];
    write_recipe("per_tensor", "i4 symmetric narrow by gptq()", 0, recipe, sizeof recipe);
    snprintf(args, sizeof args, "--recipe %s --calib %s/x.npy", recipe, dir);
    expect_failure(args, "rounds a weight by blocks or by output channel");
    write_recipe("undamped", "i4 symmetric narrow by gptq(damp = 0)", 16, recipe, sizeof recipe);
    snprintf(args, sizeof args, "--recipe %s --calib %s/x_few.npy", recipe, dir);
    expect_failure(args, "not positive definite (raise the damping)");
    /* an integer recipe: the weight calibrator has no rows to see there */
    snprintf(recipe, sizeof recipe, "%s/int.qrl", dir);
    FILE *f = fopen(recipe, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nimport \"gptq.qrl\"\nrecipe int {\n  activation = u8 asymmetric by minmax()\n"
               "  weight = i8 symmetric per_channel by gptq()\n}\n");
    fclose(f);
    snprintf(args, sizeof args, "--recipe %s --calib %s/x.npy", recipe, dir);
    expect_failure(args, "only weight-only recipes (activation = f32) can use it");
    /* before weight-only rounding, rescalings only: a bias correction measures per-channel integer weights */
    snprintf(recipe, sizeof recipe, "%s/bc.qrl", dir);
    f = fopen(recipe, "w");
    cr_assert(f);
    fprintf(f, "import \"gptq.qrl\"\nimport \"transforms.qrl\"\nrecipe bc {\n  transform = bias_correct()\n"
               "  activation = f32\n  weight = i4 symmetric narrow by gptq()\n  block = 16\n}\n");
    fclose(f);
    snprintf(args, sizeof args, "--recipe %s --calib %s/x.npy", recipe, dir);
    expect_failure(args, "transform bias_correct corrects biases; a weight-only recipe takes rescalings only");
}
