/* Code generation with libgccjit (see jit.h).
 *
 * Semantics the generated code guarantees (docs/language.md has the user's view):
 *  - integer + - * and unary - wrap (computed in the unsigned type of the same width);
 *  - / and % by zero trap; MIN / -1 wraps; % takes the sign of the dividend;
 *  - shifts by a negative count or by the width or more give 0 (>> of a
 *    negative signed value gives -1);
 *  - float -> integer conversions truncate and saturate, NaN gives 0;
 *  - array and tensor indices are bounds checked, except an index that is
 *    the variable of `for i in 0 .. len(a)` (or a.len, x.numel) into that a;
 *  - `and` / `or` short-circuit; every call's effects happen where it is written.
 * A trap records the error in the qrl_rt and returns from every function.
 *
 * This file holds the context's setup and types, the helpers every part of
 * the lowering uses (constants, casts, blocks, traps, fuel, saturating
 * conversions) and the entry, qc_jit_build; the expressions and statements
 * are in jit_expr.c, the versioned loops in jit_loops.c, the items and the
 * module's registration entry in jit_items.c (their shared context: jit_int.h). */
#include "jit_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* build_types lays out these structs of recipe.h field by field, each an i64, f64 or pointer: the
 * offsets it gives them are recipe.h's (the import table is held to its list there). */
_Static_assert(offsetof(qrl_array, len) == 8 && sizeof(qrl_array) == 16, "qrl_array's layout");
_Static_assert(offsetof(qrl_tview, numel) == 8 && offsetof(qrl_tview, rank) == 16 && offsetof(qrl_tview, dims) == 24 &&
                   offsetof(qrl_tview, first) == 24 + 8 * QR_MAX_DIMS &&
                   offsetof(qrl_tview, samples) == 32 + 8 * QR_MAX_DIMS && sizeof(qrl_tview) == 40 + 8 * QR_MAX_DIMS,
               "qrl_tview's layout");
_Static_assert(offsetof(qrl_qtype, qmin) == 8 && offsetof(qrl_qtype, qmax) == 16 && offsetof(qrl_qtype, axis) == 24 &&
                   offsetof(qrl_qtype, is_signed) == 32 && offsetof(qrl_qtype, narrow) == 40 &&
                   offsetof(qrl_qtype, symmetric) == 48 && sizeof(qrl_qtype) == 56,
               "qrl_qtype's layout");
_Static_assert(offsetof(qrl_qparams, zero) == 8 && sizeof(qrl_qparams) == 16, "qrl_qparams's layout");
_Static_assert(offsetof(qrl_rt, imp) == 0 && offsetof(qrl_rt, failed) == 8 && offsetof(qrl_rt, fuel) == 16,
               "qrl_rt's first fields");

/* The import table's entries' types (by IMP_, jit_int.h), result first, in recipe.h's letters (QRL_ABI_*):
 * v void, d f64, l i64, r qrl_rt*, t qrl_tview*, s const char*, every other pointer void*. */
static const char *const imp_sig[IMP_COUNT] = {
    [IMP_ABI] = NULL,
#define QC_IMP_SIG(id, name, ...) [IMP_##id] = QRL_ABI_SIG(__VA_ARGS__),
    QRL_IMPORTS(QC_IMP_SIG)
#undef QC_IMP_SIG
};

/* ---------------------------------------------------------------- types */

gcc_jit_type *jit_type_of(jit *j, const qc_type *t)
{
    switch (t->k) {
    case QC_BOOL: return j->t_bool;
    case QC_I8: return j->t_i8;
    case QC_U8: return j->t_u8;
    case QC_I16: return j->t_i16;
    case QC_U16: return j->t_u16;
    case QC_I32: return j->t_i32;
    case QC_I64:
    case QC_INTLIT: return j->t_i64;
    case QC_F32: return j->t_f32;
    case QC_F64:
    case QC_FLOATLIT: return j->t_f64;
    case QC_ARRAY: return j->p_array;
    case QC_TENSOR: return j->p_tview;
    case QC_QTYPE: return j->t_qtype;
    case QC_QPARAMS: return j->t_qparams;
    case QC_HIST:
    case QC_GRAM: return j->t_voidp;
    default: return j->t_void;
    }
}

