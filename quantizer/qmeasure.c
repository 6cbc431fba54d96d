/* Measuring a quantized model against f32, and the recipe's fallback (see
 * quantize_plan.h). Three measurements, each on up to 256 calibration
 * samples run through f32 and the quantized graph side by side:
 *
 *   cumulative  each quantized tensor with all upstream quantization applied
 *               (what the report shows as the tensor's SQNR);
 *   local       each tensor's own error: the quantized graph runs with every
 *               value replaced, as soon as it is computed, by its f32 value
 *               (quantized where the tensor is), so a layer sees f32 inputs
 *               and only its own quantization counts: the layer's
 *               sensitivity, which ranks the layers for fallback;
 *   outputs     the model's outputs, through the integer graph that ships.
 *
 * The fallback reverts the layers with the worst local SQNR first, until
 * the recipe's condition holds for none of those left (a condition on
 * output_sqnr is a search over how many to revert) and the outputs are
 * finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "intgraph.h"
#include "layout.h"
#include "quantize_plan.h"

/* The recipe's measure_samples (default 256): calibration samples each measurement runs. */
static int64_t measure_samples(const qr_qctx *q)
{
    const qr_setting *s = qr_recipe_setting(q->r, "measure_samples");
    int64_t n = s ? strtoll(s->type, NULL, 10) : 256;
    return n > 0 ? n : 256;
}

double qr_plan_sqnr(const qr_slot *s)
{
    if (s->se2 <= 0)
        return INFINITY;
    return 10.0 * log10(s->sx2 / s->se2);
}

double qr_plan_local_sqnr(const qr_slot *s)
{
    if (s->le2 <= 0)
        return s->ln > 0 ? INFINITY : NAN;
    return 10.0 * log10(s->lx2 / s->le2);
}

typedef struct measure {
    qr_qctx *q;
    qr_tensor *ref; /* by value id of the original graph: its f32 value in the current batch */
    int pass;       /* 0: recording f32, 1: comparing the quantized model */
    int local;      /* pass 1 replaces each value by its f32 value (quantized where it is) */
    const qr_value **ival; /* by slot: its integers in the integer graph, or NULL */
    /* by slot: [0] 1 when ival holds them channels last (quantizer/layout.h), [1..3] its H, W, C as
     * the graph knows them (for a flattened twin, whose tensor does not say) */
    int64_t (*ival_nhwc)[4];
} measure;

/* v is value v->id of the original graph (the quantized graphs keep ids and names of the originals). */
static int original(const qr_qctx *q, const qr_value *v)
{
    return v->id < q->g->n_values && !strcmp(v->name, q->g->values[v->id]->name);
}

static void record(measure *ms, const qr_value *v, const qr_tensor *t)
{
    qr_tensor *r = &ms->ref[v->id];
    qr_tensor_free(r);
    *r = *t;
    r->data = NULL;
    qr_error e;
    if (qr_tensor_alloc(r, &e) == QR_OK)
        memcpy(r->data, t->data, qr_tensor_nbytes(t));
}

static void observe_slots(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    measure *ms = user;
    qr_qctx *q = ms->q;
    if (!original(q, v) || t->dtype != QR_F32)
        return;
    int si = q->slot_of[v->id];
    if (ms->pass == 0) {
        if (si >= 0 || ms->local)
            record(ms, v, t);
        return;
    }
    const qr_tensor *r = &ms->ref[v->id];
    int64_t cnt = qr_tensor_numel(t);
    if (!r->data || qr_tensor_numel(r) != cnt)
        return;
    const float *a = r->data;
    float *b = t->data;
    if (si < 0 || q->slots[si].fallback) {
        if (ms->local) /* what f32 nodes compute from quantized inputs is not this layer's error */
            memcpy(b, a, qr_tensor_nbytes(t));
        return;
    }
    qr_slot *s = &q->slots[si];
    if (ms->local) {
        for (int64_t i = 0; i < cnt; i++) {
            double d = (double)a[i] - (double)b[i];
            s->lx2 += (double)a[i] * a[i];
            s->le2 += d * d;
        }
        s->ln += (double)cnt;
        qr_plan_fake_quant(a, b, cnt, (float)s->qp.scale, s->qp.zero, s->qt.qmin, s->qt.qmax);
        return;
    }
    double lo = (double)(s->qt.qmin - s->qp.zero) * s->qp.scale, hi = (double)(s->qt.qmax - s->qp.zero) * s->qp.scale;
    for (int64_t i = 0; i < cnt; i++) {
        double d = (double)a[i] - (double)b[i];
        s->sx2 += (double)a[i] * a[i];
        s->se2 += d * d;
        s->clipped += a[i] < lo || a[i] > hi;
    }
    s->n += (double)cnt;
}

