/* libqrl — the public C API, and all the `qrl` command uses (cli/ is built
 * with include/ alone).
 *
 * Load an ONNX model, run it (profiled if asked, on inputs read from files),
 * and walk its graph: every value's type, shape and (for quantized graphs)
 * quantization parameters; check and compile recipes, quantize a model with
 * one and write what it made; lower a QDQ model's pairs. Handles are opaque;
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
    const char *dim_param[QRL_MAX_DIMS]; /* a graph input's or output's symbolic dimension names, or NULL */
} qrl_value_info;

const char *qrl_version(void);

/* The CPU the process runs on, read at run time: "vendor family F model M, L1d .. KB, L2 .. KB,
 * L3 .. KB, avx512 vnni" (its caches size the runtime's bands and batch parts). */
void qrl_cpu_describe(char *buf, size_t n);

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

/* Sets how m runs from now on (its executor is made again): threads (0 or 1: the caller's thread)
 * and flags (QRL_RUN_PROFILE: time every node, read with qrl_model_profile). */
enum { QRL_RUN_PROFILE = 1 };
int qrl_model_configure(qrl_model *m, int threads, int flags, char *err, size_t errlen);

/* The memory of m's last run. */
typedef struct qrl_run_stats {
    size_t arena_bytes; /* the planned arena (static plans) */
    size_t sum_bytes;   /* every intermediate tensor: what a plan without reuse would need */
    size_t peak_bytes;  /* most bytes live at once (dynamic runs: data-dependent shapes) */
    int dynamic;        /* the last run allocated each output when computed */
    size_t work_bytes;  /* the kernels' workspace (their scratch), kept across runs */
} qrl_run_stats;
void qrl_model_stats(const qrl_model *m, qrl_run_stats *out);
/* Of m's last run: the nodes run in chains by bands of rows (--option bands=auto or all). */
int qrl_model_banded_nodes(const qrl_model *m);

/* What node cost over the runs since the model was configured with QRL_RUN_PROFILE (or since
 * qrl_model_profile_reset). Returns non-zero when m is not profiling or node is out of range. The
 * nodes are those of the graph that runs, which need not be the walk's: a loaded f32 model runs its
 * convolutions channels-last, with transposes at the region's borders (qrl_model_profile_node says
 * which). */
typedef struct qrl_node_profile {
    double seconds; /* shape inference, output allocation and the kernel */
    int64_t runs;
    double macs;    /* multiply-accumulates: convolutions and matrix products, 0 for other ops */
} qrl_node_profile;
int qrl_model_profile(const qrl_model *m, int node, qrl_node_profile *out);
/* The node of the graph that runs that qrl_model_profile's node is: its op and name (valid while m
 * is). Non-zero as qrl_model_profile, nothing written then. */
int qrl_model_profile_node(const qrl_model *m, int node, const char **op, const char **name);
void qrl_model_profile_reset(qrl_model *m);

/* Prints m's graph as stable text: inputs, constants, nodes with output types and attributes. */
void qrl_model_dump(const qrl_model *m, FILE *f);

/* Reads tensor files into inputs[0..qrl_model_num_inputs(m)), checked against the inputs' declared
 * types. specs: "NAME=FILE" binds by name, "FILE" the next input not yet bound; files are .npy or
 * ONNX TensorProto .pb (a .npy is mapped, not read: see qrl_tensor_release; free the tensors with
 * qrl_tensor_free). Every input must be bound. samples: each file is a set of samples along
 * its first dimension (any count). label names the model and option the command-line option in
 * the messages ("model.onnx: missing input 'x' (f32[N,4]); pass it with -i x=FILE"). On failure
 * nothing is left in inputs. */
int qrl_model_read_inputs(const qrl_model *m, const char *label, const char *option, int n, char *const *specs,
                          int samples, qrl_tensor *inputs, char *err, size_t errlen);

/* Top-1 accuracy of a classifier: m's first output ([batch, classes], float)
 * over data (one tensor per model input, samples along the first dimension),
 * run in batches of `batch` samples (0: 100), against labels (one integer
 * class per sample). *correct: how many samples' largest output is their label. */
