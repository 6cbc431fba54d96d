/* 16-bit activations (QRL-I item 4): recipes/a16w8.qrl (u16 asymmetric) and an i16 symmetric
 * recipe, i8 weights, through `qrl quantize` on the small models of tools/make_a16_models.py:
 * a Conv with group 2, strides, asymmetric pads and dilation, a MaxPool, a bias-free Conv, a Linear and a
 * ReduceMean (opset 13, axes an attribute), inputs of both signs; products of two activations
 * (a MatMul of X by its transpose, a Mul); and a MatMul whose K (4096)
 * makes the exact sum of the u16 x i8 integer products overflow int32; and a post-LN attention
 * block whose LayerNorm and Softmax outputs are u16 while the rest is u8 (recipes/int8-norm16.qrl,
 * `activation for`): the boundaries between 16- and 8-bit activations.
 * The oracles are independent of QRL: numpy's run of the exported QDQ file in float64
 * (tests/e2e/a16_oracle.py: ONNX's QuantizeLinear/DequantizeLinear, Conv as sums over taps) and
 * ONNX Runtime's run of the same file. QRL's integer graph (`qrl run` of the export, and of the
 * recipe in memory) and its simulated graph (the export's ops run in f32 between its Q/DQ pairs:
 * `--qdq-recipe` with no patterns) must equal numpy's outputs within one step of the output's
 * integers (a tie rounded the other way). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_a16_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* the i16 recipe, and the simulated graph's: the stdlib's calibrators and no pattern or rule */
    const char *recipes[][2] = {
        {"i16.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                    "recipe a16s {\n  activation = i16 symmetric by minmax(symmetric = true)\n"
                    "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n"},
        {"sim.qrl", "import \"calibrators.qrl\"\nrecipe sim {\n  activation = u16 asymmetric by minmax()\n"
                    "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n"},
    };
    for (int i = 0; i < 2; i++)
        tu_write_file(dir, recipes[i][0], recipes[i][1]);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(a16, .init = setup, .fini = teardown, .timeout = 600);

/* The recipe file of a tag: the shipped a16w8 or int8-norm16, or one setup wrote. */
static void recipe_path(const char *tag, char *path, size_t n)
{
    if (!strcmp(tag, "a16w8") || !strcmp(tag, "int8-norm16"))
        snprintf(path, n, "%s/recipes/%s.qrl", tu_root(), tag);
    else
        snprintf(path, n, "%s/%s.qrl", dir, tag);
}

static void run_ok(const char *cmd)
{
    char *log;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\n%s", cmd, log);
    free(log);
}

/* Quantizes MODEL with the recipe TAG, runs the export in numpy, ONNX Runtime and QRL (integer
 * and simulated graphs, and the recipe's integer graph in memory), and compares each output with
 * numpy's. info: what the oracle says of the export (its info.txt, malloc'd) in *info. */
static void check(const char *model, const char *tag, int nout, const char *const *outs, char **info)
{
    char cmd[8192], rec[4096];
    recipe_path(tag, rec, sizeof rec);
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize %s.onnx --recipe '%s' --calib %s_calib.npy -o %s.%s.onnx",
             dir, tu_qrl(), model, rec, model, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 '%s/tests/e2e/a16_oracle.py' %s.%s.onnx %s_x.npy np_%s_%s",
             dir, tu_root(), model, tag, model, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && node '%s/tools/ort_run.js' %s.%s.onnx %s_x.npy -o ort_%s_%s", dir, tu_root(),
             model, tag, model, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.%s.onnx -i %s_x.npy -o int_%s_%s", dir, tu_qrl(), model, tag,
             model, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.%s.onnx --qdq-recipe sim.qrl -i %s_x.npy -o sim_%s_%s", dir,
             tu_qrl(), model, tag, model, model, tag);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s run %s.onnx --recipe '%s' --calib %s_calib.npy -i %s_x.npy -o mem_%s_%s",
             dir, tu_qrl(), model, rec, model, model, model, tag);
    run_ok(cmd);
    char path[4096];
    snprintf(path, sizeof path, "%s/np_%s_%s/info.txt", dir, model, tag);
    *info = tu_slurp(path);
    for (int i = 0; i < nout; i++) {
        char ref[4096], got[4096];
        snprintf(path, sizeof path, "%s/np_%s_%s/%s.scale", dir, model, tag, outs[i]);
        char *s = tu_slurp(path);
        double step = atof(s);
        free(s);
        cr_assert_gt(step, 0, "%s: no QuantizeLinear made output %s", model, outs[i]);
        snprintf(ref, sizeof ref, "%s/np_%s_%s/%s.npy", dir, model, tag, outs[i]);
        const char *runs[] = {"ort", "int", "sim", "mem"};
        for (int r = 0; r < 4; r++) {
            snprintf(got, sizeof got, "%s/%s_%s_%s/%s.npy", dir, runs[r], model, tag, outs[i]);
            double d = tu_npy_max_diff(ref, got) / step;
            cr_assert_leq(d, 1.001, "%s %s output %s: %s differs from numpy's fake-quant by %.3f steps of %g", model,
                          tag, outs[i], runs[r], d, step);
        }
    }
}

