/* The qrl command end to end: help, version, dump, run on the bundled model
 * and on conformance models (outputs compared with the expected ones). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "tensor_io.h"
#include "testutil.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

static char *dir;
static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }
TestSuite(cli, .init = setup, .fini = teardown, .timeout = 120);

Test(cli, help_and_version)
{
    char cmd[600], *log;
    snprintf(cmd, sizeof cmd, "%s --help", tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0);
    cr_assert(strstr(log, "qrl run") || strstr(log, "run  MODEL.onnx"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s --version", tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0);
    cr_assert(strncmp(log, "qrl ", 4) == 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s frobnicate", tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 2);
    cr_assert(strstr(log, "unknown command 'frobnicate'"), "%s", log);
    free(log);
}

/* Runs a conformance case through `qrl run` and compares every output file. */
static void run_case(const char *suite, const char *name, int nin, int nout)
{
    char cmd[4096], *log;
    int k = snprintf(cmd, sizeof cmd, "%s run %s/%s/%s/model.onnx", tu_qrl(), TESTDATA, suite, name);
    for (int i = 0; i < nin; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " -i %s/%s/%s/test_data_set_0/input_%d.pb", TESTDATA, suite,
                      name, i);
    snprintf(cmd + k, sizeof cmd - (size_t)k, " -o %s", dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s: %s", name, log);
    for (int o = 0; o < nout; o++) {
        /* The printed line names the output file: "<name>: <type> -> <dir>/<file>.npy". */
        char *line = log;
        for (int skip = 0; skip < o; skip++)
            line = strchr(line, '\n') + 1;
        char *arrow = strstr(line, "-> "), path[1024], want[1024];
        cr_assert(arrow, "%s", log);
        sscanf(arrow + 3, "%1023s", path);
        snprintf(want, sizeof want, "%s/%s/%s/test_data_set_0/output_%d.pb", TESTDATA, suite, name, o);
        qr_tensor got, exp;
        qr_error e;
        cr_assert_eq(qr_tensor_read_file(path, &got, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_tensor_read_file(want, &exp, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(got.dtype, exp.dtype);
        cr_assert(qr_tensor_same_shape(&got, &exp), "%s: shape differs", name);
        for (int64_t i = 0; i < qr_tensor_numel(&got); i++) {
            double a = qr_get_f64(got.data, got.dtype, i), b = qr_get_f64(exp.data, exp.dtype, i);
            cr_assert(fabs(a - b) <= 1e-5 + 1e-3 * fabs(b), "%s: element %lld: %g vs %g", name, (long long)i, a, b);
        }
        qr_tensor_free(&got);
        qr_tensor_free(&exp);
    }
    free(log);
}

static void make_torch_ref(const char *out, void *user)
{
    (void)user;
    char *log = tu_sh("/usr/bin/python3 %s/tools/torch_reference.py %s/examples/fmnist/fmnist_cnn.onnx %s 7 1", tu_root(),
                      tu_root(), out);
    free(log);
}

/* dir/ref: tools/torch_reference.py's 7 seeded images of the bundled model (x.npy) and PyTorch's
 * logits of them, made once for all the tests of the run (tu_shared; the script is seeded: the
 * same files each time) and copied. */
static void torch_ref(void)
{
    char *shared = tu_shared("torch_ref_7", make_torch_ref, NULL);
    char *log = tu_sh("cp -r '%s' '%s/ref'", shared, dir);
    free(log);
    free(shared);
}

Test(cli, run_conformance_models)
{
    run_case("node", "test_conv_with_strides_padding", 2, 1);
    run_case("node", "test_maxpool_2d_pads", 1, 1);
    run_case("node", "test_gemm_all_attributes", 3, 1);
    run_case("node", "test_split_equal_parts_1d", 1, 3);
    run_case("pytorch-converted", "test_Conv2d_depthwise_padded", 1, 1);
}

/* The bundled model against PyTorch running the same weights
 * (tools/torch_reference.py) on seeded random images. */
Test(cli, run_bundled_model_matches_torch)
{
    char cmd[2048], *log;
    torch_ref();
    for (int threads = 1; threads <= 2; threads++) {
        snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/out%d --threads %d --stats",
                 tu_qrl(), tu_root(), dir, dir, threads, threads);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "logits: f32[7,10]"), "%s", log);
        cr_assert(strstr(log, "memory: arena "), "--stats prints the memory plan: %s", log);
        free(log);
        char path[600];
        qr_tensor got, want;
        qr_error e;
        snprintf(path, sizeof path, "%s/out%d/logits.npy", dir, threads);
        cr_assert_eq(qr_npy_read(path, &got, &e), QR_OK, "%s", e.msg);
        snprintf(path, sizeof path, "%s/ref/logits.npy", dir);
        cr_assert_eq(qr_npy_read(path, &want, &e), QR_OK, "%s", e.msg);
        cr_assert(qr_tensor_same_shape(&got, &want));
        for (int64_t i = 0; i < qr_tensor_numel(&got); i++) {
            float a = ((float *)got.data)[i], b = ((float *)want.data)[i];
            cr_assert(fabsf(a - b) <= 1e-4f + 1e-4f * fabsf(b), "logit %lld: qrl %g, torch %g", (long long)i, a, b);
        }
        qr_tensor_free(&got);
        qr_tensor_free(&want);
    }
}

/* --profile: the MACs it counts are the CNN's, derived by hand from its layers (tools/train_fmnist.py):
 * conv 1->16 3x3 on 28x28 (112,896), conv 16->32 3x3 on 14x14 (903,168), conv 32->32 3x3 on 7x7
 * (451,584), fc 1568->64 (100,352), fc 64->10 (640): 1,568,640 per image, 10.98 M for 7; the same
 * in the recipe's integer graph, on ConvInteger and MatMulInteger. */
Test(cli, run_profile_counts_the_models_macs)
{
    char cmd[2048], *log;
    torch_ref();
    snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/p32 --profile", tu_qrl(),
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "ran 1 time, "), "%s", log);
    cr_assert(strstr(log, "11.0 MMAC per run"), "%s", log);
    /* the convolutions run channels-last where sconv runs them (runtime/pass_nhwc_f32.c) */
    char nhwc_row[64];
    snprintf(nhwc_row, sizeof nhwc_row, "\n  %-24s %5d ", "QrlConvF32Nhwc", 3);
    cr_assert(strstr(log, "\n  Conv                         3 ") || strstr(log, nhwc_row), "%s", log);
    cr_assert(strstr(log, "by node (all "), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/p8 --profile --recipe %s/recipes/int8.qrl "
             "--calib %s/ref/x.npy",
             tu_qrl(), tu_root(), dir, dir, tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "11.0 MMAC per run"), "%s", log);
    /* each convolution and each product fused with its requantization (the fused nodes count their MACs) */
    cr_assert(strstr(log, "\n  QrlConvKernel                3 "), "%s", log);
    cr_assert(strstr(log, "\n  QrlMatMulKernel              2 "), "%s", log);
    /* node names in full: the fused nodes' names differ at their ends, past 40 characters */
    cr_assert(strstr(log, "\n  conv_relu_qlinear_/features/features.6/Relu_output_0_quantized "), "%s", log);
    free(log);
}

