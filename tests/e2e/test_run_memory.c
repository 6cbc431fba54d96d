/* `qrl run -i` under --max-memory (QRL-L): a .npy input is mapped, and with --batch the run
 * holds one slice of it, one slice's outputs (written to their files a slice at a time) and the
 * run's tensors, so an input larger than the budget runs within it; a budget that cannot hold
 * what is asked is a one-line error with the sizes and nothing is written. The oracles: numpy
 * (the model is x W + b, Relu) and ONNX Runtime on a small input (tools/ort_run.js), the
 * unsliced run on the whole input byte for byte, and the peak RSS of the process (wait4) against
 * the input's size. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char *dir;

/* mm.onnx: y = Relu(x W + b), x f32[N,1024], W f32[1024,8] (seeded): 4 KiB of input per sample
 * and 32 bytes of output, so the input is most of what a run holds. big.npy: N = 16000 samples
 * (64 MB, each row different), small.npy its first 64; numpy's y of big (ref.npy). */
#define BIG_SAMPLES 16000
#define SAMPLE_BYTES 4096L

static void setup(void)
{
    dir = tu_tmpdir();
    char *log;
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np, onnx; from onnx import helper, numpy_helper, "
             "TensorProto as T; r = np.random.default_rng(7); w = r.standard_normal((1024, 8)).astype(np.float32) / 32; "
             "b = r.standard_normal(8).astype(np.float32) / 4; "
             "g = helper.make_graph([helper.make_node('MatMul', ['x', 'w'], ['m']), helper.make_node('Add', ['m', 'b'], "
             "['a']), helper.make_node('Relu', ['a'], ['y'])], 'mm', [helper.make_tensor_value_info('x', T.FLOAT, "
             "['N', 1024])], [helper.make_tensor_value_info('y', T.FLOAT, ['N', 8])], [numpy_helper.from_array(w, 'w'), "
             "numpy_helper.from_array(b, 'b')]); onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', "
             "13)]), 'mm.onnx'); x = r.standard_normal((%d, 1024)).astype(np.float32); np.save('big.npy', x); "
             "np.save('small.npy', x[:64]); np.save('ref.npy', np.maximum(x.astype(np.float64) @ w + b, 0))\"",
             dir, BIG_SAMPLES);
    cr_assert_eq(tu_run(cmd, &log), 0, "fixture: %s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(run_memory, .init = setup, .fini = teardown, .timeout = 300);

/* Runs cmd (sh -c 'exec ...': the process is qrl itself) with its output to dir/log.txt; its
 * exit status, and *peak_kb its peak resident set (KiB). */
static int run_peak(const char *cmd, long *peak_kb, char **log)
{
    char full[8192], path[2048];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    snprintf(full, sizeof full, "cd '%s' && exec %s > '%s' 2>&1", tu_root(), cmd, path);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
    *peak_kb = ru.ru_maxrss;
    *log = tu_sh("cat '%s'", path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}


/* The input larger than the budget runs in slices of --batch within it: the outputs are the
 * unsliced run's, byte for byte, and numpy's within 1e-5 (the unsliced run on 64 samples is ONNX
 * Runtime's within 1e-5), and the process's peak stays under the input's size. Without the mapping
 * and the slices' pages given back (the input read whole, as before), the peak holds the 64 MB. */
Test(run_memory, input_larger_than_the_budget_runs_in_slices)
{
    char cmd[4096], *log;
    long small_kb, whole_kb, sliced_kb;
    snprintf(cmd, sizeof cmd, "%s run '%s/mm.onnx' -i '%s/small.npy' -o '%s/small'", tu_qrl(), dir, dir, dir);
    int rc = run_peak(cmd, &small_kb, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    free(tu_sh("cd '%s' && NODE_PATH='%s/build/npm/node_modules' node tools/ort_run.js '%s/mm.onnx' '%s/small.npy' -o "
               "'%s/ort'", tu_root(), tu_root(), dir, dir, dir));
    snprintf(cmd, sizeof cmd, "%s run '%s/mm.onnx' -i '%s/big.npy' -o '%s/whole'", tu_qrl(), dir, dir, dir);
    rc = run_peak(cmd, &whole_kb, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s --max-memory 16M run '%s/mm.onnx' -i '%s/big.npy' --batch 1000 -o '%s/sliced'",
             tu_qrl(), dir, dir, dir);
    rc = run_peak(cmd, &sliced_kb, &log);
    cr_assert_eq(rc, 0, "%s", log);
    cr_expect(strstr(log, "y: f32[16000,8] -> "), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cmp whole/y.npy sliced/y.npy && ls whole sliced | wc -l && /usr/bin/python3 -c \"import numpy "
             "as np; y, ref = np.load('sliced/y.npy'), np.load('ref.npy'); s, o = np.load('small/y.npy'), "
             "np.load('ort/y.npy'); d, e = float(np.abs(y - ref).max()), float(np.abs(s - o).max()); print(d, e); "
             "assert y.shape == ref.shape and d < 1e-5 and e < 1e-5 and (y > 0).mean() > 0.3\"", dir);
    rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "the sliced run's outputs against the whole run's, numpy's and ORT's: %s", log);
    cr_expect(!strncmp(log, "5\n", 2), "one output each: %s", log);
    free(log);
    /* the whole run holds the 64 MB input; the sliced one a slice of 1000 samples (4 MB): the
     * budget bounds the slice's inputs, outputs and tensors, on top of the small run's peak */
    long input_kb = BIG_SAMPLES * SAMPLE_BYTES / 1024;
    cr_expect_gt(whole_kb, small_kb + input_kb * 3 / 4, "whole %ld KiB, small %ld KiB", whole_kb, small_kb);
    cr_expect_lt(sliced_kb, small_kb + 16 * 1024,
                 "the sliced run peaked at %ld KiB (the small run %ld KiB, the input %ld KiB)", sliced_kb, small_kb,
                 input_kb);
}

/* A budget that cannot hold what is asked: without --batch the whole input (the message says
 * which --batch fits), a --batch over what fits, one sample on its own. Each is exit 1 with the
 * file, the sizes and the budget, and writes nothing. */
Test(run_memory, over_the_budget_is_an_error_with_the_sizes)
{
    struct {
        const char *args, *want[3];
    } cases[] = {
        {"--max-memory 16M run '%s/mm.onnx' -i '%s/big.npy' -o '%s/o1'",
         {"big.npy: its 16000 samples take 65536000 bytes", "over the budget of 16777216 bytes", "--batch "}},
        {"--max-memory 16M run '%s/mm.onnx' -i '%s/big.npy' --batch 15000 -o '%s/o2'",
         {"big.npy: --batch 15000 takes", "over the budget of 16777216 bytes", "at most --batch "}},
        {"--max-memory 4K run '%s/mm.onnx' -i '%s/big.npy' --batch 10 -o '%s/o3'",
         {"big.npy: one sample", "(4096 ", "the budget of 4096 bytes"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], cmd[4096], *log;
        long kb;
        snprintf(args, sizeof args, cases[i].args, dir, dir, dir);
        snprintf(cmd, sizeof cmd, "%s %s", tu_qrl(), args);
        int rc = run_peak(cmd, &kb, &log);
        cr_expect_eq(rc, 1, "%s: exit %d: %s", args, rc, log);
        for (int k = 0; k < 3; k++)
            cr_expect(strstr(log, cases[i].want[k]), "%s: no '%s' in: %s", args, cases[i].want[k], log);
        cr_expect(!strchr(log, '\n') || strchr(log, '\n')[1] == 0, "%s: one line: %s", args, log);
        free(log);
    }
    char *n = tu_sh("cd '%s' && ls -d o1 o2 o3 2>/dev/null | wc -l", dir);
    cr_expect_str_eq(n, "0\n", "an output folder was made");
    free(n);
}

/* The first quantize compiles the recipe's kernels with libgccjit in the process (an empty module
 * cache); the second loads them from the cache, so the first's peak over the second's is
 * libgccjit's own. GCC sizes its garbage collector by the machine's RAM (its heap grew to 128 MB
 * before a first collection here); compiler/jitrun.c gives it a small machine's settings. Without
 * them int8.qrl's first quantize of this model peaked about 240 MiB over the second's, with them
 * under 80 (docs/quantizer.md, "The cold first quantize's peak (stop 46)"). Both exports are the
 * same bytes, and the first made the cache's entries. Not under ASan: its allocator keeps freed
 * memory aside, libgccjit's too. */
Test(run_memory, cold_quantize_compiles_in_a_small_heap)
{
    char cmd[4096], *log;
    long kb[2];
    free(tu_sh("rm -rf '%s/jitcache'", dir));
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "env XDG_CACHE_HOME='%s/jitcache' %s quantize '%s/mm.onnx' --recipe recipes/int8.qrl --calib "
                 "'%s/small.npy' -o '%s/q%d.onnx' --threads 1",
                 dir, tu_qrl(), dir, dir, dir, i);
        int rc = run_peak(cmd, &kb[i], &log);
        cr_assert_eq(rc, 0, "quantize %d: %s", i, log);
        free(log);
        if (i == 0) {
            char *n = tu_sh("ls '%s/jitcache/qrl' | grep -c '\\.qmod$'", dir);
            cr_assert(atoi(n) >= 1, "the first quantize compiled no module into the cache: %s", n);
            free(n);
        }
    }
    snprintf(cmd, sizeof cmd, "cmp '%s/q0.onnx' '%s/q1.onnx'", dir, dir);
    cr_expect_eq(tu_run(cmd, &log), 0, "the two exports differ: %s", log);
    free(log);
    cr_log_info("peaks: first %ld KiB, second %ld", kb[0], kb[1]);
#if !defined(__SANITIZE_ADDRESS__)
    cr_expect_lt(kb[0], kb[1] + 128 * 1024, "the first quantize peaked at %ld KiB, the second at %ld KiB", kb[0],
                 kb[1]);
#endif
}

/* The largest "peak MiB" of `qrl quantize --profile`'s phases in log: the process's own peak
 * (VmHWM), which a child process's is not part of (wait4's is the largest of both). */
static double own_peak_mib(const char *log)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/profile.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(log, f);
    fclose(f);
    /* a phase's row: wall s, CPU s, peak MiB, then its f32 passes, calibrate and validate passes */
    char *s = tu_sh("awk '/^profile:/{p=1} /runs of the whole/{p=0} p && NF >= 7 && $(NF-5) ~ /^[0-9.]+$/ && "
                    "$(NF-4) ~ /^[0-9.]+$/ && $(NF-3) ~ /^[0-9.]+$/ && $(NF-2) ~ /^[0-9.]+$/ && $(NF-3) + 0 > m "
                    "{m = $(NF-3) + 0} END {print m + 0}' "
                    "'%s'",
                    path);
    double m = atof(s);
    free(s);
    return m;
}

