/* Graph passes: each checked by running the graph before and after. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "exec.h"
#include "passes.h"
#include "testutil.h"

static void run1(qr_graph *g, const qr_tensor *in, qr_tensor *out)
{
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_run(x, in, out, &e), QR_OK, "%s", e.msg);
    qr_exec_free(x);
}

static void assert_close(const qr_tensor *a, const qr_tensor *b)
{
    cr_assert(qr_tensor_same_shape(a, b));
    for (int64_t i = 0; i < qr_tensor_numel(a); i++) {
        float x = ((float *)a->data)[i], y = ((float *)b->data)[i];
        cr_assert(fabsf(x - y) <= 1e-5f + 1e-4f * fabsf(y), "element %lld: %g vs %g", (long long)i, x, y);
    }
}

static int count_op(const qr_graph *g, const char *op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += strcmp(g->nodes[i]->op, op) == 0;
    return c;
}

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 65536.f - 0.5f;
}

static qr_node *add_bn(qr_graph *g, qr_value *x, int m, unsigned *seed)
{
    float sc[64], b[64], mean[64], var[64];
    for (int i = 0; i < m; i++) {
        sc[i] = 1.f + frand(seed);
        b[i] = frand(seed);
        mean[i] = frand(seed);
        var[i] = 0.5f + frand(seed) * 0.5f + 0.3f;
    }
    const int64_t d[] = {m};
    qr_value *in[] = {x, tu_const_f32(g, "scale", 1, d, sc), tu_const_f32(g, "B", 1, d, b),
                      tu_const_f32(g, "mean", 1, d, mean), tu_const_f32(g, "var", 1, d, var)};
    qr_node *bn = tu_node(g, "BatchNormalization", "bn", 5, in, 1);
    tu_attr_float(g, bn, "epsilon", 1e-3f);
    return bn;
}

/* Optimizing g leaves one Conv that writes output `name` and computes what g did on x; frees g. */
static void assert_one_conv_after_optimize(qr_graph *g, const qr_tensor *x, const char *name)
{
    qr_tensor before, after;
    run1(g, x, &before);
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(g->n_nodes, 1);
    cr_assert_eq(count_op(g, "Conv"), 1);
    cr_assert_str_eq(g->outputs[0]->name, name);
    run1(g, x, &after);
    assert_close(&after, &before);
    qr_tensor_free(&before);
    qr_tensor_free(&after);
    qr_graph_free(g);
}

Test(passes, batchnorm_folds_into_conv)
{
    unsigned seed = 7;
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {1, 3, 6, 6}, dw[] = {4, 3, 3, 3}, db[] = {4};
    float w[108], b[4], xd[108];
    for (int i = 0; i < 108; i++) {
        w[i] = frand(&seed);
        xd[i] = frand(&seed);
    }
    for (int i = 0; i < 4; i++)
        b[i] = frand(&seed);
    qr_value *in[] = {tu_input(g, "x", 4, dx), tu_const_f32(g, "W", 4, dw, w), tu_const_f32(g, "Bc", 1, db, b)};
    qr_node *conv = tu_node(g, "Conv", "conv", 3, in, 1);
    const int64_t pads[] = {1, 1, 1, 1};
    tu_attr_ints(g, conv, "pads", 4, pads);
    qr_node *bn = add_bn(g, conv->out[0], 4, &seed);
    tu_output(g, bn->out[0]);
    qr_tensor x = {.dtype = QR_F32, .ndim = 4, .dims = {1, 3, 6, 6}, .data = xd};
    assert_one_conv_after_optimize(g, &x, "bn_out0");
}

