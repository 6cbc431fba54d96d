/* The op table: one row per ONNX op (name, arity, attribute schema, shape
 * inference, fp32 reference kernel). Adding an op = adding a row and its two
 * functions in runtime/ops/. */
#ifndef QR_OP_H
#define QR_OP_H

#include "graph.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

/* An activation a kernel applies to its output 0 as it stores it, in place of the Relu or Clip
 * that alone read that output (the executor fuses them: qr_op_def.act). relu: v <= 0 ? +0 : v
 * (NaN kept, -0 to +0), as Relu; else v < lo ? lo : v, then v > hi ? hi : v (NaN kept), as Clip. */
typedef struct qr_act {
    int relu;
    float lo, hi;
} qr_act;

static inline float qr_act_apply(const qr_act *a, float v)
{
    if (a->relu)
        return v <= 0 ? 0.0f : v;
    v = v < a->lo ? a->lo : v;
    return v > a->hi ? a->hi : v;
}

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
    size_t scratch_max; /* the memory budget (--max-memory) for one kernel's scratch; 0: unbounded */
    struct qr_kcache *cache; /* the node's buffer kept across runs (qr_kcache_get); NULL: none */
    /* the same node's buffer in the executor this one shares with (qr_exec_share_cache): taken
     * when cache holds nothing; NULL: none */
    const struct qr_kcache *shared;
    size_t *cache_total;     /* the bytes the executor's nodes keep so far; NULL: no cap */
    size_t cache_max;        /* the cap on *cache_total (qr_exec_opts.cache_max); 0: QR_KCACHE_MAX */
    struct qr_kwork_arena *work; /* the kernels' workspace (qr_kwork); qr_op_run provides one */
    const qr_act *act; /* the activation of output 0 (only for ops whose def has act); NULL: none */
    /* f32 values added last to every row of output 0, one per element of its last dim (a fused
     * Add; only for ops whose def has bias); NULL: none */
    const struct qr_tensor *bias;
    /* input 0 is a GELU chain's input, which the op runs through the chain first (exec.c fuse_gelu:
     * a chain read by DynamicQuantizeRows alone); NULL: none */
    const struct qr_gelu_consts *pre_gelu;
    /* infer only, on stand-in sizes (symbolic shape inference): the outputs are never allocated
     * beyond a few elements, so qr_set_out checks ranks and dims but not the tensor size limit */
    int shapes_only;
    /* by value id of the node's graph: the value is the same on every run of the executor
     * (qr_kinput_fixed); NULL: only constants are */
    const unsigned char *fixed;
    /* Rows [band0, band1) of output 0 alone (ops whose def has band; rows of the axes before the
     * last two, an NHWC output's n * H + h), within one image; band1 == 0: all of it. */
    int64_t band0, band1;
    /* Operands read or written in place with strides (MatMul only: a Transpose the executor folded
     * into it, fold_transposes): in_strides[i] the element strides of input i's dims (in[i] has
     * the Transpose's output shape, its data the Transpose's input), out_strides those output 0
     * is written with (its buffer the Transpose's output's); NULL: contiguous. */
    const int64_t *in_strides[2];
    const int64_t *out_strides;
    /* with a band: 1 when input 0 is a band chain's link, its rows just made in a window that
     * stays in the caches (runtime/exec.c bands_image), so no kernel need fetch them ahead */
    int band_in0_cached;
    /* 1 when every value's shape is the executor's plan's, the same on every run until its input
     * shapes change (no shape depends on data): a run plan may be kept (qr_kplan_get) */
    int plan_static;
} qr_kctx;

/* How an op that computes a band of output 0's rows (qr_kctx.band0/1) reads input 0: per image
 * (axis 0 of both), output rows oy read input rows oy * stride - pad + [0, span] inside [0, in_rows).
 * in_rows 0: input 0 is not in rows a band chain's node makes (the node can only start a chain). */
typedef struct qr_band_geom {
    int64_t images, out_rows, in_rows, stride, pad, span;
} qr_band_geom;

