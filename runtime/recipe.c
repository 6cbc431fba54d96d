#include "recipe.h"

#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gram.h"
#include "histogram.h"

/* ------------------------------------------------------------- imports */

static void rt_trap(qrl_rt *rt, int64_t code, const char *file, int64_t line, int64_t col, int64_t a, int64_t b)
{
    if (rt->failed)
        return;
    rt->failed = code;
    char what[256];
    switch (code) {
    case QRL_TRAP_INDEX:
        snprintf(what, sizeof what, "index %lld is out of bounds (length %lld)", (long long)a, (long long)b);
        break;
    case QRL_TRAP_DIVZERO: snprintf(what, sizeof what, "integer division by zero"); break;
    case QRL_TRAP_RANK:
        snprintf(what, sizeof what, "%lld indices for a tensor of rank %lld", (long long)a, (long long)b);
        break;
    case QRL_TRAP_HIST:
        if (a == 4) /* valid bins, no memory for them */
            snprintf(what, sizeof what, "out of memory for a %lld-bin histogram", (long long)b);
        else
            snprintf(what, sizeof what, "%s",
                     a == 1 ? "a histogram was filled with both add and add_abs"
                     : a == 2 ? "histograms of different kinds cannot be merged"
                              : "a histogram needs an even number of bins from 2 to 16777216");
        break;
    case QRL_TRAP_SHAPE:
        snprintf(what, sizeof what, "the tensor's dimension is %lld where the kernel's declared shape says %lld",
                 (long long)a, (long long)b);
        break;
    case QRL_TRAP_SHAPE_RANK:
        snprintf(what, sizeof what, "a tensor of rank %lld where the kernel's declared shape has %s%lld dimensions",
                 (long long)a, b < 0 ? "at least " : "", (long long)(b < 0 ? -b : b));
        break;
    case QRL_TRAP_TIME:
        snprintf(what, sizeof what, "recipe code ran longer than %.3g s (the limit --max-recipe-time sets)",
                 (double)a / 1000.0);
        break;
    default: snprintf(what, sizeof what, "out of memory"); break;
    }
    if (file)
        snprintf(rt->msg, sizeof rt->msg, "%s:%lld:%lld: runtime error: %s", file, (long long)line, (long long)col,
                 what);
    else
        snprintf(rt->msg, sizeof rt->msg, "runtime error: %s", what);
}

/* The minimum, maximum and largest magnitude of a calibration tensor (NaN ignored: a comparison
 * with NaN is false), in 16 lanes the compiler turns into vector min/max; the order the
 * elements are compared in does not change the result but for the sign of a zero. V(v) is what
 * is compared, KEEP(a, cur) whether a replaces the lane's current value. */
#define LANES 16
#define TENSOR_FOLD(NAME, INIT, V, KEEP)                                                                  \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static double NAME(const qrl_tview *x)    \
    {                                                                                                     \
        const float *d = x->data;                                                                         \
        float m[LANES];                                                                                   \
        for (int l = 0; l < LANES; l++)                                                                   \
            m[l] = INIT;                                                                                  \
        int64_t i = 0;                                                                                    \
        for (; i + LANES <= x->numel; i += LANES)                                                         \
            for (int l = 0; l < LANES; l++) {                                                             \
                float a = V(d[i + l]), cur = m[l];                                                        \
                m[l] = KEEP(a, cur) ? a : cur;                                                            \
            }                                                                                             \
        for (; i < x->numel; i++) {                                                                       \
            float a = V(d[i]), cur = m[0];                                                                \
            m[0] = KEEP(a, cur) ? a : cur;                                                                \
        }                                                                                                 \
        for (int l = 1; l < LANES; l++) {                                                                 \
            float a = m[l], cur = m[0];                                                                   \
            m[0] = KEEP(a, cur) ? a : cur;                                                                \
        }                                                                                                 \
        return m[0];                                                                                      \
    }
#define AS_IS(v) (v)
#define LESS(a, cur) ((a) < (cur))
#define MORE(a, cur) ((a) > (cur))

TENSOR_FOLD(fold_min, INFINITY, AS_IS, LESS)
TENSOR_FOLD(fold_max, -INFINITY, AS_IS, MORE)
TENSOR_FOLD(t_absmax, 0.0f, fabsf, MORE)

/* The tensor one observe on this thread is given and its range, when its caller had computed it
 * (qr_calib_observe_known): x.min() and x.max() of that tensor return it rather than reading it
 * twice more (the quantizer's SimQuant computes it for the report: three reads of every
 * activation in calibration were one). Observe cannot write its tensors (the checker refuses),
 * and the memo is set for one observe only: the tensor is changed after it (rounded in place). */
static _Thread_local struct {
    const void *data;
    int64_t numel;
    float lo, hi;
} known_range;

static double t_min(const qrl_tview *x)
{
    if (known_range.data && known_range.data == x->data && known_range.numel == x->numel)
        return known_range.lo;
    return fold_min(x);
}

static double t_max(const qrl_tview *x)
{
    if (known_range.data && known_range.data == x->data && known_range.numel == x->numel)
        return known_range.hi;
    return fold_max(x);
}

/* Streams a range read runs side by side (qr_f32_range, below) */
#define RANGE_STREAMS 4

/* The whole vectors d[0 .. nv * LANES) folded into the lanes l and h (min and max), as a fold's
 * lanes would take them after what they hold: the streams' lanes merged in after them in order,
 * keeping the earlier where two compare equal. Inlined into each of its callers' clones. */
static inline __attribute__((always_inline)) void range_vectors(const float *d, int64_t nv, float *lo, float *hi)
{
    float l[RANGE_STREAMS][LANES], h[RANGE_STREAMS][LANES];
    for (int s = 0; s < RANGE_STREAMS; s++)
        for (int k = 0; k < LANES; k++)
            l[s][k] = INFINITY, h[s][k] = -INFINITY;
    int64_t per = nv / RANGE_STREAMS;
    for (int64_t b = 0; b < per; b++)
        for (int s = 0; s < RANGE_STREAMS; s++) {
            const float *v = d + (s * per + b) * LANES;
            for (int k = 0; k < LANES; k++) {
                float a = v[k];
                l[s][k] = LESS(a, l[s][k]) ? a : l[s][k];
                h[s][k] = MORE(a, h[s][k]) ? a : h[s][k];
            }
        }
    for (int64_t b = RANGE_STREAMS * per; b < nv; b++) /* after the last quarter, in its stream */
        for (int k = 0; k < LANES; k++) {
            float a = d[b * LANES + k];
            l[RANGE_STREAMS - 1][k] = LESS(a, l[RANGE_STREAMS - 1][k]) ? a : l[RANGE_STREAMS - 1][k];
            h[RANGE_STREAMS - 1][k] = MORE(a, h[RANGE_STREAMS - 1][k]) ? a : h[RANGE_STREAMS - 1][k];
        }
    for (int s = 0; s < RANGE_STREAMS; s++)
        for (int k = 0; k < LANES; k++) {
            lo[k] = LESS(l[s][k], lo[k]) ? l[s][k] : lo[k];
            hi[k] = MORE(h[s][k], hi[k]) ? h[s][k] : hi[k];
        }
}

/* The folds' end: the tail d[from .. n) into lane 0, then the lanes into lane 0 in order. */
static inline __attribute__((always_inline)) void range_finish(const float *d, int64_t from, int64_t n, float *l,
                                                               float *h, float *lo, float *hi)
{
    for (int64_t i = from; i < n; i++) {
        float a = d[i];
        l[0] = LESS(a, l[0]) ? a : l[0];
        h[0] = MORE(a, h[0]) ? a : h[0];
    }
    for (int k = 1; k < LANES; k++) {
        l[0] = LESS(l[k], l[0]) ? l[k] : l[0];
        h[0] = MORE(h[k], h[0]) ? h[k] : h[0];
    }
    *lo = l[0];
    *hi = h[0];
}

/* fold_min and fold_max in one read: the same lanes and comparisons, so the same values (the sign
 * of a zero included), which is what lets known_range stand for them. Read as RANGE_STREAMS
 * streams, each over its quarter of the whole vectors (the last one's the vectors left over too),
 * with lanes of their own: four reads in flight instead of one, 10-30% faster on tensors beyond
 * L2 (calibration's SimQuant reads each activation through it, up to 43 MB). A lane of one fold
 * reads the quarters' values in order, so stream s's lane merged into stream 0's in order of s,
 * keeping the earlier where two compare equal (+0 and -0), ends on the value that fold's lane
 * ends on. */
__attribute__((target_clones("avx512f", "avx2", "default"))) void qr_f32_range(const float *d, int64_t n, float *lo,
                                                                               float *hi)
{
    float l[LANES], h[LANES];
    for (int k = 0; k < LANES; k++)
        l[k] = INFINITY, h[k] = -INFINITY;
    range_vectors(d, n / LANES, l, h);
    range_finish(d, n / LANES * LANES, n, l, h, lo, hi);
}

/* Whether the fold's result is decided by lanes m (min: less, max: more) that hold b, a bound no
 * value passes: b itself, once a lane holds it (a nonzero float equal to b is b, bit for bit);
 * a zero's sign is its first holder's in lane order, so for b = 0 lane 0 must hold it. */
static inline __attribute__((always_inline)) int range_decided(const float *m, float b)
{
    if (b == 0)
        return m[0] == 0;
    int hit = 0;
    for (int k = 0; k < LANES; k++)
        hit |= m[k] == b;
    return hit;
}

/* Vectors qr_f32_range_within reads before its first look at whether both bounds are held (64
 * KiB), doubled after each look: a look per few percent of what was read, and the last blocks
 * long enough for the four streams. */
#define RANGE_FIRST_BLOCK 1024