int qrl_model_eval_top1(qrl_model *m, const qrl_tensor *data, const qrl_tensor *labels, int batch, int64_t *correct,
                        char *err, size_t errlen);

/* ---- Tensors and files ---- */

/* A .npy file (f32 f64 f16 i8 u8 i16 u16 i32 u32 i64 u64 bool, C order) into t; free with
 * qrl_tensor_free. Writing is atomic (a temporary file renamed into place). */
int qrl_tensor_read_npy(const char *path, qrl_tensor *t, char *err, size_t errlen);
int qrl_tensor_write_npy(const char *path, const qrl_tensor *t, char *err, size_t errlen);
/* The header of a .npy file of t's dtype and dims (t->data unused) to f: the data that follows,
 * in C order, completes the file (qrl run writes its outputs a slice of samples at a time). */
int qrl_tensor_write_npy_header(FILE *f, const qrl_tensor *t, char *err, size_t errlen);
/* For a tensor qrl_model_read_inputs mapped from a .npy file (its data is the file's pages, read
 * as they are touched): bytes [from, from + len) of its data leave the process's memory -- the
 * page cache keeps them, and they are read again if touched. Nothing for other tensors. A program
 * that walks a large input a slice at a time keeps only the slice in memory. */
void qrl_tensor_release(const qrl_tensor *t, size_t from, size_t len);
/* Allocates t->data, zeroed, for t's dtype, ndim and dims. */
int qrl_tensor_alloc(qrl_tensor *t, char *err, size_t errlen);
int64_t qrl_tensor_numel(const qrl_tensor *t);
/* Element i (C order) set to v, converted to t's dtype. */
void qrl_tensor_set_f64(qrl_tensor *t, int64_t i, double v);
/* "f32[1,3,224,224]" into buf; returns buf. */
const char *qrl_tensor_type_str(const qrl_tensor *t, char *buf, size_t n);
/* ONNX element types: floating point (f16, bf16, f32, f64), integer (bool excluded). */
int qrl_dtype_is_float(int dtype);
int qrl_dtype_is_int(int dtype);
/* Bytes per element of an ONNX element type; 0 when unknown or not a tensor's (string). */
size_t qrl_dtype_size(int dtype);

/* mkdir -p: dir and its missing parents. */
int qrl_make_dirs(const char *dir, char *err, size_t errlen);
/* An output file written atomically: write to qrl_output_stream, then commit (fsync, rename into
 * place) or abort (remove); either frees o. */
typedef struct qrl_output qrl_output;
int qrl_output_open(const char *path, qrl_output **out, char *err, size_t errlen);
FILE *qrl_output_stream(qrl_output *o);
int qrl_output_commit(qrl_output *o, char *err, size_t errlen);
void qrl_output_abort(qrl_output *o);
/* Text from a model or a user (names, paths) made safe to print: control characters, DEL and
 * bytes that are not UTF-8 as \xHH, a backslash as \\; into out (truncated to n), returned. */
char *qrl_text_printable(const char *s, char *out, size_t n);
/* s as a JSON string literal to f: escaped, and valid UTF-8 whatever s holds (U+FFFD for bad bytes). */
void qrl_fput_json_string(FILE *f, const char *s);
/* Whether path may be written as an output: 0, else -1 and err says why (it exists and is a
 * directory, a device, a FIFO or a symbolic link, which are never replaced; or its directory
 * cannot be written). Every output writer checks it; a command checks before its long work. */
int qrl_output_check(const char *path, char *err, size_t errlen);
/* Outputs all or nothing, for the calling thread: after qrl_outputs_begin, every output file
 * written (qrl_quantized_save, qrl_quantized_write_*, qrl_output_commit, ...) is finished but
 * left beside its path; qrl_outputs_commit renames them all into place, qrl_outputs_abort
 * removes them (the files that were there before stay as they were). */
void qrl_outputs_begin(void);
int qrl_outputs_commit(char *err, size_t errlen);
void qrl_outputs_abort(void);
/* Removes the temporary files of outputs still open when SIGINT, SIGTERM, SIGHUP or SIGQUIT
 * arrives, then dies of the signal as before. */
void qrl_cleanup_on_signals(void);

