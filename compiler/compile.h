/* From a checked unit to a loaded module: the compiled-code cache, libgccjit
 * compilation and loading. Cached modules are shared objects under
 * $XDG_CACHE_HOME/qrl (else ~/.cache/qrl) named by a hash (SHA-256) of
 * everything that decides the code (QRL and libgccjit versions, the recipe
 * ABI, every source text of the unit, options, CPU flags). Each entry records
 * that key and the SHA-256 of its bytes, checked before anything is loaded,
 * so a corrupt, truncated or foreign file is rebuilt, never run; what the
 * cache trusts is described in cache.h. */
#ifndef QC_COMPILE_H
#define QC_COMPILE_H

#include "recipe.h"
#include "unit.h"

typedef struct qc_options {
    int no_cache;          /* compile in memory, touch no cache file */
    int opt_level;         /* 0: default (2; kernels 3) */
    const char *cache_dir; /* NULL: the default above */
} qc_options;

typedef struct qc_stats {
    double t_jit;    /* building and compiling with libgccjit, ms */
    double t_load;   /* loading the module (from the cache or memory), ms */
    int cache_hit;   /* 1 hit, 0 miss (compiled and stored), -1 not used */
    int cache_rebuilt; /* a bad cache entry was found and replaced */
    char key[40];
} qc_stats;

/* u must be checked without errors. Errors go to u->diags. */
qrl_module *qc_compile(qc_unit *u, const qc_options *o, qc_stats *st);

#endif
