/* The shape-specialized NHWC convolution kernels libgccjit compiles (compiler/iconv_jit.c) against a
 * naive reference written here from the qr_iconv_fn contract (runtime/ops/igemm.h): int64 sums of
 * the plain triple loop, wrapped to int32 at the end. Every activation row is its own allocation of
 * exactly k4 bytes and the weights and starting values exactly their size, so an over-read is
 * ASan's to see where the bytes are read in C (the generated code itself is not instrumented).
 * Without AVX-512 VNNI the generator must decline (NULL) and the comparisons are skipped. The
 * kernels are cached on disk as recipe modules are: each test here (its own process) points
 * XDG_CACHE_HOME at a fresh folder, so what runs was compiled by this build. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../compiler/iconv_jit.h"
#include "../../compiler/jitrun.h"
#include "ops/igemm.h"
#include "qrl.h"
#include "testutil.h"

static int has_vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

static void naive(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m, const int8_t *w,
                  const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n)
{
    /* the panels as igemm.h lays them out: strips of 64 columns (the last one narrower), each
     * strip's rows of all k groups after one another */
    int64_t n16 = (n + 15) / 16 * 16, kk = taps * k4;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = j0; j < j1; j++) {
            int64_t s = init[j], s0 = j / 64 * 64, width = n16 - s0 < 64 ? n16 - s0 : 64;
            for (int64_t t = 0; t < taps; t++)
                for (int64_t k = 0; k < k4; k++) {
                    int64_t q = t * k4 + k;
                    s += (int64_t)a[i * taps + t][k] * w[s0 * kk + (q / 4) * width * 4 + (j - s0) * 4 + q % 4];
                }
            c[i * c_rs + j] = (int32_t)(uint32_t)(uint64_t)s;
        }
}

static char *cache_dir;

static void fresh_cache(void)
{
    cache_dir = tu_tmpdir();
    cr_assert_not_null(cache_dir);
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    tu_option("amx", "0"); /* the specialized kernels are the VNNI path's: AMX, where there is, hands none out */
}

static void drop_cache(void)
{
    qc_iconv_jit_release();
    tu_rmdir(cache_dir);
}

TestSuite(iconv_jit, .init = fresh_cache, .fini = drop_cache);

static uint64_t rng = 88172645463325252ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

enum { FILL_RANDOM, FILL_EXTREME };

/* A problem: m * taps row pointers into a pool of distinct rows (some repeated, as padding rows
 * are), weights with garbage in the padding columns past n, starting values near the int32 ends. */
typedef struct problem {
    int64_t taps, k4, n, m, c_rs, n16;
    uint8_t **pool;
    int64_t npool;
    const uint8_t **a;
    int8_t *w;
    int32_t *init, *got, *want;
} problem;

static void make(problem *p, int64_t taps, int64_t k4, int64_t n, int64_t m, int fill)
{
    *p = (problem){.taps = taps, .k4 = k4, .n = n, .m = m, .c_rs = n + 3, .n16 = (n + 15) / 16 * 16};
    p->npool = m * taps / 2 + 1;
    p->pool = malloc((size_t)p->npool * sizeof *p->pool);
    for (int64_t r = 0; r < p->npool; r++) {
        p->pool[r] = malloc((size_t)k4);
        for (int64_t k = 0; k < k4; k++)
            p->pool[r][k] = fill == FILL_EXTREME ? 255 : (uint8_t)next();
    }
    p->a = malloc((size_t)(m * taps + 1) * sizeof *p->a);
    for (int64_t i = 0; i < m * taps; i++)
        p->a[i] = p->pool[next() % (uint32_t)p->npool];
    size_t wn = (size_t)(taps * k4 / 4 * p->n16 * 4);
    p->w = malloc(wn);
    for (size_t i = 0; i < wn; i++)
        p->w[i] = fill == FILL_EXTREME ? -128 : (int8_t)next();
    p->init = malloc((size_t)n * sizeof *p->init);
    for (int64_t j = 0; j < n; j++)
        p->init[j] = fill == FILL_EXTREME ? INT32_MIN + (int32_t)(next() % 1000) : (j % 3 == 0 ? INT32_MAX - (int32_t)(next() % 100000) : (int32_t)next());
    size_t cn = (size_t)(m * p->c_rs + 1);
    p->got = malloc(cn * sizeof *p->got);
    p->want = malloc(cn * sizeof *p->want);
}

