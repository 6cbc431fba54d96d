/* The on-disk cache of compiled modules, and loading a module from bytes.
 *
 * What the cache trusts: a folder owned by the effective user and not
 * writable by group or others, and in it regular files owned by that user,
 * not writable by group or others, whose header (magic, format version, the
 * full key, the length and SHA-256 of the shared object) matches the bytes
 * that follow it. Anything else is never loaded: a distrusted folder is not
 * used at all, a distrusted or damaged entry is rebuilt; either costs
 * compile time, never an error (one warning per process says why).
 *
 * Entries are read into memory, verified, and loaded from a private copy
 * (a memfd) so that nothing can change the bytes between the check and
 * dlopen; a cache file is never mapped, so truncating one cannot fault a
 * reader. Entries are written under a fresh O_EXCL name and renamed. */
#ifndef QC_CACHE_H
#define QC_CACHE_H

#include <stddef.h>

#include "../lang/diag.h"

/* Entries are "<key>" QC_CACHE_EXT; the old bare "<key>.so" is never read. */
#define QC_CACHE_EXT ".qmod"
/* Bumped when the entry header changes: older entries are then rebuilt. */
#define QC_CACHE_FORMAT 1

typedef struct qc_cache {
    int dirfd;  /* the trusted folder, -1 when there is none */
    char *path; /* its path (malloc'd), for messages */
} qc_cache;

/* Opens the cache folder: override, else $XDG_CACHE_HOME/qrl, else
 * ~/.cache/qrl, creating missing folders with mode 0700. Returns 1 when it is
 * usable; 0 when there is none or it cannot be created (silently) or it is
 * not trusted (with a warning in d, once per process). */
int qc_cache_open(qc_cache *c, const char *override, ql_diags *d);
void qc_cache_close(qc_cache *c);

/* "<key>.qmod": the file name of key's entry. */
void qc_cache_entry_name(const char *key, char *buf, size_t n);

typedef enum qc_entry_status {
    QC_ENTRY_MISS, /* no entry */
    QC_ENTRY_OK,   /* *so and *len hold the verified shared object (malloc'd) */
    QC_ENTRY_BAD,  /* an entry that must not be loaded: damaged, foreign or distrusted */
} qc_entry_status;

qc_entry_status qc_cache_get(qc_cache *c, const char *key, unsigned char **so, size_t *len, ql_diags *d);

/* Stores so under key atomically. 0 on success, -1 otherwise (an unwritable
 * cache only costs the next run a compilation; callers go on). */
int qc_cache_put(qc_cache *c, const char *key, const unsigned char *so, size_t len);

/* A shared object loaded from bytes (qc_dl_open), its symbols, and closing it
 * (qc_dl_close takes void * to serve as a qrl_module release function). */
typedef struct qc_dl qc_dl;
qc_dl *qc_dl_open(const unsigned char *so, size_t len, char *err, size_t n);
void *qc_dl_sym(qc_dl *h, const char *name);
void qc_dl_close(void *h);

/* The bytes of a regular file that is not a symbolic link (malloc'd), at most
 * max bytes; 0 on success, -1 (errno set) otherwise. */
int qc_read_file(int dirfd, const char *name, size_t max, unsigned char **out, size_t *len);

#endif
