/* The opset upgrade (runtime/opset_upgrade.c, qr_pass_upgrade_opset).
 *
 *   conformance   every case of ONNX's own test data (libonnx-testdata, as
 *                 tests/conformance/test_onnx.c finds them) whose model opset
 *                 is below 13 runs as is and upgraded to 13; both must match
 *                 the expected outputs, and the upgraded models, exported,
 *                 must pass the ONNX checker (full_check) at opset 13.
 *   ops           each rewrite of the pass on a graph built here at the old
 *                 opset: the upgraded graph computes the same bits (the
 *                 kernels follow k->opset, so an op left in its old form
 *                 with opset 13 would compute something else), carries
 *                 opset 13 on every node, and its export passes the checker.
 * QRL_CONFORM_ONLY=slice,pad restricts the conformance run as in test_onnx. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graph.h"
#include "onnx_export.h"
#include "onnx_import.h"
#include "op.h"
#include "passes.h"
#include "testutil.h"

#ifndef ONNX_TESTDATA
#define ONNX_TESTDATA "/usr/share/libonnx-testdata/data"
#endif

/* ------------------------------------------------------------ shared */

/* Every live default-domain node says opset 13, and no op left is one opset 13 deprecates. */
static const char *not_upgraded(const qr_graph *g)
{
    static char msg[300];
    if (g->opset != 13)
        return "the graph's opset is not 13";
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        if (n->dead || n->domain[0])
            continue;
        if (n->opset != 13 || !strcmp(n->op, "Upsample") || !strcmp(n->op, "Scatter")) {
            snprintf(msg, sizeof msg, "node '%s' (%s) has opset %d", n->name, n->op, n->opset);
            return msg;
        }
    }
    return NULL;
}

/* Runs the ONNX checker (full_check) on every .onnx file of dir; returns the
 * number that fail (printing them) and sets *checked, or -1 if python fails. */
static int onnx_check_dir(const char *dir, int *checked)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, os, sys\n"
             "d = sys.argv[1]; bad = 0; n = 0\n"
             "for f in sorted(os.listdir(d)):\n"
             "    if not f.endswith('.onnx'): continue\n"
             "    n += 1; m = onnx.load(os.path.join(d, f))\n"
             "    v = [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')]\n"
             "    try:\n"
             "        assert v == [13], 'opset_import %%s' %% v\n"
             "        onnx.checker.check_model(m, full_check=True)\n"
             "    except Exception as e:\n"
             "        bad += 1; print('CHECKER', f, str(e).splitlines()[0][:300])\n"
             "print('checked', n, 'bad', bad)\" '%s'",
             dir);
    int rc = tu_run(cmd, &out);
    int n = -1, bad = -1;
    const char *p = out ? strstr(out, "checked ") : NULL;
    if (rc != 0 || !p || sscanf(p, "checked %d bad %d", &n, &bad) != 2) {
        printf("onnx checker did not run: %s\n", out ? out : "");
        free(out);
        return -1;
    }
    if (bad)
        printf("%s", out);
    *checked = n;
    free(out);
    return bad;
}

/* Returns NULL when equal within tol (relative, plus tol absolute), else the first mismatch. */
static const char *compare(const qr_tensor *got, const qr_tensor *want, double rtol, double atol)
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
            if ((isnan(x) && isnan(y)) || x == y)
                continue;
            if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
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

/* Runs g on in; outputs malloc'd into out (n_outputs of them). */
static qr_status run(const qr_graph *g, const qr_tensor *in, qr_tensor *out, qr_error *e)
{
    qr_exec *x;
    if (qr_exec_new(g, NULL, &x, e) != QR_OK)
        return QR_ERR;
    qr_status st = qr_exec_run(x, in, out, e);
    qr_exec_free(x);
    return st;
}

/* ------------------------------------------------------- conformance */

static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

/* test_onnx.c's decisions: cases QRL does not run at all */
static const char *const skipped[] = {"*FLOAT8*", "*float8*", "*BFLOAT16*", "*STRING*", "*_int4*", "*_uint4*",
                                      "*INT4*", "test_training_dropout*", "test_identity_opt",
                                      "test_identity_sequence", "test_batchnorm_*_training_mode"};

