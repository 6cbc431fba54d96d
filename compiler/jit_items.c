/* The lowering of items (see jit.c): fns and kernels (their C names,
 * typed parameters and generic thunks), calibrators (defaults, init, observe,
 * merge, solve), patterns, affine rules and recipes (the functions their
 * clauses compile to), and the module's entry, qrl_module_entry, which
 * registers them all with the runtime (runtime/recipe.h). */
#include "jit_int.h"
#include "pointwise.h"
#include "reads.h"
#include "vecmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void jit_declare_fn(jit *j, int idx)
{
    const qc_sym *s = j->u->items[idx];
    const ql_node *ps = s->decl->a;
    int np = ps ? ps->nkids : 0;
    gcc_jit_param **params = calloc((size_t)np + 1, sizeof *params);
    params[0] = gcc_jit_context_new_param(j->c, NULL, j->p_rt, "rt");
    for (int i = 0; i < np; i++)
        params[i + 1] = gcc_jit_context_new_param(j->c, NULL, jit_type_of(j, ps->kids[i]->type), ps->kids[i]->name);
    char name[300], cn[280];
    snprintf(name, sizeof name, "qrl_%s_%s", s->kind == QC_SYM_KERNEL ? "kernel" : "fn", c_name(s, idx, cn, sizeof cn));
    j->fns[idx] = gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_INTERNAL,
                                               s->decl->b ? jit_type_of(j, s->decl->b->type) : j->t_void, name, np + 1,
                                               params, 0);
    free(params);
}

/* A kernel's declared shapes, at its entry (check_items.c, kernel_shapes): each shaped tensor's
 * rank and dimensions are checked, a trap naming the dimension's place in the declaration, and
 * each dimension name is bound where it first appears. */
static void kernel_shapes(fgen *f, const ql_node *k)
{
    jit *j = f->j;
    const ql_node *ps = k->a;
    int need = f->nlocals;
    for (int i = 0; ps && i < ps->nkids; i++) {
        const ql_node *tt = ps->kids[i]->a;
        for (int d = 0; tt && tt->kind == QL_TYPE_TENSOR && d < tt->nkids; d++) {
            const qc_sym *s = tt->kids[d]->sym;
            if (s && s->kind == QC_SYM_DIM && s->index + 1 > need)
                need = s->index + 1;
        }
    }
    if (need > f->nlocals) {
        gcc_jit_lvalue **v = realloc(f->locals, sizeof *v * (size_t)(need + 1));
        if (!v)
            return; /* the compilation fails on the missing local */
        memset(v + f->nlocals, 0, sizeof *v * (size_t)(need + 1 - f->nlocals));
        f->locals = v;
        f->nlocals = need;
    }
    for (int i = 0; ps && i < ps->nkids && i < QC_MAX_PARAMS; i++) {
        const ql_node *tt = ps->kids[i]->a;
        if (!tt || tt->kind != QL_TYPE_TENSOR || !tt->flag || !tt->nkids)
            continue;
        gcc_jit_rvalue *v = gcc_jit_param_as_rvalue(f->fparams[i]);
        gcc_jit_rvalue *rank = jit_now(f, gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(v, NULL, j->f_tv_rank)));
        int rest = tt->kids[0]->kind == QL_DIM_REST, n = tt->nkids - rest;
        jit_check(f, jit_cmp(j, rest ? GCC_JIT_COMPARISON_LT : GCC_JIT_COMPARISON_NE, rank, jit_lng(j, j->t_i64, n)),
                  QRL_TRAP_SHAPE_RANK, tt, rank, jit_lng(j, j->t_i64, rest ? -n : n));
        for (int d = rest; d < tt->nkids; d++) {
            const ql_node *dn = tt->kids[d];
            const qc_sym *s = dn->sym;
            gcc_jit_rvalue *at = rest ? jit_bin(j, GCC_JIT_BINARY_OP_MINUS, j->t_i64, rank, jit_lng(j, j->t_i64, tt->nkids - d))
                                      : jit_lng(j, j->t_i64, d);
            gcc_jit_lvalue *dims = gcc_jit_rvalue_dereference_field(v, NULL, j->f_tv_dims);
            gcc_jit_rvalue *dim = jit_now(f, gcc_jit_lvalue_as_rvalue(
                                                 gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_lvalue_as_rvalue(dims), at)));
            gcc_jit_rvalue *want = NULL;
            if (dn->kind == QL_INT)
                want = jit_lng(j, j->t_i64, (long)dn->ival);
            else if (s && s->kind == QC_SYM_DIM && s->decl == dn) {
                char name[300];
                snprintf(name, sizeof name, "%s_dim%d", s->name, s->index);
                f->locals[s->index] = gcc_jit_function_new_local(f->fn, NULL, j->t_i64, name);
                gcc_jit_block_add_assignment(jit_cur(f), NULL, f->locals[s->index], dim);
            } else if (s && s->kind == QC_SYM_DIM && f->locals[s->index])
                want = gcc_jit_lvalue_as_rvalue(f->locals[s->index]);
            if (want)
                jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_NE, dim, want), QRL_TRAP_SHAPE, dn, dim, want);
        }
    }
}

void jit_define_fn(jit *j, int idx)
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
    f.ret = s->decl->b ? jit_type_of(j, s->decl->b->type) : j->t_void;
    jit_begin_body(&f, s->decl->c);
    if (s->kind == QC_SYM_KERNEL)
        kernel_shapes(&f, s->decl);
    jit_stmts(&f, s->decl->c);
    jit_end_body(&f);
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
            gcc_jit_context_new_array_access(j->c, NULL, gcc_jit_param_as_rvalue(p[1]), jit_lng(j, j->t_i64, i)));
        gcc_jit_type *t = jit_type_of(j, ps->kids[i]->type);
        if (t == j->p_tview || t == j->p_array)
            args[i + 1] = jit_cast(j, a, t);
        else
            args[i + 1] = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference(jit_cast(j, a, gcc_jit_type_get_pointer(t)), NULL));
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

/* A calibrator's function: its name, parameters and the fgen that writes its body. */
static fgen cal_fn(jit *j, const qc_sym *s, const char *part, int n, gcc_jit_type **ts, const char **ns,
                   gcc_jit_function **out)
{
    char name[300];
    snprintf(name, sizeof name, "qrl_cal_%s_%s", s->name, part);
    fgen f = {.j = j, .file = s->file->src->path, .cal = s->decl, .ret = j->t_void};
    f.fn = *out = new_fn(j, name, j->t_void, n, ts, ns);
    f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
    return f;
}

static gcc_jit_rvalue *param_rv(const fgen *f, int i)
{
    return gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f->fn, i));
}

