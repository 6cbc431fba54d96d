#include "transform.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"
#include "match.h"
#include "op.h"
#include "ops/conv_geom.h"
#include "rounding.h"

/* A rounding optimizer keeps at most this many floats of a layer's input rows (16 MB): rows enough
 * for a steady Gram matrix of a few thousand inputs, not the im2col of every sample. */
#define ROUND_FLOATS ((int64_t)1 << 22)
/* The sweeps after which the optimizer stops however the recipe answers (it says when before). */
#define ROUND_MAX_SWEEPS 64
#define ROUND_CHUNK 64

/* One value the transform rewrites: y, its channel axis and count, its producer (past a Relu or
 * Clip), its readers. */
typedef struct site {
    qr_value *y;       /* the value the readers read */
    qr_node *gate;     /* the Relu or Clip(c, 0, hi) between producer and readers, NULL without */
    qr_node *bound;    /* Min(gate's output, K[channel]): the per-channel bound a Clip became */
    double hi;         /* a Clip's upper bound (inf without one; the bound's own per channel) */
    qr_value *pre;     /* the producer's output (the pre-activation) */
    float *low, *high; /* a high-bias absorption's: its smallest and largest values per channel */
    qr_node *producer; /* LayerNormalization or Conv */
    int axis;          /* y's channel axis: the last for a LayerNormalization, 1 for a Conv */
    int64_t channels;
    qr_node **readers; /* MatMul or Gemm (channels last), Conv (channels on axis 1), reading y as input 0 */
    int nreaders;
    float *act;    /* max |y| of each channel over the calibration samples */
    double *mean;  /* the sum of |y| of each channel, then (rescale) its mean */
    double values; /* values of one channel summed into mean */
} site;

/* A layer a bias correction rewrites: y = n(x, W, b), its output channels on axis 1 (Conv) or last. */
typedef struct bsite {
    qr_node *n;      /* Conv, MatMul or Gemm */
    int64_t cout;    /* output channels */
    qr_node *add;    /* a MatMul's bias: the Add reading it alone with a constant of cout values */
    int add_in;      /* the Add's constant input */
} bsite;

/* A layer a rounding optimizer rewrites, and the input rows it keeps: row r of group g at
 * x[(g * xcap + r) * k], k = the inputs of one output channel (a Conv's group's channels x kernel).
 * A layer of few inputs (2k + ROUND_CHUNK < cap) sums its rows' products into hsum a chunk of
 * ROUND_CHUNK rows at a time instead: k x k doubles per group, less than the rows would take. */
typedef struct rsite {
    bsite b;
    int64_t groups, k, cg; /* cg: a Conv's input channels per group (0: a MatMul or Gemm) */
    qr_conv_geom geom;     /* a Conv's, with offs[kernel position * positions + position] (-1: padding) */
    int64_t *offs;
    int64_t per_sample, every, cap, rows; /* rows of one sample; global row i kept when i % every == 0 */
    int64_t xcap, filled; /* x's rows, and those in it now */
    float *x;
    double *sum;  /* per group, the kept rows' sum */
    double *hsum; /* per group, X^T X of the rows summed (k x k), or NULL: x keeps them all */
} rsite;

/* The per-channel mean of a value a bias correction's layer reads (x, by value id). */
typedef struct mean_acc {
    int axis;
    int64_t channels;
    double *sum; /* per channel */
    double n;    /* elements per channel summed */
} mean_acc;

typedef struct tctx {
    qr_graph *g;
    const qr_transform *t;
    qr_transform_run *run;
    int matched;
    double s_min, s_max; /* the factors given (a rescaling), the largest |correction| (a bias correction) */
    site *sites;
    int nsites;
    int *site_of; /* by value id: index in sites, or -1 */
    int *pre_of;  /* by value id: the site whose pre-activation it is (an absorption), or -1; NULL without */
    int nvalues;  /* site_of's and pre_of's length */
    int rewrote;  /* nodes were added (a Clip's per-channel bound): the graph is sorted again */
    int nchanged; /* sites a rescaling or absorption changed */
    bsite *bsites;
    int nbsites;
    mean_acc *means; /* by value id: channels 0 when not measured */
    int nmeans;
    rsite *rsites;
    int nrsites;
    int64_t at, count; /* the batch's first sample, of count (measure) */
    int threads;       /* a rounding optimizer's */
    qr_status st;
    qr_error *e;
} tctx;

static void add_note(qr_transform_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(qr_transform_run *run, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **v = realloc(run->notes, sizeof *v * (size_t)(run->nnotes + 1));
    if (!v)
        return; /* a note lost to memory pressure, not an error */
    run->notes = v;
    if ((v[run->nnotes] = strdup(buf)))
        run->nnotes++;
}

static void free_notes_from(qr_transform_run *run, int from)
{
    for (int i = from; i < run->nnotes; i++)
        free(run->notes[i]);
    run->nnotes = from;
}

void qr_transform_run_free(qr_transform_run *run)
{
    for (int i = 0; i < run->nnotes; i++)
        free(run->notes[i]);
    free(run->notes);
    run->notes = NULL;
    run->nnotes = 0;
    for (int i = 0; i < run->norig; i++)
        free(run->orig[i]);
    free(run->orig);
    run->orig = NULL;
    run->norig = 0;
}

static int is_f32_const(const qr_value *v)
{
    return v && v->is_const && v->t.dtype == QR_F32 && v->t.data;
}

/* A constant only this node reads, so rewriting it changes nothing else. */
static int private_const(const qr_graph *g, const qr_value *v)
{
    return is_f32_const(v) && !v->is_output && qr_graph_use_count(g, v) == 1;
}

static int is_op(const qr_node *n, const char *op)
{
    return n && !n->domain[0] && !strcmp(n->op, op);
}

/* The single value of scalar constant v, or NAN. */
static double scalar_of(const qr_value *v)
{
    return is_f32_const(v) && qr_tensor_numel(&v->t) == 1 ? (double)*(const float *)v->t.data : NAN;
}

/* Whether v is a private constant of one value per channel of a value whose channels are on axis
 * (of rank ndim): shape [C, 1, ...] of rank ndim - axis, broadcasting over what follows the axis. */
static int channel_const(const qr_graph *g, const qr_value *v, int ndim, int axis, int64_t ch)
{
    if (!private_const(g, v) || v->t.ndim != ndim - axis || v->t.dims[0] != ch)
        return 0;
    return qr_tensor_numel(&v->t) == ch;
}

/* The activation between a matched value y and its producer, which the rescaling looks past
 * (Relu(c / s) is Relu(c) / s for s > 0; Clip(c / s, 0, hi) is not Clip(c, 0, hi) / s, but
 * Min(Clip(c / s, 0, M), hi / s) is, for any M >= the largest hi / s: so a Clip's site gets that
 * per-channel bound when it is rewritten, and keeps its Clip at M, which the integer kernel before
 * it fuses as it fused the ReLU6, its output range bounded):
 *   y = Relu(c) or Clip(c, 0, hi), hi > 0, its only reader Min(y, K[channel])   the readers read
 *                                                                                the Min's output
 *   y = Relu(c) or Clip(c, 0, hi), hi > 0                                        they read y
 * c read by the activation alone. Fills s's y, gate, bound, hi and pre; the producer is pre's. */
static void chain_of(const qr_graph *g, qr_value *y, site *s)
{
    s->y = s->pre = y;
    s->gate = s->bound = NULL;
    s->hi = INFINITY;
    qr_node *p = y->producer;
    int relu = is_op(p, "Relu") && p->n_in == 1, clip = is_op(p, "Clip") && p->n_in == 3 && p->in[1] && p->in[2];
    if (!(relu || clip) || !p->in[0] || !p->in[0]->producer || p->in[0]->is_output ||
        qr_graph_use_count(g, p->in[0]) != 1)
        return;
    if (clip && !(scalar_of(p->in[1]) == 0 && scalar_of(p->in[2]) > 0))
        return; /* a bound below 0 would need a per-channel Max too */
    s->gate = p;
    s->pre = p->in[0];
    if (clip)
        s->hi = scalar_of(p->in[2]);
    if (y->is_output || qr_graph_use_count(g, y) != 1 || y->t.ndim < 2)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *m = g->nodes[i];
        if (!m->dead && is_op(m, "Min") && m->n_in == 2 && m->in[0] == y &&
            channel_const(g, m->in[1], y->t.ndim, 1, y->t.dims[1]) && m->out[0]->t.dtype == QR_F32) {
            s->bound = m;
            s->y = m->out[0];
        }
    }
}

/* Channel j's upper bound: the per-channel bound's, or the Clip's (inf after a Relu). */
static double bound_of(const site *s, int64_t j)
{
    return s->bound ? (double)((const float *)s->bound->in[1]->t.data)[j] : s->hi;
}

/* A Clip(c, 0, hi) site gets Min(., K) after it, K = hi for every channel (the same function), so
 * that its bound can differ per channel; the Clip's hi becomes a constant of its own, which
 * clip_follow keeps at K's largest. 0: out of memory. */