/* The first quantize compiles the recipe's kernels in a child process (compiler/jitrun.h,
 * qc_jit_compile_to_file_apart): its own peak is the second's (which loads them from the cache),
 * where libgccjit compiling in the process kept 70 MiB more resident (its code's pages, its
 * collector's heap); the first's, the second's and an in-memory compilation's exports (--no-cache:
 * libgccjit in the process) are the same bytes. */
Test(run_memory, first_quantize_compiles_in_a_child_process)
{
    char cmd[4096], *log;
    double own[3];
    free(tu_sh("rm -rf '%s/childcache'", dir));
    const char *extra[3] = {"", "", " --no-cache"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && XDG_CACHE_HOME='%s/childcache' %s quantize '%s/mm.onnx' --recipe recipes/int8.qrl --calib "
                 "'%s/small.npy' -o '%s/c%d.onnx' --threads 1 --profile%s",
                 tu_root(), dir, tu_qrl(), dir, dir, dir, i, extra[i]);
        int rc = tu_run(cmd, &log);
        cr_assert_eq(rc, 0, "quantize %d: %s", i, log);
        own[i] = own_peak_mib(log);
        cr_assert_gt(own[i], 1, "no peak in: %s", log);
        free(log);
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && cmp c0.onnx c1.onnx && cmp c0.onnx c2.onnx", dir);
    cr_expect_eq(tu_run(cmd, &log), 0, "the exports differ: %s", log);
    free(log);
    cr_log_info("own peaks: first %.1f MiB, second %.1f, in memory %.1f", own[0], own[1], own[2]);
#if !defined(__SANITIZE_ADDRESS__)
    cr_expect_lt(own[0], own[1] + 24, "the first quantize's own peak %.1f MiB, the second's %.1f (in memory: %.1f)",
                 own[0], own[1], own[2]);
#endif
}

