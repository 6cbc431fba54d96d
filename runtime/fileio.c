#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

qr_status qr_read_file(const char *path, size_t max, unsigned char **data, size_t *len, qr_error *e)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below, before any read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return qr_errorf(e, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return qr_errorf(e, "not a regular file");
    }
    FILE *f = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        close(fd);
        return qr_errorf(e, "cannot open: %s", strerror(errno));
    }
    if ((size_t)st.st_size > max) {
        fclose(f);
        return qr_errorf(e, "file is too large (%lld bytes, limit %zu)", (long long)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return qr_errorf(e, "out of memory reading %zu bytes", n);
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        free(buf);
        return qr_errorf(e, "read error");
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return QR_OK;
}

/* Temporary files being written, for the signal handler. A slot is claimed
 * before the file exists and cleared before its name is freed; the handler
 * only reads slots and calls unlink (async-signal-safe). */
#define TMP_SLOTS 64
static char *volatile tmp_slots[TMP_SLOTS];

void qr_tmp_register(char *tmp)
{
    for (int i = 0; i < TMP_SLOTS; i++)
        if (!tmp_slots[i] && __sync_bool_compare_and_swap(&tmp_slots[i], NULL, tmp))
            return;
    /* All slots taken: that file is only removed by commit or abort. */
}

void qr_tmp_unregister(const char *tmp)
{
    for (int i = 0; tmp && i < TMP_SLOTS; i++)
        if (tmp_slots[i] == tmp)
            __sync_bool_compare_and_swap(&tmp_slots[i], (char *)tmp, NULL);
}

/* Threads writing scratch the handler cannot name (a background libgccjit compilation: its own
 * temporary folder, and ours) count themselves in scratch_busy; a dying process waits for them. */
static atomic_int scratch_busy, dying;

int qr_scratch_enter(void)
{
    atomic_fetch_add(&scratch_busy, 1);
    if (atomic_load(&dying)) { /* seq_cst: either the handler sees us busy or we see it dying */
        atomic_fetch_sub(&scratch_busy, 1);
        return -1;
    }
    return 0;
}

void qr_scratch_leave(void)
{
    atomic_fetch_sub(&scratch_busy, 1);
}

/* The folder of libgccjit's scratch (compiler/jitrun.h), removed with what it holds. */
static char scratch_dir[4096];
static volatile sig_atomic_t scratch_dir_on;
static pid_t scratch_pid; /* the process that made it: a forked child that exits leaves it */

void qr_scratch_dir_set(const char *dir)
{
    scratch_dir_on = 0;
    snprintf(scratch_dir, sizeof scratch_dir, "%s", dir ? dir : "");
    scratch_pid = getpid();
    scratch_dir_on = dir && *dir;
}

/* What dirfd holds, depth levels down (libgccjit's folder holds files only), and name in it; only
 * async-signal-safe calls (getdents64 by syscall: opendir allocates). */
static void remove_tree_at(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth == 0)
        return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        /* entries removed while reading: read the folder again until it is empty (3 passes) */
        for (int pass = 0, any = 1; pass < 3 && any; pass++) {
            any = 0;
            lseek(fd, 0, SEEK_SET);
            long n;
            while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
                for (long off = 0; off < n;) {
                    struct {
                        unsigned long long ino;
                        long long off;
                        unsigned short reclen;
                        unsigned char type;
                        char name[];
                    } *d = (void *)(buf + off);
                    off += d->reclen;
                    if (strcmp(d->name, ".") && strcmp(d->name, "..")) {
                        any = 1;
                        remove_tree_at(fd, d->name, depth - 1);
                    }
                }
        }
        close(fd);
    }
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

void qr_scratch_dir_remove(void)
{
    if (scratch_dir_on && getpid() == scratch_pid)
        remove_tree_at(AT_FDCWD, scratch_dir, 3);
}

static atomic_int scratch_child; /* a child compiling into the folder (qr_scratch_child), 0: none */

void qr_scratch_child(int pid)
{
    atomic_store(&scratch_child, pid);
}

static void on_fatal_signal(int sig)
{
    atomic_store(&dying, 1);
    /* the child would go on writing into the folder removed below: ended first (kill and waitpid
     * are async-signal-safe) */
    int child = atomic_load(&scratch_child);
    if (child > 0 && getpid() == scratch_pid) {
        kill((pid_t)child, SIGKILL);
        waitpid((pid_t)child, NULL, 0);
    }
    /* at most about 30 s: a compilation takes well under one (nanosleep is async-signal-safe) */
    for (int i = 0; i < 3000 && atomic_load(&scratch_busy) > 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    for (int i = 0; i < TMP_SLOTS; i++) {
        char *t = tmp_slots[i];
        if (t)
            unlink(t);
    }
    qr_scratch_dir_remove();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int handlers_on;

/* on_fatal_signal for the fatal signals, but where the process ignores one (nohup), and where
 * it is ours already when only_if_not_ours (restoring after libgccjit's driver replaced them) */
static void install_handlers(int only_if_not_ours)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
            !(only_if_not_ours && old.sa_handler == on_fatal_signal))
            sigaction(sigs[i], &sa, NULL);
    }
}

void qr_signals_restore(void)
{
    if (handlers_on)
        install_handlers(1);
}

void qr_atomic_cleanup_on_signals(void)
{
    handlers_on = 1;
    install_handlers(0);
}

/* The process's umask, read once (umask() both reads and sets it: not while other threads create files). */
static mode_t qr_umask(void)
{
    static mode_t mask;
    static int known;
    if (!known) {
        mask = umask(022);
        umask(mask);
        known = 1;
    }
    return mask;
}

