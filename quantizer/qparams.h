/* The quantization parameters of a quantized model as JSON, for backends
 * that read them from a file rather than through include/qrl.h: every
 * activation (dtype, scale, zero point, integer and real clip range,
 * observed range, SQNR, fallback) and every weight (dtype, axis, scales and
 * zero points per channel). And the integer graph as text (qr_graph_dump). */
#ifndef QR_QPARAMS_H
#define QR_QPARAMS_H

#include <stdio.h>

#include "quantize.h"
#include "status.h"

/* A quantized weight of a QDQ graph: a DequantizeLinear of constants (per tensor, per channel
 * along axis, or in blocks of block along it), or a com.microsoft MatMulNBits (4-bit codes,
 * unsigned, blocks along K). */
typedef struct qr_qweight {
    const qr_node *node;
    const char *name;      /* the DequantizeLinear's output, or the MatMulNBits' B */
    int nbits;             /* a MatMulNBits */
    const char *dtype;     /* its integers' type ("i8", "u4", ...) */
    int64_t axis;          /* -1: one scale for the tensor */
    int64_t block;         /* 0: one scale per channel along axis */
    const qr_tensor *scale;
    int64_t count;         /* scales (and zero points) */
} qr_qweight;
/* Node i of g as a quantized weight: 1 and *w filled, else 0. */
int qr_qweight_at(const qr_graph *g, int i, qr_qweight *w);
double qr_qweight_scale(const qr_qweight *w, int64_t k);
int64_t qr_qweight_zero(const qr_qweight *w, int64_t k);
/* Every quantized weight of q's QDQ graph as JSON objects ("value", "dtype", "axis", "scale" and
 * "zero_point" lists; "block_size", MatMulNBits' "format", "node", "K", "N"), comma-separated, each
 * on a line after indent: the qparams JSON's "weights" and the report's. */
void qr_qweights_json(FILE *f, const qr_quantized *q, const char *indent);

/* recipe: the recipe's file, recorded as given. Written atomically. */
qr_status qr_qparams_write(const char *path, const qr_quantized *q, const char *recipe, qr_error *e);
/* The integer graph (q->ig) as `qrl dump` prints a graph. Written atomically. */
qr_status qr_intgraph_write(const char *path, const qr_quantized *q, qr_error *e);

#endif