__attribute__((target_clones("avx512f", "avx2", "default"))) void qr_f32_range_within(const float *d, int64_t n,
                                                                                      float blo, float bhi,
                                                                                      float *lo, float *hi)
{
    float l[LANES], h[LANES];
    for (int k = 0; k < LANES; k++)
        l[k] = INFINITY, h[k] = -INFINITY;
    int64_t nv = n / LANES, at = 0, block = RANGE_FIRST_BLOCK;
    while (at < nv) {
        int64_t m = nv - at < block ? nv - at : block;
        range_vectors(d + at * LANES, m, l, h);
        at += m;
        block *= 2;
        if (at < nv && range_decided(l, blo) && range_decided(h, bhi)) { /* nothing after can change it */
            range_finish(d, 0, 0, l, h, lo, hi);
            return;
        }
    }
    range_finish(d, nv * LANES, n, l, h, lo, hi);
}

static double t_sum(const qrl_tview *x)
{
    const float *d = x->data;
    double s = 0;
    for (int64_t i = 0; i < x->numel; i++)
        if (!isnan(d[i]))
            s += d[i];
    return s;
}

/* The k-th smallest of v[0 .. n) (Hoare's selection): v is reordered so that v[k] is it, with
 * nothing larger before it and nothing smaller after. */
static void select_kth(float *v, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

static double t_quantile(qrl_rt *rt, const qrl_tview *x, double q)
{
    const float *d = x->data;
    float *v = malloc(sizeof *v * (size_t)(x->numel > 0 ? x->numel : 1));
    if (!v) {
        rt_trap(rt, QRL_TRAP_NOMEM, "", 0, 0, 0, 0);
        return 0;
    }
    int64_t n = 0;
    for (int64_t i = 0; i < x->numel; i++)
        if (!isnan(d[i]))
            v[n++] = d[i];
    double r = 0;
    if (n > 0) {
        q = q > 0 ? (q < 1 ? q : 1) : 0; /* NaN too: 0 */
        double pos = q * (double)(n - 1), t = pos - floor(pos);
        int64_t k = (int64_t)floor(pos);
        select_kth(v, n, k);
        double a = v[k], b = a;
        for (int64_t i = k + 1; i < n; i++) /* the next value up: the smallest after the k-th */
            b = i == k + 1 || v[i] < b ? v[i] : b;
        /* numpy's lerp: from the nearer end, so that t = 1 gives b exactly */
        r = t == 0 ? a : t < 0.5 ? a + (b - a) * t : b - (b - a) * (1 - t); /* an exact position: its value, inf too */
    }
    free(v);
    return r;
}

static int64_t t_broadcast_index(const qrl_tview *a, const qrl_tview *y, int64_t i)
{
    int64_t off = 0, stride = 1;
    if (a->rank > y->rank)
        return -1;
    /* a of y's shape (an operand the integer graph expanded: intgraph.c) is read at i itself, without
     * the divisions below (a kernel with no same-shape loop of its own, qmul_wide) */
    if (a->numel == y->numel && i >= 0 && i < y->numel) {
        int64_t d = 0, lead = y->rank - a->rank;
        while (d < a->rank && a->dims[d] == y->dims[lead + d])
            d++;
        if (d == a->rank)
            return i;
    }
    for (int64_t d = y->rank - 1; d >= 0; d--) {
        int64_t yd = y->dims[d], coord = yd > 0 ? i % yd : 0;
        i = yd > 0 ? i / yd : 0;
        int64_t ad = d - (y->rank - a->rank);
        if (ad < 0)
            continue;
        if (a->dims[ad] == yd)
            off += coord * stride;
        else if (a->dims[ad] != 1)
            return -1;
        stride *= a->dims[ad];
    }
    return off;
}

/* State allocations are chained to the calibrator instance that owns them. */
typedef struct alloc_node {
    struct alloc_node *next;
    int is_hist; /* 1 a hist_box, 2 a gram (with its factor), 0 plain memory */
    _Alignas(16) unsigned char mem[];
} alloc_node;

struct qr_calib {
    const qr_cal_desc *d;
    qrl_scalar *params;
    void *state;
    alloc_node *allocs;
    size_t bytes; /* what it holds: its state, its allocations and their histograms' bins */
};

static void *track(qrl_rt *rt, size_t bytes, int is_hist)
{
    qr_calib *c = rt->owner;
    alloc_node *n = c ? calloc(1, sizeof *n + bytes) : NULL;
    if (!n) {
        rt_trap(rt, QRL_TRAP_NOMEM, NULL, 0, 0, 0, 0);
        return NULL;
    }
    n->is_hist = is_hist;
    n->next = c->allocs;
    c->allocs = n;
    c->bytes += sizeof *n + bytes;
    return n->mem;
}

static void *rt_state_alloc(qrl_rt *rt, int64_t bytes)
{
    if (bytes < 0 || bytes > ((int64_t)1 << 32)) {
        rt_trap(rt, QRL_TRAP_NOMEM, NULL, 0, 0, 0, 0);
        return NULL;
    }
    return track(rt, (size_t)bytes, 0);
}

/* A histogram's kind (|x| or signed) is set by its first add. */
typedef struct hist_box {
    qr_hist h;
    int kind; /* 0 unknown, 1 signed, 2 abs */
} hist_box;

static void *rt_hist_new(qrl_rt *rt, int64_t bins)
{
    hist_box *b = track(rt, sizeof *b, 1);
    if (!b)
        return NULL;
    qr_error e;
    if (qr_hist_init(&b->h, bins, 0, &e) != QR_OK) {
        int valid = bins >= 2 && bins <= QR_HIST_MAX_BINS && bins % 2 == 0;
        rt_trap(rt, QRL_TRAP_HIST, NULL, 0, 0, valid ? 4 : 3, bins);
        return NULL;
    }
    ((qr_calib *)rt->owner)->bytes += sizeof *b->h.count * (size_t)bins;
    return b;
}

static void rt_hist_add(qrl_rt *rt, void *h, const qrl_tview *x, int64_t is_abs, int64_t from, int64_t to)
{
    hist_box *b = h;
    if (!b)
        return;
    if (to == INT64_MIN) /* h.add(x): all of it */
        to = x->numel;
    if (from < 0 || from > x->numel || to < from || to > x->numel) {
        rt_trap(rt, QRL_TRAP_INDEX, NULL, 0, 0, from < 0 || from > x->numel ? from : to, x->numel);
        return;
    }
    int kind = is_abs ? 2 : 1;
    if (b->kind && b->kind != kind) {
        rt_trap(rt, QRL_TRAP_HIST, NULL, 0, 0, 1, 0);
        return;
    }
    b->kind = kind;
    b->h.is_abs = is_abs != 0;
    qr_hist_add_f32(&b->h, (const float *)x->data + from, to - from);
}

static void rt_hist_merge(qrl_rt *rt, void *h, const void *other)
{
    hist_box *b = h;
    const hist_box *o = other;
    if (!b || !o || !o->kind)
        return;
    if (b->kind && b->kind != o->kind) {
        rt_trap(rt, QRL_TRAP_HIST, NULL, 0, 0, 2, 0);
        return;
    }
    b->kind = o->kind;
    b->h.is_abs = o->h.is_abs;
    qr_error e;
    if (qr_hist_merge(&b->h, &o->h, &e) != QR_OK)
        rt_trap(rt, QRL_TRAP_HIST, NULL, 0, 0, 2, 0);
}

/* A failure with its own message (no source position: the quantizer names the layer). */
static void rt_fail(qrl_rt *rt, const qr_error *e)
{
    if (rt->failed)
        return;
    rt->failed = QRL_TRAP_NOMEM;
    snprintf(rt->msg, sizeof rt->msg, "%s", e->msg);
}

/* A gram and the inverse factor its solve asked for (freed with the instance). */
typedef struct gram_box {
    qr_gram g;
    qrl_tview factor;
    double *u;
} gram_box;

static void *rt_gram_new(qrl_rt *rt) { return track(rt, sizeof(gram_box), 2); }

static void rt_gram_add(qrl_rt *rt, void *g, const qrl_tview *x)
{
    qr_error e;
    if (g && x->numel && qr_gram_add(&((gram_box *)g)->g, x->data, x->numel, x->rank ? x->dims[x->rank - 1] : 1, &e) != QR_OK)
        rt_fail(rt, &e);
}

static void rt_gram_merge(qrl_rt *rt, void *g, const void *other)
{
    qr_error e;
    if (g && other && qr_gram_merge(&((gram_box *)g)->g, &((const gram_box *)other)->g, &e) != QR_OK)
        rt_fail(rt, &e);
}

static int64_t rt_gram_dim(const void *g) { return g ? ((const gram_box *)g)->g.k : 0; }
static double rt_gram_rows(const void *g) { return g ? ((const gram_box *)g)->g.rows : 0; }

static double rt_gram_at(qrl_rt *rt, const void *g, int64_t i, int64_t j)
{
    const qr_gram *m = g ? &((const gram_box *)g)->g : NULL;
    int64_t k = m ? m->k : 0;
    if (i < 0 || i >= k || j < 0 || j >= k) {
        rt_trap(rt, QRL_TRAP_INDEX, NULL, 0, 0, i < 0 || i >= k ? i : j, k);
        return 0;
    }
    return m->h[i * k + j];
}

static const qrl_tview *rt_gram_factor(qrl_rt *rt, const void *g, double c, double lambda)
{
    gram_box *b = (gram_box *)g; /* the factor is the instance's memory, not its state */
    qr_error e;
    if (!b) {
        rt_trap(rt, QRL_TRAP_NOMEM, NULL, 0, 0, 0, 0);
        return NULL;
    }
    int64_t k = b->g.k;
    free(b->u);
    b->u = k > 0 ? malloc(sizeof *b->u * (size_t)(k * k)) : NULL;
    if (k > 0 && !b->u) {
        rt_trap(rt, QRL_TRAP_NOMEM, NULL, 0, 0, 0, 0);
        return NULL;
    }
    if (qr_gram_inverse_factor(&b->g, c, lambda, b->u, &e) != QR_OK) {
        rt_fail(rt, &e);
        return NULL;
    }
    memset(&b->factor, 0, sizeof b->factor);
    b->factor.data = b->u;
    b->factor.numel = k * k;
    b->factor.rank = 2;
    b->factor.dims[0] = b->factor.dims[1] = k;
    return &b->factor;
}

#define HIST(h) (&((const hist_box *)(h))->h)
static double rt_hist_quantile(const void *h, double q) { return h ? qr_hist_quantile(HIST(h), q) : 0; }
static double rt_hist_bin(const void *h, int64_t i) { return h ? qr_hist_bin(HIST(h), i) : 0; }
static double rt_hist_edge(const void *h, int64_t i) { return h ? qr_hist_edge(HIST(h), i) : 0; }
static double rt_hist_count(const void *h) { return h ? HIST(h)->total : 0; }
static double rt_hist_lo(const void *h) { return h ? qr_hist_lo(HIST(h)) : 0; }
static double rt_hist_hi(const void *h) { return h ? qr_hist_hi(HIST(h)) : 0; }
static double rt_hist_width(const void *h) { return h ? qr_hist_width(HIST(h)) : 0; }
static int64_t rt_hist_bins(const void *h) { return h ? HIST(h)->bins : 0; }
static double rt_hist_min(const void *h) { return h ? HIST(h)->min : INFINITY; }
static double rt_hist_max(const void *h) { return h ? HIST(h)->max : -INFINITY; }

/* Whether (kind, elem) is a type a function can take (or, with result, return). */
static int param_type_ok(int64_t kind, int64_t elem, int result)
{
    int scalar = elem == QR_BOOL || elem == QR_I8 || elem == QR_U8 || elem == QR_I16 || elem == QR_U16 ||
                 elem == QR_I32 || elem == QR_I64 || elem == QR_F32 || elem == QR_F64;
    switch (kind) {
    case QR_PARAM_SCALAR:
    case QR_PARAM_ARRAY: return scalar;
    case QR_PARAM_TENSOR: return scalar && elem != QR_BOOL;
    case QR_PARAM_QTYPE:
    case QR_PARAM_QPARAMS: return elem == QR_UNDEF;
    case QR_PARAM_VOID: return result && elem == QR_UNDEF;
    default: return 0;
    }
}

static void reg_fn(qrl_module *m, const char *name, void *fn, int64_t is_kernel, int64_t result_kind,
                   int64_t result_elem)
{
    if (is_kernel == 2) { /* a kernel's generic entry, registered right after it */
        for (int i = m->nfns - 1; i >= 0; i--)
            if (m->fns[i].is_kernel && !strcmp(m->fns[i].name, name)) {
                m->fns[i].call = (qrl_kernel_call_fn)fn;
                return;
            }
        m->bad = 1;
        return;
    }
    /* a kernel writes its outputs: it returns nothing */
    if (is_kernel < 0 || is_kernel > 1 || !param_type_ok(result_kind, result_elem, 1) ||
        (is_kernel && result_kind != QR_PARAM_VOID)) {
        m->bad = 1;
        return;
    }
    qr_fn_desc *v = realloc(m->fns, sizeof *v * (size_t)(m->nfns + 1));
    if (!v) {
        m->bad = 1;
        return;
    }
    m->fns = v;
    m->fns[m->nfns++] = (qr_fn_desc){name, fn, (int)is_kernel, NULL,
                                     (qr_param_desc){NULL, (qr_param_kind)result_kind, (qr_dtype)result_elem},
                                     NULL, 0, 0, -1, 0, 0, NULL, NULL, 0, UINT64_MAX, 0, 0, 0};
}

static void reg_fn_param(qrl_module *m, const char *name, int64_t kind, int64_t elem)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    /* a lowering passes a kernel numbers, arrays and tensors: a qtype's room would be a double's */
    int record = kind == QR_PARAM_QTYPE || kind == QR_PARAM_QPARAMS;
    if (!k || !param_type_ok(kind, elem, 0) || (k->is_kernel && record) || k->nparams >= QRL_MAX_PARAMS) {
        m->bad = 1;
        return;
    }
    qr_param_desc *v = realloc(k->params, sizeof *v * (size_t)(k->nparams + 1));
    if (!v) {
        m->bad = 1;
        return;
    }
    k->params = v;
    k->params[k->nparams++] = (qr_param_desc){name, (qr_param_kind)kind, (qr_dtype)elem};
}

