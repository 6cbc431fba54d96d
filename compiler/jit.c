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
 * A trap records the error in the qrl_rt and returns from every function. */
#include "jit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu.h"
#include "recipe.h"

/* The import table's entries, in qrl_imports order, with their C types:
 * v void, d f64, l i64, p void*, r qrl_rt*, t qrl_tview*, s const char*. */
enum {
    IMP_ABI, IMP_TRAP, IMP_REFUEL, IMP_EXP, IMP_LOG, IMP_LOG2, IMP_TANH, IMP_ERF, IMP_POW, IMP_TMIN, IMP_TMAX, IMP_TABSMAX,
    IMP_TSUM, IMP_TBCAST, IMP_STATE_ALLOC, IMP_HIST_NEW, IMP_HIST_ADD, IMP_HIST_MERGE, IMP_HIST_QUANTILE, IMP_HIST_BIN,
    IMP_HIST_EDGE, IMP_HIST_COUNT, IMP_HIST_LO, IMP_HIST_HI, IMP_HIST_WIDTH, IMP_HIST_BINS, IMP_HIST_MIN, IMP_HIST_MAX, IMP_ADD_FN,
    IMP_ADD_CAL, IMP_ADD_PARAM, IMP_VALUE_RANK, IMP_VALUE_DIM, IMP_VALUE_CONST, IMP_VALUE_PRESENT, IMP_VALUE_SCALAR, IMP_VALUE_OP_IS,
    IMP_ATTR_INT, IMP_ATTR_FLOAT, IMP_ATTR_STR_IS, IMP_ATTR_INTS, IMP_ADD_PATTERN, IMP_ADD_PATTERN_VALUE, IMP_ADD_PATTERN_NODE, IMP_ADD_PATTERN_LOWER,
    IMP_ADD_AFFINE, IMP_ADD_RECIPE, IMP_ADD_SETTING, IMP_ADD_USE, IMP_COUNT
};
static const char *const imp_sig[IMP_COUNT] = {
    [IMP_ABI] = NULL, [IMP_TRAP] = "vrlsllll", [IMP_REFUEL] = "vrsll", [IMP_EXP] = "dd", [IMP_LOG] = "dd", [IMP_LOG2] = "dd",
    [IMP_TANH] = "dd", [IMP_ERF] = "dd", [IMP_POW] = "ddd", [IMP_TMIN] = "dt", [IMP_TMAX] = "dt",
    [IMP_TABSMAX] = "dt", [IMP_TSUM] = "dt", [IMP_TBCAST] = "lttl", [IMP_STATE_ALLOC] = "prl", [IMP_HIST_NEW] = "prl",
    [IMP_HIST_ADD] = "vrptl", [IMP_HIST_MERGE] = "vrpp", [IMP_HIST_QUANTILE] = "dpd", [IMP_HIST_BIN] = "dpl",
    [IMP_HIST_EDGE] = "dpl", [IMP_HIST_COUNT] = "dp", [IMP_HIST_LO] = "dp", [IMP_HIST_HI] = "dp",
    [IMP_HIST_WIDTH] = "dp", [IMP_HIST_BINS] = "lp", [IMP_HIST_MIN] = "dp", [IMP_HIST_MAX] = "dp", [IMP_ADD_FN] = "vpspsl", [IMP_ADD_CAL] = "vpsllppppp",
    [IMP_ADD_PARAM] = "vpssl", [IMP_VALUE_RANK] = "lpl", [IMP_VALUE_DIM] = "lpll", [IMP_VALUE_CONST] = "lpl",
    [IMP_VALUE_PRESENT] = "lpl", [IMP_VALUE_SCALAR] = "dpl", [IMP_VALUE_OP_IS] = "lpls", [IMP_ATTR_INT] = "lplsl", [IMP_ATTR_FLOAT] = "dplsd",
    [IMP_ATTR_STR_IS] = "lplsss", [IMP_ATTR_INTS] = "ppls",
    [IMP_ADD_PATTERN] = "vpspsl", [IMP_ADD_PATTERN_VALUE] = "vpssslll", [IMP_ADD_PATTERN_NODE] = "vpslss",
    [IMP_ADD_PATTERN_LOWER] = "vpsslsp", [IMP_ADD_AFFINE] = "vpsllpppplss", [IMP_ADD_RECIPE] = "vpspl",
    [IMP_ADD_SETTING] = "vpssssssp", [IMP_ADD_USE] = "vpss",
};

/* Element accesses one versioned loop can prove in range (more stay checked). */
#define QRL_JIT_MAX_HOIST 32

typedef struct jit {
    gcc_jit_context *c;
    qc_unit *u;
    ql_diags *d;
    gcc_jit_type *t_void, *t_bool, *t_i8, *t_u8, *t_i16, *t_u16, *t_i32, *t_u32, *t_i64, *t_u64, *t_f32, *t_f64,
        *t_voidp, *t_str;
    gcc_jit_type *t_array, *t_tview, *t_qtype, *t_qparams, *t_rt, *t_imports;
    gcc_jit_type *p_array, *p_tview, *p_qtype, *p_qparams, *p_rt, *p_imports;
    gcc_jit_field *f_arr_data, *f_arr_len, *f_tv_data, *f_tv_numel, *f_tv_rank, *f_tv_dims;
    gcc_jit_field *f_qt[7]; /* bits qmin qmax axis is_signed narrow symmetric */
    gcc_jit_field *f_qp_scale, *f_qp_zero, *f_rt_imp, *f_rt_failed, *f_rt_fuel;
    gcc_jit_field *f_imp[IMP_COUNT];
    gcc_jit_function **fns; /* by item index: fn/kernel functions */
    signed char *traps;     /* by item index: fn/kernel can trap (1), cannot (-1), not known yet (0) */
    const unsigned char *want; /* by item index: compiled into this context (NULL: every item) */
    int fns_private;        /* fns serve this context's own code: not registered */
    int naffine;            /* affine rules compiled so far (their function names) */
} jit;

/* One function being generated. */
typedef struct fgen {
    jit *j;
    gcc_jit_function *fn;
    gcc_jit_block *b; /* where code goes; NULL after a terminator */
    gcc_jit_rvalue *rt, *state, *other, *params, *qt;
    gcc_jit_lvalue *out;      /* solve: *out */
    gcc_jit_param **fparams;  /* fn/kernel/observe parameters after rt */
    gcc_jit_lvalue **locals;
    int nlocals;
    gcc_jit_type *ret;
    int ret_qparams_out; /* solve returns through out */
    gcc_jit_block *brk[256], *cont[256];
    int nloops;
    const qc_sym *loop_var[256], *loop_arr[256]; /* bounds-check elision */
    int nbound;
    struct {                /* indices the versioned loop being generated proved in range */
        const ql_node *at;
        gcc_jit_lvalue *ptr;  /* the data pointer, read once before the loop */
        gcc_jit_rvalue *data;
    } hoist[QRL_JIT_MAX_HOIST];
    int nhoist;
    const ql_node *cal;
    const char *file;
    int counter;
    /* patterns: the candidate match; affine: inputs, zero points, scales, output; tables: v; fallback: sqnr */
    gcc_jit_rvalue *mt, *aff_x, *aff_zero, *aff_scale, *table_v, *sqnr, *output_sqnr;
    gcc_jit_lvalue *aff_y;
} fgen;

/* ---------------------------------------------------------------- types */

static gcc_jit_type *jtype(jit *j, const qc_type *t)
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
    case QC_HIST: return j->t_voidp;
    default: return j->t_void;
    }
}

/* The unsigned type of an integer's width: wrap-around arithmetic. */
static gcc_jit_type *unsigned_of(jit *j, const qc_type *t)
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
    gcc_jit_field *ft[4] = {j->f_tv_data = field(j, j->t_voidp, "data"), j->f_tv_numel = field(j, j->t_i64, "numel"),
                            j->f_tv_rank = field(j, j->t_i64, "rank"),
                            j->f_tv_dims = field(j, gcc_jit_context_new_array_type(c, NULL, j->t_i64, QR_MAX_DIMS),
                                                 "dims")};
    j->t_tview = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_tview", 4, ft));
    static const char *const qtn[7] = {"bits", "qmin", "qmax", "axis", "is_signed", "narrow", "symmetric"};
    for (int i = 0; i < 7; i++)
        j->f_qt[i] = field(j, j->t_i64, qtn[i]);
    j->t_qtype = gcc_jit_struct_as_type(gcc_jit_context_new_struct_type(c, NULL, "qrl_qtype", 7, j->f_qt));
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

static gcc_jit_rvalue *lng(jit *j, gcc_jit_type *t, long v)
{
    return gcc_jit_context_new_rvalue_from_long(j->c, t, v);
}

static gcc_jit_rvalue *dbl(jit *j, gcc_jit_type *t, double v)
{
    return gcc_jit_context_new_rvalue_from_double(j->c, t, v);
}

/* libgccjit refuses a cast to the same type (structs included): skip those. */
static gcc_jit_rvalue *cast(jit *j, gcc_jit_rvalue *v, gcc_jit_type *t)
{
    if (gcc_jit_rvalue_get_type(v) == t)
        return v;
    return gcc_jit_context_new_cast(j->c, NULL, v, t);
}

/* Any scalar as f64 (libgccjit casts bool only to integers). */
static gcc_jit_rvalue *to_f64(jit *j, gcc_jit_rvalue *v)
{
    if (gcc_jit_rvalue_get_type(v) == j->t_bool)
        v = cast(j, v, j->t_i64);
    return cast(j, v, j->t_f64);
}

static gcc_jit_rvalue *cmp(jit *j, enum gcc_jit_comparison op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_comparison(j->c, NULL, op, a, b);
}

static gcc_jit_rvalue *bin(jit *j, enum gcc_jit_binary_op op, gcc_jit_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_binary_op(j->c, NULL, op, t, a, b);
}

static gcc_jit_block *new_block(fgen *f)
{
    return gcc_jit_function_new_block(f->fn, NULL);
}

/* The current block, or a fresh unreachable one after a terminator. */
static gcc_jit_block *cur(fgen *f)
{
    if (!f->b)
        f->b = new_block(f);
    return f->b;
}

static gcc_jit_lvalue *temp(fgen *f, gcc_jit_type *t)
{
    char name[24];
    snprintf(name, sizeof name, "t%d", f->counter++);
    return gcc_jit_function_new_local(f->fn, NULL, t, name);
}

/* Evaluates v now (a call, a load that must not move) into a temporary. */
static gcc_jit_rvalue *now(fgen *f, gcc_jit_rvalue *v)
{
    gcc_jit_lvalue *t = temp(f, gcc_jit_rvalue_get_type(v));
    gcc_jit_block_add_assignment(cur(f), NULL, t, v);
    return gcc_jit_lvalue_as_rvalue(t);
}

static gcc_jit_rvalue *imp_fn(fgen *f, int i)
{
    gcc_jit_lvalue *imp = gcc_jit_rvalue_dereference_field(f->rt, NULL, f->j->f_rt_imp);
    return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(gcc_jit_lvalue_as_rvalue(imp), NULL, f->j->f_imp[i]));
}

static gcc_jit_rvalue *call_imp(fgen *f, int i, int n, gcc_jit_rvalue **args)
{
    return gcc_jit_context_new_call_through_ptr(f->j->c, NULL, imp_fn(f, i), n, args);
}

static void return_default(fgen *f, gcc_jit_block *b)
{
    if (f->ret == f->j->t_void || f->ret_qparams_out) {
        gcc_jit_block_end_with_void_return(b, NULL);
        return;
    }
    if (f->ret == f->j->t_qparams) {
        gcc_jit_lvalue *t = temp(f, f->ret);
        gcc_jit_block_add_assignment(b, NULL, gcc_jit_lvalue_access_field(t, NULL, f->j->f_qp_scale),
                                     dbl(f->j, f->j->t_f64, 0));
        gcc_jit_block_add_assignment(b, NULL, gcc_jit_lvalue_access_field(t, NULL, f->j->f_qp_zero),
                                     lng(f->j, f->j->t_i64, 0));
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
static void check(fgen *f, gcc_jit_rvalue *fail, int code, const ql_node *at, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    jit *j = f->j;
    gcc_jit_block *bad = new_block(f), *ok = new_block(f);
    gcc_jit_block_end_with_conditional(cur(f), NULL, fail, bad, ok);
    int64_t line, col;
    loc_of(at, &line, &col);
    gcc_jit_rvalue *args[7] = {f->rt, lng(j, j->t_i64, code), gcc_jit_context_new_string_literal(j->c, f->file),
                               lng(j, j->t_i64, (long)line), lng(j, j->t_i64, (long)col),
                               a ? cast(j, a, j->t_i64) : lng(j, j->t_i64, 0),
                               b ? cast(j, b, j->t_i64) : lng(j, j->t_i64, 0)};
    gcc_jit_block_add_eval(bad, NULL, call_imp(f, IMP_TRAP, 7, args));
    return_default(f, bad);
    f->b = ok;
}

static void check_failed(fgen *f);

/* Each loop iteration burns fuel; when it runs out, the runtime looks at the clock (refuel) and
 * traps past the recipe time limit, at the loop's location. */
static void burn_fuel(fgen *f, const ql_node *at, gcc_jit_rvalue *amount)
{
    jit *j = f->j;
    gcc_jit_lvalue *fuel = gcc_jit_rvalue_dereference_field(f->rt, NULL, j->f_rt_fuel);
    gcc_jit_block_add_assignment_op(cur(f), NULL, fuel, GCC_JIT_BINARY_OP_MINUS, amount);
    gcc_jit_block *empty = new_block(f), *ok = new_block(f);
    gcc_jit_block_end_with_conditional(cur(f), NULL,
                                       cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(fuel), lng(j, j->t_i64, 0)),
                                       empty, ok);
    int64_t line, col;
    loc_of(at, &line, &col);
    gcc_jit_rvalue *args[4] = {f->rt, gcc_jit_context_new_string_literal(j->c, f->file), lng(j, j->t_i64, (long)line),
                               lng(j, j->t_i64, (long)col)};
    f->b = empty;
    gcc_jit_block_add_eval(empty, NULL, call_imp(f, IMP_REFUEL, 4, args));
    check_failed(f);
    gcc_jit_block_end_with_jump(cur(f), NULL, ok);
    f->b = ok;
}

/* After a call that may trap: leave at once when it did. */
static void check_failed(fgen *f)
{
    gcc_jit_block *bad = new_block(f), *ok = new_block(f);
    gcc_jit_rvalue *failed = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(f->rt, NULL, f->j->f_rt_failed));
    gcc_jit_block_end_with_conditional(cur(f), NULL, cmp(f->j, GCC_JIT_COMPARISON_NE, failed, lng(f->j, f->j->t_i64, 0)),
                                       bad, ok);
    return_default(f, bad);
    f->b = ok;
}

