/* Bad input through the qrl command: each case must exit 1 with a one-line
 * error naming the file and the node or field, and leave no output file.
 * The broken models are made at test time by tools/make_bad_models.py. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir, *out;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/make_bad_models.py %s", tu_root(), dir);
    char *log;
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "fixture generation failed: %s", log);
    free(log);
    out = malloc(strlen(dir) + 8);
    sprintf(out, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
    cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
    free(out);
    tu_rmdir(dir);
}

TestSuite(bad_input, .init = setup, .fini = teardown, .timeout = 120);

/* Runs `qrl run <model> <args> -o out` and checks the failure shape. */
static void expect_error(const char *model, const char *args, const char *want1, const char *want2)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "%s run %s/%s %s -o %s", tu_qrl(), dir, model, args, out);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 1, "%s: exit %d, output: %s", model, rc, log);
    cr_assert(strncmp(log, "qrl: error: ", 12) == 0, "%s: %s", model, log);
    char *nl = strchr(log, '\n');
    cr_assert(nl && nl[1] == 0, "%s: error is not one line: %s", model, log);
    cr_assert(strstr(log, want1), "%s: '%s' not in: %s", model, want1, log);
    if (want2)
        cr_assert(strstr(log, want2), "%s: '%s' not in: %s", model, want2, log);
    cr_assert_eq(tu_count_files(out), 0, "%s: output files left behind", model);
    free(log);
}

Test(bad_input, cycle) { expect_error("cycle.onnx", "-i x.npy", "cycle.onnx: ", "cycle through this node"); }
Test(bad_input, unknown_op) { expect_error("unknown_op.onnx", "", "node 'mystery'", "unknown op 'FooBar'"); }
Test(bad_input, unsupported_opset) { expect_error("old_opset.onnx", "", "old_opset.onnx: opset_import", "opset 5"); }
Test(bad_input, dangling_input) { expect_error("dangling.onnx", "", "node 'relu'", "'nowhere'"); }
Test(bad_input, short_weight) { expect_error("short_weight.onnx", "", "initializer 'w'", "raw_data has 10 bytes"); }
Test(bad_input, absurd_shape) { expect_error("absurd_shape.onnx", "", "node 'expand'", "too large"); }

Test(bad_input, external_data_outside_folder)
{
    expect_error("ext/ext_escape.onnx", "", "initializer 'w'", "outside the model's folder");
}

Test(bad_input, missing_input) { expect_error("good.onnx", "", "good.onnx", "missing input 'x'"); }

Test(bad_input, wrong_input_shape)
{
    char args[600];
    snprintf(args, sizeof args, "-i %s/x_wrong_shape.npy", dir);
    expect_error("good.onnx", args, "x_wrong_shape.npy", "expected f32[2,3], got f32[3,2]");
}

Test(bad_input, wrong_input_dtype)
{
    char args[600];
    snprintf(args, sizeof args, "-i %s/x_f64.npy", dir);
    expect_error("good.onnx", args, "x_f64.npy", "got f64[2,3]");
}

Test(bad_input, fortran_npy)
{
    char args[600];
    snprintf(args, sizeof args, "-i %s/x_fortran.npy", dir);
    expect_error("good.onnx", args, "x_fortran.npy", "Fortran");
}

Test(bad_input, truncated_npy)
{
    char args[600];
    snprintf(args, sizeof args, "-i %s/x_truncated.npy", dir);
    expect_error("good.onnx", args, "x_truncated.npy", "truncated");
}

Test(bad_input, unknown_input_name)
{
    char args[600];
    snprintf(args, sizeof args, "-i nope=%s/x.npy", dir);
    expect_error("good.onnx", args, "good.onnx", "no input named 'nope'");
}

