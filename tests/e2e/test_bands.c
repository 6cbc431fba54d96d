/* Chains of NHWC integer convolutions run band by band (runtime/exec.c run_bands, --option
 * bands=all: every chain, in bands of two output rows of the last node, each node before it making
 * the rows the next one's band reads first): tests/e2e/bands_model.py's inverted residual blocks
 * on ragged shapes (15 x 13 images, channels 5 to 27, stride 1 with the residual Add, stride 2
 * with and without pads, rows no window reads). The outputs must be the same bits as every node
 * over its whole output (bands=0), with 1 and 2 threads and on the portable kernels, and as ONNX
 * Runtime's on the same export (an independent implementation). */
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
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/bands_model.py' %s && %s quantize %s/bands.onnx --recipe "
             "'%s/recipes/int8-minmax.qrl' --calib %s/x.npy -o %s/q.onnx",
             tu_root(), dir, tu_qrl(), dir, tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(bands, .init = setup, .fini = teardown, .timeout = 300);

/* qrl run of the export on x_test.npy with OPTS into dir/TAG; returns its --stats output. */
static char *run(const char *tag, const char *opts)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "%s run %s/q.onnx -i %s/x_test.npy -o %s/%s --stats --option nhwc=all %s", tu_qrl(), dir,
             dir, dir, tag, opts);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    return log;
}

static void assert_same(const char *ref, const char *tag)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/%s/p3_c.npy", dir, ref);
    snprintf(b, sizeof b, "%s/%s/p3_c.npy", dir, tag);
    double d = tu_npy_rel_diff(a, b);
    cr_assert(d == 0, "%s against %s: relative difference %g", tag, ref, d);
}

Test(bands, chains_by_bands_give_the_whole_runs_bits)
{
    char *log = run("whole", "--option bands=0");
    cr_assert_null(strstr(log, "bands:"), "bands=0 ran bands: %s", log);
    free(log);
    /* every convolution but the stem (it reads the NCHW input) is in a chain */
    static const char *const banded[][2] = {
        {"bands1", "--option bands=all --threads 1"},
        {"bands2", "--option bands=all --threads 2"},
        {"portable", "--option bands=all --kernels portable"},
    };
    for (size_t i = 0; i < sizeof banded / sizeof banded[0]; i++) {
        log = run(banded[i][0], banded[i][1]);
        cr_assert_not_null(strstr(log, "bands: 9 nodes run in chains by bands of rows"), "%s: %s", banded[i][0], log);
        free(log);
        assert_same("whole", banded[i][0]);
    }
    /* ONNX Runtime on the same export */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/q.onnx %s/x_test.npy -o %s/ort", tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/ort/p3_c.npy", dir);
    snprintf(b, sizeof b, "%s/bands1/p3_c.npy", dir);
    double d = tu_npy_rel_diff(a, b);
    cr_assert(d >= 0 && d < 1e-5, "ORT against bands=all: %g", d);
}
