/* Quantization ops: QuantizeLinear, DequantizeLinear, and the integer kernels
 * MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
 * Arithmetic follows the ONNX reference implementation so results are bit
 * exact: integer products accumulate exactly (wrapping to int32 only at the
 * end), requantization multiplies float(acc) by the float32 multiplier
 * (a_scale * b_scale) / y_scale, adds the zero point, rounds half to even and
 * saturates. int4/uint4 (packed, QR_I4/QR_U4) go through the generic element loops;
 * float8 types are not in qr_dtype, so not supported. */
#include "conv_epilogue.h"
#include "conv_geom.h"
#include "f32_rows.h"
#include "igemm.h"
#include "options.h"
#include "q4gemm.h"
#include "rint_div_avx512.h"
#include "sgemm.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- element access for the integer types these ops take ---- */

static inline int64_t get_int(const void *d, qr_dtype t, int64_t i)
{
    switch (t) {
    case QR_U8: return ((const uint8_t *)d)[i];
    case QR_I8: return ((const int8_t *)d)[i];
    case QR_U16: return ((const uint16_t *)d)[i];
    case QR_I16: return ((const int16_t *)d)[i];
    case QR_I32: return ((const int32_t *)d)[i];
    default: return qr_get_i64(d, t, i);
    }
}

static inline void put_int(void *d, qr_dtype t, int64_t i, int64_t v)
{
    switch (t) {
    case QR_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case QR_I8: ((int8_t *)d)[i] = (int8_t)v; break;
    case QR_U16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case QR_I16: ((int16_t *)d)[i] = (int16_t)v; break;
    case QR_I32: ((int32_t *)d)[i] = (int32_t)v; break;
    default: qr_set_i64(d, t, i, v); break;
    }
}

/* Range of a quantized output type; 0 when the type cannot be a quantization target. */
static int quant_range(qr_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case QR_U8: *lo = 0; *hi = UINT8_MAX; return 1;
    case QR_I8: *lo = INT8_MIN; *hi = INT8_MAX; return 1;
    case QR_U16: *lo = 0; *hi = UINT16_MAX; return 1;
    case QR_I16: *lo = INT16_MIN; *hi = INT16_MAX; return 1;
    case QR_I32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case QR_U4: *lo = 0; *hi = 15; return 1;
    case QR_I4: *lo = -8; *hi = 7; return 1;
    default: return 0;
    }
}

/* Round half to even (rint in the default rounding mode), add the zero point,
 * saturate. NaN maps to the zero point. */
static inline int64_t saturate_round(double v, int64_t zp, int64_t lo, int64_t hi)
{
    if (isnan(v))
        v = 0;
    v = rint(v) + (double)zp;
    return v <= (double)lo ? lo : v >= (double)hi ? hi : (int64_t)v;
}

static int is_8bit(qr_dtype t) { return t == QR_U8 || t == QR_I8; }
static int is_16bit(qr_dtype t) { return t == QR_U16 || t == QR_I16; }

/* MatMulInteger's and ConvInteger's accumulator: int32 as ONNX has it for 8-bit operands; int64
 * when an operand has 16 bits (QRL's integer graph with u16/i16 activations), whose sums int32
 * would overflow after a few hundred terms. */
static qr_dtype acc_type(const qr_tensor *a, const qr_tensor *b)
{
    return is_16bit(a->dtype) || is_16bit(b->dtype) ? QR_I64 : QR_I32;
}

/* ---- QuantizeLinear / DequantizeLinear: scale layouts ---- */

enum { LAYOUT_TENSOR, LAYOUT_AXIS, LAYOUT_BLOCKED };

/* x viewed as [outer, axis_len, inner]; a scale index per element follows from
 * the layout: 0, the axis index, or the block's position. */
typedef struct qlayout {
    int mode;
    int64_t outer, axis_len, inner, block, nblocks;
} qlayout;

static qr_status q_layout(qr_kctx *k, const qr_tensor *x, const qr_tensor *scale, const qr_tensor *zp,
                          qlayout *L)
{
    memset(L, 0, sizeof *L);
    int64_t ns = qr_tensor_numel(scale);
    if (zp && qr_tensor_numel(zp) != ns)
        return QR_KERR(k, "the zero point has %lld values but the scale %lld; they must have the same shape",
                       (long long)qr_tensor_numel(zp), (long long)ns);
    int64_t block = qr_attr_i(k->node, "block_size", 0);
    if (block < 0 || block > QR_MAX_TENSOR_BYTES)
        return QR_KERR(k, "block_size %lld must be from 0 to %lld", (long long)block, (long long)QR_MAX_TENSOR_BYTES);
    if (block == 0 && ns == 1) {
        L->mode = LAYOUT_TENSOR;
        L->outer = L->axis_len = 1;
        L->inner = qr_tensor_numel(x);
        return QR_OK;
    }
    int ax;
    if (qr_norm_axis(k, qr_attr_i(k->node, "axis", 1), x->ndim, &ax) != QR_OK)
        return QR_ERR;
    L->outer = L->inner = 1;
    for (int d = 0; d < ax; d++)
        L->outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        L->inner *= x->dims[d];
    L->axis_len = x->dims[ax];
    if (block == 0) {
        if (scale->ndim != 1 || scale->dims[0] != L->axis_len)
            return QR_KERR(k, "the scale must be a scalar or a vector of %lld values (the size of axis %d), "
                              "or set block_size for blocked quantization",
                           (long long)L->axis_len, ax);
        L->mode = LAYOUT_AXIS;
        return QR_OK;
    }
    L->mode = LAYOUT_BLOCKED;
    L->block = block;
    L->nblocks = (L->axis_len + block - 1) / block;
    if (scale->ndim != x->ndim)
        return QR_KERR(k, "blocked quantization needs a scale of the input's rank %d, got rank %d", x->ndim,
                       scale->ndim);
    for (int d = 0; d < x->ndim; d++) {
        int64_t want = d == ax ? L->nblocks : x->dims[d];
        if (scale->dims[d] != want)
            return QR_KERR(k, "blocked quantization: scale dimension %d is %lld, expected %lld", d,
                           (long long)scale->dims[d], (long long)want);
    }
    if (zp && !qr_tensor_same_shape(zp, scale))
        return QR_KERR(k, "blocked quantization: the zero point must have the scale's shape");
    return QR_OK;
}

/* Scale index of element (o, a, i). */
static inline int64_t q_index(const qlayout *L, int64_t o, int64_t a, int64_t i)
{
    switch (L->mode) {
    case LAYOUT_AXIS: return a;
    case LAYOUT_BLOCKED: return (o * L->nblocks + a / L->block) * L->inner + i;
    default: return 0;
    }
}

/* Scales as doubles and zero points as integers (0 when absent), ns of each. */
static qr_status q_params(qr_kctx *k, const qr_tensor *scale, const qr_tensor *zp, double **sc, int64_t **zv)
{
    int64_t ns = qr_tensor_numel(scale);
    *sc = malloc((size_t)ns * sizeof(double) + 1);
    *zv = malloc((size_t)ns * sizeof(int64_t) + 1);
    if (!*sc || !*zv) {
        free(*sc);
        free(*zv);
        return QR_KERR(k, "out of memory");
    }
    for (int64_t i = 0; i < ns; i++) {
        (*sc)[i] = qr_get_f64(scale->data, scale->dtype, i);
        (*zv)[i] = zp ? get_int(zp->data, zp->dtype, i) : 0;
    }
    return QR_OK;
}

static qr_status quantize_out_type(qr_kctx *k, qr_dtype *t)
{
    const qr_tensor *zp = k->n_in > 2 ? k->in[2] : NULL;
    int64_t od = qr_attr_i(k->node, "output_dtype", 0);
    /* Range-checked before narrowing: 2^32 + 2 is not uint8. */
    qr_dtype want = od > 0 && od <= INT32_MAX ? qr_dtype_from_onnx((int)od) : QR_UNDEF;
    if (od && want == QR_UNDEF)
        return QR_KERR(k, "output_dtype %lld is not a supported quantized type (float8 is not supported)",
                       (long long)od);
    if (zp && od && zp->dtype != want)
        return QR_KERR(k, "output_dtype %s differs from the zero point's type %s", qr_dtype_name(want),
                       qr_dtype_name(zp->dtype));
    *t = zp ? zp->dtype : od ? want : QR_U8;
    int64_t lo = 0, hi = 0;
    if (!quant_range(*t, &lo, &hi) || *t == QR_I32)
        return QR_KERR(k, "cannot quantize to %s: the output must be uint8, int8, uint16, int16, uint4 or int4 "
                          "(float8 is not supported)",
                       qr_dtype_name(*t));
    return QR_OK;
}

static qr_status quantize_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *scale = k->in[1], *zp = k->n_in > 2 ? k->in[2] : NULL;
    if (!qr_dtype_is_float(x->dtype) && x->dtype != QR_I32)
        return QR_KERR(k, "QuantizeLinear takes float or int32 input, not %s", qr_dtype_name(x->dtype));
    if (!qr_dtype_is_float(scale->dtype))
        return QR_KERR(k, "the scale must be a float tensor, not %s", qr_dtype_name(scale->dtype));
    qr_dtype t = QR_UNDEF;
    qlayout L;
    if (quantize_out_type(k, &t) != QR_OK || q_layout(k, x, scale, zp, &L) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], x);
    k->out[0]->dtype = t;
    return QR_OK;
}

/* 1 when the CPU has AVX-512F (and BW and VL for the masked byte store) and the quant option
 * (qr_options) is not "portable" (tests compare both paths). */
static int quant_avx512(void)
{
    if (qr_options_get()->quant_portable)
        return 0;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* QuantizeLinear of f32 with one scale, the common case, in float and branch-free so it
 * vectorizes: the same results as saturate_round's double path (NaN as 0; rintf of a float is rint
 * of it; adding the zero point, at most 65535, is exact wherever the clamp does not decide anyway,
 * since below 2^24 both are small integers). One loop per output width: u8/i8, u16/i16. */
#define QUANTIZE_F32_LOOP(name, UT, ST)                                                                    \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void name(                        \
        const float *x, void *y, int is_unsigned, int64_t n, float s, float z, float lo, float hi)          \
    {                                                                                                      \
        UT *yu = y;                                                                                        \
        ST *yi = y;                                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                                  \
            float q = x[i] / s;                                                                            \
            q = q == q ? q : 0.0f;                                                                         \
            q = __builtin_rintf(q) + z;                                                                    \
            q = q <= lo ? lo : q >= hi ? hi : q;                                                           \
            if (is_unsigned)                                                                               \
                yu[i] = (UT)(int32_t)q;                                                                    \
            else                                                                                           \
                yi[i] = (ST)(int32_t)q;                                                                    \
        }                                                                                                  \
    }
QUANTIZE_F32_LOOP(quantize_f32_8bit, uint8_t, int8_t)
QUANTIZE_F32_LOOP(quantize_f32_16bit, uint16_t, int16_t)

/* The same with AVX-512 intrinsics, 16 at a time (the clone above, in ymm, packed each vector to
 * bytes through three packs and permutes): the same operations, so the same bits (vdivps rounds
 * as the scalar division; vrndscaleps in the current mode is rintf; vmaxps/vminps keep the
 * compares' choice here, no NaN being left), then vpmovdb, which keeps the low byte of values
 * already in the type's range. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void quantize_f32_8bit_avx512(const float *x, void *y, int64_t n, float s,
                                                                        float z, float lo, float hi)
{
    /* rint(x / s) by x * (1 / s) where that gives the same bits (rint_div_avx512.h): the
     * division's 10 or so cycles a vector were DynamicQuantizeRows' main cost */
    const qr_rint_div rd = qr_rint_div_init(s);
    const __m512 zv = _mm512_set1_ps(z), lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
    uint8_t *yb = y;
    for (int64_t i = 0; i < n; i += 16) {
        /* plain loads and stores for whole vectors: masked ones are slow on Zen 5 */
        int whole = n - i >= 16;
        __mmask16 m = whole ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 xv = whole ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(m, x + i), q;
        __m512 rq = qr_rint_div_zmm(&rd, xv);
        q = _mm512_add_ps(rq, zv);
        q = _mm512_min_ps(_mm512_max_ps(q, lov), hiv);
        __m128i b = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q));
        if (whole)
            _mm_storeu_si128((__m128i *)(void *)(yb + i), b);
        else
            _mm_mask_storeu_epi8(yb + i, m, b);
    }
}

static qr_status quantize_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *scale = k->in[1], *zp = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    qlayout L;
    double *sc;
    int64_t *zv, lo = 0, hi = 0;
    if (q_layout(k, x, scale, zp, &L) != QR_OK || q_params(k, scale, zp, &sc, &zv) != QR_OK)
        return QR_ERR;
    quant_range(y->dtype, &lo, &hi);
    if (qr_dtype_is_packed(y->dtype))
        memset(y->data, 0, qr_tensor_nbytes(y)); /* an odd count's last high nibble stays 0, as ONNX packs */
    /* The reference divides in the input's precision: float32 (and float16,
     * here widened to float) in float, int32 and float64 in double. */
    int in_float = x->dtype == QR_F32 || x->dtype == QR_F16;
    const float *xf = x->dtype == QR_F32 ? x->data : NULL;
    if (xf && L.mode == LAYOUT_TENSOR && is_8bit(y->dtype)) {
        if (quant_avx512())
            quantize_f32_8bit_avx512(xf, y->data, qr_tensor_numel(x), (float)sc[0], (float)zv[0], (float)lo,
                                     (float)hi);
        else
            quantize_f32_8bit(xf, y->data, y->dtype == QR_U8, qr_tensor_numel(x), (float)sc[0], (float)zv[0],
                              (float)lo, (float)hi);
        free(sc);
        free(zv);
        return QR_OK;
    }
    if (xf && L.mode == LAYOUT_TENSOR && is_16bit(y->dtype)) {
        quantize_f32_16bit(xf, y->data, y->dtype == QR_U16, qr_tensor_numel(x), (float)sc[0], (float)zv[0], (float)lo,
                           (float)hi);
        free(sc);
        free(zv);
        return QR_OK;
    }
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t a = 0; a < L.axis_len; a++) {
            int64_t e = (o * L.axis_len + a) * L.inner;
            for (int64_t i = 0; i < L.inner; i++, e++) {
                int64_t p = q_index(&L, o, a, i);
                double q;
                if (in_float) {
                    float v = xf ? xf[e] : (float)qr_get_f64(x->data, x->dtype, e);
                    q = v / (float)sc[p];
                } else {
                    q = qr_get_f64(x->data, x->dtype, e) / sc[p];
                }
                put_int(y->data, y->dtype, e, saturate_round(q, zv[p], lo, hi));
            }
        }
    free(sc);
    free(zv);
    return QR_OK;
}

static qr_status dequantize_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *scale = k->in[1], *zp = k->n_in > 2 ? k->in[2] : NULL;
    int64_t lo = 0, hi = 0;
    if (!quant_range(x->dtype, &lo, &hi))
        return QR_KERR(k, "DequantizeLinear takes int8, uint8, int16, uint16, int32, int4 or uint4 input, not %s "
                          "(float8 is not supported)",
                       qr_dtype_name(x->dtype));
    if (!qr_dtype_is_float(scale->dtype))
        return QR_KERR(k, "the scale must be a float tensor, not %s", qr_dtype_name(scale->dtype));
    if (zp && zp->dtype != x->dtype)
        return QR_KERR(k, "the zero point's type %s differs from the input's type %s", qr_dtype_name(zp->dtype),
                       qr_dtype_name(x->dtype));
    qr_dtype t = scale->dtype;
    int64_t od = qr_attr_i(k->node, "output_dtype", 0); /* opset 23; harmless before */
    if (od) {
        t = od > 0 && od <= INT32_MAX ? qr_dtype_from_onnx((int)od) : QR_UNDEF;
        if (!qr_dtype_is_float(t))
            return QR_KERR(k, "output_dtype %lld is not a supported float type", (long long)od);
    }
    qlayout L;
    if (q_layout(k, x, scale, zp, &L) != QR_OK)
        return QR_ERR;
    qr_same_as(k->out[0], x);
    k->out[0]->dtype = t;
    return QR_OK;
}

/* 8-bit x to f32 y, one scale and zero point per run of inner elements (per tensor or per
 * axis): the same float arithmetic as the generic loop, in loops the compiler vectorizes (the
 * generic one read each element through a type switch: 2 ns each, 6% of a mixed MobileNetV2). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
dequantize_8bit_f32(const qr_tensor *x, const qlayout *L, const double *sc, const int64_t *zv, float *y)
{
    for (int64_t o = 0; o < L->outer; o++)
        for (int64_t a = 0; a < L->axis_len; a++) {
            int64_t e = (o * L->axis_len + a) * L->inner, p = q_index(L, o, a, 0);
            float s = (float)sc[p];
            int32_t z = (int32_t)zv[p];
            float *yo = y + e;
            if (x->dtype == QR_U8) {
                const uint8_t *xi = (const uint8_t *)x->data + e;
                for (int64_t i = 0; i < L->inner; i++)
                    yo[i] = (float)((int32_t)xi[i] - z) * s;
            } else {
                const int8_t *xi = (const int8_t *)x->data + e;
                for (int64_t i = 0; i < L->inner; i++)
                    yo[i] = (float)((int32_t)xi[i] - z) * s;
            }
        }
}

static qr_status dequantize_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *scale = k->in[1], *zp = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    qlayout L;
    double *sc;
    int64_t *zv;
    if (q_layout(k, x, scale, zp, &L) != QR_OK || q_params(k, scale, zp, &sc, &zv) != QR_OK)
        return QR_ERR;
    /* (x - zero_point) then one float multiply, as onnxruntime and the
     * reference do for float32 scales; float64 scales multiply in double. */
    int in_double = scale->dtype == QR_F64;
    float *yf = y->dtype == QR_F32 ? y->data : NULL;
    if (yf && !in_double && L.mode != LAYOUT_BLOCKED && (x->dtype == QR_U8 || x->dtype == QR_I8)) {
        dequantize_8bit_f32(x, &L, sc, zv, yf);
        free(sc);
        free(zv);
        return QR_OK;
    }
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t a = 0; a < L.axis_len; a++) {
            int64_t e = (o * L.axis_len + a) * L.inner;
            for (int64_t i = 0; i < L.inner; i++, e++) {
                int64_t p = q_index(&L, o, a, i), d = get_int(x->data, x->dtype, e) - zv[p];
                if (in_double) {
                    qr_set_f64(y->data, y->dtype, e, (double)d * sc[p]);
                } else {
                    float v = (float)d * (float)sc[p];
                    if (yf)
                        yf[e] = v;
                    else
                        qr_set_f64(y->data, y->dtype, e, v);
                }
            }
        }
    free(sc);
    free(zv);
    return QR_OK;
}

/* DynamicQuantizeLinear: uint8 quantization of float32 x over the range
 * [min(0, min x), max(0, max x)], all in float32 as the reference does. */
static qr_status dynquant_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    if (x->dtype != QR_F32)
        return QR_KERR(k, "DynamicQuantizeLinear takes float32 input, not %s", qr_dtype_name(x->dtype));
    qr_same_as(k->out[0], x);
    k->out[0]->dtype = QR_U8;
    for (int o = 1; o < k->n_out; o++) {
        k->out[o]->dtype = o == 1 ? QR_F32 : QR_U8;
        k->out[o]->ndim = 0;
    }
    return QR_OK;
}

/* DynamicQuantizeLinear's scale and zero point for n values (ONNX's formula, as ONNX Runtime computes
 * it): NaN does not widen the range, which holds 0, so it is empty only for values all 0: scale 1 then
 * (the spec's 0 would divide by 0). The zero point is clamped to [0, 255], then rounded half to even. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void dynquant_range(const float *x, int64_t n,
                                                                                     float *lo_out, float *hi_out)
{
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; i++) { /* a NaN keeps the bound: what minps and maxps do */
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *lo_out = lo;
    *hi_out = hi;
}

