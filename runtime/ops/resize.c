/* Resize (opsets 10..19) and its predecessor Upsample. Interpolation is
 * separable: for every axis and output index we list the input indices it
 * reads with their weights ("taps"), then each output element is the sum over
 * the tensor product of its axes' taps. This follows the ONNX reference
 * implementation (onnx/reference/ops/op_resize.py), including its choice of
 * neighbours when a coordinate falls exactly on an input index. */
#include "ops_common.h"
#include "resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

qr_status qr_resize_infer(qr_kctx *k);
qr_status qr_resize_run(qr_kctx *k);
qr_status qr_upsample_infer(qr_kctx *k);
qr_status qr_upsample_run(qr_kctx *k);

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { C_HALF_PIXEL, C_HALF_PIXEL_SYMMETRIC, C_PYTORCH_HALF_PIXEL, C_ALIGN_CORNERS, C_ASYMMETRIC,
       C_TF_HALF_PIXEL_FOR_NN, C_TF_CROP_AND_RESIZE };
/* N_SIMPLE: Resize-10 and Upsample, which floor when upsampling and ceil when
 * downsampling (what onnxruntime does and the opset 10 test data expects). */
enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL, N_SIMPLE };

typedef struct rz_plan {
    int mode, ctm, nearest, exclude, antialias;
    double cubic_a, extrap;
    double scale[QR_MAX_DIMS];
    double roi0[QR_MAX_DIMS], roi1[QR_MAX_DIMS];
    int64_t out[QR_MAX_DIMS];
} rz_plan;

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Reads the float input i (1-D) into v; *n = count (0 when absent or empty). */
static qr_status in_floats(qr_kctx *k, int i, const char *what, double *v, int max, int *n)
{
    *n = 0;
    if (i >= k->n_in || !k->in[i] || qr_tensor_numel(k->in[i]) == 0)
        return QR_OK;
    const qr_tensor *t = k->in[i];
    if (!qr_dtype_is_float(t->dtype))
        return QR_KERR(k, "input '%s' must be a float tensor, not %s", what, qr_dtype_name(t->dtype));
    if (qr_tensor_numel(t) > max)
        return QR_KERR(k, "input '%s' has %lld values, more than the %d supported", what,
                       (long long)qr_tensor_numel(t), max);
    if (!t->data)
        return QR_NEED_DATA;
    *n = (int)qr_tensor_numel(t);
    for (int j = 0; j < *n; j++)
        v[j] = qr_get_f64(t->data, t->dtype, j);
    return QR_OK;
}

static qr_status in_sizes(qr_kctx *k, int i, int64_t *v, int max, int *n)
{
    *n = 0;
    if (i >= k->n_in || !k->in[i] || qr_tensor_numel(k->in[i]) == 0)
        return QR_OK;
    const qr_tensor *t = k->in[i];
    if (!qr_dtype_is_int(t->dtype))
        return QR_KERR(k, "input 'sizes' must be an integer tensor, not %s", qr_dtype_name(t->dtype));
    if (!t->data)
        return QR_NEED_DATA;
    *n = qr_read_ints(t, v, max);
    if (*n < 0)
        return QR_KERR(k, "input 'sizes' has more than the %d values supported", max);
    return QR_OK;
}

static qr_status rz_attrs(qr_kctx *k, rz_plan *p, int legacy)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const qr_node *n = k->node;
    const char *m = qr_attr_s(n, "mode", "nearest");
    p->mode = strcmp(m, "bilinear") == 0 && legacy ? M_LINEAR : pick(m, modes, legacy ? 2 : 3);
    if (p->mode < 0)
        return QR_KERR(k, "unknown mode '%s'", m);
    p->exclude = p->antialias = 0;
    p->cubic_a = -0.75;
    p->extrap = 0;
    if (legacy) {
        p->ctm = C_ASYMMETRIC;
        p->nearest = N_SIMPLE;
        return QR_OK;
    }
    const char *c = qr_attr_s(n, "coordinate_transformation_mode", "half_pixel");
    if ((p->ctm = pick(c, ctms, 7)) < 0)
        return QR_KERR(k, "unknown coordinate_transformation_mode '%s'", c);
    const char *nm = qr_attr_s(n, "nearest_mode", "round_prefer_floor");
    if ((p->nearest = pick(nm, nearests, 4)) < 0)
        return QR_KERR(k, "unknown nearest_mode '%s'", nm);
    p->cubic_a = qr_attr_f(n, "cubic_coeff_a", -0.75f);
    p->exclude = qr_attr_i(n, "exclude_outside", 0) != 0;
    p->extrap = qr_attr_f(n, "extrapolation_value", 0.0f);
    p->antialias = k->opset >= 18 && qr_attr_i(n, "antialias", 0) != 0;
    if (p->antialias && p->mode == M_NEAREST)
        return QR_KERR(k, "antialias applies to linear and cubic modes only");
    return QR_OK;
}

