/* QRL as an installed library (QRL-L): `make install DESTDIR=<tmp> PREFIX=/usr` and, against
 * that staged tree only (pkg-config with its prefix moved there, LD_LIBRARY_PATH to run), a C
 * program linked with the shared and with the static library, a C++ program, the SONAME, the
 * exported symbols, the installed command and library finding the installed stdlib with no
 * QRL_STDLIB, the C example's qparams by the model's own names against onnx's reading of the
 * QDQ export (tools/qdq_qparams.py), and `make uninstall` leaving nothing behind.
 *
 * The programs are compiled with this suite's sanitizers when it has them (make test-asan):
 * the library they link was built with them. */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define SAN_FLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer"
#else
#define SAN_FLAGS ""
#endif

/* The build folder the suite tests ($QRL_BIN's), for `make B=...`. */
static const char *build_dir(void)
{
    static char b[4096];
    snprintf(b, sizeof b, "%s", tu_qrl_bin());
    return dirname(b);
}

/* make TARGET of the tree into dir as DESTDIR, PREFIX=/usr. The outer make's jobserver is not
 * this one's. Everything is built already (make check's `tests`), so nothing is compiled. */
static void make_target(const char *target, const char *dir)
{
    free(tu_sh("cd '%s' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s B='%s' %s DESTDIR='%s' PREFIX=/usr",
            tu_root(), build_dir(), target, dir));
}

/* pkg-config for the staged tree: its qrl.pc, with ${prefix} moved into the stage. */
#define PKG "PKG_CONFIG_PATH='%s/usr/lib/pkgconfig' pkg-config --define-variable=prefix='%s/usr'"

static const char *probe_c =
    "#include <qrl.h>\n#include <stdio.h>\n#include <string.h>\n"
    "int main(void) {\n"
    "    if (!qrl_op_known(\"Conv\") || qrl_op_known(\"NoSuchOp\") || qrl_op_count() < 100) return 1;\n"
    "    printf(\"version %s ops %d first %s\\n\", qrl_version(), qrl_op_count(), qrl_op_name(0));\n"
    "    return 0;\n}\n";

static const char *probe_cpp =
    "#include <qrl.h>\n#include <cstdio>\n#include <string>\n"
    "int main() {\n"
    "    std::string first = qrl_op_name(0);\n"
    "    if (!qrl_op_known(\"Conv\") || qrl_op_count() < 100 || first.empty()) return 1;\n"
    "    std::printf(\"version %s ops %d\\n\", qrl_version(), qrl_op_count());\n"
    "    qrl_model *m = nullptr; char err[256];\n"
    "    if (qrl_model_load(\"/nonexistent.onnx\", 0, &m, err, sizeof err) == 0) return 1;\n"
    "    std::printf(\"error %s\\n\", err);\n"
    "    return 0;\n}\n";

/* A recipe importing a stdlib file that only the staged stdlib holds: it checks clean only
 * when the stdlib found is the installed one, not the source tree's. */
static void write_marker(const char *stage, const char *dir)
{
    free(tu_sh("printf 'fn installed_marker() -> f64 {\\n  return 1.0\\n}\\n' > '%s/usr/share/qrl/stdlib/installed_marker.qrl'"
            " && printf 'import \"installed_marker.qrl\"\\nimport \"qparams.qrl\"\\n\\nfn use_marker() -> f64 {\\n"
            "  return installed_marker()\\n}\\n' > '%s/marker.qrl'",
            stage, dir));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* dir/file with text, compiled by compiler (cc -std=c11 or g++ -std=c++17, with the warnings as
 * errors) against the staged libqrl.so into dir/exe. */
static void compile_shared(const char *stage, const char *dir, const char *file, const char *text,
                           const char *compiler, const char *exe)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    write_file(path, text);
    free(tu_sh("cd '%s' && %s -Wall -Wextra -Werror " SAN_FLAGS " %s $(" PKG " --cflags --libs qrl) -o %s", dir, compiler,
            file, stage, stage, exe));
}

