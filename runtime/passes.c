#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* Folding stops at constants this large: they would only bloat the graph. */
#define FOLD_MAX_BYTES ((size_t)64 << 20)

static int is_op(const qr_node *n, const char *op)
{
    return !n->dead && !n->domain[0] && strcmp(n->op, op) == 0;
}

/* Readers of each value among live nodes (counted once: the passes below used to
 * count them per node, which is quadratic on long chains). */
static int *count_uses(const qr_graph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
    for (int i = 0; uses && i < g->n_nodes; i++)
        for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++)
            if (g->nodes[i]->in[j])
                uses[g->nodes[i]->in[j]->id]++;
    return uses;
}

static qr_value *resolve(qr_value **fwd, qr_value *v)
{
    while (v && fwd[v->id])
        v = fwd[v->id];
    return v;
}

/* Removes Identity and inference-mode Dropout in one pass: each removed node's
 * output is forwarded to its input (fwd), and every use is rewritten once at the end. */
qr_status qr_pass_remove_identity(qr_graph *g, qr_error *e)
{
    int *uses = count_uses(g);
    qr_value **fwd = calloc((size_t)g->n_values + 1, sizeof *fwd);
    if (!uses || !fwd) {
        free(uses);
        free(fwd);
        return qr_errorf(e, "out of memory removing Identity nodes");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (!is_op(n, "Identity") && !is_op(n, "Dropout"))
            continue;
        if (is_op(n, "Dropout")) {
            if (n->n_out > 1 && n->out[1] && (n->out[1]->is_output || uses[n->out[1]->id]))
                continue; /* the mask is used */
            if (qr_attr_i(n, "is_test", 1) == 0 && n->opset < 7)
                continue;
            qr_value *tm = resolve(fwd, qr_node_input(n, 2));
            if (tm && (!tm->is_const || ((uint8_t *)tm->t.data)[0]))
                continue; /* training mode: not an identity */
        }
        qr_value *in = resolve(fwd, n->in[0]), *out = n->out[0];
        if (!in || !out)
            continue;
        if (!out->is_output) {
            fwd[out->id] = in;
            uses[in->id] += uses[out->id] - 1;
            n->dead = 1;
        } else if (in->producer && !in->is_output && !in->is_input && !in->is_const && uses[in->id] == 1) {
            /* Keep the output's name: the producer of `in` writes `out` directly. */
            qr_node *p = in->producer;
            for (int j = 0; j < p->n_out; j++)
                if (p->out[j] == in)
                    p->out[j] = out;
            out->producer = p;
            uses[in->id] = 0;
            n->dead = 1;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i]->n_in; j++)
            g->nodes[i]->in[j] = resolve(fwd, g->nodes[i]->in[j]);
    for (int i = 0; i < g->n_outputs; i++)
        g->outputs[i] = resolve(fwd, g->outputs[i]);
    free(uses);
    free(fwd);
    return QR_OK;
}

static int op_shape_only(const qr_node *n)
{
    return !n->domain[0] && (strcmp(n->op, "Shape") == 0 || strcmp(n->op, "Size") == 0);
}

typedef struct kargs kargs;
static qr_status infer_and_fold(qr_graph *g, kargs *ka, qr_error *e);

/* A kernel's argument arrays for every node of a graph, sized once by its widest node. Kernels may
 * read optional inputs past a node's own: at least 64 input slots, and those past the node's inputs
 * are NULL (kargs_clear_past clears only what the node before set). */
typedef struct kargs {
    const qr_tensor **in;
    qr_tensor *out, **outp;
    int hi;
} kargs;

static int kargs_new(const qr_graph *g, kargs *a)
{
    int nin = 64, nout = 16;
    for (int i = 0; i < g->n_nodes; i++) {
        nin = g->nodes[i]->n_in > nin ? g->nodes[i]->n_in : nin;
        nout = g->nodes[i]->n_out > nout ? g->nodes[i]->n_out : nout;
    }
    a->in = calloc((size_t)nin, sizeof *a->in);
    a->out = calloc((size_t)nout, sizeof *a->out);
    a->outp = calloc((size_t)nout, sizeof *a->outp);
    a->hi = 0;
    if (a->in && a->out && a->outp)
        return 1;
    free(a->in);
    free(a->out);
    free(a->outp);
    return 0;
}

static void kargs_free(kargs *a)
{
    free(a->in);
    free(a->out);
    free(a->outp);
}

/* After in[0..n_in) is set: the slots past it, up to what the node before set, back to NULL. */
static void kargs_clear_past(kargs *a, int n_in)
{
    for (int j = n_in; j < a->hi; j++)
        a->in[j] = NULL;
    a->hi = n_in;
}

/* ONNX ops whose output 0 has the element type of one input (their type constraint T is shared):
 * the input, or -1 for none of these. */
