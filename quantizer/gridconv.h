/* The measured QDQ graphs' convolutions on the integer kernels.
 *
 * In a QDQ graph a Conv reads a DequantizeLinear's values, x = (q - z) * s, and weights that are
 * a DequantizeLinear of constant integers: its f32 sum of products is, but for the rounding of
 * each product and partial sum, acc * s * w_scale[c] + b[c] with acc the integer convolution of
 * q - z by w - w_zero. The measurements (quantizer/qmeasure.c) run such graphs over every
 * calibration sample, two or three times; on the integer kernels each Conv costs what the
 * integer graph's does, and no weight is dequantized per run. The figures move by the f32
 * rounding the sums no longer make (the last digits of an SQNR; docs/quantizer.md, "(stop 36)"). */
#ifndef QR_GRIDCONV_H
#define QR_GRIDCONV_H

#include "graph.h"
#include "op.h"

/* QrlGridConv(x, w, w_scale, w_zero?, x_scale, x_zero?, b?): Conv (its attributes) of f32 x by
 * the 8-bit constant weights w (w_scale one per output channel, or one; w_zero likewise, or
 * none) plus b (f32, one per output channel, or none). When every element of x is (float)c *
 * x_scale for an integer c (as DequantizeLinear and the quantizer's fake quantization make
 * them) with c + x_zero inside x_zero's 8-bit type (no x_zero: c spanning at most 256 values),
 * and the sums fit int32: acc on the integer convolution, then y = acc * x_scale * w_scale[c] +
 * b[c] in double, rounded once to f32. Otherwise (a value off the grid, x_scale not positive
 * and finite): the f32 Conv of x by the dequantized weights, as the graph it replaces computed.
 * Its row of qr_ops_quantizer. */
#define QR_GRIDCONV_ATTRS "auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints"
qr_status qr_gridconv_infer(qr_kctx *k);
qr_status qr_gridconv_run(qr_kctx *k);
double qr_gridconv_macs(const qr_kctx *k);

/* In g, a QDQ graph the measurements run (a copy of its own), each Conv of a DequantizeLinear
 * (one scale) by the DequantizeLinear of constant 8-bit weights (one scale, or one per output
 * channel) becomes QrlGridConv; weight DequantizeLinears no other node reads leave the node
 * list (values keep their ids: the measurements find the model's values by id). Returns how
 * many Convs it turned. */
int qr_gridconv_lower(qr_graph *g);

#endif
