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
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl --calib "
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
    snprintf(cmd, sizeof cmd, "%s eval %s/q.onnx --data %s/x.npy --labels %s/y.npy", tu_qrl(), dir, dir, dir);
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

/* Nodes of any arity run (the executor and the graph passes once had room for 64 inputs and 16
 * outputs: "too many inputs or outputs"): a Split into 100, a Concat of those 100 in reverse order
 * and a Concat of 130 (the Split's outputs and 30 constants between them), against ONNX Runtime
 * and numpy, and a Sum of the 100 (equal within float rounding: the order of the sum differs). */
Test(ort, nodes_of_a_hundred_inputs_and_outputs_run)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd,
             "(cd '%s' && /usr/bin/python3 -c \"import numpy as np, onnx; from onnx import helper as h, TensorProto as T, "
             "numpy_helper as nh\n"
             "rng = np.random.default_rng(7); s = ['s%%d' %% i for i in range(100)]\n"
             "cs = [nh.from_array(rng.normal(0, 1, (2, 1, 3)).astype(np.float32), 'c%%d' %% i) for i in range(30)]\n"
             "nodes = [h.make_node('Split', ['x'], s, axis=1), h.make_node('Concat', s[::-1], ['cat'], axis=1), "
             "h.make_node('Concat', [v for i in range(100) for v in [s[i]] + ([cs[i // 4].name] if i %% 4 == 0 and i // 4 < 30 "
             "else [])] + [c.name for c in cs[25:]], ['mix'], axis=1), h.make_node('Sum', s, ['sum'])]\n"
             "vi = lambda n, d: h.make_tensor_value_info(n, T.FLOAT, d)\n"
             "g = h.make_graph(nodes, 'wide', [vi('x', [2, 100, 3])], [vi('cat', [2, 100, 3]), vi('mix', [2, 130, 3]), vi('sum', [2, 1, 3])], cs)\n"
             "m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 7; onnx.checker.check_model(m)\n"
             "onnx.save(m, 'wide.onnx'); x = rng.normal(0, 1, (2, 100, 3)).astype(np.float32); np.save('x.npy', x)\n"
             "p = np.split(x, 100, axis=1); np.save('np_cat.npy', np.concatenate(p[::-1], axis=1))\n"
             "c = [nh.to_array(t) for t in cs]; mix = [v for i in range(100) for v in [p[i]] + ([c[i // 4]] if i %% 4 == 0 and "
             "i // 4 < 30 else [])] + c[25:]; np.save('np_mix.npy', np.concatenate(mix, axis=1)); np.save('np_sum.npy', np.sum(np.stack(p), axis=0))\") && "
             "cd '%s' && %s run %s/wide.onnx -i x=%s/x.npy -o %s/qrl && "
             "node tools/ort_run.js %s/wide.onnx x=%s/x.npy -o %s/ort && cd '%s' && /usr/bin/python3 -c \"import numpy as np\n"
             "for o in ('cat', 'mix'):\n"
             "    q, r, n = np.load('qrl/%%s.npy' %% o), np.load('ort/%%s.npy' %% o), np.load('np_%%s.npy' %% o)\n"
             "    assert q.shape == r.shape == n.shape, (o, q.shape, r.shape, n.shape)\n"
             "    assert np.array_equal(q, r) and np.array_equal(q, n), o\n"
             "q, r, n = np.load('qrl/sum.npy'), np.load('ort/sum.npy'), np.load('np_sum.npy')\n"
             "assert q.shape == r.shape == n.shape and np.allclose(q, r, atol=1e-5) and np.allclose(q, n, atol=1e-5), (q, r, n)\n"
             "print('ok')\"",
             dir, tu_root(), tu_qrl(), dir, dir, dir, dir, dir, dir, dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert(strstr(log, "ok"), "%s", log);
    free(log);
}
