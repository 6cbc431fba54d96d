/* Calibration data and models at scale (QRL-K 3, docs/distributed.md): a folder of .npy shards is
 * one sample stream, a memory-mapped .npy may be larger than the memory the process may allocate,
 * bad shards are named, --max-memory sets quantize's batch, models with ONNX external data are
 * read and written. Fixtures: tools/make_scale_data.py. The oracles: the export of the same
 * samples given as one file (whose exports test_quantize.c checks against ONNX Runtime), under
 * mpirun the one-rank run, ONNX Runtime on external-data models, onnx reading the exports. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static const char *data_dir(void)
{
    const char *d = getenv("QRL_DATA");
    return d && *d ? d : "build/data";
}

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_scale_data.py' '%s' '%s' '%s/examples/fmnist/fmnist_cnn.onnx'",
             tu_root(), data_dir(), dir, tu_root());
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "fixture generation failed: %s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(data_scale, .init = setup, .fini = teardown, .timeout = 300);

/* qrl quantize of model (NULL: the Fashion-MNIST model) with calibration data calib (relative to
 * dir) into dir/tag.onnx and dir/tag.json, after prefix (mpirun, ulimit); the exit status, the log. */
static int quantize_model(const char *prefix, const char *model, const char *calib, const char *extra, const char *tag,
                          char **log)
{
    char cmd[4096], fm[1024];
    snprintf(fm, sizeof fm, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    snprintf(cmd, sizeof cmd, "%s %s quantize '%s' --recipe '%s/recipes/int8.qrl' --calib '%s/%s' --quiet "
                              "--threads 1 %s -o '%s/%s.onnx' --qparams '%s/%s.json'",
             prefix, tu_qrl(), model ? model : fm, tu_root(), dir, calib, extra, dir, tag, dir, tag);
    return tu_run(cmd, log);
}

static int quantize(const char *prefix, const char *calib, const char *extra, const char *tag, char **log)
{
    return quantize_model(prefix, NULL, calib, extra, tag, log);
}

static void quantize_ok(const char *prefix, const char *calib, const char *extra, const char *tag)
{
    char *log;
    int rc = quantize(prefix, calib, extra, tag, &log);
    cr_assert_eq(rc, 0, "%s -> %s failed (%d):\n%s", calib, tag, rc, log);
    free(log);
}

/* Whether dir/a.ext and dir/b.ext hold the same bytes. */
static int same(const char *a, const char *b, const char *ext)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cmp -s '%s/%s.%s' '%s/%s.%s'", dir, a, ext, dir, b, ext);
    return tu_run(cmd, NULL) == 0;
}

/* The three shards (70, 1 and 129 samples) in name order are one.npy's 200 samples: the same
 * export and qparams, byte for byte. The folder's README.txt and hidden .p9.npy (samples 1000
 * times larger: they would move the ranges) are left out. */
Test(data_scale, shard_folder_is_one_file)
{
    quantize_ok("", "one.npy", "", "one");
    quantize_ok("", "shards", "", "shards");
    cr_expect(same("one", "shards", "onnx"), "the folder's export differs from the one file's");
    cr_expect(same("one", "shards", "json"), "the folder's qparams differ from the one file's");
}

/* A calibration file larger than the memory the process may allocate (ulimit -d 1 GB, a 1.5 GB
 * .npy) is mapped, not read: it calibrates on its first 200 samples (--calib-count) to one.npy's
 * bytes. Read whole (malloc), it would fail. Not under ASan, whose shadow memory ulimit -d refuses. */
Test(data_scale, mapped_file_larger_than_the_data_limit)
{
    if (strstr(tu_qrl_bin(), "asan"))
        cr_skip_test("ulimit -d and AddressSanitizer's shadow memory do not mix");
    quantize_ok("", "one.npy", "", "one");
    quantize_ok("ulimit -d 1048576 &&", "big.npy", "--calib-count 200", "big");
    cr_expect(same("one", "big", "onnx") && same("one", "big", "json"), "the mapped file's export differs");
}

