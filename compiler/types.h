/* Types of the QRL language, as the checker assigns them to AST nodes.
 * Scalars and the built-in record types are singletons; arrays and tensors
 * are made on demand in the unit's arena and compared structurally. */
#ifndef QC_TYPES_H
#define QC_TYPES_H

#include <stdint.h>

#include "../lang/arena.h"

typedef enum qc_tkind {
    QC_VOID,
    QC_BOOL,
    QC_I8, QC_U8, QC_I16, QC_U16, QC_I32, QC_I64, /* integer types, narrowest first */
    QC_F32, QC_F64,
    QC_I4, QC_U4, /* 4-bit storage types: only a recipe setting names them (weight = i4 ...); no value has one */
    QC_INTLIT,   /* an integer literal not yet given a type by its context */
    QC_FLOATLIT, /* likewise a float literal */
    QC_ARRAY,    /* elem[]: a view (pointer and length); len >= 0 for sized state arrays */
    QC_TENSOR,   /* tensor<elem> */
    QC_QTYPE,    /* target of quantization: bits, signed, narrow, qmin, qmax, axis */
    QC_QPARAMS,  /* scale and zero point */
    QC_HIST,     /* histogram (calibrator state) */
    QC_GRAM,     /* gram: X^T X of a layer's input rows (a layer calibrator's state) */
    QC_STR,      /* string literals: attribute names, op names */
    QC_STATE,    /* a calibrator's state, as merge's other operand */
    QC_VALUE,    /* a graph value bound by a pattern */
    QC_ROLE,     /* what a pattern tensor becomes (activation, weight, bias, ...) */
    QC_TVAR,     /* a generic's type parameter while its body is checked: one of its members */
    QC_ERROR     /* after an error: accepted everywhere so one mistake gives one message */
} qc_tkind;

typedef struct qc_type {
    qc_tkind k;
    const struct qc_type *elem; /* ARRAY, TENSOR */
    int64_t len;                /* ARRAY: -1 for a view */
    const void *decl;           /* STATE: the calibrator's AST node */
    const char *name;           /* TVAR: the parameter's name */
    const struct qc_type *const *members; /* TVAR: the scalar types it ranges over */
    int nmembers;
} qc_type;

extern const qc_type qc_void, qc_bool, qc_i4, qc_u4, qc_i8, qc_u8, qc_i16, qc_u16, qc_i32, qc_i64, qc_f32, qc_f64, qc_intlit,
    qc_floatlit, qc_qtype, qc_qparams, qc_hist, qc_gram, qc_str, qc_value, qc_role, qc_error;

const qc_type *qc_array_of(ql_arena *a, const qc_type *elem, int64_t len);
const qc_type *qc_tensor_of(ql_arena *a, const qc_type *elem);

int qc_is_int(const qc_type *t);   /* integer types and integer literals */
int qc_is_float(const qc_type *t); /* float types and float literals */
int qc_is_numeric(const qc_type *t);
int qc_is_scalar(const qc_type *t); /* bool or numeric, literals included */
int qc_is_signed(const qc_type *t);
int qc_type_bits(const qc_type *t);
int qc_type_eq(const qc_type *a, const qc_type *b);
/* Whether a value of type `from` converts implicitly (without loss) to `to`. */
int qc_widens(const qc_type *from, const qc_type *to);
/* The narrowest type both convert to implicitly; NULL when there is none. */
const qc_type *qc_common(const qc_type *a, const qc_type *b);
/* A literal's type where its context gives none: i64 (ints) and f64 (floats). */
const qc_type *qc_default(const qc_type *t);
/* Whether integer value v fits in integer type t. */
int qc_int_fits(int64_t v, const qc_type *t);

/* Type variables. A generic's body is checked once with each type parameter
 * a TVAR; the predicates and relations above hold for a type holding
 * variables when they hold for every member (every combination of members,
 * with several variables): qc_is_int(T) when every member is an integer,
 * qc_widens(T, i32) when every member widens to i32. qc_common(a, b) is a
 * type that is the common type for every combination: a fixed type, or a
 * or b itself (T + T is T, T + i32 is i32), else NULL (T + i8 with T: u8 |
 * i8 meets at i16 or at i8). A qc_tbind binds variables to types, for one
 * combination of members (messages name it) or for a call of one generic
 * from another (its parameters' types in the caller's variables). */
#define QC_TBIND_MAX 8
typedef struct qc_tbind {
    int n;
    const qc_type *var[QC_TBIND_MAX], *to[QC_TBIND_MAX];
} qc_tbind;

const qc_type *qc_tvar_new(ql_arena *a, const char *name, const qc_type *const *members, int n);
int qc_has_tvar(const qc_type *t);
/* Whether some member of t's variable (t itself when it is none) has pred. */
int qc_any_member(const qc_type *t, int (*pred)(const qc_type *));
/* The variables of a and b (either may be NULL) into b->var; returns the
 * number of combinations of their members (1 without variables). */
int qc_tbind_vars(qc_tbind *b, const qc_type *a, const qc_type *c);
/* Binds b's variables to combination k of their members (the last varies fastest). */
void qc_tbind_pick(qc_tbind *b, int k);
/* t with b's variables replaced. */
const qc_type *qc_subst(ql_arena *a, const qc_type *t, const qc_tbind *b);
/* "T = u8, U = i32" */
const char *qc_tbind_name(const qc_tbind *b, char *buf, int n);
/* Why qc_common(a, b) is NULL with variables in a or b: 1 when there is no
 * common type for combination *b1; 2 when combinations *b1 and *b2 have
 * different ones (*r1, *r2); 0 when there is a common type. */
int qc_common_why(const qc_type *a, const qc_type *b, qc_tbind *b1, qc_tbind *b2, const qc_type **r1,
                  const qc_type **r2);

/* A qtype's fields as QRL names them, in the order of runtime/recipe.h's qrl_qtype (every one an
 * int64_t there): the first QC_QTYPE_INTS are i64 in QRL, the others bool. */
#define QC_QTYPE_NFIELDS 7
#define QC_QTYPE_INTS 4
extern const char *const qc_qtype_fields[QC_QTYPE_NFIELDS];
/* The index of qtype field name, or -1. */
int qc_qtype_field(const char *name);

/* "i32", "f32[]", "tensor<u8>", "qparams", "T", ... */
const char *qc_type_name(const qc_type *t, char *buf, int n);

#endif
