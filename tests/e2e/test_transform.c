/* Recipe transforms (stdlib/transforms.qrl, quantizer/transform.c) end to end through the qrl
 * command. SmoothQuant on the small decoders of tools/make_transformer_models.py: gpt_outliers
 * (4 channels of every LayerNorm scale 20x larger, as trained LLMs have them) and the post-LN
 * encoder; its oracle is tests/e2e/smoothquant_oracle.py, the paper's formula evaluated in
 * PyTorch on the same calibration samples. Cross-layer equalization on a small CNN; its oracle is
 * tests/e2e/equalize_oracle.py, the paper's formula in numpy. Never QRL's own numbers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    tu_make_transformer_models(dir);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(transform, .init = setup, .fini = teardown, .timeout = 600);

/* qrl quantize MODEL with RECIPE (a path) into DIR/MODEL.TAG.onnx, with a JSON report; the log. */
static char *quantize(const char *model, const char *recipe, const char *tag, int *rc)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize '%s/%s.onnx' --recipe '%s' --calib '%s/%s_calib.npy' -o '%s/%s.%s.onnx' "
             "--report '%s/%s.%s.json' 2>&1",
             tu_root(), tu_qrl(), dir, model, recipe, dir, model, dir, model, tag, dir, model, tag);
    *rc = tu_run(cmd, &log);
    return log;
}

/* The LayerNorm scales and biases and every reader's weight in the export are PyTorch's, rescaled
 * by the s PyTorch computes from the paper's formula on the samples the recipe calibrates on
 * (int8-smooth.qrl derives from int8.qrl: 24 of the 32, the last of every four held out); the plain
 * recipe's export fails the same oracle (it checks something). */
Test(transform, rewrite_matches_the_formula_evaluated_in_pytorch)
{
    int rc;
    char *log = quantize("gpt_outliers", "recipes/int8-smooth.qrl", "smooth", &rc);
    cr_assert_eq(rc, 0, "%s", log);
    cr_expect(strstr(log, "transform smoothquant(alpha = 0.5)") && strstr(log, "rescaled 5 of the 5 values"),
              "the summary names the transform and the 5 LayerNorms (2 blocks x 2 + the final one):\n%s", log);
    free(log);
    log = quantize("gpt_outliers", "recipes/int8-minmax.qrl", "plain", &rc);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    const char *tags[] = {"smooth", "plain"};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 tests/e2e/smoothquant_oracle.py '%s' '%s/gpt_outliers.%s.onnx' 0.5 tools "
                 "smooth spread",
                 tu_root(), dir, dir, tags[i]);
        int orc = tu_run(cmd, &log);
        if (i == 0)
            cr_expect_eq(orc, 0, "the export against PyTorch's SmoothQuant: %s", log);
        else
            cr_expect_neq(orc, 0, "the plain export passed the oracle: %s", log);
        free(log);
    }
}

/* AWQ-style scaling before weight-only int4 (recipes/w4-awq.qrl): the LayerNorms and every
 * reader's INT4 blocks are PyTorch's, rescaled by s = mean|y|^0.5 from the same calibration
 * samples; w4-rtn's export fails the oracle; and on the decoder's outlier channels the scaling
 * lowers the output error on samples never calibrated on (its point). */
Test(transform, awq_scaling_matches_pytorch_before_int4_weights)
{
    int rc;
    char *log = quantize("gpt_outliers", "recipes/w4-awq.qrl", "awq", &rc);
    cr_assert_eq(rc, 0, "%s", log);
    cr_expect(strstr(log, "transform awq(alpha = 0.5)") && strstr(log, "rescaled 5 of the 5 values"), "%s", log);
    free(log);
    log = quantize("gpt_outliers", "recipes/w4-rtn.qrl", "rtn", &rc);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    const char *tags[] = {"awq", "rtn"};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 tests/e2e/smoothquant_oracle.py '%s' '%s/gpt_outliers.%s.onnx' 0.5 tools awq",
                 tu_root(), dir, dir, tags[i]);
        int orc = tu_run(cmd, &log);
        if (i == 0)
            cr_expect_eq(orc, 0, "the export against PyTorch's AWQ scaling: %s", log);
        else
            cr_expect_neq(orc, 0, "the plain export passed the oracle: %s", log);
        free(log);
    }
}

/* The point of it: the LayerNorm outputs' calibrated ranges lose their outliers (20x channels),
 * so their 8-bit scales shrink by far more than 4x; from the reports' observed ranges. */
