#include "transform.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "match.h"

/* One value the transform rewrites: y, its channel axis and count, its producer (past a Relu),
 * its readers. */
typedef struct site {
    qr_value *y;
    qr_node *producer; /* LayerNormalization or Conv */
    int axis;          /* y's channel axis: the last for a LayerNormalization, 1 for a Conv */
    int64_t channels;
    qr_node **readers; /* MatMul or Gemm (channels last), Conv (channels on axis 1), reading y as input 0 */
    int nreaders;
    float *act; /* max |y| of each channel over the calibration samples */
} site;

typedef struct tctx {
    qr_graph *g;
    const qr_transform *t;
    qr_transform_run *run;
    site *sites;
    int nsites;
    int *site_of; /* by value id: index in sites, or -1 */
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

void qr_transform_run_free(qr_transform_run *run)
{
    for (int i = 0; i < run->nnotes; i++)
        free(run->notes[i]);
    free(run->notes);
    run->notes = NULL;
    run->nnotes = 0;
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

/* The node whose channels are divided: y's producer, or the producer of a Relu's input that only the
 * Relu reads (Relu(c / s) is Relu(c) / s for s > 0). */
static qr_node *producer_of(const qr_graph *g, const qr_value *y)
{
    qr_node *p = y->producer;
    if (is_op(p, "Relu") && p->in[0] && p->in[0]->producer && !p->in[0]->is_output &&
        qr_graph_use_count(g, p->in[0]) == 1)
        p = p->in[0]->producer;
    return p;
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
    if (is_op(n, "Conv"))
        return axis == 1 && w->t.ndim >= 3 && w->t.dims[1] == c && qr_attr_i(n, "group", 1) == 1;
    return 0;
}

/* The elements of reader n's weight that meet channel j: count runs of len elements, stride apart. */
static float *reader_run(const qr_node *n, int64_t j, int64_t *count, int64_t *len, int64_t *stride)
{
    const qr_value *w = n->in[1];
    float *d = w->t.data;
    if (is_op(n, "Conv")) { /* W[O, C, k...]: for each output channel, input channel j's kernel */
        int64_t k = qr_tensor_numel(&w->t) / (w->t.dims[0] * w->t.dims[1]);
        *count = w->t.dims[0], *len = k, *stride = w->t.dims[1] * k;
        return d + j * k;
    }
    if (is_op(n, "Gemm") && qr_attr_i(n, "transB", 0)) { /* W[N, C]: column j */
        *count = w->t.dims[0], *len = 1, *stride = w->t.dims[1];
        return d + j;
    }
    *count = 1, *len = w->t.dims[1], *stride = 0; /* W[C, N]: row j */
    return d + j * w->t.dims[1];
}

/* The producer's weights of channel j: a LayerNorm's scale element, a Conv's output channel. */
static float *producer_run(const qr_node *p, int64_t j, int64_t *len)
{
    const qr_value *w = qr_node_input(p, 1);
    *len = is_op(p, "Conv") ? qr_tensor_numel(&w->t) / w->t.dims[0] : 1;
    return (float *)w->t.data + j * *len;
}

static int accept(void *user, const qr_match *m)
{
    tctx *c = user;
    qr_value *y = m->nodes[m->nnodes - 1]->out[0];
    c->run->matched++;
    const char *why = NULL;
    int axis = -1;
    int64_t ch = -1;
    qr_node *prod = y ? producer_of(c->g, y) : NULL;
    if (!y || y->t.dtype != QR_F32 || y->t.ndim < 1)
        why = "its rank is not known";
    else if (y->is_output)
        why = "it is a graph output, which must keep its values";
    if (!why)
        why = producer_problem(c->g, prod, y, &axis, &ch);
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
                     "only it reads", n->name, n->op, axis == 1 ? "one-group Conv" : "MatMul or Gemm", (long long)ch);
            why = buf;
            break;
        }
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
    float *act = calloc((size_t)ch, sizeof *act);
    if (!v || !act) {
        if (v)
            c->sites = v;
        free(act);
        free(readers);
        c->st = qr_errorf(c->e, "out of memory");
        return 0;
    }
    c->sites = v;
    c->sites[c->nsites++] = (site){y, prod, axis, ch, readers, nreaders, act};
    return 1;
}

/* The executor's observer: each site's per-channel largest |value|. NaN never wins a comparison. */
static void observe(void *user, const qr_node *node, const qr_value *v, qr_tensor *t)
{
    (void)node;
    tctx *c = user;
    int k = v->id >= 0 && v->id < c->g->n_values ? c->site_of[v->id] : -1;
    if (k < 0 || t->dtype != QR_F32)
        return;
    site *s = &c->sites[k];
    if (t->ndim <= s->axis || t->dims[s->axis] != s->channels)
        return;
    int64_t inner = 1, ch = s->channels, n = qr_tensor_numel(t);
    for (int d = s->axis + 1; d < t->ndim; d++)
        inner *= t->dims[d];
    const float *d = t->data;
    for (int64_t i = 0; i < n; i++) { /* element i is of channel (i / inner) % ch */
        float a = fabsf(d[i]);
        int64_t j = (i / inner) % ch;
        if (a > s->act[j])
            s->act[j] = a;
    }
}