/* 1 and 2 threads give the same bits: f32 (images split across threads) and the recipe's integer
 * graph (packed convolutions, MaxPool planes, the GEMM rows of the classifier). */
Test(cli, one_and_two_threads_give_the_same_bits)
{
    char cmd[2048], *log, path[600];
    torch_ref();
    const char *recipe[2] = {"", "--recipe %s/recipes/int8.qrl --calib %s/ref/x.npy"};
    for (int v = 0; v < 2; v++) {
        qr_tensor out[2];
        for (int t = 1; t <= 2; t++) {
            char extra[1024];
            snprintf(extra, sizeof extra, recipe[v], tu_root(), dir);
            snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/t%d_%d --threads %d %s",
                     tu_qrl(), tu_root(), dir, dir, v, t, t, extra);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            free(log);
            qr_error e;
            snprintf(path, sizeof path, "%s/t%d_%d/logits.npy", dir, v, t);
            cr_assert_eq(qr_npy_read(path, &out[t - 1], &e), QR_OK, "%s", e.msg);
        }
        cr_assert(qr_tensor_same_shape(&out[0], &out[1]));
        cr_assert(!memcmp(out[0].data, out[1].data, qr_tensor_nbytes(&out[0])), "%s: 1 and 2 threads differ",
                  v ? "int8" : "f32");
        qr_tensor_free(&out[0]);
        qr_tensor_free(&out[1]);
    }
}

/* qrl bench: the CPU it ran on, a row per variant, batch and thread count; the JSON it writes holds
 * the CNN's MACs per image as derived by hand above (1,568,640), in f32 and in the recipe's integer
 * graph; bad options and an unwritable --json fail with a message and leave no file. */
Test(cli, bench_times_both_graphs_and_writes_json)
{
    char cmd[2048], *log, path[600];
    torch_ref();
    snprintf(path, sizeof path, "%s/bench.json", dir);
    snprintf(cmd, sizeof cmd,
             "%s bench %s/examples/fmnist/fmnist_cnn.onnx --recipe %s/recipes/int8.qrl --calib %s/ref/x.npy --batch 1,3 "
             "--threads 1,2 --min-time 0 --json %s",
             tu_qrl(), tu_root(), tu_root(), dir, path);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "\nfp32          3       2 "), "%s", log);
    cr_assert(strstr(log, "\nint8          1       1 "), "%s", log);
    cr_assert(strstr(log, "cpu:   ") && strstr(log, " KB, L2 "), "the CPU is named: %s", log);
    free(log);
    unsigned char *json = NULL;
    size_t len = 0;
    qr_error e;
    cr_assert_eq(qr_read_file(path, 1 << 20, &json, &len, &e), QR_OK, "%s", e.msg);
    int rows = 0;
    for (const char *p = (const char *)json; (p = strstr(p, "\"macs_per_image\": 1568640,")); p++)
        rows++;
    cr_assert_eq(rows, 8, "%s", json); /* 2 variants x 2 batches x 2 thread counts */
    cr_assert(strstr((char *)json, "\"variant\": \"int8\", \"batch\": 3, \"threads\": 2"), "%s", json);
    cr_assert(strstr((char *)json, "{\"cpu\": \"") && strstr((char *)json, " KB, L2 "), "%s", json);
    free(json);
    snprintf(cmd, sizeof cmd, "%s bench %s/examples/fmnist/fmnist_cnn.onnx --batch 0", tu_qrl(), tu_root());
    cr_assert_eq(tu_run(cmd, &log), 2, "%s", log);
    cr_assert(strstr(log, "--batch needs sizes from 1 to 65536"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s bench %s/examples/fmnist/fmnist_cnn.onnx --min-time 0 --json %s/no/such/dir/b.json",
             tu_qrl(), tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 1, "%s", log);
    cr_assert(strstr(log, "no/such/dir/b.json"), "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/no", dir);
    cr_assert(!tu_file_exists(path));
}

