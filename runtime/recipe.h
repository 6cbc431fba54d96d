/* Compiled recipe modules: the one interface between code compiled from QRL
 * and the runtime. The compiler (compiler/jit*.c) produces a shared object
 * whose entry point registers the module's functions and calibrators through
 * qrl_imports; JIT code reaches the runtime only through that same table (a
 * recipe cannot call anything else, so it cannot open files or touch memory
 * outside the tensors and state it is given). A cached module runs without
 * the front end: everything the runtime needs is registered by the entry.
 *
 * The structs below are laid out identically by the JIT (field order and
 * types): the import table from one list, QRL_IMPORTS; the others by hand in compiler/jit.c, held
 * to these by static assertions there. Changing one means a new QR_RECIPE_ABI, which a module
 * carries (qrl_module_abi) and the runtime checks before it runs the module's entry. */
#ifndef QR_RECIPE_H
#define QR_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"

#define QR_RECIPE_ABI 31

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

/* tensor<T>: the element type is checked by the runtime before a call. first and samples: what a
 * calibrator's observe sees as x.first and x.samples (the tensor holds `samples` calibration samples,
 * along its first axis, from sample `first` of the calibration samples on); 0 and 1 for any other
 * tensor (a weight, a kernel's operand). */
typedef struct qrl_tview {
    void *data;
    int64_t numel;
    int64_t rank;
    int64_t dims[QR_MAX_DIMS];
    int64_t first, samples;
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

/* The import table (qrl_imports), described once: X(ID, field, result, parameters...), each type
 * one letter, QRL_ABI_<letter> its C type. The runtime's struct and indices below and the JIT's
 * view of it (compiler/jit.c: QRL_ABI_SIG's letters, every pointer one word) are made from this
 * list, and static assertions hold every field at its index, so the two cannot drift apart; a
 * change here is a new QR_RECIPE_ABI. */
#define QRL_ABI_v void
#define QRL_ABI_d double
#define QRL_ABI_l int64_t
#define QRL_ABI_r qrl_rt *
#define QRL_ABI_t const qrl_tview *
#define QRL_ABI_s const char *
#define QRL_ABI_p void *
#define QRL_ABI_c const void *
#define QRL_ABI_m qrl_module *
#define QRL_ABI_x const qrl_match *
#define QRL_ABI_a qrl_array *

#define QRL_IMPORTS(X)                                                                                         \
    /* Errors: records the first one; the JIT function then returns at once. */                                \
    X(TRAP, trap, v, r, l, s, l, l, l, l) /* (rt, code, file, line, col, a, b) */                              \
    /* A loop ran out of fuel (rt->fuel < 0): more fuel, or a QRL_TRAP_TIME trap past the time limit. */       \
    X(REFUEL, refuel, v, r, s, l, l) /* (rt, file, line, col) */                                               \
    /* Math that is not inlined. */                                                                            \
    X(EXP, exp, d, d)                                                                                          \
    X(LOG, log, d, d)                                                                                          \
    X(LOG2, log2, d, d)                                                                                        \
    X(TANH, tanh, d, d)                                                                                        \
    X(ERF, erf, d, d)                                                                                          \
    X(POW, pow, d, d, d)                                                                                       \
    /* Reductions over a tensor<f32> (NaN ignored; +-inf for an empty tensor). */                              \
    X(TMIN, tensor_min, d, t) /* (x) */                                                                        \
    X(TMAX, tensor_max, d, t) /* (x) */                                                                        \
    X(TABSMAX, tensor_absmax, d, t) /* (x) */                                                                  \
    X(TSUM, tensor_sum, d, t) /* (x) */                                                                        \
    /* ONNX (numpy) broadcasting: the flat index of the element of a that element i of y reads; -1 when        \
     * a's shape does not broadcast to y's. */                                                                 \
    X(TBCAST, broadcast_index, l, t, t, l) /* (a, y, i) */                                                     \
    /* Calibrator state: zeroed memory and histograms owned by the state. */                                   \
    X(STATE_ALLOC, state_alloc, p, r, l) /* (rt, bytes) */                                                     \
    X(HIST_NEW, hist_new, p, r, l) /* (rt, bins) */                                                            \
    X(HIST_ADD, hist_add, v, r, p, t, l, l, l) /* (rt, h, x, is_abs, from, to): x's elements [from, to) */     \
    X(HIST_MERGE, hist_merge, v, r, p, c) /* (rt, h, other) */                                                 \
    X(HIST_QUANTILE, hist_quantile, d, c, d) /* (h, q) */                                                      \
    X(HIST_BIN, hist_bin, d, c, l) /* (h, i) */                                                                \
    X(HIST_EDGE, hist_edge, d, c, l) /* (h, i) */                                                              \
    X(HIST_COUNT, hist_count, d, c) /* (h) */                                                                  \
    X(HIST_LO, hist_lo, d, c) /* (h) */                                                                        \
    X(HIST_HI, hist_hi, d, c) /* (h) */                                                                        \
    X(HIST_WIDTH, hist_width, d, c) /* (h) */                                                                  \
    X(HIST_BINS, hist_bins, l, c) /* (h) */                                                                    \
    X(HIST_MIN, hist_min, d, c) /* (h); the smallest value added (before |x|) */                               \
    X(HIST_MAX, hist_max, d, c) /* (h) */                                                                      \
    /* Registration, called by the module's entry point. is_kernel: 0 a function, 1 a kernel, 2 the            \
     * generic entry (qrl_kernel_call_fn) of the kernel just added. result: its type, as a parameter's         \
     * (kind a qr_param_kind, elem a qr_dtype; QR_PARAM_VOID when it returns nothing). */                      \
    X(ADD_FN, add_fn, v, m, s, p, l, l, l) /* (m, name, fn, is_kernel, result_kind, result_elem) */            \
    /* (m, name, nparams, state_bytes, defaults, init, observe, merge, solve) */                               \
    X(ADD_CAL, add_calibrator, v, m, s, l, l, p, p, p, p, p)                                                   \
    /* kind: a qr_cal_param_kind */                                                                            \
    X(ADD_PARAM, add_param, v, m, s, s, l) /* (m, calibrator, name, kind) */                                   \
    /* The next parameter of the function or kernel just added (add_fn, is_kernel 0 or 1), in order:           \
     * kind a qr_param_kind, elem a qr_dtype (the scalar's type, or the array's or tensor's elements). */      \
    X(ADD_FN_PARAM, add_fn_param, v, m, s, l, l) /* (m, name, kind, elem) */                                   \
    /* Pattern predicates: value v of the candidate match (index in the pattern's value table). */             \
    X(VALUE_RANK, value_rank, l, x, l) /* (mt, v); -1: unknown */                                              \
    X(VALUE_DIM, value_dim, l, x, l, l) /* (mt, v, axis); -1: unknown */                                       \
    X(VALUE_CONST, value_const, l, x, l) /* (mt, v) */                                                         \
    X(VALUE_PRESENT, value_present, l, x, l) /* (mt, v) */                                                     \
    X(VALUE_SCALAR, value_scalar, d, x, l) /* (mt, v); a one-element constant's value; NaN otherwise */        \
    X(VALUE_OP_IS, value_op_is, l, x, l, s) /* (mt, v, op); v's producer is op */                              \
    /* Attributes of v's producer; v = -1: the node an affine rule is asked about. */                          \
    X(ATTR_INT, attr_int, l, x, l, s, l) /* (mt, v, name, def) */                                              \
    X(ATTR_FLOAT, attr_float, d, x, l, s, d) /* (mt, v, name, def) */                                          \
    X(ATTR_STR_IS, attr_str_is, l, x, l, s, s, s) /* (mt, v, name, def, lit) */                                \
    /* An int-list attribute as an i64[] (empty when absent), valid while the match is. */                     \
    X(ATTR_INTS, attr_ints, a, x, l, s) /* (mt, v, name) */                                                    \
    /* Patterns. where: int64_t (*)(qrl_rt *, const qrl_match *), NULL = always; numerics: the recipe          \
     * numerics its kernels implement ("onnx", "tflite", ...; "": any); priority: patterns are tried           \
     * highest first (-1: the pattern's number of nodes, so larger ones fuse first); loc: the pattern's        \
     * "file:line:col", for messages. */                                                                       \
    X(ADD_PATTERN, add_pattern, v, m, s, p, s, l, s) /* (m, name, where, numerics, priority, loc) */           \
    /* role: a qr_role_kind; axis for weight(axis = N) (-1: per tensor); a, b: the value                       \
     * indices of bias(a, b) / same(a) (-1: none). */                                                          \
    X(ADD_PATTERN_VALUE, add_pattern_value, v, m, s, s, l, l, l, l) /* (m, pattern, name, role, axis, a, b) */ \
    /* One op form of a pattern node (ops: "Conv|ConvTranspose"); its inputs follow, in order, one             \
     * add_pattern_node_input each: value the index of the value it binds (-1: any input), optional 1          \
     * when the input may be absent. */                                                                        \
    X(ADD_PATTERN_NODE, add_pattern_node, v, m, s, l, s) /* (m, pattern, out, ops) */                          \
    X(ADD_PATTERN_NODE_INPUT, add_pattern_node_input, v, m, s, l, l) /* (m, pattern, value, optional) */       \
    /* One per lower clause, in order; its arguments follow, one add_pattern_lower_arg each. consts:           \
     * void (*)(qrl_rt *, const qrl_match *, double *out), the constants of all lower clauses in order. */     \
    X(ADD_PATTERN_LOWER, add_pattern_lower, v, m, s, s, l, p) /* (m, pattern, kernel, out, consts) */          \
    /* The next argument of the pattern's last lower clause: kind a qr_lower_arg_kind, index the               \
     * value's in the pattern's value table, or the constant's position in what consts fills. */               \
    X(ADD_PATTERN_LOWER_ARG, add_pattern_lower_arg, v, m, s, l, l) /* (m, pattern, kind, index) */             \
    /* Affine rules, in source order (the first whose where holds applies). kind: a                            \
     * qr_affine_kind. where: qrl_where_fn (the node's inputs, then its output; attributes through v = -1);    \
     * qparams (fixed), elem (a body), table: the qrl_aff_*_fn types below; NULL when absent.                  \
     * in_f32: the op runs on real values between Q/DQ borders. loc "file:line:col" and cond (the              \
     * where clause's source) name the rule in messages. */                                                    \
    /* (m, op, ninputs, kind, where, qparams, elem, table, in_f32, loc, cond) */                               \
    X(ADD_AFFINE, add_affine, v, m, s, l, l, p, p, p, p, l, s, s)                                              \
    /* Recipes. fallback: qrl_fallback_fn, NULL = never; on_outputs: its condition reads output_sqnr. */       \
    X(ADD_RECIPE, add_recipe, v, m, s, p, l) /* (m, name, fallback, on_outputs) */                             \
    /* A setting: key = type mods by calibrator(args). mods: QR_MOD_* flags; args: void (*)(qrl_rt *,          \
     * double *out) filling the call's arguments in order, whose names follow, one add_setting_arg             \
     * each (the calibrator parameter each binds). Value-only settings (numerics = onnx,                       \
     * accumulate = i32) give it in type. */                                                                   \
    X(ADD_SETTING, add_setting, v, m, s, s, s, l, s, p, d) /* (m, recipe, key, type, mods, calibrator, args, value) */\
    X(ADD_SETTING_ARG, add_setting_arg, v, m, s, s) /* (m, recipe, name) */                                    \
    X(ADD_USE, add_use, v, m, s, s) /* (m, recipe, name) */                                                    \
    /* The kernel just added is a tile kernel (compiler/elementwise.h) whose rows are channels of              \
     * the axis its `along` names: parameter `param` of the kernel (param >= 0), else `value`. */              \
    X(SET_TILE_AXIS, set_tile_axis, v, m, l, l) /* (m, param, value) */                                        \
    /* x.quantile(q): the value below which a fraction q (clamped to 0..1) of x's values lie, as               \
     * numpy's nanquantile (linear interpolation between the sorted values, NaN ignored); 0 when x             \
     * has no values. Fails (out of memory) through rt. */                                                     \
    X(TQUANTILE, tensor_quantile, d, r, t, d) /* (rt, x, q) */                                                 \
    /* The kernel just added is pointwise: the compiler proved (compiler/pointwise.h) that, with               \
     * all its tensor operands of one shape, element i of what it writes depends only on element               \
     * i of what it reads and on its other parameters. */                                                      \
    X(SET_POINTWISE, set_pointwise, v, m) /* (m) */                                                            \
    /* The kernel just added, a channels-last epilogue kernel (or a pointwise one: its element's, as a         \
     * second stage) has a vector form: prog, the program of compiler/vecmap.h, text that lives as             \
     * long as the module. */                                                                                  \
    X(SET_VECTOR_EPILOGUE, set_vector_epilogue, v, m, s) /* (m, prog) */                                       \
    /* Pattern predicate v.dtype == "f32": v's element type is the one named ("f32", "i64", ... as             \
     * `qrl dump` prints them); 0 for an absent value. */                                                      \
    X(VALUE_DTYPE_IS, value_dtype_is, l, x, l, s) /* (mt, v, dtype) */                                         \
    /* Pattern predicate v.read_by == "Softmax": every node that reads v is that op, at least one,             \
     * and v is not a graph output. */                                                                         \
    X(VALUE_READ_BY, value_read_by, l, x, l, s) /* (mt, v, op) */                                              \
    /* Pattern predicate v.feeds == "LayerNormalization": at least one node reading v is that op. */           \
    X(VALUE_FEEDS, value_feeds, l, x, l, s) /* (mt, v, op) */                                                  \
    /* Transforms (a graph rewrite before calibration: channel scales moved from a value into its              \
     * readers' weights). defaults: qrl_cal_defaults_fn for its nparams parameters, which follow one           \
     * add_transform_param each (kind a qr_cal_param_kind); where: qrl_where_fn of its match, whose            \
     * values and nodes follow through add_pattern_value/add_pattern_node under the transform's name;          \
     * scale: qrl_transform_scale_fn; loc its "file:line:col". */                                              \
    /* (m, name, nparams, defaults, where, scale, loc, stats) */                                               \
    X(ADD_TRANSFORM, add_transform, v, m, s, l, p, p, p, s, l)                                                 \
    X(ADD_TRANSFORM_PARAM, add_transform_param, v, m, s, s, l) /* (m, transform, name, kind) */                \
    /* The kernel just added declares its output's shape (tensor<T>[.., M, N]): one call per entry,            \
     * kind a qr_out_dim_kind (param and at as qr_out_dim says). */                                            \
    X(ADD_OUT_DIM, add_out_dim, v, m, l, l, l) /* (m, kind, param, at) */                                      \
    /* The next field of the calibrator just added's state, in order (its typed layout, which                  \
     * qr_calib_pack follows): kind a qr_state_kind, at its offset in the state, elem_bytes the size           \
     * of an array's elements (0 otherwise). */                                                                \
    X(ADD_STATE, add_state, v, m, s, l, l, l) /* (m, calibrator, kind, at, elem_bytes) */             \
    /* What the recipe's last setting applies to (activation for LayerNormalization, "/enc/Softmax"):      \
     * an op type, or a node's name when is_node. A setting with none applies to every value. */          \
    X(ADD_SETTING_TARGET, add_setting_target, v, m, s, s, l) /* (m, recipe, name, is_node) */     \
    /* A gram (X^T X of a layer's input rows, runtime/gram.h) owned by the state; add takes x's last      \
     * dimension as the row width. factor: u with u^T u = (c H + lambda I)^-1 (GPTQ's inverse factor), a  \
     * k x k f64 tensor owned by the calibrator instance; NULL with a trap when it cannot be made. */      \
    X(GRAM_NEW, gram_new, p, r) /* (rt) */                                                               \
    X(GRAM_ADD, gram_add, v, r, p, t) /* (rt, g, x) */                                                   \
    X(GRAM_MERGE, gram_merge, v, r, p, c) /* (rt, g, other) */                                           \
    X(GRAM_DIM, gram_dim, l, c) /* (g) */                                                                \
    X(GRAM_ROWS, gram_rows, d, c) /* (g) */                                                              \
    X(GRAM_AT, gram_at, d, r, c, l, l) /* (rt, g, i, j); traps out of range */                           \
    X(GRAM_FACTOR, gram_factor, t, r, c, d, d) /* (rt, g, c, lambda) */                                       \
    /* The calibrator just added is a layer calibrator: its solve is a qrl_cal_solve_layer_fn. */         \
    X(SET_LAYER_CAL, set_layer_calibrator, v, m, s) /* (m, calibrator) */                                \
    /* The kernel just added touches the elements of its tensor parameters in mask (bit i:                \
     * parameter i, compiler/reads.h) alone: it uses the others for their type and shape. */             \
    X(SET_PARAM_READS, set_param_reads, v, m, l) /* (m, mask) */                                        \
    /* The kernel just added, a channels-last epilogue kernel, fills its tables from the parameters      \
     * in uses (bit i: parameter i named at all, a tensor's shape too) and the elements of the tensors   \
     * in elems alone, and writes nothing but them (compiler/reads.h qc_fill_reads). */                  \
    X(SET_FILL_READS, set_fill_reads, v, m, l, l) /* (m, uses, elems) */

/* The C parameter list of letters (QRL_ABI_PARAMS(r, l): qrl_rt *, int64_t) and the signature as
 * a string, result first (QRL_ABI_SIG(v, r, l): "vrl"); up to 12 letters. */
#define QRL_ABI_NARGS(...) QRL_ABI_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define QRL_ABI_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define QRL_ABI_CAT(a, b) QRL_ABI_CAT_(a, b)
#define QRL_ABI_CAT_(a, b) a##b
#define QRL_ABI_PARAMS(...) QRL_ABI_CAT(QRL_ABI_P, QRL_ABI_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define QRL_ABI_SIG(...) QRL_ABI_CAT(QRL_ABI_S, QRL_ABI_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define QRL_ABI_P1(a) QRL_ABI_##a
#define QRL_ABI_P2(a, ...) QRL_ABI_##a, QRL_ABI_P1(__VA_ARGS__)
#define QRL_ABI_P3(a, ...) QRL_ABI_##a, QRL_ABI_P2(__VA_ARGS__)
#define QRL_ABI_P4(a, ...) QRL_ABI_##a, QRL_ABI_P3(__VA_ARGS__)
#define QRL_ABI_P5(a, ...) QRL_ABI_##a, QRL_ABI_P4(__VA_ARGS__)
#define QRL_ABI_P6(a, ...) QRL_ABI_##a, QRL_ABI_P5(__VA_ARGS__)
#define QRL_ABI_P7(a, ...) QRL_ABI_##a, QRL_ABI_P6(__VA_ARGS__)
#define QRL_ABI_P8(a, ...) QRL_ABI_##a, QRL_ABI_P7(__VA_ARGS__)
#define QRL_ABI_P9(a, ...) QRL_ABI_##a, QRL_ABI_P8(__VA_ARGS__)
#define QRL_ABI_P10(a, ...) QRL_ABI_##a, QRL_ABI_P9(__VA_ARGS__)
#define QRL_ABI_P11(a, ...) QRL_ABI_##a, QRL_ABI_P10(__VA_ARGS__)
#define QRL_ABI_P12(a, ...) QRL_ABI_##a, QRL_ABI_P11(__VA_ARGS__)
#define QRL_ABI_S1(a) #a
#define QRL_ABI_S2(a, ...) #a QRL_ABI_S1(__VA_ARGS__)
#define QRL_ABI_S3(a, ...) #a QRL_ABI_S2(__VA_ARGS__)
#define QRL_ABI_S4(a, ...) #a QRL_ABI_S3(__VA_ARGS__)
#define QRL_ABI_S5(a, ...) #a QRL_ABI_S4(__VA_ARGS__)
#define QRL_ABI_S6(a, ...) #a QRL_ABI_S5(__VA_ARGS__)
#define QRL_ABI_S7(a, ...) #a QRL_ABI_S6(__VA_ARGS__)
#define QRL_ABI_S8(a, ...) #a QRL_ABI_S7(__VA_ARGS__)
#define QRL_ABI_S9(a, ...) #a QRL_ABI_S8(__VA_ARGS__)
#define QRL_ABI_S10(a, ...) #a QRL_ABI_S9(__VA_ARGS__)
#define QRL_ABI_S11(a, ...) #a QRL_ABI_S10(__VA_ARGS__)
#define QRL_ABI_S12(a, ...) #a QRL_ABI_S11(__VA_ARGS__)

typedef struct qrl_imports {
    int64_t abi; /* QR_RECIPE_ABI */
#define QRL_IMPORT_FIELD(id, name, result, ...) QRL_ABI_##result (*name)(QRL_ABI_PARAMS(__VA_ARGS__));
    QRL_IMPORTS(QRL_IMPORT_FIELD)
#undef QRL_IMPORT_FIELD
} qrl_imports;

/* Each entry's index in the table (QRL_IMP_ABI: the abi field). */
enum {
    QRL_IMP_ABI,
#define QRL_IMPORT_INDEX(id, ...) QRL_IMP_##id,
    QRL_IMPORTS(QRL_IMPORT_INDEX)
#undef QRL_IMPORT_INDEX
    QRL_IMP_COUNT
};

/* Every entry one word, at its index: how the JIT lays the table out. */
_Static_assert(sizeof(int64_t) == sizeof(void *) && sizeof(qrl_imports) == QRL_IMP_COUNT * sizeof(void *),
               "qrl_imports is not one word per entry");
#define QRL_IMPORT_AT(id, name, ...)                                                                              \
    _Static_assert(offsetof(qrl_imports, name) == QRL_IMP_##id * sizeof(void *), "import " #name " off its index");
QRL_IMPORTS(QRL_IMPORT_AT)
#undef QRL_IMPORT_AT

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
 * |weight| of its producer's channel j; mean, its mean |value| over the calibration samples; clip,
 * the upper bound of the Clip (ReLU6) between producer and readers (inf without one); groups, the
 * largest group count of the Convs reading it (1 for one-group Convs, MatMul, Gemm). Only those the
 * function names (stats, QR_TRANSFORM_*) are measured; the others arrive as NaN (clip and groups are
 * always given). */
typedef double (*qrl_transform_scale_fn)(qrl_rt *rt, const qrl_scalar *params, double act, double weight,
                                         double source, double mean, double clip, double groups);
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
    QR_TRANSFORM_MEAN = 128,                                                /* scale(...)'s mean |value| */
    QR_TRANSFORM_SHIFTS = 256,                                              /* the function is shift(...) */
    QR_TRANSFORM_STATS_ALL = 511
};
/* A transform's shift function instead (QR_TRANSFORM_SHIFTS in its stats): high-bias absorption's
 * amount a >= 0 moved out of channel j of a matched activation (its producer's bias lowered by a,
 * its readers' biases raised by their weights times a), from low and high, the smallest and largest
 * value of the channel's pre-activation on the calibration samples, and clip, the upper bound of
 * the Clip after it (inf without one). The same three f64 slots as bias(...). */
typedef double (*qrl_transform_shift_fn)(qrl_rt *rt, const qrl_scalar *params, double low, double high,
                                         double clip);
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
/* int64_t qrl_module_abi(void): the QR_RECIPE_ABI a module was compiled for. */
#define QRL_MODULE_ABI "qrl_module_abi"
typedef void (*qrl_module_entry_fn)(qrl_module *m, const qrl_imports *imp);

/* Calibrator function types (state is the module's own layout). */
typedef void (*qrl_cal_defaults_fn)(qrl_rt *rt, qrl_scalar *params);
typedef void (*qrl_cal_init_fn)(qrl_rt *rt, void *state, const qrl_scalar *params);
typedef void (*qrl_cal_observe_fn)(qrl_rt *rt, void *state, const qrl_scalar *params, const qrl_tview *x);
typedef void (*qrl_cal_merge_fn)(qrl_rt *rt, void *state, const void *other, const qrl_scalar *params);
typedef void (*qrl_cal_solve_fn)(qrl_rt *rt, const void *state, const qrl_scalar *params, const qrl_qtype *t,
                                 qrl_qparams *out);
/* A layer calibrator's solve: w (an f64 tensor [N, K], a weight by output channel) rounded in place
 * to integer codes, scale and zero ([N, ceil(K / block)] f64) the qparams of each block of K. */
typedef void (*qrl_cal_solve_layer_fn)(qrl_rt *rt, const void *state, const qrl_scalar *params, const qrl_tview *w,
                                       const qrl_qtype *t, int64_t block, const qrl_tview *scale, const qrl_tview *zero);

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
    /* channels-last epilogue kernels: the vector form of their value (compiler/vecmap.h), or NULL;
     * pointwise kernels: their element's as a second stage (vecmap.h qc_vecmap_stage), or NULL */
    const char *vector_epilogue;
    /* kernels: the output's declared shape, n_out_dims entries (0: none declared) */
    qr_out_dim *out_dims;
    int n_out_dims;
    /* kernels: bit i set when the kernel may read or write the elements of its tensor parameter i;
     * clear for one it takes for its type and shape alone (set_param_reads; all set until then) */
    uint64_t param_reads;
    /* channels-last epilogue kernels: what the fill of their tables reads (set_fill_reads): each
     * parameter in fill_uses by its value (a tensor's by its shape), the tensors in fill_elems by
     * their elements too. fill_known 0 (never registered): not known, the tables are made anew on
     * every call (qr_fill_key) */
    int fill_known;
    uint64_t fill_uses, fill_elems;
} qr_fn_desc;

