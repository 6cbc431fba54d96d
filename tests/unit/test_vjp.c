/* rank = grad's backward passes (quantizer/vjp.h) against torch.autograd: each op as a one-node
 * graph, run forward by the runtime, its inputs' adjoints for a random output direction gy
 * computed by qr_vjp_backward, and by torch as the gradient of sum(y * gy) over the same layer
 * written with torch's own functions (inputs of both signs, attributes at non-default values).
 * torch's forward is checked against the runtime's first, so a case that builds the layer wrong
 * fails there rather than in the adjoint. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graph.h"
#include "tensor_io.h"
#include "testutil.h"
#include "vjp.h"

static char *dir;

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

TestSuite(vjp, .init = setup, .fini = teardown, .timeout = 300);

static unsigned rng = 12345;

static float uni(void) /* in [-1, 1) */
{
    rng = rng * 1103515245u + 12345u;
    return (float)((double)(rng >> 8 & 0xffffff) / 8388608.0 - 1.0);
}

static float *rand_data(int64_t n, float scale, float shift)
{
    float *d = malloc(sizeof *d * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = uni() * scale + shift;
    return d;
}

static void save(const char *name, const qr_tensor *t) { tu_npy_save(dir, name, t); }

static qr_tensor load(const char *name) { return tu_npy_load(dir, name); }

static int64_t numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= d[i];
    return n;
}

/* A variable input x<i> (random, both signs; saved as x<i>.npy). */
static qr_value *var(qr_graph *g, int i, int nd, const int64_t *dims, float **data, float shift)
{
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    qr_value *v = tu_input(g, name, nd, dims);
    *data = rand_data(numel(nd, dims), 1.0f, shift);
    qr_tensor t = {.dtype = QR_F32, .ndim = nd, .data = *data};
    memcpy(t.dims, dims, sizeof *dims * (size_t)nd);
    save(name, &t);
    return v;
}

/* A constant w<i> (random, both signs; saved as w<i>.npy). */
static qr_value *cst(qr_graph *g, int i, int nd, const int64_t *dims, float scale, float shift)
{
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    float *d = rand_data(numel(nd, dims), scale, shift);
    qr_value *v = tu_const_f32(g, name, nd, dims, d);
    qr_tensor t = {.dtype = QR_F32, .ndim = nd, .data = d};
    memcpy(t.dims, dims, sizeof *dims * (size_t)nd);
    save(name, &t);
    free(d);
    return v;
}

static qr_value *ints(qr_graph *g, const char *name, int n, const int64_t *v)
{
    int64_t d[1] = {n};
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {d[0]}, .data = (void *)v};
    qr_value *c = qr_graph_new_value(g, name);
    qr_value_set_const(g, c, &t);
    return c;
}

typedef struct grab {
    int nx;
    const qr_value *const *xv;
    qr_tensor got[4];
} grab;

static void visit(void *user, int id, const qr_tensor *adj)
{
    grab *gr = user;
    for (int i = 0; i < gr->nx; i++)
        if (gr->xv[i]->id == id) {
            qr_error e;
            gr->got[i] = *adj;
            gr->got[i].data = NULL;
            cr_assert_eq(qr_tensor_alloc(&gr->got[i], &e), QR_OK);
            memcpy(gr->got[i].data, adj->data, qr_tensor_nbytes(adj));
        }
}

/* Runs g (its one node n, nx variable inputs xv with data xd) forward, then backward from a random
 * gy at its output; torch (py: from x0.., w0.. as torch tensors with requires_grad on the x's,
 * defines y) must give the same y and the same gradients of sum(y * gy). */