/* t = cond ? a : b, both already evaluated. */
static gcc_jit_rvalue *select_rv(fgen *f, gcc_jit_rvalue *c, gcc_jit_rvalue *a, gcc_jit_rvalue *b, gcc_jit_type *t)
{
    gcc_jit_lvalue *r = temp(f, t);
    gcc_jit_block_add_assignment(cur(f), NULL, r, b);
    gcc_jit_block *yes = new_block(f), *join = new_block(f);
    gcc_jit_block_end_with_conditional(cur(f), NULL, c, yes, join);
    gcc_jit_block_add_assignment(yes, NULL, r, a);
    gcc_jit_block_end_with_jump(yes, NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

static gcc_jit_rvalue *builtin1(jit *j, const char *name, gcc_jit_rvalue *x)
{
    gcc_jit_function *fn = gcc_jit_context_get_builtin_function(j->c, name);
    return gcc_jit_context_new_call(j->c, NULL, fn, 1, &x);
}

static int is_f32(jit *j, gcc_jit_rvalue *v)
{
    return gcc_jit_rvalue_get_type(v) == j->t_f32;
}

static gcc_jit_rvalue *floor_rv(jit *j, gcc_jit_rvalue *x)
{
    return builtin1(j, is_f32(j, x) ? "__builtin_floorf" : "__builtin_floor", x);
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
static gcc_jit_rvalue *float_to_int(fgen *f, gcc_jit_rvalue *x, const qc_type *to)
{
    jit *j = f->j;
    int64_t lo, hi;
    int_range(to, &lo, &hi);
    gcc_jit_type *ft = gcc_jit_rvalue_get_type(x), *it = jtype(j, to);
    if (hi <= (1 << 24) && lo >= -(1 << 24)) {
        /* A narrow type: its bounds are exact in f32 and f64, so clamp in x's own type with
         * selects and truncate; no branches, no f64: GCC vectorizes it. Each select is written
         * in the operand order of the SSE/AVX min and max (a NaN operand gives the second),
         * so each is one instruction: with lo = 0 `lo < x ? x : lo` also sends NaN to 0;
         * otherwise NaN passes both clamps and one test sends it to 0. */
        x = now(f, x);
        gcc_jit_rvalue *flo = dbl(j, ft, (double)lo), *fhi = dbl(j, ft, (double)hi), *v;
        if (lo == 0) {
            v = now(f, select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, flo, x), x, flo, ft));
            v = select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, v, fhi), v, fhi, ft);
        } else {
            v = now(f, select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, fhi, x), fhi, x, ft));
            v = now(f, select_rv(f, cmp(j, GCC_JIT_COMPARISON_GT, flo, v), flo, v, ft));
            v = select_rv(f, cmp(j, GCC_JIT_COMPARISON_EQ, v, v), v, dbl(j, ft, 0), ft);
        }
        return now(f, cast(j, v, it));
    }
    x = now(f, cast(j, x, j->t_f64));
    gcc_jit_lvalue *r = temp(f, it);
    gcc_jit_block *b_nan = new_block(f), *b_notnan = new_block(f), *b_hi = new_block(f), *b_nothi = new_block(f),
                  *b_lo = new_block(f), *b_mid = new_block(f), *join = new_block(f);
    gcc_jit_block_end_with_conditional(cur(f), NULL, cmp(j, GCC_JIT_COMPARISON_NE, x, x), b_nan, b_notnan);
    gcc_jit_block_add_assignment(b_nan, NULL, r, gcc_jit_context_zero(j->c, it));
    gcc_jit_block_end_with_jump(b_nan, NULL, join);
    /* 2^63 is the first double above INT64_MAX. */
    double dhi = hi == INT64_MAX ? 9223372036854775808.0 : (double)hi + 1.0;
    gcc_jit_block_end_with_conditional(b_notnan, NULL, cmp(j, GCC_JIT_COMPARISON_GE, x, dbl(j, j->t_f64, dhi)), b_hi,
                                       b_nothi);
    gcc_jit_block_add_assignment(b_hi, NULL, r, lng(j, it, (long)hi));
    gcc_jit_block_end_with_jump(b_hi, NULL, join);
    gcc_jit_block_end_with_conditional(b_nothi, NULL, cmp(j, GCC_JIT_COMPARISON_LE, x, dbl(j, j->t_f64, (double)lo - 1.0)),
                                       b_lo, b_mid);
    gcc_jit_block_add_assignment(b_lo, NULL, r, lng(j, it, (long)lo));
    gcc_jit_block_end_with_jump(b_lo, NULL, join);
    gcc_jit_block_add_assignment(b_mid, NULL, r, cast(j, x, it));
    gcc_jit_block_end_with_jump(b_mid, NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

/* Integer to a narrower or differently signed integer, clamped to its range. */
static gcc_jit_rvalue *sat_int(fgen *f, gcc_jit_rvalue *x, const qc_type *from, const qc_type *to)
{
    jit *j = f->j;
    int64_t lo, hi, flo, fhi;
    int_range(to, &lo, &hi);
    int_range(from, &flo, &fhi);
    gcc_jit_rvalue *v = now(f, cast(j, x, j->t_i64));
    if (flo < lo)
        v = select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, v, lng(j, j->t_i64, (long)lo)), lng(j, j->t_i64, (long)lo), v,
                      j->t_i64);
    if (fhi > hi)
        v = select_rv(f, cmp(j, GCC_JIT_COMPARISON_GT, v, lng(j, j->t_i64, (long)hi)), lng(j, j->t_i64, (long)hi), v,
                      j->t_i64);
    return cast(j, v, jtype(j, to));
}

/* ---------------------------------------------------------- expressions */

static gcc_jit_rvalue *expr(fgen *f, const ql_node *n);
static gcc_jit_lvalue *lvalue(fgen *f, const ql_node *n);

static const qc_type *ty(const ql_node *n)
{
    const qc_type *t = n->type ? n->type : &qc_error;
    return t->k == QC_INTLIT ? &qc_i64 : t->k == QC_FLOATLIT ? &qc_f64 : t;
}

/* The state slot of a calibrator field: its offset in the state block. */
static int64_t state_offset(const ql_node *cal, const qc_sym *s)
{
    int64_t off = 0;
    for (int i = 0; i < cal->nkids; i++) {
        const ql_node *k = cal->kids[i];
        if (k->kind != QL_STATE)
            continue;
        if (k->sym == s)
            return off;
        const qc_type *t = ((const qc_sym *)k->sym)->type;
        off += t->k == QC_ARRAY ? 16 : 8;
    }
    return -1;
}

static int64_t state_bytes(const ql_node *cal)
{
    int64_t off = 0;
    for (int i = 0; i < cal->nkids; i++)
        if (cal->kids[i]->kind == QL_STATE)
            off += ((const qc_sym *)cal->kids[i]->sym)->type->k == QC_ARRAY ? 16 : 8;
    return off;
}

/* *(T *)(base + off) */
static gcc_jit_lvalue *slot(fgen *f, gcc_jit_rvalue *base, int64_t off, gcc_jit_type *t)
{
    jit *j = f->j;
    gcc_jit_type *cp = gcc_jit_type_get_pointer(j->t_u8);
    gcc_jit_lvalue *byte = gcc_jit_context_new_array_access(j->c, NULL, cast(j, base, cp), lng(j, j->t_i64, (long)off));
    gcc_jit_rvalue *addr = cast(j, gcc_jit_lvalue_get_address(byte, NULL), gcc_jit_type_get_pointer(t));
    return gcc_jit_rvalue_dereference(addr, NULL);
}

static gcc_jit_lvalue *state_lvalue(fgen *f, gcc_jit_rvalue *base, const qc_sym *s)
{
    return slot(f, base, state_offset(f->cal, s), s->type->k == QC_ARRAY ? f->j->t_array : jtype(f->j, s->type));
}

static gcc_jit_rvalue *const_value(fgen *f, const qc_sym *s)
{
    return cast(f->j, expr(f, s->decl->b), jtype(f->j, s->type));
}

static gcc_jit_rvalue *param_value(fgen *f, const qc_sym *s)
{
    jit *j = f->j;
    if (f->params && f->cal && s->decl && s->decl->kind == QL_PARAM) {
        /* A calibrator parameter: params[i] as integer or float. */
        int is_cal_param = 0;
        for (int i = 0; f->cal->a && i < f->cal->a->nkids; i++)
            is_cal_param |= f->cal->a->kids[i] == s->decl;
        if (is_cal_param) {
            gcc_jit_type *pt = qc_is_float(s->type) ? j->t_f64 : j->t_i64;
            gcc_jit_lvalue *v = gcc_jit_context_new_array_access(j->c, NULL, cast(j, f->params, gcc_jit_type_get_pointer(pt)),
                                                                 lng(j, j->t_i64, s->index));
            gcc_jit_rvalue *r = gcc_jit_lvalue_as_rvalue(v);
            if (s->type->k == QC_BOOL)
                return cmp(j, GCC_JIT_COMPARISON_NE, r, lng(j, j->t_i64, 0));
            return cast(j, r, jtype(j, s->type));
        }
    }
    if (f->qt && s->type->k == QC_QTYPE) /* solve(t: qtype) */
        return f->qt;
    return gcc_jit_param_as_rvalue(f->fparams[s->index]);
}

static gcc_jit_rvalue *name_rv(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_sym *s = n->sym;
    switch (s->kind) {
    case QC_SYM_LOCAL:
    case QC_SYM_LOOP: return gcc_jit_lvalue_as_rvalue(f->locals[s->index]);
    case QC_SYM_PARAM: return param_value(f, s);
    case QC_SYM_CONST: return const_value(f, s);
    case QC_SYM_STATE: {
        gcc_jit_lvalue *lv = state_lvalue(f, f->state, s);
        if (s->type->k == QC_ARRAY)
            return gcc_jit_lvalue_get_address(lv, NULL);
        return gcc_jit_lvalue_as_rvalue(lv);
    }
    case QC_SYM_VALUE: return lng(j, j->t_i64, s->index);
    case QC_SYM_AFF_IN:
        return gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(j->c, NULL, f->aff_x, lng(j, j->t_i64, s->index)));
    case QC_SYM_AFF_OUT: return gcc_jit_lvalue_as_rvalue(f->aff_y);
    case QC_SYM_TABLE_VAR: return f->table_v;
    case QC_SYM_BUILTIN:
        if (!strcmp(s->name, "sqnr") && f->sqnr)
            return f->sqnr;
        if (!strcmp(s->name, "output_sqnr") && f->output_sqnr)
            return f->output_sqnr;
        if (!strcmp(s->name, "inf"))
            return dbl(j, j->t_f64, INFINITY);
        if (!strcmp(s->name, "nan"))
            return dbl(j, j->t_f64, NAN);
        return dbl(j, j->t_f64, M_PI);
    default: return lng(j, j->t_i64, 0);
    }
}

/* Index into an array or tensor, bounds checked unless proven in range. */
static gcc_jit_lvalue *element(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *bt = ty(n->a);
    for (int h = 0; h < f->nhoist; h++)
        if (f->hoist[h].at == n)
            return gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_lvalue_as_rvalue(f->hoist[h].ptr),
                                                    now(f, cast(j, expr(f, n->kids[0]), j->t_i64)));
    gcc_jit_rvalue *base = now(f, expr(f, n->a));
    gcc_jit_type *et = jtype(j, bt->elem);
    const qc_sym *base_sym = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (bt->k == QC_ARRAY) {
        gcc_jit_rvalue *i = now(f, cast(j, expr(f, n->kids[0]), j->t_i64));
        int proven = 0;
        const qc_sym *iv = n->kids[0]->kind == QL_NAME ? n->kids[0]->sym : NULL;
        for (int k = 0; k < f->nbound && base_sym; k++)
            proven |= f->loop_var[k] == iv && f->loop_arr[k] == base_sym;
        gcc_jit_rvalue *len = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_arr_len));
        if (!proven)
            check(f, cmp(j, GCC_JIT_COMPARISON_GE, cast(j, i, j->t_u64), cast(j, len, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], i, len);
        gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_arr_data));
        return gcc_jit_context_new_array_access(j->c, NULL, cast(j, data, gcc_jit_type_get_pointer(et)), i);
    }
    /* tensor: one flat index, or one per dimension */
    gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_data));
    gcc_jit_rvalue *flat;
    if (n->nkids == 1) {
        flat = now(f, cast(j, expr(f, n->kids[0]), j->t_i64));
        int proven = 0;
        const qc_sym *iv = n->kids[0]->kind == QL_NAME ? n->kids[0]->sym : NULL;
        for (int k = 0; k < f->nbound && base_sym; k++)
            proven |= f->loop_var[k] == iv && f->loop_arr[k] == base_sym;
        gcc_jit_rvalue *numel = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_numel));
        if (!proven)
            check(f, cmp(j, GCC_JIT_COMPARISON_GE, cast(j, flat, j->t_u64), cast(j, numel, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], flat, numel);
    } else {
        gcc_jit_rvalue *rank = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_rank));
        check(f, cmp(j, GCC_JIT_COMPARISON_NE, rank, lng(j, j->t_i64, n->nkids)), QRL_TRAP_RANK, n,
              lng(j, j->t_i64, n->nkids), rank);
        gcc_jit_lvalue *acc = temp(f, j->t_i64);
        gcc_jit_block_add_assignment(cur(f), NULL, acc, lng(j, j->t_i64, 0));
        gcc_jit_lvalue *dims = gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_dims);
        for (int d = 0; d < n->nkids; d++) {
            gcc_jit_rvalue *i = now(f, cast(j, expr(f, n->kids[d]), j->t_i64));
            gcc_jit_rvalue *dim = now(f, gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(
                                             j->c, NULL, gcc_jit_lvalue_as_rvalue(dims), lng(j, j->t_i64, d))));
            check(f, cmp(j, GCC_JIT_COMPARISON_GE, cast(j, i, j->t_u64), cast(j, dim, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[d], i, dim);
            gcc_jit_block_add_assignment(cur(f), NULL, acc,
                                         bin(j, GCC_JIT_BINARY_OP_PLUS, j->t_i64,
                                             bin(j, GCC_JIT_BINARY_OP_MULT, j->t_i64, gcc_jit_lvalue_as_rvalue(acc), dim), i));
        }
        flat = gcc_jit_lvalue_as_rvalue(acc);
    }
    return gcc_jit_context_new_array_access(j->c, NULL, cast(j, data, gcc_jit_type_get_pointer(et)), flat);
}

static gcc_jit_rvalue *arith(fgen *f, ql_tok op, const qc_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *b,
                             const ql_node *at)
{
    jit *j = f->j;
    gcc_jit_type *jt = jtype(j, t);
    a = cast(j, a, jt);
    b = cast(j, b, jt);
    if (qc_is_float(t)) {
        enum gcc_jit_binary_op o = op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS
                                 : op == QL_TOK_MINUS ? GCC_JIT_BINARY_OP_MINUS
                                 : op == QL_TOK_STAR ? GCC_JIT_BINARY_OP_MULT : GCC_JIT_BINARY_OP_DIVIDE;
        return bin(j, o, jt, a, b);
    }
    gcc_jit_type *ut = unsigned_of(j, t);
    switch (op) {
    case QL_TOK_PLUS:
    case QL_TOK_MINUS:
    case QL_TOK_STAR: {
        enum gcc_jit_binary_op o = op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS
                                 : op == QL_TOK_MINUS ? GCC_JIT_BINARY_OP_MINUS : GCC_JIT_BINARY_OP_MULT;
        return cast(j, bin(j, o, ut, cast(j, a, ut), cast(j, b, ut)), jt);
    }
    case QL_TOK_SLASH:
    case QL_TOK_PERCENT: {
        a = now(f, a);
        b = now(f, b);
        check(f, cmp(j, GCC_JIT_COMPARISON_EQ, b, gcc_jit_context_zero(j->c, jt)), QRL_TRAP_DIVZERO, at, NULL, NULL);
        if (!qc_is_signed(t))
            return bin(j, op == QL_TOK_SLASH ? GCC_JIT_BINARY_OP_DIVIDE : GCC_JIT_BINARY_OP_MODULO, jt, a, b);
        /* MIN / -1 overflows in C: -1 is handled apart (wrapping negation, remainder 0). */
        gcc_jit_rvalue *minus1 = cmp(j, GCC_JIT_COMPARISON_EQ, b, lng(j, jt, -1));
        gcc_jit_rvalue *safe_b = now(f, select_rv(f, minus1, gcc_jit_context_one(j->c, jt), b, jt));
        gcc_jit_rvalue *q = now(f, bin(j, op == QL_TOK_SLASH ? GCC_JIT_BINARY_OP_DIVIDE : GCC_JIT_BINARY_OP_MODULO, jt, a,
                                       safe_b));
        gcc_jit_rvalue *alt = op == QL_TOK_SLASH
                                  ? cast(j, bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), cast(j, a, ut)), jt)
                                  : gcc_jit_context_zero(j->c, jt);
        return select_rv(f, minus1, alt, q, jt);
    }
    case QL_TOK_AMP: return bin(j, GCC_JIT_BINARY_OP_BITWISE_AND, jt, a, b);
    case QL_TOK_PIPE: return bin(j, GCC_JIT_BINARY_OP_BITWISE_OR, jt, a, b);
    case QL_TOK_CARET: return bin(j, GCC_JIT_BINARY_OP_BITWISE_XOR, jt, a, b);
    default: return a;
    }
}

