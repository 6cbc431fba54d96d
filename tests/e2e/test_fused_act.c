/* stdlib/patterns_fused.qrl: a Conv or Gemm whose output only HardSwish (x * HardSigmoid(x)) or
 * SiLU (x * Sigmoid(x)) reads runs as one layer, the activation on the accumulator's real value and
 * one quantization after it (kernels.qrl's qlinear_act), on tools/make_fused_act_models.py's models
 * (weights, biases and inputs of both signs).
 * tests/e2e/fused_act_oracle.py recomputes each output in numpy from the export's integers and
 * qparams and checks QRL's and ONNX Runtime's outputs on unseen samples against it. A Conv output
 * that another layer reads too is not fused; a QDQ file that quantizes the Conv's output before its
 * activation runs in `qrl run` as the file says (ONNX Runtime's outputs). */
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
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_fused_act_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* fused.qrl: with patterns_fused.qrl; plain.qrl: without (Conv, then the activation) */
    const char *head = "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n";
    const char *body = "  activation = u8 asymmetric by minmax()\n"
                       "  weight     = i8 symmetric per_channel by minmax(symmetric = true)\n  bias       = i32\n}\n";
    char text[2048];
    snprintf(text, sizeof text, "%simport \"patterns_fused.qrl\"\n\nrecipe fused {\n%s", head, body);
    tu_write_file(dir, "fused.qrl", text);
    snprintf(text, sizeof text, "%s\nrecipe plain {\n%s", head, body);
    tu_write_file(dir, "plain.qrl", text);
    snprintf(text, sizeof text, "%simport \"patterns_fused.qrl\"\n\nrecipe wide {\n"
             "  activation = u16 asymmetric by minmax()\n%s", head, strchr(body, '\n') + 1);
    tu_write_file(dir, "wide.qrl", text);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(fused_act, .init = setup, .fini = teardown, .timeout = 300);

/* qrl quantize MODEL with RECIPE to dir/OUT.onnx, then QRL and ORT run it on x_test.npy into
 * dir/qrl_OUT and dir/ort_OUT; returns qrl quantize's summary. */
static char *quantize_and_run(const char *model, const char *recipe, const char *out)
{
    char cmd[8192], *sum, *log;
    snprintf(cmd, sizeof cmd, "%s quantize %s/%s.onnx --recipe %s/%s.qrl --calib %s/x.npy -o %s/%s.onnx", tu_qrl(),
             dir, model, dir, recipe, dir, dir, out);
    cr_assert_eq(tu_run(cmd, &sum), 0, "%s", sum);
    snprintf(cmd, sizeof cmd, "%s run %s/%s.onnx -i %s/x_test.npy -o %s/qrl_%s && node '%s/tools/ort_run.js' "
             "%s/%s.onnx %s/x_test.npy -o %s/ort_%s", tu_qrl(), dir, out, dir, dir, out, tu_root(), dir, out, dir, dir, out);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    return sum;
}

/* QRL's outputs of run `tag` (qrl_TAG/) within 1e-5 relative of ONNX Runtime's (ort_TAG/). */
static void assert_same_as_ort(const char *tag, const char *const *outs, int n)
{
    for (int i = 0; i < n; i++) {
        char ref[4096], got[4096];
        snprintf(ref, sizeof ref, "%s/ort_%s/%s.npy", dir, tag, outs[i]);
        snprintf(got, sizeof got, "%s/qrl_%s/%s.npy", dir, tag, outs[i]);
        double d = tu_npy_rel_diff(ref, got);
        cr_assert(d >= 0 && d < 1e-5, "%s/%s: ORT vs QRL: %g", tag, outs[i], d);
    }
}

/* Conv + HardSwish, Conv + SiLU, Gemm + HardSwish, Gemm + SiLU: each fused (no QuantizeLinear on
 * the layer's output in the export, two activation tensors fewer than without the patterns), all
 * MACs on the integers, QRL and ORT on the export within one step of numpy's fused layer. */
