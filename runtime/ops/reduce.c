/* Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp,
 * ArgMax, ArgMin.
 * The axes come from the `axes` attribute (ReduceSum before opset 13, the
 * others before 18) or from the optional second input (later opsets); when
 * both are absent or empty every axis is reduced, unless noop_with_empty_axes
 * asks for the identity. Floats accumulate in double; integers accumulate in
 * 64 bits and wrap like the narrower type does. */
#include "ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum rkind { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } rkind;


/* Integers compare as int64; u64 is flipped at the sign bit so that its
 * unsigned order becomes the signed order of the key. */
static inline int64_t int_key(const void *p, qr_dtype t, int64_t i)
{
    int64_t v = qr_get_i64(p, t, i);
    return t == QR_U64 ? (int64_t)((uint64_t)v ^ 0x8000000000000000u) : v;
}

static inline int64_t key_value(int64_t key, qr_dtype t)
{
    return t == QR_U64 ? (int64_t)((uint64_t)key ^ 0x8000000000000000u) : key;
}

/* Smallest and largest key of an integer type (the identities of Max and Min). */
static void int_key_range(qr_dtype t, int64_t *lo, int64_t *hi)
{
    int bits = (int)qr_dtype_size(t) * 8;
    if (t == QR_BOOL) {
        *lo = 0;
        *hi = 1;
    } else if (t == QR_U64 || t == QR_I64) {
        *lo = INT64_MIN; /* the key of u64 0 is INT64_MIN too */
        *hi = INT64_MAX;
    } else if (qr_dtype_get(t)->is_signed) {
        *lo = -((int64_t)1 << (bits - 1));
        *hi = ((int64_t)1 << (bits - 1)) - 1;
    } else {
        *lo = 0;
        *hi = ((int64_t)1 << bits) - 1;
    }
}

/* Which axes to reduce: mask[d] set for each; *noop when the op is the identity. */
static qr_status reduce_axes(qr_kctx *k, int mask[QR_MAX_DIMS], int *noop)
{
    const qr_tensor *x = k->in[0];
    int64_t axes[QR_MAX_DIMS];
    int n = 0;
    const qr_tensor *ta = k->n_in > 1 ? k->in[1] : NULL;
    memset(mask, 0, sizeof(int) * QR_MAX_DIMS);
    *noop = 0;
    if (ta) {
        int64_t cnt = qr_tensor_numel(ta);
        if (ta->ndim > 1 || !qr_dtype_is_int(ta->dtype))
            return QR_KERR(k, "axes must be a 1-D integer tensor");
        if (cnt > x->ndim)
            return QR_KERR(k, "%lld axes given for an input of rank %d", (long long)cnt, x->ndim);
        if (cnt > 0 && !ta->data)
            return QR_NEED_DATA;
        n = cnt > 0 ? qr_read_ints(ta, axes, QR_MAX_DIMS) : 0;
        if (n < 0)
            return QR_KERR(k, "cannot read axes");
    } else {
        const int64_t *v;
        int cnt = qr_attr_ints(k->node, "axes", &v);
        if (cnt > x->ndim)
            return QR_KERR(k, "%d axes given for an input of rank %d", cnt, x->ndim);
        for (int i = 0; i < cnt; i++)
            axes[n++] = v[i];
    }
    if (n == 0) {
        if (qr_attr_i(k->node, "noop_with_empty_axes", 0))
            *noop = 1;
        else
            for (int d = 0; d < x->ndim; d++)
                mask[d] = 1;
        return QR_OK;
    }
    for (int i = 0; i < n; i++) {
        int a;
        if (x->ndim == 0)
            return QR_KERR(k, "axis %lld given for a scalar input", (long long)axes[i]);
        if (qr_norm_axis(k, axes[i], x->ndim, &a) != QR_OK)
            return QR_ERR;
        if (mask[a])
            return QR_KERR(k, "axis %d is listed twice", a);
        mask[a] = 1;
    }
    return QR_OK;
}