static gcc_jit_rvalue *shift(fgen *f, ql_tok op, const qc_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *cnt)
{
    jit *j = f->j;
    gcc_jit_type *jt = jtype(j, t), *ut = unsigned_of(j, t);
    int bits = qc_type_bits(t);
    a = now(f, cast(j, a, jt));
    cnt = now(f, cast(j, cnt, j->t_i64));
    gcc_jit_rvalue *in_range = cmp(j, GCC_JIT_COMPARISON_LT, cast(j, cnt, j->t_u64), lng(j, j->t_u64, bits));
    gcc_jit_rvalue *safe = now(f, select_rv(f, in_range, cnt, lng(j, j->t_i64, 0), j->t_i64));
    gcc_jit_rvalue *r, *out;
    if (op == QL_TOK_SHL) {
        r = cast(j, bin(j, GCC_JIT_BINARY_OP_LSHIFT, ut, cast(j, a, ut), cast(j, safe, ut)), jt);
        out = gcc_jit_context_zero(j->c, jt);
    } else {
        r = bin(j, GCC_JIT_BINARY_OP_RSHIFT, jt, a, cast(j, safe, jt));
        out = qc_is_signed(t) ? select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, a, gcc_jit_context_zero(j->c, jt)),
                                          lng(j, jt, -1), gcc_jit_context_zero(j->c, jt), jt)
                              : gcc_jit_context_zero(j->c, jt);
    }
    return select_rv(f, in_range, now(f, r), out, jt);
}

/* a and b / a or b with short-circuit: b's code (and traps) runs only when needed. */
static gcc_jit_rvalue *logic(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    gcc_jit_lvalue *r = temp(f, j->t_bool);
    gcc_jit_block_add_assignment(cur(f), NULL, r, expr(f, n->a));
    gcc_jit_block *rhs = new_block(f), *join = new_block(f);
    if (n->op == QL_TOK_AND)
        gcc_jit_block_end_with_conditional(cur(f), NULL, gcc_jit_lvalue_as_rvalue(r), rhs, join);
    else
        gcc_jit_block_end_with_conditional(cur(f), NULL, gcc_jit_lvalue_as_rvalue(r), join, rhs);
    f->b = rhs;
    gcc_jit_rvalue *b = expr(f, n->b);
    gcc_jit_block_add_assignment(cur(f), NULL, r, b);
    gcc_jit_block_end_with_jump(cur(f), NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

static gcc_jit_rvalue *binary(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    if (n->op == QL_TOK_AND || n->op == QL_TOK_OR)
        return logic(f, n);
    const qc_type *t = ty(n);
    if (n->op >= QL_TOK_EQ && n->op <= QL_TOK_GE) {
        /* v.op == "Relu" (either way round): asked of the runtime */
        if (ty(n->a)->k == QC_STR || ty(n->b)->k == QC_STR) {
            const ql_node *fld = n->a->kind == QL_FIELD ? n->a : n->b, *lit = n->a->kind == QL_STR ? n->a : n->b;
            gcc_jit_rvalue *r;
            const ql_node *call = n->a->kind == QL_CALL ? n->a : n->b;
            if (call->kind == QL_CALL && lit->kind == QL_STR) { /* attr("mode", "nearest") == "linear" */
                gcc_jit_rvalue *args[5] = {f->mt, lng(j, j->t_i64, -1),
                                           gcc_jit_context_new_string_literal(j->c, call->kids[0]->name),
                                           gcc_jit_context_new_string_literal(j->c, call->kids[1]->name),
                                           gcc_jit_context_new_string_literal(j->c, lit->name)};
                r = cmp(j, GCC_JIT_COMPARISON_NE, now(f, call_imp(f, IMP_ATTR_STR_IS, 5, args)), lng(j, j->t_i64, 0));
            } else if (fld->kind == QL_FIELD && lit->kind == QL_STR) {
                gcc_jit_rvalue *args[3] = {f->mt, expr(f, fld->a), gcc_jit_context_new_string_literal(j->c, lit->name)};
                r = cmp(j, GCC_JIT_COMPARISON_NE, now(f, call_imp(f, IMP_VALUE_OP_IS, 3, args)), lng(j, j->t_i64, 0));
            } else { /* two literals */
                int eq = n->a->name && n->b->name && !strcmp(n->a->name, n->b->name);
                r = gcc_jit_context_new_rvalue_from_int(j->c, j->t_bool, eq);
            }
            return n->op == QL_TOK_EQ ? r : gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_LOGICAL_NEGATE, j->t_bool, r);
        }
        /* Operands were settled to a common type by the checker. */
        const qc_type *ot = ty(n->a);
        gcc_jit_rvalue *a = expr(f, n->a), *b = expr(f, n->b);
        if (ot->k != QC_STR && ot->k != QC_BOOL) {
            const qc_type *ct = qc_common(ot, ty(n->b));
            if (ct) {
                a = cast(j, a, jtype(j, ct));
                b = cast(j, b, jtype(j, ct));
            }
        }
        static const enum gcc_jit_comparison ops[] = {GCC_JIT_COMPARISON_EQ, GCC_JIT_COMPARISON_NE,
                                                      GCC_JIT_COMPARISON_LT, GCC_JIT_COMPARISON_LE,
                                                      GCC_JIT_COMPARISON_GT, GCC_JIT_COMPARISON_GE};
        return cmp(j, ops[n->op - QL_TOK_EQ], a, b);
    }
    gcc_jit_rvalue *a = now(f, cast(j, expr(f, n->a), jtype(j, t)));
    if (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR)
        return shift(f, n->op, t, a, expr(f, n->b));
    gcc_jit_rvalue *b = cast(j, expr(f, n->b), jtype(j, t));
    return arith(f, n->op, t, a, b, n);
}

static gcc_jit_rvalue *unary(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *t = ty(n);
    gcc_jit_rvalue *a = expr(f, n->a);
    if (n->op == QL_TOK_NOT)
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_LOGICAL_NEGATE, j->t_bool, a);
    gcc_jit_type *jt = jtype(j, t);
    a = cast(j, a, jt);
    if (n->op == QL_TOK_TILDE)
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_BITWISE_NEGATE, jt, a);
    if (qc_is_float(t))
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_MINUS, jt, a);
    gcc_jit_type *ut = unsigned_of(j, t);
    return cast(j, bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), cast(j, a, ut)), jt);
}

static gcc_jit_rvalue *conversion(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *to = ty(n), *from = ty(n->b);
    gcc_jit_rvalue *x = expr(f, n->b);
    if (to->k == QC_BOOL) {
        if (from->k == QC_BOOL)
            return x;
        return cmp(j, GCC_JIT_COMPARISON_NE, x, gcc_jit_context_zero(j->c, jtype(j, from)));
    }
    if (qc_is_int(to) && qc_is_float(from))
        return float_to_int(f, x, to);
    if (n->kind == QL_SAT && qc_is_int(from))
        return sat_int(f, x, from->k == QC_BOOL ? &qc_u8 : from, to);
    if (from->k == QC_BOOL && qc_is_float(to))
        return cast(j, to_f64(j, x), jtype(j, to));
    return cast(j, x, jtype(j, to));
}

/* round half to even (rint) / away from zero / up, exactly (x - floor(x) is exact). */
static gcc_jit_rvalue *rounding(fgen *f, const char *mode, gcc_jit_rvalue *x)
{
    jit *j = f->j;
    gcc_jit_type *t = gcc_jit_rvalue_get_type(x);
    x = now(f, x);
    gcc_jit_rvalue *half = dbl(j, t, 0.5), *one = dbl(j, t, 1.0);
    if (!strcmp(mode, "round_away")) {
        gcc_jit_rvalue *tr = now(f, builtin1(j, t == j->t_f32 ? "__builtin_truncf" : "__builtin_trunc", x));
        gcc_jit_rvalue *d = now(f, builtin1(j, t == j->t_f32 ? "__builtin_fabsf" : "__builtin_fabs",
                                            bin(j, GCC_JIT_BINARY_OP_MINUS, t, x, tr)));
        gcc_jit_rvalue *step = select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, x, dbl(j, t, 0)), dbl(j, t, -1), one, t);
        return select_rv(f, cmp(j, GCC_JIT_COMPARISON_GE, d, half), bin(j, GCC_JIT_BINARY_OP_PLUS, t, tr, step), tr, t);
    }
    if (!strcmp(mode, "round_even")) /* rint under round-to-nearest, which module load checks */
        return now(f, builtin1(j, t == j->t_f32 ? "__builtin_rintf" : "__builtin_rint", x));
    gcc_jit_rvalue *fl = now(f, floor_rv(j, x));
    gcc_jit_rvalue *d = now(f, bin(j, GCC_JIT_BINARY_OP_MINUS, t, x, fl));
    gcc_jit_rvalue *up = bin(j, GCC_JIT_BINARY_OP_PLUS, t, fl, one);
    return select_rv(f, cmp(j, GCC_JIT_COMPARISON_GE, d, half), up, fl, t); /* round_up */
}

/* Whether running n can trap: an index, an integer division, a loop (its fuel), a method call, or a
 * call of a fn that can. The other builtins cannot: their imports take no qrl_rt. A call of a fn
 * that cannot trap needs no test of rt->failed after it, which would be a load in the caller's
 * loop that a store through u8 may alias. */
static int fn_can_trap(jit *j, const qc_sym *s);

static int can_trap(jit *j, const ql_node *n)
{
    if (!n)
        return 0;
    switch (n->kind) {
    case QL_INDEX:
    case QL_FOR:
    case QL_WHILE: return 1;
    case QL_BINARY:
        if ((n->op == QL_TOK_SLASH || n->op == QL_TOK_PERCENT) && qc_is_int(ty(n)))
            return 1;
        break;
    case QL_ASSIGN:
        if (n->op == QL_TOK_SLASHEQ && qc_is_int(ty(n->a)))
            return 1;
        break;
    case QL_CALL: {
        if (n->a->kind == QL_FIELD)
            return 1;
        const qc_sym *s = n->a->sym;
        if (s && (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL) && fn_can_trap(j, s))
            return 1;
        break;
    }
    default: break;
    }
    if (can_trap(j, n->a) || can_trap(j, n->b) || can_trap(j, n->c) || can_trap(j, n->d))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (can_trap(j, n->kids[i]))
            return 1;
    return 0;
}

static int item_index(const jit *j, const qc_sym *s)
{
    int idx = 0;
    while (j->u->items[idx] != s)
        idx++;
    return idx;
}

/* can_trap of a fn's body, once per fn (the call graph is a DAG, but may share a lot). */
static int fn_can_trap(jit *j, const qc_sym *s)
{
    int idx = item_index(j, s);
    if (!j->traps[idx])
        j->traps[idx] = can_trap(j, s->decl->c) ? 1 : -1;
    return j->traps[idx] > 0;
}

static gcc_jit_rvalue *user_call(fgen *f, const ql_node *n, const qc_sym *s)
{
    jit *j = f->j;
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    gcc_jit_rvalue *args[QC_MAX_PARAMS + 1];
    const ql_node *given[QC_MAX_PARAMS] = {0};
    args[0] = f->rt;
    for (int i = 0; i < n->nkids && i < QC_MAX_PARAMS; i++) {
        const ql_node *a = n->kids[i];
        int at = i;
        if (a->kind == QL_NAMED_ARG) {
            for (int p = 0; p < np; p++)
                if (!strcmp(ps->kids[p]->name, a->name))
                    at = p;
            a = a->a;
        }
        if (at < QC_MAX_PARAMS)
            given[at] = a;
    }
    for (int p = 0; p < np && p < QC_MAX_PARAMS; p++) {
        const ql_node *a = given[p] ? given[p] : ps->kids[p]->b;
        args[p + 1] = now(f, cast(j, expr(f, a), jtype(j, ps->kids[p]->type)));
    }
    gcc_jit_rvalue *call = gcc_jit_context_new_call(j->c, NULL, j->fns[item_index(j, s)], np + 1, args);
    gcc_jit_rvalue *r;
    if (!s->decl->b) {
        gcc_jit_block_add_eval(cur(f), NULL, call);
        r = NULL;
    } else {
        r = now(f, call);
    }
    if (fn_can_trap(j, s))
        check_failed(f);
    return r ? r : lng(j, j->t_i64, 0);
}