static int clip_to_bound(tctx *c, site *s)
{
    qr_graph *g = c->g;
    qr_node *n = s->gate;
    qr_value *y = n->out[0];
    char name[600];
    snprintf(name, sizeof name, "%s_unbounded", y->name);
    qr_value *r = qr_graph_new_value(g, name);
    snprintf(name, sizeof name, "%s_bound", n->name);
    qr_node *m = r ? qr_graph_add_node(g, "Min", name, 2, 1) : NULL;
    float *k = malloc(sizeof *k * (size_t)s->channels);
    qr_value *kv = NULL, *hv = NULL;
    if (m && k) {
        for (int64_t j = 0; j < s->channels; j++)
            k[j] = (float)s->hi;
        qr_tensor t = {.dtype = QR_F32, .ndim = y->t.ndim - s->axis, .data = k};
        for (int d = 0; d < t.ndim; d++)
            t.dims[d] = d ? 1 : s->channels;
        snprintf(name, sizeof name, "%s_bound", y->name);
        if ((kv = qr_graph_new_value(g, name)))
            qr_value_set_const(g, kv, &t);
        qr_tensor h = {.dtype = QR_F32, .ndim = 0, .data = k};
        snprintf(name, sizeof name, "%s_max", n->name);
        if ((hv = qr_graph_new_value(g, name)))
            qr_value_set_const(g, hv, &h);
    }
    free(k);
    if (!kv || !kv->is_const || !hv || !hv->is_const)
        return 0;
    r->t = y->t;
    r->t.data = NULL;
    n->in[2] = hv;
    n->out[0] = r;
    r->producer = n;
    m->def = qr_op_find("", "Min");
    m->in[0] = r;
    m->in[1] = kv;
    m->out[0] = y;
    y->producer = m;
    s->bound = m;
    c->rewrote = 1;
    return 1;
}

/* A Clip with a per-channel bound after it clips at the bounds' largest (at least 0): the Min
 * decides, and the fused kernel's range is no wider than the values the Min lets through. 0: out of
 * memory (a Clip whose bound is not its own gets one). */
static int clip_follow(tctx *c, site *s)
{
    if (!s->gate || !is_op(s->gate, "Clip") || !s->bound)
        return 1;
    const float *k = s->bound->in[1]->t.data;
    float top = 0;
    for (int64_t j = 0; j < s->channels; j++)
        top = fmaxf(top, k[j]);
    qr_value *hv = s->gate->in[2];
    if (!private_const(c->g, hv) || qr_tensor_numel(&hv->t) != 1) {
        char name[600];
        snprintf(name, sizeof name, "%s_max", s->gate->name);
        qr_tensor h = {.dtype = QR_F32, .ndim = 0, .data = &top};
        if (!(hv = qr_graph_new_value(c->g, name)))
            return 0;
        qr_value_set_const(c->g, hv, &h);
        if (!hv->is_const)
            return 0;
        s->gate->in[2] = hv;
    }
    *(float *)hv->t.data = top;
    return 1;
}

/* Why producer p cannot divide y's channels (NULL: it can); sets the channel axis and count.
 * LayerNormalization over the last axis: its scale and bias; Conv: its weight's output channel and
 * bias. */
static const char *producer_problem(const qr_graph *g, const qr_node *p, const qr_value *y, int *axis, int64_t *c)
{
    if (is_op(p, "LayerNormalization")) {
        *axis = y->t.ndim - 1;
        int64_t a = qr_attr_i(p, "axis", -1);
        if (a != -1 && a != y->t.ndim - 1)
            return "its LayerNormalization normalizes over more than the last axis";
    } else if (is_op(p, "Conv")) {
        *axis = 1;
    } else {
        return "its producer is no LayerNormalization or Conv (the producers whose channels this mechanism divides)";
    }
    *c = y->t.ndim > *axis ? y->t.dims[*axis] : -1;
    if (*c <= 0)
        return "its channel count is not known";
    const qr_value *w = qr_node_input(p, 1), *b = qr_node_input(p, 2);
    int conv = is_op(p, "Conv");
    if (!private_const(g, w) || (conv ? w->t.ndim < 1 || w->t.dims[0] != *c : qr_tensor_numel(&w->t) != *c))
        return "its producer's weight (a LayerNorm's scale) is not an f32 constant with one row per channel that only "
               "it reads";
    if (b && (!private_const(g, b) || qr_tensor_numel(&b->t) != *c))
        return "its producer's bias is not an f32 constant of one value per channel that only it reads";
    return NULL;
}

/* Whether node n reads y as its input 0 with a constant weight that gives each of y's c channels
 * its own rows: MatMul(y, W[c, N]) or Gemm(y, W) without transA when the channels are last,
 * Conv(y, W[O, c, ...]) of one group when they are on axis 1. */
static int reader_ok(const qr_graph *g, const qr_node *n, const qr_value *y, int axis, int64_t c)
{
    if (n->domain[0] || n->n_in < 2 || n->in[0] != y)
        return 0;
    for (int i = 1; i < n->n_in; i++)
        if (n->in[i] == y)
            return 0;
    const qr_value *w = n->in[1];
    if (!private_const(g, w))
        return 0;
    int last = axis == y->t.ndim - 1;
    if (is_op(n, "MatMul"))
        return last && w->t.ndim == 2 && w->t.dims[0] == c;
    if (is_op(n, "Gemm"))
        return last && w->t.ndim == 2 && qr_attr_i(n, "transA", 0) == 0 &&
               w->t.dims[qr_attr_i(n, "transB", 0) ? 1 : 0] == c;
    if (is_op(n, "Conv")) { /* of any groups: input channel j meets its group's output channels */
        int64_t groups = qr_attr_i(n, "group", 1);
        return axis == 1 && w->t.ndim >= 3 && groups >= 1 && w->t.dims[1] * groups == c && w->t.dims[0] % groups == 0;
    }
    return 0;
}

/* The elements of reader n's weight that meet channel j: count runs of len elements, stride apart;
 * a Conv's run r is of output channel *first + r. */
static float *reader_run_of(const qr_node *n, int64_t j, int64_t *count, int64_t *len, int64_t *stride,
                            int64_t *first)
{
    const qr_value *w = n->in[1];
    float *d = w->t.data;
    *first = 0;
    if (is_op(n, "Conv")) { /* W[O, C / groups, k...]: for each output channel of j's group, j's kernel */
        int64_t cg = w->t.dims[1], k = qr_tensor_numel(&w->t) / (w->t.dims[0] * cg);
        int64_t per_group = w->t.dims[0] / qr_attr_i(n, "group", 1);
        *first = j / cg * per_group;
        *count = per_group, *len = k, *stride = cg * k;
        return d + (*first * cg + j % cg) * k;
    }
    if (is_op(n, "Gemm") && qr_attr_i(n, "transB", 0)) { /* W[N, C]: column j */
        *count = w->t.dims[0], *len = 1, *stride = w->t.dims[1];
        return d + j;
    }
    *count = 1, *len = w->t.dims[1], *stride = 0; /* W[C, N]: row j */
    return d + j * w->t.dims[1];
}

static float *reader_run(const qr_node *n, int64_t j, int64_t *count, int64_t *len, int64_t *stride)
{
    int64_t first;
    return reader_run_of(n, j, count, len, stride, &first);
}

/* The producer's weights of channel j: a LayerNorm's scale element, a Conv's output channel. */
static float *producer_run(const qr_node *p, int64_t j, int64_t *len)
{
    const qr_value *w = qr_node_input(p, 1);
    *len = is_op(p, "Conv") ? qr_tensor_numel(&w->t) / w->t.dims[0] : 1;
    return (float *)w->t.data + j * *len;
}

/* Why reader n cannot take a shift's constant into its bias (NULL: it can): only a Conv, which adds
 * W a to every output position only where no padding stands in for the input (pads all 0). */
static const char *shift_problem(const qr_graph *g, const qr_node *n)
{
    if (!is_op(n, "Conv"))
        return "a reader is no Conv, whose bias could take the shift";
    const qr_attr *pads = qr_node_attr(n, "pads");
    for (int i = 0; pads && i < pads->n; i++)
        if (pads->ints[i])
            return "a reader pads its input (the shift is not there in the padding, so no bias makes up for it)";
    const qr_attr *ap = qr_node_attr(n, "auto_pad");
    if (ap && ap->kind == QR_ATTR_STRING && ap->s && strcmp(ap->s, "NOTSET") && strcmp(ap->s, "VALID"))
        return "a reader pads its input (auto_pad)";
    const qr_value *b = qr_node_input(n, 2);
    if (b && (!private_const(g, b) || qr_tensor_numel(&b->t) != n->in[1]->t.dims[0]))
        return "a reader's bias is not an f32 constant of one value per output channel that only it reads";
    return NULL;
}

