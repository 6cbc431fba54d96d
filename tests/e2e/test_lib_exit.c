/* A program using libqrl that returns from main while the background thread compiles its layers'
 * kernels (iconv-jit=auto, AVX-512 VNNI CPUs) must exit normally. libgccjit registers exit
 * handlers of its own when its optimizers first run, and exit runs handlers last registered
 * first: when the process's first compilation was the background thread's, libgccjit's handlers
 * ran before the library's stop, while the thread compiled -- a crash (SIGSEGV, on a thread that
 * blocks every signal), or "compilation terminated." and exit status 1, in about a third of the
 * exits landing in the compilation. The fix (compiler/jitrun.h): the process's first compilation
 * (optimized, so that libgccjit registers them) is made before the thread starts, and the stop
 * runs from a handler registered after it.
 *
 * tests/e2e/programs/exit_while_compiling.c, built against this build's libqrl.so, runs the
 * fashion-MNIST int8 export once and returns after a delay spread over the compilation; its
 * recipe module is in the module cache (a first run), its kernels never are (removed before each
 * run), so the first compilation of each process is the background thread's. It frees nothing on
 * purpose (a program may return so): under the sanitizers, leak checking is off for it. */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define SAN_FLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer"
#else
#define SAN_FLAGS ""
#endif

static int has_vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

Test(lib_exit, returning_from_main_while_kernels_compile, .timeout = 240)
{
    if (!has_vnni())
        cr_skip_test("no AVX-512 VNNI: no kernel is compiled in the background");
    char *dir = tu_tmpdir(), b[4096], cmd[8192], *log;
    snprintf(b, sizeof b, "%s", tu_qrl_bin());
    const char *build = dirname(b), *d = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc -std=c11 -Wall -Wextra -Werror " SAN_FLAGS " -Iinclude tests/e2e/programs/exit_while_compiling.c "
             "-L'%s' -lqrl -Wl,-rpath,'%s' -o '%s/prog' 2>&1 && XDG_CACHE_HOME='%s/cache' %s quantize "
             "examples/fmnist/fmnist_cnn.onnx --recipe recipes/int8.qrl --calib %s/calib_images.npy --calib-count 32 "
             "--quiet -o '%s/q.onnx' && /usr/bin/python3 -c \"import numpy as np; np.save('%s/x.npy', "
             "np.load('%s/calib_images.npy')[:1])\" && ASAN_OPTIONS=detect_leaks=0 XDG_CACHE_HOME='%s/cache' '%s/prog' '%s/q.onnx' '%s/x.npy' 0",
             tu_root(), build, build, dir, dir, tu_qrl(), d, dir, dir, d, dir, dir, dir, dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "setup: %s", log);
    free(log);
    int bad = 0;
    for (int ms = 0; ms <= 330; ms += 30) { /* the exit lands before, in and after the first compilation */
        snprintf(cmd, sizeof cmd, "cd '%s' && rm -f cache/qrl/iconv-* cache/qrl/rowsep-* && ASAN_OPTIONS=detect_leaks=0 XDG_CACHE_HOME='%s/cache' "
                 "./prog q.onnx x.npy %d 2>&1", dir, dir, ms);
        rc = tu_run(cmd, &log);
        cr_expect_eq(rc, 0, "returning after %d ms: exit %d (139: SIGSEGV): %s", ms, rc, log);
        bad += rc != 0;
        free(log);
    }
    cr_expect_eq(bad, 0, "%d of 12 exits failed", bad);
    char *n = tu_sh("ls '%s/cache/qrl' | grep -c -e '^iconv-' -e '^rowsep-'", dir);
    cr_expect_gt(atoi(n), 0, "no kernel was compiled: the exits did not land in a compilation");
    free(n);
    tu_rmdir(dir);
}
