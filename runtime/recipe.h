/* Compiled recipe modules: the one interface between code compiled from QRL
 * and the runtime. The compiler (compiler/jit*.c) produces a shared object
 * whose entry point registers the module's functions and calibrators through
 * qrl_imports; JIT code reaches the runtime only through that same table (a
 * recipe cannot call anything else, so it cannot open files or touch memory
 * outside the tensors and state it is given). A cached module runs without
 * the front end: everything the runtime needs is registered by the entry.
 *
 * The structs below are laid out identically by the JIT (field order and
 * types); changing one means changing compiler/jit.c (its import table, IMP_ in jit_int.h) and
 * QR_RECIPE_ABI. */
#ifndef QR_RECIPE_H
#define QR_RECIPE_H

#include <stdint.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"

#define QR_RECIPE_ABI 24

/* Limits of the language: the checker (compiler/check_*.c) reports a recipe over one of them
 * at its file:line:col, and the runtime sizes its buffers by them. */
#define QRL_MAX_PARAMS 64         /* parameters of a function, kernel or calibrator */
#define QRL_PATTERN_MAX_NODES 16  /* nodes a pattern's match clause lists */
#define QRL_PATTERN_MAX_VALUES 32 /* values a pattern names (outputs, inputs) */
#define QRL_PATTERN_MAX_FORMS 64  /* a pattern's op alternatives, all its nodes together */
#define QRL_PATTERN_MAX_INPUTS 64 /* inputs one op form of a pattern lists */
#define QRL_AFFINE_MAX_INPUTS 16  /* inputs an affine rule names */
#define QRL_MAX_HIST_BINS (1 << 24) /* a histogram's bins: even, 2 to this (runtime/histogram.h) */

typedef union qrl_scalar {
    int64_t i; /* integer and bool parameters */
    double f;  /* float parameters */
} qrl_scalar;

/* T[]: a view of len elements. */
typedef struct qrl_array {
    void *data;
    int64_t len;
} qrl_array;

/* tensor<T>: the element type is checked by the runtime before a call. */
typedef struct qrl_tview {
    void *data;
    int64_t numel;
    int64_t rank;
    int64_t dims[QR_MAX_DIMS];
} qrl_tview;

typedef struct qrl_qtype {
    int64_t bits, qmin, qmax, axis; /* axis -1: per tensor */
    int64_t is_signed, narrow;
    int64_t symmetric; /* the recipe's `symmetric` modifier: real 0 at the middle of the range */
} qrl_qtype;

typedef struct qrl_qparams {
    double scale;
    int64_t zero;
} qrl_qparams;

/* Per-call context: the import table and the error JIT code raises. */
typedef struct qrl_rt qrl_rt;
typedef struct qrl_module qrl_module;
/* A candidate match of a pattern, as its where-predicate sees it (runtime-defined). */
typedef struct qrl_match qrl_match;

/* What a trap reports. */
enum {
    QRL_TRAP_INDEX = 1,    /* a = index, b = length */
    QRL_TRAP_DIVZERO = 2,
    QRL_TRAP_RANK = 3,     /* a = indices given, b = rank */
    QRL_TRAP_HIST = 4,     /* histogram misuse: a = detail code */
    QRL_TRAP_NOMEM = 5,
    QRL_TRAP_TIME = 6,     /* a = the limit in ms */
    QRL_TRAP_SHAPE = 7,    /* a kernel's declared shape: a = the dimension, b = what the shape says */
    QRL_TRAP_SHAPE_RANK = 8, /* a = the tensor's rank, b = the declared shape's (-n: at least n) */
};

