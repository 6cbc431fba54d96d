/* The opset upgrade: every default-domain node older than the target opset
 * (13 at most) is rewritten into the form that opset defines, computing the
 * same results, so an old model can be quantized with what opset 13 allows
 * (per-axis DequantizeLinear) and exported as a valid opset-13 model.
 *
 * What changed in QRL's op table between opsets 1 and 13 (ONNX's operator
 * changelog; tools/opset_changes.py lists each op's schema versions from
 * onnx.defs), and what the pass does about it:
 *
 *   attribute -> input        Slice (10: starts, ends, axes), TopK (10: k),
 *                             Pad (11: pads, value), Clip (11: min, max),
 *                             Dropout (12: ratio; training from is_test=0),
 *                             Split, Squeeze, Unsqueeze, ReduceSum (13:
 *                             split/axes), Reshape (5: shape). Lists become
 *                             int64 initializers, scalars 0-D initializers
 *                             of the data's type.
 *   new semantics             Softmax, LogSoftmax, Hardmax (13: one axis
 *                             instead of the input coerced to 2-D at axis):
 *                             a last axis (or only size-1 dims after it)
 *                             keeps the node, else Flatten(axis) -> op on
 *                             the last axis -> Reshape to the input's shape.
 *                             Resize-10 and Upsample (deprecated at 10) ->
 *                             Resize-13: asymmetric coordinates, nearest
 *                             rounding down when upscaling and up when
 *                             downscaling (two Resizes when axes do both).
 *                             PRelu (7: a 1-D slope of C per channel): the
 *                             slope shaped [C, 1, ...]. BatchNormalization
 *                             (9: spatial=0 with per-position parameters):
 *                             Mul + Add by per-position constants.
 *   renamed                   Scatter (deprecated at 11) -> ScatterElements.
 *   attributes dropped        broadcast/axis of binary ops and Gemm (7:
 *                             numpy broadcasting; import refused what it
 *                             would change), is_test, spatial (BatchNorm,
 *                             Dropout), consumed_inputs.
 *   defaults made explicit    Concat's axis (4: required; was 1).
 *   nothing to do             type lists widened (Neg..Reciprocal, Add..Div,
 *                             Pow, Equal, Less, Greater, Cast, Identity,
 *                             Reshape, Transpose, Shape, Size, Tile, Expand,
 *                             MatMul, Gemm, LRN, SpaceToDepth, Gather*,
 *                             ScatterND, Mod, IsNaN, Sign, Erf, NonZero, MVN,
 *                             QuantizeLinear/DequantizeLinear (13: axis, a
 *                             no-op for their scalar scales), Reduce* other
 *                             than ReduceSum (axes stay attributes until 18);
 *                             negative axes allowed (Concat, Flatten, Gather,
 *                             Split, Squeeze, Unsqueeze, Reduce*, ArgMax/Min,
 *                             Compress, OneHot, TopK, DepthToSpace); new
 *                             attributes whose defaults are the old behaviour
 *                             (MaxPool storage_order/ceil_mode/dilations,
 *                             AveragePool count_include_pad/ceil_mode,
 *                             ArgMax/Min select_last_index, TopK largest/
 *                             sorted, DepthToSpace mode, GatherND batch_dims,
 *                             Conv/ConvTranspose defaults, Gemm's optional C,
 *                             Max/Min/Sum/Mean broadcasting); ops new since
 *                             opset 7 (their first version is the one 13 has).
 *
 * Only the node's opset changes for the last group: the runtime's kernels
 * read k->opset, so a node upgraded in form must also carry the new opset. */
#include "passes.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

#define UP_MAX_TO 13
/* Stand-in sizes for unknown input dims while types are inferred (passes.c's primes). */
#define UP_STANDIN 7919

typedef struct up {
    qr_graph *g;
    qr_error *e;
    int to;
    qr_tensor *vt; /* types before the rewrite, by value id (qr_pass_standin_types) */
    int nvt;
} up;

/* ------------------------------------------------------------ helpers */

static int is(const qr_node *n, const char *op)
{
    return strcmp(n->op, op) == 0;
}

