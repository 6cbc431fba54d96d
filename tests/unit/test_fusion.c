/* A Conv's fused activation (qr_kctx.act: the Relu or Clip the executor folds into it) through
 * every path of the f32 Conv: 1x1 read in place, 3x3 over padded planes at strides 1 and 2, the
 * im2col GEMM (stride 3), small images folded into one GEMM, groups, depthwise (AVX-512 window
 * kernel, portable runs, plane by plane), the portable GEMM (sgemm=portable), f64: each equals
 * the Conv without it, then Relu or Clip, bit for bit, NaN kept. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "parallel.h"
#include "testutil.h"

static qr_tensor run_conv(qr_attr *attrs, int nattr, const qr_tensor **in, const qr_act *act, qr_pool *pool)
{
    cr_assert(qr_op_find("", "Conv")->act, "Conv applies a fused activation");
    return tu_op_run("", "Conv", 17, attrs, nattr, in, 3, pool, act);
}

typedef struct conv_case {
    int64_t n, c, m, h, w, k, stride, pad, group;
} conv_case;

static const qr_act acts[] = {{1, 0, 0}, {0, 0.0f, 6.0f}, {0, -0.5f, 0.3f}};

static void check_case(conv_case cc, qr_dtype dt, qr_pool *pool, const char *what)
{
    int64_t nx = cc.n * cc.c * cc.h * cc.w, nw = cc.m * (cc.c / cc.group) * cc.k * cc.k;
    size_t es = dt == QR_F64 ? sizeof(double) : sizeof(float);
    void *x = malloc(es * (size_t)nx), *w = malloc(es * (size_t)nw), *b = malloc(es * (size_t)cc.m);
    cr_assert(x && w && b);
    unsigned seed = 3;
    for (int64_t i = 0; i < nx + nw + cc.m; i++) {
        double v = (double)((int)(tu_lcg(&seed) % 2001) - 1000) / 400.0;
        void *dst = i < nx ? x : i < nx + nw ? w : b;
        int64_t j = i < nx ? i : i < nx + nw ? i - nx : i - nx - nw;
        if (dt == QR_F64)
            ((double *)dst)[j] = v;
        else
            ((float *)dst)[j] = (float)v;
    }
    if (dt == QR_F64) /* one NaN input: its outputs stay NaN */
        ((double *)x)[nx / 2] = NAN;
    else
        ((float *)x)[nx / 2] = NAN;
    int64_t ks[2] = {cc.k, cc.k}, st[2] = {cc.stride, cc.stride}, pads[4] = {cc.pad, cc.pad, cc.pad, cc.pad};
    qr_attr a[4] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                    {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                    {.name = "group", .kind = QR_ATTR_INT, .i = cc.group}};
    qr_tensor tx = {.dtype = dt, .ndim = 4, .dims = {cc.n, cc.c, cc.h, cc.w}, .data = x};
    qr_tensor tw = {.dtype = dt, .ndim = 4, .dims = {cc.m, cc.c / cc.group, cc.k, cc.k}, .data = w};
    qr_tensor tb = {.dtype = dt, .ndim = 1, .dims = {cc.m}, .data = b};
    const qr_tensor *in[3] = {&tx, &tw, &tb};
    qr_tensor plain = run_conv(a, 4, in, NULL, pool);
    int64_t ny = qr_tensor_numel(&plain), nan = 0;
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++) {
        qr_tensor fused = run_conv(a, 4, in, &acts[t], pool);
        int64_t changed = 0;
        for (int64_t i = 0; i < ny; i++) {
            if (dt == QR_F64) {
                double v = ((double *)plain.data)[i], got = ((double *)fused.data)[i];
                double want = acts[t].relu ? (v <= 0 ? 0 : v) : v < acts[t].lo ? acts[t].lo : v > acts[t].hi ? acts[t].hi : v;
                changed += want != v;
                nan += isnan(got);
                cr_assert(memcmp(&got, &want, sizeof want) == 0, "%s f64 act %zu element %lld: %g vs %g", what, t,
                          (long long)i, got, want);
            } else {
                float v = ((float *)plain.data)[i], got = ((float *)fused.data)[i];
                float want = qr_act_apply(&acts[t], v);
                changed += want != v;
                nan += isnan(got);
                cr_assert(memcmp(&got, &want, sizeof want) == 0, "%s act %zu element %lld: %g vs %g", what, t,
                          (long long)i, got, want);
            }
        }
        cr_assert(changed > 0, "%s: act %zu changed nothing", what, t);
        qr_tensor_free(&fused);
    }
    cr_assert(nan > 0, "%s: the NaN reached an output", what);
    qr_tensor_free(&plain);
    free(x);
    free(w);
    free(b);
}