static void check(qr_graph *g, qr_node *n, int nx, qr_value **xv, float **xd, const char *py)
{
    qr_error e = {{0}};
    tu_output(g, n->out[0]);
    qr_exec *x = NULL;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    qr_tensor in[4], y = {0};
    for (int i = 0; i < nx; i++) {
        in[i] = xv[i]->t;
        in[i].data = xd[i];
    }
    cr_assert_eq(qr_exec_run(x, in, &y, &e), QR_OK, "%s", e.msg);
    qr_tensor *val = calloc((size_t)g->n_values + 1, sizeof *val), *adj = calloc((size_t)g->n_values + 1, sizeof *adj);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v]->is_const)
            val[v] = g->values[v]->t;
    for (int i = 0; i < nx; i++)
        val[xv[i]->id] = in[i];
    val[n->out[0]->id] = y;
    qr_tensor gy = y;
    gy.data = NULL;
    cr_assert_eq(qr_tensor_alloc(&gy, &e), QR_OK);
    for (int64_t i = 0; i < qr_tensor_numel(&y); i++)
        ((float *)gy.data)[i] = uni();
    save("gy", &gy);
    save("y", &y);
    /* the lean pass (what rank = grad keeps): a value no backward reads given by its shape alone */
    qr_tensor *lean = calloc((size_t)g->n_values + 1, sizeof *lean), gy2 = gy;
    gy2.data = NULL;
    cr_assert_eq(qr_tensor_alloc(&gy2, &e), QR_OK);
    memcpy(gy2.data, gy.data, qr_tensor_nbytes(&gy));
    for (int v = 0; v < g->n_values; v++)
        lean[v] = val[v];
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] && !n->in[j]->is_const && !qr_vjp_reads(n, j))
            lean[n->in[j]->id].data = NULL;
    if (!qr_vjp_reads(n, -1))
        lean[n->out[0]->id].data = NULL;
    /* a masking node (Relu, Clip...) given its input as the mask alone, as rank = grad keeps it */
    unsigned char *mask = NULL;
    if (qr_vjp_masks(n)) {
        const qr_tensor *ins[3] = {&val[n->in[0]->id], NULL, NULL};
        for (int j = 1; j < n->n_in && j < 3; j++)
            ins[j] = n->in[j] ? &val[n->in[j]->id] : NULL;
        mask = malloc((size_t)qr_tensor_numel(ins[0]) + 1);
        qr_vjp_mask(n, ins, mask);
        lean[n->in[0]->id].dtype = QR_BOOL;
        lean[n->in[0]->id].data = mask;
    }
    adj[n->out[0]->id] = gy;
    grab gr = {.nx = nx, .xv = (const qr_value *const *)xv}, gl = gr;
    cr_assert_eq(qr_vjp_backward(g, val, adj, visit, &gr, &e), QR_OK, "%s", e.msg);
    adj[n->out[0]->id] = gy2;
    cr_assert_eq(qr_vjp_backward(g, lean, adj, visit, &gl, &e), QR_OK, "lean: %s", e.msg);
    char code[8192], cmd[9000], *log;
    snprintf(code, sizeof code,
             "import numpy as np, torch, torch.nn.functional as F\n"
             "torch.set_default_dtype(torch.float64)\n"
             "import glob\n"
             "X = {p[:-4]: torch.tensor(np.load(p).astype(np.float64), requires_grad=p.startswith('x')) for p in "
             "glob.glob('[xw]*.npy')}\n"
             "globals().update(X)\n"
             "%s\n"
             "yr = np.load('y.npy')\n"
             "err = np.abs(y.detach().numpy() - yr).max() / max(1e-6, np.abs(yr).max())\n"
             "assert y.shape == yr.shape and err < 1e-4, ('forward differs', y.shape, yr.shape, err)\n"
             "(y * torch.tensor(np.load('gy.npy').astype(np.float64))).sum().backward()\n"
             "for k, v in X.items():\n"
             "  if k.startswith('x'): np.save('g' + k[1:] + '.npy', (v.grad if v.grad is not None else "
             "torch.zeros_like(v)).numpy().astype(np.float32))\n",
             py);
    tu_write_file(dir, "case.py", code);
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 case.py", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (int i = 0; i < 2 * nx; i++) { /* the held pass's adjoints, then the lean pass's */
        char name[8];
        snprintf(name, sizeof name, "g%d", i % nx);
        qr_tensor want = load(name), *got = i < nx ? &gr.got[i] : &gl.got[i - nx];
        const char *pass = i < nx ? "held" : "lean";
        cr_assert_eq(qr_tensor_numel(&want), qr_tensor_numel(&in[i % nx]));
        const float *a = got->data, *b = want.data;
        double mx = 0, worst = 0;
        int64_t at = 0;
        for (int64_t k = 0; k < qr_tensor_numel(&want); k++) {
            mx = fmax(mx, fabs(b[k]));
            double d = fabs((double)(a ? a[k] : 0) - b[k]);
            if (d > worst)
                worst = d, at = k;
        }
        cr_assert(mx > 0, "%s: torch's gradient of input %d is all zero", n->op, i % nx);
        cr_assert(a && worst <= 1e-4 * mx + 1e-6,
                  "%s (%s): input %d's adjoint differs from torch's by %g at %lld (%g vs %g; max %g)", n->op, pass,
                  i % nx, worst, (long long)at, a ? a[at] : 0.0, b[at], mx);
        qr_tensor_free(&want);
        qr_tensor_free(got);
    }
    free(lean), free(mask);
    qr_tensor_free(&y); /* gy: the backward freed it with y's adjoint */
    qr_exec_free(x);
    free(val), free(adj);
    for (int i = 0; i < nx; i++)
        free(xd[i]);
    qr_graph_free(g);
}

Test(vjp, conv_grouped_strided_dilated_asymmetric_pads)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 4, 9, 8}, ws[4] = {6, 2, 3, 3}, bs[1] = {6};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[3] = {xv[0], cst(g, 0, 4, ws, 0.5f, 0), cst(g, 1, 1, bs, 0.5f, 0)};
    qr_node *n = tu_node(g, "Conv", "c", 3, in, 1);
    tu_attr_int(g, n, "group", 2);
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 1});
    tu_attr_ints(g, n, "dilations", 2, (int64_t[]){1, 2});
    tu_attr_ints(g, n, "pads", 4, (int64_t[]){1, 2, 0, 1});
    tu_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){3, 3});
    check(g, n, 1, xv, xd, "y = F.conv2d(F.pad(x0, (2, 1, 1, 0)), w0, w1, stride=(2, 1), dilation=(1, 2), groups=2)");
}

