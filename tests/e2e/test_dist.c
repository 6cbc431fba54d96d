/* Distributed calibration through mpirun (docs/distributed.md), on the bundled Fashion-MNIST model
 * and build/data: N ranks give the bytes one process gives, a wrong merge shows, a rank that dies
 * or ranks given different inputs end the job with an error and no output. The oracle is the
 * one-process qrl quantize (whose exports test_quantize.c checks against ONNX Runtime). Skipped,
 * saying so, only where mpirun is not installed; CI installs Open MPI, so there it runs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

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

TestSuite(dist, .init = setup, .fini = teardown, .timeout = 300);

static const char *data_dir(void)
{
    const char *d = getenv("QRL_DATA");
    return d && *d ? d : "build/data";
}

static void need_mpirun(void)
{
    if (tu_run("command -v mpirun", NULL) != 0)
        cr_skip_test("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev): the distributed "
                     "calibration suite does not run");
}

/* mpirun as root on a machine with fewer cores than ranks. Under ASan the ranks do not check for
 * leaks: Open MPI keeps what MPI_Init allocates past MPI_Finalize, in components it has unloaded by
 * then, which LeakSanitizer cannot name (so tests/lsan.supp cannot suppress them). The code the
 * ranks run beyond one process's is leak-checked in-process by tests/unit/test_dist.c. */
#define MPIRUN "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe"

/* The qrl quantize command line, without its outputs: recipe (and name), calibration options. */
static void quantize_cmd(char *out, size_t n, const char *recipe, const char *extra)
{
    snprintf(out, n, "%s quantize '%s/examples/fmnist/fmnist_cnn.onnx' --recipe '%s/%s' --calib "
                     "'%s/calib_images.npy' --quiet --threads 1 %s",
             tu_qrl(), tu_root(), tu_root(), recipe, data_dir(), extra);
}

/* Runs `prefix Q -o dir/tag.onnx --qparams dir/tag.json`; returns the exit status. */
static int quantize_to(const char *prefix, const char *q, const char *tag, char **log)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s -o '%s/%s.onnx' --qparams '%s/%s.json'", prefix, q, dir, tag, dir, tag);
    return tu_run(cmd, log);
}

/* Whether dir/a.ext and dir/b.ext hold the same bytes. */
static int same(const char *a, const char *b, const char *ext)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cmp -s '%s/%s.%s' '%s/%s.%s'", dir, a, ext, dir, b, ext);
    return tu_run(cmd, NULL) == 0;
}

/* quantize_to, which must succeed. */
static void quantize_ok(const char *prefix, const char *q, const char *tag)
{
    char *log;
    int rc = quantize_to(prefix, q, tag, &log);
    cr_assert_eq(rc, 0, "%s%s-> %s failed (%d):\n%s", prefix, *prefix ? " " : "", tag, rc, log);
    free(log);
}

/* Three ranks, one rank and one process: the same export and qparams, byte for byte, for minmax
 * (with the recipe's fallback) and for a histogram calibrator (entropy). 200 samples in batches of
 * 32 are 7 batches: shares of 2, 2 and 3. */
Test(dist, np3_matches_one_process)
{
    need_mpirun();
    const char *recipes[] = {"recipes/int8.qrl", "recipes/int8-entropy.qrl"};
    for (int i = 0; i < 2; i++) {
        char q[2048];
        quantize_cmd(q, sizeof q, recipes[i], "--calib-count 200");
        quantize_ok("", q, "one");
        quantize_ok(MPIRUN " -np 1", q, "np1");
        quantize_ok(MPIRUN " -np 3", q, "np3");
        cr_expect(same("one", "np1", "onnx") && same("one", "np1", "json"), "%s: -np 1 differs from one process",
                  recipes[i]);
        cr_expect(same("one", "np3", "onnx") && same("one", "np3", "json"), "%s: -np 3 differs from one process",
                  recipes[i]);
    }
}

