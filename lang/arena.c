#include "arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN ((size_t)64 << 10)

struct ql_arena_block {
    ql_arena_block *next;
    size_t cap, top;
    _Alignas(16) unsigned char mem[];
};

void ql_arena_init(ql_arena *a)
{
    a->blocks = NULL;
    a->used = 0;
}

void ql_arena_free(ql_arena *a)
{
    for (ql_arena_block *b = a->blocks, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    ql_arena_init(a);
}

void *ql_alloc(ql_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    ql_arena_block *b = a->blocks;
    if (!b || b->cap - b->top < size) {
        size_t cap = size > BLOCK_MIN ? size : BLOCK_MIN;
        b = malloc(sizeof *b + cap);
        if (!b) {
            fprintf(stderr, "qrl: out of memory\n");
            abort();
        }
        b->cap = cap;
        b->top = 0;
        b->next = a->blocks;
        a->blocks = b;
    }
    void *p = b->mem + b->top;
    b->top += size;
    a->used += size;
    memset(p, 0, size);
    return p;
}

char *ql_strndup(ql_arena *a, const char *s, size_t n)
{
    char *p = ql_alloc(a, n + 1);
    memcpy(p, s, n);
    return p;
}

char *ql_strdup(ql_arena *a, const char *s)
{
    return ql_strndup(a, s, strlen(s));
}
