/* Executor: liveness memory plan, observer hook, input checks, re-planning on
 * new shapes, dynamic mode for data-dependent shapes. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "op.h"
#include "options.h"
#include "ops/sconv.h"
#include "ops/sgemm.h"
#include "passes.h"
#include "testutil.h"

#define N 1000

/* x -> Relu -> Neg -> Relu -> ... (depth nodes) */
static qr_graph *chain(int depth)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {N};
    qr_value *v = tu_input(g, "x", 1, d);
    for (int i = 0; i < depth; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        v = tu_node(g, i % 2 ? "Neg" : "Relu", name, 1, &v, 1)->out[0];
    }
    tu_output(g, v);
    return g;
}

Test(exec, memory_plan_reuses_buffers)
{
    qr_graph *g = chain(10);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    float in[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)(i - 500);
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = in}, out;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_OK, "%s", e.msg);
    /* Relu then Neg five times: -relu(x) on the first pair, then relu(-relu) = 0 ... */
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(((float *)out.data)[i], -0.f, 0, "element %d", i);
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert_eq(s.dynamic, 0);
    cr_assert_geq(s.sum_bytes, 10 * N * 4);
    cr_assert_leq(s.arena_bytes, N * 4 + 64, "arena %zu bytes for an elementwise chain: one buffer, reused in place",
                  s.arena_bytes);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

/* x -> Relu -> Neg over m floats, its executor made, and an input of both signs: (i % k) - off. */
static qr_exec *relu_neg_exec(int64_t m, int k, float off, qr_graph **g, float **in)
{
    *g = qr_graph_new();
    const int64_t d[] = {m};
    qr_value *v = tu_input(*g, "x", 1, d);
    v = tu_node(*g, "Relu", "r", 1, &v, 1)->out[0];
    v = tu_node(*g, "Neg", "n", 1, &v, 1)->out[0];
    tu_output(*g, v);
    *in = malloc(sizeof **in * (size_t)m);
    cr_assert(*in);
    for (int64_t i = 0; i < m; i++)
        (*in)[i] = (float)(i % k) - off;
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(*g, NULL, &x, &e), QR_OK, "%s", e.msg);
    return x;
}

/* An arena of 1 MiB or more is a mapping of its own, outside the heap: qrl keeps large blocks in
 * the heap (M_MMAP_THRESHOLD 1 GiB, cli/main.c), where a freed arena stayed resident as a hole the
 * next allocations only partly filled (PP-OCR det's effects: 90 MB free in the heap at their peak,
 * docs/quantizer.md stop 51). Under qrl's settings a run of a 4 MB arena grows the heap in use by its
 * output's copy (4 MB, the caller's) and small things, not by the arena too (8 MB). */
Test(exec, a_large_arena_is_not_in_the_heap)
{
    enum { M = 1 << 20 };
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    qr_exec_free_spare();
    qr_graph *g;
    float *in;
    qr_exec *x = relu_neg_exec(M, 7, 3.f, &g, &in);
    qr_error e;
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {M}, .data = in}, out;
    size_t before = mallinfo2().uordblks;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_OK, "%s", e.msg);
    size_t grew = mallinfo2().uordblks - before;
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert_geq(s.arena_bytes, (size_t)M * 4, "arena %zu", s.arena_bytes);
    for (int i = 0; i < M; i++)
        cr_assert_eq(((float *)out.data)[i], -fmaxf(in[i], 0.f), "element %d", i);
    cr_assert_lt(grew, qr_tensor_nbytes(&out) + s.arena_bytes / 2, "the heap grew %zu bytes for a %zu-byte arena",
                 grew, s.arena_bytes);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_exec_free_spare();
    qr_graph_free(g);
    free(in);
}

static qr_value *const_i64(qr_graph *g, const char *name, int64_t n, const int64_t *vals)
{
    qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {n}, .data = (void *)vals};
    qr_value *v = qr_graph_new_value(g, name);
    qr_value_set_const(g, v, &t);
    return v;
}

/* Relu -> Reshape [N] to [N/10, 10] -> Neg -> Reshape back: the Reshapes take their input's
 * buffer (QR_INPLACE_VIEW), so the arena stays one buffer and the values pass unchanged. */
Test(exec, reshape_shares_its_input_buffer)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {N}, two[] = {N / 10, 10}, one[] = {N};
    qr_value *v = tu_input(g, "x", 1, d);
    v = tu_node(g, "Relu", "r0", 1, &v, 1)->out[0];
    qr_value *in[2] = {v, const_i64(g, "s2", 2, two)};
    v = tu_node(g, "Reshape", "reshape0", 2, in, 1)->out[0];
    v = tu_node(g, "Neg", "neg", 1, &v, 1)->out[0];
    in[0] = v;
    in[1] = const_i64(g, "s1", 1, one);
    v = tu_node(g, "Reshape", "reshape1", 2, in, 1)->out[0];
    tu_output(g, tu_node(g, "Relu", "r1", 1, &v, 1)->out[0]);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    float vals[N];
    for (int i = 0; i < N; i++)
        vals[i] = (float)(i % 7) - 3.0f;
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = vals}, out;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_OK, "%s", e.msg);
    for (int i = 0; i < N; i++) /* relu(-relu(x)) = 0 */
        cr_assert_eq(((float *)out.data)[i], 0.0f, "element %d", i);
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert_leq(s.arena_bytes, N * 4 + 64, "arena %zu bytes: the Reshapes should share their input's buffer",
                  s.arena_bytes);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

typedef struct seen { int calls; float first[8]; } seen;

static void observer(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    (void)v;
    seen *s = user;
    if (s->calls < 8)
        s->first[s->calls] = ((const float *)t->data)[0];
    s->calls++;
}

Test(exec, observer_sees_every_value)
{
    qr_graph *g = chain(4);
    qr_exec *x;
    qr_error e;
    seen s = {0};
    qr_exec_opts o = {.observer = observer, .observer_user = &s};
    cr_assert_eq(qr_exec_new(g, &o, &x, &e), QR_OK);
    float in[N] = {3.f};
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = in}, out;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(s.calls, 4);
    /* Relu(3) = 3, Neg -> -3, Relu -> 0, Neg -> -0: each value seen in order. */
    const float want[4] = {3.f, -3.f, 0.f, 0.f};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(s.first[i], want[i], 0, "value %d", i);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

/* The run counter (qr_exec_node_samples): per run, the nodes that compute (not QuantizeLinear,
 * DequantizeLinear, Shape, nor a node made from constants alone) times the samples (the first
 * input's first axis), less the nodes the observer supplies. By hand: x[3, 5] -> Relu ->
 * QuantizeLinear -> DequantizeLinear -> Neg -> Add(., DequantizeLinear(a constant)), and Shape(x):
 * 3 nodes that compute (Relu, Neg, Add) of 7, so 3 x 3 = 9 a run; 2 x 3 with Neg supplied. */
static int supply_neg(void *user, const qr_node *n, qr_tensor *const *out)
{
    (void)user;
    if (strcmp(n->op, "Neg") != 0)
        return 0;
    float *y = out[0]->data;
    for (int64_t i = 0; i < qr_tensor_numel(out[0]); i++)
        y[i] = -1.0f;
    return 1;
}

static void count_nothing(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)user, (void)n, (void)v, (void)t;
}

