/* The fallback's 16-bit step (fallback = u16 then f32 when ...; QRL-J) on tools/make_ladder_model.py's
 * three-output model: a layer whose u8 rounding ruins an output but whose readers take 16 bits
 * stays on the integers at u16; a layer that fails at any width (its weights) and one whose only
 * reader is a Sigmoid's 8-bit lookup table go to f32; the rest stays u8.
 * tests/e2e/ladder_oracle.py derives the decision independently (numpy's fake-quantized model under
 * every assignment, brute force) and checks the export's types against it; ONNX Runtime runs the
 * export to QRL's outputs. A ladder naming an unknown type is an error at its place. The shipped
 * recipes/int8-a16-fallback.qrl judges the step on held-out samples at a lower bound (ladder_ho.onnx). */
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
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_ladder_model.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(ladder, .init = setup, .fini = teardown, .timeout = 300);

/* dir/NAME.qrl: an int8 recipe whose fallback line is `fallback`. */
static void write_recipe(const char *name, const char *fallback, char *path, size_t n)
{
    char text[2048];
    snprintf(text, sizeof text,
             "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n\nrecipe %s {\n"
             "  activation = u8 asymmetric by minmax()\n"
             "  weight     = i8 symmetric per_channel by minmax(symmetric = true)\n"
             "  bias       = i32\n  tolerance  = 3\n  fallback   = %s\n  outputs    = worst\n  order      = worst\n}\n",
             name, fallback);
    tu_write_file(dir, strcat(strcpy((char[256]){0}, name), ".qrl"), text);
    snprintf(path, n, "%s/%s.qrl", dir, name);
}

/* At 25 dB, each output on its own: a goes to u16 (y1 meets 25 dB only so), y2 and d to f32, the
 * rest u8, as numpy's brute force decides; the summary counts them and the integer MACs (a and
 * y1's Convs); ONNX Runtime runs the export on unseen samples to QRL's outputs. */
