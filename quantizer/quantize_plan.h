/* The quantizer's plan, shared by its stages (quantize.c: plan, calibrate,
 * QDQ; intgraph.c: the integer graph). Private to quantizer/. */
#ifndef QR_QUANTIZE_PLAN_H
#define QR_QUANTIZE_PLAN_H

#include <stdint.h>

#include "graph.h"
#include "match.h"
#include "op.h"
#include "quantize.h"
#include "recipe.h"

enum { SLOT_CALIBRATED, SLOT_FIXED, SLOT_SAME };
enum { DYN_NONE, DYN_TENSOR, DYN_ROW }; /* how a dynamic value is quantized: one scale, or one per row */

typedef struct qr_slot {
    int value;      /* value id in the original graph */
    int kind;
    int same;       /* SLOT_SAME: the slot copied */
    qr_calib *cal;  /* SLOT_CALIBRATED */
    const qr_setting *calset; /* the setting whose calibrator cal is (activation, input, output, activation for) */
    qrl_qtype qt;
    qr_dtype dtype; /* its integers' type: the recipe's activation type, or the one an `activation for`
                     * setting gives the values its op or node produces (set: that setting) */
    const qr_setting *set;
    qrl_qparams qp; /* fixed, or the final solve over every worker's merged state */
    int solved;
    double lo, hi;  /* observed */
    double sx2, se2, n, clipped; /* measurement against f32: signal, error, count, outside range */
    double isx2, ise2;           /* the same error, of the integer graph's integers */
    double lx2, le2, ln;         /* its layer's own error: the quantized model run with f32 inputs */
    /* for rank = gain: its own rounding |x - fq(x)|^2 on f32 x (the local run), and its error with
     * f32 inputs (its weights and its rounding) */
    double lr2, oe2;
    double effect; /* dB: the outputs' SQNR with this layer alone quantized, as the recipe's rank measured or
                    * estimated it (NaN: not ranked) */
    int fallback;
    /* fallback = u16 then f32: 1 where its 16-bit step is open, 0 where closed, -1 without one; and
     * the outputs' SQNR with this layer alone quantized at 16 bits (NaN: not measured) */
    int step16;
    double effect16;
    /* a narrow accumulator's (accumulate = iN) partial sums in the layer that writes it, and those
     * that left the range, over the measured samples; acc_on: its layer has one */
    int64_t acc_sums, acc_over;
    int acc_on;
    double macs; /* qr_qlayer's macs (qr_measure_macs) */
} qr_slot;

typedef struct qr_wquant { /* a quantized weight */
    int value;
    int axis;          /* -1: per tensor */
    int nch;
    float *scale;
    int32_t *zero;
    qr_dtype dtype;
    int narrow;        /* its setting's narrow modifier (`weight for` may give it another than the recipe's) */
} qr_wquant;

typedef struct qr_bquant { /* a bias: int32 with scale s_x * s_w */
    int value, x, w;    /* value ids */
} qr_bquant;

typedef struct qr_role {
    qr_role_kind kind;
    int axis, a, b; /* value ids for bias(a, b) / same(a) */
} qr_role;