/* A compilation that fails in the child reaches the user as libgccjit's error, and qrl exits 1
 * with nothing written: here the child is killed (a file size limit of 64 KiB: SIGXFSZ as
 * libgccjit writes the assembler), which killed qrl itself when it compiled in the process. */
Test(run_memory, a_compile_that_fails_in_the_child_is_an_error)
{
    char cmd[4096], *log;
    free(tu_sh("rm -rf '%s/failcache' '%s/f.onnx'", dir, dir));
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ulimit -f 64 && XDG_CACHE_HOME='%s/failcache' %s quantize '%s/mm.onnx' --recipe "
             "recipes/int8.qrl --calib '%s/small.npy' -o '%s/f.onnx' --threads 1",
             tu_root(), dir, tu_qrl(), dir, dir, dir);
    int rc = tu_run(cmd, &log);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, log);
    cr_expect(strstr(log, "error: internal compiler error (libgccjit): the compiler process was killed by signal 25"),
              "%s", log);
    cr_expect(!strchr(log, '\n') || !strchr(log, '\n')[1], "one line: %s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s/f.onnx", dir);
    cr_expect(!tu_file_exists(cmd), "an output was written");
}

/* The child tries the external gcc driver without the probe compilation (compiler/jitrun.c,
 * qc_jit_compile_to_file_apart): where there is no driver on PATH (only the assembler and the
 * linker that libgccjit's own driver runs), the child says so and the parent forks again with the
 * probe, which picks libgccjit's own driver, as a process compiling itself would: the quantize
 * succeeds, caches its modules, and its export is the one with the driver, byte for byte. */