static const char *const conv_outs[] = {"Y", "Z"};

/* u16 asymmetric: the export is uint16 QuantizeLinear/DequantizeLinear at opset 21 (the model's
 * ReduceMean, opset 13, gets its axes as an input there), and every run agrees with numpy. */
Test(a16, u16_convnet_matches_numpy_and_ort)
{
    char *info;
    check("convnet", "a16w8", 2, conv_outs, &info);
    cr_assert(strstr(info, "opset 21\n") && strstr(info, "activation uint16\n"), "%s", info);
    free(info);
}

Test(a16, i16_convnet_matches_numpy_and_ort)
{
    char *info;
    check("convnet", "i16", 2, conv_outs, &info);
    cr_assert(strstr(info, "opset 21\n") && strstr(info, "activation int16\n"), "%s", info);
    free(info);
}

/* Products of two 16-bit activations (a MatMul of X by its transpose, a Mul): both operands split
 * into bytes, four int32 products combined in int64. */
Test(a16, products_of_two_16_bit_activations)
{
    static const char *const outs[] = {"Y", "Z"};
    const char *tags[] = {"a16w8", "i16"};
    for (int i = 0; i < 2; i++) {
        char *info;
        check("attn", tags[i], 2, outs, &info);
        free(info);
    }
}

/* K = 4096: the exact sum of a row's integer products passes int32's range (the oracle's
 * max_acc), and QRL's integer graph still equals numpy: its accumulator is int64. */
static void check_widek(const char *tag)
{
    static const char *const outs[] = {"Y"};
    char *info;
    check("widek", tag, 1, outs, &info);
    const char *m = strstr(info, "max_acc ");
    cr_assert(m, "%s", info);
    double acc = atof(m + 8);
    cr_assert_gt(acc, 2147483647.0, "the sums must overflow int32 for this test to mean anything: %s", info);
    free(info);
}

Test(a16, u16_sums_past_int32_are_exact)
{
    check_widek("a16w8");
}

Test(a16, i16_sums_past_int32_are_exact)
{
    check_widek("i16");
}

/* A sum longer than the byte-split int64 accumulator takes: one line naming the node and the
 * limit, a non-zero exit, no file. */
Test(a16, a_sum_too_long_for_the_accumulator_is_an_error)
{
    char cmd[8192], *log, out[4096];
    snprintf(out, sizeof out, "%s/bigk.a16w8.onnx", dir);
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize bigk.onnx --recipe '%s/recipes/a16w8.qrl' --calib bigk_calib.npy -o %s",
             dir, tu_qrl(), tu_root(), out);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "(MatMulInteger): a sum over 33000 terms of 16-bit operands is longer than the 32896 the "
                          "int64 accumulator takes"),
              "%s", log);
    cr_assert(!tu_file_exists(out), "a failed quantize left %s", out);
    free(log);
}

/* A pattern lowering 16-bit activations to an epilogue that takes an int32 accumulator: the
 * error says which accumulator 16-bit activations get. */
