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
    snprintf(cmd, sizeof cmd, "%s --option f32-split=all run %s/m.onnx -i %s/x.npy -o %s/t --threads 2", tu_qrl(), dir, dir, dir);
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

/* The "memory: arena N bytes" of a `qrl run --stats` log (the last executor run's plan). */
static long long arena_of(const char *log)
{
    const char *p = strstr(log, "memory: arena ");
    cr_assert(p, "no arena in:\n%s", log);
    return atoll(p + strlen("memory: arena "));
}

/* A batch whose samples the graph computes apart runs in parts (runtime/samples.h, qrl_model_run):
 * 5 samples of 456 KB as parts of 2, 2 and 1. Each sample's outputs are the bits of that sample
 * run alone (--batch 1), and of 2 threads; within 1e-4 of ONNX Runtime; the profile counts the
 * model's run once; the last plan is of one sample (the third part). A graph with an output that
 * mixes the samples (a mean over the batch) runs whole, and matches ONNX Runtime. */
Test(nhwc_f32, a_batch_runs_in_parts_with_each_samples_bits)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/nhwc_f32_oracle.py' make-parts %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    static const char *const models[] = {"p", "px"};
    long long whole[2], one[2];
    for (int m = 0; m < 2; m++) {
        const char *o = models[m];
        snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/%s.onnx %s/xp.npy -o %s/ort_%s", tu_root(), dir, o,
                 dir, dir, o);
        cr_assert_eq(tu_run(cmd, &log), 0, "onnxruntime-node failed (make ort installs it): %s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s run %s/%s.onnx -i %s/xp.npy -o %s/q_%s --profile --stats", tu_qrl(), dir, o,
                 dir, dir, o);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "nodes ran 1 time,"), "the profile counts the model's runs:\n%s", log);
        whole[m] = arena_of(log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s run %s/%s.onnx -i %s/xp.npy -o %s/b_%s --batch 1 --stats", tu_qrl(), dir, o,
                 dir, dir, o);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        one[m] = arena_of(log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s --option f32-split=all run %s/%s.onnx -i %s/xp.npy -o %s/t_%s --threads 2", tu_qrl(), dir, o, dir,
                 dir, o);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/nhwc_f32_oracle.py' check %s/q_%s %s/ort_%s y y_mid "
                 "pw_hswish%s", tu_root(), dir, o, dir, o, m ? " y_bmean" : "");
        int rc = tu_run(cmd, &log);
        cr_log_info("%s:\n%s", o, log);
        cr_assert_eq(rc, 0, "%s against ONNX Runtime:\n%s", o, log);
        free(log);
        static const char *const outs[] = {"y", "y_mid", "pw_hswish"};
        for (int i = 0; i < 3; i++) {
            char a[1024], b[1024], t[1024];
            snprintf(a, sizeof a, "%s/q_%s/%s.npy", dir, o, outs[i]);
            snprintf(b, sizeof b, "%s/b_%s/%s.npy", dir, o, outs[i]);
            snprintf(t, sizeof t, "%s/t_%s/%s.npy", dir, o, outs[i]);
            cr_assert_eq(tu_npy_max_diff(a, b), 0.0, "%s %s: the batch and each sample alone differ", o, outs[i]);
            cr_assert_eq(tu_npy_max_diff(a, t), 0.0, "%s %s: 1 and 2 threads differ", o, outs[i]);
        }
    }
    /* a second call of the model (qrl run --batch 5 over the samples twice) sizes its parts from the
     * bytes a sample kept live in the first (api.c's part_size): each sample still its own bits */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as n; x = n.load('%s/xp.npy'); n.save('%s/xp2.npy', n.concatenate([x, x]))\" && "
             "%s run %s/p.onnx -i %s/xp2.npy -o %s/r_p --batch 5 && /usr/bin/python3 -c \"import numpy as n, sys; "
             "a = n.load('%s/r_p/y.npy'); b = n.load('%s/b_p/y.npy'); sys.exit(0 if n.array_equal(a, n.concatenate([b, b])) else 1)\"",
             dir, dir, tu_qrl(), dir, dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "two calls of 5 samples against each sample alone:\n%s", log);
    free(log);
    /* --option parts (stop 39): the batch whole, in parts of 4 (4 and 1) and of 1, each sample its own
     * bits; px.onnx (samples mixed) runs whole whatever the option says, so its outputs stay */
    static const char *const parts[] = {"whole", "4", "1"};
    for (int i = 0; i < 3; i++)
        for (int m = 0; m < 2; m++) {
            const char *o = models[m];
            snprintf(cmd, sizeof cmd, "%s --option parts=%s run %s/%s.onnx -i %s/xp.npy -o %s/pp_%s && /usr/bin/python3 "
                     "-c \"import numpy as n, sys; a = n.load('%s/pp_%s/y.npy'); b = n.load('%s/q_%s/y.npy'); "
                     "sys.exit(0 if n.array_equal(a, b) else 1)\"", tu_qrl(), parts[i], dir, o, dir, dir, o, dir, o, dir, o);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s, parts=%s against the default:\n%s", o, parts[i], log);
            free(log);
        }
    if (qr_sconv_available()) { /* where the channels-last graph runs (the parts are its) */
        cr_assert_eq(whole[0], one[0], "p.onnx: the last part's plan is not of one sample");
        cr_assert_neq(whole[1], one[1], "px.onnx (samples mixed) ran in parts");
    }
}
