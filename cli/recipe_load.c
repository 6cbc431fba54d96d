/* Compiling a recipe file, and quantizing a model with it in memory, for the
 * commands that quantize (quantize, eval --recipe, run --recipe). */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "../compiler/check.h"
#include "../compiler/compile.h"
#include "cli.h"
#include "intgraph.h"
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

qr_status cli_load_runnable(const char *path, const char *qdq_recipe, cli_runnable *r, qr_error *e)
{
    memset(r, 0, sizeof *r);
    if (cli_load_model(path, &r->g, e) != QR_OK)
        return QR_ERR;
    r->run = r->g;
    if (!qr_qdq_strip(r->g))
        return QR_OK; /* nothing quantized with QuantizeLinear/DequantizeLinear pairs */
    char buf[4096];
    if (!qdq_recipe) {
        char *stdlib = qc_default_stdlib();
        snprintf(buf, sizeof buf, "%s/qdq.qrl", stdlib ? stdlib : "stdlib");
        free(stdlib);
        qdq_recipe = buf;
    }
    if (!(r->mod = cli_compile_recipe(qdq_recipe, 0))) {
        qr_errorf(e, "%s: the recipe for QDQ models (%s) does not compile", path, qdq_recipe);
        cli_runnable_free(r);
        return QR_ERR;
    }
    qr_quant_opts o = {.module = r->mod, .from_file = 1};
    if (qr_quantize(r->g, NULL, &o, &r->q, e) != QR_OK) {
        qr_error_prefix(e, "%s: lowering its QDQ groups", path);
        cli_runnable_free(r);
        return QR_ERR;
    }
    for (int i = 0; i < r->q->nnotes; i++)
        fprintf(stderr, "note: %s\n", r->q->notes[i]);
    r->run = r->q->ig->g;
    r->kernel_user = r->q->ig;
    return QR_OK;
}

void cli_runnable_free(cli_runnable *r)
{
    qr_quantized_free(r->q);
    qr_module_free(r->mod);
    qr_graph_free(r->g);
    memset(r, 0, sizeof *r);
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
    } else if (cli_bind_inputs(model, g, "--calib", ncalib, calib, 1, c, &e) != QR_OK) {
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
