/* Processes working on one job (dist.h): the reduction tree and the input check, over whichever
 * transport the binary links (build/qrl-mpi: Open MPI). */
#include "dist.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qrl.h"

/* Defined by mpi/dist_mpi.c in the binaries linked with Open MPI; absent (NULL) elsewhere, so
 * libqrl and build/qrl need no MPI. */
extern qr_dist_transport qr_dist_mpi __attribute__((weak));

static int started; /* the transport runs this process as one rank of a job */

const qr_dist_transport *qr_dist_linked(void)
{
    return &qr_dist_mpi;
}

int qr_dist_rank(void)
{
    return started ? qr_dist_mpi.rank : 0;
}

int qr_dist_size(void)
{
    return started ? qr_dist_mpi.size : 1;
}

void qr_dist_share_of(int64_t n, int rank, int64_t *lo, int64_t *hi)
{
    int64_t r = rank, s = qr_dist_size();
    *lo = n * r / s;
    *hi = n * (r + 1) / s;
}

void qr_dist_share(int64_t n, int64_t *lo, int64_t *hi)
{
    qr_dist_share_of(n, qr_dist_rank(), lo, hi);
}

/* This rank's error message as the others see it: "rank R: ...", unless it came from another
 * rank (an earlier exchange) and names it already. */
static void own_error(char *out, size_t n, int rank, const char *msg)
{
    int r;
    char c;
    if (sscanf(msg, "rank %d%c", &r, &c) == 2 && c == ':')
        snprintf(out, n, "%s", msg);
    else
        snprintf(out, n, "rank %d: %s", rank, msg);
}

/* A status byte, then n bytes of data (QR_OK) or the error's message: one message of the
 * all-gather and the broadcast. */
static qr_status send_status(int to, qr_status st, const void *data, size_t n, const char *msg, qr_error *e)
{
    size_t len = st == QR_OK ? n : strlen(msg) + 1;
    unsigned char *buf = malloc(len + 1);
    if (!buf)
        return qr_errorf(e, "out of memory");
    buf[0] = st == QR_OK ? 0 : 1;
    if (len)
        memcpy(buf + 1, st == QR_OK ? data : msg, len);
    qr_status s = qr_dist_mpi.send(to, buf, len + 1, e);
    free(buf);
    return s;
}

/* The message from `from` (send_status): 0 and its data at *buf + 1, n bytes; 1 and its error in
 * err (own_error: the rank that had it); -1 when the transport failed (e). */
static int recv_status(int from, unsigned char **buf, size_t *n, qr_error *err, qr_error *e)
{
    if (qr_dist_mpi.recv(from, buf, n, e) != QR_OK) {
        qr_error_prefix(e, "rank %d", qr_dist_rank());
        return -1;
    }
    if (*n < 1) {
        qr_errorf(e, "rank %d: an empty message from rank %d", qr_dist_rank(), from);
        return -1;
    }
    if ((*buf)[0] == 0) {
        *n -= 1;
        return 0;
    }
    (*buf)[*n] = 0; /* recv leaves room for a byte past the message */
    own_error(err->msg, sizeof err->msg, from, (const char *)*buf + 1);
    return 1;
}

qr_status qr_dist_allgather(double *all, const int64_t *counts, qr_status local, qr_error *e)
{
    int size = qr_dist_size(), rank = qr_dist_rank();
    if (size <= 1)
        return local;
    size_t at = 0, total = 0, mine = 0;
    for (int k = 0; k < size; k++) {
        if (k == rank)
            mine = at;
        at += (size_t)counts[k];
    }
    total = at;
    qr_error first;
    qr_status st = local;
    if (st != QR_OK)
        own_error(first.msg, sizeof first.msg, rank, e->msg);
    if (rank != 0) {
        unsigned char *buf = NULL;
        size_t n = 0;
        qr_error re;
        int got = send_status(0, st, all + mine, sizeof *all * (size_t)counts[rank], first.msg, e) == QR_OK
                      ? recv_status(0, &buf, &n, &re, e) : -1;
        if (got == 0 && n != sizeof *all * total) {
            qr_errorf(e, "rank %d: an all-gather of %zu bytes from rank 0, not %zu", rank, n, sizeof *all * total);
            got = -1;
        }
        if (got == 0 && st == QR_OK && n)
            memcpy(all, buf + 1, n);
        free(buf);
        if (st != QR_OK) /* its own error (it took part, so that no rank waits for it) */
            memcpy(e, &first, sizeof *e);
        else if (got == 1) /* another rank's, as rank 0 tells it */
            memcpy(e, &re, sizeof *e);
        return st != QR_OK || got != 0 ? QR_ERR : QR_OK;
    }
    /* rank 0: every other rank's block, from rank 1 up, into its place */
    at = (size_t)counts[0];
    qr_status fatal = QR_OK;
    for (int k = 1; k < size; k++) {
        unsigned char *buf = NULL;
        size_t n = 0;
        qr_error re;
        int got = recv_status(k, &buf, &n, &re, e);
        if (got < 0) {
            free(buf);
            fatal = QR_ERR; /* the transport failed: nothing more can be trusted */
            snprintf(first.msg, sizeof first.msg, "%s", e->msg);
            break;
        }
        if (got == 0 && n != sizeof *all * (size_t)counts[k]) {
            snprintf(re.msg, sizeof re.msg, "rank %d: sent %zu bytes to an all-gather, not %zu", k, n,
                     sizeof *all * (size_t)counts[k]);
            got = 1;
        }
        if (got == 0) {
            if (n)
                memcpy(all + at, buf + 1, n);
        } else if (st == QR_OK) {
            memcpy(&first, &re, sizeof first);
            st = QR_ERR;
        }
        free(buf);
        at += (size_t)counts[k];
    }
    if (fatal != QR_OK) {
        memcpy(e, &first, sizeof *e);
        return QR_ERR;
    }
    for (int k = 1; k < size; k++)
        if (send_status(k, st, all, sizeof *all * total, first.msg, e) != QR_OK) {
            qr_error_prefix(e, "rank 0");
            return QR_ERR;
        }
    if (st != QR_OK)
        memcpy(e, &first, sizeof *e);
    return st;
}