static gcc_jit_rvalue *builtin_call(fgen *f, const ql_node *n, const char *name)
{
    jit *j = f->j;
    const qc_type *t = ty(n);
    gcc_jit_type *jt = jtype(j, t);
    ql_node *const *k = n->kids;
    if (!strcmp(name, "min") || !strcmp(name, "max") || !strcmp(name, "clamp")) {
        gcc_jit_rvalue *a = now(f, cast(j, expr(f, k[0]), jt)), *b = now(f, cast(j, expr(f, k[1]), jt));
        int is_max = !strcmp(name, "max");
        if (!strcmp(name, "clamp")) {
            gcc_jit_rvalue *hi = now(f, cast(j, expr(f, k[2]), jt));
            gcc_jit_rvalue *lo_ok = select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, a, b), b, a, jt);
            lo_ok = now(f, lo_ok);
            return select_rv(f, cmp(j, GCC_JIT_COMPARISON_GT, lo_ok, hi), hi, lo_ok, jt);
        }
        enum gcc_jit_comparison op = is_max ? GCC_JIT_COMPARISON_GT : GCC_JIT_COMPARISON_LT;
        if (!qc_is_float(t))
            return select_rv(f, cmp(j, op, a, b), a, b, jt);
        /* NaN on one side gives the other (as fmin/fmax), ties give b: `a op b ? a : b` is one
         * SSE/AVX max or min (a NaN operand gives b), then a NaN b gives a. */
        gcc_jit_rvalue *m = now(f, select_rv(f, cmp(j, op, a, b), a, b, jt));
        return select_rv(f, cmp(j, GCC_JIT_COMPARISON_NE, b, b), a, m, jt);
    }
    if (!strcmp(name, "select")) {
        gcc_jit_rvalue *c = now(f, expr(f, k[0]));
        gcc_jit_rvalue *a = now(f, cast(j, expr(f, k[1]), jt)), *b = now(f, cast(j, expr(f, k[2]), jt));
        return select_rv(f, c, a, b, jt);
    }
    if (!strcmp(name, "abs")) {
        gcc_jit_rvalue *a = now(f, cast(j, expr(f, k[0]), jt));
        if (qc_is_float(t))
            return builtin1(j, t->k == QC_F32 ? "__builtin_fabsf" : "__builtin_fabs", a);
        gcc_jit_type *ut = unsigned_of(j, t);
        gcc_jit_rvalue *neg = cast(j, bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), cast(j, a, ut)), jt);
        return select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, a, gcc_jit_context_zero(j->c, jt)), neg, a, jt);
    }
    if (!strcmp(name, "broadcast_index")) {
        gcc_jit_rvalue *args[3] = {now(f, expr(f, k[0])), now(f, expr(f, k[1])), now(f, cast(j, expr(f, k[2]), j->t_i64))};
        return now(f, call_imp(f, IMP_TBCAST, 3, args));
    }
    if (!strcmp(name, "len")) {
        gcc_jit_rvalue *a = now(f, expr(f, k[0]));
        return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(a, NULL, j->f_arr_len));
    }
    if (!strcmp(name, "qparams")) {
        gcc_jit_lvalue *q = temp(f, j->t_qparams);
        gcc_jit_rvalue *s = now(f, cast(j, expr(f, k[0]), j->t_f64));
        gcc_jit_rvalue *z = now(f, cast(j, expr(f, k[1]), j->t_i64));
        gcc_jit_block_add_assignment(cur(f), NULL, gcc_jit_lvalue_access_field(q, NULL, j->f_qp_scale), s);
        gcc_jit_block_add_assignment(cur(f), NULL, gcc_jit_lvalue_access_field(q, NULL, j->f_qp_zero), z);
        return gcc_jit_lvalue_as_rvalue(q);
    }
    if (!strcmp(name, "attr")) { /* the affine rule's node (v = -1); a string attribute is only compared */
        int fl = qc_is_float(ty(k[1]));
        gcc_jit_rvalue *args[4] = {f->mt, lng(j, j->t_i64, -1), gcc_jit_context_new_string_literal(j->c, k[0]->name),
                                   now(f, cast(j, expr(f, k[1]), fl ? j->t_f64 : j->t_i64))};
        return now(f, call_imp(f, fl ? IMP_ATTR_FLOAT : IMP_ATTR_INT, 4, args));
    }
    if (!strcmp(name, "attr_ints")) {
        gcc_jit_rvalue *args[3] = {f->mt, lng(j, j->t_i64, -1), gcc_jit_context_new_string_literal(j->c, k[0]->name)};
        return now(f, cast(j, call_imp(f, IMP_ATTR_INTS, 3, args), j->p_array));
    }
    if (!strcmp(name, "value")) { /* a scalar constant's value (NaN for anything else) */
        const qc_sym *in = k[0]->sym;
        gcc_jit_rvalue *args[2] = {f->mt, in && in->kind == QC_SYM_AFF_IN ? lng(j, j->t_i64, in->index) : expr(f, k[0])};
        return now(f, call_imp(f, IMP_VALUE_SCALAR, 2, args));
    }
    if (!strcmp(name, "const") || !strcmp(name, "present") || !strcmp(name, "rank") || !strcmp(name, "dim")) {
        gcc_jit_rvalue *args[3] = {f->mt, expr(f, k[0]), NULL};
        if (!strcmp(name, "dim")) {
            args[2] = now(f, cast(j, expr(f, k[1]), j->t_i64));
            return now(f, call_imp(f, IMP_VALUE_DIM, 3, args));
        }
        int imp = !strcmp(name, "const") ? IMP_VALUE_CONST : !strcmp(name, "present") ? IMP_VALUE_PRESENT : IMP_VALUE_RANK;
        gcc_jit_rvalue *r = now(f, call_imp(f, imp, 2, args));
        return imp == IMP_VALUE_RANK ? r : cmp(j, GCC_JIT_COMPARISON_NE, r, lng(j, j->t_i64, 0));
    }
    const qc_type *at = ty(k[0]);
    gcc_jit_rvalue *x = now(f, cast(j, expr(f, k[0]), jtype(j, at)));
    int f32 = at->k == QC_F32;
    if (!strcmp(name, "isnan"))
        return cmp(j, GCC_JIT_COMPARISON_NE, x, x);
    if (!strcmp(name, "isinf"))
        return cmp(j, GCC_JIT_COMPARISON_EQ, builtin1(j, f32 ? "__builtin_fabsf" : "__builtin_fabs", x),
                   dbl(j, jtype(j, at), INFINITY));
    if (!strcmp(name, "floor") || !strcmp(name, "ceil") || !strcmp(name, "trunc") || !strcmp(name, "sqrt")) {
        char b[32];
        snprintf(b, sizeof b, "__builtin_%s%s", name, f32 ? "f" : "");
        return builtin1(j, b, x);
    }
    if (!strncmp(name, "round_", 6))
        return rounding(f, name, x);
    int imp = !strcmp(name, "exp") ? IMP_EXP : !strcmp(name, "log") ? IMP_LOG : !strcmp(name, "log2") ? IMP_LOG2
            : !strcmp(name, "tanh") ? IMP_TANH : !strcmp(name, "erf") ? IMP_ERF : IMP_POW;
    gcc_jit_rvalue *args[2] = {cast(j, x, j->t_f64), NULL};
    if (imp == IMP_POW)
        args[1] = now(f, cast(j, expr(f, k[1]), j->t_f64));
    return cast(j, now(f, call_imp(f, imp, imp == IMP_POW ? 2 : 1, args)), jt);
}

static gcc_jit_rvalue *method_call(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const ql_node *recv = n->a->a;
    const char *m = n->a->name;
    const qc_type *rt = ty(recv);
    gcc_jit_rvalue *obj = now(f, expr(f, recv));
    if (rt->k == QC_TENSOR) {
        if (!strcmp(m, "dim")) {
            gcc_jit_rvalue *i = now(f, cast(j, expr(f, n->kids[0]), j->t_i64));
            gcc_jit_rvalue *rank = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(obj, NULL, j->f_tv_rank));
            check(f, cmp(j, GCC_JIT_COMPARISON_GE, cast(j, i, j->t_u64), cast(j, rank, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], i, rank);
            gcc_jit_lvalue *dims = gcc_jit_rvalue_dereference_field(obj, NULL, j->f_tv_dims);
            return now(f, gcc_jit_lvalue_as_rvalue(
                              gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_lvalue_as_rvalue(dims), i)));
        }
        int imp = !strcmp(m, "min") ? IMP_TMIN : !strcmp(m, "max") ? IMP_TMAX : !strcmp(m, "absmax") ? IMP_TABSMAX : IMP_TSUM;
        return now(f, call_imp(f, imp, 1, &obj));
    }
    if (rt->k == QC_HIST) {
        if (!strcmp(m, "add") || !strcmp(m, "add_abs")) {
            gcc_jit_rvalue *args[4] = {f->rt, obj, now(f, expr(f, n->kids[0])), lng(j, j->t_i64, !strcmp(m, "add_abs"))};
            gcc_jit_block_add_eval(cur(f), NULL, call_imp(f, IMP_HIST_ADD, 4, args));
            check_failed(f);
            return lng(j, j->t_i64, 0);
        }
        if (!strcmp(m, "merge")) {
            gcc_jit_rvalue *args[3] = {f->rt, obj, now(f, expr(f, n->kids[0]))};
            gcc_jit_block_add_eval(cur(f), NULL, call_imp(f, IMP_HIST_MERGE, 3, args));
            check_failed(f);
            return lng(j, j->t_i64, 0);
        }
        int imp = !strcmp(m, "quantile") ? IMP_HIST_QUANTILE : !strcmp(m, "bin") ? IMP_HIST_BIN : IMP_HIST_EDGE;
        gcc_jit_rvalue *args[2] = {obj, now(f, cast(j, expr(f, n->kids[0]), imp == IMP_HIST_QUANTILE ? j->t_f64 : j->t_i64))};
        return now(f, call_imp(f, imp, 2, args));
    }
    if (rt->k == QC_VALUE) {
        if (!strcmp(m, "dim")) {
            gcc_jit_rvalue *args[3] = {f->mt, obj, now(f, cast(j, expr(f, n->kids[0]), j->t_i64))};
            return now(f, call_imp(f, IMP_VALUE_DIM, 3, args));
        }
        if (!strcmp(m, "attr_ints")) {
            gcc_jit_rvalue *args[3] = {f->mt, obj, gcc_jit_context_new_string_literal(j->c, n->kids[0]->name)};
            return now(f, cast(j, call_imp(f, IMP_ATTR_INTS, 3, args), j->p_array));
        }
        /* attr(name, default): integer or float by the default's type */
        int fl = qc_is_float(ty(n->kids[1]));
        gcc_jit_rvalue *args[4] = {f->mt, obj, gcc_jit_context_new_string_literal(j->c, n->kids[0]->name),
                                   now(f, cast(j, expr(f, n->kids[1]), fl ? j->t_f64 : j->t_i64))};
        return now(f, call_imp(f, fl ? IMP_ATTR_FLOAT : IMP_ATTR_INT, 4, args));
    }
    return lng(j, j->t_i64, 0);
}

static gcc_jit_rvalue *call_expr(fgen *f, const ql_node *n)
{
    if (n->a->kind == QL_FIELD)
        return method_call(f, n);
    const qc_sym *s = n->a->sym;
    if (s && (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL))
        return user_call(f, n, s);
    return builtin_call(f, n, n->a->name);
}

static gcc_jit_rvalue *field_expr(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *t = ty(n->a);
    const char *m = n->name;
    if (t->k == QC_STATE) { /* o.field in merge: an array by its address, as the calibrator's own (name_rv) */
        gcc_jit_lvalue *lv = lvalue(f, n);
        return ty(n)->k == QC_ARRAY ? gcc_jit_lvalue_get_address(lv, NULL) : gcc_jit_lvalue_as_rvalue(lv);
    }
    const qc_sym *base = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (base && base->kind == QC_SYM_AFF_IN) { /* x.zero, x.scale in an affine body */
        gcc_jit_rvalue *arr = !strcmp(m, "zero") ? f->aff_zero : f->aff_scale;
        return gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(j->c, NULL, arr, lng(j, j->t_i64, base->index)));
    }
    if (t->k == QC_VALUE) {
        gcc_jit_rvalue *args[2] = {f->mt, expr(f, n->a)};
        int imp = !strcmp(m, "rank") ? IMP_VALUE_RANK : !strcmp(m, "const") ? IMP_VALUE_CONST : IMP_VALUE_PRESENT;
        gcc_jit_rvalue *r = now(f, call_imp(f, imp, 2, args));
        return imp == IMP_VALUE_RANK ? r : cmp(j, GCC_JIT_COMPARISON_NE, r, lng(j, j->t_i64, 0));
    }
    gcc_jit_rvalue *obj = now(f, expr(f, n->a));
    switch (t->k) {
    case QC_TENSOR:
        return gcc_jit_lvalue_as_rvalue(
            gcc_jit_rvalue_dereference_field(obj, NULL, !strcmp(m, "numel") ? j->f_tv_numel : j->f_tv_rank));
    case QC_ARRAY: return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(obj, NULL, j->f_arr_len));
    case QC_HIST: {
        int imp = !strcmp(m, "count") ? IMP_HIST_COUNT : !strcmp(m, "lo") ? IMP_HIST_LO : !strcmp(m, "hi") ? IMP_HIST_HI
                : !strcmp(m, "width") ? IMP_HIST_WIDTH : !strcmp(m, "min") ? IMP_HIST_MIN : !strcmp(m, "max") ? IMP_HIST_MAX
                : IMP_HIST_BINS;
        return now(f, call_imp(f, imp, 1, &obj));
    }
    case QC_QTYPE: {
        static const char *const names[7] = {"bits", "qmin", "qmax", "axis", "signed", "narrow", "symmetric"};
        for (int i = 0; i < 7; i++)
            if (!strcmp(m, names[i])) {
                gcc_jit_rvalue *v = gcc_jit_rvalue_access_field(obj, NULL, j->f_qt[i]);
                return i >= 4 ? cmp(j, GCC_JIT_COMPARISON_NE, v, lng(j, j->t_i64, 0)) : v;
            }
        break;
    }
    case QC_QPARAMS:
        return gcc_jit_rvalue_access_field(obj, NULL, !strcmp(m, "scale") ? j->f_qp_scale : j->f_qp_zero);
    default: break;
    }
    return lng(j, j->t_i64, 0);
}

static gcc_jit_rvalue *expr(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *t = ty(n);
    switch (n->kind) {
    case QL_INT:
        if (qc_is_float(t))
            return dbl(j, jtype(j, t), (double)n->ival);
        return cast(j, lng(j, j->t_i64, (long)n->ival), jtype(j, t));
    case QL_FLOAT: return dbl(j, jtype(j, t), n->fval);
    case QL_BOOL: return gcc_jit_context_new_rvalue_from_int(j->c, j->t_bool, n->ival != 0);
    case QL_NAME: return name_rv(f, n);
    case QL_UNARY: {
        /* a negative literal: fold so that -128 as i8 never overflows */
        int64_t v;
        if (n->op == QL_TOK_MINUS && n->a->kind == QL_INT && qc_is_int(t)) {
            v = n->a->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->a->ival;
            return cast(j, lng(j, j->t_i64, (long)v), jtype(j, t));
        }
        if (n->op == QL_TOK_MINUS && n->a->kind == QL_FLOAT)
            return dbl(j, jtype(j, t), -n->a->fval);
        return unary(f, n);
    }
    case QL_BINARY: return binary(f, n);
    case QL_CALL: return call_expr(f, n);
    case QL_FIELD: return field_expr(f, n);
    case QL_INDEX: return gcc_jit_lvalue_as_rvalue(element(f, n));
    case QL_CAST:
    case QL_SAT: return conversion(f, n);
    default: return lng(j, j->t_i64, 0);
    }
}

static gcc_jit_lvalue *lvalue(fgen *f, const ql_node *n)
{
    if (n->kind == QL_INDEX)
        return element(f, n);
    if (n->kind == QL_FIELD) { /* o.field */
        return state_lvalue(f, f->other, n->sym);
    }
    const qc_sym *s = n->sym;
    if (s->kind == QC_SYM_STATE)
        return state_lvalue(f, f->state, s);
    if (s->kind == QC_SYM_AFF_OUT)
        return f->aff_y;
    return f->locals[s->index];
}

/* ----------------------------------------------------------- statements */

static void stmts(fgen *f, const ql_node *b);

static void do_return(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    if (f->ret_qparams_out) {
        gcc_jit_rvalue *v = now(f, expr(f, n->a));
        gcc_jit_block_add_assignment(cur(f), NULL, f->out, v);
        gcc_jit_block_end_with_void_return(cur(f), NULL);
    } else if (n->a && f->ret != j->t_void) {
        gcc_jit_rvalue *v = now(f, cast(j, expr(f, n->a), f->ret));
        gcc_jit_block_end_with_return(cur(f), NULL, v);
    } else {
        gcc_jit_block_end_with_void_return(cur(f), NULL);
    }
    f->b = NULL;
}

/* Whether e is len(a), a.len or a.numel: the loop's bound of a. */
static const qc_sym *bounded_by(const ql_node *e)
{
    if (e->kind == QL_CALL && e->a->kind == QL_NAME && !strcmp(e->a->name, "len") && e->nkids == 1 &&
        e->kids[0]->kind == QL_NAME)
        return e->kids[0]->sym;
    if (e->kind == QL_FIELD && (!strcmp(e->name, "len") || !strcmp(e->name, "numel")) && e->a->kind == QL_NAME)
        return e->a->sym;
    return NULL;
}

/* ------------------------------------------------------ loop versioning */
/* An innermost `for k in lo .. hi` whose element indices are k plus a loop-invariant offset gets a
 * second copy of its body without those indices' bounds checks. One test before the loop proves
 * every such index in range for the whole trip; when it fails, the checked copy runs and traps
 * where it always did. The copy reads each tensor's data pointer once (a store through u8 may
 * alias the view, so GCC could not hoist the load itself) and burns the trip's fuel in one step:
 * no exit is left in the body, so GCC can vectorize it. The trip is bounded by the tensor's
 * size, so the time limit still holds. */

/* Whether n contains a loop. */
static int has_loop(const ql_node *n)
{
    if (!n)
        return 0;
    if (n->kind == QL_FOR || n->kind == QL_WHILE)
        return 1;
    if (has_loop(n->a) || has_loop(n->b) || has_loop(n->c) || has_loop(n->d))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (has_loop(n->kids[i]))
            return 1;
    return 0;
}

/* Whether n contains node x (a declaration inside the loop body), or assigns the variable s. */
static int contains(const ql_node *n, const ql_node *x, const qc_sym *s)
{
    if (!n)
        return 0;
    if (n == x || (s && n->kind == QL_ASSIGN && n->a->kind == QL_NAME && n->a->sym == s))
        return 1;
    if (contains(n->a, x, s) || contains(n->b, x, s) || contains(n->c, x, s) || contains(n->d, x, s))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (contains(n->kids[i], x, s))
            return 1;
    return 0;
}

