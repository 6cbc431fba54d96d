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

/* A new folder with tests/e2e/SCRIPT's model (MODEL.onnx, x.npy, x_test.npy) quantized by RECIPE
 * (under the project root) into q.onnx. */
static char *quantized_in_tmpdir(const char *script, const char *model, const char *recipe)
{
    char *d = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/%s' %s && %s quantize %s/%s.onnx --recipe '%s/%s' "
             "--calib %s/x.npy -o %s/q.onnx",
             tu_root(), script, d, tu_qrl(), d, model, tu_root(), recipe, d, d);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    return d;
}

static void setup(void)
{
    dir = quantized_in_tmpdir("bands_model.py", "bands", "recipes/int8-minmax.qrl");
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

/* The arena's bytes from qrl run --stats' log ("memory: arena N bytes ..."), -1 when absent. */
static long long arena_bytes(const char *log)
{
    const char *m = strstr(log, "memory: arena ");
    return m ? atoll(m + strlen("memory: arena ")) : -1;
}

Test(bands, chains_by_bands_give_the_whole_runs_bits)
{
    char *log = run("whole", "--option bands=0");
    cr_assert_null(strstr(log, "bands:"), "bands=0 ran bands: %s", log);
    long long whole = arena_bytes(log);
    free(log);
    /* every convolution but the stem is in a chain (the stem's output is read twice: by the first
     * expansion and the residual Add) */
    static const char *const banded[][2] = {
        {"bands1", "--option bands=all --threads 1"},
        {"bands2", "--option bands=all --threads 2"},
        {"portable", "--option bands=all --kernels portable"},
        /* the shape kernels and the rows epilogue compiled (the depthwise layers' requantization in
         * their kernel: ops/requant_prog.h) */
        {"jit", "--option bands=all --iconv-jit"},
    };
    for (size_t i = 0; i < sizeof banded / sizeof banded[0]; i++) {
        log = run(banded[i][0], banded[i][1]);
        cr_assert_not_null(strstr(log, "bands: 9 nodes run in chains by bands of rows"), "%s: %s", banded[i][0], log);
        /* a chain's links hold their windows' rows alone (exec.c bands_image) */
        long long banded_arena = arena_bytes(log);
        cr_assert(banded_arena > 0 && banded_arena < whole, "%s: arena %lld bytes, bands=0 %lld", banded[i][0],
                  banded_arena, whole);
        free(log);
        assert_same("whole", banded[i][0]);
    }
    log = run("jit_whole", "--option bands=0 --iconv-jit");
    free(log);
    assert_same("whole", "jit_whole");
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

/* A chain runs band by band through an epilogue only when the compiler says its kernel takes the
 * chain's input for its type alone (compiler/reads.h). tests/recipes/conv-reads-input.qrl lowers
 * tests/e2e/bands_reads_model.py's third layer to a kernel whose channel part reads its input's
 * last element (no change to the result where that row is made: the layer before makes that
 * element the top of u8 everywhere; a large one where it is the 0xA5 poison of a row not made).
 * The stdlib's recipe bands all four layers in one chain (the stem, reading the NCHW input, starts
 * it); this one in two chains of two (the chain breaks before the reader), and its outputs are
 * bands=0's bits and ONNX Runtime's on the export. */
static char *rdir;

static void reads_setup(void)
{
    rdir = quantized_in_tmpdir("bands_reads_model.py", "reads", "tests/recipes/conv-reads-input.qrl");
}

static void reads_teardown(void)
{
    tu_rmdir(rdir);
}

TestSuite(band_reads, .init = reads_setup, .fini = reads_teardown, .timeout = 300);

/* qrl run of the model quantized in memory by RECIPE (the recipe's own kernels run) with OPTS into
 * rdir/TAG; asserts its --stats line on bands says NODES nodes (0: none). */
static void run_banded(const char *recipe, const char *tag, const char *opts, int nodes)
{
    char cmd[8192], *log, want[128];
    snprintf(cmd, sizeof cmd, "%s run %s/reads.onnx --recipe '%s/%s' --calib %s/x.npy -i %s/x_test.npy -o %s/%s --stats "
             "--option nhwc=all %s", tu_qrl(), rdir, tu_root(), recipe, rdir, rdir, rdir, tag, opts);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    snprintf(want, sizeof want, "bands: %d nodes run in chains by bands of rows", nodes);
    if (nodes)
        cr_assert_not_null(strstr(log, want), "%s: not '%s': %s", tag, want, log);
    else
        cr_assert_null(strstr(log, "bands:"), "%s ran bands: %s", tag, log);
    free(log);
}

static double out_diff(const char *a_tag, const char *b_tag)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/%s/c_c.npy", rdir, a_tag);
    snprintf(b, sizeof b, "%s/%s/c_c.npy", rdir, b_tag);
    return tu_npy_rel_diff(a, b);
}

Test(band_reads, an_epilogue_reading_its_input_breaks_the_chain)
{
    static const char std[] = "recipes/int8-minmax.qrl", reads[] = "tests/recipes/conv-reads-input.qrl";
    run_banded(std, "std0", "--option bands=0", 0);
    run_banded(std, "std", "--option bands=all", 4);
    cr_assert(out_diff("std0", "std") == 0, "the stdlib's recipe: bands=all against bands=0");
    run_banded(reads, "reads0", "--option bands=0", 0);
    run_banded(reads, "reads", "--option bands=all", 4);
    run_banded(reads, "reads2", "--option bands=all --threads 2", 4);
    cr_assert(out_diff("reads0", "reads") == 0, "bands=all against bands=0: %g", out_diff("reads0", "reads"));
    cr_assert(out_diff("reads0", "reads2") == 0, "2 threads against bands=0: %g", out_diff("reads0", "reads2"));
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/q.onnx %s/x_test.npy -o %s/ort", tu_root(), rdir, rdir, rdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    double d = out_diff("ort", "reads");
    cr_assert(d >= 0 && d < 1e-5, "ORT against bands=all: %g", d);
}

/* A node keeps its channel tables from one run to the next while what their fill reads stays the
 * same (compiler/reads.h qc_fill_reads, qr_fill_key, quantizer/intgraph.c fill_tables).
 * tests/recipes/conv-bias-reads-input.qrl's third layer adds 4 x its input's first element to each
 * channel's bias: its fill reads x's elements, which differ from sample to sample. One qrl run
 * over the three test samples at --batch 1 (one executor, three runs) must give each sample what
 * a run of that sample alone gives (a fresh executor: its one run fills its tables); tables kept
 * from the first run would give the next samples its bias. The stdlib's recipe (tables from
 * constants alone, kept) gives --batch 1 the bits of --batch 0. */
Test(band_reads, kept_tables_follow_the_input_their_fill_reads)
{
    static const char bias[] = "tests/recipes/conv-bias-reads-input.qrl", std[] = "recipes/int8-minmax.qrl";
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; x = np.load('%s/x_test.npy')\n"
             "for i in range(3): np.save('%s/x_%%d.npy' %% i, x[i:i + 1])\"",
             rdir, rdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    const char *recipes[2] = {bias, std};
    for (int r = 0; r < 2; r++) {
        snprintf(cmd, sizeof cmd, "%s run %s/reads.onnx --recipe '%s/%s' --calib %s/x.npy -i %s/x_test.npy -o %s/kept%d "
                 "--batch 1 --option nhwc=all --option bands=0", tu_qrl(), rdir, tu_root(), recipes[r], rdir, rdir,
                 rdir, r);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        char a[4096], b[4096];
        if (r == 1) { /* the stdlib's: --batch 0's bits */
            snprintf(cmd, sizeof cmd, "%s run %s/reads.onnx --recipe '%s/%s' --calib %s/x.npy -i %s/x_test.npy -o %s/all1 "
                     "--option nhwc=all --option bands=0", tu_qrl(), rdir, tu_root(), std, rdir, rdir, rdir);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            free(log);
            snprintf(a, sizeof a, "%s/kept1/c_c.npy", rdir);
            snprintf(b, sizeof b, "%s/all1/c_c.npy", rdir);
            cr_assert(tu_npy_rel_diff(a, b) == 0, "the stdlib's recipe: --batch 1 against --batch 0: %g",
                      tu_npy_rel_diff(a, b));
            continue;
        }
        for (int i = 0; i < 3; i++) {
            snprintf(cmd, sizeof cmd, "%s run %s/reads.onnx --recipe '%s/%s' --calib %s/x.npy -i %s/x_%d.npy -o %s/one%d "
                     "--option nhwc=all --option bands=0", tu_qrl(), rdir, tu_root(), bias, rdir, rdir, i, rdir, i);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            free(log);
        }
        /* sample i of the one run against the run of sample i alone, and the samples' biases differ */
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import numpy as np; k = np.load('%s/kept0/c_c.npy')\n"
                 "one = [np.load('%s/one%%d/c_c.npy' %% i) for i in range(3)]\n"
                 "for i in range(3):\n"
                 "    d = np.abs(k[i:i + 1] - one[i]).max()\n"
                 "    assert d == 0, 'sample %%d: %%g from the run of it alone' %% (i, d)\n"
                 "assert np.abs(one[0] - one[1]).max() > 0 and np.abs(one[1] - one[2]).max() > 0, 'no change'\"",
                 rdir, rdir);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
    }
}

