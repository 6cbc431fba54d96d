/* Backward passes through an f32 graph (quantizer/vjp.h). Each op's backward is the transpose of
 * its forward's Jacobian at the forward's values: a convolution's is the transposed convolution
 * (the weights' product through sgemm, then each column added back to its window, col2im), a
 * matrix product's the product with the other operand transposed, a mask's (Relu, Clip, MaxPool)
 * the forward's 0/1 mask or argmax, a reshape's the reshape back. Sums are in double where a
 * loop adds many terms, so the adjoint does not depend on the order the runtime's kernels use. */
#include "vjp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "op.h"
#include "ops/resize.h"
#include "ops/sgemm.h"

static const float *fdata(const qr_tensor *t) { return t && t->data && t->dtype == QR_F32 ? t->data : NULL; }

static int is(const qr_node *n, const char *op) { return !strcmp(n->op, op); }

/* An f32 value whose shape is known; its data may be absent where no backward reads it
 * (qr_vjp_reads): the caller keeps only what the backward needs. */
static int isf32(const qr_tensor *t) { return t && t->dtype == QR_F32; }

/* f32, or of a type import could not tell (a value after a ConvTranspose in a dynamic model): what
 * the run will show, so the marking assumes it may carry an adjoint */
static int maybe_f32(const qr_value *v) { return v->t.dtype == QR_F32 || v->t.dtype == QR_UNDEF; }

/* The ops whose inputs' adjoints flow (input 0 unless the op says otherwise). */
int qr_vjp_input_supported(const qr_node *n, int j)
{
    static const char *const unary[] = {"Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Sqrt",
                                        "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                        "GlobalAveragePool", "AveragePool", "MaxPool", "Softmax", "ReduceMean",
                                        "Slice", "Pad", "BatchNormalization", "Split", "Tanh", "Neg", NULL};
    static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Max", "Pow", NULL};
    if (!n->def && !n->op)
        return 0;
    if (n->domain && n->domain[0])
        return 0;
    if (j < 0 || j >= n->n_in || !n->in[j] || !maybe_f32(n->in[j]))
        return 0;
    for (int i = 0; unary[i]; i++)
        if (is(n, unary[i]))
            return j == 0;
    for (int i = 0; binary[i]; i++)
        if (is(n, binary[i]))
            return j < 2;
    if (is(n, "Conv") || is(n, "ConvTranspose"))
        return j == 0 && n->in[1] && n->in[1]->t.ndim == 4; /* 2-D convolutions */
    if (is(n, "Resize") || is(n, "Upsample"))
        return j == 0;
    if (is(n, "Gemm") || is(n, "MatMul"))
        return j < 2;
    if (is(n, "Concat"))
        return 1;
    return 0;
}

/* Whether input j of n gets an adjoint in a backward pass (as qr_vjp_backward gives one). */
static int flows(const qr_node *n, int j)
{
    return j < n->n_in && n->in[j] && !n->in[j]->is_const && qr_vjp_input_supported(n, j);
}

int qr_vjp_reads(const qr_node *n, int j)
{
    static const char *const by_x[] = {"Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "MaxPool",
                                       "Max", "Pow", NULL};
    static const char *const by_y[] = {"Sigmoid", "Tanh", "Sqrt", "Softmax", "Pow", NULL};
    if (!n->op)
        return 1;
    /* a product reads each operand for the other's adjoint alone (Div's divisor for both): x * c,
     * x / c and x W with a constant c or W keep nothing of x */
    if (j <= 1 && j >= 0 && (is(n, "Mul") || is(n, "Gemm") || is(n, "MatMul")))
        return flows(n, 1 - j);
    if (j == 0 && is(n, "Div"))
        return flows(n, 1);
    if (j >= 1) /* weights, a second operand, scales, starts, pads: all but a sum's or a list's */
        return !is(n, "Add") && !is(n, "Sub") && !is(n, "Concat");
    for (int i = 0; j == 0 && by_x[i]; i++)
        if (is(n, by_x[i]))
            return 1;
    for (int i = 0; j == -1 && by_y[i]; i++)
        if (is(n, by_y[i]))
            return 1;
    return 0;
}

int qr_vjp_masks(const qr_node *n)
{
    if (!n->op || (n->domain && n->domain[0]) || n->n_in < 1 || n->n_out != 1)
        return 0;
    if (is(n, "Clip")) /* its bounds known before the run: constants, attributes or absent */
        return (n->n_in < 2 || !n->in[1] || n->in[1]->is_const) && (n->n_in < 3 || !n->in[2] || n->in[2]->is_const);
    return is(n, "Relu") || is(n, "LeakyRelu") || is(n, "HardSigmoid");
}

/* Clip's bounds (opset < 11: attributes; else its constant inputs, absent: unbounded). */
static void clip_bounds(const qr_node *n, const qr_tensor *const *in, double *lo, double *hi)
{
    *lo = -INFINITY, *hi = INFINITY;
    if (n->opset < 11)
        *lo = qr_attr_f(n, "min", -INFINITY), *hi = qr_attr_f(n, "max", INFINITY);
    if (n->n_in > 1 && fdata(in[1]))
        *lo = fdata(in[1])[0];
    if (n->n_in > 2 && fdata(in[2]))
        *hi = fdata(in[2])[0];
}

void qr_vjp_mask(const qr_node *n, const qr_tensor *const *in, unsigned char *restrict m)
{
    const float *restrict x = fdata(in[0]);
    int64_t cnt = qr_tensor_numel(in[0]);
    double lo = 0, hi = 0;
    float al = 0, be = 0;
    int k = is(n, "Clip") ? 1 : is(n, "HardSigmoid") ? 2 : 0;
    if (k == 1)
        clip_bounds(n, in, &lo, &hi);
    else if (k == 2)
        al = qr_attr_f(n, "alpha", 0.2f), be = qr_attr_f(n, "beta", 0.5f);
    for (int64_t b = 0; b < cnt; b += 8) { /* a bit an element, eight a byte */
        unsigned byte = 0;
        for (int64_t i = b; i < b + 8 && i < cnt; i++) {
            int pass;
            if (k == 1) /* torch.clamp's: the bounds themselves pass */
                pass = x[i] >= lo && x[i] <= hi;
            else if (k == 2) {
                float t = al * x[i] + be;
                pass = t > 0 && t < 1;
            } else
                pass = x[i] > 0;
            byte |= (unsigned)pass << (i - b);
        }
        m[b >> 3] = (unsigned char)byte;
    }
}

/* ------------------------------------------------------------ recomputation */

/* The f32 constant scalar of n's input j, or NULL. */
static const float *const_scalar(const qr_node *n, int j)
{
    const qr_value *u = j < n->n_in ? n->in[j] : NULL;
    return u && u->is_const && u->t.dtype == QR_F32 && u->t.data && qr_tensor_numel(&u->t) == 1 ? u->t.data : NULL;
}

