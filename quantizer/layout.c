/* The NHWC layout pass (layout.h). One walk in topological order: a node
 * that can run channels-last reads the NHWC twin of each activation input
 * (made by a Transpose the first time a value needs one) and writes an NHWC
 * twin of its output; at the end, a value whose NCHW form some node or the
 * graph's outputs still read gets it back from its twin by one Transpose. So
 * a chain of NHWC nodes has no transpose inside, and every transpose left is
 * at a border of the region. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/igemm.h"
#include "options.h"
#include "quantize_plan.h"
#include "twins.h"

#define TWIN_SUFFIX QR_TWINS_SUFFIX

typedef qr_twins lay;

static int is_int8(const qr_value *v)
{
    return v && (v->t.dtype == QR_U8 || v->t.dtype == QR_I8);
}

static int rank4(const qr_value *v)
{
    return v && v->t.ndim == 4;
}

static int const_zero(const qr_value *v)
{
    if (!v)
        return 1;
    if (!v->is_const || !v->t.data)
        return 0;
    for (int64_t i = 0; i < qr_tensor_numel(&v->t); i++)
        if (qr_get_i64(v->t.data, v->t.dtype, i))
            return 0;
    return 1;
}

/* A fused 2-D convolution of group 1 (weight zero point 0) or depthwise, on 8-bit activations. */
/* Where the NHWC convolution pays (qrl bench, 1 thread, the four bench models): on the generic
 * microkernels, with fewer output channels the 6-row tile has too few independent sums (16: 6),
 * and with fewer input channels the NCHW path's vectorized im2col beats gathering windows; such
 * convolutions stay NCHW and a transpose joins them to a region (nhwc=all converts them too, for
 * the tests). With kernels compiled for each shape (qr_iconv_specializing: AVX-512 VNNI, iconv-jit
 * on) every convolution is faster channels last, the transposes gone too (AMD Zen 5, 1 thread,
 * all-int8 exports, medians of two runs each in turns, NCHW small layers -> all NHWC: MobileNetV2
 * batch 1 2.30-2.37 -> 2.04-2.22 ms, ResNet-18 4.96-5.02 -> 4.59-4.64, MobileNetV3-small
 * 0.81-0.82 -> 0.78-0.79, the Fashion-MNIST CNN batch 64 0.61-0.63 -> 0.55-0.57; on the generic
 * VNNI kernels the CNN 0.63-0.65 -> 0.65-0.66, on AVX2 2.42 -> 2.73: there the rule stays). */
#define NHWC_MIN_M 32
#define NHWC_MIN_C 16

static int conv_capable(const qr_node *n, int every)
{
    const qr_value *x = n->in[0], *w = n->n_in > 1 ? n->in[1] : NULL;
    int64_t nconv = qr_attr_i(n, "conv_inputs", 2);
    const qr_value *wzp = nconv > 3 && n->n_in > 3 ? n->in[3] : NULL;
    if (!rank4(x) || !is_int8(x) || !w || !w->is_const || w->t.ndim != 4 || w->t.dtype != QR_I8)
        return 0;
    int64_t group = qr_attr_i(n, "group", 1), m = w->t.dims[0];
    if (group == 1)
        return const_zero(wzp) && (x->t.dims[1] < 0 || x->t.dims[1] == w->t.dims[1]) &&
               (every || (m >= NHWC_MIN_M && w->t.dims[1] >= NHWC_MIN_C));
    return w->t.dims[1] == 1 && group == m && x->t.dims[1] == m;
}

/* The non-constant inputs of n: all 4-D and of one shape (dims equal, unknown ones alike). */
static int same_4d_operands(const qr_node *n)
{
    const qr_value *first = NULL;
    for (int i = 0; i < n->n_in; i++) {
        const qr_value *v = n->in[i];
        if (!v || v->is_const)
            continue;
        if (!rank4(v))
            return 0;
        if (!first)
            first = v;
        else if (memcmp(first->t.dims, v->t.dims, 4 * sizeof(int64_t)))
            return 0;
    }
    return first != NULL && rank4(n->out[0]) && !memcmp(first->t.dims, n->out[0]->t.dims, 4 * sizeof(int64_t));
}

/* Whether n runs on NHWC operands; the inputs it reads as activations are its non-constant 4-D
 * ones (a convolution's: x only). */
