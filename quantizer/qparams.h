/* The quantization parameters of a quantized model as JSON, for backends
 * that read them from a file rather than through include/qrl.h: every
 * activation (dtype, scale, zero point, integer and real clip range,
 * observed range, SQNR, fallback) and every weight (dtype, axis, scales and
 * zero points per channel). And the integer graph as text (qr_graph_dump). */
#ifndef QR_QPARAMS_H
#define QR_QPARAMS_H

#include "quantize.h"
#include "status.h"

/* recipe: the recipe's file, recorded as given. Written atomically. */
qr_status qr_qparams_write(const char *path, const qr_quantized *q, const char *recipe, qr_error *e);
/* The integer graph (q->ig) as `qrl dump` prints a graph. Written atomically. */
qr_status qr_intgraph_write(const char *path, const qr_quantized *q, qr_error *e);

#endif
