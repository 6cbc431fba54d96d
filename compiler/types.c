#include "types.h"

#include <stdio.h>
#include <string.h>

const qc_type qc_void = {.k = QC_VOID}, qc_bool = {.k = QC_BOOL}, qc_i4 = {.k = QC_I4}, qc_u4 = {.k = QC_U4},
              qc_i8 = {.k = QC_I8},
              qc_u8 = {.k = QC_U8}, qc_i16 = {.k = QC_I16}, qc_u16 = {.k = QC_U16},
              qc_i32 = {.k = QC_I32}, qc_i64 = {.k = QC_I64}, qc_f32 = {.k = QC_F32},
              qc_f64 = {.k = QC_F64}, qc_intlit = {.k = QC_INTLIT}, qc_floatlit = {.k = QC_FLOATLIT},
              qc_qtype = {.k = QC_QTYPE}, qc_qparams = {.k = QC_QPARAMS}, qc_hist = {.k = QC_HIST}, qc_gram = {.k = QC_GRAM},
              qc_str = {.k = QC_STR}, qc_value = {.k = QC_VALUE}, qc_role = {.k = QC_ROLE},
              qc_error = {.k = QC_ERROR};

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

/* A member predicate over a type variable: every member has it. */
#define FOR_ALL_MEMBERS(t, pred)                                                                                      \
    do {                                                                                                              \
        if ((t)->k == QC_TVAR) {                                                                                      \
            for (int i_ = 0; i_ < (t)->nmembers; i_++)                                                                \
                if (!pred((t)->members[i_]))                                                                          \
                    return 0;                                                                                         \
            return (t)->nmembers > 0;                                                                                 \
        }                                                                                                             \
    } while (0)

int qc_is_int(const qc_type *t)
{
    FOR_ALL_MEMBERS(t, qc_is_int);
    return (t->k >= QC_I8 && t->k <= QC_I64) || t->k == QC_INTLIT;
}

int qc_is_float(const qc_type *t)
{
    FOR_ALL_MEMBERS(t, qc_is_float);
    return t->k == QC_F32 || t->k == QC_F64 || t->k == QC_FLOATLIT;
}

int qc_is_numeric(const qc_type *t)
{
    FOR_ALL_MEMBERS(t, qc_is_numeric);
    return qc_is_int(t) || qc_is_float(t) || t->k == QC_ERROR;
}

int qc_is_scalar(const qc_type *t)
{
    FOR_ALL_MEMBERS(t, qc_is_scalar);
    return qc_is_numeric(t) || t->k == QC_BOOL;
}

int qc_is_signed(const qc_type *t)
{
    FOR_ALL_MEMBERS(t, qc_is_signed);
    return t->k == QC_I8 || t->k == QC_I16 || t->k == QC_I32 || t->k == QC_I64 || t->k == QC_INTLIT;
}

int qc_type_bits(const qc_type *t)
{
    switch (t->k) {
    case QC_I4: case QC_U4: return 4;
    case QC_BOOL: case QC_I8: case QC_U8: return 8;
    case QC_I16: case QC_U16: return 16;
    case QC_I32: case QC_F32: return 32;
    default: return 64;
    }
}

/* ------------------------------------------------------ type variables */