/* paddle2onnx's Conv (no bias) -> Mul(scale, x) -> Add(x, bias [1,C,1,1]): one Conv. */
Test(passes, per_channel_mul_and_add_fold_into_conv)
{
    unsigned seed = 5;
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {1, 4, 5, 5}, dw[] = {4, 2, 3, 3}, ds[] = {1}, dt[] = {1, 4, 1, 1};
    float w[72], xd[100], sc[1] = {-1.75f}, t[4];
    for (int i = 0; i < 72; i++)
        w[i] = frand(&seed);
    for (int i = 0; i < 100; i++)
        xd[i] = frand(&seed);
    for (int i = 0; i < 4; i++)
        t[i] = frand(&seed) * 4;
    qr_value *in[] = {tu_input(g, "x", 4, dx), tu_const_f32(g, "W", 4, dw, w)};
    qr_node *conv = tu_node(g, "Conv", "conv", 2, in, 1);
    const int64_t pads[] = {1, 0, 1, 2}, strides[] = {2, 1};
    tu_attr_ints(g, conv, "pads", 4, pads);
    tu_attr_ints(g, conv, "strides", 2, strides);
    tu_attr_int(g, conv, "group", 2);
    qr_value *min[] = {tu_const_f32(g, "s", 1, ds, sc), conv->out[0]};
    qr_node *mul = tu_node(g, "Mul", "mul", 2, min, 1);
    qr_value *ain[] = {mul->out[0], tu_const_f32(g, "t", 4, dt, t)};
    qr_node *add = tu_node(g, "Add", "add", 2, ain, 1);
    tu_output(g, add->out[0]);
    qr_tensor x = {.dtype = QR_F32, .ndim = 4, .dims = {1, 4, 5, 5}, .data = xd};
    assert_one_conv_after_optimize(g, &x, "add_out0");
}

/* What is not a per-channel affine of one reader stays: an Add that varies over space, a Mul
 * that broadcasts the batch, a Conv output also read as a graph output. */
Test(passes, affine_that_is_not_per_channel_stays)
{
    unsigned seed = 9;
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {1, 2, 4, 4}, dw[] = {2, 2, 1, 1}, dsp[] = {1, 1, 4, 4}, dbt[] = {2, 2, 1, 1};
    float w[4], sp[16], bt[4];
    for (int i = 0; i < 4; i++) {
        w[i] = frand(&seed);
        bt[i] = frand(&seed);
    }
    for (int i = 0; i < 16; i++)
        sp[i] = frand(&seed);
    qr_value *x = tu_input(g, "x", 4, dx), *wv = tu_const_f32(g, "W", 4, dw, w);
    qr_value *c1[] = {x, wv}, *c2[] = {x, wv}, *c3[] = {x, wv};
    qr_node *conv1 = tu_node(g, "Conv", "conv1", 2, c1, 1), *conv2 = tu_node(g, "Conv", "conv2", 2, c2, 1);
    qr_node *conv3 = tu_node(g, "Conv", "conv3", 2, c3, 1);
    qr_value *a1[] = {conv1->out[0], tu_const_f32(g, "sp", 4, dsp, sp)};
    qr_value *a2[] = {tu_const_f32(g, "bt", 4, dbt, bt), conv2->out[0]};
    qr_node *add = tu_node(g, "Add", "add", 2, a1, 1), *mul = tu_node(g, "Mul", "mul", 2, a2, 1);
    qr_value *k[] = {conv3->out[0], tu_const_f32(g, "k", 1, (const int64_t[]){1}, (const float[]){3.f})};
    qr_node *mul3 = tu_node(g, "Mul", "mul3", 2, k, 1);
    tu_output(g, add->out[0]);
    tu_output(g, mul->out[0]);
    tu_output(g, conv3->out[0]);
    tu_output(g, mul3->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(count_op(g, "Conv"), 3);
    cr_assert_eq(count_op(g, "Add"), 1);
    cr_assert_eq(count_op(g, "Mul"), 2);
    qr_graph_free(g);
}

Test(passes, batchnorm_folds_into_gemm)
{
    unsigned seed = 11;
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {2, 5}, dw[] = {3, 5}, dc[] = {3};
    float w[15], c[3], xd[10];
    for (int i = 0; i < 15; i++)
        w[i] = frand(&seed);
    for (int i = 0; i < 10; i++)
        xd[i] = frand(&seed);
    for (int i = 0; i < 3; i++)
        c[i] = frand(&seed);
    qr_value *in[] = {tu_input(g, "x", 2, dx), tu_const_f32(g, "W", 2, dw, w), tu_const_f32(g, "C", 1, dc, c)};
    qr_node *gemm = tu_node(g, "Gemm", "gemm", 3, in, 1);
    tu_attr_int(g, gemm, "transB", 1);
    tu_attr_float(g, gemm, "beta", 0.5f);
    qr_node *bn = add_bn(g, gemm->out[0], 3, &seed);
    tu_output(g, bn->out[0]);
    qr_tensor x = {.dtype = QR_F32, .ndim = 2, .dims = {2, 5}, .data = xd}, before, after;
    run1(g, &x, &before);
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(g->n_nodes, 1);
    run1(g, &x, &after);
    assert_close(&after, &before);
    qr_tensor_free(&before);
    qr_tensor_free(&after);
    qr_graph_free(g);
}

/* Gemm's alpha and beta go into its constants: y = x (alpha W)^T + beta C, computed by hand. */
Test(passes, gemm_alpha_beta_fold_into_constants)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {1, 2}, dw[] = {2, 2}, dc[] = {2};
    float w[4] = {1, -2, 3, 4}, c[2] = {10, -20}, xd[2] = {-1, 2};
    qr_value *in[] = {tu_input(g, "x", 2, dx), tu_const_f32(g, "W", 2, dw, w), tu_const_f32(g, "C", 1, dc, c)};
    qr_node *gemm = tu_node(g, "Gemm", "gemm", 3, in, 1);
    tu_attr_int(g, gemm, "transB", 1);
    tu_attr_float(g, gemm, "alpha", -0.5f);
    tu_attr_float(g, gemm, "beta", 0.25f);
    tu_output(g, gemm->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_null(qr_node_attr(g->nodes[0], "alpha"));
    cr_assert_null(qr_node_attr(g->nodes[0], "beta"));
    qr_tensor x = {.dtype = QR_F32, .ndim = 2, .dims = {1, 2}, .data = xd}, y;
    run1(g, &x, &y);
    /* x W^T = [-1*1 + 2*-2, -1*3 + 2*4] = [-5, 5]; * -0.5 = [2.5, -2.5]; + 0.25 C = [5, -7.5] */
    cr_assert_float_eq(((float *)y.data)[0], 5.0f, 1e-6f);
    cr_assert_float_eq(((float *)y.data)[1], -7.5f, 1e-6f);
    qr_tensor_free(&y);
    qr_graph_free(g);
}

Test(passes, identity_and_dropout_removed_output_name_kept)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {4};
    qr_value *x = tu_input(g, "x", 1, d);
    qr_value *a = tu_node(g, "Identity", "id1", 1, &x, 1)->out[0];
    qr_value *b = tu_node(g, "Relu", "relu", 1, &a, 1)->out[0];
    qr_value *c = tu_node(g, "Dropout", "drop", 1, &b, 1)->out[0];
    tu_output(g, c);
    qr_error e;
    cr_assert_eq(qr_graph_toposort(g, &e), QR_OK);
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(g->n_nodes, 1);
    cr_assert_str_eq(g->nodes[0]->op, "Relu");
    cr_assert_eq(g->nodes[0]->in[0], x);
    cr_assert_str_eq(g->outputs[0]->name, "drop_out0");
    float xd[] = {-1, 2, -3, 4};
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {4}, .data = xd}, out;
    run1(g, &t, &out);
    cr_assert_float_eq(((float *)out.data)[1], 2.f, 0);
    cr_assert_float_eq(((float *)out.data)[2], 0.f, 0);
    qr_tensor_free(&out);
    qr_graph_free(g);
}