/* A name whose value cannot change while the loop runs. */
static int invariant_name(const ql_node *loop, const qc_sym *s)
{
    switch (s->kind) {
    case QC_SYM_PARAM:
    case QC_SYM_CONST: return 1;
    case QC_SYM_LOOP:
    case QC_SYM_LOCAL: return s->decl != loop && !contains(loop->c, s->decl, s->mutable_ ? s : NULL);
    default: return 0;
    }
}

/* An integer expression free of effects and traps whose value cannot change while the loop runs. */
static int invariant(const ql_node *loop, const ql_node *e)
{
    switch (e->kind) {
    case QL_INT: return 1;
    case QL_NAME: return e->sym && invariant_name(loop, e->sym) && qc_is_int(ty(e));
    case QL_BINARY:
        return (e->op == QL_TOK_PLUS || e->op == QL_TOK_MINUS || e->op == QL_TOK_STAR) && qc_is_int(ty(e)) &&
               invariant(loop, e->a) && invariant(loop, e->b);
    case QL_FIELD:
        return (!strcmp(e->name, "numel") || !strcmp(e->name, "len")) && e->a->kind == QL_NAME && e->a->sym &&
               (ty(e->a)->k == QC_TENSOR || ty(e->a)->k == QC_ARRAY) && invariant_name(loop, e->a->sym);
    default: return 0;
    }
}

static gcc_jit_rvalue *wrap_op(jit *j, enum gcc_jit_binary_op op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return cast(j, bin(j, op, j->t_u64, cast(j, a, j->t_u64), cast(j, b, j->t_u64)), j->t_i64);
}

/* e as k * coef + off with coef 0 or 1 (returned; -1: not of that form), off emitted now, before
 * the loop. The body computes e in wrapping i64, so off wraps the same way. */
static int affine_in(fgen *f, const ql_node *loop, const ql_node *e, gcc_jit_rvalue **off)
{
    jit *j = f->j;
    if (ty(e)->k != QC_I64 && ty(e)->k != QC_INTLIT)
        return -1;
    if (e->kind == QL_NAME && e->sym == loop->sym) {
        *off = lng(j, j->t_i64, 0);
        return 1;
    }
    if (invariant(loop, e)) {
        *off = now(f, cast(j, expr(f, e), j->t_i64));
        return 0;
    }
    const qc_sym *s = e->kind == QL_NAME ? e->sym : NULL;
    if (s && s->kind == QC_SYM_LOCAL && !s->mutable_ && s->decl && s->decl->kind == QL_LET && s->decl->b)
        return affine_in(f, loop, s->decl->b, off); /* a let of the body: its initializer */
    if (e->kind == QL_BINARY && (e->op == QL_TOK_PLUS || e->op == QL_TOK_MINUS)) {
        gcc_jit_rvalue *oa, *ob;
        int ca = affine_in(f, loop, e->a, &oa);
        if (ca < 0)
            return -1;
        int cb = affine_in(f, loop, e->b, &ob);
        if (cb < 0 || ca + cb > 1 || (e->op == QL_TOK_MINUS && cb))
            return -1;
        *off = now(f, wrap_op(j, e->op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS : GCC_JIT_BINARY_OP_MINUS, oa, ob));
        return ca + cb;
    }
    return -1;
}

/* The one-dimensional element accesses of body into invariant arrays and tensors. */
static void index_nodes(const ql_node *loop, const ql_node *n, const ql_node **out, int *nout, int cap)
{
    if (!n)
        return;
    if (n->kind == QL_INDEX && n->nkids == 1 && n->a->kind == QL_NAME && n->a->sym &&
        (ty(n->a)->k == QC_TENSOR || ty(n->a)->k == QC_ARRAY) && invariant_name(loop, n->a->sym) && *nout < cap)
        out[(*nout)++] = n;
    const ql_node *sub[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; i++)
        index_nodes(loop, sub[i], out, nout, cap);
    for (int i = 0; i < n->nkids; i++)
        index_nodes(loop, n->kids[i], out, nout, cap);
}

static gcc_jit_rvalue *and_rv(jit *j, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return a ? bin(j, GCC_JIT_BINARY_OP_LOGICAL_AND, j->t_bool, a, b) : b;
}

/* Emits the test that proves the body's affine indices in range for k in lo .. hi, and records
 * them (with their data pointers, for the proven copy to read once) in f->hoist. Returns the test, or NULL when no
 * index depends on k (nothing bounds the trip then). */
static gcc_jit_rvalue *prove_indices(fgen *f, const ql_node *loop, gcc_jit_rvalue *lo, gcc_jit_rvalue *hi)
{
    jit *j = f->j;
    const ql_node *body = loop->c;
    const qc_sym *k = loop->sym;
    if (k->type->k != QC_I64 || has_loop(body))
        return NULL;
    const ql_node *idx[QRL_JIT_MAX_HOIST];
    int n = 0, with_k = 0;
    index_nodes(loop, body, idx, &n, QRL_JIT_MAX_HOIST);
    gcc_jit_rvalue *ok = NULL;
    gcc_jit_rvalue *zero = lng(j, j->t_i64, 0);
    f->nhoist = 0;
    for (int i = 0; i < n; i++) {
        gcc_jit_rvalue *off;
        int coef = affine_in(f, loop, idx[i]->kids[0], &off);
        if (coef < 0)
            continue;
        const qc_type *bt = ty(idx[i]->a);
        gcc_jit_rvalue *base = now(f, expr(f, idx[i]->a));
        gcc_jit_rvalue *size = now(f, gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(
                                          base, NULL, bt->k == QC_ARRAY ? j->f_arr_len : j->f_tv_numel)));
        if (coef) { /* 0 <= off, off <= size, 0 <= lo, hi <= size - off: off + k in [0, size), no overflow */
            ok = and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_GE, off, zero));
            ok = and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_LE, off, size));
            ok = and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_GE, lo, zero));
            ok = and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_LE, hi, bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, size, off)));
            with_k = 1;
        } else {
            ok = and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_LT, cast(j, off, j->t_u64), cast(j, size, j->t_u64)));
        }
        gcc_jit_type *pt = gcc_jit_type_get_pointer(jtype(j, bt->elem));
        gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(
            gcc_jit_rvalue_dereference_field(base, NULL, bt->k == QC_ARRAY ? j->f_arr_data : j->f_tv_data));
        f->hoist[f->nhoist].at = idx[i];
        f->hoist[f->nhoist].ptr = temp(f, pt);
        f->hoist[f->nhoist++].data = cast(j, data, pt);
    }
    if (!with_k) {
        f->nhoist = 0;
        return NULL;
    }
    return and_rv(j, ok, cmp(j, GCC_JIT_COMPARISON_LT, lo, hi));
}

static void stmt(fgen *f, const ql_node *n);

/* The loop proper, from iv's current value: test, body, step. The proven copy (fast) burns no
 * fuel per iteration: its caller burned the whole trip. */
static void loop_copy(fgen *f, const ql_node *n, gcc_jit_rvalue *hi, int fast)
{
    jit *j = f->j;
    const qc_sym *v = n->sym;
    gcc_jit_type *t = jtype(j, v->type);
    gcc_jit_lvalue *iv = f->locals[v->index];
    gcc_jit_block *test = new_block(f), *body = new_block(f), *step = new_block(f), *done = new_block(f);
    gcc_jit_block_end_with_jump(cur(f), NULL, test);
    gcc_jit_block_end_with_conditional(test, NULL, cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(iv), hi),
                                       body, done);
    /* i in lo .. len(a) with lo a non-negative literal: a[i] needs no check */
    int64_t lo;
    const qc_sym *arr = bounded_by(n->b);
    int pushed = 0;
    if (arr && n->a->kind == QL_INT && (lo = (int64_t)n->a->ival) >= 0 && f->nbound < 256) {
        f->loop_var[f->nbound] = v;
        f->loop_arr[f->nbound++] = arr;
        pushed = 1;
    }
    f->brk[f->nloops] = done;
    f->cont[f->nloops++] = step;
    f->b = body;
    stmts(f, n->c);
    if (f->b)
        gcc_jit_block_end_with_jump(f->b, NULL, step);
    gcc_jit_block_add_assignment(step, NULL, iv,
                                 bin(j, GCC_JIT_BINARY_OP_PLUS, t, gcc_jit_lvalue_as_rvalue(iv), gcc_jit_context_one(j->c, t)));
    f->b = step;
    if (!fast)
        burn_fuel(f, n, lng(j, j->t_i64, 1));
    gcc_jit_block_end_with_jump(cur(f), NULL, test);
    f->nloops--;
    f->nbound -= pushed;
    f->b = done;
}

/* ---- blocks with an overlapping last one ----
 * A proven loop whose iterations can run again without changing what it computes runs in blocks
 * of QRL_JIT_BLOCK iterations, the last block moved back to end at hi (overlapping the one
 * before): each block is a fixed-trip loop GCC vectorizes whole, with no scalar remainder. The
 * remainder is what costs in an epilogue's rows of 49 or 196 elements: in scalar code GCC turns
 * the clamps into branches on the data, mispredicted half the time. Running again is harmless
 * when the body only declares lets, assigns its own locals and stores `t[k + off] = ...` into a
 * tensor or array it never reads (nor any other of the same element type, which could be the
 * same memory), and calls nothing that could write memory. */
#define QRL_JIT_BLOCK 32
/* Longer trips run the plain copy: its scalar remainder is a small part of them, and the blocks
 * measured slower there (rows of 1024: 1.6x). */
#define QRL_JIT_BLOCK_TRIPS 256

static const char *const pure_builtins[] = {"min", "max", "abs", "clamp", "select", "floor", "ceil", "trunc",
                                            "round_even", "round_away", "round_up", "sqrt", "exp", "log", "log2",
                                            "tanh", "erf", "pow", "isnan", "isinf", "len"};

typedef struct overlap_scan {
    const ql_node *body;
    const qc_sym *stored[8]; /* the tensors and arrays the body stores into */
    int nstored, ok;
} overlap_scan;

static const qc_type *elem_of(const ql_node *e)
{
    const qc_type *t = ty(e);
    return t->k == QC_TENSOR || t->k == QC_ARRAY ? t->elem : NULL;
}

/* Expressions: calls only to pure builtins, `x.dim(i)` and fns of scalars (they cannot reach memory). */
static void overlap_expr(overlap_scan *o, const ql_node *e)
{
    if (!e || !o->ok)
        return;
    if (e->kind == QL_CALL) {
        const qc_sym *s = e->a->sym;
        int pure = 0;
        if (e->a->kind == QL_FIELD)
            pure = !strcmp(e->a->name, "dim");
        else if (s && s->kind == QC_SYM_FN) {
            pure = 1;
            const ql_node *ps = s->decl->a;
            for (int i = 0; ps && i < ps->nkids; i++)
                if (ps->kids[i]->type->k == QC_TENSOR || ps->kids[i]->type->k == QC_ARRAY ||
                    ps->kids[i]->type->k == QC_HIST)
                    pure = 0;
        } else if (!s && e->a->kind == QL_NAME)
            for (size_t i = 0; i < sizeof pure_builtins / sizeof pure_builtins[0]; i++)
                pure |= !strcmp(e->a->name, pure_builtins[i]);
        if (!pure) {
            o->ok = 0;
            return;
        }
    }
    overlap_expr(o, e->a);
    overlap_expr(o, e->b);
    overlap_expr(o, e->c);
    overlap_expr(o, e->d);
    for (int i = 0; i < e->nkids; i++)
        overlap_expr(o, e->kids[i]);
}

static void overlap_stmts(overlap_scan *o, const ql_node *loop, const ql_node *b);

static void overlap_stmt(overlap_scan *o, const ql_node *loop, const ql_node *st)
{
    switch (st->kind) {
    case QL_LET: overlap_expr(o, st->b); break;
    case QL_BLOCK: overlap_stmts(o, loop, st); break;
    case QL_IF:
        overlap_expr(o, st->a);
        overlap_stmts(o, loop, st->b);
        if (st->c)
            overlap_stmt(o, loop, st->c);
        break;
    case QL_ASSIGN: {
        const ql_node *t = st->a;
        const qc_sym *ts = t->sym, *as = t->kind == QL_INDEX ? t->a->sym : NULL;
        overlap_expr(o, st->b);
        if (t->kind == QL_NAME && ts && ts->decl && contains(o->body, ts->decl, NULL))
            break; /* a local of the body: fresh every iteration */
        if (st->op != QL_TOK_ASSIGN || t->kind != QL_INDEX || t->nkids != 1 || t->a->kind != QL_NAME || !as ||
            !elem_of(t->a) || !invariant_name(loop, as) || o->nstored == 8) {
            o->ok = 0;
            break;
        }
        overlap_expr(o, t->kids[0]);
        o->stored[o->nstored++] = as;
        break;
    }
    default: o->ok = 0; break;
    }
}

static void overlap_stmts(overlap_scan *o, const ql_node *loop, const ql_node *b)
{
    for (int i = 0; i < b->nkids && o->ok; i++)
        overlap_stmt(o, loop, b->kids[i]);
}

/* Whether e reads a stored tensor or one of its element type; skip is the store target itself. */
static int reads_stored(const overlap_scan *o, const ql_node *e, const ql_node *skip)
{
    if (!e)
        return 0;
    if (e != skip && e->kind == QL_NAME && e->sym && elem_of(e))
        for (int i = 0; i < o->nstored; i++)
            if ((const qc_sym *)e->sym == o->stored[i] || elem_of(e)->k == o->stored[i]->type->elem->k)
                return 1;
    if (reads_stored(o, e->a, skip) || reads_stored(o, e->b, skip) || reads_stored(o, e->c, skip) ||
        reads_stored(o, e->d, skip))
        return 1;
    for (int i = 0; i < e->nkids; i++)
        if (reads_stored(o, e->kids[i], skip))
            return 1;
    return 0;
}

/* Whether no stored tensor (or one that could be its memory) is read anywhere in the body. */
static int stores_unread(const overlap_scan *o, const ql_node *b)
{
    for (int i = 0; i < b->nkids; i++) {
        const ql_node *st = b->kids[i];
        const ql_node *skip = st->kind == QL_ASSIGN && st->a->kind == QL_INDEX ? st->a->a : NULL;
        if (reads_stored(o, st, skip))
            return 0;
    }
    return 1;
}

static int overlap_ok(const ql_node *loop)
{
    overlap_scan o = {.body = loop->c, .ok = 1};
    overlap_stmts(&o, loop, loop->c);
    return o.ok && o.nstored > 0 && stores_unread(&o, loop->c);
}