/* One integer v of a slot, dequantized, against its f32 value a. */
static inline void int_error(qr_slot *s, float a, int64_t v)
{
    double d = (double)a - (double)(v - s->qp.zero) * s->qp.scale;
    s->isx2 += (double)a * a;
    s->ise2 += d * d;
}

/* The integer graph's integers of a slot, dequantized, against the f32 value. */
static void observe_ints(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    measure *ms = user;
    qr_qctx *q = ms->q;
    for (int si = 0; si < q->nslots; si++) {
        if (ms->ival[si] != v)
            continue;
        qr_slot *s = &q->slots[si];
        const qr_tensor *r = &ms->ref[s->value];
        int64_t cnt = qr_tensor_numel(t);
        if (!r->data || qr_tensor_numel(r) != cnt || !qr_dtype_is_int(t->dtype))
            return;
        const float *a = r->data;
        int turned = ms->ival_nhwc[si][0] == 1;
        int64_t nhwc[4] = {t->dims[0], ms->ival_nhwc[si][1], ms->ival_nhwc[si][2], ms->ival_nhwc[si][3]};
        if (turned && t->ndim == 4)
            memcpy(nhwc, t->dims, sizeof nhwc);
        else if (turned && (t->ndim != 2 || nhwc[1] <= 0 || nhwc[2] <= 0 || nhwc[3] <= 0))
            return; /* a flattened twin of unknown dims: not measured */
        if (!turned) {
            for (int64_t i = 0; i < cnt; i++)
                int_error(s, a[i], qr_get_i64(t->data, t->dtype, i));
            return;
        }
        /* channels last: element (n, c, p) of the f32 value is (n, p, c) of the integers */
        int64_t nc = nhwc[3], hw = nhwc[1] * nhwc[2];
        for (int64_t b = 0; b < nhwc[0]; b++)
            for (int64_t c = 0; c < nc; c++)
                for (int64_t px = 0; px < hw; px++)
                    int_error(s, a[(b * nc + c) * hw + px], qr_get_i64(t->data, t->dtype, (b * hw + px) * nc + c));
        return;
    }
}

/* Runs f32 (recording values) and `other` (kernel_user: user, observed by obs) side by side. When
 * the samples are one batch, the f32 values the local measurement recorded are kept (those of
 * slots) and the measurements after it read them instead of running f32 again: the same values. */
static qr_status side_by_side(measure *ms, const qr_graph *other, void *user, qr_observer_fn obs,
                              const qr_tensor *calib, int64_t count, int batch)
{
    qr_qctx *q = ms->q;
    int64_t n = count < measure_samples(q) ? count : measure_samples(q);
    int one = n <= batch, kept = one && q->f32_refs && q->f32_refs_n == n && !ms->local;
    ms->ref = kept ? q->f32_refs : calloc((size_t)q->g->n_values + 1, sizeof *ms->ref);
    qr_tensor *in = calloc((size_t)q->g->n_inputs + 1, sizeof *in);
    qr_status st = ms->ref && in ? QR_OK : qr_errorf(q->e, "out of memory");
    qr_exec_opts o32 = {.threads = q->o->threads, .observer = observe_slots, .observer_user = ms};
    qr_exec_opts oo = {.threads = q->o->threads, .observer = obs, .observer_user = ms, .kernel_user = user};
    qr_exec *x32 = NULL, *xo = NULL;
    if (st == QR_OK && !kept)
        st = qr_exec_new(q->g, &o32, &x32, q->e);
    if (st == QR_OK)
        st = qr_exec_new(other, &oo, &xo, q->e);
    for (int64_t at = 0; st == QR_OK && at < n; at += batch) {
        int64_t b = n - at < batch ? n - at : batch;
        qr_plan_slice_inputs(calib, q->g->n_inputs, at, b, in);
        ms->pass = 0;
        if (!kept)
            st = qr_plan_run_once(x32, q->g, in, q->e);
        ms->pass = 1;
        if (st == QR_OK)
            st = qr_plan_run_once(xo, other, in, q->e);
    }
    qr_exec_free(x32);
    qr_exec_free(xo);
    if (st == QR_OK && one && ms->local && ms->ref) { /* kept for the measurements after it: slots only */
        qr_measure_drop_refs(q);
        for (int i = 0; i < q->g->n_values; i++)
            if (q->slot_of[i] < 0)
                qr_tensor_free(&ms->ref[i]);
        q->f32_refs = ms->ref, q->f32_refs_n = n;
    } else if (!kept) {
        for (int i = 0; ms->ref && i < q->g->n_values; i++)
            qr_tensor_free(&ms->ref[i]);
        free(ms->ref);
    }
    ms->ref = NULL;
    free(in);
    return st;
}