Test(vjp, conv_depthwise_and_same_upper)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {1, 3, 7, 6}, ws[4] = {3, 1, 3, 3};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[2] = {xv[0], cst(g, 0, 4, ws, 0.7f, 0)};
    qr_node *n = tu_node(g, "Conv", "c", 2, in, 1);
    tu_attr_int(g, n, "group", 3);
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    qr_node_add_attr_s(g, n, "auto_pad", "SAME_UPPER");
    /* SAME_UPPER, stride 2: out ceil(7/2) = 4, ceil(6/2) = 3; pads (total 2, 1): begin 1, 0 */
    check(g, n, 1, xv, xd, "y = F.conv2d(F.pad(x0, (0, 1, 1, 1)), w0, None, stride=2, groups=3)");
}

Test(vjp, conv_pointwise_many_channels)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 24, 5, 5}, ws[4] = {40, 24, 1, 1};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[2] = {xv[0], cst(g, 0, 4, ws, 0.3f, 0)};
    qr_node *n = tu_node(g, "Conv", "c", 2, in, 1);
    check(g, n, 1, xv, xd, "y = F.conv2d(x0, w0)");
}

Test(vjp, maxpool_ceil_mode_pads_strides)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 3, 8, 7};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_node *n = tu_node(g, "MaxPool", "p", 1, xv, 1);
    tu_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){3, 3});
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    tu_attr_ints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tu_attr_int(g, n, "ceil_mode", 1);
    check(g, n, 1, xv, xd, "y = F.max_pool2d(x0, 3, 2, 1, ceil_mode=True)");
}

Test(vjp, averagepool_excluding_pads)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {1, 2, 7, 7};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_node *n = tu_node(g, "AveragePool", "p", 1, xv, 1);
    tu_attr_ints(g, n, "kernel_shape", 2, (int64_t[]){3, 2});
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    tu_attr_ints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    check(g, n, 1, xv, xd, "y = F.avg_pool2d(x0, (3, 2), 2, 1, count_include_pad=False)");
}

Test(vjp, gemm_trans_b_alpha_and_both_operands)
{
    qr_graph *g = qr_graph_new();
    float *xd[2];
    int64_t as[2] = {5, 3}, bs[2] = {4, 5}, cs[1] = {4};
    qr_value *xv[2] = {var(g, 0, 2, as, &xd[0], 0), var(g, 1, 2, bs, &xd[1], 0)};
    qr_value *in[3] = {xv[0], xv[1], cst(g, 0, 1, cs, 1, 0)};
    qr_node *n = tu_node(g, "Gemm", "m", 3, in, 1);
    tu_attr_int(g, n, "transA", 1);
    tu_attr_int(g, n, "transB", 1);
    tu_attr_float(g, n, "alpha", 0.5f);
    check(g, n, 2, xv, xd, "y = 0.5 * x0.t() @ x1.t() + w0");
}

/* A constant operand (weights, a scale): the variable one is read by no backward (qr_vjp_reads), so
 * the lean pass gives it by its shape alone. */
Test(vjp, gemm_constant_b_trans_a)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t as[2] = {5, 3}, bs[2] = {5, 4}, cs[1] = {4};
    qr_value *xv[1] = {var(g, 0, 2, as, &xd[0], 0)};
    qr_value *in[3] = {xv[0], cst(g, 0, 2, bs, 1, 0), cst(g, 1, 1, cs, 1, 0)};
    qr_node *n = tu_node(g, "Gemm", "m", 3, in, 1);
    tu_attr_int(g, n, "transA", 1);
    tu_attr_float(g, n, "alpha", -0.7f);
    check(g, n, 1, xv, xd, "y = -0.7 * x0.t() @ w0 + w1");
}

Test(vjp, matmul_constant_weights)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t as[3] = {2, 3, 4}, bs[2] = {4, 5};
    qr_value *xv[1] = {var(g, 0, 3, as, &xd[0], 0)};
    qr_value *in[2] = {xv[0], cst(g, 0, 2, bs, 1, 0)};
    qr_node *n = tu_node(g, "MatMul", "m", 2, in, 1);
    check(g, n, 1, xv, xd, "y = x0 @ w0");
}

static void by_constant(const char *op, const char *py, int first)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t as[3] = {2, 3, 4}, cs[2] = {3, 1};
    qr_value *xv[1] = {var(g, 0, 3, as, &xd[0], 0)};
    qr_value *c = cst(g, 0, 2, cs, 1, op[0] == 'D' && !first ? 2.0f : 0);
    qr_value *in[2] = {first ? c : xv[0], first ? xv[0] : c};
    qr_node *n = tu_node(g, op, "b", 2, in, 1);
    check(g, n, 1, xv, xd, py);
}

Test(vjp, mul_by_constant) { by_constant("Mul", "y = x0 * w0", 0); }
Test(vjp, constant_times_variable) { by_constant("Mul", "y = w0 * x0", 1); }
Test(vjp, div_by_constant) { by_constant("Div", "y = x0 / w0", 0); }