Test(install, layout_soname_and_exported_symbols, .timeout = 120)
{
    char *stage = tu_tmpdir();
    make_target("install", stage);
    static const char *const files[] = {
        "bin/qrl", "lib/libqrl.so.0.1.0", "lib/libqrl.so.0", "lib/libqrl.so", "lib/libqrl.a", "include/qrl.h",
        "lib/pkgconfig/qrl.pc", "share/man/man1/qrl.1", "share/qrl/stdlib/qparams.qrl", "share/qrl/stdlib/kernels.qrl",
        "share/qrl/recipes/int8.qrl", "share/doc/qrl/README.md", "share/doc/qrl/language.md",
        "share/doc/qrl/examples/c/qparams_backend.c"};
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/usr/%s", stage, files[i]);
        cr_expect(tu_file_exists(path), "not installed: %s", path);
    }
    char *out = tu_sh("readlink '%s/usr/lib/libqrl.so' '%s/usr/lib/libqrl.so.0'", stage, stage);
    cr_expect_str_eq(out, "libqrl.so.0\nlibqrl.so.0.1.0\n");
    free(out);
    out = tu_sh("readelf -d '%s/usr/lib/libqrl.so.0.1.0' | grep SONAME", stage);
    cr_expect(strstr(out, "Library soname: [libqrl.so.0]"), "%s", out);
    free(out);
    /* Every defined dynamic symbol is the API's (nm -D lists no _init/_fini or linker symbols here). */
    out = tu_sh("nm -D --defined-only '%s/usr/lib/libqrl.so' | awk '{print $NF}' | grep -v '^qrl_' | head", stage);
    cr_expect_str_eq(out, "", "exported beyond qrl_*:\n%s", out);
    free(out);
    out = tu_sh("nm -D --defined-only '%s/usr/lib/libqrl.so' | grep -c ' qrl_'", stage);
    cr_expect_gt(atoi(out), 50, "%s", out);
    free(out);
    /* One version: the command's, the library's file name and the .pc's. */
    out = tu_sh("'%s/usr/bin/qrl' --version && " PKG " --modversion qrl", stage, stage, stage);
    cr_expect_str_eq(out, "qrl 0.1.0\n0.1.0\n");
    free(out);
    tu_rmdir(stage);
}

Test(install, c_program_links_the_shared_and_the_static_library, .timeout = 180)
{
    char *stage = tu_tmpdir(), *dir = tu_tmpdir(), path[4096];
    make_target("install", stage);
    compile_shared(stage, dir, "probe.c", probe_c, "cc -std=c11", "shared");
    char *out = tu_sh("LD_LIBRARY_PATH='%s/usr/lib' '%s/shared'", stage, dir);
    cr_expect(!strncmp(out, "version 0.1.0 ops ", 18), "%s", out);
    free(out);
    out = tu_sh("readelf -d '%s/shared' | grep NEEDED", dir);
    cr_expect(strstr(out, "[libqrl.so.0]"), "%s", out);
    free(out);
    /* Without the staged lib on the path, the shared one cannot run: it did link libqrl.so. */
    snprintf(path, sizeof path, "env -u LD_LIBRARY_PATH '%s/shared'", dir);
    cr_expect_neq(tu_run(path, NULL), 0, "ran without libqrl.so.0 on the library path");

    /* Static: libqrl.a, with what qrl.pc's Libs.private and Requires.private add. */
    free(tu_sh("cd '%s' && cc -std=c11 -Wall -Wextra -Werror " SAN_FLAGS " probe.c $(" PKG " --cflags qrl) "
            "-Wl,-Bstatic $(" PKG " --static --libs qrl) -o static",
            dir, stage, stage, stage, stage));
    out = tu_sh("readelf -d '%s/static' | grep NEEDED", dir);
    cr_expect(!strstr(out, "libqrl"), "the static link needs libqrl.so:\n%s", out);
    free(out);
    out = tu_sh("env -u LD_LIBRARY_PATH '%s/static'", dir);
    cr_expect(!strncmp(out, "version 0.1.0 ops ", 18), "%s", out);
    free(out);
    tu_rmdir(dir);
    tu_rmdir(stage);
}

Test(install, cpp_program_includes_the_header_and_links, .timeout = 180)
{
    char *stage = tu_tmpdir(), *dir = tu_tmpdir();
    make_target("install", stage);
    compile_shared(stage, dir, "probe.cpp", probe_cpp, "g++ -std=c++17", "probe");
    char *out = tu_sh("LD_LIBRARY_PATH='%s/usr/lib' '%s/probe'", stage, dir);
    cr_expect(!strncmp(out, "version 0.1.0 ops ", 18) && strstr(out, "\nerror /nonexistent.onnx: "), "%s", out);
    free(out);
    tu_rmdir(dir);
    tu_rmdir(stage);
}

/* With QRL_STDLIB unset and run from /, the installed qrl and a program using the installed
 * libqrl.so (built outside the stage, so only the library's own place can lead to it) import
 * from <stage>/usr/share/qrl/stdlib: the marker file is there and nowhere else. */