/* The unsigned type of an integer's width: wrap-around arithmetic. */
gcc_jit_type *jit_unsigned_of(jit *j, const qc_type *t)
{
    switch (t->k) {
    case QC_I8:
    case QC_U8: return j->t_u8;
    case QC_I16:
    case QC_U16: return j->t_u16;
    case QC_I32: return j->t_u32;
    default: return j->t_u64;
    }
}

static gcc_jit_field *field(jit *j, gcc_jit_type *t, const char *name)
{
    return gcc_jit_context_new_field(j->c, NULL, t, name);
}

static gcc_jit_type *sig_type(jit *j, char ch)
{
    switch (ch) {
    case 'v': return j->t_void;
    case 'd': return j->t_f64;
    case 'l': return j->t_i64;
    case 'r': return j->p_rt;
    case 't': return j->p_tview;
    case 's': return j->t_str;
    default: return j->t_voidp;
    }
}

static void build_types(jit *j)
{
    gcc_jit_context *c = j->c;
    j->t_void = gcc_jit_context_get_type(c, GCC_JIT_TYPE_VOID);
    j->t_bool = gcc_jit_context_get_type(c, GCC_JIT_TYPE_BOOL);
    j->t_i8 = gcc_jit_context_get_int_type(c, 1, 1);
    j->t_u8 = gcc_jit_context_get_int_type(c, 1, 0);
    j->t_i16 = gcc_jit_context_get_int_type(c, 2, 1);
    j->t_u16 = gcc_jit_context_get_int_type(c, 2, 0);
    j->t_i32 = gcc_jit_context_get_int_type(c, 4, 1);
    j->t_u32 = gcc_jit_context_get_int_type(c, 4, 0);
    j->t_i64 = gcc_jit_context_get_int_type(c, 8, 1);
    j->t_u64 = gcc_jit_context_get_int_type(c, 8, 0);
    j->t_f32 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_FLOAT);
    j->t_f64 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_DOUBLE);
    j->t_voidp = gcc_jit_context_get_type(c, GCC_JIT_TYPE_VOID_PTR);
    j->t_str = gcc_jit_context_get_type(c, GCC_JIT_TYPE_CONST_CHAR_PTR);

    gcc_jit_field *fa[2] = {j->f_arr_data = field(j, j->t_voidp, "data"), j->f_arr_len = field(j, j->t_i64, "len")};
    j->t_array = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_array", 2, fa));
    gcc_jit_field *ft[6] = {j->f_tv_data = field(j, j->t_voidp, "data"), j->f_tv_numel = field(j, j->t_i64, "numel"),
                            j->f_tv_rank = field(j, j->t_i64, "rank"),
                            j->f_tv_dims = field(j, gcc_jit_context_new_array_type(c, NULL, j->t_i64, QR_MAX_DIMS),
                                                 "dims"),
                            j->f_tv_first = field(j, j->t_i64, "first"),
                            j->f_tv_samples = field(j, j->t_i64, "samples")};
    j->t_tview = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_tview", 6, ft));
    _Static_assert(sizeof(qrl_qtype) == QC_QTYPE_NFIELDS * sizeof(int64_t), "qrl_qtype is QRL's qtype fields");
    for (int i = 0; i < QC_QTYPE_NFIELDS; i++)
        j->f_qt[i] = field(j, j->t_i64, qc_qtype_fields[i]);
    j->t_qtype = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_qtype", QC_QTYPE_NFIELDS, j->f_qt));
    gcc_jit_field *fq[2] = {j->f_qp_scale = field(j, j->t_f64, "scale"), j->f_qp_zero = field(j, j->t_i64, "zero")};
    j->t_qparams = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_qparams", 2, fq));
    j->p_array = gcc_jit_type_get_pointer(j->t_array);
    j->p_tview = gcc_jit_type_get_pointer(j->t_tview);
    j->p_qtype = gcc_jit_type_get_pointer(j->t_qtype);
    j->p_qparams = gcc_jit_type_get_pointer(j->t_qparams);

    /* qrl_rt is opaque past its first two fields; the imports refer to it. */
    gcc_jit_struct *rt = gcc_jit_context_new_opaque_struct(c, NULL, "qrl_rt");
    j->t_rt = gcc_jit_struct_as_type(rt);
    j->p_rt = gcc_jit_type_get_pointer(j->t_rt);
    for (int i = 0; i < IMP_COUNT; i++) {
        gcc_jit_type *ft_i = j->t_i64;
        if (imp_sig[i]) {
            const char *s = imp_sig[i];
            int n = (int)strlen(s) - 1;
            gcc_jit_type *args[16];
            for (int a = 0; a < n; a++)
                args[a] = sig_type(j, s[a + 1]);
            ft_i = gcc_jit_context_new_function_ptr_type(c, NULL, sig_type(j, s[0]), n, args, 0);
        }
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        j->f_imp[i] = field(j, ft_i, name);
    }
    j->t_imports = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_imports", IMP_COUNT, j->f_imp));
    j->p_imports = gcc_jit_type_get_pointer(gcc_jit_type_get_const(j->t_imports));
    gcc_jit_field *fr[3] = {j->f_rt_imp = field(j, j->p_imports, "imp"), j->f_rt_failed = field(j, j->t_i64, "failed"),
                            j->f_rt_fuel = field(j, j->t_i64, "fuel")};
    gcc_jit_struct_set_fields(rt, NULL, 3, fr);
}

