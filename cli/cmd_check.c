/* qrl check: compile recipe files and print their diagnostics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/check.h"
#include "../compiler/unit.h"
#include "cli.h"

int cli_check(int argc, char **argv)
{
    int dump_ast = 0, timing = 0, nfiles = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: qrl check FILE.qrl... [--dump-ast] [--time]\n"
                   "Compiles each recipe file (with its imports) and prints diagnostics as\n"
                   "file:line:col: error: message, the source line and a caret.\n"
                   "Exit status 0 when every file is clean, 1 when any has errors.\n"
                   "  --dump-ast  print each file's syntax tree\n"
                   "  --time      print the time spent in each phase (ms)\n");
            return 0;
        }
        if (!strcmp(a, "--dump-ast"))
            dump_ast = 1;
        else if (!strcmp(a, "--time"))
            timing = 1;
        else if (a[0] == '-' && a[1])
            return cli_usage_error("check", "unknown option '%s'", a);
        else
            nfiles++;
    }
    if (!nfiles)
        return cli_usage_error("check", "missing FILE.qrl");
    char *stdlib = qc_default_stdlib();
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1])
            continue;
        qc_unit *u = qc_unit_new(stdlib);
        if (!u) {
            fprintf(stderr, "qrl: out of memory\n");
            rc = 1;
            break;
        }
        qc_file *root = qc_unit_load(u, argv[i]);
        if (root && !u->diags.errors)
            qc_check(u); /* after syntax errors the checker would mostly repeat them */
        if (dump_ast && root && root->ast)
            ql_ast_dump(root->ast, stdout);
        ql_diags_print(&u->diags, stderr);
        if (u->diags.errors)
            rc = 1;
        if (timing)
            printf("%s: parse %.3f ms, check %.3f ms (%d file%s)\n", argv[i], u->t_parse, u->t_check, u->nfiles,
                   u->nfiles == 1 ? "" : "s");
        qc_unit_free(u);
    }
    free(stdlib);
    return rc;
}
