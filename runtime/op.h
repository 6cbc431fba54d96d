/* The op table: one row per ONNX op (name, arity, attribute schema, shape
 * inference, fp32 reference kernel). Adding an op = adding a row and its two
 * functions in runtime/ops/. */
#ifndef QR_OP_H
#define QR_OP_H

#include "graph.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

/* What an op function sees. in[i] is NULL for an optional input left out.
 * For infer, in[i]->data may be NULL (data unknown until run time): an infer
 * function that needs it returns QR_NEED_DATA. infer sets out[i]->dtype, ndim
 * and dims; run finds out[i]->data allocated (nbytes of that shape) and fills it. */
typedef struct qr_kctx {
    const qr_node *node;
    int opset; /* opset version of the node's domain */
    int n_in, n_out;
    const qr_tensor *const *in;
    qr_tensor *const *out;
    qr_error *err;
    qr_pool *pool; /* worker threads for qr_parallel_for; NULL = serial */
    void *user;    /* qr_exec_opts.kernel_user: state of ops owned by a driver (e.g. the quantizer's SimQuant) */
} qr_kctx;

typedef qr_status (*qr_op_fn)(qr_kctx *k);

typedef struct qr_op_def {
    const char *name;
    const char *domain; /* "" = ai.onnx */
    int min_in, max_in, min_out, max_out;
    /* Attribute schema, space separated "name:kind" with kind one of
     * f i s t floats ints strings; import rejects attributes of the wrong kind. */
    const char *attrs;
    qr_op_fn infer;
    qr_op_fn run;
    /* Output 0 may share input 0's buffer when both have the same type and
     * shape: the kernel reads each element before writing the same index. */
    int inplace;
} qr_op_def;

/* NULL when the op is unknown. */
const qr_op_def *qr_op_find(const char *domain, const char *name);
/* Every registered op, for listings and tests; returns the count. */
int qr_op_list(const qr_op_def *const **defs);

/* Error helper: "node 'n' (Op): message" is added by the executor; ops just say what is wrong. */
#define QR_KERR(k, ...) qr_errorf((k)->err, __VA_ARGS__)

#endif