/* The type and shape inference gave v before the rewrite (ndim < 0: unknown). */
static const qr_tensor *vtype(const up *u, const qr_value *v)
{
    if (qr_value_shape_known(v) || !u->vt || v->id >= u->nvt || u->vt[v->id].ndim < 0)
        return &v->t;
    return &u->vt[v->id];
}

/* v's element type. When inference could not tell, the first floating-point
 * input of its producer's (recursively) decides: the ops that ask (Clip, Pad)
 * take float types only, and a float op's output has its float inputs' type. */
static qr_dtype float_dtype(const up *u, const qr_value *v, int depth)
{
    qr_dtype t = vtype(u, v)->dtype;
    if (t != QR_UNDEF || !v->producer || depth > 64)
        return t;
    const qr_node *p = v->producer;
    if (!p->domain[0] && is(p, "Cast"))
        return qr_dtype_from_onnx((int)qr_attr_i(p, "to", 0));
    for (int j = 0; j < p->n_in; j++)
        if (p->in[j]) {
            qr_dtype d = float_dtype(u, p->in[j], depth + 1);
            if (qr_dtype_is_float(d))
                return d;
        }
    return QR_UNDEF;
}

static qr_dtype data_dtype(const up *u, const qr_value *v)
{
    qr_dtype t = float_dtype(u, v, 0);
    return t == QR_UNDEF ? QR_F32 : t; /* the schemas' only common case left */
}

static char *name2(up *u, const char *a, const char *b)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%.300s_%s", a && *a ? a : "upgrade", b);
    return qr_arena_strdup(&u->g->arena, buf);
}

/* A new int64 initializer: 1-D of n values, or 0-D (scalar) when n < 0 (value v[0]). */
static qr_value *const_i64(up *u, const qr_node *n, const char *what, int count, const int64_t *v)
{
    qr_tensor t = {.dtype = QR_I64, .ndim = count < 0 ? 0 : 1, .dims = {count < 0 ? 1 : count}};
    int64_t one = count < 0 ? v[0] : 0;
    t.data = count < 0 ? (void *)&one : (void *)v;
    if (count == 0)
        t.data = &one; /* an empty tensor still needs a valid pointer to copy from */
    qr_value *c = qr_graph_new_value(u->g, name2(u, n->name, what));
    qr_value_set_const(u->g, c, &t);
    return c && c->is_const ? c : NULL; /* NULL: out of memory, the graph marked */
}

/* A new 0-D initializer of type dt holding x (converted as the kernels convert). */
static qr_value *const_scalar(up *u, const qr_node *n, const char *what, qr_dtype dt, double x)
{
    unsigned char buf[16] = {0};
    qr_set_f64(buf, dt, 0, x);
    qr_tensor t = {.dtype = dt, .ndim = 0, .data = buf};
    qr_value *c = qr_graph_new_value(u->g, name2(u, n->name, what));
    qr_value_set_const(u->g, c, &t);
    return c && c->is_const ? c : NULL; /* NULL: out of memory, the graph marked */
}

static void drop_attr(qr_node *n, const char *name)
{
    int k = 0;
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) != 0)
            n->attr[k++] = n->attr[i];
    n->n_attr = k;
}

static void set_attr_i(up *u, qr_node *n, const char *name, int64_t v)
{
    drop_attr(n, name);
    qr_node_add_attr_i(u->g, n, name, v);
}

/* Sets input i of n (growing the input list; inputs between stay absent). */
static void set_input(up *u, qr_node *n, int i, qr_value *v)
{
    if (i >= n->n_in) {
        qr_value **in = qr_arena_alloc(&u->g->arena, sizeof *in * (size_t)(i + 1));
        if (!in)
            return; /* out of memory: the graph marked, upgrade_node reports it */
        memcpy(in, n->in, sizeof *in * (size_t)n->n_in);
        n->in = in;
        n->n_in = i + 1;
    }
    n->in[i] = v;
}

/* Moves an ints attribute to input i as an int64 initializer; no-op when absent. */
static void ints_to_input(up *u, qr_node *n, const char *attr, int i)
{
    const int64_t *v;
    int c = qr_attr_ints(n, attr, &v);
    if (c < 0)
        return;
    set_input(u, n, i, const_i64(u, n, attr, c, v));
    drop_attr(n, attr);
}

