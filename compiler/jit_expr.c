/* The lowering of expressions and statements (see jit.c): names, state and
 * parameters, element accesses with their bounds checks, operators with the
 * semantics jit.c lists, calls (built-in, methods, user fns and what can
 * trap), fields; return, if, while, let and assignment, a function body's
 * locals. A `for` loop is lowered by jit_loops.c. */
#include "jit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- expressions */

static gcc_jit_lvalue *lvalue(fgen *f, const ql_node *n);

const qc_type *jit_ty(const ql_node *n)
{
    const qc_type *t = n->type ? n->type : &qc_error;
    return t->k == QC_INTLIT ? &qc_i64 : t->k == QC_FLOATLIT ? &qc_f64 : t;
}

/* The state slot of a calibrator field: its offset in the state block. */
int64_t jit_state_offset(const ql_node *cal, const qc_sym *s)
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

int64_t jit_state_bytes(const ql_node *cal)
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
    gcc_jit_lvalue *byte = gcc_jit_context_new_array_access(j->c, NULL, jit_cast(j, base, cp), jit_lng(j, j->t_i64, (long)off));
    gcc_jit_rvalue *addr = jit_cast(j, gcc_jit_lvalue_get_address(byte, NULL), gcc_jit_type_get_pointer(t));
    return gcc_jit_rvalue_dereference(addr, NULL);
}

gcc_jit_lvalue *jit_state_lvalue(fgen *f, gcc_jit_rvalue *base, const qc_sym *s)
{
    return slot(f, base, jit_state_offset(f->cal, s), s->type->k == QC_ARRAY ? f->j->t_array : jit_type_of(f->j, s->type));
}

static gcc_jit_rvalue *const_value(fgen *f, const qc_sym *s)
{
    return jit_cast(f->j, jit_expr(f, s->decl->b), jit_type_of(f->j, s->type));
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
            gcc_jit_lvalue *v = gcc_jit_context_new_array_access(j->c, NULL, jit_cast(j, f->params, gcc_jit_type_get_pointer(pt)),
                                                                 jit_lng(j, j->t_i64, s->index));
            gcc_jit_rvalue *r = gcc_jit_lvalue_as_rvalue(v);
            if (s->type->k == QC_BOOL)
                return jit_cmp(j, GCC_JIT_COMPARISON_NE, r, jit_lng(j, j->t_i64, 0));
            return jit_cast(j, r, jit_type_of(j, s->type));
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
    case QC_SYM_LOOP:
    case QC_SYM_DIM: return gcc_jit_lvalue_as_rvalue(f->locals[s->index]);
    case QC_SYM_PARAM: return param_value(f, s);
    case QC_SYM_CONST: return const_value(f, s);
    case QC_SYM_STATE: {
        gcc_jit_lvalue *lv = jit_state_lvalue(f, f->state, s);
        if (s->type->k == QC_ARRAY)
            return gcc_jit_lvalue_get_address(lv, NULL);
        return gcc_jit_lvalue_as_rvalue(lv);
    }
    case QC_SYM_VALUE: return jit_lng(j, j->t_i64, s->index);
    case QC_SYM_AFF_IN:
        return gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(j->c, NULL, f->aff_x, jit_lng(j, j->t_i64, s->index)));
    case QC_SYM_AFF_OUT: return gcc_jit_lvalue_as_rvalue(f->aff_y);
    case QC_SYM_TABLE_VAR: return f->table_v;
    case QC_SYM_BUILTIN:
        if (!strcmp(s->name, "sqnr") && f->sqnr)
            return f->sqnr;
        if (!strcmp(s->name, "output_sqnr") && f->output_sqnr)
            return f->output_sqnr;
        if (!strcmp(s->name, "output_cosine") && f->output_cosine)
            return f->output_cosine;
        if (!strcmp(s->name, "output_agreement") && f->output_agreement)
            return f->output_agreement;
        if (!strcmp(s->name, "inf"))
            return jit_dbl(j, j->t_f64, INFINITY);
        if (!strcmp(s->name, "nan"))
            return jit_dbl(j, j->t_f64, NAN);
        return jit_dbl(j, j->t_f64, M_PI);
    default: return jit_lng(j, j->t_i64, 0);
    }
}

/* Index into an array or tensor, bounds checked unless proven in range. */
static gcc_jit_lvalue *element(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *bt = jit_ty(n->a);
    for (int h = 0; h < f->nhoist; h++)
        if (f->hoist[h].at == n)
            return gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_lvalue_as_rvalue(f->hoist[h].ptr),
                                                    jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64)));
    gcc_jit_rvalue *base = jit_now(f, jit_expr(f, n->a));
    gcc_jit_type *et = jit_type_of(j, bt->elem);
    const qc_sym *base_sym = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (bt->k == QC_ARRAY) {
        gcc_jit_rvalue *i = jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64));
        int proven = 0;
        const qc_sym *iv = n->kids[0]->kind == QL_NAME ? n->kids[0]->sym : NULL;
        for (int k = 0; k < f->nbound && base_sym; k++)
            proven |= f->loop_var[k] == iv && f->loop_arr[k] == base_sym;
        gcc_jit_rvalue *len = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_arr_len));
        if (!proven)
            jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, jit_cast(j, i, j->t_u64), jit_cast(j, len, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], i, len);
        gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_arr_data));
        return gcc_jit_context_new_array_access(j->c, NULL, jit_cast(j, data, gcc_jit_type_get_pointer(et)), i);
    }
    /* tensor: one flat index, or one per dimension */
    gcc_jit_rvalue *data = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_data));
    gcc_jit_rvalue *flat;
    if (n->nkids == 1) {
        flat = jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64));
        int proven = 0;
        const qc_sym *iv = n->kids[0]->kind == QL_NAME ? n->kids[0]->sym : NULL;
        for (int k = 0; k < f->nbound && base_sym; k++)
            proven |= f->loop_var[k] == iv && f->loop_arr[k] == base_sym;
        gcc_jit_rvalue *numel = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_numel));
        if (!proven)
            jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, jit_cast(j, flat, j->t_u64), jit_cast(j, numel, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], flat, numel);
    } else {
        gcc_jit_rvalue *rank = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_rank));
        jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_NE, rank, jit_lng(j, j->t_i64, n->nkids)), QRL_TRAP_RANK, n,
              jit_lng(j, j->t_i64, n->nkids), rank);
        gcc_jit_lvalue *acc = jit_temp(f, j->t_i64);
        gcc_jit_block_add_assignment(jit_cur(f), NULL, acc, jit_lng(j, j->t_i64, 0));
        gcc_jit_lvalue *dims = gcc_jit_rvalue_dereference_field(base, NULL, j->f_tv_dims);
        for (int d = 0; d < n->nkids; d++) {
            gcc_jit_rvalue *i = jit_now(f, jit_cast(j, jit_expr(f, n->kids[d]), j->t_i64));
            gcc_jit_rvalue *dim = jit_now(f, gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(
                                             j->c, NULL, gcc_jit_lvalue_as_rvalue(dims), jit_lng(j, j->t_i64, d))));
            jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, jit_cast(j, i, j->t_u64), jit_cast(j, dim, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[d], i, dim);
            gcc_jit_block_add_assignment(jit_cur(f), NULL, acc,
                                         jit_bin(j, GCC_JIT_BINARY_OP_PLUS, j->t_i64,
                                             jit_bin(j, GCC_JIT_BINARY_OP_MULT, j->t_i64, gcc_jit_lvalue_as_rvalue(acc), dim), i));
        }
        flat = gcc_jit_lvalue_as_rvalue(acc);
    }
    return gcc_jit_context_new_array_access(j->c, NULL, jit_cast(j, data, gcc_jit_type_get_pointer(et)), flat);
}

