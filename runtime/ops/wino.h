/* f32 3 x 3 convolutions at stride 1 by Winograd's F(2x2, 3x3) (Lavin and Gray, 2016), for the
 * channels-last graph's QrlConvF32Nhwc on AVX-512F CPUs: each 2 x 2 block of outputs ("tile") from
 * its 4 x 4 input patch as V = B^T d B, the weights as U = G g G^T (once, in double, rounded to
 * f32), 16 products M[xi] = V[xi] . U[xi] over the channels (qr_sgemm), then Y = A^T M A, + bias,
 * + a fused residual Add, then the activation. 16 products of C terms for 4 outputs instead of 36:
 * 2.25x fewer multiply-adds. A real change of numerics: the transforms add and subtract inputs
 * before the products, so an output's error is that of a float chain over 16 C terms of
 * transformed values (bounded in docs/runtime.md, "Stop 43"), not a chain over its 9 C products;
 * and an inf input makes NaN in the four outputs of every tile whose patch holds it (inf - inf),
 * where the direct chain gives inf or NaN only where the window holds it. The bits depend on
 * neither the tile chunks nor the threads (each value is one fixed sequence of operations).
 * `--option winograd=0` runs the direct kernel (sconv.h) instead. */
#ifndef QR_WINO_H
#define QR_WINO_H

#include <stdint.h>

struct qr_act; /* op.h */

/* One layer over n images: NHWC x [n][H][W][C] -> y [n][OH][OW][M], pads pt (top), pl (left). */
typedef struct qr_wino {
    int64_t C, H, W, M, OH, OW, pt, pl;
    int64_t TH, TW; /* tiles a column and a row of one image: ceil(OH / 2), ceil(OW / 2) */
} qr_wino;

/* Floats of U: [16][C][M]. */
int64_t qr_wino_u_floats(int64_t c, int64_t m);
/* u = G g G^T for w [M][C][3][3]: u[xi][c][m] with xi = 4 * i + j (in double, rounded once);
 * 1 when every weight is finite, else 0 (the caller then runs the direct kernel: an inf weight
 * makes inf - inf in U). */
int qr_wino_weights(const float *w, int64_t c, int64_t m, float *u);

/* Tiles [t0, t1) of the batch (tile t: image t / (TH * TW), row (t / TW) % TH, column t % TW)
 * transformed into v[xi * ldv + (t - tb) * C + c] (tb: the chunk's first tile); zeros outside
 * the image. AVX-512F. */
void qr_wino_input(const qr_wino *p, const float *x, float *v, int64_t ldv, int64_t tb, int64_t t0, int64_t t1);
/* Tiles [t0, t1) from m[xi * ldm + (t - tb) * M + o]: Y = A^T M A, + bias[o] (NULL: none), + res
 * (NULL: none; y's shape), then act (NULL: none), into y where the tile's outputs are inside OH x
 * OW. AVX-512F. */
void qr_wino_output(const qr_wino *p, const float *m, int64_t ldm, int64_t tb, int64_t t0, int64_t t1,
                    const float *bias, const float *res, const struct qr_act *act, float *y);

#endif
