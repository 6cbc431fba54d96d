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
    /* 4-bit integers, packed two to a byte as ONNX's INT4/UINT4: element 2k in the low nibble of
     * byte k, element 2k+1 in its high nibble (an odd count leaves the last high nibble 0). Their
     * bit width (4) is not their container's: qr_dtype_size says 1 (what one element needs at
     * most), qr_dtype_bytes what n of them take. Last in the list so the others keep their codes. */
    QR_I4,
    QR_U4,
    QR_DTYPE_COUNT
} qr_dtype;

typedef struct qr_dtype_info {
    const char *name;   /* "f32", as printed by dump */
    size_t size;        /* bytes per element */
    int onnx;           /* TensorProto.DataType */
    const char *npy;    /* numpy descr without byte order, e.g. "f4"; NULL if none */
    int is_float, is_signed;
    int bits;           /* the value's width: 8 * size, or 4 for the packed types */
} qr_dtype_info;

const qr_dtype_info *qr_dtype_get(qr_dtype t);
const char *qr_dtype_name(qr_dtype t);
size_t qr_dtype_size(qr_dtype t);
int qr_dtype_bits(qr_dtype t);
/* The bytes n elements take: n * size, or (n + 1) / 2 for the packed 4-bit types. */
size_t qr_dtype_bytes(qr_dtype t, int64_t n);
int qr_dtype_is_packed(qr_dtype t); /* i4, u4 */
/* The type code holds a value of t in: i8 for i4, u8 for u4 (what kernels see), else t itself. */
qr_dtype qr_dtype_container(qr_dtype t);
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

/* Packed 4-bit data: element i as an integer (i4 sign-extended), and element i set to v's low
 * nibble (callers clamp first). */
int qr_nibble_get(const uint8_t *data, int is_signed, int64_t i);
void qr_nibble_set(uint8_t *data, int64_t i, int v);

float qr_half_to_float(uint16_t h);
uint16_t qr_float_to_half(float f);

#endif
