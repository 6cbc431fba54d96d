/* The recipe and quantization calls of include/qrl.h, used as a backend uses
 * them (nothing but the public header, and .npy loading for the data): the
 * bundled Fashion-MNIST CNN, whose fp32 top-1 on the 10000 test images is
 * 92.20% in PyTorch (examples/fmnist/README.md), compiled recipes, an integer
 * model within half a point of it, and its qparams, the same in memory as in
 * the JSON file. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qrl.h"
#include "tensor_io.h"
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

/* A .npy file of the data set (QRL_DATA, else build/data) as a public tensor; *keep owns its data. */
static qrl_tensor npy(const char *name, qr_tensor *keep)
{
    const char *d = getenv("QRL_DATA");
    char path[1024];
    qr_error e;
    snprintf(path, sizeof path, "%s/%s", d && *d ? d : "build/data", name);
    cr_assert_eq(qr_npy_read(path, keep, &e), QR_OK, "%s", e.msg);
    qrl_tensor t = {.dtype = keep->dtype == QR_F32 ? 1 : 7, .ndim = keep->ndim, .data = keep->data};
    cr_assert(keep->dtype == QR_F32 || keep->dtype == QR_I64, "%s", name);
    for (int i = 0; i < keep->ndim; i++)
        t.dims[i] = keep->dims[i];
    return t;
}

Test(api, quantized_model_is_within_half_a_point_of_fp32)
{
    char err[1024] = "";
    qrl_model *m;
    cr_assert_eq(qrl_model_load("examples/fmnist/fmnist_cnn.onnx", 1, &m, err, sizeof err), 0, "%s", err);
    qr_tensor kx = {0}, ky = {0}, kc = {0};
    qrl_tensor x = npy("test_images.npy", &kx), y = npy("test_labels.npy", &ky), c = npy("calib_images.npy", &kc);
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
        char iname[300]; /* the integer graph's name of a quantized value */
        snprintf(iname, sizeof iname, "%s_quantized", name);
        if (qrl_value_get(qm, iname, &vi) != 0 || !vi.has_quant)
            continue;
        cr_assert_eq(vi.quant.count, 1, "%s", name);
        cr_assert_float_eq(vi.quant.scale[0], scale, 1e-6 * scale, "%s: %g in the model, %g in the JSON", name,
                           vi.quant.scale[0], scale);
        cr_assert_eq(vi.quant.zero_point[0], zero, "%s", name);
        checked++;
    }
    free(log);
    cr_assert_geq(checked, 6, "values of the JSON found in the integer model: %d", checked);
    /* The export loads, and runs as the integer model does (its QDQ groups lowered by the stdlib). */
    qrl_model *e;
    cr_assert_eq(qrl_model_load(onnx, 1, &e, err, sizeof err), 0, "%s", err);
    qrl_model_free(e);

    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    qr_tensor_free(&kx);
    qr_tensor_free(&ky);
    qr_tensor_free(&kc);
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