/* Processes of one job (mpirun -np N qrl quantize ...; docs/distributed.md). qrl_dist_linked: this
 * binary has the MPI transport (build/qrl-mpi). qrl_dist_start: joins the job when mpirun started
 * the process (0; alone, it does nothing), -1 with err set when it cannot. qrl_dist_rank and
 * qrl_dist_size: 0 and 1 alone. qrl_dist_end(status): leaves the job; a non-zero status ends
 * every rank of it (the others may be waiting on this one). */
int qrl_dist_linked(void);
int qrl_dist_start(int *argc, char ***argv, char *err, size_t errlen);
int qrl_dist_rank(void);
int qrl_dist_size(void);
void qrl_dist_end(int status);

/* Process-wide limits: the bytes a run may allocate for tensors (0: half the RAM), checked when a
 * run is planned; the seconds one call of recipe code may run (0: no limit; default 60). */
void qrl_set_max_memory(size_t bytes);
/* The budget in effect: the one set, else half the RAM. */
size_t qrl_max_memory(void);
void qrl_set_recipe_time_limit(double seconds);
/* Process-wide run-time switches (docs/runtime.md, "Switches"), set before any run starts: 0, or
 * 1 with err naming the option and the values it takes. "kernels": auto (the CPU's fastest),
 * portable (every kernel's portable path) or avx2, avxvnni, avx512vnni (the integer kernels of
 * that instruction set, when the CPU has it); "iconv-jit": integer convolutions on kernels compiled
 * for each layer's shape (AVX-512 VNNI CPUs; the same results): auto (the default) uses those the
 * module cache holds and compiles the missing ones in a background thread for later runs, 1
 * compiles each before its layer first runs, 0 uses none. The tests' own
 * switches (qrl --option NAME=VALUE): igemm, sgemm, quant, window, f32-rows, fuse, nhwc,
 * epilogue, split, poison, effects, bands. No environment variable sets one. */
int qrl_set_option(const char *name, const char *value, char *err, size_t errlen);

/* The kernels compiled for layer shapes (the iconv-jit option) this process holds: loaded from
 * the module cache, compiled (of them, by the background thread), and asked for but still queued
 * or compiling -- those layers run their generic kernels meanwhile. */
typedef struct qrl_shape_kernels {
    long loaded, compiled, background, pending;
} qrl_shape_kernels;
void qrl_shape_kernel_counts(qrl_shape_kernels *k);
/* Stops the background compilation: the kernel being compiled is finished into the cache (so no
 * scratch file is left), the queue is dropped, and later requests compile in the background again.
 * A program need not call it: at exit (a return from main, exit()) the library stops the thread
 * before libgccjit's own exit handlers run, which must not run while it compiles (the process's
 * first compilation, with the optimizers that register them, is made before the thread starts;
 * compiler/jitrun.h). Calling it first ends a program sooner (a compilation under way finishes). */
void qrl_shape_kernels_stop(void);
/* Waits until the background compilation has compiled every kernel asked for so far (qrl bench,
 * after its warm-up run: the timed runs then see the steady state). */
void qrl_shape_kernels_wait(void);

/* ---- Recipes and quantization ---- */

typedef struct qrl_recipe qrl_recipe;       /* a compiled recipe file (and its imports) */
typedef struct qrl_quantized qrl_quantized; /* a model quantized by a recipe */

enum { QRL_RECIPE_NO_CACHE = 1 }; /* compile in memory: no module cache read or written */

/* Compiles a recipe file and what it imports (the standard library: $QRL_STDLIB, else the one
 * installed beside libqrl.so or the program, <prefix>/share/qrl/stdlib, or in the source tree
 * it was built from; a program linked with an installed libqrl.a sets QRL_STDLIB, see
 * `pkg-config --variable=stdlibdir qrl`). Its diagnostics ("file:line:col: error: ..." with the line and a caret) are
 * printed to diag (NULL: not printed); err gets one sentence. */
int qrl_recipe_compile(const char *path, int flags, FILE *diag, qrl_recipe **out, char *err, size_t errlen);
void qrl_recipe_free(qrl_recipe *r);