const qc_type *qc_tvar_new(ql_arena *a, const char *name, const qc_type *const *members, int n)
{
    qc_type *t = ql_alloc(a, sizeof *t);
    const qc_type **m = ql_alloc(a, sizeof *m * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        m[i] = members[i];
    t->k = QC_TVAR;
    t->name = name;
    t->members = m;
    t->nmembers = n;
    return t;
}

int qc_has_tvar(const qc_type *t)
{
    while (t && (t->k == QC_ARRAY || t->k == QC_TENSOR))
        t = t->elem;
    return t && t->k == QC_TVAR;
}

int qc_any_member(const qc_type *t, int (*pred)(const qc_type *))
{
    if (t->k != QC_TVAR)
        return pred(t);
    for (int i = 0; i < t->nmembers; i++)
        if (pred(t->members[i]))
            return 1;
    return 0;
}

static void add_vars(qc_tbind *b, const qc_type *t)
{
    while (t && (t->k == QC_ARRAY || t->k == QC_TENSOR))
        t = t->elem;
    if (!t || t->k != QC_TVAR)
        return;
    for (int i = 0; i < b->n; i++)
        if (b->var[i] == t)
            return;
    if (b->n < QC_TBIND_MAX) {
        b->var[b->n] = t;
        b->to[b->n++] = t;
    }
}

int qc_tbind_vars(qc_tbind *b, const qc_type *a, const qc_type *c)
{
    b->n = 0;
    add_vars(b, a);
    add_vars(b, c);
    int n = 1;
    for (int i = 0; i < b->n; i++)
        n *= b->var[i]->nmembers;
    return n;
}

void qc_tbind_pick(qc_tbind *b, int k)
{
    for (int i = b->n - 1; i >= 0; i--) {
        int m = b->var[i]->nmembers;
        b->to[i] = b->var[i]->members[k % m];
        k /= m;
    }
}

/* t's variable replaced by what b binds it to (t when unbound). */
static const qc_type *leaf(const qc_type *t, const qc_tbind *b)
{
    for (int i = 0; b && t->k == QC_TVAR && i < b->n; i++)
        if (b->var[i] == t)
            return b->to[i];
    return t;
}

const qc_type *qc_subst(ql_arena *a, const qc_type *t, const qc_tbind *b)
{
    if (!t || !qc_has_tvar(t))
        return t;
    if (t->k == QC_ARRAY)
        return qc_array_of(a, qc_subst(a, t->elem, b), t->len);
    if (t->k == QC_TENSOR)
        return qc_tensor_of(a, qc_subst(a, t->elem, b));
    return leaf(t, b);
}

const char *qc_tbind_name(const qc_tbind *b, char *buf, int n)
{
    char tb[64];
    int len = 0;
    buf[0] = 0;
    for (int i = 0; i < b->n && len < n; i++)
        len += snprintf(buf + len, (size_t)(n - len), "%s%s = %s", i ? ", " : "", b->var[i]->name,
                        qc_type_name(b->to[i], tb, sizeof tb));
    return buf;
}

/* ----------------------------------------- relations, under a binding */

static int eq_b(const qc_type *a, const qc_type *b, const qc_tbind *tb)
{
    a = leaf(a, tb);
    b = leaf(b, tb);
    if (a == b)
        return 1;
    if (a->k != b->k || a->k == QC_TVAR) /* two variables are two types */
        return 0;
    if (a->k == QC_ARRAY || a->k == QC_TENSOR)
        return eq_b(a->elem, b->elem, tb);
    if (a->k == QC_STATE)
        return a->decl == b->decl;
    return 1;
}

static int widens_b(const qc_type *from, const qc_type *to, const qc_tbind *tb)
{
    from = leaf(from, tb);
    to = leaf(to, tb);
    if (from->k == QC_ERROR || to->k == QC_ERROR || eq_b(from, to, tb))
        return 1;
    if (to->k == QC_ARRAY && from->k == QC_ARRAY) /* a sized state array is also a view */
        return eq_b(from->elem, to->elem, tb) && to->len < 0;
    if (from->k == QC_TVAR || to->k == QC_TVAR) /* unbound: only itself */
        return 0;
    if (from->k == QC_INTLIT)
        return qc_is_int(to) || qc_is_float(to); /* the value is checked where it is known */
    if (from->k == QC_FLOATLIT)
        return qc_is_float(to);
    if (qc_is_float(from))
        return from->k == QC_F32 && to->k == QC_F64;
    if (!qc_is_int(from) || !qc_is_int(to) || to->k == QC_INTLIT)
        return 0;
    int fb = qc_type_bits(from), tbits = qc_type_bits(to);
    if (qc_is_signed(from) == qc_is_signed(to))
        return tbits >= fb;
    return !qc_is_signed(from) && tbits > fb; /* unsigned into a wider signed type */
}

static const qc_type *common_b(const qc_type *a, const qc_type *b, const qc_tbind *tb)
{
    a = leaf(a, tb);
    b = leaf(b, tb);
    if (a->k == QC_ERROR)
        return b;
    if (b->k == QC_ERROR)
        return a;
    int la = a->k == QC_INTLIT || a->k == QC_FLOATLIT, lb = b->k == QC_INTLIT || b->k == QC_FLOATLIT;
    if (la && lb)
        return a->k == QC_FLOATLIT || b->k == QC_FLOATLIT ? &qc_floatlit : &qc_intlit;
    if (la)
        return widens_b(a, b, tb) ? b : NULL; /* a literal takes the other side's type */
    if (lb)
        return widens_b(b, a, tb) ? a : NULL;
    if (widens_b(a, b, tb))
        return b;
    if (widens_b(b, a, tb))
        return a;
    static const qc_type *const ladder[] = {&qc_i16, &qc_i32, &qc_i64};
    for (int i = 0; i < 3; i++)
        if (widens_b(a, ladder[i], tb) && widens_b(b, ladder[i], tb))
            return ladder[i];
    return NULL;
}

int qc_type_eq(const qc_type *a, const qc_type *b)
{
    return eq_b(a, b, NULL);
}

int qc_widens(const qc_type *from, const qc_type *to)
{
    qc_tbind tb;
    int n = qc_tbind_vars(&tb, from, to);
    for (int k = 0; k < n; k++) {
        qc_tbind_pick(&tb, k);
        if (!widens_b(from, to, &tb))
            return 0;
    }
    return 1;
}

int qc_common_why(const qc_type *a, const qc_type *b, qc_tbind *b1, qc_tbind *b2, const qc_type **r1,
                  const qc_type **r2)
{
    qc_tbind tb;
    int n = qc_tbind_vars(&tb, a, b), is_a = 1, is_b = 1, same = 1, first = -1;
    const qc_type *r0 = NULL;
    for (int k = 0; k < n; k++) {
        qc_tbind_pick(&tb, k);
        const qc_type *r = common_b(a, b, &tb);
        if (!r) {
            *b1 = tb;
            return 1;
        }
        is_a &= eq_b(r, a, &tb);
        is_b &= eq_b(r, b, &tb);
        if (first < 0) {
            first = k;
            r0 = r;
        } else if (same && (qc_has_tvar(r) || !eq_b(r, r0, NULL))) {
            same = 0;
            *b1 = tb;
            qc_tbind_pick(b1, first);
            *b2 = tb;
            *r1 = r0;
            *r2 = r;
        }
    }
    if (is_a || is_b || (same && r0 && !qc_has_tvar(r0)))
        return 0;
    return 2;
}

const qc_type *qc_common(const qc_type *a, const qc_type *b)
{
    if (!qc_has_tvar(a) && !qc_has_tvar(b))
        return common_b(a, b, NULL);
    qc_tbind b1, b2;
    const qc_type *r1 = NULL, *r2 = NULL;
    if (qc_common_why(a, b, &b1, &b2, &r1, &r2))
        return NULL;
    /* every combination's common type: a itself, b itself, or one fixed type */
    qc_tbind tb;
    int n = qc_tbind_vars(&tb, a, b), is_a = 1;
    const qc_type *r = NULL;
    for (int k = 0; k < n; k++) {
        qc_tbind_pick(&tb, k);
        r = common_b(a, b, &tb);
        is_a &= eq_b(r, a, &tb);
    }
    if (is_a)
        return a;
    int is_b = 1;
    for (int k = 0; k < n; k++) {
        qc_tbind_pick(&tb, k);
        is_b &= eq_b(common_b(a, b, &tb), b, &tb);
    }
    return is_b ? b : r;
}

const qc_type *qc_default(const qc_type *t)
{
    return t->k == QC_INTLIT ? &qc_i64 : t->k == QC_FLOATLIT ? &qc_f64 : t;
}

int qc_int_fits(int64_t v, const qc_type *t)
{
    if (t->k == QC_TVAR) {
        for (int i = 0; i < t->nmembers; i++)
            if (!qc_int_fits(v, t->members[i]))
                return 0;
        return 1;
    }
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
        [QC_I4] = "i4", [QC_U4] = "u4",
        [QC_INTLIT] = "integer literal", [QC_FLOATLIT] = "float literal", [QC_QTYPE] = "qtype",
        [QC_QPARAMS] = "qparams", [QC_HIST] = "histogram", [QC_GRAM] = "gram", [QC_STR] = "string", [QC_STATE] = "calibrator state",
        [QC_VALUE] = "graph value", [QC_ROLE] = "quantization role", [QC_ERROR] = "<error>",
    };
    char inner[64];
    if (t->k == QC_ARRAY) {
        qc_type_name(t->elem, inner, sizeof inner);
        if (t->len >= 0)
            snprintf(buf, (size_t)n, "%s[%lld]", inner, (long long)t->len);
        else
            snprintf(buf, (size_t)n, "%s[]", inner);
    } else if (t->k == QC_TVAR) {
        snprintf(buf, (size_t)n, "%s", t->name);
    } else if (t->k == QC_TENSOR) {
        snprintf(buf, (size_t)n, "tensor<%s>", qc_type_name(t->elem, inner, sizeof inner));
    } else {
        snprintf(buf, (size_t)n, "%s", names[t->k]);
    }
    return buf;
}

const char *const qc_qtype_fields[QC_QTYPE_NFIELDS] = {"bits", "qmin", "qmax", "axis", "signed", "narrow", "symmetric"};

int qc_qtype_field(const char *name)
{
    for (int i = 0; i < QC_QTYPE_NFIELDS; i++)
        if (!strcmp(name, qc_qtype_fields[i]))
            return i;
    return -1;
}