void qr_measure_drop_refs(qr_qctx *q)
{
    for (int i = 0; q->f32_refs && i < q->g->n_values; i++)
        qr_tensor_free(&q->f32_refs[i]);
    free(q->f32_refs);
    q->f32_refs = NULL;
    q->f32_refs_n = 0;
}

qr_status qr_measure_slots(qr_qctx *q, const qr_graph *qdq, const qr_tensor *calib, int64_t count)
{
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].sx2 = q->slots[i].se2 = q->slots[i].n = q->slots[i].clipped = 0;
    measure ms = {.q = q};
    return side_by_side(&ms, qdq, NULL, observe_slots, calib, count, qr_plan_batch(q));
}

qr_status qr_measure_local(qr_qctx *q, const qr_graph *qdq, const qr_tensor *calib, int64_t count)
{
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].lx2 = q->slots[i].le2 = q->slots[i].ln = 0;
    /* in calibration's batches: a model may mix samples across its batch (every f32 value of a batch is kept) */
    measure ms = {.q = q, .local = 1};
    return side_by_side(&ms, qdq, NULL, observe_slots, calib, count, qr_plan_batch(q));
}

qr_status qr_measure_ints(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count)
{
    measure ms = {.q = q};
    ms.ival = calloc((size_t)q->nslots + 1, sizeof *ms.ival);
    ms.ival_nhwc = calloc((size_t)q->nslots + 1, sizeof *ms.ival_nhwc);
    if (!ms.ival || !ms.ival_nhwc) {
        free(ms.ival);
        free(ms.ival_nhwc);
        return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < q->nslots; i++) {
        int qv = q->qval[q->slots[i].value];
        q->slots[i].isx2 = q->slots[i].ise2 = 0;
        if (qv < 0 || q->slots[i].fallback)
            continue;
        const char *name = res->qdq->values[qv]->name;
        int64_t dims[4];
        const qr_value *v = qr_graph_find(res->ig->g, name), *twin = qr_layout_twin(res->ig->g, name, dims);
        ms.ival[i] = v;
        if (twin && (!v || !v->producer)) { /* only its channels-last form is computed */
            ms.ival[i] = twin;
            ms.ival_nhwc[i][0] = 1;
            memcpy(ms.ival_nhwc[i] + 1, dims + 1, 3 * sizeof *dims);
        }
    }
    qr_status st = side_by_side(&ms, res->ig->g, res->ig, observe_ints, calib, count, qr_plan_batch(q));
    free(ms.ival);
    free(ms.ival_nhwc);
    return st;
}

/* ------------------------------------------------------------ outputs */

/* The f32 model's outputs on the measured samples, kept for every comparison; and, seen on the
 * way, each value's elements per sample and last dimension (for MAC counts). */
typedef struct outref {
    qr_qctx *q;
    int64_t n, batch;
    int nbatches;
    qr_tensor *out; /* [nbatches][n_outputs] */
    double *per_sample;  /* by value id */
    int64_t *last;       /* by value id: the last dimension */
    int64_t cur_b;
} outref;

