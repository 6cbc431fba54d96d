/* Miscellaneous ops that fit no other table:
 *   shape and layout: Size, Tile, DepthToSpace, SpaceToDepth, Trilu, EyeLike;
 *   indexing: GatherElements, ScatterElements (and the older Scatter),
 *             GatherND, ScatterND, OneHot, NonZero, Compress;
 *   arithmetic along an axis: CumSum, Hardmax, TopK, LRN,
 *             MeanVarianceNormalization.
 * Kernels that only move elements copy raw bytes of the element size and so
 * accept every dtype; the others read and write through ld/st (cheap for
 * f32/f64, qr_get_f64 for the rare types) or, for integers, through 64-bit
 * values that wrap like the narrower types do.
 * Ops whose output shape depends on input data (Tile's repeats, TopK's k,
 * OneHot's depth, NonZero, Compress) return QR_NEED_DATA from infer until
 * that data is known. Index values are checked at run time: an index out of
 * range is an error, never an out-of-bounds access. */
#include "ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

/* One element copy; a switch on the size so the common sizes avoid a memcpy call. */
static inline void cpy(void *dst, const void *src, size_t es)
{
    switch (es) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

/* memcpy that tolerates the NULL data of empty tensors. */
static void copy_bytes(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
}

/* An empty input name leaves a slot NULL even where the op requires it. */
static qr_status need_inputs(qr_kctx *k, int n)
{
    for (int i = 0; i < n; i++)
        if (i >= k->n_in || !k->in[i])
            return QR_KERR(k, "input %d is required", i);
    return QR_OK;
}

/* Whether t's values are not known yet (an empty tensor has nothing to know). */
static int no_data(const qr_tensor *t)
{
    return !t->data && qr_tensor_numel(t) > 0;
}

enum { T_FLOAT = 1, T_INT = 2, T_BOOL = 4, T_ANY = 7 };

/* Refuses a dtype outside the mask (strings and undefined types always). */
static qr_status need_type(qr_kctx *k, const qr_tensor *t, int mask, const char *what)
{
    qr_dtype d = t->dtype;
    int ok = (qr_dtype_is_float(d) && (mask & T_FLOAT)) || (qr_dtype_is_int(d) && (mask & T_INT)) ||
             (d == QR_BOOL && (mask & T_BOOL));
    if (!ok || d == QR_STRING || d == QR_UNDEF)
        return QR_KERR(k, "%s: type %s is not supported", what, qr_dtype_name(d));
    return QR_OK;
}

static qr_status need_index_type(qr_kctx *k, const qr_tensor *t, const char *what)
{
    if (t->dtype != QR_I32 && t->dtype != QR_I64)
        return QR_KERR(k, "%s must be int32 or int64, not %s", what, qr_dtype_name(t->dtype));
    return QR_OK;
}

/* a * b for a dimension; products past the largest tensor are refused, which
 * also rules out int64 overflow. */
static qr_status dim_mul(qr_kctx *k, int64_t a, int64_t b, int64_t *r)
{
    if (a < 0 || b < 0)
        return QR_KERR(k, "negative dimension or factor (%lld x %lld)", (long long)a, (long long)b);
    if (a && b > QR_MAX_TENSOR_BYTES / a)
        return QR_KERR(k, "dimension %lld x %lld is too large", (long long)a, (long long)b);
    *r = a * b;
    return QR_OK;
}

/* The single value of a scalar or one-element 1-D tensor (integer, or any
 * numeric type cast to int64 when allow_float). QR_NEED_DATA when unknown. */
static qr_status one_int(qr_kctx *k, const qr_tensor *t, const char *what, int allow_float, int64_t *v)
{
    if (need_type(k, t, allow_float ? T_FLOAT | T_INT : T_INT, what) != QR_OK)
        return QR_ERR;
    if (t->ndim > 1 || qr_tensor_numel(t) != 1)
        return QR_KERR(k, "%s must hold exactly one value", what);
    if (!t->data)
        return QR_NEED_DATA;
    *v = qr_get_i64(t->data, t->dtype, 0);
    return QR_OK;
}

/* Normalizes index v into [0, n); QR_ERR when outside [-n, n). */
static qr_status norm_index(qr_kctx *k, int64_t v, int64_t n, int64_t *out)
{
    if (v < -n || v >= n)
        return QR_KERR(k, "index %lld is out of range for a dimension of size %lld", (long long)v, (long long)n);
    *out = v < 0 ? v + n : v;
    return QR_OK;
}

/* ---- Size --------------------------------------------------------------- */

static qr_status size_infer(qr_kctx *k)
{
    if (need_inputs(k, 1) != QR_OK)
        return QR_ERR;
    return qr_set_out(k, 0, QR_I64, 0, NULL);
}

/* Only the input's shape is read: the executor runs this before the input's data exists. */
static qr_status size_run(qr_kctx *k)
{
    *(int64_t *)k->out[0]->data = qr_tensor_numel(k->in[0]);
    return QR_OK;
}

/* ---- Tile --------------------------------------------------------------- */

static qr_status tile_infer(qr_kctx *k)
{
    if (need_inputs(k, 2) != QR_OK || need_type(k, k->in[0], T_ANY, "input") != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *r = k->in[1];
    if (need_type(k, r, T_INT, "repeats") != QR_OK)
        return QR_ERR;
    if (r->ndim != 1 || r->dims[0] != x->ndim)
        return QR_KERR(k, "repeats must be 1-D with one value per input dimension (%d)", x->ndim);
    if (no_data(r))
        return QR_NEED_DATA;
    int64_t dims[QR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        int64_t rep = qr_get_i64(r->data, r->dtype, d);
        if (rep < 0)
            return QR_KERR(k, "repeats[%d] is negative (%lld)", d, (long long)rep);
        if (dim_mul(k, x->dims[d], rep, &dims[d]) != QR_OK)
            return QR_ERR;
    }
    return qr_set_out(k, 0, x->dtype, x->ndim, dims);
}

/* Copies whole input rows: each output row is one input row repeated along
 * the last axis, chosen by the output row's index modulo the input dims. */
static qr_status tile_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    size_t es = qr_dtype_size(x->dtype);
    int r = x->ndim;
    int64_t ny = qr_tensor_numel(y);
    if (ny == 0)
        return QR_OK;
    if (r == 0) {
        cpy(y->data, x->data, es);
        return QR_OK;
    }
    int64_t xs[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0};
    qr_tensor_strides(x, xs);
    int64_t row = x->dims[r - 1], rep = y->dims[r - 1] / row, nrows = ny / y->dims[r - 1];
    size_t row_bytes = (size_t)row * es;
    char *dst = y->data;
    for (int64_t i = 0; i < nrows; i++) {
        int64_t src = 0;
        for (int d = 0; d < r - 1; d++)
            src += (idx[d] % x->dims[d]) * xs[d];
        for (int64_t t = 0; t < rep; t++, dst += row_bytes)
            memcpy(dst, (const char *)x->data + (size_t)src * es, row_bytes);
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return QR_OK;
}

/* ---- DepthToSpace, SpaceToDepth ----------------------------------------- */

/* The NCHW input and the block size, checked. */
static qr_status block_args(qr_kctx *k, int64_t *b)
{
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_ANY, "input") != QR_OK)
        return QR_ERR;
    if (k->in[0]->ndim != 4)
        return QR_KERR(k, "input must be 4-D (NCHW), not rank %d", k->in[0]->ndim);
    if (!qr_node_attr(k->node, "blocksize"))
        return QR_KERR(k, "attribute 'blocksize' is required");
    *b = qr_attr_i(k->node, "blocksize", 0);
    if (*b <= 0)
        return QR_KERR(k, "blocksize must be positive, not %lld", (long long)*b);
    return QR_OK;
}