static void reg_tile_axis(qrl_module *m, int64_t param, int64_t value)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1 || param >= k->nparams || param < -1) {
        m->bad = 1;
        return;
    }
    k->is_tile = 1;
    k->tile_axis_param = (int)param;
    k->tile_axis = value;
}

static void reg_pointwise(qrl_module *m)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1) {
        m->bad = 1;
        return;
    }
    k->is_pointwise = 1;
}

static void reg_param_reads(qrl_module *m, int64_t mask)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1) {
        m->bad = 1;
        return;
    }
    k->param_reads = (uint64_t)mask;
}

static void reg_fill_reads(qrl_module *m, int64_t uses, int64_t elems)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1) {
        m->bad = 1;
        return;
    }
    k->fill_known = 1;
    k->fill_uses = (uint64_t)uses;
    k->fill_elems = (uint64_t)elems;
}

static void reg_vector_epilogue(qrl_module *m, const char *prog)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1 || !prog) {
        m->bad = 1;
        return;
    }
    k->vector_epilogue = prog;
}

static void reg_out_dim(qrl_module *m, int64_t kind, int64_t param, int64_t at)
{
    qr_fn_desc *k = m->nfns > 0 ? &m->fns[m->nfns - 1] : NULL;
    if (!k || k->is_kernel != 1 || kind < QR_ODIM_REST || kind > QR_ODIM_DIM || k->n_out_dims >= 4 * QR_MAX_DIMS ||
        (kind != QR_ODIM_INT && (param < 0 || param >= k->nparams || k->params[param].kind != QR_PARAM_TENSOR))) {
        m->bad = 1;
        return;
    }
    qr_out_dim *v = realloc(k->out_dims, sizeof *v * (size_t)(k->n_out_dims + 1));
    if (!v) {
        m->bad = 1;
        return;
    }
    k->out_dims = v;
    k->out_dims[k->n_out_dims++] = (qr_out_dim){(qr_out_dim_kind)kind, (int)param, at};
}

static void reg_cal(qrl_module *m, const char *name, int64_t nparams, int64_t state_bytes, void *defaults, void *init,
                    void *observe, void *merge, void *solve)
{
    qr_cal_desc *v = realloc(m->cals, sizeof *v * (size_t)(m->ncals + 1));
    if (!v) {
        m->bad = 1;
        return;
    }
    m->cals = v;
    qr_cal_desc *d = &m->cals[m->ncals++];
    memset(d, 0, sizeof *d);
    d->name = name;
    d->state_bytes = state_bytes;
    d->defaults = (qrl_cal_defaults_fn)defaults;
    d->init = (qrl_cal_init_fn)init;
    d->observe = (qrl_cal_observe_fn)observe;
    d->merge = (qrl_cal_merge_fn)merge;
    d->solve = (qrl_cal_solve_fn)solve;
    d->params = calloc((size_t)nparams + 1, sizeof *d->params);
    d->max_params = nparams > 0 && nparams < INT_MAX ? (int)nparams : 0;
    if (!d->params)
        m->bad = 1;
}

static void reg_layer_cal(qrl_module *m, const char *cal)
{
    qr_cal_desc *d = m->ncals ? &m->cals[m->ncals - 1] : NULL;
    if (!d || strcmp(d->name, cal))
        m->bad = 1;
    else
        d->layer = 1;
}

static void reg_state(qrl_module *m, const char *cal, int64_t kind, int64_t at, int64_t elem_bytes)
{
    qr_cal_desc *d = m->ncals ? &m->cals[m->ncals - 1] : NULL;
    int64_t size = kind == QR_STATE_ARRAY ? 16 : 8;
    if (!d || strcmp(d->name, cal) || kind < QR_STATE_SCALAR || kind > QR_STATE_GRAM || at < 0 ||
        at + size > d->state_bytes || elem_bytes < 0 || elem_bytes > 8) {
        m->bad = 1;
        return;
    }
    qr_state_field *v = realloc(d->fields, sizeof *v * (size_t)(d->nfields + 1));
    if (!v) {
        m->bad = 1;
        return;
    }
    d->fields = v;
    d->fields[d->nfields++] = (qr_state_field){(qr_state_kind)kind, at, elem_bytes};
}

static void reg_param(qrl_module *m, const char *cal, const char *name, int64_t kind)
{
    for (int i = 0; i < m->ncals; i++)
        if (!strcmp(m->cals[i].name, cal) && m->cals[i].params) {
            if (m->cals[i].nparams >= m->cals[i].max_params) { /* more than add_calibrator declared */
                m->bad = 1;
                return;
            }
            if (kind < QR_CAL_INT || kind > QR_CAL_BOOL)
                break;
            m->cals[i].params[m->cals[i].nparams++] = (qr_cal_param){name, (qr_cal_param_kind)kind};
            return;
        }
    m->bad = 1;
}

/* ---------------------------------------------------- pattern predicates */

static const qr_value *mval(const qrl_match *mt, int64_t v)
{
    return mt && v >= 0 && v < mt->nvalues ? mt->values[v] : NULL;
}

static int64_t m_rank(const qrl_match *mt, int64_t v)
{
    const qr_value *x = mval(mt, v);
    return x ? x->t.ndim : -1;
}

static int64_t m_dim(const qrl_match *mt, int64_t v, int64_t axis)
{
    const qr_value *x = mval(mt, v);
    if (!x || x->t.ndim < 0)
        return -1;
    if (axis < 0)
        axis += x->t.ndim;
    return axis >= 0 && axis < x->t.ndim ? x->t.dims[axis] : -1;
}

static double m_scalar(const qrl_match *mt, int64_t v)
{
    const qr_value *x = mval(mt, v);
    if (!x || !x->is_const || qr_tensor_numel(&x->t) != 1 || !x->t.data)
        return NAN;
    return qr_get_f64(x->t.data, x->t.dtype, 0);
}