Test(exec, run_counter_counts_computing_nodes_times_samples)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {3, 5};
    float scale = 0.5f;
    uint8_t zero = 128;
    qr_value *x = tu_input(g, "x", 2, d);
    qr_value *r = tu_node(g, "Relu", "relu", 1, &x, 1)->out[0];
    qr_value *qin[3] = {r, tu_const_f32(g, "s", 0, NULL, &scale), NULL};
    qr_tensor zt = {.dtype = QR_U8, .ndim = 0, .data = &zero};
    qin[2] = qr_graph_new_value(g, "z");
    qr_value_set_const(g, qin[2], &zt);
    qr_value *qv = tu_node(g, "QuantizeLinear", "q", 3, qin, 1)->out[0];
    qin[0] = qv;
    qr_value *dv = tu_node(g, "DequantizeLinear", "dq", 3, qin, 1)->out[0];
    qr_value *nv = tu_node(g, "Neg", "neg", 1, &dv, 1)->out[0];
    /* a constant i8 row through DequantizeLinear: made from constants alone, not a run's */
    int8_t ci[5] = {2, -4, 6, -8, 10};
    qr_tensor ct = {.dtype = QR_I8};
    qr_tensor_set_shape(&ct, 1, (const int64_t[]){5});
    ct.data = ci;
    qr_value *cq = qr_graph_new_value(g, "cq");
    qr_value_set_const(g, cq, &ct);
    qr_value *cin[2] = {cq, tu_const_f32(g, "cs", 0, NULL, &scale)};
    qr_value *cv = tu_node(g, "DequantizeLinear", "cdq", 2, cin, 1)->out[0];
    /* and a computing node of that constant: made from constants alone too, not counted */
    qr_value *av0 = tu_node(g, "Abs", "cabs", 1, &cv, 1)->out[0];
    qr_value *ain[2] = {nv, av0};
    qr_value *av = tu_node(g, "Add", "add", 2, ain, 1)->out[0];
    qr_value *sv = tu_node(g, "Shape", "shape", 1, &x, 1)->out[0];
    tu_output(g, av);
    tu_output(g, sv);
    cr_assert_eq(qr_exec_count_nodes(g), 3, "Relu, Neg, Add of %d nodes", g->n_nodes);
    qr_exec *xa, *xb;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &xa, &e), QR_OK, "%s", e.msg);
    qr_exec_opts so = {.observer = count_nothing, .supplied = supply_neg};
    cr_assert_eq(qr_exec_new(g, &so, &xb, &e), QR_OK, "%s", e.msg);
    float in[15];
    for (int i = 0; i < 15; i++)
        in[i] = (float)(i % 7) - 3.0f;
    qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {3, 5}, .data = in}, out[2];
    int64_t n0 = qr_exec_node_samples();
    for (int run = 0; run < 2; run++) {
        cr_assert_eq(qr_exec_run(xa, &t, out, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_exec_node_samples() - n0, (int64_t)(run + 1) * 3 * 3, "run %d", run);
        /* the numbers are the graph's: Neg(DQ(Q(Relu(x)))) + |c| / 2 */
        const float *y = out[0].data;
        for (int i = 0; i < 15; i++) {
            float relu = in[i] > 0 ? in[i] : 0;
            cr_assert_float_eq(y[i], -relu + fabsf((float)ci[i % 5]) * 0.5f, 1e-6, "element %d", i);
        }
        qr_tensor_free(&out[0]);
        qr_tensor_free(&out[1]);
    }
    /* the observer supplies Neg's output: 2 nodes run, 3 samples */
    n0 = qr_exec_node_samples();
    cr_assert_eq(qr_exec_run(xb, &t, out, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_exec_node_samples() - n0, 2 * 3);
    cr_assert_float_eq(((const float *)out[0].data)[0], -1.0f + 1.0f, 1e-6, "Neg supplied as -1");
    qr_tensor_free(&out[0]);
    qr_tensor_free(&out[1]);
    /* a failed run counts nothing */
    n0 = qr_exec_node_samples();
    t.dtype = QR_I32;
    cr_assert_eq(qr_exec_run(xa, &t, out, &e), QR_ERR);
    cr_assert_eq(qr_exec_node_samples(), n0);
    qr_exec_free(xa);
    qr_exec_free(xb);
    qr_graph_free(g);
}

Test(exec, wrong_inputs_are_errors)
{
    qr_graph *g = chain(2);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK);
    float in[N + 1];
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {N + 1}, .data = in}, out;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_ERR);
    cr_assert(strstr(e.msg, "input 'x': expected f32[1000], got f32[1001]"), "%s", e.msg);
    t.dims[0] = N;
    t.dtype = QR_I32;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_ERR);
    cr_assert(strstr(e.msg, "got i32[1000]"), "%s", e.msg);
    qr_exec_free(x);
    qr_graph_free(g);
}

Test(exec, symbolic_batch_replans_and_binds_consistently)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {-1, 4};
    qr_value *a = tu_input(g, "a", 2, d), *b = tu_input(g, "b", 2, d);
    a->dim_param[0] = b->dim_param[0] = "N";
    qr_value *ab[] = {a, b};
    tu_output(g, tu_node(g, "Add", "add", 2, ab, 1)->out[0]);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK);
    float da[12], db[12];
    for (int i = 0; i < 12; i++) {
        da[i] = (float)i;
        db[i] = 100.f;
    }
    for (int batch = 2; batch <= 3; batch++) {
        qr_tensor in[2] = {{.dtype = QR_F32, .ndim = 2, .dims = {batch, 4}, .data = da},
                           {.dtype = QR_F32, .ndim = 2, .dims = {batch, 4}, .data = db}};
        qr_tensor out;
        cr_assert_eq(qr_exec_run(x, in, &out, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(out.dims[0], batch);
        cr_assert_float_eq(((float *)out.data)[batch * 4 - 1], 100.f + (float)(batch * 4 - 1), 0);
        qr_tensor_free(&out);
    }
    qr_tensor in[2] = {{.dtype = QR_F32, .ndim = 2, .dims = {2, 4}, .data = da},
                       {.dtype = QR_F32, .ndim = 2, .dims = {3, 4}, .data = db}};
    qr_tensor out;
    cr_assert_eq(qr_exec_run(x, in, &out, &e), QR_ERR);
    cr_assert(strstr(e.msg, "dimension 'N' is 3 here but 2 in input 'a'"), "%s", e.msg);
    qr_exec_free(x);
    qr_graph_free(g);
}

Test(exec, data_dependent_shape_runs_dynamically)
{
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {2, 6}, ds[] = {2};
    qr_value *xv = tu_input(g, "x", 2, d), *sv = tu_input(g, "shape", 1, ds);
    sv->t.dtype = QR_I64;
    qr_value *in[] = {xv, sv};
    qr_value *r = tu_node(g, "Reshape", "reshape", 2, in, 1)->out[0];
    tu_output(g, tu_node(g, "Relu", "relu", 1, &r, 1)->out[0]);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK);
    float data[12];
    for (int i = 0; i < 12; i++)
        data[i] = (float)(i - 6);
    int64_t shape[] = {3, -1};
    qr_tensor ins[2] = {{.dtype = QR_F32, .ndim = 2, .dims = {2, 6}, .data = data},
                        {.dtype = QR_I64, .ndim = 1, .dims = {2}, .data = shape}};
    qr_tensor out;
    cr_assert_eq(qr_exec_run(x, ins, &out, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(out.ndim, 2);
    cr_assert_eq(out.dims[0], 3);
    cr_assert_eq(out.dims[1], 4);
    cr_assert_float_eq(((float *)out.data)[11], 5.f, 0);
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert_eq(s.dynamic, 1);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

/* y = relu(x @ W + b) with x [2, 3, 5]: W a constant (packed GEMM) or an input (batched products),
 * b a row vector [7] (fused into the MatMul: the Add does not run) or a scalar [1] (not fused),
 * against the unfused run (fuse=0) bit for bit and a double reference. */
static void check_bias_fusion(int w_const, int bias_n)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {2, 3, 5}, dw[] = {5, 7}, db[] = {bias_n};
    float w[35], b[7], xs[30];
    for (int i = 0; i < 35; i++)
        w[i] = (float)((i * 7) % 11) / 8.0f - 0.6f;
    for (int i = 0; i < 7; i++)
        b[i] = (float)i / 3.0f - 1.0f;
    for (int i = 0; i < 30; i++)
        xs[i] = (float)((i * 5) % 13) / 4.0f - 1.5f;
    qr_value *mm_in[2] = {tu_input(g, "x", 3, dx), w_const ? tu_const_f32(g, "w", 2, dw, w) : tu_input(g, "w", 2, dw)};
    qr_value *v = tu_node(g, "MatMul", "mm", 2, mm_in, 1)->out[0];
    qr_value *add_in[2] = {tu_const_f32(g, "b", 1, db, b), v};
    v = tu_node(g, "Add", "add", 2, add_in, 1)->out[0];
    tu_output(g, tu_node(g, "Relu", "relu", 1, &v, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg); /* the shapes the fusion checks */
    qr_tensor in[2] = {{.dtype = QR_F32, .ndim = 3, .dims = {2, 3, 5}, .data = xs},
                       {.dtype = QR_F32, .ndim = 2, .dims = {5, 7}, .data = w}}, out[2];
    for (int fuse = 1; fuse >= 0; fuse--) {
        if (!fuse)
            tu_option("fuse", "0");
        qr_exec_opts o = {.profile = 1};
        qr_exec *x;
        cr_assert_eq(qr_exec_new(g, &o, &x, &e), QR_OK, "%s", e.msg);
        tu_option("fuse", "");
        for (int r = 0; r < 2; r++) { /* the weights packed, then read packed */
            if (r)
                qr_tensor_free(&out[fuse]);
            cr_assert_eq(qr_exec_run(x, in, &out[fuse], &e), QR_OK, "%s", e.msg);
        }
        const qr_node_prof *p = qr_exec_profile(x);
        cr_assert_eq(p[1].runs == 0, fuse && bias_n == 7, "the Add ran %lld times", (long long)p[1].runs);
        qr_exec_free(x);
    }
    const float *y = out[1].data, *y0 = out[0].data;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 7; j++) {
            double s = 0;
            for (int q = 0; q < 5; q++)
                s += (double)xs[i * 5 + q] * w[q * 7 + j];
            s += b[bias_n == 7 ? j : 0];
            s = s > 0 ? s : 0;
            cr_assert(fabs(y[i * 7 + j] - s) <= 1e-5, "(%d, %d): %g, want %g", i, j, (double)y[i * 7 + j], s);
            cr_assert(memcmp(&y[i * 7 + j], &y0[i * 7 + j], 4) == 0, "(%d, %d): fused %g, unfused %g", i, j,
                      (double)y[i * 7 + j], (double)y0[i * 7 + j]);
        }
    qr_tensor_free(&out[0]);
    qr_tensor_free(&out[1]);
    qr_graph_free(g);
}

/* The kernels keep what they derive from constants (a MatMul's packed weights) up to
 * QR_KCACHE_MAX bytes per executor: x [2, 1, 4096] through W1 [4096, 1024] (16 MB, kept) then W2
 * [1024, 16384] (64 MB: over the cap, packed afresh on every run and freed). The second run gives
 * the first's bits, and both are within rounding of a double reference. */
Test(exec, kernel_cache_is_capped)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {2, 1, 4096}, d1[] = {4096, 1024}, d2[] = {1024, 16384};
    float *w1 = malloc(sizeof(float) * 4096 * 1024), *w2 = malloc(sizeof(float) * 1024 * 16384);
    float *xs = malloc(sizeof(float) * 2 * 4096);
    for (int64_t i = 0; i < 4096 * 1024; i++)
        w1[i] = (float)((i * 7) % 23) / 64.0f - 0.17f;
    for (int64_t i = 0; i < 1024 * 16384; i++)
        w2[i] = (float)((i * 5) % 19) / 32.0f - 0.28f;
    for (int i = 0; i < 2 * 4096; i++)
        xs[i] = (float)((i * 3) % 17) / 8.0f - 1.0f;
    qr_value *in[2] = {tu_input(g, "x", 3, dx), tu_const_f32(g, "w1", 2, d1, w1)};
    qr_value *h = tu_node(g, "MatMul", "mm1", 2, in, 1)->out[0];
    in[0] = h;
    in[1] = tu_const_f32(g, "w2", 2, d2, w2);
    tu_output(g, tu_node(g, "MatMul", "mm2", 2, in, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_exec *x;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    qr_tensor t = {.dtype = QR_F32, .ndim = 3, .dims = {2, 1, 4096}, .data = xs}, out[2];
    for (int r = 0; r < 2; r++)
        cr_assert_eq(qr_exec_run(x, &t, &out[r], &e), QR_OK, "%s", e.msg);
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert(s.cache_bytes >= sizeof(float) * 4096 * 1024 && s.cache_bytes <= QR_KCACHE_MAX,
              "the cache holds %zu bytes: W1's packing only", s.cache_bytes);
    cr_assert_eq(memcmp(out[0].data, out[1].data, sizeof(float) * 2 * 16384), 0, "the second run differs");
    /* an executor given room (inference's: runtime/api.c) keeps both packings, same products */
    qr_exec *big;
    qr_exec_opts bo = {.cache_max = (size_t)128 << 20};
    cr_assert_eq(qr_exec_new(g, &bo, &big, &e), QR_OK, "%s", e.msg);
    qr_tensor kept[2];
    for (int r = 0; r < 2; r++)
        cr_assert_eq(qr_exec_run(big, &t, &kept[r], &e), QR_OK, "%s", e.msg);
    qr_exec_get_stats(big, &s);
    cr_assert(s.cache_bytes >= sizeof(float) * (4096 * 1024 + 1024 * 16384) && s.cache_bytes <= bo.cache_max,
              "the cache holds %zu bytes: both packings", s.cache_bytes);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(memcmp(kept[r].data, out[1].data, sizeof(float) * 2 * 16384), 0, "run %d differs", r);
        qr_tensor_free(&kept[r]);
    }
    qr_exec_free(big);
    double *hd = malloc(sizeof *hd * 1024);
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 1024; j++)
            hd[j] = 0;
        for (int k = 0; k < 4096; k++)
            for (int j = 0; j < 1024; j++)
                hd[j] += (double)xs[r * 4096 + k] * w1[(int64_t)k * 1024 + j];
        const float *y = (const float *)out[1].data + r * 16384;
        for (int j = 0; j < 16384; j += 97) {
            double ref = 0, mag = 0;
            for (int k = 0; k < 1024; k++)
                ref += hd[k] * w2[(int64_t)k * 16384 + j], mag += fabs(hd[k] * w2[(int64_t)k * 16384 + j]);
            cr_assert(fabs(y[j] - ref) <= 1e-5 * (mag + 1), "row %d column %d: %g, want %g", r, j, (double)y[j], ref);
        }
    }
    free(hd);
    qr_tensor_free(&out[0]);
    qr_tensor_free(&out[1]);
    qr_exec_free(x);
    qr_graph_free(g);
    free(w1);
    free(w2);
    free(xs);
}

