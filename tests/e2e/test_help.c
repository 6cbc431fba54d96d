/* The help texts and the man page list every option the qrl command parses.
 * The options are read from the parser's own source (cli/main.c and
 * cli/cmd_<command>.c: every "-..." literal compared with strcmp), not from a
 * list kept by hand, so an option added without its help line fails here. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_OPTS 64

typedef struct opts {
    char name[MAX_OPTS][40];
    int n;
} opts;

static void add(opts *o, const char *s, size_t len)
{
    for (int i = 0; i < o->n; i++)
        if (strlen(o->name[i]) == len && !strncmp(o->name[i], s, len))
            return;
    cr_assert_lt(o->n, MAX_OPTS);
    cr_assert_lt(len, sizeof o->name[0]);
    memcpy(o->name[o->n], s, len);
    o->name[o->n++][len] = 0;
}

/* Every literal starting with dash compared by strcmp(x, "-...") in the file
 * (which variable is compared does not matter: argv[i], a or cmd). */
static void options_in(const char *rel, opts *o)
{
    char *src = tu_slurp_root(rel);
    for (const char *p = src; (p = strstr(p, "strcmp(")); p += 7) {
        const char *q = strchr(p, ',');
        const char *close = strchr(p, ')');
        if (!q || !close || q > close)
            continue;
        q++;
        while (*q == ' ')
            q++;
        if (q[0] != '"' || q[1] != '-')
            continue;
        const char *end = strchr(q + 1, '"');
        add(o, q + 1, (size_t)(end - q - 1));
    }
    free(src);
}

/* Commands: the literals main.c compares argv[1] with (strcmp(cmd, "run")). */
static void commands_in(opts *o)
{
    char *src = tu_slurp_root("cli/main.c");
    for (const char *p = src; (p = strstr(p, "strcmp(cmd, \"")); p += 13) {
        const char *s = p + 13, *end = strchr(s, '"');
        if (s[0] != '-' && strncmp(s, "help\"", 5)) /* qrl help is qrl --help */
            add(o, s, (size_t)(end - s));
    }
    free(src);
}

/* opt appears in text as a word of its own: not inside a longer option name. */
static int mentions(const char *text, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = text; (p = strstr(p, opt)); p++) {
        int before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '-' || p[-1] == '_');
        int after = !(isalnum((unsigned char)p[n]) || p[n] == '-' || p[n] == '_');
        if (before && after)
            return 1;
    }
    return 0;
}

static char *help_of(const char *cmd)
{
    char line[600], *out;
    snprintf(line, sizeof line, "%s %s --help", tu_qrl(), cmd);
    int rc = tu_run(line, &out);
    cr_assert_eq(rc, 0, "qrl %s --help exited %d: %s", cmd, rc, out);
    return out;
}

Test(help, every_command_lists_every_option_it_parses)
{
    opts cmds = {0};
    commands_in(&cmds);
    cr_assert_geq(cmds.n, 6, "found %d commands in cli/main.c", cmds.n);
    char *top = help_of("");
    for (int c = 0; c < cmds.n; c++) {
        cr_assert(mentions(top, cmds.name[c]), "qrl --help does not list the command '%s'", cmds.name[c]);
        char rel[100];
        snprintf(rel, sizeof rel, "cli/cmd_%s.c", cmds.name[c]);
        opts o = {0};
        options_in(rel, &o);
        cr_assert_geq(o.n, 2, "%s: found only %d options", rel, o.n); /* at least -h, --help */
        char *h = help_of(cmds.name[c]);
        cr_assert(!strncmp(h, "usage: qrl ", 11), "qrl %s --help: %s", cmds.name[c], h);
        for (int i = 0; i < o.n; i++) {
            if (!strcmp(o.name[i], "-h") || !strcmp(o.name[i], "--help"))
                continue; /* how this text was asked for */
            cr_assert(mentions(h, o.name[i]), "qrl %s --help does not mention %s, which %s parses:\n%s",
                      cmds.name[c], o.name[i], rel, h);
            cr_assert(mentions(top, o.name[i]), "qrl --help does not mention %s %s, which %s parses:\n%s",
                      cmds.name[c], o.name[i], rel, top);
        }
        free(h);
    }
    opts g = {0};
    options_in("cli/main.c", &g);
    cr_assert_geq(g.n, 5, "cli/main.c: found %d options", g.n);
    for (int i = 0; i < g.n; i++)
        cr_assert(mentions(top, g.name[i]), "qrl --help does not mention %s, which cli/main.c parses:\n%s", g.name[i],
                  top);
    free(top);
}

/* The man page renders without a warning and names every command and option. */
Test(help, man_page_renders_and_lists_every_option)
{
    char cmd[1200], *out;
    snprintf(cmd, sizeof cmd, "groff -man -Tascii -ww -z %s/docs/qrl.1", tu_root());
    int rc = tu_run(cmd, &out);
    cr_assert_eq(rc, 0, "groff exited %d: %s", rc, out);
    cr_assert_eq(out[0], 0, "groff warns about docs/qrl.1:\n%s", out);
    free(out);
    /* plain text: no overstrike bold or underline */
    snprintf(cmd, sizeof cmd, "groff -man -Tascii -P-bcou %s/docs/qrl.1", tu_root());
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    opts all = {0}, cmds = {0};
    commands_in(&cmds);
    options_in("cli/main.c", &all);
    for (int c = 0; c < cmds.n; c++) {
        char rel[100];
        snprintf(rel, sizeof rel, "cli/cmd_%s.c", cmds.name[c]);
        options_in(rel, &all);
        char want[64];
        snprintf(want, sizeof want, "qrl %s", cmds.name[c]);
        cr_assert(strstr(out, want), "docs/qrl.1 has no '%s'", want);
    }
    for (int i = 0; i < all.n; i++)
        cr_assert(mentions(out, all.name[i]), "docs/qrl.1 does not mention %s", all.name[i]);
    free(out);
}