/* defaults(rt, params): each parameter's default into its slot (i64 or f64). */
static void cal_defaults(jit *j, const qc_sym *s, cal_fns *out)
{
    const ql_node *cal = s->decl;
    gcc_jit_type *ts[2] = {j->p_rt, gcc_jit_type_get_pointer(j->t_i64)};
    const char *ns[2] = {"rt", "params"};
    fgen f = cal_fn(j, s, "defaults", 2, ts, ns, &out->defaults);
    f.params = param_rv(&f, 1);
    f.b = jit_new_block(&f);
    for (int i = 0; cal->a && i < cal->a->nkids; i++) {
        const ql_node *p = cal->a->kids[i];
        if (!p->b)
            continue;
        int fl = qc_is_float(p->type);
        gcc_jit_type *st = fl ? j->t_f64 : j->t_i64;
        gcc_jit_lvalue *dst = gcc_jit_context_new_array_access(j->c, NULL, jit_cast(j, f.params, gcc_jit_type_get_pointer(st)),
                                                               jit_lng(j, j->t_i64, i));
        gcc_jit_rvalue *v = jit_expr(&f, p->b);
        gcc_jit_block_add_assignment(jit_cur(&f), NULL, dst, jit_cast(j, v, st));
    }
    jit_end_body(&f);
}

/* One state variable's first value: a new histogram, an array's memory, or its initializer. */
static void init_state(fgen *f, const ql_node *k)
{
    jit *j = f->j;
    const qc_sym *st = k->sym;
    gcc_jit_lvalue *lv = jit_state_lvalue(f, f->state, st);
    if (st->type->k == QC_GRAM) {
        gcc_jit_block_add_assignment(jit_cur(f), NULL, lv, jit_now(f, jit_call_imp(f, IMP_GRAM_NEW, 1, &f->rt)));
        jit_check_failed(f);
    } else if (st->type->k == QC_HIST) {
        gcc_jit_rvalue *bins = jit_now(f, jit_cast(j, jit_expr(f, k->a->kids[0]), j->t_i64));
        gcc_jit_rvalue *args[2] = {f->rt, bins};
        gcc_jit_block_add_assignment(jit_cur(f), NULL, lv, jit_now(f, jit_call_imp(f, IMP_HIST_NEW, 2, args)));
        jit_check_failed(f);
    } else if (st->type->k == QC_ARRAY) {
        gcc_jit_rvalue *len = jit_now(f, jit_cast(j, jit_expr(f, k->a->b), j->t_i64));
        jit_check(f, jit_cmp(j, GCC_JIT_COMPARISON_GT, jit_cast(j, len, j->t_u64), jit_lng(j, j->t_u64, 1L << 28)),
                  QRL_TRAP_NOMEM, k, len, NULL);
        int es = qc_type_bits(st->type->elem) / 8;
        gcc_jit_rvalue *args[2] = {f->rt, jit_bin(j, GCC_JIT_BINARY_OP_MULT, j->t_i64, len, jit_lng(j, j->t_i64, es))};
        gcc_jit_rvalue *mem = jit_now(f, jit_call_imp(f, IMP_STATE_ALLOC, 2, args));
        jit_check_failed(f);
        gcc_jit_block_add_assignment(jit_cur(f), NULL, gcc_jit_lvalue_access_field(lv, NULL, j->f_arr_data), mem);
        gcc_jit_block_add_assignment(jit_cur(f), NULL, gcc_jit_lvalue_access_field(lv, NULL, j->f_arr_len), len);
    } else if (k->b) {
        gcc_jit_block_add_assignment(jit_cur(f), NULL, lv, jit_cast(j, jit_expr(f, k->b), jit_type_of(j, st->type)));
    }
}

/* init(rt, state, params) */
static void cal_init(jit *j, const qc_sym *s, cal_fns *out)
{
    const ql_node *cal = s->decl;
    gcc_jit_type *ts[3] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_i64)};
    const char *ns[3] = {"rt", "state", "params"};
    fgen f = cal_fn(j, s, "init", 3, ts, ns, &out->init);
    f.state = param_rv(&f, 1);
    f.params = param_rv(&f, 2);
    f.b = jit_new_block(&f);
    for (int i = 0; i < cal->nkids; i++)
        if (cal->kids[i]->kind == QL_STATE)
            init_state(&f, cal->kids[i]);
    jit_end_body(&f);
}

/* observe(rt, state, params, x) */
static void cal_observe(jit *j, const qc_sym *s, const ql_node *k, cal_fns *out)
{
    gcc_jit_type *ts[4] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_i64), j->p_tview};
    const char *ns[4] = {"rt", "state", "params", "x"};
    fgen f = cal_fn(j, s, "observe", 4, ts, ns, &out->observe);
    f.state = param_rv(&f, 1);
    f.params = param_rv(&f, 2);
    gcc_jit_param *xp = gcc_jit_function_get_param(f.fn, 3);
    f.fparams = &xp;
    jit_begin_body(&f, k->c);
    jit_stmts(&f, k->c);
    jit_end_body(&f);
}

/* merge(rt, state, other, params) */
static void cal_merge(jit *j, const qc_sym *s, const ql_node *k, cal_fns *out)
{
    gcc_jit_type *ts[4] = {j->p_rt, j->t_voidp, j->t_voidp, gcc_jit_type_get_pointer(j->t_i64)};
    const char *ns[4] = {"rt", "state", "other", "params"};
    fgen f = cal_fn(j, s, "merge", 4, ts, ns, &out->merge);
    f.state = param_rv(&f, 1);
    f.other = param_rv(&f, 2);
    f.params = param_rv(&f, 3);
    jit_begin_body(&f, k->c);
    jit_stmts(&f, k->c);
    jit_end_body(&f);
}

/* A layer calibrator's solve(rt, state, params, w, t, block, scale, zero): qrl_cal_solve_layer_fn */
static void cal_solve_layer(jit *j, const qc_sym *s, const ql_node *k, cal_fns *out)
{
    gcc_jit_type *ts[8] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_i64), j->p_tview,
                           j->p_qtype, j->t_i64, j->p_tview, j->p_tview};
    const char *ns[8] = {"rt", "state", "params", "w", "t", "block", "scale", "zero"};
    fgen f = cal_fn(j, s, "solve", 8, ts, ns, &out->solve);
    f.state = param_rv(&f, 1);
    f.params = param_rv(&f, 2);
    gcc_jit_param *ps[5];
    for (int i = 0; i < 5; i++) /* the QRL parameters (w, t, block, scale, zero); t is read through f.qt */
        ps[i] = gcc_jit_function_get_param(f.fn, 3 + i);
    f.fparams = ps;
    jit_begin_body(&f, k->c);
    gcc_jit_lvalue *tl = gcc_jit_function_new_local(f.fn, NULL, j->t_qtype, "t_value");
    gcc_jit_block_add_assignment(f.b, NULL, tl, gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference(param_rv(&f, 4), NULL)));
    f.qt = gcc_jit_lvalue_as_rvalue(tl);
    jit_stmts(&f, k->c);
    jit_end_body(&f);
}