static int same_type_input(const qr_node *n)
{
    static const char *const ops[] = {
        "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt",
        "Reciprocal", "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "MatMul", "Gemm", "Conv",
        "Concat", "Reshape", "Transpose", "Slice", "Gather", "Expand", "Squeeze", "Unsqueeze", "Flatten", "Split",
        "Identity", "Pad", "Tile", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Max", "Min", "Clip",
        "MaxPool", "AveragePool", "GlobalAveragePool", "HardSigmoid", "HardSwish", "LeakyRelu", "Dropout"};
    if (n->domain[0])
        return -1;
    if (!strcmp(n->op, "Where"))
        return 1;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(n->op, ops[i]))
            return 0;
    return -1;
}

/* A node whose shapes could not be inferred (a dim that only a run knows, as an Expand to a
 * computed shape) still gives its outputs their element type where ONNX ties it to an input's:
 * patterns and rules test it (x.dtype == "f32"), and an unknown type would leave the rest of the
 * graph out. Shapes stay unknown. */
static void infer_type_only(qr_node *n)
{
    static const char *const indices[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"},
                             *tests[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And",
                                         "Or", "Xor", "IsNaN", "IsInf"};
    qr_dtype fixed = QR_UNDEF;
    for (size_t i = 0; !n->domain[0] && i < sizeof indices / sizeof *indices; i++)
        if (!strcmp(n->op, indices[i]))
            fixed = QR_I64;
    for (size_t i = 0; !n->domain[0] && i < sizeof tests / sizeof *tests; i++)
        if (!strcmp(n->op, tests[i]))
            fixed = QR_BOOL;
    if (!n->domain[0] && !strcmp(n->op, "Cast"))
        fixed = qr_dtype_from_onnx((int)qr_attr_i(n, "to", 0));
    if (fixed != QR_UNDEF) {
        if (n->n_out > 0 && n->out[0] && n->out[0]->t.dtype == QR_UNDEF)
            n->out[0]->t.dtype = fixed;
        return;
    }
    int j = same_type_input(n);
    if (j < 0 || j >= n->n_in || !n->in[j] || n->in[j]->t.dtype == QR_UNDEF)
        return;
    for (int o = 0; o < n->n_out && (o == 0 || !strcmp(n->op, "Split")); o++)
        if (n->out[o] && n->out[o]->t.dtype == QR_UNDEF)
            n->out[o]->t.dtype = n->in[j]->t.dtype;
}

qr_status qr_pass_infer_and_fold(qr_graph *g, qr_error *e)
{
    kargs ka;
    if (!kargs_new(g, &ka))
        return qr_errorf(e, "out of memory");
    qr_status st = infer_and_fold(g, &ka, e);
    kargs_free(&ka);
    return st;
}

static qr_status infer_and_fold(qr_graph *g, kargs *ka, qr_error *e)
{
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || !n->def)
            continue;
        const qr_tensor **in = ka->in;
        qr_tensor *out = ka->out, **outp = ka->outp;
        int shapes = 1, consts = 1;
        for (int j = 0; j < n->n_in; j++) {
            qr_value *v = n->in[j];
            in[j] = v ? &v->t : NULL;
            if (v && !qr_value_shape_known(v))
                shapes = 0;
            if (v && !v->is_const)
                consts = 0;
        }
        kargs_clear_past(ka, n->n_in);
        memset(out, 0, sizeof *out * (size_t)n->n_out);
        if (!shapes) {
            infer_type_only(n);
            continue;
        }
        if (op_shape_only(n))
            consts = 1;
        for (int j = 0; j < n->n_out; j++)
            outp[j] = &out[j];
        qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = outp, .err = e};
        qr_status st = qr_op_infer(&k);
        if (st == QR_NEED_DATA) {
            infer_type_only(n);
            continue;
        }
        if (st != QR_OK) {
            qr_error_prefix(e, "node '%s' (%s)", n->name, n->op);
            return QR_ERR;
        }
        for (int j = 0; j < n->n_out; j++) {
            if (qr_tensor_check_shape(&out[j], e) != QR_OK) {
                qr_error_prefix(e, "node '%s' (%s): output %d", n->name, n->op, j);
                return QR_ERR;
            }
            if (n->out[j]) {
                qr_value *v = n->out[j];
                /* Keep declared symbolic names where they agree with the inferred rank. */
                if (v->t.ndim != out[j].ndim)
                    memset(v->dim_param, 0, sizeof v->dim_param);
                v->t = out[j];
                v->t.data = NULL;
            }
        }
        int outputs_named = 1;
        size_t bytes = 0;
        for (int j = 0; j < n->n_out; j++) {
            outputs_named &= n->out[j] != NULL;
            bytes += qr_tensor_nbytes(&out[j]);
        }
        if (!consts || !outputs_named || bytes > FOLD_MAX_BYTES)
            continue;
        qr_status rst = QR_OK;
        for (int j = 0; j < n->n_out && rst == QR_OK; j++)
            rst = qr_tensor_alloc(&out[j], e);
        if (rst == QR_OK)
            rst = qr_op_run(&k);
        for (int j = 0; j < n->n_out && rst == QR_OK; j++)
            rst = qr_value_try_set_const(g, n->out[j], &out[j], e);
        for (int j = 0; j < n->n_out; j++)
            qr_tensor_free(&out[j]);
        if (rst != QR_OK) {
            qr_error_prefix(e, "node '%s' (%s)", n->name, n->op);
            return QR_ERR;
        }
        n->dead = 1;
    }
    return QR_OK;
}

