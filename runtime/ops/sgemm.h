/* f32 GEMM with FMA in register tiles, one microkernel per instruction set, chosen when first
 * used by what the CPU reports (never by the build machine), as igemm.h's integer kernels.
 *
 * c[r][x] = (sum over q in order 0..K-1 of fma(a(r, q), b[q][x], s)) (+ bias[r], added last),
 * each output a chain of fused multiply-adds from 0 in k order: K is cut into blocks whose sums
 * go through c in f32 between blocks, which rounds exactly as a chain kept in a register, so the
 * bits do not depend on the blocking, the tile an output falls in, the ISA or the threads (they
 * split row and column blocks, never K): every kernel's bits are the reference's (fmaf). */
#ifndef QR_SGEMM_H
#define QR_SGEMM_H

#include <stdint.h>

#include "parallel.h"

struct qr_act; /* op.h */

/* One register tile: rows <= mr, cols <= nr of c from ap (A in place, or packed: ars = 1, acs = mr)
 * and bp (row q at bp + boff[q]: B in place; boff NULL: a packed panel, row q at bp + q * nr):
 * c[r][x] = fma chain over q of ap[q*acs + r*ars] * bp[boff[q] + x], started from c[r][x] when load_c,
 * else from 0; then + bias[r] when bias is not NULL, then the activation act when not NULL
 * (qr_act_apply). Only the real rows and columns are read and stored. */
typedef void (*qr_sgemm_tile_fn)(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff,
                                 int64_t kc, float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias,
                                 const struct qr_act *act);

typedef struct qr_sgemm_kernel {
    const char *isa;
    int mr, nr; /* the tile's rows and columns (the packing's widths) */
    qr_sgemm_tile_fn tile;
    /* for products of at most wide_rows rows (NULL: none): tiles of wide_cols columns of B in
     * place, enough FMA chains for one row */
    qr_sgemm_tile_fn wide;
    int wide_rows, wide_cols;
    /* for a product of one row with B packed (NULL: none): c[x] for x in [x0, x1) (x0 a multiple
     * of nr), a(q) = a[q * acs], each a chain over the whole K, + bias[0] when bias, then act */
    void (*row)(const float *a, int64_t acs, const float *bp, int64_t k, int64_t x0, int64_t x1, float *c,
                const float *bias, const struct qr_act *act);
    /* c[r][x] += b[x] for rows x w values in vectors (NULL: the portable loop): a fused Add's
     * bias after a tile's sums, each element one f32 add as the loop's */
    void (*add_cols)(float *c, int64_t ldc, int64_t rows, int64_t w, const float *b);
    /* tile, then + col_bias[x] on each row in registers, before act (NULL: tile, then add_cols):
     * the same bits */
    void (*tile_cols)(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff, int64_t kc,
                      float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias,
                      const struct qr_act *act, const float *col_bias);
    /* qr_sgemm_pack_b's panel of a transposed B (b_rs 1), nr columns x k (NULL: the loop): column
     * x's values at b + x * b_cs, w <= nr of them real, the rest 0 */
    void (*pack_bt)(const float *b, int64_t b_cs, int64_t k, int w, float *dst);
} qr_sgemm_kernel;

/* c (row stride ldc) = a * b (+ bias): a(r, q) = a[r * a_rs + q * a_cs] (m x k), b[q * ldb + x]
 * (k x n, rows contiguous) or, when b_rows is given, b[b_rows[q] + x] (rows anywhere: a
 * convolution's window positions over its padded planes), bias NULL or m values, act NULL or
 * the activation every output gets last (op.h's qr_act: a fused Relu or Clip). */
typedef struct qr_sgemm_job {
    const float *a, *b, *bias;
    float *c;
    int64_t a_rs, a_cs, ldb, ldc, m, n, k;
    const int64_t *b_rows;
    const struct qr_act *act;
    /* B packed once by qr_sgemm_pack_b (a constant weight), or NULL; products of more than
     * kn->wide_rows rows then read it instead of packing b (still needed for fewer) */
    const float *b_packed;
    /* n values added last to every row of c (a fused Add's bias; not with act), or NULL */
    const float *col_bias;
} qr_sgemm_job;

/* The floats of B (k x n) packed for kn: every panel of nr columns, its k rows contiguous. */
int64_t qr_sgemm_packed_size(const qr_sgemm_kernel *kn, int64_t k, int64_t n);

/* dst = B packed for kn, B(q, x) = b[q * b_rs + x * b_cs] (b_cs = k, b_rs = 1: a transposed B);
 * columns past n are 0. */
void qr_sgemm_pack_b(const qr_sgemm_kernel *kn, const float *b, int64_t b_rs, int64_t b_cs, int64_t k, int64_t n,
                     float *dst);

/* The floats of packing workspace one thread needs (qr_sgemm takes qr_pool_threads' of them). */
int64_t qr_sgemm_work(const qr_sgemm_kernel *kn);

/* The product on pool's threads (NULL: this one), work holding qr_sgemm_work(kn) floats per
 * thread. Blocks of rows and columns are the threads' work items; the bits do not depend on them. */
void qr_sgemm(qr_pool *pool, const qr_sgemm_kernel *kn, const qr_sgemm_job *j, float *work);

/* The best FMA kernel this CPU runs (AVX-512, then AVX2 with FMA), or NULL when it has none (then
 * callers keep their portable GEMM, which adds without FMA). sgemm=portable forces NULL;
 * sgemm=avx512, avx2 or ref picks that kernel when the CPU has it. */
const qr_sgemm_kernel *qr_sgemm_best(void);

/* The kernel of one instruction set ("avx512", "avx2", or "ref": the portable reference, with
 * fmaf), NULL when this CPU lacks it or the name is unknown (tests run each one there is). */
const qr_sgemm_kernel *qr_sgemm_isa(const char *isa);

#endif
