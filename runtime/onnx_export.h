/* Writing a graph as an ONNX model (protobuf-c), atomically: constants become
 * initializers (raw data), graph inputs and outputs keep their symbolic
 * dims, and the opset imports cover every domain the nodes use. */
#ifndef QR_ONNX_EXPORT_H
#define QR_ONNX_EXPORT_H

#include <stdint.h>

#include "graph.h"
#include "status.h"

/* The most a serialized model may take: protobuf readers (onnx, ONNX Runtime) refuse more. */
#define QR_ONNX_MAX_PROTO_BYTES ((size_t)INT32_MAX)

qr_status qr_onnx_save(const qr_graph *g, const char *path, qr_error *e);
/* qr_onnx_save; with external (or when the model would pass QR_ONNX_MAX_PROTO_BYTES) the
 * initializers of 1 KB or more go to the file path + ".data" beside it (ONNX external data:
 * location, offset, length), the model and its data written all or nothing. */
qr_status qr_onnx_save_ext(const qr_graph *g, const char *path, int external, qr_error *e);
/* qr_onnx_save_ext with limit in place of QR_ONNX_MAX_PROTO_BYTES (a test's small limit). */
qr_status qr_onnx_save_limit(const qr_graph *g, const char *path, int external, size_t limit, qr_error *e);

/* Told the bytes written of a file so far (done of total, file: the model or its ".data"), at
 * least every 1/64 of the file and at its end: a progress bar's caller. */
typedef struct qr_export_progress {
    void (*fn)(void *ctx, const char *file, int64_t done, int64_t total);
    void *ctx;
} qr_export_progress;

/* qr_onnx_save_ext, telling progress (NULL: nothing) as each file is written. */
qr_status qr_onnx_save_progress(const qr_graph *g, const char *path, int external, size_t limit,
                                const qr_export_progress *progress, qr_error *e);

#endif
