#include "intgraph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "layout.h"
#include "options.h"
#include "passes.h"
#include "ops/conv_epilogue.h"
#include "ops/igemm.h"
#include "ops/lookup.h"
#include "ops/ops_common.h"
#include "ops/pool_nhwc.h"
#include "quantize_plan.h"
#include "vecjoin.h"

/* ------------------------------------------------------- kernel calls */

enum { ARG_TENSOR, ARG_OUTPUT, ARG_SCALAR, ARG_ARRAY };

/* A kernel parameter's type: tensor<T>, T[] or a scalar. */
typedef struct ptype {
    int kind;      /* ARG_TENSOR (tensor<T>), ARG_ARRAY (T[]), ARG_SCALAR */
    qr_dtype elem; /* T, or the scalar's type */
} ptype;

typedef struct qi_arg {
    int kind;
    int input;        /* ARG_TENSOR: the node input it reads */
    qr_dtype want;    /* ARG_TENSOR / ARG_OUTPUT: the kernel's element type */
    int64_t bytes[1]; /* ARG_SCALAR: the value, stored as the parameter's C type */
    qrl_array arr;    /* ARG_ARRAY: data owned by the call */
} qi_arg;

struct qr_intcall {
    const qr_fn_desc *k;
    const qr_fn_desc *tile; /* k's tile kernel when the call runs fused to its convolution */
    const qr_fn_desc *nhwc; /* and its channels-last form (NULL: none), with this many tables */
    int tables;
    const char *pattern, *loc; /* the pattern's name and file:line:col */
    qi_arg *args;
    int nargs;
    /* a second stage (fuse_stages): its program joined to its convolution's epilogue (vecjoin.h;
     * NULL: none), the parameters it reads as tables, and the argument of its skip tensor */
    char *joined;
    qi_join_param jparams[QI_JOIN_MAX_PARAMS];
    int njparams, jskip;
};

/* Kernel k's parameter types, as the compiler registered them; -1 past max. */
static int kernel_params(const qr_fn_desc *k, ptype *out, int max)
{
    if (k->nparams > max)
        return -1;
    for (int i = 0; i < k->nparams; i++) {
        qr_param_kind pk = k->params[i].kind;
        out[i] = (ptype){pk == QR_PARAM_TENSOR ? ARG_TENSOR : pk == QR_PARAM_ARRAY ? ARG_ARRAY : ARG_SCALAR,
                         k->params[i].elem};
    }
    return k->nparams;
}

static void store_scalar(qi_arg *a, const ptype *t, double v)
{
    void *b = a->bytes;
    a->kind = ARG_SCALAR;
    if (t->elem == QR_F32)
        *(float *)b = (float)v;
    else if (t->elem == QR_F64)
        *(double *)b = v;
    else
        qr_set_i64(b, t->elem, 0, (int64_t)llround(v));
}

static const char *type_str(const ptype *t, char *b, size_t n)
{
    snprintf(b, n, t->kind == ARG_TENSOR ? "tensor<%s>" : t->kind == ARG_ARRAY ? "%s[]" : "%s",
             qr_dtype_name(t->elem));
    return b;
}

/* ------------------------------------------------------------ the ops */

/* The output shape of op "shape_op" (shape_op_attrs) on the kernel's inputs, as the op's own infer
 * makes it: its inputs the kernel's (8-bit integers seen as f32: only shapes matter), its
 * attributes those named "op:NAME". */
static qr_status infer_as_op(qr_kctx *k, const char *op, qr_dtype to)
{
    const qr_op_def *def = qr_op_find("", op);
    const int64_t *map;
    int nmap = qr_attr_ints(k->node, "shape_in", &map);
    if (!def || nmap < 0 || nmap > 16 || k->node->n_attr > 64)
        return QR_KERR(k, "QrlKernel: no shape of op '%s' for its output", op);
    qr_attr attrs[64];
    int na = 0;
    for (int a = 0; a < k->node->n_attr; a++)
        if (!strncmp(k->node->attr[a].name, "op:", 3)) {
            attrs[na] = k->node->attr[a];
            attrs[na++].name += 3;
        }
    qr_tensor ins[16], out = {0}, *outs[1] = {&out};
    const qr_tensor *inp[16];
    qr_value *vals[16];
    for (int i = 0; i < nmap; i++) {
        if (map[i] < 0 || map[i] >= k->n_in || !k->in[map[i]]) {
            inp[i] = NULL, vals[i] = NULL;
            continue;
        }
        ins[i] = *k->in[map[i]];
        if (qr_dtype_size(ins[i].dtype) == 1)
            ins[i].dtype = QR_F32, ins[i].data = NULL;
        inp[i] = &ins[i];
        vals[i] = k->node->in[map[i]];
    }
    qr_node fake = *k->node;
    fake.op = op, fake.domain = "", fake.def = def, fake.n_in = nmap, fake.in = vals, fake.n_out = 1;
    fake.attr = attrs, fake.n_attr = na;
    qr_kctx fk = *k;
    fk.node = &fake, fk.n_in = nmap, fk.in = inp, fk.n_out = 1, fk.out = outs;
    if (def->infer(&fk) != QR_OK)
        return QR_ERR;
    return qr_set_out(k, 0, to, out.ndim, out.dims);
}

/* The output shape a kernel declares (tensor<T>[.., M, N]; "out_dims": triplets of a qr_out_dim
 * whose param is the node input it reads), from the inputs' shapes: its rank, or -1 with why. A
 * dimension an input leaves unknown (-1: the model's symbolic ones, at lowering) stays unknown. */
static int declared_shape(const int64_t *od, int nod, const qr_tensor *const *in, int nin, int64_t *dims, char *why,
                          size_t wn)
{
    int nd = 0;
    for (int e = 0; e + 2 < nod; e += 3) {
        int kind = (int)od[e], i = (int)od[e + 1];
        int64_t at = od[e + 2];
        const qr_tensor *t = kind != QR_ODIM_INT && i >= 0 && i < nin ? in[i] : NULL;
        if (kind != QR_ODIM_INT && (!t || t->ndim < 0))
            return snprintf(why, wn, "input %d has no known rank", i), -1;
        if (kind == QR_ODIM_INT || kind == QR_ODIM_DIM) {
            int64_t d = kind == QR_ODIM_INT ? at : at < 0 ? t->ndim + at : at;
            if (kind == QR_ODIM_DIM && (d < 0 || d >= t->ndim))
                return snprintf(why, wn, "input %d has rank %d, too small for its declared shape", i, t->ndim), -1;
            if (nd >= QR_MAX_DIMS)
                return snprintf(why, wn, "more than %d dimensions", QR_MAX_DIMS), -1;
            dims[nd++] = kind == QR_ODIM_INT ? at : t->dims[d];
            continue;
        }
        /* a '..': the broadcast of the leading dims of this REST entry and the ones after it */
        int lead = 0, first = e;
        for (; e + 2 < nod && od[e] == QR_ODIM_REST; e += 3) {
            const qr_tensor *u = od[e + 1] >= 0 && od[e + 1] < nin ? in[od[e + 1]] : NULL;
            int n = u && u->ndim >= 0 ? u->ndim - (int)od[e + 2] : -1;
            if (n < 0)
                return snprintf(why, wn, "input %d has rank %d, fewer than its declared shape's %d dimensions after '..'",
                                (int)od[e + 1], u ? u->ndim : -1, (int)od[e + 2]), -1;
            lead = n > lead ? n : lead;
        }
        e -= 3; /* the loop's own step moves past the last REST entry */
        if (nd + lead > QR_MAX_DIMS)
            return snprintf(why, wn, "more than %d dimensions", QR_MAX_DIMS), -1;
        for (int d = 0; d < lead; d++) {
            int64_t dim = 1;
            for (int f = first; f <= e; f += 3) {
                const qr_tensor *u = in[od[f + 1]];
                int off = d - (lead - (u->ndim - (int)od[f + 2]));
                int64_t x = off < 0 ? 1 : u->dims[off];
                if (x == dim || x == 1)
                    continue;
                if (x < 0 || dim < 0) {
                    dim = -1;
                    continue;
                }
                if (dim != 1)
                    return snprintf(why, wn, "the inputs' leading dimensions ('..') do not broadcast: %lld and %lld",
                                    (long long)dim, (long long)x), -1;
                dim = x;
            }
            dims[nd++] = dim;
        }
    }
    return nd;
}

static qr_status kcall_infer(qr_kctx *k)
{
    qr_dtype to = (qr_dtype)qr_attr_i(k->node, "to", QR_UNDEF);
    if (qr_attr_i(k->node, "acc", 0)) {
        if (!k->in[0] || (k->in[0]->dtype != QR_I32 && k->in[0]->dtype != QR_I64))
            return QR_KERR(k, "QrlKernel: the accumulator must be int32 or int64");
        return qr_set_out(k, 0, to, k->in[0]->ndim, k->in[0]->dims);
    }
    const int64_t *od;
    int nod = qr_attr_ints(k->node, "out_dims", &od);
    if (nod > 0) { /* the kernel declares its output's shape */
        int64_t dims[QR_MAX_DIMS];
        char why[160];
        int nd = declared_shape(od, nod, (const qr_tensor *const *)k->in, k->n_in, dims, why, sizeof why);
        if (nd < 0)
            return QR_KERR(k, "QrlKernel: the kernel's declared output shape: %s", why);
        return qr_set_out(k, 0, to, nd, dims);
    }
    const char *op = qr_attr_s(k->node, "shape_op", NULL);
    if (op)
        return infer_as_op(k, op, to);
    /* the matched node's shape: its quantized data inputs broadcast (not weights, biases or f32 constants) */
    const int64_t *from;
    int nfrom = qr_attr_ints(k->node, "shape_from", &from);
    const qr_tensor *src[64];
    int ns = 0;
    for (int i = 0; i < nfrom && ns < 64; i++)
        if (from[i] >= 0 && from[i] < k->n_in && k->in[from[i]])
            src[ns++] = k->in[from[i]];
    qr_tensor shape = {0};
    if (qr_broadcast_shapes(k, ns ? src : k->in, ns ? ns : k->n_in, &shape) != QR_OK)
        return QR_ERR;
    /* the matched node's output shape where the model fixes it (a reduction's 1s), else the inputs' */
    const int64_t *fixed, *dfrom;
    int nf = qr_attr_ints(k->node, "shape", &fixed), ndf = qr_attr_ints(k->node, "dims_from", &dfrom);
    if (nf > 0) {
        int64_t dims[QR_MAX_DIMS];
        for (int d = 0; d < nf && d < QR_MAX_DIMS; d++) {
            int64_t i = d < ndf && dfrom[d] >= 0 ? dfrom[d] / QR_MAX_DIMS : -1, j = i >= 0 ? dfrom[d] % QR_MAX_DIMS : -1;
            if (fixed[d] >= 0)
                dims[d] = fixed[d];
            else if (i >= 0 && i < k->n_in && k->in[i] && j < k->in[i]->ndim) /* the input dim it follows */
                dims[d] = k->in[i]->dims[j];
            else if (shape.ndim == nf)
                dims[d] = shape.dims[d];
            else
                return QR_KERR(k, "QrlKernel: dimension %d of the output is not known", d);
        }
        return qr_set_out(k, 0, to, nf, dims);
    }
    return qr_set_out(k, 0, to, shape.ndim, shape.dims);
}

/* Binds call c's arguments for kernel k's run: a tensor argument reading input j of the call is
 * the node's input first + j (views[] holds their views, at most 64), the output is the node's,
 * arrays and scalars are the call's own. An argument reading input -1 (the accumulator of a fused
 * convolution) is left for the caller, its index in *acc_arg (-1: none). */
static qr_status bind_args(qr_kctx *k, const qr_intcall *c, int first, qrl_tview *views, void **args, int *acc_arg)
{
    int nv = 0;
    *acc_arg = -1;
    if (c->nargs > QRL_MAX_PARAMS)
        return QR_KERR(k, "kernel '%s': too many parameters", c->k->name);
    for (int i = 0; i < c->nargs; i++) {
        const qi_arg *a = &c->args[i];
        if (a->kind == ARG_TENSOR && a->input < 0) {
            *acc_arg = i;
            args[i] = NULL; /* each block's (tile_args) */
            continue;
        }
        if (a->kind == ARG_TENSOR || a->kind == ARG_OUTPUT) {
            int in = a->kind == ARG_TENSOR ? first + a->input : -1;
            const qr_tensor *t = a->kind == ARG_OUTPUT ? k->out[0] : in < k->n_in ? k->in[in] : NULL;
            if (nv >= 64)
                return QR_KERR(k, "kernel '%s': too many tensors", c->k->name);
            if (!t || t->dtype != a->want)
                return QR_KERR(k, "%s: kernel '%s' (pattern '%s'): parameter %d takes %s tensors, not %s", c->loc,
                               c->k->name, c->pattern, i + 1, qr_dtype_name(a->want), t ? qr_dtype_name(t->dtype) : "none");
            qr_tview_of(t, &views[nv]);
            args[i] = &views[nv++];
        } else if (a->kind == ARG_ARRAY)
            args[i] = (void *)&a->arr;
        else
            args[i] = (void *)a->bytes;
    }
    return QR_OK;
}

/* What fill_tables keeps in its node's run plan (op.h qr_kplan_get): which arguments are fixed,
 * the key's length, whether the fill reads fixed arguments and the plan's shapes alone (then
 * the kept tables, once made or checked on a run of the plan, are the same on every later one:
 * comparing their key each run was 3% of the bundled CNN's run at batch 1). Zeroed when fresh. */
typedef struct tables_plan {
    int known, all_fixed, made;
    uint64_t fixed;
    int64_t klen;
} tables_plan;

/* A QrlKernel's run plan (op.h qr_kplan_get): its attributes, its tables' plan, its rows kernel. */
typedef struct kcall_plan {
    int64_t ci, acc;
    tables_plan tables;
    qr_rows_ep_fn rows_ep; /* NULL: none found yet (asked again) */
} kcall_plan;

static const char kcall_plan_what[] = "QrlKernel's run plan";

static qr_status kcall_rows(qr_kctx *k, const qr_intcall *c, int *done, kcall_plan *plan);

/* Tensor v expanded to y's shape (numpy's broadcast: v's dims right-aligned, each equal to y's
 * or 1) into dst, what y[i] = v[broadcast_index(v, y, i)] makes. Adjacent dims of one kind (kept
 * or repeated) are merged: the innermost run is a copy of a contiguous block or a fill of one
 * element, the runs outside it an odometer. */
static void expand_to(const qrl_tview *v, const qrl_tview *y, size_t es, unsigned char *dst)
{
    int64_t n[QR_MAX_DIMS], src_step[QR_MAX_DIMS];
    int rep[QR_MAX_DIMS], nr = 0;
    for (int64_t d = 0; d < y->rank; d++) {
        int64_t vd = d - (y->rank - v->rank), yd = y->dims[d];
        int r = vd < 0 || v->dims[vd] != yd; /* repeated along d */
        if (yd == 1)
            continue;
        if (nr > 0 && rep[nr - 1] == r) {
            n[nr - 1] *= yd;
            continue;
        }
        n[nr] = yd, rep[nr++] = r;
    }
    int64_t stride = 1; /* v's elements per step of each run, innermost first */
    for (int d = nr - 1; d >= 0; d--) {
        src_step[d] = rep[d] ? 0 : stride;
        stride *= rep[d] ? 1 : n[d];
    }
    const unsigned char *src = v->data;
    if (nr == 0) { /* one element */
        memcpy(dst, src, es);
        return;
    }
    int inner_rep = rep[nr - 1];
    int64_t inner = n[nr - 1], outer = 1, idx[QR_MAX_DIMS] = {0}, off = 0;
    for (int d = 0; d < nr - 1; d++)
        outer *= n[d];
    size_t block = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++, dst += block) {
        const unsigned char *s = src + (size_t)off * es;
        if (!inner_rep)
            memcpy(dst, s, block);
        else if (es == 1)
            memset(dst, *s, (size_t)inner);
        else
            for (int64_t j = 0; j < inner; j++)
                memcpy(dst + (size_t)j * es, s, es);
        for (int d = nr - 2; d >= 0; d--) { /* the next outer position */
            off += src_step[d];
            if (++idx[d] < n[d])
                break;
            off -= src_step[d] * n[d];
            idx[d] = 0;
        }
    }
}

/* A pointwise kernel (compiler/pointwise.c) computes element i of y from element i of each
 * tensor it reads, or element broadcast_index(t, y, i) of one that broadcasts to y: the same
 * values as from that tensor expanded to y's shape, when the stdlib's kernels then take their
 * same-shape loop (the broadcast loop's per-element index costs 36 times its arithmetic: a
 * quarter of Swin-T's int8 time, its window masks and scalar scales). So each tensor argument
 * whose dims differ from y's but broadcast to them is expanded into the node's workspace, while
 * the expansions fit the scratch budget (past it the kernel broadcasts itself). Returns how
 * many were expanded, -1 on an error (set). */
static int expand_broadcasts(qr_kctx *k, const qr_intcall *c, void **args)
{
    const qrl_tview *y = NULL;
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].kind == ARG_OUTPUT)
            y = args[i];
    if (!y || !c->k->is_pointwise || y->numel <= 0 || !k->work)
        return 0;
    int done = 0;
    for (int i = 0; i < c->nargs; i++) {
        if (c->args[i].kind != ARG_TENSOR || c->args[i].input < 0)
            continue;
        qrl_tview *v = args[i];
        if (v->numel == y->numel || v->numel <= 0 || v->rank > y->rank)
            continue;
        int fits = 1;
        for (int64_t d = 0; d < v->rank && fits; d++) {
            int64_t vd = v->dims[d], yd = y->dims[d + (y->rank - v->rank)];
            fits = vd == yd || vd == 1;
        }
        size_t es = qr_dtype_size(c->args[i].want), bytes = (size_t)y->numel * es;
        if (!fits || es == 0 || (k->scratch_max && k->work->need + bytes + 64 > k->scratch_max))
            continue;
        unsigned char *buf = qr_kwork(k, 1, y->numel, es, "broadcast operand");
        if (!buf)
            return -1;
        expand_to(v, y, es, buf);
        *v = *y; /* bind_args made a view of its own for each argument */
        v->data = buf;
        done++;
    }
    return done;
}

