/* Conformance: every case of Debian's libonnx-testdata whose ops are all in
 * QRL's op table runs through import, the graph passes and the executor, and
 * must match the expected outputs (rtol 1e-3, atol 1e-5 for floats; exact for
 * integers). Prints ran/passed per op. A case that fails is a failing test
 * unless it is named in `skipped` below with the reason.
 * QRL_CONFORM_ONLY=conv,relu restricts the run to case names containing those words.
 * QRL's own cases, in the same layout, are in tests/conformance/cases/ (made by
 * the tools/make_*_cases.py named in each case's model producer): built so that
 * the exact result is known, they must match bit for bit. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graph.h"
#include "onnx_import.h"
#include "op.h"
#include "passes.h"
#include "testutil.h"

#ifndef ONNX_TESTDATA
#define ONNX_TESTDATA "/usr/share/libonnx-testdata/data"
#endif

static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

/* Cases we decide not to support, as fnmatch patterns with the reason. */
static const struct { const char *pattern, *reason; } skipped[] = {
    {"*FLOAT8*", "float8 types are not in QRL's dtype table"},
    {"*float8*", "float8 types are not in QRL's dtype table"},
    {"*BFLOAT16*", "bfloat16 is not in QRL's dtype table"},
    {"*STRING*", "string tensors are not supported"},
    {"*_int4*", "int4 tensors arrive with the int4 work (later issue)"},
    {"*_uint4*", "int4 tensors arrive with the int4 work (later issue)"},
    {"*INT4*", "int4 tensors arrive with the int4 work (later issue)"},
    {"test_training_dropout", "Dropout training mode draws random masks: QRL is an inference runtime"},
    {"test_training_dropout_default*", "Dropout training mode draws random masks: QRL is an inference runtime"},
    {"test_training_dropout_mask", "Dropout training mode draws random masks: QRL is an inference runtime"},
    {"test_identity_opt", "optional and sequence values are not tensors; QRL graphs carry tensors only"},
    {"test_identity_sequence", "optional and sequence values are not tensors; QRL graphs carry tensors only"},
    {"test_batchnorm_*_training_mode", "BatchNormalization training mode: QRL is an inference runtime"},
};

static const char *skip_reason(const char *name)
{
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (fnmatch(skipped[i].pattern, name, 0) == 0)
            return skipped[i].reason;
    return NULL;
}

/* The ops QRL-A lists; each is printed with its counts even when no case ran. */
static const char *const listed_ops[] = {
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg",
    "Abs", "Erf", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Softmax",
    "Max", "Min", "ArgMax", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean", "ReduceSum", "ReduceMax",
    "Flatten", "Reshape", "Transpose", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Shape", "Gather",
    "Cast", "Pad", "Resize", "BatchNormalization", "LayerNormalization", "Where", "Equal", "Less", "Greater",
    "Expand", "ConstantOfShape", "Range", "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul",
    "ConvInteger", "MatMulInteger",
};

#define MAX_OPS 256
typedef struct op_count { const char *op; int ran, passed; } op_count;
static op_count counts[MAX_OPS];
static int ncounts;

static op_count *count_for(const char *op)
{
    for (int i = 0; i < ncounts; i++)
        if (strcmp(counts[i].op, op) == 0)
            return &counts[i];
    if (ncounts == MAX_OPS)
        return &counts[MAX_OPS - 1];
    counts[ncounts].op = strdup(op);
    return &counts[ncounts++];
}

static int selected(const char *name)
{
    const char *only = getenv("QRL_CONFORM_ONLY");
    if (!only || !*only)
        return 1;
    char *list = strdup(only), *save = NULL;
    int hit = 0;
    for (char *w = strtok_r(list, ",", &save); w && !hit; w = strtok_r(NULL, ",", &save))
        hit = strstr(name, w) != NULL;
    free(list);
    return hit;
}

/* Float tolerance: |got - want| <= atol + rtol * |want|. */
typedef struct tolerance { double atol, rtol; } tolerance;
static const tolerance onnx_tol = {1e-5, 1e-3}, exact_tol = {0, 0};

