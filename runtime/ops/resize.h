/* Resize's (and Upsample's) transpose, for backward passes (quantizer/vjp.c): the forward is linear
 * in its data input for fixed scales, so its adjoint scatters each output's adjoint back to the
 * input elements the forward read, with the forward's own taps and weights. */
#ifndef QR_OPS_RESIZE_H
#define QR_OPS_RESIZE_H

#include "op.h"

/* dx (in[0]'s shape, f32) += R^T dy, where y = R x is node k->node's forward on k->in (its scales,
 * sizes and roi as given there) with output k->out[0]; dy in that output's shape. A position the
 * forward extrapolates (tf_crop_and_resize outside the roi) reads no input and adds nothing. */
qr_status qr_resize_transpose_f32(qr_kctx *k, const float *dy, float *dx);

#endif
