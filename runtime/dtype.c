#include "dtype.h"

#include <math.h>
#include <string.h>

static const qr_dtype_info dtype_table[QR_DTYPE_COUNT] = {
    [QR_UNDEF] = {"undef", 0, 0, NULL, 0, 0, 0},
    [QR_F32] = {"f32", 4, 1, "f4", 1, 1, 32},
    [QR_U8] = {"u8", 1, 2, "u1", 0, 0, 8},
    [QR_I8] = {"i8", 1, 3, "i1", 0, 1, 8},
    [QR_U16] = {"u16", 2, 4, "u2", 0, 0, 16},
    [QR_I16] = {"i16", 2, 5, "i2", 0, 1, 16},
    [QR_I32] = {"i32", 4, 6, "i4", 0, 1, 32},
    [QR_I64] = {"i64", 8, 7, "i8", 0, 1, 64},
    [QR_STRING] = {"string", 0, 8, NULL, 0, 0, 0},
    [QR_BOOL] = {"bool", 1, 9, "b1", 0, 0, 8},
    [QR_F16] = {"f16", 2, 10, "f2", 1, 1, 16},
    [QR_F64] = {"f64", 8, 11, "f8", 1, 1, 64},
    [QR_U32] = {"u32", 4, 12, "u4", 0, 0, 32},
    [QR_U64] = {"u64", 8, 13, "u8", 0, 0, 64},
    [QR_U4] = {"u4", 1, 21, NULL, 0, 0, 4},
    [QR_I4] = {"i4", 1, 22, NULL, 0, 1, 4},
};

const qr_dtype_info *qr_dtype_get(qr_dtype t)
{
    return &dtype_table[(unsigned)t < QR_DTYPE_COUNT ? t : QR_UNDEF];
}

const char *qr_dtype_name(qr_dtype t) { return qr_dtype_get(t)->name; }
size_t qr_dtype_size(qr_dtype t) { return qr_dtype_get(t)->size; }
int qr_dtype_bits(qr_dtype t) { return qr_dtype_get(t)->bits; }
int qr_dtype_is_packed(qr_dtype t) { return t == QR_I4 || t == QR_U4; }

qr_dtype qr_dtype_container(qr_dtype t) { return t == QR_I4 ? QR_I8 : t == QR_U4 ? QR_U8 : t; }

size_t qr_dtype_bytes(qr_dtype t, int64_t n)
{
    return qr_dtype_is_packed(t) ? (size_t)(n + 1) / 2 : (size_t)n * qr_dtype_size(t);
}

int qr_nibble_get(const uint8_t *d, int is_signed, int64_t i)
{
    int v = (d[i >> 1] >> ((i & 1) * 4)) & 15;
    return is_signed && v >= 8 ? v - 16 : v;
}

void qr_nibble_set(uint8_t *d, int64_t i, int v)
{
    int sh = (int)(i & 1) * 4;
    d[i >> 1] = (uint8_t)((d[i >> 1] & ~(15 << sh)) | ((v & 15) << sh));
}
int qr_dtype_is_float(qr_dtype t) { return qr_dtype_get(t)->is_float; }

int qr_dtype_is_int(qr_dtype t)
{
    return t != QR_BOOL && t != QR_UNDEF && t != QR_STRING && !qr_dtype_is_float(t);
}

qr_dtype qr_dtype_from_name(const char *name)
{
    for (int t = 1; t < QR_DTYPE_COUNT; t++)
        if (!strcmp(dtype_table[t].name, name))
            return (qr_dtype)t;
    return QR_UNDEF;
}

qr_dtype qr_dtype_from_onnx(int code)
{
    for (int t = 1; t < QR_DTYPE_COUNT; t++)
        if (dtype_table[t].onnx == code)
            return (qr_dtype)t;
    return QR_UNDEF;
}

float qr_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t qr_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent, which is the right result */
    return (uint16_t)h;
}

