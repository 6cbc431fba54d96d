/* The pattern matcher on graphs built by hand, with patterns compiled from QRL. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "match.h"
#include "testutil.h"

static const char *src =
    "kernel k3(x: tensor<u8>, xs: f32, xz: i32, w: tensor<i8>, ws: f32[], wz: i32[], b: tensor<i32>,\n"
    "          y: tensor<u8>, ys: f32, yz: i32) { }\n"
    "kernel k1(x: tensor<u8>, xs: f32, xz: i32, y: tensor<u8>, ys: f32, yz: i32) { }\n"
    "pattern conv_act {\n"
    "  match {\n"
    "    c = Conv(x, w, b?) where const(w)\n"
    "    y = Relu(c) | Clip(c, _, _)\n"
    "  }\n"
    "  quantize x: activation, w: weight(axis = 0), b: bias(x, w), y: activation\n"
    "  lower y = k3(x, w, b)\n"
    "}\n"
    "pattern conv_hs {\n"
    "  match {\n"
    "    c = Conv(x, w, b?) where const(w)\n"
    "    s = HardSigmoid(c)\n"
    "    y = Mul(c, s) | Mul(s, c)\n"
    "  }\n"
    "  quantize x: activation, w: weight(axis = 0), b: bias(x, w), y: activation\n"
    "  lower y = k3(x, w, b)\n"
    "}\n"
    "pattern relu_only {\n"
    "  match y = Relu(x)\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = k1(x)\n"
    "}\n";

static qrl_module *module(void)
{
    qc_unit *u = qc_unit_new(NULL);
    qc_unit_load_text(u, "/tmp/match_test.qrl", src, strlen(src));
    if (!u->diags.errors)
        qc_check(u);
    qrl_module *m = u->diags.errors ? NULL : qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    cr_assert_eq(u->diags.errors, 0, "%s", u->diags.n ? u->diags.v[0].msg : "");
    qc_unit_free(u);
    cr_assert(m);
    return m;
}

typedef struct found {
    qr_match m[8];
    int n;
} found;

static int collect(void *user, const qr_match *m)
{
    found *f = user;
    if (f->n < 8)
        f->m[f->n++] = *m;
    return 1;
}

/* x -> Conv(w, [b]) -> Relu -> y, optionally with the conv output read twice */
static qr_graph *conv_relu(int with_bias, int const_w, int shared)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {3, 2, 1, 1}, bd[1] = {3};
    float wv[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {0};
    qr_value *x = tu_input(g, "x", 4, xd);
    qr_value *w = const_w ? tu_const_f32(g, "w", 4, wd, wv) : tu_input(g, "w", 4, wd);
    qr_value *ins[3] = {x, w, with_bias ? tu_const_f32(g, "b", 1, bd, bv) : NULL};
    qr_value *c = tu_node(g, "Conv", "conv", with_bias ? 3 : 2, ins, 1)->out[0];
    qr_value *y = tu_node(g, "Relu", "relu", 1, &c, 1)->out[0];
    tu_output(g, y);
    if (shared) {
        qr_value *z = tu_node(g, "Neg", "neg", 1, &c, 1)->out[0];
        tu_output(g, z);
    }
    return g;
}

static int run(qrl_module *mod, qr_graph *g, const char *pattern, unsigned char *claimed, found *f)
{
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_error e;
    int n = qr_match_pattern(g, qr_module_pattern(mod, pattern), claimed, &rt, collect, f, &e);
    cr_assert_geq(n, 0, "%s", e.msg);
    return n;
}

