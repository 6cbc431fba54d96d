/* Bump allocator: many small allocations, freed all at once. Graphs and
 * compilation units own one each, so error paths never leak. */
#ifndef QR_ARENA_H
#define QR_ARENA_H

#include <stddef.h>

typedef struct qr_arena_chunk qr_arena_chunk;

typedef struct qr_arena {
    qr_arena_chunk *head;
    size_t total; /* bytes handed out, for statistics */
} qr_arena;

void qr_arena_init(qr_arena *a);
void qr_arena_free(qr_arena *a);
/* Zeroed, 64-byte aligned memory; aborts on out-of-memory: for the graph's own small records. */
void *qr_arena_alloc(qr_arena *a, size_t size);
/* The same, NULL on out-of-memory: for what a model decides the size of (its tensors' data). */
void *qr_arena_try_alloc(qr_arena *a, size_t size);
void *qr_arena_try_memdup(qr_arena *a, const void *p, size_t n);
char *qr_arena_strdup(qr_arena *a, const char *s);
char *qr_arena_strndup(qr_arena *a, const char *s, size_t n);
void *qr_arena_memdup(qr_arena *a, const void *p, size_t n);

#endif
