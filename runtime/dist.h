/* Processes that work on one job together (mpirun -np N qrl quantize ...): which one this is
 * (rank 0 .. size-1), and the few exchanges the quantizer needs, over a transport registered
 * by the binary (mpi/dist_mpi.c in build/qrl-mpi). Alone (no transport, or not started by
 * mpirun) every call is the one-process case: rank 0 of 1, nothing sent. Mechanism only: what
 * is exchanged and how it combines is the caller's (the calibrators' own merge). */
#ifndef QR_DIST_H
#define QR_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* A transport: point-to-point messages of any length between ranks, in order per pair. */
typedef struct qr_dist_transport {
    /* Starts it when the process was started by mpirun: 1 started, 0 alone, -1 failed (e set). */
    int (*start)(int *argc, char ***argv, qr_error *e);
    int rank, size; /* after start */
    qr_status (*send)(int to, const void *buf, size_t n, qr_error *e);
    /* The next message from `from`, in a malloc'd buffer the caller frees. */
    qr_status (*recv)(int from, unsigned char **buf, size_t *n, qr_error *e);
    void (*finish)(void);           /* every rank, after a job that succeeded */
    void (*abort)(int code);        /* ends every rank of the job (does not return) */
} qr_dist_transport;

/* The transport linked into this binary (NULL: none). */
const qr_dist_transport *qr_dist_linked(void);
int qr_dist_rank(void);
int qr_dist_size(void);

/* The samples [lo, hi) of n that this rank takes: contiguous shares in rank order, sizes differing
 * by at most one. */
void qr_dist_share(int64_t n, int64_t *lo, int64_t *hi);
/* The same for rank `rank` (of qr_dist_size()). */
void qr_dist_share_of(int64_t n, int rank, int64_t *lo, int64_t *hi);

/* A reduction of one state per rank into rank 0's, over a binomial tree: at step k (1, 2, 4, ...)
 * rank r with bit k set sends its state to r - k and is done; the others receive from r + k (when
 * there is one) and merge it after their own. So every merge combines the states of contiguous
 * rank ranges, lower ranks first, in an order that depends only on the number of ranks: an order-
 * independent merge gives what one process gives, any merge is deterministic for a given N. */
typedef struct qr_dist_reducer {
    void *user;
    /* The state so far, appended to *buf (*len of *cap bytes, grown with realloc). */
    qr_status (*pack)(void *user, unsigned char **buf, size_t *len, size_t *cap, qr_error *e);
    /* Merges a state another rank packed into this one's. */
    qr_status (*merge)(void *user, const unsigned char *buf, size_t n, qr_error *e);
} qr_dist_reducer;

/* Reduces, `local` being this rank's status so far (an error travels up the tree instead of a
 * state, with its message, and rank 0 returns the first error in tree order, "rank R: ..." ).
 * Every rank must call it; on rank 0 the result is in the reducer's state. */
qr_status qr_dist_reduce(const qr_dist_reducer *r, qr_status local, qr_error *e);

/* Whether every rank was given the same inputs: n digests of `len` bytes (what[i] names digest
 * i: "the model", ...). Rank 0 compares the others' with its own and every rank learns the verdict;
 * on a difference rank 0's error names the ranks and inputs, the others' say "rank 0 reports". */
qr_status qr_dist_same(const unsigned char *const *digests, const char *const *what, int n, size_t len,
                       qr_error *e);

/* Every rank's block of doubles onto every rank (an all-gather): rank r's counts[r] doubles are at
 * all + counts[0] + ... + counts[r - 1], where each rank put its own before the call. The blocks go
 * to rank 0 (received rank by rank, in rank order, never in arrival order) and the whole back to
 * every rank, so every rank ends with the same bytes and a caller that adds them in a fixed order
 * gets the same sums at every N. `local`: this rank's status so far; an error on any rank comes
 * back on every rank ("rank R: ...", the lowest failing rank's), so that none waits for it. */
qr_status qr_dist_allgather(double *all, const int64_t *counts, qr_status local, qr_error *e);

/* n bytes from rank `root` to every rank: root's *buf and *n are sent; on the others *buf becomes a
 * malloc'd copy (the caller frees it) and *n its length. `local` as for qr_dist_allgather (root's
 * error arrives instead of its bytes; another rank's stays its own). */
qr_status qr_dist_bcast(int root, unsigned char **buf, size_t *n, qr_status local, qr_error *e);

#endif
