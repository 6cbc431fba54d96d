#include "parallel.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct qr_pool {
    int n;                 /* threads including the caller */
    pthread_t *workers;
    struct worker_arg *wargs;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    /* current job: fn, or sfn with the thread's slot */
    qr_range_fn fn;
    qr_slot_fn sfn;
    void *arg;
    int64_t total;
    int next;              /* next chunk index to take */
    int chunks, finished;
    unsigned long generation;
    int quit;
};

/* How long a thread spins on the pool's state before it sleeps on a condition: a sleeping
 * worker costs each job a wake-up (a futex call and, under a hypervisor, an interrupt to the other
 * CPU: about 15 us a job on the project's VM, against a 2-thread layer of ResNet-18 at batch 1
 * that takes 0.2 ms), and a batch-1 network's nodes start their jobs much closer together. */
#define POOL_SPIN_NS 100000

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins (the mutex not held) while *v == old and the pool is not quitting, at most POOL_SPIN_NS;
 * the caller then checks again under the mutex and sleeps if nothing changed. */
static void spin_while(const qr_pool *p, const unsigned long *gen, unsigned long old_gen, const int *count,
                       int target)
{
    int64_t end = 0;
    for (int i = 0;; i++) {
        if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
            return;
        if (gen ? __atomic_load_n(gen, __ATOMIC_ACQUIRE) != old_gen : __atomic_load_n(count, __ATOMIC_ACQUIRE) >= target)
            return;
        if (i % 64 == 0) { /* the clock now and then: a pause is 10 to 140 cycles, by CPU */
            int64_t t = now_ns();
            if (!end)
                end = t + POOL_SPIN_NS;
            else if (t >= end)
                return;
        }
        _mm_pause();
    }
}

/* Takes chunks until none are left, as thread `slot` (0: the caller); returns with the mutex held. */
static void drain(qr_pool *p, int slot)
{
    while (p->next < p->chunks) {
        int c = p->next++;
        qr_range_fn fn = p->fn;
        qr_slot_fn sfn = p->sfn;
        void *arg = p->arg;
        /* the first total % chunks ranges hold one item more: taken first, they even out the ends */
        int64_t q = p->total / p->chunks, r = p->total % p->chunks;
        int64_t b = c * q + (c < r ? c : r), e = b + q + (c < r);
        pthread_mutex_unlock(&p->mu);
        if (sfn)
            sfn(arg, b, e, slot);
        else
            fn(arg, b, e);
        pthread_mutex_lock(&p->mu);
        if (__atomic_add_fetch(&p->finished, 1, __ATOMIC_RELEASE) == p->chunks)
            pthread_cond_broadcast(&p->done);
    }
}

typedef struct worker_arg {
    qr_pool *p;
    int slot;
} worker_arg;

static void *worker(void *arg)
{
    qr_pool *p = ((worker_arg *)arg)->p;
    int slot = ((worker_arg *)arg)->slot;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (!p->quit && p->generation == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_while(p, &p->generation, seen, NULL, 0);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        drain(p, slot);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

qr_pool *qr_pool_new(int threads)
{
    if (threads <= 1)
        return NULL;
    qr_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    p->wargs = calloc((size_t)threads, sizeof *p->wargs);
    if (!p->workers || !p->wargs) {
        free(p->workers);
        free(p->wargs);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = 1;
    for (int i = 0; i < threads - 1; i++) {
        p->wargs[i] = (worker_arg){p, i + 1};
        if (pthread_create(&p->workers[i], NULL, worker, &p->wargs[i]) != 0)
            break;
        p->n++;
    }
    return p;
}

void qr_pool_free(qr_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n - 1; i++)
        pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p->wargs);
    free(p);
}

int qr_pool_threads(const qr_pool *p)
{
    return p ? p->n : 1;
}

static void run_chunks(qr_pool *p, int64_t n, int64_t grain, qr_range_fn fn, qr_slot_fn sfn, void *arg)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int64_t chunks = p ? (int64_t)p->n * 4 : 1;
    if (chunks > n / grain)
        chunks = n / grain;
    if (!p || chunks <= 1) {
        if (sfn)
            sfn(arg, 0, n, 0);
        else
            fn(arg, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->sfn = sfn;
    p->arg = arg;
    p->total = n;
    /* exactly `chunks` ranges of n / chunks items or one more (at least grain): 14 blocks in ranges
     * of 2 were 7 ranges, 4 on one thread and 3 on the other; now 8 ranges (2 x 6 then 1 x 2), 7
     * blocks each */
    p->chunks = (int)chunks;
    p->next = 0;
    __atomic_store_n(&p->finished, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_RELEASE); /* spinning workers see it */
    pthread_cond_broadcast(&p->go);
    drain(p, 0);
    if (p->finished < p->chunks) {
        pthread_mutex_unlock(&p->mu);
        spin_while(p, NULL, 0, &p->finished, p->chunks);
        pthread_mutex_lock(&p->mu);
    }
    while (p->finished < p->chunks)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void qr_parallel_for(qr_pool *p, int64_t n, int64_t grain, qr_range_fn fn, void *arg)
{
    run_chunks(p, n, grain, fn, NULL, arg);
}

void qr_parallel_for_slots(qr_pool *p, int64_t n, int64_t grain, qr_slot_fn fn, void *arg)
{
    run_chunks(p, n, grain, NULL, fn, arg);
}
