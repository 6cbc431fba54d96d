#include "jitrun.h"

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

static void before(gcc_jit_context *c)
{
    pthread_mutex_lock(&setup_lock);
    if (!set_up)
        set_up_scratch();
    else if (scratch[0] && mkdir(scratch, 0700) == 0) {
        /* removed meanwhile (a cleaner of old temporary files): libgccjit keeps making its folders in it */
    }
    int ext = external_driver;
    pthread_mutex_unlock(&setup_lock);
    if (ext)
        gcc_jit_context_set_bool_use_external_driver(c, 1);
}

static void after(void)
{
    if (!external_driver)
        qr_signals_restore(); /* the embedded driver installed its own handlers */
}

gcc_jit_result *qc_jit_compile(gcc_jit_context *c)
{
    before(c);
    gcc_jit_result *r = gcc_jit_context_compile(c);
    after();
    return r;
}

void qc_jit_compile_to_file(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path)
{
    before(c);
    gcc_jit_context_compile_to_file(c, kind, path);
    after();
}

const char *qc_jit_scratch_dir(int make)
{
    pthread_mutex_lock(&setup_lock);
    if (!set_up && make)
        set_up_scratch();
    const char *d = scratch[0] ? scratch : NULL;
    pthread_mutex_unlock(&setup_lock);
    return d;
}
