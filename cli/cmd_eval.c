#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "exec.h"
#include "intgraph.h"
#include "passes.h"
#include "quantize.h"
#include "tensor_io.h"

/* Top-1 accuracy of g's first output over x (samples along dim 0) against labels y. */
static qr_status accuracy(const qr_graph *g, void *kernel_user, const qr_tensor *x, const qr_tensor *y, int batch,
                          int threads, int64_t *correct, double *secs, qr_error *e)
{
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out), *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    qr_exec *ex = NULL;
    qr_exec_opts opts = {.threads = threads, .kernel_user = kernel_user};
    if (!out || !in) {
        free(out);
        free(in);
        return qr_errorf(e, "out of memory");
    }
    if (qr_exec_new(g, &opts, &ex, e) != QR_OK) {
        free(out);
        free(in);
        return QR_ERR;
    }
    int64_t n = x[0].dims[0];
    qr_status st = QR_OK;
    *correct = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t s = 0; s < n && st == QR_OK; s += batch) {
        int64_t b = n - s < batch ? n - s : batch;
        for (int i = 0; i < g->n_inputs; i++) { /* samples s .. s + b of every input */
            size_t row = qr_tensor_nbytes(&x[i]) / (size_t)(n ? n : 1);
            in[i] = x[i];
            in[i].dims[0] = b;
            in[i].data = (char *)x[i].data + (size_t)s * row;
        }
        if (qr_exec_run(ex, in, out, e) != QR_OK) {
            qr_error_prefix(e, "samples %lld..%lld", (long long)s, (long long)(s + b - 1));
            st = QR_ERR;
            break;
        }
        const qr_tensor *o = &out[0];
        int64_t classes = o->ndim >= 1 && o->dims[0] == b ? qr_tensor_numel(o) / (b ? b : 1) : 0;
        if (!classes || !qr_dtype_is_float(o->dtype)) {
            char tb[160];
            st = qr_errorf(e, "the first output %s is not a [batch, classes] float tensor",
                           qr_tensor_type_str(o, tb, sizeof tb));
        }
        for (int64_t i = 0; st == QR_OK && i < b; i++) {
            int64_t best = 0;
            for (int64_t c = 1; c < classes; c++)
                if (qr_get_f64(o->data, o->dtype, i * classes + c) > qr_get_f64(o->data, o->dtype, i * classes + best))
                    best = c;
            *correct += best == qr_get_i64(y->data, y->dtype, s + i);
        }
        for (int j = 0; j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    qr_exec_free(ex);
    free(out);
    free(in);
    return st;
}

/* Top-1 accuracy of a one-input classifier over a data set, run in batches;
 * with a recipe, the model quantized in memory too, side by side. */
int cli_eval(int argc, char **argv)
{
    const char *model = NULL, *labels = NULL, *recipe = NULL;
    char *data[64], *calib[64];
    int ndata = 0, ncalib = 0;
    int batch = 100, threads = 1, calib_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: qrl eval MODEL.onnx --data [NAME=]X.npy... --labels Y.npy [--batch B] [--threads N]\n"
                   "                [--recipe R.qrl --calib [NAME=]C.npy... [--calib-count N]]\n"
                   "X holds the samples along its first dimension (one --data per model input, and\n"
                   "as many --calib: NAME=FILE binds by name); Y one integer class per sample.\n"
                   "Prints the top-1 accuracy of the model's first output; with --recipe and --calib\n"
                   "it also quantizes the model in memory and prints fp32 and int8 side by side.\n");
            return 0;
        }
        int has = i + 1 < argc;
        if ((!strcmp(a, "--data") || !strcmp(a, "--calib")) && has) {
            int d = a[2] == 'd';
            if ((d ? ndata : ncalib) == 64)
                return cli_usage_error("eval", "too many %s files", a);
            if (d)
                data[ndata++] = argv[++i];
            else
                calib[ncalib++] = argv[++i];
        }
        else if (!strcmp(a, "--labels") && has)
            labels = argv[++i];
        else if (!strcmp(a, "--recipe") && has)
            recipe = argv[++i];
        else if (!strcmp(a, "--calib-count") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 30, &calib_count))
                return cli_usage_error("eval", "--calib-count needs a positive number");
        } else if (!strcmp(a, "--batch") && has) {
            if (!cli_parse_int(argv[++i], 1, 1 << 20, &batch))
                return cli_usage_error("eval", "--batch needs a positive number");
        } else if (!strcmp(a, "--threads") && has) {
            if (!cli_parse_int(argv[++i], 1, 256, &threads))
                return cli_usage_error("eval", "--threads needs a number from 1 to 256");
        } else if (a[0] == '-' || model)
            return cli_usage_error("eval", "unexpected argument '%s'", a);
        else
            model = a;
    }
    if (!model || !ndata || !labels)
        return cli_usage_error("eval", "needs MODEL.onnx, --data X.npy and --labels Y.npy");
    if (!recipe != !ncalib)
        return cli_usage_error("eval", "--recipe and --calib go together");

    cli_runnable run;
    qr_error e;
    if (cli_load_runnable(model, NULL, &run, &e) != QR_OK)
        return cli_fail(&e);
    qr_graph *g = run.g;
    int rc = 1;
    qr_tensor *x = calloc((size_t)g->n_inputs + 1, sizeof *x);
    qr_tensor y = {0};
    qrl_module *mod = NULL;
    qr_quantized *qz = NULL;
    if (!x) {
        qr_errorf(&e, "out of memory");
        rc = cli_fail(&e);
        goto out;
    }
    if (cli_bind_inputs(model, g, "--data", ndata, data, 1, x, &e) != QR_OK || qr_npy_read(labels, &y, &e) != QR_OK) {
        rc = cli_fail(&e);
        goto out;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (x[i].ndim < 1 || y.ndim != 1 || x[i].dims[0] != y.dims[0] || !qr_dtype_is_int(y.dtype)) {
            char a[160], b[160];
            qr_errorf(&e, "%s: data %s and labels %s do not match (need N samples and N integer labels)", labels,
                      qr_tensor_type_str(&x[i], a, sizeof a), qr_tensor_type_str(&y, b, sizeof b));
            rc = cli_fail(&e);
            goto out;
        }
    const qr_value *iv = g->inputs[0];
    if (iv->t.ndim >= 1 && iv->t.dims[0] > 0)
        batch = (int)iv->t.dims[0]; /* a fixed batch dimension decides */
    int64_t n = x[0].dims[0], correct = 0, qcorrect = 0;
    double secs = 0, qsecs = 0;
    if (accuracy(run.run, run.kernel_user, x, &y, batch, threads, &correct, &secs, &e) != QR_OK) {
        qr_error_prefix(&e, "%s", model);
        rc = cli_fail(&e);
        goto out;
    }
    if (recipe) {
        qr_quant_opts qo = {.calib_count = calib_count, .threads = threads, .progress = 1}; /* quantize's batches */
        if ((rc = cli_quantize_in_memory(model, g, recipe, 0, ncalib, calib, &qo, &mod, &qz)) != 0)
            goto out;
        rc = 1;
        /* the integer graph: the recipe's kernels and tables on the integers */
        if (accuracy(qz->ig->g, qz->ig, x, &y, batch, threads, &qcorrect, &qsecs, &e) != QR_OK) {
            qr_error_prefix(&e, "%s", model);
            rc = cli_fail(&e);
            goto out;
        }
    }
    double acc = n ? 100.0 * (double)correct / (double)n : 0.0, qacc = n ? 100.0 * (double)qcorrect / (double)n : 0.0;
    printf("model:    %s\n", model);
    printf("samples:  %lld\n", (long long)n);
    if (!recipe) {
        printf("top-1:    %.2f%% (%lld/%lld)\n", acc, (long long)correct, (long long)n);
        if (run.q) /* a QDQ model, lowered by stdlib/qdq.qrl */
            printf("lowered:  %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
                   run.q->ig->kernels, run.q->ig->lookups, run.q->ig->int_ops, run.q->ig->requants,
                   run.q->ig->islands);
        printf("time:     %.2f s (%.3f ms/sample)\n", secs, n ? 1000.0 * secs / (double)n : 0.0);
    } else {
        printf("recipe:   %s (%lld calibration samples)\n", recipe, (long long)qz->samples);
        printf("          %10s %10s %10s\n", "fp32", "int8", "diff");
        printf("top-1:    %9.2f%% %9.2f%% %+9.2f\n", acc, qacc, qacc - acc);
        printf("time:     %9.2fs %9.2fs\n", secs, qsecs);
        printf("nodes:    %d by patterns, %d by affine rules, %d in f32; %d weight tensors quantized\n",
               qz->nodes_pattern, qz->nodes_affine, qz->nodes_float, qz->weights);
        printf("lowered:  %d kernel calls, %d lookup tables, %d integer ops, %d requantizations, %d f32 islands\n",
               qz->ig->kernels, qz->ig->lookups, qz->ig->int_ops, qz->ig->requants, qz->ig->islands);
        printf("output:   SQNR %.1f dB against f32 on the calibration samples; %.1f%% of MACs in integers\n",
               qz->output_sqnr, qz->macs > 0 ? 100.0 * qz->macs_int / qz->macs : 0.0);
    }
    rc = 0;
out:
    qr_quantized_free(qz);
    qr_module_free(mod);
    for (int i = 0; x && i < g->n_inputs; i++)
        qr_tensor_free(&x[i]);
    free(x);
    qr_tensor_free(&y);
    cli_runnable_free(&run);
    return rc;
}
