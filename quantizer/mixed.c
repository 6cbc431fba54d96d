/* Mixed precision for weight-only recipes (see mixed.h): the measurements, the Pareto front and
 * the assignment. The choices and the budget are the recipe's; this file measures and counts. */
#include "mixed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "exec.h"
#include "quantize_plan.h"
#include "weight_only.h"

/* A run of a graph over samples [s0, s0 + n) in slices of `slice` (the model's fixed batch, else
 * all at once), against the f32 model's outputs kept from the first run. */
typedef struct samples {
    const qr_tensor *calib;
    int ninputs, noutputs;
    int64_t s0, n, slice;
    qr_tensor *ref; /* [slices][noutputs] */
    double signal;
} samples;

static int64_t nslices(const samples *s)
{
    return s->slice > 0 ? s->n / s->slice : 0;
}

/* The inputs of slice k as views of the calibration tensors. */
static void slice_inputs(const samples *s, int64_t k, qr_tensor *in)
{
    for (int i = 0; i < s->ninputs; i++) {
        const qr_tensor *c = &s->calib[i];
        int64_t per = qr_tensor_numel(c) / (c->dims[0] ? c->dims[0] : 1);
        in[i] = *c;
        in[i].data = (char *)c->data + qr_dtype_bytes(c->dtype, (s->s0 + k * s->slice) * per);
        in[i].dims[0] = s->slice;
    }
}

/* The layers' output rows per sample, seen on the f32 run (for their MACs). */
typedef struct rows_seen {
    const int *layer_of; /* by node id: its layer, or -1 */
    double *rows;        /* by layer */
    int64_t slice;
} rows_seen;

static void observe_rows(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    rows_seen *r = user;
    int l = n ? r->layer_of[n->id] : -1;
    if (l < 0 || v != n->out[0] || t->ndim < 1 || t->dims[t->ndim - 1] <= 0 || r->slice <= 0)
        return;
    r->rows[l] = (double)qr_tensor_numel(t) / (double)t->dims[t->ndim - 1] / (double)r->slice;
}

static void samples_free(samples *s)
{
    for (int64_t i = 0; s->ref && i < nslices(s) * s->noutputs; i++)
        qr_tensor_free(&s->ref[i]);
    free(s->ref);
    s->ref = NULL;
}

/* s's f32 outputs by g (and, with rs, the layers' rows). */
static qr_status samples_init(samples *s, const qr_graph *g, int threads, rows_seen *rs, qr_error *e)
{
    s->ninputs = g->n_inputs;
    s->noutputs = g->n_outputs;
    s->ref = calloc((size_t)(nslices(s) * s->noutputs) + 1, sizeof *s->ref);
    qr_tensor *in = calloc((size_t)s->ninputs + 1, sizeof *in);
    qr_exec_opts eo = {.threads = threads, .observer = rs ? observe_rows : NULL, .observer_user = rs};
    qr_exec *x = NULL;
    qr_status st = s->ref && in ? qr_exec_new(g, &eo, &x, e) : qr_errorf(e, "out of memory");
    s->signal = 0;
    for (int64_t k = 0; st == QR_OK && k < nslices(s); k++) {
        slice_inputs(s, k, in);
        st = qr_exec_run(x, in, &s->ref[k * s->noutputs], e);
        for (int o = 0; st == QR_OK && o < s->noutputs; o++) {
            const qr_tensor *r = &s->ref[k * s->noutputs + o];
            for (int64_t i = 0; r->dtype == QR_F32 && i < qr_tensor_numel(r); i++)
                s->signal += (double)((const float *)r->data)[i] * ((const float *)r->data)[i];
        }
    }
    qr_exec_free(x);
    free(in);
    return st;
}

/* The error energy of d's outputs against the f32 ones on s (a non-finite output counts as
 * infinite error). */
