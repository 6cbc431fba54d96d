/* Narrow accumulators (QRL-I item 6): accumulate = iN, overflow = wrap | saturate, on the small
 * Conv (group 2, strides, dilations, asymmetric pads; 18 products per output), MatMul (K = 37)
 * and Gemm (transB, K = 29) of tools/make_acc_models.py, inputs of both signs. The oracle is tests/e2e/acc_oracle.py: numpy
 * reads the export's integers and qparams and sums the products k ascending as the ONNX
 * definitions order them, every partial sum kept to N bits, then requantizes as the stdlib's
 * qlinear does. QRL's report must count the same overflows on the calibration samples, and its
 * integer graph (`qrl run --recipe`, on other samples) must give the same outputs, bit for bit.
 * The simulated graph (the QDQ measurement) applies the same accumulator: its SQNR is the
 * integer graph's, below what i32 gives. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void write_recipe(const char *name, const char *acc, const char *overflow)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.qrl", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fprintf(f,
            "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nrecipe acc {\n"
            "  activation = u8 asymmetric by minmax()\n"
            "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n%s%s}\n",
            acc, overflow);
    fclose(f);
}

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_acc_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    write_recipe("i16_wrap", "  accumulate = i16\n", "");
    write_recipe("i16_saturate", "  accumulate = i16\n", "  overflow = saturate\n");
    write_recipe("i13_wrap", "  accumulate = i13\n", "  overflow = wrap\n");
    write_recipe("i13_saturate", "  accumulate = i13\n", "  overflow = saturate\n");
    write_recipe("i32", "  accumulate = i32\n", "");
    write_recipe("i16_minmax", "  accumulate = i16\n", "");
    write_recipe("none", "", "");
    tu_write_file(dir, "a2q.qrl", "import \"calibrators.qrl\"\nimport \"accumulator.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                                  "recipe acc {\n  activation = u8 asymmetric by minmax()\n"
                                  "  weight = i8 symmetric per_channel by a2q(acc_bits = 16, x_max = 255)\n"
                                  "  accumulate = i16\n}\n");
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(accwidth, .init = setup, .fini = teardown, .timeout = 600);

static void run_ok(const char *cmd)
{
    char *log;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\n%s", cmd, log);
    free(log);
}

/* The number after "key": in the text of layer value's entry of a report. */
static double layer_field(const char *report, const char *value, const char *key)
{
    char pat[256];
    snprintf(pat, sizeof pat, "{\"value\": \"%s\"", value);
    const char *l = strstr(report, pat);
    cr_assert(l, "no layer %s in the report", value);
    const char *end = strchr(l, '}');
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(l, pat);
    cr_assert(at && at < end, "layer %s has no %s", value, key);
    return strncmp(at + strlen(pat), "null", 4) ? atof(at + strlen(pat)) : NAN;
}

/* Quantizes MODEL with recipe TAG (BITS, MODE), checks the report's overflow count on the
 * calibration samples and the integer graph's outputs on other samples against numpy; returns
 * the report (malloc'd). */
static char *check(const char *model, const char *tag, int bits, const char *mode)
{
    char cmd[8192], path[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && %s quantize %s.onnx --recipe %s.qrl --calib %s_calib.npy -o %s.%s.onnx --report %s.%s.json",
             dir, tu_qrl(), model, tag, model, model, tag, model, tag);
    char *summary;
    cr_assert_eq(tu_run(cmd, &summary), 0, "%s\n%s", cmd, summary);
    snprintf(path, sizeof path, "%s/%s.%s.json", dir, model, tag);
    char *report = tu_slurp(path);
    char acc[64];
    snprintf(acc, sizeof acc, "\"accumulator\": {\"bits\": %d, \"overflow\": \"%s\"}", bits, mode);
    cr_assert(strstr(report, acc), "%s %s: no %s in\n%s", model, tag, acc, report);
    /* the overflows on the calibration samples */
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 '%s/tests/e2e/acc_oracle.py' %s.%s.onnx %s_calib.npy %d %s np_cal.npy",
             dir, tu_root(), model, tag, model, bits, mode);
    char *log;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\n%s", cmd, log);
    long long sums = -1, over = -1;
    cr_assert_eq(sscanf(log, "sums %lld overflows %lld", &sums, &over), 2, "%s", log);
    free(log);
    cr_assert_gt(over, 0, "%s %s: the case overflows nothing", model, tag);
    cr_assert_lt(over, sums / 2, "%s %s: most sums overflow", model, tag);
    cr_assert_eq((long long)layer_field(report, "Y", "acc_sums"), sums, "%s %s", model, tag);
    cr_assert_eq((long long)layer_field(report, "Y", "acc_overflows"), over, "%s %s", model, tag);
    char line[256];
    snprintf(line, sizeof line, "accumulator: i%d, %s: %lld of %lld partial sums left its range (1 of 1 layers)", bits,
             strcmp(mode, "wrap") ? "saturating" : "wrapping", over, sums);
    cr_assert(strstr(summary, line), "%s %s: no '%s' in\n%s", model, tag, line, summary);
    free(summary);
    /* the integer graph's outputs on other samples */
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 '%s/tests/e2e/acc_oracle.py' %s.%s.onnx %s_x.npy %d %s np_%s_%s.npy",
             dir, tu_root(), model, tag, model, bits, mode, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.onnx --recipe %s.qrl --calib %s_calib.npy -i %s_x.npy -o int_%s_%s",
             dir, tu_qrl(), model, tag, model, model, model, tag);
    run_ok(cmd);
    char ref[4096], got[4096];
    snprintf(ref, sizeof ref, "%s/np_%s_%s.npy", dir, model, tag);
    snprintf(got, sizeof got, "%s/int_%s_%s/Y.npy", dir, model, tag);
    cr_assert_eq(tu_npy_max_diff(ref, got), 0, "%s %s: the integer graph differs from numpy", model, tag);
    /* the export run by the same recipe's integer graph */
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.%s.onnx --qdq-recipe %s.qrl -i %s_x.npy -o qdq_%s_%s", dir, tu_qrl(),
             model, tag, tag, model, model, tag);
    run_ok(cmd);
    snprintf(got, sizeof got, "%s/qdq_%s_%s/Y.npy", dir, model, tag);
    cr_assert_eq(tu_npy_max_diff(ref, got), 0, "%s %s: the export's run differs from numpy", model, tag);
    return report;
}