/* The same range with AVX-512: minps(x, lo) is x < lo ? x : lo lane by lane (a NaN keeps the
 * bound), two vectors of lanes, then the lanes' min and max. Min and max are exact, so the
 * lanes' order changes nothing: no NaN is among them, and no lane holds -0 (-0 < +0 is false:
 * the starting +0 stays), so the bits are the loop's. Lanes past n load as 0, inside the range.
 * range_lanes leaves the lanes unreduced in *lo and *hi. */
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
TARGET_AVX512 static inline void range_lanes(const float *x, int64_t n, __m512 *lo, __m512 *hi)
{
    __m512 lo0 = _mm512_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        lo0 = _mm512_min_ps(v0, lo0);
        hi0 = _mm512_max_ps(v0, hi0);
        lo1 = _mm512_min_ps(v1, lo1);
        hi1 = _mm512_max_ps(v1, hi1);
    }
    for (; i < n; i += 16) {
        __m512 v = n - i >= 16 ? _mm512_loadu_ps(x + i)
                               : _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), x + i);
        lo0 = _mm512_min_ps(v, lo0);
        hi0 = _mm512_max_ps(v, hi0);
    }
    *lo = _mm512_min_ps(lo0, lo1);
    *hi = _mm512_max_ps(hi0, hi1);
}

TARGET_AVX512 static void dynquant_range_avx512(const float *x, int64_t n, float *lo_out, float *hi_out)
{
    __m512 lo, hi;
    range_lanes(x, n, &lo, &hi);
    *lo_out = _mm512_reduce_min_ps(lo);
    *hi_out = _mm512_reduce_max_ps(hi);
}

/* simd: the AVX-512 loops (quant_avx512(), asked once per node) */
static void dynquant_params(const float *x, int64_t n, float *scale, int64_t *zp, int simd)
{
    float lo, hi;
    if (simd)
        dynquant_range_avx512(x, n, &lo, &hi);
    else
        dynquant_range(x, n, &lo, &hi);
    *scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float zpf = 0.0f - lo / *scale;
    zpf = zpf < 0 ? 0 : zpf > 255 ? 255 : zpf;
    *zp = (int64_t)rintf(zpf);
}

void qr_dynquant_params(const float *x, int64_t n, float *scale, int64_t *zp)
{
    dynquant_params(x, n, scale, zp, quant_avx512());
}

/* x / scale rounded half to even, plus the zero point, saturated to u8; NaN is quantized as 0 (the zero
 * point), as QuantizeLinear does here. */
static void dynquant_values(const float *x, int64_t n, float scale, int64_t zp, uint8_t *y, int simd)
{
    if (simd) /* QuantizeLinear's loops: saturate_round's bits, vectorized */
        quantize_f32_8bit_avx512(x, y, n, scale, (float)zp, 0, 255);
    else
        quantize_f32_8bit(x, y, 1, n, scale, (float)zp, 0, 255);
}

static qr_status dynquant_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t n = qr_tensor_numel(x), zp;
    float scale;
    int simd = quant_avx512();
    dynquant_params(x->data, n, &scale, &zp, simd);
    dynquant_values(x->data, n, scale, zp, k->out[0]->data, simd);
    if (k->n_out > 1)
        *(float *)k->out[1]->data = scale;
    if (k->n_out > 2)
        *(uint8_t *)k->out[2]->data = (uint8_t)zp;
    return QR_OK;
}

/* DynamicQuantizeRows (domain qrl): DynamicQuantizeLinear on each row of x's last axis (per token, for
 * dynamically quantized transformers), the same bits row by row. Scales (f32) and zero points (u8)
 * have x's shape with the last dim 1: they broadcast against x, and MatMulInteger takes the zero
 * points as its per-row a_zero_point. */
static qr_status dynrows_infer(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    if (x->dtype != QR_F32)
        return QR_KERR(k, "DynamicQuantizeRows takes float32 input, not %s", qr_dtype_name(x->dtype));
    if (x->ndim < 1)
        return QR_KERR(k, "DynamicQuantizeRows takes rows: x must have rank 1 or more");
    for (int o = 0; o < 3; o++) {
        qr_same_as(k->out[o], x);
        k->out[o]->dtype = o == 1 ? QR_F32 : QR_U8;
        if (o)
            k->out[o]->dims[x->ndim - 1] = 1;
    }
    return QR_OK;
}

typedef struct dynrows_job {
    const float *x;
    float *scale;
    uint8_t *y, *zero;
    int64_t cols;
    int simd;
    const qr_gelu_consts *gelu; /* the GELU chain applied to x first (k->pre_gelu); NULL: none */
    const qr_f32_rows *table;   /* its f32 kernels (qr_f32_rows_best) */
    float *slots;               /* sixteen rows of the chain's output a thread */
} dynrows_job;

/* Lane r of the result: OP (min or max) of s[r]'s sixteen lanes, for sixteen rows at once (pairs of
 * rows interleaved, then quads, then the 128-bit lanes; igemm_avx512vnni.c's sum16 with min or max:
 * exact whatever the order, as dynquant_range_avx512's reduction). */
#define UNPK64(f, a, b) _mm512_castpd_ps(f(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define REDUCE16(name, OP)                                                                                            \
    TARGET_AVX512 static inline __m512 name(const __m512 s[16])                                                       \
    {                                                                                                                 \
        __m512 y[4];                                                                                                  \
        for (int g = 0; g < 4; g++) {                                                                                 \
            const __m512 *t = s + 4 * g;                                                                              \
            __m512 x01 = OP(_mm512_unpacklo_ps(t[0], t[1]), _mm512_unpackhi_ps(t[0], t[1]));                          \
            __m512 x23 = OP(_mm512_unpacklo_ps(t[2], t[3]), _mm512_unpackhi_ps(t[2], t[3]));                          \
            y[g] = OP(UNPK64(_mm512_unpacklo_pd, x01, x23), UNPK64(_mm512_unpackhi_pd, x01, x23));                    \
        }                                                                                                             \
        __m512 w01 = OP(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));             \
        __m512 w23 = OP(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));             \
        return OP(_mm512_shuffle_f32x4(w01, w23, 0x88), _mm512_shuffle_f32x4(w01, w23, 0xDD));                        \
    }
REDUCE16(min16, _mm512_min_ps)
REDUCE16(max16, _mm512_max_ps)

/* Sixteen rows of cols values from x: their ranges, then their scales and zero points together
 * (dynquant_params' float operations on vectors, the same bits), then their values. A row's
 * scale and zero point alone took about 60 cycles of dependent reductions and divisions, most of
 * a row of 64 or 128 values' time. A range whose zero point is NaN (holding an infinity and
 * -infinity) takes dynquant_params' own path, as its integer conversion decides it. */
TARGET_AVX512 static void dynrows_16(const float *x, int64_t cols, float *scale, uint8_t *zero, uint8_t *y)
{
    __m512 lo[16], hi[16];
    for (int r = 0; r < 16; r++)
        range_lanes(x + r * cols, cols, &lo[r], &hi[r]);
    __m512 l = min16(lo), h = max16(hi);
    __m512 s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(h, l, _CMP_EQ_OQ),
                                    _mm512_div_ps(_mm512_sub_ps(h, l), _mm512_set1_ps(255.0f)), _mm512_set1_ps(1.0f));
    __m512 zf = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_div_ps(l, s));
    __mmask16 nan = _mm512_cmp_ps_mask(zf, zf, _CMP_UNORD_Q);
    zf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zf, _mm512_setzero_ps(), _CMP_LT_OQ), zf, _mm512_setzero_ps());
    zf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zf, _mm512_set1_ps(255.0f), _CMP_GT_OQ), zf,
                              _mm512_set1_ps(255.0f));
    __m512i zi = _mm512_cvtps_epi32(_mm512_roundscale_ps(zf, _MM_FROUND_CUR_DIRECTION));
    _mm512_storeu_ps(scale, s);
    _mm_storeu_si128((__m128i *)(void *)zero, _mm512_cvtepi32_epi8(zi));
    for (int r = 0; r < 16; r++) {
        int64_t zp = zero[r];
        if (nan >> r & 1)
            dynquant_params(x + r * cols, cols, &scale[r], &zp, 1);
        zero[r] = (uint8_t)zp;
        dynquant_values(x + r * cols, cols, scale[r], zp, y + r * cols, 1);
    }
}

/* Rows [r0, r1) of x (cols each) quantized: sixteen at a time where the CPU has AVX-512. */
static void dynrows_rows(const dynrows_job *j, const float *x, int64_t r0, int64_t r1)
{
    for (; j->simd && r0 + 16 <= r1; r0 += 16, x += 16 * j->cols)
        dynrows_16(x, j->cols, j->scale + r0, j->zero + r0, j->y + r0 * j->cols);
    for (int64_t r = r0; r < r1; r++, x += j->cols) {
        int64_t zp;
        dynquant_params(x, j->cols, &j->scale[r], &zp, j->simd);
        dynquant_values(x, j->cols, j->scale[r], zp, j->y + r * j->cols, j->simd);
        j->zero[r] = (uint8_t)zp;
    }
}

/* With a GELU chain before it (k->pre_gelu): each group of sixteen rows goes through the chain into
 * the thread's slot (sixteen rows, in L2), then is quantized from there while it is in cache: the
 * chain's f32 output never goes to memory, and every value is the chain's (qr_gelu_f32, the
 * executor's pass) and each row's quantization DynamicQuantizeRows' own, so the same bits. */
static void dynrows_slot(void *arg, int64_t r0, int64_t r1, int slot)
{
    const dynrows_job *j = arg;
    if (!j->gelu) {
        dynrows_rows(j, j->x + r0 * j->cols, r0, r1);
        return;
    }
    float *t = j->slots + (size_t)slot * 16 * (size_t)j->cols;
    for (int64_t r = r0; r < r1; r += 16) {
        int64_t e = r + 16 < r1 ? r + 16 : r1;
        qr_gelu_f32(j->table, j->gelu, j->x + r * j->cols, t, (e - r) * j->cols);
        dynrows_rows(j, t, r, e);
    }
}

static qr_status dynrows_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    int64_t cols = x->dims[x->ndim - 1], rows = cols > 0 ? qr_tensor_numel(x) / cols : qr_tensor_numel(k->out[1]);
    dynrows_job j = {x->data, k->out[1]->data, k->out[0]->data, k->out[2]->data, cols, quant_avx512(),
                     k->pre_gelu, NULL, NULL};
    if (cols == 0) { /* empty rows: scale 1, zero point 0, as an all-zero row (GELU of nothing: nothing) */
        j.gelu = NULL;
        dynrows_slot(&j, 0, rows, 0);
        return QR_OK;
    }
    if (j.gelu) {
        j.table = qr_f32_rows_best();
        if (!(j.slots = qr_kwork(k, qr_pool_threads(k->pool), 16 * cols, sizeof(float), "GELU's rows")))
            return QR_ERR;
    }
    /* rows are independent: the same bits on any split */
    qr_parallel_for_slots(k->pool, rows, j.gelu ? 16 : 8, dynrows_slot, &j);
    return QR_OK;
}

/* ---- integer matmul ---- */

/* Broadcasts parameter p (a scale or zero point) to the shape (nd, dims) into
 * out as doubles. A 1-D p of more than one value is read as a column [len, 1]
 * when per_row is set (per-row parameters of MatMul's a); otherwise numpy
 * broadcasting applies (per-column parameters of b line up by themselves). */
static qr_status expand_param(qr_kctx *k, const qr_tensor *p, int nd, const int64_t *dims, int per_row,
                              const char *what, double *out)
{
    qr_tensor tt = {.dtype = QR_F64, .ndim = nd};
    memcpy(tt.dims, dims, (size_t)nd * sizeof(int64_t));
    int64_t n = qr_tensor_numel(&tt), np = p ? qr_tensor_numel(p) : 1;
    if (np == 1) {
        double v = p ? qr_get_f64(p->data, p->dtype, 0) : 0;
        for (int64_t i = 0; i < n; i++)
            out[i] = v;
        return QR_OK;
    }
    qr_tensor tp = *p;
    if (per_row && p->ndim == 1) {
        tp.ndim = 2;
        tp.dims[1] = 1;
    }
    int ok = tp.ndim <= nd;
    for (int d = 0; ok && d < tp.ndim; d++) {
        int64_t pd = tp.dims[tp.ndim - 1 - d], td = dims[nd - 1 - d];
        ok = pd == td || pd == 1;
    }
    if (!ok) {
        char a[160] = "", b[160] = "";
        for (int d = 0; d < p->ndim; d++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "", (long long)p->dims[d]);
        for (int d = 0; d < nd; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "", (long long)dims[d]);
        return QR_KERR(k, "%s of shape [%s] does not fit its operand: expected a scalar, or per-row/per-column "
                          "values broadcastable to [%s]",
                       what, a, b);
    }
    qr_iter it;
    qr_iter_init(&it, &tt, 1);
    qr_broadcast_strides(&tp, &tt, it.stride[0]);
    for (int64_t i = 0; i < n; i++, qr_iter_next(&it))
        out[i] = qr_get_f64(p->data, p->dtype, it.off[0]);
    return QR_OK;
}

/* numpy.matmul shapes: batch dims broadcast; a 1-D a is a row, a 1-D b a column. */
typedef struct mm_plan {
    int64_t m, kd, n;
    qr_tensor batch;                     /* broadcast batch shape */
    int64_t bstride_a[QR_MAX_DIMS], bstride_b[QR_MAX_DIMS]; /* in matrices */
    int64_t rows_a[QR_MAX_DIMS], cols_b[QR_MAX_DIMS];       /* a as [..., M, 1], b as [..., 1, N] */
    int nd_a, nd_b;
} mm_plan;

static qr_status mm_plan_init(qr_kctx *k, const qr_tensor *a, const qr_tensor *b, mm_plan *p)
{
    memset(p, 0, sizeof *p);
    if (a->ndim < 1 || b->ndim < 1)
        return QR_KERR(k, "matmul operands must have rank 1 or more");
    int av = a->ndim == 1, bv = b->ndim == 1;
    p->m = av ? 1 : a->dims[a->ndim - 2];
    p->kd = a->dims[a->ndim - 1];
    p->n = bv ? 1 : b->dims[b->ndim - 1];
    int64_t kb = bv ? b->dims[0] : b->dims[b->ndim - 2];
    if (kb != p->kd)
        return QR_KERR(k, "matmul inner dimensions differ: %lld and %lld", (long long)p->kd, (long long)kb);
    qr_tensor ta = {.ndim = av ? 0 : a->ndim - 2}, tb = {.ndim = bv ? 0 : b->ndim - 2};
    memcpy(ta.dims, a->dims, (size_t)ta.ndim * sizeof(int64_t));
    memcpy(tb.dims, b->dims, (size_t)tb.ndim * sizeof(int64_t));
    const qr_tensor *both[2] = {&ta, &tb};
    if (qr_broadcast_shapes(k, both, 2, &p->batch) != QR_OK)
        return QR_ERR;
    qr_broadcast_strides(&ta, &p->batch, p->bstride_a);
    qr_broadcast_strides(&tb, &p->batch, p->bstride_b);
    /* Row and column parameter shapes of a and b. */
    p->nd_a = ta.ndim + 2;
    memcpy(p->rows_a, ta.dims, (size_t)ta.ndim * sizeof(int64_t));
    p->rows_a[ta.ndim] = p->m;
    p->rows_a[ta.ndim + 1] = 1;
    p->nd_b = tb.ndim + 2;
    memcpy(p->cols_b, tb.dims, (size_t)tb.ndim * sizeof(int64_t));
    p->cols_b[tb.ndim] = 1;
    p->cols_b[tb.ndim + 1] = p->n;
    return QR_OK;
}

static void mm_out_shape(const qr_tensor *a, const qr_tensor *b, const mm_plan *p, qr_tensor *y)
{
    y->ndim = p->batch.ndim;
    memcpy(y->dims, p->batch.dims, sizeof y->dims);
    if (a->ndim > 1)
        y->dims[y->ndim++] = p->m;
    if (b->ndim > 1)
        y->dims[y->ndim++] = p->n;
}

typedef struct int_operands {
    int32_t *a, *b; /* a - a_zero_point, b - b_zero_point */
    double *zr, *zc;
} int_operands;

static void int_operands_free(int_operands *o)
{
    free(o->a);
    free(o->b);
    free(o->zr);
    free(o->zc);
}

/* Subtracts the zero points (per tensor, per row of a, per column of b). */
static qr_status int_operands_init(qr_kctx *k, const qr_tensor *a, const qr_tensor *azp, const qr_tensor *b,
                                   const qr_tensor *bzp, const mm_plan *p, int_operands *o)
{
    memset(o, 0, sizeof *o);
    int64_t na = qr_tensor_numel(a), nb = qr_tensor_numel(b);
    int64_t nra = na / (p->kd ? p->kd : 1), ncb = nb / (p->kd ? p->kd : 1);
    o->a = malloc((size_t)na * sizeof(int32_t) + 1);
    o->b = malloc((size_t)nb * sizeof(int32_t) + 1);
    o->zr = malloc((size_t)nra * sizeof(double) + 1);
    o->zc = malloc((size_t)ncb * sizeof(double) + 1);
    if (!o->a || !o->b || !o->zr || !o->zc) {
        int_operands_free(o);
        return QR_KERR(k, "out of memory");
    }
    if (p->kd == 0)
        return QR_OK;
    if (expand_param(k, azp, p->nd_a, p->rows_a, 1, "a_zero_point", o->zr) != QR_OK ||
        expand_param(k, bzp, p->nd_b, p->cols_b, 0, "b_zero_point", o->zc) != QR_OK) {
        int_operands_free(o);
        return QR_ERR;
    }
    for (int64_t r = 0; r < nra; r++)
        for (int64_t q = 0; q < p->kd; q++)
            o->a[r * p->kd + q] = (int32_t)(get_int(a->data, a->dtype, r * p->kd + q) - (int64_t)o->zr[r]);
    int64_t mats = ncb / (p->n ? p->n : 1);
    for (int64_t s = 0; s < mats; s++)
        for (int64_t q = 0; q < p->kd; q++)
            for (int64_t c = 0; c < p->n; c++) {
                int64_t e = (s * p->kd + q) * p->n + c;
                o->b[e] = (int32_t)(get_int(b->data, b->dtype, e) - (int64_t)o->zc[s * p->n + c]);
            }
    return QR_OK;
}

/* c[r][x] += sum_q a[r][q] * b[q][x] modulo 2^32, for r < rows, q < kdim,
 * x < n: int32 accumulation that wraps exactly as an exact sum wrapped at the
 * end would. Four rows per pass over b; one clone per instruction set, the
 * CPU's best chosen when the program loads (never the build machine's). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
gemm_wrap32(uint32_t *c, int64_t c_rs, const int32_t *a, int64_t a_rs, int64_t rows, const int32_t *b, int64_t kdim,
            int64_t n)
{
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        uint32_t *restrict c0 = c + r * c_rs, *restrict c1 = c0 + c_rs, *restrict c2 = c1 + c_rs,
                           *restrict c3 = c2 + c_rs;
        const int32_t *ar = a + r * a_rs;
        for (int64_t q = 0; q < kdim; q++) {
            uint32_t w0 = (uint32_t)ar[q], w1 = (uint32_t)ar[a_rs + q], w2 = (uint32_t)ar[2 * a_rs + q],
                     w3 = (uint32_t)ar[3 * a_rs + q];
            const int32_t *restrict br = b + q * n;
            for (int64_t x = 0; x < n; x++) {
                uint32_t v = (uint32_t)br[x];
                c0[x] += w0 * v;
                c1[x] += w1 * v;
                c2[x] += w2 * v;
                c3[x] += w3 * v;
            }
        }
    }
    for (; r < rows; r++) {
        uint32_t *restrict cr = c + r * c_rs;
        for (int64_t q = 0; q < kdim; q++) {
            uint32_t w = (uint32_t)a[r * a_rs + q];
            const int32_t *restrict br = b + q * n;
            for (int64_t x = 0; x < n && w; x++)
                cr[x] += w * (uint32_t)br[x];
        }
    }
}

/* gemm_wrap32 with its rows split across the worker threads (k->pool; serial without one). */
typedef struct wrap32_job {
    uint32_t *c;
    const int32_t *a, *b;
    int64_t c_rs, a_rs, kdim, n;
} wrap32_job;

static void wrap32_rows(void *arg, int64_t r0, int64_t r1)
{
    const wrap32_job *j = arg;
    gemm_wrap32(j->c + r0 * j->c_rs, j->c_rs, j->a + r0 * j->a_rs, j->a_rs, r1 - r0, j->b, j->kdim, j->n);
}

static void gemm_wrap32_par(qr_kctx *k, uint32_t *c, int64_t c_rs, const int32_t *a, int64_t a_rs, int64_t rows,
                            const int32_t *b, int64_t kdim, int64_t n)
{
    wrap32_job j = {c, a, b, c_rs, a_rs, kdim, n};
    qr_parallel_for(k->pool, rows, 4, wrap32_rows, &j); /* grain 4: whole four-row blocks */
}