typedef struct qrl_imports {
    int64_t abi; /* QR_RECIPE_ABI */
    /* Errors: records the first one; the JIT function then returns at once. */
    void (*trap)(qrl_rt *rt, int64_t code, const char *file, int64_t line, int64_t col, int64_t a, int64_t b);
    /* A loop ran out of fuel (rt->fuel < 0): more fuel, or a QRL_TRAP_TIME trap past the time limit. */
    void (*refuel)(qrl_rt *rt, const char *file, int64_t line, int64_t col);
    /* Math that is not inlined. */
    double (*exp)(double);
    double (*log)(double);
    double (*log2)(double);
    double (*tanh)(double);
    double (*erf)(double);
    double (*pow)(double, double);
    /* Reductions over a tensor<f32> (NaN ignored; +-inf for an empty tensor). */
    double (*tensor_min)(const qrl_tview *x);
    double (*tensor_max)(const qrl_tview *x);
    double (*tensor_absmax)(const qrl_tview *x);
    double (*tensor_sum)(const qrl_tview *x);
    /* ONNX (numpy) broadcasting: the flat index of the element of a that element i of y reads; -1 when
     * a's shape does not broadcast to y's. */
    int64_t (*broadcast_index)(const qrl_tview *a, const qrl_tview *y, int64_t i);
    /* Calibrator state: zeroed memory and histograms owned by the state. */
    void *(*state_alloc)(qrl_rt *rt, int64_t bytes);
    void *(*hist_new)(qrl_rt *rt, int64_t bins);
    void (*hist_add)(qrl_rt *rt, void *h, const qrl_tview *x, int64_t is_abs);
    void (*hist_merge)(qrl_rt *rt, void *h, const void *other);
    double (*hist_quantile)(const void *h, double q);
    double (*hist_bin)(const void *h, int64_t i);
    double (*hist_edge)(const void *h, int64_t i);
    double (*hist_count)(const void *h);
    double (*hist_lo)(const void *h);
    double (*hist_hi)(const void *h);
    double (*hist_width)(const void *h);
    int64_t (*hist_bins)(const void *h);
    double (*hist_min)(const void *h); /* the smallest value added (before |x|) */
    double (*hist_max)(const void *h);
    /* Registration, called by the module's entry point. is_kernel: 0 a function, 1 a kernel, 2 the
     * generic entry (qrl_kernel_call_fn) of the kernel just added. result: its type, as a parameter's
     * (kind a qr_param_kind, elem a qr_dtype; QR_PARAM_VOID when it returns nothing). */
    void (*add_fn)(qrl_module *m, const char *name, void *fn, int64_t is_kernel, int64_t result_kind,
                   int64_t result_elem);
    void (*add_calibrator)(qrl_module *m, const char *name, int64_t nparams, int64_t state_bytes, void *defaults,
                           void *init, void *observe, void *merge, void *solve);
    /* kind: a qr_cal_param_kind */
    void (*add_param)(qrl_module *m, const char *calibrator, const char *name, int64_t kind);
    /* The next parameter of the function or kernel just added (add_fn, is_kernel 0 or 1), in order:
     * kind a qr_param_kind, elem a qr_dtype (the scalar's type, or the array's or tensor's elements). */
    void (*add_fn_param)(qrl_module *m, const char *name, int64_t kind, int64_t elem);
    /* Pattern predicates: value v of the candidate match (index in the pattern's value table). */
    int64_t (*value_rank)(const qrl_match *mt, int64_t v);             /* -1: unknown */
    int64_t (*value_dim)(const qrl_match *mt, int64_t v, int64_t axis); /* -1: unknown */
    int64_t (*value_const)(const qrl_match *mt, int64_t v);
    int64_t (*value_present)(const qrl_match *mt, int64_t v);
    double (*value_scalar)(const qrl_match *mt, int64_t v); /* a one-element constant's value; NaN otherwise */
    int64_t (*value_op_is)(const qrl_match *mt, int64_t v, const char *op); /* v's producer is op */
    /* Attributes of v's producer; v = -1: the node an affine rule is asked about. */
    int64_t (*attr_int)(const qrl_match *mt, int64_t v, const char *name, int64_t def);
    double (*attr_float)(const qrl_match *mt, int64_t v, const char *name, double def);
    int64_t (*attr_str_is)(const qrl_match *mt, int64_t v, const char *name, const char *def, const char *lit);
    /* An int-list attribute as an i64[] (empty when absent), valid while the match is. */
    qrl_array *(*attr_ints)(const qrl_match *mt, int64_t v, const char *name);
    /* Patterns. where: int64_t (*)(qrl_rt *, const qrl_match *), NULL = always; numerics: the recipe
     * numerics its kernels implement ("onnx", "tflite", ...; "": any); priority: patterns are tried
     * highest first (-1: the pattern's number of nodes, so larger ones fuse first); loc: the pattern's
     * "file:line:col", for messages. */
    void (*add_pattern)(qrl_module *m, const char *name, void *where, const char *numerics, int64_t priority,
                        const char *loc);
    /* role: a qr_role_kind; axis for weight(axis = N) (-1: per tensor); a, b: the value
     * indices of bias(a, b) / same(a) (-1: none). */
    void (*add_pattern_value)(qrl_module *m, const char *pattern, const char *name, int64_t role, int64_t axis,
                              int64_t a, int64_t b);
    /* One op form of a pattern node (ops: "Conv|ConvTranspose"); its inputs follow, in order, one
     * add_pattern_node_input each: value the index of the value it binds (-1: any input), optional 1
     * when the input may be absent. */
    void (*add_pattern_node)(qrl_module *m, const char *pattern, int64_t out, const char *ops);
    void (*add_pattern_node_input)(qrl_module *m, const char *pattern, int64_t value, int64_t optional);
    /* One per lower clause, in order; its arguments follow, one add_pattern_lower_arg each. consts:
     * void (*)(qrl_rt *, const qrl_match *, double *out), the constants of all lower clauses in order. */
    void (*add_pattern_lower)(qrl_module *m, const char *pattern, const char *kernel, int64_t out, void *consts);
    /* The next argument of the pattern's last lower clause: kind a qr_lower_arg_kind, index the
     * value's in the pattern's value table, or the constant's position in what consts fills. */
    void (*add_pattern_lower_arg)(qrl_module *m, const char *pattern, int64_t kind, int64_t index);
    /* Affine rules, in source order (the first whose where holds applies). kind: a
     * qr_affine_kind. where: qrl_where_fn (the node's inputs, then its output; attributes through v = -1);
     * qparams (fixed), elem (a body), table: the qrl_aff_*_fn types below; NULL when absent.
     * in_f32: the op runs on real values between Q/DQ borders. loc "file:line:col" and cond (the
     * where clause's source) name the rule in messages. */
    void (*add_affine)(qrl_module *m, const char *op, int64_t ninputs, int64_t kind, void *where, void *qparams,
                       void *elem, void *table, int64_t in_f32, const char *loc, const char *cond);
    /* Recipes. fallback: qrl_fallback_fn, NULL = never; on_outputs: its condition reads output_sqnr. */
    void (*add_recipe)(qrl_module *m, const char *name, void *fallback, int64_t on_outputs);
    /* A setting: key = type mods by calibrator(args). mods: QR_MOD_* flags; args: void (*)(qrl_rt *,
     * double *out) filling the call's arguments in order, whose names follow, one add_setting_arg
     * each (the calibrator parameter each binds). Value-only settings (numerics = onnx,
     * accumulate = i32) give it in type. */
    void (*add_setting)(qrl_module *m, const char *recipe, const char *key, const char *type, int64_t mods,
                        const char *calibrator, void *args);
    void (*add_setting_arg)(qrl_module *m, const char *recipe, const char *name);
    void (*add_use)(qrl_module *m, const char *recipe, const char *name);
    /* The kernel just added is a tile kernel (compiler/elementwise.h) whose rows are channels of
     * the axis its `along` names: parameter `param` of the kernel (param >= 0), else `value`. */
    void (*set_tile_axis)(qrl_module *m, int64_t param, int64_t value);
    /* x.quantile(q): the value below which a fraction q (clamped to 0..1) of x's values lie, as
     * numpy's nanquantile (linear interpolation between the sorted values, NaN ignored); 0 when x
     * has no values. Fails (out of memory) through rt. */
    double (*tensor_quantile)(qrl_rt *rt, const qrl_tview *x, double q);
    /* The kernel just added is pointwise: the compiler proved (compiler/pointwise.h) that, with
     * all its tensor operands of one shape, element i of what it writes depends only on element
     * i of what it reads and on its other parameters. */
    void (*set_pointwise)(qrl_module *m);
    /* The kernel just added, a channels-last epilogue kernel, has a vector form: prog, the
     * program of compiler/vecmap.h, text that lives as long as the module. */
    void (*set_vector_epilogue)(qrl_module *m, const char *prog);
    /* Pattern predicate v.dtype == "f32": v's element type is the one named ("f32", "i64", ... as
     * `qrl dump` prints them); 0 for an absent value. */
    int64_t (*value_dtype_is)(const qrl_match *mt, int64_t v, const char *dtype);
    /* Pattern predicate v.read_by == "Softmax": every node that reads v is that op, at least one,
     * and v is not a graph output. */
    int64_t (*value_read_by)(const qrl_match *mt, int64_t v, const char *op);
    /* Pattern predicate v.feeds == "LayerNormalization": at least one node reading v is that op. */
    int64_t (*value_feeds)(const qrl_match *mt, int64_t v, const char *op);
    /* Transforms (a graph rewrite before calibration: channel scales moved from a value into its
     * readers' weights). defaults: qrl_cal_defaults_fn for its nparams parameters, which follow one
     * add_transform_param each (kind a qr_cal_param_kind); where: qrl_where_fn of its match, whose
     * values and nodes follow through add_pattern_value/add_pattern_node under the transform's name;
     * scale: qrl_transform_scale_fn; loc its "file:line:col". */
    void (*add_transform)(qrl_module *m, const char *name, int64_t nparams, void *defaults, void *where, void *scale,
                          const char *loc, int64_t stats);
    void (*add_transform_param)(qrl_module *m, const char *transform, const char *name, int64_t kind);
    /* The kernel just added declares its output's shape (tensor<T>[.., M, N]): one call per entry,
     * kind a qr_out_dim_kind (param and at as qr_out_dim says). */
    void (*add_out_dim)(qrl_module *m, int64_t kind, int64_t param, int64_t at);
    /* The next field of the calibrator just added's state, in order (its typed layout, which
     * qr_calib_pack follows): kind a qr_state_kind, at its offset in the state, elem_bytes the size
     * of an array's elements (0 otherwise). */
    void (*add_state)(qrl_module *m, const char *calibrator, int64_t kind, int64_t at, int64_t elem_bytes);
} qrl_imports;