static int capable(const qr_node *n, qr_layout_pointwise_fn pointwise, void *user, int every)
{
    if (n->dead || n->n_out != 1 || !n->out[0] || !n->in || n->n_in < 1)
        return 0;
    if (!strcmp(n->op, "QrlConvKernel"))
        return !qr_attr_i(n, "nhwc", 0) && conv_capable(n, every);
    if ((!strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool")) && !n->domain[0]) /* 8-bit, 2-D */
        return rank4(n->in[0]) && is_int8(n->in[0]) && n->out[0]->t.dtype == n->in[0]->t.dtype;
    if (!strcmp(n->op, "Pad") && !n->domain[0]) /* its pads permuted; constant, edge and reflect alike */
        return rank4(n->in[0]) && n->n_in >= 2 && n->in[1] && n->in[1]->is_const && n->in[1]->t.data &&
               qr_tensor_numel(&n->in[1]->t) == 8 && (n->n_in < 4 || !n->in[3]);
    if (!strcmp(n->op, "QrlLookup")) /* y[i] = table[x[i]] */
        return rank4(n->in[0]) && !n->in[0]->is_const;
    if (!strcmp(n->op, "QrlKernel")) {
        const int64_t *fixed;
        int nf = qr_attr_ints(n, "shape", &fixed);
        return !qr_attr_i(n, "acc", 0) && (nf <= 0 || nf == 4) && same_4d_operands(n) && pointwise &&
               pointwise(n, user);
    }
    return 0;
}

/* Whether MaxPool n, its input not NHWC, runs channels last anyway: every node that reads its
 * output runs channels last (a convolution among them). It then reads its NCHW input itself
 * (x_nchw: runtime/ops/nhwc.c transposes each task's input rows into cache and pools them
 * separably), and the transpose its readers needed after it is gone. ResNet-18's MaxPool after its
 * NCHW stem, b1, isolated: NCHW pool 0.125 + transpose after 0.010 ms, against 0.041 + 0.022 with a
 * transpose node before an NHWC pool; at batch 64 such a transpose (51 MB, the machine's memory
 * bandwidth) cost more than the pool saved. */
static int pool_leads(const lay *L, const qr_node *n, qr_layout_pointwise_fn pointwise, void *user, int every)
{
    const qr_value *out = n->out[0];
    if (strcmp(n->op, "MaxPool") || out->is_output)
        return 0;
    int convs = 0;
    for (int i = 0; i < L->g->n_nodes; i++) {
        const qr_node *u = L->g->nodes[i];
        for (int j = 0; !u->dead && j < u->n_in; j++) {
            if (u->in[j] != out)
                continue;
            /* a convolution reads its x as NHWC (its epilogue's copy of x too: convert); any other
             * operand of it stays NCHW */
            int conv = !strcmp(u->op, "QrlConvKernel");
            if (!capable(u, pointwise, user, every) || (conv && u->in[0] != out))
                return 0;
            convs += conv;
        }
    }
    return convs > 0;
}

/* A QrlKernel's output shape attributes (intgraph.c kcall_infer) for its NHWC operands: the fixed
 * dims permuted, and each dim that follows input i's dim j following its new place. */
static void permute_shape_attrs(qr_node *n)
{
    static const int64_t place[4] = {0, 3, 1, 2}; /* where NCHW dim j is in NHWC */
    for (int a = 0; a < n->n_attr; a++) {
        qr_attr *at = &n->attr[a];
        int sh = !strcmp(at->name, "shape"), df = !strcmp(at->name, "dims_from");
        if ((!sh && !df) || at->kind != QR_ATTR_INTS || at->n != 4)
            continue;
        int64_t v[4];
        for (int d = 0; d < 4; d++) {
            int64_t x = at->ints[qr_twins_to_nhwc[d]];
            v[d] = df && x >= 0 ? x / QR_MAX_DIMS * QR_MAX_DIMS + (x % QR_MAX_DIMS < 4 ? place[x % QR_MAX_DIMS] : x % QR_MAX_DIMS) : x;
        }
        memcpy(at->ints, v, sizeof v);
    }
}

/* A pool becomes its NHWC op (quantizer/intgraph.c's table), the attributes unchanged. */
static int pool_nhwc(lay *L, qr_node *n)
{
    int max = !strcmp(n->op, "MaxPool");
    const char *op = max ? "QrlMaxPoolNhwc" : "QrlAveragePoolNhwc";
    const qr_op_def *def = qr_op_find_in(qr_ops_intgraph, "qrl", op);
    if (!def || !(n->op = qr_arena_strdup(&L->g->arena, op)) || !(n->domain = qr_arena_strdup(&L->g->arena, "qrl")))
        return -1;
    n->def = def;
    n->opset = 1;
    return 0;
}

/* A convolution of group 1 over fewer than 16 channels with a window (a first layer) gathers its
 * windows (runtime/ops/iconv_nhwc.c) as well from NCHW: its input needs no transpose. */
static int gathers_nchw(const qr_node *n)
{
    const qr_value *w = n->in[1];
    return qr_attr_i(n, "group", 1) == 1 && w->t.dims[1] < 16 && w->t.dims[2] * w->t.dims[3] > 1;
}

/* Pad's pads (begin N C H W, end N C H W) for NHWC operands: a new constant. */
static int pad_nhwc(lay *L, qr_node *n)
{
    const qr_value *p = n->in[1];
    int64_t v[8];
    for (int i = 0; i < 8; i++)
        v[i] = qr_get_i64(p->t.data, p->t.dtype, i / 4 * 4 + qr_twins_to_nhwc[i % 4]);
    char name[512];
    snprintf(name, sizeof name, "%s" TWIN_SUFFIX, p->name);
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {8}, .data = v};
    return (n->in[1] = qr_plan_const(L->g, name, &t)) ? 0 : -1;
}

static int convert(lay *L, qr_node *n)
{
    int conv = !strcmp(n->op, "QrlConvKernel"), pad = !strcmp(n->op, "Pad");
    qr_value *x = n->in[0];
    int pool = !strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool");
    /* a first convolution's gathered windows, or a MaxPool leading into a region (pool_leads), read NCHW */
    int keep = (conv ? gathers_nchw(n) : !strcmp(n->op, "MaxPool")) && !(x->id < L->ntwin && L->twin[x->id]);
    for (int i = keep ? 1 : 0; i < (conv || pad ? 1 : n->n_in); i++) {
        qr_value *v = n->in[i];
        if (!v || v->is_const)
            continue;
        if (!(n->in[i] = qr_twins_nhwc_of(L, v)))
            return -1;
    }
    /* the epilogue's own operand x (stdlib's kernels take it for its type) reads the twin too, so
     * no NCHW copy is made for it */
    for (int i = (int)qr_attr_i(n, "conv_inputs", 2); conv && i < n->n_in; i++)
        if (n->in[i] == x)
            n->in[i] = n->in[0];
    if (!conv)
        permute_shape_attrs(n);
    if (!qr_twins_write_twin(L, n))
        return -1;
    if (conv)
        qr_node_add_attr_i(L->g, n, "nhwc", 1);
    if (keep)
        qr_node_add_attr_i(L->g, n, "x_nchw", 1);
    if (pool)
        return pool_nhwc(L, n);
    else if (pad)
        return pad_nhwc(L, n);
    return 0;
}

/* Whether Flatten f of an NHWC value can read its twin instead: its output goes only to integer
 * matrix products as their A (their constant B's rows then permuted) and to their epilogue kernels
 * (which take A for its type), and its input is [N, C, H, W] with C, H, W known. */
static int flatten_folds(const lay *L, const qr_node *f, int nvalues)
{
    const qr_value *v = f->in[0], *u = f->out[0];
    if (strcmp(f->op, "Flatten") || f->domain[0] || qr_attr_i(f, "axis", 1) != 1 || !v || v->id >= nvalues ||
        !L->twin[v->id] || !rank4(v) || v->t.dims[1] <= 0 || v->t.dims[2] <= 0 || v->t.dims[3] <= 0 || u->is_output)
        return 0;
    int64_t k = v->t.dims[1] * v->t.dims[2] * v->t.dims[3];
    int uses = 0;
    for (int i = 0; i < L->g->n_nodes; i++) {
        const qr_node *n = L->g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++) {
            if (n->in[j] != u)
                continue;
            const qr_value *b = n->n_in > 1 ? n->in[1] : NULL;
            int mm = !strcmp(n->op, "MatMulInteger") && j == 0 && b && b->is_const && b->t.data && b->t.ndim == 2 &&
                     b->t.dims[0] == k;
            if (!mm && !(!strcmp(n->op, "QrlKernel") && qr_attr_i(n, "acc", 0) && j > 0))
                return 0;
            uses++;
        }
    }
    return uses > 0;
}

