/* The export of dynamically quantized convolutions in the operators ONNX Runtime runs on
 * integers (export_dynamic.c). */
#ifndef QR_EXPORT_DYNAMIC_H
#define QR_EXPORT_DYNAMIC_H

#include "graph.h"
#include "status.h"

/* Each Conv of the QDQ graph d that reads DequantizeLinear(DynamicQuantizeLinear(x)) and a constant
 * weight's DequantizeLinear with one zero point for all channels is rewritten, in place, as ONNX
 * Runtime's quantize_dynamic writes one: ConvInteger(x's integers, the weight's, x's run-time zero
 * point, the weight's) -> Cast to f32 -> Mul by x_scale * w_scale[c] -> Add the f32 bias. The same
 * arithmetic as the stdlib's qconv_dynamic, in the same order. The Conv and the DequantizeLinears
 * no node reads any more are marked dead (the weight's stays in d, for --qparams). Returns the
 * number of Convs rewritten, -1 when memory ran out (the graph is marked). */
int qr_export_dynamic_convs(qr_graph *d);

#endif
