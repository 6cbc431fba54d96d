/* The Gram matrix of a layer's input rows, H = X^T X (a layer calibrator's `gram` state, as GPTQ
 * accumulates it), and the linear algebra its solve needs. Mechanism only: which damping, which
 * order of columns, how a rounding error is fed back are the calibrator's (stdlib/calibrators.qrl). */
#ifndef QR_GRAM_H
#define QR_GRAM_H

#include <stdint.h>

#include "parallel.h"
#include "status.h"

/* c (m x n) = a (m x k, a(r, q) = a[r * a_rs + q * a_cs]) times b (k x n, rows contiguous), on
 * pool's threads (NULL: this one): the best FMA kernel (ops/sgemm.h), or the reference's fmaf
 * chains on a CPU without FMA. The bits do not depend on the threads. */
void qr_gram_gemm(qr_pool *pool, const float *a, int64_t a_rs, int64_t a_cs, const float *b, float *c, int64_t m,
                  int64_t n, int64_t k);

/* out (k x k floats) = X^T X, x rows x k row-major, in f32 products summed as FMA chains
 * (ops/sgemm.h) on pool's threads (NULL: this one); the bits do not depend on the threads. */
void qr_gram_xtx(qr_pool *pool, const float *x, int64_t rows, int64_t k, float *out);

typedef struct qr_gram {
    int64_t k;   /* columns (the layer's inputs); 0 before the first add */
    double rows; /* rows added */
    double *h;   /* k x k, row-major, the whole symmetric matrix */
    float *tmp;  /* k x k scratch of qr_gram_add */
} qr_gram;

/* Adds the rows of x (its last dimension is k; all others count rows): H += X^T X, summed in f32
 * a block of rows at a time and in f64 across blocks. The first add fixes k; an x of another
 * width is an error. */
qr_status qr_gram_add(qr_gram *g, const float *x, int64_t numel, int64_t k, qr_error *e);
/* g += o (their k must agree, or one be empty). */
qr_status qr_gram_merge(qr_gram *g, const qr_gram *o, qr_error *e);
void qr_gram_free(qr_gram *g);

/* u (k x k doubles, row-major, upper triangular) with u^T u = A^-1, A = c H + lambda I with each
 * zero diagonal entry of c H (an input no row reached) taken as 1 first: GPTQ's "Cholesky form of
 * the inverse Hessian". An error when A is not positive definite (lambda too small). */
qr_status qr_gram_inverse_factor(const qr_gram *g, double c, double lambda, double *u, qr_error *e);

#endif
