/* Data movement ops: they rearrange, select or fill elements without doing
 * arithmetic on them, so every kernel works on raw bytes of the element size
 * and accepts every dtype. Resize and Upsample live in resize.c. */
#include "nhwc.h"
#include "ops_common.h"
#include "permute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* resize.c */
qr_status qr_resize_infer(qr_kctx *k);
qr_status qr_resize_run(qr_kctx *k);
qr_status qr_upsample_infer(qr_kctx *k);
qr_status qr_upsample_run(qr_kctx *k);

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

/* Reshape and its kind: a copy, or nothing when the executor gave output 0 input 0's buffer
 * (QR_INPLACE_VIEW). */
static qr_status copy_whole(qr_kctx *k)
{
    size_t n = qr_tensor_nbytes(k->out[0]);
    if (n && k->out[0]->data != k->in[0]->data)
        memcpy(k->out[0]->data, k->in[0]->data, n);
    return QR_OK;
}

/* Reads the integer input i (1-D or scalar) into v; *n = count. QR_NEED_DATA
 * when its data is not known yet. */
static qr_status in_ints(qr_kctx *k, int i, const char *what, int64_t *v, int max, int *n)
{
    const qr_tensor *t = k->in[i];
    if (!t->data)
        return QR_NEED_DATA;
    if (!qr_dtype_is_int(t->dtype))
        return QR_KERR(k, "input '%s' must be an integer tensor, not %s", what, qr_dtype_name(t->dtype));
    if (t->ndim > 1)
        return QR_KERR(k, "input '%s' must be 1-D, not rank %d", what, t->ndim);
    int c = qr_read_ints(t, v, max);
    if (c < 0)
        return QR_KERR(k, "input '%s' has %lld values, more than the %d supported", what,
                       (long long)qr_tensor_numel(t), max);
    *n = c;
    return QR_OK;
}

/* Reads an ints attribute into v; *n = count, -1 when absent. */
static qr_status attr_ints(qr_kctx *k, const char *name, int64_t *v, int max, int *n)
{
    const int64_t *a;
    int c = qr_attr_ints(k->node, name, &a);
    if (c > max)
        return QR_KERR(k, "attribute '%s' has %d values, more than the %d supported", name, c, max);
    for (int i = 0; i < c; i++)
        v[i] = a[i];
    *n = c;
    return QR_OK;
}

/* Axes from the attribute (before opset 13) or the optional input 1 (from 13);
 * *n = -1 when none is given. */
static qr_status axes_arg(qr_kctx *k, int64_t *axes, int *n)
{
    if (k->opset < 13)
        return attr_ints(k, "axes", axes, QR_MAX_DIMS, n);
    *n = -1;
    if (k->n_in < 2 || !k->in[1])
        return QR_OK;
    return in_ints(k, 1, "axes", axes, QR_MAX_DIMS, n);
}

/* Normalizes n axes against rank into out (sorted flags in mark), refusing duplicates. */
static qr_status norm_axes(qr_kctx *k, const int64_t *axes, int n, int rank, int *out, int *mark)
{
    memset(mark, 0, sizeof(int) * QR_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int a;
        if (qr_norm_axis(k, axes[i], rank, &a) != QR_OK)
            return QR_ERR;
        if (mark[a])
            return QR_KERR(k, "axis %lld is given twice", (long long)axes[i]);
        mark[a] = 1;
        if (out)
            out[i] = a;
    }
    return QR_OK;
}

/* ---- Flatten, Reshape, Squeeze, Unsqueeze: same bytes, new shape --------- */

static qr_status flatten_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t axis = qr_attr_i(k->node, "axis", 1);
    if (axis < -x->ndim || axis > x->ndim)
        return QR_KERR(k, "axis %lld is out of range for rank %d", (long long)axis, x->ndim);
    if (axis < 0)
        axis += x->ndim;
    int64_t dims[2] = {qr_dims_prod(x->dims, 0, (int)axis), qr_dims_prod(x->dims, (int)axis, x->ndim)};
    return qr_set_out(k, 0, x->dtype, 2, dims);
}

static qr_status reshape_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t shape[QR_MAX_DIMS + 1];
    int n;
    qr_status st;
    if (k->opset < 5 || k->n_in < 2) {
        st = attr_ints(k, "shape", shape, QR_MAX_DIMS + 1, &n);
        if (st == QR_OK && n < 0)
            return QR_KERR(k, "the target shape is missing");
    } else {
        if (!k->in[1])
            return QR_KERR(k, "the target shape is missing");
        st = in_ints(k, 1, "shape", shape, QR_MAX_DIMS + 1, &n);
    }
    if (st != QR_OK)
        return st;
    if (n > QR_MAX_DIMS)
        return QR_KERR(k, "target rank %d is not supported (at most %d)", n, QR_MAX_DIMS);
    int allowzero = k->opset >= 14 && qr_attr_i(k->node, "allowzero", 0) != 0;
    int64_t dims[QR_MAX_DIMS], known = 1;
    int infer_at = -1;
    for (int i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == 0 && !allowzero) {
            if (i >= x->ndim)
                return QR_KERR(k, "shape entry %d is 0 (copy the input dim) but the input has rank %d", i, x->ndim);
            v = x->dims[i];
        } else if (v == -1) {
            if (infer_at >= 0)
                return QR_KERR(k, "the target shape has more than one -1");
            infer_at = i;
            dims[i] = 1;
            continue;
        } else if (v < 0) {
            return QR_KERR(k, "shape entry %d is %lld; only -1 may be negative", i, (long long)v);
        }
        dims[i] = v;
        if (v && known > INT64_MAX / v)
            return QR_KERR(k, "the target shape is too large");
        known *= v;
    }
    int64_t total = qr_tensor_numel(x);
    if (infer_at >= 0) {
        if (known == 0)
            return QR_KERR(k, "cannot infer the -1 dimension when the other dimensions multiply to 0");
        if (total % known)
            return QR_KERR(k, "cannot reshape %lld elements: not a multiple of %lld", (long long)total, (long long)known);
        dims[infer_at] = total / known;
    } else if (known != total) {
        return QR_KERR(k, "cannot reshape %lld elements into a shape of %lld elements", (long long)total,
                       (long long)known);
    }
    return qr_set_out(k, 0, x->dtype, n, dims);
}