/* The simulated graph keeps the accumulator too: the QDQ measurement's SQNR is the integer
 * graph's, and below what the same model gets with i32. */
static void check_sim(const char *model, const char *report, const char *wide)
{
    double sim = layer_field(report, "Y", "sqnr_db"), ints = layer_field(report, "Y", "sqnr_int_db");
    cr_assert(fabs(sim - ints) < 0.05, "%s: simulated %.3f dB, integer graph %.3f dB", model, sim, ints);
    cr_assert_lt(sim, layer_field(wide, "Y", "sqnr_db") - 1, "%s: the simulation ignores the accumulator", model);
}

static void check_model(const char *model)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize %s.onnx --recipe i32.qrl --calib %s_calib.npy -o %s.i32.onnx --report %s.i32.json",
             dir, tu_qrl(), model, model, model, model);
    run_ok(cmd);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.i32.json", dir, model);
    char *wide = tu_slurp(path);
    cr_assert(!strstr(wide, "acc_overflows") && !strstr(wide, "\"accumulator\""), "%s", wide);
    const char *tags[] = {"i16_wrap", "i16_saturate", "i13_wrap", "i13_saturate"};
    for (int i = 0; i < 4; i++) {
        char *r = check(model, tags[i], tags[i][2] == '6' ? 16 : 13, strstr(tags[i], "wrap") ? "wrap" : "saturate");
        if (strstr(tags[i], "saturate"))
            check_sim(model, r, wide);
        free(r);
    }
    free(wide);
}

Test(accwidth, conv_overflows_and_outputs_match_numpy)
{
    check_model("conv");
}

Test(accwidth, matmul_overflows_and_outputs_match_numpy)
{
    check_model("mm");
}

Test(accwidth, gemm_overflows_and_outputs_match_numpy)
{
    check_model("gemm");
}

/* accumulate = i32 (wrapping, what ONNX does) changes nothing: the export's graph is the same as
 * without the setting (its metadata differs in the recipe's hash only). */
Test(accwidth, i32_is_the_default)
{
    char cmd[4096];
    const char *tags[] = {"i32", "none"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd %s && %s quantize conv.onnx --recipe %s.qrl --calib conv_calib.npy -o conv.%s.onnx",
                 dir, tu_qrl(), tags[i], tags[i]);
        run_ok(cmd);
    }
    snprintf(cmd, sizeof cmd,
             "cd %s && /usr/bin/python3 -c \"import onnx, sys; a, b = onnx.load('conv.i32.onnx'), onnx.load('conv.none.onnx'); "
             "sys.exit(a.graph.SerializeToString() != b.graph.SerializeToString())\"",
             dir);
    run_ok(cmd);
}

/* stdlib's a2q weight calibrator (A2Q's l1 bound per output channel) with accumulate = i16 and u8
 * activations (|x - x_zero| <= 255): the export's scales and integers are numpy's formula's bit for
 * bit and keep every channel's sum |q| * 255 within 32767 (tests/e2e/a2q_oracle.py), QRL's report
 * counts no overflow, nor does numpy's simulation of the accumulator on the calibration samples
 * (acc_oracle.py), and the output loses less than with minmax's weights, which overflow. */
static void check_a2q(const char *model)
{
    char *q = tu_sh("cd %s && %s quantize %s.onnx --recipe a2q.qrl --calib %s_calib.npy -o %s.a2q.onnx", dir,
                    tu_qrl(), model, model, model);
    cr_assert(strstr(q, "accumulator: i16, wrapping: 0 of ") && strstr(q, "(0 of 1 layers)"), "%s: %s", model, q);
    char *log = tu_sh("cd %s && /usr/bin/python3 '%s/tests/e2e/a2q_oracle.py' %s.onnx %s.a2q.onnx 16 255 && "
                      "/usr/bin/python3 '%s/tests/e2e/acc_oracle.py' %s.a2q.onnx %s_calib.npy 16 wrap np_a2q.npy",
                      dir, tu_root(), model, model, tu_root(), model, model);
    cr_assert(strstr(log, "ok 1 worst ") && strstr(log, " overflows 0\n"), "%s: %s", model, log);
    free(log);
    char *m = tu_sh("cd %s && %s quantize %s.onnx --recipe i16_minmax.qrl --calib %s_calib.npy -o %s.mm16.onnx", dir,
                    tu_qrl(), model, model, model);
    const char *sq = strstr(q, "output:    SQNR "), *sm = strstr(m, "output:    SQNR ");
    cr_assert(sq && sm && !strstr(m, "wrapping: 0 of "), "%s: %s\n%s", model, q, m);
    cr_assert_gt(atof(sq + 16), atof(sm + 16), "%s: a2q %s\nminmax %s", model, q, m);
    free(q);
    free(m);
}

Test(accwidth, a2q_bound_leaves_no_overflow)
{
    check_a2q("conv");
    check_a2q("mm");
    check_a2q("gemm");
}