Test(transform, layernorm_output_ranges_shrink)
{
    int rc;
    double amax[2];
    const char *recipes[] = {"recipes/int8-minmax.qrl", "recipes/int8-smooth.qrl"}, *tags[] = {"plain", "smooth"};
    for (int i = 0; i < 2; i++) {
        char *log = quantize("gpt_outliers", recipes[i], tags[i], &rc);
        cr_assert_eq(rc, 0, "%s", log);
        free(log);
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import json; L = json.load(open('%s/gpt_outliers.%s.json'))['layers']; "
                 "print(max(max(-l['observed_min'], l['observed_max']) for l in L if l['producer'] == 'LayerNormalization'))\"",
                 dir, tags[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(sscanf(log, "%lf", &amax[i]) == 1, "%s", log);
        free(log);
    }
    cr_log_info("LayerNorm outputs' largest |value|: %.2f plain, %.2f smoothed", amax[0], amax[1]);
    cr_expect_lt(amax[1] * 4, amax[0], "largest LayerNorm output %.2f smoothed, %.2f plain", amax[1], amax[0]);
}

/* A post-LN encoder's LayerNorms feed the next residual Add too, which cannot take channel
 * scales: each is left as it is with a note naming the reader, and the quantization goes on. */
Test(transform, a_value_it_cannot_rescale_is_noted)
{
    int rc;
    char *log = quantize("bert", "recipes/int8-smooth.qrl", "smooth", &rc);
    cr_assert_eq(rc, 0, "%s", log);
    cr_expect(strstr(log, "rescaled none of the 4 values it matched"), "%s", log);
    cr_expect(strstr(log, "left as it is: its reader") && strstr(log, "(Add) is no MatMul or Gemm"), "%s", log);
    free(log);
}

/* A scale function that gives no positive factor stops qrl quantize at the transform's line,
 * naming the channel and value; nothing is written. */
Test(transform, a_bad_factor_names_the_transform_and_writes_nothing)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/bad.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("import \"calibrators.qrl\"\nimport \"patterns.qrl\"\n"
          "transform flip(k: f64 = -1.0) {\n"
          "  match y = LayerNormalization(x, g, b?) where const(g)\n"
          "  scale(act: f64, weight: f64) -> f64 { return k * act / weight }\n"
          "}\n"
          "recipe r {\n  transform = flip(k = -2.0)\n  activation = u8 by minmax()\n"
          "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n",
          f);
    fclose(f);
    int rc;
    char *log = quantize("gpt_outliers", path, "bad", &rc);
    cr_expect_neq(rc, 0, "%s", log);
    cr_expect(strstr(log, "transform flip (") && strstr(log, "bad.qrl:3:11)"), "%s", log);
    cr_expect(strstr(log, "a channel's factor must be a positive finite number"), "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/gpt_outliers.bad.onnx", dir);
    cr_expect(!tu_file_exists(path), "a failed quantize left %s", path);
}

/* DIR's model and data from ORACLE (a script in tests/e2e: ORACLE make DIR), and DIR/RECIPE holding
 * text (printf's format, then its one string argument). */
static void make_model(const char *oracle, const char *recipe, const char *text, const char *arg)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/%s make '%s' 2>&1", tu_root(), oracle, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/%s", dir, recipe);
    FILE *f = fopen(cmd, "w");
    cr_assert(f);
    fprintf(f, text, arg, arg, arg, arg);
    fclose(f);
}

/* Cross-layer equalization of Conv -> Relu -> Conv -> Conv, per-tensor weights: both pairs
 * rewritten as numpy computes them from the f32 weights (dequantized export within half a step),
 * and the recipe without the transform fails the same oracle. */
