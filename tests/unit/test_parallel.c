/* The worker pool: every index visited exactly once, for many shapes of work. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "parallel.h"

typedef struct job { _Atomic int *hits; } job;

static void visit(void *arg, int64_t b, int64_t e)
{
    job *j = arg;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&j->hits[i], 1);
}

Test(parallel, covers_every_index_once)
{
    for (int threads = 1; threads <= 4; threads++) {
        qr_pool *p = qr_pool_new(threads);
        cr_assert_eq(qr_pool_threads(p), threads);
        const int64_t sizes[] = {0, 1, 3, 7, 64, 1000, 4097};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int64_t grain = 1; grain <= 16; grain *= 4) {
                int64_t n = sizes[s];
                _Atomic int *hits = calloc((size_t)n + 1, sizeof *hits);
                job j = {hits};
                qr_parallel_for(p, n, grain, visit, &j);
                for (int64_t i = 0; i < n; i++)
                    cr_assert_eq(hits[i], 1, "threads %d n %lld index %lld", threads, (long long)n, (long long)i);
                free(hits);
            }
        qr_pool_free(p);
    }
}

typedef struct slot_job {
    _Atomic int *hits;
    _Atomic int busy[4]; /* ranges running on each slot now */
    _Atomic int clash;
} slot_job;

static void visit_slot(void *arg, int64_t b, int64_t e, int slot)
{
    slot_job *j = arg;
    if (slot < 0 || slot >= 4 || atomic_fetch_add(&j->busy[slot], 1) != 0)
        atomic_store(&j->clash, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&j->hits[i], 1);
    if (slot >= 0 && slot < 4)
        atomic_fetch_sub(&j->busy[slot], 1);
}

/* Jobs one right after another (the workers still spinning on the pool, parallel.c) and after a
 * pause longer than the spin (the workers asleep): each covers its indices once, on slots no two
 * running ranges share, and returns only when every range is done. */
Test(parallel, jobs_back_to_back_and_after_sleeping)
{
    for (int threads = 2; threads <= 4; threads++) {
        qr_pool *p = qr_pool_new(threads);
        for (int r = 0; r < 400; r++) {
            if (r % 50 == 49) {
                struct timespec t = {0, 1000000}; /* 1 ms: past the spin */
                nanosleep(&t, NULL);
            }
            int64_t n = 1 + r % 13;
            slot_job j = {.hits = calloc((size_t)n, sizeof(_Atomic int))};
            cr_assert(j.hits);
            qr_parallel_for_slots(p, n, 1, visit_slot, &j);
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(atomic_load(&j.hits[i]), 1, "threads %d job %d index %lld", threads, r, (long long)i);
            cr_assert(!atomic_load(&j.clash), "threads %d job %d: two ranges on one slot", threads, r);
            free(j.hits);
        }
        qr_pool_free(p);
    }
}

typedef struct range_log {
    _Atomic int n;
    int64_t len[64];
} range_log;

static void log_range(void *arg, int64_t b, int64_t e)
{
    range_log *l = arg;
    int i = atomic_fetch_add(&l->n, 1);
    if (i < 64)
        l->len[i] = e - b;
}

/* A job is cut into min(4 x threads, n / grain) ranges whose sizes differ by at most one (each at
 * least grain): 14 blocks on 2 threads are 8 ranges of 1 or 2, where ranges of 2 made 7, 4 of
 * them on one thread. */
Test(parallel, ranges_are_even)
{
    const int64_t sizes[] = {2, 7, 14, 15, 33, 100, 1001};
    for (int threads = 2; threads <= 4; threads++) {
        qr_pool *p = qr_pool_new(threads);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int64_t grain = 1; grain <= 4; grain++) {
                int64_t n = sizes[s], want = n / grain < 4 * threads ? n / grain : 4 * threads;
                range_log l = {0};
                qr_parallel_for(p, n, grain, log_range, &l);
                int got = atomic_load(&l.n);
                cr_assert_eq(got, want > 1 ? want : 1, "threads %d n %lld grain %lld: %d ranges", threads,
                             (long long)n, (long long)grain, got);
                int64_t lo = n, hi = 0;
                for (int i = 0; i < got; i++) {
                    lo = l.len[i] < lo ? l.len[i] : lo;
                    hi = l.len[i] > hi ? l.len[i] : hi;
                }
                cr_assert(hi - lo <= 1 && (got == 1 || lo >= grain), "threads %d n %lld grain %lld: ranges of %lld to %lld",
                          threads, (long long)n, (long long)grain, (long long)lo, (long long)hi);
            }
        qr_pool_free(p);
    }
}