/* y[4, 6, 6] = conv(x[8, 6, 6], w[4, 8, 3, 3]), pads 1, in doubles: the reference. */
static void conv_ref(const float *x, const float *w, double *y)
{
    for (int m = 0; m < 4; m++)
        for (int oy = 0; oy < 6; oy++)
            for (int ox = 0; ox < 6; ox++) {
                double s = 0;
                for (int c = 0; c < 8; c++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = oy + ky - 1, ix = ox + kx - 1;
                            if (iy >= 0 && iy < 6 && ix >= 0 && ix < 6)
                                s += (double)x[(c * 6 + iy) * 6 + ix] * w[((m * 8 + c) * 3 + ky) * 3 + kx];
                        }
                y[(m * 6 + oy) * 6 + ox] = s;
            }
}

/* The two tests below: a 3 x 3 convolution of 8 -> 4 channels on 6 x 6, its i8 weights wq with
 * per-channel scales ws, wdq = wq * ws, and two runs' inputs xs. */
#define DQ_W 288
static const int64_t dq_dx[] = {1, 8, 6, 6}, dq_dw[] = {4, 8, 3, 3}, dq_pads[] = {1, 1, 1, 1};
static const float dq_ws[4] = {0.02f, 0.05f, 0.01f, 0.03f};

static void dq_fill(int8_t *wq, float *wdq, float xs[2][DQ_W])
{
    for (int i = 0; i < DQ_W; i++) {
        wq[i] = (int8_t)((i * 37) % 255 - 127);
        wdq[i] = (float)wq[i] * dq_ws[i / 72];
        for (int r = 0; r < 2; r++)
            xs[r][i] = (float)((i * (5 + 2 * r)) % 29) / 8.0f - 1.5f;
    }
}

/* w = DequantizeLinear(the i8 constant wq, per-channel scales): a weight made from constants alone */
static qr_value *dq_weight(qr_graph *g, int8_t *wq)
{
    const int64_t ds[] = {4};
    qr_tensor t = {.dtype = QR_I8};
    qr_tensor_set_shape(&t, 4, dq_dw);
    t.data = wq;
    qr_value *q = qr_graph_new_value(g, "wq");
    qr_value_set_const(g, q, &t);
    qr_value *dq[2] = {q, tu_const_f32(g, "ws", 1, ds, dq_ws)};
    qr_node *d = tu_node(g, "DequantizeLinear", "dq", 2, dq, 1);
    tu_attr_int(g, d, "axis", 0);
    return d->out[0];
}

/* y = Conv(x, dq_weight(wq)), pads 1: the graph the packing tests share */
static qr_graph *dq_conv_graph(int8_t *wq)
{
    qr_graph *g = qr_graph_new();
    qr_value *in[2] = {tu_input(g, "x", 4, dq_dx), dq_weight(g, wq)};
    qr_node *c = tu_node(g, "Conv", "conv", 2, in, 1);
    tu_attr_ints(g, c, "pads", 4, dq_pads);
    tu_output(g, c->out[0]);
    return g;
}

/* out (y[4, 6, 6]) against conv_ref(x, w), within 1e-5 relative; what and r name the case. */
static void expect_conv(const qr_tensor *out, const float *x, const float *w, const char *what, int r)
{
    double ref[144];
    conv_ref(x, w, ref);
    const float *y = out->data;
    for (int i = 0; i < 144; i++)
        cr_assert(fabs(y[i] - ref[i]) <= 1e-5 * (fabs(ref[i]) + 1), "%s, run %d, element %d: %g, want %g", what, r, i,
                  (double)y[i], ref[i]);
}

/* A convolution whose weight a node makes from constants alone (a QDQ graph's weight
 * DequantizeLinear) keeps its packing across runs as from a constant (qr_kinput_fixed); one whose
 * weight a node makes from a graph input does not, and a second run with other weights computes
 * with them. Both against a double reference, on two runs with other inputs each time. */