/* A node's buffer that lives as long as its executor (which frees it). */
typedef struct qr_kcache {
    void *data;
    size_t bytes;
    const char *what; /* qr_kcache_get's: what the kernel calls it (an executor sharing checks it) */
    void *keep;       /* qr_kkeep_get's buffer, its size and name */
    size_t keep_bytes;
    const char *keep_what;
    void *plan;       /* qr_kplan_get's buffer, its size and name, and whether it holds a plan */
    size_t plan_bytes;
    const char *plan_what;
    int plan_ready;
    unsigned plan_epoch; /* qr_options_epoch when it was made */
    uint64_t plan_shapes; /* the input shapes it was made for, as one number (op.c plan_shapes_key) */
} qr_kcache;

typedef qr_status (*qr_op_fn)(qr_kctx *k);

/* Op rows are positional and their trailing fields are optional (zero when
 * left out, as C guarantees): rows written before a field existed stay valid. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define QR_INPLACE_VIEW 2

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
     * shape: the kernel reads each element before writing the same index.
     * QR_INPLACE_VIEW: output 0 is input 0's bytes under another shape
     * (Reshape): it may share the buffer whenever the element counts match,
     * and the kernel then copies nothing. */
    int inplace;
    /* The inputs, checked in one place (qr_op_check_inputs) before infer ever
     * sees them, so no kernel has to guard against an input that is absent or
     * of the wrong kind. Space separated, one token per input position:
     *     name[?][:TYPES][RANK]
     * `?` marks an input that may be left out (""); any other input the node
     * lists must be present. TYPES is any of f (float types), i (integers), x
     * (int32/int64 indices), q (uint8/int8), b (bool), * (any); RANK is "4",
     * "1-2" or "3+". A last token ending in "..." repeats for every further
     * input. NULL: the first min_in inputs are required, nothing else checked. */
    const char *ins;
    /* The multiply-accumulates one run does, for ops qr_op_macs does not know (a driver's fused
     * convolution); NULL: qr_op_macs's cost model by op name. */
    double (*macs)(const qr_kctx *k);
    /* Whether a successful run of this node writes every element of every output, so the
     * executor need not zero them first (qr_op_writes_all for ops that always do); NULL: no.
     * poison=1 fills such outputs with 0xA5 bytes instead, for tests to catch an element
     * left unwritten. */
    int (*writes_all)(const qr_kctx *k);
    /* run applies k->act to output 0 when it is f32 (the executor may then fuse a Relu or Clip) */
    int act;
    /* run adds k->bias to output 0's rows when it is f32 (the executor may then fuse an Add of a
     * constant vector of output 0's last dim) */
    int bias;
    /* run passes f32 input 0 through k->pre_gelu first when it is set (the executor may then fuse a
     * GELU chain whose one reader the node is, fuse_gelu) */
    int gelu_in;
    /* output element i depends on element i of each input (after broadcasting) alone, and run
     * takes inputs and output of any shapes infer accepts (the executor may run chains of such
     * nodes by tiles, exec_tiles.h) */
    int pointwise;
    /* 1 when this node can run a band of output 0's rows at a time (k->band0/1), its geometry in
     * *g (the executor may then run a chain of such nodes band by band, each band's rows in cache
     * from one node to the next); called after infer. NULL: never. */
    int (*band)(qr_kctx *k, qr_band_geom *g);
    /* 1 when node n's input j, the same value as its input 0, is read for its type and shape
     * alone (a band's rows of input 0 are all it may then read of it); user: the executor's
     * kernel_user (qr_exec_opts). NULL: never */
    int (*band_in0_typed)(const qr_node *n, int j, const void *user);
    /* How node n reads its input j with respect to the samples along input 0's first axis
     * (qr_sample_use; runtime/samples.c runs a batch in parts where every node keeps them apart);
     * j = 0 says it for the node as a whole (its attributes may mix samples). NULL: it mixes
     * them, unless pointwise (element by element: samples.c's own rule). */
    int (*samples)(const qr_node *n, int j);
} qr_op_def;

