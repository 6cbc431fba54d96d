/* The integer graph's NHWC layout: its convolutions (and the integer ops
 * between them that can) run on channels-last activations, the layout whose
 * implicit GEMM needs no im2col and whose depthwise sums run a vector of
 * channels at a time (runtime/ops/iconv_nhwc.c). Transposes stay only where an
 * NHWC value meets an op that needs NCHW (a float border, a reduction, a
 * recipe kernel that is not pointwise). */
#ifndef QR_LAYOUT_H
#define QR_LAYOUT_H

#include "graph.h"
#include "status.h"

/* Whether node n (a QrlKernel) is pointwise: with all its tensor operands of one shape, element i
 * of its output depends only on element i of each tensor input (the compiler's proof, recipe.h). */
typedef int (*qr_layout_pointwise_fn)(const qr_node *n, void *user);

/* Rewrites g (types and shapes inferred, nodes in topological order) in place: each 2-D
 * QrlConvKernel of group 1 or depthwise gets attribute nhwc = 1 and NHWC operands, and the ops
 * between such nodes that commute with a layout change follow. The caller sorts g again. No change
 * when nhwc=0 (the NCHW reference the NHWC path is tested against); nhwc=all takes every
 * convolution it can, also those that run faster in NCHW (for tests of the NHWC kernels). */
qr_status qr_layout_nhwc(qr_graph *g, qr_layout_pointwise_fn pointwise, void *user, qr_error *e);

/* The NHWC twin the pass made of the value called name, or NULL; dims (N, H, W, C) of its
 * elements (unknown ones -1), also when the twin is a flattened one. */
const qr_value *qr_layout_twin(const qr_graph *g, const char *name, int64_t *dims);

#endif