static qr_status reduce_infer_kind(qr_kctx *k, rkind kind)
{
    const qr_tensor *x = k->in[0];
    if (!x)
        return QR_KERR(k, "input 0 is required");
    int bool_ok = kind == R_MAX || kind == R_MIN;
    if (x->dtype == QR_STRING || x->dtype == QR_UNDEF || (x->dtype == QR_BOOL && !bool_ok))
        return QR_KERR(k, "input type %s is not supported", qr_dtype_name(x->dtype));
    int mask[QR_MAX_DIMS], noop;
    qr_status st = reduce_axes(k, mask, &noop);
    if (st != QR_OK)
        return st;
    int keep = qr_attr_i(k->node, "keepdims", 1) != 0;
    qr_tensor *y = k->out[0];
    y->dtype = x->dtype;
    y->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!mask[d])
            y->dims[y->ndim++] = x->dims[d];
        else if (keep)
            y->dims[y->ndim++] = 1;
    }
    return QR_OK;
}

/* Double accumulation for float types and for the ops whose result is not an
 * integer sum or extremum (L2, LogSum, LogSumExp). */
static void reduce_float(const qr_tensor *x, qr_iter *it, double *acc, int64_t nout, int64_t count, rkind kind,
                         const double *mx)
{
    int64_t nin = qr_tensor_numel(x);
    double init = kind == R_PROD ? 1 : kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
    for (int64_t o = 0; o < nout; o++)
        acc[o] = init;
    for (int64_t i = 0; i < nin; i++, qr_iter_next(it)) {
        double v = qr_ld(x->data, x->dtype, i), *a = &acc[it->off[0]];
        switch (kind) {
        case R_SUM:
        case R_MEAN:
        case R_LOGSUM: *a += v; break;
        case R_PROD: *a *= v; break;
        case R_MAX:
            if (v > *a || isnan(v))
                *a = isnan(*a) ? *a : v;
            break;
        case R_MIN:
            if (v < *a || isnan(v))
                *a = isnan(*a) ? *a : v;
            break;
        case R_L1: *a += fabs(v); break;
        case R_L2:
        case R_SUMSQ: *a += v * v; break;
        case R_LOGSUMEXP: *a += exp(v - mx[it->off[0]]); break;
        }
    }
    for (int64_t o = 0; o < nout; o++) {
        switch (kind) {
        case R_MEAN: acc[o] /= (double)count; break; /* 0/0 = NaN for an empty set */
        case R_L2: acc[o] = sqrt(acc[o]); break;
        case R_LOGSUM: acc[o] = log(acc[o]); break;
        case R_LOGSUMEXP: acc[o] = isinf(mx[o]) ? mx[o] : mx[o] + log(acc[o]); break;
        default: break;
        }
    }
}

/* 64-bit integer accumulation; unsigned arithmetic so overflow wraps. */
static void reduce_int(const qr_tensor *x, qr_iter *it, int64_t *acc, int64_t nout, int64_t count, rkind kind)
{
    int64_t nin = qr_tensor_numel(x), lo, hi;
    qr_dtype t = x->dtype;
    int_key_range(t, &lo, &hi);
    int64_t init = kind == R_PROD ? 1 : kind == R_MAX ? lo : kind == R_MIN ? hi : 0;
    for (int64_t o = 0; o < nout; o++)
        acc[o] = init;
    for (int64_t i = 0; i < nin; i++, qr_iter_next(it)) {
        int64_t *a = &acc[it->off[0]];
        if (kind == R_MAX || kind == R_MIN) {
            int64_t v = int_key(x->data, t, i);
            if (kind == R_MAX ? v > *a : v < *a)
                *a = v;
            continue;
        }
        uint64_t v = (uint64_t)qr_get_i64(x->data, t, i), s = (uint64_t)*a;
        switch (kind) {
        case R_PROD: s *= v; break;
        case R_L1: s += (int64_t)v < 0 && t != QR_U64 ? -v : v; break;
        case R_SUMSQ: s += v * v; break;
        default: s += v; break;
        }
        *a = (int64_t)s;
    }
    for (int64_t o = 0; o < nout; o++) {
        if (kind == R_MAX || kind == R_MIN)
            acc[o] = key_value(acc[o], t);
        else if (kind == R_MEAN && count > 0)
            acc[o] = t == QR_U64 ? (int64_t)((uint64_t)acc[o] / (uint64_t)count) : acc[o] / count;
    }
}

