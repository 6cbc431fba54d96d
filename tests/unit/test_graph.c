/* Graph IR: topological sort, cycle and dangling-input detection, compaction, large constants'
 * shared blocks. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dump.h"
#include "graph.h"
#include "onnx_export.h"
#include "testutil.h"

static const int64_t d4[] = {4};

Test(graph, toposort_reorders_nodes)
{
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 1, d4);
    /* b consumes a's output but is added first. */
    qr_node *b = qr_graph_add_node(g, "Relu", "b", 1, 1);
    qr_node *a = tu_node(g, "Neg", "a", 1, &x, 1);
    b->in[0] = a->out[0];
    b->out[0] = qr_graph_new_value(g, "y");
    tu_output(g, b->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_toposort(g, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(g->nodes[0], a);
    cr_assert_eq(g->nodes[1], b);
    cr_assert_eq(b->out[0]->producer, b);
    qr_graph_free(g);
}

/* A graph dump lists every attribute of a node, sorted by name, however many there are (it
 * printed the first 64). */
Test(graph, dump_lists_every_attribute)
{
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 1, d4);
    qr_node *n = tu_node(g, "Relu", "r", 1, &x, 1);
    tu_output(g, n->out[0]);
    for (int i = 99; i >= 0; i--) {
        char name[16];
        snprintf(name, sizeof name, "a%02d", i);
        qr_node_add_attr_i(g, n, name, i);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    qr_graph_dump(g, f);
    fclose(f);
    const char *at = buf;
    for (int i = 0; i < 100; i++) {
        char want[24];
        snprintf(want, sizeof want, "a%02d=%d", i, i);
        const char *p = strstr(at, want);
        cr_assert(p, "no %s after the ones before it in:\n%s", want, buf);
        at = p;
    }
    free(buf);
    qr_graph_free(g);
}

Test(graph, cycle_is_an_error_naming_a_node)
{
    qr_graph *g = qr_graph_new();
    qr_node *a = qr_graph_add_node(g, "Relu", "a", 1, 1);
    qr_node *b = qr_graph_add_node(g, "Relu", "b", 1, 1);
    a->out[0] = qr_graph_new_value(g, "va");
    b->out[0] = qr_graph_new_value(g, "vb");
    a->in[0] = b->out[0];
    b->in[0] = a->out[0];
    tu_output(g, b->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_toposort(g, &e), QR_ERR);
    cr_assert(strstr(e.msg, "cycle") && strstr(e.msg, "node 'a'"), "%s", e.msg);
    qr_graph_free(g);
}

Test(graph, dangling_input_is_an_error)
{
    qr_graph *g = qr_graph_new();
    qr_node *a = qr_graph_add_node(g, "Relu", "a", 1, 1);
    a->in[0] = qr_graph_new_value(g, "nowhere");
    a->out[0] = qr_graph_new_value(g, "y");
    tu_output(g, a->out[0]);
    qr_error e;
    cr_assert_eq(qr_graph_toposort(g, &e), QR_ERR);
    cr_assert(strstr(e.msg, "'nowhere' is not a graph input"), "%s", e.msg);
    qr_graph_free(g);
}

Test(graph, unique_names_and_lookup)
{
    qr_graph *g = qr_graph_new();
    qr_value *a = qr_graph_new_value(g, "w");
    qr_value *b = qr_graph_new_value(g, "w");
    cr_assert_str_eq(a->name, "w");
    cr_assert_str_eq(b->name, "w_1");
    cr_assert_eq(qr_graph_find(g, "w_1"), b);
    for (int i = 0; i < 1000; i++) {
        char n[32];
        snprintf(n, sizeof n, "v%d", i);
        qr_graph_new_value(g, n);
    }
    cr_assert_eq(qr_graph_find(g, "w"), a);
    cr_assert_str_eq(qr_graph_find(g, "v999")->name, "v999");
    cr_assert_null(qr_graph_find(g, "v1000"));
    qr_graph_free(g);
}

Test(graph, compact_drops_dead_nodes_and_unused_values)
{
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 1, d4);
    qr_node *a = tu_node(g, "Relu", "a", 1, &x, 1);
    qr_node *b = tu_node(g, "Neg", "b", 1, &x, 1);
    tu_output(g, a->out[0]);
    b->dead = 1;
    qr_graph_compact(g);
    cr_assert_eq(g->n_nodes, 1);
    cr_assert_null(qr_graph_find(g, "b_out0"));
    cr_assert_not_null(qr_graph_find(g, "a_out0"));
    for (int i = 0; i < g->n_values; i++)
        cr_assert_eq(g->values[i]->id, i);
    qr_graph_free(g);
}