/* DCR (the default) splits channels as [b, b, C'], CRD as [C', b, b]. */
static qr_status d2s_mode(qr_kctx *k, int *crd)
{
    const char *m = qr_attr_s(k->node, "mode", "DCR");
    if (strcmp(m, "DCR") && strcmp(m, "CRD"))
        return QR_KERR(k, "mode '%s' is not DCR or CRD", m);
    *crd = strcmp(m, "CRD") == 0;
    return QR_OK;
}

static qr_status d2s_infer(qr_kctx *k)
{
    int64_t b = 1, bb = 1, dims[4];
    int crd = 0;
    if (block_args(k, &b) != QR_OK || d2s_mode(k, &crd) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (dim_mul(k, b, b, &bb) != QR_OK)
        return QR_ERR;
    if (x->dims[1] % bb)
        return QR_KERR(k, "channels (%lld) are not a multiple of blocksize^2 (%lld)", (long long)x->dims[1],
                       (long long)bb);
    dims[0] = x->dims[0];
    dims[1] = x->dims[1] / bb;
    if (dim_mul(k, x->dims[2], b, &dims[2]) != QR_OK || dim_mul(k, x->dims[3], b, &dims[3]) != QR_OK)
        return QR_ERR;
    return qr_set_out(k, 0, x->dtype, 4, dims);
}

/* y[n, c, h*b+i, w*b+j] = x[n, src channel, h, w], written in y's order. */
static qr_status d2s_run(qr_kctx *k)
{
    int64_t b = 1;
    int crd = 0;
    if (block_args(k, &b) != QR_OK || d2s_mode(k, &crd) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    size_t es = qr_dtype_size(x->dtype);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], C2 = k->out[0]->dims[1];
    const char *src = x->data;
    char *dst = k->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C2; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < b; i++)
                    for (int64_t w = 0; w < W; w++)
                        for (int64_t j = 0; j < b; j++, dst += es) {
                            int64_t sc = crd ? (c * b + i) * b + j : (i * b + j) * C2 + c;
                            cpy(dst, src + (size_t)(((n * C + sc) * H + h) * W + w) * es, es);
                        }
    return QR_OK;
}

static qr_status s2d_infer(qr_kctx *k)
{
    int64_t b = 1, bb = 1, dims[4];
    if (block_args(k, &b) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (x->dims[2] % b || x->dims[3] % b)
        return QR_KERR(k, "height and width (%lld, %lld) are not multiples of blocksize %lld", (long long)x->dims[2],
                       (long long)x->dims[3], (long long)b);
    if (dim_mul(k, b, b, &bb) != QR_OK || dim_mul(k, x->dims[1], bb, &dims[1]) != QR_OK)
        return QR_ERR;
    dims[0] = x->dims[0];
    dims[2] = x->dims[2] / b;
    dims[3] = x->dims[3] / b;
    return qr_set_out(k, 0, x->dtype, 4, dims);
}

/* y[n, (i*b + j)*C + c, h, w] = x[n, c, h*b+i, w*b+j], written in y's order. */
static qr_status s2d_run(qr_kctx *k)
{
    int64_t b = 1;
    if (block_args(k, &b) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    size_t es = qr_dtype_size(x->dtype);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], H2 = H / b, W2 = W / b;
    const char *src = x->data;
    char *dst = k->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < b; i++)
            for (int64_t j = 0; j < b; j++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t h = 0; h < H2; h++)
                        for (int64_t w = 0; w < W2; w++, dst += es)
                            cpy(dst, src + (size_t)(((n * C + c) * H + h * b + i) * W + w * b + j) * es, es);
    return QR_OK;
}

/* ---- reductions of the scatter ops -------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static qr_status reduction_of(qr_kctx *k, int *red)
{
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const char *s = qr_attr_s(k->node, "reduction", "none");
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *red = i;
            return QR_OK;
        }
    return QR_KERR(k, "reduction '%s' is not none, add, mul, max or min", s);
}

/* dst[di] = dst[di] (red) src[si]. Floats combine in double, integers in 64
 * bits with wrap-around (u64 compares unsigned); bool add/mul act as or/and. */
static void combine(void *dst, int64_t di, const void *src, int64_t si, qr_dtype t, size_t es, int red)
{
    if (red == RED_NONE) {
        cpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
    } else if (qr_dtype_is_float(t)) {
        double a = qr_ld(dst, t, di), b = qr_ld(src, t, si);
        double r = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (b > a ? b : a) : (b < a ? b : a);
        qr_st(dst, t, di, r);
    } else {
        int64_t a = qr_get_i64(dst, t, di), b = qr_get_i64(src, t, si), r;
        int less = t == QR_U64 ? (uint64_t)b < (uint64_t)a : b < a;
        switch (red) {
        case RED_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case RED_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case RED_MAX: r = less || a == b ? a : b; break;
        default: r = less ? b : a; break;
        }
        qr_set_i64(dst, t, di, r);
    }
}

/* ---- GatherElements, ScatterElements ------------------------------------ */

/* Checks data/indices (and updates when given) and normalizes the axis:
 * same rank everywhere, indices no larger than data off the axis. */
