/* ONNX import: ModelProto -> qr_graph, TensorProto files -> tensors.
 * Error messages start with the file name and name the node or field at fault. */
#ifndef QR_ONNX_IMPORT_H
#define QR_ONNX_IMPORT_H

#include "graph.h"
#include "status.h"
#include "tensor.h"

/* Opset 6 is accepted too: its ops match opset 7 except the legacy `broadcast`
 * attribute, which import accepts where it means numpy broadcasting. */
#define QR_OPSET_MIN 6
#define QR_OPSET_MAX 21

/* Loads and validates a model (ops known, arity, attribute kinds, topological
 * order, no cycles). Passes are not run: see passes.h. */
qr_status qr_onnx_load(const char *path, qr_graph **out, qr_error *e);
qr_status qr_onnx_load_buffer(const void *data, size_t len, const char *path, qr_graph **out, qr_error *e);

/* Reads a serialized TensorProto (.pb); t->data is malloc'd (caller frees). name may be NULL. */
qr_status qr_onnx_load_tensor(const char *path, qr_tensor *t, char **name, qr_error *e);

#endif