/* Compaction keeps the name index right (rebuilt in place at its size): of 500 nodes' outputs, the
 * dead half are not found, the rest are, by their new ids, and new values still get unique names. */
Test(graph, compact_keeps_the_name_index)
{
    qr_graph *g = qr_graph_new();
    qr_value *x = tu_input(g, "x", 1, d4);
    for (int i = 0; i < 500; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        qr_node *n = tu_node(g, "Relu", name, 1, &x, 1);
        n->dead = i % 2;
        if (!n->dead)
            tu_output(g, n->out[0]);
    }
    qr_graph_compact(g);
    cr_assert_eq(g->n_nodes, 250);
    cr_assert_eq(g->n_values, 251);
    for (int i = 0; i < 500; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d_out0", i);
        const qr_value *v = qr_graph_find(g, name);
        if (i % 2) {
            cr_assert_null(v, "%s", name);
            continue;
        }
        cr_assert_not_null(v, "%s", name);
        cr_assert_eq(g->values[v->id], v, "%s", name);
    }
    qr_value *w = qr_graph_new_value(g, "n0_out0");
    cr_assert_str_eq(w->name, "n0_out0_1");
    cr_assert_eq(qr_graph_find(g, "n0_out0_1"), w);
    qr_graph_free(g);
}

/* A constant whose data does not fit in memory (a model's initializer can claim any size) is an
 * error naming it, not an abort; the value stays as it was. */
Test(graph, constant_too_large_is_an_error)
{
    qr_graph *g = qr_graph_new();
    qr_value *v = qr_graph_new_value(g, "big");
    float one = 1;
    qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {(int64_t)3 << 30, (int64_t)1 << 30}, .data = &one};
    qr_error e;
    cr_assert_eq(qr_value_try_set_const(g, v, &t, &e), QR_ERR);
    cr_assert(strstr(e.msg, "out of memory: constant 'big' needs"), "%s", e.msg);
    cr_assert(!v->is_const && !v->t.data);
    qr_tensor s = {.dtype = QR_F32, .ndim = 1, .dims = {1}, .data = &one};
    cr_assert_eq(qr_value_try_set_const(g, v, &s, &e), QR_OK, "%s", e.msg);
    cr_assert(v->is_const && ((float *)v->t.data)[0] == 1);
    qr_graph_free(g);
}

/* The protection of the mapping holding address p, as /proc/self/maps gives it ("rw-p"). */
static void protection_of(const void *p, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f);
    char line[512];
    strcpy(perms, "?");
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char pr[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            memcpy(perms, pr, 5);
            break;
        }
    }
    fclose(f);
}

/* A constant of QR_BLOB_MIN bytes or more is shared by qr_graph_clone_shared (the same data,
 * made read-only), a small one and every constant of qr_graph_clone are copied;
 * qr_value_writable gives the copy its own data and leaves the source's as it was; a block
 * outlives the graph that made it while a copy holds it. */
