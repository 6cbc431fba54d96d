/* A small fixed pool of worker threads for intra-op parallelism: kernels
 * split their outer loop with qr_parallel_for. A NULL pool runs serially. */
#ifndef QR_PARALLEL_H
#define QR_PARALLEL_H

#include <stdint.h>

typedef struct qr_pool qr_pool;

/* threads <= 1 returns NULL (serial). */
qr_pool *qr_pool_new(int threads);
void qr_pool_free(qr_pool *p);
int qr_pool_threads(const qr_pool *p);

/* Calls fn(arg, begin, end) on disjoint ranges covering [0, n), in parallel;
 * ranges hold at least `grain` items. Returns when all are done. */
typedef void (*qr_range_fn)(void *arg, int64_t begin, int64_t end);
void qr_parallel_for(qr_pool *p, int64_t n, int64_t grain, qr_range_fn fn, void *arg);

/* The same, telling fn which thread runs the range: slot is in [0, qr_pool_threads(p)) and no
 * two ranges running at once share one, so fn can use per-slot scratch (an image's im2col). */
typedef void (*qr_slot_fn)(void *arg, int64_t begin, int64_t end, int slot);
void qr_parallel_for_slots(qr_pool *p, int64_t n, int64_t grain, qr_slot_fn fn, void *arg);

#endif