Test(passes, constants_and_shapes_fold)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {2, 3}, d1[] = {1};
    float one[] = {1.f}, two[] = {2.f};
    qr_value *x = tu_input(g, "x", 2, d);
    qr_value *ab[] = {tu_const_f32(g, "a", 1, d1, one), tu_const_f32(g, "b", 1, d1, two)};
    qr_value *sum = tu_node(g, "Add", "sum", 2, ab, 1)->out[0];
    qr_value *xm[] = {x, sum};
    qr_value *y = tu_node(g, "Mul", "mul", 2, xm, 1)->out[0];
    qr_value *shape = tu_node(g, "Shape", "shape", 1, &x, 1)->out[0];
    qr_value *yr[] = {y, shape};
    tu_output(g, tu_node(g, "Reshape", "reshape", 2, yr, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(count_op(g, "Add"), 0);
    cr_assert_eq(count_op(g, "Shape"), 0);
    cr_assert_eq(g->n_nodes, 2);
    cr_assert(sum->is_const);
    cr_assert_float_eq(((float *)sum->t.data)[0], 3.f, 0);
    cr_assert_eq(g->outputs[0]->t.ndim, 2, "shape inferred through the graph");
    cr_assert_eq(g->outputs[0]->t.dims[1], 3);
    qr_graph_free(g);
}

/* A shape only a run knows (Expand to a computed shape, as torchvision's ViT expands its class
 * token) leaves the shapes after it unknown, but not the element types: ONNX ties each of these
 * ops' output type to an input's (Concat, Add, Where's branches), or fixes it (Shape: i64,
 * Equal: bool, Cast: its `to`). The types below are the ONNX spec's, by hand. */
Test(passes, element_types_follow_where_shapes_are_unknown)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[] = {1, 4}, sd[] = {2};
    qr_value *x = tu_input(g, "x", 2, xd), *s = tu_input(g, "s", 1, sd);
    s->t.dtype = QR_I64;
    qr_value *in[3] = {x, s};
    qr_value *e = tu_node(g, "Expand", "expand", 2, in, 1)->out[0]; /* [?, 4]: s is known at run time only */
    in[0] = e, in[1] = x;
    qr_node *cat = tu_node(g, "Concat", "cat", 2, in, 1);
    tu_attr_int(g, cat, "axis", 0);
    in[0] = cat->out[0], in[1] = cat->out[0];
    qr_value *sum = tu_node(g, "Add", "add", 2, in, 1)->out[0];
    qr_value *shape = tu_node(g, "Shape", "shape", 1, &sum, 1)->out[0];
    in[0] = sum, in[1] = sum;
    qr_value *eq = tu_node(g, "Equal", "eq", 2, in, 1)->out[0];
    qr_node *cast = tu_node(g, "Cast", "cast", 1, &sum, 1);
    tu_attr_int(g, cast, "to", 6); /* INT32 */
    in[0] = eq, in[1] = sum, in[2] = cast->out[0];
    qr_value *w = tu_node(g, "Where", "where", 3, in, 1)->out[0];
    tu_output(g, w);
    tu_output(g, shape);
    g->opset = 17;
    qr_error err;
    cr_assert_eq(qr_pass_infer_and_fold(g, &err), QR_OK, "%s", err.msg);
    cr_expect_eq(e->t.dtype, QR_F32);
    cr_expect_eq(cat->out[0]->t.dtype, QR_F32);
    cr_expect_eq(sum->t.dtype, QR_F32);
    cr_expect_eq(shape->t.dtype, QR_I64);
    cr_expect_eq(eq->t.dtype, QR_BOOL);
    cr_expect_eq(cast->out[0]->t.dtype, QR_I32);
    cr_expect_eq(w->t.dtype, QR_F32, "Where: its X branch's type");
    cr_expect(!qr_value_shape_known(sum), "the shape stays unknown");
    qr_graph_free(g);
}