/* Copies src to dst keeping the first `keep` bytes, with byte `flip` (if >= 0) xor'ed. */
static void mutate(const char *src, const char *dst, long keep, long flip, unsigned char mask)
{
    FILE *f = fopen(src, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    if (flip >= 0 && flip < n)
        b[flip] ^= mask;
    FILE *o = fopen(dst, "wb");
    fwrite(b, 1, (size_t)(keep < n ? keep : n), o);
    fclose(o);
    free(b);
}

static long file_size(const char *p)
{
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static const char *bundled(void)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    return p;
}

Test(bad_input, truncated_models)
{
    char dst[600];
    snprintf(dst, sizeof dst, "%s/trunc.onnx", dir);
    long n = file_size(bundled());
    for (long keep = n / 2; keep > 0; keep = keep * 3 / 5) {
        mutate(bundled(), dst, keep, -1, 0);
        expect_error("trunc.onnx", "", "trunc.onnx: ", NULL);
    }
}

/* Random bit flips: either the model still loads (a flipped weight is still a
 * model) or it fails with a clean one-line error; never a crash, never output
 * left behind on failure. */
Test(bad_input, bit_flipped_models, .timeout = 300)
{
    char dst[600], cmd[2048], *log;
    snprintf(dst, sizeof dst, "%s/flip.onnx", dir);
    long n = file_size(bundled());
    unsigned seed = 12345;
    int failed = 0;
    for (int k = 0; k < 60; k++) {
        seed = seed * 1103515245u + 12345u;
        /* Half the flips hit the first 2 KB, where the graph structure lives. */
        long at = (long)((seed >> 8) % (unsigned long)(k % 2 ? n : (n < 2048 ? n : 2048)));
        mutate(bundled(), dst, n, at, (unsigned char)(1u << (seed % 8)));
        snprintf(cmd, sizeof cmd, "(%s dump %s > /dev/null)", tu_qrl(), dst); /* stderr still reaches the log */
        int rc = tu_run(cmd, &log);
        cr_assert(rc == 0 || rc == 1, "flip at %ld: exit %d: %s", at, rc, log);
        if (rc == 1) {
            failed++;
            cr_assert(strncmp(log, "qrl: error: ", 12) == 0 && strstr(log, "flip.onnx"), "flip at %ld: %s", at, log);
        }
        free(log);
    }
    cr_log_info("%d of 60 bit-flipped models were refused", failed);
}

/* ---- QRL-G: hostile models and output paths ---- */

Test(bad_input, absent_required_input)
{
    expect_error("blank_required.onnx", "", "node 'conv' (Conv)", "input 1 ('W') is required but left out");
}

Test(bad_input, declared_size_checked_before_allocating)
{
    /* 91 bytes declaring 8 GiB: refused on its data length; under a 1 GiB address-space
     * limit an allocation of the declared size would fail differently. */
    char cmd[2048], *log;
#if defined(__SANITIZE_ADDRESS__)
    const char *limit = ""; /* ASan reserves terabytes of address space: no ulimit -v */
#else
    const char *limit = "ulimit -v 1000000; ";
#endif
    snprintf(cmd, sizeof cmd, "%s%s run %s/huge_declared.onnx -o %s", limit, tu_qrl(), dir, out);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 1, "%s", log);
    cr_assert(strstr(log, "initializer 'w': has 0 values, expected 2147483648"), "%s", log);
    free(log);
}

Test(bad_input, opset_beyond_int_range)
{
    expect_error("opset_huge.onnx", "", "opset_huge.onnx: opset_import", "opset 4294967309 is not supported");
}

Test(bad_input, empty_string_attribute) { expect_error("empty_attr.onnx", "", "node 'pad' (Pad)", "mode ''"); }

Test(bad_input, int64_zero_point) { expect_error("qdq_int64.onnx", "", "qdq_int64.onnx", "i64"); }

Test(bad_input, external_data_fifo, .timeout = 20)
{
    expect_error("ext/ext_fifo.onnx", "", "initializer 'w'", "'fifo' is not a regular file");
}

Test(bad_input, memory_budget_names_the_tensor)
{
    char args[600];
    snprintf(args, sizeof args, "-i %s/x.npy --max-memory 64M", dir);
    expect_error("big_expand.onnx", args, "tensor 'y' (f32[16384,4096,2,3], 1610612736 bytes)",
                 "over the budget of 67108864 bytes (--max-memory)");
}

