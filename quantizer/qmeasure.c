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
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "exec.h"
#include "intgraph.h"
#include "layout.h"
#include "mixed.h"
#include "ops/ops_common.h"
#include "options.h"
#include "probe.h"
#include "vjp.h"
#include "quantize_plan.h"

/* The recipe's measure_samples (default 256): calibration samples each measurement runs. */
static int64_t measure_samples(const qr_qctx *q)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_MEASURE_SAMPLES);
    int64_t n = s ? (int64_t)s->value : 256;
    return n > 0 ? n : 256;
}

/* ------------------------------------------------------------ under mpirun
 *
 * Every rank runs the measurements and the search with the same qparams (quantize.c hands rank 0's
 * calibration to all) and takes the same decisions: a pass over samples runs each rank's share of
 * the batches (qr_dist_share), and each batch's sums are kept apart, gathered onto every rank and
 * added in batch order, so that a sum is the same bytes for any number of ranks (one process adds
 * them the same way); the effect runs, one per layer, are dealt out by layer. */

/* rows (nb rows of width doubles) onto every rank, each rank having filled the rows of its share
 * of nb: the rows [lo, hi) of qr_dist_share. st: this rank's status, whose error reaches all. */
static qr_status gather_rows(qr_qctx *q, double *rows, int64_t nb, int64_t width, qr_status st)
{
    int size = qr_dist_size();
    if (size <= 1)
        return st;
    int64_t *counts = calloc((size_t)size, sizeof *counts), lo, hi;
    if (!counts)
        return qr_errorf(q->e, "out of memory");
    for (int r = 0; r < size; r++) {
        qr_dist_share_of(nb, r, &lo, &hi);
        counts[r] = (hi - lo) * width;
    }
    st = qr_dist_allgather(rows, counts, st, q->e);
    free(counts);
    return st;
}

/* Whether batch k of nb is this rank's (one process: every batch). */
static int my_batch(int64_t k, int64_t nb)
{
    int64_t lo, hi;
    qr_dist_share(nb, &lo, &hi);
    return k >= lo && k < hi;
}

/* Integer counts (exact in a double below 2^53) summed over the ranks, in rank order. */
static qr_status sum_counts(qr_qctx *q, int64_t *v, int n, qr_status st)
{
    int size = qr_dist_size();
    if (size <= 1)
        return st;
    double *all = calloc((size_t)n * (size_t)size + 1, sizeof *all);
    int64_t *counts = calloc((size_t)size, sizeof *counts);
    if (!all || !counts) {
        free(all), free(counts);
        return qr_errorf(q->e, "out of memory");
    }
    for (int r = 0; r < size; r++)
        counts[r] = n;
    for (int i = 0; i < n; i++)
        all[(size_t)qr_dist_rank() * (size_t)n + (size_t)i] = (double)v[i];
    st = qr_dist_allgather(all, counts, st, q->e);
    for (int i = 0; st == QR_OK && i < n; i++) {
        v[i] = 0;
        for (int r = 0; r < size; r++)
            v[i] += (int64_t)all[(size_t)r * (size_t)n + (size_t)i];
    }
    free(all), free(counts);
    return st;
}

/* The sums a pass adds up (at[i]: where sum i lives), kept per batch (rows: [nb][n]) and added up
 * in batch order after the gather onto their places, to what they held before (base). */
typedef struct bsums {
    int n;
    double **at;
    double *base, *rows;
    int64_t nb;
} bsums;

static void bsums_free(bsums *b)
{
    free(b->at), free(b->base), free(b->rows);
    memset(b, 0, sizeof *b);
}

static qr_status bsums_init(bsums *b, qr_qctx *q, double **at, int n, int64_t nb)
{
    memset(b, 0, sizeof *b);
    b->n = n, b->nb = nb, b->at = at;
    b->base = calloc((size_t)n + 1, sizeof *b->base);
    b->rows = calloc((size_t)n * (size_t)nb + 1, sizeof *b->rows);
    if (!b->base || !b->rows) {
        bsums_free(b);
        return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < n; i++)
        b->base[i] = *at[i];
    return QR_OK;
}

/* Every rank's rows, then each sum: its base plus its batches' in batch order. */
static qr_status bsums_finish(bsums *b, qr_qctx *q, qr_status st)
{
    st = gather_rows(q, b->rows, b->nb, b->n, st);
    for (int i = 0; i < b->n; i++) {
        double t = b->base[i];
        for (int64_t k = 0; st == QR_OK && k < b->nb; k++)
            t += b->rows[(size_t)k * (size_t)b->n + (size_t)i];
        *b->at[i] = t;
    }
    return st;
}

/* Whether the recipe's choice id is name: outputs = worst judges each output on its own (the
 * worst one decides), rank = gain ranks the layers by gain_effects. */
/* The bytes of the model's constants. */
static size_t const_bytes(const qr_qctx *q)
{
    size_t n = 0;
    for (int i = 0; i < q->g->n_values; i++)
        if (q->g->values[i]->is_const && q->g->values[i]->t.data)
            n += qr_tensor_nbytes(&q->g->values[i]->t);
    return n;
}

static int choice_is(const qr_qctx *q, qr_setting_id id, const char *name)
{
    const qr_setting *s = qr_recipe_setting(q->r, id);
    return s && s->type && !strcmp(s->type, name);
}

static int worst_output(const qr_qctx *q)
{
    return choice_is(q, QR_SET_OUTPUTS, "worst");
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

/* v is value v->id of the original graph (the quantized graphs keep ids and names of the originals). */
static int original(const qr_qctx *q, const qr_value *v)
{
    return v->id < q->g->n_values && !strcmp(v->name, q->g->values[v->id]->name);
}

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
    size_t run_bytes;    /* what one batch's f32 run took (outref_init's runs) */
    int have_out;        /* out came from the f32 pass (qr_qctx.f32_out): the runs take only the shapes */
    double f32_ms;       /* side_by_side: its f32 run's own time (not waiting for its readers), wall ms */
    /* an executor of the f32 model on pack_threads threads that has run (speculate's): side_by_side's
     * f32 runs on as many threads take its packing of the weights instead of packing them again,
     * and (one group) its kernels' workspace (it runs no more) */
    qr_exec *pack;
    int pack_threads;
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

/* o set up for the first measure_samples of calib's count samples, its outputs still to come. */
static qr_status outref_alloc(outref *o, qr_qctx *q, int64_t count)
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
    if (o->out && o->per_sample && o->last)
        return QR_OK;
    outref_free(o);
    return qr_errorf(q->e, "out of memory");
}

/* Under mpirun, o's shapes as the last batch's rank saw them (the last rank's: it runs the last of
 * nb batches), which one process sees last too. */
static qr_status share_shapes(qr_qctx *q, outref *o, int64_t nb, qr_status st)
{
    if (qr_dist_size() <= 1 || nb < 1)
        return st;
    size_t nv = (size_t)q->g->n_values, len = nv * (sizeof *o->per_sample + sizeof *o->last);
    int root = qr_dist_size() - 1;
    unsigned char *buf = qr_dist_rank() == root ? malloc(len + 1) : NULL;
    if (qr_dist_rank() == root && st == QR_OK && !buf)
        st = qr_errorf(q->e, "out of memory");
    if (buf) {
        memcpy(buf, o->per_sample, nv * sizeof *o->per_sample);
        memcpy(buf + nv * sizeof *o->per_sample, o->last, nv * sizeof *o->last);
    }
    size_t n = len;
    st = qr_dist_bcast(root, &buf, &n, st, q->e);
    if (st == QR_OK && n != len)
        st = qr_errorf(q->e, "rank %d: the shapes from rank %d have %zu bytes, not %zu", qr_dist_rank(), root, n, len);
    if (st == QR_OK && qr_dist_rank() != root) {
        memcpy(o->per_sample, buf, nv * sizeof *o->per_sample);
        memcpy(o->last, buf + nv * sizeof *o->per_sample, nv * sizeof *o->last);
    }
    free(buf);
    return st;
}

/* o's f32 outputs of calib's first measure_samples (every batch; split: this rank's share of them,
 * and every rank gets the shapes), on threads kernel threads; keep: the executor is kept there
 * (NULL on an error), not freed. */
static qr_status outref_run(outref *o, qr_qctx *q, const qr_tensor *calib, int64_t count, int split, int threads,
                            qr_exec **keep)
{
    const qr_graph *g = q->g;
    qr_status st = outref_alloc(o, q, count);
    if (st != QR_OK)
        return st;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_exec_opts eo = {.threads = threads, .observer = observe_shapes, .observer_user = o};
    qr_exec *x = NULL;
    /* outputs are judged against the model before a bias correction changed it (q->ref) */
    st = in ? qr_exec_new(q->ref ? q->ref : g, &eo, &x, q->e) : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < o->nbatches; k++) {
        int64_t at = k * o->batch, b = o->n - at < o->batch ? o->n - at : o->batch;
        if (split && !my_batch(k, o->nbatches))
            continue;
        qr_plan_take_inputs(q, calib, g->n_inputs, at, b, in);
        o->cur_b = b;
        for (int i = 0; i < g->n_inputs; i++) /* no node produces them: their shapes as given (symbolic ones) */
            observe_shapes(o, NULL, g->inputs[i], &in[i]);
        st = qr_exec_run(x, in, &o->out[k * g->n_outputs], q->e);
        qr_plan_drop_inputs(q, calib, at, b);
    }
    if (x) {
        qr_exec_stats es;
        qr_exec_get_stats(x, &es);
        o->run_bytes = (es.dynamic ? es.peak_bytes : es.arena_bytes) + es.work_bytes;
    }
    free(in);
    if (split)
        st = share_shapes(q, o, o->nbatches, st);
    if (st != QR_OK)
        outref_free(o);
    if (keep && st == QR_OK)
        *keep = x;
    else
        qr_exec_free(x);
    return st;
}

static qr_status outref_init(outref *o, qr_qctx *q, const qr_tensor *calib, int64_t count, int split)
{
    return outref_run(o, q, calib, count, split, q->o->threads, NULL);
}

/* The f32 values of one batch, handed from the f32 run to the runs measured against it (the
 * "readers"), which run beside it, each on its own thread, one at a time: whoever runs holds mu,
 * and lets the others run only while it waits. The f32 run waits once it has handed over a value
 * until every reader has read what it has (or waits for a value still to come); a reader waits for
 * a value the f32 run has not yet computed. So a value lives from the f32 node that computes it to
 * its last reader's node, not for the whole batch: the peak is a value or a few, not the batch's
 * every value. Each value is computed the same as if the whole f32 run came first. */
typedef struct refs {
    qr_qctx *q;
    qr_tensor *t;          /* by value id of the original graph: its f32 value in the current batch */
    int *readers;          /* by value id: the readers that read it */
    int *left;             /* by value id: readers yet to read it in this batch */
    int *waiting;          /* by value id: readers waiting for it */
    unsigned char *there;  /* by value id: the f32 run has computed it this batch (t may be empty: not f32) */
    size_t pending;        /* bytes of values handed over and not yet read by all */
    int running;           /* readers neither waiting for a value nor finished */
    int f32_done;          /* the f32 run of this batch has finished (a value not there now never will be) */
    double f32_waited;     /* ms the f32 run of this batch waited for its readers */
    outref *o;             /* the f32 outputs and shapes to keep, or NULL */
    unsigned char *f32_idle; /* by node index of the model, or NULL: no reader needs it (not run) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} refs;

enum { LOCAL = 1, FRESH, OWN };

/* A slot's sums a measurement adds up (qr_slot's fields of the same names), by index into a run's
 * own sums (measure.sums: NSUMS per slot), so that runs of different batches side by side add into
 * their own. */
enum { SX2, SE2, N, CLIPPED, ISX2, ISE2, LX2, LE2, LN, LR2, OE2, NSUMS };

typedef struct measure {
    qr_qctx *q;
    refs *r;
    const qr_graph *g; /* the graph it runs */
    void *user;        /* its kernel_user */
    qr_observer_fn obs;
    unsigned char *want; /* by value id of the original graph: it reads that value's f32 */
    unsigned char *idle; /* by node index of g, or NULL: nothing its observer reads needs it (not run) */
    /* by node index of g, or NULL (the cumulative QDQ run and the integer run): a node of the model
     * that reads only the model's unquantized values and constants, so computes the f32 run's
     * values to the bit (the same kernel on the same inputs): not run, its outputs the f32 run's
     * where a node that runs reads them (want), nothing where only such nodes do (clean_nodes) */
    unsigned char *clean;
    int *mid; /* with clean: by value id of g, the model's value it is (-1: none) */
    /* observe_slots: LOCAL replaces each value by its f32 value (quantized where it is); FRESH
     * (rank = gain) only the quantized ones, so that what f32 nodes make of their rounding reaches
     * the next quantized value; OWN (rank = gain) replaces each quantized value by its f32 value,
     * unquantized: each layer's error from f32 inputs. 0: the cumulative error */
    int local;
    double *out_x2, *out_e2; /* or NULL: by output index, the f32 energy and error of the outputs not slots */
    double *sums;            /* by slot, NSUMS of them: this run's */
    const qr_value **ival; /* by slot: its integers in the integer graph, or NULL */
    /* by slot: [0] 1 when ival holds them channels last (quantizer/layout.h), [1..3] its H, W, C as
     * the graph knows them (for a flattened twin, whose tensor does not say) */
    int64_t (*ival_nhwc)[4];
    qr_exec *x;
    const qr_tensor *in;
    /* a batch run in parts (side_by_side's sub): this run's samples [sub_at, sub_at + sub_b) of
     * the batch; lanes (by slot, SUM_LANES of them), the cumulative sums' lanes carried over the
     * parts and added at the batch's end, so that every sum is the doubles of one run of the batch;
     * mixed: a value measured whose first axis is not the samples (the parts' order is not the
     * batch's) */
    double (*lanes)[3];
    int64_t sub_at, sub_b;
    int mixed;
    qr_error e;
    qr_status st;
} measure;

/* A slot the measurement quantizes. */
static int active(const qr_qctx *q, int id)
{
    int si = id >= 0 && id < q->g->n_values ? q->slot_of[id] : -1;
    return si >= 0 && !q->slots[si].fallback;
}

/* Index of v among the model's outputs, or -1. */
static int output_index(const qr_graph *g, const qr_value *v)
{
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k]->id == v->id)
            return k;
    return -1;
}

/* Sums of a^2 and of (a - fq(b))^2: the error of b once quantized as slot s is, against a. */
static void quantized_error(const qr_slot *s, const float *a, const float *b, int64_t cnt, double *x2, double *e2)
{
    float y[1024];
    for (int64_t at = 0; at < cnt; at += 1024) {
        int64_t m = cnt - at < 1024 ? cnt - at : 1024;
        qr_plan_fake_quant(b + at, y, m, (float)s->qp.scale, s->qp.zero, s->qt.qmin, s->qt.qmax);
        for (int64_t i = 0; i < m; i++) {
            double d = (double)a[at + i] - (double)y[i];
            *x2 += (double)a[at + i] * a[at + i];
            *e2 += d * d;
        }
    }
}

/* The f32 run's observer: a value some reader reads, handed over; then the readers run first. */
static void observe_f32(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    refs *r = user;
    if (r->o)
        observe_shapes(r->o, n, v, t);
    if (!original(r->q, v) || !r->readers[v->id])
        return;
    qr_tensor *c = &r->t[v->id];
    qr_tensor_free(c);
    if (t->dtype == QR_F32) {
        *c = *t;
        c->data = NULL;
        qr_error e;
        if (qr_tensor_alloc(c, &e) == QR_OK) {
            memcpy(c->data, t->data, qr_tensor_nbytes(t));
            r->pending += qr_tensor_nbytes(t);
        }
    }
    r->there[v->id] = 1;
    r->left[v->id] = r->readers[v->id];
    r->running += r->waiting[v->id]; /* running again (before they wake up: this run waits for them) */
    r->waiting[v->id] = 0;
    pthread_cond_broadcast(&r->cv);
    if (r->pending > 0 && r->running > 0) {
        double t = qr_plan_now_ms();
        while (r->pending > 0 && r->running > 0)
            pthread_cond_wait(&r->cv, &r->mu);
        r->f32_waited += qr_plan_now_ms() - t;
    }
}

/* Value id's f32 in this batch, waiting for the f32 run to compute it; NULL when it does not (not
 * f32, or the run failed). The caller gives it back with give_back. */
static const float *take(refs *r, int id, int64_t count)
{
    if (!r->there[id] && !r->f32_done) {
        r->running--;
        r->waiting[id]++;
        pthread_cond_broadcast(&r->cv);
        while (!r->there[id] && !r->f32_done)
            pthread_cond_wait(&r->cv, &r->mu);
        if (!r->there[id]) { /* the run ended without it */
            r->running++;
            r->waiting[id]--;
        }
    }
    const qr_tensor *c = &r->t[id];
    return c->data && qr_tensor_numel(c) == count ? c->data : NULL;
}

/* A reader is done with value id: freed after its last reader. */
static void give_back(refs *r, int id)
{
    if (!r->there[id] || --r->left[id] > 0)
        return;
    r->pending -= r->t[id].data ? qr_tensor_nbytes(&r->t[id]) : 0;
    qr_tensor_free(&r->t[id]);
    pthread_cond_broadcast(&r->cv);
}

/* The measurements' sums over a value's elements, in SUM_LANES lanes (element i in lane i %
 * SUM_LANES, each lane in element order, the lanes added in order at the end: vectors, and the
 * same doubles for any threads). at: the element index of a[0] (blocks keep their lanes). */
enum { SUM_LANES = 8 };

/* lanes[.][0] += a^2, [1] += (a - b)^2, [2] += (a - y)^2 (y NULL: nothing). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void lane_sums(
    const float *a, const float *b, const float *y, int64_t n, int64_t at, double lanes[][3])
{
    double x2[SUM_LANES], e2[SUM_LANES], r2[SUM_LANES];
    for (int j = 0; j < SUM_LANES; j++)
        x2[j] = lanes[j][0], e2[j] = lanes[j][1], r2[j] = lanes[j][2];
    int64_t i = 0, j0 = at % SUM_LANES;
    for (; i < n && (j0 + i) % SUM_LANES; i++) { /* to a lane boundary */
        int j = (int)((j0 + i) % SUM_LANES);
        double av = a[i], d = av - (double)b[i], r = y ? av - (double)y[i] : 0;
        x2[j] += av * av, e2[j] += d * d, r2[j] += r * r;
    }
    if (y)
        for (; i + SUM_LANES <= n; i += SUM_LANES)
            for (int j = 0; j < SUM_LANES; j++) {
                double av = a[i + j], d = av - (double)b[i + j], r = av - (double)y[i + j];
                x2[j] += av * av, e2[j] += d * d, r2[j] += r * r;
            }
    else
        for (; i + SUM_LANES <= n; i += SUM_LANES)
            for (int j = 0; j < SUM_LANES; j++) {
                double av = a[i + j], d = av - (double)b[i + j];
                x2[j] += av * av, e2[j] += d * d;
            }
    for (; i < n; i++) {
        int j = (int)((j0 + i) % SUM_LANES);
        double av = a[i], d = av - (double)b[i], r = y ? av - (double)y[i] : 0;
        x2[j] += av * av, e2[j] += d * d, r2[j] += r * r;
    }
    for (int j = 0; j < SUM_LANES; j++)
        lanes[j][0] = x2[j], lanes[j][1] = e2[j], lanes[j][2] = r2[j];
}

/* lanes[.][2] += the elements outside [lo, hi] (a count, exact in a double). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void lane_clipped(const float *a, int64_t n,
                                                                                       double lo, double hi,
                                                                                       double lanes[][3])
{
    int64_t c[SUM_LANES] = {0};
    int64_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int j = 0; j < SUM_LANES; j++)
            c[j] += (double)a[i + j] < lo || (double)a[i + j] > hi;
    for (; i < n; i++)
        c[0] += (double)a[i] < lo || (double)a[i] > hi;
    for (int j = 0; j < SUM_LANES; j++)
        lanes[j][2] += (double)c[j];
}

/* The lanes' three sums, each added in lane order, onto *s0, *s1, *s2. */
static void add_lanes(double lanes[][3], double *s0, double *s1, double *s2)
{
    double t[3] = {0, 0, 0};
    for (int j = 0; j < SUM_LANES; j++)
        for (int k = 0; k < 3; k++)
            t[k] += lanes[j][k];
    *s0 += t[0], *s1 += t[1], *s2 += t[2];
}

static void observe_slots(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    measure *ms = user;
    qr_qctx *q = ms->q;
    if (ms->local == OWN && n && !original(q, v) && !strcmp(n->op, "DequantizeLinear")) {
        /* a quantized model input: its readers read it as given (no run hands graph inputs over) */
        for (int i = 0; i < q->g->n_inputs; i++) {
            int id = q->g->inputs[i]->id;
            if (active(q, id) && n->in[0] && q->qval[id] == n->in[0]->id && ms->in[i].dtype == QR_F32 &&
                qr_tensor_numel(&ms->in[i]) == qr_tensor_numel(t) && t->dtype == QR_F32)
                memcpy(t->data, ms->in[i].data, qr_tensor_nbytes(t));
        }
        return;
    }
    if (!original(q, v) || !ms->want[v->id])
        return;
    int si = q->slot_of[v->id];
    int64_t cnt = qr_tensor_numel(t);
    const float *a = take(ms->r, v->id, cnt);
    if (!a || t->dtype != QR_F32) {
        give_back(ms->r, v->id);
        return;
    }
    float *b = t->data;
    if (ms->clean && n && ms->clean[n->id]) /* supplied: the f32 run's value is this run's to the bit */
        memcpy(b, a, qr_tensor_nbytes(t));
    if (si < 0 || q->slots[si].fallback) { /* read only when local, or a model output */
        int k = ms->out_e2 ? output_index(q->g, v) : -1;
        for (int64_t i = 0; k >= 0 && i < cnt; i++) { /* as the quantized model computes it */
            double d = (double)a[i] - (double)b[i];
            ms->out_x2[k] += (double)a[i] * a[i];
            ms->out_e2[k] += d * d;
        }
        /* what f32 nodes compute from quantized inputs is not this layer's error */
        if (ms->local == LOCAL)
            memcpy(b, a, qr_tensor_nbytes(t));
        give_back(ms->r, v->id);
        return;
    }
    const qr_slot *s = &q->slots[si];
    double *S = ms->sums + (size_t)si * NSUMS;
    if (ms->local == OWN) { /* its error from f32 inputs; its readers read f32 */
        for (int64_t i = 0; i < cnt; i++)
            S[OE2] += ((double)a[i] - (double)b[i]) * ((double)a[i] - (double)b[i]);
        memcpy(b, a, qr_tensor_nbytes(t));
        give_back(ms->r, v->id);
        return;
    }
    if (ms->local) {
        /* b's error against a, then b replaced by a's own rounding (all its readers see of it here)
         * and that error: one pass in blocks, the three sums side by side, each in element order */
        double sums[SUM_LANES][3] = {{0}};
        float y[1024];
        for (int64_t at = 0; at < cnt; at += 1024) {
            int64_t m = cnt - at < 1024 ? cnt - at : 1024;
            float *z = b + at;
            qr_plan_fake_quant(a + at, y, m, (float)s->qp.scale, s->qp.zero, s->qt.qmin, s->qt.qmax);
            lane_sums(a + at, z, y, m, at, sums);
            memcpy(z, y, sizeof *y * (size_t)m);
        }
        add_lanes(sums, S + LX2, S + LE2, S + LR2);
        S[LN] += (double)cnt;
        give_back(ms->r, v->id);
        return;
    }
    double lo = (double)(s->qt.qmin - s->qp.zero) * s->qp.scale, hi = (double)(s->qt.qmax - s->qp.zero) * s->qp.scale;
    if (ms->lanes) { /* a part of the batch (sub_b 0: all of it): its elements at their places in the batch's lanes */
        if (ms->sub_b > 0 && (t->ndim < 1 || t->dims[0] != ms->sub_b)) {
            ms->mixed = 1;
            give_back(ms->r, v->id);
            return;
        }
        int64_t at = ms->sub_b > 0 ? ms->sub_at * (cnt / ms->sub_b) : 0;
        lane_sums(a, b, NULL, cnt, at, ms->lanes + (size_t)si * SUM_LANES);
        lane_clipped(a, cnt, lo, hi, ms->lanes + (size_t)si * SUM_LANES); /* counts: exact in any order */
        S[N] += (double)cnt;
        give_back(ms->r, v->id);
        return;
    }
    double sums[SUM_LANES][3] = {{0}};
    lane_sums(a, b, NULL, cnt, 0, sums);
    lane_clipped(a, cnt, lo, hi, sums);
    add_lanes(sums, S + SX2, S + SE2, S + CLIPPED);
    S[N] += (double)cnt;
    give_back(ms->r, v->id);
}

/* The readers' qr_exec_opts.supplied: a node nothing the reader reads needs (measure.idle: past the
 * last value it measures) does not run; nor, in the local measurement, a node whose every output
 * observe_slots replaces by its f32 value (LOCAL: a value of the model that is not quantized, nor a
 * model output whose error the run sums), taken here as observe_slots will take it (NULL: it runs). */
static int local_supplied(void *user, const qr_node *n, qr_tensor *const *out)
{
    measure *ms = user;
    qr_qctx *q = ms->q;
    int any = 0;
    if (ms->idle && ms->idle[n->id])
        return 1;
    if (ms->clean && ms->clean[n->id]) { /* observe_slots copies the f32 values in */
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] && ms->want[ms->mid[n->out[j]->id]] &&
                !take(ms->r, ms->mid[n->out[j]->id], qr_tensor_numel(out[j])))
                return 0; /* not handed over (never here: clean_nodes takes f32 values only) */
        return 1;
    }
    if (ms->local != LOCAL || ms->obs != observe_slots)
        return 0;
    for (int j = 0; j < n->n_out; j++) {
        const qr_value *v = n->out[j];
        if (!v)
            continue;
        if (!original(q, v) || !ms->want[v->id] || active(q, v->id) || out[j]->dtype != QR_F32 ||
            (ms->out_e2 && output_index(q->g, v) >= 0) || !take(ms->r, v->id, qr_tensor_numel(out[j])))
            return 0;
        any = 1;
    }
    return any;
}

/* One integer v of a slot, dequantized, against its f32 value a. */
static inline void int_error(const qr_slot *s, double *S, float a, int64_t v)
{
    double d = (double)a - (double)(v - s->qp.zero) * s->qp.scale;
    S[ISX2] += (double)a * a;
    S[ISE2] += d * d;
}

/* The integers of slot s (t, ival_nhwc its layout), dequantized, against its f32 value a. */
static void compare_ints(const qr_slot *s, double *S, const float *a, const qr_tensor *t, const int64_t *ival_nhwc)
{
    int64_t cnt = qr_tensor_numel(t);
    int turned = ival_nhwc[0] == 1;
    int64_t nhwc[4] = {t->dims[0], ival_nhwc[1], ival_nhwc[2], ival_nhwc[3]};
    if (turned && t->ndim == 4)
        memcpy(nhwc, t->dims, sizeof nhwc);
    else if (turned && (t->ndim != 2 || nhwc[1] <= 0 || nhwc[2] <= 0 || nhwc[3] <= 0))
        return; /* a flattened twin of unknown dims: not measured */
    int64_t nc = nhwc[3], hw = nhwc[1] * nhwc[2];
    if (t->dtype == QR_U8 || t->dtype == QR_I8) {
        /* 8 bits: each integer's dequantized value from a table of the same doubles int_error
         * computes (a call per element to read it cost ResNet-18 as much as its integer graph),
         * the sums in the same order */
        double dq[256], x2 = S[ISX2], e2 = S[ISE2];
        const uint8_t *u = t->data, flip = t->dtype == QR_I8 ? 0x80 : 0; /* i8 b is table entry b ^ 0x80 */
        for (int v = 0; v < 256; v++)
            dq[v] = (double)((int64_t)v - (flip ? 128 : 0) - s->qp.zero) * s->qp.scale;
        for (int64_t b = 0, i = 0; b < (turned ? nhwc[0] : 1); b++)
            for (int64_t c = 0; c < (turned ? nc : 1); c++)
                for (int64_t px = 0; px < (turned ? hw : cnt); px++, i++) {
                    double av = a[i], d = av - dq[u[turned ? (b * hw + px) * nc + c : i] ^ flip];
                    x2 += av * av;
                    e2 += d * d;
                }
        S[ISX2] = x2, S[ISE2] = e2;
        return;
    }
    if (!turned) {
        for (int64_t i = 0; i < cnt; i++)
            int_error(s, S, a[i], qr_get_i64(t->data, t->dtype, i));
        return;
    }
    /* channels last: element (n, c, p) of the f32 value is (n, p, c) of the integers */
    for (int64_t b = 0; b < nhwc[0]; b++)
        for (int64_t c = 0; c < nc; c++)
            for (int64_t px = 0; px < hw; px++)
                int_error(s, S, a[(b * nc + c) * hw + px], qr_get_i64(t->data, t->dtype, (b * hw + px) * nc + c));
}

/* The integer graph's integers of a slot, dequantized, against the f32 value. */
static void observe_ints(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    measure *ms = user;
    qr_qctx *q = ms->q;
    int id = ms->clean && n && ms->clean[n->id] ? ms->mid[v->id] : -1;
    if (id >= 0 && ms->want[id]) { /* supplied: the f32 run's value, this run's to the bit */
        const float *a = take(ms->r, id, qr_tensor_numel(t));
        if (a && t->dtype == QR_F32)
            memcpy(t->data, a, qr_tensor_nbytes(t));
        int slot = q->slot_of[id] >= 0 && ms->ival[q->slot_of[id]]; /* its comparison gives it back */
        if (!slot)
            give_back(ms->r, id);
        return;
    }
    for (int si = 0; si < q->nslots; si++) {
        if (ms->ival[si] != v)
            continue;
        const qr_slot *s = &q->slots[si];
        if (!ms->want[s->value])
            return;
        const float *a = take(ms->r, s->value, qr_tensor_numel(t));
        if (ms->sub_b > 0 && (t->ndim < 1 || t->dims[0] != ms->sub_b))
            ms->mixed = 1; /* measured all the same: in the parts' order */
        if (a && qr_dtype_is_int(t->dtype))
            compare_ints(s, ms->sums + (size_t)si * NSUMS, a, t, ms->ival_nhwc[si]);
        give_back(ms->r, s->value);
        return;
    }
}

/* A reader's run of one batch, on its own thread (the first on the caller's). */
static void *read_batch(void *p)
{
    measure *ms = p;
    refs *r = ms->r;
    pthread_mutex_lock(&r->mu);
    ms->st = qr_plan_run_once(ms->x, ms->g, ms->in, &ms->e);
    r->running--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

typedef struct f32_run {
    refs *r;
    qr_exec *x;
    const qr_tensor *in;
    qr_tensor *out; /* where its outputs go, or NULL: dropped */
    double ms;      /* its own time over the batches so far: the runs' but their waits for the readers */
    qr_error e;
    qr_status st;
} f32_run;

static void *f32_batch(void *p)
{
    f32_run *f = p;
    refs *r = f->r;
    pthread_mutex_lock(&r->mu);
    double t = qr_plan_now_ms();
    r->f32_waited = 0;
    f->st = f->out ? qr_exec_run(f->x, f->in, f->out, &f->e) : qr_plan_run_once(f->x, r->q->g, f->in, &f->e);
    f->ms += qr_plan_now_ms() - t - r->f32_waited;
    r->f32_done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Which f32 values reader ms reads: those the f32 run computes that obs uses where ms's graph
 * computes them (the local measurement every one, the others the slots'). */
static void mark_wanted(measure *ms)
{
    qr_qctx *q = ms->q;
    for (int k = 0; k < ms->g->n_nodes; k++) {
        const qr_node *n = ms->g->nodes[k];
        for (int j = 0; j < n->n_out; j++) {
            const qr_value *v = n->out[j];
            if (v && ms->obs == observe_slots && original(q, v) && q->g->values[v->id]->producer) {
                int si = q->slot_of[v->id];
                ms->want[v->id] = ms->local == LOCAL || (si >= 0 && !q->slots[si].fallback) ||
                                  (ms->out_e2 && output_index(q->g, v) >= 0);
            }
            for (int s = 0; v && ms->obs == observe_ints && s < q->nslots; s++)
                if (ms->ival[s] == v && q->g->values[q->slots[s].value]->producer)
                    ms->want[q->slots[s].value] = 1;
        }
    }
}

/* Where the sums the readers add up live: each slot's (NSUMS, in their order), then for each reader
 * that keeps them its outputs' f32 energies and then their errors; *n of them in *at (malloc'd). A
 * run's own sums (measure.sums, out_x2, out_e2) lie in the same order. */
static qr_status reader_sums(qr_qctx *q, const measure *ms, int nr, double ***at, int *n)
{
    int no = q->g->n_outputs, k = 0;
    double **a = malloc(sizeof *a * ((size_t)q->nslots * NSUMS + (size_t)nr * 2 * (size_t)no + 1));
    if (!a)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        double *f[NSUMS] = {[SX2] = &s->sx2, [SE2] = &s->se2, [N] = &s->n, [CLIPPED] = &s->clipped,
                            [ISX2] = &s->isx2, [ISE2] = &s->ise2, [LX2] = &s->lx2, [LE2] = &s->le2,
                            [LN] = &s->ln, [LR2] = &s->lr2, [OE2] = &s->oe2};
        for (int j = 0; j < NSUMS; j++)
            a[k++] = f[j];
    }
    for (int r = 0; r < nr; r++) {
        for (int j = 0; ms[r].out_e2 && j < no; j++)
            a[k++] = &ms[r].out_x2[j];
        for (int j = 0; ms[r].out_e2 && j < no; j++)
            a[k++] = &ms[r].out_e2[j];
    }
    *at = a;
    *n = k;
    return QR_OK;
}

/* side_by_side's work, shared by its groups: the batches (ks, nk of them; group g of ng runs ks[g],
 * ks[g + ng], ...), and the rows their sums go to (bs). */
typedef struct sbs {
    qr_qctx *q;
    const measure *ms; /* the caller's readers */
    int nr, nsums, threads;
    const qr_tensor *calib;
    outref *o;
    int64_t n, batch, nb;
    const int64_t *ks;
    int nk, ng;
    _Atomic int failed; /* a group failed: the others stop after their batch */
    bsums *bs;
    int share; /* shares_packing of the readers' common graph: -1 not yet asked (group_new) */
    /* each batch run in parts of sub samples (0: whole; never with o), the same sums (measure's
     * lanes); whole: a part measured a value not laid out by samples (measure.mixed), so every
     * batch from then on runs whole, that one again (only a cumulative QDQ reader: nothing else
     * counts what it ran) */
    int64_t sub;
    _Atomic int whole;
} sbs;

/* A group: an f32 run and the readers, one batch at a time, with executors, values handed over and
 * sums of its own. */
typedef struct sbs_group {
    sbs *w;
    int index;
    refs r;
    f32_run f;
    measure *ms; /* copies of the caller's readers */
    qr_tensor *in;
    double *sums; /* nsums: this batch's, as bsums lays them out */
    int made;     /* r's mutex and condition made */
    int64_t most; /* the most samples one of its runs took */
    qr_error e;
    qr_status st;
} sbs_group;

static void group_free(sbs_group *G)
{
    sbs *w = G->w;
    qr_exec_free(G->f.x);
    for (int k = 0; G->ms && k < w->nr; k++) {
        qr_exec_free(G->ms[k].x);
        free(G->ms[k].want);
        free(G->ms[k].idle);
        free(G->ms[k].lanes);
        free(G->ms[k].clean), free(G->ms[k].mid);
    }
    if (G->made) {
        pthread_cond_destroy(&G->r.cv);
        pthread_mutex_destroy(&G->r.mu);
    }
    free(G->ms), free(G->in), free(G->sums);
    free(G->r.t), free(G->r.readers), free(G->r.left), free(G->r.waiting), free(G->r.there), free(G->r.f32_idle);
}

/* Whether runs of graph g (a measured QDQ graph) may share their kernels' packings
 * (qr_exec_share_cache): no value of it made from constants alone by its nodes (qr_kinput_fixed's,
 * as the executor marks them) is one of the model's values that an observer may rewrite (one a
 * node of the model computes: observe_slots writes its f32 value or its rounding there, which
 * another run does not). A weight's DequantizeLinear makes a value of its own, which none does. */
static int shares_packing(const qr_qctx *q, const qr_graph *g)
{
    unsigned char *fixed = calloc((size_t)g->n_values + 1, 1);
    if (!fixed)
        return 0;
    qr_exec_mark_fixed(g, fixed);
    int ok = 1;
    for (int i = 0; ok && i < g->n_values; i++) {
        const qr_value *v = g->values[i];
        if (fixed[i] && v->producer && original(q, v) && q->g->values[v->id]->producer)
            ok = 0;
    }
    free(fixed);
    return ok;
}

/* The f32 model's nodes in the order reader graph rg runs the values they make (NULL: none to
 * follow, or out of memory: the graph's own order). The f32 run hands a value to the readers and
 * waits until they took it only while one of them runs; a reader waiting for a value the f32 run
 * makes later lets it run on, keeping each value it makes for the readers meanwhile. In the graph's
 * order (sweeps of the toposort) the QDQ graph's Q/DQ pairs put the branches of a model in another
 * order than the f32 graph's: PP-OCR det's local measurement held 146 values, 256 MiB, so. Each node
 * takes the place in rg's run of the first value it makes there (a node rg does not run: that of
 * its latest input's producer), and the nodes run by that place, ties in graph order, producers
 * first. Only the order changes: every value is the same bytes. */
static int *f32_order_like(const qr_qctx *q, const qr_graph *rg)
{
    const qr_graph *g = q->g;
    int nn = g->n_nodes, rn = rg->n_nodes;
    int *ro = malloc(sizeof *ro * ((size_t)rn + 1)), *key = malloc(sizeof *key * ((size_t)nn + 1));
    int *deg = calloc((size_t)nn + 1, sizeof *deg), *seq = malloc(sizeof *seq * ((size_t)nn + 1));
    unsigned char *done = calloc((size_t)nn + 1, 1);
    if (!ro || !key || !deg || !seq || !done || qr_exec_order(rg, ro) != QR_OK) {
        free(ro), free(key), free(deg), free(seq), free(done);
        return NULL;
    }
    for (int i = 0; i < nn; i++)
        key[i] = -1;
    for (int k = 0; k < rn; k++) {
        const qr_node *n = rg->nodes[ro[k]];
        for (int j = 0; j < n->n_out; j++) {
            const qr_value *v = n->out[j];
            const qr_node *p = v && original(q, v) ? g->values[v->id]->producer : NULL;
            if (p && key[p->id] < 0)
                key[p->id] = k;
        }
    }
    /* g's nodes are in a topological order: each producer's key is known before its readers' */
    for (int i = 0; i < nn; i++) {
        const qr_node *n = g->nodes[i];
        int late = -1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->producer) {
                deg[i]++;
                if (key[n->in[j]->producer->id] > late)
                    late = key[n->in[j]->producer->id];
            }
        if (key[i] < 0)
            key[i] = late;
    }
    /* the ready node of the least (key, index) next: quadratic in the nodes, a few hundred */
    for (int k = 0; k < nn; k++) {
        int best = -1;
        for (int i = 0; i < nn; i++)
            if (!done[i] && deg[i] == 0 && (best < 0 || key[i] < key[best]))
                best = i;
        if (best < 0) { /* not a DAG as ordered: keep the graph's order */
            free(seq);
            seq = NULL;
            break;
        }
        done[best] = 1;
        seq[k] = best;
        const qr_node *n = g->nodes[best];
        for (int i = best + 1; i < nn; i++)
            for (int j = 0; j < g->nodes[i]->n_in; j++)
                if (g->nodes[i]->in[j] && g->nodes[i]->in[j]->producer == n)
                    deg[i]--;
    }
    free(ro), free(key), free(deg), free(done);
    return seq;
}

static int *share_map(const qr_graph *g, const qr_graph *d);

/* By node index of g, the nodes whose outputs nothing needs: neither read by the measurement
 * (want, by value id of the original graph; wanted_g, by value id of g, or NULL) nor by a node that
 * is needed. A node made of constants alone stays (the run counter does not count it, and it is
 * cheap). NULL: none, or out of memory (every node runs: the same sums). The model's tail in f32
 * after the last quantized tensor is such a run's idle work in the measurement of what ships. */
static unsigned char *idle_nodes(const qr_qctx *q, const qr_graph *g, const unsigned char *want,
                                 const unsigned char *wanted_g)
{
    int nn = g->n_nodes, any = 0;
    int *order = malloc(sizeof *order * ((size_t)nn + 1));
    unsigned char *need = calloc((size_t)g->n_values + 1, 1), *fixed = calloc((size_t)g->n_values + 1, 1);
    unsigned char *idle = calloc((size_t)nn + 1, 1);
    if (!order || !need || !fixed || !idle || qr_exec_order(g, order) != QR_OK) {
        free(order), free(need), free(fixed), free(idle);
        return NULL;
    }
    qr_exec_mark_fixed(g, fixed);
    for (int k = nn - 1; k >= 0; k--) { /* readers before producers */
        const qr_node *n = g->nodes[order[k]];
        int needed = n->dead || n->n_out == 0, consts = n->n_out > 0;
        for (int j = 0; j < n->n_out; j++) {
            const qr_value *v = n->out[j];
            if (!v)
                continue;
            needed |= need[v->id] || (wanted_g && wanted_g[v->id]) || (want && original(q, v) && want[v->id]);
            consts &= fixed[v->id];
        }
        if (needed || consts) {
            for (int j = 0; j < n->n_in; j++)
                if (n->in[j])
                    need[n->in[j]->id] = 1;
        } else
            idle[n->id] = any = 1;
    }
    free(order), free(need), free(fixed);
    if (!any) {
        free(idle);
        idle = NULL;
    }
    return idle;
}

static int same_value(const qr_value *a, const qr_value *b);
static int same_attr(const qr_attr *a, const qr_attr *b);

/* The model's value that v of g (a QDQ or integer graph of it) is, by name, or NULL. */
static const qr_value *model_value(const qr_qctx *q, const qr_value *v)
{
    if (original(q, v))
        return q->g->values[v->id];
    const qr_value *m = qr_graph_find(q->g, v->name);
    return m && m->t.dtype == v->t.dtype && m->t.ndim == v->t.ndim &&
                   !memcmp(m->t.dims, v->t.dims, sizeof *m->t.dims * (size_t)(v->t.ndim > 0 ? v->t.ndim : 0))
               ? m
               : NULL;
}

/* By node index of g (a QDQ or integer graph of the model), or NULL (none, or out of memory: every
 * node runs, the same sums): the nodes measure.clean describes. A node is clean when it is the
 * model's node that makes its outputs (the same op and attributes; f32 outputs of the model's
 * names and shapes) and reads what that node reads: the same constants, unquantized model inputs
 * and outputs of clean nodes. No Q or DQ node is upstream of it, so its values are the f32 run's.
 * *mid: by value id of g, the model's value (-1: none). want (by value id of the model) gets the
 * clean values a node that runs reads, and the clean outputs: the f32 run hands those over. What
 * ships on MobileNetV2 keeps its first 26 activations in f32: its QDQ and integer runs computed
 * them again beside the f32 run (stop 52). */
static unsigned char *clean_nodes(const qr_qctx *q, const qr_graph *g, const unsigned char *idle, unsigned char *want,
                                  int **mid)
{
    int nn = g->n_nodes, any = 0;
    int *order = malloc(sizeof *order * ((size_t)nn + 1)), *m = malloc(sizeof *m * ((size_t)g->n_values + 1));
    unsigned char *ok = calloc((size_t)g->n_values + 1, 1), *clean = calloc((size_t)nn + 1, 1);
    *mid = NULL;
    if (!order || !m || !ok || !clean || qr_exec_order(g, order) != QR_OK) {
        free(order), free(m), free(ok), free(clean);
        return NULL;
    }
    for (int i = 0; i < g->n_values; i++) {
        const qr_value *mv = model_value(q, g->values[i]);
        m[i] = mv ? mv->id : -1;
    }
    for (int i = 0; i < g->n_inputs; i++) { /* an input quantized is read through its Q and DQ */
        const qr_value *v = g->inputs[i];
        ok[v->id] = m[v->id] >= 0 && !q->g->values[m[v->id]]->producer && !active(q, m[v->id]);
    }
    for (int k = 0; k < nn; k++) {
        const qr_node *n = g->nodes[order[k]];
        /* the same node as the model's that makes its first output: op, attributes, inputs */
        const qr_value *o0 = n->n_out > 0 && n->out[0] && m[n->out[0]->id] >= 0 ? q->g->values[m[n->out[0]->id]] : NULL;
        const qr_node *p = o0 ? o0->producer : NULL;
        int c = !n->dead && p && !strcmp(n->op, p->op) && !strcmp(n->domain, p->domain) && n->opset == p->opset &&
                n->n_in == p->n_in && n->n_out == p->n_out && n->n_attr == p->n_attr;
        for (int j = 0; c && j < n->n_attr; j++)
            c = same_attr(&n->attr[j], &p->attr[j]);
        for (int j = 0; c && j < n->n_out; j++)
            c = (!n->out[j] && !p->out[j]) || (n->out[j] && p->out[j] && m[n->out[j]->id] == p->out[j]->id &&
                                               n->out[j]->t.dtype == QR_F32);
        for (int j = 0; c && j < n->n_in; j++) {
            const qr_value *u = n->in[j], *w = p->in[j];
            c = (!u && !w) || (u && w && (u->is_const ? w->is_const && same_value(u, w) : ok[u->id] && m[u->id] == w->id));
        }
        for (int j = 0; c && j < n->n_out; j++)
            if (n->out[j])
                ok[n->out[j]->id] = 1;
        clean[n->id] = (unsigned char)c;
        any |= c;
    }
    /* what a node that runs (or the measurement) reads of them comes from the f32 run */
    for (int k = 0; any && k < nn; k++) {
        const qr_node *n = g->nodes[order[k]];
        if (clean[n->id] || (idle && idle[n->id]))
            continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && !n->in[j]->is_const && n->in[j]->producer && clean[n->in[j]->producer->id])
                want[m[n->in[j]->id]] = 1;
    }
    for (int i = 0; any && i < g->n_outputs; i++)
        if (g->outputs[i]->producer && clean[g->outputs[i]->producer->id])
            want[m[g->outputs[i]->id]] = 1;
    free(order), free(ok);
    if (!any) {
        free(clean), free(m);
        return NULL;
    }
    *mid = m;
    return clean;
}