/* ------------------------------------------------------------- helpers */

gcc_jit_rvalue *jit_lng(jit *j, gcc_jit_type *t, long v)
{
    return gcc_jit_context_new_rvalue_from_long(j->c, t, v);
}

gcc_jit_rvalue *jit_dbl(jit *j, gcc_jit_type *t, double v)
{
    return gcc_jit_context_new_rvalue_from_double(j->c, t, v);
}

/* libgccjit refuses a cast to the same type (structs included): skip those. */
gcc_jit_rvalue *jit_cast(jit *j, gcc_jit_rvalue *v, gcc_jit_type *t)
{
    if (gcc_jit_rvalue_get_type(v) == t)
        return v;
    return gcc_jit_context_new_cast(j->c, NULL, v, t);
}

/* Any scalar as f64 (libgccjit casts bool only to integers). */
gcc_jit_rvalue *jit_to_f64(jit *j, gcc_jit_rvalue *v)
{
    if (gcc_jit_rvalue_get_type(v) == j->t_bool)
        v = jit_cast(j, v, j->t_i64);
    return jit_cast(j, v, j->t_f64);
}

gcc_jit_rvalue *jit_cmp(jit *j, enum gcc_jit_comparison op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_comparison(j->c, NULL, op, a, b);
}

gcc_jit_rvalue *jit_bin(jit *j, enum gcc_jit_binary_op op, gcc_jit_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_binary_op(j->c, NULL, op, t, a, b);
}

gcc_jit_block *jit_new_block(fgen *f)
{
    return gcc_jit_function_new_block(f->fn, NULL);
}

/* The current block, or a fresh unreachable one after a terminator. */
gcc_jit_block *jit_cur(fgen *f)
{
    if (!f->b)
        f->b = jit_new_block(f);
    return f->b;
}

gcc_jit_lvalue *jit_temp(fgen *f, gcc_jit_type *t)
{
    char name[24];
    snprintf(name, sizeof name, "t%d", f->counter++);
    return gcc_jit_function_new_local(f->fn, NULL, t, name);
}

/* Evaluates v now (a call, a load that must not move) into a temporary. */
gcc_jit_rvalue *jit_now(fgen *f, gcc_jit_rvalue *v)
{
    gcc_jit_lvalue *t = jit_temp(f, gcc_jit_rvalue_get_type(v));
    gcc_jit_block_add_assignment(jit_cur(f), NULL, t, v);
    return gcc_jit_lvalue_as_rvalue(t);
}

static gcc_jit_rvalue *imp_fn(fgen *f, int i)
{
    gcc_jit_lvalue *imp = gcc_jit_rvalue_dereference_field(f->rt, NULL, f->j->f_rt_imp);
    return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(gcc_jit_lvalue_as_rvalue(imp), NULL, f->j->f_imp[i]));
}

gcc_jit_rvalue *jit_call_imp(fgen *f, int i, int n, gcc_jit_rvalue **args)
{
    return gcc_jit_context_new_call_through_ptr(f->j->c, NULL, imp_fn(f, i), n, args);
}

void jit_return_default(fgen *f, gcc_jit_block *b)
{
    if (f->ret == f->j->t_void || f->ret_qparams_out) {
        gcc_jit_block_end_with_void_return(b, NULL);
        return;
    }
    if (f->ret == f->j->t_qparams) {
        gcc_jit_lvalue *t = jit_temp(f, f->ret);
        gcc_jit_block_add_assignment(b, NULL, gcc_jit_lvalue_access_field(t, NULL, f->j->f_qp_scale),
                                     jit_dbl(f->j, f->j->t_f64, 0));
        gcc_jit_block_add_assignment(b, NULL, gcc_jit_lvalue_access_field(t, NULL, f->j->f_qp_zero),
                                     jit_lng(f->j, f->j->t_i64, 0));
        gcc_jit_block_end_with_return(b, NULL, gcc_jit_lvalue_as_rvalue(t));
        return;
    }
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_zero(f->j->c, f->ret));
}