Test(bad_input, memory_budget_counts_kernel_scratch)
{
    char args[600];
    /* the im2col path (on AVX-512 CPUs sconv takes this Conv with a 69 MB channels-last image,
     * under the budget, through the same qr_kwork accounting) */
    snprintf(args, sizeof args, "-i %s/x.npy --max-memory 200M --option sgemm=portable", dir);
    expect_error("big_im2col.onnx", args, "node 'conv' (Conv): out of memory budget: its im2col buffer needs 606341376 bytes",
                 "over the budget of 209715200 bytes (--max-memory)");
}

Test(bad_input, empty_output_dir_is_an_error)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd %s && %s run good.onnx -i x.npy -o ''", dir, tu_qrl());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 2, "%s", log);
    cr_assert(strstr(log, "-o needs a directory"), "%s", log);
    free(log);
}

Test(bad_input, colliding_and_long_output_names)
{
    char cmd[2048], *log, od[600];
    snprintf(od, sizeof od, "%s/names", dir);
    snprintf(cmd, sizeof cmd, "%s run %s/odd_names.onnx -i %s/x.npy -o %s", tu_qrl(), dir, dir, od);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert_eq(tu_count_files(od), 3, "colliding names overwrote each other: %s", log);
    cr_assert(strstr(log, "a/b: f32[2,3] -> ") && strstr(log, "/a_b.npy"), "%s", log);
    cr_assert(strstr(log, "a_b: f32[2,3] -> ") && strstr(log, "/a_b-"), "%s", log);
    /* the 300-character name: shortened with a hash, reported */
    const char *p = strstr(log, "-> "), *last = NULL;
    while (p) {
        last = p;
        p = strstr(p + 1, "-> ");
    }
    cr_assert(last);
    const char *slash = strrchr(last, '/');
    cr_assert(slash && strlen(slash + 1) < 250 && strstr(slash, ".npy"), "%s", last);
    free(log);
}

/* One output listed 1000 times gets 1000 files, none overwriting another. */
Test(bad_input, an_output_listed_many_times_gets_distinct_files)
{
    char cmd[2048], *log, od[600];
    snprintf(od, sizeof od, "%s/many", dir);
    snprintf(cmd, sizeof cmd, "%s run %s/many_outputs.onnx -i %s/x.npy -o %s", tu_qrl(), dir, dir, od);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    cr_expect_eq(tu_count_files(od), 1000, "one file per listed output");
    free(log);
}

/* A failed quantize removes only what it created: an empty directory given as
 * --qparams stays, and the error names it. */
Test(bad_input, quantize_failure_keeps_existing_paths, .timeout = 300)
{
    char cmd[4096], *log, qdir[600], outp[600];
    snprintf(qdir, sizeof qdir, "%s/qdir", dir);
    snprintf(outp, sizeof outp, "%s/q.onnx", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", qdir);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s quantize %s/good.onnx --recipe %s/recipes/int8.qrl --calib %s/x.npy -o %s --qparams %s",
             tu_qrl(), dir, tu_root(), dir, outp, qdir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 1, "%s", log);
    cr_assert(strstr(log, qdir), "the error names no path: %s", log);
    cr_assert(tu_file_exists(qdir), "the existing directory was deleted");
    cr_assert(!tu_file_exists(outp), "the model written by the failed run is left behind");
    free(log);
    snprintf(cmd, sizeof cmd, "%s quantize %s/good.onnx --recipe %s/recipes/int8.qrl --calib %s/x.npy -o ''", tu_qrl(),
             dir, tu_root(), dir);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 2, "%s", log);
    free(log);
}

/* A FIFO with no writer, given where a file is read: opening it must not wait (it hung every
 * command), the file is refused as not regular, and nothing is written. */
