/* Blocked 4-bit weights times f32 activations (ONNX Runtime's MatMulNBits, QRL-I): the weights
 * packed once per model load, then a GEMV per row of A on one of two numerics, which the node's
 * accuracy_level chooses as ONNX Runtime's does:
 *
 *   f32 (accuracy_level 0 to 3): y[m][n] = bias[n] + sum over blocks b of
 *       sb[n][b] * (dot_f - z[n][b] * asum_f[m][b]),
 *     dot_f the f32 sum of a[m][k] * code[n][k] over the block (two fma chains, k % 8 < 4 and
 *     k % 8 >= 4, each in k order, then added), asum_f the block's sum of a in k order; each
 *     block's term added with one fma in block order. Within float rounding of ONNX Runtime's
 *     dequantize-then-sgemm. MatMulNBits with many rows (quant.c: 512 or more) instead runs the
 *     f32 GEMM (sgemm.h) on the weights dequantized, (code - zero) * scale, in panels
 *     (qr_q4_dequant): a fma chain per output in k order.
 *   int8 (accuracy_level 4): each row of A quantized per block of K to int8 as ONNX Runtime's
 *     MLAS does (qr_q4_quant_a: symmetric, scale sa = amax / 127, q = round_half_even(a * (127 /
 *     amax)), the block's last values past K 0), then
 *       y[m][n] = bias[n] + sum over b of (sa[m][b] * sb[n][b]) * (dot_q - z[n][b] * asum_q[m][b]),
 *     dot_q = sum qa * code and asum_q = sum qa exact in int32 (vpdpbusd of the unsigned codes
 *     against the signed activations: no sign trick), each block's term added with one fma.
 *
 * Every ISA's kernel computes exactly these operations in this order, so the portable kernels
 * (--kernels portable) give the AVX-512 ones' results bit for bit (tests/unit/test_q4gemm.c). */
#ifndef QR_Q4GEMM_H
#define QR_Q4GEMM_H

#include <stddef.h>
#include <stdint.h>

/* The packed weights of one node: K, N, block (a power of two >= 16), nb = ceil(K / block)
 * blocks, kp = nb * block, groups of 16 columns (the last one padded with code 0, scale 0). In
 * one buffer of qr_q4_bytes, for each group and block in turn (one stream of memory, which the
 * GEMV reads once from start to end for a row), a chunk of chunk = block * 8 + 64 bytes:
 *   the codes, for each octet of k, column j's four bytes, byte i holding k = 8q + i in its low
 *     nibble and k = 8q + 4 + i in its high one (codes past K are 0);
 *   then the 16 columns' scales, f32.
 * zeros [groups][nb][16] u8 after the chunks, or NULL when the file has no zero points (8). */
typedef struct qr_q4w {
    int64_t K, N, block, nb, kp, groups, chunk;
    const uint8_t *chunks;
    const uint8_t *zeros;
} qr_q4w;

size_t qr_q4_bytes(int64_t K, int64_t N, int64_t block, int has_zp);
/* Describes in *w the packing in buf (as qr_q4_pack left it) without touching it. */
void qr_q4_view(qr_q4w *w, const void *buf, int64_t K, int64_t N, int64_t block, int has_zp);
/* Packs MatMulNBits' B uint8 [N][nb][block / 2], scales [N * nb] and zero points (uint8
 * [N][ceil(nb / 2)], NULL: 8) into buf (qr_q4_bytes, 64-byte aligned) and describes it in *w. */
void qr_q4_pack(qr_q4w *w, void *buf, const uint8_t *b, const float *scales, const uint8_t *zp, int64_t K, int64_t N,
                int64_t block);

/* One row of A for the int8 numerics: qa [kp] (0 past K), sa [nb], asum [nb]. */
typedef void (*qr_q4_quant_fn)(const float *a, int64_t K, int64_t block, int8_t *qa, float *sa, int32_t *asum);
/* One row of A for the f32 numerics: af [kp] (a, then 0 past K), asum [nb]. */
void qr_q4_prep_f32(const float *a, int64_t K, int64_t block, float *af, float *asum);

/* Columns of groups [g0, g1) for rows [0, rows): y[m * y_rs + n] for n < N (bias NULL: none).
 * int8: qa rows kp bytes apart, sa and asum nb apart; f32: af rows kp apart, asum nb apart. */
typedef void (*qr_q4_i8_fn)(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum,
                            int64_t rows, const qr_q4w *w, const float *bias, int64_t g0, int64_t g1);
typedef void (*qr_q4_f32_fn)(float *y, int64_t y_rs, const float *af, const float *asum, int64_t rows,
                             const qr_q4w *w, const float *bias, int64_t g0, int64_t g1);

/* Groups [g0, g1) of the weights as f32, (code - zero) * scale: dst[k * ldd + n - 16 * g0] for
 * k < K and the groups' columns n (those past N too: 0), for many rows at f32, where the f32 GEMM
 * (sgemm.h) on the dequantized weights outruns a GEMV per row. */
void qr_q4_dequant(const qr_q4w *w, int64_t g0, int64_t g1, float *dst, int64_t ldd);

/* The kernels this CPU runs best, never NULL: AVX-512 VNNI (int8), AVX-512F (f32 and the row
 * quantizer), else the portable ones; --kernels portable (qr_igemm_portable_forced) or an ISA
 * without AVX-512 forces the portable ones. */
qr_q4_i8_fn qr_q4_i8_kernel(void);
qr_q4_f32_fn qr_q4_f32_kernel(void);
qr_q4_quant_fn qr_q4_quant_kernel(void);

void qr_q4_i8_ref(float *y, int64_t y_rs, const int8_t *qa, const float *sa, const int32_t *asum, int64_t rows,
                  const qr_q4w *w, const float *bias, int64_t g0, int64_t g1);
void qr_q4_f32_ref(float *y, int64_t y_rs, const float *af, const float *asum, int64_t rows, const qr_q4w *w,
                   const float *bias, int64_t g0, int64_t g1);
void qr_q4_quant_ref(const float *a, int64_t K, int64_t block, int8_t *qa, float *sa, int32_t *asum);

#endif