static void observe_shapes(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    outref *o = user;
    if (!original(o->q, v) || o->cur_b <= 0)
        return;
    o->per_sample[v->id] = (double)qr_tensor_numel(t) / (double)o->cur_b;
    o->last[v->id] = t->ndim > 0 ? t->dims[t->ndim - 1] : 1;
}

static void outref_free(outref *o)
{
    for (int i = 0; o->out && i < o->nbatches * o->q->g->n_outputs; i++)
        qr_tensor_free(&o->out[i]);
    free(o->out);
    free(o->per_sample);
    free(o->last);
    memset(o, 0, sizeof *o);
}

static qr_status outref_init(outref *o, qr_qctx *q, const qr_tensor *calib, int64_t count)
{
    const qr_graph *g = q->g;
    memset(o, 0, sizeof *o);
    o->q = q;
    o->n = count < measure_samples(q) ? count : measure_samples(q);
    o->batch = qr_plan_batch(q);
    o->nbatches = (int)((o->n + o->batch - 1) / o->batch);
    o->out = calloc((size_t)(o->nbatches * g->n_outputs) + 1, sizeof *o->out);
    o->per_sample = calloc((size_t)g->n_values + 1, sizeof *o->per_sample);
    o->last = calloc((size_t)g->n_values + 1, sizeof *o->last);
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_exec_opts eo = {.threads = q->o->threads, .observer = observe_shapes, .observer_user = o};
    qr_exec *x = NULL;
    qr_status st = o->out && o->per_sample && o->last && in ? qr_exec_new(q->ref ? q->ref : g, &eo, &x, q->e)
                                                            : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < o->nbatches; k++) {
        int64_t at = k * o->batch, b = o->n - at < o->batch ? o->n - at : o->batch;
        qr_plan_slice_inputs(calib, g->n_inputs, at, b, in);
        o->cur_b = b;
        for (int i = 0; i < g->n_inputs; i++) /* no node produces them: their shapes as given (symbolic ones) */
            observe_shapes(o, NULL, g->inputs[i], &in[i]);
        st = qr_exec_run(x, in, &o->out[k * g->n_outputs], q->e);
    }
    qr_exec_free(x);
    free(in);
    if (st != QR_OK)
        outref_free(o);
    return st;
}

/* The SQNR of graph's outputs against f32 over all outputs' elements, and the elements that are
 * not finite where f32 is. */
typedef struct out_metrics {
    double sqnr, cosine, agreement;
    int64_t nonfinite;
} out_metrics;

/* Row r (the last axis, n long) of a and of b: whether their largest elements are at the same place. */
static int same_argmax(const qr_tensor *a, const qr_tensor *b, int64_t r, int64_t n)
{
    int64_t ia = 0, ib = 0;
    for (int64_t k = 1; k < n; k++) {
        if (qr_get_f64(a->data, a->dtype, r * n + k) > qr_get_f64(a->data, a->dtype, r * n + ia))
            ia = k;
        if (qr_get_f64(b->data, b->dtype, r * n + k) > qr_get_f64(b->data, b->dtype, r * n + ib))
            ib = k;
    }
    return ia == ib;
}