struct qrl_rt {
    const qrl_imports *imp;
    int64_t failed;
    int64_t fuel; /* loop iterations before the next look at the clock */
    /* runtime-private below */
    double deadline_ms;
    char msg[512];
    void *owner; /* calibrator instance whose state allocations this call makes */
};

/* Function types of patterns, affine rules and recipes. */
typedef int64_t (*qrl_where_fn)(qrl_rt *rt, const qrl_match *mt);
typedef void (*qrl_consts_fn)(qrl_rt *rt, const qrl_match *mt, double *out);
typedef void (*qrl_aff_qparams_fn)(qrl_rt *rt, const qrl_match *mt, const qrl_qtype *t, double *scale,
                                   int64_t *zero);
typedef int32_t (*qrl_aff_elem_fn)(qrl_rt *rt, const qrl_match *mt, const int32_t *x, const int32_t *zero,
                                   const double *scale);
typedef double (*qrl_aff_table_fn)(qrl_rt *rt, const qrl_match *mt, double v);
/* sqnr: a quantized tensor's own SQNR (its layer's error with f32 inputs); output_sqnr: the
 * model's outputs' SQNR with everything still quantized; output_cosine: their cosine similarity to
 * f32's; output_agreement: the share of output rows (the last axis) whose largest element is where
 * f32's is (top-1 agreement of a classifier, per token of a sequence model). */