static qr_status reduce_run_kind(qr_kctx *k, rkind kind)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int mask[QR_MAX_DIMS], noop;
    if (reduce_axes(k, mask, &noop) != QR_OK)
        return QR_ERR;
    if (noop) {
        memcpy(y->data, x->data, qr_tensor_nbytes(x));
        return QR_OK;
    }
    /* The output viewed with the input's rank (1 on reduced dims): reading its
     * offsets with broadcast strides maps each input element to its output. */
    qr_tensor kept = *x;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d])
            kept.dims[d] = 1;
    int64_t nout = qr_tensor_numel(&kept), nin = qr_tensor_numel(x);
    int64_t count = nout ? nin / nout : 0;
    if (nout == 0)
        return QR_OK;
    qr_iter it;
    qr_iter_init(&it, x, 1);
    qr_broadcast_strides(&kept, x, it.stride[0]);
    int as_int = !qr_dtype_is_float(x->dtype) && kind != R_L2 && kind != R_LOGSUM && kind != R_LOGSUMEXP;
    if (as_int) {
        int64_t *acc = malloc(sizeof *acc * (size_t)nout);
        if (!acc)
            return QR_KERR(k, "out of memory");
        reduce_int(x, &it, acc, nout, count, kind);
        for (int64_t o = 0; o < nout; o++)
            qr_set_i64(y->data, y->dtype, o, acc[o]);
        free(acc);
        return QR_OK;
    }
    double *acc = malloc(sizeof *acc * (size_t)nout * (kind == R_LOGSUMEXP ? 2 : 1));
    if (!acc)
        return QR_KERR(k, "out of memory");
    double *mx = NULL;
    if (kind == R_LOGSUMEXP) {
        /* A first pass finds each group's max so exp() cannot overflow. */
        mx = acc + nout;
        reduce_float(x, &it, mx, nout, count, R_MAX, NULL);
        qr_iter_init(&it, x, 1);
        qr_broadcast_strides(&kept, x, it.stride[0]);
    }
    reduce_float(x, &it, acc, nout, count, kind, mx);
    for (int64_t o = 0; o < nout; o++)
        qr_set_f64(y->data, y->dtype, o, acc[o]);
    free(acc);
    return QR_OK;
}

#define REDUCE_FNS(NAME, KIND)                                                    \
    static qr_status NAME##_infer(qr_kctx *k) { return reduce_infer_kind(k, KIND); } \
    static qr_status NAME##_run(qr_kctx *k) { return reduce_run_kind(k, KIND); }

REDUCE_FNS(rsum, R_SUM)
REDUCE_FNS(rmean, R_MEAN)
REDUCE_FNS(rmax, R_MAX)
REDUCE_FNS(rmin, R_MIN)
REDUCE_FNS(rprod, R_PROD)
REDUCE_FNS(rl1, R_L1)
REDUCE_FNS(rl2, R_L2)
REDUCE_FNS(rsumsq, R_SUMSQ)
REDUCE_FNS(rlogsum, R_LOGSUM)
REDUCE_FNS(rlogsumexp, R_LOGSUMEXP)

/* ---- ArgMax, ArgMin ------------------------------------------------------ */

static qr_status arg_axis(qr_kctx *k, int *axis)
{
    const qr_tensor *x = k->in[0];
    if (!x)
        return QR_KERR(k, "input 0 is required");
    if (x->ndim == 0)
        return QR_KERR(k, "input must have rank >= 1");
    return qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, axis);
}

