/* The f32 graph channels-last (qr_pass_nhwc_f32, passes.h), as quantizer/layout.c does for the
 * integer graph: one walk in topological order. A Conv that sconv runs (runtime/ops/sconv.h)
 * becomes QrlConvF32Nhwc and writes an NHWC twin of its output (reading an NCHW input itself, so a
 * first layer needs no transpose); MaxPool and GlobalAveragePool whose input has a twin, and
 * pointwise ops (Relu, Add, Clip, HardSigmoid, Mul, ...) one of whose inputs has, run on the twins
 * (the executor then fuses a Relu or Clip into the convolution before it, as into a Conv)
 * too. A value some NCHW reader or the graph's outputs still need gets its NCHW form back from its
 * twin by one Transpose, so a region has no transpose inside. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "options.h"
#include "passes.h"
#include "ops/sconv.h"
#include "twins.h"

typedef qr_twins lay;

static int f32_4d(const qr_value *v)
{
    return v && v->t.ndim == 4 && v->t.dtype == QR_F32;
}

static int is_op(const qr_node *n, const char *op)
{
    return !n->domain[0] && !strcmp(n->op, op);
}

/* A Conv sconv runs: f32, 2-D, constant weights (and bias), group 1 or depthwise, channels known. */
static int conv_capable(const qr_node *n)
{
    const qr_value *x = n->in[0], *w = n->n_in > 1 ? n->in[1] : NULL, *b = n->n_in > 2 ? n->in[2] : NULL;
    if (!is_op(n, "Conv") || !f32_4d(x) || !w || !w->is_const || w->t.ndim != 4 || w->t.dtype != QR_F32 ||
        (b && (!b->is_const || b->t.dtype != QR_F32)) || !f32_4d(n->out[0]))
        return 0;
    int64_t group = qr_attr_i(n, "group", 1), m = w->t.dims[0], c = x->t.dims[1];
    if (c <= 0)
        return 0;
    if (group == 1)
        return w->t.dims[1] == c;
    return group == c && m == c && w->t.dims[1] == 1 && w->t.dims[2] * w->t.dims[3] <= QR_SCONV_DW_TAPS;
}

/* An op whose every non-constant input is 4-D f32 (the output's shape, or [N, C, 1, 1]: a gate
 * broadcast per channel, which broadcasts as [N, 1, 1, C] in NHWC) and whose constants are single
 * values: its elements do not care about the layout. */
static int pointwise_capable(const qr_node *n)
{
    /* Clip is element by element too (its bounds single values), though not marked pointwise */
    if (!n->def || !(n->def->pointwise || is_op(n, "Clip")) || !f32_4d(n->out[0]))
        return 0;
    const int64_t *od = n->out[0]->t.dims;
    int any = 0;
    for (int i = 0; i < n->n_in; i++) {
        const qr_value *v = n->in[i];
        if (!v)
            continue;
        if (v->is_const) {
            if (qr_tensor_numel(&v->t) != 1)
                return 0;
            continue;
        }
        if (!f32_4d(v))
            return 0;
        const int64_t *d = v->t.dims;
        int same = !memcmp(d, od, 4 * sizeof *d), gate = d[0] == od[0] && d[1] == od[1] && d[2] == 1 && d[3] == 1;
        if (!same && !gate)
            return 0;
        any = 1;
    }
    return any;
}

/* The live nodes that read v (up to max of them into u; u NULL: only counted). */
static int readers(const qr_graph *g, const qr_value *v, qr_node **u, int max)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        int reads = 0;
        for (int j = 0; !n->dead && j < n->n_in; j++)
            reads |= n->in[j] == v;
        if (reads && u && c < max)
            u[c] = n;
        c += reads;
    }
    return c;
}

/* A convolution's reader(s) that its epilogue takes over (qr_sconv_epi): a HardSigmoid and a Mul
 * of the output by it (hard swish, MobileNetV3's: 25% of its batch-64 time as two ops over
 * memory), or an Add of an operand of the output's shape that already has a twin (a residual,
 * ResNet's; a Relu after it is then fused by the executor as after any Conv). The fused nodes go
 * dead and the convolution writes what the last of them wrote. */