typedef struct qrl_quantize_opts {
    const char *recipe_name;  /* NULL: the file's first recipe */
    int batch;                /* calibration batch size; 0: 32, fewer for large activations */
    int64_t calib_count;      /* calibration samples used; 0: all */
    int threads;              /* calibration workers; 0 or 1: the caller's thread */
    int progress;             /* a progress bar on stderr */
    const qrl_tensor *labels; /* the calibration samples' classes (integers), or NULL: top-1 in the report */
} qrl_quantize_opts;

/* Quantizes m's graph as the recipe says, calibrating on calib[i] for model input i (samples
 * along the first dimension). o may be NULL (the defaults). */
int qrl_quantize(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                 qrl_quantized **out, char *err, size_t errlen);
/* qrl_quantize with flags, the options that came after libqrl.so.0 (the library reads
 * qrl_quantize_opts as its first header laid it out): QRL_QUANTIZE_MATMULNBITS, for weight-only
 * recipes, 4-bit blocked MatMul/Gemm weights as ONNX Runtime's MatMulNBits (qrl quantize
 * --weight-format matmulnbits). qrl_quantize is this with flags 0. */
enum { QRL_QUANTIZE_MATMULNBITS = 1 };
int qrl_quantize_flags(const qrl_model *m, const qrl_recipe *r, const qrl_tensor *calib, const qrl_quantize_opts *o,
                       int flags, qrl_quantized **out, char *err, size_t errlen);
void qrl_quantized_free(qrl_quantized *q);

/* The integer graph the recipe lowered m to (its kernels, tables and integer ops), as a model to
 * run and walk: qrl_value_get gives every integer value's quantization (a value the graph computes
 * channels last is named "<name>_nhwc", with NHWC dims, docs/quantizer.md). Owned by q (and freed with
 * it; qrl_model_free does nothing to it); runs on the threads m was loaded with. NULL with err set
 * when it cannot be set up. */
qrl_model *qrl_quantized_model(qrl_quantized *q, char *err, size_t errlen);

/* The outputs of a quantization, each written atomically: the QDQ ONNX model (ONNX Runtime runs it
 * on its integer kernels), every quantized tensor's qparams as JSON, the report (HTML, or JSON when
 * path ends in .json; model names the model in it), the integer graph as text. */
int qrl_quantized_save(const qrl_quantized *q, const char *path, char *err, size_t errlen);
/* qrl_quantized_save with ONNX external data: when external is non-zero, or when the model would
 * pass protobuf's 2 GB (qrl_quantized_save does the same then), the initializers of 1 KB or more
 * are written to path + ".data" beside the model, which names it by its file name, with each
 * tensor's offset and length; both files are written all or nothing. */
int qrl_quantized_save_external(const qrl_quantized *q, const char *path, int external, char *err, size_t errlen);
int qrl_quantized_write_qparams(const qrl_quantized *q, const char *path, char *err, size_t errlen);
int qrl_quantized_write_report(const qrl_quantized *q, const char *model, const char *path, char *err, size_t errlen);
int qrl_quantized_write_int_graph(const qrl_quantized *q, const char *path, char *err, size_t errlen);
/* The model as the recipe's transforms left it (f32, before quantization) as ONNX; without a
 * transform setting, an error saying so. */
int qrl_quantized_write_transformed(const qrl_quantized *q, const char *path, char *err, size_t errlen);