static int64_t m_const(const qrl_match *mt, int64_t v)
{
    const qr_value *x = mval(mt, v);
    return x && x->is_const;
}

static int64_t m_present(const qrl_match *mt, int64_t v)
{
    return mval(mt, v) != NULL;
}

static int64_t m_op_is(const qrl_match *mt, int64_t v, const char *op)
{
    const qr_value *x = mval(mt, v);
    return x && x->producer && strcmp(x->producer->op, op) == 0;
}

/* v's readers that are op (domain ai.onnx), and the others, counted. */
static void m_readers(const qrl_match *mt, const qr_value *x, const char *op, int *same, int *other)
{
    *same = *other = 0;
    for (int i = 0; i < mt->g->n_nodes; i++) {
        const qr_node *n = mt->g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++)
            if (n->in[j] == x) {
                if (strcmp(n->op, op) || n->domain[0])
                    ++*other;
                else
                    ++*same;
                break;
            }
    }
}

static int64_t m_read_by(const qrl_match *mt, int64_t v, const char *op)
{
    const qr_value *x = mval(mt, v);
    int same, other;
    if (!x || x->is_output)
        return 0;
    m_readers(mt, x, op, &same, &other);
    return same > 0 && other == 0;
}

static int64_t m_feeds(const qrl_match *mt, int64_t v, const char *op)
{
    const qr_value *x = mval(mt, v);
    int same, other;
    if (!x)
        return 0;
    m_readers(mt, x, op, &same, &other);
    return same > 0;
}

static int64_t m_dtype_is(const qrl_match *mt, int64_t v, const char *dtype)
{
    const qr_value *x = mval(mt, v);
    return x && strcmp(qr_dtype_name(x->t.dtype), dtype) == 0;
}

/* The node whose attributes v names: v's producer, or (v = -1) the node an affine rule is asked about. */
static const qr_node *mnode(const qrl_match *mt, int64_t v)
{
    if (v == -1)
        return mt->node;
    const qr_value *x = mval(mt, v);
    return x ? x->producer : NULL;
}

static int64_t m_attr_int(const qrl_match *mt, int64_t v, const char *name, int64_t def)
{
    const qr_node *n = mnode(mt, v);
    return n ? qr_attr_i(n, name, def) : def;
}

static double m_attr_float(const qrl_match *mt, int64_t v, const char *name, double def)
{
    const qr_node *n = mnode(mt, v);
    return n ? qr_attr_f(n, name, (float)def) : def;
}

static int64_t m_attr_str_is(const qrl_match *mt, int64_t v, const char *name, const char *def, const char *lit)
{
    const qr_node *n = mnode(mt, v);
    return strcmp(n ? qr_attr_s(n, name, def) : def, lit) == 0;
}

static qrl_array *m_attr_ints(const qrl_match *mt, int64_t v, const char *name)
{
    static qrl_array none; /* read-only for JIT code: len 0 */
    const qr_node *n = mnode(mt, v);
    const int64_t *vals = NULL;
    int cnt = n ? qr_attr_ints(n, name, &vals) : 0;
    if (!mt->arrays || !mt->narrays || *mt->narrays < 0 || cnt <= 0)
        return &none;
    /* the same attribute read again (a body run over every integer) keeps its slot */
    for (int i = 0; i < *mt->narrays; i++)
        if (mt->arrays[i].data == (void *)vals && mt->arrays[i].len == cnt)
            return &mt->arrays[i];
    if (*mt->narrays >= QRL_MATCH_ARRAYS) { /* no slot is overwritten: an error (qr_match_status) */
        *mt->narrays = -1;
        return &none;
    }
    qrl_array *a = &mt->arrays[(*mt->narrays)++];
    *a = (qrl_array){(void *)vals, cnt};
    return a;
}

qr_status qr_match_status(const qrl_match *mt, qr_error *e)
{
    if (mt->narrays && *mt->narrays < 0)
        return qr_errorf(e, "reads more than %d int-list attributes (attr_ints) at once", QRL_MATCH_ARRAYS);
    return QR_OK;
}

void qr_aff_view_init(qr_aff_view *v, const qr_graph *g, const qr_node *n)
{
    memset(v, 0, sizeof *v);
    int k = 0;
    for (int j = 0; j < n->n_in && k < QRL_AFFINE_MAX_INPUTS; j++) /* all a rule can name */
        v->values[k++] = n->in[j];
    v->values[k++] = n->n_out > 0 ? n->out[0] : NULL;
    v->mt = (qrl_match){g, v->values, k, n, v->arrays, &v->narrays};
}

/* ------------------------------------------- patterns, affine rules, recipes */

/* Grows *v (of *n elements of size sz) by one zeroed element; NULL on OOM (module marked bad). */
static void *grow1(qrl_module *m, void **v, int *n, size_t sz)
{
    char *p = realloc(*v, sz * (size_t)(*n + 1));
    if (!p) {
        m->bad = 1;
        return NULL;
    }
    *v = p;
    memset(p + sz * (size_t)*n, 0, sz);
    return p + sz * (size_t)(*n)++;
}

/* A pattern, or a transform's match (names are unique across both: the checker says so). */
static qr_pattern *find_pattern(qrl_module *m, const char *name)
{
    for (int i = 0; i < m->npatterns; i++)
        if (!strcmp(m->patterns[i].name, name))
            return &m->patterns[i];
    for (int i = 0; i < m->ntransforms; i++)
        if (!strcmp(m->transforms[i].match.name, name))
            return &m->transforms[i].match;
    m->bad = 1;
    return NULL;
}

static qr_recipe *find_recipe(qrl_module *m, const char *name)
{
    for (int i = 0; i < m->nrecipes; i++)
        if (!strcmp(m->recipes[i].name, name))
            return &m->recipes[i];
    m->bad = 1;
    return NULL;
}

static void reg_pattern(qrl_module *m, const char *name, void *where, const char *numerics, int64_t priority,
                        const char *loc)
{
    qr_pattern *p = grow1(m, (void **)&m->patterns, &m->npatterns, sizeof *p);
    if (p) {
        p->name = name;
        p->loc = loc ? loc : "";
        p->where = (qrl_where_fn)where;
        p->numerics = numerics ? numerics : "";
        p->priority = (int)priority;
    }
}

const char *qr_role_name(qr_role_kind r)
{
    static const char *const names[QR_ROLE_COUNT] = {"", "activation", "output", "weight", "bias", "same", "real", "dynamic"};
    return (unsigned)r < QR_ROLE_COUNT ? names[r] : "";
}

static void reg_pattern_value(qrl_module *m, const char *pattern, const char *name, int64_t role, int64_t axis,
                              int64_t a, int64_t b)
{
    if (role < QR_ROLE_NONE || role >= QR_ROLE_COUNT) {
        m->bad = 1;
        return;
    }
    qr_pattern *p = find_pattern(m, pattern);
    qr_pat_value *v = p ? grow1(m, (void **)&p->values, &p->nvalues, sizeof *v) : NULL;
    if (v)
        *v = (qr_pat_value){name, (qr_role_kind)role, (int)axis, (int)a, (int)b};
}

static void reg_pattern_node(qrl_module *m, const char *pattern, int64_t out, const char *ops)
{
    qr_pattern *p = find_pattern(m, pattern);
    qr_pat_node *n = p ? grow1(m, (void **)&p->nodes, &p->nnodes, sizeof *n) : NULL;
    if (n)
        *n = (qr_pat_node){(int)out, ops, NULL, 0};
}

static void reg_pattern_node_input(qrl_module *m, const char *pattern, int64_t value, int64_t optional)
{
    qr_pattern *p = find_pattern(m, pattern);
    qr_pat_node *n = p && p->nnodes > 0 ? &p->nodes[p->nnodes - 1] : NULL;
    if (!n || value < -1 || value >= p->nvalues || (optional != 0 && optional != 1)) {
        m->bad = 1;
        return;
    }
    qr_pat_input *in = grow1(m, (void **)&n->inputs, &n->ninputs, sizeof *in);
    if (in)
        *in = (qr_pat_input){(int)value, (int)optional};
}

static void reg_pattern_lower(qrl_module *m, const char *pattern, const char *kernel, int64_t out, void *consts)
{
    qr_pattern *p = find_pattern(m, pattern);
    qr_pat_lower *l = p ? grow1(m, (void **)&p->lowers, &p->nlowers, sizeof *l) : NULL;
    if (!l)
        return;
    *l = (qr_pat_lower){kernel, NULL, 0, (int)out};
    p->consts = (qrl_consts_fn)consts;
}

static void reg_pattern_lower_arg(qrl_module *m, const char *pattern, int64_t kind, int64_t index)
{
    qr_pattern *p = find_pattern(m, pattern);
    qr_pat_lower *l = p && p->nlowers > 0 ? &p->lowers[p->nlowers - 1] : NULL;
    if (!l || (kind != QR_LOWER_VALUE && kind != QR_LOWER_CONST) || index < 0 || index > INT32_MAX ||
        (kind == QR_LOWER_VALUE && index >= p->nvalues)) {
        m->bad = 1;
        return;
    }
    qr_lower_arg *a = grow1(m, (void **)&l->args, &l->nargs, sizeof *a);
    if (a)
        *a = (qr_lower_arg){(qr_lower_arg_kind)kind, (int)index};
}

static void reg_affine(qrl_module *m, const char *op, int64_t ninputs, int64_t kind, void *where, void *qparams,
                       void *elem, void *table, int64_t in_f32, const char *loc, const char *cond)
{
    if (kind < QR_AFF_SAME || kind > QR_AFF_REQUANTIZE) {
        m->bad = 1;
        return;
    }
    qr_affine *a = grow1(m, (void **)&m->affines, &m->naffines, sizeof *a);
    if (a)
        *a = (qr_affine){op,
                         (int)ninputs,
                         (qr_affine_kind)kind,
                         (qrl_where_fn)where,
                         (qrl_aff_qparams_fn)qparams,
                         (qrl_aff_elem_fn)elem,
                         (qrl_aff_table_fn)table,
                         (int)in_f32,
                         loc ? loc : "",
                         cond ? cond : ""};
}