static int accept(void *user, const qr_match *m)
{
    tctx *c = user;
    qr_value *root = m->nodes[m->nnodes - 1]->out[0];
    c->matched++;
    const char *why = NULL;
    int axis = -1;
    int64_t ch = -1;
    site sv = {0};
    if (root)
        chain_of(c->g, root, &sv);
    qr_value *y = sv.y;
    qr_node *prod = y ? sv.pre->producer : NULL;
    int shifts = c->t->shift != NULL;
    if (!y || y->t.dtype != QR_F32 || y->t.ndim < 1)
        why = "its rank is not known";
    else if (y->is_output)
        why = "it is a graph output, which must keep its values";
    else if (shifts && !sv.gate)
        why = "no Relu or Clip(0, hi) follows its producer (the bound a shift must stay above)";
    if (!why)
        why = producer_problem(c->g, prod, y, &axis, &ch);
    if (!why && sv.bound && sv.bound->in[1]->t.dims[0] != ch)
        why = "its per-channel bound does not have one value per channel";
    qr_node **readers = NULL;
    int nreaders = 0;
    char buf[512];
    for (int i = 0; !why && i < c->g->n_nodes; i++) {
        qr_node *n = c->g->nodes[i];
        int reads = 0;
        for (int k = 0; !n->dead && k < n->n_in; k++)
            reads |= n->in[k] == y;
        if (!reads)
            continue;
        if (!reader_ok(c->g, n, y, axis, ch)) {
            snprintf(buf, sizeof buf, "its reader '%s' (%s) is no %s with a constant weight for its %lld channels that "
                     "only it reads", n->name, n->op, axis == 1 ? "Conv" : "MatMul or Gemm", (long long)ch);
            why = buf;
            break;
        }
        if (shifts && (why = shift_problem(c->g, n)))
            break;
        qr_node **v = realloc(readers, sizeof *v * (size_t)(nreaders + 1));
        if (!v) {
            c->st = qr_errorf(c->e, "out of memory");
            free(readers);
            return 0;
        }
        readers = v;
        readers[nreaders++] = n;
    }
    if (!why && !nreaders)
        why = "nothing reads it";
    if (why) {
        add_note(c->run, "transform %s (%s): '%s' left as it is: %s", c->t->match.name, c->t->match.loc,
                 y ? y->name : "?", why);
        free(readers);
        return 0;
    }
    site *v = realloc(c->sites, sizeof *v * (size_t)(c->nsites + 1));
    float *act = calloc((size_t)ch, sizeof *act), *low = malloc(sizeof *low * (size_t)ch);
    float *high = malloc(sizeof *high * (size_t)ch);
    double *mean = calloc((size_t)ch, sizeof *mean);
    if (!v || !act || !mean || !low || !high) {
        if (v)
            c->sites = v;
        free(act);
        free(mean);
        free(low);
        free(high);
        free(readers);
        c->st = qr_errorf(c->e, "out of memory");
        return 0;
    }
    for (int64_t j = 0; j < ch; j++)
        low[j] = INFINITY, high[j] = -INFINITY;
    c->sites = v;
    sv.low = low, sv.high = high, sv.producer = prod, sv.axis = axis, sv.channels = ch;
    sv.readers = readers, sv.nreaders = nreaders, sv.act = act, sv.mean = mean, sv.values = 0;
    c->sites[c->nsites++] = sv;
    return 1;
}

/* The per-channel statistics of value v: a rescaling site's largest |value|, a bias correction's
 * mean. NaN never wins a comparison (and makes a mean NaN, which the correction then refuses). */
static void gather_rows(tctx *c, rsite *rs, const qr_tensor *t);

static void observe_value(tctx *c, const qr_value *v, const qr_tensor *t)
{
    if (v->id < 0 || v->id >= c->g->n_values || t->dtype != QR_F32)
        return;
    for (int k = 0; k < c->nrsites; k++)
        if (c->rsites[k].b.n->in[0] == v)
            gather_rows(c, &c->rsites[k], t);
    int pk = c->pre_of && v->id < c->nvalues ? c->pre_of[v->id] : -1;
    if (pk >= 0) {
        site *s = &c->sites[pk];
        int64_t inner = 1, n = qr_tensor_numel(t);
        for (int d = s->axis + 1; d < t->ndim; d++)
            inner *= t->dims[d];
        const float *d = t->data;
        if (t->ndim > s->axis && t->dims[s->axis] == s->channels)
            for (int64_t i = 0; i < n; i++) {
                int64_t j = (i / inner) % s->channels;
                s->low[j] = fminf(s->low[j], d[i]);
                s->high[j] = fmaxf(s->high[j], d[i]);
            }
    }
    int k = c->site_of && v->id < c->nvalues ? c->site_of[v->id] : -1;
    mean_acc *ma = v->id < c->nmeans && c->means[v->id].channels > 0 ? &c->means[v->id] : NULL;
    int axis = k >= 0 ? c->sites[k].axis : ma ? ma->axis : -1;
    int64_t ch = k >= 0 ? c->sites[k].channels : ma ? ma->channels : 0;
    if (axis < 0 || t->ndim <= axis || t->dims[axis] != ch)
        return;
    int64_t inner = 1, n = qr_tensor_numel(t);
    for (int d = axis + 1; d < t->ndim; d++)
        inner *= t->dims[d];
    const float *d = t->data;
    if (k >= 0) {
        site *s = &c->sites[k];
        for (int64_t i = 0; i < n; i++) { /* element i is of channel (i / inner) % ch */
            float a = fabsf(d[i]);
            int64_t j = (i / inner) % ch;
            if (a > s->act[j])
                s->act[j] = a;
            s->mean[j] += a;
        }
        s->values += ch ? (double)(n / ch) : 0;
    }
    if (ma) {
        for (int64_t i = 0; i < n; i++)
            ma->sum[(i / inner) % ch] += d[i];
        ma->n += ch ? (double)(n / ch) : 0;
    }
}

/* The executor's observer. */
static void observe(void *user, const qr_node *node, const qr_value *v, qr_tensor *t)
{
    (void)node;
    observe_value(user, v, t);
}

/* act for every site: the f32 model over the calibration samples. */
static qr_status measure(tctx *c, const qr_tensor *calib, int64_t count, int batch)
{
    /* the kernels on the quantizer's threads; the executor calls the observer on this one */
    qr_exec_opts eo = {.threads = c->threads, .observer = observe, .observer_user = c};
    qr_exec *x = NULL;
    qr_graph *g = c->g;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    qr_status st = in && out ? qr_exec_new(g, &eo, &x, c->e) : qr_errorf(c->e, "out of memory");
    c->count = count;
    for (int64_t at = 0; st == QR_OK && at < count; at += batch) {
        int64_t b = count - at < batch ? count - at : batch;
        c->at = at;
        for (int i = 0; i < g->n_inputs; i++) {
            size_t row = qr_tensor_nbytes(&calib[i]) / (size_t)(calib[i].dims[0] ? calib[i].dims[0] : 1);
            in[i] = calib[i];
            in[i].dims[0] = b;
            in[i].data = (char *)calib[i].data + (size_t)at * row;
        }
        for (int i = 0; i < g->n_inputs; i++) /* the executor reports only what nodes compute */
            observe_value(c, g->inputs[i], &in[i]);
        st = qr_exec_run(x, in, out, c->e);
        for (int i = 0; i < g->n_outputs; i++)
            qr_tensor_free(&out[i]);
    }
    qr_exec_free(x);
    free(in);
    free(out);
    return st;
}

static double run_absmax(const float *d, int64_t count, int64_t len, int64_t stride)
{
    double m = 0;
    for (int64_t r = 0; r < count; r++)
        for (int64_t k = 0; k < len; k++)
            m = fmax(m, fabs(d[r * stride + k]));
    return m;
}

static void run_scale(float *d, int64_t count, int64_t len, int64_t stride, double f)
{
    for (int64_t r = 0; r < count; r++)
        for (int64_t k = 0; k < len; k++)
            d[r * stride + k] = (float)(d[r * stride + k] * f);
}