/* Returns NULL when equal, else a description of the first mismatch (static buffer). */
static const char *compare(const qr_tensor *got, const qr_tensor *want, tolerance tol)
{
    static char msg[512];
    char a[128], b[128];
    if (got->dtype != want->dtype || !qr_tensor_same_shape(got, want)) {
        snprintf(msg, sizeof msg, "got %s, expected %s", qr_tensor_type_str(got, a, sizeof a),
                 qr_tensor_type_str(want, b, sizeof b));
        return msg;
    }
    int64_t n = qr_tensor_numel(got);
    for (int64_t i = 0; i < n; i++) {
        if (qr_dtype_is_float(got->dtype)) {
            double x = qr_get_f64(got->data, got->dtype, i), y = qr_get_f64(want->data, want->dtype, i);
            if (isnan(x) && isnan(y))
                continue;
            if (isinf(y) && x == y)
                continue;
            if (!(fabs(x - y) <= tol.atol + tol.rtol * fabs(y))) {
                snprintf(msg, sizeof msg, "element %lld: got %.9g, expected %.9g", (long long)i, x, y);
                return msg;
            }
        } else if (qr_get_i64(got->data, got->dtype, i) != qr_get_i64(want->data, want->dtype, i)) {
            snprintf(msg, sizeof msg, "element %lld: got %lld, expected %lld", (long long)i,
                     (long long)qr_get_i64(got->data, got->dtype, i), (long long)qr_get_i64(want->data, want->dtype, i));
            return msg;
        }
    }
    return NULL;
}

static int file_exists(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* Runs one data set; returns 1 on pass, filling why on failure. */
static int run_set(qr_graph *g, const char *dir, tolerance tol, char *why, size_t nwhy)
{
    char path[1024];
    qr_error e = {{0}};
    qr_tensor in[64] = {{0}}, want[16] = {{0}}, got[16] = {{0}};
    int nin = 0, nwant = 0, ok = 0;
    for (; nin < 64; nin++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", dir, nin);
        if (!file_exists(path))
            break;
        if (qr_onnx_load_tensor(path, &in[nin], NULL, &e) != QR_OK) {
            snprintf(why, nwhy, "%s", e.msg);
            goto out;
        }
    }
    for (; nwant < 16; nwant++) {
        snprintf(path, sizeof path, "%s/output_%d.pb", dir, nwant);
        if (!file_exists(path))
            break;
        if (qr_onnx_load_tensor(path, &want[nwant], NULL, &e) != QR_OK) {
            snprintf(why, nwhy, "%s", e.msg);
            goto out;
        }
    }
    if (nin != g->n_inputs || nwant != g->n_outputs) {
        snprintf(why, nwhy, "data set has %d inputs/%d outputs, graph %d/%d", nin, nwant, g->n_inputs, g->n_outputs);
        goto out;
    }
    qr_exec *x;
    if (qr_exec_new(g, NULL, &x, &e) != QR_OK) {
        snprintf(why, nwhy, "%s", e.msg);
        goto out;
    }
    if (qr_exec_run(x, in, got, &e) != QR_OK) {
        snprintf(why, nwhy, "%s", e.msg);
        qr_exec_free(x);
        goto out;
    }
    qr_exec_free(x);
    ok = 1;
    for (int i = 0; i < nwant && ok; i++) {
        const char *m = compare(&got[i], &want[i], tol);
        if (m) {
            snprintf(why, nwhy, "output %d ('%s'): %s", i, g->outputs[i]->name, m);
            ok = 0;
        }
    }
out:
    for (int i = 0; i < 64; i++)
        qr_tensor_free(&in[i]);
    for (int i = 0; i < 16; i++) {
        qr_tensor_free(&want[i]);
        qr_tensor_free(&got[i]);
    }
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(conformance, onnx_testdata, .timeout = 600)
{
    int ran = 0, passed = 0, not_applicable = 0, old_opset = 0, skipped_n = 0, failed = 0;
    for (size_t i = 0; i < sizeof listed_ops / sizeof listed_ops[0]; i++)
        count_for(listed_ops[i]);
    int verbose = getenv("QRL_CONFORM_VERBOSE") != NULL || getenv("QRL_CONFORM_ONLY") != NULL;
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        char root[512];
        snprintf(root, sizeof root, "%s/%s", ONNX_TESTDATA, suites[s]);
        DIR *d = opendir(root);
        cr_assert(d, "cannot open %s (is libonnx-testdata installed?)", root);
        char *names[2048];
        int nn = 0;
        for (struct dirent *de; (de = readdir(d)) && nn < 2048;)
            if (de->d_name[0] != '.')
                names[nn++] = strdup(de->d_name);
        closedir(d);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int c = 0; c < nn; c++) {
            const char *name = names[c];
            if (!selected(name))
                goto next;
            char model[1024], why[1200] = "";
            snprintf(model, sizeof model, "%s/%s/model.onnx", root, name);
            qr_graph *g = NULL;
            qr_error e = {{0}};
            if (qr_onnx_load(model, &g, &e) != QR_OK) {
                /* Unknown ops are outside the runtime's op list: not applicable. */
                if (strstr(e.msg, "unknown op")) {
                    not_applicable++;
                    goto next;
                }
                if (strstr(e.msg, "opset_import")) { /* opsets below 7 are outside QRL's range */
                    old_opset++;
                    goto next;
                }
                snprintf(why, sizeof why, "%s", e.msg);
            } else if (qr_graph_optimize(g, &e) != QR_OK) {
                snprintf(why, sizeof why, "%s", e.msg);
            }
            const char *reason = skip_reason(name);
            if (reason) {
                skipped_n++;
                if (verbose)
                    printf("SKIP %s/%s: %s\n", suites[s], name, reason);
                qr_graph_free(g);
                goto next;
            }
            int ok = !why[0];
            for (int k = 0; ok; k++) {
                char set[1024];
                snprintf(set, sizeof set, "%s/%s/test_data_set_%d", root, name, k);
                DIR *sd = opendir(set);
                if (!sd) {
                    if (k == 0) {
                        ok = 0;
                        snprintf(why, sizeof why, "no test_data_set_0");
                    }
                    break;
                }
                closedir(sd);
                ok = run_set(g, set, onnx_tol, why, sizeof why);
            }
            ran++;
            passed += ok;
            failed += !ok;
            /* Attribute the case to each distinct op of the original model. */
            if (g) {
                const char *seen[64];
                int nseen = 0;
                qr_graph *orig = NULL;
                qr_error e2;
                if (qr_onnx_load(model, &orig, &e2) == QR_OK) {
                    for (int i = 0; i < orig->n_nodes && nseen < 64; i++) {
                        int dup = 0;
                        for (int j = 0; j < nseen; j++)
                            dup |= strcmp(seen[j], orig->nodes[i]->op) == 0;
                        if (dup)
                            continue;
                        seen[nseen++] = orig->nodes[i]->op;
                        op_count *oc = count_for(orig->nodes[i]->op);
                        oc->ran++;
                        oc->passed += ok;
                    }
                    qr_graph_free(orig);
                }
            } else {
                op_count *oc = count_for("(load failed)");
                oc->ran++;
            }
            if (!ok || verbose)
                printf("%s %s/%s%s%s\n", ok ? "PASS" : "FAIL", suites[s], name, ok ? "" : ": ", ok ? "" : why);
            qr_graph_free(g);
        next:
            free(names[c]);
        }
    }
    printf("\nconformance per op (cases ran / passed):\n");
    for (int i = 0; i < ncounts; i++)
        printf("  %-24s %4d / %4d%s\n", counts[i].op, counts[i].ran, counts[i].passed,
               counts[i].ran != counts[i].passed ? "  <-- failures" : "");
    printf("conformance: %d cases ran, %d passed, %d failed, %d skipped by list, %d use ops outside the table, "
           "%d use opsets outside %d..%d\n",
           ran, passed, failed, skipped_n, not_applicable, old_opset, QR_OPSET_MIN, QR_OPSET_MAX);
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        printf("  skip list: %-12s %s\n", skipped[i].pattern, skipped[i].reason);
    for (int i = 0; i < ncounts; i++)
        free((void *)counts[i].op);
    cr_assert_eq(failed, 0, "%d conformance cases failed", failed);
}

