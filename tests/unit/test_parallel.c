/* The worker pool: every index visited exactly once, for many shapes of work. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

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
