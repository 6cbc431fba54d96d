/* Quantized Add and Mul whose operands broadcast, through the qrl command (recipes/int8.qrl): the
 * integer graph's pointwise kernels (qadd, qmul) run on the broadcast operand expanded to the
 * output's shape (quantizer/intgraph.c, expand_broadcasts), so they take their same-shape loop.
 * The oracle is ONNX Runtime on the QDQ export (tools/ort_run.js); tests/e2e/broadcast_oracle.py
 * builds the model ([N,3,5,7] + [N,1,5,7], + a computed [7], * a computed one-element tensor,
 * [N,3,5,7] * [N,3,1,1] both ways round; inputs of both signs, odd dims) and compares the
 * outputs' integers. Batch 2, then 1 (the [1,C,H,W] * [1,C,1,1] of a squeeze-excite). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void run_and_compare(const char *dir, const char *suffix)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s run bcast.int8.onnx -i a=a_%s.npy -i b=b_%s.npy -i e=e_%s.npy -o qrl_%s --stats 2>&1",
             dir, tu_qrl(), suffix, suffix, suffix, suffix);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    /* the kernels take no scratch of their own: the workspace holds the expanded operands */
    size_t work = 0;
    const char *w = strstr(log, "workspace: ");
    cr_assert(w && sscanf(w, "workspace: %zu", &work) == 1, "%s", log);
    cr_expect_geq(work, 105, "the broadcast operands were expanded (workspace %zu bytes):\n%s", work, log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && NODE_PATH='%s/build/npm/node_modules' node '%s/tools/ort_run.js' bcast.int8.onnx a=a_%s.npy "
             "b=b_%s.npy e=e_%s.npy -o ort_%s 2>&1 && /usr/bin/python3 '%s/tests/e2e/broadcast_oracle.py' check . qrl_%s "
             "ort_%s bcast.int8.onnx 2>&1",
             dir, tu_root(), tu_root(), suffix, suffix, suffix, suffix, tu_root(), suffix, suffix);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    int worst = -1, off1 = -1, n = 0;
    const char *s = strstr(log, "WORST ");
    cr_assert(s && sscanf(s, "WORST %d OFF1 %d OF %d", &worst, &off1, &n) == 3, "%s", log);
    cr_log_info("batch %s: %d of %d outputs off by one step", suffix, off1, n);
    cr_expect_leq(worst, 1, "an output differs from ONNX Runtime's by %d steps:\n%s", worst, log);
    cr_expect_leq(off1, n / 50, "%d of %d outputs off by one step:\n%s", off1, n, log);
    free(log);
}

Test(broadcast, expanded_operands_agree_with_onnx_runtime, .timeout = 300)
{
    char *dir = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 tests/e2e/broadcast_oracle.py make '%s' 2>&1 && cd '%s' && "
             "%s quantize bcast.onnx --recipe '%s/recipes/int8.qrl' --calib a=a_calib.npy --calib b=b_calib.npy "
             "--calib e=e_calib.npy -o bcast.int8.onnx --int-graph ig.txt 2>&1 && cat ig.txt",
             tu_root(), dir, dir, tu_qrl(), tu_root());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log);
    /* the premise: the Adds and Muls are kernel calls (not f32 islands or lookups) */
    int calls = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        calls += strstr(line, "qrl.QrlKernel(") && (strstr(line, "node   add_qadd_y") || strstr(line, "node   mul_qmul_y"));
    cr_expect_eq(calls, 5, "y1..y5 run as qadd / qmul kernels (%d)", calls);
    free(log);
    run_and_compare(dir, "test");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np\nfor k in 'abe': np.save(k + '_one.npy', "
             "np.load(k + '_test.npy')[1:])\" 2>&1",
             dir);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    run_and_compare(dir, "one");
    tu_rmdir(dir);
}
