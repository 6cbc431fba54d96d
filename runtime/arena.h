/* Bump allocator: many small allocations, freed all at once. Graphs and
 * compilation units own one each, so error paths never leak. */
#ifndef QR_ARENA_H
#define QR_ARENA_H

#include <stddef.h>

typedef struct qr_arena_chunk qr_arena_chunk;

typedef struct qr_arena {
    qr_arena_chunk *head;
    size_t total; /* bytes handed out, for statistics */
    int oom;      /* an allocation failed: the owner's entry point reports "out of memory" */
} qr_arena;

void qr_arena_init(qr_arena *a);
void qr_arena_free(qr_arena *a);
/* Zeroed, 64-byte aligned memory for the graph's own small records; NULL on out-of-memory,
 * which the arena remembers (oom) so its owner's entry point can report it once. */
void *qr_arena_alloc(qr_arena *a, size_t size);
/* The same without marking the arena: for what a model decides the size of (its tensors'
 * data), where the caller names what did not fit. */
void *qr_arena_try_alloc(qr_arena *a, size_t size);
void *qr_arena_try_memdup(qr_arena *a, const void *p, size_t n);
/* Copies into the arena; NULL (and the arena marked) on out-of-memory. */
char *qr_arena_strdup(qr_arena *a, const char *s);
char *qr_arena_strndup(qr_arena *a, const char *s, size_t n);
void *qr_arena_memdup(qr_arena *a, const void *p, size_t n);

/* Tests: makes the nth allocation from now of any arena (or of a graph's own arrays, which
 * ask qr_arena_fail_now) fail, and every later one succeed; 0 turns it off. Returns what was
 * left of the previous count: 0 when its failure happened (or none was set). */
long qr_arena_fail_nth(long n);
/* Whether the allocation about to be made is the one qr_arena_fail_nth chose (counts it). */
int qr_arena_fail_now(void);
/* Tests: fn runs on every allocation qr_arena_fail_now counts, whether one is set to fail or not
 * (NULL: none), so that a test can record where each is made and fail one of each place
 * (tests/unit/test_oom.c). */
void qr_arena_on_count(void (*fn)(void));

#endif