static qr_status squeeze_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t axes[QR_MAX_DIMS];
    int n, mark[QR_MAX_DIMS];
    qr_status st = axes_arg(k, axes, &n);
    if (st != QR_OK)
        return st;
    if (n < 0) {
        for (int d = 0; d < x->ndim; d++)
            mark[d] = x->dims[d] == 1;
    } else if (norm_axes(k, axes, n, x->ndim, NULL, mark) != QR_OK) {
        return QR_ERR;
    }
    int64_t dims[QR_MAX_DIMS];
    int r = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!mark[d]) {
            dims[r++] = x->dims[d];
        } else if (x->dims[d] != 1) {
            return QR_KERR(k, "cannot squeeze axis %d: its size is %lld, not 1", d, (long long)x->dims[d]);
        }
    }
    return qr_set_out(k, 0, x->dtype, r, dims);
}

static qr_status unsqueeze_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t axes[QR_MAX_DIMS];
    int n, mark[QR_MAX_DIMS];
    qr_status st = axes_arg(k, axes, &n);
    if (st != QR_OK)
        return st;
    if (n < 0)
        return QR_KERR(k, "axes are required");
    int r = x->ndim + n;
    if (r > QR_MAX_DIMS)
        return QR_KERR(k, "output rank %d is not supported (at most %d)", r, QR_MAX_DIMS);
    if (norm_axes(k, axes, n, r, NULL, mark) != QR_OK)
        return QR_ERR;
    int64_t dims[QR_MAX_DIMS];
    for (int d = 0, j = 0; d < r; d++)
        dims[d] = mark[d] ? 1 : x->dims[j++];
    return qr_set_out(k, 0, x->dtype, r, dims);
}

/* ---- Transpose ---------------------------------------------------------- */

static qr_status perm_of(qr_kctx *k, int *perm)
{
    int r = k->in[0]->ndim;
    int64_t p[QR_MAX_DIMS];
    int n, seen[QR_MAX_DIMS] = {0};
    if (attr_ints(k, "perm", p, QR_MAX_DIMS, &n) != QR_OK)
        return QR_ERR;
    if (n < 0) {
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
        return QR_OK;
    }
    if (n != r)
        return QR_KERR(k, "perm has %d entries but the input has rank %d", n, r);
    for (int i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]])
            return QR_KERR(k, "perm is not a permutation of 0..%d", r - 1);
        seen[p[i]] = 1;
        perm[i] = (int)p[i];
    }
    return QR_OK;
}

static qr_status transpose_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int perm[QR_MAX_DIMS];
    if (perm_of(k, perm) != QR_OK)
        return QR_ERR;
    int64_t dims[QR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        dims[i] = x->dims[perm[i]];
    return qr_set_out(k, 0, x->dtype, x->ndim, dims);
}

/* Bytes between NCHW and NHWC, the integer graph's layout borders (quantizer/layout.c): blocked,
 * per image. 0 for any other permutation. */
static int transpose_layout(const qr_tensor *x, qr_tensor *y, const int *perm)
{
    int to_nhwc = perm[1] == 2 && perm[2] == 3 && perm[3] == 1, to_nchw = perm[1] == 3 && perm[2] == 1 && perm[3] == 2;
    if (!to_nhwc && !to_nchw)
        return 0;
    int64_t c = to_nhwc ? x->dims[1] : x->dims[3], hw = to_nhwc ? x->dims[2] * x->dims[3] : x->dims[1] * x->dims[2];
    for (int64_t n = 0; n < x->dims[0]; n++) {
        const uint8_t *src = (const uint8_t *)x->data + n * c * hw;
        uint8_t *dst = (uint8_t *)y->data + n * c * hw;
        if (to_nhwc)
            qr_nchw_to_nhwc_u8(dst, src, c, hw, 0, hw);
        else
            qr_nhwc_to_nchw_u8(dst, src, c, hw, 0, hw);
    }
    return 1;
}

static qr_status transpose_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int perm[QR_MAX_DIMS];
    if (perm_of(k, perm) != QR_OK)
        return QR_ERR;
    if (qr_dtype_size(x->dtype) == 1 && x->ndim == 4 && perm[0] == 0 && transpose_layout(x, y, perm))
        return QR_OK;
    if (x->dtype != QR_STRING) {
        qr_permute_copy(y->data, x->data, x->ndim, x->dims, perm, qr_dtype_size(x->dtype));
        return QR_OK;
    }
    int64_t xs[QR_MAX_DIMS];
    qr_tensor_strides(x, xs);
    qr_iter it;
    qr_iter_init(&it, y, 1);
    for (int d = 0; d < y->ndim; d++)
        it.stride[0][d] = xs[perm[d]];
    size_t es = qr_dtype_size(x->dtype);
    int64_t n = qr_tensor_numel(y);
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t i = 0; i < n; i++, qr_iter_next(&it))
        cpy(dst + (size_t)i * es, src + (size_t)it.off[0] * es, es);
    return QR_OK;
}