/* solve(rt, state, params, t, out): its result goes to *out */
static void cal_solve(jit *j, const qc_sym *s, const ql_node *k, cal_fns *out)
{
    gcc_jit_type *ts[5] = {j->p_rt, j->t_voidp, gcc_jit_type_get_pointer(j->t_i64), j->p_qtype, j->p_qparams};
    const char *ns[5] = {"rt", "state", "params", "t", "out"};
    fgen f = cal_fn(j, s, "solve", 5, ts, ns, &out->solve);
    f.ret_qparams_out = 1;
    f.state = param_rv(&f, 1);
    f.params = param_rv(&f, 2);
    f.out = gcc_jit_rvalue_dereference(param_rv(&f, 4), NULL);
    jit_begin_body(&f, k->c);
    /* solve's t, copied once into a local of the struct type */
    gcc_jit_lvalue *tl = gcc_jit_function_new_local(f.fn, NULL, j->t_qtype, "t_value");
    gcc_jit_block_add_assignment(f.b, NULL, tl, gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference(param_rv(&f, 3), NULL)));
    f.qt = gcc_jit_lvalue_as_rvalue(tl);
    jit_stmts(&f, k->c);
    jit_end_body(&f);
}

void jit_calibrator(jit *j, const qc_sym *s, cal_fns *out)
{
    const ql_node *cal = s->decl;
    cal_defaults(j, s, out);
    cal_init(j, s, out);
    for (int i = 0; i < cal->nkids; i++) {
        const ql_node *k = cal->kids[i];
        if (k->kind == QL_OBSERVE)
            cal_observe(j, s, k, out);
        else if (k->kind == QL_MERGE)
            cal_merge(j, s, k, out);
        else if (k->kind == QL_SOLVE && !k->b)
            cal_solve_layer(j, s, k, out);
        else if (k->kind == QL_SOLVE)
            cal_solve(j, s, k, out);
    }
}

/* ------------------------------------------- patterns, affine rules, recipes */

static fgen fn_begin(jit *j, const qc_sym *s, const char *name, gcc_jit_type *ret, int n, gcc_jit_type **types,
                     const char **names)
{
    fgen f = {.j = j, .file = s->file->src->path, .ret = ret};
    f.fn = new_fn(j, name, ret, n, types, names);
    f.rt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 0));
    f.b = jit_new_block(&f);
    return f;
}

void jit_pattern_fns(jit *j, const qc_sym *s, item_fns *out)
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
                gcc_jit_rvalue *c = jit_now(&f, jit_expr(&f, preds[q]));
                gcc_jit_block *no = jit_new_block(&f), *yes = jit_new_block(&f);
                gcc_jit_block_end_with_conditional(jit_cur(&f), NULL, c, yes, no);
                gcc_jit_block_end_with_return(no, NULL, jit_lng(j, j->t_i64, 0));
                f.b = yes;
            }
        }
        gcc_jit_block_end_with_return(jit_cur(&f), NULL, jit_lng(j, j->t_i64, 1));
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
            gcc_jit_block_add_assignment(jit_cur(&f), NULL, gcc_jit_context_new_array_access(j->c, NULL, o, jit_lng(j, j->t_i64, k++)),
                                         jit_to_f64(j, jit_expr(&f, e)));
        }
        }
        gcc_jit_block_end_with_void_return(jit_cur(&f), NULL);
        out->consts = f.fn;
    }
}

/* An affine rule's functions all take the rule's node as a match (inputs, output; attributes at v = -1). */
void jit_affine_fns(jit *j, const qc_sym *s, item_fns *out)
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
        gcc_jit_rvalue *c = jit_now(&f, jit_expr(&f, n->b));
        gcc_jit_block_end_with_return(jit_cur(&f), NULL, jit_cast(j, c, j->t_i64));
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
            sc = jit_cast(j, jit_expr(&f, n->a->a), j->t_f64);
            zp = jit_cast(j, jit_expr(&f, n->a->b), j->t_i64);
        } else { /* fixed(t => qparams): t is the recipe's output type */
            f.table_v = gcc_jit_lvalue_as_rvalue(
                gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2)), NULL));
            gcc_jit_rvalue *qp = jit_now(&f, jit_expr(&f, n->a->a));
            sc = gcc_jit_rvalue_access_field(qp, NULL, j->f_qp_scale);
            zp = gcc_jit_rvalue_access_field(qp, NULL, j->f_qp_zero);
        }
        gcc_jit_block_add_assignment(jit_cur(&f), NULL,
                                     gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3)), NULL),
                                     sc);
        gcc_jit_block_add_assignment(jit_cur(&f), NULL,
                                     gcc_jit_rvalue_dereference(gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 4)), NULL),
                                     zp);
        gcc_jit_block_end_with_void_return(jit_cur(&f), NULL);
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
        jit_begin_body(&f, body);
        f.aff_y = gcc_jit_function_new_local(f.fn, NULL, j->t_i32, "y");
        gcc_jit_block_add_assignment(f.b, NULL, f.aff_y, jit_lng(j, j->t_i32, 0));
        jit_stmts(&f, body);
        if (f.b)
            gcc_jit_block_end_with_return(f.b, NULL, gcc_jit_lvalue_as_rvalue(f.aff_y));
        f.b = NULL;
        jit_end_body(&f);
        out->elem = f.fn;
    } else if (body && body->kind == QL_TABLE) {
        snprintf(name, sizeof name, "qrl_affine_%s_table", id);
        gcc_jit_type *ts[3] = {j->p_rt, j->t_voidp, j->t_f64};
        const char *ns[3] = {"rt", "mt", "v"};
        fgen f = fn_begin(j, s, name, j->t_f64, 3, ts, ns);
        f.mt = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
        f.table_v = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
        gcc_jit_rvalue *v = jit_now(&f, jit_cast(j, jit_expr(&f, body->a), j->t_f64));
        gcc_jit_block_end_with_return(jit_cur(&f), NULL, v);
        out->table = f.fn;
    }
}