int qr_vjp_recomputes(const qr_node *n)
{
    if (!n->op || (n->domain && n->domain[0]) || n->n_out != 1 || n->n_in < 1 || !n->in[0])
        return 0;
    if (is(n, "Sigmoid") || is(n, "HardSigmoid"))
        return n->n_in == 1;
    if (is(n, "Clip"))
        return qr_vjp_masks(n);
    if (is(n, "Add") || is(n, "Sub") || is(n, "Mul") || is(n, "Div")) /* by a constant scalar */
        return n->n_in == 2 && n->in[1] && !n->in[0]->is_const && const_scalar(n, 1);
    return 0;
}

/* n's output y again, by the runtime's own kernel for n (the bits of the run's value unless the run
 * fused n into another kernel: the callers compare where they drop a value on that account). */
static int recompute_node(const qr_node *n, const qr_tensor *const *in, qr_tensor *y)
{
    qr_error e = {{0}};
    qr_tensor *out[1] = {y};
    qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = 1, .in = in, .out = out, .err = &e};
    return n->def && qr_op_run(&k) == QR_OK ? 0 : -1;
}

int qr_vjp_recompute(const qr_value *v, const qr_tensor *val, qr_tensor *rc, int depth)
{
    if (rc[v->id].data)
        return 0;
    const qr_node *n = v->producer;
    if (!n || depth > 4 || !qr_vjp_recomputes(n) || n->out[0] != v)
        return -1;
    const qr_tensor *in[3] = {NULL, NULL, NULL};
    for (int j = 0; j < n->n_in && j < 3; j++) {
        const qr_value *u = n->in[j];
        if (!u)
            continue;
        in[j] = u->is_const ? &u->t : &val[u->id];
        if (j > 0 && in[j]->ndim > in[0]->ndim) /* y takes x's shape: a scalar of higher rank would widen it */
            return -1;
        if (!fdata(in[j])) {
            if (u->is_const || qr_vjp_recompute(u, val, rc, depth + 1) != 0)
                return -1;
            in[j] = &rc[u->id];
        }
    }
    qr_tensor y = *in[0];
    y.data = NULL;
    y.dtype = QR_F32;
    qr_error e;
    if (qr_tensor_alloc(&y, &e) != QR_OK)
        return -1;
    if (recompute_node(n, in, &y) != 0) {
        qr_tensor_free(&y);
        return -1;
    }
    rc[v->id] = y;
    return 0;
}

/* ------------------------------------------------------------ broadcasting */

/* off[i]: the element of in that output element i of shape out reads (numpy broadcasting). */
static void bcast_offsets(const qr_tensor *in, const qr_tensor *out, int64_t *off)
{
    int nd = out->ndim, sh = out->ndim - in->ndim;
    int64_t st[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0}, s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int j = i - sh;
        if (j < 0) {
            st[i] = 0;
            continue;
        }
        st[i] = in->dims[j] == 1 ? 0 : s;
        s *= in->dims[j];
    }
    int64_t n = qr_tensor_numel(out), o = 0;
    for (int64_t i = 0; i < n; i++) {
        off[i] = o;
        for (int d = nd - 1; d >= 0; d--) {
            o += st[d];
            if (++idx[d] < out->dims[d])
                break;
            o -= st[d] * idx[d];
            idx[d] = 0;
        }
    }
}

/* The elementwise binary ops: y = f(a, b) broadcast; ga, gb (NULL: not wanted) += dy * df/da, df/db. */
static qr_status binary_vjp(const qr_node *n, const qr_tensor *ta, const qr_tensor *tb, const qr_tensor *ty,
                            const qr_tensor *tg, qr_tensor *ga, qr_tensor *gb, qr_error *e)
{
    const float *a = fdata(ta), *b = fdata(tb), *y = fdata(ty), *g = fdata(tg);
    if (!isf32(ta) || !isf32(tb) || !isf32(ty))
        return qr_errorf(e, "backward of %s '%s': its inputs are not f32", n->op, n->name);
    int add = is(n, "Add") || is(n, "Sub"), mul = is(n, "Mul"), div = is(n, "Div");
    float *da = ga ? ga->data : NULL, *db = gb ? gb->data : NULL;
    /* a product reads each operand for the other's adjoint (Div its divisor for both) */
    int need_a = !add && (db || (!mul && !div)), need_b = !add && (da || !mul);
    if ((need_a && !a) || (need_b && !b) || (is(n, "Pow") && !y))
        return qr_errorf(e, "backward of %s '%s': its inputs' values were not kept", n->op, n->name);
    int64_t m = qr_tensor_numel(ty);
    if (!g)
        return QR_OK;
    if ((is(n, "Add") || is(n, "Sub") || is(n, "Mul")) && qr_tensor_same_shape(ta, ty) && qr_tensor_same_shape(tb, ty)) {
        /* the common case (a residual Add, a gate's Mul) without the broadcast's offsets */
        float sb = is(n, "Sub") ? -1.0f : 1.0f;
        for (int64_t i = 0; da && i < m; i++)
            da[i] += mul ? g[i] * b[i] : g[i];
        for (int64_t i = 0; db && i < m; i++)
            db[i] += mul ? g[i] * a[i] : sb * g[i];
        return QR_OK;
    }
    int64_t *oa = malloc(sizeof *oa * (size_t)(m + 1)), *ob = malloc(sizeof *ob * (size_t)(m + 1));
    if (!oa || !ob) {
        free(oa), free(ob);
        return qr_errorf(e, "out of memory");
    }
    bcast_offsets(ta, ty, oa);
    bcast_offsets(tb, ty, ob);
    int op = is(n, "Add") ? 0 : is(n, "Sub") ? 1 : is(n, "Mul") ? 2 : is(n, "Div") ? 3 : is(n, "Max") ? 4 : 5;
    for (int64_t i = 0; i < m; i++) {
        double gi = g[i], av = a && !add ? a[oa[i]] : 0, bv = b && !add ? b[ob[i]] : 0, ka, kb;
        switch (op) {
        case 0: ka = 1, kb = 1; break;
        case 1: ka = 1, kb = -1; break;
        case 2: ka = bv, kb = av; break;
        case 3: ka = 1 / bv, kb = -av / (bv * bv); break;
        case 4: ka = av >= bv, kb = av < bv; break; /* a tie goes to the first, as the forward keeps it */
        default: ka = bv * pow(av, bv - 1), kb = av > 0 ? (double)y[i] * log(av) : 0; break;
        }
        if (da)
            da[oa[i]] += (float)(gi * ka);
        if (db)
            db[ob[i]] += (float)(gi * kb);
    }
    free(oa), free(ob);
    return QR_OK;
}

/* ------------------------------------------------------------ convolution */

typedef struct geom2 {
    int64_t N, C, H, W, M, Ho, Wo, kh, kw, sh, sw, dh, dw, ph, pw, group;
} geom2;

