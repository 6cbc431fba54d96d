/* Writing a graph as an ONNX model (protobuf-c), atomically: constants become
 * initializers (raw data), graph inputs and outputs keep their symbolic
 * dims, and the opset imports cover every domain the nodes use. */
#ifndef QR_ONNX_EXPORT_H
#define QR_ONNX_EXPORT_H

#include "graph.h"
#include "status.h"

qr_status qr_onnx_save(const qr_graph *g, const char *path, qr_error *e);

#endif