typedef struct qr_qctx {
    const qr_graph *g;
    /* the f32 model the outputs are judged against (output SQNR, the fallback, top-1): g, or the
     * model before a bias correction, which changes g's f32 function on purpose. Its values keep
     * their ids in g (a correction only adds values). */
    const qr_graph *ref;
    const qrl_module *m;
    const qr_recipe *r;
    const qr_quant_opts *o;
    qr_error *e;
    /* settings */
    qr_dtype act_dtype, w_dtype;
    int act_narrow, w_narrow, w_per_channel;
    int act_sym; /* the symmetric modifier: solve sees it as t.symmetric (weights: each one's setting) */
    const char *numerics; /* the recipe's: only patterns of these numerics (or of none stated) match */
    /* the recipe's accumulate = iN and overflow: the Conv/Gemm/MatMul accumulators' width (32 for
     * i32) and whether a partial sum beyond it saturates (else it wraps); acc_narrow: anything but
     * i32 wrapping, which the integer graph then computes in the defined order (QrlAccInteger) */
    int acc_bits, acc_saturate, acc_narrow;
    int round_away;       /* the recipe's rounding = half_away: constants QRL quantizes (weights, biases,
                           * tables, constant operands) round ties away from zero, else to even */
    /* the policy hooks (stdlib/qparams.qrl's fns, or those the recipe's hook settings name):
     * narrow[t]: type t's narrow range (narrow_range's answers; qmax < qmin where no setting is
     * narrow); bias_fn (bias_qparams, NULL until a bias needs it) and bias_dtype (the bias setting's
     * type, i32 by default) */
    struct { int64_t qmin, qmax; } narrow[QR_DTYPE_COUNT];
    const qr_fn_desc *bias_fn;
    qr_dtype bias_dtype;
    /* samples = F: the fn that reduces each measured sample's output sums to the figure the fallback
     * and the summary judge (f64(f64[], f64[])); NULL: the samples' sums pooled */
    const qr_fn_desc *samples_fn;
    /* rank = grad's passes (the report's "grad"): how many ran, and the most their executors kept of
     * the weights (the kernels' packings) at once beside the values the backward reads */
    int64_t grad_passes, grad_packing_bytes, grad_held_bytes;
    double grad_energy; /* rank = grad: its estimates' error energies summed (runs compared bit for bit) */
    /* rank = grad's runs in the run counter's unit (node-runs x samples, qr_exec_node_samples): its
     * f32 runs, its QDQ runs and its backward passes, apart (the report's grad.node_samples) */
    int64_t grad_node_samples[3];
    /* rank = effect's cut runs: the most bytes of the f32 run's values held as copies at once (the
     * rest read in place: struct effects' owned) */
    int64_t effects_copied_bytes;
    /* the most samples one run of the effects (its f32 run or a cut's) and of the measurement of
     * what ships took: a batch, or half of one where they run in halves */
    int64_t effects_run_samples, shipped_run_samples;
    /* the effects found half a batch's f32 outputs not the whole batch's (the model mixes its
     * samples): the measurement of what ships runs whole batches too */
    int halves_bad;
    /* calibrate_samples = F: the fn that reduces the calibration samples' sums when a try of the
     * fallback that holds on the held-out samples is judged on them too (NULL: it is not); cal_in
     * and cal_n: the calibration samples it judges on (the first cal_n of cal_in, the recipe's
     * calibrate_figure_samples), set by calibration for the fallback alone (NULL: no such judge) */
    const qr_fn_desc *calib_samples_fn;
    const qr_tensor *cal_in;
    int64_t cal_n;
    struct outref *cal_ref; /* during the fallback: cal_in's f32 outputs (qmeasure.c) */
    double *top1; /* by slot, with labels: top-1 points with that layer alone quantized, minus f32's */
    const qr_setting *act, *wt, *in, *out; /* in/out: the model's first quantized tensors and its outputs */
    /* plan */
    unsigned char *claimed;
    int *node_kind; /* 0 f32, 1 pattern, 2 affine */
    const qr_affine **aff_of; /* by node id: the affine rule that applies */
    char **notes;   /* what the user should know about the plan: nodes left in f32 and why */
    int nnotes;
    qr_role *roles;    /* by value id */
    int *slot_of;   /* by value id: slot index or -1 */
    qr_slot *slots;
    int nslots;
    int res_mixed_layers; /* mixed precision (qmeasure.c): the layers it chooses for */
    qr_wquant *w;
    int nw;
    qr_bquant *bias;
    int nbias;
    int nodes_pattern, nodes_affine;
    unsigned char *dyn; /* by value id: a match quantizes it at run time (role dynamic): DYN_TENSOR or DYN_ROW;
                         * it has no slot (nothing to calibrate) */
    /* by value id: the fallback sent this dynamic value's run-time quantization to f32 (every
     * match that reads it so runs in f32, its weights too); dyn_sqnr: its local SQNR (dB) as the
     * fallback measured it, the value quantized at run time from f32 inputs (NaN: not measured) */
    unsigned char *dyn_f32;
    double *dyn_sqnr;
    double *dyn_effect; /* by value id: the outputs' SQNR (dB) with it alone quantized at run time (NaN: not measured) */
    double *dyn_macs;   /* by value id: MACs per sample of the matches that read it at run time (NaN: not counted) */
    double *dyn_lo, *dyn_hi; /* by value id: the range a dynamic value had in the f32 pass over the calibration
                              * samples (NaN aside), for reports; NULL when not observed */
    /* each accepted match: its pattern, values and nodes (ids), output value, constants (for fallback) */
    struct mrec {
        const qr_pattern *p;
        int values[QR_MATCH_MAX_VALUES]; /* by pattern value index; -1: a missing optional input */
        int nodes[QR_MATCH_MAX_NODES];
        int nnodes, out;
        int consts[QR_MATCH_MAX_VALUES]; /* a subset of values */
        int nconsts;
    } *matches;
    int nmatches;
    int *qval; /* by value id: the id of its integer value in the QDQ graph (the QuantizeLinear output or the
                * quantized constant), or -1 */
    int *qnode; /* by node id: the id of the same node in the QDQ graph (sorting renumbers nodes) */
    double phase_ms, phase_cpu_ms; /* when the phase qr_plan_phase times next began (wall, process CPU) */
    int64_t phase_runs;            /* and qr_exec_node_samples then */
    int64_t phase_runs_validate;   /* and qr_exec_node_samples_in(QR_RUNS_VALIDATE) */
    /* the f32 pass's outputs of its first f32_out_nb batches ([f32_out_nb][n_outputs]), kept for the
     * fallback's first try (qr_measure_kept_batches); NULL: not kept */
    qr_tensor *f32_out;
    int f32_out_nb;
    /* when the fallback judges on held-out samples: the f32 pass's outputs of the first calib_out_nb
     * batches of the calibration samples, for the output SQNR on them (qr_measure_output_sqnr),
     * which would otherwise run f32 over them again; apart from f32_out, which is the judge
     * samples' (the first try takes it when the batch counts agree); NULL: not kept */
    qr_tensor *calib_out;
    int calib_out_nb;
    /* each weight's integers as qr_plan_build_qdq rounded them, by index of w (rounded_weight) */
    struct qr_graph *wround_g;
    struct qr_wround {
        struct qr_value *ints; /* a constant of wround_g; NULL: not rounded */
        qr_dtype dtype;
        int64_t qmin, qmax;
        int axis, nch;
        float *scale;  /* the qparams they were rounded with */
        int32_t *zero;
    } *wround;
    int nwround;
    /* instead, the f32 pass is the local measurement's f32 run, over these batches (all the
     * calibration samples): it keeps the outputs the first try is judged on, and its own time is
     * the fp32 pass's (qmeasure.c); 0: a pass of its own */
    int f32_in_measure;
    /* the measurement of what ships ran beside the local measurement (its first try held) */
    int shipped;
    /* a step figure's run (steps = measure): calibration, then the outputs with every layer
     * quantized on the held-out samples (step_val) and the calibration samples (step_cal); no
     * fallback, nothing exported */
    int steps_only;
    double step_val, step_cal;
    /* measure_effects' f32 executors kept between its calls in one fallback, by worker (qmeasure.c):
     * what they packed of the f32 weights, which every call's cuts take, instead of a packing run
     * per call; NULL: none kept (each call its own) */
    struct qr_effects_keep *effects_keep;
    int neffects_keep;
    /* the effect samples' f32 outputs (qmeasure.c's effect_outref), run once in a fallback (while
     * effects_keep is there) for the calls of the same calib, count and ne */
    struct qr_kept_ref *effects_ref;
} qr_qctx;

