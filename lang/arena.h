/* The front end's bump allocator: tokens, AST nodes and strings of one
 * compilation live in one arena and die together, so no error path leaks.
 * (lang/ depends on nothing else in QRL, hence its own small arena.) */
#ifndef QL_ARENA_H
#define QL_ARENA_H

#include <setjmp.h>
#include <stddef.h>

typedef struct ql_arena_block ql_arena_block;

typedef struct ql_arena {
    ql_arena_block *blocks;
    size_t used;     /* bytes handed out, for --time statistics */
    int oom;         /* an allocation failed */
    jmp_buf *on_oom; /* where a failed allocation jumps, or NULL (see ql_alloc) */
} ql_arena;

void ql_arena_init(ql_arena *a);
void ql_arena_free(ql_arena *a);
/* Zeroed, 16-byte aligned. Out of memory marks the arena (oom) and, when on_oom is set,
 * jumps there: the parser and the checker set it at their entry (qp_parse, qc_check), which
 * report "out of memory", so their many builders need no check of their own. Without
 * on_oom, NULL. Nothing that must be freed may be held across a call while on_oom is set,
 * except by the frame that set it. */
void *ql_alloc(ql_arena *a, size_t size);
char *ql_strndup(ql_arena *a, const char *s, size_t n);
char *ql_strdup(ql_arena *a, const char *s);

/* Tests: makes the nth ql_alloc from now fail, and every later one succeed; 0 turns it off.
 * Returns what was left of the previous count: 0 when its failure happened (or none was set). */
long ql_arena_fail_nth(long n);
/* Tests: fn runs on every ql_alloc, whether one is set to fail or not (NULL: none), as
 * qr_arena_on_count (runtime/arena.h). */
void ql_arena_on_count(void (*fn)(void));

#endif