static qr_status error_of(const samples *s, const qr_graph *d, int threads, double *err, qr_error *e)
{
    qr_tensor *in = calloc((size_t)s->ninputs + 1, sizeof *in), *out = calloc((size_t)s->noutputs + 1, sizeof *out);
    qr_exec_opts eo = {.threads = threads};
    qr_exec *x = NULL;
    qr_status st = in && out ? qr_exec_new(d, &eo, &x, e) : qr_errorf(e, "out of memory");
    *err = 0;
    for (int64_t k = 0; st == QR_OK && k < nslices(s); k++) {
        slice_inputs(s, k, in);
        if ((st = qr_exec_run(x, in, out, e)) != QR_OK)
            break;
        for (int o = 0; o < s->noutputs; o++) {
            const qr_tensor *r = &s->ref[k * s->noutputs + o], *t = &out[o];
            int64_t cnt = qr_tensor_numel(r);
            if (r->dtype == QR_F32 && t->dtype == QR_F32 && qr_tensor_numel(t) == cnt)
                for (int64_t i = 0; i < cnt; i++) {
                    double dd = (double)((const float *)r->data)[i] - (double)((const float *)t->data)[i];
                    *err += isfinite(dd) ? dd * dd : INFINITY;
                }
            qr_tensor_free(&out[o]);
        }
    }
    qr_exec_free(x);
    free(in);
    free(out);
    return st;
}

/* Bytes of the constants d's live nodes read (what the export stores). */
static double graph_bytes(const qr_graph *d)
{
    unsigned char *seen = calloc((size_t)d->n_values + 1, 1);
    double b = 0;
    for (int i = 0; seen && i < d->n_nodes; i++) {
        const qr_node *n = d->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++) {
            const qr_value *v = n->in[j];
            if (v && v->is_const && v->id < d->n_values && !seen[v->id]) {
                seen[v->id] = 1;
                b += (double)qr_tensor_nbytes(&v->t);
            }
        }
    }
    free(seen);
    return b;
}

typedef struct mctx {
    const qr_graph *g;
    const qr_quant_opts *o;
    const qr_recipe *r;
    qr_error *e;
    qr_wo *wo;       /* by choice; dt QR_UNDEF for f32 */
    int *node;       /* by layer: its node's index in g */
    int *kax;        /* by layer */
    qr_mixed_info *mi;
} mctx;

static int is_f32(const mctx *m, int c)
{
    return m->wo[c].dt == QR_UNDEF;
}

/* g with each layer's weight quantized by its choice pick[l] (f32: left as it is). */
static qr_status build(const mctx *m, const int *pick, qr_graph **out)
{
    qr_graph *d = qr_graph_clone_shared(m->g);
    qr_status st = d ? QR_OK : qr_errorf(m->e, "out of memory");
    for (int l = 0; st == QR_OK && l < m->mi->nlayers; l++)
        if (!is_f32(m, pick[l]))
            st = qr_wo_quantize(&m->wo[pick[l]], d, d->nodes[m->node[l]], m->kax[l]);
    if (st == QR_OK)
        st = qr_wo_finish(d, m->e);
    if (st != QR_OK) {
        qr_graph_free(d);
        d = NULL;
    }
    *out = d;
    return st;
}

/* ------------------------------------------------------------ the front */

typedef struct fpt {
    double cost, err;
    int parent, pick; /* the previous layer's point, this layer's choice */
} fpt;

static int by_cost(const void *a, const void *b)
{
    const fpt *x = a, *y = b;
    return x->cost < y->cost ? -1 : x->cost > y->cost ? 1 : x->err < y->err ? -1 : x->err > y->err;
}

enum { FRONT_MAX = 4096 };

/* The Pareto front of (cost, err) over every assignment: level l holds the front of layers
 * [0, l), each point's parent in level l - 1. cost[l][c], err[l][c]: layer l with choice c. */
