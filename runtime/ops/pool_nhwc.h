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

#endif
