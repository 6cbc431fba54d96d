/* Compiling a recipe file for the commands that quantize. */
#include <stdio.h>
#include <stdlib.h>

#include "../compiler/check.h"
#include "../compiler/compile.h"
#include "cli.h"

qrl_module *cli_compile_recipe(const char *path, int no_cache)
{
    char *stdlib = qc_default_stdlib();
    qc_unit *u = qc_unit_new(stdlib);
    free(stdlib);
    if (!u) {
        fprintf(stderr, "qrl: out of memory\n");
        return NULL;
    }
    qrl_module *m = NULL;
    if (qc_unit_load(u, path) && !u->diags.errors && !qc_check(u))
        m = qc_compile(u, &(qc_options){.no_cache = no_cache}, NULL);
    ql_diags_print(&u->diags, stderr);
    qc_unit_free(u);
    return m;
}