static void reg_transform(qrl_module *m, const char *name, int64_t nparams, void *defaults, void *where, void *scale,
                          const char *loc, int64_t stats)
{
    if (nparams < 0 || nparams > QRL_MAX_PARAMS || !defaults || !scale || stats < 0 || stats > QR_TRANSFORM_STATS_ALL ||
        !!(stats & QR_TRANSFORM_CORRECTS) + !!(stats & QR_TRANSFORM_ROUNDS) + !!(stats & QR_TRANSFORM_SHIFTS) > 1) {
        m->bad = 1;
        return;
    }
    qr_transform *t = grow1(m, (void **)&m->transforms, &m->ntransforms, sizeof *t);
    if (!t)
        return;
    t->match = (qr_pattern){.name = name, .loc = loc ? loc : "", .where = (qrl_where_fn)where, .numerics = "",
                            .priority = -1};
    t->defaults = (qrl_cal_defaults_fn)defaults;
    if (stats & QR_TRANSFORM_ROUNDS)
        t->flip = (qrl_transform_flip_fn)scale;
    else if (stats & QR_TRANSFORM_CORRECTS)
        t->bias = (qrl_transform_bias_fn)scale;
    else if (stats & QR_TRANSFORM_SHIFTS)
        t->shift = (qrl_transform_shift_fn)scale;
    else
        t->scale = (qrl_transform_scale_fn)scale;
    t->stats = (int)stats;
    t->max_params = (int)nparams;
    t->params = calloc((size_t)nparams + 1, sizeof *t->params);
    if (!t->params)
        m->bad = 1;
}

static void reg_transform_param(qrl_module *m, const char *transform, const char *name, int64_t kind)
{
    for (int i = 0; i < m->ntransforms; i++) {
        qr_transform *t = &m->transforms[i];
        if (strcmp(t->match.name, transform) || !t->params)
            continue;
        if (t->nparams >= t->max_params || kind < QR_CAL_INT || kind > QR_CAL_BOOL)
            break;
        t->params[t->nparams++] = (qr_cal_param){name, (qr_cal_param_kind)kind};
        return;
    }
    m->bad = 1;
}

const qr_transform *qr_module_transform(const qrl_module *m, const char *name)
{
    for (int i = 0; m && name && i < m->ntransforms; i++)
        if (!strcmp(m->transforms[i].match.name, name))
            return &m->transforms[i];
    return NULL;
}

static void reg_recipe(qrl_module *m, const char *name, void *fallback, int64_t on_outputs)
{
    qr_recipe *r = grow1(m, (void **)&m->recipes, &m->nrecipes, sizeof *r);
    if (r) {
        r->name = name;
        r->fallback = (qrl_fallback_fn)fallback;
        r->fallback_on_outputs = (int)on_outputs;
    }
}

const qr_setting_def qr_setting_defs[QR_NSETTINGS] = {
#define QR_SETTING_DEF(id, key, kind, lo, hi, choices) [QR_SET_##id] = {key, kind, lo, hi, choices},
    QR_SETTINGS(QR_SETTING_DEF)
#undef QR_SETTING_DEF
};

int qr_setting_find(const char *key)
{
    for (int i = 0; i < QR_NSETTINGS; i++)
        if (!strcmp(qr_setting_defs[i].key, key))
            return i;
    return -1;
}

int qr_setting_choice(qr_setting_id id, const char *name)
{
    const char *c = qr_setting_defs[id].choices;
    size_t n = strlen(name);
    for (; c && *c; c += strcspn(c, " "), c += *c == ' ') /* each word of the list */
        if (n && !strncmp(c, name, n) && (c[n] == ' ' || !c[n]))
            return 1;
    return 0;
}

static void reg_setting(qrl_module *m, const char *recipe, const char *key, const char *type, int64_t mods,
                        const char *calibrator, void *args, double value)
{
    const int64_t all = QR_MOD_SYMMETRIC | QR_MOD_ASYMMETRIC | QR_MOD_NARROW | QR_MOD_PER_CHANNEL | QR_MOD_PER_TENSOR;
    int id = qr_setting_find(key);
    if (mods < 0 || (mods & ~all) || id < 0) {
        m->bad = 1;
        return;
    }
    qr_recipe *r = find_recipe(m, recipe);
    qr_setting *s = r ? grow1(m, (void **)&r->settings, &r->nsettings, sizeof *s) : NULL;
    if (s)
        *s = (qr_setting){.id = (qr_setting_id)id, .value = value, .key = key, .type = type, .calibrator = calibrator,
                          .mods = (unsigned)mods, .args = (qrl_args_fn)args};
}

static void reg_setting_arg(qrl_module *m, const char *recipe, const char *name)
{
    qr_recipe *r = find_recipe(m, recipe);
    qr_setting *s = r && r->nsettings > 0 ? &r->settings[r->nsettings - 1] : NULL;
    if (!s || s->nargs >= QRL_MAX_PARAMS) {
        m->bad = 1;
        return;
    }
    const char **v = grow1(m, (void **)&s->argnames, &s->nargs, sizeof *v);
    if (v)
        *v = name;
}

static void reg_setting_target(qrl_module *m, const char *recipe, const char *name, int64_t is_node)
{
    qr_recipe *r = find_recipe(m, recipe);
    qr_setting *s = r && r->nsettings > 0 ? &r->settings[r->nsettings - 1] : NULL;
    if (!s || !name || (is_node != 0 && is_node != 1)) {
        m->bad = 1;
        return;
    }
    int n = s->ntargets;
    const char **v = grow1(m, (void **)&s->targets, &s->ntargets, sizeof *v);
    if (!v)
        return;
    *v = name;
    unsigned char *k = realloc(s->target_is_node, (size_t)n + 1);
    if (!k) {
        m->bad = 1;
        return;
    }
    s->target_is_node = k;
    k[n] = (unsigned char)is_node;
}

static void reg_use(qrl_module *m, const char *recipe, const char *name)
{
    qr_recipe *r = find_recipe(m, recipe);
    const char **u = r ? grow1(m, (void **)&r->use, &r->nuse, sizeof *u) : NULL;
    if (u)
        *u = name;
}

/* Loop iterations between looks at the clock: a few milliseconds of the slowest loops. */
#define QR_FUEL (1 << 20)

static double recipe_time_limit_ms = 60000;

void qr_set_recipe_time_limit(double seconds)
{
    recipe_time_limit_ms = seconds > 0 ? seconds * 1000.0 : 0;
}

static double clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void rt_refuel(qrl_rt *rt, const char *file, int64_t line, int64_t col)
{
    if (rt->deadline_ms > 0 && clock_ms() > rt->deadline_ms) {
        rt_trap(rt, QRL_TRAP_TIME, file, line, col, (int64_t)recipe_time_limit_ms, 0);
        return;
    }
    rt->fuel = QR_FUEL;
}

static const qrl_imports imports = {
    .abi = QR_RECIPE_ABI,
    .trap = rt_trap,
    .refuel = rt_refuel,
    .exp = exp,
    .log = log,
    .log2 = log2,
    .tanh = tanh,
    .erf = erf,
    .pow = pow,
    .tensor_min = t_min,
    .tensor_max = t_max,
    .tensor_absmax = t_absmax,
    .tensor_sum = t_sum,
    .broadcast_index = t_broadcast_index,
    .state_alloc = rt_state_alloc,
    .hist_new = rt_hist_new,
    .hist_add = rt_hist_add,
    .hist_merge = rt_hist_merge,
    .hist_quantile = rt_hist_quantile,
    .hist_bin = rt_hist_bin,
    .hist_edge = rt_hist_edge,
    .hist_count = rt_hist_count,
    .hist_lo = rt_hist_lo,
    .hist_hi = rt_hist_hi,
    .hist_width = rt_hist_width,
    .hist_bins = rt_hist_bins,
    .hist_min = rt_hist_min,
    .hist_max = rt_hist_max,
    .add_fn = reg_fn,
    .add_calibrator = reg_cal,
    .add_param = reg_param,
    .add_fn_param = reg_fn_param,
    .value_rank = m_rank,
    .value_dim = m_dim,
    .value_const = m_const,
    .value_present = m_present,
    .value_scalar = m_scalar,
    .value_op_is = m_op_is,
    .attr_int = m_attr_int,
    .attr_float = m_attr_float,
    .attr_str_is = m_attr_str_is,
    .attr_ints = m_attr_ints,
    .add_pattern = reg_pattern,
    .add_pattern_value = reg_pattern_value,
    .add_pattern_node = reg_pattern_node,
    .add_pattern_node_input = reg_pattern_node_input,
    .add_pattern_lower = reg_pattern_lower,
    .add_pattern_lower_arg = reg_pattern_lower_arg,
    .add_affine = reg_affine,
    .add_recipe = reg_recipe,
    .add_setting = reg_setting,
    .add_setting_arg = reg_setting_arg,
    .add_use = reg_use,
    .set_tile_axis = reg_tile_axis,
    .tensor_quantile = t_quantile,
    .set_pointwise = reg_pointwise,
    .set_param_reads = reg_param_reads,
    .set_fill_reads = reg_fill_reads,
    .set_vector_epilogue = reg_vector_epilogue,
    .value_dtype_is = m_dtype_is,
    .value_read_by = m_read_by,
    .value_feeds = m_feeds,
    .add_transform = reg_transform,
    .add_transform_param = reg_transform_param,
    .add_out_dim = reg_out_dim,
    .add_state = reg_state,
    .add_setting_target = reg_setting_target,
    .gram_new = rt_gram_new,
    .gram_add = rt_gram_add,
    .gram_merge = rt_gram_merge,
    .gram_dim = rt_gram_dim,
    .gram_rows = rt_gram_rows,
    .gram_at = rt_gram_at,
    .gram_factor = rt_gram_factor,
    .set_layer_calibrator = reg_layer_cal,
};