/* The pads' begin of a 2-D window op over x (dims 2, 3) giving out's spatial dims. */
static int window_geom(const qr_node *n, const qr_tensor *x, const qr_tensor *y, int64_t kh, int64_t kw, geom2 *G)
{
    const int64_t *s = NULL, *d = NULL, *p = NULL;
    int ns = qr_attr_ints(n, "strides", &s), nd = qr_attr_ints(n, "dilations", &d), np = qr_attr_ints(n, "pads", &p);
    if (x->ndim != 4 || y->ndim != 4)
        return 0;
    G->N = x->dims[0], G->C = x->dims[1], G->H = x->dims[2], G->W = x->dims[3];
    G->M = y->dims[1], G->Ho = y->dims[2], G->Wo = y->dims[3];
    G->kh = kh, G->kw = kw;
    G->sh = ns >= 2 ? s[0] : 1, G->sw = ns >= 2 ? s[1] : 1;
    G->dh = nd >= 2 ? d[0] : 1, G->dw = nd >= 2 ? d[1] : 1;
    const char *ap = qr_attr_s(n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        int64_t th = (G->Ho - 1) * G->sh + (kh - 1) * G->dh + 1 - G->H, tw = (G->Wo - 1) * G->sw + (kw - 1) * G->dw + 1 - G->W;
        th = th > 0 ? th : 0, tw = tw > 0 ? tw : 0;
        G->ph = !strcmp(ap, "SAME_UPPER") ? th / 2 : th - th / 2;
        G->pw = !strcmp(ap, "SAME_UPPER") ? tw / 2 : tw - tw / 2;
    } else if (!strcmp(ap, "VALID"))
        G->ph = G->pw = 0;
    else
        G->ph = np >= 4 ? p[0] : 0, G->pw = np >= 4 ? p[1] : 0;
    G->group = qr_attr_i(n, "group", 1);
    return 1;
}

/* c (m x nn) = a (m x k; a(r, q) = a[r * a_rs + q * a_cs]) times b (k x nn, rows contiguous). */
static qr_status matmul_f32(const float *a, int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb, float *c,
                            int64_t m, int64_t nn, int64_t k, qr_error *e)
{
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    if (!kn) {
        for (int64_t r = 0; r < m; r++)
            for (int64_t x = 0; x < nn; x++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += (double)a[r * a_rs + q * a_cs] * b[q * ldb + x];
                c[r * nn + x] = (float)s;
            }
        return QR_OK;
    }
    float *work = malloc(sizeof *work * (size_t)(qr_sgemm_work(kn) + 1));
    if (!work)
        return qr_errorf(e, "out of memory");
    qr_sgemm_job j = {.a = a, .b = b, .c = c, .a_rs = a_rs, .a_cs = a_cs, .ldb = ldb, .ldc = nn, .m = m, .n = nn, .k = k};
    qr_sgemm(NULL, kn, &j, work);
    free(work);
    return QR_OK;
}

/* The output columns [*lo, *hi) whose tap at column offset off (j * dw - pw) reads inside [0, W):
 * ow * sw + off in [0, W). */
static void tap_range(int64_t off, int64_t sw, int64_t W, int64_t Wo, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw, b = W - off <= 0 ? 0 : (W - off + sw - 1) / sw;
    *lo = a, *hi = b < Wo ? b : Wo;
}

/* Adds w * src (one image's [Ho, Wo] plane: a tap's products) back to o (its input plane [H, W])
 * where tap (i, j) read it. */
static void add_tap(float *o, const float *src, float w, const geom2 *G, int64_t i, int64_t j)
{
    int64_t off = j * G->dw - G->pw, lo, hi;
    tap_range(off, G->sw, G->W, G->Wo, &lo, &hi);
    for (int64_t oh = 0; oh < G->Ho; oh++) {
        int64_t ih = oh * G->sh - G->ph + i * G->dh;
        if (ih < 0 || ih >= G->H)
            continue;
        int64_t base = ih * G->W + off; /* o[base + ow * sw], inside for ow in [lo, hi) */
        const float *row = src + oh * G->Wo;
        for (int64_t ow = lo; ow < hi; ow++)
            o[base + ow * G->sw] += w * row[ow];
    }
}

/* Conv's input adjoint: the transposed convolution of dy with the same weights, group, strides,
 * pads and dilations (per group, col = W^T dy, each column added back where its window read). */
