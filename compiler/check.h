/* The checker: name resolution, types, arity, constness, use before
 * definition, control flow (missing return, unreachable code, break outside
 * a loop) and recursion, over every file of a unit. It annotates the AST
 * (node->type, node->sym) for the code generator and reports errors with
 * "did you mean" hints. */
#ifndef QC_CHECK_H
#define QC_CHECK_H

#include "recipe.h" /* the language's limits, shared with the runtime */
#include "types.h"
#include "unit.h"

typedef enum qc_symkind {
    QC_SYM_CONST,      /* const NAME = value (module level) */
    QC_SYM_FN,
    QC_SYM_KERNEL,
    QC_SYM_CALIBRATOR,
    QC_SYM_PATTERN,
    QC_SYM_AFFINE,     /* named by its op */
    QC_SYM_RECIPE,
    QC_SYM_TRANSFORM,
    QC_SYM_PARAM,      /* of a fn, kernel or calibrator */
    QC_SYM_LOCAL,      /* let / var */
    QC_SYM_LOOP,       /* for variable */
    QC_SYM_STATE,      /* calibrator state field */
    QC_SYM_OTHER,      /* merge's other state */
    QC_SYM_VALUE,      /* value bound by a pattern */
    QC_SYM_AFF_IN,     /* affine input element (i32, with .zero and .scale) */
    QC_SYM_AFF_OUT,    /* affine output element y */
    QC_SYM_TABLE_VAR,  /* table(v => ...) variable: the real value, f64 */
    QC_SYM_BUILTIN,    /* built-in constant (inf, nan, pi) */
    QC_SYM_DIM,        /* a dimension a kernel's declared shape names: an i64 the body reads */
    QC_SYM_GENERIC,    /* a fn or kernel with type parameters: its instances are the items that run */
} qc_symkind;

typedef struct qc_sym qc_sym;
struct qc_sym {
    const char *name;
    qc_symkind kind;
    const qc_type *type;
    ql_node *decl;
    qc_file *file;     /* items: the file defining it */
    int mutable_;      /* may be assigned */
    int defined;       /* locals: declaration reached (use before definition otherwise) */
    int index;         /* params: position; locals and dims: slot number in the function */
    int dim_param, dim_pos; /* dims: the parameter whose shape binds it, and the position there */
    qc_sym **callees;  /* fns and kernels: what they call (recursion check) */
    int ncallees, capcallees;
    int mark;          /* DFS state of the recursion check */
    qc_sym *next_same; /* affine items: the next rule for the same op */
    qc_sym *generic;   /* instances: their generic */
    qc_sym **instances; /* generics: by qc_generic_index */
    int ninstances;
    int failed;        /* generics: -1 when their own check (once, T a type variable) had errors; k + 1 when
                        * instance k had errors it missed (reported once); the other instances stay quiet */
                        /* recipes: 1 when the recipe it derives from could not be taken (reported) */
    qc_sym *base;      /* recipes: the recipe it derives from (recipe x : base), NULL for none */
    ql_node *own;      /* recipes deriving from another: the recipe as written; decl is then the effective
                        * recipe (the base's lines but those of the keys it writes, then its own) */
};

/* Parameters of a function, kernel or calibrator, at most (the code generator's bound too,
 * and the runtime's: a calibrator's arguments). */
#define QC_MAX_PARAMS QRL_MAX_PARAMS

/* Checks every file of u. Returns the number of errors the checker added. */
int qc_check(qc_unit *u);

/* The module-level symbol (item) named name, or NULL. */
qc_sym *qc_find_item(const qc_unit *u, const char *name);

#endif