/* ---- Concat, Split ------------------------------------------------------ */

static qr_status concat_infer(qr_kctx *k)
{
    const qr_node *nd = k->node;
    if (k->opset >= 4 && !qr_node_attr(nd, "axis"))
        return QR_KERR(k, "attribute 'axis' is required");
    const qr_tensor *x0 = k->in[0];
    if (!x0)
        return QR_KERR(k, "input 0 is missing");
    int axis;
    if (x0->ndim == 0)
        return QR_KERR(k, "cannot concatenate scalars");
    if (qr_norm_axis(k, qr_attr_i(nd, "axis", 1), x0->ndim, &axis) != QR_OK)
        return QR_ERR;
    int64_t dims[QR_MAX_DIMS];
    memcpy(dims, x0->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const qr_tensor *t = k->in[i];
        if (!t)
            return QR_KERR(k, "input %d is missing", i);
        if (t->dtype != x0->dtype)
            return QR_KERR(k, "input %d is %s but input 0 is %s", i, qr_dtype_name(t->dtype), qr_dtype_name(x0->dtype));
        if (t->ndim != x0->ndim)
            return QR_KERR(k, "input %d has rank %d but input 0 has rank %d", i, t->ndim, x0->ndim);
        for (int d = 0; d < t->ndim; d++)
            if (d != axis && t->dims[d] != x0->dims[d])
                return QR_KERR(k, "input %d has size %lld on axis %d but input 0 has %lld", i, (long long)t->dims[d],
                               d, (long long)x0->dims[d]);
        dims[axis] += t->dims[axis];
    }
    return qr_set_out(k, 0, x0->dtype, x0->ndim, dims);
}

static qr_status concat_run(qr_kctx *k)
{
    qr_tensor *y = k->out[0];
    int axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 1), y->ndim, &axis) != QR_OK)
        return QR_ERR;
    size_t es = qr_dtype_size(y->dtype);
    int64_t outer = qr_dims_prod(y->dims, 0, axis), inner = qr_dims_prod(y->dims, axis + 1, y->ndim);
    char *dst = y->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < k->n_in; i++) {
            const qr_tensor *t = k->in[i];
            size_t block = (size_t)(t->dims[axis] * inner) * es;
            if (block) {
                memcpy(dst, (const char *)t->data + (size_t)o * block, block);
                dst += block;
            }
        }
    }
    return QR_OK;
}

#define MAX_SPLITS 1024

/* Chunk sizes of Split along axis into k->n_out outputs. */
static qr_status split_sizes(qr_kctx *k, int *axis_out, int64_t *sizes)
{
    const qr_tensor *x = k->in[0];
    int axis, n = -1, nout = k->n_out;
    if (x->ndim == 0)
        return QR_KERR(k, "cannot split a scalar");
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    if (nout > MAX_SPLITS)
        return QR_KERR(k, "%d outputs are more than the %d supported", nout, MAX_SPLITS);
    qr_status st = QR_OK;
    if (k->opset < 13)
        st = attr_ints(k, "split", sizes, MAX_SPLITS, &n);
    else if (k->n_in >= 2 && k->in[1])
        st = in_ints(k, 1, "split", sizes, MAX_SPLITS, &n);
    if (st != QR_OK)
        return st;
    if (n == 0 && nout > 0)
        n = -1; /* an empty 'split' input means none was given */
    int64_t dim = x->dims[axis];
    if (n >= 0) {
        if (n != nout)
            return QR_KERR(k, "split has %d sizes but the node has %d outputs", n, nout);
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 0)
                return QR_KERR(k, "split size %d is negative (%lld)", i, (long long)sizes[i]);
            sum += sizes[i];
        }
        if (sum != dim)
            return QR_KERR(k, "split sizes add up to %lld but axis %d has size %lld", (long long)sum, axis,
                           (long long)dim);
    } else {
        if (k->opset >= 18 && qr_node_attr(k->node, "num_outputs") &&
            qr_attr_i(k->node, "num_outputs", nout) != nout)
            return QR_KERR(k, "num_outputs is %lld but the node has %d outputs",
                           (long long)qr_attr_i(k->node, "num_outputs", nout), nout);
        /* Equal chunks of ceil(dim / n); the last one takes what is left. */
        int64_t chunk = (dim + nout - 1) / nout;
        if (chunk * (nout - 1) > dim)
            return QR_KERR(k, "axis %d of size %lld cannot be split into %d parts", axis, (long long)dim, nout);
        for (int i = 0; i < nout; i++)
            sizes[i] = i < nout - 1 ? chunk : dim - chunk * (nout - 1);
    }
    *axis_out = axis;
    return QR_OK;
}

static qr_status split_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int axis = 0;
    int64_t *sizes = malloc(sizeof(int64_t) * MAX_SPLITS);
    if (!sizes)
        return QR_KERR(k, "out of memory");
    qr_status st = split_sizes(k, &axis, sizes);
    for (int j = 0; j < k->n_out && st == QR_OK; j++) {
        int64_t dims[QR_MAX_DIMS];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[j];
        st = qr_set_out(k, j, x->dtype, x->ndim, dims);
    }
    free(sizes);
    return st;
}