qr_status qr_dist_bcast(int root, unsigned char **buf, size_t *n, qr_status local, qr_error *e)
{
    int size = qr_dist_size(), rank = qr_dist_rank();
    if (size <= 1)
        return local;
    qr_error first;
    if (local != QR_OK)
        own_error(first.msg, sizeof first.msg, rank, e->msg);
    if (rank == root) {
        for (int k = 0; k < size; k++)
            if (k != root && send_status(k, local, *buf, *n, first.msg, e) != QR_OK) {
                qr_error_prefix(e, "rank %d", rank);
                return QR_ERR;
            }
        if (local != QR_OK)
            memcpy(e, &first, sizeof *e);
        return local;
    }
    unsigned char *got = NULL;
    size_t len = 0;
    qr_error re;
    int s = recv_status(root, &got, &len, &re, e);
    if (local != QR_OK) { /* its own error first (it received, so that no message is left behind) */
        free(got);
        memcpy(e, &first, sizeof *e);
        return local;
    }
    if (s != 0) {
        free(got);
        if (s == 1)
            memcpy(e, &re, sizeof *e);
        return QR_ERR;
    }
    memmove(got, got + 1, len);
    *buf = got;
    *n = len;
    return QR_OK;
}

/* A message up the tree: a status byte, then the state (QR_OK) or the error's message. */
static qr_status send_up(int to, qr_status st, const qr_dist_reducer *r, const qr_error *err, qr_error *e)
{
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    qr_status ok = QR_OK;
    if (st == QR_OK) {
        unsigned char head = 0;
        buf = malloc(cap = 256);
        if (!buf)
            return qr_errorf(e, "out of memory");
        buf[len++] = head;
        ok = r->pack(r->user, &buf, &len, &cap, e);
    }
    if (st != QR_OK || ok != QR_OK) { /* the error instead, with the rank that had it */
        const char *msg = st != QR_OK ? err->msg : e->msg;
        size_t n = strlen(msg);
        free(buf);
        buf = malloc(n + 2);
        if (!buf)
            return qr_errorf(e, "out of memory");
        buf[0] = 1;
        memcpy(buf + 1, msg, n + 1);
        len = n + 2;
    }
    qr_status s = qr_dist_mpi.send(to, buf, len, e);
    free(buf);
    return s;
}

qr_status qr_dist_reduce(const qr_dist_reducer *r, qr_status local, qr_error *e)
{
    int size = qr_dist_size(), rank = qr_dist_rank();
    if (size <= 1)
        return local;
    qr_status st = local;
    qr_error first;
    if (st != QR_OK) {
        snprintf(first.msg, sizeof first.msg, "rank %d: %s", rank, e->msg);
        /* a rank's own error message keeps its rank only when it travels */
    }
    for (int mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) { /* send what this subtree has (its state or its first error) and stop */
            qr_error se;
            qr_status s = send_up(rank - mask, st, r, st != QR_OK ? &first : NULL, &se);
            if (s != QR_OK) {
                memcpy(e, &se, sizeof *e);
                return s;
            }
            if (st != QR_OK)
                memcpy(e, &first, sizeof *e);
            return st;
        }
        if (rank + mask >= size)
            continue;
        unsigned char *buf = NULL;
        size_t n = 0;
        qr_error re;
        if (qr_dist_mpi.recv(rank + mask, &buf, &n, &re) != QR_OK) {
            free(buf);
            if (st == QR_OK) {
                snprintf(first.msg, sizeof first.msg, "rank %d: %s", rank, re.msg);
                st = QR_ERR;
            }
            continue;
        }
        if (st == QR_OK && n >= 1 && buf[0] == 1) { /* a rank below failed: its message, as it came */
            snprintf(first.msg, sizeof first.msg, "%.*s", (int)(n - 2 < sizeof first.msg ? n - 2 : sizeof first.msg - 1),
                     (const char *)buf + 1);
            st = QR_ERR;
        } else if (st == QR_OK && (n < 1 || r->merge(r->user, buf + 1, n - 1, &re) != QR_OK)) {
            snprintf(first.msg, sizeof first.msg, "rank %d: merging the states of ranks %d..%d: %s", rank,
                     rank + mask, rank + 2 * mask - 1 < size - 1 ? rank + 2 * mask - 1 : size - 1,
                     n < 1 ? "an empty message" : re.msg);
            st = QR_ERR;
        }
        free(buf);
    }
    if (st != QR_OK)
        memcpy(e, &first, sizeof *e);
    return st;
}