Test(graph, clone_shared_shares_large_constants)
{
    qr_graph *g = qr_graph_new();
    int64_t n = (int64_t)(QR_BLOB_MIN / sizeof(float)) + 3;
    float *w = malloc(sizeof *w * (size_t)n), small[4] = {1, -2, 3, -4};
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)(i % 97) - 48.5f;
    qr_tensor tw = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = w};
    qr_tensor ts = {.dtype = QR_F32, .ndim = 1, .dims = {4}, .data = small};
    qr_value *big = qr_graph_new_value(g, "big"), *sm = qr_graph_new_value(g, "small");
    qr_value_set_const(g, big, &tw);
    qr_value_set_const(g, sm, &ts);
    char perms[5];
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "rw-p");

    qr_graph *deep = qr_graph_clone(g), *c = qr_graph_clone_shared(g);
    cr_assert(deep && c);
    qr_value *cb = qr_graph_find(c, "big"), *cs = qr_graph_find(c, "small");
    cr_assert_eq(cb->t.data, big->t.data, "the large constant is shared");
    cr_assert_neq(cs->t.data, sm->t.data, "the small one is copied");
    cr_assert_neq(qr_graph_find(deep, "big")->t.data, big->t.data, "qr_graph_clone copies");
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "r--p", "a shared block is read-only");

    float *mine = qr_value_writable(c, cb);
    cr_assert(mine && mine != big->t.data && mine == cb->t.data);
    mine[5] = 1000;
    cr_assert_eq(((float *)big->t.data)[5], w[5], "the source keeps its value");
    cr_assert_eq(memcmp(mine, w, 5 * sizeof *w), 0);
    cr_assert_eq(qr_value_writable(g, sm), sm->t.data, "a constant of the arena is written in place");

    qr_graph *c2 = qr_graph_clone_shared(g);
    qr_graph_free(g); /* the block stays while c2 holds it */
    qr_graph_free(deep);
    const float *held = qr_graph_find(c2, "big")->t.data;
    cr_assert_eq(memcmp(held, w, sizeof *w * (size_t)n), 0);
    qr_graph_free(c2);
    qr_graph_free(c);
    free(w);
}

/* Small constants are copied into the clone's arena without zeroing it first (qr_arena_try_memdup):
 * each copy equals its source, whatever its size (an empty one, one byte, one under QR_BLOB_MIN),
 * and what qr_arena_try_alloc gives is still zeroed, in an arena whose chunk malloc hands back
 * after one full of 0xab was freed. */
Test(graph, clone_copies_small_constants_exactly)
{
    static const int64_t sizes[] = {0, 1, 3, 64, 65, 4097, (int64_t)QR_BLOB_MIN - 1};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    qr_graph *g = qr_graph_new();
    unsigned char *src = malloc(QR_BLOB_MIN + NS); /* constant k starts at src + k */
    for (size_t i = 0; i < QR_BLOB_MIN + NS; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    for (int k = 0; k < NS; k++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", k);
        qr_tensor t = {.dtype = QR_I8, .ndim = 1, .dims = {sizes[k]}, .data = src + k};
        qr_value_set_const(g, qr_graph_new_value(g, name), &t);
    }
    qr_graph *c = qr_graph_clone_shared(g), *d = qr_graph_clone(g);
    cr_assert(c && d && !qr_graph_oom(c) && !qr_graph_oom(d));
    for (int k = 0; k < NS; k++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", k);
        const qr_value *v = qr_graph_find(c, name), *w = qr_graph_find(d, name);
        cr_assert(v && w && v->is_const && w->is_const && v->t.dims[0] == sizes[k], "%s", name);
        cr_assert_neq(v->t.data, src + k, "%s: copied", name);
        cr_assert(!sizes[k] || !memcmp(v->t.data, src + k, (size_t)sizes[k]), "%s: the clone's copy differs", name);
        cr_assert(!sizes[k] || !memcmp(w->t.data, src + k, (size_t)sizes[k]), "%s: the deep copy differs", name);
    }
    qr_graph_free(d);
    qr_graph_free(c);
    qr_graph_free(g);
    qr_arena a;
    qr_arena_init(&a);
    memset(src, 0xab, QR_BLOB_MIN);
    cr_assert(qr_arena_try_memdup(&a, src, 4096));
    qr_arena_free(&a);
    qr_arena_init(&a);
    unsigned char *z = qr_arena_try_alloc(&a, 4096);
    cr_assert(z);
    for (int i = 0; i < 4096; i++)
        cr_assert_eq(z[i], 0, "byte %d of an allocation not zeroed", i);
    qr_arena_free(&a);
    free(src);
}

/* A block once shared stays read-only after every copy that shared it is freed; qr_value_writable
 * then gives the one holder its data back writable, its values kept (it copied from the unmapped
 * block before: a fault, the crash of steps = measure with adaround at stop 41), and a later share
 * makes it read-only again. */
Test(graph, writable_after_the_copies_are_freed)
{
    qr_graph *g = qr_graph_new();
    int64_t n = (int64_t)(QR_BLOB_MIN / sizeof(float)) * 2 + 1;
    float *w = malloc(sizeof *w * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)(i % 89) - 44.25f;
    qr_tensor tw = {.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = w};
    qr_value *big = qr_graph_new_value(g, "big");
    qr_value_set_const(g, big, &tw);
    qr_graph_free(qr_graph_clone_shared(g)); /* shared, then let go */
    char perms[5];
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "r--p", "a block once shared stays read-only");
    float *mine = qr_value_writable(g, big);
    cr_assert(mine && mine == big->t.data);
    cr_assert_eq(memcmp(mine, w, sizeof *w * (size_t)n), 0, "its values kept");
    mine[n - 1] = -7.5f;
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "rw-p");
    qr_graph *c = qr_graph_clone_shared(g);
    cr_assert(c);
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "r--p", "shared again: read-only again");
    cr_assert_eq(((const float *)qr_graph_find(c, "big")->t.data)[n - 1], -7.5f);
    qr_graph_free(c);
    qr_graph_free(g);
    free(w);
}