/* Per-channel s = scale / sqrt(var + eps) and t = B - mean * s of an inference BatchNormalization. */
static int bn_params(const qr_node *bn, int64_t m, float **s, float **t)
{
    if (bn->n_in < 5 || qr_attr_i(bn, "training_mode", 0))
        return 0;
    for (int j = 1; j < 5; j++) {
        const qr_value *v = bn->in[j];
        if (!v || !v->is_const || v->t.dtype != QR_F32 || v->t.ndim != 1 || v->t.dims[0] != m)
            return 0;
    }
    for (int j = 1; j < bn->n_out; j++)
        if (bn->out[j])
            return 0;
    float eps = qr_attr_f(bn, "epsilon", 1e-5f);
    const float *sc = bn->in[1]->t.data, *b = bn->in[2]->t.data, *mean = bn->in[3]->t.data, *var = bn->in[4]->t.data;
    *s = malloc(sizeof(float) * (size_t)m);
    *t = malloc(sizeof(float) * (size_t)m);
    if (!*s || !*t) {
        free(*s);
        free(*t);
        return 0;
    }
    for (int64_t c = 0; c < m; c++) {
        (*s)[c] = sc[c] / sqrtf(var[c] + eps);
        (*t)[c] = b[c] - mean[c] * (*s)[c];
    }
    return 1;
}

static qr_value *new_const(qr_graph *g, const char *name, const qr_tensor *t)
{
    qr_value *v = qr_graph_new_value(g, name);
    qr_value_set_const(g, v, t);
    return v && v->is_const ? v : NULL; /* NULL: out of memory, the graph marked */
}

/* Conv(x, W, B) -> per-channel affine y = s*c + t (a BatchNormalization, or a Mul or Add by a
 * constant)  ==>  Conv(x, W*s, B*s + t): the node after the Conv dies and the Conv writes its output. */
static void fold_into_conv(qr_graph *g, qr_node *conv, qr_node *after, const float *s, const float *t)
{
    qr_value *w = conv->in[1], *b = qr_node_input(conv, 2);
    int64_t m = w->t.dims[0], per = qr_tensor_numel(&w->t) / (m ? m : 1);
    qr_tensor nw = w->t, nb = {.dtype = QR_F32, .ndim = 1, .dims = {m}};
    nw.data = malloc(qr_tensor_nbytes(&w->t));
    nb.data = malloc(sizeof(float) * (size_t)m);
    if (nw.data && nb.data) {
        for (int64_t c = 0; c < m; c++) {
            for (int64_t i = 0; i < per; i++)
                ((float *)nw.data)[c * per + i] = ((const float *)w->t.data)[c * per + i] * s[c];
            ((float *)nb.data)[c] = (b ? ((const float *)b->t.data)[c] : 0.f) * s[c] + t[c];
        }
        qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * 3);
        if (!in || !(in[1] = new_const(g, w->name, &nw)) || !(in[2] = new_const(g, b ? b->name : w->name, &nb)))
            goto done; /* out of memory: not folded, the graph marked */
        in[0] = conv->in[0];
        conv->in = in;
        conv->n_in = 3;
        conv->out[0] = after->out[0];
        after->out[0]->producer = conv;
        after->dead = 1;
    }
done:
    free(nw.data);
    free(nb.data);
}

/* A Conv whose f32 weights (and bias, if any) are constants: m output channels, or 0. */
static int64_t foldable_conv(const qr_node *conv)
{
    if (!is_op(conv, "Conv") || conv->n_in < 2 || conv->n_out != 1)
        return 0;
    const qr_value *w = conv->in[1], *b = qr_node_input(conv, 2);
    if (!w || !w->is_const || w->t.dtype != QR_F32 || w->t.ndim < 3 ||
        (b && (!b->is_const || b->t.dtype != QR_F32 || qr_tensor_numel(&b->t) != w->t.dims[0])))
        return 0;
    return w->t.dims[0];
}

/* Mul or Add of x (rank r, m channels on axis 1) by a constant that holds one value or one per
 * channel and broadcasts to x's shape without changing it: s*x + t per channel. */
