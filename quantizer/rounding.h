/* The mechanism of a rounding optimizer (a transform with a flip function, stdlib/transforms.qrl's
 * adaround): per output channel of a layer y = W x, the weights' rounding errors dw = W_q - W give
 * the output error dw . x, whose mean square over the calibration rows x is
 *   E[(dw . x)^2] = dw^T H dw,   H = E[x x^T]
 * (the layer-wise objective of AdaRound, Nagel et al., 2020, arXiv:2004.10568, eq. 20-21: a
 * quadratic in the binary choice of rounding each weight up or down). Instead of AdaRound's
 * continuous relaxation this solves the binary problem by coordinate descent: from round-to-nearest,
 * sweep over the channel's weights in order and move one to its other rounding when the recipe's
 * flip function says so, given the exact change of the objective the move gives (O(1) from
 * g = H dw, kept up to date in O(K) per move). The decision (which changes are worth a move, how
 * many sweeps) is the recipe's; this module measures and moves. */
#ifndef QR_ROUNDING_H
#define QR_ROUNDING_H

#include <stdint.h>

#include "parallel.h"
#include "recipe.h"
#include "status.h"

/* h (k x k, row-major) = X^T X / rows, X the rows x k matrix x (row-major): the Gram matrix of
 * a layer group's input rows, in f32 products summed as FMA chains (ops/sgemm.h), on pool's
 * threads (NULL: this one; the bits do not depend on them). */
void qr_round_gram(qr_pool *pool, const float *x, int64_t rows, int64_t k, float *h);

/* h (k x k doubles) += X^T X, X as for qr_round_gram; tmp holds k x k floats. Summing a layer's
 * rows a chunk at a time keeps k x k doubles instead of all its rows. */
void qr_round_gram_add(const float *x, int64_t rows, int64_t k, double *h, float *tmp);

/* The question put to the recipe for one move, and its answer (positive: move). */
typedef struct qr_round_ask {
    qrl_transform_flip_fn flip;
    const qrl_scalar *params;
    int max_sweeps; /* sweeps after which the optimizer stops however the recipe answers */
    qr_pool *pool;  /* the threads the channels are split over (NULL: this one); the result does not
                     * depend on them */
} qr_round_ask;

/* What optimizing one channel did. */
typedef struct qr_round_stats {
    double before, after;      /* dw^T H dw at round-to-nearest, and at the end */
    double mean_before, mean_after; /* (dw . mu)^2 likewise */
    int64_t moved;             /* weights left at their other rounding */
    int sweeps;                /* sweeps run */
    int capped;                /* stopped by max_sweeps while the recipe still moved weights */
} qr_round_stats;

/* The output channels of one group, each of k weights, rows of the arrays (channels x k): w the f32
 * weights, near their round-to-nearest values and alt their other rounding (dequantized; alt ==
 * near where there is none: on the grid, or at its end), h the group's Gram matrix, mu its mean row
 * (E[x]). out gets the chosen values (near or alt for each), st the channels' sums. An error of the
 * recipe's function (its message in e) stops it. */
qr_status qr_round_group(const qr_round_ask *ask, const float *h, const double *mu, int64_t k, int64_t channels,
                         const float *w, const float *near, const float *alt, float *out, qr_round_stats *st,
                         qr_error *e);

#endif