static qr_status elements_args(qr_kctx *k, const qr_tensor *upd, int *axis)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    if (need_type(k, x, T_ANY, "data") != QR_OK || need_index_type(k, idx, "indices") != QR_OK)
        return QR_ERR;
    if (x->ndim < 1)
        return QR_KERR(k, "data must have rank >= 1");
    if (idx->ndim != x->ndim)
        return QR_KERR(k, "indices have rank %d, data rank %d: they must be equal", idx->ndim, x->ndim);
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, axis) != QR_OK)
        return QR_ERR;
    for (int d = 0; d < x->ndim; d++)
        if (d != *axis && idx->dims[d] > x->dims[d])
            return QR_KERR(k, "indices dimension %d (%lld) is larger than data's (%lld)", d, (long long)idx->dims[d],
                           (long long)x->dims[d]);
    if (upd && (upd->dtype != x->dtype || !qr_tensor_same_shape(upd, idx)))
        return QR_KERR(k, "updates must have the data's type and the indices' shape");
    return QR_OK;
}

/* An iterator over the indices' shape whose offset is the data offset of the
 * same position with the axis coordinate left out (added per index). */
static void elements_iter(qr_iter *it, const qr_tensor *idx, const qr_tensor *x, int axis, int64_t *xs)
{
    qr_tensor_strides(x, xs);
    qr_iter_init(it, idx, 1);
    for (int d = 0; d < x->ndim; d++)
        it->stride[0][d] = d == axis ? 0 : xs[d];
}

static qr_status gather_elements_infer(qr_kctx *k)
{
    int axis = 0;
    if (need_inputs(k, 2) != QR_OK || elements_args(k, NULL, &axis) != QR_OK)
        return QR_ERR;
    return qr_set_out(k, 0, k->in[0]->dtype, k->in[1]->ndim, k->in[1]->dims);
}

static qr_status gather_elements_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    int axis = 0;
    if (elements_args(k, NULL, &axis) != QR_OK)
        return QR_ERR;
    size_t es = qr_dtype_size(x->dtype);
    int64_t xs[QR_MAX_DIMS], n = x->dims[axis], ni = qr_tensor_numel(idx);
    qr_iter it;
    elements_iter(&it, idx, x, axis, xs);
    char *dst = k->out[0]->data;
    for (int64_t i = 0; i < ni; i++, qr_iter_next(&it)) {
        int64_t v = 0;
        if (norm_index(k, qr_get_i64(idx->data, idx->dtype, i), n, &v) != QR_OK)
            return QR_ERR;
        cpy(dst + (size_t)i * es, (const char *)x->data + (size_t)(it.off[0] + v * xs[axis]) * es, es);
    }
    return QR_OK;
}

static qr_status scatter_elements_infer(qr_kctx *k)
{
    int axis = 0, red = 0;
    if (need_inputs(k, 3) != QR_OK || elements_args(k, k->in[2], &axis) != QR_OK || reduction_of(k, &red) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* The output starts as a copy of data; updates land in indices order, so with
 * duplicate indices and no reduction the last one wins. */
static qr_status scatter_elements_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1], *upd = k->in[2];
    qr_tensor *y = k->out[0];
    int axis = 0, red = 0;
    if (elements_args(k, upd, &axis) != QR_OK || reduction_of(k, &red) != QR_OK)
        return QR_ERR;
    size_t es = qr_dtype_size(x->dtype);
    int64_t xs[QR_MAX_DIMS], n = x->dims[axis], ni = qr_tensor_numel(idx);
    copy_bytes(y->data, x->data, qr_tensor_nbytes(x));
    qr_iter it;
    elements_iter(&it, idx, x, axis, xs);
    for (int64_t i = 0; i < ni; i++, qr_iter_next(&it)) {
        int64_t v = 0;
        if (norm_index(k, qr_get_i64(idx->data, idx->dtype, i), n, &v) != QR_OK)
            return QR_ERR;
        combine(y->data, it.off[0] + v * xs[axis], upd->data, i, x->dtype, es, red);
    }
    return QR_OK;
}

/* ---- GatherND, ScatterND ------------------------------------------------ */

/* Index tuples of m values address slices of data: the tuple count, the
 * slice size in elements, and the batch layout (GatherND's batch_dims). */
typedef struct nd_layout {
    int b, m;           /* batch dims, tuple length */
    int64_t batches;    /* product of the batch dims */
    int64_t tuples;     /* tuples per batch */
    int64_t slice;      /* elements per addressed slice */
    int64_t batch_size; /* data elements per batch */
} nd_layout;

static qr_status nd_layout_of(qr_kctx *k, int b, nd_layout *l)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    if (need_type(k, x, T_ANY, "data") != QR_OK || need_index_type(k, idx, "indices") != QR_OK)
        return QR_ERR;
    int r = x->ndim, q = idx->ndim;
    if (r < 1 || q < 1)
        return QR_KERR(k, "data and indices must have rank >= 1 (got %d and %d)", r, q);
    if (b < 0 || b >= (q < r ? q : r))
        return QR_KERR(k, "batch_dims %d must be below the ranks of data (%d) and indices (%d)", b, r, q);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != idx->dims[d])
            return QR_KERR(k, "batch dimension %d differs: %lld in data, %lld in indices", d, (long long)x->dims[d],
                           (long long)idx->dims[d]);
    int64_t m = idx->dims[q - 1];
    if (m < 0 || m > r - b)
        return QR_KERR(k, "index tuples have %lld values, more than the %d dimensions they index", (long long)m, r - b);
    l->b = b;
    l->m = (int)m;
    l->batches = qr_dims_prod(x->dims, 0, b);
    l->tuples = qr_dims_prod(idx->dims, b, q - 1);
    l->slice = qr_dims_prod(x->dims, b + l->m, r);
    l->batch_size = qr_dims_prod(x->dims, b, r);
    return QR_OK;
}

/* Element offset within its batch of the slice that tuple t (of batch bi) addresses. */
static qr_status nd_offset(qr_kctx *k, const nd_layout *l, int64_t bi, int64_t t, int64_t *off)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    int64_t base = (bi * l->tuples + t) * l->m, o = 0;
    for (int j = 0; j < l->m; j++) {
        int64_t v = 0;
        if (norm_index(k, qr_get_i64(idx->data, idx->dtype, base + j), x->dims[l->b + j], &v) != QR_OK)
            return QR_ERR;
        o = o * x->dims[l->b + j] + v;
    }
    *off = o * l->slice;
    return QR_OK;
}

static qr_status gathernd_batch_dims(qr_kctx *k, int *b)
{
    int64_t v = qr_attr_i(k->node, "batch_dims", 0);
    if (v < 0 || v > QR_MAX_DIMS)
        return QR_KERR(k, "batch_dims %lld is out of range", (long long)v);
    *b = (int)v;
    return QR_OK;
}

