#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* Top-1 accuracy of m's first output over x (samples along dim 0) against labels y, timed. */
static int accuracy(qrl_model *m, const qrl_tensor *x, const qrl_tensor *y, int batch, int threads, int64_t *correct,
                    double *secs, char *err)
{
    if (!m || qrl_model_configure(m, threads, 0, err, CLI_ERRLEN) != 0)
        return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = qrl_model_eval_top1(m, x, y, batch, correct, err, CLI_ERRLEN);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return st;
}

typedef struct eval_args {
    const char *model, *labels, *recipe, *recipe_name;
    char *data[64], *calib[64];
    int ndata, ncalib, batch, threads, calib_count;
} eval_args;

/* Fills a from the command line: -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, eval_args *a)
{
    *a = (eval_args){.batch = 100, .threads = 1};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            printf("usage: qrl eval MODEL.onnx --data [NAME=]X.npy... --labels Y.npy [--batch B] [--threads N]\n"
                   "                [--recipe R.qrl [--recipe-name NAME] --calib [NAME=]C.npy... [--calib-count N]]\n"
                   "X holds the samples along its first dimension (one --data per model input, and\n"
                   "as many --calib: NAME=FILE binds by name); Y one integer class per sample.\n"
                   "Prints the top-1 accuracy of the model's first output; with --recipe and --calib\n"
                   "it also quantizes the model in memory and prints fp32 and int8 side by side;\n"
                   "--recipe-name NAME picks a recipe of the file (default: its first).\n");
            return 0;
        }
        int has = i + 1 < argc;
        if ((!strcmp(s, "--data") || !strcmp(s, "--calib")) && has) {
            int d = s[2] == 'd';
            if ((d ? a->ndata : a->ncalib) == 64)
                return cli_usage_error("eval", "too many %s files", s);
            if (d)
                a->data[a->ndata++] = argv[++i];
            else
                a->calib[a->ncalib++] = argv[++i];
        }
        else if (!strcmp(s, "--labels") && has)
            a->labels = argv[++i];
        else if (!strcmp(s, "--recipe") && has)
            a->recipe = argv[++i];
        else if (!strcmp(s, "--recipe-name") && has)
            a->recipe_name = argv[++i];
        else if (!strcmp(s, "--calib-count") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 30, &a->calib_count))
                return cli_usage_error("eval", "--calib-count needs a positive number");
        } else if (!strcmp(s, "--batch") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 20, &a->batch))
                return cli_usage_error("eval", "--batch needs a positive number");
        } else if (!strcmp(s, "--threads") && has) {
            if (!cli_parse_int(argv[++i], 1, 256, &a->threads))
                return cli_usage_error("eval", "--threads needs a number from 1 to 256");
        } else if (s[0] == '-' || a->model)
            return cli_usage_error("eval", "unexpected argument '%s'", s);
        else
            a->model = s;
    }
    if (!a->model || !a->ndata || !a->labels)
        return cli_usage_error("eval", "needs MODEL.onnx, --data X.npy and --labels Y.npy");
    if (!a->recipe != !a->ncalib)
        return cli_usage_error("eval", "--recipe and --calib go together");
    if (a->recipe_name && !a->recipe)
        return cli_usage_error("eval", "--recipe-name needs --recipe");
    return -1;
}

/* Reads the data (one tensor per input of m) and the labels: N samples each, N integer labels. */
static int read_data(const eval_args *a, const qrl_model *m, qrl_tensor *x, qrl_tensor *y, char *err)
{
    if (qrl_model_read_inputs(m, a->model, "--data", a->ndata, a->data, 1, x, err, CLI_ERRLEN) != 0 ||
        qrl_tensor_read_npy(a->labels, y, err, CLI_ERRLEN) != 0)
        return 1;
    for (int i = 0; i < qrl_model_num_inputs(m); i++)
        if (x[i].ndim < 1 || y->ndim != 1 || x[i].dims[0] != y->dims[0] || !qrl_dtype_is_int(y->dtype)) {
            char ta[160], tb[160];
            snprintf(err, CLI_ERRLEN, "%s: data %s and labels %s do not match (need N samples and N integer labels)",
                     a->labels, qrl_tensor_type_str(&x[i], ta, sizeof ta), qrl_tensor_type_str(y, tb, sizeof tb));
            return 1;
        }
    return 0;
}

/* The f32 model's results alone (a QDQ model: what its integer graph computed). */
static void print_model(const cli_runnable *run, int64_t n, int64_t correct, double secs)
{
    double acc = n ? 100.0 * (double)correct / (double)n : 0.0;
    printf("top-1:    %.2f%% (%lld/%lld)\n", acc, (long long)correct, (long long)n);
    if (run->q) { /* a QDQ model, lowered by stdlib/qdq.qrl */
        qrl_quant_summary s;
        qrl_quantized_summary(run->q, &s);
        printf("lowered:  %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
               s.kernels, s.lookups, s.int_ops, s.requants, s.islands);
    }
    printf("time:     %.2f s (%.3f ms/sample)\n", secs, n ? 1000.0 * secs / (double)n : 0.0);
}