/* What a quantization did (qrl quantize prints it). */
typedef struct qrl_quant_summary {
    int nodes_pattern, nodes_affine, nodes_float; /* the model's nodes: matched by patterns, run by affine rules, f32 */
    int activations, weights;                     /* tensors quantized */
    int fallbacks;                                /* activations the recipe's fallback left in f32 */
    int kernels, lookups, int_ops, requants, islands; /* the integer graph: kernel calls, lookup tables, integer
                                                         ops, requantizations, f32 islands */
    int64_t samples;                              /* calibration samples used */
    double calib_ms, fp32_ms;                     /* the calibration, and one f32 pass over the same samples */
    double output_sqnr;                           /* dB, the outputs of the integer graph against f32 */
    int64_t output_nonfinite;                     /* output elements the integer graph makes NaN or inf */
    int64_t validate_samples;                     /* held out from calibration by the recipe's validate: what
                                                   * output_sqnr and the fallback were measured on (0: none) */
    double output_sqnr_calib;                     /* dB, output_sqnr on the calibration samples */
    double output_cosine;                         /* the outputs' cosine similarity to f32's */
    double output_agreement;                      /* share of output rows whose argmax is f32's */
    double macs, macs_int;                        /* per sample: Conv/Gemm/MatMul MACs, and those in integers */
    double top1_fp32, top1_int8;                  /* with labels (qrl_quantize_opts): top-1 in %; NaN otherwise */
    int64_t top1_samples;
    int dynamic; /* activations quantized at run time (no calibrated scale), not counted in activations */
} qrl_quant_summary;
void qrl_quantized_summary(const qrl_quantized *q, qrl_quant_summary *out);
/* What a quantization tells beside qrl_quant_summary (which keeps libqrl.so.0's layout), a call
 * for each. Activations the fallback's 16-bit step (fallback = u16 then f32) left at 16 bits: */
int qrl_quantized_widened(const qrl_quantized *q);
/* 1 when the recipe's search_floor gave the fallback's search up (every tensor left went to f32
 * before the effects were measured), else 0: */
int qrl_quantized_search_given_up(const qrl_quantized *q);
/* 1 when the recipe's idle = drop sent what the search kept to f32 (it ran nothing on the integers:
 * no kernel, lookup table, integer op or requantization), else 0: */
int qrl_quantized_idle_to_f32(const qrl_quantized *q);
/* Samples per calibration and measurement run: */
int qrl_quantized_batch(const qrl_quantized *q);
/* With samples held out (validate), of the summary's samples those its output_sqnr_calib is
 * measured on (the first ones: the recipe's calibrate_figure_samples; all of those measured when it
 * is not set) into *figure, and those the f32 pass ran on into *fp32 (0: every one; fewer when the
 * pass is only for that figure: fp32_ms is then its time scaled to every sample). A NULL pointer is
 * not written. */
void qrl_quantized_calibrate_figure(const qrl_quantized *q, int64_t *figure, int64_t *fp32);
/* 1: a weight-only recipe (activation = f32): weights quantized, no integer graph. */
int qrl_quantized_weight_only(const qrl_quantized *q);
/* The outputs' figures beside output_sqnr: the model's outputs (n_outputs); dB over every output's
 * elements together (pooled); dB of the worst output's own (worst: output_sqnr with outputs =
 * worst) and its name (worst_name; NULL: none measured); the recipe's samples = F, the fn that
 * reduced each sample's figures to output_sqnr and the two above (samples_fn; NULL: pooled over
 * the samples, their sums added); dB of output_sqnr pooled over the samples (energy, with samples
 * = F). A NULL pointer is not written. */
void qrl_quantized_output_figures(const qrl_quantized *q, int *n_outputs, double *pooled, double *worst,
                                  const char **worst_name, const char **samples_fn, double *energy);
/* The recipe's accumulate = iN (bits: 32 for i32) and overflow = saturate (saturate, else it
 * wraps); with a narrow accumulator (N < 32 or saturating), its partial sums over the measured
 * samples (sums), those that left the range (overflows), and the layers that have one (layers) and
 * that overflowed (overflowing). A NULL pointer is not written. */
void qrl_quantized_accumulator(const qrl_quantized *q, int *bits, int *saturate, int64_t *sums, int64_t *overflows,
                               int *layers, int *overflowing);
/* The quantized weights' integers at their bit width (bytes: 4-bit ones packed two to a byte;
 * scales and zero points not counted), the same weights in f32 (f32_bytes), and of the summary's
 * weights those stored in 4 bits (weights_4bit). A NULL pointer is not written. */
void qrl_quantized_weight_bytes(const qrl_quantized *q, int64_t *bytes, int64_t *f32_bytes, int *weights_4bit);

/* One quantized activation, i < qrl_quantized_summary's activations + dynamic (the calibrated ones
 * first; those quantized at run time have NaN SQNRs). */