/* Fills p: attributes, per-axis scale, roi and output size. legacy = Resize-10
 * or Upsample (whose scales are input 1, or the attribute for Upsample-7). */
/* The resized axes (opset 18's axes attribute; every axis before), each at most once. */
static qr_status rz_axes(qr_kctx *k, int legacy, int *axes, int *na)
{
    int r = k->in[0]->ndim, mark[QR_MAX_DIMS] = {0};
    *na = r;
    for (int i = 0; i < r; i++)
        axes[i] = i;
    const int64_t *av;
    int nav = k->opset >= 18 && !legacy ? qr_attr_ints(k->node, "axes", &av) : -1;
    if (nav > QR_MAX_DIMS)
        return QR_KERR(k, "attribute 'axes' has %d values, more than the rank %d", nav, r);
    if (nav >= 0) {
        *na = nav;
        for (int i = 0; i < nav; i++) {
            if (qr_norm_axis(k, av[i], r, &axes[i]) != QR_OK)
                return QR_ERR;
            if (mark[axes[i]]++)
                return QR_KERR(k, "axis %lld is given twice", (long long)av[i]);
        }
    }
    return QR_OK;
}

/* The scales, sizes and roi the node gives (attribute or inputs, by version): one of scales and
 * sizes, a value per resized axis, and a roi of two per axis for tf_crop_and_resize. */
typedef struct rz_given {
    double scales[QR_MAX_DIMS], roi[2 * QR_MAX_DIMS];
    int64_t sizes[QR_MAX_DIMS];
    int ns, nz, nr;
} rz_given;

static qr_status rz_read(qr_kctx *k, const rz_plan *p, int legacy, int need_roi, int na, rz_given *g)
{
    int r = k->in[0]->ndim;
    qr_status st = QR_OK;
    g->ns = g->nz = g->nr = 0;
    if (legacy && (k->n_in < 2 || !k->in[1])) {
        const float *f;
        g->ns = qr_attr_floats(k->node, "scales", &f);
        if (g->ns < 0)
            return QR_KERR(k, "scales are required");
        if (g->ns > QR_MAX_DIMS)
            return QR_KERR(k, "scales has %d values, more than the rank %d", g->ns, r);
        for (int i = 0; i < g->ns; i++)
            g->scales[i] = f[i];
    } else if (legacy) {
        st = in_floats(k, 1, "scales", g->scales, QR_MAX_DIMS, &g->ns);
    } else {
        st = in_floats(k, 2, "scales", g->scales, QR_MAX_DIMS, &g->ns);
        if (st == QR_OK)
            st = in_sizes(k, 3, g->sizes, QR_MAX_DIMS, &g->nz);
        if (st == QR_OK && need_roi && p->ctm == C_TF_CROP_AND_RESIZE)
            st = in_floats(k, 1, "roi", g->roi, 2 * QR_MAX_DIMS, &g->nr);
    }
    if (st != QR_OK)
        return st;
    if (g->ns && g->nz)
        return QR_KERR(k, "only one of scales and sizes may be given");
    if (!g->ns && !g->nz)
        return QR_KERR(k, "one of scales and sizes is required");
    if ((g->ns && g->ns != na) || (g->nz && g->nz != na))
        return QR_KERR(k, "%s has %d values but %d axes are resized", g->ns ? "scales" : "sizes",
                       g->ns ? g->ns : g->nz, na);
    if (need_roi && p->ctm == C_TF_CROP_AND_RESIZE && g->nr != 2 * na)
        return QR_KERR(k, "tf_crop_and_resize needs a roi of %d values, got %d", 2 * na, g->nr);
    return QR_OK;
}

/* Output sizes from sizes: each axis's own scale, or with keep_aspect_ratio_policy (keep 1:
 * not_larger, 2: not_smaller) the smallest or largest of them for all. */
