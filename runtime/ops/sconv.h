/* f32 2-D convolution (group 1) with the output channels in vectors, as MLAS's NCHWc kernels and
 * XNNPACK's igemm compute it, for CPUs with AVX-512F: the image copied channels-last with its
 * zero border ([Hp][Wp][C]), the weights packed once (per panel of 64 output channels: [K][64],
 * K in (ky, kx, c) order, then 64 biases), and a register tile of up to 12 output pixels of one
 * row by up to 64 channels that broadcasts one input value per pixel and multiplies it with the
 * panel's 16-wide weight vectors. The sums go to a channels-last row block, which is transposed
 * into the NCHW output 16 x 16 at a time. Every output is one FMA chain from 0 over K in
 * (ky, kx, c) order (the chain goes through memory between K blocks, which rounds as a register
 * would), then + bias, then the activation: the bits depend on neither the tiles, the blocks nor
 * the threads. conv.c runs it where qr_sconv_fits says so. */
#ifndef QR_SCONV_H
#define QR_SCONV_H

#include <stddef.h>
#include <stdint.h>

#include "conv_geom.h"

struct qr_act; /* op.h */

/* Output channels per packed panel: four zmm. */
#define QR_SCONV_NR 64
/* At most this many runs of K (qr_sconv_piece) in one layer's plan. */
#define QR_SCONV_PIECES 160

/* A run of K: len consecutive values of a pixel's channels-last window, off floats from the
 * window's first value in the padded image. */
typedef struct qr_sconv_piece {
    int64_t off, len;
} qr_sconv_piece;

/* At most this many border columns (output columns whose windows leave the image on the left or
 * right) get packed weights of their own (qr_sconv.edge). */
#define QR_SCONV_ECOLS 4

/* One layer's plan (qr_sconv_plan): shapes, the padded image and the runs of K, cut into K
 * blocks (chunk c is pieces [chunk[c], chunk[c + 1])).
 * edge: the thin tiles (one K block, a small layer, 16 or more input channels) skip the taps that
 * fall on the zero border, as MLAS's NCHWc kernels do (a 3 x 3 over 14 x 14 with pads of 1 has 9%
 * of its taps there, over 7 x 7 18%): a row's pixels whose windows stay inside the columns [oxl, oxr) take only the kernel rows
 * inside the image, and each border column ox (ecol[e], columns [0, oxl) then [oxr, OW)) takes the
 * kernel columns [ekx0[e], ekx1[e]) from weights packed for it at epack[e] (per panel: [KH][kx][C]
 * x 64). A skipped product is w * 0 = +-0, which leaves a nonzero sum as it was, so the bits are the
 * same when w is finite (the packing records at eflag whether every weight is; the tiles skip
 * nothing when not: inf * 0 is NaN), but for the sign of a zero: a sum that is -0 at a skipped tap
 * (from products that underflowed to -0 and nothing else) stays -0 where w * +0 made it +0. */
typedef struct qr_sconv {
    int64_t C, H, W, M, OH, OW, KH, KW, s0, s1, d0, d1, pt, pl;
    int64_t Hp, Wp, K, panels;
    int npieces, nchunks;
    qr_sconv_piece piece[QR_SCONV_PIECES];
    int chunk[QR_SCONV_PIECES + 1];
    int edge, necols;
    int64_t oxl, oxr, ecol[QR_SCONV_ECOLS], ekx0[QR_SCONV_ECOLS], ekx1[QR_SCONV_ECOLS];
    int64_t epack[QR_SCONV_ECOLS], eflag;
} qr_sconv;

/* 1 when the CPU has AVX-512F and the sgemm option is auto or avx512. */
int qr_sconv_available(void);

/* Fills p for x [C][H][W] -> y [M][OH][OW] with geometry g (2-D); 0 when the plan does not take it
 * (too many runs of K). */
int qr_sconv_plan(qr_sconv *p, const qr_conv_geom *g, int64_t c, int64_t m);

/* Floats of the packed weights and biases (with the border columns' weights and the flag when
 * edge), and of the weights and biases alone (what the tiles stream per K block). */
int64_t qr_sconv_packed_floats(const qr_sconv *p);
int64_t qr_sconv_weight_floats(const qr_sconv *p);
/* dst = w [M][C][KH][KW] and bias [M] (NULL: none) packed as the header says (zero past M). */
void qr_sconv_pack(const qr_sconv *p, const float *w, const float *bias, float *dst);