static qr_status split_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    size_t es = qr_dtype_size(x->dtype);
    int64_t outer = qr_dims_prod(x->dims, 0, axis), inner = qr_dims_prod(x->dims, axis + 1, x->ndim);
    size_t in_block = (size_t)(x->dims[axis] * inner) * es, at = 0;
    for (int j = 0; j < k->n_out; j++) {
        qr_tensor *y = k->out[j];
        size_t block = (size_t)(y->dims[axis] * inner) * es;
        if (block)
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)y->data + (size_t)o * block, (const char *)x->data + (size_t)o * in_block + at, block);
        at += block;
    }
    return QR_OK;
}

/* ---- Slice -------------------------------------------------------------- */

/* Per-axis start and step of a Slice, and the output dims. */
static qr_status slice_plan(qr_kctx *k, int64_t *start, int64_t *step, int64_t *dims)
{
    const qr_tensor *x = k->in[0];
    int r = x->ndim;
    int64_t starts[QR_MAX_DIMS], ends[QR_MAX_DIMS], axes[QR_MAX_DIMS], steps[QR_MAX_DIMS];
    int ns, ne, na = -1, nst = -1;
    qr_status st;
    if (k->opset < 10) {
        if ((st = attr_ints(k, "starts", starts, QR_MAX_DIMS, &ns)) != QR_OK ||
            (st = attr_ints(k, "ends", ends, QR_MAX_DIMS, &ne)) != QR_OK ||
            (st = attr_ints(k, "axes", axes, QR_MAX_DIMS, &na)) != QR_OK)
            return st;
        if (ns < 0 || ne < 0)
            return QR_KERR(k, "attributes 'starts' and 'ends' are required");
    } else {
        if (k->n_in < 3 || !k->in[1] || !k->in[2])
            return QR_KERR(k, "inputs 'starts' and 'ends' are required");
        if ((st = in_ints(k, 1, "starts", starts, QR_MAX_DIMS, &ns)) != QR_OK ||
            (st = in_ints(k, 2, "ends", ends, QR_MAX_DIMS, &ne)) != QR_OK)
            return st;
        if (k->n_in > 3 && k->in[3] && (st = in_ints(k, 3, "axes", axes, QR_MAX_DIMS, &na)) != QR_OK)
            return st;
        if (k->n_in > 4 && k->in[4] && (st = in_ints(k, 4, "steps", steps, QR_MAX_DIMS, &nst)) != QR_OK)
            return st;
    }
    if (ns != ne)
        return QR_KERR(k, "starts has %d values but ends has %d", ns, ne);
    if (na >= 0 && na != ns)
        return QR_KERR(k, "axes has %d values but starts has %d", na, ns);
    if (nst >= 0 && nst != ns)
        return QR_KERR(k, "steps has %d values but starts has %d", nst, ns);
    if (na < 0) {
        if (ns > r)
            return QR_KERR(k, "starts has %d values but the input has rank %d", ns, r);
        for (int i = 0; i < ns; i++)
            axes[i] = i;
    }
    int ax[QR_MAX_DIMS], mark[QR_MAX_DIMS];
    if (norm_axes(k, axes, ns, r, ax, mark) != QR_OK)
        return QR_ERR;
    for (int d = 0; d < r; d++) {
        start[d] = 0;
        step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int d = ax[i];
        int64_t n = x->dims[d], s = starts[i], e = ends[i], p = nst >= 0 ? steps[i] : 1;
        if (p == 0)
            return QR_KERR(k, "steps[%d] is 0", i);
        /* A step longer than the axis selects at most one element: clamp it
         * so that offsets computed from it cannot overflow. */
        int64_t big = n > 0 ? n : 1;
        if (p > big)
            p = big;
        if (p < -big)
            p = -big;
        if (s < 0)
            s += n;
        if (e < 0)
            e += n;
        int64_t len;
        if (p > 0) {
            s = s < 0 ? 0 : s > n ? n : s;
            e = e < 0 ? 0 : e > n ? n : e;
            len = e > s ? (e - s + p - 1) / p : 0;
        } else {
            s = s < 0 ? 0 : s > n - 1 ? n - 1 : s;
            e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
            len = s > e ? (s - e - p - 1) / -p : 0;
        }
        start[d] = len ? s : 0;
        step[d] = p;
        dims[d] = len;
    }
    return QR_OK;
}

static qr_status slice_infer(qr_kctx *k)
{
    int64_t start[QR_MAX_DIMS], step[QR_MAX_DIMS], dims[QR_MAX_DIMS];
    qr_status st = slice_plan(k, start, step, dims);
    if (st != QR_OK)
        return st;
    return qr_set_out(k, 0, k->in[0]->dtype, k->in[0]->ndim, dims);
}

static qr_status slice_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int64_t start[QR_MAX_DIMS], step[QR_MAX_DIMS], dims[QR_MAX_DIMS], xs[QR_MAX_DIMS];
    qr_status st = slice_plan(k, start, step, dims);
    if (st != QR_OK)
        return st;
    int64_t n = qr_tensor_numel(y);
    if (n == 0)
        return QR_OK;
    qr_tensor_strides(x, xs);
    qr_iter it;
    qr_iter_init(&it, y, 1);
    for (int d = 0; d < y->ndim; d++) {
        it.stride[0][d] = step[d] * xs[d];
        it.off[0] += start[d] * xs[d];
    }
    size_t es = qr_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = y->data;
    int r = y->ndim;
    if (r > 0 && step[r - 1] == 1 && x->dtype != QR_STRING) {
        /* step 1 on the last axis: each output row is one run of the input */
        qr_tensor outer = {0};
        outer.ndim = r - 1;
        memcpy(outer.dims, y->dims, sizeof(int64_t) * (size_t)(r - 1));
        int64_t off = it.off[0], row = y->dims[r - 1];
        qr_iter_init(&it, &outer, 1);
        memcpy(it.stride[0], xs, sizeof(int64_t) * (size_t)(r - 1));
        for (int d = 0; d < r - 1; d++)
            it.stride[0][d] *= step[d];
        it.off[0] = off;
        for (int64_t i = 0; i < n / row; i++, qr_iter_next(&it))
            memcpy(dst + (size_t)(i * row) * es, src + (size_t)it.off[0] * es, (size_t)row * es);
        return QR_OK;
    }
    for (int64_t i = 0; i < n; i++, qr_iter_next(&it))
        cpy(dst + (size_t)i * es, src + (size_t)it.off[0] * es, es);
    return QR_OK;
}