/* The fallback of values quantized at run time on every rank (tests/recipes/dist-dynamic.qrl:
 * int8-dynamic-fallback.qrl at 40 dB, which the CNN misses with every value quantized: the local
 * SQNRs, the effects and the binary search run): -np 3 gives one process's export and qparams. */
Test(dist, np3_dynamic_fallback_matches_one_process)
{
    need_mpirun();
    char q[2048];
    quantize_cmd(q, sizeof q, "tests/recipes/dist-dynamic.qrl", "--calib-count 200");
    quantize_ok("", q, "dyn_one");
    quantize_ok(MPIRUN " -np 3", q, "dyn_np3");
    cr_expect(same("dyn_one", "dyn_np3", "onnx") && same("dyn_one", "dyn_np3", "json"),
              "the dynamic fallback: -np 3 differs from one process");
}

/* Whether dir/a.json and dir/b.json, JSON reports, hold the same bytes but for their timings. */
static int same_report(const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "grep -v '_ms\"\\|node_samples\"' '%s/%s.json' > '%s/%s.t' && grep -v '_ms\"\\|node_samples\"' '%s/%s.json' > '%s/%s.t' && "
                              "cmp -s '%s/%s.t' '%s/%s.t'", dir, a, dir, a, dir, b, dir, b, dir, a, dir, b);
    int ok = tu_run(cmd, NULL) == 0;
    snprintf(cmd, sizeof cmd, "rm -f '%s/%s.t' '%s/%s.t'", dir, a, dir, b);
    tu_run(cmd, NULL);
    return ok;
}

/* The measurements and the search run on every rank, each on its share of the batches (the effect
 * runs: of the layers), their sums gathered and added in batch order: -np 3 and -np 1 give one
 * process's export, qparams and report (every figure but the timings). tests/recipes/dist-search.qrl:
 * `search` sends 2 of the CNN's layers back to f32 (the effect runs, then a binary search), with
 * top-1 on the labels (a run per layer); `mixed` chooses f32 or int8 per layer under a budget, and
 * its report prints the layers' effects and the rest's error in full (%.17g): in batches of 2 the
 * rest is measured on 4 batches, split 1, 1, 2 over 3 ranks, so a sum added in another grouping
 * (the ranks' partial sums added up) shows there. And weight-only mixed precision (mixed-w48.qrl),
 * which every rank runs whole but for the layers' sensitivities, dealt out by layer (2 layers: rank
 * 2 has none). */