Test(exec, conv_keeps_weights_made_from_constants)
{
    const int64_t one_d[] = {1};
    int8_t wq[DQ_W];
    float wdq[DQ_W], xs[2][DQ_W], wa[2][DQ_W], one = 1.0f;
    dq_fill(wq, wdq, xs);
    for (int i = 0; i < DQ_W; i++)
        for (int r = 0; r < 2; r++)
            wa[r][i] = (float)((i * (3 + 4 * r)) % 31) / 16.0f - 0.9f;
    for (int fixed = 1; fixed >= 0; fixed--) {
        qr_graph *g = qr_graph_new();
        qr_value *in[3] = {tu_input(g, "x", 4, dq_dx), NULL, NULL};
        if (fixed)
            in[1] = dq_weight(g, wq);
        else { /* w = Mul(a graph input, 1) */
            qr_value *mul[2] = {tu_input(g, "wa", 4, dq_dw), tu_const_f32(g, "one", 1, one_d, &one)};
            in[1] = tu_node(g, "Mul", "mul", 2, mul, 1)->out[0];
        }
        qr_node *c = tu_node(g, "Conv", "conv", 2, in, 1);
        tu_attr_ints(g, c, "pads", 4, dq_pads);
        tu_output(g, c->out[0]);
        qr_exec *x;
        qr_error e;
        cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
        for (int r = 0; r < 2; r++) {
            qr_tensor t[2] = {{.dtype = QR_F32, .ndim = 4, .dims = {1, 8, 6, 6}, .data = xs[r]},
                              {.dtype = QR_F32, .ndim = 4, .dims = {4, 8, 3, 3}, .data = wa[r]}}, out;
            cr_assert_eq(qr_exec_run(x, t, &out, &e), QR_OK, "%s", e.msg);
            expect_conv(&out, xs[r], fixed ? wdq : wa[r], fixed ? "fixed weight" : "computed weight", r);
            qr_tensor_free(&out);
        }
        qr_exec_stats st;
        qr_exec_get_stats(x, &st);
        if (qr_sconv_available()) /* the kernel that keeps packings */
            cr_assert(fixed ? st.cache_bytes >= sizeof wdq : st.cache_bytes == 0, "%s weight: %zu bytes kept",
                      fixed ? "fixed" : "computed", st.cache_bytes);
        qr_exec_free(x);
        qr_graph_free(g);
    }
}

/* The matrix-product tests below: B of MP_N x MP_K (Gemm, transB = 1) or MP_K x MP_N (MatMul), its
 * i8 values bq with one scale per output column n (bs: the Gemm's axis 0, the MatMul's axis 1),
 * bdq = bq * bs; A is MP_M x MP_K. */
enum { MP_M = 5, MP_K = 40, MP_N = 24, MP_B = MP_N * MP_K };
static const float mp_bs[MP_N] = {0.02f,  0.05f,  0.01f,  0.03f,  0.04f,  0.015f, 0.025f, 0.035f,
                                  0.045f, 0.055f, 0.012f, 0.022f, 0.032f, 0.042f, 0.052f, 0.018f,
                                  0.028f, 0.038f, 0.048f, 0.058f, 0.011f, 0.021f, 0.031f, 0.041f};

/* y = Gemm(a, B, c; alpha 0.75, beta -1.5, transB 1) or MatMul(a, B), B by kind: 0 DequantizeLinear of
 * the constant bq (made from constants alone), 1 the f32 constant bdq, 2 Mul(the graph input "b", 1)
 * (computed each run). */
static qr_graph *mp_graph(int gemm, int kind, int8_t *bq, const float *bdq, const float *c)
{
    const int64_t da[] = {MP_M, MP_K}, db[] = {gemm ? MP_N : MP_K, gemm ? MP_K : MP_N}, dc[] = {MP_N},
                  ds[] = {MP_N}, one_d[] = {1};
    static const float one = 1.0f;
    qr_graph *g = qr_graph_new();
    qr_value *in[3] = {tu_input(g, "a", 2, da), NULL, gemm ? tu_const_f32(g, "c", 1, dc, c) : NULL};
    if (kind == 0) {
        qr_tensor t = {.dtype = QR_I8};
        qr_tensor_set_shape(&t, 2, db);
        t.data = bq;
        qr_value *q = qr_graph_new_value(g, "bq");
        qr_value_set_const(g, q, &t);
        qr_value *dq[2] = {q, tu_const_f32(g, "bs", 1, ds, mp_bs)};
        qr_node *d = tu_node(g, "DequantizeLinear", "dq", 2, dq, 1);
        tu_attr_int(g, d, "axis", gemm ? 0 : 1);
        in[1] = d->out[0];
    } else if (kind == 1)
        in[1] = tu_const_f32(g, "bdq", 2, db, bdq);
    else {
        qr_value *mul[2] = {tu_input(g, "b", 2, db), tu_const_f32(g, "one", 1, one_d, &one)};
        in[1] = tu_node(g, "Mul", "mul", 2, mul, 1)->out[0];
    }
    qr_node *n = tu_node(g, gemm ? "Gemm" : "MatMul", "mm", gemm ? 3 : 2, in, 1);
    if (gemm) {
        tu_attr_int(g, n, "transB", 1);
        tu_attr_float(g, n, "alpha", 0.75f);
        tu_attr_float(g, n, "beta", -1.5f);
    }
    tu_output(g, n->out[0]);
    return g;
}

/* A Gemm or MatMul whose B a node makes from constants alone (a QDQ graph's weight
 * DequantizeLinear: the quantizer's calibration graph's classifier) keeps its packing across runs
 * as from a constant (qr_kinput_fixed), and computes the same bits as the same B given as an f32
 * constant (packed too) and as a graph input (packed each run: the path it took before); each
 * against a double reference, over two runs with other A each time. */
Test(exec, matrix_products_keep_weights_made_from_constants)
{
    int8_t bq[MP_B];
    float bdq[MP_B], c[MP_N], as[2][MP_M * MP_K];
    for (int gemm = 1; gemm >= 0; gemm--) {
        for (int i = 0; i < MP_B; i++) { /* element i's output column takes its scale */
            bq[i] = (int8_t)((i * 37) % 255 - 127);
            bdq[i] = (float)bq[i] * mp_bs[gemm ? i / MP_K : i % MP_N];
        }
        for (int i = 0; i < MP_N; i++)
            c[i] = (float)(i % 7) * 0.25f - 0.8f;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < MP_M * MP_K; i++)
                as[r][i] = (float)((i * (5 + 2 * r)) % 29) / 8.0f - 1.5f;
        float got[3][2][MP_M * MP_N];
        size_t kept[3];
        for (int kind = 0; kind < 3; kind++) {
            qr_graph *g = mp_graph(gemm, kind, bq, bdq, c);
            qr_exec *x;
            qr_error e;
            cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
            for (int r = 0; r < 2; r++) {
                qr_tensor t[2] = {{.dtype = QR_F32, .ndim = 2, .dims = {MP_M, MP_K}, .data = as[r]},
                                  {.dtype = QR_F32, .ndim = 2, .dims = {gemm ? MP_N : MP_K, gemm ? MP_K : MP_N},
                                   .data = bdq}},
                          out;
                cr_assert_eq(qr_exec_run(x, t, &out, &e), QR_OK, "%s", e.msg);
                memcpy(got[kind][r], out.data, sizeof got[kind][r]);
                qr_tensor_free(&out);
                for (int i = 0; i < MP_M; i++)
                    for (int j = 0; j < MP_N; j++) {
                        double s = 0;
                        for (int k = 0; k < MP_K; k++)
                            s += (double)as[r][i * MP_K + k] * bdq[gemm ? j * MP_K + k : k * MP_N + j];
                        if (gemm)
                            s = 0.75 * s - 1.5 * c[j];
                        double y = got[kind][r][i * MP_N + j];
                        cr_assert(fabs(y - s) <= 1e-5 * (fabs(s) + 1), "%s, B kind %d, run %d, y[%d][%d]: %g, want %g",
                                  gemm ? "Gemm" : "MatMul", kind, r, i, j, y, s);
                    }
            }
            qr_exec_stats st;
            qr_exec_get_stats(x, &st);
            kept[kind] = st.cache_bytes;
            qr_exec_free(x);
            qr_graph_free(g);
        }
        cr_assert(!memcmp(got[0], got[1], sizeof got[0]), "%s: B made from constants, other bits than B constant",
                  gemm ? "Gemm" : "MatMul");
        cr_assert(!memcmp(got[0], got[2], sizeof got[0]), "%s: B made from constants, other bits than B computed",
                  gemm ? "Gemm" : "MatMul");
        cr_assert_eq(kept[2], 0, "%s: B computed each run, %zu bytes kept", gemm ? "Gemm" : "MatMul", kept[2]);
        if (qr_sgemm_best()) /* the kernel that keeps packings */
            cr_assert(kept[0] >= sizeof bdq && kept[0] == kept[1], "%s: %zu bytes kept of B made from constants, %zu of B constant",
                      gemm ? "Gemm" : "MatMul", kept[0], kept[1]);
    }
}

/* An executor that dropped its plan (qr_exec_drop_plan) keeps its packing and runs again (planning
 * again) to the same values: the Conv against the double reference, before and after. */