static qr_status gathernd_infer(qr_kctx *k)
{
    nd_layout l;
    int b = 0;
    if (need_inputs(k, 2) != QR_OK || gathernd_batch_dims(k, &b) != QR_OK || nd_layout_of(k, b, &l) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    int64_t dims[2 * QR_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < idx->ndim - 1; d++)
        dims[n++] = idx->dims[d];
    for (int d = b + l.m; d < x->ndim; d++)
        dims[n++] = x->dims[d];
    return qr_set_out(k, 0, x->dtype, n, dims);
}

static qr_status gathernd_run(qr_kctx *k)
{
    nd_layout l;
    int b = 0;
    if (gathernd_batch_dims(k, &b) != QR_OK || nd_layout_of(k, b, &l) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    size_t es = qr_dtype_size(x->dtype), slice_bytes = (size_t)l.slice * es;
    char *dst = k->out[0]->data;
    for (int64_t bi = 0; bi < l.batches; bi++)
        for (int64_t t = 0; t < l.tuples; t++, dst += slice_bytes) {
            int64_t off = 0;
            if (nd_offset(k, &l, bi, t, &off) != QR_OK)
                return QR_ERR;
            copy_bytes(dst, (const char *)x->data + (size_t)(bi * l.batch_size + off) * es, slice_bytes);
        }
    return QR_OK;
}

/* updates must be shaped indices.shape[:-1] + data.shape[m:]. */
static qr_status scatternd_args(qr_kctx *k, nd_layout *l, int *red)
{
    if (nd_layout_of(k, 0, l) != QR_OK || reduction_of(k, red) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *idx = k->in[1], *upd = k->in[2];
    qr_tensor want = {.dtype = x->dtype};
    int n = 0;
    for (int d = 0; d < idx->ndim - 1 && n < QR_MAX_DIMS; d++)
        want.dims[n++] = idx->dims[d];
    for (int d = l->m; d < x->ndim && n < QR_MAX_DIMS; d++)
        want.dims[n++] = x->dims[d];
    want.ndim = n;
    if (idx->ndim - 1 + x->ndim - l->m != n || upd->dtype != x->dtype || !qr_tensor_same_shape(upd, &want)) {
        char a[128], b[128];
        return QR_KERR(k, "updates are %s, expected %s", qr_tensor_type_str(upd, a, sizeof a),
                       qr_tensor_type_str(&want, b, sizeof b));
    }
    return QR_OK;
}

static qr_status scatternd_infer(qr_kctx *k)
{
    nd_layout l;
    int red = 0;
    if (need_inputs(k, 3) != QR_OK || scatternd_args(k, &l, &red) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

static qr_status scatternd_run(qr_kctx *k)
{
    nd_layout l;
    int red = 0;
    if (scatternd_args(k, &l, &red) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *upd = k->in[2];
    qr_tensor *y = k->out[0];
    size_t es = qr_dtype_size(x->dtype);
    copy_bytes(y->data, x->data, qr_tensor_nbytes(x));
    for (int64_t t = 0; t < l.tuples; t++) {
        int64_t off = 0;
        if (nd_offset(k, &l, 0, t, &off) != QR_OK)
            return QR_ERR;
        for (int64_t e = 0; e < l.slice; e++)
            combine(y->data, off + e, upd->data, t * l.slice + e, x->dtype, es, red);
    }
    return QR_OK;
}

/* ---- CumSum ------------------------------------------------------------- */

static qr_status cumsum_axis(qr_kctx *k, int *axis)
{
    int64_t a = 0;
    qr_status st = one_int(k, k->in[1], "axis", 0, &a);
    if (st != QR_OK)
        return st;
    return qr_norm_axis(k, a, k->in[0]->ndim, axis);
}

static qr_status cumsum_infer(qr_kctx *k)
{
    if (need_inputs(k, 2) != QR_OK || need_type(k, k->in[0], T_FLOAT | T_INT, "input") != QR_OK)
        return QR_ERR;
    if (k->in[0]->ndim < 1)
        return QR_KERR(k, "input must have rank >= 1");
    int axis = 0;
    qr_status st = cumsum_axis(k, &axis); /* checked now when known; the shape does not depend on it */
    if (st == QR_ERR)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* One step of the scan over `inner` contiguous elements: y[yi..] = y[yp..]
 * (when has_prev) + x[xq..] (when has_x), in the output type. */
static void cumsum_step(const qr_tensor *x, qr_tensor *y, int64_t yi, int64_t yp, int64_t xq, int64_t inner,
                        int has_prev, int has_x)
{
    qr_dtype t = x->dtype;
    if (t == QR_F32) {
        float *yy = y->data;
        const float *xx = x->data;
        for (int64_t e = 0; e < inner; e++)
            yy[yi + e] = (has_prev ? yy[yp + e] : 0.0f) + (has_x ? xx[xq + e] : 0.0f);
    } else if (qr_dtype_is_float(t)) {
        for (int64_t e = 0; e < inner; e++)
            qr_st(y->data, t, yi + e, (has_prev ? qr_ld(y->data, t, yp + e) : 0) + (has_x ? qr_ld(x->data, t, xq + e) : 0));
    } else {
        for (int64_t e = 0; e < inner; e++) {
            uint64_t a = has_prev ? (uint64_t)qr_get_i64(y->data, t, yp + e) : 0;
            uint64_t b = has_x ? (uint64_t)qr_get_i64(x->data, t, xq + e) : 0;
            qr_set_i64(y->data, t, yi + e, (int64_t)(a + b)); /* unsigned: wraps */
        }
    }
}

/* Runs along the axis in the output type, as numpy and onnxruntime do:
 * y[i] = y[i-1] + x[i] (inclusive) or x[i-1] (exclusive); "previous" is
 * i+1 when reversed. */
static qr_status cumsum_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int axis = 0;
    if (cumsum_axis(k, &axis) != QR_OK)
        return QR_ERR;
    int excl = qr_attr_i(k->node, "exclusive", 0) != 0, rev = qr_attr_i(k->node, "reverse", 0) != 0;
    int64_t outer = qr_dims_prod(x->dims, 0, axis), n = x->dims[axis], inner = qr_dims_prod(x->dims, axis + 1, x->ndim);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < n; s++) {
            /* i: this step's position along the axis; p: the previous step's; x is read at q. */
            int64_t i = rev ? n - 1 - s : s, p = rev ? i + 1 : i - 1, q = excl ? p : i;
            cumsum_step(x, y, (o * n + i) * inner, (o * n + p) * inner, (o * n + q) * inner, inner, s > 0,
                        !excl || s > 0);
        }
    return QR_OK;
}

/* ---- Hardmax ------------------------------------------------------------ */

/* Groups of `n` elements spaced `inner` apart, outer*inner of them. Before
 * opset 13 the input is coerced to 2-D at axis (default 1), so a group is the
 * whole flattened tail; from 13 it is one axis (default -1). */
typedef struct axis_layout { int64_t outer, n, inner; } axis_layout;

static qr_status hardmax_layout(qr_kctx *k, axis_layout *l)
{
    const qr_tensor *x = k->in[0];
    int new_rule = k->opset >= 13, axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", new_rule ? -1 : 1), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    if (x->ndim == 0) {
        *l = (axis_layout){1, 1, 1};
        return QR_OK;
    }
    l->outer = qr_dims_prod(x->dims, 0, axis);
    l->n = new_rule ? x->dims[axis] : qr_dims_prod(x->dims, axis, x->ndim);
    l->inner = new_rule ? qr_dims_prod(x->dims, axis + 1, x->ndim) : 1;
    return QR_OK;
}

static qr_status hardmax_infer(qr_kctx *k)
{
    axis_layout l;
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_FLOAT, "input") != QR_OK ||
        hardmax_layout(k, &l) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* 1 at the first maximum of each group (a NaN counts as the maximum, as in numpy's argmax), 0 elsewhere. */
static qr_status hardmax_run(qr_kctx *k)
{
    axis_layout l;
    if (hardmax_layout(k, &l) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    qr_dtype t = x->dtype;
    for (int64_t o = 0; o < l.outer; o++)
        for (int64_t in = 0; in < l.inner; in++) {
            int64_t base = o * l.n * l.inner + in, best = 0;
            double bv = l.n ? qr_ld(x->data, t, base) : 0;
            for (int64_t i = 1; i < l.n && !isnan(bv); i++) {
                double v = qr_ld(x->data, t, base + i * l.inner);
                if (v > bv || isnan(v)) {
                    bv = v;
                    best = i;
                }
            }
            for (int64_t i = 0; i < l.n; i++)
                qr_st(y->data, t, base + i * l.inner, i == best);
        }
    return QR_OK;
}

/* ---- TopK --------------------------------------------------------------- */

/* k is an attribute before opset 10 and input 1 from then on. */
static qr_status topk_args(qr_kctx *k, int *axis, int64_t *kk)
{
    const qr_tensor *x = k->in[0];
    if (need_type(k, x, T_FLOAT | T_INT, "input") != QR_OK)
        return QR_ERR;
    if (x->ndim < 1)
        return QR_KERR(k, "input must have rank >= 1");
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", -1), x->ndim, axis) != QR_OK)
        return QR_ERR;
    if (k->opset < 10) {
        if (!qr_node_attr(k->node, "k"))
            return QR_KERR(k, "attribute 'k' is required");
        *kk = qr_attr_i(k->node, "k", 0);
    } else {
        if (k->n_in < 2 || !k->in[1])
            return QR_KERR(k, "input 1 (K) is required");
        qr_status st = one_int(k, k->in[1], "K", 0, kk);
        if (st != QR_OK)
            return st;
    }
    if (*kk < 0 || *kk > x->dims[*axis])
        return QR_KERR(k, "k = %lld is outside [0, %lld], the size of axis %d", (long long)*kk,
                       (long long)x->dims[*axis], *axis);
    return QR_OK;
}

static qr_status topk_infer(qr_kctx *k)
{
    int axis = 0;
    int64_t kk = 0;
    if (need_inputs(k, 1) != QR_OK)
        return QR_ERR;
    qr_status st = topk_args(k, &axis, &kk);
    if (st != QR_OK)
        return st;
    const qr_tensor *x = k->in[0];
    int64_t dims[QR_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = kk;
    if (qr_set_out(k, 0, x->dtype, x->ndim, dims) != QR_OK)
        return QR_ERR;
    return k->n_out > 1 ? qr_set_out(k, 1, QR_I64, x->ndim, dims) : QR_OK;
}

/* Sort entries: the value as a double (floats) or an ordered int64 key
 * (integers, exact beyond 2^53), and the position along the axis. */
typedef struct topk_ent {
    double f;
    int64_t q, i;
} topk_ent;

/* Every comparator breaks ties by the lower index, as ONNX asks; NaN sorts
 * above every number (first when largest, last when smallest). */
static int by_index(const topk_ent *a, const topk_ent *b) { return (a->i > b->i) - (a->i < b->i); }

static int cmp_f_desc(const void *pa, const void *pb)
{
    const topk_ent *a = pa, *b = pb;
    int na = isnan(a->f), nb = isnan(b->f);
    if (na != nb)
        return na ? -1 : 1;
    if (!na && a->f != b->f)
        return a->f > b->f ? -1 : 1;
    return by_index(a, b);
}

static int cmp_f_asc(const void *pa, const void *pb)
{
    const topk_ent *a = pa, *b = pb;
    int na = isnan(a->f), nb = isnan(b->f);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && a->f != b->f)
        return a->f < b->f ? -1 : 1;
    return by_index(a, b);
}

static int cmp_q_desc(const void *pa, const void *pb)
{
    const topk_ent *a = pa, *b = pb;
    return a->q != b->q ? (a->q > b->q ? -1 : 1) : by_index(a, b);
}

static int cmp_q_asc(const void *pa, const void *pb)
{
    const topk_ent *a = pa, *b = pb;
    return a->q != b->q ? (a->q < b->q ? -1 : 1) : by_index(a, b);
}

/* Each group is sorted whole, so `sorted` = 0 (order unspecified) gets sorted output too. */
static qr_status topk_run(qr_kctx *k)
{
    int axis = 0;
    int64_t kk = 0;
    if (topk_args(k, &axis, &kk) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *vals = k->out[0], *inds = k->n_out > 1 ? k->out[1] : NULL;
    qr_dtype t = x->dtype;
    size_t es = qr_dtype_size(t);
    int64_t outer = qr_dims_prod(x->dims, 0, axis), n = x->dims[axis], inner = qr_dims_prod(x->dims, axis + 1, x->ndim);
    if (kk == 0 || outer * inner == 0)
        return QR_OK;
    int largest = qr_attr_i(k->node, "largest", 1) != 0, is_float = qr_dtype_is_float(t);
    int (*cmp)(const void *, const void *) =
        is_float ? (largest ? cmp_f_desc : cmp_f_asc) : (largest ? cmp_q_desc : cmp_q_asc);
    topk_ent *e = malloc(sizeof *e * (size_t)n);
    if (!e)
        return QR_KERR(k, "out of memory");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in, obase = o * kk * inner + in;
            for (int64_t i = 0; i < n; i++) {
                int64_t at = base + i * inner;
                e[i].i = i;
                if (is_float) {
                    e[i].f = qr_ld(x->data, t, at);
                } else {
                    /* u64 flipped at the sign bit: its unsigned order becomes the signed order of the key. */
                    int64_t v = qr_get_i64(x->data, t, at);
                    e[i].q = t == QR_U64 ? (int64_t)((uint64_t)v ^ 0x8000000000000000u) : v;
                }
            }
            qsort(e, (size_t)n, sizeof *e, cmp);
            for (int64_t j = 0; j < kk; j++) {
                int64_t dst = obase + j * inner;
                cpy((char *)vals->data + (size_t)dst * es, (const char *)x->data + (size_t)(base + e[j].i * inner) * es,
                    es);
                if (inds)
                    ((int64_t *)inds->data)[dst] = e[j].i;
            }
        }
    free(e);
    return QR_OK;
}

/* ---- Trilu -------------------------------------------------------------- */

static qr_status trilu_k(qr_kctx *k, int64_t *kk)
{
    *kk = 0;
    if (k->n_in < 2 || !k->in[1])
        return QR_OK;
    return one_int(k, k->in[1], "k", 0, kk);
}

static qr_status trilu_infer(qr_kctx *k)
{
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_ANY, "input") != QR_OK)
        return QR_ERR;
    if (k->in[0]->ndim < 2)
        return QR_KERR(k, "input must have rank >= 2, not %d", k->in[0]->ndim);
    int64_t kk = 0;
    if (trilu_k(k, &kk) == QR_ERR) /* k does not change the shape: unknown is fine */
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* Keeps j - i >= k (upper) or j - i <= k (lower) of each matrix; the rest
 * stays zero. k is clamped first so that i + k cannot overflow. */
static qr_status trilu_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t kk = 0;
    if (trilu_k(k, &kk) != QR_OK)
        return QR_ERR;
    int upper = qr_attr_i(k->node, "upper", 1) != 0;
    int r = x->ndim;
    int64_t rows = x->dims[r - 2], cols = x->dims[r - 1], mats = qr_dims_prod(x->dims, 0, r - 2);
    int64_t lim = rows + cols;
    kk = kk < -lim ? -lim : kk > lim ? lim : kk;
    size_t es = qr_dtype_size(x->dtype);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            int64_t from = upper ? i + kk : 0, to = upper ? cols : i + kk + 1;
            from = from < 0 ? 0 : from;
            to = to > cols ? cols : to;
            if (from >= to)
                continue;
            size_t off = (size_t)((m * rows + i) * cols + from) * es;
            memcpy((char *)k->out[0]->data + off, (const char *)x->data + off, (size_t)(to - from) * es);
        }
    return QR_OK;
}

/* ---- OneHot ------------------------------------------------------------- */

/* The depth (any numeric type, cast to int64) and the normalized axis of the output. */
static qr_status onehot_args(qr_kctx *k, int64_t *depth, int *axis)
{
    const qr_tensor *idx = k->in[0], *values = k->in[2];
    if (need_type(k, idx, T_FLOAT | T_INT, "indices") != QR_OK || need_type(k, values, T_ANY, "values") != QR_OK)
        return QR_ERR;
    if (values->ndim > 1 || qr_tensor_numel(values) != 2)
        return QR_KERR(k, "values must hold two values, [off_value, on_value]");
    qr_status st = one_int(k, k->in[1], "depth", 1, depth);
    if (st != QR_OK)
        return st;
    if (*depth < 1)
        return QR_KERR(k, "depth must be positive, not %lld", (long long)*depth);
    if (idx->ndim + 1 > QR_MAX_DIMS)
        return QR_KERR(k, "output rank %d is not supported (at most %d)", idx->ndim + 1, QR_MAX_DIMS);
    return qr_norm_axis(k, qr_attr_i(k->node, "axis", -1), idx->ndim + 1, axis);
}

static qr_status onehot_infer(qr_kctx *k)
{
    int64_t depth = 1, dims[QR_MAX_DIMS];
    int axis = 0;
    if (need_inputs(k, 3) != QR_OK)
        return QR_ERR;
    qr_status st = onehot_args(k, &depth, &axis);
    if (st != QR_OK)
        return st;
    const qr_tensor *idx = k->in[0];
    int n = 0;
    for (int d = 0; d <= idx->ndim; d++)
        dims[n++] = d == axis ? depth : idx->dims[d - (d > axis)];
    return qr_set_out(k, 0, k->in[2]->dtype, n, dims);
}

/* Every position gets off_value, then each index in range gets on_value.
 * Out of range indices leave their row off (not an error, per the spec);
 * negative ones count from the end from opset 11. */
static qr_status onehot_run(qr_kctx *k)
{
    int64_t depth = 1;
    int axis = 0;
    if (onehot_args(k, &depth, &axis) != QR_OK)
        return QR_ERR;
    const qr_tensor *idx = k->in[0], *values = k->in[2];
    qr_tensor *y = k->out[0];
    size_t es = qr_dtype_size(y->dtype);
    const char *off_v = values->data, *on_v = off_v + es;
    int64_t ny = qr_tensor_numel(y), ni = qr_tensor_numel(idx), inner = qr_dims_prod(idx->dims, axis, idx->ndim);
    for (int64_t i = 0; i < ny; i++)
        cpy((char *)y->data + (size_t)i * es, off_v, es);
    for (int64_t i = 0; i < ni; i++) {
        int64_t v = qr_get_i64(idx->data, idx->dtype, i);
        if (v < 0 && k->opset >= 11)
            v += depth;
        if (v < 0 || v >= depth)
            continue;
        int64_t o = i / inner, in = i % inner;
        cpy((char *)y->data + (size_t)((o * depth + v) * inner + in) * es, on_v, es);
    }
    return QR_OK;
}

/* ---- EyeLike ------------------------------------------------------------ */

static qr_status eyelike_infer(qr_kctx *k)
{
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_ANY, "input") != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (x->ndim != 2)
        return QR_KERR(k, "input must be 2-D, not rank %d", x->ndim);
    qr_same_as(k->out[0], x);
    if (qr_node_attr(k->node, "dtype")) {
        int64_t code = qr_attr_i(k->node, "dtype", 0);
        qr_dtype t = code > 0 && code < 1000 ? qr_dtype_from_onnx((int)code) : QR_UNDEF;
        if (t == QR_UNDEF || t == QR_STRING)
            return QR_KERR(k, "dtype %lld is not supported", (long long)code);
        k->out[0]->dtype = t;
    }
    return QR_OK;
}

/* Ones on the diagonal shifted by k (upward for k > 0), zeros elsewhere. */
static qr_status eyelike_run(qr_kctx *k)
{
    qr_tensor *y = k->out[0];
    int64_t rows = y->dims[0], cols = y->dims[1], kk = qr_attr_i(k->node, "k", 0);
    if (kk <= -rows || kk >= cols)
        return QR_OK;
    for (int64_t i = kk < 0 ? -kk : 0; i < rows && i + kk < cols; i++)
        qr_set_f64(y->data, y->dtype, i * cols + i + kk, 1);
    return QR_OK;
}

/* ---- LRN ---------------------------------------------------------------- */

static qr_status lrn_size(qr_kctx *k, int64_t *size)
{
    if (!qr_node_attr(k->node, "size"))
        return QR_KERR(k, "attribute 'size' is required");
    *size = qr_attr_i(k->node, "size", 0);
    if (*size < 1)
        return QR_KERR(k, "size must be positive, not %lld", (long long)*size);
    return QR_OK;
}

static qr_status lrn_infer(qr_kctx *k)
{
    int64_t size = 1;
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_FLOAT, "input") != QR_OK || lrn_size(k, &size) != QR_OK)
        return QR_ERR;
    if (k->in[0]->ndim < 2)
        return QR_KERR(k, "input must have rank >= 2 (N x C x ...), not %d", k->in[0]->ndim);
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* y = x / (bias + alpha/size * sum of x^2 over the channels
 * [c - floor((size-1)/2), c + ceil((size-1)/2)]) ^ beta. */
static qr_status lrn_run(qr_kctx *k)
{
    int64_t size = 1;
    if (lrn_size(k, &size) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    qr_dtype t = x->dtype;
    double alpha = qr_attr_f(k->node, "alpha", 1e-4f), beta = qr_attr_f(k->node, "beta", 0.75f);
    double bias = qr_attr_f(k->node, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], inner = qr_dims_prod(x->dims, 2, x->ndim);
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size-1)/2 */
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t c0 = c - lo < 0 ? 0 : c - lo, c1 = c + hi >= C ? C - 1 : c + hi;
            for (int64_t s = 0; s < inner; s++) {
                double sum = 0;
                for (int64_t j = c0; j <= c1; j++) {
                    double v = qr_ld(x->data, t, (n * C + j) * inner + s);
                    sum += v * v;
                }
                int64_t at = (n * C + c) * inner + s;
                qr_st(y->data, t, at, qr_ld(x->data, t, at) / pow(bias + alpha / (double)size * sum, beta));
            }
        }
    return QR_OK;
}