static void loc_of(const ql_node *n, int64_t *line, int64_t *col)
{
    int l = 0, c = 0;
    if (n && n->span.src)
        ql_source_linecol(n->span.src, n->span.start, &l, &c);
    *line = l;
    *col = c;
}

/* if (fail) { trap(code, where, a, b); return; } */
void jit_check(fgen *f, gcc_jit_rvalue *fail, int code, const ql_node *at, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    jit *j = f->j;
    gcc_jit_block *bad = jit_new_block(f), *ok = jit_new_block(f);
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL, fail, bad, ok);
    int64_t line, col;
    loc_of(at, &line, &col);
    gcc_jit_rvalue *args[7] = {f->rt, jit_lng(j, j->t_i64, code), gcc_jit_context_new_string_literal(j->c, f->file),
                               jit_lng(j, j->t_i64, (long)line), jit_lng(j, j->t_i64, (long)col),
                               a ? jit_cast(j, a, j->t_i64) : jit_lng(j, j->t_i64, 0),
                               b ? jit_cast(j, b, j->t_i64) : jit_lng(j, j->t_i64, 0)};
    gcc_jit_block_add_eval(bad, NULL, jit_call_imp(f, IMP_TRAP, 7, args));
    jit_return_default(f, bad);
    f->b = ok;
}


/* Each loop iteration burns fuel; when it runs out, the runtime looks at the clock (refuel) and
 * traps past the recipe time limit, at the loop's location. */
void jit_burn_fuel(fgen *f, const ql_node *at, gcc_jit_rvalue *amount)
{
    jit *j = f->j;
    gcc_jit_lvalue *fuel = gcc_jit_rvalue_dereference_field(f->rt, NULL, j->f_rt_fuel);
    gcc_jit_block_add_assignment_op(jit_cur(f), NULL, fuel, GCC_JIT_BINARY_OP_MINUS, amount);
    gcc_jit_block *empty = jit_new_block(f), *ok = jit_new_block(f);
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL,
                                       jit_cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(fuel), jit_lng(j, j->t_i64, 0)),
                                       empty, ok);
    int64_t line, col;
    loc_of(at, &line, &col);
    gcc_jit_rvalue *args[4] = {f->rt, gcc_jit_context_new_string_literal(j->c, f->file), jit_lng(j, j->t_i64, (long)line),
                               jit_lng(j, j->t_i64, (long)col)};
    f->b = empty;
    gcc_jit_block_add_eval(empty, NULL, jit_call_imp(f, IMP_REFUEL, 4, args));
    jit_check_failed(f);
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, ok);
    f->b = ok;
}

/* After a call that may trap: leave at once when it did. */
void jit_check_failed(fgen *f)
{
    gcc_jit_block *bad = jit_new_block(f), *ok = jit_new_block(f);
    gcc_jit_rvalue *failed = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(f->rt, NULL, f->j->f_rt_failed));
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL, jit_cmp(f->j, GCC_JIT_COMPARISON_NE, failed, jit_lng(f->j, f->j->t_i64, 0)),
                                       bad, ok);
    jit_return_default(f, bad);
    f->b = ok;
}