Test(vjp, matmul_broadcast_batch)
{
    qr_graph *g = qr_graph_new();
    float *xd[2];
    int64_t as[3] = {2, 3, 4}, bs[2] = {4, 5};
    qr_value *xv[2] = {var(g, 0, 3, as, &xd[0], 0), var(g, 1, 2, bs, &xd[1], 0)};
    qr_node *n = tu_node(g, "MatMul", "m", 2, xv, 1);
    check(g, n, 2, xv, xd, "y = x0 @ x1");
}

static void binary_shapes(const char *op, const char *py, float shift1, int nb, const int64_t *bs)
{
    qr_graph *g = qr_graph_new();
    float *xd[2];
    int64_t as[3] = {2, 3, 4};
    qr_value *xv[2] = {var(g, 0, 3, as, &xd[0], op[0] == 'P' ? 1.5f : 0), var(g, 1, nb, bs, &xd[1], shift1)};
    qr_node *n = tu_node(g, op, "b", 2, xv, 1);
    check(g, n, 2, xv, xd, py);
}

static void binary(const char *op, const char *py, float shift1) { binary_shapes(op, py, shift1, 2, (int64_t[]){3, 1}); }

/* the same shapes (no broadcast: the residual Add's and the gate Mul's own loop) */
Test(vjp, add_same_shape) { binary_shapes("Add", "y = x0 + x1", 0, 3, (int64_t[]){2, 3, 4}); }
Test(vjp, sub_same_shape) { binary_shapes("Sub", "y = x0 - x1", 0, 3, (int64_t[]){2, 3, 4}); }
Test(vjp, mul_same_shape) { binary_shapes("Mul", "y = x0 * x1", 0, 3, (int64_t[]){2, 3, 4}); }

Test(vjp, add_broadcast) { binary("Add", "y = x0 + x1", 0); }
Test(vjp, sub_broadcast) { binary("Sub", "y = x0 - x1", 0); }
Test(vjp, mul_broadcast) { binary("Mul", "y = x0 * x1", 0); }
Test(vjp, div_broadcast) { binary("Div", "y = x0 / x1", 2.0f); }
Test(vjp, max_broadcast) { binary("Max", "y = torch.maximum(x0, x1)", 0); }
Test(vjp, pow_broadcast) { binary("Pow", "y = torch.pow(x0, x1)", 0); }

static void unary(const char *op, const char *py, void (*attrs)(qr_graph *, qr_node *))
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 3, 4, 5};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    for (int64_t i = 0; i < 120; i++)
        xd[0][i] *= 4; /* past HardSigmoid's and HardSwish's bends */
    qr_tensor t = {.dtype = QR_F32, .ndim = 4, .dims = {2, 3, 4, 5}, .data = xd[0]};
    save("x0", &t);
    qr_node *n = tu_node(g, op, "u", 1, xv, 1);
    if (attrs)
        attrs(g, n);
    check(g, n, 1, xv, xd, py);
}

static void leaky(qr_graph *g, qr_node *n) { tu_attr_float(g, n, "alpha", 0.2f); }
static void hsig(qr_graph *g, qr_node *n) { tu_attr_float(g, n, "alpha", 0.3f), tu_attr_float(g, n, "beta", 0.4f); }
static void axis1(qr_graph *g, qr_node *n) { tu_attr_int(g, n, "axis", 1); }
static void perm(qr_graph *g, qr_node *n) { tu_attr_ints(g, n, "perm", 4, (int64_t[]){0, 2, 3, 1}); }

Test(vjp, relu) { unary("Relu", "y = F.relu(x0)", NULL); }
Test(vjp, leaky_relu) { unary("LeakyRelu", "y = F.leaky_relu(x0, 0.2)", leaky); }
Test(vjp, hard_sigmoid) { unary("HardSigmoid", "y = torch.clamp(0.3 * x0 + 0.4, 0, 1)", hsig); }
Test(vjp, hard_swish) { unary("HardSwish", "y = F.hardswish(x0)", NULL); }
Test(vjp, sigmoid) { unary("Sigmoid", "y = torch.sigmoid(x0)", NULL); }
Test(vjp, global_average_pool) { unary("GlobalAveragePool", "y = x0.mean(dim=(2, 3), keepdim=True)", NULL); }
Test(vjp, softmax_axis_1) { unary("Softmax", "y = torch.softmax(x0, 1)", axis1); }
Test(vjp, transpose) { unary("Transpose", "y = x0.permute(0, 2, 3, 1)", perm); }
Test(vjp, flatten_axis_1) { unary("Flatten", "y = x0.reshape(2, -1)", axis1); }

Test(vjp, clip_bounds)
{
    qr_graph *g = qr_graph_new();
    float *xd[1], lo = -0.5f, hi = 0.7f;
    int64_t xs[2] = {6, 7};
    qr_value *xv[1] = {var(g, 0, 2, xs, &xd[0], 0)};
    qr_value *in[3] = {xv[0], tu_const_f32(g, "lo", 0, NULL, &lo), tu_const_f32(g, "hi", 0, NULL, &hi)};
    qr_node *n = tu_node(g, "Clip", "c", 3, in, 1);
    check(g, n, 1, xv, xd, "y = torch.clamp(x0, -0.5, 0.7)");
}