/* The f32 run's qr_exec_opts.supplied: a node no reader needs does not run (refs.f32_idle). */
static int f32_supplied(void *user, const qr_node *n, qr_tensor *const *out)
{
    (void)out;
    const refs *r = user;
    return r->f32_idle && r->f32_idle[n->id];
}

/* G's runs made, on threads kernel threads each. */
static qr_status group_new(sbs *w, sbs_group *G)
{
    qr_qctx *q = w->q;
    size_t nv = (size_t)q->g->n_values + 1;
    int no = q->g->n_outputs;
    G->w = w;
    G->r = (refs){.q = q};
    G->r.t = calloc(nv, sizeof *G->r.t);
    G->r.readers = calloc(nv, sizeof *G->r.readers);
    G->r.left = calloc(nv, sizeof *G->r.left);
    G->r.waiting = calloc(nv, sizeof *G->r.waiting);
    G->r.there = calloc(nv, 1);
    G->in = calloc((size_t)q->g->n_inputs + 1, sizeof *G->in);
    G->ms = calloc((size_t)w->nr + 1, sizeof *G->ms);
    G->sums = calloc((size_t)w->nsums + 1, sizeof *G->sums);
    G->f = (f32_run){.r = &G->r, .in = G->in};
    if (!G->r.t || !G->r.readers || !G->r.left || !G->r.waiting || !G->r.there || !G->in || !G->ms || !G->sums)
        return qr_errorf(&G->e, "out of memory");
    if (pthread_mutex_init(&G->r.mu, NULL) != 0)
        return qr_errorf(&G->e, "cannot make a mutex");
    if (pthread_cond_init(&G->r.cv, NULL) != 0) {
        pthread_mutex_destroy(&G->r.mu);
        return qr_errorf(&G->e, "cannot make a condition variable");
    }
    G->made = 1;
    /* the first reader's order, when every reader reads the model's values where its graph makes
     * them (the local and cumulative measurements of one QDQ graph) */
    int follow = w->nr > 0;
    for (int k = 0; k < w->nr; k++)
        follow &= w->ms[k].obs == observe_slots && w->ms[k].g == w->ms[0].g;
    int *seq = follow ? f32_order_like(q, w->ms[0].g) : NULL;
    qr_exec_opts o32 = {.threads = w->threads, .observer = observe_f32, .observer_user = &G->r, .node_seq = seq,
                        .supplied = f32_supplied};
    qr_status st = qr_exec_new(q->g, &o32, &G->f.x, &G->e);
    free(seq);
    const qr_exec *packs = G->f.x; /* what keeps the f32 model's packings in this group */
    if (st == QR_OK && w->o && w->o->pack && w->o->pack_threads == w->threads && !q->ref) {
        qr_exec_share_cache(G->f.x, w->o->pack); /* only read: the groups may share it at once */
        packs = w->o->pack;
        if (w->ng == 1) /* a workspace is one run's at a time: one group's */
            qr_exec_share_work(G->f.x, w->o->pack);
    }
    double *outs = G->sums + (size_t)q->nslots * NSUMS; /* the readers' output sums, as reader_sums lays them */
    int back = 0; /* the f32 run takes a reader's packings */
    for (int k = 0; st == QR_OK && k < w->nr; k++) {
        measure *m = &G->ms[k];
        *m = w->ms[k];
        m->q = q, m->r = &G->r, m->in = G->in, m->x = NULL, m->st = QR_OK;
        m->sums = G->sums;
        if (m->out_e2) {
            m->out_x2 = outs, m->out_e2 = outs + no;
            outs += 2 * no;
        }
        if (!(m->want = calloc(nv, 1)))
            return qr_errorf(&G->e, "out of memory");
        if (w->sub > 0 && m->obs == observe_slots && !m->local &&
            !(m->lanes = calloc((size_t)q->nslots * SUM_LANES + 1, sizeof *m->lanes)))
            return qr_errorf(&G->e, "out of memory");
        mark_wanted(m);
        /* the cumulative measurement reads the values it measures (and the outputs it sums), not
         * what the model computes after them */
        if (m->obs == observe_slots && !m->local) {
            m->idle = idle_nodes(q, m->g, m->want, NULL);
            m->clean = clean_nodes(q, m->g, m->idle, m->want, &m->mid);
        }
        /* the integer graph's: the integers it compares (no narrow accumulator counting a layer
         * it would skip: with any, every node runs) */
        const qr_intgraph *ig = m->obs == observe_ints ? m->user : NULL;
        unsigned char *ints = ig && !ig->naccs ? calloc((size_t)m->g->n_values + 1, 1) : NULL;
        for (int si = 0; ints && si < q->nslots; si++)
            if (m->ival[si] && m->want[q->slots[si].value])
                ints[m->ival[si]->id] = 1;
        if (ints)
            m->idle = idle_nodes(q, m->g, NULL, ints);
        free(ints);
        if (ig)
            m->clean = clean_nodes(q, m->g, m->idle, m->want, &m->mid);
        for (size_t i = 0; i < nv; i++)
            G->r.readers[i] += m->want[i];
        qr_exec_opts oo = {.threads = w->threads, .observer = m->obs, .observer_user = m, .kernel_user = m->user,
                           .supplied = local_supplied};
        st = qr_exec_new(m->g, &oo, &m->x, &G->e);
        /* the group's runs take turns (whoever holds r.mu runs; a run waits only in its observer,
         * between kernels): one kernel workspace between them, the f32 run's */
        if (st == QR_OK)
            qr_exec_share_work(m->x, G->f.x);
        /* a QDQ graph's layers in f32 read the model's weights as the f32 run does: one packing of
         * them, the f32 run's (the group's runs take turns; the packing kept by o->pack, which
         * never runs meanwhile, or by the group's own f32 run). The cumulative reader alone: the
         * others rewrite values (share_map). MobileNetV3-small's measurement of what ships held
         * the f32 run's 10.4 MiB of packings beside its QDQ run's 8.4 */
        /* so does the integer graph's run beside the f32 run alone (the measurement of what ships'
         * second pass: no QDQ run packs for it) */
        int lone_int = m->obs == observe_ints && !back && packs == G->f.x;
        int *map = st == QR_OK && ((m->obs == observe_slots && !m->local) || lone_int) && !q->ref
                       ? share_map(q->g, m->g)
                       : NULL;
        if (map)
            st = qr_exec_share_cache_nodes(m->x, packs, map, &G->e);
        /* the reader runs a layer's kernel before it waits for the f32 run's value there, so it
         * packs first: the f32 run takes the reader's packing then (either may pack first) */
        if (map && st == QR_OK && packs == G->f.x && !back) {
            int *inv = malloc(sizeof *inv * ((size_t)q->g->n_nodes + 1));
            for (int i = 0; inv && i < q->g->n_nodes; i++)
                inv[i] = -1;
            for (int i = 0; inv && i < m->g->n_nodes; i++)
                if (map[i] >= 0)
                    inv[map[i]] = i;
            if (inv && (st = qr_exec_share_cache_nodes(G->f.x, m->x, inv, &G->e)) == QR_OK)
                back = 1;
            free(inv);
        }
        free(map);
        /* the integer graph's layers in f32 read the model's weights too: its run takes the QDQ
         * run's packing of them (that run packs them first, the f32 run taking it in turn) */
        if (st == QR_OK && m->obs == observe_ints && back && !lone_int && (map = share_map(G->ms[0].g, m->g))) {
            st = qr_exec_share_cache_nodes(m->x, G->ms[0].x, map, &G->e);
            free(map);
        }
        /* readers of one graph (the local measurement's and the cumulative one's) run one at a
         * time: one packing of its weights between them, whichever packs first */
        for (int j = 0; st == QR_OK && j < k; j++)
            if (G->ms[j].g == m->g && (w->share < 0 ? (w->share = shares_packing(q, m->g)) : w->share)) {
                qr_exec_share_cache(m->x, G->ms[j].x);
                qr_exec_share_cache(G->ms[j].x, m->x);
                break;
            }
    }
    /* the f32 run computes what its readers read; all of it where its outputs or shapes are kept */
    unsigned char *read = st == QR_OK && !w->o ? calloc(nv, 1) : NULL;
    for (size_t i = 0; read && i < nv; i++)
        read[i] = G->r.readers[i] > 0;
    if (read)
        G->r.f32_idle = idle_nodes(q, q->g, NULL, read);
    free(read);
    return st;
}

/* Samples [at, at + b) through G: the f32 run and the readers side by side, each on its own thread
 * (the first reader on this one), their sums onto G's. */
static qr_status group_part(sbs_group *G, int64_t kb, int64_t at, int64_t b)
{
    sbs *w = G->w;
    qr_qctx *q = w->q;
    refs *r = &G->r;
    size_t nv = (size_t)q->g->n_values + 1;
    int nr = w->nr;
    qr_plan_take_inputs(q, w->calib, q->g->n_inputs, at, b, G->in);
    G->most = b > G->most ? b : G->most;
    memset(r->there, 0, nv);
    r->f32_done = 0;
    r->running = nr;
    r->pending = 0;
    G->f.st = QR_OK;
    G->f.out = w->o && !w->o->have_out ? &w->o->out[kb * q->g->n_outputs] : NULL;
    /* the shapes as the last batch has them, as when one run takes every batch in turn */
    r->o = w->o && kb == w->nb - 1 ? w->o : NULL;
    if (r->o)
        r->o->cur_b = b;
    for (int i = 0; r->o && i < q->g->n_inputs; i++) /* no node produces them: their shapes as given */
        observe_shapes(r->o, NULL, q->g->inputs[i], &G->in[i]);
    pthread_t f32_tid, *tid = calloc((size_t)nr + 1, sizeof *tid);
    int *started = calloc((size_t)nr + 1, sizeof *started);
    if (!tid || !started) {
        free(tid), free(started);
        qr_plan_drop_inputs(q, w->calib, at, b);
        return qr_errorf(&G->e, "out of memory");
    }
    int f32_started = pthread_create(&f32_tid, NULL, f32_batch, &G->f) == 0;
    if (!f32_started) { /* no thread: the f32 run first, keeping its values (it never waits) */
        r->running = 0;
        f32_batch(&G->f);
    }
    for (int k = 1; k < nr; k++)
        if (!(started[k] = pthread_create(&tid[k], NULL, read_batch, &G->ms[k]) == 0)) {
            pthread_mutex_lock(&r->mu); /* runs after the f32 run: not one it waits for */
            r->running--;
            pthread_cond_broadcast(&r->cv);
            pthread_mutex_unlock(&r->mu);
        }
    read_batch(&G->ms[0]);
    for (int k = 1; k < nr; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    if (f32_started)
        pthread_join(f32_tid, NULL);
    for (int k = 1; k < nr; k++)
        if (!started[k])
            read_batch(&G->ms[k]);
    free(tid), free(started);
    qr_plan_drop_inputs(q, w->calib, at, b);
    for (size_t i = 0; i < nv; i++)
        qr_tensor_free(&r->t[i]);
    if (G->f.st != QR_OK) {
        G->e = G->f.e;
        return QR_ERR;
    }
    for (int k = 0; k < nr; k++)
        if (G->ms[k].st != QR_OK) {
            G->e = G->ms[k].e;
            return QR_ERR;
        }
    return QR_OK;
}

/* Batch kb through G (in parts of w->sub samples where it asks), its sums into its row. */
static qr_status group_batch(sbs_group *G, int64_t kb)
{
    sbs *w = G->w;
    qr_qctx *q = w->q;
    int nr = w->nr;
    int64_t at = kb * w->batch, b = w->n - at < w->batch ? w->n - at : w->batch;
    for (;;) {
        int parts = w->sub > 0 && w->sub < b && !w->whole;
        int64_t step = parts ? w->sub : b;
        memset(G->sums, 0, sizeof *G->sums * (size_t)w->nsums);
        for (int k = 0; k < nr; k++) {
            measure *m = &G->ms[k];
            m->mixed = 0;
            if (m->lanes)
                memset(m->lanes, 0, sizeof *m->lanes * (size_t)q->nslots * SUM_LANES);
        }
        qr_status st = QR_OK;
        int mixed = 0;
        for (int64_t s0 = 0; st == QR_OK && s0 < b; s0 += step) {
            int64_t sb = b - s0 < step ? b - s0 : step;
            for (int k = 0; parts && k < nr; k++)
                G->ms[k].sub_at = s0, G->ms[k].sub_b = sb;
            st = group_part(G, kb, at + s0, sb);
        }
        for (int k = 0; k < nr; k++) {
            mixed |= G->ms[k].mixed;
            G->ms[k].sub_b = 0;
        }
        if (st != QR_OK)
            return st;
        if (parts && mixed && !(nr == 1 && G->ms[0].obs == observe_slots && !G->ms[0].local)) {
            w->whole = 1; /* not run again: the integer graph's counters count each run */
            mixed = 0;
        }
        if (parts && mixed) { /* this batch again, whole, and every one from now on */
            w->whole = 1;
            continue;
        }
        for (int k = 0; k < nr; k++) { /* the parts' lanes, added as one run's */
            const measure *m = &G->ms[k];
            for (int si = 0; m->lanes && si < q->nslots; si++) {
                double *S = G->sums + (size_t)si * NSUMS;
                add_lanes(m->lanes + (size_t)si * SUM_LANES, S + SX2, S + SE2, S + CLIPPED);
            }
        }
        break;
    }
    memcpy(w->bs->rows + (size_t)kb * (size_t)w->nsums, G->sums, sizeof *G->sums * (size_t)w->nsums);
    return QR_OK;
}

static void *group_work(void *p)
{
    sbs_group *G = p;
    sbs *w = G->w;
    for (int i = G->index; G->st == QR_OK && !w->failed && i < w->nk; i += w->ng)
        G->st = group_batch(G, w->ks[i]);
    if (G->st != QR_OK)
        w->failed = 1;
    return NULL;
}

/* Runs f32 and the readers (ms[0..nr), each set up with its graph, observer and kernel_user) side
 * by side over the first measure_samples of calib, in calibration's batches (a model may mix
 * samples across its batch); o (or NULL) keeps the f32 run's outputs and shapes (outref_alloc'd
 * for the same samples). The batches go to --threads groups of those runs (fewer where there are
 * fewer batches, or the memory budget holds fewer: each group holds 1 + nr runs of a batch; group
 * g the g-th batch, then every ng-th: never by timing), each
 * on threads / groups kernel threads; each batch's sums are kept apart and added up in batch order
 * (struct bsums), so every sum is the same doubles for any number of groups. Errors: a group's
 * first (its f32 run's, then its readers' in order); a reader's is also left in ms[k].e. Under
 * mpirun each rank runs its share of the batches (o gets their outputs, and the last batch's
 * shapes) and every rank ends with every sum. */
static qr_status side_by_side_parts(qr_qctx *q, measure *ms, int nr, const qr_tensor *calib, int64_t count,
                                    outref *o, int64_t sub, int *whole, int64_t *most)
{
    int64_t n = count < measure_samples(q) ? count : measure_samples(q), batch = qr_plan_batch(q);
    int64_t nb = (n + batch - 1) / batch;
    sbs w = {.q = q, .ms = ms, .nr = nr, .calib = calib, .o = o, .n = n, .batch = batch, .nb = nb, .share = -1,
             .sub = o ? 0 : sub};
    int64_t *ks = calloc((size_t)nb + 1, sizeof *ks);
    double **sum_at = NULL;
    bsums bs = {0};
    qr_status st = ks ? QR_OK : qr_errorf(q->e, "out of memory");
    for (int64_t k = 0; st == QR_OK && k < nb; k++)
        if (my_batch(k, nb))
            ks[w.nk++] = k;
    if (st == QR_OK && (st = reader_sums(q, ms, nr, &sum_at, &w.nsums)) == QR_OK)
        st = bsums_init(&bs, q, sum_at, w.nsums, nb);
    else
        free(sum_at);
    w.ks = ks, w.bs = &bs;
    int threads = q->o->threads > 1 ? q->o->threads : 1, ng = threads < w.nk ? threads : w.nk;
    size_t budget = qr_exec_default_max_memory(), held = qr_plan_held_bytes(q->g, calib), run = q->o->run_bytes;
    while (ng > 1 && (held >= budget || (budget - held) / (size_t)(1 + nr) / (size_t)ng < run))
        ng--;
    w.threads = threads / (ng > 0 ? ng : 1), w.ng = ng;
    sbs_group *G = calloc((size_t)ng + 1, sizeof *G);
    pthread_t *tid = calloc((size_t)ng + 1, sizeof *tid);
    char *started = calloc((size_t)ng + 1, 1);
    if (st == QR_OK && (!G || !tid || !started))
        st = qr_errorf(q->e, "out of memory");
    for (int g = 0; st == QR_OK && g < ng; g++)
        if (G[g].index = g, (G[g].st = group_new(&w, &G[g])) != QR_OK) {
            *q->e = G[g].e;
            st = QR_ERR;
        }
    for (int g = 1; st == QR_OK && g < ng; g++)
        started[g] = pthread_create(&tid[g], NULL, group_work, &G[g]) == 0;
    if (st == QR_OK && ng > 0)
        group_work(&G[0]);
    for (int g = 1; st == QR_OK && g < ng; g++)
        if (started[g])
            pthread_join(tid[g], NULL);
        else /* no thread: its batches, on this one */
            group_work(&G[g]);
    for (int g = 0; st == QR_OK && g < ng; g++)
        if (G[g].st != QR_OK) {
            *q->e = G[g].e;
            st = QR_ERR;
            for (int k = 0; k < nr; k++) /* which run failed, for the caller's message */
                if (G[g].ms[k].st != QR_OK)
                    ms[k].st = G[g].ms[k].st, ms[k].e = G[g].ms[k].e;
        }
    if (bs.rows)
        st = bsums_finish(&bs, q, st);
    else
        st = gather_rows(q, NULL, 0, 0, st); /* an error before: every rank learns it */
    bsums_free(&bs); /* frees sum_at */
    if (o) { /* the groups ran side by side: their f32 runs' time, as one pass on all of them */
        o->f32_ms = 0;
        for (int g = 0; G && g < ng; g++)
            o->f32_ms += G[g].f.ms / ng;
        st = share_shapes(q, o, nb, st);
    }
    for (int g = 0; most && G && g < ng; g++)
        *most = G[g].most > *most ? G[g].most : *most;
    for (int g = 0; G && g < ng; g++)
        if (G[g].w)
            group_free(&G[g]);
    free(G), free(tid), free(started), free(ks);
    qr_plan_give_back_memory();
    if (whole)
        *whole = w.whole;
    return st;
}

static qr_status side_by_side(qr_qctx *q, measure *ms, int nr, const qr_tensor *calib, int64_t count, outref *o)
{
    return side_by_side_parts(q, ms, nr, calib, count, o, 0, NULL, NULL);
}

/* Each slot's local SQNR: the QDQ graph with every value replaced by its f32 value; o (outref_alloc'd
 * for the same samples) gets the f32 run's outputs and shapes. */
static qr_status measure_local(qr_qctx *q, const qr_graph *qdq, const qr_tensor *calib, int64_t count, outref *o)
{
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].lx2 = q->slots[i].le2 = q->slots[i].ln = q->slots[i].lr2 = 0;
    qr_graph *owned;
    qr_status st = qr_plan_measured_qdq(q, qdq, &qdq, &owned);
    measure ms = {.g = qdq, .obs = observe_slots, .local = 1};
    if (st == QR_OK)
        st = side_by_side(q, &ms, 1, calib, count, o);
    qr_graph_free(owned);
    return st;
}

/* rank = gain's runs, beside one f32 run: FRESH (the local SQNR, and each slot's own rounding),
 * OWN (each slot's error from f32 inputs) and the cumulative error (every quantization applied).
 * out (4 * n_outputs) gets the f32 energy of the outputs not slots, and their error in the FRESH
 * and the cumulative run (the rest is scratch). */
static qr_status measure_gain_runs(qr_qctx *q, const qr_graph *qdq, const qr_tensor *calib, int64_t count,
                                   outref *o, double *out)
{
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        s->lx2 = s->le2 = s->ln = s->lr2 = s->oe2 = 0;
        s->sx2 = s->se2 = s->n = s->clipped = 0;
    }
    int no = q->g->n_outputs;
    measure ms[3] = {{.g = qdq, .obs = observe_slots, .local = FRESH, .out_x2 = out + 3 * no, .out_e2 = out + no},
                     {.g = qdq, .obs = observe_slots, .local = OWN},
                     {.g = qdq, .obs = observe_slots, .out_x2 = out, .out_e2 = out + 2 * no}};
    return side_by_side(q, ms, 3, calib, count, o);
}

/* The two runs that measure each slot as it ships (ms[0], ms[1]): the QDQ simulation's cumulative
 * error and the integer graph's integers, their sums zeroed; *measured: the slots quantized in what
 * ships; *owned: the measured QDQ graph made for it, or NULL. Free with shipped_free. */
static qr_status shipped_readers(qr_qctx *q, const qr_quantized *res, measure *ms, int *measured, qr_graph **owned)
{
    ms[0] = (measure){.g = res->qdq, .obs = observe_slots};
    ms[1] = (measure){.g = res->ig->g, .user = res->ig, .obs = observe_ints};
    *owned = NULL;
    ms[1].ival = calloc((size_t)q->nslots + 1, sizeof *ms[1].ival);
    ms[1].ival_nhwc = calloc((size_t)q->nslots + 1, sizeof *ms[1].ival_nhwc);
    if (!ms[1].ival || !ms[1].ival_nhwc || qr_plan_measured_qdq(q, res->qdq, &ms[0].g, owned) != QR_OK) {
        int oom = !ms[1].ival || !ms[1].ival_nhwc;
        free(ms[1].ival);
        free(ms[1].ival_nhwc);
        return oom ? qr_errorf(q->e, "out of memory") : QR_ERR;
    }
    *measured = 0; /* slots quantized in what ships */
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        s->sx2 = s->se2 = s->n = s->clipped = 0;
        s->isx2 = s->ise2 = 0;
        int qv = q->qval[s->value];
        if (qv < 0 || s->fallback)
            continue;
        (*measured)++;
        const char *name = res->qdq->values[qv]->name;
        int64_t dims[4];
        const qr_value *v = qr_graph_find(res->ig->g, name), *twin = qr_layout_twin(res->ig->g, name, dims);
        ms[1].ival[i] = v;
        if (twin && (!v || !v->producer)) { /* only its channels-last form is computed */
            ms[1].ival[i] = twin;
            ms[1].ival_nhwc[i][0] = 1;
            memcpy(ms[1].ival_nhwc[i] + 1, dims + 1, 3 * sizeof *dims);
        }
    }
    return QR_OK;
}

static void shipped_free(measure *ms, qr_graph *owned)
{
    qr_graph_free(owned);
    free(ms[1].ival);
    free(ms[1].ival_nhwc);
}

qr_status qr_measure_shipped(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count)
{
    measure ms[2];
    qr_graph *owned;
    int measured;
    if (shipped_readers(q, res, ms, &measured, &owned) != QR_OK)
        return QR_ERR;
    /* every slot in f32 and no narrow accumulator (M-LSD with int8.qrl): the three runs would
     * measure nothing (the sums stay 0); the search ran this integer graph already */
    int na = res->ig ? res->ig->naccs : 0;
    /* The QDQ and the integer run beside one f32 run, where a batch's f32 activations
     * (q->o->run_bytes, more than an integer run's) are at most the model's constants: the
     * quantize holds those twice already (f32, and packed or as integers), the f32 run once, so
     * the third run adds no more than the f32 run's own share of issue 24's 2x (ResNet-18, the
     * MobileNets, EfficientNet-B0: one f32 run of the held-out samples less). Else, where a
     * batch outweighs them (PP-OCRv4 rec at batch 16: the phase's peak 271 MiB with the three,
     * 200 in two passes), the QDQ run beside the f32 run, then the integer run beside another
     * f32 run: two runs of a batch at a time. The readers add up sums of their own (SX2.. and
     * ISX2..), each pass onto what the one before left, so every sum is the doubles one pass
     * with both readers gives */
    size_t consts = const_bytes(q);
    /* or where the held-out samples fill at most two thirds of a batch (PP-OCR cls and the
     * openWakeWord models: 16 held out at batch 32): the three runs of their batch then hold no
     * more activations than two f32 runs of the batch the f32 pass runs (the phase's peak over
     * their f32 runs': cls 1.53x -> 1.80x, the embedding 1.90x, stop 51) */
    int64_t batch = qr_plan_batch(q), jb = count < measure_samples(q) ? count : measure_samples(q);
    jb = jb < batch ? jb : batch;
    int one = q->o->run_bytes > 0 && (q->o->run_bytes <= consts || 3 * jb <= 2 * batch);
    /* In two passes, each batch in two halves where the model's batch is free (PP-OCRv4 det: a
     * batch of 4's f32 run beside its QDQ run held the quantize's peak, 155 MiB): two runs of half
     * a batch hold the activations of one f32 run of the batch. The same sums (group_batch): the
     * runs compute each sample as in the whole batch (the samples are the first axis of every
     * value measured, checked; else whole batches) */
    int64_t sub = qr_graph_fixed_batch(q->g) <= 0 && batch >= 2 && !qr_options_get()->halves_whole && !q->halves_bad
                      ? (batch + 1) / 2
                      : 0;
    int whole = 0;
    int64_t most = 0;
    qr_status st = !(measured || na) ? QR_OK
                   : one            ? side_by_side_parts(q, ms, 2, calib, count, NULL, 0, NULL, &most)
                                    : side_by_side_parts(q, &ms[0], 1, calib, count, NULL, sub, &whole, &most);
    if (st == QR_OK && (measured || na) && !one)
        st = side_by_side_parts(q, &ms[1], 1, calib, count, NULL, whole ? 0 : sub, NULL, &most);
    q->shipped_run_samples = most > q->shipped_run_samples ? most : q->shipped_run_samples;
    if (st != QR_OK && ms[1].st != QR_OK && q->e->msg[0] && !strcmp(q->e->msg, ms[1].e.msg))
        qr_error_prefix(q->e, "running the integer graph");
    /* the narrow accumulators' counts of this run, over the ranks' batches */
    int64_t *counts = qr_dist_size() > 1 ? calloc(2 * (size_t)na + 1, sizeof *counts) : NULL;
    if (qr_dist_size() > 1 && !counts)
        st = qr_errorf(q->e, "out of memory");
    for (int i = 0; counts && i < na; i++)
        counts[2 * i] = res->ig->accs[i].sums, counts[2 * i + 1] = res->ig->accs[i].overflows;
    if (counts)
        st = sum_counts(q, counts, 2 * na, st);
    for (int i = 0; counts && st == QR_OK && i < na; i++)
        res->ig->accs[i].sums = counts[2 * i], res->ig->accs[i].overflows = counts[2 * i + 1];
    free(counts);
    shipped_free(ms, owned);
    return st;
}

/* The local measurement (as measure_local) and, beside the same f32 run, the measurement of what
 * ships (as qr_measure_shipped, one process: the narrow accumulators count from 0): for when the
 * fallback's first try, judged on its outputs already, is expected to hold, so that what ships is
 * what is measured now. The same sums as the two measurements apart. */
static qr_status measure_local_shipped(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count,
                                       outref *o)
{
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].lx2 = q->slots[i].le2 = q->slots[i].ln = q->slots[i].lr2 = 0;
    measure ms[3];
    qr_graph *owned;
    int measured;
    if (shipped_readers(q, res, ms + 1, &measured, &owned) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < res->ig->naccs; i++)
        res->ig->accs[i].sums = res->ig->accs[i].overflows = 0;
    ms[0] = (measure){.g = ms[1].g, .obs = observe_slots, .local = 1}; /* the same measured QDQ graph */
    int nr = measured || res->ig->naccs ? 3 : 1;
    qr_status st = side_by_side(q, ms, nr, calib, count, o);
    if (st != QR_OK && nr == 3 && ms[2].st != QR_OK && q->e->msg[0] && !strcmp(q->e->msg, ms[2].e.msg))
        qr_error_prefix(q->e, "running the integer graph");
    shipped_free(ms + 1, owned);
    return st;
}

/* ------------------------------------------------------------ outputs */

/* The SQNR of graph's outputs against f32 over all outputs' elements, and the elements that are
 * not finite where f32 is. */
typedef struct out_metrics {
    double sqnr, cosine, agreement;
    double pooled_sqnr, worst_sqnr; /* sqnr is one of them, as the recipe's outputs says */
    int worst;                      /* the worst output's index */
    int64_t nonfinite;
    /* with samples = F: the figures above are F's of each sample's sums, and this the one sqnr
     * would be without it (the samples' sums pooled); else sqnr */
    double energy_sqnr;
} out_metrics;

/* Row r (the last axis, n long) of a and of b: whether their largest elements are at the same place. */
/* Row r's argmax of a [.., n] tensor (the first of equal maxima). */
static int64_t row_argmax(const qr_tensor *a, int64_t r, int64_t n)
{
    int64_t ia = 0;
    if (a->dtype == QR_F32) { /* the common case, without a conversion per element */
        const float *x = (const float *)a->data + r * n;
        for (int64_t k = 1; k < n; k++)
            if (x[k] > x[ia])
                ia = k;
        return ia;
    }
    for (int64_t k = 1; k < n; k++)
        if (qr_get_f64(a->data, a->dtype, r * n + k) > qr_get_f64(a->data, a->dtype, r * n + ia))
            ia = k;
    return ia;
}

static int same_argmax(const qr_tensor *a, const qr_tensor *b, int64_t r, int64_t n)
{
    return row_argmax(a, r, n) == row_argmax(b, r, n);
}

/* Sums for the SQNR and cosine of t against the reference r (same count, both float): signal,
 * error, t's energy and their product; elements r holds as non-finite are skipped, those t alone
 * holds are counted. */
typedef struct pair_sums {
    double sx2, se2, sv2, sxv;
    int64_t nonfinite;
} pair_sums;

static inline void pair_add(pair_sums *p, double a, double v)
{
    if (!isfinite(a))
        return;
    if (!isfinite(v)) {
        p->nonfinite++;
        return;
    }
    p->sx2 += a * a;
    p->se2 += (a - v) * (a - v);
    p->sv2 += v * v;
    p->sxv += a * v;
}

/* Elements [from, from + cnt). */
static void pair_sum(pair_sums *p, const qr_tensor *r, const qr_tensor *t, int64_t from, int64_t cnt)
{
    if (r->dtype == QR_F32 && t->dtype == QR_F32) { /* the common case, without a conversion per element */
        const float *a = (const float *)r->data + from, *v = (const float *)t->data + from;
        for (int64_t i = 0; i < cnt; i++)
            pair_add(p, a[i], v[i]);
        return;
    }
    for (int64_t i = from; i < from + cnt; i++)
        pair_add(p, qr_get_f64(r->data, r->dtype, i), qr_get_f64(t->data, t->dtype, i));
}

/* The sums the output metrics come from, over batches: by model output, and the rows compared. */
typedef struct out_acc {
    pair_sums *each;
    int64_t rows, agree;
} out_acc;

/* One batch (k of o) of the model's outputs, got[j] for output j, into a. */
static void out_acc_add(const qr_graph *g, const outref *o, int k, const qr_tensor *const *got, out_acc *a)
{
    for (int j = 0; j < g->n_outputs; j++) {
        const qr_tensor *r = &o->out[k * g->n_outputs + j], *t = got[j];
        int64_t cnt = qr_tensor_numel(r);
        if (cnt == qr_tensor_numel(t) && qr_dtype_is_float(r->dtype) && qr_dtype_is_float(t->dtype))
            pair_sum(&a->each[j], r, t, 0, cnt);
        int64_t n = r->ndim > 0 ? r->dims[r->ndim - 1] : 1;
        if (cnt == qr_tensor_numel(t) && n > 1 && cnt % n == 0)
            for (int64_t row = 0; row < cnt / n; row++, a->rows++)
                a->agree += same_argmax(r, t, row, n);
    }
}

