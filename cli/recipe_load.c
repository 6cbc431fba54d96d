/* Loading a model to run (a QDQ model lowered to its integer graph), and
 * quantizing one with a recipe in memory, for the commands that run models
 * (run, eval, bench) and that quantize (quantize, eval --recipe, run --recipe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_load_runnable(const char *path, const char *qdq_recipe, int threads, cli_runnable *r, char *err)
{
    memset(r, 0, sizeof *r);
    if (qrl_model_load(path, threads, &r->m, err, CLI_ERRLEN) != 0)
        return 1;
    r->run = r->m;
    if (qrl_model_lower_qdq(r->m, qdq_recipe, stderr, &r->q, err, CLI_ERRLEN) != 0) {
        cli_runnable_free(r);
        return 1;
    }
    if (!r->q)
        return 0; /* nothing quantized with QuantizeLinear/DequantizeLinear pairs */
    for (int i = 0; qrl_quantized_note(r->q, i); i++)
        fprintf(stderr, "note: %s\n", qrl_quantized_note(r->q, i));
    if (!(r->run = qrl_quantized_model(r->q, err, CLI_ERRLEN))) {
        cli_runnable_free(r);
        return 1;
    }
    return 0;
}

void cli_runnable_free(cli_runnable *r)
{
    qrl_quantized_free(r->q);
    qrl_model_free(r->m);
    memset(r, 0, sizeof *r);
}

int cli_quantize_in_memory(const char *model, const qrl_model *m, const char *recipe, int no_cache, int ncalib,
                           char *const *calib, const qrl_quantize_opts *opts, int flags, qrl_recipe **r,
                           qrl_quantized **q)
{
    char err[CLI_ERRLEN];
    *r = NULL;
    *q = NULL;
    if (qrl_recipe_compile(recipe, no_cache ? QRL_RECIPE_NO_CACHE : 0, stderr, r, err, sizeof err) != 0)
        return 1; /* the diagnostics are printed */
    int ni = qrl_model_num_inputs(m), rc = 0;
    qrl_tensor *c = calloc((size_t)ni + 1, sizeof *c);
    if (!c) {
        rc = cli_fail("out of memory");
    } else if (qrl_model_read_inputs(m, model, "--calib", ncalib, calib, 1, c, err, sizeof err) != 0) {
        rc = cli_fail(err);
    } else if (qrl_quantize_flags(m, *r, c, opts, flags, q, err, sizeof err) != 0) {
        cli_error_prefix(err, "%s", model);
        rc = cli_fail(err);
    }
    cli_tensors_free(c, ni);
    free(c);
    return rc;
}
