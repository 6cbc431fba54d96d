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

typedef struct quantize_args {
    const char *model, *recipe, *outp, *qparams, *name, *report, *intg, *labels;
    int batch, threads, count, no_cache, ncalib;
    char *calib[64];
} quantize_args;

static void usage(void)
{
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
}

/* Fills a from the command line: -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, quantize_args *a)
{
    *a = (quantize_args){.batch = 32, .threads = cli_default_threads()};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage();
            return 0;
        }
        int has = i + 1 < argc;
        if (!strcmp(s, "--recipe") && has)
            a->recipe = argv[++i];
        else if (!strcmp(s, "--calib") && has) {
            if (a->ncalib == 64)
                return cli_usage_error("quantize", "too many --calib files");
            a->calib[a->ncalib++] = argv[++i];
        }
        else if ((!strcmp(s, "-o") || !strcmp(s, "--output")) && has)
            a->outp = argv[++i];
        else if (!strcmp(s, "--qparams") && has)
            a->qparams = argv[++i];
        else if (!strcmp(s, "--report") && has)
            a->report = argv[++i];
        else if (!strcmp(s, "--int-graph") && has)
            a->intg = argv[++i];
        else if (!strcmp(s, "--labels") && has)
            a->labels = argv[++i];
        else if (!strcmp(s, "--recipe-name") && has)
            a->name = argv[++i];
        else if (!strcmp(s, "--no-cache"))
            a->no_cache = 1;
        else if (!strcmp(s, "--calib-count") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 30, &a->count))
                return cli_usage_error("quantize", "--calib-count needs a positive number");
        } else if (!strcmp(s, "--batch") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 20, &a->batch))
                return cli_usage_error("quantize", "--batch needs a positive number");
        } else if (!strcmp(s, "--threads") && has) {
            if (!cli_parse_int(argv[++i], 1, 256, &a->threads))
                return cli_usage_error("quantize", "--threads needs a number from 1 to 256");
        } else if (s[0] == '-' || a->model)
            return cli_usage_error("quantize", "unexpected argument '%s'", s);
        else
            a->model = s;
    }
    if (!a->model || !a->recipe || !a->ncalib || !a->outp)
        return cli_usage_error("quantize", "needs MODEL.onnx, --recipe R.qrl, --calib X.npy and -o OUT.onnx");
    if (!*a->outp || (a->qparams && !*a->qparams) || (a->report && !*a->report) || (a->intg && !*a->intg))
        return cli_usage_error("quantize", "an output path (-o, --qparams, --report, --int-graph) is empty");
    return -1;
}

/* Every output file, all or nothing, but only ever undoing this run: a file is
 * removed after a failure only if this run created it (not if it was there
 * before, and a directory given as a path is never touched). */
static qr_status write_outputs(const quantize_args *a, const qr_quantized *q, qr_error *e)
{
    const char *paths[4] = {a->outp, a->qparams, a->report, a->intg};
    int created[4] = {0};
    for (int k = 0; k < 4; k++) {
        struct stat sb;
        created[k] = paths[k] && lstat(paths[k], &sb) != 0;
    }
    int done = 0;
    qr_status wst = qr_onnx_save(q->qdq, a->outp, e);
    if (wst == QR_OK && ++done && a->qparams)
        wst = qr_qparams_write(a->qparams, q, a->recipe, e);
    if (wst == QR_OK && ++done && a->report)
        wst = qr_report_write(q, a->model, a->report, e);
    if (wst == QR_OK && ++done && a->intg)
        wst = qr_intgraph_write(a->intg, q, e);
    if (wst != QR_OK)
        for (int k = 0; k < done; k++)
            if (paths[k] && created[k])
                unlink(paths[k]);
    return wst;
}

/* The lowest SQNR of the quantized tensors, and in the integer graph. */
static void print_sqnr(const qr_quantized *q)
{
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
}

/* Top-1 of f32 and of the integer graph on the labelled calibration samples, and the most sensitive layer. */
static void print_top1(const qr_quantized *q)
{
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

static void print_summary(const quantize_args *a, const qr_quantized *q)
{
    printf("quantized: %s -> %s\n", a->model, a->outp);
    printf("nodes:     %d by patterns, %d by affine rules, %d in f32\n", q->nodes_pattern, q->nodes_affine,
           q->nodes_float);
    printf("tensors:   %d activations, %d weights\n", q->nlayers, q->weights);
    printf("lowered:   %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
           q->ig->kernels, q->ig->lookups, q->ig->int_ops, q->ig->requants, q->ig->islands);
    printf("calibration: %lld samples in %.0f ms (one fp32 pass: %.0f ms, ratio %.2f)\n", (long long)q->samples,
           q->calib_ms, q->fp32_ms, q->fp32_ms > 0 ? q->calib_ms / q->fp32_ms : 0.0);
    print_sqnr(q);
    printf("output:    SQNR %.1f dB against f32 (the integer graph)%s; %.1f%% of %.3g MACs per sample in integers\n",
           q->output_sqnr, q->output_nonfinite ? ", NOT FINITE" : "", q->macs > 0 ? 100.0 * q->macs_int / q->macs : 0.0,
           q->macs);
    if (a->labels)
        print_top1(q);
    for (int i = 0; i < q->nnotes; i++)
        fprintf(stderr, "note: %s\n", q->notes[i]);
    if (a->qparams)
        printf("qparams:   %s\n", a->qparams);
    if (a->report)
        printf("report:    %s\n", a->report);
}

int cli_quantize(int argc, char **argv)
{
    quantize_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    qr_graph *g = NULL;
    qr_error e;
    qrl_module *mod = NULL;
    qr_quantized *q = NULL;
    if (cli_load_model(a.model, &g, &e) != QR_OK)
        return cli_fail(&e);
    qr_tensor lab = {0};
    if (a.labels && qr_npy_read(a.labels, &lab, &e) != QR_OK) {
        qr_graph_free(g);
        return cli_fail(&e);
    }
    qr_quant_opts qo = {.recipe = a.name, .batch = a.batch, .calib_count = a.count, .threads = a.threads,
                        .progress = 1, .labels = a.labels ? &lab : NULL};
    rc = cli_quantize_in_memory(a.model, g, a.recipe, a.no_cache, a.ncalib, a.calib, &qo, &mod, &q);
    if (rc == 0 && write_outputs(&a, q, &e) != QR_OK)
        rc = cli_fail(&e);
    if (rc == 0)
        print_summary(&a, q);
    qr_quantized_free(q);
    qr_module_free(mod);
    qr_graph_free(g);
    qr_tensor_free(&lab);
    return rc;
}