static gcc_jit_rvalue *arith(fgen *f, ql_tok op, const qc_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *b,
                             const ql_node *at)
{
    jit *j = f->j;
    gcc_jit_type *jt = jit_type_of(j, t);
    a = jit_cast(j, a, jt);
    b = jit_cast(j, b, jt);
    if (qc_is_float(t)) {
        enum gcc_jit_binary_op o = op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS
                                 : op == QL_TOK_MINUS ? GCC_JIT_BINARY_OP_MINUS
                                 : op == QL_TOK_STAR ? GCC_JIT_BINARY_OP_MULT : GCC_JIT_BINARY_OP_DIVIDE;
        return jit_bin(j, o, jt, a, b);
    }
    gcc_jit_type *ut = jit_unsigned_of(j, t);
    switch (op) {
    case QL_TOK_PLUS:
    case QL_TOK_MINUS:
    case QL_TOK_STAR: {
        enum gcc_jit_binary_op o = op == QL_TOK_PLUS ? GCC_JIT_BINARY_OP_PLUS
                                 : op == QL_TOK_MINUS ? GCC_JIT_BINARY_OP_MINUS : GCC_JIT_BINARY_OP_MULT;
        return jit_cast(j, jit_bin(j, o, ut, jit_cast(j, a, ut), jit_cast(j, b, ut)), jt);
    }
    case QL_TOK_SLASH:
    case QL_TOK_PERCENT: {
        a = jit_now(f, a);
        b = jit_now(f, b);
        jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_EQ, b, gcc_jit_context_zero(j->c, jt)), QRL_TRAP_DIVZERO, at, NULL, NULL);
        if (!qc_is_signed(t))
            return jit_bin(j, op == QL_TOK_SLASH ? GCC_JIT_BINARY_OP_DIVIDE : GCC_JIT_BINARY_OP_MODULO, jt, a, b);
        /* MIN / -1 overflows in C: -1 is handled apart (wrapping negation, remainder 0). */
        gcc_jit_rvalue *minus1 = jit_cmp(j, GCC_JIT_COMPARISON_EQ, b, jit_lng(j, jt, -1));
        gcc_jit_rvalue *safe_b = jit_now(f, jit_select_rv(f, minus1, gcc_jit_context_one(j->c, jt), b, jt));
        gcc_jit_rvalue *q = jit_now(f, jit_bin(j, op == QL_TOK_SLASH ? GCC_JIT_BINARY_OP_DIVIDE : GCC_JIT_BINARY_OP_MODULO, jt, a,
                                       safe_b));
        gcc_jit_rvalue *alt = op == QL_TOK_SLASH
                                  ? jit_cast(j, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), jit_cast(j, a, ut)), jt)
                                  : gcc_jit_context_zero(j->c, jt);
        return jit_select_rv(f, minus1, alt, q, jt);
    }
    case QL_TOK_AMP: return jit_bin(j, GCC_JIT_BINARY_OP_BITWISE_AND, jt, a, b);
    case QL_TOK_PIPE: return jit_bin(j, GCC_JIT_BINARY_OP_BITWISE_OR, jt, a, b);
    case QL_TOK_CARET: return jit_bin(j, GCC_JIT_BINARY_OP_BITWISE_XOR, jt, a, b);
    default: return a;
    }
}

static gcc_jit_rvalue *shift(fgen *f, ql_tok op, const qc_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *cnt)
{
    jit *j = f->j;
    gcc_jit_type *jt = jit_type_of(j, t), *ut = jit_unsigned_of(j, t);
    int bits = qc_type_bits(t);
    a = jit_now(f, jit_cast(j, a, jt));
    cnt = jit_now(f, jit_cast(j, cnt, j->t_i64));
    gcc_jit_rvalue *in_range = jit_cmp(j, GCC_JIT_COMPARISON_LT, jit_cast(j, cnt, j->t_u64), jit_lng(j, j->t_u64, bits));
    gcc_jit_rvalue *safe = jit_now(f, jit_select_rv(f, in_range, cnt, jit_lng(j, j->t_i64, 0), j->t_i64));
    gcc_jit_rvalue *r, *out;
    if (op == QL_TOK_SHL) {
        r = jit_cast(j, jit_bin(j, GCC_JIT_BINARY_OP_LSHIFT, ut, jit_cast(j, a, ut), jit_cast(j, safe, ut)), jt);
        out = gcc_jit_context_zero(j->c, jt);
    } else {
        r = jit_bin(j, GCC_JIT_BINARY_OP_RSHIFT, jt, a, jit_cast(j, safe, jt));
        out = qc_is_signed(t) ? jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, a, gcc_jit_context_zero(j->c, jt)),
                                          jit_lng(j, jt, -1), gcc_jit_context_zero(j->c, jt), jt)
                              : gcc_jit_context_zero(j->c, jt);
    }
    return jit_select_rv(f, in_range, jit_now(f, r), out, jt);
}

