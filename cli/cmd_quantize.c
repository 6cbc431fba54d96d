/* qrl quantize: a model, a recipe and calibration data in; a QDQ ONNX model
 * (and optionally the quantization parameters as JSON) out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct quantize_args {
    const char *model, *recipe, *outp, *qparams, *name, *report, *intg, *labels, *transformed;
    int batch, threads, count, no_cache, ncalib, quiet, matmulnbits, external, profile;
    char *calib[64];
} quantize_args;

static void usage(void)
{
    printf("usage: qrl quantize MODEL.onnx --recipe R.qrl --calib [NAME=]X.npy... -o OUT.onnx\n"
           "                    [--calib-count N] [--batch B] [--threads N] [--recipe-name NAME]\n"
           "                    [--qparams Q.json] [--report R.html|R.json] [--int-graph G.txt]\n"
           "                    [--transformed T.onnx] [--labels Y.npy] [--no-cache] [--quiet] [--weight-format qdq|matmulnbits]\n"
           "                    [--external-data] [--profile]\n"
           "Quantizes the model as the recipe says, calibrating on the samples of X.npy\n"
           "(one --calib per model input: NAME=FILE binds by name, FILE the next input)\n"
           "(along its first dimension), and writes a QDQ ONNX model: QuantizeLinear and\n"
           "DequantizeLinear around the quantized ops, integer weights and biases. ONNX\n"
           "Runtime runs it on its integer kernels; so does `qrl run`.\n"
           "--calib DIR takes the .npy files of the folder DIR (name order, hidden files left out)\n"
           "as one stream of samples: every shard holds the same dtype and dims after the first.\n"
           "A .npy is mapped, not read whole: it may be larger than the memory.\n"
           "-o, --output OUT.onnx names the QDQ model written; --calib-count N calibrates on the\n"
           "first N samples, --batch B samples per calibration and measurement run (default\n"
           "32, fewer where one batch's activations would take more than 64 MB: the runs\n"
           "hold a batch each); --recipe-name NAME picks a recipe of the file (default: its\n"
           "first); --no-cache compiles the recipe in memory.\n"
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
           "Under mpirun (mpirun -np N qrl quantize ...), rank r of N calibrates its contiguous\n"
           "share of the batches and the ranks' states are merged the same way; every rank then\n"
           "takes its share of the measurements and of the fallback's and mixed precision's runs,\n"
           "with the decisions of one process, and rank 0 writes the outputs\n"
           "(docs/distributed.md). --threads then defaults to the cores divided by the ranks on\n"
           "the machine.\n"
           "--int-graph writes the integer graph the recipe lowers to (its kernels, tables and\n"
           "integer ops, as `qrl eval --recipe` runs it) as text.\n"
           "--transformed writes the model as the recipe's transforms left it, in f32 before\n"
           "quantization (an equalization's rescaled weights and per-channel bounds).\n"
           "--labels gives the calibration samples' classes: top-1 of f32 and of the integer\n"
           "graph, and in the report each layer's effect on top-1 when quantized alone.\n"
           "On a terminal, the long phases (the f32 pass, calibration, the fallback's search, the\n"
           "export: the bytes of the model and of its .data file) draw a progress bar on stderr\n"
           "with the time left; --quiet draws none (nor does a stderr that is not a terminal).\n"
           "--weight-format (weight-only recipes, activation = f32): qdq (the default) writes each\n"
           "quantized weight as a DequantizeLinear (opset 21: 4-bit, blocks) into the f32 op;\n"
           "matmulnbits writes a MatMul (or a Gemm without transA) whose weight is 4-bit in blocks as\n"
           "ONNX Runtime's com.microsoft MatMulNBits, the same integers (others stay qdq).\n"
           "--external-data writes the initializers of 1 KB or more to OUT.onnx.data beside the model\n"
           "(ONNX external data), as the export does by itself when the model would pass 2 GB.\n"
           "--profile prints where the time went (wall and CPU seconds of each phase: the f32 pass,\n"
           "calibration, the fallback's measurements, the measurement of what ships, the export;\n"
           "and the process's peak memory so far at each phase's end: where it rose, that phase\n"
           "set it; and the runs each phase made, in f32 passes over the calibration samples: node-runs\n"
           "x samples over the model's nodes x those samples) and each measurement of the outputs the\n"
           "fallback took: the layers in f32, the samples\n"
           "it judged on and those it ran (the rest kept from an earlier try), whether the\n"
           "recipe held, the output SQNR.\n");
}

/* Fills a from the command line: -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, quantize_args *a)
{
    *a = (quantize_args){.batch = 0, .threads = cli_default_threads()}; /* batch 0: quantize chooses */
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
        else if (!strcmp(s, "--transformed") && has)
            a->transformed = argv[++i];
        else if (!strcmp(s, "--labels") && has)
            a->labels = argv[++i];
        else if (!strcmp(s, "--recipe-name") && has)
            a->name = argv[++i];
        else if (!strcmp(s, "--quiet"))
            a->quiet = 1;
        else if (!strcmp(s, "--weight-format") && has) {
            const char *f = argv[++i];
            if (strcmp(f, "qdq") && strcmp(f, "matmulnbits"))
                return cli_usage_error("quantize", "--weight-format is qdq or matmulnbits, not '%s'", f);
            a->matmulnbits = !strcmp(f, "matmulnbits");
        }
        else if (!strcmp(s, "--external-data"))
            a->external = 1;
        else if (!strcmp(s, "--profile"))
            a->profile = 1;
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
    if (!*a->outp || (a->qparams && !*a->qparams) || (a->report && !*a->report) || (a->intg && !*a->intg) ||
        (a->transformed && !*a->transformed))
        return cli_usage_error("quantize", "an output path (-o, --qparams, --report, --int-graph, --transformed) is "
                               "empty");
    return -1;
}