/* The proven copy in blocks of QRL_JIT_BLOCK, the last moved back to end at hi (hi - lo >= the block). */
static void block_copy(fgen *f, const ql_node *n, gcc_jit_rvalue *lo, gcc_jit_rvalue *hi)
{
    jit *j = f->j;
    gcc_jit_type *t = j->t_i64;
    gcc_jit_lvalue *iv = f->locals[((const qc_sym *)n->sym)->index], *kb = temp(f, t), *k0 = temp(f, t), *kk = temp(f, t);
    gcc_jit_rvalue *len = lng(j, t, QRL_JIT_BLOCK), *last = now(f, bin(j, GCC_JIT_BINARY_OP_MINUS, t, hi, len));
    gcc_jit_block_add_assignment(cur(f), NULL, kb, lo);
    gcc_jit_block *otest = new_block(f), *ohead = new_block(f), *itest = new_block(f), *ibody = new_block(f),
                  *ostep = new_block(f), *done = new_block(f);
    gcc_jit_block_end_with_jump(cur(f), NULL, otest);
    gcc_jit_block_end_with_conditional(otest, NULL, cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(kb), hi),
                                       ohead, done);
    f->b = ohead;
    gcc_jit_rvalue *b0 = gcc_jit_lvalue_as_rvalue(kb);
    gcc_jit_block_add_assignment(cur(f), NULL, k0, select_rv(f, cmp(j, GCC_JIT_COMPARISON_LT, b0, last), b0, last, t));
    gcc_jit_block_add_assignment(cur(f), NULL, kk, lng(j, t, 0));
    gcc_jit_block_end_with_jump(cur(f), NULL, itest);
    gcc_jit_block_end_with_conditional(itest, NULL, cmp(j, GCC_JIT_COMPARISON_LT, gcc_jit_lvalue_as_rvalue(kk), len),
                                       ibody, ostep);
    f->b = ibody;
    gcc_jit_block_add_assignment(ibody, NULL, iv,
                                 bin(j, GCC_JIT_BINARY_OP_PLUS, t, gcc_jit_lvalue_as_rvalue(k0), gcc_jit_lvalue_as_rvalue(kk)));
    f->brk[f->nloops] = done; /* (the body has no break or continue) */
    f->cont[f->nloops++] = ostep;
    stmts(f, n->c);
    f->nloops--;
    gcc_jit_block_add_assignment_op(cur(f), NULL, kk, GCC_JIT_BINARY_OP_PLUS, lng(j, t, 1));
    gcc_jit_block_end_with_jump(cur(f), NULL, itest);
    gcc_jit_block_add_assignment_op(ostep, NULL, kb, GCC_JIT_BINARY_OP_PLUS, len);
    gcc_jit_block_end_with_jump(ostep, NULL, otest);
    f->b = done;
}

static void for_loop(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_sym *v = n->sym;
    gcc_jit_type *t = jtype(j, v->type);
    gcc_jit_rvalue *lo = now(f, cast(j, expr(f, n->a), t));
    gcc_jit_block_add_assignment(cur(f), NULL, f->locals[v->index], lo);
    gcc_jit_rvalue *hi = now(f, cast(j, expr(f, n->b), t));
    gcc_jit_rvalue *proven = prove_indices(f, n, lo, hi);
    if (!proven) {
        loop_copy(f, n, hi, 0);
        return;
    }
    gcc_jit_block *fast = new_block(f), *slow = new_block(f), *join = new_block(f);
    gcc_jit_block_end_with_conditional(cur(f), NULL, proven, fast, slow);
    f->b = fast;
    for (int h = 0; h < f->nhoist; h++)
        gcc_jit_block_add_assignment(fast, NULL, f->hoist[h].ptr, f->hoist[h].data);
    burn_fuel(f, n, bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, hi, lo));
    if (overlap_ok(n)) { /* blocks for short trips that hold one, else the plain copy */
        gcc_jit_block *blocks = new_block(f), *plain = new_block(f), *after = new_block(f);
        gcc_jit_rvalue *trip = now(f, bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, hi, lo));
        gcc_jit_block_end_with_conditional(
            cur(f), NULL,
            and_rv(j, cmp(j, GCC_JIT_COMPARISON_GE, trip, lng(j, j->t_i64, QRL_JIT_BLOCK)),
                   cmp(j, GCC_JIT_COMPARISON_LT, trip, lng(j, j->t_i64, QRL_JIT_BLOCK_TRIPS))),
            blocks, plain);
        f->b = blocks;
        block_copy(f, n, lo, hi);
        gcc_jit_block_end_with_jump(cur(f), NULL, after);
        f->b = plain;
        gcc_jit_block_add_assignment(plain, NULL, f->locals[((const qc_sym *)n->sym)->index], lo);
        loop_copy(f, n, hi, 1);
        gcc_jit_block_end_with_jump(cur(f), NULL, after);
        f->b = after;
    } else
        loop_copy(f, n, hi, 1);
    f->nhoist = 0;
    gcc_jit_block_end_with_jump(cur(f), NULL, join);
    f->b = slow;
    loop_copy(f, n, hi, 0);
    gcc_jit_block_end_with_jump(cur(f), NULL, join);
    f->b = join;
}

static void stmt(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    switch (n->kind) {
    case QL_LET: {
        const qc_sym *s = n->sym;
        gcc_jit_rvalue *v = cast(j, expr(f, n->b), jtype(j, s->type));
        gcc_jit_block_add_assignment(cur(f), NULL, f->locals[s->index], v);
        break;
    }
    case QL_ASSIGN: {
        const qc_type *t = ty(n->a);
        if (n->op == QL_TOK_ASSIGN) {
            gcc_jit_rvalue *v = now(f, cast(j, expr(f, n->b), jtype(j, t)));
            gcc_jit_block_add_assignment(cur(f), NULL, lvalue(f, n->a), v);
        } else {
            gcc_jit_lvalue *lv = lvalue(f, n->a);
            gcc_jit_rvalue *old = now(f, gcc_jit_lvalue_as_rvalue(lv));
            gcc_jit_rvalue *v = now(f, cast(j, expr(f, n->b), jtype(j, t)));
            ql_tok op = n->op == QL_TOK_PLUSEQ ? QL_TOK_PLUS : n->op == QL_TOK_MINUSEQ ? QL_TOK_MINUS
                      : n->op == QL_TOK_STAREQ ? QL_TOK_STAR : QL_TOK_SLASH;
            gcc_jit_rvalue *r = now(f, arith(f, op, t, old, v, n));
            gcc_jit_block_add_assignment(cur(f), NULL, lv, r);
        }
        break;
    }
    case QL_EXPR_STMT: {
        gcc_jit_rvalue *v = expr(f, n->a);
        (void)v;
        break;
    }
    case QL_IF: {
        gcc_jit_rvalue *c = now(f, expr(f, n->a));
        gcc_jit_block *yes = new_block(f), *no = new_block(f), *join = new_block(f);
        gcc_jit_block_end_with_conditional(cur(f), NULL, c, yes, n->c ? no : join);
        f->b = yes;
        stmts(f, n->b);
        if (f->b)
            gcc_jit_block_end_with_jump(f->b, NULL, join);
        if (n->c) {
            f->b = no;
            if (n->c->kind == QL_IF)
                stmt(f, n->c);
            else
                stmts(f, n->c);
            if (f->b)
                gcc_jit_block_end_with_jump(f->b, NULL, join);
        } else {
            gcc_jit_block_end_with_jump(no, NULL, join);
        }
        f->b = join;
        break;
    }
    case QL_WHILE: {
        gcc_jit_block *test = new_block(f), *body = new_block(f), *done = new_block(f);
        gcc_jit_block_end_with_jump(cur(f), NULL, test);
        f->b = test;
        burn_fuel(f, n, lng(j, j->t_i64, 1));
        gcc_jit_rvalue *c = now(f, expr(f, n->a));
        gcc_jit_block_end_with_conditional(cur(f), NULL, c, body, done);
        f->brk[f->nloops] = done;
        f->cont[f->nloops++] = test;
        f->b = body;
        stmts(f, n->c);
        if (f->b)
            gcc_jit_block_end_with_jump(f->b, NULL, test);
        f->nloops--;
        f->b = done;
        break;
    }
    case QL_FOR: for_loop(f, n); break;
    case QL_RETURN: do_return(f, n); break;
    case QL_BREAK:
        gcc_jit_block_end_with_jump(cur(f), NULL, f->brk[f->nloops - 1]);
        f->b = NULL;
        break;
    case QL_CONTINUE:
        gcc_jit_block_end_with_jump(cur(f), NULL, f->cont[f->nloops - 1]);
        f->b = NULL;
        break;
    case QL_BLOCK: stmts(f, n); break;
    default: break;
    }
}

static void stmts(fgen *f, const ql_node *b)
{
    for (int i = 0; i < b->nkids; i++)
        stmt(f, b->kids[i]);
}

/* Locals: one per let/var/for symbol of the body, by sym->index. */
static void collect_locals(fgen *f, const ql_node *n)
{
    if (!n)
        return;
    if ((n->kind == QL_LET || n->kind == QL_FOR) && n->sym) {
        const qc_sym *s = n->sym;
        if (s->index < f->nlocals && !f->locals[s->index]) {
            char name[300];
            snprintf(name, sizeof name, "%s_%d", s->name, s->index);
            f->locals[s->index] = gcc_jit_function_new_local(f->fn, NULL, jtype(f->j, s->type), name);
        }
    }
    collect_locals(f, n->a);
    collect_locals(f, n->b);
    collect_locals(f, n->c);
    for (int i = 0; i < n->nkids; i++)
        collect_locals(f, n->kids[i]);
}

static int count_locals(const ql_node *n)
{
    if (!n)
        return 0;
    int m = 0;
    if ((n->kind == QL_LET || n->kind == QL_FOR) && n->sym)
        m = ((const qc_sym *)n->sym)->index + 1;
    const ql_node *sub[3] = {n->a, n->b, n->c};
    for (int i = 0; i < 3; i++) {
        int k = count_locals(sub[i]);
        m = k > m ? k : m;
    }
    for (int i = 0; i < n->nkids; i++) {
        int k = count_locals(n->kids[i]);
        m = k > m ? k : m;
    }
    return m;
}

static void begin_body(fgen *f, const ql_node *body)
{
    f->nlocals = count_locals(body);
    f->locals = calloc((size_t)f->nlocals + 1, sizeof *f->locals);
    collect_locals(f, body);
    f->b = new_block(f);
}

static void end_body(fgen *f)
{
    if (f->b)
        return_default(f, f->b);
    f->b = NULL;
    free(f->locals);
    f->locals = NULL;
}

/* ----------------------------------------------------------------- items */

/* A C symbol for item idx: its name, but a generic's instance ("f<u8>")
 * becomes f_u8_, numbered so that no other item's name can clash. */
static const char *c_name(const qc_sym *s, int idx, char *buf, int size)
{
    int n = snprintf(buf, (size_t)size, "%s", s->name), plain = 1;
    for (int i = 0; i < n && i < size - 1; i++)
        if (!(buf[i] == '_' || (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'z') ||
              (buf[i] >= 'A' && buf[i] <= 'Z')))
            buf[i] = '_', plain = 0;
    if (!plain && n < size - 16)
        snprintf(buf + n, (size_t)(size - n), "%d", idx);
    return buf;
}

/* "f64(f64,qtype)" */
static char *signature(const qc_sym *s)
{
    char *buf = calloc(1, 1024);
    if (!buf)
        return NULL;
    const ql_node *ps = s->decl->a;
    char tb[64];
    int len = snprintf(buf, 1024, "%s(", s->decl->b ? qc_type_name(s->decl->b->type, tb, sizeof tb) : "void");
    for (int i = 0; ps && i < ps->nkids && len < 1000; i++)
        len += snprintf(buf + len, 1024 - (size_t)len, "%s%s", i ? "," : "", qc_type_name(ps->kids[i]->type, tb, sizeof tb));
    snprintf(buf + len, 1024 - (size_t)len, ")");
    return buf;
}

static void declare_fn(jit *j, int idx)
{
    const qc_sym *s = j->u->items[idx];
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    gcc_jit_param **params = calloc((size_t)np + 1, sizeof *params);
    params[0] = gcc_jit_context_new_param(j->c, NULL, j->p_rt, "rt");
    for (int i = 0; i < np; i++)
        params[i + 1] = gcc_jit_context_new_param(j->c, NULL, jtype(j, ps->kids[i]->type), ps->kids[i]->name);
    char name[300], cn[280];
    snprintf(name, sizeof name, "qrl_%s_%s", s->kind == QC_SYM_KERNEL ? "kernel" : "fn", c_name(s, idx, cn, sizeof cn));
    j->fns[idx] = gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_INTERNAL,
                                               s->decl->b ? jtype(j, s->decl->b->type) : j->t_void, name, np + 1,
                                               params, 0);
    free(params);
}

static void define_fn(jit *j, int idx)
{
    const qc_sym *s = j->u->items[idx];
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    fgen f = {.j = j, .fn = j->fns[idx], .file = s->file->src->path};
    gcc_jit_param *fparams[QC_MAX_PARAMS];
    for (int i = 0; i < np && i < QC_MAX_PARAMS; i++)
        fparams[i] = gcc_jit_function_get_param(f.fn, i + 1);
    f.fparams = fparams;
    f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
    f.ret = s->decl->b ? jtype(j, s->decl->b->type) : j->t_void;
    begin_body(&f, s->decl->c);
    stmts(&f, s->decl->c);
    end_body(&f);
}

/* The generic entry of kernel idx, for the runtime to call with arguments it
 * assembles at run time: void qrl_call_K(qrl_rt *rt, void **args). args[i]
 * points at parameter i's value (a scalar) or is the parameter itself (a
 * tensor view or an array, which kernels take by pointer). */
static gcc_jit_function *kernel_thunk(jit *j, int idx)
{
    const qc_sym *s = j->u->items[idx];
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    char name[300], cn[280];
    snprintf(name, sizeof name, "qrl_call_%s", c_name(s, idx, cn, sizeof cn));
    gcc_jit_type *pvoidp = gcc_jit_type_get_pointer(j->t_voidp);
    gcc_jit_param *p[2] = {gcc_jit_context_new_param(j->c, NULL, j->p_rt, "rt"),
                           gcc_jit_context_new_param(j->c, NULL, pvoidp, "args")};
    gcc_jit_function *fn = gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_INTERNAL, j->t_void, name, 2, p, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(fn, NULL);
    gcc_jit_rvalue **args = calloc((size_t)np + 1, sizeof *args);
    if (!args) {
        gcc_jit_block_end_with_void_return(b, NULL);
        return fn;
    }
    args[0] = gcc_jit_param_as_rvalue(p[0]);
    for (int i = 0; i < np; i++) {
        gcc_jit_rvalue *a = gcc_jit_lvalue_as_rvalue(
            gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_param_as_rvalue(p[1]), lng(j, j->t_i64, i)));
        gcc_jit_type *t = jtype(j, ps->kids[i]->type);
        if (t == j->p_tview || t == j->p_array)
            args[i + 1] = cast(j, a, t);
        else
            args[i + 1] = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference(cast(j, a, gcc_jit_type_get_pointer(t)), NULL));
    }
    gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call(j->c, NULL, j->fns[idx], np + 1, args));
    gcc_jit_block_end_with_void_return(b, NULL);
    free(args);
    return fn;
}

static gcc_jit_function *new_fn(jit *j, const char *name, gcc_jit_type *ret, int n, gcc_jit_type **types,
                                const char **names)
{
    gcc_jit_param *p[8];
    for (int i = 0; i < n; i++)
        p[i] = gcc_jit_context_new_param(j->c, NULL, types[i], names[i]);
    return gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_INTERNAL, ret, name, n, p, 0);
}

typedef struct cal_fns {
    gcc_jit_function *defaults, *init, *observe, *merge, *solve;
} cal_fns;

