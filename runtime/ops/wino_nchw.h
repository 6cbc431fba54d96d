/* f32 3 x 3 stride-1 convolutions of channels-first (NCHW) images by Winograd's F(2x2, 3x3), on CPUs
 * whose best FMA GEMM is AVX2's (no AVX-512: there the channels-last kernels of sconv.h and wino.h
 * run). Each 2 x 2 block of outputs ("tile") from its 4 x 4 input patch as V = B^T d B, the weights
 * as U = G g G^T (wino.h's qr_wino_weights, once per executor), then 16 GEMMs on the AVX2 kernel,
 * M[xi] (out channels x tiles) = U[xi] (out x in channels) . V[xi] (in channels x tiles), and
 * Y = A^T M A, + bias, then the fused activation. 16 products of C terms for 4 outputs instead of
 * 36: 2.25x fewer multiply-adds (ResNet-18's f32 pass at batch 1 on AMD Zen 3, 1 thread: measured
 * in docs/runtime.md, "Winograd on AVX2"). The numerics are wino.h's (an output's error is that of
 * float chains over 16 C terms of transformed values; an inf input makes NaN in its tiles); the
 * bits depend neither on the threads nor on the batch (tiles never span images). `--option
 * winograd=0` runs the direct GEMM instead. */
#ifndef QR_WINO_NCHW_H
#define QR_WINO_NCHW_H

#include <stdint.h>

#include "conv_geom.h"
#include "op.h"
#include "sgemm.h"

/* Whether the f32 Conv of geometry g (group groups, c in and m out channels) runs here. */
int qr_wino_nchw_takes(const qr_conv_geom *g, int64_t c, int64_t m, int64_t group);

/* y [n_img][m][OH][OW] = conv(x [n_img][c][H][W], w [m][c][3][3]) + b (NULL: none), then act (NULL:
 * none). *done 0 (nothing written) when a weight is not finite, or when its workspace (16 x (c + m)
 * floats a tile, the transformed weights) would pass the memory budget (--max-memory): the caller
 * runs the direct kernel. */
qr_status qr_wino_nchw_run(qr_kctx *k, const qr_conv_geom *g, int64_t c, int64_t m, const float *x, const float *w,
                           const float *b, float *y, int64_t n_img, const qr_act *act, int *done);

/* *packed = U = G g G^T of w [m][c][3][3] for the 16 products, each packed as kn's B
 * (qr_sgemm_packed_size(kn, c, m) floats apart): kept across the executor's runs where the weights
 * are (qr_kinput_fixed), else made for this run; give it back with qr_kcache_done. *packed NULL
 * (and QR_OK) when a weight is not finite: the caller runs its direct kernel (an inf weight makes
 * inf - inf in U). Both Winograd paths' (conv.c's wino_run too). */
qr_status qr_wino_packed_weights(qr_kctx *k, const qr_sgemm_kernel *kn, const float *w, int64_t c, int64_t m,
                                 float **packed);

#endif