static int affine_params(const qr_node *n, const qr_value *x, int r, int64_t m, float **s, float **t)
{
    int mul = is_op(n, "Mul");
    if ((!mul && !is_op(n, "Add")) || n->n_in != 2 || n->n_out != 1 || !n->out[0] || n->out[0]->t.dtype != QR_F32)
        return 0;
    const qr_value *c = n->in[0] == x ? n->in[1] : n->in[0];
    if (!c || c == x || !c->is_const || c->t.dtype != QR_F32 || c->t.ndim > r)
        return 0;
    int64_t cn = qr_tensor_numel(&c->t);
    for (int d = 0; d < c->t.ndim; d++) {
        int axis = r - c->t.ndim + d;
        if (c->t.dims[d] != 1 && !(axis == 1 && c->t.dims[d] == m))
            return 0;
    }
    *s = malloc(sizeof(float) * (size_t)m);
    *t = malloc(sizeof(float) * (size_t)m);
    if (!*s || !*t) {
        free(*s);
        free(*t);
        return 0;
    }
    const float *cv = c->t.data;
    for (int64_t k = 0; k < m; k++) {
        float v = cv[cn == 1 ? 0 : k];
        (*s)[k] = mul ? v : 1.f;
        (*t)[k] = mul ? 0.f : v;
    }
    return 1;
}

/* Gemm(A, B, C) -> BN over columns  ==>  Gemm(A, B*s, s*(beta*C) + t) with beta = 1. */
static void fold_into_gemm(qr_graph *g, qr_node *gemm, qr_node *bn)
{
    qr_value *w = gemm->in[1], *c = qr_node_input(gemm, 2);
    if (!w->is_const || w->t.dtype != QR_F32 || w->t.ndim != 2)
        return;
    int transb = (int)qr_attr_i(gemm, "transB", 0);
    int64_t k = w->t.dims[transb ? 1 : 0], m = w->t.dims[transb ? 0 : 1];
    int64_t cn = c ? qr_tensor_numel(&c->t) : 0;
    if (c && (!c->is_const || c->t.dtype != QR_F32 || (cn != 1 && cn != m) || (c->t.ndim == 2 && c->t.dims[0] != 1)))
        return;
    float *s, *t;
    if (!bn_params(bn, m, &s, &t))
        return;
    float beta = qr_attr_f(gemm, "beta", 1.f);
    qr_tensor nw = w->t, nc = {.dtype = QR_F32, .ndim = 1, .dims = {m}};
    nw.data = malloc(qr_tensor_nbytes(&w->t));
    nc.data = malloc(sizeof(float) * (size_t)m);
    qr_attr *at = qr_arena_alloc(&g->arena, sizeof *at * (size_t)(gemm->n_attr + 1));
    qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * 3);
    if (nw.data && nc.data && at && in) {
        const float *wd = w->t.data;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < m; j++) {
                int64_t o = transb ? j * k + i : i * m + j;
                ((float *)nw.data)[o] = wd[o] * s[j];
            }
        for (int64_t j = 0; j < m; j++) {
            float cv = c ? ((const float *)c->t.data)[cn == 1 ? 0 : j] : 0.f;
            ((float *)nc.data)[j] = s[j] * beta * cv + t[j];
        }
        if (!(in[1] = new_const(g, w->name, &nw)) || !(in[2] = new_const(g, c ? c->name : w->name, &nc)))
            goto done; /* out of memory: not folded, the graph marked */
        int na = 0;
        for (int i = 0; i < gemm->n_attr; i++)
            if (strcmp(gemm->attr[i].name, "beta") != 0)
                at[na++] = gemm->attr[i];
        gemm->attr = at;
        gemm->n_attr = na;
        in[0] = gemm->in[0];
        gemm->in = in;
        gemm->n_in = 3;
        gemm->out[0] = bn->out[0];
        bn->out[0]->producer = gemm;
        bn->dead = 1;
    }
done:
    free(nw.data);
    free(nc.data);
    free(s);
    free(t);
}

qr_status qr_pass_fold_batchnorm(qr_graph *g, qr_error *e)
{
    /* Counted once: a fold moves the Conv's output to the folded node's output, which keeps its
     * readers, so no other count changes. Nodes are in topological order, so a chain
     * Conv -> Mul -> Add folds link by link. */
    int nv = g->n_values, *uses = count_uses(g);
    if (!uses)
        return qr_errorf(e, "out of memory folding BatchNormalization");
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        int bn = is_op(n, "BatchNormalization");
        if ((!bn && !is_op(n, "Mul") && !is_op(n, "Add")) || n->n_in < 1 || !n->out[0])
            continue;
        for (int j = 0; j < (bn ? 1 : n->n_in); j++) {
            qr_value *x = n->in[j];
            qr_node *p = x ? x->producer : NULL;
            if (!p || p->dead || x->is_output || x->id >= nv || uses[x->id] != 1 || p->n_out != 1)
                continue;
            float *s, *t;
            int64_t m = foldable_conv(p);
            if (m > 0 && (bn ? bn_params(n, m, &s, &t) : affine_params(n, x, p->in[1]->t.ndim, m, &s, &t))) {
                fold_into_conv(g, p, n, s, t);
                free(s);
                free(t);
                break;
            }
            if (bn && is_op(p, "Gemm") && p->n_in >= 2 && x->t.ndim == 2)
                fold_into_gemm(g, p, n);
        }
    }
    free(uses);
    return qr_graph_check_oom(g, e);
}

