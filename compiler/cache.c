/* memfd_create and MFD_* are GNU extensions. */
#define _GNU_SOURCE
#include "cache.h"
#include "fileio.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: asks for an executable memfd where the default is no-exec */
#endif

/* Entries larger than this are not read (a module is a few MB at most). */
#define MAX_MODULE ((size_t)256 << 20)

/* The entry header: every field fixed-size, integers little-endian. */
#define MAGIC "QRLMODUL"
#define KEY_MAX 64
enum {
    OFF_MAGIC = 0,
    OFF_FORMAT = 8,  /* u32 */
    OFF_KEYLEN = 12, /* u32 */
    OFF_KEY = 16,    /* KEY_MAX bytes, zero-padded */
    OFF_LEN = 16 + KEY_MAX, /* u64: bytes of the shared object that follow */
    OFF_SHA = OFF_LEN + 8,  /* SHA-256 of those bytes */
    HEADER = OFF_SHA + QC_SHA256_LEN,
};

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A planted or misconfigured cache is worth one line, not one per recipe. */
static atomic_int warned;

static void warn_once(ql_diags *d, const char *path, const char *kind, const char *what)
{
    if (atomic_exchange(&warned, 1))
        return;
    ql_warning_file(d, path, "not using this compiled-module cache %s: %s; recipes are compiled instead", kind, what);
}

/* Why st is not to be trusted, or NULL: the user's own, and only theirs to write. */
static const char *distrust(const struct stat *st, char *buf, size_t n)
{
    if (st->st_uid != geteuid()) {
        snprintf(buf, n, "owned by uid %ld, not by this user (uid %ld)", (long)st->st_uid, (long)geteuid());
        return buf;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return "writable by group or others";
    return NULL;
}

int qc_cache_open(qc_cache *c, const char *override, ql_diags *d)
{
    c->dirfd = -1;
    c->path = NULL;
    char buf[PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (override)
        n = snprintf(buf, sizeof buf, "%s", override);
    else if (xdg && xdg[0] == '/') /* the XDG spec: a relative path is invalid and ignored */
        n = snprintf(buf, sizeof buf, "%s/qrl", xdg);
    else if (home && *home)
        n = snprintf(buf, sizeof buf, "%s/.cache/qrl", home);
    else
        return 0;
    if (n <= 0 || (size_t)n >= sizeof buf)
        return 0;
    /* mkdir -p; what we create is private (the XDG spec asks 0700 too). */
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0700);
            *p = '/';
        }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return 0; /* no cache: compile in memory */
    char why[96];
    struct stat st;
    if (lstat(buf, &st) != 0)
        return 0;
    /* The user's own symbolic link may move the cache; someone else's may not. */
    if (S_ISLNK(st.st_mode) && st.st_uid != geteuid()) {
        warn_once(d, buf, "folder", "a symbolic link owned by someone else");
        return 0;
    }
    int fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR)
            warn_once(d, buf, "folder", "not a folder");
        return 0;
    }
    /* Checked on the open folder: it cannot be swapped after this. */
    const char *bad = fstat(fd, &st) != 0 ? "cannot stat it" : distrust(&st, why, sizeof why);
    if (bad) {
        warn_once(d, buf, "folder", bad);
        close(fd);
        return 0;
    }
    c->path = strdup(buf);
    if (!c->path) {
        close(fd);
        return 0;
    }
    c->dirfd = fd;
    return 1;
}

void qc_cache_close(qc_cache *c)
{
    if (c->dirfd >= 0)
        close(c->dirfd);
    free(c->path);
    c->dirfd = -1;
    c->path = NULL;
}

void qc_cache_entry_name(const char *key, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", key, QC_CACHE_EXT);
}

/* Reads all of fd (at most max bytes, else EFBIG). */
static int read_all(int fd, size_t max, unsigned char **out, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        errno = EFBIG;
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0; /* +1: notices a file that grew */
    unsigned char *b = malloc(cap);
    if (!b)
        return -1;
    for (;;) {
        ssize_t k = read(fd, b + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            free(b);
            return -1;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n == cap) {
            free(b);
            errno = EFBIG; /* changing under us: not worth trusting */
            return -1;
        }
    }
    *out = b;
    *len = n;
    return 0;
}