void jit_recipe_fns(jit *j, const qc_sym *s, item_fns *out)
{
    const ql_node *r = s->decl;
    char name[300];
    int set = 0; /* settings are numbered apart from use lines */
    for (int i = 0; i < r->nkids; i++)
        set += r->kids[i]->kind == QL_SETTING;
    out->args = set ? calloc((size_t)set, sizeof *out->args) : NULL;
    if (set && !out->args) {
        ql_error_file(&j->u->diags, NULL, "out of memory");
        out->nargs = -1; /* qc_jit_build gives up */
        return;
    }
    out->nargs = set;
    set = 0;
    for (int i = 0; i < r->nkids; i++) {
        const ql_node *k = r->kids[i];
        if (k->kind != QL_SETTING)
            continue;
        int at = set++;
        const ql_node *tcall = !strcmp(k->name, "transform") && k->a->kind == QL_CALL ? k->a : NULL;
        if (k->a->kind != QL_QSPEC && !tcall)
            continue;
        const ql_node *q = k->a;
        if (!tcall && q->c) { /* fallback = f32 when CONDITION */
            snprintf(name, sizeof name, "qrl_recipe_%s_fallback", s->name);
            gcc_jit_type *ts[5] = {j->p_rt, j->t_f64, j->t_f64, j->t_f64, j->t_f64};
            const char *ns[5] = {"rt", "sqnr", "output_sqnr", "output_cosine", "output_agreement"};
            fgen f = fn_begin(j, s, name, j->t_i64, 5, ts, ns);
            f.file = k->span.src->path; /* an inherited line: the file it is written in */
            f.sqnr = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            f.output_sqnr = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 2));
            f.output_cosine = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 3));
            f.output_agreement = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 4));
            gcc_jit_rvalue *c = jit_now(&f, jit_expr(&f, q->c));
            gcc_jit_block_end_with_return(jit_cur(&f), NULL, jit_cast(j, c, j->t_i64));
            out->fallback = f.fn;
        }
        const ql_node *by = tcall ? tcall : q->b;
        if (by && by->kind == QL_CALL && by->nkids) {
            snprintf(name, sizeof name, "qrl_recipe_%s_%s_%d_args", s->name, k->name, at); /* transforms repeat */
            gcc_jit_type *ts[2] = {j->p_rt, gcc_jit_type_get_pointer(j->t_f64)};
            const char *ns[2] = {"rt", "out"};
            fgen f = fn_begin(j, s, name, j->t_void, 2, ts, ns);
            f.file = k->span.src->path;
            gcc_jit_rvalue *o = gcc_jit_param_as_rvalue(gcc_jit_function_get_param(f.fn, 1));
            for (int a = 0; a < by->nkids; a++) {
                const ql_node *e = by->kids[a]->kind == QL_NAMED_ARG ? by->kids[a]->a : by->kids[a];
                gcc_jit_block_add_assignment(jit_cur(&f), NULL, gcc_jit_context_new_array_access(j->c, NULL, o, jit_lng(j, j->t_i64, a)),
                                             jit_to_f64(j, jit_expr(&f, e)));
            }
            gcc_jit_block_end_with_void_return(jit_cur(&f), NULL);
            out->args[at] = f.fn;
        }
    }
}

/* A transform: its match's where (as a pattern's), its parameters' defaults (as a calibrator's) and
 * scale(rt, params, act, weight) -> f64. */
void jit_transform_fns(jit *j, const qc_sym *s, item_fns *out)
{
    jit_pattern_fns(j, s, out);
    cal_fns cf = {0};
    cal_defaults(j, s, &cf);
    out->defaults = cf.defaults;
    const ql_node *fn = NULL;
    for (int i = 0; i < s->decl->nkids; i++)
        if (s->decl->kids[i]->kind == QL_FN)
            fn = s->decl->kids[i];
    if (!fn)
        return;
    /* every statistic is passed (qrl_transform_bias_fn, _shift_fn: three; _flip_fn: four; _scale_fn:
     * six); the function's parameters name those it reads */
    int kind = !strcmp(fn->name, "bias") ? 1 : !strcmp(fn->name, "flip") ? 2 : !strcmp(fn->name, "shift") ? 3 : 0;
    int nstats = kind == 1 || kind == 3 ? 3 : kind == 2 ? 4 : 6;
    gcc_jit_type *ts[8] = {j->p_rt, gcc_jit_type_get_pointer(j->t_i64), j->t_f64, j->t_f64, j->t_f64, j->t_f64,
                           j->t_f64, j->t_f64};
    static const char *const slots[4][6] = {{"act", "weight", "source", "mean", "clip", "groups"},
                                            {"bias", "error", "unused", NULL, NULL, NULL},
                                            {"sweep", "change", "mean", "size", NULL, NULL},
                                            {"low", "high", "clip", NULL, NULL, NULL}};
    const char *ns[8] = {"rt", "params", slots[kind][0], slots[kind][1], slots[kind][2], slots[kind][3],
                         slots[kind][4], slots[kind][5]};
    char name[300];
    snprintf(name, sizeof name, "qrl_transform_%s_%s", s->name, fn->name);
    fgen f = {.j = j, .file = s->file->src->path, .cal = s->decl, .ret = j->t_f64};
    f.fn = out->scale = new_fn(j, name, j->t_f64, 2 + nstats, ts, ns);
    f.rt = param_rv(&f, 0);
    f.params = param_rv(&f, 1);
    gcc_jit_param *fparams[6] = {0};
    for (int k = 0; fn->a && k < fn->a->nkids && k < 6; k++)
        for (int at = 0; at < nstats; at++)
            if (!strcmp(fn->a->kids[k]->name, ns[2 + at]))
                fparams[k] = gcc_jit_function_get_param(f.fn, 2 + at);
    f.fparams = fparams;
    jit_begin_body(&f, fn->c);
    jit_stmts(&f, fn->c);
    jit_end_body(&f);
}

/* Strings the registration passes; built in malloc'd buffers freed after use. */
/* A setting's modifiers (symmetric, asymmetric, narrow, per_channel, per_tensor: the checker
 * allows these) as QR_MOD_* flags. */
static long setting_mods(const ql_node *q)
{
    static const struct { const char *name; long flag; } mods[] = {
        {"symmetric", QR_MOD_SYMMETRIC}, {"asymmetric", QR_MOD_ASYMMETRIC}, {"narrow", QR_MOD_NARROW},
        {"per_channel", QR_MOD_PER_CHANNEL}, {"per_tensor", QR_MOD_PER_TENSOR}};
    long f = 0;
    for (int i = 0; i < q->nkids; i++)
        for (size_t k = 0; k < sizeof mods / sizeof mods[0]; k++)
            if (q->kids[i]->name && !strcmp(q->kids[i]->name, mods[k].name))
                f |= mods[k].flag;
    return f;
}

/* The parameter argument a of a calibrator call binds: by name, else by position ("?" past the
 * parameters, which the checker rejects). */
static const char *call_arg_name(const ql_node *call, const qc_sym *cal, int a)
{
    const ql_node *ps = cal && cal->decl ? cal->decl->a : NULL, *arg = call->kids[a];
    return arg->kind == QL_NAMED_ARG ? arg->name : ps && a < ps->nkids ? ps->kids[a]->name : "?";
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
#define ADDR_OR_NULL(fn) ((fn) ? jit_cast(j, gcc_jit_function_get_address((fn), NULL), j->t_voidp) \
                               : gcc_jit_context_null(j->c, j->t_voidp))

