#include "jitrun.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static void (*exit_fns[8])(void);
static int n_exit_fns;

/* At exit, after libgccjit's own handlers were registered (by set_up_scratch's compilation), so
 * before they run. */
static void run_exit_fns(void)
{
    pthread_mutex_lock(&setup_lock);
    int n = n_exit_fns;
    void (*fns[8])(void);
    memcpy(fns, exit_fns, sizeof fns);
    pthread_mutex_unlock(&setup_lock);
    while (n > 0)
        fns[--n]();
}

void qc_jit_at_exit(void (*fn)(void))
{
    pthread_mutex_lock(&setup_lock);
    int have = 0;
    for (int i = 0; i < n_exit_fns; i++)
        have |= exit_fns[i] == fn;
    if (!have && n_exit_fns < 8)
        exit_fns[n_exit_fns++] = fn;
    pthread_mutex_unlock(&setup_lock);
}

/* Under setup_lock, once: the private folder, made libgccjit's by a first compilation (an empty
 * object file: about 20 ms) under TMPDIR=folder, which also tells whether the external driver runs. */
static void set_up_scratch_dir(void);
static int ensure_dir(void);

/* Under setup_lock, once: the folder and the first compilation, then the exit functions' handler
 * (qc_jit_at_exit), registered after the handlers libgccjit registers at its first compilation. */
static void set_up_scratch(void)
{
    set_up_scratch_dir();
    atexit(run_exit_fns);
}

/* int qrl_probe(int *a, int n): the sum of a[0..n) */
static void probe_function(gcc_jit_context *c)
{
    gcc_jit_type *i = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT);
    gcc_jit_param *ps[2] = {gcc_jit_context_new_param(c, NULL, gcc_jit_type_get_pointer(i), "a"),
                            gcc_jit_context_new_param(c, NULL, i, "n")};
    gcc_jit_function *f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, i, "qrl_probe", 2, ps, 0);
    gcc_jit_lvalue *sum = gcc_jit_function_new_local(f, NULL, i, "sum"), *k = gcc_jit_function_new_local(f, NULL, i, "k");
    gcc_jit_block *b0 = gcc_jit_function_new_block(f, "entry"), *cond = gcc_jit_function_new_block(f, "cond");
    gcc_jit_block *body = gcc_jit_function_new_block(f, "body"), *done = gcc_jit_function_new_block(f, "done");
    gcc_jit_block_add_assignment(b0, NULL, sum, gcc_jit_context_zero(c, i));
    gcc_jit_block_add_assignment(b0, NULL, k, gcc_jit_context_zero(c, i));
    gcc_jit_block_end_with_jump(b0, NULL, cond);
    gcc_jit_block_end_with_conditional(cond, NULL,
                                       gcc_jit_context_new_comparison(c, NULL, GCC_JIT_COMPARISON_LT,
                                                                      gcc_jit_lvalue_as_rvalue(k),
                                                                      gcc_jit_param_as_rvalue(ps[1])),
                                       body, done);
    gcc_jit_lvalue *ak = gcc_jit_context_new_array_access(c, NULL, gcc_jit_param_as_rvalue(ps[0]),
                                                          gcc_jit_lvalue_as_rvalue(k));
    gcc_jit_block_add_assignment_op(body, NULL, sum, GCC_JIT_BINARY_OP_PLUS, gcc_jit_lvalue_as_rvalue(ak));
    gcc_jit_block_add_assignment_op(body, NULL, k, GCC_JIT_BINARY_OP_PLUS, gcc_jit_context_one(c, i));
    gcc_jit_block_end_with_jump(body, NULL, cond);
    gcc_jit_block_end_with_return(done, NULL, gcc_jit_lvalue_as_rvalue(sum));
}

static int have_folder;