static qr_status conv_vjp(const qr_node *n, const qr_tensor *x, const qr_tensor *w, const qr_tensor *y,
                          const qr_tensor *dy, qr_tensor *dx, qr_error *e)
{
    geom2 G;
    const float *wd = fdata(w), *g = fdata(dy);
    if (!wd || !window_geom(n, x, y, w->dims[2], w->dims[3], &G) || G.group < 1 || G.C % G.group || G.M % G.group)
        return qr_errorf(e, "backward of Conv '%s': not a 2-D convolution of f32 weights", n->name);
    if (!g)
        return QR_OK;
    int64_t Cg = G.C / G.group, Mg = G.M / G.group, kk = G.kh * G.kw, Kc = Cg * kk, P = G.Ho * G.Wo, HW = G.H * G.W;
    float *gx = dx->data;
    if (Cg == 1 && Mg == 1) { /* depthwise: each channel's taps directly */
        for (int64_t b = 0; b < G.N; b++)
            for (int64_t c = 0; c < G.C; c++) {
                const float *gy = g + (b * G.M + c) * P, *wc = wd + c * kk;
                float *o = gx + (b * G.C + c) * HW;
                for (int64_t i = 0; i < G.kh; i++)
                    for (int64_t j = 0; j < G.kw; j++)
                        add_tap(o, gy, wc[i * G.kw + j], &G, i, j);
            }
        return QR_OK;
    }
    float *col = malloc(sizeof *col * (size_t)(Kc * P + 1));
    if (!col)
        return qr_errorf(e, "out of memory");
    qr_status st = QR_OK;
    for (int64_t b = 0; b < G.N && st == QR_OK; b++)
        for (int64_t gr = 0; gr < G.group && st == QR_OK; gr++) {
            st = matmul_f32(wd + gr * Mg * Kc, 1, Kc, g + (b * G.M + gr * Mg) * P, P, col, Kc, P, Mg, e);
            for (int64_t r = 0; st == QR_OK && r < Kc; r++) {
                int64_t c = r / kk, i = r % kk / G.kw, j = r % G.kw;
                add_tap(gx + (b * G.C + gr * Cg + c) * HW, col + r * P, 1.0f, &G, i, j);
            }
        }
    free(col);
    return st;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* ConvTranspose's input adjoint: y = conv_transpose(x, W), so dx = conv(dy, W) with W [C, M/group,
 * kh, kw] read as C filters over dy's M/group channels of the group, the same strides, dilations
 * and pad begins (x's pixel (h, w) wrote y at h * s - pad_begin + i * d): per image and group,
 * col = dy's windows at x's pixels (im2col, zero outside dy), dx += W_g col by sgemm. */
static qr_status conv_tr_vjp(const qr_node *n, const qr_tensor *x, const qr_tensor *w, const qr_tensor *y,
                             const qr_tensor *dy, qr_tensor *dx, qr_error *e)
{
    const float *wd = fdata(w), *g = fdata(dy);
    int64_t grp = qr_attr_i(n, "group", 1);
    if (!wd || x->ndim != 4 || y->ndim != 4 || w->ndim != 4 || grp < 1 || x->dims[1] % grp || w->dims[0] != x->dims[1] ||
        y->dims[1] != w->dims[1] * grp)
        return qr_errorf(e, "backward of ConvTranspose '%s': not a 2-D transposed convolution of f32 weights", n->name);
    if (!g)
        return QR_OK;
    const int64_t *sa = NULL, *da = NULL, *pa = NULL, *oa = NULL, *os = NULL;
    int ns = qr_attr_ints(n, "strides", &sa), nd = qr_attr_ints(n, "dilations", &da), np = qr_attr_ints(n, "pads", &pa);
    int no = qr_attr_ints(n, "output_padding", &oa), nos = qr_attr_ints(n, "output_shape", &os);
    const char *ap = qr_attr_s(n, "auto_pad", "NOTSET");
    int64_t s[2], d[2], pb[2], k[2] = {w->dims[2], w->dims[3]};
    for (int i = 0; i < 2; i++) {
        s[i] = ns == 2 ? sa[i] : 1, d[i] = nd == 2 ? da[i] : 1;
        /* the pad begin as runtime/ops/conv.c's transpose_geom derives it: from the size asked
         * (output_shape or SAME_*), the odd unit at the end for SAME_UPPER; else the attribute */
        if (nos > 0 || !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            int64_t full = s[i] * (x->dims[2 + i] - 1) + (no == 2 ? oa[i] : 0) + (k[i] - 1) * d[i] + 1;
            int64_t total = full - y->dims[2 + i];
            pb[i] = !strcmp(ap, "SAME_UPPER") ? floor_div(total, 2) : total - floor_div(total, 2);
        } else
            pb[i] = np == 4 ? pa[i] : 0;
    }
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], M = y->dims[1], Ho = y->dims[2],
            Wo = y->dims[3], Cg = C / grp, Mg = M / grp, kk = k[0] * k[1], Kc = Mg * kk, P = H * W;
    float *col = malloc(sizeof *col * (size_t)(Kc * P + 1)), *prod = malloc(sizeof *prod * (size_t)(Cg * P + 1));
    if (!col || !prod) {
        free(col), free(prod);
        return qr_errorf(e, "out of memory");
    }
    qr_status st = QR_OK;
    float *gx = dx->data;
    for (int64_t b = 0; b < N && st == QR_OK; b++)
        for (int64_t gr = 0; gr < grp && st == QR_OK; gr++) {
            for (int64_t r = 0; r < Kc; r++) {
                int64_t m = r / kk, i = r % kk / k[1], j = r % k[1];
                const float *plane = g + (b * M + gr * Mg + m) * Ho * Wo;
                float *c = col + r * P;
                for (int64_t h = 0; h < H; h++) {
                    int64_t oh = h * s[0] - pb[0] + i * d[0];
                    for (int64_t v = 0; v < W; v++) {
                        int64_t ow = v * s[1] - pb[1] + j * d[1];
                        c[h * W + v] = oh >= 0 && oh < Ho && ow >= 0 && ow < Wo ? plane[oh * Wo + ow] : 0;
                    }
                }
            }
            st = matmul_f32(wd + gr * Cg * Kc, Kc, 1, col, P, prod, Cg, P, Kc, e);
            float *o = gx + (b * C + gr * Cg) * P;
            for (int64_t i = 0; st == QR_OK && i < Cg * P; i++)
                o[i] += prod[i];
        }
    free(col), free(prod);
    return st;
}

/* Resize's input adjoint: its forward's taps turned around (runtime/ops/resize.c), on the scales,
 * sizes and roi the forward read (in[1..3], constants or the forward's values). */
static qr_status resize_vjp(const qr_node *n, const qr_tensor *const *in, const qr_tensor *y, const float *g,
                            float *dx, qr_error *e)
{
    if (!isf32(in[0]))
        return qr_errorf(e, "backward of %s '%s': its input is not f32", n->op, n->name);
    qr_tensor *out[1] = {(qr_tensor *)y};
    qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = 1, .in = in, .out = out};
    qr_error why = {{0}};
    k.err = &why;
    qr_status st = qr_resize_transpose_f32(&k, g, dx);
    if (st == QR_NEED_DATA) /* sizes or scales made at run time and not kept */
        return qr_errorf(e, "backward of %s '%s': its scales or sizes were not kept", n->op, n->name);
    return st == QR_OK ? QR_OK : qr_errorf(e, "backward of %s '%s': %s", n->op, n->name, why.msg);
}

/* ------------------------------------------------------------ pooling */

static qr_status pool_vjp(const qr_node *n, const qr_tensor *x, const qr_tensor *y, const qr_tensor *dy,
                          qr_tensor *dx, int max, qr_error *e)
{
    const int64_t *k = NULL;
    geom2 G;
    if (qr_attr_ints(n, "kernel_shape", &k) != 2 || !window_geom(n, x, y, k[0], k[1], &G))
        return qr_errorf(e, "backward of %s '%s': not a 2-D pool", n->op, n->name);
    const float *xd = fdata(x), *g = fdata(dy);
    const int64_t *p = NULL;
    int np = qr_attr_ints(n, "pads", &p);
    int64_t peh = np >= 4 ? p[2] : G.ph, pew = np >= 4 ? p[3] : G.pw;
    int incl = (int)qr_attr_i(n, "count_include_pad", 0);
    float *gx = dx->data;
    if (max && !xd)
        return qr_errorf(e, "backward of MaxPool '%s': its input's value was not kept", n->name);
    for (int64_t bc = 0; g && bc < G.N * G.C; bc++) {
        const float *xp = max ? xd + bc * G.H * G.W : NULL, *gy = g + bc * G.Ho * G.Wo;
        float *o = gx + bc * G.H * G.W;
        for (int64_t oh = 0; oh < G.Ho; oh++)
            for (int64_t ow = 0; ow < G.Wo; ow++) {
                int64_t best = -1, cnt = 0;
                float bv = 0;
                for (int64_t i = 0; i < G.kh; i++)
                    for (int64_t j = 0; j < G.kw; j++) {
                        int64_t ih = oh * G.sh - G.ph + i * G.dh, iw = ow * G.sw - G.pw + j * G.dw;
                        int in = ih >= 0 && ih < G.H && iw >= 0 && iw < G.W;
                        if (incl ? ih >= -G.ph && ih < G.H + peh && iw >= -G.pw && iw < G.W + pew : in)
                            cnt++;
                        if (in && max && (best < 0 || xp[ih * G.W + iw] > bv))
                            best = ih * G.W + iw, bv = xp[best];
                    }
                float gv = gy[oh * G.Wo + ow];
                if (max) {
                    if (best >= 0)
                        o[best] += gv;
                    continue;
                }
                for (int64_t i = 0; cnt > 0 && i < G.kh; i++)
                    for (int64_t j = 0; j < G.kw; j++) {
                        int64_t ih = oh * G.sh - G.ph + i * G.dh, iw = ow * G.sw - G.pw + j * G.dw;
                        if (ih >= 0 && ih < G.H && iw >= 0 && iw < G.W)
                            o[ih * G.W + iw] += gv / (float)cnt;
                    }
            }
    }
    return QR_OK;
}