static qr_value *const_i64(qr_graph *g, const char *name, int n, const int64_t *data)
{
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {n}, .data = (void *)data};
    qr_value *v = qr_graph_new_value(g, name);
    qr_value_set_const(g, v, &t);
    return v;
}

/* Symbolic shapes bind the batch to a stand-in (7919, then 6007): Swin-T's patch embedding,
 * [N, 96, 56, 56] transposed to [N, 56, 56, 96], is 9.5 GB at N = 7919, over the size limit of a
 * tensor (8 GiB). Nothing is allocated at that size, so the limit does not apply: the Transpose's
 * shape is known, the batch named after the input's. By hand: the perm of the input's dims. */
Test(passes, symbolic_shapes_of_stand_ins_past_the_tensor_size_limit)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[] = {-1, 96, 56, 56}, perm[] = {0, 2, 3, 1};
    qr_value *x = tu_input(g, "x", 4, xd);
    x->dim_param[0] = "N";
    qr_node *t = tu_node(g, "Transpose", "t", 1, &x, 1);
    tu_attr_ints(g, t, "perm", 4, perm);
    qr_value *tv = t->out[0];
    qr_value *y = tu_node(g, "Relu", "relu", 1, &tv, 1)->out[0];
    tu_output(g, y);
    g->opset = 17;
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    const int64_t want[] = {-1, 56, 56, 96};
    for (const qr_value *v = tv;; v = y) {
        cr_assert_eq(v->t.ndim, 4, "%s: rank %d", v->name, v->t.ndim);
        for (int d = 0; d < 4; d++)
            cr_expect_eq(v->t.dims[d], want[d], "%s: dim %d is %lld", v->name, d, (long long)v->t.dims[d]);
        cr_expect(v->dim_param[0] && !strcmp(v->dim_param[0], "N"), "%s: the batch's name", v->name);
        if (v == y)
            break;
    }
    qr_graph_free(g);
}