/* qr_value_share_const: a value of another graph takes a large constant's block (the same data,
 * made read-only, outliving the graph that made it) and a copy of a small one, with its type and
 * shape; writing the taker's through qr_value_writable leaves the source's as it was. */
Test(graph, share_const_takes_a_large_block_and_copies_a_small_one)
{
    qr_graph *g = qr_graph_new(), *h = qr_graph_new();
    int64_t n = ((int64_t)QR_BLOB_MIN / 5 + 1) * 5;
    int8_t *w = malloc((size_t)n), small[3] = {7, -8, 9};
    for (int64_t i = 0; i < n; i++)
        w[i] = (int8_t)(i % 251 - 125);
    qr_tensor tw = {.dtype = QR_I8, .ndim = 2, .dims = {n / 5, 5}, .data = w};
    qr_tensor ts = {.dtype = QR_I8, .ndim = 1, .dims = {3}, .data = small};
    qr_value *big = qr_graph_new_value(g, "big"), *sm = qr_graph_new_value(g, "small");
    qr_value_set_const(g, big, &tw);
    qr_value_set_const(g, sm, &ts);
    qr_value *hb = qr_graph_new_value(h, "big_quantized"), *hs = qr_graph_new_value(h, "small_quantized");
    qr_error e;
    cr_assert_eq(qr_value_share_const(h, hb, big, &e), QR_OK);
    cr_assert_eq(qr_value_share_const(h, hs, sm, &e), QR_OK);
    cr_assert(hb->is_const && hs->is_const && hb->t.dtype == QR_I8 && hb->t.ndim == 2 && hb->t.dims[0] == n / 5 &&
              hb->t.dims[1] == 5 && hs->t.dims[0] == 3);
    cr_assert_eq(hb->t.data, big->t.data, "the block is shared");
    cr_assert_neq(hs->t.data, sm->t.data, "the small one is copied");
    cr_assert_eq(memcmp(hs->t.data, small, 3), 0);
    char perms[5];
    protection_of(big->t.data, perms);
    cr_assert_str_eq(perms, "r--p", "a shared block is read-only");
    int8_t *mine = qr_value_writable(h, hb);
    cr_assert(mine && mine != big->t.data);
    mine[0] = 100;
    cr_assert_eq(((int8_t *)big->t.data)[0], w[0], "the source keeps its value");
    qr_value *hb2 = qr_graph_new_value(h, "big_again");
    cr_assert_eq(qr_value_share_const(h, hb2, big, &e), QR_OK);
    qr_graph_free(g); /* the block stays while h holds it */
    cr_assert_eq(memcmp(hb2->t.data, w, (size_t)n), 0);
    qr_graph_free(h);
    free(w);
}