static qr_status pareto(int nl, int nc, const double *cost, const double *err, fpt **lv, int *nlv, qr_error *e)
{
    lv[0] = calloc(1, sizeof *lv[0]);
    if (!lv[0])
        return qr_errorf(e, "out of memory");
    lv[0][0] = (fpt){0, 0, -1, -1};
    nlv[0] = 1;
    for (int l = 0; l < nl; l++) {
        int64_t n = (int64_t)nlv[l] * nc, k = 0;
        fpt *all = malloc(sizeof *all * (size_t)(n + 1));
        if (!all)
            return qr_errorf(e, "out of memory");
        for (int p = 0; p < nlv[l]; p++)
            for (int c = 0; c < nc; c++)
                if (isfinite(cost[l * nc + c])) /* else not open to this layer */
                    all[k++] = (fpt){lv[l][p].cost + cost[l * nc + c], lv[l][p].err + err[l * nc + c], p, c};
        n = k;
        qsort(all, (size_t)n, sizeof *all, by_cost);
        int64_t kept = 0; /* dominated points go: each kept one has less error than every cheaper one */
        for (int64_t i = 0; i < n; i++)
            if (kept == 0 || all[i].err < all[kept - 1].err)
                all[kept++] = all[i];
        if (kept > FRONT_MAX) { /* thinned: at most one point per 1/FRONT_MAX of the cost range, the ends kept */
            double lo = all[0].cost, step = (all[kept - 1].cost - lo) / FRONT_MAX;
            int64_t t = 1;
            for (int64_t i = 1; i < kept; i++)
                if (i == kept - 1 || all[i].cost >= all[t - 1].cost + step)
                    all[t++] = all[i];
            kept = t;
        }
        lv[l + 1] = all;
        nlv[l + 1] = (int)kept;
    }
    return QR_OK;
}

/* Point p of the last level's assignment, layer by layer. */
static void trace(fpt **lv, int nl, int p, int *pick)
{
    for (int l = nl; l > 0; l--) {
        pick[l - 1] = lv[l][p].pick;
        p = lv[l][p].parent;
    }
}

/* ------------------------------------------------------------ measuring */

/* Each layer's bytes and error energy under each choice: one run per layer and (quantized) choice;
 * g_bytes: the f32 model's. */
static qr_status sensitivities(mctx *m, const samples *choose, double g_bytes)
{
    qr_mixed_info *mi = m->mi;
    int nl = mi->nlayers, nc = mi->nchoices;
    int64_t done = 0, total = 0;
    for (int c = 0; c < nc; c++)
        total += is_f32(m, c) ? 0 : nl;
    double t0 = qr_plan_now_ms();
    qr_status st = QR_OK;
    /* under mpirun the layers are dealt out, rank r taking layers r, r + N, ...: each rank measures
     * its own, and every rank then gets every layer's figures (a layer's are one rank's, as one
     * process computes them) */
    int size = qr_dist_size(), rank = qr_dist_rank();
    for (int l = 0; st == QR_OK && l < nl; l++) {
        qr_mixed_layer *ly = &mi->layers[l];
        if (l % size != rank)
            continue;
        for (int c = 0; st == QR_OK && c < nc; c++) {
            if (is_f32(m, c)) {
                ly->bytes[c] = 4 * ly->weights;
                ly->err2[c] = 0;
                continue;
            }
            qr_graph *d = qr_graph_clone_shared(m->g);
            st = d ? qr_wo_quantize(&m->wo[c], d, d->nodes[m->node[l]], m->kax[l]) : qr_errorf(m->e, "out of memory");
            if (st == QR_OK)
                st = qr_wo_finish(d, m->e);
            if (st == QR_OK) {
                ly->bytes[c] = graph_bytes(d) - g_bytes + 4 * ly->weights; /* its f32 weight gone */
                st = error_of(choose, d, m->o->threads, &ly->err2[c], m->e);
            }
            qr_graph_free(d);
            qr_plan_progress(m->o, "mixed    ", done += size, total, t0);
        }
    }
    if (size <= 1)
        return st;
    /* rank k's block: bytes and err2 of each choice, for its layers in order */
    int64_t *counts = calloc((size_t)size, sizeof *counts);
    double *all = calloc(2 * (size_t)nl * (size_t)nc + 1, sizeof *all);
    if (!counts || !all) {
        free(counts), free(all);
        return qr_errorf(m->e, "out of memory");
    }
    size_t at = 0;
    for (int k = 0; k < size; k++)
        for (int l = k; l < nl; l += size) {
            counts[k] += 2 * nc;
            for (int c = 0; k == rank && c < nc; c++)
                all[at + (size_t)c] = mi->layers[l].bytes[c], all[at + (size_t)(nc + c)] = mi->layers[l].err2[c];
            at += 2 * (size_t)nc;
        }
    st = qr_dist_allgather(all, counts, st, m->e);
    at = 0;
    for (int k = 0; st == QR_OK && k < size; k++)
        for (int l = k; l < nl; l += size, at += 2 * (size_t)nc)
            for (int c = 0; c < nc; c++)
                mi->layers[l].bytes[c] = all[at + (size_t)c], mi->layers[l].err2[c] = all[at + (size_t)(nc + c)];
    free(counts), free(all);
    return st;
}