/* ------------------------------------------------------------ matrix products */

/* Gemm: y = alpha op(A) op(B) + beta C; the adjoints of A and B. */
static qr_status gemm_vjp(const qr_node *n, const qr_tensor *ta, const qr_tensor *tb, const qr_tensor *dy,
                          qr_tensor *ga, qr_tensor *gb, qr_error *e)
{
    const float *a = fdata(ta), *b = fdata(tb), *g = fdata(dy);
    if ((gb && !a) || (ga && !b) || ta->ndim != 2 || tb->ndim != 2) /* each operand read for the other's adjoint */
        return qr_errorf(e, "backward of Gemm '%s': not 2-D f32 operands", n->name);
    int tA = (int)qr_attr_i(n, "transA", 0), tB = (int)qr_attr_i(n, "transB", 0);
    double al = qr_attr_f(n, "alpha", 1.0f);
    int64_t M = tA ? ta->dims[1] : ta->dims[0], K = tA ? ta->dims[0] : ta->dims[1], N = tB ? tb->dims[0] : tb->dims[1];
    for (int64_t i = 0; g && ga && i < M; i++)
        for (int64_t q = 0; q < K; q++) {
            double s = 0;
            for (int64_t j = 0; j < N; j++)
                s += (double)g[i * N + j] * b[tB ? j * K + q : q * N + j];
            ((float *)ga->data)[tA ? q * M + i : i * K + q] += (float)(al * s);
        }
    for (int64_t q = 0; g && gb && q < K; q++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t i = 0; i < M; i++)
                s += (double)a[tA ? q * M + i : i * K + q] * g[i * N + j];
            ((float *)gb->data)[tB ? j * K + q : q * N + j] += (float)(al * s);
        }
    return QR_OK;
}

/* MatMul (numpy's matmul: 1-D operands promoted, batch dims broadcast). */
static qr_status matmul_vjp(const qr_node *n, const qr_tensor *ta, const qr_tensor *tb, const qr_tensor *ty,
                            const qr_tensor *dy, qr_tensor *ga, qr_tensor *gb, qr_error *e)
{
    const float *a = fdata(ta), *b = fdata(tb), *g = fdata(dy);
    if ((gb && !a) || (ga && !b) || ta->ndim < 1 || tb->ndim < 1) /* each operand read for the other's adjoint */
        return qr_errorf(e, "backward of MatMul '%s': not f32 operands", n->name);
    if (!g)
        return QR_OK;
    int64_t M = ta->ndim >= 2 ? ta->dims[ta->ndim - 2] : 1, K = ta->dims[ta->ndim - 1];
    int64_t N = tb->ndim >= 2 ? tb->dims[tb->ndim - 1] : 1;
    /* batch: y's dims but the last two (or one, for a 1-D operand) */
    int yb = ty->ndim - (ta->ndim >= 2) - (tb->ndim >= 2);
    qr_tensor bt = {.dtype = QR_F32, .ndim = yb > 0 ? yb : 0};
    for (int i = 0; i < bt.ndim; i++)
        bt.dims[i] = ty->dims[i];
    int64_t nb = qr_tensor_numel(&bt);
    qr_tensor ab = {.dtype = QR_F32, .ndim = ta->ndim > 2 ? ta->ndim - 2 : 0}, bb = {.dtype = QR_F32, .ndim = tb->ndim > 2 ? tb->ndim - 2 : 0};
    memcpy(ab.dims, ta->dims, sizeof ab.dims[0] * (size_t)ab.ndim);
    memcpy(bb.dims, tb->dims, sizeof bb.dims[0] * (size_t)bb.ndim);
    int64_t *oa = malloc(sizeof *oa * (size_t)(nb + 1)), *ob = malloc(sizeof *ob * (size_t)(nb + 1));
    if (!oa || !ob) {
        free(oa), free(ob);
        return qr_errorf(e, "out of memory");
    }
    bcast_offsets(&ab, &bt, oa);
    bcast_offsets(&bb, &bt, ob);
    float *da = ga ? ga->data : NULL, *db = gb ? gb->data : NULL;
    /* by the runtime's sgemm (PP-OCR rec's attention): dA = G B^T (B^T made contiguous), dB = A^T G
     * (A read transposed through its strides), each product into tmp, then added */
    int64_t big = M * K > K * N ? M * K : K * N;
    float *btr = da ? malloc(sizeof *btr * (size_t)(K * N + 1)) : NULL, *tmp = malloc(sizeof *tmp * (size_t)(big + 1));
    qr_status st = (da && !btr) || !tmp ? qr_errorf(e, "out of memory") : QR_OK;
    for (int64_t t = 0; st == QR_OK && t < nb; t++) {
        const float *A = db ? a + oa[t] * M * K : NULL, *B = da ? b + ob[t] * K * N : NULL, *G = g + t * M * N;
        if (da) {
            for (int64_t q = 0; q < K; q++)
                for (int64_t j = 0; j < N; j++)
                    btr[j * K + q] = B[q * N + j];
            if ((st = matmul_f32(G, N, 1, btr, K, tmp, M, K, N, e)) != QR_OK)
                break;
            for (int64_t i = 0; i < M * K; i++)
                da[oa[t] * M * K + i] += tmp[i];
        }
        if (db) {
            if ((st = matmul_f32(A, 1, K, G, N, tmp, K, N, M, e)) != QR_OK)
                break;
            for (int64_t i = 0; i < K * N; i++)
                db[ob[t] * K * N + i] += tmp[i];
        }
    }
    free(oa), free(ob), free(btr), free(tmp);
    return st;
}

/* ------------------------------------------------------------ layout */

static int norm_axis(int64_t a, int nd) { return (int)(a < 0 ? a + nd : a); }

/* Concat's adjoint: each input's slab of dy (or Split's, the other way: dx gets each output's). */
static void slabs(const qr_tensor *whole, int axis, const qr_tensor *const *parts, int np, float *wd,
                  float *const *pd, int to_whole)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= whole->dims[i];
    for (int i = axis + 1; i < whole->ndim; i++)
        inner *= whole->dims[i];
    int64_t W = whole->dims[axis], at = 0;
    for (int p = 0; p < np; p++) {
        int64_t w = parts[p] ? parts[p]->dims[axis] : 0;
        for (int64_t o = 0; pd[p] && o < outer; o++)
            for (int64_t i = 0; i < w * inner; i++) {
                if (to_whole)
                    wd[(o * W + at) * inner + i] += pd[p][o * w * inner + i];
                else
                    pd[p][o * w * inner + i] += wd[(o * W + at) * inner + i];
            }
        at += w;
    }
}

/* Int values of an optional input (Slice's starts..., Pad's pads, ReduceMean's axes): count, -1 none. */
static int ints_of(const qr_tensor *t, int64_t *v, int max)
{
    if (!t || !t->data || (t->dtype != QR_I64 && t->dtype != QR_I32))
        return -1;
    int64_t m = qr_tensor_numel(t);
    for (int64_t i = 0; i < m && i < max; i++)
        v[i] = (int64_t)qr_get_f64(t->data, t->dtype, i);
    return (int)(m < max ? m : max);
}

