/* Recipe inheritance through the qrl command (docs/language.md, "Recipes that derive from
 * another"): a recipe that derives from one in an imported file quantizes exactly as the same
 * settings written out by hand, and `qrl quantize --recipe FILE` takes FILE's own recipe, never the
 * imported base. The oracle is the hand-written copy: the two exports' graphs must be the same
 * protobuf (python's onnx, independent of qrl), and a copy that differs in one argument must not be
 * (so that the comparison can see a lost argument). The base has int8.qrl's sixteen settings, so the
 * derived recipe's transforms come after them (its 17th and 18th lines). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

TestSuite(derive, .init = setup, .fini = teardown, .timeout = 600);

static const char *data_dir(void)
{
    const char *d = getenv("QRL_DATA");
    return d && *d ? d : "build/data";
}

#define SETTINGS                                                                                                     \
    "  activation = u8 asymmetric by minmax()\n"                                                                     \
    "  weight     = i8 symmetric per_channel by minmax(symmetric = true)\n"                                          \
    "  bias       = i32\n  accumulate = i32\n  numerics   = onnx\n  rounding   = half_even\n  tolerance  = 3\n"    \
    "  fallback   = f32 when sqnr < 20 or output_sqnr < 25\n  outputs    = worst\n  order      = per_mac\n"         \
    "  search_samples = 16\n  effect_samples = 4\n  samples    = sample_balanced_lower\n  validate   = 0.25\n"    \
    "  validate_from = spread\n  validate_least = 8\n"

#define IMPORTS "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"

static void write_recipes(void)
{
    char lib[1100];
    snprintf(lib, sizeof lib, "%s/lib", dir);
    char *out = tu_sh("mkdir -p '%s'", lib);
    free(out);
    tu_write_file(lib, "base.qrl", IMPORTS "\nrecipe base {\n" SETTINGS "}\n");
    /* relative to derived.qrl's folder, as docs/language.md says imports are */
    tu_write_file(dir, "derived.qrl",
                  "import \"lib/base.qrl\"\nimport \"transforms.qrl\"\n\nrecipe derived : base {\n"
                  "  transform = equalize()\n  transform = bias_correct(strength = 0.5)\n}\n");
    tu_write_file(dir, "copy.qrl",
                  IMPORTS "import \"transforms.qrl\"\n\nrecipe copy {\n"
                          "  transform = equalize()\n  transform = bias_correct(strength = 0.5)\n" SETTINGS "}\n");
    tu_write_file(dir, "control.qrl",
                  IMPORTS "import \"transforms.qrl\"\n\nrecipe control {\n"
                          "  transform = equalize()\n  transform = bias_correct(strength = 1.0)\n" SETTINGS "}\n");
}

static void quantize(const char *name)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe %s/%s.qrl --calib %s/calib_images.npy "
             "--calib-count 64 -o %s/%s.onnx --report %s/%s.json 2>&1",
             tu_root(), tu_qrl(), dir, name, data_dir(), dir, name, dir, name);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "validate:  the SQNR above and the fallback's decisions on 16 held-out samples"), "%s", log);
    free(log);
}

/* 1 when the two exports' graphs are the same protobuf message (python's onnx). */
static int same_graph(const char *a, const char *b)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, sys; a = onnx.load('%s/%s.onnx'); b = onnx.load('%s/%s.onnx'); "
             "print('recipe', [p.value for p in a.metadata_props if p.key == 'qrl.recipe'][0]); "
             "sys.exit(0 if a.graph.SerializeToString() == b.graph.SerializeToString() else 3)\"",
             dir, a, dir, b);
    int rc = tu_run(cmd, &log);
    cr_assert(rc == 0 || rc == 3, "%s", log);
    char want[64];
    snprintf(want, sizeof want, "recipe %s\n", a);
    cr_assert(strstr(log, want), "the export names another recipe than %s: %s", a, log);
    free(log);
    return rc == 0;
}

Test(derive, a_derived_recipe_quantizes_as_its_settings_written_out)
{
    write_recipes();
    quantize("derived");
    quantize("copy");
    quantize("control");
    cr_assert(same_graph("derived", "copy"), "the derived recipe's export differs from the copy's");
    cr_assert_not(same_graph("control", "copy"), "bias_correct's strength changes nothing: the test cannot see it");
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/derived.json", dir);
    snprintf(b, sizeof b, "%s/copy.json", dir);
    cr_assert_eq(tu_json_number(a, "output_sqnr_db"), tu_json_number(b, "output_sqnr_db"));
    cr_assert_eq(tu_json_number(a, "validate_samples"), 16);
}

/* --recipe FILE takes FILE's own recipe (the first of them); an imported file's recipes are bases,
 * not offered: --recipe-name names one of FILE's. */
Test(derive, the_files_own_recipe_is_taken_not_the_imported_base)
{
    write_recipes();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe %s/derived.qrl --recipe-name base "
             "--calib %s/calib_images.npy --calib-count 8 -o %s/x.onnx 2>&1",
             tu_root(), tu_qrl(), dir, data_dir(), dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "no recipe named 'base' (the file has derived)"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/x.onnx", dir);
    cr_assert_not(tu_file_exists(cmd));
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize examples/fmnist/fmnist_cnn.onnx --recipe %s/derived.qrl "
             "--calib %s/calib_images.npy --calib-count 8 -o %s/x.onnx 2>&1 && "
             "/usr/bin/python3 -c \"import onnx; m = onnx.load('%s/x.onnx'); "
             "print([p.value for p in m.metadata_props if p.key == 'qrl.recipe'])\"",
             tu_root(), tu_qrl(), dir, data_dir(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "recipe 'derived'") || strstr(log, "['derived']"), "%s", log);
    cr_assert_null(strstr(log, "['base']"), "%s", log);
    free(log);
}

/* A recipe outside the source tree builds on a shipped one by its bare name: `import "int8.qrl"`
 * finds recipes/ beside the stdlib (docs/language.md, "Modules and imports"). Oracle: the same
 * graph as recipes/int8.qrl's own export (python's onnx); one setting changed must change it. */
Test(derive, a_recipe_anywhere_imports_a_shipped_one_by_name)
{
    tu_write_file(dir, "mine.qrl", "import \"int8.qrl\"\n\nrecipe mine : int8 {\n}\n");
    tu_write_file(dir, "coarse.qrl", "import \"int8.qrl\"\n\nrecipe coarse : int8 {\n  fallback = f32 when sqnr < 20 or output_sqnr < 60\n}\n");
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "cp '%s/recipes/int8.qrl' '%s/int8_copy.qrl' && sed -i 's/^recipe int8 /recipe int8_copy /' "
             "'%s/int8_copy.qrl'", tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    quantize("mine");
    quantize("int8_copy");
    quantize("coarse");
    cr_assert(same_graph("mine", "int8_copy"), "the derived recipe's export differs from int8.qrl's");
    cr_assert_not(same_graph("coarse", "int8_copy"), "a 60 dB target changes nothing: the test cannot see it");
}