typedef int64_t (*qrl_fallback_fn)(qrl_rt *rt, double sqnr, double output_sqnr, double output_cosine,
                                   double output_agreement);
typedef void (*qrl_args_fn)(qrl_rt *rt, double *out);
/* A transform's scale: the factor s channel j of the matched value is divided by (and its readers'
 * weights for channel j multiplied by), from the channel's statistics: act, its largest |value| over
 * the calibration samples; weight, the largest |weight| its readers apply to it; source, the largest
 * |weight| of its producer's channel j. Only those the function names (stats, QR_TRANSFORM_*) are
 * measured; the others arrive as NaN. */
typedef double (*qrl_transform_scale_fn)(qrl_rt *rt, const qrl_scalar *params, double act, double weight,
                                         double source);
/* A transform's bias function instead (QR_TRANSFORM_CORRECTS in its stats): the new bias of output
 * channel o of a matched layer from bias, its bias now (0 without one), and error, the expected
 * error quantizing the layer's weight adds to that output, sum over its inputs i of
 * (W_q - W)[o, i] E[x_i]. The same three f64 slots as scale: bias in act's, error in weight's. */
typedef double (*qrl_transform_bias_fn)(qrl_rt *rt, const qrl_scalar *params, double bias, double error,
                                        double unused);
enum {
    QR_TRANSFORM_ACT = 1, QR_TRANSFORM_WEIGHT = 2, QR_TRANSFORM_SOURCE = 4, /* scale(...)'s statistics */
    QR_TRANSFORM_BIAS = 8, QR_TRANSFORM_ERROR = 16,                         /* bias(...)'s */
    QR_TRANSFORM_CORRECTS = 32,                                             /* the function is bias(...) */
    QR_TRANSFORM_ROUNDS = 64,                                               /* the function is flip(...) */
    QR_TRANSFORM_STATS_ALL = 127
};
/* A transform's flip function instead (QR_TRANSFORM_ROUNDS in its stats): a rounding optimizer's
 * decision whether one weight of output channel o of a matched layer moves to its other rounding
 * (down instead of up, or up instead of down), a positive answer moving it. sweep: how many sweeps
 * over the channel's weights came before this one (0 first); change: what the move changes the
 * channel's output error E[(dw . x)^2] by (negative: smaller), dw = W_q - W its weights' rounding
 * errors, x the layer's input rows on the calibration samples; mean: what it changes (dw . E[x])^2
 * by, the part of the error a bias correction removes; size: the move's own term step^2 E[x_i^2]. */
typedef double (*qrl_transform_flip_fn)(qrl_rt *rt, const qrl_scalar *params, double sweep, double change,
                                        double mean, double size);

/* Entry point every module exports under this name. */
#define QRL_MODULE_ENTRY "qrl_module_entry"
typedef void (*qrl_module_entry_fn)(qrl_module *m, const qrl_imports *imp);