qr_status qr_dist_same(const unsigned char *const *digests, const char *const *what, int n, size_t len,
                       qr_error *e)
{
    int size = qr_dist_size(), rank = qr_dist_rank();
    if (size <= 1)
        return QR_OK;
    size_t total = len * (size_t)n;
    unsigned char *mine = malloc(total + 1);
    if (!mine)
        return qr_errorf(e, "out of memory");
    for (int i = 0; i < n; i++)
        memcpy(mine + len * (size_t)i, digests[i], len);
    /* the verdict: per rank, a bit per input that differs from rank 0's */
    int64_t *diff = calloc((size_t)size, sizeof *diff);
    qr_status st = diff ? QR_OK : qr_errorf(e, "out of memory");
    if (st == QR_OK && rank != 0)
        st = qr_dist_mpi.send(0, mine, total, e);
    for (int k = 1; st == QR_OK && rank == 0 && k < size; k++) {
        unsigned char *buf = NULL;
        size_t got = 0;
        st = qr_dist_mpi.recv(k, &buf, &got, e);
        for (int i = 0; st == QR_OK && i < n; i++)
            if (got != total || memcmp(buf + len * (size_t)i, mine + len * (size_t)i, len))
                diff[k] |= (int64_t)1 << i;
        free(buf);
    }
    for (int k = 1; st == QR_OK && rank == 0 && k < size; k++)
        st = qr_dist_mpi.send(k, diff, sizeof *diff * (size_t)size, e);
    if (st == QR_OK && rank != 0) {
        unsigned char *buf = NULL;
        size_t got = 0;
        st = qr_dist_mpi.recv(0, &buf, &got, e);
        if (st == QR_OK && got == sizeof *diff * (size_t)size)
            memcpy(diff, buf, got);
        else if (st == QR_OK)
            st = qr_errorf(e, "rank %d: a malformed verdict from rank 0", rank);
        free(buf);
    }
    int bad = 0;
    for (int k = 1; st == QR_OK && k < size; k++)
        bad += diff[k] != 0;
    if (st == QR_OK && bad) {
        char msg[sizeof e->msg] = "";
        size_t at = 0;
        for (int k = 1; k < size && at < sizeof msg - 64; k++) {
            if (!diff[k])
                continue;
            at += (size_t)snprintf(msg + at, sizeof msg - at, "%srank %d (", at ? "; " : "", k);
            for (int i = 0, c = 0; i < n && at < sizeof msg - 64; i++)
                if (diff[k] >> i & 1)
                    at += (size_t)snprintf(msg + at, sizeof msg - at, "%s%s", c++ ? ", " : "", what[i]);
            at += (size_t)snprintf(msg + at, sizeof msg - at, ")");
        }
        st = rank == 0 ? qr_errorf(e, "the ranks of this job were given different inputs: %s differ%s from rank 0's; "
                                      "every rank must get the same model, recipe, calibration data and options",
                                   msg, bad == 1 ? "s" : "")
                       : qr_errorf(e, "rank %d: rank 0 reports different inputs (%s)", rank, msg);
    }
    free(diff);
    free(mine);
    return st;
}

/* ------------------------------------------------------------ the public calls */

int qrl_dist_linked(void)
{
    return qr_dist_linked() != NULL;
}

int qrl_dist_start(int *argc, char ***argv, char *err, size_t errlen)
{
    if (!qr_dist_linked() || started)
        return 0;
    qr_error e;
    int s = qr_dist_mpi.start(argc, argv, &e);
    if (s < 0) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    started = s > 0;
    return 0;
}

int qrl_dist_rank(void)
{
    return qr_dist_rank();
}

int qrl_dist_size(void)
{
    return qr_dist_size();
}

void qrl_dist_end(int status)
{
    if (!started)
        return;
    started = 0;
    if (status != 0 && qr_dist_mpi.size > 1)
        qr_dist_mpi.abort(status); /* the others may wait on this one: end them all */
    qr_dist_mpi.finish();
}
