#include "arena.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_CHUNK (64 * 1024)

struct qr_arena_chunk {
    qr_arena_chunk *next;
    size_t size, used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

/* The countdown of qr_arena_fail_nth: atomic, as workers may allocate too. */
static _Atomic long fail_countdown;

long qr_arena_fail_nth(long n)
{
    return atomic_exchange(&fail_countdown, n);
}

static _Atomic(void (*)(void)) count_hook;

void qr_arena_on_count(void (*fn)(void))
{
    atomic_store(&count_hook, fn);
}

int qr_arena_fail_now(void)
{
    void (*hook)(void) = atomic_load(&count_hook);
    if (hook)
        hook();
    if (fail_countdown <= 0)
        return 0;
    return --fail_countdown == 0;
}

void qr_arena_init(qr_arena *a)
{
    a->head = NULL;
    a->total = 0;
    a->oom = 0;
}

void qr_arena_free(qr_arena *a)
{
    qr_arena_chunk *c = a->head;
    while (c) {
        qr_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->total = 0;
    a->oom = 0;
}

/* size bytes of the arena, not zeroed: for the copies below, which write every byte (a graph's
 * clone copies its small constants through them: zeroing first doubled the writes). */
static void *take(qr_arena *a, size_t size)
{
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need < size || need > SIZE_MAX / 2 || qr_arena_fail_now())
        return NULL;
    qr_arena_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        c = aligned_alloc(ARENA_ALIGN, (sizeof *c + cap + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1));
        if (!c)
            return NULL;
        c->size = cap;
        c->used = 0;
        /* Big one-off blocks go behind the head so the head keeps its free space. */
        if (a->head && cap > ARENA_CHUNK) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    return p;
}

void *qr_arena_try_alloc(qr_arena *a, size_t size)
{
    void *p = take(a, size);
    if (p)
        memset(p, 0, size);
    return p;
}

void *qr_arena_alloc(qr_arena *a, size_t size)
{
    void *p = qr_arena_try_alloc(a, size);
    if (!p)
        a->oom = 1;
    return p;
}

void *qr_arena_try_memdup(qr_arena *a, const void *p, size_t n)
{
    if (!n)
        return qr_arena_try_alloc(a, 1);
    void *q = take(a, n);
    if (q)
        memcpy(q, p, n);
    return q;
}

void *qr_arena_memdup(qr_arena *a, const void *p, size_t n)
{
    void *q = qr_arena_try_memdup(a, p, n);
    if (!q)
        a->oom = 1;
    return q;
}

char *qr_arena_strndup(qr_arena *a, const char *s, size_t n)
{
    char *q = take(a, n + 1);
    if (!q) {
        a->oom = 1;
        return NULL;
    }
    if (n) /* s may be NULL for an empty string (protobuf-c's empty bytes) */
        memcpy(q, s, n);
    q[n] = 0;
    return q;
}

char *qr_arena_strdup(qr_arena *a, const char *s)
{
    return qr_arena_strndup(a, s, strlen(s));
}
