/* Sliding-window geometry shared by the float convolutions and pools (conv.c)
 * and the integer convolutions (quant.c). */
#ifndef QR_CONV_GEOM_H
#define QR_CONV_GEOM_H

#include "ops_common.h"

typedef enum qr_win_kind {
    QR_WIN_CONV,      /* Conv, ConvInteger, QLinearConv */
    QR_WIN_POOL,      /* MaxPool, AveragePool: kernel_shape required, ceil_mode */
    QR_WIN_TRANSPOSE, /* ConvTranspose: output_padding, output_shape */
} qr_win_kind;

/* One window per position of the "small" side; the windows read (or, for
 * ConvTranspose, write) the "big" side. Small position s along spatial dim i
 * touches big coordinate s*stride - pad_begin + k*dilation for k in
 * [0, kernel): for Conv and pools big is the input, for ConvTranspose the
 * output. Coordinates outside [0, big) are padding. */
typedef struct qr_conv_geom {
    int r; /* spatial rank */
    int64_t big[QR_MAX_DIMS], small[QR_MAX_DIMS];
    int64_t kernel[QR_MAX_DIMS], stride[QR_MAX_DIMS], dilation[QR_MAX_DIMS];
    int64_t pad_begin[QR_MAX_DIMS], pad_end[QR_MAX_DIMS];
    int64_t big_n, small_n, kernel_n; /* element counts of one spatial plane / kernel */
} qr_conv_geom;

/* Reads kernel_shape, strides, dilations, pads, auto_pad (and ceil_mode for
 * pools, output_padding/output_shape for ConvTranspose) from k->node and
 * computes the geometry for input x (N x C x spatial). wkernel is the kernel
 * size taken from the weights (NULL for pools, where kernel_shape is required). */
qr_status qr_conv_geom_init(qr_kctx *k, const qr_tensor *x, const int64_t *wkernel, qr_win_kind kind,
                            qr_conv_geom *g);

/* For the kernel position kflat (row-major over g->kernel), fills offs[j] for
 * every small position j (row-major) with the big-side offset inside one plane,
 * or -1 when the window reads padding there. */
void qr_conv_offsets(const qr_conv_geom *g, int64_t kflat, int64_t *offs);

#endif