/* acc = a @ b over the broadcast batch, wrapped to int32 (modulo 2^32, as an
 * exact sum wrapped at the end). When
 * ia_out/ib_out are given they receive each output matrix's a and b batch
 * index, for the per-row/per-column scales of requantization. */
static qr_status int_matmul(qr_kctx *k, const mm_plan *p, const int_operands *o, int32_t *acc,
                            int64_t *ia_out, int64_t *ib_out)
{
    qr_iter it;
    qr_iter_init(&it, &p->batch, 2);
    memcpy(it.stride[0], p->bstride_a, sizeof p->bstride_a);
    memcpy(it.stride[1], p->bstride_b, sizeof p->bstride_b);
    int64_t nbatch = qr_tensor_numel(&p->batch);
    for (int64_t bi = 0; bi < nbatch; bi++, qr_iter_next(&it)) {
        const int32_t *am = o->a + it.off[0] * p->m * p->kd, *bm = o->b + it.off[1] * p->kd * p->n;
        if (ia_out) {
            ia_out[bi] = it.off[0];
            ib_out[bi] = it.off[1];
        }
        uint32_t *out = (uint32_t *)acc + bi * p->m * p->n;
        memset(out, 0, sizeof *out * (size_t)(p->m * p->n));
        gemm_wrap32_par(k, out, p->n, am, p->kd, p->m, bm, p->kd, p->n);
    }
    return QR_OK;
}

/* ---- 16-bit operands: the int64 accumulator, split into bytes ----
 * An operand of 16 bits less its zero point, d in [-65535, 65535], is split as d = 256 hi + lo
 * (hi in [-256, 255], lo in [0, 255]); an 8-bit one, in [-255, 255], stays whole. Every pair of
 * parts goes through the int32 GEMM, exact because a product of parts is at most 256 * 255 = 65280
 * in magnitude, so that sums of up to WIDE_MAX_K of them fit int32; the partial sums are combined
 * in int64 with their shifts. The 8-bit microkernels are not used: this is the portable path,
 * two (or four) int32 GEMMs per product. */
#define WIDE_MAX_K 32896

typedef struct wide_parts {
    int32_t *part[2]; /* hi then lo, or the whole operand alone */
    int shift[2];
    int n;
} wide_parts;

static void wide_parts_free(wide_parts *w)
{
    if (w->n == 2) {
        free(w->part[0]);
        free(w->part[1]);
    }
}

/* d's parts: d itself when !split (not copied), else its high and low bytes (malloc'd). */
static qr_status wide_split(qr_kctx *k, int32_t *d, int64_t n, int split, wide_parts *w)
{
    memset(w, 0, sizeof *w);
    if (!split) {
        *w = (wide_parts){{d, NULL}, {0, 0}, 1};
        return QR_OK;
    }
    int32_t *hi = malloc((size_t)n * sizeof *hi + 1), *lo = malloc((size_t)n * sizeof *lo + 1);
    if (!hi || !lo) {
        free(hi);
        free(lo);
        return QR_KERR(k, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        lo[i] = (int32_t)((uint32_t)d[i] & 255u);
        hi[i] = (d[i] - lo[i]) / 256;
    }
    *w = (wide_parts){{hi, lo}, {8, 0}, 2};
    return QR_OK;
}

static qr_status wide_k_check(qr_kctx *k, int64_t kd)
{
    if (kd > WIDE_MAX_K)
        return QR_KERR(k, "a sum over %lld terms of 16-bit operands is longer than the %d the int64 accumulator "
                          "takes (it sums bytes in int32)",
                       (long long)kd, WIDE_MAX_K);
    return QR_OK;
}

static int64_t mm_acc_count(const mm_plan *p) { return qr_tensor_numel(&p->batch) * p->m * p->n; }

/* acc = a @ b in int64 for operands o (zero points subtracted), a's 16-bit when split_a, b's when split_b. */
static qr_status int_matmul_wide(qr_kctx *k, const mm_plan *p, const int_operands *o, int64_t na, int split_a,
                                 int64_t nb, int split_b, int64_t *acc)
{
    if (wide_k_check(k, p->kd) != QR_OK)
        return QR_ERR;
    int64_t nacc = mm_acc_count(p);
    wide_parts pa, pb;
    if (wide_split(k, o->a, na, split_a, &pa) != QR_OK)
        return QR_ERR;
    if (wide_split(k, o->b, nb, split_b, &pb) != QR_OK) {
        wide_parts_free(&pa);
        return QR_ERR;
    }
    int32_t *part = malloc((size_t)nacc * sizeof *part + 1);
    qr_status st = part ? QR_OK : QR_KERR(k, "out of memory");
    for (int64_t i = 0; i < nacc; i++)
        acc[i] = 0;
    for (int i = 0; st == QR_OK && i < pa.n; i++)
        for (int j = 0; st == QR_OK && j < pb.n; j++) {
            int_operands t = *o;
            t.a = pa.part[i];
            t.b = pb.part[j];
            if ((st = int_matmul(k, p, &t, part, NULL, NULL)) != QR_OK)
                break;
            int64_t f = (int64_t)1 << (pa.shift[i] + pb.shift[j]);
            for (int64_t e = 0; e < nacc; e++)
                acc[e] += (int64_t)part[e] * f;
        }
    free(part);
    wide_parts_free(&pa);
    wide_parts_free(&pb);
    return st;
}

/* wide: the op also takes 16-bit operands (MatMulInteger, ConvInteger; not the QLinear ops, whose
 * int32 arithmetic is ONNX's). */
static qr_status check_quant_operand(qr_kctx *k, const qr_tensor *t, const qr_tensor *zp, const char *name, int wide)
{
    if (!is_8bit(t->dtype) && !(wide && is_16bit(t->dtype)))
        return QR_KERR(k, "%s must be uint8 or int8%s, not %s", name, wide ? " (or uint16 or int16)" : "",
                       qr_dtype_name(t->dtype));
    if (zp && zp->dtype != t->dtype)
        return QR_KERR(k, "%s's zero point has type %s, expected %s", name, qr_dtype_name(zp->dtype),
                       qr_dtype_name(t->dtype));
    return QR_OK;
}

static const qr_tensor *opt_in(const qr_kctx *k, int i) { return i < k->n_in ? k->in[i] : NULL; }

static qr_status matmulint_infer(qr_kctx *k)
{
    const qr_tensor *a = k->in[0], *b = k->in[1];
    mm_plan p;
    if (check_quant_operand(k, a, opt_in(k, 2), "A", 1) != QR_OK ||
        check_quant_operand(k, b, opt_in(k, 3), "B", 1) != QR_OK ||
        mm_plan_init(k, a, b, &p) != QR_OK)
        return QR_ERR;
    mm_out_shape(a, b, &p, k->out[0]);
    k->out[0]->dtype = acc_type(a, b);
    return QR_OK;
}

/* Whether every zero point in zp is 0 (an absent one is): the microkernels take s8 weights as they are. */
static int all_zero(const qr_tensor *zp)
{
    /* the count once: asked in the loop's test it was a call an element (a classifier's 64 zero
     * points, twice a run: qr_tensor_numel 1.3-1.8% of the bundled CNN's run at batch 1, 0.6% after) */
    int64_t n = zp ? qr_tensor_numel(zp) : 0;
    if (zp && is_8bit(zp->dtype)) { /* as uniform_zero_point's: asked on every run */
        const uint8_t *d = zp->data;
        uint8_t any = 0;
        for (int64_t i = 0; i < n; i++)
            any |= d[i];
        return !any;
    }
    for (int64_t i = 0; i < n; i++)
        if (get_int(zp->data, zp->dtype, i) != 0)
            return 0;
    return 1;
}

/* The u8 x s8 microkernel's share of a row range (igemm.h). */
typedef struct vnni_job {
    qr_igemm_fn fn;
    int32_t *c;
    const int8_t *a;
    const int32_t *init;
    const uint8_t *b;
    int64_t c_rs, k4, n;
    qr_igemm16_fn fn16; /* with a16: fn's twin on the rows as i16 (qr_igemm_wide_twin), run instead */
    const int16_t *a16;
} vnni_job;

static void vnni_rows(void *arg, int64_t m0, int64_t m1)
{
    const vnni_job *j = arg;
    if (j->fn16)
        j->fn16(j->c, j->c_rs, j->a16, j->init, m0, m1, j->b, j->k4, j->n);
    else
        j->fn(j->c, j->c_rs, j->a, j->init, m0, m1, j->b, j->k4, j->n);
}

/* Each column's sum of B (s8 [K, N]), wrapped: x - a_zero times w summed is x times w summed
 * less a_zero times this. */
static void column_sums(const int8_t *bd, int64_t kd, int64_t nn, int32_t *sum)
{
    for (int64_t j = 0; j < nn; j++) {
        uint32_t s = 0;
        for (int64_t q = 0; q < kd; q++)
            s += (uint32_t)(int32_t)bd[q * nn + j];
        sum[j] = (int32_t)s;
    }
}

/* The same product for few rows (a batch of one through a fully connected layer) on the GEMV
 * kernel (igemm.h): B packed as it is, [K/4][N16][4], x's four bytes broadcast against sixteen
 * columns, no transpose. Each row's columns split across threads in groups of sixteen. */
typedef struct gemv_job {
    qr_igemv_fn fn;
    int32_t *y;
    const uint8_t *x;
    const int8_t *w;
    const int32_t *init;
    int64_t k4, n;
} gemv_job;

static void gemv_groups(void *arg, int64_t g0, int64_t g1)
{
    const gemv_job *j = arg;
    j->fn(j->y, j->x, j->w, j->init, j->k4, g0 * 16, g1 * 16, j->n);
}

/* The GEMV's packing has a name of its own (qr_kcache_get checks it), so a node's kept buffer from
 * one path is never taken for another's. B packed and its column sums are kept
 * (bconst); the columns' starts -za * sum, which a computed zero point changes every run (the
 * dynamic recipes'), are made per run: N products, where packing B again was K * N. */
static qr_status matmulint_gemv(qr_kctx *k, const qr_tensor *a, int64_t za, uint8_t flip, const qr_tensor *b,
                                int32_t *acc, qr_igemv_fn fn, int bconst)
{
    int64_t kd = b->dims[0], nn = b->dims[1], rows = qr_tensor_numel(a) / kd;
    int64_t k4 = qr_igemm_k4(kd), n16 = qr_igemm_n16(nn);
    size_t wbytes = (size_t)(n16 * k4 + 63) / 64 * 64, bytes = wbytes + (size_t)nn * sizeof(int32_t) + 64;
    int fresh = 1;
    uint8_t *packed = bconst ? qr_kcache_get(k, bytes, "packed B (GEMV)", &fresh)
                            : qr_kscratch(k, 1, (int64_t)bytes, 1, "packed B (GEMV)");
    uint8_t *x = packed ? qr_kwork(k, 1, k4, 1, "a row of A") : NULL;
    int32_t *init = x ? qr_kwork(k, 1, nn, sizeof(int32_t), "the columns' starts") : NULL;
    if (!init) {
        if (packed)
            qr_kcache_done(k, packed);
        return QR_ERR;
    }
    int8_t *wp = (int8_t *)packed;
    int32_t *colsum = (int32_t *)(packed + wbytes);
    if (fresh) {
        memset(wp, 0, wbytes);
        const int8_t *bd = b->data;
        for (int64_t q = 0; q < kd; q++)
            for (int64_t j = 0; j < nn; j++)
                wp[((q >> 2) * n16 + j) * 4 + (q & 3)] = bd[q * nn + j];
        column_sums(bd, kd, nn, colsum);
    }
    for (int64_t j = 0; j < nn; j++)
        init[j] = (int32_t)(0u - (uint32_t)za * (uint32_t)colsum[j]);
    const uint8_t *ad = a->data;
    memset(x + kd, 0, (size_t)(k4 - kd));
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t q = 0; q < kd; q++)
            x[q] = ad[i * kd + q] ^ flip;
        gemv_job jb = {fn, acc + i * nn, x, wp, init, k4, nn};
        qr_parallel_for(k->pool, n16 / 16, 4, gemv_groups, &jb);
    }
    qr_kcache_done(k, packed);
    return QR_OK;
}

/* Rows up to this many take the GEMV: the GEMM's 16-column tiles would hold 16 / rows times the work. */
#define QR_GEMV_MAX_ROWS 4

/* ---- integer matrix products on the u8s8 microkernel ----
 * Any u8 or i8 A [..., M, K] by any u8 or i8 B [..., K, N] with one zero point each, batch dims
 * broadcast (attention's Q K^T and P V, both computed; a projection's constant weights). The
 * kernel (igemm.h, qr_igemm_rc_fn) multiplies s8 rows by u8 columns, so each operand is moved to
 * its type with its zero point: an u8 A goes in as a ^ 0x80 = a - 128 with za - 128, an i8 B as
 * b ^ 0x80 = b + 128 with zb + 128, which leaves every a - za and b - zb as it was. Then
 *   sum_k (a - za)(b - zb) = sum_k a b - zb rowsum(a) - za colsum(b) + K za zb:
 * the kernel's sums start from K za zb - zb rowsum(a) per row and -za colsum(b) per column, all
 * modulo 2^32, so the int32 results are the exact sums wrapped, as the definition's. With a zero
 * point per row of A (za_r: the dynamic recipes' per-token activations) the same holds row by
 * row: the starts K za_r zb - zb rowsum(a)_r per row, and za_r colsum(b) taken off each element
 * by the kernel where its sums start (qr_igemm_rc_fn's rz and csum). */
typedef struct mmq_job {
    const mm_plan *p;
    qr_igemm_rc_fn fn;
    qr_igemm_pack_a_fn pack_a;
    qr_igemm_pack_b_fn pack_b;
    const uint8_t *a, *b;  /* the operands' bytes */
    int8_t *as;            /* A's rows packed [rows][k4], or NULL: A is used as it is */
    qr_igemm_rc16_fn fn16; /* fn's twin on A's rows as i16 (qr_igemm_rc_wide_twin), run instead, or NULL */
    int16_t *as16;         /* fn16: A's rows [rows][k4] as i16 */
    uint8_t *bp;           /* B's matrices packed [nb][K4/4][N16][4], or in panels (bpanels) */
    uint8_t *bt;           /* bpanels: B's matrices packed in rows first, then moved to panels */
    int bpanels;           /* bp in panels of 32 columns (igemm.h, qr_igemm_rc_panels) */
    int64_t bstride;       /* bytes of one packed B matrix */
    int32_t *rinit, *colsum, *cinit;
    const qr_tensor *azr;  /* A's zero points, one per row of its matrices, or NULL: za for all */
    int32_t *rz;           /* then those zero points moved (za_r - aflip), as the kernel takes them */
    uint8_t aflip, bflip;
    int pack_b_too;        /* 0: bp and colsum hold a constant B's packing already */
    uint32_t za, zb;       /* the moved zero points, as the sums' wrapping arithmetic takes them */
    int64_t na, nb, k4, n16, rb; /* n16: B's packed columns per group of four k (qr_igemm_rc_pitch) */
    const int64_t *ia, *ib; /* each output matrix's A and B matrix */
    int32_t *c;
    int64_t m, nmat;       /* rows of each output matrix, and how many */
    /* Not NULL: each task's rows of sums go to slot buffers (MMQ_ROWS x n each, one per thread) and
     * from there to ep->run_rows while in cache, instead of to c (qr_matmulint_run_epilogue) */
    const qr_acc_epilogue *ep;
    int32_t *slots;
    int failed;
    qr_error *err;
} mmq_job;

/* Rows of the kernel per task: whole 8-row tiles, enough tasks for two threads on one matrix. */
#define MMQ_ROWS 64

/* Items [0, na) pack A's matrices (and their starting values), [na, na + nb) B's. */
static void mmq_pack(void *arg, int64_t i0, int64_t i1)
{
    const mmq_job *j = arg;
    int64_t m = j->m, kd = j->p->kd, n = j->p->n;
    for (int64_t i = i0; i < i1; i++) {
        if (i < j->na) {
            int32_t *r = j->rinit + i * m, *rz = j->rz ? j->rz + i * m : NULL;
            if (rz) {
                const void *z = (const uint8_t *)j->azr->data + i * m;
                for (int64_t x = 0; x < m; x++)
                    rz[x] = (j->azr->dtype == QR_U8 ? ((const uint8_t *)z)[x] : ((const int8_t *)z)[x]) - j->aflip;
            }
            if (!j->as && !j->zb) { /* A as it is, and no row needs a correction */
                for (int64_t x = 0; x < m; x++)
                    r[x] = 0;
            } else {
                j->pack_a(j->as ? j->as + i * m * j->k4 : NULL, j->a + i * m * kd, kd, m, kd, j->aflip,
                          j->zb ? r : NULL);
                for (int64_t x = 0; x < m; x++) {
                    uint32_t kzz = (uint32_t)kd * (rz ? (uint32_t)rz[x] : j->za) * j->zb;
                    r[x] = j->zb ? (int32_t)(kzz - j->zb * (uint32_t)r[x]) : 0;
                }
            }
            if (j->as16) { /* the kernel's rows (packed, or A's own s8 rows of k4) widened once */
                const int8_t *src = j->as ? j->as + i * m * j->k4 : (const int8_t *)j->a + i * m * j->k4;
                int16_t *d = j->as16 + i * m * j->k4;
                for (int64_t e = 0; e < m * j->k4; e++)
                    d[e] = src[e];
            }
            continue;
        }
        int64_t bi = i - j->na;
        if (j->pack_b_too) {
            uint8_t *rows = j->bpanels ? j->bt + bi * j->k4 * j->n16 : j->bp + bi * j->bstride;
            j->pack_b(rows, j->b + bi * kd * n, n, kd, n, j->bflip, j->colsum + bi * n, j->n16);
            if (j->bpanels)
                qr_igemm_rc_panels(j->bp + bi * j->bstride, rows, j->k4, n, j->n16);
        }
        for (int64_t x = 0; x < n && !j->rz; x++)
            j->cinit[bi * n + x] = (int32_t)(0u - j->za * (uint32_t)j->colsum[bi * n + x]);
    }
}

/* Tasks t = output matrix * row blocks + row block. */
static void mmq_rows(void *arg, int64_t t0, int64_t t1)
{
    const mmq_job *j = arg;
    int64_t m = j->m, n = j->p->n;
    for (int64_t t = t0; t < t1; t++) {
        int64_t bi = t / j->rb, r0 = t % j->rb * MMQ_ROWS, r1 = r0 + MMQ_ROWS < m ? r0 + MMQ_ROWS : m;
        int64_t ia = j->ia[bi], ib = j->ib[bi];
        const int8_t *am = j->as ? j->as + ia * m * j->k4 : (const int8_t *)j->a + ia * m * j->k4;
        if (j->fn16)
            j->fn16(j->c + bi * m * n, n, j->as16 + ia * m * j->k4, j->rinit + ia * m,
                    j->rz ? NULL : j->cinit + ib * n, j->rz ? j->rz + ia * m : NULL, j->colsum + ib * n, r0, r1,
                    j->bp + ib * j->bstride, j->k4, n, j->n16);
        else
            j->fn(j->c + bi * m * n, n, am, j->rinit + ia * m, j->rz ? NULL : j->cinit + ib * n,
                  j->rz ? j->rz + ia * m : NULL, j->colsum + ib * n, r0, r1, j->bp + ib * j->bstride, j->k4, n,
                  j->n16);
    }
}

/* The same, each task's sums into its thread's slot and then through the epilogue: rows [r0, r1)
 * of output matrix bi are the block's rows, all n columns (channels last), output rows bi m + r0
 * on. The kernel gets the task's rows as rows 0.. of a shifted A (exact integer sums: the same
 * values wherever a row starts). */