Test(transform, equalize_matches_numpy_on_a_cnn)
{
    char cmd[4096], *log;
    make_model("equalize_oracle.py", "eq.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
          "recipe eq {\n  transform = equalize\n  activation = u8 asymmetric by minmax()\n"
          "  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n"
          "recipe plain {\n  activation = u8 asymmetric by minmax()\n"
          "  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n",
          "");
    const char *recipes[] = {"eq", "plain"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize cnn.onnx --recipe eq.qrl --recipe-name %s --calib cnn_calib.npy -o cnn.%s.onnx 2>&1",
                 dir, tu_qrl(), recipes[i], recipes[i]);
        int rc = tu_run(cmd, &log);
        cr_assert_eq(rc, 0, "%s", log);
        if (i == 0)
            cr_expect(strstr(log, "transform equalize(relu6 = false, grouped = false) (") && strstr(log, "rescaled 2 of the 2 values"), "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/equalize_oracle.py check '%s' '%s/cnn.%s.onnx'",
                 tu_root(), dir, dir, recipes[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        double worst = -1;
        cr_assert(sscanf(log, "%lf", &worst) == 1, "%s", log);
        if (i == 0)
            cr_expect_leq(worst, 1.001, "the export is %.3f half-steps from numpy's equalized weights", worst);
        else
            cr_expect_gt(worst, 10.0, "the plain export is within %.3f half-steps of the equalized weights", worst);
        free(log);
    }
}

/* Cross-layer equalization across a Clip(0, 4) into a Conv of 2 groups, then across a Relu, and
 * high-bias absorption after it (tests/e2e/dfq_oracle.py: the paper's formulas in numpy, inputs of
 * both signs, half of the first Conv's channels biased above 0): the transformed f32 model
 * (--transformed) holds numpy's weights, biases and per-channel bounds, and computes the original
 * model's outputs in ONNX Runtime on the calibration samples (absorption: exact where the
 * pre-activation stays above what it moved, which the calibration samples' minimum guarantees
 * there) and, equalization alone, on the test samples. Without relu6 the Clip pair is left alone,
 * which the same oracle refuses. */
Test(transform, equalize_across_relu6_and_absorb_bias_match_numpy)
{
    char cmd[4096], *log;
    make_model("dfq_oracle.py", "dfq.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe eq {\n  transform = equalize(relu6 = true, grouped = true)\n%s"
               "recipe eqabs {\n  transform = equalize(relu6 = true, grouped = true)\n  transform = absorb_bias()\n%s"
               "recipe plain {\n  transform = equalize()\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n");
    const char *recipes[] = {"eq", "eqabs", "plain"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize cnn6.onnx --recipe dfq.qrl --recipe-name %s --calib cnn6_calib.npy -o cnn6.%s.onnx "
                 "--transformed cnn6.%s.t.onnx 2>&1",
                 dir, tu_qrl(), recipes[i], recipes[i], recipes[i]);
        int rc = tu_run(cmd, &log);
        cr_assert_eq(rc, 0, "%s", log);
        if (i < 2)
            cr_expect(strstr(log, "transform equalize(relu6 = true, grouped = true) (") && strstr(log, "rescaled 2 of the 2 values"), "%s",
                      log);
        if (i == 1)
            cr_expect(strstr(log, "transform absorb_bias(margin = 0) (") &&
                      strstr(log, "moved a constant out of 2 of the 2 values"), "%s", log);
        if (i == 2)
            cr_expect(strstr(log, "rescaled 1 of the 2 values"), "the Clip pair left alone: %s", log);
        free(log);
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 tests/e2e/dfq_oracle.py check '%s' '%s/cnn6.%s.t.onnx' %s '%s/tools' 2>&1",
                 tu_root(), dir, dir, recipes[i], i == 1 ? "eqabs" : "eq", tu_root());
        rc = tu_run(cmd, &log);
        if (i == 2) {
            cr_expect_neq(rc, 0, "the model without the Clip pair's rewrite passed the oracle: %s", log);
            free(log);
            continue;
        }
        cr_assert_eq(rc, 0, "%s", log);
        double worst = -1, calib = -1, test = -1;
        cr_assert(sscanf(log, "%lf %lf %lf", &worst, &calib, &test) == 3, "%s", log);
        cr_log_info("%s: weights %.3g from numpy's, outputs %.3g (calibration) %.3g (test) from the model's", recipes[i],
                    worst, calib, test);
        cr_expect_leq(worst, 1e-5, "%s: weights, biases or bounds %.3g (relative) from numpy's", recipes[i], worst);
        cr_expect_leq(calib, 1e-5, "%s: f32 outputs %.3g (relative) from the model's on the calibration samples",
                      recipes[i], calib);
        if (i == 0)
            cr_expect_leq(test, 1e-5, "eq: f32 outputs %.3g (relative) from the model's on the test samples", test);
        free(log);
    }
}

/* A shift below 0 would move values under the Relu's 0: qrl quantize stops with the transform's
 * line, the value and the channel, and writes nothing. */
