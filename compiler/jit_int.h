/* The code generator's internals, shared by its files (jit.c: setup, types,
 * helpers, the entry; jit_expr.c: expressions and statements; jit_loops.c:
 * for loops, versioned and blocked; jit_items.c: items and the module's
 * registration): the context of a build and of one generated function, the
 * import table's indices, and the functions one file calls in another,
 * prefixed jit_. Only the code generator's files include it. The module
 * cache's key hashes these files (Makefile: JIT_ID). */
#ifndef QC_JIT_INT_H
#define QC_JIT_INT_H

#include <stdint.h>

#include "check.h"
#include "jit.h"
#include "recipe.h"

/* The import table's entries, in qrl_imports order (recipe.h's QRL_IMPORTS; their C types: imp_sig in
 * jit.c, from the same list). */
enum {
    IMP_ABI = QRL_IMP_ABI,
#define QC_IMP_INDEX(id, ...) IMP_##id = QRL_IMP_##id,
    QRL_IMPORTS(QC_IMP_INDEX)
#undef QC_IMP_INDEX
    IMP_COUNT = QRL_IMP_COUNT
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
    gcc_jit_field *f_arr_data, *f_arr_len, *f_tv_data, *f_tv_numel, *f_tv_rank, *f_tv_dims, *f_tv_first, *f_tv_samples;
    gcc_jit_field *f_qt[QC_QTYPE_NFIELDS]; /* qc_qtype_fields, in order */
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
    gcc_jit_rvalue *mt, *aff_x, *aff_zero, *aff_scale, *table_v, *sqnr, *output_sqnr, *output_cosine,
        *output_agreement;
    gcc_jit_lvalue *aff_y;
} fgen;


/* A calibrator's functions. */
typedef struct cal_fns {
    gcc_jit_function *defaults, *init, *observe, *merge, *solve;
} cal_fns;

/* A pattern's, affine rule's or recipe's functions. */
typedef struct item_fns {
    gcc_jit_function *where, *consts;               /* patterns */
    gcc_jit_function *qparams, *elem, *table;        /* affine rules */
    gcc_jit_function *fallback, **args;              /* recipes: args per setting, in order (malloc'd, nargs;
                                                      * NULL where a setting has no call with arguments) */
    int nargs;
    gcc_jit_function *defaults, *scale;              /* transforms (and where, of their match) */
} item_fns;

/* ---- jit.c */
gcc_jit_type *jit_type_of(jit *j, const qc_type *t);
gcc_jit_type *jit_unsigned_of(jit *j, const qc_type *t);
gcc_jit_rvalue *jit_lng(jit *j, gcc_jit_type *t, long v);
gcc_jit_rvalue *jit_dbl(jit *j, gcc_jit_type *t, double v);
gcc_jit_rvalue *jit_cast(jit *j, gcc_jit_rvalue *v, gcc_jit_type *t);
gcc_jit_rvalue *jit_to_f64(jit *j, gcc_jit_rvalue *v);
gcc_jit_rvalue *jit_cmp(jit *j, enum gcc_jit_comparison op, gcc_jit_rvalue *a, gcc_jit_rvalue *b);
gcc_jit_rvalue *jit_bin(jit *j, enum gcc_jit_binary_op op, gcc_jit_type *t, gcc_jit_rvalue *a, gcc_jit_rvalue *b);
gcc_jit_block *jit_new_block(fgen *f);
gcc_jit_block *jit_cur(fgen *f);
gcc_jit_lvalue *jit_temp(fgen *f, gcc_jit_type *t);
gcc_jit_rvalue *jit_now(fgen *f, gcc_jit_rvalue *v);
gcc_jit_rvalue *jit_call_imp(fgen *f, int i, int n, gcc_jit_rvalue **args);
void jit_return_default(fgen *f, gcc_jit_block *b);
void jit_check(fgen *f, gcc_jit_rvalue *fail, int code, const ql_node *at, gcc_jit_rvalue *a, gcc_jit_rvalue *b);
void jit_burn_fuel(fgen *f, const ql_node *at, gcc_jit_rvalue *amount);
void jit_check_failed(fgen *f);
gcc_jit_rvalue *jit_select_rv(fgen *f, gcc_jit_rvalue *c, gcc_jit_rvalue *a, gcc_jit_rvalue *b, gcc_jit_type *t);
gcc_jit_rvalue *jit_builtin1(jit *j, const char *name, gcc_jit_rvalue *x);
gcc_jit_rvalue *jit_floor_rv(jit *j, gcc_jit_rvalue *x);
gcc_jit_rvalue *jit_float_to_int(fgen *f, gcc_jit_rvalue *x, const qc_type *to);
gcc_jit_rvalue *jit_sat_int(fgen *f, gcc_jit_rvalue *x, const qc_type *from, const qc_type *to);

/* ---- jit_expr.c */
const qc_type *jit_ty(const ql_node *n);
int64_t jit_state_bytes(const ql_node *cal);
/* The offset of state field s in calibrator cal's state block. */
int64_t jit_state_offset(const ql_node *cal, const qc_sym *s);
gcc_jit_lvalue *jit_state_lvalue(fgen *f, gcc_jit_rvalue *base, const qc_sym *s);
gcc_jit_rvalue *jit_expr(fgen *f, const ql_node *n);
const qc_sym *jit_bounded_by(const ql_node *e);
void jit_stmt(fgen *f, const ql_node *n);
void jit_stmts(fgen *f, const ql_node *b);
void jit_begin_body(fgen *f, const ql_node *body);
void jit_end_body(fgen *f);

/* ---- jit_loops.c */
void jit_for_loop(fgen *f, const ql_node *n);

/* ---- jit_items.c */
void jit_declare_fn(jit *j, int idx);
void jit_define_fn(jit *j, int idx);
void jit_calibrator(jit *j, const qc_sym *s, cal_fns *out);
void jit_pattern_fns(jit *j, const qc_sym *s, item_fns *out);
void jit_affine_fns(jit *j, const qc_sym *s, item_fns *out);
void jit_recipe_fns(jit *j, const qc_sym *s, item_fns *out);
void jit_transform_fns(jit *j, const qc_sym *s, item_fns *out);
void jit_entry(jit *j, cal_fns *cals, item_fns *items);

#endif
