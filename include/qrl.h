/* libqrl — the public C API.
 *
 * Load an ONNX model, run it, and walk its graph: every value's type, shape
 * and (for quantized graphs) quantization parameters. Handles are opaque;
 * element types use ONNX TensorProto.DataType codes (1 = float32, 2 = uint8,
 * 3 = int8, 6 = int32, 7 = int64, 9 = bool, 11 = float64, ...), so the API
 * stays stable while the runtime's internals change.
 *
 * Functions that can fail return 0 on success and non-zero on failure, with
 * one sentence (naming the file and node) written into err[0..errlen). */
#ifndef QRL_H
#define QRL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QRL_MAX_DIMS 8

typedef struct qrl_model qrl_model;

typedef struct qrl_tensor {
    int dtype; /* ONNX TensorProto.DataType */
    int ndim;
    int64_t dims[QRL_MAX_DIMS];
    void *data; /* C order */
} qrl_tensor;

/* Quantization parameters of a value (present in integer graphs). */
typedef struct qrl_quant {
    int dtype;           /* storage type, ONNX code */
    int axis;            /* -1 per tensor, else the channel axis */
    int count;           /* number of scales / zero points */
    const float *scale;
    const int32_t *zero_point;
    double clip_min, clip_max;
    int accumulator;     /* ONNX code of the accumulator type, 0 if none */
} qrl_quant;

typedef struct qrl_value_info {
    const char *name;
    int dtype;
    int ndim;            /* -1: unknown rank */
    int64_t dims[QRL_MAX_DIMS]; /* -1: unknown (symbolic) dimension */
    int is_constant, is_input, is_output;
    int has_quant;
    qrl_quant quant;
} qrl_value_info;

const char *qrl_version(void);

/* Loads a model and runs the graph passes (Identity/Dropout removal, constant
 * folding, BatchNormalization folding). threads: 0 or 1 runs on the caller's thread. */
int qrl_model_load(const char *path, int threads, qrl_model **out, char *err, size_t errlen);
void qrl_model_free(qrl_model *m);

int qrl_model_num_inputs(const qrl_model *m);
int qrl_model_num_outputs(const qrl_model *m);
const char *qrl_model_input(const qrl_model *m, int i);
const char *qrl_model_output(const qrl_model *m, int i);

/* inputs: one per model input, in order. outputs: one per model output, filled
 * with data the caller frees with qrl_tensor_free. */
int qrl_model_run(qrl_model *m, const qrl_tensor *inputs, qrl_tensor *outputs, char *err, size_t errlen);
void qrl_tensor_free(qrl_tensor *t);

/* Graph walk, nodes in topological order. */
int qrl_model_num_nodes(const qrl_model *m);
const char *qrl_node_op(const qrl_model *m, int node);
const char *qrl_node_name(const qrl_model *m, int node);
int qrl_node_num_inputs(const qrl_model *m, int node);
int qrl_node_num_outputs(const qrl_model *m, int node);
/* Value names; NULL for an optional input or output left out. */
const char *qrl_node_input(const qrl_model *m, int node, int i);
const char *qrl_node_output(const qrl_model *m, int node, int i);
/* Type, shape and quantization of a value by name; returns non-zero if unknown. */
int qrl_value_get(const qrl_model *m, const char *name, qrl_value_info *out);

/* Top-1 accuracy of a classifier: m's first output ([batch, classes], float)
 * over data (one tensor per model input, samples along the first dimension),
 * run in batches of `batch` samples (0: 100), against labels (one integer
 * class per sample). *correct: how many samples' largest output is their label. */
int qrl_model_eval_top1(qrl_model *m, const qrl_tensor *data, const qrl_tensor *labels, int batch, int64_t *correct,
                        char *err, size_t errlen);

/* ---- Recipes and quantization ---- */

typedef struct qrl_recipe qrl_recipe;       /* a compiled recipe file (and its imports) */
typedef struct qrl_quantized qrl_quantized; /* a model quantized by a recipe */

enum { QRL_RECIPE_NO_CACHE = 1 }; /* compile in memory: no module cache read or written */

/* Compiles a recipe file and what it imports (the standard library: $QRL_STDLIB, else the
 * installed one). Its diagnostics ("file:line:col: error: ..." with the line and a caret) are
 * printed to diag (NULL: not printed); err gets one sentence. */
int qrl_recipe_compile(const char *path, int flags, FILE *diag, qrl_recipe **out, char *err, size_t errlen);
void qrl_recipe_free(qrl_recipe *r);

typedef struct qrl_quantize_opts {
    const char *recipe_name;  /* NULL: the file's first recipe */
    int batch;                /* calibration batch size; 0: 32 */
    int64_t calib_count;      /* calibration samples used; 0: all */
    int threads;              /* calibration workers; 0 or 1: the caller's thread */
    int progress;             /* a progress bar on stderr */
    const qrl_tensor *labels; /* the calibration samples' classes (integers), or NULL: top-1 in the report */
} qrl_quantize_opts;

/* Quantizes m's graph as the recipe says, calibrating on calib[i] for model input i (samples
 * along the first dimension). o may be NULL (the defaults). */
int qrl_quantize(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                 qrl_quantized **out, char *err, size_t errlen);
void qrl_quantized_free(qrl_quantized *q);

/* The integer graph the recipe lowered m to (its kernels, tables and integer ops), as a model to
 * run and walk: qrl_value_get gives every integer value's quantization. Owned by q (and freed with
 * it; qrl_model_free does nothing to it); runs on the threads m was loaded with. NULL with err set
 * when it cannot be set up. */
qrl_model *qrl_quantized_model(qrl_quantized *q, char *err, size_t errlen);

/* The outputs of a quantization, each written atomically: the QDQ ONNX model (ONNX Runtime runs it
 * on its integer kernels), every quantized tensor's qparams as JSON, the report (HTML, or JSON when
 * path ends in .json; model names the model in it), the integer graph as text. */
int qrl_quantized_save(const qrl_quantized *q, const char *path, char *err, size_t errlen);
int qrl_quantized_write_qparams(const qrl_quantized *q, const char *path, char *err, size_t errlen);
int qrl_quantized_write_report(const qrl_quantized *q, const char *model, const char *path, char *err, size_t errlen);
int qrl_quantized_write_int_graph(const qrl_quantized *q, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

/* The ONNX ops the runtime knows (default domain): for recipe checking. */
int qrl_op_known(const char *op);
/* Number of known ops; names[i] for i < count, in table order. */
int qrl_op_count(void);
const char *qrl_op_name(int i);

#endif