/* s[j] from the recipe, then the rewrite of one site. Statistics scale does not read are NaN. */
static qr_status rescale(tctx *c, site *s, const qrl_scalar *params)
{
    const qr_transform *t = c->t;
    double *f = malloc(sizeof *f * (size_t)s->channels);
    if (!f)
        return qr_errorf(c->e, "out of memory");
    int64_t count, len, stride;
    double groups = 1; /* the readers' largest group count */
    for (int r = 0; r < s->nreaders; r++)
        if (is_op(s->readers[r], "Conv"))
            groups = fmax(groups, (double)qr_attr_i(s->readers[r], "group", 1));
    for (int64_t j = 0; j < s->channels; j++) {
        double w = NAN, src = NAN, act = t->stats & QR_TRANSFORM_ACT ? s->act[j] : NAN;
        double mean = t->stats & QR_TRANSFORM_MEAN && s->values > 0 ? s->mean[j] / s->values : NAN;
        for (int r = 0; (t->stats & QR_TRANSFORM_WEIGHT) && r < s->nreaders; r++) {
            float *d = reader_run(s->readers[r], j, &count, &len, &stride);
            double m = run_absmax(d, count, len, stride);
            w = r ? fmax(w, m) : m;
        }
        if (t->stats & QR_TRANSFORM_SOURCE) {
            float *d = producer_run(s->producer, j, &len);
            src = run_absmax(d, 1, len, 0);
        }
        qrl_rt rt;
        qr_rt_init(&rt);
        f[j] = t->scale(&rt, params, act, w, src, mean, bound_of(s, j), groups);
        if (qr_rt_status(&rt, c->e) != QR_OK) {
            free(f);
            qr_error_prefix(c->e, "transform %s (%s), value '%s' channel %lld", t->match.name, t->match.loc,
                            s->y->name, (long long)j);
            return QR_ERR;
        }
        if (!(f[j] > 0) || !isfinite(f[j]) || !isfinite((float)f[j]) || (float)f[j] == 0) {
            qr_status st = qr_errorf(c->e, "transform %s (%s): scale gave %g for channel %lld of '%s' (act %g, "
                                     "weight %g, source %g, mean %g): a channel's factor must be a positive finite "
                                     "number", t->match.name, t->match.loc, f[j], (long long)j, s->y->name, act, w, src,
                                     mean);
            free(f);
            return st;
        }
    }
    int same = 1; /* every factor 1: nothing changes, a Clip stays one */
    for (int64_t j = 0; j < s->channels; j++)
        same &= f[j] == 1;
    if (same) {
        free(f);
        return QR_OK;
    }
    if (s->gate && is_op(s->gate, "Clip") && !s->bound && !clip_to_bound(c, s)) {
        free(f);
        return qr_errorf(c->e, "out of memory");
    }
    qr_value *bv = qr_node_input(s->producer, 2);
    float *k = s->bound ? qr_value_writable(c->g, s->bound->in[1]) : NULL, *bias = bv ? qr_value_writable(c->g, bv) : NULL;
    int ok = (!s->bound || k) && (!bv || bias) && qr_value_writable(c->g, qr_node_input(s->producer, 1));
    for (int r = 0; ok && r < s->nreaders; r++)
        ok = qr_value_writable(c->g, s->readers[r]->in[1]) != NULL;
    if (!ok) {
        free(f);
        return qr_errorf(c->e, "out of memory");
    }
    c->nchanged++;
    for (int64_t j = 0; j < s->channels; j++) {
        if (k) /* Min(Relu(c), K) / s is Min(Relu(c / s), K / s) */
            k[j] = (float)(k[j] / f[j]);
        float *d = producer_run(s->producer, j, &len);
        for (int64_t k = 0; k < len; k++)
            d[k] = (float)(d[k] / f[j]);
        if (bias)
            bias[j] = (float)(bias[j] / f[j]);
        for (int r = 0; r < s->nreaders; r++) {
            d = reader_run(s->readers[r], j, &count, &len, &stride);
            run_scale(d, count, len, stride, f[j]);
        }
        c->s_min = f[j] < c->s_min ? f[j] : c->s_min;
        c->s_max = f[j] > c->s_max ? f[j] : c->s_max;
    }
    free(f);
    return clip_follow(c, s) ? QR_OK : qr_errorf(c->e, "out of memory");
}

/* ------------------------------------------------------------ high-bias absorption */

static qr_value *new_const(qr_graph *g, const char *base, const float *d, int64_t n);
static int set_input(qr_graph *g, qr_node *n, int i, qr_value *v);

/* A's bias (input 2, cout values), made writable: a Conv without one gets zeros. NULL: out of memory. */
static float *own_bias(qr_graph *g, qr_node *n, int64_t cout)
{
    qr_value *b = qr_node_input(n, 2);
    if (b) /* a private constant (producer_problem, shift_problem), its data maybe shared with a copy */
        return qr_value_writable(g, b);
    float *z = calloc((size_t)cout + 1, sizeof *z);
    qr_value *v = z ? new_const(g, n->name, z, cout) : NULL;
    free(z);
    return v && set_input(g, n, 2, v) ? v->t.data : NULL;
}

/* DFQ's high-bias absorption (Nagel et al., 2019, section 4.1.2) of one site: a[j] from the recipe's
 * shift, then b1[j] -= a[j] in the producer, the bound K[j] -= a[j] (a Clip becomes Relu and Min
 * first), and each reader's bias b2 += W a. Relu(c - a) + a is Relu(c) wherever c >= a, and
 * Min(Relu(c - a), K - a) + a is Min(Relu(c), K): the readers, which see y - a, add W a back. */
static qr_status absorb(tctx *c, site *s, const qrl_scalar *params)
{
    const qr_transform *t = c->t;
    double *a = malloc(sizeof *a * (size_t)s->channels);
    if (!a)
        return qr_errorf(c->e, "out of memory");
    int any = 0;
    for (int64_t j = 0; j < s->channels; j++) {
        qrl_rt rt;
        qr_rt_init(&rt);
        double lo = s->low[j] <= s->high[j] ? s->low[j] : NAN, hi = s->low[j] <= s->high[j] ? s->high[j] : NAN;
        a[j] = t->shift(&rt, params, lo, hi, bound_of(s, j));
        if (qr_rt_status(&rt, c->e) != QR_OK) {
            free(a);
            qr_error_prefix(c->e, "transform %s (%s), value '%s' channel %lld", t->match.name, t->match.loc,
                            s->y->name, (long long)j);
            return QR_ERR;
        }
        if (!(a[j] >= 0) || !isfinite((float)a[j])) {
            qr_status st = qr_errorf(c->e, "transform %s (%s): shift gave %g for channel %lld of '%s' (low %g, high "
                                     "%g): a shift must be a finite number >= 0 (a negative one would move values "
                                     "below the Relu's 0)", t->match.name, t->match.loc, a[j], (long long)j,
                                     s->y->name, lo, hi);
            free(a);
            return st;
        }
        a[j] = (float)a[j];
        any |= a[j] > 0;
    }
    if (!any) {
        free(a);
        return QR_OK;
    }
    if (is_op(s->gate, "Clip") && !s->bound && !clip_to_bound(c, s)) {
        free(a);
        return qr_errorf(c->e, "out of memory");
    }
    float *b1 = own_bias(c->g, s->producer, s->channels), *k = s->bound ? qr_value_writable(c->g, s->bound->in[1]) : NULL;
    float **b2 = calloc((size_t)s->nreaders + 1, sizeof *b2);
    for (int r = 0; b1 && b2 && r < s->nreaders; r++)
        b2[r] = own_bias(c->g, s->readers[r], s->readers[r]->in[1]->t.dims[0]);
    int ok = b1 && b2 && (!s->bound || k);
    for (int r = 0; ok && r < s->nreaders; r++)
        ok = b2[r] != NULL;
    if (!ok) {
        free(a);
        free(b2);
        return qr_errorf(c->e, "out of memory");
    }
    for (int r = 0; r < s->nreaders; r++) { /* W a in double, then once into each bias */
        const qr_node *n = s->readers[r];
        int64_t cout = n->in[1]->t.dims[0], count, len, stride, first;
        double *add = calloc((size_t)cout + 1, sizeof *add);
        if (!add) {
            free(a);
            free(b2);
            return qr_errorf(c->e, "out of memory");
        }
        for (int64_t j = 0; j < s->channels; j++) {
            const float *d = reader_run_of(n, j, &count, &len, &stride, &first);
            for (int64_t q = 0; a[j] > 0 && q < count; q++)
                for (int64_t e = 0; e < len; e++)
                    add[first + q] += (double)d[q * stride + e] * a[j];
        }
        for (int64_t o = 0; o < cout; o++)
            b2[r][o] = (float)(b2[r][o] + add[o]);
        free(add);
    }
    for (int64_t j = 0; j < s->channels; j++) {
        b1[j] = (float)(b1[j] - a[j]);
        if (k)
            k[j] = (float)(k[j] - a[j]);
        c->s_max = fmax(c->s_max, a[j]);
    }
    c->nchanged++;
    free(a);
    free(b2);
    return clip_follow(c, s) ? QR_OK : qr_errorf(c->e, "out of memory");
}

/* ------------------------------------------------------------ bias correction */

/* Whether v holds cout f32 values along its last axis only ([cout], [1, cout], ...). */
static int is_channel_row(const qr_value *v, int64_t cout)
{
    if (!is_f32_const(v) || v->t.ndim < 1 || v->t.dims[v->t.ndim - 1] != cout)
        return 0;
    return qr_tensor_numel(&v->t) == cout;
}

