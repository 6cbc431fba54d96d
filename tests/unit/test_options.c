/* The run-time switches (runtime/options.h): every name and value parses into its field, a wrong
 * one is refused naming the values it takes, --kernels' meaning, the kernel choosers follow the
 * struct, and no source of the library reads a switch from the environment. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "ops/f32_rows.h"
#include "ops/igemm.h"
#include "ops/sgemm.h"
#include "ops/window_f32.h"
#include "qrl.h"
#include "testutil.h"

static qr_options parsed(const char *name, const char *value)
{
    qr_options o = {0};
    qr_error e;
    cr_assert_eq(qr_options_parse(&o, name, value, &e), QR_OK, "%s %s: %s", name, value, e.msg);
    return o;
}

Test(options, each_value_sets_its_field)
{
    cr_assert_eq(parsed("fuse", "0").no_fuse, 1);
    cr_assert_eq(parsed("fuse", "1").no_fuse, 0);
    cr_assert_eq(parsed("nhwc", "0").nhwc, QR_NHWC_OFF);
    cr_assert_eq(parsed("nhwc", "all").nhwc, QR_NHWC_ALL);
    cr_assert_eq(parsed("nhwc", "auto").nhwc, QR_NHWC_AUTO);
    cr_assert_eq(parsed("epilogue", "turn").epilogue, QR_EPILOGUE_TURN);
    cr_assert_eq(parsed("epilogue", "rows").epilogue, QR_EPILOGUE_ROWS);
    cr_assert_eq(parsed("epilogue", "whole").epilogue, QR_EPILOGUE_WHOLE);
    cr_assert_eq(parsed("split", "rows").split, QR_SPLIT_ROWS);
    cr_assert_eq(parsed("split", "cols").split, QR_SPLIT_COLS);
    cr_assert_eq(parsed("poison", "1").poison, 1);
    cr_assert_eq(parsed("effects", "whole").effects, QR_EFFECTS_WHOLE);
    cr_assert_eq(parsed("effects", "cut").effects, QR_EFFECTS_CUT);
    cr_assert_eq(parsed("effects", "downstream").effects, QR_EFFECTS_DOWNSTREAM);
    cr_assert_eq(parsed("iconv-jit", "1").iconv_jit, QR_ICONV_JIT_WAIT);
    cr_assert_eq(parsed("iconv-jit", "0").iconv_jit, QR_ICONV_JIT_OFF);
    cr_assert_eq(parsed("iconv-jit", "auto").iconv_jit, QR_ICONV_JIT_AUTO);
    cr_assert_eq(parsed("iconv-jit", "cached").iconv_jit, QR_ICONV_JIT_CACHED);
    cr_assert_eq(parsed("quant", "portable").quant_portable, 1);
    cr_assert_eq(parsed("window", "portable").window_portable, 1);
    cr_assert_eq(parsed("f32-rows", "portable").f32_rows_portable, 1);
    cr_assert_str_eq(parsed("igemm", "avxvnni").igemm, "avxvnni");
    cr_assert_str_eq(parsed("igemm", "auto").igemm, "");
    cr_assert_str_eq(parsed("sgemm", "ref").sgemm, "ref");
    /* an empty value (an empty variable) is the default */
    qr_options o = parsed("nhwc", "all");
    qr_error e;
    cr_assert_eq(qr_options_parse(&o, "nhwc", "", &e), QR_OK);
    cr_assert_eq(o.nhwc, QR_NHWC_AUTO);
    /* bands: auto is the default (stop 36), the zero of the struct and the empty value */
    cr_assert_eq(parsed("bands", "0").bands, QR_BANDS_OFF);
    cr_assert_eq(parsed("bands", "all").bands, QR_BANDS_ALL);
    cr_assert_eq(parsed("bands", "auto").bands, QR_BANDS_AUTO);
    cr_assert_eq(parsed("bands", "").bands, QR_BANDS_AUTO);
    cr_assert_eq(QR_BANDS_AUTO, 0, "all-zero options are the defaults");
    /* parts (stop 39): auto the default, whole, and parts of 1, 2, 4 or 8 samples */
    cr_assert_eq(parsed("parts", "").parts, QR_PARTS_AUTO);
    cr_assert_eq(parsed("parts", "whole").parts, QR_PARTS_WHOLE);
    cr_assert_eq(parsed("parts", "1").parts, QR_PARTS_1);
    cr_assert_eq(parsed("parts", "8").parts, QR_PARTS_8);
    cr_assert_eq(qr_options_parse(&o, "parts", "3", &e), QR_ERR, "3 is not one of its values");
    cr_assert_eq(QR_PARTS_AUTO, 0, "all-zero options are the defaults");
}

/* --kernels portable is every kernel's portable path; an ISA pins the integer kernels only; auto
 * undoes both. */