const qrl_imports *qr_recipe_imports(void)
{
    return &imports;
}

void qr_rt_init(qrl_rt *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->imp = &imports;
    rt->fuel = QR_FUEL;
    rt->deadline_ms = recipe_time_limit_ms > 0 ? clock_ms() + recipe_time_limit_ms : 0;
}

qr_status qr_rt_status(const qrl_rt *rt, qr_error *e)
{
    return rt->failed ? qr_errorf(e, "%s", rt->msg) : QR_OK;
}

/* -------------------------------------------------------------- modules */

qr_status qr_module_load(qrl_module_entry_fn entry, int64_t abi, void (*release)(void *), void *handle,
                         qrl_module **out, qr_error *e)
{
    if (abi != QR_RECIPE_ABI) {
        if (release)
            release(handle);
        return qr_errorf(e, "the compiled module was built for recipe module ABI %lld, and this QRL's is %d: "
                            "compile the recipe again (qrl check --no-cache; a stale cache entry is rebuilt)",
                         (long long)abi, QR_RECIPE_ABI);
    }
    /* compiled recipe code rounds half to even with rint, which needs the default mode */
    if (fegetround() != FE_TONEAREST) {
        if (release)
            release(handle);
        return qr_errorf(e, "recipe code needs the round-to-nearest floating-point mode, and this process set "
                            "another (fesetround)");
    }
    qrl_module *m = calloc(1, sizeof *m);
    if (!m) {
        if (release)
            release(handle);
        return qr_errorf(e, "out of memory");
    }
    m->release = release;
    m->handle = handle;
    entry(m, &imports);
    if (m->bad) {
        qr_module_free(m);
        return qr_errorf(e, "registering the module failed: out of memory, a function's type the runtime does not "
                            "take, or it names a calibrator it did not register or more parameters than the "
                            "calibrator declared");
    }
    *out = m;
    return QR_OK;
}

void qr_module_free(qrl_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->ncals; i++) {
        free(m->cals[i].params);
        free(m->cals[i].fields);
    }
    free(m->cals);
    for (int i = 0; i < m->nfns; i++) {
        free(m->fns[i].params);
        free(m->fns[i].out_dims);
    }
    free(m->fns);
    for (int i = 0; i < m->npatterns; i++) {
        free(m->patterns[i].values);
        for (int k = 0; k < m->patterns[i].nnodes; k++)
            free(m->patterns[i].nodes[k].inputs);
        free(m->patterns[i].nodes);
        for (int k = 0; k < m->patterns[i].nlowers; k++)
            free(m->patterns[i].lowers[k].args);
        free(m->patterns[i].lowers);
    }
    free(m->patterns);
    for (int i = 0; i < m->ntransforms; i++) {
        qr_pattern *p = &m->transforms[i].match;
        free(p->values);
        for (int k = 0; k < p->nnodes; k++)
            free(p->nodes[k].inputs);
        free(p->nodes);
        free(m->transforms[i].params);
    }
    free(m->transforms);
    free(m->affines);
    for (int i = 0; i < m->nrecipes; i++) {
        for (int k = 0; k < m->recipes[i].nsettings; k++) {
            free(m->recipes[i].settings[k].argnames);
            free(m->recipes[i].settings[k].targets);
            free(m->recipes[i].settings[k].target_is_node);
        }
        free(m->recipes[i].settings);
        free(m->recipes[i].use);
    }
    free(m->recipes);
    if (m->release)
        m->release(m->handle);
    free(m);
}

const qr_fn_desc *qr_module_fn(const qrl_module *m, const char *name)
{
    for (int i = 0; i < m->nfns; i++)
        if (!strcmp(m->fns[i].name, name))
            return &m->fns[i];
    return NULL;
}