/* Why layer n cannot have its bias corrected (NULL: it can); fills the site. */
static const char *bias_problem(const qr_graph *g, qr_node *n, bsite *b)
{
    const qr_value *x = n->n_in >= 2 ? n->in[0] : NULL, *w = n->n_in >= 2 ? n->in[1] : NULL;
    if (!x || !w || !is_f32_const(w) || x == w || x->t.dtype != QR_F32 || x->t.ndim < 2)
        return "it is no layer with an f32 input of known rank and a constant f32 weight";
    memset(b, 0, sizeof *b);
    b->n = n;
    if (is_op(n, "Conv")) {
        int64_t groups = qr_attr_i(n, "group", 1);
        if (w->t.ndim < 3 || groups < 1 || w->t.dims[0] % groups || x->t.dims[1] != w->t.dims[1] * groups)
            return "its weight's shape does not fit its input's channels and groups";
        b->cout = w->t.dims[0];
        const qr_value *bias = qr_node_input(n, 2);
        if (bias && (!is_f32_const(bias) || qr_tensor_numel(&bias->t) != b->cout))
            return "its bias is not an f32 constant of one value per output channel";
        return NULL;
    }
    int64_t k = x->t.dims[x->t.ndim - 1];
    if (is_op(n, "Gemm")) {
        int tb = qr_attr_i(n, "transB", 0) != 0;
        if (w->t.ndim != 2 || qr_attr_i(n, "transA", 0) || x->t.ndim != 2 || w->t.dims[tb ? 1 : 0] != k)
            return "it is a Gemm with transA, or its weight does not fit its input";
        b->cout = w->t.dims[tb ? 0 : 1];
        const qr_value *cv = qr_node_input(n, 2);
        float beta = qr_attr_f(n, "beta", 1.0f);
        if (cv ? !is_channel_row(cv, b->cout) || beta == 0 : beta != 1)
            return "its C is not an f32 constant of one value per output column with a non-zero beta (or beta is not 1 "
                   "without one)";
        return NULL;
    }
    if (!is_op(n, "MatMul") || w->t.ndim != 2 || w->t.dims[0] != k)
        return "it is no Conv, MatMul or Gemm whose weight fits its input";
    b->cout = w->t.dims[1];
    const qr_value *y = n->out[0];
    if (y->is_output || qr_graph_use_count(g, y) != 1)
        return NULL; /* an Add is put after it */
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *a = g->nodes[i];
        if (a->dead || !is_op(a, "Add") || a->n_in != 2 || (a->in[0] != y && a->in[1] != y))
            continue;
        int ci = a->in[0] == y ? 1 : 0;
        if (is_channel_row(a->in[ci], b->cout) && a->out[0]->t.ndim == y->t.ndim)
            b->add = a, b->add_in = ci;
    }
    return NULL;
}

/* A matched layer: noted and left alone when why says so, else its site (size bytes) appended to
 * *arr (*count of them). */
static int keep_layer(tctx *c, const qr_node *n, const char *why, void **arr, int *count, const void *site,
                      size_t size)
{
    if (why) {
        add_note(c->run, "transform %s (%s): layer '%s' (%s) left as it is: %s", c->t->match.name, c->t->match.loc,
                 n->name, n->op, why);
        return 0;
    }
    char *v = realloc(*arr, size * (size_t)(*count + 1));
    if (!v) {
        c->st = qr_errorf(c->e, "out of memory");
        return 0;
    }
    memcpy(v + size * (size_t)*count, site, size);
    *arr = v;
    ++*count;
    return 1;
}

static int accept_bias(void *user, const qr_match *m)
{
    tctx *c = user;
    qr_node *n = m->nodes[m->nnodes - 1];
    c->matched++;
    bsite b;
    const char *why = n->domain[0] ? "it is not in the ONNX domain" : bias_problem(c->g, n, &b);
    return keep_layer(c, n, why, (void **)&c->bsites, &c->nbsites, &b, sizeof b);
}

/* A new constant of n values (uniquely named after base) in g; NULL when out of memory. */
static qr_value *new_const(qr_graph *g, const char *base, const float *d, int64_t n)
{
    char name[600];
    snprintf(name, sizeof name, "%s_corrected_bias", base);
    for (int k = 2; qr_graph_find(g, name) && k < 1000000; k++)
        snprintf(name, sizeof name, "%s_corrected_bias%d", base, k);
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = (void *)d};
    qr_value *v = qr_graph_new_value(g, name);
    if (v)
        qr_value_set_const(g, v, &t);
    return v && v->is_const ? v : NULL;
}

/* Input i of node n becomes v (n grows to i + 1 inputs when it has fewer). */
static int set_input(qr_graph *g, qr_node *n, int i, qr_value *v)
{
    if (i >= n->n_in) {
        qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * (size_t)(i + 1));
        if (!in)
            return 0;
        memcpy(in, n->in, sizeof *in * (size_t)n->n_in);
        for (int k = n->n_in; k < i; k++)
            in[k] = NULL;
        n->in = in;
        n->n_in = i + 1;
    }
    n->in[i] = v;
    return 1;
}

/* MatMul n gets an Add of bias b after it. The Add's output takes over n's readers, so n keeps its
 * output (the value the model before the correction has); a graph output instead moves to the Add
 * (its name and readers stay, n writes a new value). */
static int add_after(qr_graph *g, qr_node *n, qr_value *b)
{
    qr_value *y = n->out[0];
    char name[600];
    snprintf(name, sizeof name, "%s_%s", y->name, y->is_output ? "without_bias" : "biased");
    for (int k = 2; qr_graph_find(g, name) && k < 1000000; k++)
        snprintf(name, sizeof name, "%s_%s%d", y->name, y->is_output ? "without_bias" : "biased", k);
    qr_value *w = qr_graph_new_value(g, name);
    snprintf(name, sizeof name, "%s_bias", n->name);
    qr_node *a = w ? qr_graph_add_node(g, "Add", name, 2, 1) : NULL;
    if (!a)
        return 0;
    a->def = qr_op_find("", "Add");
    w->t = y->t;
    w->t.data = NULL;
    a->in[0] = NULL; /* before the readers move */
    a->in[1] = b;
    if (y->is_output) {
        n->out[0] = w;
        w->producer = n;
        a->in[0] = w;
        a->out[0] = y;
        y->producer = a;
    } else {
        qr_graph_replace_uses(g, y, w);
        a->in[0] = y;
        a->out[0] = w;
        w->producer = a;
    }
    return 1;
}

/* Output channel o's expected error: sum over its inputs i of dw[o, i] * mean[channel of i]. */
static void layer_errors(const bsite *b, const float *w, const float *wq, const double *mean, double *err)
{
    const qr_node *n = b->n;
    const qr_value *wv = n->in[1];
    for (int64_t o = 0; o < b->cout; o++)
        err[o] = 0;
    if (is_op(n, "Conv")) { /* W[O, C / groups, k...]: output o reads group o / (O / groups) */
        int64_t groups = qr_attr_i(n, "group", 1), cg = wv->t.dims[1];
        int64_t k = qr_tensor_numel(&wv->t) / (b->cout * cg), per_group = b->cout / groups;
        for (int64_t o = 0; o < b->cout; o++)
            for (int64_t ci = 0; ci < cg; ci++) {
                double m = mean[(o / per_group) * cg + ci], s = 0;
                for (int64_t t = 0; t < k; t++) {
                    int64_t at = (o * cg + ci) * k + t;
                    s += (double)wq[at] - (double)w[at];
                }
                err[o] += s * m;
            }
        return;
    }
    int tb = is_op(n, "Gemm") && qr_attr_i(n, "transB", 0);
    int64_t kk = tb ? wv->t.dims[1] : wv->t.dims[0];
    double alpha = is_op(n, "Gemm") ? qr_attr_f(n, "alpha", 1.0f) : 1.0;
    for (int64_t o = 0; o < b->cout; o++) {
        double s = 0;
        for (int64_t i = 0; i < kk; i++) {
            int64_t at = tb ? o * kk + i : i * b->cout + o;
            s += ((double)wq[at] - (double)w[at]) * mean[i];
        }
        err[o] = alpha * s;
    }
}

/* The layer's bias per output channel as it adds it (0 without one), and where it lives. */
static qr_value *bias_value(const bsite *b, double *scale)
{
    *scale = 1;
    if (is_op(b->n, "MatMul"))
        return b->add ? b->add->in[b->add_in] : NULL;
    if (is_op(b->n, "Gemm"))
        *scale = qr_attr_f(b->n, "beta", 1.0f);
    return qr_node_input(b->n, 2);
}