/* Symbolic shapes. Unknown input dims are bound to stand-in sizes and the
 * graph is inferred (evaluating small integer shape computations such as
 * Shape -> Gather -> Concat -> Reshape on the way). Two runs with different
 * stand-ins tell the dims that follow an input dim (same stand-in in both)
 * from fixed dims (same number in both) and from derived ones (neither),
 * which stay unknown. Best effort: a node that cannot be inferred leaves its
 * outputs unknown; errors surface when the graph runs on real inputs. */
#define SYM_SMALL 65536 /* elements: integer tensors (shapes, and indices such as the ScatterND of a
                         * slice assignment, Swin-T's masks) are evaluated up to this size */

static void sym_run(const qr_graph *g, qr_tensor *vt, int64_t base)
{
    int k_sym = 0;
    kargs ka;
    for (int i = 0; i < g->n_values; i++) {
        qr_value *v = g->values[i];
        qr_tensor *t = &vt[i];
        memset(t, 0, sizeof *t);
        t->ndim = -1;
        if (v->is_const) {
            *t = v->t; /* borrowed data: never freed below */
        } else if (v->is_input && v->t.ndim >= 0) {
            t->dtype = v->t.dtype;
            t->ndim = v->t.ndim;
            for (int d = 0; d < v->t.ndim; d++)
                t->dims[d] = v->t.dims[d] >= 0 ? v->t.dims[d] : base + k_sym++;
        }
    }
    if (!kargs_new(g, &ka))
        return; /* best effort: every node's outputs stay unknown */
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || !n->def)
            continue;
        const qr_tensor **in = ka.in;
        qr_tensor **outp = ka.outp;
        int ok = 1, data = 1;
        for (int j = 0; j < n->n_in; j++) {
            in[j] = n->in[j] ? &vt[n->in[j]->id] : NULL;
            if (in[j] && in[j]->ndim < 0)
                ok = 0;
            if (in[j] && !in[j]->data)
                data = 0;
        }
        kargs_clear_past(&ka, n->n_in);
        for (int j = 0; j < n->n_out; j++)
            ok &= n->out[j] != NULL;
        if (!ok)
            continue;
        for (int j = 0; j < n->n_out; j++) {
            outp[j] = &vt[n->out[j]->id];
            memset(outp[j], 0, sizeof **outp);
        }
        qr_error e = {{0}};
        qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = n->n_out, .in = in, .out = outp, .err = &e,
                     .shapes_only = 1};
        if (qr_op_infer(&k) != QR_OK) {
            for (int j = 0; j < n->n_out; j++)
                outp[j]->ndim = -1;
            continue;
        }
        if (!data && !op_shape_only(n))
            continue;
        int small = 1;
        for (int j = 0; j < n->n_out; j++)
            small &= qr_tensor_numel(outp[j]) <= SYM_SMALL &&
                     (qr_dtype_is_int(outp[j]->dtype) || outp[j]->dtype == QR_BOOL); /* a Where's condition */
        if (!small)
            continue;
        int alloc = 1;
        for (int j = 0; j < n->n_out; j++)
            alloc &= qr_tensor_alloc(outp[j], &e) == QR_OK;
        if (!alloc || qr_op_run(&k) != QR_OK)
            for (int j = 0; j < n->n_out; j++)
                qr_tensor_free(outp[j]);
    }
    kargs_free(&ka);
}

static void sym_free(const qr_graph *g, qr_tensor *vt)
{
    for (int i = 0; i < g->n_values; i++)
        if (!g->values[i]->is_const)
            qr_tensor_free(&vt[i]);
    free(vt);
}

qr_tensor *qr_pass_standin_types(const qr_graph *g, int64_t base)
{
    qr_tensor *vt = calloc((size_t)g->n_values + 1, sizeof *vt);
    if (vt)
        sym_run(g, vt, base);
    return vt;
}

void qr_pass_standin_free(const qr_graph *g, qr_tensor *vt, int n)
{
    /* values added since are not in vt; the first n are still what they were */
    for (int i = 0; vt && i < n && i < g->n_values; i++)
        if (!g->values[i]->is_const)
            qr_tensor_free(&vt[i]);
    free(vt);
}