/* A pattern's or rule's "file:line:col", as messages at quantize time name it. */
static void item_loc(const qc_sym *s, char *loc, size_t cap)
{
    const ql_node *n = s->decl;
    int line = 0, col = 0;
    ql_source_linecol(n->name_span.src ? n->name_span.src : n->span.src, n->span.start, &line, &col);
    snprintf(loc, cap, "%s:%d:%d", s->file->src->path, line, col);
}

/* A pattern's or transform's match: its values (with their roles) and nodes, registered under
 * its name. Returns the number of values. */
static int register_match(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s)
{
    const ql_node *p = s->decl;
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
            if (!strcmp(role, "dynamic")) { /* axis: 1 per row, 0 per tensor */
                axis = 0;
                for (int k = 0; re->kind == QL_CALL && k < re->nkids; k++)
                    if (re->kids[k]->kind == QL_NAMED_ARG && re->kids[k]->a->kind == QL_BOOL)
                        axis = (long)re->kids[k]->a->ival;
            }
            if (re->kind == QL_CALL && (!strcmp(role, "bias") || !strcmp(role, "same"))) {
                const qc_sym *x = re->nkids > 0 ? re->kids[0]->sym : NULL, *w = re->nkids > 1 ? re->kids[1]->sym : NULL;
                ra = x ? x->index : -1;
                rb = w ? w->index : -1;
            }
        }
        long kind = QR_ROLE_NONE;
        for (int r = QR_ROLE_NONE + 1; r < QR_ROLE_COUNT; r++)
            if (!strcmp(role, qr_role_name((qr_role_kind)r)))
                kind = r;
        gcc_jit_rvalue *a2[7] = {m, STR(s->name), STR(vals[v]->name), jit_lng(j, j->t_i64, kind),
                                 jit_lng(j, j->t_i64, axis), jit_lng(j, j->t_i64, ra), jit_lng(j, j->t_i64, rb)};
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
                gcc_jit_rvalue *a3[4] = {m, STR(s->name), jit_lng(j, j->t_i64, out ? out->index : -1), STR(op->name)};
                CALL_IMP(IMP_ADD_PATTERN_NODE, 4, a3);
                for (int a = 0; a < op->nkids; a++) { /* the value it binds (-1: "_", any), optional with '?' */
                    const qc_sym *as = op->kids[a]->sym;
                    gcc_jit_rvalue *ai[4] = {m, STR(s->name), jit_lng(j, j->t_i64, as ? as->index : -1),
                                             jit_lng(j, j->t_i64, as && op->kids[a]->flag)};
                    CALL_IMP(IMP_ADD_PATTERN_NODE_INPUT, 4, ai);
                }
            }
        }
    }
    return nv;
}

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
    char loc[600];
    item_loc(s, loc, sizeof loc);
    gcc_jit_rvalue *a1[6] = {m, STR(s->name), ADDR_OR_NULL(fns->where), STR(numerics), jit_lng(j, j->t_i64, priority),
                             STR(loc)};
    CALL_IMP(IMP_ADD_PATTERN, 6, a1);
    int nv = register_match(j, b, m, imp, s);
    const qc_sym *vals[256] = {0};
    pattern_values(p, vals, 256);
    int k = 0; /* constants count on across lower clauses */
    for (int i = 0; i < p->nkids; i++) {
        const ql_node *lw = p->kids[i];
        if (lw->kind != QL_LOWER || lw->a->kind != QL_CALL)
            continue;
        const qc_sym *out = NULL;
        for (int v = 0; v < nv; v++)
            if (vals[v] && !strcmp(vals[v]->name, lw->name))
                out = vals[v];
        gcc_jit_rvalue *a4[5] = {m, STR(s->name), STR(lw->a->a->name), jit_lng(j, j->t_i64, out ? out->index : -1),
                                 ADDR_OR_NULL(fns->consts)};
        CALL_IMP(IMP_ADD_PATTERN_LOWER, 5, a4);
        for (int a = 0; a < lw->a->nkids; a++) { /* a value by its index, else the next constant */
            const ql_node *e = lw->a->kids[a];
            const qc_sym *es = e->kind == QL_NAME ? e->sym : NULL;
            int is_value = es && es->kind == QC_SYM_VALUE;
            gcc_jit_rvalue *aa[4] = {m, STR(s->name), jit_lng(j, j->t_i64, is_value ? QR_LOWER_VALUE : QR_LOWER_CONST),
                                     jit_lng(j, j->t_i64, is_value ? es->index : k++)};
            CALL_IMP(IMP_ADD_PATTERN_LOWER_ARG, 4, aa);
        }
    }
}

/* add_transform, its parameters, then its match as a pattern's (values without roles, nodes). */
static void register_transform(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s,
                               const item_fns *fns)
{
    const ql_node *t = s->decl;
    int np = t->a ? t->a->nkids : 0;
    char loc[600];
    item_loc(s, loc, sizeof loc);
    long stats = 0; /* QR_TRANSFORM_* of the statistics its scale function reads */
    for (int i = 0; i < t->nkids; i++) {
        if (t->kids[i]->kind == QL_FN && !strcmp(t->kids[i]->name, "bias"))
            stats |= QR_TRANSFORM_CORRECTS;
        if (t->kids[i]->kind == QL_FN && !strcmp(t->kids[i]->name, "flip"))
            stats |= QR_TRANSFORM_ROUNDS;
        if (t->kids[i]->kind == QL_FN && !strcmp(t->kids[i]->name, "shift"))
            stats |= QR_TRANSFORM_SHIFTS;
        for (int k = 0; t->kids[i]->kind == QL_FN && t->kids[i]->a && k < t->kids[i]->a->nkids; k++) {
            const char *pn = t->kids[i]->a->kids[k]->name;
            int scale = !strcmp(t->kids[i]->name, "scale"); /* flip has a `mean` of its own */
            stats |= !strcmp(pn, "act") ? QR_TRANSFORM_ACT : !strcmp(pn, "weight") ? QR_TRANSFORM_WEIGHT
                   : !strcmp(pn, "source") ? QR_TRANSFORM_SOURCE : !strcmp(pn, "bias") ? QR_TRANSFORM_BIAS
                   : !strcmp(pn, "error") ? QR_TRANSFORM_ERROR : scale && !strcmp(pn, "mean") ? QR_TRANSFORM_MEAN : 0;
        }
    }
    gcc_jit_rvalue *a1[8] = {m, STR(s->name), jit_lng(j, j->t_i64, np), ADDR_OR_NULL(fns->defaults),
                             ADDR_OR_NULL(fns->where), ADDR_OR_NULL(fns->scale), STR(loc), jit_lng(j, j->t_i64, stats)};
    CALL_IMP(IMP_ADD_TRANSFORM, 8, a1);
    for (int k = 0; k < np; k++) {
        const qc_type *pt = t->a->kids[k]->type;
        qr_cal_param_kind pk = qc_is_float(pt) ? QR_CAL_FLOAT : pt->k == QC_BOOL ? QR_CAL_BOOL : QR_CAL_INT;
        gcc_jit_rvalue *pa[4] = {m, STR(s->name), STR(t->a->kids[k]->name), jit_lng(j, j->t_i64, pk)};
        CALL_IMP(IMP_ADD_TRANSFORM_PARAM, 4, pa);
    }
    register_match(j, b, m, imp, s);
}