/* a and b / a or b with short-circuit: b's code (and traps) runs only when needed. */
static gcc_jit_rvalue *logic(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    gcc_jit_lvalue *r = jit_temp(f, j->t_bool);
    gcc_jit_block_add_assignment(jit_cur(f), NULL, r, jit_expr(f, n->a));
    gcc_jit_block *rhs = jit_new_block(f), *join = jit_new_block(f);
    if (n->op == QL_TOK_AND)
        gcc_jit_block_end_with_conditional(jit_cur(f), NULL, gcc_jit_lvalue_as_rvalue(r), rhs, join);
    else
        gcc_jit_block_end_with_conditional(jit_cur(f), NULL, gcc_jit_lvalue_as_rvalue(r), join, rhs);
    f->b = rhs;
    gcc_jit_rvalue *b = jit_expr(f, n->b);
    gcc_jit_block_add_assignment(jit_cur(f), NULL, r, b);
    gcc_jit_block_end_with_jump(jit_cur(f), NULL, join);
    f->b = join;
    return gcc_jit_lvalue_as_rvalue(r);
}

static gcc_jit_rvalue *binary(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    if (n->op == QL_TOK_AND || n->op == QL_TOK_OR)
        return logic(f, n);
    const qc_type *t = jit_ty(n);
    if (n->op >= QL_TOK_EQ && n->op <= QL_TOK_GE) {
        /* v.op == "Relu" (either way round): asked of the runtime */
        if (jit_ty(n->a)->k == QC_STR || jit_ty(n->b)->k == QC_STR) {
            const ql_node *fld = n->a->kind == QL_FIELD ? n->a : n->b, *lit = n->a->kind == QL_STR ? n->a : n->b;
            gcc_jit_rvalue *r;
            const ql_node *call = n->a->kind == QL_CALL ? n->a : n->b;
            if (call->kind == QL_CALL && lit->kind == QL_STR) { /* attr("mode", "nearest") == "linear" */
                gcc_jit_rvalue *args[5] = {f->mt, jit_lng(j, j->t_i64, -1),
                                           gcc_jit_context_new_string_literal(j->c, call->kids[0]->name),
                                           gcc_jit_context_new_string_literal(j->c, call->kids[1]->name),
                                           gcc_jit_context_new_string_literal(j->c, lit->name)};
                r = jit_cmp(j, GCC_JIT_COMPARISON_NE, jit_now(f, jit_call_imp(f, IMP_ATTR_STR_IS, 5, args)), jit_lng(j, j->t_i64, 0));
            } else if (fld->kind == QL_FIELD && lit->kind == QL_STR) {
                gcc_jit_rvalue *args[3] = {f->mt, jit_expr(f, fld->a), gcc_jit_context_new_string_literal(j->c, lit->name)};
                int imp = !strcmp(fld->name, "dtype")     ? IMP_VALUE_DTYPE_IS /* v.dtype, v.read_by, v.op */
                          : !strcmp(fld->name, "read_by") ? IMP_VALUE_READ_BY
                          : !strcmp(fld->name, "feeds")   ? IMP_VALUE_FEEDS
                                                          : IMP_VALUE_OP_IS;
                r = jit_cmp(j, GCC_JIT_COMPARISON_NE, jit_now(f, jit_call_imp(f, imp, 3, args)), jit_lng(j, j->t_i64, 0));
            } else { /* two literals */
                int eq = n->a->name && n->b->name && !strcmp(n->a->name, n->b->name);
                r = gcc_jit_context_new_rvalue_from_int(j->c, j->t_bool, eq);
            }
            return n->op == QL_TOK_EQ ? r : gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_LOGICAL_NEGATE, j->t_bool, r);
        }
        /* Operands were settled to a common type by the checker. */
        const qc_type *ot = jit_ty(n->a);
        gcc_jit_rvalue *a = jit_expr(f, n->a), *b = jit_expr(f, n->b);
        if (ot->k != QC_STR && ot->k != QC_BOOL) {
            const qc_type *ct = qc_common(ot, jit_ty(n->b));
            if (ct) {
                a = jit_cast(j, a, jit_type_of(j, ct));
                b = jit_cast(j, b, jit_type_of(j, ct));
            }
        }
        static const enum gcc_jit_comparison ops[] = {GCC_JIT_COMPARISON_EQ, GCC_JIT_COMPARISON_NE,
                                                      GCC_JIT_COMPARISON_LT, GCC_JIT_COMPARISON_LE,
                                                      GCC_JIT_COMPARISON_GT, GCC_JIT_COMPARISON_GE};
        return jit_cmp(j, ops[n->op - QL_TOK_EQ], a, b);
    }
    gcc_jit_rvalue *a = jit_now(f, jit_cast(j, jit_expr(f, n->a), jit_type_of(j, t)));
    if (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR)
        return shift(f, n->op, t, a, jit_expr(f, n->b));
    gcc_jit_rvalue *b = jit_cast(j, jit_expr(f, n->b), jit_type_of(j, t));
    return arith(f, n->op, t, a, b, n);
}

static gcc_jit_rvalue *unary(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *t = jit_ty(n);
    gcc_jit_rvalue *a = jit_expr(f, n->a);
    if (n->op == QL_TOK_NOT)
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_LOGICAL_NEGATE, j->t_bool, a);
    gcc_jit_type *jt = jit_type_of(j, t);
    a = jit_cast(j, a, jt);
    if (n->op == QL_TOK_TILDE)
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_BITWISE_NEGATE, jt, a);
    if (qc_is_float(t))
        return gcc_jit_context_new_unary_op(j->c, NULL, GCC_JIT_UNARY_OP_MINUS, jt, a);
    gcc_jit_type *ut = jit_unsigned_of(j, t);
    return jit_cast(j, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), jit_cast(j, a, ut)), jt);
}

static gcc_jit_rvalue *conversion(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *to = jit_ty(n), *from = jit_ty(n->b);
    gcc_jit_rvalue *x = jit_expr(f, n->b);
    if (to->k == QC_BOOL) {
        if (from->k == QC_BOOL)
            return x;
        return jit_cmp(j, GCC_JIT_COMPARISON_NE, x, gcc_jit_context_zero(j->c, jit_type_of(j, from)));
    }
    if (qc_is_int(to) && qc_is_float(from))
        return jit_float_to_int(f, x, to);
    if (n->kind == QL_SAT && qc_is_int(from))
        return jit_sat_int(f, x, from->k == QC_BOOL ? &qc_u8 : from, to);
    if (from->k == QC_BOOL && qc_is_float(to))
        return jit_cast(j, jit_to_f64(j, x), jit_type_of(j, to));
    return jit_cast(j, x, jit_type_of(j, to));
}