/* ---- Shape -------------------------------------------------------------- */

static void shape_range(qr_kctx *k, int64_t *s, int64_t *e)
{
    int64_t r = k->in[0]->ndim;
    *s = 0;
    *e = r;
    if (k->opset >= 15) {
        *s = qr_attr_i(k->node, "start", 0);
        *e = qr_attr_i(k->node, "end", r);
    }
    if (*s < 0)
        *s += r;
    if (*e < 0)
        *e += r;
    *s = *s < 0 ? 0 : *s > r ? r : *s;
    *e = *e < 0 ? 0 : *e > r ? r : *e;
    if (*e < *s)
        *e = *s;
}

static qr_status shape_infer(qr_kctx *k)
{
    int64_t s, e;
    shape_range(k, &s, &e);
    int64_t n = e - s;
    return qr_set_out(k, 0, QR_I64, 1, &n);
}

/* Only the input's shape is read: the executor runs this before the input's data exists. */
static qr_status shape_run(qr_kctx *k)
{
    int64_t s, e;
    shape_range(k, &s, &e);
    int64_t *out = k->out[0]->data;
    for (int64_t i = s; i < e; i++)
        out[i - s] = k->in[0]->dims[i];
    return QR_OK;
}

/* ---- Gather ------------------------------------------------------------- */

static qr_status gather_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    int axis;
    if (x->ndim == 0)
        return QR_KERR(k, "cannot gather from a scalar");
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    if (idx->dtype != QR_I32 && idx->dtype != QR_I64)
        return QR_KERR(k, "indices must be int32 or int64, not %s", qr_dtype_name(idx->dtype));
    int r = x->ndim + idx->ndim - 1;
    if (r > QR_MAX_DIMS)
        return QR_KERR(k, "output rank %d is not supported (at most %d)", r, QR_MAX_DIMS);
    int64_t dims[QR_MAX_DIMS];
    int j = 0;
    for (int d = 0; d < axis; d++)
        dims[j++] = x->dims[d];
    for (int d = 0; d < idx->ndim; d++)
        dims[j++] = idx->dims[d];
    for (int d = axis + 1; d < x->ndim; d++)
        dims[j++] = x->dims[d];
    return qr_set_out(k, 0, x->dtype, r, dims);
}

static qr_status gather_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *idx = k->in[1];
    qr_tensor *y = k->out[0];
    int axis;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 0), x->ndim, &axis) != QR_OK)
        return QR_ERR;
    size_t es = qr_dtype_size(x->dtype);
    int64_t outer = qr_dims_prod(x->dims, 0, axis), inner = qr_dims_prod(x->dims, axis + 1, x->ndim), n = x->dims[axis];
    int64_t ni = qr_tensor_numel(idx);
    size_t block = (size_t)inner * es;
    char *dst = y->data;
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = qr_get_i64(idx->data, idx->dtype, j);
        if (v < -n || v >= n)
            return QR_KERR(k, "index %lld is out of range for axis %d of size %lld", (long long)v, axis, (long long)n);
    }
    if (!block)
        return QR_OK;
    for (int64_t o = 0; o < outer; o++) {
        const char *src = (const char *)x->data + (size_t)(o * n) * block;
        for (int64_t j = 0; j < ni; j++, dst += block) {
            int64_t v = qr_get_i64(idx->data, idx->dtype, j);
            if (v < 0)
                v += n;
            memcpy(dst, src + (size_t)v * block, block);
        }
    }
    return QR_OK;
}

/* ---- Pad ---------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Begin/end pads per dim and the mode. */
static qr_status pad_plan(qr_kctx *k, int64_t *begin, int64_t *end, int *mode)
{
    const qr_tensor *x = k->in[0];
    int r = x->ndim;
    int64_t pads[2 * QR_MAX_DIMS], axes[QR_MAX_DIMS];
    int np, na = -1;
    qr_status st;
    if (k->opset < 11) {
        st = attr_ints(k, "pads", pads, 2 * QR_MAX_DIMS, &np);
        if (st == QR_OK && np < 0)
            st = attr_ints(k, "paddings", pads, 2 * QR_MAX_DIMS, &np); /* opset 1 name */
        if (st == QR_OK && np < 0)
            return QR_KERR(k, "attribute 'pads' is required");
    } else {
        if (k->n_in < 2 || !k->in[1])
            return QR_KERR(k, "input 'pads' is required");
        st = in_ints(k, 1, "pads", pads, 2 * QR_MAX_DIMS, &np);
        if (st == QR_OK && k->n_in > 3 && k->in[3])
            st = in_ints(k, 3, "axes", axes, QR_MAX_DIMS, &na);
    }
    if (st != QR_OK)
        return st;
    const char *m = qr_attr_s(k->node, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0)
        *mode = PAD_WRAP;
    else
        return QR_KERR(k, "unknown mode '%s' (expected constant, reflect, edge or wrap)", m);
    int ax[QR_MAX_DIMS], mark[QR_MAX_DIMS];
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++)
            axes[i] = i;
    }
    if (np != 2 * na)
        return QR_KERR(k, "pads has %d values but %d are needed (2 per padded axis)", np, 2 * na);
    if (norm_axes(k, axes, na, r, ax, mark) != QR_OK)
        return QR_ERR;
    for (int d = 0; d < r; d++)
        begin[d] = end[d] = 0;
    for (int i = 0; i < na; i++) {
        int d = ax[i];
        begin[d] = pads[i];
        end[d] = pads[na + i];
        if (begin[d] < -x->dims[d] || end[d] < -x->dims[d] || begin[d] > (int64_t)1 << 40 || end[d] > (int64_t)1 << 40)
            return QR_KERR(k, "pads on axis %d (%lld, %lld) do not fit its size %lld", d, (long long)begin[d],
                           (long long)end[d], (long long)x->dims[d]);
        if (x->dims[d] + begin[d] + end[d] < 0)
            return QR_KERR(k, "pads on axis %d remove more than its %lld elements", d, (long long)x->dims[d]);
        if (*mode != PAD_CONSTANT && x->dims[d] == 0 && (begin[d] > 0 || end[d] > 0))
            return QR_KERR(k, "mode '%s' cannot pad the empty axis %d", m, d);
    }
    return QR_OK;
}

