/* The recipe and quantization calls of include/qrl.h: the one place above both
 * the compiler (a recipe file to a module) and the quantizer (a module and a
 * model to an integer graph and its outputs). */
#include "qrl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_model.h"
#include "check.h"
#include "compile.h"
#include "intgraph.h"
#include "onnx_export.h"
#include "qparams.h"
#include "qreport.h"
#include "quantize.h"

struct qrl_recipe {
    qrl_module *mod;
    char *path;
};

struct qrl_quantized {
    qr_quantized *q;
    char *recipe_path; /* recorded in the qparams JSON */
    int threads;
    qrl_model *model;  /* the integer graph's handle, made on first request */
};

static int fail_msg(char *err, size_t n, const char *fmt, const char *arg)
{
    qr_error e;
    qr_errorf(&e, fmt, arg);
    return qr_api_fail(&e, err, n);
}

int qrl_recipe_compile(const char *path, int flags, FILE *diag, qrl_recipe **out, char *err, size_t errlen)
{
    *out = NULL;
    qrl_recipe *r = calloc(1, sizeof *r);
    char *stdlib = qc_default_stdlib();
    qc_unit *u = qc_unit_new(stdlib);
    free(stdlib);
    if (!r || !u || !(r->path = strdup(path))) {
        qc_unit_free(u);
        qrl_recipe_free(r);
        return fail_msg(err, errlen, "%s: out of memory", path);
    }
    if (qc_unit_load(u, path) && !u->diags.errors && !qc_check(u))
        r->mod = qc_compile(u, &(qc_options){.no_cache = flags & QRL_RECIPE_NO_CACHE}, NULL);
    if (diag)
        ql_diags_print(&u->diags, diag);
    qc_unit_free(u);
    if (!r->mod) {
        qrl_recipe_free(r);
        return fail_msg(err, errlen, "%s: the recipe does not compile", path);
    }
    *out = r;
    return 0;
}

void qrl_recipe_free(qrl_recipe *r)
{
    if (!r)
        return;
    qr_module_free(r->mod);
    free(r->path);
    free(r);
}

int qrl_quantize(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                 qrl_quantized **out, char *err, size_t errlen)
{
    static const qrl_quantize_opts defaults;
    qr_error e;
    *out = NULL;
    if (!o)
        o = &defaults;
    int ni = m->g->n_inputs;
    qrl_quantized *res = calloc(1, sizeof *res);
    qr_tensor *c = calloc((size_t)ni + 1, sizeof *c), lab;
    if (!res || !c || !(res->recipe_path = strdup(r->path))) {
        free(c);
        qrl_quantized_free(res);
        return fail_msg(err, errlen, "%s", "out of memory");
    }
    for (int i = 0; i < ni; i++)
        qr_api_tensor_in(&calib[i], &c[i]);
    if (o->labels)
        qr_api_tensor_in(o->labels, &lab);
    qr_quant_opts qo = {.module = r->mod, .recipe = o->recipe_name, .batch = o->batch, .calib_count = o->calib_count,
                        .threads = o->threads, .progress = o->progress, .labels = o->labels ? &lab : NULL};
    res->threads = m->threads;
    qr_status st = qr_quantize(m->g, c, &qo, &res->q, &e);
    free(c);
    if (st != QR_OK) {
        qrl_quantized_free(res);
        return qr_api_fail(&e, err, errlen);
    }
    *out = res;
    return 0;
}

void qrl_quantized_free(qrl_quantized *q)
{
    if (!q)
        return;
    qr_api_model_unwrap(q->model);
    qr_quantized_free(q->q);
    free(q->recipe_path);
    free(q);
}

qrl_model *qrl_quantized_model(qrl_quantized *q, char *err, size_t errlen)
{
    qr_error e;
    if (!q->model && qr_api_model_wrap(q->q->ig->g, q->q->ig, q->threads, &q->model, &e) != QR_OK) {
        qr_api_fail(&e, err, errlen);
        return NULL;
    }
    return q->model;
}

int qrl_quantized_save(const qrl_quantized *q, const char *path, char *err, size_t errlen)
{
    qr_error e;
    return qr_onnx_save(q->q->qdq, path, &e) == QR_OK ? 0 : qr_api_fail(&e, err, errlen);
}

int qrl_quantized_write_qparams(const qrl_quantized *q, const char *path, char *err, size_t errlen)
{
    qr_error e;
    return qr_qparams_write(path, q->q, q->recipe_path, &e) == QR_OK ? 0 : qr_api_fail(&e, err, errlen);
}

int qrl_quantized_write_report(const qrl_quantized *q, const char *model, const char *path, char *err, size_t errlen)
{
    qr_error e;
    return qr_report_write(q->q, model, path, &e) == QR_OK ? 0 : qr_api_fail(&e, err, errlen);
}

int qrl_quantized_write_int_graph(const qrl_quantized *q, const char *path, char *err, size_t errlen)
{
    qr_error e;
    return qr_intgraph_write(path, q->q, &e) == QR_OK ? 0 : qr_api_fail(&e, err, errlen);
}