/* Calibrator function types (state is the module's own layout). */
typedef void (*qrl_cal_defaults_fn)(qrl_rt *rt, qrl_scalar *params);
typedef void (*qrl_cal_init_fn)(qrl_rt *rt, void *state, const qrl_scalar *params);
typedef void (*qrl_cal_observe_fn)(qrl_rt *rt, void *state, const qrl_scalar *params, const qrl_tview *x);
typedef void (*qrl_cal_merge_fn)(qrl_rt *rt, void *state, const void *other, const qrl_scalar *params);
typedef void (*qrl_cal_solve_fn)(qrl_rt *rt, const void *state, const qrl_scalar *params, const qrl_qtype *t,
                                 qrl_qparams *out);

/* ------------------------------------------------------------ runtime side */

/* A kernel's generic entry: args[i] points at scalar parameter i, or is
 * tensor/array parameter i itself (a qrl_tview * or qrl_array *). */
typedef void (*qrl_kernel_call_fn)(qrl_rt *rt, void **args);

/* A function's or kernel's parameter, or (without a name) its result, as the compiler declared it:
 * what C callers check a function's type against (qr_module_fn_typed) and the quantizer a
 * lowering's arguments, and what its messages name. */
typedef enum qr_param_kind {
    QR_PARAM_SCALAR,  /* passed by value: elem bool, i8, u8, i16, u16, i32, i64, f32 or f64 */
    QR_PARAM_ARRAY,   /* elem[]: a qrl_array * (elem as a scalar's) */
    QR_PARAM_TENSOR,  /* tensor<elem>: a qrl_tview * (elem a number, not bool) */
    QR_PARAM_QTYPE,   /* a qrl_qtype, by value; elem QR_UNDEF */
    QR_PARAM_QPARAMS, /* a qrl_qparams, by value; elem QR_UNDEF */
    QR_PARAM_VOID,    /* a result only: the function returns nothing; elem QR_UNDEF */
    QR_PARAM_KIND_COUNT
} qr_param_kind;

typedef struct qr_param_desc {
    const char *name; /* NULL: a result */
    qr_param_kind kind;
    qr_dtype elem; /* the scalar's type, or the array's or tensor's elements */
} qr_param_desc;

/* An entry of a kernel's declared output shape. REST: the leading dims ('..') of input parameter
 * `param`, whose shape declares `at` dims after its '..'; consecutive REST entries are one '..',
 * the broadcast of those inputs' leading dims. INT: the dim `at`. DIM: dimension `at` of input
 * parameter `param` (from the end when negative). */
typedef enum qr_out_dim_kind { QR_ODIM_REST, QR_ODIM_INT, QR_ODIM_DIM } qr_out_dim_kind;
typedef struct qr_out_dim {
    qr_out_dim_kind kind;
    int param;
    int64_t at;
} qr_out_dim;

typedef struct qr_fn_desc {
    const char *name;
    void *fn; /* its C function: (qrl_rt *, the parameters in order) returning the result */
    int is_kernel;
    qrl_kernel_call_fn call; /* kernels: the generic entry */
    qr_param_desc result;    /* kernels: QR_PARAM_VOID */
    qr_param_desc *params;   /* in order */
    int nparams;
    /* tile kernels: the channel axis of their rows, parameter tile_axis_param's value when it is
     * >= 0, else tile_axis (negative: from the end); is_tile says the kernel is one */
    int is_tile, tile_axis_param;
    int64_t tile_axis;
    /* kernels: proven pointwise (set_pointwise), so a permutation of the elements of all its
     * tensor operands, of one shape, commutes with it (NCHW or NHWC alike); 0: not proven */
    int is_pointwise;
    /* channels-last epilogue kernels: the vector form of their value (compiler/vecmap.h), or NULL */
    const char *vector_epilogue;
    /* kernels: the output's declared shape, n_out_dims entries (0: none declared) */
    qr_out_dim *out_dims;
    int n_out_dims;
} qr_fn_desc;

/* A calibrator parameter's kind (add_param). */
typedef enum qr_cal_param_kind { QR_CAL_INT, QR_CAL_FLOAT, QR_CAL_BOOL } qr_cal_param_kind;

typedef struct qr_cal_param {
    const char *name;
    qr_cal_param_kind kind;
} qr_cal_param;

/* A calibrator state field's kind (add_state): an 8-byte scalar slot, a qrl_array of state memory,
 * or a histogram (a pointer to one the runtime owns). */
typedef enum qr_state_kind { QR_STATE_SCALAR, QR_STATE_ARRAY, QR_STATE_HIST } qr_state_kind;