static qr_status kcall_run(qr_kctx *k)
{
    const qr_intgraph *ig = k->user;
    int fresh;
    kcall_plan *plan = qr_kplan_get(k, sizeof *plan, kcall_plan_what, &fresh);
    if (!plan)
        return QR_ERR;
    if (fresh)
        *plan = (kcall_plan){.ci = qr_attr_i(k->node, "call", -1), .acc = qr_attr_i(k->node, "acc", 0)};
    int64_t ci = plan->ci;
    if (!ig || ci < 0 || ci >= ig->ncalls)
        return QR_KERR(k, "QrlKernel runs only in the integer graph of a quantized model");
    const qr_intcall *c = &ig->calls[ci];
    int done = 0;
    qr_kplan_ready(k, plan); /* its attributes; the rows' parts are filled as they are found */
    if (c->nhwc && plan->acc && (kcall_rows(k, c, &done, plan) != QR_OK || done))
        return done ? QR_OK : QR_ERR;
    qrl_tview views[64];
    void *args[QRL_MAX_PARAMS];
    int acc_arg;
    /* what the kernel leaves unwritten (the executor does not zero it: the channels-last path
     * above writes every element, so the op's writes_all holds) */
    memset(k->out[0]->data, 0, qr_tensor_nbytes(k->out[0]));
    if (bind_args(k, c, 0, views, args, &acc_arg) != QR_OK || expand_broadcasts(k, c, args) < 0)
        return QR_ERR;
    qrl_rt rt;
    qr_rt_init(&rt);
    c->k->call(&rt, args);
    if (qr_rt_status(&rt, k->err) != QR_OK) {
        qr_error_prefix(k->err, "%s: kernel '%s' (pattern '%s')", c->loc, c->k->name, c->pattern);
        return QR_ERR;
    }
    return QR_OK;
}

/* QrlConvKernel: a ConvInteger and the element-wise epilogue kernel it fed, fused (fuse_epilogues):
 * inputs are the convolution's (conv_inputs of them: x, w, x_zero?, w_zero?), then the kernel's
 * other inputs; its call's accumulator argument reads the blocks the convolution hands over. */
static const qr_tensor *conv_in(const qr_kctx *k, int64_t nconv, int i)
{
    return i < nconv && i < k->n_in ? k->in[i] : NULL;
}

/* The convolution's: per output, C/group x the window. */
static double kconv_macs(const qr_kctx *k)
{
    const qr_tensor *w = k->n_in > 1 ? k->in[1] : NULL;
    if (!w || w->ndim < 1 || w->dims[0] <= 0 || !k->out[0])
        return 0;
    return (double)qr_tensor_numel(k->out[0]) * (double)qr_tensor_numel(w) / (double)w->dims[0];
}

/* Each attribute looked up once: this runs before every run of the node (the executor's shapes). */
static qr_status kconv_infer(qr_kctx *k)
{
    int64_t nconv = qr_attr_i(k->node, "conv_inputs", 2);
    qr_dtype to = (qr_dtype)qr_attr_i(k->node, "to", QR_UNDEF);
    if (qr_attr_i(k->node, "nhwc", 0)) /* a second stage writes its kernel's type: the same (fuse_stages) */
        return qr_convint_infer_nhwc(k, k->in[0], conv_in(k, nconv, 2), k->in[1], conv_in(k, nconv, 3), to);
    return qr_convint_infer_as(k, k->in[0], conv_in(k, nconv, 2), k->in[1], conv_in(k, nconv, 3), to);
}

/* A run's arguments of a pointwise kernel run as the second stage, but the convolution's y's. */
typedef struct stage_run {
    const qr_intcall *c;
    int y_arg; /* the argument that reads the convolution's y */
    void *args[QRL_MAX_PARAMS];
    qrl_tview views[64];
} stage_run;

/* The most channel lets a channels-last tile kernel may keep tables of; more run turned blocks. */
#define QI_MAX_TABLES 32

/* A run's arguments of the tile kernel but the accumulator's and the block's six; for the
 * channels-last one (rows), its fill flag and tables too. */
typedef struct tile_run {
    const qr_intcall *c;
    const qr_fn_desc *tile, *rows;
    int acc_arg, y_arg;
    void *args[QRL_MAX_PARAMS + QR_TILE_NPARAMS];
    qrl_tview views[64];
    const stage_run *stage;
    int64_t fill;
    qrl_tview tables[QI_MAX_TABLES];
} tile_run;

static qr_status call_status(qrl_rt *rt, const qr_fn_desc *k, const qr_intcall *c, qr_error *e)
{
    if (qr_rt_status(rt, e) != QR_OK) {
        qr_error_prefix(e, "%s: kernel '%s' (pattern '%s')", c->loc, k->name, c->pattern);
        return QR_ERR;
    }
    return QR_OK;
}

/* The pointwise kernel on elements [off, off + len) of every tensor it takes (it was proven to
 * compute each element from the same element of its inputs: compiler/pointwise.c), the
 * convolution's y from the block's rows. */
static qr_status stage_rows(const qr_acc_epilogue *ep, const void *y_rows, int64_t off, int64_t len, qr_error *e)
{
    const stage_run *s = ((const tile_run *)ep->user)->stage;
    void *args[QRL_MAX_PARAMS];
    qrl_tview v[QRL_MAX_PARAMS];
    for (int i = 0; i < s->c->nargs; i++) {
        const qi_arg *a = &s->c->args[i];
        args[i] = s->args[i];
        if (a->kind != ARG_TENSOR && a->kind != ARG_OUTPUT)
            continue;
        const qrl_tview *whole = s->args[i];
        void *at = i == s->y_arg ? (void *)y_rows : (char *)whole->data + off * (int64_t)qr_dtype_size(a->want);
        v[i] = (qrl_tview){at, len, 1, {len}};
        args[i] = &v[i];
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    s->c->k->call(&rt, args);
    return call_status(&rt, s->c->k, s->c, e);
}

/* A block's arguments of the tile kernel (rows 0) or the channels-last one (rows 1) in args: t's,
 * the block's accumulator (*acc) and y (*y) views and six (extra). */
static void tile_args(const tile_run *t, int rows, const qr_acc_block *b, void **args, qrl_tview *acc, qrl_tview *y,
                      int64_t *extra)
{
    int np = t->c->nargs;
    memcpy(args, t->args, sizeof *args * (size_t)np);
    int64_t span = b->rows > 0 ? (b->rows - 1) * b->acc_rs + b->cols : 0;
    *acc = (qrl_tview){(void *)b->acc, span, 1, {span}};
    args[t->acc_arg] = acc;
    if (b->y_block) { /* the block's own y: rows x y_rs elements */
        int64_t n = b->rows * b->y_rs;
        *y = (qrl_tview){b->y_block, n, 1, {n}};
        args[t->y_arg] = y;
    }
    extra[QR_TILE_C0] = b->c0, extra[QR_TILE_ROWS] = b->rows, extra[QR_TILE_COLS] = b->cols;
    extra[QR_TILE_ACC_RS] = b->acc_rs, extra[QR_TILE_Y_OFF] = b->y_off, extra[QR_TILE_Y_RS] = b->y_rs;
    for (int i = 0; i < QR_TILE_NPARAMS; i++)
        args[np + i] = &extra[i];
    if (rows) {
        args[np + QR_TILE_NPARAMS] = (void *)&t->fill;
        for (int i = 0; i < t->c->tables; i++)
            args[np + QR_TILE_NPARAMS + 1 + i] = (void *)&t->tables[i];
    }
}

/* A block through the tile kernel (rows 0) or the channels-last one (rows 1). */
static qr_status run_tile(const tile_run *t, int rows, const qr_acc_block *b, qr_error *e)
{
    void *args[QRL_MAX_PARAMS + QR_TILE_NPARAMS + 1 + QI_MAX_TABLES];
    qrl_tview acc, y;
    int64_t extra[QR_TILE_NPARAMS];
    tile_args(t, rows, b, args, &acc, &y, extra);
    const qr_fn_desc *fn = rows ? t->rows : t->tile;
    qrl_rt rt;
    qr_rt_init(&rt);
    fn->call(&rt, args);
    return call_status(&rt, fn, t->c, e);
}

static qr_status tile_block(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    return run_tile(ep->user, 0, b, e);
}

static qr_status rows_block(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    return run_tile(ep->user, 1, b, e);
}

/* The vector form's tables (vecmap.h): each table's low 32 bits (an i32's or an f32's: ew.bits),
 * m lanes each, and a pointer to each. */
static void table_lanes(const int64_t *tab, int tables, int64_t m, int32_t *lanes, const int32_t **ptrs)
{
    for (int i = 0; i < tables; i++) {
        ptrs[i] = lanes + i * m;
        for (int64_t c = 0; c < m; c++)
            lanes[i * m + c] = (int32_t)(uint32_t)(uint64_t)tab[i * m + c];
    }
}

/* Bit i set: argument i of call c holds the same elements at the same address on every run of k's
 * executor (qr_fill_key's fixed): an array (the call's own, made with the graph and never written)
 * or a tensor input that is (qr_kinput_fixed; the call's inputs are the node's from `first` on). */
static uint64_t fixed_args(const qr_kctx *k, const qr_intcall *c, int first)
{
    uint64_t m = 0;
    for (int i = 0; i < c->nargs && i < 64; i++)
        if (c->args[i].kind == ARG_ARRAY ||
            (c->args[i].kind == ARG_TENSOR && c->args[i].input >= 0 && qr_kinput_fixed(k, first + c->args[i].input)))
            m |= (uint64_t)1 << i;
    return m;
}

/* A node's channel tables as kept across its executor's runs (qr_kkeep_get): this header, the
 * tables (i64, tables x m), their 32-bit lanes (64-byte aligned), a pointer to each lane table, then
 * the key of what the fill read (qr_fill_key) when valid. */
typedef struct kept_tables {
    const qr_fn_desc *fn; /* the kernel that made them */
    int64_t m, key_len;
    int tables, valid;
} kept_tables;

static const char kept_what[] = "epilogue's channel tables";


/* Whether every argument kernel fn's fill reads (qr_fill_key's pieces) is the same on every run of
 * one run plan: scalars (the call's own bytes, or the block's constants), fixed arrays, and tensors
 * whose elements it does not read or that are fixed (shapes are the plan's). */
static int fill_reads_fixed(const qr_fn_desc *fn, uint64_t fixed)
{
    if (!fn->fill_known || fn->nparams > 64)
        return 0;
    for (int i = 0; i < fn->nparams; i++) {
        if (!(fn->fill_uses >> i & 1))
            continue;
        switch (fn->params[i].kind) {
        case QR_PARAM_SCALAR:
        case QR_PARAM_QTYPE:
        case QR_PARAM_QPARAMS: break;
        case QR_PARAM_ARRAY:
            if (!(fixed >> i & 1))
                return 0;
            break;
        case QR_PARAM_TENSOR:
            if ((fn->fill_elems >> i & 1) && !(fixed >> i & 1))
                return 0;
            break;
        default: return 0;
        }
    }
    return 1;
}

/* The bytes a key may take: comparing it on every run costs no more than the fill it saves (a
 * channel's lets, a division or more each, against 64 bytes compared a table entry). */
static int64_t key_cap(int64_t m, int tables)
{
    return 4096 + 64 * m * (tables > 0 ? tables : 1);
}

/* t's tables for channels 0 .. m - 1 (the channels-last kernel's fill: ew.fill 1, no rows) and
 * their lanes (*ptrs) for the vector form. The channel lets are constants of the node while what
 * their fill reads stays the same (compiler/reads.h qc_fill_reads; the bias and scales of a
 * layer): so they are kept in the node across its executor's runs with the key of what they were
 * made from, and made again only when that key changes (the same bits: the fill is the kernel's
 * own code, run on the same values). A fill the compiler cannot say, or a key past key_cap, fills
 * the node's workspace on every run. first: the node's input the call's input 0 is. */
static qr_status fill_tables(qr_kctx *k, tile_run *t, int first, int64_t m, const int32_t *const **ptrs,
                             tables_plan *tp)
{
    const qr_intcall *c = t->c;
    int nt = c->tables;
    const qr_fn_desc *fn = c->nhwc;
    qr_acc_block fb = {NULL, 0, 0, m, 0, 0, 0, NULL};
    void *args[QRL_MAX_PARAMS + QR_TILE_NPARAMS + 1 + QI_MAX_TABLES];
    qrl_tview acc, y;
    int64_t extra[QR_TILE_NPARAMS];
    t->fill = 1;
    tile_args(t, 1, &fb, args, &acc, &y, extra); /* the key reads no table */
    uint64_t fixed;
    int64_t klen;
    if (tp && tp->known)
        fixed = tp->fixed, klen = tp->klen;
    else {
        fixed = fixed_args(k, c, first);
        klen = qr_fill_key(fn, args, fixed, NULL, 0, NULL);
        if (tp)
            *tp = (tables_plan){.known = 1, .all_fixed = fill_reads_fixed(fn, fixed), .fixed = fixed, .klen = klen};
    }
    size_t tab_bytes = (size_t)(nt * m) * sizeof(int64_t), lane_bytes = ((size_t)(nt * m) * sizeof(int32_t) + 63) / 64 * 64;
    size_t head = 64, ptr_bytes = ((size_t)nt * sizeof(int32_t *) + 63) / 64 * 64;
    unsigned char *buf;
    int fresh = 1;
    if (klen >= 0 && klen <= key_cap(m, nt))
        buf = qr_kkeep_get(k, head + tab_bytes + lane_bytes + ptr_bytes + (size_t)klen, kept_what, &fresh);
    else {
        klen = -1;
        buf = qr_kwork(k, 1, (int64_t)(head + tab_bytes + lane_bytes + ptr_bytes), 1, kept_what);
    }
    if (!buf)
        return QR_ERR;
    kept_tables *kt = (kept_tables *)buf;
    int64_t *tab = (int64_t *)(buf + head);
    int32_t *lanes = (int32_t *)(buf + head + tab_bytes);
    const int32_t **pt = (const int32_t **)(buf + head + tab_bytes + lane_bytes);
    unsigned char *key = buf + head + tab_bytes + lane_bytes + ptr_bytes;
    for (int i = 0; i < nt; i++)
        t->tables[i] = (qrl_tview){tab + i * m, m, 1, {m}};
    *ptrs = pt;
    int same = 0;
    if (klen >= 0 && !fresh && kt->valid && kt->fn == fn && kt->m == m && kt->tables == nt && kt->key_len == klen) {
        if (tp && tp->all_fixed && tp->made)
            same = 1; /* made or checked on this plan, from what stays the same through it */
        else
            qr_fill_key(fn, args, fixed, key, klen, &same);
    }
    if (same) {
        if (tp)
            tp->made = 1;
        t->fill = 0;
        return QR_OK;
    }
    kt->valid = 0;
    qrl_rt rt;
    qr_rt_init(&rt);
    fn->call(&rt, args);
    if (call_status(&rt, fn, c, k->err) != QR_OK) {
        t->fill = 0;
        return QR_ERR;
    }
    table_lanes(tab, nt, m, lanes, pt);
    if (klen >= 0) { /* the key of the fill's own arguments (ew.fill 1) */
        qr_fill_key(fn, args, fixed, key, klen, NULL);
        *kt = (kept_tables){.fn = fn, .m = m, .key_len = klen, .tables = nt, .valid = 1};
        if (tp)
            tp->made = 1;
    }
    t->fill = 0;
    return QR_OK;
}

/* The channels-last epilogue of an NHWC convolution: its per-channel values for all m output
 * channels computed once, into tables from the node's workspace, before any block runs, and
 * for its vector form (when it has one) as 32-bit lanes.
 * epilogue=turn keeps the blocks turned for the tile kernel, epilogue=rows the
 * channels-last kernel without the vector form (the tests' second paths). */
static qr_status bind_rows(qr_kctx *k, tile_run *t, int first, qr_acc_epilogue *ep, tables_plan *tp)
{
    int mode = qr_options_get()->epilogue;
    if (!t->c->nhwc || t->c->tables > QI_MAX_TABLES || mode == QR_EPILOGUE_TURN)
        return QR_OK;
    int64_t m = k->out[0]->dims[3];
    t->rows = t->c->nhwc;
    const int32_t *const *ptrs;
    qr_status st = fill_tables(k, t, first, m, &ptrs, tp);
    ep->run_rows = rows_block;
    if (st != QR_OK || !t->c->nhwc->vector_epilogue || mode == QR_EPILOGUE_ROWS)
        return st;
    ep->vprog = t->c->nhwc->vector_epilogue;
    ep->vtabs = ptrs;
    return QR_OK;
}

/* An accumulator epilogue whose channels are the accumulator's last axis (MatMul's and Gemm's
 * [..., N]) through its channels-last form: the channel part once per channel into tables, then
 * all rows as one block, [rows, N] with N columns. The whole-tensor kernel would evaluate the
 * channel part (a division, the bias's index) once per element. Same bits (the tile and the
 * channels-last kernels are the kernel's own value). *done 0: not such a call (the caller runs
 * the whole-tensor kernel); epilogue=whole forces that (the tests' second path). */
static qr_status kcall_rows(qr_kctx *k, const qr_intcall *c, int *done, kcall_plan *plan)
{
    const qr_tensor *acc = k->in[0];
    *done = 0;
    if (qr_options_get()->epilogue == QR_EPILOGUE_WHOLE || !c->tile || c->tables > QI_MAX_TABLES || !acc || acc->ndim < 1 ||
        acc->dtype != QR_I32 || k->out[0]->ndim != acc->ndim)
        return QR_OK;
    int64_t axis = c->tile->tile_axis;
    int p = c->tile->tile_axis_param;
    if (p >= 0) {
        if (p >= c->nargs || c->args[p].kind != ARG_SCALAR || !qr_dtype_is_int(c->k->params[p].elem))
            return QR_OK;
        axis = qr_get_i64(c->args[p].bytes, c->k->params[p].elem, 0);
    }
    if (axis < 0)
        axis += acc->ndim;
    int64_t m = acc->dims[acc->ndim - 1], n = qr_tensor_numel(acc);
    if (axis != acc->ndim - 1 || m <= 0 || n <= 0 || qr_tensor_numel(k->out[0]) != n)
        return QR_OK; /* (y as large as acc: the one block writes all of it) */
    /* not zeroed whole (kconv_run's reason): zeroing its 10 KB was 1.7% of the bundled CNN's run at
     * batch 1, whose two Gemm epilogues come here */
    tile_run t;
    t.c = c, t.tile = c->tile, t.rows = NULL, t.acc_arg = -1, t.y_arg = -1, t.stage = NULL, t.fill = 0;
    if (bind_args(k, c, 0, t.views, t.args, &t.acc_arg) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < c->nargs; i++) {
        if (c->args[i].kind == ARG_OUTPUT)
            t.y_arg = i;
        if (c->args[i].kind == ARG_TENSOR && c->args[i].input == 0)
            t.acc_arg = i; /* the accumulator: input 0 of a QrlKernel with acc */
    }
    if (t.acc_arg < 0 || t.y_arg < 0)
        return QR_OK;
    t.rows = c->nhwc;
    const int32_t *const *tabs;
    if (fill_tables(k, &t, 0, m, &tabs, &plan->tables) != QR_OK)
        return QR_ERR;
    /* the vector form compiled alone (qr_rows_ep_fn) when there is one: the same bytes */
    const char *prog = c->nhwc && qr_options_get()->epilogue != QR_EPILOGUE_ROWS ? c->nhwc->vector_epilogue : NULL;
    qr_rows_ep_fn rows_ep = !prog || qr_dtype_size(k->out[0]->dtype) != 1 ? NULL
                            : plan->rows_ep                          ? plan->rows_ep
                                                                     : qr_rows_ep_specialized(prog);
    plan->rows_ep = rows_ep;
    if (rows_ep) {
        rows_ep(k->out[0]->data, m, acc->data, m, n / m, m, 0, tabs);
        *done = 1;
        return QR_OK;
    }
    qr_acc_block all = {.acc = acc->data, .acc_rs = m, .rows = n / m, .cols = m, .c0 = 0, .y_off = 0, .y_rs = m};
    if (run_tile(&t, 1, &all, k->err) != QR_OK)
        return QR_ERR;
    *done = 1;
    return QR_OK;
}

/* The second stage's arguments (fuse_stages: attributes then_call, then_first). */
static qr_status bind_stage(qr_kctx *k, const qr_intgraph *ig, int nhwc, int64_t ci, int64_t first, stage_run *s,
                            qr_acc_epilogue *ep)
{
    if (ci < 0)
        return QR_OK;
    if (ci >= ig->ncalls || first < 1 || first > k->n_in || !nhwc)
        return QR_KERR(k, "QrlConvKernel: a second stage needs its call and an NHWC convolution");
    s->c = &ig->calls[ci];
    /* the call's inputs are the node's from `first` on; the one that was the convolution's y is
     * left out there (NULL) and marked -1 in the call */
    if (bind_args(k, s->c, (int)first, s->views, s->args, &s->y_arg) != QR_OK)
        return QR_ERR;
    if (s->y_arg < 0)
        return QR_KERR(k, "kernel '%s': the second stage reads no convolution output", s->c->k->name);
    ep->then = stage_rows;
    ep->y_size = qr_dtype_size(s->c->args[s->y_arg].want);
    return QR_OK;
}

/* The stage joined to the epilogue (qr_intcall.joined), where its skip tensor has y's shape: the
 * epilogue's tables, then a table of each parameter the stage reads (its bits in every channel's
 * lane), from the node's workspace. Nothing when the epilogue runs without its vector form. */
static qr_status bind_joined(qr_kctx *k, const tile_run *t, const stage_run *s, qr_acc_epilogue *ep)
{
    const qr_intcall *c = s->c;
    if (!c || !c->joined || !ep->vprog || !ep->vtabs || !ep->then)
        return QR_OK;
    const qr_tensor *y = k->out[0];
    const qrl_tview *skip = (const qrl_tview *)s->args[c->jskip];
    if (!skip || skip->numel != qr_tensor_numel(y) || skip->rank != y->ndim || qr_dtype_size(y->dtype) != 1)
        return QR_OK;
    for (int d = 0; d < y->ndim; d++)
        if (skip->dims[d] != y->dims[d])
            return QR_OK;
    int nt = t->c->tables, np = c->njparams;
    int64_t m = y->dims[y->ndim - 1];
    const int32_t **pt = qr_kwork(k, 1, nt + np, sizeof *pt, "joined stage's table pointers");
    int32_t *lanes = np ? qr_kwork(k, np, m, sizeof *lanes, "joined stage's tables") : NULL;
    if (!pt || (np && !lanes))
        return QR_ERR;
    for (int i = 0; i < nt; i++)
        pt[i] = ep->vtabs[i];
    for (int i = 0; i < np; i++) {
        uint32_t bits = qi_join_bits(c->jparams[i].kind, c->args[c->jparams[i].param].bytes);
        int32_t *lane = lanes + i * m;
        for (int64_t ch = 0; ch < m; ch++)
            lane[ch] = (int32_t)bits;
        pt[nt + i] = lane;
    }
    ep->jprog = c->joined;
    ep->jtabs = pt;
    ep->skip = skip->data;
    return QR_OK;
}

/* A QrlConvKernel's run plan (op.h qr_kplan_get): its attributes, its tables' plan, its NHWC
 * convolution's. */
typedef struct kconv_plan {
    int64_t ci, nconv, then_call, then_first;
    int nhwc, wconst;
    tables_plan tables;
    qr_nhwc_plan conv;
} kconv_plan;

static const char kconv_plan_what[] = "QrlConvKernel's run plan";

static qr_status kconv_run(qr_kctx *k)
{
    const qr_intgraph *ig = k->user;
    int fresh;
    kconv_plan *plan = qr_kplan_get(k, sizeof *plan, kconv_plan_what, &fresh);
    if (!plan)
        return QR_ERR;
    if (fresh) {
        int64_t nc = qr_attr_i(k->node, "conv_inputs", 2);
        const qr_tensor *xz = conv_in(k, nc, 2), *wz = conv_in(k, nc, 3);
        memset(plan, 0, sizeof *plan);
        plan->ci = qr_attr_i(k->node, "call", -1), plan->nconv = nc;
        plan->then_call = qr_attr_i(k->node, "then_call", -1), plan->then_first = qr_attr_i(k->node, "then_first", -1);
        plan->nhwc = qr_attr_i(k->node, "nhwc", 0) != 0;
        plan->wconst = qr_kinput_const(k, 1) && (!xz || qr_kinput_const(k, 2));
        plan->conv.wzp_fixed = !wz || qr_kinput_fixed(k, 3);
    }
    int64_t ci = plan->ci, nconv = plan->nconv;
    int nhwc = plan->nhwc;
    if (!ig || ci < 0 || ci >= ig->ncalls || !ig->calls[ci].tile)
        return QR_KERR(k, "QrlConvKernel runs only in the integer graph of a quantized model");
    /* not zeroed whole: its views and tables (some 9 KB, and the stage's 6 KB) are set as bound, and
     * zeroing them on every run of every node was 1% of the small ResNet's time at batch 1 */
    tile_run t;
    t.c = &ig->calls[ci], t.tile = ig->calls[ci].tile, t.rows = NULL, t.acc_arg = -1, t.y_arg = -1, t.stage = NULL;
    t.fill = 0;
    const qr_intcall *c = t.c;
    /* the kernel's inputs after the convolution's; the accumulator is each block's */
    if (bind_args(k, c, (int)nconv - 1, t.views, t.args, &t.acc_arg) != QR_OK)
        return QR_ERR;
    if (t.acc_arg < 0)
        return QR_KERR(k, "kernel '%s': no accumulator parameter", c->k->name);
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].kind == ARG_OUTPUT)
            t.y_arg = i;
    const qr_tensor *xzp = conv_in(k, nconv, 2), *wzp = conv_in(k, nconv, 3);
    int wconst = plan->wconst;
    qr_acc_epilogue ep = {tile_block, &t, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL};
    stage_run stage;
    stage.c = NULL, stage.y_arg = -1;
    t.stage = &stage;
    if (bind_stage(k, ig, nhwc, plan->then_call, plan->then_first, &stage, &ep) != QR_OK)
        return QR_ERR;
    if (nhwc && bind_rows(k, &t, (int)nconv - 1, &ep, &plan->tables) != QR_OK)
        return QR_ERR;
    if (nhwc && bind_joined(k, &t, &stage, &ep) != QR_OK)
        return QR_ERR;
    qr_status st = nhwc ? qr_convint_run_nhwc(k, k->in[0], xzp, k->in[1], wzp, wconst, &ep, &plan->conv)
                        : qr_convint_run_epilogue(k, k->in[0], xzp, k->in[1], wzp, wconst, &ep);
    if (st == QR_OK)
        qr_kplan_ready(k, plan);
    return st;
}

