/* The recipe's accumulator width (accumulate = iN, overflow = wrap | saturate): the Conv/Gemm/MatMul
 * accumulator of the integer graph computed in the defined order, every partial sum kept to N bits.
 *
 * The defined order (docs/quantizer.md, "Accumulator width"): an output's accumulator starts at 0
 * and adds the products (x - x_zero) * (w - w_zero) one at a time, k ascending, where k is the
 * index into the flattened reduction: for a Conv, the weight's [C/group, kH, kW, ...] in row-major
 * order (input channel slowest, the last kernel axis fastest; padding adds 0); for a MatMul or Gemm,
 * K. Each sum that leaves [-2^(N-1), 2^(N-1) - 1] is an overflow: it wraps modulo 2^N, or saturates
 * at the bound it passed. The bias is not part of the accumulator (the epilogue adds it). */
#ifndef QR_ACCWIDTH_H
#define QR_ACCWIDTH_H

#include <stdint.h>

#include "op.h"

/* QrlAccInteger(x, w, x_zero?, w_zero?): ConvInteger (conv = 1, its attributes) or MatMulInteger
 * (conv = 0) of bits-wide accumulators, saturating or wrapping; counter: its index in the
 * integer graph's qr_acc_counter table (k->user, a qr_intgraph), -1: none. Its row of
 * qr_ops_intgraph: infer, run and the multiply-accumulates of one run. */
#define QR_ACCINT_ATTRS \
    "bits:i saturate:i conv:i counter:i auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints"
qr_status qr_accint_infer(qr_kctx *k);
qr_status qr_accint_run(qr_kctx *k);
double qr_accint_macs(const qr_kctx *k);

/* One narrow accumulator's counts since the last qr_acc_counters_reset: partial sums added and
 * those that left the range. Updated atomically (nodes of several batches may run at once). */
typedef struct qr_acc_counter {
    int value;            /* the original graph's value its match writes (the layer) */
    int64_t sums, overflows;
} qr_acc_counter;

/* QrlAccSim(x, w, b?, x_scale, w_scale), the simulated graph's Conv (conv = 1), Gemm (gemm = 1:
 * transA 0, b per output column or one, its transB) or MatMul of
 * fake-quantized f32 operands with the same accumulator (bits, saturate): their integers are x /
 * x_scale and w / w_scale (one per output channel, or one) rounded; y = acc * x_scale * w_scale + b.
 * Its row of qr_ops_quantizer. */
#define QR_ACCSIM_ATTRS                                                                                        \
    "bits:i saturate:i conv:i gemm:i auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints " \
    "alpha:f beta:f transA:i transB:i"
qr_status qr_accsim_infer(qr_kctx *k);
qr_status qr_accsim_run(qr_kctx *k);

#endif