Test(transform, a_negative_shift_names_the_transform_and_writes_nothing)
{
    char cmd[4096], *log;
    make_model("dfq_oracle.py", "neg.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
               "transform down(amount: f64 = 0.5) {\n  match y = Relu(c) where c.op == \"Conv\"\n"
               "  shift(low: f64) -> f64 {\n    return -amount\n  }\n}\n"
               "recipe neg {\n  transform = down\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n");
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize cnn6.onnx --recipe neg.qrl --calib cnn6_calib.npy -o cnn6.neg.onnx 2>&1",
             dir, tu_qrl());
    cr_expect_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "neg.qrl:4:11") && strstr(log, "transform down") && strstr(log, "shift gave -0.5 for channel 0 of 'r2'"),
              "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/cnn6.neg.onnx", dir);
    cr_expect(!tu_file_exists(cmd), "a failed quantize left %s", cmd);
}

/* tests/e2e/bias_correct_oracle.py's model and data, and its recipes: bias_correct() alone, after
 * equalize() (two transform lines, applied in order), neither, and bias_correct() with half the
 * samples held out (validate = 0.5). */
static void make_bc_model(void)
{
    make_model("bias_correct_oracle.py", "bc.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe bc {\n  transform = bias_correct()\n%s"
               "recipe chain {\n  transform = equalize()\n  transform = bias_correct\n%s"
               "recipe plain {\n%s"
               "recipe bcv {\n  transform = bias_correct()\n  validate = 0.5\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n");
}

/* qrl quantize bc.onnx with recipe NAME of bc.qrl into bc.NAME.onnx; the log. */
static char *quantize_bc(const char *name)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize bc.onnx --recipe bc.qrl --recipe-name %s --calib bc_calib.npy -o bc.%s.onnx 2>&1",
             dir, tu_qrl(), name, name);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    return log;
}

/* ORT's output SQNR of export MODEL.NAME.onnx against the f32 MODEL.onnx on the held-out samples
 * MODEL_test.npy. */
static double ort_sqnr(const char *model, const char *name)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && node '%s/tools/ort_sqnr.js' %s.onnx %s.%s.onnx %s_test.npy", dir, tu_root(),
             model, model, name, model);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    const char *at = strstr(log, "\"sqnr_db\":");
    double db = NAN;
    cr_assert(at && sscanf(at + 10, "%lf", &db) == 1, "%s", log);
    free(log);
    return db;
}

static double held_out_sqnr(const char *name)
{
    return ort_sqnr("bc", name);
}

/* Bias correction of a Conv with a bias, a depthwise Conv and a 1x1 Conv without (they get one), a
 * MatMul without (it gets an Add) and a Gemm with alpha and beta: every bias in the export is
 * b - (W_q - W) E[x] as numpy computes it from the export's own W_q and PyTorch's E[x], to within
 * half a step of the bias's quantization; the plain export fails the oracle; and on samples never
 * calibrated on, ORT's output SQNR of the corrected export beats the plain one's by over 3 dB
 * (weights that quantize badly, inputs of non-zero mean). */
Test(transform, bias_correct_matches_numpy_and_lowers_the_output_error)
{
    char cmd[4096], *log;
    make_bc_model();
    log = quantize_bc("bc");
    cr_expect(strstr(log, "transform bias_correct(strength = 1) (") &&
              strstr(log, "corrected the bias of 5 of the 5 layers it matched (3 had none)"), "%s", log);
    free(log);
    free(quantize_bc("plain"));
    const char *names[] = {"bc", "plain"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/bias_correct_oracle.py check '%s' '%s/bc.%s.onnx'",
                 tu_root(), dir, dir, names[i]);
        int rc = tu_run(cmd, &log);
        double worst = INFINITY;
        if (rc == 0)
            cr_assert(sscanf(log, "%lf", &worst) == 1, "%s", log);
        if (i == 0)
            cr_expect(rc == 0 && worst <= 0.5001, "the export's biases are %.3f steps from numpy's: %s", worst, log);
        else
            cr_expect(rc != 0 || worst > 10, "the plain export passes the bias oracle (%.3f): %s", worst, log);
        free(log);
    }
    double bc = held_out_sqnr("bc"), plain = held_out_sqnr("plain");
    cr_expect_gt(bc, plain + 3, "held-out output SQNR: corrected %.2f dB, plain %.2f dB", bc, plain);
}

