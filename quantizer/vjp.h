/* Vector-Jacobian products (backward passes) through an f32 graph, for rank = grad: the adjoint
 * g_t = J_t^T u of every value t for a direction u at the outputs, from one backward pass over the
 * forward's values. Mechanism only: which directions, samples and layers is the recipe's
 * (quantizer/qmeasure.c's grad_effects). Each op's backward is the derivative of the runtime's
 * forward (ONNX semantics); an op without one stops the adjoint of what reaches the outputs only
 * through it (qr_vjp_exact), and the caller measures those layers otherwise. */
#ifndef QR_VJP_H
#define QR_VJP_H

#include "graph.h"
#include "status.h"
#include "tensor.h"

/* Whether node n has a backward for its input j (an f32 input whose adjoint it computes). */
int qr_vjp_input_supported(const qr_node *n, int j);

/* Whether node n's backward reads the data, not only the shape, of its input j (j >= 0) or of its
 * output -1 - j: a value no backward reads may be given to qr_vjp_backward with its shape alone
 * (data NULL), which is what a caller keeps to hold less. */
int qr_vjp_reads(const qr_node *n, int j);

/* Whether node n's backward reads its input 0 only as a 0/1 mask of the elements that pass (Relu,
 * LeakyRelu, Clip with constant bounds, HardSigmoid): a caller may keep that mask instead of the
 * input (QR_BOOL, the input's shape, from qr_vjp_mask: a bit an element where the f32 value takes
 * 32) when n is the only node that reads the input's data. */
int qr_vjp_masks(const qr_node *n);

/* n's mask (qr_vjp_masks) from its forward inputs in (in[0] f32, with data; Clip's bounds): m[i] = 1
 * where element i passes: bit i % 8 of byte i / 8 ((numel + 7) / 8 bytes). */
void qr_vjp_mask(const qr_node *n, const qr_tensor *const *in, unsigned char *m);

/* Whether node n's output is recomputed from its input by qr_vjp_recompute: Sigmoid, HardSigmoid,
 * Clip with constant bounds, Add, Sub, Mul or Div by a constant scalar. */
int qr_vjp_recomputes(const qr_node *n);
/* rc[v] (by value id): value v's data recomputed from its producer's inputs (qr_vjp_recomputes), each
 * val's data, or (not kept, up to 4 producers up) recomputed into rc in turn; the runtime's kernels'
 * formulas, which a caller that drops a value on that account checks bit for bit. 0 when done
 * (already there too), -1 when it cannot (another op, an input missing, out of memory). */
int qr_vjp_recompute(const qr_value *v, const qr_tensor *val, qr_tensor *rc, int depth);
/* One node's backward: in[j] its forward inputs (NULL: left out), out[k] its forward outputs,
 * gout[k] the adjoints of its outputs (NULL or no data: zero), gin[j] (NULL: not wanted) the
 * adjoint of input j, added to (allocated and zeroed by the caller, in[j]'s shape). QR_ERR with a
 * message naming the node when it has none or its attributes are beyond it. */
qr_status qr_vjp_node(const qr_node *n, const qr_tensor *const *in, const qr_tensor *const *out,
                      const qr_tensor *const *gout, qr_tensor *const *gin, qr_error *e);

/* exact[v] (by value id) = 1 where every way from value v to the outputs goes through backwards
 * the module has (an adjoint computed there is J^T u exactly), else 0. */
void qr_vjp_exact(const qr_graph *g, unsigned char *exact);

/* Called once per value whose adjoint is final (every reader's backward has run), before it is
 * freed; adj in the value's shape. */
typedef void (*qr_vjp_visit_fn)(void *user, int value_id, const qr_tensor *adj);

/* The backward pass over g: val[v] the forward's f32 value of every value id (a constant: its own
 * data; other types may be empty; a value no backward reads by its shape alone, one only a masking
 * node reads by its mask, qr_vjp_masks), adj[v] the seeds (the outputs' directions; every other entry
 * empty), filled and freed as the pass goes, back to front; visit sees each value's final adjoint.
 * A value a backward reads that is given by its shape alone is recomputed from its producer's
 * kept inputs where qr_vjp_recompute can (SiLU's Sigmoid from x), held from its first reader's
 * backward to its producer's.
 * Values the outputs reach only through nodes without a backward get none from those. The pass is
 * counted in the process's run counter (qr_exec_add_node_samples): each node whose backward made an
 * adjoint of an input, as one node-run, times the samples of the first graph input's first axis
 * (as a forward run counts its nodes: a Conv's input adjoint is a transposed convolution of the
 * forward's MACs, an elementwise op's about its forward's work). */
qr_status qr_vjp_backward(const qr_graph *g, const qr_tensor *val, qr_tensor *adj, qr_vjp_visit_fn visit,
                          void *user, qr_error *e);
/* qr_vjp_backward down to node index stop (> 0): node stop's outputs are visited and no node before
 * it runs its backward (the values made after it get their final adjoints all the same; the rest,
 * the graph's inputs among them, are not visited): a caller asking for the adjoints of values made
 * at stop or later alone. stop <= 0: qr_vjp_backward. */
qr_status qr_vjp_backward_to(const qr_graph *g, const qr_tensor *val, qr_tensor *adj, qr_vjp_visit_fn visit,
                             void *user, int stop, qr_error *e);

#endif