static void calibrator(jit *j, const qc_sym *s, cal_fns *out)
{
    const ql_node *cal = s->decl;
    char name[300];
    gcc_jit_type *pp = gcc_jit_type_get_pointer(j->t_i64);
    /* defaults(rt, params) */
    {
        snprintf(name, sizeof name, "qrl_cal_%s_defaults", s->name);
        gcc_jit_type *ts[2] = {j->p_rt, pp};
        const char *ns[2] = {"rt", "params"};
        fgen f = {.j = j, .file = s->file->src->path, .cal = cal, .ret = j->t_void};
        f.fn = out->defaults = new_fn(j, name, j->t_void, 2, ts, ns);
        f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
        f.params = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        f.b = new_block(&f);
        for (int i = 0; cal->a && i < cal->a->nkids; i++) {
            const ql_node *p = cal->a->kids[i];
            if (!p->b)
                continue;
            int fl = qc_is_float(p->type);
            gcc_jit_type *st = fl ? j->t_f64 : j->t_i64;
            gcc_jit_lvalue *dst = gcc_jit_context_new_array_access(j->c, NULL, cast(j, f.params, gcc_jit_type_get_pointer(st)),
                                                                   lng(j, j->t_i64, i));
            gcc_jit_rvalue *v = expr(&f, p->b);
            gcc_jit_block_add_assignment(cur(&f), NULL, dst, cast(j, v, st));
        }
        end_body(&f);
    }
    /* init(rt, state, params) */
    {
        snprintf(name, sizeof name, "qrl_cal_%s_init", s->name);
        gcc_jit_type *ts[3] = {j->p_rt, j->t_voidp, pp};
        const char *ns[3] = {"rt", "state", "params"};
        fgen f = {.j = j, .file = s->file->src->path, .cal = cal, .ret = j->t_void};
        f.fn = out->init = new_fn(j, name, j->t_void, 3, ts, ns);
        f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
        f.state = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        f.params = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
        f.b = new_block(&f);
        for (int i = 0; i < cal->nkids; i++) {
            const ql_node *k = cal->kids[i];
            if (k->kind != QL_STATE)
                continue;
            const qc_sym *st = k->sym;
            gcc_jit_lvalue *lv = state_lvalue(&f, f.state, st);
            if (st->type->k == QC_HIST) {
                gcc_jit_rvalue *bins = now(&f, cast(j, expr(&f, k->a->kids[0]), j->t_i64));
                gcc_jit_rvalue *args[2] = {f.rt, bins};
                gcc_jit_block_add_assignment(cur(&f), NULL, lv, now(&f, call_imp(&f, IMP_HIST_NEW, 2, args)));
                check_failed(&f);
            } else if (st->type->k == QC_ARRAY) {
                gcc_jit_rvalue *len = now(&f, cast(j, expr(&f, k->a->b), j->t_i64));
                check(&f, cmp(j, GCC_JIT_COMPARISON_GT, cast(j, len, j->t_u64), lng(j, j->t_u64, 1L << 28)),
                      QRL_TRAP_NOMEM, k, len, NULL);
                int es = qc_type_bits(st->type->elem) / 8;
                gcc_jit_rvalue *args[2] = {f.rt, bin(j, GCC_JIT_BINARY_OP_MULT, j->t_i64, len, lng(j, j->t_i64, es))};
                gcc_jit_rvalue *mem = now(&f, call_imp(&f, IMP_STATE_ALLOC, 2, args));
                check_failed(&f);
                gcc_jit_block_add_assignment(cur(&f), NULL, gcc_jit_lvalue_access_field(lv, NULL, j->f_arr_data), mem);
                gcc_jit_block_add_assignment(cur(&f), NULL, gcc_jit_lvalue_access_field(lv, NULL, j->f_arr_len), len);
            } else if (k->b) {
                gcc_jit_block_add_assignment(cur(&f), NULL, lv, cast(j, expr(&f, k->b), jtype(j, st->type)));
            }
        }
        end_body(&f);
    }
    for (int i = 0; i < cal->nkids; i++) {
        const ql_node *k = cal->kids[i];
        if (k->kind == QL_OBSERVE) {
            snprintf(name, sizeof name, "qrl_cal_%s_observe", s->name);
            gcc_jit_type *ts[4] = {j->p_rt, j->t_voidp, pp, j->p_tview};
            const char *ns[4] = {"rt", "state", "params", "x"};
            fgen f = {.j = j, .file = s->file->src->path, .cal = cal, .ret = j->t_void};
            f.fn = out->observe = new_fn(j, name, j->t_void, 4, ts, ns);
            f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
            f.state = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            f.params = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
            gcc_jit_param *xp = gcc_jit_function_get_param(f.fn, 3);
            f.fparams = &xp;
            begin_body(&f, k->c);
            stmts(&f, k->c);
            end_body(&f);
        } else if (k->kind == QL_MERGE) {
            snprintf(name, sizeof name, "qrl_cal_%s_merge", s->name);
            gcc_jit_type *ts[4] = {j->p_rt, j->t_voidp, j->t_voidp, pp};
            const char *ns[4] = {"rt", "state", "other", "params"};
            fgen f = {.j = j, .file = s->file->src->path, .cal = cal, .ret = j->t_void};
            f.fn = out->merge = new_fn(j, name, j->t_void, 4, ts, ns);
            f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
            f.state = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            f.other = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
            f.params = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3));
            begin_body(&f, k->c);
            stmts(&f, k->c);
            end_body(&f);
        } else if (k->kind == QL_SOLVE) {
            snprintf(name, sizeof name, "qrl_cal_%s_solve", s->name);
            gcc_jit_type *ts[5] = {j->p_rt, j->t_voidp, pp, j->p_qtype, j->p_qparams};
            const char *ns[5] = {"rt", "state", "params", "t", "out"};
            fgen f = {.j = j, .file = s->file->src->path, .cal = cal, .ret = j->t_void, .ret_qparams_out = 1};
            f.fn = out->solve = new_fn(j, name, j->t_void, 5, ts, ns);
            f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
            f.state = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            f.params = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
            f.out = gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 4)), NULL);
            begin_body(&f, k->c);
            /* solve's t, copied once into a local of the struct type */
            gcc_jit_lvalue *tl = gcc_jit_function_new_local(f.fn, NULL, j->t_qtype, "t_value");
            gcc_jit_block_add_assignment(f.b, NULL, tl,
                                         gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference(
                                             gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3)), NULL)));
            f.qt = gcc_jit_lvalue_as_rvalue(tl);
            stmts(&f, k->c);
            end_body(&f);
        }
    }
}

/* ------------------------------------------- patterns, affine rules, recipes */

typedef struct item_fns {
    gcc_jit_function *where, *consts;               /* patterns */
    gcc_jit_function *qparams, *elem, *table;        /* affine rules */
    gcc_jit_function *fallback, *args[16];           /* recipes: args per setting (in order; at most 8) */
} item_fns;

static fgen fn_begin(jit *j, const qc_sym *s, const char *name, gcc_jit_type *ret, int n, gcc_jit_type **types,
                     const char **names)
{
    fgen f = {.j = j, .file = s->file->src->path, .ret = ret};
    f.fn = new_fn(j, name, ret, n, types, names);
    f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
    f.b = new_block(&f);
    return f;
}

static void pattern_fns(jit *j, const qc_sym *s, item_fns *out)
{
    const ql_node *p = s->decl;
    char name[300];
    gcc_jit_type *ts[3] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_f64)};
    const char *ns[3] = {"rt", "mt", "out"};
    int npred = 0;
    for (int i = 0; i < p->nkids; i++) {
        const ql_node *k = p->kids[i];
        npred += k->kind == QL_WHERE;
        for (int b = 0; k->kind == QL_MATCH && b < k->nkids; b++)
            npred += k->kids[b]->a != NULL;
    }
    if (npred) {
        snprintf(name, sizeof name, "qrl_pattern_%s_where", s->name);
        fgen f = fn_begin(j, s, name, j->t_i64, 2, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        for (int i = 0; i < p->nkids; i++) {
            const ql_node *k = p->kids[i];
            const ql_node *preds[64];
            int n = 0;
            if (k->kind == QL_WHERE)
                preds[n++] = k->a;
            for (int b = 0; k->kind == QL_MATCH && b < k->nkids && n < 64; b++)
                if (k->kids[b]->a)
                    preds[n++] = k->kids[b]->a;
            for (int q = 0; q < n; q++) {
                gcc_jit_rvalue *c = now(&f, expr(&f, preds[q]));
                gcc_jit_block *no = new_block(&f), *yes = new_block(&f);
                gcc_jit_block_end_with_conditional(cur(&f), NULL, c, yes, no);
                gcc_jit_block_end_with_return(no, NULL, lng(j, j->t_i64, 0));
                f.b = yes;
            }
        }
        gcc_jit_block_end_with_return(cur(&f), NULL, lng(j, j->t_i64, 1));
        out->where = f.fn;
    }
    int nlower = 0;
    for (int i = 0; i < p->nkids; i++)
        nlower += p->kids[i]->kind == QL_LOWER;
    if (nlower) { /* the constant arguments of every lower clause, in order */
        snprintf(name, sizeof name, "qrl_pattern_%s_consts", s->name);
        fgen f = fn_begin(j, s, name, j->t_void, 3, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        gcc_jit_rvalue *o = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
        int k = 0;
        for (int li = 0; li < p->nkids; li++) {
        if (p->kids[li]->kind != QL_LOWER)
            continue;
        const ql_node *cl = p->kids[li]->a;
        for (int a = 0; a < cl->nkids; a++) {
            const ql_node *e = cl->kids[a]->kind == QL_NAMED_ARG ? cl->kids[a]->a : cl->kids[a];
            if (e->kind == QL_NAME && e->sym && ((const qc_sym *)e->sym)->kind == QC_SYM_VALUE)
                continue;
            gcc_jit_block_add_assignment(cur(&f), NULL, gcc_jit_context_new_array_access(j->c, NULL, o, lng(j, j->t_i64, k++)),
                                         to_f64(j, expr(&f, e)));
        }
        }
        gcc_jit_block_end_with_void_return(cur(&f), NULL);
        out->consts = f.fn;
    }
}

/* An affine rule's functions all take the rule's node as a match (inputs, output; attributes at v = -1). */
static void affine_fns(jit *j, const qc_sym *s, item_fns *out)
{
    const ql_node *n = s->decl;
    char name[300];
    /* one op may have several rules: numbered in the order they are compiled */
    char id[260];
    snprintf(id, sizeof id, "%s_%d", s->name, j->naffine++);
    if (n->b) {
        snprintf(name, sizeof name, "qrl_affine_%s_where", id);
        gcc_jit_type *ts[2] = {j->p_rt, j->t_voidp};
        const char *ns[2] = {"rt", "mt"};
        fgen f = fn_begin(j, s, name, j->t_i64, 2, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        gcc_jit_rvalue *c = now(&f, expr(&f, n->b));
        gcc_jit_block_end_with_return(cur(&f), NULL, cast(j, c, j->t_i64));
        out->where = f.fn;
    }
    if (n->a->kind == QL_AFF_FIXED) {
        snprintf(name, sizeof name, "qrl_affine_%s_qparams", id);
        gcc_jit_type *ts[5] = {j->p_rt, j->t_voidp, j->p_qtype, gcc_jit_type_get_pointer(j->t_f64),
                               gcc_jit_type_get_pointer(j->t_i64)};
        const char *ns[5] = {"rt", "mt", "t", "scale", "zero"};
        fgen f = fn_begin(j, s, name, j->t_void, 5, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        gcc_jit_rvalue *sc, *zp;
        if (n->a->b) { /* fixed(scale, zero) */
            sc = cast(j, expr(&f, n->a->a), j->t_f64);
            zp = cast(j, expr(&f, n->a->b), j->t_i64);
        } else { /* fixed(t => qparams): t is the recipe's output type */
            f.table_v = gcc_jit_lvalue_as_rvalue(
                gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2)), NULL));
            gcc_jit_rvalue *qp = now(&f, expr(&f, n->a->a));
            sc = gcc_jit_rvalue_access_field(qp, NULL, j->f_qp_scale);
            zp = gcc_jit_rvalue_access_field(qp, NULL, j->f_qp_zero);
        }
        gcc_jit_block_add_assignment(cur(&f), NULL,
                                     gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3)), NULL),
                                     sc);
        gcc_jit_block_add_assignment(cur(&f), NULL,
                                     gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 4)), NULL),
                                     zp);
        gcc_jit_block_end_with_void_return(cur(&f), NULL);
        out->qparams = f.fn;
    }
    const ql_node *body = n->c;
    if (body && body->kind == QL_BLOCK) {
        snprintf(name, sizeof name, "qrl_affine_%s_elem", id);
        gcc_jit_type *ts[5] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_i32),
                               gcc_jit_type_get_pointer(j->t_i32), gcc_jit_type_get_pointer(j->t_f64)};
        const char *ns[5] = {"rt", "mt", "x", "zero", "scale"};
        fgen f = {.j = j, .file = s->file->src->path, .ret = j->t_i32};
        f.fn = new_fn(j, name, j->t_i32, 5, ts, ns);
        f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        f.aff_x = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
        f.aff_zero = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3));
        f.aff_scale = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 4));
        begin_body(&f, body);
        f.aff_y = gcc_jit_function_new_local(f.fn, NULL, j->t_i32, "y");
        gcc_jit_block_add_assignment(f.b, NULL, f.aff_y, lng(j, j->t_i32, 0));
        stmts(&f, body);
        if (f.b)
            gcc_jit_block_end_with_return(f.b, NULL, gcc_jit_lvalue_as_rvalue(f.aff_y));
        f.b = NULL;
        end_body(&f);
        out->elem = f.fn;
    } else if (body && body->kind == QL_TABLE) {
        snprintf(name, sizeof name, "qrl_affine_%s_table", id);
        gcc_jit_type *ts[3] = {j->p_rt, j->t_voidp, j->t_f64};
        const char *ns[3] = {"rt", "mt", "v"};
        fgen f = fn_begin(j, s, name, j->t_f64, 3, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        f.table_v = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
        gcc_jit_rvalue *v = now(&f, cast(j, expr(&f, body->a), j->t_f64));
        gcc_jit_block_end_with_return(cur(&f), NULL, v);
        out->table = f.fn;
    }
}

static void recipe_fns(jit *j, const qc_sym *s, item_fns *out)
{
    const ql_node *r = s->decl;
    char name[300];
    int set = 0; /* settings are numbered apart from use lines */
    for (int i = 0; i < r->nkids; i++) {
        const ql_node *k = r->kids[i];
        if (k->kind != QL_SETTING)
            continue;
        int at = set++;
        if (k->a->kind != QL_QSPEC)
            continue;
        const ql_node *q = k->a;
        if (q->c) { /* fallback = f32 when CONDITION */
            snprintf(name, sizeof name, "qrl_recipe_%s_fallback", s->name);
            gcc_jit_type *ts[3] = {j->p_rt, j->t_f64, j->t_f64};
            const char *ns[3] = {"rt", "sqnr", "output_sqnr"};
            fgen f = fn_begin(j, s, name, j->t_i64, 3, ts, ns);
            f.sqnr = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            f.output_sqnr = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
            gcc_jit_rvalue *c = now(&f, expr(&f, q->c));
            gcc_jit_block_end_with_return(cur(&f), NULL, cast(j, c, j->t_i64));
            out->fallback = f.fn;
        }
        const ql_node *by = q->b;
        if (by && by->kind == QL_CALL && by->nkids && at < 16) {
            snprintf(name, sizeof name, "qrl_recipe_%s_%s_args", s->name, k->name);
            gcc_jit_type *ts[2] = {j->p_rt, gcc_jit_type_get_pointer(j->t_f64)};
            const char *ns[2] = {"rt", "out"};
            fgen f = fn_begin(j, s, name, j->t_void, 2, ts, ns);
            gcc_jit_rvalue *o = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            for (int a = 0; a < by->nkids; a++) {
                const ql_node *e = by->kids[a]->kind == QL_NAMED_ARG ? by->kids[a]->a : by->kids[a];
                gcc_jit_block_add_assignment(cur(&f), NULL, gcc_jit_context_new_array_access(j->c, NULL, o, lng(j, j->t_i64, a)),
                                             to_f64(j, expr(&f, e)));
            }
            gcc_jit_block_end_with_void_return(cur(&f), NULL);
            out->args[at] = f.fn;
        }
    }
}

/* Strings the registration passes; built in malloc'd buffers freed after use. */
static char *join_names(const ql_node *n, const char *sep)
{
    size_t len = 1;
    for (int i = 0; i < n->nkids; i++)
        len += strlen(n->kids[i]->name ? n->kids[i]->name : "") + strlen(sep);
    char *b = calloc(1, len);
    for (int i = 0; b && i < n->nkids; i++) {
        if (i)
            strcat(b, sep);
        strcat(b, n->kids[i]->name ? n->kids[i]->name : "");
    }
    return b;
}

/* "a,b,c": the parameter each argument of a calibrator call binds (by name, else by position;
 * "?" past the parameters, which the checker rejects), as long as the names are. */