static qr_node *new_node(up *u, const char *op, const char *name, int n_in, int n_out)
{
    qr_node *m = qr_graph_add_node(u->g, op, name, n_in, n_out);
    if (!m)
        return NULL;
    m->def = qr_op_find("", op);
    m->opset = u->to;
    return m;
}

static qr_status fail(up *u, const qr_node *n, const char *why)
{
    return qr_errorf(u->e, "node '%s' (%s, opset %d): cannot upgrade to opset %d: %s", n->name, n->op, n->opset,
                     u->to, why);
}

static qr_status out_of_memory(up *u)
{
    return qr_errorf(u->e, "out of memory");
}

/* ------------------------------------------------------------ the ops */

/* Softmax, LogSoftmax, Hardmax before 13 work on the input coerced to 2-D at
 * axis (default 1): one group is the whole flattened tail. */
static qr_status up_coerced(up *u, qr_node *n)
{
    qr_value *x = n->in[0], *y = n->out[0];
    int64_t axis = qr_attr_i(n, "axis", 1);
    const qr_tensor *xt = vtype(u, x);
    if (xt->ndim >= 1 && axis >= -xt->ndim && axis < xt->ndim) {
        int a = (int)(axis < 0 ? axis + xt->ndim : axis), tail = 1;
        for (int d = a + 1; d < xt->ndim; d++)
            tail &= xt->dims[d] == 1; /* stand-in dims are never 1 */
        if (tail) { /* the flattened tail is this axis alone: the same groups */
            set_attr_i(u, n, "axis", a);
            return QR_OK;
        }
    }
    if (!x || !y)
        return QR_OK; /* nothing computed: an error the kernel reports either way */
    qr_node *fl = new_node(u, "Flatten", name2(u, n->name, "flatten"), 1, 1);
    if (!fl || !(fl->out[0] = qr_graph_new_value(u->g, name2(u, y->name, "2d"))))
        return out_of_memory(u);
    fl->in[0] = x;
    qr_node_add_attr_i(u->g, fl, "axis", axis);
    qr_value *shape = NULL;
    if (qr_value_shape_known(x)) {
        shape = const_i64(u, n, "shape", x->t.ndim, x->t.dims);
    } else {
        qr_node *sh = new_node(u, "Shape", name2(u, n->name, "shape"), 1, 1);
        if (sh && (sh->out[0] = shape = qr_graph_new_value(u->g, name2(u, x->name, "shape"))))
            sh->in[0] = x;
    }
    qr_node *rs = new_node(u, "Reshape", name2(u, n->name, "reshape"), 2, 1);
    qr_value *flat = qr_graph_new_value(u->g, name2(u, y->name, "flat"));
    if (!shape || !rs || !flat)
        return out_of_memory(u);
    rs->in[0] = n->out[0] = flat;
    rs->in[1] = shape;
    rs->out[0] = y;
    n->in[0] = fl->out[0];
    set_attr_i(u, n, "axis", -1);
    return QR_OK;
}

/* Resize-10 and Upsample: asymmetric coordinates (x_in = x_out / scale) and,
 * for nearest, floor when upscaling and ceil when downscaling (runtime/ops/
 * resize.c, N_SIMPLE). Resize-13 takes one nearest_mode for all axes, so a
 * node whose constant scales do both becomes two Resizes, one per direction
 * (nearest interpolation is separable: the axes do not interact). */
