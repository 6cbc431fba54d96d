/* The calls of include/qrl.h, used as a backend uses them (nothing but the
 * public header): the bundled Fashion-MNIST CNN, whose fp32 top-1 on the 10000
 * test images is 92.20% in PyTorch (examples/fmnist/README.md), compiled
 * recipes, an integer model within half a point of it, and its qparams, the
 * same in memory as in the JSON file; its QDQ export lowered again; models run
 * on input files and checked by numpy; recipe checking; tensors and atomic
 * outputs. */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "qrl.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    cr_assert_eq(chdir(tu_root()), 0);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 300);

/* The number of activations in a qparams JSON file (python's json module reads it). */
static int checked_json_layers(const char *json)
{
    char cmd[1024], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import json; print(len(json.load(open('%s'))['activations']))\"",
             json);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int n = atoi(log);
    free(log);
    return n;
}

static int json_has_activation(const char *json, const char *name)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json, sys; "
             "sys.exit(0 if '%s' in [a['value'] for a in json.load(open('%s'))['activations']] else 1)\"",
             name, json);
    return tu_run(cmd, NULL) == 0;
}

/* The structs a call fills, as programs built against libqrl.so.0's first header hold them (git
 * show d53e412:include/qrl.h; qrl_search_try as it came, 34490ca): written here, not taken from
 * qrl.h, so that a field the header grows again shows as bytes written past them. */
typedef struct {
    int nodes_pattern, nodes_affine, nodes_float;
    int activations, weights;
    int fallbacks;
    int kernels, lookups, int_ops, requants, islands;
    int64_t samples;
    double calib_ms, fp32_ms;
    double output_sqnr;
    int64_t output_nonfinite;
    int64_t validate_samples;
    double output_sqnr_calib;
    double output_cosine;
    double output_agreement;
    double macs, macs_int;
    double top1_fp32, top1_int8;
    int64_t top1_samples;
    int dynamic;
} summary_0;
typedef struct {
    int fallen_back;
    int64_t samples;
    int holds;
    double output_sqnr;
} search_try_0;
typedef struct {
    const char *value;
    double sqnr, sqnr_int, top1_delta;
} layer_info_0;
typedef struct {
    size_t arena_bytes, sum_bytes, peak_bytes;
    int dynamic;
    size_t work_bytes;
} run_stats_0;
typedef struct {
    double seconds;
    int64_t runs;
    double macs;
} node_profile_0;

/* Each old struct with a guard behind it, set to 0xa5 before the call. */
#define GUARDED(T)                                                                                                   \
    struct {                                                                                                         \
        T s;                                                                                                         \
        unsigned char guard[64];                                                                                     \
    }

static void guard_intact(const unsigned char *guard, size_t n, const char *what, size_t size)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(guard[i], 0xa5, "%s: the library wrote byte %zu past the old struct's %zu", what, i, size);
}

/* A .npy file of the data set (QRL_DATA, else build/data); the caller frees it with qrl_tensor_free. */
static qrl_tensor npy(const char *name)
{
    const char *d = getenv("QRL_DATA");
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/%s", d && *d ? d : "build/data", name);
    qrl_tensor t;
    cr_assert_eq(qrl_tensor_read_npy(path, &t, err, sizeof err), 0, "%s", err);
    cr_assert(t.dtype == 1 || t.dtype == 7, "%s: float32 or int64", name);
    return t;
}