/* round half to even (rint) / away from zero / up, exactly (x - floor(x) is exact). */
static gcc_jit_rvalue *rounding(fgen *f, const char *mode, gcc_jit_rvalue *x)
{
    jit *j = f->j;
    gcc_jit_type *t = gcc_jit_rvalue_get_type(x);
    x = jit_now(f, x);
    gcc_jit_rvalue *half = jit_dbl(j, t, 0.5), *one = jit_dbl(j, t, 1.0);
    if (!strcmp(mode, "round_away")) {
        gcc_jit_rvalue *tr = jit_now(f, jit_builtin1(j, t == j->t_f32 ? "__builtin_truncf" : "__builtin_trunc", x));
        gcc_jit_rvalue *d = jit_now(f, jit_builtin1(j, t == j->t_f32 ? "__builtin_fabsf" : "__builtin_fabs",
                                            jit_bin(j, GCC_JIT_BINARY_OP_MINUS, t, x, tr)));
        gcc_jit_rvalue *step = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, x, jit_dbl(j, t, 0)), jit_dbl(j, t, -1), one, t);
        return jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, d, half), jit_bin(j, GCC_JIT_BINARY_OP_PLUS, t, tr, step), tr, t);
    }
    if (!strcmp(mode, "round_even")) /* rint under round-to-nearest, which module load checks */
        return jit_now(f, jit_builtin1(j, t == j->t_f32 ? "__builtin_rintf" : "__builtin_rint", x));
    gcc_jit_rvalue *fl = jit_now(f, jit_floor_rv(j, x));
    gcc_jit_rvalue *d = jit_now(f, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, t, x, fl));
    gcc_jit_rvalue *up = jit_bin(j, GCC_JIT_BINARY_OP_PLUS, t, fl, one);
    return jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, d, half), up, fl, t); /* round_up */
}

/* Whether running n can trap: an index, an integer division, a loop (its fuel), a method call, or a
 * call of a fn that can. The other builtins cannot: their imports take no qrl_rt. A call of a fn
 * that cannot trap needs no test of rt->failed after it, which would be a load in the caller's
 * loop that a store through u8 may alias. */
static int fn_can_trap(jit *j, const qc_sym *s);

static int nonzero_literal(const ql_node *n)
{
    return n && n->kind == QL_INT && n->ival != 0;
}

static int can_trap(jit *j, const ql_node *n)
{
    if (!n)
        return 0;
    switch (n->kind) {
    case QL_INDEX:
    case QL_FOR:
    case QL_WHILE: return 1;
    case QL_BINARY: /* by a literal other than 0 it cannot (MIN / -1 wraps, without a trap) */
        if ((n->op == QL_TOK_SLASH || n->op == QL_TOK_PERCENT) && qc_is_int(jit_ty(n)) && !nonzero_literal(n->b))
            return 1;
        break;
    case QL_ASSIGN:
        if (n->op == QL_TOK_SLASHEQ && qc_is_int(jit_ty(n->a)) && !nonzero_literal(n->b))
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
        const ql_node *a;
        int at = ql_call_param(ps, n->kids[i], i, &a);
        if (at >= 0 && at < QC_MAX_PARAMS)
            given[at] = a;
    }
    for (int p = 0; p < np && p < QC_MAX_PARAMS; p++) {
        const ql_node *a = given[p] ? given[p] : ps->kids[p]->b;
        args[p + 1] = jit_now(f, jit_cast(j, jit_expr(f, a), jit_type_of(j, ps->kids[p]->type)));
    }
    gcc_jit_rvalue *call = gcc_jit_context_new_call(j->c, NULL, j->fns[item_index(j, s)], np + 1, args);
    gcc_jit_rvalue *r;
    if (!s->decl->b) {
        gcc_jit_block_add_eval(jit_cur(f), NULL, call);
        r = NULL;
    } else {
        r = jit_now(f, call);
    }
    if (fn_can_trap(j, s))
        jit_check_failed(f);
    return r ? r : jit_lng(j, j->t_i64, 0);
}