static qr_status up_resize(up *u, qr_node *n)
{
    qr_value *x = n->in[0], *scales = qr_node_input(n, 1);
    if (!scales) {
        const float *f;
        int c = qr_attr_floats(n, "scales", &f);
        if (c < 0)
            return fail(u, n, "the scales are missing");
        qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {c}, .data = (void *)f};
        float dummy = 0;
        if (!c)
            t.data = &dummy;
        scales = qr_graph_new_value(u->g, name2(u, n->name, "scales"));
        qr_value_set_const(u->g, scales, &t);
        if (!scales || !scales->is_const)
            return out_of_memory(u);
    }
    const char *mode = qr_attr_s(n, "mode", "nearest");
    if (!strcmp(mode, "bilinear"))
        mode = "linear"; /* Upsample-1's name for it */
    int nearest = !strcmp(mode, "nearest"), up_axes = 0, down_axes = 0, nsc = 0;
    double sc[QR_MAX_DIMS];
    if (nearest && scales->is_const && qr_dtype_is_float(scales->t.dtype)) {
        int64_t c = qr_tensor_numel(&scales->t);
        if (c > QR_MAX_DIMS)
            return fail(u, n, "more scales than dims");
        nsc = (int)c;
        for (int i = 0; i < nsc; i++) {
            sc[i] = qr_get_f64(scales->t.data, scales->t.dtype, i);
            up_axes += sc[i] > 1;
            down_axes += sc[i] < 1;
        }
    } else if (nearest && is(n, "Resize")) {
        /* Upsample's scales are >= 1 by its definition; Resize-10's could go either way. */
        return fail(u, n, "nearest with scales computed at run time: opset 10 floors when upscaling and ceils "
                          "when downscaling, and no single opset-13 nearest_mode does both");
    }
    n->n_attr = 0; /* Resize-13's attributes are all set below; scales/mode of the old forms go */
    n->op = "Resize";
    n->def = qr_op_find("", "Resize");
    /* roi is optional from 13; Resize-11 and 12 take an empty one */
    qr_value *roi = NULL;
    if (u->to < 13) {
        float none = 0;
        qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {0}, .data = &none};
        roi = qr_graph_new_value(u->g, name2(u, n->name, "roi"));
        qr_value_set_const(u->g, roi, &t);
        if (!roi || !roi->is_const)
            return out_of_memory(u);
    }
    qr_value *in[3] = {x, roi, scales};
    if (!(n->in = qr_arena_memdup(&u->g->arena, in, sizeof in)))
        return out_of_memory(u);
    n->n_in = 3;
    qr_node_add_attr_s(u->g, n, "mode", mode);
    qr_node_add_attr_s(u->g, n, "coordinate_transformation_mode", "asymmetric");
    if (!nearest)
        return QR_OK;
    if (!(up_axes && down_axes)) {
        qr_node_add_attr_s(u->g, n, "nearest_mode", down_axes ? "ceil" : "floor");
        return QR_OK;
    }
    /* Upscaled axes first (floor), then downscaled ones (ceil), each with scale 1 elsewhere. */
    float s1[QR_MAX_DIMS], s2[QR_MAX_DIMS];
    for (int i = 0; i < nsc; i++) {
        s1[i] = sc[i] > 1 ? (float)sc[i] : 1.0f;
        s2[i] = sc[i] < 1 ? (float)sc[i] : 1.0f;
    }
    qr_tensor t1 = {.dtype = QR_F32, .ndim = 1, .dims = {nsc}, .data = s1}, t2 = t1;
    t2.data = s2;
    if (scales->t.dtype != QR_F32) /* keep exactly the scale a double or half input gave */
        for (int i = 0; i < nsc; i++)
            if ((sc[i] > 1 && (double)s1[i] != sc[i]) || (sc[i] < 1 && (double)s2[i] != sc[i]))
                return fail(u, n, "mixed up- and downscaling by scales float32 cannot hold");
    qr_value *up1 = qr_graph_new_value(u->g, name2(u, n->name, "scales_up"));
    qr_value *dn = qr_graph_new_value(u->g, name2(u, n->name, "scales_down"));
    qr_value_set_const(u->g, up1, &t1);
    qr_value_set_const(u->g, dn, &t2);
    if (!up1 || !up1->is_const || !dn || !dn->is_const)
        return out_of_memory(u);
    n->in[2] = up1;
    qr_node_add_attr_s(u->g, n, "nearest_mode", "floor");
    qr_value *y = n->out[0];
    qr_node *r2 = new_node(u, "Resize", name2(u, n->name, "down"), 3, 1);
    qr_value *mid = qr_graph_new_value(u->g, name2(u, y ? y->name : n->name, "up"));
    if (!r2 || !mid)
        return out_of_memory(u);
    r2->in[0] = n->out[0] = mid;
    r2->in[1] = n->in[1];
    r2->in[2] = dn;
    r2->out[0] = y;
    qr_node_add_attr_s(u->g, r2, "mode", "nearest");
    qr_node_add_attr_s(u->g, r2, "coordinate_transformation_mode", "asymmetric");
    qr_node_add_attr_s(u->g, r2, "nearest_mode", "ceil");
    return QR_OK;
}

