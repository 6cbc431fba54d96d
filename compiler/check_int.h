/* The checker's internals, shared by its files (check.c: scopes, lookup,
 * recursion, the entry; check_expr.c: expressions and types; check_stmt.c:
 * statements; check_items.c: items and generics' instances): the context
 * of a check and the functions one file calls in another, prefixed chk_.
 * Only the checker's files include it; the rest of the compiler uses check.h. */
#ifndef QC_CHECK_INT_H
#define QC_CHECK_INT_H

#include "check.h"

typedef struct scope scope;
struct scope {
    scope *up;
    qc_sym **v;
    int n, cap;
    qc_names idx; /* by name, once the scope outgrows a scan */
    int indexed;
};

/* What the code being checked is part of: decides what it may touch. */
typedef enum where {
    W_CONST,   /* module const, param default, state size: constant expressions */
    W_FN,
    W_KERNEL,
    W_OBSERVE, /* state writable */
    W_MERGE,   /* state writable, other readable */
    W_SOLVE,   /* state read only */
    W_PATTERN, /* where predicates and roles */
    W_AFFINE,
    W_TABLE,
    W_AFF_PRED,  /* an affine rule's where clause */
    W_FIXED,     /* fixed(t => ...) */
    W_RECIPE,
} where;

typedef struct ctx {
    qc_unit *u;
    ql_arena *ar;
    ql_diags *d;
    qc_file *file;
    unsigned char *visible; /* visible[i]: u->files[i] is this file or one it imports */
    scope *sc;
    where w;
    const qc_type *ret; /* result type of the function being checked; &qc_void for none */
    int loops;          /* enclosing loops */
    qc_sym *fn;         /* caller, for the recursion check */
    ql_node *cal;       /* calibrator being checked */
    int layer_solve;    /* checking a layer calibrator's solve: its tensor parameters are written */
    int nlocals;
    int assigned_y;     /* affine: the output was assigned */
    int ninstances;     /* generics' instances made so far */
    const ql_node *tparams; /* the generic being checked: its TPARAMS, whose types are its TVARs */
    int shape_ok;       /* a kernel's parameter types: a tensor may declare its shape */
    const ql_node *transform; /* a transform whose match is being checked: its parameters are not
                               * names there, and an unknown name that is one says why */
    const qc_sym *derived; /* a derived recipe whose lines are judged together: an error at an inherited line
                            * gets a note at its `: BASE` */
} ctx;

#define TN(t, b) qc_type_name((t), (b), sizeof(b))

#define TN(t, b) qc_type_name((t), (b), sizeof(b))

/* Whether calibrator cal is a layer calibrator: its solve rounds a weight (no result). */
int chk_layer_calibrator(const ql_node *cal);

/* ---- check.c */
/* An error at n; chk_err_decl: at a declaration's name. */
void chk_err(ctx *c, const ql_node *n, const char *fmt, ...) QL_PRINTF(3, 4);
void chk_err_decl(ctx *c, const ql_node *n, const char *fmt, ...) QL_PRINTF(3, 4);
/* An ONNX op name of the runtime's table; else an error at `at`, with the nearest name. */
void chk_op_name(ctx *c, ql_node *at, const char *op);
ql_span chk_decl_span(const ql_node *n);
qc_sym *chk_new_sym(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl);
void chk_push_scope(ctx *c, scope *s);
void chk_pop_scope(ctx *c);
qc_sym *chk_scope_find(const scope *s, const char *name);
void chk_scope_add(ctx *c, qc_sym *s);
qc_sym *chk_declare(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl);
int chk_item_visible(const ctx *c, const qc_sym *s);
/* Checks in file f from now on: c->file and the files it sees. */
void chk_enter_file(ctx *c, qc_file *f);
int chk_in_affine_rule(const ctx *c);
int chk_is_builtin_fn(const char *name);
qc_sym *chk_lookup(ctx *c, ql_node *at, const char *name, int report);
void chk_add_item(ctx *c, qc_sym *s);

/* ---- check_expr.c */
void chk_settle(ctx *c, ql_node *n, const qc_type *t);
int chk_convert(ctx *c, ql_node *n, const qc_type *from, const qc_type *to, const char *what);
ql_node *chk_arg_expr(ql_node *arg, const char **name);
int chk_expect_args(ctx *c, ql_node *call, const char *fname, int lo, int hi);
void chk_args(ctx *c, ql_node *call, const char *what, const ql_node *params);
const qc_type *chk_expr(ctx *c, ql_node *n, const qc_type *want);
const qc_type *chk_value_expr(ctx *c, ql_node *n, const qc_type *want);
void chk_hist_bins_arg(ctx *c, const ql_node *cal, const char *param, const ql_node *arg);
const qc_type *chk_type(ctx *c, ql_node *n);
const qc_type *chk_tparam(const ctx *c, const char *name);
const char *chk_when(const qc_type *t, int (*pred)(const qc_type *), char *buf, int n);

/* ---- check_stmt.c */
int chk_block(ctx *c, ql_node *b); /* returns 1 when the block always ends in return */

/* ---- check_items.c */
void chk_function(ctx *c, qc_sym *s);
void chk_calibrator(ctx *c, qc_sym *s);
void chk_pattern(ctx *c, qc_sym *s);
void chk_transform(ctx *c, qc_sym *s);
void chk_affine(ctx *c, qc_sym *s);
/* Every recipe's base (recipe x : base) resolved and its effective recipe made (s->decl), before any
 * recipe is checked; errors for an unknown base, one that is no recipe, and a cycle. */
void chk_recipe_bases(ctx *c);
void chk_recipe(ctx *c, qc_sym *s);
void chk_const_item(ctx *c, qc_sym *s);
qc_sym *chk_explicit_instance(ctx *c, ql_node *name, qc_sym *g, qc_tbind *tb);
qc_sym *chk_instance_for_call(ctx *c, ql_node *n, qc_sym *g, qc_tbind *tb);
void chk_generic(ctx *c, qc_sym *g);
void chk_instance_done(ctx *c, qc_sym *s, int mark);
void chk_instantiate(ctx *c, qc_sym *g);

#endif