static void register_affine(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s,
                            const item_fns *fns)
{
    const ql_node *n = s->decl;
    long kind = n->a->kind == QL_AFF_SAME ? QR_AFF_SAME : n->a->kind == QL_AFF_FIXED ? QR_AFF_FIXED : QR_AFF_REQUANTIZE;
    char loc[600], cond[512] = "";
    item_loc(s, loc, sizeof loc);
    if (n->b && n->b->span.src && n->b->span.end > n->b->span.start) {
        unsigned len = n->b->span.end - n->b->span.start;
        snprintf(cond, sizeof cond, "%.*s", (int)(len < sizeof cond ? len : sizeof cond - 1),
                 n->b->span.src->text + n->b->span.start);
    }
    gcc_jit_rvalue *a[12] = {m, STR(s->name), jit_lng(j, j->t_i64, n->nkids), jit_lng(j, j->t_i64, kind),
                             ADDR_OR_NULL(fns->where), ADDR_OR_NULL(fns->qparams), ADDR_OR_NULL(fns->elem),
                             ADDR_OR_NULL(fns->table), jit_lng(j, j->t_i64, n->c && n->c->kind == QL_AFF_F32),
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
            on_outputs |= mentions(r->kids[i]->a->c, "output_sqnr") || mentions(r->kids[i]->a->c, "output_cosine") ||
                          mentions(r->kids[i]->a->c, "output_agreement");
    gcc_jit_rvalue *a1[4] = {m, STR(s->name), ADDR_OR_NULL(fns->fallback), jit_lng(j, j->t_i64, on_outputs)};
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
        char type[64] = "";
        double value = 0; /* a number's */
        const char *cal = "";
        char budget_loc[1100];
        long mods = 0;
        const ql_node *call = NULL; /* the calibrator call whose arguments' names follow */
        const qc_sym *cs = NULL;
        if (!strcmp(k->name, "transform") && (q->kind == QL_CALL || q->kind == QL_NAME)) {
            /* the transform's name where a calibrator's goes; its call's arguments follow */
            const ql_node *fname = q->kind == QL_CALL ? q->a : q;
            cs = fname->sym;
            cal = fname->name;
            if (q->kind == QL_CALL)
                call = q;
        } else if (!strcmp(k->name, "budget") && q->kind == QL_CALL && q->a->kind == QL_NAME && q->nkids == 1) {
            /* budget = bits(6): the kind is the type, the number the value; where it is written
             * stands where a calibrator's name goes, for the quantizer's message when no
             * assignment meets it */
            const ql_node *v = q->kids[0];
            snprintf(type, sizeof type, "%s", q->a->name);
            value = v->kind == QL_INT ? (double)v->ival : v->kind == QL_FLOAT ? v->fval : 0;
            int line = 0, col = 0;
            ql_source_linecol(q->span.src, q->span.start, &line, &col);
            snprintf(budget_loc, sizeof budget_loc, "%s:%d:%d", q->span.src->path, line, col); /* maybe inherited */
            cal = budget_loc;
        } else if (q->kind == QL_QSPEC) {
            if (q->a->kind == QL_TYPE && q->a->op == QL_TOK_IDENT && q->a->name) /* accumulate = i14 */
                snprintf(type, sizeof type, "%s", q->a->name);
            else
                qc_type_name(q->a->type ? q->a->type : &qc_error, type, sizeof type);
            if (q->d) { /* fallback = u16 then f32 when ...: the steps' types first, "u16 f32" */
                char steps[64] = "";
                for (const ql_node *st = q->d; st; st = st->d) {
                    size_t len = strlen(steps);
                    qc_type_name(st->a->type ? st->a->type : &qc_error, steps + len, sizeof steps - len - 1);
                    len = strlen(steps);
                    snprintf(steps + len, sizeof steps - len, " ");
                }
                size_t len = strlen(steps);
                snprintf(steps + len, sizeof steps - len, "%s", type);
                snprintf(type, sizeof type, "%s", steps);
            }
            mods = setting_mods(q);
            const ql_node *by = q->b;
            if (by) {
                const ql_node *fname = by->kind == QL_CALL ? by->a : by;
                cs = fname->sym;
                cal = fname->name;
                if (by->kind == QL_CALL)
                    call = by;
            }
        } else if (q->kind == QL_NAME) {
            snprintf(type, sizeof type, "%s", q->name);
        } else if (q->kind == QL_INT || q->kind == QL_FLOAT) { /* a number (tolerance = 3): typed, its text shown */
            value = q->kind == QL_INT ? (double)q->ival : q->fval;
            snprintf(type, sizeof type, "%g", value);
        }
        gcc_jit_rvalue *a3[8] = {m, STR(s->name), STR(k->name), STR(type), jit_lng(j, j->t_i64, mods), STR(cal),
                                 ADDR_OR_NULL(at < fns->nargs ? fns->args[at] : NULL),
                                 gcc_jit_context_new_rvalue_from_double(j->c, j->t_f64, value)};
        CALL_IMP(IMP_ADD_SETTING, 8, a3);
        for (int a = 0; call && a < call->nkids && a < QC_MAX_PARAMS; a++) {
            gcc_jit_rvalue *aa[3] = {m, STR(s->name), STR(call_arg_name(call, cs, a))};
            CALL_IMP(IMP_ADD_SETTING_ARG, 3, aa);
        }
        for (int t = 0; k->b && t < k->b->nkids; t++) { /* activation for LayerNormalization, "node" = ... */
            const ql_node *x = k->b->kids[t];
            gcc_jit_rvalue *at4[4] = {m, STR(s->name), STR(x->name), jit_lng(j, j->t_i64, x->kind == QL_STR)};
            CALL_IMP(IMP_ADD_SETTING_TARGET, 4, at4);
        }
    }
}
#undef CALL_IMP
#undef STR
#undef ADDR_OR_NULL

/* The scalar types' dtypes (QR_UNDEF: not a scalar). */
static qr_dtype scalar_dtype(qc_tkind k)
{
    switch (k) {
    case QC_BOOL: return QR_BOOL;
    case QC_I8: return QR_I8;
    case QC_U8: return QR_U8;
    case QC_I16: return QR_I16;
    case QC_U16: return QR_U16;
    case QC_I32: return QR_I32;
    case QC_I64: return QR_I64;
    case QC_F32: return QR_F32;
    case QC_F64: return QR_F64;
    default: return QR_UNDEF;
    }
}

