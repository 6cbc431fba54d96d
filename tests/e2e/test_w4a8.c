/* W4A8 (QRL-I item 3): per-channel int4 weights with 8-bit activations, through `qrl quantize` on
 * the small models of tools/make_w4a8_models.py: a Conv with group 2, strides 2 and asymmetric
 * pads, a depthwise Conv (group 6, strides [1, 2]), a Gemm with transB and bias, a MatMul by a
 * constant, and a Gemm without transB (channels on w's axis 1) with a Relu; weights of both signs
 * with one channel 30 times the others. The oracles are independent of QRL:
 * tests/e2e/w4a8_oracle.py checks the export's INT4 integers, scales and zero points against
 * numpy's per-channel RTN bit for bit, and runs the export's integer arithmetic in numpy (exact
 * int64 sums, ONNX's float multipliers); ONNX Runtime runs the same file. QRL's integer graph (the
 * export run by `qrl run`, and the recipe's in memory) must equal numpy's integers, and ONNX
 * Runtime's run and QRL's simulated graph (--qdq-recipe with no patterns) must be within one step
 * of the output's integers (a tie rounded the other way). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

#define W4 "  weight = i4 symmetric narrow per_channel by minmax(symmetric = true)\n"

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_w4a8_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* RTN recipes (minmax: what the oracle computes), u8 and i8 activations, and the simulated graph's */
    tu_write_file(dir, "rtn_u8.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                             "recipe rtn_u8 {\n  activation = u8 asymmetric by minmax()\n" W4 "}\n");
    tu_write_file(dir, "rtn_i8.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                             "recipe rtn_i8 {\n  activation = i8 symmetric by minmax(symmetric = true)\n" W4 "}\n");
    tu_write_file(dir, "sim.qrl", "import \"calibrators.qrl\"\nrecipe sim {\n  activation = u8 asymmetric by minmax()\n" W4 "}\n");
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(w4a8, .init = setup, .fini = teardown, .timeout = 600);

static char *run_ok(const char *cmd)
{
    char *log;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\n%s", cmd, log);
    return log;
}

/* More arguments for w4a8_oracle.py (--int8 NAMES: the weights a `weight for` makes 8-bit). */
static const char *oracle_opts = "";

/* Quantizes MODEL with recipe (a file in dir, or under the root with root=1), checks the weights
 * and the integer reference (w4a8_oracle.py: `nweights` weights), and compares every run with
 * numpy's integers. Returns quantize's output (malloc'd). */
static char *check(const char *model, const char *recipe, int root, int nweights, int nout,
                   const char *const *outs)
{
    char cmd[8192], rec[4096], tag[256];
    if (root)
        snprintf(rec, sizeof rec, "%s/%s", tu_root(), recipe);
    else
        snprintf(rec, sizeof rec, "%s/%s", dir, recipe);
    snprintf(tag, sizeof tag, "%s_%.*s", model, (int)(strcspn(strrchr(recipe, '/') ? strrchr(recipe, '/') + 1 : recipe,
                                                              ".")), strrchr(recipe, '/') ? strrchr(recipe, '/') + 1 : recipe);
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize %s.onnx --recipe '%s' --calib %s_calib.npy -o %s.onnx", dir,
             tu_qrl(), model, rec, model, tag);
    char *qlog = run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 '%s/tests/e2e/w4a8_oracle.py' %s.onnx %s.onnx %s_x.npy np_%s%s",
             dir, tu_root(), model, tag, model, tag, oracle_opts);
    char *log = run_ok(cmd);
    char want[64];
    snprintf(want, sizeof want, "ok %d\n", nweights);
    cr_assert(strstr(log, want), "%s: the oracle checked other weights than %d: %s", tag, nweights, log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd %s && node '%s/tools/ort_run.js' %s.onnx %s_x.npy -o ort_%s", dir, tu_root(), tag,
             model, tag);
    free(run_ok(cmd));
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.onnx -i %s_x.npy -o int_%s", dir, tu_qrl(), tag, model, tag);
    free(run_ok(cmd));
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.onnx --qdq-recipe sim.qrl -i %s_x.npy -o sim_%s", dir, tu_qrl(),
             tag, model, tag);
    free(run_ok(cmd));
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.onnx --recipe '%s' --calib %s_calib.npy -i %s_x.npy -o mem_%s", dir,
             tu_qrl(), model, rec, model, model, tag);
    free(run_ok(cmd));
    for (int i = 0; i < nout; i++) {
        char path[4096], ref[4096], got[4096];
        snprintf(path, sizeof path, "%s/np_%s/%s.scale", dir, tag, outs[i]);
        char *s = tu_slurp(path);
        double step = atof(s);
        free(s);
        cr_assert_gt(step, 0, "%s: no QuantizeLinear made output %s", tag, outs[i]);
        snprintf(ref, sizeof ref, "%s/np_%s/%s.npy", dir, tag, outs[i]);
        const char *runs[] = {"int", "mem", "ort", "sim"};
        const double tol[] = {0, 0, 1.001, 1.001}; /* QRL's integers are numpy's; ORT's and f32's within a tie */
        for (int r = 0; r < 4; r++) {
            snprintf(got, sizeof got, "%s/%s_%s/%s.npy", dir, runs[r], tag, outs[i]);
            double d = tu_npy_max_diff(ref, got) / step;
            cr_assert_leq(d, tol[r], "%s output %s: %s differs from numpy's integers by %.3f steps of %g", tag, outs[i],
                          runs[r], d, step);
        }
    }
    return qlog;
}

