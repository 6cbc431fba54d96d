/* QrlGridConv (quantizer/gridconv.h): the measured QDQ graphs' Convs on the integer kernels,
 * against the contract computed here by hand: the integers' sums in int64, then acc * x_scale *
 * w_scale[c] + b[c] in double, rounded once to f32 (bit for bit); off the grid, a double
 * reference of the f32 Conv. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "exec.h"
#include "gridconv.h"
#include "quantize_plan.h"
#include "testutil.h"

enum { N = 2, C = 8, H = 6, W = 6, M = 4, K = 3, NX = N * C * H * W, NW = M * C * K * K, NY = N * M * H * W };

static const int64_t dx[] = {N, C, H, W}, dw[] = {M, C, K, K}, dm[] = {M}, pads[] = {1, 1, 1, 1};
static const float xs = 0.0371f, ws[M] = {0.0123f, 0.0071f, 0.0302f, 0.00457f}, bias[M] = {0.25f, -1.5f, 0.0f, 3.1f};

static int8_t wq[NW];

static void fill_w(void)
{
    for (int i = 0; i < NW; i++)
        wq[i] = (int8_t)((i * 53) % 255 - 127);
}

/* x's integers c (x = (float)c * xs, DequantizeLinear's f32) between lo and hi; run r varies them */
static void fill_x(float *x, int *c, int lo, int hi, int r)
{
    for (int i = 0; i < NX; i++) {
        c[i] = lo + (i * (7 + 4 * r) + 3 * r) % (hi - lo + 1);
        x[i] = (float)c[i] * xs;
    }
}

/* The contract: sum of c * w over the window (padding adds nothing) in int64, then in double. */
static void contract(const int *c, float *y)
{
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            for (int oy = 0; oy < H; oy++)
                for (int ox = 0; ox < W; ox++) {
                    int64_t acc = 0;
                    for (int ch = 0; ch < C; ch++)
                        for (int ky = 0; ky < K; ky++)
                            for (int kx = 0; kx < K; kx++) {
                                int iy = oy + ky - 1, ix = ox + kx - 1;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                    acc += (int64_t)c[((n * C + ch) * H + iy) * W + ix] *
                                           wq[((m * C + ch) * K + ky) * K + kx];
                            }
                    y[((n * M + m) * H + oy) * W + ox] = (float)((double)acc * ((double)xs * (double)ws[m]) + bias[m]);
                }
}

/* The f32 Conv of x by the dequantized weights, in double. */
static void conv_double(const float *x, double *y)
{
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            for (int oy = 0; oy < H; oy++)
                for (int ox = 0; ox < W; ox++) {
                    double s = bias[m];
                    for (int ch = 0; ch < C; ch++)
                        for (int ky = 0; ky < K; ky++)
                            for (int kx = 0; kx < K; kx++) {
                                int iy = oy + ky - 1, ix = ox + kx - 1;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                    s += (double)x[((n * C + ch) * H + iy) * W + ix] *
                                         (double)((float)wq[((m * C + ch) * K + ky) * K + kx] * ws[m]);
                            }
                    y[((n * M + m) * H + oy) * W + ox] = s;
                }
}

static qr_value *const_of(qr_graph *g, const char *name, qr_dtype t, int ndim, const int64_t *dims, const void *data)
{
    qr_tensor v = {.dtype = t};
    qr_tensor_set_shape(&v, ndim, dims);
    v.data = (void *)data;
    qr_value *c = qr_graph_new_value(g, name);
    qr_value_set_const(g, c, &v);
    return c;
}

static qr_value *weight_values(qr_graph *g, qr_value **scale)
{
    *scale = tu_const_f32(g, "ws", 1, dm, ws);
    return const_of(g, "wq", QR_I8, 4, dw, wq);
}

static void run(qr_graph *g, const float *x, float *y)
{
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &ex, &e), QR_OK, "%s", e.msg);
    qr_tensor in = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = (void *)x}, out;
    cr_assert_eq(qr_exec_run(ex, &in, &out, &e), QR_OK, "%s", e.msg);
    memcpy(y, out.data, sizeof(float) * NY);
    qr_tensor_free(&out);
    qr_exec_free(ex);
}

