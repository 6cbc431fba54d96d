/* Imports that name files which are not QRL source ("/etc/shadow", a key, a
 * link dressed as .qrl) are refused at the import, and their text never
 * appears in a diagnostic; QRL files with errors keep their source lines. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../compiler/unit.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    cr_assert(dir);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(import, .init = setup, .fini = teardown);

static void write_file(const char *name, const char *text, size_t len)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    fwrite(text, 1, len, f);
    fclose(f);
}

/* Loads DIR/main.qrl holding src; the diagnostics as printed (static buffer). */
static const char *diagnostics(const char *src)
{
    static char out[8192];
    write_file("main.qrl", src, strlen(src));
    char p[700];
    snprintf(p, sizeof p, "%s/main.qrl", dir);
    qc_unit *u = qc_unit_new(NULL);
    qc_unit_load(u, p);
    cr_assert(u->diags.errors > 0, "no error for %s", src);
    memset(out, 0, sizeof out);
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    ql_diags_print(&u->diags, f);
    fclose(f);
    qc_unit_free(u);
    return out;
}

#define SECRET "root:$y$j9T$SECRETHASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"

Test(import, system_file_not_echoed)
{
    const char *d = diagnostics("import \"/etc/passwd\"\n");
    cr_assert(strstr(d, "not a .qrl file"), "%s", d);
    cr_assert(!strstr(d, "root:"), "the file's text was shown:\n%s", d);
}

Test(import, non_qrl_name_not_echoed)
{
    write_file("shadow", SECRET, strlen(SECRET));
    const char *d = diagnostics("import \"shadow\"\n");
    cr_assert(!strstr(d, "SECRET"), "the file's text was shown:\n%s", d);
    cr_assert(strstr(d, "not a .qrl file"), "%s", d);
}

Test(import, link_dressed_as_qrl_not_echoed)
{
    write_file("shadow", SECRET, strlen(SECRET));
    char target[700], link[700];
    snprintf(target, sizeof target, "%s/shadow", dir);
    snprintf(link, sizeof link, "%s/lib.qrl", dir);
    cr_assert_eq(symlink(target, link), 0);
    const char *d = diagnostics("import \"lib.qrl\"\n");
    cr_assert(!strstr(d, "SECRET"), "the file's text was shown:\n%s", d);
    cr_assert(strstr(d, "not a .qrl file"), "%s", d);
}

Test(import, qrl_name_but_not_qrl_source_not_echoed)
{
    write_file("lib.qrl", SECRET, strlen(SECRET));
    const char *d = diagnostics("import \"lib.qrl\"\n");
    cr_assert(!strstr(d, "SECRET"), "the file's text was shown:\n%s", d);
    cr_assert(!strstr(d, "daemon"), "the file's text was shown:\n%s", d);
    cr_assert(strstr(d, "not QRL source"), "%s", d);
    cr_assert(strstr(d, "main.qrl:1:8: error"), "reported at the import:\n%s", d);
}

Test(import, not_utf8_not_echoed)
{
    const char bin[] = "fn \xff\xfe SECRET \x80\x81\n";
    write_file("lib.qrl", bin, sizeof bin - 1);
    const char *d = diagnostics("import \"lib.qrl\"\n");
    cr_assert(!strstr(d, "SECRET"), "the file's text was shown:\n%s", d);
    cr_assert(strstr(d, "not UTF-8"), "%s", d);
}

/* A real QRL file with a syntax error: its line is still shown. */
Test(import, qrl_source_errors_keep_their_lines)
{
    const char lib[] = "fn visible_line( -> i64 { return 1 }\n";
    write_file("lib.qrl", lib, sizeof lib - 1);
    const char *d = diagnostics("import \"lib.qrl\"\n");
    cr_assert(strstr(d, "lib.qrl:1:"), "%s", d);
    cr_assert(strstr(d, "fn visible_line("), "the source line is missing:\n%s", d);
}