Test(a16, an_int32_accumulator_for_16_bit_activations_is_refused)
{
    char cmd[8192], *log;
    tu_write_file(dir, "acc32.qrl",
          "import \"calibrators.qrl\"\n"
          "kernel k32(acc: tensor<i32>, x: tensor<u16>, x_scale: f32, x_zero: i32, w: tensor<i8>, w_scale: f32[],\n"
          "           w_zero: i32[], y: tensor<u16>, y_scale: f32, y_zero: i32) {\n"
          "  for i in 0 .. y.numel {\n    y[i] = sat<u16>(f32(acc[i]))\n  }\n}\n"
          "pattern mm {\n  match y = MatMul(x, w) where const(w)\n"
          "  quantize x: activation, w: weight(axis = 1), y: activation\n  lower y = k32(x, w)\n}\n"
          "recipe r {\n  activation = u16 asymmetric by minmax()\n"
          "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize widek.onnx --recipe acc32.qrl --calib widek_calib.npy -o acc32.onnx",
             dir, tu_qrl());
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "acc32.qrl:8:9: pattern 'mm' has no lowering for the types the recipe chose (kernel 'k32' "
                          "takes its accumulator as tensor<i32>, but u16 activations accumulate in i64)"),
              "%s", log);
    free(log);
}

/* activation for LayerNormalization, Softmax = u16 in an otherwise u8 recipe (int8-norm16.qrl):
 * the Linears reading a LayerNorm (u16 x i8 into int64, an 8-bit output), attention's P.V (u16
 * probabilities by the u8 V) and the post-LN residual (a u16 LayerNorm output plus the u8 branch)
 * run as integer kernels, and every run of the export equals numpy's within a step. */
Test(a16, ln_and_softmax_16_bit_in_an_8_bit_block)
{
    static const char *const outs[] = {"Y", "Z"};
    char *info, cmd[8192], *log;
    check("block", "int8-norm16", 2, outs, &info);
    cr_assert(strstr(info, "opset 21\n") && strstr(info, "activation uint16 uint8\n"), "%s", info);
    free(info);
    /* nothing left to f32 islands between the kernels: the mixed boundaries have kernels */
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize block.onnx --recipe '%s/recipes/int8-norm16.qrl' --calib "
             "block_calib.npy -o block.again.onnx", dir, tu_qrl(), tu_root());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "lowered:   8 kernel calls, 0 lookup tables, 1 integer ops, 0 requantizations, 0 f32 "
                          "islands"), "%s", log);
    cr_assert(strstr(log, "100.0% of"), "%s", log);
    free(log);
}

