/* Loading, checking and planning stay linear or n log n on large generated
 * graphs (QRL-G item 3): a 100,000-node chain stored in reverse order took
 * 95 s to sort. The bounds are generous (CI machines, ASan builds): a
 * quadratic pass takes minutes here, a linear one well under a second. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"
#include "onnx.pb-c.h"
#include "onnx_import.h"
#include "op.h"
#include "passes.h"
#include "testutil.h"

#define BIG 100000
#define BOUND_S 20.0

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static Onnx__ValueInfoProto *vinfo(const char *name)
{
    Onnx__ValueInfoProto *v = calloc(1, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = strdup(name);
    Onnx__TypeProto *tp = calloc(1, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = calloc(1, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    Onnx__TensorShapeProto *sh = calloc(1, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    sh->n_dim = 1;
    sh->dim = calloc(1, sizeof *sh->dim);
    sh->dim[0] = calloc(1, sizeof **sh->dim);
    onnx__tensor_shape_proto__dimension__init(sh->dim[0]);
    sh->dim[0]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    sh->dim[0]->dim_value = 4;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

/* x -> op -> v0 -> op -> ... -> y, n nodes, stored last node first when reversed. */
static unsigned char *chain_model(int n, const char *op, int reversed, size_t *len)
{
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    Onnx__OperatorSetIdProto os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = "";
    os.has_version = 1;
    os.version = 13;
    Onnx__OperatorSetIdProto *osp = &os;
    m.n_opset_import = 1;
    m.opset_import = &osp;
    m.has_ir_version = 1;
    m.ir_version = 8;
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "chain";
    g.n_node = (size_t)n;
    g.node = calloc((size_t)n, sizeof *g.node);
    for (int i = 0; i < n; i++) {
        Onnx__NodeProto *nd = calloc(1, sizeof *nd);
        onnx__node_proto__init(nd);
        nd->op_type = strdup(op);
        char buf[32];
        snprintf(buf, sizeof buf, "n%d", i);
        nd->name = strdup(buf);
        nd->n_input = nd->n_output = 1;
        nd->input = calloc(1, sizeof(char *));
        nd->output = calloc(1, sizeof(char *));
        snprintf(buf, sizeof buf, "v%d", i - 1);
        nd->input[0] = strdup(i == 0 ? "x" : buf);
        snprintf(buf, sizeof buf, "v%d", i);
        nd->output[0] = strdup(i == n - 1 ? "y" : buf);
        g.node[reversed ? n - 1 - i : i] = nd;
    }
    Onnx__ValueInfoProto *in = vinfo("x"), *out = vinfo("y");
    g.n_input = g.n_output = 1;
    g.input = &in;
    g.output = &out;
    m.graph = &g;
    *len = onnx__model_proto__get_packed_size(&m);
    unsigned char *buf = malloc(*len);
    onnx__model_proto__pack(&m, buf);
    for (int i = 0; i < n; i++)
        onnx__node_proto__free_unpacked(g.node[i], NULL);
    free(g.node);
    onnx__value_info_proto__free_unpacked(in, NULL);
    onnx__value_info_proto__free_unpacked(out, NULL);
    return buf;
}

/* Load (sort), optimize and run: each step timed against the bound. */
static void load_optimize_run(const char *op, int reversed)
{
    size_t len;
    unsigned char *buf = chain_model(BIG, op, reversed, &len);
    qr_graph *g;
    qr_error e;
    double t0 = now();
    cr_assert_eq(qr_onnx_load_buffer(buf, len, "chain.onnx", &g, &e), QR_OK, "%s", e.msg);
    double t1 = now();
    cr_assert_eq(qr_graph_optimize(g, &e), QR_OK, "%s", e.msg);
    double t2 = now();
    qr_exec *x;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    float xv[4] = {-1, 2, -3, 4};
    qr_tensor in = {.dtype = QR_F32, .ndim = 1, .dims = {4}, .data = xv}, out;
    cr_assert_eq(qr_exec_run(x, &in, &out, &e), QR_OK, "%s", e.msg);
    double t3 = now();
    cr_assert_float_eq(((float *)out.data)[1], 2.0f, 0);
    cr_log_info("%s chain of %d%s: load %.2f s, optimize %.2f s, plan+run %.2f s", op, BIG,
                reversed ? " (reversed)" : "", t1 - t0, t2 - t1, t3 - t2);
    cr_expect_lt(t1 - t0, BOUND_S, "loading took %.1f s", t1 - t0);
    cr_expect_lt(t2 - t1, BOUND_S, "optimizing took %.1f s", t2 - t1);
    cr_expect_lt(t3 - t2, BOUND_S, "planning and running took %.1f s", t3 - t2);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
    free(buf);
}

Test(large_graphs, reversed_relu_chain, .timeout = 300) { load_optimize_run("Relu", 1); }
Test(large_graphs, identity_chain, .timeout = 300) { load_optimize_run("Identity", 0); }

/* Many values alive at once (every node's output is a graph output): the
 * planner's first-fit layout must not rescan every live block per node. */
Test(large_graphs, many_live_outputs, .timeout = 300)
{
    qr_graph *g = qr_graph_new();
    int64_t d[1] = {4};
    qr_value *xin = tu_input(g, "x", 1, d);
    g->inputs = qr_arena_alloc(&g->arena, sizeof *g->inputs);
    g->inputs[0] = xin;
    g->n_inputs = 1;
    enum { N = 200000 };
    g->outputs = qr_arena_alloc(&g->arena, sizeof *g->outputs * N);
    qr_value *prev = xin;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%d", i);
        qr_node *n = tu_node(g, "Relu", name, 1, &prev, 1);
        n->out[0]->t = xin->t;
        g->outputs[g->n_outputs++] = n->out[0];
        n->out[0]->is_output = 1;
        prev = n->out[0];
    }
    qr_error e;
    qr_exec *x;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    float xv[4] = {1, 2, 3, 4};
    qr_tensor in = {.dtype = QR_F32, .ndim = 1, .dims = {4}, .data = xv};
    qr_tensor *out = calloc(N, sizeof *out);
    double t0 = now();
    cr_assert_eq(qr_exec_run(x, &in, out, &e), QR_OK, "%s", e.msg);
    double t1 = now();
    cr_log_info("%d live outputs: plan+run %.2f s", N, t1 - t0);
    cr_expect_lt(t1 - t0, BOUND_S, "planning took %.1f s", t1 - t0);
    for (int i = 0; i < N; i++)
        qr_tensor_free(&out[i]);
    free(out);
    qr_exec_free(x);
    qr_graph_free(g);
}