static int is_skipped(const char *name)
{
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (fnmatch(skipped[i], name, 0) == 0)
            return 1;
    return 0;
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

/* Runs every test_data_set of the case on g; 1 when all match (rtol 1e-3, atol 1e-5, as test_onnx). */
static int run_sets(const qr_graph *g, const char *casedir, char *why, size_t nwhy)
{
    int ok = 1, k = 0;
    for (;; k++) {
        char dir[1200], path[1300];
        snprintf(dir, sizeof dir, "%s/test_data_set_%d", casedir, k);
        DIR *sd = opendir(dir);
        if (!sd)
            break;
        closedir(sd);
        qr_tensor in[64] = {{0}}, want[16] = {{0}}, got[16] = {{0}};
        int nin = 0, nwant = 0;
        qr_error e = {{0}};
        for (; nin < 64; nin++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", dir, nin);
            if (!tu_file_exists(path) || qr_onnx_load_tensor(path, &in[nin], NULL, &e) != QR_OK)
                break;
        }
        for (; nwant < 16; nwant++) {
            snprintf(path, sizeof path, "%s/output_%d.pb", dir, nwant);
            if (!tu_file_exists(path) || qr_onnx_load_tensor(path, &want[nwant], NULL, &e) != QR_OK)
                break;
        }
        if (nin != g->n_inputs || nwant != g->n_outputs) {
            snprintf(why, nwhy, "data set has %d inputs/%d outputs, graph %d/%d", nin, nwant, g->n_inputs,
                     g->n_outputs);
            ok = 0;
        } else if (run(g, in, got, &e) != QR_OK) {
            snprintf(why, nwhy, "%s", e.msg);
            ok = 0;
        }
        for (int i = 0; i < nwant && ok; i++) {
            const char *m = compare(&got[i], &want[i], 1e-3, 1e-5);
            if (m) {
                snprintf(why, nwhy, "output %d: %s", i, m);
                ok = 0;
            }
        }
        for (int i = 0; i < 64; i++)
            qr_tensor_free(&in[i]);
        for (int i = 0; i < 16; i++) {
            qr_tensor_free(&want[i]);
            qr_tensor_free(&got[i]);
        }
        if (!ok)
            break;
    }
    if (k == 0) {
        snprintf(why, nwhy, "no test_data_set_0");
        ok = 0;
    }
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(opset, conformance_below_13_upgraded, .timeout = 900)
{
    int cases = 0, pass_asis = 0, pass_up = 0, by_opset[14] = {0};
    char *exdir = tu_tmpdir();
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
            char casedir[1024], model[1100], why_a[1200] = "", why_u[1200] = "";
            snprintf(casedir, sizeof casedir, "%s/%s", root, names[c]);
            snprintf(model, sizeof model, "%s/model.onnx", casedir);
            qr_graph *ga = NULL, *gu = NULL;
            qr_error e = {{0}};
            if (!selected(names[c]) || is_skipped(names[c]) || qr_onnx_load(model, &ga, &e) != QR_OK ||
                ga->opset >= 13) {
                qr_graph_free(ga); /* outside the table or the opsets QRL reads: test_onnx counts those */
                free(names[c]);
                continue;
            }
            cases++;
            by_opset[ga->opset]++;
            int ok_a = qr_graph_optimize(ga, &e) == QR_OK ? run_sets(ga, casedir, why_a, sizeof why_a) : 0;
            if (!ok_a && !why_a[0])
                snprintf(why_a, sizeof why_a, "%s", e.msg);
            int ok_u = 0;
            const char *bad;
            if (qr_onnx_load(model, &gu, &e) != QR_OK || qr_pass_upgrade_opset(gu, 13, &e) != QR_OK ||
                qr_graph_optimize(gu, &e) != QR_OK)
                snprintf(why_u, sizeof why_u, "%s", e.msg);
            else if ((bad = not_upgraded(gu)))
                snprintf(why_u, sizeof why_u, "%s", bad);
            else
                ok_u = run_sets(gu, casedir, why_u, sizeof why_u);
            if (ok_u) {
                char path[1400];
                snprintf(path, sizeof path, "%s/%s__%s.onnx", exdir, suites[s], names[c]);
                if (qr_onnx_save(gu, path, &e) != QR_OK) {
                    snprintf(why_u, sizeof why_u, "export: %s", e.msg);
                    ok_u = 0;
                }
            }
            pass_asis += ok_a;
            pass_up += ok_u;
            if (!ok_a || !ok_u)
                printf("FAIL %s/%s (opset %d):%s%s%s%s\n", suites[s], names[c], ga->opset, ok_a ? "" : " as is: ",
                       why_a, ok_u ? "" : " upgraded: ", why_u);
            qr_graph_free(ga);
            qr_graph_free(gu);
            free(names[c]);
        }
    }
    int checked = 0, bad = onnx_check_dir(exdir, &checked);
    printf("opset upgrade, conformance cases below opset 13: %d (", cases);
    for (int v = 1; v < 13; v++)
        if (by_opset[v])
            printf(" opset %d: %d", v, by_opset[v]);
    printf(" ); passed as is %d, passed upgraded to 13 %d; exports checked %d, rejected by the ONNX checker %d\n",
           pass_asis, pass_up, checked, bad);
    tu_rmdir(exdir);
    cr_expect_gt(cases, 200, "only %d cases below opset 13 were found", cases);
    cr_expect_eq(pass_asis, cases, "%d of %d cases fail as is", cases - pass_asis, cases);
    cr_expect_eq(pass_up, cases, "%d of %d cases fail upgraded", cases - pass_up, cases);
    cr_expect_eq(bad, 0, "%d upgraded exports fail the ONNX checker", bad);
    cr_expect_eq(checked, pass_up);
}

