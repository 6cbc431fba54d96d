#include "graph.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* p with room for need elements; NULL (and the graph marked out of memory, p still valid)
 * when there is none. */
static void *grow(qr_graph *g, void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = qr_arena_fail_now() ? NULL : realloc(p, (size_t)c * elem);
    if (!q) {
        g->arena.oom = 1;
        return NULL;
    }
    *cap = c;
    return q;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* 0 (and the graph marked out of memory, the index unchanged) when it cannot grow. */
static int index_insert(qr_graph *g, qr_value *v)
{
    if ((g->n_values + 1) * 2 > g->index_cap) {
        int cap = g->index_cap ? g->index_cap * 2 : 64;
        qr_value **idx = qr_arena_fail_now() ? NULL : calloc((size_t)cap, sizeof *idx);
        if (!idx) {
            g->arena.oom = 1;
            return 0;
        }
        for (int i = 0; i < g->index_cap; i++) {
            qr_value *w = g->index[i];
            if (!w)
                continue;
            size_t h = hash_str(w->name) & (size_t)(cap - 1);
            while (idx[h])
                h = (h + 1) & (size_t)(cap - 1);
            idx[h] = w;
        }
        free(g->index);
        g->index = idx;
        g->index_cap = cap;
    }
    size_t h = hash_str(v->name) & (size_t)(g->index_cap - 1);
    while (g->index[h])
        h = (h + 1) & (size_t)(g->index_cap - 1);
    g->index[h] = v;
    return 1;
}

/* ---- large constants' blocks ---- */

typedef struct qr_blob qr_blob;
struct qr_blob {
    void *data;
    size_t len;       /* of the mapping */
    _Atomic int refs; /* the values (of any graph) that hold it */
    _Atomic int ro;   /* made read-only: it is or was shared */
};

static qr_blob *blob_new(size_t n)
{
    if (qr_arena_fail_now())
        return NULL;
    qr_blob *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    b->len = n ? n : 1;
    /* a mapping of its own: zeroed, page aligned, and given back whole by munmap */
    b->data = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->data == MAP_FAILED) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    atomic_init(&b->ro, 0);
    return b;
}

static void blob_unref(qr_blob *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        munmap(b->data, b->len);
        free(b);
    }
}

static qr_blob *blob_share(qr_blob *b)
{
    if (!atomic_exchange(&b->ro, 1))
        mprotect(b->data, b->len, PROT_READ);
    atomic_fetch_add(&b->refs, 1);
    return b;
}

qr_graph *qr_graph_new(void)
{
    qr_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    qr_arena_init(&g->arena);
    g->name = "";
    g->producer = "";
    return g;
}

int qr_graph_oom(const qr_graph *g)
{
    return g->arena.oom;
}

qr_status qr_graph_check_oom(const qr_graph *g, qr_error *e)
{
    return g->arena.oom ? qr_errorf(e, "out of memory") : QR_OK;
}

qr_status qr_graph_set_meta(qr_graph *g, const char *key, const char *val)
{
    const char *v = qr_arena_strdup(&g->arena, val);
    for (int i = 0; v && i < g->n_meta; i++)
        if (!strcmp(g->meta_key[i], key)) {
            g->meta_val[i] = v;
            return QR_OK;
        }
    const char *k = v ? qr_arena_strdup(&g->arena, key) : NULL;
    const char **nk = k ? qr_arena_alloc(&g->arena, sizeof *nk * (size_t)(g->n_meta + 1)) : NULL;
    const char **nv = nk ? qr_arena_alloc(&g->arena, sizeof *nv * (size_t)(g->n_meta + 1)) : NULL;
    if (!nv)
        return QR_ERR;
    if (g->n_meta) { /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(nk, g->meta_key, sizeof *nk * (size_t)g->n_meta);
        memcpy(nv, g->meta_val, sizeof *nv * (size_t)g->n_meta);
    }
    nk[g->n_meta] = k, nv[g->n_meta] = v;
    g->meta_key = nk, g->meta_val = nv;
    g->n_meta++;
    return QR_OK;
}