static qr_status rz_from_sizes(qr_kctx *k, rz_plan *p, const int *axes, int na, const int64_t *sizes, int keep)
{
    const qr_tensor *x = k->in[0];
    double common = 0;
    int have = 0;
    for (int i = 0; i < na; i++) {
        int d = axes[i];
        if (sizes[i] < 0 || sizes[i] > (int64_t)1 << 40)
            return QR_KERR(k, "size %lld on axis %d is not usable", (long long)sizes[i], d);
        if (x->dims[d] == 0) {
            if (sizes[i] != 0)
                return QR_KERR(k, "cannot resize the empty axis %d to %lld", d, (long long)sizes[i]);
            continue;
        }
        double s = (double)sizes[i] / (double)x->dims[d];
        p->scale[d] = s;
        p->out[d] = sizes[i];
        if (!have || (keep == 1 && s < common) || (keep == 2 && s > common))
            common = s;
        have = 1;
    }
    for (int i = 0; keep && have && i < na; i++) {
        int d = axes[i];
        p->scale[d] = common;
        p->out[d] = (int64_t)(common * (double)x->dims[d] + 0.5);
    }
    return QR_OK;
}

static qr_status rz_make(qr_kctx *k, rz_plan *p, int legacy, int need_roi)
{
    const qr_tensor *x = k->in[0];
    int r = x->ndim, axes[QR_MAX_DIMS], na;
    rz_given g;
    qr_status st = rz_attrs(k, p, legacy);
    if (st == QR_OK)
        st = rz_axes(k, legacy, axes, &na);
    if (st == QR_OK)
        st = rz_read(k, p, legacy, need_roi, na, &g);
    if (st != QR_OK)
        return st;
    for (int d = 0; d < r; d++) {
        p->scale[d] = 1;
        p->out[d] = x->dims[d];
        p->roi0[d] = 0;
        p->roi1[d] = 1;
    }
    const char *policy = k->opset >= 18 && !legacy ? qr_attr_s(k->node, "keep_aspect_ratio_policy", "stretch")
                                                    : "stretch";
    int keep = strcmp(policy, "not_larger") == 0 ? 1 : strcmp(policy, "not_smaller") == 0 ? 2 : 0;
    if (!keep && strcmp(policy, "stretch") != 0)
        return QR_KERR(k, "unknown keep_aspect_ratio_policy '%s'", policy);
    if (!g.ns && rz_from_sizes(k, p, axes, na, g.sizes, keep) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < g.ns; i++) {
        int d = axes[i];
        double s = g.scales[i], o = s * (double)x->dims[d];
        if (!(s > 0) || !(o < (double)((int64_t)1 << 40)))
            return QR_KERR(k, "scale %g on axis %d is not usable", s, d);
        p->scale[d] = s;
        p->out[d] = (int64_t)o;
    }
    for (int d = 0; d < r; d++)
        if (p->out[d] > 0 && x->dims[d] == 0)
            return QR_KERR(k, "cannot resize the empty axis %d", d);
    for (int i = 0; i < g.nr / 2; i++) {
        p->roi0[axes[i]] = g.roi[i];
        p->roi1[axes[i]] = g.roi[na + i];
    }
    return QR_OK;
}

static qr_status rz_infer(qr_kctx *k, int legacy)
{
    const qr_tensor *x = k->in[0];
    rz_plan p;
    qr_status st = rz_make(k, &p, legacy, 0);
    if (st != QR_OK)
        return st;
    qr_tensor *y = k->out[0];
    y->dtype = x->dtype;
    qr_tensor_set_shape(y, x->ndim, p.out);
    return k->shapes_only ? qr_tensor_check_dims(y, k->err) : qr_tensor_check_shape(y, k->err);
}

/* Input coordinate of output index xo on axis d; *outside for tf_crop_and_resize
 * coordinates that fall outside the input (they take extrapolation_value). */