static void out_acc_finish(const qr_qctx *q, const out_acc *a, out_metrics *mt)
{
    const qr_graph *g = q->g;
    pair_sums ps = {0};
    /* pooled over every output's elements, and the worst output's own (outputs = worst judges by it) */
    mt->worst = -1;
    mt->worst_sqnr = INFINITY;
    for (int j = 0; a->each && j < g->n_outputs; j++) {
        const pair_sums *e = &a->each[j];
        ps.sx2 += e->sx2, ps.se2 += e->se2, ps.sv2 += e->sv2, ps.sxv += e->sxv;
        ps.nonfinite += e->nonfinite;
        double db = e->nonfinite ? -INFINITY : e->se2 <= 0 ? INFINITY : 10.0 * log10(e->sx2 / e->se2);
        if (mt->worst < 0 || db < mt->worst_sqnr)
            mt->worst = j, mt->worst_sqnr = db;
    }
    int64_t nf = ps.nonfinite;
    mt->nonfinite = nf;
    mt->sqnr = nf ? -INFINITY : ps.se2 <= 0 ? INFINITY : 10.0 * log10(ps.sx2 / ps.se2);
    mt->pooled_sqnr = mt->sqnr;
    if (worst_output(q))
        mt->sqnr = nf ? -INFINITY : mt->worst_sqnr;
    mt->cosine = nf ? -1 : ps.sx2 > 0 && ps.sv2 > 0 ? ps.sxv / sqrt(ps.sx2 * ps.sv2) : ps.sx2 == ps.sv2 ? 1 : 0;
    mt->agreement = nf ? 0 : a->rows ? (double)a->agree / (double)a->rows : 1;
    mt->energy_sqnr = mt->sqnr;
}

/* With samples = F, a batch's row ends with each sample's own sums: by sample place s in the batch
 * and output j, at 3 * (s * n_outputs + j), its f32 energy, its error and 1 (0: no such sample). */
static int sample_cols(const qr_qctx *q)
{
    return q->samples_fn ? 3 * q->g->n_outputs * qr_plan_batch(q) : 0;
}

/* A batch's row of output sums: each output's pair_sums, then the rows compared and agreeing, then
 * the samples' (sample_cols). */
static int row_width(const qr_qctx *q)
{
    return 5 * q->g->n_outputs + 2 + sample_cols(q);
}

/* One batch's sums (k of o, got[j] for output j) as its row (row_width doubles); one is scratch. An
 * output whose first axis is not the batch's samples counts the batch as one sample. */
static void out_row(const qr_qctx *q, const outref *o, int k, const qr_tensor *const *got, out_acc *one, double *r)
{
    const qr_graph *g = q->g;
    int no = g->n_outputs;
    memset(one->each, 0, sizeof *one->each * (size_t)no);
    one->rows = one->agree = 0;
    out_acc_add(g, o, k, got, one);
    for (int j = 0; j < no; j++) {
        const pair_sums *p = &one->each[j];
        r[5 * j] = p->sx2, r[5 * j + 1] = p->se2, r[5 * j + 2] = p->sv2, r[5 * j + 3] = p->sxv;
        r[5 * j + 4] = (double)p->nonfinite;
    }
    r[5 * no] = (double)one->rows, r[5 * no + 1] = (double)one->agree;
    if (!q->samples_fn)
        return;
    double *sr = r + 5 * no + 2;
    int64_t b = o->n - (int64_t)k * o->batch < o->batch ? o->n - (int64_t)k * o->batch : o->batch;
    memset(sr, 0, sizeof *sr * (size_t)sample_cols(q));
    for (int j = 0; j < no; j++) {
        const qr_tensor *rt = &o->out[k * no + j], *t = got[j];
        int64_t cnt = qr_tensor_numel(rt);
        if (cnt != qr_tensor_numel(t) || !qr_dtype_is_float(rt->dtype) || !qr_dtype_is_float(t->dtype))
            continue;
        int64_t ns = rt->ndim > 0 && b > 0 && rt->dims[0] == b ? b : 1, per = cnt / ns;
        for (int64_t smp = 0; smp < ns; smp++) {
            pair_sums p = {0};
            pair_sum(&p, rt, t, smp * per, per);
            double *c = sr + 3 * (smp * no + j);
            c[0] = p.sx2, c[1] = p.se2, c[2] = 1;
        }
    }
}

/* Samples [s0, s0 + sb) of batch k of o, got[j] output j's for them alone, onto the batch's row r
 * (afresh when s0 is 0): each sum goes on from the part before, element after element, so that the
 * parts of a batch in order give the doubles out_row gives it whole. Every output of batch k is
 * laid out by samples (effects_parts). */
static void out_row_part(const qr_qctx *q, const outref *o, int k, const qr_tensor *const *got, int64_t s0,
                         int64_t sb, double *r)
{
    const qr_graph *g = q->g;
    int no = g->n_outputs;
    int64_t b = o->n - (int64_t)k * o->batch < o->batch ? o->n - (int64_t)k * o->batch : o->batch;
    if (s0 == 0)
        memset(r, 0, sizeof *r * (size_t)row_width(q));
    double *sr = r + 5 * no + 2;
    for (int j = 0; j < no; j++) {
        const qr_tensor *rt = &o->out[k * no + j], *t = got[j];
        int64_t per = qr_tensor_numel(rt) / b, cnt = per * sb, n = rt->dims[rt->ndim - 1];
        qr_tensor rv = *rt; /* the part's samples of the reference */
        rv.dims[0] = sb;
        rv.data = (char *)rt->data + (size_t)(s0 * per) * qr_dtype_size(rt->dtype);
        int sums = cnt == qr_tensor_numel(t) && qr_dtype_is_float(rt->dtype) && qr_dtype_is_float(t->dtype);
        pair_sums p = {r[5 * j], r[5 * j + 1], r[5 * j + 2], r[5 * j + 3], (int64_t)r[5 * j + 4]};
        if (sums)
            pair_sum(&p, &rv, t, 0, cnt);
        r[5 * j] = p.sx2, r[5 * j + 1] = p.se2, r[5 * j + 2] = p.sv2, r[5 * j + 3] = p.sxv;
        r[5 * j + 4] = (double)p.nonfinite;
        if (cnt == qr_tensor_numel(t) && n > 1 && cnt % n == 0)
            for (int64_t row = 0; row < cnt / n; row++)
                r[5 * no] += 1, r[5 * no + 1] += same_argmax(&rv, t, row, n);
        for (int64_t smp = 0; q->samples_fn && sums && smp < sb; smp++) {
            pair_sums ps = {0};
            pair_sum(&ps, &rv, t, smp * per, per);
            double *c = sr + 3 * ((s0 + smp) * no + j);
            c[0] = ps.sx2, c[1] = ps.se2, c[2] = 1;
        }
    }
}

/* The recipe's samples = F of the samples of the first nb rows: output j's (-1: every output's sums
 * added per sample), in *db; x2 and e2 are scratch of nb * batch doubles. */
static qr_status samples_db(qr_qctx *q, const double *rows, int nb, int j, double *x2, double *e2, double *db)
{
    int no = q->g->n_outputs, width = row_width(q), batch = qr_plan_batch(q);
    int64_t n = 0;
    for (int k = 0; k < nb; k++)
        for (int smp = 0; smp < batch; smp++) {
            const double *c = rows + (size_t)k * (size_t)width + 5 * no + 2 + 3 * smp * no;
            double x = 0, e = 0;
            int there = 0;
            for (int i = j < 0 ? 0 : j; i < (j < 0 ? no : j + 1); i++)
                if (c[3 * i + 2] > 0)
                    x += c[3 * i], e += c[3 * i + 1], there = 1;
            if (there)
                x2[n] = x, e2[n] = e, n++;
        }
    double (*fn)(qrl_rt *, qrl_array *, qrl_array *) = (double (*)(qrl_rt *, qrl_array *, qrl_array *))q->samples_fn->fn;
    qrl_array a = {x2, n}, b = {e2, n};
    qrl_rt rt;
    qr_rt_init(&rt);
    *db = fn(&rt, &a, &b);
    const char *what = j < 0 ? "the outputs" : q->g->outputs[j]->name;
    if (qr_rt_status(&rt, q->e) != QR_OK)
        return qr_error_prefix(q->e, "recipe '%s': samples = %s on %lld samples of %s", q->r->name,
                               q->samples_fn->name, (long long)n, what), QR_ERR;
    if (isnan(*db))
        return qr_errorf(q->e, "recipe '%s': samples = %s gives NaN on %lld samples of %s (a figure in dB is "
                               "wanted; inf when there is no error)", q->r->name, q->samples_fn->name,
                         (long long)n, what);
    return QR_OK;
}

/* mt's figures as the recipe's samples = F gives them from the first nb rows' samples (nothing
 * without it): pooled over the outputs (each sample's sums added), each output's (the worst), and
 * sqnr the one the recipe's outputs judges. */
static qr_status samples_metrics(qr_qctx *q, const double *rows, int nb, out_metrics *mt)
{
    if (!q->samples_fn)
        return QR_OK;
    size_t cap = (size_t)nb * (size_t)qr_plan_batch(q) + 1;
    double *x2 = malloc(cap * sizeof *x2), *e2 = malloc(cap * sizeof *e2);
    qr_status st = x2 && e2 ? samples_db(q, rows, nb, -1, x2, e2, &mt->pooled_sqnr) : qr_errorf(q->e, "out of memory");
    mt->worst = -1;
    mt->worst_sqnr = INFINITY;
    for (int j = 0; st == QR_OK && j < q->g->n_outputs; j++) {
        double db;
        if ((st = samples_db(q, rows, nb, j, x2, e2, &db)) == QR_OK && (mt->worst < 0 || db < mt->worst_sqnr))
            mt->worst = j, mt->worst_sqnr = db;
    }
    if (st == QR_OK && !mt->nonfinite)
        mt->sqnr = worst_output(q) ? mt->worst_sqnr : mt->pooled_sqnr;
    free(x2), free(e2);
    return st;
}

/* graph's outputs (the model's) against the f32 outputs of o in batches [from, to) of o, each
 * batch's sums into its row of rows ([o->nbatches][row_width]); *ran (or NULL): the samples of
 * those batches, over all ranks. split: each rank runs its share of those batches (o holds their
 * outputs at least) and every rank gets every row; else every batch here. A row is the same
 * doubles whichever rank ran it and whenever: the rows of batches run apart (a try on the first
 * batches, completed later) add up as one run's. */
/* measure_rows' runs: of the batches listed (ks), worker w of nw runs ks[w], ks[w + nw], ... on an
 * executor of its own, each batch's sums into its own row (so the same doubles whoever ran it). */
typedef struct rows_run {
    qr_qctx *q;
    const outref *o;
    const qr_graph *graph;
    void *user;
    const qr_tensor *calib;
    const int *ks;
    int nk, nw, threads;
    _Atomic int failed; /* a worker failed: the others stop after their batch */
    double *rows;
} rows_run;

typedef struct rows_worker {
    rows_run *r;
    int w;
    qr_error e;
    qr_status st;
} rows_worker;

static void *rows_work(void *p)
{
    rows_worker *w = p;
    rows_run *r = w->r;
    const qr_graph *g = r->q->g;
    int no = g->n_outputs, width = row_width(r->q);
    out_acc one = {.each = calloc((size_t)no + 1, sizeof *one.each)};
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)no + 1, sizeof *out);
    const qr_tensor **got = calloc((size_t)no + 1, sizeof *got);
    qr_exec_opts eo = {.threads = r->threads, .kernel_user = r->user};
    qr_exec *x = NULL;
    qr_status st = in && out && got && one.each ? qr_exec_new(r->graph, &eo, &x, &w->e)
                                                 : qr_errorf(&w->e, "out of memory");
    for (int i = w->w; st == QR_OK && !r->failed && i < r->nk; i += r->nw) {
        int k = r->ks[i];
        int64_t at = k * r->o->batch, b = r->o->n - at < r->o->batch ? r->o->n - at : r->o->batch;
        qr_plan_take_inputs(r->q, r->calib, g->n_inputs, at, b, in);
        st = qr_exec_run(x, in, out, &w->e);
        qr_plan_drop_inputs(r->q, r->calib, at, b);
        if (st != QR_OK)
            break;
        for (int j = 0; j < no; j++)
            got[j] = &out[j];
        out_row(r->q, r->o, k, got, &one, r->rows + (size_t)k * (size_t)width);
        for (int j = 0; j < no; j++)
            qr_tensor_free(&out[j]);
    }
    if (st != QR_OK)
        r->failed = 1;
    qr_exec_free(x);
    free(in), free(out), free(got), free(one.each);
    w->st = st;
    return NULL;
}

/* Two values of the same type, shape and (constants) data. */
static int same_value(const qr_value *a, const qr_value *b)
{
    if (a->is_const != b->is_const || a->t.dtype != b->t.dtype || a->t.ndim != b->t.ndim || a->q || b->q)
        return 0;
    for (int d = 0; d < a->t.ndim; d++)
        if (a->t.dims[d] != b->t.dims[d])
            return 0;
    return !a->is_const || a->t.data == b->t.data ||
           (a->t.data && b->t.data && !memcmp(a->t.data, b->t.data, qr_tensor_nbytes(&a->t)));
}

static int same_attr(const qr_attr *a, const qr_attr *b)
{
    if (strcmp(a->name, b->name) || a->kind != b->kind || a->n != b->n)
        return 0;
    switch (a->kind) {
    case QR_ATTR_INT:
        return a->i == b->i;
    case QR_ATTR_FLOAT:
        return !memcmp(&a->f, &b->f, sizeof a->f);
    case QR_ATTR_STRING:
        return !strcmp(a->s ? a->s : "", b->s ? b->s : "");
    case QR_ATTR_INTS:
        return !a->n || !memcmp(a->ints, b->ints, sizeof *a->ints * (size_t)a->n);
    case QR_ATTR_FLOATS:
        return !a->n || !memcmp(a->floats, b->floats, sizeof *a->floats * (size_t)a->n);
    case QR_ATTR_STRINGS:
        for (int k = 0; k < a->n; k++)
            if (strcmp(a->strs[k], b->strs[k]))
                return 0;
        return 1;
    case QR_ATTR_TENSOR:
        return a->t.dtype == b->t.dtype && a->t.ndim == b->t.ndim &&
               !memcmp(a->t.dims, b->t.dims, sizeof *a->t.dims * (size_t)(a->t.ndim > 0 ? a->t.ndim : 0)) &&
               qr_tensor_nbytes(&a->t) == qr_tensor_nbytes(&b->t) &&
               (!qr_tensor_nbytes(&a->t) || !memcmp(a->t.data, b->t.data, qr_tensor_nbytes(&a->t)));
    default: /* a subgraph: not compared, so not the same */
        return 0;
    }
}

/* Whether graph g computes what ref does, node for node: the same nodes in the same order (op,
 * domain, opset, name, attributes), reading the same constants and the same values of each other
 * and of the same inputs, no value quantized. The executor runs such a graph as it runs ref, so
 * its outputs are ref's to the last bit (as at any thread count): a fallback try that sends every
 * layer back to f32 builds the model itself, and measuring it needs no run. */
static int same_computation(const qr_graph *g, const qr_graph *ref)
{
    if (g == ref)
        return 1;
    if (g->n_nodes != ref->n_nodes || g->n_inputs != ref->n_inputs || g->n_outputs != ref->n_outputs ||
        g->opset != ref->opset)
        return 0;
    int *to = malloc(sizeof *to * ((size_t)g->n_values + 1)); /* by value id of g: ref's, or -1 */
    int ok = to != NULL;
    for (int i = 0; ok && i < g->n_values; i++)
        to[i] = -1;
    for (int i = 0; ok && i < g->n_inputs; i++)
        if ((ok = same_value(g->inputs[i], ref->inputs[i])))
            to[g->inputs[i]->id] = ref->inputs[i]->id;
    for (int i = 0; ok && i < g->n_nodes; i++) {
        const qr_node *a = g->nodes[i], *b = ref->nodes[i];
        ok = !a->dead && !b->dead && !strcmp(a->op, b->op) && !strcmp(a->domain, b->domain) &&
             !strcmp(a->name ? a->name : "", b->name ? b->name : "") && a->opset == b->opset &&
             a->n_in == b->n_in && a->n_out == b->n_out && a->n_attr == b->n_attr;
        for (int k = 0; ok && k < a->n_attr; k++)
            ok = same_attr(&a->attr[k], &b->attr[k]);
        for (int k = 0; ok && k < a->n_in; k++) {
            const qr_value *u = a->in[k], *v = b->in[k];
            ok = (!u && !v) || (u && v && same_value(u, v) && (u->is_const || to[u->id] == v->id));
        }
        for (int k = 0; ok && k < a->n_out; k++) {
            const qr_value *u = a->out[k], *v = b->out[k];
            ok = (!u && !v) || (u && v && same_value(u, v));
            if (ok && u)
                to[u->id] = v->id;
        }
    }
    for (int i = 0; ok && i < g->n_outputs; i++)
        ok = to[g->outputs[i]->id] == ref->outputs[i]->id;
    free(to);
    return ok;
}

/* graph's outputs (the model's) against the f32 outputs of o in batches [from, to) of o, each
 * batch's sums into its row of rows ([o->nbatches][row_width]); *ran (or NULL): the samples of
 * those batches, over all ranks. split: each rank runs its share of those batches (o holds their
 * outputs at least) and every rank gets every row; else every batch here. A row is the same
 * doubles whichever rank or worker ran it and whenever: the rows of batches run apart (a try on
 * the first batches, completed later) add up as one run's. The batches go to --threads workers
 * (at most one per batch; worker w of nw the w-th, then every nw-th: never by timing), each on
 * threads / workers kernel threads: the memory budget holds
 * --threads runs side by side (choose_batch in quantize.c). */
static qr_status measure_rows(qr_qctx *q, const outref *o, const qr_graph *graph, void *user, const qr_tensor *calib,
                              int split, int from, int to, double *rows, int64_t *ran)
{
    int width = row_width(q), nk = 0;
    int *ks = calloc((size_t)o->nbatches + 1, sizeof *ks);
    qr_status st = ks ? QR_OK : qr_errorf(q->e, "out of memory");
    int64_t samples = 0;
    for (int k = from; st == QR_OK && k < to && k < o->nbatches; k++) {
        samples += o->n - k * o->batch < o->batch ? o->n - k * o->batch : o->batch;
        if (!split || my_batch(k, o->nbatches))
            ks[nk++] = k;
    }
    if (st == QR_OK && same_computation(graph, q->ref ? q->ref : q->g)) {
        /* graph computes the reference: each batch's row from o's outputs against themselves, no run */
        int no = q->g->n_outputs;
        out_acc one = {.each = calloc((size_t)no + 1, sizeof *one.each)};
        const qr_tensor **got = calloc((size_t)no + 1, sizeof *got);
        st = one.each && got ? QR_OK : qr_errorf(q->e, "out of memory");
        for (int i = 0; st == QR_OK && i < nk; i++) {
            for (int j = 0; j < no; j++)
                got[j] = &o->out[ks[i] * no + j];
            out_row(q, o, ks[i], got, &one, rows + (size_t)ks[i] * (size_t)width);
        }
        free(one.each), free(got), free(ks);
        return split ? gather_rows(q, rows, o->nbatches, width, st) : st;
    }
    if (ran)
        *ran += samples;
    int threads = q->o->threads > 1 ? q->o->threads : 1, nw = threads < nk ? threads : nk;
    rows_run r = {.q = q, .o = o, .graph = graph, .user = user, .calib = calib, .ks = ks, .nk = nk,
                  .nw = nw, .threads = threads / (nw > 0 ? nw : 1), .rows = rows};
    rows_worker *w = calloc((size_t)nw + 1, sizeof *w);
    pthread_t *tid = calloc((size_t)nw + 1, sizeof *tid);
    char *started = calloc((size_t)nw + 1, 1);
    if (st == QR_OK && (!w || !tid || !started))
        st = qr_errorf(q->e, "out of memory");
    for (int i = 0; st == QR_OK && i < nw; i++) {
        w[i].r = &r, w[i].w = i;
        if (i > 0)
            started[i] = pthread_create(&tid[i], NULL, rows_work, &w[i]) == 0;
    }
    if (st == QR_OK && nw > 0)
        rows_work(&w[0]);
    for (int i = 1; st == QR_OK && i < nw; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
        else /* no thread: its batches, on this one */
            rows_work(&w[i]);
    for (int i = 0; st == QR_OK && i < nw; i++)
        if (w[i].st != QR_OK) {
            *q->e = w[i].e;
            st = QR_ERR;
        }
    if (split) /* a rank's rows outside [from, to) are the ones it ran before (or zeros, never read) */
        st = gather_rows(q, rows, o->nbatches, width, st);
    free(ks), free(w), free(tid), free(started);
    return st;
}

/* The metrics of the first nb rows, added in batch order. */
static qr_status rows_metrics(qr_qctx *q, const double *rows, int nb, out_metrics *mt)
{
    int no = q->g->n_outputs, width = row_width(q);
    out_acc acc = {.each = calloc((size_t)no + 1, sizeof *acc.each)};
    if (!acc.each)
        return qr_errorf(q->e, "out of memory");
    for (int k = 0; k < nb; k++) {
        const double *r = rows + (size_t)k * (size_t)width;
        for (int j = 0; j < no; j++) {
            pair_sums *p = &acc.each[j];
            p->sx2 += r[5 * j], p->se2 += r[5 * j + 1], p->sv2 += r[5 * j + 2], p->sxv += r[5 * j + 3];
            p->nonfinite += (int64_t)r[5 * j + 4];
        }
        acc.rows += (int64_t)r[5 * no], acc.agree += (int64_t)r[5 * no + 1];
    }
    out_acc_finish(q, &acc, mt);
    free(acc.each);
    return samples_metrics(q, rows, nb, mt);
}

/* graph's outputs (the model's) against the f32 outputs of o, on every batch (split: as measure_rows). */
static qr_status measure_outputs(qr_qctx *q, const outref *o, const qr_graph *graph, void *user,
                                 const qr_tensor *calib, int split, out_metrics *mt)
{
    double *rows = calloc((size_t)row_width(q) * (size_t)o->nbatches + 1, sizeof *rows);
    qr_status st = rows ? measure_rows(q, o, graph, user, calib, split, 0, o->nbatches, rows, NULL)
                        : qr_errorf(q->e, "out of memory");
    if (st == QR_OK)
        st = rows_metrics(q, rows, o->nbatches, mt);
    else
        out_acc_finish(q, &(out_acc){0}, mt);
    free(rows);
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
    res->weights = res->weights_4bit = 0;
    res->weight_bytes = res->weight_f32_bytes = 0;
    qr_status st = qr_plan_build_qdq(q, res);
    if (st == QR_OK && (st = qr_intgraph_build(q, res->qdq, &res->ig, q->e)) != QR_OK)
        qr_error_prefix(q->e, "recipe '%s'", q->r->name);
    return st;
}

typedef struct ranked {
    int slot;
    double sqnr;   /* local: the layer alone, f32 inputs */
    double effect; /* the outputs' SQNR with this layer alone quantized */
    int wide;      /* fallback = u16 then f32: this step widens the slot to 16 bits (else: to f32) */
} ranked;

/* fallback = u16 then f32 when ...: a slot's 16-bit step (by slot). Open to a layer's output whose
 * readers take 16 bits (open_wide); its qparams are its calibrator's observations solved again for
 * 16 bits, with its own modifiers. */
typedef struct wide {
    int open, on;
    qr_dtype dt, dt16;
    qrl_qtype qt, qt16;
    qrl_qparams qp, qp16;
    double sqnr16; /* its local SQNR at 16 bits (NaN: not measured) */
} wide;

/* Slot s and the slots that copy its qparams, in type t (qt, qp), or back. */
static void set_slot_type(qr_qctx *q, int s, qr_dtype t, const qrl_qtype *qt, const qrl_qparams *qp)
{
    q->slots[s].dtype = t, q->slots[s].qt = *qt, q->slots[s].qp = *qp;
    for (int i = 0; i < q->nslots; i++)
        if (q->slots[i].kind == SLOT_SAME && q->slots[i].same == s)
            q->slots[i].dtype = t, q->slots[i].qt = *qt, q->slots[i].qp = *qp;
}

/* Slot s at 16 bits (on) or at the recipe's type, and the slots that copy its qparams with it. */
static void set_wide(qr_qctx *q, wide *wd, int s, int on)
{
    wide *w = &wd[s];
    if (!w->open)
        return;
    w->on = on;
    if (on)
        set_slot_type(q, s, w->dt16, &w->qt16, &w->qp16);
    else
        set_slot_type(q, s, w->dt, &w->qt, &w->qp);
}

/* The first k steps of rk taken: every slot rk names at the recipe's type, then each of rk[0..k)
 * widening its slot (wd: the 16-bit steps; NULL: none) or sending it to f32. */
static void take_steps(qr_qctx *q, wide *wd, const ranked *rk, int nr, int k)
{
    for (int i = 0; i < nr; i++) {
        q->slots[rk[i].slot].fallback = 0;
        if (wd)
            set_wide(q, wd, rk[i].slot, 0);
    }
    for (int i = 0; i < k; i++) {
        if (rk[i].wide && wd)
            set_wide(q, wd, rk[i].slot, 1);
        else if (!rk[i].wide)
            q->slots[rk[i].slot].fallback = 1;
    }
}

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

/* The recipe's effect_samples (default 8): samples each layer's effect on the outputs is measured
 * on, one forward pass of the QDQ simulation per layer, so a few. */
static int64_t effect_samples(const qr_qctx *q)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_EFFECT_SAMPLES);
    int64_t n = s ? (int64_t)s->value : 8;
    return n > 0 ? n : 8;
}

static double node_macs(const qr_node *n, const double *per_sample, const int64_t *last);

/* How many samples the effects run on: the recipe's effect_samples, fewer (at least one) when its
 * effect_macs bounds them: every slot's run on that many samples, each counted as a whole f32 run
 * of the model (MACs per sample from all's f32 run: a bound, a layer's run from its cut computes
 * less), over effect_macs. Slots and MACs are the model's, not a call's layers: every
 * measure_effects of one quantize (a subset measured again, mixed precision's choices) runs the
 * same samples, so their effects compare. int8.qrl's 3e12 takes M-LSD large (1.0e10 MACs, 90
 * slots, its effects 64 of its quantize's 99 CPU s) to 3 samples, the same decision; at 2 the
 * ranking changed and what shipped missed 25 dB on unseen images (docs/quantizer.md, stop 39). */
static int64_t effect_count(const qr_qctx *q, const outref *all)
{
    int64_t n = effect_samples(q);
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_EFFECT_MACS);
    if (!s || !all || !all->per_sample || !all->last)
        return n;
    double macs = 0;
    for (int i = 0; i < q->g->n_nodes; i++)
        macs += q->g->nodes[i]->dead ? 0 : node_macs(q->g->nodes[i], all->per_sample, all->last);
    double per = macs * (double)(q->nslots > 0 ? q->nslots : 1), fit = per > 0 ? floor(s->value / per) : (double)n;
    return fit < 1 ? 1 : fit < (double)n ? (int64_t)fit : n;
}

/* effect_outref's run kept through a fallback (qr_qctx.effects_ref): its outputs, and what they are of */
typedef struct qr_kept_ref {
    outref o;
    const qr_tensor *calib;
    int64_t count, ne;
} kept_ref;

/* The f32 outputs of the first effect_count samples of calib's count samples (whole batches where the
 * model fixes its batch). When all (the fallback's reference, of the same samples in the same
 * batches: NULL if none) holds them as whole batches of its own, o is a view of its first batches
 * (*own 0: o is not freed) instead of another f32 run over them: the same f32 outputs, since a
 * run's outputs do not depend on its threads. Under mpirun all holds only this rank's batches. */
static qr_status effect_outref(outref *o, qr_qctx *q, const outref *all, const qr_tensor *calib, int64_t count,
                               int *own)
{
    int64_t ne = effect_count(q, all), fixed = qr_graph_fixed_batch(q->g);
    if (fixed > 0)
        ne = (ne + fixed - 1) / fixed * fixed;
    ne = ne < count ? ne : count;
    int64_t n = ne < measure_samples(q) ? ne : measure_samples(q); /* as outref_alloc takes them */
    *own = !all || !all->out || qr_dist_size() > 1 || n > all->n || (n < all->n && n % all->batch != 0);
    /* else, in a fallback, the run of the first call that needs it, kept for the others (grad's,
     * each of the fitted search's windows, the effects at 16 bits: the same samples of the same
     * model, so the same outputs): the embedding's four calls ran it four times, 0.25 validation
     * pass each (stop 52) */
    kept_ref *k = q->effects_keep ? q->effects_ref : NULL;
    if (*own && q->effects_keep && !k && !(k = q->effects_ref = calloc(1, sizeof *k)))
        return qr_errorf(q->e, "out of memory");
    if (*own && k && k->o.out && k->calib == calib && k->count == count && k->ne == ne) {
        *o = k->o, *own = 0;
        return QR_OK;
    }
    if (*own && k) {
        outref_free(&k->o);
        qr_status st = outref_init(&k->o, q, calib, ne, 0);
        if (st != QR_OK)
            return st;
        k->calib = calib, k->count = count, k->ne = ne;
        *o = k->o, *own = 0;
        return QR_OK;
    }
    if (*own)
        return outref_init(o, q, calib, ne, 0);
    *o = *all;
    o->n = n;
    o->nbatches = (int)((n + all->batch - 1) / all->batch);
    o->run_bytes = q->o->run_bytes; /* the probe's, as side_by_side takes it */
    return QR_OK;
}

/* ------------------------------------------------------------ effects, downstream only */

/* What measure_effects' workers share. Each layer's runs are independent of the others': the
 * layers are dealt out to the workers (--threads of them, at most one per layer) by measure_effects,
 * each worker runs its own f32 run and its own layers' cuts, and each run's sums go to its own row
 * (rows: [nr][nbatches][row_width]), added up in batch order at the end. Which worker runs a layer
 * depends only on the layers and the worker count, never on timing. A layer's QDQ graph is built
 * from the plan's shared state (each slot's fallback, qval, qnode, q->e), under mu; it runs outside. */
typedef struct effects_shared {
    pthread_mutex_t mu;
    double *rows;
    int nbatches;
} effects_shared;

/* measure_effects' state in one batch, one per worker. Upstream of a layer quantized alone
 * everything is f32: one f32 run per batch goes node by node, keeping each value it computes until
 * its last reader has run (what the run itself holds live at that point, no more); when it has
 * passed the first node that reads ranked layer r (r's cut), r's QDQ graph runs from there
 * (cut_graph), fed the kept values. */
typedef struct effects {
    qr_qctx *q;
    const outref *o;
    const ranked *rk;
    effects_shared *sh;
    int nr, k, next, freed; /* batch k; order[next..] still to run in it; values last read before freed gone */
    /* each batch in parts of sub samples (0: whole, effects_parts): this run's samples [part_at,
     * part_at + part_b) of batch k (part_b 0: all of it) */
    int64_t sub, part_at, part_b;
    int64_t most; /* the most samples one of its runs took */
    int halves_bad; /* half a batch's f32 outputs were not the whole batch's: whole batches */
    int nown;               /* order[0..nown): this worker's layers, by cut */
    int idle_from;          /* the f32 run leaves out the nodes from this place on (effects_supplied) */
    int threads;            /* kernel threads of this worker's runs */
    /* nodes by their place in the f32 run's order (qr_exec_order: a node of constants runs just
     * before its first reader, not at its place in q->g), as are cut and last */
    const int *pos;         /* by node index of q->g: its place in that order */
    const int *cut;         /* by ranked index: the first node (of q->g) that reads its value, n_nodes when none */
    int *order;             /* ranked indices by cut */
    const int *last;        /* by value id of q->g: the last node that reads it (n_nodes: a model output) */
    unsigned char *whole;   /* by ranked index: measured by whole runs instead (a cut it could not make; under mu) */
    const qr_tensor *in;    /* the batch's model inputs */
    qr_tensor *val;         /* by value id of q->g: its f32 value in this batch, while a cut ahead reads it */
    /* by value id: val[i] a copy of its own (a model output: the run's end may free it); else a
     * view of the f32 run's buffer, which holds it until its last reader runs: each cut runs
     * before the node at its cut does (effects_upto), so before any reader of what it reads */
    unsigned char *owned;
    int views;              /* 0: every value copied (a node without outputs would not trigger its cut in time) */
    int64_t copied, copied_peak; /* bytes of the copies held now, and at most */
    int *ext;               /* scratch, by input of a cut graph: as in cut_graph */
    int *outs;              /* scratch, by output of a cut graph: the model output index */
    /* scratch, by node of a cut graph: the node of q->g whose packed weights it takes from fx, the
     * worker's f32 run (qr_exec_share_cache_nodes), -1 none */
    int *share;
    const qr_exec *fx;
    qr_error e;
    qr_status st;
} effects;

/* A worker's f32 executor, kept between measure_effects' calls of one fallback (q->effects_keep):
 * the f32 run over the effect samples is the same in every call (the model in f32, the same
 * samples), and so is what its kernels pack of the weights, which the cuts' runs take. The first
 * call makes it with a packing run (effects_worker); the others start from its packing. ef: the
 * call under way, which the observer and supplied hooks read. */
typedef struct qr_effects_keep {
    qr_exec *x;
    int threads;
    effects *ef;
    int halves; /* the packing run's verdict on halves (effects_worker): 1 the same outputs, -1 not, 0 not asked */
} effects_keep;

/* n (of a cut graph) is node i of g (-1: none) reading the same constants (the same data, or a small
 * one's equal copy): what its
 * kernel keeps of them (packed weights) is what g's node keeps, the other inputs being the same
 * f32 values (n's op, attributes and shapes are g's node's, the QDQ graph a copy sharing g's
 * constants). A node reading what the quantizer added (a weight's DequantizeLinear) is not. */
static int same_consts(const qr_graph *g, int i, const qr_node *n)
{
    if (i < 0)
        return 0;
    const qr_node *o = g->nodes[i];
    if (o->n_in != n->n_in || o->n_out != n->n_out || strcmp(o->op, n->op))
        return 0;
    for (int j = 0; j < n->n_in; j++) {
        const qr_value *a = o->in[j], *b = n->in[j];
        if (!a != !b || (a && a->is_const != b->is_const))
            return 0;
        if (!a || !a->is_const || a->t.data == b->t.data)
            continue;
        /* a small constant (a bias) is copied with the graph, a weight's block shared */
        size_t bytes = qr_tensor_nbytes(&a->t);
        if (a->t.dtype != b->t.dtype || a->t.ndim != b->t.ndim || bytes != qr_tensor_nbytes(&b->t) ||
            bytes >= QR_BLOB_MIN || memcmp(a->t.dims, b->t.dims, sizeof a->t.dims[0] * (size_t)a->t.ndim) ||
            memcmp(a->t.data, b->t.data, bytes))
            return 0;
    }
    return 1;
}

/* For a graph d the quantizer made of the model g (a measured QDQ graph, the integer graph) or of
 * another such graph g: by node of d, the node of g that computes the same thing from the same
 * constants and the same values (same_consts, the same attributes, each other input the value of
 * the same name: found by the name of the value it makes, which both graphs keep for the model's
 * nodes), -1 none; NULL when out of memory (nothing shared). For runs whose observers rewrite no
 * value: a value made from constants alone is then the same in both, and so what a kernel keeps of
 * it. */
static int *share_map(const qr_graph *g, const qr_graph *d)
{
    int *map = malloc(sizeof *map * ((size_t)d->n_nodes + 1));
    for (int i = 0; map && i < d->n_nodes; i++) {
        const qr_node *n = d->nodes[i];
        const qr_value *v = n->n_out > 0 && n->out[0] ? qr_graph_find(g, n->out[0]->name) : NULL;
        const qr_node *o = v ? v->producer : NULL;
        int ok = o && o->id >= 0 && o->id < g->n_nodes && g->nodes[o->id] == o && same_consts(g, o->id, n) &&
                 o->n_attr == n->n_attr && !strcmp(o->domain, n->domain) && o->opset == n->opset;
        for (int k = 0; ok && k < n->n_attr; k++)
            ok = same_attr(&o->attr[k], &n->attr[k]);
        for (int k = 0; ok && k < n->n_in; k++)
            ok = !n->in[k] || n->in[k]->is_const || !strcmp(n->in[k]->name, o->in[k]->name);
        map[i] = ok ? o->id : -1;
    }
    return map;
}

/* d, the QDQ graph of one layer quantized alone, cut at node at (of q->g): the nodes the quantizer
 * added and the model's nodes from at on, and of those only what computes an output the layer's
 * quantization reaches (the others stay f32's: outs[j] is the model output of d's output j). What
 * they read from before at becomes an input, fed ef->val[ext[i]] (or, ext[i] = -1 - k, the model's
 * input k); one that is not f32 (shapes, indices), a constant of its value in this batch, so that
 * the executor still plans with it. 0 when a value it needs was not kept. */
