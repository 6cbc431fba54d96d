/* Post-training quantization driven by a compiled recipe (runtime/recipe.h).
 * The C side is mechanism only; every decision comes from the recipe:
 *
 *   plan       the recipe's patterns are matched (largest first), giving each
 *              value a role (activation, weight, bias, output); nodes no
 *              pattern claims run on quantized data when an affine rule
 *              allows it (same / fixed / requantize), else stay f32;
 *   simulate   a copy of the graph where weights are fake-quantized and every
 *              activation slot gets a SimQuant node;
 *   calibrate  one pass over the calibration set in batches: in topological
 *              order each SimQuant folds its input into its calibrator,
 *              solves, and passes the fake-quantized value downstream, so
 *              each choice sees the error of those upstream; a final solve
 *              fixes every slot;
 *   export     the QDQ graph: QuantizeLinear/DequantizeLinear pairs on every
 *              slot, weights as integer constants with (per-channel)
 *              DequantizeLinear, biases as int32 with scale s_x * s_w;
 *   lower      the integer graph: the recipe's kernels and tables on the
 *              integers (quantizer/intgraph.h). */
#ifndef QR_QUANTIZE_H
#define QR_QUANTIZE_H

#include <stdint.h>

#include "graph.h"
#include "recipe.h"
#include "status.h"
#include "tensor.h"

typedef struct qr_quant_opts {
    const qrl_module *module;
    const char *recipe;  /* NULL: the module's first recipe */
    int batch;           /* calibration batch size; 0: 32, or fewer for large activations (qr_quantize) */
    int64_t calib_count; /* samples used; 0 = all */
    int threads;
    int progress; /* a progress bar on stderr */
    int from_file; /* g is a QDQ model stripped by qr_qdq_strip: its qparams, no calibration (calib unused) */
    const qr_tensor *labels; /* class labels of the calibration samples (integers): top-1 effects in the report */
    int matmulnbits; /* weight-only: 4-bit blocked MatMul/Gemm weights exported as com.microsoft MatMulNBits */
    size_t run_bytes; /* set by qr_quantize: one batch's f32 run, as probed (0: unknown), for how many
                       * runs go side by side within the memory budget */
    struct qr_spread *spread; /* set by qr_quantize: validate_from = spread's copy of the samples, whose
                               * calibrating part leaves memory while only the held-out part is used */
} qr_quant_opts;

/* One quantized activation, for reports and the quantization-info JSON. */
typedef struct qr_qlayer {
    const char *value; /* name in the QDQ graph */
    const char *op;    /* its producer's op ("input" for a graph input) */
    const char *how;   /* "calibrated", "same as <value>", "fixed" */
    qr_dtype dtype;
    double lo, hi;     /* observed range (calibrated slots) */
    double scale;
    int64_t zero;
    int64_t qmin, qmax;
    double sqnr;    /* dB, of this tensor in the quantized model against f32 (measured on calibration data) */
    double sqnr_local; /* dB, the error its layer alone adds (f32 inputs): the fallback's ranking */
    double macs;       /* per sample: the multiply-accumulates of the matches that run on the integers only
                        * while this value is quantized (its layer's input or output): what sending it to
                        * f32 costs at most (matches needing several values count in each) */
    double effect;     /* dB, the outputs' SQNR with this layer alone quantized, as the recipe's rank measured or
                        * estimated it for the fallback's search (NaN: the search did not rank it) */
    double top1_delta; /* with labels: top-1 (points) with only this layer quantized, minus f32's; NaN otherwise */
    double sqnr_int; /* dB, the same as the integer graph computes it (NaN: not on the integers) */
    double clipped; /* fraction of f32 values outside the representable range */
    /* accumulate = iN: the partial sums of its layer's accumulator and those that left the range
     * (wrapped or saturated) on the measured samples; acc_on 0: no narrow accumulator writes it */
    int acc_on;
    int64_t acc_sums, acc_overflows;
    int fallback;   /* the recipe's fallback condition held: left in f32 */
    int step16;      /* fallback = u16 then f32: 1 where the 16-bit step is open to it, 0 closed, -1 no step */
    double effect16; /* dB, as effect at 16 bits (NaN: not measured) */
    const char *runs; /* how its producer runs in the integer graph */
    int dynamic;      /* quantized at run time (role dynamic), no scale or zero point fixed: 1 per tensor,
                       * 2 per row; lo, hi then the range seen in the f32 pass over the calibration
                       * samples (NaN: none), scale NaN */
} qr_qlayer;

struct qr_intgraph;

/* One measurement of the fallback's search (for --profile and the report): with the first
 * fallen_back layers of its ranking in f32 (and widened at 16 bits: fallback = u16 then f32), the
 * outputs on the first samples measured samples, ran of them run for it (the others' sums kept from
 * an earlier try of the same layers; 0: the answer's graphs only rebuilt). */