/* An `activation for` that names a node by its name types that node's output alone. */
Test(a16, activation_for_a_node_name)
{
    char cmd[8192], *log;
    tu_write_file(dir, "node16.qrl", "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                             "recipe r {\n  activation = u8 asymmetric by minmax()\n"
                             "  activation for \"p_node\" = u16 asymmetric by minmax()\n"
                             "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 -c \"import onnx; m = onnx.load('block.onnx'); "
             "[setattr(n, 'name', 'p_node') for n in m.graph.node if n.op_type == 'Softmax']; "
             "onnx.save(m, 'named.onnx')\"", dir);
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s && %s quantize named.onnx --recipe node16.qrl --calib block_calib.npy "
             "-o named.q.onnx --qparams named.json", dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd %s && /usr/bin/python3 -c \"import onnx, onnx.numpy_helper; m = onnx.load('named.q.onnx'); "
             "print(sorted((n.input[0], onnx.numpy_helper.to_array(i).dtype.name) for n in m.graph.node "
             "if n.op_type == 'QuantizeLinear' for i in m.graph.initializer if len(n.input) > 2 and i.name == n.input[2]))\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "('p_f32', 'uint16')"), "%s", log);
    cr_assert(!strstr(log, "('n_f32', 'uint16')") && strstr(log, "('n_f32', 'uint8')"), "%s", log);
    free(log);
}

/* recipes/a16w8-real.qrl on a spectrogram in miniature (tests/e2e/stft_oracle.py: two STFT
 * Convs, their squares added, a Log): the Convs read a u16 input, i8 weights, and give back real
 * numbers never requantized (stdlib/patterns_real.qrl). numpy's fake-quant of those choices (the
 * oracle, from the calibration samples' range) and the runs of the export in ONNX Runtime and
 * QRL, and of the recipe in memory, agree on every output within 1e-3 (of 60 to 160 dB); f32
 * Convs or a grid on their outputs would move most of them by more. Every MAC is on the
 * integers. */
Test(a16, real_outputs_of_16_bit_stft_convs)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p stft && /usr/bin/python3 '%s/tests/e2e/stft_oracle.py' make stft && "
             "/usr/bin/python3 '%s/tests/e2e/stft_oracle.py' run stft stft/np.npy", dir, tu_root(), tu_root());
    run_ok(cmd);
    snprintf(cmd, sizeof cmd, "cd %s/stft && %s quantize stft.onnx --recipe '%s/recipes/a16w8-real.qrl' --calib "
             "stft_calib.npy -o stft.q.onnx", dir, tu_qrl(), tu_root());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "100.0% of 1.89e+04 MACs per sample in integers"), "%s", log);
    cr_assert(strstr(log, "0 requantizations"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd %s/stft && node '%s/tools/ort_run.js' stft.q.onnx stft_x.npy -o ort && "
             "%s run stft.q.onnx -i stft_x.npy -o int && %s run stft.onnx --recipe '%s/recipes/a16w8-real.qrl' "
             "--calib stft_calib.npy -i stft_x.npy -o mem", dir, tu_root(), tu_qrl(), tu_qrl(), tu_root());
    run_ok(cmd);
    /* the export: u16 into the Convs, no QuantizeLinear on what they write */
    snprintf(cmd, sizeof cmd, "cd %s/stft && /usr/bin/python3 -c \"import onnx; m = onnx.load('stft.q.onnx'); "
             "print(sorted(n.input[0] for n in m.graph.node if n.op_type == 'QuantizeLinear'))\"", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "['X']"), "%s", log);
    free(log);
    const char *runs[] = {"ort", "int", "mem"};
    for (int r = 0; r < 3; r++) {
        snprintf(cmd, sizeof cmd, "cd %s/stft && /usr/bin/python3 -c \"import numpy as np; a = np.load('np.npy'); "
                 "b = np.load('%s/Y.npy').reshape(a.shape); d = np.abs(a - b); print('near %%.6f max %%.6g' %% "
                 "((d <= 1e-3).mean(), d.max()))\"", dir, runs[r]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        const char *p = strstr(log, "near ");
        cr_assert(p, "%s", log);
        double near = atof(p + 5), max = atof(strstr(p, "max ") + 4);
        cr_assert(near == 1 && max <= 1e-3, "%s: %.1f%% of the outputs within 1e-3 of numpy's, the farthest %.3g (%s)",
                  runs[r], 100 * near, max, log);
        free(log);
    }
}

/* A real-output layer whose input the fallback sends to f32 runs whole in f32: its weights too (the
 * search's "all in f32" is the f32 model, not the weights' rounding alone, which a target may never
 * be met over). Forced here by an output target no quantization meets: the export holds no
 * DequantizeLinear, and ONNX Runtime's run of it equals its run of the f32 model. */
Test(a16, a_real_output_layer_falls_back_with_its_weights)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p stft2 && /usr/bin/python3 '%s/tests/e2e/stft_oracle.py' make stft2", dir,
             tu_root());
    run_ok(cmd);
    tu_write_file(dir, "stft2/never.qrl", "import \"calibrators.qrl\"\nimport \"patterns_real.qrl\"\nrecipe never {\n"
                  "  activation = u16 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                  "  fallback = f32 when output_sqnr < 200\n  use conv_real, matmul_real\n}\n");
    snprintf(cmd, sizeof cmd, "cd %s/stft2 && %s quantize stft.onnx --recipe never.qrl --calib stft_calib.npy -o q.onnx",
             dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "0.0% of 1.89e+04 MACs"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd %s/stft2 && /usr/bin/python3 -c \"import onnx; m = onnx.load('q.onnx'); "
             "print('dq', sum(n.op_type == 'DequantizeLinear' for n in m.graph.node))\"", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "dq 0"), "the f32 layers still read rounded weights: %s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd %s/stft2 && node '%s/tools/ort_run.js' stft.onnx stft_x.npy -o ref && "
             "node '%s/tools/ort_run.js' q.onnx stft_x.npy -o got", dir, tu_root(), tu_root());
    run_ok(cmd);
    char ref[4096], got[4096];
    snprintf(ref, sizeof ref, "%s/stft2/ref/Y.npy", dir);
    snprintf(got, sizeof got, "%s/stft2/got/Y.npy", dir);
    double d = tu_npy_max_diff(ref, got);
    cr_assert_leq(d, 1e-4, "the export differs from the f32 model by %g", d);
}