typedef enum qr_sample_use {
    QR_SAMPLES_MIXED = 0, /* the node mixes samples */
    QR_SAMPLES_EACH,      /* read sample by sample (input 0; another input then batched as output 0) */
    QR_SAMPLES_WHOLE      /* the same whole input for every sample (a weight): must be a constant */
} qr_sample_use;

/* A qr_op_def.samples for ops that compute each sample of input 0 alone and read every other
 * input whole (convolutions, pools, Clip's bounds). */
int qr_op_samples_window(const qr_node *n, int j);

/* Always 1: a qr_op_def.writes_all for ops whose every run writes all of their outputs. */
int qr_op_writes_all(const qr_kctx *k);

/* Checks a node's inputs against its op's `ins`: presence only (graph load,
 * before types are known), or presence, types and ranks (before infer). */
qr_status qr_op_check_present(const qr_node *n, qr_error *e);
qr_status qr_op_check_inputs(const qr_kctx *k);
/* qr_op_check_inputs, then the op's infer: what every caller of infer uses. */
qr_status qr_op_infer(qr_kctx *k);

/* NULL when the op is unknown. The core table: ONNX's ops and the runtime's own. */
const qr_op_def *qr_op_find(const char *domain, const char *name);
/* The same lookup in another table (ended by a row without a name): a layer's private ops. */
const qr_op_def *qr_op_find_in(const qr_op_def *table, const char *domain, const char *name);
/* Every registered op, for listings and tests; returns the count. */
int qr_op_list(const qr_op_def *const **defs);

/* A buffer of bytes for what a kernel derives from its node's constant inputs (packed or
 * transposed weights, folded biases), made once and kept across the executor's runs: *fresh is 1
 * when the caller must fill it (the first run), 0 when it holds what the caller wrote before.
 * The graph does not change while an executor exists, so neither do its constants. Without an
 * executor's cache (k->cache NULL) it is fresh every time. Checked against the memory budget
 * like qr_kscratch; NULL with the error set. Give it back with qr_kcache_done.
 * An executor keeps at most k->cache_max bytes so (QR_KCACHE_MAX when 0: the quantizer's
 * measuring executors): past it, a node's buffer is made afresh on every run and freed after it,
 * as without a cache. A model's weights packed once more would double its memory (the f32
 * executor's packed B alone is the size of the weights), which a large model cannot afford in
 * the quantizer's several executors; the products are the same, only the packing is repeated.
 * An inference executor (runtime/api.c) takes a quarter of its memory budget instead: a
 * repacking on every run cost ViT-B/32's int8 graph (88 MB of packed weights) a third of its
 * time. */
#define QR_KCACHE_MAX ((size_t)64 << 20)
void *qr_kcache_get(qr_kctx *k, size_t bytes, const char *what, int *fresh);
void qr_kcache_done(qr_kctx *k, void *p);
/* A second buffer of the node's, kept across the executor's runs for what a kernel derives from
 * inputs that may change between runs, and so checks itself before it reuses it (a key of what it
 * was made from, kept in it: the channel tables of quantizer/intgraph.c). Never shared with another
 * executor. *fresh is 1 when the buffer is new (contents undefined: the first run, another size or
 * what, or no room), 0 when it holds what the kernel left in it on the node's last run. 64-byte
 * aligned. Counted with qr_kcache_get's bytes against the executor's cap; past it (or without an
 * executor's cache) a fresh one from the workspace every run. NULL with the error set. Never freed
 * by the kernel. */
void *qr_kkeep_get(qr_kctx *k, size_t bytes, const char *what, int *fresh);
/* A node's run plan: what its kernel derives from the node's attributes and the shapes of the
 * executor's current plan (its geometry, attributes parsed, kernels looked up, flags of which
 * inputs are fixed), made on the first run of a set of input shapes and reused until they change
 * (the executor then drops every node's plan) or the kernels' choices do (qr_options_epoch).
 * Looking all that up on every run was about a sixth of a small CNN's run at batch 1. *fresh 1:
 * the caller fills it (contents undefined), then says qr_kplan_ready; 0: it holds what the caller
 * filled on an earlier run of these shapes. A plan never holds what may change between runs of
 * one shape: data, data pointers (a band's input moves), a band's rows, a kernel still being
 * compiled (NULL). Without an executor's static plan (no cache, or shapes that depend on data)
 * a fresh one from the workspace every run. Its own executor's only (never shared); made and read
 * on the thread that runs the node (one node at a time), so two threads need no lock. 64-byte
 * aligned; NULL with the error set. A kept plan asked for on inputs of other shapes than it was made
 * for (the executor failed to drop it) is a programmer error: qr_kplan_get aborts with a message
 * rather than let the kernel run on the other shapes' geometry (stop 44: a run that never ended). */