static qr_status pad_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t begin[QR_MAX_DIMS], end[QR_MAX_DIMS], dims[QR_MAX_DIMS];
    int mode;
    qr_status st = pad_plan(k, begin, end, &mode);
    if (st != QR_OK)
        return st;
    for (int d = 0; d < x->ndim; d++)
        dims[d] = x->dims[d] + begin[d] + end[d];
    if (k->opset >= 11 && k->n_in > 2 && k->in[2] && k->in[2]->dtype != x->dtype)
        return QR_KERR(k, "constant_value is %s but the data is %s", qr_dtype_name(k->in[2]->dtype),
                       qr_dtype_name(x->dtype));
    return qr_set_out(k, 0, x->dtype, x->ndim, dims);
}

/* Source index along an axis of size n for the padded position i (-1: the constant). */
static int64_t pad_src(int mode, int64_t i, int64_t n)
{
    if (i >= 0 && i < n)
        return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_WRAP: return ((i % n) + n) % n;
    case PAD_REFLECT: {
        if (n == 1)
            return 0;
        int64_t p = 2 * (n - 1);
        i = ((i % p) + p) % p;
        return i < n ? i : p - i;
    }
    default: return -1;
    }
}

static qr_status pad_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int64_t begin[QR_MAX_DIMS], end[QR_MAX_DIMS];
    int mode;
    qr_status st = pad_plan(k, begin, end, &mode);
    if (st != QR_OK)
        return st;
    int r = y->ndim;
    size_t es = qr_dtype_size(x->dtype);
    int64_t n = qr_tensor_numel(y);
    if (n == 0)
        return QR_OK;
    /* The fill value as one element of the data's type. */
    unsigned char value[16] = {0};
    if (k->opset < 11) {
        qr_set_f64(value, x->dtype, 0, qr_attr_f(k->node, "value", 0.0f));
    } else if (k->n_in > 2 && k->in[2] && k->in[2]->data && qr_tensor_numel(k->in[2]) > 0) {
        memcpy(value, k->in[2]->data, es);
    }
    if (r == 0) {
        cpy(y->data, x->data, es);
        return QR_OK;
    }
    /* map[d][o]: source index on axis d for output index o, -1 for the fill value. */
    int64_t total = 0, *map[QR_MAX_DIMS];
    for (int d = 0; d < r; d++)
        total += y->dims[d];
    int64_t *buf = malloc(sizeof(int64_t) * (size_t)total);
    if (!buf)
        return QR_KERR(k, "out of memory");
    for (int64_t d = 0, at = 0; d < r; d++) {
        map[d] = buf + at;
        at += y->dims[d];
        for (int64_t o = 0; o < y->dims[d]; o++)
            map[d][o] = pad_src(mode, o - begin[d], x->dims[d]);
    }
    int64_t xs[QR_MAX_DIMS], idx[QR_MAX_DIMS] = {0};
    qr_tensor_strides(x, xs);
    int64_t rows = n / y->dims[r - 1], w = y->dims[r - 1];
    const int64_t *last = map[r - 1];
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t row = 0; row < rows; row++) {
        int64_t base = 0;
        int fill = 0;
        for (int d = 0; d < r - 1; d++) {
            int64_t s = map[d][idx[d]];
            if (s < 0)
                fill = 1;
            base += s * xs[d];
        }
        for (int64_t o = 0; o < w;) { /* runs of consecutive sources copied whole */
            int64_t s = fill ? -1 : last[o], m = 1;
            if (s < 0) {
                cpy(dst, value, es);
            } else {
                while (o + m < w && last[o + m] == s + m)
                    m++;
                memcpy(dst, src + (size_t)(base + s) * es, (size_t)m * es);
            }
            o += m, dst += (size_t)m * es;
        }
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < y->dims[d])
                break;
            idx[d] = 0;
        }
    }
    free(buf);
    return QR_OK;
}

/* ---- Expand ------------------------------------------------------------- */

