/* From a checked unit to a loaded module: the compiled-code cache, libgccjit
 * compilation and loading. Cached modules are shared objects under
 * $XDG_CACHE_HOME/qrl (else ~/.cache/qrl) named by a hash (SHA-256) of
 * everything that decides the code (QRL and libgccjit versions, the recipe
 * ABI, the source texts its items come from, which items, options, CPU
 * flags). Each entry records
 * that key and the SHA-256 of its bytes, checked before anything is loaded,
 * so a corrupt, truncated or foreign file is rebuilt, never run; what the
 * cache trusts is described in cache.h. */
#ifndef QC_COMPILE_H
#define QC_COMPILE_H

#include "recipe.h"
#include "unit.h"

typedef struct qc_options {
    int no_cache;          /* compile in memory, touch no cache file */
    int opt_level;         /* 0: default (1 for code other than kernels; kernels 3) */
    const char *cache_dir; /* NULL: the default above */
    int check_only;        /* qrl check: a kernel part not in the cache is validated by libgccjit
                            * without generating code (compile.c: validate), and left out of the
                            * module; quantizing compiles it */
} qc_options;

/* A module is compiled in parts, each its own libgccjit context, shared
 * object and cache entry: the kernels at -O3 (vectorized hot loops), and the
 * rest (calibrators, predicates, affine rules, recipes, fns) at -O1. A part's
 * key covers only the files its items come from, with their imports, so the
 * stdlib's kernels are compiled once for every recipe that reaches them. */
#define QC_MAX_PARTS 2

typedef struct qc_part_stats {
    const char *name; /* "code" or "kernels" */
    int items;        /* items compiled into it */
    int opt_level;
    double t_jit, t_load; /* ms */
    int cache_hit;        /* as qc_stats */
    int cache_rebuilt;
    int validated;        /* check_only: 1 validated now, 2 validated before (its marker entry) */
    char key[40];
} qc_part_stats;

typedef struct qc_stats {
    double t_jit;    /* building and compiling with libgccjit, ms (every part) */
    double t_load;   /* loading the module (from the cache or memory), ms */
    int cache_hit;   /* 1 hit (every part), 0 miss (a part compiled and stored), -1 not used */
    int cache_rebuilt; /* a bad cache entry was found and replaced */
    char key[40];    /* the first part's */
    int reach;       /* 1: only what the unit's recipes reach was compiled; 0: everything */
    int nparts;
    qc_part_stats parts[QC_MAX_PARTS];
} qc_stats;

/* u must be checked without errors. Errors go to u->diags. With check_only
 * the module lacks the parts that were only validated (NULL when that is
 * every part, without an error). */
qrl_module *qc_compile(qc_unit *u, const qc_options *o, qc_stats *st);

#endif
