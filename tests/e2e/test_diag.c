/* Golden diagnostics: `qrl check tests/diag/NAME.qrl` must print exactly
 * tests/diag/NAME.expected on stderr (nothing on stdout), and exit 1 when it
 * reports an error, 0 otherwise. Regenerate with tools/update-diag-golden.sh. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(diag, golden_files, .timeout = 120)
{
    char dirpath[600];
    snprintf(dirpath, sizeof dirpath, "%s/tests/diag", tu_root());
    DIR *d = opendir(dirpath);
    cr_assert(d, "cannot open %s", dirpath);
    char *names[512];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 512;) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".qrl") == 0)
            names[n++] = strndup(de->d_name, len - 4);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    cr_assert_gt(n, 0);
    char *tmp = tu_tmpdir();
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char cmd[2048], path[1024], errpath[700];
        snprintf(errpath, sizeof errpath, "%s/stderr", tmp);
        snprintf(cmd, sizeof cmd, "(cd '%s' && QRL_STDLIB=stdlib %s check tests/diag/%s.qrl 2> '%s')", tu_root(),
                 tu_qrl(), names[i], errpath);
        char *out;
        int rc = tu_run(cmd, &out);
        char *err = read_all(errpath);
        snprintf(path, sizeof path, "%s/%s.expected", dirpath, names[i]);
        char *want = read_all(path);
        const char *why = !want ? "missing .expected file"
                          : strcmp(err ? err : "", want) != 0 ? "diagnostics differ"
                          : out[0] ? "printed on stdout"
                          : rc != (strstr(want, ": error: ") ? 1 : 0) ? "wrong exit status"
                          : NULL;
        if (why) {
            failures++;
            cr_log_error("%s: %s (exit %d)\n--- got:\n%s--- expected:\n%s", names[i], why, rc, err ? err : "",
                         want ? want : "");
        }
        free(out);
        free(err);
        free(want);
        free(names[i]);
    }
    tu_rmdir(tmp);
    cr_assert_eq(failures, 0, "%d of %d diagnostic golden files differ (tools/update-diag-golden.sh regenerates them)",
                 failures, n);
}
