/* qrl quantize: a model, a recipe and calibration data in; a QDQ ONNX model
 * (and optionally the quantization parameters as JSON) out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "intgraph.h"
#include "onnx_export.h"
#include "qparams.h"
#include "qreport.h"
#include "quantize.h"
#include "tensor_io.h"

int cli_quantize(int argc, char **argv)
{
    const char *model = NULL, *recipe = NULL, *outp = NULL, *qparams = NULL, *name = NULL,
               *report = NULL, *intg = NULL, *labels = NULL;
    int batch = 32, threads = cli_default_threads(), count = 0, no_cache = 0, ncalib = 0;
    char *calib[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: qrl quantize MODEL.onnx --recipe R.qrl --calib [NAME=]X.npy... -o OUT.onnx\n"
                   "                    [--calib-count N] [--batch B] [--threads N] [--recipe-name NAME]\n"
                   "                    [--qparams Q.json] [--report R.html|R.json] [--int-graph G.txt]\n"
                   "                    [--labels Y.npy] [--no-cache]\n"
                   "Quantizes the model as the recipe says, calibrating on the samples of X.npy\n"
                   "(one --calib per model input: NAME=FILE binds by name, FILE the next input)\n"
                   "(along its first dimension), and writes a QDQ ONNX model: QuantizeLinear and\n"
                   "DequantizeLinear around the quantized ops, integer weights and biases. ONNX\n"
                   "Runtime runs it on its integer kernels; so does `qrl run`.\n"
                   "-o, --output OUT.onnx names the QDQ model written; --calib-count N calibrates on the\n"
                   "first N samples, --batch B (default 32) samples per calibration run; --recipe-name\n"
                   "NAME picks a recipe of the file (default: its first); --no-cache compiles\n"
                   "the recipe in memory.\n"
                   "--qparams writes every quantized tensor's dtype, scale, zero point, axis and\n"
                   "clip range as JSON. --report writes, per quantized tensor, its observed range,\n"
                   "qparams, SQNR against f32, clipped fraction and fallback (HTML with plots, or JSON).\n"
                   "--threads N runs calibration and the fallback's measurements on N threads\n"
                   "(default: every online core). Calibration runs N workers in parallel, each on\n"
                   "its own contiguous share of the batches with its own calibrator states (and its\n"
                   "own memory for one batch: the peak grows with N), merged at the end in worker\n"
                   "order by the calibrator's merge. Calibrators whose merge is exact (minmax and\n"
                   "the stdlib's histograms) give the same qparams at every N; others (the stdlib's\n"
                   "moving_average) are deterministic for a given N only.\n"
                   "--int-graph writes the integer graph the recipe lowers to (its kernels, tables and\n"
                   "integer ops, as `qrl eval --recipe` runs it) as text.\n"
                   "--labels gives the calibration samples' classes: top-1 of f32 and of the integer\n"
                   "graph, and in the report each layer's effect on top-1 when quantized alone.\n");
            return 0;
        }
        int has = i + 1 < argc;
        if (!strcmp(a, "--recipe") && has)
            recipe = argv[++i];
        else if (!strcmp(a, "--calib") && has) {
            if (ncalib == 64)
                return cli_usage_error("quantize", "too many --calib files");
            calib[ncalib++] = argv[++i];
        }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has)
            outp = argv[++i];
        else if (!strcmp(a, "--qparams") && has)
            qparams = argv[++i];
        else if (!strcmp(a, "--report") && has)
            report = argv[++i];
        else if (!strcmp(a, "--int-graph") && has)
            intg = argv[++i];
        else if (!strcmp(a, "--labels") && has)
            labels = argv[++i];
        else if (!strcmp(a, "--recipe-name") && has)
            name = argv[++i];
        else if (!strcmp(a, "--no-cache"))
            no_cache = 1;
        else if (!strcmp(a, "--calib-count") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 30, &count))
                return cli_usage_error("quantize", "--calib-count needs a positive number");
        } else if (!strcmp(a, "--batch") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 20, &batch))
                return cli_usage_error("quantize", "--batch needs a positive number");
        } else if (!strcmp(a, "--threads") && has) {
            if (!cli_parse_int(argv[++i], 1, 256, &threads))
                return cli_usage_error("quantize", "--threads needs a number from 1 to 256");
        } else if (a[0] == '-' || model)
            return cli_usage_error("quantize", "unexpected argument '%s'", a);
        else
            model = a;
    }
    if (!model || !recipe || !ncalib || !outp)
        return cli_usage_error("quantize", "needs MODEL.onnx, --recipe R.qrl, --calib X.npy and -o OUT.onnx");
    if (!*outp || (qparams && !*qparams) || (report && !*report) || (intg && !*intg))
        return cli_usage_error("quantize", "an output path (-o, --qparams, --report, --int-graph) is empty");

    qr_graph *g = NULL;
    qr_error e;
    int rc = 1;
    qrl_module *mod = NULL;
    qr_quantized *q = NULL;
    if (cli_load_model(model, &g, &e) != QR_OK)
        return cli_fail(&e);
    qr_tensor lab = {0};
    if (labels && qr_npy_read(labels, &lab, &e) != QR_OK) {
        qr_graph_free(g);
        return cli_fail(&e);
    }
    qr_quant_opts qo = {.recipe = name, .batch = batch, .calib_count = count, .threads = threads, .progress = 1,
                        .labels = labels ? &lab : NULL};
    if ((rc = cli_quantize_in_memory(model, g, recipe, no_cache, ncalib, calib, &qo, &mod, &q)) != 0)
        goto out;
    rc = 1;
    /* All or nothing, but only ever undoing this run: a file is removed after a
     * failure only if this run created it (not if it was there before, and a
     * directory given as a path is never touched). */
    const char *paths[4] = {outp, qparams, report, intg};
    int created[4] = {0};
    for (int k = 0; k < 4; k++) {
        struct stat sb;
        created[k] = paths[k] && lstat(paths[k], &sb) != 0;
    }
    int done = 0;
    qr_status wst = qr_onnx_save(q->qdq, outp, &e);
    if (wst == QR_OK && ++done && qparams)
        wst = qr_qparams_write(qparams, q, recipe, &e);
    if (wst == QR_OK && ++done && report)
        wst = qr_report_write(q, model, report, &e);
    if (wst == QR_OK && ++done && intg)
        wst = qr_intgraph_write(intg, q, &e);
    if (wst != QR_OK) {
        for (int k = 0; k < done; k++)
            if (paths[k] && created[k])
                unlink(paths[k]);
        rc = cli_fail(&e);
        goto out;
    }
    printf("quantized: %s -> %s\n", model, outp);
    printf("nodes:     %d by patterns, %d by affine rules, %d in f32\n", q->nodes_pattern, q->nodes_affine,
           q->nodes_float);
    printf("tensors:   %d activations, %d weights\n", q->nlayers, q->weights);
    printf("lowered:   %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
           q->ig->kernels, q->ig->lookups, q->ig->int_ops, q->ig->requants, q->ig->islands);
    printf("calibration: %lld samples in %.0f ms (one fp32 pass: %.0f ms, ratio %.2f)\n", (long long)q->samples,
           q->calib_ms, q->fp32_ms, q->fp32_ms > 0 ? q->calib_ms / q->fp32_ms : 0.0);
    double worst = INFINITY, iworst = INFINITY;
    const char *worst_name = "", *iworst_name = "";
    for (int i = 0; i < q->nlayers; i++) {
        if (q->layers[i].sqnr < worst)
            worst = q->layers[i].sqnr, worst_name = q->layers[i].value;
        if (q->layers[i].sqnr_int < iworst) /* NaN compares false: tensors off the integers */
            iworst = q->layers[i].sqnr_int, iworst_name = q->layers[i].value;
    }
    if (q->nlayers)
        printf("sqnr:      lowest %.1f dB (%s), in the integer graph %.1f dB (%s); %d tensor%s fell back to f32\n",
               worst, worst_name, iworst, iworst_name, q->fallbacks, q->fallbacks == 1 ? "" : "s");
    printf("output:    SQNR %.1f dB against f32 (the integer graph)%s; %.1f%% of %.3g MACs per sample in integers\n",
           q->output_sqnr, q->output_nonfinite ? ", NOT FINITE" : "", q->macs > 0 ? 100.0 * q->macs_int / q->macs : 0.0,
           q->macs);
    if (labels) {
        int worst = -1;
        for (int i = 0; i < q->nlayers; i++)
            if (!isnan(q->layers[i].top1_delta) && (worst < 0 || q->layers[i].top1_delta < q->layers[worst].top1_delta))
                worst = i;
        printf("top-1:     %.2f%% f32, %.2f%% integer graph on %lld calibration samples", q->top1_fp32, q->top1_int8,
               (long long)q->top1_samples);
        if (worst >= 0)
            printf("; most sensitive alone: %s (%+.2f points)", q->layers[worst].value, q->layers[worst].top1_delta);
        printf("\n");
    }
    for (int i = 0; i < q->nnotes; i++)
        fprintf(stderr, "note: %s\n", q->notes[i]);
    if (qparams)
        printf("qparams:   %s\n", qparams);
    if (report)
        printf("report:    %s\n", report);
    rc = 0;
out:
    qr_quantized_free(q);
    qr_module_free(mod);
    qr_graph_free(g);
    qr_tensor_free(&lab);
    return rc;
}