void qr_pass_infer_symbolic(qr_graph *g)
{
    enum { BASE_A = 7919, BASE_B = 6007 }; /* stand-ins: primes no model is likely to use */
    qr_tensor *a = calloc((size_t)g->n_values + 1, sizeof *a), *b = calloc((size_t)g->n_values + 1, sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    sym_run(g, a, BASE_A);
    sym_run(g, b, BASE_B);
    /* Names of the stand-ins, in the order sym_run bound them (every one: a model may have any
     * number of symbolic input dims; without memory for the names, none is named). */
    int k_sym = 0;
    for (int i = 0; i < g->n_values; i++) {
        qr_value *v = g->values[i];
        if (!v->is_const && v->is_input)
            for (int d = 0; d < v->t.ndim; d++)
                k_sym += v->t.dims[d] < 0;
    }
    const char **names = calloc((size_t)k_sym + 1, sizeof *names);
    k_sym = 0;
    for (int i = 0; names && i < g->n_values; i++) {
        qr_value *v = g->values[i];
        if (!v->is_const && v->is_input)
            for (int d = 0; d < v->t.ndim; d++)
                if (v->t.dims[d] < 0)
                    names[k_sym++] = v->dim_param[d];
    }
    for (int i = 0; i < g->n_values; i++) {
        qr_value *v = g->values[i];
        if (v->is_const || v->is_input || qr_value_shape_known(v) || a[i].ndim < 0 || a[i].ndim != b[i].ndim)
            continue;
        if (v->t.ndim >= 0 && v->t.ndim != a[i].ndim)
            continue; /* disagrees with the model's own annotation: keep that */
        const char *dp[QR_MAX_DIMS] = {0};
        int64_t dims[QR_MAX_DIMS];
        for (int d = 0; d < a[i].ndim; d++) {
            int64_t x = a[i].dims[d], y = b[i].dims[d];
            dims[d] = x == y ? x : -1;
            if (x != y && x - BASE_A == y - BASE_B && x - BASE_A >= 0 && x - BASE_A < k_sym)
                dp[d] = names ? names[x - BASE_A] : NULL;
            else if (x != y && v->t.ndim == a[i].ndim)
                dp[d] = v->dim_param[d];
        }
        v->t.dtype = a[i].dtype;
        v->t.ndim = a[i].ndim;
        memcpy(v->t.dims, dims, sizeof(int64_t) * (size_t)a[i].ndim);
        memcpy(v->dim_param, dp, sizeof dp);
    }
    free(names);
    sym_free(g, a);
    sym_free(g, b);
}

void qr_pass_annotate_qdq(qr_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        int dq = !strcmp(n->op, "DequantizeLinear"), q = !strcmp(n->op, "QuantizeLinear");
        if (n->dead || n->domain[0] || (!dq && !q) || n->n_in < 2 || !n->in[1] || !n->in[1]->is_const ||
            (n->n_in > 2 && n->in[2] && !n->in[2]->is_const))
            continue;
        const qr_tensor *sc = &n->in[1]->t, *zp = n->n_in > 2 && n->in[2] ? &n->in[2]->t : NULL;
        int64_t cnt = qr_tensor_numel(sc);
        if (cnt < 1 || cnt > (1 << 20) || (zp && qr_tensor_numel(zp) != cnt))
            continue;
        /* Integer storage of at most 32 bits (the range below is computed in 64): a model
         * may declare any type here, and 1 << 63 is undefined. */
        qr_dtype st = zp ? zp->dtype : dq && n->in[0] ? n->in[0]->t.dtype : QR_U8;
        if (!qr_dtype_is_int(st) || qr_dtype_size(st) > 4 || !qr_dtype_is_float(sc->dtype))
            continue;
        qr_qinfo *qi = qr_arena_alloc(&g->arena, sizeof *qi);
        float *scale = qr_arena_alloc(&g->arena, sizeof(float) * (size_t)cnt);
        int32_t *zero = qr_arena_alloc(&g->arena, sizeof(int32_t) * (size_t)cnt);
        if (!qi || !scale || !zero)
            continue; /* out of memory: the graph marked, qr_graph_optimize reports it */
        qi->dtype = st;
        qi->axis = cnt > 1 ? (int)qr_attr_i(n, "axis", 1) : -1;
        qi->n = (int)cnt;
        qi->scale = scale;
        qi->zero = zero;
        for (int64_t k = 0; k < cnt; k++) {
            qi->scale[k] = (float)qr_get_f64(sc->data, sc->dtype, k);
            qi->zero[k] = zp ? (int32_t)qr_get_i64(zp->data, zp->dtype, k) : 0;
        }
        const qr_dtype_info *di = qr_dtype_get(qi->dtype);
        int bits = (int)di->size * 8;
        int64_t qmin = di->is_signed ? -((int64_t)1 << (bits - 1)) : 0, qmax = di->is_signed ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
        qi->clip_min = (double)(qmin - qi->zero[0]) * qi->scale[0];
        qi->clip_max = (double)(qmax - qi->zero[0]) * qi->scale[0];
        qi->acc = QR_UNDEF;
        /* The integer tensor and the real tensor it stands for share the parameters. */
        qr_value *real = dq ? n->out[0] : n->in[0], *ints = dq ? n->in[0] : n->out[0];
        if (real)
            real->q = qi;
        if (ints)
            ints->q = qi;
    }
}