static void drop(problem *p)
{
    for (int64_t r = 0; r < p->npool; r++)
        free(p->pool[r]);
    free(p->pool);
    free((void *)p->a);
    free(p->w);
    free(p->init);
    free(p->got);
    free(p->want);
}

/* Runs fn and the reference on columns [j0, j1); both outputs start as the same sentinel, so a
 * write outside the range is a difference too. */
static void check(problem *p, qr_iconv_fn fn, int64_t j0, int64_t j1)
{
    size_t cn = (size_t)(p->m * p->c_rs + 1);
    for (size_t i = 0; i < cn; i++)
        p->got[i] = p->want[i] = 0x5a5a5a5a;
    naive(p->want, p->c_rs, p->a, p->taps, p->m, p->w, p->init, p->k4, j0, j1, p->n);
    fn(p->got, p->c_rs, p->a, p->taps, p->m, p->w, p->init, p->k4, j0, j1, p->n);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->c_rs; j++)
            cr_assert_eq(p->got[i * p->c_rs + j], p->want[i * p->c_rs + j],
                         "taps %lld k4 %lld n %lld m %lld columns [%lld, %lld): c[%lld][%lld] = %d, want %d",
                         (long long)p->taps, (long long)p->k4, (long long)p->n, (long long)p->m, (long long)j0,
                         (long long)j1, (long long)i, (long long)j, p->got[i * p->c_rs + j], p->want[i * p->c_rs + j]);
    cr_assert_eq(p->got[cn - 1], 0x5a5a5a5a, "written past the last row");
}

static void column_ranges(problem *p, qr_iconv_fn fn)
{
    int64_t n = p->n;
    check(p, fn, 0, n);
    check(p, fn, 0, 0 < n - 1 ? n - 1 : n);
    check(p, fn, 0, 1);
    if (n > 64) {
        check(p, fn, 64, n);
        check(p, fn, 64, 65);
    }
    if (n > 48)
        check(p, fn, 0, n - 5);
    check(p, fn, 64 * ((n - 1) / 64), n); /* the last strip alone */
    check(p, fn, 0, 0);                  /* nothing */
}

Test(iconv_jit, matches_the_naive_reference)
{
    if (!has_vnni()) {
        cr_assert_null(qc_iconv_jit(1, 4, 16), "no AVX-512 VNNI: the generator must decline");
        cr_log_info("this CPU has no AVX-512 VNNI: the generated kernels are not run here");
        return;
    }
    static const int64_t tapss[] = {1, 9}, k4s[] = {4, 36, 64, 68, 576}, ns[] = {16, 17, 64, 200},
                         ms[] = {0, 1, 5, 37};
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t ki = 0; ki < sizeof k4s / sizeof *k4s; ki++)
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                int64_t taps = tapss[ti], k4 = k4s[ki], n = ns[ni];
                qr_iconv_fn fn = qc_iconv_jit(taps, k4, n);
                cr_assert_not_null(fn, "taps %lld k4 %lld n %lld did not compile", (long long)taps, (long long)k4,
                                   (long long)n);
                for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
                    problem p;
                    make(&p, taps, k4, n, ms[mi], FILL_RANDOM);
                    column_ranges(&p, fn);
                    drop(&p);
                }
            }
}

/* Widths whose last vector holds 1 to 8 columns, computed as a half (ymm) vector: alone (n 8), after
 * 1 to 3 whole vectors of a strip of 64 (24, 40, 56), in the last strip after whole ones (72, 136,
 * 152: MobileNetV2's 24 and the like), at the thin K of its projections and expansions (k4 16, 24,
 * 144) and a 3 x 3 one, ragged row counts, every column range column_ranges tries (a part ending at
 * 64 runs no half vector; columns [0, n - 1) and [0, 1) leave fewer in it). */
Test(iconv_jit, half_vectors_match_the_naive_reference)
{
    if (!has_vnni()) {
        cr_log_info("this CPU has no AVX-512 VNNI: nothing to run");
        return;
    }
    static const int64_t ns[] = {8, 24, 40, 56, 72, 136, 152}, k4s[] = {16, 24, 144}, ms[] = {1, 7, 37};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t ki = 0; ki < sizeof k4s / sizeof *k4s; ki++)
            for (int64_t taps = 1; taps <= 9; taps += 8) {
                if (taps == 9 && k4s[ki] == 144)
                    continue;
                qr_iconv_fn fn = qc_iconv_jit(taps, k4s[ki], ns[ni]);
                cr_assert_not_null(fn);
                for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
                    problem p;
                    make(&p, taps, k4s[ki], ns[ni], ms[mi], FILL_RANDOM);
                    column_ranges(&p, fn);
                    drop(&p);
                }
            }
}