static double to_input(const rz_plan *p, int d, int64_t xo, int64_t in, int *outside)
{
    double s = p->scale[d], x = (double)xo, lo = (double)in;
    double lr = s * lo; /* the resized length, fractional when scales are given */
    *outside = 0;
    switch (p->ctm) {
    case C_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case C_HALF_PIXEL_SYMMETRIC: {
        double adjust = (double)p->out[d] / lr, center = lo / 2;
        return center * (1 - adjust) + (x + 0.5) / s - 0.5;
    }
    case C_PYTORCH_HALF_PIXEL: return lr > 1 ? (x + 0.5) / s - 0.5 : 0;
    case C_ALIGN_CORNERS: return lr == 1 ? 0 : x * (lo - 1) / (lr - 1);
    case C_ASYMMETRIC: return x / s;
    case C_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    default: {
        double r0 = p->roi0[d], r1 = p->roi1[d], v;
        if (lr == 1)
            v = (r1 - r0) * (lo - 1) / 2;
        else
            v = x * (r1 - r0) * (lo - 1) / (lr - 1);
        v += r0 * (lo - 1);
        *outside = v < 0 || v > lo - 1;
        return v;
    }
    }
}

static double cubic_kernel(double x, double a)
{
    x = fabs(x);
    if (x <= 1)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2)
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* Taps of one axis: for output index o, cnt[o] pairs (idx, w) at o * width;
 * cnt[o] < 0 marks a coordinate outside the input. */
typedef struct axis_taps {
    int width;
    int *cnt;
    int64_t *idx;
    double *w;
} axis_taps;

