/* The recipe and quantization calls of include/qrl.h: the one place above both
 * the compiler (a recipe file to a module) and the quantizer (a module and a
 * model to an integer graph and its outputs). */
#include "qrl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_model.h"
#include "check.h"
#include "dist.h"
#include "compile.h"
#include "iconv_jit.h"
#include "ops/igemm.h"
#include "unit.h"
#include "intgraph.h"
#include "mixed.h"
#include "onnx_export.h"
#include "options.h"
#include "qparams.h"
#include "qreport.h"
#include "quantize.h"
#include "quantize_plan.h"
#include "sha256.h"

struct qrl_recipe {
    qrl_module *mod;
    char *path;
    char sha256[2 * QC_SHA256_LEN + 1]; /* of its sources, imports included (sources_sha256) */
};

static void hex_of(const unsigned char *d, char *out)
{
    for (int i = 0; i < QC_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The recipe's provenance: SHA-256 over its files in load order (every import before its
 * importer, imports in the order written), each as its size in decimal, a newline, its bytes. */
static void sources_sha256(const qc_unit *u, char *out)
{
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    for (int i = 0; i < u->nfiles; i++) {
        const ql_source *src = u->files[i]->src;
        char len[32];
        int n = snprintf(len, sizeof len, "%zu\n", src ? src->len : (size_t)0);
        qc_sha256_update(&h, len, (size_t)n);
        if (src)
            qc_sha256_update(&h, src->text, src->len);
    }
    unsigned char d[QC_SHA256_LEN];
    qc_sha256_final(&h, d);
    hex_of(d, out);
}

/* What made the export, in its metadata (qrl dump prints it): the QRL version, the recipe's name
 * and source hash, and the calibration data: SHA-256 of the samples used (each input's first
 * `samples` rows, as raw little-endian elements, inputs in the graph's order; with the recipe's
 * validate, those it calibrated on and those it held out to judge on) and their count, and how
 * many of them validate held out. */
static qr_status provenance(qr_quantized *q, const qrl_recipe *r, const qr_tensor *calib, int ninputs, qr_error *e)
{
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    for (int i = 0; i < ninputs; i++) {
        const qr_tensor *t = &calib[i];
        int64_t used = q->samples + q->validate_samples;
        int64_t rows = t->ndim > 0 ? t->dims[0] : 1, n = used < rows ? used : rows;
        size_t row = rows > 0 ? qr_tensor_nbytes(t) / (size_t)rows : 0, len = row * (size_t)n, step = (size_t)4 << 20;
        /* a file's mapping (the CLI's .npy) is read a slice at a time, each leaving the resident set
         * once hashed (qr_data_release; nothing for data in memory): reading it whole put ResNet-18's
         * 38 MB of samples back beside the finished quantization's graphs, its peak */
        for (size_t at = 0; at < len; at += step) {
            size_t k = len - at < step ? len - at : step;
            qc_sha256_update(&h, (const char *)t->data + at, k);
            qr_data_release(t->data, at, k);
        }
    }
    unsigned char d[QC_SHA256_LEN];
    char hex[2 * QC_SHA256_LEN + 1], count[32], held[32];
    qc_sha256_final(&h, d);
    hex_of(d, hex);
    snprintf(count, sizeof count, "%lld", (long long)(q->samples + q->validate_samples));
    snprintf(held, sizeof held, "%lld", (long long)q->validate_samples);
    qr_graph *g = q->qdq;
    if (qr_graph_set_meta(g, "qrl.version", QRL_VERSION) != QR_OK ||
        qr_graph_set_meta(g, "qrl.recipe", q->recipe ? q->recipe : "") != QR_OK ||
        qr_graph_set_meta(g, "qrl.recipe_sha256", r->sha256) != QR_OK ||
        qr_graph_set_meta(g, "qrl.calibration_sha256", hex) != QR_OK ||
        qr_graph_set_meta(g, "qrl.calibration_samples", count) != QR_OK ||
        qr_graph_set_meta(g, "qrl.validate_samples", held) != QR_OK)
        return qr_errorf(e, "out of memory");
    return QR_OK;
}

/* One quantized tensor of the model, by its name there (qrl_quantized_qparams). */
typedef struct qparams_entry {
    const char *name;
    qrl_quant quant;
    float scale;       /* an activation's */
    int32_t zero;
    float *scales;     /* a weight's, one per channel (or one), malloc'd */
    int32_t *zeros;
} qparams_entry;

struct qrl_quantized {
    qr_quantized *q;
    char *recipe_path; /* recorded in the qparams JSON */
    int threads;
    qrl_model *model;  /* the integer graph's handle, made on first request */
    qrl_recipe *own;   /* the recipe a QDQ model was lowered with (qrl_model_lower_qdq) */
    qparams_entry *qp; /* every quantized tensor: the activations, then the weights (as the qparams JSON) */
    int nqp;
    int progress; /* the options' progress: the export's bars too */
};

/* q->qp from the quantizer's records, which name tensors as the model did: the activations
 * quantized (not those the recipe's fallback left in f32), then every weight and bias the QDQ
 * graph dequantizes from constants (the scales and zero points its DequantizeLinear reads). */
static int index_qparams(qrl_quantized *res)
{
    const qr_quantized *z = res->q;
    const qr_graph *g = z->qdq;
    if (!g)
        return 0; /* an MPI rank other than 0 only calibrates: nothing to index */
    res->qp = calloc((size_t)z->nlayers + (size_t)g->n_nodes + 1, sizeof *res->qp);
    if (!res->qp)
        return -1;
    for (int i = 0; i < z->nlayers; i++) {
        const qr_qlayer *l = &z->layers[i];
        if (l->fallback)
            continue;
        qparams_entry *e = &res->qp[res->nqp++];
        e->name = l->value;
        e->scale = (float)l->scale;
        e->zero = (int32_t)l->zero;
        e->quant = (qrl_quant){.dtype = qr_dtype_get(l->dtype)->onnx, .axis = -1, .count = l->dynamic ? 0 : 1,
                               .scale = l->dynamic ? NULL : &e->scale, .zero_point = l->dynamic ? NULL : &e->zero,
                               .clip_min = l->dynamic ? NAN : (double)(l->qmin - l->zero) * l->scale,
                               .clip_max = l->dynamic ? NAN : (double)(l->qmax - l->zero) * l->scale};
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        if (strcmp(n->op, "DequantizeLinear") || n->n_in < 3 || !n->in[0]->is_const || !n->in[1]->is_const)
            continue;
        const qr_tensor *s = &n->in[1]->t, *zp = n->in[2] ? &n->in[2]->t : NULL;
        int64_t count = qr_tensor_numel(s);
        qparams_entry *e = &res->qp[res->nqp++];
        e->name = n->out[0]->name;
        e->scales = malloc((size_t)count * sizeof *e->scales);
        e->zeros = calloc((size_t)count, sizeof *e->zeros);
        if (!e->scales || !e->zeros)
            return -1;
        for (int64_t k = 0; k < count; k++) {
            e->scales[k] = (float)qr_get_f64(s->data, s->dtype, k);
            if (zp && zp->data && k < qr_tensor_numel(zp))
                e->zeros[k] = (int32_t)qr_get_i64(zp->data, zp->dtype, k);
        }
        e->quant = (qrl_quant){.dtype = qr_dtype_get(n->in[0]->t.dtype)->onnx,
                               .axis = s->ndim ? (int)qr_attr_i(n, "axis", 1) : -1, .count = (int)count,
                               .scale = e->scales, .zero_point = e->zeros, .clip_min = NAN, .clip_max = NAN};
    }
    return 0;
}

static int fail_msg(char *err, size_t n, const char *fmt, const char *arg)
{
    qr_error e;
    qr_errorf(&e, fmt, arg);
    return qr_api_fail(&e, err, n);
}

/* The iconv-jit option (qr_options; qrl --iconv-jit): integer convolutions ask the compiler for
 * kernels specialized to their shape (compiler/iconv_jit.h), with the recipe's epilogue fused when
 * it has a vector form (compiler/vecmap.h). auto (the default): what the module cache holds, the
 * rest compiled in the background for later runs, so a first run costs no compile time; 1: each
 * compiled before its layer runs; 0: none; cached (qrl quantize's default): what the cache holds,
 * nothing compiled (a quantize's tries ask for kernels of graphs that never ship, and libgccjit's
 * memory would add to the quantize's peak). Every integer graph is made with a compiled recipe, so
 * registering at each compilation comes before any of them runs; the kernels are freed at exit. */
static void iconv_register(void)
{
    int mode = qr_options_get()->iconv_jit;
    qc_iconv_jit_set_background(mode == QR_ICONV_JIT_AUTO || mode == QR_ICONV_JIT_CACHED);
    qc_iconv_jit_set_compile(mode != QR_ICONV_JIT_CACHED);
    /* the epilogue's vector form over channels-last blocks: one small function per program (with
     * iconv-jit 0 too, compiled in the foreground as ever: it is one small function per recipe) */
    qr_rows_ep_set_specializer(qc_rows_ep_jit);
    int on = mode != QR_ICONV_JIT_OFF;
    qr_iconv_set_specializer(on ? qc_iconv_jit : NULL);
    qr_iconv_set_ep_specializer(on ? qc_iconv_jit_ep : NULL);
}

void qrl_shape_kernel_counts(qrl_shape_kernels *k)
{
    qc_iconv_jit_stat s;
    qc_iconv_jit_stats(&s);
    *k = (qrl_shape_kernels){.loaded = s.loaded, .compiled = s.compiled, .background = s.background, .pending = s.queued};
}

void qrl_shape_kernels_stop(void)
{
    qc_iconv_jit_stop();
}

void qrl_shape_kernels_wait(void)
{
    qc_iconv_jit_wait();
}

int qrl_recipe_compile(const char *path, int flags, FILE *diag, qrl_recipe **out, char *err, size_t errlen)
{
    *out = NULL;
    iconv_register();
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
    if (r->mod)
        sources_sha256(u, r->sha256);
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

static void sha256_tensor(qc_sha256_ctx *h, const qr_tensor *t)
{
    int64_t head[2 + QR_MAX_DIMS] = {t->dtype, t->ndim};
    memcpy(head + 2, t->dims, sizeof *t->dims * (size_t)t->ndim);
    qc_sha256_update(h, head, sizeof head);
    qc_sha256_update(h, t->data, qr_tensor_nbytes(t));
}

/* Under mpirun, before any work: every rank was given the same model (its file's bytes, or its
 * graph's initializers when it has no file), recipe (its sources), calibration data and labels
 * (shapes and bytes), and options that change the result. */
static qr_status same_inputs(const qrl_model *m, const qrl_recipe *r, const qr_tensor *c, int ni, const qr_tensor *lab,
                             const qrl_quantize_opts *o, qr_error *e)
{
    if (qr_dist_size() <= 1)
        return QR_OK;
    unsigned char d[4][QC_SHA256_LEN];
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    FILE *f = m->path ? fopen(m->path, "rb") : NULL;
    if (f) {
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            qc_sha256_update(&h, buf, n);
        fclose(f);
    } else
        for (int i = 0; i < m->g->n_values; i++)
            if (m->g->values[i]->is_const)
                sha256_tensor(&h, &m->g->values[i]->t);
    qc_sha256_final(&h, d[0]);
    qc_sha256_init(&h);
    qc_sha256_update(&h, r->sha256, strlen(r->sha256));
    qc_sha256_final(&h, d[1]);
    qc_sha256_init(&h);
    for (int i = 0; i < ni; i++)
        sha256_tensor(&h, &c[i]);
    if (lab)
        sha256_tensor(&h, lab);
    qc_sha256_final(&h, d[2]);
    char opts[512];
    int n = snprintf(opts, sizeof opts, "recipe-name=%s batch=%d calib-count=%lld labels=%d",
                     o->recipe_name ? o->recipe_name : "", o->batch, (long long)o->calib_count, lab != NULL);
    qc_sha256_init(&h);
    qc_sha256_update(&h, opts, (size_t)n);
    qc_sha256_final(&h, d[3]);
    const unsigned char *ds[4] = {d[0], d[1], d[2], d[3]};
    const char *what[4] = {"the model", "the recipe", "the calibration data", "the options"};
    return qr_dist_same(ds, what, 4, QC_SHA256_LEN, e);
}

int qrl_quantize(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                 qrl_quantized **out, char *err, size_t errlen)
{
    return qrl_quantize_flags(m, r, calib, o, 0, out, err, errlen);
}

int qrl_quantize_flags(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                       int flags, qrl_quantized **out, char *err, size_t errlen)
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
                        .threads = o->threads, .progress = o->progress, .labels = o->labels ? &lab : NULL,
                        .matmulnbits = (flags & QRL_QUANTIZE_MATMULNBITS) != 0};
    res->threads = m->threads;
    res->progress = o->progress;
    qr_status st = same_inputs(m, r, c, ni, o->labels ? &lab : NULL, o, &e);
    if (st == QR_OK)
        st = qr_quantize(m->g, c, &qo, &res->q, &e);
    if (st == QR_OK && !res->q->calib_only) /* ranks other than 0 export nothing */
        st = provenance(res->q, r, c, ni, &e);
    if (st == QR_OK && index_qparams(res) != 0)
        st = qr_errorf(&e, "out of memory");
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
    qrl_recipe_free(q->own); /* after the integer graph that calls its kernels */
    for (int i = 0; q->qp && i < q->nqp; i++) {
        free(q->qp[i].scales);
        free(q->qp[i].zeros);
    }
    free(q->qp);
    free(q->recipe_path);
    free(q);
}

