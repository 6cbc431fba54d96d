/* The f32 graph channels-last (runtime/pass_nhwc_f32.c) on a small CNN with every layer kind the
 * pass converts and the borders it restores (nhwc_f32_oracle.py): `qrl run` against ONNX Runtime
 * within 1e-4 of each output's largest magnitude, as `qrl run --option nhwc=0` (the NCHW graph);
 * 2 threads give the same bits; the profile shows the channels-last ops ran (on CPUs with
 * AVX-512F, where sconv runs). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sconv.h"
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

TestSuite(nhwc_f32, .init = setup, .fini = teardown, .timeout = 300);

static void check_against_ort(const char *out)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/nhwc_f32_oracle.py' check %s/%s %s/ort", tu_root(), dir,
             out, dir);
    int rc = tu_run(cmd, &log);
    cr_log_info("%s:\n%s", out, log);
    cr_assert_eq(rc, 0, "%s against ONNX Runtime:\n%s", out, log);
    free(log);
}

Test(nhwc_f32, cnn_matches_onnx_runtime_channels_last_and_not)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/nhwc_f32_oracle.py' make %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/m.onnx %s/x.npy -o %s/ort", tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "onnxruntime-node failed (make ort installs it): %s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s run %s/m.onnx -i %s/x.npy -o %s/q --profile", tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    if (qr_sconv_available()) {
        cr_assert(strstr(log, "QrlConvF32Nhwc") && strstr(log, "QrlMaxPoolF32Nhwc") &&
                      strstr(log, "QrlGlobalAveragePoolF32Nhwc"),
                  "the channels-last ops did not run:\n%s", log);
        /* the restores: y_mid (an output, and read by ReduceMean), pw_hswish (an output only
         * channels-last nodes read) and the head's pool before Flatten */
        cr_assert(strstr(log, "Transpose"), "%s", log);
    } else {
        cr_log_info("no AVX-512F: the graph stays NCHW");
    }
    free(log);
    snprintf(cmd, sizeof cmd, "%s run %s/m.onnx -i %s/x.npy -o %s/t --threads 2", tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s --option nhwc=0 run %s/m.onnx -i %s/x.npy -o %s/r", tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    check_against_ort("q");
    check_against_ort("r");
    static const char *const outs[] = {"y", "y_mid", "y_red", "pw_hswish"};
    for (int i = 0; i < 4; i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/q/%s.npy", dir, outs[i]);
        snprintf(b, sizeof b, "%s/t/%s.npy", dir, outs[i]);
        cr_assert_eq(tu_npy_max_diff(a, b), 0.0, "%s: 1 and 2 threads differ", outs[i]);
    }
}