Test(exec, dropped_plan_keeps_the_packing_and_runs_again)
{
    int8_t wq[DQ_W];
    float wdq[DQ_W], xs[2][DQ_W];
    dq_fill(wq, wdq, xs);
    qr_graph *g = dq_conv_graph(wq);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    qr_exec_drop_plan(x); /* before any run: nothing to drop */
    size_t kept = 0;
    for (int r = 0; r < 2; r++) {
        qr_tensor in_t = {.dtype = QR_F32, .ndim = 4, .dims = {1, 8, 6, 6}, .data = xs[r]}, out;
        cr_assert_eq(qr_exec_run(x, &in_t, &out, &e), QR_OK, "%s", e.msg);
        expect_conv(&out, xs[r], wdq, "dropped plan", r);
        qr_tensor_free(&out);
        qr_exec_stats st;
        qr_exec_get_stats(x, &st);
        if (r == 0)
            kept = st.cache_bytes;
        else
            cr_assert_eq(st.cache_bytes, kept, "the packing kept: %zu bytes, %zu before", st.cache_bytes, kept);
        qr_exec_drop_plan(x);
    }
    qr_exec_free(x);
    qr_graph_free(g);
}

/* Two executors of one graph that share their packings (qr_exec_share_cache, the quantizer's
 * measuring runs of one QDQ graph): whichever runs a convolution first packs its weight, made
 * from constants alone (a DequantizeLinear), and keeps it; the other keeps nothing and computes
 * with that packing: both against a double reference, over two runs each, in either order. */
Test(exec, executors_of_one_graph_share_a_packing)
{
    int8_t wq[DQ_W];
    float wdq[DQ_W], xs[2][DQ_W];
    dq_fill(wq, wdq, xs);
    qr_graph *g = dq_conv_graph(wq);
    for (int first = 0; first < 2; first++) {
        qr_exec *x[2];
        qr_error e;
        for (int k = 0; k < 2; k++)
            cr_assert_eq(qr_exec_new(g, NULL, &x[k], &e), QR_OK, "%s", e.msg);
        qr_exec_share_cache(x[0], x[1]);
        qr_exec_share_cache(x[1], x[0]);
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 2; k++) {
                int who = k == 0 ? first : 1 - first;
                qr_tensor in_t = {.dtype = QR_F32, .ndim = 4, .dims = {1, 8, 6, 6}, .data = xs[r]}, out;
                cr_assert_eq(qr_exec_run(x[who], &in_t, &out, &e), QR_OK, "%s", e.msg);
                expect_conv(&out, xs[r], wdq, who ? "executor 1" : "executor 0", r);
                qr_tensor_free(&out);
            }
        qr_exec_stats st[2];
        for (int k = 0; k < 2; k++)
            qr_exec_get_stats(x[k], &st[k]);
        if (qr_sconv_available()) /* the kernel that keeps packings */
            cr_assert(st[first].cache_bytes >= sizeof wdq && st[1 - first].cache_bytes == 0,
                      "executor %d ran first and keeps %zu bytes, the other %zu (want none)", first,
                      st[first].cache_bytes, st[1 - first].cache_bytes);
        for (int k = 0; k < 2; k++)
            qr_exec_free(x[k]);
    }
    qr_graph_free(g);
}

/* Executors of two graphs sharing a convolution's packing by a node map (qr_exec_share_cache_nodes,
 * the quantizer's cut runs taking the f32 run's): g1 = Conv(x, w), g2 = Conv(Relu(x), w), the same
 * weights. The second keeps nothing once the first has packed them, and computes with that packing;
 * before the first has run, it packs its own. Both against a double reference. */
Test(exec, executors_of_two_graphs_share_a_packing_by_node_map)
{
    int8_t wq[DQ_W];
    float wdq[DQ_W], xs[2][DQ_W], relu[DQ_W];
    dq_fill(wq, wdq, xs);
    for (int i = 0; i < DQ_W; i++)
        relu[i] = xs[1][i] > 0 ? xs[1][i] : 0;
    qr_graph *g[2];
    for (int k = 0; k < 2; k++) {
        g[k] = qr_graph_new();
        qr_value *in[2] = {tu_input(g[k], "x", 4, dq_dx), NULL};
        if (k == 1)
            in[0] = tu_node(g[k], "Relu", "relu", 1, in, 1)->out[0];
        in[1] = tu_const_f32(g[k], "w", 4, dq_dw, wdq);
        qr_node *c = tu_node(g[k], "Conv", "conv", 2, in, 1);
        tu_attr_ints(g[k], c, "pads", 4, dq_pads);
        tu_output(g[k], c->out[0]);
    }
    const int map[2] = {-1, 0}; /* g2's Relu: none; its Conv: g1's */
    for (int first = 0; first < 2; first++) {
        qr_exec *x[2];
        qr_error e;
        for (int k = 0; k < 2; k++)
            cr_assert_eq(qr_exec_new(g[k], NULL, &x[k], &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_exec_share_cache_nodes(x[1], x[0], map, &e), QR_OK, "%s", e.msg);
        for (int k = 0; k < 2; k++) {
            int who = k == 0 ? first : 1 - first;
            qr_tensor in_t = {.dtype = QR_F32, .ndim = 4, .dims = {1, 8, 6, 6}, .data = xs[1]}, out;
            cr_assert_eq(qr_exec_run(x[who], &in_t, &out, &e), QR_OK, "%s", e.msg);
            expect_conv(&out, who ? relu : xs[1], wdq, who ? "g2's executor" : "g1's executor", first);
            qr_tensor_free(&out);
        }
        qr_exec_stats st[2];
        for (int k = 0; k < 2; k++)
            qr_exec_get_stats(x[k], &st[k]);
        if (qr_sconv_available()) /* the kernel that keeps packings */
            cr_assert(st[0].cache_bytes >= sizeof wdq && (first == 0 ? st[1].cache_bytes == 0 : st[1].cache_bytes >= sizeof wdq),
                      "g1's executor keeps %zu bytes, g2's %zu (%s)", st[0].cache_bytes, st[1].cache_bytes,
                      first == 0 ? "want none: it ran second" : "want its own: it ran first");
        for (int k = 0; k < 2; k++)
            qr_exec_free(x[k]);
    }
    for (int k = 0; k < 2; k++)
        qr_graph_free(g[k]);
}

Test(exec, bias_add_fuses_into_matmul)
{
    check_bias_fusion(1, 7);
    check_bias_fusion(0, 7);
    check_bias_fusion(1, 1); /* a scalar: the Add runs */
}

/* GELU as PyTorch exports it, after a bias: y = (x + b) / sqrt(2) |> Erf |> + 1 |> * (x + b) |> * 0.5,
 * on x [rows, 3, 100] (b [100]): the six pointwise nodes run by tiles of rows
 * (exec_tiles.h), on 1 and 2 threads; every bit the node-by-node run's (fuse=0). */
static void check_tiled_chain(int64_t rows, int threads, int want_tiled)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {rows, 3, 100}, db[] = {100}, d1[] = {1};
    static float b[100], xs[3 * 100 * 200];
    const float sq2 = 1.41421354f, one = 1.0f, half = 0.5f;
    for (int i = 0; i < 100; i++)
        b[i] = (float)(i % 9) / 4.0f - 1.0f;
    for (int64_t i = 0; i < rows * 300; i++)
        xs[i] = (float)((i * 37) % 101) / 17.0f - 3.0f;
    qr_value *in2[2] = {tu_input(g, "x", 3, dx), tu_const_f32(g, "b", 1, db, b)};
    qr_value *xb = tu_node(g, "Add", "bias", 2, in2, 1)->out[0];
    in2[0] = xb;
    in2[1] = tu_const_f32(g, "sqrt2", 0, d1, &sq2);
    qr_value *v = tu_node(g, "Div", "div", 2, in2, 1)->out[0];
    v = tu_node(g, "Erf", "erf", 1, &v, 1)->out[0];
    in2[0] = v;
    in2[1] = tu_const_f32(g, "one", 1, d1, &one);
    v = tu_node(g, "Add", "add1", 2, in2, 1)->out[0];
    in2[0] = xb;
    in2[1] = v;
    v = tu_node(g, "Mul", "mul", 2, in2, 1)->out[0];
    in2[0] = v;
    in2[1] = tu_const_f32(g, "half", 0, d1, &half);
    tu_output(g, tu_node(g, "Mul", "mul_half", 2, in2, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_tensor in = {.dtype = QR_F32, .ndim = 3, .dims = {rows, 3, 100}, .data = xs}, out[2];
    for (int fuse = 1; fuse >= 0; fuse--) {
        if (!fuse)
            tu_option("fuse", "0");
        qr_exec_opts o = {.threads = threads, .profile = fuse};
        qr_exec *x;
        cr_assert_eq(qr_exec_new(g, &o, &x, &e), QR_OK, "%s", e.msg);
        tu_option("fuse", "");
        cr_assert_eq(qr_exec_run(x, &in, &out[fuse], &e), QR_OK, "%s", e.msg);
        qr_exec_stats s;
        qr_exec_get_stats(x, &s);
        cr_assert_eq(s.tiled_nodes, fuse && want_tiled ? 6 : 0, "%d nodes run by tiles", s.tiled_nodes);
        if (fuse && want_tiled) {
            const qr_node_prof *p = qr_exec_profile(x);
            for (int n = 0; n < 6; n++)
                cr_assert_eq(p[n].runs, 1, "node %d's profile", n);
        }
        qr_exec_free(x);
    }
    cr_assert_eq(memcmp(out[0].data, out[1].data, qr_tensor_nbytes(&out[0])), 0, "tiled and node by node differ");
    const float *y = out[1].data;
    for (int64_t i = 0; i < rows * 300; i++) { /* and a double GELU, loosely */
        double t = (double)xs[i] + b[i % 100], want = 0.5 * t * (1 + erf(t / sqrt(2.0)));
        cr_assert(fabs(y[i] - want) <= 1e-5 * (1 + fabs(want)), "%lld: %g, want %g", (long long)i, (double)y[i], want);
    }
    qr_tensor_free(&out[0]);
    qr_tensor_free(&out[1]);
    qr_graph_free(g);
}

Test(exec, pointwise_chain_runs_by_tiles_bit_for_bit)
{
    check_tiled_chain(200, 1, 1); /* 300 values a row: 54 rows a tile, the last one short */
    check_tiled_chain(200, 2, 1);
    check_tiled_chain(7, 1, 0); /* one tile: node by node */
    check_tiled_chain(0, 1, 0); /* empty */
}

#include <sys/resource.h>

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* The option arena-pages: 1 (4k) or 2 (2m), for this test's process (Criterion runs each apart). */
static void set_arena_pages(int v)
{
    qr_options o = *qr_options_get();
    o.arena_pages = v;
    qr_options_set(&o);
}

/* y = transpose(-transpose(x)) with x [1024, 1024]: 4 MiB intermediates in the executor's
 * arena, which it faults in page by page on its first run. A second executor (the quantizer makes
 * one per measurement) takes the arena the first one let go of: its first run faults in at most
 * half as many pages (the kernel's minor fault count), and what the first run left in it never
 * shows: the output is -x, by hand, for another x. */
Test(exec, a_new_executor_reuses_the_arena_of_one_freed)
{
    enum { S = 1024, NN = S * S };
    set_arena_pages(1); /* arena-pages=4k, counted: 2 MiB pages would make the first run's few */
    qr_graph *g = qr_graph_new();
    const int64_t d[] = {S, S}, perm[] = {1, 0};
    qr_value *x = tu_input(g, "x", 2, d);
    qr_node *t1 = tu_node(g, "Transpose", "t1", 1, &x, 1);
    tu_attr_ints(g, t1, "perm", 2, perm);
    qr_value *a = t1->out[0];
    qr_value *b = tu_node(g, "Neg", "neg", 1, &a, 1)->out[0];
    qr_node *t2 = tu_node(g, "Transpose", "t2", 1, &b, 1);
    tu_attr_ints(g, t2, "perm", 2, perm);
    tu_output(g, t2->out[0]);
    float *in = malloc(sizeof(float) * NN);
    cr_assert(in);
    long faults[2];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NN; i++)
            in[i] = round ? (float)(i % 7) - 3.f : 1.f + (float)i;
        qr_exec *ex;
        qr_error e;
        cr_assert_eq(qr_exec_new(g, NULL, &ex, &e), QR_OK, "%s", e.msg);
        qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {S, S}, .data = in}, out;
        long f0 = minor_faults();
        cr_assert_eq(qr_exec_run(ex, &t, &out, &e), QR_OK, "%s", e.msg);
        faults[round] = minor_faults() - f0;
        for (int i = 0; i < NN; i++)
            cr_assert_eq(((float *)out.data)[i], -in[i], "round %d, element %d: %g", round, i, ((float *)out.data)[i]);
        qr_tensor_free(&out);
        qr_exec_free(ex);
    }
    cr_expect(faults[1] * 2 <= faults[0], "the second executor faulted in %ld pages, the first %ld", faults[1],
              faults[0]);
    free(in);
    qr_graph_free(g);
}