Test(dist, search_matches_one_process)
{
    need_mpirun();
    const char *extra[] = {"--recipe-name search --calib-count 200 --batch 16 --labels '%s/calib_labels.npy'",
                           "--recipe-name mixed --calib-count 200 --batch 2", "--calib-count 200"};
    const char *recipe[] = {"tests/recipes/dist-search.qrl", "tests/recipes/dist-search.qrl", "recipes/mixed-w48.qrl"};
    for (int i = 0; i < 3; i++) {
        char q[2048], x[1024], rep[1024];
        snprintf(x, sizeof x, extra[i], data_dir());
        quantize_cmd(q, sizeof q, recipe[i], x);
        const char *tags[] = {"one", "np1", "np3"}, *pre[] = {"", MPIRUN " -np 1", MPIRUN " -np 3"};
        for (int k = 0; k < 3; k++) {
            char qr[4096];
            snprintf(rep, sizeof rep, "--report '%s/%s-r.json'", dir, tags[k]);
            snprintf(qr, sizeof qr, "%s %s", q, rep);
            quantize_ok(pre[k], qr, tags[k]);
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/one-r.json", dir);
        char *log = tu_slurp(path);
        cr_assert(log && strstr(log, i ? "\"mixed\"" : "\"fallback\": true"), "%s: no search in the report:\n%s", x,
                  log ? log : "");
        free(log);
        for (int k = 1; k < 3; k++) {
            char rt[64];
            snprintf(rt, sizeof rt, "%s-r", tags[k]);
            cr_expect(same("one", tags[k], "onnx"), "%s: %s's export differs from one process's", x, tags[k]);
            cr_expect(same("one", tags[k], "json"), "%s: %s's qparams differ from one process's", x, tags[k]);
            cr_expect(same_report("one-r", rt), "%s: %s's report differs from one process's", x, tags[k]);
        }
    }
}

/* The report's runs under mpirun are the job's: each rank counts the runs it made (its share of the
 * batches, and what it runs whole) and rank 0's report has their sums (gathered over the ranks). On
 * the CNN with a search (tests/recipes/dist-search.qrl `search`, batches of 16, 200 samples: 150
 * calibrate, 50 held out), two ranks and one process do the same work in the calibration, the local
 * measurement, the first tries, the search and the measurement of what ships: each batch (each try)
 * is run by one rank, so the phases' node-runs x samples are equal, on the calibrating and on the
 * held-out samples. They differ where the work does: every rank runs the effects' f32 run itself
 * (each rank's cuts read it): the f32 graph's 14 nodes on part of the 50 held-out samples, once more
 * per rank; and the f32 pass is not kept under mpirun (qr_measure_kept_batches): it runs over all
 * 150 before calibration, and the calibrate figure's f32 outputs are run again. Rank 0's own
 * counts (its share of the calibration: 5 of 10 batches) would differ in every phase. */
Test(dist, runs_are_the_jobs)
{
    need_mpirun();
    char q[2048], qr[4096], cmd[4096], *log;
    quantize_cmd(q, sizeof q, "tests/recipes/dist-search.qrl", "--recipe-name search --calib-count 200 --batch 16");
    const char *tags[] = {"one", "np2"}, *pre[] = {"", MPIRUN " -np 2"};
    for (int k = 0; k < 2; k++) {
        snprintf(qr, sizeof qr, "%s --report '%s/%s-r.json'", q, dir, tags[k]);
        quantize_ok(pre[k], qr, tags[k]);
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import json\n"
             "a, b = [json.load(open(p))['runs'] for p in ('one-r.json', 'np2-r.json')]\n"
             "pa, pb = [{p['phase']: (p['node_samples'], p['validate_node_samples']) for p in r['phases']} for r in (a, b)]\n"
             "assert set(pa) == set(pb), (pa, pb)\n"
             "same = ['calibration', 'local measurement', 'first tries', 'search', 'measurement of what ships']\n"
             "for k in same: assert pa[k] == pb[k], (k, pa[k], pb[k])\n"
             "assert pa['calibration'] == (150 * 14, 0) and pa['search'][0] == pa['search'][1] > 0, pa\n"
             "assert b['node_samples'] == sum(v[0] for v in pb.values()), b\n"
             "assert b['validate']['node_samples'] == sum(v[1] for v in pb.values()), b\n"
             "assert b['calibrate']['node_samples'] + b['validate']['node_samples'] == b['node_samples'], b\n"
             "assert a['validate']['ranked'] == b['validate']['ranked'] > 0, (a, b)\n"
             "assert pb['effects'][0] > pa['effects'][0] and pb['effects'][0] == pb['effects'][1], (pa, pb)\n"
             "assert pb['fp32 pass'] == (150 * 14, 0), pb\n"
             "\"",
             dir);
    cr_expect_eq(tu_run(cmd, &log), 0, "the job's runs:\n%s", log);
    free(log);
}

/* tests/recipes/bad-merge.qrl's bad_merge drops merged states of several batches. One process on
 * one thread merges only one-batch states: it calibrates exactly as minmax (good_merge). Three ranks
 * of 4 batches each merge states of 4 batches: ranks 1 and 2 are lost, and the qparams change.
 * good_merge, the same with minmax, stays identical: what changes is the merge, nothing else. */
Test(dist, wrong_merge_changes_the_distributed_result)
{
    need_mpirun();
    char bad[2048], good[2048];
    quantize_cmd(bad, sizeof bad, "tests/recipes/bad-merge.qrl", "--recipe-name bad_merge --calib-count 192 --batch 16");
    quantize_cmd(good, sizeof good, "tests/recipes/bad-merge.qrl",
                 "--recipe-name good_merge --calib-count 192 --batch 16");
    quantize_ok("", bad, "bad1");
    quantize_ok("", good, "good1");
    quantize_ok(MPIRUN " -np 3", bad, "bad3");
    quantize_ok(MPIRUN " -np 3", good, "good3");
    cr_expect(same("bad1", "good1", "json"), "one process: bad_merge should calibrate as minmax");
    cr_expect(same("good1", "good3", "json") && same("good1", "good3", "onnx"), "good_merge: -np 3 differs");
    cr_expect(!same("bad1", "bad3", "json"), "bad_merge: -np 3 gave one process's qparams: the ranks' states "
                                             "were not merged by the calibrator's merge");
}

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* Rank 2 is a real qrl rank, killed (SIGKILL: no cleanup of its own) one second in, while the
 * ranks calibrate (this job takes several seconds). The job ends non-zero, mpirun names the rank
 * that died, and no output (nor a temporary file beside it) is left. */
Test(dist, killed_rank_ends_the_job)
{
    need_mpirun();
    char q[2048], cmd[8192], *log;
    quantize_cmd(q, sizeof q, "recipes/int8-entropy.qrl", "--calib-count 600");
    char outs[1024];
    snprintf(outs, sizeof outs, "-o '%s/k.onnx' --qparams '%s/k.json'", dir, dir);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s : -np 1 sh -c \"%s %s & p=\\$!; sleep 1; kill -9 \\$p; wait \\$p\"",
             q, outs, q, outs);
    double t0 = now_s();
    int rc = tu_run(cmd, &log);
    double took = now_s() - t0;
    cr_expect_neq(rc, 0, "the job succeeded with a rank killed:\n%s", log);
    cr_expect(strstr(log, "exited") || strstr(log, "non-zero") || strstr(log, "killed"),
              "no message says a rank died:\n%s", log);
    cr_expect_eq(tu_count_files(dir), 0, "files left in the output folder:\n%s", log);
    cr_expect_geq(took, 1.0, "the job ended before the kill (%.2f s):\n%s", took, log);
    free(log);
}