static int cut_graph(effects *ef, qr_graph *d, int at)
{
    const qr_qctx *q = ef->q;
    const qr_graph *g = q->g;
    int nn = d->n_nodes, nv = d->n_values, ok = 1, nin = 0, nout = 0;
    int *orig = malloc(sizeof *orig * ((size_t)nn + 1));
    unsigned char *made = calloc((size_t)nv + 1, 1), *kept = calloc((size_t)nv + 1, 1), *seen = calloc((size_t)nv + 1, 1);
    qr_value **inputs = qr_arena_try_alloc(&d->arena, sizeof *inputs * ((size_t)nv + 1));
    int *share = realloc(ef->share, sizeof *share * ((size_t)nn + 1));
    if (share)
        ef->share = share;
    ok = orig && made && kept && seen && inputs && share;
    for (int i = 0; ok && i < nn; i++)
        orig[i] = -1;
    for (int i = 0; ok && i < g->n_nodes; i++)
        orig[q->qnode[i]] = i;
    for (int i = 0; ok && i < nn; i++) { /* in graph order: reached when added or reading one reached */
        const qr_node *n = d->nodes[i];
        int cone = orig[i] < 0;
        for (int j = 0; !cone && j < n->n_in; j++)
            cone = n->in[j] && made[n->in[j]->id];
        if (cone && orig[i] >= 0 && ef->pos[orig[i]] < at)
            ok = 0; /* a node before the cut changes: effect_cuts missed a constant */
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j]) {
                made[n->out[j]->id] = (unsigned char)cone;
                kept[n->out[j]->id] = orig[i] < 0 || ef->pos[orig[i]] >= at;
            }
    }
    for (int i = 0; ok && i < nn; i++) {
        const qr_node *n = d->nodes[i];
        for (int j = 0; ok && (orig[i] < 0 || ef->pos[orig[i]] >= at) && j < n->n_in; j++) {
            qr_value *u = n->in[j];
            if (!u || u->is_const || kept[u->id] || seen[u->id])
                continue;
            seen[u->id] = 1;
            int src = INT32_MIN; /* its f32 value: the same output of the original node, or a model input */
            if (u->producer && orig[u->producer->id] >= 0) {
                const qr_node *on = g->nodes[orig[u->producer->id]];
                for (int k = 0; k < u->producer->n_out && k < on->n_out; k++)
                    if (u->producer->out[k] == u && on->out[k] && ef->val[on->out[k]->id].data)
                        src = on->out[k]->id;
            }
            for (int k = 0; k < d->n_inputs && !u->producer; k++)
                if (d->inputs[k] == u)
                    src = -1 - k;
            if (!(ok = src != INT32_MIN))
                break;
            u->producer = NULL;
            if (src >= 0 && ef->val[src].dtype != QR_F32) {
                qr_value_set_const(d, u, &ef->val[src]);
                ok = u->is_const;
                continue;
            }
            if (src >= 0) {
                u->t = ef->val[src];
                u->t.data = NULL;
            }
            u->is_input = 1;
            ef->ext[nin] = src;
            inputs[nin++] = u;
        }
    }
    for (int k = 0; ok && k < d->n_inputs; k++)
        if (!seen[d->inputs[k]->id])
            d->inputs[k]->is_input = 0;
    for (int k = 0; ok && k < d->n_outputs; k++) {
        qr_value *v = d->outputs[k];
        if (made[v->id]) {
            ef->outs[nout] = k;
            d->outputs[nout++] = v;
        } else
            v->is_output = 0;
    }
    if (ok) {
        d->inputs = inputs;
        d->n_inputs = nin;
        d->n_outputs = nout;
        for (int i = 0; i < nn; i++)
            d->nodes[i]->dead = orig[i] >= 0 && ef->pos[orig[i]] < at;
        qr_graph_drop_unused(d);
        for (int i = 0, k = 0; i < nn; i++)
            if (!d->nodes[i]->dead)
                ef->share[k++] = same_consts(g, orig[i], d->nodes[i]) ? orig[i] : -1;
        qr_graph_compact(d);
        ok = !qr_graph_oom(d);
    }
    free(orig), free(made), free(kept), free(seen);
    return ok;
}


/* Ranked layer r alone quantized on batch ef->k, from its cut on, its sums into its row; whole[r]
 * when it cannot be cut. */
