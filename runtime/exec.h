/* The executor: binds inputs, infers shapes, plans memory once by liveness
 * (one arena, offsets reused when lifetimes do not overlap), runs nodes in
 * the order of qr_exec_order and reports every computed value to an optional
 * observer. A plan is
 * kept until the input shapes change. Graphs whose shapes depend on run-time
 * data (e.g. a Reshape fed by a computed shape) run in dynamic mode: each
 * output is allocated when computed and freed after its last use. */
#ifndef QR_EXEC_H
#define QR_EXEC_H

#include <stddef.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"

typedef struct qr_exec qr_exec;

struct qr_act;
/* The activation node m applies to its input 0 (a Relu, or a Clip with constant bounds), as the
 * executor fuses it into the node before; 0 when m is neither. Its output's values (NaN aside)
 * lie within it: the quantizer's SimQuant reads a range with that (qr_f32_range_within). */
int qr_node_act(const qr_node *m, struct qr_act *a);

/* Called after a node ran, once per output (t->data valid only during the call). The observer may
 * rewrite t's data in place (same shape and type): the nodes after read what it wrote (the
 * quantizer measures each layer with f32 inputs that way). */
typedef void (*qr_observer_fn)(void *user, const qr_node *node, const qr_value *v, qr_tensor *t);

typedef struct qr_exec_opts {
    int threads; /* worker threads for kernels; 0 or 1: run on the caller's thread */
    qr_observer_fn observer;
    void *observer_user;
    void *kernel_user; /* handed to every kernel as qr_kctx.user */
    /* Memory budget in bytes for the tensors a run allocates (the arena, or the
     * live tensors of a dynamic run), checked at planning before anything is
     * allocated; 0: the process default (qr_exec_default_max_memory). */
    size_t max_memory;
    int profile; /* time every node's runs (qr_exec_profile) */
    /* What kernels may keep of the constants across runs (packed weights, qr_kcache_get), in
     * bytes; 0: QR_KCACHE_MAX. */
    size_t cache_max;
    /* With an observer: called before a node's kernel would run (out: its outputs, their shapes
     * and buffers set); nonzero when the observer will write every element of each of them, or
     * when nothing the caller reads needs them (their buffers are then left as they are: the
     * graph's outputs among them are not to be read), so that nothing reads what the kernel would
     * compute and it does not run (the quantizer's local measurement replaces the values of f32
     * nodes by their f32 values; its measurement of what ships leaves out the nodes past the
     * values it measures). NULL: all run. */
    int (*supplied)(void *user, const qr_node *node, qr_tensor *const *out);
    /* The graph's node indices in the order to take them (a topological order of all of them), or
     * NULL: the graph's own. qr_exec_order's placing of constant-only nodes applies to either. The
     * quantizer's f32 run follows a measured graph's order with it, so that the values it hands
     * over are read as they come instead of piling up (docs/quantizer.md, stop 42). */
    const int *node_seq;
    /* The samples a run counts in the run counter (qr_exec_node_samples), or 0: its first input's
     * first axis, 1 without one. For a graph whose first input is not a batch of samples (the
     * quantizer's cut runs start from values inside the model: PP-OCRv4 rec's [3, B, ...] qkv). */
    int64_t samples;
    /* 1: each run builds every node's kernel context node by node, not from the static plan's
     * records (exec.c prepare_nodes): the tests' reference for them */
    int no_records;
} qr_exec_opts;

/* What one node cost over the runs of a profiling executor. */
typedef struct qr_node_prof {
    double seconds; /* shape inference, output allocation and the kernel */
    int64_t runs;
    double macs;    /* multiply-accumulates done (qr_op_macs): convolutions and matrix products */
} qr_node_prof;

typedef struct qr_exec_stats {
    size_t arena_bytes;   /* planned arena size (static mode) */
    size_t sum_bytes;     /* sum of all intermediate tensors: what a plan without reuse would need */
    size_t peak_bytes;    /* peak bytes live at once in the last run (dynamic or static) */
    int dynamic;          /* last run used dynamic allocation */
    size_t work_bytes;    /* the kernels' workspace, kept across runs (qr_kwork) */
    size_t cache_bytes;   /* what kernels keep of the constants across runs (qr_kcache_get, at most qr_exec_opts.cache_max) */
    long work_spills;     /* kernel scratch allocated past the workspace in the last run (0 once it has grown) */
    int tiled_nodes;      /* pointwise nodes the plan runs in chains by tiles (exec_tiles.h) */
    int banded_nodes;     /* nodes the plan runs in chains by bands of rows (qr_op_def.band) */
} qr_exec_stats;

/* The graph must outlive the executor and not change while it exists. */
qr_status qr_exec_new(const qr_graph *g, const qr_exec_opts *opts, qr_exec **out, qr_error *e);
void qr_exec_free(qr_exec *x);
/* x's kernels take what `from`, an executor of the same graph with the same opts.threads, keeps
 * of a node (qr_kcache_get) where they have kept nothing of their own: two runs of one graph
 * hold one packing of its weights, not two. Only for graphs whose values made from constants
 * alone (qr_kinput_fixed) are the same in both executors (no observer of one rewrites them). from
 * must outlive x's runs and never run while x does (nor x while from does); either may share
 * with the other. */
void qr_exec_share_cache(qr_exec *x, const qr_exec *from);
/* x lets go of its run's plan and arena (the arena kept as the spare the next executor's plan
 * takes); its kernels' cache and workspace stay, and its next run plans again: for an executor
 * kept only for what another shares of it (qr_exec_share_cache, qr_exec_share_work). */