/* act for every site: the f32 model over the calibration samples. */
static qr_status measure(tctx *c, const qr_tensor *calib, int64_t count, int batch)
{
    qr_exec_opts eo = {.observer = observe, .observer_user = c};
    qr_exec *x = NULL;
    qr_graph *g = c->g;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    qr_status st = in && out ? qr_exec_new(g, &eo, &x, c->e) : qr_errorf(c->e, "out of memory");
    for (int64_t at = 0; st == QR_OK && at < count; at += batch) {
        int64_t b = count - at < batch ? count - at : batch;
        for (int i = 0; i < g->n_inputs; i++) {
            size_t row = qr_tensor_nbytes(&calib[i]) / (size_t)(calib[i].dims[0] ? calib[i].dims[0] : 1);
            in[i] = calib[i];
            in[i].dims[0] = b;
            in[i].data = (char *)calib[i].data + (size_t)at * row;
        }
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
    for (int64_t j = 0; j < s->channels; j++) {
        double w = NAN, src = NAN, act = t->stats & QR_TRANSFORM_ACT ? s->act[j] : NAN;
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
        f[j] = t->scale(&rt, params, act, w, src);
        if (qr_rt_status(&rt, c->e) != QR_OK) {
            free(f);
            qr_error_prefix(c->e, "transform %s (%s), value '%s' channel %lld", t->match.name, t->match.loc,
                            s->y->name, (long long)j);
            return QR_ERR;
        }
        if (!(f[j] > 0) || !isfinite(f[j]) || !isfinite((float)f[j]) || (float)f[j] == 0) {
            qr_status st = qr_errorf(c->e, "transform %s (%s): scale gave %g for channel %lld of '%s' (act %g, "
                                     "weight %g, source %g): a channel's factor must be a positive finite number",
                                     t->match.name, t->match.loc, f[j], (long long)j, s->y->name, act, w, src);
            free(f);
            return st;
        }
    }
    qr_value *bv = qr_node_input(s->producer, 2);
    float *bias = bv ? bv->t.data : NULL;
    for (int64_t j = 0; j < s->channels; j++) {
        float *d = producer_run(s->producer, j, &len);
        for (int64_t k = 0; k < len; k++)
            d[k] = (float)(d[k] / f[j]);
        if (bias)
            bias[j] = (float)(bias[j] / f[j]);
        for (int r = 0; r < s->nreaders; r++) {
            d = reader_run(s->readers[r], j, &count, &len, &stride);
            run_scale(d, count, len, stride, f[j]);
        }
        c->run->s_min = f[j] < c->run->s_min ? f[j] : c->run->s_min;
        c->run->s_max = f[j] > c->run->s_max ? f[j] : c->run->s_max;
    }
    free(f);
    return QR_OK;
}

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

qr_status qr_transform_apply(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                             int64_t count, int batch, qr_transform_run *run, qr_error *e)
{
    memset(run, 0, sizeof *run);
    run->s_min = INFINITY;
    run->s_max = -INFINITY;
    const qr_setting *s = qr_recipe_setting(r, "transform");
    if (!s)
        return QR_OK;
    const qr_transform *t = qr_module_transform(m, s->calibrator);
    if (!t)
        return qr_errorf(e, "recipe '%s': transform '%s' is not in the recipe's module", r->name, s->calibrator);
    qrl_scalar params[QRL_MAX_PARAMS + 1] = {{0}};
    if (transform_params(t, s, params, e) != QR_OK) {
        qr_error_prefix(e, "recipe '%s'", r->name);
        return QR_ERR;
    }
    tctx c = {.g = g, .t = t, .run = run, .st = QR_OK, .e = e};
    unsigned char *claimed = calloc((size_t)g->n_nodes + 1, 1);
    c.site_of = malloc(sizeof *c.site_of * (size_t)(g->n_values + 1));
    if (!claimed || !c.site_of) {
        free(claimed);
        free(c.site_of);
        return qr_errorf(e, "out of memory");
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_status st = qr_match_pattern(g, &t->match, claimed, &rt, accept, &c, e) < 0 ? QR_ERR : c.st;
    for (int i = 0; i < g->n_values; i++)
        c.site_of[i] = -1;
    for (int k = 0; k < c.nsites; k++)
        c.site_of[c.sites[k].y->id] = k;
    if (st == QR_OK && c.nsites && (t->stats & QR_TRANSFORM_ACT)) /* only what scale reads */
        st = measure(&c, calib, count, batch > 0 ? batch : 32);
    for (int k = 0; st == QR_OK && k < c.nsites; k++)
        st = rescale(&c, &c.sites[k], params);
    if (st == QR_OK) {
        run->rescaled = c.nsites;
        char ps[256] = "";
        for (int k = 0, at = 0; k < t->nparams && at < (int)sizeof ps - 40; k++)
            at += snprintf(ps + at, sizeof ps - (size_t)at, "%s%s = %g", k ? ", " : "", t->params[k].name,
                           t->params[k].kind == QR_CAL_FLOAT ? params[k].f : (double)params[k].i);
        if (c.nsites)
            add_note(run, "transform %s(%s) (%s): rescaled %d of the %d values it matched, channel factors %.3g to %.3g",
                     t->match.name, ps, t->match.loc, c.nsites, run->matched, run->s_min, run->s_max);
        else
            add_note(run, "transform %s(%s) (%s): rescaled none of the %d values it matched", t->match.name, ps,
                     t->match.loc, run->matched);
        if (run->nnotes > 1) { /* the summary first */
            char *sum = run->notes[run->nnotes - 1];
            memmove(run->notes + 1, run->notes, sizeof *run->notes * (size_t)(run->nnotes - 1));
            run->notes[0] = sum;
        }
    }
    for (int k = 0; k < c.nsites; k++) {
        free(c.sites[k].readers);
        free(c.sites[k].act);
    }
    free(c.sites);
    free(c.site_of);
    free(claimed);
    return st;
}