/* dx[index of x for y's element] += dy: x's element of y's multi-index i is sum (start[d] + i[d] *
 * step[d]) * xstride[d] (Slice, Pad's interior, Transpose with step 0 and permuted strides). */
static void scatter(const qr_tensor *y, const int64_t *start, const int64_t *xst, const float *g, float *dx)
{
    int64_t m = qr_tensor_numel(y), idx[QR_MAX_DIMS] = {0}, o = 0;
    for (int d = 0; d < y->ndim; d++)
        o += start[d];
    for (int64_t i = 0; i < m; i++) {
        if (o >= 0)
            dx[o] += g[i];
        for (int d = y->ndim - 1; d >= 0; d--) {
            o += xst[d];
            if (++idx[d] < y->dims[d])
                break;
            o -= xst[d] * idx[d];
            idx[d] = 0;
        }
    }
}

static void strides_of(const qr_tensor *t, int64_t *s)
{
    int64_t a = 1;
    for (int d = t->ndim - 1; d >= 0; d--)
        s[d] = a, a *= t->dims[d];
}

/* ------------------------------------------------------------ the node */

qr_status qr_vjp_node(const qr_node *n, const qr_tensor *const *in, const qr_tensor *const *out,
                      const qr_tensor *const *gout, qr_tensor *const *gin, qr_error *e)
{
    const qr_tensor *x = n->n_in > 0 ? in[0] : NULL, *y = n->n_out > 0 ? out[0] : NULL;
    const qr_tensor *dy = n->n_out > 0 ? gout[0] : NULL;
    qr_tensor *dx = n->n_in > 0 ? gin[0] : NULL;
    const float *restrict g = fdata(dy), *restrict xd = fdata(x), *restrict yd = fdata(y);
    int64_t m = y ? qr_tensor_numel(y) : 0;
    for (int j = 0; j < n->n_in; j++)
        if (gin[j] && !qr_vjp_input_supported(n, j))
            return qr_errorf(e, "no backward for input %d of %s '%s'", j, n->op, n->name);
    if (is(n, "Concat")) {
        float *pd[64] = {0};
        const qr_tensor *parts[64];
        if (n->n_in > 64 || !g)
            return n->n_in > 64 ? qr_errorf(e, "backward of Concat '%s': over 64 inputs", n->name) : QR_OK;
        for (int j = 0; j < n->n_in; j++)
            parts[j] = in[j], pd[j] = gin[j] ? gin[j]->data : NULL;
        slabs(y, norm_axis(qr_attr_i(n, "axis", 0), y->ndim), parts, n->n_in, (float *)g, pd, 0);
        return QR_OK;
    }
    if (is(n, "Split")) {
        float *pd[64] = {0};
        if (n->n_out > 64)
            return qr_errorf(e, "backward of Split '%s': over 64 outputs", n->name);
        for (int j = 0; j < n->n_out; j++)
            pd[j] = (float *)fdata(gout[j]);
        if (dx)
            slabs(x, norm_axis(qr_attr_i(n, "axis", 0), x->ndim), out, n->n_out, dx->data, pd, 1);
        return QR_OK;
    }
    if (!dx && !(n->n_in > 1 && gin[1]))
        return QR_OK;
    if (is(n, "Add") || is(n, "Sub") || is(n, "Mul") || is(n, "Div") || is(n, "Max") || is(n, "Pow"))
        return n->n_in == 2 ? binary_vjp(n, in[0], in[1], y, dy, dx, gin[1], e)
                            : qr_errorf(e, "backward of %s '%s': not two inputs", n->op, n->name);
    if (is(n, "Gemm"))
        return gemm_vjp(n, in[0], in[1], dy, dx, gin[1], e);
    if (is(n, "MatMul"))
        return matmul_vjp(n, in[0], in[1], y, dy, dx, gin[1], e);
    if (!g)
        return QR_OK;
    float *restrict o = dx->data;
    if (is(n, "Conv"))
        return conv_vjp(n, x, in[1], y, dy, dx, e);
    if (is(n, "ConvTranspose"))
        return conv_tr_vjp(n, x, in[1], y, dy, dx, e);
    if (is(n, "Resize") || is(n, "Upsample"))
        return resize_vjp(n, in, y, g, o, e);
    if (is(n, "MaxPool") || is(n, "AveragePool"))
        return n->n_out > 1 ? qr_errorf(e, "backward of MaxPool '%s': with indices", n->name)
                            : pool_vjp(n, x, y, dy, dx, is(n, "MaxPool"), e);
    if (is(n, "Identity") || is(n, "Reshape") || is(n, "Flatten") || is(n, "Squeeze") || is(n, "Unsqueeze")) {
        for (int64_t i = 0; i < m; i++)
            o[i] += g[i];
        return QR_OK;
    }
    if (x && x->dtype == QR_BOOL && qr_vjp_masks(n) && x->data && qr_tensor_numel(x) == m) {
        /* its input kept as its mask (qr_vjp_mask): the same products as from the input */
        const unsigned char *restrict mk = x->data;
#define MK(i) (mk[(i) >> 3] >> ((i) & 7) & 1)
        if (is(n, "Relu") || is(n, "LeakyRelu")) {
            float al = is(n, "Relu") ? 0 : qr_attr_f(n, "alpha", 0.01f);
            for (int64_t i = 0; i < m; i++)
                o[i] += MK(i) ? g[i] : al * g[i];
        } else if (is(n, "Clip")) {
            for (int64_t i = 0; i < m; i++)
                o[i] += MK(i) ? g[i] : 0;
        } else {
            float al = qr_attr_f(n, "alpha", 0.2f);
            for (int64_t i = 0; i < m; i++)
                o[i] += MK(i) ? al * g[i] : 0;
        }
#undef MK
        return QR_OK;
    }
    if (!isf32(x) || !isf32(y))
        return qr_errorf(e, "backward of %s '%s': its input is not f32", n->op, n->name);
    if ((qr_vjp_reads(n, 0) && !xd) || (qr_vjp_reads(n, -1) && !yd))
        return qr_errorf(e, "backward of %s '%s': its values were not kept", n->op, n->name);
    if (is(n, "Relu") || is(n, "LeakyRelu")) {
        float al = is(n, "Relu") ? 0 : qr_attr_f(n, "alpha", 0.01f);
        for (int64_t i = 0; i < m; i++)
            o[i] += xd[i] > 0 ? g[i] : al * g[i];
        return QR_OK;
    }
    if (is(n, "Clip")) {
        double lo, hi;
        clip_bounds(n, in, &lo, &hi);
        for (int64_t i = 0; i < m; i++) /* torch.clamp's: the bounds themselves pass */
            o[i] += xd[i] >= lo && xd[i] <= hi ? g[i] : 0;
        return QR_OK;
    }
    if (is(n, "HardSigmoid")) {
        float al = qr_attr_f(n, "alpha", 0.2f), be = qr_attr_f(n, "beta", 0.5f);
        for (int64_t i = 0; i < m; i++) {
            float t = al * xd[i] + be;
            o[i] += t > 0 && t < 1 ? al * g[i] : 0;
        }
        return QR_OK;
    }
    if (is(n, "HardSwish")) {
        for (int64_t i = 0; i < m; i++)
            o[i] += xd[i] >= 3 ? g[i] : xd[i] > -3 ? g[i] * (2 * xd[i] + 3) / 6 : 0;
        return QR_OK;
    }
    if (is(n, "Sigmoid") || is(n, "Tanh") || is(n, "Sqrt") || is(n, "Neg")) {
        int k = is(n, "Sigmoid") ? 0 : is(n, "Tanh") ? 1 : is(n, "Sqrt") ? 2 : 3;
        for (int64_t i = 0; i < m; i++)
            o[i] += g[i] * (k == 0 ? yd[i] * (1 - yd[i]) : k == 1 ? 1 - yd[i] * yd[i] : k == 2 ? 0.5f / yd[i] : -1);
        return QR_OK;
    }
    if (is(n, "GlobalAveragePool")) {
        int64_t nc = x->dims[0] * x->dims[1], hw = qr_tensor_numel(x) / (nc > 0 ? nc : 1);
        for (int64_t c = 0; c < nc; c++)
            for (int64_t i = 0; i < hw; i++)
                o[c * hw + i] += g[c] / (float)hw;
        return QR_OK;
    }
    if (is(n, "BatchNormalization")) {
        const float *sc = fdata(in[1]), *var = n->n_in > 4 ? fdata(in[4]) : NULL;
        float eps = qr_attr_f(n, "epsilon", 1e-5f);
        if (!sc || !var || x->ndim < 2 || n->n_out > 1)
            return qr_errorf(e, "backward of BatchNormalization '%s': not inference mode", n->name);
        int64_t C = x->dims[1], inner = qr_tensor_numel(x) / (x->dims[0] * C);
        for (int64_t i = 0; i < m; i++) {
            int64_t c = i / inner % C;
            o[i] += g[i] * sc[c] / sqrtf(var[c] + eps);
        }
        return QR_OK;
    }
    if (is(n, "Softmax")) {
        int ax = norm_axis(qr_attr_i(n, "axis", n->opset < 13 ? 1 : -1), x->ndim);
        int64_t outer = 1, len = 1, inner = 1;
        for (int d = 0; d < x->ndim; d++)
            *(d < ax ? &outer : d == ax || (n->opset < 13 && d > ax) ? &len : &inner) *= x->dims[d];
        for (int64_t a = 0; a < outer; a++)
            for (int64_t b = 0; b < inner; b++) {
                double s = 0;
                for (int64_t k = 0; k < len; k++)
                    s += (double)g[(a * len + k) * inner + b] * yd[(a * len + k) * inner + b];
                for (int64_t k = 0; k < len; k++) {
                    int64_t i = (a * len + k) * inner + b;
                    o[i] += (float)(yd[i] * (g[i] - s));
                }
            }
        return QR_OK;
    }
    if (is(n, "ReduceMean")) {
        int64_t ax[QR_MAX_DIMS];
        const int64_t *aa = NULL;
        int na = n->n_in > 1 ? ints_of(in[1], ax, QR_MAX_DIMS) : -1;
        if (na < 0 && (na = qr_attr_ints(n, "axes", &aa)) > 0)
            memcpy(ax, aa, sizeof *ax * (size_t)(na < QR_MAX_DIMS ? na : QR_MAX_DIMS));
        int red[QR_MAX_DIMS] = {0};
        for (int d = 0; d < x->ndim; d++)
            red[d] = na <= 0;
        for (int i = 0; i < na; i++)
            red[norm_axis(ax[i], x->ndim)] = 1;
        /* dy in x's rank with the reduced dims 1, broadcast back over x, divided by the count */
        qr_tensor k = {.dtype = QR_F32, .ndim = x->ndim};
        int64_t cnt = 1;
        for (int d = 0; d < x->ndim; d++)
            k.dims[d] = red[d] ? 1 : x->dims[d], cnt *= red[d] ? x->dims[d] : 1;
        int64_t mx = qr_tensor_numel(x), *off = malloc(sizeof *off * (size_t)(mx + 1));
        if (!off)
            return qr_errorf(e, "out of memory");
        bcast_offsets(&k, x, off);
        for (int64_t i = 0; i < mx; i++)
            o[i] += g[off[i]] / (float)cnt;
        free(off);
        return QR_OK;
    }
    if (is(n, "Transpose")) {
        const int64_t *p = NULL;
        int np = qr_attr_ints(n, "perm", &p);
        int64_t xs[QR_MAX_DIMS], st[QR_MAX_DIMS], zero[QR_MAX_DIMS] = {0};
        strides_of(x, xs);
        for (int d = 0; d < y->ndim; d++) /* y's dim d is x's perm[d] (default: reversed) */
            st[d] = xs[np == y->ndim ? p[d] : y->ndim - 1 - d];
        scatter(y, zero, st, g, o);
        return QR_OK;
    }
    if (is(n, "Slice") || is(n, "Pad")) {
        int64_t xs[QR_MAX_DIMS], st[QR_MAX_DIMS], start[QR_MAX_DIMS] = {0};
        strides_of(x, xs);
        for (int d = 0; d < x->ndim; d++)
            st[d] = xs[d];
        if (is(n, "Pad")) {
            int64_t pads[2 * QR_MAX_DIMS];
            const int64_t *pa = NULL;
            int np = n->n_in > 1 ? ints_of(in[1], pads, 2 * QR_MAX_DIMS) : qr_attr_ints(n, "pads", &pa);
            if (pa && np > 0)
                memcpy(pads, pa, sizeof *pads * (size_t)(np < 2 * QR_MAX_DIMS ? np : 2 * QR_MAX_DIMS));
            if (strcmp(qr_attr_s(n, "mode", "constant"), "constant") || np != 2 * x->ndim ||
                (n->n_in > 3 && in[3]))
                return qr_errorf(e, "backward of Pad '%s': not constant padding of every axis", n->name);
            /* y's element i reads x at i - pad_begin (outside x: the constant) */
            int64_t idx[QR_MAX_DIMS] = {0};
            for (int64_t i = 0; i < m; i++) {
                int64_t at = 0, inside = 1;
                for (int d = 0; d < x->ndim; d++) {
                    int64_t c = idx[d] - pads[d];
                    inside &= c >= 0 && c < x->dims[d];
                    at += c * xs[d];
                }
                if (inside)
                    o[at] += g[i];
                for (int d = y->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < y->dims[d])
                        break;
                    idx[d] = 0;
                }
            }
            return QR_OK;
        }
        int64_t s[QR_MAX_DIMS], en[QR_MAX_DIMS], ax[QR_MAX_DIMS], sp[QR_MAX_DIMS];
        int ns = ints_of(in[1], s, QR_MAX_DIMS), ne = ints_of(in[2], en, QR_MAX_DIMS);
        int na = n->n_in > 3 ? ints_of(in[3], ax, QR_MAX_DIMS) : -1, nsp = n->n_in > 4 ? ints_of(in[4], sp, QR_MAX_DIMS) : -1;
        if (ns < 0 || ne != ns)
            return qr_errorf(e, "backward of Slice '%s': starts and ends not known", n->name);
        for (int i = 0; i < ns; i++) {
            int d = na == ns ? norm_axis(ax[i], x->ndim) : i;
            int64_t step = nsp == ns ? sp[i] : 1, dim = x->dims[d], b = s[i];
            b = b < 0 ? b + dim : b;
            b = step > 0 ? (b < 0 ? 0 : b > dim ? dim : b) : (b < 0 ? -1 : b > dim - 1 ? dim - 1 : b);
            start[d] = b * xs[d];
            st[d] = step * xs[d];
        }
        scatter(y, start, st, g, o);
        return QR_OK;
    }
    return qr_errorf(e, "no backward for %s '%s'", n->op, n->name);
}

