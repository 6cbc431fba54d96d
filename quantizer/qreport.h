/* The quantization report: per quantized tensor the observed range, the
 * chosen qparams, the SQNR of the quantized model against f32, the clipped
 * fraction and whether it fell back to f32. As JSON (machine-readable) or as
 * one self-contained HTML page with inline SVG plots (no network). */
#ifndef QR_QREPORT_H
#define QR_QREPORT_H

#include "quantize.h"

/* The format follows path's extension: .json, else HTML. Written atomically. */
qr_status qr_report_write(const qr_quantized *q, const char *model, const char *path, qr_error *e);

#endif