/* BatchNormalization before 9: spatial=0 normalizes per channel and position
 * (parameters of C x D1 x ... x Dn values). Opset 9 has no such form: with
 * constant parameters it is y = x * a + b, a = scale / sqrt(var + eps) and
 * b = B - mean * a per position (what the kernel computes, in double). */
static qr_status up_batchnorm(up *u, qr_node *n)
{
    int spatial = n->opset < 9 ? (int)qr_attr_i(n, "spatial", 1) : 1;
    drop_attr(n, "spatial");
    drop_attr(n, "is_test");
    drop_attr(n, "consumed_inputs");
    if (spatial || n->n_in < 5)
        return QR_OK;
    const qr_tensor *xt = vtype(u, n->in[0]);
    if (xt->ndim < 2)
        return fail(u, n, "spatial=0 needs an input of known rank");
    int64_t c = xt->dims[1], np = -1;
    for (int j = 1; j < 5; j++) {
        const qr_value *p = n->in[j];
        if (!p || !p->is_const || !qr_dtype_is_float(p->t.dtype))
            return fail(u, n, "spatial=0 needs constant float parameters");
        np = qr_tensor_numel(&p->t);
    }
    if (np == c)
        return QR_OK; /* one value per channel: the same as spatial=1 */
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] && (n->out[j]->is_output || qr_graph_use_count(u->g, n->out[j])))
            return fail(u, n, "spatial=0 with its mean/var outputs used");
    qr_tensor a = {.dtype = xt->dtype, .ndim = xt->ndim - 1}, b;
    int64_t per = 1;
    for (int d = 1; d < xt->ndim; d++) {
        a.dims[d - 1] = xt->dims[d];
        per *= xt->dims[d];
    }
    if (per != np || per <= 0)
        return fail(u, n, "spatial=0 parameters do not match the input's C x D1 x ... dims");
    b = a;
    if (qr_tensor_alloc(&a, u->e) != QR_OK || qr_tensor_alloc(&b, u->e) != QR_OK) {
        qr_tensor_free(&a);
        return QR_ERR;
    }
    double eps = qr_attr_f(n, "epsilon", 1e-5f);
    const qr_tensor *sc = &n->in[1]->t, *bi = &n->in[2]->t, *mean = &n->in[3]->t, *var = &n->in[4]->t;
    for (int64_t i = 0; i < np; i++) {
        double ai = qr_get_f64(sc->data, sc->dtype, i) / sqrt(qr_get_f64(var->data, var->dtype, i) + eps);
        qr_set_f64(a.data, a.dtype, i, ai);
        qr_set_f64(b.data, b.dtype, i, qr_get_f64(bi->data, bi->dtype, i) - qr_get_f64(mean->data, mean->dtype, i) * ai);
    }
    qr_value *av = qr_graph_new_value(u->g, name2(u, n->name, "a")), *bv = qr_graph_new_value(u->g, name2(u, n->name, "b"));
    qr_value_set_const(u->g, av, &a);
    qr_value_set_const(u->g, bv, &b);
    qr_tensor_free(&a);
    qr_tensor_free(&b);
    qr_value *y = n->out[0];
    qr_node *add = new_node(u, "Add", name2(u, n->name, "add"), 2, 1);
    qr_value *in[2] = {n->in[0], av};
    qr_value **nin = qr_arena_memdup(&u->g->arena, in, sizeof in);
    qr_value *scaled = qr_graph_new_value(u->g, name2(u, y ? y->name : n->name, "scaled"));
    if (!av || !av->is_const || !bv || !bv->is_const || !add || !nin || !scaled)
        return out_of_memory(u);
    /* n becomes the Mul */
    n->op = "Mul";
    n->def = qr_op_find("", "Mul");
    n->n_attr = 0;
    n->in = nin;
    n->n_in = 2;
    n->n_out = 1;
    n->out[0] = scaled;
    add->in[0] = n->out[0];
    add->in[1] = bv;
    add->out[0] = y;
    return QR_OK;
}