static qr_status measure_outputs(qr_qctx *q, const outref *o, const qr_graph *graph, void *user,
                                 const qr_tensor *calib, int nbatches, out_metrics *mt)
{
    const qr_graph *g = q->g;
    double sx2 = 0, se2 = 0, sv2 = 0, sxv = 0;
    int64_t rows = 0, agree = 0, nf = 0;
    int64_t *nonfinite = &nf;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    qr_exec_opts eo = {.threads = q->o->threads, .kernel_user = user};
    qr_exec *x = NULL;
    qr_status st = in && out ? qr_exec_new(graph, &eo, &x, q->e) : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < nbatches && k < o->nbatches; k++) {
        int64_t at = k * o->batch, b = o->n - at < o->batch ? o->n - at : o->batch;
        qr_plan_slice_inputs(calib, g->n_inputs, at, b, in);
        if ((st = qr_exec_run(x, in, out, q->e)) != QR_OK)
            break;
        for (int j = 0; j < g->n_outputs; j++) {
            const qr_tensor *r = &o->out[k * g->n_outputs + j], *t = &out[j];
            int64_t cnt = qr_tensor_numel(r);
            if (cnt == qr_tensor_numel(t) && qr_dtype_is_float(r->dtype) && qr_dtype_is_float(t->dtype))
                for (int64_t i = 0; i < cnt; i++) {
                    double a = qr_get_f64(r->data, r->dtype, i), v = qr_get_f64(t->data, t->dtype, i);
                    if (!isfinite(a))
                        continue;
                    if (!isfinite(v)) {
                        (*nonfinite)++;
                        continue;
                    }
                    sx2 += a * a;
                    se2 += (a - v) * (a - v);
                    sv2 += v * v;
                    sxv += a * v;
                }
            int64_t n = r->ndim > 0 ? r->dims[r->ndim - 1] : 1;
            if (cnt == qr_tensor_numel(t) && n > 1 && cnt % n == 0)
                for (int64_t row = 0; row < cnt / n; row++, rows++)
                    agree += same_argmax(r, t, row, n);
            qr_tensor_free(&out[j]);
        }
    }
    qr_exec_free(x);
    free(in);
    free(out);
    mt->nonfinite = nf;
    mt->sqnr = nf ? -INFINITY : se2 <= 0 ? INFINITY : 10.0 * log10(sx2 / se2);
    mt->cosine = nf ? -1 : sx2 > 0 && sv2 > 0 ? sxv / sqrt(sx2 * sv2) : sx2 == sv2 ? 1 : 0;
    mt->agreement = nf ? 0 : rows ? (double)agree / (double)rows : 1;
    return st;
}

/* ------------------------------------------------------------ fallback */

/* The QDQ and integer graphs for the slots not (yet) fallen back; res->qdq and res->ig replaced. */
static qr_status rebuild(qr_qctx *q, qr_quantized *res)
{
    qr_graph_free(res->qdq);
    qr_intgraph_free(res->ig);
    res->qdq = NULL;
    res->ig = NULL;
    res->weights = 0;
    qr_status st = qr_plan_build_qdq(q, res);
    if (st == QR_OK && (st = qr_intgraph_build(q, res->qdq, &res->ig, q->e)) != QR_OK)
        qr_error_prefix(q->e, "recipe '%s'", q->r->name);
    return st;
}

typedef struct ranked {
    int slot;
    double sqnr;   /* local: the layer alone, f32 inputs */
    double effect; /* the outputs' SQNR with this layer alone quantized */
} ranked;

static int by_sqnr(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    /* NaN (never measured) last */
    if (isnan(x->sqnr) != isnan(y->sqnr))
        return isnan(x->sqnr) ? 1 : -1;
    return x->sqnr < y->sqnr ? -1 : x->sqnr > y->sqnr ? 1 : x->slot - y->slot;
}

static int by_effect(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (isnan(x->effect) != isnan(y->effect))
        return isnan(x->effect) ? 1 : -1;
    if (x->effect != y->effect && !isnan(x->effect))
        return x->effect < y->effect ? -1 : 1;
    return by_sqnr(a, b);
}

/* Samples for each layer's effect on the outputs: one forward pass of the
 * QDQ simulation per layer, so a few. */
/* The recipe's effect_samples (default 8): samples each layer's effect on the outputs is measured on. */
static int64_t effect_samples(const qr_qctx *q)
{
    const qr_setting *s = qr_recipe_setting(q->r, "effect_samples");
    int64_t n = s ? strtoll(s->type, NULL, 10) : 8;
    return n > 0 ? n : 8;
}

/* Each ranked layer's effect on the model's outputs when it alone is quantized
 * (the QDQ simulation, every other layer in f32). Local SQNR ranks the victims
 * of amplification last: on PP-OCR det the 93 worst layers by local SQNR left
 * the outputs at 7 dB, and the ones that decided them ranked 140th to 163rd. */
static qr_status measure_effects(qr_qctx *q, const outref *o, const qr_tensor *calib, ranked *rk, int nr)
{
    unsigned char *was = calloc((size_t)q->nslots + 1, 1);
    if (!was)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++)
        was[i] = (unsigned char)q->slots[i].fallback;
    int nb = (int)((effect_samples(q) + o->batch - 1) / o->batch);
    qr_status st = QR_OK;
    for (int r = 0; st == QR_OK && r < nr; r++) {
        for (int k = 0; k < q->nslots; k++)
            q->slots[k].fallback = k != rk[r].slot;
        qr_quantized one = {0};
        out_metrics mt = {0};
        if ((st = qr_plan_build_qdq(q, &one)) == QR_OK)
            st = measure_outputs(q, o, one.qdq, NULL, calib, nb, &mt);
        rk[r].effect = mt.nonfinite ? -INFINITY : mt.sqnr;
        qr_graph_free(one.qdq);
    }
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].fallback = was[i];
    free(was);
    return st;
}

