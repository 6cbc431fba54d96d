#include "jitrun.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static int set_up, external_driver;
static char scratch[PATH_MAX];

static void remove_scratch(void)
{
    if (scratch[0])
        qr_scratch_dir_remove();
}

/* Under setup_lock, once: the private folder, made libgccjit's by a first compilation (an empty
 * object file: about 20 ms) under TMPDIR=folder, which also tells whether the external driver runs. */
static void set_up_scratch(void)
{
    set_up = 1;
    const char *t = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/qrl-jit-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir))
        return; /* libgccjit's scratch goes where TMPDIR says, as without this module */
    char *old = t ? strdup(t) : NULL;
    if (t && !old) {
        rmdir(dir);
        return;
    }
    snprintf(scratch, sizeof scratch, "%s", dir);
    qr_scratch_dir_set(scratch);
    atexit(remove_scratch);
    /* no other thread compiles meanwhile (setup_lock); setenv is not safe against a getenv in
     * another thread: this happens once, at the process's first compilation */
    setenv("TMPDIR", dir, 1);
    gcc_jit_context *p = gcc_jit_context_acquire();
    if (p) {
        gcc_jit_context_set_bool_print_errors_to_stderr(p, 0);
        gcc_jit_context_set_bool_use_external_driver(p, 1);
        char obj[PATH_MAX + 16];
        snprintf(obj, sizeof obj, "%s/probe.o", dir);
        gcc_jit_context_compile_to_file(p, GCC_JIT_OUTPUT_KIND_OBJECT_FILE, obj);
        external_driver = gcc_jit_context_get_first_error(p) == NULL;
        unlink(obj);
        gcc_jit_context_release(p);
    }
    if (old)
        setenv("TMPDIR", old, 1);
    else
        unsetenv("TMPDIR");
    free(old);
}

/* Under setup_lock: 0 when the folder is there and ours. Between compilations it is removed (a
 * process that ends by _exit, or is killed, leaves nothing), and made again by the next: a folder of
 * that name made meanwhile by someone else, or a link, is not used (libgccjit would write the code
 * this process loads into it). */
static int ensure_dir(void)
{
    if (!scratch[0])
        return 0; /* none: libgccjit's choice, TMPDIR */
    if (mkdir(scratch, 0700) == 0)
        return 0;
    struct stat sb;
    return errno == EEXIST && lstat(scratch, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() &&
                   !(sb.st_mode & 077)
               ? 0
               : -1;
}

static int active; /* compilations under way, under setup_lock */

static int before(gcc_jit_context *c)
{
    pthread_mutex_lock(&setup_lock);
    if (!set_up)
        set_up_scratch();
    int ok = ensure_dir() == 0, ext = external_driver;
    active += ok;
    pthread_mutex_unlock(&setup_lock);
    if (ext)
        gcc_jit_context_set_bool_use_external_driver(c, 1);
    return ok ? 0 : -1;
}

static void after(void)
{
    if (!external_driver)
        qr_signals_restore(); /* the embedded driver installed its own handlers */
    pthread_mutex_lock(&setup_lock);
    if (--active == 0 && scratch[0])
        rmdir(scratch); /* empty unless a compile_to_bytes folder is being used: then it stays */
    pthread_mutex_unlock(&setup_lock);
}

gcc_jit_result *qc_jit_compile(gcc_jit_context *c)
{
    if (before(c) != 0)
        return NULL;
    gcc_jit_result *r = gcc_jit_context_compile(c);
    after();
    return r;
}

void qc_jit_compile_to_file(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path)
{
    if (before(c) != 0)
        return;
    gcc_jit_context_compile_to_file(c, kind, path);
    after();
}

void qc_jit_scratch_idle(void)
{
    pthread_mutex_lock(&setup_lock);
    if (active == 0 && scratch[0])
        rmdir(scratch);
    pthread_mutex_unlock(&setup_lock);
}

const char *qc_jit_scratch_dir(int make)
{
    pthread_mutex_lock(&setup_lock);
    if (!set_up && make)
        set_up_scratch();
    const char *d = scratch[0] && (!make || ensure_dir() == 0) ? scratch : NULL;
    pthread_mutex_unlock(&setup_lock);
    return d;
}
