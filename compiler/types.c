#include "types.h"

#include <stdio.h>

const qc_type qc_void = {QC_VOID, 0, 0, 0}, qc_bool = {QC_BOOL, 0, 0, 0}, qc_i8 = {QC_I8, 0, 0, 0},
              qc_u8 = {QC_U8, 0, 0, 0}, qc_i16 = {QC_I16, 0, 0, 0}, qc_u16 = {QC_U16, 0, 0, 0},
              qc_i32 = {QC_I32, 0, 0, 0}, qc_i64 = {QC_I64, 0, 0, 0}, qc_f32 = {QC_F32, 0, 0, 0},
              qc_f64 = {QC_F64, 0, 0, 0}, qc_intlit = {QC_INTLIT, 0, 0, 0}, qc_floatlit = {QC_FLOATLIT, 0, 0, 0},
              qc_qtype = {QC_QTYPE, 0, 0, 0}, qc_qparams = {QC_QPARAMS, 0, 0, 0}, qc_hist = {QC_HIST, 0, 0, 0},
              qc_str = {QC_STR, 0, 0, 0}, qc_value = {QC_VALUE, 0, 0, 0}, qc_role = {QC_ROLE, 0, 0, 0},
              qc_error = {QC_ERROR, 0, 0, 0};

const qc_type *qc_array_of(ql_arena *a, const qc_type *elem, int64_t len)
{
    qc_type *t = ql_alloc(a, sizeof *t);
    t->k = QC_ARRAY;
    t->elem = elem;
    t->len = len;
    return t;
}

const qc_type *qc_tensor_of(ql_arena *a, const qc_type *elem)
{
    qc_type *t = ql_alloc(a, sizeof *t);
    t->k = QC_TENSOR;
    t->elem = elem;
    return t;
}

int qc_is_int(const qc_type *t)
{
    return (t->k >= QC_I8 && t->k <= QC_I64) || t->k == QC_INTLIT;
}

int qc_is_float(const qc_type *t)
{
    return t->k == QC_F32 || t->k == QC_F64 || t->k == QC_FLOATLIT;
}

int qc_is_numeric(const qc_type *t)
{
    return qc_is_int(t) || qc_is_float(t) || t->k == QC_ERROR;
}

int qc_is_scalar(const qc_type *t)
{
    return qc_is_numeric(t) || t->k == QC_BOOL;
}

int qc_is_signed(const qc_type *t)
{
    return t->k == QC_I8 || t->k == QC_I16 || t->k == QC_I32 || t->k == QC_I64 || t->k == QC_INTLIT;
}

int qc_type_bits(const qc_type *t)
{
    switch (t->k) {
    case QC_BOOL: case QC_I8: case QC_U8: return 8;
    case QC_I16: case QC_U16: return 16;
    case QC_I32: case QC_F32: return 32;
    default: return 64;
    }
}

int qc_type_eq(const qc_type *a, const qc_type *b)
{
    if (a == b)
        return 1;
    if (a->k != b->k)
        return 0;
    if (a->k == QC_ARRAY)
        return qc_type_eq(a->elem, b->elem);
    if (a->k == QC_TENSOR)
        return qc_type_eq(a->elem, b->elem);
    if (a->k == QC_STATE)
        return a->decl == b->decl;
    return 1;
}

int qc_widens(const qc_type *from, const qc_type *to)
{
    if (from->k == QC_ERROR || to->k == QC_ERROR || qc_type_eq(from, to))
        return 1;
    if (to->k == QC_ARRAY && from->k == QC_ARRAY) /* a sized state array is also a view */
        return qc_type_eq(from->elem, to->elem) && to->len < 0;
    if (from->k == QC_INTLIT)
        return qc_is_int(to) || qc_is_float(to); /* the value is checked where it is known */
    if (from->k == QC_FLOATLIT)
        return qc_is_float(to);
    if (qc_is_float(from))
        return from->k == QC_F32 && to->k == QC_F64;
    if (!qc_is_int(from) || !qc_is_int(to) || to->k == QC_INTLIT)
        return 0;
    int fb = qc_type_bits(from), tb = qc_type_bits(to);
    if (qc_is_signed(from) == qc_is_signed(to))
        return tb >= fb;
    return !qc_is_signed(from) && tb > fb; /* unsigned into a wider signed type */
}

const qc_type *qc_common(const qc_type *a, const qc_type *b)
{
    if (a->k == QC_ERROR)
        return b;
    if (b->k == QC_ERROR)
        return a;
    int la = a->k == QC_INTLIT || a->k == QC_FLOATLIT, lb = b->k == QC_INTLIT || b->k == QC_FLOATLIT;
    if (la && lb)
        return a->k == QC_FLOATLIT || b->k == QC_FLOATLIT ? &qc_floatlit : &qc_intlit;
    if (la)
        return qc_widens(a, b) ? b : NULL; /* a literal takes the other side's type */
    if (lb)
        return qc_widens(b, a) ? a : NULL;
    if (qc_widens(a, b))
        return b;
    if (qc_widens(b, a))
        return a;
    static const qc_type *const ladder[] = {&qc_i16, &qc_i32, &qc_i64};
    for (int i = 0; i < 3; i++)
        if (qc_widens(a, ladder[i]) && qc_widens(b, ladder[i]))
            return ladder[i];
    return NULL;
}

const qc_type *qc_default(const qc_type *t)
{
    return t->k == QC_INTLIT ? &qc_i64 : t->k == QC_FLOATLIT ? &qc_f64 : t;
}

int qc_int_fits(int64_t v, const qc_type *t)
{
    switch (t->k) {
    case QC_I8: return v >= -128 && v <= 127;
    case QC_U8: return v >= 0 && v <= 255;
    case QC_I16: return v >= -32768 && v <= 32767;
    case QC_U16: return v >= 0 && v <= 65535;
    case QC_I32: return v >= INT32_MIN && v <= INT32_MAX;
    default: return 1;
    }
}

const char *qc_type_name(const qc_type *t, char *buf, int n)
{
    static const char *const names[] = {
        [QC_VOID] = "nothing", [QC_BOOL] = "bool", [QC_I8] = "i8", [QC_U8] = "u8", [QC_I16] = "i16",
        [QC_U16] = "u16", [QC_I32] = "i32", [QC_I64] = "i64", [QC_F32] = "f32", [QC_F64] = "f64",
        [QC_INTLIT] = "integer literal", [QC_FLOATLIT] = "float literal", [QC_QTYPE] = "qtype",
        [QC_QPARAMS] = "qparams", [QC_HIST] = "histogram", [QC_STR] = "string", [QC_STATE] = "calibrator state",
        [QC_VALUE] = "graph value", [QC_ROLE] = "quantization role", [QC_ERROR] = "<error>",
    };
    char inner[64];
    if (t->k == QC_ARRAY) {
        qc_type_name(t->elem, inner, sizeof inner);
        if (t->len >= 0)
            snprintf(buf, (size_t)n, "%s[%lld]", inner, (long long)t->len);
        else
            snprintf(buf, (size_t)n, "%s[]", inner);
    } else if (t->k == QC_TENSOR) {
        snprintf(buf, (size_t)n, "tensor<%s>", qc_type_name(t->elem, inner, sizeof inner));
    } else {
        snprintf(buf, (size_t)n, "%s", names[t->k]);
    }
    return buf;
}