double qr_get_f64(const void *d, qr_dtype t, int64_t i)
{
    switch (t) {
    case QR_F32: return ((const float *)d)[i];
    case QR_F64: return ((const double *)d)[i];
    case QR_F16: return qr_half_to_float(((const uint16_t *)d)[i]);
    case QR_I8: return ((const int8_t *)d)[i];
    case QR_U8: return ((const uint8_t *)d)[i];
    case QR_I16: return ((const int16_t *)d)[i];
    case QR_U16: return ((const uint16_t *)d)[i];
    case QR_I32: return ((const int32_t *)d)[i];
    case QR_U32: return ((const uint32_t *)d)[i];
    case QR_I64: return (double)((const int64_t *)d)[i];
    case QR_U64: return (double)((const uint64_t *)d)[i];
    case QR_BOOL: return ((const uint8_t *)d)[i] != 0;
    case QR_I4: return qr_nibble_get(d, 1, i);
    case QR_U4: return qr_nibble_get(d, 0, i);
    default: return 0;
    }
}

/* Float to integer conversion saturates and maps NaN to 0, so no input is UB. */
static int64_t sat_i64(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

void qr_set_f64(void *d, qr_dtype t, int64_t i, double v)
{
    switch (t) {
    case QR_F32: ((float *)d)[i] = (float)v; break;
    case QR_F64: ((double *)d)[i] = v; break;
    case QR_F16: ((uint16_t *)d)[i] = qr_float_to_half((float)v); break;
    case QR_I8: ((int8_t *)d)[i] = (int8_t)sat_i64(v, INT8_MIN, INT8_MAX); break;
    case QR_U8: ((uint8_t *)d)[i] = (uint8_t)sat_i64(v, 0, UINT8_MAX); break;
    case QR_I16: ((int16_t *)d)[i] = (int16_t)sat_i64(v, INT16_MIN, INT16_MAX); break;
    case QR_U16: ((uint16_t *)d)[i] = (uint16_t)sat_i64(v, 0, UINT16_MAX); break;
    case QR_I32: ((int32_t *)d)[i] = (int32_t)sat_i64(v, INT32_MIN, INT32_MAX); break;
    case QR_U32: ((uint32_t *)d)[i] = (uint32_t)sat_i64(v, 0, UINT32_MAX); break;
    case QR_I64: ((int64_t *)d)[i] = sat_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case QR_U64: ((uint64_t *)d)[i] = isnan(v) || v <= 0 ? 0 : v >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)v; break;
    case QR_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case QR_I4: qr_nibble_set(d, i, (int)sat_i64(v, -8, 7)); break;
    case QR_U4: qr_nibble_set(d, i, (int)sat_i64(v, 0, 15)); break;
    default: break;
    }
}

int64_t qr_get_i64(const void *d, qr_dtype t, int64_t i)
{
    switch (t) {
    case QR_I64: return ((const int64_t *)d)[i];
    case QR_U64: return (int64_t)((const uint64_t *)d)[i];
    case QR_I8: return ((const int8_t *)d)[i];
    case QR_U8: return ((const uint8_t *)d)[i];
    case QR_I16: return ((const int16_t *)d)[i];
    case QR_U16: return ((const uint16_t *)d)[i];
    case QR_I32: return ((const int32_t *)d)[i];
    case QR_U32: return ((const uint32_t *)d)[i];
    case QR_BOOL: return ((const uint8_t *)d)[i] != 0;
    case QR_I4: return qr_nibble_get(d, 1, i);
    case QR_U4: return qr_nibble_get(d, 0, i);
    default: return sat_i64(qr_get_f64(d, t, i), -9223372036854775808.0, 9223372036854774784.0);
    }
}

void qr_set_i64(void *d, qr_dtype t, int64_t i, int64_t v)
{
    switch (t) {
    case QR_I64: ((int64_t *)d)[i] = v; break;
    case QR_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case QR_I8: ((int8_t *)d)[i] = (int8_t)v; break;   /* wraps, as integer casts do */
    case QR_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case QR_I16: ((int16_t *)d)[i] = (int16_t)v; break;
    case QR_U16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case QR_I32: ((int32_t *)d)[i] = (int32_t)v; break;
    case QR_U32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    case QR_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case QR_I4: case QR_U4: qr_nibble_set(d, i, (int)v); break; /* wraps to 4 bits */
    default: qr_set_f64(d, t, i, (double)v); break;
    }
}