/* --------------------------------------------------------------- ops */

static uint64_t lcg = 88172645463325252ull;

static float rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(lcg >> 11) / (double)(1ull << 53) * 4.0 - 2.0);
}

static qr_value *cf(qr_graph *g, const char *name, int ndim, const int64_t *dims, const float *v)
{
    return tu_const_f32(g, name, ndim, dims, v);
}

static qr_value *ci(qr_graph *g, const char *name, int n, const int64_t *v)
{
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {n}, .data = (void *)v};
    qr_value *c = qr_graph_new_value(g, name);
    qr_value_set_const(g, c, &t);
    return c;
}

static void attr_s(qr_graph *g, qr_node *n, const char *name, const char *v)
{
    qr_node_add_attr_s(g, n, name, v);
}

static void attr_floats(qr_graph *g, qr_node *n, const char *name, int count, const float *v)
{
    qr_attr a = {.name = name, .kind = QR_ATTR_FLOATS, .n = count};
    a.floats = qr_arena_memdup(&g->arena, v, sizeof *v * (size_t)count);
    qr_attr *at = qr_arena_alloc(&g->arena, sizeof *at * (size_t)(n->n_attr + 1));
    memcpy(at, n->attr, sizeof *at * (size_t)n->n_attr);
    at[n->n_attr++] = a;
    n->attr = at;
}

/* One op at an old opset on a graph input x of the given shape; its outputs are the graph's. */
typedef struct opcase {
    qr_graph *g;
    qr_node *n;
    qr_value *x;
} opcase;

static opcase one(int opset, const char *op, int ndim, const int64_t *dims, int nin_extra, int nout)
{
    opcase c;
    c.g = qr_graph_new();
    c.g->opset = opset;
    c.g->name = "t";
    c.g->producer = "test_opset";
    c.x = tu_input(c.g, "x", ndim, dims);
    qr_value *in[8] = {c.x};
    c.n = tu_node(c.g, op, "op", 1 + nin_extra, in, nout);
    for (int j = 0; j < nout; j++)
        tu_output(c.g, c.n->out[j]);
    return c;
}

/* The case's graph as is and upgraded (a clone) on the same random input: the same outputs,
 * bit for bit unless rtol > 0. The upgraded graph, optimized, is written to dir/name.onnx. */