/* t = cond ? a : b, both already evaluated. */
gcc_jit_rvalue *jit_select_rv(fgen *f, gcc_jit_rvalue *c, gcc_jit_rvalue *a, gcc_jit_rvalue *b, gcc_jit_type *t)
{
    gcc_jit_lvalue *r = jit_temp(f, t);
    gcc_jit_block_add_assignment(jit_cur(f), NULL, r, b);
    gcc_jit_block *yes = jit_new_block(f), *join = jit_new_block(f);
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL, c, yes, join);
    gcc_jit_block_add_assignment(yes, NULL, r, a);
    gcc_jit_block_end_with_jump(yes, NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

gcc_jit_rvalue *jit_builtin1(jit *j, const char *name, gcc_jit_rvalue *x)
{
    gcc_jit_function *fn = gcc_jit_context_get_builtin_function(j->c, name);
    return gcc_jit_context_new_call(j->c, NULL, fn, 1, &x);
}

static int is_f32(jit *j, gcc_jit_rvalue *v)
{
    return gcc_jit_rvalue_get_type(v) == j->t_f32;
}

gcc_jit_rvalue *jit_floor_rv(jit *j, gcc_jit_rvalue *x)
{
    return jit_builtin1(j, is_f32(j, x) ? "__builtin_floorf" : "__builtin_floor", x);
}

/* Integer limits of a QRL integer type, as int64. */
static void int_range(const qc_type *t, int64_t *lo, int64_t *hi)
{
    switch (t->k) {
    case QC_I8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case QC_U8: *lo = 0, *hi = UINT8_MAX; break;
    case QC_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case QC_U16: *lo = 0, *hi = UINT16_MAX; break;
    case QC_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/* Float to integer: truncate, saturate, NaN -> 0. */
gcc_jit_rvalue *jit_float_to_int(fgen *f, gcc_jit_rvalue *x, const qc_type *to)
{
    jit *j = f->j;
    int64_t lo, hi;
    int_range(to, &lo, &hi);
    gcc_jit_type *ft = gcc_jit_rvalue_get_type(x), *it = jit_type_of(j, to);
    if (hi <= (1 << 24) && lo >= -(1 << 24)) {
        /* A narrow type: its bounds are exact in f32 and f64, so clamp in x's own type with
         * selects and truncate; no branches, no f64: GCC vectorizes it. Each select is written
         * in the operand order of the SSE/AVX min and max (a NaN operand gives the second),
         * so each is one instruction: with lo = 0 `lo < x ? x : lo` also sends NaN to 0;
         * otherwise NaN passes both clamps and one test sends it to 0. */
        x = jit_now(f, x);
        gcc_jit_rvalue *flo = jit_dbl(j, ft, (double)lo), *fhi = jit_dbl(j, ft, (double)hi), *v;
        if (lo == 0) {
            v = jit_now(f, jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, flo, x), x, flo, ft));
            v = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, v, fhi), v, fhi, ft);
        } else {
            v = jit_now(f, jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, fhi, x), fhi, x, ft));
            v = jit_now(f, jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_GT, flo, v), flo, v, ft));
            v = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_EQ, v, v), v, jit_dbl(j, ft, 0), ft);
        }
        return jit_now(f, jit_cast(j, v, it));
    }
    x = jit_now(f, jit_cast(j, x, j->t_f64));
    gcc_jit_lvalue *r = jit_temp(f, it);
    gcc_jit_block *b_nan = jit_new_block(f), *b_notnan = jit_new_block(f), *b_hi = jit_new_block(f), *b_nothi = jit_new_block(f),
                  *b_lo = jit_new_block(f), *b_mid = jit_new_block(f), *join = jit_new_block(f);
    gcc_jit_block_end_with_conditional(jit_cur(f), NULL, jit_cmp(j, GCC_JIT_COMPARISON_NE, x, x), b_nan, b_notnan);
    gcc_jit_block_add_assignment(b_nan, NULL, r, gcc_jit_context_zero(j->c, it));
    gcc_jit_block_end_with_jump(b_nan, NULL, join);
    /* 2^63 is the first double above INT64_MAX. */
    double dhi = hi == INT64_MAX ? 9223372036854775808.0 : (double)hi + 1.0;
    gcc_jit_block_end_with_conditional(b_notnan, NULL, jit_cmp(j, GCC_JIT_COMPARISON_GE, x, jit_dbl(j, j->t_f64, dhi)), b_hi,
                                       b_nothi);
    gcc_jit_block_add_assignment(b_hi, NULL, r, jit_lng(j, it, (long)hi));
    gcc_jit_block_end_with_jump(b_hi, NULL, join);
    gcc_jit_block_end_with_conditional(b_nothi, NULL, jit_cmp(j, GCC_JIT_COMPARISON_LE, x, jit_dbl(j, j->t_f64, (double)lo - 1.0)),
                                       b_lo, b_mid);
    gcc_jit_block_add_assignment(b_lo, NULL, r, jit_lng(j, it, (long)lo));
    gcc_jit_block_end_with_jump(b_lo, NULL, join);
    gcc_jit_block_add_assignment(b_mid, NULL, r, jit_cast(j, x, it));
    gcc_jit_block_end_with_jump(b_mid, NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

/* Integer to a narrower or differently signed integer, clamped to its range. */
gcc_jit_rvalue *jit_sat_int(fgen *f, gcc_jit_rvalue *x, const qc_type *from, const qc_type *to)
{
    jit *j = f->j;
    int64_t lo, hi, flo, fhi;
    int_range(to, &lo, &hi);
    int_range(from, &flo, &fhi);
    gcc_jit_rvalue *v = jit_now(f, jit_cast(j, x, j->t_i64));
    if (flo < lo)
        v = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, v, jit_lng(j, j->t_i64, (long)lo)), jit_lng(j, j->t_i64, (long)lo), v,
                      j->t_i64);
    if (fhi > hi)
        v = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_GT, v, jit_lng(j, j->t_i64, (long)hi)), jit_lng(j, j->t_i64, (long)hi), v,
                      j->t_i64);
    return jit_cast(j, v, jit_type_of(j, to));
}

