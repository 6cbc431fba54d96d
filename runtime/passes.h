/* Graph passes run after import: removal of Identity/Dropout, shape
 * inference (for the shapes known without inputs), constant folding, and
 * BatchNormalization folded into a preceding Conv or Gemm; and the opset
 * upgrade the quantizer runs on models older than opset 13. */
#ifndef QR_PASSES_H
#define QR_PASSES_H

#include "graph.h"
#include "status.h"

qr_status qr_pass_remove_identity(qr_graph *g, qr_error *e);
/* Infers shapes where all input shapes are known and folds nodes whose inputs are all constant. */
qr_status qr_pass_infer_and_fold(qr_graph *g, qr_error *e);
/* Folds a per-channel affine after a Conv with constant weights into them: a BatchNormalization, or
 * a Mul or Add by a constant holding one value or one per output channel (paddle2onnx writes a
 * Conv's bias and MobileOne's scale this way). Exact up to float rounding, and it saves the
 * quantizer a tensor between the Conv and the affine; BatchNormalization also folds into Gemm. */
qr_status qr_pass_fold_batchnorm(qr_graph *g, qr_error *e);
/* Gemm's alpha into a constant B and beta into a constant C (new constants;
 * the attributes go), so one integer Gemm serves every alpha and beta. */
qr_status qr_pass_fold_gemm_scales(qr_graph *g, qr_error *e);
/* A MatMul whose B is a DequantizeLinear of a constant 4-bit weight in blocks along K becomes the
 * MatMulNBits of the same integers (accuracy_level 0: the same f32 numerics), which runs on the
 * packed int4 kernels instead of an f32 copy of the weight. */
qr_status qr_pass_int4_matmul(qr_graph *g, qr_error *e);
/* The f32 graph channels-last where its convolutions run on sconv (runtime/ops/sconv.h: CPUs with
 * AVX-512F, sgemm auto or avx512; nhwc=0 keeps it NCHW): convolutions, pools and the pointwise
 * ops between them on NHWC twins of their values, one Transpose back to NCHW where a value is
 * read so or is an output (pass_nhwc_f32.c); *changed says whether it converted any. For
 * inference only (runtime/api.c runs it on a copy of a loaded model's graph): the values a
 * region hides are no longer computed. */
qr_status qr_pass_nhwc_f32(qr_graph *g, int *changed, qr_error *e);
/* The per-row dynamic quantization a dynamic recipe's export writes in float ops (ReduceMin,
 * ReduceMax, ..., Round, Clip) in front of a MatMul by an i8 weight's DequantizeLinear becomes the
 * runtime's DynamicQuantizeRows and MatMulInteger, then the two scales in f32 (pass_dynrows.c). */
qr_status qr_pass_dynamic_rows(qr_graph *g, qr_error *e);
/* Quantization info from QDQ models: every QuantizeLinear/DequantizeLinear
 * with constant parameters gives its integer and real tensors their dtype,
 * scale(s), zero point(s), axis and clip range (value->q), for backends. */
void qr_pass_annotate_qdq(qr_graph *g);
/* Fills the shapes that depend on symbolic input dims (e.g. [N,10] from
 * [N,1,28,28]); dims derived from them stay unknown. Best effort, never fails. */
void qr_pass_infer_symbolic(qr_graph *g);
/* All of the above, in order, then drops dead nodes and values. */
qr_status qr_graph_optimize(qr_graph *g, qr_error *e);

/* The type and shape of every value (indexed by id) as inference gives them when the unknown
 * dims of inputs are bound to stand-in sizes base, base+1, ...: dtypes and ranks are the
 * model's, dims equal to a stand-in are not. Constants' entries borrow their data. Best
 * effort: ndim < 0 where inference fails. NULL when out of memory. */
qr_tensor *qr_pass_standin_types(const qr_graph *g, int64_t base);
/* n: g->n_values when vt was made (the graph may have grown since). */
void qr_pass_standin_free(const qr_graph *g, qr_tensor *vt, int n);
/* Rewrites every default-domain node whose opset is below `to` (at most 13) into the form
 * opset `to` defines, with the same results: attributes that became inputs (Slice, Pad,
 * Clip, Split, Squeeze, Unsqueeze, ReduceSum, TopK, Dropout) become int64 (or typed scalar)
 * initializers, Softmax/LogSoftmax/Hardmax's 2-D coercion becomes Flatten + op + Reshape,
 * Upsample and Resize-10 become Resize-13, Scatter ScatterElements, dropped attributes go
 * (runtime/opset_upgrade.c lists every op). Sets g->opset = to. */
qr_status qr_pass_upgrade_opset(qr_graph *g, int to, qr_error *e);
/* Raises every default-domain node of g below opset `to` (18 or later) to it, for an export whose
 * new nodes need it (QuantizeLinear of 16-bit integers, DequantizeLinear of 4-bit ones): the
 * nodes keep their meaning there, the Reduce ops (but ReduceSum) that took axes as an attribute
 * before 18 getting them as an int64 initializer instead. */
qr_status qr_pass_raise_opset(qr_graph *g, int to, qr_error *e);
/* A copy of g (not modified) upgraded to opset `to` and optimized; NULL with e set on failure. */
qr_graph *qr_graph_upgraded(const qr_graph *g, int to, qr_error *e);

#endif