static void check_case(opcase c, const char *name, double rtol, const char *dir)
{
    qr_graph *g = c.g;
    qr_error e = {{0}};
    qr_tensor in = {.dtype = QR_F32};
    qr_tensor_set_shape(&in, c.x->t.ndim, c.x->t.dims);
    cr_assert_eq(qr_tensor_alloc(&in, &e), QR_OK);
    for (int64_t i = 0; i < qr_tensor_numel(&in); i++)
        ((float *)in.data)[i] = rnd();
    if (!strcmp(name, "clip6_defaults")) { /* the float limits clip infinities */
        ((float *)in.data)[0] = INFINITY;
        ((float *)in.data)[1] = -INFINITY;
    }
    qr_tensor want[4] = {{0}}, got[4] = {{0}};
    cr_assert_eq(run(g, &in, want, &e), QR_OK, "%s as is: %s", name, e.msg);
    qr_graph *u = qr_graph_clone(g);
    cr_assert_eq(qr_pass_upgrade_opset(u, 13, &e), QR_OK, "%s: %s", name, e.msg);
    const char *bad = not_upgraded(u);
    cr_assert_null(bad, "%s: %s", name, bad);
    cr_assert_eq(run(u, &in, got, &e), QR_OK, "%s upgraded: %s", name, e.msg);
    for (int j = 0; j < g->n_outputs; j++) {
        const char *m = compare(&got[j], &want[j], rtol, 0);
        cr_expect_null(m, "%s, output %d: %s", name, j, m);
    }
    cr_assert_eq(qr_graph_optimize(u, &e), QR_OK, "%s: %s", name, e.msg);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    cr_assert_eq(qr_onnx_save(u, path, &e), QR_OK, "%s: %s", name, e.msg);
    for (int j = 0; j < 4; j++) {
        qr_tensor_free(&want[j]);
        qr_tensor_free(&got[j]);
    }
    qr_tensor_free(&in);
    qr_graph_free(u);
    qr_graph_free(g);
}

static int count_op(const qr_graph *g, const char *op)
{
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        k += !g->nodes[i]->dead && !strcmp(g->nodes[i]->op, op);
    return k;
}