/* ------------------------------------------------------------ the graph */

void qr_vjp_exact(const qr_graph *g, unsigned char *exact)
{
    for (int v = 0; v < g->n_values; v++)
        exact[v] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const qr_node *n = g->nodes[i];
        if (n->dead)
            continue;
        int outs = 1, f32 = 0;
        for (int k = 0; k < n->n_out; k++) {
            outs &= !n->out[k] || exact[n->out[k]->id];
            f32 |= n->out[k] && maybe_f32(n->out[k]);
        }
        if (!f32)
            continue; /* Shape, a comparison: what it reads does not change its value to first order */
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && !n->in[j]->is_const && maybe_f32(n->in[j]) &&
                (!outs || !qr_vjp_input_supported(n, j)))
                exact[n->in[j]->id] = 0;
    }
}

static qr_status zeros_like(const qr_tensor *t, qr_tensor *z, qr_error *e)
{
    *z = *t;
    z->data = NULL;
    z->dtype = QR_F32;
    if (qr_tensor_alloc(z, e) != QR_OK)
        return QR_ERR;
    memset(z->data, 0, qr_tensor_nbytes(z));
    return QR_OK;
}

qr_status qr_vjp_backward(const qr_graph *g, const qr_tensor *val, qr_tensor *adj, qr_vjp_visit_fn visit,
                          void *user, qr_error *e)
{
    return qr_vjp_backward_to(g, val, adj, visit, user, 0, e);
}