typedef struct qr_state_field {
    qr_state_kind kind;
    int64_t at, elem_bytes;
} qr_state_field;

typedef struct qr_cal_desc {
    const char *name;
    qr_state_field *fields; /* the state's typed layout */
    int nfields;
    int nparams, max_params; /* registered; declared (add_calibrator) */
    qr_cal_param *params;
    int64_t state_bytes;
    qrl_cal_defaults_fn defaults;
    qrl_cal_init_fn init;
    qrl_cal_observe_fn observe;
    qrl_cal_merge_fn merge;
    qrl_cal_solve_fn solve;
} qr_cal_desc;

/* The candidate the matcher hands a where-predicate: the graph values bound
 * to the pattern's values, by index (NULL: an optional input left out). An
 * affine rule sees its node's inputs and output, and the node itself. */
#define QRL_MATCH_ARRAYS 8
struct qrl_match {
    const qr_graph *g;
    qr_value *const *values;
    int nvalues;
    const qr_node *node;  /* affine rules: the node (attr with v = -1) */
    qrl_array *arrays;    /* room for QRL_MATCH_ARRAYS int-list attributes (NULL: none) */
    int *narrays; /* slots in use; -1: a rule read more than fit (qr_match_status) */
};

/* What a pattern's quantize clause makes a value: none (it stays f32), activation, output,
 * weight(axis), bias(x, w), same(x), real (the lowered output, which the kernel writes in f32
 * for float consumers: an island's input that is never rounded to integers), or dynamic (an input
 * quantized at run time, u8 over its own range: axis 0 per tensor, 1 per row of its last axis). */
typedef enum qr_role_kind {
    QR_ROLE_NONE,
    QR_ROLE_ACTIVATION,
    QR_ROLE_OUTPUT,
    QR_ROLE_WEIGHT,
    QR_ROLE_BIAS,
    QR_ROLE_SAME,
    QR_ROLE_REAL,
    QR_ROLE_DYNAMIC,
    QR_ROLE_COUNT
} qr_role_kind;

/* "activation", "output", ...; "" for QR_ROLE_NONE. */
const char *qr_role_name(qr_role_kind r);

typedef struct qr_pat_value {
    const char *name;
    qr_role_kind role;
    int axis, a, b; /* weight's axis (dynamic: 1 per row, 0 per tensor); bias(a, b) and same(a): the values'
                     * indices in the pattern */
} qr_pat_value;

/* An input of a pattern node: the value it binds, or any input at all. */
typedef struct qr_pat_input {
    int value;    /* the index in the pattern's values; -1: any input ("_") */
    int optional; /* it may be absent (b? in the pattern) */
} qr_pat_input;

typedef struct qr_pat_node {
    int out;
    const char *ops;       /* "Conv|ConvTranspose" */
    qr_pat_input *inputs;  /* in the op's input order */
    int ninputs;
} qr_pat_node;

/* A lowering's argument: a value of the pattern, or a constant the pattern's consts computes. */
typedef enum qr_lower_arg_kind { QR_LOWER_VALUE, QR_LOWER_CONST } qr_lower_arg_kind;

typedef struct qr_lower_arg {
    qr_lower_arg_kind kind;
    int index; /* the value's in the pattern's values, or the constant's in what consts fills */
} qr_lower_arg;

typedef struct qr_pat_lower {
    const char *kernel;
    qr_lower_arg *args; /* in the order the kernel takes them, before its output */
    int nargs;
    int out; /* the value the kernel computes */
} qr_pat_lower;

typedef struct qr_pattern {
    const char *name;
    const char *loc; /* "file:line:col" of its declaration */
    qrl_where_fn where;
    const char *numerics; /* "": any recipe's */
    int priority;         /* tried highest first; -1: its number of nodes */
    qr_pat_value *values;
    int nvalues;
    qr_pat_node *nodes;
    int nnodes;
    qr_pat_lower *lowers; /* in source order: the first whose kernel takes the recipe's types runs */
    int nlowers;
    qrl_consts_fn consts; /* the constant arguments of every lowering, in order */
} qr_pattern;

/* What an affine rule gives its output (add_affine): the input's qparams, fixed ones, or its own. */
typedef enum qr_affine_kind { QR_AFF_SAME, QR_AFF_FIXED, QR_AFF_REQUANTIZE } qr_affine_kind;

typedef struct qr_affine {
    const char *op;
    int ninputs;
    qr_affine_kind kind;
    qrl_where_fn where; /* NULL: always */
    qrl_aff_qparams_fn qparams;
    qrl_aff_elem_fn elem;
    qrl_aff_table_fn table;
    int in_f32;
    const char *loc, *cond; /* "file:line:col" of the rule, its where clause's source ("" without) */
} qr_affine;

