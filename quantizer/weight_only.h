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

/* One weight setting (weight = ..., or a mixed-precision candidate) ready to quantize weights:
 * its type, calibrator and arguments, and the recipe's block and rounding. */
typedef struct qr_wo {
    const qrl_module *m;
    const qr_setting *s; /* the setting */
    double *args;        /* its calibrator call's arguments */
    qr_dtype dt;
    qrl_qtype qt;
    int block, per_channel, round_away, matmulnbits, int8; /* int8: compute = int8 */
    qr_error *e;
} qr_wo;
qr_status qr_wo_init(qr_wo *w, const qr_quant_opts *o, const qr_recipe *r, const qr_setting *s, qr_error *e);
void qr_wo_free(qr_wo *w);
/* Whether node n reads a 2-D f32 constant as its B (MatMul, Gemm): what weight-only quantizes;
 * *kax the reduction axis of that constant. */
int qr_wo_takes_weight(const qr_node *n, int *kax);
/* n's B quantized by w in graph d (a DequantizeLinear in front of it, or n a MatMulNBits). */
qr_status qr_wo_quantize(const qr_wo *w, qr_graph *d, qr_node *n, int kax);
/* d's opset raised for the DequantizeLinears it has, in order. */
qr_status qr_wo_finish(qr_graph *d, qr_error *e);

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
/* Mixed precision (quantizer/mixed.c): a weight-only recipe with candidate settings and a budget. */
qr_status qr_mixed(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, const qr_recipe *r,
                   qr_quantized **out, qr_error *e);

#endif