typedef struct qrl_layer_info {
    const char *value;  /* its name in the model */
    double sqnr;        /* dB against f32, simulated on the calibration samples */
    double sqnr_int;    /* dB as the integer graph computes it; NaN when it is not on integers */
    double top1_delta;  /* with labels: top-1 points with this layer alone quantized, minus f32's; NaN otherwise */
} qrl_layer_info;
int qrl_quantized_layer(const qrl_quantized *q, int i, qrl_layer_info *out);
/* Of activation i (as qrl_quantized_layer): a narrow accumulator's (accumulate = iN) partial sums
 * in the layer that writes it (sums) and those that left the range (overflows), over the measured
 * samples; -1 when no narrow accumulator writes it. Non-zero past the last, nothing written then. */
int qrl_quantized_layer_acc(const qrl_quantized *q, int i, int64_t *sums, int64_t *overflows);
/* Of activation i (as qrl_quantized_layer): its effect, the outputs' SQNR in dB with it alone
 * quantized as the recipe's rank measured it (NaN: not measured). Non-zero past the last. */
int qrl_quantized_layer_effect(const qrl_quantized *q, int i, double *effect);

/* Where the quantization's time went (qrl quantize --profile), phase i in order: its name (the f32
 * pass, calibration, the fallback's measurements, the measurement of what ships), its wall
 * seconds and the process's CPU seconds (every thread's). Non-zero past the last. The struct
 * keeps the layout programs built against libqrl.so.0 have (the library writes all of it):
 * what a phase tells besides has an accessor of its own. */
typedef struct qrl_quant_phase {
    const char *name;
    double seconds, cpu_seconds;
} qrl_quant_phase;
int qrl_quantized_phase(const qrl_quantized *q, int i, qrl_quant_phase *out);
/* The process's peak resident memory so far at the end of phase i (bytes; 0 where the system does
 * not say) into *bytes: a phase whose figure is above the one before set a new peak. Non-zero past
 * the last. */
int qrl_quantized_phase_peak(const qrl_quantized *q, int i, int64_t *bytes);
/* rank = effect's runs of each layer alone from its cut: the most bytes of the f32 run's values they
 * held as copies at once (the rest they read where the f32 run keeps them) into *bytes; 0 when
 * nothing was ranked so. Returns 0. */
int qrl_quantized_effects_copied(const qrl_quantized *q, int64_t *bytes);
/* The most samples one run of rank = effect's effects (the f32 run or a layer's) and one of the
 * measurement of what ships took at once (a batch, or half of one where a batch's activations
 * outweigh the model's constants: the same figures) into *effects and *shipped; 0 where none ran.
 * Returns 0. */
int qrl_quantized_run_samples(const qrl_quantized *q, int64_t *effects, int64_t *shipped);
/* The runs phase i made (its executors' node-runs x samples: every node of the graph run but the
 * quantization's QuantizeLinear and DequantizeLinear, a pattern's requantizing kernel, Shape and
 * what is made from constants alone, times the samples of the run) into *node_samples. Non-zero
 * past the last. */
int qrl_quantized_phase_runs(const qrl_quantized *q, int i, int64_t *node_samples);
/* One f32 pass over the calibration samples in the same unit (*pass: the model's nodes counted so
 * x the samples calibrated on and held out), and what the whole quantize ran (*total: the phases
 * and what ran between them). A phase's node_samples / *pass is its runs in f32 passes. */
void qrl_quantized_runs(const qrl_quantized *q, int64_t *pass, int64_t *total);
/* The same in issue 24's two units. The runs over the samples calibrated on (calibration, the f32
 * pass, the figure on the calibration samples, a recipe's transform's runs) into *calibrate, and
 * one f32 pass over those samples into *calibrate_pass; the runs over the samples judged on (the
 * fallback: local measurement, tries, effects, search; the measurement of what ships: the held-out
 * samples, or the calibration samples when none is held out) into *validate, and one f32 pass over
 * them into *validate_pass; *calibrate + *validate is qrl_quantized_runs' *total. *ranked: the
 * tensors the fallback's search ranked by their effect (0: no search). Under mpirun, the job's. */
void qrl_quantized_runs_split(const qrl_quantized *q, int64_t *calibrate_pass, int64_t *calibrate,
                              int64_t *validate_pass, int64_t *validate, int *ranked);