static const struct {
    conv_case cc;
    const char *what;
} cases[] = {
    {{2, 8, 12, 9, 11, 1, 1, 0, 1}, "1x1 in place"},
    {{1, 6, 20, 13, 17, 3, 1, 1, 1}, "3x3/1 over padded planes"},
    {{2, 5, 14, 15, 12, 3, 2, 1, 1}, "3x3/2 over phases"},
    {{1, 4, 9, 14, 13, 3, 3, 1, 1}, "3x3/3 through im2col"},
    {{7, 6, 10, 4, 5, 1, 1, 0, 1}, "small images folded into one GEMM"},
    {{7, 3, 5, 6, 5, 3, 3, 1, 1}, "small images, im2col folded"},
    {{2, 8, 6, 10, 9, 3, 1, 1, 2}, "groups"},
    {{2, 6, 6, 21, 37, 3, 1, 1, 6}, "depthwise 3x3/1"},
    {{2, 6, 6, 22, 36, 3, 2, 1, 6}, "depthwise 3x3/2"},
    {{1, 4, 4, 12, 13, 3, 3, 1, 4}, "depthwise 3x3/3 plane by plane"},
};

Test(fusion, conv_activation_is_conv_then_relu_or_clip)
{
    qr_pool *pool = qr_pool_new(2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(cases[i].cc, QR_F32, NULL, cases[i].what);
        check_case(cases[i].cc, QR_F32, pool, cases[i].what);
        check_case(cases[i].cc, QR_F64, NULL, cases[i].what);
    }
    tu_option("sgemm", "portable");
    tu_option("window", "portable");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i].cc, QR_F32, NULL, cases[i].what);
    tu_option("sgemm", "");
    tu_option("window", "");
    qr_pool_free(pool);
}

/* ---- the executor's fusion (exec.c fuse_acts) ---- */

#include "exec.h"
#include "passes.h"

static qr_value *conv3x3(qr_graph *g, const char *name, qr_value *x, int64_t c, int64_t m, int64_t stride, unsigned seed)
{
    float *w = malloc(sizeof(float) * (size_t)(m * c * 9)), b[16];
    cr_assert(w && m <= 16);
    for (int64_t i = 0; i < m * c * 9; i++)
        w[i] = (float)((int)(tu_lcg(&seed) % 201) - 100) / 150.0f;
    for (int64_t i = 0; i < m; i++)
        b[i] = (float)((int)(tu_lcg(&seed) % 21) - 10) / 20.0f;
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s_w", name);
    snprintf(bn, sizeof bn, "%s_b", name);
    const int64_t wd[4] = {m, c, 3, 3}, bd[1] = {m};
    qr_value *in[3] = {x, tu_const_f32(g, wn, 4, wd, w), tu_const_f32(g, bn, 1, bd, b)};
    qr_node *n = tu_node(g, "Conv", name, 3, in, 1);
    const int64_t ks[2] = {3, 3}, st[2] = {stride, stride}, pads[4] = {1, 1, 1, 1};
    tu_attr_ints(g, n, "kernel_shape", 2, ks);
    tu_attr_ints(g, n, "strides", 2, st);
    tu_attr_ints(g, n, "pads", 4, pads);
    free(w);
    return n->out[0];
}

static qr_value *clip(qr_graph *g, const char *name, qr_value *x, qr_value *lo, float hi)
{
    char hn[64];
    snprintf(hn, sizeof hn, "%s_max", name);
    qr_value *in[3] = {x, lo, tu_const_f32(g, hn, 0, NULL, &hi)};
    return tu_node(g, "Clip", name, 3, in, 1)->out[0];
}

/* x -> conv1 -> Relu "r1" -> conv2 (stride 2) -> Clip "k2" (constant bounds) -> y1: both fused.
 * r1 -> conv3 -> Relu "r3", conv3's output also read by a Neg (before it): not fused.
 * r1 -> conv4 (a graph output) -> Relu "r4": not fused.
 * r1 -> conv5 -> Clip "k5" whose min is computed (ReduceMin of x): not fused. */