/* Each run's node names, in the order the observer sees their outputs. */
typedef struct ran {
    int n;
    char names[16][8];
} ran;

static void record_order(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)v, (void)t;
    ran *r = user;
    if (r->n < 16)
        snprintf(r->names[r->n], sizeof r->names[0], "%s", n->name);
    r->n++;
}

#define WD 96 /* WD * WD > 4096: the executor does not evaluate a DequantizeLinear while planning */
#define NW 4

/* A QDQ graph as the quantizer makes one, in the topological order that puts every weight's
 * DequantizeLinear first: dq0..dq3 (int8 [WD, WD] * 0.5, constants only), then y = x @ w0 @ w1
 * @ w2 @ w3 (mm0..mm3). With dynamic, x is a Reshape of a flat input by a shape given at run
 * time (a shape the plan cannot know: dynamic mode), placed after the DequantizeLinears. The
 * executor runs each DequantizeLinear just before its MatMul and frees its output after it: one
 * weight in f32 at a time, not NW. */
static void check_late_constants(int dynamic)
{
    static int8_t w[NW][WD * WD];
    static float xs[WD];
    const float half = 0.5f;
    const int8_t zero = 0;
    const int64_t dw[] = {WD, WD}, dx[] = {1, WD}, flat[] = {WD}, d2[] = {2};
    for (int k = 0; k < NW; k++)
        for (int i = 0; i < WD * WD; i++)
            w[k][i] = (int8_t)((i * (k + 3) + k) % 5 - 2);
    for (int i = 0; i < WD; i++)
        xs[i] = (float)(i % 7) / 8.0f - 0.375f;
    qr_graph *g = qr_graph_new();
    qr_value *dq[NW];
    for (int k = 0; k < NW; k++) {
        char name[8];
        qr_tensor t = {.dtype = QR_I8};
        qr_tensor_set_shape(&t, 2, dw);
        t.data = w[k];
        snprintf(name, sizeof name, "w%d", k);
        qr_value *in[3] = {qr_graph_new_value(g, name), tu_const_f32(g, "", 0, NULL, &half), NULL};
        qr_value_set_const(g, in[0], &t);
        qr_tensor z = {.dtype = QR_I8, .ndim = 0, .data = (void *)&zero};
        in[2] = qr_graph_new_value(g, "");
        qr_value_set_const(g, in[2], &z);
        snprintf(name, sizeof name, "dq%d", k);
        dq[k] = tu_node(g, "DequantizeLinear", name, 3, in, 1)->out[0];
    }
    qr_value *v;
    if (dynamic) {
        qr_value *in[2] = {tu_input(g, "x", 1, flat), tu_input(g, "shape", 1, d2)};
        in[1]->t.dtype = QR_I64;
        v = tu_node(g, "Reshape", "reshape", 2, in, 1)->out[0];
    } else
        v = tu_input(g, "x", 2, dx);
    for (int k = 0; k < NW; k++) {
        char name[8];
        snprintf(name, sizeof name, "mm%d", k);
        qr_value *in[2] = {v, dq[k]};
        v = tu_node(g, "MatMul", name, 2, in, 1)->out[0];
    }
    tu_output(g, v);
    qr_error e;
    ran r = {0};
    qr_exec_opts o = {.observer = record_order, .observer_user = &r};
    qr_exec *x;
    cr_assert_eq(qr_exec_new(g, &o, &x, &e), QR_OK, "%s", e.msg);
    int64_t shape[] = {1, WD};
    qr_tensor in[2] = {{.dtype = QR_F32, .ndim = dynamic ? 1 : 2, .dims = {dynamic ? WD : 1, WD}, .data = xs},
                       {.dtype = QR_I64, .ndim = 1, .dims = {2}, .data = shape}},
              out;
    cr_assert_eq(qr_exec_run(x, in, &out, &e), QR_OK, "%s", e.msg);
    /* the order: each DequantizeLinear just before its reader (the Reshape where the graph has it) */
    const char *want[] = {"reshape", "dq0", "mm0", "dq1", "mm1", "dq2", "mm2", "dq3", "mm3"};
    int skip = dynamic ? 0 : 1;
    cr_assert_eq(r.n, 9 - skip);
    for (int i = 0; i < r.n; i++)
        cr_expect_str_eq(r.names[i], want[i + skip], "node %d ran: %s, want %s", i, r.names[i], want[i + skip]);
    /* bytes: a weight in f32 S = WD * WD * 4, an activation A = WD * 4 (both multiples of the
     * arena's 64-byte alignment). Static plan, first fit: dq_k's output at 0 (the last one died at
     * mm_{k-1}), the activations alternate at S and S + A, the output in a region of its own: S + 3A.
     * Dynamic, the most live at once (after mm_k: the Reshape's or mm_{k-1}'s output, w_k, mm_k's):
     * S + 2A. Run in the graph's order, NW weights were live at once: NW * S + 2A in both modes. */
    const size_t S = WD * WD * 4, A = WD * 4;
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_assert_eq(s.dynamic, dynamic);
    if (dynamic)
        cr_expect_eq(s.peak_bytes, S + 2 * A, "peak %zu bytes live, want %zu: one weight in f32", s.peak_bytes,
                     S + 2 * A);
    else
        cr_expect_eq(s.arena_bytes, S + 3 * A, "arena %zu bytes, want %zu: one weight in f32", s.arena_bytes,
                     S + 3 * A);
    /* and the values: a double reference */
    double ref[WD], nxt[WD];
    for (int i = 0; i < WD; i++)
        ref[i] = xs[i];
    for (int k = 0; k < NW; k++) {
        for (int j = 0; j < WD; j++) {
            nxt[j] = 0;
            for (int i = 0; i < WD; i++)
                nxt[j] += ref[i] * 0.5 * w[k][i * WD + j];
        }
        memcpy(ref, nxt, sizeof ref);
    }
    cr_assert_eq(out.ndim, 2);
    for (int j = 0; j < WD; j++)
        cr_assert(fabs(((float *)out.data)[j] - ref[j]) <= 1e-4 * (1 + fabs(ref[j])), "y[%d] = %g, want %g", j,
                  (double)((float *)out.data)[j], ref[j]);
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

Test(exec, a_constant_only_node_runs_before_its_reader_static)
{
    check_late_constants(0);
}

Test(exec, a_constant_only_node_runs_before_its_reader_dynamic)
{
    check_late_constants(1);
}

/* y = -(relu(x) * dq(c)) with the DequantizeLinear of c placed between the Relu and the Mul in the
 * graph: run just before its reader, it would cut the run of pointwise nodes Relu -> Mul -> Neg in
 * two; it runs before the run instead (qr_exec_order: dq, relu, mul, neg), and the three run by
 * tiles, to a double reference. */
Test(exec, a_constant_only_node_goes_before_the_pointwise_run_its_reader_extends)
{
    enum { R = 200, C = 100 };
    static float xs[R * 3 * C];
    static int8_t c[C];
    const float scale = 0.25f;
    const int8_t zero = 3;
    for (int i = 0; i < R * 3 * C; i++)
        xs[i] = (float)((i * 37) % 101) / 17.0f - 3.0f;
    for (int i = 0; i < C; i++)
        c[i] = (int8_t)(i % 13 - 6);
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {R, 3, C}, dc[] = {C};
    qr_value *v = tu_node(g, "Relu", "relu", 1, (qr_value *[]){tu_input(g, "x", 3, dx)}, 1)->out[0];
    qr_tensor ct = {.dtype = QR_I8}, zt = {.dtype = QR_I8, .ndim = 0, .data = (void *)&zero};
    qr_tensor_set_shape(&ct, 1, dc);
    ct.data = c;
    qr_value *dq_in[3] = {qr_graph_new_value(g, "c"), tu_const_f32(g, "s", 0, NULL, &scale),
                          qr_graph_new_value(g, "z")};
    qr_value_set_const(g, dq_in[0], &ct);
    qr_value_set_const(g, dq_in[2], &zt);
    qr_value *d = tu_node(g, "DequantizeLinear", "dq", 3, dq_in, 1)->out[0];
    v = tu_node(g, "Mul", "mul", 2, (qr_value *[]){v, d}, 1)->out[0];
    tu_output(g, tu_node(g, "Neg", "neg", 1, &v, 1)->out[0]);
    int order[4];
    cr_assert_eq(qr_exec_order(g, order), QR_OK);
    const int want[4] = {1, 0, 2, 3};
    for (int k = 0; k < 4; k++)
        cr_expect_eq(order[k], want[k], "place %d: node %d (%s), want %d", k, order[k], g->nodes[order[k]]->name,
                     want[k]);
    qr_exec *x;
    qr_error e;
    cr_assert_eq(qr_exec_new(g, NULL, &x, &e), QR_OK, "%s", e.msg);
    qr_tensor in = {.dtype = QR_F32, .ndim = 3, .dims = {R, 3, C}, .data = xs}, out;
    cr_assert_eq(qr_exec_run(x, &in, &out, &e), QR_OK, "%s", e.msg);
    qr_exec_stats s;
    qr_exec_get_stats(x, &s);
    cr_expect_eq(s.tiled_nodes, 3, "%d nodes run by tiles, want the Relu, the Mul and the Neg", s.tiled_nodes);
    for (int i = 0; i < R * 3 * C; i++) {
        double r = xs[i] > 0 ? xs[i] : 0, want_y = -(r * (0.25 * (c[i % C] - 3)));
        cr_assert(fabs(((float *)out.data)[i] - want_y) <= 1e-6 * (1 + fabs(want_y)), "y[%d] = %g, want %g", i,
                  (double)((float *)out.data)[i], want_y);
    }
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_graph_free(g);
}

/* The order an executor runs in (qr_exec_opts.node_seq, the quantizer's f32 run following a
 * measured graph's order): y = relu(x) + (-x), the Neg given first, so the observer sees -x, then
 * relu(x), then y; without a sequence the graph's own order (relu first). y is the same either way:
 * hand-computed, inputs of both signs. */
typedef struct run_order_seen {
    const qr_value *v[3]; /* a, b, y */
    char seen[8];
} run_order_seen;

static void record_run_order(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n, (void)t;
    run_order_seen *s = user;
    size_t k = strlen(s->seen);
    for (int i = 0; i < 3 && k < 7; i++)
        if (s->v[i] == v)
            s->seen[k] = "aby"[i];
}

Test(exec, a_node_sequence_sets_the_run_order)
{
    const int64_t dx[] = {6};
    const float xs[6] = {-2.5f, -1, -0.25f, 0, 0.75f, 3};
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 1, dx);
    qr_value *a = tu_node(g, "Relu", "relu", 1, &x, 1)->out[0];
    qr_value *b = tu_node(g, "Neg", "neg", 1, &x, 1)->out[0];
    qr_value *y = tu_node(g, "Add", "add", 2, (qr_value *[]){a, b}, 1)->out[0];
    tu_output(g, y);
    const int seq[3] = {1, 0, 2};
    for (int with = 0; with < 2; with++) {
        run_order_seen s = {.v = {a, b, y}};
        qr_exec_opts o = {.observer = record_run_order, .observer_user = &s, .node_seq = with ? seq : NULL};
        qr_exec *ex;
        qr_error e;
        cr_assert_eq(qr_exec_new(g, &o, &ex, &e), QR_OK, "%s", e.msg);
        qr_tensor in = {.dtype = QR_F32, .ndim = 1, .dims = {6}, .data = (void *)xs}, out;
        cr_assert_eq(qr_exec_run(ex, &in, &out, &e), QR_OK, "%s", e.msg);
        cr_expect_str_eq(s.seen, with ? "bay" : "aby", "observed %s", s.seen);
        const float want[6] = {2.5f, 1, 0.25f, 0, 0, 0}; /* relu(x) - x */
        for (int i = 0; i < 6; i++)
            cr_expect_eq(((float *)out.data)[i], want[i], "y[%d] = %g, want %g", i, (double)((float *)out.data)[i],
                         (double)want[i]);
        qr_tensor_free(&out);
        qr_exec_free(ex);
    }
    qr_graph_free(g);
}

