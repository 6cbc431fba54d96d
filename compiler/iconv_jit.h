/* Shape-specialized NHWC convolution microkernels, compiled with libgccjit:
 * one function of runtime/ops/igemm.h's qr_iconv_fn contract per layer shape
 * (taps, k4, n), its tap and k loops of known trip counts, v16si accumulators
 * and every dot product an extended-asm vpdpbusd (the wrapping form).
 *
 * Named iconv_jit, not jit_*: the module cache's key of recipe modules hashes every
 * compiler/jit* source (Makefile JIT_SRC), and these kernels are no part of one; they
 * are cached in the same folder under keys of their own (QC_ICONV_JIT_ID: the hash of
 * this generator's sources). */
#ifndef QC_ICONV_JIT_H
#define QC_ICONV_JIT_H

#include <stdint.h>

#include "ops/igemm.h"

/* The kernel of this shape from the process-wide table, loaded from the on-disk
 * module cache or compiled (and stored there) at the first request; thread-safe,
 * one at a time. NULL when the CPU lacks
 * AVX-512F or AVX-512 VNNI, the shape is out of range (k4 not a positive
 * multiple of 4, taps or n < 1), or libgccjit fails: callers keep their
 * generic kernel. A failure is remembered, not retried. */
qr_iconv_fn qc_iconv_jit(int64_t taps, int64_t k4, int64_t n);

/* The same kernel with the epilogue of program prog (compiler/vecmap.h) fused: it writes y's
 * bytes instead of the accumulator (qr_iconv_ep_fn; a program with skip.u8 / skip.i8 reads the
 * skip tensor's rows too). NULL as above, and when prog is not a well-formed program;
 * thread-safe. */
qr_iconv_ep_fn qc_iconv_jit_ep(int64_t taps, int64_t k4, int64_t n, const char *prog);

/* The epilogue of program prog alone over channels-last blocks (qr_rows_ep_fn, igemm.h): one
 * function per program, compiled and cached as the kernels are. NULL as above, and for a program
 * that reads a skip tensor. */
qr_rows_ep_fn qc_rows_ep_jit(const char *prog);

/* Background mode (off until set; the API sets it for iconv-jit=auto, its default): a shape with no
 * kernel in memory or in the module cache gets NULL at once -- the caller runs its generic kernel --
 * while one worker thread (at the lowest priority, every signal blocked) compiles it into the cache;
 * a later request gets it. Nothing is compiled without a cache that can be written: a missing or
 * read-only one leaves those shapes on the generic kernels (its kernels are still loaded). Off: a
 * request compiles in the caller, as it always did (iconv-jit=1, the tests, the bench). */
void qc_iconv_jit_set_background(int on);

/* Off (on until set; the API sets it off for iconv-jit=cached, qrl quantize's default): in
 * background mode a shape missing from memory and the cache gets NULL and is not queued -- the
 * kernels the cache holds still load, nothing is compiled. */
void qc_iconv_jit_set_compile(int on);

/* Stops the worker as qc_iconv_jit_release does, keeping the kernels. */
void qc_iconv_jit_stop(void);
/* Waits until no request is queued or being compiled. */
void qc_iconv_jit_wait(void);

/* Frees every compiled kernel, after stopping the worker: the compilation under way finishes into
 * the cache (so no scratch file is left) and the queue is dropped; pointers handed out before become invalid.
 * Registered with atexit by the first compilation, so a process frees them
 * at exit without calling it. */
void qc_iconv_jit_release(void);

/* The tile a shape gets: rows by 16-column vectors (for reports and the bench). */
void qc_iconv_jit_tile(int64_t taps, int64_t k4, int64_t n, int *rows, int *vecs);

/* How many kernels this process compiled with libgccjit and how many it loaded from the on-disk
 * module cache (the same cache as recipes': $XDG_CACHE_HOME/qrl), for tests and the bench. */
void qc_iconv_jit_counts(long *compiled, long *loaded);

/* The counts above, those of them compiled by the worker, and the requests still queued or being
 * compiled (for qrl run --profile). */
typedef struct qc_iconv_jit_stat {
    long compiled, background, loaded, queued;
} qc_iconv_jit_stat;
void qc_iconv_jit_stats(qc_iconv_jit_stat *s);

/* Writes the assembly of a shape's kernel (prog: its fused epilogue, or NULL) to path (for
 * inspection); 0 on success. */
int qc_iconv_jit_dump_asm(int64_t taps, int64_t k4, int64_t n, const char *prog, const char *path);

#endif
