/* Weight-only quantization: a recipe whose activation is f32 (activation = f32). Nothing is
 * calibrated: the B operand of every MatMul and Gemm that is a 2-D f32 constant is quantized
 * to the recipe's weight type (i4, u4, i8, ...) by its weight calibrator, per block of
 * `block` weights along the reduction axis K (recipe setting block = N), per output channel
 * (per_channel) or per tensor, and read back through a DequantizeLinear (opset 21: blocked
 * and 4-bit) into the f32 op. The calibrator, type, modifiers, rounding and block size are
 * the recipe's; the C side only groups the weights and writes the graph. */
#ifndef QR_WEIGHT_ONLY_H
#define QR_WEIGHT_ONLY_H

#include "quantize.h"

/* 1 when recipe r is weight-only (its activation setting is f32). */
int qr_weight_only_recipe(const qr_recipe *r);
/* The weight-only quantization of g (an optimized f32 graph, opset >= 13; the recipe's transforms
 * already applied) by recipe r of m: *out gets the QDQ graph (qdq), the count of weights and, with
 * calib (one tensor per graph input, NULL: none), the outputs' SQNR and cosine against ref's (the
 * model before transforms that change its function; NULL: g's) on those samples (run on
 * o->threads); no integer graph (ig NULL): QRL runs the QDQ graph itself. With o->matmulnbits, a
 * 4-bit blocked weight of a MatMul (or of a Gemm without transA, alpha or beta, whose C is [N])
 * becomes ONNX Runtime's com.microsoft MatMulNBits instead, holding the same integers. */
qr_status qr_weight_only(const qr_graph *g, const qr_graph *ref, const qr_tensor *calib, const qr_quant_opts *o,
                         const qr_recipe *r, qr_quantized **out, qr_error *e);

#endif