/* The fallback's progress: its measurements as steps of an estimate made up front (the binary
 * search's log2 steps; fewer when the first tries meet the recipe). */
typedef struct fb_progress {
    const qr_quant_opts *o;
    int64_t done, total;
    double t0;
} fb_progress;

static void fb_step(fb_progress *p)
{
    p->done++;
    if (p->done > p->total - 1)
        p->total = p->done + 1;
    qr_plan_progress(p->o, "fallback ", p->done, p->total, p->t0);
}

/* With the first k ranked slots fallen back (plus none else), the integer graph's outputs; holds:
 * the outputs are finite and the recipe's condition holds for no slot still quantized. */
static qr_status try_k(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, const ranked *rk,
                       int nr, int k, int *holds)
{
    for (int i = 0; i < nr; i++)
        q->slots[rk[i].slot].fallback = i < k;
    qr_status st = rebuild(q, res);
    out_metrics mt = {0};
    if (st == QR_OK)
        st = measure_outputs(q, o, res->ig->g, res->ig, calib, o->nbatches, &mt);
    if (st != QR_OK)
        return st;
    res->output_sqnr = mt.sqnr;
    res->output_nonfinite = mt.nonfinite;
    res->output_cosine = mt.cosine;
    res->output_agreement = mt.agreement;
    qrl_rt rt;
    qr_rt_init(&rt);
    int bad = res->output_nonfinite > 0;
    for (int i = k; !bad && q->r->fallback && i < nr; i++)
        bad = q->r->fallback(&rt, rk[i].sqnr, mt.sqnr, mt.cosine, mt.agreement) != 0;
    *holds = !bad;
    return qr_rt_status(&rt, q->e);
}

qr_status qr_plan_fallback(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count)
{
    outref o;
    ranked *rk = calloc((size_t)q->nslots + 1, sizeof *rk);
    if (!rk)
        return qr_errorf(q->e, "out of memory");
    fb_progress pg = {.o = q->o, .total = 3, .t0 = qr_plan_now_ms()};
    for (int n = q->nslots; n > 0 && q->r->fallback; n /= 2) /* the search's steps, at most */
        pg.total++;
    qr_status st = outref_init(&o, q, calib, count);
    if (st == QR_OK)
        st = qr_measure_local(q, res->qdq, calib, count);
    fb_step(&pg);
    int nr = 0;
    for (int i = 0; st == QR_OK && i < q->nslots; i++)
        if (!q->slots[i].fallback && q->qval[q->slots[i].value] >= 0)
            rk[nr++] = (ranked){i, qr_plan_local_sqnr(&q->slots[i]), NAN};
    qsort(rk, (size_t)nr, sizeof *rk, by_sqnr);
    int holds = 0, k = 0;
    if (st == QR_OK)
        st = try_k(q, res, &o, calib, rk, nr, 0, &holds);
    fb_step(&pg);
    if (st == QR_OK && !holds && q->r->fallback) {
        /* the tensors the condition sends back on their own (read with the outputs as if they met
         * it) go at once, first: a stable partition of the ranking */
        qrl_rt rt;
        qr_rt_init(&rt);
        for (int i = 0; i < nr; i++)
            if (q->r->fallback(&rt, rk[i].sqnr, INFINITY, 1.0, 1.0)) {
                ranked r = rk[i];
                memmove(rk + k + 1, rk + k, sizeof *rk * (size_t)(i - k));
                rk[k++] = r;
            }
        if ((st = qr_rt_status(&rt, q->e)) == QR_OK && k > 0)
            st = try_k(q, res, &o, calib, rk, nr, k, &holds);
        fb_step(&pg);
    }
    if (st == QR_OK && !holds) { /* the fewest worst layers whose fallback meets it: a binary search */
        /* past those, the layers with the worst effect on the outputs first */
        if ((st = measure_effects(q, &o, calib, rk + k, nr - k)) == QR_OK)
            qsort(rk + k, (size_t)(nr - k), sizeof *rk, by_effect);
        int lo = k, hi = nr; /* fails at lo; assumed to hold at hi (everything in f32) */
        while (st == QR_OK && hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((st = try_k(q, res, &o, calib, rk, nr, mid, &holds)) == QR_OK && holds)
                hi = mid;
            else
                lo = mid;
            fb_step(&pg);
        }
        if (st == QR_OK)
            st = try_k(q, res, &o, calib, rk, nr, hi, &holds);
    }
    pg.total = pg.done; /* finished: a full bar */
    qr_plan_progress(pg.o, "fallback ", pg.done, pg.total, pg.t0);
    res->fallbacks = 0;
    for (int i = 0; i < q->nslots; i++)
        res->fallbacks += q->slots[i].fallback;
    if (st == QR_OK)
        qr_measure_macs(q, res, o.per_sample, o.last);
    outref_free(&o);
    free(rk);
    return st;
}