/* path as one spelling of the file: its directory resolved (symbolic links, "..") and its name. */
static void canon_path(const char *path, char *out, size_t n)
{
    char dir[4096], real[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    if (realpath(dir, real))
        snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
    else
        snprintf(out, n, "%s", path);
}

/* Whether a and b name the same file: the same inode when both exist, else the same spelling. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ca[8192], cb[8192];
    canon_path(a, ca, sizeof ca);
    canon_path(b, cb, sizeof cb);
    return !strcmp(ca, cb);
}

/* Before any work (calibration takes minutes): every output path may be written, no two name
 * the same file, and none names an input (the model, the recipe, calibration data, labels). */
static int check_outputs(const quantize_args *a, char *err)
{
    char data[4096]; /* --external-data's OUT.onnx.data */
    snprintf(data, sizeof data, "%s.data", a->outp);
    const char *outs[6] = {a->outp, a->qparams, a->report, a->intg, a->external ? data : NULL, a->transformed},
               *flag[6] = {"-o", "--qparams", "--report", "--int-graph", "--external-data", "--transformed"};
    const char *ins[70] = {a->model, a->recipe, a->labels};
    int nin = 3;
    for (int i = 0; i < a->ncalib && nin < 70; i++) { /* NAME=FILE or FILE */
        const char *eq = strchr(a->calib[i], '=');
        ins[nin++] = eq && !memchr(a->calib[i], '/', (size_t)(eq - a->calib[i])) ? eq + 1 : a->calib[i];
    }
    for (int k = 0; k < 6; k++) {
        if (!outs[k])
            continue;
        if (qrl_output_check(outs[k], err, CLI_ERRLEN) != 0)
            return -1;
        for (int j = 0; j < k; j++)
            if (outs[j] && same_file(outs[j], outs[k]))
                return snprintf(err, CLI_ERRLEN, "%s: given for both %s and %s; each output needs its own file",
                                outs[k], flag[j], flag[k]), -1;
        for (int i = 0; i < nin; i++)
            if (ins[i] && same_file(ins[i], outs[k]))
                return snprintf(err, CLI_ERRLEN, "%s: %s would overwrite an input of this run", outs[k], flag[k]), -1;
    }
    return 0;
}

/* Every output file, all or nothing: each is finished beside its path, and only when all are
 * are they renamed into place; on a failure the files that were there stay as they were. */
static int write_outputs(const quantize_args *a, const qrl_quantized *q, char *err)
{
    qrl_outputs_begin();
    int wst = qrl_quantized_save_external(q, a->outp, a->external, err, CLI_ERRLEN);
    if (wst == 0 && a->qparams)
        wst = qrl_quantized_write_qparams(q, a->qparams, err, CLI_ERRLEN);
    if (wst == 0 && a->report)
        wst = qrl_quantized_write_report(q, a->model, a->report, err, CLI_ERRLEN);
    if (wst == 0 && a->intg)
        wst = qrl_quantized_write_int_graph(q, a->intg, err, CLI_ERRLEN);
    if (wst == 0 && a->transformed)
        wst = qrl_quantized_write_transformed(q, a->transformed, err, CLI_ERRLEN);
    if (wst != 0) {
        qrl_outputs_abort();
        return wst;
    }
    return qrl_outputs_commit(err, CLI_ERRLEN);
}

/* The lowest SQNR of the quantized tensors, and in the integer graph. */
static void print_sqnr(const qrl_quantized *q, const qrl_quant_summary *s)
{
    double worst = INFINITY, iworst = INFINITY;
    const char *worst_name = "", *iworst_name = "";
    qrl_layer_info l;
    for (int i = 0; qrl_quantized_layer(q, i, &l) == 0; i++) {
        if (l.sqnr < worst)
            worst = l.sqnr, worst_name = l.value;
        if (l.sqnr_int < iworst) /* NaN compares false: tensors off the integers */
            iworst = l.sqnr_int, iworst_name = l.value;
    }
    char widened[64] = ""; /* fallback = u16 then f32: the layers its 16-bit step kept on the integers */
    int nw = qrl_quantized_widened(q);
    if (nw)
        snprintf(widened, sizeof widened, ", %d to 16 bits", nw);
    if (qrl_quantized_search_given_up(q)) /* appended: the line as it was otherwise */
        snprintf(widened + strlen(widened), sizeof widened - strlen(widened), " (search_floor: no search)");
    if (qrl_quantized_idle_to_f32(q))
        snprintf(widened + strlen(widened), sizeof widened - strlen(widened), " (idle: none ran on the integers)");
    if (s->activations)
        printf("sqnr:      lowest %.1f dB (%s), in the integer graph %.1f dB (%s); %d tensor%s fell back to f32%s\n",
               worst, worst_name, iworst, iworst_name, s->fallbacks, s->fallbacks == 1 ? "" : "s", widened);
}

/* Top-1 of f32 and of the integer graph on the labelled calibration samples, and the most sensitive layer. */
static void print_top1(const qrl_quantized *q, const qrl_quant_summary *s)
{
    qrl_layer_info l, worst = {.value = NULL};
    for (int i = 0; qrl_quantized_layer(q, i, &l) == 0; i++)
        if (!isnan(l.top1_delta) && (!worst.value || l.top1_delta < worst.top1_delta))
            worst = l;
    printf("top-1:     %.2f%% f32, %.2f%% integer graph on %lld calibration samples", s->top1_fp32, s->top1_int8,
           (long long)s->top1_samples);
    if (worst.value)
        printf("; most sensitive alone: %s (%+.2f points)", worst.value, worst.top1_delta);
    printf("\n");
}

/* accumulate = iN: how often the narrow accumulators overflowed, and where most. */
static void print_accumulator(const qrl_quantized *q, int bits, int saturate, int64_t sums, int64_t overflows,
                              int layers, int overflowing)
{
    qrl_layer_info l;
    const char *worst = NULL;
    int64_t worst_over = 0, lsums, lover;
    for (int i = 0; qrl_quantized_layer(q, i, &l) == 0 && qrl_quantized_layer_acc(q, i, &lsums, &lover) == 0; i++)
        if (lover > worst_over)
            worst = l.value, worst_over = lover;
    printf("accumulator: i%d, %s: %lld of %lld partial sums left its range (%d of %d layers)", bits,
           saturate ? "saturating" : "wrapping", (long long)overflows, (long long)sums, overflowing, layers);
    if (worst)
        printf("; most in %s (%lld)", worst, (long long)worst_over);
    printf("\n");
}

/* Mixed precision: the layers' choices, and the front as a table (the chosen row marked). */
static void print_mixed(const qrl_quantized *q)
{
    qrl_mixed_info mi;
    int64_t measured = 0;
    if (qrl_quantized_mixed(q, &mi) != 0 || qrl_quantized_mixed_measured_samples(q, &measured) != 0)
        return;
    printf("mixed:     budget = %s(%g) over %d layers, choosing among", mi.budget_kind, mi.budget, mi.layers);
    for (int c = 0; c < mi.choices; c++)
        printf(" %s", qrl_quantized_mixed_choice(q, c));
    printf("; front of %d points; predicted on %lld samples, measured on %lld %s\n", mi.front,
           (long long)mi.choose_samples, (long long)measured,
           mi.heldout_samples ? "held-out ones" : "calibration ones");
    printf("  %12s %8s %14s %13s  %s\n", "bytes", "avg bits", "predicted dB", "measured dB", "layers");
    qrl_mixed_point p;
    for (int i = 0; qrl_quantized_mixed_point(q, i, &p) == 0; i++) {
        printf("%s %12.0f %8.3f %14.2f %13.2f  ", p.chosen ? "*" : " ", p.bytes, p.bits, p.predicted, p.measured);
        for (int c = 0, first = 1; c < mi.choices && c < 8; c++)
            if (p.counts[c]) {
                printf("%s%d %s", first ? "" : ", ", p.counts[c], qrl_quantized_mixed_choice(q, c));
                first = 0;
            }
        if (p.uniform >= 0)
            printf(" (uniform)");
        printf("%s\n", p.chosen ? " (chosen)" : "");
    }
}

/* The quantized weights' integers at their width (4-bit ones two to a byte) against their f32. */
static void print_weight_bytes(const qrl_quantized *qz, const qrl_quant_summary *q)
{
    int64_t bytes, f32_bytes;
    int w4;
    qrl_quantized_weight_bytes(qz, &bytes, &f32_bytes, &w4);
    if (f32_bytes > 0)
        printf("bytes:     %lld of weight integers (%d of %d weights 4-bit), %lld in f32: %.3fx\n", (long long)bytes,
               w4, q->weights, (long long)f32_bytes, (double)bytes / (double)f32_bytes);
}

/* The recipe's steps = measure: each prefix of its transform chain, every layer quantized, on the
 * held-out samples (the calibration samples' where none are) and on the calibration samples. */
static void print_steps(const qrl_quantized *qz)
{
    double cal, val;
    if (!qrl_quantized_step(qz, 0, &cal, &val))
        return;
    int held = !isnan(val);
    printf("steps:     (%s, all quantized):", held ? "validate" : "calibrate");
    for (int i = 0; qrl_quantized_step(qz, i, &cal, &val); i++)
        printf("%s %s %.1f%s", i ? "," : "", qrl_quantized_step(qz, i, &cal, &val), held ? val : cal, i ? "" : " dB");
    if (held) {
        printf("; calibrate:");
        for (int i = 0; qrl_quantized_step(qz, i, &cal, &val); i++)
            printf("%s %.1f", i ? "," : "", cal);
    }
    printf("\n");
}

/* What the quantize ran, in f32 passes over its n calibration samples (qrl_quantized_runs), and
 * its two largest phases: where issue 24's cost bound (3 passes and a logarithmic number of
 * validation passes) goes. */
static void print_runs(const qrl_quantized *qz, int64_t ns, int64_t nv)
{
    int64_t n = ns + nv;
    int64_t pass = 0, total = 0;
    qrl_quantized_runs(qz, &pass, &total);
    if (pass <= 0 || total <= 0)
        return;
    const char *name[2] = {NULL, NULL};
    int64_t most[2] = {0, 0};
    qrl_quant_phase p;
    for (int i = 0; qrl_quantized_phase(qz, i, &p) == 0; i++) {
        int64_t r = 0;
        qrl_quantized_phase_runs(qz, i, &r);
        if (r > most[0])
            most[1] = most[0], name[1] = name[0], most[0] = r, name[0] = p.name;
        else if (r > most[1])
            most[1] = r, name[1] = p.name;
    }
    printf("runs:      %.2f f32 passes over the %lld calibration samples (node-runs x samples)", (double)total / (double)pass,
           (long long)n);
    for (int i = 0; i < 2 && name[i]; i++)
        printf("%s%s %.2f", i ? ", " : "; the most: ", name[i], (double)most[i] / (double)pass);
    printf("\n");
    /* issue 24's own units: f32 passes over the samples calibrated on (its 3), and validation passes
     * over those judged on beside log2 of the tensors the search ranked (its logarithmic number) */
    int64_t cpass = 0, cal = 0, vpass = 0, val = 0;
    int ranked = 0;
    qrl_quantized_runs_split(qz, &cpass, &cal, &vpass, &val, &ranked);
    if (cpass <= 0 || vpass <= 0)
        return;
    printf("           %.2f f32 passes over the %lld samples calibrated on (issue 24: at most 3); %.2f validation passes "
           "over the %lld %s",
           (double)cal / (double)cpass, (long long)ns, (double)val / (double)vpass, (long long)(nv ? nv : ns),
           nv ? "held out" : "judged on (none held out)");
    if (ranked > 0)
        printf(" (log2 of the %d tensors the search ranked: %.2f)", ranked, log2((double)ranked));
    printf("\n");
}

static void print_summary(const quantize_args *a, const qrl_quantized *qz)
{
    qrl_quant_summary s, *q = &s;
    qrl_quantized_summary(qz, &s);
    int batch = qrl_quantized_batch(qz), n_outputs, acc_bits, acc_saturate, acc_layers, acc_overflowing;
    double pooled, worst, energy;
    const char *worst_name, *samples_fn;
    int64_t acc_sums, acc_overflows;
    qrl_quantized_output_figures(qz, &n_outputs, &pooled, &worst, &worst_name, &samples_fn, &energy);
    qrl_quantized_accumulator(qz, &acc_bits, &acc_saturate, &acc_sums, &acc_overflows, &acc_layers, &acc_overflowing);
    printf("quantized: %s -> %s\n", a->model, a->outp);
    if (qrl_quantized_weight_only(qz)) { /* no integer graph, nothing calibrated: the weights, and the outputs' error */
        printf("weights:   %d quantized (weight-only: activations stay f32)\n", q->weights);
        print_weight_bytes(qz, q);
        if (q->validate_samples > 0)
            printf("output:    SQNR %.1f dB against f32 on %lld held-out samples%s; %.1f dB on the %lld it chose on\n",
                   q->output_sqnr, (long long)q->validate_samples, q->output_nonfinite ? ", NOT FINITE" : "",
                   q->output_sqnr_calib, (long long)q->samples);
        else if (isnan(q->output_cosine)) /* mixed precision measures the error alone */
            printf("output:    SQNR %.1f dB against f32 on %lld samples%s\n", q->output_sqnr, (long long)q->samples,
                   q->output_nonfinite ? ", NOT FINITE" : "");
        else
            printf("output:    SQNR %.1f dB against f32 on %lld samples%s; cosine %.5f\n", q->output_sqnr,
                   (long long)q->samples, q->output_nonfinite ? ", NOT FINITE" : "", q->output_cosine);
        print_mixed(qz);
        for (int i = 0; qrl_quantized_note(qz, i); i++) /* the transforms' */
            fprintf(stderr, "note: %s\n", qrl_quantized_note(qz, i));
        if (a->report)
            printf("report:    %s\n", a->report);
        return;
    }
    printf("nodes:     %d by patterns, %d by affine rules, %d in f32\n", q->nodes_pattern, q->nodes_affine,
           q->nodes_float);
    if (q->dynamic)
        printf("tensors:   %d activations, %d quantized at run time (dynamic), %d weights\n", q->activations,
               q->dynamic, q->weights);
    else
        printf("tensors:   %d activations, %d weights\n", q->activations, q->weights);
    print_weight_bytes(qz, q);
    printf("lowered:   %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
           q->kernels, q->lookups, q->int_ops, q->requants, q->islands);
    int64_t figure = 0, fp32 = 0; /* the calibrate figure's samples, the f32 pass's (0: every one) */
    qrl_quantized_calibrate_figure(qz, &figure, &fp32);
    char timed[80] = "";
    if (fp32 > 0 && fp32 < q->samples)
        snprintf(timed, sizeof timed, ", timed on %lld of them", (long long)fp32);
    if (q->dynamic && !q->activations) /* every activation quantized at run time: no calibration run */
        printf("calibration: nothing to calibrate (every activation is quantized at run time); one fp32 pass over "
               "the %lld samples in %.0f ms%s (their ranges, for the report; batch %d)\n",
               (long long)q->samples, q->fp32_ms, timed, batch);
    else if (q->fp32_ms > 0 || q->calib_ms <= 0)
        printf("calibration: %lld samples in %.0f ms (one fp32 pass: %.0f ms%s, ratio %.2f; batch %d)\n",
               (long long)q->samples, q->calib_ms, q->fp32_ms, timed, q->fp32_ms > 0 ? q->calib_ms / q->fp32_ms : 0.0,
               batch);
    else /* every layer fell back: nothing to measure on the calibration samples needs the pass */
        printf("calibration: %lld samples in %.0f ms (no fp32 pass: nothing quantized to measure it against; "
               "batch %d)\n", (long long)q->samples, q->calib_ms, batch);
    print_sqnr(qz, q);
    char judged[200] = ""; /* samples = F: each sample's SQNR reduced by F, not their sums pooled */
    if (samples_fn)
        snprintf(judged, sizeof judged, ", samples = %s of each sample's own (pooled over the samples: %.1f dB)",
                 samples_fn, energy);
    printf("output:    SQNR %.1f dB against f32 (the integer graph)%s%s; %.1f%% of %.3g MACs per sample in integers\n",
           q->output_sqnr, judged, q->output_nonfinite ? ", NOT FINITE" : "",
           q->macs > 0 ? 100.0 * q->macs_int / q->macs : 0.0, q->macs);
    if (worst_name && n_outputs > 1)
        printf("worst:     output '%s' %.1f dB on its own (%s); all %d together %.1f dB\n", worst_name, worst,
               q->output_sqnr == worst ? "what the fallback judged" : "the recipe's outputs = worst judges by it",
               n_outputs, pooled);
    printf("agreement: cosine %.5f to f32's outputs; %.1f%% of output rows have f32's argmax\n", q->output_cosine,
           100.0 * q->output_agreement);
    if (acc_layers > 0)
        print_accumulator(qz, acc_bits, acc_saturate, acc_sums, acc_overflows, acc_layers, acc_overflowing);
    print_mixed(qz);
    if (q->validate_samples > 0 && figure > 0 && figure < q->samples) /* the recipe's calibrate_figure_samples */
        printf("validate:  the SQNR above and the fallback's decisions on %lld held-out samples; %.1f dB on the first "
               "%lld of the %lld calibration samples\n", (long long)q->validate_samples, q->output_sqnr_calib,
               (long long)figure, (long long)q->samples);
    else if (q->validate_samples > 0)
        printf("validate:  the SQNR above and the fallback's decisions on %lld held-out samples; %.1f dB on the %lld "
               "calibration samples\n", (long long)q->validate_samples, q->output_sqnr_calib, (long long)q->samples);
    print_runs(qz, q->samples, q->validate_samples);
    print_steps(qz);
    if (a->labels)
        print_top1(qz, q);
    for (int i = 0; qrl_quantized_note(qz, i); i++)
        fprintf(stderr, "note: %s\n", qrl_quantized_note(qz, i));
    if (a->qparams)
        printf("qparams:   %s\n", a->qparams);
    if (a->report)
        printf("report:    %s\n", a->report);
}

/* The process's wall and CPU clocks, s. */
static void clocks(double *wall, double *cpu)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *wall = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    *cpu = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* --profile: the phases of the quantization, then loading and exporting (t: the clocks at the
 * start, after the quantization, after the export), and the fallback's measurements. */
static void print_profile(const qrl_quantized *qz, const double t[3][2])
{
    qrl_quant_phase p;
    double w = 0, c = 0;
    int64_t pass = 0, total = 0, phased = 0;
    qrl_quantized_runs(qz, &pass, &total);
    /* runs: node-runs x samples over one f32 pass's (the model's nodes x the calibration samples) */
    double unit = pass > 0 ? (double)pass : NAN; /* no calibration pass (weight-only): no unit */
    /* and in issue 24's units: f32 passes over the samples calibrated on, validation passes over
     * those judged on (qrl_quantized_runs_split) */
    int64_t cpass = 0, cal = 0, vpass = 0, val = 0, phased_val = 0;
    int ranked = 0;
    qrl_quantized_runs_split(qz, &cpass, &cal, &vpass, &val, &ranked);
    double cu = cpass > 0 ? (double)cpass : NAN, vu = vpass > 0 ? (double)vpass : NAN;
    printf("profile:   %-36s %9s %9s %9s %9s %9s %9s\n", "phase", "wall s", "CPU s", "peak MiB", "f32 passes",
           "calibrate", "validate");
    for (int i = 0; qrl_quantized_phase(qz, i, &p) == 0; i++) {
        int64_t peak = 0, runs = 0, rv = 0;
        qrl_quantized_phase_peak(qz, i, &peak);
        qrl_quantized_phase_runs(qz, i, &runs);
        qrl_quantized_phase_runs_validate(qz, i, &rv);
        printf("           %-36s %9.2f %9.2f %9.1f %9.2f %9.2f %9.2f\n", p.name, p.seconds, p.cpu_seconds,
               (double)peak / 1048576.0, (double)runs / unit, (double)(runs - rv) / cu, (double)rv / vu);
        w += p.seconds, c += p.cpu_seconds, phased += runs, phased_val += rv;
    }
    printf("           %-36s %9.2f %9.2f %9s %9.2f %9.2f %9.2f\n", "the rest of the quantization", t[1][0] - t[0][0] - w,
           t[1][1] - t[0][1] - c, "", (double)(total - phased) / unit,
           (double)(total - phased - (val - phased_val)) / cu, (double)(val - phased_val) / vu);
    printf("           %-36s %9.2f %9.2f\n", "the outputs written", t[2][0] - t[1][0], t[2][1] - t[1][1]);
    int64_t copied = 0;
    qrl_quantized_effects_copied(qz, &copied);
    if (copied > 0)
        printf("           the effects' cut runs held at most %lld bytes of f32 values copied\n", (long long)copied);
    int64_t es = 0, ss = 0;
    qrl_quantized_run_samples(qz, &es, &ss);
    if (es > 0 || ss > 0)
        printf("           a run took at most %lld samples in the effects, %lld in the measurement of what ships\n",
               (long long)es, (long long)ss);
    if (pass > 0) {
        printf("           %-36s %9s %9s %9s %9.2f %9.2f %9.2f (one: %lld node-runs x samples; %lld calibrate, %lld "
               "validate)",
               "runs of the whole quantize", "", "", "", (double)total / unit, (double)cal / cu, (double)val / vu,
               (long long)pass, (long long)cpass, (long long)vpass);
        if (ranked > 0)
            printf("; log2 of the %d tensors ranked: %.2f", ranked, log2((double)ranked));
        printf("\n");
    }
    qrl_search_try s;
    int64_t ran = 0;
    int i = 0;
    for (; qrl_quantized_search_try(qz, i, &s) == 0; i++) {
        int64_t tr = 0;
        int tw = 0, td = 0;
        qrl_quantized_search_try_ran(qz, i, &tr);
        qrl_quantized_search_try_widened(qz, i, &tw);
        qrl_quantized_search_try_dynamic(qz, i, &td);
        ran += tr;
        char w16[32] = ""; /* fallback = u16 then f32: the layers at 16 bits */
        if (tw)
            snprintf(w16, sizeof w16, ", %d at 16 bits", tw);
        printf("%s %3d %sin f32%s on %4lld samples (%4lld run): %-5s %.2f dB\n", i ? "          " : "tries:    ",
               s.fallen_back, td ? "run-time values " : "", w16, (long long)s.samples, (long long)tr,
               s.holds ? "holds" : "fails", s.output_sqnr);
    }
    if (i)
        printf("           %d measurements of the outputs, %lld sample runs\n", i, (long long)ran);
}

int cli_quantize(int argc, char **argv)
{
    quantize_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    qrl_model *m = NULL;
    char err[CLI_ERRLEN];
    qrl_recipe *r = NULL;
    qrl_quantized *q = NULL;
    /* one job of several ranks (mpirun): rank 0 writes the outputs and prints, the others calibrate */
    int root = qrl_dist_rank() == 0;
    if (root && check_outputs(&a, err) != 0)
        return cli_fail(err);
    if (qrl_model_load(a.model, 0, &m, err, sizeof err) != 0)
        return cli_fail(err);
    qrl_tensor lab = {0};
    if (a.labels && qrl_tensor_read_npy(a.labels, &lab, err, sizeof err) != 0) {
        qrl_model_free(m);
        return cli_fail(err);
    }
    qrl_quantize_opts qo = {.recipe_name = a.name, .batch = a.batch, .calib_count = a.count, .threads = a.threads,
                            .progress = !a.quiet && root, .labels = a.labels ? &lab : NULL};
    double t[3][2];
    clocks(&t[0][0], &t[0][1]);
    rc = cli_quantize_in_memory(a.model, m, a.recipe, a.no_cache, a.ncalib, a.calib, &qo,
                                a.matmulnbits ? QRL_QUANTIZE_MATMULNBITS : 0, &r, &q);
    clocks(&t[1][0], &t[1][1]);
    if (rc == 0 && root && write_outputs(&a, q, err) != 0)
        rc = cli_fail(err);
    clocks(&t[2][0], &t[2][1]);
    if (rc == 0 && root)
        print_summary(&a, q);
    if (rc == 0 && root && a.profile)
        print_profile(q, (const double(*)[2])t);
    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qrl_tensor_free(&lab);
    return rc;
}