Test(match, fused_conv_relu_with_bias)
{
    qrl_module *mod = module();
    qr_graph *g = conv_relu(1, 1, 0);
    unsigned char claimed[64] = {0};
    found f = {0};
    cr_assert_eq(run(mod, g, "conv_act", claimed, &f), 1);
    const qr_pattern *p = qr_module_pattern(mod, "conv_act");
    /* value table: c, y (produced), then x, w, b */
    const char *want[] = {"c", "y", "x", "w", "b"};
    cr_assert_eq(p->nvalues, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_str_eq(p->values[i].name, want[i]);
    cr_assert_str_eq(f.m[0].values[2]->name, "x");
    cr_assert_str_eq(f.m[0].values[3]->name, "w");
    cr_assert_str_eq(f.m[0].values[4]->name, "b");
    cr_assert_eq(f.m[0].nnodes, 2);
    cr_assert_str_eq(f.m[0].nodes[1]->op, "Relu");
    /* claimed: the plain Relu pattern finds nothing left */
    found f2 = {0};
    cr_assert_eq(run(mod, g, "relu_only", claimed, &f2), 0);
    qr_graph_free(g);
    qr_module_free(mod);
}

Test(match, optional_bias_missing)
{
    qrl_module *mod = module();
    qr_graph *g = conv_relu(0, 1, 0);
    unsigned char claimed[64] = {0};
    found f = {0};
    cr_assert_eq(run(mod, g, "conv_act", claimed, &f), 1);
    cr_assert_null(f.m[0].values[4]);
    qr_graph_free(g);
    qr_module_free(mod);
}

Test(match, where_rejects_non_constant_weight)
{
    qrl_module *mod = module();
    qr_graph *g = conv_relu(1, 0, 0);
    unsigned char claimed[64] = {0};
    found f = {0};
    cr_assert_eq(run(mod, g, "conv_act", claimed, &f), 0);
    cr_assert_eq(run(mod, g, "relu_only", claimed, &f), 1);
    qr_graph_free(g);
    qr_module_free(mod);
}

Test(match, shared_intermediate_is_not_fused)
{
    qrl_module *mod = module();
    qr_graph *g = conv_relu(1, 1, 1);
    unsigned char claimed[64] = {0};
    found f = {0};
    cr_assert_eq(run(mod, g, "conv_act", claimed, &f), 0, "the conv output also feeds Neg");
    qr_graph_free(g);
    qr_module_free(mod);
}

/* x -> Conv -> c; y = c * HardSigmoid(c) (Mul's operands in either order); with shared, c also
 * feeds a Neg */
static qr_graph *conv_hardswish(int swapped, int shared)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {3, 2, 1, 1};
    float wv[6] = {1, 2, 3, 4, 5, 6};
    qr_value *x = tu_input(g, "x", 4, xd);
    qr_value *ins[2] = {x, tu_const_f32(g, "w", 4, wd, wv)};
    qr_value *c = tu_node(g, "Conv", "conv", 2, ins, 1)->out[0];
    qr_value *s = tu_node(g, "HardSigmoid", "hs", 1, &c, 1)->out[0];
    qr_value *m[2] = {swapped ? s : c, swapped ? c : s};
    tu_output(g, tu_node(g, "Mul", "mul", 2, m, 1)->out[0]);
    if (shared)
        tu_output(g, tu_node(g, "Neg", "neg", 1, &c, 1)->out[0]);
    return g;
}

/* A value the match computes and reads twice itself (the Conv's c, read by HardSigmoid and Mul):
 * fused, all three nodes; read by a node outside the match too: not fused. */
Test(match, intermediate_read_twice_inside_the_match_is_fused)
{
    qrl_module *mod = module();
    for (int swapped = 0; swapped < 2; swapped++) {
        qr_graph *g = conv_hardswish(swapped, 0);
        unsigned char claimed[64] = {0};
        found f = {0};
        cr_assert_eq(run(mod, g, "conv_hs", claimed, &f), 1, "swapped %d", swapped);
        cr_assert_eq(f.m[0].nnodes, 3);
        cr_assert_str_eq(f.m[0].nodes[2]->op, "Mul");
        qr_graph_free(g);
        g = conv_hardswish(swapped, 1);
        memset(claimed, 0, sizeof claimed);
        cr_assert_eq(run(mod, g, "conv_hs", claimed, &f), 0, "the conv output also feeds Neg (swapped %d)", swapped);
        qr_graph_free(g);
    }
    qr_module_free(mod);
}

/* x -> Relu -> ... -> Relu (n of them) -> y */
static qr_graph *relu_chain(int n)
{
    qr_graph *g = qr_graph_new();
    const int64_t xd[2] = {1, 4};
    qr_value *v = tu_input(g, "x", 2, xd);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "relu%d", i);
        v = tu_node(g, "Relu", name, 1, &v, 1)->out[0];
    }
    tu_output(g, v);
    return g;
}

/* A chain of 16 Relus, the most a pattern matches (QRL_PATTERN_MAX_NODES):
 * all of them, root last. */
Test(match, pattern_of_sixteen_nodes_matches_whole_chain)
{
    char text[2048] = "kernel k1(x: tensor<u8>, xs: f32, xz: i32, y: tensor<u8>, ys: f32, yz: i32) { }\n"
                      "pattern chain {\n  match {\n";
    size_t at = strlen(text);
    for (int i = 0; i < QRL_PATTERN_MAX_NODES; i++)
        at += (size_t)snprintf(text + at, sizeof text - at, "    %s%d = Relu(%s%d)\n", "r", i + 1, i ? "r" : "x", i);
    snprintf(text + at, sizeof text - at,
             "  }\n  quantize x0: activation, r%d: activation\n  lower r%d = k1(x0)\n}\n", QRL_PATTERN_MAX_NODES,
             QRL_PATTERN_MAX_NODES);
    qc_unit *u = qc_unit_new(NULL);
    qc_unit_load_text(u, "/tmp/match_chain.qrl", text, strlen(text));
    if (!u->diags.errors)
        qc_check(u);
    qrl_module *mod = u->diags.errors ? NULL : qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    cr_assert_eq(u->diags.errors, 0, "%s", u->diags.n ? u->diags.v[0].msg : "");
    qc_unit_free(u);
    cr_assert(mod);
    qr_graph *g = relu_chain(QRL_PATTERN_MAX_NODES);
    unsigned char claimed[64] = {0};
    found f = {0};
    cr_assert_eq(run(mod, g, "chain", claimed, &f), 1);
    cr_assert_eq(f.m[0].nnodes, QRL_PATTERN_MAX_NODES);
    cr_assert_str_eq(f.m[0].nodes[QRL_PATTERN_MAX_NODES - 1]->name, "relu15", "the root is last");
    cr_assert_str_eq(f.m[0].values[QRL_PATTERN_MAX_NODES]->name, "x", "the chain's input is bound");
    for (int i = 0; i < g->n_nodes; i++)
        cr_assert(claimed[g->nodes[i]->id], "%s is claimed", g->nodes[i]->name);
    qr_graph_free(g);
    qr_module_free(mod);
}

