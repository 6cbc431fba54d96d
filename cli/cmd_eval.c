#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "exec.h"
#include "tensor_io.h"

/* Top-1 accuracy of a one-input classifier over a data set, run in batches. */
int cli_eval(int argc, char **argv)
{
    const char *model = NULL, *data = NULL, *labels = NULL;
    int batch = 100, threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: qrl eval MODEL.onnx --data X.npy --labels Y.npy [--batch B] [--threads N]\n"
                   "X holds the samples along its first dimension; Y one integer class per sample.\n"
                   "Prints the top-1 accuracy of the model's first output.\n");
            return 0;
        }
        int has = i + 1 < argc;
        if (!strcmp(a, "--data") && has)
            data = argv[++i];
        else if (!strcmp(a, "--labels") && has)
            labels = argv[++i];
        else if (!strcmp(a, "--batch") && has) {
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
    if (!model || !data || !labels)
        return cli_usage_error("eval", "needs MODEL.onnx, --data X.npy and --labels Y.npy");

    qr_graph *g;
    qr_error e;
    if (cli_load_model(model, &g, &e) != QR_OK)
        return cli_fail(&e);
    int rc = 1;
    qr_tensor x = {0}, y = {0}, in = {0};
    qr_tensor *out = calloc((size_t)g->n_outputs, sizeof *out);
    qr_exec *ex = NULL;
    if (g->n_inputs != 1) {
        qr_errorf(&e, "%s: eval needs a model with one input, this one has %d", model, g->n_inputs);
        rc = cli_fail(&e);
        goto out;
    }
    if (qr_npy_read(data, &x, &e) != QR_OK || qr_npy_read(labels, &y, &e) != QR_OK) {
        rc = cli_fail(&e);
        goto out;
    }
    if (x.ndim < 1 || y.ndim != 1 || x.dims[0] != y.dims[0] || !qr_dtype_is_int(y.dtype)) {
        char a[160], b[160];
        qr_errorf(&e, "%s: data %s and labels %s do not match (need N samples and N integer labels)", labels,
                  qr_tensor_type_str(&x, a, sizeof a), qr_tensor_type_str(&y, b, sizeof b));
        rc = cli_fail(&e);
        goto out;
    }
    const qr_value *iv = g->inputs[0];
    if (iv->t.ndim >= 1 && iv->t.dims[0] > 0)
        batch = (int)iv->t.dims[0]; /* a fixed batch dimension decides */
    int64_t n = x.dims[0], correct = 0, per = qr_tensor_numel(&x) / (n ? n : 1);
    size_t esz = qr_dtype_size(x.dtype);
    qr_exec_opts opts = {.threads = threads};
    if (qr_exec_new(g, &opts, &ex, &e) != QR_OK) {
        rc = cli_fail(&e);
        goto out;
    }
    clock_t t0 = clock();
    for (int64_t s = 0; s < n; s += batch) {
        int64_t b = n - s < batch ? n - s : batch;
        in = x;
        in.dims[0] = b;
        in.data = (char *)x.data + (size_t)(s * per) * esz;
        if (qr_exec_run(ex, &in, out, &e) != QR_OK) {
            qr_error_prefix(&e, "%s: samples %lld..%lld", model, (long long)s, (long long)(s + b - 1));
            rc = cli_fail(&e);
            goto out;
        }
        const qr_tensor *o = &out[0];
        int64_t classes = o->ndim >= 1 && o->dims[0] == b ? qr_tensor_numel(o) / (b ? b : 1) : 0;
        if (!classes || !qr_dtype_is_float(o->dtype)) {
            char tb[160];
            qr_errorf(&e, "%s: first output %s is not a [batch, classes] float tensor", model,
                      qr_tensor_type_str(o, tb, sizeof tb));
            rc = cli_fail(&e);
            goto out;
        }
        for (int64_t i = 0; i < b; i++) {
            int64_t best = 0;
            for (int64_t c = 1; c < classes; c++)
                if (qr_get_f64(o->data, o->dtype, i * classes + c) > qr_get_f64(o->data, o->dtype, i * classes + best))
                    best = c;
            correct += best == qr_get_i64(y.data, y.dtype, s + i);
        }
        for (int j = 0; j < g->n_outputs; j++)
            qr_tensor_free(&out[j]);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("model:    %s\n", model);
    printf("samples:  %lld\n", (long long)n);
    printf("top-1:    %.2f%% (%lld/%lld)\n", n ? 100.0 * (double)correct / (double)n : 0.0, (long long)correct,
           (long long)n);
    printf("time:     %.2f s (%.3f ms/sample)\n", secs, n ? 1000.0 * secs / (double)n : 0.0);
    rc = 0;
out:
    qr_exec_free(ex);
    for (int j = 0; out && j < g->n_outputs; j++)
        qr_tensor_free(&out[j]);
    free(out);
    qr_tensor_free(&x);
    qr_tensor_free(&y);
    qr_graph_free(g);
    return rc;
}