/* A calibrator parameter's kind (add_param). */
typedef enum qr_cal_param_kind { QR_CAL_INT, QR_CAL_FLOAT, QR_CAL_BOOL } qr_cal_param_kind;

typedef struct qr_cal_param {
    const char *name;
    qr_cal_param_kind kind;
} qr_cal_param;

/* A calibrator state field's kind (add_state): an 8-byte scalar slot, a qrl_array of state memory,
 * or a histogram or gram (a pointer to one the runtime owns). */
typedef enum qr_state_kind { QR_STATE_SCALAR, QR_STATE_ARRAY, QR_STATE_HIST, QR_STATE_GRAM } qr_state_kind;

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
    qrl_cal_solve_fn solve; /* a qrl_cal_solve_layer_fn when layer */
    int layer;              /* a layer calibrator: observes a layer's inputs, rounds its weight */
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

/* A recipe's settings, one table for the checker (compiler/check_items.c: the keys, what each
 * takes) and the runtime: X(ID, key, kind, lo, hi, choices); lo and hi bound a number, choices
 * lists a name's values. */
typedef enum qr_setting_kind {
    QR_SK_QSPEC,     /* a type, modifiers and a calibrator: activation = u8 asymmetric by minmax */
    QR_SK_ACC,       /* an integer type: bias = i32 */
    QR_SK_FALLBACK,  /* a condition: fallback = sqnr < 20 */
    QR_SK_CHOICE,    /* one of choices: numerics = onnx */
    QR_SK_NUMBER,    /* a number from lo (hi: no bound): tolerance = 3 */
    QR_SK_FRACTION,  /* a number from lo to below hi: validate = 0.25 */
    QR_SK_COUNT,     /* an integer from lo to hi: measure_samples = 256 */
    QR_SK_POW2,      /* a power of two from lo to hi: block = 32 */
    QR_SK_TRANSFORM, /* a transform's call: transform = smoothquant(alpha = 0.5) */
    QR_SK_BUDGET,    /* one of choices called with a number: budget = bits(6) */
    QR_SK_HOOK,      /* a policy hook: the fn the quantizer calls in place of the stdlib's fn of the key's name
                      * (bias_qparams = coarse_bias); choices: the fn's type, as qr_fn_type_str writes it.
                      * samples has no stdlib fn of its name: without it the quantizer pools in C;
                      * calibrate_samples has none either: without it no try is judged on the
                      * calibration samples */
} qr_setting_kind;