qr_status qr_output_check(const char *path, qr_error *e)
{
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (S_ISLNK(sb.st_mode))
            return qr_errorf(e, "%s: is a symbolic link; give the path of the file it names (it would be replaced "
                             "by a regular file)", path);
        if (!S_ISREG(sb.st_mode))
            return qr_errorf(e, "%s: is not a regular file (%s); give a file path", path,
                             S_ISDIR(sb.st_mode) ? "a directory" : S_ISCHR(sb.st_mode) ? "a character device"
                             : S_ISBLK(sb.st_mode) ? "a block device" : S_ISFIFO(sb.st_mode) ? "a FIFO" : "a socket");
    } else if (errno != ENOENT)
        return qr_errorf(e, "%s: %s", path, strerror(errno));
    char *dir = qr_path_dir(path);
    if (!dir)
        return qr_errorf(e, "%s: out of memory", path);
    int ok = access(dir, W_OK | X_OK) == 0;
    qr_status st = ok ? QR_OK : qr_errorf(e, "%s: cannot write in directory '%s': %s", path, dir, strerror(errno));
    free(dir);
    return st;
}

/* A group of outputs committed together (qr_atomic_group_begin): per thread, the finished
 * temporary files and the paths they become, renamed only by qr_atomic_group_commit. */
typedef struct pending {
    char *tmp, *path;
} pending;
static _Thread_local struct {
    int open;
    pending *v;
    int n;
} group;

void qr_atomic_group_begin(void)
{
    qr_atomic_group_abort();
    group.open = 1;
}

int qr_atomic_group_open(void)
{
    return group.open;
}

void qr_atomic_group_abort(void)
{
    for (int i = 0; i < group.n; i++) {
        if (group.v[i].tmp) {
            unlink(group.v[i].tmp);
            qr_tmp_unregister(group.v[i].tmp);
            free(group.v[i].tmp);
        }
        free(group.v[i].path);
    }
    free(group.v);
    memset(&group, 0, sizeof group);
}

qr_status qr_atomic_group_commit(qr_error *e)
{
    qr_status st = QR_OK;
    for (int i = 0; i < group.n && st == QR_OK; i++)
        if (rename(group.v[i].tmp, group.v[i].path) != 0)
            st = qr_errorf(e, "%s: cannot rename into place: %s", group.v[i].path, strerror(errno));
        else { /* in place: no longer a temporary file */
            qr_tmp_unregister(group.v[i].tmp);
            free(group.v[i].tmp);
            group.v[i].tmp = NULL;
        }
    qr_atomic_group_abort(); /* what is left (after a failed rename) is removed */
    return st;
}

qr_status qr_atomic_open(qr_atomic_file *a, const char *path, qr_error *e)
{
    memset(a, 0, sizeof *a);
    /* never replace a device, a FIFO or a symbolic link by a regular file (-o /dev/null as root) */
    if (qr_output_check(path, e) != QR_OK)
        return QR_ERR;
    struct stat old;
    mode_t mode = 0666 & ~qr_umask();
    if (stat(path, &old) == 0)
        mode = old.st_mode & 0777; /* a file replaced keeps its permissions */
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + 16);
    if (!a->path || !a->tmp) {
        qr_atomic_abort(a);
        return qr_errorf(e, "%s: out of memory", path);
    }
    snprintf(a->tmp, n + 16, "%s.tmp.XXXXXX", path);
    qr_tmp_register(a->tmp);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        qr_tmp_unregister(a->tmp);
        qr_status st = qr_errorf(e, "%s: cannot create: %s", path, strerror(errno));
        free(a->tmp);
        a->tmp = NULL;
        qr_atomic_abort(a);
        return st;
    }
    fchmod(fd, mode);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        qr_atomic_abort(a);
        return qr_errorf(e, "%s: cannot open: %s", path, strerror(errno));
    }
    return QR_OK;
}

qr_status qr_atomic_commit(qr_atomic_file *a, qr_error *e)
{
    qr_status st = QR_OK;
    if (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0)
        st = qr_errorf(e, "%s: write error: %s", a->path, strerror(errno));
    if (fclose(a->f) != 0 && st == QR_OK)
        st = qr_errorf(e, "%s: write error: %s", a->path, strerror(errno));
    a->f = NULL;
    if (st == QR_OK && group.open) { /* renamed with the group's other outputs */
        pending *v = realloc(group.v, sizeof *v * (size_t)(group.n + 1));
        if (!v)
            st = qr_errorf(e, "%s: out of memory", a->path);
        else {
            group.v = v;
            group.v[group.n++] = (pending){a->tmp, a->path};
            a->tmp = a->path = NULL; /* the group owns them, and the signal handler still knows tmp */
            return QR_OK;
        }
    }
    if (st == QR_OK && rename(a->tmp, a->path) != 0)
        st = qr_errorf(e, "%s: cannot rename into place: %s", a->path, strerror(errno));
    if (st != QR_OK) {
        qr_atomic_abort(a);
        return st;
    }
    qr_tmp_unregister(a->tmp);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
    return QR_OK;
}

void qr_atomic_abort(qr_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    if (a->tmp)
        unlink(a->tmp);
    qr_tmp_unregister(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

char *qr_path_dir(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

qr_status qr_make_dirs(const char *dir, qr_error *e)
{
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p)
        return qr_errorf(e, "out of memory");
    memcpy(p, dir, n + 1);
    qr_status st = QR_OK;
    /* Each prefix ending before a '/', then the whole path. */
    for (size_t i = 1; i <= n && st == QR_OK; i++) {
        if (p[i] != '/' && p[i] != 0)
            continue;
        char c = p[i];
        p[i] = 0;
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = qr_errorf(e, "%s: cannot create directory: %s", p, strerror(errno));
        else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            st = qr_errorf(e, "%s: not a directory", p);
        p[i] = c;
    }
    free(p);
    return st;
}