Test(vjp, reduce_mean_axes)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 3, 4, 5};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_value *in[2] = {xv[0], ints(g, "axes", 2, (int64_t[]){1, -1})};
    qr_node *n = tu_node(g, "ReduceMean", "r", 2, in, 1);
    n->opset = 18;
    tu_attr_int(g, n, "keepdims", 0);
    check(g, n, 1, xv, xd, "y = x0.mean(dim=(1, 3))");
}

Test(vjp, concat_two_variables)
{
    qr_graph *g = qr_graph_new();
    float *xd[2];
    int64_t as[4] = {2, 3, 4, 2}, bs[4] = {2, 2, 4, 2};
    qr_value *xv[2] = {var(g, 0, 4, as, &xd[0], 0), var(g, 1, 4, bs, &xd[1], 0)};
    qr_node *n = tu_node(g, "Concat", "c", 2, xv, 1);
    tu_attr_int(g, n, "axis", 1);
    check(g, n, 2, xv, xd, "y = torch.cat([x0, x1], 1)");
}

Test(vjp, slice_steps_and_negative_starts)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[3] = {3, 10, 6};
    qr_value *xv[1] = {var(g, 0, 3, xs, &xd[0], 0)};
    qr_value *in[5] = {xv[0], ints(g, "s", 2, (int64_t[]){-9, 5}), ints(g, "e", 2, (int64_t[]){9, 0}),
                       ints(g, "a", 2, (int64_t[]){1, 2}), ints(g, "st", 2, (int64_t[]){3, -2})};
    qr_node *n = tu_node(g, "Slice", "s", 5, in, 1);
    check(g, n, 1, xv, xd, "y = x0[:, 1:9:3, :][:, :, torch.arange(5, 0, -2)]");
}

Test(vjp, pad_constant)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {1, 2, 3, 4};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_value *in[2] = {xv[0], ints(g, "p", 8, (int64_t[]){0, 1, 2, 0, 0, 2, 0, 3})};
    qr_node *n = tu_node(g, "Pad", "p", 2, in, 1);
    check(g, n, 1, xv, xd, "y = F.pad(x0, (0, 3, 2, 0, 1, 2, 0, 0))");
}

Test(vjp, batch_normalization_inference)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 3, 4, 4}, cs[1] = {3};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_value *in[5] = {xv[0], cst(g, 0, 1, cs, 1, 0), cst(g, 1, 1, cs, 1, 0), cst(g, 2, 1, cs, 1, 0),
                       cst(g, 3, 1, cs, 0.4f, 0.6f)};
    qr_node *n = tu_node(g, "BatchNormalization", "bn", 5, in, 1);
    tu_attr_float(g, n, "epsilon", 0.01f);
    check(g, n, 1, xv, xd, "y = F.batch_norm(x0, w2, w3, w0, w1, False, 0.0, 0.01)");
}

/* ConvTranspose: y = conv_transpose(x, W) is cropped by the pads from the full output (output_padding
 * at the end), which torch's padding (symmetric only) cannot say: torch's full output, cropped. */
Test(vjp, conv_transpose_grouped_strided_dilated_output_padding_asymmetric_pads)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 4, 5, 4}, ws[4] = {4, 3, 3, 2}, bs[1] = {6};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[3] = {xv[0], cst(g, 0, 4, ws, 0.5f, 0), cst(g, 1, 1, bs, 0.5f, 0)};
    qr_node *n = tu_node(g, "ConvTranspose", "t", 3, in, 1);
    tu_attr_int(g, n, "group", 2);
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){3, 2});
    tu_attr_ints(g, n, "dilations", 2, (int64_t[]){2, 1});
    tu_attr_ints(g, n, "output_padding", 2, (int64_t[]){1, 0});
    tu_attr_ints(g, n, "pads", 4, (int64_t[]){1, 0, 2, 1});
    /* full: 3 * 4 + 1 + 2 * 2 + 1 = 18 rows, 2 * 3 + 0 + 1 + 1 = 8 columns; cropped [1, 16), [0, 7) */
    check(g, n, 1, xv, xd,
          "y = F.conv_transpose2d(x0, w0, w1, stride=(3, 2), output_padding=(1, 0), groups=2, dilation=(2, 1))"
          "[:, :, 1:16, 0:7]");
}

/* the pads from the size asked: SAME_UPPER (out = in x stride, the odd unit at the end) */
Test(vjp, conv_transpose_same_upper)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {1, 3, 4, 5}, ws[4] = {3, 5, 3, 3};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[2] = {xv[0], cst(g, 0, 4, ws, 0.5f, 0)};
    qr_node *n = tu_node(g, "ConvTranspose", "t", 2, in, 1);
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    qr_node_add_attr_s(g, n, "auto_pad", "SAME_UPPER");
    /* full 9 x 11, out 8 x 10: total 1, begin 0 */
    check(g, n, 1, xv, xd, "y = F.conv_transpose2d(x0, w0, None, stride=2)[:, :, 0:8, 0:10]");
}