/* New biases from the recipe, then the rewrite of one layer. */
static qr_status correct(tctx *c, const bsite *b, const float *wq, const qrl_scalar *params, int *added)
{
    const qr_transform *t = c->t;
    qr_graph *g = c->g;
    qr_node *n = b->n;
    const mean_acc *ma = &c->means[n->in[0]->id];
    double *mean = malloc(sizeof *mean * (size_t)(ma->channels + 1)), *err = malloc(sizeof *err * (size_t)(b->cout + 1));
    float *nb = malloc(sizeof *nb * (size_t)(b->cout + 1));
    if (!mean || !err || !nb) {
        free(mean), free(err), free(nb);
        return qr_errorf(c->e, "out of memory");
    }
    for (int64_t j = 0; j < ma->channels; j++)
        mean[j] = ma->n > 0 ? ma->sum[j] / ma->n : 0;
    int wid = n->in[1]->id; /* a rounding optimizer's error counts too: from the weight before it */
    const float *w0 = wid < c->run->norig && c->run->orig[wid] ? c->run->orig[wid] : n->in[1]->t.data;
    layer_errors(b, w0, wq, mean, err);
    double beta;
    qr_value *bv = bias_value(b, &beta);
    const float *old = bv ? bv->t.data : NULL;
    qr_status st = QR_OK;
    for (int64_t o = 0; o < b->cout && st == QR_OK; o++) {
        double was = old ? beta * old[o] : 0;
        qrl_rt rt;
        qr_rt_init(&rt);
        double v = t->bias(&rt, params, was, err[o], NAN);
        if (qr_rt_status(&rt, c->e) != QR_OK) {
            qr_error_prefix(c->e, "transform %s (%s), layer '%s' output channel %lld", t->match.name, t->match.loc,
                            n->name, (long long)o);
            st = QR_ERR;
        } else if (!isfinite(v / beta) || !isfinite((float)(v / beta))) {
            st = qr_errorf(c->e, "transform %s (%s): bias gave %g for output channel %lld of layer '%s' (bias %g, "
                           "error %g): a bias must be a finite number", t->match.name, t->match.loc, v, (long long)o,
                           n->name, was, err[o]);
        } else {
            nb[o] = (float)(v / beta);
            c->s_max = fmax(c->s_max, fabs(v - was));
        }
    }
    if (st == QR_OK) {
        float *own = bv && !bv->is_output && qr_graph_use_count(g, bv) == 1 ? qr_value_writable(g, bv) : NULL;
        if (own) {
            memcpy(own, nb, sizeof *nb * (size_t)b->cout); /* its own constant: rewritten in place */
        } else {
            qr_value *nv = new_const(g, n->name, nb, b->cout);
            int ok = nv != NULL;
            if (ok && is_op(n, "MatMul") && b->add)
                ok = set_input(g, b->add, b->add_in, nv);
            else if (ok && is_op(n, "MatMul"))
                ok = add_after(g, n, nv);
            else if (ok)
                ok = set_input(g, n, 2, nv);
            *added += !bv;
            if (!ok)
                st = qr_errorf(c->e, "out of memory");
        }
    }
    free(mean), free(err), free(nb);
    return st;
}

/* Bias correction: the match's layers, E[x] of their inputs, W_q from the quantizer, new biases. */
static qr_status bias_correct(tctx *c, const qrl_scalar *params, const qr_tensor *calib, int64_t count, int batch,
                              qr_transform_weights_fn weights, void *user, int *added)
{
    qr_graph *g = c->g;
    if (!c->nbsites)
        return QR_OK;
    if (!weights)
        return qr_errorf(c->e, "transform %s (%s): a bias correction needs the quantizer's weights", c->t->match.name,
                         c->t->match.loc);
    if (!(c->means = calloc((size_t)g->n_values + 1, sizeof *c->means)))
        return qr_errorf(c->e, "out of memory");
    c->nmeans = g->n_values;
    for (int k = 0; k < c->nbsites; k++) {
        const qr_value *x = c->bsites[k].n->in[0];
        mean_acc *ma = &c->means[x->id];
        int axis = is_op(c->bsites[k].n, "Conv") ? 1 : x->t.ndim - 1;
        if (ma->channels)
            continue;
        ma->axis = axis;
        ma->channels = x->t.dims[axis];
        if (ma->channels <= 0)
            return qr_errorf(c->e, "transform %s (%s): layer '%s': the channels of its input '%s' are not known",
                             c->t->match.name, c->t->match.loc, c->bsites[k].n->name, x->name);
        if (!(ma->sum = calloc((size_t)ma->channels, sizeof *ma->sum)))
            return qr_errorf(c->e, "out of memory");
    }
    qr_status st = measure(c, calib, count, batch);
    float **deq = NULL;
    int nvalues = g->n_values; /* deq's length: correcting adds values */
    if (st == QR_OK)
        st = weights(user, g, &deq, NULL, c->e);
    int corrected = 0;
    for (int k = 0; st == QR_OK && k < c->nbsites; k++) {
        const bsite *b = &c->bsites[k];
        const float *wq = deq[b->n->in[1]->id];
        if (!wq) {
            add_note(c->run, "transform %s (%s): layer '%s' (%s) left as it is: the recipe does not quantize its weight",
                     c->t->match.name, c->t->match.loc, b->n->name, b->n->op);
            continue;
        }
        st = correct(c, b, wq, params, added);
        corrected += st == QR_OK;
    }
    for (int i = 0; deq && i < nvalues; i++)
        free(deq[i]);
    free(deq);
    if (st == QR_OK && *added)
        st = qr_graph_check_oom(g, c->e);
    if (st == QR_OK && *added)
        st = qr_graph_toposort(g, c->e);
    c->nbsites = corrected; /* for the summary */
    return st;
}

/* ------------------------------------------------------------ rounding optimizer */

/* Why layer n's weight cannot have its rounding optimized (NULL: it can); fills the site. */
static const char *round_problem(tctx *c, qr_node *n, rsite *rs)
{
    memset(rs, 0, sizeof *rs);
    const char *why = bias_problem(c->g, n, &rs->b);
    if (why)
        return why;
    const qr_value *w = n->in[1];
    if (!private_const(c->g, w))
        return "its weight is read by another node too";
    rs->groups = 1;
    if (is_op(n, "Conv")) {
        rs->groups = qr_attr_i(n, "group", 1);
        rs->cg = w->t.dims[1];
        rs->k = qr_tensor_numel(&w->t) / w->t.dims[0];
    } else {
        rs->k = is_op(n, "Gemm") && qr_attr_i(n, "transB", 0) ? w->t.dims[1] : w->t.dims[0];
    }
    return rs->k > 0 ? NULL : "its weight is empty";
}

static int accept_round(void *user, const qr_match *m)
{
    tctx *c = user;
    qr_node *n = m->nodes[m->nnodes - 1];
    c->matched++;
    rsite rs;
    const char *why = n->domain[0] ? "it is not in the ONNX domain" : round_problem(c, n, &rs);
    return keep_layer(c, n, why, (void **)&c->rsites, &c->nrsites, &rs, sizeof rs);
}

/* The site's geometry and buffers from the first batch of its input t: rows per sample, which
 * rows it keeps. 0 when out of memory or the input does not fit (the site then keeps no rows). */
static int rows_init(tctx *c, rsite *rs, const qr_tensor *t)
{
    const qr_node *n = rs->b.n;
    int64_t b = t->ndim ? t->dims[0] : 0;
    if (b <= 0)
        return 0;
    if (rs->cg) {
        qr_error e;
        qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .err = &e};
        const qr_value *w = n->in[1];
        if (t->ndim != w->t.ndim || t->dims[1] != rs->cg * rs->groups ||
            qr_conv_geom_init(&k, t, w->t.dims + 2, QR_WIN_CONV, &rs->geom) != QR_OK)
            return 0;
        rs->per_sample = rs->geom.small_n;
        rs->offs = malloc(sizeof *rs->offs * (size_t)(rs->geom.kernel_n * rs->geom.small_n + 1));
        if (!rs->offs)
            return 0;
        for (int64_t kf = 0; kf < rs->geom.kernel_n; kf++)
            qr_conv_offsets(&rs->geom, kf, rs->offs + kf * rs->geom.small_n);
    } else {
        if (t->dims[t->ndim - 1] != rs->k)
            return 0;
        rs->per_sample = qr_tensor_numel(t) / (b * rs->k);
    }
    int64_t total = c->count * rs->per_sample, cap = ROUND_FLOATS / (rs->k * rs->groups);
    cap = cap < 256 ? 256 : cap > 4096 ? 4096 : cap;
    rs->every = total > cap ? (total + cap - 1) / cap : 1;
    rs->cap = (total + rs->every - 1) / rs->every;
    rs->xcap = rs->cap;
    if (2 * rs->k + ROUND_CHUNK < rs->cap) {
        rs->xcap = ROUND_CHUNK;
        if (!(rs->hsum = calloc((size_t)(rs->groups * rs->k * rs->k), sizeof *rs->hsum)))
            return 0;
    }
    rs->x = malloc(sizeof *rs->x * (size_t)(rs->groups * rs->xcap * rs->k + 1));
    rs->sum = calloc((size_t)(rs->groups * rs->k + 1), sizeof *rs->sum);
    return rs->x && rs->sum;
}