static qr_graph *fusion_graph(int dynamic)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[4] = {2, 3, 12, 13};
    qr_value *x = tu_input(g, "x", 4, d);
    qr_value *r1 = tu_node(g, "Relu", "r1", 1, (qr_value *[]){conv3x3(g, "conv1", x, 3, 8, 1, 1)}, 1)->out[0];
    float lo = -0.2f;
    qr_value *c2 = conv3x3(g, "conv2", r1, 8, 6, 2, 2); /* its Clip is the last node: values come and go between */
    qr_value *c3 = conv3x3(g, "conv3", r1, 8, 5, 1, 3);
    qr_value *n3 = tu_node(g, "Neg", "n3", 1, &c3, 1)->out[0]; /* the other reader, before the Relu */
    qr_value *r3 = tu_node(g, "Relu", "r3", 1, &c3, 1)->out[0];
    tu_output(g, tu_node(g, "Add", "a3", 2, (qr_value *[]){n3, r3}, 1)->out[0]);
    qr_value *c4 = conv3x3(g, "conv4", r1, 8, 4, 1, 4);
    tu_output(g, c4);
    tu_output(g, tu_node(g, "Relu", "r4", 1, &c4, 1)->out[0]);
    qr_node *mn = tu_node(g, "ReduceMin", "xmin", 1, &x, 1);
    tu_attr_int(g, mn, "keepdims", 0);
    tu_output(g, clip(g, "k5", conv3x3(g, "conv5", r1, 8, 4, 2, 5), mn->out[0], 0.5f));
    tu_output(g, clip(g, "k2", c2, tu_const_f32(g, "k2_min", 0, NULL, &lo), 0.4f));
    if (dynamic) /* a shape known only from the data: the executor allocates as it runs */
        tu_output(g, tu_node(g, "NonZero", "nz", 1, &x, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    return g;
}

static int node_index(const qr_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i]->name, name))
            return i;
    cr_assert_fail("no node %s", name);
    return -1;
}

static void count_values(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n, (void)v, (void)t;
    ++*(int *)user;
}

enum { N_OUT = 6 };

/* Runs g on x (threads, profile), into outs; returns the profile's runs of each node in runs. */
static void run_graph(const qr_graph *g, int threads, qr_observer_fn obs, const qr_tensor *x, qr_tensor *outs,
                      int64_t *runs, int dynamic)
{
    int seen = 0;
    qr_exec_opts o = {.threads = threads, .profile = 1, .observer = obs, .observer_user = &seen};
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, &o, &ex, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_run(ex, x, outs, &e), QR_OK, "%s", e.msg);
    qr_exec_stats st;
    qr_exec_get_stats(ex, &st);
    cr_assert_eq(st.dynamic, dynamic);
    const qr_node_prof *p = qr_exec_profile(ex);
    for (int i = 0; i < g->n_nodes; i++)
        runs[i] = p[i].runs;
    qr_exec_free(ex);
}