/* Row tiles of R rows and of R - 1 (6 and 5 where a strip is 4 vectors, else 8 and 7): every row
 * count from 1 to 58 (a 7 x 7 image's 49: 4 tiles of 6 and 5 of 5), the 14 x 14 layers' blocks of
 * 94 and 102 rows, on strips of every width, a last half vector, 1 x 1 and 3 x 3. */
Test(iconv_jit, row_tiles_of_two_heights_match_the_naive_reference)
{
    if (!has_vnni()) {
        cr_log_info("this CPU has no AVX-512 VNNI: nothing to run");
        return;
    }
    static const int64_t ns[] = {16, 40, 48, 72, 200}, k4s[] = {8, 96};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t ki = 0; ki < sizeof k4s / sizeof *k4s; ki++)
            for (int64_t taps = 1; taps <= 9; taps += 8) {
                if (taps == 9 && k4s[ki] == 96)
                    continue;
                qr_iconv_fn fn = qc_iconv_jit(taps, k4s[ki], ns[ni]);
                cr_assert_not_null(fn);
                for (int64_t m = 1; m <= 104; m += m < 58 ? 1 : 44) {
                    problem p;
                    make(&p, taps, k4s[ki], ns[ni], m, FILL_RANDOM);
                    check(&p, fn, 0, p.n);
                    drop(&p);
                }
            }
}

/* u8 255 times s8 -128 in every product, from starting values just above INT32_MIN: each sum goes
 * below -2^31 and must wrap as the exact sum does. */
Test(iconv_jit, wraps_at_the_extremes)
{
    if (!has_vnni()) {
        cr_log_info("this CPU has no AVX-512 VNNI: nothing to run");
        return;
    }
    static const struct {
        int64_t taps, k4, n, m;
    } shapes[] = {{9, 576, 64, 37}, {1, 64, 200, 5}, {9, 4, 17, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        problem p;
        make(&p, shapes[s].taps, shapes[s].k4, shapes[s].n, shapes[s].m, FILL_EXTREME);
        qr_iconv_fn fn = qc_iconv_jit(p.taps, p.k4, p.n);
        cr_assert_not_null(fn);
        check(&p, fn, 0, p.n);
        /* the wrap did happen: the reference's value differs from the unwrapped sum */
        int64_t exact = (int64_t)p.init[0] - (int64_t)255 * 128 * p.taps * p.k4;
        cr_assert_eq(p.got[0], (int32_t)(uint32_t)(uint64_t)exact);
        cr_assert_gt(p.got[0], 0, "INT32_MIN + small minus products wraps to a positive value");
        drop(&p);
    }
}

Test(iconv_jit, declines_bad_shapes)
{
    cr_assert_null(qc_iconv_jit(1, 6, 16), "k4 not a multiple of 4");
    cr_assert_null(qc_iconv_jit(1, 0, 16), "k4 of 0");
    cr_assert_null(qc_iconv_jit(0, 4, 16), "no taps");
    cr_assert_null(qc_iconv_jit(1, 4, 0), "no columns");
}

static qr_iconv_fn raced[4];
static void *race(void *arg)
{
    raced[(intptr_t)arg] = qr_iconv_specialized(3, 20, 40);
    return NULL;
}

/* The runtime's hook: nothing until a specializer is registered, then the table's kernel, the same
 * one to every thread even when the first requests race; release empties the table. */
Test(iconv_jit, the_runtime_hook_and_the_table)
{
    cr_assert_null(qr_iconv_specialized(3, 20, 40), "no specializer registered");
    qr_iconv_set_specializer(qc_iconv_jit);
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, race, (void *)i), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < 4; i++)
        cr_assert_eq(raced[i], raced[0], "one kernel per shape");
    if (!has_vnni()) {
        cr_assert_null(raced[0]);
        qr_iconv_set_specializer(NULL);
        return;
    }
    cr_assert_not_null(raced[0]);
    cr_assert_eq(qr_iconv_specialized(3, 20, 40), raced[0]);
    problem p;
    make(&p, 3, 20, 40, 7, FILL_RANDOM);
    column_ranges(&p, raced[0]);
    qc_iconv_jit_release();
    qr_iconv_fn again = qr_iconv_specialized(3, 20, 40);
    cr_assert_not_null(again, "compiled again after a release");
    column_ranges(&p, again);
    drop(&p);
    qr_iconv_set_specializer(NULL);
    cr_assert_null(qr_iconv_specialized(3, 20, 40));
}