static const char *const cnn_outs[] = {"Y", "Z"};

/* Conv (group 2), depthwise Conv, Gemm (transB) and MatMul: four 4-bit weights, u8 activations.
 * The summary counts the weights' integers at 4 bits: (108 + 54 + 420 + 35 + 1) / 2 rounded up per
 * tensor = 54 + 27 + 210 + 18 = 309 bytes, against 4 * 617 = 2468 in f32. */
Test(w4a8, cnn_u8_activations_match_numpy_and_ort)
{
    char *log = check("cnn", "rtn_u8.qrl", 0, 4, 2, cnn_outs);
    cr_assert(strstr(log, "bytes:     309 of weight integers (4 of 4 weights 4-bit), 2468 in f32: 0.125x"), "%s", log);
    free(log);
}

Test(w4a8, cnn_i8_activations_match_numpy_and_ort)
{
    free(check("cnn", "rtn_i8.qrl", 0, 4, 2, cnn_outs));
}

/* weight for: the Gemm (by its op) and the first Conv (by its node's name) take 8-bit weights, the
 * other two stay 4-bit. The oracle checks w1 and w3 as numpy's INT8 RTN and w2 and w4 as INT4, and
 * the integer runs against numpy's integers; the summary counts 108 + 54 / 2 + 420 + 35 / 2 (up) =
 * 573 bytes of integers, 2 of 4 weights 4-bit. */
Test(w4a8, weight_for_chosen_layers_takes_8_bits)
{
    tu_write_file(dir, "ends8.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                                    "recipe ends8 {\n  activation = u8 asymmetric by minmax()\n" W4
                                    "  weight for Gemm, \"conv1\" = i8 symmetric narrow per_channel by "
                                    "minmax(symmetric = true)\n}\n");
    oracle_opts = " --int8 w1,w3";
    char *log = check("cnn", "ends8.qrl", 0, 4, 2, cnn_outs);
    oracle_opts = "";
    cr_assert(strstr(log, "bytes:     573 of weight integers (2 of 4 weights 4-bit), 2468 in f32: 0.232x"), "%s", log);
    free(log);
}

/* One constant read by two MatMuls of which `weight for` names one: it cannot hold two types, so
 * quantize stops naming the weight and both readers, and writes nothing. */
Test(w4a8, weight_for_one_reader_of_a_shared_weight_is_an_error)
{
    tu_write_file(dir, "shared.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                                     "recipe sh {\n  activation = u8 asymmetric by minmax()\n" W4
                                     "  weight for \"mm_a\" = i8 symmetric narrow per_channel by "
                                     "minmax(symmetric = true)\n}\n");
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize shared.onnx --recipe shared.qrl --calib gemm_n_calib.npy -o "
             "shared_q.onnx", dir, tu_qrl());
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "weight 'w' is read by 'mm_a' and 'mm_b', which the recipe's weight settings give different "
                          "types"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/shared_q.onnx", dir);
    cr_assert(!tu_file_exists(cmd), "no partial output");
}

/* Gemm without transB: the output channels are w's axis 1. */
Test(w4a8, gemm_channels_on_axis_1_match_numpy_and_ort)
{
    static const char *const outs[] = {"Y"};
    free(check("gemm_n", "rtn_u8.qrl", 0, 1, 1, outs));
}

/* ONNX Runtime's run of cnn (DIR/ort_TAG) against QRL's (DIR/int_TAG): within tol of each output's
 * largest value. */
static void cnn_ort_agrees(const char *tag, double tol)
{
    for (int i = 0; i < 2; i++) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/ort_%s/%s.npy", dir, tag, cnn_outs[i]);
        snprintf(b, sizeof b, "%s/int_%s/%s.npy", dir, tag, cnn_outs[i]);
        double d = tu_npy_rel_diff(a, b);
        cr_assert(d >= 0 && d < tol, "%s output %s: ORT vs QRL %g of the largest value", tag, cnn_outs[i], d);
    }
}

