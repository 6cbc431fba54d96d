/* Chains of pointwise nodes run tile by tile (the executor's, exec.c): each tile of rows goes
 * through every node of the chain while it is in cache, instead of each node passing over its
 * whole tensor (GELU's Div, Erf, Add, Mul, Mul over 4 MB each at BERT batch 8). Every node runs
 * its own kernel on views of its tensors, so the bits are the node-by-node run's. */
#ifndef QR_EXEC_TILES_H
#define QR_EXEC_TILES_H

#include "graph.h"
#include "parallel.h"
#include "status.h"

/* How a chain's tensors split: rows of the leading axes (all of shape's axes below `axes`),
 * each row `cols` elements; a tile is `tile_rows` rows. */
typedef struct qr_tiles {
    int axes;
    int64_t rows, cols, tile_rows;
} qr_tiles;

/* Whether nodes[0..count) (pointwise, single-output, in order) can run by tiles with the
 * values' types vt (indexed by value id): every output has one shape S; every input is either
 * of shape S or broadcasts into it from trailing axes only (a bias, a scalar); fills t. */
int qr_tiles_plan(const qr_node *const *nodes, int count, const qr_tensor *vt, qr_tiles *t);

/* Runs the chain by tiles on vt's buffers (on pool's threads, tiles apart); seconds[i] (NULL:
 * not wanted) gets node i's kernel time added. The first error stops it, set in e. */
qr_status qr_tiles_run(const qr_node *const *nodes, int count, const qr_tensor *vt, const qr_tiles *t,
                       qr_pool *pool, void *kernel_user, double *seconds, qr_error *e);

#endif