/* The fold: Flatten reads the NHWC twin and writes a twin of its output, whose element
 * (p * C + c) is the NCHW flatten's (c * H * W + p); each matrix product's B gets its rows in
 * that order (a new constant). */
static int fold_flatten(lay *L, qr_node *f)
{
    qr_value *v = f->in[0], *u = f->out[0];
    int64_t c = v->t.dims[1], hw = v->t.dims[2] * v->t.dims[3];
    char name[512];
    snprintf(name, sizeof name, "%s" TWIN_SUFFIX, u->name);
    qr_value *t = qr_graph_new_value(L->g, name);
    if (!t)
        return -1;
    t->t = u->t;
    t->q = u->q;
    for (int i = 0; i < L->g->n_nodes; i++) {
        qr_node *n = L->g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++) {
            if (n->in[j] != u)
                continue;
            n->in[j] = t;
            if (strcmp(n->op, "MatMulInteger"))
                continue;
            const qr_value *b = n->in[1];
            size_t es = qr_dtype_size(b->t.dtype), row = (size_t)b->t.dims[1] * es;
            qr_tensor p = {.dtype = b->t.dtype, .ndim = 2, .dims = {b->t.dims[0], b->t.dims[1]}};
            if (!(p.data = malloc(row * (size_t)b->t.dims[0])))
                return -1;
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t px = 0; px < hw; px++)
                    memcpy((char *)p.data + (size_t)(px * c + ch) * row, (const char *)b->t.data + (size_t)(ch * hw + px) * row,
                           row);
            snprintf(name, sizeof name, "%s_%s" TWIN_SUFFIX, b->name, n->name);
            n->in[1] = qr_plan_const(L->g, name, &p);
            free(p.data);
            if (!n->in[1])
                return -1;
        }
    }
    f->in[0] = L->twin[v->id];
    f->out[0] = t;
    t->producer = f;
    u->producer = NULL;
    return 0;
}