/* A pattern of 17 nodes (a module the checker did not see, which refuses
 * it): the matcher wrote the root past qr_match.nodes[16] (UBSan: index 16
 * out of bounds; a plain build overwrote nnodes). Now an error value. */
Test(match, pattern_over_the_node_limit_is_an_error)
{
    enum { N = QRL_PATTERN_MAX_NODES + 1 };
    qr_pat_node nodes[N];
    qr_pat_value values[N + 1];
    qr_pat_input inputs[N];
    for (int i = 0; i < N; i++) { /* value i + 1 = Relu(value i); value 0 is x */
        inputs[i] = (qr_pat_input){.value = i, .optional = 0};
        nodes[i] = (qr_pat_node){.out = i + 1, .ops = "Relu", .inputs = &inputs[i], .ninputs = 1};
    }
    for (int i = 0; i <= N; i++)
        values[i] = (qr_pat_value){.name = "v", .role = QR_ROLE_NONE, .axis = -1, .a = -1, .b = -1};
    qr_pattern p = {.name = "chain17", .numerics = "", .priority = -1, .values = values, .nvalues = N + 1,
                    .nodes = nodes, .nnodes = N};
    qr_graph *g = relu_chain(N + 2);
    unsigned char claimed[64] = {0};
    found f = {0};
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_error e;
    cr_assert_eq(qr_match_pattern(g, &p, claimed, &rt, collect, &f, &e), -1);
    cr_assert(strstr(e.msg, "pattern 'chain17' is too large") && strstr(e.msg, "17 nodes"), "%s", e.msg);
    qr_graph_free(g);
}

/* attr_ints hands out at most QRL_MATCH_ARRAYS slots per evaluation: the same attribute read again
 * keeps its slot (a body runs once per integer), one more distinct attribute is an error value
 * (len 0, and qr_match_status says so), never a slot overwritten (once the 9th replaced the 1st). */
Test(match, attr_ints_past_the_slots_is_an_error_not_an_overwrite)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {4};
    qr_value *x = tu_input(g, "x", 1, d);
    qr_node *n = tu_node(g, "Relu", "r", 1, &x, 1);
    for (int i = 0; i <= QRL_MATCH_ARRAYS; i++) {
        char name[16];
        int64_t v[3] = {i, i, i};
        snprintf(name, sizeof name, "a%d", i);
        tu_attr_ints(g, n, name, 1 + i % 3, v);
    }
    qr_aff_view av;
    qr_aff_view_init(&av, g, n);
    const qrl_imports *im = qr_recipe_imports();
    qrl_array *first = im->attr_ints(&av.mt, -1, "a0");
    cr_assert_eq(first->len, 1);
    for (int k = 0; k < 100; k++) /* rereading holds one slot */
        cr_assert_eq(im->attr_ints(&av.mt, -1, "a0"), first);
    qr_error e;
    for (int i = 1; i < QRL_MATCH_ARRAYS; i++) {
        char name[16];
        snprintf(name, sizeof name, "a%d", i);
        qrl_array *a = im->attr_ints(&av.mt, -1, name);
        cr_assert_eq(a->len, 1 + i % 3, "%s", name);
        cr_assert_eq(((int64_t *)a->data)[0], i, "%s", name);
    }
    cr_assert_eq(qr_match_status(&av.mt, &e), QR_OK);
    char last[16];
    snprintf(last, sizeof last, "a%d", QRL_MATCH_ARRAYS);
    qrl_array *over = im->attr_ints(&av.mt, -1, last);
    cr_assert_eq(over->len, 0, "the attribute past the slots reads empty");
    cr_assert_eq(first->len, 1, "the first slot kept");
    cr_assert_eq(((int64_t *)first->data)[0], 0, "the first slot kept");
    cr_assert_eq(qr_match_status(&av.mt, &e), QR_ERR);
    cr_assert(strstr(e.msg, "more than 8 int-list attributes"), "%s", e.msg);
    qr_graph_free(g);
}

/* A module registering more parameters than its calibrator declared fails to load (the params array
 * has room for the declared count: the extra ones were written past it). */
static void one_param_three_given(qrl_module *m, const qrl_imports *im)
{
    im->add_calibrator(m, "c", 1, 8, NULL, NULL, NULL, NULL, NULL);
    im->add_param(m, "c", "p0", 0);
    im->add_param(m, "c", "p1", 0);
    im->add_param(m, "c", "p2", 0);
}

Test(match, more_calibrator_params_than_declared_is_an_error)
{
    qrl_module *m = NULL;
    qr_error e;
    cr_assert_eq(qr_module_load(one_param_three_given, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_ERR);
    cr_assert(strstr(e.msg, "more parameters than the calibrator declared"), "%s", e.msg);
    cr_assert_null(m);
}