static void check_fusion(int dynamic)
{
    qr_graph *g = fusion_graph(dynamic);
    int n_out = g->n_outputs;
    cr_assert_eq(n_out, 5 + dynamic);
    float *xd = malloc(sizeof(float) * 2 * 3 * 12 * 13);
    unsigned seed = 9;
    for (int i = 0; i < 2 * 3 * 12 * 13; i++)
        xd[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 300.0f;
    qr_tensor x = {.dtype = QR_F32, .ndim = 4, .dims = {2, 3, 12, 13}, .data = xd};
    int64_t *runs = calloc((size_t)g->n_nodes, sizeof *runs), *runs0 = calloc((size_t)g->n_nodes, sizeof *runs0);
    cr_assert(runs && runs0);
    qr_tensor ref[N_OUT], got[N_OUT];
    tu_option("fuse", "0"); /* the reference: every node on its own */
    run_graph(g, 1, NULL, &x, ref, runs0, dynamic);
    tu_option("fuse", "");
    for (int i = 0; i < g->n_nodes; i++)
        cr_assert_eq(runs0[i], 1, "fuse=0: node %s ran", g->nodes[i]->name);
    for (int threads = 1; threads <= 2; threads++) {
        run_graph(g, threads, NULL, &x, got, runs, dynamic);
        cr_assert_eq(runs[node_index(g, "r1")], 0, "Relu r1 folded into conv1");
        cr_assert_eq(runs[node_index(g, "k2")], 0, "Clip k2 folded into conv2 (its output a graph output)");
        cr_assert_eq(runs[node_index(g, "conv1")], 1);
        cr_assert_eq(runs[node_index(g, "r3")], 1, "conv3's output has another reader: r3 runs");
        cr_assert_eq(runs[node_index(g, "r4")], 1, "conv4's output is a graph output: r4 runs");
        cr_assert_eq(runs[node_index(g, "k5")], 1, "k5's min is computed: k5 runs");
        for (int o = 0; o < n_out; o++) {
            cr_assert(qr_tensor_same_shape(&got[o], &ref[o]));
            cr_assert(memcmp(got[o].data, ref[o].data, qr_tensor_nbytes(&ref[o])) == 0,
                      "output %d (%s) differs fused, %d threads", o, g->outputs[o]->name, threads);
            qr_tensor_free(&got[o]);
        }
    }
    /* an observer sees every value: nothing is folded */
    run_graph(g, 1, count_values, &x, got, runs, dynamic);
    cr_assert_eq(runs[node_index(g, "r1")], 1);
    cr_assert_eq(runs[node_index(g, "k2")], 1);
    for (int o = 0; o < n_out; o++) {
        cr_assert(memcmp(got[o].data, ref[o].data, qr_tensor_nbytes(&ref[o])) == 0);
        qr_tensor_free(&got[o]);
        qr_tensor_free(&ref[o]);
    }
    free(runs);
    free(runs0);
    free(xd);
    qr_graph_free(g);
}

Test(fusion, executor_folds_relu_and_clip_into_conv_only_when_alone)
{
    check_fusion(0); /* memory planned once */
    check_fusion(1); /* allocated as it runs */
}

/* ---- ops whose def says writes_all: the executor no longer zeroes their outputs ---- */

/* Runs op with its output filled with NaN first; inputs finite, so a NaN left is an element the
 * kernel did not write. */
static void check_writes_all(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin, int nout,
                             const char *what)
{
    const qr_op_def *d = qr_op_find("", op);
    cr_assert(d && d->writes_all, "%s is marked writes_all", op);
    qr_node n = {.name = "t", .op = op, .domain = "", .opset = 17, .n_in = nin, .n_out = nout, .n_attr = nattr,
                 .attr = attrs, .def = d};
    qr_tensor out[2];
    memset(out, 0, sizeof out);
    qr_tensor *outs[2] = {&out[0], &out[1]};
    qr_error e = {{0}};
    qr_kctx k = {.node = &n, .opset = 17, .n_in = nin, .n_out = nout, .in = in, .out = outs, .err = &e};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    for (int o = 0; o < nout; o++) {
        cr_assert_eq(qr_tensor_alloc(&out[o], &e), QR_OK);
        memset(out[o].data, 0xff, qr_tensor_nbytes(&out[o])); /* NaN as f32 and f64, -1 as integers */
    }
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    for (int o = 0; o < nout; o++) {
        int64_t nel = qr_tensor_numel(&out[o]);
        for (int64_t i = 0; i < nel; i++)
            if (out[o].dtype == QR_F32)
                cr_assert(!isnan(((float *)out[o].data)[i]), "%s %s: output %d element %lld not written", op, what, o,
                          (long long)i);
            else if (out[o].dtype == QR_I64)
                cr_assert(((int64_t *)out[o].data)[i] >= 0, "%s %s: index %lld not written", op, what, (long long)i);
        qr_tensor_free(&out[o]);
    }
}

Test(fusion, conv_and_maxpool_write_every_output_element)
{
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        conv_case cc = cases[c].cc;
        int64_t nx = cc.n * cc.c * cc.h * cc.w, nw = cc.m * (cc.c / cc.group) * cc.k * cc.k;
        float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw), b[32];
        cr_assert(x && w && cc.m <= 32);
        unsigned seed = 17;
        for (int64_t i = 0; i < nx; i++)
            x[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 400.0f;
        for (int64_t i = 0; i < nw; i++)
            w[i] = (float)((int)(tu_lcg(&seed) % 2001) - 1000) / 400.0f;
        for (int64_t i = 0; i < cc.m; i++)
            b[i] = (float)i;
        int64_t ks[2] = {cc.k, cc.k}, st[2] = {cc.stride, cc.stride}, pads[4] = {cc.pad, cc.pad, cc.pad, cc.pad};
        qr_attr a[4] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                        {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                        {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pads},
                        {.name = "group", .kind = QR_ATTR_INT, .i = cc.group}};
        qr_tensor tx = {.dtype = QR_F32, .ndim = 4, .dims = {cc.n, cc.c, cc.h, cc.w}, .data = x};
        qr_tensor tw = {.dtype = QR_F32, .ndim = 4, .dims = {cc.m, cc.c / cc.group, cc.k, cc.k}, .data = w};
        qr_tensor tb = {.dtype = QR_F32, .ndim = 1, .dims = {cc.m}, .data = b};
        const qr_tensor *in[3] = {&tx, &tw, &tb};
        check_writes_all("Conv", a, 4, in, 3, 1, cases[c].what);
        tu_option("sgemm", "portable");
        tu_option("window", "portable");
        check_writes_all("Conv", a, 4, in, 2, 1, cases[c].what);
        tu_option("sgemm", "");
        tu_option("window", "");
        /* MaxPool over the same input: 3x3 at the case's stride, with and without its indices */
        qr_attr pa[3] = {a[0], a[1], a[2]};
        check_writes_all("MaxPool", pa, 3, in, 1, 1, cases[c].what);
        check_writes_all("MaxPool", pa, 3, in, 1, 2, cases[c].what);
        free(x);
        free(w);
    }
}
