/* Helpers shared by the kernels in runtime/ops/ (internal to the runtime). */
#ifndef QR_OPS_COMMON_H
#define QR_OPS_COMMON_H

#include "../op.h"

/* Tables of ops, each terminated by a row with name == NULL. */
extern const qr_op_def qr_ops_elementwise[];
extern const qr_op_def qr_ops_conv[];     /* Conv, ConvTranspose, MaxPool, AveragePool, Global*Pool, MaxUnpool */
extern const qr_op_def qr_ops_dense[];    /* Gemm, MatMul, (Log)Softmax, Batch/Layer/InstanceNormalization */
extern const qr_op_def qr_ops_shape[];    /* Flatten, Reshape, Transpose, Concat, Split, Slice, Squeeze, Unsqueeze,
                                            Shape, Gather, Pad, Expand, ConstantOfShape, Range, Resize, Upsample */
extern const qr_op_def qr_ops_reduce[];  /* Reduce*, ArgMax, ArgMin */
extern const qr_op_def qr_ops_quant[];   /* (Dynamic)QuantizeLinear, DequantizeLinear, QLinear*, *Integer */
extern const qr_op_def qr_ops_misc[];   /* Size, Tile, DepthToSpace, SpaceToDepth, GatherElements, ScatterElements,
                                            Scatter, GatherND, ScatterND, CumSum, Hardmax, TopK, Trilu, OneHot,
                                            EyeLike, LRN, MeanVarianceNormalization, NonZero, Compress */

/* DynamicQuantizeLinear's scale and zero point for n f32 values (quant.c: the kernel's own, so the
 * integer graph's run-time quantization of them): the quantizer's dynamic fallback measures with it. */
void qr_dynquant_params(const float *x, int64_t n, float *scale, int64_t *zp);

/* Normalizes a possibly negative axis into [0, rank); QR_ERR when out of range. */
qr_status qr_norm_axis(qr_kctx *k, int64_t axis, int rank, int *out);
/* Multidirectional (numpy) broadcast of n shapes into out's ndim/dims. */
qr_status qr_broadcast_shapes(qr_kctx *k, const qr_tensor *const *ts, int n, qr_tensor *out);
/* Strides (in elements) to read `in` at each index of `out`'s shape: 0 on broadcast dims. */
void qr_broadcast_strides(const qr_tensor *in, const qr_tensor *out, int64_t *strides);
/* Reads an integer-typed 1-D (or scalar) tensor's values into v (at most max); returns count or -1. */
int qr_read_ints(const qr_tensor *t, int64_t *v, int max);
/* Output shape helper: copies dtype and shape of src into dst. */
void qr_same_as(qr_tensor *dst, const qr_tensor *src);

/* Product of dims[from..to): the element count of that run of axes. */
static inline int64_t qr_dims_prod(const int64_t *dims, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++)
        n *= dims[d];
    return n;
}

/* Element i of a tensor's data as a double, and back: fast paths for f32 and f64. */
static inline double qr_ld(const void *p, qr_dtype t, int64_t i)
{
    if (t == QR_F32)
        return ((const float *)p)[i];
    if (t == QR_F64)
        return ((const double *)p)[i];
    return qr_get_f64(p, t, i);
}

static inline void qr_st(void *p, qr_dtype t, int64_t i, double v)
{
    if (t == QR_F32)
        ((float *)p)[i] = (float)v;
    else if (t == QR_F64)
        ((double *)p)[i] = v;
    else
        qr_set_f64(p, t, i, v);
}

/* Sets output j's type and shape and refuses absurd sizes. */
qr_status qr_set_out(qr_kctx *k, int j, qr_dtype dt, int ndim, const int64_t *dims);

/* c[m][n] = sum over q of a[r * a_rs + q * a_cs] * b[q * n + x], each sum in q order from 0, on
 * k's threads: with FMA where the CPU has it (sgemm.h: the same bits as a loop of fmaf in q
 * order), else without (conv.c's register-tiled GEMM: a loop adding the products in q order).
 * nbatch products (the threads take whole ones when there are several): product p reads a from
 * aoff[p] and b from boff[p] elements on (NULL: 0) and writes c from p * m * n on. QR_ERR with
 * the error set when the packing's workspace fails. */
qr_status qr_gemm_f32(qr_kctx *k, const float *a, int64_t a_rs, int64_t a_cs, const float *b, float *c, int64_t m,
                      int64_t n, int64_t kdim, int64_t nbatch, const int64_t *aoff, const int64_t *boff);

/* Iterates the indices of a shape in row-major order, tracking up to 4 operand offsets. */
typedef struct qr_iter {
    int ndim;
    int64_t dims[QR_MAX_DIMS];
    int64_t idx[QR_MAX_DIMS];
    int nops;
    int64_t stride[4][QR_MAX_DIMS];
    int64_t off[4];
} qr_iter;
void qr_iter_init(qr_iter *it, const qr_tensor *shape, int nops);
/* Advance to the next index; offsets follow. */
static inline void qr_iter_next(qr_iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        for (int o = 0; o < it->nops; o++)
            it->off[o] += it->stride[o][d];
        if (++it->idx[d] < it->dims[d])
            return;
        for (int o = 0; o < it->nops; o++)
            it->off[o] -= it->stride[o][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

#endif
