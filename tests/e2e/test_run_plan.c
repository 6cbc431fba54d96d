/* A node's run plan (runtime/op.h qr_kplan_get): what a kernel derives from its attributes and the
 * shapes of its executor's plan (the NHWC convolutions' geometry, attributes, specialized kernels,
 * windows' offsets; the epilogue tables' key), made on the first run of a set of input shapes and
 * reused until they change. tests/e2e/run_plan_model.py's CNN, whose images may be of any size,
 * quantized by the stdlib's int8 recipe and run through the API with the iconv-jit kernels and
 * bands: one model (one executor) takes inputs of two batch sizes and image sizes in turns (15 x 13
 * then 9 x 11 and back), two models of the one file take them crosswise, and the one model again
 * on two threads (its executor made again). Every output must be ONNX Runtime's on the same export
 * (an independent implementation) and the same bits as the same input's first run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qrl.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log, cache[1100];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("XDG_CACHE_HOME", cache, 1); /* what runs was compiled by this build */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/tests/e2e/run_plan_model.py' %s && %s quantize %s/plan.onnx --recipe "
             "'%s/recipes/int8-minmax.qrl' --calib %s/x.npy -o %s/q.onnx && node '%s/tools/ort_run.js' %s/q.onnx "
             "%s/a.npy -o %s/ort_a && node '%s/tools/ort_run.js' %s/q.onnx %s/b.npy -o %s/ort_b",
             tu_root(), dir, tu_qrl(), dir, tu_root(), dir, dir, tu_root(), dir, dir, dir, tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    tu_option("iconv-jit", "1");
    tu_option("bands", "auto");
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(run_plan, .init = setup, .fini = teardown, .timeout = 600);

static qrl_tensor load(const char *name)
{
    char path[1200], err[1024];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    qrl_tensor t;
    cr_assert_eq(qrl_tensor_read_npy(path, &t, err, sizeof err), 0, "%s", err);
    return t;
}

static size_t nbytes(const qrl_tensor *t)
{
    return (size_t)qrl_tensor_numel(t) * qrl_dtype_size(t->dtype);
}

/* m's output on input s (a or b), checked against ONNX Runtime's and, when ref holds one, against
 * ref's bits; the output is kept in ref when it held none. what: the run, for the messages. */
static void run_check(qrl_model *m, const char *s, qrl_tensor *ref, const char *what)
{
    char err[1024], name[64], path[1200], ort[1200];
    qrl_tensor x = load(s), y;
    cr_assert_eq(qrl_model_run(m, &x, &y, err, sizeof err), 0, "%s: %s", what, err);
    snprintf(name, sizeof name, "out_%s", what);
    for (char *p = name; *p; p++)
        *p = *p == ' ' || *p == ',' ? '_' : *p;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(qrl_tensor_write_npy(path, &y, err, sizeof err), 0, "%s", err);
    snprintf(ort, sizeof ort, "%s/ort_%s/y.npy", dir, s);
    double d = tu_npy_rel_diff(ort, path);
    cr_assert(d >= 0 && d < 1e-5, "%s: ONNX Runtime against QRL: relative difference %g", what, d);
    if (ref->data) {
        cr_assert_eq(y.ndim, ref->ndim, "%s", what);
        cr_assert_eq(nbytes(&y), nbytes(ref), "%s", what);
        cr_assert_eq(memcmp(y.data, ref->data, nbytes(&y)), 0, "%s: not the bits of its input's first run", what);
        qrl_tensor_free(&y);
    } else
        *ref = y;
    qrl_tensor_free(&x);
}

/* The export's integer graph (qrl run's: stdlib/qdq.qrl lowers it) as *m, owned by *q. */
static void open_int(qrl_model **f, qrl_quantized **q, qrl_model **m)
{
    char err[1024], path[1200];
    snprintf(path, sizeof path, "%s/q.onnx", dir);
    cr_assert_eq(qrl_model_load(path, 1, f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_model_lower_qdq(*f, NULL, stderr, q, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(*q, "no QDQ pairs");
    cr_assert_not_null(*m = qrl_quantized_model(*q, err, sizeof err), "%s", err);
}

/* The integer convolutions of m ran (the run plans under test are theirs). */
static void assert_int_convs(qrl_model *m)
{
    int convs = 0;
    for (int i = 0; i < qrl_model_num_nodes(m); i++)
        convs += !strcmp(qrl_node_op(m, i), "QrlConvKernel");
    cr_assert_eq(convs, 4, "%d QrlConvKernel nodes, the model has 4 convolutions", convs);
}

Test(run_plan, shapes_that_change_between_runs_give_the_right_outputs)
{
    char err[1024];
    qrl_model *f, *f2, *m, *m2;
    qrl_quantized *q, *q2;
    open_int(&f, &q, &m);
    assert_int_convs(m);
    qrl_tensor ra = {0}, rb = {0};
    /* one executor: each shape's plan made, dropped for the other's, made again */
    run_check(m, "a", &ra, "a first");
    run_check(m, "b", &rb, "b first");
    run_check(m, "a", &ra, "a after b");
    run_check(m, "a", &ra, "a again");
    run_check(m, "b", &rb, "b after a");
    /* a second model of the file: plans of its own, each executor's shapes crosswise */
    open_int(&f2, &q2, &m2);
    run_check(m2, "b", &rb, "second model b");
    run_check(m, "a", &ra, "first model a");
    run_check(m2, "a", &ra, "second model a");
    run_check(m, "b", &rb, "first model b");
    /* two threads: the executor made again, the same bits */
    cr_assert_eq(qrl_model_configure(m, 2, 0, err, sizeof err), 0, "%s", err);
    run_check(m, "b", &rb, "two threads b");
    run_check(m, "a", &ra, "two threads a");
    run_check(m, "b", &rb, "two threads b again");
    qrl_tensor_free(&ra);
    qrl_tensor_free(&rb);
    qrl_quantized_free(q);
    qrl_quantized_free(q2);
    qrl_model_free(f);
    qrl_model_free(f2);
}