/* PRelu before 7: a 1-D slope as long as X's channel axis applies per channel. */
static qr_status up_prelu(up *u, qr_node *n)
{
    qr_value *s = n->in[1];
    const qr_tensor *xt = vtype(u, n->in[0]), *st = vtype(u, s);
    if (st->ndim != 1 || st->dims[0] == 1)
        return QR_OK; /* numpy broadcasting already */
    if (xt->ndim < 0 || (xt->ndim >= 2 && xt->dims[1] < 0))
        return fail(u, n, "a 1-D slope with an input of unknown rank or channels");
    if (xt->ndim < 2 || st->dims[0] != xt->dims[1] || xt->ndim == 2)
        return QR_OK; /* not the per-channel case, or [N, C] where both rules agree */
    int64_t axes[QR_MAX_DIMS];
    for (int d = 1; d < xt->ndim - 1; d++)
        axes[d - 1] = d;
    qr_node *un = new_node(u, "Unsqueeze", name2(u, n->name, "slope"), 2, 1);
    if (!un || !(un->in[1] = const_i64(u, n, "slope_axes", xt->ndim - 2, axes))
        || !(un->out[0] = qr_graph_new_value(u->g, name2(u, s->name, "per_channel"))))
        return out_of_memory(u);
    un->in[0] = s;
    n->in[1] = un->out[0];
    return QR_OK;
}

static int legacy_broadcast_op(const char *op)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Less",
                                      "Greater"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(op, ops[i]))
            return 1;
    return 0;
}

static qr_status upgrade_node(up *u, qr_node *n)
{
    int v = n->opset, to = u->to;
    qr_status st = QR_OK;
    if (v < 6)
        drop_attr(n, "consumed_inputs");
    if (v < 7 && to >= 7) {
        /* numpy broadcasting from 7; import refused the legacy forms it would change */
        if (legacy_broadcast_op(n->op) || is(n, "Gemm")) {
            if (legacy_broadcast_op(n->op) && qr_node_attr(n, "broadcast"))
                drop_attr(n, "axis");
            drop_attr(n, "broadcast");
        }
        if (is(n, "PRelu") && n->n_in == 2 && n->in[0] && n->in[1])
            st = up_prelu(u, n);
    }
    if (is(n, "Concat") && v < 4 && to >= 4 && !qr_node_attr(n, "axis"))
        qr_node_add_attr_i(u->g, n, "axis", 1);
    else if (is(n, "Reshape") && v < 5 && to >= 5)
        ints_to_input(u, n, "shape", 1);
    else if (is(n, "Slice") && v < 10 && to >= 10) {
        const int64_t *s, *e;
        int ns = qr_attr_ints(n, "starts", &s), ne = qr_attr_ints(n, "ends", &e);
        if (ns < 0 || ne < 0)
            return fail(u, n, "attributes 'starts' and 'ends' are required");
        ints_to_input(u, n, "starts", 1);
        ints_to_input(u, n, "ends", 2);
        ints_to_input(u, n, "axes", 3);
    } else if (is(n, "TopK") && v < 10 && to >= 10) {
        if (!qr_node_attr(n, "k"))
            return fail(u, n, "attribute 'k' is required");
        int64_t k = qr_attr_i(n, "k", 0);
        set_input(u, n, 1, const_i64(u, n, "k", 1, &k));
        drop_attr(n, "k");
    } else if (is(n, "Pad") && v < 11 && to >= 11) {
        const char *pads = qr_node_attr(n, "pads") ? "pads" : "paddings";
        if (!qr_node_attr(n, pads))
            return fail(u, n, "attribute 'pads' is required");
        ints_to_input(u, n, pads, 1);
        if (qr_node_attr(n, "value") && n->in[0])
            set_input(u, n, 2, const_scalar(u, n, "value", data_dtype(u, n->in[0]), qr_attr_f(n, "value", 0)));
        drop_attr(n, "value");
    } else if (is(n, "Clip") && v < 11 && to >= 11) {
        /* Clip-6's bounds default to the float limits (so +-inf clip to +-FLT_MAX): both become inputs */
        qr_dtype t = n->in[0] ? data_dtype(u, n->in[0]) : QR_F32;
        set_input(u, n, 1, const_scalar(u, n, "min", t, qr_attr_f(n, "min", -FLT_MAX)));
        set_input(u, n, 2, const_scalar(u, n, "max", t, qr_attr_f(n, "max", FLT_MAX)));
        drop_attr(n, "min");
        drop_attr(n, "max");
    } else if (is(n, "Dropout") && v < 12 && to >= 12) {
        int training = v < 7 && qr_node_attr(n, "is_test") && qr_attr_i(n, "is_test", 1) == 0;
        if (qr_node_attr(n, "ratio") || training)
            set_input(u, n, 1, const_scalar(u, n, "ratio", QR_F32, qr_attr_f(n, "ratio", 0.5f)));
        if (training)
            set_input(u, n, 2, const_scalar(u, n, "training_mode", QR_BOOL, 1));
        drop_attr(n, "ratio");
        drop_attr(n, "is_test");
    } else if (is(n, "BatchNormalization") && v < 9 && to >= 9) {
        st = up_batchnorm(u, n);
    } else if ((is(n, "Split") && v < 13 && to >= 13)) {
        ints_to_input(u, n, "split", 1);
    } else if ((is(n, "Squeeze") || is(n, "Unsqueeze") || is(n, "ReduceSum")) && v < 13 && to >= 13) {
        ints_to_input(u, n, "axes", 1);
    } else if ((is(n, "Softmax") || is(n, "LogSoftmax") || is(n, "Hardmax")) && v < 13 && to >= 13 && n->n_in >= 1 &&
               n->in[0]) {
        st = up_coerced(u, n);
    } else if ((is(n, "Upsample") && to >= 11) || (is(n, "Resize") && v < 11 && to >= 11)) {
        st = up_resize(u, n);
    } else if (is(n, "Scatter") && to >= 11) {
        n->op = "ScatterElements"; /* the same op, renamed (Scatter is deprecated from 11) */
        n->def = qr_op_find("", "ScatterElements");
    }
    if (st == QR_OK && qr_graph_oom(u->g))
        st = out_of_memory(u); /* an attribute, input or constant above did not fit */
    if (st == QR_OK)
        n->opset = to;
    return st;
}