/* A constant operand times a factor, as a new constant (the old one may have other users). */
static qr_value *scaled_const(qr_graph *g, const qr_value *v, float f)
{
    qr_tensor t = v->t;
    t.data = malloc(qr_tensor_nbytes(&v->t) + 1);
    if (!t.data)
        return NULL;
    for (int64_t i = 0; i < qr_tensor_numel(&v->t); i++)
        ((float *)t.data)[i] = ((const float *)v->t.data)[i] * f;
    qr_value *c = new_const(g, v->name, &t);
    free(t.data);
    return c;
}

qr_status qr_pass_fold_gemm_scales(qr_graph *g, qr_error *e)
{
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || !is_op(n, "Gemm") || n->n_in < 2 || !n->in[1])
            continue;
        float alpha = qr_attr_f(n, "alpha", 1.f), beta = qr_attr_f(n, "beta", 1.f);
        qr_value *w = n->in[1], *c = qr_node_input(n, 2);
        int fold_a = alpha != 1.f && w->is_const && w->t.dtype == QR_F32;
        int fold_b = beta != 1.f && (!c || (c->is_const && c->t.dtype == QR_F32));
        if (!fold_a && !fold_b)
            continue;
        qr_value *nw = fold_a ? scaled_const(g, w, alpha) : w;
        qr_value *nc = fold_b && c ? scaled_const(g, c, beta) : c;
        if (!nw || (c && !nc))
            return qr_errorf(e, "out of memory folding Gemm '%s'", n->name);
        qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * (size_t)n->n_in);
        qr_attr *at = qr_arena_alloc(&g->arena, sizeof *at * (size_t)(n->n_attr + 1));
        if (!in || !at)
            return qr_errorf(e, "out of memory folding Gemm '%s'", n->name);
        memcpy(in, n->in, sizeof *in * (size_t)n->n_in);
        in[1] = nw;
        if (n->n_in > 2)
            in[2] = nc;
        n->in = in;
        int na = 0;
        for (int k = 0; k < n->n_attr; k++)
            if (!(fold_a && !strcmp(n->attr[k].name, "alpha")) && !(fold_b && !strcmp(n->attr[k].name, "beta")))
                at[na++] = n->attr[k];
        n->attr = at;
        n->n_attr = na;
    }
    return QR_OK;
}

/* ---- DequantizeLinear(4-bit weight, blocks along K) -> MatMul  ==>  MatMulNBits ----
 * The weight-only export's form (opset 21, what w4-rtn.qrl writes) run as the MatMulNBits the
 * same integers make, on the packed int4 kernels (ops/q4gemm.h), at accuracy_level 0: f32
 * activations, the DequantizeLinear's own numerics (no rounding of A), where folding the pair
 * would have kept an f32 copy of the weight (8 times its bytes) for the f32 GEMM. x is INT4 or
 * UINT4 [K, N] read along axis 0 in blocks of block_size (a power of two >= 16) with a scale
 * [n_blocks, N] and a zero point of x's type or none, all constants; the MatMul reads it as B and
 * nothing else does. MatMulNBits' codes are unsigned: an INT4 q is q + 8 with zero point z + 8. */
static int int4_dq_fits(const qr_node *dq, const int *uses, int64_t *block)
{
    const qr_value *x = dq->n_in > 0 ? dq->in[0] : NULL, *sc = qr_node_input(dq, 1), *zp = qr_node_input(dq, 2);
    if (!x || !sc || !x->is_const || !sc->is_const || (zp && !zp->is_const) || dq->n_out != 1 || !dq->out[0] ||
        dq->out[0]->is_output || uses[dq->out[0]->id] != 1)
        return 0;
    if ((x->t.dtype != QR_I4 && x->t.dtype != QR_U4) || x->t.ndim != 2 || sc->t.dtype != QR_F32 || sc->t.ndim != 2 ||
        (zp && (zp->t.dtype != x->t.dtype || zp->t.ndim != 2)))
        return 0;
    int64_t K = x->t.dims[0], N = x->t.dims[1], b = qr_attr_i(dq, "block_size", 0), axis = qr_attr_i(dq, "axis", 1);
    int64_t nb = b > 0 ? (K + b - 1) / b : 0;
    int64_t odt = qr_attr_i(dq, "output_dtype", 0); /* 0: the scale's, 1: ONNX FLOAT */
    if ((axis != 0 && axis != -2) || b < 16 || (b & (b - 1)) || (odt != 0 && odt != 1) || sc->t.dims[0] != nb ||
        sc->t.dims[1] != N || (zp && (zp->t.dims[0] != nb || zp->t.dims[1] != N)))
        return 0;
    *block = b;
    return 1;
}

