/* A name index over an array of symbols that only grows: open addressing,
 * so that scopes with many lets and units with many items resolve a name in
 * constant time instead of a scan (200,000 lets made the checker quadratic).
 * The index stores positions; the array stays the owner of the symbols. */
#ifndef QC_NAMES_H
#define QC_NAMES_H

struct qc_sym;

struct ql_arena;

typedef struct qc_names {
    int *slot;      /* position + 1; 0 is empty */
    unsigned cap;   /* a power of two, or 0 */
    int n;
    struct ql_arena *ar; /* NULL: slots on the heap; else from this arena (the checker's scopes,
                          * which an out-of-memory jump leaves without freeing them) */
} qc_names;

/* Position in v of the first symbol indexed under name, or -1. */
int qc_names_find(const qc_names *h, struct qc_sym *const *v, const char *name);

/* Indexes v[pos] unless its name is indexed already (the first one stays).
 * Returns 0, or -1 when out of memory (the index is then left as it was). */
int qc_names_add(qc_names *h, struct qc_sym *const *v, int pos);

void qc_names_free(qc_names *h);

#endif