/* qrl dump of the bundled CNN: the reviewed golden text, whose content tests/e2e/dump_oracle.py
 * derives from onnx (shape inference, the model's attributes and constants). */
Test(cli, dump_bundled_model_matches_golden)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "%s dump %s/examples/fmnist/fmnist_cnn.onnx", tu_qrl(), tu_root());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    char golden[600];
    snprintf(golden, sizeof golden, "%s/tests/golden/fmnist_cnn.dump", tu_root());
    FILE *f = fopen(golden, "rb");
    cr_assert(f, "missing %s", golden);
    static char want[1 << 16];
    size_t n = fread(want, 1, sizeof want - 1, f);
    want[n] = 0;
    fclose(f);
    cr_assert_str_eq(log, want, "dump differs from %s (regenerate with: build/qrl dump examples/fmnist/fmnist_cnn.onnx > %s)",
                     golden, golden);
    cr_assert(!strstr(log, ": BatchNormalization(") && !strstr(log, ": Dropout("), "BN and Dropout are folded away");
    free(log);
    /* what it says, against onnx's reading of the model (the golden holds the format) */
    snprintf(cmd, sizeof cmd,
             "%s dump %s/examples/fmnist/fmnist_cnn.onnx > %s/dump.txt && /usr/bin/python3 %s/tests/e2e/dump_oracle.py "
             "%s/examples/fmnist/fmnist_cnn.onnx %s/dump.txt 2>&1",
             tu_qrl(), tu_root(), dir, tu_root(), tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

Test(cli, run_external_data_model)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/make_bad_models.py %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s run %s/ext/ext_ok.onnx -i x=%s/x.npy -o %s", tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    char path[600];
    snprintf(path, sizeof path, "%s/y.npy", dir);
    qr_tensor t;
    qr_error e;
    cr_assert_eq(qr_npy_read(path, &t, &e), QR_OK, "%s", e.msg);
    /* y = (arange(6) - 3) + arange(6) */
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(((float *)t.data)[i], (float)(2 * i - 3), 0);
    qr_tensor_free(&t);
}

/* Every file of the stdlib, of recipes/ and of bench/ladder/ (the PTQ ladder's rungs) compiles cleanly
 * through the CLI. The timeout is a hang
 * guard, not a speed bound: under ASan beside other suites the cold compile took over 120 s (stop 48). */
Test(cli, check_compiles_stdlib_and_recipes, .timeout = 600)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && QRL_STDLIB=stdlib %s check --no-cache stdlib/*.qrl recipes/*.qrl examples/recipes/*.qrl bench/ladder/*.qrl",
             tu_root(), tu_qrl());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert_str_empty(log, "qrl check printed: %s", log);
    free(log);
}

/* A recipe with a NUL byte is refused at the first one's line and column (file:line:col, as every
 * diagnostic), also when it is imported (then at the import, naming the place). */
Test(cli, nul_byte_is_reported_at_its_line_and_column)
{
    char path[600], cmd[2048], *log;
    snprintf(path, sizeof path, "%s/nul.qrl", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    static const char text[] = "fn f() -> i64 {\n  return 1\n}\nfn g() -> i64 { ret\0urn 2 }\n";
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s check nul.qrl", dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 1, "%s", log);
    cr_assert(strstr(log, "nul.qrl:4:20: error: cannot read: not a text file (a NUL byte)"), "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/imp.qrl", dir);
    f = fopen(path, "w");
    cr_assert(f);
    fputs("import \"nul.qrl\"\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s check imp.qrl", dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 1, "%s", log);
    cr_assert(strstr(log, "imp.qrl:1:8: error: cannot read") && strstr(log, "a NUL byte) at line 4, column 20"), "%s",
              log);
    free(log);
}

/* --time on a recipe lists the module's parts: the code the recipe reaches, compiled and
 * cached, and its kernels, validated (not compiled) by a check, then remembered. */
Test(cli, check_time_lists_the_parts, .timeout = 60)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && XDG_CACHE_HOME='%s/cache' QRL_STDLIB=stdlib %s check --time recipes/int8.qrl",
             tu_root(), dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "(cache miss)"), "%s", log);
    cr_assert(strstr(log, "  code: ") && strstr(log, "the recipes reach, -O1, jit "), "%s", log);
    cr_assert(strstr(log, "  kernels: ") && strstr(log, "-O3, validated by libgccjit without code generation"), "%s",
              log);
    free(log);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "cache load") && strstr(log, "(hit)"), "%s", log);
    cr_assert(strstr(log, "validated before (its marker is cached), not compiled"), "%s", log);
    free(log);
}

