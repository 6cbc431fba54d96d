/* A short, fixed-seed fuzz run in every `make test` (and under ASan in
 * `make test-asan`): mutated stdlib/diagnostic recipes and random token
 * streams through every phase, with well-formed diagnostics and no crash.
 * `make fuzz` runs the long campaign. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "qrlfuzz.h"
#include "testutil.h"

static void add_dir(qf_gen *g, const char *rel)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", tu_root(), rel);
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[512];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 512;) {
        size_t len = strlen(de->d_name);
        if (len > 4 && !strcmp(de->d_name + len - 4, ".qrl"))
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    /* sorted: the same seeds in the same order on every machine */
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && strcmp(names[k - 1], names[k]) > 0; k--) {
            char *t = names[k];
            names[k] = names[k - 1];
            names[k - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        qf_add_seed_file(g, path);
        free(names[i]);
    }
}

Test(fuzz, short_campaign, .timeout = 300)
{
    qf_gen g;
    qf_init(&g, 20261123);
    add_dir(&g, "stdlib");
    add_dir(&g, "tests/diag");
    add_dir(&g, "tests/golden");
    add_dir(&g, "examples/recipes");
    cr_assert_gt(g.nseeds, 10);
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qf_stats st = {0};
    long next_compile = 0; /* about ten compiles: each costs tens of milliseconds */
    for (int k = 0; k < 3000; k++) {
        size_t len;
        char *text = qf_next(&g, &len);
        long compiled = st.compiled;
        const char *bad = qf_run(text, len, stdlib, k >= next_compile, &st);
        if (st.compiled > compiled)
            next_compile = k + 300;
        cr_assert_null(bad, "input %d: %s\n%s", k, bad, text);
        free(text);
    }
    cr_log_info("%ld inputs: %ld parsed clean, %ld checked clean, %ld compiled", st.inputs, st.parsed, st.checked,
                st.compiled);
    cr_assert_eq(st.inputs, 3000);
    qf_free(&g);
}

/* Inputs that once crashed or misbehaved stay in the suite. */
Test(fuzz, regressions)
{
    qf_gen g;
    qf_init(&g, 1);
    add_dir(&g, "tests/fuzz/regress");
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qf_stats st = {0};
    for (int i = 0; i < g.nseeds; i++) {
        const char *bad = qf_run(g.seeds[i], g.seed_len[i], stdlib, 1, &st);
        cr_assert_null(bad, "regression %d: %s", i, bad);
    }
    qf_free(&g);
}