#define QR_SETTINGS(X)                                                      \
    X(ACTIVATION, "activation", QR_SK_QSPEC, 0, 0, NULL)                    \
    X(WEIGHT, "weight", QR_SK_QSPEC, 0, 0, NULL)                            \
    X(BIAS, "bias", QR_SK_ACC, 0, 0, NULL)                                  \
    X(ACCUMULATE, "accumulate", QR_SK_ACC, 0, 0, NULL)                      \
    X(NUMERICS, "numerics", QR_SK_CHOICE, 0, 0, "onnx tflite pytorch")      \
    X(FALLBACK, "fallback", QR_SK_FALLBACK, 0, 0, NULL)                     \
    X(INPUT, "input", QR_SK_QSPEC, 0, 0, NULL)                              \
    X(OUTPUT, "output", QR_SK_QSPEC, 0, 0, NULL)                            \
    X(TOLERANCE, "tolerance", QR_SK_NUMBER, 0, 0, NULL)                     \
    X(ROUNDING, "rounding", QR_SK_CHOICE, 0, 0, "half_even half_away")      \
    X(TRANSFORM, "transform", QR_SK_TRANSFORM, 0, 0, NULL)                  \
    X(VALIDATE, "validate", QR_SK_FRACTION, 0, 1, NULL)                     \
    X(MEASURE_SAMPLES, "measure_samples", QR_SK_COUNT, 1, 1000000, NULL)    \
    X(EFFECT_SAMPLES, "effect_samples", QR_SK_COUNT, 1, 1000000, NULL)      \
    X(EFFECT_MACS, "effect_macs", QR_SK_NUMBER, 1, 0, NULL)                 \
    X(BLOCK, "block", QR_SK_POW2, 16, 256, NULL)                            \
    X(RANK, "rank", QR_SK_CHOICE, 0, 0, "effect gain probe probe_pairs grad")                      \
    X(ORDER, "order", QR_SK_CHOICE, 0, 0, "worst per_mac")                  \
    X(OUTPUTS, "outputs", QR_SK_CHOICE, 0, 0, "pooled worst")               \
    X(OVERFLOW, "overflow", QR_SK_CHOICE, 0, 0, "wrap saturate")          \
    X(CANDIDATE, "candidate", QR_SK_QSPEC, 0, 0, NULL)                      \
    X(BUDGET, "budget", QR_SK_BUDGET, 0, 0, "bits bytes")                  \
    X(COMPUTE, "compute", QR_SK_CHOICE, 0, 0, "f32 int8")                  \
    X(CANDIDATE_ACTIVATION, "candidate_activation", QR_SK_QSPEC, 0, 0, NULL) \
    X(SEARCH_SAMPLES, "search_samples", QR_SK_COUNT, 1, 1000000, NULL)      \
    X(BIAS_QPARAMS, "bias_qparams", QR_SK_HOOK, 0, 0, "qparams(qparams,qparams,qtype)") \
    X(NARROW_RANGE, "narrow_range", QR_SK_HOOK, 0, 0, "i64(qtype,bool)")    \
    X(PATTERN_PRIORITY, "pattern_priority", QR_SK_HOOK, 0, 0, "i64(i64)")    \
    X(SAMPLES, "samples", QR_SK_HOOK, 0, 0, "f64(f64[],f64[])")               \
    X(CALIBRATE, "calibrate", QR_SK_CHOICE, 0, 0, "quantized float")     \
    X(VALIDATE_FROM, "validate_from", QR_SK_CHOICE, 0, 0, "end spread stagger") \
    X(VALIDATE_LEAST, "validate_least", QR_SK_COUNT, 1, 1000000, NULL) \
    X(SPECULATE, "speculate", QR_SK_NUMBER, 0, 0, NULL)                      \
    X(CALIBRATE_FIGURE_SAMPLES, "calibrate_figure_samples", QR_SK_COUNT, 1, 1000000, NULL) \
    X(CALIBRATE_SAMPLES, "calibrate_samples", QR_SK_HOOK, 0, 0, "f64(f64[],f64[])") \
    X(STEPS, "steps", QR_SK_CHOICE, 0, 0, "skip measure")                    \
    X(PROBE_RUNS, "probe_runs", QR_SK_COUNT, 2, 1000000, NULL)               \
    X(PROBE_ROUNDS, "probe_rounds", QR_SK_COUNT, 1, 1000, NULL)              \
    X(PROBE_HOLD, "probe_hold", QR_SK_COUNT, 1, 1000000, NULL)               \
    X(GRAD_DIRECTIONS, "grad_directions", QR_SK_COUNT, 1, 1000000, NULL)     \
    X(GRAD_EXACT, "grad_exact", QR_SK_COUNT, 0, 1000000, NULL)              \
    X(GRAD_EXACT_BELOW, "grad_exact_below", QR_SK_NUMBER, 0, 0, NULL)       \
    X(FALLBACK_ACTIVATION, "fallback_activation", QR_SK_QSPEC, 0, 0, NULL)  \
    X(FALLBACK_CALIBRATE, "fallback_calibrate", QR_SK_CHOICE, 0, 0, "quantized float") \
    X(SEARCH_FLOOR, "search_floor", QR_SK_NUMBER, 0, 0, NULL)              \
    X(GRAD_EXACT_NEAR, "grad_exact_near", QR_SK_COUNT, 0, 1000000, NULL)     \
    X(GRAD_EXACT_KEPT_BELOW, "grad_exact_kept_below", QR_SK_NUMBER, 0, 0, NULL) \
    X(GRAD_EXACT_AT, "grad_exact_at", QR_SK_CHOICE, 0, 0, "tries predicted fitted") \
    X(GRAD_PEAK_WITHIN, "grad_peak_within", QR_SK_NUMBER, 1, 0, NULL)     \
    X(GRAD_SEGMENTS, "grad_segments", QR_SK_COUNT, 1, 64, NULL)            \
    X(SEARCH_START, "search_start", QR_SK_CHOICE, 0, 0, "halving predicted fitted") \
    X(IDLE, "idle", QR_SK_CHOICE, 0, 0, "keep drop")