static double sqnr_db(double signal, double err)
{
    return err > 0 ? 10 * log10(signal / err) : INFINITY;
}

/* Point pt's figures from its assignment: bytes, bits and the predicted SQNR. */
static void point_figures(const qr_mixed_info *mi, qr_mixed_point *pt, double base_bytes)
{
    double bytes = base_bytes, bits = 0, macs = 0, err = mi->rest;
    for (int l = 0; l < mi->nlayers; l++) {
        const qr_mixed_layer *ly = &mi->layers[l];
        int c = pt->pick[l];
        bytes += ly->bytes[c];
        bits += ly->macs * (ly->bits ? ly->bits[c] : 8 * ly->bytes[c] / ly->weights);
        macs += ly->macs;
        err += ly->err2[c];
    }
    pt->bytes = bytes;
    pt->bits = macs > 0 ? bits / macs : 0;
    pt->key = !strcmp(mi->budget_kind, "bits") ? pt->bits : pt->bytes;
    pt->predicted = sqnr_db(mi->signal, err);
}

static int by_key(const void *a, const void *b)
{
    const qr_mixed_point *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key ? 1 : x->uniform - y->uniform;
}

/* A point with assignment pick (copied) added to mi's. */
static qr_status add_point(qr_mixed_info *mi, const int *pick, int uniform, double base_bytes, qr_error *e)
{
    qr_mixed_point *p = realloc(mi->points, sizeof *p * (size_t)(mi->npoints + 1));
    if (!p)
        return qr_errorf(e, "out of memory");
    mi->points = p;
    p = &mi->points[mi->npoints];
    *p = (qr_mixed_point){.measured = NAN, .uniform = uniform};
    if (!(p->pick = malloc(sizeof *p->pick * (size_t)(mi->nlayers + 1))))
        return qr_errorf(e, "out of memory");
    memcpy(p->pick, pick, sizeof *pick * (size_t)mi->nlayers);
    mi->npoints++;
    point_figures(mi, p, base_bytes);
    return QR_OK;
}

/* ------------------------------------------------------------ the recipe */

/* The choices: the weight setting's type first, then each candidate's. */
static qr_status choices(mctx *m)
{
    const qr_recipe *r = m->r;
    qr_mixed_info *mi = m->mi;
    m->wo = calloc((size_t)r->nsettings + 1, sizeof *m->wo);
    mi->choices = calloc((size_t)r->nsettings + 1, sizeof *mi->choices);
    if (!m->wo || !mi->choices)
        return qr_errorf(m->e, "out of memory");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->nsettings; i++) {
            const qr_setting *s = &r->settings[i];
            if (s->ntargets || s->id != (pass ? QR_SET_CANDIDATE : QR_SET_WEIGHT))
                continue;
            int c = mi->nchoices++;
            if (!(mi->choices[c] = strdup(s->type)))
                return qr_errorf(m->e, "out of memory");
            if (!strcmp(s->type, "f32"))
                m->wo[c] = (qr_wo){.dt = QR_UNDEF, .s = s};
            else if (qr_wo_init(&m->wo[c], m->o, r, s, m->e) != QR_OK)
                return QR_ERR;
        }
    return QR_OK;
}

