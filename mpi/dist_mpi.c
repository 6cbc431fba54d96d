/* The Open MPI transport of runtime/dist.h, linked only into build/qrl-mpi (built when mpicc
 * exists), so libqrl and build/qrl do not depend on MPI. Point-to-point messages only (the
 * reduction tree, the gathers and their order are runtime/dist.c's), waited for without spinning. */
#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist.h"

/* MPI counts are ints: a long message goes as its length, then chunks of at most 1 GiB. */
#define CHUNK ((size_t)1 << 30)
#define TAG_LEN 1
#define TAG_DATA 2

static int mpi_start(int *argc, char ***argv, qr_error *e);
static qr_status mpi_send(int to, const void *buf, size_t n, qr_error *e);
static qr_status mpi_recv(int from, unsigned char **buf, size_t *n, qr_error *e);
static void mpi_finish(void);
static void mpi_abort(int code);

qr_dist_transport qr_dist_mpi = {
    .start = mpi_start, .rank = 0, .size = 1, .send = mpi_send, .recv = mpi_recv, .finish = mpi_finish,
    .abort = mpi_abort,
};

static qr_status mpi_fail(qr_error *e, int rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    return qr_errorf(e, "MPI: %s: %s", what, s);
}

static int mpi_start(int *argc, char ***argv, qr_error *e)
{
    /* only under mpirun (or a compatible launcher): run by hand, qrl-mpi is qrl */
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
        return 0;
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS)
        return mpi_fail(e, rc, "MPI_Init"), -1;
    /* errors come back as values, which qrl reports, instead of ending the process in MPI */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &qr_dist_mpi.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &qr_dist_mpi.size);
    return 1;
}

/* Waits for r to complete without spinning: Open MPI's blocking calls poll the network flat out,
 * so a rank that waits for another (its share done first, or for rank 0's broadcast) would burn a
 * core that the ranks still working need, on a machine with a core per rank or fewer. Here it
 * tests, then sleeps, 1 us at first, twice as long each time up to 1 ms: a message waited for
 * arrives at most about 1 ms late, and the ranks exchange a few per measurement. */
static int wait_for(MPI_Request *r)
{
    int done = 0, rc;
    long ns = 1000;
    while ((rc = MPI_Test(r, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000)
            ns *= 2;
    }
    return rc;
}

static int send_wait(const void *buf, int n, MPI_Datatype t, int to, int tag)
{
    MPI_Request r;
    int rc = MPI_Isend(buf, n, t, to, tag, MPI_COMM_WORLD, &r);
    return rc == MPI_SUCCESS ? wait_for(&r) : rc;
}

static int recv_wait(void *buf, int n, MPI_Datatype t, int from, int tag)
{
    MPI_Request r;
    int rc = MPI_Irecv(buf, n, t, from, tag, MPI_COMM_WORLD, &r);
    return rc == MPI_SUCCESS ? wait_for(&r) : rc;
}

static qr_status mpi_send(int to, const void *buf, size_t n, qr_error *e)
{
    uint64_t len = n;
    int rc = send_wait(&len, 1, MPI_UINT64_T, to, TAG_LEN);
    for (size_t at = 0; rc == MPI_SUCCESS && at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        rc = send_wait((const char *)buf + at, (int)k, MPI_BYTE, to, TAG_DATA);
    }
    return rc == MPI_SUCCESS ? QR_OK : mpi_fail(e, rc, "sending to another rank");
}

static qr_status mpi_recv(int from, unsigned char **buf, size_t *n, qr_error *e)
{
    uint64_t len = 0;
    *buf = NULL;
    *n = 0;
    int rc = recv_wait(&len, 1, MPI_UINT64_T, from, TAG_LEN);
    if (rc != MPI_SUCCESS)
        return mpi_fail(e, rc, "receiving from another rank");
    if (len > SIZE_MAX - 1 || !(*buf = malloc((size_t)len + 1)))
        return qr_errorf(e, "out of memory for a message of %llu bytes from rank %d", (unsigned long long)len, from);
    for (size_t at = 0; rc == MPI_SUCCESS && at < len; at += CHUNK) {
        size_t k = len - at < CHUNK ? len - at : CHUNK;
        rc = recv_wait(*buf + at, (int)k, MPI_BYTE, from, TAG_DATA);
    }
    if (rc != MPI_SUCCESS)
        return mpi_fail(e, rc, "receiving from another rank");
    *n = (size_t)len;
    return QR_OK;
}

static void mpi_finish(void)
{
    MPI_Finalize();
}

static void mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort does not return; should it, the process still ends */
}