/* ---- MeanVarianceNormalization ------------------------------------------ */

/* Marks the reduced axes (attribute `axes`, default [0, 2, 3]). */
static qr_status mvn_axes(qr_kctx *k, int mask[QR_MAX_DIMS])
{
    static const int64_t def[] = {0, 2, 3};
    const int64_t *axes;
    int n = qr_attr_ints(k->node, "axes", &axes);
    if (n < 0) {
        axes = def;
        n = 3;
    }
    int r = k->in[0]->ndim;
    memset(mask, 0, sizeof(int) * QR_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (qr_norm_axis(k, axes[i], r, &a) != QR_OK)
            return QR_ERR;
        if (r == 0 || mask[a])
            return QR_KERR(k, "axis %lld is repeated or invalid", (long long)axes[i]);
        mask[a] = 1;
    }
    return QR_OK;
}

static qr_status mvn_infer(qr_kctx *k)
{
    int mask[QR_MAX_DIMS] = {0};
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_FLOAT, "input") != QR_OK || mvn_axes(k, mask) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

/* Walks x with an iterator whose offset is the element's group (the output
 * of a keepdims reduction over the masked axes). */
static void mvn_iter(qr_iter *it, const qr_tensor *x, const qr_tensor *kept)
{
    qr_iter_init(it, x, 1);
    qr_broadcast_strides(kept, x, it->stride[0]);
}

