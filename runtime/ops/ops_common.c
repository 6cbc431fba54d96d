#include "ops_common.h"

#include <string.h>

qr_status qr_norm_axis(qr_kctx *k, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= (rank ? rank : 1))
        return QR_KERR(k, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return QR_OK;
}

qr_status qr_broadcast_shapes(qr_kctx *k, const qr_tensor *const *ts, int n, qr_tensor *out)
{
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->ndim > nd)
            nd = ts[i]->ndim;
    out->ndim = nd;
    for (int d = 0; d < nd; d++) {
        int64_t dim = 1;
        for (int i = 0; i < n; i++) {
            if (!ts[i])
                continue;
            int off = d - (nd - ts[i]->ndim);
            if (off < 0)
                continue;
            int64_t x = ts[i]->dims[off];
            if (x == dim || x == 1)
                continue;
            if (dim != 1)
                return QR_KERR(k, "shapes cannot be broadcast: dimension %d is %lld in one input and %lld in another",
                               d, (long long)dim, (long long)x);
            dim = x;
        }
        out->dims[d] = dim;
    }
    return QR_OK;
}

void qr_broadcast_strides(const qr_tensor *in, const qr_tensor *out, int64_t *strides)
{
    int64_t s = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int off = d - (out->ndim - in->ndim);
        if (off < 0 || in->dims[off] == 1) {
            strides[d] = 0;
            if (off >= 0)
                s *= in->dims[off];
        } else {
            strides[d] = s;
            s *= in->dims[off];
        }
    }
}

int qr_read_ints(const qr_tensor *t, int64_t *v, int max)
{
    if (!t || !t->data || !qr_dtype_is_int(t->dtype))
        return -1;
    int64_t n = qr_tensor_numel(t);
    if (n > max)
        return -1;
    for (int64_t i = 0; i < n; i++)
        v[i] = qr_get_i64(t->data, t->dtype, i);
    return (int)n;
}

void qr_same_as(qr_tensor *dst, const qr_tensor *src)
{
    dst->dtype = src->dtype;
    qr_tensor_set_shape(dst, src->ndim, src->dims);
}

void qr_iter_init(qr_iter *it, const qr_tensor *shape, int nops)
{
    memset(it, 0, sizeof *it);
    it->ndim = shape->ndim;
    memcpy(it->dims, shape->dims, sizeof it->dims);
    it->nops = nops;
}

qr_status qr_set_out(qr_kctx *k, int j, qr_dtype dt, int ndim, const int64_t *dims)
{
    qr_tensor *o = k->out[j];
    if (ndim < 0 || ndim > QR_MAX_DIMS)
        return QR_KERR(k, "output rank %d is not supported (at most %d)", ndim, QR_MAX_DIMS);
    o->dtype = dt;
    qr_tensor_set_shape(o, ndim, dims);
    return k->shapes_only ? qr_tensor_check_dims(o, k->err) : qr_tensor_check_shape(o, k->err);
}