/* QrlMatMulKernel: a MatMulInteger and the element-wise epilogue kernel it fed, whose channels are
 * the product's last axis (N), fused (fuse_matmul_epilogues): inputs are the product's (mm_inputs
 * of them: a, b, a_zero?, b_zero?), then the kernel's other inputs; its call's accumulator argument
 * reads the blocks of whole rows the product hands over (qr_matmulint_run_epilogue) while they are
 * in cache, where the separate nodes wrote the int32 tensor and read it back (at bert's batch 64,
 * 32 MB a feed-forward product). The channel tables are kcall_rows's, made once. */
typedef struct kmm_plan {
    int64_t ci, nmm;
    int bconst;
    tables_plan tables;
    qr_rows_ep_fn rows_ep; /* NULL: none found yet (asked again) */
} kmm_plan;

static const char kmm_plan_what[] = "QrlMatMulKernel's run plan";

/* What each block of the product goes through: the vector form compiled alone, else the
 * channels-last kernel (the same bytes). */
typedef struct kmm_ep {
    tile_run *t;
    qr_rows_ep_fn rows_ep;
    const int32_t *const *tabs;
    uint8_t *y;
} kmm_ep;

static qr_status kmm_block(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    const kmm_ep *u = ep->user;
    if (u->rows_ep) {
        u->rows_ep(u->y + b->y_off, b->y_rs, b->acc, b->acc_rs, b->rows, b->cols, b->c0, u->tabs);
        return QR_OK;
    }
    return run_tile(u->t, 1, b, e);
}

static double kmm_macs(const qr_kctx *k)
{
    const qr_tensor *a = k->n_in > 0 ? k->in[0] : NULL;
    if (!a || a->ndim < 1 || !k->out[0])
        return 0;
    return (double)qr_tensor_numel(k->out[0]) * (double)a->dims[a->ndim - 1];
}

static qr_status kmm_infer(qr_kctx *k)
{
    int64_t nmm = qr_attr_i(k->node, "mm_inputs", 2);
    qr_dtype to = (qr_dtype)qr_attr_i(k->node, "to", QR_UNDEF);
    return qr_matmulint_infer_as(k, k->in[0], conv_in(k, nmm, 2), k->in[1], conv_in(k, nmm, 3), to);
}

/* The call's tile kernel's channel axis as it runs on an accumulator of rank `rank` (-1: not known). */
static int64_t tile_axis_of(const qr_intcall *c, const qr_fn_desc *tile, int rank)
{
    int64_t axis = tile->tile_axis;
    int p = tile->tile_axis_param;
    if (p >= 0) {
        if (p >= c->nargs || c->args[p].kind != ARG_SCALAR || !qr_dtype_is_int(c->k->params[p].elem))
            return INT64_MIN;
        axis = qr_get_i64(c->args[p].bytes, c->k->params[p].elem, 0);
    }
    return axis < 0 && rank > 0 ? axis + rank : axis;
}

static qr_status kmm_run(qr_kctx *k)
{
    const qr_intgraph *ig = k->user;
    int fresh;
    kmm_plan *plan = qr_kplan_get(k, sizeof *plan, kmm_plan_what, &fresh);
    if (!plan)
        return QR_ERR;
    if (fresh) {
        memset(plan, 0, sizeof *plan);
        plan->ci = qr_attr_i(k->node, "call", -1), plan->nmm = qr_attr_i(k->node, "mm_inputs", 2);
        plan->bconst = qr_kinput_const(k, 1);
    }
    int64_t ci = plan->ci, nmm = plan->nmm;
    if (!ig || ci < 0 || ci >= ig->ncalls || !ig->calls[ci].tile || !ig->calls[ci].nhwc)
        return QR_KERR(k, "QrlMatMulKernel runs only in the integer graph of a quantized model");
    const qr_intcall *c = &ig->calls[ci];
    qr_tensor *y = k->out[0];
    int64_t m = y->ndim > 0 ? y->dims[y->ndim - 1] : 0;
    if (y->ndim < 1 || tile_axis_of(c, c->tile, y->ndim) != y->ndim - 1 || c->tables > QI_MAX_TABLES)
        return QR_KERR(k, "kernel '%s': its channels are not the product's last axis", c->k->name);
    tile_run t;
    t.c = c, t.tile = c->tile, t.rows = c->nhwc, t.acc_arg = -1, t.y_arg = -1, t.stage = NULL, t.fill = 0;
    if (bind_args(k, c, (int)nmm - 1, t.views, t.args, &t.acc_arg) != QR_OK)
        return QR_ERR;
    if (t.acc_arg < 0)
        return QR_KERR(k, "kernel '%s': no accumulator parameter", c->k->name);
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].kind == ARG_OUTPUT)
            t.y_arg = i;
    kmm_ep u = {&t, NULL, NULL, y->data};
    if (m > 0 && qr_tensor_numel(y) > 0 && fill_tables(k, &t, (int)nmm - 1, m, &u.tabs, &plan->tables) != QR_OK)
        return QR_ERR;
    const char *prog = qr_options_get()->epilogue != QR_EPILOGUE_ROWS ? c->nhwc->vector_epilogue : NULL;
    u.rows_ep = !prog || qr_dtype_size(y->dtype) != 1 ? NULL
                : plan->rows_ep                      ? plan->rows_ep
                                                     : qr_rows_ep_specialized(prog);
    plan->rows_ep = u.rows_ep;
    qr_kplan_ready(k, plan);
    qr_acc_epilogue ep = {NULL, &u, NULL, 0, kmm_block, NULL, NULL, NULL, NULL, NULL};
    return qr_matmulint_run_epilogue(k, k->in[0], conv_in(k, nmm, 2), k->in[1], conv_in(k, nmm, 3), plan->bconst,
                                     &ep);
}

/* y[i] = table[x[i] - min(x's type)]: x integers of 8 or 16 bits. */
static qr_status lookup_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *t = k->in[1];
    if (!qr_dtype_is_int(x->dtype) || qr_dtype_size(x->dtype) > 2)
        return QR_KERR(k, "QrlLookup indexes with 8- or 16-bit integers, not %s", qr_dtype_name(x->dtype));
    if (qr_tensor_numel(t) != (int64_t)1 << (8 * qr_dtype_size(x->dtype)))
        return QR_KERR(k, "QrlLookup: the table has %lld entries, %s needs %lld", (long long)qr_tensor_numel(t),
                       qr_dtype_name(x->dtype), (long long)1 << (8 * qr_dtype_size(x->dtype)));
    return qr_set_out(k, 0, t->dtype, x->ndim, x->dims);
}

/* y[i] = tab[x[i] + off] for tables of osz-byte entries, a loop per entry size. */
#define LOOKUP_LOOP(IT, OT)                                                                                            \
    for (int64_t i = 0; i < n; i++)                                                                                    \
        ((OT *)y)[i] = ((const OT *)tab)[(int64_t)((const IT *)xd)[i] + off]

#define LOOKUP_SIZES(IT)                                                                                               \
    do {                                                                                                               \
        if (osz == 1)                                                                                                  \
            LOOKUP_LOOP(IT, uint8_t);                                                                                  \
        else if (osz == 2)                                                                                             \
            LOOKUP_LOOP(IT, uint16_t);                                                                                 \
        else if (osz == 4)                                                                                             \
            LOOKUP_LOOP(IT, uint32_t);                                                                                 \
        else                                                                                                           \
            for (int64_t i = 0; i < n; i++)                                                                            \
                memcpy(y + (size_t)i * osz, tab + (size_t)(((const IT *)xd)[i] + off) * osz, osz);                     \
    } while (0)

static qr_status lookup_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *t = k->in[1];
    int64_t n = qr_tensor_numel(x);
    size_t osz = qr_dtype_size(t->dtype);
    const unsigned char *tab = t->data;
    const void *xd = x->data;
    unsigned char *y = k->out[0]->data;
    int64_t off;
    if (osz == 1 && (x->dtype == QR_U8 || x->dtype == QR_I8)) { /* bytes to bytes (ops/lookup.c) */
        qr_lookup8_best()(xd, y, n, tab, x->dtype == QR_I8 ? 0x80 : 0);
        return QR_OK;
    }
    switch (x->dtype) {
    case QR_U8:
        off = 0;
        LOOKUP_SIZES(uint8_t);
        break;
    case QR_I8:
        off = 128;
        LOOKUP_SIZES(int8_t);
        break;
    case QR_U16:
        off = 0;
        LOOKUP_SIZES(uint16_t);
        break;
    default:
        off = 32768;
        LOOKUP_SIZES(int16_t);
        break;
    }
    return QR_OK;
}

/* The tile kernel assigns every element of every block (compiler/elementwise.c); a second stage is a
 * kernel proven pointwise, which may still leave elements unwritten. */
static int kconv_writes_all(const qr_kctx *k)
{
    return qr_attr_i(k->node, "then_call", -1) < 0;
}

/* An NHWC convolution computes a band of its output rows alone (iconv_nhwc.c). */
static int kconv_band(qr_kctx *k, qr_band_geom *g)
{
    return qr_attr_i(k->node, "nhwc", 0) && k->n_in >= 2 && k->in[0] && k->in[1] &&
           qr_convint_band_nhwc(k, k->in[0], k->in[1], g);
}

/* Whether call c, whose inputs are the node's from `first` on, may touch the elements of the
 * node's input j: the compiler's answer (compiler/reads.h) for the kernel and for the tile and
 * channels-last forms of it that run fused to the convolution. */
