/* The exported QDQ model in ONNX Runtime (onnxruntime-node, installed by
 * `make ort`): it runs, its accuracy matches `qrl run` of the same file
 * within 0.1 points, and ORT really fused it into integer kernels. */
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

TestSuite(ort, .init = setup, .fini = teardown, .timeout = 600);

static const char *data_dir(void)
{
    const char *d = getenv("QRL_DATA");
    return d && *d ? d : "build/data";
}

Test(ort, qdq_export_runs_fused_in_onnx_runtime)
{
    char cmd[4096], *log;
    const char *quick = getenv("QRL_TEST_QUICK");
    int n = quick && *quick == '1' ? 1000 : 10000;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; "
             "np.save('%s/x.npy', np.load('%s/test_images.npy')[:%d]); "
             "np.save('%s/y.npy', np.load('%s/test_labels.npy')[:%d])\"",
             dir, data_dir(), n, dir, data_dir(), n);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl --calib "
             "%s/calib_images.npy --calib-count 500 -o %s/q.onnx",
             tu_root(), tu_qrl(), data_dir(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* ONNX Runtime */
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_eval.js' %s/q.onnx %s/x.npy %s/y.npy %s/ort_optimized.onnx", tu_root(),
             dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "onnxruntime-node failed (make ort installs it): %s", log);
    const char *j = strstr(log, "\"accuracy\":");
    double ort_acc = -1;
    cr_assert(j && sscanf(j, "\"accuracy\":%lf", &ort_acc) == 1, "%s", log);
    free(log);
    /* QRL on the same file */
    snprintf(cmd, sizeof cmd, "'%s' eval %s/q.onnx --data %s/x.npy --labels %s/y.npy", tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    double qrl_acc = -1;
    const char *t = strstr(log, "top-1:");
    cr_assert(t && sscanf(t, "top-1: %lf", &qrl_acc) == 1, "%s", log);
    free(log);
    cr_log_info("QDQ model: ONNX Runtime %.2f%%, qrl %.2f%%", ort_acc, qrl_acc);
    cr_assert_leq(ort_acc - qrl_acc, 0.1, "ORT %.2f%% vs qrl %.2f%%", ort_acc, qrl_acc);
    cr_assert_leq(qrl_acc - ort_acc, 0.1, "ORT %.2f%% vs qrl %.2f%%", ort_acc, qrl_acc);
    /* ORT fused the QDQ groups into its integer kernels */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, collections; "
             "ops = collections.Counter(n.op_type for n in onnx.load('%s/ort_optimized.onnx').graph.node); "
             "print(dict(ops)); assert ops['QLinearConv'] >= 3 and (ops['QGemm'] + ops['QLinearMatMul']) >= 1, ops\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "ORT did not fuse the model into integer kernels: %s", log);
    free(log);
}