/* The cache: a second check of the same file loads the module instead of compiling. */
Test(cli, check_time_reports_cache_miss_then_hit, .timeout = 60)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && XDG_CACHE_HOME='%s/cache' QRL_STDLIB=stdlib %s check --time stdlib/qparams.qrl",
             tu_root(), dir, tu_qrl());
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "(cache miss)"), "%s", log);
    free(log);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "(hit)"), "%s", log);
    free(log);
}

/* qrl quantize's long phases draw a progress bar with the time left on a terminal (here a pseudo
 * terminal, util-linux's script), none with --quiet, none when stderr is a file. */
Test(cli, quantize_progress_only_on_a_terminal)
{
    char cmd[4096], *log;
    const char *q = "quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl --calib";
    for (int c = 0; c < 3; c++) {
        if (c < 2)
            snprintf(cmd, sizeof cmd, "cd '%s' && script -qec \"%s %s '%s/calib_images.npy' --calib-count 256 "
                     "--threads 1 -o '%s/p.onnx'%s\" /dev/null", tu_root(), tu_qrl(), q, getenv("QRL_DATA") ?
                     getenv("QRL_DATA") : "build/data", dir, c ? " --quiet" : "");
        else
            snprintf(cmd, sizeof cmd, "cd '%s' && %s %s '%s/calib_images.npy' --calib-count 256 --threads 1 -o '%s/p.onnx'",
                     tu_root(), tu_qrl(), q, getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data", dir);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        int bar = strstr(log, "calibrate [") != NULL && strstr(log, "fallback  [") != NULL;
        /* the export's bar counts the model file's bytes, ending at its size */
        struct stat st;
        char path[700], whole[64];
        snprintf(path, sizeof path, "%s/p.onnx", dir);
        long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
        snprintf(whole, sizeof whole, "] %lld/%lld", size, size);
        if (c == 0)
            cr_expect(bar && strstr(log, " left") && strstr(log, "] 192/192") && /* int8.qrl: 64 of 256 held out */
                          strstr(log, "export    [") && strstr(log, whole),
                      "a terminal shows calibrate, fallback and export bars with the time left (export ending at "
                      "%s):\n%s", whole + 2, log);
        else
            cr_expect(!strstr(log, "["), "%s: no bar:\n%s", c == 1 ? "--quiet" : "stderr not a terminal", log);
        free(log);
    }
}

/* Writes the two recipes of recipe_name_picks_the_recipe, differing in their activation calibrator:
 * mm (minmax) and pct (the 90th percentile, which clips), both into path when which is NULL, else
 * only the named one (the oracle: a file whose first and only recipe it is). */
static void write_two_recipes(const char *path, const char *which)
{
    static const char *const body[2][2] = {
        {"mm", "minmax()"},
        {"pct", "percentile(p = 90.0)"},
    };
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs("import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n", f);
    for (int i = 0; i < 2; i++)
        if (!which || !strcmp(which, body[i][0]))
            fprintf(f,
                    "\nrecipe %s {\n  activation = u8 asymmetric by %s\n"
                    "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n  bias = i32\n"
                    "  accumulate = i32\n  numerics = onnx\n  rounding = half_even\n}\n",
                    body[i][0], body[i][1]);
    fclose(f);
}

/* The logits `qrl run --recipe` writes with the extra options, read into t. */
static void run_recipe_logits(const char *extra, const char *out, qr_tensor *t)
{
    char cmd[4096], path[700], *log;
    qr_error e;
    snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/%s --calib %s/ref/x.npy %s",
             tu_qrl(), tu_root(), dir, dir, out, dir, extra);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/%s/logits.npy", dir, out);
    cr_assert_eq(qr_npy_read(path, t, &e), QR_OK, "%s", e.msg);
}

static int same_bits(const qr_tensor *a, const qr_tensor *b)
{
    return qr_tensor_same_shape(a, b) && !memcmp(a->data, b->data, qr_tensor_nbytes(a));
}

/* --recipe-name picks a recipe of a file holding two (run, eval, bench as quantize does): each gives
 * the bits of a file holding that recipe alone, the two differ, none named is the first; an unknown
 * name fails naming it and the file's recipes, and writes nothing; --recipe-name without --recipe is
 * a usage error. */
Test(cli, recipe_name_picks_the_recipe)
{
    char cmd[4096], *log, two[600], one[2][600], extra[1400];
    torch_ref();
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import numpy as np; np.save('%s/y.npy', np.arange(7) %% 10)\"", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    const char *names[2] = {"mm", "pct"};
    snprintf(two, sizeof two, "%s/two.qrl", dir);
    write_two_recipes(two, NULL);
    qr_tensor picked[2], alone[2], first;
    for (int i = 0; i < 2; i++) {
        snprintf(one[i], sizeof one[i], "%s/%s.qrl", dir, names[i]);
        write_two_recipes(one[i], names[i]);
        snprintf(extra, sizeof extra, "--recipe %s --recipe-name %s", two, names[i]);
        run_recipe_logits(extra, names[i], &picked[i]);
        snprintf(extra, sizeof extra, "--recipe %s", one[i]);
        run_recipe_logits(extra, "alone", &alone[i]);
        cr_assert(same_bits(&picked[i], &alone[i]), "run --recipe-name %s is not the recipe %s", names[i], names[i]);
    }
    cr_assert(!same_bits(&picked[0], &picked[1]), "minmax and the 90th percentile gave the same logits");
    snprintf(extra, sizeof extra, "--recipe %s", two);
    run_recipe_logits(extra, "first", &first);
    cr_assert(same_bits(&first, &picked[0]), "without --recipe-name run is not the file's first recipe");
    for (int i = 0; i < 2; i++) {
        qr_tensor_free(&picked[i]);
        qr_tensor_free(&alone[i]);
    }
    qr_tensor_free(&first);
    /* eval: the int8 column's output SQNR is that of the recipe alone, and differs between the two */
    char sqnr[2][2][100];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            if (k)
                snprintf(extra, sizeof extra, "--recipe %s", one[i]);
            else
                snprintf(extra, sizeof extra, "--recipe %s --recipe-name %s", two, names[i]);
            snprintf(cmd, sizeof cmd,
                     "%s eval %s/examples/fmnist/fmnist_cnn.onnx --data %s/ref/x.npy --labels %s/y.npy --calib %s/ref/x.npy %s",
                     tu_qrl(), tu_root(), dir, dir, dir, extra);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            const char *s = strstr(log, "output:   SQNR ");
            cr_assert(s, "%s", log);
            snprintf(sqnr[i][k], sizeof sqnr[i][k], "%.*s", (int)strcspn(s, "\n"), s);
            if (!k)
                cr_assert(strstr(log, "recipe:   ") && strstr(log, ", recipe ") && strstr(log, names[i]), "%s", log);
            free(log);
        }
    cr_assert_str_eq(sqnr[0][0], sqnr[0][1]);
    cr_assert_str_eq(sqnr[1][0], sqnr[1][1]);
    cr_assert_str_neq(sqnr[0][0], sqnr[1][0]);
    /* an unknown name: one line naming it and the recipes there are, no output */
    const char *cmds[3] = {"run %s/examples/fmnist/fmnist_cnn.onnx -i %s/ref/x.npy -o %s/bad",
                           "eval %s/examples/fmnist/fmnist_cnn.onnx --data %s/ref/x.npy --labels %s/y.npy",
                           "bench %s/examples/fmnist/fmnist_cnn.onnx --min-time 0 --json %s/bad.json%.0s"};
    for (int c = 0; c < 3; c++) {
        char head[1400];
        snprintf(head, sizeof head, cmds[c], tu_root(), dir, dir);
        snprintf(cmd, sizeof cmd, "%s %s --recipe %s --recipe-name nope --calib %s/ref/x.npy", tu_qrl(), head, two, dir);
        cr_assert_eq(tu_run(cmd, &log), 1, "%s", log);
        cr_assert(strstr(log, "qrl: error: ") && strstr(log, "no recipe named 'nope' (the file has mm, pct)\n"), "%s",
                  log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s %s --recipe-name mm", tu_qrl(), head);
        cr_assert_eq(tu_run(cmd, &log), 2, "%s", log);
        cr_assert(strstr(log, "--recipe-name needs --recipe"), "%s", log);
        free(log);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/bad", dir);
    cr_assert(!tu_file_exists(path));
    snprintf(path, sizeof path, "%s/bad.json", dir);
    cr_assert(!tu_file_exists(path));
}

/* dir/x.npy: the first n test images of the bundled data; returns the data folder. */
static const char *first_images(int n)
{
    char cmd[1024], *log;
    const char *d = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; np.save('%s/x.npy', np.load('%s/test_images.npy')[:%d])\"", dir, d, n);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    return d;
}

/* The bundled CNN quantized by recipes/<recipe>.qrl on 64 calibration images (of data folder d)
 * into path. */
static void quantize_bundled_to(const char *recipe, const char *d, const char *path)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "%s quantize %s/examples/fmnist/fmnist_cnn.onnx --recipe %s/recipes/%s.qrl --calib %s/calib_images.npy "
             "--calib-count 64 -o %s --quiet",
             tu_qrl(), tu_root(), tu_root(), recipe, d, path);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* quantize_bundled_to into dir/out. */
static void quantize_bundled(const char *recipe, const char *d, const char *out)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, out);
    quantize_bundled_to(recipe, d, path);
}

