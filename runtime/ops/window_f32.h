/* f32 sliding windows over one 2-D plane in NCHW (depthwise convolution, MaxPool) with AVX-512:
 * 16 outputs of a row at a time; MaxPool reads each window position with one masked load (two
 * and a permute at stride 2) of the input row in place, the depthwise convolution with a plain
 * load from padded copies of the rows (their columns split into even and odd at stride 2). conv.c calls them when
 * qr_window_avx512() says the CPU has AVX-512 and otherwise keeps its portable loops. */
#ifndef QR_WINDOW_F32_H
#define QR_WINDOW_F32_H

#include <stdint.h>

#include "conv_geom.h"

struct qr_act; /* op.h */

/* 1 when this CPU reports avx512f and the window option (qr_options) is not "portable" (tests compare both paths). */
int qr_window_avx512(void);

/* Whether the kernels below take g: 2-D, column stride 1 or 2 (any row stride and dilation). */
int qr_window_avx512_fits(const qr_conv_geom *g);

/* Whether qr_dw_plane_f32_avx512 takes g: qr_window_avx512_fits, at most 64 window positions
 * and rows of at most about 1000 (stride 1) or 2000 (stride 2) outputs. */
int qr_dw_f32_avx512_fits(const qr_conv_geom *g);

/* Floats of scratch qr_dw_plane_f32_avx512 needs for g (padded copies of the rows one group of output rows reads). */
int64_t qr_dw_f32_avx512_work(const qr_conv_geom *g);

/* One plane of a depthwise convolution: y[oy][ox] = sum over window positions (ky, kx) in order,
 * from 0, of w[ky * KW + kx] * x(...) with the padding's products (w * 0) included, each a
 * multiply then an add (no FMA), then + *bias when bias is not NULL: the bits of conv.c's
 * dw_runs; then the activation act when not NULL (op.h's qr_act_apply). work: the thread's
 * qr_dw_f32_avx512_work(g) floats, any contents. */
void qr_dw_plane_f32_avx512(const qr_conv_geom *g, const float *x, const float *w, const float *bias,
                            const struct qr_act *act, float *work, float *y);

/* One plane of MaxPool: each output the first maximum of its window in window order (strict >:
 * NaN never wins, -0 and +0 keep the earlier), -inf for a window of padding only: the bits of
 * conv.c's pool_max_f32. */
void qr_maxpool_plane_f32_avx512(const qr_conv_geom *g, const float *x, float *y);

/* 1 when this CPU reports avx2 and not avx512f (whose kernels above take the planes) and the window
 * option is not "portable". */
int qr_window_avx2(void);

/* conv.c's depthwise runs' sums with AVX2 (window_avx2.c): a[i] = sum over the taps t in order,
 * from 0, of w[t] * d[off[t] + i], each a multiply then an add (no FMA), for i < n: the bits of
 * conv.c's dw_taps loop. */
void qr_dw_taps_f32_avx2(float *a, const float *d, const int64_t *off, const float *w, int64_t ntaps, int64_t n);

/* One plane of a 2-D MaxPool with AVX2 (window_avx2.c), any strides, dilations and pads: the bits
 * of qr_maxpool_plane_f32_avx512 and conv.c's pool_max_f32. */
void qr_maxpool_plane_f32_avx2(const qr_conv_geom *g, const float *x, float *y);

#endif