int qc_read_file(int dirfd, const char *name, size_t max, unsigned char **out, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    int r = -1;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
        errno = EINVAL;
    else
        r = read_all(fd, max, out, len);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

qc_entry_status qc_cache_get(qc_cache *c, const char *key, unsigned char **so, size_t *len, ql_diags *d)
{
    char name[128], path[PATH_MAX + 128], why[96];
    qc_cache_entry_name(key, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", c->path, name);
    /* O_NOFOLLOW: a link is not an entry; O_NONBLOCK: opening a FIFO does not
     * wait for a writer (fstat then rejects it). */
    int fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return QC_ENTRY_MISS;
        if (errno == ELOOP)
            warn_once(d, path, "entry", "a symbolic link");
        return QC_ENTRY_BAD;
    }
    struct stat st;
    const char *bad = fstat(fd, &st) != 0 ? "cannot stat it"
                      : !S_ISREG(st.st_mode) ? "not a regular file"
                                             : distrust(&st, why, sizeof why);
    if (bad) {
        warn_once(d, path, "entry", bad);
        close(fd);
        return QC_ENTRY_BAD;
    }
    unsigned char *b;
    size_t n;
    int r = read_all(fd, HEADER + MAX_MODULE, &b, &n);
    close(fd);
    if (r != 0)
        return QC_ENTRY_BAD;
    /* Damage, truncation, another key's entry, an older format or something
     * that is not an entry at all: each fails one of these. */
    size_t klen = strlen(key);
    unsigned char sha[QC_SHA256_LEN];
    int ok = n >= HEADER && memcmp(b + OFF_MAGIC, MAGIC, 8) == 0 && get_le(b + OFF_FORMAT, 4) == QC_CACHE_FORMAT &&
             klen <= KEY_MAX && get_le(b + OFF_KEYLEN, 4) == klen && memcmp(b + OFF_KEY, key, klen) == 0 &&
             get_le(b + OFF_LEN, 8) == n - HEADER;
    if (ok) {
        qc_sha256(b + HEADER, n - HEADER, sha);
        ok = memcmp(sha, b + OFF_SHA, QC_SHA256_LEN) == 0;
    }
    if (!ok) {
        free(b);
        return QC_ENTRY_BAD;
    }
    memmove(b, b + HEADER, n - HEADER);
    *so = b;
    *len = n - HEADER;
    return QC_ENTRY_OK;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

/* 64 unpredictable bits: temp names nobody can guess and plant in advance
 * (O_EXCL already refuses anything planted; this keeps it from being a DoS). */
static uint64_t random64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    static atomic_ulong counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^ atomic_fetch_add(&counter, 1);
}

int qc_cache_put(qc_cache *c, const char *key, const unsigned char *so, size_t len)
{
    size_t klen = strlen(key);
    if (klen > KEY_MAX || len > MAX_MODULE)
        return -1;
    unsigned char h[HEADER] = {0};
    memcpy(h + OFF_MAGIC, MAGIC, 8);
    put_le(h + OFF_FORMAT, QC_CACHE_FORMAT, 4);
    put_le(h + OFF_KEYLEN, klen, 4);
    memcpy(h + OFF_KEY, key, klen);
    put_le(h + OFF_LEN, len, 8);
    qc_sha256(so, len, h + OFF_SHA);
    char name[128], tmp[160];
    qc_cache_entry_name(key, name, sizeof name);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%016llx", name, (unsigned long long)random64());
        /* O_CREAT|O_EXCL never follows a link and never reuses a file; 0600:
         * nobody else may write it (nor read it: a recipe may be private). */
        fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return -1; /* read-only, full, not ours: time only */
    }
    if (fd < 0)
        return -1;
    /* an interrupt while it is written removes it (runtime/fileio.h) */
    size_t pl = (c->path ? strlen(c->path) : 0) + strlen(tmp) + 2;
    char *full = c->path ? malloc(pl) : NULL;
    if (full) {
        snprintf(full, pl, "%s/%s", c->path, tmp);
        qr_tmp_register(full);
    }
    int r = write_all(fd, h, sizeof h) == 0 && write_all(fd, so, len) == 0 ? 0 : -1;
    if (close(fd) != 0)
        r = -1;
    /* rename is atomic: readers see the old entry or the whole new one. */
    if (r != 0 || renameat(c->dirfd, tmp, c->dirfd, name) != 0) {
        unlinkat(c->dirfd, tmp, 0);
        r = -1;
    }
    if (full)
        qr_tmp_unregister(full);
    free(full);
    return r;
}

/* ------------------------------------------------------------ loading */

struct qc_dl {
    void *h;
    /* The memfd, kept open while the module is loaded: dlopen finds an
     * already loaded object by its name, so "/proc/self/fd/N" must not name
     * another module while this one lives. -1 for the fallback below. */
    int fd;
    char *tmpdir; /* the fallback's private folder, removed on close */
};

static int write_memfd(const unsigned char *so, size_t len)
{
    int fd = memfd_create("qrl-module", MFD_CLOEXEC | MFD_EXEC);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create("qrl-module", MFD_CLOEXEC); /* kernels before 6.3 know no MFD_EXEC */
    if (fd < 0)
        return -1;
    if (write_all(fd, so, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Without memfd or /proc: a file in a fresh mkdtemp folder (0700, a name
 * nobody could have prepared), kept until the module is closed. */
static void *load_private_file(qc_dl *d, const unsigned char *so, size_t len)
{
    const char *t = getenv("TMPDIR");
    char dir[PATH_MAX], path[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/qrl-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir))
        return NULL;
    snprintf(path, sizeof path, "%s/module.so", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    int ok = fd >= 0 && write_all(fd, so, len) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    void *h = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        unlink(path);
        rmdir(dir);
        return NULL;
    }
    d->tmpdir = strdup(dir);
    return h;
}

qc_dl *qc_dl_open(const unsigned char *so, size_t len, char *err, size_t n)
{
    *err = 0;
    qc_dl *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, n, "out of memory");
        return NULL;
    }
    d->fd = write_memfd(so, len);
    if (d->fd >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", d->fd);
        d->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!d->h) {
            const char *e = dlerror();
            snprintf(err, n, "%s", e ? e : "dlopen failed");
            close(d->fd);
            d->fd = -1;
        }
    }
    if (!d->h) {
        d->h = load_private_file(d, so, len);
        if (!d->h) {
            const char *e = dlerror();
            if (e)
                snprintf(err, n, "%s", e);
            else if (!*err)
                snprintf(err, n, "cannot write a private copy of the module: %s", strerror(errno));
            free(d);
            return NULL;
        }
    }
    return d;
}

void *qc_dl_sym(qc_dl *d, const char *name)
{
    return dlsym(d->h, name);
}

void qc_dl_close(void *p)
{
    qc_dl *d = p;
    if (!d)
        return;
    dlclose(d->h);
    if (d->fd >= 0)
        close(d->fd);
    if (d->tmpdir) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/module.so", d->tmpdir);
        unlink(path);
        rmdir(d->tmpdir);
        free(d->tmpdir);
    }
    free(d);
}
