/* Provenance of an export (QRL-L): its metadata names the QRL version, the recipe and a hash of
 * its sources (imports included), and a hash and count of the calibration samples used; `qrl
 * dump` prints them. The oracle (tests/e2e/provenance_oracle.py) computes both hashes in Python
 * from the documented definitions. The same recipe, model and data give the same bytes, and a
 * change to an imported file changes the recipe's hash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *data_dir(void)
{
    return getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
}

/* qrl quantize of the bundled CNN with recipe (and its imports), 100 calibration samples, to out. */
static void quantize(const char *recipe, const char *out)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe '%s' --calib "
                              "%s/calib_images.npy --calib-count 100 -o '%s' 2>&1",
             tu_root(), tu_qrl(), recipe, data_dir(), out);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
}

/* held: how many of the 100 samples the recipe's validate holds out (int8.qrl: a quarter) */
static void expect_oracle(const char *model, const char *recipe, const char *name, int held)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 tests/e2e/provenance_oracle.py '%s' '%s' stdlib "
                              "%s/calib_images.npy %s 100 %d 2>&1",
             tu_root(), model, recipe, data_dir(), name, held);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect_str_eq(log, "OK\n", "%s", log);
    free(log);
}

Test(provenance, the_export_records_recipe_and_calibration_data, .timeout = 300)
{
    char *dir = tu_tmpdir(), a[1024], b[1024], cmd[4096], *log;
    snprintf(a, sizeof a, "%s/a.onnx", dir);
    snprintf(b, sizeof b, "%s/b.onnx", dir);
    quantize("recipes/int8.qrl", a);
    expect_oracle(a, "recipes/int8.qrl", "int8", 25);
    snprintf(cmd, sizeof cmd, "%s dump '%s' | head -8", tu_qrl(), a);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "\nmeta   qrl.recipe = int8\n") && strstr(log, "\nmeta   qrl.calibration_samples = 100\n"),
              "%s", log);
    free(log);
    quantize("recipes/int8.qrl", b);
    snprintf(cmd, sizeof cmd, "cmp '%s' '%s'", a, b);
    cr_expect_eq(system(cmd), 0, "the same recipe, model and data give the same bytes");
    tu_rmdir(dir);
}

/* A recipe importing a file of its own folder: editing that file changes the recipe's hash. */
Test(provenance, an_edited_import_changes_the_recipe_hash, .timeout = 300)
{
    char *dir = tu_tmpdir(), path[1024], out[1024];
    snprintf(path, sizeof path, "%s/mine.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nimport \"local.qrl\"\n"
          "recipe mine {\n  activation = u8 asymmetric by minmax()\n"
          "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n  bias = i32\n  accumulate = i32\n}\n",
          f);
    fclose(f);
    for (int edit = 0; edit < 2; edit++) {
        snprintf(path, sizeof path, "%s/local.qrl", dir);
        f = fopen(path, "w");
        cr_assert(f);
        fprintf(f, "const local_%d = %d\n", edit, edit);
        fclose(f);
        snprintf(out, sizeof out, "%s/m%d.onnx", dir, edit);
        snprintf(path, sizeof path, "%s/mine.qrl", dir);
        quantize(path, out);
        expect_oracle(out, path, "mine", 0);
    }
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "%s dump '%s/m0.onnx' | grep recipe_sha256; %s dump '%s/m1.onnx' | grep recipe_sha256",
             tu_qrl(), dir, tu_qrl(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    char *nl = strchr(log, '\n');
    cr_assert(nl);
    cr_expect(strncmp(log, nl + 1, (size_t)(nl - log)) != 0, "the two hashes differ: %s", log);
    free(log);
    tu_rmdir(dir);
}