static int call_touches(const qr_intcall *c, int64_t first, int j)
{
    for (int i = 0; i < c->nargs; i++) {
        const qi_arg *a = &c->args[i];
        if (a->kind == ARG_TENSOR && a->input >= 0 && first + a->input == j &&
            (qr_fn_reads_param(c->k, i) || (c->tile && qr_fn_reads_param(c->tile, i)) ||
             (c->nhwc && qr_fn_reads_param(c->nhwc, i))))
            return 1;
    }
    return 0;
}

/* The epilogue's inputs past the convolution's that are its input x: the stdlib's qlinear takes
 * x as `x: tensor<T>` for its type alone, and a chain may run band by band through such a node
 * (exec.c); not through one whose kernel or second stage reads x's elements. */
static int kconv_band_in0_typed(const qr_node *n, int j, const void *user)
{
    const qr_intgraph *ig = user;
    int64_t nconv = qr_attr_i(n, "conv_inputs", 2), ci = qr_attr_i(n, "call", -1), si = qr_attr_i(n, "then_call", -1);
    if (!ig || j < nconv || ci < 0 || ci >= ig->ncalls || si >= ig->ncalls)
        return 0;
    return !call_touches(&ig->calls[ci], nconv - 1, j) &&
           (si < 0 || !call_touches(&ig->calls[si], qr_attr_i(n, "then_first", -1), j));
}

static qr_status maxpool_nhwc_run(qr_kctx *k) { return qr_pool_run_nhwc(k, 1); }
static qr_status avgpool_nhwc_run(qr_kctx *k) { return qr_pool_run_nhwc(k, 0); }

const qr_op_def qr_ops_intgraph[] = {
    {"QrlKernel", "qrl", 0, 128, 1, 1, "call:i to:i acc:i kernel:s shape_from:ints shape:ints shape_op:s shape_in:ints", kcall_infer,
     kcall_run, 0, .writes_all = qr_op_writes_all},
    {"QrlLookup", "qrl", 2, 2, 1, 1, "", lookup_infer, lookup_run, 0, .writes_all = qr_op_writes_all},
    {"QrlAccInteger", "qrl", 2, 4, 1, 1, QR_ACCINT_ATTRS, qr_accint_infer, qr_accint_run, 0, NULL, qr_accint_macs,
     qr_op_writes_all},
    {"QrlConvKernel", "qrl", 2, 128, 1, 1,
     "call:i to:i conv_inputs:i nhwc:i x_nchw:i then_call:i then_first:i auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints",
     kconv_infer, kconv_run, 0, NULL, kconv_macs, kconv_writes_all, .band = kconv_band,
     .band_in0_typed = kconv_band_in0_typed},
    {"QrlMatMulKernel", "qrl", 2, 128, 1, 1, "call:i to:i mm_inputs:i", kmm_infer, kmm_run, 0, NULL, kmm_macs,
     qr_op_writes_all},
    {"QrlMaxPoolNhwc", "qrl", 1, 1, 1, 1,
     "auto_pad:s ceil_mode:i dilations:ints kernel_shape:ints pads:ints storage_order:i strides:ints x_nchw:i",
     qr_pool_infer_nhwc, maxpool_nhwc_run, 0, .writes_all = qr_op_writes_all, .band = qr_pool_band_nhwc},
    {"QrlAveragePoolNhwc", "qrl", 1, 1, 1, 1,
     "auto_pad:s ceil_mode:i count_include_pad:i dilations:ints kernel_shape:ints pads:ints strides:ints",
     qr_pool_infer_nhwc, avgpool_nhwc_run, 0, .writes_all = qr_op_writes_all},
    {0},
};

/* ------------------------------------------------------------- builder */

/* A dynamic value's run-time quantization in the integer graph: its u8 integers, scales (f32), zero
 * points (u8, MatMulInteger's a_zero_point) and the same as i32 (what a kernel takes). */
typedef struct dyn_ints {
    qr_value *x, *scale, *zero, *zero32;
} dyn_ints;

typedef struct builder {
    const qr_qctx *q;
    qr_intgraph *ig;
    qr_graph *d;
    qr_error *e;
    dyn_ints *dyn; /* by value id of the original graph, made when a lowering first needs it */
} builder;

static const qr_slot *slot_for(const qr_qctx *q, int value)
{
    int s = value >= 0 && value < q->g->n_values ? q->slot_of[value] : -1;
    return s >= 0 && !q->slots[s].fallback ? &q->slots[s] : NULL;
}

/* The integer value of original value id v in d, or NULL. */
static qr_value *int_of(const builder *b, int v)
{
    return v >= 0 && v < b->q->g->n_values && b->q->qval[v] >= 0 ? b->d->values[b->q->qval[v]] : NULL;
}

static qr_value *scalar_const(builder *b, const char *name, qr_dtype t, int64_t v)
{
    unsigned char buf[8] = {0};
    qr_set_i64(buf, t, 0, v);
    qr_tensor c = {.dtype = t, .ndim = 0, .data = buf};
    return qr_plan_const(b->d, name, &c);
}

static qr_node *add_node(builder *b, const char *op, const char *name, int n_in, qr_value *out)
{
    qr_node *n = out ? qr_plan_new_node(b->d, op, op[0] == 'Q' && op[1] == 'r' ? "qrl" : "", name, n_in, 1) : NULL;
    if (!n)
        return NULL; /* out of memory: the graph marked, qr_intgraph_build reports it */
    n->out[0] = out;
    out->producer = n;
    return n;
}

/* The QuantizeLinear that produced integer value v: it goes, v is produced by the lowered code. */
static void drop_quantize(qr_value *v)
{
    if (v->producer)
        v->producer->dead = 1;
    v->producer = NULL;
}

/* A table taking integers on (sx, zx) to integers on (sy, zy) through f (NULL: identity). */
typedef double (*real_fn)(void *user, double v);

static qr_value *table_const(builder *b, const char *name, qr_dtype t, const qr_slot *x, const qr_slot *y,
                             real_fn f, void *user, const int32_t *ints)
{
    qrl_qtype qt = qr_qtype_of(t, 0, -1);
    int64_t n = qt.qmax - qt.qmin + 1;
    qr_tensor tab = {.dtype = t, .ndim = 1, .dims = {n}};
    if (qr_tensor_alloc(&tab, b->e) != QR_OK)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t q = qt.qmin + i, r;
        if (ints)
            r = ints[i];
        else {
            double v = (double)(q - x->qp.zero) * x->qp.scale;
            double fv = f ? f(user, v) : v;
            r = qr_plan_round_const(b->q, (float)fv, (float)y->qp.scale, y->qp.zero, y->qt.qmin, y->qt.qmax);
        }
        qr_set_i64(tab.data, t, i, r < y->qt.qmin ? y->qt.qmin : r > y->qt.qmax ? y->qt.qmax : r);
    }
    qr_value *c = qr_plan_const(b->d, name, &tab);
    qr_tensor_free(&tab);
    if (!c)
        qr_errorf(b->e, "out of memory");
    return c;
}

/* QrlLookup(x, table) -> out. */
static void add_lookup(builder *b, qr_value *x, qr_value *table, qr_value *out)
{
    char name[512];
    snprintf(name, sizeof name, "lookup_%s", out->name);
    qr_node *n = add_node(b, "QrlLookup", name, 2, out);
    if (!n)
        return;
    n->in[0] = x;
    n->in[1] = table;
}

/* x's integers requantized onto y's qparams, through a table (x itself when they agree). */
static qr_value *requantized(builder *b, qr_value *xi, const qr_slot *xs, const qr_slot *ys, qr_qinfo *yq)
{
    if (xs->qp.scale == ys->qp.scale && xs->qp.zero == ys->qp.zero)
        return xi;
    char name[512];
    snprintf(name, sizeof name, "%s_requantized", xi->name);
    qr_value *out = qr_graph_new_value(b->d, name);
    if (!out)
        return qr_errorf(b->e, "out of memory"), NULL;
    snprintf(name, sizeof name, "%s_requantize_table", xi->name);
    if (xs->dtype != ys->dtype)
        return qr_errorf(b->e, "'%s' is %s and its readers want %s: no requantizing table between types", xi->name,
                         qr_dtype_name(xs->dtype), qr_dtype_name(ys->dtype)), NULL;
    qr_value *tab = table_const(b, name, xs->dtype, xs, ys, NULL, NULL, NULL);
    if (!tab)
        return NULL;
    add_lookup(b, xi, tab, out);
    out->q = yq;
    b->ig->requants++;
    return out;
}

/* How original value id v runs in the integer graph, for reports. */
__attribute__((format(printf, 3, 4))) static void runs_as(builder *b, int v, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (v >= 0 && v < b->q->g->n_values)
        b->ig->runs[v] = qr_arena_strdup(&b->d->arena, buf);
}

static void island(builder *b, int v)
{
    b->ig->islands++;
    runs_as(b, v, "f32 between Q/DQ borders");
}

/* ---------------------------------------------------- pattern matches */

/* Whether match r quantizes original value v at run time (its pattern gives v the role dynamic). */
static int match_dynamic(const struct mrec *r, int v)
{
    for (int k = 0; v >= 0 && k < r->p->nvalues && k < QR_MATCH_MAX_VALUES; k++)
        if (r->values[k] == v && r->p->values[k].role == QR_ROLE_DYNAMIC)
            return 1;
    return 0;
}

/* Dynamic value v quantized at run time, once for every match that reads it so: DynamicQuantizeLinear
 * per tensor, the runtime's DynamicQuantizeRows per row (the same formula on each row); the
 * QDQ graph's fake quantization of v then has no reader left and goes. NULL: out of memory. */
static const dyn_ints *dynamic_ints(builder *b, int v)
{
    dyn_ints *di = &b->dyn[v];
    if (di->x)
        return di;
    qr_value *x = b->d->values[v], *o[3];
    static const char *const suf[3] = {"quantized_at_run_time", "run_time_scale", "run_time_zero_point"};
    char name[512];
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s_%s", x->name, suf[k]);
        if (!(o[k] = qr_graph_new_value(b->d, name)))
            return qr_errorf(b->e, "out of memory"), NULL;
    }
    int rows = b->q->dyn[v] == DYN_ROW;
    snprintf(name, sizeof name, "run_time_quantize_%s", x->name);
    qr_node *n = qr_plan_new_node(b->d, rows ? "DynamicQuantizeRows" : "DynamicQuantizeLinear", rows ? "qrl" : "",
                                  name, 1, 3);
    snprintf(name, sizeof name, "%s_run_time_zero_point_i32", x->name);
    qr_value *z32 = qr_graph_new_value(b->d, name);
    snprintf(name, sizeof name, "cast_%s_run_time_zero_point", x->name);
    qr_node *c = z32 ? add_node(b, "Cast", name, 1, z32) : NULL;
    if (!n || !c)
        return qr_errorf(b->e, "out of memory"), NULL;
    n->in[0] = x;
    for (int k = 0; k < 3; k++)
        n->out[k] = o[k], o[k]->producer = n;
    c->in[0] = o[2];
    qr_node_add_attr_i(b->d, c, "to", 6); /* ONNX's INT32 */
    *di = (dyn_ints){o[0], o[1], o[2], z32}; /* v's runs_as stays its producer's (a match's kernel, for MACs) */
    return di;
}

/* A matrix product's operand as the match quantizes it: the value itself, or, through nodes of
 * the match between it and the product (a constant factor the pattern folds into its kernel's
 * scale, as attention's 1/sqrt(d)), the data value they read. -1: none. */
static int product_operand(const qr_qctx *q, const struct mrec *r, const qr_value *v)
{
    while (v && !slot_for(q, v->id) && !qr_plan_weight(q, v->id) && v->producer) {
        const qr_node *p = v->producer;
        int in_match = 0;
        for (int k = 0; k < r->nnodes && !in_match; k++)
            in_match = r->nodes[k] == p->id;
        if (!in_match)
            break;
        v = NULL;
        for (int j = 0; j < p->n_in && !v; j++)
            if (p->in[j] && !p->in[j]->is_const)
                v = p->in[j];
    }
    return v ? v->id : -1;
}

/* The int32 accumulator of the match's Conv/Gemm/MatMul over the integers:
 * ConvInteger or MatMulInteger with the zero points. NULL: not lowerable. */
static qr_value *accumulator(builder *b, const struct mrec *r, const char **why)
{
    const qr_qctx *q = b->q;
    const qr_node *oa = NULL; /* the anchor in the original graph (in the QDQ graph it reads DequantizeLinears) */
    for (int k = 0; k < r->nnodes; k++) {
        const qr_node *n = q->g->nodes[r->nodes[k]];
        if (!strcmp(n->op, "Conv") || !strcmp(n->op, "Gemm") || !strcmp(n->op, "MatMul")) {
            if (oa) {
                *why = "two nodes could give the accumulator";
                return NULL;
            }
            oa = n;
        }
    }
    if (!oa) {
        *why = "the accumulator comes from a Conv, Gemm or MatMul, and the pattern matched none";
        return NULL;
    }
    const qr_node *a = b->d->nodes[q->qnode[oa->id]];
    int xv = product_operand(q, r, oa->in[0]), wv = oa->n_in > 1 ? product_operand(q, r, oa->in[1]) : -1;
    const dyn_ints *xd = NULL; /* x quantized at run time: its zero points come with it */
    if (match_dynamic(r, xv) && !(xd = dynamic_ints(b, xv)))
        return NULL;
    const qr_slot *xs = xd ? NULL : slot_for(q, xv);
    const qr_wquant *w = wv >= 0 ? qr_plan_weight(q, wv) : NULL;
    /* a MatMul of two activations (attention's Q.K^T and P.V): the second one's own qparams, or its
     * run-time ones when per tensor (per row of B would vary along the sum: no factor of it) */
    int act_b = !w && wv >= 0 && !strcmp(oa->op, "MatMul");
    const dyn_ints *bd = NULL;
    if (act_b && match_dynamic(r, wv)) {
        if (q->dyn[wv] != DYN_TENSOR) {
            *why = "the second operand of a product is quantized at run time per row, along the sum";
            return NULL;
        }
        if (!(bd = dynamic_ints(b, wv)))
            return NULL;
    }
    const qr_slot *bs = act_b && !bd ? slot_for(q, wv) : NULL;
    qr_value *xi = xd ? xd->x : int_of(b, xv), *wi = bd ? bd->x : int_of(b, wv);
    if ((!xs && !xd) || (!w && !bs && !bd) || !xi || !wi) {
        *why = "its input or weight is not quantized";
        return NULL;
    }
    int is_gemm = !strcmp(a->op, "Gemm");
    if (is_gemm && qr_attr_i(a, "transA", 0)) { /* alpha and beta were folded into the constants at load */
        *why = "Gemm with transA is not lowered";
        return NULL;
    }
    char name[512];
    if (is_gemm && qr_attr_i(a, "transB", 0)) { /* the weights transposed once, stored [K, N] */
        const qr_tensor *wt = &wi->t;
        if (wt->ndim != 2)
            return *why = "Gemm weight is not a matrix", NULL;
        qr_tensor t = {.dtype = wt->dtype, .ndim = 2, .dims = {wt->dims[1], wt->dims[0]}};
        if (qr_tensor_alloc(&t, b->e) != QR_OK)
            return NULL;
        size_t es = qr_dtype_size(wt->dtype);
        for (int64_t i = 0; i < wt->dims[0]; i++)
            for (int64_t j = 0; j < wt->dims[1]; j++)
                memcpy((char *)t.data + (size_t)(j * wt->dims[0] + i) * es,
                       (const char *)wt->data + (size_t)(i * wt->dims[1] + j) * es, es);
        snprintf(name, sizeof name, "%s_transposed", wi->name);
        wi = qr_plan_const(b->d, name, &t);
        qr_tensor_free(&t);
    }
    int conv = !strcmp(a->op, "Conv");
    snprintf(name, sizeof name, "%s_acc", a->out[0]->name);
    qr_value *acc = qr_graph_new_value(b->d, name);
    if (!acc)
        return qr_errorf(b->e, "out of memory"), NULL;
    snprintf(name, sizeof name, "%s_x_zero_point", acc->name);
    qr_value *xz = xd ? xd->zero : scalar_const(b, name, xs->dtype, xs->qp.zero);
    /* weight zero points: one per output channel, or a scalar; an activation's one */
    int nch = w ? w->nch : 1;
    qr_tensor wz = {.dtype = w ? qr_dtype_container(w->dtype) : bs ? bs->dtype : q->act_dtype, .ndim = nch > 1 ? 1 : 0, .dims = {nch}};
    qr_value *wzv = bd ? bd->zero : NULL;
    if (!bd) {
        if (qr_tensor_alloc(&wz, b->e) != QR_OK)
            return NULL;
        for (int c = 0; c < nch; c++)
            qr_set_i64(wz.data, wz.dtype, c, w ? w->zero[c] : bs->qp.zero);
        snprintf(name, sizeof name, "%s_w_zero_point", acc->name);
        wzv = qr_plan_const(b->d, name, &wz);
        qr_tensor_free(&wz);
    }
    snprintf(name, sizeof name, "%s_integer", a->name);
    /* a narrow accumulator: every partial sum in the defined order (quantizer/accwidth.h), not the
     * fast kernels' order */
    const char *op = q->acc_narrow ? "QrlAccInteger" : conv ? "ConvInteger" : "MatMulInteger";
    qr_node *n = add_node(b, op, name, 4, acc);
    if (!n)
        return qr_errorf(b->e, "out of memory"), NULL;
    n->in[0] = xi;
    n->in[1] = wi;
    n->in[2] = xz;
    n->in[3] = wzv;
    if (conv) { /* the Conv's geometry */
        n->attr = a->attr;
        n->n_attr = a->n_attr;
    }
    if (q->acc_narrow) {
        qr_acc_counter *c = realloc(b->ig->accs, sizeof *c * (size_t)(b->ig->naccs + 1));
        if (!c)
            return qr_errorf(b->e, "out of memory"), NULL;
        b->ig->accs = c;
        c[b->ig->naccs] = (qr_acc_counter){.value = r->out};
        qr_node_add_attr_i(b->d, n, "counter", b->ig->naccs++);
        qr_node_add_attr_i(b->d, n, "bits", q->acc_bits);
        qr_node_add_attr_i(b->d, n, "saturate", q->acc_saturate);
        qr_node_add_attr_i(b->d, n, "conv", conv);
    }
    return acc;
}

