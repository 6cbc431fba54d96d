/* Kernels that declare their tensors' shapes (tensor<T>[.., M, K]; docs/language.md, "Declared
 * shapes"), through the qrl command: tests/recipes/kernel_shapes.qrl writes attention's P.V as a
 * product the kernel computes itself, and a sum over the last axis, on a model whose shapes are
 * symbolic and whose P.V output has no shape at all (the inputs' broadcast, the rule before,
 * fails there: [s, s] and [s, 3]). Calibrated with 5 keys, run with 7: the output follows the
 * declared dims of the run's inputs. The oracle is numpy (tests/e2e/kernel_shapes_oracle.py):
 * the integer product from the qparams JSON, one rounding, saturation. Then the two ways a
 * declaration can disagree with the model: statically (at lowering, naming the pattern) and at
 * run time (a trap naming the dimension's place in the declaration). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CALIB "--calib p=p_calib.npy --calib v=v_calib.npy --calib x=x_calib.npy"
#define TEST_IN "-i p=p_test.npy -i v=v_test.npy -i x=x_test.npy"

static char *make_model(void)
{
    char *dir = tu_tmpdir(), cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/kernel_shapes_oracle.py make '%s' 2>&1", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    return dir;
}

/* The test recipe with `from` replaced by `to` (each must occur), written to dir/name. */
static void variant(const char *dir, const char *name, const char *const *from, const char *const *to, int n)
{
    char *src = tu_slurp_root("tests/recipes/kernel_shapes.qrl"), path[1024];
    cr_assert(src);
    for (int i = 0; i < n; i++) {
        char *at = strstr(src, from[i]);
        cr_assert(at, "the recipe has '%s'", from[i]);
        size_t pre = (size_t)(at - src), fl = strlen(from[i]), tl = strlen(to[i]);
        char *next = malloc(strlen(src) - fl + tl + 1);
        cr_assert(next);
        memcpy(next, src, pre);
        memcpy(next + pre, to[i], tl);
        strcpy(next + pre + tl, at + fl);
        free(src);
        src = next;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(src, f);
    fclose(f);
    free(src);
}

Test(kernel_shapes, attention_product_and_row_sum_agree_with_numpy, .timeout = 300)
{
    char *dir = make_model(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize pv.onnx --recipe '%s/tests/recipes/kernel_shapes.qrl' " CALIB
             " -o pv.int8.onnx --qparams pv.json 2>&1 && %s run pv.onnx --recipe '%s/tests/recipes/kernel_shapes.qrl' " CALIB
             " " TEST_IN " -o out 2>&1",
             dir, tu_qrl(), tu_root(), tu_qrl(), tu_root());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    cr_expect(strstr(log, "2 kernel calls, 0 lookup tables, 0 integer ops, 0 requantizations, 0 f32 islands"),
              "MatMul+Mul and ReduceSum are one kernel each:\n%s", log);
    /* by hand: 2 heads x 5 x 3 outputs x 5 keys per calibration sample (p, a graph input of symbolic
     * shape, as the calibration data gives it) */
    cr_expect(strstr(log, "100.0% of 150 MACs per sample in integers"), "the product's MACs:\n%s", log);
    cr_expect(strstr(log, "y: f32[3,2,7,3]") && strstr(log, "z: f32[3,7,1]"), "shapes of the run's inputs:\n%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/kernel_shapes_oracle.py check '%s' '%s/out'",
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int bad = -1, n = 0, distinct = 0;
    char shapes[16] = "";
    cr_assert(sscanf(log, "BAD %d OF %d SHAPES %15s DISTINCT %d", &bad, &n, shapes, &distinct) == 4, "%s", log);
    cr_expect_str_eq(shapes, "ok", "%s", log);
    cr_expect_eq(bad, 0, "%d of %d outputs differ from numpy's", bad, n);
    cr_expect_gt(distinct, 20, "the products cover many levels (%d)", distinct);
    free(log);
    tu_rmdir(dir);
}

/* A variant of the recipe (from -> to) in a fresh model folder, run by `qrl ARGS` (ARGS names the
 * recipe file NAME): it must fail with want, leaving no `left` (an output) behind. */
static void expect_variant_fails(const char *name, const char *const *from, const char *const *to, int n,
                                 const char *args, const char *want, const char *left)
{
    char *dir = make_model(), cmd[4096], *log, out[1024];
    variant(dir, name, from, to, n);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s %s 2>&1", dir, tu_qrl(), args);
    int rc = tu_run(cmd, &log);
    cr_expect_neq(rc, 0, "%s", log);
    cr_expect(strstr(log, want), "%s", log);
    snprintf(out, sizeof out, "%s/%s", dir, left);
    cr_expect(!tu_file_exists(out), "nothing written: %s", left);
    free(log);
    tu_rmdir(dir);
}

Test(kernel_shapes, a_declared_output_the_model_contradicts_stops_at_lowering, .timeout = 300)
{
    const char *from[] = {"y: tensor<T>[.., 1]"}, *to[] = {"y: tensor<T>[.., 2]"};
    expect_variant_fails("two.qrl", from, to, 1, "quantize pv.onnx --recipe two.qrl " CALIB " -o pv.int8.onnx",
                         "two.qrl:54:9: pattern 'last_axis_sum': kernel 'row_sum<u8>' declares an output of shape "
                         "[?,?,2] for this match, but the model's 'z' is [?,?,1]",
                         "pv.int8.onnx");
}

Test(kernel_shapes, a_dimension_that_differs_at_run_time_traps_at_its_declaration, .timeout = 300)
{
    /* 5 keys when calibrated, 7 when run */
    const char *from[] = {"x: tensor<T>[.., N]", "y: tensor<T>[.., 1]"};
    const char *to[] = {"x: tensor<T>[.., 5, N]", "y: tensor<T>[.., 5, 1]"};
    expect_variant_fails("five.qrl", from, to, 2, "run pv.onnx --recipe five.qrl " CALIB " " TEST_IN " -o out",
                         "kernel 'row_sum<u8>' (pattern 'last_axis_sum'): five.qrl:42:45: runtime error: the tensor's "
                         "dimension is 7 where the kernel's declared shape says 5",
                         "out");
}
