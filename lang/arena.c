#include "arena.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN ((size_t)64 << 10)

struct ql_arena_block {
    ql_arena_block *next;
    size_t cap, top;
    _Alignas(16) unsigned char mem[];
};

/* The countdown of ql_arena_fail_nth. */
static _Atomic long fail_countdown;

long ql_arena_fail_nth(long n)
{
    return atomic_exchange(&fail_countdown, n);
}

static _Atomic(void (*)(void)) count_hook;

void ql_arena_on_count(void (*fn)(void))
{
    atomic_store(&count_hook, fn);
}

static int fail_now(void)
{
    void (*hook)(void) = atomic_load(&count_hook);
    if (hook)
        hook();
    if (fail_countdown <= 0)
        return 0;
    return --fail_countdown == 0;
}

void ql_arena_init(ql_arena *a)
{
    a->blocks = NULL;
    a->used = 0;
    a->oom = 0;
    a->on_oom = NULL;
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
    size_t need = (size + 15) & ~(size_t)15;
    ql_arena_block *b = a->blocks;
    if (need < size || fail_now())
        b = NULL;
    else if (!b || b->cap - b->top < need) {
        size_t cap = need > BLOCK_MIN ? need : BLOCK_MIN;
        b = cap <= SIZE_MAX - sizeof *b ? malloc(sizeof *b + cap) : NULL;
        if (b) {
            b->cap = cap;
            b->top = 0;
            b->next = a->blocks;
            a->blocks = b;
        }
    }
    if (!b) {
        a->oom = 1;
        if (a->on_oom)
            longjmp(*a->on_oom, 1);
        return NULL;
    }
    void *p = b->mem + b->top;
    b->top += need;
    a->used += need;
    memset(p, 0, need);
    return p;
}

char *ql_strndup(ql_arena *a, const char *s, size_t n)
{
    char *p = ql_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *ql_strdup(ql_arena *a, const char *s)
{
    return ql_strndup(a, s, strlen(s));
}