static gcc_jit_rvalue *builtin_call(fgen *f, const ql_node *n, const char *name)
{
    jit *j = f->j;
    const qc_type *t = jit_ty(n);
    gcc_jit_type *jt = jit_type_of(j, t);
    ql_node *const *k = n->kids;
    if (!strcmp(name, "ew.bits") || !strcmp(name, "ew.ubits")) { /* a scalar's bits, widened to i64 (compiler/elementwise.c) */
        const qc_type *vt = jit_ty(k[0]);
        if (!qc_is_scalar(vt)) /* ew.ubits of what is no scalar: the vector form does not read it */
            return jit_lng(j, j->t_i64, 0);
        gcc_jit_rvalue *v = jit_now(f, jit_cast(j, jit_expr(f, k[0]), jit_type_of(j, vt)));
        if (vt->k == QC_F32)
            return jit_cast(j, gcc_jit_context_new_bitcast(j->c, NULL, v, j->t_u32), j->t_i64);
        if (vt->k == QC_F64)
            return gcc_jit_context_new_bitcast(j->c, NULL, v, j->t_i64);
        return jit_cast(j, v, j->t_i64);
    }
    if (!strcmp(name, "ew.from_bits")) { /* those bits as the second argument's type, which is not run */
        gcc_jit_rvalue *b = jit_now(f, jit_cast(j, jit_expr(f, k[0]), j->t_i64));
        if (t->k == QC_F32)
            return gcc_jit_context_new_bitcast(j->c, NULL, jit_cast(j, b, j->t_u32), j->t_f32);
        if (t->k == QC_F64)
            return gcc_jit_context_new_bitcast(j->c, NULL, b, j->t_f64);
        if (t->k == QC_BOOL)
            return jit_cmp(j, GCC_JIT_COMPARISON_NE, b, jit_lng(j, j->t_i64, 0));
        return jit_cast(j, b, jt);
    }
    if (!strcmp(name, "min") || !strcmp(name, "max") || !strcmp(name, "clamp")) {
        gcc_jit_rvalue *a = jit_now(f, jit_cast(j, jit_expr(f, k[0]), jt)), *b = jit_now(f, jit_cast(j, jit_expr(f, k[1]), jt));
        int is_max = !strcmp(name, "max");
        if (!strcmp(name, "clamp")) {
            gcc_jit_rvalue *hi = jit_now(f, jit_cast(j, jit_expr(f, k[2]), jt));
            gcc_jit_rvalue *lo_ok = jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, a, b), b, a, jt);
            lo_ok = jit_now(f, lo_ok);
            return jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_GT, lo_ok, hi), hi, lo_ok, jt);
        }
        enum gcc_jit_comparison op = is_max ? GCC_JIT_COMPARISON_GT : GCC_JIT_COMPARISON_LT;
        if (!qc_is_float(t))
            return jit_select_rv(f, jit_cmp(j, op, a, b), a, b, jt);
        /* NaN on one side gives the other (as fmin/fmax), ties give b: `a op b ? a : b` is one
         * SSE/AVX max or min (a NaN operand gives b), then a NaN b gives a. */
        gcc_jit_rvalue *m = jit_now(f, jit_select_rv(f, jit_cmp(j, op, a, b), a, b, jt));
        return jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_NE, b, b), a, m, jt);
    }
    if (!strcmp(name, "select")) {
        gcc_jit_rvalue *c = jit_now(f, jit_expr(f, k[0]));
        gcc_jit_rvalue *a = jit_now(f, jit_cast(j, jit_expr(f, k[1]), jt)), *b = jit_now(f, jit_cast(j, jit_expr(f, k[2]), jt));
        return jit_select_rv(f, c, a, b, jt);
    }
    if (!strcmp(name, "abs")) {
        gcc_jit_rvalue *a = jit_now(f, jit_cast(j, jit_expr(f, k[0]), jt));
        if (qc_is_float(t))
            return jit_builtin1(j, t->k == QC_F32 ? "__builtin_fabsf" : "__builtin_fabs", a);
        gcc_jit_type *ut = jit_unsigned_of(j, t);
        gcc_jit_rvalue *neg = jit_cast(j, jit_bin(j, GCC_JIT_BINARY_OP_MINUS, ut, gcc_jit_context_zero(j->c, ut), jit_cast(j, a, ut)), jt);
        return jit_select_rv(f, jit_cmp(j, GCC_JIT_COMPARISON_LT, a, gcc_jit_context_zero(j->c, jt)), neg, a, jt);
    }
    if (!strcmp(name, "broadcast_index")) {
        gcc_jit_rvalue *args[3] = {jit_now(f, jit_expr(f, k[0])), jit_now(f, jit_expr(f, k[1])), jit_now(f, jit_cast(j, jit_expr(f, k[2]), j->t_i64))};
        return jit_now(f, jit_call_imp(f, IMP_TBCAST, 3, args));
    }
    if (!strcmp(name, "len")) {
        gcc_jit_rvalue *a = jit_now(f, jit_expr(f, k[0]));
        return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(a, NULL, j->f_arr_len));
    }
    if (!strcmp(name, "qparams")) {
        gcc_jit_lvalue *q = jit_temp(f, j->t_qparams);
        gcc_jit_rvalue *s = jit_now(f, jit_cast(j, jit_expr(f, k[0]), j->t_f64));
        gcc_jit_rvalue *z = jit_now(f, jit_cast(j, jit_expr(f, k[1]), j->t_i64));
        gcc_jit_block_add_assignment(jit_cur(f), NULL, gcc_jit_lvalue_access_field(q, NULL, j->f_qp_scale), s);
        gcc_jit_block_add_assignment(jit_cur(f), NULL, gcc_jit_lvalue_access_field(q, NULL, j->f_qp_zero), z);
        return gcc_jit_lvalue_as_rvalue(q);
    }
    if (!strcmp(name, "attr")) { /* the affine rule's node (v = -1); a string attribute is only compared */
        int fl = qc_is_float(jit_ty(k[1]));
        gcc_jit_rvalue *args[4] = {f->mt, jit_lng(j, j->t_i64, -1), gcc_jit_context_new_string_literal(j->c, k[0]->name),
                                   jit_now(f, jit_cast(j, jit_expr(f, k[1]), fl ? j->t_f64 : j->t_i64))};
        return jit_now(f, jit_call_imp(f, fl ? IMP_ATTR_FLOAT : IMP_ATTR_INT, 4, args));
    }
    if (!strcmp(name, "attr_ints")) {
        gcc_jit_rvalue *args[3] = {f->mt, jit_lng(j, j->t_i64, -1), gcc_jit_context_new_string_literal(j->c, k[0]->name)};
        return jit_now(f, jit_cast(j, jit_call_imp(f, IMP_ATTR_INTS, 3, args), j->p_array));
    }
    if (!strcmp(name, "value")) { /* a scalar constant's value (NaN for anything else) */
        const qc_sym *in = k[0]->sym;
        gcc_jit_rvalue *args[2] = {f->mt, in && in->kind == QC_SYM_AFF_IN ? jit_lng(j, j->t_i64, in->index) : jit_expr(f, k[0])};
        return jit_now(f, jit_call_imp(f, IMP_VALUE_SCALAR, 2, args));
    }
    if (!strcmp(name, "const") || !strcmp(name, "present") || !strcmp(name, "rank") || !strcmp(name, "dim")) {
        gcc_jit_rvalue *args[3] = {f->mt, jit_expr(f, k[0]), NULL};
        if (!strcmp(name, "dim")) {
            args[2] = jit_now(f, jit_cast(j, jit_expr(f, k[1]), j->t_i64));
            return jit_now(f, jit_call_imp(f, IMP_VALUE_DIM, 3, args));
        }
        int imp = !strcmp(name, "const") ? IMP_VALUE_CONST : !strcmp(name, "present") ? IMP_VALUE_PRESENT : IMP_VALUE_RANK;
        gcc_jit_rvalue *r = jit_now(f, jit_call_imp(f, imp, 2, args));
        return imp == IMP_VALUE_RANK ? r : jit_cmp(j, GCC_JIT_COMPARISON_NE, r, jit_lng(j, j->t_i64, 0));
    }
    const qc_type *at = jit_ty(k[0]);
    gcc_jit_rvalue *x = jit_now(f, jit_cast(j, jit_expr(f, k[0]), jit_type_of(j, at)));
    int f32 = at->k == QC_F32;
    if (!strcmp(name, "isnan"))
        return jit_cmp(j, GCC_JIT_COMPARISON_NE, x, x);
    if (!strcmp(name, "isinf"))
        return jit_cmp(j, GCC_JIT_COMPARISON_EQ, jit_builtin1(j, f32 ? "__builtin_fabsf" : "__builtin_fabs", x),
                   jit_dbl(j, jit_type_of(j, at), INFINITY));
    if (!strcmp(name, "floor") || !strcmp(name, "ceil") || !strcmp(name, "trunc") || !strcmp(name, "sqrt")) {
        char b[32];
        snprintf(b, sizeof b, "__builtin_%s%s", name, f32 ? "f" : "");
        return jit_builtin1(j, b, x);
    }
    if (!strncmp(name, "round_", 6))
        return rounding(f, name, x);
    int imp = !strcmp(name, "exp") ? IMP_EXP : !strcmp(name, "log") ? IMP_LOG : !strcmp(name, "log2") ? IMP_LOG2
            : !strcmp(name, "tanh") ? IMP_TANH : !strcmp(name, "erf") ? IMP_ERF : IMP_POW;
    gcc_jit_rvalue *args[2] = {jit_cast(j, x, j->t_f64), NULL};
    if (imp == IMP_POW)
        args[1] = jit_now(f, jit_cast(j, jit_expr(f, k[1]), j->t_f64));
    return jit_cast(j, jit_now(f, jit_call_imp(f, imp, imp == IMP_POW ? 2 : 1, args)), jt);
}