/* the pads from output_shape without auto_pad: the odd unit at the beginning */
Test(vjp, conv_transpose_output_shape)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    int64_t xs[4] = {2, 2, 3, 4}, ws[4] = {2, 3, 4, 3};
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)}, *in[2] = {xv[0], cst(g, 0, 4, ws, 0.5f, 0)};
    qr_node *n = tu_node(g, "ConvTranspose", "t", 2, in, 1);
    tu_attr_ints(g, n, "strides", 2, (int64_t[]){2, 3});
    tu_attr_ints(g, n, "output_shape", 2, (int64_t[]){7, 9});
    /* full 2 * 2 + 4 = 8 rows, 3 * 3 + 3 = 12 columns; totals 1 and 3: begins 1 and 2 */
    check(g, n, 1, xv, xd, "y = F.conv_transpose2d(x0, w0, None, stride=(2, 3))[:, :, 1:8, 2:11]");
}

/* Resize, data input only; in[1..3] roi, scales, sizes (NULL: absent). */
static void resize_case(const int64_t *xs, const float *scales, const int64_t *sizes, const char *mode,
                        const char *ctm, const char *nearest, const char *py)
{
    qr_graph *g = qr_graph_new();
    float *xd[1];
    qr_value *xv[1] = {var(g, 0, 4, xs, &xd[0], 0)};
    qr_value *in[4] = {xv[0], NULL, NULL, NULL};
    if (scales)
        in[2] = tu_const_f32(g, "scales", 1, (int64_t[]){4}, scales);
    if (sizes)
        in[3] = ints(g, "sizes", 4, sizes);
    qr_node *n = tu_node(g, "Resize", "r", sizes ? 4 : 3, in, 1);
    qr_node_add_attr_s(g, n, "mode", mode);
    qr_node_add_attr_s(g, n, "coordinate_transformation_mode", ctm);
    if (nearest)
        qr_node_add_attr_s(g, n, "nearest_mode", nearest);
    check(g, n, 1, xv, xd, py);
}

/* nearest, asymmetric, floor (torch's 'nearest'), up 2 x 3 */
Test(vjp, resize_nearest_asymmetric_floor_scales)
{
    resize_case((int64_t[]){2, 3, 4, 3}, (float[]){1, 1, 2, 3}, NULL, "nearest", "asymmetric", "floor",
                "y = F.interpolate(x0, size=(8, 9), mode='nearest')");
}

/* nearest, half_pixel, round_prefer_ceil (torch's 'nearest-exact'), up on one axis, down on the other */
Test(vjp, resize_nearest_half_pixel_prefer_ceil_sizes)
{
    resize_case((int64_t[]){1, 2, 4, 7}, NULL, (int64_t[]){1, 2, 7, 3}, "nearest", "half_pixel", "round_prefer_ceil",
                "y = F.interpolate(x0, size=(7, 3), mode='nearest-exact')");
}

/* linear, half_pixel (torch's bilinear without align_corners), up on one axis, down on the other */
Test(vjp, resize_linear_half_pixel_sizes)
{
    resize_case((int64_t[]){2, 2, 4, 5}, NULL, (int64_t[]){2, 2, 7, 3}, "linear", "half_pixel", NULL,
                "y = F.interpolate(x0, size=(7, 3), mode='bilinear', align_corners=False)");
}

/* linear, align_corners, scales 2 x 1.5 */
Test(vjp, resize_linear_align_corners_scales)
{
    resize_case((int64_t[]){1, 3, 4, 6}, (float[]){1, 1, 2, 1.5f}, NULL, "linear", "align_corners", NULL,
                "y = F.interpolate(x0, size=(8, 9), mode='bilinear', align_corners=True)");
}

/* Which values get an exact adjoint: through a Shape (an integer output, no first-order change) and
 * a Relu, yes; through an op without a backward (Erf), no, nor anything that reaches the outputs
 * only through it. */
Test(vjp, exact_marks_what_an_op_without_backward_blocks)
{
    qr_graph *g = qr_graph_new();
    int64_t xs[4] = {1, 2, 4, 4};
    qr_value *x = tu_input(g, "x", 4, xs);
    qr_node *r = tu_node(g, "Relu", "r", 1, &x, 1);
    r->out[0]->t = x->t;
    qr_node *s = tu_node(g, "Shape", "s", 1, &x, 1);
    s->out[0]->t.dtype = QR_I64;
    qr_node *z = tu_node(g, "Relu", "z", 1, &r->out[0], 1);
    z->out[0]->t = x->t;
    qr_node *rs = tu_node(g, "Erf", "rs", 1, &z->out[0], 1);
    rs->out[0]->t = x->t;
    rs->out[0]->t.dtype = QR_UNDEF; /* a type import could not tell (as PP-OCR det's Resize outputs) */
    qr_value *both[2] = {r->out[0], rs->out[0]};
    qr_node *a = tu_node(g, "Add", "a", 2, both, 1);
    a->out[0]->t = x->t;
    tu_output(g, a->out[0]);
    tu_output(g, s->out[0]);
    unsigned char ex[16];
    qr_vjp_exact(g, ex);
    cr_assert(ex[a->out[0]->id] && ex[rs->out[0]->id], "the outputs and Erf's output are exact");
    cr_assert(!ex[z->out[0]->id], "Erf's input reaches the output only through it");
    cr_assert(!ex[r->out[0]->id], "r reaches the output through z and Erf too");
    cr_assert(!ex[x->id], "x reaches it through r");
    qr_graph_free(g);
}