qrl_model *qrl_quantized_model(qrl_quantized *q, char *err, size_t errlen)
{
    qr_error e;
    /* weight-only: no integer graph; the QDQ graph runs (its DequantizeLinear, then the f32 ops) */
    qr_graph *g = q->q->ig ? q->q->ig->g : q->q->qdq;
    if (!q->model && qr_api_model_wrap(g, q->q->ig, q->threads, &q->model, &e) != QR_OK) {
        qr_api_fail(&e, err, errlen);
        return NULL;
    }
    return q->model;
}

int qrl_quantized_save(const qrl_quantized *q, const char *path, char *err, size_t errlen)
{
    return qrl_quantized_save_external(q, path, 0, err, errlen);
}

/* The export's bar, as the quantization's phases show theirs (qr_plan_progress: on a terminal
 * only): the bytes of the model file, and of its data file when the weights go beside it. */
typedef struct export_bar {
    qr_quant_opts o;
    double t0;
    const char *file;
} export_bar;

static void export_told(void *ctx, const char *file, int64_t done, int64_t total)
{
    export_bar *b = ctx;
    if (!b->file || strcmp(b->file, file)) /* a new file: its own bar and rate */
        b->file = file, b->t0 = qr_plan_now_ms();
    qr_plan_progress(&b->o, !strcmp(file, "data") ? "export data" : "export   ", done, total, b->t0);
}