/* Each bad folder: exit 1, one line naming the shard (or the folder) and the problem, no output. */
Test(data_scale, bad_shards_are_named)
{
    const char *cases[][3] = {
        {"bad_empty", "bad_empty: the folder holds no .npy files", ""},
        {"bad_dtype", "bad_dtype/b.npy: holds f64[4,1,28,28] but ", "bad_dtype/a.npy (the first shard) holds f32[5,1,28,28]"},
        {"bad_shape", "bad_shape/b.npy: holds f32[4,1,27,28] but ", "every shard needs the same dtype"},
        {"bad_trunc", "bad_trunc/b.npy: truncated: 12444 data bytes, expected 12544", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *log, out[1024];
        int rc = quantize("", cases[i][0], "", "bad", &log);
        cr_expect_eq(rc, 1, "%s: exit %d:\n%s", cases[i][0], rc, log);
        cr_expect(strstr(log, cases[i][1]) && strstr(log, cases[i][2]), "%s:\n%s", cases[i][0], log);
        cr_expect(!strchr(log, '\n') || !strchr(strchr(log, '\n') + 1, '\n'), "%s: more than one line:\n%s",
                  cases[i][0], log);
        snprintf(out, sizeof out, "%s/bad.onnx", dir);
        cr_expect(!tu_file_exists(out), "%s: an output was written", cases[i][0]);
        free(log);
    }
}

/* mpirun, as root, more ranks than cores; no leak check (test_dist.c says why). */
#define MPIRUN "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe"

/* Three ranks on the folder of shards give one rank's bytes (and one.npy's). */
Test(data_scale, shards_np3_matches_np1)
{
    if (tu_run("command -v mpirun", NULL) != 0)
        cr_skip_test("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)");
    quantize_ok(MPIRUN " -np 1", "shards", "", "np1");
    quantize_ok(MPIRUN " -np 3", "shards", "", "np3");
    quantize_ok("", "one.npy", "", "one");
    cr_expect(same("np1", "np3", "onnx") && same("np1", "np3", "json"), "-np 3 differs from -np 1 on the shards");
    cr_expect(same("one", "np3", "onnx") && same("one", "np3", "json"), "-np 3 on the shards differs from one.npy");
}

/* The number after `key` in text (-1 when missing). */
static long long number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? atoll(p + strlen(key)) : -1;
}

/* --max-memory bounds quantize's batch. A budget below batch 1 is an error giving one sample's
 * activation bytes A and the bytes held H (the model's constants: one.npy is mapped, not held);
 * from them, by the documented rule (H + 3 runs of a batch each, --threads 1), a budget of
 * H + 3 * 5 * A + 3 * A / 2 fits batch 5: without --batch it gives 4 (the automatic batch is a
 * power of two, stop 50), the bytes of --batch 4 without a budget, and refuses --batch 6 naming 5. A budget below H is an error of its own. Each error:
 * exit 1, one line, no output. */
Test(data_scale, max_memory_bounds_the_batch)
{
    char *log, extra[256];
    int rc = quantize("", "one.npy", "--max-memory 600K", "tiny", &log);
    cr_assert_eq(rc, 1, "--max-memory 600K: exit %d\n%s", rc, log);
    long long a = number_after(log, "one sample's activations take "), h = number_after(log, "with the ");
    cr_assert(a > 0 && h > 0 && strstr(log, "over the budget of 614400 bytes (--max-memory)"), "%s", log);
    free(log);
    long long m = h + 3 * 5 * a + 3 * a / 2;
    snprintf(extra, sizeof extra, "--max-memory %lldK", (m + 1023) / 1024);
    rc = quantize("", "one.npy", extra, "five", &log);
    cr_assert_eq(rc, 0, "%s: exit %d\n%s", extra, rc, log);
    cr_expect(strstr(log, "batch 4)"), "%s: expected batch 4 (A %lld, H %lld):\n%s", extra, a, h, log);
    free(log);
    quantize_ok("", "one.npy", "--batch 4", "b4");
    cr_expect(same("b4", "five", "json") && same("b4", "five", "onnx"), "differs from --batch 4 without a budget");
    char extra6[300];
    snprintf(extra6, sizeof extra6, "%s --batch 6", extra);
    rc = quantize("", "one.npy", extra6, "six", &log);
    cr_expect_eq(rc, 1, "%s: exit %d\n%s", extra6, rc, log);
    cr_expect(strstr(log, "--batch 6 needs") && strstr(log, "at most --batch 5 fits"), "%s", log);
    free(log);
    snprintf(extra, sizeof extra, "--max-memory %lldK", h / 1024 / 2);
    rc = quantize("", "one.npy", extra, "held", &log);
    cr_expect_eq(rc, 1, "%s: exit %d\n%s", extra, rc, log);
    cr_expect(strstr(log, "the model's constants and the calibration data in memory take"), "%s", log);
    free(log);
    const char *none[] = {"tiny", "six", "held"};
    for (int i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, none[i]);
        cr_expect(!tu_file_exists(path), "%s was written", path);
    }
}