Test(vjp, exact_through_shape_and_relu)
{
    qr_graph *g = qr_graph_new();
    int64_t xs[2] = {3, 4};
    qr_value *x = tu_input(g, "x", 2, xs);
    qr_node *s = tu_node(g, "Shape", "s", 1, &x, 1);
    s->out[0]->t.dtype = QR_I64;
    qr_node *r = tu_node(g, "Relu", "r", 1, &x, 1);
    r->out[0]->t = x->t;
    tu_output(g, r->out[0]);
    tu_output(g, s->out[0]);
    unsigned char ex[8];
    qr_vjp_exact(g, ex);
    cr_assert(ex[x->id], "x reaches the f32 output through Relu alone (Shape changes nothing to first order)");
    qr_graph_free(g);
}

/* The run counter (qr_exec_node_samples) counts a backward pass as vjp.h says: each node whose
 * backward made an input's adjoint, times the first input's batch. Hand-counted on
 *   a = Relu(x); b = Mul(a, w); c = Add(b, w2); f = Sqrt(w3); y = Add(c, f); t = Tanh(a) (t no output)
 * with x of batch 3: y's Add, c's Add, b's Mul, a's Relu make adjoints (4 nodes); Sqrt reads a
 * constant alone (no adjoint made) and Tanh's output reaches no output (no adjoint there): 4 x 3 =
 * 12 node-samples a pass, where the forward run counts 5 x 3 (Sqrt: made from constants). */
static void keep_all(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    qr_tensor *val = user;
    qr_error e;
    qr_tensor c = *t;
    c.data = NULL;
    cr_assert_eq(qr_tensor_alloc(&c, &e), QR_OK);
    memcpy(c.data, t->data, qr_tensor_nbytes(t));
    val[v->id] = c;
}

Test(vjp, backward_passes_counted_as_node_runs_times_samples)
{
    qr_graph *g = qr_graph_new();
    float *xd;
    int64_t xs[2] = {3, 5}, ws[1] = {5};
    qr_value *x = var(g, 0, 2, xs, &xd, 0), *w = cst(g, 0, 1, ws, 1, 0), *w2 = cst(g, 1, 1, ws, 1, 0);
    qr_value *w3 = cst(g, 2, 1, ws, 0.5f, 1.0f);
    qr_node *na = tu_node(g, "Relu", "a", 1, (qr_value *[]){x}, 1);
    qr_node *nb = tu_node(g, "Mul", "b", 2, (qr_value *[]){na->out[0], w}, 1);
    qr_node *nc = tu_node(g, "Add", "c", 2, (qr_value *[]){nb->out[0], w2}, 1);
    qr_node *nf = tu_node(g, "Sqrt", "f", 1, (qr_value *[]){w3}, 1);
    qr_node *ny = tu_node(g, "Add", "y", 2, (qr_value *[]){nc->out[0], nf->out[0]}, 1);
    qr_node *nt = tu_node(g, "Tanh", "t", 1, (qr_value *[]){na->out[0]}, 1);
    tu_output(g, ny->out[0]);
    (void)nt;
    qr_error e = {{0}};
    qr_tensor *val = calloc((size_t)g->n_values + 1, sizeof *val), *adj = calloc((size_t)g->n_values + 1, sizeof *adj);
    qr_exec_opts eo = {.threads = 1, .observer = keep_all, .observer_user = val};
    qr_exec *ex = NULL;
    cr_assert_eq(qr_exec_new(g, &eo, &ex, &e), QR_OK, "%s", e.msg);
    qr_tensor in = x->t, y = {0};
    in.data = xd;
    int64_t before = qr_exec_node_samples();
    cr_assert_eq(qr_exec_run(ex, &in, &y, &e), QR_OK, "%s", e.msg);
    int64_t fwd = qr_exec_node_samples() - before;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v]->is_const)
            val[v] = g->values[v]->t;
    val[x->id] = in;
    adj[ny->out[0]->id] = y; /* y as the direction: any values */
    before = qr_exec_node_samples();
    cr_assert_eq(qr_vjp_backward(g, val, adj, NULL, NULL, &e), QR_OK, "%s", e.msg);
    int64_t bwd = qr_exec_node_samples() - before;
    cr_assert_eq(fwd, 5 * 3, "the forward run counted %lld node-samples, not 15", (long long)fwd);
    cr_assert_eq(bwd, 4 * 3, "the backward pass counted %lld node-samples, not 12", (long long)bwd);
    for (int v = 0; v < g->n_values; v++)
        if (!g->values[v]->is_const && v != x->id)
            qr_tensor_free(&val[v]);
    qr_exec_free(ex);
    free(val), free(adj), free(xd);
    qr_graph_free(g);
}

