/* f32 kernels of the transformer ops (Softmax, LayerNormalization, Erf, Tanh) over contiguous rows,
 * one table per instruction set, chosen when first used by what the CPU reports (never by the
 * build machine), as sgemm.h's. Without one, dense.c and elementwise.c keep their portable loops
 * (double arithmetic, rounded once), which are also the tests' oracle for the bounds below. */
#ifndef QR_F32_ROWS_H
#define QR_F32_ROWS_H

#include <stdint.h>

/* A GELU node chain the executor runs as one pass (exec.c fuse_gelu): its constants, each step
 * one f32 operation in the nodes' order, Erf and Tanh as this table's erf and tanh (or the
 * portable loops' double ones, rounded once), so the pass gives the nodes' bits.
 * Erf form (PyTorch's nn.GELU()): y = ((erf(x / c[0]) + c[1]) * x) * c[2].
 * Tanh form (approximate='tanh', x * x * x as two products):
 * y = c[3] * (x * (c[2] + tanh(c[1] * (x + c[0] * (x * (x * x)))))). */
typedef struct qr_gelu_consts {
    int tanh_form;
    float c[4];
} qr_gelu_consts;

typedef struct qr_f32_rows {
    const char *isa;
    /* y = softmax of each of rows rows of n contiguous values (y may be x): x - max exact (in two
     * parts), exp by a polynomial, the sum in double (of f32 pairs), within 3 ulp of the exact result (results under
     * FLT_MIN flushed to 0); a row with NaN or with no finite maximum (all -inf, or +inf) gives
     * NaN, as the portable loop and ONNX's reference do. */
    void (*softmax)(const float *x, float *y, int64_t rows, int64_t n);
    /* y = (x - mean) / sqrt(var + eps) * scale + bias (bias NULL: none) over rows of n, scale
     * and bias n values each; the statistics and y in double (as the portable loop), rounded
     * once. mean and inv_std (NULL: not wanted) get one value per row. */
    void (*layernorm)(const float *x, float *y, int64_t rows, int64_t n, const float *scale, const float *bias,
                      double eps, float *mean, float *inv_std);
    /* y[i] = erf(x[i]), within 1.5 ulp of the exact value (1.07 measured, f32_rows_avx512.c). */
    void (*erf)(const float *x, float *y, int64_t n);
    /* y[i] = tanh(x[i]) (GELU's tanh form), within 2 ulp of the exact value. */
    void (*tanh)(const float *x, float *y, int64_t n);
    /* HardSigmoid, y[i] = clamp(a * x[i] + b, 0, 1), or (swish) HardSwish, y[i] = x[i] *
     * clamp(x[i] / 6 + 0.5, 0, 1), in double and rounded once: the portable loop's bits; NaN
     * stays NaN. */
    void (*hard)(const float *x, float *y, int64_t n, double a, double b, int swish);
    /* y[i] = the GELU chain g on x[i] (qr_gelu_consts), with erf and tanh above. */
    void (*gelu)(const float *x, float *y, int64_t n, const qr_gelu_consts *g);
} qr_f32_rows;

/* The best table this CPU runs (AVX-512F), or NULL (then the portable loops run).
 * f32-rows=portable forces NULL. */
const qr_f32_rows *qr_f32_rows_best(void);

/* y[i] = the GELU chain g on x[i] for n values: table's gelu, or (table NULL) the portable
 * loops' steps, erf and tanh in double, rounded once, as elementwise.c's Erf and Tanh. */
void qr_gelu_f32(const qr_f32_rows *table, const qr_gelu_consts *g, const float *x, float *y, int64_t n);

/* The AVX-512 table, NULL when this CPU lacks AVX-512F (the tests call it directly). */
const qr_f32_rows *qr_f32_rows_avx512(void);

/* Sigmoid's vector kernel (sigmoid_avx2.c): 1 when this CPU has AVX2 and FMA and f32-rows is not
 * portable. qr_sigmoid_f32_avx2: y[i] = sigmoid(x[i]) in double (the portable loop's two forms,
 * exp by a polynomial within a few double ulp of libm's), rounded once: the portable loop's bits
 * but where the exact value lies within about 2^-28 of an f32 step of a rounding boundary (then
 * one ulp off); NaN stays NaN, y may be x. */
int qr_sigmoid_f32_vector(void);
void qr_sigmoid_f32_avx2(const float *x, float *y, int64_t n);

#endif