qr_status qr_layout_nhwc(qr_graph *g, qr_layout_pointwise_fn pointwise, void *user, qr_error *e)
{
    int mode = qr_options_get()->nhwc;
    if (mode == QR_NHWC_OFF)
        return QR_OK;
    int every = mode == QR_NHWC_ALL || qr_iconv_specializing();
    int nvalues = g->n_values, nnodes = g->n_nodes;
    lay L;
    if (qr_twins_init(&L, g))
        return qr_errorf(e, "out of memory");
    int st = 0, any = 0;
    for (int i = 0; i < nnodes && !st; i++) {
        qr_node *n = g->nodes[i];
        if (capable(n, pointwise, user, every)) {
            /* a pointwise op joins only a region a convolution started: alone it would only add transposes */
            int joins = !strcmp(n->op, "QrlConvKernel");
            for (int j = 0; !joins && j < n->n_in; j++)
                joins = n->in[j] && n->in[j]->id < nvalues && L.twin[n->in[j]->id];
            joins = joins || pool_leads(&L, n, pointwise, user, every);
            if (joins) {
                st = convert(&L, n);
                any = 1;
            }
        } else if (flatten_folds(&L, n, nvalues)) {
            st = fold_flatten(&L, n);
        }
    }
    if (!st && any)
        st = qr_twins_restore_nchw(&L);
    qr_twins_free(&L);
    if (st)
        return qr_errorf(e, "out of memory");
    return qr_graph_check_oom(g, e);
}

const qr_value *qr_layout_twin(const qr_graph *g, const char *name, int64_t *dims)
{
    char twin[512];
    if (snprintf(twin, sizeof twin, "%s" TWIN_SUFFIX, name) >= (int)sizeof twin)
        return NULL;
    const qr_value *t = qr_graph_find(g, twin);
    const qr_node *f = t ? t->producer : NULL;
    const qr_value *from = t && t->t.ndim == 2 && f && !strcmp(f->op, "Flatten") ? f->in[0] : t;
    if (!from || from->t.ndim != 4)
        return NULL;
    memcpy(dims, from->t.dims, 4 * sizeof *dims);
    return t;
}
