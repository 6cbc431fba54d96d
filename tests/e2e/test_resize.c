/* Resize's floats bit for bit against numpy (tests/e2e/resize_oracle.py): linear with each
 * coordinate transformation the real models use, up and down, on the last two axes, the last
 * alone, an outer one alone and two apart; nearest; 8-bit data rounded half to even. The
 * row-by-row path (runtime/ops/resize.c) must give what the element loop gave: the fallback's
 * decisions on M-LSD and PP-OCR det rest on these values. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

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

TestSuite(resize, .init = setup, .fini = teardown, .timeout = 300);

Test(resize, rows_match_numpy_bit_for_bit)
{
    static const char *const cases[] = {"bilinear_x2",       "linear_up_down",  "linear_last_axis", "linear_outer_axis",
                                        "linear_axes_0_2",   "nearest_x2",      "bilinear_u8"};
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/resize_oracle.py' make '%s'", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run '%s/%s.onnx' -i '%s/%s_x.npy' -o '%s/out/%s'", tu_qrl(), dir, cases[i], dir,
                 cases[i], dir, cases[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", cases[i], log);
        free(log);
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/resize_oracle.py' check '%s' '%s/out'", tu_root(), dir,
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}
