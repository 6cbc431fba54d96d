/* qrl check: compile recipe files and print their diagnostics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                   "Compiled parts are cached in $XDG_CACHE_HOME/qrl (when it is an absolute path; else ~/.cache/qrl).\n");
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
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1])
            continue;
        qrl_check_stats st;
        char err[CLI_ERRLEN];
        if (qrl_recipe_check(argv[i], no_cache ? QRL_RECIPE_NO_CACHE : 0, stderr, dump_ast ? stdout : NULL, &st, err,
                             sizeof err) != 0) {
            fprintf(stderr, "qrl: %s\n", err);
            rc = 1;
            break;
        }
        if (st.errors)
            rc = 1;
        if (timing) {
            printf("%s: %d file%s: lex %.3f ms, parse %.3f ms, check %.3f ms", argv[i], st.files,
                   st.files == 1 ? "" : "s", st.lex_ms, st.parse_ms, st.check_ms);
            if (st.cache_hit == 1)
                printf(", cache load %.3f ms (hit)\n", st.load_ms);
            else if (st.cache_hit == 0 || st.jit_ms > 0)
                printf(", jit %.3f ms, load %.3f ms%s\n", st.jit_ms, st.load_ms,
                       st.cache_hit == 0 ? (st.cache_rebuilt ? " (cache entry was bad: rebuilt)" : " (cache miss)") : "");
            else
                printf("\n");
            for (int k = 0; k < st.nparts && (st.nparts > 1 || st.reach); k++) {
                const qrl_check_part *ps = &st.parts[k];
                printf("  %s: %d item%s%s, -O%d, ", ps->name, ps->items, ps->items == 1 ? "" : "s",
                       st.reach ? " the recipes reach" : "", ps->opt_level);
                if (ps->validated == 2)
                    printf("validated before (its marker is cached), not compiled\n");
                else if (ps->validated)
                    printf("validated by libgccjit without code generation %.3f ms, not compiled\n", ps->jit_ms);
                else if (ps->cache_hit == 1)
                    printf("cache load %.3f ms (hit)\n", ps->load_ms);
                else
                    printf("jit %.3f ms, load %.3f ms%s\n", ps->jit_ms, ps->load_ms,
                           ps->cache_hit == 0 ? (ps->cache_rebuilt ? " (rebuilt)" : " (cache miss)") : "");
            }
        }
    }
    return rc;
}