/* Floats of the padded channels-last image, and of one thread's row block. */
int64_t qr_sconv_image_floats(const qr_sconv *p);
int64_t qr_sconv_block_floats(const qr_sconv *p);
/* Output rows per row block, over nimg images stacked (qr_sconv_block). */
int64_t qr_sconv_block_rows(const qr_sconv *p, int64_t nimg);

/* Rows [r0, r1) of the padded image xp from x (one NCHW image; x_nhwc: one NHWC image), border
 * zeros included. */
void qr_sconv_image_rows(const qr_sconv *p, const float *x, int x_nhwc, float *xp, int64_t r0, int64_t r1);

/* What a channels-last output gets after the bias, in this order: res added (a fused Add: a tensor
 * of y's shape, NHWC only), the activation (qr_act), then x * HardSigmoid(x) when hswish (a fused
 * HardSigmoid and Mul: alpha * x + beta in double clamped to [0, 1], rounded to float, times x in
 * float: elementwise.c's HardSigmoid and Mul bits). */
typedef struct qr_sconv_epi {
    const float *res; /* NULL: none */
    int hswish;
    double alpha, beta;
} qr_sconv_epi;

/* Output rows [oy0, oy1) (at most qr_sconv_block_rows) of panel `panel` into y (one NCHW image:
 * sums in blk, qr_sconv_block_floats, then transposed; nhwc: one NHWC image, the sums in place,
 * blk unused), + the bias when has_bias, then act when not NULL. nhwc only: the rows may run on
 * past OH into the next images (stacked: row r is image r / OH's row r % OH, y and epi->res
 * whole batches, image i's padded copy at xp + i * xp_img), so a block's tiles span images and
 * share its weights. */
void qr_sconv_block(const qr_sconv *p, const float *xp, int64_t xp_img, int x_direct, const float *packed,
                    int has_bias, const struct qr_act *act, float *blk, float *y, int64_t panel, int64_t oy0,
                    int64_t oy1, int nhwc, const qr_sconv_epi *epi);
/* 1 when every panel of p with these packed weights runs the thin tiles without the border's taps
 * (qr_sconv.edge: one K block, finite weights, pixels 1, 3, 16, 32 or 64 floats apart as
 * qr_sconv_block picks them), which read only the taps inside the image: qr_sconv_block may then
 * take x_direct, xp the channels-last images themselves ([H][W][C] each, xp_img floats apart)
 * instead of their padded copies. */
int qr_sconv_reads_inside(const qr_sconv *p, const float *packed);

/* Depthwise (group = C = M, the plan's M = C): weights [C][1][KH][KW] packed per panel of 64
 * channels as [taps][64] + 64 biases; each output one FMA chain from 0 over the taps in (ky, kx)
 * order, + bias, then act. At most QR_SCONV_DW_TAPS window positions. */
#define QR_SCONV_DW_TAPS 64
int64_t qr_sconv_dw_packed_floats(const qr_sconv *p);
void qr_sconv_dw_pack(const qr_sconv *p, const float *w, const float *bias, float *dst);
/* x_direct: xp is the image itself, one NHWC image [H][W][C] with C a multiple of 16 (no
 * qr_sconv_image_rows copy), read in place; a window that leaves it takes zeros for its outside
 * taps, the same bits as the padded copy gives. */
void qr_sconv_dw_block(const qr_sconv *p, const float *xp, int x_direct, const float *packed, int has_bias,
                       const struct qr_act *act, float *blk, float *y, int64_t panel, int64_t oy0, int64_t oy1,
                       int nhwc, const qr_sconv_epi *epi);

/* MaxPool of one NHWC image x [H][W][C] (g 2-D) into y [OH][OW][C], output rows [oy0, oy1): each
 * output the first maximum of its window in window order (strict >, so NaN never wins and of -0
 * and +0 the earlier stays), -inf for a window of padding only: conv.c's pool_max_f32's bits. */
/* GlobalAveragePool of one NHWC image x [n][C] into y [C]: global_f32's bits (conv.c), with s
 * 8 * C doubles of scratch. */
void qr_sconv_gap_nhwc(const float *x, float *y, int64_t n, int64_t C, double *s);

void qr_sconv_maxpool_nhwc(const qr_conv_geom *g, int64_t C, const float *x, float *y, int64_t oy0, int64_t oy1);

#endif