Test(run_memory, a_child_without_the_gcc_driver_compiles_with_libgccjits_own)
{
    char cmd[4096], *log;
    free(tu_sh("rm -rf '%s/nodrv' '%s/drvcache' '%s/nodrvcache' && mkdir '%s/nodrv' && "
               "ln -s \"$(command -v as)\" '%s/nodrv/as' && ln -s \"$(command -v ld)\" '%s/nodrv/ld'",
               dir, dir, dir, dir, dir, dir));
    const char *path[2] = {"$PATH", NULL};
    char nodrv[2048];
    snprintf(nodrv, sizeof nodrv, "%s/nodrv", dir);
    path[1] = nodrv;
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && PATH=\"%s\" XDG_CACHE_HOME='%s/%s' %s quantize '%s/mm.onnx' --recipe recipes/int8.qrl "
                 "--calib '%s/small.npy' -o '%s/d%d.onnx' --threads 1",
                 tu_root(), path[i], dir, i ? "nodrvcache" : "drvcache", tu_qrl(), dir, dir, dir, i);
        int rc = tu_run(cmd, &log);
        cr_assert_eq(rc, 0, "quantize %s: %s", i ? "without the driver" : "with the driver", log);
        free(log);
    }
    char *n = tu_sh("ls '%s/nodrvcache/qrl' | grep -c '\\.qmod$'", dir);
    cr_expect(atoi(n) >= 2, "the modules were not cached: %s", n);
    free(n);
    snprintf(cmd, sizeof cmd, "cd '%s' && cmp d0.onnx d1.onnx", dir);
    cr_expect_eq(tu_run(cmd, &log), 0, "the exports differ: %s", log);
    free(log);
}