static qr_status run_cut(effects *ef, int r)
{
    qr_qctx *q = ef->q;
    const qr_graph *g = q->g;
    qr_quantized one = {0};
    qr_status st = QR_OK;
    pthread_mutex_lock(&ef->sh->mu); /* the plan's state: its slots' fallback, qval, qnode and q->e */
    int whole = ef->whole[r];
    if (!whole) {
        for (int k = 0; k < q->nslots; k++)
            q->slots[k].fallback = k != ef->rk[r].slot;
        if ((st = qr_plan_build_qdq(q, &one)) != QR_OK)
            ef->e = *q->e;
        else if (!cut_graph(ef, one.qdq, ef->cut[r])) {
            whole = ef->whole[r] = 1;
            if (qr_options_get()->effects == QR_EFFECTS_CUT)
                st = qr_errorf(&ef->e, "effects=cut: the run of '%s' alone cannot start at node %d of the run",
                               g->values[q->slots[ef->rk[r].slot].value]->name, ef->cut[r]);
        }
    }
    pthread_mutex_unlock(&ef->sh->mu);
    const qr_graph *d = one.qdq;
    qr_tensor *in = NULL, *out = NULL;
    const qr_tensor **got = NULL;
    qr_exec *x = NULL;
    if (st == QR_OK && !whole) {
        in = calloc((size_t)d->n_inputs + 1, sizeof *in);
        out = calloc((size_t)g->n_outputs + 1, sizeof *out);
        got = calloc((size_t)g->n_outputs + 1, sizeof *got);
        /* counted as the batch's samples (its model inputs' first axis, as the f32 run counts
         * them), not the first axis of the value it starts from ([3, B, ...] in PP-OCRv4 rec) */
        qr_exec_opts eo = {.threads = ef->threads,
                           .samples = g->n_inputs > 0 && ef->in[0].ndim > 0 ? ef->in[0].dims[0] : 1};
        st = in && out && got ? QR_OK : qr_errorf(&ef->e, "out of memory");
        for (int i = 0; st == QR_OK && i < d->n_inputs; i++)
            in[i] = ef->ext[i] < 0 ? ef->in[-1 - ef->ext[i]] : ef->val[ef->ext[i]];
        if (st == QR_OK && d->n_outputs > 0) /* none: nothing the layer changes reaches an output */
            if ((st = qr_exec_new(d, &eo, &x, &ef->e)) == QR_OK &&
                (st = qr_exec_share_cache_nodes(x, ef->fx, ef->share, &ef->e)) == QR_OK)
                st = qr_exec_run(x, in, out, &ef->e);
        qr_tensor *part = ef->part_b > 0 ? calloc((size_t)g->n_outputs + 1, sizeof *part) : NULL;
        if (st == QR_OK && ef->part_b > 0 && !part)
            st = qr_errorf(&ef->e, "out of memory");
        for (int j = 0; st == QR_OK && j < g->n_outputs; j++) {
            got[j] = &ef->o->out[ef->k * g->n_outputs + j];
            if (part) { /* the reference's samples of this part, for the outputs the layer does not reach */
                const qr_tensor *rt = got[j];
                int64_t per = qr_tensor_numel(rt) / rt->dims[0];
                part[j] = *rt;
                part[j].dims[0] = ef->part_b;
                part[j].data = (char *)rt->data + (size_t)(ef->part_at * per) * qr_dtype_size(rt->dtype);
                got[j] = &part[j];
            }
        }
        for (int j = 0; st == QR_OK && j < d->n_outputs; j++)
            got[ef->outs[j]] = &out[j];
        out_acc sums = {.each = calloc((size_t)g->n_outputs + 1, sizeof *sums.each)};
        if (st == QR_OK && !sums.each)
            st = qr_errorf(&ef->e, "out of memory");
        double *row = st == QR_OK ? ef->sh->rows + ((size_t)r * (size_t)ef->sh->nbatches + (size_t)ef->k) *
                                                       (size_t)row_width(q)
                                  : NULL;
        if (row && part) /* the part's sums, onto the batch's row */
            out_row_part(q, ef->o, ef->k, got, ef->part_at, ef->part_b, row);
        else if (row) /* the batch's sums, added up with the others' at the end (as measure_outputs does) */
            out_row(q, ef->o, ef->k, got, &sums, row);
        free(sums.each);
        free(part);
        for (int j = 0; out && j < d->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    qr_exec_free(x);
    qr_graph_free(one.qdq);
    free(in), free(out), free(got);
    return st;
}

static void val_drop(effects *ef, int i)
{
    if (ef->owned[i]) {
        ef->copied -= (int64_t)qr_tensor_nbytes(&ef->val[i]);
        qr_tensor_free(&ef->val[i]);
    }
    ef->val[i].data = NULL;
    ef->owned[i] = 0;
}

/* The f32 run has passed node p and the node at p + 1 is next: the cuts up to p + 1 run (a cut
 * reads only values made before it, which its readers at or after the cut have not yet
 * overwritten), and what no cut ahead reads goes. */
static void effects_upto(effects *ef, int p)
{
    while (ef->st == QR_OK && ef->next < ef->nown && ef->cut[ef->order[ef->next]] <= p + 1)
        ef->st = run_cut(ef, ef->order[ef->next++]);
    int upto = ef->next < ef->nown && ef->cut[ef->order[ef->next]] < p ? ef->cut[ef->order[ef->next]] : p;
    if (upto <= ef->freed)
        return;
    ef->freed = upto;
    for (int i = 0; i < ef->q->g->n_values; i++)
        if (ef->val[i].data && ef->last[i] < upto)
            val_drop(ef, i);
}

/* v is n's last output the observer sees. */
static int last_out(const qr_node *n, const qr_value *v)
{
    for (int j = n->n_out - 1; j >= 0; j--)
        if (n->out[j])
            return n->out[j] == v;
    return 1;
}

static void observe_effects(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    effects *ef = ((effects_keep *)user)->ef;
    int p = n ? ef->pos[n->id] : 0;
    effects_upto(ef, p - 1);
    /* kept only for a cut still to run that reads it: the cuts up to p have run, so the next one
     * is the first after p, and a value whose last reader comes before it is read by none (the
     * first batch's run before the cuts, none to run, keeps nothing) */
    if (ef->st == QR_OK && ef->next < ef->nown && original(ef->q, v) && t->data &&
        ef->last[v->id] >= ef->cut[ef->order[ef->next]] && ef->last[v->id] > p) {
        val_drop(ef, v->id);
        qr_tensor *c = &ef->val[v->id];
        *c = *t;
        /* a view where the f32 run's buffer outlives the cuts that read it (PP-OCR det: copies
         * of up to 31 MB of values, their copies and frees fragmenting the heap the cut runs grow) */
        if (!ef->views || ef->last[v->id] >= ef->q->g->n_nodes) {
            c->data = NULL;
            if ((ef->st = qr_tensor_alloc(c, &ef->e)) == QR_OK)
                memcpy(c->data, t->data, qr_tensor_nbytes(t));
            ef->owned[v->id] = c->data != NULL;
            ef->copied += c->data ? (int64_t)qr_tensor_nbytes(c) : 0;
            ef->copied_peak = ef->copied > ef->copied_peak ? ef->copied : ef->copied_peak;
        }
    }
    if (!n || last_out(n, v)) /* the node's values all kept: the cuts that read them before the next node */
        effects_upto(ef, p);
}

/* The f32 run's qr_exec_opts.supplied: from the last cut of the worker's layers on, nothing its
 * cuts read is computed (a cut's graph reads values made before its cut and runs everything
 * after it itself; the outputs are the reference's, ef->o), so those nodes do not run. The
 * observer still sees them: the node at the last cut runs that cut (effects_upto). */
static int effects_supplied(void *user, const qr_node *n, qr_tensor *const *out)
{
    (void)out;
    const effects *ef = ((const effects_keep *)user)->ef;
    return ef->pos[n->id] >= ef->idle_from;
}

/* A worker of measure_effects: its own f32 run over every batch of effect samples (calib), taking
 * layers as it goes. */
typedef struct effects_arg {
    effects *ef;
    const qr_tensor *calib;
    effects_keep *keep; /* NULL: an executor of this call's own */
} effects_arg;

/* Whether batch k (b samples) runs in parts of ef->sub: each f32 output of it is laid out by
 * samples (first axis b, and rows of its last axis within a sample: out_row_part). */
static int effects_parts(const effects *ef, int k, int64_t b)
{
    const qr_graph *g = ef->q->g;
    if (ef->sub <= 0 || ef->sub >= b)
        return 0;
    for (int j = 0; j < g->n_outputs; j++) {
        const qr_tensor *rt = &ef->o->out[k * g->n_outputs + j];
        if (rt->ndim < 2 || rt->dims[0] != b || !rt->data)
            return 0;
    }
    return 1;
}

static void *effects_worker(void *p)
{
    effects_arg *a = p;
    effects *ef = a->ef;
    const qr_graph *g = ef->q->g;
    const outref *o = ef->o;
    size_t nv = (size_t)g->n_values + 1;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    ef->val = calloc(nv, sizeof *ef->val);
    ef->owned = calloc(nv, 1);
    ef->ext = calloc(nv, sizeof *ef->ext);
    ef->outs = calloc((size_t)g->n_outputs + 1, sizeof *ef->outs);
    effects_keep own = {0}, *kp = a->keep ? a->keep : &own;
    if (kp->x && kp->threads != ef->threads) { /* packed for other kernel threads: not shared */
        qr_exec_free(kp->x);
        kp->x = NULL;
    }
    int packed = kp->x != NULL;
    kp->ef = ef;
    qr_exec_opts eo = {.threads = ef->threads, .observer = observe_effects, .observer_user = kp,
                       .supplied = effects_supplied};
    qr_exec *x = kp->x;
    qr_status st = !(in && ef->val && ef->owned && ef->ext && ef->outs) ? qr_errorf(&ef->e, "out of memory")
                   : x                                      ? QR_OK
                                                            : qr_exec_new(g, &eo, &x, &ef->e);
    ef->fx = x;
    /* an f32 run of the first batch before the cuts: it packs every layer's f32 weights once, which
     * each cut's run then takes (run_cut) instead of packing again what it runs downstream (on
     * ResNet-18, 18 layers by 4 batches: more than half of the effects' time); once a fallback,
     * its executor kept for the next calls (q->effects_keep) */
    int nown = ef->nown;
    ef->nown = 0;
    ef->idle_from = g->n_nodes; /* the packing run runs every node: the cuts take from all of it */
    if (st == QR_OK && !packed && nown > 0 && o->nbatches > 0) {
        int64_t b = o->n < o->batch ? o->n : o->batch;
        /* in halves: the first half (the weights packed as by a whole batch), its outputs against
         * the whole batch's, to the last bit: a model that mixes its samples (the openWakeWord
         * melspectrogram's effects moved by 1 to 4 dB) runs whole batches */
        int half = effects_parts(ef, 0, b);
        qr_tensor *out = half ? calloc((size_t)g->n_outputs + 1, sizeof *out) : NULL;
        b = half ? ef->sub : b;
        qr_plan_take_inputs(ef->q, a->calib, g->n_inputs, 0, b, in);
        ef->k = 0, ef->next = 0, ef->freed = -1, ef->in = in;
        st = !out ? qr_plan_run_once(x, g, in, &ef->e) : qr_exec_run(x, in, out, &ef->e);
        for (int j = 0; out && st == QR_OK && j < g->n_outputs; j++) {
            const qr_tensor *rt = &o->out[j];
            size_t bytes = qr_tensor_nbytes(rt) / (size_t)rt->dims[0] * (size_t)b;
            kp->halves = kp->halves < 0 || out[j].dtype != rt->dtype || out[j].ndim != rt->ndim ||
                                 qr_tensor_nbytes(&out[j]) != bytes || memcmp(out[j].data, rt->data, bytes)
                             ? -1
                             : 1;
        }
        for (int j = 0; out && j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
        free(out);
        qr_plan_drop_inputs(ef->q, a->calib, 0, b);
        if (st == QR_OK)
            st = ef->st;
        for (size_t i = 0; i < nv; i++)
            val_drop(ef, (int)i);
    }
    ef->nown = nown;
    if (kp->halves != 1) /* not asked (no packing run in halves) or not the same: whole batches */
        ef->sub = 0;
    ef->halves_bad = kp->halves < 0;
    for (int i = 0; i < nown; i++) /* the last cut: the nodes from it on are idle in the runs below */
        if (i == 0 || ef->cut[ef->order[i]] > ef->idle_from)
            ef->idle_from = ef->cut[ef->order[i]];
    for (int k = 0; st == QR_OK && k < o->nbatches; k++) {
        int64_t at = k * o->batch, b = o->n - at < o->batch ? o->n - at : o->batch;
        int64_t step = effects_parts(ef, k, b) ? ef->sub : b;
        for (int64_t s0 = 0; st == QR_OK && s0 < b; s0 += step) { /* the batch, or its parts in order */
            int64_t sb = b - s0 < step ? b - s0 : step;
            qr_plan_take_inputs(ef->q, a->calib, g->n_inputs, at + s0, sb, in);
            ef->k = k, ef->next = 0, ef->freed = -1, ef->in = in;
            ef->part_at = s0, ef->part_b = step < b ? sb : 0;
            ef->most = sb > ef->most ? sb : ef->most;
            st = qr_plan_run_once(x, g, in, &ef->e);
            if (st == QR_OK && ef->st == QR_OK)
                effects_upto(ef, g->n_nodes); /* the cuts still to run read the batch's inputs */
            qr_plan_drop_inputs(ef->q, a->calib, at + s0, sb);
            if (st == QR_OK)
                st = ef->st;
            for (size_t i = 0; ef->val && i < nv; i++)
                val_drop(ef, (int)i);
        }
        ef->part_at = ef->part_b = 0;
    }
    if (a->keep && st == QR_OK && x) { /* its packing for the next call; its arena goes */
        qr_exec_drop_plan(x);
        kp->x = x, kp->threads = ef->threads;
    } else {
        qr_exec_free(x);
        kp->x = NULL;
    }
    kp->ef = NULL;
    free(in), free(ef->val), free(ef->owned), free(ef->ext), free(ef->outs), free(ef->share);
    ef->val = NULL, ef->owned = NULL, ef->ext = NULL, ef->outs = NULL, ef->share = NULL, ef->fx = NULL;
    ef->st = st;
    return NULL;
}

/* Where each ranked layer's run starts (cut, by ranked index): the first node that reads its value
 * or a constant quantized with it (a constant all of whose matches produce its slot; one in no
 * match with a slot, with every layer). last (by value id, zeroed; model outputs n_nodes already):
 * the last node that reads it. cut_graph checks that nothing before the cut changes. */
static void effect_cuts(const qr_qctx *q, const ranked *rk, int nr, const int *pos, int *cut, int *last)
{
    const qr_graph *g = q->g;
    int nv = g->n_values, all = g->n_nodes;
    int *first = malloc(sizeof *first * ((size_t)nv + 1)), *owner = malloc(sizeof *owner * ((size_t)nv + 1));
    for (int r = 0; r < nr; r++)
        cut[r] = 0; /* without the memory to find them: from the start, the whole model */
    if (!first || !owner) {
        free(first), free(owner);
        return;
    }
    for (int i = 0; i < nv; i++)
        first[i] = all, owner[i] = -1; /* -1: no match with a slot, -2: several slots */
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i]->n_in; j++) {
            const qr_value *u = g->nodes[i]->in[j];
            if (u && pos[i] < first[u->id])
                first[u->id] = pos[i];
            if (u && pos[i] > last[u->id]) /* a model output keeps n_nodes */
                last[u->id] = pos[i];
        }
    for (int m = 0; m < q->nmatches; m++) {
        int s = q->slot_of[q->matches[m].out];
        for (int k = 0; s >= 0 && k < q->matches[m].nconsts; k++) {
            int *o = &owner[q->matches[m].consts[k]];
            *o = *o == -1 || *o == s ? s : -2;
        }
    }
    for (int r = 0; r < nr; r++)
        cut[r] = first[q->slots[rk[r].slot].value];
    for (int i = 0; i < q->nw + q->nbias; i++) {
        int c = i < q->nw ? q->w[i].value : q->bias[i - q->nw].value;
        for (int r = 0; owner[c] != -2 && r < nr; r++)
            if ((owner[c] == -1 || owner[c] == rk[r].slot) && first[c] < cut[r])
                cut[r] = first[c];
    }
    free(first), free(owner);
}

/* Under mpirun, each layer's effect from the rank that measured it: rank k took the layers at
 * places k, k + size, ... of byrank (measure_effects deals them out so). */
static qr_status gather_effects(qr_qctx *q, ranked *rk, int nr, const int *byrank, qr_status st)
{
    int size = qr_dist_size(), rank = qr_dist_rank();
    double *all = calloc((size_t)nr + 1, sizeof *all);
    int64_t *counts = calloc((size_t)size, sizeof *counts);
    if (!all || !counts) {
        free(all), free(counts);
        return qr_errorf(q->e, "out of memory");
    }
    int at = 0; /* rank k's block: its layers in turn order */
    for (int k = 0; k < size; k++)
        for (int i = k; i < nr; i += size, at++) {
            counts[k]++;
            if (k == rank)
                all[at] = rk[byrank[i]].effect;
        }
    st = qr_dist_allgather(all, counts, st, q->e);
    at = 0;
    for (int k = 0; st == QR_OK && k < size; k++)
        for (int i = k; i < nr; i += size)
            rk[byrank[i]].effect = all[at++];
    free(all), free(counts);
    return st;
}

/* Each ranked layer's effect on the model's outputs when it alone is quantized
 * (the QDQ simulation, every other layer in f32). Local SQNR ranks the victims
 * of amplification last: on PP-OCR det the 93 worst layers by local SQNR left
 * the outputs at 7 dB, and the ones that decided them ranked 140th to 163rd.
 * Measured on the first effect_samples samples alone (whole batches where the model fixes its
 * batch), against f32 outputs of their own: the fallback's reference holds whole batches.
 * Each layer's run starts at its cut (struct effects): it computes only what the layer reaches and
 * what feeds that, about half the model on average, and the values kept for it are what the f32
 * run holds live there anyway. Under the option effects=whole (the tests' reference), or after a
 * bias correction, each runs the whole model, as one that cannot be cut does (effects=cut: an
 * error). */
static qr_status measure_effects(qr_qctx *q, const outref *all, const qr_tensor *calib, int64_t count, ranked *rk,
                                 int nr)
{
    const qr_graph *g = q->g;
    outref o;
    int own = 1;
    qr_status st = effect_outref(&o, q, all, calib, count, &own);
    if (st != QR_OK)
        return st;
    size_t nv = (size_t)g->n_values + 1;
    int *cut = calloc((size_t)nr + 1, sizeof *cut), *order = calloc((size_t)nr + 1, sizeof *order);
    int *last = calloc(nv, sizeof *last), *pos = calloc((size_t)g->n_nodes + 1, sizeof *pos);
    int *run_order = calloc((size_t)g->n_nodes + 1, sizeof *run_order);
    unsigned char *whole = calloc((size_t)nr + 1, 1), *was = calloc((size_t)q->nslots + 1, 1);
    effects_shared sh = {.nbatches = o.nbatches};
    sh.rows = calloc((size_t)nr * (size_t)o.nbatches * (size_t)row_width(q) + 1, sizeof *sh.rows);
    int ok = pos && run_order && qr_exec_order(g, run_order) == QR_OK && cut && order && last && whole && was &&
             sh.rows;
    if (!ok)
        st = qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < g->n_nodes; k++)
        pos[run_order[k]] = k;
    free(run_order);
    for (int i = 0; st == QR_OK && i < q->nslots; i++)
        was[i] = (unsigned char)q->slots[i].fallback;
    for (int i = 0; st == QR_OK && i < g->n_outputs; i++)
        last[g->outputs[i]->id] = g->n_nodes;
    /* after a bias correction the outputs a layer does not reach are not the reference's (q->ref):
     * whole runs */
    int all_whole = qr_options_get()->effects == QR_EFFECTS_WHOLE || q->ref;
    if (st == QR_OK)
        effect_cuts(q, rk, nr, pos, cut, last);
    for (int r = 0; st == QR_OK && r < nr; r++)
        order[r] = r, whole[r] = (unsigned char)all_whole;
    for (int a = 1; st == QR_OK && a < nr; a++) /* by cut, stable */
        for (int b = a; b > 0 && cut[order[b - 1]] > cut[order[b]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    /* under mpirun the layers are dealt out in that order, one to each rank in turn (a layer cut
     * early runs more of the model: each rank gets early and late ones); every rank runs the f32
     * passes, and its own layers' cuts */
    int size = qr_dist_size(), rank = qr_dist_rank(), *byrank = calloc((size_t)nr + 1, sizeof *byrank), nown = 0;
    unsigned char *mine = calloc((size_t)nr + 1, 1);
    if (st == QR_OK && (!byrank || !mine))
        st = qr_errorf(q->e, "out of memory");
    if (st == QR_OK) {
        memcpy(byrank, order, sizeof *byrank * (size_t)nr);
        for (int i = 0; i < nr; i++)
            if (i % size == rank)
                mine[byrank[i]] = 1, order[nown++] = byrank[i];
    }
    /* --threads workers (fewer where there are fewer layers, or the memory budget holds fewer: each
     * holds an f32 run, a layer's run and the values kept between, about three runs of a batch),
     * each on threads / workers kernel threads. This rank's layers (by cut: a layer cut early runs
     * more of the model) are dealt out to them back and forth (0, 1, 1, 0, 0, 1, ...), so that each
     * gets early and late ones */
    int threads = q->o->threads > 1 ? q->o->threads : 1, nw = threads < nown ? threads : nown;
    size_t budget = qr_exec_default_max_memory(), held = qr_plan_held_bytes(g, calib);
    while (nw > 1 && (held >= budget || (budget - held) / 3 / (size_t)nw < o.run_bytes))
        nw--;
    effects *ef = calloc((size_t)nw + 1, sizeof *ef);
    effects_arg *args = calloc((size_t)nw + 1, sizeof *args);
    pthread_t *tid = calloc((size_t)nw + 1, sizeof *tid);
    char *started = calloc((size_t)nw + 1, 1);
    if (st == QR_OK && (!ef || !args || !tid || !started))
        st = qr_errorf(q->e, "out of memory");
    int views = 1; /* every node observed: each cut runs as the node before it is passed */
    for (int i = 0; i < g->n_nodes; i++) {
        int outs = 0;
        for (int j = 0; j < g->nodes[i]->n_out; j++)
            outs += g->nodes[i]->out[j] != NULL;
        views &= outs > 0;
    }
    /* Where a batch's f32 run outweighs the model's constants and the model's batch is free, each
     * batch runs in two halves, the f32 run and every cut (PP-OCRv4 det at batch 4: the f32 run's
     * arena, 31 MB, beside a cut's, 21 to 45 MB, held the effects' 146 MiB): the same rows
     * (out_row_part), as the runs compute each sample as in the whole batch */
    int64_t eb = o.n < o.batch ? o.n : o.batch;
    int64_t sub = qr_graph_fixed_batch(g) <= 0 && eb >= 2 && o.run_bytes > const_bytes(q) &&
                          !qr_options_get()->halves_whole
                      ? (eb + 1) / 2
                      : 0;
    for (int w = 0; st == QR_OK && w < nw; w++) {
        ef[w] = (effects){.q = q, .o = &o, .rk = rk, .sh = &sh, .nr = nr, .threads = threads / nw, .pos = pos,
                          .cut = cut, .last = last, .whole = whole, .views = views, .sub = sub};
        if (!(ef[w].order = calloc((size_t)nown + 1, sizeof *ef[w].order)))
            st = qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; st == QR_OK && i < nown; i++) {
        int turn = i / nw, w = turn % 2 ? nw - 1 - i % nw : i % nw;
        ef[w].order[ef[w].nown++] = order[i];
    }
    if (st == QR_OK && pthread_mutex_init(&sh.mu, NULL) != 0)
        st = qr_errorf(q->e, "cannot make a mutex");
    int mu_made = st == QR_OK;
    for (int w = 0; st == QR_OK && !all_whole && w < nw; w++) {
        args[w] = (effects_arg){&ef[w], calib, w < q->neffects_keep ? &q->effects_keep[w] : NULL};
        if (w > 0)
            started[w] = pthread_create(&tid[w], NULL, effects_worker, &args[w]) == 0;
    }
    /* worker 0 on a thread of its own too: what it allocates (the f32 run's packing, the values
     * kept, each cut's run) goes to a malloc arena an earlier phase's threads left free (the
     * measurements' readers'), which glibc gives a new thread, rather than growing the caller's
     * heap beside it: ResNet-18's peak, set here, 244 -> 198 MB at one thread */
    if (st == QR_OK && !all_whole && nw > 0 && pthread_create(&tid[0], NULL, effects_worker, &args[0]) == 0)
        pthread_join(tid[0], NULL);
    else if (st == QR_OK && !all_whole && nw > 0)
        effects_worker(&args[0]);
    for (int w = 1; st == QR_OK && !all_whole && w < nw; w++) {
        if (started[w])
            pthread_join(tid[w], NULL);
        else /* no thread: after the others, on this one */
            effects_worker(&args[w]);
    }
    for (int w = 0; st == QR_OK && !all_whole && w < nw; w++)
        q->effects_copied_bytes = ef[w].copied_peak > q->effects_copied_bytes ? ef[w].copied_peak : q->effects_copied_bytes;
    for (int w = 0; st == QR_OK && !all_whole && w < nw; w++) {
        q->effects_run_samples = ef[w].most > q->effects_run_samples ? ef[w].most : q->effects_run_samples;
        q->halves_bad |= ef[w].halves_bad;
    }
    for (int w = 0; st == QR_OK && !all_whole && w < nw; w++)
        if (ef[w].st != QR_OK) { /* the first worker's error */
            *q->e = ef[w].e;
            st = QR_ERR;
        }
    if (mu_made)
        pthread_mutex_destroy(&sh.mu);
    for (int r = 0; st == QR_OK && r < nr; r++) {
        out_metrics mt = {0};
        if (!mine[r])
            continue;
        if (whole[r]) { /* every other layer in f32, the whole model run */
            for (int k = 0; k < q->nslots; k++)
                q->slots[k].fallback = k != rk[r].slot;
            qr_quantized one = {0};
            if ((st = qr_plan_build_qdq(q, &one)) == QR_OK)
                st = measure_outputs(q, &o, one.qdq, NULL, calib, 0, &mt);
            qr_graph_free(one.qdq);
        } else
            st = rows_metrics(q, sh.rows + (size_t)r * (size_t)o.nbatches * (size_t)row_width(q), o.nbatches, &mt);
        rk[r].effect = mt.nonfinite ? -INFINITY : mt.sqnr;
    }
    if (size > 1) /* every rank's effects, each rank's in its turn order */
        st = gather_effects(q, rk, nr, byrank, st);
    for (int i = 0; was && i < q->nslots; i++)
        q->slots[i].fallback = was[i];
    free(pos), free(cut), free(order), free(last), free(whole), free(was), free(byrank), free(mine);
    for (int w = 0; ef && w < nw; w++)
        free(ef[w].order);
    free(sh.rows), free(ef), free(args), free(tid), free(started);
    if (own)
        outref_free(&o);
    return st;
}

/* ------------------------------------------------------------ rank = probe */

/* The recipe's count setting id, or def when it has none. */
static int setting_count(const qr_qctx *q, qr_setting_id id, int def)
{
    const qr_setting *s = qr_recipe_setting(q->r, id);
    return s && s->value >= 1 ? (int)s->value : def;
}

/* One probe run: the slots of rk[sel[i]] with on[i] quantized, every other slot f32, over o's
 * batches; its error against o's f32 outputs (output by output, batch by batch, as floats) into
 * err (o's f32 elements long). *bad when an output is not finite where f32 is. */
static qr_status probe_run(qr_qctx *q, const outref *o, const qr_tensor *calib, const ranked *rk, const int *sel,
                           const unsigned char *on, int n, float *err, int *bad)
{
    const qr_graph *g = q->g;
    for (int k = 0; k < q->nslots; k++)
        q->slots[k].fallback = 1;
    for (int i = 0; i < n; i++)
        if (on[i])
            q->slots[rk[sel[i]].slot].fallback = 0;
    qr_quantized one = {0};
    qr_exec *x = NULL;
    qr_exec_opts eo = {.threads = q->o->threads > 1 ? q->o->threads : 1};
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    qr_status st = in && out ? QR_OK : qr_errorf(q->e, "out of memory");
    if (st == QR_OK && (st = qr_plan_build_qdq(q, &one)) == QR_OK)
        st = qr_exec_new(one.qdq, &eo, &x, q->e);
    size_t at = 0;
    for (int k = 0; st == QR_OK && k < o->nbatches; k++) {
        int64_t from = k * o->batch, b = o->n - from < o->batch ? o->n - from : o->batch;
        qr_plan_take_inputs(q, calib, g->n_inputs, from, b, in);
        st = qr_exec_run(x, in, out, q->e);
        qr_plan_drop_inputs(q, calib, from, b);
        if (st != QR_OK)
            break;
        for (int j = 0; j < g->n_outputs; j++) {
            const qr_tensor *r = &o->out[(size_t)k * (size_t)g->n_outputs + (size_t)j];
            if (r->dtype != QR_F32)
                continue;
            int64_t m = qr_tensor_numel(r);
            const float *a = r->data;
            for (int64_t e = 0; e < m; e++) {
                double y = qr_get_f64(out[j].data, out[j].dtype, e), d = isfinite(a[e]) ? y - a[e] : 0;
                *bad |= !isfinite(d);
                err[at++] = isfinite(d) ? (float)d : 0;
            }
        }
        for (int j = 0; j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    qr_exec_free(x);
    qr_graph_free(one.qdq);
    free(in), free(out);
    return st;
}

/* rank = probe: each ranked layer's effect estimated from probe_rounds rounds of probe_runs runs
 * on the effect samples, random halves of the layers quantized in each (quantizer/probe.h), plus
 * one run with all of them: (probe_runs + 1) x probe_rounds QDQ runs whatever the layer count; each
 * layer's error energy from the runs' inner products, by the signs' estimate or (rank =
 * probe_pairs) the least-squares fit of every pair's (quantizer/probe.h).
 * Each round fixes the estimate of the probe_hold layers it finds worst and keeps them f32 in the
 * next rounds' runs, so that the layers that dominate the all-quantized error (PP-OCR det's few)
 * no longer drown the others' estimates in their noise; the last round fixes the rest. A layer's
 * effect is the outputs' SQNR its estimated error energy gives, output by output (the worst with
 * outputs = worst), pooled over the effect samples; an estimate below its noise (not positive)
 * gives +inf (ranked after the measured ones, by local SQNR). A run whose outputs are not finite
 * where f32's are cannot be split into layers: then every layer's effect is measured
 * (measure_effects). */
static qr_status probe_effects(qr_qctx *q, const outref *all, const qr_tensor *calib, int64_t count, ranked *rk,
                               int nr)
{
    const qr_graph *g = q->g;
    int runs = setting_count(q, QR_SET_PROBE_RUNS, 8), rounds = setting_count(q, QR_SET_PROBE_ROUNDS, 2);
    int hold = setting_count(q, QR_SET_PROBE_HOLD, 8), no = g->n_outputs, worst = worst_output(q), bad = 0;
    int pairs = choice_is(q, QR_SET_RANK, "probe_pairs");
    if (runs < 2)
        runs = 2;
    outref o;
    int own = 1;
    qr_status st = effect_outref(&o, q, all, calib, count, &own);
    if (st != QR_OK)
        return st;
    size_t w = (size_t)runs + 1, len = 0;
    for (int k = 0; k < o.nbatches; k++)
        for (int j = 0; j < no; j++) {
            const qr_tensor *r = &o.out[(size_t)k * (size_t)no + (size_t)j];
            len += r->dtype == QR_F32 ? (size_t)qr_tensor_numel(r) : 0;
        }
    float *err = malloc(sizeof *err * w * (len + 1));
    double *gram = calloc(w * w * (size_t)no + 1, sizeof *gram), *x2 = calloc((size_t)no + 1, sizeof *x2);
    double *en = calloc((size_t)nr + 1, sizeof *en), *est = calloc((size_t)nr * (size_t)no + 1, sizeof *est);
    unsigned char *in = malloc(w * (size_t)nr + 1), *fixed = calloc((size_t)nr + 1, 1), *was = malloc((size_t)q->nslots + 1);
    int *sel = malloc(sizeof *sel * ((size_t)nr + 1));
    if (!err || !gram || !x2 || !en || !est || !in || !fixed || !was || !sel)
        st = qr_errorf(q->e, "out of memory");
    for (int i = 0; st == QR_OK && i < q->nslots; i++)
        was[i] = (unsigned char)q->slots[i].fallback;
    for (int k = 0; st == QR_OK && k < o.nbatches; k++) /* each output's f32 energy */
        for (int j = 0; j < no; j++) {
            const qr_tensor *r = &o.out[(size_t)k * (size_t)no + (size_t)j];
            const float *a = r->data;
            for (int64_t e = 0; r->dtype == QR_F32 && e < qr_tensor_numel(r); e++)
                x2[j] += isfinite(a[e]) ? (double)a[e] * a[e] : 0;
        }
    for (int round = 0; st == QR_OK && !bad && round < rounds; round++) {
        int n = 0;
        for (int i = 0; i < nr; i++)
            if (!fixed[i])
                sel[n++] = i;
        if (n == 0)
            break;
        qr_probe_subsets(0x51ED27A5ull + (uint64_t)round, runs, n, in);
        memset(in + (size_t)runs * (size_t)n, 1, (size_t)n); /* run R: every probed layer */
        for (int r = 0; st == QR_OK && !bad && r <= runs; r++)
            st = probe_run(q, &o, calib, rk, sel, in + (size_t)r * (size_t)n, n, err + (size_t)r * len, &bad);
        if (st != QR_OK || bad)
            break;
        for (int j = 0; j < no; j++) { /* the runs' inner products, output by output */
            double *G = gram + (size_t)j * w * w;
            size_t from = 0;
            for (int k = 0; k < o.nbatches; k++)
                for (int jj = 0; jj < no; jj++) {
                    const qr_tensor *r = &o.out[(size_t)k * (size_t)no + (size_t)jj];
                    size_t m = r->dtype == QR_F32 ? (size_t)qr_tensor_numel(r) : 0;
                    if (jj == j)
                        for (size_t a = 0; a < w; a++)
                            for (size_t b = a; b < w; b++) {
                                const float *ea = err + a * len + from, *eb = err + b * len + from;
                                double s = 0;
                                for (size_t e = 0; e < m; e++)
                                    s += (double)ea[e] * eb[e];
                                G[a * w + b] += s;
                            }
                    from += m;
                }
            for (size_t a = 0; a < w; a++)
                for (size_t b = a; b < w; b++)
                    G[b * w + a] = G[a * w + b];
            if (!pairs)
                qr_probe_energy(n, runs, in, G, en, NULL);
            else if (qr_probe_energy_pairs(n, runs, in, G, en) != 0) {
                st = qr_errorf(q->e, "out of memory");
                break;
            }
            for (int i = 0; i < n; i++)
                est[(size_t)sel[i] * (size_t)no + (size_t)j] = en[i];
            memset(G, 0, sizeof *G * w * w);
        }
        if (st != QR_OK)
            break;
        for (int i = 0; i < n; i++) {
            ranked *l = &rk[sel[i]];
            double sx = 0, se = 0, low = INFINITY;
            for (int j = 0; j < no; j++) {
                double e2 = est[(size_t)sel[i] * (size_t)no + (size_t)j];
                sx += x2[j], se += e2 > 0 ? e2 : 0;
                if (e2 > 0)
                    low = fmin(low, 10.0 * log10(x2[j] / e2));
            }
            l->effect = worst ? low : se > 0 ? 10.0 * log10(sx / se) : INFINITY;
        }
        /* the hold worst of this round keep their estimate; the last round keeps every one */
        for (int h = 0; h < hold && round + 1 < rounds; h++) {
            int b = -1;
            for (int i = 0; i < n; i++)
                if (!fixed[sel[i]] && (b < 0 || by_effect(&rk[sel[i]], &rk[sel[b]]) < 0))
                    b = i;
            if (b < 0)
                break;
            fixed[sel[b]] = 1;
        }
    }
    free(err), free(gram), free(x2), free(en), free(est), free(in), free(fixed), free(sel);
    for (int i = 0; was && i < q->nslots; i++)
        q->slots[i].fallback = was[i];
    free(was);
    if (own)
        outref_free(&o);
    if (st == QR_OK && bad) /* not finite: no additive error to split */
        st = measure_effects(q, all, calib, count, rk, nr);
    return st;
}

/* ------------------------------------------------------------ rank = grad */

/* grad_effects' state in one batch of effect samples. */
typedef struct grad_batch {
    qr_qctx *q;
    qr_tensor *val;      /* by value id: the f32 forward's value in this batch (owned: own[id]); its shape
                          * alone (data NULL) where neither a backward nor the QDQ run reads it */
    unsigned char *own;
    const unsigned char *need; /* by value id: a backward reads its data (qr_vjp_reads) */
    const qr_node **masker; /* by value id: the one node that reads its data, which reads it as a mask
                             * (qr_vjp_masks: a Relu's, a Clip's input), or NULL */
    float **err;         /* by value id: the ranked layer's own error there (its QDQ value from f32 inputs, less f32) */
    const int *ridx;     /* by value id: its ranked index, or -1 */
    const unsigned char *exact; /* by value id: qr_vjp_exact's (else no error kept: its effect is measured) */
    const qr_tensor *in; /* the batch's model inputs */
    int64_t b, from, n;  /* samples in the batch, its first's index, all the effect samples */
    int no, out, dirs;   /* outputs; the output this pass's direction is at (-1: all, pooled); directions */
    double *e2;          /* [ranked][output][sample]: the estimated error energy, averaged over directions */
    qr_tensor *rc;       /* by value id: grad_keep's recomputations (qr_vjp_recompute), empty between calls */
    int64_t recomputed;  /* elements the pass keeps by their shape alone: the backward recomputes them */
    const unsigned char *qneed; /* by QDQ node id: its segment's errors read what it computes (else it
                                 * does not run: grad_supplied) */
} grad_batch;

/* rc's entries v's recomputation made (v and the producers' inputs it recomputed in turn) freed. */
static void rc_free(qr_tensor *rc, const qr_value *v, int depth)
{
    qr_tensor_free(&rc[v->id]);
    for (int j = 0; v->producer && depth < 5 && j < v->producer->n_in; j++)
        if (v->producer->in[j] && !v->producer->in[j]->is_const)
            rc_free(rc, v->producer->in[j], depth + 1);
}

/* Whether the backward gives v's data (t) again, bit for bit, from what the pass keeps (a SiLU's
 * Sigmoid from x, a hard-swish's Clip(x + 3, 0, 6) and its mask from x): then its shape alone is kept. */
static int grad_recomputed(grad_batch *gb, const qr_value *v, const qr_tensor *t)
{
    if (!v->producer || !qr_vjp_recomputes(v->producer))
        return 0;
    if (qr_vjp_recompute(v, gb->val, gb->rc, 0) != 0) {
        rc_free(gb->rc, v, 0); /* what it recomputed before it could not */
        return 0;
    }
    const qr_tensor *r = &gb->rc[v->id];
    int same = qr_tensor_numel(r) == qr_tensor_numel(t) && !memcmp(r->data, t->data, qr_tensor_nbytes(t));
    rc_free(gb->rc, v, 0);
    gb->recomputed += same ? qr_tensor_numel(t) : 0;
    return same;
}

/* The f32 run's observer: each value's shape, and its data where a backward reads it or the QDQ
 * run replaces it (a quantized value: grad_local frees it there unless a backward reads it). */
static void grad_keep(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    grad_batch *gb = user;
    if (v->id >= gb->q->g->n_values || gb->val[v->id].data || gb->own[v->id])
        return;
    qr_tensor c = *t;
    c.data = NULL;
    gb->own[v->id] = 1;
    const qr_node *mn = gb->masker[v->id];
    if (t->dtype == QR_F32 && !active(gb->q, v->id) && (!gb->need[v->id] || grad_recomputed(gb, v, t))) {
        gb->val[v->id] = c;
        return;
    }
    qr_error e;
    if (t->dtype == QR_F32 && mn && !active(gb->q, v->id)) { /* its one reader's mask: a bit, not 32 */
        const qr_tensor *ins[3] = {t, NULL, NULL};
        for (int j = 1; j < mn->n_in && j < 3; j++)
            ins[j] = mn->in[j] ? &gb->val[mn->in[j]->id] : NULL;
        c.dtype = QR_BOOL;
        if ((c.data = malloc((size_t)(qr_tensor_numel(t) + 7) / 8 + 1))) {
            qr_vjp_mask(mn, ins, c.data);
            gb->val[v->id] = c;
        } else
            gb->own[v->id] = 0;
        return;
    }
    if (qr_tensor_alloc(&c, &e) == QR_OK) {
        memcpy(c.data, t->data, qr_tensor_nbytes(t));
        gb->val[v->id] = c;
    } else
        gb->own[v->id] = 0;
}

/* The QDQ run's observer: at a ranked layer's value, its error from f32 inputs (its weights and its
 * rounding: what quantizing it alone adds there); every quantized value then replaced by its f32
 * value, so that each layer's inputs are f32 (as the local measurement's OWN runs). */
static void grad_local(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    grad_batch *gb = user;
    qr_qctx *q = gb->q;
    if (!original(q, v)) {
        /* a quantized model input's DequantizeLinear: its readers read the input as given */
        for (int i = 0; n && !strcmp(n->op, "DequantizeLinear") && n->in[0] && i < q->g->n_inputs; i++) {
            int id = q->g->inputs[i]->id;
            if (q->qval[id] == n->in[0]->id && gb->in[i].dtype == QR_F32 && t->dtype == QR_F32 &&
                qr_tensor_numel(&gb->in[i]) == qr_tensor_numel(t))
                memcpy(t->data, gb->in[i].data, qr_tensor_nbytes(t));
        }
        return;
    }
    const qr_tensor *a = &gb->val[v->id];
    if (!a->data || a->dtype != QR_F32 || t->dtype != QR_F32 || qr_tensor_numel(a) != qr_tensor_numel(t))
        return;
    int64_t cnt = qr_tensor_numel(t);
    const float *x = a->data;
    float *y = t->data;
    if (!active(q, v->id))
        return; /* inside a layer (a Conv's output before its Relu): its weights' error reaches the layer's value */
    int mine = gb->own[v->id] && !gb->need[v->id]; /* replaced below: only its shape is left to the backward */
    if (gb->ridx[v->id] >= 0 && gb->exact[v->id] && !gb->err[v->id]) {
        /* the error where the f32 value was when no backward reads that (its buffer, not a
         * second one beside it: the errors of every ranked layer are a pass's largest part) */
        float *er = mine ? gb->val[v->id].data : malloc(sizeof(float) * (size_t)(cnt + 1));
        if (er) {
            for (int64_t i = 0; i < cnt; i++) {
                float d = y[i] - x[i];
                y[i] = x[i], er[i] = d;
            }
            gb->err[v->id] = er;
            if (mine)
                gb->val[v->id].data = NULL;
            return;
        }
    }
    memcpy(y, x, qr_tensor_nbytes(t));
    if (mine)
        qr_tensor_free(&gb->val[v->id]);
}

/* The QDQ run's qr_exec_opts.supplied: a node past what the segment's errors read does not run. */
static int grad_supplied(void *user, const qr_node *n, qr_tensor *const *out)
{
    (void)out;
    const grad_batch *gb = user;
    return gb->qneed && !gb->qneed[n->id];
}

/* The backward pass's visitor: at a ranked layer's value, each sample's <g, r> squared, over the
 * directions (E_u <J^T u, r>^2 = |J r|^2 for u of independent unit-variance entries). */
static void grad_visit(void *user, int id, const qr_tensor *adj)
{
    grad_batch *gb = user;
    int r = gb->ridx[id];
    const float *er = gb->err[id], *g = adj->data;
    if (r < 0 || !er)
        return;
    int64_t cnt = qr_tensor_numel(adj), ns = adj->ndim > 0 && adj->dims[0] == gb->b ? gb->b : 1, per = cnt / ns;
    for (int64_t s = 0; s < ns; s++) {
        double d = 0, lane[8] = {0}; /* in lanes: vectors */
        int64_t i = s * per, end = (s + 1) * per;
        for (; i + 8 <= end; i += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += (double)g[i + l] * er[i + l];
        for (; i < end; i++)
            d += (double)g[i] * er[i];
        for (int l = 0; l < 8; l++)
            d += lane[l];
        for (int j = 0; j < gb->no; j++)
            if (gb->out < 0 || j == gb->out)
                gb->e2[((size_t)r * (size_t)gb->no + (size_t)j) * (size_t)gb->n + (size_t)(gb->from + s)] +=
                    d * d / gb->dirs;
    }
}

/* What grad's executors keep of the weights now, into q's high-water mark. */
static void grad_packings(qr_qctx *q, const qr_exec *fx, const qr_exec *qx)
{
    qr_exec_stats a = {0}, b = {0};
    if (fx)
        qr_exec_get_stats(fx, &a);
    if (qx)
        qr_exec_get_stats(qx, &b);
    int64_t n = (int64_t)(a.cache_bytes + b.cache_bytes);
    q->grad_packing_bytes = n > q->grad_packing_bytes ? n : q->grad_packing_bytes;
}

/* The bytes a pass holds into the backward passes (the kept values, masks and the layers'
 * errors, a quantized model input's among them, as the backward passes start), into q's
 * high-water mark. */
static void grad_held(qr_qctx *q, const grad_batch *gb, size_t nv)
{
    int64_t n = 0;
    for (size_t v = 0; v < nv; v++) {
        if (gb->own[v] && gb->val[v].data) /* a mask: a bit an element */
            n += gb->val[v].dtype == QR_BOOL ? (qr_tensor_numel(&gb->val[v]) + 7) / 8
                                             : (int64_t)qr_tensor_nbytes(&gb->val[v]);
        if (gb->err[v])
            n += (int64_t)sizeof(float) * qr_tensor_numel(&gb->val[v]);
    }
    q->grad_held_bytes = n > q->grad_held_bytes ? n : q->grad_held_bytes;
}

/* A Rademacher sign from splitmix64 at (seed, i): reproducible from the seed. */
static float grad_sign(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z >> 63 ? 1.0f : -1.0f;
}

/* What grad's backward passes read of the f32 run, by value id (need; readers, zeroed, counts them):
 * the values they read as f32, and masker[v] the one node that reads v as its mask alone (a byte
 * an element, not four); the rest keep only their shape. */
static void grad_reads(const qr_graph *g, unsigned char *need, const qr_node **masker, int *readers)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            if (!n->in[j])
                continue;
            int id = n->in[j]->id;
            need[id] |= (unsigned char)qr_vjp_reads(n, j);
            /* read by one node alone, as its mask (a Conv's output before its Relu; every other
             * backward takes an f32 value or its shape) */
            masker[id] = !readers[id]++ && j == 0 && qr_vjp_masks(n) ? n : NULL;
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] && qr_vjp_reads(n, -1 - k))
                need[n->out[k]->id] = 1, readers[n->out[k]->id]++, masker[n->out[k]->id] = NULL;
    }
    for (int i = 0; i < g->n_outputs; i++) /* the seeds' shapes and the directions: f32 */
        masker[g->outputs[i]->id] = NULL;
}

/* grad_segments: the ranked layers rk[0, nr) in segments, so that a pass holds one segment's
 * errors (and the f32 values its QDQ run replaces), not every layer's: seg[r] in [0, K), contiguous
 * in the graph's node order, each about 1/K of the errors' elements (per_sample where qr_vjp_exact:
 * a layer without an adjoint keeps none). The estimate and the passes split alike from this. */
static void grad_segment(const qr_qctx *q, const double *per_sample, const ranked *rk, int nr,
                         const unsigned char *exact, int K, int *seg)
{
    const qr_graph *g = q->g;
    double total = 0, c = 0;
    for (int r = 0; r < nr; r++) {
        int v = q->slots[rk[r].slot].value;
        total += exact[v] ? per_sample[v] : 0;
    }
    /* by node order (a model input's slot first), without sorting rk: the graph's nodes are few */
    int done = 0;
    for (int at = -1; at < g->n_nodes && done < nr; at++)
        for (int r = 0; r < nr; r++) {
            const qr_value *v = g->values[q->slots[rk[r].slot].value];
            if ((v->producer ? v->producer->id : -1) != at)
                continue;
            double w = exact[v->id] ? per_sample[v->id] : 0;
            int s = K > 1 && total > 0 ? (int)floor((c + w / 2) * K / total) : 0;
            seg[r] = s < K ? s : K - 1;
            c += w, done++;
        }
}

/* Segment s's slots (grad_segment's seg), by slot: 2 for its ranked layers, 1 for the ranked slots
 * just upstream of them (through the f32 values between, as with every ranked layer quantized): its
 * QDQ graph quantizes both, so that its layers' weights and biases (a bias is quantized where its
 * input is) are quantized as in the graph with every ranked layer quantized, and each layer's error
 * is that graph's to the bit; the rest stay f32. rs[slot]: ranked. stamp (by value id, mark unique
 * per call) and stack (n_values) are the walk's. */
static void grad_segment_slots(const qr_qctx *q, const ranked *rk, int nr, const int *seg, int s,
                               const unsigned char *rs, unsigned char *in, int *stamp, int mark,
                               const qr_value **stack)
{
    memset(in, 0, (size_t)q->nslots);
    for (int r = 0; r < nr; r++)
        if (seg[r] == s)
            in[rk[r].slot] = 2;
    for (int r = 0; r < nr; r++) {
        if (seg[r] != s)
            continue;
        int top = 0;
        stack[top++] = q->g->values[q->slots[rk[r].slot].value];
        while (top > 0) {
            const qr_node *nd = stack[--top]->producer;
            for (int i = 0; nd && i < nd->n_in; i++) {
                const qr_value *u = nd->in[i];
                if (!u || u->is_const || stamp[u->id] == mark)
                    continue;
                stamp[u->id] = mark;
                int si = q->slot_of[u->id];
                if (si >= 0 && rs[si])
                    in[si] = in[si] ? in[si] : 1;
                else if (u->producer)
                    stack[top++] = u;
            }
        }
    }
}

/* What a `qrl run` process holds before a model's bytes: its peak RSS on a one-Relu model (4 floats
 * a sample) is 12.8 MB (/usr/bin/time -v, stop 51, the Intel Xeon; the same build): the binary's
 * touched pages, the C library's and the runtime's tables. */
#define GRAD_PEAK_BASE 12.8e6

/* grad_peak_bytes' view of grad_keep in one segment's pass: whether value v's data is there as f32
 * as its readers run in the f32 run (st[v]: 0 not asked, 1 there, 2 not; a model input's view, a
 * value the segment quantizes, one a backward reads that is neither recomputed nor a mask), and
 * whether qr_vjp_recompute finds it from those (grad_found: its producer recomputes, each input
 * there or found in turn, at most 4 producers up). mine: by value id, the segment's. */
static int grad_found(const qr_value *v, const unsigned char *need, const qr_node *const *masker,
                      const unsigned char *mine, unsigned char *st, int depth);
static int grad_there(const qr_value *u, const unsigned char *need, const qr_node *const *masker,
                      const unsigned char *mine, unsigned char *st)
{
    if (!st[u->id]) {
        int f32 = u->t.dtype == QR_F32 || u->t.dtype == QR_UNDEF;
        st[u->id] = 2;
        if (f32 && (u->is_input || mine[u->id] ||
                    (need[u->id] && !grad_found(u, need, masker, mine, st, 0) && !masker[u->id])))
            st[u->id] = 1;
    }
    return st[u->id] == 1;
}

static int grad_found(const qr_value *v, const unsigned char *need, const qr_node *const *masker,
                      const unsigned char *mine, unsigned char *st, int depth)
{
    const qr_node *n = v->producer;
    if (!n || depth > 4 || !qr_vjp_recomputes(n) || n->out[0] != v)
        return 0;
    for (int j = 0; j < n->n_in && j < 3; j++) {
        const qr_value *u = n->in[j];
        if (u && !u->is_const && !grad_there(u, need, masker, mine, st) &&
            !grad_found(u, need, masker, mine, st, depth + 1))
            return 0;
    }
    return 1;
}

/* grad_peak_within: the bytes one of grad_effects' passes holds beside what the quantize holds
 * anyway (*grad), and the f32 run's (*f32: the model's constants, one batch's run as probed
 * (o->run_bytes) and that batch's inputs), from the f32 run's shapes (o->per_sample) before any
 * pass runs. A pass (one sample where the batch is open, else the model's batch) keeps what
 * grad_keep keeps: a value its backward reads as f32 (nothing where qr_vjp_recomputes' producer
 * gives it again, a bit an element where its one reader reads a mask) and every ranked layer's
 * f32 value (the QDQ run replaces it); the QDQ run turns a ranked layer's value into its error
 * where qr_vjp_exact (beside it where the backward reads the value too) and frees the rest
 * (grad_local). In K segments (grad_segment), each segment's pass keeps those of its slots and the
 * slots just upstream (grad_segment_slots) and its layers' errors alone: the most of any segment's.
 * *held: the bytes as the backward passes start (grad.held_bytes' count); *values:
 * the most of those and the f32 run's end; *grad adds a run's arena, scaled to the pass. *f32 is
 * fitted to `qrl run`'s peak (docs/quantizer.md, stop 51). */
static qr_status grad_peak_bytes(qr_qctx *q, const outref *o, const ranked *rk, int nr, int K, double *grad,
                                 double *values, double *held, double *f32)
{
    const qr_graph *g = q->g;
    size_t nv = (size_t)g->n_values + 1, ns = (size_t)q->nslots + 1;
    unsigned char *need = calloc(nv, 1), *exact = calloc(nv, 1), *rs = calloc(ns, 1), *in = calloc(ns, 1);
    unsigned char *mv = calloc(nv, 1), *there = calloc(nv, 1);
    const qr_node **masker = calloc(nv, sizeof *masker);
    const qr_value **stack = calloc(nv, sizeof *stack);
    int *readers = calloc(nv, sizeof *readers), *stamp = calloc(nv, sizeof *stamp), *seg = calloc((size_t)nr + 1, sizeof *seg);
    qr_status st = QR_OK;
    if (!need || !exact || !rs || !in || !masker || !stack || !readers || !stamp || !seg || !mv || !there)
        st = qr_errorf(q->e, "out of memory");
    double pass = qr_graph_fixed_batch(g) > 0 ? (double)o->batch : 1, consts = 0, inputs = 0, most = 0, hb = 0;
    if (st == QR_OK) {
        grad_reads(g, need, masker, readers);
        qr_vjp_exact(g, exact);
        grad_segment(q, o->per_sample, rk, nr, exact, K, seg);
        for (int r = 0; r < nr; r++)
            rs[rk[r].slot] = 1;
    }
    for (int v = 0; st == QR_OK && v < g->n_values; v++) {
        const qr_value *x = g->values[v];
        if (x->is_const)
            consts += (double)qr_tensor_nbytes(&x->t);
        else if (x->is_input)
            inputs += o->per_sample[v] * (double)o->batch * (double)qr_dtype_size(x->t.dtype != QR_UNDEF ? x->t.dtype : QR_F32);
    }
    for (int s = 0; st == QR_OK && s < K; s++) {
        /* segment s's pass: the slots its QDQ graph quantizes (mine: the values active() in
         * grad_effects), its layers' errors (2) */
        grad_segment_slots(q, rk, nr, seg, s, rs, in, stamp, s + 1, stack);
        for (int v = 0; v < g->n_values; v++)
            mv[v] = q->slot_of[v] >= 0 && in[q->slot_of[v]], there[v] = 0;
        double end = 0, back = 0;
        for (int v = 0; v < g->n_values; v++) {
            const qr_value *x = g->values[v];
            if (x->is_const)
                continue;
            int si = q->slot_of[v], mine = si >= 0 && in[si];
            double n = o->per_sample[v] * pass, es = (double)qr_dtype_size(x->t.dtype != QR_UNDEF ? x->t.dtype : QR_F32);
            double err = mine && in[si] == 2 && exact[v] ? n * 4 : 0;
            if (x->is_input) { /* views of the pass's samples; a quantized input's error its own */
                back += err;
                continue;
            }
            if (x->t.dtype != QR_F32 && x->t.dtype != QR_UNDEF) /* kept whole */
                end += n * es, back += n * es;
            else if (mine) /* the f32 value until the QDQ run: then its error, the value too if read */
                end += n * 4, back += err + (need[v] ? n * 4 : 0);
            else if (need[v] && !grad_found(x, need, masker, mv, there, 0)) {
                double b = masker[v] ? ceil(n / 8) : n * 4;
                end += b, back += b;
            }
        }
        hb = back > hb ? back : hb;
        most = end > most ? end : most;
        most = back > most ? back : most;
    }
    /* one batch's run: the outref's probe, else quantize's (choose_batch's activations of a batch) */
    double rb = (double)(o->run_bytes ? o->run_bytes : q->o->run_bytes);
    double run = rb * pass / (double)(o->batch > 0 ? o->batch : 1);
    *held = hb;
    *values = most;
    *grad = most + run;
    /* the f32 run's peak as `qrl run` measures it: the process's own pages (GRAD_PEAK_BASE), the
     * constants twice (the model's and the kernels' packings of them), a batch's run and inputs */
    *f32 = GRAD_PEAK_BASE + 2 * consts + rb + inputs;
    free(need), free(exact), free(rs), free(in), free(masker), free(stack), free(readers), free(stamp), free(seg);
    free(mv), free(there);
    return st;
}

/* rank = grad: each ranked layer's first-order effect on the outputs, |J_i r_i|^2, from backward
 * passes through the f32 model on the effect samples (quantizer/vjp.h), with no run per layer.
 * Per batch: one f32 run keeping every value; one QDQ run with every ranked layer quantized, each
 * node fed f32 inputs, giving each layer's own error r_i (its weights and its rounding, as
 * quantizing it alone makes it); then grad_directions random sign vectors u at the outputs (per
 * output with outputs = worst, so that each output's energy is its own), each one backward pass
 * giving every layer's g_i = J_i^T u at once, and E_u <g_i, r_i>^2 = |J_i r_i|^2 (Hutchinson's
 * estimator, per sample). The effect is the outputs' SQNR that energy gives (the worst output's
 * with outputs = worst). A layer whose way to the outputs crosses an op without a backward, the
 * grad_exact layers the estimate puts worst (the recipe's: the search's first decisions), and those
 * it puts under grad_exact_below dB get their exact effect (measure_effects) instead (done[slot] = 1);
 * grad_exact_near's and grad_exact_kept_below's are asked later, by the search (try_near). */
static qr_status grad_effects(qr_qctx *q, const outref *all, const qr_tensor *calib, int64_t count, ranked *rk,
                              int nr, int K, unsigned char *done)
{
    const qr_graph *g = q->g;
    int dirs = setting_count(q, QR_SET_GRAD_DIRECTIONS, 4), nexact = 0, no = g->n_outputs, worst = worst_output(q);
    const qr_setting *gx = qr_recipe_setting(q->r, QR_SET_GRAD_EXACT), *gb_ = qr_recipe_setting(q->r, QR_SET_GRAD_EXACT_BELOW);
    int top = gx && gx->value >= 0 ? (int)gx->value : 0;
    double below = gb_ ? gb_->value : -INFINITY;
    outref o;
    int own = 1;
    qr_status st = effect_outref(&o, q, all, calib, count, &own);
    if (st != QR_OK)
        return st;
    size_t nv = (size_t)g->n_values + 1;
    grad_batch gb = {.q = q, .no = no, .dirs = dirs};
    gb.val = calloc(nv, sizeof *gb.val), gb.own = calloc(nv, 1), gb.err = calloc(nv, sizeof *gb.err);
    int *ridx = malloc(sizeof *ridx * nv), *sub = calloc((size_t)nr + 1, sizeof *sub);
    qr_tensor *adj = calloc(nv, sizeof *adj), *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_tensor *out = calloc((size_t)no + 1, sizeof *out);
    unsigned char *exact = malloc(nv), *was = malloc((size_t)q->nslots + 1), *need = calloc(nv, 1);
    const qr_node **masker = calloc(nv, sizeof *masker);
    int *readers = calloc(nv, sizeof *readers);
    /* the segments (grad_segment): each layer's segment, and segment s's slots (grad_segment_slots) */
    int *seg = calloc((size_t)nr + 1, sizeof *seg), *stamp = calloc(nv, sizeof *stamp);
    unsigned char *rs = calloc((size_t)q->nslots + 1, 1), *insl = calloc((size_t)q->nslots + 1, 1);
    const qr_value **stack = calloc(nv, sizeof *stack);
    gb.n = o.n;
    double *x2 = calloc((size_t)no * (size_t)o.n + 1, sizeof *x2), *xs = calloc((size_t)o.n + 1, sizeof *xs);
    double *es = calloc((size_t)o.n + 1, sizeof *es);
    gb.e2 = calloc((size_t)nr * (size_t)no * (size_t)o.n + 1, sizeof *gb.e2);
    gb.ridx = ridx;
    gb.need = need;
    gb.masker = masker;
    gb.rc = calloc(nv, sizeof *gb.rc);
    gb.exact = exact;
    if (!gb.val || !gb.own || !gb.err || !ridx || !sub || !adj || !in || !out || !exact || !was || !x2 || !xs ||
        !es || !gb.e2 || !need || !masker || !readers || !gb.rc || !seg || !stamp || !rs || !insl || !stack)
        st = qr_errorf(q->e, "out of memory");
    qr_quantized one = {0};
    qr_exec *fx = NULL, *qx = NULL;
    if (st == QR_OK) {
        qr_vjp_exact(g, exact);
        grad_reads(g, need, masker, readers);
        for (int i = 0; i < q->nslots; i++)
            was[i] = (unsigned char)q->slots[i].fallback;
        for (int r = 0; r < nr; r++)
            rs[rk[r].slot] = 1;
        grad_segment(q, o.per_sample, rk, nr, exact, K, seg);
    }
    /* cache_max 1: the kernels keep no packing of the weights past a node (an executor runs once:
     * MobileNetV2's packings are 14 MB an executor, beside the kept values) */
    qr_exec_opts eo = {.threads = q->o->threads > 1 ? q->o->threads : 1, .observer = grad_keep, .observer_user = &gb,
                       .cache_max = 1},
                 eq = eo;
    eq.observer = grad_local;
    eq.supplied = grad_supplied;
    /* One sample per pass where the model's batch is open: what a pass holds (the values the
     * backward reads, each layer's error) is one sample's, not the batch's; the directions are the
     * batch's (each sample's slice of them), so the estimate is the batched one's. */
    int64_t pass = qr_graph_fixed_batch(g) > 0 ? o.batch : 1, held = -1, held_b = 0;
    /* Segment by segment (one where the passes fit: grad_segments): each segment's passes run the
     * f32 model and a QDQ graph of its layers and the slots just upstream, and hold its layers'
     * errors alone; a layer's error and adjoints are the same bits in any segment (its inputs are
     * the f32 run's, its weights and bias quantized alike, the directions the same), each layer's
     * energy summed in the same order: the segments cost K f32 and K QDQ runs a sample. */
    int x2done = 0;
    unsigned char *qneed = NULL;
    const qr_value **qstack = NULL;
    for (int s = 0; st == QR_OK && s < K; s++) {
        int any = 0;
        for (int r = 0; r < nr; r++)
            any |= seg[r] == s;
        if (!any)
            continue;
        grad_segment_slots(q, rk, nr, seg, s, rs, insl, stamp, s + 1, stack);
        for (size_t v = 0; v < nv; v++)
            ridx[v] = -1;
        for (int r = 0; r < nr; r++)
            if (seg[r] == s)
                ridx[q->slots[rk[r].slot].value] = r;
        for (int i = 0; i < q->nslots; i++)
            q->slots[i].fallback = !insl[i];
        qr_graph_free(one.qdq);
        one = (qr_quantized){0};
        if ((st = qr_plan_build_qdq(q, &one)) != QR_OK)
            break;
        /* the QDQ run computes what the segment's layers' values are made from, no more (each node
         * marked as its output is stacked: the stack holds each at most once) */
        free(qneed), free(qstack);
        qneed = calloc((size_t)one.qdq->n_nodes + 1, 1);
        qstack = calloc((size_t)one.qdq->n_nodes + 1, sizeof *qstack);
        if (!qneed || !qstack) {
            st = qr_errorf(q->e, "out of memory");
            break;
        }
        for (int r = 0, top = 0; r < nr; r++) {
            const qr_value *v = one.qdq->values[q->slots[rk[r].slot].value];
            if (seg[r] != s || !v->producer || qneed[v->producer->id])
                continue;
            qneed[v->producer->id] = 1, qstack[top++] = v;
            while (top > 0) {
                const qr_node *nd = qstack[--top]->producer;
                for (int i = 0; i < nd->n_in; i++) {
                    const qr_value *u = nd->in[i];
                    if (u && u->producer && !qneed[u->producer->id])
                        qneed[u->producer->id] = 1, qstack[top++] = u;
                }
            }
        }
        gb.qneed = qneed;
        /* the backward passes go down to the segment's first layer (a model input's: all the way) */
        int stop = g->n_nodes;
        for (int r = 0; r < nr; r++) {
            const qr_node *p = g->values[q->slots[rk[r].slot].value]->producer;
            if (seg[r] == s)
                stop = !p ? 0 : p->id < stop ? p->id : stop;
        }
        for (int64_t at = 0; st == QR_OK && at < o.n; at += pass) {
            int k = (int)(at / o.batch);
            int64_t from = at, b = o.n - from < pass ? o.n - from : pass, row = from - (int64_t)k * o.batch;
            /* the pass's samples come into memory for it alone (validate_from = spread's held-out
             * samples are streamed): the values and the backward read them as views until it ends */
            qr_plan_take_inputs(q, calib, g->n_inputs, from, b, in);
            held = from, held_b = b;
            gb.in = in, gb.b = b, gb.from = from;
            for (int i = 0; i < g->n_inputs; i++)
                gb.val[g->inputs[i]->id] = in[i];
            for (int v = 0; v < g->n_values; v++)
                if (g->values[v]->is_const)
                    gb.val[v] = g->values[v]->t;
            /* each pass's executors: what their kernels keep of the weights (packings: MobileNetV2's
             * 14 MB each) goes before the backward passes, which do not read it */
            if ((st = qr_exec_new(one.qdq, &eq, &qx, q->e)) != QR_OK || (st = qr_exec_new(g, &eo, &fx, q->e)) != QR_OK)
                break;
            qr_exec_share_work(fx, qx); /* they never run at once */
            /* each kind of run counted apart (grad_node_samples: f32, QDQ, backward) */
            int64_t ran = qr_exec_node_samples();
            if ((st = qr_exec_run(fx, in, out, q->e)) != QR_OK)
                break;
            q->grad_node_samples[0] += qr_exec_node_samples() - ran, ran = qr_exec_node_samples();
            /* each run's arena is the next run's (the QDQ run's, the next sample's f32 run's): the
             * runs and the backward passes hold one arena, not two beside the kept values */
            grad_packings(q, fx, qx);
            qr_exec_free(fx); /* its arena the QDQ run's (the spare), its packings not beside the QDQ run's */
            fx = NULL;
            for (int j = 0; j < no; j++) { /* each output's energy, sample by sample (the first segment's runs) */
                const float *a = out[j].dtype == QR_F32 && !x2done ? out[j].data : NULL;
                int64_t cnt = qr_tensor_numel(&out[j]), ns = out[j].ndim > 0 && out[j].dims[0] == b ? b : 1;
                for (int64_t i = 0; a && i < cnt; i++)
                    x2[(size_t)j * (size_t)o.n + (size_t)(from + i / (cnt / ns))] += isfinite(a[i]) ? (double)a[i] * a[i] : 0;
                qr_tensor_free(&out[j]);
            }
            if ((st = qr_exec_run(qx, in, out, q->e)) != QR_OK)
                break;
            q->grad_node_samples[1] += qr_exec_node_samples() - ran, ran = qr_exec_node_samples();
            grad_packings(q, fx, qx);
            q->grad_passes++;
            for (int j = 0; j < no; j++)
                qr_tensor_free(&out[j]);
            /* the backward passes allocate no arena: the executors go, the arena the runs kept for the
             * next plan, and the pages the runs freed with them, before the adjoints beside the errors */
            qr_exec_free(qx), qr_exec_free(fx);
            qx = fx = NULL;
            qr_exec_free_spare();
            qr_plan_give_back_memory();
            for (int i = 0; i < g->n_inputs; i++) { /* a quantized model input: its rounding, which no run observes */
                int id = g->inputs[i]->id, si = q->slot_of[id];
                int64_t m = qr_tensor_numel(&in[i]);
                if (ridx[id] < 0 || !exact[id] || si < 0 || !active(q, id) || in[i].dtype != QR_F32 ||
                    !(gb.err[id] = malloc(sizeof(float) * (size_t)(m + 1))))
                    continue;
                const qr_slot *s = &q->slots[si];
                qr_plan_fake_quant(in[i].data, gb.err[id], m, (float)s->qp.scale, s->qp.zero, s->qt.qmin, s->qt.qmax);
                for (int64_t e = 0; e < m; e++)
                    gb.err[id][e] -= ((const float *)in[i].data)[e];
            }
            grad_held(q, &gb, nv); /* what the backward passes start from: a quantized input's error too */
            ran = qr_exec_node_samples();
            for (int j = worst && no > 1 ? 0 : -1; st == QR_OK && j < (worst && no > 1 ? no : 0); j++)
                for (int d = 0; st == QR_OK && d < dirs; d++) {
                    gb.out = j;
                    for (int jj = 0; st == QR_OK && jj < no; jj++) {
                        const qr_value *ov = g->outputs[jj];
                        if ((j >= 0 && jj != j) || gb.val[ov->id].dtype != QR_F32)
                            continue;
                        qr_tensor *u = &adj[ov->id];
                        *u = gb.val[ov->id];
                        u->data = NULL;
                        if ((st = qr_tensor_alloc(u, q->e)) != QR_OK)
                            break;
                        uint64_t seed = 0x6A09E667F3BCC909ull ^ ((uint64_t)k << 40) ^ ((uint64_t)d << 20) ^ (uint64_t)jj;
                        int64_t m = qr_tensor_numel(u);
                        for (int64_t i = 0; i < m; i++) /* the batch's signs at this pass's rows */
                            ((float *)u->data)[i] = grad_sign(seed, (uint64_t)(row / b * m + i));
                    }
                    if (st == QR_OK)
                        st = qr_vjp_backward_to(g, gb.val, adj, grad_visit, &gb, stop, q->e);
                    for (size_t v = 0; v < nv; v++)
                        qr_tensor_free(&adj[v]);
                }
            q->grad_node_samples[2] += qr_exec_node_samples() - ran;
            for (size_t v = 0; v < nv; v++) {
                if (gb.own[v])
                    qr_tensor_free(&gb.val[v]);
                gb.val[v] = (qr_tensor){0}, gb.own[v] = 0;
                free(gb.err[v]);
                gb.err[v] = NULL;
            }
            qr_plan_drop_inputs(q, calib, held, held_b);
            held = -1;
        }
        x2done = 1;
    }
    if (held >= 0) /* a run or a backward failed inside the pass */
        qr_plan_drop_inputs(q, calib, held, held_b);
    for (int i = 0; was && i < q->nslots; i++)
        q->slots[i].fallback = was[i];
    q->grad_energy = 0; /* the estimates' total, in a fixed order: two runs' estimates compared to the bit */
    for (size_t i = 0; st == QR_OK && i < (size_t)nr * (size_t)no * (size_t)o.n; i++)
        q->grad_energy += gb.e2[i];
    /* each layer's figure as rank = effect's runs judge theirs: the recipe's samples = F over the
     * samples' energies (else pooled), per output (the worst) or over the outputs together, so that
     * estimates and exact effects rank on one scale */
    for (int r = 0; st == QR_OK && r < nr; r++) {
        double low = INFINITY, all = INFINITY;
        for (int j = -1; st == QR_OK && j < no; j++) {
            double sx = 0, se = 0, db;
            for (int64_t i = 0; i < o.n; i++) {
                xs[i] = es[i] = 0;
                for (int jj = j < 0 ? 0 : j; jj < (j < 0 ? no : j + 1); jj++)
                    xs[i] += x2[(size_t)jj * (size_t)o.n + (size_t)i],
                    es[i] += gb.e2[((size_t)r * (size_t)no + (size_t)jj) * (size_t)o.n + (size_t)i];
                sx += xs[i], se += es[i];
            }
            if (se <= 0)
                db = INFINITY;
            else if (q->samples_fn) {
                double (*fn)(qrl_rt *, qrl_array *, qrl_array *) =
                    (double (*)(qrl_rt *, qrl_array *, qrl_array *))q->samples_fn->fn;
                qrl_array a = {xs, o.n}, b = {es, o.n};
                qrl_rt rt;
                qr_rt_init(&rt);
                db = fn(&rt, &a, &b);
                st = qr_rt_status(&rt, q->e);
            } else
                db = 10.0 * log10(sx / se);
            if (j < 0)
                all = db;
            else
                low = fmin(low, db);
        }
        rk[r].effect = worst ? low : all;
        /* no adjoint; or an estimate under grad_exact_below, where a layer's error is large against
         * the output's and the first-order estimate is optimistic (downstream saturation, a gate) */
        if (!exact[q->slots[rk[r].slot].value] || rk[r].effect < below)
            sub[nexact++] = r;
    }
    /* the grad_exact worst estimates are measured too: the search's first steps decide on them */
    for (int t = 0; st == QR_OK && t < top; t++) {
        int best = -1;
        for (int r = 0; r < nr; r++) {
            int taken = 0;
            for (int i = 0; i < nexact && !taken; i++)
                taken = sub[i] == r;
            if (!taken && (best < 0 || by_effect(&rk[r], &rk[best]) < 0))
                best = r;
        }
        if (best < 0)
            break;
        sub[nexact++] = best;
    }
    /* the estimate's executors, QDQ graph and reference outputs go before the exact runs, which
     * build their own (MobileNetV3-small's peak was the exact runs' beside them) */
    qr_exec_free(fx), qr_exec_free(qx);
    fx = qx = NULL;
    qr_graph_free(one.qdq);
    one.qdq = NULL;
    if (own)
        outref_free(&o), own = 0;
    qr_plan_give_back_memory();
    if (st == QR_OK && nexact > 0) {
        ranked *rs = malloc(sizeof *rs * (size_t)nexact);
        if (!rs)
            st = qr_errorf(q->e, "out of memory");
        for (int i = 0; rs && i < nexact; i++)
            rs[i] = rk[sub[i]];
        if (st == QR_OK && (st = measure_effects(q, all, calib, count, rs, nexact)) == QR_OK)
            for (int i = 0; i < nexact; i++)
                rk[sub[i]].effect = rs[i].effect, done[rk[sub[i]].slot] = 1;
        free(rs);
    }
    qr_exec_free(fx), qr_exec_free(qx);
    qr_graph_free(one.qdq);
    for (size_t v = 0; gb.val && gb.own && v < nv; v++)
        if (gb.own[v])
            qr_tensor_free(&gb.val[v]);
    for (size_t v = 0; gb.err && v < nv; v++)
        free(gb.err[v]);
    free(gb.val), free(gb.own), free(gb.err), free(ridx), free(sub), free(adj), free(in), free(out), free(exact);
    free(need), free(masker), free(readers), free(gb.rc), free(seg), free(stamp), free(rs), free(insl), free(stack);
    free(qneed), free(qstack);
    free(was), free(x2), free(xs), free(es), free(gb.e2);
    if (own)
        outref_free(&o);
    return st;
}

/* ------------------------------------------------------------ rank = gain */

/* The nearest quantized values upstream of value v (v itself when from_self and it is one), through
 * the f32 values between: their slots appended to list (n of them so far, room for nslots). stamp
 * (by value id) marks what this walk has seen as mark. */
static int upstream_slots(const qr_qctx *q, const qr_value *v, int from_self, int *stamp, int mark,
                          const qr_value **stack, int *list, int n)
{
    int top = 0;
    if (from_self && active(q, v->id)) {
        list[n++] = q->slot_of[v->id];
        return n;
    }
    stack[top++] = v;
    stamp[v->id] = mark;
    while (top > 0) {
        const qr_node *nd = stack[--top]->producer;
        for (int i = 0; nd && i < nd->n_in; i++) {
            const qr_value *u = nd->in[i];
            if (!u || stamp[u->id] == mark)
                continue;
            stamp[u->id] = mark;
            if (active(q, u->id))
                list[n++] = q->slot_of[u->id];
            else if (u->producer)
                stack[top++] = u;
        }
    }
    return n;
}

/* A graph input slot's own rounding and energy over samples [0, n) of calib (it has no producer:
 * no run observes it). */
static void input_rounding(const qr_qctx *q, const qr_slot *s, const qr_tensor *calib, int64_t n, double *r2,
                           double *x2)
{
    *r2 = *x2 = 0;
    for (int i = 0; i < q->g->n_inputs; i++) {
        const qr_tensor *t = &calib[i];
        if (q->g->inputs[i]->id != s->value || t->dtype != QR_F32 || t->ndim < 1 || t->dims[0] <= 0)
            continue;
        int64_t per = qr_tensor_numel(t) / t->dims[0], m = (n < t->dims[0] ? n : t->dims[0]) * per;
        quantized_error(s, t->data, t->data, m, x2, r2);
    }
}

/* rank = gain: each ranked layer's effect on the outputs from the three runs of measure_gain_runs,
 * with no run per layer. A first-order noise model: quantization noise is additive and independent,
 * and each node carries the error of its inputs to its output with a gain (the noise-propagation
 * model of Lin, Talathi and Annapureddy, "Fixed point quantization of deep convolutional networks",
 * ICML 2016, and of Zhou et al., "Adaptive quantization for deep neural network", AAAI 2018, with the
 * gains measured rather than assumed). At each quantized value j, its nearest quantized upstream
 * values p (through f32 nodes), R its own rounding |x - fq(x)|^2 on f32 x:
 *
 *   own         O_j = R_j + W_j                           (f32 inputs: W_j, its weights' error)
 *   fresh       L_j = O_j + h_j * sum_p R_p               (inputs rounded from f32: h_j, the gain of
 *                                                          fresh, independent rounding noise)
 *   cumulative  E_j = L_j + g_j * sum_p (E_p - R_p)       (everything quantized: g_j, the gain of
 *                                                          the error that came from upstream)
 *
 * Two gains, because the two differ: a node that subtracts two nearly equal channels cancels the
 * error they share but not their independent rounding. Where the upstream error is too small to
 * tell (the first layers), g_j = h_j. An output is the same with O = 0 (its error measured where the
 * model computes it), or, quantized itself, gains 1. Then, per output o and backwards in graph order,
 * F_p = sum over the readers k of p of g_k F_k and H_p = sum h_k F_k (F of an output: 1 for itself),
 * and layer i's noise reaches output o as W_i F_io + R_i H_io; the effect is the outputs' SQNR that
 * gives (the worst output's with outputs = worst). */
static qr_status gain_effects(qr_qctx *q, const qr_tensor *calib, int64_t n, const double *out, ranked *rk, int nr)
{
    const qr_graph *g = q->g;
    int ns = q->nslots, no = g->n_outputs, nv = g->n_values;
    const double *out_x2 = out, *out_l2 = out + no, *out_e2 = out + 2 * no;
    /* preds[off[j] .. off[j + 1]): slot j's (j < ns) or output j - ns's nearest quantized values */
    int *off = calloc((size_t)(ns + no) + 2, sizeof *off), *preds = NULL, *stamp = calloc((size_t)nv + 1, sizeof *stamp);
    int *pos = calloc((size_t)g->n_nodes + 1, sizeof *pos), *order = calloc((size_t)ns + 1, sizeof *order);
    const qr_value **stack = calloc((size_t)nv + 1, sizeof *stack);
    double *hg = calloc(2 * ((size_t)(ns + no) + 1), sizeof *hg), *W = calloc((size_t)ns + 1, sizeof *W);
    double *R = calloc((size_t)ns + 1, sizeof *R), *S = calloc((size_t)ns + 1, sizeof *S);
    double *FH = calloc(2 * (size_t)ns * (size_t)no + 1, sizeof *FH); /* [slot][F, H][output] */
    size_t cap = 0;
    int ok = off && stamp && pos && order && stack && hg && W && R && S && FH;
    for (int j = 0; ok && j < ns + no; j++) { /* the edges, each target's list room for nslots */
        if (cap < (size_t)off[j] + (size_t)ns + 1) {
            cap = 2 * cap + (size_t)ns + 1;
            int *np = realloc(preds, cap * sizeof *preds);
            if (!np) {
                ok = 0;
                break;
            }
            preds = np;
        }
        const qr_value *v = j < ns ? g->values[q->slots[j].value] : g->outputs[j - ns];
        off[j + 1] = j < ns && (!active(q, v->id) || !v->producer) ? off[j]
                     : upstream_slots(q, v, j >= ns, stamp, j + 1, stack, preds, off[j]);
    }
    if (!ok) {
        free(off), free(preds), free(stamp), free(pos), free(order), free(stack);
        free(hg), free(W), free(R), free(S), free(FH);
        return qr_errorf(q->e, "out of memory");
    }
    double *h = hg, *gn = hg + ns + no;
    for (int i = 0; i < g->n_nodes; i++)
        pos[g->nodes[i]->id] = i;
    int na = 0;
    for (int j = 0; j < ns; j++) {
        const qr_slot *s = &q->slots[j];
        if (!active(q, s->value))
            continue;
        order[na++] = j;
        if (g->values[s->value]->producer)
            R[j] = s->lr2, S[j] = s->sx2, W[j] = fmax(0, s->oe2 - s->lr2);
        else
            input_rounding(q, s, calib, n, &R[j], &S[j]);
    }
    /* graph order: by the producing node's place (inputs first) */
    for (int a = 1; a < na; a++)
        for (int b = a; b > 0; b--) {
            const qr_value *x = g->values[q->slots[order[b - 1]].value], *y = g->values[q->slots[order[b]].value];
            int px = x->producer ? pos[x->producer->id] : -1, py = y->producer ? pos[y->producer->id] : -1;
            if (px <= py)
                break;
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int j = 0; j < ns + no; j++) { /* the gains */
        double sr = 0, se = 0;
        for (int k = off[j]; k < off[j + 1]; k++)
            sr += R[preds[k]], se += q->g->values[q->slots[preds[k]].value]->producer ? q->slots[preds[k]].se2 : R[preds[k]];
        double own, fresh, cum;
        if (j >= ns) {
            if (off[j + 1] - off[j] == 1 && q->slots[preds[off[j]]].value == g->outputs[j - ns]->id) {
                h[j] = gn[j] = 1; /* quantized itself */
                continue;
            }
            own = 0, fresh = out_l2[j - ns], cum = out_e2[j - ns];
        } else {
            const qr_slot *s = &q->slots[j];
            own = s->oe2, fresh = s->le2, cum = s->se2;
        }
        h[j] = sr > 0 ? fmax(0, fresh - own) / sr : 0;
        gn[j] = se - sr > 1e-3 * se ? fmax(0, cum - fresh) / (se - sr) : h[j];
    }
    for (int j = ns; j < ns + no; j++)
        for (int k = off[j]; k < off[j + 1]; k++) {
            FH[(size_t)preds[k] * 2 * (size_t)no + (size_t)(j - ns)] += gn[j];
            FH[((size_t)preds[k] * 2 + 1) * (size_t)no + (size_t)(j - ns)] += h[j];
        }
    for (int a = na - 1; a >= 0; a--) {
        int j = order[a];
        for (int k = off[j]; k < off[j + 1]; k++)
            for (int o = 0; o < no; o++) {
                double Fj = FH[(size_t)j * 2 * (size_t)no + (size_t)o];
                FH[(size_t)preds[k] * 2 * (size_t)no + (size_t)o] += gn[j] * Fj;
                FH[((size_t)preds[k] * 2 + 1) * (size_t)no + (size_t)o] += h[j] * Fj;
            }
    }
    int worst = worst_output(q);
    for (int r = 0; r < nr; r++) {
        int j = rk[r].slot;
        double sx = 0, se = 0, low = INFINITY;
        for (int o = 0; o < no; o++) {
            const qr_value *v = g->outputs[o];
            double x2 = active(q, v->id) ? q->slots[q->slot_of[v->id]].sx2 : out_x2[o];
            double e2 = W[j] * FH[(size_t)j * 2 * (size_t)no + (size_t)o] + R[j] * FH[((size_t)j * 2 + 1) * (size_t)no + (size_t)o];
            sx += x2, se += e2;
            if (e2 > 0)
                low = fmin(low, 10.0 * log10(x2 / e2));
        }
        rk[r].effect = worst ? low : se > 0 ? 10.0 * log10(sx / se) : INFINITY;
    }
    free(off), free(preds), free(stamp), free(pos), free(order), free(stack);
    free(hg), free(W), free(R), free(S), free(FH);
    return QR_OK;
}

/* Whether match r runs on the integers only while slot is quantized: its output's or one of its
 * non-constant values' slot. */
static int match_needs(const qr_qctx *q, const struct mrec *r, int slot)
{
    if (r->out >= 0 && q->slot_of[r->out] == slot)
        return 1;
    for (int j = 0; j < r->p->nvalues && j < QR_MATCH_MAX_VALUES; j++) {
        int v = r->values[j];
        if (v < 0 || q->slot_of[v] != slot)
            continue;
        int is_const = 0;
        for (int c = 0; c < r->nconsts; c++)
            is_const |= r->consts[c] == v;
        if (!is_const)
            return 1;
    }
    return 0;
}

/* order = per_mac: the ranked layers reordered so that each next one gives back the most output
 * error per integer MAC it costs: a greedy knapsack over additive noise. A layer's noise is its
 * effect as power (10^(-effect/10) of the outputs' energy); its cost the MACs of the matches still
 * on the integers that need its slot quantized (the match's output or an input), so that once a
 * layer's Conv has gone to f32, its input's other slots cost nothing more for it. Layers that cost
 * nothing go first (the most noise first), layers with no measured noise last. */
static qr_status order_per_mac(qr_qctx *q, const outref *o, ranked *rk, int nr)
{
    int nm = q->nmatches;
    double *macs = calloc((size_t)nm + 1, sizeof *macs), *noise = calloc((size_t)nr + 1, sizeof *noise);
    char *alive = calloc((size_t)nm + 1, 1);
    int *first = calloc((size_t)nr + 2, sizeof *first), *need = NULL; /* layer i needs need[first[i]..first[i+1]) */
    ranked *out = malloc(((size_t)nr + 1) * sizeof *out);
    int nneed = 0;
    for (int pass = 0; pass < 2 && macs && noise && alive && first && out; pass++) {
        for (int i = 0; i < nr; i++) {
            if (pass)
                first[i] = nneed;
            for (int k = 0; k < nm; k++)
                if (match_needs(q, &q->matches[k], rk[i].slot)) {
                    if (pass)
                        need[nneed] = k;
                    nneed++;
                }
        }
        if (pass)
            first[nr] = nneed;
        else if (!(need = malloc(((size_t)nneed + 1) * sizeof *need)))
            break;
        else
            nneed = 0;
    }
    if (!macs || !noise || !alive || !first || !need || !out) {
        free(macs), free(noise), free(alive), free(first), free(need), free(out);
        return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < nr; i++)
        noise[i] = isnan(rk[i].effect) ? 0 : pow(10, -rk[i].effect / 10);
    for (int k = 0; k < nm; k++) {
        const struct mrec *r = &q->matches[k];
        for (int j = 0; j < r->nnodes; j++)
            macs[k] += node_macs(q->g->nodes[r->nodes[j]], o->per_sample, o->last);
        alive[k] = macs[k] > 0;
    }
    for (int n = 0; n < nr; n++) {
        int best = -1;
        double best_score = -2;
        for (int i = 0; i < nr; i++) {
            if (rk[i].slot < 0)
                continue;
            double cost = 0;
            for (int j = first[i]; j < first[i + 1]; j++)
                cost += alive[need[j]] ? macs[need[j]] : 0;
            double score = noise[i] <= 0 ? -1 : cost <= 0 ? INFINITY : noise[i] / cost;
            /* ties (the free ones): the most noise first, then the ranking's order */
            if (score > best_score || (score == best_score && cost <= 0 && noise[i] > noise[best]))
                best = i, best_score = score;
        }
        out[n] = rk[best];
        for (int j = first[best]; j < first[best + 1]; j++)
            alive[need[j]] = 0;
        rk[best].slot = -1;
    }
    memcpy(rk, out, sizeof *rk * (size_t)nr);
    free(macs), free(noise), free(alive), free(first), free(need), free(out);
    return QR_OK;
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

/* The outputs' metrics mt, as res reports them. */
static void res_metrics(const qr_qctx *q, qr_quantized *res, const out_metrics *mt)
{
    res->output_sqnr = mt->sqnr;
    res->output_nonfinite = mt->nonfinite;
    res->output_cosine = mt->cosine;
    res->output_agreement = mt->agreement;
    res->output_sqnr_pooled = mt->pooled_sqnr;
    res->output_sqnr_worst = mt->worst_sqnr;
    res->output_worst = mt->worst >= 0 ? q->g->outputs[mt->worst]->name : NULL;
    res->n_outputs = q->g->n_outputs;
    res->output_samples = q->samples_fn ? q->samples_fn->name : NULL;
    res->output_sqnr_energy = mt->energy_sqnr;
}

/* The graphs rebuilt for the slots not fallen back, and their outputs measured into res and mt. */
static qr_status rebuild_measured(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib,
                                  out_metrics *mt)
{
    qr_status st = rebuild(q, res);
    if (st == QR_OK)
        st = measure_outputs(q, o, res->ig->g, res->ig, calib, 1, mt);
    if (st == QR_OK)
        res_metrics(q, res, mt);
    return st;
}

/* holds: with rk's steps taken as they are, the outputs (metrics mt) are finite and the recipe's
 * condition holds for no slot still quantized (read with its local SQNR at the width it has: at 16
 * bits where measured, else at 8, which it passed). */
static qr_status judge(qr_qctx *q, const wide *wd, const ranked *rk, int nr, const out_metrics *mt, int *holds)
{
    qrl_rt rt;
    qr_rt_init(&rt);
    int bad = mt->nonfinite > 0;
    for (int i = 0; !bad && q->r->fallback && i < nr; i++) {
        int s = rk[i].slot;
        double sq = wd && wd[s].on && !isnan(wd[s].sqnr16) ? wd[s].sqnr16 : rk[i].sqnr;
        if (!q->slots[s].fallback)
            bad = q->r->fallback(&rt, sq, mt->sqnr, mt->cosine, mt->agreement) != 0;
    }
    *holds = !bad;
    return qr_rt_status(&rt, q->e);
}

/* calibrate_samples = F: a try that holds on the judge samples (*holds) is measured on the first
 * calibration samples too (q->cal_ref, their f32 outputs kept through the fallback), F reducing their
 * sums, and holds only if the recipe's condition holds with that figure as well (*db; NaN where not
 * measured). Only the tries that hold run on them: a binary search's failing half costs nothing
 * more. What ships' narrow accumulators count is left as it was (this run is not what ships). */
static qr_status judge_calibrate(qr_qctx *q, qr_quantized *res, const wide *wd, const ranked *rk, int nr,
                                 int *holds, double *db)
{
    *db = NAN;
    if (!*holds || !q->cal_ref)
        return QR_OK;
    int na = res->ig->naccs;
    int64_t *counts = calloc(2 * (size_t)na + 1, sizeof *counts);
    if (!counts)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < na; i++)
        counts[2 * i] = res->ig->accs[i].sums, counts[2 * i + 1] = res->ig->accs[i].overflows;
    /* the calibration samples' sums reduced by F: every measurement reads q->samples_fn */
    const qr_fn_desc *was = q->samples_fn;
    q->samples_fn = q->calib_samples_fn;
    out_metrics mt = {0};
    int acct = qr_exec_account(QR_RUNS_CALIBRATE); /* these runs are over calibration samples */
    qr_status st = measure_outputs(q, q->cal_ref, res->ig->g, res->ig, q->cal_in, 1, &mt);
    qr_exec_account(acct);
    q->samples_fn = was;
    for (int i = 0; i < na; i++)
        res->ig->accs[i].sums = counts[2 * i], res->ig->accs[i].overflows = counts[2 * i + 1];
    free(counts);
    if (st == QR_OK)
        st = judge(q, wd, rk, nr, &mt, holds);
    *db = mt.sqnr;
    return st;
}

/* The first try's outputs (mt) meet the recipe's condition on the outputs, read with every layer's
 * own SQNR as if it met it (infinite): then the try holds unless a layer fails on its own. */
static int outputs_hold(const qr_qctx *q, const out_metrics *mt)
{
    if (mt->nonfinite > 0)
        return 0;
    if (!q->r->fallback)
        return 1;
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_error e;
    int fails = q->r->fallback(&rt, INFINITY, mt->sqnr, mt->cosine, mt->agreement) != 0;
    return qr_rt_status(&rt, &e) == QR_OK && !fails; /* an error: not expected to hold (the try decides) */
}

int qr_measure_outputs_meet(const qr_qctx *q, const qr_quantized *res)
{
    out_metrics mt = {.sqnr = res->output_sqnr, .cosine = res->output_cosine, .agreement = res->output_agreement,
                      .nonfinite = res->output_nonfinite};
    return outputs_hold(q, &mt);
}

/* Whether what ships is measured beside the local measurement before the first try is judged (the
 * f32 pass being that measurement's f32 run): when the first try's outputs on the first
 * effect_samples (whole batches where the model fixes its batch) meet the recipe's condition read
 * with their output SQNR raised by the recipe's speculate (dB, default 3) and every layer's as met.
 * Else the speculative runs would be paid for nothing where the try fails. The f32 run of those
 * samples keeps its executor (*px, on the threads side_by_side's f32 runs will take when the
 * batches are dealt one group per thread): its packing of the weights is theirs (outref.pack). */
static qr_status speculate(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count, int *spec,
                           qr_exec **px, int *px_threads)
{
    int64_t ne = effect_samples(q), fixed = qr_graph_fixed_batch(q->g), batch = qr_plan_batch(q);
    if (fixed > 0)
        ne = (ne + fixed - 1) / fixed * fixed;
    ne = ne < count ? ne : count;
    int64_t n = count < measure_samples(q) ? count : measure_samples(q), nb = (n + batch - 1) / batch;
    int threads = q->o->threads > 1 ? q->o->threads : 1;
    *px_threads = threads / (int)(threads < nb ? threads : nb > 0 ? nb : 1);
    *spec = 0, *px = NULL;
    outref po;
    qr_status st = outref_run(&po, q, calib, ne, 0, *px_threads, q->ref ? NULL : px);
    if (st != QR_OK)
        return st;
    if (*px) /* only its packing and workspace are kept: its arena is the next plan's */
        qr_exec_drop_plan(*px);
    /* the narrow accumulators count what ships' run only */
    int na = res->ig->naccs;
    int64_t *counts = calloc(2 * (size_t)na + 1, sizeof *counts);
    if (!counts)
        st = qr_errorf(q->e, "out of memory");
    for (int i = 0; st == QR_OK && i < na; i++)
        counts[2 * i] = res->ig->accs[i].sums, counts[2 * i + 1] = res->ig->accs[i].overflows;
    out_metrics mt = {0};
    if (st == QR_OK)
        st = measure_outputs(q, &po, res->ig->g, res->ig, calib, 0, &mt);
    for (int i = 0; st == QR_OK && i < na; i++)
        res->ig->accs[i].sums = counts[2 * i], res->ig->accs[i].overflows = counts[2 * i + 1];
    free(counts);
    outref_free(&po);
    qr_plan_give_back_memory(); /* what the integer graph's run freed, before the measurement's */
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_SPECULATE);
    mt.sqnr += s ? s->value : 3.0;
    *spec = st == QR_OK && outputs_hold(q, &mt);
    return st;
}