static qr_status expand_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t shape[QR_MAX_DIMS + 1];
    int n;
    qr_status st = in_ints(k, 1, "shape", shape, QR_MAX_DIMS + 1, &n);
    if (st != QR_OK)
        return st;
    if (n > QR_MAX_DIMS)
        return QR_KERR(k, "target rank %d is not supported (at most %d)", n, QR_MAX_DIMS);
    qr_tensor s = {.dtype = x->dtype, .ndim = n};
    for (int i = 0; i < n; i++) {
        if (shape[i] < 0)
            return QR_KERR(k, "shape entry %d is negative (%lld)", i, (long long)shape[i]);
        s.dims[i] = shape[i];
    }
    const qr_tensor *both[2] = {x, &s};
    qr_tensor out = {0};
    if (qr_broadcast_shapes(k, both, 2, &out) != QR_OK)
        return QR_ERR;
    return qr_set_out(k, 0, x->dtype, out.ndim, out.dims);
}

/* Copies x into y broadcasting it (y's shape is a broadcast of x's). */
static void broadcast_copy(const qr_tensor *x, qr_tensor *y)
{
    size_t es = qr_dtype_size(x->dtype);
    int64_t n = qr_tensor_numel(y);
    qr_iter it;
    qr_iter_init(&it, y, 1);
    qr_broadcast_strides(x, y, it.stride[0]);
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t i = 0; i < n; i++, qr_iter_next(&it))
        cpy(dst + (size_t)i * es, src + (size_t)it.off[0] * es, es);
}

static qr_status expand_run(qr_kctx *k)
{
    broadcast_copy(k->in[0], k->out[0]);
    return QR_OK;
}

/* ---- ConstantOfShape, Range --------------------------------------------- */

static qr_status cos_value(qr_kctx *k, const qr_tensor **v)
{
    const qr_attr *a = qr_node_attr(k->node, "value");
    *v = NULL;
    if (!a)
        return QR_OK;
    if (qr_tensor_numel(&a->t) != 1 || !a->t.data)
        return QR_KERR(k, "attribute 'value' must hold exactly one element");
    if (a->t.dtype == QR_STRING || a->t.dtype == QR_UNDEF)
        return QR_KERR(k, "attribute 'value' has an unsupported type");
    *v = &a->t;
    return QR_OK;
}

static qr_status cos_infer(qr_kctx *k)
{
    const qr_tensor *v;
    int64_t shape[QR_MAX_DIMS + 1];
    int n;
    qr_status st = cos_value(k, &v);
    if (st == QR_OK)
        st = in_ints(k, 0, "input", shape, QR_MAX_DIMS + 1, &n);
    if (st != QR_OK)
        return st;
    if (n > QR_MAX_DIMS)
        return QR_KERR(k, "output rank %d is not supported (at most %d)", n, QR_MAX_DIMS);
    return qr_set_out(k, 0, v ? v->dtype : QR_F32, n, shape);
}

static qr_status cos_run(qr_kctx *k)
{
    const qr_tensor *v;
    if (cos_value(k, &v) != QR_OK)
        return QR_ERR;
    qr_tensor *y = k->out[0];
    if (!v)
        return QR_OK; /* float zeros: the output arrives zeroed */
    size_t es = qr_dtype_size(y->dtype);
    int64_t n = qr_tensor_numel(y);
    char *dst = y->data;
    for (int64_t i = 0; i < n; i++)
        cpy(dst + (size_t)i * es, v->data, es);
    return QR_OK;
}

/* Range's element count, computed in the inputs' own type as the spec does. */
static qr_status range_count(qr_kctx *k, int64_t *count)
{
    const qr_tensor *t[3] = {k->in[0], k->in[1], k->in[2]};
    static const char *const names[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; i++) {
        if (qr_tensor_numel(t[i]) != 1)
            return QR_KERR(k, "input '%s' must be a scalar", names[i]);
        if (t[i]->dtype != t[0]->dtype)
            return QR_KERR(k, "input '%s' is %s but start is %s", names[i], qr_dtype_name(t[i]->dtype),
                           qr_dtype_name(t[0]->dtype));
        if (t[i]->dtype == QR_BOOL || t[i]->dtype == QR_STRING)
            return QR_KERR(k, "Range does not accept %s", qr_dtype_name(t[i]->dtype));
    }
    for (int i = 0; i < 3; i++)
        if (!t[i]->data)
            return QR_NEED_DATA;
    qr_dtype dt = t[0]->dtype;
    const double limit = (double)((int64_t)1 << 40);
    if (qr_dtype_is_int(dt)) {
        int64_t s = qr_get_i64(t[0]->data, dt, 0), l = qr_get_i64(t[1]->data, dt, 0),
                d = qr_get_i64(t[2]->data, dt, 0);
        if (d == 0)
            return QR_KERR(k, "delta is 0");
        /* Unsigned differences cannot overflow. */
        uint64_t span, step;
        if (d > 0) {
            span = l > s ? (uint64_t)l - (uint64_t)s : 0;
            step = (uint64_t)d;
        } else {
            span = s > l ? (uint64_t)s - (uint64_t)l : 0;
            step = (uint64_t)0 - (uint64_t)d;
        }
        uint64_t c = span ? (span - 1) / step + 1 : 0;
        if ((double)c > limit)
            return QR_KERR(k, "Range would produce %llu elements", (unsigned long long)c);
        *count = (int64_t)c;
        return QR_OK;
    }
    double c;
    if (dt == QR_F64) {
        double s = qr_get_f64(t[0]->data, dt, 0), l = qr_get_f64(t[1]->data, dt, 0), d = qr_get_f64(t[2]->data, dt, 0);
        if (d == 0)
            return QR_KERR(k, "delta is 0");
        c = ceil((l - s) / d);
    } else {
        float s = (float)qr_get_f64(t[0]->data, dt, 0), l = (float)qr_get_f64(t[1]->data, dt, 0),
              d = (float)qr_get_f64(t[2]->data, dt, 0);
        if (d == 0)
            return QR_KERR(k, "delta is 0");
        c = ceilf((l - s) / d);
    }
    if (isnan(c) || c > limit)
        return QR_KERR(k, "Range would produce too many elements");
    *count = c > 0 ? (int64_t)c : 0;
    return QR_OK;
}

