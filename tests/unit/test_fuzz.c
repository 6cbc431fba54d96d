/* A short, fixed-seed fuzz campaign in every `make test` (and under ASan +
 * UBSan in `make test-asan`): mutated and generated recipes through the
 * lexer, parser, checker and compiler, every diagnostic well formed and no
 * crash (tests/support/fuzzgen.h). `make fuzz` runs the long campaign. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzzgen.h"
#include "testutil.h"

static const char *stdlib_dir(void)
{
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/stdlib", tu_root());
    return dir;
}

static int add_seeds(fg_gen *g, const char *rel)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", tu_root(), rel);
    return fg_add_seed_dir(g, dir);
}

/* 3000 inputs, one compiled in about every 150 (a compile costs tens of
 * milliseconds): a few seconds in all. */
Test(fuzz, short_campaign, .timeout = 300)
{
    fg_gen g;
    fg_init(&g, 20261123);
    cr_assert_gt(add_seeds(&g, "stdlib"), 3);
    cr_assert_gt(add_seeds(&g, "tests/diag"), 10);
    add_seeds(&g, "tests/golden");
    add_seeds(&g, "examples/recipes");
    add_seeds(&g, "tests/fuzz/regress");
    fg_stats st = {0};
    char *bad = NULL;
    size_t bad_len = 0;
    const char *why = fg_campaign(&g, 3000, 150, stdlib_dir(), &st, &bad, &bad_len, NULL);
    cr_assert_null(why, "input %ld: %s\n--- input ---\n%.*s\n--- end ---", st.inputs - 1, why, (int)bad_len,
                   bad ? bad : "");
    cr_log_info("%ld inputs: %ld parsed clean, %ld checked clean, %ld compiled; %ld diagnostics", st.inputs,
                st.parsed, st.checked, st.compiled, st.diags);
    cr_assert_eq(st.inputs, 3000);
    cr_assert_gt(st.parsed, 100, "too few inputs parse: the generator no longer reaches the checker");
    cr_assert_gt(st.checked, 30, "too few inputs check clean: the generator no longer reaches the compiler");
    cr_assert_geq(st.compiled, 10);
    fg_free(&g);
}

/* Inputs that once crashed the front end or broke a diagnostic, each
 * through every phase (compiled when they check clean). */
Test(fuzz, regressions, .timeout = 120)
{
    fg_gen g;
    fg_init(&g, 1);
    int first = g.nseeds; /* after the built-in probes */
    int n = add_seeds(&g, "tests/fuzz/regress");
    cr_assert_gt(n, 5);
    fg_stats st = {0};
    for (int i = first; i < g.nseeds; i++) {
        const char *why = fg_run(g.seeds[i], g.seed_len[i], stdlib_dir(), 1, &st);
        cr_assert_null(why, "regression %d: %s\n--- input ---\n%s\n--- end ---", i - first, why, g.seeds[i]);
    }
    cr_assert_eq(st.inputs, n);
    fg_free(&g);
}