/* Some ranked slot's own SQNR meets the recipe's condition whatever the outputs measure (read with
 * them at +inf and at -inf dB): a try with it quantized cannot hold (judge), so every tensor
 * quantized is not tried when the local measurement has already said so; the try with those in f32
 * comes next (one validation pass less: the melspectrogram's 9 of 12 fail alone). */
static int fails_alone(qr_qctx *q, const ranked *rk, int nr, qr_status *st)
{
    qrl_rt rt;
    qr_rt_init(&rt);
    int any = 0;
    for (int i = 0; q->r->fallback && i < nr && !any; i++)
        any = q->r->fallback(&rt, rk[i].sqnr, INFINITY, 1.0, 1.0) != 0 &&
              q->r->fallback(&rt, rk[i].sqnr, -INFINITY, -1.0, 0.0) != 0;
    *st = qr_rt_status(&rt, q->e);
    return *st == QR_OK && any;
}

/* A try of the search judged on n samples of o, ran of them run for it (the others' sums kept from
 * an earlier try of the same k), for the profile (qr_quantized.tries). */
static qr_status note_try(qr_qctx *q, qr_quantized *res, const wide *wd, const ranked *rk, int k, int64_t n,
                          int64_t ran, int holds, double sqnr, double cal_sqnr)
{
    int f32 = 0, w16 = 0; /* its steps to f32, and the slots they leave at 16 bits */
    for (int i = 0; i < k; i++)
        f32 += !rk[i].wide;
    for (int i = 0; wd && i < q->nslots; i++)
        w16 += wd[i].on && !q->slots[i].fallback;
    if (res->ntries % 16 == 0) {
        qr_search_try *t = realloc(res->tries, sizeof *t * (size_t)(res->ntries + 16));
        if (!t)
            return qr_errorf(q->e, "out of memory");
        res->tries = t;
    }
    res->tries[res->ntries++] =
        (qr_search_try){.fallen_back = f32, .widened = w16, .samples = n, .ran = ran, .holds = holds, .output_sqnr = sqnr,
                                         .calibrate_sqnr = cal_sqnr};
    return QR_OK;
}

/* The samples in o's first nb batches. */
static int64_t batch_samples(const outref *o, int nb)
{
    int64_t n = (int64_t)nb * o->batch;
    return n < o->n ? n : o->n;
}

/* With the first k ranked slots fallen back (plus none else), the integer graph's outputs on every
 * batch, and whether they hold (judge). */
static qr_status try_k(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                       const ranked *rk, int nr, int k, int *holds)
{
    take_steps(q, wd, rk, nr, k);
    out_metrics mt = {0};
    qr_status st = rebuild_measured(q, res, o, calib, &mt);
    double cal = NAN;
    if (st == QR_OK)
        st = judge(q, wd, rk, nr, &mt, holds);
    if (st == QR_OK)
        st = judge_calibrate(q, res, wd, rk, nr, holds, &cal);
    return st == QR_OK ? note_try(q, res, wd, rk, k, o->n, o->n, *holds, mt.sqnr, cal) : st;
}

/* The binary search's tries, by k (0..nr): each one's rows of output sums (measure_rows) for its
 * first nb[k] batches. A try on the recipe's search_samples runs the first batches; confirming it
 * on every batch runs only the others: the rows add up to what one run on every batch gives. */
typedef struct attempts {
    double **rows;
    int *nb;
    int n;
    /* calibrate_samples = F: by k, whether the try held on the calibration samples (-1: not judged
     * there yet) and their figure: the answer's graphs rebuilt at the end are not judged again */
    int *cal_holds;
    double *cal;
    /* grad_exact_at = fitted: by k, the outputs' figure (dB) the last try of k measured on the
     * search's samples (NAN: none), kept where the ranking moved under it since (a layer or two
     * across the cut: still the figure near it, which the model needs more than exactness) */
    double *db;
} attempts;

static void attempts_free(attempts *a)
{
    for (int k = 0; a->rows && k < a->n; k++)
        free(a->rows[k]);
    free(a->rows), free(a->nb), free(a->cal_holds), free(a->cal), free(a->db);
}

/* try_k of k judged on the first nb batches of o, running only those its earlier tries did not. */
static qr_status try_upto(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, attempts *a, int k, int nb, int *holds)
{
    take_steps(q, wd, rk, nr, k);
    qr_status st = rebuild(q, res);
    if (st == QR_OK && !a->rows[k] &&
        !(a->rows[k] = calloc((size_t)row_width(q) * (size_t)o->nbatches + 1, sizeof *a->rows[k])))
        st = qr_errorf(q->e, "out of memory");
    int64_t ran = 0;
    if (st == QR_OK && a->nb[k] < nb) {
        st = measure_rows(q, o, res->ig->g, res->ig, calib, 1, a->nb[k], nb, a->rows[k], &ran);
        a->nb[k] = nb;
    }
    out_metrics mt = {0};
    if (st == QR_OK)
        st = rows_metrics(q, a->rows[k], nb, &mt);
    if (st != QR_OK)
        return st;
    res_metrics(q, res, &mt);
    double cal = NAN;
    if ((st = judge(q, wd, rk, nr, &mt, holds)) == QR_OK && *holds && a->cal_holds[k] >= 0)
        *holds = a->cal_holds[k], cal = a->cal[k];
    else if (st == QR_OK && (st = judge_calibrate(q, res, wd, rk, nr, holds, &cal)) == QR_OK && !isnan(cal))
        a->cal_holds[k] = *holds, a->cal[k] = cal;
    if (st == QR_OK)
        st = note_try(q, res, wd, rk, k, batch_samples(o, nb), ran, *holds, mt.sqnr, cal);
    return st;
}

/* The recipe's search_floor (dB; none: never): the search gives up before the effects, every tensor
 * still quantized going to f32 (*up), when the last of the first tries (every tensor quantized, then
 * those failing alone in f32, rk[0..k)) measured the outputs under it and so does a check try: the
 * binary search's first step (half of the others in f32) taken in the order of the tensors' own
 * SQNR, worst first, as the effects are not measured yet. The first tries alone do not tell: PP-OCR
 * det's measure 0.7 dB and it keeps half its MACs, a few layers of great effect making all of its
 * error. The check try is noted as a try; where it does not give up, the steps are put back as the
 * first tries left them. The figures are the judge's (samples = F, outputs = worst). */
static qr_status gives_up(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, int k, int *up)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_SEARCH_FLOOR);
    *up = 0;
    if (!s || res->ntries < 1 || !q->r->fallback || nr - k < 2)
        return QR_OK;
    double last = res->tries[res->ntries - 1].output_sqnr;
    if (isnan(last) || last >= s->value)
        return QR_OK;
    int holds = 0;
    qr_status st = try_k(q, res, o, calib, wd, rk, nr, k + (nr - k) / 2, &holds);
    if (st == QR_OK)
        *up = !holds && res->tries[res->ntries - 1].output_sqnr < s->value;
    if (!*up)
        take_steps(q, wd, rk, nr, k);
    return st;
}

/* The recipe's search_samples (default: every measured one) as batches of o: the binary search's
 * tries run on them, and its answer is then confirmed on every batch. */
static int search_batches(const qr_qctx *q, const outref *o)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_SEARCH_SAMPLES);
    int64_t n = s && s->value > 0 ? (int64_t)s->value : o->n;
    int64_t nb = (n + o->batch - 1) / o->batch;
    return nb < o->nbatches ? (int)nb : o->nbatches;
}

/* The fewest of rk[lo + 1 .. top] (by effect, worst first) whose fallback meets the recipe (it fails
 * at lo; holds at top, or is assumed to at nr, everything in f32): a binary search on the search_samples' batches
 * and, when those are fewer than every measured batch, its answer c confirmed on all of them: c
 * tried on all (its rows completed), then from c the boundary found again on all (galloping
 * towards it, 1, 2, 4 ... layers away, then halving; where c holds and c - 1 fails, c - 1's rows
 * are completed and that is all). Where a try's outcome on every sample only grows with k (more
 * layers in f32 never fail what fewer passed), that finds what the binary search on every sample
 * finds. The answer's graphs are left in res with its metrics. */
/* rank = grad's exact effects where the search decides (the recipe's grad_exact_near = W): before
 * each of the binary search's tries, the ranked layers within W places of its cut (either side)
 * whose effect is still the estimate are measured exactly (measure_effects, as rank = effect), and
 * the ranking is sorted again, until the cut's neighbours are all exact. Only the cuts the search
 * asks for are refined: a logarithmic number of windows, not every layer. */
typedef struct near_exact {
    const outref *all;
    const qr_tensor *calib;
    int64_t count;
    ranked *rk;          /* the search's ranking (search_k's rk: the same array) */
    int k, w, per_mac;   /* ranked from k (the first tries' k before); W; order = per_mac */
    double below;        /* grad_exact_kept_below: a try that holds measures its kept layers under it */
    unsigned char *done; /* by slot: its effect is exact */
    int measured;        /* how many this refined */
    /* grad_exact_at = predicted: nothing is measured (armed 0) until the layers near the cut
     * predict_cut gives and those it keeps under grad_exact_kept_below are, in one call; the
     * search starts from there */
    int predicted, armed;
    int fitted;          /* grad_exact_at = fitted: predict_fit's model, and the search led by it */
    double s0;           /* the outputs' figure (dB) the first tries measured at k: predict_cut's scale */
    double ms, cpu_ms;   /* their wall and CPU time, and their node-runs x samples: the effects phase's */
    int64_t runs, vruns; /* vruns: of them, on the judge samples (QR_RUNS_VALIDATE: all of them, in the fallback) */
} near_exact;

static qr_status order_per_mac(qr_qctx *q, const outref *o, ranked *rk, int nr);

/* The exact effects at a try of cut c: its neighbours (kept = 0), or the layers it keeps quantized
 * whose estimate is under grad_exact_kept_below (kept = 1: the estimate is optimistic where a
 * layer's error is large, and a layer kept on an optimistic estimate is what the answer pays for);
 * the ranking sorted again. A try of the attempts a whose layers in f32 changed with the ranking is
 * forgotten (measured again when asked); *moved: try c's did. */
static qr_status near_measure(qr_qctx *q, near_exact *ne, attempts *a, int nr, int c, int kept, int *moved)
{
    *moved = 0;
    int bound = ne && ne->below > -INFINITY;
    if (!ne || (ne->predicted && !ne->armed) || (kept == 1 ? !bound : kept == 0 ? ne->w <= 0 : !bound && ne->w <= 0))
        return QR_OK;
    ranked *rk = ne->rk, *sub = malloc(sizeof *sub * ((size_t)nr + 1));
    int *old = malloc(sizeof *old * ((size_t)nr + 1)), *pos = malloc(sizeof *pos * ((size_t)q->nslots + 1));
    if (!sub || !old || !pos) {
        free(sub), free(old), free(pos);
        return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < nr; i++)
        old[i] = rk[i].slot;
    qr_status st = QR_OK;
    int changed = 0;
    for (;;) {
        int n = 0, from = c - ne->w > ne->k ? c - ne->w : ne->k, to = c + ne->w < nr ? c + ne->w : nr;
        if (kept == 1) /* the layers this try keeps quantized whose estimate is under the bound */
            from = c, to = nr;
        for (int i = from; i < to; i++)
            if (!ne->done[rk[i].slot] && (kept != 1 || rk[i].effect < ne->below))
                sub[n++] = rk[i];
        /* kept = 2 (grad_exact_at = predicted's one call): the window and the kept layers under
         * the bound together, once */
        for (int i = to; kept == 2 && i < nr; i++)
            if (!ne->done[rk[i].slot] && rk[i].effect < ne->below)
                sub[n++] = rk[i];
        if (n == 0)
            break;
        /* the slots as the effects measured them: the first tries' k in f32, the ranked quantized */
        take_steps(q, NULL, rk, nr, ne->k);
        double t0, c0, t1, c1;
        int64_t r0 = qr_exec_node_samples(), v0 = qr_exec_node_samples_in(QR_RUNS_VALIDATE);
        qr_plan_clock(&t0, &c0);
        st = measure_effects(q, ne->all, ne->calib, ne->count, sub, n);
        qr_plan_clock(&t1, &c1);
        ne->ms += t1 - t0, ne->cpu_ms += c1 - c0, ne->runs += qr_exec_node_samples() - r0;
        ne->vruns += qr_exec_node_samples_in(QR_RUNS_VALIDATE) - v0;
        if (st != QR_OK)
            break;
        for (int j = 0; j < n; j++) {
            ne->done[sub[j].slot] = 1;
            q->slots[sub[j].slot].effect = sub[j].effect;
            for (int i = ne->k; i < nr; i++)
                if (rk[i].slot == sub[j].slot)
                    rk[i].effect = sub[j].effect;
        }
        ne->measured += n;
        changed = 1;
        qsort(rk + ne->k, (size_t)(nr - ne->k), sizeof *rk, by_effect);
        if (ne->per_mac && (st = order_per_mac(q, ne->all, rk + ne->k, nr - ne->k)) != QR_OK)
            break;
        if (kept == 2)
            break;
    }
    for (int i = 0; st == QR_OK && changed && i < q->nslots; i++)
        pos[i] = -1;
    for (int i = 0; st == QR_OK && changed && i < nr; i++)
        pos[rk[i].slot] = i;
    for (int t = 0; st == QR_OK && changed && t <= nr; t++) { /* try t: rk[0..t) in f32 */
        int same = 1;
        for (int i = 0; i < t && same; i++)
            same = pos[old[i]] < t;
        if (t == c)
            *moved = !same;
        if (same)
            continue;
        free(a->rows[t]);
        a->rows[t] = NULL, a->nb[t] = 0, a->cal_holds[t] = -1, a->cal[t] = 0;
    }
    free(sub), free(old), free(pos);
    return st;
}

/* try_upto of cut c with rank = grad's lazy exact effects (ne; NULL: none): the cut's neighbours
 * measured first; where the try holds, the layers it keeps under grad_exact_kept_below too, and
 * where that moves a layer across the cut, the try again with the layers now in f32. */
static qr_status try_near(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, attempts *a, int c, int nb, int *holds, near_exact *ne)
{
    qr_status st = QR_OK;
    for (int moved = 1; st == QR_OK && moved;) {
        int m = 0;
        if ((st = near_measure(q, ne, a, nr, c, 0, &m)) == QR_OK)
            st = try_upto(q, res, o, calib, wd, rk, nr, a, c, nb, holds);
        if (st == QR_OK && *holds)
            st = near_measure(q, ne, a, nr, c, 1, &moved);
        else
            moved = 0;
    }
    return st;
}

/* The boundary found from cut c on the first nb batches: c tried, then galloping towards the
 * boundary (1, 2, 4 ... layers away), then halving, within (lo, top) (top holds or is assumed to);
 * *answer the fewest found to hold. */
static qr_status gallop_k(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, attempts *a, int c, int nb, int lo, int top, fb_progress *pg,
                          near_exact *ne, int *answer)
{
    int up = 0, gallop = 1, step = 1, hi = top, holds = 0;
    qr_status st = QR_OK;
    if (c < top) { /* top is not tried: it holds, or everything in f32 is assumed to, on every sample */
        if ((st = try_near(q, res, o, calib, wd, rk, nr, a, c, nb, &holds, ne)) == QR_OK && holds)
            hi = c;
        else
            lo = c, up = 1;
        fb_step(pg);
    }
    while (st == QR_OK && hi - lo > 1) {
        int mid = !gallop ? lo + (hi - lo) / 2
                  : up    ? (lo + step < hi ? lo + step : hi - 1)
                          : (hi - step > lo ? hi - step : lo + 1);
        if ((st = try_near(q, res, o, calib, wd, rk, nr, a, mid, nb, &holds, ne)) == QR_OK && holds)
            hi = mid;
        else
            lo = mid;
        if (up ? holds : !holds) /* crossed the boundary: it is between lo and hi */
            gallop = 0;
        step *= 2;
        fb_step(pg);
    }
    *answer = hi;
    return st;
}

/* The output SQNR (dB) from which the recipe's fallback condition holds for a layer whose own SQNR
 * does not decide (found by halving between -100 and 300 dB, the condition called as judge calls
 * it); NAN when it holds at -100 or fails at 300: no such bound. */
static double holding_sqnr(qr_qctx *q)
{
    qrl_rt rt;
    qr_rt_init(&rt);
    double lo = -100, hi = 300;
    if (!q->r->fallback || q->r->fallback(&rt, 1e9, lo, 1, 1) == 0 || q->r->fallback(&rt, 1e9, hi, 1, 1) != 0)
        return NAN;
    for (int i = 0; i < 40; i++) {
        double mid = (lo + hi) / 2;
        if (q->r->fallback(&rt, 1e9, mid, 1, 1) == 0)
            hi = mid;
        else
            lo = mid;
    }
    qr_error e;
    return qr_rt_status(&rt, &e) == QR_OK ? hi : NAN;
}

/* grad_exact_at = predicted: where the search should start, from the effects as they stand (the
 * estimates, exact where measured): each layer quantized alone leaves the outputs an error share
 * 10^(-effect/10); with rk[0..c) in f32 the shares of the others are added up (errors of different
 * layers taken as independent), scaled so that at lo they give what the first tries measured there
 * (ne->s0), and the first c whose figure reaches the recipe's bound (holding_sqnr) is the start;
 * -1 when there is none of those. Only where the search starts: the tries decide. */
static int predict_cut(qr_qctx *q, const near_exact *ne, const ranked *rk, int nr, int lo, int top)
{
    double target = holding_sqnr(q), *tail = malloc(sizeof *tail * ((size_t)nr + 2));
    if (!tail || isnan(target) || !isfinite(ne->s0)) {
        free(tail);
        return -1;
    }
    tail[nr] = 0;
    for (int i = nr - 1; i >= 0; i--)
        tail[i] = tail[i + 1] + (rk[i].effect == INFINITY ? 0 : pow(10.0, -fmax(rk[i].effect, -100.0) / 10.0));
    double scale = tail[lo] > 0 ? pow(10.0, -ne->s0 / 10.0) / tail[lo] : 1, bound = pow(10.0, -target / 10.0);
    int c = -1;
    for (int k = lo + 1; k < top && c < 0; k++)
        if (scale * tail[k] <= bound)
            c = k;
    free(tail);
    return c;
}

/* The outputs' error share with rk[0..c) in f32 as the model of exponent p has it: the layers' own
 * shares w = 10^(-effect/10) added as (sum w^p)^(1/p); p = 1 adds them as independent errors, p =
 * 1/2 as amplitudes (coherent errors), p > 1 lets the largest decide. tail[c] for every c. */