/* The qtype of integer type t (per tensor: axis -1), narrow as the recipe's narrow_range hook says
 * (q->narrow) when narrow. */
qrl_qtype qr_plan_qtype(const qr_qctx *q, qr_dtype t, int narrow, int axis);
/* The same from module m and recipe r alone (weight_only.c): the hook asked; an error when it gives
 * no range within t's. */
qr_status qr_plan_narrow_qtype(const qrl_module *m, const qr_recipe *r, qr_dtype t, int axis, qrl_qtype *out,
                               qr_error *e);
/* The fn recipe r's hook setting id names, else the module's fn of the setting's name (the stdlib's,
 * stdlib/qparams.qrl), of the hook's type (the setting's choices); NULL with an error in e when
 * there is none of that type. */
const qr_fn_desc *qr_plan_hook(const qrl_module *m, const qr_recipe *r, qr_setting_id id, qr_error *e);
/* The integer type value id `value` is quantized to: its slot's, else the recipe's activation type. */
qr_dtype qr_plan_value_dtype(const qr_qctx *q, int value);
/* The weight record of value id `value`, or NULL. */
const qr_wquant *qr_plan_weight(const qr_qctx *q, int value);
/* Weight value id `value` (an f32 constant a pattern reads as a weight) quantized as setting ws says
 * (per channel along its role's axis when ws is), into *w (its scale and zero arrays allocated). */
qr_status qr_plan_quantize_weight(qr_qctx *q, int value, const qr_setting *ws, qr_wquant *w);
/* A weight of n elements quantized to t, in res's counts (weights, 4-bit ones, bytes). */
void qr_plan_count_weight(qr_quantized *res, qr_dtype t, int64_t n);
/* Whether constant `value` belongs to a match whose output fell back to f32. */
int qr_plan_const_falls_back(const qr_qctx *q, int value);
/* Whether match r reads a value at run time whose quantization the fallback sent to f32
 * (qr_qctx.dyn_f32): the match runs in f32. */