static void make_bundled_int8(const char *out, void *d)
{
    quantize_bundled_to("int8", d, out);
}

/* quantize_bundled("int8", d, out), quantized once for all the tests of the run (tu_shared) and
 * copied to dir/out: the same command with the same inputs gives the same export (qrl quantize is
 * deterministic: test_provenance cmp's two runs). */
static void bundled_int8(const char *d, const char *out)
{
    char *shared = tu_shared("fmnist_cnn.int8.onnx", make_bundled_int8, (void *)d);
    char *log = tu_sh("cp '%s' '%s/%s'", shared, dir, out);
    free(log);
    free(shared);
}

/* qrl run --batch: 203 images of the bundled CNN (the last slice short) run 64 and 50 at a time
 * give the bits of one run (the default, --batch 0), in f32 and in the recipe's integer graph, and
 * --stats counts the slices; a dynamic recipe's graph and its export (their ranges span the batch:
 * sliced, their bits differ) run whole. numpy compares the files. */
Test(cli, run_batches_give_the_bits_of_one_run, .timeout = 240)
{
    char cmd[4096], *log;
    const char *d = first_images(203);
    const char *recipe[3] = {"", "--recipe %s/recipes/int8.qrl --calib %s/calib_images.npy --calib-count 64",
                             "--recipe %s/recipes/int8-dynamic-tensor.qrl --calib %s/calib_images.npy --calib-count 64"};
    const char *batch[3] = {"", "--batch 64", "--batch 50"}, *slices[3] = {NULL, "4 runs of up to 64 samples",
                                                                         "5 runs of up to 50 samples"};
    for (int v = 0; v < 3; v++) {
        char extra[1024];
        snprintf(extra, sizeof extra, recipe[v], tu_root(), d);
        for (int b = 0; b < 3; b++) {
            snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/x.npy -o %s/b%d_%d --stats %s %s",
                     tu_qrl(), tu_root(), dir, dir, v, b, batch[b], extra);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            cr_assert(strstr(log, "logits: f32[203,10]"), "%s", log);
            if (slices[b] && v < 2)
                cr_assert(strstr(log, slices[b]), "%s: %s", batch[b], log);
            else
                cr_assert(!strstr(log, " runs of "), "%s: %s", batch[b], log);
            free(log);
        }
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import numpy as np; a = [np.load('%s/b%d_%%d/logits.npy' %% b) for b in range(3)]; "
                 "assert a[0].shape == (203, 10) and a[0].dtype == np.float32; "
                 "assert all(x.tobytes() == a[0].tobytes() for x in a[1:]), 'slices differ from one run'\"",
                 dir, v);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", recipe[v][0] ? recipe[v] : "f32", log);
        free(log);
    }
    /* the dynamic recipe's export runs as its ONNX ops, DynamicQuantizeLinear among them: whole too */
    quantize_bundled("int8-dynamic-tensor", d, "dyn.onnx");
    for (int b = 0; b < 2; b++) {
        snprintf(cmd, sizeof cmd, "%s run %s/dyn.onnx -i %s/x.npy -o %s/dyn%d --stats %s", tu_qrl(), dir, dir, dir, b,
                 batch[b]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(!strstr(log, " runs of "), "%s", log);
        free(log);
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; a, b = [np.load('%s/dyn%%d/logits.npy' %% i) for i in range(2)]; "
             "assert a.shape == (203, 10) and a.tobytes() == b.tobytes()\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/x.npy --batch -1", tu_qrl(), tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 2, "%s", log);
    cr_assert(strstr(log, "--batch needs a number of samples (0: all at once)"), "%s", log);
    free(log);
}