void qr_graph_free(qr_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_values; i++)
        blob_unref(g->values[i]->blob);
    free(g->values);
    free(g->nodes);
    free(g->index);
    qr_arena_free(&g->arena);
    free(g);
}

qr_value *qr_graph_find(const qr_graph *g, const char *name)
{
    if (!g->index_cap)
        return NULL;
    size_t h = hash_str(name) & (size_t)(g->index_cap - 1);
    for (qr_value *v; (v = g->index[h]); h = (h + 1) & (size_t)(g->index_cap - 1))
        if (strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

qr_value *qr_graph_new_value(qr_graph *g, const char *name)
{
    char buf[256];
    if (!name || !*name)
        name = "v";
    if (qr_graph_find(g, name)) {
        for (int k = 1;; k++) {
            snprintf(buf, sizeof buf, "%.200s_%d", name, k);
            if (!qr_graph_find(g, buf))
                break;
        }
        name = buf;
    }
    qr_value *v = qr_arena_alloc(&g->arena, sizeof *v);
    if (!v || !(v->name = qr_arena_strdup(&g->arena, name)))
        return NULL;
    v->t.ndim = -1;
    v->id = g->n_values;
    qr_value **values = grow(g, g->values, &g->cap_values, g->n_values + 1, sizeof *g->values);
    if (!values)
        return NULL;
    g->values = values;
    if (!index_insert(g, v))
        return NULL;
    g->values[g->n_values++] = v;
    return v;
}

qr_node *qr_graph_add_node(qr_graph *g, const char *op, const char *name, int n_in, int n_out)
{
    qr_node *n = qr_arena_alloc(&g->arena, sizeof *n);
    if (!n)
        return NULL;
    n->op = qr_arena_strdup(&g->arena, op);
    n->name = qr_arena_strdup(&g->arena, name ? name : "");
    n->domain = "";
    n->opset = g->opset;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = qr_arena_alloc(&g->arena, sizeof *n->in * (size_t)(n_in ? n_in : 1));
    n->out = qr_arena_alloc(&g->arena, sizeof *n->out * (size_t)(n_out ? n_out : 1));
    n->id = g->n_nodes;
    qr_node **nodes = n->op && n->name && n->in && n->out
                          ? grow(g, g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) : NULL;
    if (!nodes)
        return NULL;
    g->nodes = nodes;
    g->nodes[g->n_nodes++] = n;
    return n;
}

/* Memory for a constant of n bytes: a block of its own from QR_BLOB_MIN bytes (*blob set), else
 * the arena's (*blob NULL). */
static void *const_mem(qr_graph *g, size_t n, qr_blob **blob)
{
    *blob = n >= QR_BLOB_MIN ? blob_new(n) : NULL;
    if (*blob)
        return (*blob)->data;
    return n >= QR_BLOB_MIN ? NULL : qr_arena_try_alloc(&g->arena, n ? n : 1);
}

static void set_const(qr_value *v, const qr_tensor *t, void *data, qr_blob *blob)
{
    blob_unref(v->blob); /* a constant set again lets its old block go */
    v->blob = blob;
    v->t = *t;
    v->t.data = data;
    v->is_const = 1;
    v->producer = NULL;
}

void *qr_value_alloc_const(qr_graph *g, qr_value *v, const qr_tensor *t)
{
    qr_blob *b;
    void *data = const_mem(g, qr_tensor_nbytes(t), &b);
    if (data)
        set_const(v, t, data, b);
    return data;
}

void *qr_value_writable(qr_graph *g, qr_value *v)
{
    qr_blob *b = v->blob;
    if (!b || !atomic_load(&b->ro))
        return v->t.data;
    /* every copy that shared it is gone: v's alone, writable again (no copy; a later share makes it
     * read-only again) */
    if (atomic_load(&b->refs) == 1)
        return mprotect(b->data, b->len, PROT_READ | PROT_WRITE) ? NULL : (atomic_store(&b->ro, 0), v->t.data);
    /* copied before v lets the shared block go (the last holder's going unmaps it) */
    qr_tensor t = v->t;
    qr_blob *nb;
    void *data = const_mem(g, qr_tensor_nbytes(&t), &nb);
    if (data) {
        memcpy(data, t.data, qr_tensor_nbytes(&t));
        set_const(v, &t, data, nb);
    }
    return data;
}

qr_status qr_value_share_const(qr_graph *g, qr_value *v, const qr_value *src, qr_error *e)
{
    if (!src->blob)
        return qr_value_try_set_const(g, v, &src->t, e);
    set_const(v, &src->t, src->t.data, blob_share(src->blob));
    return QR_OK;
}

qr_status qr_value_try_set_const(qr_graph *g, qr_value *v, const qr_tensor *t, qr_error *e)
{
    size_t n = qr_tensor_nbytes(t);
    qr_blob *b = NULL;
    /* a small one copied into the arena without zeroing it first (every clone of a graph copies
     * its small constants here) */
    void *data = n && n < QR_BLOB_MIN ? qr_arena_try_memdup(&g->arena, t->data, n) : const_mem(g, n, &b);
    if (!data)
        return qr_errorf(e, "out of memory: constant '%s' needs %zu bytes", v->name, n);
    if (n && b)
        memcpy(data, t->data, n);
    set_const(v, t, data, b);
    return QR_OK;
}

void qr_value_set_const(qr_graph *g, qr_value *v, const qr_tensor *t)
{
    qr_error e;
    if (!v || qr_value_try_set_const(g, v, t, &e) == QR_OK)
        return;
    g->arena.oom = 1; /* out of memory: v (if any) unchanged, the graph marked */
}

int qr_value_shape_known(const qr_value *v)
{
    if (v->t.ndim < 0)
        return 0;
    for (int i = 0; i < v->t.ndim; i++)
        if (v->t.dims[i] < 0)
            return 0;
    return 1;
}

/* Min-heap of node indices: Kahn's algorithm always takes the earliest ready node. */
static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = v;
    return top;
}

/* Kahn's algorithm keyed on original order (a min-heap of ready nodes), so a
 * sorted graph keeps its order: O((nodes + edges) log nodes) whatever the
 * order nodes come in (the old repeated sweeps were quadratic on a reversed chain). */
/* The working arrays of a sort. */
typedef struct topo {
    qr_graph *g;
    int n, nv;
    int *pending;   /* per node: inputs not ready yet; later its sweep */
    int *ready;     /* per value: 1 ready, 0 produced by a node, -1 never produced */
    int *first;     /* readers of value v: users[first[v] .. first[v+1]) */
    int *users;
    int *heap;
    qr_node **order; /* a topological order */
} topo;

/* Each value's producer, and whether it is ready before any node runs (a constant or input);
 * an output produced twice is an error. */
static qr_status topo_producers(topo *t, qr_error *e)
{
    qr_graph *g = t->g;
    for (int i = 0; i < t->nv; i++) {
        qr_value *v = g->values[i];
        t->ready[i] = v->is_const || v->is_input;
        v->producer = NULL;
    }
    for (int i = 0; i < t->n; i++)
        g->nodes[i]->id = i; /* the index the order below is keyed on */
    for (int i = 0; i < t->n; i++)
        for (int j = 0; j < g->nodes[i]->n_out; j++)
            if (g->nodes[i]->out[j]) {
                qr_value *o = g->nodes[i]->out[j];
                if (o->producer || t->ready[o->id])
                    return qr_errorf(e, "node '%s' (%s): output '%s' is already produced elsewhere",
                                     g->nodes[i]->name, g->nodes[i]->op, o->name);
                o->producer = g->nodes[i];
            }
    for (int i = 0; i < t->nv; i++)
        if (!t->ready[i] && !g->values[i]->producer)
            t->ready[i] = -1; /* never produced */
    return QR_OK;
}

/* Pending inputs per node, and each value's readers (counting sort into users[]); an input that
 * nothing produces is an error. */
static qr_status topo_readers(topo *t, qr_error *e)
{
    qr_graph *g = t->g;
    for (int i = 0; i < t->n; i++) {
        qr_node *nd = g->nodes[i];
        for (int j = 0; j < nd->n_in; j++) {
            qr_value *v = nd->in[j];
            if (!v)
                continue;
            if (t->ready[v->id] < 0)
                return qr_errorf(e, "node '%s' (%s): input '%s' is not a graph input, initializer or node output",
                                 nd->name, nd->op, v->name);
            if (!t->ready[v->id]) {
                t->pending[i]++;
                t->first[v->id + 1]++;
            }
        }
    }
    for (int i = 0; i < t->nv; i++)
        t->first[i + 1] += t->first[i];
    int *fill = calloc((size_t)t->nv + 1, sizeof *fill);
    if (!fill)
        return qr_errorf(e, "out of memory sorting %d nodes", t->n);
    for (int i = 0; i < t->n; i++) {
        qr_node *nd = g->nodes[i];
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] && !t->ready[nd->in[j]->id])
                t->users[t->first[nd->in[j]->id] + fill[nd->in[j]->id]++] = i;
    }
    free(fill);
    return QR_OK;
}