int qr_fn_type_is(const qr_fn_desc *d, qr_param_desc result, int n, const qr_param_desc *params)
{
    if (d->result.kind != result.kind || d->result.elem != result.elem || d->nparams != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (d->params[i].kind != params[i].kind || d->params[i].elem != params[i].elem)
            return 0;
    return 1;
}

/* "f32", "i64[]", "tensor<u8>", "qtype", "void": as the recipe writes the type. */
static const char *type_str(const qr_param_desc *p, char *buf, size_t n)
{
    const char *e = p->elem > QR_UNDEF && p->elem < QR_DTYPE_COUNT ? qr_dtype_name(p->elem) : "?";
    switch (p->kind) {
    case QR_PARAM_SCALAR: snprintf(buf, n, "%s", e); break;
    case QR_PARAM_ARRAY: snprintf(buf, n, "%s[]", e); break;
    case QR_PARAM_TENSOR: snprintf(buf, n, "tensor<%s>", e); break;
    case QR_PARAM_QTYPE: snprintf(buf, n, "qtype"); break;
    case QR_PARAM_QPARAMS: snprintf(buf, n, "qparams"); break;
    case QR_PARAM_VOID: snprintf(buf, n, "void"); break;
    default: snprintf(buf, n, "?"); break;
    }
    return buf;
}

/* s appended to buf[0 .. len) (n bytes), truncated: the new length. */
static size_t append(char *buf, size_t n, size_t len, const char *s)
{
    if (len + 1 < n)
        snprintf(buf + len, n - len, "%s", s);
    len += strlen(s);
    return len < n ? len : n - 1;
}

/* "result(param,param)" into buf (n > 0 bytes, truncated). */
static void sig_str(qr_param_desc result, int np, const qr_param_desc *params, char *buf, size_t n)
{
    char t[64];
    buf[0] = 0;
    size_t len = append(buf, n, 0, type_str(&result, t, sizeof t));
    len = append(buf, n, len, "(");
    for (int i = 0; i < np; i++)
        len = append(buf, n, append(buf, n, len, i ? "," : ""), type_str(&params[i], t, sizeof t));
    append(buf, n, len, ")");
}

const char *qr_fn_type_str(const qr_fn_desc *d, char *buf, size_t n)
{
    if (n == 0)
        return buf;
    sig_str(d->result, d->nparams, d->params, buf, n);
    return buf;
}

const qr_fn_desc *qr_module_fn_typed(const qrl_module *m, const char *name, qr_param_desc result, int n,
                                     const qr_param_desc *params, qr_error *e)
{
    const qr_fn_desc *d = qr_module_fn(m, name);
    if (!d) {
        qr_errorf(e, "the module has no function '%s'", name);
        return NULL;
    }
    if (!qr_fn_type_is(d, result, n, params)) {
        char have[512], want[512];
        qr_fn_type_str(d, have, sizeof have);
        sig_str(result, n, params, want, sizeof want);
        qr_errorf(e, "%s '%s' is %s, not %s", d->is_kernel ? "kernel" : "function", name, have, want);
        return NULL;
    }
    return d;
}

/* kernel's base name, ".", variant, then its type arguments */
static int variant_name(const char *kernel, const char *variant, char *buf, size_t n)
{
    size_t base = strcspn(kernel, "<");
    int len = snprintf(buf, n, "%.*s.%s%s", (int)base, kernel, variant, kernel + base);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int qr_tile_name(const char *kernel, char *buf, size_t n)
{
    return variant_name(kernel, "tile", buf, n);
}

int qr_nhwc_name(const char *kernel, char *buf, size_t n)
{
    return variant_name(kernel, "nhwc", buf, n);
}

const qr_fn_desc *qr_module_tile(const qrl_module *m, const qr_fn_desc *k)
{
    char name[512];
    if (!k->is_kernel || qr_tile_name(k->name, name, sizeof name) != 0)
        return NULL;
    const qr_fn_desc *t = qr_module_fn(m, name);
    /* the kernel's parameters and the tile's six */
    return t && t->is_kernel && t->nparams == k->nparams + QR_TILE_NPARAMS ? t : NULL;
}

const qr_fn_desc *qr_module_nhwc(const qrl_module *m, const qr_fn_desc *k, int *tables)
{
    char name[512];
    if (!k->is_kernel || qr_nhwc_name(k->name, name, sizeof name) != 0)
        return NULL;
    const qr_fn_desc *t = qr_module_fn(m, name);
    int extra = t && t->is_kernel ? t->nparams - k->nparams - QR_TILE_NPARAMS - 1 : -1;
    if (extra < 0)
        return NULL;
    /* the kernel's parameters, the tile's six, the fill flag (i64), then the tables */
    if (t->params[k->nparams + QR_TILE_NPARAMS].kind != QR_PARAM_SCALAR)
        return NULL;
    for (int i = 0; i < extra; i++) {
        const qr_param_desc *p = &t->params[k->nparams + QR_TILE_NPARAMS + 1 + i];
        if (p->kind != QR_PARAM_TENSOR || p->elem != QR_I64)
            return NULL;
    }
    *tables = extra;
    return t;
}

int qr_module_kernel_pointwise(const qrl_module *m, const char *name)
{
    const qr_fn_desc *d = qr_module_fn(m, name);
    return d && d->is_kernel == 1 && d->is_pointwise;
}

int qr_fn_reads_param(const qr_fn_desc *k, int i)
{
    return i < 0 || i >= k->nparams || i >= 64 || ((k->param_reads >> i) & 1);
}

/* A key in the making (qr_fill_key): each piece compared with or written at key[at ..]. */
typedef struct fill_key {
    unsigned char *key;
    int64_t cap, at;
    int *same;
} fill_key;

/* Whether n bytes at a and b differ: most pieces of a key are 4 or 8 bytes (a scalar, a length,
 * a pointer), where a call of memcmp per piece was a third of the key's cost (the bundled CNN at
 * batch 1 compares five 100-byte keys a run). */
static inline int key_differs(const unsigned char *a, const void *b, size_t n)
{
    if (n == 8 || n == 4) {
        uint64_t x = 0, y = 0;
        memcpy(&x, a, n);
        memcpy(&y, b, n);
        return x != y;
    }
    return n && memcmp(a, b, n) != 0;
}

/* inlined: a call per piece (some 40 a key) was half of the key's cost */
static inline __attribute__((always_inline)) void key_put(fill_key *f, const void *p, size_t n)
{
    if (f->same) {
        if (*f->same && (f->at + (int64_t)n > f->cap || key_differs(f->key + f->at, p, n)))
            *f->same = 0;
    } else if (f->key && f->at + (int64_t)n <= f->cap && n)
        memcpy(f->key + f->at, p, n);
    f->at += (int64_t)n;
}

int64_t qr_fill_key(const qr_fn_desc *k, void *const *args, uint64_t fixed, unsigned char *key, int64_t cap, int *same)
{
    if (same)
        *same = key != NULL;
    if (!k->fill_known || k->nparams > 64) {
        if (same)
            *same = 0;
        return -1;
    }
    fill_key f = {key, cap, 0, same};
    for (int i = 0; i < k->nparams; i++) {
        if (!(k->fill_uses >> i & 1))
            continue;
        const qr_param_desc *p = &k->params[i];
        switch (p->kind) {
        case QR_PARAM_SCALAR: key_put(&f, args[i], qr_dtype_size(p->elem)); break;
        case QR_PARAM_QTYPE: key_put(&f, args[i], sizeof(qrl_qtype)); break;
        case QR_PARAM_QPARAMS: key_put(&f, args[i], sizeof(qrl_qparams)); break;
        case QR_PARAM_ARRAY: {
            const qrl_array *a = args[i];
            key_put(&f, &a->len, sizeof a->len);
            if (fixed >> i & 1)
                key_put(&f, &a->data, sizeof a->data);
            else
                key_put(&f, a->data, (size_t)a->len * qr_dtype_size(p->elem));
            break;
        }
        case QR_PARAM_TENSOR: {
            const qrl_tview *t = args[i];
            key_put(&f, &t->numel, sizeof t->numel);
            key_put(&f, &t->rank, sizeof t->rank);
            key_put(&f, t->dims, (size_t)t->rank * sizeof t->dims[0]);
            if (k->fill_elems >> i & 1) {
                key_put(&f, &t->data, sizeof t->data);
                if (!(fixed >> i & 1))
                    key_put(&f, t->data, (size_t)t->numel * qr_dtype_size(p->elem));
            }
            break;
        }
        default:
            if (same)
                *same = 0;
            return -1;
        }
    }
    if (same && f.at != cap)
        *same = 0;
    return f.at;
}

const qr_cal_desc *qr_module_calibrator(const qrl_module *m, const char *name)
{
    for (int i = 0; i < m->ncals; i++)
        if (!strcmp(m->cals[i].name, name))
            return &m->cals[i];
    return NULL;
}

const qr_pattern *qr_module_pattern(const qrl_module *m, const char *name)
{
    for (int i = 0; i < m->npatterns; i++)
        if (!strcmp(m->patterns[i].name, name))
            return &m->patterns[i];
    return NULL;
}

const qr_affine *qr_module_affine_for(const qrl_module *m, const qr_graph *g, const qr_node *n,
                                      int (*uses)(const void *ctx, const char *op), const void *uctx, char *why,
                                      size_t whyn, qr_error *e, qr_status *status)
{
    qr_aff_view v;
    size_t at = 0;
    *status = QR_OK;
    if (why && whyn)
        why[0] = 0;
    qr_aff_view_init(&v, g, n);
    for (int i = 0; i < m->naffines; i++) {
        const qr_affine *a = &m->affines[i];
        if (strcmp(a->op, n->op) || (uses && !uses(uctx, a->op)))
            continue;
        if (!a->where)
            return a;
        qrl_rt rt;
        qr_rt_init(&rt);
        int64_t ok = a->where(&rt, &v.mt);
        if (qr_rt_status(&rt, e) != QR_OK) {
            qr_error_prefix(e, "affine rule for %s (%s)", a->op, a->loc);
            *status = QR_ERR;
            return NULL;
        }
        if (ok)
            return a;
        if (why && at < whyn)
            at += (size_t)snprintf(why + at, whyn - at, "%s%s: where %s does not hold", at ? "; " : "", a->loc,
                                   a->cond);
    }
    return NULL;
}

const qr_recipe *qr_module_recipe(const qrl_module *m, const char *name)
{
    for (int i = 0; i < m->nrecipes; i++)
        if (!strcmp(m->recipes[i].name, name))
            return &m->recipes[i];
    return NULL;
}

const qr_setting *qr_recipe_setting(const qr_recipe *r, qr_setting_id id)
{
    for (int i = 0; i < r->nsettings; i++)
        if (r->settings[i].id == id && !r->settings[i].ntargets)
            return &r->settings[i];
    return NULL;
}

const qr_setting *qr_recipe_setting_for(const qr_recipe *r, qr_setting_id id, const char *op, const char *node)
{
    const qr_setting *by_op = NULL;
    for (int i = 0; i < r->nsettings; i++) {
        const qr_setting *s = &r->settings[i];
        for (int t = 0; s->id == id && t < s->ntargets; t++) {
            if (s->target_is_node[t] && node && !strcmp(s->targets[t], node))
                return s;
            if (!s->target_is_node[t] && op && !strcmp(s->targets[t], op) && !by_op)
                by_op = s;
        }
    }
    return by_op;
}

/* ---------------------------------------------------------- calibrators */

static void calib_rt(qr_calib *c, qrl_rt *rt)
{
    qr_rt_init(rt);
    rt->owner = c;
}

/* A calibrator instance of d with zeroed parameters and state; NULL with the error set. */
static qr_calib *calib_alloc(const qr_cal_desc *d, qr_error *e)
{
    qr_calib *c = calloc(1, sizeof *c);
    if (c) {
        c->d = d;
        c->params = calloc((size_t)d->nparams + 1, sizeof *c->params);
        c->state = calloc(1, (size_t)d->state_bytes + 16);
        c->bytes = sizeof *c + sizeof *c->params * ((size_t)d->nparams + 1) + (size_t)d->state_bytes + 16;
    }
    if (!c || !c->params || !c->state) {
        qr_calib_free(c);
        qr_errorf(e, "out of memory");
        return NULL;
    }
    return c;
}

qr_status qr_calib_new(const qrl_module *m, const char *name, int n, const char *const *names, const double *values,
                       qr_calib **out, qr_error *e)
{
    const qr_cal_desc *d = qr_module_calibrator(m, name);
    if (!d)
        return qr_errorf(e, "no calibrator named '%s' in the recipe", name);
    qr_calib *c = calib_alloc(d, e);
    if (!c)
        return QR_ERR;
    qrl_rt rt;
    calib_rt(c, &rt);
    d->defaults(&rt, c->params);
    for (int i = 0; i < n; i++) {
        int at = -1;
        for (int j = 0; j < d->nparams; j++)
            if (!strcmp(d->params[j].name, names[i]))
                at = j;
        if (at < 0) {
            qr_calib_free(c);
            return qr_errorf(e, "calibrator '%s' has no parameter '%s'", name, names[i]);
        }
        if (d->params[at].kind == QR_CAL_FLOAT)
            c->params[at].f = values[i];
        else
            c->params[at].i = (int64_t)values[i];
    }
    d->init(&rt, c->state, c->params);
    if (qr_rt_status(&rt, e) != QR_OK) {
        qr_error_prefix(e, "calibrator '%s'", name);
        qr_calib_free(c);
        return QR_ERR;
    }
    *out = c;
    return QR_OK;
}

qr_status qr_calib_fresh(const qr_calib *like, qr_calib **out, qr_error *e)
{
    const qr_cal_desc *d = like->d;
    qr_calib *c = calib_alloc(d, e);
    if (!c)
        return QR_ERR;
    memcpy(c->params, like->params, sizeof *c->params * (size_t)d->nparams);
    qrl_rt rt;
    calib_rt(c, &rt);
    d->init(&rt, c->state, c->params);
    if (qr_rt_status(&rt, e) != QR_OK) {
        qr_error_prefix(e, "calibrator '%s'", d->name);
        qr_calib_free(c);
        return QR_ERR;
    }
    *out = c;
    return QR_OK;
}

size_t qr_calib_bytes(const qr_calib *c)
{
    return c ? c->bytes : 0;
}

const char *qr_calib_name(const qr_calib *c)
{
    return c ? c->d->name : "";
}

void qr_calib_free(qr_calib *c)
{
    if (!c)
        return;
    for (alloc_node *a = c->allocs, *next; a; a = next) {
        next = a->next;
        if (a->is_hist == 1)
            qr_hist_free(&((hist_box *)a->mem)->h);
        else if (a->is_hist == 2) {
            qr_gram_free(&((gram_box *)a->mem)->g);
            free(((gram_box *)a->mem)->u);
        }
        free(a);
    }
    free(c->params);
    free(c->state);
    free(c);
}

void qr_tview_of(const qr_tensor *t, qrl_tview *v)
{
    memset(v, 0, sizeof *v);
    v->data = t->data;
    v->numel = qr_tensor_numel(t);
    v->rank = t->ndim;
    memcpy(v->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    v->samples = 1;
}

qr_status qr_calib_observe(qr_calib *c, const qr_tensor *x, qr_error *e)
{
    return qr_calib_observe_samples(c, x, 0, 1, e);
}

qr_status qr_calib_observe_samples(qr_calib *c, const qr_tensor *x, int64_t first, int64_t samples, qr_error *e)
{
    if (x->dtype != QR_F32)
        return qr_errorf(e, "calibrator '%s' observes f32 tensors, not %s", c->d->name, qr_dtype_name(x->dtype));
    qrl_tview v;
    qr_tview_of(x, &v);
    v.first = first;
    v.samples = samples;
    qrl_rt rt;
    calib_rt(c, &rt);
    c->d->observe(&rt, c->state, c->params, &v);
    return qr_rt_status(&rt, e);
}

qr_status qr_calib_observe_known(qr_calib *c, const qr_tensor *x, int64_t first, int64_t samples, float lo, float hi,
                                 qr_error *e)
{
    known_range.data = x->data;
    known_range.numel = qr_tensor_numel(x);
    known_range.lo = lo, known_range.hi = hi;
    qr_status st = qr_calib_observe_samples(c, x, first, samples, e);
    known_range.data = NULL;
    return st;
}

qr_status qr_calib_merge(qr_calib *c, const qr_calib *o, qr_error *e)
{
    if (o->d != c->d)
        return qr_errorf(e, "cannot merge calibrator '%s' into '%s'", o->d->name, c->d->name);
    qrl_rt rt;
    calib_rt(c, &rt);
    c->d->merge(&rt, c->state, o->state, c->params);
    return qr_rt_status(&rt, e);
}

qr_status qr_calib_solve_layer(qr_calib *c, const qrl_qtype *t, int64_t block, qr_tensor *w, qr_tensor *scale,
                               qr_tensor *zero, qr_error *e)
{
    if (!c->d->layer)
        return qr_errorf(e, "calibrator '%s' is not a layer calibrator", c->d->name);
    qrl_tview vw, vs, vz;
    qr_tview_of(w, &vw);
    qr_tview_of(scale, &vs);
    qr_tview_of(zero, &vz);
    qrl_rt rt;
    calib_rt(c, &rt);
    ((qrl_cal_solve_layer_fn)(void (*)(void))c->d->solve)(&rt, c->state, c->params, &vw, t, block, &vs, &vz);
    if (qr_rt_status(&rt, e) != QR_OK)
        return QR_ERR;
    /* what solve wrote is the recipe's code: codes and zero points must be integers of t's range */
    const double *q = w->data, *sc = scale->data, *z = zero->data;
    for (int64_t i = 0; i < qr_tensor_numel(w); i++)
        if (!(q[i] >= (double)t->qmin && q[i] <= (double)t->qmax && q[i] == floor(q[i])))
            return qr_errorf(e, "calibrator '%s' left weight element %lld at %g, not an integer of %lld..%lld",
                             c->d->name, (long long)i, q[i], (long long)t->qmin, (long long)t->qmax);
    for (int64_t i = 0; i < qr_tensor_numel(scale); i++) {
        if (!(sc[i] > 0) || !isfinite(sc[i]) || !isfinite((float)sc[i]))
            return qr_errorf(e, "calibrator '%s' gave block %lld scale %g", c->d->name, (long long)i, sc[i]);
        if (!(z[i] >= (double)t->qmin && z[i] <= (double)t->qmax && z[i] == floor(z[i])))
            return qr_errorf(e, "calibrator '%s' gave block %lld zero point %g, not an integer of %lld..%lld",
                             c->d->name, (long long)i, z[i], (long long)t->qmin, (long long)t->qmax);
    }
    return QR_OK;
}

qr_status qr_calib_solve(qr_calib *c, const qrl_qtype *t, qrl_qparams *out, qr_error *e)
{
    if (c->d->layer)
        return qr_errorf(e, "calibrator '%s' is a layer calibrator (it rounds a weight from the layer's inputs): "
                            "only weight-only recipes (activation = f32) can use it", c->d->name);
    qrl_rt rt;
    calib_rt(c, &rt);
    c->d->solve(&rt, c->state, c->params, t, out);
    if (qr_rt_status(&rt, e) != QR_OK)
        return QR_ERR;
    /* what solve returns is the recipe's code: a zero point the type cannot hold would wrap
     * when stored (300 as u8 is 44) */
    if (out->zero < t->qmin || out->zero > t->qmax)
        return qr_errorf(e, "calibrator '%s' gave zero point %lld, outside %s%lld's range %lld..%lld", c->d->name,
                         (long long)out->zero, t->is_signed ? "i" : "u", (long long)t->bits, (long long)t->qmin,
                         (long long)t->qmax);
    return QR_OK;
}

/* ------------------------------------------- states between processes */

static int put(unsigned char **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n)
            c *= 2;
        unsigned char *v = realloc(*buf, c);
        if (!v)
            return 0;
        *buf = v;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    return 1;
}

static int put_i64(unsigned char **buf, size_t *len, size_t *cap, int64_t v) { return put(buf, len, cap, &v, 8); }

static int get(const unsigned char *buf, size_t n, size_t *at, void *p, size_t k)
{
    if (k > n - *at)
        return 0;
    memcpy(p, buf + *at, k);
    *at += k;
    return 1;
}

/* A histogram's numbers after its 1 (0: none, a NULL field). */
#define HIST_HEAD 4

qr_status qr_calib_pack(const qr_calib *c, unsigned char **buf, size_t *len, size_t *cap, qr_error *e)
{
    const qr_cal_desc *d = c->d;
    int ok = put_i64(buf, len, cap, d->state_bytes) && put_i64(buf, len, cap, d->nfields);
    for (int i = 0; ok && i < d->nfields; i++) {
        const qr_state_field *f = &d->fields[i];
        const unsigned char *slot = (const unsigned char *)c->state + f->at;
        if (f->kind == QR_STATE_SCALAR)
            ok = put(buf, len, cap, slot, 8);
        else if (f->kind == QR_STATE_ARRAY) {
            qrl_array a;
            memcpy(&a, slot, sizeof a);
            ok = put_i64(buf, len, cap, a.len) && put(buf, len, cap, a.data, (size_t)(a.len * f->elem_bytes));
        } else if (f->kind == QR_STATE_GRAM) {
            const gram_box *b;
            memcpy(&b, slot, sizeof b);
            int64_t k = b ? b->g.k : 0;
            ok = put_i64(buf, len, cap, k) && put(buf, len, cap, b ? &b->g.rows : &(double){0}, 8) &&
                 (!k || put(buf, len, cap, b->g.h, sizeof *b->g.h * (size_t)(k * k)));
        } else {
            const hist_box *b;
            memcpy(&b, slot, sizeof b);
            ok = put_i64(buf, len, cap, b != NULL);
            if (ok && b) {
                int64_t head[HIST_HEAD] = {b->kind, b->h.bins, b->h.is_abs, b->h.e};
                double num[4] = {b->h.total, b->h.skipped, b->h.min, b->h.max};
                ok = put(buf, len, cap, head, sizeof head) && put(buf, len, cap, num, sizeof num) &&
                     put(buf, len, cap, b->h.count, sizeof *b->h.count * (size_t)b->h.bins);
            }
        }
    }
    return ok ? QR_OK : qr_errorf(e, "out of memory");
}

qr_status qr_calib_unpack(qr_calib *c, const unsigned char *buf, size_t n, size_t *at, qr_error *e)
{
    const qr_cal_desc *d = c->d;
    int64_t bytes = -1, nfields = -1;
    int ok = get(buf, n, at, &bytes, 8) && get(buf, n, at, &nfields, 8) && bytes == d->state_bytes &&
             nfields == d->nfields;
    for (int i = 0; ok && i < d->nfields; i++) {
        const qr_state_field *f = &d->fields[i];
        unsigned char *slot = (unsigned char *)c->state + f->at;
        if (f->kind == QR_STATE_SCALAR)
            ok = get(buf, n, at, slot, 8);
        else if (f->kind == QR_STATE_ARRAY) { /* init gave the fresh state its memory, of the same length */
            qrl_array a;
            int64_t len = -1;
            memcpy(&a, slot, sizeof a);
            ok = get(buf, n, at, &len, 8) && len == a.len && get(buf, n, at, a.data, (size_t)(len * f->elem_bytes));
        } else if (f->kind == QR_STATE_GRAM) { /* into the fresh instance's empty gram */
            gram_box *b;
            int64_t k = -1;
            double rows = 0;
            memcpy(&b, slot, sizeof b);
            ok = b && !b->g.k && get(buf, n, at, &k, 8) && get(buf, n, at, &rows, 8) && k >= 0 && k <= 46340 &&
                 (size_t)(k * k) * 8 <= n - *at;
            if (ok && k) {
                b->g.h = malloc(sizeof *b->g.h * (size_t)(k * k));
                b->g.tmp = malloc(sizeof *b->g.tmp * (size_t)(k * k));
                ok = b->g.h && b->g.tmp;
                if (ok) {
                    b->g.k = k;
                    ok = get(buf, n, at, b->g.h, sizeof *b->g.h * (size_t)(k * k));
                }
            }
            if (ok)
                b->g.rows = rows;
        } else {
            hist_box *b;
            int64_t present = 0, head[HIST_HEAD];
            double num[4];
            memcpy(&b, slot, sizeof b);
            ok = get(buf, n, at, &present, 8) && present == (b != NULL);
            if (ok && b) {
                ok = get(buf, n, at, head, sizeof head) && get(buf, n, at, num, sizeof num) && head[1] == b->h.bins &&
                     get(buf, n, at, b->h.count, sizeof *b->h.count * (size_t)b->h.bins);
                if (ok) {
                    b->kind = (int)head[0];
                    b->h.is_abs = (int)head[2];
                    b->h.e = (int)head[3];
                    b->h.total = num[0], b->h.skipped = num[1], b->h.min = num[2], b->h.max = num[3];
                }
            }
        }
    }
    return ok ? QR_OK : qr_errorf(e, "calibrator '%s': a state received does not fit its layout", d->name);
}

qrl_qtype qr_qtype_of(qr_dtype t, int narrow, int axis)
{
    qrl_qtype q = {.bits = qr_dtype_bits(t), .axis = axis, .narrow = narrow}; /* i4: 4, in a byte */
    q.is_signed = qr_dtype_get(t)->is_signed;
    if (q.is_signed) {
        q.qmax = ((int64_t)1 << (q.bits - 1)) - 1;
        q.qmin = narrow ? -q.qmax : -q.qmax - 1;
    } else {
        q.qmin = narrow ? 1 : 0; /* narrow range as TensorFlow: [1, 255] for 8 bits */
        q.qmax = ((int64_t)1 << q.bits) - 1;
    }
    return q;
}
