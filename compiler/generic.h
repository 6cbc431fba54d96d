/* Generics: a fn or kernel with type parameters, each ranging over a finite
 * set of scalar types (`kernel qlinear<T: u8 | i8>(...)`), stands for one
 * ordinary item per combination of members, its instances, named
 * `qlinear<u8>` and `qlinear<i8>`. An instance is the declaration cloned
 * with each parameter replaced by its member: in types (`tensor<T>`), in
 * sat<T>(...) and in casts T(x). The checker checks the generic itself
 * once, each parameter a type variable (types.h), then its instances
 * quietly for the types the code generator reads; the code generator
 * compiles instances like any other item. */
#ifndef QC_GENERIC_H
#define QC_GENERIC_H

#include "../lang/arena.h"
#include "../lang/ast.h"
#include "types.h"

/* Most type parameters of one generic, and most instances. */
#define QC_GENERIC_MAX_PARAMS 4
#define QC_GENERIC_MAX_INSTANCES 64
/* Most instances in a unit: each is a copy of its generic's code, so a
 * hostile file must not multiply its size by 64 without end. */
#define QC_GENERIC_MAX_UNIT_INSTANCES 4096

/* The scalar type a TYPE node of a type parameter's set names, or NULL. */
const qc_type *qc_generic_member(const ql_node *type);

/* The number of instances of decl (a FN or KERNEL with d = TPARAMS): the
 * product of its parameters' set sizes, 0 when over the bounds above. */
int qc_generic_count(const ql_node *decl);

/* Instance k of decl (0 <= k < count; the last parameter varies fastest):
 * a deep copy with d = NULL and name "f<u8,i8>", in ar. args[i] receives
 * parameter i's member. */
ql_node *qc_generic_instance(ql_arena *ar, const ql_node *decl, int k, const qc_type **args);

/* The instance number of decl for these members of its parameters, or -1
 * when one is not in its parameter's set. */
int qc_generic_index(const ql_node *decl, const qc_type *const *args);

/* A deep copy of n (spans kept; checker annotations cleared). */
ql_node *qc_clone(ql_arena *ar, const ql_node *n);

/* "u8 | i8": parameter i's set, for diagnostics. */
const char *qc_generic_set(const ql_node *decl, int i, char *buf, int n);

/* "T = i8, U = u8": instance k's members, for diagnostics. */
const char *qc_generic_args(const ql_node *decl, int k, char *buf, int n);

#endif
