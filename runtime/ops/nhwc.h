/* Buffer-level kernels on one image in NHWC (channels last: [H][W][C], a
 * pixel's C channels together) for the integer graph: depthwise convolution,
 * u8/i8 MaxPool and AveragePool, and the u8 transposes between NHWC and NCHW.
 *
 * Each gives the same integers as the NCHW op it stands for (quant.c's
 * depthwise ConvInteger sums, conv.c's native 8-bit pools), in NHWC. The
 * geometry is a qr_conv_geom of spatial rank 2 (big = H, W of the input,
 * small = OH, OW of the output). Every function is reentrant, allocates
 * nothing (MaxPool uses 16 KB of stack, the AVX-512 VNNI depthwise up to 180 KB)
 * and writes only the output it is given a range of, so threads may call it
 * at once on disjoint ranges (rows of output [oy0, oy1), pixels [p0, p1)) of
 * the same image. */
#ifndef QR_NHWC_H
#define QR_NHWC_H

#include <stddef.h>
#include <stdint.h>

#include "conv_geom.h"

/* Depthwise 2-D convolution sums, output rows [oy0, oy1) (0 <= oy0 <= oy1 <= OH):
 *   acc[((oy - oy0) * OW + ox) * acc_ps + c] =
 *       init[c] + sum over the window positions (ky, kx) whose input pixel
 *                 iy = oy * stride[0] - pad_begin[0] + ky * dilation[0],
 *                 ix = ox * stride[1] - pad_begin[1] + kx * dilation[1]
 *                 lies inside the image of
 *           ((x[(iy * W + ix) * C + c] ^ flip) - xz) * wk[(ky * KW + kx) * C + c]
 * for c < C, modulo 2^32 (as an exact sum wrapped at the end; padding adds
 * nothing). x is one image [H][W][C] of u8, or of i8 given as its bytes with
 * flip = 0x80 (x ^ 0x80 = x + 128), xz the input zero point in that flipped
 * domain (i8 zero point + 128); wk[taps][C] the weights minus their zero
 * points, init[C] the starting sums (the bias). acc_ps >= C is the output's
 * pixel stride; channels past C of a pixel are not written. ahead: x is out of the caches
 * (qr_nhwc_dw_ahead), the kernel prefetches the input rows the next output row reads; the same
 * sums. */
void qr_nhwc_dw_u8(int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
                   const int32_t *wk, const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0, int64_t oy1,
                   int ahead);
/* qr_nhwc_dw_u8 one output row at a time: each row oy in [oy0, oy1) is made in acc's first OW
 * pixels (every row in the same place), then done(ctx, oy) is called, which reads it before the
 * next row overwrites it; the same sums. So a row's sums are read back from L1 rather than a block
 * of rows' from L2 (the four-taps kernel keeps its copied input rows across the rows of the call). */
typedef void (*qr_nhwc_dw_row_done)(void *ctx, int64_t oy);
/* A requantization the kernel may apply itself, while the sums are in registers (ops/requant_prog.h):
 * y[(oy * OW + ox) * C + c] = round_even(clamp(f32(sum + bias[c]) * m[c], lo[c], hi[c])) + z[c]
 * (the sum wrapping as above), whose values the caller has checked to be bytes of y's type. */
typedef struct qr_nhwc_dw_requant {
    const int32_t *bias, *z;
    const float *m, *lo, *hi;
    uint8_t *y; /* the image's output, [OH][OW][C] */
} qr_nhwc_dw_requant;
/* rq (or NULL): the rows the four-taps kernel makes with 3 x 3 windows at strides 1 and 2 are
 * requantized into rq->y instead (done is not called for them); the others go to done. */
void qr_nhwc_dw_u8_rows(int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
                        const int32_t *wk, const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0, int64_t oy1,
                        int ahead, qr_nhwc_dw_row_done done, void *ctx, const qr_nhwc_dw_requant *rq);
/* Whether a depthwise layer's input of `bytes` (all its images) is taken to come from memory:
 * past 16 MB, half this EPYC's L3, which the rest of the graph's values share. Prefetching rows
 * that are in the caches only costs: on MobileNetV2's layers of one image, up to 18% more time. */
