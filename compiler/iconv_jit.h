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
 * bytes instead of the accumulator (qr_iconv_ep_fn). NULL as above, and when prog is not a
 * well-formed program; thread-safe. */
qr_iconv_ep_fn qc_iconv_jit_ep(int64_t taps, int64_t k4, int64_t n, const char *prog);

/* The epilogue of program prog alone over channels-last blocks (qr_rows_ep_fn, igemm.h): one
 * function per program, compiled and cached as the kernels are. NULL as above. */
qr_rows_ep_fn qc_rows_ep_jit(const char *prog);

/* Frees every compiled kernel; pointers handed out before become invalid.
 * Registered with atexit by the first compilation, so a process frees them
 * at exit without calling it. */
void qc_iconv_jit_release(void);

/* The tile a shape gets: rows by 16-column vectors (for reports and the bench). */
void qc_iconv_jit_tile(int64_t taps, int64_t k4, int64_t n, int *rows, int *vecs);

/* How many kernels this process compiled with libgccjit and how many it loaded from the on-disk
 * module cache (the same cache as recipes': $XDG_CACHE_HOME/qrl), for tests and the bench. */
void qc_iconv_jit_counts(long *compiled, long *loaded);

/* Writes the assembly of a shape's kernel (prog: its fused epilogue, or NULL) to path (for
 * inspection); 0 on success. */
int qc_iconv_jit_dump_asm(int64_t taps, int64_t k4, int64_t n, const char *prog, const char *path);

#endif
