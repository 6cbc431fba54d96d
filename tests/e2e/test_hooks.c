/* The policy hooks (stdlib/qparams.qrl: bias_qparams, narrow_range, pattern_priority): the stdlib's
 * give the bits QRL always gave, and a recipe's own change the export as numpy says
 * (tests/e2e/hooks_oracle.py, from the f32 model and the rule the recipe states) and ONNX Runtime
 * runs the export to QRL's outputs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(hooks, .init = setup, .fini = teardown, .timeout = 300);

static const char *data_dir(void)
{
    const char *d = getenv("QRL_DATA");
    return d ? d : "build/data";
}

#define HEAD "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
#define ACT "  activation = u8 asymmetric by minmax()\n"
#define WEIGHT "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"

/* Recipe text (named tag.qrl in dir) quantizes the bundled CNN on 64 images: dir/tag.onnx, its
 * integer graph's listing dir/tag.txt. */
static void quantize(const char *tag, const char *text)
{
    char cmd[4096], *log;
    char name[256];
    snprintf(name, sizeof name, "%s.qrl", tag);
    tu_write_file(dir, name, text);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe %s/%s.qrl --calib %s/calib_images.npy "
             "--calib-count 64 --threads 1 -o %s/%s.onnx --int-graph %s/%s.txt",
             tu_root(), tu_qrl(), dir, tag, data_dir(), dir, tag, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    free(log);
}

static void oracle(const char *args)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/hooks_oracle.py %s", tu_root(), args);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", args, log);
    free(log);
}

/* ONNX Runtime runs dir/tag.onnx on 64 images to what QRL's run of the file gives (within 1e-5 of
 * the largest), and QRL's integer graph of the recipe in memory (the hooks applied as the recipe
 * says, not as read back from the file) within one step of the output's integers. */
static void ort_agrees(const char *tag)
{
    char cmd[8192], *log, a[4096], b[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np; np.save('%s/x.npy', np.load('%s/calib_images.npy')[:64])\" "
             "&& %s run %s/%s.onnx -i %s/x.npy -o %s/qrl_%s && %s run examples/fmnist/fmnist_cnn.onnx --recipe %s/%s.qrl "
             "--calib %s/calib_images.npy --calib-count 64 -i %s/x.npy -o %s/mem_%s && node tools/ort_run.js %s/%s.onnx "
             "%s/x.npy -o %s/ort_%s && /usr/bin/python3 -c \"import numpy as np, onnx; from onnx import numpy_helper as nh; "
             "m = onnx.load('%s/%s.onnx'); s = [nh.to_array(i) for i in m.graph.initializer if i.name == 'logits_scale'][0]; "
             "d = np.abs(np.load('%s/ort_%s/logits.npy') - np.load('%s/mem_%s/logits.npy')).max(); "
             "assert d <= 1.0001 * s, (d, s); print('ok')\"",
             tu_root(), dir, data_dir(), tu_qrl(), dir, tag, dir, dir, tag, tu_qrl(), dir, tag, data_dir(), dir, dir, tag,
             dir, tag, dir, dir, tag, dir, tag, dir, tag, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    free(log);
    snprintf(a, sizeof a, "%s/ort_%s/logits.npy", dir, tag);
    snprintf(b, sizeof b, "%s/qrl_%s/logits.npy", dir, tag);
    double d = tu_npy_rel_diff(a, b);
    cr_assert(d >= 0 && d < 1e-5, "%s: ORT vs QRL on the file: %g", tag, d);
}

/* The stdlib's bias_qparams: i32 at s_x * s_w, zero point 0. A recipe's own, 16 times coarser, with
 * bias = i16: int16 integers at that scale (the export at opset 21), which the integer graph
 * converts to its accumulator's unit. */
Test(hooks, bias_qparams_and_an_i16_bias)
{
    char args[2048];
    quantize("bdef", HEAD "recipe d {\n" ACT WEIGHT "}\n");
    snprintf(args, sizeof args, "bias examples/fmnist/fmnist_cnn.onnx %s/bdef.onnx 1 int32", dir);
    oracle(args);
    quantize("b16", HEAD "fn coarse_bias(x: qparams, w: qparams, t: qtype) -> qparams {\n"
                    "  return qparams(x.scale * w.scale * 16.0, 0)\n}\n"
                    "recipe b {\n" ACT WEIGHT "  bias = i16\n  bias_qparams = coarse_bias\n}\n");
    snprintf(args, sizeof args, "bias examples/fmnist/fmnist_cnn.onnx %s/b16.onnx 16 int16", dir);
    oracle(args);
    ort_agrees("b16");
}

/* The stdlib's narrow_range: i8 narrow is -127..127. A recipe's own that drops the top integer
 * instead: -128..126, so each channel's largest positive weight (127 steps) saturates at 126. */
Test(hooks, narrow_range)
{
    char args[2048];
    quantize("ndef", HEAD "recipe n {\n" ACT "  weight = i8 symmetric narrow per_channel by minmax(symmetric = true)\n}\n");
    snprintf(args, sizeof args, "narrow examples/fmnist/fmnist_cnn.onnx %s/ndef.onnx -127 127", dir);
    oracle(args);
    quantize("ntop", HEAD "fn drop_top(t: qtype, upper: bool) -> i64 {\n  if upper {\n    return t.qmax - 1\n  }\n"
                     "  return t.qmin\n}\n"
                     "recipe n {\n" ACT "  weight = i8 symmetric narrow per_channel by minmax(symmetric = true)\n"
                     "  narrow_range = drop_top\n}\n");
    snprintf(args, sizeof args, "narrow examples/fmnist/fmnist_cnn.onnx %s/ntop.onnx -128 126", dir);
    oracle(args);
    ort_agrees("ntop");
}

/* The stdlib's pattern_priority (the node count) fuses each Relu into its Conv or Gemm's kernel; a
 * recipe's own that tries the fewest nodes first flips it: conv and gemm claim the products, the
 * Relus run as their affine rule's lookup tables. */
Test(hooks, pattern_priority)
{
    quantize("pdef", HEAD "recipe p {\n" ACT WEIGHT "}\n");
    quantize("pflip", HEAD "fn fewest_first(nodes: i64) -> i64 {\n  return 100 - nodes\n}\n"
                      "recipe p {\n" ACT WEIGHT "  pattern_priority = fewest_first\n}\n");
    char args[2048];
    snprintf(args, sizeof args, "priority examples/fmnist/fmnist_cnn.onnx %s/pdef.onnx %s/pdef.txt %s/pflip.onnx %s/pflip.txt",
             dir, dir, dir, dir);
    oracle(args);
    ort_agrees("pflip");
}

/* A hook setting that names no fn, or a fn of another type, is an error naming both types. */
Test(hooks, a_hook_of_the_wrong_type_is_an_error)
{
    char cmd[4096], *log;
    tu_write_file(dir, "bad.qrl", HEAD "fn wrong(nodes: f64) -> i64 {\n  return 1\n}\n"
                                  "recipe p {\n" ACT WEIGHT "  pattern_priority = wrong\n}\n");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe %s/bad.qrl --calib %s/calib_images.npy "
             "--calib-count 8 -o %s/bad.onnx",
             tu_root(), tu_qrl(), dir, data_dir(), dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "the pattern_priority hook 'wrong' is i64(f64), not i64(i64)"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "test -e %s/bad.onnx", dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "an output was written");
    free(log);
}