/* The same STFT read by a mel MatMul by a constant (matmul_real), no Log, at u16 (the kernel
 * qlinear_real_wide, int64) and at u8 (qlinear_real, int32, an element-wise epilogue): every MAC
 * on the integers, only X and the power spectrum rounded, and the export's runs in ONNX Runtime
 * and the recipe's integer graph in memory equal numpy's fake-quant within the oracle's tol (one
 * power bin rounded the other way) plus f32's rounding. */
Test(a16, real_outputs_of_a_mel_matmul_u16_and_u8)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p mel && /usr/bin/python3 '%s/tests/e2e/stft_oracle.py' make mel", dir,
             tu_root());
    run_ok(cmd);
    const char *types[] = {"u16", "u8"};
    for (int t = 0; t < 2; t++) {
        char rec[1024], name[64];
        snprintf(name, sizeof name, "mel/%s.qrl", types[t]);
        snprintf(rec, sizeof rec, "import \"calibrators.qrl\"\nimport \"patterns_real.qrl\"\nrecipe r {\n"
                 "  activation = %s asymmetric by minmax()\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                 "  calibrate = float\n  use conv_real, matmul_real\n}\n", types[t]);
        tu_write_file(dir, name, rec);
        snprintf(cmd, sizeof cmd, "cd %s/mel && %s quantize stft_mel.onnx --recipe %s.qrl --calib stft_calib.npy "
                 "-o %s.onnx", dir, tu_qrl(), types[t], types[t]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "lowered:   3 kernel calls, 0 lookup tables, 0 integer ops, 0 requantizations, 0 f32 "
                              "islands") && strstr(log, "100.0% of"), "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "cd %s/mel && /usr/bin/python3 -c \"import onnx; m = onnx.load('%s.onnx'); "
                 "print(sorted(n.input[0] for n in m.graph.node if n.op_type == 'QuantizeLinear'))\"", dir, types[t]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "['X', 'pt_f32']"), "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "cd %s/mel && node '%s/tools/ort_run.js' %s.onnx stft_x.npy -o ort_%s && "
                 "%s run stft_mel.onnx --recipe %s.qrl --calib stft_calib.npy -i stft_x.npy -o mem_%s", dir, tu_root(),
                 types[t], types[t], tu_qrl(), types[t], types[t]);
        run_ok(cmd);
        snprintf(cmd, sizeof cmd, "cd %s/mel && /usr/bin/python3 '%s/tests/e2e/stft_oracle.py' mel . np_%s.npy %s", dir,
                 tu_root(), types[t], t ? "8" : "16");
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        const char *p = strstr(log, "tol ");
        cr_assert(p, "%s", log);
        double tol = atof(p + 4);
        free(log);
        const char *runs[] = {"ort", "mem"};
        for (int r = 0; r < 2; r++) {
            char ref[4096], got[4096];
            snprintf(ref, sizeof ref, "%s/mel/np_%s.npy", dir, types[t]);
            snprintf(got, sizeof got, "%s/mel/%s_%s/Y.npy", dir, runs[r], types[t]);
            /* both [4, 1, 37, 4] */
            double d = tu_npy_max_diff(ref, got), rel = tu_npy_rel_diff(ref, got);
            double top = d / fmax(rel, 1e-30); /* max |ref| */
            cr_assert_leq(d, tol + 1e-6 * top, "%s %s: %g from numpy's (tol %g, max |y| %g)", types[t], runs[r], d, tol,
                          top);
        }
    }
}