typedef struct qr_search_try {
    int fallen_back, widened;
    int dynamic; /* a try of the values quantized at run time: fallen_back counts those in f32 */
    int64_t samples, ran;
    int holds; /* the recipe's condition held for none left quantized, the outputs finite */
    double output_sqnr;
    /* calibrate_samples = F: the output SQNR on the calibration samples by F, measured when the
     * try held on the judge samples (holds is then both); NaN: not measured */
    double calibrate_sqnr;
} qr_search_try;

/* The recipe's steps = measure: after each prefix of its transform chain (none, then each transform
 * setting's name in order), the outputs' SQNR against f32 with every layer the recipe quantizes
 * quantized (no fallback), on the held-out samples (NaN when none are held out) and on the
 * calibration samples its output_sqnr_calib is measured on. */
typedef struct qr_step_figure {
    const char *name; /* "none" or the transform's (the module's string) */
    double calibrate_db, validate_db;
} qr_step_figure;

/* A phase of qr_quantize's time (for --profile): its wall and process CPU milliseconds, the
 * process's peak resident memory so far at its end (bytes; 0 where the system does not say), and
 * the runs it made: node-runs x samples (qr_exec_node_samples), whose unit of one f32 pass over the
 * calibration samples is qr_quantized.pass_node_samples. */
typedef struct qr_phase_time {
    const char *name;
    double ms, cpu_ms;
    int64_t peak_bytes;
    int64_t node_samples;
    int64_t validate_node_samples; /* of them, those run on the judge samples (QR_RUNS_VALIDATE) */
} qr_phase_time;

/* The run counter's accounts (qr_exec_account) a quantize counts into: the runs over the samples
 * it calibrates on (calibration, the f32 pass, the figure on them, ...), and those over the samples
 * the fallback and the measurement of what ships judge on (the held-out ones; the calibration
 * samples themselves when none is held out). */
enum { QR_RUNS_CALIBRATE = 0, QR_RUNS_VALIDATE = 1 };

enum { QR_MAX_PHASES = 16 };