static gcc_jit_rvalue *method_call(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const ql_node *recv = n->a->a;
    const char *m = n->a->name;
    const qc_type *rt = jit_ty(recv);
    gcc_jit_rvalue *obj = jit_now(f, jit_expr(f, recv));
    if (rt->k == QC_TENSOR) {
        if (!strcmp(m, "dim")) {
            gcc_jit_rvalue *i = jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64));
            gcc_jit_rvalue *rank = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(obj, NULL, j->f_tv_rank));
            jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_GE, jit_cast(j, i, j->t_u64), jit_cast(j, rank, j->t_u64)), QRL_TRAP_INDEX,
                  n->kids[0], i, rank);
            gcc_jit_lvalue *dims = gcc_jit_rvalue_dereference_field(obj, NULL, j->f_tv_dims);
            return jit_now(f, gcc_jit_lvalue_as_rvalue(
                              gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_lvalue_as_rvalue(dims), i)));
        }
        if (!strcmp(m, "quantile")) {
            gcc_jit_rvalue *args[3] = {f->rt, obj, jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_f64))};
            gcc_jit_rvalue *r = jit_now(f, jit_call_imp(f, IMP_TQUANTILE, 3, args));
            jit_check_failed(f);
            return r;
        }
        int imp = !strcmp(m, "min") ? IMP_TMIN : !strcmp(m, "max") ? IMP_TMAX : !strcmp(m, "absmax") ? IMP_TABSMAX : IMP_TSUM;
        return jit_now(f, jit_call_imp(f, imp, 1, &obj));
    }
    if (rt->k == QC_HIST) {
        if (!strcmp(m, "add") || !strcmp(m, "add_abs")) {
            /* h.add(x): every element (to = INT64_MIN: the end); h.add(x, from, to): elements [from, to) */
            gcc_jit_rvalue *args[6] = {f->rt, obj, jit_now(f, jit_expr(f, n->kids[0])),
                                       jit_lng(j, j->t_i64, !strcmp(m, "add_abs")), jit_lng(j, j->t_i64, 0),
                                       jit_lng(j, j->t_i64, INT64_MIN)};
            for (int i = 1; i < 3 && n->nkids == 3; i++)
                args[3 + i] = jit_now(f, jit_cast(j, jit_expr(f, n->kids[i]), j->t_i64));
            gcc_jit_block_add_eval(jit_cur(f), NULL, jit_call_imp(f, IMP_HIST_ADD, 6, args));
            jit_check_failed(f);
            return jit_lng(j, j->t_i64, 0);
        }
        if (!strcmp(m, "merge")) {
            gcc_jit_rvalue *args[3] = {f->rt, obj, jit_now(f, jit_expr(f, n->kids[0]))};
            gcc_jit_block_add_eval(jit_cur(f), NULL, jit_call_imp(f, IMP_HIST_MERGE, 3, args));
            jit_check_failed(f);
            return jit_lng(j, j->t_i64, 0);
        }
        int imp = !strcmp(m, "quantile") ? IMP_HIST_QUANTILE : !strcmp(m, "bin") ? IMP_HIST_BIN : IMP_HIST_EDGE;
        gcc_jit_rvalue *args[2] = {obj, jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), imp == IMP_HIST_QUANTILE ? j->t_f64 : j->t_i64))};
        return jit_now(f, jit_call_imp(f, imp, 2, args));
    }
    if (rt->k == QC_GRAM) {
        if (!strcmp(m, "add") || !strcmp(m, "merge")) {
            gcc_jit_rvalue *args[3] = {f->rt, obj, jit_now(f, jit_expr(f, n->kids[0]))};
            gcc_jit_block_add_eval(jit_cur(f), NULL, jit_call_imp(f, !strcmp(m, "add") ? IMP_GRAM_ADD : IMP_GRAM_MERGE, 3, args));
            jit_check_failed(f);
            return jit_lng(j, j->t_i64, 0);
        }
        if (!strcmp(m, "at")) {
            gcc_jit_rvalue *args[4] = {f->rt, obj, jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64)),
                                       jit_now(f, jit_cast(j, jit_expr(f, n->kids[1]), j->t_i64))};
            gcc_jit_rvalue *r = jit_now(f, jit_call_imp(f, IMP_GRAM_AT, 4, args));
            jit_check_failed(f);
            return r;
        }
        /* inverse_factor(c, lambda) */
        gcc_jit_rvalue *args[4] = {f->rt, obj, jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_f64)),
                                   jit_now(f, jit_cast(j, jit_expr(f, n->kids[1]), j->t_f64))};
        gcc_jit_rvalue *r = jit_now(f, jit_cast(j, jit_call_imp(f, IMP_GRAM_FACTOR, 4, args), j->p_tview));
        jit_check_failed(f);
        return r;
    }
    if (rt->k == QC_VALUE) {
        if (!strcmp(m, "dim")) {
            gcc_jit_rvalue *args[3] = {f->mt, obj, jit_now(f, jit_cast(j, jit_expr(f, n->kids[0]), j->t_i64))};
            return jit_now(f, jit_call_imp(f, IMP_VALUE_DIM, 3, args));
        }
        if (!strcmp(m, "attr_ints")) {
            gcc_jit_rvalue *args[3] = {f->mt, obj, gcc_jit_context_new_string_literal(j->c, n->kids[0]->name)};
            return jit_now(f, jit_cast(j, jit_call_imp(f, IMP_ATTR_INTS, 3, args), j->p_array));
        }
        /* attr(name, default): integer or float by the default's type */
        int fl = qc_is_float(jit_ty(n->kids[1]));
        gcc_jit_rvalue *args[4] = {f->mt, obj, gcc_jit_context_new_string_literal(j->c, n->kids[0]->name),
                                   jit_now(f, jit_cast(j, jit_expr(f, n->kids[1]), fl ? j->t_f64 : j->t_i64))};
        return jit_now(f, jit_call_imp(f, fl ? IMP_ATTR_FLOAT : IMP_ATTR_INT, 4, args));
    }
    return jit_lng(j, j->t_i64, 0);
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
    const qc_type *t = jit_ty(n->a);
    const char *m = n->name;
    if (t->k == QC_STATE) { /* o.field in merge: an array by its address, as the calibrator's own (name_rv) */
        gcc_jit_lvalue *lv = lvalue(f, n);
        return jit_ty(n)->k == QC_ARRAY ? gcc_jit_lvalue_get_address(lv, NULL) : gcc_jit_lvalue_as_rvalue(lv);
    }
    const qc_sym *base = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (base && base->kind == QC_SYM_AFF_IN) { /* x.zero, x.scale in an affine body */
        gcc_jit_rvalue *arr = !strcmp(m, "zero") ? f->aff_zero : f->aff_scale;
        return gcc_jit_lvalue_as_rvalue(gcc_jit_context_new_array_access(j->c, NULL, arr, jit_lng(j, j->t_i64, base->index)));
    }
    if (t->k == QC_VALUE) {
        gcc_jit_rvalue *args[2] = {f->mt, jit_expr(f, n->a)};
        int imp = !strcmp(m, "rank") ? IMP_VALUE_RANK : !strcmp(m, "const") ? IMP_VALUE_CONST : IMP_VALUE_PRESENT;
        gcc_jit_rvalue *r = jit_now(f, jit_call_imp(f, imp, 2, args));
        return imp == IMP_VALUE_RANK ? r : jit_cmp(j, GCC_JIT_COMPARISON_NE, r, jit_lng(j, j->t_i64, 0));
    }
    gcc_jit_rvalue *obj = jit_now(f, jit_expr(f, n->a));
    switch (t->k) {
    case QC_TENSOR:
        return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(
            obj, NULL, !strcmp(m, "numel") ? j->f_tv_numel : !strcmp(m, "rank") ? j->f_tv_rank
                     : !strcmp(m, "first")  ? j->f_tv_first : j->f_tv_samples));
    case QC_ARRAY: return gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(obj, NULL, j->f_arr_len));
    case QC_GRAM: return jit_now(f, jit_call_imp(f, !strcmp(m, "dim") ? IMP_GRAM_DIM : IMP_GRAM_ROWS, 1, &obj));
    case QC_HIST: {
        int imp = !strcmp(m, "count") ? IMP_HIST_COUNT : !strcmp(m, "lo") ? IMP_HIST_LO : !strcmp(m, "hi") ? IMP_HIST_HI
                : !strcmp(m, "width") ? IMP_HIST_WIDTH : !strcmp(m, "min") ? IMP_HIST_MIN : !strcmp(m, "max") ? IMP_HIST_MAX
                : IMP_HIST_BINS;
        return jit_now(f, jit_call_imp(f, imp, 1, &obj));
    }
    case QC_QTYPE: {
        int i = qc_qtype_field(m);
        if (i < 0)
            break;
        gcc_jit_rvalue *v = gcc_jit_rvalue_access_field(obj, NULL, j->f_qt[i]);
        return i >= QC_QTYPE_INTS ? jit_cmp(j, GCC_JIT_COMPARISON_NE, v, jit_lng(j, j->t_i64, 0)) : v;
    }
    case QC_QPARAMS:
        return gcc_jit_rvalue_access_field(obj, NULL, !strcmp(m, "scale") ? j->f_qp_scale : j->f_qp_zero);
    default: break;
    }
    return jit_lng(j, j->t_i64, 0);
}