/* The API registers the specializer at a recipe compilation (a failing one too) when the iconv-jit
 * option is on (qrl --iconv-jit), and not otherwise. Each test is its own process: so are its options. */
static void first_compile(void)
{
    char path[1200], err[512];
    qrl_recipe *r = NULL;
    snprintf(path, sizeof path, "%s/tests/diag/check_affine_without_output.qrl", tu_root());
    FILE *diag = fopen("/dev/null", "w");
    cr_assert_neq(qrl_recipe_compile(path, QRL_RECIPE_NO_CACHE, diag, &r, err, sizeof err), 0);
    fclose(diag);
}

Test(iconv_jit, the_api_registers_it_when_asked)
{
    tu_option("iconv-jit", "1");
    cr_assert_null(qr_iconv_specialized(1, 8, 32), "nothing before the API starts");
    first_compile();
    qr_iconv_fn fn = qr_iconv_specialized(1, 8, 32);
    if (!has_vnni()) {
        cr_assert_null(fn);
        return;
    }
    cr_assert_not_null(fn);
    problem p;
    make(&p, 1, 8, 32, 5, FILL_RANDOM);
    column_ranges(&p, fn);
    drop(&p);
}

static int count_entries(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/qrl", cache_dir);
    return tu_count_files(path);
}

/* By default (iconv-jit=auto) a shape the cache lacks gets no kernel at once -- its layer runs the
 * generic one -- while the background thread compiles it into the cache: a later request gets it,
 * and a new process (after a release) loads it without compiling. */
Test(iconv_jit, the_api_compiles_in_the_background_by_default)
{
    tu_option("iconv-jit", "");
    first_compile();
    cr_assert_null(qr_iconv_specialized(1, 8, 32), "not in the cache: the generic kernel now");
    if (!has_vnni())
        return;
    qr_iconv_fn fn = NULL;
    for (int i = 0; i < 6000 && !(fn = qr_iconv_specialized(1, 8, 32)); i++)
        usleep(10000); /* at nice 19 on a loaded machine: up to a minute */
    cr_assert_not_null(fn, "compiled in the background");
    qc_iconv_jit_stat s;
    qc_iconv_jit_stats(&s);
    cr_assert(s.background == 1 && s.loaded == 0 && s.queued == 0, "background %ld, loaded %ld, queued %ld",
              s.background, s.loaded, s.queued);
    problem p;
    make(&p, 1, 8, 32, 5, FILL_RANDOM);
    column_ranges(&p, fn);
    qc_iconv_jit_release();
    fn = qr_iconv_specialized(1, 8, 32);
    cr_assert_not_null(fn, "the next process's first request: from the cache");
    qc_iconv_jit_stats(&s);
    cr_assert(s.background == 1 && s.loaded == 1, "background %ld, loaded %ld", s.background, s.loaded);
    column_ranges(&p, fn);
    drop(&p);
}

/* A folder of its own for TMPDIR (libgccjit's and the compiler's scratch), in the test's cache. */
static void scratch_tmpdir(char *tmp, size_t n)
{
    snprintf(tmp, n, "%s/tmp", cache_dir);
    cr_assert_eq(mkdir(tmp, 0700), 0);
}

/* Neither a compilation's folder in tmp (TMPDIR) nor a cache entry's temporary file is left. */
static void no_scratch_left(const char *tmp)
{
    /* a living process keeps its folder for libgccjit's scratch (compiler/jitrun.h), empty between
     * compilations; a dead one leaves none */
    const char *own = qc_jit_scratch_dir(0);
    int kept = own && !strncmp(own, tmp, strlen(tmp)) && tu_file_exists(own);
    if (kept)
        cr_assert_eq(tu_count_files(own), 0, "a compilation's folder was left in %s", own);
    cr_assert_eq(tu_count_files(tmp), kept, "a compilation's folder was left in TMPDIR");
    char cmd[1400], *log;
    snprintf(cmd, sizeof cmd, "ls -a '%s/qrl' | grep -c tmp", cache_dir);
    tu_run(cmd, &log);
    cr_assert_eq(atoi(log), 0, "an entry's temporary file was left: %s", log);
    free(log);
}

/* Stopping at exit with shapes queued: the one being compiled ends in the cache, the rest are
 * dropped, and no temporary file (an entry's *.tmp.*, or a compilation's folder) is left. */