/* The samples validate holds out judge the result and feed nothing it is made of: with
 * validate = 0.5 the bias correction's E[x] is numpy's over the first 32 of the 64 calibration
 * samples (within half a step of each bias's quantization), not over all 64 (the two differ by
 * more than 10 steps somewhere). */
Test(transform, bias_correct_does_not_see_the_validate_samples)
{
    char cmd[4096], *log;
    make_bc_model();
    free(quantize_bc("bcv"));
    const int first[] = {32, 64};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 tests/e2e/bias_correct_oracle.py check '%s' '%s/bc.bcv.onnx' %d",
                 tu_root(), dir, dir, first[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        double worst = INFINITY;
        cr_assert(sscanf(log, "%lf", &worst) == 1, "%s", log);
        if (i == 0)
            cr_expect_leq(worst, 0.5001, "E[x] over the first 32 samples: the biases are %.3f steps off", worst);
        else
            cr_expect_gt(worst, 10, "E[x] over all 64 samples fits the biases too (%.3f steps)", worst);
        free(log);
    }
}

/* Two transform lines run in their order, each with its summary note: equalize rescales the
 * depthwise Conv -> pointwise Conv pair (the first pair's reader is depthwise: left alone without
 * grouped = true), then bias_correct corrects the equalized weights' quantization; the chain also
 * beats the plain recipe on the held-out samples. */
Test(transform, transforms_chain_in_the_recipes_order)
{
    make_bc_model();
    char *log = quantize_bc("chain");
    const char *eq = strstr(log, "transform equalize(relu6 = false, grouped = false) ("), *bc = strstr(log, "transform bias_correct(strength = 1) (");
    cr_expect(eq && bc && eq < bc, "equalize's summary, then bias_correct's:\n%s", log);
    cr_expect(strstr(log, "rescaled 1 of the 2 values it matched"), "%s", log);
    cr_expect(strstr(log, "corrected the bias of 5 of the 5 layers"), "%s", log);
    free(log);
    free(quantize_bc("plain"));
    double chain = held_out_sqnr("chain"), plain = held_out_sqnr("plain");
    cr_expect_gt(chain, plain + 3, "held-out output SQNR: chained %.2f dB, plain %.2f dB", chain, plain);
}

/* tests/e2e/adaround_oracle.py's model and data (a Conv with group 2, strides 2, pads (1, 0, 2, 1)
 * and dilations (1, 2), then a MatMul), and its recipes: adaround at non-default values, at its
 * defaults, and neither; per-channel weights. qrl quantize of each into ar.NAME.onnx. */