/* fp32 and the recipe's integer graph side by side. */
static void print_side_by_side(const char *recipe, const char *name, const qrl_quantized *q, int64_t n, int64_t correct,
                               int64_t qcorrect, double secs, double qsecs)
{
    qrl_quant_summary s, *qz = &s;
    qrl_quantized_summary(q, &s);
    double acc = n ? 100.0 * (double)correct / (double)n : 0.0, qacc = n ? 100.0 * (double)qcorrect / (double)n : 0.0;
    char held[64] = "";
    if (qz->validate_samples > 0) /* the recipe's validate: those judged on */
        snprintf(held, sizeof held, ", %lld held out", (long long)qz->validate_samples);
    printf("recipe:   %s%s%s (%lld calibration samples%s)\n", recipe, name ? ", recipe " : "", name ? name : "",
           (long long)qz->samples, held);
    printf("          %10s %10s %10s\n", "fp32", "int8", "diff");
    printf("top-1:    %9.2f%% %9.2f%% %+9.2f\n", acc, qacc, qacc - acc);
    printf("time:     %9.2fs %9.2fs\n", secs, qsecs);
    printf("nodes:    %d by patterns, %d by affine rules, %d in f32; %d weight tensors quantized\n",
           qz->nodes_pattern, qz->nodes_affine, qz->nodes_float, qz->weights);
    printf("lowered:  %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
           qz->kernels, qz->lookups, qz->int_ops, qz->requants, qz->islands);
    if (qz->validate_samples > 0)
        printf("output:   SQNR %.1f dB against f32 on the %lld held-out samples (%.1f on the calibration ones); "
               "%.1f%% of MACs in integers",
               qz->output_sqnr, (long long)qz->validate_samples, qz->output_sqnr_calib,
               qz->macs > 0 ? 100.0 * qz->macs_int / qz->macs : 0.0);
    else
        printf("output:   SQNR %.1f dB against f32 on the calibration samples; %.1f%% of MACs in integers",
               qz->output_sqnr, qz->macs > 0 ? 100.0 * qz->macs_int / qz->macs : 0.0);
    const char *samples_fn;
    double energy;
    qrl_quantized_output_figures(q, NULL, NULL, NULL, NULL, &samples_fn, &energy);
    if (samples_fn) /* the recipe's samples = F judged, not the samples pooled */
        printf("; samples = %s of each sample's own (pooled over the samples: %.1f dB)", samples_fn, energy);
    printf("\n");
}

/* Top-1 accuracy of a one-input classifier over a data set, run in batches;
 * with a recipe, the model quantized in memory too, side by side. */
int cli_eval(int argc, char **argv)
{
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    cli_runnable run;
    char err[CLI_ERRLEN];
    if (cli_load_runnable(a.model, NULL, a.threads, &run, err) != 0)
        return cli_fail(err);
    qrl_model *m = run.m;
    int nin = qrl_model_num_inputs(m);
    rc = 1;
    qrl_tensor *x = calloc((size_t)nin + 1, sizeof *x);
    qrl_tensor y = {0};
    qrl_recipe *rcp = NULL;
    qrl_quantized *qz = NULL;
    if (!x) {
        rc = cli_fail("out of memory");
        goto out;
    }
    if (read_data(&a, m, x, &y, err) != 0) {
        rc = cli_fail(err);
        goto out;
    }
    if (nin < 1) {
        rc = cli_fail("the model has no input");
        goto out;
    }
    qrl_value_info iv;
    qrl_value_get(m, qrl_model_input(m, 0), &iv);
    int batch = iv.ndim >= 1 && iv.dims[0] > 0 ? (int)iv.dims[0] : a.batch; /* a fixed batch dimension decides */
    int64_t n = x[0].dims[0], correct = 0, qcorrect = 0;
    double secs = 0, qsecs = 0;
    if (accuracy(run.run, x, &y, batch, a.threads, &correct, &secs, err) != 0) {
        cli_error_prefix(err, "%s", a.model);
        rc = cli_fail(err);
        goto out;
    }
    if (a.recipe) {
        qrl_quantize_opts qo = {.recipe_name = a.recipe_name, .calib_count = a.calib_count, .threads = a.threads, .progress = 1}; /* quantize's batches */
        if ((rc = cli_quantize_in_memory(a.model, m, a.recipe, 0, a.ncalib, a.calib, &qo, 0, &rcp, &qz)) != 0)
            goto out;
        rc = 1;
        /* the integer graph: the recipe's kernels and tables on the integers */
        if (accuracy(qrl_quantized_model(qz, err, sizeof err), x, &y, batch, a.threads, &qcorrect, &qsecs, err) != 0) {
            cli_error_prefix(err, "%s", a.model);
            rc = cli_fail(err);
            goto out;
        }
    }
    printf("model:    %s\n", a.model);
    printf("samples:  %lld\n", (long long)n);
    if (!a.recipe)
        print_model(&run, n, correct, secs);
    else
        print_side_by_side(a.recipe, a.recipe_name, qz, n, correct, qcorrect, secs, qsecs);
    for (int i = 0; qz && qrl_quantized_note(qz, i); i++) /* as qrl quantize: validate_least's, the rules' */
        fprintf(stderr, "note: %s\n", qrl_quantized_note(qz, i));
    rc = 0;
out:
    qrl_quantized_free(qz);
    qrl_recipe_free(rcp);
    cli_tensors_free(x, nin);
    free(x);
    qrl_tensor_free(&y);
    cli_runnable_free(&run);
    return rc;
}