static void model_tail(const ranked *rk, int nr, double p, double *tail)
{
    double s = 0;
    tail[nr] = 0;
    for (int i = nr - 1; i >= 0; i--) {
        s += rk[i].effect == INFINITY ? 0 : pow(10.0, -fmax(rk[i].effect, -100.0) * p / 10.0);
        tail[i] = s > 0 ? pow(s, 1 / p) : 0;
    }
}

/* grad_exact_at = fitted: where the search's answer falls, from a model fitted to what the tries
 * measured. The model: a * (sum over the layers a cut keeps quantized of w^p)^(1/p) (model_tail).
 * With the first tries' figure at lo alone (ne->s0), a = 1 and p between 1/2 and 1 such that the
 * model gives that figure (where independent errors add up to less than was measured, the errors
 * add more coherently); past those bounds p is the bound's and a scales. With tries of the search
 * measured too (db by cut), p and a are fitted to two figures: the last cut under the bound and the
 * first over it (or, with none over it yet, the last under it and lo's): least squares on their
 * logarithms, p from 1/4 to 4, which for two figures is the model through both where one is. The
 * first c after lo whose figure reaches the recipe's bound (holding_sqnr); top when none before it;
 * -1 when nothing predicts. Only where the search tries: the tries decide. */
static int predict_fit(qr_qctx *q, const near_exact *ne, const ranked *rk, int nr, int lo, int top, const double *db)
{
    double target = holding_sqnr(q), *tail = malloc(sizeof *tail * ((size_t)nr + 2)), pm[2];
    int pc[2], np = 0;
    if (!tail || isnan(target) || !isfinite(ne->s0)) {
        free(tail);
        return -1;
    }
    /* the figures nearest the bound on either side: the last cut under it (lo's figure, or a try's)
     * and the first at or over it; without one over it, the last under it and lo's (extrapolated
     * over the widest span: near cuts' figures differ by their noise as much as by the layers
     * between them, PP-OCRv4 rec 24.3 dB at 172, 20.8 at 173) */
    int f1 = lo, h1 = -1;
    for (int c = lo + 1; db && c <= top && c <= nr; c++)
        if (isfinite(db[c]) && db[c] < target)
            f1 = c;
        else if (isfinite(db[c]) && h1 < 0)
            h1 = c;
    int use[2] = {f1, h1 >= 0 ? h1 : f1 > lo ? lo : -1};
    for (int j = 0; j < 2; j++)
        if (use[j] >= 0)
            pc[np] = use[j], pm[np++] = (use[j] == lo ? -ne->s0 : -db[use[j]]) / 10; /* log10 of the share */
    double p = 1, la = 0; /* the exponent, log10 a */
    if (np == 1) {
        double x0 = 0.5, x1 = 1;
        model_tail(rk, nr, x1, tail);
        double l1 = tail[lo] > 0 ? log10(tail[lo]) : -INFINITY;
        model_tail(rk, nr, x0, tail);
        double l0 = tail[lo] > 0 ? log10(tail[lo]) : -INFINITY;
        if (!isfinite(l1) || !isfinite(l0))
            la = 0;
        else if (l1 >= pm[0]) /* independent errors already give as much: scaled down */
            la = pm[0] - l1;
        else if (l0 <= pm[0]) /* more than amplitudes add up to: scaled up */
            p = x0, la = pm[0] - l0;
        else {
            for (int it = 0; it < 40; it++) { /* the model's figure at lo falls as p grows */
                p = (x0 + x1) / 2;
                model_tail(rk, nr, p, tail);
                if (log10(tail[lo]) > pm[0])
                    x0 = p;
                else
                    x1 = p;
            }
            p = (x0 + x1) / 2;
        }
    } else {
        double best = INFINITY;
        for (int g = -32; g <= 32; g++) { /* p = 2^(g/16), 1/4 to 4 */
            double pg = pow(2.0, g / 16.0), sum = 0, err = 0;
            int n = 0;
            model_tail(rk, nr, pg, tail);
            for (int j = 0; j < np; j++)
                if (tail[pc[j]] > 0)
                    sum += pm[j] - log10(tail[pc[j]]), n++;
            if (n == 0)
                continue;
            for (int j = 0; j < np; j++)
                if (tail[pc[j]] > 0) {
                    double r = pm[j] - log10(tail[pc[j]]) - sum / n;
                    err += r * r;
                }
            if (err < best - 1e-12)
                best = err, p = pg, la = sum / n;
        }
    }
    model_tail(rk, nr, p, tail);
    double bound = -target / 10;
    int c = top;
    for (int k = lo + 1; k < top && c == top; k++)
        if (tail[k] <= 0 || la + log10(tail[k]) <= bound)
            c = k;
    free(tail);
    return c;
}

/* grad_exact_at = fitted's search of rk[lo + 1 .. top] on the first nb batches: each try at the cut
 * predict_fit gives from the figures measured so far (within the bracket (lo, hi); a cut that held
 * and the model says holds again is not tried twice: the one below it is), halving instead where
 * three of the model's tries in a row did not halve the bracket (a model that misleads costs a
 * bounded multiple of the binary search's tries). *answer: the fewest found to hold. */
static qr_status fitted_k(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, attempts *a, int nb, int lo, int top, fb_progress *pg,
                          near_exact *ne, int *answer)
{
    int hi = top, holds = 0, slow = 0, lo0 = lo; /* lo0: where the first tries measured ne->s0 */
    qr_status st = QR_OK;
    while (st == QR_OK && hi - lo > 1) {
        int w = hi - lo, c = slow >= 3 ? -1 : predict_fit(q, ne, rk, nr, lo0, top, a->db);
        if (c < 0)
            c = lo + w / 2, slow = 0;
        c = c <= lo ? lo + 1 : c >= hi ? hi - 1 : c;
        if ((st = try_near(q, res, o, calib, wd, rk, nr, a, c, nb, &holds, ne)) != QR_OK)
            break;
        a->db[c] = res->tries[res->ntries - 1].output_sqnr;
        if (holds)
            hi = c;
        else
            lo = c;
        slow = 2 * (hi - lo) > w ? slow + 1 : 0;
        fb_step(pg);
    }
    *answer = hi;
    return st;
}

static qr_status search_k(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                          const ranked *rk, int nr, int lo, int top, fb_progress *pg, int *answer,
                          near_exact *ne)
{
    attempts a = {.n = nr + 1};
    a.rows = calloc((size_t)nr + 1, sizeof *a.rows);
    a.nb = calloc((size_t)nr + 1, sizeof *a.nb);
    a.cal_holds = malloc(((size_t)nr + 1) * sizeof *a.cal_holds);
    a.cal = calloc((size_t)nr + 1, sizeof *a.cal);
    a.db = malloc(((size_t)nr + 1) * sizeof *a.db);
    qr_status st = a.rows && a.nb && a.cal_holds && a.cal && a.db ? QR_OK : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k <= nr; k++)
        a.cal_holds[k] = -1, a.db[k] = NAN;
    int nb = o->nbatches, ns = search_batches(q, o), hi = top, holds = 0, lo0 = lo;
    int fitted = ne && ne->fitted;
    int start = !ne || !ne->predicted ? -1
                : fitted          ? predict_fit(q, ne, rk, nr, lo, top, NULL)
                                  : predict_cut(q, ne, rk, nr, lo, top);
    if (ne)
        ne->armed = 1;
    if (fitted && start > lo && start <= top) {
        /* the layers near the predicted cut and those it keeps under the bound measured in one
         * call, then the search led by the model fitted to the tries */
        int m = 0;
        if (start < top)
            st = near_measure(q, ne, &a, nr, start, 2, &m);
        if (st == QR_OK)
            st = fitted_k(q, res, o, calib, wd, rk, nr, &a, ns, lo, top, pg, ne, &hi);
    } else if (start > lo && start < top) {
        /* grad_exact_at = predicted: the layers near the predicted cut and those it keeps under
         * the bound measured in one call, the prediction made again on the order that gives, and
         * the answer found from there */
        int m = 0;
        if ((st = near_measure(q, ne, &a, nr, start, 2, &m)) == QR_OK) {
            int again = predict_cut(q, ne, rk, nr, lo, top);
            start = again > lo && again < top ? again : start;
            st = gallop_k(q, res, o, calib, wd, rk, nr, &a, start, ns, lo, top, pg, ne, &hi);
        }
    } else
        while (st == QR_OK && hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((st = try_near(q, res, o, calib, wd, rk, nr, &a, mid, ns, &holds, ne)) == QR_OK && holds)
                hi = mid;
            else
                lo = mid;
            fb_step(pg);
        }
    if (st == QR_OK && ns < nb)
        st = gallop_k(q, res, o, calib, wd, rk, nr, &a, hi, nb, lo0, top, pg, ne, &hi);
    if (st == QR_OK) /* only rebuilt when measured on every batch (hi = top never is: then measured) */
        st = try_near(q, res, o, calib, wd, rk, nr, &a, hi, nb, &holds, ne);
    /* with lazy exact effects, the order the search's earlier tries judged may have moved under
     * its answer: where the answer fails now, the search goes on above it, on every batch */
    while (st == QR_OK && ne && !holds && hi < top) {
        lo = hi, hi = top;
        while (st == QR_OK && hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((st = try_near(q, res, o, calib, wd, rk, nr, &a, mid, nb, &holds, ne)) == QR_OK && holds)
                hi = mid;
            else
                lo = mid;
            fb_step(pg);
        }
        if (st == QR_OK)
            st = try_near(q, res, o, calib, wd, rk, nr, &a, hi, nb, &holds, ne);
        if (hi == top)
            break;
    }
    *answer = hi;
    attempts_free(&a);
    return st;
}

/* ------------------------------------------------------------ mixed precision */

/* The layer that writes slot s: a match whose output s is and which runs an integer product
 * (intgraph.h: a lowering takes the accumulator), *w its constant weight (NULL: a product of two
 * activations); returns the node of the match that multiplies (the one with MACs), or NULL. */
static const qr_node *layer_of(const qr_qctx *q, int s, const outref *o, const qr_value **w)
{
    *w = NULL;
    for (int k = 0; k < q->nmatches; k++) {
        const struct mrec *r = &q->matches[k];
        if (r->out != q->slots[s].value || !qr_intgraph_is_layer(q, r))
            continue;
        for (int i = 0; i < r->p->nvalues && i < QR_MATCH_MAX_VALUES && !*w; i++)
            if (r->p->values[i].role == QR_ROLE_WEIGHT && r->values[i] >= 0 && q->g->values[r->values[i]]->is_const)
                *w = q->g->values[r->values[i]];
        for (int j = 0; j < r->nnodes; j++)
            if (node_macs(q->g->nodes[r->nodes[j]], o->per_sample, o->last) > 0)
                return q->g->nodes[r->nodes[j]];
    }
    return NULL;
}

/* The outputs' error share (of their energy) with the nl layer slots in f32 and every other slot
 * as it is, on the samples measure_effects uses: what no layer's choice changes. */
static qr_status rest_error(qr_qctx *q, const outref *all, const qr_tensor *calib, int64_t count, const int *slot,
                            int nl, double *rest)
{
    outref o;
    int own = 1;
    qr_status st = effect_outref(&o, q, all, calib, count, &own);
    if (st != QR_OK)
        return st;
    for (int l = 0; l < nl; l++)
        q->slots[slot[l]].fallback = 1;
    qr_quantized one = {0};
    out_metrics mt = {0};
    if ((st = qr_plan_build_qdq(q, &one)) == QR_OK)
        st = measure_outputs(q, &o, one.qdq, NULL, calib, 1, &mt);
    *rest = mt.nonfinite ? INFINITY : isfinite(mt.sqnr) ? pow(10, -mt.sqnr / 10) : 0;
    qr_graph_free(one.qdq);
    for (int l = 0; l < nl; l++)
        q->slots[slot[l]].fallback = 0;
    if (own)
        outref_free(&o);
    return st;
}

/* An integer recipe's mixed precision: each layer that multiplies (Conv, Gemm, MatMul: MACs)
 * computes as one of the recipe's choices: the recipe's types (MC_RECIPE), another weight type
 * (candidate = i4 ...: MC_WEIGHT), 16-bit output activations (candidate_activation = u16 ...:
 * MC_ACT16) or f32 (candidate = f32: MC_F32). */
enum { MC_RECIPE, MC_WEIGHT, MC_ACT16, MC_F32 };

typedef struct mchoice {
    int kind;
    const qr_setting *s; /* the setting it comes from */
} mchoice;

/* A layer's states: what apply_choice sets for each choice. */
typedef struct mlayer {
    int slot;           /* the slot of the tensor it writes */
    int wi;             /* its weight's index in q->w, or -1 (none, or another layer reads it too) */
    qr_wquant base;     /* q->w[wi] as the recipe quantized it */
    qr_wquant *alt;     /* by choice: an MC_WEIGHT choice's weight (scale NULL: not open to this layer) */
    qr_dtype dt, dt16;  /* its slot's type as the recipe has it, and the 16-bit choice's */
    qrl_qtype qt, qt16;
    qrl_qparams qp, qp16;
    int has16;          /* the 16-bit choice is open to it */
} mlayer;

/* Layer ml computes as choice c: its slot quantized or not, its weight's integers, its slot's type
 * (and the types of the slots that copy its qparams). */
static void apply_choice(qr_qctx *q, const mchoice *ch, const mlayer *ml, int c)
{
    int k = ch[c].kind;
    qr_slot *s = &q->slots[ml->slot];
    s->fallback = k == MC_F32;
    if (ml->wi >= 0)
        q->w[ml->wi] = k == MC_WEIGHT && ml->alt[c].scale ? ml->alt[c] : ml->base;
    int wide = k == MC_ACT16 && ml->has16;
    s->dtype = wide ? ml->dt16 : ml->dt;
    s->qt = wide ? ml->qt16 : ml->qt;
    s->qp = wide ? ml->qp16 : ml->qp;
    for (int i = 0; i < q->nslots; i++)
        if (q->slots[i].kind == SLOT_SAME && q->slots[i].same == ml->slot)
            q->slots[i].dtype = s->dtype, q->slots[i].qt = s->qt, q->slots[i].qp = s->qp;
}

/* Whether choice c is open to layer ml. */
static int choice_open(const mchoice *ch, const mlayer *ml, int c)
{
    int k = ch[c].kind;
    return k == MC_RECIPE || k == MC_F32 || (k == MC_WEIGHT && ml->wi >= 0 && ml->alt[c].scale) ||
           (k == MC_ACT16 && ml->has16);
}

/* The match that claims node n, or NULL. */
static const struct mrec *match_of(const qr_qctx *q, const qr_node *n)
{
    for (int k = 0; k < q->nmatches; k++)
        for (int j = 0; j < q->matches[k].nnodes; j++)
            if (q->matches[k].nodes[j] == n->id)
                return &q->matches[k];
    return NULL;
}

/* The slot whose qparams value v's copy (itself, or the slot a chain of `same` slots copies). */
static int root_slot(const qr_qctx *q, const qr_value *v)
{
    int s = v ? q->slot_of[v->id] : -1;
    for (int hops = 0; s >= 0 && q->slots[s].kind == SLOT_SAME && hops < 64; hops++)
        s = q->slots[s].same;
    return s;
}

/* Whether slot s is what a layer that may take the 16-bit choice writes: the output of a match that
 * runs an integer product (intgraph.h) by a constant weight (open_16 needs the layer's own). */
static int layer_slot(const qr_qctx *q, int s)
{
    for (int k = 0; s >= 0 && k < q->nmatches; k++) {
        const struct mrec *r = &q->matches[k];
        int weight = 0;
        for (int i = 0; i < r->p->nvalues && i < QR_MATCH_MAX_VALUES; i++)
            weight |= r->p->values[i].role == QR_ROLE_WEIGHT && r->values[i] >= 0 && q->g->values[r->values[i]]->is_const;
        if (r->out == q->slots[s].value && weight && qr_intgraph_is_layer(q, r))
            return 1;
    }
    return 0;
}

/* Whether every reader of value x can take it in 16 bits now that slot root (and the slots that
 * copy it) is in its 16-bit type: a node left in f32 (it reads it dequantized), an affine op whose
 * output copies root's qparams (then that output's readers in turn), or a pattern's match one of
 * whose lowerings takes the types (the kernels say what they take: qlinear_wide a 16-bit input,
 * qadd_mixed a 16-bit and an 8-bit operand). The knapsack chooses each layer alone, so a kernel
 * must take every combination of its operands' choices: only the first of its inputs that a layer
 * writes may have the choice (where two layers' outputs meet, as in a residual Add, the first
 * operand's layer gets it and the other's none), and then the lowering is asked with it 16-bit
 * and the others as the recipe has them. */
static int readers_take_16(qr_qctx *q, const qr_value *x, int root, int depth)
{
    const qr_graph *g = q->g;
    for (int i = 0; depth < 16 && i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        int at = -1;
        for (int j = 0; !n->dead && j < n->n_in && at < 0; j++)
            at = n->in[j] == x ? j : -1;
        if (at < 0 || q->node_kind[n->id] == 0)
            continue;
        if (q->node_kind[n->id] == 2) {
            int so = n->n_out == 1 && n->out[0] ? q->slot_of[n->out[0]->id] : -1;
            if (so >= 0 && q->slots[so].kind == SLOT_SAME && q->slots[so].same == root &&
                readers_take_16(q, n->out[0], root, depth + 1))
                continue;
            return 0;
        }
        const struct mrec *r = match_of(q, n);
        if (!r)
            return 0;
        for (int j = 0; j < at; j++) { /* an input before x that another layer writes: that layer's */
            int s = root_slot(q, n->in[j]);
            if (s >= 0 && s != root && layer_slot(q, s))
                return 0;
        }
        if (!qr_intgraph_lowering_takes(q, r))
            return 0;
    }
    return depth < 16;
}

/* Whether settings a and b name one calibrator with the same arguments. */
static qr_status same_calibrator(qr_qctx *q, const qr_setting *a, const qr_setting *b, int *same)
{
    *same = a->calibrator && b->calibrator && !strcmp(a->calibrator, b->calibrator) && a->nargs == b->nargs;
    for (int i = 0; *same && i < a->nargs; i++)
        *same = a->argnames && b->argnames && !strcmp(a->argnames[i], b->argnames[i]);
    if (!*same || !a->nargs)
        return QR_OK;
    double *va = calloc(QRL_MAX_PARAMS + 1, sizeof *va), *vb = calloc(QRL_MAX_PARAMS + 1, sizeof *vb);
    if (!va || !vb) {
        free(va), free(vb);
        return qr_errorf(q->e, "out of memory");
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    if (a->args)
        a->args(&rt, va);
    if (b->args)
        b->args(&rt, vb);
    qr_status st = qr_rt_status(&rt, q->e);
    for (int i = 0; st == QR_OK && i < a->nargs; i++)
        *same &= va[i] == vb[i];
    free(va), free(vb);
    return st;
}

/* Layer ml's 16-bit choice (setting s): open when its slot is calibrated, its weight its own, and
 * its readers take 16 bits; its qparams the slot's calibrator's solve for s's type (the same
 * observations: s must name that calibrator). */
static qr_status open_16(qr_qctx *q, mlayer *ml, const qr_setting *s)
{
    const qr_slot *sl = &q->slots[ml->slot];
    const qr_value *v = q->g->values[sl->value];
    if (sl->kind != SLOT_CALIBRATED || !sl->cal || !sl->calset || ml->wi < 0 || qr_dtype_bits(sl->dtype) != 8)
        return QR_OK;
    qr_slot keep = *sl; /* the readers are asked with the slot in the 16-bit type */
    qrl_qtype qt = qr_plan_qtype(q, qr_dtype_from_name(s->type), (s->mods & QR_MOD_NARROW) != 0, -1);
    set_slot_type(q, ml->slot, qr_dtype_from_name(s->type), &qt, &keep.qp);
    int takes = readers_take_16(q, v, ml->slot, 0);
    set_slot_type(q, ml->slot, keep.dtype, &keep.qt, &keep.qp);
    if (!takes)
        return QR_OK;
    int same = 0;
    qr_status st = same_calibrator(q, s, sl->calset, &same);
    if (st == QR_OK && !same)
        return qr_errorf(q->e, "recipe '%s': candidate_activation's calibrator %s is not the one that calibrated '%s' "
                               "(%s's %s): its 16-bit choice re-solves that calibrator's observations, so it names "
                               "the same calibrator and arguments", q->r->name, s->calibrator, v->name,
                         sl->calset->key, sl->calset->calibrator);
    ml->dt16 = qr_dtype_from_name(s->type);
    ml->qt16 = qr_plan_qtype(q, ml->dt16, (s->mods & QR_MOD_NARROW) != 0, -1);
    ml->qt16.symmetric = (s->mods & QR_MOD_SYMMETRIC) != 0;
    if (st == QR_OK && (st = qr_calib_solve(sl->cal, &ml->qt16, &ml->qp16, q->e)) != QR_OK)
        qr_error_prefix(q->e, "value '%s' in %s", v->name, s->type);
    ml->qp16.scale = (float)ml->qp16.scale; /* the export stores f32 scales */
    ml->has16 = st == QR_OK && isfinite(ml->qp16.scale) && ml->qp16.scale > 0;
    return st;
}

/* A point's assignment as the integer graph, its outputs measured; the chosen one (run last) stays
 * as res, and q as it. */
typedef struct int_mixed {
    qr_qctx *q;
    qr_quantized *res;
    const outref *o;
    const qr_tensor *calib;
    const mchoice *ch;
    const mlayer *ml;
} int_mixed;

static qr_status int_mixed_run(void *user, qr_mixed_point *p)
{
    int_mixed *im = user;
    qr_qctx *q = im->q;
    for (int l = 0; l < q->res_mixed_layers; l++)
        apply_choice(q, im->ch, &im->ml[l], p->pick[l]);
    out_metrics mt = {0};
    qr_status st = rebuild_measured(q, im->res, im->o, im->calib, &mt);
    p->measured = mt.sqnr;
    return st;
}

/* The layers' effects on the outputs under each choice (the fallback's rank = effect runs: each
 * alone quantized, once per quantized choice), the front of MAC-weighted arithmetic bits against
 * the summed error (10^(-effect / 10) of the outputs' energy a layer and choice), and the
 * assignment within the budget. A layer's bits: its weights' bits times its output's over 8 (W8A8
 * 8, W4A8 4, W8A16 16), 32 in f32. */
static qr_status mixed_choice(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, int64_t count)
{
    const qr_setting *b = qr_recipe_setting(q->r, QR_SET_BUDGET);
    const qr_recipe *r = q->r;
    qr_mixed_info *mi = calloc(1, sizeof *mi);
    size_t ns = (size_t)q->nslots + 1, nsc = (size_t)r->nsettings + 2;
    ranked *rk = calloc(ns, sizeof *rk), *sub = calloc(ns, sizeof *sub);
    int *at = calloc(ns, sizeof *at), nl = 0, nc = 0;
    mchoice *ch = calloc(nsc, sizeof *ch);
    mlayer *ml = calloc(ns, sizeof *ml);
    qr_status st = mi && rk && sub && at && ch && ml ? QR_OK : qr_errorf(q->e, "out of memory");
    if (st == QR_OK && !(mi->choices = calloc(nsc, sizeof *mi->choices)))
        st = qr_errorf(q->e, "out of memory");
    /* the choices: the recipe's types, then the candidates in the recipe's order */
    if (st == QR_OK) {
        ch[nc] = (mchoice){MC_RECIPE, q->wt};
        if (!(mi->choices[nc++] = strdup(qr_dtype_name(q->w_dtype))))
            st = qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; st == QR_OK && i < r->nsettings; i++) {
        const qr_setting *s = &r->settings[i];
        if (s->ntargets || (s->id != QR_SET_CANDIDATE && s->id != QR_SET_CANDIDATE_ACTIVATION))
            continue;
        char name[32];
        int kind = s->id == QR_SET_CANDIDATE_ACTIVATION ? MC_ACT16 : !strcmp(s->type, "f32") ? MC_F32 : MC_WEIGHT;
        snprintf(name, sizeof name, "%s%s", kind == MC_ACT16 ? "a:" : "", s->type);
        ch[nc] = (mchoice){kind, s};
        if (!(mi->choices[nc++] = strdup(name)))
            st = qr_errorf(q->e, "out of memory");
    }
    mi->nchoices = nc;
    if (st == QR_OK)
        mi->layers = calloc(ns, sizeof *mi->layers);
    if (st == QR_OK && !mi->layers)
        st = qr_errorf(q->e, "out of memory");
    for (int i = 0; st == QR_OK && i < q->nslots; i++) { /* the layers: quantized slots a product's match writes */
        const qr_value *v = q->g->values[q->slots[i].value], *w;
        const qr_node *n = layer_of(q, i, o, &w);
        if (q->slots[i].fallback || q->qval[q->slots[i].value] < 0 || !n)
            continue;
        qr_mixed_layer *ly = &mi->layers[nl];
        mlayer *m = &ml[nl];
        ly->macs = node_macs(n, o->per_sample, o->last);
        ly->weights = w ? (double)qr_tensor_numel(&w->t) : 0;
        ly->name = strdup(v->name);
        ly->node = strdup(n->name ? n->name : "");
        ly->bytes = calloc((size_t)nc, sizeof *ly->bytes);
        ly->err2 = calloc((size_t)nc, sizeof *ly->err2);
        ly->bits = calloc((size_t)nc, sizeof *ly->bits);
        m->alt = calloc((size_t)nc, sizeof *m->alt);
        if (!ly->name || !ly->node || !ly->bytes || !ly->err2 || !ly->bits || !m->alt)
            st = qr_errorf(q->e, "out of memory");
        m->slot = i, m->wi = -1;
        m->dt = q->slots[i].dtype, m->qt = q->slots[i].qt, m->qp = q->slots[i].qp;
        int readers = 0; /* a weight two layers read holds one set of integers: no choice of its own */
        for (int k = 0; w && k < q->g->n_nodes; k++)
            for (int j = 0; !q->g->nodes[k]->dead && j < q->g->nodes[k]->n_in; j++)
                readers += q->g->nodes[k]->in[j] == w;
        for (int k = 0; readers == 1 && k < q->nw; k++)
            if (q->w[k].value == w->id)
                m->wi = k, m->base = q->w[k];
        rk[nl] = (ranked){i, qr_plan_local_sqnr(&q->slots[i]), NAN};
        mi->nlayers = ++nl;
    }
    q->res_mixed_layers = nl;
    if (st == QR_OK && !nl)
        st = qr_errorf(q->e, "recipe '%s': mixed precision has no layer to choose for (no quantized Conv, Gemm or "
                             "MatMul)", r->name);
    for (int c = 0; st == QR_OK && c < nc; c++) /* each choice's weights and types, where open */
        for (int l = 0; st == QR_OK && l < nl; l++) {
            if (ch[c].kind == MC_WEIGHT && ml[l].wi >= 0)
                st = qr_plan_quantize_weight(q, ml[l].base.value, ch[c].s, &ml[l].alt[c]);
            else if (ch[c].kind == MC_ACT16)
                st = open_16(q, &ml[l], ch[c].s);
        }
    double *eff = calloc((size_t)nl * (size_t)nc + 1, sizeof *eff); /* dB, by layer and choice */
    if (st == QR_OK && !eff)
        st = qr_errorf(q->e, "out of memory");
    if (st == QR_OK) /* the recipe's types: the fallback's own runs */
        st = measure_effects(q, o, calib, count, rk, nl);
    for (int l = 0; st == QR_OK && l < nl; l++)
        eff[(size_t)l * nc] = rk[l].effect, q->slots[rk[l].slot].effect = rk[l].effect;
    for (int c = 1; st == QR_OK && c < nc; c++) { /* each other quantized choice: its layers alone in it */
        int n = 0;
        for (int l = 0; ch[c].kind != MC_F32 && l < nl; l++)
            if (choice_open(ch, &ml[l], c)) {
                apply_choice(q, ch, &ml[l], c);
                at[n] = l, sub[n++] = rk[l];
            }
        if (n)
            st = measure_effects(q, o, calib, count, sub, n);
        for (int k = 0; k < n; k++) {
            eff[(size_t)at[k] * nc + c] = sub[k].effect;
            apply_choice(q, ch, &ml[at[k]], 0);
        }
    }
    double rest = 0; /* the other quantized tensors' error share: every layer in f32, the rest quantized */
    int *slot = calloc((size_t)nl + 1, sizeof *slot);
    for (int l = 0; slot && l < nl; l++)
        slot[l] = ml[l].slot;
    if (st == QR_OK)
        st = slot ? rest_error(q, o, calib, count, slot, nl, &rest) : qr_errorf(q->e, "out of memory");
    free(slot);
    double *cost = calloc((size_t)nl * (size_t)nc + 1, sizeof *cost), *err = calloc((size_t)nl * (size_t)nc + 1, sizeof *err);
    if (st == QR_OK && (!cost || !err))
        st = qr_errorf(q->e, "out of memory");
    /* bits(N): each layer's bits times its MACs; bytes(N): its weights' bytes (a 16-bit output takes
     * none: the model's size buys it, its time does not show here) */
    int by_bytes = !strcmp(b->type, "bytes");
    double macs = 0, base = 0, low = 0; /* low: every layer its cheapest choice */
    for (int i = 0; i < q->g->n_values; i++) /* the model's constants but the layers' weights, as f32 */
        base += q->g->values[i]->is_const ? (double)qr_tensor_nbytes(&q->g->values[i]->t) : 0;
    for (int l = 0; st == QR_OK && l < nl; l++) {
        qr_mixed_layer *ly = &mi->layers[l];
        const mlayer *m = &ml[l];
        double w = ly->weights > 0 ? ly->weights : 1, lo = INFINITY;
        ly->weights = w;
        int wb = qr_dtype_bits(m->wi >= 0 ? m->base.dtype : q->w_dtype), ab = qr_dtype_bits(m->dt);
        for (int c = 0; c < nc; c++) {
            int k = ch[c].kind, open = choice_open(ch, m, c);
            int cw = k == MC_WEIGHT && open ? qr_dtype_bits(m->alt[c].dtype) : wb;
            double e = eff[(size_t)l * nc + c];
            ly->bits[c] = !open ? NAN : k == MC_F32 ? 32 : k == MC_ACT16 ? wb * qr_dtype_bits(m->dt16) / 8.0 : cw * ab / 8.0;
            ly->bytes[c] = !open ? NAN : k == MC_F32 ? 4 * w : w * cw / 8;
            ly->err2[c] = !open ? NAN : k == MC_F32 ? 0 : isfinite(e) ? pow(10, -e / 10) : e > 0 ? 0 : INFINITY;
            cost[(size_t)l * nc + c] = !open ? INFINITY : by_bytes ? ly->bytes[c] : ly->macs * ly->bits[c];
            err[(size_t)l * nc + c] = open ? ly->err2[c] : INFINITY;
            double lc = by_bytes ? ly->bytes[c] : ly->macs * ly->bits[c];
            if (open && lc < lo)
                lo = lc;
        }
        macs += ly->macs;
        low += lo;
        base -= 4 * w;
    }
    if (st == QR_OK) {
        snprintf(mi->budget_kind, sizeof mi->budget_kind, "%s", b->type);
        mi->budget = b->value;
        mi->signal = 1; /* the errors are shares of the outputs' energy */
        mi->choose_samples = count < effect_count(q, o) ? count : effect_count(q, o);
        mi->measured_samples = mi->heldout_samples = o->n; /* held out unless the caller says (no validate) */
        /* the least the layers can take: bits a MAC, or the model's bytes */
        low = by_bytes ? low + base : macs > 0 ? low / macs : 0;
        if (low > b->value * (1 + 1e-12))
            st = qr_errorf(q->e, "%s: budget = %s(%g) cannot be met: the smallest assignment, every layer %s, "
                                 "takes %g %s", b->calibrator && b->calibrator[0] ? b->calibrator : r->name, b->type,
                           b->value, nc > 2 ? "its narrowest choice" : mi->choices[0], low,
                           by_bytes ? "bytes" : "bits a MAC");
    }
    int_mixed im = {.q = q, .res = res, .o = o, .calib = calib, .ch = ch, .ml = ml};
    if (st == QR_OK)
        st = qr_mixed_choose(mi, cost, err, rest, base, by_bytes ? b->value - base : b->value * macs, int_mixed_run,
                             &im, q->e);
    /* q->w holds each layer's chosen weight: the others go */
    for (int l = 0; ml && l < nl; l++) {
        const qr_wquant *keep = ml[l].wi >= 0 ? &q->w[ml[l].wi] : NULL;
        for (int c = 0; ml[l].alt && c <= nc; c++) {
            qr_wquant *x = c < nc ? &ml[l].alt[c] : &ml[l].base;
            if (x->scale && (!keep || x->scale != keep->scale))
                free(x->scale), free(x->zero);
        }
        free(ml[l].alt);
    }
    free(rk), free(sub), free(at), free(ch), free(ml), free(eff), free(cost), free(err);
    if (st != QR_OK) {
        qr_mixed_info_free(mi);
        return st;
    }
    res->mixed = mi;
    return QR_OK;
}

/* ------------------------------------------------------------ the fallback's 16-bit step */

/* The recipe's `fallback = T then f32 when ...`: T's type (QR_UNDEF: no step before f32). */
static qr_dtype fallback_step(const qr_qctx *q)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_FALLBACK);
    char t[16];
    if (!s || !s->type || !strchr(s->type, ' ') || sscanf(s->type, "%15s", t) != 1)
        return QR_UNDEF;
    return qr_dtype_from_name(t);
}

/* Each slot's 16-bit step (type dt16), where open: a calibrated 8-bit slot that a layer writes
 * (layer_slot: a match running an integer product by a constant weight), whose readers take 16
 * bits as mixed precision's 16-bit choice says (readers_take_16: their patterns' lowerings, an
 * activation's too); its qparams its calibrator's observations solved again for dt16, with the
 * slot's own modifiers. */
static qr_status open_wide(qr_qctx *q, wide *wd, qr_dtype dt16)
{
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *sl = &q->slots[i];
        wide *w = &wd[i];
        w->sqnr16 = NAN;
        const qr_value *v = q->g->values[sl->value];
        if (sl->fallback || sl->kind != SLOT_CALIBRATED || !sl->cal || q->qval[sl->value] < 0 ||
            qr_dtype_bits(sl->dtype) != 8 || !layer_slot(q, i))
            continue;
        w->dt = sl->dtype, w->qt = sl->qt, w->qp = sl->qp, w->dt16 = dt16;
        w->qt16 = qr_qtype_of(dt16, (int)sl->qt.narrow, -1);
        w->qt16.symmetric = sl->qt.symmetric;
        qr_status st = qr_calib_solve(sl->cal, &w->qt16, &w->qp16, q->e);
        if (st != QR_OK) {
            qr_error_prefix(q->e, "value '%s' in %s", v->name, qr_dtype_name(dt16));
            return st;
        }
        w->qp16.scale = (float)w->qp16.scale; /* the export stores f32 scales */
        w->open = isfinite(w->qp16.scale) && w->qp16.scale > 0;
        if (w->open) { /* its readers asked with it at 16 bits: an activation pattern's lowering */
            set_wide(q, wd, i, 1);
            int take = readers_take_16(q, v, i, 0);
            set_wide(q, wd, i, 0);
            w->open = take;
        }
    }
    return QR_OK;
}

/* The open slots' local SQNR at 16 bits (wd[].sqnr16): one local measurement with every open slot
 * widened (each slot's local error is its own layer's, so one run gives them all); the slots' sums
 * at the recipe's types are kept for the report. */
static qr_status measure_local_wide(qr_qctx *q, wide *wd, const qr_tensor *calib, int64_t count)
{
    double *keep = calloc(4 * (size_t)q->nslots + 1, sizeof *keep);
    if (!keep)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++) {
        const qr_slot *sl = &q->slots[i];
        keep[4 * i] = sl->lx2, keep[4 * i + 1] = sl->le2, keep[4 * i + 2] = sl->ln, keep[4 * i + 3] = sl->lr2;
        set_wide(q, wd, i, 1);
    }
    qr_quantized one = {0};
    qr_status st = qr_plan_build_qdq(q, &one);
    if (st == QR_OK)
        st = measure_local(q, one.qdq, calib, count, NULL);
    qr_graph_free(one.qdq);
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *sl = &q->slots[i];
        if (wd[i].open && st == QR_OK)
            wd[i].sqnr16 = qr_plan_local_sqnr(sl);
        set_wide(q, wd, i, 0);
        sl->lx2 = keep[4 * i], sl->le2 = keep[4 * i + 1], sl->ln = keep[4 * i + 2], sl->lr2 = keep[4 * i + 3];
    }
    free(keep);
    return st;
}

/* The f32 steps chosen with every open slot widened (rk: the first k, then the 16-bit steps
 * rk[k..k+n16), then the f32 steps, of which those before answer were taken): the fewest 16-bit
 * steps, worst effect first, that still meet the recipe with those f32 steps taken (the 16-bit path
 * is slower; it holds with all of them). rk is reordered: the first k, the chosen f32 steps, the
 * 16-bit steps of the slots they leave quantized, the other f32 steps. */
static qr_status fewest_wide(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, wide *wd,
                             ranked *rk, int total, int k, int n16, int answer, fb_progress *pg)
{
    int h = answer - (k + n16), m16 = 0, holds = 0;
    ranked *w16 = malloc(((size_t)n16 + 1) * sizeof *w16);
    if (!w16)
        return qr_errorf(q->e, "out of memory");
    take_steps(q, wd, rk, total, answer);
    for (int i = k; i < k + n16; i++)
        if (!q->slots[rk[i].slot].fallback)
            w16[m16++] = rk[i];
    memmove(rk + k, rk + k + n16, sizeof *rk * (size_t)h);
    memcpy(rk + k + h, w16, sizeof *rk * (size_t)m16);
    int n = k + h + m16; /* the 16-bit steps of the slots in f32 go */
    memmove(rk + n, rk + answer, sizeof *rk * (size_t)(total - answer));
    n += total - answer;
    free(w16);
    qr_status st = try_k(q, res, o, calib, wd, rk, n, k + h, &holds);
    fb_step(pg);
    if (st == QR_OK && !holds && m16 > 0) /* it holds with all of them: the answer above */
        st = search_k(q, res, o, calib, wd, rk, n, k + h, k + h + m16, pg, &answer, NULL);
    qr_plan_phase(q, res, "fewest 16-bit steps");
    return st;
}

/* The fallback's search with a 16-bit step (wd), past the first k steps of rk (which fail): rk[k..nr)
 * hold one f32 step per slot still at the recipe's type, worst effect first. The steps become: the
 * 16-bit steps of those open to it (worst effect first: they take no MAC off the integers), then
 * every slot's f32 step, ordered by the recipe's order with the effect each has by then (at 16 bits
 * where widened: measured only when the 16-bit steps alone fail). The binary search runs over the
 * 16-bit steps when all of them meet the recipe, else over the f32 steps. rk has room for 2 nr. */