Test(iconv_jit, stopping_leaves_no_scratch)
{
    if (!has_vnni())
        return;
    char tmp[1200];
    scratch_tmpdir(tmp, sizeof tmp);
    setenv("TMPDIR", tmp, 1);
    qc_iconv_jit_set_background(1);
    for (int n = 16; n <= 16 * 6; n += 16)
        cr_assert_null(qc_iconv_jit(1, 8, n), "queued, not compiled in the caller");
    usleep(50000);
    qc_iconv_jit_stop();
    qc_iconv_jit_stat s;
    qc_iconv_jit_stats(&s);
    cr_assert_eq(s.queued, 0, "stopped with %ld queued", s.queued);
    cr_assert_eq(count_entries(), s.background, "each compiled kernel is in the cache");
    no_scratch_left(tmp);
    unsetenv("TMPDIR");
}

/* SIGINT while the background thread compiles (libgccjit's folder is in TMPDIR): qrl's handler
 * (qrl_cleanup_on_signals) waits for the compilation, then the process dies of the signal, and
 * neither that folder nor an entry's temporary file is left. In a child process: it dies. The child
 * sets SIGINT's default first: a suite started in the background by a shell without job control
 * (`make test &`) inherits SIGINT ignored, and qrl rightly leaves an ignored signal ignored, so the
 * raise would do nothing and the child would poll on to its exit 3. */
Test(iconv_jit, sigint_while_compiling_leaves_no_scratch)
{
    if (!has_vnni())
        return;
    char tmp[1200];
    scratch_tmpdir(tmp, sizeof tmp);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        setenv("TMPDIR", tmp, 1);
        signal(SIGINT, SIG_DFL);
        qrl_cleanup_on_signals();
        qc_iconv_jit_set_background(1);
        for (int n = 16; n <= 16 * 8; n += 16)
            qc_iconv_jit(1, 8, n);
        for (int i = 0; i < 60000; i++) { /* until a compilation's scratch exists: up to a minute */
            if (tu_count_files(tmp) > 0)
                raise(SIGINT);
            usleep(1000);
        }
        _exit(3);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "died of the signal (status %#x)", st);
    no_scratch_left(tmp);
}

/* A cache that cannot be written: nothing is compiled in the background (it could not be kept),
 * the generic kernels run; no folder can be made under /proc. A relative XDG_CACHE_HOME is ignored
 * (the XDG spec): no folder appears under the working directory. */
Test(iconv_jit, no_writable_cache_no_background)
{
    setenv("XDG_CACHE_HOME", "/proc/qrl-none", 1);
    qc_iconv_jit_set_background(1);
    cr_assert_null(qc_iconv_jit(1, 8, 48));
    usleep(100000);
    cr_assert_null(qc_iconv_jit(1, 8, 48), "not compiled in the background");
    qc_iconv_jit_stat s;
    qc_iconv_jit_stats(&s);
    cr_assert(s.compiled == 0 && s.queued == 0, "compiled %ld, queued %ld", s.compiled, s.queued);
    qc_iconv_jit_release();
    if (geteuid() != 0) { /* root writes a 0500 folder */
        char ro[1200];
        snprintf(ro, sizeof ro, "%s/ro", cache_dir);
        cr_assert_eq(mkdir(ro, 0700), 0);
        snprintf(ro, sizeof ro, "%s/ro/qrl", cache_dir);
        cr_assert_eq(mkdir(ro, 0500), 0);
        snprintf(ro, sizeof ro, "%s/ro", cache_dir);
        setenv("XDG_CACHE_HOME", ro, 1);
        cr_assert_null(qc_iconv_jit(1, 8, 48));
        usleep(100000);
        cr_assert_null(qc_iconv_jit(1, 8, 48), "a read-only cache: not compiled in the background");
        qc_iconv_jit_release();
        snprintf(ro, sizeof ro, "%s/ro/qrl", cache_dir);
        chmod(ro, 0700);
    } else
        cr_log_info("root: the read-only folder case needs another user");
    char *cwd = tu_tmpdir(), home[1200];
    snprintf(home, sizeof home, "%s/home", cache_dir);
    cr_assert_eq(mkdir(home, 0700), 0);
    cr_assert_eq(chdir(cwd), 0);
    setenv("XDG_CACHE_HOME", "rel", 1);
    setenv("HOME", home, 1);
    qc_iconv_jit_set_background(0);
    cr_assert_eq(qc_iconv_jit(1, 8, 64) != NULL, has_vnni());
    cr_assert_eq(tu_count_files(cwd), 0, "nothing made under the working directory");
    snprintf(home, sizeof home, "%s/home/.cache/qrl", cache_dir);
    cr_assert_eq(tu_count_files(home) > 0, has_vnni(), "$HOME/.cache/qrl used instead");
    cr_assert_eq(chdir("/"), 0);
    tu_rmdir(cwd);
}

