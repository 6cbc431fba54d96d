/* The Open MPI transport of runtime/dist.h, linked only into build/qrl-mpi (built when mpicc
 * exists), so libqrl and build/qrl do not depend on MPI. Plain MPI_Send/MPI_Recv: the reduction
 * tree and its order are runtime/dist.c's. */
#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

static qr_status mpi_send(int to, const void *buf, size_t n, qr_error *e)
{
    uint64_t len = n;
    int rc = MPI_Send(&len, 1, MPI_UINT64_T, to, TAG_LEN, MPI_COMM_WORLD);
    for (size_t at = 0; rc == MPI_SUCCESS && at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        rc = MPI_Send((const char *)buf + at, (int)k, MPI_BYTE, to, TAG_DATA, MPI_COMM_WORLD);
    }
    return rc == MPI_SUCCESS ? QR_OK : mpi_fail(e, rc, "sending to another rank");
}

static qr_status mpi_recv(int from, unsigned char **buf, size_t *n, qr_error *e)
{
    uint64_t len = 0;
    *buf = NULL;
    *n = 0;
    int rc = MPI_Recv(&len, 1, MPI_UINT64_T, from, TAG_LEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_fail(e, rc, "receiving from another rank");
    if (len > SIZE_MAX - 1 || !(*buf = malloc((size_t)len + 1)))
        return qr_errorf(e, "out of memory for a message of %llu bytes from rank %d", (unsigned long long)len, from);
    for (size_t at = 0; rc == MPI_SUCCESS && at < len; at += CHUNK) {
        size_t k = len - at < CHUNK ? len - at : CHUNK;
        rc = MPI_Recv(*buf + at, (int)k, MPI_BYTE, from, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
