/* Element types: one table row per type (name, size, ONNX code, numpy code). */
#ifndef QR_DTYPE_H
#define QR_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum qr_dtype {
    QR_UNDEF = 0,
    QR_F32,
    QR_F64,
    QR_F16,
    QR_I8,
    QR_U8,
    QR_I16,
    QR_U16,
    QR_I32,
    QR_U32,
    QR_I64,
    QR_U64,
    QR_BOOL,
    QR_STRING, /* only so import can name it in an error; no kernel takes it */
    QR_DTYPE_COUNT
} qr_dtype;

typedef struct qr_dtype_info {
    const char *name;   /* "f32", as printed by dump */
    size_t size;        /* bytes per element */
    int onnx;           /* TensorProto.DataType */
    const char *npy;    /* numpy descr without byte order, e.g. "f4"; NULL if none */
    int is_float, is_signed;
} qr_dtype_info;

const qr_dtype_info *qr_dtype_get(qr_dtype t);
const char *qr_dtype_name(qr_dtype t);
size_t qr_dtype_size(qr_dtype t);
qr_dtype qr_dtype_from_onnx(int onnx_code); /* QR_UNDEF when unknown */
qr_dtype qr_dtype_from_name(const char *name); /* "u8", "f32", ... as qr_dtype_name; QR_UNDEF when unknown */
int qr_dtype_is_float(qr_dtype t);
int qr_dtype_is_int(qr_dtype t); /* integer types, bool excluded */

/* Element access through double: exact for every type but i64/u64 beyond 2^53,
 * which kernels that care handle with qr_get_i64. */
double qr_get_f64(const void *data, qr_dtype t, int64_t i);
void qr_set_f64(void *data, qr_dtype t, int64_t i, double v);
int64_t qr_get_i64(const void *data, qr_dtype t, int64_t i);
void qr_set_i64(void *data, qr_dtype t, int64_t i, int64_t v);

float qr_half_to_float(uint16_t h);
uint16_t qr_float_to_half(float f);

#endif