/* Rank 2 gets another recipe, then (another job) other calibration data: rank 0 names the rank and
 * the input, and no rank writes anything. */
Test(dist, different_inputs_end_the_job)
{
    need_mpirun();
    char q[2048], other[2048], cmd[8192], *log;
    quantize_cmd(q, sizeof q, "recipes/int8.qrl", "--calib-count 100");
    char outs[1024];
    snprintf(outs, sizeof outs, "-o '%s/d.onnx' --qparams '%s/d.json'", dir, dir);
    quantize_cmd(other, sizeof other, "recipes/int8-minmax.qrl", "--calib-count 100");
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s : -np 1 %s %s", q, outs, other, outs);
    int rc = tu_run(cmd, &log);
    cr_expect_neq(rc, 0, "the job succeeded:\n%s", log);
    cr_expect(strstr(log, "given different inputs: rank 2 (the recipe) differs from rank 0's"), "%s", log);
    cr_expect_eq(tu_count_files(dir), 0, "files left in the output folder:\n%s", log);
    free(log);
    quantize_cmd(other, sizeof other, "recipes/int8.qrl", "--calib-count 100");
    char *at = strstr(other, "calib_images.npy");
    cr_assert(at);
    memcpy(at, "test_images.npy' ", 17); /* same length: the same command, other samples */
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s : -np 1 %s %s", q, outs, other, outs);
    rc = tu_run(cmd, &log);
    cr_expect_neq(rc, 0, "the job succeeded:\n%s", log);
    cr_expect(strstr(log, "rank 2 (the calibration data) differs from rank 0's"), "%s", log);
    cr_expect_eq(tu_count_files(dir), 0, "files left in the output folder:\n%s", log);
    free(log);
}
