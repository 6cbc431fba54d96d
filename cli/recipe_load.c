/* Compiling a recipe file, and quantizing a model with it in memory, for the
 * commands that quantize (quantize, eval --recipe, run --recipe). */
#include <stdio.h>
#include <stdlib.h>

#include "../compiler/check.h"
#include "../compiler/compile.h"
#include "cli.h"
#include "quantize.h"

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

int cli_quantize_in_memory(const char *model, const qr_graph *g, const char *recipe, int no_cache, int ncalib,
                           char *const *calib, const qr_quant_opts *opts, qrl_module **mod, qr_quantized **q)
{
    qr_error e;
    *mod = NULL;
    *q = NULL;
    if (!(*mod = cli_compile_recipe(recipe, no_cache)))
        return 1; /* the diagnostics are printed */
    qr_tensor *c = calloc((size_t)g->n_inputs + 1, sizeof *c);
    int rc = 0;
    if (!c) {
        qr_errorf(&e, "out of memory");
        rc = cli_fail(&e);
    } else if (cli_bind_inputs(model, g, "--calib", ncalib, calib, c, &e) != QR_OK) {
        rc = cli_fail(&e);
    } else {
        qr_quant_opts o = *opts;
        o.module = *mod;
        if (qr_quantize(g, c, &o, q, &e) != QR_OK) {
            qr_error_prefix(&e, "%s", model);
            rc = cli_fail(&e);
        }
    }
    for (int i = 0; c && i < g->n_inputs; i++)
        qr_tensor_free(&c[i]);
    free(c);
    return rc;
}