/* One argument of a lowering before it is built: a value (by role) or a constant. */
typedef struct plan_arg {
    int is_const, ci;   /* a constant argument: consts[ci] */
    int vi, id;         /* pattern value index and original value id (-1: a missing optional input) */
    qr_role_kind role;  /* QR_ROLE_NONE: the value stays f32 */
    int is_out;
} plan_arg;

/* The arguments of lowering l in order, the output last; -1 when malformed. */
static int plan_args(const struct mrec *r, const qr_pat_lower *l, plan_arg *pa, int max)
{
    const qr_pattern *p = r->p;
    int n = 0;
    for (int i = 0; i < l->nargs; i++) {
        if (n >= max - 1)
            return -1;
        plan_arg *a = &pa[n++];
        memset(a, 0, sizeof *a);
        if (l->args[i].kind == QR_LOWER_CONST) {
            a->is_const = 1;
            a->ci = l->args[i].index;
            continue;
        }
        a->vi = l->args[i].index;
        if (a->vi < 0 || a->vi >= p->nvalues)
            return -1;
        a->id = r->values[a->vi];
        a->role = p->values[a->vi].role;
    }
    if (l->out < 0 || l->out >= p->nvalues)
        return -1;
    qr_role_kind out = p->values[l->out].role == QR_ROLE_REAL ? QR_ROLE_REAL : QR_ROLE_OUTPUT;
    pa[n++] = (plan_arg){.vi = l->out, .id = r->out, .role = out, .is_out = 1};
    return n;
}

/* How many constant arguments the lowerings of p pass (QR_LOWER_CONST, numbered on across lower
 * clauses): what p->consts writes. */
static int pattern_consts(const qr_pattern *p)
{
    int n = 0;
    for (int i = 0; i < p->nlowers; i++)
        for (int a = 0; a < p->lowers[i].nargs; a++)
            if (p->lowers[i].args[a].kind == QR_LOWER_CONST && p->lowers[i].args[a].index >= n)
                n = p->lowers[i].args[a].index + 1;
    return n;
}

/* Parameters an argument fills: a quantized value its tensor, scale and zero point. */
static int arg_width(const plan_arg *a)
{
    return a->is_const || a->role == QR_ROLE_BIAS || a->role == QR_ROLE_NONE || a->role == QR_ROLE_REAL ? 1 : 3;
}

/* The integer type a quantized argument arrives as (QR_UNDEF: not quantized here). */
static qr_dtype arg_dtype(const builder *b, const plan_arg *a)
{
    if (a->is_const || a->role == QR_ROLE_NONE || a->role == QR_ROLE_REAL)
        return a->is_const ? QR_UNDEF : QR_F32;
    if (a->role == QR_ROLE_BIAS)
        return QR_I32;
    if (a->role == QR_ROLE_WEIGHT) {
        const qr_wquant *w = a->id >= 0 ? qr_plan_weight(b->q, a->id) : NULL;
        return w ? qr_dtype_container(w->dtype) : QR_UNDEF; /* i4 weights arrive unpacked, as i8 */
    }
    return qr_plan_value_dtype(b->q, a->id);
}

/* The accumulator ConvInteger and MatMulInteger give for activations of type t: int32 for 8 bits,
 * int64 for 16 (runtime/ops/quant.c sums their bytes in int32 and combines them in int64). */
static qr_dtype acc_dtype(qr_dtype t)
{
    return t == QR_U16 || t == QR_I16 ? QR_I64 : QR_I32;
}

/* The type of match r's quantized activation inputs that sets its accumulator: a 16-bit one if
 * any (an `activation for` setting may give one operand 16 bits and the other 8), else the first. */
static qr_dtype match_operand_dtype(const builder *b, const struct mrec *r)
{
    const qr_pattern *p = r->p;
    qr_dtype t = b->q->act_dtype;
    for (int i = 0, first = 1; i < p->nvalues && i < QR_MATCH_MAX_VALUES; i++) {
        qr_role_kind k = p->values[i].role;
        if (r->values[i] < 0 || r->values[i] == r->out || (k != QR_ROLE_ACTIVATION && k != QR_ROLE_SAME))
            continue;
        qr_dtype v = qr_plan_value_dtype(b->q, r->values[i]);
        if (first || acc_dtype(v) == QR_I64)
            t = v;
        first = 0;
        if (acc_dtype(v) == QR_I64)
            break;
    }
    return t;
}

/* The accumulator of match r: int64 when one of its quantized activation inputs is 16-bit. */
static qr_dtype match_acc_dtype(const builder *b, const struct mrec *r)
{
    return acc_dtype(match_operand_dtype(b, r));
}

/* Whether kernel lowering l takes the types the recipe chose; why says what does not fit. */
static int lowering_fits(const builder *b, const struct mrec *r, const qr_pat_lower *l, const qr_fn_desc *kd,
                         const ptype *pt, int np, int *acc, char *why, size_t whyn)
{
    plan_arg pa[64];
    char tb[64];
    int n = plan_args(r, l, pa, 64), nw = 0;
    if (n < 0) {
        snprintf(why, whyn, "its arguments are malformed");
        return 0;
    }
    for (int i = 0; i < n; i++)
        nw += arg_width(&pa[i]);
    *acc = np == nw + 1 && pt[0].kind == ARG_TENSOR && (pt[0].elem == QR_I32 || pt[0].elem == QR_I64);
    if (np != nw + *acc) {
        snprintf(why, whyn, "kernel '%s' takes %d parameters, the lowering passes %d", kd->name, np, nw);
        return 0;
    }
    qr_dtype acc_t = match_acc_dtype(b, r);
    if (*acc && pt[0].elem != acc_t) {
        snprintf(why, whyn, "kernel '%s' takes its accumulator as tensor<%s>, but %s activations accumulate in %s",
                 kd->name, qr_dtype_name(pt[0].elem), qr_dtype_name(match_operand_dtype(b, r)), qr_dtype_name(acc_t));
        return 0;
    }
    for (int i = 0, p = *acc; i < n; p += arg_width(&pa[i]), i++) {
        if (pa[i].is_const)
            continue;
        qr_dtype have = arg_dtype(b, &pa[i]);
        if (have != QR_UNDEF && (pt[p].kind != ARG_TENSOR || pt[p].elem != have)) {
            snprintf(why, whyn, "kernel '%s' takes '%s' as %s, but the recipe makes it %s (the model's '%s')",
                     kd->name, kd->params[p].name, type_str(&pt[p], tb, sizeof tb),
                     have == QR_F32 ? "an f32 tensor" : qr_dtype_name(have),
                     b->q->g->values[pa[i].id >= 0 ? pa[i].id : r->out]->name);
            return 0;
        }
    }
    return 1;
}

int qr_intgraph_lowering_takes(const struct qr_qctx *q, const struct mrec *r)
{
    builder b = {.q = q};
    ptype pt[128];
    char why[400];
    for (int i = 0; i < r->p->nlowers; i++) {
        const qr_fn_desc *k = qr_module_fn(q->m, r->p->lowers[i].kernel);
        int np = k && k->is_kernel && k->call ? kernel_params(k, pt, 128) : -1, acc;
        if (np >= 0 && lowering_fits(&b, r, &r->p->lowers[i], k, pt, np, &acc, why, sizeof why))
            return 1;
    }
    return 0;
}

int qr_intgraph_is_layer(const struct qr_qctx *q, const struct mrec *r)
{
    const qr_pattern *p = r->p;
    plan_arg pa[64];
    ptype pt[128];
    for (int i = 0; i < p->nlowers; i++) { /* a kernel that takes the accumulator first: an epilogue */
        const qr_fn_desc *k = qr_module_fn(q->m, p->lowers[i].kernel);
        int np = k && k->is_kernel ? kernel_params(k, pt, 128) : -1, n = plan_args(r, &p->lowers[i], pa, 64), nw = 0;
        for (int a = 0; a < n; a++)
            nw += arg_width(&pa[a]);
        if (np > 0 && n >= 0 && np == nw + 1 && pt[0].kind == ARG_TENSOR && (pt[0].elem == QR_I32 || pt[0].elem == QR_I64))
            return 1;
    }
    return 0;
}

/* The first lowering of r's pattern whose kernel takes the recipe's types: *l, its kernel *kd, the
 * kernel's parameter types pt[]; *want_acc when its first parameter is the int32 accumulator. */
static qr_status choose_lowering(builder *b, const struct mrec *r, const qr_pat_lower **l, const qr_fn_desc **kd,
                                 ptype *pt, int *want_acc)
{
    const qr_pattern *p = r->p;
    char why[1024] = "", one[400];
    int np;
    *l = NULL;
    *want_acc = 0;
    for (int i = 0; i < p->nlowers && !*l; i++) {
        const qr_fn_desc *k = qr_module_fn(b->q->m, p->lowers[i].kernel);
        if (!k || !k->is_kernel || !k->call)
            return qr_errorf(b->e, "%s: pattern '%s' lowers to kernel '%s', which the recipe's module does not define",
                             p->loc, p->name, p->lowers[i].kernel);
        if ((np = kernel_params(k, pt, 128)) < 0)
            return qr_errorf(b->e, "kernel '%s' has %d parameters, more than 128", k->name, k->nparams);
        if (lowering_fits(b, r, &p->lowers[i], k, pt, np, want_acc, one, sizeof one))
            *l = &p->lowers[i], *kd = k;
        else
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", why[0] ? "; " : "", one);
    }
    if (!*l)
        return qr_errorf(b->e, "%s: pattern '%s' has no lowering for the types the recipe chose (%s)", p->loc, p->name,
                         why);
    return QR_OK;
}

/* Bias argument a of match r as the kernels add it: int32 in the accumulator's unit (x.scale *
 * w.scale per channel) with zero point 0. That is what the stdlib's bias_qparams hook gives, and
 * the bias's own integers are passed; a recipe's hook may give other qparams or bias = i16, and
 * then a constant of the integers converted to that unit (rounded half to even) is. */
static qr_value *bias_for_kernel(builder *b, const struct mrec *r, const plan_arg *a)
{
    const qr_qctx *q = b->q;
    const qr_pattern *p = r->p;
    qr_value *bi = int_of(b, a->id);
    const qr_node *dq = b->d->values[a->id]->producer;
    int xi = p->values[a->vi].a, wi = p->values[a->vi].b;
    const qr_slot *xs = xi >= 0 && xi < p->nvalues ? slot_for(q, r->values[xi]) : NULL;
    const qr_wquant *w = wi >= 0 && wi < p->nvalues ? qr_plan_weight(q, r->values[wi]) : NULL;
    if (!bi || !dq || dq->n_in < 3 || !dq->in[1] || !dq->in[2] || !xs || !w)
        return bi;
    const qr_tensor *st = &dq->in[1]->t, *zt = &dq->in[2]->t;
    int64_t n = qr_tensor_numel(&bi->t), ns = qr_tensor_numel(st), nz = qr_tensor_numel(zt);
    int same = bi->t.dtype == QR_I32;
    for (int64_t c = 0; c < n && same; c++) {
        float acc = (float)xs->qp.scale * w->scale[w->nch == 1 ? 0 : c];
        same = qr_get_f64(st->data, st->dtype, ns == 1 ? 0 : c) == acc && qr_get_i64(zt->data, zt->dtype, nz == 1 ? 0 : c) == 0;
    }
    if (same)
        return bi;
    qr_tensor t = {.dtype = QR_I32, .ndim = bi->t.ndim};
    memcpy(t.dims, bi->t.dims, sizeof t.dims);
    if (qr_tensor_alloc(&t, b->e) != QR_OK)
        return NULL;
    for (int64_t c = 0; c < n; c++) {
        double acc = (double)((float)xs->qp.scale * w->scale[w->nch == 1 ? 0 : c]);
        double v = nearbyint(((double)qr_get_i64(bi->t.data, bi->t.dtype, c) -
                              (double)qr_get_i64(zt->data, zt->dtype, nz == 1 ? 0 : c)) *
                             qr_get_f64(st->data, st->dtype, ns == 1 ? 0 : c) / acc);
        ((int32_t *)t.data)[c] = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
    }
    char name[600];
    snprintf(name, sizeof name, "%s_in_acc_unit", bi->name);
    qr_value *v = qr_plan_const(b->d, name, &t);
    qr_tensor_free(&t);
    return v;
}

/* Whether a value the lowering needs was left without integers by the plan (the group then stays f32). */
static int lacks_integers(const builder *b, const struct mrec *r, const plan_arg *pa, int npa)
{
    const qr_qctx *q = b->q;
    for (int i = 0; i < npa; i++) {
        const plan_arg *a = &pa[i];
        /* a missing optional bias arrives as one zero: i32 with its role, f32 without one */
        int missing = !a->is_const && a->id < 0 && a->role != QR_ROLE_BIAS && a->role != QR_ROLE_NONE;
        int no_int = !a->is_const && a->id >= 0 && a->role != QR_ROLE_NONE && a->role != QR_ROLE_REAL &&
                     a->role != QR_ROLE_DYNAMIC && !int_of(b, a->id);
        const qr_wquant *w = !a->is_const && a->role == QR_ROLE_WEIGHT && a->id >= 0 ? qr_plan_weight(q, a->id) : NULL;
        int no_w = !a->is_const && a->role == QR_ROLE_WEIGHT && a->id >= 0 && !w;
        /* per-channel scales along another axis than the pattern's (a loaded model's choice) */
        int other_axis = w && w->nch > 1 && w->axis != r->p->values[a->vi].axis;
        if (missing || no_int || no_w || other_axis)
            return 1;
    }
    return 0;
}

/* The lowerings' constant arguments, computed from the match (as many as their args name): a
 * malloc'd array of *nconsts values; NULL with b->e set. */
static double *match_consts(builder *b, const struct mrec *r, int *nconsts)
{
    const qr_qctx *q = b->q;
    const qr_pattern *p = r->p;
    *nconsts = pattern_consts(p);
    double *consts = calloc((size_t)*nconsts + 1, sizeof *consts);
    if (!consts) {
        qr_errorf(b->e, "out of memory");
        return NULL;
    }
    if (!p->consts)
        return consts;
    qr_value *vals[QR_MATCH_MAX_VALUES] = {0};
    for (int i = 0; i < p->nvalues && i < QR_MATCH_MAX_VALUES; i++)
        vals[i] = r->values[i] >= 0 ? q->g->values[r->values[i]] : NULL;
    qrl_array arrays[QRL_MATCH_ARRAYS];
    int narrays = 0;
    qrl_match mt = {q->g, vals, p->nvalues < QR_MATCH_MAX_VALUES ? p->nvalues : QR_MATCH_MAX_VALUES, NULL, arrays,
                    &narrays};
    qrl_rt rt;
    qr_rt_init(&rt);
    p->consts(&rt, &mt, consts);
    if (qr_rt_status(&rt, b->e) != QR_OK || qr_match_status(&mt, b->e) != QR_OK) {
        free(consts);
        qr_error_prefix(b->e, "%s: pattern '%s'", p->loc, p->name);
        return NULL;
    }
    return consts;
}

/* A kernel call's arguments and the QrlKernel node's inputs. */
typedef struct kernel_args {
    qi_arg args[128];
    qr_value *ins[128];
    int64_t shape_from[128];
    int orig_in[128]; /* the original graph's value behind each input, -1: none */
    int na, nin, nshape;
} kernel_args;

/* Adds the scale and zero point of plan argument a after its tensor: arrays per channel for a
 * per-channel weight, else two scalars. */
static qr_status add_qparams(builder *b, const struct mrec *r, const qr_fn_desc *kd, const plan_arg *a,
                             const ptype *pt, kernel_args *ka)
{
    const qr_qctx *q = b->q;
    qi_arg *args = ka->args;
    const qr_wquant *w = a->role == QR_ROLE_WEIGHT ? qr_plan_weight(q, a->id) : NULL;
    if (w && r->p->values[a->vi].axis >= 0) { /* per channel: arrays of scales and zero points */
        for (int k = 0; k < 2; k++, ka->na++) {
            int na = ka->na;
            qi_arg *arr = &args[na];
            arr->kind = ARG_ARRAY;
            if (pt[na].kind != ARG_ARRAY || (pt[na].elem != QR_F32 && pt[na].elem != QR_I32) ||
                !(arr->arr.data = calloc((size_t)w->nch, qr_dtype_size(pt[na].elem))))
                return qr_errorf(b->e, "kernel '%s': parameter %d must be %s", kd->name, na + 1, k ? "i32[]" : "f32[]");
            arr->arr.len = w->nch;
            for (int c = 0; c < w->nch; c++)
                qr_set_f64(arr->arr.data, pt[na].elem, c, k ? (double)w->zero[c] : (double)w->scale[c]);
        }
        return QR_OK;
    }
    const qr_slot *s = a->is_out ? slot_for(q, r->out) : slot_for(q, a->id);
    double sc = w ? w->scale[0] : s ? s->qp.scale : 1, z = w ? w->zero[0] : s ? (double)s->qp.zero : 0;
    store_scalar(&args[ka->na], &pt[ka->na], sc);
    ka->na++;
    store_scalar(&args[ka->na], &pt[ka->na], z);
    ka->na++;
    return QR_OK;
}

/* The kernel's arguments after the accumulator (if any), one plan argument at a time: a constant,
 * or the tensor (the output's place for y) followed by its scale and zero point. */