/* Kahn's algorithm, the lowest index first: order[] gets every node, or a cycle is an error; every
 * graph output must be produced. */
static qr_status topo_order(topo *t, qr_error *e)
{
    qr_graph *g = t->g;
    int nh = 0, done = 0;
    for (int i = 0; i < t->n; i++)
        if (!t->pending[i])
            heap_push(t->heap, &nh, i);
    while (nh) {
        qr_node *nd = g->nodes[heap_pop(t->heap, &nh)];
        t->order[done++] = nd;
        for (int j = 0; j < nd->n_out; j++) {
            qr_value *o = nd->out[j];
            if (!o)
                continue;
            t->ready[o->id] = 1;
            for (int u = t->first[o->id]; u < t->first[o->id + 1]; u++)
                if (--t->pending[t->users[u]] == 0)
                    heap_push(t->heap, &nh, t->users[u]);
        }
    }
    if (done < t->n) {
        for (int i = 0; i < t->n; i++)
            if (t->pending[i])
                return qr_errorf(e, "node '%s' (%s): the graph has a cycle through this node", g->nodes[i]->name,
                                 g->nodes[i]->op);
        return QR_ERR;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (t->ready[g->outputs[i]->id] <= 0)
            return qr_errorf(e, "graph output '%s' is not produced by any node", g->outputs[i]->name);
    return QR_OK;
}

/* The order the sweeps of the original algorithm gave (and tests' golden dumps hold): sweep after
 * sweep over the nodes in index order, each placing every node whose inputs are ready. Node i lands
 * in sweep p(i) = max(0, p(j) for producers j < i, p(j) + 1 for producers j > i); computed in the
 * topological order found, then nodes are ordered by (sweep, index) with a counting sort: linear. */
static qr_status topo_sweep_order(topo *t, qr_error *e)
{
    qr_graph *g = t->g;
    int n = t->n;
    int *sweep = t->pending; /* all zero again: reused */
    int *count = calloc((size_t)n + 2, sizeof *count);
    qr_node **sorted = calloc((size_t)n + 1, sizeof *sorted);
    if (!count || !sorted) {
        free(count);
        free(sorted);
        return qr_errorf(e, "out of memory sorting %d nodes", n);
    }
    for (int k = 0; k < n; k++) {
        qr_node *nd = t->order[k];
        int p = 0;
        for (int j = 0; j < nd->n_in; j++) {
            qr_node *pr = nd->in[j] ? nd->in[j]->producer : NULL;
            if (pr) {
                int q = sweep[pr->id] + (pr->id > nd->id);
                if (q > p)
                    p = q;
            }
        }
        sweep[nd->id] = p;
        count[p + 1]++;
    }
    for (int k = 0; k < n; k++)
        count[k + 1] += count[k];
    for (int i = 0; i < n; i++)
        sorted[count[sweep[i]]++] = g->nodes[i];
    for (int i = 0; i < n; i++) {
        g->nodes[i] = sorted[i];
        sorted[i]->id = i;
    }
    free(count);
    free(sorted);
    return QR_OK;
}

qr_status qr_graph_toposort(qr_graph *g, qr_error *e)
{
    topo t = {.g = g, .n = g->n_nodes, .nv = g->n_values};
    size_t nedges = 0;
    for (int i = 0; i < t.n; i++)
        nedges += (size_t)g->nodes[i]->n_in;
    t.pending = calloc((size_t)t.n + 1, sizeof *t.pending);
    t.ready = calloc((size_t)t.nv + 1, sizeof *t.ready);
    t.first = calloc((size_t)t.nv + 2, sizeof *t.first);
    t.users = malloc(sizeof *t.users * (nedges + 1));
    t.heap = malloc(sizeof *t.heap * ((size_t)t.n + 1));
    t.order = calloc((size_t)t.n + 1, sizeof *t.order);
    qr_status st;
    if (!t.pending || !t.ready || !t.first || !t.users || !t.heap || !t.order)
        st = qr_errorf(e, "out of memory sorting %d nodes", t.n);
    else if ((st = topo_producers(&t, e)) == QR_OK && (st = topo_readers(&t, e)) == QR_OK &&
             (st = topo_order(&t, e)) == QR_OK)
        st = topo_sweep_order(&t, e);
    free(t.pending);
    free(t.ready);
    free(t.first);
    free(t.users);
    free(t.heap);
    free(t.order);
    return st;
}

void qr_graph_replace_uses(qr_graph *g, qr_value *from, qr_value *to)
{
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i]->n_in; j++)
            if (g->nodes[i]->in[j] == from)
                g->nodes[i]->in[j] = to;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == from)
            g->outputs[i] = to;
}