/* x -> QuantizeLinear -> DequantizeLinear -> Conv(., DequantizeLinear(i8 weights, per channel), b),
 * lowered: one QrlGridConv, the weight's DequantizeLinear out of the node list; on two runs of
 * one executor (the packing kept from the first) the contract's bits. */
Test(gridconv, lowered_qdq_conv_gives_the_integer_sums_scaled_once)
{
    fill_w();
    const uint8_t zero = 100;
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 4, dx), *sv = tu_const_f32(g, "xs", 0, NULL, &xs),
             *zv = const_of(g, "xz", QR_U8, 0, NULL, &zero), *wsv;
    qr_value *qin[3] = {x, sv, zv};
    qr_node *q = tu_node(g, "QuantizeLinear", "q", 3, qin, 1);
    qr_value *dqin[3] = {q->out[0], sv, zv};
    qr_node *dq = tu_node(g, "DequantizeLinear", "dq", 3, dqin, 1);
    qr_value *wv = weight_values(g, &wsv), *wdq[2] = {wv, wsv};
    qr_node *wd = tu_node(g, "DequantizeLinear", "wdq", 2, wdq, 1);
    tu_attr_int(g, wd, "axis", 0);
    qr_value *cin[3] = {dq->out[0], wd->out[0], tu_const_f32(g, "b", 1, dm, bias)};
    qr_node *c = tu_node(g, "Conv", "conv", 3, cin, 1);
    tu_attr_ints(g, c, "pads", 4, pads);
    tu_output(g, c->out[0]);
    cr_assert_eq(qr_gridconv_lower(g), 1);
    cr_assert_str_eq(c->op, "QrlGridConv");
    cr_assert_eq(g->n_nodes, 3, "the weight's DequantizeLinear stays in the node list");
    qr_exec *ex;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &ex, &e), QR_OK, "%s", e.msg);
    for (int r = 0; r < 2; r++) {
        static float xv[NX], want[NY];
        static int ci[NX];
        fill_x(xv, ci, -100, 155, r);
        contract(ci, want);
        qr_tensor in = {.dtype = QR_F32, .ndim = 4, .dims = {N, C, H, W}, .data = xv}, out;
        cr_assert_eq(qr_exec_run(ex, &in, &out, &e), QR_OK, "%s", e.msg);
        const float *y = out.data;
        for (int i = 0; i < NY; i++)
            cr_assert(y[i] == want[i], "run %d, element %d: %.9g, want %.9g", r, i, (double)y[i], (double)want[i]);
        qr_tensor_free(&out);
    }
    qr_exec_free(ex);
    qr_graph_free(g);
}

/* QrlGridConv made by hand (no x_zero: the integers' zero chosen per run, here negative ones) on
 * x on its grid, then on x off it by a third of a step: the contract's bits, then the f32 Conv's
 * value (within f32 rounding of a double reference). */
Test(gridconv, without_zero_point_and_off_the_grid)
{
    fill_w();
    qr_graph *g = qr_graph_new();
    qr_value *wsv, *wv = weight_values(g, &wsv);
    qr_value *in[7] = {tu_input(g, "x", 4, dx), wv, wsv, NULL, tu_const_f32(g, "xs", 0, NULL, &xs), NULL,
                       tu_const_f32(g, "b", 1, dm, bias)};
    qr_node *c = tu_node(g, "QrlGridConv", "conv", 7, in, 1);
    c->domain = "qrl";
    c->def = qr_op_find_in(qr_ops_quantizer, "qrl", "QrlGridConv");
    tu_attr_ints(g, c, "pads", 4, pads);
    tu_output(g, c->out[0]);
    static float xv[NX], y[NY], want[NY];
    static int ci[NX];
    static double ref[NY];
    fill_x(xv, ci, -60, 100, 0);
    contract(ci, want);
    run(g, xv, y);
    for (int i = 0; i < NY; i++)
        cr_assert(y[i] == want[i], "element %d: %.9g, want %.9g", i, (double)y[i], (double)want[i]);
    for (int i = 0; i < NX; i++)
        xv[i] += xs / 3;
    conv_double(xv, ref);
    run(g, xv, y);
    for (int i = 0; i < NY; i++)
        cr_assert(fabs(y[i] - ref[i]) <= 1e-5 * (fabs(ref[i]) + 1), "off the grid, element %d: %.9g, want %.9g", i,
                  (double)y[i], ref[i]);
    qr_graph_free(g);
}