int qr_plan_match_dyn_f32(const qr_qctx *q, const struct mrec *r);
/* ONNX QuantizeLinear of one value: x / scale rounded half to even, plus zero, saturated. */
int64_t qr_plan_round(float x, float scale, int64_t zero, int64_t qmin, int64_t qmax);
/* A constant QRL quantizes itself (weight, bias, table entry, constant operand): rounded as the
 * recipe's rounding setting says, plus zero, saturated. */
int64_t qr_plan_round_const(const qr_qctx *q, float x, float scale, int64_t zero, int64_t qmin, int64_t qmax);
/* f32 x fake-quantized (quantized, dequantized) into y. */
void qr_plan_fake_quant(const float *x, float *y, int64_t n, float scale, int64_t zero, int64_t qmin, int64_t qmax);
/* Samples per run: the model's fixed batch, else --batch (32). */
int qr_plan_batch(const qr_qctx *q);
/* A progress bar for a long phase on stderr, when it is a terminal and the options allow it
 * (qr_quant_opts.progress): done of total steps since t0 (qr_plan_now_ms), and the time left. */
void qr_plan_progress(const qr_quant_opts *o, const char *what, int64_t done, int64_t total, double t0);
double qr_plan_now_ms(void);
/* The phase name (a literal) has ended: what its runs freed goes back to the system
 * (qr_plan_give_back_memory), then its wall and CPU time since the last one (or
 * qr_plan_phase_start) and the peak resident memory so far into res->phases, for --profile. */
void qr_plan_phase_start(qr_qctx *q);
void qr_plan_phase(qr_qctx *q, qr_quantized *res, const char *name);
/* The process's wall and CPU clocks, ms (as qr_plan_phase reads them). */
void qr_plan_clock(double *ms, double *cpu_ms);
/* Work timed inside the last phase named from that belongs to the last one named to (rank =
 * grad's exact effects the search asks for: the effects'): its wall and CPU ms and node-runs x
 * samples (validate_runs of them on the judge samples) move; the peaks stay. */
void qr_plan_phase_move(qr_quantized *res, const char *from, const char *to, double ms, double cpu_ms,
                        int64_t runs, int64_t validate_runs);
/* Samples [at, at + b) of every calibration input, as views. */
void qr_plan_slice_inputs(const qr_tensor *calib, int n, int64_t at, int64_t b, qr_tensor *in);
/* The same views, for a run that reads them until qr_plan_drop_inputs of the same calib, at and b
 * (every take its drop, from any thread): where calib is validate_from = spread's copy (or a view
 * into it) and its held-out samples are streamed (qr_plan_stream_held), the ones among them come
 * into memory first, and leave again when the last run that took them drops them. */
void qr_plan_take_inputs(const qr_qctx *q, const qr_tensor *calib, int n, int64_t at, int64_t b, qr_tensor *in);
void qr_plan_drop_inputs(const qr_qctx *q, const qr_tensor *calib, int64_t at, int64_t b);
/* on 1: validate_from = spread's held-out samples are in memory only while a run takes them (the
 * fallback and the measurement of what ships, calibrate_on); 0: all of them, for a reader that
 * reads them where they are. Between runs only. Returns the state before (0 without a spread). */
int qr_plan_stream_held(const qr_qctx *q, int on);
/* Returns the heap's free memory to the system (glibc's malloc_trim; nothing elsewhere): what a
 * phase's threads freed stays in their malloc arenas, where the next phase's allocations (on
 * other threads, or too large) do not reuse it, so the peaks of successive phases would add up. */
void qr_plan_give_back_memory(void);
/* What quantization holds besides its runs: the model's constants and the calibration data in
 * memory (the memory budget's share the runs cannot have). */
size_t qr_plan_held_bytes(const qr_graph *g, const qr_tensor *calib);
/* One batch through x; the outputs are dropped. */
struct qr_exec;
qr_status qr_plan_run_once(struct qr_exec *x, const qr_graph *g, const qr_tensor *in, qr_error *e);
/* The QDQ graph of the slots not fallen back (res->qdq, q->qval). Each weight's integers are
 * rounded once for its qparams and kept (q->wround) for the next build. */
qr_status qr_plan_build_qdq(qr_qctx *q, qr_quantized *res);
/* The weights' kept integers go (the graphs built hold theirs). */
void qr_plan_drop_rounded(qr_qctx *q);