qr_status qr_measure_output_sqnr(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count,
                                 double *sqnr)
{
    outref o;
    out_metrics mt = {0};
    qr_status st = outref_init(&o, q, calib, count);
    if (st == QR_OK)
        st = measure_outputs(q, &o, res->ig->g, res->ig, calib, o.nbatches, &mt);
    *sqnr = mt.sqnr;
    if (st == QR_OK)
        outref_free(&o);
    return st;
}

/* ------------------------------------------------------------ MACs */

/* The reduced dimension K of a MatMul (transposed: a Gemm with transA): the last dim of A as the
 * f32 pass saw it (graph inputs as the calibration data gives them), else from its static shape,
 * else from B's (K of [..., K, N]). */
static double product_depth(const qr_node *n, const int64_t *last, int trans_a)
{
    const qr_tensor *a = &n->in[0]->t, *b = &n->in[1]->t;
    if (trans_a)
        return a->ndim == 2 && a->dims[0] > 0 ? (double)a->dims[0] : b->ndim == 2 ? (double)b->dims[0] : 0;
    if (last[n->in[0]->id] > 0)
        return (double)last[n->in[0]->id];
    if (a->ndim > 0 && a->dims[a->ndim - 1] > 0)
        return (double)a->dims[a->ndim - 1];
    return b->ndim >= 2 && b->dims[b->ndim - 2] > 0 ? (double)b->dims[b->ndim - 2] : 0;
}

/* Multiply-accumulates per sample of a Conv, ConvTranspose, Gemm or MatMul; 0 for other ops. */
static double node_macs(const qr_node *n, const double *per_sample, const int64_t *last)
{
    if (n->n_out < 1 || !n->out[0] || n->n_in < 2 || !n->in[0] || !n->in[1])
        return 0;
    double out = per_sample[n->out[0]->id];
    const qr_value *w = n->in[1];
    if (!strcmp(n->op, "Conv")) { /* each output element: C_in / group * kernel */
        if (w->t.ndim < 2 || w->t.dims[0] <= 0)
            return 0;
        return out * (double)qr_tensor_numel(&w->t) / (double)w->t.dims[0];
    }
    if (!strcmp(n->op, "ConvTranspose")) /* each input element: C_out / group * kernel */
        return per_sample[n->in[0]->id] * (w->t.ndim >= 2 && w->t.dims[0] > 0 ? (double)qr_tensor_numel(&w->t) / (double)w->t.dims[0] : 0);
    if (!strcmp(n->op, "MatMul") || !strcmp(n->op, "Gemm"))
        return out * product_depth(n, last, !strcmp(n->op, "Gemm") && qr_attr_i(n, "transA", 0));
    return 0;
}

void qr_measure_macs(const qr_qctx *q, qr_quantized *res, const double *per_sample, const int64_t *last)
{
    const qr_graph *g = q->g;
    res->macs = res->macs_int = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        double m = n->dead ? 0 : node_macs(n, per_sample, last);
        if (m <= 0)
            continue;
        res->macs += m;
        /* on the integers when the match that claims it runs as a kernel */
        for (int k = 0; k < q->nmatches; k++) {
            const struct mrec *r = &q->matches[k];
            for (int j = 0; j < r->nnodes; j++)
                if (r->nodes[j] == n->id && res->ig && res->ig->runs[r->out] && !strncmp(res->ig->runs[r->out], "kernel", 6))
                    res->macs_int += m;
        }
    }
}