/* Compaction lets the block of a constant no node reads go (its data NULL), and keeps the rest. */
Test(graph, compact_lets_an_unused_block_go)
{
    qr_graph *g = qr_graph_new();
    int64_t n = (int64_t)QR_BLOB_MIN;
    qr_tensor t = {.dtype = QR_U8, .ndim = 1, .dims = {n}, .data = calloc((size_t)n, 1)};
    qr_value *x = tu_input(g, "x", 1, d4);
    qr_value *dead = qr_graph_new_value(g, "dead");
    qr_value_set_const(g, dead, &t);
    qr_node *a = tu_node(g, "Relu", "a", 1, &x, 1);
    tu_output(g, a->out[0]);
    qr_graph *c = qr_graph_clone_shared(g);
    qr_graph_compact(c);
    cr_assert_null(qr_graph_find(c, "dead"));
    cr_assert_not_null(dead->t.data, "the source still holds it");
    qr_graph_compact(g);
    cr_assert_null(dead->t.data);
    qr_graph_free(c);
    qr_graph_free(g);
    free(t.data);
}

/* Every domain the nodes use is in the export's opset_import (once at most 16 were: the 17th and
 * later were left out, and the ONNX checker rejected the file): 20 nodes in 20 custom domains, each
 * of its own version, and one more node in the first of them. */
Test(graph, export_imports_every_domain)
{
    qr_graph *g = qr_graph_new();
    qr_value *v = tu_input(g, "x", 1, d4);
    char *dir = tu_tmpdir(), path[600], cmd[1400];
    for (int i = 0; i <= 20; i++) {
        char name[32], dom[32];
        snprintf(name, sizeof name, "n%d", i);
        snprintf(dom, sizeof dom, "com.example.d%d", i % 20);
        qr_node *n = tu_node(g, "Custom", name, 1, &v, 1);
        n->domain = qr_arena_strdup(&g->arena, dom);
        n->opset = 1 + i % 20;
        n->out[0]->t = v->t; /* the exported graph output's type */
        v = n->out[0];
    }
    tu_output(g, v);
    qr_error e;
    snprintf(path, sizeof path, "%s/domains.onnx", dir);
    cr_assert_eq(qr_onnx_save(g, path, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, sys\n"
             "m = onnx.load(sys.argv[1]); d = {o.domain: o.version for o in m.opset_import}\n"
             "want = dict({'com.example.d%%d' %% i: 1 + i for i in range(20)}, **{'': 17})\n"
             "assert d == want, d\n"
             "onnx.checker.check_model(m); print('ok')\" '%s'",
             path);
    free(tu_sh("%s", cmd));
    tu_rmdir(dir);
    qr_graph_free(g);
}

/* A model that would pass the limit (2 GB in qr_onnx_save; 2000 bytes here) is written with ONNX
 * external data: the 4 KB constant goes to path.data (onnx, the oracle, reads it back equal), the
 * 16-byte one stays inside; under the limit no .data is written. */
Test(graph, export_past_the_limit_uses_external_data)
{
    qr_graph *g = qr_graph_new();
    int64_t big_dims[1] = {1024}, small_dims[1] = {4};
    float big[1024], small[4] = {1.5f, -2.25f, 3, -4};
    for (int i = 0; i < 1024; i++)
        big[i] = (float)(i % 37) * 0.5f - 9;
    qr_value *in[2] = {tu_input(g, "x", 1, big_dims), tu_const_f32(g, "w", 1, big_dims, big)};
    qr_node *n = tu_node(g, "Add", "add", 2, in, 1);
    n->out[0]->t = in[0]->t;
    qr_value *in2[2] = {tu_input(g, "y", 1, small_dims), tu_const_f32(g, "b", 1, small_dims, small)};
    qr_node *n2 = tu_node(g, "Mul", "mul", 2, in2, 1);
    n2->out[0]->t = in2[0]->t;
    tu_output(g, n->out[0]);
    tu_output(g, n2->out[0]);
    char *dir = tu_tmpdir(), path[600], data[620], cmd[2000];
    qr_error e;
    snprintf(path, sizeof path, "%s/under.onnx", dir);
    snprintf(data, sizeof data, "%s.data", path);
    cr_assert_eq(qr_onnx_save_limit(g, path, 0, 100000, &e), QR_OK, "%s", e.msg);
    cr_assert(tu_file_exists(path) && !tu_file_exists(data), "under the limit: no external data");
    snprintf(path, sizeof path, "%s/past.onnx", dir);
    snprintf(data, sizeof data, "%s.data", path);
    cr_assert_eq(qr_onnx_save_limit(g, path, 0, 2000, &e), QR_OK, "%s", e.msg);
    cr_assert(tu_file_exists(data), "past the limit: no %s", data);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, sys, numpy as np\n"
             "from onnx import numpy_helper as nh\n"
             "m = onnx.load(sys.argv[1])\n"
             "w = {t.name: t for t in m.graph.initializer}\n"
             "raw = onnx.load(sys.argv[1], load_external_data=False)\n"
             "loc = {t.name: t.data_location for t in raw.graph.initializer}\n"
             "assert loc == {'w': 1, 'b': 0}, loc\n"
             "want = (np.arange(1024) %% 37).astype(np.float32) * 0.5 - 9\n"
             "assert np.array_equal(nh.to_array(w['w']), want)\n"
             "assert np.array_equal(nh.to_array(w['b']), np.float32([1.5, -2.25, 3, -4]))\n"
             "onnx.checker.check_model(sys.argv[1]); print('ok')\" '%s'",
             path);
    free(tu_sh("%s", cmd));
    tu_rmdir(dir);
    qr_graph_free(g);
}