/* Type t as the runtime's descriptors say it (NULL: void). The checker lets a function take and
 * return only these; anything else registers as void, which the runtime refuses for a parameter. */
static void abi_type(const qc_type *t, qr_param_kind *kind, qr_dtype *elem)
{
    *elem = QR_UNDEF;
    switch (t ? t->k : QC_VOID) {
    case QC_ARRAY: *kind = QR_PARAM_ARRAY, *elem = scalar_dtype(t->elem->k); break;
    case QC_TENSOR: *kind = QR_PARAM_TENSOR, *elem = scalar_dtype(t->elem->k); break;
    case QC_QTYPE: *kind = QR_PARAM_QTYPE; break;
    case QC_QPARAMS: *kind = QR_PARAM_QPARAMS; break;
    default:
        *elem = scalar_dtype(t ? t->k : QC_VOID);
        *kind = *elem != QR_UNDEF ? QR_PARAM_SCALAR : QR_PARAM_VOID;
        break;
    }
}

/* Registers fn or kernel s (add_fn with its result), then its parameters in order (add_fn_param):
 * name, kind and element type. */
static void add_fn(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, int idx)
{
    const qc_sym *s = j->u->items[idx];
    const ql_node *ps = s->decl->a;
    qr_param_kind kind;
    qr_dtype elem;
    abi_type(s->decl->b ? s->decl->b->type : NULL, &kind, &elem);
    gcc_jit_rvalue *fa[6] = {m, gcc_jit_context_new_string_literal(j->c, s->name),
                             jit_cast(j, gcc_jit_function_get_address(j->fns[idx], NULL), j->t_voidp),
                             jit_lng(j, j->t_i64, s->kind == QC_SYM_KERNEL), jit_lng(j, j->t_i64, kind),
                             jit_lng(j, j->t_i64, elem)};
    gcc_jit_rvalue *add = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[IMP_ADD_FN]));
    gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, add, 6, fa));
    add = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[IMP_ADD_FN_PARAM]));
    for (int k = 0; ps && k < ps->nkids; k++) {
        abi_type(ps->kids[k]->type, &kind, &elem);
        gcc_jit_rvalue *args[4] = {m, gcc_jit_context_new_string_literal(j->c, ps->kids[k]->name),
                                   jit_lng(j, j->t_i64, kind), jit_lng(j, j->t_i64, elem)};
        gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, add, 4, args));
    }
}

/* A tile kernel (compiler/elementwise.c) holds its `along` as its one kid: a parameter's name or
 * an integer literal, negated or not. */
static void set_tile_axis(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s)
{
    const ql_node *along = s->decl->kids[0], *ps = s->decl->a;
    long param = -1, value = 0;
    if (along->kind == QL_NAME)
        for (int k = 0; ps && k < ps->nkids && param < 0; k++)
            param = strcmp(ps->kids[k]->name, along->name) ? -1 : k;
    else if (along->kind == QL_UNARY)
        value = -(long)along->a->ival;
    else
        value = (long)along->ival;
    gcc_jit_rvalue *set = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[IMP_SET_TILE_AXIS]));
    gcc_jit_rvalue *args[3] = {m, jit_lng(j, j->t_i64, param), jit_lng(j, j->t_i64, value)};
    gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, set, 3, args));
}

/* A kernel's declared output shape (its last tensor parameter's), for the runtime to size the
 * output from the inputs it is called with: add_out_dim per entry (runtime/recipe.h, qr_out_dim). */
static void register_out_shape(jit *j, gcc_jit_block *b, gcc_jit_rvalue *m, gcc_jit_rvalue *imp, const qc_sym *s)
{
    const ql_node *ps = s->decl->a;
    int out = -1;
    for (int i = 0; ps && i < ps->nkids; i++)
        if (ps->kids[i]->type && ps->kids[i]->type->k == QC_TENSOR)
            out = i;
    const ql_node *tt = out >= 0 ? ps->kids[out]->a : NULL;
    if (!tt || tt->kind != QL_TYPE_TENSOR || !tt->flag)
        return;
    gcc_jit_rvalue *add = gcc_jit_lvalue_as_rvalue(gcc_jit_rvalue_dereference_field(imp, NULL, j->f_imp[IMP_ADD_OUT_DIM]));
    for (int d = 0; d < tt->nkids; d++) {
        const ql_node *dn = tt->kids[d];
        long e[QC_MAX_PARAMS][3];
        int ne = 0;
        if (dn->kind == QL_DIM_REST) { /* every input with '..' */
            for (int i = 0; i < out; i++) {
                const ql_node *it = ps->kids[i]->a;
                if (it && it->kind == QL_TYPE_TENSOR && it->flag && it->nkids && it->kids[0]->kind == QL_DIM_REST)
                    e[ne][0] = QR_ODIM_REST, e[ne][1] = i, e[ne++][2] = it->nkids - 1;
            }
        } else if (dn->kind == QL_INT)
            e[ne][0] = QR_ODIM_INT, e[ne][1] = -1, e[ne++][2] = (long)dn->ival;
        else if (dn->sym && ((const qc_sym *)dn->sym)->kind == QC_SYM_DIM) {
            const qc_sym *ds = dn->sym;
            const ql_node *it = ps->kids[ds->dim_param]->a;
            int rest = it->kids[0]->kind == QL_DIM_REST;
            e[ne][0] = QR_ODIM_DIM, e[ne][1] = ds->dim_param, e[ne++][2] = rest ? ds->dim_pos - it->nkids : ds->dim_pos;
        }
        for (int k = 0; k < ne; k++) {
            gcc_jit_rvalue *args[4] = {m, jit_lng(j, j->t_i64, e[k][0]), jit_lng(j, j->t_i64, e[k][1]),
                                       jit_lng(j, j->t_i64, e[k][2])};
            gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, add, 4, args));
        }
    }
}

#define ENTRY_ITEMS 8