/* The rows in x summed into hsum (a layer of few inputs); 0 when out of memory. */
static int fold_rows(rsite *rs)
{
    if (!rs->hsum || !rs->filled)
        return 1;
    float *tmp = malloc(sizeof *tmp * (size_t)(rs->k * rs->k + 1));
    if (!tmp)
        return 0;
    for (int64_t g = 0; g < rs->groups; g++)
        qr_round_gram_add(rs->x + g * rs->xcap * rs->k, rs->filled, rs->k, rs->hsum + g * rs->k * rs->k, tmp);
    free(tmp);
    rs->filled = 0;
    return 1;
}

/* The rows of this batch's input t the site keeps: for a Conv the patches of its kept output
 * positions, per group, 0 where the window reads padding. */
static void gather_rows(tctx *c, rsite *rs, const qr_tensor *t)
{
    if (rs->every < 0)
        return; /* failed before */
    if (!rs->x && !rows_init(c, rs, t)) {
        rs->every = -1;
        return;
    }
    int64_t b = t->dims[0], first = c->at * rs->per_sample, end = first + b * rs->per_sample;
    const float *d = t->data;
    for (int64_t i = (first + rs->every - 1) / rs->every * rs->every; i < end && rs->rows < rs->cap; i += rs->every) {
        int64_t s = (i - first) / rs->per_sample, pos = (i - first) % rs->per_sample;
        for (int64_t g = 0; g < rs->groups; g++) {
            float *row = rs->x + (g * rs->xcap + rs->filled) * rs->k;
            if (rs->cg) {
                int64_t kn = rs->geom.kernel_n, plane = rs->geom.big_n;
                for (int64_t ci = 0; ci < rs->cg; ci++) {
                    const float *p = d + (s * rs->cg * rs->groups + g * rs->cg + ci) * plane;
                    for (int64_t kf = 0; kf < kn; kf++) {
                        int64_t off = rs->offs[kf * rs->per_sample + pos];
                        row[ci * kn + kf] = off < 0 ? 0.0f : p[off];
                    }
                }
            } else {
                memcpy(row, d + (s * rs->per_sample + pos) * rs->k, sizeof *row * (size_t)rs->k);
            }
            for (int64_t j = 0; j < rs->k; j++)
                rs->sum[g * rs->k + j] += row[j];
        }
        rs->rows++;
        if (++rs->filled == rs->xcap && rs->hsum && !fold_rows(rs)) {
            rs->every = -1;
            return;
        }
    }
}

/* Where output channel o's input j lives in the weight: a Conv's W[o, j], a MatMul's or Gemm's
 * column o of W[K, N] (or row o of a transposed Gemm's W[N, K]). */
static int64_t weight_at(const rsite *rs, int64_t o, int64_t j)
{
    const qr_node *n = rs->b.n;
    if (is_op(n, "Conv") || (is_op(n, "Gemm") && qr_attr_i(n, "transB", 0)))
        return o * rs->k + j;
    return j * rs->b.cout + o;
}

/* The weight's original values kept for a later bias correction (the first rounding's only). */
static int keep_original(qr_transform_run *run, const qr_value *w, int nvalues)
{
    if (run->norig < nvalues) {
        float **v = realloc(run->orig, sizeof *v * (size_t)nvalues);
        if (!v)
            return 0;
        for (int i = run->norig; i < nvalues; i++)
            v[i] = NULL;
        run->orig = v;
        run->norig = nvalues;
    }
    if (run->orig[w->id])
        return 1;
    size_t bytes = qr_tensor_nbytes(&w->t);
    return (run->orig[w->id] = malloc(bytes + 1)) ? (memcpy(run->orig[w->id], w->t.data, bytes), 1) : 0;
}

/* One layer: per group its Gram matrix and mean row, per output channel the rounding chosen. A
 * moved weight becomes its other rounding's value, a point of the grid, which the recipe's weight
 * quantization gives back; the others keep their f32 values (and round to nearest again), so the
 * ends of each channel's range, which never move, keep its scale. */
static qr_status round_layer(tctx *c, rsite *rs, const float *near, const float *alt, const qr_round_ask *ask,
                             qr_round_stats *st)
{
    qr_value *wv = rs->b.n->in[1];
    /* its own copy when the block is shared: a step figure's (steps = measure) copy of the graph
     * made it read-only (a write through it faulted on weights of 64 KiB and more, stop 41) */
    float *w = qr_value_writable(c->g, wv);
    int64_t k = rs->k, per = rs->b.cout / rs->groups;
    float *h = malloc(sizeof *h * (size_t)(k * k + 1)), *buf = malloc(sizeof *buf * (size_t)(4 * per * k + 1));
    double *mu = malloc(sizeof *mu * (size_t)(k + 1));
    if (!w || !h || !buf || !mu || !keep_original(c->run, wv, c->g->n_values)) {
        free(h), free(buf), free(mu);
        return qr_errorf(c->e, "out of memory");
    }
    float *cw = buf, *cn = buf + per * k, *ca = buf + 2 * per * k, *out = buf + 3 * per * k;
    qr_status s = QR_OK;
    for (int64_t g = 0; g < rs->groups && s == QR_OK; g++) {
        if (rs->hsum)
            for (int64_t i = 0; i < k * k; i++)
                h[i] = (float)(rs->hsum[g * k * k + i] / (double)rs->rows);
        else
            qr_round_gram(ask->pool, rs->x + g * rs->xcap * k, rs->rows, k, h);
        for (int64_t j = 0; j < k; j++)
            mu[j] = rs->rows ? rs->sum[g * k + j] / (double)rs->rows : 0;
        for (int64_t o = 0; o < per; o++)
            for (int64_t j = 0; j < k; j++) {
                int64_t at = weight_at(rs, g * per + o, j);
                cw[o * k + j] = w[at], cn[o * k + j] = near[at], ca[o * k + j] = alt[at];
            }
        s = qr_round_group(ask, h, mu, k, per, cw, cn, ca, out, st, c->e);
        for (int64_t o = 0; s == QR_OK && o < per; o++) /* only the moved: the rest round as they did */
            for (int64_t j = 0; j < k; j++)
                if (out[o * k + j] != cn[o * k + j])
                    w[weight_at(rs, g * per + o, j)] = out[o * k + j];
    }
    if (s != QR_OK)
        qr_error_prefix(c->e, "transform %s (%s), layer '%s'", c->t->match.name, c->t->match.loc, rs->b.n->name);
    free(h), free(buf), free(mu);
    return s;
}

/* Rounding optimization: the match's layers' input rows (one f32 pass), each weight's roundings
 * from the quantizer, the choice per layer. */