static void mmq_rows_ep(void *arg, int64_t t0, int64_t t1, int slot)
{
    mmq_job *j = arg;
    int64_t m = j->m, n = j->p->n;
    int32_t *buf = j->slots + (int64_t)slot * MMQ_ROWS * n;
    for (int64_t t = t0; t < t1 && !__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE); t++) {
        int64_t bi = t / j->rb, r0 = t % j->rb * MMQ_ROWS, r1 = r0 + MMQ_ROWS < m ? r0 + MMQ_ROWS : m;
        int64_t ia = j->ia[bi], ib = j->ib[bi];
        const int8_t *am = j->as ? j->as + ia * m * j->k4 : (const int8_t *)j->a + ia * m * j->k4;
        if (j->fn16)
            j->fn16(buf, n, j->as16 + (ia * m + r0) * j->k4, j->rinit + ia * m + r0,
                    j->rz ? NULL : j->cinit + ib * n, j->rz ? j->rz + ia * m + r0 : NULL, j->colsum + ib * n, 0,
                    r1 - r0, j->bp + ib * j->bstride, j->k4, n, j->n16);
        else
            j->fn(buf, n, am + r0 * j->k4, j->rinit + ia * m + r0, j->rz ? NULL : j->cinit + ib * n,
                  j->rz ? j->rz + ia * m + r0 : NULL, j->colsum + ib * n, 0, r1 - r0, j->bp + ib * j->bstride,
                  j->k4, n, j->n16);
        qr_acc_block blk = {buf, n, r1 - r0, n, 0, (bi * m + r0) * n, n, NULL};
        qr_error e;
        if (j->ep->run_rows(j->ep, &blk, &e) != QR_OK) {
            if (!__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL))
                *j->err = e;
            return;
        }
    }
}

/* acc = (a - za) @ (b - zb) over the broadcast batch (p), on the microkernel fn; azr not NULL: A's
 * zero points one per row of its matrices instead of za (per_row_zero_points). bconst: B is a
 * graph constant, so its packing and column sums are made on the first run only. ia_out/ib_out
 * (NULL: not wanted) receive each output matrix's A and B matrix, as int_matmul's. */
static qr_status mmq_run_ep(qr_kctx *k, const mm_plan *p, qr_igemm_rc_fn fn, const qr_tensor *a, int64_t za,
                            const qr_tensor *azr, const qr_tensor *b, int64_t zb, int bconst, int32_t *acc,
                            int64_t *ia_out, int64_t *ib_out, const qr_acc_epilogue *ep);

static qr_status mmq_run(qr_kctx *k, const mm_plan *p, qr_igemm_rc_fn fn, const qr_tensor *a, int64_t za,
                         const qr_tensor *azr, const qr_tensor *b, int64_t zb, int bconst, int32_t *acc,
                         int64_t *ia_out, int64_t *ib_out)
{
    return mmq_run_ep(k, p, fn, a, za, azr, b, zb, bconst, acc, ia_out, ib_out, NULL);
}

/* ep not NULL: acc unused, the sums go through ep->run_rows (mmq_rows_ep). */
static qr_status mmq_run_ep(qr_kctx *k, const mm_plan *p, qr_igemm_rc_fn fn, const qr_tensor *a, int64_t za,
                            const qr_tensor *azr, const qr_tensor *b, int64_t zb, int bconst, int32_t *acc,
                            int64_t *ia_out, int64_t *ib_out, const qr_acc_epilogue *ep)
{
    int64_t m = p->m, kd = p->kd, n = p->n, nbatch = qr_tensor_numel(&p->batch);
    if (m == 0 || n == 0 || nbatch == 0)
        return QR_OK;
    mmq_job j = {.p = p, .fn = fn, .pack_a = qr_igemm_pack_a(), .pack_b = qr_igemm_pack_b(), .a = a->data,
                 .b = b->data, .c = acc, .k4 = qr_igemm_k4(kd), .n16 = qr_igemm_rc_pitch(fn, qr_igemm_k4(kd), n)};
    j.aflip = a->dtype == QR_U8 ? 0x80 : 0;
    j.bflip = b->dtype == QR_I8 ? 0x80 : 0;
    j.za = (uint32_t)(za - j.aflip);
    j.zb = (uint32_t)(zb + j.bflip);
    j.na = qr_tensor_numel(a) / (m * kd); /* kd > 0 (callers) */
    j.nb = qr_tensor_numel(b) / (kd * n);
    /* One B matrix for A's every matrix (weights): A's matrices are the rows of one product, as
     * the output's are, so [S, 1, K] (a sequence first, batch 1) is 128 rows, not 128 products
     * of one row each on 8-row tiles. */
    int fold = j.nb == 1 && j.na == nbatch;
    j.m = fold ? nbatch * m : m;
    j.nmat = fold ? 1 : nbatch;
    j.na = fold ? 1 : j.na;
    j.rb = (j.m + MMQ_ROWS - 1) / MMQ_ROWS;
    j.fn = fn = qr_igemm_u8s8_rc_for(fn, j.m, j.k4, n); /* the same pitch: a cached packing serves both */
    /* A constant B of more than one 32-column strip for the AVX-512 VNNI kernel: in panels, packed
     * once (igemm.h, qr_igemm_rc_panels; the kernel 1.03-1.17x on bert's projections at batch 1,
     * whose weights come from L3). The cached bytes differ from the rows' packing (64 more; K4 >= 64), so a run that
     * takes AMX instead packs its own. */
    qr_igemm_rc_fn pfn = qr_igemm_rc_panels_for(fn);
    j.bpanels = bconst && pfn && j.k4 >= 64 && n > 32;
    if (j.bpanels)
        j.fn = fn = pfn;
    j.bstride = j.k4 * (j.bpanels ? qr_igemm_n32(n) : j.n16);
    size_t bbytes = (size_t)(j.nb * j.bstride + 63) / 64 * 64 + (j.bpanels ? 64 : 0),
           cbytes = (size_t)(j.nb * n) * sizeof(int32_t);
    int fresh = 1;
    uint8_t *packed = bconst ? qr_kcache_get(k, bbytes + cbytes, j.bpanels ? "packed B (panels)" : "packed B", &fresh)
                             : qr_kwork(k, 1, (int64_t)(bbytes + cbytes), 1, "packed B");
    if (!packed)
        return QR_ERR;
    j.bp = packed;
    j.colsum = (int32_t *)(void *)(packed + bbytes);
    j.pack_b_too = fresh;
    if (j.bpanels && fresh && !(j.bt = qr_kwork(k, j.nb, j.k4 * j.n16, 1, "B packed in rows"))) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    /* A's bytes serve as the kernel's rows when they are s8 already in rows of k4 */
    int a_as_is = !j.aflip && kd == j.k4;
    int64_t *idx = qr_kwork(k, 2, nbatch, sizeof(int64_t), "batch indices");
    j.rinit = idx ? qr_kwork(k, j.na, j.m, sizeof(int32_t), "row starts") : NULL;
    j.cinit = j.rinit ? qr_kwork(k, j.nb, n, sizeof(int32_t), "column starts") : NULL;
    j.azr = azr;
    j.rz = j.cinit && azr ? qr_kwork(k, j.na, j.m, sizeof(int32_t), "zero points of A's rows") : NULL;
    j.as = j.cinit && !a_as_is ? qr_kwork(k, j.na * j.m, j.k4, 1, "packed A") : NULL;
    /* AVX2 without VNNI: A's rows widened to i16 once, not in the tiles for every 8 columns
     * (qr_igemm_rc_wide_twin), where the memory budget leaves room for them */
    j.fn16 = j.n16 == qr_igemm_n16(n) && qr_kwork_fits(k, j.na * j.m, j.k4, sizeof(int16_t))
                 ? qr_igemm_rc_wide_twin(fn)
                 : NULL;
    j.as16 = j.cinit && j.fn16 ? qr_kwork(k, j.na * j.m, j.k4, sizeof(int16_t), "A's rows as i16") : NULL;
    int nslots = qr_pool_threads(k->pool) > 1 ? qr_pool_threads(k->pool) : 1;
    j.ep = ep, j.err = k->err;
    j.slots = ep && j.cinit ? qr_kwork(k, (int64_t)nslots * MMQ_ROWS, n, sizeof(int32_t), "sums of a task's rows")
                            : NULL;
    if (!j.cinit || (azr && !j.rz) || (!a_as_is && !j.as) || (ep && !j.slots) || (j.fn16 && !j.as16)) {
        if (bconst)
            qr_kcache_done(k, packed);
        return QR_ERR;
    }
    qr_iter it;
    qr_iter_init(&it, &p->batch, 2);
    memcpy(it.stride[0], p->bstride_a, sizeof p->bstride_a);
    memcpy(it.stride[1], p->bstride_b, sizeof p->bstride_b);
    for (int64_t bi = 0; bi < nbatch; bi++, qr_iter_next(&it)) {
        idx[bi] = it.off[0];
        idx[nbatch + bi] = it.off[1];
    }
    if (ia_out) {
        memcpy(ia_out, idx, (size_t)nbatch * sizeof *ia_out);
        memcpy(ib_out, idx + nbatch, (size_t)nbatch * sizeof *ib_out);
    }
    j.ia = idx; /* folded: the one product's A and B are matrix 0 of each, as idx[0] and idx[nbatch] say */
    j.ib = idx + nbatch;
    qr_parallel_for(k->pool, j.na + j.nb, 1, mmq_pack, &j);
    if (ep)
        qr_parallel_for_slots(k->pool, j.nmat * j.rb, 1, mmq_rows_ep, &j);
    else
        qr_parallel_for(k->pool, j.nmat * j.rb, 1, mmq_rows, &j);
    if (bconst)
        qr_kcache_done(k, packed);
    return j.failed ? QR_ERR : QR_OK;
}

/* Whether zp (NULL: absent, 0) is one value for the whole operand: a scalar, or a vector of
 * count (the rows of a, the columns of b) holding one value throughout (the per-channel zero
 * points of symmetric weights are all 0). Other shapes are left to the portable path, which
 * checks them. */
static int uniform_zero_point(const qr_tensor *zp, int64_t count)
{
    int64_t n = zp ? qr_tensor_numel(zp) : 1;
    if (n != 1 && !(zp->ndim == 1 && n == count))
        return 0;
    if (n > 1 && is_8bit(zp->dtype)) { /* asked on every run: the bytes ORed, a loop that vectorizes */
        const uint8_t *d = zp->data;
        uint8_t diff = 0;
        for (int64_t i = 1; i < n; i++)
            diff |= d[i] ^ d[0];
        return !diff;
    }
    for (int64_t i = 1; i < n; i++)
        if (get_int(zp->data, zp->dtype, i) != get_int(zp->data, zp->dtype, 0))
            return 0;
    return 1;
}

/* Whether zp holds one zero point per row of a [..., M, K] (the rows of all its matrices): 1-D of M
 * for a matrix, or a's shape with the last dim 1 (DynamicQuantizeRows's zero points). */
static int per_row_zero_points(const qr_tensor *a, const qr_tensor *zp)
{
    if (!zp || a->ndim < 2 || qr_tensor_numel(zp) < 2)
        return 0;
    if (zp->ndim == 1)
        return a->ndim == 2 && zp->dims[0] == a->dims[0];
    if (zp->ndim != a->ndim || zp->dims[zp->ndim - 1] != 1)
        return 0;
    for (int d = 0; d + 1 < a->ndim; d++)
        if (zp->dims[d] != a->dims[d])
            return 0;
    return 1;
}

/* The microkernel when this CPU has one and each operand has one zero point (p: the product's
 * shapes), else NULL (the caller's portable int32 path): a zero point per row or column would
 * need a correction per element. */
static qr_igemm_rc_fn mmq_kernel(const mm_plan *p, const qr_tensor *azp, const qr_tensor *bzp)
{
    if (p->kd == 0 || !uniform_zero_point(azp, p->m) || !uniform_zero_point(bzp, p->n))
        return NULL; /* K 0: zeros, the portable path's */
    return qr_igemm_u8s8_rc();
}

static int64_t zero_point(const qr_tensor *zp)
{
    return zp && qr_tensor_numel(zp) ? get_int(zp->data, zp->dtype, 0) : 0;
}

/* MatMulInteger's int32 accumulator of 8-bit a and b: the microkernels when they apply, else the
 * portable int32 loops. bconst: b is a constant the kernels may pack once. */
static qr_status matmul_acc32(qr_kctx *k, const mm_plan *p, const qr_tensor *a, const qr_tensor *azp,
                              const qr_tensor *b, const qr_tensor *bzp, int bconst, int32_t *out)
{
    int_operands o;
    qr_igemm_rc_fn fn = mmq_kernel(p, azp, bzp);
    if (fn) {
        /* few rows of A by a matrix of s8 weights: the GEMV, where 8-row tiles would be mostly empty */
        qr_igemv_fn gemv = qr_igemv_u8s8();
        int64_t rows = p->kd ? qr_tensor_numel(a) / p->kd : 0;
        if (gemv && b->dtype == QR_I8 && b->ndim == 2 && a->ndim >= 2 && all_zero(bzp) && rows > 0 &&
            rows <= QR_GEMV_MAX_ROWS && p->n > 0)
            return matmulint_gemv(k, a, zero_point(azp) + (a->dtype == QR_I8 ? 128 : 0),
                                  a->dtype == QR_I8 ? 0x80 : 0, b, out, gemv, bconst);
        return mmq_run(k, p, fn, a, zero_point(azp), NULL, b, zero_point(bzp), bconst, out, NULL, NULL);
    }
    /* a zero point per row of A (the dynamic recipes' per-token activations: by weights, and
     * attention's Q K^T and P V), one for B: the microkernel, the rows' corrections in its sums */
    if (p->kd > 0 && per_row_zero_points(a, azp) && uniform_zero_point(bzp, p->n) && (fn = qr_igemm_u8s8_rc()))
        return mmq_run(k, p, fn, a, 0, azp, b, zero_point(bzp), bconst, out, NULL, NULL);
    if (int_operands_init(k, a, azp, b, bzp, p, &o) != QR_OK)
        return QR_ERR;
    qr_status st = int_matmul(k, p, &o, out, NULL, NULL);
    int_operands_free(&o);
    return st;
}

qr_status qr_matmulint_infer_as(qr_kctx *k, const qr_tensor *a, const qr_tensor *azp, const qr_tensor *b,
                                 const qr_tensor *bzp, qr_dtype t)
{
    mm_plan p;
    if (check_quant_operand(k, a, azp, "A", 0) != QR_OK || check_quant_operand(k, b, bzp, "B", 0) != QR_OK ||
        mm_plan_init(k, a, b, &p) != QR_OK)
        return QR_ERR;
    mm_out_shape(a, b, &p, k->out[0]);
    k->out[0]->dtype = t;
    return QR_OK;
}

qr_status qr_matmulint_run_epilogue(qr_kctx *k, const qr_tensor *a, const qr_tensor *azp, const qr_tensor *b,
                                    const qr_tensor *bzp, int bconst, const qr_acc_epilogue *ep)
{
    mm_plan p;
    if (mm_plan_init(k, a, b, &p) != QR_OK)
        return QR_ERR;
    int64_t rows = p.kd ? qr_tensor_numel(a) / p.kd : 0;
    qr_igemm_rc_fn fn = mmq_kernel(&p, azp, bzp);
    qr_igemv_fn gemv = qr_igemv_u8s8();
    int gemv_case = fn && gemv && b->dtype == QR_I8 && b->ndim == 2 && a->ndim >= 2 && all_zero(bzp) && rows > 0 &&
                    rows <= QR_GEMV_MAX_ROWS && p.n > 0;
    if (fn && !gemv_case) /* matmul_acc32's microkernel cases, by blocks of rows */
        return mmq_run_ep(k, &p, fn, a, zero_point(azp), NULL, b, zero_point(bzp), bconst, NULL, NULL, NULL, ep);
    if (!fn && p.kd > 0 && per_row_zero_points(a, azp) && uniform_zero_point(bzp, p.n) && (fn = qr_igemm_u8s8_rc()))
        return mmq_run_ep(k, &p, fn, a, 0, azp, b, zero_point(bzp), bconst, NULL, NULL, NULL, ep);
    /* the other paths: the whole accumulator, then one block of all its rows */
    int64_t nacc = mm_acc_count(&p);
    int32_t *acc = qr_kwork(k, nacc > 0 ? nacc : 1, 1, sizeof *acc, "accumulator");
    if (!acc || matmul_acc32(k, &p, a, azp, b, bzp, bconst, acc) != QR_OK)
        return QR_ERR;
    if (nacc == 0 || p.n == 0)
        return QR_OK;
    qr_acc_block all = {acc, p.n, nacc / p.n, p.n, 0, 0, p.n, NULL};
    return ep->run_rows(ep, &all, k->err);
}

/* QrlMatMulScaled (domain qrl; runtime/pass_dynrows.c): a dynamic export's per-row product
 * MatMulInteger(a, b, a_zero, b_zero?) -> Cast to f32 -> Mul by s -> Mul by w [-> Add bias]
 * [-> Mul or Div by k (attribute last: 1 Mul, 2 Div)] as one node. The f32 operations run in that
 * order, each rounded as its node rounds it (ISO C: no contraction), on the product's blocks of
 * rows while they are in cache (qr_matmulint_run_epilogue), so no int32 tensor and no f32
 * intermediate goes to memory. s broadcasts to the output with its last dim 1 (one scale a row of
 * the output, DynamicQuantizeRows's, or one); w and bias are one value or one a column, k one. */
typedef struct mms_ep {
    const float *s, *w, *bias, *ebias; /* ebias: the executor's fused Add of a row vector, last */
    float k;
    int last;
    int64_t n, nw;
    const int64_t *s_of_row; /* s's index for each output row */
    float *y;
} mms_ep;

/* One row: y = f32(acc) * s * w (+ bias) (* or / k), pass by pass over the row (in L1) so each
 * loop vectorizes without the others' branches. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void mms_row(float *y, const int32_t *acc,
                                                                                  int64_t n, float s, const float *w,
                                                                                  int64_t nw, const float *bias,
                                                                                  int last, float k,
                                                                                  const float *ebias)
{
    for (int64_t c = 0; c < n; c++)
        y[c] = (float)acc[c] * s;
    if (nw == 1) {
        float w0 = w[0];
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] * w0;
    } else
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] * w[c];
    if (bias)
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] + bias[c];
    if (last == 1)
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] * k;
    else if (last == 2)
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] / k;
    if (ebias)
        for (int64_t c = 0; c < n; c++)
            y[c] = y[c] + ebias[c];
}

static qr_status mms_block(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    (void)e;
    const mms_ep *u = ep->user;
    int64_t r0 = (b->y_off - b->c0) / b->y_rs; /* whole rows of [rows, n]: y_rs is n */
    for (int64_t i = 0; i < b->rows; i++)
        mms_row(u->y + b->y_off + i * b->y_rs, b->acc + i * b->acc_rs, b->cols, u->s[u->s_of_row[r0 + i]],
                u->nw == 1 ? u->w : u->w + b->c0, u->nw, u->bias ? u->bias + b->c0 : NULL, u->last, u->k,
                u->ebias ? u->ebias + b->c0 : NULL);
    return QR_OK;
}

/* Whether t broadcasts to y's shape leaving it as it is, with its last dim 1 (last1) or either. */
static int broadcasts_into(const qr_tensor *t, const qr_tensor *y, int last1)
{
    if (t->ndim > y->ndim || (last1 && t->ndim > 0 && t->dims[t->ndim - 1] != 1))
        return 0;
    for (int d = 1; d <= t->ndim; d++)
        if (t->dims[t->ndim - d] != 1 && t->dims[t->ndim - d] != y->dims[y->ndim - d])
            return 0;
    return 1;
}

/* One value, or one a column of y (n). */
static int per_column(const qr_tensor *t, const qr_tensor *y, int64_t n)
{
    int64_t c = qr_tensor_numel(t);
    return broadcasts_into(t, y, 0) && (c == 1 || (c == n && t->ndim > 0 && t->dims[t->ndim - 1] == n));
}

static qr_status mms_infer(qr_kctx *k)
{
    if (k->n_in < 6 || !k->in[4] || !k->in[5]) /* (inputs 3, 6 and 7 may be left out: min_in is 3) */
        return QR_KERR(k, "QrlMatMulScaled takes a, b, a_zero_point, b_zero_point?, s, w, bias?, k?");
    if (qr_matmulint_infer_as(k, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), QR_F32) != QR_OK)
        return QR_ERR;
    const qr_tensor *y = k->out[0], *s = k->in[4], *w = k->in[5], *bias = opt_in(k, 6), *kk = opt_in(k, 7);
    int64_t n = y->ndim > 0 ? y->dims[y->ndim - 1] : 1;
    int last = (int)qr_attr_i(k->node, "last", 0);
    if (s->dtype != QR_F32 || w->dtype != QR_F32 || (bias && bias->dtype != QR_F32) || (kk && kk->dtype != QR_F32))
        return QR_KERR(k, "QrlMatMulScaled's scales, bias and factor are float32");
    if (y->ndim < 1 || !broadcasts_into(s, y, 1))
        return QR_KERR(k, "QrlMatMulScaled: the row scales (%d dims) do not broadcast into the output's rows", s->ndim);
    if (!per_column(w, y, n) || (bias && (!per_column(bias, y, n) || qr_tensor_numel(bias) != n)))
        return QR_KERR(k, "QrlMatMulScaled: the column scales and the bias are one value or one a column (%lld)",
                       (long long)n);
    if ((last != 0) != (kk != NULL) || last < 0 || last > 2 || (kk && (qr_tensor_numel(kk) != 1 || kk->ndim > y->ndim)))
        return QR_KERR(k, "QrlMatMulScaled: 'last' (%d) and the factor do not agree", last);
    return QR_OK;
}