Test(api, quantized_model_is_within_half_a_point_of_fp32)
{
    char err[1024] = "";
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 1, &m, err, sizeof err), 0, "%s", err);
    qrl_tensor x = npy("test_images.npy"), y = npy("test_labels.npy"), c = npy("calib_images.npy");
    int64_t correct = 0;
    cr_assert_eq(qrl_model_eval_top1(m, &x, &y, 0, &correct, err, sizeof err), 0, "%s", err);
    cr_assert_eq(correct, 9220, "fp32 top-1: %lld of 10000, PyTorch's is 9220", (long long)correct);

    qrl_recipe *r;
    cr_assert_eq(qrl_recipe_compile("recipes/int8.qrl", QRL_RECIPE_NO_CACHE, stderr, &r, err, sizeof err), 0, "%s",
                 err);
    qrl_quantized *q;
    qrl_quantize_opts o = {.calib_count = 200};
    cr_assert_eq(qrl_quantize(m, r, &c, &o, &q, err, sizeof err), 0, "%s", err);
    qrl_model *qm = qrl_quantized_model(q, err, sizeof err);
    cr_assert(qm, "%s", err);
    int64_t qcorrect = 0;
    cr_assert_eq(qrl_model_eval_top1(qm, &x, &y, 64, &qcorrect, err, sizeof err), 0, "%s", err);
    cr_log_info("top-1: fp32 %lld, int8 %lld of 10000", (long long)correct, (long long)qcorrect);
    cr_assert_geq(qcorrect, 9220 - 50, "int8 top-1: %lld of 10000", (long long)qcorrect);
    qrl_model_free(qm); /* owned by q: does nothing */

    /* Every output file; the qparams in the JSON are the ones the integer model carries. */
    char onnx[600], json[600], report[600], ig[600];
    snprintf(onnx, sizeof onnx, "%s/q.onnx", dir);
    snprintf(json, sizeof json, "%s/q.json", dir);
    snprintf(report, sizeof report, "%s/r.html", dir);
    snprintf(ig, sizeof ig, "%s/ig.txt", dir);
    cr_assert_eq(qrl_quantized_save(q, onnx, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_quantized_write_qparams(q, json, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_quantized_write_report(q, "fmnist_cnn.onnx", report, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_quantized_write_int_graph(q, ig, err, sizeof err), 0, "%s", err);
    cr_assert(tu_file_exists(report) && tu_file_exists(ig));
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json; q = json.load(open('%s')); "
             "print('\\n'.join('%%s %%.9g %%d' %% (a['value'], a['scale'], a['zero_point']) for a in q['activations']))\"",
             json);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int checked = 0;
    for (char *s = NULL, *l = strtok_r(log, "\n", &s); l; l = strtok_r(NULL, "\n", &s)) {
        char name[256];
        double scale;
        int zero;
        cr_assert_eq(sscanf(l, "%255s %lf %d", name, &scale, &zero), 3, "%s", l);
        qrl_value_info vi;
        char iname[300]; /* the integer graph's name of a quantized value (_nhwc: computed channels last) */
        snprintf(iname, sizeof iname, "%s_quantized", name);
        if (qrl_value_get(qm, iname, &vi) != 0 || !vi.has_quant) {
            snprintf(iname, sizeof iname, "%s_quantized_nhwc", name);
            if (qrl_value_get(qm, iname, &vi) != 0 || !vi.has_quant)
                continue;
        }
        cr_assert_eq(vi.quant.count, 1, "%s", name);
        cr_assert_float_eq(vi.quant.scale[0], scale, 1e-6 * scale, "%s: %g in the model, %g in the JSON", name,
                           vi.quant.scale[0], scale);
        cr_assert_eq(vi.quant.zero_point[0], zero, "%s", name);
        checked++;
    }
    free(log);
    cr_assert_geq(checked, 6, "values of the JSON found in the integer model: %d", checked);

    /* The summary: MACs per sample as onnx's shape inference gives them (Conv: output size times
     * C_in/groups * kH * kW, Gemm: the weight's size), 1568640, all in integers; the CNN's 3 Conv
     * and 2 Gemm as the recipe's kernels; each activation's name as the JSON has it. */
    qrl_quant_summary sum;
    qrl_quantized_summary(q, &sum);
    cr_assert_float_eq(sum.macs, 1568640, 0.5, "%g", sum.macs);
    cr_assert_float_eq(sum.macs_int, sum.macs, 0.5, "%g of %g", sum.macs_int, sum.macs);
    cr_assert_eq(sum.kernels, 5);
    /* int8.qrl holds a spread quarter out to judge on: 150 of the 200 calibrate, 50 judge */
    cr_assert_eq(sum.samples, 150);
    cr_assert_eq(sum.validate_samples, 50);
    cr_assert_gt(sum.output_sqnr, 20, "%g dB", sum.output_sqnr);
    cr_assert(isnan(sum.top1_fp32), "no labels: no top-1");
    cr_assert_eq(sum.activations, checked_json_layers(json), "activations in the summary and in the JSON");
    qrl_layer_info li;
    int layers = 0;
    for (; qrl_quantized_layer(q, layers, &li) == 0; layers++) {
        cr_assert(json_has_activation(json, li.value), "%s", li.value);
        cr_assert_gt(li.sqnr, 10, "%s: %g dB", li.value, li.sqnr);
    }
    cr_assert_eq(layers, sum.activations);
    /* --profile's figures: the phases in order, and the fallback's one measurement of the outputs
     * (every layer int8 meets int8.qrl on the CNN: no search) on the 50 held-out samples, which the
     * summary's SQNR is. The local measurement's f32 run keeps the held-out samples' outputs for
     * the judging; the f32 pass runs after the fallback and keeps the calibration samples' outputs
     * for the summary's calibrate figure. */
    const char *phases[] = {"calibration", "local measurement", "first tries", "fp32 pass",
                            "outputs on the calibration samples", "measurement of what ships"};
    int nphases = (int)(sizeof phases / sizeof *phases);
    qrl_quant_phase ph;
    int np = 0;
    /* each phase's peak resident memory so far: the kernel's figure for this process (the library
     * runs in it), never falling, at least what the process holds now, at most its peak now */
    struct rusage ru;
    cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
    int64_t last_peak = 0, now_peak = (int64_t)ru.ru_maxrss * 1024;
    for (; qrl_quantized_phase(q, np, &ph) == 0; np++) {
        cr_assert_lt(np, nphases, "%s", ph.name);
        cr_assert_str_eq(ph.name, phases[np]);
        cr_assert(ph.seconds >= 0 && ph.cpu_seconds >= 0, "%s: %g s, %g CPU s", ph.name, ph.seconds, ph.cpu_seconds);
        int64_t peak = -1;
        cr_assert_eq(qrl_quantized_phase_peak(q, np, &peak), 0, "%s", ph.name);
        cr_assert(peak >= last_peak && peak <= now_peak && peak > (1 << 20),
                  "%s: peak %lld bytes after %lld, the process's peak now %lld", ph.name, (long long)peak,
                  (long long)last_peak, (long long)now_peak);
        last_peak = peak;
    }
    cr_assert_eq(np, nphases);
    /* The runs of each phase, node-runs x samples, by hand: the optimized CNN computes 14 nodes (Sub,
     * Div, 3 x Conv Relu, 2 MaxPool, Flatten, Gemm Relu, Gemm: the BatchNormalizations folded,
     * Dropout gone; its QDQ graph the same 14 with QuantizeLinear/DequantizeLinear not counted),
     * its integer graph 10 (Sub, Div, 3 QrlConvKernel, 2 QrlMaxPoolNhwc, Flatten, 2 MatMulInteger;
     * the Gemms' QrlKernel and the output's DequantizeLinear not counted). The calibration runs the
     * 150 calibrating samples; the local measurement the 50 held out in f32 and in the QDQ graph,
     * where the 5 values not quantized (Sub's, each product's before its Relu) are supplied from
     * the f32 run, not run; the first try the integer graph on the 50; the f32 pass and the
     * integer graph the calibrate figure's first 32; what ships the QDQ and the integer graph
     * beside an f32 run each, on the 50 (stop 47: in two passes, as the f32 activations of a batch of 32
     * outweigh the CNN's weights, under 0.5 MB; one pass would count 50 x (14 + 13 + 9); its
     * output is quantized, so each run needs every node: none left out), each taking the Sub (the
     * model's node on the unquantized input and its constant) from the f32 run beside it (stop 52).
     * One f32 pass: 14 nodes x 200 samples. */
    const int64_t runs[] = {150 * 14, 50 * 14 + 50 * (14 - 5), 50 * 10, 32 * 14, 32 * 10, 50 * (14 + 13 + 14 + 9)};
    int64_t pass = -1, total = -1, phased = 0;
    qrl_quantized_runs(q, &pass, &total);
    cr_assert_eq(pass, 14 * 200, "one f32 pass: %lld node-runs x samples", (long long)pass);
    for (int i = 0; i < nphases; i++) {
        int64_t r = -1;
        cr_assert_eq(qrl_quantized_phase_runs(q, i, &r), 0, "%s", phases[i]);
        cr_assert_eq(r, runs[i], "%s: %lld node-runs x samples, by hand %lld", phases[i], (long long)r,
                     (long long)runs[i]);
        phased += r;
    }
    cr_assert_eq(total, phased, "nothing runs outside the phases: %lld, %lld", (long long)total, (long long)phased);
    /* The same in issue 24's two units, by hand from the runs above: the 150 samples calibrated on
     * run the calibration, the f32 pass and the integer graph of the calibrate figure (the first 32
     * of them); the 50 held out run the local measurement, the first try and what ships. One pass
     * over each: 14 nodes x 150, 14 x 50. No search: nothing ranked. */
    const int64_t on_held_out[] = {0, runs[1], runs[2], 0, 0, runs[5]};
    int64_t cpass = -1, cal = -1, vpass = -1, val = -1;
    int ranked = -1;
    qrl_quantized_runs_split(q, &cpass, &cal, &vpass, &val, &ranked);
    cr_assert_eq(cpass, 14 * 150, "one f32 pass over the calibrating samples: %lld", (long long)cpass);
    cr_assert_eq(vpass, 14 * 50, "one validation pass: %lld", (long long)vpass);
    cr_assert_eq(cal, runs[0] + runs[3] + runs[4], "on the calibrating samples: %lld, by hand %lld", (long long)cal,
                 (long long)(runs[0] + runs[3] + runs[4]));
    cr_assert_eq(val, runs[1] + runs[2] + runs[5], "on the held-out samples: %lld, by hand %lld", (long long)val,
                 (long long)(runs[1] + runs[2] + runs[5]));
    cr_assert_eq(ranked, 0);
    for (int i = 0; i < nphases; i++) {
        int64_t v = -1;
        cr_assert_eq(qrl_quantized_phase_runs_validate(q, i, &v), 0, "%s", phases[i]);
        cr_assert_eq(v, on_held_out[i], "%s: %lld on the held-out samples, by hand %lld", phases[i], (long long)v,
                     (long long)on_held_out[i]);
    }
    int64_t val_past = -1;
    cr_assert_neq(qrl_quantized_phase_runs_validate(q, np, &val_past), 0, "past the last phase");
    cr_assert_eq(val_past, -1, "nothing written past the last phase");
    int64_t runs_past = -1;
    cr_assert_neq(qrl_quantized_phase_runs(q, np, &runs_past), 0, "past the last phase");
    cr_assert_eq(runs_past, -1, "nothing written past the last phase");
    int64_t past = -1;
    cr_assert_neq(qrl_quantized_phase_peak(q, np, &past), 0, "past the last phase");
    cr_assert_eq(past, -1, "nothing written past the last phase");
    /* A program built against libqrl.so.0's header before the phases had peaks holds the struct
     * as {name, seconds, cpu_seconds}: the library fills that and writes nothing past it (the
     * guard behind it stays as set). */
    struct {
        struct {
            const char *name;
            double seconds, cpu_seconds;
        } ph;
        unsigned char guard[32];
    } old;
    memset(&old, 0xa5, sizeof old);
    cr_assert_eq(qrl_quantized_phase(q, np - 1, (qrl_quant_phase *)(void *)&old.ph), 0);
    cr_assert_str_eq(old.ph.name, phases[np - 1]);
    cr_assert(old.ph.seconds >= 0 && old.ph.cpu_seconds >= 0);
    for (size_t i = 0; i < sizeof old.guard; i++)
        cr_assert_eq(old.guard[i], 0xa5, "the library wrote byte %zu past the old struct's %zu", i, sizeof old.ph);
    qrl_search_try st;
    cr_assert_eq(qrl_quantized_search_try(q, 0, &st), 0);
    cr_assert_neq(qrl_quantized_search_try(q, 1, &st), 0, "one measurement, no search");
    qrl_quantized_search_try(q, 0, &st);
    int64_t ran = -1, ran_past = -1;
    int widened = -1, widened_past = -1;
    cr_assert_eq(qrl_quantized_search_try_ran(q, 0, &ran), 0);
    cr_assert_eq(qrl_quantized_search_try_widened(q, 0, &widened), 0);
    cr_assert(st.fallen_back == 0 && st.samples == 50 && ran == 50 && widened == 0 && st.holds, "%d %lld %lld %d %d",
              st.fallen_back, (long long)st.samples, (long long)ran, widened, st.holds);
    cr_assert_eq(st.output_sqnr, sum.output_sqnr);
    cr_assert(qrl_quantized_search_try_ran(q, 1, &ran_past) != 0 && qrl_quantized_search_try_widened(q, 1, &widened_past) != 0 &&
                  ran_past == -1 && widened_past == -1,
              "past the last measurement: non-zero, nothing written");

    /* The structs keep libqrl.so.0's layout (README): the library fills each old struct and writes
     * nothing past it, and what came later comes from calls of their own. */
    GUARDED(summary_0) os;
    memset(&os, 0xa5, sizeof os);
    qrl_quantized_summary(q, (qrl_quant_summary *)(void *)&os.s);
    guard_intact(os.guard, sizeof os.guard, "qrl_quant_summary", sizeof os.s);
    cr_assert_eq(sizeof(qrl_quant_summary), sizeof os.s);
    cr_assert(os.s.samples == 150 && os.s.validate_samples == 50 && os.s.kernels == 5 && os.s.dynamic == 0 &&
                  os.s.output_sqnr == sum.output_sqnr && isnan(os.s.top1_fp32),
              "%lld %lld %d %d", (long long)os.s.samples, (long long)os.s.validate_samples, os.s.kernels, os.s.dynamic);
    GUARDED(search_try_0) ot;
    memset(&ot, 0xa5, sizeof ot);
    cr_assert_eq(qrl_quantized_search_try(q, 0, (qrl_search_try *)(void *)&ot.s), 0);
    guard_intact(ot.guard, sizeof ot.guard, "qrl_search_try", sizeof ot.s);
    cr_assert_eq(sizeof(qrl_search_try), sizeof ot.s);
    cr_assert(ot.s.fallen_back == 0 && ot.s.samples == 50 && ot.s.holds == 1 && ot.s.output_sqnr == sum.output_sqnr);
    GUARDED(layer_info_0) ol;
    memset(&ol, 0xa5, sizeof ol);
    cr_assert_eq(qrl_quantized_layer(q, 0, (qrl_layer_info *)(void *)&ol.s), 0);
    guard_intact(ol.guard, sizeof ol.guard, "qrl_layer_info", sizeof ol.s);
    cr_assert_eq(sizeof(qrl_layer_info), sizeof ol.s);
    cr_assert(json_has_activation(json, ol.s.value) && ol.s.sqnr > 10, "%s", ol.s.value);
    /* int8.qrl: weights i8 and i32 sums (no narrow accumulator, no 16-bit step), batches of 32;
     * one output, judged by sample_balanced_lower (the recipe's samples = F), whose own SQNR is
     * every output's together; the weights' integers one byte each: the CNN's Conv and Gemm weights
     * as onnx reads them, 16*1*3*3 + 32*16*3*3 + 32*32*3*3 + 64*1568 + 10*64 = 114960 */
    cr_assert_eq(qrl_quantized_widened(q), 0);
    cr_assert_eq(qrl_quantized_batch(q), 32);
    cr_assert_eq(qrl_quantized_weight_only(q), 0);
    int n_outputs = -1;
    double pooled = NAN, worst = NAN, energy = NAN;
    const char *worst_name = NULL, *samples_fn = NULL;
    qrl_quantized_output_figures(q, &n_outputs, &pooled, &worst, &worst_name, &samples_fn, &energy);
    cr_assert_eq(n_outputs, 1);
    cr_assert_str_eq(worst_name, qrl_model_output(m, 0));
    cr_assert_str_eq(samples_fn, "sample_balanced_lower");
    cr_assert(pooled > 20 && pooled == worst && energy > 20, "pooled %g, worst %g, energy %g", pooled, worst, energy);
    qrl_quantized_output_figures(q, NULL, NULL, NULL, NULL, NULL, NULL); /* a NULL pointer is not written */
    int acc_bits = -1, acc_sat = -1, acc_layers = -1, acc_over_layers = -1;
    int64_t acc_sums = -1, acc_over = -1;
    qrl_quantized_accumulator(q, &acc_bits, &acc_sat, &acc_sums, &acc_over, &acc_layers, &acc_over_layers);
    cr_assert(acc_bits == 32 && acc_sat == 0 && acc_sums == 0 && acc_over == 0 && acc_layers == 0 && acc_over_layers == 0,
              "i%d sat %d: %lld of %lld in %d of %d layers", acc_bits, acc_sat, (long long)acc_over, (long long)acc_sums,
              acc_over_layers, acc_layers);
    int64_t wbytes = -1, wf32 = -1;
    int w4 = -1;
    qrl_quantized_weight_bytes(q, &wbytes, &wf32, &w4);
    cr_assert(wbytes == 114960 && wf32 == 4 * 114960 && w4 == 0, "%lld, %lld in f32, %d 4-bit", (long long)wbytes,
              (long long)wf32, w4);
    for (int i = 0; i < layers; i++) {
        int64_t ls = 0, lo = 0;
        cr_assert_eq(qrl_quantized_layer_acc(q, i, &ls, &lo), 0);
        cr_assert(ls == -1 && lo == -1, "layer %d: no narrow accumulator writes it: %lld %lld", i, (long long)ls,
                  (long long)lo);
    }
    int64_t ls_past = 7, lo_past = 7;
    cr_assert(qrl_quantized_layer_acc(q, layers, &ls_past, &lo_past) != 0 && ls_past == 7 && lo_past == 7,
              "past the last activation: non-zero, nothing written");
    cr_assert_null(qrl_quantized_note(q, -1));
    /* The export loads, and runs as the integer model does (its QDQ groups lowered by the stdlib):
     * its 5 quantized Conv and Gemm as kernels, top-1 within half a point of PyTorch's f32. */
    qrl_model *e;
    cr_assert_eq(qrl_model_load(onnx, 1, &e, err, sizeof err), 0, "%s", err);
    qrl_quantized *lq;
    cr_assert_eq(qrl_model_lower_qdq(e, NULL, stderr, &lq, err, sizeof err), 0, "%s", err);
    cr_assert(lq, "the export has QuantizeLinear/DequantizeLinear pairs");
    qrl_quantized_summary(lq, &sum);
    cr_assert_eq(sum.kernels, 5);
    qrl_model *lm = qrl_quantized_model(lq, err, sizeof err);
    cr_assert(lm, "%s", err);
    int64_t lcorrect = 0;
    cr_assert_eq(qrl_model_eval_top1(lm, &x, &y, 100, &lcorrect, err, sizeof err), 0, "%s", err);
    cr_log_info("top-1 of the export lowered: %lld of 10000", (long long)lcorrect);
    cr_assert_geq(lcorrect, 9220 - 50, "%lld", (long long)lcorrect);
    qrl_quantized_free(lq);
    /* its float graph (the pairs removed) is a model of its own, with no pairs left */
    cr_assert_eq(qrl_model_lower_qdq(e, NULL, stderr, &lq, err, sizeof err), 0, "%s", err);
    cr_assert_null(lq);
    qrl_model_free(e);
    /* a float model has none */
    cr_assert_eq(qrl_model_lower_qdq(m, NULL, stderr, &lq, err, sizeof err), 0, "%s", err);
    cr_assert_null(lq);

    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qrl_tensor_free(&x);
    qrl_tensor_free(&y);
    qrl_tensor_free(&c);
}

/* The MatMulNBits nodes of an ONNX file, as onnx reads it. */
static int matmulnbits_nodes(const char *path)
{
    char cmd[1024], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx; print(sum(n.op_type == 'MatMulNBits' for n in onnx.load('%s').graph.node))\"",
             path);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int n = atoi(log);
    free(log);
    return n;
}

