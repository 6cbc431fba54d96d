/* File helpers: whole-file reads with a size limit, and atomic writes
 * (temporary name in the same folder, fsync, rename) so no error leaves a
 * partial output file behind. */
#ifndef QR_FILEIO_H
#define QR_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

/* malloc'd contents (NUL-terminated for convenience) of path. */
qr_status qr_read_file(const char *path, size_t max, unsigned char **data, size_t *len, qr_error *e);

/* An output being written: write to f, then commit (rename into place) or abort (remove). */
typedef struct qr_atomic_file {
    FILE *f;
    char *path;
    char *tmp;
} qr_atomic_file;

/* Fails (e names the path and why) when path exists and is not a regular file (a directory, a
 * device, a FIFO, a symbolic link: never replaced), or its directory cannot be written. */
qr_status qr_output_check(const char *path, qr_error *e);
/* qr_output_check, then a temporary file beside path, created with path's permissions when it
 * exists, else 0666 less the umask. */
qr_status qr_atomic_open(qr_atomic_file *a, const char *path, qr_error *e);
/* A group of outputs, all or nothing (per thread): between begin and commit, a commit of a file
 * only finishes it; group_commit renames them all into place, group_abort removes them. */
void qr_atomic_group_begin(void);
qr_status qr_atomic_group_commit(qr_error *e);
void qr_atomic_group_abort(void);
/* Whether this thread is between qr_atomic_group_begin and its commit or abort. */
int qr_atomic_group_open(void);
/* Flushes, fsyncs and renames; on failure the temporary file is removed. */
qr_status qr_atomic_commit(qr_atomic_file *a, qr_error *e);
void qr_atomic_abort(qr_atomic_file *a);

/* A temporary file the signal handlers remove (qr_atomic_cleanup_on_signals) while it is
 * registered: tmp must stay valid until qr_tmp_unregister. */
void qr_tmp_register(char *tmp);
void qr_tmp_unregister(const char *tmp);

/* A thread that blocks the fatal signals below and makes files it cannot register (a
 * libgccjit compilation's temporary folder) brackets that work with these: a handler that runs
 * meanwhile waits for qr_scratch_leave before the process dies. qr_scratch_enter returns -1 (and
 * counts nothing) once a fatal signal has arrived: then start nothing. */
int qr_scratch_enter(void);
void qr_scratch_leave(void);

/* A folder the handlers below remove, with what it holds (libgccjit's scratch: compiler/jitrun.h);
 * dir is copied; NULL: none. qr_scratch_dir_remove removes it now (at exit); only the process
 * that set it removes it (not a forked child). */
void qr_scratch_dir_set(const char *dir);
void qr_scratch_dir_remove(void);
/* A child process compiling into that folder (compiler/jitrun.h), which the handlers end and wait
 * for before they remove it; 0 once it has ended. */
void qr_scratch_child(int pid);
/* Puts the handlers of qr_atomic_cleanup_on_signals back where other code replaced them (not where
 * a signal is ignored); nothing when they were never installed. */
void qr_signals_restore(void);

/* Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that remove the
 * temporary files of every qr_atomic_file still open, then die of the signal
 * as before: an interrupted write leaves nothing behind. */
void qr_atomic_cleanup_on_signals(void);

/* mkdir -p: creates dir and its missing parents. */
qr_status qr_make_dirs(const char *dir, qr_error *e);

/* Directory part of path ("." if none), malloc'd. */
char *qr_path_dir(const char *path);

#endif