/* ------------------------------------------------------------ top-1 */

/* Correct top-1 answers of graph on samples [0, n): the first output is [batch, classes]. */
static qr_status count_top1(qr_qctx *q, const qr_graph *graph, void *user, const qr_tensor *calib,
                            const qr_tensor *labels, int64_t n, int64_t *correct)
{
    const qr_graph *g = q->g;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)graph->n_outputs + 1, sizeof *out);
    qr_exec_opts eo = {.threads = q->o->threads, .kernel_user = user};
    qr_exec *x = NULL;
    qr_status st = in && out ? qr_exec_new(graph, &eo, &x, q->e) : qr_errorf(q->e, "out of memory");
    int batch = qr_plan_batch(q);
    *correct = 0;
    for (int64_t at = 0; st == QR_OK && at < n; at += batch) {
        int64_t b = n - at < batch ? n - at : batch;
        qr_plan_slice_inputs(calib, g->n_inputs, at, b, in);
        if ((st = qr_exec_run(x, in, out, q->e)) != QR_OK)
            break;
        const qr_tensor *o = &out[0];
        int64_t classes = o->ndim >= 1 && o->dims[0] == b && qr_dtype_is_float(o->dtype) ? qr_tensor_numel(o) / b : 0;
        if (!classes)
            st = qr_errorf(q->e, "top-1 needs the first output as [batch, classes] floats");
        for (int64_t s = 0; st == QR_OK && s < b; s++) {
            int64_t best = 0;
            for (int64_t c = 1; c < classes; c++)
                if (qr_get_f64(o->data, o->dtype, s * classes + c) > qr_get_f64(o->data, o->dtype, s * classes + best))
                    best = c;
            *correct += best == qr_get_i64(labels->data, labels->dtype, at + s);
        }
        for (int j = 0; j < graph->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    qr_exec_free(x);
    free(in);
    free(out);
    return st;
}

qr_status qr_measure_top1(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, const qr_tensor *labels,
                          int64_t count, double *top1)
{
    int64_t n = count < measure_samples(q) ? count : measure_samples(q), c32 = 0, ci = 0;
    if (labels->ndim != 1 || !qr_dtype_is_int(labels->dtype) || labels->dims[0] < n)
        return qr_errorf(q->e, "the labels must be %lld or more integers, one per calibration sample", (long long)n);
    qr_status st = count_top1(q, q->ref ? q->ref : q->g, NULL, calib, labels, n, &c32);
    if (st == QR_OK)
        st = count_top1(q, res->ig->g, res->ig, calib, labels, n, &ci);
    res->top1_samples = n;
    res->top1_fp32 = 100.0 * (double)c32 / (double)n;
    res->top1_int8 = 100.0 * (double)ci / (double)n;
    /* each layer alone: every other slot falls back in a QDQ model of its own */
    unsigned char *was = calloc((size_t)q->nslots + 1, 1);
    if (!was)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++) {
        was[i] = (unsigned char)q->slots[i].fallback;
        top1[i] = NAN;
    }
    for (int i = 0; st == QR_OK && i < q->nslots; i++) {
        if (was[i] || !q->g->values[q->slots[i].value]->producer)
            continue;
        for (int k = 0; k < q->nslots; k++)
            q->slots[k].fallback = k != i;
        qr_quantized one = {0};
        int64_t c = 0;
        if ((st = qr_plan_build_qdq(q, &one)) == QR_OK && (st = count_top1(q, one.qdq, NULL, calib, labels, n, &c)) == QR_OK)
            top1[i] = 100.0 * (double)c / (double)n - res->top1_fp32;
        qr_graph_free(one.qdq);
    }
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].fallback = was[i];
    free(was);
    /* q->qval as the shipped graphs have it again */
    qr_quantized again = {0};
    if (st == QR_OK && (st = qr_plan_build_qdq(q, &again)) == QR_OK)
        qr_graph_free(again.qdq);
    return st;
}