int qr_graph_use_count(const qr_graph *g, const qr_value *v)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead)
            for (int j = 0; j < g->nodes[i]->n_in; j++)
                c += g->nodes[i]->in[j] == v;
    return c;
}

void qr_graph_drop_unused(qr_graph *g)
{
    int changed = 1;
    int *uses = malloc(sizeof *uses * (size_t)(g->n_values + 1));
    if (!uses)
        return; /* best effort: the unused nodes stay */
    while (changed) {
        changed = 0;
        memset(uses, 0, sizeof *uses * (size_t)(g->n_values + 1));
        for (int i = 0; i < g->n_nodes; i++)
            for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++)
                if (g->nodes[i]->in[j])
                    uses[g->nodes[i]->in[j]->id]++;
        for (int i = 0; i < g->n_nodes; i++) {
            qr_node *n = g->nodes[i];
            if (n->dead)
                continue;
            int used = 0;
            for (int j = 0; j < n->n_out; j++)
                used |= n->out[j] && (uses[n->out[j]->id] || n->out[j]->is_output);
            if (!used)
                n->dead = changed = 1;
        }
    }
    free(uses);
}

void qr_graph_compact(qr_graph *g)
{
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) {
            g->nodes[i]->id = k;
            g->nodes[k++] = g->nodes[i];
        }
    g->n_nodes = k;
    /* The values no node uses go too, if there is memory to find them: without, they stay (unused, harmless). */
    char *used = calloc((size_t)g->n_values + 1, 1);
    qr_value **idx = g->index_cap ? calloc((size_t)g->index_cap, sizeof *idx) : NULL;
    if (!used || !idx) {
        free(used);
        free(idx);
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j])
                used[n->in[j]->id] = 1;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j])
                used[n->out[j]->id] = 1;
    }
    for (int i = 0; i < g->n_inputs; i++)
        used[g->inputs[i]->id] = 1;
    for (int i = 0; i < g->n_outputs; i++)
        used[g->outputs[i]->id] = 1;
    /* Values kept in place, in order; the name index rebuilt at its size (it holds them all already). */
    int nold = g->n_values;
    g->n_values = 0;
    free(g->index);
    g->index = idx;
    for (int i = 0; i < nold; i++) {
        qr_value *v = g->values[i];
        if (!used[i]) { /* a weight no node reads any more: its block goes now, not with the graph */
            blob_unref(v->blob);
            v->blob = NULL;
            if (v->is_const)
                v->t.data = NULL;
            continue;
        }
        v->id = g->n_values;
        g->values[g->n_values++] = v;
        size_t h = hash_str(v->name) & (size_t)(g->index_cap - 1);
        while (idx[h])
            h = (h + 1) & (size_t)(g->index_cap - 1);
        idx[h] = v;
    }
    free(used);
}