/* A static plan's runs build each node's kernel context from its record (exec.c prepare_nodes),
 * made once a plan, not node by node. x [B, 2, 5, 5] -> Conv (W [3, 2, 3, 3], bias, strides 2,
 * pads 1: not the defaults) -> Clip [0, 0.7] (fused into the Conv: the record's activation) ->
 * Reshape [B, 3, 9] -> MatMul W2 [9, 4] -> Add b2 [4] (fused: the record's bias) -> Flatten axis 2
 * (not the default) -> [3 B, 4]; at B = 2,
 * three runs on new data (the records made on the first), on 1 and 2 threads: every bit the run that
 * builds each context per node (no_records) and the unfused one's (fuse=0), and a double
 * reference. */
static void check_prepared(int threads)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {2, 2, 5, 5}, dw[] = {3, 2, 3, 3}, d3[] = {3}, d1[] = {1}, dw2[] = {9, 4}, d4[] = {4};
    static float w[54], cb[3], w2[36], b2[4], xs[2 * 50];
    const float lo = 0.0f, hi = 0.7f;
    for (int i = 0; i < 54; i++)
        w[i] = (float)((i * 29) % 17) / 16.0f - 0.5f;
    for (int i = 0; i < 36; i++)
        w2[i] = (float)((i * 13) % 11) / 8.0f - 0.6f;
    for (int i = 0; i < 3; i++)
        cb[i] = 0.1f * (float)i - 0.1f;
    for (int i = 0; i < 4; i++)
        b2[i] = 0.25f * (float)i - 0.3f;
    qr_value *x = tu_input(g, "x", 4, dx);
    qr_value *ci[] = {x, tu_const_f32(g, "w", 4, dw, w), tu_const_f32(g, "cb", 1, d3, cb)};
    qr_node *conv = tu_node(g, "Conv", "conv", 3, ci, 1);
    const int64_t st[] = {2, 2}, pads[] = {1, 1, 1, 1};
    tu_attr_ints(g, conv, "strides", 2, st);
    tu_attr_ints(g, conv, "pads", 4, pads);
    qr_value *cl[] = {conv->out[0], tu_const_f32(g, "lo", 0, d1, &lo), tu_const_f32(g, "hi", 0, d1, &hi)};
    qr_value *v = tu_node(g, "Clip", "clip", 3, cl, 1)->out[0];
    static const int64_t shape[] = {0, 3, 9}, d3s[] = {3};
    qr_tensor st3 = {.dtype = QR_I64};
    qr_tensor_set_shape(&st3, 1, d3s);
    st3.data = (void *)shape;
    qr_value *sv = qr_graph_new_value(g, "shape");
    qr_value_set_const(g, sv, &st3);
    qr_value *ri[] = {v, sv};
    qr_value *mi[] = {tu_node(g, "Reshape", "reshape", 2, ri, 1)->out[0], tu_const_f32(g, "w2", 2, dw2, w2)};
    qr_value *mm = tu_node(g, "MatMul", "mm", 2, mi, 1)->out[0];
    qr_value *ai[] = {mm, tu_const_f32(g, "b2", 1, d4, b2)};
    v = tu_node(g, "Add", "add", 2, ai, 1)->out[0];
    qr_node *fl = tu_node(g, "Flatten", "flatten", 1, &v, 1);
    tu_attr_int(g, fl, "axis", 2);
    tu_output(g, fl->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_exec *xs3[3]; /* records; none (node by node); unfused */
    for (int k = 0; k < 3; k++) {
        qr_exec_opts o = {.threads = threads, .no_records = k == 1, .profile = 1};
        if (k == 2)
            tu_option("fuse", "0");
        cr_assert_eq(qr_exec_new(g, &o, &xs3[k], &e), QR_OK, "%s", e.msg);
        tu_option("fuse", "");
    }
    for (int r = 0; r < 3; r++) {
        int64_t b = 2;
        for (int64_t i = 0; i < b * 50; i++)
            xs[i] = (float)((i * 37 + r * 11) % 23) / 11.0f - 1.0f;
        qr_tensor in = {.dtype = QR_F32, .ndim = 4, .dims = {b, 2, 5, 5}, .data = xs}, out[3];
        for (int k = 0; k < 3; k++)
            cr_assert_eq(qr_exec_run(xs3[k], &in, &out[k], &e), QR_OK, "%s", e.msg);
        cr_assert_eq(out[0].ndim, 2);
        cr_assert(out[0].dims[0] == 3 * b && out[0].dims[1] == 4);
        for (int k = 0; k < 3; k++) { /* the Clip and the Add fused but under fuse=0 */
            const qr_node_prof *p = qr_exec_profile(xs3[k]);
            cr_assert_eq(p[1].runs == 0 && p[4].runs == 0, k < 2, "run %d: the Clip ran %lld times, the Add %lld", k,
                         (long long)p[1].runs, (long long)p[4].runs);
        }
        for (int k = 1; k < 3; k++)
            cr_assert_eq(memcmp(out[0].data, out[k].data, qr_tensor_nbytes(&out[0])), 0,
                         "run %d, %d threads: the records' run differs from run %d's", r, threads, k);
        const float *y = out[0].data;
        for (int64_t n = 0; n < b; n++)
            for (int oc = 0; oc < 3; oc++)
                for (int j = 0; j < 4; j++) {
                    double want = b2[j];
                    for (int p = 0; p < 9; p++) { /* conv output (n, oc, p / 3, p % 3), clipped */
                        double c = cb[oc];
                        for (int ic = 0; ic < 2; ic++)
                            for (int ky = 0; ky < 3; ky++)
                                for (int kx = 0; kx < 3; kx++) {
                                    int iy = p / 3 * 2 - 1 + ky, ix = p % 3 * 2 - 1 + kx;
                                    if (iy >= 0 && iy < 5 && ix >= 0 && ix < 5)
                                        c += (double)w[((oc * 2 + ic) * 3 + ky) * 3 + kx] *
                                             xs[((n * 2 + ic) * 5 + iy) * 5 + ix];
                                }
                        c = c < lo ? lo : c > hi ? hi : c;
                        want += c * w2[p * 4 + j];
                    }
                    double got = y[(n * 3 + oc) * 4 + j];
                    cr_assert(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "run %d (%lld, %d, %d): %g, want %g", r,
                              (long long)n, oc, j, got, want);
                }
        for (int k = 0; k < 3; k++)
            qr_tensor_free(&out[k]);
    }
    for (int k = 0; k < 3; k++)
        qr_exec_free(xs3[k]);
    qr_graph_free(g);
}