/* y = (x - mean) / (sqrt(var) + 1e-9) per group, as ONNX's function body
 * defines it; mean and variance are accumulated in double, two passes. */
static qr_status mvn_run(qr_kctx *k)
{
    int mask[QR_MAX_DIMS] = {0};
    if (mvn_axes(k, mask) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    qr_dtype t = x->dtype;
    qr_tensor kept = *x;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d])
            kept.dims[d] = 1;
    int64_t nin = qr_tensor_numel(x), ngroups = qr_tensor_numel(&kept);
    if (nin == 0)
        return QR_OK;
    double count = (double)(nin / ngroups);
    double *mean = calloc((size_t)ngroups * 2, sizeof *mean), *var = mean + ngroups;
    if (!mean)
        return QR_KERR(k, "out of memory");
    qr_iter it;
    mvn_iter(&it, x, &kept);
    for (int64_t i = 0; i < nin; i++, qr_iter_next(&it))
        mean[it.off[0]] += qr_ld(x->data, t, i);
    for (int64_t g = 0; g < ngroups; g++)
        mean[g] /= count;
    mvn_iter(&it, x, &kept);
    for (int64_t i = 0; i < nin; i++, qr_iter_next(&it)) {
        double d = qr_ld(x->data, t, i) - mean[it.off[0]];
        var[it.off[0]] += d * d;
    }
    for (int64_t g = 0; g < ngroups; g++)
        var[g] = sqrt(var[g] / count) + 1e-9; /* now the divisor */
    mvn_iter(&it, x, &kept);
    for (int64_t i = 0; i < nin; i++, qr_iter_next(&it))
        qr_st(y->data, t, i, (qr_ld(x->data, t, i) - mean[it.off[0]]) / var[it.off[0]]);
    free(mean);
    return QR_OK;
}