/* qrl_module_entry(m, imp): registers everything. */
void jit_entry(jit *j, cal_fns *cals, item_fns *items)
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
#define ADDR(fn) jit_cast(j, gcc_jit_function_get_address((fn), NULL), j->t_voidp)
    /* The registrations go into functions of ENTRY_ITEMS items each, which the entry calls: as one
     * function of some 3,000 calls (the whole stdlib), -O1's passes took about 75 ms more of its
     * cold compile (docs/quantizer.md, "The stdlib's cold compile after the compiling child (stop
     * 47)"). Exported, so that -O1's inlining of functions called once does not make the one
     * function again. The code part's only: split, a kernel part's (at -O3) peaked 2 MB higher in
     * its child on BlazeFace, and qrl check only validates it. */
    gcc_jit_block *top = b, *sub = NULL;
    int nsub = 0, in_sub = 0;
    for (int i = 0; i < j->u->nitems; i++) {
        const qc_sym *s = j->u->items[i];
        if (j->want && !j->want[i])
            continue;
        if (s->kind == QC_SYM_FN && j->fns_private)
            continue;
        if (!j->fns_private && (!sub || in_sub >= ENTRY_ITEMS)) {
            if (sub)
                gcc_jit_block_end_with_void_return(sub, NULL);
            char nm[64];
            snprintf(nm, sizeof nm, QRL_MODULE_ENTRY "_%d", nsub++);
            gcc_jit_param *sp[2] = {gcc_jit_context_new_param(j->c, NULL, ts[0], "m"),
                                    gcc_jit_context_new_param(j->c, NULL, ts[1], "imp")};
            gcc_jit_function *sf = gcc_jit_context_new_function(j->c, NULL, GCC_JIT_FUNCTION_EXPORTED, j->t_void, nm, 2, sp, 0);
            sub = b = gcc_jit_function_new_block(sf, NULL);
            gcc_jit_rvalue *ca[2] = {gcc_jit_param_as_rvalue(p[0]), gcc_jit_param_as_rvalue(p[1])};
            gcc_jit_block_add_eval(top, NULL, gcc_jit_context_new_call(j->c, NULL, sf, 2, ca));
            m = gcc_jit_param_as_rvalue(sp[0]), imp = gcc_jit_param_as_rvalue(sp[1]);
            in_sub = 0;
        }
        in_sub++;
        if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL) {
            add_fn(j, b, m, imp, i);
            if (s->kind == QC_SYM_KERNEL && s->decl->nkids == 1) { /* a tile kernel: its rows' axis */
                set_tile_axis(j, b, m, imp, s);
                char prog[2048];
                if (qc_vecmap(s, prog, sizeof prog)) { /* a channels-last one's vector form */
                    gcc_jit_rvalue *va[2] = {m, STR(prog)};
                    gcc_jit_block_add_eval(
                        b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_VECTOR_EPILOGUE), 2, va));
                }
                uint64_t uses, elems;
                if (qc_fill_reads(s, &uses, &elems)) { /* what a channels-last one's tables are made from */
                    gcc_jit_rvalue *fa[3] = {m, jit_lng(j, j->t_i64, (long)uses), jit_lng(j, j->t_i64, (long)elems)};
                    gcc_jit_block_add_eval(
                        b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_FILL_READS), 3, fa));
                }
            }
            else if (s->kind == QC_SYM_KERNEL && qc_pointwise(s)) {
                gcc_jit_rvalue *pa[1] = {m};
                gcc_jit_block_add_eval(b, NULL,
                                       gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_POINTWISE), 1, pa));
                char prog[2048];
                if (qc_vecmap_stage(s, prog, sizeof prog)) { /* its element's vector form, as a second stage */
                    gcc_jit_rvalue *va[2] = {m, STR(prog)};
                    gcc_jit_block_add_eval(
                        b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_VECTOR_EPILOGUE), 2, va));
                }
            }
            if (s->kind == QC_SYM_KERNEL) { /* the tensors whose elements it touches */
                gcc_jit_rvalue *ra[2] = {m, jit_lng(j, j->t_i64, (long)qc_param_reads(s))};
                gcc_jit_block_add_eval(
                    b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_PARAM_READS), 2, ra));
                register_out_shape(j, b, m, imp, s);
            }
            if (s->kind == QC_SYM_KERNEL) { /* its generic entry: is_kernel 2 */
                gcc_jit_rvalue *ta[6] = {m, STR(s->name), ADDR(kernel_thunk(j, i)), jit_lng(j, j->t_i64, 2),
                                         jit_lng(j, j->t_i64, QR_PARAM_VOID), jit_lng(j, j->t_i64, QR_UNDEF)};
                gcc_jit_block_add_eval(b, NULL,
                                       gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_FN), 6, ta));
            }
        } else if (s->kind == QC_SYM_CALIBRATOR && cals[i].observe && cals[i].merge && cals[i].solve) {
            const ql_node *cal = s->decl;
            int np = cal->a ? cal->a->nkids : 0;
            gcc_jit_rvalue *args[9] = {m, STR(s->name), jit_lng(j, j->t_i64, np), jit_lng(j, j->t_i64, (long)jit_state_bytes(cal)),
                                       ADDR(cals[i].defaults), ADDR(cals[i].init), ADDR(cals[i].observe),
                                       ADDR(cals[i].merge), ADDR(cals[i].solve)};
            gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_CAL), 9, args));
            for (int k = 0; k < cal->nkids; k++)
                if (cal->kids[k]->kind == QL_SOLVE && !cal->kids[k]->b) {
                    gcc_jit_rvalue *la[2] = {m, STR(s->name)};
                    gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_SET_LAYER_CAL), 2, la));
                }
            for (int k = 0; k < cal->nkids; k++) { /* the state's typed layout */
                if (cal->kids[k]->kind != QL_STATE)
                    continue;
                const qc_sym *st = cal->kids[k]->sym;
                int64_t kind = st->type->k == QC_HIST ? QR_STATE_HIST : st->type->k == QC_GRAM ? QR_STATE_GRAM
                             : st->type->k == QC_ARRAY ? QR_STATE_ARRAY : QR_STATE_SCALAR;
                int64_t eb = kind == QR_STATE_ARRAY ? qc_type_bits(st->type->elem) / 8 : 0;
                gcc_jit_rvalue *sa[5] = {m, STR(s->name), jit_lng(j, j->t_i64, kind),
                                         jit_lng(j, j->t_i64, (long)jit_state_offset(cal, st)), jit_lng(j, j->t_i64, eb)};
                gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_STATE), 5, sa));
            }
            for (int k = 0; k < np; k++) {
                const qc_type *t = cal->a->kids[k]->type;
                qr_cal_param_kind pk = qc_is_float(t) ? QR_CAL_FLOAT : t->k == QC_BOOL ? QR_CAL_BOOL : QR_CAL_INT;
                gcc_jit_rvalue *pa[4] = {m, STR(s->name), STR(cal->a->kids[k]->name), jit_lng(j, j->t_i64, pk)};
                gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call_through_ptr(j->c, NULL, IMPF(IMP_ADD_PARAM), 4, pa));
            }
        }
        else if (s->kind == QC_SYM_PATTERN)
            register_pattern(j, b, m, imp, s, &items[i]);
        else if (s->kind == QC_SYM_AFFINE)
            register_affine(j, b, m, imp, s, &items[i]);
        else if (s->kind == QC_SYM_RECIPE)
            register_recipe(j, b, m, imp, s, &items[i]);
        else if (s->kind == QC_SYM_TRANSFORM && items[i].defaults && items[i].scale)
            register_transform(j, b, m, imp, s, &items[i]);
    }
    if (sub)
        gcc_jit_block_end_with_void_return(sub, NULL);
    gcc_jit_block_end_with_void_return(top, NULL);
#undef IMPF
#undef STR
#undef ADDR
}