/* Measurement (qmeasure.c): a slot's cumulative SQNR (all upstream quantization applied) and its
 * local one (its layer alone, f32 inputs; NaN when not measured), in dB. */
double qr_plan_sqnr(const qr_slot *s);
double qr_plan_local_sqnr(const qr_slot *s);
/* How many of the first batches of count samples the f32 pass keeps the outputs of for the
 * fallback (the measured ones, when the fallback can judge its first try on them before the local
 * measurement: one process, no bias correction, no budget, rank = gain or 16-bit step); 0: none. */
int qr_measure_kept_batches(const qr_qctx *q, int64_t count);
/* How many of the first batches of count calibration samples the f32 pass keeps the outputs of
 * (q->calib_out) for the output SQNR on them when the fallback judges on other samples: all that
 * qr_measure_output_sqnr measures (one process, no bias correction: its reference is the f32
 * model's; the measured ones end at a batch's end); 0: none. */
int qr_measure_calib_batches(const qr_qctx *q, int64_t count);
/* How many of count calibration samples (the first ones) the output SQNR on the calibration samples
 * is measured on when the fallback judges on other samples: the recipe's calibrate_figure_samples
 * (default: all of them) in whole batches, at most count. The f32 pass that figure alone reads runs
 * on them only (int8.qrl: 16 of ResNet-18's 48, 2.3 of its 10.4 CPU s were the pass and the figure). */
int64_t qr_measure_calib_figure_samples(const qr_qctx *q, int64_t count);
/* How many of count samples a measurement of the outputs runs on: the recipe's measure_samples. */
int64_t qr_measure_figure_count(const qr_qctx *q, int64_t count);
/* Each slot as it ships, against f32: cumulative error in the QDQ simulation (res->qdq) beside one
 * f32 run, then in the integer graph (res->ig) beside another. */
qr_status qr_measure_shipped(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count);
/* The recipe's fallback, layers with the worst local SQNR first, decided on the outputs of the
 * integer graph; leaves res->qdq and res->ig built for what stays quantized, and res's output SQNR
 * and MAC counts filled. */
qr_status qr_plan_fallback(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count);
/* Whether the integer graph that ships (res->ig) computes the f32 reference node for node (every
 * slot fell back, no narrow accumulator): its outputs are the reference's, with no error. */
int qr_measure_computes_reference(const qr_qctx *q, const qr_quantized *res);
/* Whether res's output figures (what ships) meet the recipe's fallback condition on the outputs,
 * read with every layer's own SQNR as met; 1 without a fallback. */
int qr_measure_outputs_meet(const qr_qctx *q, const qr_quantized *res);
/* The integer graph's output SQNR against f32 on the first count samples of calib (at most 256):
 * against q->calib_out, which it takes (and frees), when the f32 pass kept it; else f32 runs; inf
 * with no run when it computes the reference (qr_measure_computes_reference). */
qr_status qr_measure_output_sqnr(qr_qctx *q, const qr_quantized *res, const qr_tensor *calib, int64_t count,
                                 double *sqnr);
/* res's MACs per sample, all and on the integers, and each slot's macs (the matches needing it). */
void qr_measure_macs(qr_qctx *q, qr_quantized *res, const double *per_sample, const int64_t *last);
/* With labels: top-1 of f32, of the integer graph, and (top1 by slot, NaN where not measured) of the
 * QDQ model with that slot's layer alone quantized. */
qr_status qr_measure_top1(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, const qr_tensor *labels,
                          int64_t count, double *top1);

/* The quantizer's own ops (domain "qrl"), kept out of the runtime's core table: SimQuant
 * (quantize.c), QrlKernel and QrlLookup (intgraph.c). Each ends with a row without a name. */
extern const qr_op_def qr_ops_quantizer[];
extern const qr_op_def qr_ops_intgraph[];

/* Graph surgery helpers. A new node's op is looked up in the quantizer's ops, then the core table. */
qr_node *qr_plan_new_node(qr_graph *g, const char *op, const char *domain, const char *name, int n_in, int n_out);
qr_value *qr_plan_const(qr_graph *g, const char *name, const qr_tensor *t);
/* The QDQ graph measurements run: qdq, or with accumulate = iN a copy (*owned, freed by the
 * caller) that keeps the matched products' accumulators narrow (quantizer/accwidth.h). */
qr_status qr_plan_measured_qdq(const qr_qctx *q, const qr_graph *qdq, const qr_graph **g, qr_graph **owned);

#endif