Test(bad_input, a_fifo_as_any_input_is_refused_at_once)
{
    char f[1024], cmd[4096], *log;
    snprintf(f, sizeof f, "%s/fifo", dir);
    snprintf(cmd, sizeof cmd, "mkfifo '%s'", f);
    cr_assert_eq(system(cmd), 0);
    const char *m = "examples/fmnist/fmnist_cnn.onnx", *d = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    char args[6][2048], *want[6] = {"fifo: not a regular file", "fifo: error: cannot read: not a regular file",
                                    "not a regular file", "fifo", "fifo", "fifo: not a regular file"};
    snprintf(args[0], sizeof args[0], "dump %s", f);
    snprintf(args[1], sizeof args[1], "check %s", f);
    snprintf(args[2], sizeof args[2], "quantize %s --recipe %s --calib %s/calib_images.npy -o %s/x.onnx", m, f, d, out);
    snprintf(args[3], sizeof args[3], "quantize %s --recipe recipes/int8.qrl --calib %s -o %s/x.onnx", m, f, out);
    snprintf(args[4], sizeof args[4], "run %s -i %s -o %s/r", m, f, out);
    snprintf(args[5], sizeof args[5], "eval %s --data %s/test_images.npy --labels %s", m, d, f);
    for (int i = 0; i < 6; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && timeout 20 %s %s 2>&1", tu_root(), tu_qrl(), args[i]);
        int rc = tu_run(cmd, &log);
        cr_expect_eq(rc, 1, "%s: exit %d (124: it waited for a writer): %s", args[i], rc, log);
        cr_expect(strstr(log, want[i]), "%s: %s", args[i], log);
        free(log);
    }
    cr_expect_eq(tu_count_files(out), 0, "nothing written");
}

/* Output paths are checked before any work, and refused when they would replace a device, a
 * symbolic link or an input of the run, or when two outputs are one file; nothing is changed. */
Test(bad_input, quantize_outputs_that_cannot_be_written_are_refused_first)
{
    char cmd[4096], *log, keep[1024], link[1024];
    snprintf(keep, sizeof keep, "%s/keep.json", out);
    snprintf(link, sizeof link, "%s/link.onnx", out);
    snprintf(cmd, sizeof cmd, "echo keep > '%s' && ln -s keep.json '%s'", keep, link);
    cr_assert_eq(system(cmd), 0);
    const char *d = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    struct {
        const char *outs, *want;
    } cases[] = {
        {"-o /dev/null", "/dev/null: is not a regular file (a character device)"},
        {"-o OUT/link.onnx", "link.onnx: is a symbolic link"},
        {"-o OUT/keep.json --qparams OUT/keep.json", "keep.json: given for both -o and --qparams"},
        {"-o OUT/m.onnx --report recipes/int8.qrl", "recipes/int8.qrl: --report would overwrite an input of this run"},
        {"-o OUT/m.onnx --qparams OUT/q.json --report OUT/no/such/r.html", "cannot write in directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char outs[2048] = "";
        const char *at = strstr(cases[i].outs, "OUT");
        if (at) { /* OUT: the test's output folder, each time it appears */
            const char *p = cases[i].outs;
            size_t n = 0;
            for (; (at = strstr(p, "OUT")); p = at + 3)
                n += (size_t)snprintf(outs + n, sizeof outs - n, "%.*s%s", (int)(at - p), p, out);
            snprintf(outs + n, sizeof outs - n, "%s", p);
        } else
            snprintf(outs, sizeof outs, "%s", cases[i].outs);
        snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl "
                                  "--calib %s/calib_images.npy --calib-count 64 %s 2>&1", tu_root(), tu_qrl(), d, outs);
        int rc = tu_run(cmd, &log);
        cr_expect_eq(rc, 1, "%s: exit %d: %s", outs, rc, log);
        cr_expect(strstr(log, cases[i].want), "%s: %s", outs, log);
        cr_expect(!strstr(log, "calibration"), "refused before calibrating: %s", log);
        free(log);
    }
    char *k = tu_slurp(keep);
    cr_expect_str_eq(k, "keep\n");
    free(k);
    struct stat sn;
    cr_expect(lstat(link, &sn) == 0 && S_ISLNK(sn.st_mode), "the link is still a link");
    cr_expect(lstat("/dev/null", &sn) == 0 && S_ISCHR(sn.st_mode), "/dev/null is still a device");
    cr_expect_eq(tu_count_files(out), 2, "keep.json and the link only");
}