Test(install, the_installed_stdlib_is_found_without_qrl_stdlib, .timeout = 180)
{
    char *stage = tu_tmpdir(), *dir = tu_tmpdir(), path[4096];
    make_target("install", stage);
    write_marker(stage, dir);
    free(tu_sh("cd / && env -u QRL_STDLIB '%s/usr/bin/qrl' check '%s/marker.qrl' '%s/usr/share/qrl/recipes/int8.qrl'",
            stage, dir, stage));
    /* The build tree's qrl does not see the marker: the test proves something. */
    snprintf(path, sizeof path, "cd / && env -u QRL_STDLIB %s check '%s/marker.qrl'", tu_qrl(), dir);
    char *out;
    cr_expect_neq(tu_run(path, &out), 0, "the tree's qrl found the staged marker:\n%s", out);
    cr_expect(strstr(out, "cannot find 'installed_marker.qrl'"), "%s", out);
    free(out);

    compile_shared(stage, dir, "check.c",
                   "#include <qrl.h>\n#include <stdio.h>\n"
                   "int main(int argc, char **argv) {\n"
                   "    qrl_check_stats st; char err[512];\n"
                   "    (void)argc;\n"
                   "    if (qrl_recipe_check(argv[1], 0, stderr, NULL, &st, err, sizeof err)) { puts(err); return 1; }\n"
                   "    printf(\"errors %d files %d\\n\", st.errors, st.files);\n"
                   "    return st.errors != 0;\n}\n",
                   "cc -std=c11", "check");
    out = tu_sh("cd / && env -u QRL_STDLIB LD_LIBRARY_PATH='%s/usr/lib' '%s/check' '%s/marker.qrl'", stage, dir, dir);
    cr_expect_str_eq(out, "errors 0 files 3\n");
    free(out);
    tu_rmdir(dir);
    tu_rmdir(stage);
}

/* The example, built from the installed docs against the installed library, quantizes the bundled
 * CNN with an installed recipe. Each quantized tensor it prints, by the model's own name, is what
 * onnx reads from the QDQ export of the same run (tools/qdq_qparams.py finds a tensor's
 * DequantizeLinear by graph structure, and reads its scale and zero point initializers); the
 * tensors it prints as f32 have no DequantizeLinear. No integer-graph name shows. */
static void expect_example(const char *stage, const char *dir, const char *recipe)
{
    const char *data = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    free(tu_sh("cd / && env -u QRL_STDLIB LD_LIBRARY_PATH='%s/usr/lib' '%s/qparams_backend' '%s/examples/fmnist/fmnist_cnn.onnx' "
            "'%s/usr/share/qrl/recipes/%s.qrl' '%s/calib_images.npy' -o '%s/%s.onnx' > '%s/%s.txt'",
            stage, dir, tu_root(), stage, recipe, data, dir, recipe, dir, recipe));
    char *out = tu_sh("cd '%s' && grep -v '\tf32$' %s.txt | LC_ALL=C sort > %s.c.txt && "
                   "/usr/bin/python3 '%s/tools/qdq_qparams.py' %s.onnx | LC_ALL=C sort > %s.py.txt && "
                   "diff %s.py.txt %s.c.txt && wc -l < %s.c.txt",
                   dir, recipe, recipe, tu_root(), recipe, recipe, recipe, recipe, recipe);
    cr_expect_geq(atoi(out), 19, "%s: %s quantized tensors", recipe, out); /* 9 activations, 5 weights, 5 biases */
    free(out);
    out = tu_sh("cd '%s' && cat %s.txt", dir, recipe);
    cr_expect(strstr(out, "\n/Div_output_0\t") && strstr(out, "\nfeatures.0.weight_1\ti8\taxis=") &&
                  strstr(out, "\nlogits\t") && strstr(out, "input\tf32\n") &&
                  strstr(out, "\n/features/features.1/BatchNormalization_output_0\tf32\n"),
              "%s", out);
    cr_expect(!strstr(out, "_quantized\t") && !strstr(out, "_nhwc\t") && !strstr(out, "_f32\t"), "%s", out);
    free(out);
}

Test(install, the_example_prints_qparams_by_the_models_names, .timeout = 300)
{
    char *stage = tu_tmpdir(), *dir = tu_tmpdir();
    make_target("install", stage);
    free(tu_sh("cd '%s' && cc -std=c11 -Wall -Wextra -Werror " SAN_FLAGS
            " '%s/usr/share/doc/qrl/examples/c/qparams_backend.c' $(" PKG " --cflags --libs qrl) -o qparams_backend",
            dir, stage, stage, stage));
    expect_example(stage, dir, "int8");         /* u8 activations, i8 weights per channel */
    expect_example(stage, dir, "int8-tflite");  /* i8 activations */
    if (!getenv("QRL_TEST_QUICK"))
        expect_example(stage, dir, "int8-pertensor"); /* weights per tensor */
    tu_rmdir(dir);
    tu_rmdir(stage);
}

Test(install, uninstall_removes_what_install_put, .timeout = 120)
{
    char *stage = tu_tmpdir();
    make_target("install", stage);
    make_target("uninstall", stage);
    char *out = tu_sh("cd '%s' && find . ! -type d", stage);
    cr_expect_str_eq(out, "", "left behind:\n%s", out);
    free(out);
    out = tu_sh("cd '%s' && find . -path '*qrl*'", stage);
    cr_expect_str_eq(out, "", "folders left behind:\n%s", out);
    free(out);
    tu_rmdir(stage);
}