/* What an affine rule sees of node n: its inputs, its output, its attributes. */
typedef struct qr_aff_view {
    qr_value *values[QRL_AFFINE_MAX_INPUTS + 1];
    qrl_array arrays[QRL_MATCH_ARRAYS];
    int narrays;
    qrl_match mt;
} qr_aff_view;
void qr_aff_view_init(qr_aff_view *v, const qr_graph *g, const qr_node *n);
/* After running a predicate, a lowering's constants or a rule on mt: an error if it read more
 * int-list attributes at once than mt has room for (QRL_MATCH_ARRAYS; the extra ones read empty). */
qr_status qr_match_status(const qrl_match *mt, qr_error *e);

/* A quantization setting's modifiers (activation = u8 asymmetric per_channel ...), as flags. */
enum {
    QR_MOD_SYMMETRIC = 1,
    QR_MOD_ASYMMETRIC = 2,
    QR_MOD_NARROW = 4,
    QR_MOD_PER_CHANNEL = 8,
    QR_MOD_PER_TENSOR = 16,
};

typedef struct qr_setting {
    const char *key, *type, *calibrator;
    unsigned mods;          /* QR_MOD_* */
    const char **argnames;  /* the calibrator parameter each argument binds, in order */
    int nargs;
    qrl_args_fn args;
} qr_setting;

typedef struct qr_recipe {
    const char *name;
    qrl_fallback_fn fallback;
    int fallback_on_outputs; /* the condition reads output_sqnr */
    qr_setting *settings;
    int nsettings;
    const char **use;
    int nuse;
} qr_recipe;

/* A loaded module: what its entry registered, and how to unload it. */
/* A transform: its match (a pattern without roles or lowerings; the root's value is the one
 * rescaled), its parameters and its scale function. */
typedef struct qr_transform {
    qr_pattern match; /* name and loc are the transform's */
    qr_cal_param *params;
    int nparams, max_params;
    qrl_cal_defaults_fn defaults;
    qrl_transform_scale_fn scale; /* NULL for a bias correction */
    qrl_transform_bias_fn bias;   /* NULL for a rescaling */
    qrl_transform_flip_fn flip;   /* a rounding optimizer's; NULL otherwise */
    int stats; /* QR_TRANSFORM_*: the statistics its function reads, and which function it is */
} qr_transform;

struct qrl_module {
    qr_fn_desc *fns;
    int nfns;
    qr_cal_desc *cals;
    int ncals;
    qr_pattern *patterns;
    int npatterns;
    qr_affine *affines;
    int naffines;
    qr_recipe *recipes;
    int nrecipes;
    qr_transform *transforms;
    int ntransforms;
    void (*release)(void *handle); /* dlclose or the JIT result's release */
    void *handle;
    int bad; /* registration failed (out of memory, ABI mismatch) */
};

/* Runs entry to fill a module; release(handle) is called by qr_module_free. */
qr_status qr_module_load(qrl_module_entry_fn entry, void (*release)(void *), void *handle, qrl_module **out,
                         qr_error *e);
void qr_module_free(qrl_module *m);
const qr_fn_desc *qr_module_fn(const qrl_module *m, const char *name);
/* The tile kernel of kernel k (an element-wise epilogue, compiler/elementwise.h): k's parameters,
 * then QR_TILE_C0 .. QR_TILE_Y_RS, each an i64; NULL when k has no element-wise form. */
const qr_fn_desc *qr_module_tile(const qrl_module *m, const qr_fn_desc *k);

/* The channels-last tile kernel of kernel k (compiler/elementwise.h), NULL when k has none: k's
 * parameters, QR_TILE_C0 .. QR_TILE_Y_RS (rows are now positions and columns channels), ew.fill
 * (an i64: 1 fills the tables for channels c0 .. c0 + cols, 0 reads them), then *tables
 * tensor<i64> tables, one per channel let, indexed by channel. */
const qr_fn_desc *qr_module_nhwc(const qrl_module *m, const qr_fn_desc *k, int *tables);

/* Whether m has a kernel named name ("qadd<u8>" for an instance) that the compiler proved
 * pointwise (qr_fn_desc.is_pointwise): 0 for a fn, a missing kernel or one not proven. The
 * runtime may run it on tensors in any layout only when all its tensor operands have one shape. */
int qr_module_kernel_pointwise(const qrl_module *m, const char *name);
enum { QR_TILE_C0, QR_TILE_ROWS, QR_TILE_COLS, QR_TILE_ACC_RS, QR_TILE_Y_OFF, QR_TILE_Y_RS, QR_TILE_NPARAMS };
/* A tile kernel's name: "k.tile" for kernel k, "k.tile<u8>" for its instance "k<u8>"; 0, or -1
 * when it does not fit in n bytes. */
