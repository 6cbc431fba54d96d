/* Distributed calibration's mechanism in one process (runtime/dist.h, qr_calib_pack/unpack): a
 * calibrator state through its typed layout and back, the reduction tree, the all-gather and the
 * broadcast over a transport that queues messages in memory (tests/e2e/test_dist.c runs the same
 * over Open MPI). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "qrl.h"
#include "recipe.h"
#include "testutil.h"

/* ------------------------------------------------------------ states */

static void data(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(((double)((seed >> 8) & 0xffffff) / 16777216.0 - 0.3) * (i % 5 ? 2.0 : 9.0));
    }
}

static void pack(const qr_calib *c, unsigned char **buf, size_t *len)
{
    size_t cap = 0;
    qr_error e;
    *buf = NULL;
    *len = 0;
    cr_assert_eq(qr_calib_pack(c, buf, len, &cap, &e), QR_OK, "%s", e.msg);
}

/* Every kind of field: scalars (minmax, moving_average's count), an array (moments_only), a
 * histogram (percentile, entropy). A state observed, packed and unpacked into a fresh instance
 * solves to the same qparams, packs to the same bytes, and merges into a third state as the
 * original does. */
Test(dist, states_round_trip_through_their_layout)
{
    char err[512];
    qrl_module *m = tu_compile("tests/recipes/every-state.qrl", err, sizeof err);
    cr_assert(m, "%s", err);
    const char *names[] = {"minmax", "moving_average", "percentile", "entropy", "moments_only"};
    enum { N = 4096 };
    static float a[N], b[N];
    data(a, N, 1);
    data(b, N, 2);
    qr_tensor ta = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = a};
    qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = b};
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    for (int k = 0; k < 5; k++) {
        qr_calib *c, *u, *x, *y;
        qr_error e;
        cr_assert_eq(qr_calib_new(m, names[k], 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(c, &ta, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(c, &tb, &e), QR_OK, "%s", e.msg); /* moving_average: 2 batches */
        unsigned char *p, *p2;
        size_t n, n2, at = 0;
        pack(c, &p, &n);
        cr_assert_eq(qr_calib_fresh(c, &u, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_unpack(u, p, n, &at, &e), QR_OK, "%s: %s", names[k], e.msg);
        cr_expect_eq(at, n, "%s: unpack read %zu of %zu bytes", names[k], at, n);
        pack(u, &p2, &n2);
        cr_expect(n2 == n && !memcmp(p, p2, n), "%s: the unpacked state packs to other bytes", names[k]);
        qrl_qparams q1, q2;
        cr_assert_eq(qr_calib_solve(c, &u8, &q1, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(u, &u8, &q2, &e), QR_OK, "%s", e.msg);
        cr_expect(q1.scale == q2.scale && q1.zero == q2.zero, "%s: solve %g %lld, unpacked %g %lld", names[k],
                  q1.scale, (long long)q1.zero, q2.scale, (long long)q2.zero);
        /* into a third state: the original and the copy merge alike */
        cr_assert_eq(qr_calib_fresh(c, &x, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_fresh(c, &y, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(x, &tb, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(y, &tb, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_merge(x, c, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_merge(y, u, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &u8, &q1, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(y, &u8, &q2, &e), QR_OK, "%s", e.msg);
        cr_expect(q1.scale == q2.scale && q1.zero == q2.zero, "%s: merged copy solves otherwise", names[k]);
        /* a truncated state is an error, not a read past the end */
        at = 0;
        qr_calib *t;
        cr_assert_eq(qr_calib_fresh(c, &t, &e), QR_OK, "%s", e.msg);
        cr_expect_eq(qr_calib_unpack(t, p, n - 1, &at, &e), QR_ERR, "%s: a truncated state unpacked", names[k]);
        qr_calib_free(t);
        free(p);
        free(p2);
        qr_calib_free(c);
        qr_calib_free(u);
        qr_calib_free(x);
        qr_calib_free(y);
    }
    /* another layout (a histogram of another bin count) does not fit */
    qr_calib *c, *d;
    qr_error e;
    const char *bn[] = {"bins"};
    double b1[] = {64}, b2[] = {128};
    cr_assert_eq(qr_calib_new(m, "percentile", 1, bn, b1, &c, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "percentile", 1, bn, b2, &d, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(c, &ta, &e), QR_OK, "%s", e.msg);
    unsigned char *p;
    size_t n, at = 0;
    pack(c, &p, &n);
    cr_expect_eq(qr_calib_unpack(d, p, n, &at, &e), QR_ERR, "64 bins unpacked into 128");
    cr_expect(strstr(e.msg, "does not fit its layout"), "%s", e.msg);
    free(p);
    qr_calib_free(c);
    qr_calib_free(d);
    qr_module_free(m);
}

/* ------------------------------------------------- the reduction tree */

/* A transport in memory: messages queued per (from, to). The ranks run one after another, highest
 * first: in the reduction every rank only receives from higher ranks, which have sent by then. */
#define RANKS 8
typedef struct msg {
    struct msg *next;
    size_t n;
    unsigned char data[];
} msg;
static msg *queue[RANKS][RANKS];

static int fake_start(int *argc, char ***argv, qr_error *e)
{
    (void)argc, (void)argv, (void)e;
    return 1;
}

static qr_status fake_send(int to, const void *buf, size_t n, qr_error *e);
static qr_status fake_recv(int from, unsigned char **buf, size_t *n, qr_error *e);
static void fake_finish(void) {}
static void fake_abort(int code) { cr_assert_fail("abort(%d)", code); }

/* The test binary's own transport: what mpi/dist_mpi.c is to qrl-mpi. */
qr_dist_transport qr_dist_mpi = {.start = fake_start, .rank = 0, .size = 1, .send = fake_send,
                                 .recv = fake_recv, .finish = fake_finish, .abort = fake_abort};

static qr_status fake_send(int to, const void *buf, size_t n, qr_error *e)
{
    (void)e;
    msg *m = malloc(sizeof *m + n), **at = &queue[qr_dist_mpi.rank][to];
    m->next = NULL;
    m->n = n;
    memcpy(m->data, buf, n);
    while (*at)
        at = &(*at)->next;
    *at = m;
    return QR_OK;
}

/* Ranks on threads (run_ranks), for the exchanges where a rank sends after it has received: one
 * runs at a time, holding mu, and hands the turn on when it waits for a message not yet sent; a
 * wait no rank can end is a deadlock, reported as an error. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int threaded, turn, nthreads, deadlock;
static int finished[RANKS], waits_for[RANKS]; /* waits_for: -1 or the rank it waits a message from */

/* The turn to the next rank after me (in rank order, round) that can run; 0 when none can. */
static int hand_on(int me)
{
    for (int i = 1; i <= nthreads; i++) {
        int c = (me + i) % nthreads;
        if (!finished[c] && (waits_for[c] < 0 || queue[waits_for[c]][c])) {
            turn = c;
            pthread_cond_broadcast(&cv);
            return 1;
        }
    }
    return 0;
}

static qr_status fake_recv(int from, unsigned char **buf, size_t *n, qr_error *e)
{
    int me = qr_dist_mpi.rank;
    if (threaded && !queue[from][me]) {
        waits_for[me] = from;
        if (!hand_on(me)) {
            deadlock = 1;
            pthread_cond_broadcast(&cv);
        }
        while (turn != me && !deadlock)
            pthread_cond_wait(&cv, &mu);
        waits_for[me] = -1;
        qr_dist_mpi.rank = me;
    }
    msg *m = queue[from][qr_dist_mpi.rank];
    if (!m)
        return qr_errorf(e, "rank %d would wait for rank %d forever", qr_dist_mpi.rank, from);
    queue[from][qr_dist_mpi.rank] = m->next;
    *buf = malloc(m->n + 1);
    memcpy(*buf, m->data, m->n);
    *n = m->n;
    free(m);
    return QR_OK;
}

/* A state that records how it was merged: "0", then "(0 1)", ... */
typedef struct trace {
    char s[512];
} trace;

static qr_status trace_pack(void *user, unsigned char **buf, size_t *len, size_t *cap, qr_error *e)
{
    (void)e;
    trace *t = user;
    size_t n = strlen(t->s);
    if (*len + n > *cap)
        *buf = realloc(*buf, *cap = *len + n);
    memcpy(*buf + *len, t->s, n);
    *len += n;
    return QR_OK;
}

static qr_status trace_merge(void *user, const unsigned char *buf, size_t n, qr_error *e)
{
    (void)e;
    trace *t = user;
    char mine[512];
    snprintf(mine, sizeof mine, "%s", t->s);
    snprintf(t->s, sizeof t->s, "(%s %.*s)", mine, (int)n, (const char *)buf);
    return QR_OK;
}

/* Runs the reduction on `size` ranks (rank `fails` with a local error, -1: none); rank 0's result. */
static qr_status reduce_on(int size, int fails, trace *root, qr_error *e)
{
    qr_dist_mpi.size = size;
    qr_status st = QR_OK;
    for (int r = size - 1; r >= 0; r--) {
        qr_dist_mpi.rank = r;
        trace t;
        snprintf(t.s, sizeof t.s, "%d", r);
        qr_dist_reducer red = {&t, trace_pack, trace_merge};
        qr_error re;
        qr_status local = r == fails ? qr_errorf(&re, "boom") : QR_OK;
        qr_status s = qr_dist_reduce(&red, local, &re);
        if (r == 0) {
            st = s;
            *root = t;
            memcpy(e, &re, sizeof *e);
        }
    }
    for (int i = 0; i < RANKS; i++)
        for (int j = 0; j < RANKS; j++)
            cr_expect_null(queue[i][j], "a message from rank %d to rank %d was never received", i, j);
    return st;
}

/* The binomial tree's order, derived by hand: at step 1 rank r (even) takes r + 1, at step 2 rank
 * r (multiple of 4) takes r + 2's pair, at step 4 rank 0 takes 4's quartet; lower ranks first. */
Test(dist, reduction_tree_merges_contiguous_ranks_lower_first)
{
    char err[256];
    cr_assert_eq(qrl_dist_start(NULL, NULL, err, sizeof err), 0, "%s", err);
    trace t;
    qr_error e;
    cr_assert_eq(reduce_on(1, -1, &t, &e), QR_OK, "%s", e.msg);
    cr_expect_str_eq(t.s, "0");
    cr_assert_eq(reduce_on(3, -1, &t, &e), QR_OK, "%s", e.msg);
    cr_expect_str_eq(t.s, "((0 1) 2)");
    cr_assert_eq(reduce_on(5, -1, &t, &e), QR_OK, "%s", e.msg);
    cr_expect_str_eq(t.s, "(((0 1) (2 3)) 4)");
    cr_assert_eq(reduce_on(8, -1, &t, &e), QR_OK, "%s", e.msg);
    cr_expect_str_eq(t.s, "(((0 1) (2 3)) ((4 5) (6 7)))");
    /* an error travels up instead of a state, with the rank that had it, and every message is
     * still received (no rank is left waiting) */
    cr_assert_eq(reduce_on(6, 3, &t, &e), QR_ERR);
    cr_expect_str_eq(e.msg, "rank 3: boom");
    cr_assert_eq(reduce_on(6, 0, &t, &e), QR_ERR);
    cr_expect_str_eq(e.msg, "rank 0: boom");
    qr_dist_mpi.rank = 0;
    qr_dist_mpi.size = 1;
    qrl_dist_end(0);
}

/* ------------------------------------------------- the gather and the broadcast */

typedef struct rank_job {
    int rank;
    void (*fn)(struct rank_job *);
    int fails;          /* the rank with a local error (-1: none) */
    double all[64];     /* the gather's result on this rank */
    int64_t counts[RANKS];
    int root;           /* the broadcast's */
    char got[64];       /* the broadcast's bytes on this rank */
    qr_status st;
    qr_error e;
} rank_job;

static void *rank_main(void *p)
{
    rank_job *j = p;
    pthread_mutex_lock(&mu);
    while (turn != j->rank && !deadlock)
        pthread_cond_wait(&cv, &mu);
    qr_dist_mpi.rank = j->rank;
    if (!deadlock)
        j->fn(j);
    else
        j->st = qr_errorf(&j->e, "deadlock");
    finished[j->rank] = 1;
    int all = 1;
    for (int r = 0; r < nthreads; r++)
        all &= finished[r];
    if (!all && !hand_on(j->rank)) { /* the others wait for messages none will send */
        deadlock = 1;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* Runs jobs[0..size) as ranks on threads, rank `first` first; no message left unreceived. */
static void run_ranks(rank_job *jobs, int size, int first)
{
    pthread_t t[RANKS];
    qr_dist_mpi.size = nthreads = size;
    threaded = 1, deadlock = 0, turn = first;
    for (int r = 0; r < size; r++)
        finished[r] = 0, waits_for[r] = -1, jobs[r].rank = r;
    for (int r = 0; r < size; r++)
        cr_assert_eq(pthread_create(&t[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < size; r++)
        pthread_join(t[r], NULL);
    cr_expect(!deadlock, "the ranks deadlocked");
    threaded = 0;
    for (int i = 0; i < RANKS; i++)
        for (int k = 0; k < RANKS; k++) {
            cr_expect_null(queue[i][k], "a message from rank %d to rank %d was never received", i, k);
            while (queue[i][k]) {
                msg *m = queue[i][k];
                queue[i][k] = m->next;
                free(m);
            }
        }
    qr_dist_mpi.rank = 0;
    qr_dist_mpi.size = 1;
}

/* Rank r's block: counts[r] values r * 100 + i. */
static void gather_job(rank_job *j)
{
    int64_t at = 0;
    for (int k = 0; k < j->rank; k++)
        at += j->counts[k];
    for (int64_t i = 0; i < j->counts[j->rank]; i++)
        j->all[at + i] = j->rank * 100 + (double)i;
    qr_status local = j->rank == j->fails ? qr_errorf(&j->e, "boom") : QR_OK;
    j->st = qr_dist_allgather(j->all, j->counts, local, &j->e);
    if (j->fails >= 0) /* the next exchange, every rank failed: the message keeps the rank that had it */
        j->st = qr_dist_allgather(j->all, j->counts, j->st, &j->e);
}

/* Every rank ends with every block in rank order (blocks of 2, 0, 3, 1 and 2 doubles), however the
 * ranks are scheduled (rank 4 first: its block is sent before the others'); an error on one rank
 * comes back on every rank with that rank's number, and through the next exchange unchanged. */
Test(dist, allgather_places_blocks_in_rank_order)
{
    char err[256];
    cr_assert_eq(qrl_dist_start(NULL, NULL, err, sizeof err), 0, "%s", err);
    static rank_job jobs[RANKS];
    const int64_t counts[5] = {2, 0, 3, 1, 2};
    for (int first = 0; first < 5; first += 4) {
        memset(jobs, 0, sizeof jobs);
        for (int r = 0; r < 5; r++) {
            jobs[r].fn = gather_job, jobs[r].fails = -1;
            memcpy(jobs[r].counts, counts, sizeof counts);
        }
        run_ranks(jobs, 5, first);
        const double want[8] = {0, 1, 200, 201, 202, 300, 400, 401};
        for (int r = 0; r < 5; r++) {
            cr_assert_eq(jobs[r].st, QR_OK, "rank %d: %s", r, jobs[r].e.msg);
            for (int i = 0; i < 8; i++)
                cr_expect_eq(jobs[r].all[i], want[i], "rank %d (rank %d first): element %d is %g, not %g", r, first,
                             i, jobs[r].all[i], want[i]);
        }
    }
    for (int fails = 0; fails < 5; fails += 2) {
        memset(jobs, 0, sizeof jobs);
        for (int r = 0; r < 5; r++) {
            jobs[r].fn = gather_job, jobs[r].fails = fails;
            memcpy(jobs[r].counts, counts, sizeof counts);
        }
        run_ranks(jobs, 5, 4);
        char want[64];
        snprintf(want, sizeof want, "rank %d: boom", fails);
        for (int r = 0; r < 5; r++) {
            cr_expect_eq(jobs[r].st, QR_ERR, "rank %d: rank %d's error did not reach it", r, fails);
            cr_expect_str_eq(jobs[r].e.msg, want, "rank %d", r);
        }
    }
    qrl_dist_end(0);
}

static void bcast_job(rank_job *j)
{
    unsigned char *buf = NULL;
    size_t n = 0;
    char mine[32];
    snprintf(mine, sizeof mine, "from rank %d", j->rank);
    if (j->rank == j->root)
        buf = (unsigned char *)mine, n = strlen(mine) + 1;
    qr_status local = j->rank == j->fails ? qr_errorf(&j->e, "no state") : QR_OK;
    j->st = qr_dist_bcast(j->root, &buf, &n, local, &j->e);
    if (j->st == QR_OK)
        snprintf(j->got, sizeof j->got, "%.*s", (int)n, (const char *)buf);
    if (j->rank != j->root)
        free(buf);
}

/* The root's bytes reach every rank; the root's error reaches every rank instead. */
Test(dist, bcast_sends_the_roots_bytes_or_its_error)
{
    char err[256];
    cr_assert_eq(qrl_dist_start(NULL, NULL, err, sizeof err), 0, "%s", err);
    static rank_job jobs[RANKS];
    for (int fails = -1; fails <= 2; fails += 3) {
        memset(jobs, 0, sizeof jobs);
        for (int r = 0; r < 4; r++)
            jobs[r].fn = bcast_job, jobs[r].fails = fails, jobs[r].root = 2;
        run_ranks(jobs, 4, 0);
        for (int r = 0; r < 4; r++) {
            if (fails < 0) {
                cr_expect_eq(jobs[r].st, QR_OK, "rank %d: %s", r, jobs[r].e.msg);
                cr_expect_str_eq(jobs[r].got, "from rank 2", "rank %d", r);
            } else {
                cr_expect_eq(jobs[r].st, QR_ERR, "rank %d", r);
                cr_expect_str_eq(jobs[r].e.msg, "rank 2: no state", "rank %d", r);
            }
        }
    }
    qrl_dist_end(0);
}