/* Inputs of different lengths run whole, and so do inputs whose outputs do not follow the slices (a
 * sum over the first axis): a model with x[N,4] -> Relu and z[M,4] -> ReduceSum over axis 0, run
 * at --batch 2 on 5 and 3, then 5 and 5 samples, against numpy. */
Test(cli, run_batches_only_what_follows_the_slices)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np, onnx; from onnx import helper as h, TensorProto as T; "
             "g = h.make_graph([h.make_node('Relu', ['x'], ['r']), h.make_node('ReduceSum', ['z', 'ax'], ['s'], keepdims=1)], 'g', "
             "[h.make_tensor_value_info('x', T.FLOAT, ['N', 4]), h.make_tensor_value_info('z', T.FLOAT, ['M', 4])], "
             "[h.make_tensor_value_info('r', T.FLOAT, ['N', 4]), h.make_tensor_value_info('s', T.FLOAT, [1, 4])], "
             "[h.make_tensor('ax', T.INT64, [1], [0])]); "
             "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), 'mix.onnx'); "
             "r = np.random.default_rng(5); [np.save(f, r.standard_normal((n, 4)).astype(np.float32)) "
             "for f, n in (('x5.npy', 5), ('z3.npy', 3), ('z5.npy', 5))]\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (int c = 0; c < 2; c++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && %s run mix.onnx -i x=x5.npy -i z=z%d.npy -o out%d --batch 2 --stats", dir,
                 tu_qrl(), c ? 5 : 3, c);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "r: f32[5,4]") && strstr(log, "s: f32[1,4]") && !strstr(log, " runs of "), "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && /usr/bin/python3 -c \"import numpy as np; x, z = np.load('x5.npy'), np.load('z%d.npy'); "
                 "assert np.array_equal(np.load('out%d/r.npy'), np.maximum(x, 0)); "
                 "assert np.allclose(np.load('out%d/s.npy'), z.sum(0, keepdims=True), rtol=1e-6, atol=1e-6)\"",
                 dir, c ? 5 : 3, c, c);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
    }
}

/* qrl quantize compiles no shape kernel by default (iconv-jit=cached: its search's tries ask for
 * kernels of graphs that never ship, and the compiler's memory added to its peak): an empty module
 * cache holds the recipe's module afterwards and no iconv-/rowsep- entry; --option iconv-jit=auto
 * gives the background compilation back (at least one kernel, at exit, on a VNNI CPU), the export the
 * same bytes. The second run starts from a copy of the first's cache (the recipe's module, no shape
 * kernel): it compiles no recipe again (the first run showed the module is written), only kernels. With amx=0: shape kernels are the VNNI path's
 * (on an AMX CPU the AMX kernel runs and none is asked for). */