/* ONNX Runtime runs model on dir/x.npy into dir/outdir (tools/ort_run.js). */
static void ort_run(const char *model, const char *outdir)
{
    free(tu_sh("cd '%s' && node tools/ort_run.js '%s' '%s/x.npy' -o '%s/%s'", tu_root(), model, dir, dir, outdir));
}

/* A model whose every initializer lives in external data (a subfolder, one file, offsets): qrl
 * runs it as ONNX Runtime does (the oracle), and quantizes it to the bytes of the model with
 * its initializers inside. */
Test(data_scale, external_data_import)
{
    char model[1024], a[1024], b[1024];
    snprintf(model, sizeof model, "%s/ext/model.onnx", dir);
    ort_run(model, "ort");
    free(tu_sh("%s run '%s' -i '%s/x.npy' -o '%s/qrl'", tu_qrl(), model, dir, dir));
    snprintf(a, sizeof a, "%s/ort/logits.npy", dir);
    snprintf(b, sizeof b, "%s/qrl/logits.npy", dir);
    double d = tu_npy_rel_diff(a, b);
    cr_expect(d < 1e-5, "qrl run of the external-data model is %g off ONNX Runtime's outputs", d);
    char *log;
    int rc = quantize_model("", model, "one.npy", "", "ext", &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    quantize_ok("", "one.npy", "", "one");
    cr_expect(same("one", "ext", "onnx") && same("one", "ext", "json"),
              "quantizing the external-data model differs from the same model with its data inside");
}

/* --external-data: the initializers of 1 KB or more go to OUT.onnx.data (onnx, the oracle, reads
 * where each is and checks the model); ONNX Runtime runs the pair, with outputs equal, bit for
 * bit, to those of the export with its data inside. */
Test(data_scale, external_data_export)
{
    quantize_ok("", "one.npy", "", "in");
    quantize_ok("", "one.npy", "--external-data", "ex");
    char path[1024];
    snprintf(path, sizeof path, "%s/ex.onnx.data", dir);
    cr_assert(tu_file_exists(path), "no ex.onnx.data");
    free(tu_sh("cd '%s' && /usr/bin/python3 -c \"import onnx\n"
           "m = onnx.load('ex.onnx', load_external_data=False)\n"
           "big = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]\n"
           "assert len(big) >= 3, len(big)\n"
           "for t in big:\n"
           "    e = {k.key: k.value for k in t.external_data}\n"
           "    assert e['location'] == 'ex.onnx.data' and int(e['offset']) %% 64 == 0, e\n"
           "for t in m.graph.initializer:\n"
           "    n = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type].itemsize\n"
           "    for d in t.dims:\n"
           "        n *= d\n"
           "    assert (t.data_location == onnx.TensorProto.EXTERNAL) == (n >= 1024), t.name\n"
           "onnx.checker.check_model('ex.onnx')\n\"",
           dir));
    snprintf(path, sizeof path, "%s/ex.onnx", dir);
    ort_run(path, "ort_ex");
    snprintf(path, sizeof path, "%s/in.onnx", dir);
    ort_run(path, "ort_in");
    free(tu_sh("cmp '%s/ort_ex/logits.npy' '%s/ort_in/logits.npy'", dir, dir));
}

/* The initializers are read from the model's bytes straight into the graph (the file mapped, the
 * weights left out of what protobuf-c unpacks): a 308 KB one with a field after its raw_data, a
 * 4.8 KB one and a 1 KB one (unpacked as before), none at a 4-byte offset in the file. qrl run
 * gives numpy's x + W, x * B and -C (the oracle: tools/make_scale_data.py) bit for bit. */
Test(data_scale, initializers_read_in_place)
{
    char *log, cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run '%s/weights.onnx' -i '%s/wx.npy' -o '%s/wout'", tu_qrl(), dir, dir, dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np\n"
             "for n in 'yzu':\n"
             "    a, b = np.load('wout/%%s.npy' %% n), np.load('weights_%%s.npy' %% n)\n"
             "    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), n\n\"",
             dir);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "qrl run of weights.onnx differs from numpy:\n%s", log);
    free(log);
}