/* Under setup_lock, once: the private folder alone (TMPDIR/qrl-jit-XXXXXX), its removal at exit and
 * on a fatal signal. A process that only compiles in child processes (qc_jit_compile_to_file_apart)
 * needs no more: the probe's compilation would bring libgccjit's pages into it. */
static void make_folder(void)
{
    if (have_folder)
        return;
    have_folder = 1;
    const char *t = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/qrl-jit-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir))
        return; /* libgccjit's scratch goes where TMPDIR says, as without this module */
    snprintf(scratch, sizeof scratch, "%s", dir);
    qr_scratch_dir_set(scratch);
    atexit(remove_scratch);
}

static void set_up_scratch_dir(void)
{
    set_up = 1;
    make_folder();
    if (!scratch[0] || ensure_dir() != 0)
        return;
    const char *t = getenv("TMPDIR");
    char *old = t ? strdup(t) : NULL;
    if (t && !old)
        return;
    const char *dir = scratch;
    /* no other thread compiles meanwhile (setup_lock); setenv is not safe against a getenv in
     * another thread: this happens once, at the process's first compilation */
    setenv("TMPDIR", dir, 1);
    gcc_jit_context *p = gcc_jit_context_acquire();
    if (p) {
        gcc_jit_context_set_bool_print_errors_to_stderr(p, 0);
        gcc_jit_context_set_bool_use_external_driver(p, 1);
        /* a function with a loop, optimized as the recipes and kernels are: libgccjit registers its
         * exit handlers as its optimizers first run (an empty unit, or -O0, registers none), and
         * they must be registered now, before run_exit_fns (set_up_scratch) */
        gcc_jit_context_set_int_option(p, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL, 3);
        probe_function(p);
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
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* signalled when active drops to 0 */

/* GCC sizes its garbage collector by the machine's RAM: with 1 GB or more its heap grows to 128 MB
 * before a first collection, then by 100% between collections, so compiling a recipe's kernels
 * at -O3 held about 230 MB of libgccjit's heap (PP-OCR cls's first quantize peaked at 263 MB, its
 * second at 47). A small machine's settings (collect past 4 MB, then on 30% growth) held 95 MB at
 * about 6% more CPU, the same code byte for byte (docs/quantizer.md, "The cold first quantize's
 * peak (stop 46)"). They decide nothing in the code: the cache key leaves them out. */
static void small_gc_heap(gcc_jit_context *c)
{
    gcc_jit_context_add_command_line_option(c, "--param=ggc-min-expand=30");
    gcc_jit_context_add_command_line_option(c, "--param=ggc-min-heapsize=4096");
}

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
    if (ok)
        small_gc_heap(c);
    return ok ? 0 : -1;
}

static void after(void)
{
    if (!external_driver)
        qr_signals_restore(); /* the embedded driver installed its own handlers */
    pthread_mutex_lock(&setup_lock);
    /* a compilation that ran an optimizer the probe's did not may have registered another handler
     * of libgccjit's: registered again, the exit functions run before it at a later exit */
    if (n_exit_fns)
        atexit(run_exit_fns);
    if (--active == 0) {
        pthread_cond_broadcast(&idle);
        if (scratch[0])
            rmdir(scratch); /* empty unless a compile_to_bytes folder is being used: then it stays */
    }
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

void qc_jit_setup(void)
{
    pthread_mutex_lock(&setup_lock);
    if (!set_up)
        set_up_scratch();
    pthread_mutex_unlock(&setup_lock);
}

const char *qc_jit_scratch_dir(int make)
{
    pthread_mutex_lock(&setup_lock);
    if (make)
        make_folder(); /* the probe's compilation waits for this process's own first (before) */
    const char *d = scratch[0] && (!make || ensure_dir() == 0) ? scratch : NULL;
    pthread_mutex_unlock(&setup_lock);
    return d;
}

/* The child's side of qc_jit_compile_to_file_apart: only the forking thread exists here, so
 * nothing but the compilation and write(2); _exit leaves the parent's exit handlers (libgccjit's,
 * the scratch folder's) alone. */
#define CHILD_NO_DRIVER 3 /* compile_child's exit status: the unprobed external driver did not run */
static int child_probes; /* the external driver failed unprobed: every child probes first */

static void compile_child(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path, int fd, int probed)
{
    gcc_jit_context_compile_to_file(c, kind, path);
    const char *e = gcc_jit_context_get_first_error(c);
    if (e && !probed && strstr(e, "gcc driver"))
        _exit(CHILD_NO_DRIVER);
    if (e) {
        size_t n = strlen(e);
        while (n > 0) {
            ssize_t w = write(fd, e, n);
            if (w <= 0)
                break;
            e += w, n -= (size_t)w;
        }
    }
    _exit(e ? 1 : 0);
}

static int compile_apart(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path, char *err, size_t n);

int qc_jit_compile_to_file_apart(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path, char *err,
                                 size_t n)
{
    int r = compile_apart(c, kind, path, err, n);
    if (r == CHILD_NO_DRIVER) { /* once: the next children probe, as this process would */
        pthread_mutex_lock(&setup_lock);
        child_probes = 1;
        pthread_mutex_unlock(&setup_lock);
        r = compile_apart(c, kind, path, err, n);
    }
    if (r == CHILD_NO_DRIVER) { /* not from a probing child: never reached */
        snprintf(err, n, "the gcc driver did not run");
        r = -1;
    }
    return r;
}

static int compile_apart(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path, char *err, size_t n)
{
    err[0] = 0;
    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    pthread_mutex_lock(&setup_lock);
    make_folder();
    /* libgccjit holds a lock of its own through a compilation: forked while another thread's is
     * under way, the child would wait on it for ever. Until the fork returns, setup_lock keeps
     * any other from starting (before). */
    while (active)
        pthread_cond_wait(&idle, &setup_lock);
    if (ensure_dir() != 0) {
        pthread_mutex_unlock(&setup_lock);
        close(fd[0]);
        close(fd[1]);
        snprintf(err, n, "no private folder to compile in");
        return -1;
    }
    small_gc_heap(c);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        /* a parent ended by a signal (its handlers remove the scratch folder) takes the child along */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        /* When this process has compiled nothing itself, the child's compilation is its first. The
         * probe (libgccjit's scratch in the folder, whether the external driver runs) took about
         * 30 ms of each child: without it, the scratch goes into the folder by TMPDIR (libgccjit
         * reads it at its first compilation and keeps it; the child has one thread and ends by
         * _exit, so no exit handlers to register), and the external driver is tried; when that
         * does not run, the parent forks again, and from then on every child probes. */
        int probed = set_up || child_probes;
        if (!set_up && child_probes)
            set_up_scratch_dir();
        else if (!set_up && scratch[0])
            setenv("TMPDIR", scratch, 1);
        if (external_driver || !probed)
            gcc_jit_context_set_bool_use_external_driver(c, 1);
        compile_child(c, kind, path, fd[1], probed);
    }
    if (pid > 0)
        qr_scratch_child(pid);
    pthread_mutex_unlock(&setup_lock);
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        return 1;
    }
    size_t len = 0;
    for (;;) {
        char buf[256];
        ssize_t r = read(fd[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r && len + 1 < n; i++)
            err[len++] = buf[i];
    }
    err[len] = 0;
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            qr_scratch_child(0);
            if (!err[0])
                snprintf(err, n, "waiting for the compiler process: %s", strerror(errno));
            return -1;
        }
    qr_scratch_child(0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !err[0])
        return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == CHILD_NO_DRIVER && !err[0])
        return CHILD_NO_DRIVER;
    if (err[0])
        return -1;
    if (WIFSIGNALED(st))
        snprintf(err, n, "the compiler process was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(err, n, "the compiler process exited with status %d", WEXITSTATUS(st));
    return -1;
}