static char *call_arg_names(const ql_node *call, const qc_sym *cal)
{
    const ql_node *ps = cal && cal->decl ? cal->decl->a : NULL;
    const char *names[QC_MAX_PARAMS + 1];
    size_t len = 1;
    int n = call->nkids < QC_MAX_PARAMS + 1 ? call->nkids : QC_MAX_PARAMS + 1;
    for (int a = 0; a < n; a++) {
        const ql_node *arg = call->kids[a];
        names[a] = arg->kind == QL_NAMED_ARG ? arg->name : ps && a < ps->nkids ? ps->kids[a]->name : "?";
        len += strlen(names[a]) + 1;
    }
    char *b = calloc(1, len);
    for (int a = 0; b && a < n; a++) {
        if (a)
            strcat(b, ",");
        strcat(b, names[a]);
    }
    return b;
}

/* The value table of a pattern, in index order. */
static int pattern_values(const ql_node *p, const qc_sym **vals, int max)
{
    int n = 0;
    for (int i = 0; i < p->nkids; i++) {
        const ql_node *m = p->kids[i];
        if (m->kind != QL_MATCH)
            continue;
        for (int b = 0; b < m->nkids; b++) {
            const qc_sym *bs = m->kids[b]->sym;
            if (bs && bs->index < max && !vals[bs->index])
                vals[bs->index] = bs, n = bs->index + 1 > n ? bs->index + 1 : n;
            for (int alt = 0; alt < m->kids[b]->nkids; alt++)
                for (int a = 0; a < m->kids[b]->kids[alt]->nkids; a++) {
                    const qc_sym *as = m->kids[b]->kids[alt]->kids[a]->sym;
                    if (as && as->index < max && !vals[as->index])
                        vals[as->index] = as, n = as->index + 1 > n ? as->index + 1 : n;
                }
        }
    }
    return n;
}

static const ql_node *role_expr(const ql_node *p, const char *name)
{
    for (int i = 0; i < p->nkids; i++)
        if (p->kids[i]->kind == QL_QUANTIZE)
            for (int r = 0; r < p->kids[i]->nkids; r++)
                if (!strcmp(p->kids[i]->kids[r]->name, name))
                    return p->kids[i]->kids[r]->a;
    return NULL;
}

#define CALL_IMP(i, n, args) gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, \
    gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[i])), n, args))
#define STR(s) gcc_jit_context_new_string_literal(j->c, (s))
#define ADDR_OR_NULL(fn) ((fn) ? cast(j, gcc_jit_function_get_address((fn), NULL), j->t_voidp) \
                               : gcc_jit_context_null(j->c, j->t_voidp))

static void register_pattern(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s,
                             const item_fns *fns)
{
    const ql_node *p = s->decl;
    const char *numerics = "";
    long priority = -1; /* -1: its number of nodes */
    for (int i = 0; i < s->decl->nkids; i++) {
        const ql_node *k = s->decl->kids[i];
        if (k->kind == QL_SETTING && !strcmp(k->name, "numerics"))
            numerics = k->a->name;
        if (k->kind == QL_SETTING && !strcmp(k->name, "priority"))
            priority = (long)k->a->ival;
    }
    gcc_jit_rvalue *a1[5] = {m, STR(s->name), ADDR_OR_NULL(fns->where), STR(numerics), lng(j, j->t_i64, priority)};
    CALL_IMP(IMP_ADD_PATTERN, 5, a1);
    const qc_sym *vals[256] = {0};
    int nv = pattern_values(p, vals, 256);
    for (int v = 0; v < nv; v++) {
        if (!vals[v])
            continue;
        const ql_node *re = role_expr(p, vals[v]->name);
        const char *role = "";
        long axis = -1, ra = -1, rb = -1;
        if (re) {
            role = re->kind == QL_NAME ? re->name : re->a->name;
            if (re->kind == QL_CALL && !strcmp(role, "weight")) {
                axis = 0;
                for (int k = 0; k < re->nkids; k++)
                    if (re->kids[k]->kind == QL_NAMED_ARG && re->kids[k]->a->kind == QL_INT)
                        axis = (long)re->kids[k]->a->ival;
            }
            if (re->kind == QL_CALL && (!strcmp(role, "bias") || !strcmp(role, "same"))) {
                const qc_sym *x = re->nkids > 0 ? re->kids[0]->sym : NULL, *w = re->nkids > 1 ? re->kids[1]->sym : NULL;
                ra = x ? x->index : -1;
                rb = w ? w->index : -1;
            }
        }
        gcc_jit_rvalue *a2[7] = {m, STR(s->name), STR(vals[v]->name), STR(role), lng(j, j->t_i64, axis),
                                 lng(j, j->t_i64, ra), lng(j, j->t_i64, rb)};
        CALL_IMP(IMP_ADD_PATTERN_VALUE, 7, a2);
    }
    for (int i = 0; i < p->nkids; i++) {
        const ql_node *mt = p->kids[i];
        if (mt->kind != QL_MATCH)
            continue;
        for (int bi = 0; bi < mt->nkids; bi++) {
            const ql_node *bind = mt->kids[bi];
            const qc_sym *out = bind->sym;
            for (int alt = 0; alt < bind->nkids; alt++) {
                const ql_node *op = bind->kids[alt];
                char inputs[1024] = "";
                int len = 0;
                for (int a = 0; a < op->nkids && len < 1000; a++) {
                    const qc_sym *as = op->kids[a]->sym;
                    len += snprintf(inputs + len, sizeof inputs - (size_t)len, "%s", a ? "," : "");
                    if (as)
                        len += snprintf(inputs + len, sizeof inputs - (size_t)len, "%d%s", as->index,
                                        op->kids[a]->flag ? "?" : "");
                    else
                        len += snprintf(inputs + len, sizeof inputs - (size_t)len, "_");
                }
                gcc_jit_rvalue *a3[5] = {m, STR(s->name), lng(j, j->t_i64, out ? out->index : -1), STR(op->name),
                                         STR(inputs)};
                CALL_IMP(IMP_ADD_PATTERN_NODE, 5, a3);
            }
        }
    }
    int k = 0; /* constants count on across lower clauses */
    for (int i = 0; i < p->nkids; i++) {
        const ql_node *lw = p->kids[i];
        if (lw->kind != QL_LOWER || lw->a->kind != QL_CALL)
            continue;
        char args[1024] = "";
        int len = 0;
        for (int a = 0; a < lw->a->nkids && len < 1000; a++) {
            const ql_node *e = lw->a->kids[a];
            const qc_sym *es = e->kind == QL_NAME ? e->sym : NULL;
            if (es && es->kind == QC_SYM_VALUE)
                len += snprintf(args + len, sizeof args - (size_t)len, "%sv%d", a ? "," : "", es->index);
            else
                len += snprintf(args + len, sizeof args - (size_t)len, "%sc%d", a ? "," : "", k++);
        }
        const qc_sym *out = NULL;
        for (int v = 0; v < nv; v++)
            if (vals[v] && !strcmp(vals[v]->name, lw->name))
                out = vals[v];
        gcc_jit_rvalue *a4[6] = {m, STR(s->name), STR(lw->a->a->name), lng(j, j->t_i64, out ? out->index : -1), STR(args),
                                 ADDR_OR_NULL(fns->consts)};
        CALL_IMP(IMP_ADD_PATTERN_LOWER, 6, a4);
    }
}

static void register_affine(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s,
                            const item_fns *fns)
{
    const ql_node *n = s->decl;
    long kind = n->a->kind == QL_AFF_SAME ? 0 : n->a->kind == QL_AFF_FIXED ? 1 : 2;
    char loc[600], cond[512] = "";
    int line = 0, col = 0;
    ql_source_linecol(n->name_span.src ? n->name_span.src : n->span.src, n->span.start, &line, &col);
    snprintf(loc, sizeof loc, "%s:%d:%d", s->file->src->path, line, col);
    if (n->b && n->b->span.src && n->b->span.end > n->b->span.start) {
        unsigned len = n->b->span.end - n->b->span.start;
        snprintf(cond, sizeof cond, "%.*s", (int)(len < sizeof cond ? len : sizeof cond - 1),
                 n->b->span.src->text + n->b->span.start);
    }
    gcc_jit_rvalue *a[12] = {m, STR(s->name), lng(j, j->t_i64, n->nkids), lng(j, j->t_i64, kind),
                             ADDR_OR_NULL(fns->where), ADDR_OR_NULL(fns->qparams), ADDR_OR_NULL(fns->elem),
                             ADDR_OR_NULL(fns->table), lng(j, j->t_i64, n->c && n->c->kind == QL_AFF_F32),
                             STR(loc), STR(cond)};
    CALL_IMP(IMP_ADD_AFFINE, 11, a);
}

/* Whether expression n names `name`. */
static int mentions(const ql_node *n, const char *name)
{
    if (!n)
        return 0;
    if (n->kind == QL_NAME && n->name && !strcmp(n->name, name))
        return 1;
    if (mentions(n->a, name) || mentions(n->b, name) || mentions(n->c, name))
        return 1;
    for (int i = 0; i < n->nkids; i++)
        if (mentions(n->kids[i], name))
            return 1;
    return 0;
}

static void register_recipe(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s,
                            const item_fns *fns)
{
    const ql_node *r = s->decl;
    int on_outputs = 0; /* the fallback condition reads output_sqnr: a search over layers */
    for (int i = 0; i < r->nkids; i++)
        if (r->kids[i]->kind == QL_SETTING && r->kids[i]->a->kind == QL_QSPEC && r->kids[i]->a->c)
            on_outputs |= mentions(r->kids[i]->a->c, "output_sqnr");
    gcc_jit_rvalue *a1[4] = {m, STR(s->name), ADDR_OR_NULL(fns->fallback), lng(j, j->t_i64, on_outputs)};
    CALL_IMP(IMP_ADD_RECIPE, 4, a1);
    int set = 0; /* as recipe_fns numbers them */
    for (int i = 0; i < r->nkids; i++) {
        const ql_node *k = r->kids[i];
        if (k->kind == QL_USE) {
            for (int u = 0; u < k->nkids; u++) {
                gcc_jit_rvalue *a2[3] = {m, STR(s->name), STR(k->kids[u]->name)};
                CALL_IMP(IMP_ADD_USE, 3, a2);
            }
            continue;
        }
        if (k->kind != QL_SETTING)
            continue;
        int at = set++;
        const ql_node *q = k->a;
        char type[64] = "", *mods = NULL, *argnames = NULL;
        const char *cal = "";
        if (q->kind == QL_QSPEC) {
            qc_type_name(q->a->type ? q->a->type : &qc_error, type, sizeof type);
            mods = join_names(q, ",");
            const ql_node *by = q->b;
            if (by) {
                const ql_node *fname = by->kind == QL_CALL ? by->a : by;
                const qc_sym *cs = fname->sym;
                cal = fname->name;
                if (by->kind == QL_CALL)
                    argnames = call_arg_names(by, cs);
            }
        } else if (q->kind == QL_NAME) {
            snprintf(type, sizeof type, "%s", q->name);
        } else if (q->kind == QL_INT || q->kind == QL_FLOAT) { /* a number (tolerance = 3) */
            snprintf(type, sizeof type, "%.17g", q->kind == QL_INT ? (double)q->ival : q->fval);
        }
        gcc_jit_rvalue *a3[8] = {m, STR(s->name), STR(k->name), STR(type), STR(mods ? mods : ""), STR(cal),
                                 STR(argnames ? argnames : ""), ADDR_OR_NULL(at < 16 ? fns->args[at] : NULL)};
        free(mods);
        free(argnames);
        CALL_IMP(IMP_ADD_SETTING, 8, a3);
    }
}
#undef CALL_IMP
#undef STR
#undef ADDR_OR_NULL

/* qrl_module_entry(m, imp): registers everything. */
static void entry(jit *j, cal_fns *cals, item_fns *items)
{
    gcc_jit_type *ts[2] = {j->t_voidp, j->p_imports};
    gcc_jit_param *p[2] = {gcc_jit_context_new_param(j->c, NULL, ts[0], "m"),
                           gcc_jit_context_new_param(j->c, NULL, ts[1], "imp")};
    gcc_jit_function *fn = gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_EXPORTED, j->t_void,
                                                        QRL_MODULE_ENTRY, 2, p, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(fn, NULL);
    gcc_jit_rvalue *m = gcc_jit_param_as_rvalue(p[0]), *imp = gcc_jit_param_as_rvalue(p[1]);
#define IMPF(i) gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[i]))
#define STR(s) gcc_jit_context_new_string_literal(j->c, (s))
#define ADDR(fn) cast(j, gcc_jit_function_get_address((fn), NULL), j->t_voidp)
    for (int i = 0; i < j->u->nitems; i++) {
        const qc_sym *s = j->u->items[i];
        if (j->want && !j->want[i])
            continue;
        if (s->kind == QC_SYM_FN && j->fns_private)
            continue;
        if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL) {
            char *sig = signature(s);
            gcc_jit_rvalue *args[5] = {m, STR(s->name), ADDR(j->fns[i]), STR(sig ? sig : "?"),
                                       lng(j, j->t_i64, s->kind == QC_SYM_KERNEL)};
            free(sig);
            gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_FN), 5, args));
            if (s->kind == QC_SYM_KERNEL) { /* its generic entry: is_kernel 2 */
                gcc_jit_rvalue *ta[5] = {m, STR(s->name), ADDR(kernel_thunk(j, i)), STR("void(rt,args)"),
                                         lng(j, j->t_i64, 2)};
                gcc_jit_block_add_eval(b, NULL,
                                       gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_FN), 5, ta));
            }
        } else if (s->kind == QC_SYM_CALIBRATOR && cals[i].observe && cals[i].merge && cals[i].solve) {
            const ql_node *cal = s->decl;
            int np = cal->a ? cal->a->nkids : 0;
            gcc_jit_rvalue *args[9] = {m, STR(s->name), lng(j, j->t_i64, np), lng(j, j->t_i64, (long)state_bytes(cal)),
                                       ADDR(cals[i].defaults), ADDR(cals[i].init), ADDR(cals[i].observe),
                                       ADDR(cals[i].merge), ADDR(cals[i].solve)};
            gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_CAL), 9, args));
            for (int k = 0; k < np; k++) {
                const qc_type *t = cal->a->kids[k]->type;
                gcc_jit_rvalue *pa[4] = {m, STR(s->name), STR(cal->a->kids[k]->name),
                                         lng(j, j->t_i64, qc_is_float(t) ? 1 : t->k == QC_BOOL ? 2 : 0)};
                gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_PARAM), 4, pa));
            }
        }
        else if (s->kind == QC_SYM_PATTERN)
            register_pattern(j, b, m, imp, s, &items[i]);
        else if (s->kind == QC_SYM_AFFINE)
            register_affine(j, b, m, imp, s, &items[i]);
        else if (s->kind == QC_SYM_RECIPE)
            register_recipe(j, b, m, imp, s, &items[i]);
    }
    gcc_jit_block_end_with_void_return(b, NULL);
#undef IMPF
#undef STR
#undef ADDR
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
            declare_fn(&j, i);
    for (int i = 0; i < u->nitems; i++) {
        qc_sym *s = u->items[i];
        if (j.want && !j.want[i])
            continue;
        if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL)
            define_fn(&j, i);
        else if (s->kind == QC_SYM_CALIBRATOR)
            calibrator(&j, s, &cals[i]);
        else if (s->kind == QC_SYM_PATTERN)
            pattern_fns(&j, s, &items[i]);
        else if (s->kind == QC_SYM_AFFINE)
            affine_fns(&j, s, &items[i]);
        else if (s->kind == QC_SYM_RECIPE)
            recipe_fns(&j, s, &items[i]);
    }
    entry(&j, cals, items);
    free(j.fns);
    free(j.traps);
    free(cals);
    free(items);
    return j.c;
}