/* The layers: every MatMul/Gemm with a 2-D f32 constant B, in graph order. */
static qr_status layers(mctx *m)
{
    const qr_graph *g = m->g;
    qr_mixed_info *mi = m->mi;
    size_t most = (size_t)g->n_nodes + 1; /* a layer a node at most */
    if (!(m->node = calloc(most, sizeof *m->node)) || !(m->kax = calloc(most, sizeof *m->kax)) ||
        !(mi->layers = calloc(most, sizeof *mi->layers)))
        return qr_errorf(m->e, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        int kax;
        const qr_node *n = g->nodes[i];
        if (!qr_wo_takes_weight(n, &kax))
            continue;
        int l = mi->nlayers++;
        qr_mixed_layer *ly = &mi->layers[l];
        m->node[l] = i;
        m->kax[l] = kax;
        ly->weights = (double)qr_tensor_numel(&n->in[1]->t);
        ly->name = strdup(n->in[1]->name);
        ly->node = strdup(n->name ? n->name : "");
        ly->bytes = calloc((size_t)mi->nchoices, sizeof *ly->bytes);
        ly->err2 = calloc((size_t)mi->nchoices, sizeof *ly->err2);
        if (!ly->name || !ly->node || !ly->bytes || !ly->err2)
            return qr_errorf(m->e, "out of memory");
    }
    if (!mi->nlayers)
        return qr_errorf(m->e, "recipe '%s': mixed precision has no layer to choose for (no MatMul or Gemm reads a "
                               "2-D f32 constant)", m->r->name);
    return QR_OK;
}

/* The sample split: samples [0, choose) measure the layers and choose; [choose, count) (validate = f
 * of them, whole batches of a fixed-batch model) are held out for the measured figures. */
static qr_status split(mctx *m, const qr_tensor *calib, samples *choose, samples *held)
{
    const qr_graph *g = m->g;
    int64_t count = calib[0].dims[0];
    if (m->o->calib_count > 0 && m->o->calib_count < count)
        count = m->o->calib_count;
    int64_t slice = g->inputs[0]->t.ndim > 0 && g->inputs[0]->t.dims[0] > 0 ? g->inputs[0]->t.dims[0] : 0;
    const qr_setting *vs = qr_recipe_setting(m->r, QR_SET_VALIDATE);
    double frac = vs ? vs->value : 0;
    int64_t step = slice ? slice : 1, nval = (int64_t)floor((double)count * frac);
    nval -= nval % step;
    if (frac > 0 && nval < step)
        nval = step;
    const qr_setting *least = qr_recipe_setting(m->r, QR_SET_VALIDATE_LEAST);
    if (least && nval < (int64_t)least->value) /* too few to hold out: chosen and measured on the same */
        nval = 0;
    int64_t nch = count - nval;
    nch -= nch % step;
    if (nch < step)
        return qr_errorf(m->e, "recipe '%s': %lld calibration samples%s leave none to choose the precisions on",
                         m->r->name, (long long)count, frac > 0 ? " less those validate holds out" : "");
    *choose = (samples){.calib = calib, .s0 = 0, .n = nch, .slice = slice ? slice : nch};
    *held = nval ? (samples){.calib = calib, .s0 = count - nval, .n = nval, .slice = slice ? slice : nval} : *choose;
    m->mi->choose_samples = nch;
    m->mi->heldout_samples = nval;
    m->mi->measured_samples = nval ? nval : nch;
    return QR_OK;
}