/* Of phase i's runs (qrl_quantized_phase_runs), those over the samples judged on, into *validate.
 * Non-zero past the last. */
int qrl_quantized_phase_runs_validate(const qrl_quantized *q, int i, int64_t *validate);

/* The fallback's measurement i of the model's outputs, in order: with fallen_back layers of its
 * ranking in f32, on the first samples measured samples (the recipe's search_samples: the binary
 * search's tries on fewer), whether the recipe's condition held, and the output SQNR (dB) it
 * judged. Non-zero past the last. The struct keeps libqrl.so.0's layout: */
typedef struct qrl_search_try {
    int fallen_back;
    int64_t samples;
    int holds;
    double output_sqnr;
} qrl_search_try;
int qrl_quantized_search_try(const qrl_quantized *q, int i, qrl_search_try *out);
/* Of measurement i, into *out: of its samples those run for it (the rest kept from an earlier try
 * of the same layers; 0: the answer's graphs only rebuilt); the layers of its ranking it left at 16
 * bits (fallback = u16 then f32). Non-zero past the last, nothing written then. */
int qrl_quantized_search_try_ran(const qrl_quantized *q, int i, int64_t *out);
int qrl_quantized_search_try_widened(const qrl_quantized *q, int i, int *out);
/* Of measurement i, into *out: 1 when it tried values quantized at run time in f32 (a dynamic
 * recipe's fallback, after the calibrated tensors' search; fallen_back then counts those values),
 * else 0. Non-zero past the last. */
int qrl_quantized_search_try_dynamic(const qrl_quantized *q, int i, int *out);

/* The quantization parameters of a tensor of the model q was made from, by its name in that
 * model (as qrl_model_input, qrl_node_input and qrl_node_output give them; not the integer
 * graph's "<name>_quantized", "<name>_nhwc" or "<name>_f32"): for a back end that computes on
 * its own. Activations are per tensor (axis -1, count 1; clip_min and clip_max the real range
 * the integers cover); weights and biases have one scale and zero point per channel along
 * axis (or axis -1, count 1), with clip_min and clip_max NaN. An activation quantized at run
 * time (a dynamic recipe) has count 0 and no scale or zero point. Returns non-zero when the
 * tensor is not quantized (left in f32, or no such name). out's arrays are q's. For a QDQ
 * model lowered by qrl_model_lower_qdq the names are the file's, and every tensor of a
 * QuantizeLinear/DequantizeLinear pair answers (QRL's export: "<name>_f32", "<name>_quantized"
 * and "<name>", the DequantizeLinear's output, which is the original name). */
int qrl_quantized_qparams(const qrl_quantized *q, const char *name, qrl_quant *out);
/* The name of quantized tensor i (the activations, then the weights and biases), for
 * qrl_quantized_qparams; NULL past the last. */
const char *qrl_quantized_tensor(const qrl_quantized *q, int i);

/* The notes of a quantization: nodes the recipe's rules left in f32, and why. NULL past the last. */
const char *qrl_quantized_note(const qrl_quantized *q, int i);

/* The recipe's steps = measure (a recipe with transform lines): step i's name ("none", then each
 * transform's in the recipe's order) and the outputs' SQNR against f32 after the chain's first i
 * transforms with every layer the recipe quantizes quantized (before the fallback), on the
 * calibration samples and on the held-out ones (NaN when none are held out). NULL past the last,
 * and for a recipe that measured none. */
const char *qrl_quantized_step(const qrl_quantized *q, int i, double *calibrate_db, double *validate_db);

/* Mixed precision (a weight-only recipe with candidate = ... and budget = ...): what was chosen
 * among. qrl_quantized_mixed: 0 and *out filled when q chose precisions per layer, else non-zero. */
