/* Graph passes run after import: removal of Identity/Dropout, shape
 * inference (for the shapes known without inputs), constant folding, and
 * BatchNormalization folded into a preceding Conv or Gemm. */
#ifndef QR_PASSES_H
#define QR_PASSES_H

#include "graph.h"
#include "status.h"

qr_status qr_pass_remove_identity(qr_graph *g, qr_error *e);
/* Infers shapes where all input shapes are known and folds nodes whose inputs are all constant. */
qr_status qr_pass_infer_and_fold(qr_graph *g, qr_error *e);
qr_status qr_pass_fold_batchnorm(qr_graph *g, qr_error *e);
/* Quantization info from QDQ models: every QuantizeLinear/DequantizeLinear
 * with constant parameters gives its integer and real tensors their dtype,
 * scale(s), zero point(s), axis and clip range (value->q), for backends. */
void qr_pass_annotate_qdq(qr_graph *g);
/* Fills the shapes that depend on symbolic input dims (e.g. [N,10] from
 * [N,1,28,28]); dims derived from them stay unknown. Best effort, never fails. */
void qr_pass_infer_symbolic(qr_graph *g);
/* All of the above, in order, then drops dead nodes and values. */
qr_status qr_graph_optimize(qr_graph *g, qr_error *e);

#endif