Test(opset, ops_keep_their_results)
{
    char *dir = tu_tmpdir();
    int n = 0;
    const int64_t d4[] = {2, 3, 4, 5}, d3[] = {2, 6, 5};
    opcase c;

    c = one(9, "Slice", 4, d4, 0, 1); /* attributes; a negative start and a huge end */
    tu_attr_ints(c.g, c.n, "starts", 3, (int64_t[]){1, -3, 0});
    tu_attr_ints(c.g, c.n, "ends", 3, (int64_t[]){INT64_MAX, -1, 2});
    tu_attr_ints(c.g, c.n, "axes", 3, (int64_t[]){1, 2, 3});
    check_case(c, "slice9", 0, dir), n++;
    c = one(9, "Slice", 4, d4, 0, 1); /* no axes: the first ones */
    tu_attr_ints(c.g, c.n, "starts", 2, (int64_t[]){1, 1});
    tu_attr_ints(c.g, c.n, "ends", 2, (int64_t[]){2, 3});
    check_case(c, "slice9_noaxes", 0, dir), n++;

    c = one(10, "Pad", 4, d4, 0, 1);
    attr_s(c.g, c.n, "mode", "constant");
    tu_attr_ints(c.g, c.n, "pads", 8, (int64_t[]){0, 1, 2, 0, 0, 0, 1, 3});
    tu_attr_float(c.g, c.n, "value", 0.7f);
    check_case(c, "pad10_constant", 0, dir), n++;
    c = one(10, "Pad", 4, d4, 0, 1);
    attr_s(c.g, c.n, "mode", "reflect");
    tu_attr_ints(c.g, c.n, "pads", 8, (int64_t[]){0, 0, 2, 1, 0, 0, 1, 3});
    check_case(c, "pad10_reflect", 0, dir), n++;
    c = one(2, "Pad", 4, d4, 0, 1); /* no value: 0 */
    tu_attr_ints(c.g, c.n, "pads", 8, (int64_t[]){0, 0, 1, 1, 0, 0, 1, 1});
    c.g->opset = 7;
    c.n->opset = 7;
    check_case(c, "pad7_zero", 0, dir), n++;

    c = one(6, "Clip", 4, d4, 0, 1);
    tu_attr_float(c.g, c.n, "min", -0.5f);
    tu_attr_float(c.g, c.n, "max", 1.25f);
    check_case(c, "clip6", 0, dir), n++;
    c = one(6, "Clip", 4, d4, 0, 1); /* defaults: +-FLT_MAX, so infinities are clipped */
    check_case(c, "clip6_defaults", 0, dir), n++;

    c = one(11, "Split", 3, d3, 0, 3);
    tu_attr_int(c.g, c.n, "axis", 1);
    tu_attr_ints(c.g, c.n, "split", 3, (int64_t[]){1, 3, 2});
    check_case(c, "split11", 0, dir), n++;
    c = one(11, "Split", 3, d3, 0, 2); /* equal parts, negative axis */
    tu_attr_int(c.g, c.n, "axis", -2);
    check_case(c, "split11_equal", 0, dir), n++;

    const int64_t dsq[] = {2, 1, 5, 1};
    c = one(11, "Squeeze", 4, dsq, 0, 1);
    tu_attr_ints(c.g, c.n, "axes", 2, (int64_t[]){1, -1});
    check_case(c, "squeeze11", 0, dir), n++;
    c = one(11, "Squeeze", 4, dsq, 0, 1); /* all size-1 dims */
    check_case(c, "squeeze11_all", 0, dir), n++;
    c = one(12, "Unsqueeze", 3, d3, 0, 1);
    tu_attr_ints(c.g, c.n, "axes", 2, (int64_t[]){0, 3});
    check_case(c, "unsqueeze12", 0, dir), n++;

    c = one(12, "ReduceSum", 4, d4, 0, 1);
    tu_attr_ints(c.g, c.n, "axes", 2, (int64_t[]){1, -1});
    tu_attr_int(c.g, c.n, "keepdims", 0);
    check_case(c, "reducesum12", 0, dir), n++;
    c = one(12, "ReduceSum", 4, d4, 0, 1); /* no axes: everything */
    check_case(c, "reducesum12_all", 0, dir), n++;

    c = one(9, "TopK", 4, d4, 0, 2);
    tu_attr_int(c.g, c.n, "k", 3);
    tu_attr_int(c.g, c.n, "axis", 2);
    check_case(c, "topk9", 0, dir), n++;

    /* the coercion: axis 1 of a rank-4 input normalizes over C*H*W */
    static const char *const coerced[] = {"Softmax", "LogSoftmax", "Hardmax"};
    for (int k = 0; k < 3; k++) {
        char nm[64];
        c = one(11, coerced[k], 4, d4, 0, 1);
        tu_attr_int(c.g, c.n, "axis", 1);
        snprintf(nm, sizeof nm, "%s11_axis1", coerced[k]);
        check_case(c, nm, 0, dir), n++;
        c = one(11, coerced[k], 4, d4, 0, 1); /* the default axis is 1 before 13 (-1 from 13) */
        snprintf(nm, sizeof nm, "%s11_default", coerced[k]);
        check_case(c, nm, 0, dir), n++;
        c = one(11, coerced[k], 4, d4, 0, 1);
        tu_attr_int(c.g, c.n, "axis", -1);
        snprintf(nm, sizeof nm, "%s11_last", coerced[k]);
        check_case(c, nm, 0, dir), n++;
    }
    c = one(11, "Softmax", 4, (int64_t[]){2, 6, 1, 1}, 0, 1); /* only size-1 dims after the axis: no reshape */
    check_case(c, "softmax11_tail1", 0, dir), n++;
    c = one(9, "Softmax", 3, d3, 0, 1);
    tu_attr_int(c.g, c.n, "axis", 0);
    check_case(c, "softmax9_axis0", 0, dir), n++;
    {
        /* a symbolic batch: the shape comes from a Shape node at run time */
        c = one(11, "Softmax", 4, d4, 0, 1);
        c.x->t.dims[0] = -1;
        c.x->dim_param[0] = "N";
        qr_tensor in = {.dtype = QR_F32};
        qr_tensor_set_shape(&in, 4, d4);
        qr_graph *u = qr_graph_clone(c.g);
        qr_error e = {{0}};
        cr_assert_eq(qr_pass_upgrade_opset(u, 13, &e), QR_OK, "%s", e.msg);
        cr_expect_eq(count_op(u, "Shape"), 1);
        cr_expect_eq(count_op(u, "Flatten"), 1);
        cr_expect_eq(count_op(u, "Reshape"), 1);
        qr_graph_free(u);
        c.x->t.dims[0] = 2;
        check_case(c, "softmax11_dynamic", 0, dir), n++;
    }

    /* Upsample and Resize-10: asymmetric; nearest floors up and ceils down */
    const int64_t dimg[] = {1, 2, 5, 7};
    c = one(9, "Upsample", 4, dimg, 1, 1);
    c.n->in[1] = cf(c.g, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 3});
    attr_s(c.g, c.n, "mode", "nearest");
    check_case(c, "upsample9_nearest", 0, dir), n++;
    c = one(7, "Upsample", 4, dimg, 0, 1);
    attr_floats(c.g, c.n, "scales", 4, (float[]){1, 1, 2.5f, 1.5f});
    attr_s(c.g, c.n, "mode", "linear");
    check_case(c, "upsample7_linear", 0, dir), n++;
    c = one(10, "Resize", 4, dimg, 1, 1);
    c.n->in[1] = cf(c.g, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 0.6f, 0.45f});
    check_case(c, "resize10_nearest_down", 0, dir), n++;
    c = one(10, "Resize", 4, dimg, 1, 1);
    c.n->in[1] = cf(c.g, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2.5f, 0.6f});
    check_case(c, "resize10_nearest_mixed", 0, dir), n++;
    c = one(10, "Resize", 4, dimg, 1, 1);
    c.n->in[1] = cf(c.g, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 1.7f, 0.6f});
    attr_s(c.g, c.n, "mode", "linear");
    check_case(c, "resize10_linear", 0, dir), n++;
    {
        /* mixed scales: two Resizes, one per direction */
        c = one(10, "Resize", 4, dimg, 1, 1);
        c.n->in[1] = cf(c.g, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2.5f, 0.6f});
        qr_graph *u = qr_graph_clone(c.g);
        qr_error e = {{0}};
        cr_assert_eq(qr_pass_upgrade_opset(u, 13, &e), QR_OK, "%s", e.msg);
        cr_expect_eq(count_op(u, "Resize"), 2);
        qr_graph_free(u);
        qr_graph_free(c.g);
        /* run-time scales cannot say which rounding: an error, not a guess */
        c = one(10, "Resize", 4, dimg, 1, 1);
        c.n->in[1] = tu_input(c.g, "scales", 1, (int64_t[]){4});
        u = qr_graph_clone(c.g);
        cr_expect_eq(qr_pass_upgrade_opset(u, 13, &e), QR_ERR);
        cr_expect(strstr(e.msg, "run time") != NULL, "%s", e.msg);
        qr_graph_free(u);
        qr_graph_free(c.g);
    }

    /* BatchNormalization before 9: spatial */
    const float sc[3] = {1.5f, 0.5f, -1}, bi[3] = {0.1f, -0.2f, 0.3f}, mu[3] = {0.2f, 0, -0.1f},
                va[3] = {1, 0.25f, 2};
    const int64_t d3c[] = {2, 3, 4};
    c = one(7, "BatchNormalization", 3, d3c, 4, 1);
    c.n->in[1] = cf(c.g, "s", 1, (int64_t[]){3}, sc);
    c.n->in[2] = cf(c.g, "b", 1, (int64_t[]){3}, bi);
    c.n->in[3] = cf(c.g, "m", 1, (int64_t[]){3}, mu);
    c.n->in[4] = cf(c.g, "v", 1, (int64_t[]){3}, va);
    tu_attr_int(c.g, c.n, "spatial", 1);
    tu_attr_float(c.g, c.n, "epsilon", 1e-3f);
    check_case(c, "batchnorm7", 0, dir), n++;
    {
        float p[4][12];
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 12; i++)
                p[k][i] = k == 3 ? 0.5f + (float)i / 8 : rnd();
        c = one(7, "BatchNormalization", 3, d3c, 4, 1);
        for (int k = 0; k < 4; k++)
            c.n->in[1 + k] = cf(c.g, (const char *[]){"s", "b", "m", "v"}[k], 2, (int64_t[]){3, 4}, p[k]);
        tu_attr_int(c.g, c.n, "spatial", 0);
        check_case(c, "batchnorm7_spatial0", 1e-6, dir), n++; /* Mul + Add in float: within rounding */
    }

    c = one(10, "Dropout", 4, d4, 0, 2); /* the mask stays an output */
    tu_attr_float(c.g, c.n, "ratio", 0.3f);
    check_case(c, "dropout10", 0, dir), n++;

    c = one(6, "PRelu", 4, d4, 1, 1); /* a 1-D slope of C applies per channel before 7 */
    c.n->in[1] = cf(c.g, "slope", 1, (int64_t[]){3}, (float[]){0.1f, -0.5f, 2});
    check_case(c, "prelu6_channels", 0, dir), n++;

    c = one(6, "Add", 4, d4, 1, 1); /* legacy broadcast of a trailing shape */
    {
        float b[20];
        for (int i = 0; i < 20; i++)
            b[i] = rnd();
        c.n->in[1] = cf(c.g, "b", 2, (int64_t[]){4, 5}, b);
    }
    tu_attr_int(c.g, c.n, "broadcast", 1);
    check_case(c, "add6_broadcast", 0, dir), n++;

    {
        float w[15], bias[5];
        for (int i = 0; i < 15; i++)
            w[i] = rnd();
        for (int i = 0; i < 5; i++)
            bias[i] = rnd();
        c = one(6, "Gemm", 2, (int64_t[]){4, 3}, 2, 1);
        c.n->in[1] = cf(c.g, "w", 2, (int64_t[]){3, 5}, w);
        c.n->in[2] = cf(c.g, "c", 1, (int64_t[]){5}, bias);
        tu_attr_int(c.g, c.n, "broadcast", 1);
        tu_attr_float(c.g, c.n, "alpha", 0.5f);
        check_case(c, "gemm6_broadcast", 0, dir), n++;
    }

    c = one(9, "Scatter", 2, (int64_t[]){3, 4}, 2, 1);
    c.n->in[1] = ci(c.g, "idx", 2, (int64_t[]){1, 2});
    c.n->in[1]->t.ndim = 2;
    c.n->in[1]->t.dims[0] = 1;
    c.n->in[1]->t.dims[1] = 2;
    c.n->in[2] = cf(c.g, "upd", 2, (int64_t[]){1, 2}, (float[]){9, 8});
    tu_attr_int(c.g, c.n, "axis", 1);
    check_case(c, "scatter9", 0, dir), n++;

    int checked = 0, bad = onnx_check_dir(dir, &checked);
    printf("opset upgrade, ops: %d cases keep their results; %d exports checked, %d rejected by the ONNX checker\n",
           n, checked, bad);
    cr_expect_eq(bad, 0, "%d upgraded exports fail the ONNX checker", bad);
    cr_expect_eq(checked, n);
    tu_rmdir(dir);
}

/* A graph already at 13 or above is left alone; opsets beyond 13 are not targets. */
Test(opset, only_older_nodes_change)
{
    const int64_t d4[] = {2, 3, 4, 5};
    opcase c = one(13, "Softmax", 4, d4, 0, 1);
    qr_error e = {{0}};
    cr_assert_eq(qr_pass_upgrade_opset(c.g, 13, &e), QR_OK);
    cr_expect_eq(c.g->n_nodes, 1);
    cr_expect_eq(c.n->n_attr, 0);
    cr_expect_eq(qr_pass_upgrade_opset(c.g, 14, &e), QR_ERR);
    qr_graph_free(c.g);
}