static qr_status fill_args(builder *b, const struct mrec *r, const qr_fn_desc *kd, const plan_arg *pa, int npa,
                           const ptype *pt, const double *consts, int nconsts, qr_value *yi, kernel_args *ka)
{
    qi_arg *args = ka->args;
    char name[512];
    for (int i = 0; i < npa; i++) {
        const plan_arg *a = &pa[i];
        if (a->is_const) {
            store_scalar(&args[ka->na], &pt[ka->na], a->ci >= 0 && a->ci < nconsts ? consts[a->ci] : 0);
            ka->na++;
            continue;
        }
        if (a->role == QR_ROLE_DYNAMIC) { /* its integers, scales and zero points, all computed at run time */
            const dyn_ints *di = dynamic_ints(b, a->id);
            if (!di)
                return QR_ERR;
            qr_value *three[3] = {di->x, di->scale, di->zero32};
            for (int k = 0; k < 3; k++) {
                args[ka->na] = (qi_arg){.kind = ARG_TENSOR, .input = ka->nin, .want = pt[ka->na].elem};
                ka->na++;
                if (!k)
                    ka->shape_from[ka->nshape++] = ka->nin;
                ka->orig_in[ka->nin] = k ? -1 : a->id;
                ka->ins[ka->nin++] = three[k];
            }
            continue;
        }
        qr_value *t;
        if ((a->role == QR_ROLE_BIAS || a->role == QR_ROLE_NONE) && a->id < 0) { /* a missing bias: one zero */
            snprintf(name, sizeof name, "%s_no_bias", yi->name);
            t = scalar_const(b, name, a->role == QR_ROLE_BIAS ? QR_I32 : QR_F32, 0);
        } else
            t = a->role == QR_ROLE_BIAS ? bias_for_kernel(b, r, a) : a->role != QR_ROLE_NONE ? int_of(b, a->id) : b->d->values[a->id];
        if (a->is_out) {
            args[ka->na] = (qi_arg){.kind = ARG_OUTPUT, .want = pt[ka->na].elem};
            ka->na++;
        } else {
            args[ka->na] = (qi_arg){.kind = ARG_TENSOR, .input = ka->nin, .want = pt[ka->na].elem};
            ka->na++;
            if (a->role == QR_ROLE_ACTIVATION || a->role == QR_ROLE_OUTPUT)
                ka->shape_from[ka->nshape++] = ka->nin;
            ka->orig_in[ka->nin] = a->id;
            ka->ins[ka->nin++] = t;
        }
        if (arg_width(a) != 1 && add_qparams(b, r, kd, a, pt, ka) != QR_OK)
            return QR_ERR;
    }
    return QR_OK;
}

/* Appends the call of kd with ka's arguments to the integer graph's calls (which then own their
 * arrays), after st (fill_args's status) and the scalar parameters are checked; on any failure the
 * arrays are freed. */
static qr_status add_call(builder *b, const qr_pattern *p, const qr_fn_desc *kd, const ptype *pt, kernel_args *ka,
                          qr_status st)
{
    qi_arg *args = ka->args;
    int na = ka->na;
    for (int i = 0; st == QR_OK && i < na; i++)
        if (args[i].kind == ARG_SCALAR && pt[i].kind != ARG_SCALAR)
            st = qr_errorf(b->e, "%s: kernel '%s': parameter %d is not a scalar, pattern '%s' passes one", p->loc,
                           kd->name, i + 1, p->name);
    qr_intcall call = {.k = kd, .pattern = p->name, .loc = p->loc, .nargs = na};
    qr_intcall *cv = st == QR_OK ? realloc(b->ig->calls, sizeof *cv * (size_t)(b->ig->ncalls + 1)) : NULL;
    if (cv)
        b->ig->calls = cv;
    if (!cv || !(call.args = malloc(sizeof *call.args * (size_t)na))) {
        for (int i = 0; i < na; i++)
            if (args[i].kind == ARG_ARRAY)
                free(args[i].arr.data);
        return st == QR_OK ? qr_errorf(b->e, "out of memory") : QR_ERR;
    }
    memcpy(call.args, args, sizeof *call.args * (size_t)na); /* the call owns the arrays now */
    cv[b->ig->ncalls] = call;
    return QR_OK;
}

/* When the model leaves the output's rank unknown (shapes computed at run time: a Reshape to a
 * Concat of Shape slices), a match of one node takes its output's shape from that node's op at run
 * time (kcall_infer: the op's own infer on the kernel's inputs): "shape_op" names the op,
 * "shape_in" maps each of its inputs to the kernel input holding it (-1: left out) and its
 * attributes follow as "op:NAME". Not for a node with an input the kernel does not take (a
 * constant the lowering folded in): the inputs' broadcast shape then, as before. A reduction
 * (GlobalAveragePool, ReduceMean) otherwise took its input's shape. */
static void shape_op_attrs(builder *b, const struct mrec *r, qr_node *n, const kernel_args *ka)
{
    const qr_node *o = r->nnodes == 1 ? b->q->g->nodes[r->nodes[0]] : NULL;
    int64_t map[16];
    if (!o || o->n_out != 1 || o->n_in > 16 || o->domain[0])
        return;
    for (int i = 0; i < o->n_in; i++) {
        map[i] = -1;
        for (int j = 0; o->in[i] && j < ka->nin && map[i] < 0; j++)
            if (ka->orig_in[j] == o->in[i]->id)
                map[i] = j;
        if (o->in[i] && map[i] < 0)
            return;
    }
    char name[256];
    qr_node_add_attr_s(b->d, n, "shape_op", o->op);
    qr_node_add_attr_ints(b->d, n, "shape_in", o->n_in, map);
    for (int a = 0; a < o->n_attr; a++) {
        snprintf(name, sizeof name, "op:%s", o->attr[a].name);
        qr_node_add_attr_as(b->d, n, name, &o->attr[a]);
    }
}

/* A kernel without the accumulator makes its output's shape itself: the original y's, an unknown
 * dim following one of an input's (the same symbolic name) as input * QR_MAX_DIMS + axis. */
static void shape_attrs(builder *b, const struct mrec *r, qr_node *n, const kernel_args *ka)
{
    const qr_qctx *q = b->q;
    if (ka->nshape)
        qr_node_add_attr_ints(b->d, n, "shape_from", ka->nshape, ka->shape_from);
    const qr_value *oy = q->g->values[r->out];
    if (oy->t.ndim < 0) { /* the model leaves y's rank unknown */
        shape_op_attrs(b, r, n, ka);
        return;
    }
    if (oy->t.ndim == 0 || oy->t.ndim > QR_MAX_DIMS) /* -1: an unknown (batch) dim */
        return;
    qr_node_add_attr_ints(b->d, n, "shape", oy->t.ndim, oy->t.dims);
    int64_t from[QR_MAX_DIMS];
    for (int d = 0; d < oy->t.ndim; d++) {
        from[d] = -1;
        for (int i = 0; i < ka->nshape && oy->t.dims[d] < 0 && oy->dim_param[d] && from[d] < 0; i++) {
            int id = ka->orig_in[ka->shape_from[i]];
            const qr_value *iv = id >= 0 ? q->g->values[id] : NULL;
            for (int j = 0; iv && j < iv->t.ndim && j < QR_MAX_DIMS && from[d] < 0; j++)
                if (iv->dim_param[j] && !strcmp(iv->dim_param[j], oy->dim_param[d]))
                    from[d] = ka->shape_from[i] * QR_MAX_DIMS + j;
        }
    }
    qr_node_add_attr_ints(b->d, n, "dims_from", oy->t.ndim, from);
}