static int fuse_epilogue(lay *L, qr_node *n)
{
    qr_value *out = n->out[0];
    qr_node *u[3];
    if (out->is_output)
        return 0;
    int nu = readers(L->g, out, u, 3);
    if (nu == 2) {
        qr_node *hs = is_op(u[0], "HardSigmoid") ? u[0] : is_op(u[1], "HardSigmoid") ? u[1] : NULL;
        qr_node *mul = hs == u[0] ? u[1] : u[0];
        qr_value *h = hs && hs->n_out == 1 ? hs->out[0] : NULL;
        if (h && hs->n_in == 1 && !h->is_output && is_op(mul, "Mul") && mul->n_in == 2 && mul->n_out == 1 &&
            ((mul->in[0] == out && mul->in[1] == h) || (mul->in[1] == out && mul->in[0] == h)) &&
            readers(L->g, h, NULL, 0) == 1 && f32_4d(mul->out[0])) {
            qr_node_add_attr_i(L->g, n, "hswish", 1);
            qr_node_add_attr_f(L->g, n, "hs_alpha", qr_attr_f(hs, "alpha", 0.2f));
            qr_node_add_attr_f(L->g, n, "hs_beta", qr_attr_f(hs, "beta", 0.5f));
            hs->dead = mul->dead = 1;
            n->out[0] = mul->out[0];
            mul->out[0]->producer = n;
            out->producer = NULL;
            return 1;
        }
    }
    if (nu == 1 && is_op(u[0], "Add") && u[0]->n_in == 2 && u[0]->n_out == 1 && f32_4d(u[0]->out[0])) {
        qr_node *add = u[0];
        qr_value *r = add->in[0] == out ? add->in[1] : add->in[0];
        const int64_t *a = r ? r->t.dims : NULL, *b = out->t.dims;
        if (r && r != out && qr_twins_has(L, r) && f32_4d(r) && a[0] == b[0] && a[1] == b[1] && a[2] == b[2] &&
            a[3] == b[3] && a[1] > 0 && a[2] > 0 && a[3] > 0) {
            qr_value **in = qr_arena_alloc(&L->g->arena, 4 * sizeof *in);
            if (!in)
                return -1;
            for (int i = 0; i < 4; i++)
                in[i] = i < n->n_in ? n->in[i] : NULL;
            in[3] = L->twin[r->id];
            n->in = in;
            n->n_in = 4;
            add->dead = 1;
            n->out[0] = add->out[0];
            add->out[0]->producer = n;
            out->producer = NULL;
            return 1;
        }
    }
    return 0;
}

/* n becomes the channels-last op (NULL: the same op on the twins) writing its output's twin. */
static int convert(lay *L, qr_node *n, const char *op)
{
    int conv = op && !strcmp(op, "QrlConvF32Nhwc");
    for (int i = 0; i < (conv || op ? 1 : n->n_in); i++) {
        qr_value *v = n->in[i];
        if (!v || v->is_const)
            continue;
        if (conv && !qr_twins_has(L, v)) { /* reads its NCHW input itself */
            qr_node_add_attr_i(L->g, n, "x_nchw", 1);
            continue;
        }
        if (!(n->in[i] = qr_twins_nhwc_of(L, v)))
            return -1;
    }
    if (conv && fuse_epilogue(L, n) < 0)
        return -1;
    if (!qr_twins_write_twin(L, n))
        return -1;
    if (op) {
        if (!(n->op = qr_arena_strdup(&L->g->arena, op)) || !(n->domain = qr_arena_strdup(&L->g->arena, "qrl")))
            return -1;
        n->def = qr_op_find("qrl", op);
        n->opset = 1;
    }
    return n->def ? 0 : -1;
}

qr_status qr_pass_nhwc_f32(qr_graph *g, int *changed, qr_error *e)
{
    *changed = 0;
    if (qr_options_get()->nhwc == QR_NHWC_OFF || !qr_sconv_available())
        return QR_OK;
    int nnodes = g->n_nodes;
    lay L;
    if (qr_twins_init(&L, g))
        return qr_errorf(e, "out of memory");
    int st = 0, any = 0;
    for (int i = 0; i < nnodes && !st; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || n->n_out != 1 || !n->out[0] || n->n_in < 1 || !n->in[0])
            continue;
        const char *op = NULL;
        int ok = 0;
        if (conv_capable(n)) {
            op = "QrlConvF32Nhwc";
            ok = 1;
        } else if (is_op(n, "MaxPool") && qr_twins_has(&L, n->in[0]) && f32_4d(n->out[0]) &&
                   qr_attr_i(n, "storage_order", 0) == 0) {
            op = "QrlMaxPoolF32Nhwc";
            ok = 1;
        } else if (is_op(n, "GlobalAveragePool") && qr_twins_has(&L, n->in[0]) && f32_4d(n->out[0])) {
            op = "QrlGlobalAveragePoolF32Nhwc";
            ok = 1;
        } else if (pointwise_capable(n)) {
            /* joins a region only: alone it would only add transposes */
            for (int j = 0; !ok && j < n->n_in; j++)
                ok = qr_twins_has(&L, n->in[j]);
        }
        if (ok) {
            st = convert(&L, n, op);
            any = 1;
        }
    }
    if (!st && any)
        st = qr_twins_restore_nchw(&L);
    qr_twins_free(&L);
    if (st)
        return qr_errorf(e, "out of memory");
    if (qr_graph_check_oom(g, e) != QR_OK)
        return QR_ERR;
    *changed = any;
    if (!any)
        return QR_OK;
    qr_graph_compact(g); /* the fused epilogues' nodes */
    return qr_graph_toposort(g, e);
}