static qr_status search_wide(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, int64_t count,
                             wide *wd, ranked *rk, int nr, int k, fb_progress *pg)
{
    ranked *f32 = malloc(((size_t)nr + 1) * sizeof *f32), *sub = malloc(((size_t)nr + 1) * sizeof *sub);
    int *at = malloc(((size_t)nr + 1) * sizeof *at), nf = 0, n16 = 0, holds = 0, nsub = 0;
    qr_status st = f32 && sub && at ? QR_OK : qr_errorf(q->e, "out of memory");
    for (int i = 0; st == QR_OK && i < k; i++) /* widened on their own: they may still go to f32 */
        if (rk[i].wide)
            f32[nf] = rk[i], f32[nf++].wide = 0;
    for (int i = k; st == QR_OK && i < nr; i++) {
        f32[nf++] = rk[i];
        if (wd[rk[i].slot].open)
            sub[n16++] = rk[i], sub[n16 - 1].wide = 1;
    }
    if (st == QR_OK) { /* rk: the first k, the 16-bit steps, the f32 steps */
        memcpy(rk + k, sub, sizeof *rk * (size_t)n16);
        memcpy(rk + k + n16, f32, sizeof *rk * (size_t)nf);
    }
    int total = k + n16 + nf;
    if (st == QR_OK && n16 > 0) {
        st = try_k(q, res, o, calib, wd, rk, total, k + n16, &holds);
        fb_step(pg);
    }
    qr_plan_phase(q, res, "16-bit step");
    int answer = 0;
    if (st == QR_OK && holds) {
        st = search_k(q, res, o, calib, wd, rk, total, k, k + n16, pg, &answer, NULL);
    } else if (st == QR_OK) {
        /* the f32 steps' effects at the width they then have: the widened ones measured again */
        take_steps(q, wd, rk, total, k + n16);
        for (int i = k + n16; i < total; i++)
            if (wd[rk[i].slot].on)
                at[nsub] = i, sub[nsub++] = rk[i];
        if (nsub)
            st = measure_effects(q, o, calib, count, sub, nsub);
        for (int j = 0; st == QR_OK && j < nsub; j++)
            rk[at[j]].effect = q->slots[sub[j].slot].effect16 = sub[j].effect;
        if (st == QR_OK)
            qsort(rk + k + n16, (size_t)nf, sizeof *rk, by_effect);
        if (st == QR_OK && choice_is(q, QR_SET_ORDER, "per_mac"))
            st = order_per_mac(q, o, rk + k + n16, nf);
        qr_plan_phase(q, res, "effects at 16 bits");
        if (st == QR_OK)
            st = search_k(q, res, o, calib, wd, rk, total, k + n16, total, pg, &answer, NULL);
        if (st == QR_OK)
            st = fewest_wide(q, res, o, calib, wd, rk, total, k, n16, answer, pg);
    }
    free(f32), free(sub), free(at);
    return st;
}

/* co: the f32 outputs of q->cal_in's first q->cal_n samples, which q->cal_ref then points to: the
 * f32 pass's kept ones (q->calib_out, taken) or run now. */
static qr_status cal_ref_init(outref *co, qr_qctx *q)
{
    qr_status st = q->calib_out ? outref_alloc(co, q, q->cal_n) : outref_init(co, q, q->cal_in, q->cal_n, 1);
    if (st == QR_OK && q->calib_out) {
        assert(co->nbatches == q->calib_out_nb);
        memcpy(co->out, q->calib_out, sizeof *co->out * (size_t)(co->nbatches * q->g->n_outputs));
        co->have_out = 1;
        free(q->calib_out);
        q->calib_out = NULL, q->calib_out_nb = 0;
    }
    if (st == QR_OK)
        q->cal_ref = co;
    return st;
}

/* The fallback done: co's f32 outputs go back to q->calib_out, for the summary's figure on the same
 * samples (qr_measure_output_sqnr: no f32 run of them again). */
static void cal_ref_done(outref *co, qr_qctx *q)
{
    if (!q->cal_ref)
        return;
    q->cal_ref = NULL;
    q->calib_out = co->out, q->calib_out_nb = co->nbatches;
    co->out = NULL;
    outref_free(co);
}

/* ------------------------------------------- values quantized at run time */

/* The fallback's candidates among the values a match quantizes at run time (role dynamic): they
 * have no slot, no calibrated range, so the slots' measurements do not see them. Each is measured
 * on its own (its local SQNR: quantized at run time from its f32 value, as the integer graph's
 * DynamicQuantizeLinear / DynamicQuantizeRows do), then the fewest of them, in the recipe's order,
 * go to f32 until the outputs meet its condition (a binary search on the integer graph's outputs). */
typedef struct dyn_local {
    const qr_qctx *q;
    double *x2, *e2; /* by value id: signal and error energy over the runs */
} dyn_local;

/* x quantized as the integer graph's DynamicQuantizeLinear (DynamicQuantizeRows: each row of row
 * elements) does, its scale and zero point the kernel's (qr_dynquant_params), each value rounded as
 * QuantizeLinear (qr_plan_round): the energy of x and of its rounding error added to *x2, *e2 (the
 * finite values: a NaN or inf has no rounding error to measure). */
static void dyn_rounding(const float *x, int64_t n, int64_t row, double *x2, double *e2)
{
    for (int64_t at = 0; row > 0 && at < n; at += row) {
        int64_t m = n - at < row ? n - at : row, zp;
        float scale;
        qr_dynquant_params(x + at, m, &scale, &zp);
        for (int64_t i = at; i < at + m; i++) {
            if (!isfinite(x[i]))
                continue;
            double d = (double)x[i] - (double)((float)(qr_plan_round(x[i], scale, zp, 0, 255) - zp) * scale);
            *x2 += (double)x[i] * x[i];
            *e2 += d * d;
        }
    }
}

static void dyn_observe_tensor(dyn_local *d, int v, const qr_tensor *t)
{
    if (v < 0 || v >= d->q->g->n_values || !d->q->dyn[v] || t->dtype != QR_F32 || !t->data)
        return;
    int64_t n = qr_tensor_numel(t), row = d->q->dyn[v] == DYN_ROW && t->ndim > 0 ? t->dims[t->ndim - 1] : n;
    dyn_rounding(t->data, n, row, &d->x2[v], &d->e2[v]);
}

static void observe_dyn(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    dyn_observe_tensor(user, v->id, t);
}

/* q->dyn_sqnr of every dynamic value: one f32 run over o's samples. */
static qr_status dyn_local_sqnr(qr_qctx *q, const outref *o, const qr_tensor *calib)
{
    const qr_graph *g = q->g;
    dyn_local d = {.q = q, .x2 = calloc((size_t)g->n_values + 1, sizeof *d.x2),
                   .e2 = calloc((size_t)g->n_values + 1, sizeof *d.e2)};
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    qr_exec_opts eo = {.threads = q->o->threads > 1 ? q->o->threads : 1, .observer = observe_dyn, .observer_user = &d};
    qr_exec *x = NULL;
    qr_status st = d.x2 && d.e2 && in && out ? qr_exec_new(g, &eo, &x, q->e) : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < o->nbatches; k++) {
        int64_t at = k * o->batch, b = o->n - at < o->batch ? o->n - at : o->batch;
        qr_plan_take_inputs(q, calib, g->n_inputs, at, b, in);
        for (int i = 0; i < g->n_inputs; i++) /* no node reports the inputs */
            dyn_observe_tensor(&d, g->inputs[i]->id, &in[i]);
        st = qr_exec_run(x, in, out, q->e);
        qr_plan_drop_inputs(q, calib, at, b);
        for (int j = 0; st == QR_OK && j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    for (int v = 0; st == QR_OK && v < g->n_values; v++)
        q->dyn_sqnr[v] = !q->dyn[v] || d.x2[v] <= 0 ? NAN : d.e2[v] <= 0 ? INFINITY : 10.0 * log10(d.x2[v] / d.e2[v]);
    qr_exec_free(x);
    free(in), free(out), free(d.x2), free(d.e2);
    return st;
}

typedef struct dyn_ranked {
    int value;
    double sqnr;   /* local */
    double effect; /* the outputs' SQNR with it alone quantized at run time (NaN: not measured) */
    int alone;     /* the recipe's condition sends it back on its own (read with outputs that met it) */
    double macs;   /* per sample, of the matches that read it at run time */
    double per_mac; /* order = per_mac: its error power (over every value in f32) per MAC; NaN: unused */
} dyn_ranked;

/* Those the condition sends back on their own first; then, under order = per_mac, the most output
 * error per MAC kept on the integers; then the worst effect on the outputs (where measured), then
 * the worst local SQNR. */
static int by_dyn_effect(const void *a, const void *b)
{
    const dyn_ranked *x = a, *y = b;
    if (x->alone != y->alone)
        return y->alone - x->alone;
    if (!isnan(x->per_mac) && !isnan(y->per_mac) && x->per_mac != y->per_mac)
        return x->per_mac > y->per_mac ? -1 : 1;
    double ex = isnan(x->effect) ? INFINITY : x->effect, ey = isnan(y->effect) ? INFINITY : y->effect;
    if (ex != ey)
        return ex < ey ? -1 : 1;
    double sx = isnan(x->sqnr) ? INFINITY : x->sqnr, sy = isnan(y->sqnr) ? INFINITY : y->sqnr;
    return sx < sy ? -1 : sx > sy ? 1 : x->value - y->value;
}

/* The first k of dr in f32 (the rest quantized at run time), the graphs rebuilt and the outputs
 * measured; *holds: they meet the recipe's condition, and so does every dynamic value left. */
static qr_status dyn_try(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib, const dyn_ranked *dr,
                         int nd, int k, int *holds, out_metrics *mt)
{
    for (int i = 0; i < nd; i++)
        q->dyn_f32[dr[i].value] = i < k;
    *mt = (out_metrics){0};
    qr_status st = rebuild_measured(q, res, o, calib, mt);
    *holds = st == QR_OK && outputs_hold(q, mt);
    for (int i = k; *holds && i < nd; i++)
        *holds = !dr[i].alone;
    if (st == QR_OK && (st = note_try(q, res, NULL, NULL, 0, o->n, o->n, *holds, mt->sqnr, NAN)) == QR_OK)
        res->tries[res->ntries - 1].fallen_back = k, res->tries[res->ntries - 1].dynamic = 1;
    return st;
}

/* After the slots' search: the dynamic values the outputs need in f32. *changed: the graphs were
 * rebuilt (what ships is measured again). */
static qr_status dynamic_fallback(qr_qctx *q, qr_quantized *res, const outref *o, const qr_tensor *calib,
                                  int64_t count, int *changed)
{
    *changed = 0;
    int nd = 0;
    for (int v = 0; v < q->g->n_values; v++)
        nd += q->dyn[v] != DYN_NONE;
    if (!nd || !q->r->fallback || !res->ig || qr_recipe_setting(q->r, QR_SET_BUDGET)) /* a budget decides alone */
        return QR_OK;
    dyn_ranked *dr = calloc((size_t)nd + 1, sizeof *dr);
    out_metrics *tried = calloc((size_t)nd + 1, sizeof *tried);
    qr_status st = dr && tried ? dyn_local_sqnr(q, o, calib) : qr_errorf(q->e, "out of memory");
    qrl_rt rt;
    qr_rt_init(&rt);
    int n = 0, k0 = 0;
    for (int v = 0; st == QR_OK && v < q->g->n_values; v++)
        if (q->dyn[v] != DYN_NONE) {
            double s = q->dyn_sqnr[v];
            int alone = !isnan(s) && q->r->fallback(&rt, s, INFINITY, 1.0, 1.0) != 0;
            dr[n++] = (dyn_ranked){v, s, NAN, alone, 0, NAN};
            k0 += alone;
        }
    if (st == QR_OK)
        st = qr_rt_status(&rt, q->e);
    for (int i = 0; st == QR_OK && i < nd; i++) { /* the MACs each keeps on the integers (the report's too) */
        for (int k = 0; k < q->nmatches; k++) {
            const struct mrec *r = &q->matches[k];
            int reads = 0;
            for (int j = 0; j < r->p->nvalues && j < QR_MATCH_MAX_VALUES; j++)
                reads |= r->values[j] == dr[i].value && r->p->values[j].role == QR_ROLE_DYNAMIC;
            for (int j = 0; reads && j < r->nnodes; j++)
                dr[i].macs += q->g->nodes[r->nodes[j]]->dead ? 0
                                                             : node_macs(q->g->nodes[r->nodes[j]], o->per_sample, o->last);
        }
        q->dyn_macs[dr[i].value] = dr[i].macs;
    }
    if (st == QR_OK)
        qsort(dr, (size_t)nd, sizeof *dr, by_dyn_effect);
    /* k = 0: what the slots' search left, measured again (its last try may not have been it); then
     * the values the condition sends back on their own (k0), then every one (nd), then the fewest
     * between that hold: a binary search, each try on the integer graph's outputs */
    int lo = 0, hi = -1, h = 0, last = -1, up = 0;
    int at[3] = {0, k0, nd};
    const qr_setting *floor_db = qr_recipe_setting(q->r, QR_SET_SEARCH_FLOOR);
    for (int i = 0; st == QR_OK && i < 3 && hi < 0; i++) {
        if (i > 0 && at[i] == at[i - 1])
            continue;
        /* the recipe's search_floor, as the slots' search reads it: the outputs under it with these
         * in f32, and with the worse half of the rest (by their local SQNR) too: every one goes to
         * f32 at once, no effects measured (M-LSD large: 145 CPU s for 53 of its 54 values back) */
        if (i == 2 && floor_db && tried[lo].sqnr < floor_db->value && nd - lo >= 2) {
            int half = lo + (nd - lo) / 2;
            if ((st = dyn_try(q, res, o, calib, dr, nd, half, &h, &tried[half])) != QR_OK)
                break;
            last = half;
            if (!h && tried[half].sqnr < floor_db->value) {
                up = 1; /* the last try, every one in f32, measured: what ships */
                st = dyn_try(q, res, o, calib, dr, nd, nd, &h, &tried[nd]);
                last = nd;
                break;
            }
        }
        if ((st = dyn_try(q, res, o, calib, dr, nd, at[i], &h, &tried[at[i]])) != QR_OK)
            break;
        last = at[i];
        if (h)
            hi = at[i];
        else
            lo = at[i];
    }
    if (st == QR_OK && hi < 0) /* every one in f32 fails too (the slots' search left the outputs so), or the floor */
        hi = nd;
    if (st == QR_OK && hi == nd && lo < nd && !up) { /* nd holds: the fewest past lo that do */
        /* the order past lo: each one's effect, the outputs with it alone quantized at run time
         * (the slots as the search left them), on the first effect_samples judge samples (as the
         * slots' effects); the worst first */
        outref eo;
        int own = 0;
        if (nd - lo > 1)
            st = effect_outref(&eo, q, o, calib, count, &own);
        for (int i = lo; st == QR_OK && i < nd && nd - lo > 1; i++) {
            for (int j = 0; j < nd; j++)
                q->dyn_f32[dr[j].value] = j != i;
            out_metrics me = {0};
            if ((st = rebuild(q, res)) == QR_OK && (st = measure_outputs(q, &eo, res->ig->g, res->ig, calib, 1, &me)) == QR_OK)
                q->dyn_effect[dr[i].value] = dr[i].effect = me.sqnr;
        }
        if (own)
            outref_free(&eo);
        /* order = per_mac (the recipe's, as the slots' search reads it): each one's error power
         * above every value in f32 (tried[nd]), per MAC of the matches that read it at run time,
         * the most first, so that a large product with a moderate effect stays on the integers */
        if (st == QR_OK && choice_is(q, QR_SET_ORDER, "per_mac")) {
            double base = isfinite(tried[nd].sqnr) ? pow(10.0, -tried[nd].sqnr / 10) : 0;
            for (int i = lo; i < nd; i++) {
                double e = isnan(dr[i].effect) ? 0 : pow(10.0, -dr[i].effect / 10) - base;
                e = e > 0 ? e : 0;
                dr[i].per_mac = dr[i].macs > 0 ? e / dr[i].macs : INFINITY;
            }
        }
        if (st == QR_OK)
            qsort(dr + lo, (size_t)(nd - lo), sizeof *dr, by_dyn_effect);
        last = -1;
        while (st == QR_OK && hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((st = dyn_try(q, res, o, calib, dr, nd, mid, &h, &tried[mid])) != QR_OK)
                break;
            last = mid;
            if (h)
                hi = mid;
            else
                lo = mid;
        }
    }
    if (st == QR_OK && last != hi) { /* the answer's graphs again */
        for (int i = 0; i < nd; i++)
            q->dyn_f32[dr[i].value] = i < hi;
        if ((st = rebuild(q, res)) == QR_OK)
            res_metrics(q, res, &tried[hi]);
    }
    *changed = 1;
    free(dr), free(tried);
    return st;
}

qr_status qr_plan_fallback(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count)
{
    outref o;
    /* with a 16-bit step, a slot may take two steps (to 16 bits, then to f32) */
    ranked *rk = calloc(2 * (size_t)q->nslots + 1, sizeof *rk);
    qr_dtype dt16 = q->r->fallback ? fallback_step(q) : QR_UNDEF;
    wide *wd = dt16 != QR_UNDEF ? calloc((size_t)q->nslots + 1, sizeof *wd) : NULL;
    if (!rk || (dt16 != QR_UNDEF && !wd)) {
        free(rk), free(wd);
        return qr_errorf(q->e, "out of memory");
    }
    fb_progress pg = {.o = q->o, .total = 3, .t0 = qr_plan_now_ms()};
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].effect = q->slots[i].effect16 = NAN, q->slots[i].step16 = -1;
    /* calibrate_samples = F: the calibration samples' f32 outputs for the tries judged on them too,
     * the f32 pass's (q->calib_out) or run now (after a bias correction: from q->ref) */
    outref co = {0};
    int acct = qr_exec_account(QR_RUNS_CALIBRATE); /* their f32 run, when not kept */
    qr_status cst = q->cal_in && q->calib_samples_fn && q->r->fallback ? cal_ref_init(&co, q) : QR_OK;
    qr_exec_account(acct);
    if (cst != QR_OK) {
        free(rk), free(wd);
        return cst;
    }
    /* the effects' f32 executors, kept between their calls until the fallback ends (none when
     * there is no memory for the table: each call packs its own) */
    int nkeep = q->o->threads > 1 ? q->o->threads : 1;
    q->effects_keep = calloc((size_t)nkeep, sizeof *q->effects_keep);
    q->neffects_keep = q->effects_keep ? nkeep : 0;
    for (int n = q->nslots; n > 0 && q->r->fallback; n /= 2) /* the search's steps, at most */
        pg.total++;
    /* the local measurement's f32 run keeps the outputs every comparison reads; after a bias
     * correction they come from the model before it (q->ref), in a pass of their own */
    qr_status st = q->ref ? outref_init(&o, q, calib, count, 1) : outref_alloc(&o, q, count);
    /* rank = gain: the runs its estimate reads, beside the local one */
    int gain = choice_is(q, QR_SET_RANK, "gain");
    int probe = choice_is(q, QR_SET_RANK, "probe") || choice_is(q, QR_SET_RANK, "probe_pairs");
    double *outs = calloc(4 * (size_t)q->g->n_outputs + 1, sizeof *outs);
    if (st == QR_OK && !outs)
        st = qr_errorf(q->e, "out of memory");
    /* the f32 pass kept the outputs (qr_measure_kept_batches): the first try's outputs are judged
     * before the local measurement, and when they meet the condition, what ships is measured beside
     * it (the try then holds unless a layer fails on its own): one f32 run less */
    int merged = st == QR_OK && !gain && q->f32_in_measure == o.nbatches;
    int early = merged || (st == QR_OK && q->f32_out && q->f32_out_nb == o.nbatches), ahead = 0, spec = 0;
    out_metrics mt0 = {0};
    if (early) {
        if (!merged) {
            memcpy(o.out, q->f32_out, sizeof *o.out * (size_t)(o.nbatches * q->g->n_outputs));
            free(q->f32_out);
            q->f32_out = NULL, q->f32_out_nb = 0;
            o.have_out = 1;
        }
        /* try_k's of k = 0: no step to take, and the QDQ graph is the one qr_plan_build_qdq has
         * just built for these slots (rebuilding it rounds every weight again): the integer graph */
        if (res->ig)
            st = rebuild(q, res);
        else if ((st = qr_intgraph_build(q, res->qdq, &res->ig, q->e)) != QR_OK)
            qr_error_prefix(q->e, "recipe '%s'", q->r->name);
        qr_exec *px = NULL;
        if (st == QR_OK && merged)
            st = speculate(q, res, calib, count, &spec, &px, &o.pack_threads);
        if (st == QR_OK && merged) {
            /* the f32 pass is this f32 run: what ships is measured beside the local measurement
             * before the first try is judged when a few samples expect it to hold (paid for
             * nothing, and measured again, when it fails) */
            o.pack = px;
            st = spec ? measure_local_shipped(q, res, calib, count, &o) : measure_local(q, res->qdq, calib, count, &o);
            o.pack = NULL;
            o.have_out = 1;
            res->fp32_ms = o.f32_ms;
            qr_plan_phase(q, res, spec ? "local measurement and what ships" : "local measurement");
            fb_step(&pg);
        }
        qr_exec_free(px);
        /* the narrow accumulators' counts are what ships' run's (the outputs' run adds none) */
        int na = merged && spec && res->ig ? res->ig->naccs : 0;
        int64_t *counts = calloc(2 * (size_t)na + 1, sizeof *counts);
        if (st == QR_OK && !counts)
            st = qr_errorf(q->e, "out of memory");
        for (int i = 0; st == QR_OK && i < na; i++)
            counts[2 * i] = res->ig->accs[i].sums, counts[2 * i + 1] = res->ig->accs[i].overflows;
        if (st == QR_OK)
            st = measure_outputs(q, &o, res->ig->g, res->ig, calib, 1, &mt0);
        for (int i = 0; st == QR_OK && i < na; i++)
            res->ig->accs[i].sums = counts[2 * i], res->ig->accs[i].overflows = counts[2 * i + 1];
        free(counts);
        if (st == QR_OK)
            res_metrics(q, res, &mt0);
        ahead = st == QR_OK && outputs_hold(q, &mt0) && (!merged || spec);
        for (int i = 0; merged && !ahead && i < q->nslots; i++) { /* measured again for what ships */
            qr_slot *s = &q->slots[i];
            s->sx2 = s->se2 = s->n = s->clipped = s->isx2 = s->ise2 = 0;
        }
        qr_plan_give_back_memory(); /* what its runs freed, before the local measurement's */
        qr_plan_phase(q, res, "the first try's outputs");
    }
    if (st == QR_OK && !merged)
        st = gain   ? measure_gain_runs(q, res->qdq, calib, count, q->ref ? NULL : &o, outs)
             : ahead ? measure_local_shipped(q, res, calib, count, &o)
                     : measure_local(q, res->qdq, calib, count, q->ref ? NULL : &o);
    if (!merged) {
        qr_plan_phase(q, res, ahead ? "local measurement and what ships" : "local measurement");
        fb_step(&pg);
    }
    int nr = 0;
    for (int i = 0; st == QR_OK && i < q->nslots; i++)
        if (!q->slots[i].fallback && q->qval[q->slots[i].value] >= 0)
            rk[nr++] = (ranked){i, qr_plan_local_sqnr(&q->slots[i]), NAN, 0};
    qsort(rk, (size_t)nr, sizeof *rk, by_sqnr);
    if (st == QR_OK && wd)
        st = open_wide(q, wd, dt16);
    for (int i = 0; st == QR_OK && wd && i < q->nslots; i++)
        q->slots[i].step16 = wd[i].open;
    int holds = 0, k = 0;
    if (st == QR_OK && qr_recipe_setting(q->r, QR_SET_BUDGET)) { /* the budget decides, not a condition */
        st = mixed_choice(q, res, &o, calib, count);
        holds = 1;
    } else if (st == QR_OK && early) { /* the first try's outputs are measured: judged now */
        double cal = NAN;
        if ((st = judge(q, wd, rk, nr, &mt0, &holds)) == QR_OK &&
            (st = judge_calibrate(q, res, wd, rk, nr, &holds, &cal)) == QR_OK)
            st = note_try(q, res, wd, rk, 0, o.n, o.n, holds, mt0.sqnr, cal);
        q->shipped = st == QR_OK && holds && ahead;
    } else if (st == QR_OK && !fails_alone(q, rk, nr, &st) && st == QR_OK)
        st = try_k(q, res, &o, calib, wd, rk, nr, 0, &holds);
    fb_step(&pg);
    if (st == QR_OK && !holds && q->r->fallback) {
        /* the tensors the condition sends back on their own (read with the outputs as if they met
         * it) go at once, first: a stable partition of the ranking; with a 16-bit step, those it
         * passes at 16 bits go to 16 bits (their local SQNR there measured only when some fail) */
        qrl_rt rt;
        qr_rt_init(&rt);
        int wide_fails = 0;
        for (int i = 0; wd && i < nr; i++)
            wide_fails |= wd[rk[i].slot].open && q->r->fallback(&rt, rk[i].sqnr, INFINITY, 1.0, 1.0);
        if ((st = qr_rt_status(&rt, q->e)) == QR_OK && wide_fails)
            st = measure_local_wide(q, wd, calib, count);
        if (wide_fails)
            qr_plan_phase(q, res, "local measurement at 16 bits");
        for (int i = 0; st == QR_OK && i < nr; i++)
            if (q->r->fallback(&rt, rk[i].sqnr, INFINITY, 1.0, 1.0)) {
                ranked r = rk[i];
                const wide *w = wd ? &wd[r.slot] : NULL;
                r.wide = w && w->open && !isnan(w->sqnr16) && !q->r->fallback(&rt, w->sqnr16, INFINITY, 1.0, 1.0);
                memmove(rk + k + 1, rk + k, sizeof *rk * (size_t)(i - k));
                rk[k++] = r;
            }
        if (st == QR_OK && (st = qr_rt_status(&rt, q->e)) == QR_OK && k > 0)
            st = try_k(q, res, &o, calib, wd, rk, nr, k, &holds);
        fb_step(&pg);
    }
    qr_plan_phase(q, res, res->mixed ? "mixed precision" : "first tries");
    int up = 0;
    double s0 = res->ntries > 0 ? res->tries[res->ntries - 1].output_sqnr : NAN; /* the first tries' last */
    if (st == QR_OK && !holds && (st = gives_up(q, res, &o, calib, wd, rk, nr, k, &up)) == QR_OK && up) {
        /* the recipe's search_floor: outputs this far from f32 with half the layers in f32, the
         * search would end with every layer in f32 (M-LSD) after the effects' runs, the most of
         * a quantize; its last try, taken at once */
        st = try_k(q, res, &o, calib, wd, rk, nr, nr, &holds);
        res->gave_up = 1;
        fb_step(&pg);
        qr_plan_phase(q, res, "search given up");
    } else if (st == QR_OK && !holds) { /* the fewest worst layers whose fallback meets it: a binary search */
        /* past those, the layers with the worst effect on the outputs first */
        /* rank = gain reads the held-out samples where they are (input_rounding): they stay in
         * memory for it (grad's passes take theirs one pass at a time) */
        int pin = gain, was = pin ? qr_plan_stream_held(q, 0) : 0;
        /* rank = grad: by slot, whose effect is exact (the rest estimates, grad_exact_near's to refine) */
        const qr_setting *nx = qr_recipe_setting(q->r, QR_SET_GRAD_EXACT_NEAR),
                         *kb = qr_recipe_setting(q->r, QR_SET_GRAD_EXACT_KEPT_BELOW);
        unsigned char *exact = calloc((size_t)q->nslots + 1, 1);
        /* rank = grad where its passes fit: grad_peak_within bounds the estimate of their peak (the
         * f32 run's bytes and a pass's beside them) by that many f32 runs; over it, the effects are
         * rank = effect's (the recipe's policy, stdlib's int8.qrl) */
        int grad = choice_is(q, QR_SET_RANK, "grad");
        const qr_setting *pw = qr_recipe_setting(q->r, QR_SET_GRAD_PEAK_WITHIN);
        /* grad_segments: at most that many segments; with grad_peak_within, the fewest whose
         * estimate fits (one pass's errors a segment's), else that many */
        const qr_setting *sg = qr_recipe_setting(q->r, QR_SET_GRAD_SEGMENTS);
        int segs = sg ? (int)sg->value : 1;
        for (int K = 1; st == QR_OK && grad && pw && K <= segs; K++) {
            if ((st = grad_peak_bytes(q, &o, rk + k, nr - k, K, &res->grad_peak_bytes, &res->grad_peak_values,
                                      &res->grad_peak_held, &res->grad_peak_f32_bytes)) != QR_OK)
                break;
            res->grad_peak_bytes += res->grad_peak_f32_bytes;
            res->grad_peak_within = pw->value;
            res->grad_peak_rank = res->grad_peak_bytes <= pw->value * res->grad_peak_f32_bytes ? 1 : 2;
            if (res->grad_peak_rank == 1 || K == segs)
                segs = K;
        }
        if (st == QR_OK && grad && pw)
            grad = res->grad_peak_rank == 1;
        near_exact ne = {.all = &o, .calib = calib, .count = count, .rk = rk, .k = k, .done = exact,
                         .w = grad && nx ? (int)nx->value : 0,
                         .per_mac = choice_is(q, QR_SET_ORDER, "per_mac"),
                         .below = grad && kb ? kb->value : -INFINITY,
                         .predicted = (grad && (choice_is(q, QR_SET_GRAD_EXACT_AT, "predicted") ||
                                                choice_is(q, QR_SET_GRAD_EXACT_AT, "fitted"))) ||
                                      choice_is(q, QR_SET_SEARCH_START, "predicted") ||
                                      choice_is(q, QR_SET_SEARCH_START, "fitted"),
                         .fitted = (grad && choice_is(q, QR_SET_GRAD_EXACT_AT, "fitted")) ||
                                   choice_is(q, QR_SET_SEARCH_START, "fitted"),
                         .s0 = s0};
        res->ranked = nr - k;
        q->grad_passes = q->grad_packing_bytes = q->grad_held_bytes = 0, q->grad_energy = 0;
        memset(q->grad_node_samples, 0, sizeof q->grad_node_samples);
        /* rank = grad where any cut's grad_exact_near window holds every ranked layer (nr - k <= W
         * + 1: the melspectrogram's 3): the first try would measure them all exactly, and grad's
         * forward and backward would estimate nothing the search reads; they are measured at once,
         * as rank = effect does */
        int all_near = ne.w > 0 && nr - k <= ne.w + 1;
        st = !exact  ? qr_errorf(q->e, "out of memory")
             : gain  ? gain_effects(q, calib, o.n, outs, rk + k, nr - k)
             : probe ? probe_effects(q, &o, calib, count, rk + k, nr - k)
             : grad && !all_near ? grad_effects(q, &o, calib, count, rk + k, nr - k, segs, exact)
                     : measure_effects(q, &o, calib, count, rk + k, nr - k);
        for (int i = k; st == QR_OK && all_near && i < nr; i++)
            exact[rk[i].slot] = 1;
        if (pin)
            qr_plan_stream_held(q, was);
        res->grad_passes = q->grad_passes, res->grad_packing_bytes = q->grad_packing_bytes,
        res->grad_held_bytes = q->grad_held_bytes, res->grad_segments = grad && !all_near ? segs : 0,
        res->grad_energy = q->grad_energy;
        memcpy(res->grad_node_samples, q->grad_node_samples, sizeof res->grad_node_samples);
        for (int i = k; st == QR_OK && i < nr; i++)
            q->slots[rk[i].slot].effect = rk[i].effect;
        if (st == QR_OK)
            qsort(rk + k, (size_t)(nr - k), sizeof *rk, by_effect);
        if (st == QR_OK && wd) {
            qr_plan_phase(q, res, "effects");
            st = search_wide(q, res, &o, calib, count, wd, rk, nr, k, &pg);
        } else {
            if (st == QR_OK && choice_is(q, QR_SET_ORDER, "per_mac"))
                st = order_per_mac(q, &o, rk + k, nr - k);
            qr_plan_phase(q, res, "effects");
            int answer;
            if (st == QR_OK)
                st = search_k(q, res, &o, calib, wd, rk, nr, k, nr, &pg, &answer, &ne);
        }
        free(exact);
        qr_plan_phase(q, res, "search");
        /* the exact runs the search asked for are the effects' work, not the search's */
        qr_plan_phase_move(res, "search", "effects", ne.ms, ne.cpu_ms, ne.runs, ne.vruns);
    }
    /* idle = drop: where what the search kept runs nothing on the integers (every product fell back,
     * and no lookup table, integer op or requantization is left), its roundings cost error and buy
     * no arithmetic (EfficientNet-B0 under int8-margin.qrl kept one Conv's output between Q/DQ
     * borders: 0% of its MACs, and 24.9 dB on unseen images where f32 is exact), so they go too */
    if (st == QR_OK && choice_is(q, QR_SET_IDLE, "drop") && res->ig && !res->ig->kernels && !res->ig->lookups &&
        !res->ig->int_ops && !res->ig->requants && res->ig->islands > 0 && nr > 0) {
        int left = 0;
        for (int i = 0; i < nr; i++)
            left += !q->slots[rk[i].slot].fallback;
        if (left && (st = try_k(q, res, &o, calib, wd, rk, nr, nr, &holds)) == QR_OK) {
            res->idle = 1;
            qr_plan_phase(q, res, "idle to f32");
        }
    }
    /* the values quantized at run time the outputs need in f32 (a dynamic recipe's fallback) */
    int dyn_changed = 0;
    if (st == QR_OK && (st = dynamic_fallback(q, res, &o, calib, count, &dyn_changed)) == QR_OK && dyn_changed) {
        q->shipped = 0; /* what ships is measured again, on the graphs now built */
        qr_plan_phase(q, res, "values quantized at run time");
    }
    pg.total = pg.done; /* finished: a full bar */
    qr_plan_progress(pg.o, "fallback ", pg.done, pg.total, pg.t0);
    res->fallbacks = res->widened = 0;
    for (int i = 0; i < q->nslots; i++) {
        res->fallbacks += q->slots[i].fallback;
        res->widened += wd && wd[i].on && !q->slots[i].fallback;
    }
    free(wd);
    if (st == QR_OK)
        qr_measure_macs(q, res, o.per_sample, o.last);
    outref_free(&o);
    cal_ref_done(&co, q);
    for (int i = 0; i < q->neffects_keep; i++)
        qr_exec_free(q->effects_keep[i].x);
    free(q->effects_keep);
    q->effects_keep = NULL, q->neffects_keep = 0;
    if (q->effects_ref)
        outref_free(&q->effects_ref->o);
    free(q->effects_ref);
    q->effects_ref = NULL;
    free(rk);
    free(outs);
    return st;
}

int qr_measure_kept_batches(const qr_qctx *q, int64_t count)
{
    const qr_setting *b = qr_recipe_setting(q->r, QR_SET_BUDGET);
    if (q->ref || qr_dist_size() > 1 || b || choice_is(q, QR_SET_RANK, "gain") ||
        (q->r->fallback && fallback_step(q) != QR_UNDEF))
        return 0;
    int64_t n = count < measure_samples(q) ? count : measure_samples(q), batch = qr_plan_batch(q);
    /* the f32 pass runs whole batches of count: the measured ones end at a batch's end */
    return n == count || n % batch == 0 ? (int)((n + batch - 1) / batch) : 0;
}

int64_t qr_measure_figure_count(const qr_qctx *q, int64_t count)
{
    return count < measure_samples(q) ? count : measure_samples(q);
}

int64_t qr_measure_calib_figure_samples(const qr_qctx *q, int64_t count)
{
    const qr_setting *s = qr_recipe_setting(q->r, QR_SET_CALIBRATE_FIGURE_SAMPLES);
    int64_t n = s && s->value > 0 && (int64_t)s->value < count ? (int64_t)s->value : count, batch = qr_plan_batch(q);
    n = (n + batch - 1) / batch * batch; /* whole batches: a fixed-batch model runs no partial one */
    return n < count ? n : count;
}

int qr_measure_calib_batches(const qr_qctx *q, int64_t count)
{
    if (q->ref || qr_dist_size() > 1)
        return 0;
    int64_t n = count < measure_samples(q) ? count : measure_samples(q), batch = qr_plan_batch(q);
    return n == count || n % batch == 0 ? (int)((n + batch - 1) / batch) : 0;
}

int qr_measure_computes_reference(const qr_qctx *q, const qr_quantized *res)
{
    return res->ig && (!res->ig->naccs) && same_computation(res->ig->g, q->ref ? q->ref : q->g);
}

qr_status qr_measure_output_sqnr(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count,
                                 double *sqnr)
{
    outref o;
    out_metrics mt = {0};
    /* what ships computes the reference (every layer fell back: M-LSD with int8.qrl): no error on
     * any sample, which a samples = F gives as inf (its contract), so no f32 run (M-LSD large's
     * 48 samples, a tenth of its quantize) */
    if (qr_measure_computes_reference(q, res)) {
        for (int i = 0; q->calib_out && i < q->calib_out_nb * q->g->n_outputs; i++)
            qr_tensor_free(&q->calib_out[i]);
        free(q->calib_out);
        q->calib_out = NULL, q->calib_out_nb = 0;
        *sqnr = INFINITY;
        return QR_OK;
    }
    /* the f32 pass kept these batches' outputs (qr_measure_calib_batches takes the batches
     * outref_alloc does): o takes them */
    qr_status st = q->calib_out ? outref_alloc(&o, q, count) : outref_init(&o, q, calib, count, 1);
    if (q->calib_out && st == QR_OK) {
        assert(o.nbatches == q->calib_out_nb);
        memcpy(o.out, q->calib_out, sizeof *o.out * (size_t)(o.nbatches * q->g->n_outputs));
        o.have_out = 1;
        free(q->calib_out);
        q->calib_out = NULL, q->calib_out_nb = 0;
    }
    if (st == QR_OK)
        st = measure_outputs(q, &o, res->ig->g, res->ig, calib, 1, &mt);
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

void qr_measure_macs(qr_qctx *q, qr_quantized *res, const double *per_sample, const int64_t *last)
{
    const qr_graph *g = q->g;
    res->macs = res->macs_int = 0;
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].macs = 0;
    for (int k = 0; k < q->nmatches; k++) { /* each slot: the matches that need it (the report's "macs") */
        const struct mrec *r = &q->matches[k];
        double m = 0;
        for (int j = 0; j < r->nnodes; j++)
            m += g->nodes[r->nodes[j]]->dead ? 0 : node_macs(g->nodes[r->nodes[j]], per_sample, last);
        for (int i = 0; m > 0 && i < q->nslots; i++)
            if (match_needs(q, r, i))
                q->slots[i].macs += m;
    }
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
    for (int64_t at = 0; st == QR_OK && at < n; at += batch) { /* under mpirun, this rank's batches */
        int64_t b = n - at < batch ? n - at : batch;
        if (!my_batch(at / batch, (n + batch - 1) / batch))
            continue;
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
    return sum_counts(q, correct, 1, st);
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