gcc_jit_rvalue *jit_expr(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    const qc_type *t = jit_ty(n);
    switch (n->kind) {
    case QL_INT:
        if (qc_is_float(t))
            return jit_dbl(j, jit_type_of(j, t), (double)n->ival);
        return jit_cast(j, jit_lng(j, j->t_i64, (long)n->ival), jit_type_of(j, t));
    case QL_FLOAT: return jit_dbl(j, jit_type_of(j, t), n->fval);
    case QL_BOOL: return gcc_jit_context_new_rvalue_from_int(j->c, j->t_bool, n->ival != 0);
    case QL_NAME: return name_rv(f, n);
    case QL_UNARY: {
        /* a negative literal: fold so that -128 as i8 never overflows */
        int64_t v;
        if (n->op == QL_TOK_MINUS && n->a->kind == QL_INT && qc_is_int(t)) {
            v = n->a->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->a->ival;
            return jit_cast(j, jit_lng(j, j->t_i64, (long)v), jit_type_of(j, t));
        }
        if (n->op == QL_TOK_MINUS && n->a->kind == QL_FLOAT)
            return jit_dbl(j, jit_type_of(j, t), -n->a->fval);
        return unary(f, n);
    }
    case QL_BINARY: return binary(f, n);
    case QL_CALL: return call_expr(f, n);
    case QL_FIELD: return field_expr(f, n);
    case QL_INDEX: return gcc_jit_lvalue_as_rvalue(element(f, n));
    case QL_CAST:
    case QL_SAT: return conversion(f, n);
    default: return jit_lng(j, j->t_i64, 0);
    }
}