gcc_jit_context *qc_jit_build(qc_unit *u, const qc_jit_opts *o)
{
    jit j = {.u = u, .d = &u->diags, .want = o ? o->items : NULL, .fns_private = o && o->fns_private};
    j.c = gcc_jit_context_acquire();
    if (!j.c) {
        ql_error_file(&u->diags, NULL, "cannot start libgccjit");
        return NULL;
    }
    int has_kernels = 0;
    for (int i = 0; i < u->nitems; i++)
        has_kernels |= u->items[i]->kind == QC_SYM_KERNEL && (!j.want || j.want[i]);
    int level = o && o->opt_level ? o->opt_level : 2;
    gcc_jit_context_set_int_option(j.c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL, has_kernels && level < 3 ? 3 : level);
    gcc_jit_context_set_bool_allow_unreachable_blocks(j.c, 1);
    gcc_jit_context_set_bool_print_errors_to_stderr(j.c, 0); /* reported as a diagnostic instead */
    /* The CPU's -march and feature flags: libgccjit does not honor -march=native. */
    const char *march = o && o->march ? o->march : qc_cpu_flags();
    char flags[512];
    snprintf(flags, sizeof flags, "%s", march);
    for (char *save = NULL, *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save))
        gcc_jit_context_add_command_line_option(j.c, w);
    gcc_jit_context_add_command_line_option(j.c, "-fno-math-errno");
    build_types(&j);
    j.fns = calloc((size_t)u->nitems + 1, sizeof *j.fns);
    j.traps = calloc((size_t)u->nitems + 1, sizeof *j.traps);
    cal_fns *cals = calloc((size_t)u->nitems + 1, sizeof *cals);
    item_fns *items = calloc((size_t)u->nitems + 1, sizeof *items);
    if (!j.fns || !j.traps || !cals || !items) {
        free(j.fns);
        free(j.traps);
        free(cals);
        free(items);
        gcc_jit_context_release(j.c);
        ql_error_file(&u->diags, NULL, "out of memory");
        return NULL;
    }
    for (int i = 0; i < u->nitems; i++)
        if ((u->items[i]->kind == QC_SYM_FN || u->items[i]->kind == QC_SYM_KERNEL) && (!j.want || j.want[i]))
            jit_declare_fn(&j, i);
    for (int i = 0; i < u->nitems; i++) {
        qc_sym *s = u->items[i];
        if (j.want && !j.want[i])
            continue;
        if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL)
            jit_define_fn(&j, i);
        else if (s->kind == QC_SYM_CALIBRATOR)
            jit_calibrator(&j, s, &cals[i]);
        else if (s->kind == QC_SYM_PATTERN)
            jit_pattern_fns(&j, s, &items[i]);
        else if (s->kind == QC_SYM_AFFINE)
            jit_affine_fns(&j, s, &items[i]);
        else if (s->kind == QC_SYM_RECIPE)
            jit_recipe_fns(&j, s, &items[i]);
        else if (s->kind == QC_SYM_TRANSFORM)
            jit_transform_fns(&j, s, &items[i]);
    }
    jit_entry(&j, cals, items);
    free(j.fns);
    free(j.traps);
    free(cals);
    int oom = 0;
    for (int i = 0; i < u->nitems; i++) {
        oom |= items[i].nargs < 0; /* a recipe's argument functions could not be kept: its calls would
                                    * run with their defaults */
        free(items[i].args);
    }
    free(items);
    if (oom) {
        gcc_jit_context_release(j.c);
        return NULL;
    }
    return j.c;
}