void *qr_kplan_get(qr_kctx *k, size_t bytes, const char *what, int *fresh);
/* The plan qr_kplan_get handed out fresh (p) is filled: later runs of these shapes may reuse it. */
void qr_kplan_ready(qr_kctx *k, const void *p);

/* The kernels' workspace: scratch for one run of one node, handed out from a buffer the
 * executor keeps across runs (its nodes run one at a time). What a node asked for beyond the
 * buffer comes from malloc for that run, and the buffer grows to the node's whole need when the
 * node ends: from the second run of an executor on, kernels cost no malloc and no fresh pages. */
typedef struct qr_kwork_arena {
    unsigned char *base;
    size_t cap, used;     /* used: the current node's bytes in base */
    size_t need;          /* the current node's bytes in all, aligned */
    struct qr_kwork_spill *spill; /* this node's allocations past base */
    size_t high;          /* the largest need of any node so far */
    long spills;          /* allocations past base since qr_kwork_reset_stats */
} qr_kwork_arena;

/* Scratch of rows x cols elements of elem bytes for this run of k's kernel (contents undefined,
 * 64-byte aligned), valid until the kernel returns: never freed by the kernel. Checked against
 * the memory budget like qr_kscratch; NULL with the error set. Only on the thread that runs the
 * kernel (not inside qr_parallel_for's workers): a kernel takes its threads' slots at once. */
void *qr_kwork(qr_kctx *k, int64_t rows, int64_t cols, size_t elem, const char *what);
/* Whether qr_kwork(k, rows, cols, elem, ...) now would stay within the memory budget (always, without
 * one): asked before workspace a kernel can do without (a faster path's copy of an operand), so that
 * the budget turns that path off instead of failing the node. */
int qr_kwork_fits(const qr_kctx *k, int64_t rows, int64_t cols, size_t elem);
/* Runs k's kernel with its workspace: the executor's (k->work), or one for this run alone. */
qr_status qr_op_run(qr_kctx *k);
void qr_kwork_arena_free(qr_kwork_arena *a);
/* Whether input i of k's node is a graph constant (what qr_kcache_get may be derived from). */
int qr_kinput_const(const qr_kctx *k, int i);
/* Whether input i is the same on every run of k's executor: a constant, or made from constants
 * alone by the nodes before (a weight's DequantizeLinear in the quantizer's QDQ graphs), which
 * compute the same bits each run. What a kernel derives from it may be kept in qr_kcache_get as
 * from a constant. An observer that rewrites such a value (qr_exec_opts) must write the same on
 * every run; the quantizer's write the value's f32 value or its rounding, which are. */
int qr_kinput_fixed(const qr_kctx *k, int i);

/* The multiply-accumulates one run of k's node did, from its tensors: convolutions and matrix
 * products (their GMAC/s in a profile); 0 for every other op. */
double qr_op_macs(const qr_kctx *k);

/* Error helper: "node 'n' (Op): message" is added by the executor; ops just say what is wrong. */
#define QR_KERR(k, ...) qr_errorf((k)->err, __VA_ARGS__)

/* Scratch of rows x cols elements of elem bytes for a kernel (im2col and the like,
 * which can be far larger than the node's tensors): checked against the memory
 * budget before it is allocated. NULL with the error set (naming what and the
 * size; the executor adds the node) when it does not fit or malloc fails; free with free(). */
void *qr_kscratch(qr_kctx *k, int64_t rows, int64_t cols, size_t elem, const char *what);

#endif