typedef struct qr_quantized {
    qr_graph *qdq;                 /* the artifact: QuantizeLinear/DequantizeLinear, ONNX numerics */
    struct qr_intgraph *ig;        /* the integer graph of the recipe's own kernels (quantizer/intgraph.h) */
    qr_qlayer *layers; /* the calibrated activations, then those quantized at run time (dynamic) */
    int nlayers, ndynamic;
    int nodes_pattern, nodes_affine, nodes_float; /* how the graph's nodes are executed */
    int weights;                                  /* weight tensors quantized */
    int weights_4bit;                             /* of them, 4-bit ones */
    int64_t weight_bytes, weight_f32_bytes;       /* their integers (4-bit packed), and their f32 */
    int64_t samples;                              /* calibration samples used */
    double calib_ms;                              /* the calibration pass */
    double fp32_ms;                               /* one fp32 pass over the same samples */
    int fallbacks;                                /* layers the recipe's fallback sent back to f32 */
    int widened;                                  /* layers its 16-bit step (fallback = u16 then f32) left at 16 bits */
    double output_sqnr;                           /* dB, the model's outputs from the integer graph against f32 */
    int64_t output_nonfinite;                     /* output elements the integer graph makes NaN or inf */
    int64_t validate_samples;                     /* held out from calibration by the recipe's validate: what
                                                   * output_sqnr and the fallback were measured on (0: none) */
    int64_t validate_skipped;                       /* what validate would have held out, fewer than the
                                                   * recipe's validate_least: so none was (0: not so) */
    int64_t held_out_peak_samples;                /* validate_from = spread: the most held-out samples in
                                                   * memory at once through the fallback and the measurement
                                                   * of what ships (whole units of the copy; 0: no copy) */
    double output_sqnr_calib;                     /* dB, output_sqnr on the calibration samples */
    int64_t calib_figure_samples;                 /* of them, those output_sqnr_calib is measured on (the first
                                                   * ones: the recipe's calibrate_figure_samples) */
    int64_t fp32_samples;                         /* those the f32 pass ran on: fp32_ms is its time scaled to
                                                   * every sample (0: as many as calibrated) */
    double output_cosine;                         /* the outputs' cosine similarity to f32's */
    double output_agreement;                      /* share of output rows whose argmax is f32's */
    double output_sqnr_pooled, output_sqnr_worst; /* dB: over all outputs' elements; the worst output's */
    const char *output_worst;                     /* the worst output's name (the model's), or NULL */
    /* the recipe's samples = F (the fn's name; NULL: pooled): output_sqnr and the two above are F's
     * of each sample's own sums; output_sqnr_energy is what output_sqnr is without it (pooled) */
    const char *output_samples;
    double output_sqnr_energy;
    int n_outputs;
    double macs, macs_int;                        /* per sample: Conv/Gemm/MatMul MACs, and those in integer kernels */
    double top1_fp32, top1_int8;                  /* with labels: top-1 (%) on the measured samples; NaN otherwise */
    int64_t top1_samples;
    int batch;                                    /* samples per calibration and measurement run */
    int acc_bits, acc_saturate;                   /* the recipe's accumulate = iN (32 for i32) and overflow */
    const char *recipe;                           /* the recipe used */
    char **notes;                                 /* nodes the recipe's rules left in f32, and why */
    int nnotes;
    qr_graph *upgraded; /* the model upgraded to opset 13 that was quantized (an older one's copy), or NULL */
    qr_graph *transformed; /* the recipe's transform applied to the model: what was quantized, or NULL */
    int calib_only; /* a rank other than 0 of a distributed job (runtime/dist.h): it took its share of the
                     * calibration, measurements and search, and exports nothing (its layers and export
                     * form are not filled in) */
    struct qr_mixed_info *mixed; /* mixed precision's layers, choices and front (quantizer/mixed.h), or NULL */
    qr_graph *reference;   /* the model before the recipe's bias corrections, which the outputs are judged
                            * against (they change the transformed model's f32 function), or NULL */
    qr_search_try *tries;  /* the fallback's measurements of the outputs, in order (ntries) */
    int ntries;
    int gave_up;           /* the recipe's search_floor sent every tensor left to f32 before the effects */
    int idle;              /* idle = drop: what the search kept ran nothing on the integers, so it went to f32 */
    qr_step_figure *steps; /* steps = measure: the transform chain's prefixes, in order (nsteps); NULL */
    int nsteps;
    qr_phase_time phases[QR_MAX_PHASES]; /* where the time went, in order (nphases) */
    int nphases;
    /* one f32 pass over the calibration samples (those calibrated on and those held out), in
     * node-runs x samples: the quantized graph's qr_exec_count_nodes x the samples; and what the
     * whole quantize ran (every phase, and what ran outside them) */
    int64_t pass_node_samples, node_samples;
    /* issue 24's two units: one f32 pass over the samples calibrated on (the quantized graph's
     * nodes x those samples), and over the samples judged on (x validate_samples; x the calibration
     * samples when none is held out); what the quantize ran on each (QR_RUNS_CALIBRATE and
     * QR_RUNS_VALIDATE: calibrate + validate = node_samples); and the tensors the fallback's search
     * ranked by their effect (0: no search), whose log2 is the bound's number of validation passes */
    int64_t calibrate_pass_node_samples, validate_pass_node_samples;
    int64_t calibrate_node_samples, validate_node_samples;
    int ranked;
    /* rank = grad: its passes (0: none ran) and the most bytes their executors kept of the weights
     * at once, and the most bytes a pass held into its backward passes (kept values, masks, the layers'
     * errors) (qr_qctx's grad_passes, grad_packing_bytes, grad_held_bytes) */
    int64_t grad_passes, grad_packing_bytes, grad_held_bytes;
    /* rank = grad's f32 runs, QDQ runs and backward passes, node-runs x samples each (qr_qctx's
     * grad_node_samples: where its share of the validation passes goes) */
    int64_t grad_node_samples[3];
    /* grad_peak_within (rank = grad): the estimates of grad's peak and the f32 run's, bytes, of it
     * the values one pass keeps (without its run's arena), of those what it holds as the backward
     * passes start (grad_held_bytes' count), the recipe's bound, and the ranking it chose (0: none
     * asked, 1: grad, 2: effect) */
    double grad_peak_bytes, grad_peak_values, grad_peak_held, grad_peak_f32_bytes, grad_peak_within;
    int grad_peak_rank;
    int grad_segments; /* rank = grad: the segments its passes ran the ranked layers in (grad_segments) */
    double grad_energy; /* rank = grad: every estimated error energy (layer, output, sample) summed in that order */
    int64_t effects_copied_bytes; /* qr_qctx's: the effects' copies of f32 values at once, at most */
    int64_t effects_run_samples, shipped_run_samples; /* qr_qctx's: the most samples one of their runs took */
} qr_quantized;

/* g: an optimized fp32 graph; calib: one tensor per graph input, in input
 * order, each holding the same number of samples along dim 0. */
qr_status qr_quantize(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, qr_quantized **out,
                      qr_error *e);
void qr_quantized_free(qr_quantized *q);

/* A loaded QDQ model back to its float graph, in place: each QuantizeLinear whose integers only
 * feed DequantizeLinears with the same parameters goes with them (run after qr_graph_optimize,
 * whose annotation leaves the file's qparams on the tensors, value->q). Then qr_quantize with
 * from_file lowers it by the recipe's rules. Returns the number of pairs removed. */
int qr_qdq_strip(qr_graph *g);

#endif