typedef struct qrl_mixed_info {
    int layers, choices;         /* the MatMul/Gemm weights chosen for; the types chosen among */
    int front;                   /* the Pareto front's points (bytes against predicted error) */
    const char *budget_kind;     /* "bits" or "bytes" */
    double budget;               /* the recipe's budget = bits(N) or bytes(N) */
    int64_t choose_samples;      /* the samples the layers were measured and chosen on */
    int64_t heldout_samples;     /* the held-out samples the measured SQNRs are on (0: none held out) */
    int points;                  /* the points qrl_quantized_mixed_point gives */
} qrl_mixed_info;
int qrl_quantized_mixed(const qrl_quantized *q, qrl_mixed_info *out);
/* The samples the measured SQNRs are on, into *out (qrl_mixed_info keeps the layout it came with
 * in libqrl.so.0): 0, or non-zero, nothing written, as qrl_quantized_mixed. */
int qrl_quantized_mixed_measured_samples(const qrl_quantized *q, int64_t *out);
/* Choice i's type ("i4", "i8", "f32"); NULL past the last. */
const char *qrl_quantized_mixed_choice(const qrl_quantized *q, int i);
/* Point i of those shown (ascending bytes): some of the front, the chosen assignment and each
 * uniform one (every layer choice `uniform`). non-zero past the last. */
typedef struct qrl_mixed_point {
    double bytes;     /* the model's bytes */
    double bits;      /* the weights' average bits (codes, scales and zero points), weighted by MACs */
    double predicted; /* dB, the outputs' SQNR predicted from each layer's own error (choosing samples) */
    double measured;  /* dB, the outputs' SQNR of a real run on the held-out samples */
    int chosen;       /* 1: what ships */
    int uniform;      /* -1, or the choice every layer takes */
    int counts[8];    /* layers per choice (the first 8 choices) */
} qrl_mixed_point;
int qrl_quantized_mixed_point(const qrl_quantized *q, int i, qrl_mixed_point *out);
/* Layer i: its weight's name and the choice it ships with; non-zero past the last. */
int qrl_quantized_mixed_layer(const qrl_quantized *q, int i, const char **weight, int *choice);

/* A QDQ model (QuantizeLinear/DequantizeLinear pairs: an export of qrl_quantized_save or a third
 * party's) on integers: m becomes its float graph, in place, and *out the integer graph that the
 * recipe's patterns and affine rules lower it to with the file's qparams (qrl_quantized_model runs
 * it). recipe: NULL for the standard library's qdq.qrl; its diagnostics are printed to diag. *out
 * is NULL (and m unchanged) when m has no such pairs. After a failure m may be its float graph. */
int qrl_model_lower_qdq(qrl_model *m, const char *recipe, FILE *diag, qrl_quantized **out, char *err, size_t errlen);

/* Checks a recipe file as `qrl check` does: parses and checks it with its imports, and when it is
 * clean validates what its recipes reach with libgccjit (flags: QRL_RECIPE_NO_CACHE). Diagnostics
 * go to diag, the syntax tree to ast (NULL: not printed). Returns non-zero only when it could not
 * run (err set); the recipe's errors are counted in st->errors. */
#define QRL_CHECK_MAX_PARTS 2
typedef struct qrl_check_part {
    const char *name;   /* "code" or "kernels" */
    int items, opt_level;
    int validated;      /* 1 validated without code generation now, 2 validated before (cached) */
    int cache_hit;      /* 1 loaded from the cache, 0 compiled and stored, -1 cache not used */
    int cache_rebuilt;  /* a bad cache entry was replaced */
    double jit_ms, load_ms;
} qrl_check_part;
typedef struct qrl_check_stats {
    int errors;
    int files;                          /* the file and its imports */
    double lex_ms, parse_ms, check_ms;
    int cache_hit, cache_rebuilt;       /* as a part's, for the whole module (-1: nothing compiled) */
    double jit_ms, load_ms;
    int reach;                          /* only what the recipes reach was compiled */
    int nparts;
    qrl_check_part parts[QRL_CHECK_MAX_PARTS];
} qrl_check_stats;
int qrl_recipe_check(const char *path, int flags, FILE *diag, FILE *ast, qrl_check_stats *st, char *err,
                     size_t errlen);

/* The ONNX ops the runtime knows (default domain): for recipe checking. */
int qrl_op_known(const char *op);
/* Number of known ops; names[i] for i < count, in table order. */
int qrl_op_count(void);
const char *qrl_op_name(int i);

#ifdef __cplusplus
}
#endif

#endif