/* The export streams the model into its file as it serializes it (no copy of it in memory): a
 * write that fails partway (a file size limit of 16 KB under a 64 KB weight, in a child process)
 * is an error naming the file, and leaves nothing in the folder, neither the model nor its
 * temporary file. */
Test(graph, export_that_cannot_be_written_leaves_nothing)
{
    qr_graph *g = qr_graph_new();
    static float w[16384];
    int64_t dims[1] = {16384};
    for (int i = 0; i < 16384; i++)
        w[i] = (float)(i % 11);
    qr_value *in[2] = {tu_input(g, "x", 1, dims), tu_const_f32(g, "w", 1, dims, w)};
    qr_node *n = tu_node(g, "Add", "add", 2, in, 1);
    n->out[0]->t = in[0]->t;
    tu_output(g, n->out[0]);
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct rlimit lim = {16384, 16384};
        signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails (EFBIG) instead of killing */
        qr_error e;
        int bad = setrlimit(RLIMIT_FSIZE, &lim) != 0 || qr_onnx_save(g, path, &e) == QR_OK ||
                  !strstr(e.msg, "m.onnx") || !strstr(e.msg, "write");
        if (bad)
            fprintf(stderr, "saved, or said: %s\n", e.msg);
        _exit(bad);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the save succeeded or said the wrong thing");
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        cr_assert(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."), "left behind: %s", de->d_name);
    closedir(d);
    /* the same graph without the limit: written, and onnx reads the weight back */
    qr_error e;
    cr_assert_eq(qr_onnx_save(g, path, &e), QR_OK, "%s", e.msg);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx, sys, numpy as np\n"
             "from onnx import numpy_helper as nh\n"
             "m = onnx.load(sys.argv[1])\n"
             "w = nh.to_array(m.graph.initializer[0])\n"
             "assert np.array_equal(w, (np.arange(16384) %% 11).astype(np.float32)), w\n"
             "onnx.checker.check_model(m); print('ok')\" '%s'",
             path);
    free(tu_sh("%s", cmd));
    tu_rmdir(dir);
    qr_graph_free(g);
}