void qr_exec_drop_plan(qr_exec *x);
/* Frees the arena the last executor to let go of one kept for the next plan (none kept after): for
 * a caller whose next allocations are not a run's (rank = grad's backward passes), which would
 * otherwise fault in pages beside it. */
/* 1 when this machine's fresh pages fault in slowly enough that executors' arenas of 2 MiB or more
 * take 2 MiB pages (measured once per process; the option arena-pages=4k or 2m forces it). */
int qr_exec_arena_huge(void);
void qr_exec_free_spare(void);

/* As qr_exec_share_cache, for executors of different graphs: node i of x's graph takes what node
 * map[i] of from's graph keeps (-1: nothing), map holding x's graph's n_nodes entries (copied).
 * Only for nodes that are the same op with the same attributes, reading the same constants
 * (the same data) and values of the same shapes: each kernel then keeps the same bytes, as
 * qr_kcache_get checks by their size and by what it calls them. from must also run on as many
 * threads (else nothing is shared), outlive x's runs and never run while x does. */
qr_status qr_exec_share_cache_nodes(qr_exec *x, const qr_exec *from, const int *map, qr_error *e);
/* x's kernels take their workspace (qr_kwork) from `from`'s (any graph) instead of their own: for
 * executors whose kernels never run at the same time (the quantizer's runs side by side, one at a
 * time). from must outlive x's runs; NULL: x's own again. */
void qr_exec_share_work(qr_exec *x, qr_exec *from);

/* fixed[v] (g->n_values bytes): value v is a constant, or the output of a node before its readers
 * whose inputs are all so (a weight's DequantizeLinear in a QDQ graph): the same every run, as
 * qr_exec_order's constant-only nodes, but for a node without inputs (it could be a random one).
 * What qr_kinput_fixed reports to kernels. */
void qr_exec_mark_fixed(const qr_graph *g, unsigned char *fixed);

/* inputs: one tensor per graph input, in graph-input order. outputs: one per
 * graph output, filled with malloc'd data the caller frees (qr_tensor_free). */
qr_status qr_exec_run(qr_exec *x, const qr_tensor *inputs, qr_tensor *outputs, qr_error *e);
void qr_exec_get_stats(const qr_exec *x, qr_exec_stats *s);
/* The nodes of g one run computes, as the run counter counts them: every node but QuantizeLinear,
 * DequantizeLinear, the calibration's SimQuant, a pattern's QrlKernel (its accumulator's node is
 * counted), Shape, Size, and the nodes made from constants alone (qr_exec_mark_fixed: a weight's DequantizeLinear). */
int qr_exec_count_nodes(const qr_graph *g);
/* What every executor of the process has run so far: per successful qr_exec_run, its graph's
 * qr_exec_count_nodes less the nodes its observer supplied, times the run's samples (the first
 * input's first axis). In units of one pass, it is where a quantize's runs go (qr_phase_time). */
int64_t qr_exec_node_samples(void);
/* Adds n node-runs x samples made outside an executor (rank = grad's backward passes, vjp.c), so
 * that the count is every pass a quantize makes. */
void qr_exec_add_node_samples(int64_t n);

/* The same counted apart per account: a run counts into the account chosen last before it ends
 * (0 at the start). The caller switches it only while no run is under way (the quantizer between
 * its runs over the samples it calibrates on and those it judges on). Returns the previous one. */
enum { QR_EXEC_ACCOUNTS = 2 };
int qr_exec_account(int a);
int64_t qr_exec_node_samples_in(int a);
/* Per node of the graph, in node order, summed over every run so far; NULL unless opts.profile. */
const qr_node_prof *qr_exec_profile(const qr_exec *x);
/* Starts the profile over (a benchmark leaves its warm-up run out). */
void qr_exec_profile_reset(qr_exec *x);

/* The order the executor runs g's nodes in: order[k] (g->n_nodes of them) is the index of the
 * k-th node run. The graph's order, except that a node whose inputs are all constants (or made
 * by such nodes: a weight's DequantizeLinear, a constant Transpose), read by some node and not a
 * graph output, runs just before its first reader (before the run of pointwise nodes that reader
 * extends): its output lives from there to its last reader, not from the graph's start, so a QDQ
 * graph, whose topological order puts every weight's DequantizeLinear first, holds one layer's
 * weights in f32 at a time, not all of them. Observers see the values in this order.
 * QR_ERR: out of memory. */
qr_status qr_exec_order(const qr_graph *g, int *order);
/* The same, taking the nodes in seq's order (NULL: the graph's). */
qr_status qr_exec_order_seq(const qr_graph *g, const int *seq, int *order);

/* The budget used when qr_exec_opts.max_memory is 0: the value set by
 * qr_exec_set_default_max_memory (the CLI's --max-memory), else half the
 * machine's physical memory. */
size_t qr_exec_default_max_memory(void);
void qr_exec_set_default_max_memory(size_t bytes);

/* Checks that t fits the declared type of graph input v (dtype, rank, fixed
 * dims); symbolic dims named alike must agree across inputs (checked by run). */
qr_status qr_exec_check_input(const qr_value *v, const qr_tensor *t, qr_error *e);
/* The same for a set of samples stacked along the first dimension: its size is free (a model
 * whose batch is fixed at 1 runs them one by one). */
qr_status qr_exec_check_samples(const qr_value *v, const qr_tensor *t, qr_error *e);

#endif