int qrl_quantized_save_external(const qrl_quantized *q, const char *path, int external, char *err, size_t errlen)
{
    qr_error e;
    export_bar bar = {.o = {.progress = 1}};
    qr_export_progress p = {export_told, &bar};
    if (qr_onnx_save_progress(q->q->qdq, path, external, QR_ONNX_MAX_PROTO_BYTES, q->progress ? &p : NULL, &e) !=
        QR_OK)
        return qr_api_fail(&e, err, errlen);
    return 0;
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

int qrl_quantized_write_transformed(const qrl_quantized *q, const char *path, char *err, size_t errlen)
{
    qr_error e;
    if (!q->q->transformed)
        return qr_api_fail((qr_errorf(&e, "the recipe has no transform: there is no transformed model to write"), &e),
                           err, errlen);
    return qr_onnx_save(q->q->transformed, path, &e) == QR_OK ? 0 : qr_api_fail(&e, err, errlen);
}

int qrl_model_lower_qdq(qrl_model *m, const char *recipe, FILE *diag, qrl_quantized **out, char *err, size_t errlen)
{
    qr_error e;
    char buf[4096], rerr[1024];
    const char *path = m->path ? m->path : "the model";
    *out = NULL;
    if (!qr_qdq_strip(m->g))
        return 0; /* nothing quantized with QuantizeLinear/DequantizeLinear pairs */
    /* the graph changed under the executor: one of the old graph must not run it */
    if (qr_api_model_exec(m, m->threads, m->profile, &e) != QR_OK) {
        qr_exec_free(m->x);
        m->x = NULL;
        return qr_api_fail(&e, err, errlen);
    }
    if (!recipe) {
        char *stdlib = qc_default_stdlib();
        snprintf(buf, sizeof buf, "%s/qdq.qrl", stdlib ? stdlib : "stdlib");
        free(stdlib);
        recipe = buf;
    }
    qrl_quantized *res = calloc(1, sizeof *res);
    if (!res || !(res->recipe_path = strdup(recipe))) {
        qrl_quantized_free(res);
        return fail_msg(err, errlen, "%s", "out of memory");
    }
    if (qrl_recipe_compile(recipe, 0, diag, &res->own, rerr, sizeof rerr) != 0) {
        qr_errorf(&e, "%s: the recipe for QDQ models (%s) does not compile", path, recipe);
        qrl_quantized_free(res);
        return qr_api_fail(&e, err, errlen);
    }
    qr_quant_opts o = {.module = res->own->mod, .from_file = 1};
    res->threads = m->threads;
    if (qr_quantize(m->g, NULL, &o, &res->q, &e) != QR_OK) {
        qr_error_prefix(&e, "%s: lowering its QDQ groups", path);
        qrl_quantized_free(res);
        return qr_api_fail(&e, err, errlen);
    }
    if (index_qparams(res) != 0) {
        qrl_quantized_free(res);
        return fail_msg(err, errlen, "%s", "out of memory");
    }
    *out = res;
    return 0;
}

void qrl_quantized_summary(const qrl_quantized *q, qrl_quant_summary *out)
{
    const qr_quantized *z = q->q;
    static const qr_intgraph none; /* weight-only: no integer graph */
    const qr_intgraph *ig = z->ig ? z->ig : &none;
    *out = (qrl_quant_summary){
        .nodes_pattern = z->nodes_pattern, .nodes_affine = z->nodes_affine, .nodes_float = z->nodes_float,
        .activations = z->nlayers - z->ndynamic, .dynamic = z->ndynamic, .weights = z->weights, .fallbacks = z->fallbacks,
        .kernels = ig->kernels, .lookups = ig->lookups, .int_ops = ig->int_ops,
        .requants = ig->requants, .islands = ig->islands, .samples = z->samples, .calib_ms = z->calib_ms,
        .fp32_ms = z->fp32_ms, .output_sqnr = z->output_sqnr, .output_nonfinite = z->output_nonfinite,
        .validate_samples = z->validate_samples, .output_sqnr_calib = z->output_sqnr_calib,
        .output_cosine = z->output_cosine, .output_agreement = z->output_agreement,
        .macs = z->macs, .macs_int = z->macs_int, .top1_fp32 = z->top1_fp32, .top1_int8 = z->top1_int8,
        .top1_samples = z->top1_samples};
}

int qrl_quantized_widened(const qrl_quantized *q)
{
    return q->q->widened;
}

int qrl_quantized_search_given_up(const qrl_quantized *q)
{
    return q->q->gave_up;
}

int qrl_quantized_idle_to_f32(const qrl_quantized *q)
{
    return q->q->idle;
}

int qrl_quantized_batch(const qrl_quantized *q)
{
    return q->q->batch;
}

void qrl_quantized_calibrate_figure(const qrl_quantized *q, int64_t *figure, int64_t *fp32)
{
    if (figure)
        *figure = q->q->calib_figure_samples;
    if (fp32)
        *fp32 = q->q->fp32_samples;
}

int qrl_quantized_weight_only(const qrl_quantized *q)
{
    return !q->q->ig;
}

void qrl_quantized_output_figures(const qrl_quantized *q, int *n_outputs, double *pooled, double *worst,
                                  const char **worst_name, const char **samples_fn, double *energy)
{
    const qr_quantized *z = q->q;
    if (n_outputs)
        *n_outputs = z->n_outputs;
    if (pooled)
        *pooled = z->output_sqnr_pooled;
    if (worst)
        *worst = z->output_sqnr_worst;
    if (worst_name)
        *worst_name = z->output_worst;
    if (samples_fn)
        *samples_fn = z->output_samples;
    if (energy)
        *energy = z->output_sqnr_energy;
}

void qrl_quantized_accumulator(const qrl_quantized *q, int *bits, int *saturate, int64_t *sums, int64_t *overflows,
                               int *layers, int *overflowing)
{
    const qr_quantized *z = q->q;
    int64_t s = 0, o = 0;
    int nl = 0, no = 0;
    for (int i = 0; i < z->nlayers; i++)
        if (z->layers[i].acc_on) {
            nl++;
            no += z->layers[i].acc_overflows > 0;
            s += z->layers[i].acc_sums;
            o += z->layers[i].acc_overflows;
        }
    if (bits)
        *bits = z->acc_bits;
    if (saturate)
        *saturate = z->acc_saturate;
    if (sums)
        *sums = s;
    if (overflows)
        *overflows = o;
    if (layers)
        *layers = nl;
    if (overflowing)
        *overflowing = no;
}

void qrl_quantized_weight_bytes(const qrl_quantized *q, int64_t *bytes, int64_t *f32_bytes, int *weights_4bit)
{
    const qr_quantized *z = q->q;
    if (bytes)
        *bytes = z->weight_bytes;
    if (f32_bytes)
        *f32_bytes = z->weight_f32_bytes;
    if (weights_4bit)
        *weights_4bit = z->weights_4bit;
}

int qrl_quantized_layer(const qrl_quantized *q, int i, qrl_layer_info *out)
{
    if (i < 0 || i >= q->q->nlayers)
        return 1;
    const qr_qlayer *l = &q->q->layers[i];
    *out = (qrl_layer_info){.value = l->value, .sqnr = l->sqnr, .sqnr_int = l->sqnr_int, .top1_delta = l->top1_delta};
    return 0;
}

int qrl_quantized_layer_acc(const qrl_quantized *q, int i, int64_t *sums, int64_t *overflows)
{
    if (i < 0 || i >= q->q->nlayers)
        return 1;
    const qr_qlayer *l = &q->q->layers[i];
    *sums = l->acc_on ? l->acc_sums : -1;
    *overflows = l->acc_on ? l->acc_overflows : -1;
    return 0;
}

int qrl_quantized_layer_effect(const qrl_quantized *q, int i, double *effect)
{
    if (i < 0 || i >= q->q->nlayers)
        return 1;
    *effect = q->q->layers[i].effect;
    return 0;
}

int qrl_quantized_phase(const qrl_quantized *q, int i, qrl_quant_phase *out)
{
    if (i < 0 || i >= q->q->nphases)
        return 1;
    const qr_phase_time *p = &q->q->phases[i];
    *out = (qrl_quant_phase){.name = p->name, .seconds = p->ms / 1e3, .cpu_seconds = p->cpu_ms / 1e3};
    return 0;
}

int qrl_quantized_phase_runs(const qrl_quantized *q, int i, int64_t *node_samples)
{
    if (i < 0 || i >= q->q->nphases)
        return 1;
    *node_samples = q->q->phases[i].node_samples;
    return 0;
}

void qrl_quantized_runs(const qrl_quantized *q, int64_t *pass, int64_t *total)
{
    *pass = q->q->pass_node_samples;
    *total = q->q->node_samples;
}

void qrl_quantized_runs_split(const qrl_quantized *q, int64_t *calibrate_pass, int64_t *calibrate,
                              int64_t *validate_pass, int64_t *validate, int *ranked)
{
    *calibrate_pass = q->q->calibrate_pass_node_samples, *calibrate = q->q->calibrate_node_samples;
    *validate_pass = q->q->validate_pass_node_samples, *validate = q->q->validate_node_samples;
    *ranked = q->q->ranked;
}

int qrl_quantized_phase_runs_validate(const qrl_quantized *q, int i, int64_t *validate)
{
    if (i < 0 || i >= q->q->nphases)
        return 1;
    *validate = q->q->phases[i].validate_node_samples;
    return 0;
}

int qrl_quantized_phase_peak(const qrl_quantized *q, int i, int64_t *bytes)
{
    if (i < 0 || i >= q->q->nphases)
        return 1;
    *bytes = q->q->phases[i].peak_bytes;
    return 0;
}

int qrl_quantized_effects_copied(const qrl_quantized *q, int64_t *bytes)
{
    *bytes = q->q->effects_copied_bytes;
    return 0;
}

int qrl_quantized_run_samples(const qrl_quantized *q, int64_t *effects, int64_t *shipped)
{
    *effects = q->q->effects_run_samples;
    *shipped = q->q->shipped_run_samples;
    return 0;
}

int qrl_quantized_search_try(const qrl_quantized *q, int i, qrl_search_try *out)
{
    if (i < 0 || i >= q->q->ntries)
        return 1;
    const qr_search_try *t = &q->q->tries[i];
    *out = (qrl_search_try){.fallen_back = t->fallen_back, .samples = t->samples, .holds = t->holds,
                            .output_sqnr = t->output_sqnr};
    return 0;
}

int qrl_quantized_search_try_ran(const qrl_quantized *q, int i, int64_t *out)
{
    if (i < 0 || i >= q->q->ntries)
        return 1;
    *out = q->q->tries[i].ran;
    return 0;
}

int qrl_quantized_search_try_widened(const qrl_quantized *q, int i, int *out)
{
    if (i < 0 || i >= q->q->ntries)
        return 1;
    *out = q->q->tries[i].widened;
    return 0;
}

int qrl_quantized_search_try_dynamic(const qrl_quantized *q, int i, int *out)
{
    if (i < 0 || i >= q->q->ntries)
        return 1;
    *out = q->q->tries[i].dynamic;
    return 0;
}

const char *qrl_quantized_tensor(const qrl_quantized *q, int i)
{
    return i >= 0 && i < q->nqp ? q->qp[i].name : NULL;
}

int qrl_quantized_qparams(const qrl_quantized *q, const char *name, qrl_quant *out)
{
    for (int i = 0; name && i < q->nqp; i++)
        if (!strcmp(q->qp[i].name, name)) {
            *out = q->qp[i].quant;
            return 0;
        }
    return 1;
}

const char *qrl_quantized_note(const qrl_quantized *q, int i)
{
    return i >= 0 && i < q->q->nnotes ? q->q->notes[i] : NULL;
}

const char *qrl_quantized_step(const qrl_quantized *q, int i, double *calibrate_db, double *validate_db)
{
    if (i < 0 || i >= q->q->nsteps)
        return NULL;
    *calibrate_db = q->q->steps[i].calibrate_db;
    *validate_db = q->q->steps[i].validate_db;
    return q->q->steps[i].name;
}

int qrl_quantized_mixed(const qrl_quantized *q, qrl_mixed_info *out)
{
    const qr_mixed_info *m = q->q->mixed;
    if (!m)
        return 1;
    *out = (qrl_mixed_info){.layers = m->nlayers, .choices = m->nchoices, .front = m->front,
                            .budget_kind = m->budget_kind, .budget = m->budget, .choose_samples = m->choose_samples,
                            .heldout_samples = m->heldout_samples, .points = m->npoints};
    return 0;
}

int qrl_quantized_mixed_measured_samples(const qrl_quantized *q, int64_t *out)
{
    const qr_mixed_info *m = q->q->mixed;
    if (!m)
        return 1;
    *out = m->measured_samples;
    return 0;
}

const char *qrl_quantized_mixed_choice(const qrl_quantized *q, int i)
{
    const qr_mixed_info *m = q->q->mixed;
    return m && i >= 0 && i < m->nchoices ? m->choices[i] : NULL;
}

int qrl_quantized_mixed_point(const qrl_quantized *q, int i, qrl_mixed_point *out)
{
    const qr_mixed_info *m = q->q->mixed;
    if (!m || i < 0 || i >= m->npoints)
        return 1;
    const qr_mixed_point *p = &m->points[i];
    *out = (qrl_mixed_point){.bytes = p->bytes, .bits = p->bits, .predicted = p->predicted, .measured = p->measured,
                             .chosen = p->chosen, .uniform = p->uniform};
    for (int l = 0; l < m->nlayers; l++)
        if (p->pick[l] < 8)
            out->counts[p->pick[l]]++;
    return 0;
}

int qrl_quantized_mixed_layer(const qrl_quantized *q, int i, const char **weight, int *choice)
{
    const qr_mixed_info *m = q->q->mixed;
    if (!m || i < 0 || i >= m->nlayers)
        return 1;
    *weight = m->layers[i].name;
    *choice = -1;
    for (int k = 0; k < m->npoints; k++)
        if (m->points[k].chosen)
            *choice = m->points[k].pick[i];
    return 0;
}

int qrl_recipe_check(const char *path, int flags, FILE *diag, FILE *ast, qrl_check_stats *st, char *err,
                     size_t errlen)
{
    char *stdlib = qc_default_stdlib();
    qc_unit *u = qc_unit_new(stdlib);
    free(stdlib);
    memset(st, 0, sizeof *st);
    if (!u)
        return fail_msg(err, errlen, "%s", "out of memory");
    qc_file *root = qc_unit_load(u, path);
    if (root && !u->diags.errors)
        qc_check(u); /* after syntax errors the checker would mostly repeat them */
    qc_stats cs = {.cache_hit = -1};
    if (root && !u->diags.errors) {
        qc_options o = {.no_cache = flags & QRL_RECIPE_NO_CACHE, .check_only = 1};
        qr_module_free(qc_compile(u, &o, &cs));
    }
    if (ast && root && root->ast)
        ql_ast_dump(root->ast, ast);
    if (diag)
        ql_diags_print(&u->diags, diag);
    *st = (qrl_check_stats){.errors = u->diags.errors, .files = u->nfiles, .lex_ms = qc_unit_lex_ms(u),
                            .parse_ms = u->t_parse, .check_ms = u->t_check, .cache_hit = cs.cache_hit,
                            .cache_rebuilt = cs.cache_rebuilt, .jit_ms = cs.t_jit, .load_ms = cs.t_load,
                            .reach = cs.reach, .nparts = cs.nparts};
    _Static_assert(QRL_CHECK_MAX_PARTS >= QC_MAX_PARTS, "qrl_check_stats holds every part");
    for (int k = 0; k < cs.nparts; k++) {
        const qc_part_stats *p = &cs.parts[k];
        st->parts[k] = (qrl_check_part){.name = p->name, .items = p->items, .opt_level = p->opt_level,
                                        .validated = p->validated, .cache_hit = p->cache_hit,
                                        .cache_rebuilt = p->cache_rebuilt, .jit_ms = p->t_jit, .load_ms = p->t_load};
    }
    qc_unit_free(u);
    return 0;
}
