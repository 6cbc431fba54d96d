/* qrl check: compile recipe files and print their diagnostics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/check.h"
#include "../compiler/compile.h"
#include "../compiler/unit.h"
#include "cli.h"

int cli_check(int argc, char **argv)
{
    int dump_ast = 0, timing = 0, nfiles = 0, no_cache = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: qrl check FILE.qrl... [--dump-ast] [--time] [--no-cache]\n"
                   "Checks each recipe file (with its imports) and prints diagnostics as\n"
                   "file:line:col: error: message, the source line and a caret. Compiles what\n"
                   "its recipes reach (-O1) and validates their kernels with libgccjit without\n"
                   "generating code (qrl quantize compiles them, -O3).\n"
                   "Exit status 0 when every file is clean, 1 when any has errors.\n"
                   "  --dump-ast  print each file's syntax tree\n"
                   "  --time      print the time spent in each phase (ms)\n"
                   "  --no-cache  compile in memory; neither read nor write the module cache\n"
                   "Compiled parts are cached in $XDG_CACHE_HOME/qrl (else ~/.cache/qrl).\n");
            return 0;
        }
        if (!strcmp(a, "--dump-ast"))
            dump_ast = 1;
        else if (!strcmp(a, "--time"))
            timing = 1;
        else if (!strcmp(a, "--no-cache"))
            no_cache = 1;
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
        qc_stats st = {.cache_hit = -1};
        if (root && !u->diags.errors) {
            qc_options o = {.no_cache = no_cache, .check_only = 1};
            qr_module_free(qc_compile(u, &o, &st));
        }
        if (dump_ast && root && root->ast)
            ql_ast_dump(root->ast, stdout);
        ql_diags_print(&u->diags, stderr);
        if (u->diags.errors)
            rc = 1;
        if (timing) {
            double lex = qc_unit_lex_ms(u);
            printf("%s: %d file%s: lex %.3f ms, parse %.3f ms, check %.3f ms", argv[i], u->nfiles,
                   u->nfiles == 1 ? "" : "s", lex, u->t_parse, u->t_check);
            if (st.cache_hit == 1)
                printf(", cache load %.3f ms (hit)\n", st.t_load);
            else if (st.cache_hit == 0 || st.t_jit > 0)
                printf(", jit %.3f ms, load %.3f ms%s\n", st.t_jit, st.t_load,
                       st.cache_hit == 0 ? (st.cache_rebuilt ? " (cache entry was bad: rebuilt)" : " (cache miss)") : "");
            else
                printf("\n");
            for (int k = 0; k < st.nparts && (st.nparts > 1 || st.reach); k++) {
                const qc_part_stats *ps = &st.parts[k];
                printf("  %s: %d item%s%s, -O%d, ", ps->name, ps->items, ps->items == 1 ? "" : "s",
                       st.reach ? " the recipes reach" : "", ps->opt_level);
                if (ps->validated == 2)
                    printf("validated before (its marker is cached), not compiled\n");
                else if (ps->validated)
                    printf("validated by libgccjit without code generation %.3f ms, not compiled\n", ps->t_jit);
                else if (ps->cache_hit == 1)
                    printf("cache load %.3f ms (hit)\n", ps->t_load);
                else
                    printf("jit %.3f ms, load %.3f ms%s\n", ps->t_jit, ps->t_load,
                           ps->cache_hit == 0 ? (ps->cache_rebuilt ? " (rebuilt)" : " (cache miss)") : "");
            }
        }
        qc_unit_free(u);
    }
    free(stdlib);
    return rc;
}