/* The budget as a bound on the front's cost; an error naming where the recipe sets it when even
 * the cheapest assignment exceeds it. */
static qr_status budget_cost(mctx *m, const double *cost, double base_bytes, double *bound)
{
    qr_mixed_info *mi = m->mi;
    const qr_setting *b = qr_recipe_setting(m->r, QR_SET_BUDGET);
    int bits = !strcmp(b->type, "bits");
    snprintf(mi->budget_kind, sizeof mi->budget_kind, "%s", b->type);
    mi->budget = b->value;
    double macs = 0, least = 0;
    int cheapest = 0;
    for (int l = 0; l < mi->nlayers; l++) {
        macs += mi->layers[l].macs;
        double lo = INFINITY;
        for (int c = 0; c < mi->nchoices; c++)
            if (cost[l * mi->nchoices + c] < lo)
                lo = cost[l * mi->nchoices + c], cheapest = c;
        least += lo;
    }
    *bound = bits ? b->value * macs : b->value - base_bytes;
    if (least <= *bound * (1 + 1e-12))
        return QR_OK;
    double at_least = bits ? least / macs : least + base_bytes;
    return qr_errorf(m->e, "%s: budget = %s(%g) cannot be met: the smallest assignment, every layer %s, takes %.6g %s",
                     b->calibrator && b->calibrator[0] ? b->calibrator : m->r->name, b->type, b->value,
                     mi->choices[cheapest], at_least, bits ? "bits a weight (its scales included)" : "bytes");
}

void qr_mixed_info_free(qr_mixed_info *mi)
{
    if (!mi)
        return;
    for (int i = 0; i < mi->nchoices; i++)
        free(mi->choices[i]);
    free(mi->choices);
    for (int l = 0; l < mi->nlayers; l++) {
        free(mi->layers[l].name);
        free(mi->layers[l].node);
        free(mi->layers[l].bytes);
        free(mi->layers[l].err2);
        free(mi->layers[l].bits);
    }
    free(mi->layers);
    for (int i = 0; i < mi->npoints; i++)
        free(mi->points[i].pick);
    free(mi->points);
    free(mi);
}

/* The choice every layer of pick takes, or -1 (a uniform assignment is shown as one already). */
static int uniform_of(const int *pick, int nl)
{
    for (int l = 1; l < nl; l++)
        if (pick[l] != pick[0])
            return -1;
    return pick[0];
}

/* Which front points are shown: up to SHOWN spread evenly over the front's cost, the chosen one
 * among them. */
enum { SHOWN = 10 };

