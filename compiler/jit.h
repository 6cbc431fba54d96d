/* Lowering of a checked unit to libgccjit: the items asked for (every fn,
 * kernel, calibrator, ... of every file by default) into one context, plus
 * the entry that registers them with the runtime (runtime/recipe.h). A
 * module may be several contexts, each with its own entry (compile.c). */
#ifndef QC_JIT_H
#define QC_JIT_H

#include <libgccjit.h>

#include "unit.h"

typedef struct qc_jit_opts {
    int opt_level;      /* 2 by default; kernels are always compiled at 3 */
    const char *march;  /* e.g. "-march=x86-64-v4 -mavx512vnni"; NULL: the CPU's (qc_cpu_flags) */
    const unsigned char *items; /* by item index: the items to compile (NULL: every one); a fn must
                                 * come with every fn it calls */
    int fns_private;    /* the fns serve this context's kernels only: not registered */
} qc_jit_opts;

/* Builds the module into a new context (the caller compiles and releases
 * it). Returns NULL after reporting to u->diags. */
gcc_jit_context *qc_jit_build(qc_unit *u, const qc_jit_opts *o);

#endif