/* MaxPools inside band chains (pool_nhwc.c qr_pool_band_nhwc; ResNet-18's stem into its MaxPool
 * at batch 64): tests/e2e/pool_bands_model.py's 7 x 7 stride-2 stem into a 3 x 3 stride-2 pool
 * with pads, a convolution with a non-zero zero point into a 2 x 2 stride-2 pool whose input's
 * last row and column no window reads, then a 1 x 1 convolution, on 25 x 19 images of 13 and 10
 * channels. bands=all runs the five nodes as one chain (without the pools' bands: none, each
 * chain one convolution long); its outputs must be bands=0's bits with 1 and 2 threads and on the
 * portable kernels, and ONNX Runtime's on the export. */
static char *pdir;

static void pools_setup(void)
{
    pdir = quantized_in_tmpdir("pool_bands_model.py", "pools", "recipes/int8-minmax.qrl");
}

static void pools_teardown(void)
{
    tu_rmdir(pdir);
}

TestSuite(pool_bands, .init = pools_setup, .fini = pools_teardown, .timeout = 300);

Test(pool_bands, maxpools_in_chains_give_the_whole_runs_bits)
{
    static const char *const runs[][3] = {
        {"whole", "--option bands=0", NULL},
        {"bands1", "--option bands=all --threads 1", "bands: 5 nodes run in chains by bands of rows"},
        {"bands2", "--option bands=all --threads 2", "bands: 5 nodes run in chains by bands of rows"},
        {"portable", "--option bands=all --kernels portable", "bands: 5 nodes run in chains by bands of rows"},
    };
    char cmd[8192], *log, a[4096], b[4096];
    snprintf(a, sizeof a, "%s/whole/c3_c.npy", pdir);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run %s/q.onnx -i %s/x_test.npy -o %s/%s --stats --option nhwc=all %s", tu_qrl(),
                 pdir, pdir, pdir, runs[i][0], runs[i][1]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", runs[i][0], log);
        if (runs[i][2])
            cr_assert_not_null(strstr(log, runs[i][2]), "%s: not '%s': %s", runs[i][0], runs[i][2], log);
        else
            cr_assert_null(strstr(log, "bands:"), "bands=0 ran bands: %s", log);
        free(log);
        snprintf(b, sizeof b, "%s/%s/c3_c.npy", pdir, runs[i][0]);
        double d = tu_npy_rel_diff(a, b);
        cr_assert(d == 0, "%s against bands=0: relative difference %g", runs[i][0], d);
    }
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/q.onnx %s/x_test.npy -o %s/ort", tu_root(), pdir, pdir, pdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(a, sizeof a, "%s/ort/c3_c.npy", pdir);
    snprintf(b, sizeof b, "%s/bands1/c3_c.npy", pdir);
    double d = tu_npy_rel_diff(a, b);
    cr_assert(d >= 0 && d < 1e-5, "ORT against bands=all: %g", d);
}