qr_status qr_mixed_choose(qr_mixed_info *mi, const double *cost, const double *err, double rest, double base_bytes,
                          double bound, qr_mixed_run_fn run, void *user, qr_error *e)
{
    mi->rest = rest;
    int nl = mi->nlayers, nc = mi->nchoices;
    fpt **lv = calloc((size_t)nl + 1, sizeof *lv);
    int *nlv = calloc((size_t)nl + 1, sizeof *nlv), *pick = calloc((size_t)nl + 1, sizeof *pick);
    qr_status st = lv && nlv && pick ? pareto(nl, nc, cost, err, lv, nlv, e) : qr_errorf(e, "out of memory");
    int best = -1;
    if (st == QR_OK) {
        const fpt *f = lv[nl];
        mi->front = nlv[nl];
        for (int p = 0; p < nlv[nl]; p++) /* the least error within the bound (the front's error falls with cost) */
            if (f[p].cost <= bound * (1 + 1e-12))
                best = p;
        double lo = f[0].cost, hi = f[nlv[nl] - 1].cost;
        int last = -1;
        for (int k = 0; st == QR_OK && k < SHOWN; k++) { /* the point nearest each of SHOWN costs */
            double want = lo + (hi - lo) * k / (SHOWN - 1);
            int p = 0;
            while (p + 1 < nlv[nl] && f[p + 1].cost <= want)
                p++;
            if (p == last || p == best)
                continue;
            last = p;
            trace(lv, nl, p, pick);
            if (uniform_of(pick, nl) < 0)
                st = add_point(mi, pick, -1, base_bytes, e);
        }
        int chosen_uniform = -1;
        if (st == QR_OK && best >= 0) {
            trace(lv, nl, best, pick);
            if ((chosen_uniform = uniform_of(pick, nl)) < 0 && (st = add_point(mi, pick, -1, base_bytes, e)) == QR_OK)
                mi->points[mi->npoints - 1].chosen = 1;
        }
        for (int c = 0; st == QR_OK && c < nc; c++) { /* every layer the same: what mixing is judged against */
            for (int l = 0; l < nl; l++) /* (the first choice where c is not open to it) */
                pick[l] = isfinite(cost[l * nc + c]) ? c : 0;
            if ((st = add_point(mi, pick, c, base_bytes, e)) == QR_OK)
                mi->points[mi->npoints - 1].chosen = c == chosen_uniform;
        }
    }
    for (int l = 0; lv && l <= nl; l++)
        free(lv[l]);
    free(lv);
    free(nlv);
    free(pick);
    if (st != QR_OK)
        return st;
    qsort(mi->points, (size_t)mi->npoints, sizeof *mi->points, by_key);
    /* each shown point run for real on the held-out samples, the chosen one last: what ships */
    int chosen = -1;
    for (int i = 0; i < mi->npoints; i++)
        if (mi->points[i].chosen)
            chosen = i;
    for (int i = 0; st == QR_OK && i < mi->npoints; i++)
        if (i != chosen)
            st = run(user, &mi->points[i]);
    return st == QR_OK && chosen >= 0 ? run(user, &mi->points[chosen]) : st;
}

/* qr_mixed_choose's run: the weight-only graph of p's assignment, its outputs' error on the
 * held-out samples; the chosen one is kept as what ships. */
typedef struct wo_run {
    mctx *m;
    const samples *held;
    qr_quantized *res;
} wo_run;

static qr_status run_point(void *user, qr_mixed_point *p)
{
    wo_run *w = user;
    mctx *m = w->m;
    qr_graph *d = NULL;
    double e2 = 0;
    qr_status st = build(m, p->pick, &d);
    if (st == QR_OK && (st = error_of(w->held, d, m->o->threads, &e2, m->e)) == QR_OK)
        p->measured = sqnr_db(w->held->signal, e2);
    if (st == QR_OK && p->chosen) {
        p->bytes = graph_bytes(d); /* as the export stores it */
        w->res->qdq = d;
        w->res->output_sqnr = p->measured;
        w->res->output_nonfinite = isfinite(e2) ? 0 : 1;
        for (int l = 0; l < m->mi->nlayers; l++)
            w->res->weights += !is_f32(m, p->pick[l]);
        d = NULL;
    }
    qr_graph_free(d);
    return st;
}