/* qrl_quantize reads qrl_quantize_opts as libqrl.so.0's first header laid it out (a program built
 * against it passes that much), and the options that came later are qrl_quantize_flags' flags:
 * an old struct with non-zero bytes behind it quantizes as without them (the weight-only w4-rtn
 * recipe's two Gemm weights exported as QDQ), and QRL_QUANTIZE_MATMULNBITS exports both as
 * MatMulNBits. */
Test(api, quantize_reads_the_old_options_and_takes_flags)
{
    char err[1024] = "", path[700];
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 1, &m, err, sizeof err), 0, "%s", err);
    qrl_tensor c = npy("calib_images.npy");
    qrl_recipe *r;
    cr_assert_eq(qrl_recipe_compile("recipes/w4-rtn.qrl", 0, stderr, &r, err, sizeof err), 0, "%s", err);
    struct {
        struct {
            const char *recipe_name;
            int batch;
            int64_t calib_count;
            int threads;
            int progress;
            const qrl_tensor *labels;
        } o;
        unsigned char behind[64];
    } old;
    memset(&old, 0xff, sizeof old);
    old.o.recipe_name = NULL, old.o.batch = 0, old.o.calib_count = 64, old.o.threads = 1, old.o.progress = 0;
    old.o.labels = NULL;
    cr_assert_eq(sizeof(qrl_quantize_opts), sizeof old.o);
    qrl_quantized *q;
    cr_assert_eq(qrl_quantize(m, r, &c, (const qrl_quantize_opts *)(const void *)&old.o, &q, err, sizeof err), 0, "%s",
                 err);
    snprintf(path, sizeof path, "%s/old_opts.onnx", dir);
    cr_assert_eq(qrl_quantized_save(q, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(matmulnbits_nodes(path), 0, "the bytes behind the old struct were read as an option");
    qrl_quantized_free(q);
    cr_assert_eq(qrl_quantize_flags(m, r, &c, (const qrl_quantize_opts *)(const void *)&old.o, QRL_QUANTIZE_MATMULNBITS,
                                    &q, err, sizeof err),
                 0, "%s", err);
    snprintf(path, sizeof path, "%s/nbits.onnx", dir);
    cr_assert_eq(qrl_quantized_save(q, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(matmulnbits_nodes(path), 2, "the CNN's two Gemm weights as MatMulNBits");
    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qrl_tensor_free(&c);
}

/* qrl_mixed_info as libqrl.so.0's header first declared it (7b23ced), a guard behind it: the
 * library fills it and writes nothing past it; the samples the measured SQNRs are on come from a
 * call of their own. mixed-w48 on the CNN's two Gemm weights (a weight-only recipe chooses for
 * MatMul/Gemm), i4 or i8 under bits(6), 200 samples: validate = 0.25 holds 50 out, the layers are
 * chosen on the other 150 and the front measured on the 50. */
Test(api, mixed_info_keeps_its_first_layout)
{
    char err[1024] = "";
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 1, &m, err, sizeof err), 0, "%s", err);
    qrl_tensor c = npy("calib_images.npy");
    qrl_recipe *r;
    cr_assert_eq(qrl_recipe_compile("recipes/mixed-w48.qrl", 0, stderr, &r, err, sizeof err), 0, "%s", err);
    qrl_quantize_opts o = {.calib_count = 200, .threads = 1};
    qrl_quantized *q;
    cr_assert_eq(qrl_quantize(m, r, &c, &o, &q, err, sizeof err), 0, "%s", err);
    struct {
        struct {
            int layers, choices;
            int front;
            const char *budget_kind;
            double budget;
            int64_t choose_samples;
            int64_t heldout_samples;
            int points;
        } mi;
        unsigned char guard[64];
    } old;
    memset(&old, 0xa5, sizeof old);
    cr_assert_eq(qrl_quantized_mixed(q, (qrl_mixed_info *)(void *)&old.mi), 0);
    guard_intact(old.guard, sizeof old.guard, "qrl_mixed_info", sizeof old.mi);
    cr_assert_eq(sizeof(qrl_mixed_info), sizeof old.mi);
    cr_assert(old.mi.layers == 2 && old.mi.choices == 2 && old.mi.budget == 6 && old.mi.choose_samples == 150 &&
                  old.mi.heldout_samples == 50 && old.mi.points >= 3,
              "%d layers, %d choices, budget %g, chosen on %lld, %lld held out, %d points", old.mi.layers,
              old.mi.choices, old.mi.budget, (long long)old.mi.choose_samples, (long long)old.mi.heldout_samples,
              old.mi.points);
    cr_assert_str_eq(old.mi.budget_kind, "bits");
    int64_t measured = -1;
    cr_assert_eq(qrl_quantized_mixed_measured_samples(q, &measured), 0);
    cr_assert_eq(measured, 50);
    qrl_quantized_free(q);
    /* int8.qrl chooses no precisions: non-zero, nothing written */
    qrl_recipe_free(r);
    cr_assert_eq(qrl_recipe_compile("recipes/int8.qrl", 0, stderr, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_quantize(m, r, &c, &o, &q, err, sizeof err), 0, "%s", err);
    measured = -1;
    cr_assert(qrl_quantized_mixed_measured_samples(q, &measured) != 0 && measured == -1);
    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qrl_tensor_free(&c);
}

/* qrl_quantized_qparams answers by the model's own names (what qrl_node_output gives on m), not
 * by the integer graph's; qrl_quantized_tensor lists every quantized tensor once. The values
 * themselves are checked against onnx's reading of the QDQ export by tests/e2e/test_install.c. */
Test(api, qparams_by_the_models_names)
{
    char err[1024] = "";
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 1, &m, err, sizeof err), 0, "%s", err);
    qrl_tensor c = npy("calib_images.npy");
    qrl_recipe *r;
    cr_assert_eq(qrl_recipe_compile("recipes/int8.qrl", 0, stderr, &r, err, sizeof err), 0, "%s", err);
    qrl_quantized *q;
    qrl_quantize_opts o = {.calib_count = 100};
    cr_assert_eq(qrl_quantize(m, r, &c, &o, &q, err, sizeof err), 0, "%s", err);
    qrl_quant qp;
    /* the first conv's output after the fold (BatchNormalization's name) stays f32 inside the
     * kernel; the Relu after it is u8, per tensor; the folded weight i8 per output channel */
    cr_assert_neq(qrl_quantized_qparams(q, "input", &qp), 0, "the model's input is not quantized");
    cr_assert_neq(qrl_quantized_qparams(q, "/features/features.1/BatchNormalization_output_0", &qp), 0);
    cr_assert_neq(qrl_quantized_qparams(q, "/features/features.2/Relu_output_0_quantized", &qp), 0,
                  "an integer-graph name");
    cr_assert_neq(qrl_quantized_qparams(q, NULL, &qp), 0);
    cr_assert_eq(qrl_quantized_qparams(q, "/features/features.2/Relu_output_0", &qp), 0);
    cr_assert(qp.dtype == 2 && qp.axis == -1 && qp.count == 1 && qp.scale[0] > 0 && qp.zero_point[0] == 0,
              "u8 %d axis %d count %d zero %d", qp.dtype, qp.axis, qp.count, qp.count ? qp.zero_point[0] : -1);
    /* Relu: the range starts at 0, so the clip range does too, and spans 255 steps */
    cr_assert_float_eq(qp.clip_min, 0.0, 1e-12);
    cr_assert_float_eq(qp.clip_max, 255.0 * qp.scale[0], 1e-6 * qp.clip_max);
    cr_assert_eq(qrl_quantized_qparams(q, "features.0.weight_1", &qp), 0);
    cr_assert(qp.dtype == 3 && qp.axis == 0 && qp.count == 16 && isnan(qp.clip_min), "i8 %d axis %d count %d",
              qp.dtype, qp.axis, qp.count);
    cr_assert_eq(qrl_quantized_qparams(q, "features.0.bias_1", &qp), 0);
    cr_assert(qp.dtype == 6 && qp.count == 16, "i32 %d count %d", qp.dtype, qp.count);
    qrl_quant_summary sum;
    qrl_quantized_summary(q, &sum);
    int n = 0;
    for (const char *name; (name = qrl_quantized_tensor(q, n)); n++) {
        cr_assert_eq(qrl_quantized_qparams(q, name, &qp), 0, "%s", name);
        for (int k = 0; k < n; k++)
            cr_assert_str_neq(qrl_quantized_tensor(q, k), name, "listed twice");
    }
    cr_assert_eq(n, sum.activations + 10, "%d tensors: %d activations, 5 weights and 5 biases", n, sum.activations);
    cr_assert_null(qrl_quantized_tensor(q, -1));
    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qrl_tensor_free(&c);
}