static qr_status mms_run(qr_kctx *k)
{
    const qr_tensor *y = k->out[0], *s = k->in[4], *w = k->in[5], *bias = opt_in(k, 6), *kk = opt_in(k, 7);
    int64_t n = y->dims[y->ndim - 1], rows = n > 0 ? qr_tensor_numel(y) / n : 0;
    int64_t *s_of_row = qr_kwork(k, rows > 0 ? rows : 1, 1, sizeof *s_of_row, "row scales' places");
    if (!s_of_row)
        return QR_ERR;
    /* each output row's scale: s's dims aligned to y's last ones, a dim of 1 repeats */
    int64_t stride[QR_MAX_DIMS], sd[QR_MAX_DIMS];
    int rd = y->ndim - 1; /* the rows' dims: y's but the last */
    int64_t st = 1;
    for (int d = y->ndim - 1; d >= 0; d--) {
        int sdim = d - (y->ndim - s->ndim);
        sd[d] = sdim >= 0 ? s->dims[sdim] : 1;
        stride[d] = st;
        st *= sd[d];
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, at = 0;
        for (int d = rd - 1; d >= 0; d--) {
            int64_t i = rem % y->dims[d];
            rem /= y->dims[d];
            if (sd[d] != 1)
                at += i * stride[d];
        }
        s_of_row[r] = at;
    }
    /* an Add of a row vector after the node (a Linear's bias, qr_op_def.bias): its one rounding, last */
    if (k->bias && (k->bias->dtype != QR_F32 || qr_tensor_numel(k->bias) != n))
        return QR_KERR(k, "a fused bias of %lld values for %lld columns", (long long)qr_tensor_numel(k->bias),
                       (long long)n);
    mms_ep u = {s->data, w->data, bias ? bias->data : NULL, k->bias ? k->bias->data : NULL,
                kk ? ((const float *)kk->data)[0] : 0.f,
                (int)qr_attr_i(k->node, "last", 0), n, qr_tensor_numel(w), s_of_row, y->data};
    qr_acc_epilogue ep = {.run = mms_block, .user = &u, .run_rows = mms_block};
    return qr_matmulint_run_epilogue(k, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), qr_kinput_const(k, 1), &ep);
}

/* Its multiply-accumulates, for profiles: Y's elements times K. */
static double mms_macs(const qr_kctx *k)
{
    const qr_tensor *a = k->n_in > 0 ? k->in[0] : NULL;
    return a && a->ndim > 0 && k->out[0] ? (double)qr_tensor_numel(k->out[0]) * (double)a->dims[a->ndim - 1] : 0;
}

/* A 16-bit tensor's high and low bytes as 8-bit tensors in the node's workspace, x - x_zero =
 * 256 (hi - hi_zero) + (lo - lo_zero): hi is u8 for u16 (i8 for i16), lo u8, and the zero point
 * (one) splits the same way. The 8-bit paths then make each part's exact int32 sums. */
typedef struct byte_halves {
    qr_tensor hi, lo, hz, lz;
    int64_t hz_v, lz_v; /* the zero points' storage (one byte used) */
} byte_halves;

static qr_status split_halves(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, byte_halves *h)
{
    int64_t n = qr_tensor_numel(x), z = zero_point(xzp);
    qr_dtype ht = x->dtype == QR_U16 ? QR_U8 : QR_I8;
    h->hi = h->lo = *x;
    h->hi.dtype = ht;
    h->lo.dtype = QR_U8;
    h->hi.data = qr_kwork(k, n, 1, 1, "high bytes of 16-bit integers");
    h->lo.data = h->hi.data ? qr_kwork(k, n, 1, 1, "low bytes of 16-bit integers") : NULL;
    if (!h->lo.data)
        return QR_ERR;
    uint8_t *hi = h->hi.data, *lo = h->lo.data;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = get_int(x->data, x->dtype, i);
        lo[i] = (uint8_t)(v & 255);
        hi[i] = (uint8_t)((v - (v & 255)) / 256); /* i8's bits for i16 */
    }
    h->hz = (qr_tensor){.dtype = ht, .ndim = 0, .data = &h->hz_v};
    h->lz = (qr_tensor){.dtype = QR_U8, .ndim = 0, .data = &h->lz_v};
    h->hz_v = h->lz_v = 0;
    put_int(&h->hz_v, ht, 0, (z - (z & 255)) / 256);
    put_int(&h->lz_v, QR_U8, 0, z & 255);
    return QR_OK;
}

/* acc = 256 hi + lo, the int64 accumulator from its parts' int32 sums (n elements). */
static void combine_halves(int64_t *acc, const int32_t *hi, const int32_t *lo, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] = (int64_t)hi[i] * 256 + lo[i];
}

/* MatMulInteger of 16-bit A (one zero point) by 8-bit B: A's two bytes through the 8-bit paths. */
static qr_status matmul_acc_halves(qr_kctx *k, const mm_plan *p, const qr_tensor *a, const qr_tensor *azp,
                                   const qr_tensor *b, const qr_tensor *bzp, int64_t *acc)
{
    int64_t nacc = mm_acc_count(p);
    byte_halves h;
    int32_t *hi = qr_kwork(k, nacc, 1, sizeof *hi, "high bytes' sums");
    int32_t *lo = hi ? qr_kwork(k, nacc, 1, sizeof *lo, "low bytes' sums") : NULL;
    if (!lo || wide_k_check(k, p->kd) != QR_OK || split_halves(k, a, azp, &h) != QR_OK ||
        matmul_acc32(k, p, &h.hi, &h.hz, b, bzp, 0, hi) != QR_OK ||
        matmul_acc32(k, p, &h.lo, &h.lz, b, bzp, 0, lo) != QR_OK)
        return QR_ERR;
    combine_halves(acc, hi, lo, nacc);
    return QR_OK;
}

static qr_status matmulint_run(qr_kctx *k)
{
    mm_plan p;
    const qr_tensor *a = k->in[0], *b = k->in[1], *azp = opt_in(k, 2), *bzp = opt_in(k, 3);
    if (mm_plan_init(k, a, b, &p) != QR_OK)
        return QR_ERR;
    if (acc_type(a, b) == QR_I32)
        return matmul_acc32(k, &p, a, azp, b, bzp, qr_kinput_const(k, 1), k->out[0]->data);
    if (is_8bit(b->dtype) && (!azp || qr_tensor_numel(azp) == 1))
        return matmul_acc_halves(k, &p, a, azp, b, bzp, k->out[0]->data);
    int_operands o; /* a 16-bit B (a product of two 16-bit activations): the portable split */
    if (int_operands_init(k, a, azp, b, bzp, &p, &o) != QR_OK)
        return QR_ERR;
    qr_status st = int_matmul_wide(k, &p, &o, qr_tensor_numel(a), is_16bit(a->dtype), qr_tensor_numel(b),
                                   is_16bit(b->dtype), k->out[0]->data);
    int_operands_free(&o);
    return st;
}

/* Output type of a QLinear op: the output zero point's, else the input's. */
static qr_status qlinear_out_type(qr_kctx *k, const qr_tensor *yzp, const qr_tensor *x, qr_dtype *t)
{
    *t = yzp ? yzp->dtype : x->dtype;
    if (!is_8bit(*t))
        return QR_KERR(k, "the output zero point must be uint8 or int8, not %s", qr_dtype_name(*t));
    return QR_OK;
}

static qr_status check_scale(qr_kctx *k, const qr_tensor *s, const char *name)
{
    if (!s || !qr_dtype_is_float(s->dtype))
        return QR_KERR(k, "%s must be a float tensor", name);
    return QR_OK;
}

/* QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point. */
static qr_status qlmatmul_check(qr_kctx *k, mm_plan *p, qr_dtype *t)
{
    const qr_tensor *a = k->in[0], *b = k->in[3], *ys = k->in[6], *yzp = opt_in(k, 7);
    if (check_quant_operand(k, a, k->in[2], "a", 0) != QR_OK || check_quant_operand(k, b, k->in[5], "b", 0) != QR_OK ||
        check_scale(k, k->in[1], "a_scale") != QR_OK || check_scale(k, k->in[4], "b_scale") != QR_OK ||
        check_scale(k, ys, "y_scale") != QR_OK || qlinear_out_type(k, yzp, a, t) != QR_OK ||
        mm_plan_init(k, a, b, p) != QR_OK)
        return QR_ERR;
    if (qr_tensor_numel(ys) != 1 || (yzp && qr_tensor_numel(yzp) != 1))
        return QR_KERR(k, "y_scale and y_zero_point must be scalars (per-tensor output quantization)");
    return QR_OK;
}

static qr_status qlmatmul_infer(qr_kctx *k)
{
    mm_plan p;
    qr_dtype t = QR_UNDEF;
    if (qlmatmul_check(k, &p, &t) != QR_OK)
        return QR_ERR;
    mm_out_shape(k->in[0], k->in[3], &p, k->out[0]);
    k->out[0]->dtype = t;
    return QR_OK;
}

static qr_status qlmatmul_run(qr_kctx *k)
{
    const qr_tensor *a = k->in[0], *b = k->in[3], *ys = k->in[6], *yzp = opt_in(k, 7);
    qr_tensor *y = k->out[0];
    mm_plan p;
    qr_dtype t = QR_UNDEF;
    int_operands o = {0};
    if (qlmatmul_check(k, &p, &t) != QR_OK)
        return QR_ERR;
    /* the accumulator on the microkernel when MatMulInteger's would run there, else int32 loops */
    qr_igemm_rc_fn fn = mmq_kernel(&p, k->in[2], k->in[5]);
    if (!fn && int_operands_init(k, a, k->in[2], b, k->in[5], &p, &o) != QR_OK)
        return QR_ERR;
    int64_t nbatch = qr_tensor_numel(&p.batch), ny = nbatch * p.m * p.n, lo = 0, hi = 0;
    int64_t nra = qr_tensor_numel(a) / (p.kd ? p.kd : 1), ncb = qr_tensor_numel(b) / (p.kd ? p.kd : 1);
    int32_t *acc = malloc((size_t)ny * sizeof(int32_t) + 1);
    int64_t *ia = malloc((size_t)nbatch * sizeof(int64_t) + 1), *ib = malloc((size_t)nbatch * sizeof(int64_t) + 1);
    double *sa = malloc((size_t)nra * sizeof(double) + 1), *sb = malloc((size_t)ncb * sizeof(double) + 1);
    qr_status st = QR_ERR;
    if (!acc || !ia || !ib || !sa || !sb) {
        st = QR_KERR(k, "out of memory");
        goto out;
    }
    if (p.kd == 0) {
        for (int64_t i = 0; i < nra; i++)
            sa[i] = 0;
        for (int64_t i = 0; i < ncb; i++)
            sb[i] = 0;
    } else if (expand_param(k, k->in[1], p.nd_a, p.rows_a, 1, "a_scale", sa) != QR_OK ||
               expand_param(k, k->in[4], p.nd_b, p.cols_b, 0, "b_scale", sb) != QR_OK) {
        goto out;
    }
    st = fn ? mmq_run(k, &p, fn, a, zero_point(k->in[2]), NULL, b, zero_point(k->in[5]), qr_kinput_const(k, 3), acc,
                      ia, ib)
            : int_matmul(k, &p, &o, acc, ia, ib);
    if (st != QR_OK)
        goto out;
    quant_range(t, &lo, &hi);
    float ysf = (float)qr_get_f64(ys->data, ys->dtype, 0);
    int64_t yz = yzp ? get_int(yzp->data, yzp->dtype, 0) : 0;
    /* float32 multiplier (a_scale * b_scale) / y_scale, applied in double; one for the tensor
     * when both scales are (not a division per element) */
    int one = p.kd == 0 || (qr_tensor_numel(k->in[1]) == 1 && qr_tensor_numel(k->in[4]) == 1);
    float mult1 = one && p.kd ? (float)sa[0] * (float)sb[0] / ysf : 0; /* K 0: every sum is 0 */
    for (int64_t bi = 0; bi < nbatch; bi++)
        for (int64_t r = 0; r < p.m; r++)
            for (int64_t c = 0; c < p.n; c++) {
                float mult = mult1;
                if (!one) {
                    mult = (float)sa[ia[bi] * p.m + r] * (float)sb[ib[bi] * p.n + c];
                    mult /= ysf;
                }
                int64_t e = (bi * p.m + r) * p.n + c;
                put_int(y->data, t, e, saturate_round((double)acc[e] * (double)mult, yz, lo, hi));
            }
out:
    int_operands_free(&o);
    free(acc);
    free(ia);
    free(ib);
    free(sa);
    free(sb);
    return st;
}

/* ---- integer convolution ---- */

typedef struct iconv {
    int64_t n, c, m, group;
    qr_conv_geom g;
} iconv;

static qr_status iconv_check(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                             const qr_tensor *wzp, int wide, iconv *cv)
{
    if (check_quant_operand(k, x, xzp, "x", wide) != QR_OK || check_quant_operand(k, w, wzp, "w", wide) != QR_OK)
        return QR_ERR;
    if (x->ndim < 3 || w->ndim != x->ndim)
        return QR_KERR(k, "input (rank %d) and weights (rank %d) must have the same rank, 3 or more", x->ndim,
                       w->ndim);
    cv->group = qr_attr_i(k->node, "group", 1);
    if (cv->group < 1)
        return QR_KERR(k, "group %lld must be positive", (long long)cv->group);
    cv->n = x->dims[0];
    cv->c = x->dims[1];
    cv->m = w->dims[0];
    if (cv->c % cv->group || cv->m % cv->group || w->dims[1] * cv->group != cv->c)
        return QR_KERR(k, "input has %lld channels, weights %lld x %lld, group %lld: channels do not match",
                       (long long)cv->c, (long long)cv->m, (long long)w->dims[1], (long long)cv->group);
    if (xzp && qr_tensor_numel(xzp) != 1)
        return QR_KERR(k, "the input zero point must be a scalar (per-tensor quantization)");
    if (wzp && qr_tensor_numel(wzp) != 1 && qr_tensor_numel(wzp) != cv->m)
        return QR_KERR(k, "the weight zero point must be a scalar or have one value per output channel (%lld)",
                       (long long)cv->m);
    return qr_conv_geom_init(k, x, w->dims + 2, QR_WIN_CONV, &cv->g);
}

static void iconv_set_out(qr_kctx *k, const iconv *cv, qr_dtype t)
{
    qr_tensor *y = k->out[0];
    y->dtype = t;
    y->ndim = cv->g.r + 2;
    y->dims[0] = cv->n;
    y->dims[1] = cv->m;
    for (int i = 0; i < cv->g.r; i++)
        y->dims[2 + i] = cv->g.small[i];
}

/* Blocks of a whole accumulator [N, M, spatial] for an epilogue, from any thread. */
typedef struct epi_job {
    const qr_acc_epilogue *ep;
    const int32_t *acc;
    int64_t m, sn;
    int failed;    /* set by the first block that fails, which then owns err */
    qr_error *err;
} epi_job;

static void epi_failed(epi_job *j, const qr_error *e)
{
    if (!__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL))
        *j->err = *e;
}

static int epi_stopped(epi_job *j)
{
    return __atomic_load_n(&j->failed, __ATOMIC_ACQUIRE);
}

static void epi_block(epi_job *j, const qr_acc_block *b)
{
    qr_error e;
    if (!epi_stopped(j) && j->ep->run(j->ep, b, &e) != QR_OK)
        epi_failed(j, &e);
}

/* Rows [r0, r1) of the N x M, each image's part its own block. */
static void epi_rows(void *arg, int64_t r0, int64_t r1)
{
    epi_job *j = arg;
    while (r0 < r1) {
        int64_t c = r0 % j->m, n = r1 - r0 < j->m - c ? r1 - r0 : j->m - c;
        qr_acc_block b = {j->acc + r0 * j->sn, j->sn, n, j->sn, c, r0 * j->sn, j->sn};
        epi_block(j, &b);
        r0 += n;
    }
}

/* acc[N, M, small] = conv(x - x_zp, w - w_zp[m]) + bias[m], wrapped to
 * int32. Padding reads the zero point, i.e. contributes 0. */

/* The packed im2col of one image and group for a 2-D conv (igemm.h's
 * [K/4][N16][4] layout): each group of four window elements (q0 .. q0 + 3)
 * and row of outputs becomes 32-bit words of four bytes, each byte XORed
 * with flip (0x80 turns i8 into u8: x + 128), xz where a window hangs over
 * the padding. Where all four windows lie inside their rows the words are
 * built without a test, a loop GCC vectorizes; a row of padding reads zrow
 * (W bytes of xz ^ flip), so it needs no test either. */
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) static void pack_image_u8(const qr_conv_geom *g, const uint8_t *xg, int64_t cg, uint8_t xz, uint8_t flip,
                          uint8_t *colp, int64_t n16, const uint8_t *zrow, qr_igemm_interleave_fn interleave)
{
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],
                  KW = g->kernel[1];
    const int64_t s0 = g->stride[0], s1 = g->stride[1], d0 = g->dilation[0], d1 = g->dilation[1];
    const int64_t p0 = g->pad_begin[0], p1 = g->pad_begin[1], ck = cg * KH * KW;
    const uint32_t flip4 = flip * 0x01010101u;
    for (int64_t q0 = 0; q0 < ck; q0 += 4) {
        const uint8_t *plane[4];
        int64_t ky[4], x0[4], lo = 0, hi = OW;
        for (int t = 0; t < 4; t++) {
            int64_t q = q0 + t;
            plane[t] = NULL; /* past K: the weights there are 0, any byte does */
            ky[t] = x0[t] = 0;
            if (q < ck) {
                plane[t] = xg + q / (KH * KW) * H * W;
                ky[t] = q / KW % KH;
                x0[t] = q % KW * d1 - p1;
            }
            /* ox in [lo, hi): 0 <= ox * s1 + x0 < W */
            int64_t a = x0[t] >= 0 ? 0 : (-x0[t] + s1 - 1) / s1, b = x0[t] > W - 1 ? 0 : (W - 1 - x0[t]) / s1 + 1;
            lo = a > lo ? a : lo;
            hi = b < hi ? b : hi;
        }
        lo = lo < hi ? lo : hi;
        uint32_t *dst = (uint32_t *)(colp + q0 * n16);
        for (int64_t oy = 0; oy < OH; oy++) {
            const uint8_t *r[4];
            for (int t = 0; t < 4; t++) {
                int64_t iy = oy * s0 - p0 + ky[t] * d0;
                r[t] = plane[t] && iy >= 0 && iy < H ? plane[t] + iy * W : zrow;
            }
            uint32_t *d = dst + oy * OW;
            for (int64_t ox = 0; ox < OW; ox++) {
                if (ox == lo) { /* the inside: no tests */
                    const uint8_t *r0 = r[0] + x0[0], *r1 = r[1] + x0[1], *r2 = r[2] + x0[2], *r3 = r[3] + x0[3];
                    if (s1 == 1) {
                        interleave(d + ox, r0 + ox, r1 + ox, r2 + ox, r3 + ox, hi - ox, flip);
                        ox = hi;
                    } else if (s1 == 2) /* a constant stride: even bytes, a loop GCC vectorizes */
                        for (; ox < hi; ox++)
                            d[ox] = ((uint32_t)r0[2 * ox] | (uint32_t)r1[2 * ox] << 8 | (uint32_t)r2[2 * ox] << 16 |
                                     (uint32_t)r3[2 * ox] << 24) ^ flip4;
                    else
                        for (; ox < hi; ox++)
                            d[ox] = ((uint32_t)r0[ox * s1] | (uint32_t)r1[ox * s1] << 8 | (uint32_t)r2[ox * s1] << 16 |
                                     (uint32_t)r3[ox * s1] << 24) ^ flip4;
                    if (ox == OW)
                        break;
                }
                uint32_t word = 0;
                for (int t = 0; t < 4; t++) {
                    int64_t ix = ox * s1 + x0[t];
                    word |= (uint32_t)(ix >= 0 && ix < W ? r[t][ix] ^ flip : xz) << (8 * t);
                }
                d[ox] = word;
            }
        }
    }
}