/* A calibrator (recipe code) whose zero point the activation type cannot hold stops the run with
 * its name and the range: 300 used to be 300 in the JSON and 44 in the export, and -(2^63-1)
 * overflowed in the simulation. */
/* Writes text to dir/name; path gets its path. */
static void write_in_dir(char *path, size_t n, const char *name, const char *text)
{
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(bad_input, a_calibrators_zero_point_outside_the_type_is_an_error)
{
    const char *zeros[] = {"300", "-9223372036854775807"};
    for (int i = 0; i < 2; i++) {
        char path[1024], cmd[4096], text[2048], *log;
        snprintf(text, sizeof text,
                 "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                 "calibrator bad_zero(zero: i64 = %s) {\n  state lo: f64 = inf\n  state hi: f64 = -inf\n"
                 "  observe(x: tensor<f32>) {\n    lo = min(lo, x.min())\n    hi = max(hi, x.max())\n  }\n"
                 "  merge(other) {\n    lo = min(lo, other.lo)\n    hi = max(hi, other.hi)\n  }\n"
                 "  solve(t: qtype) -> qparams {\n    return qparams(max(hi - lo, 1e-6) / 255.0, zero)\n  }\n}\n"
                 "recipe bad_zp {\n  activation = u8 asymmetric by bad_zero()\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n  bias = i32\n  accumulate = i32\n}\n",
                 zeros[i]);
        write_in_dir(path, sizeof path, "zp.qrl", text);
        snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe '%s' --calib "
                                  "%s/calib_images.npy --calib-count 64 -o '%s/zp.onnx' --qparams '%s/zp.json' 2>&1",
                 tu_root(), tu_qrl(), path, getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data", out, out);
        int rc = tu_run(cmd, &log);
        cr_expect_eq(rc, 1, "exit %d: %s", rc, log);
        char want[256];
        snprintf(want, sizeof want, "calibrator 'bad_zero' gave zero point %s, outside u8's range 0..255", zeros[i]);
        cr_expect(strstr(log, want), "%s", log);
        free(log);
    }
    cr_expect_eq(tu_count_files(out), 0, "nothing written");
}

/* A histogram calibrator whose bins the process cannot hold (16M bins, 128 MB each, per tensor, under
 * a 400 MB address-space limit) says so: out of memory for that many bins, not a bin-count error;
 * exit 1, nothing written. ASan reserves terabytes of address space, so there is no limit to run under. */
Test(bad_input, a_histogram_without_memory_says_so)
{
#if !defined(__SANITIZE_ADDRESS__)
    char path[1024], cmd[4096], *log;
    write_in_dir(path, sizeof path, "bins.qrl",
                 "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                 "recipe big_bins {\n  activation = u8 asymmetric by percentile(p = 99.9, bins = 16777216)\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    snprintf(cmd, sizeof cmd, "cd '%s' && ulimit -v 400000 && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe '%s' "
                              "--calib %s/calib_images.npy --calib-count 8 --threads 1 -o '%s/bins.onnx' 2>&1",
             tu_root(), tu_qrl(), path, getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data", out);
    int rc = tu_run(cmd, &log);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, log);
    cr_expect(strstr(log, "calibrator 'percentile': runtime error: out of memory for a 16777216-bin histogram"), "%s",
              log);
    free(log);
    cr_expect_eq(tu_count_files(out), 0, "nothing written");
#endif
}

/* Calibrator states count against --max-memory: 16M-bin histograms (128 MiB of bins each) for the
 * model's calibrated tensors (T of them), with one calibration worker, need a merged state per
 * tensor, the worker's own, and one batch's state and a merge's scratch: (2T + 2) x 16777216 x 8
 * bytes and a little.
 * Under a 400M budget that is an error before calibration, naming the calibrator, the tensors
 * and the bytes; exit 1, nothing written. Before, the states were allocated outside the budget. */
Test(bad_input, calibrator_states_count_against_max_memory)
{
    char path[1024], cmd[4096], *log;
    write_in_dir(path, sizeof path, "bins_budget.qrl",
                 "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                 "recipe big_bins {\n  activation = u8 asymmetric by percentile(p = 99.9, bins = 16777216)\n"
                 "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n}\n");
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe '%s' --calib "
                              "%s/calib_images.npy --calib-count 8 --threads 1 --max-memory 400M -o '%s/bins.onnx' 2>&1",
             tu_root(), tu_qrl(), path, getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data", out);
    int rc = tu_run(cmd, &log);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, log);
    const char *at = strstr(log, "calibrator 'percentile': the calibration states of ");
    cr_assert(at, "%s", log);
    int tensors = 0;
    unsigned long long need = 0;
    cr_assert_eq(sscanf(at, "calibrator 'percentile': the calibration states of %d tensors need %llu bytes", &tensors,
                        &need), 2, "%s", log);
    /* per tensor a merged state and the worker's own, plus one batch's state and a merge's scratch */
    const unsigned long long states = 2ull * (unsigned long long)tensors + 2, bins = states * 16777216 * 8;
    cr_expect(tensors >= 5 && need >= bins && need < bins + states * 4096,
              "need %llu bytes for %d tensors; %llu states of 16M 8-byte bins are %llu: %s", need, tensors, states, bins, log);
    cr_expect(strstr(log, "over the budget of 419430400 bytes (--max-memory)"), "%s", log);
    cr_expect(!strstr(log, "calibrate "), "stopped before calibrating: %s", log);
    free(log);
    cr_expect_eq(tu_count_files(out), 0, "nothing written");
}

/* Names from a model that hold escape sequences, a newline, a carriage return and bytes that are
 * not UTF-8 (tools/make_bad_models.py, hostile_names.onnx): `qrl dump` and error messages print
 * them escaped (no control byte reaches the terminal, one line per entry), and the qparams and
 * report JSON stay valid JSON (Python's json module reads them). */
Test(bad_input, hostile_names_are_escaped_in_dump_errors_and_json)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "%s dump %s/hostile_names.onnx 2>&1", tu_qrl(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "node   conv\\x1b]0;title\\x07: Conv(x\\x1b[2J, w) -> y\\xff\\xfe\\xc0\\xaf: f32[?,4,8,8]"), "%s",
              log);
    cr_expect(strstr(log, "output out\\x0aname: f32[?,4,8,8]\n"), "%s", log);
    int lines = 0;
    for (const char *p = log; *p; p++) {
        lines += *p == '\n';
        cr_expect(*p == '\n' || (unsigned char)*p >= 0x20, "a control byte 0x%02x in the dump", (unsigned char)*p);
    }
    cr_expect_eq(lines, 6, "graph, input, const, two nodes, output: %s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize hostile_names.onnx --recipe '%s/recipes/int8.qrl' --calib x_names.npy "
             "-o out/n.onnx --qparams out/n.json --report out/r.json > /dev/null 2>&1 && /usr/bin/python3 -c \"import json; "
             "a = json.load(open('out/n.json')); json.load(open('out/r.json')); print(sorted(t['value'] for t in "
             "a['activations']))\"", dir, tu_qrl(), tu_root());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "['out\\nname', 'x\\x1b[2J']"), "the names, read back: %s", log);
    free(log);
    /* an error that quotes the model's names */
    snprintf(cmd, sizeof cmd, "%s run %s/hostile_names.onnx -i %s/x_wrong_shape.npy -o %s/o2 2>&1", tu_qrl(), dir, dir,
             dir);
    cr_expect_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "input 'x\\x1b[2J': expected f32[?,1,8,8], got f32[3,2]"), "%s", log);
    for (const char *p = log; *p; p++)
        cr_expect(*p == '\n' || (unsigned char)*p >= 0x20, "a control byte 0x%02x in: %s", (unsigned char)*p, log);
    free(log);
}