/* A recipe with an error: the call fails, and diag gets exactly what `qrl check` prints (the golden file). */
Test(api, recipe_errors_are_diagnostics)
{
    char err[512] = "", *text = NULL;
    size_t len = 0;
    FILE *diag = open_memstream(&text, &len);
    qrl_recipe *r = (qrl_recipe *)1;
    setenv("QRL_STDLIB", "stdlib", 1);
    cr_assert_neq(qrl_recipe_compile("tests/diag/check_affine_without_output.qrl", 0, diag, &r, err, sizeof err), 0);
    fclose(diag);
    cr_assert_null(r);
    cr_assert(strstr(err, "check_affine_without_output.qrl: the recipe does not compile"), "%s", err);
    FILE *f = fopen("tests/diag/check_affine_without_output.expected", "r");
    cr_assert(f);
    char want[4096];
    want[fread(want, 1, sizeof want - 1, f)] = 0;
    fclose(f);
    cr_assert_str_eq(text, want);
    free(text);
}

/* Runs a Python script (numpy, onnx) in dir; its output into a fresh string the caller frees. */
static char *python(const char *script)
{
    char path[600], cmd[1400], *log;
    snprintf(path, sizeof path, "%s/script.py", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 script.py", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    return log;
}

/* A model of two named inputs and two outputs, y = Relu(a @ b) and z = a + a, with its inputs
 * as .npy files and numpy's outputs (the oracle) in dir. */
static const char small_model[] =
    "import numpy as np, onnx\n"
    "from onnx import helper as h, TensorProto as T\n"
    "g = h.make_graph([h.make_node('MatMul', ['a', 'b'], ['m']), h.make_node('Relu', ['m'], ['y']),\n"
    "                  h.make_node('Add', ['a', 'a'], ['z'])], 'small',\n"
    "    [h.make_tensor_value_info('a', T.FLOAT, ['N', 3]), h.make_tensor_value_info('b', T.FLOAT, [3, 4])],\n"
    "    [h.make_tensor_value_info('y', T.FLOAT, ['N', 4]), h.make_tensor_value_info('z', T.FLOAT, ['N', 3])])\n"
    "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), 'small.onnx')\n"
    "r = np.random.default_rng(7)\n"
    "a = r.standard_normal((2, 3)).astype(np.float32); b = r.standard_normal((3, 4)).astype(np.float32)\n"
    "np.save('a.npy', a); np.save('b.npy', b)\n"
    "np.save('y_ref.npy', np.maximum(a @ b, 0)); np.save('z_ref.npy', a + a)\n";

/* Inputs read from files by name and in order, the run's outputs written as .npy and compared by
 * numpy with its own results; the profile counts the MatMul's 2*3*4 multiply-accumulates. */
Test(api, inputs_from_files_run_and_outputs_to_npy)
{
    free(python(small_model));
    char err[1024] = "", p[700], a[700], b[700];
    qrl_model *m;
    snprintf(p, sizeof p, "%s/small.onnx", dir);
    cr_assert_eq(qrl_model_load(p, 1, &m, err, sizeof err), 0, "%s", err);
    qrl_value_info vi;
    cr_assert_eq(qrl_value_get(m, "a", &vi), 0);
    cr_assert_eq(vi.dims[0], -1);
    cr_assert_str_eq(vi.dim_param[0], "N");
    cr_assert_null(vi.dim_param[1]);

    /* b by name, a as the next unbound input */
    snprintf(a, sizeof a, "%s/a.npy", dir);
    snprintf(b, sizeof b, "b=%s/b.npy", dir);
    char *specs[] = {b, a};
    qrl_tensor in[2] = {{0}}, out[2] = {{0}};
    cr_assert_eq(qrl_model_read_inputs(m, "small.onnx", "-i", 2, specs, 0, in, err, sizeof err), 0, "%s", err);
    char tb[64];
    cr_assert_str_eq(qrl_tensor_type_str(&in[0], tb, sizeof tb), "f32[2,3]");
    cr_assert_str_eq(qrl_tensor_type_str(&in[1], tb, sizeof tb), "f32[3,4]");

    cr_assert_eq(qrl_model_configure(m, 2, QRL_RUN_PROFILE, err, sizeof err), 0, "%s", err);
    for (int r = 0; r < 3; r++) {
        if (r) /* the last run's outputs are kept */
            for (int j = 0; j < 2; j++)
                qrl_tensor_free(&out[j]);
        cr_assert_eq(qrl_model_run(m, in, out, err, sizeof err), 0, "%s", err);
    }
    int matmul = -1;
    for (int i = 0; i < qrl_model_num_nodes(m); i++)
        if (!strcmp(qrl_node_op(m, i), "MatMul"))
            matmul = i;
    qrl_node_profile np;
    const char *nop = NULL, *nname = NULL;
    cr_assert_eq(qrl_model_profile(m, matmul, &np), 0);
    cr_assert_eq(qrl_model_profile_node(m, matmul, &nop, &nname), 0);
    cr_assert_str_eq(nop, "MatMul");
    cr_assert_str_eq(nname, qrl_node_name(m, matmul));
    cr_assert_eq(np.runs, 3);
    cr_assert_float_eq(np.macs, 3 * 2 * 3 * 4, 1e-9, "%g MACs over 3 runs", np.macs);
    /* the old layout: filled, nothing written past it */
    GUARDED(node_profile_0) onp;
    memset(&onp, 0xa5, sizeof onp);
    cr_assert_eq(qrl_model_profile(m, matmul, (qrl_node_profile *)(void *)&onp.s), 0);
    guard_intact(onp.guard, sizeof onp.guard, "qrl_node_profile", sizeof onp.s);
    cr_assert_eq(sizeof(qrl_node_profile), sizeof onp.s);
    cr_assert(onp.s.runs == 3 && onp.s.macs == np.macs && onp.s.seconds == np.seconds);
    qrl_model_profile_reset(m);
    cr_assert_eq(qrl_model_profile(m, matmul, &np), 0);
    cr_assert_eq(np.runs, 0);
    cr_assert_neq(qrl_model_profile(m, qrl_model_num_nodes(m), &np), 0);
    nop = nname = NULL;
    cr_assert(qrl_model_profile_node(m, qrl_model_num_nodes(m), &nop, &nname) != 0 && !nop && !nname,
              "past the last node: non-zero, nothing written");
    qrl_run_stats st;
    qrl_model_stats(m, &st);
    cr_assert_eq(st.dynamic, 0);
    cr_assert(st.sum_bytes >= 2 * 4 * sizeof(float) && st.arena_bytes <= st.sum_bytes, "arena %zu, sum %zu",
              st.arena_bytes, st.sum_bytes);
    cr_assert_eq(qrl_model_banded_nodes(m), 0, "bands are off by default");
    GUARDED(run_stats_0) ors;
    memset(&ors, 0xa5, sizeof ors);
    qrl_model_stats(m, (qrl_run_stats *)(void *)&ors.s);
    guard_intact(ors.guard, sizeof ors.guard, "qrl_run_stats", sizeof ors.s);
    cr_assert_eq(sizeof(qrl_run_stats), sizeof ors.s);
    cr_assert(ors.s.sum_bytes == st.sum_bytes && ors.s.arena_bytes == st.arena_bytes && ors.s.dynamic == 0);

    char sub[700];
    snprintf(sub, sizeof sub, "%s/out/a/b", dir);
    cr_assert_eq(qrl_make_dirs(sub, err, sizeof err), 0, "%s", err);
    for (int j = 0; j < 2; j++) {
        snprintf(p, sizeof p, "%s/%s.npy", sub, qrl_model_output(m, j));
        cr_assert_eq(qrl_tensor_write_npy(p, &out[j], err, sizeof err), 0, "%s", err);
    }
    free(python("import numpy as np\n"
                "for n in 'yz':\n"
                "    got, ref = np.load('out/a/b/%s.npy' % n), np.load('%s_ref.npy' % n)\n"
                "    assert got.dtype == ref.dtype and got.shape == ref.shape, (n, got.dtype, got.shape)\n"
                "    assert np.allclose(got, ref, rtol=1e-6, atol=1e-6), (n, got, ref)\n"));
    /* and read back through the API */
    qrl_tensor back;
    cr_assert_eq(qrl_tensor_read_npy(p, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.dtype, 1);
    cr_assert_eq(memcmp(back.data, out[1].data, 2 * 3 * sizeof(float)), 0);
    qrl_tensor_free(&back);
    for (int j = 0; j < 2; j++) {
        qrl_tensor_free(&in[j]);
        qrl_tensor_free(&out[j]);
    }
    qrl_model_free(m);
}

/* Each way of binding input files wrongly has its own message; nothing is left in the inputs. */
Test(api, input_file_errors)
{
    free(python(small_model));
    char err[1024] = "", p[700], a[700], b[700], na[700], nb[700], nx[700];
    qrl_model *m;
    snprintf(p, sizeof p, "%s/small.onnx", dir);
    cr_assert_eq(qrl_model_load(p, 0, &m, err, sizeof err), 0, "%s", err);
    snprintf(a, sizeof a, "%s/a.npy", dir);
    snprintf(b, sizeof b, "%s/b.npy", dir);
    snprintf(na, sizeof na, "a=%s/a.npy", dir);
    snprintf(nb, sizeof nb, "b=%s/a.npy", dir);
    snprintf(nx, sizeof nx, "x=%s/a.npy", dir);
    qrl_tensor in[2] = {{0}};
    char *missing[] = {a}, *twice[] = {na, na}, *unknown[] = {nx}, *three[] = {a, b, a}, *wrong[] = {nb};
    cr_assert_neq(qrl_model_read_inputs(m, "small.onnx", "-i", 1, missing, 0, in, err, sizeof err), 0);
    cr_assert_str_eq(err, "small.onnx: missing input 'b' (f32[3,4]); pass it with -i b=FILE");
    cr_assert_null(in[0].data);
    cr_assert_neq(qrl_model_read_inputs(m, "small.onnx", "-i", 2, twice, 0, in, err, sizeof err), 0);
    cr_assert_str_eq(err, "input 'a' is given twice");
    cr_assert_neq(qrl_model_read_inputs(m, "small.onnx", "--data", 1, unknown, 1, in, err, sizeof err), 0);
    cr_assert_str_eq(err, "small.onnx: the model has no input named 'x'");
    cr_assert_neq(qrl_model_read_inputs(m, "small.onnx", "-i", 3, three, 0, in, err, sizeof err), 0);
    cr_assert_str_eq(err, "small.onnx: more input files than graph inputs (2)");
    cr_assert_neq(qrl_model_read_inputs(m, "small.onnx", "-i", 1, wrong, 0, in, err, sizeof err), 0);
    cr_assert(strstr(err, "a.npy does not fit small.onnx: "), "%s", err);
    cr_assert_null(in[0].data);
    cr_assert_null(in[1].data);
    qrl_model_free(m);
}

/* Tensors made by the caller: the bytes of an i8 tensor set through the API, and its type. */
Test(api, tensor_alloc_set_and_type)
{
    char err[256], tb[64];
    qrl_tensor t = {.dtype = 3, .ndim = 2, .dims = {2, 3}};
    cr_assert_eq(qrl_tensor_alloc(&t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(qrl_tensor_numel(&t), 6);
    for (int64_t i = 0; i < 6; i++)
        qrl_tensor_set_f64(&t, i, (double)(i * 10 - 20));
    const int8_t want[6] = {-20, -10, 0, 10, 20, 30};
    cr_assert_eq(memcmp(t.data, want, 6), 0);
    cr_assert_str_eq(qrl_tensor_type_str(&t, tb, sizeof tb), "i8[2,3]");
    qrl_tensor_free(&t);
    cr_assert(qrl_dtype_is_float(1) && qrl_dtype_is_float(11) && !qrl_dtype_is_float(3));
    cr_assert(qrl_dtype_is_int(3) && qrl_dtype_is_int(7) && !qrl_dtype_is_int(9) && !qrl_dtype_is_int(1));
    qrl_tensor bad = {.dtype = 1, .ndim = QRL_MAX_DIMS + 1};
    cr_assert_neq(qrl_tensor_alloc(&bad, err, sizeof err), 0);
}

/* An output is seen under its name only once committed; an aborted one leaves nothing in the folder. */
Test(api, outputs_are_atomic)
{
    char err[512], p[700];
    snprintf(p, sizeof p, "%s/o/x.json", dir);
    qrl_output *o;
    cr_assert_neq(qrl_output_open(p, &o, err, sizeof err), 0, "a missing folder");
    snprintf(p, sizeof p, "%s/x.json", dir);
    cr_assert_eq(qrl_output_open(p, &o, err, sizeof err), 0, "%s", err);
    fputs("{\"a\": 1}\n", qrl_output_stream(o));
    cr_assert(!tu_file_exists(p));
    cr_assert_eq(qrl_output_commit(o, err, sizeof err), 0, "%s", err);
    char *text = tu_slurp(p);
    cr_assert_str_eq(text, "{\"a\": 1}\n");
    free(text);
    snprintf(p, sizeof p, "%s/y.json", dir);
    cr_assert_eq(qrl_output_open(p, &o, err, sizeof err), 0, "%s", err);
    fputs("partial", qrl_output_stream(o));
    qrl_output_abort(o);
    cr_assert(!tu_file_exists(p));
    cr_assert_eq(tu_count_files(dir), 1, "x.json only: no temporary file is left");
}

/* Writes text to path inside an output group (qrl_outputs_begin). */
static void group_write(const char *path, const char *text)
{
    char err[512];
    qrl_output *o;
    cr_assert_eq(qrl_output_open(path, &o, err, sizeof err), 0, "%s", err);
    fputs(text, qrl_output_stream(o));
    cr_assert_eq(qrl_output_commit(o, err, sizeof err), 0, "%s", err);
}

/* Outputs all or nothing: within a group a committed file is not yet in place; an aborted group
 * leaves the files that were there as they were (and no temporary file), a committed one
 * replaces them all. New files take 0666 less the umask; a replaced one keeps its mode. Devices,
 * FIFOs and symbolic links are never replaced. */
Test(api, output_groups_are_all_or_nothing)
{
    char a[700], b[700], err[512], cmd[1600];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    FILE *f = fopen(a, "w");
    fputs("old a", f);
    fclose(f);
    chmod(a, 0600);
    mode_t old = umask(027);
    qrl_outputs_begin();
    group_write(a, "new a");
    group_write(b, "new b");
    char *t = tu_slurp(a);
    cr_expect_str_eq(t, "old a", "not in place before the group commits");
    free(t);
    cr_expect(!tu_file_exists(b));
    qrl_outputs_abort();
    t = tu_slurp(a);
    cr_expect_str_eq(t, "old a", "an aborted group changes nothing");
    free(t);
    cr_expect(!tu_file_exists(b));
    cr_expect_eq(tu_count_files(dir), 1, "no temporary file is left");
    qrl_outputs_begin();
    group_write(a, "new a");
    group_write(b, "new b");
    cr_assert_eq(qrl_outputs_commit(err, sizeof err), 0, "%s", err);
    umask(old);
    t = tu_slurp(a);
    cr_expect_str_eq(t, "new a");
    free(t);
    t = tu_slurp(b);
    cr_expect_str_eq(t, "new b");
    free(t);
    struct stat sa, sb;
    cr_assert(stat(a, &sa) == 0 && stat(b, &sb) == 0);
    cr_expect_eq(sa.st_mode & 0777, 0600, "a replaced file keeps its mode (%o)", sa.st_mode & 0777);
    cr_expect_eq(sb.st_mode & 0777, 0640, "a new file: 0666 less the umask 027 (%o)", sb.st_mode & 0777);
    qrl_output *o;
    snprintf(cmd, sizeof cmd, "ln -s a.json '%s/link' && mkfifo '%s/fifo'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    const char *refused[] = {"/dev/null", "link", "fifo"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s%s%s", i ? dir : "", i ? "/" : "", refused[i]);
        cr_expect_neq(qrl_output_open(cmd, &o, err, sizeof err), 0, "%s is refused", cmd);
        cr_expect(strstr(err, i == 1 ? "is a symbolic link" : "is not a regular file"), "%s", err);
    }
    struct stat sn;
    cr_expect(lstat("/dev/null", &sn) == 0 && S_ISCHR(sn.st_mode), "/dev/null is still a device");
}

/* qrl_model_dump prints the reviewed golden dump of the bundled CNN (as `qrl dump` does). */
Test(api, dump_is_the_golden_text)
{
    char err[512], *text = NULL;
    size_t len = 0;
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 0, &m, err, sizeof err), 0, "%s", err);
    FILE *f = open_memstream(&text, &len);
    qrl_model_dump(m, f);
    fclose(f);
    char *want = tu_slurp("tests/golden/fmnist_cnn.dump");
    cr_assert_str_eq(text, want);
    free(want);
    free(text);
    qrl_model_free(m);
}

/* qrl_recipe_check: a clean recipe counts its files (the recipe and what its imports reach, found by
 * python from the import lines) and no errors; the golden recipe's syntax tree is the reviewed
 * tests/golden/sketch.ast; a recipe with an error counts it and prints the golden diagnostics. */
Test(api, recipe_check)
{
    char err[512] = "", *log;
    qrl_check_stats st;
    setenv("QRL_STDLIB", "stdlib", 1);
    cr_assert_eq(qrl_recipe_check("recipes/int8.qrl", QRL_RECIPE_NO_CACHE, NULL, NULL, &st, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(st.errors, 0);
    cr_assert_eq(tu_run("/usr/bin/python3 -c \"import re, os\n"
                        "seen = set()\n"
                        "def walk(p):\n"
                        "    p = os.path.normpath(p)\n"
                        "    if p in seen: return\n"
                        "    seen.add(p)\n"
                        "    for m in re.finditer(r'^\\s*import\\s+\\\"([^\\\"]+)\\\"', open(p).read(), re.M):\n"
                        "        q = os.path.join(os.path.dirname(p), m.group(1))\n"
                        "        walk(q if os.path.exists(q) else os.path.join('stdlib', m.group(1)))\n"
                        "walk('recipes/int8.qrl'); print(len(seen))\"",
                        &log),
                 0, "%s", log);
    cr_assert_eq(st.files, atoi(log), "%d files, python found %s", st.files, log);
    free(log);
    cr_assert_neq(st.cache_hit, 1, "no cache: nothing loaded from it");
    cr_assert(st.nparts >= 1 && st.nparts <= QRL_CHECK_MAX_PARTS, "%d", st.nparts);
    cr_assert(st.parse_ms >= 0 && st.check_ms >= 0 && st.lex_ms >= 0);

    char *ast = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&ast, &len);
    cr_assert_eq(qrl_recipe_check("tests/golden/sketch.qrl", 0, NULL, f, &st, err, sizeof err), 0, "%s", err);
    fclose(f);
    char *want = tu_slurp("tests/golden/sketch.ast");
    cr_assert_str_eq(ast, want);
    free(want);
    free(ast);

    char *diag = NULL;
    f = open_memstream(&diag, &len);
    cr_assert_eq(qrl_recipe_check("tests/diag/check_affine_without_output.qrl", 0, f, NULL, &st, err, sizeof err), 0);
    fclose(f);
    cr_assert_eq(st.errors, 1);
    want = tu_slurp("tests/diag/check_affine_without_output.expected");
    cr_assert_str_eq(diag, want);
    free(want);
    free(diag);
}

/* rank = effect's effects and the measurement of what ships run each batch in two halves where a
 * batch's f32 activations outweigh the model's constants and its batch is free (PP-OCRv4 det: the
 * two runs of a batch of 4 side by side held the quantize's peak; docs/quantizer.md, stop 52). On
 * branchy.onnx (tools/make_fallback_models.py) at batch 4 a run then takes 2 samples, not the
 * batch's 4 (qrl_quantized_run_samples; --option halves=whole: 4), and every figure is the same
 * double as whole batches give: each layer's effect, its SQNR in the simulation and on the
 * integers, and the export, byte for byte; on 1 and 2 threads. */
Test(api, effects_and_what_ships_run_in_halves_to_the_same_bits)
{
    char cmd[2048], path[1024], err[1024] = "", *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_fallback_models.py' '%s'", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/v36.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
               "recipe r {\n  activation = u8 asymmetric by minmax()\n"
               "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
               "  fallback = f32 when output_sqnr < 36\n  outputs = worst\n}\n");
    fclose(f);
    qrl_recipe *r;
    cr_assert_eq(qrl_recipe_compile(path, QRL_RECIPE_NO_CACHE, stderr, &r, err, sizeof err), 0, "%s", err);
    qrl_model *m;
    snprintf(path, sizeof path, "%s/branchy.onnx", dir);
    cr_assert_eq(qrl_model_load(path, 1, &m, err, sizeof err), 0, "%s", err);
    qrl_tensor c;
    snprintf(path, sizeof path, "%s/branchy_x.npy", dir);
    cr_assert_eq(qrl_tensor_read_npy(path, &c, err, sizeof err), 0, "%s", err);
    enum { MAXL = 64 };
    double first[MAXL][3];
    int nl = -1;
    for (int k = 0; k < 4; k++) { /* whole on 1 thread (the reference), halves on 1, whole and halves on 2 */
        int threads = k < 2 ? 1 : 2, halves = k % 2;
        cr_assert_eq(qrl_set_option("halves", halves ? "auto" : "whole", err, sizeof err), 0, "%s", err);
        qrl_quantize_opts o = {.batch = 4, .threads = threads};
        qrl_quantized *q;
        cr_assert_eq(qrl_quantize(m, r, &c, &o, &q, err, sizeof err), 0, "%s", err);
        int64_t es = -1, ss = -1;
        cr_assert_eq(qrl_quantized_run_samples(q, &es, &ss), 0);
        cr_assert(es == (halves ? 2 : 4) && ss == (halves ? 2 : 4), "halves %d, %d threads: runs of %lld samples in "
                  "the effects, %lld in the measurement of what ships", halves, threads, (long long)es, (long long)ss);
        int i = 0, effects = 0, ints = 0;
        qrl_layer_info li;
        for (; i < MAXL && qrl_quantized_layer(q, i, &li) == 0; i++) {
            double got[3] = {li.sqnr, li.sqnr_int, 0};
            cr_assert_eq(qrl_quantized_layer_effect(q, i, &got[2]), 0);
            effects += !isnan(got[2]) && isfinite(got[2]);
            ints += !isnan(got[1]) && isfinite(got[1]);
            if (k == 0)
                memcpy(first[i], got, sizeof got);
            else
                cr_assert(!memcmp(first[i], got, sizeof got), "halves %d, %d threads, %s: SQNR %.17g, on the integers "
                          "%.17g, effect %.17g; whole on 1 thread: %.17g, %.17g, %.17g", halves, threads, li.value,
                          got[0], got[1], got[2], first[i][0], first[i][1], first[i][2]);
        }
        cr_assert(i < MAXL && effects >= 5 && ints >= 5, "%d layers, %d effects, %d SQNRs on the integers", i,
                  effects, ints);
        cr_assert(nl < 0 || nl == i);
        nl = i;
        snprintf(path, sizeof path, "%s/halves%d.onnx", dir, k);
        cr_assert_eq(qrl_quantized_save(q, path, err, sizeof err), 0, "%s", err);
        qrl_quantized_free(q);
    }
    cr_assert_eq(qrl_set_option("halves", "", err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "cd '%s' && cmp halves0.onnx halves1.onnx && cmp halves0.onnx halves2.onnx && "
             "cmp halves0.onnx halves3.onnx", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    qrl_tensor_free(&c);
    qrl_model_free(m);
    qrl_recipe_free(r);
}