/* A u8s8 convolution's operands and per-thread packing buffers. */
typedef struct u8conv_job {
    const iconv *cv;
    const uint8_t *x;
    uint8_t xz, flip;
    const int8_t *wp;     /* m x k4, the weight panels (NULL with wp16) */
    const int16_t *wp16;  /* or them as i16 for fn16, fn's twin (qr_igemm_wide_twin), or NULL */
    const int32_t *init;  /* m: bias - x_zero * sum(w) */
    int32_t *acc;
    qr_igemm_fn fn;
    qr_igemm16_fn fn16;
    qr_igemm_interleave_fn interleave; /* four rows of bytes into words */
    int64_t k4, n16;
    uint8_t *colp;        /* slots x k4 x n16 */
    int64_t *offs;        /* slots x small_n */
    const uint8_t *zrow;  /* a row of padding for 2-D packing: W bytes of xz ^ flip */
    /* Stride-1 images over padded planes (padded set): the group's channels copied once with
     * their zero-point border, Hp x Wp each, so that each window position's bytes for all outputs
     * are one contiguous run; the GEMM then computes OH x Wp columns (Wp - OW of every row are
     * junk) into accp, whose real columns are copied out. */
    int padded;
    /* Stride 2 (phased set): each padded plane split into its four phases (even or odd rows by
     * even or odd columns), Hq x Wq each, in which window position (ky, kx) reads phase
     * (ky % 2, kx % 2) from row ky / 2 and column kx / 2 on: again one run for all outputs, with
     * hp, wp_ the phase's size. */
    int phased;
    int64_t hp, wp_, npad, n16p, xpad_bytes;
    uint8_t *xpad; /* slots x xpad_bytes */
    int32_t *accp; /* slots x mg x npad: padded planes' sums; with an epilogue, slots x mg x small_n */
    /* An epilogue (conv_epilogue.h): each image's sums go to accp, and the rows a thread computed go
     * to the epilogue right after, while in cache; acc is then unused. */
    epi_job *ep;
} u8conv_job;

/* The GEMM of rows [m0, m1) of one image and group, then, with an epilogue, those rows' blocks:
 * one a row of outputs for padded planes (their junk columns skipped), else one. */
typedef struct rows_job {
    const u8conv_job *j;
    vnni_job g;
    int64_t n, gi; /* image and group */
} rows_job;

static void gemm_rows_epi(void *arg, int64_t m0, int64_t m1)
{
    const rows_job *r = arg;
    const u8conv_job *j = r->j;
    vnni_rows((void *)&r->g, m0, m1);
    if (!j->ep || m0 >= m1)
        return;
    const iconv *cv = j->cv;
    const qr_conv_geom *g = &cv->g;
    int64_t mg = cv->m / cv->group, c0 = r->gi * mg + m0, sn = g->small_n, row0 = (r->n * cv->m + c0) * sn;
    if (!j->padded) {
        qr_acc_block b = {r->g.c + m0 * sn, sn, m1 - m0, sn, c0, row0, sn};
        epi_block(j->ep, &b);
        return;
    }
    /* the real columns of each row together first (left to right: a row never overtakes its source),
     * so the epilogue gets whole rows of outputs, long enough to run on vectors */
    int64_t OH = g->small[0], OW = g->small[1];
    int32_t *c = r->g.c;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t oy = 1; oy < OH; oy++)
            memmove(c + m * j->npad + oy * OW, c + m * j->npad + oy * j->wp_, (size_t)OW * sizeof(int32_t));
    qr_acc_block b = {c + m0 * j->npad, j->npad, m1 - m0, sn, c0, row0, sn};
    epi_block(j->ep, &b);
}

/* x's channels [0, cg) of one image and group, XORed with flip, into planes of hp x wp_ with a
 * border of xz (the zero point, already in the shifted domain). */
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) static void pad_planes(const u8conv_job *j, const uint8_t *xg, int64_t cg, uint8_t *xpad)
{
    const qr_conv_geom *g = &j->cv->g;
    int64_t H = g->big[0], W = g->big[1], pt = g->pad_begin[0], pl = g->pad_begin[1];
    memset(xpad, j->xz, (size_t)j->xpad_bytes);
    if (j->phased) { /* padded row y + pt, column x + pl into phase ((y + pt) % 2, (x + pl) % 2) */
        int64_t ps = j->hp * j->wp_;
        for (int64_t c = 0; c < cg; c++)
            for (int64_t y = 0; y < H; y++) {
                const uint8_t *src = xg + (c * H + y) * W;
                int64_t py = (y + pt) % 2, qy = (y + pt) / 2;
                for (int px = 0; px < 2; px++) {
                    /* the columns x with (x + pl) % 2 == px, from x0 on, land at (x + pl) / 2 */
                    int64_t x0 = ((px - pl) % 2 + 2) % 2;
                    uint8_t *dst = xpad + (c * 4 + py * 2 + px) * ps + qy * j->wp_ + (x0 + pl) / 2;
                    for (int64_t i = 0; x0 + 2 * i < W; i++)
                        dst[i] = src[x0 + 2 * i] ^ j->flip;
                }
            }
        return;
    }
    for (int64_t c = 0; c < cg; c++)
        for (int64_t y = 0; y < H; y++) {
            const uint8_t *src = xg + (c * H + y) * W;
            uint8_t *dst = xpad + (c * j->hp + y + pt) * j->wp_ + pl;
            if (!j->flip) /* u8: libc's copy of a short row beats a loop with a scalar tail */
                memcpy(dst, src, (size_t)W);
            else
                for (int64_t x = 0; x < W; x++)
                    dst[x] = src[x] ^ j->flip;
        }
}

/* The packed [K/4][N16][4] im2col over the padded planes: for each window position q, its byte
 * for output column j (= oy * Wp + ox) is xpad[off(q) + j], one run per q. */
static void pack_padded(const u8conv_job *j, int64_t cg, const uint8_t *xpad, uint8_t *colp)
{
    const qr_conv_geom *g = &j->cv->g;
    const int64_t KH = g->kernel[0], KW = g->kernel[1], ck = cg * KH * KW, np = j->npad;
    int64_t c = 0, ky = 0, kx = 0; /* window position q as channel, row, column: counted, not divided */
    for (int64_t q0 = 0; q0 < ck; q0 += 4) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++) {
            if (q0 + t >= ck) { /* past K the weights are 0: any byte does */
                r[t] = r[0];
                continue;
            }
            if (j->phased)
                r[t] = xpad + ((c * 4 + ky % 2 * 2 + kx % 2) * j->hp + ky / 2) * j->wp_ + kx / 2;
            else
                r[t] = xpad + (c * j->hp + ky * g->dilation[0]) * j->wp_ + kx * g->dilation[1];
            if (++kx == KW && (kx = 0, ++ky == KH))
                ky = 0, c++;
        }
        j->interleave((uint32_t *)(colp + q0 * j->n16p), r[0], r[1], r[2], r[3], np, 0);
    }
}

/* Stride-2 phase planes only for images this narrow: wider ones pack as fast row by row (their
 * rows are long enough to vectorize), and copying the planes would cost more. */
#define QR_PHASED_MAX_OW 64

/* The GEMM of group gi's rows by colp's n columns into c (rows n apart). */
static vnni_job group_gemm(const u8conv_job *j, int64_t gi, int32_t *c, const uint8_t *colp, int64_t n)
{
    int64_t r0 = gi * (j->cv->m / j->cv->group);
    return (vnni_job){j->fn, c, j->wp ? j->wp + r0 * j->k4 : NULL, j->init + r0, colp, n, j->k4, n,
                      j->wp16 ? j->fn16 : NULL, j->wp16 ? j->wp16 + r0 * j->k4 : NULL};
}

/* One image, every group: its packed im2col, then the GEMM of the group's rows, split across
 * threads when pool is given. */
static void u8conv_image(const u8conv_job *j, int64_t n, uint8_t *colp, int64_t *offs, uint8_t *xpad, int32_t *accp,
                         qr_pool *pool)
{
    const iconv *cv = j->cv;
    const qr_conv_geom *g = &cv->g;
    int64_t cg = cv->c / cv->group, mg = cv->m / cv->group, sn = g->small_n;
    for (int64_t gi = 0; gi < cv->group; gi++) {
        const uint8_t *xg = j->x + (n * cv->c + gi * cg) * g->big_n;
        if (j->padded) {
            pad_planes(j, xg, cg, xpad);
            pack_padded(j, cg, xpad, colp);
            rows_job rj = {j, group_gemm(j, gi, accp, colp, j->npad), n, gi};
            if (pool)
                qr_parallel_for(pool, mg, 4, gemm_rows_epi, &rj);
            else
                gemm_rows_epi(&rj, 0, mg);
            if (j->ep)
                continue;
            int64_t OH = g->small[0], OW = g->small[1];
            for (int64_t m = 0; m < mg; m++)
                for (int64_t oy = 0; oy < OH; oy++)
                    memcpy(j->acc + ((n * cv->m + gi * mg + m) * OH + oy) * OW, accp + m * j->npad + oy * j->wp_,
                           (size_t)OW * sizeof(int32_t));
            continue;
        }
        if (g->r == 2) /* images: rows and columns of each window position directly */
            pack_image_u8(g, xg, cg, j->xz, j->flip, colp, j->n16, j->zrow, j->interleave);
        else
            for (int64_t kf = 0; kf < g->kernel_n; kf++) {
                qr_conv_offsets(g, kf, offs);
                for (int64_t c = 0; c < cg; c++) {
                    const uint8_t *xc = xg + c * g->big_n;
                    int64_t q = c * g->kernel_n + kf;
                    uint8_t *dst = colp + (q >> 2) * j->n16 * 4 + (q & 3);
                    for (int64_t i = 0; i < sn; i++)
                        dst[i * 4] = offs[i] >= 0 ? xc[offs[i]] ^ j->flip : j->xz;
                }
            }
        int32_t *c = j->ep ? accp : j->acc + (n * cv->m + gi * mg) * sn;
        rows_job rj = {j, group_gemm(j, gi, c, colp, sn), n, gi};
        if (pool)
            qr_parallel_for(pool, mg, 4, gemm_rows_epi, &rj);
        else
            gemm_rows_epi(&rj, 0, mg);
    }
}

static void u8conv_images(void *arg, int64_t i0, int64_t i1, int slot)
{
    const u8conv_job *j = arg;
    int64_t mg = j->cv->m / j->cv->group;
    for (int64_t n = i0; n < i1; n++)
        u8conv_image(j, n, j->colp + slot * j->k4 * j->n16, j->offs + slot * j->cv->g.small_n,
                     j->padded ? j->xpad + slot * j->xpad_bytes : NULL,
                     j->accp ? j->accp + slot * mg * (j->padded ? j->npad : j->cv->g.small_n) : NULL, NULL);
}

/* iconv_acc for u8 activations and s8 weights with zero points 0, on the
 * u8s8 microkernel: sum (x - x_zero) w = sum x w - x_zero sum w, so x goes in
 * as it is (padding as x_zero) and x_zero * sum(w) is folded into each output
 * channel's starting value; both sides wrap modulo 2^32, as the contract says.
 * i8 activations go in as x ^ 0x80 = x + 128 with x_zero + 128: the same
 * differences. The panels and starting values are made on the first run only
 * when weights, bias and x_zero are constants (wconst). A batch splits its
 * images across the threads, one image its rows: the same sums either way. */
static qr_status iconv_acc_u8s8(qr_kctx *k, const iconv *cv, const qr_tensor *x, int64_t xz, const qr_tensor *w,
                                const qr_tensor *bias, int32_t *acc, qr_igemm_fn fn, int wconst, epi_job *ep)
{
    uint8_t flip = x->dtype == QR_I8 ? 0x80 : 0;
    if (flip)
        xz += 128;
    const qr_conv_geom *g = &cv->g;
    int64_t cg = cv->c / cv->group, ck = cg * g->kernel_n, sn = g->small_n;
    int64_t k4 = qr_igemm_k4(ck), n16 = qr_igemm_n16(sn);
    int slots = cv->n > 1 ? qr_pool_threads(k->pool) : 1;
    size_t wbytes = (size_t)(cv->m * k4 + 63) / 64 * 64, bytes = wbytes + (size_t)cv->m * sizeof(int32_t);
    int fresh = 1;
    uint8_t *packed = wconst ? qr_kcache_get(k, bytes, "packed weights", &fresh) : qr_kscratch(k, 1, (int64_t)bytes, 1,
                                                                                                 "packed weights");
    if (!packed)
        return QR_ERR;
    int8_t *wp = (int8_t *)packed;
    int32_t *init = (int32_t *)(packed + wbytes);
    if (fresh) {
        memset(wp, 0, wbytes);
        const int8_t *wd = w->data;
        for (int64_t m = 0; m < cv->m; m++) {
            uint32_t sum = 0;
            for (int64_t i = 0; i < ck; i++) {
                wp[m * k4 + i] = wd[m * ck + i];
                sum += (uint32_t)(int32_t)wd[m * ck + i];
            }
            uint32_t b0 = bias ? (uint32_t)get_int(bias->data, bias->dtype, m) : 0;
            init[m] = (int32_t)(b0 - (uint32_t)xz * sum);
        }
    }
    /* the kernel's twin on i16 weights where it has one (AVX2: no widening in its tiles): the panels
     * widened for this call in the workspace (kept as i16 in the node's cache, each of the quantizer's
     * executors held twice their bytes: ResNet-18's quantize 139 -> 150 MB), where the memory
     * budget leaves room */
    qr_igemm16_fn fn16 = qr_kwork_fits(k, cv->m, k4, sizeof(int16_t)) ? qr_igemm_wide_twin(fn) : NULL;
    int16_t *wp16 = fn16 ? qr_kwork(k, cv->m, k4, sizeof(int16_t), "weights as i16") : NULL;
    if (fn16 && !wp16) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    for (int64_t i = 0; wp16 && i < cv->m * k4; i++)
        wp16[i] = wp[i];
    u8conv_job j = {cv, x->data, (uint8_t)xz, flip, wp16 ? NULL : wp, wp16, init, acc, fn, fn16, qr_igemm_interleave4(), k4, n16, NULL, NULL, NULL};
    int64_t mg = cv->m / cv->group;
    if (g->r == 2 && g->stride[0] == 1 && g->stride[1] == 1) {
        /* padded planes, when the junk columns cost at most half more (a 3x3 window on 7x7: 9/7) */
        j.hp = g->big[0] + g->pad_begin[0] + g->pad_end[0];
        j.wp_ = g->big[1] + g->pad_begin[1] + g->pad_end[1];
        j.padded = j.wp_ * 2 <= g->small[1] * 3 && g->small[0] > 0 && g->small[1] > 0;
        j.npad = g->small[0] * j.wp_;
        j.n16p = qr_igemm_n16(j.npad);
        /* the last window position reads (KW - 1) * d past the last plane's junk columns */
        j.xpad_bytes = (cg * j.hp * j.wp_ + (g->kernel[1] - 1) * g->dilation[1] + 63) / 64 * 64;
    } else if (g->r == 2 && g->stride[0] == 2 && g->stride[1] == 2 && g->dilation[0] == 1 && g->dilation[1] == 1 &&
               g->kernel[0] > 1 && g->kernel[1] > 1 && g->small[0] > 0 && g->small[1] > 0) {
        /* phase planes of ceil(padded / 2); window position (ky, kx) reads rows up to
         * OH - 1 + (KH - 1) / 2 < Hq of its phase, so only the last run passes the end, by KW / 2 */
        j.hp = (g->big[0] + g->pad_begin[0] + g->pad_end[0] + 1) / 2;
        j.wp_ = (g->big[1] + g->pad_begin[1] + g->pad_end[1] + 1) / 2;
        j.padded = j.phased = j.wp_ * 2 <= g->small[1] * 3 && g->small[1] <= QR_PHASED_MAX_OW;
        j.npad = g->small[0] * j.wp_;
        j.n16p = qr_igemm_n16(j.npad);
        j.xpad_bytes = (cg * 4 * j.hp * j.wp_ + g->kernel[1] / 2 + 63) / 64 * 64;
    }
    int64_t cols = j.padded ? j.n16p : n16;
    /* one workspace: per thread slot the packed im2col, the offsets table, and for padded planes
     * the planes and the accumulators with junk columns; then a row of padding */
    size_t at[6] = {0}, total = 0;
    int64_t region[5][2] = {{k4 * slots, cols},
                            {sn * slots, (int64_t)sizeof(int64_t)},
                            {j.padded ? slots : 0, j.padded ? j.xpad_bytes : 0},
                            {j.padded || ep ? slots * mg : 0,
                             (j.padded ? j.npad : ep ? sn : 0) * (int64_t)sizeof(int32_t)},
                            {1, g->r == 2 ? g->big[1] : 0}};
    for (int r = 0; r < 5; r++) {
        int64_t bytes;
        if (__builtin_mul_overflow(region[r][0], region[r][1], &bytes) || bytes < 0 ||
            __builtin_add_overflow(total, ((size_t)bytes + 63) / 64 * 64, &total)) {
            qr_kcache_done(k, packed);
            return QR_KERR(k, "out of memory budget: the integer convolution's scratch exceeds the address space");
        }
        at[r + 1] = total;
    }
    uint8_t *work = qr_kwork(k, 1, (int64_t)total, 1, "integer convolution's scratch (packed im2col, planes)");
    if (!work) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    /* rows past ck and columns past the outputs are never written: the weights there are 0 and
     * the microkernels store only real columns, so their bytes do not matter */
    uint8_t *colp = work + at[0], *xpad = j.padded ? work + at[2] : NULL, *zrow = work + at[4];
    int64_t *offs = (int64_t *)(void *)(work + at[1]);
    int32_t *accp = j.padded || ep ? (int32_t *)(void *)(work + at[3]) : NULL;
    memset(zrow, (uint8_t)xz ^ flip, (size_t)(g->r == 2 ? g->big[1] : 0));
    j.n16 = cols;
    j.colp = colp;
    j.offs = offs;
    j.zrow = zrow;
    j.xpad = xpad;
    j.accp = accp;
    j.ep = ep;
    if (slots > 1)
        qr_parallel_for_slots(k->pool, cv->n, 1, u8conv_images, &j);
    else
        for (int64_t n = 0; n < cv->n; n++)
            u8conv_image(&j, n, colp, offs, xpad, accp, k->pool);
    qr_kcache_done(k, packed);
    return QR_OK;
}

/* A depthwise 2-D convolution (one input channel per output channel): each
 * plane on its own, no im2col. acc = bias + sum (x - x_zero) (w - w_zero[c])
 * over the window; padding is x_zero, so it adds nothing and is skipped. A
 * product of two differences of 8-bit values fits int32; the sum wraps
 * modulo 2^32 (uint32), as the contract says. The plane's sums take one
 * window position at a time: its columns inside the row (found once per
 * position) need no test, a loop GCC vectorizes. */
typedef struct dw_job {
    const iconv *cv;
    const uint8_t *x;
    uint8_t flip;       /* 0x80: i8 activations, read as x ^ 0x80 = x + 128 */
    int32_t xz;         /* in the same (shifted) domain */
    const int32_t *wk;  /* c x kernel_n: w - w_zero */
    const uint32_t *b0; /* c: the bias */
    uint32_t *acc;
    /* With an epilogue (the runs path only): each thread's planes go to its chunk buffer and from
     * there to the epilogue, chunk_rows planes of one image at a time, instead of to acc. */
    epi_job *ep;
    uint32_t *chunks;   /* slots x chunk_rows x OH * OW */
    int64_t chunk_rows;
} dw_job;