static inline int qr_nhwc_dw_ahead(int64_t bytes)
{
    return bytes > ((int64_t)16 << 20);
}
/* qr_nhwc_dw_u8 runs the best of these this CPU has; tests run each: "avx512vnni" (four taps a
 * dword where the CPU also has AVX-512 VBMI, the dilation is 1, a window row at most 8 taps and
 * the rows it copies fit its stack; else "avx512vnni-pixels", which takes the "avx512f" one's path
 * when a weight does not fit s8 or C > 4096), "avx512vnni-ahead" (the same, prefetching: ahead),
 * "avx512vnni-pixels", "avx512f", "avx2" or "portable" (NULL when the CPU lacks it or the name is
 * unknown). */
typedef void (*qr_nhwc_dw_fn)(int32_t *acc, int64_t acc_ps, const uint8_t *x, int64_t C, const qr_conv_geom *g,
                              const int32_t *wk, const int32_t *init, uint8_t flip, int32_t xz, int64_t oy0,
                              int64_t oy1);
qr_nhwc_dw_fn qr_nhwc_dw_u8_isa(const char *isa);

/* MaxPool, output rows [oy0, oy1) of y [OH][OW][C] from x [H][W][C]: each
 * output the maximum of its window's pixels inside the image, compared as the
 * element type (i8 signed); padding is ignored, and a window of padding only
 * gives the type's minimum (0, -128), as conv.c's pool_max_u8/i8. */
void qr_nhwc_maxpool_u8(uint8_t *y, const uint8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1);
void qr_nhwc_maxpool_i8(int8_t *y, const int8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1);

/* The same MaxPool of x given as one NCHW image [C][H][W] (a pool after a convolution that stays
 * NCHW), y NHWC as above: the input rows that output rows [oy0, oy1) read are transposed into
 * scratch, which holds qr_nhwc_maxpool_nchw_scratch(C, g, oy1 - oy0) bytes, and pooled there. */
size_t qr_nhwc_maxpool_nchw_scratch(int64_t C, const qr_conv_geom *g, int64_t rows);
void qr_nhwc_maxpool_nchw_u8(uint8_t *y, const uint8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1,
                             uint8_t *scratch);
void qr_nhwc_maxpool_nchw_i8(int8_t *y, const int8_t *x, int64_t C, const qr_conv_geom *g, int64_t oy0, int64_t oy1,
                             uint8_t *scratch);

/* AveragePool as conv.c's pool_avg_native, output rows [oy0, oy1) of y
 * [OH][OW][C]: the exact sum s of the window's pixels inside the image (of
 * the values as they are, not minus a zero point) divided by n, rounded once
 * half to even and clamped to the type, where n counts the window's positions
 * inside the image, or inside the image widened by its pads when
 * count_include_pad; n = 0 (a window of padding only) gives 0. The sums are
 * int32: the window must have fewer than 2^23 positions (asserted). */
void qr_nhwc_avgpool_u8(uint8_t *y, const uint8_t *x, int64_t C, const qr_conv_geom *g, int count_include_pad,
                        int64_t oy0, int64_t oy1);
void qr_nhwc_avgpool_i8(int8_t *y, const int8_t *x, int64_t C, const qr_conv_geom *g, int count_include_pad,
                        int64_t oy0, int64_t oy1);

/* One image of bytes between NHWC [HW][C] and NCHW [C][HW], for the pixels
 * [p0, p1) (0 <= p0 <= p1 <= HW): to_nchw writes dst[c * HW + p], to_nhwc
 * dst[p * C + c], for every c < C. dst and src do not overlap. */
void qr_nhwc_to_nchw_u8(uint8_t *dst, const uint8_t *src, int64_t C, int64_t HW, int64_t p0, int64_t p1);
void qr_nchw_to_nhwc_u8(uint8_t *dst, const uint8_t *src, int64_t C, int64_t HW, int64_t p0, int64_t p1);

#endif