static qr_status int4_to_nbits(qr_graph *g, qr_node *mm, const qr_node *dq, int64_t block, qr_error *e)
{
    const qr_value *x = dq->in[0], *sc = dq->in[1], *zp = qr_node_input(dq, 2);
    int64_t K = x->t.dims[0], N = x->t.dims[1], nb = (K + block - 1) / block, zrow = (nb + 1) / 2;
    int off = x->t.dtype == QR_I4 ? 8 : 0, need_zero = 0;
    qr_tensor b = {.dtype = QR_U8, .ndim = 3, .dims = {N, nb, block / 2}}, s = {.dtype = QR_F32, .ndim = 1, .dims = {N * nb}};
    qr_tensor z = {.dtype = QR_U8, .ndim = 1, .dims = {N * zrow}};
    if (qr_tensor_alloc(&b, e) != QR_OK || qr_tensor_alloc(&s, e) != QR_OK || qr_tensor_alloc(&z, e) != QR_OK) {
        free(b.data), free(s.data);
        return QR_ERR;
    }
    memset(b.data, 0, qr_tensor_nbytes(&b));
    memset(z.data, 0, qr_tensor_nbytes(&z));
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            qr_nibble_set(b.data, (n * nb + k / block) * block + k % block,
                          (int)qr_get_i64(x->t.data, x->t.dtype, k * N + n) + off);
    for (int64_t bl = 0; bl < nb; bl++)
        for (int64_t n = 0; n < N; n++) {
            ((float *)s.data)[n * nb + bl] = ((const float *)sc->t.data)[bl * N + n];
            int zc = (zp ? (int)qr_get_i64(zp->t.data, zp->t.dtype, bl * N + n) : 0) + off;
            need_zero |= zc != 8;
            qr_nibble_set(z.data, n * zrow * 2 + bl, zc);
        }
    char name[1024];
    snprintf(name, sizeof name, "%s_nbits", x->name);
    qr_value *bv = new_const(g, name, &b), *sv = NULL, *zv = NULL;
    snprintf(name, sizeof name, "%s_nbits_scale", x->name);
    sv = bv ? new_const(g, name, &s) : NULL;
    snprintf(name, sizeof name, "%s_nbits_zero_point", x->name);
    zv = sv && need_zero ? new_const(g, name, &z) : NULL;
    free(b.data), free(s.data), free(z.data);
    qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * 4);
    const char *dom = qr_arena_strdup(&g->arena, "com.microsoft");
    if (!sv || (need_zero && !zv) || !in || !dom)
        return qr_errorf(e, "out of memory turning MatMul '%s' into a MatMulNBits", mm->name);
    in[0] = mm->in[0], in[1] = bv, in[2] = sv, in[3] = zv;
    mm->in = in;
    mm->n_in = zv ? 4 : 3;
    mm->op = "MatMulNBits";
    mm->domain = dom;
    mm->opset = 1;
    mm->def = qr_op_find("com.microsoft", "MatMulNBits");
    mm->n_attr = 0;
    qr_node_add_attr_i(g, mm, "K", K);
    qr_node_add_attr_i(g, mm, "N", N);
    qr_node_add_attr_i(g, mm, "bits", 4);
    qr_node_add_attr_i(g, mm, "block_size", block);
    return qr_graph_check_oom(g, e);
}

qr_status qr_pass_int4_matmul(qr_graph *g, qr_error *e)
{
    int *uses = count_uses(g), nd = g->n_nodes;
    if (!uses)
        return qr_errorf(e, "out of memory");
    qr_node **producer = calloc((size_t)g->n_values + 1, sizeof *producer);
    if (!producer) {
        free(uses);
        return qr_errorf(e, "out of memory");
    }
    for (int i = 0; i < nd; i++)
        for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_out; j++)
            if (g->nodes[i]->out[j])
                producer[g->nodes[i]->out[j]->id] = g->nodes[i];
    qr_status st = QR_OK;
    for (int i = 0; i < nd && st == QR_OK; i++) {
        qr_node *mm = g->nodes[i];
        /* A's shape is not known yet (inferred after this pass): MatMulNBits takes any A whose last
         * dimension is K, with MatMul's output shape, and refuses another as MatMul would */
        if (!is_op(mm, "MatMul") || mm->n_in != 2 || !mm->in[0] || !mm->in[1])
            continue;
        qr_node *dq = producer[mm->in[1]->id];
        int64_t block;
        if (!dq || !is_op(dq, "DequantizeLinear") || !int4_dq_fits(dq, uses, &block))
            continue;
        if ((st = int4_to_nbits(g, mm, dq, block, e)) == QR_OK)
            dq->dead = 1;
    }
    free(uses);
    free(producer);
    return st;
}

qr_status qr_graph_optimize(qr_graph *g, qr_error *e)
{
    qr_pass_annotate_qdq(g); /* before folding turns constant DequantizeLinears into plain floats */
    if (qr_pass_remove_identity(g, e) != QR_OK || qr_pass_int4_matmul(g, e) != QR_OK ||
        qr_pass_dynamic_rows(g, e) != QR_OK ||
        qr_pass_infer_and_fold(g, e) != QR_OK ||
        qr_pass_fold_batchnorm(g, e) != QR_OK || qr_pass_fold_gemm_scales(g, e) != QR_OK)
        return QR_ERR;
    qr_graph_compact(g);
    qr_pass_infer_symbolic(g);
    return qr_graph_check_oom(g, e);
}
