/* stdlib/patterns_integer.qrl through the qrl command (recipes/int8-integer.qrl): attention's
 * Softmax of a scaled product of two activations, and LayerNorm of a residual sum, each one integer
 * kernel (8-bit in, 8-bit out, no f32 island). The oracle is numpy (tests/e2e/integer_norm_oracle.py):
 * the same functions in f64 from the quantized inputs, quantized to the outputs' qparams. Inputs
 * of both signs, Softmax's axis and LayerNorm's epsilon at non-default values, 2 heads, ragged
 * rows (5 keys, 8 channels). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

Test(patterns_integer, softmax_and_layernorm_kernels_agree_with_numpy, .timeout = 300)
{
    char *dir = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/integer_norm_oracle.py make '%s' 2>&1", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    char calib[256], test[256];
    snprintf(calib, sizeof calib, "--calib q=q_calib.npy --calib k=k_calib.npy --calib a=a_calib.npy --calib b=b_calib.npy");
    snprintf(test, sizeof test, "-i q=q_test.npy -i k=k_test.npy -i a=a_test.npy -i b=b_test.npy");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize attn.onnx --recipe '%s/recipes/int8-integer.qrl' %s -o attn.int8.onnx "
             "--qparams attn.json 2>&1 && %s run attn.onnx --recipe '%s/recipes/int8-integer.qrl' %s %s -o out 2>&1",
             dir, tu_qrl(), tu_root(), calib, tu_qrl(), tu_root(), calib, test);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    cr_expect(strstr(log, "2 kernel calls, 0 lookup tables, 0 integer ops, 0 requantizations, 0 f32 islands"),
              "Div+MatMul+Softmax and Add+LayerNorm are one kernel each, no island:\n%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/integer_norm_oracle.py check '%s' '%s/out'",
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int bad = -1, off1 = -1, n = 0, distinct = 0;
    cr_assert(sscanf(log, "BAD %d OFF1 %d OF %d DISTINCT_Y %d", &bad, &off1, &n, &distinct) == 4, "%s", log);
    cr_log_info("%d of %d outputs off by one, %d by more", off1, n, bad);
    cr_expect_eq(bad, 0, "%d of %d outputs differ from numpy's by more than one", bad, n);
    cr_expect_leq(off1, n / 1000, "%d of %d outputs off by one (ties of f64 rounding only)", off1, n);
    cr_expect_gt(distinct, 50, "the probabilities cover many levels (%d)", distinct);
    free(log);
    tu_rmdir(dir);
}

/* stdlib/kernels.qrl's requantization rounds half to even, as ONNX's QuantizeLinear: a Conv -> Clip
 * whose scales are powers of two by construction (tests/e2e/requant_ties_oracle.py) puts many
 * outputs exactly on k + 0.5 (41 of 6912), and numpy computes the QDQ model's integers from the
 * export's. Rounding those half away from zero (round_away in `requantized`) differs on 19. */
Test(patterns_integer, requantization_ties_round_half_to_even, .timeout = 300)
{
    char *dir = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 tests/e2e/requant_ties_oracle.py make '%s' 2>&1 && cd '%s' && "
             "%s quantize ties.onnx --recipe '%s/recipes/int8.qrl' --calib ties_calib.npy -o ties.int8.onnx 2>&1 && "
             "%s run ties.onnx --recipe '%s/recipes/int8.qrl' --calib ties_calib.npy -i ties_test.npy -o out 2>&1 && "
             "/usr/bin/python3 '%s/tests/e2e/requant_ties_oracle.py' check . out/y.npy ties.int8.onnx 2>&1",
             tu_root(), dir, dir, tu_qrl(), tu_root(), tu_qrl(), tu_root(), tu_root());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    cr_assert(strstr(log, "; 0 differ from numpy"), "%s", log);
    free(log);
    tu_rmdir(dir);
}