/* rank = grad keeps a SiLU's x but not its Sigmoid, a hard-swish's x but not x + 3 (its Clip's mask)
 * nor Clip(x + 3, 0, 6): the backward recomputes them (qr_vjp_recompute). The oracle is the
 * runtime's forward: each recomputed value equals the run's bit for bit (elements past the
 * Sigmoid's two forms, at the Clip's bends and bounds), and the backward given x alone makes the
 * same adjoint bits as given every value. */
Test(vjp, silu_and_hard_swish_recomputed_from_x_bit_for_bit)
{
    qr_graph *g = qr_graph_new();
    int64_t xs[2] = {4, 300};
    float *xd = rand_data(1200, 8.0f, 0);
    xd[0] = 0, xd[1] = -3, xd[2] = 3, xd[3] = -0.0f, xd[4] = 90, xd[5] = -90, xd[6] = 1e-8f;
    qr_value *x = tu_input(g, "x", 2, xs);
    qr_value *three = tu_const_f32(g, "three", 0, NULL, (float[]){3}), *zero = tu_const_f32(g, "zero", 0, NULL, (float[]){0});
    qr_value *six = tu_const_f32(g, "six", 0, NULL, (float[]){6});
    qr_node *ns = tu_node(g, "Sigmoid", "s", 1, (qr_value *[]){x}, 1);
    qr_node *nm = tu_node(g, "Mul", "m", 2, (qr_value *[]){x, ns->out[0]}, 1);
    qr_node *na = tu_node(g, "Add", "a", 2, (qr_value *[]){nm->out[0], three}, 1);
    qr_node *nc = tu_node(g, "Clip", "c", 3, (qr_value *[]){na->out[0], zero, six}, 1);
    qr_node *nh = tu_node(g, "Mul", "h", 2, (qr_value *[]){nm->out[0], nc->out[0]}, 1);
    qr_node *ny = tu_node(g, "Div", "y", 2, (qr_value *[]){nh->out[0], six}, 1);
    tu_output(g, ny->out[0]);
    qr_error e = {{0}};
    qr_tensor *val = calloc((size_t)g->n_values + 1, sizeof *val), *lean = calloc((size_t)g->n_values + 1, sizeof *lean);
    qr_tensor *adj = calloc((size_t)g->n_values + 1, sizeof *adj), *rc = calloc((size_t)g->n_values + 1, sizeof *rc);
    qr_exec_opts eo = {.threads = 1, .observer = keep_all, .observer_user = val};
    qr_exec *ex = NULL;
    cr_assert_eq(qr_exec_new(g, &eo, &ex, &e), QR_OK, "%s", e.msg);
    qr_tensor in = x->t, y = {0};
    in.data = xd;
    cr_assert_eq(qr_exec_run(ex, &in, &y, &e), QR_OK, "%s", e.msg);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v]->is_const)
            val[v] = g->values[v]->t;
    val[x->id] = in;
    const qr_value *dropped[3] = {ns->out[0], na->out[0], nc->out[0]};
    for (int v = 0; v < g->n_values; v++)
        lean[v] = val[v];
    for (int i = 0; i < 3; i++) {
        cr_assert(qr_vjp_recomputes(dropped[i]->producer));
        lean[dropped[i]->id].data = NULL;
    }
    for (int i = 0; i < 3; i++) { /* the runtime's bits, from x alone (the Clip's through x + 3) */
        const qr_value *d = dropped[i];
        cr_assert_eq(qr_vjp_recompute(d, lean, rc, 0), 0, "%s not recomputed", d->name);
        const float *a = val[d->id].data, *b = rc[d->id].data;
        for (int64_t k = 0; k < 1200; k++)
            cr_assert(!memcmp(&a[k], &b[k], sizeof(float)), "%s[%lld]: the run's %.9g (%a), recomputed %.9g (%a)",
                      d->name, (long long)k, a[k], a[k], b[k], b[k]);
        for (int v = 0; v < g->n_values; v++)
            qr_tensor_free(&rc[v]);
    }
    qr_tensor got[2] = {{0}};
    for (int pass = 0; pass < 2; pass++) {
        qr_tensor u = y;
        u.data = NULL;
        cr_assert_eq(qr_tensor_alloc(&u, &e), QR_OK);
        for (int64_t k = 0; k < 1200; k++)
            ((float *)u.data)[k] = (float)((k * 7919) % 13) - 6;
        adj[ny->out[0]->id] = u;
        grab gr = {.nx = 1, .xv = (const qr_value *const *)&x};
        cr_assert_eq(qr_vjp_backward(g, pass ? lean : val, adj, visit, &gr, &e), QR_OK, "%s: %s",
                     pass ? "x alone" : "every value", e.msg);
        got[pass] = gr.got[0];
        cr_assert(got[pass].data, "no adjoint of x");
    }
    cr_assert(!memcmp(got[0].data, got[1].data, 1200 * sizeof(float)),
              "the backward from x alone differs from the backward from every value");
    qr_tensor_free(&got[0]), qr_tensor_free(&got[1]), qr_tensor_free(&y);
    for (int v = 0; v < g->n_values; v++)
        if (!g->values[v]->is_const && v != x->id)
            qr_tensor_free(&val[v]);
    qr_exec_free(ex);
    free(val), free(lean), free(adj), free(rc), free(xd);
    qr_graph_free(g);
}