/* Every listed op has a kernel: otherwise its cases would silently count as outside the table. */
Test(conformance, listed_ops_are_registered)
{
    for (size_t i = 0; i < sizeof listed_ops / sizeof listed_ops[0]; i++)
        cr_expect_not_null(qr_op_find("", listed_ops[i]), "op %s is not registered", listed_ops[i]);
}

/* QRL's own cases (tests/conformance/cases/NAME/model.onnx, test_data_set_0):
 * configurations from real models where QRL once differed from the exact
 * result, with data chosen so the expected output is exact. */
Test(conformance, qrl_cases_are_exact)
{
    char root[1024];
    snprintf(root, sizeof root, "%s/tests/conformance/cases", tu_root());
    DIR *d = opendir(root);
    cr_assert(d, "cannot open %s", root);
    int ran = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char model[2048], set[2048], why[1200] = "";
        snprintf(model, sizeof model, "%s/%s/model.onnx", root, de->d_name);
        snprintf(set, sizeof set, "%s/%s/test_data_set_0", root, de->d_name);
        qr_graph *g = NULL;
        qr_error e = {{0}};
        cr_assert_eq(qr_onnx_load(model, &g, &e), QR_OK, "%s: %s", de->d_name, e.msg);
        cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s: %s", de->d_name, e.msg);
        cr_expect(run_set(g, set, exact_tol, why, sizeof why), "%s: %s", de->d_name, why);
        qr_graph_free(g);
        ran++;
    }
    closedir(d);
    cr_assert_gt(ran, 0, "no cases in %s", root);
}