__attribute__((target_clones("avx512f", "avx2", "default"))) static void dw_planes(void *arg, int64_t p0, int64_t p1)
{
    const dw_job *j = arg;
    const qr_conv_geom *g = &j->cv->g;
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],
                  KW = g->kernel[1], s1 = g->stride[1];
    const int32_t xz = j->xz; /* locals: the sums' stores may alias anything the job points to */
    const uint8_t flip = j->flip;
    for (int64_t p = p0; p < p1; p++) { /* plane p = n * C + c */
        int64_t c = p % j->cv->c;
        const uint8_t *xp = j->x + p * H * W;
        const int32_t *wk = j->wk + c * KH * KW;
        uint32_t *ap = j->acc + p * OH * OW;
        for (int64_t i = 0; i < OH * OW; i++)
            ap[i] = j->b0[c];
        for (int64_t ky = 0; ky < KH; ky++)
            for (int64_t kx = 0; kx < KW; kx++) { /* one window position over the plane */
                int32_t wv = wk[ky * KW + kx];
                int64_t x0 = kx * g->dilation[1] - g->pad_begin[1];
                int64_t lo = x0 >= 0 ? 0 : (-x0 + s1 - 1) / s1, hi = x0 > W - 1 ? 0 : (W - 1 - x0) / s1 + 1;
                hi = hi < OW ? hi : OW;
                for (int64_t oy = 0; oy < OH; oy++) {
                    int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
                    if (iy < 0 || iy >= H)
                        continue;
                    uint32_t *restrict a = ap + oy * OW;
                    const uint8_t *restrict r = xp + iy * W + x0;
                    if (s1 == 1)
                        for (int64_t ox = lo; ox < hi; ox++)
                            a[ox] += (uint32_t)(wv * ((int32_t)(r[ox] ^ flip) - xz));
                    else if (s1 == 2) /* a constant stride: a loop GCC vectorizes */
                        for (int64_t ox = lo; ox < hi; ox++)
                            a[ox] += (uint32_t)(wv * ((int32_t)(r[2 * ox] ^ flip) - xz));
                    else
                        for (int64_t ox = lo; ox < hi; ox++)
                            a[ox] += (uint32_t)(wv * ((int32_t)(r[ox * s1] ^ flip) - xz));
                }
            }
    }
}

/* 16 sums of a depthwise plane as one GCC vector (each clone lowers it to its own registers). */
typedef uint32_t V_dwu32 __attribute__((vector_size(64)));
typedef uint32_t U_dwu32 __attribute__((vector_size(64), aligned(4), may_alias));

/* a[i] = start + sum over the taps t of wv[t] * d[off[t] + i], modulo 2^32, for i < n: blocks of
 * 64 outputs keep their sums in registers across the taps (a pass per tap loaded and stored every
 * sum again). */
/* a[i] = start + sum_t wv[t] d[off[t] + i] for i < n, in whole vectors: a must have room for n
 * rounded up to 16, and d be readable that far past each run. */
static inline __attribute__((always_inline)) void dw_taps_u32(uint32_t *restrict a, const int32_t *restrict d,
                                                              const int64_t *off, const int32_t *wv, int64_t ntaps,
                                                              int64_t n, uint32_t start)
{
    enum { VL = 16 };
    const V_dwu32 zero = {0};
    int64_t i0 = 0;
    for (; i0 + 4 * VL <= n; i0 += 4 * VL) {
        V_dwu32 s0 = start + zero, s1 = s0, s2 = s0, s3 = s0;
        for (int64_t t = 0; t < ntaps; t++) {
            const int32_t *src = d + off[t] + i0;
            V_dwu32 wt = (uint32_t)wv[t] + zero;
            s0 += wt * *(const U_dwu32 *)src, s1 += wt * *(const U_dwu32 *)(src + VL);
            s2 += wt * *(const U_dwu32 *)(src + 2 * VL), s3 += wt * *(const U_dwu32 *)(src + 3 * VL);
        }
        *(U_dwu32 *)(a + i0) = s0, *(U_dwu32 *)(a + i0 + VL) = s1;
        *(U_dwu32 *)(a + i0 + 2 * VL) = s2, *(U_dwu32 *)(a + i0 + 3 * VL) = s3;
    }
    /* the rest a vector at a time, the last one past n: planes of 7 x 7 have fewer than 64 sums,
     * which one at a time cost more than all the rest */
    for (; i0 < n; i0 += VL) {
        V_dwu32 s0 = start + zero;
        for (int64_t t = 0; t < ntaps; t++)
            s0 += ((uint32_t)wv[t] + zero) * *(const U_dwu32 *)(d + off[t] + i0);
        *(U_dwu32 *)(a + i0) = s0;
    }
}

/* Depthwise planes as runs: each window position adds w * d[off + j] to every sum j in one run
 * over a copy of the plane's x - x_zero (int32, border 0: padding adds nothing), a loop GCC
 * vectorizes where the row loops of dw_planes had 7 to 56 outputs, mostly scalar.
 *  - stride 1: the padded plane, Hp x Wp; sum j = oy * Wp + ox;
 *  - stride 2 (both ways, no dilation): the padded plane split into its four phases (even or odd
 *    rows by even or odd columns), Hq x Wq each, plen apart; window position (ky, kx) reads phase
 *    (ky & 1, kx & 1) shifted by (ky / 2, kx / 2); sum j = oy * Wq + ox. The split reads each row
 *    at a constant stride of 2.
 * The wrow - OW junk sums a row are dropped when the sums are copied out. */
typedef struct dw_runs {
    const dw_job *j;
    int phased;         /* stride 2 over the four phases, else stride 1 over the padded plane */
    int64_t wrow, n;    /* a row of sums (Wp or Wq); n = OH * wrow */
    int64_t plen;       /* phased: one phase's length */
    int32_t *d;         /* slots x dlen: the plane, or its four phases */
    uint32_t *a;        /* slots x alen: the sums */
    int64_t dlen, alen; /* per slot, in elements: a cache line apart */
    const int64_t *off; /* per window position: where its run starts in the slot's plane */
} dw_runs;

__attribute__((target_clones("avx512f", "avx2", "default"))) static void dw_planes_runs(void *arg, int64_t p0,
                                                                                      int64_t p1, int slot)
{
    const dw_runs *P = arg;
    const dw_job *j = P->j;
    const qr_conv_geom *g = &j->cv->g;
    const int64_t H = g->big[0], W = g->big[1], OH = g->small[0], OW = g->small[1], KH = g->kernel[0],
                  KW = g->kernel[1], pt = g->pad_begin[0], pl = g->pad_begin[1], wrow = P->wrow;
    const int32_t xz = j->xz;
    const uint8_t flip = j->flip;
    int32_t *restrict d = P->d + slot * P->dlen;
    uint32_t *restrict a = P->a + slot * P->alen;
    const int64_t sn = OH * OW, C = j->cv->c;
    uint32_t *chunk = j->ep ? j->chunks + slot * j->chunk_rows * sn : NULL;
    int64_t first = p0; /* the chunk's first plane */
    /* the border once: each plane writes the same image positions, so the border stays 0 */
    memset(d, 0, (size_t)P->dlen * sizeof *d);
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % C;
        const uint8_t *xp = j->x + p * H * W;
        for (int64_t y = 0; y < H; y++) {
            const uint8_t *xr = xp + y * W;
            if (!P->phased) {
                int32_t *restrict dr = d + (y + pt) * wrow + pl;
                for (int64_t x = 0; x < W; x++)
                    dr[x] = (int32_t)(xr[x] ^ flip) - xz;
                continue;
            }
            int64_t py = (y + pt) & 1, r = (y + pt) >> 1;
            for (int64_t px = 0; px < 2; px++) {
                int64_t x0 = (px - pl) & 1; /* the first column of this phase: (x0 + pl) & 1 == px */
                int32_t *restrict dr = d + (py * 2 + px) * P->plen + r * wrow + ((x0 + pl) >> 1);
                const uint8_t *restrict sr = xr + x0;
                for (int64_t t = 0; t < (W - x0 + 1) / 2; t++)
                    dr[t] = (int32_t)(sr[2 * t] ^ flip) - xz;
            }
        }
        dw_taps_u32(a, d, P->off, j->wk + c * KH * KW, KH * KW, P->n, j->b0[c]);
        uint32_t *restrict out = chunk ? chunk + (p - first) * sn : j->acc + p * sn;
        for (int64_t oy = 0; oy < OH; oy++) /* rows of 7 to 56: a loop, not a libc call each */
            for (int64_t ox = 0; ox < OW; ox++)
                out[oy * OW + ox] = a[oy * wrow + ox];
        /* a full chunk, the image's last channel or the run's last plane: to the epilogue */
        if (chunk && (p + 1 - first == j->chunk_rows || (p + 1) % C == 0 || p + 1 == p1)) {
            qr_acc_block b = {(const int32_t *)chunk, sn, p + 1 - first, sn, first % C, first * sn, sn};
            epi_block(j->ep, &b);
            first = p + 1;
        }
    }
}

/* The depthwise planes of j as runs (dw_planes_runs), stride 1 or, phased, stride 2. */
static qr_status dw_as_runs(qr_kctx *k, dw_job *j, int phased)
{
    const qr_conv_geom *g = &j->cv->g;
    const int64_t kn = g->kernel_n, KW = g->kernel[1];
    const int64_t hp = g->big[0] + g->pad_begin[0] + g->pad_end[0], wp = g->big[1] + g->pad_begin[1] + g->pad_end[1];
    dw_runs P = {.j = j, .phased = phased, .wrow = phased ? (wp + 1) / 2 : wp};
    P.n = g->small[0] * P.wrow;
    P.alen = (P.n + 15) / 16 * 16;
    /* the last window position reads (KW - 1) * dilation past the plane's last row, (KW - 1) / 2
     * past a phase's */
    if (phased) {
        P.plen = ((hp + 1) / 2 * P.wrow + (KW - 1) / 2 + 15) / 16 * 16;
        P.dlen = 4 * P.plen;
    } else {
        P.dlen = (hp * wp + (KW - 1) * g->dilation[1] + 15) / 16 * 16;
    }
    P.dlen += 16; /* dw_taps_u32's last vector reads up to 15 past its last run's end */
    int slots = qr_pool_threads(k->pool);
    if (j->ep && !(j->chunks = qr_kwork(k, slots, j->chunk_rows * g->small_n, sizeof(uint32_t),
                                        "depthwise sums for the epilogue")))
        return QR_ERR;
    P.d = qr_kwork(k, slots, P.dlen, sizeof(int32_t), "depthwise planes");
    P.a = P.d ? qr_kwork(k, slots, P.alen, sizeof(uint32_t), "depthwise sums") : NULL;
    int64_t *off = P.a ? qr_kwork(k, kn, 1, sizeof(int64_t), "tap offsets") : NULL;
    if (!off)
        return QR_ERR;
    for (int64_t t = 0; t < kn; t++) { /* window position t's run */
        int64_t ky = t / KW, kx = t % KW;
        off[t] = phased ? ((ky & 1) * 2 + (kx & 1)) * P.plen + (ky >> 1) * P.wrow + (kx >> 1)
                        : ky * g->dilation[0] * wp + kx * g->dilation[1];
    }
    P.off = off;
    qr_parallel_for_slots(k->pool, j->cv->n * j->cv->c, 1, dw_planes_runs, &P);
    return QR_OK;
}

/* Depthwise planes handed to an epilogue at most this many bytes of sums at a time (in cache). */
#define QR_DW_CHUNK_BYTES 65536

static qr_status iconv_acc_depthwise(qr_kctx *k, const iconv *cv, const qr_tensor *x, const qr_tensor *xzp,
                                     const qr_tensor *w, const qr_tensor *wzp, const qr_tensor *bias, int32_t *acc,
                                     epi_job *ep)
{
    const qr_conv_geom *g = &cv->g;
    int64_t kn = g->kernel_n, nwz = wzp ? qr_tensor_numel(wzp) : 0;
    int32_t *wk = qr_kwork(k, cv->c, kn, sizeof(int32_t), "depthwise weights");
    uint32_t *b0 = wk ? qr_kwork(k, cv->c, 1, sizeof(uint32_t), "depthwise bias") : NULL;
    if (!b0)
        return QR_ERR;
    for (int64_t c = 0; c < cv->c; c++) {
        int64_t wz = nwz ? get_int(wzp->data, wzp->dtype, nwz == 1 ? 0 : c) : 0;
        for (int64_t i = 0; i < kn; i++)
            wk[c * kn + i] = (int32_t)(get_int(w->data, w->dtype, c * kn + i) - wz);
        b0[c] = bias ? (uint32_t)get_int(bias->data, bias->dtype, c) : 0;
    }
    uint8_t flip = x->dtype == QR_I8 ? 0x80 : 0;
    int32_t xz = (int32_t)(xzp ? get_int(xzp->data, xzp->dtype, 0) : 0) + (flip ? 128 : 0);
    int64_t rows = QR_DW_CHUNK_BYTES / (int64_t)sizeof(uint32_t) / (g->small_n > 0 ? g->small_n : 1);
    dw_job j = {cv, x->data, flip, xz, wk, b0, (uint32_t *)acc, ep, NULL, rows > 1 ? rows : 1};
    int stride1 = g->stride[0] == 1 && g->stride[1] == 1;
    int stride2 = g->stride[0] == 2 && g->stride[1] == 2 && g->dilation[0] == 1 && g->dilation[1] == 1;
    if ((stride1 || stride2) && g->small_n > 0) {
        if (dw_as_runs(k, &j, stride2) != QR_OK)
            return QR_ERR;
    } else {
        qr_parallel_for(k->pool, cv->n * cv->c, 1, dw_planes, &j);
    }
    return QR_OK;
}

/* The portable convolution's operands widened to int32 less their zero points: *xs = x - x_zero,
 * *ws = w - w_zero (per output channel or one), in the node's workspace. */
static qr_status iconv_widen(qr_kctx *k, const iconv *cv, const qr_tensor *x, const qr_tensor *xzp,
                             const qr_tensor *w, const qr_tensor *wzp, int32_t **xs_out, int32_t **ws_out)
{
    int64_t nx = qr_tensor_numel(x), nw = qr_tensor_numel(w);
    int32_t *xs = qr_kwork(k, nx, 1, sizeof(int32_t), "widened input");
    int32_t *ws = xs ? qr_kwork(k, nw, 1, sizeof(int32_t), "widened weights") : NULL;
    if (!ws)
        return QR_ERR;
    int64_t xz = xzp ? get_int(xzp->data, xzp->dtype, 0) : 0;
    for (int64_t i = 0; i < nx; i++)
        xs[i] = (int32_t)(get_int(x->data, x->dtype, i) - xz);
    int64_t per_m = cv->m ? nw / cv->m : 0, nwz = wzp ? qr_tensor_numel(wzp) : 0;
    for (int64_t m = 0; m < cv->m; m++) {
        int64_t wz = nwz ? get_int(wzp->data, wzp->dtype, nwz == 1 ? 0 : m) : 0;
        for (int64_t i = 0; i < per_m; i++)
            ws[m * per_m + i] = (int32_t)(get_int(w->data, w->dtype, m * per_m + i) - wz);
    }
    *xs_out = xs;
    *ws_out = ws;
    return QR_OK;
}

/* acc = bias + the convolution of the widened xs by ws: im2col and the int32 GEMM, which wraps
 * modulo 2^32 as an exact sum wrapped at the end would. */
static qr_status iconv_gemm32(qr_kctx *k, const iconv *cv, const int32_t *xs, const int32_t *ws,
                              const qr_tensor *bias, uint32_t *acc)
{
    const qr_conv_geom *g = &cv->g;
    int64_t cg = cv->c / cv->group, mg = cv->m / cv->group, ck = cg * g->kernel_n, sn = g->small_n;
    int32_t *col = qr_kwork(k, ck, sn, sizeof(int32_t), "im2col buffer");
    int64_t *offs = col ? qr_kwork(k, sn, 1, sizeof(int64_t), "window offsets") : NULL;
    if (!offs)
        return QR_ERR;
    for (int64_t n = 0; n < cv->n; n++)
        for (int64_t gi = 0; gi < cv->group; gi++) {
            const int32_t *xg = xs + (n * cv->c + gi * cg) * g->big_n;
            for (int64_t kf = 0; kf < g->kernel_n; kf++) {
                qr_conv_offsets(g, kf, offs);
                for (int64_t c = 0; c < cg; c++) {
                    const int32_t *xc = xg + c * g->big_n;
                    int32_t *cr = col + (c * g->kernel_n + kf) * sn;
                    for (int64_t j = 0; j < sn; j++)
                        cr[j] = offs[j] >= 0 ? xc[offs[j]] : 0;
                }
            }
            uint32_t *out = acc + (n * cv->m + gi * mg) * sn;
            for (int64_t mm = 0; mm < mg; mm++) {
                uint32_t b0 = bias ? (uint32_t)get_int(bias->data, bias->dtype, gi * mg + mm) : 0;
                for (int64_t j = 0; j < sn; j++)
                    out[mm * sn + j] = b0;
            }
            gemm_wrap32_par(k, out, sn, ws + gi * mg * ck, ck, mg, col, ck, sn);
        }
    return QR_OK;
}

/* wconst: w, bias and the input zero point are graph constants (what may be packed once). */
static qr_status iconv_acc(qr_kctx *k, const iconv *cv, const qr_tensor *x, const qr_tensor *xzp,
                           const qr_tensor *w, const qr_tensor *wzp, const qr_tensor *bias, int32_t *acc, int wconst,
                           epi_job *ep)
{
    const qr_conv_geom *g = &cv->g;
    int64_t cg = cv->c / cv->group, ck = cg * g->kernel_n;
    int64_t nw = qr_tensor_numel(w), sn = g->small_n;
    int depthwise = g->r == 2 && cv->group == cv->c && cv->m == cv->c && nw == cv->m * g->kernel_n &&
                    !qr_igemm_portable_forced();
    int u8s8 = !depthwise && (x->dtype == QR_U8 || x->dtype == QR_I8) && w->dtype == QR_I8 && nw == cv->m * ck;
    int dw_runs = depthwise && g->small_n > 0 && ((g->stride[0] == 1 && g->stride[1] == 1) ||
                                                  (g->stride[0] == 2 && g->stride[1] == 2 && g->dilation[0] == 1 &&
                                                   g->dilation[1] == 1));
    if (ep && dw_runs)
        return iconv_acc_depthwise(k, cv, x, xzp, w, wzp, bias, NULL, ep);
    if (ep && !(u8s8 && all_zero(wzp) && qr_igemm_u8s8())) {
        /* the epilogue on the whole accumulator: the other paths make all of it first */
        int32_t *whole = qr_kwork(k, cv->n * cv->m, sn, sizeof(int32_t), "integer convolution's accumulator");
        if (!whole || iconv_acc(k, cv, x, xzp, w, wzp, bias, whole, wconst, NULL) != QR_OK)
            return QR_ERR;
        ep->acc = whole;
        qr_parallel_for(k->pool, cv->n * cv->m, 8, epi_rows, ep);
        return ep->failed ? QR_ERR : QR_OK;
    }
    if (depthwise)
        return iconv_acc_depthwise(k, cv, x, xzp, w, wzp, bias, acc, NULL);
    if (u8s8) {
        qr_igemm_fn fn = all_zero(wzp) ? qr_igemm_u8s8() : NULL;
        if (fn)
            return iconv_acc_u8s8(k, cv, x, xzp ? get_int(xzp->data, xzp->dtype, 0) : 0, w, bias, acc, fn, wconst, ep);
    }
    int32_t *xs, *ws;
    if (iconv_widen(k, cv, x, xzp, w, wzp, &xs, &ws) != QR_OK)
        return QR_ERR;
    return iconv_gemm32(k, cv, xs, ws, bias, (uint32_t *)acc);
}

/* ConvInteger with a 16-bit operand: its int64 accumulator from byte parts (int_matmul_wide's
 * scheme), each convolved on the portable path. */
static qr_status iconv_acc_wide(qr_kctx *k, const iconv *cv, const qr_tensor *x, const qr_tensor *xzp,
                                const qr_tensor *w, const qr_tensor *wzp, int64_t *acc)
{
    int64_t ck = cv->c / cv->group * cv->g.kernel_n, nacc = cv->n * cv->m * cv->g.small_n;
    int32_t *xs, *ws;
    if (wide_k_check(k, ck) != QR_OK || iconv_widen(k, cv, x, xzp, w, wzp, &xs, &ws) != QR_OK)
        return QR_ERR;
    wide_parts px, pw;
    if (wide_split(k, xs, qr_tensor_numel(x), is_16bit(x->dtype), &px) != QR_OK)
        return QR_ERR;
    if (wide_split(k, ws, qr_tensor_numel(w), is_16bit(w->dtype), &pw) != QR_OK) {
        wide_parts_free(&px);
        return QR_ERR;
    }
    uint32_t *part = qr_kwork(k, nacc, 1, sizeof *part, "a part of the int64 accumulator");
    qr_status st = part ? QR_OK : QR_ERR;
    for (int64_t e = 0; e < nacc; e++)
        acc[e] = 0;
    for (int i = 0; st == QR_OK && i < px.n; i++)
        for (int j = 0; st == QR_OK && j < pw.n; j++) {
            if ((st = iconv_gemm32(k, cv, px.part[i], pw.part[j], NULL, part)) != QR_OK)
                break;
            int64_t f = (int64_t)1 << (px.shift[i] + pw.shift[j]);
            for (int64_t e = 0; e < nacc; e++)
                acc[e] += (int64_t)(int32_t)part[e] * f;
        }
    wide_parts_free(&px);
    wide_parts_free(&pw);
    return st;
}