/* accumulate = iN: the accumulator widths the runtime simulates (docs/quantizer.md, accumulator
 * width); i64 is accepted by the checker and refused by the quantizer. */
#define QR_ACC_MIN_BITS 8
#define QR_ACC_MAX_BITS 32

typedef enum qr_setting_id {
#define QR_SETTING_ID(id, ...) QR_SET_##id,
    QR_SETTINGS(QR_SETTING_ID)
#undef QR_SETTING_ID
    QR_NSETTINGS
} qr_setting_id;

typedef struct qr_setting_def {
    const char *key;
    qr_setting_kind kind;
    double lo, hi;
    const char *choices; /* space-separated */
} qr_setting_def;

/* The table, by qr_setting_id; qr_setting_find: a key's id, -1 for none; qr_setting_choice: whether
 * name is one of setting id's choices. */
extern const qr_setting_def qr_setting_defs[QR_NSETTINGS];
int qr_setting_find(const char *key);
int qr_setting_choice(qr_setting_id id, const char *name);

typedef struct qr_setting {
    qr_setting_id id;
    double value;           /* a number's (QR_SK_NUMBER, FRACTION, COUNT, POW2), a budget's argument */
    /* a budget's type is its kind (bits, bytes) and its calibrator where it is written ("file:line:col",
     * for the quantizer's message when no assignment meets it) */
    const char *key, *type, *calibrator;
    unsigned mods;          /* QR_MOD_* */
    const char **argnames;  /* the calibrator parameter each argument binds, in order */
    int nargs;
    qrl_args_fn args;
    /* activation for ...: the op types and node names whose output values it types (node names
     * where is_node[i]); none: the recipe-wide setting */
    const char **targets;
    unsigned char *target_is_node;
    int ntargets;
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
    qrl_transform_shift_fn shift; /* a high-bias absorption's; NULL otherwise */
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

/* Runs entry to fill a module; release(handle) is called by qr_module_free. abi: the QR_RECIPE_ABI
 * the module was compiled for (its qrl_module_abi); another one is refused before entry runs (its
 * import table would be read with another layout), naming both. */
qr_status qr_module_load(qrl_module_entry_fn entry, int64_t abi, void (*release)(void *), void *handle,
                         qrl_module **out, qr_error *e);
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
/* Whether kernel k may read or write the elements of its parameter i (qr_fn_desc.param_reads): 1
 * unless the compiler showed k takes that tensor for its type and shape alone; 1 past k's
 * parameters. */
int qr_fn_reads_param(const qr_fn_desc *k, int i);
/* The key of what channels-last kernel k's fill of its tables reads in args (its parameters as its
 * call takes them, ew.fill and the block's six included; qr_fn_desc.fill_uses): each scalar's bytes,
 * each array's length and elements, each tensor's shape and, for a tensor whose elements the fill
 * reads, its data pointer and elements. Bit i of fixed says parameter i (an array or a tensor)
 * holds the same elements at the same address on every call: its address stands for them. Equal keys give equal tables, so a caller may keep the tables of one
 * call for the next while the key stays the same (quantizer/intgraph.c, per node). same NULL: the
 * key is written to key when it fits in cap bytes; else nothing is written and *same is 1 when key
 * holds exactly this key, cap bytes long. Returns the key's length, or -1 when the tables cannot
 * be kept (k's fill not known, more than 64 parameters). */
int64_t qr_fill_key(const qr_fn_desc *k, void *const *args, uint64_t fixed, unsigned char *key, int64_t cap, int *same);
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
/* The recipe-wide setting id (none that names ops or nodes); NULL when the recipe has none. */
const qr_setting *qr_recipe_setting(const qr_recipe *r, qr_setting_id id);
/* The setting id that names node `node` (by name) or, failing that, its op type `op` (activation
 * for LayerNormalization, "/enc/Softmax" = ...); NULL when none does. */
const qr_setting *qr_recipe_setting_for(const qr_recipe *r, qr_setting_id id, const char *op, const char *node);

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
/* The bytes an instance holds once initialized (its state, what its init allocated, histograms'
 * bins; a Gram matrix grows at its first observe: not counted), and its calibrator's name. */
size_t qr_calib_bytes(const qr_calib *c);
const char *qr_calib_name(const qr_calib *c);
/* A new instance of like's calibrator with like's parameters, its state as initialized (nothing
 * observed): what one calibration worker (or one batch) starts from. */
qr_status qr_calib_fresh(const qr_calib *like, qr_calib **out, qr_error *e);
/* x must be f32. */
qr_status qr_calib_observe(qr_calib *c, const qr_tensor *x, qr_error *e);
/* The same for x holding `samples` calibration samples (its first axis) from sample `first` of them
 * on: what observe sees as x.first and x.samples (qr_calib_observe: 0 and 1). */
qr_status qr_calib_observe_samples(qr_calib *c, const qr_tensor *x, int64_t first, int64_t samples, qr_error *e);
/* The same, given x's range as qr_f32_range computed it (the caller's, reused): x.min() and
 * x.max() in this observe return it instead of reading x again. */
qr_status qr_calib_observe_known(qr_calib *c, const qr_tensor *x, int64_t first, int64_t samples, float lo, float hi,
                                 qr_error *e);
/* The smallest and largest of d[0 .. n) (NaN ignored; +inf and -inf for none), as x.min() and
 * x.max() give them. */
void qr_f32_range(const float *d, int64_t n, float *lo, float *hi);
/* The same for d whose values (NaN aside) all lie in [blo, bhi] (a Clip's or Relu's output,
 * qr_node_act): it stops reading once what it has read holds both bounds where they decide the
 * result, which is then qr_f32_range's, the sign of a zero included (calibration's SimQuant: most
 * of MobileNetV2's activations hold 0 and 6 within their first few percent). */
void qr_f32_range_within(const float *d, int64_t n, float blo, float bhi, float *lo, float *hi);
/* Folds o's state into c's (same calibrator and parameters). */
qr_status qr_calib_merge(qr_calib *c, const qr_calib *o, qr_error *e);
qr_status qr_calib_solve(qr_calib *c, const qrl_qtype *t, qrl_qparams *out, qr_error *e);
/* A layer calibrator's solve (qrl_cal_solve_layer_fn): w [N, K] f64 in, integer codes out (each
 * checked to be an integer in t's range), scale and zero [N, ceil(K / block)] out (checked: each
 * scale a positive finite number, each zero point an integer in t's range). */
qr_status qr_calib_solve_layer(qr_calib *c, const qrl_qtype *t, int64_t block, qr_tensor *w, qr_tensor *scale,
                               qr_tensor *zero, qr_error *e);
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
