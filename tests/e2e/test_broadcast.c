/* Quantized Add and Mul whose operands broadcast, through the qrl command (recipes/int8.qrl): the
 * integer graph's pointwise kernels (qadd, qmul) run on the broadcast operand expanded to the
 * output's shape (quantizer/intgraph.c, expand_broadcasts), so they take their same-shape loop.
 * The oracle is ONNX Runtime on the QDQ export (tools/ort_run.js); tests/e2e/broadcast_oracle.py
 * builds the model ([N,3,5,7] + [N,1,5,7], + a computed [7], * a computed one-element tensor,
 * [N,3,5,7] * [N,3,1,1] both ways round; inputs of both signs, odd dims) and compares the
 * outputs' integers. Batch 2, then 1 (the [1,C,H,W] * [1,C,1,1] of a squeeze-excite). The
 * workspace `qrl run --stats` reports shows the expansions ran (the kernels take none otherwise). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void run_and_compare(const char *dir, const char *model, const char *suffix)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s run %s.onnx -i a=a_%s.npy -i b=b_%s.npy -i e=e_%s.npy -o qrl_%s_%s --stats 2>&1",
             dir, tu_qrl(), model, suffix, suffix, suffix, model, suffix);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    /* the kernels take no scratch of their own: the workspace holds the expanded operands */
    size_t work = 0;
    const char *w = strstr(log, "workspace: ");
    cr_assert(w && sscanf(w, "workspace: %zu", &work) == 1, "%s", log);
    cr_expect_geq(work, 105, "the broadcast operands were expanded (workspace %zu bytes):\n%s", work, log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && NODE_PATH='%s/build/npm/node_modules' node '%s/tools/ort_run.js' %s.onnx a=a_%s.npy "
             "b=b_%s.npy e=e_%s.npy -o ort_%s_%s 2>&1 && /usr/bin/python3 '%s/tests/e2e/broadcast_oracle.py' check . "
             "qrl_%s_%s ort_%s_%s %s.onnx 2>&1",
             dir, tu_root(), tu_root(), model, suffix, suffix, suffix, model, suffix, tu_root(), model, suffix, model,
             suffix, model);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    int worst = -1, off1 = -1, n = 0;
    const char *s = strstr(log, "WORST ");
    cr_assert(s && sscanf(s, "WORST %d OFF1 %d OF %d", &worst, &off1, &n) == 3, "%s", log);
    cr_log_info("%s, batch %s: %d of %d outputs off by one step", model, suffix, off1, n);
    cr_expect_leq(worst, 1, "an output differs from ONNX Runtime's by %d steps:\n%s", worst, log);
    cr_expect_leq(off1, n / 50, "%d of %d outputs off by one step:\n%s", off1, n, log);
    free(log);
}

static void quantize(const char *dir, const char *recipe, const char *model)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize bcast.onnx --recipe '%s/recipes/%s' --calib a=a_calib.npy --calib b=b_calib.npy "
             "--calib e=e_calib.npy -o %s.onnx --int-graph %s.txt 2>&1 && cat %s.txt",
             dir, tu_qrl(), tu_root(), recipe, model, model, model);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    /* the premise: the Adds and Muls are kernel calls (not f32 islands or lookups) */
    int calls = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        calls += strstr(line, "qrl.QrlKernel(") && (strstr(line, "node   add_qadd_y") || strstr(line, "node   mul_qmul"));
    cr_expect_eq(calls, 5, "%s: y1..y5 run as qadd / qmul kernels (%d)", recipe, calls);
    free(log);
}

/* int8 (qadd, qmul: 1-byte elements, their same-shape loop) and 16-bit activations (a16w8: qadd
 * and qmul_wide on 2-byte elements) */
Test(broadcast, expanded_operands_agree_with_onnx_runtime, .timeout = 300)
{
    char *dir = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 tests/e2e/broadcast_oracle.py make '%s' 2>&1 && cd '%s' && "
             "/usr/bin/python3 -c \"import numpy as np\nfor k in 'abe': np.save(k + '_one.npy', "
             "np.load(k + '_test.npy')[1:])\" 2>&1",
             tu_root(), dir, dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    free(log);
    quantize(dir, "int8.qrl", "bcast_int8");
    run_and_compare(dir, "bcast_int8", "test");
    run_and_compare(dir, "bcast_int8", "one");
    quantize(dir, "a16w8.qrl", "bcast_a16");
    run_and_compare(dir, "bcast_a16", "test");
    tu_rmdir(dir);
}