/* [2,4,?] */
static void shape_str(int nd, const int64_t *dims, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd && k < n; d++)
        k += dims[d] < 0 ? (size_t)snprintf(buf + k, n - k, "%s?", d ? "," : "")
                         : (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)dims[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* A kernel that declares its output's shape sizes it from its inputs ("out_dims", kcall_infer);
 * where the model's shapes fix both, the two must agree, else the pattern lowers to the wrong kernel. */
static qr_status declared_shape_attrs(builder *b, const struct mrec *r, qr_node *n, const qr_fn_desc *kd,
                                      const kernel_args *ka)
{
    int64_t od[3 * 4 * QR_MAX_DIMS];
    int nod = 0;
    for (int e = 0; e < kd->n_out_dims; e++) {
        const qr_out_dim *d = &kd->out_dims[e];
        int in = -1;
        if (d->kind != QR_ODIM_INT) {
            if (d->param >= ka->na || ka->args[d->param].kind != ARG_TENSOR)
                return qr_errorf(b->e, "%s: pattern '%s': kernel '%s' declares its output's shape from parameter %d, "
                                 "which the lowering does not pass a tensor", r->p->loc, r->p->name, kd->name, d->param + 1);
            in = ka->args[d->param].input;
        }
        od[nod++] = d->kind, od[nod++] = in, od[nod++] = d->at;
    }
    qr_node_add_attr_ints(b->d, n, "out_dims", nod, od);
    /* the model's static shapes, for the check */
    qr_tensor st[128];
    const qr_tensor *sp[128];
    for (int i = 0; i < ka->nin && i < 128; i++) {
        const qr_value *v = ka->orig_in[i] >= 0 ? b->q->g->values[ka->orig_in[i]] : NULL;
        st[i] = v ? v->t : (qr_tensor){.ndim = -1};
        sp[i] = &st[i];
    }
    int64_t dims[QR_MAX_DIMS];
    char why[160];
    int nd = declared_shape(od, nod, sp, ka->nin < 128 ? ka->nin : 128, dims, why, sizeof why);
    const qr_value *oy = b->q->g->values[r->out];
    if (nd < 0 || oy->t.ndim < 0)
        return QR_OK; /* the run decides (kcall_infer) */
    int same = nd == oy->t.ndim;
    for (int d = 0; same && d < nd; d++)
        same = dims[d] < 0 || oy->t.dims[d] < 0 || dims[d] == oy->t.dims[d];
    if (same)
        return QR_OK;
    char a[128], y[128];
    shape_str(nd, dims, a, sizeof a);
    shape_str(oy->t.ndim, oy->t.dims, y, sizeof y);
    return qr_errorf(b->e, "%s: pattern '%s': kernel '%s' declares an output of shape %s for this match, but the "
                     "model's '%s' is %s", r->p->loc, r->p->name, kd->name, a, oy->name, y);
}

/* The QrlKernel node of the call just added, in place of the match's nodes and y's QuantizeLinear. */
static qr_status kernel_node(builder *b, const struct mrec *r, const qr_fn_desc *kd, qr_value *yi, const kernel_args *ka,
                             int want_acc)
{
    const qr_qctx *q = b->q;
    char name[512];
    int real = yi->t.dtype == QR_F32;
    for (int k = 0; k < r->nnodes; k++)
        b->d->nodes[q->qnode[r->nodes[k]]]->dead = 1;
    if (!real)
        drop_quantize(yi);
    /* a generic kernel's instance ("qlinear<u8>") names the node by its generic: names stay identifiers */
    snprintf(name, sizeof name, "%s_%.*s_%s", r->p->name, (int)strcspn(kd->name, "<"), kd->name, yi->name);
    qr_node *n = add_node(b, "QrlKernel", name, ka->nin, yi);
    if (!n)
        return QR_OK; /* out of memory: the builder reports it */
    memcpy(n->in, ka->ins, sizeof *ka->ins * (size_t)ka->nin);
    qr_node_add_attr_i(b->d, n, "call", b->ig->ncalls);
    qr_node_add_attr_i(b->d, n, "to", real ? QR_F32 : qr_plan_value_dtype(q, r->out));
    qr_node_add_attr_i(b->d, n, "acc", want_acc);
    if (!want_acc && kd->n_out_dims > 0 && declared_shape_attrs(b, r, n, kd, ka) != QR_OK)
        return QR_ERR;
    if (!want_acc && kd->n_out_dims == 0)
        shape_attrs(b, r, n, ka);
    if (yi->q && want_acc && !real) { /* y comes from an int32 accumulator */
        qr_qinfo *qi = qr_arena_memdup(&b->d->arena, yi->q, sizeof *qi);
        if (qi)
            qi->acc = match_acc_dtype(b, r), yi->q = qi;
    }
    return QR_OK;
}

/* A match of a pattern as a call of its lowering's kernel: the kernel is chosen, its arguments
 * filled from the plan (tensors, qparams, the match's constants) and the call replaces the match. */
/* A pointwise kernel of one 8-bit tensor (its other arguments constants of the call: qparams,
 * the pattern's constants) is a function of the 256 integers its input can hold: the call is run
 * once, at lowering, on all of them, and the match runs as a lookup table of its results, the same
 * bits element by element. *done 0 when the call is not of that form (it then runs as a kernel). */
static qr_status table_of_pointwise(builder *b, const struct mrec *r, const qr_fn_desc *kd, const kernel_args *ka,
                                    qr_value *yi, int *done)
{
    *done = 0;
    qr_dtype t = QR_UNDEF; /* the input's type */
    for (int i = 0; i < ka->na && t == QR_UNDEF; i++)
        if (ka->args[i].kind == ARG_TENSOR)
            t = ka->args[i].want;
    if (!kd->is_pointwise || ka->nin != 1 || (t != QR_U8 && t != QR_I8) || ka->na > QRL_MAX_PARAMS)
        return QR_OK;
    for (int i = 0; i < ka->na; i++) /* the tensor and the output are both of the activations' type */
        if ((ka->args[i].kind == ARG_TENSOR || ka->args[i].kind == ARG_OUTPUT) && ka->args[i].want != t)
            return QR_OK;
    qrl_qtype qt = qr_qtype_of(t, 0, -1);
    int64_t n = qt.qmax - qt.qmin + 1;
    qr_tensor in = {.dtype = t, .ndim = 1, .dims = {n}}, out = {.dtype = t, .ndim = 1, .dims = {n}};
    if (qr_tensor_alloc(&in, b->e) != QR_OK)
        return QR_ERR;
    if (qr_tensor_alloc(&out, b->e) != QR_OK) {
        qr_tensor_free(&in);
        return QR_ERR;
    }
    for (int64_t i = 0; i < n; i++)
        qr_set_i64(in.data, t, i, qt.qmin + i);
    qrl_tview views[2];
    void *args[QRL_MAX_PARAMS];
    qr_tview_of(&in, &views[0]);
    qr_tview_of(&out, &views[1]);
    for (int i = 0; i < ka->na; i++) {
        const qi_arg *a = &ka->args[i];
        args[i] = a->kind == ARG_TENSOR   ? (void *)&views[0]
                  : a->kind == ARG_OUTPUT ? (void *)&views[1]
                  : a->kind == ARG_ARRAY  ? (void *)&a->arr
                                          : (void *)a->bytes;
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    kd->call(&rt, args);
    qr_status st = qr_rt_status(&rt, b->e);
    if (st != QR_OK)
        qr_error_prefix(b->e, "%s: kernel '%s' (pattern '%s') on its input's %lld integers", r->p->loc, kd->name,
                        r->p->name, (long long)n);
    char name[512];
    snprintf(name, sizeof name, "%s_%s_table", r->p->name, yi->name);
    qr_value *tab = st == QR_OK ? qr_plan_const(b->d, name, &out) : NULL;
    qr_tensor_free(&in);
    qr_tensor_free(&out);
    if (st != QR_OK)
        return QR_ERR;
    if (!tab)
        return qr_errorf(b->e, "out of memory");
    for (int k = 0; k < r->nnodes; k++)
        b->d->nodes[b->q->qnode[r->nodes[k]]]->dead = 1;
    drop_quantize(yi);
    add_lookup(b, ka->ins[0], tab, yi);
    b->ig->lookups++;
    runs_as(b, r->out, "kernel %s as a lookup table (pattern %s)", kd->name, r->p->name);
    *done = 1;
    return QR_OK;
}

/* The f32 value a real output's kernel writes: y itself, or, when another match quantizes y for
 * its own use, what y's QuantizeLinear reads (which then stays). */
static qr_value *real_output(builder *b, int v)
{
    qr_value *q = int_of(b, v);
    if (!q)
        return b->d->values[v];
    return q->producer && q->producer->n_in > 0 ? q->producer->in[0] : NULL;
}

static qr_status lower_match(builder *b, const struct mrec *r)
{
    const qr_pattern *p = r->p;
    int real = p->nlowers && p->values[p->lowers[0].out].role == QR_ROLE_REAL;
    qr_value *yi = real ? real_output(b, r->out) : int_of(b, r->out);
    if (!p->nlowers || (!real && !slot_for(b->q, r->out)) || !yi || qr_plan_match_dyn_f32(b->q, r))
        return QR_OK; /* nothing to lower, or it fell back to f32 */
    const qr_pat_lower *l;
    const qr_fn_desc *kd = NULL;
    ptype pt[128];
    int want_acc;
    if (choose_lowering(b, r, &l, &kd, pt, &want_acc) != QR_OK)
        return QR_ERR;
    plan_arg pa[64];
    int npa = plan_args(r, l, pa, 64);
    if (lacks_integers(b, r, pa, npa)) {
        island(b, r->out);
        return QR_OK;
    }
    kernel_args ka;
    memset(&ka, 0, sizeof ka);
    if (want_acc) {
        const char *accwhy = NULL;
        qr_value *acc = accumulator(b, r, &accwhy);
        if (!acc) {
            if (!accwhy)
                return QR_ERR;
            island(b, r->out); /* structurally not lowerable: the group stays f32 between its Q/DQ borders */
            return QR_OK;
        }
        ka.args[ka.na++] = (qi_arg){.kind = ARG_TENSOR, .input = ka.nin, .want = match_acc_dtype(b, r)};
        ka.orig_in[ka.nin] = -1;
        ka.ins[ka.nin++] = acc;
    }
    int nconsts;
    double *consts = match_consts(b, r, &nconsts);
    if (!consts)
        return QR_ERR;
    qr_status st = fill_args(b, r, kd, pa, npa, pt, consts, nconsts, yi, &ka);
    free(consts);
    int tabled = 0;
    if (st == QR_OK && !want_acc && (st = table_of_pointwise(b, r, kd, &ka, yi, &tabled)) == QR_OK && tabled) {
        for (int i = 0; i < ka.na; i++)
            if (ka.args[i].kind == ARG_ARRAY)
                free(ka.args[i].arr.data);
        return QR_OK;
    }
    if (add_call(b, p, kd, pt, &ka, st) != QR_OK)
        return QR_ERR;
    if (want_acc) { /* its block forms, for accumulators whose channels are the last axis (kcall_rows) */
        qr_intcall *c = &b->ig->calls[b->ig->ncalls];
        c->tile = qr_module_tile(b->q->m, kd);
        c->nhwc = c->tile ? qr_module_nhwc(b->q->m, kd, &c->tables) : NULL;
    }
    qr_status ks = kernel_node(b, r, kd, yi, &ka, want_acc);
    b->ig->ncalls++; /* the graph owns the call's arrays now, whatever became of its node */
    b->ig->kernels++;
    if (ks != QR_OK)
        return QR_ERR;
    runs_as(b, r->out, "kernel %s (pattern %s)", kd->name, p->name);
    return QR_OK;
}

/* ------------------------------------------------------- affine nodes */

typedef struct table_user {
    const qr_affine *a;
    const qrl_match *mt;
    qrl_rt rt;
} table_user;

static double rule_table(void *user, double v)
{
    table_user *t = user;
    return t->a->table(&t->rt, t->mt, v);
}

static qr_status body_table_with(builder *b, const qr_affine *a, const qr_node *n, const qr_slot *xs, int32_t *out,
                                 int *ok, int32_t *xv, int32_t *zero, double *scale);

/* A same-rule's body as a table: elem runs on every integer of x, with the
 * node's other inputs (scalar constants) quantized on x's qparams. */
static qr_status body_table(builder *b, const qr_affine *a, const qr_node *n, const qr_slot *xs, int32_t *out,
                            int *ok)
{
    *ok = 0;
    if (n->n_in < a->ninputs || n->n_in < 1)
        return QR_OK;
    /* one slot per input of the node, however many it has */
    size_t ni = (size_t)n->n_in;
    int32_t *xv = calloc(2 * ni, sizeof *xv), *zero = xv + ni;
    double *scale = malloc(ni * sizeof *scale);
    if (!xv || !scale) {
        free(xv);
        free(scale);
        return qr_errorf(b->e, "out of memory");
    }
    qr_status st = body_table_with(b, a, n, xs, out, ok, xv, zero, scale);
    free(xv);
    free(scale);
    return st;
}

static qr_status body_table_with(builder *b, const qr_affine *a, const qr_node *n, const qr_slot *xs, int32_t *out,
                                 int *ok, int32_t *xv, int32_t *zero, double *scale)
{
    qr_aff_view av;
    qr_aff_view_init(&av, b->q->g, n);
    for (int j = 0; j < n->n_in; j++) {
        zero[j] = (int32_t)xs->qp.zero;
        scale[j] = xs->qp.scale;
        if (j == 0)
            continue;
        const qr_value *c = n->in[j];
        if (!c || !c->is_const || qr_tensor_numel(&c->t) != 1 || !qr_dtype_is_float(c->t.dtype))
            return QR_OK;
        xv[j] = (int32_t)qr_plan_round_const(b->q, (float)qr_get_f64(c->t.data, c->t.dtype, 0), (float)xs->qp.scale,
                                             xs->qp.zero, INT32_MIN, INT32_MAX);
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    for (int64_t q = xs->qt.qmin; q <= xs->qt.qmax; q++) {
        xv[0] = (int32_t)q;
        out[q - xs->qt.qmin] = a->elem(&rt, &av.mt, xv, zero, scale);
    }
    if (qr_rt_status(&rt, b->e) != QR_OK || qr_match_status(&av.mt, b->e) != QR_OK) {
        qr_error_prefix(b->e, "affine rule for %s (%s)", a->op, a->loc);
        return QR_ERR;
    }
    *ok = 1;
    return QR_OK;
}

/* Original node `node`; in d it writes y_f32, the QuantizeLinear's input. */
/* AveragePool counting its padding: the padding is real 0, the integer zero
 * point, so the integer graph pads with it explicitly (a Pad node) and the
 * pool, left with no padding, divides by the whole window as ONNX says. */
static qr_status pad_pool_with_zero(builder *b, qr_node *n, qr_dtype t, int64_t zero, int *ok)
{
    qr_attr *pa = (qr_attr *)qr_node_attr(n, "pads"); /* n's attributes are this graph's copy */
    const qr_attr *ap = qr_node_attr(n, "auto_pad");
    *ok = 1;
    if (!qr_attr_i(n, "count_include_pad", 0) || !pa || pa->n < 2 || pa->n % 2)
        return QR_OK;
    int any = 0;
    for (int i = 0; i < pa->n; i++)
        any |= pa->ints[i] != 0;
    if (!any)
        return QR_OK;
    if (ap && ap->s && strcmp(ap->s, "NOTSET")) { /* pads the shapes decide: not rewritten */
        *ok = 0;
        return QR_OK;
    }
    int r = pa->n / 2, np = 2 * (r + 2);
    int64_t p[2 * (QR_MAX_DIMS + 2)] = {0};
    if (r > QR_MAX_DIMS) {
        *ok = 0;
        return QR_OK;
    }
    for (int i = 0; i < r; i++) { /* ONNX Pad: every axis' begins, then every axis' ends */
        p[2 + i] = pa->ints[i];
        p[r + 2 + 2 + i] = pa->ints[r + i];
    }
    char name[512];
    qr_tensor pt = {.dtype = QR_I64, .ndim = 1, .dims = {np}, .data = p};
    snprintf(name, sizeof name, "%s_pads", n->name);
    qr_value *pv = qr_plan_const(b->d, name, &pt);
    snprintf(name, sizeof name, "%s_pad_zero_point", n->name);
    qr_value *zv = scalar_const(b, name, t, zero);
    snprintf(name, sizeof name, "%s_padded", n->name);
    qr_value *padded = qr_graph_new_value(b->d, name);
    if (!pv || !zv || !padded)
        return qr_errorf(b->e, "out of memory");
    snprintf(name, sizeof name, "%s_pad", n->name);
    qr_node *pn = add_node(b, "Pad", name, 3, padded);
    if (!pn)
        return qr_errorf(b->e, "out of memory");
    pn->in[0] = n->in[0];
    pn->in[1] = pv;
    pn->in[2] = zv;
    n->in[0] = padded;
    for (int i = 0; i < pa->n; i++)
        pa->ints[i] = 0;
    return QR_OK;
}

static qr_status lower_affine_with(builder *b, int node, qr_value **xi, const qr_slot **xsl, qr_value **yo);

/* xi, xsl: per input of the node; yo: per output; as many as it has (a Concat of hundreds). */
static qr_status lower_affine(builder *b, int node)
{
    const qr_qctx *q = b->q;
    const qr_node *on = q->g->nodes[node];
    const qr_node *n = b->d->nodes[q->qnode[node]];
    size_t nin = (size_t)(on->n_in > n->n_in ? on->n_in : n->n_in) + 1;
    size_t nout = (size_t)(on->n_out > n->n_out ? on->n_out : n->n_out) + 1;
    qr_value **xi = calloc(nin, sizeof *xi), **yo = calloc(nout, sizeof *yo);
    const qr_slot **xsl = calloc(nin, sizeof *xsl);
    qr_status st = xi && yo && xsl ? lower_affine_with(b, node, xi, xsl, yo) : qr_errorf(b->e, "out of memory");
    free(xi);
    free(yo);
    free(xsl);
    return st;
}

/* An affine rule with a table (fixed / requantize, or a body the rule's code fills): the node's
 * one data input through a lookup table from its integers to y's. */
static qr_status lower_affine_table(builder *b, int node, qr_value **xi, const qr_slot **xsl, int ndata, int first)
{
    const qr_qctx *q = b->q;
    const qr_node *on = q->g->nodes[node];
    qr_node *n = b->d->nodes[q->qnode[node]];
    const qr_affine *a = q->aff_of[node];
    int yid = on->out[0]->id;
    const qr_slot *ys = slot_for(q, yid);
    qr_value *yi = int_of(b, yid);
    qr_dtype t = ys->dtype; /* its inputs' too (the plan's rule) */
    char name[512];
    if (ndata != 1 || first != 0) {
        island(b, yid);
        return QR_OK;
    }
    qr_value *tab = NULL;
    snprintf(name, sizeof name, "%s_table", yi->name);
    if (a->elem) {
        int32_t *ints = malloc(sizeof *ints * (size_t)(xsl[0]->qt.qmax - xsl[0]->qt.qmin + 1));
        qrl_qtype full = qr_qtype_of(t, 0, -1);
        int32_t *padded = calloc((size_t)(full.qmax - full.qmin + 1), sizeof *padded);
        int ok = 0;
        qr_status st = ints && padded ? body_table(b, a, on, xsl[0], ints, &ok) : qr_errorf(b->e, "out of memory");
        if (st == QR_OK && ok) {
            /* narrow types leave the entries below qmin: they map like qmin */
            for (int64_t v = full.qmin; v <= full.qmax; v++) {
                int64_t c = v < xsl[0]->qt.qmin ? xsl[0]->qt.qmin : v > xsl[0]->qt.qmax ? xsl[0]->qt.qmax : v;
                padded[v - full.qmin] = ints[c - xsl[0]->qt.qmin];
            }
            tab = table_const(b, name, t, xsl[0], ys, NULL, NULL, padded);
        }
        free(ints);
        free(padded);
        if (st != QR_OK)
            return QR_ERR;
        if (!ok) {
            island(b, yid);
            return QR_OK;
        }
    } else {
        qr_aff_view av;
        qr_aff_view_init(&av, q->g, on);
        table_user tu = {.a = a, .mt = &av.mt};
        qr_rt_init(&tu.rt);
        tab = table_const(b, name, t, xsl[0], ys, rule_table, &tu, NULL);
        if (tab && (qr_rt_status(&tu.rt, b->e) != QR_OK || qr_match_status(&av.mt, b->e) != QR_OK)) {
            qr_error_prefix(b->e, "affine rule for %s (%s)", a->op, a->loc);
            return QR_ERR;
        }
    }
    if (!tab)
        return QR_ERR;
    n->dead = 1;
    drop_quantize(yi);
    add_lookup(b, xi[0], tab, yi);
    b->ig->lookups++;
    runs_as(b, yid, "%s as a lookup table", n->op);
    return QR_OK;
}

/* The op on the integers: its inputs on the output's qparams; a float constant operand of the
 * output's rank (Concat's padding channels) is data too: its integers on those qparams. */
static qr_status inputs_on_output_qparams(builder *b, const qr_node *on, qr_node *n, qr_value **xi,
                                          const qr_slot **xsl, const qr_slot *ys, qr_value *yi)
{
    qr_dtype t = ys->dtype;
    char name[512];
    for (int j = 0; j < on->n_in; j++) {
        const qr_value *c = on->in[j];
        if (xi[j]) {
            qr_value *r = requantized(b, xi[j], xsl[j], ys, yi->q);
            if (!r)
                return QR_ERR;
            n->in[j] = r;
        } else if (c && c->is_const && c->t.dtype == QR_F32 && c->t.ndim == on->out[0]->t.ndim && c->t.ndim > 0) {
            qr_tensor ints = {.dtype = t, .ndim = c->t.ndim};
            memcpy(ints.dims, c->t.dims, sizeof ints.dims);
            if (qr_tensor_alloc(&ints, b->e) != QR_OK)
                return QR_ERR;
            for (int64_t k = 0; k < qr_tensor_numel(&c->t); k++)
                qr_set_i64(ints.data, t, k, qr_plan_round_const(b->q, ((const float *)c->t.data)[k], (float)ys->qp.scale,
                                                                ys->qp.zero, ys->qt.qmin, ys->qt.qmax));
            snprintf(name, sizeof name, "%s_quantized_for_%s", c->name, yi->name);
            n->in[j] = qr_plan_const(b->d, name, &ints);
            qr_tensor_free(&ints);
        }
    }
    return QR_OK;
}

/* Pad's constant padding is real c: the integer round(c / s) + z, in the attribute (before opset
 * 11) or as input 2. *ok 0 when the value is not one constant (the group stays f32). */
static qr_status pad_value_on_integers(builder *b, const qr_node *on, qr_node *n, const qr_slot *ys, qr_value *yi,
                                       int *ok)
{
    qr_dtype t = ys->dtype;
    char name[512];
    *ok = 1;
    int old = b->d->opset < 11; /* the value is an attribute, else the optional input 2 */
    double c = old ? qr_attr_f(on, "value", 0.0f) : 0;
    const qr_value *cv = old ? NULL : qr_node_input(on, 2);
    if (cv && (!cv->is_const || qr_tensor_numel(&cv->t) != 1)) {
        *ok = 0;
        return QR_OK;
    }
    if (cv)
        c = qr_get_f64(cv->t.data, cv->t.dtype, 0);
    int64_t iv = qr_plan_round_const(b->q, (float)c, (float)ys->qp.scale, ys->qp.zero, ys->qt.qmin, ys->qt.qmax);
    if (old) {
        const qr_attr *va = qr_node_attr(n, "value");
        if (va)
            ((qr_attr *)va)->f = (float)iv; /* n's attributes are this graph's copy */
        else
            qr_node_add_attr_f(b->d, n, "value", (float)iv);
    } else {
        if (n->n_in < 3) {
            qr_value **in = qr_arena_alloc(&b->d->arena, sizeof *in * 3);
            if (!in)
                return qr_errorf(b->e, "out of memory");
            memcpy(in, n->in, sizeof *in * (size_t)n->n_in);
            for (int j = n->n_in; j < 3; j++)
                in[j] = NULL;
            n->in = in;
            n->n_in = 3;
        }
        snprintf(name, sizeof name, "%s_pad_value", yi->name);
        n->in[2] = scalar_const(b, name, t, iv);
    }
    return QR_OK;
}

static qr_status lower_affine_with(builder *b, int node, qr_value **xi, const qr_slot **xsl, qr_value **yo)
{
    const qr_qctx *q = b->q;
    const qr_node *on = q->g->nodes[node];
    qr_node *n = b->d->nodes[q->qnode[node]];
    const qr_affine *a = q->aff_of[node];
    int yid = on->out[0]->id;
    const qr_slot *ys = slot_for(q, yid);
    qr_value *yi = int_of(b, yid);
    if (!a || !ys || !yi)
        return QR_OK;
    /* the data inputs' integers (the originals' ids: n reads their DequantizeLinear outputs);
     * integer inputs (shapes, indices) are read as computed, constant or not */
    int ndata = 0, first = -1;
    for (int j = 0; j < on->n_in; j++) {
        const qr_value *v = on->in[j];
        if (!v || v->is_const || (v->t.dtype != QR_UNDEF && !qr_dtype_is_float(v->t.dtype)))
            continue;
        if (!(xsl[j] = slot_for(q, v->id)) || !(xi[j] = int_of(b, v->id))) {
            island(b, yid);
            return QR_OK;
        }
        if (first < 0)
            first = j;
        ndata++;
    }
    if (first < 0)
        return QR_OK;
    if (a->table || a->elem) /* one data input, through a table */
        return lower_affine_table(b, node, xi, xsl, ndata, first);
    yo[0] = yi; /* every output's integers (Split: all on the first one's qparams) */
    int multi_ok = n->n_out == 1 || a->kind == QR_AFF_SAME;
    for (int j = 1; multi_ok && j < n->n_out; j++) {
        const qr_slot *sj = on->out[j] ? slot_for(q, on->out[j]->id) : NULL;
        multi_ok = sj && (yo[j] = int_of(b, on->out[j]->id)) && sj->qp.scale == ys->qp.scale &&
                   sj->qp.zero == ys->qp.zero;
    }
    if (a->kind == QR_AFF_FIXED || !multi_ok) { /* fixed without a table: nothing says what the integers become */
        island(b, yid);
        return QR_OK;
    }
    if (a->in_f32) { /* the rule says: real values between Q/DQ borders */
        island(b, yid);
        return QR_OK;
    }
    /* the op on the integers, inputs on the output's qparams */
    if (inputs_on_output_qparams(b, on, n, xi, xsl, ys, yi) != QR_OK)
        return QR_ERR;
    if (!strcmp(n->op, "Pad")) {
        int ok;
        if (pad_value_on_integers(b, on, n, ys, yi, &ok) != QR_OK)
            return QR_ERR;
        if (!ok) {
            island(b, yid);
            return QR_OK;
        }
    }
    /* ONNX semantics, not policy: affine.qrl decides whether such a pool runs on the integers;
     * this is how counted padding (real 0) reads on them, as Pad's value above */
    if (!strcmp(n->op, "AveragePool")) {
        int ok;
        if (pad_pool_with_zero(b, n, ys->dtype, ys->qp.zero, &ok) != QR_OK)
            return QR_ERR;
        if (!ok) {
            island(b, yid);
            return QR_OK;
        }
    }
    for (int j = 0; j < n->n_out; j++) {
        drop_quantize(yo[j]);
        n->out[j]->producer = NULL;
        n->out[j] = yo[j];
        yo[j]->producer = n;
    }
    b->ig->int_ops++;
    for (int j = 0; j < on->n_out; j++) /* each output (Split's) */
        if (on->out[j])
            runs_as(b, on->out[j]->id, "%s on the integers", n->op);
    return QR_OK;
}

/* ---------------------------------------------------------------- main */

static void call_free(qr_intcall *c)
{
    free(c->joined);
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].kind == ARG_ARRAY)
            free(c->args[i].arr.data);
    free(c->args);
}

void qr_intgraph_free(qr_intgraph *ig)
{
    if (!ig)
        return;
    for (int i = 0; i < ig->ncalls; i++)
        call_free(&ig->calls[i]);
    free(ig->calls);
    free(ig->runs);
    free(ig->accs);
    qr_graph_free(ig->g);
    free(ig);
}

/* ------------------------------------------------ fused epilogues */

/* Whether the call's tile kernel takes rows of conv's output as its channels: its axis is 1 (N, M,
 * spatial...), as the call passes it or the kernel fixes it. */
static int rows_are_channels(const qr_intcall *c, const qr_fn_desc *tile, const qr_node *conv)
{
    int64_t axis = tile->tile_axis;
    int p = tile->tile_axis_param;
    if (p >= 0) {
        if (p >= c->nargs || c->args[p].kind != ARG_SCALAR || !qr_dtype_is_int(c->k->params[p].elem))
            return 0;
        axis = qr_get_i64(c->args[p].bytes, c->k->params[p].elem, 0);
    }
    int rank = conv->n_in > 1 && conv->in[1] ? conv->in[1]->t.ndim : -1; /* the weights': the output's */
    if (axis < 0 && rank > 0)
        axis += rank;
    return rank >= 3 && axis == 1;
}

static void copy_attrs(qr_graph *d, qr_node *to, const qr_node *from)
{
    for (int i = 0; i < from->n_attr; i++) {
        const qr_attr *a = &from->attr[i];
        if (a->kind == QR_ATTR_INT)
            qr_node_add_attr_i(d, to, a->name, a->i);
        else if (a->kind == QR_ATTR_INTS)
            qr_node_add_attr_ints(d, to, a->name, a->n, a->ints);
        else if (a->kind == QR_ATTR_STRING)
            qr_node_add_attr_s(d, to, a->name, a->s);
    }
}

/* conv and the QrlKernel n it feeds as one QrlConvKernel node. */
static void fuse(builder *b, qr_node *conv, qr_node *n, qr_intcall *c, const qr_fn_desc *tile)
{
    int nconv = conv->n_in;
    qr_node *f = add_node(b, "QrlConvKernel", n->name, nconv + n->n_in - 1, n->out[0]);
    if (!f)
        return; /* out of memory: the graph is marked, qr_intgraph_build reports it */
    for (int j = 0; j < nconv; j++)
        f->in[j] = conv->in[j];
    for (int j = 1; j < n->n_in; j++)
        f->in[nconv + j - 1] = n->in[j];
    copy_attrs(b->d, f, conv);
    qr_node_add_attr_i(b->d, f, "call", qr_attr_i(n, "call", -1));
    qr_node_add_attr_i(b->d, f, "to", qr_attr_i(n, "to", QR_UNDEF));
    qr_node_add_attr_i(b->d, f, "conv_inputs", nconv);
    for (int i = 0; i < c->nargs; i++)
        if (c->args[i].kind == ARG_TENSOR && c->args[i].input == 0)
            c->args[i].input = -1; /* the accumulator: the blocks the convolution hands over */
    c->tile = tile;
    c->nhwc = qr_module_nhwc(b->q->m, c->k, &c->tables);
    n->dead = conv->dead = 1;
}

/* For a fusion pass: how many live nodes read each value (*uses, the caller frees it), or *uses
 * NULL when fuse=0 keeps every node apart (QR_OK) or memory ran out (QR_ERR, reported). */
static qr_status fusion_uses(builder *b, int **uses)
{
    *uses = NULL;
    if (qr_options_get()->no_fuse)
        return QR_OK;
    qr_graph *d = b->d;
    if (!(*uses = calloc((size_t)d->n_values + 1, sizeof **uses)))
        return qr_errorf(b->e, "out of memory");
    for (int i = 0; i < d->n_nodes; i++)
        for (int j = 0; !d->nodes[i]->dead && j < d->nodes[i]->n_in; j++)
            if (d->nodes[i]->in[j])
                (*uses)[d->nodes[i]->in[j]->id]++;
    return QR_OK;
}

/* The producer (an `op` of the default domain) of node n's accumulator when n is an element-wise
 * epilogue kernel (stdlib's qlinear: QrlKernel with acc) that alone reads it, with n's call in *ci;
 * NULL otherwise. */
static qr_node *acc_producer(builder *b, const int *uses, qr_node *n, const char *op, int64_t *ci)
{
    if (n->dead || strcmp(n->op, "QrlKernel") || !qr_attr_i(n, "acc", 0) || n->n_in < 1 || !n->in[0])
        return NULL;
    qr_value *acc = n->in[0];
    qr_node *p = acc->producer;
    *ci = qr_attr_i(n, "call", -1);
    if (!p || p->dead || p->domain[0] || strcmp(p->op, op) || acc->is_output || uses[acc->id] != 1 || *ci < 0 ||
        *ci >= b->ig->ncalls)
        return NULL;
    return p;
}

/* A ConvInteger feeding only an element-wise epilogue kernel (stdlib's qlinear) whose rows are its
 * output channels runs fused with it: the recipe's tile kernel gets the int32 accumulator in blocks
 * while they are in cache, and no int32 tensor is made. fuse=0 keeps them apart (the reference
 * the fused path is tested against). */
static qr_status fuse_epilogues(builder *b)
{
    qr_graph *d = b->d;
    int *uses;
    qr_status st = fusion_uses(b, &uses);
    if (!uses)
        return st;
    int n0 = d->n_nodes;
    for (int i = 0; i < n0; i++) {
        qr_node *n = d->nodes[i];
        int64_t ci;
        qr_node *conv = acc_producer(b, uses, n, "ConvInteger", &ci);
        if (!conv)
            continue;
        qr_intcall *c = &b->ig->calls[ci];
        if (c->k->nparams < 1 || c->k->params[0].elem != QR_I32)
            continue; /* an int64 accumulator (16-bit activations) is made whole, never in int32 blocks */
        const qr_fn_desc *tile = qr_module_tile(b->q->m, c->k);
        if (tile && rows_are_channels(c, tile, conv))
            fuse(b, conv, n, c, tile);
    }
    free(uses);
    return QR_OK;
}

/* A MatMulInteger feeding only an element-wise epilogue kernel whose channels are the product's last
 * axis (the stdlib's qlinear on MatMul and Gemm, a dynamic recipe's qlinear_dynamic) runs fused
 * with it (QrlMatMulKernel): the kernel's channels-last form gets the int32 sums in blocks of rows
 * while they are in cache. After the layout pass (whose Flatten fold rewrites MatMulInteger's
 * weights); fuse=0 and epilogue=whole keep them apart (the references the fused path is tested
 * against). */
static qr_status fuse_matmul_epilogues(builder *b)
{
    qr_graph *d = b->d;
    int *uses;
    if (qr_options_get()->epilogue == QR_EPILOGUE_WHOLE)
        return QR_OK;
    qr_status st = fusion_uses(b, &uses);
    if (!uses)
        return st;
    int n0 = d->n_nodes;
    for (int i = 0; i < n0; i++) {
        qr_node *n = d->nodes[i];
        int64_t ci;
        qr_node *mm = acc_producer(b, uses, n, "MatMulInteger", &ci);
        if (!mm || mm->n_in < 2)
            continue;
        qr_value *acc = n->in[0];
        qr_intcall *c = &b->ig->calls[ci];
        int rank = acc->t.ndim > 0 ? acc->t.ndim : -1;
        if (c->k->nparams < 1 || c->k->params[0].elem != QR_I32 || !c->tile || !c->nhwc || c->tables > QI_MAX_TABLES)
            continue;
        int64_t axis = tile_axis_of(c, c->tile, rank);
        if (!(axis == -1 || (rank > 0 && axis == rank - 1)))
            continue; /* (a negative axis past -1 with the rank not known: left apart) */
        int nmm = mm->n_in;
        qr_node *f = add_node(b, "QrlMatMulKernel", n->name, nmm + n->n_in - 1, n->out[0]);
        if (!f)
            break; /* out of memory: the graph is marked, qr_intgraph_build reports it */
        for (int j = 0; j < nmm; j++)
            f->in[j] = mm->in[j];
        for (int j = 1; j < n->n_in; j++)
            f->in[nmm + j - 1] = n->in[j];
        qr_node_add_attr_i(b->d, f, "call", ci);
        qr_node_add_attr_i(b->d, f, "to", qr_attr_i(n, "to", QR_UNDEF));
        qr_node_add_attr_i(b->d, f, "mm_inputs", nmm);
        for (int a = 0; a < c->nargs; a++)
            if (c->args[a].kind == ARG_TENSOR && c->args[a].input == 0)
                c->args[a].input = -1; /* the accumulator: the blocks the product hands over */
        n->dead = mm->dead = 1;
    }
    free(uses);
    return QR_OK;
}

/* Shape (and Size) of a DequantizeLinear's output reads its integer input instead, which has the
 * same shape: a border kept only for the shape arithmetic of an export (BERT's heads: Shape of the
 * projection, of q, k, v) is then dropped, and no tensor is dequantized to be measured. */
static void shapes_from_integers(qr_graph *g)
{
    if (qr_graph_oom(g)) /* a node may lack its names: the caller reports the graph's failure */
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || n->domain[0] || (strcmp(n->op, "Shape") && strcmp(n->op, "Size")) || n->n_in < 1 || !n->in[0])
            continue;
        const qr_node *dq = n->in[0]->producer;
        if (dq && !dq->dead && !dq->domain[0] && !strcmp(dq->op, "DequantizeLinear") && dq->n_in >= 1 && dq->in[0])
            n->in[0] = dq->in[0];
    }
}