qr_status qr_pass_upgrade_opset(qr_graph *g, int to, qr_error *e)
{
    if (to > UP_MAX_TO || to < 1)
        return qr_errorf(e, "opset upgrade: target opset %d is not supported (up to %d)", to, UP_MAX_TO);
    up u = {.g = g, .e = e, .to = to};
    int n0 = g->n_nodes, todo = 0;
    for (int i = 0; i < n0; i++)
        todo += !g->nodes[i]->dead && !g->nodes[i]->domain[0] && g->nodes[i]->opset < to;
    if (todo) {
        u.nvt = g->n_values;
        u.vt = qr_pass_standin_types(g, UP_STANDIN);
        if (!u.vt)
            return qr_errorf(e, "out of memory");
    }
    qr_status st = QR_OK;
    for (int i = 0; i < n0 && st == QR_OK; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || n->domain[0] || n->opset >= to)
            continue;
        st = upgrade_node(&u, n);
    }
    qr_pass_standin_free(g, u.vt, u.nvt);
    if (st != QR_OK)
        return st;
    if (g->opset < to)
        g->opset = to;
    /* new nodes were appended: put them before their readers */
    return todo ? qr_graph_toposort(g, e) : QR_OK;
}

qr_status qr_pass_raise_opset(qr_graph *g, int to, qr_error *e)
{
    up u = {.g = g, .e = e, .to = to};
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || n->domain[0] || n->opset >= to)
            continue;
        /* ReduceSum's axes became an input at 13, the other Reduce ops' at 18 */
        if (to >= 18 && n->opset < 18 && !strncmp(n->op, "Reduce", 6) && strcmp(n->op, "ReduceSum"))
            ints_to_input(&u, n, "axes", 1);
        n->opset = to;
    }
    if (g->opset < to)
        g->opset = to;
    return qr_graph_check_oom(g, e);
}

qr_graph *qr_graph_upgraded(const qr_graph *g, int to, qr_error *e)
{
    qr_graph *c = qr_graph_clone(g);
    if (!c) {
        qr_errorf(e, "out of memory");
        return NULL;
    }
    if (qr_pass_upgrade_opset(c, to, e) != QR_OK || qr_graph_optimize(c, e) != QR_OK) {
        qr_graph_free(c);
        return NULL;
    }
    return c;
}