/* ConvInteger of 16-bit x by 8-bit w: x's two bytes through the 8-bit paths (split_halves). Each
 * packs the weights afresh: the packing folds in x's zero point, which differs between them. */
static qr_status iconv_acc_halves(qr_kctx *k, const iconv *cv, const qr_tensor *x, const qr_tensor *xzp,
                                  const qr_tensor *w, const qr_tensor *wzp, int64_t *acc)
{
    int64_t nacc = cv->n * cv->m * cv->g.small_n;
    byte_halves h;
    int32_t *hi = qr_kwork(k, nacc, 1, sizeof *hi, "high bytes' sums");
    int32_t *lo = hi ? qr_kwork(k, nacc, 1, sizeof *lo, "low bytes' sums") : NULL;
    if (!lo || wide_k_check(k, cv->c / cv->group * cv->g.kernel_n) != QR_OK || split_halves(k, x, xzp, &h) != QR_OK ||
        iconv_acc(k, cv, &h.hi, &h.hz, w, wzp, NULL, hi, 0, NULL) != QR_OK ||
        iconv_acc(k, cv, &h.lo, &h.lz, w, wzp, NULL, lo, 0, NULL) != QR_OK)
        return QR_ERR;
    combine_halves(acc, hi, lo, nacc);
    return QR_OK;
}

/* ConvInteger inputs: x, w, x_zero_point, w_zero_point. */
static qr_status convint_infer(qr_kctx *k)
{
    iconv cv;
    if (iconv_check(k, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), 1, &cv) != QR_OK)
        return QR_ERR;
    iconv_set_out(k, &cv, acc_type(k->in[0], k->in[1]));
    return QR_OK;
}

static qr_status convint_run(qr_kctx *k)
{
    iconv cv;
    if (iconv_check(k, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), 1, &cv) != QR_OK)
        return QR_ERR;
    if (acc_type(k->in[0], k->in[1]) == QR_I64 && is_8bit(k->in[1]->dtype))
        return iconv_acc_halves(k, &cv, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), k->out[0]->data);
    if (acc_type(k->in[0], k->in[1]) == QR_I64)
        return iconv_acc_wide(k, &cv, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), k->out[0]->data);
    int wconst = qr_kinput_const(k, 1) && (!opt_in(k, 2) || qr_kinput_const(k, 2));
    return iconv_acc(k, &cv, k->in[0], opt_in(k, 2), k->in[1], opt_in(k, 3), NULL, k->out[0]->data, wconst, NULL);
}

/* ---- ConvInteger with an epilogue (conv_epilogue.h) ---- */

qr_status qr_convint_infer_as(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                              const qr_tensor *wzp, qr_dtype t)
{
    iconv cv;
    if (iconv_check(k, x, xzp, w, wzp, 0, &cv) != QR_OK)
        return QR_ERR;
    iconv_set_out(k, &cv, t);
    return QR_OK;
}

qr_status qr_convint_run_epilogue(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                                  const qr_tensor *wzp, int wconst, const qr_acc_epilogue *ep)
{
    iconv cv;
    if (iconv_check(k, x, xzp, w, wzp, 0, &cv) != QR_OK)
        return QR_ERR;
    epi_job j = {ep, NULL, cv.m, cv.g.small_n, 0, k->err};
    qr_status st = iconv_acc(k, &cv, x, xzp, w, wzp, NULL, NULL, wconst, &j);
    return j.failed ? QR_ERR : st;
}

/* QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B. */
static qr_status qlconv_check(qr_kctx *k, iconv *cv, qr_dtype *t)
{
    const qr_tensor *ws = k->in[4], *ys = k->in[6], *yzp = opt_in(k, 7), *bias = opt_in(k, 8);
    if (iconv_check(k, k->in[0], k->in[2], k->in[3], k->in[5], 0, cv) != QR_OK ||
        check_scale(k, k->in[1], "x_scale") != QR_OK || check_scale(k, ws, "w_scale") != QR_OK ||
        check_scale(k, ys, "y_scale") != QR_OK || qlinear_out_type(k, yzp, k->in[0], t) != QR_OK)
        return QR_ERR;
    if (qr_tensor_numel(k->in[1]) != 1 || qr_tensor_numel(ys) != 1 || (yzp && qr_tensor_numel(yzp) != 1))
        return QR_KERR(k, "x_scale, y_scale and y_zero_point must be scalars (per-tensor quantization)");
    if (qr_tensor_numel(ws) != 1 && qr_tensor_numel(ws) != cv->m)
        return QR_KERR(k, "w_scale must be a scalar or have one value per output channel (%lld)", (long long)cv->m);
    if (bias && (bias->dtype != QR_I32 || bias->ndim != 1 || bias->dims[0] != cv->m))
        return QR_KERR(k, "the bias must be an int32 vector of %lld values", (long long)cv->m);
    return QR_OK;
}

static qr_status qlconv_infer(qr_kctx *k)
{
    iconv cv;
    qr_dtype t = QR_UNDEF;
    if (qlconv_check(k, &cv, &t) != QR_OK)
        return QR_ERR;
    iconv_set_out(k, &cv, t);
    return QR_OK;
}

static qr_status qlconv_run(qr_kctx *k)
{
    iconv cv;
    qr_dtype t = QR_UNDEF;
    if (qlconv_check(k, &cv, &t) != QR_OK)
        return QR_ERR;
    const qr_tensor *xs = k->in[1], *ws = k->in[4], *ys = k->in[6], *yzp = opt_in(k, 7);
    qr_tensor *y = k->out[0];
    int64_t ny = qr_tensor_numel(y), sn = cv.g.small_n, lo = 0, hi = 0;
    int32_t *acc = malloc((size_t)ny * sizeof(int32_t) + 1);
    if (!acc)
        return QR_KERR(k, "out of memory");
    int wconst = qr_kinput_const(k, 3) && qr_kinput_const(k, 2) && (!opt_in(k, 8) || qr_kinput_const(k, 8));
    if (iconv_acc(k, &cv, k->in[0], k->in[2], k->in[3], k->in[5], opt_in(k, 8), acc, wconst, NULL) != QR_OK) {
        free(acc);
        return QR_ERR;
    }
    quant_range(t, &lo, &hi);
    float xsf = (float)qr_get_f64(xs->data, xs->dtype, 0), ysf = (float)qr_get_f64(ys->data, ys->dtype, 0);
    int64_t yz = yzp ? get_int(yzp->data, yzp->dtype, 0) : 0, nws = qr_tensor_numel(ws);
    for (int64_t n = 0; n < cv.n; n++)
        for (int64_t m = 0; m < cv.m; m++) {
            /* float32 multiplier (x_scale * w_scale) / y_scale, applied in double. */
            float mult = xsf * (float)qr_get_f64(ws->data, ws->dtype, nws == 1 ? 0 : m);
            mult /= ysf;
            int64_t base = (n * cv.m + m) * sn;
            for (int64_t j = 0; j < sn; j++)
                put_int(y->data, t, base + j, saturate_round((double)acc[base + j] * (double)mult, yz, lo, hi));
        }
    free(acc);
    return QR_OK;
}

/* ---- MatMulNBits (com.microsoft): Y = A @ dequantize(B)^T (+ bias), B 4-bit ----
 * ONNX Runtime's layout: B uint8 [N, n_blocks, block_size / 2], the codes of column n along K,
 * two to a byte, low nibble first (the last block padded); scales [N * n_blocks] (or
 * [N, n_blocks]); zero_points uint8 [N * ceil(n_blocks / 2)], packed the same way per column,
 * 8 when absent; weight = (code - zero) * scale. */
typedef struct mnb {
    int64_t K, N, block, nb, blob, M;
} mnb;

static qr_status mnb_shape(qr_kctx *k, mnb *s)
{
    const qr_tensor *a = k->in[0], *b = k->in[1], *sc = k->in[2];
    const qr_tensor *zp = k->n_in > 3 ? k->in[3] : NULL, *gi = k->n_in > 4 ? k->in[4] : NULL;
    const qr_tensor *bias = k->n_in > 5 ? k->in[5] : NULL;
    s->K = qr_attr_i(k->node, "K", -1);
    s->N = qr_attr_i(k->node, "N", -1);
    s->block = qr_attr_i(k->node, "block_size", -1);
    int64_t bits = qr_attr_i(k->node, "bits", 4);
    if (bits != 4)
        return QR_KERR(k, "MatMulNBits with bits = %lld is not supported (4 is)", (long long)bits);
    if (s->K < 1 || s->N < 1 || s->block < 16 || (s->block & (s->block - 1)) || s->K > QR_MAX_TENSOR_BYTES ||
        s->N > QR_MAX_TENSOR_BYTES)
        return QR_KERR(k, "MatMulNBits needs K and N >= 1 and block_size a power of two >= 16 (K %lld, N %lld, "
                          "block_size %lld)", (long long)s->K, (long long)s->N, (long long)s->block);
    if (gi)
        return QR_KERR(k, "MatMulNBits with g_idx is not supported");
    s->nb = (s->K + s->block - 1) / s->block;
    s->blob = s->block / 2;
    if (a->dtype != QR_F32 || a->ndim < 1 || a->dims[a->ndim - 1] != s->K)
        return QR_KERR(k, "MatMulNBits: A must be float32 with last dimension K = %lld", (long long)s->K);
    if (b->dtype != QR_U8 || b->ndim != 3 || b->dims[0] != s->N || b->dims[1] != s->nb || b->dims[2] != s->blob)
        return QR_KERR(k, "MatMulNBits: B must be uint8 [%lld, %lld, %lld]", (long long)s->N, (long long)s->nb,
                       (long long)s->blob);
    if (sc->dtype != QR_F32 || qr_tensor_numel(sc) != s->N * s->nb)
        return QR_KERR(k, "MatMulNBits: scales must be float32 with N * n_blocks = %lld values", (long long)(s->N * s->nb));
    if (zp && (zp->dtype != QR_U8 || qr_tensor_numel(zp) != s->N * ((s->nb + 1) / 2)))
        return QR_KERR(k, "MatMulNBits: zero_points must be uint8 with N * ceil(n_blocks / 2) = %lld values "
                          "(packed; float zero points are not supported)", (long long)(s->N * ((s->nb + 1) / 2)));
    if (bias && (bias->dtype != QR_F32 || qr_tensor_numel(bias) != s->N))
        return QR_KERR(k, "MatMulNBits: bias must be float32 [N]");
    s->M = qr_tensor_numel(a) / s->K;
    return QR_OK;
}

static qr_status mnb_infer(qr_kctx *k)
{
    mnb s;
    if (mnb_shape(k, &s) != QR_OK)
        return QR_ERR;
    int64_t dims[QR_MAX_DIMS];
    const qr_tensor *a = k->in[0];
    memcpy(dims, a->dims, sizeof(int64_t) * (size_t)a->ndim);
    dims[a->ndim - 1] = s.N;
    return qr_set_out(k, 0, QR_F32, a->ndim, dims);
}

/* The row kernels (q4gemm.h) over groups of 16 columns, split across threads. */
typedef struct mnb_job {
    const qr_q4w *w;
    qr_q4_i8_fn i8;
    qr_q4_f32_fn f32;
    float *y;
    const int8_t *qa;
    const float *af, *sa, *fsum, *bias;
    const int32_t *qsum;
    int64_t rows;
} mnb_job;

static void mnb_groups(void *arg, int64_t g0, int64_t g1)
{
    const mnb_job *j = arg;
    if (j->i8)
        j->i8(j->y, j->w->N, j->qa, j->sa, j->qsum, j->rows, j->w, j->bias, g0, g1);
    else
        j->f32(j->y, j->w->N, j->af, j->fsum, j->rows, j->w, j->bias, g0, g1);
}

/* Rows from this many at f32 take the f32 GEMM on the weights dequantized (in panels of
 * MNB_PANEL groups of 16 columns); fewer run the row kernels' 4-row tiles, which unpack each code
 * once per 4 rows. K = N = 1024, one thread, fastest of runs (AMD Zen 5, loaded): 64 rows 0.84 ms
 * tiles, 1.74 dequantized GEMM (f32 MatMul 0.98); 256 rows 3.6 against 6.2; 1024 rows 31.5
 * against 26.2. */
#define MNB_GEMM_ROWS 512
#define MNB_PANEL 32

static qr_status mnb_f32_gemm(qr_kctx *k, const qr_q4w *w, const qr_sgemm_kernel *sk, const float *a, float *y,
                              const float *bias, int64_t rows)
{
    int64_t cols = MNB_PANEL * 16;
    float *panel = qr_kwork(k, w->K, cols, sizeof(float), "dequantized 4-bit weights");
    float *work = panel ? qr_kwork(k, qr_pool_threads(k->pool), qr_sgemm_work(sk), sizeof(float), "packed GEMM panels")
                        : NULL;
    if (!work)
        return QR_ERR;
    for (int64_t g0 = 0; g0 < w->groups; g0 += MNB_PANEL) {
        int64_t g1 = g0 + MNB_PANEL < w->groups ? g0 + MNB_PANEL : w->groups, n0 = g0 * 16;
        int64_t n = (g1 * 16 < w->N ? g1 * 16 : w->N) - n0;
        qr_q4_dequant(w, g0, g1, panel, cols);
        qr_sgemm_job sj = {.a = a, .b = panel, .c = y + n0, .a_rs = w->K, .a_cs = 1, .ldb = cols, .ldc = w->N,
                           .m = rows, .n = n, .k = w->K, .col_bias = bias ? bias + n0 : NULL};
        qr_sgemm(k->pool, sk, &sj, work);
    }
    return QR_OK;
}

/* accuracy_level 4 asks for int8 activations (ONNX Runtime's CompInt8: each row of A quantized
 * per block, q4gemm.h), any other level for f32 ones, as ONNX Runtime reads the attribute. The
 * weights are packed once when B, scales and zero points are constants (the node's cache). */
static qr_status mnb_run(qr_kctx *k)
{
    mnb s;
    if (mnb_shape(k, &s) != QR_OK)
        return QR_ERR;
    const qr_tensor *zp = k->n_in > 3 ? k->in[3] : NULL, *bias = k->n_in > 5 ? k->in[5] : NULL;
    if (s.M == 0)
        return QR_OK;
    int i8 = qr_attr_i(k->node, "accuracy_level", 0) == 4;
    int wconst = qr_kinput_const(k, 1) && qr_kinput_const(k, 2) && (!zp || qr_kinput_const(k, 3));
    size_t bytes = qr_q4_bytes(s.K, s.N, s.block, zp != NULL);
    int fresh = 1;
    void *buf = wconst ? qr_kcache_get(k, bytes, "packed 4-bit weights", &fresh)
                       : qr_kwork(k, 1, (int64_t)bytes, 1, "packed 4-bit weights");
    if (!buf)
        return QR_ERR;
    qr_q4w w;
    if (fresh)
        qr_q4_pack(&w, buf, k->in[1]->data, k->in[2]->data, zp ? zp->data : NULL, s.K, s.N, s.block);
    else
        qr_q4_view(&w, buf, s.K, s.N, s.block, zp != NULL);
    mnb_job j = {.w = &w, .y = k->out[0]->data, .bias = bias ? bias->data : NULL, .rows = s.M};
    const float *a = k->in[0]->data;
    /* the f32 GEMM's reference kernel under --kernels portable: the same bits (sgemm.h) */
    const qr_sgemm_kernel *sk = qr_sgemm_best() ? qr_sgemm_best() : qr_sgemm_isa("ref");
    if (!i8 && s.M >= MNB_GEMM_ROWS && sk) {
        qr_status st = mnb_f32_gemm(k, &w, sk, a, j.y, j.bias, s.M);
        if (wconst)
            qr_kcache_done(k, buf);
        return st;
    }
    void *rows = qr_kwork(k, s.M, w.kp, i8 ? 1 : sizeof(float), "A's rows");
    void *sums = rows ? qr_kwork(k, s.M, w.nb, sizeof(float), "A's block sums") : NULL;
    float *sa = sums && i8 ? qr_kwork(k, s.M, w.nb, sizeof(float), "A's block scales") : NULL;
    if (!sums || (i8 && !sa)) {
        if (wconst)
            qr_kcache_done(k, buf);
        return QR_ERR;
    }
    if (i8) {
        qr_q4_quant_fn quant = qr_q4_quant_kernel();
        for (int64_t m = 0; m < s.M; m++)
            quant(a + m * s.K, s.K, s.block, (int8_t *)rows + m * w.kp, sa + m * w.nb, (int32_t *)sums + m * w.nb);
        j.i8 = qr_q4_i8_kernel(), j.qa = rows, j.sa = sa, j.qsum = sums;
    } else {
        for (int64_t m = 0; m < s.M; m++)
            qr_q4_prep_f32(a + m * s.K, s.K, s.block, (float *)rows + m * w.kp, (float *)sums + m * w.nb);
        j.f32 = qr_q4_f32_kernel(), j.af = rows, j.fsum = sums;
    }
    qr_parallel_for(k->pool, w.groups, 4, mnb_groups, &j);
    if (wconst)
        qr_kcache_done(k, buf);
    return QR_OK;
}

/* Its multiply-accumulates, for profiles: Y's elements times K. */
static double mnb_macs(const qr_kctx *k)
{
    return k->n_out > 0 && k->out[0] ? (double)qr_tensor_numel(k->out[0]) * (double)qr_attr_i(k->node, "K", 0) : 0;
}

#define CONV_ATTRS "auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints"

const qr_op_def qr_ops_quant[] = {
    {"QuantizeLinear", "", 2, 3, 1, 1, "axis:i block_size:i output_dtype:i saturate:i", quantize_infer, quantize_run, 0, .ins = "x y_scale y_zero_point?", .writes_all = qr_op_writes_all},
    {"DequantizeLinear", "", 2, 3, 1, 1, "axis:i block_size:i output_dtype:i", dequantize_infer, dequantize_run, 0, .ins = "x x_scale x_zero_point?", .writes_all = qr_op_writes_all},
    {"DynamicQuantizeLinear", "", 1, 1, 1, 3, "", dynquant_infer, dynquant_run, 0, .ins = "x:f"},
    {"DynamicQuantizeRows", "qrl", 1, 1, 3, 3, "", dynrows_infer, dynrows_run, 0, .ins = "x:f", .gelu_in = 1},
    {"MatMulInteger", "", 2, 4, 1, 1, "", matmulint_infer, matmulint_run, 0, .ins = "A:w1+ B:w1+ a_zero_point?:w b_zero_point?:w", .writes_all = qr_op_writes_all},
    {"QrlMatMulScaled", "qrl", 3, 8, 1, 1, "last:i", mms_infer, mms_run, 0, .ins = "A:q1+ B:q1+ a_zero_point:q b_zero_point?:q s:f w:f bias?:f k?:f", .writes_all = qr_op_writes_all, .macs = mms_macs, .bias = 1},
    {"QLinearMatMul", "", 8, 8, 1, 1, "", qlmatmul_infer, qlmatmul_run, 0, .ins = "a:q1+ a_scale:f a_zero_point:q b:q1+ b_scale:f b_zero_point:q y_scale:f y_zero_point:q", .writes_all = qr_op_writes_all},
    {"ConvInteger", "", 2, 4, 1, 1, CONV_ATTRS, convint_infer, convint_run, 0, .ins = "x:w3+ w:w3+ x_zero_point?:w w_zero_point?:w"},
    {"MatMulNBits", "com.microsoft", 3, 6, 1, 1, "K:i N:i bits:i block_size:i accuracy_level:i", mnb_infer, mnb_run, 0, .ins = "A:f B scales:f zero_points? g_idx? bias?:f", .writes_all = qr_op_writes_all, .macs = mnb_macs},
    {"QLinearConv", "", 8, 9, 1, 1, CONV_ATTRS, qlconv_infer, qlconv_run, 0, .ins = "x:q3+ x_scale:f x_zero_point:q w:q3+ w_scale:f w_zero_point:q y_scale:f y_zero_point:q B?:x1"},
    {0},
};