static void make_ar_model(void)
{
    make_model("adaround_oracle.py", "ar.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe ar {\n  transform = adaround(iters = 2, damp = 0.05, centered = false)\n%s"
               "recipe arc {\n  transform = adaround()\n%s"
               "recipe plain {\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    const char *names[] = {"ar", "arc", "plain"};
    for (int i = 0; i < 3; i++) {
        char cmd[4096], *log;
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize ar.onnx --recipe ar.qrl --recipe-name %s --calib ar_calib.npy -o ar.%s.onnx 2>&1",
                 dir, tu_qrl(), names[i], names[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        if (i < 2)
            cr_expect(strstr(log, "transform adaround(") && strstr(log, "rounded the weights of 2 of the 2 layers"),
                      "%s", log);
        free(log);
    }
}

/* The rounding optimizer on a strided, padded, dilated, grouped Conv and a MatMul, inputs of both
 * signs: every integer of both exports' weights is the one numpy's coordinate descent on the
 * same objective chooses (from PyTorch's im2col rows of the f32 model and the export's scales), at
 * non-default and default parameters; the layers' error E[(dw . x)^2] is at most 0.8 of
 * round-to-nearest's; and the plain export fails the oracle (it checks something). */
Test(transform, adaround_matches_numpy_on_a_grouped_strided_conv_and_a_matmul)
{
    make_ar_model();
    const char *names[] = {"ar", "arc", "plain", "plain"}, *args[] = {"2 0.05 0", "3 0.1 1", "2 0.05 0", "3 0.1 1"};
    for (int i = 0; i < 4; i++) {
        char cmd[4096], *log;
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 tests/e2e/adaround_oracle.py check '%s' '%s/ar.%s.onnx' '%s/ar.plain.onnx' %s",
                 tu_root(), dir, dir, names[i], dir, args[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        long diff = -1, total = 0;
        double mine = NAN, got = NAN, near = NAN;
        cr_assert(sscanf(log, "%ld %ld %lf %lf %lf", &diff, &total, &mine, &got, &near) == 5, "%s", log);
        cr_log_info("%s (%s): %ld of %ld integers differ from numpy's; error %.4g, numpy's %.4g, nearest %.4g",
                    names[i], args[i], diff, total, got, mine, near);
        if (i < 2) {
            cr_expect_eq(diff, 0, "%s: %ld of %ld integers differ from numpy's choice: %s", names[i], diff, total, log);
            cr_expect_leq(got, 0.8 * near, "%s: the layers' error %g, round-to-nearest's %g", names[i], got, near);
        } else {
            cr_expect_gt(diff, 10, "the plain export matches the optimizer's choice: %s", log);
        }
        free(log);
    }
}

/* A correction makes up for a layer's weight rounding, and learned rounding moves its f32 weights; a
 * layer the fallback keeps in f32 has no rounding, so it keeps the weight and bias it had before. With
 * every layer sent back (sqnr < 999: all but the model's input, which has no layer error of its own
 * and stays u8), the export of equalize + adaround + bias_correct computes what the same fallback
 * without transforms does: ORT against the f32 model on the held-out samples gives both the same SQNR
 * (the Conv's corrected bias, the ones the depthwise and 1x1 Convs were given, the MatMul's added Add
 * and the rounded weights all undone; the biases kept cost 21 dB). The layers left in integers keep
 * their corrections: the test above. */
Test(transform, a_layer_sent_back_to_f32_keeps_its_bias_uncorrected)
{
    make_model("bias_correct_oracle.py", "bc.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe allf32 {\n  transform = equalize()\n  transform = adaround()\n  transform = bias_correct()\n%s"
               "recipe allplain {\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n"
               "  fallback = f32 when sqnr < 999\n}\n");
    char *log = quantize_bc("allf32");
    cr_expect(strstr(log, "corrected the bias of 5 of the 5 layers it matched (3 had none)"), "%s", log);
    cr_expect(strstr(log, "; 6 tensors fell back to f32") && strstr(log, "; 0.0% of "), "%s", log);
    free(log);
    free(quantize_bc("allplain"));
    double all = held_out_sqnr("allf32"), plain = held_out_sqnr("allplain");
    cr_expect(plain > 40 && fabs(all - plain) < 0.5,
              "every layer in f32: %.2f dB after a bias correction, %.2f dB without one (against the f32 model)", all,
              plain);
}

/* End to end on the bias correction's model (per-tensor weights that quantize badly): adaround
 * alone lifts ORT's output SQNR on samples never calibrated on by over 3 dB; equalize, adaround and
 * bias_correct run in the recipe's order, each with its summary, and the chain also beats plain. */
Test(transform, adaround_lowers_the_held_out_error)
{
    make_model("bias_correct_oracle.py", "bc.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe ar {\n  transform = adaround(centered = false)\n%s"
               "recipe chain {\n  transform = equalize()\n  transform = adaround()\n  transform = bias_correct()\n%s"
               "recipe plain {\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n");
    char *log = quantize_bc("ar");
    cr_expect(strstr(log, "rounded the weights of 5 of the 5 layers it matched"), "%s", log);
    free(log);
    log = quantize_bc("chain");
    const char *eq = strstr(log, "transform equalize(relu6 = false, grouped = false) ("), *ar = strstr(log, "transform adaround("),
               *bc = strstr(log, "transform bias_correct(strength = 1) (");
    cr_expect(eq && ar && bc && eq < ar && ar < bc, "equalize's summary, adaround's, bias_correct's:\n%s", log);
    free(log);
    free(quantize_bc("plain"));
    double a = held_out_sqnr("ar"), chain = held_out_sqnr("chain"), plain = held_out_sqnr("plain");
    cr_log_info("held-out output SQNR: adaround %.2f dB, chain %.2f dB, plain %.2f dB", a, chain, plain);
    cr_expect_gt(a, plain + 3, "held-out output SQNR: adaround %.2f dB, plain %.2f dB", a, plain);
    cr_expect_gt(chain, plain + 3, "held-out output SQNR: chained %.2f dB, plain %.2f dB", chain, plain);
}

/* A flip function that moves every weight whatever it costs would flip them back and forth for
 * ever: the optimizer stops after 64 sweeps with a note saying so, and the quantization goes on. */
Test(transform, a_flip_that_never_stops_is_stopped_with_a_note)
{
    make_model("adaround_oracle.py", "always.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
               "transform always() {\n"
               "  match y = Conv(x, w, b?) | MatMul(x, w) where const(w)\n"
               "  flip(change: f64) -> f64 { return 1.0 }\n"
               "}\n"
               "recipe r {\n  transform = always()\n%s",
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize ar.onnx --recipe always.qrl --calib ar_calib.npy -o ar.always.onnx 2>&1",
             dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "11 output channels still moved weights after 64 sweeps and were stopped there"), "%s", log);
    free(log);
}

/* ORT's output SQNR (tools/ort_sqnr.js) of bc.NAME.onnx against the f32 bc.onnx on samples
 * [from, to) of bc_calib.npy. */
static double ort_sqnr_slice(const char *name, int from, int to)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np; np.save('bc_%d_%d.npy', "
             "np.load('bc_calib.npy')[%d:%d])\" && node '%s/tools/ort_sqnr.js' bc.onnx bc.%s.onnx bc_%d_%d.npy",
             dir, from, to, from, to, tu_root(), name, from, to);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    const char *at = strstr(log, "\"sqnr_db\":");
    double db = NAN;
    cr_assert(at && sscanf(at + 10, "%lf", &db) == 1, "%s", log);
    free(log);
    return db;
}

/* steps = measure: the summary's steps line and the JSON report's steps list give, after each
 * prefix of the chain (none, + equalize, + bias_correct), the output SQNR with every
 * layer quantized on the 32 held-out samples (validate = 0.5) and on the 32 calibrated on; the
 * oracle is ONNX Runtime's SQNR, on the same samples, of the exports of recipes that stop after
 * that prefix (no fallback: every layer quantized), against the f32 model. A recipe without
 * transform lines prints no steps line and writes no steps list; one whose chain has learned
 * rounding (adaround) lists each of its steps (stop 41 measured none: see the next test). */
Test(transform, steps_give_each_prefix_of_the_chain_as_ort_measures_it)
{
    char cmd[4096], *log;
    make_model("bias_correct_oracle.py", "st.qrl",
               "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
               "recipe steps {\n  transform = equalize()\n  transform = bias_correct(strength = 0.75)\n"
               "  steps = measure\n%s"
               "recipe p0 {\n%s"
               "recipe p1 {\n  transform = equalize()\n%s"
               "recipe p2 {\n  transform = equalize()\n  transform = bias_correct(strength = 0.75)\n%s",
               "  validate = 0.5\n  activation = u8 asymmetric by minmax()\n"
               "  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n");
    FILE *f = fopen(strcat(strcpy(cmd, dir), "/st.qrl"), "a");
    cr_assert(f);
    const char *rest = "  validate = 0.5\n  activation = u8 asymmetric by minmax()\n"
                       "  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n";
    fprintf(f, "recipe p3 {\n  transform = equalize()\n  transform = adaround(iters = 2, damp = 0.05)\n"
               "  transform = bias_correct(strength = 0.75)\n  steps = measure\n%srecipe none {\n  steps = measure\n%s",
            rest, rest);
    fclose(f);
    const char *names[] = {"steps", "p0", "p1", "p2", "p3", "none"};
    char *logs[6];
    for (int i = 0; i < 6; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize bc.onnx --recipe st.qrl --recipe-name %s --calib bc_calib.npy -o bc.%s.onnx "
                 "--report bc.%s.json 2>&1",
                 dir, tu_qrl(), names[i], names[i], names[i]);
        cr_assert_eq(tu_run(cmd, &logs[i]), 0, "%s", logs[i]);
    }
    cr_expect(strstr(logs[0], "on 32 held-out samples"), "%s", logs[0]);
    cr_expect(strstr(logs[0], "steps:     (validate, all quantized): none "), "%s", logs[0]);
    for (int i = 1; i < 6; i++)
        if (i != 4)
            cr_expect(!strstr(logs[i], "steps:"), "recipe %s prints a steps line:\n%s", names[i], logs[i]);
    cr_expect(strstr(logs[4], "steps:     (validate, all quantized): none ") && strstr(logs[4], " adaround "),
              "%s", logs[4]);
    /* the JSON report's list, read by python: name, calibrate_db, validate_db per line */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import json\nfor s in json.load(open('bc.steps.json'))['steps']: "
             "print(s['name'], s['calibrate_db'], s['validate_db'])\n"
             "assert [s['name'] for s in json.load(open('bc.p3.json'))['steps']] == "
             "['none', 'equalize', 'adaround', 'bias_correct']\n"
             "assert 'steps' not in json.load(open('bc.none.json'))\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    const char *want[] = {"none", "equalize", "bias_correct"};
    const char *at = log;
    for (int k = 0; k < 3; k++) {
        char name[64];
        double cal = NAN, val = NAN;
        int used = 0;
        cr_assert(sscanf(at, "%63s %lf %lf%n", name, &cal, &val, &used) == 3, "step %d of:\n%s", k, log);
        at += used;
        cr_expect_str_eq(name, want[k]);
        double ort_val = ort_sqnr_slice(names[1 + k], 32, 64), ort_cal = ort_sqnr_slice(names[1 + k], 0, 32);
        cr_log_info("after %s: validate %.3f dB (ORT %.3f), calibrate %.3f dB (ORT %.3f)", name, val, ort_val, cal,
                    ort_cal);
        cr_expect(fabs(val - ort_val) < 0.05, "after %s, validate: %.3f dB, ORT %.3f dB", name, val, ort_val);
        cr_expect(fabs(cal - ort_cal) < 0.05, "after %s, calibrate: %.3f dB, ORT %.3f dB", name, cal, ort_cal);
        /* the summary's line says the same figures (one decimal) */
        char one[64];
        snprintf(one, sizeof one, k ? " %s %.1f" : " %s %.1f dB", name, val);
        cr_expect(strstr(logs[0], one), "'%s' in:\n%s", one, logs[0]);
    }
    free(log);
    for (int i = 0; i < 6; i++)
        free(logs[i]);
}