/* Nearest mode: the input index of position x, rounded as the plan says, clamped into [0, in). */
static int64_t nearest_index(const rz_plan *p, double x, double s, int64_t in)
{
    double fl = floor(x), frac = x - fl;
    int64_t i = (int64_t)fl;
    if (frac != 0) {
        int up;
        switch (p->nearest) {
        case N_ROUND_PREFER_FLOOR: up = frac > 0.5; break;
        case N_ROUND_PREFER_CEIL: up = frac >= 0.5; break;
        case N_FLOOR: up = 0; break;
        case N_CEIL: up = 1; break;
        default: up = s < 1; break;
        }
        i += up;
    }
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* The n interpolation weights around ratio (linear, cubic, or their antialiased forms), each
 * for input base + start + j; with exclude_outside those outside [0, in) are dropped and the
 * rest renormalized. */
static void interp_weights(const rz_plan *p, double s, double ratio, int64_t base, int start, int n, int64_t in,
                           double *c)
{
    if (!p->antialias && p->mode == M_LINEAR) {
        c[0] = 1 - ratio;
        c[1] = ratio;
    } else if (!p->antialias) {
        double a = p->cubic_a;
        c[0] = ((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1) - 4 * a;
        c[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
        c[2] = ((a + 2) * (1 - ratio) - (a + 3)) * (1 - ratio) * (1 - ratio) + 1;
        c[3] = ((a * ((1 - ratio) + 1) - 5 * a) * ((1 - ratio) + 1) + 8 * a) * ((1 - ratio) + 1) - 4 * a;
    } else {
        double sa = s < 1 ? s : 1, csum = 0;
        for (int j = 0; j < n; j++) {
            double arg = sa * ((double)(start + j) - ratio);
            c[j] = p->mode == M_LINEAR ? fmax(0, 1 - fabs(arg)) : cubic_kernel(arg, p->cubic_a);
            csum += c[j];
        }
        for (int j = 0; j < n; j++)
            c[j] /= csum;
    }
    if (p->exclude) {
        double sum = 0;
        for (int j = 0; j < n; j++) {
            int64_t i = base + start + j;
            if (i < 0 || i >= in)
                c[j] = 0;
            sum += c[j];
        }
        if (sum != 0)
            for (int j = 0; j < n; j++)
                c[j] /= sum;
    }
}

/* Output position o's taps: the nonzero weights and their clamped input indices. */
static void axis_taps_at(const rz_plan *p, int d, int64_t o, int64_t in, int start, axis_taps *t, double *c)
{
    int n = t->width, outside;
    double s = p->scale[d], x = to_input(p, d, o, in, &outside);
    int64_t *ti = t->idx + o * n;
    double *tw = t->w + o * n;
    if (outside) {
        t->cnt[o] = -1;
        return;
    }
    if (p->mode == M_NEAREST) {
        ti[0] = nearest_index(p, x, s, in);
        tw[0] = 1;
        t->cnt[o] = 1;
        return;
    }
    /* The reference takes the neighbours left of x: on an exact index the
     * base is x - 1 with ratio 1. */
    double fl = floor(x), ratio = x - fl;
    int64_t base = (int64_t)fl;
    if (ratio == 0) {
        base -= 1;
        ratio = 1;
    }
    interp_weights(p, s, ratio, base, start, n, in, c);
    int m = 0;
    for (int j = 0; j < n; j++) {
        if (c[j] == 0)
            continue;
        int64_t i = base + start + j;
        ti[m] = i < 0 ? 0 : i >= in ? in - 1 : i;
        tw[m++] = c[j];
    }
    t->cnt[o] = m;
}

static qr_status axis_build(qr_kctx *k, const rz_plan *p, int d, int64_t in, axis_taps *t)
{
    int64_t out = p->out[d];
    double s = p->scale[d];
    int start = 0, n = 1;
    if (p->mode != M_NEAREST) {
        double reach = p->mode == M_LINEAR ? 1 : 2; /* kernel radius */
        double sa = p->antialias && s < 1 ? s : 1;  /* antialias stretches the kernel by 1/scale */
        start = (int)fmax(floor(-reach / sa) + 1, -1e6);
        n = 2 - 2 * start;
    }
    if ((double)n * (double)(out ? out : 1) > (double)(1 << 26))
        return QR_KERR(k, "scale %g on axis %d needs too large an antialiasing filter", s, d);
    t->width = n;
    t->cnt = malloc(sizeof(int) * (size_t)(out ? out : 1));
    t->idx = malloc(sizeof(int64_t) * (size_t)(out ? out : 1) * (size_t)n);
    t->w = malloc(sizeof(double) * (size_t)(out ? out : 1) * (size_t)n);
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!t->cnt || !t->idx || !t->w || !c) {
        free(c);
        return QR_KERR(k, "out of memory");
    }
    for (int64_t o = 0; o < out; o++)
        axis_taps_at(p, d, o, in, start, t, c);
    free(c);
    return QR_OK;
}

/* Whether rz_rows gives the same values as the element loop below: f32 or 8-bit integers (a
 * quantized tensor), every position inside the input (no extrapolation), every lone tap of weight
 * 1 (then the weights multiply in the same order, and a lone tap's weight leaves them unchanged),
 * and few enough tap combinations on the outer axes for rz_rows' table. */
enum { RZ_COMBOS = 256 };
static int rz_rows_fit(const qr_tensor *x, const qr_tensor *y, const axis_taps *taps)
{
    int r = x->ndim, combos = 1;
    if ((x->dtype != QR_F32 && x->dtype != QR_U8 && x->dtype != QR_I8) || r < 1)
        return 0;
    for (int d = 0; d < r; d++) {
        const axis_taps *t = &taps[d];
        for (int64_t o = 0; o < y->dims[d]; o++)
            if (t->cnt[o] < 0 || (t->cnt[o] == 1 && t->w[o * t->width] != 1))
                return 0;
        if (d < r - 1 && (combos *= t->width) > RZ_COMBOS)
            return 0;
    }
    return 1;
}

/* Element i of src (f32, u8 or i8) as a double. */
static inline double rz_at(const void *src, qr_dtype dt, int64_t i)
{
    return dt == QR_F32 ? (double)((const float *)src)[i]
           : dt == QR_U8 ? (double)((const uint8_t *)src)[i] : (double)((const int8_t *)src)[i];
}

/* acc into element i of dst, as the element loop stores it (integers rounded half to even, as
 * QuantizeLinear). */
static inline void rz_put(void *dst, qr_dtype dt, int64_t i, double acc)
{
    if (dt == QR_F32)
        ((float *)dst)[i] = (float)acc;
    else
        qr_set_f64(dst, dt, i, nearbyint(acc));
}

/* The case rz_rows_fit admits, row by row along the last axis (the element loop's arithmetic and
 * order: the outer axes' tap combinations, the last axis' taps fastest, weights multiplied in axis
 * order, summed in double), without working out every element's outer taps again: on M-LSD's
 * bilinear upsampling the element loop was a third of quantize's time. */
static void rz_rows(const qr_tensor *x, qr_tensor *y, const axis_taps *taps, const int64_t *xs)
{
    int r = x->ndim, last = r - 1;
    qr_dtype dt = x->dtype;
    size_t es = qr_dtype_size(dt);
    const char *src = x->data;
    char *dst = y->data;
    const axis_taps *tl = &taps[last];
    int64_t ow = y->dims[last], rows = qr_tensor_numel(y) / ow, idx[QR_MAX_DIMS] = {0};
    int64_t coff[RZ_COMBOS];
    double cw[RZ_COMBOS];
    for (int64_t row = 0; row < rows; row++, dst += (size_t)ow * es) {
        int act[QR_MAX_DIMS], na = 0, j[QR_MAX_DIMS] = {0}, nc = 0;
        int64_t base = 0;
        for (int d = 0; d < last; d++) {
            const axis_taps *t = &taps[d];
            if (t->cnt[idx[d]] == 1)
                base += t->idx[idx[d] * t->width] * xs[d];
            else
                act[na++] = d;
        }
        for (;;) { /* the outer combinations, the last outer axis fastest */
            int64_t off = base;
            double w = 1;
            for (int a = 0; a < na; a++) {
                const axis_taps *t = &taps[act[a]];
                int64_t at = idx[act[a]] * t->width + j[a];
                off += t->idx[at] * xs[act[a]];
                w *= t->w[at];
            }
            coff[nc] = off, cw[nc++] = w;
            int a = na - 1;
            for (; a >= 0 && ++j[a] >= taps[act[a]].cnt[idx[act[a]]]; a--)
                j[a] = 0;
            if (a < 0)
                break;
        }
        for (int64_t o = 0; o < ow; o++) {
            const int64_t *li = tl->idx + o * tl->width;
            const double *lw = tl->w + o * tl->width;
            int cl = tl->cnt[o];
            if (na == 0 && cl == 1) {
                memcpy(dst + (size_t)o * es, src + (size_t)(base + li[0] * xs[last]) * es, es);
                continue;
            }
            double acc = 0;
            if (nc == 2 && cl == 2) { /* bilinear on the last two axes: the loops below unrolled */
                int64_t i0 = li[0] * xs[last], i1 = li[1] * xs[last];
                acc += cw[0] * lw[0] * rz_at(src, dt, coff[0] + i0);
                acc += cw[0] * lw[1] * rz_at(src, dt, coff[0] + i1);
                acc += cw[1] * lw[0] * rz_at(src, dt, coff[1] + i0);
                acc += cw[1] * lw[1] * rz_at(src, dt, coff[1] + i1);
            } else {
                for (int c = 0; c < nc; c++)
                    if (cl == 1)
                        acc += cw[c] * rz_at(src, dt, coff[c] + li[0] * xs[last]);
                    else
                        for (int k = 0; k < cl; k++)
                            acc += cw[c] * lw[k] * rz_at(src, dt, coff[c] + li[k] * xs[last]);
            }
            rz_put(dst, dt, o, acc);
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
}

static qr_status rz_run(qr_kctx *k, int legacy)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    rz_plan p;
    qr_status st = rz_make(k, &p, legacy, 1);
    if (st != QR_OK)
        return st;
    int r = x->ndim;
    int64_t n = qr_tensor_numel(y);
    if (n == 0)
        return QR_OK;
    if (r == 0) {
        memcpy(y->data, x->data, qr_dtype_size(x->dtype));
        return QR_OK;
    }
    axis_taps taps[QR_MAX_DIMS];
    memset(taps, 0, sizeof taps);
    for (int d = 0; d < r && st == QR_OK; d++)
        st = axis_build(k, &p, d, x->dims[d], &taps[d]);
    if (st != QR_OK)
        goto done;
    int64_t xs[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0};
    qr_tensor_strides(x, xs);
    if (rz_rows_fit(x, y, taps)) {
        rz_rows(x, y, taps, xs);
        goto done;
    }
    qr_dtype dt = x->dtype;
    size_t es = qr_dtype_size(dt);
    const char *src = x->data;
    char *dst = y->data;
    int f32 = dt == QR_F32;
    for (int64_t e = 0; e < n; e++) {
        /* Axes with one tap contribute a fixed offset and weight; the others are enumerated. */
        int act[QR_MAX_DIMS], na = 0, outside = 0;
        int64_t base = 0;
        double wbase = 1;
        for (int d = 0; d < r; d++) {
            const axis_taps *t = &taps[d];
            int c = t->cnt[idx[d]];
            if (c < 0) {
                outside = 1;
                break;
            }
            if (c == 1) {
                base += t->idx[idx[d] * t->width] * xs[d];
                wbase *= t->w[idx[d] * t->width];
            } else {
                act[na++] = d;
            }
        }
        if (outside) {
            qr_set_f64(dst, dt, e, p.extrap);
        } else if (p.mode == M_NEAREST || (na == 0 && wbase == 1)) {
            memcpy(dst + (size_t)e * es, src + (size_t)base * es, es);
        } else {
            int j[QR_MAX_DIMS] = {0};
            double acc = 0;
            for (;;) {
                int64_t off = base;
                double w = wbase;
                for (int a = 0; a < na; a++) {
                    const axis_taps *t = &taps[act[a]];
                    int64_t at = idx[act[a]] * t->width + j[a];
                    off += t->idx[at] * xs[act[a]];
                    w *= t->w[at];
                }
                acc += w * (f32 ? (double)((const float *)src)[off] : qr_get_f64(src, dt, off));
                int a = na - 1;
                for (; a >= 0; a--) {
                    if (++j[a] < taps[act[a]].cnt[idx[act[a]]])
                        break;
                    j[a] = 0;
                }
                if (a < 0)
                    break;
            }
            if (f32)
                ((float *)dst)[e] = (float)acc;
            else if (qr_dtype_is_int(dt)) /* integers (a quantized tensor): rounded half to even, as QuantizeLinear */
                qr_set_f64(dst, dt, e, nearbyint(acc));
            else
                qr_set_f64(dst, dt, e, acc);
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
done:
    for (int d = 0; d < r; d++) {
        free(taps[d].cnt);
        free(taps[d].idx);
        free(taps[d].w);
    }
    return st;
}

/* The element loop of rz_run turned around: each output's adjoint goes to every input its taps
 * read, times the tap's weight (the product over the axes, as the forward multiplies them). */
qr_status qr_resize_transpose_f32(qr_kctx *k, const float *dy, float *dx)
{
    const qr_tensor *x = k->in[0], *y = k->out[0];
    int legacy = !strcmp(k->node->op, "Upsample") || k->opset < 11;
    rz_plan p;
    qr_status st = rz_make(k, &p, legacy, 1);
    if (st != QR_OK)
        return st;
    int r = x->ndim;
    for (int d = 0; d < r; d++)
        if (p.out[d] != y->dims[d])
            return QR_KERR(k, "the output's axis %d is %lld, the resize gives %lld", d, (long long)y->dims[d],
                           (long long)p.out[d]);
    int64_t n = qr_tensor_numel(y);
    if (n == 0)
        return QR_OK;
    if (r == 0) {
        dx[0] += dy[0];
        return QR_OK;
    }
    axis_taps taps[QR_MAX_DIMS];
    memset(taps, 0, sizeof taps);
    for (int d = 0; d < r && st == QR_OK; d++)
        st = axis_build(k, &p, d, x->dims[d], &taps[d]);
    int64_t xs[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0};
    qr_tensor_strides(x, xs);
    for (int64_t e = 0; st == QR_OK && e < n; e++) {
        int outside = 0, j[QR_MAX_DIMS] = {0};
        for (int d = 0; d < r; d++)
            outside |= taps[d].cnt[idx[d]] < 0;
        for (int more = !outside; more;) {
            int64_t off = 0;
            double w = 1;
            for (int d = 0; d < r; d++) {
                int64_t at = idx[d] * taps[d].width + j[d];
                off += taps[d].idx[at] * xs[d];
                w *= taps[d].w[at];
            }
            dx[off] += (float)(w * dy[e]);
            int d = r - 1;
            for (; d >= 0 && ++j[d] >= taps[d].cnt[idx[d]]; d--)
                j[d] = 0;
            more = d >= 0;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
    for (int d = 0; d < r; d++) {
        free(taps[d].cnt);
        free(taps[d].idx);
        free(taps[d].w);
    }
    return st;
}

qr_status qr_resize_infer(qr_kctx *k)
{
    if (k->opset < 11 && k->n_in != 2)
        return QR_KERR(k, "Resize-10 takes 2 inputs (X, scales), got %d", k->n_in);
    return rz_infer(k, k->opset < 11);
}

qr_status qr_resize_run(qr_kctx *k)
{
    return rz_run(k, k->opset < 11);
}

qr_status qr_upsample_infer(qr_kctx *k)
{
    return rz_infer(k, 1);
}

qr_status qr_upsample_run(qr_kctx *k)
{
    return rz_run(k, 1);
}
