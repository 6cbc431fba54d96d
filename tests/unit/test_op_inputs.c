/* The op table's input declarations (qr_op_def.ins), checked in one place:
 * an input left out ("") where the op requires one is refused at load with a
 * message naming it, and every op of the table survives a sweep of absent
 * inputs, wrong types and wrong ranks (an error, never a crash). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "onnx_import.h"
#include "op.h"
#include "testutil.h"

/* A node of op d with n_in inputs, input `absent` left out (-1: none). */
static qr_node *make_node(qr_graph *g, const qr_op_def *d, int n_in, int absent)
{
    qr_node *n = qr_graph_add_node(g, d->name, "n", n_in, d->min_out > 0 ? d->min_out : 1);
    n->def = d;
    n->domain = d->domain;
    n->opset = 18;
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        n->in[i] = i == absent ? NULL : qr_graph_new_value(g, name);
    }
    return n;
}

Test(op_inputs, every_required_input_is_declared)
{
    /* Ops whose ONNX schema has required inputs past min_in (which older opsets lack). */
    static const struct { const char *op; int pos; } required[] = {
        {"Slice", 1}, {"Slice", 2}, {"Pad", 1}, {"Conv", 1}, {"Gather", 1}, {"Range", 2}, {"QuantizeLinear", 1},
        {"QLinearConv", 7}, {"Concat", 2}, {"Sum", 3}, {"Where", 1}, {"ConvInteger", 1}, {"MaxUnpool", 1},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const qr_op_def *d = qr_op_find("", required[i].op);
        cr_assert(d, "%s", required[i].op);
        qr_graph *g = qr_graph_new();
        int n_in = required[i].pos + 2 <= d->max_in ? required[i].pos + 2 : d->max_in;
        qr_node *n = make_node(g, d, n_in, required[i].pos);
        qr_error e = {{0}};
        cr_expect_eq(qr_op_check_present(n, &e), QR_ERR, "%s: input %d left out was accepted", required[i].op,
                     required[i].pos);
        cr_expect(strstr(e.msg, "is required but left out"), "%s: %s", required[i].op, e.msg);
        qr_graph_free(g);
    }
    /* Optional inputs may be left out. */
    static const struct { const char *op; int pos, n_in; } optional[] = {
        {"Resize", 1, 3}, {"Resize", 2, 4}, {"Clip", 1, 3}, {"Slice", 3, 5}, {"Pad", 2, 4}, {"Conv", 2, 3},
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        const qr_op_def *d = qr_op_find("", optional[i].op);
        qr_graph *g = qr_graph_new();
        qr_node *n = make_node(g, d, optional[i].n_in, optional[i].pos);
        qr_error e = {{0}};
        cr_expect_eq(qr_op_check_present(n, &e), QR_OK, "%s: optional input %d refused: %s", optional[i].op,
                     optional[i].pos, e.msg);
        qr_graph_free(g);
    }
}

/* Every op, every arity, each input left out in turn, inputs of one of several
 * types and ranks: infer either refuses or gives shapes, and then run either
 * refuses or fills the outputs. Under ASan (make test-asan) this also proves
 * no out-of-bounds access. */
Test(op_inputs, sweep_every_op, .timeout = 300)
{
    static const qr_dtype types[] = {QR_F32, QR_I64, QR_U8, QR_BOOL, QR_I32};
    static const int ranks[] = {0, 1, 2, 4};
    const qr_op_def *const *defs;
    int nops = qr_op_list(&defs);
    long tried = 0, inferred = 0;
    for (int oi = 0; oi < nops; oi++) {
        const qr_op_def *d = defs[oi];
        if (strcmp(d->domain ? d->domain : "", "") != 0)
            continue; /* the quantizer's own ops run only on graphs it builds */
        int max_in = d->max_in < 6 ? d->max_in : 6;
        for (int n_in = d->min_in; n_in <= max_in; n_in++)
            for (int absent = -1; absent < n_in; absent++)
                for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                    for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
                        qr_graph *g = qr_graph_new();
                        qr_node *n = make_node(g, d, n_in, absent);
                        qr_tensor in[8] = {{0}}, out[16] = {{0}};
                        const qr_tensor *inp[8] = {0};
                        qr_tensor *outp[16];
                        for (int i = 0; i < n_in; i++) {
                            /* Mixed: the first input takes the sweep's type, the others cycle. */
                            in[i].dtype = types[(ti + (size_t)i * (ri & 1)) % (sizeof types / sizeof types[0])];
                            in[i].ndim = ranks[(ri + (size_t)(i && ri == 3)) % 4];
                            for (int k = 0; k < in[i].ndim; k++)
                                in[i].dims[k] = 2;
                            cr_assert_eq(qr_tensor_alloc(&in[i], NULL), QR_OK);
                            for (int64_t k = 0; k < qr_tensor_numel(&in[i]); k++)
                                qr_set_f64(in[i].data, in[i].dtype, k, 1);
                            inp[i] = i == absent ? NULL : &in[i];
                        }
                        for (int j = 0; j < 16; j++)
                            outp[j] = &out[j];
                        qr_error e = {{0}};
                        qr_kctx k = {.node = n, .opset = 18, .n_in = n_in, .n_out = n->n_out, .in = inp,
                                     .out = outp, .err = &e};
                        tried++;
                        if (qr_op_infer(&k) == QR_OK) {
                            inferred++;
                            int ok = 1;
                            for (int j = 0; j < n->n_out && ok; j++)
                                ok = qr_tensor_check_shape(&out[j], &e) == QR_OK && qr_tensor_numel(&out[j]) < 4096 &&
                                     qr_tensor_alloc(&out[j], &e) == QR_OK;
                            if (ok)
                                qr_op_run(&k);
                        }
                        for (int j = 0; j < 16; j++)
                            qr_tensor_free(&out[j]);
                        for (int i = 0; i < n_in; i++)
                            qr_tensor_free(&in[i]);
                        qr_graph_free(g);
                    }
    }
    cr_log_info("%ld combinations, %ld inferred", tried, inferred);
    cr_assert_gt(inferred, 100);
}

/* Type codes in int64 attributes are range-checked, not narrowed to int:
 * Cast to 2^32 + 1 is not a cast to float, QuantizeLinear's output_dtype
 * 2^32 + 2 is not uint8. */
Test(op_inputs, type_codes_are_not_truncated)
{
    static const struct { const char *op, *attr; int64_t v; } cases[] = {
        {"Cast", "to", ((int64_t)1 << 32) + 1},
        {"QuantizeLinear", "output_dtype", ((int64_t)1 << 32) + 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qr_graph *g = qr_graph_new();
        int64_t d[1] = {4};
        qr_value *in[2] = {tu_input(g, "x", 1, d), NULL};
        float one = 1;
        in[1] = tu_const_f32(g, "s", 0, d, &one);
        const qr_op_def *def = qr_op_find("", cases[c].op);
        qr_node *n = tu_node(g, cases[c].op, "n", def->min_in, in, 1);
        tu_attr_int(g, n, cases[c].attr, cases[c].v);
        const qr_tensor *ins[2] = {&in[0]->t, &in[1]->t};
        qr_tensor out = {0}, *outp = &out;
        qr_error e = {{0}};
        qr_kctx k = {.node = n, .opset = 21, .n_in = def->min_in, .n_out = 1, .in = ins, .out = &outp, .err = &e};
        cr_expect_eq(qr_op_infer(&k), QR_ERR, "%s %s=%lld accepted as %s", cases[c].op, cases[c].attr,
                     (long long)cases[c].v, qr_dtype_name(out.dtype));
        qr_graph_free(g);
    }
}