static gcc_jit_lvalue *lvalue(fgen *f, const ql_node *n)
{
    if (n->kind == QL_INDEX)
        return element(f, n);
    if (n->kind == QL_FIELD) { /* o.field */
        return jit_state_lvalue(f, f->other, n->sym);
    }
    const qc_sym *s = n->sym;
    if (s->kind == QC_SYM_STATE)
        return jit_state_lvalue(f, f->state, s);
    if (s->kind == QC_SYM_AFF_OUT)
        return f->aff_y;
    return f->locals[s->index];
}

/* ----------------------------------------------------------- statements */


static void do_return(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    if (f->ret_qparams_out) {
        gcc_jit_rvalue *v = jit_now(f, jit_expr(f, n->a));
        gcc_jit_block_add_assignment(jit_cur(f), NULL, f->out, v);
        gcc_jit_block_end_with_void_return(jit_cur(f), NULL);
    } else if (n->a && f->ret != j->t_void) {
        gcc_jit_rvalue *v = jit_now(f, jit_cast(j, jit_expr(f, n->a), f->ret));
        gcc_jit_block_end_with_return(jit_cur(f), NULL, v);
    } else {
        gcc_jit_block_end_with_void_return(jit_cur(f), NULL);
    }
    f->b = NULL;
}

/* Whether e is len(a), a.len or a.numel: the loop's bound of a. */
const qc_sym *jit_bounded_by(const ql_node *e)
{
    if (e->kind == QL_CALL && e->a->kind == QL_NAME && !strcmp(e->a->name, "len") && e->nkids == 1 &&
        e->kids[0]->kind == QL_NAME)
        return e->kids[0]->sym;
    if (e->kind == QL_FIELD && (!strcmp(e->name, "len") || !strcmp(e->name, "numel")) && e->a->kind == QL_NAME)
        return e->a->sym;
    return NULL;
}

void jit_stmt(fgen *f, const ql_node *n)
{
    jit *j = f->j;
    switch (n->kind) {
    case QL_LET: {
        const qc_sym *s = n->sym;
        gcc_jit_rvalue *v = jit_cast(j, jit_expr(f, n->b), jit_type_of(j, s->type));
        gcc_jit_block_add_assignment(jit_cur(f), NULL, f->locals[s->index], v);
        break;
    }
    case QL_ASSIGN: {
        const qc_type *t = jit_ty(n->a);
        if (n->op == QL_TOK_ASSIGN) {
            gcc_jit_rvalue *v = jit_now(f, jit_cast(j, jit_expr(f, n->b), jit_type_of(j, t)));
            gcc_jit_block_add_assignment(jit_cur(f), NULL, lvalue(f, n->a), v);
        } else {
            gcc_jit_lvalue *lv = lvalue(f, n->a);
            gcc_jit_rvalue *old = jit_now(f, gcc_jit_lvalue_as_rvalue(lv));
            gcc_jit_rvalue *v = jit_now(f, jit_cast(j, jit_expr(f, n->b), jit_type_of(j, t)));
            ql_tok op = n->op == QL_TOK_PLUSEQ ? QL_TOK_PLUS : n->op == QL_TOK_MINUSEQ ? QL_TOK_MINUS
                      : n->op == QL_TOK_STAREQ ? QL_TOK_STAR : QL_TOK_SLASH;
            gcc_jit_rvalue *r = jit_now(f, arith(f, op, t, old, v, n));
            gcc_jit_block_add_assignment(jit_cur(f), NULL, lv, r);
        }
        break;
    }
    case QL_EXPR_STMT: {
        gcc_jit_rvalue *v = jit_expr(f, n->a);
        (void)v;
        break;
    }
    case QL_IF: {
        gcc_jit_rvalue *c = jit_now(f, jit_expr(f, n->a));
        gcc_jit_block *yes = jit_new_block(f), *no = jit_new_block(f), *join = jit_new_block(f);
        gcc_jit_block_end_with_conditional(jit_cur(f), NULL, c, yes, n->c ? no : join);
        f->b = yes;
        jit_stmts(f, n->b);
        if (f->b)
            gcc_jit_block_end_with_jump(f->b, NULL, join);
        if (n->c) {
            f->b = no;
            if (n->c->kind == QL_IF)
                jit_stmt(f, n->c);
            else
                jit_stmts(f, n->c);
            if (f->b)
                gcc_jit_block_end_with_jump(f->b, NULL, join);
        } else {
            gcc_jit_block_end_with_jump(no, NULL, join);
        }
        f->b = join;
        break;
    }
    case QL_WHILE: {
        gcc_jit_block *test = jit_new_block(f), *body = jit_new_block(f), *done = jit_new_block(f);
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, test);
        f->b = test;
        jit_burn_fuel(f, n, jit_lng(j, j->t_i64, 1));
        gcc_jit_rvalue *c = jit_now(f, jit_expr(f, n->a));
        gcc_jit_block_end_with_conditional(jit_cur(f), NULL, c, body, done);
        f->brk[f->nloops] = done;
        f->cont[f->nloops++] = test;
        f->b = body;
        jit_stmts(f, n->c);
        if (f->b)
            gcc_jit_block_end_with_jump(f->b, NULL, test);
        f->nloops--;
        f->b = done;
        break;
    }
    case QL_FOR: jit_for_loop(f, n); break;
    case QL_RETURN: do_return(f, n); break;
    case QL_BREAK:
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, f->brk[f->nloops - 1]);
        f->b = NULL;
        break;
    case QL_CONTINUE:
        gcc_jit_block_end_with_jump(jit_cur(f), NULL, f->cont[f->nloops - 1]);
        f->b = NULL;
        break;
    case QL_BLOCK: jit_stmts(f, n); break;
    default: break;
    }
}

void jit_stmts(fgen *f, const ql_node *b)
{
    for (int i = 0; i < b->nkids; i++)
        jit_stmt(f, b->kids[i]);
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
            f->locals[s->index] = gcc_jit_function_new_local(f->fn, NULL, jit_type_of(f->j, s->type), name);
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

void jit_begin_body(fgen *f, const ql_node *body)
{
    f->nlocals = count_locals(body);
    f->locals = calloc((size_t)f->nlocals + 1, sizeof *f->locals);
    collect_locals(f, body);
    f->b = jit_new_block(f);
}

void jit_end_body(fgen *f)
{
    if (f->b)
        jit_return_default(f, f->b);
    f->b = NULL;
    free(f->locals);
    f->locals = NULL;
}