/* The shipped recipe: its weights are INT4 per channel at opset 21, and ONNX Runtime runs the
 * export within a step of QRL's integer graph. */
Test(w4a8, shipped_recipe_runs_in_ort)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize cnn.onnx --recipe '%s/recipes/w4a8.qrl' --calib cnn_calib.npy "
             "-o cnn_shipped.onnx && node '%s/tools/ort_run.js' cnn_shipped.onnx cnn_x.npy -o ort_shipped && "
             "%s run cnn_shipped.onnx -i cnn_x.npy -o int_shipped && /usr/bin/python3 -c \"import onnx; "
             "m = onnx.load('cnn_shipped.onnx'); print('opset', m.opset_import[0].version, 'int4', "
             "sorted(t.name for t in m.graph.initializer if t.data_type == 22))\"", dir, tu_qrl(), tu_root(),
             tu_root(), tu_qrl());
    char *log = run_ok(cmd);
    cr_assert(strstr(log, "opset 21 int4 ['w1_quantized', 'w1_zero_point', 'w2_quantized', 'w2_zero_point', "
                          "'w3_quantized', 'w3_zero_point', 'w4_quantized', 'w4_zero_point']"), "%s", log);
    free(log);
    cnn_ort_agrees("shipped", 0.05);
}

/* u4 weights with integer activations: the stdlib's Conv kernel takes i8 weights (i4 ones in
 * their i8 container), so the pattern says which kernel refuses what, at its place in
 * patterns.qrl. */
Test(w4a8, u4_weights_are_refused_by_the_kernels_types)
{
    tu_write_file(dir, "u4.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                         "recipe u4w {\n  activation = u8 asymmetric by minmax()\n"
                         "  weight = u4 asymmetric per_channel by minmax()\n}\n");
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize cnn.onnx --recipe u4.qrl --calib cnn_calib.npy -o u4.onnx", dir,
             tu_qrl());
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "stdlib/patterns.qrl:") && strstr(log, "kernel 'qlinear<u8>' takes 'w' as tensor<i8>, but the "
                                                             "recipe makes it u8 (the model's 'w1')"), "%s", log);
    cr_assert(!strstr(log, "Sanitizer"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/u4.onnx", dir);
    cr_assert(!tu_file_exists(cmd), "no partial output");
}

/* The fallback's search with 4-bit weights: a recipe that sends the layers losing more than 28 dB
 * alone to f32 keeps their weights f32 in the export (the Conv with group 2 stays INT4), the
 * summary counts only the 4-bit weight's bytes, and ONNX Runtime runs the mixed file as QRL does. */
Test(w4a8, fallback_keeps_the_weights_of_f32_layers_f32)
{
    tu_write_file(dir, "fb.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                                 "recipe fb {\n  activation = u8 asymmetric by minmax()\n" W4
                                 "  fallback = f32 when sqnr < 28\n}\n");
    char *log = tu_sh("cd %s && %s quantize cnn.onnx --recipe fb.qrl --calib cnn_calib.npy -o cnn_fb.onnx && "
                      "/usr/bin/python3 -c \"import onnx; m = onnx.load('cnn_fb.onnx'); print('opset', "
                      "m.opset_import[0].version, sorted((t.name, t.data_type) for t in m.graph.initializer if "
                      "t.name[0] == 'w'))\" && node '%s/tools/ort_run.js' cnn_fb.onnx cnn_x.npy -o ort_fb && "
                      "%s run cnn_fb.onnx -i cnn_x.npy -o int_fb", dir, tu_qrl(), tu_root(), tu_qrl());
    cr_assert(strstr(log, "3 tensors fell back to f32"), "%s", log);
    cr_assert(strstr(log, "bytes:     54 of weight integers (1 of 1 weights 4-bit), 432 in f32: 0.125x"), "%s", log);
    cr_assert(strstr(log, "opset 21 [('w1_quantized', 22), ('w1_scale', 1), ('w1_zero_point', 22), ('w2', 1), "
                          "('w3', 1), ('w4', 1)]"), "%s", log);
    free(log);
    cnn_ort_agrees("fb", 0.01);
}