/* Kernels look their attributes up on every run (a convolution some 25 times: its own, then the
 * geometry's). The names are short and most differ in their first letter: compared here, without
 * a call of strcmp for each, which was 6% of the small ResNet int8 at batch 1. */
static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

const qr_attr *qr_node_attr(const qr_node *n, const char *name)
{
    for (int i = 0; i < n->n_attr; i++)
        if (same_name(n->attr[i].name, name))
            return &n->attr[i];
    return NULL;
}

int64_t qr_attr_i(const qr_node *n, const char *name, int64_t def)
{
    const qr_attr *a = qr_node_attr(n, name);
    return a && a->kind == QR_ATTR_INT ? a->i : def;
}

float qr_attr_f(const qr_node *n, const char *name, float def)
{
    const qr_attr *a = qr_node_attr(n, name);
    return a && a->kind == QR_ATTR_FLOAT ? a->f : def;
}

const char *qr_attr_s(const qr_node *n, const char *name, const char *def)
{
    const qr_attr *a = qr_node_attr(n, name);
    return a && a->kind == QR_ATTR_STRING ? a->s : def;
}

int qr_attr_ints(const qr_node *n, const char *name, const int64_t **v)
{
    const qr_attr *a = qr_node_attr(n, name);
    if (!a || a->kind != QR_ATTR_INTS)
        return -1;
    *v = a->ints;
    return a->n;
}