/* iconv-jit=cached (qrl quantize's default): a kernel the cache holds loads; a missing one gets
 * none, is not queued and never compiled -- no worker, nothing added to the cache. */
Test(iconv_jit, the_api_loads_but_never_compiles_when_cached)
{
    if (!has_vnni())
        return;
    tu_option("iconv-jit", "1");
    first_compile();
    cr_assert_not_null(qr_iconv_specialized(1, 8, 32), "compiled into the cache first");
    qc_iconv_jit_release();
    int entries = count_entries();
    tu_option("iconv-jit", "cached");
    first_compile();
    qr_iconv_fn fn = qr_iconv_specialized(1, 8, 32);
    cr_assert_not_null(fn, "the cache's kernel loads");
    problem p;
    make(&p, 1, 8, 32, 5, FILL_RANDOM);
    column_ranges(&p, fn);
    drop(&p);
    cr_assert_null(qr_iconv_specialized(1, 12, 48), "missing: the generic kernel");
    usleep(200000); /* a worker, had one started, would be compiling it by now */
    cr_assert_null(qr_iconv_specialized(1, 12, 48), "still none: not compiled");
    qc_iconv_jit_stat s;
    qc_iconv_jit_stats(&s);
    /* the process's counts: the one compiled above, and the one loaded */
    cr_assert(s.loaded == 1 && s.compiled == 1 && s.background == 0 && s.queued == 0,
              "loaded %ld, compiled %ld, background %ld, queued %ld", s.loaded, s.compiled, s.background, s.queued);
    qc_iconv_jit_release();
    cr_assert_eq(count_entries(), entries, "nothing added to the cache");
}

Test(iconv_jit, the_api_leaves_it_off_with_0)
{
    tu_option("iconv-jit", "0");
    first_compile();
    cr_assert_null(qr_iconv_specialized(1, 8, 32), "iconv-jit 0: the generic kernels");
}

/* --kernels portable or another ISA: the specialized kernels (AVX-512 VNNI code) stand aside */
Test(iconv_jit, not_under_another_isa)
{
    tu_option("iconv-jit", "1");
    tu_option("igemm", "portable");
    first_compile();
    cr_assert_null(qr_iconv_specialized(1, 8, 32), "--kernels portable: the portable kernels");
}

/* A shape compiles once per machine: the first process stores it in the module cache, the next
 * loads it (the same bits); with no usable cache it compiles in memory, just as right. */
Test(iconv_jit, cached_on_disk_and_in_memory_without_a_cache)
{
    if (!has_vnni()) {
        cr_log_info("this CPU has no AVX-512 VNNI: nothing to cache");
        return;
    }
    problem p;
    make(&p, 9, 20, 33, 11, FILL_RANDOM);
    cr_assert_eq(count_entries(), 0);
    qr_iconv_fn fn = qc_iconv_jit(9, 20, 33);
    cr_assert_not_null(fn);
    long compiled, loaded;
    qc_iconv_jit_counts(&compiled, &loaded);
    cr_assert(compiled == 1 && loaded == 0, "compiled %ld, loaded %ld", compiled, loaded);
    cr_assert_eq(count_entries(), 1, "the compiled kernel is stored");
    column_ranges(&p, fn);
    qc_iconv_jit_release();
    fn = qc_iconv_jit(9, 20, 33);
    cr_assert_not_null(fn);
    qc_iconv_jit_counts(&compiled, &loaded);
    cr_assert(compiled == 1 && loaded == 1, "loaded from the cache: compiled %ld, loaded %ld", compiled, loaded);
    cr_assert_eq(count_entries(), 1, "loaded, not stored again");
    column_ranges(&p, fn);
    qc_iconv_jit_release();
    setenv("XDG_CACHE_HOME", "/dev/null", 1); /* no folder can be made there */
    fn = qc_iconv_jit(9, 20, 33);
    cr_assert_not_null(fn, "compiled in memory");
    qc_iconv_jit_counts(&compiled, &loaded);
    cr_assert(compiled == 2 && loaded == 1, "compiled %ld, loaded %ld", compiled, loaded);
    column_ranges(&p, fn);
    drop(&p);
}