/* torch.onnx's export of a slice assignment or an expand to a computed shape (Swin-T's attention
 * masks) computes indices with Range and shapes with Equal and Where on Shape's output: symbolic
 * shape inference evaluates those integer and boolean tensors. Here an index vector of 100
 * elements (Range over x's 100 columns, its last element 99, plus 1) and a Where on
 * Equal(Shape(x), -1) (the exporter's expand) give the Reshape's and the Expand's target shapes:
 * both [N, 100], by hand; a run at N = 3 agrees. */
Test(passes, symbolic_shapes_through_index_and_condition_tensors)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[] = {-1, 100}, zero[] = {0}, one[] = {1}, last[] = {99}, minus1[] = {-1, -1}, ones[] = {1, 1};
    qr_value *x = tu_input(g, "x", 2, xd);
    x->dim_param[0] = "N";
    qr_value *s = tu_node(g, "Shape", "shape", 1, &x, 1)->out[0];
    qr_value *in[3] = {s, const_i64(g, "one", 1, one)};
    qr_node *cols = tu_node(g, "Gather", "cols", 2, in, 1); /* [100] */
    tu_attr_int(g, cols, "axis", 0);
    qr_value *z = const_i64(g, "zero", 1, zero), *o = const_i64(g, "one_", 1, one);
    qr_node *sq[3];
    qr_value *scal[3], *src[3] = {z, cols->out[0], o};
    for (int i = 0; i < 3; i++) { /* Range takes scalars */
        qr_value *sin[2] = {src[i], const_i64(g, i == 0 ? "ax0" : i == 1 ? "ax1" : "ax2", 1, zero)};
        sq[i] = tu_node(g, "Squeeze", i == 0 ? "sq0" : i == 1 ? "sq1" : "sq2", 2, sin, 1);
        scal[i] = sq[i]->out[0];
    }
    qr_value *r = tu_node(g, "Range", "range", 3, scal, 1)->out[0]; /* 0 .. 99: 100 elements */
    in[0] = r, in[1] = const_i64(g, "last", 1, last);
    qr_node *gl = tu_node(g, "Gather", "last_of_range", 2, in, 1); /* [99] */
    tu_attr_int(g, gl, "axis", 0);
    in[0] = gl->out[0], in[1] = const_i64(g, "plus", 1, one);
    qr_value *n = tu_node(g, "Add", "count", 2, in, 1)->out[0]; /* [100] */
    in[0] = const_i64(g, "batch", 1, (const int64_t[]){-1}), in[1] = n;
    qr_node *cat = tu_node(g, "Concat", "target", 2, in, 1);
    tu_attr_int(g, cat, "axis", 0);
    in[0] = x, in[1] = cat->out[0];
    qr_value *re = tu_node(g, "Reshape", "reshape", 2, in, 1)->out[0];
    in[0] = s, in[1] = const_i64(g, "minus1", 2, minus1);
    qr_value *eq = tu_node(g, "Equal", "eq", 2, in, 1)->out[0];
    in[0] = eq, in[1] = const_i64(g, "ones", 2, ones), in[2] = s;
    qr_value *w = tu_node(g, "Where", "where", 3, in, 1)->out[0];
    in[0] = re, in[1] = w;
    qr_value *ex = tu_node(g, "Expand", "expand", 2, in, 1)->out[0];
    tu_output(g, ex);
    g->opset = 17;
    qr_error e;
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    for (const qr_value *v = re;; v = ex) {
        cr_assert_eq(v->t.ndim, 2, "%s: rank %d", v->name, v->t.ndim);
        cr_expect_eq(v->t.dims[0], -1, "%s: the batch", v->name);
        cr_expect_eq(v->t.dims[1], 100, "%s: dim 1 is %lld", v->name, (long long)v->t.dims[1]);
        if (v == ex)
            break;
    }
    float data[300];
    for (int i = 0; i < 300; i++)
        data[i] = (float)i;
    qr_tensor xin = {.dtype = QR_F32, .ndim = 2, .dims = {3, 100}, .data = data}, out;
    run1(g, &xin, &out);
    cr_assert_eq(out.ndim, 2);
    cr_expect_eq(out.dims[0], 3);
    cr_expect_eq(out.dims[1], 100);
    cr_expect_float_eq(((float *)out.data)[299], 299.f, 0);
    qr_tensor_free(&out);
    qr_graph_free(g);
}
