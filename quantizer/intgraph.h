/* The integer graph a recipe lowers to: the QDQ graph with every group the
 * recipe quantized replaced by integer code the recipe chose.
 *
 *   pattern match   the anchor's int32 accumulator (ConvInteger or
 *                   MatMulInteger over the quantized input and the weights
 *                   stored once as integers, Gemm's transposed once), then the
 *                   pattern's `lower` kernel (JIT-compiled QRL) as a QrlKernel
 *                   node: bias, requantization, rounding, fused activation;
 *                   kernels without an `acc` parameter get the operands only;
 *   affine  same    the op runs on the integers (MaxPool, Reshape, Pad with the
 *                   zero point, AveragePool, ...); a body (Relu, Clip) becomes
 *                   a lookup table the rule's code fills, one entry per integer;
 *   affine  table   (fixed / requantize) a lookup table from the input's
 *                   integers to the output's, through the rule's real function;
 *   requantize      inputs on other qparams pass through a requantizing table.
 *
 * What the recipe left in f32 keeps its DequantizeLinear/QuantizeLinear
 * borders. Running the graph needs the QrlKernel calls: pass the intgraph as
 * qr_exec_opts.kernel_user. */
#ifndef QR_INTGRAPH_H
#define QR_INTGRAPH_H

#include "accwidth.h"
#include "graph.h"
#include "status.h"

struct qr_qctx;
typedef struct qr_intcall qr_intcall;

typedef struct qr_intgraph {
    qr_graph *g;
    qr_intcall *calls; /* by QrlKernel attribute "call" */
    int ncalls;
    /* how the groups were lowered */
    int kernels;  /* pattern matches run by their lower kernel */
    int lookups;  /* affine nodes, and pattern kernels of one 8-bit input, run as lookup tables */
    int int_ops;  /* affine nodes run as the op on integers */
    int requants; /* requantizing tables added in front of affine nodes */
    int islands;  /* quantized groups left as f32 between DequantizeLinear and QuantizeLinear */
    const char **runs; /* by value id of the original graph: how its producer runs, or NULL */
    /* the narrow accumulators (accumulate = iN, overflow = saturate): QrlAccInteger's counts, by
     * its attribute "counter" */
    qr_acc_counter *accs;
    int naccs;
} qr_intgraph;

/* q: a finished plan (final qparams, fallbacks applied); qdq: the QDQ graph
 * built from it. Fails when a pattern's kernel does not fit the types the
 * recipe chose (a recipe error, reported with the pattern and kernel names). */
qr_status qr_intgraph_build(const struct qr_qctx *q, const qr_graph *qdq, qr_intgraph **out, qr_error *e);
void qr_intgraph_free(qr_intgraph *ig);

/* Whether one of match r's pattern's lowerings takes the types q's slots give its values now (the
 * mixed precision search and the fallback's 16-bit step ask with a value's slot set to a type it
 * may take). */
struct mrec;
int qr_intgraph_lowering_takes(const struct qr_qctx *q, const struct mrec *r);
/* Whether match r is a layer: it runs an integer product (one of its lowerings is an epilogue, whose
 * kernel takes the accumulator of the match's product first), by a weight or of two activations. */
int qr_intgraph_is_layer(const struct qr_qctx *q, const struct mrec *r);

#endif