static qr_status round_layers(tctx *c, const qrl_scalar *params, const qr_tensor *calib, int64_t count, int batch,
                              qr_transform_weights_fn weights, void *user, qr_round_stats *sum, int *done)
{
    qr_graph *g = c->g;
    if (!c->nrsites)
        return QR_OK;
    if (!weights)
        return qr_errorf(c->e, "transform %s (%s): a rounding optimizer needs the quantizer's weights",
                         c->t->match.name, c->t->match.loc);
    qr_status st = measure(c, calib, count, batch);
    float **deq = NULL, **alt = NULL;
    int nvalues = g->n_values;
    if (st == QR_OK)
        st = weights(user, g, &deq, &alt, c->e);
    qr_round_ask ask = {.flip = c->t->flip, .params = params, .max_sweeps = ROUND_MAX_SWEEPS,
                        .pool = qr_pool_new(c->threads)};
    for (int k = 0; st == QR_OK && k < c->nrsites; k++) {
        rsite *rs = &c->rsites[k];
        const qr_node *n = rs->b.n;
        const float *near = deq[n->in[1]->id], *other = alt[n->in[1]->id];
        if (!near || !other)
            add_note(c->run, "transform %s (%s): layer '%s' (%s) left as it is: the recipe does not quantize its "
                     "weight", c->t->match.name, c->t->match.loc, n->name, n->op);
        else if (rs->every < 0 || !rs->rows || !fold_rows(rs))
            add_note(c->run, "transform %s (%s): layer '%s' (%s) left as it is: its input rows could not be "
                     "collected (an input shape its weight does not fit, or out of memory)", c->t->match.name,
                     c->t->match.loc, n->name, n->op);
        else if ((st = round_layer(c, rs, near, other, &ask, sum)) == QR_OK)
            ++*done;
    }
    for (int i = 0; i < nvalues; i++) {
        free(deq ? deq[i] : NULL);
        free(alt ? alt[i] : NULL);
    }
    free(deq);
    free(alt);
    qr_pool_free(ask.pool);
    if (st == QR_OK && sum->capped)
        add_note(c->run, "transform %s (%s): %d output channels still moved weights after %d sweeps and were "
                 "stopped there (flip should stop itself: by its sweep, or by moving only what lowers the error)",
                 c->t->match.name, c->t->match.loc, sum->capped, ROUND_MAX_SWEEPS);
    return st;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------ the transforms of a recipe */

/* The transform's parameters: its defaults, then the setting's arguments by name. */
static qr_status transform_params(const qr_transform *t, const qr_setting *s, qrl_scalar *params, qr_error *e)
{
    double values[QRL_MAX_PARAMS] = {0};
    qrl_rt rt;
    qr_rt_init(&rt);
    t->defaults(&rt, params);
    if (s->args && s->nargs)
        s->args(&rt, values);
    if (qr_rt_status(&rt, e) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < s->nargs && i < QRL_MAX_PARAMS; i++) {
        int at = -1;
        for (int k = 0; k < t->nparams; k++)
            if (!strcmp(t->params[k].name, s->argnames[i]))
                at = k;
        if (at < 0)
            return qr_errorf(e, "transform %s has no parameter '%s'", t->match.name, s->argnames[i]);
        if (t->params[at].kind == QR_CAL_FLOAT)
            params[at].f = values[i];
        else
            params[at].i = (int64_t)values[i];
    }
    return QR_OK;
}

/* One transform setting: its matches, their statistics and rewrites, its summary note first among
 * its notes. */
static qr_status apply_one(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_setting *s,
                           const qr_tensor *calib, int64_t count, int batch, int threads,
                           qr_transform_weights_fn weights, void *user, qr_transform_run *run, qr_error *e)
{
    const qr_transform *t = qr_module_transform(m, s->calibrator);
    if (!t)
        return qr_errorf(e, "recipe '%s': transform '%s' is not in the recipe's module", r->name, s->calibrator);
    qrl_scalar params[QRL_MAX_PARAMS + 1] = {{0}};
    if (transform_params(t, s, params, e) != QR_OK) {
        qr_error_prefix(e, "recipe '%s'", r->name);
        return QR_ERR;
    }
    int corrects = t->bias != NULL, rounds = t->flip != NULL, shifts = t->shift != NULL, first_note = run->nnotes, added = 0, rounded = 0;
    qr_round_stats rsum = {0};
    double t0 = now_s();
    tctx c = {.g = g, .t = t, .run = run, .st = QR_OK, .e = e, .s_min = INFINITY,
              .s_max = corrects || shifts ? 0 : -INFINITY,
              .threads = threads};
    unsigned char *claimed = calloc((size_t)g->n_nodes + 1, 1);
    c.site_of = malloc(sizeof *c.site_of * (size_t)(g->n_values + 1));
    c.pre_of = shifts ? malloc(sizeof *c.pre_of * (size_t)(g->n_values + 1)) : NULL;
    c.nvalues = g->n_values;
    if (!claimed || !c.site_of || (shifts && !c.pre_of)) {
        free(claimed);
        free(c.site_of);
        free(c.pre_of);
        return qr_errorf(e, "out of memory");
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    int (*acc)(void *, const qr_match *) = rounds ? accept_round : corrects ? accept_bias : accept;
    qr_status st = qr_match_pattern(g, &t->match, claimed, &rt, acc, &c, e) < 0 ? QR_ERR : c.st;
    for (int i = 0; i < c.nvalues; i++) {
        c.site_of[i] = -1;
        if (c.pre_of)
            c.pre_of[i] = -1;
    }
    for (int k = 0; k < c.nsites; k++) {
        if (shifts)
            c.pre_of[c.sites[k].pre->id] = k; /* an absorption measures the pre-activation, not y */
        else
            c.site_of[c.sites[k].y->id] = k;
    }
    if (st == QR_OK && corrects)
        st = bias_correct(&c, params, calib, count, batch > 0 ? batch : 32, weights, user, &added);
    if (st == QR_OK && rounds)
        st = round_layers(&c, params, calib, count, batch > 0 ? batch : 32, weights, user, &rsum, &rounded);
    if (st == QR_OK && c.nsites && (shifts || (t->stats & (QR_TRANSFORM_ACT | QR_TRANSFORM_MEAN))))
        st = measure(&c, calib, count, batch > 0 ? batch : 32); /* only what the function reads */
    for (int k = 0; st == QR_OK && k < c.nsites; k++)
        st = shifts ? absorb(&c, &c.sites[k], params) : rescale(&c, &c.sites[k], params);
    if (st == QR_OK && c.rewrote)
        st = qr_graph_check_oom(g, e);
    if (st == QR_OK && c.rewrote)
        st = qr_graph_toposort(g, e);
    if (st == QR_OK) {
        char ps[256] = "";
        for (int k = 0, at = 0; k < t->nparams && at < (int)sizeof ps - 40; k++) {
            if (t->params[k].kind == QR_CAL_BOOL) /* as the recipe writes it */
                at += snprintf(ps + at, sizeof ps - (size_t)at, "%s%s = %s", k ? ", " : "", t->params[k].name,
                               params[k].i ? "true" : "false");
            else
                at += snprintf(ps + at, sizeof ps - (size_t)at, "%s%s = %g", k ? ", " : "", t->params[k].name,
                               t->params[k].kind == QR_CAL_FLOAT ? params[k].f : (double)params[k].i);
        }
        if (rounds)
            add_note(run, "transform %s(%s) (%s): rounded the weights of %d of the %d layers it matched: %lld weights "
                     "moved off round-to-nearest; the layers' output error %.4g of nearest's (its mean part %.4g) on "
                     "the calibration samples, %d sweeps run at most, %.1f s", t->match.name, ps, t->match.loc,
                     rounded, c.matched, (long long)rsum.moved, rsum.before > 0 ? rsum.after / rsum.before : 1.0,
                     rsum.mean_before > 0 ? rsum.mean_after / rsum.mean_before : 1.0, rsum.sweeps, now_s() - t0);
        else if (corrects && c.nbsites)
            add_note(run, "transform %s(%s) (%s): corrected the bias of %d of the %d layers it matched (%d had none), "
                     "largest change %.3g", t->match.name, ps, t->match.loc, c.nbsites, c.matched, added, c.s_max);
        else if (corrects)
            add_note(run, "transform %s(%s) (%s): corrected none of the %d layers it matched", t->match.name, ps,
                     t->match.loc, c.matched);
        else if (shifts)
            add_note(run, "transform %s(%s) (%s): moved a constant out of %d of the %d values it matched into their "
                     "readers' biases, largest %.3g", t->match.name, ps, t->match.loc, c.nchanged, c.matched,
                     c.nchanged ? c.s_max : 0.0);
        else if (c.nsites)
            add_note(run, "transform %s(%s) (%s): rescaled %d of the %d values it matched, channel factors %.3g to %.3g",
                     t->match.name, ps, t->match.loc, c.nchanged, c.matched, c.s_min, c.s_max);
        else
            add_note(run, "transform %s(%s) (%s): rescaled none of the %d values it matched", t->match.name, ps,
                     t->match.loc, c.matched);
        if (run->nnotes > first_note + 1) { /* the summary first */
            char *sum = run->notes[run->nnotes - 1];
            memmove(run->notes + first_note + 1, run->notes + first_note,
                    sizeof *run->notes * (size_t)(run->nnotes - 1 - first_note));
            run->notes[first_note] = sum;
        }
    }
    for (int k = 0; k < c.nsites; k++) {
        free(c.sites[k].readers);
        free(c.sites[k].act);
        free(c.sites[k].mean);
        free(c.sites[k].low);
        free(c.sites[k].high);
    }
    for (int k = 0; k < c.nrsites; k++) {
        free(c.rsites[k].offs);
        free(c.rsites[k].x);
        free(c.rsites[k].sum);
        free(c.rsites[k].hsum);
    }
    free(c.rsites);
    for (int i = 0; c.means && i < c.nmeans; i++)
        free(c.means[i].sum);
    free(c.means);
    free(c.bsites);
    free(c.sites);
    free(c.site_of);
    free(c.pre_of);
    free(claimed);
    return st;
}

qr_status qr_transform_apply(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                             int64_t count, int batch, int threads, qr_transform_weights_fn weights, void *user,
                             qr_graph **ref, qr_transform_run *run, qr_error *e)
{
    return qr_transform_apply_steps(g, m, r, calib, count, batch, threads, weights, user, NULL, NULL, ref, run, e);
}

qr_status qr_transform_apply_steps(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                                   int64_t count, int batch, int threads, qr_transform_weights_fn weights, void *user,
                                   qr_transform_step_fn step, void *step_user, qr_graph **ref, qr_transform_run *run,
                                   qr_error *e)
{
    memset(run, 0, sizeof *run);
    *ref = NULL;
    for (int i = 0; i < r->nsettings; i++) {
        if (r->settings[i].id != QR_SET_TRANSFORM)
            continue;
        const qr_transform *t = qr_module_transform(m, r->settings[i].calibrator);
        if (t && (t->bias || t->flip) && !*ref && !(*ref = qr_graph_clone(g))) {
            free_notes_from(run, 0);
            return qr_errorf(e, "out of memory");
        }
        if (apply_one(g, m, r, &r->settings[i], calib, count, batch, threads, weights, user, run, e) != QR_OK ||
            (step && step(step_user, g, *ref, r->settings[i].calibrator, e) != QR_OK)) {
            qr_transform_run_free(run);
            qr_graph_free(*ref);
            *ref = NULL;
            return QR_ERR;
        }
    }
    return QR_OK;
}