int qr_tile_name(const char *kernel, char *buf, size_t n);
/* The same for the channels-last one: "k.nhwc", "k.nhwc<u8>". */
int qr_nhwc_name(const char *kernel, char *buf, size_t n);
/* Whether d returns result and takes these n parameters: their kinds and element types (names are
 * not compared). */
int qr_fn_type_is(const qr_fn_desc *d, qr_param_desc result, int n, const qr_param_desc *params);
/* Fn or kernel name of m when it has that type (qr_fn_type_is); otherwise NULL, and e says why: "the
 * module has no function 'f'", "function 'f' is f64(f64,qtype), not f64(f64)". What a caller checks
 * before it casts d->fn to a C function type. */
const qr_fn_desc *qr_module_fn_typed(const qrl_module *m, const char *name, qr_param_desc result, int n,
                                     const qr_param_desc *params, qr_error *e);
/* d's type as text, for messages: "f64(f64,qtype)", "void(tensor<u8>,f32[],i32)". */
const char *qr_fn_type_str(const qr_fn_desc *d, char *buf, size_t n);
const qr_cal_desc *qr_module_calibrator(const qrl_module *m, const char *name);
const qr_pattern *qr_module_pattern(const qrl_module *m, const char *name);
/* The first affine rule for n's op (among those `use`d: uses(name) != 0, NULL: all) whose where
 * holds. NULL: none applies; then *why (when given) says which rules were tried and why they did
 * not apply, and *status is QR_ERR when a where clause failed (its message in e). */
const qr_affine *qr_module_affine_for(const qrl_module *m, const qr_graph *g, const qr_node *n,
                                      int (*uses)(const void *ctx, const char *op), const void *uctx, char *why,
                                      size_t whyn, qr_error *e, qr_status *status);
const qr_recipe *qr_module_recipe(const qrl_module *m, const char *name);
/* The transform named name; NULL when the module has none. */
const qr_transform *qr_module_transform(const qrl_module *m, const char *name);
const qr_setting *qr_recipe_setting(const qr_recipe *r, const char *key);

/* The view of t that JIT code takes for a tensor<T> parameter. */
void qr_tview_of(const qr_tensor *t, qrl_tview *v);

/* The import table (for tests that build a qrl_rt by hand). */
const qrl_imports *qr_recipe_imports(void);
void qr_rt_init(qrl_rt *rt);
/* How long one call of recipe code may run (--max-recipe-time); 0: no limit. Default 60 s. */
void qr_set_recipe_time_limit(double seconds);
/* After a JIT call: QR_ERR with the trap's message when it failed. */
qr_status qr_rt_status(const qrl_rt *rt, qr_error *e);

/* A calibrator instance: parameters, state, and the allocations of its state. */
typedef struct qr_calib qr_calib;

/* names/values override the defaults (values converted to each parameter's kind). */
qr_status qr_calib_new(const qrl_module *m, const char *name, int n, const char *const *names, const double *values,
                       qr_calib **out, qr_error *e);
void qr_calib_free(qr_calib *c);
/* A new instance of like's calibrator with like's parameters, its state as initialized (nothing
 * observed): what one calibration worker (or one batch) starts from. */
qr_status qr_calib_fresh(const qr_calib *like, qr_calib **out, qr_error *e);
/* x must be f32. */
qr_status qr_calib_observe(qr_calib *c, const qr_tensor *x, qr_error *e);
/* Folds o's state into c's (same calibrator and parameters). */
qr_status qr_calib_merge(qr_calib *c, const qr_calib *o, qr_error *e);
qr_status qr_calib_solve(qr_calib *c, const qrl_qtype *t, qrl_qparams *out, qr_error *e);
/* c's state as bytes, following its typed layout (scalars, arrays' elements, histograms' counts):
 * appended to *buf (*len bytes of *cap, grown with realloc). What another process's
 * qr_calib_unpack reads into a fresh instance of the same calibrator and parameters. */
qr_status qr_calib_pack(const qr_calib *c, unsigned char **buf, size_t *len, size_t *cap, qr_error *e);
/* Reads a state that qr_calib_pack wrote at buf[*at..n) into c (a fresh instance of the same
 * calibrator and parameters), advancing *at; an error when the bytes do not fit c's layout. */
qr_status qr_calib_unpack(qr_calib *c, const unsigned char *buf, size_t n, size_t *at, qr_error *e);
/* The qtype of an integer dtype: signed or not, narrow range (e.g. -127..127). */
qrl_qtype qr_qtype_of(qr_dtype t, int narrow, int axis);

#endif