static qr_status arg_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int axis;
    if (arg_axis(k, &axis) != QR_OK)
        return QR_ERR;
    if (x->dtype == QR_STRING || x->dtype == QR_UNDEF)
        return QR_KERR(k, "input type %s is not supported", qr_dtype_name(x->dtype));
    int keep = qr_attr_i(k->node, "keepdims", 1) != 0;
    qr_tensor *y = k->out[0];
    y->dtype = QR_I64;
    y->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != axis)
            y->dims[y->ndim++] = x->dims[d];
        else if (keep)
            y->dims[y->ndim++] = 1;
    }
    if (x->dims[axis] == 0 && qr_tensor_numel(y) > 0)
        return QR_KERR(k, "cannot take the index of an extremum along axis %d, which is empty", axis);
    return QR_OK;
}

/* want_max selects ArgMax; ties go to the first index unless select_last_index.
 * A NaN counts as the extremum, as numpy's argmax/argmin do. */
static qr_status arg_run(qr_kctx *k, int want_max)
{
    const qr_tensor *x = k->in[0];
    int axis;
    if (arg_axis(k, &axis) != QR_OK)
        return QR_ERR;
    int last = qr_attr_i(k->node, "select_last_index", 0) != 0;
    int64_t outer = 1, inner = 1, n = x->dims[axis];
    for (int d = 0; d < axis; d++)
        outer *= x->dims[d];
    for (int d = axis + 1; d < x->ndim; d++)
        inner *= x->dims[d];
    int64_t *y = k->out[0]->data;
    int is_float = qr_dtype_is_float(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in, best = 0;
            if (is_float) {
                double bv = qr_ld(x->data, x->dtype, base);
                for (int64_t i = 1; i < n && !(isnan(bv) && !last); i++) {
                    double v = qr_ld(x->data, x->dtype, base + i * inner);
                    int better = isnan(v) ? (!isnan(bv) || last)
                                 : isnan(bv) ? 0
                                 : want_max ? (last ? v >= bv : v > bv)
                                            : (last ? v <= bv : v < bv);
                    if (better) {
                        bv = v;
                        best = i;
                    }
                }
            } else {
                int64_t bv = int_key(x->data, x->dtype, base);
                for (int64_t i = 1; i < n; i++) {
                    int64_t v = int_key(x->data, x->dtype, base + i * inner);
                    int better = want_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
                    if (better) {
                        bv = v;
                        best = i;
                    }
                }
            }
            y[o * inner + in] = best;
        }
    }
    return QR_OK;
}

static qr_status argmax_run(qr_kctx *k) { return arg_run(k, 1); }
static qr_status argmin_run(qr_kctx *k) { return arg_run(k, 0); }

#define REDUCE_ROW(NAME, FN) \
    {NAME, "", 1, 2, 1, 1, "axes:ints keepdims:i noop_with_empty_axes:i", FN##_infer, FN##_run, 0, .ins = "data axes?:x0-1"}

const qr_op_def qr_ops_reduce[] = {
    REDUCE_ROW("ReduceSum", rsum),
    REDUCE_ROW("ReduceMean", rmean),
    REDUCE_ROW("ReduceMax", rmax),
    REDUCE_ROW("ReduceMin", rmin),
    REDUCE_ROW("ReduceProd", rprod),
    REDUCE_ROW("ReduceL1", rl1),
    REDUCE_ROW("ReduceL2", rl2),
    REDUCE_ROW("ReduceSumSquare", rsumsq),
    REDUCE_ROW("ReduceLogSum", rlogsum),
    REDUCE_ROW("ReduceLogSumExp", rlogsumexp),
    {"ArgMax", "", 1, 1, 1, 1, "axis:i keepdims:i select_last_index:i", arg_infer, argmax_run, 0},
    {"ArgMin", "", 1, 1, 1, 1, "axis:i keepdims:i select_last_index:i", arg_infer, argmin_run, 0},
    {0},
};