/* steps = measure with learned rounding after another transform, on weights of 64 KiB and more
 * (tests/e2e/big_conv_model.py): the step figure after equalize shares the weights' blocks with a
 * copy of the graph, which makes them read-only; adaround then rewrote the weights in place and
 * crashed (stop 41, on ResNet-18, MobileNetV2 and PP-OCR rec; the other models' weights were
 * smaller). Now it runs, lists its three steps, and the step figures change nothing: the export's
 * graph is byte for byte the one of the same recipe without steps = measure, and its metadata the
 * same but the recipe text's hash. */
Test(transform, steps_with_learned_rounding_on_large_weights)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/big_conv_model.py '%s' 2>&1", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    const char *chain = "  transform = equalize()\n  transform = adaround(iters = 2, damp = 0.05)\n  validate = 0.5\n"
                        "  activation = u8 asymmetric by minmax()\n"
                        "  weight = i8 symmetric per_tensor by minmax(symmetric = true)\n}\n";
    /* one recipe name in both files: the export names its recipe (metadata qrl.recipe) */
    const char *names[] = {"steps", "nosteps"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s/big_%s.qrl", dir, names[i]);
        FILE *f = fopen(cmd, "w");
        cr_assert(f);
        fprintf(f, "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
                   "recipe big {\n%s%s", i ? "" : "  steps = measure\n", chain);
        fclose(f);
    }
    char *logs[2];
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize big.onnx --recipe big_%s.qrl --calib big_calib.npy -o big.%s.onnx "
                 "--report big.%s.json 2>&1",
                 dir, tu_qrl(), names[i], names[i], names[i]);
        cr_assert_eq(tu_run(cmd, &logs[i]), 0, "recipe %s:\n%s", names[i], logs[i]);
    }
    cr_expect(strstr(logs[0], "transform adaround(") && strstr(logs[0], "rounded the weights of 2 of the 2 layers"),
              "%s", logs[0]);
    cr_expect(!strstr(logs[1], "steps:"), "%s", logs[1]);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import json, math\ns = json.load(open('big.steps.json'))['steps']\n"
             "assert [x['name'] for x in s] == ['none', 'equalize', 'adaround'], s\n"
             "assert all(math.isfinite(x['validate_db']) and math.isfinite(x['calibrate_db']) for x in s), s\n"
             "import onnx\na, b = onnx.load('big.steps.onnx'), onnx.load('big.nosteps.onnx')\n"
             "assert a.graph.SerializeToString() == b.graph.SerializeToString(), 'the graphs differ'\n"
             "m = lambda x: {p.key: p.value for p in x.metadata_props if p.key != 'qrl.recipe_sha256'}\n"
             "assert m(a) == m(b), 'the metadata differ'\" 2>&1",
             dir);
    cr_expect_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (int i = 0; i < 2; i++)
        free(logs[i]);
}