/* ---- NonZero ------------------------------------------------------------ */

static inline int is_nonzero(const void *p, qr_dtype t, int64_t i)
{
    if (t == QR_F32)
        return ((const float *)p)[i] != 0;
    if (qr_dtype_is_float(t))
        return qr_get_f64(p, t, i) != 0; /* -0.0 is zero, NaN is not */
    return qr_get_i64(p, t, i) != 0;
}

static qr_status nonzero_infer(qr_kctx *k)
{
    if (need_inputs(k, 1) != QR_OK || need_type(k, k->in[0], T_ANY, "input") != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0];
    if (no_data(x))
        return QR_NEED_DATA;
    int64_t n = qr_tensor_numel(x), nnz = 0;
    for (int64_t i = 0; i < n; i++)
        nnz += is_nonzero(x->data, x->dtype, i);
    /* A scalar counts as a 1-element vector, as numpy.nonzero treats it. */
    int64_t dims[2] = {x->ndim ? x->ndim : 1, nnz};
    return qr_set_out(k, 0, QR_I64, 2, dims);
}

/* Output [rank, nnz]: column j holds the coordinates of the j-th nonzero in row-major order. */
static qr_status nonzero_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t *y = k->out[0]->data, nnz = k->out[0]->dims[1], n = qr_tensor_numel(x), j = 0;
    int r = x->ndim;
    int64_t idx[QR_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n && j < nnz; i++) {
        if (is_nonzero(x->data, x->dtype, i)) {
            for (int d = 0; d < r; d++)
                y[d * nnz + j] = idx[d];
            if (r == 0)
                y[j] = 0;
            j++;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return QR_OK;
}

/* ---- Compress ----------------------------------------------------------- */

/* The selection along the axis (or the flattened input when there is none):
 * *n positions, *count of them selected. A condition shorter than the axis
 * drops the rest; a longer one may only have false past the end. */
static qr_status compress_args(qr_kctx *k, int *axis, int64_t *n, int64_t *count)
{
    const qr_tensor *x = k->in[0], *c = k->in[1];
    if (need_type(k, x, T_ANY, "input") != QR_OK || need_type(k, c, T_BOOL | T_INT, "condition") != QR_OK)
        return QR_ERR;
    if (c->ndim != 1)
        return QR_KERR(k, "condition must be 1-D, not rank %d", c->ndim);
    *axis = -1;
    *n = qr_tensor_numel(x);
    if (qr_node_attr(k->node, "axis")) {
        if (x->ndim < 1)
            return QR_KERR(k, "axis given for a scalar input");
        if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, axis) != QR_OK)
            return QR_ERR;
        *n = x->dims[*axis];
    }
    if (no_data(c))
        return QR_NEED_DATA;
    *count = 0;
    for (int64_t i = 0; i < c->dims[0]; i++) {
        if (!qr_get_i64(c->data, c->dtype, i))
            continue;
        if (i >= *n)
            return QR_KERR(k, "condition selects position %lld, past the %lld available", (long long)i, (long long)*n);
        ++*count;
    }
    return QR_OK;
}

