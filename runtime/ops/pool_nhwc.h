/* MaxPool and AveragePool on NHWC u8/i8 activations, as ops: the integer
 * graph's QrlMaxPoolNhwc and QrlAveragePoolNhwc (quantizer/layout.c turns the
 * 8-bit pools of an NHWC region into them). Input N x H x W x C, output
 * N x OH x OW x C, the ONNX op's attributes; the integers of conv.c's native
 * 8-bit pools (nhwc.h). */
#ifndef QR_POOL_NHWC_H
#define QR_POOL_NHWC_H

#include "../op.h"

qr_status qr_pool_infer_nhwc(qr_kctx *k);
qr_status qr_pool_run_nhwc(qr_kctx *k, int is_max);
/* 1 when the pool computes a band of its output rows alone (k->band0/1, one image's; qr_op_def.band),
 * its geometry in *g: a band chain (runtime/exec.c) then runs a convolution's output into the pool
 * band by band, the convolution's output rows read from cache (ResNet-18's stem into its MaxPool). */
int qr_pool_band_nhwc(qr_kctx *k, qr_band_geom *g);

#endif