Test(fused_act, a_layer_and_its_activation_quantize_once)
{
    char cmd[8192], *out, *log;
    out = quantize_and_run("fused_act", "fused", "fused");
    /* x, Flatten's output (same qparams as x) and y1..y4; no Conv or Gemm output */
    cr_assert(strstr(out, "tensors:   6 activations, 4 weights"), "%s", out);
    cr_assert(strstr(out, "100.0% of") && strstr(out, "0 f32 islands"), "%s", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/fused_act_oracle.py' %s/fused.onnx %s/x_test.npy "
             "%s/qrl_fused %s/ort_fused", tu_root(), dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    cr_assert(!strncmp(log, "ok ", 3), "%s", log);
    free(log);
    free(out);
    /* `qrl run` lowers the export with stdlib/qdq.qrl: the same fused kernels, not a float Conv */
    snprintf(cmd, sizeof cmd, "%s run %s/fused.onnx -i %s/x_test.npy -o %s/qrl_prof --profile 2>&1", tu_qrl(), dir, dir,
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "conv_hardswish_qlinear_act") && strstr(log, "conv_silu_qlinear_act") &&
                  strstr(log, "gemm_hardswish_qlinear_act") && strstr(log, "gemm_silu_qlinear_act"),
              "%s", log);
    free(log);
}

/* The Conv's output read by HardSwish and by a Relu: no pattern may fuse it (the Relu needs it), so
 * it is quantized, as without patterns_fused.qrl, and ORT runs the export to QRL's outputs. */
Test(fused_act, a_layer_output_that_another_layer_reads_is_not_fused)
{
    char cmd[8192], *out, *log;
    out = quantize_and_run("shared", "fused", "shared_q");
    cr_assert(strstr(out, "tensors:   4 activations, 1 weights"), "%s", out); /* x, c, y, z */
    /* the Conv's output goes to a QuantizeLinear alone, whose DequantizeLinear the three readers read */
    free(out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import onnx; g = onnx.load('%s/shared_q.onnx').graph; "
             "c = [n.output[0] for n in g.node if n.op_type == 'Conv'][0]; "
             "print(sorted(n.op_type for n in g.node if c in n.input))\"", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "['QuantizeLinear']"), "%s", log);
    free(log);
    const char *outs[] = {"y", "z"};
    assert_same_as_ort("shared_q", outs, 2);
}

/* A QDQ file that rounds the Conv's output before its HardSwish (the plain patterns' export):
 * `qrl run` must not fuse what the file quantizes, so it computes what ONNX Runtime computes. */
Test(fused_act, a_qdq_file_that_quantizes_the_layer_output_runs_as_the_file_says)
{
    char *out = quantize_and_run("fused_act", "plain", "plain");
    cr_assert(strstr(out, "tensors:   10 activations, 4 weights"), "%s", out); /* + c1, c2, g3, g4 */
    free(out);
    const char *outs[] = {"y1", "y2", "y3", "y4"};
    assert_same_as_ort("plain", outs, 4);
}

/* 16-bit activations (u16): the same fusion by the int64-accumulator kernel qlinear_act_wide, all MACs
 * on the integers; ONNX Runtime's outputs within one u16 step of y's range (8 / 65535) of QRL's. */
Test(fused_act, sixteen_bit_activations_fuse_through_the_wide_kernel)
{
    char cmd[8192], *out, *log;
    out = quantize_and_run("fused_act", "wide", "wide");
    cr_assert(strstr(out, "tensors:   6 activations, 4 weights") && strstr(out, "100.0% of"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run %s/wide.onnx -i %s/x_test.npy -o %s/qrl_wprof --profile 2>&1", tu_qrl(), dir, dir,
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "conv_hardswish_qlinear_act_wide") && strstr(log, "gemm_silu_qlinear_act_wide"), "%s", log);
    free(log);
    const char *outs[] = {"y1", "y2", "y3", "y4"};
    for (int i = 0; i < 4; i++) {
        char ref[4096], got[4096];
        snprintf(ref, sizeof ref, "%s/ort_wide/%s.npy", dir, outs[i]);
        snprintf(got, sizeof got, "%s/qrl_wide/%s.npy", dir, outs[i]);
        double d = tu_npy_max_diff(ref, got);
        cr_assert(d >= 0 && d <= 8.0 / 65535, "%s: ORT vs QRL: %g", outs[i], d);
    }
}
