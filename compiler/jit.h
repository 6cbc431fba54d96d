/* Lowering of a checked unit to libgccjit: one context per module, every
 * fn, kernel and calibrator of every file, plus the module entry that
 * registers them with the runtime (runtime/recipe.h). */
#ifndef QC_JIT_H
#define QC_JIT_H

#include <libgccjit.h>

#include "unit.h"

typedef struct qc_jit_opts {
    int opt_level;      /* 2 by default; kernels are always compiled at 3 */
    const char *march;  /* e.g. "-march=x86-64-v4 -mavx512vnni"; NULL: the CPU's (qc_cpu_flags) */
} qc_jit_opts;

/* Builds the module into a new context (the caller compiles and releases
 * it). Returns NULL after reporting to u->diags. */
gcc_jit_context *qc_jit_build(qc_unit *u, const qc_jit_opts *o);

#endif