static qr_status range_infer(qr_kctx *k)
{
    int64_t n;
    qr_status st = range_count(k, &n);
    if (st != QR_OK)
        return st;
    return qr_set_out(k, 0, k->in[0]->dtype, 1, &n);
}

static qr_status range_run(qr_kctx *k)
{
    qr_tensor *y = k->out[0];
    qr_dtype dt = y->dtype;
    int64_t n = y->dims[0];
    const void *s = k->in[0]->data, *d = k->in[2]->data;
    if (dt == QR_F32) {
        float a = *(const float *)s, b = *(const float *)d;
        for (int64_t i = 0; i < n; i++)
            ((float *)y->data)[i] = a + (float)i * b;
    } else if (qr_dtype_is_int(dt)) {
        int64_t a = qr_get_i64(s, dt, 0), b = qr_get_i64(d, dt, 0);
        for (int64_t i = 0; i < n; i++)
            qr_set_i64(y->data, dt, i, (int64_t)((uint64_t)a + (uint64_t)i * (uint64_t)b));
    } else {
        double a = qr_get_f64(s, dt, 0), b = qr_get_f64(d, dt, 0);
        for (int64_t i = 0; i < n; i++)
            qr_set_f64(y->data, dt, i, a + (double)i * b);
    }
    return QR_OK;
}

/* ---- the table ---------------------------------------------------------- */

/* qr_op_def.samples: axis 0 stays the samples' when Flatten keeps it apart, and when Transpose
 * leaves it first */
static int flatten_samples(const qr_node *n, int j)
{
    (void)j;
    return qr_attr_i(n, "axis", 1) >= 1 ? QR_SAMPLES_EACH : QR_SAMPLES_MIXED;
}

static int transpose_samples(const qr_node *n, int j)
{
    (void)j;
    const int64_t *perm;
    int np = qr_attr_ints(n, "perm", &perm);
    return np >= 1 && perm[0] == 0 ? QR_SAMPLES_EACH : QR_SAMPLES_MIXED;
}

const qr_op_def qr_ops_shape[] = {
    {"Flatten", "", 1, 1, 1, 1, "axis:i", flatten_infer, copy_whole, QR_INPLACE_VIEW, .writes_all = qr_op_writes_all,
     .samples = flatten_samples},
    {"Reshape", "", 1, 2, 1, 1, "allowzero:i shape:ints", reshape_infer, copy_whole, QR_INPLACE_VIEW, .ins = "data shape:x1",
     .writes_all = qr_op_writes_all},
    {"Transpose", "", 1, 1, 1, 1, "perm:ints", transpose_infer, transpose_run, 0, .writes_all = qr_op_writes_all,
     .samples = transpose_samples},
    {"Concat", "", 1, 4096, 1, 1, "axis:i", concat_infer, concat_run, 0, .ins = "inputs..."},
    {"Split", "", 1, 2, 1, MAX_SPLITS, "axis:i split:ints num_outputs:i", split_infer, split_run, 0, .ins = "input split?:x1"},
    {"Slice", "", 1, 5, 1, 1, "starts:ints ends:ints axes:ints", slice_infer, slice_run, 0, .ins = "data starts:x1 ends:x1 axes?:x1 steps?:x1",
     .writes_all = qr_op_writes_all},
    {"Squeeze", "", 1, 2, 1, 1, "axes:ints", squeeze_infer, copy_whole, QR_INPLACE_VIEW, .ins = "data axes?:x0-1",
     .writes_all = qr_op_writes_all},
    {"Unsqueeze", "", 1, 2, 1, 1, "axes:ints", unsqueeze_infer, copy_whole, QR_INPLACE_VIEW, .ins = "data axes?:x0-1",
     .writes_all = qr_op_writes_all},
    {"Shape", "", 1, 1, 1, 1, "start:i end:i", shape_infer, shape_run, 0},
    {"Gather", "", 2, 2, 1, 1, "axis:i", gather_infer, gather_run, 0, .ins = "data:1+ indices:x"},
    {"Pad", "", 1, 4, 1, 1, "mode:s pads:ints paddings:ints value:f", pad_infer, pad_run, 0, .ins = "data pads:x1 constant_value?:0-1 axes?:x1"},
    {"Expand", "", 2, 2, 1, 1, "", expand_infer, expand_run, 0, .ins = "input shape:x1"},
    {"ConstantOfShape", "", 1, 1, 1, 1, "value:t", cos_infer, cos_run, 0, .ins = "input:x1"},
    {"Range", "", 3, 3, 1, 1, "", range_infer, range_run, 0, .ins = "start:0-1 limit:0-1 delta:0-1"},
    {"Resize", "", 1, 4, 1, 1,
     "mode:s coordinate_transformation_mode:s cubic_coeff_a:f exclude_outside:i extrapolation_value:f "
     "nearest_mode:s antialias:i axes:ints keep_aspect_ratio_policy:s",
     qr_resize_infer, qr_resize_run, 0, .ins = "X:1+ roi?:f1 scales?:f1 sizes?:x1"},
    {"Upsample", "", 1, 2, 1, 1, "mode:s scales:floats", qr_upsample_infer, qr_upsample_run, 0, .ins = "X:1+ scales:f1"},
    {0},
};