int qr_attr_floats(const qr_node *n, const char *name, const float **v)
{
    const qr_attr *a = qr_node_attr(n, name);
    if (!a || a->kind != QR_ATTR_FLOATS)
        return -1;
    *v = a->floats;
    return a->n;
}

qr_value *qr_node_input(const qr_node *n, int i)
{
    return i < n->n_in ? n->in[i] : NULL;
}

/* Copies a into n's attributes; on out-of-memory n is left as it was (the graph marked). */
static void add_attr(qr_graph *g, qr_node *n, const qr_attr *a)
{
    qr_arena *ar = &g->arena;
    if (!n)
        return;
    qr_attr *v = qr_arena_alloc(ar, sizeof *v * (size_t)(n->n_attr + 1));
    if (!v)
        return;
    if (n->n_attr)
        memcpy(v, n->attr, sizeof *v * (size_t)n->n_attr);
    qr_attr *c = &v[n->n_attr];
    *c = *a;
    int ok = (c->name = qr_arena_strdup(ar, a->name)) != NULL;
    if (a->s)
        ok &= (c->s = qr_arena_strdup(ar, a->s)) != NULL;
    if (a->ints)
        ok &= (c->ints = qr_arena_memdup(ar, a->ints, sizeof *a->ints * (size_t)a->n)) != NULL;
    if (a->floats)
        ok &= (c->floats = qr_arena_memdup(ar, a->floats, sizeof *a->floats * (size_t)a->n)) != NULL;
    if (a->strs) {
        c->strs = qr_arena_alloc(ar, sizeof *c->strs * (size_t)(a->n ? a->n : 1));
        ok &= c->strs != NULL;
        for (int i = 0; ok && i < a->n; i++)
            ok &= (c->strs[i] = qr_arena_strdup(ar, a->strs[i])) != NULL;
    }
    if (a->kind == QR_ATTR_TENSOR && a->t.data)
        ok &= (c->t.data = qr_arena_memdup(ar, a->t.data, qr_tensor_nbytes(&a->t))) != NULL;
    if (!ok)
        return;
    n->attr = v;
    n->n_attr++;
}

void qr_node_add_attr_i(qr_graph *g, qr_node *n, const char *name, int64_t v)
{
    qr_attr a = {.name = name, .kind = QR_ATTR_INT, .i = v};
    add_attr(g, n, &a);
}

void qr_node_add_attr_f(qr_graph *g, qr_node *n, const char *name, float v)
{
    qr_attr a = {.name = name, .kind = QR_ATTR_FLOAT, .f = v};
    add_attr(g, n, &a);
}

void qr_node_add_attr_s(qr_graph *g, qr_node *n, const char *name, const char *v)
{
    qr_attr a = {.name = name, .kind = QR_ATTR_STRING, .s = v};
    add_attr(g, n, &a);
}