Test(cli, quantize_compiles_no_shape_kernel_by_default, .timeout = 300)
{
    char cmd[4096], *log;
    const char *d = first_images(64);
    int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    for (int auto_ = 0; auto_ < 2; auto_++) {
        if (auto_)
            free(tu_sh("cp -r '%s/qc0' '%s/qc1'", dir, dir));
        snprintf(cmd, sizeof cmd,
                 "XDG_CACHE_HOME='%s/qc%d' %s quantize %s/examples/fmnist/fmnist_cnn.onnx --recipe %s/recipes/int8.qrl "
                 "--calib %s/calib_images.npy --calib-count 64 -o %s/qc%d.onnx --quiet --option amx=0 %s",
                 dir, auto_, tu_qrl(), tu_root(), tu_root(), d, dir, auto_, auto_ ? "--option iconv-jit=auto" : "");
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        snprintf(cmd, sizeof cmd, "ls '%s/qc%d/qrl' | grep -c -E '^(iconv|rowsep)-'; ls '%s/qc%d/qrl' | wc -l", dir,
                 auto_, dir, auto_);
        tu_run(cmd, &log);
        int kernels = -1, entries = -1;
        cr_assert_eq(sscanf(log, "%d %d", &kernels, &entries), 2, "%s", log);
        free(log);
        cr_assert(entries > kernels, "iconv-jit=%s: the recipe's module is cached (%d entries)", auto_ ? "auto" : "default",
                  entries);
        if (auto_)
            cr_assert_eq(kernels > 0, vnni, "iconv-jit=auto: %d shape kernels compiled", kernels);
        else
            cr_assert_eq(kernels, 0, "quantize's default: %d shape kernels compiled", kernels);
    }
    snprintf(cmd, sizeof cmd, "cmp %s/qc0.onnx %s/qc1.onnx", dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* By default (iconv-jit=auto) a first run with an empty module cache runs the generic kernels while
 * a background thread compiles the layers' shapes: the same bytes as iconv-jit=0, and after exit
 * the cache holds kernels and no temporary file (*.tmp.*, nor a compilation's folder in TMPDIR).
 * Later runs load them (--profile counts them) and give the same bytes, until none is missing. The
 * compiling runs with amx=0 (AMX, where the CPU has it, asks for no shape kernel: iconv-jit=0's bytes
 * are then AMX's, which the VNNI kernels' must equal). */
Test(cli, shape_kernels_compile_in_the_background, .timeout = 300)
{
    char cmd[4096], *log;
    const char *d = first_images(16);
    bundled_int8(d, "q.onnx");
    snprintf(cmd, sizeof cmd, "mkdir '%s/tmp' && %s run %s/q.onnx -i %s/x.npy -o %s/off --option iconv-jit=0", dir,
             tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"), loaded = 0;
    for (int i = 0; i < 8; i++) {
        snprintf(cmd, sizeof cmd, "TMPDIR='%s/tmp' XDG_CACHE_HOME='%s/bg' %s run %s/q.onnx -i %s/x.npy -o %s/bg%d --profile --option amx=0",
                 dir, dir, tu_qrl(), dir, dir, dir, i);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        const char *line = strstr(log, "shape kernels (iconv-jit): ");
        cr_assert_eq(line != NULL, vnni, "%s", log);
        long ld = 0, compiled = -1, bg = -1, pending = -1;
        if (line)
            cr_assert_eq(sscanf(line, "shape kernels (iconv-jit): %ld loaded from the module cache, %ld compiled (%ld in "
                                      "the background), %ld still compiling", &ld, &compiled, &bg, &pending), 4, "%s", line);
        free(log);
        cr_assert_eq(compiled, vnni ? 0 : -1, "no run waits for a compilation");
        cr_assert(i == 0 ? ld == 0 : ld >= loaded, "run %d: %ld loaded, %d before", i, ld, loaded);
        loaded = (int)ld;
        snprintf(cmd, sizeof cmd, "cmp %s/off/logits.npy %s/bg%d/logits.npy", dir, dir, i);
        cr_assert_eq(tu_run(cmd, &log), 0, "run %d: not the bytes of iconv-jit=0: %s", i, log);
        free(log);
        snprintf(cmd, sizeof cmd, "ls -a '%s/bg/qrl' | grep -c -e tmp; ls -A '%s/tmp' | wc -l", dir, dir);
        tu_run(cmd, &log);
        cr_assert_str_eq(log, "0\n0\n", "run %d left temporary files", i);
        free(log);
        snprintf(cmd, sizeof cmd, "ls '%s/bg/qrl' | grep -c -E '^(iconv|rowsep)-'", dir);
        tu_run(cmd, &log);
        cr_assert_eq(atoi(log) > 0, vnni, "run %d: %s shape kernels in the cache", i, log);
        free(log);
        if (pending == 0)
            break;
    }
    cr_assert(!vnni || loaded > 0, "a later run loaded the cached kernels");
    /* qrl bench waits for them after its warm-up run: its timed runs are the steady state's */
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME='%s/bench' %s bench %s/q.onnx --batch 1 --threads 1 --min-time 0.01 --profile --option amx=0",
             dir, tu_qrl(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    if (vnni)
        cr_assert(strstr(log, "0 loaded from the module cache, 0 compiled (0 in the background), 0 still compiling") == NULL &&
                      strstr(log, " 0 still compiling"), "%s", log);
    free(log);
}

/* The run-time switches change no integer result: the bundled CNN quantized by the int8 recipe
 * (once: calibration runs f32 kernels, whose portable forms may round otherwise), run on 64 images,
 * gives the bits of iconv-jit=0 (the generic kernels) with --kernels portable and avx2 (its operands
 * widened once, and in the tiles: wide16=0), --iconv-jit, the default, and the tests' switches
 * through --option (fuse=0, nhwc=0 or all, split, epilogue) (numpy compares the files). --option
 * takes effect (nhwc=0: the profile shows the NCHW MaxPool, not the channels-last one), the last
 * one given wins, and the environment's QRL_* variables set nothing. A name or value an option
 * does not take is a usage error (exit 2) that names the names or values, before any output. */
Test(cli, run_switches_give_the_same_bits, .timeout = 300)
{
    char cmd[4096], *log;
    const char *d = first_images(64);
    bundled_int8(d, "q.onnx");
    const char *how[] = {"--option iconv-jit=0",
                         "--kernels portable",
                         "--kernels avx2",
                         "--iconv-jit --option amx=0",
                         "--kernels auto --iconv-jit",
                         "--option amx=0",
                         "--option fuse=0 --option nhwc=0",
                         "--option nhwc=all --option split=cols --option epilogue=turn",
                         "--option iconv-jit=1 --option epilogue=rows",
                         "--kernels avx2 --option wide16=0",
                         ""};
    int n = (int)(sizeof how / sizeof how[0]);
    for (int i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME='%s/cache' %s run %s/q.onnx -i %s/x.npy -o %s/s%d %s", dir, tu_qrl(),
                 dir, dir, dir, i, how[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", how[i], log);
        free(log);
        /* the kernels compiled per layer go to the module cache: none with iconv-jit=0 or kernels of
         * another ISA, some after --iconv-jit (on a CPU with AVX-512 VNNI) */
        if (i == 2 || i == 3) {
            snprintf(cmd, sizeof cmd, "ls '%s/cache/qrl' 2>/dev/null | grep -c '^iconv-'", dir);
            tu_run(cmd, &log);
            int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
            cr_assert_eq(atoi(log) > 0, i == 3 && vnni, "%s: %s kernels compiled per layer", how[i], log);
            free(log);
        }
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; a = [np.load('%s/s%%d/logits.npy' %% i) for i in range(%d)]; "
             "assert a[0].shape == (64, 10) and a[0].dtype == np.float32; "
             "bad = [i for i in range(1, %d) if a[i].tobytes() != a[0].tobytes()]; assert not bad, bad\"",
             dir, n, n);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* which MaxPool runs: the layout the options chose (the variable is not read) */
    static const struct {
        const char *how;
        int nhwc;
    } layout[] = {{"", 1}, {"--option nhwc=0", 0}, {"--option nhwc=0 --option nhwc=auto", 1}, {"env nhwc=0", 1}};
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) {
        int env = !strncmp(layout[i].how, "env ", 4);
        snprintf(cmd, sizeof cmd, "%s %s run %s/q.onnx -i %s/x.npy -o %s/layout --profile %s", env ? layout[i].how : "",
                 tu_qrl(), dir, dir, dir, env ? "" : layout[i].how);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", layout[i].how, log);
        cr_assert_eq(strstr(log, "QrlMaxPoolNhwc ") != NULL, layout[i].nhwc, "%s: %s", layout[i].how, log);
        cr_assert_eq(strstr(log, "\n  MaxPool ") != NULL, !layout[i].nhwc, "%s: %s", layout[i].how, log);
        free(log);
    }
    static const char *const wrong[][2] = {
        {"--kernels avx512", "qrl: --kernels: option kernels takes auto, portable, avx2, avxvnni, avx512vnni, not 'avx512'"},
        {"--kernels", "qrl: --kernels: needs auto, portable, avx2, avxvnni or avx512vnni"},
        {"--option nhwc=yes", "qrl: --option: option nhwc takes auto, 0, all, not 'yes'"},
        {"--option fusion=0", "qrl: --option: no option named 'fusion' (the options: kernels, iconv-jit, igemm, sgemm, "
                              "quant, window, f32-rows, fuse, nhwc, epilogue, split, poison, effects, bands, parts, gather, winograd, amx, "
                              "wide16, f32-split, held-ghost, halves, arena-pages)"},
        {"--option nhwc", "qrl: --option: needs NAME=VALUE, not 'nhwc'"},
        {"--option", "qrl: --option: needs NAME=VALUE, not ''"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run %s/examples/fmnist/fmnist_cnn.onnx -i %s/x.npy -o %s/wrong %s", tu_qrl(),
                 tu_root(), dir, dir, wrong[i][0]);
        cr_assert_eq(tu_run(cmd, &log), 2, "%s: %s", wrong[i][0], log);
        cr_assert(strstr(log, wrong[i][1]), "%s: %s", wrong[i][0], log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s/wrong", dir);
        cr_assert(!tu_file_exists(cmd), "%s: wrote outputs", wrong[i][0]);
    }
}