static qr_status compress_infer(qr_kctx *k)
{
    int axis = 0;
    int64_t n = 0, count = 0;
    if (need_inputs(k, 2) != QR_OK)
        return QR_ERR;
    qr_status st = compress_args(k, &axis, &n, &count);
    if (st != QR_OK)
        return st;
    const qr_tensor *x = k->in[0];
    if (axis < 0)
        return qr_set_out(k, 0, x->dtype, 1, &count);
    int64_t dims[QR_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = count;
    return qr_set_out(k, 0, x->dtype, x->ndim, dims);
}

/* Copies the selected blocks of `inner` elements of each outer slice. */
static qr_status compress_run(qr_kctx *k)
{
    int axis = 0;
    int64_t n = 0, count = 0;
    if (compress_args(k, &axis, &n, &count) != QR_OK)
        return QR_ERR;
    const qr_tensor *x = k->in[0], *c = k->in[1];
    size_t es = qr_dtype_size(x->dtype);
    int64_t outer = axis < 0 ? 1 : qr_dims_prod(x->dims, 0, axis), inner = axis < 0 ? 1 : qr_dims_prod(x->dims, axis + 1, x->ndim);
    int64_t len = c->dims[0] < n ? c->dims[0] : n;
    size_t block = (size_t)inner * es;
    char *dst = k->out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < len; i++)
            if (qr_get_i64(c->data, c->dtype, i)) {
                copy_bytes(dst, (const char *)x->data + (size_t)(o * n + i) * block, block);
                dst += block;
            }
    return QR_OK;
}

/* ---- the table ---------------------------------------------------------- */

const qr_op_def qr_ops_misc[] = {
    {"Size", "", 1, 1, 1, 1, "", size_infer, size_run, 0},
    {"Tile", "", 2, 2, 1, 1, "", tile_infer, tile_run, 0, .ins = "input repeats:x1"},
    {"DepthToSpace", "", 1, 1, 1, 1, "blocksize:i mode:s", d2s_infer, d2s_run, 0, .ins = "input:4"},
    {"SpaceToDepth", "", 1, 1, 1, 1, "blocksize:i", s2d_infer, s2d_run, 0, .ins = "input:4"},
    {"GatherElements", "", 2, 2, 1, 1, "axis:i", gather_elements_infer, gather_elements_run, 0, .ins = "data:1+ indices:x"},
    {"ScatterElements", "", 3, 3, 1, 1, "axis:i reduction:s", scatter_elements_infer, scatter_elements_run, 0, .ins = "data:1+ indices:x updates"},
    /* Scatter (opsets 9-10) is ScatterElements without reduction under its old name. */
    {"Scatter", "", 3, 3, 1, 1, "axis:i", scatter_elements_infer, scatter_elements_run, 0, .ins = "data:1+ indices:x updates"},
    {"GatherND", "", 2, 2, 1, 1, "batch_dims:i", gathernd_infer, gathernd_run, 0, .ins = "data:1+ indices:x1+"},
    {"ScatterND", "", 3, 3, 1, 1, "reduction:s", scatternd_infer, scatternd_run, 0, .ins = "data:1+ indices:x1+ updates"},
    {"CumSum", "", 2, 2, 1, 1, "exclusive:i reverse:i", cumsum_infer, cumsum_run, 0, .ins = "x:1+ axis:x0-1"},
    {"Hardmax", "", 1, 1, 1, 1, "axis:i", hardmax_infer, hardmax_run, 0, .ins = "input:1+"},
    {"TopK", "", 1, 2, 1, 2, "axis:i k:i largest:i sorted:i", topk_infer, topk_run, 0, .ins = "X:1+ K:x0-1"},
    {"Trilu", "", 1, 2, 1, 1, "upper:i", trilu_infer, trilu_run, 0, .ins = "input:2+ k?:x0-1"},
    {"OneHot", "", 3, 3, 1, 1, "axis:i", onehot_infer, onehot_run, 0, .ins = "indices depth:0-1 values:1"},
    {"EyeLike", "", 1, 1, 1, 1, "dtype:i k:i", eyelike_infer, eyelike_run, 0, .ins = "input:2"},
    {"LRN", "", 1, 1, 1, 1, "alpha:f beta:f bias:f size:i", lrn_infer, lrn_run, 0},
    {"MeanVarianceNormalization", "", 1, 1, 1, 1, "axes:ints", mvn_infer, mvn_run, 0},
    {"NonZero", "", 1, 1, 1, 1, "", nonzero_infer, nonzero_run, 0},
    {"Compress", "", 2, 2, 1, 1, "axis:i", compress_infer, compress_run, 0, .ins = "input condition:b1"},
    {0},
};