Test(options, kernels_sets_every_kernel_choice)
{
    qr_options p = parsed("kernels", "portable");
    cr_assert_str_eq(p.igemm, "portable");
    cr_assert_str_eq(p.sgemm, "portable");
    cr_assert(p.quant_portable && p.window_portable && p.f32_rows_portable);
    qr_options v = parsed("kernels", "avx2");
    cr_assert_str_eq(v.igemm, "avx2");
    cr_assert_str_eq(v.sgemm, "");
    cr_assert(!v.quant_portable && !v.window_portable && !v.f32_rows_portable);
    qr_error e;
    cr_assert_eq(qr_options_parse(&p, "kernels", "auto", &e), QR_OK);
    qr_options zero = {0};
    cr_assert_eq(memcmp(&p, &zero, sizeof p), 0, "kernels auto leaves a field set");
}

Test(options, a_wrong_name_or_value_is_refused_with_the_values)
{
    qr_options o = {0}, zero = {0};
    qr_error e;
    cr_assert_eq(qr_options_parse(&o, "nhwc", "yes", &e), QR_ERR);
    cr_assert_str_eq(e.msg, "option nhwc takes auto, 0, all, not 'yes'");
    cr_assert_eq(qr_options_parse(&o, "kernels", "avx512", &e), QR_ERR);
    cr_assert_str_eq(e.msg, "option kernels takes auto, portable, avx2, avxvnni, avx512vnni, not 'avx512'");
    cr_assert_eq(qr_options_parse(&o, "fusion", "0", &e), QR_ERR);
    cr_assert_str_eq(e.msg, "no option named 'fusion' (the options: kernels, iconv-jit, igemm, sgemm, quant, window, f32-rows, "
                              "fuse, nhwc, epilogue, split, poison, effects, bands, parts, gather, winograd, amx, wide16, "
                              "f32-split, held-ghost, halves, arena-pages)");
    cr_assert_eq(memcmp(&o, &zero, sizeof o), 0, "a refused value changed the options");
    char err[128];
    cr_assert_eq(qrl_set_option("split", "diagonal", err, sizeof err), 1);
    cr_assert_str_eq(err, "option split takes auto, rows, cols, not 'diagonal'");
    cr_assert_eq(qrl_set_option("split", "cols", err, sizeof err), 0);
    cr_assert_eq(qr_options_get()->split, QR_SPLIT_COLS);
}

/* The kernels' choosers read the process's options: portable gives the portable paths. */
Test(options, the_kernel_choosers_follow_the_options)
{
    tu_option("kernels", "portable");
    cr_assert_null(qr_sgemm_best());
    cr_assert_null(qr_igemm_u8s8());
    cr_assert(qr_igemm_portable_forced());
    cr_assert_eq(qr_window_avx512(), 0);
    cr_assert_null(qr_f32_rows_best());
    tu_option("kernels", "auto");
    cr_assert(!qr_igemm_portable_forced());
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        cr_assert_not_null(qr_igemm_u8s8());
        tu_option("igemm", "avx2");
        cr_assert_eq((void *)qr_igemm_u8s8(), (void *)qr_igemm_u8s8_isa("avx2"));
        tu_option("igemm", "");
        cr_assert_not_null(qr_sgemm_best());
    }
    if (__builtin_cpu_supports("avx512f"))
        cr_assert(qr_window_avx512());
}

/* The tests' own process starts with poison on and every other switch at its default. */
Test(options, tests_start_with_poison_on)
{
    qr_options want = {0};
    want.poison = 1;
    cr_assert_eq(memcmp(qr_options_get(), &want, sizeof want), 0);
}

/* The library reads the environment only for places (QRL_STDLIB, XDG_CACHE_HOME, HOME, TMPDIR)
 * and the job mpirun started (OMPI_*, PMIX_*), the command (cli/) only for that job: a switch
 * read from it would escape the options, which come from the command line alone. */
Test(options, the_library_reads_no_switch_from_the_environment)
{
    char cmd[1200], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && grep -rn 'getenv(' runtime quantizer compiler api lang grammar mpi --include='*.c' --include='*.h' "
             "| grep -v 'getenv(\"\\(QRL_STDLIB\\|XDG_CACHE_HOME\\|HOME\\|TMPDIR\\|OMPI_[A-Z_]*\\|PMIX_RANK\\)\")'",
             tu_root());
    int rc = tu_run(cmd, &log);
    cr_assert_neq(rc, 0, "getenv of a switch in the library:\n%s", log);
    cr_assert_eq(log[0], 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && grep -rn 'getenv(' cli --include='*.c' --include='*.h' | grep -v 'getenv(\"OMPI_[A-Z_]*\")'",
             tu_root());
    rc = tu_run(cmd, &log);
    cr_assert_neq(rc, 0, "getenv of a switch in the command:\n%s", log);
    cr_assert_eq(log[0], 0, "%s", log);
    free(log);
}