Test(exec, prepared_node_records_match_the_node_by_node_run)
{
    check_prepared(1);
    check_prepared(2);
}

/* EyeLike writes only its ones (no writes_all): the executor zeroes its output first, by the
 * record's bit (the tests poison what it does not zero, testutil.c). y = EyeLike(x, k = 1) + x,
 * x [4, 5], three runs on new data: y = x plus ones at (i, i + 1), by hand. */
Test(exec, a_record_zeroes_the_outputs_its_kernel_leaves)
{
    qr_graph *g = qr_graph_new();
    const int64_t dx[] = {4, 5};
    qr_value *x = tu_input(g, "x", 2, dx);
    qr_node *eye = tu_node(g, "EyeLike", "eye", 1, &x, 1);
    tu_attr_int(g, eye, "k", 1);
    qr_value *ai[] = {eye->out[0], x};
    tu_output(g, tu_node(g, "Add", "add", 2, ai, 1)->out[0]);
    qr_error e;
    cr_assert_eq(qr_pass_infer_and_fold(g, &e), QR_OK, "%s", e.msg);
    qr_exec *ex;
    cr_assert_eq(qr_exec_new(g, NULL, &ex, &e), QR_OK, "%s", e.msg);
    float xs[20];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 20; i++)
            xs[i] = (float)(i * (r + 1)) / 8.0f;
        qr_tensor in = {.dtype = QR_F32, .ndim = 2, .dims = {4, 5}, .data = xs}, out;
        cr_assert_eq(qr_exec_run(ex, &in, &out, &e), QR_OK, "%s", e.msg);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++)
                cr_assert_eq(((float *)out.data)[i * 5 + j], xs[i * 5 + j] + (j == i + 1 ? 1.0f : 0.0f),
                             "run %d (%d, %d)", r, i, j);
        qr_tensor_free(&out);
    }
    qr_exec_free(ex);
    qr_graph_free(g);
}

/* The mappings of this process advised MADV_HUGEPAGE ("hg" in smaps' VmFlags). */
static int huge_advised_mappings(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg"))
            n++;
    fclose(f);
    return n;
}

/* Relu then Neg over 4M floats (a 16 MB arena) with the arena's 2 MiB pages forced on or off
 * (the option arena-pages=2m or 4k): the values
 * are the hand-derived -max(x, 0) on both signs either way, and the arena is advised only when on. */
static void run_with_arena_pages(const char *huge)
{
    enum { M = 1 << 22 };
    set_arena_pages(huge[0] == '1' ? 2 : 1);
    qr_exec_free_spare();
    cr_assert_eq(qr_exec_arena_huge(), huge[0] == '1');
    int before = huge_advised_mappings();
    qr_graph *g;
    float *in;
    qr_exec *x = relu_neg_exec(M, 9, 4.5f, &g, &in);
    qr_error e;
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {M}, .data = in}, out;
    cr_assert_eq(qr_exec_run(x, &t, &out, &e), QR_OK, "%s", e.msg);
    for (int i = 0; i < M; i++)
        cr_assert_eq(((float *)out.data)[i], in[i] > 0 ? -in[i] : -0.f, "element %d", i);
    int during = huge_advised_mappings();
    if (huge[0] == '1')
        cr_assert_gt(during, before, "no mapping advised MADV_HUGEPAGE (%d before, %d)", before, during);
    else
        cr_assert_eq(during, before, "a mapping advised MADV_HUGEPAGE with arena-pages=4k");
    qr_tensor_free(&out);
    qr_exec_free(x);
    qr_exec_free_spare();
    qr_graph_free(g);
    free(in);
}

Test(exec, a_large_arena_takes_2mib_pages_when_chosen) { run_with_arena_pages("1"); }
Test(exec, a_large_arena_keeps_4kib_pages_when_not) { run_with_arena_pages("0"); }