Test(ladder, a_layer_too_noisy_at_u8_stays_integer_at_u16)
{
    char recipe[4096], cmd[8192], *out, *log;
    write_recipe("ladder", "u16 then f32 when output_sqnr < 25", recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/ladder.onnx --recipe %s --calib %s/ladder_x.npy -o %s/out.onnx "
             "--report %s/out.json", tu_qrl(), dir, recipe, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    tu_write_file(dir, "summary.txt", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/ladder_oracle.py' %s/ladder.onnx %s/out.onnx "
             "%s/ladder_x.npy 25 %s/summary.txt %s/out.json", tu_root(), dir, dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    cr_assert(!strncmp(log, "ok ", 3), "%s", log);
    free(log);
    char path[4096];
    snprintf(path, sizeof path, "%s/out.json", dir);
    cr_assert_eq(tu_json_number(path, "widened"), 1, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run %s/out.onnx -i %s/ladder_test.npy -o %s/qrl_out && node '%s/tools/ort_run.js' "
             "%s/out.onnx %s/ladder_test.npy -o %s/ort_out", tu_qrl(), dir, dir, dir, tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    const char *outs[] = {"y1", "y2", "y3"};
    for (int i = 0; i < 3; i++) {
        char ref[4096], got[4096];
        snprintf(ref, sizeof ref, "%s/ort_out/%s.npy", dir, outs[i]);
        snprintf(got, sizeof got, "%s/qrl_out/%s.npy", dir, outs[i]);
        double d = tu_npy_rel_diff(ref, got);
        cr_assert(d >= 0 && d < 1e-5, "%s: ORT vs QRL: %g", outs[i], d);
    }
}

/* A layer that only an activation written as several nodes reads (HardSwish as a * HardSigmoid(a)):
 * the step is open through the pattern's lowering from 16 bits into 8 (qact_narrow), and a goes to
 * u16 with every MAC on the integers, as numpy says it must (u8 misses 25 dB, u16 meets it); ONNX
 * Runtime runs the export to QRL's outputs. */
Test(ladder, a_layer_read_by_an_activation_pattern_goes_to_u16)
{
    char recipe[4096], cmd[8192], *out, *log;
    write_recipe("hs", "u16 then f32 when output_sqnr < 25", recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/ladder_hs.onnx --recipe %s --calib %s/ladder_x.npy -o %s/hs.onnx "
             "--report %s/hs.json", tu_qrl(), dir, recipe, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "0 tensors fell back to f32, 1 to 16 bits") && strstr(out, "100.0% of"), "%s", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/ladder_oracle.py' hs %s/ladder_hs.onnx %s/hs.onnx "
             "%s/ladder_x.npy 25 %s/hs.json", tu_root(), dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    free(log);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run %s/hs.onnx -i %s/ladder_test.npy -o %s/qrl_hs && node '%s/tools/ort_run.js' "
             "%s/hs.onnx %s/ladder_test.npy -o %s/ort_hs", tu_qrl(), dir, dir, dir, tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    char ref[4096], got[4096];
    snprintf(ref, sizeof ref, "%s/ort_hs/y.npy", dir);
    snprintf(got, sizeof got, "%s/qrl_hs/y.npy", dir);
    double d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < 1e-5, "ORT vs QRL: %g", d);
}

/* recipes/int8-a16-fallback.qrl (the 16-bit step judged on a spread quarter held out, by
 * sample_balanced_lower) on ladder_ho.onnx: its 64 samples calibrate on 48 and judge on x[3::4], two
 * of which are quiet; there the plain mean of the error ratios keeps a at u8 (25.9 dB by numpy) and
 * the bound (24.0) sends it to u16. tests/e2e/ladder_oracle.py derives the decision by brute force
 * over a's and y's widths on the held-out samples with numpy and checks the export's types and a's
 * 16-bit scale (the 48 samples' range); tests/e2e/samples_oracle.py checks the report's output
 * SQNR against numpy's bound on ONNX Runtime's outputs of the export on x[3::4] (0.01 dB); ONNX
 * Runtime runs the export on unseen samples to QRL's outputs. */
Test(ladder, the_16_bit_step_judged_on_held_out_samples_at_a_lower_bound)
{
    char cmd[8192], *out, *log, path[4096];
    snprintf(cmd, sizeof cmd, "%s quantize %s/ladder_ho.onnx --recipe '%s/recipes/int8-a16-fallback.qrl' --calib "
             "%s/ladder_ho_x.npy -o %s/ho.onnx --report %s/ho.json", tu_qrl(), dir, tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    tu_write_file(dir, "ho.txt", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/ladder_oracle.py' holdout %s/ladder_ho.onnx %s/ho.onnx "
             "%s/ladder_ho_x.npy 25 %s/ho.txt %s/ho.json", tu_root(), dir, dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    cr_assert(!strncmp(log, "ok ", 3), "%s", log);
    free(log);
    free(out);
    snprintf(path, sizeof path, "%s/ho.json", dir);
    cr_assert_eq(tu_json_number(path, "validate_samples"), 16);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/samples_oracle.py' %s/ladder_ho.onnx %s/ho.onnx "
             "%s/ladder_ho_val.npy 0.01 sample_balanced_lower=%.6f", tu_root(), dir, dir, dir,
             tu_json_number(path, "output_sqnr_db"));
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s run %s/ho.onnx -i %s/ladder_ho_test.npy -o %s/qrl_ho && node '%s/tools/ort_run.js' "
             "%s/ho.onnx %s/ladder_ho_test.npy -o %s/ort_ho", tu_qrl(), dir, dir, dir, tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    char ref[4096], got[4096];
    snprintf(ref, sizeof ref, "%s/ort_ho/y.npy", dir);
    snprintf(got, sizeof got, "%s/qrl_ho/y.npy", dir);
    double d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < 1e-5, "ORT vs QRL: %g", d);
}

/* A step that names no 16-bit type: qrl quantize stops at its file:line:col, with a caret under
 * it, and writes nothing. */
Test(ladder, a_step_of_an_unknown_type_is_an_error_at_its_place)
{
    char recipe[4096], cmd[8192], *out, path[4096];
    write_recipe("bad", "u12 then f32 when output_sqnr < 25", recipe, sizeof recipe);
    snprintf(path, sizeof path, "%s/bad.onnx", dir);
    snprintf(cmd, sizeof cmd, "%s quantize %s/ladder.onnx --recipe %s --calib %s/ladder_x.npy -o %s 2>&1", tu_qrl(), dir,
             recipe, dir, path);
    cr_assert_neq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "bad.qrl:10:16: error: unknown type 'u12'; the fallback's step before f32 is u16 or i16 "
                          "(16-bit activations); did you mean 'u16'?"), "%s", out);
    cr_assert(strstr(out, "\n      |                ^~~\n"), "%s", out);
    cr_assert(!tu_file_exists(path), "a failed quantize left %s", path);
    free(out);
}