/* How many distinct libgccjit-* folders appear anywhere under dir (two levels), added to seen. */
static void note_jit_folders(const char *root, char seen[][64], int *nseen, int depth)
{
    DIR *d = opendir(root);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (!strncmp(e->d_name, "libgccjit-", 10)) {
            int known = 0;
            for (int i = 0; i < *nseen; i++)
                known |= !strcmp(seen[i], e->d_name);
            if (!known && *nseen < 16)
                snprintf(seen[(*nseen)++], 64, "%s", e->d_name);
        } else if (depth > 0) {
            char sub[2048];
            snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
            note_jit_folders(sub, seen, nseen, depth - 1);
        }
    }
    if (d)
        closedir(d);
}

/* SIGINT or SIGTERM while the recipe compiles in the foreground (quantize --no-cache: in memory,
 * libgccjit's scratch folder in TMPDIR): the process dies of the signal, and neither libgccjit's
 * folder (libgccjit-XXXXXX) nor qrl's is left in TMPDIR, nor an output. The signal goes when the
 * first, then the second libgccjit folder of the process appears (a compilation has begun). The
 * same on an empty module cache, where the compilation runs in a child process (compiler/jitrun.h):
 * the handlers end it before they remove the folder. */
Test(bad_input, a_signal_while_the_recipe_compiles_leaves_no_scratch, .timeout = 300)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s/sigtmp", dir);
    cr_assert_eq(mkdir(tmp, 0700), 0);
    const int sigs[] = {SIGINT, SIGTERM};
    char cache[1200];
    snprintf(cache, sizeof cache, "%s/sigcache", dir);
    for (int m = 0; m < 2; m++)
    for (int s = 0; s < 2; s++)
        for (int k = 1; k <= 2; k++) {
            char cmd[4096];
            snprintf(cmd, sizeof cmd, "cd '%s' && exec %s quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl "
                                      "--calib %s/calib_images.npy --calib-count 8%s -o '%s/sig.onnx'",
                     tu_root(), tu_qrl(), getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data",
                     m ? "" : " --no-cache", out);
            free(tu_sh("rm -rf '%s'", cache));
            pid_t pid = fork();
            cr_assert_neq(pid, -1);
            if (pid == 0) {
                setenv("TMPDIR", tmp, 1);
                setenv("XDG_CACHE_HOME", cache, 1);
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
            }
            char seen[16][64];
            int nseen = 0, st = 0, sent = 0;
            for (int i = 0; i < 120000 && !sent; i++) { /* up to two minutes */
                note_jit_folders(tmp, seen, &nseen, 2);
                if (nseen >= k) {
                    kill(pid, sigs[s]);
                    sent = 1;
                } else if (waitpid(pid, &st, WNOHANG) == pid)
                    break;
                else
                    usleep(1000);
            }
            cr_assert(sent, "no libgccjit folder #%d appeared in %s (status %#x)", k, tmp, st);
            cr_assert_eq(waitpid(pid, &st, 0), pid);
            cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == sigs[s], "%s: signal %d at folder #%d: died of it (status %#x)",
                      m ? "cached" : "--no-cache", sigs[s], k, st);
            usleep(200 * 1000); /* a child left running would write on meanwhile */
            char *left = tu_sh("ls -R '%s'", tmp);
            cr_expect_eq(tu_count_files(tmp), 0, "%s: signal %d at folder #%d: left in TMPDIR: %s",
                         m ? "cached" : "--no-cache", sigs[s], k, left);
            free(left);
            free(tu_sh("rm -rf '%s'/*", tmp));
            cr_expect_eq(tu_count_files(out), 0, "signal %d at folder #%d: an output was written", sigs[s], k);
        }
}