/* Drops what no node reads (DequantizeLinear borders no f32 node needs), sorts, infers types and
 * shapes (for dumps and for the layout pass). */
static qr_status tidy(qr_graph *g, qr_error *e)
{
    qr_graph_drop_unused(g);
    qr_graph_compact(g);
    if (qr_graph_toposort(g, e) != QR_OK) {
        qr_error_prefix(e, "building the integer graph");
        return QR_ERR;
    }
    qr_pass_infer_symbolic(g);
    return QR_OK;
}

/* Whether QrlKernel node n's kernel is pointwise (the compiler's proof). */
static int kernel_pointwise(const qr_node *n, void *user)
{
    const qr_intgraph *ig = user;
    int64_t ci = qr_attr_i(n, "call", -1);
    return ci >= 0 && ci < ig->ncalls && ig->calls[ci].k->is_pointwise;
}

/* Stage call c (reading the convolution conv's y as input j) joined to conv's epilogue (vecjoin.h)
 * when both have vector forms, the stage's other tensor is one 8-bit input, its output 8-bit and
 * every parameter it reads a scalar of the type its program says: c->joined, else nothing. Out
 * of memory is an error. */
static qr_status join_stage(builder *b, const qr_node *conv, qr_intcall *c, int j)
{
    int64_t cci = qr_attr_i(conv, "call", -1);
    const qr_intcall *cc = cci >= 0 && cci < b->ig->ncalls ? &b->ig->calls[cci] : NULL;
    if (!cc || !cc->nhwc || !cc->nhwc->vector_epilogue || cc->tables > QI_MAX_TABLES || !c->k->vector_epilogue)
        return QR_OK;
    int y_arg = -1, skip = -1, out = -1;
    for (int a = 0; a < c->nargs; a++) {
        const qi_arg *x = &c->args[a];
        if (x->kind == ARG_TENSOR && x->input == j)
            y_arg = a;
        else if (x->kind == ARG_TENSOR) {
            if (skip >= 0 || (x->want != QR_U8 && x->want != QR_I8))
                return QR_OK;
            skip = a;
        } else if (x->kind == ARG_OUTPUT)
            out = a;
    }
    if (y_arg < 0 || skip < 0 || out < 0 || (c->args[out].want != QR_U8 && c->args[out].want != QR_I8))
        return QR_OK;
    char buf[4096];
    qi_join_param ps[QI_JOIN_MAX_PARAMS];
    int np;
    if (!qi_vec_join(cc->nhwc->vector_epilogue, c->k->vector_epilogue, y_arg, skip, cc->tables, buf, sizeof buf, ps, &np))
        return QR_OK;
    for (int i = 0; i < np; i++) {
        int p = ps[i].param;
        qr_dtype want = ps[i].kind == 'i' ? QR_I32 : ps[i].kind == 'f' ? QR_F32 : QR_F64;
        if (p >= c->nargs || p >= c->k->nparams || c->args[p].kind != ARG_SCALAR || c->k->params[p].elem != want)
            return QR_OK;
    }
    if (!(c->joined = strdup(buf)))
        return qr_errorf(b->e, "out of memory");
    memcpy(c->jparams, ps, sizeof ps);
    c->njparams = np;
    c->jskip = skip;
    return QR_OK;
}

/* An NHWC convolution whose only reader is a pointwise kernel (a residual Add: the stdlib's qadd,
 * or a recipe's own that the compiler proved pointwise) runs it as a second stage on each block of
 * its y while the block is in cache (conv_epilogue.h): one node, no y tensor between them.
 * fuse=0 keeps them apart, as every fusion. */
static qr_status fuse_stages(builder *b)
{
    qr_graph *d = b->d;
    int *uses;
    qr_status st = fusion_uses(b, &uses);
    if (!uses)
        return st;
    int n0 = d->n_nodes;
    for (int i = 0; i < n0; i++) {
        qr_node *n = d->nodes[i];
        int64_t ci = qr_attr_i(n, "call", -1);
        if (n->dead || strcmp(n->op, "QrlKernel") || qr_attr_i(n, "acc", 0) || !kernel_pointwise(n, b->ig))
            continue;
        for (int j = 0; j < n->n_in; j++) {
            qr_value *v = n->in[j];
            qr_node *conv = v ? v->producer : NULL;
            if (!conv || conv->dead || strcmp(conv->op, "QrlConvKernel") || !qr_attr_i(conv, "nhwc", 0) ||
                qr_attr_i(conv, "then_call", -1) >= 0 || v->is_output || uses[v->id] != 1 ||
                qr_attr_i(conv, "to", QR_UNDEF) != qr_attr_i(n, "to", QR_UNDEF))
                continue;
            qr_intcall *c = &b->ig->calls[ci];
            int refs = 0; /* the call reads y once, as a tensor */
            for (int a = 0; a < c->nargs; a++)
                refs += c->args[a].kind == ARG_TENSOR && c->args[a].input == j;
            if (refs != 1)
                continue;
            qr_node *f = add_node(b, "QrlConvKernel", n->name, conv->n_in + n->n_in, n->out[0]);
            if (!f)
                break; /* out of memory: the graph is marked, qr_intgraph_build reports it */
            for (int k = 0; k < conv->n_in; k++)
                f->in[k] = conv->in[k];
            for (int k = 0; k < n->n_in; k++)
                f->in[conv->n_in + k] = k == j ? NULL : n->in[k];
            copy_attrs(d, f, conv);
            qr_node_add_attr_i(d, f, "then_call", ci);
            qr_node_add_attr_i(d, f, "then_first", conv->n_in);
            if (join_stage(b, conv, c, j) != QR_OK)
                break;
            for (int a = 0; a < c->nargs; a++)
                if (c->args[a].kind == ARG_TENSOR && c->args[a].input == j)
                    c->args[a].input = -1;
            n->dead = conv->dead = 1;
            break;
        }
    }
    free(uses);
    return QR_OK;
}

/* A packed 4-bit constant (i4, u4) as its container type (i8, u8), in place in g. */
static qr_status unpack_const(qr_graph *g, qr_value *v, qr_error *e)
{
    if (!v || !v->is_const || !qr_dtype_is_packed(v->t.dtype))
        return QR_OK;
    qr_tensor t = v->t;
    t.dtype = qr_dtype_container(v->t.dtype);
    t.data = NULL;
    if (qr_tensor_alloc(&t, e) != QR_OK)
        return QR_ERR;
    for (int64_t i = 0, n = qr_tensor_numel(&t); i < n; i++)
        qr_set_i64(t.data, t.dtype, i, qr_get_i64(v->t.data, v->t.dtype, i));
    qr_status st = qr_value_try_set_const(g, v, &t, e);
    qr_tensor_free(&t);
    return st;
}

/* 4-bit weights (W4A8) run on the 8-bit kernels: their integers, and the zero points of the
 * DequantizeLinear that reads them, are unpacked to i8 (u8) here, once, when the integer graph is
 * built; ConvInteger and MatMulInteger then pack them for their microkernels as any i8 weight. The
 * QDQ graph and the export keep them packed. */
static qr_status unpack_4bit_weights(const qr_qctx *q, qr_graph *g, qr_error *e)
{
    for (int i = 0; i < q->nw; i++) {
        int id = q->qval[q->w[i].value];
        qr_value *v = id >= 0 && id < g->n_values ? g->values[id] : NULL;
        if (!v || !qr_dtype_is_packed(v->t.dtype))
            continue;
        for (int k = 0; k < g->n_nodes; k++) {
            qr_node *n = g->nodes[k];
            if (!strcmp(n->op, "DequantizeLinear") && n->n_in > 2 && n->in[0] == v && unpack_const(g, n->in[2], e) != QR_OK)
                return QR_ERR;
        }
        if (unpack_const(g, v, e) != QR_OK)
            return QR_ERR;
    }
    return QR_OK;
}

qr_status qr_intgraph_build(const qr_qctx *q, const qr_graph *qdq, qr_intgraph **out, qr_error *e)
{
    qr_intgraph *ig = calloc(1, sizeof *ig);
    if (!ig || !(ig->g = qr_graph_clone_shared(qdq))) {
        free(ig);
        return qr_errorf(e, "out of memory");
    }
    qr_pass_annotate_qdq(ig->g); /* each integer value's qparams, from its QuantizeLinear/DequantizeLinear */
    if (unpack_4bit_weights(q, ig->g, e) != QR_OK) {
        qr_intgraph_free(ig);
        return QR_ERR;
    }
    builder b = {q, ig, ig->g, e, calloc((size_t)q->g->n_values + 1, sizeof(dyn_ints))};
    if (!(ig->runs = calloc((size_t)q->g->n_values + 1, sizeof *ig->runs)) || !b.dyn) {
        free(b.dyn);
        qr_intgraph_free(ig);
        return qr_errorf(e, "out of memory");
    }
    qr_status st = QR_OK;
    for (int i = 0; st == QR_OK && i < q->nmatches; i++)
        st = lower_match(&b, &q->matches[i]);
    for (int i = 0; st == QR_OK && i < q->g->n_nodes; i++)
        if (q->node_kind[i] == 2 && !ig->g->nodes[q->qnode[i]]->dead)
            st = lower_affine(&b, i);
    if (st == QR_OK)
        st = fuse_epilogues(&b);
    if (st == QR_OK)
        shapes_from_integers(ig->g);
    if (st == QR_OK)
        st = qr_graph_check_oom(ig->g, e); /* a node, value or attribute the lowering added did not fit */
    if (st == QR_OK)
        st = tidy(ig->g, e);
    if (st == QR_OK && (st = qr_layout_nhwc(ig->g, kernel_pointwise, ig, e)) == QR_OK &&
        (st = fuse_stages(&b)) == QR_OK && (st = fuse_matmul_epilogues(&b)) == QR_OK &&
        (st = qr_graph_check_oom(ig->g, e)) == QR_OK)
        st = tidy(ig->g, e);
    free(b.dyn);
    if (st != QR_OK) {
        qr_intgraph_free(ig);
        return QR_ERR;
    }
    *out = ig;
    return QR_OK;
}