qr_status qr_mixed(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, const qr_recipe *r,
                   qr_quantized **out, qr_error *e)
{
    *out = NULL;
    if (!calib)
        return qr_errorf(e, "recipe '%s': mixed precision measures each layer: it needs calibration samples", r->name);
    mctx m = {.g = g, .o = o, .r = r, .e = e, .mi = calloc(1, sizeof *m.mi)};
    qr_quantized *res = calloc(1, sizeof *res);
    samples ch = {0}, held = {0};
    double *cost = NULL, *err = NULL, base = 0, bound = 0;
    qr_status st = m.mi && res ? choices(&m) : qr_errorf(e, "out of memory");
    if (st == QR_OK)
        st = layers(&m);
    if (st == QR_OK)
        st = split(&m, calib, &ch, &held);
    int *layer_of = st == QR_OK ? malloc(sizeof *layer_of * ((size_t)g->n_nodes + 1)) : NULL;
    double *rows = st == QR_OK ? calloc((size_t)m.mi->nlayers + 1, sizeof *rows) : NULL;
    if (st == QR_OK && (!layer_of || !rows))
        st = qr_errorf(e, "out of memory");
    if (st == QR_OK) {
        for (int i = 0; i < g->n_nodes; i++)
            layer_of[i] = -1;
        for (int l = 0; l < m.mi->nlayers; l++)
            layer_of[g->nodes[m.node[l]]->id] = l;
        rows_seen rs = {.layer_of = layer_of, .rows = rows, .slice = ch.slice};
        st = samples_init(&ch, g, o->threads, &rs, e);
    }
    if (st == QR_OK && held.s0 != ch.s0)
        st = samples_init(&held, g, o->threads, NULL, e);
    else if (st == QR_OK)
        held.ref = NULL; /* the same samples: ch's outputs */
    const samples *hs = held.s0 != ch.s0 ? &held : &ch;
    if (st == QR_OK) {
        m.mi->signal = ch.signal;
        base = graph_bytes(g);
        for (int l = 0; l < m.mi->nlayers; l++) { /* the rest of the model: the layers' weights come and go */
            qr_mixed_layer *ly = &m.mi->layers[l];
            ly->macs = (rows[l] > 0 ? rows[l] : 1) * ly->weights;
            base -= 4 * ly->weights;
        }
        st = sensitivities(&m, &ch, graph_bytes(g));
    }
    /* bytes(N) bounds the layers' bytes, bits(N) their bits times MACs */
    int bits = st == QR_OK && !strcmp(qr_recipe_setting(r, QR_SET_BUDGET)->type, "bits");
    size_t nlc = st == QR_OK ? (size_t)m.mi->nlayers * (size_t)m.mi->nchoices : 0;
    if (st == QR_OK && (!(cost = malloc(sizeof *cost * (nlc + 1))) || !(err = malloc(sizeof *err * (nlc + 1)))))
        st = qr_errorf(e, "out of memory");
    for (int l = 0; st == QR_OK && l < m.mi->nlayers; l++)
        for (int c = 0; c < m.mi->nchoices; c++) {
            const qr_mixed_layer *ly = &m.mi->layers[l];
            cost[l * m.mi->nchoices + c] = bits ? ly->macs * 8 * ly->bytes[c] / ly->weights : ly->bytes[c];
            err[l * m.mi->nchoices + c] = ly->err2[c];
        }
    if (st == QR_OK)
        st = budget_cost(&m, cost, base, &bound);
    wo_run wr = {.m = &m, .held = hs, .res = res};
    if (st == QR_OK)
        st = qr_mixed_choose(m.mi, cost, err, 0, base, bound, run_point, &wr, e);
    if (st == QR_OK && !res->qdq)
        st = qr_errorf(e, "recipe '%s': no assignment meets budget = %s(%g)", r->name, m.mi->budget_kind, m.mi->budget);
    if (st == QR_OK) { /* the chosen assignment on the choosing samples too */
        double e2 = 0;
        st = error_of(&ch, res->qdq, o->threads, &e2, e);
        res->output_sqnr_calib = sqnr_db(ch.signal, e2);
    }
    free(layer_of);
    free(rows);
    free(cost);
    free(err);
    samples_free(&ch);
    samples_free(&held);
    for (int c = 0; m.wo && c < m.mi->nchoices; c++)
        qr_wo_free(&m.wo[c]);
    free(m.wo);
    free(m.node);
    free(m.kax);
    if (st != QR_OK) {
        qr_mixed_info_free(m.mi);
        qr_quantized_free(res);
        return QR_ERR;
    }
    res->mixed = m.mi;
    res->samples = m.mi->choose_samples;
    res->validate_samples = m.mi->heldout_samples;
    res->output_cosine = NAN;
    res->output_agreement = NAN;
    res->top1_fp32 = res->top1_int8 = NAN;
    res->recipe = r->name;
    *out = res;
    return QR_OK;
}