void qr_node_add_attr_ints(qr_graph *g, qr_node *n, const char *name, int count, const int64_t *v)
{
    qr_attr a = {.name = name, .kind = QR_ATTR_INTS, .n = count, .ints = (int64_t *)v};
    add_attr(g, n, &a);
}

void qr_node_add_attr_as(qr_graph *g, qr_node *n, const char *name, const qr_attr *a)
{
    qr_attr c = *a;
    c.name = name;
    add_attr(g, n, &c);
}

static qr_graph *clone(const qr_graph *g, int share);

qr_graph *qr_graph_clone(const qr_graph *g)
{
    return clone(g, 0);
}

qr_graph *qr_graph_clone_shared(const qr_graph *g)
{
    return clone(g, 1);
}

static qr_graph *clone(const qr_graph *g, int share)
{
    qr_graph *c = qr_graph_new();
    if (!c)
        return NULL;
    c->opset = g->opset;
    c->name = qr_arena_strdup(&c->arena, g->name ? g->name : "");
    c->producer = qr_arena_strdup(&c->arena, g->producer ? g->producer : "");
    int meta_ok = 1;
    for (int i = 0; i < g->n_meta; i++)
        meta_ok &= qr_graph_set_meta(c, g->meta_key[i], g->meta_val[i]) == QR_OK;
    qr_value **map = calloc((size_t)g->n_values + 1, sizeof *map);
    if (!map || !c->name || !c->producer || !meta_ok) {
        free(map);
        qr_graph_free(c);
        return NULL;
    }
    for (int i = 0; i < g->n_values; i++) {
        const qr_value *v = g->values[i];
        qr_value *w = qr_graph_new_value(c, v->name);
        if (!w)
            goto oom;
        w->t = v->t;
        w->t.data = NULL;
        qr_error e;
        if (v->is_const && share && v->blob)
            set_const(w, &v->t, v->t.data, blob_share(v->blob));
        else if (v->is_const && qr_value_try_set_const(c, w, &v->t, &e) != QR_OK)
            goto oom;
        for (int d = 0; d < QR_MAX_DIMS; d++)
            if (v->dim_param[d] && !(w->dim_param[d] = qr_arena_strdup(&c->arena, v->dim_param[d])))
                goto oom;
        w->is_input = v->is_input;
        w->is_output = v->is_output;
        map[v->id] = w;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        qr_node *m = qr_graph_add_node(c, n->op, n->name, n->n_in, n->n_out);
        if (!m || !(m->domain = qr_arena_strdup(&c->arena, n->domain)))
            goto oom;
        m->opset = n->opset;
        m->def = n->def;
        m->dead = n->dead;
        for (int j = 0; j < n->n_in; j++)
            m->in[j] = n->in[j] ? map[n->in[j]->id] : NULL;
        for (int j = 0; j < n->n_out; j++) {
            m->out[j] = n->out[j] ? map[n->out[j]->id] : NULL;
            if (m->out[j])
                m->out[j]->producer = m;
        }
        for (int k = 0; k < n->n_attr; k++)
            add_attr(c, m, &n->attr[k]);
    }
    c->inputs = qr_arena_alloc(&c->arena, sizeof *c->inputs * (size_t)(g->n_inputs + 1));
    c->outputs = qr_arena_alloc(&c->arena, sizeof *c->outputs * (size_t)(g->n_outputs + 1));
    if (!c->inputs || !c->outputs || c->arena.oom) /* oom: an attribute did not fit */
        goto oom;
    for (int i = 0; i < g->n_inputs; i++)
        c->inputs[i] = map[g->inputs[i]->id];
    c->n_inputs = g->n_inputs;
    for (int i = 0; i < g->n_outputs; i++)
        c->outputs[i] = map[g->outputs[i]->id];
    c->n_outputs = g->n_outputs;
    free(map);
    return c;
oom:
    free(map);
    qr_graph_free(c);
    return NULL;
}

int64_t qr_graph_fixed_batch(const qr_graph *g)
{
    int64_t b = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const qr_value *v = g->inputs[i];
        if (v->t.ndim < 1 || v->t.dims[0] <= 0 || (b && v->t.dims[0] != b))
            return 0;
        b = v->t.dims[0];
    }
    return b;
}
