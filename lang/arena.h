/* The front end's bump allocator: tokens, AST nodes and strings of one
 * compilation live in one arena and die together, so no error path leaks.
 * (lang/ depends on nothing else in QRL, hence its own small arena.) */
#ifndef QL_ARENA_H
#define QL_ARENA_H

#include <stddef.h>

typedef struct ql_arena_block ql_arena_block;

typedef struct ql_arena {
    ql_arena_block *blocks;
    size_t used; /* bytes handed out, for --time statistics */
} ql_arena;

void ql_arena_init(ql_arena *a);
void ql_arena_free(ql_arena *a);
/* Zeroed, 16-byte aligned; aborts when the system is out of memory. */
void *ql_alloc(ql_arena *a, size_t size);
char *ql_strndup(ql_arena *a, const char *s, size_t n);
char *ql_strdup(ql_arena *a, const char *s);

#endif