qr_status qr_vjp_backward_to(const qr_graph *g, const qr_tensor *val, qr_tensor *adj, qr_vjp_visit_fn visit,
                             void *user, int stop, qr_error *e)
{
    qr_status st = QR_OK;
    int64_t ran = 0;
    /* values the caller left without data that their producers give again (qr_vjp_recompute): from
     * their first reader's backward to their producer's, the last of them back to front */
    qr_tensor *rc = calloc((size_t)g->n_values + 1, sizeof *rc);
    if (!rc)
        return qr_errorf(e, "out of memory");
    for (int i = g->n_nodes - 1; i >= (stop > 0 ? stop : 0) && st == QR_OK; i--) {
        const qr_node *n = g->nodes[i];
        int any = 0, wants = 0;
        for (int k = 0; !n->dead && k < n->n_out; k++)
            if (n->out[k] && adj[n->out[k]->id].data) {
                any = 1;
                if (visit)
                    visit(user, n->out[k]->id, &adj[n->out[k]->id]);
            }
        if (!any || (stop > 0 && i == stop)) { /* node stop's outputs visited: nothing before it is asked */
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k])
                    qr_tensor_free(&rc[n->out[k]->id]);
            continue;
        }
        const qr_tensor *in[64], *out[64], *gout[64];
        qr_tensor *gin[64], shape[128]; /* a value kept as a mask, to the nodes that read it not: its shape */
        if (n->n_in > 64 || n->n_out > 64)
            return qr_errorf(e, "backward of %s '%s': over 64 inputs or outputs", n->op, n->name);
        for (int j = 0; j < n->n_in; j++) {
            const qr_value *u = n->in[j];
            in[j] = u ? &val[u->id] : NULL;
            gin[j] = NULL;
            if (u && val[u->id].dtype == QR_BOOL && maybe_f32(u) && !(j == 0 && qr_vjp_masks(n))) {
                shape[j] = val[u->id], shape[j].dtype = QR_F32, shape[j].data = NULL;
                in[j] = &shape[j];
            }
            /* kept as its f32 value (or shape), or as the mask of the one node that reads it */
            int kept = u && (val[u->id].dtype == QR_F32 || (val[u->id].dtype == QR_BOOL && qr_vjp_masks(n)));
            if (kept && !u->is_const && maybe_f32(u) && qr_vjp_input_supported(n, j)) {
                if (!adj[u->id].data)
                    st = zeros_like(&val[u->id], &adj[u->id], e);
                gin[j] = &adj[u->id];
                wants = 1;
            }
            if (u && !u->is_const && val[u->id].dtype == QR_F32 && !val[u->id].data && qr_vjp_reads(n, j) &&
                qr_vjp_recompute(u, val, rc, 0) == 0)
                in[j] = &rc[u->id];
        }
        for (int k = 0; k < n->n_out; k++) {
            out[k] = n->out[k] ? &val[n->out[k]->id] : NULL;
            gout[k] = n->out[k] ? &adj[n->out[k]->id] : NULL;
            if (out[k] && out[k]->dtype == QR_BOOL && maybe_f32(n->out[k])) {
                shape[64 + k] = *out[k], shape[64 + k].dtype = QR_F32, shape[64 + k].data = NULL;
                out[k] = &shape[64 + k];
            }
            if (out[k] && out[k]->dtype == QR_F32 && !out[k]->data && qr_vjp_reads(n, -1 - k) &&
                qr_vjp_recompute(n->out[k], val, rc, 0) == 0)
                out[k] = &rc[n->out[k]->id];
        }
        if (st == QR_OK)
            st = qr_vjp_node(n, in, out, gout, gin, e);
        ran += st == QR_OK && wants;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k])
                qr_tensor_free(&adj[n->out[k]->id]), qr_tensor_free(&rc[n->out[k]->id]);
    }
    for (int v = 0; v < g->n_values; v++)
        qr_tensor_free(&rc[v]);
    free(rc);
    for (int v = 0; v < g->n_values && st == QR_OK && stop <= 0; v++)
        if (adj[v].data && !g->values[v]->producer) {
            if (visit)
                visit(user, v, &adj[v]);
            qr_tensor_free(&adj[v]);
        }
    /* the run counter's unit, as a forward run counts (qr_exec_node_samples): each node whose
     * backward made an input's adjoint, one node-run per sample of the first input's first axis */
    const qr_tensor *x0 = g->n_inputs > 0 ? &val[g->inputs[0]->id] : NULL;
    if (st == QR_OK)
        qr_exec_add_node_samples(ran * (x0 && x0->ndim > 0 ? x0->dims[0] : 1));
    return st;
}
