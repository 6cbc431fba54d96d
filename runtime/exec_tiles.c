/* Pointwise chains by tiles (exec_tiles.h). */
#include "exec_tiles.h"

#include <string.h>
#include <time.h>

#include "op.h"

/* Elements of one tensor's tile: 64 KB of f32, so a node's two inputs and output stay in L2
 * (and a tile's kernel call, ~0.2 us, stays small against its work). */
#define TILE_ELEMS 16384
#define TILES_MAX_NODES 64
#define TILES_MAX_IN 8

static int same_dims(const qr_tensor *a, const qr_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->dims[d] != b->dims[d])
            return 0;
    return 1;
}

/* Whether value v is an output of nodes[0..i). */
static int made_before(const qr_node *const *nodes, int i, const qr_value *v)
{
    for (int j = 0; j < i; j++)
        if (nodes[j]->out[0] == v)
            return 1;
    return 0;
}

int qr_tiles_plan(const qr_node *const *nodes, int count, const qr_tensor *vt, qr_tiles *t)
{
    if (count < 2 || count > TILES_MAX_NODES)
        return 0;
    const qr_tensor *s = &vt[nodes[0]->out[0]->id];
    int r = s->ndim, p = r;
    if (r < 1)
        return 0;
    for (int i = 0; i < count; i++) {
        const qr_node *n = nodes[i];
        if (n->n_out != 1 || !n->out[0] || n->n_in > TILES_MAX_IN || !same_dims(&vt[n->out[0]->id], s))
            return 0;
        for (int j = 0; j < n->n_in; j++) {
            const qr_value *v = n->in[j];
            if (!v || made_before(nodes, i, v) || same_dims(&vt[v->id], s))
                continue;
            /* a broadcast input: its leading axes (aligned to S's right end) of size 1 can be tiled */
            const qr_tensor *b = &vt[v->id];
            if (b->ndim > r)
                return 0;
            int lead = 0;
            while (lead < r && (lead < r - b->ndim || b->dims[lead - (r - b->ndim)] == 1))
                lead++;
            p = lead < p ? lead : p;
        }
    }
    if (p == 0 || qr_tensor_numel(s) == 0)
        return 0;
    t->axes = p;
    t->rows = 1;
    t->cols = 1;
    for (int d = 0; d < r; d++)
        *(d < p ? &t->rows : &t->cols) *= s->dims[d];
    t->tile_rows = t->cols >= TILE_ELEMS ? 1 : TILE_ELEMS / t->cols;
    return t->rows > t->tile_rows; /* one tile: nothing to gain */
}

typedef struct tiles_job {
    const qr_node *const *nodes;
    int count;
    const qr_tensor *vt;
    const qr_tiles *t;
    void *user;
    int64_t ns[TILES_MAX_NODES]; /* kernel time per node, when timed */
    int timed, failed;
    qr_error *e;
} tiles_job;

/* The part of tensor x that rows [r0, r0 + nr) of the chain read or write: x itself when it
 * broadcasts (its leading axes, all 1, dropped), else the rows' elements. */
static qr_tensor view(const qr_tensor *x, const qr_tensor *s, const qr_tiles *t, int64_t r0, int64_t nr)
{
    qr_tensor v = {.dtype = x->dtype};
    int tail = s->ndim - t->axes;
    if (same_dims(x, s)) {
        v.ndim = 1 + tail;
        v.dims[0] = nr;
        memcpy(v.dims + 1, s->dims + t->axes, sizeof(int64_t) * (size_t)tail);
        v.data = (char *)x->data + (size_t)(r0 * t->cols) * qr_dtype_size(x->dtype);
        return v;
    }
    v.ndim = x->ndim < tail ? x->ndim : tail;
    memcpy(v.dims, x->dims + (x->ndim - v.ndim), sizeof(int64_t) * (size_t)v.ndim);
    v.data = x->data;
    return v;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void tiles_range(void *arg, int64_t i0, int64_t i1)
{
    tiles_job *J = arg;
    const qr_tiles *t = J->t;
    const qr_tensor *s = &J->vt[J->nodes[0]->out[0]->id];
    for (int64_t i = i0; i < i1 && !__atomic_load_n(&J->failed, __ATOMIC_RELAXED); i++) {
        int64_t r0 = i * t->tile_rows, nr = t->rows - r0 < t->tile_rows ? t->rows - r0 : t->tile_rows;
        for (int c = 0; c < J->count; c++) {
            const qr_node *n = J->nodes[c];
            qr_tensor in[TILES_MAX_IN], out = view(&J->vt[n->out[0]->id], s, t, r0, nr);
            const qr_tensor *inp[TILES_MAX_IN];
            qr_tensor *outp[1] = {&out};
            for (int j = 0; j < n->n_in; j++) {
                inp[j] = n->in[j] ? &in[j] : NULL;
                if (n->in[j])
                    in[j] = view(&J->vt[n->in[j]->id], s, t, r0, nr);
            }
            qr_error e = {{0}};
            qr_kctx k = {.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = 1, .in = inp, .out = outp,
                         .err = &e, .user = J->user};
            int64_t t0 = J->timed ? now_ns() : 0;
            qr_status st = qr_op_run(&k);
            if (J->timed)
                __atomic_fetch_add(&J->ns[c], now_ns() - t0, __ATOMIC_RELAXED);
            if (st != QR_OK) {
                if (!__atomic_exchange_n(&J->failed, 1, __ATOMIC_ACQ_REL)) {
                    *J->e = e;
                    qr_error_prefix(J->e, "node '%s' (%s)", n->name, n->op);
                }
                return;
            }
        }
    }
}

qr_status qr_tiles_run(const qr_node *const *nodes, int count, const qr_tensor *vt, const qr_tiles *t,
                       qr_pool *pool, void *kernel_user, double *seconds, qr_error *e)
{
    tiles_job J = {.nodes = nodes, .count = count, .vt = vt, .t = t, .user = kernel_user, .timed = seconds != NULL,
                   .e = e};
    qr_parallel_for(pool, (t->rows + t->tile_rows - 1) / t->tile_rows, 1, tiles_range, &J);
    for (int c = 0; seconds && c < count; c++)
        seconds[c] += (double)J.ns[c] * 1e-9;
    return J.failed ? QR_ERR : QR_OK;
}
