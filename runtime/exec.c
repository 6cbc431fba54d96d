#include "exec.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "exec_tiles.h"
#include "op.h"
#include "ops/f32_rows.h"
#include "ops/sgemm.h"
#include "options.h"

#define EXEC_ALIGN 64
/* Values computed while planning (shape arithmetic) are kept only if this small. */
#define PLAN_CONST_MAX_ELEMS 4096

enum { V_RUNTIME, V_INPUT, V_CONST, V_PLANNED };

struct qr_exec {
    const qr_graph *g;
    qr_exec_opts opts;
    int nv, nn;
    /* The nodes in the order they run (qr_exec_order), and by node index its place there. Every
     * per-node array below is by place in that order, except prof and cache (by node index). */
    const qr_node **nodes;
    int *order, *pos;
    qr_tensor *vt;      /* per value: type, shape, and data while running */
    unsigned char *kind; /* V_* per value */
    int *last_use;      /* place of the last node reading a value; nn for graph outputs */
    size_t *offset;     /* static plan: arena offset per runtime value */
    void **planned;     /* data of V_PLANNED values (malloc'd) */
    char *node_done;    /* node fully evaluated at plan time */
    int ncounted;       /* its nodes qr_exec_count_nodes counts: each run adds them x samples */
    int nsupplied;      /* of them, those the observer supplied in this run (not run) */
    int have_plan, dynamic;
    int poison; /* poison=1: outputs the executor does not zero are filled with 0xA5 */
    qr_tensor *plan_inputs; /* input shapes the plan was made for */
    unsigned char *arena;
    size_t arena_size;
    size_t arena_cap; /* the arena's bytes (arena_take may hand out a larger one) */
    qr_exec_stats stats;
    qr_pool *pool;
    qr_node_prof *prof; /* per node when opts.profile */
    qr_kcache *cache;   /* per node: what its kernel keeps across runs */
    size_t cache_total; /* their bytes (at most opts.cache_max) */
    const qr_exec *cache_from; /* qr_exec_share_cache's, or NULL */
    int *cache_map; /* qr_exec_share_cache_nodes': by node index, from's node (-1: none); NULL: the same index */
    unsigned char *fixed; /* per value: the same every run (qr_kinput_fixed) */
    qr_kwork_arena work; /* the kernels' shared workspace (qr_kwork) */
    qr_kwork_arena *work_at; /* the one they use: work, or another executor's (qr_exec_share_work) */
    /* a node's kernel context, sized once by the graph's widest node (no allocation per node):
     * io_in past the node's inputs is NULL up to io_nin; io_hi: the last node's input count */
    const qr_tensor **io_in;
    qr_tensor **io_out, *io_scratch;
    int io_nin, io_nout, io_hi;
    /* Activations fused into their producer (fuse_acts), per node index: act_out[n] the value
     * node n writes in place of its output 0 (the Relu's or Clip's output; NULL: none), act[n]
     * what it applies; skip[n] 1 for the Relu or Clip that then does not run. */
    const qr_value **act_out;
    qr_act *act;
    unsigned char *skip;
    /* bias[n]: the constant vector an Add fused into node n adds to its output 0 (NULL: none;
     * act_out[n] is then the Add's output) */
    const qr_value **bias;
    /* gelu[n]: node n runs the GELU chain it starts as one pass with these constants (fuse_gelu;
     * its act_out the chain's output, the chain's other nodes skipped); NULL: none */
    qr_gelu_consts **gelu;
    /* pregelu[n]: node n (an op whose def has gelu_in) reads pregelu_in[n], a GELU chain's input,
     * and runs the chain on it itself (k->pre_gelu), the chain's nodes all skipped: the chain's
     * f32 output, read by node n alone, is never made (fuse_gelu); NULL: none */
    qr_gelu_consts **pregelu;
    const qr_value **pregelu_in;
    /* Transposes folded into the MatMul beside them (fold_transposes): tfold[n] for Transpose node
     * n, the place of the MatMul that reads its input in place with strides (tslot[n] 0 or 1, the
     * operand) or writes its output so (tslot[n] 2); -1: none. mmfold[3 m + s]: the Transpose
     * folded into MatMul m's operand s (-1: none). tlive[n]: this plan folds it (plan_folds; not
     * in dynamic plans), with the strides tstr[n]; the Transpose then does not run. */
    int *tfold, *mmfold;
    unsigned char *tslot, *tlive;
    int64_t (*tstr)[QR_MAX_DIMS];
    /* tdiv[t]: the Div by a scalar between Transpose t and its MatMul (-1: none), which then runs
     * on the Transpose's input, in its layout; divt[d]: that Transpose, for Div node d (-1: none) */
    int *tdiv, *divt;
    qr_tensor tview[2], dview; /* scratch: a MatMul's operands read in place, a Div's output */
    /* Runs of pointwise nodes (exec_tiles.h): chain[n] the number of nodes of the run starting
     * at node n (0: none), from the graph; tiles[n] its split and tiled[n] 1 when the plan's
     * shapes allow it (static plans only). */
    int *chain;
    qr_tiles *tiles;
    unsigned char *tiled;
    const qr_node **chain_nodes; /* scratch: one chain's nodes */
    double *chain_seconds;       /* scratch: one chain's kernel times */
    /* Runs of nodes that compute bands of output rows (qr_op_def.band), each reading the one
     * before it alone (run_bands): bchain[p] the number of nodes of the run starting at place p
     * (0: none), from the graph; banded[p] the nodes the plan takes from there (0: none, else
     * at least 2), bgeom[p] each node's geometry and bstrip[p] the last node's rows per band. */
    int *bchain, *banded;
    qr_band_geom *bgeom;
    int64_t *bstrip;
    int64_t *bdone; /* scratch: per node of a chain, its rows made so far, then those wanted */
    /* The links' windows (bands_image), by the place of the node that makes the link: bwcap the
     * most rows it holds at once (its arena block's size, plan_memory), bwlo its first row held
     * while running, bwfill the byte its new rows start as (-1: none; run_node's zeros or poison) */
    int64_t *bwlo, *bwcap, *bwfill;
    /* A MatMul of a constant weight whose output (its fused bias Add's) only Slices read, each
     * along the last axis at step 1 (the attention's Q, K and V of one input projection):
     * scol[s] the MatMul each Slice node s computes its columns of, into its own output, with the
     * weight's and bias's columns in place (find_splits; -1: none); slive[s] this plan does
     * (plan_splits, static plans), from column scol0[s]; mmsplit[m] then MatMul m does not run
     * and its output gets no buffer. */
    int *scol;
    unsigned char *slive, *mmsplit;
    int64_t *scol0;
    /* Each node's kernel context as far as the static plan fixes it (prepare_nodes): prep[p]
     * for the node at place p, NULL until made for this plan (dropped with it). A batch-1 run of
     * a small CNN spent some 5% of its time building them node by node on every run. */
    struct node_prep *prep;
    const qr_tensor **prep_in; /* the records' input pointers, one block */
    qr_tensor **prep_out;      /* and their output pointers */
};

/* Kernels may read a few optional inputs past the node's own: slots up to this many are always there. */
#define IO_MIN_IN 64
#define IO_MIN_OUT 16

static size_t default_budget;

void qr_exec_set_default_max_memory(size_t bytes)
{
    default_budget = bytes;
}

/* Half the machine: a model that needs more is far more likely hostile or
 * broken than real, and the other half keeps the machine usable. Asked once:
 * sysconf(_SC_PHYS_PAGES) is a system call, and every node's run asks. */
static pthread_once_t half_once = PTHREAD_ONCE_INIT;
static size_t half_machine;

static void measure_machine(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    half_machine = pages <= 0 || psize <= 0 ? (size_t)4 << 30 : (size_t)pages / 2 * (size_t)psize;
}

size_t qr_exec_default_max_memory(void)
{
    if (default_budget)
        return default_budget;
    pthread_once(&half_once, measure_machine);
    return half_machine;
}

static size_t budget(const qr_exec *x)
{
    return x->opts.max_memory ? x->opts.max_memory : qr_exec_default_max_memory();
}

static char *dims_str(const qr_tensor *t, const qr_value *v, char *buf, size_t n);

/* The error for a tensor that does not fit in the budget: names the tensor, its type and sizes. */
static qr_status over_budget(const qr_exec *x, const qr_value *v, const qr_tensor *t, size_t need, qr_error *e)
{
    char ty[200];
    return qr_errorf(e,
                     "out of memory budget: tensor '%s' (%s, %zu bytes) needs %zu bytes in all, over the budget of "
                     "%zu bytes (--max-memory)",
                     v ? v->name : "(unnamed output)", dims_str(t, v, ty, sizeof ty), qr_tensor_nbytes(t), need,
                     budget(x));
}

static size_t align_up(size_t n)
{
    n = n ? n : 1;
    return (n + EXEC_ALIGN - 1) & ~(size_t)(EXEC_ALIGN - 1);
}

/* Ops whose outputs depend only on their inputs' shapes, not data. */
static int op_shape_only(const qr_node *n)
{
    return n->def && !n->domain[0] && (strcmp(n->op, "Shape") == 0 || strcmp(n->op, "Size") == 0);
}

/* The activation node m applies to its input 0, when m is a Relu, or a Clip whose bounds are
 * constants (or absent), as elementwise.c's clip_run reads them; 0 when m is neither. */
int qr_node_act(const qr_node *m, qr_act *a)
{
    if (m->domain[0] || m->n_out != 1 || !m->out[0])
        return 0;
    if (!strcmp(m->op, "Relu")) {
        *a = (qr_act){.relu = 1};
        return 1;
    }
    if (strcmp(m->op, "Clip"))
        return 0;
    double lo = -INFINITY, hi = INFINITY;
    if (m->opset < 11) {
        lo = qr_attr_f(m, "min", -FLT_MAX);
        hi = qr_attr_f(m, "max", FLT_MAX);
    }
    for (int i = 1; i < m->n_in && i < 3; i++) {
        const qr_value *b = m->in[i];
        if (!b)
            continue;
        if (!b->is_const || b->t.dtype != QR_F32 || qr_tensor_numel(&b->t) != 1 || !b->t.data)
            return 0;
        *(i == 1 ? &lo : &hi) = ((const float *)b->t.data)[0];
    }
    *a = (qr_act){.lo = (float)lo, .hi = (float)hi};
    return 1;
}

/* The constant an Add m adds to v when it is a bias of v's rows: f32, of v's last dim's size
 * (leading dims of 1 allowed, no more dims than v), m's other input; NULL otherwise. */
static const qr_value *bias_of(const qr_node *m, const qr_value *v)
{
    if (m->domain[0] || strcmp(m->op, "Add") || m->n_in != 2 || m->n_out != 1 || !m->out[0] ||
        (m->in[0] == v) == (m->in[1] == v))
        return NULL;
    const qr_value *c = m->in[0] == v ? m->in[1] : m->in[0];
    if (!c || !c->is_const || c->t.dtype != QR_F32 || !c->t.data || v->t.ndim < 1 || c->t.ndim < 1 ||
        c->t.ndim > v->t.ndim || c->t.dims[c->t.ndim - 1] != v->t.dims[v->t.ndim - 1] ||
        qr_tensor_numel(&c->t) != c->t.dims[c->t.ndim - 1])
        return NULL;
    return c;
}

/* uses[v]: how many node inputs read value v; reader[v]: the last node that reads it. */
static void count_readers(const qr_exec *x, int *uses, int *reader)
{
    for (int n = 0; n < x->nn; n++)
        for (int j = 0; j < x->nodes[n]->n_in; j++)
            if (x->nodes[n]->in[j]) {
                uses[x->nodes[n]->in[j]->id]++;
                reader[x->nodes[n]->in[j]->id] = n;
            }
}

/* Folds each Relu or Clip into the node before it when that node's kernel applies activations
 * (qr_op_def.act) and the Relu or Clip is the only reader of its f32 output 0, which is no graph
 * output: the producer writes the activation's output itself, in the same pass as its sums, and
 * the Relu or Clip does not run (the same bits: the kernels apply qr_act_apply). An Add of a
 * constant row vector (a Linear layer's bias after its MatMul) folds the same way into a node
 * whose kernel adds biases (qr_op_def.bias): one rounding, as the Add's. Not with an
 * observer, which sees every value, nor under fuse=0 (as the integer graph's fusions). */
static qr_status fuse_acts(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse)
        return QR_OK;
    int *uses = calloc((size_t)x->nv + 1, sizeof *uses), *reader = calloc((size_t)x->nv + 1, sizeof *reader);
    x->act_out = calloc((size_t)x->nn + 1, sizeof *x->act_out);
    x->act = calloc((size_t)x->nn + 1, sizeof *x->act);
    x->skip = calloc((size_t)x->nn + 1, 1);
    x->bias = calloc((size_t)x->nn + 1, sizeof *x->bias);
    if (!uses || !reader || !x->act_out || !x->act || !x->skip || !x->bias) {
        free(uses);
        free(reader);
        return QR_ERR;
    }
    count_readers(x, uses, reader);
    for (int n = 0; n < x->nn; n++) {
        const qr_node *p = x->nodes[n];
        const qr_value *v = p->n_out ? p->out[0] : NULL;
        if (!p->def || (!p->def->act && !p->def->bias) || !v || v->is_output || v->t.dtype != QR_F32 ||
            uses[v->id] != 1)
            continue;
        int m = reader[v->id];
        const qr_node *r = x->nodes[m];
        qr_act a;
        const qr_value *b = NULL;
        /* the reader's output must be read or kept: a dead one would hold its block to the end */
        if (m <= n || x->skip[m] || x->act_out[m] || x->last_use[r->out[0]->id] < 0)
            continue;
        if (p->def->act && r->in[0] == v && qr_node_act(r, &a))
            x->act[n] = a;
        else if (p->def->bias && (b = bias_of(r, v)))
            x->bias[n] = b;
        else
            continue;
        x->act_out[n] = r->out[0];
        x->skip[m] = 1;
    }
    free(uses);
    free(reader);
    return QR_OK;
}

/* Node n's place in the run order; -1 for a node not in the graph the executor was made for. */
static int place(const qr_exec *x, const qr_node *n)
{
    return n->id >= 0 && n->id < x->nn && x->g->nodes[n->id] == n ? x->pos[n->id] : -1;
}

/* The value node n writes as output j: a fused activation's output in place of output 0. */
static const qr_value *out_value(const qr_exec *x, const qr_node *n, int j)
{
    int i = place(x, n);
    if (j == 0 && x->act_out && i >= 0 && x->act_out[i])
        return x->act_out[i];
    return n->out[j];
}

/* Whether node n reads value v. */
static int reads(const qr_node *n, const qr_value *v)
{
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] == v)
            return 1;
    return 0;
}

/* GELU as PyTorch exports it, a chain of pointwise nodes read from its input x, recognised so that
 * it runs as one pass (qr_gelu_f32): the nodes' operations, in their order, on each element while
 * it is in a register, instead of one pass a node. Erf form (nn.GELU()): Div(x, sqrt 2) -> Erf ->
 * Add(1) -> Mul(x) -> Mul(0.5); tanh form (approximate='tanh'): Mul(x, x) -> Mul(x) ->
 * Mul(0.044715) -> Add(x) -> Mul(sqrt(2/pi)) -> Tanh -> Add(1) -> Mul(x) -> Mul(0.5); operands of
 * Add and Mul in either order. Each constant a rank-0 f32 holding GELU's value rounded to f32, each
 * value between two nodes f32, read by the next node alone and no graph output; x may have other
 * readers. Anything else (another constant, another order of the products) runs node by node. */

/* The value of v when it is a rank-0 f32 constant equal to want; 0 otherwise. */
static int const_is(const qr_value *v, float want)
{
    return v && v->is_const && v->t.dtype == QR_F32 && v->t.ndim == 0 && v->t.data &&
           ((const float *)v->t.data)[0] == want;
}

typedef struct gelu_walk {
    const qr_exec *x;
    const int *uses, *reader;
    int at;               /* the node whose output is followed, then the node read next */
    int nodes[9], count;  /* the chain's nodes so far */
} gelu_walk;

/* The chain's next node: the one reader of the last node's f32 output 0 (no graph output), a
 * default-domain op of one output and n_in inputs, not fused with anything yet; then its input
 * other than that output: other, or a constant equal to want when other is NULL (neither: one
 * input). 0 when the chain stops here. */
static int gelu_next(gelu_walk *w, const char *op, int n_in, const qr_value *other, float want)
{
    const qr_exec *x = w->x;
    const qr_value *v = x->nodes[w->at]->out[0];
    if (!v || v->is_output || v->t.dtype != QR_F32 || w->uses[v->id] != 1)
        return 0;
    int m = w->reader[v->id];
    const qr_node *r = x->nodes[m];
    if (m <= w->at || r->domain[0] || strcmp(r->op, op) || r->n_in != n_in || r->n_out != 1 || !r->out[0] ||
        x->skip[m] || x->act_out[m] || r->out[0]->t.dtype != QR_F32)
        return 0;
    if (n_in == 2) {
        const qr_value *o = r->in[0] == v ? r->in[1] : r->in[1] == v ? r->in[0] : NULL;
        if (!o || o == v || (other ? o != other : !const_is(o, want)))
            return 0;
    }
    w->nodes[w->count++] = w->at = m;
    return 1;
}

/* The GELU chain starting at node n into w and g; 0 when there is none. */
static int gelu_match(const qr_exec *x, int n, const int *uses, const int *reader, gelu_walk *w,
                      qr_gelu_consts *g)
{
    const qr_node *p = x->nodes[n];
    const float sqrt2 = 1.41421356237309505f, one = 1.0f, half = 0.5f;
    const float cubic = 0.044715f, sqrt_2_pi = 0.797884560802865356f; /* sqrt(2 / pi) */
    *w = (gelu_walk){.x = x, .uses = uses, .reader = reader, .at = n, .nodes = {n}, .count = 1};
    if (p->domain[0] || p->n_in != 2 || p->n_out != 1 || !p->out[0] || !p->in[0] || p->in[0]->t.dtype != QR_F32 ||
        x->skip[n] || x->act_out[n])
        return 0;
    const qr_value *v = p->in[0];
    if (!strcmp(p->op, "Div") && const_is(p->in[1], sqrt2)) {
        *g = (qr_gelu_consts){.tanh_form = 0, .c = {sqrt2, one, half, 0}};
        return gelu_next(w, "Erf", 1, NULL, 0) && gelu_next(w, "Add", 2, NULL, one) && gelu_next(w, "Mul", 2, v, 0) &&
               gelu_next(w, "Mul", 2, NULL, half);
    }
    if (!strcmp(p->op, "Mul") && p->in[1] == v) {
        *g = (qr_gelu_consts){.tanh_form = 1, .c = {cubic, sqrt_2_pi, one, half}};
        return gelu_next(w, "Mul", 2, v, 0) && gelu_next(w, "Mul", 2, NULL, cubic) && gelu_next(w, "Add", 2, v, 0) &&
               gelu_next(w, "Mul", 2, NULL, sqrt_2_pi) && gelu_next(w, "Tanh", 1, NULL, 0) &&
               gelu_next(w, "Add", 2, NULL, one) && gelu_next(w, "Mul", 2, v, 0) && gelu_next(w, "Mul", 2, NULL, half);
    }
    return 0;
}

/* Each GELU chain (gelu_match) runs at its first node, which writes the chain's output; the rest
 * are skipped. The chain's input is then read there last by the chain (its other readers keep
 * it). Not with an observer (it sees every value) nor under fuse=0; after fuse_acts. */
static qr_status fuse_gelu(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse)
        return QR_OK;
    int *uses = calloc((size_t)x->nv + 1, sizeof *uses), *reader = calloc((size_t)x->nv + 1, sizeof *reader);
    x->gelu = calloc((size_t)x->nn + 1, sizeof *x->gelu);
    x->pregelu = calloc((size_t)x->nn + 1, sizeof *x->pregelu);
    x->pregelu_in = calloc((size_t)x->nn + 1, sizeof *x->pregelu_in);
    if (!uses || !reader || !x->gelu || !x->pregelu || !x->pregelu_in) {
        free(uses);
        free(reader);
        return QR_ERR;
    }
    count_readers(x, uses, reader);
    qr_status st = QR_OK;
    for (int n = 0; n < x->nn && st == QR_OK; n++) {
        gelu_walk w;
        qr_gelu_consts g;
        if (!gelu_match(x, n, uses, reader, &w, &g))
            continue;
        const qr_node *last = x->nodes[w.nodes[w.count - 1]];
        /* the chain's output must be read or kept, as fuse_acts asks */
        if (x->last_use[last->out[0]->id] < 0)
            continue;
        /* read by one node that can run the chain on its input itself (DynamicQuantizeRows: GELU's
         * output quantized per row for the next product) */
        const qr_value *cv = last->out[0];
        int r = uses[cv->id] == 1 && !cv->is_output ? reader[cv->id] : -1;
        const qr_node *rn = r > w.at ? x->nodes[r] : NULL;
        int pre = rn && rn->def && rn->def->gelu_in && rn->n_in >= 1 && rn->in[0] == cv && !x->skip[r] &&
                  !x->act_out[r] && !x->gelu[r] && !x->pregelu[r];
        qr_gelu_consts **slot = pre ? &x->pregelu[r] : &x->gelu[n];
        if (!(*slot = malloc(sizeof g))) {
            st = QR_ERR;
            break;
        }
        **slot = g;
        if (pre) {
            x->pregelu_in[r] = x->nodes[n]->in[0];
            x->skip[n] = 1;
        } else
            x->act_out[n] = last->out[0];
        for (int i = 1; i < w.count; i++)
            x->skip[w.nodes[i]] = 1;
        /* x's last reader that still runs (or the end, for a graph output) */
        const qr_value *in = x->nodes[n]->in[0];
        int lu = in->is_output ? x->nn : pre ? r : n;
        for (int m = n + 1; m < x->nn && !in->is_output; m++)
            if (!x->skip[m] && reads(x->nodes[m], in) && m > lu)
                lu = m;
        x->last_use[in->id] = lu;
    }
    free(uses);
    free(reader);
    return st;
}

static int is_op(const qr_node *n, const char *op)
{
    return n->def && !n->domain[0] && !strcmp(n->op, op);
}

/* The one node from place `from` on that reads v for more than its shape: -1 none, -2 more than
 * one or one fused into another node. */
static int sole_reader(const qr_exec *x, const qr_value *v, int from)
{
    int m = -1;
    for (int n = from; n < x->nn; n++) {
        const qr_node *r = x->nodes[n];
        if (!reads(r, v) || (op_shape_only(r) && !x->skip[n]))
            continue;
        if (m >= 0 || x->skip[n])
            return -2;
        m = n;
    }
    return m;
}

/* Whether node d divides v (its input 0) by a one-element f32 constant, on its own (no fusion),
 * into a value that is no graph output. */
static int div_by_scalar(const qr_exec *x, int d, const qr_value *v)
{
    const qr_node *n = x->nodes[d];
    const qr_value *c = n->n_in == 2 ? n->in[1] : NULL;
    return is_op(n, "Div") && n->in[0] == v && c && c != v && c->is_const && c->t.dtype == QR_F32 && c->t.data &&
           qr_tensor_numel(&c->t) == 1 && n->n_out == 1 && n->out[0] && !n->out[0]->is_output && !x->skip[d] &&
           !x->act_out[d] && !(x->gelu && x->gelu[d]);
}

/* A Transpose's only reader a MatMul, beside nodes that read its shape alone: the MatMul reads the
 * Transpose's input in place, through the permuted strides (its GEMM packs the operand from them,
 * where the Transpose copied it whole: ORT's FusedMatMul does the same), and the Transpose does
 * not run. Also with a Div by a scalar constant between them (the attention's query over
 * sqrt(d)), the Div's only reader the MatMul: the Div runs on the Transpose's input instead, in
 * its layout (each element's quotient as before), and the MatMul reads the quotients strided. A MatMul's output read by a Transpose alone: the MatMul writes it in the Transpose's
 * layout (its rows' stores with strides), in the buffer the Transpose's output then takes over.
 * The same sums (qr_sgemm's, packed from anywhere), so the same bits. Which ones a plan folds is
 * plan_folds'; here only the graph's side. Not with an observer (it sees every value) nor under
 * fuse=0; after fuse_acts and fuse_gelu (a MatMul with a fused Add or activation keeps its output). */
static qr_status fold_transposes(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse)
        return QR_OK;
    size_t nn = (size_t)x->nn + 1;
    int *uses = calloc((size_t)x->nv + 1, sizeof *uses), *reader = calloc((size_t)x->nv + 1, sizeof *reader);
    x->tfold = malloc(nn * sizeof *x->tfold);
    x->mmfold = malloc(3 * nn * sizeof *x->mmfold);
    x->tslot = calloc(nn, 1);
    x->tlive = calloc(nn, 1);
    x->tstr = calloc(nn, sizeof *x->tstr);
    x->tdiv = malloc(nn * sizeof *x->tdiv);
    x->divt = malloc(nn * sizeof *x->divt);
    if (!uses || !reader || !x->tfold || !x->mmfold || !x->tslot || !x->tlive || !x->tstr || !x->tdiv || !x->divt) {
        free(uses);
        free(reader);
        return QR_ERR;
    }
    for (size_t n = 0; n < nn; n++)
        x->tfold[n] = x->mmfold[3 * n] = x->mmfold[3 * n + 1] = x->mmfold[3 * n + 2] = x->tdiv[n] = x->divt[n] = -1;
    count_readers(x, uses, reader);
    for (int t = 0; t < x->nn; t++) {
        const qr_node *tn = x->nodes[t];
        if (!is_op(tn, "Transpose") || x->skip[t] || tn->n_in != 1 || tn->n_out != 1 || !tn->in[0] || !tn->out[0])
            continue;
        const qr_value *v = tn->out[0], *src = tn->in[0], *rv = v;
        int m = sole_reader(x, v, t + 1), d = -1;
        if (m >= 0 && div_by_scalar(x, m, v)) { /* the attention's query scaled on the way */
            d = m;
            rv = x->nodes[d]->out[0];
            m = sole_reader(x, rv, d + 1);
        }
        const qr_node *r = m >= 0 ? x->nodes[m] : NULL;
        int slot = r && r->n_in == 2 && r->in[1] == rv;
        if (r && !v->is_output && !src->is_const && is_op(r, "MatMul") && r->n_in == 2 &&
            (r->in[0] == rv) != (r->in[1] == rv) && x->mmfold[3 * m + slot] < 0) {
            x->tfold[t] = m;
            x->tslot[t] = (unsigned char)slot;
            x->mmfold[3 * m + slot] = t;
            x->tdiv[t] = d;
            if (d >= 0)
                x->divt[d] = t;
            if (x->last_use[src->id] < (d >= 0 ? d : m))
                x->last_use[src->id] = d >= 0 ? d : m; /* the Div or the MatMul reads it */
            continue;
        }
        int p = -1;
        for (int n = t - 1; n >= 0 && p < 0; n--)
            if (x->nodes[n]->n_out && x->nodes[n]->out[0] == src)
                p = n;
        if (p >= 0 && is_op(x->nodes[p], "MatMul") && !x->skip[p] && !x->act_out[p] && x->nodes[p]->n_out == 1 &&
            !src->is_output && uses[src->id] == 1 && x->mmfold[3 * p + 2] < 0) {
            x->tfold[t] = p;
            x->tslot[t] = 2;
            x->mmfold[3 * p + 2] = t;
        }
    }
    free(uses);
    free(reader);
    return QR_OK;
}

/* The graph's side of the split products (qr_exec.scol): a MatMul of two inputs, without a fused
 * activation or an output written with strides (a Transpose folded into an operand: plan_splits
 * takes it only where the plan does not), whose output (its fused Add's) no graph output, read by Slices
 * (as their data) and by nodes that read its shape alone. Its inputs then live until the last
 * Slice, which may compute from them. Whether a plan takes it is plan_splits'. Not with an
 * observer (it sees every value) nor under fuse=0. */
static qr_status find_splits(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse)
        return QR_OK;
    size_t nn = (size_t)x->nn + 1;
    x->scol = malloc(nn * sizeof *x->scol);
    x->slive = calloc(nn, 1);
    x->mmsplit = calloc(nn, 1);
    x->scol0 = calloc(nn, sizeof *x->scol0);
    if (!x->scol || !x->slive || !x->mmsplit || !x->scol0)
        return QR_ERR;
    for (size_t n = 0; n < nn; n++)
        x->scol[n] = -1;
    for (int m = 0; m < x->nn; m++) {
        const qr_node *mn = x->nodes[m];
        const qr_value *v = out_value(x, mn, 0);
        if (!is_op(mn, "MatMul") || x->skip[m] || mn->n_in != 2 || mn->n_out != 1 || !mn->in[0] || !mn->in[1] ||
            !v || v->is_output || (x->act_out[m] && !x->bias[m]) || mn->in[0] == mn->in[1] ||
            (x->mmfold && x->mmfold[3 * m + 2] >= 0))
            continue;
        int ok = 1, slices = 0, last = m;
        /* its readers lie before its last use (a MatMul chain's: the next node) */
        for (int n = m + 1; n < x->nn && n <= x->last_use[v->id] && ok; n++) {
            const qr_node *r = x->nodes[n];
            if (!reads(r, v) || op_shape_only(r))
                continue;
            ok = is_op(r, "Slice") && !x->skip[n] && r->in[0] == v && r->n_out == 1 && r->out[0] && r->n_in >= 3;
            for (int j = 1; ok && j < r->n_in; j++)
                ok = r->in[j] != v;
            slices++, last = n;
        }
        if (!ok || !slices)
            continue;
        for (int n = m + 1; n <= last; n++)
            if (x->nodes[n]->n_in && reads(x->nodes[n], v) && !op_shape_only(x->nodes[n]))
                x->scol[n] = m;
        for (int j = 0; j < 2; j++)
            if (x->last_use[mn->in[j]->id] >= 0 && x->last_use[mn->in[j]->id] < last)
                x->last_use[mn->in[j]->id] = last;
    }
    return QR_OK;
}

/* Value v's one integer, known while planning (a constant or computed then), into *out. */
static int planned_int(const qr_exec *x, const qr_value *v, int64_t *out)
{
    const qr_tensor *t = v ? &x->vt[v->id] : NULL;
    if (!t || !t->data || (t->dtype != QR_I64 && t->dtype != QR_I32) || qr_tensor_numel(t) != 1)
        return 0;
    *out = qr_get_i64(t->data, t->dtype, 0);
    return 1;
}

/* Which split products (find_splits) this static plan takes: every Slice of the MatMul's output
 * one range of columns of the last axis at step 1 (opset 10's inputs, known while planning), f32
 * with a constant 2-D weight, an AVX-512 or AVX2 GEMM, at least 16 rows (fewer take qr_sgemm's
 * routes for a row or a few, which differ on a packed weight); all of a MatMul's Slices or none. */
static void plan_splits(qr_exec *x)
{
    for (int m = 0; x->scol && m < x->nn; m++)
        x->mmsplit[m] = 0;
    for (int s = 0; x->scol && s < x->nn; s++)
        x->slive[s] = 0;
    if (!x->scol || x->dynamic || !qr_sgemm_best())
        return;
    /* the MatMuls find_splits marked, in one pass (a scan per node was quadratic: 200,000 Relus
     * took 37 s to plan under ASan, test_large_graphs) */
    for (int s = 0; s < x->nn; s++)
        if (x->scol[s] >= 0)
            x->mmsplit[x->scol[s]] = 2;
    for (int m = 0; m < x->nn; m++) {
        const qr_node *mn = x->nodes[m];
        int ok = !x->node_done[m];
        if (x->mmsplit[m] != 2) /* not a split MatMul (find_splits) */
            continue;
        x->mmsplit[m] = 0;
        for (int o = 0; o < 2 && x->mmfold; o++) /* an operand this plan reads with strides */
            ok = ok && (x->mmfold[3 * m + o] < 0 || !x->tlive[x->mmfold[3 * m + o]]);
        const qr_tensor *a = &x->vt[mn->in[0]->id], *b = &x->vt[mn->in[1]->id];
        const qr_tensor *y = &x->vt[out_value(x, mn, 0)->id];
        ok = ok && a->dtype == QR_F32 && b->dtype == QR_F32 && x->kind[mn->in[1]->id] == V_CONST && b->data &&
             b->ndim == 2 && a->ndim >= 2 && y->ndim == a->ndim && y->dtype == QR_F32 &&
             y->dims[y->ndim - 1] == b->dims[1] && a->dims[a->ndim - 1] == b->dims[0] &&
             qr_tensor_numel(a) >= 16 * b->dims[0]; /* rows past the GEMM's one-row and few-row routes */
        for (int s = m + 1; s < x->nn; s++) {
            if (x->scol[s] != m)
                continue;
            const qr_node *sn = x->nodes[s];
            const qr_tensor *o = &x->vt[sn->out[0]->id];
            int64_t st = 0, en = 0, ax = 0 /* absent: axes 0.. */, step = 1, r = y->ndim, n = y->dims[r - 1];
            ok = ok && !x->node_done[s] && sn->opset >= 10 && sn->n_in <= 5 && planned_int(x, sn->in[1], &st) &&
                 planned_int(x, sn->in[2], &en) && (sn->n_in < 4 || !sn->in[3] || planned_int(x, sn->in[3], &ax)) &&
                 (sn->n_in < 5 || !sn->in[4] || planned_int(x, sn->in[4], &step)) && step == 1 &&
                 (ax == r - 1 || ax == -1) && o->ndim == r && o->dtype == QR_F32;
            for (int d = 0; ok && d + 1 < r; d++)
                ok = o->dims[d] == y->dims[d];
            if (!ok)
                break;
            st = st < 0 ? st + n : st; /* as slice_plan: clamped to [0, n], the length inferred */
            st = st < 0 ? 0 : st > n ? n : st;
            ok = o->dims[r - 1] >= 0 && st + o->dims[r - 1] <= n;
            x->scol0[s] = st;
        }
        if (!ok)
            continue;
        x->mmsplit[m] = 1;
        for (int s = m + 1; s < x->nn; s++)
            if (x->scol[s] == m)
                x->slive[s] = 1;
    }
}

/* Which folded Transposes (fold_transposes) this static plan takes, and their strides: f32,
 * neither node evaluated while planning; an operand read in place only when both of the MatMul's
 * operands are batches of products (an attention's; a weight's product is one GEMM over every
 * row, which a strided operand would cut into products of fewer rows), an output written with
 * strides only when its rows stay contiguous (the Transpose keeps the last axis last) and the
 * Transpose's output can take over the MatMul's buffer (plan_memory: tlive cleared when not). */
static void plan_folds(qr_exec *x)
{
    for (int t = 0; x->tfold && t < x->nn; t++) {
        x->tlive[t] = 0;
        int m = x->tfold[t];
        if (m < 0 || x->dynamic || x->node_done[t] || x->node_done[m])
            continue;
        const qr_node *tn = x->nodes[t], *mn = x->nodes[m];
        const qr_tensor *src = &x->vt[tn->in[0]->id], *a = &x->vt[mn->in[0]->id], *b = &x->vt[mn->in[1]->id];
        int r = src->ndim, perm[QR_MAX_DIMS];
        const int64_t *p;
        int np = qr_attr_ints(tn, "perm", &p);
        if (src->dtype != QR_F32 || a->dtype != QR_F32 || b->dtype != QR_F32 || r < 2 || (np >= 0 && np != r))
            continue;
        for (int d = 0; d < r; d++)
            perm[d] = np >= 0 ? (int)p[d] : r - 1 - d;
        int64_t ss[QR_MAX_DIMS];
        qr_tensor_strides(src, ss);
        if (x->tslot[t] < 2) {
            int64_t na = 1, nb = 1;
            for (int d = 0; d + 2 < a->ndim; d++)
                na *= a->dims[d];
            for (int d = 0; d + 2 < b->ndim; d++)
                nb *= b->dims[d];
            int batched = a->ndim >= 3 && b->ndim >= 3 && na > 1 && nb > 1;
            int k = x->kind[tn->in[0]->id], d = x->tdiv[t];
            if (!batched || (k != V_RUNTIME && k != V_INPUT))
                continue;
            /* the Div runs on the input's layout: planned to run alone, its output in the arena */
            if (d >= 0 && (x->node_done[d] || x->kind[x->nodes[d]->out[0]->id] != V_RUNTIME ||
                           x->vt[x->nodes[d]->out[0]->id].dtype != QR_F32 || (x->tiled && x->tiled[d]) ||
                           (x->banded && x->banded[d])))
                continue;
            for (int d = 0; d < r; d++) /* the view's dim d is the input's dim perm[d] */
                x->tstr[t][d] = ss[perm[d]];
        } else {
            int64_t ts[QR_MAX_DIMS];
            qr_tensor_strides(&x->vt[tn->out[0]->id], ts);
            if (perm[r - 1] != r - 1 || x->kind[tn->in[0]->id] != V_RUNTIME)
                continue;
            for (int d = 0; d < r; d++) /* the output's dim d is the MatMul's dim perm[d] */
                x->tstr[t][perm[d]] = ts[d];
        }
        x->tlive[t] = 1;
    }
}

/* Whether node a is pointwise of one output, as find_chains wants its nodes (fusions aside). */
static int pointwise1(const qr_node *a)
{
    return a->def && a->def->pointwise && a->n_out == 1 && a->out[0];
}

/* The node making value v (index into g->nodes), or -1: an input, a constant, or unknown. */
static int producer_of(const int *prod, int nv, const qr_value *v)
{
    return v && v->id >= 0 && v->id < nv ? prod[v->id] : -1;
}

qr_status qr_exec_order(const qr_graph *g, int *order)
{
    return qr_exec_order_seq(g, NULL, order);
}

qr_status qr_exec_order_seq(const qr_graph *g, const int *seq, int *order)
{
    int nn = g->n_nodes, nv = g->n_values, k = 0, cs = 0;
    int *prod = malloc(sizeof *prod * ((size_t)nv + 1)), *stack = malloc(sizeof *stack * ((size_t)nn + 1) * 2);
    unsigned char *konly = calloc((size_t)nn + 1, 1), *late = calloc((size_t)nn + 1, 1),
                  *read = calloc((size_t)nv + 1, 1), *done = calloc((size_t)nn + 1, 1);
    if (!prod || !stack || !konly || !late || !read || !done) {
        free(prod), free(stack), free(konly), free(late), free(read), free(done);
        return QR_ERR;
    }
    for (int i = 0; i < nv; i++)
        prod[i] = -1;
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < g->nodes[i]->n_out; j++) {
            const qr_value *v = g->nodes[i]->out[j];
            if (v && v->id >= 0 && v->id < nv)
                prod[v->id] = i;
        }
    for (int i = 0; i < nn; i++) { /* constant-only: every input a constant or made by one before it */
        const qr_node *n = g->nodes[i];
        konly[i] = 1;
        for (int j = 0; j < n->n_in; j++) {
            const qr_value *v = n->in[j];
            int p = producer_of(prod, nv, v);
            if (v && !(p < 0 ? v->is_const : p < i && konly[p]))
                konly[i] = 0;
            if (v && v->id >= 0 && v->id < nv)
                read[v->id] = 1;
        }
    }
    for (int i = 0; i < nn; i++) { /* late: constant-only, read by a node, none of its outputs a graph output */
        const qr_node *n = g->nodes[i];
        int has_reader = 0, is_out = 0;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] && n->out[j]->id >= 0 && n->out[j]->id < nv) {
                has_reader |= read[n->out[j]->id];
                is_out |= n->out[j]->is_output;
            }
        late[i] = konly[i] && has_reader && !is_out;
    }
    for (int ii = 0; ii < nn; ii++) {
        int i = seq ? seq[ii] : ii;
        if (late[i])
            continue;
        const qr_node *n = g->nodes[i];
        /* a node extending a run of pointwise nodes (find_chains) gets its late producers before
         * the run, not inside it */
        int ext = k > 0 && pointwise1(n) && pointwise1(g->nodes[order[k - 1]]) &&
                  reads(n, g->nodes[order[k - 1]]->out[0]);
        int from = k, sp = 0;
        /* its late producers not placed yet, depth first, each after its own: order[from..k) */
        stack[sp++] = i, stack[sp++] = 0;
        while (sp > 0) {
            const qr_node *m = g->nodes[stack[sp - 2]];
            int j = stack[sp - 1], child = -1;
            while (j < m->n_in && child < 0) {
                int p = producer_of(prod, nv, m->in[j++]);
                if (p >= 0 && late[p] && !done[p])
                    child = p;
            }
            stack[sp - 1] = j;
            if (child >= 0) {
                done[child] = 1;
                stack[sp++] = child, stack[sp++] = 0;
                continue;
            }
            sp -= 2;
            if (stack[sp] != i)
                order[k++] = stack[sp];
        }
        int moved = k - from;
        if (ext && moved > 0) { /* order[from..k) moved to order[cs..], the run after them */
            memcpy(stack, order + from, sizeof *stack * (size_t)moved); /* the stack is free now */
            memmove(order + cs + moved, order + cs, sizeof *order * (size_t)(from - cs));
            memcpy(order + cs, stack, sizeof *stack * (size_t)moved);
        }
        cs = ext ? cs + moved : k;
        order[k++] = i;
    }
    if (k != nn) /* every late node has a reader that is not late, or one that is, in turn */
        abort();
    free(prod), free(stack), free(konly), free(late), free(read), free(done);
    return QR_OK;
}

/* Runs of consecutive pointwise nodes (qr_op_def.pointwise), of one output each, none fused
 * away, each after the first reading the one before it: candidates for running by tiles once a
 * plan knows their shapes. Not with an observer (it sees each value whole) nor fuse=0. */
static qr_status find_chains(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse)
        return QR_OK;
    x->chain = calloc((size_t)x->nn + 1, sizeof *x->chain);
    x->tiles = calloc((size_t)x->nn + 1, sizeof *x->tiles);
    x->tiled = calloc((size_t)x->nn + 1, 1);
    x->chain_nodes = calloc((size_t)x->nn + 1, sizeof *x->chain_nodes);
    x->chain_seconds = calloc((size_t)x->nn + 1, sizeof *x->chain_seconds);
    if (!x->chain || !x->tiles || !x->tiled || !x->chain_nodes || !x->chain_seconds)
        return QR_ERR;
    for (int a = 0; a < x->nn;) {
        int b = a;
        while (b < x->nn && x->nodes[b]->def->pointwise && x->nodes[b]->n_out == 1 && x->nodes[b]->out[0] &&
               !(x->skip && x->skip[b]) && out_value(x, x->nodes[b], 0) == x->nodes[b]->out[0] &&
               (b == a || reads(x->nodes[b], x->nodes[b - 1]->out[0])))
            b++;
        if (b - a >= 2)
            x->chain[a] = b - a;
        a = b > a ? b : a + 1;
    }
    return QR_OK;
}

void qr_exec_mark_fixed(const qr_graph *g, unsigned char *fixed)
{
    for (int i = 0; i < g->n_values; i++)
        fixed[i] = g->values[i]->is_const;
    for (int i = 0; i < g->n_nodes; i++) { /* in graph order, producers first */
        const qr_node *n = g->nodes[i];
        int all = 0;
        for (int j = 0; j < n->n_in; j++) {
            const qr_value *v = n->in[j];
            if (v && !(v->id >= 0 && v->id < g->n_values && fixed[v->id])) {
                all = 0;
                break;
            }
            all |= v != NULL;
        }
        for (int j = 0; all && j < n->n_out; j++)
            if (n->out[j] && n->out[j]->id >= 0 && n->out[j]->id < g->n_values)
                fixed[n->out[j]->id] = 1;
    }
}

/* Runs of consecutive nodes whose op computes bands of rows (qr_op_def.band), of one output
 * each, none fused away, each after the first reading the one before it as input 0 and nothing
 * else reading that value: candidates for running band by band once a plan knows their shapes.
 * Not with an observer, fuse=0 nor bands=0. */
static qr_status find_bands(qr_exec *x)
{
    if (x->opts.observer || qr_options_get()->no_fuse || qr_options_get()->bands == QR_BANDS_OFF)
        return QR_OK;
    x->bchain = calloc((size_t)x->nn + 1, sizeof *x->bchain);
    x->banded = calloc((size_t)x->nn + 1, sizeof *x->banded);
    x->bgeom = calloc((size_t)x->nn + 1, sizeof *x->bgeom);
    x->bstrip = calloc((size_t)x->nn + 1, sizeof *x->bstrip);
    x->bdone = calloc(2 * (size_t)x->nn + 2, sizeof *x->bdone);
    x->bwlo = calloc(3 * (size_t)x->nn + 3, sizeof *x->bwlo);
    if (!x->bchain || !x->banded || !x->bgeom || !x->bstrip || !x->bdone || !x->bwlo)
        return QR_ERR;
    x->bwcap = x->bwlo + x->nn + 1;
    x->bwfill = x->bwcap + x->nn + 1;
    for (int a = 0; a < x->nn;) {
        int b = a;
        while (b < x->nn) {
            const qr_node *n = x->nodes[b];
            if (!n->def->band || n->n_out != 1 || !n->out[0] || n->n_in < 1 || (x->skip && x->skip[b]) ||
                out_value(x, n, 0) != n->out[0])
                break;
            if (b > a) {
                const qr_value *v = x->nodes[b - 1]->out[0];
                int only = n->in[0] == v && x->kind[v->id] == V_RUNTIME && x->last_use[v->id] == b;
                /* other inputs that are v too: only when the op says it reads them for their type */
                for (int j = 1; j < n->n_in && only; j++)
                    only = n->in[j] != v ||
                           (n->def->band_in0_typed && n->def->band_in0_typed(n, j, x->opts.kernel_user));
                if (!only)
                    break;
            }
            b++;
        }
        if (b - a >= 2)
            x->bchain[a] = b - a;
        a = b > a ? b : a + 1;
    }
    return QR_OK;
}

/* node-runs x samples of every executor of the process so far (qr_exec_node_samples): executors
 * run on several threads at once (the quantizer's workers); and the same per account, the one
 * qr_exec_account last chose when the run ended */
static _Atomic int64_t node_samples, node_samples_in[QR_EXEC_ACCOUNTS];
static _Atomic int account;

int64_t qr_exec_node_samples(void)
{
    return atomic_load(&node_samples);
}

void qr_exec_add_node_samples(int64_t n)
{
    atomic_fetch_add(&node_samples, n);
    atomic_fetch_add(&node_samples_in[atomic_load(&account)], n);
}

int qr_exec_account(int a)
{
    assert(a >= 0 && a < QR_EXEC_ACCOUNTS);
    return atomic_exchange(&account, a);
}

int64_t qr_exec_node_samples_in(int a)
{
    assert(a >= 0 && a < QR_EXEC_ACCOUNTS);
    return atomic_load(&node_samples_in[a]);
}

/* A node that is one of the model's computations: not the quantization's QuantizeLinear and
 * DequantizeLinear borders (and the calibration's SimQuant), nor a pattern's QrlKernel after its accumulator (the integer graph's
 * Conv is ConvInteger then QrlKernel, one computation as the f32 graph's Conv), nor Shape or
 * Size (the plan's, not a run's). */
static int counted_op(const qr_node *n)
{
    if (op_shape_only(n))
        return 0;
    if (!n->domain[0] || !strcmp(n->domain, "ai.onnx"))
        return strcmp(n->op, "QuantizeLinear") != 0 && strcmp(n->op, "DequantizeLinear") != 0;
    return strcmp(n->op, "QrlKernel") != 0 && strcmp(n->op, "SimQuant") != 0;
}

/* The counted nodes of g, given its values made from constants (qr_exec_mark_fixed). */
static int count_nodes(const qr_graph *g, const unsigned char *fixed)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        int made_of_constants = n->n_out > 0;
        for (int j = 0; j < n->n_out; j++)
            made_of_constants &= n->out[j] && n->out[j]->id >= 0 && n->out[j]->id < g->n_values && fixed[n->out[j]->id];
        c += counted_op(n) && !made_of_constants;
    }
    return c;
}

int qr_exec_count_nodes(const qr_graph *g)
{
    unsigned char *fixed = calloc((size_t)g->n_values + 1, 1);
    if (!fixed)
        return 0;
    qr_exec_mark_fixed(g, fixed);
    int c = count_nodes(g, fixed);
    free(fixed);
    return c;
}

qr_status qr_exec_new(const qr_graph *g, const qr_exec_opts *opts, qr_exec **out, qr_error *e)
{
    qr_exec *x = calloc(1, sizeof *x);
    if (!x)
        return qr_errorf(e, "out of memory");
    x->g = g;
    x->work_at = &x->work;
    if (opts)
        x->opts = *opts;
    x->poison = qr_options_get()->poison;
    x->nv = g->n_values;
    x->nn = g->n_nodes;
    size_t nv = (size_t)x->nv + 1, nn = (size_t)x->nn + 1;
    x->order = calloc(nn, sizeof *x->order);
    x->pos = calloc(nn, sizeof *x->pos);
    x->nodes = calloc(nn, sizeof *x->nodes);
    x->vt = calloc(nv, sizeof *x->vt);
    x->kind = calloc(nv, 1);
    x->last_use = calloc(nv, sizeof *x->last_use);
    x->offset = calloc(nv, sizeof *x->offset);
    x->planned = calloc(nv, sizeof *x->planned);
    x->node_done = calloc(nn, 1);
    x->plan_inputs = calloc((size_t)g->n_inputs + 1, sizeof *x->plan_inputs);
    x->prof = x->opts.profile ? calloc(nn, sizeof *x->prof) : NULL;
    x->cache = calloc(nn, sizeof *x->cache);
    x->fixed = calloc(nv, 1);
    x->io_nin = IO_MIN_IN;
    x->io_nout = IO_MIN_OUT;
    for (int n = 0; n < x->nn; n++) {
        if (g->nodes[n]->n_in > x->io_nin)
            x->io_nin = g->nodes[n]->n_in;
        if (g->nodes[n]->n_out > x->io_nout)
            x->io_nout = g->nodes[n]->n_out;
    }
    x->io_in = calloc((size_t)x->io_nin, sizeof *x->io_in);
    x->io_out = calloc((size_t)x->io_nout, sizeof *x->io_out);
    x->io_scratch = calloc((size_t)x->io_nout, sizeof *x->io_scratch);
    if (!x->order || !x->pos || !x->nodes || qr_exec_order_seq(g, opts ? opts->node_seq : NULL, x->order) != QR_OK || !x->vt || !x->kind ||
        !x->last_use || !x->offset || !x->planned || !x->node_done || !x->plan_inputs ||
        (x->opts.profile && !x->prof) || !x->cache || !x->fixed || !x->io_in || !x->io_out || !x->io_scratch) {
        qr_exec_free(x);
        return qr_errorf(e, "out of memory");
    }
    qr_exec_mark_fixed(g, x->fixed);
    x->ncounted = count_nodes(g, x->fixed);
    for (int k = 0; k < x->nn; k++) {
        x->nodes[k] = g->nodes[x->order[k]];
        x->pos[x->order[k]] = k;
    }
    for (int i = 0; i < x->nv; i++) {
        const qr_value *v = g->values[i];
        x->kind[i] = v->is_const ? V_CONST : v->is_input ? V_INPUT : V_RUNTIME;
        x->last_use[i] = -1;
    }
    for (int n = 0; n < x->nn; n++) {
        const qr_node *nd = x->nodes[n];
        if (!nd->def) {
            qr_exec_free(x);
            return qr_errorf(e, "node '%s' (%s): no kernel", nd->name, nd->op);
        }
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j])
                x->last_use[nd->in[j]->id] = n;
    }
    for (int i = 0; i < g->n_outputs; i++)
        x->last_use[g->outputs[i]->id] = x->nn;
    if (fuse_acts(x) != QR_OK || fuse_gelu(x) != QR_OK || fold_transposes(x) != QR_OK || find_splits(x) != QR_OK ||
        find_chains(x) != QR_OK ||
        find_bands(x) != QR_OK) {
        qr_exec_free(x);
        return qr_errorf(e, "out of memory");
    }
    x->pool = qr_pool_new(x->opts.threads);
    *out = x;
    return QR_OK;
}

/* The last arena an executor let go of, kept for the next plan that fits in it: a new executor
 * over the same model (the quantizer makes one per measurement) then writes into pages the
 * process already has instead of faulting in fresh ones, which costs as much as the run on a
 * large model. At most one is kept (the largest); nothing reads an arena before writing it. */
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *spare_arena;
static size_t spare_size;

/* An arena of 1 MiB or more is a mapping of its own, given back to the system when freed: in the
 * heap (qrl's M_MMAP_THRESHOLD keeps large blocks there) a freed arena stayed resident as a hole
 * the next allocations only partly filled (PP-OCR det's effects: 90 MB free in the heap beside
 * 125 in use at their peak). The spare (above) still spares a new plan the page faults. */
#define ARENA_MAP_MIN ((size_t)1 << 20)

/* Whether a fresh 4 KiB page costs so much to fault in that arenas should take 2 MiB pages
 * (MADV_HUGEPAGE): a property of the machine (its hypervisor), not of the CPU, so measured once per
 * process: the fastest of eight first touches. The stop 54 AMD VM: 12-18 us a page (a 7 MB arena
 * 25-30 ms, the small ResNet's whole calibration over again), with 2 MiB pages 0.3-2 us a 4 KiB
 * equivalent; the Intel Xeon of stops 48-53: 1.8 us, where 2 MiB pages once stalled a run by 25 ms
 * (stop 48), so it keeps 4 KiB pages. */
#define SLOW_FAULT_NS 6000.0

static pthread_once_t slow_faults_once = PTHREAD_ONCE_INIT;
static int slow_faults;

static void probe_faults(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0)
        return;
    unsigned char *p = mmap(NULL, (size_t)pg * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    double best = INFINITY;
    for (int i = 0; i < 8; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        *(volatile unsigned char *)(p + (size_t)pg * (size_t)i) = 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
        best = ns < best ? ns : best;
    }
    munmap(p, (size_t)pg * 8);
    slow_faults = best > SLOW_FAULT_NS;
}

int qr_exec_arena_huge(void)
{
    int forced = qr_options_get()->arena_pages; /* arena-pages=4k or 2m (tests, timings) */
    if (forced)
        return forced == 2;
    pthread_once(&slow_faults_once, probe_faults);
    return slow_faults;
}

static unsigned char *arena_alloc(size_t bytes)
{
    /* Every page of a plan's arena is written by its run, so its first touches are paid anyway:
     * where a fault is slow (qr_exec_arena_huge) an arena of 2 MiB or more takes 2 MiB pages, one
     * fault each; otherwise the mapping is populated in the one call (MAP_POPULATE) rather than
     * a fault a page. Calibration, a quantize's first phase, paid them all on stop 54's Zen 5 VM:
     * the small ResNet's 40-44 -> 25-33 ms populated, 59 -> 31 ms (medians) in 2 MiB pages; the
     * same exports, the same peaks (docs/quantizer.md, stop 54). */
    if (bytes < ARENA_MAP_MIN)
        return aligned_alloc(EXEC_ALIGN, bytes);
    int huge = bytes >= ((size_t)2 << 20) && qr_exec_arena_huge();
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (huge ? 0 : MAP_POPULATE), -1,
                   0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) /* advice only: its failure changes nothing */
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

static void arena_free(unsigned char *p, size_t bytes)
{
    if (p && bytes >= ARENA_MAP_MIN)
        munmap(p, bytes);
    else
        free(p);
}

static unsigned char *arena_take(size_t bytes, size_t *cap)
{
    unsigned char *p = NULL;
    *cap = bytes;
    unsigned char *small = NULL;
    size_t small_size = 0;
    pthread_mutex_lock(&spare_mu);
    if (spare_arena && spare_size >= bytes)
        p = spare_arena, *cap = spare_size;
    else /* too small for this plan: freed before its arena is allocated, not held beside it (the
          * larger one becomes the spare when this plan lets go of it); PP-OCR det's effects held a
          * 39 MB spare beside a new 45 MB arena */
        small = spare_arena, small_size = spare_size;
    spare_arena = NULL;
    spare_size = 0;
    pthread_mutex_unlock(&spare_mu);
    arena_free(small, small_size);
    return p ? p : arena_alloc(bytes);
}

static void arena_give(unsigned char *p, size_t bytes)
{
    if (!p)
        return;
    pthread_mutex_lock(&spare_mu);
    if (spare_size < bytes) {
        unsigned char *old = spare_arena;
        size_t old_size = spare_size;
        spare_arena = p, spare_size = bytes, p = old, bytes = old_size;
    }
    pthread_mutex_unlock(&spare_mu);
    arena_free(p, bytes);
}

static void drop_prep(qr_exec *x);

static void drop_plan(qr_exec *x)
{
    for (int i = 0; i < x->nv; i++) {
        free(x->planned[i]);
        x->planned[i] = NULL;
        if (x->kind[i] == V_PLANNED)
            x->kind[i] = V_RUNTIME;
    }
    memset(x->node_done, 0, (size_t)x->nn + 1);
    for (int i = 0; x->cache && i < x->nn; i++) /* the nodes' run plans were for the old shapes */
        x->cache[i].plan_ready = 0;
    arena_give(x->arena, x->arena_cap);
    x->arena = NULL;
    x->arena_cap = 0;
    x->arena_size = 0;
    x->have_plan = 0;
    drop_prep(x);
}

void qr_exec_free_spare(void)
{
    pthread_mutex_lock(&spare_mu);
    unsigned char *p = spare_arena;
    size_t size = spare_size;
    spare_arena = NULL;
    spare_size = 0;
    pthread_mutex_unlock(&spare_mu);
    arena_free(p, size);
}

void qr_exec_drop_plan(qr_exec *x)
{
    if (x->planned)
        drop_plan(x);
}

void qr_exec_share_cache(qr_exec *x, const qr_exec *from)
{
    drop_prep(x); /* the records hold the shared caches */
    free(x->cache_map);
    x->cache_map = NULL;
    x->cache_from = from && from != x && from->g == x->g && from->opts.threads == x->opts.threads ? from : NULL;
}

qr_status qr_exec_share_cache_nodes(qr_exec *x, const qr_exec *from, const int *map, qr_error *e)
{
    drop_prep(x);
    free(x->cache_map);
    x->cache_map = NULL;
    x->cache_from = NULL;
    if (!from || from == x || from->opts.threads != x->opts.threads)
        return QR_OK;
    if (!(x->cache_map = malloc(sizeof *x->cache_map * ((size_t)x->nn + 1))))
        return qr_errorf(e, "out of memory");
    for (int i = 0; i < x->nn; i++)
        x->cache_map[i] = map[i] >= 0 && map[i] < from->nn ? map[i] : -1;
    x->cache_from = from;
    return QR_OK;
}

/* The cache of the node of x's graph at index id in the executor x shares with, or NULL. */
static const qr_kcache *shared_cache(const qr_exec *x, int id)
{
    if (!x->cache_from)
        return NULL;
    int at = x->cache_map ? x->cache_map[id] : id;
    return at >= 0 ? &x->cache_from->cache[at] : NULL;
}

void qr_exec_share_work(qr_exec *x, qr_exec *from)
{
    x->work_at = from && from != x ? from->work_at : &x->work;
}

void qr_exec_free(qr_exec *x)
{
    if (!x)
        return;
    if (x->planned)
        drop_plan(x);
    drop_prep(x);
    free(x->order);
    free(x->pos);
    free(x->nodes);
    free(x->vt);
    free(x->kind);
    free(x->last_use);
    free(x->offset);
    free(x->planned);
    free(x->node_done);
    free(x->plan_inputs);
    free(x->prof);
    for (int i = 0; x->cache && i < x->nn; i++) {
        free(x->cache[i].data);
        free(x->cache[i].keep);
        free(x->cache[i].plan);
    }
    free(x->cache);
    free(x->cache_map);
    free(x->fixed);
    qr_kwork_arena_free(&x->work);
    free(x->io_in);
    free(x->io_out);
    free(x->io_scratch);
    free(x->act_out);
    free(x->act);
    free(x->skip);
    free(x->bias);
    for (int n = 0; x->gelu && n < x->nn; n++)
        free(x->gelu[n]);
    free(x->gelu);
    for (int n = 0; x->pregelu && n < x->nn; n++)
        free(x->pregelu[n]);
    free(x->pregelu);
    free(x->pregelu_in);
    free(x->tfold);
    free(x->mmfold);
    free(x->tslot);
    free(x->tlive);
    free(x->tstr);
    free(x->tdiv);
    free(x->divt);
    free(x->scol);
    free(x->slive);
    free(x->mmsplit);
    free(x->scol0);
    free(x->chain);
    free(x->tiles);
    free(x->tiled);
    free(x->chain_nodes);
    free(x->chain_seconds);
    free(x->bchain);
    free(x->banded);
    free(x->bgeom);
    free(x->bstrip);
    free(x->bdone);
    free(x->bwlo);
    qr_pool_free(x->pool);
    free(x);
}

const qr_node_prof *qr_exec_profile(const qr_exec *x)
{
    return x->prof;
}

void qr_exec_profile_reset(qr_exec *x)
{
    if (x->prof)
        memset(x->prof, 0, (size_t)x->nn * sizeof *x->prof);
}

void qr_exec_get_stats(const qr_exec *x, qr_exec_stats *s)
{
    *s = x->stats;
}

static char *dims_str(const qr_tensor *t, const qr_value *v, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", qr_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < n; i++) {
        if (v && v->dim_param[i])
            k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", v->dim_param[i]);
        else if (t->dims[i] < 0)
            k += (size_t)snprintf(buf + k, n - k, "%s?", i ? "," : "");
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

static qr_status check_input(const qr_value *v, const qr_tensor *t, int from, qr_error *e)
{
    char want[160], got[160];
    if (qr_tensor_check_shape(t, e) != QR_OK) {
        qr_error_prefix(e, "input '%s'", v->name);
        return QR_ERR;
    }
    int ok = t->dtype == v->t.dtype && (v->t.ndim < 0 || v->t.ndim == t->ndim);
    for (int i = from; ok && v->t.ndim >= 0 && i < t->ndim; i++)
        ok = v->t.dims[i] < 0 || v->t.dims[i] == t->dims[i];
    if (!ok)
        return qr_errorf(e, "input '%s': expected %s%s, got %s", v->name, dims_str(&v->t, v, want, sizeof want),
                         from ? " (any number of samples along the first dimension)" : "",
                         dims_str(t, NULL, got, sizeof got));
    return QR_OK;
}

qr_status qr_exec_check_input(const qr_value *v, const qr_tensor *t, qr_error *e)
{
    return check_input(v, t, 0, e);
}

qr_status qr_exec_check_samples(const qr_value *v, const qr_tensor *t, qr_error *e)
{
    if (t->ndim < 1)
        return qr_errorf(e, "input '%s': a sample set needs a first dimension (the samples)", v->name);
    return check_input(v, t, 1, e);
}

static qr_status check_inputs(qr_exec *x, const qr_tensor *inputs, qr_error *e)
{
    const qr_graph *g = x->g;
    for (int i = 0; i < g->n_inputs; i++) {
        if (qr_exec_check_input(g->inputs[i], &inputs[i], e) != QR_OK)
            return QR_ERR;
        if (!inputs[i].data && qr_tensor_numel(&inputs[i]) > 0)
            return qr_errorf(e, "input '%s': no data", g->inputs[i]->name);
    }
    /* Symbolic dims with the same name must bind to the same size. */
    for (int i = 0; i < g->n_inputs; i++)
        for (int d = 0; d < inputs[i].ndim; d++) {
            const char *p = g->inputs[i]->t.ndim > d ? g->inputs[i]->dim_param[d] : NULL;
            if (!p)
                continue;
            for (int j = 0; j <= i; j++)
                for (int d2 = 0; d2 < inputs[j].ndim && g->inputs[j]->t.ndim > d2; d2++) {
                    const char *q = g->inputs[j]->dim_param[d2];
                    if (q && strcmp(p, q) == 0 && inputs[i].dims[d] != inputs[j].dims[d2])
                        return qr_errorf(e, "input '%s': dimension '%s' is %lld here but %lld in input '%s'",
                                         g->inputs[i]->name, p, (long long)inputs[i].dims[d],
                                         (long long)inputs[j].dims[d2], g->inputs[j]->name);
                }
        }
    return QR_OK;
}

/* Builds the kernel context of node n over x->vt; absent outputs get scratch tensors.
 * The arrays are the executor's, sized by its graph's widest node: one node at a time. */
typedef struct node_io {
    const qr_tensor **in;
    qr_tensor **out;
    qr_tensor *scratch;
    qr_kctx k;
} node_io;

static qr_status node_io_init(qr_exec *x, const qr_node *n, node_io *io, qr_error *e)
{
    if (n->n_in > x->io_nin || n->n_out > x->io_nout) /* a node added to the graph after qr_exec_new */
        return qr_errorf(e, "node '%s' (%s): %d inputs and %d outputs, more than when the executor was made", n->name,
                         n->op, n->n_in, n->n_out);
    io->in = x->io_in;
    io->out = x->io_out;
    io->scratch = x->io_scratch;
    memset(io->scratch, 0, sizeof *io->scratch * (size_t)n->n_out);
    /* Past n_in the slots are NULL, so a kernel reading an input the node does not have sees "absent":
     * only those the last node set are cleared (no pass over the widest node's slots per node). */
    for (int j = 0; j < n->n_in; j++)
        io->in[j] = n->in[j] ? &x->vt[n->in[j]->id] : NULL;
    for (int j = n->n_in; j < x->io_hi; j++)
        io->in[j] = NULL;
    x->io_hi = n->n_in;
    for (int j = 0; j < n->n_out; j++) {
        const qr_value *v = out_value(x, n, j);
        io->out[j] = v ? &x->vt[v->id] : &io->scratch[j];
    }
    io->k = (qr_kctx){.node = n, .opset = n->opset, .n_in = n->n_in, .n_out = n->n_out,
                      .in = io->in, .out = io->out, .err = e, .pool = x->pool, .user = x->opts.kernel_user,
                      .scratch_max = budget(x),
                      .cache = n->id >= 0 && n->id < x->nn && x->g->nodes[n->id] == n ? &x->cache[n->id] : NULL,
                      .cache_total = &x->cache_total, .cache_max = x->opts.cache_max,
                      .shared = n->id >= 0 && n->id < x->nn && x->g->nodes[n->id] == n ? shared_cache(x, n->id)
                                                                                      : NULL,
                      .work = x->work_at, .fixed = x->fixed, .plan_static = !x->dynamic};
    int pat = x->pregelu_in ? place(x, n) : -1;
    if (pat >= 0 && x->pregelu_in[pat]) { /* it reads the GELU chain's input and runs the chain (fuse_gelu) */
        io->in[0] = &x->vt[x->pregelu_in[pat]->id];
        io->k.pre_gelu = x->pregelu[pat];
    }
    if (n->n_out && out_value(x, n, 0) != n->out[0]) {
        int at = place(x, n);
        if (x->bias[at])
            io->k.bias = &x->vt[x->bias[at]->id];
        else
            io->k.act = &x->act[at];
    }
    return QR_OK;
}

/* What node_io_init makes of the node at a place when the plan is static, kept for the plan's
 * runs: its inputs' and outputs' tensors (x->vt's, which the plan's runs keep; a fused GELU
 * chain's input in place of input 0), its context (.err and .work set per run), and which
 * outputs run_node zeroes before the kernel (bit j: the kernel does not write every element). */
typedef struct node_prep {
    const qr_tensor **in;
    qr_tensor **out;
    qr_kctx k;
    unsigned zero;
    int ok; /* 0: node_io_init each run (an output absent or past 32, made by the kernel) */
} node_prep;

static void drop_prep(qr_exec *x)
{
    free(x->prep);
    free(x->prep_in);
    free(x->prep_out);
    x->prep = NULL;
    x->prep_in = NULL;
    x->prep_out = NULL;
}

/* The static plan's node records (node_prep); none where memory is short (node_io_init then). */
static void prepare_nodes(qr_exec *x, qr_error *e)
{
    size_t nin = 0, nout = 0;
    for (int i = 0; i < x->nn; i++)
        nin += (size_t)x->nodes[i]->n_in, nout += (size_t)x->nodes[i]->n_out;
    x->prep = calloc((size_t)x->nn + 1, sizeof *x->prep);
    x->prep_in = calloc(nin + 1, sizeof *x->prep_in);
    x->prep_out = calloc(nout + 1, sizeof *x->prep_out);
    if (!x->prep || !x->prep_in || !x->prep_out) {
        drop_prep(x);
        return;
    }
    nin = nout = 0;
    for (int i = 0; i < x->nn; i++) {
        const qr_node *n = x->nodes[i];
        node_prep *p = &x->prep[i];
        node_io io;
        p->in = x->prep_in + nin, p->out = x->prep_out + nout;
        nin += (size_t)n->n_in, nout += (size_t)n->n_out;
        int ok = n->n_out <= 32 && n->n_in <= x->io_nin && n->n_out <= x->io_nout;
        for (int j = 0; j < n->n_out && ok; j++)
            ok = n->out[j] && out_value(x, n, j);
        if (!ok || node_io_init(x, n, &io, e) != QR_OK)
            continue; /* (the run's node_io_init reports it) */
        memcpy(p->in, io.in, sizeof *p->in * (size_t)n->n_in);
        memcpy(p->out, io.out, sizeof *p->out * (size_t)n->n_out);
        p->k = io.k;
        p->k.err = NULL, p->k.work = NULL;
        for (int j = 0; j < n->n_out; j++)
            if (!n->def->inplace && !(x->gelu && x->gelu[i]) && (!n->def->writes_all || !n->def->writes_all(&io.k)))
                p->zero |= 1u << j;
        p->ok = 1;
    }
}

/* node_io_init from the node's record (prepare_nodes): what it would make, with no look-ups. */
static void node_io_prepared(qr_exec *x, const node_prep *p, const qr_node *n, node_io *io, qr_error *e)
{
    io->in = x->io_in;
    io->out = x->io_out;
    io->scratch = x->io_scratch;
    memcpy(io->in, p->in, sizeof *io->in * (size_t)n->n_in);
    for (int j = n->n_in; j < x->io_hi; j++)
        io->in[j] = NULL;
    x->io_hi = n->n_in;
    memcpy(io->out, p->out, sizeof *io->out * (size_t)n->n_out);
    io->k = p->k;
    io->k.in = io->in, io->k.out = io->out, io->k.err = e, io->k.work = x->work_at;
}

static void node_io_free(const qr_node *n, node_io *io)
{
    for (int j = 0; j < n->n_out; j++)
        qr_tensor_free(&io->scratch[j]);
}

static qr_status node_infer(const qr_node *n, node_io *io, qr_error *e)
{
    for (int j = 0; j < n->n_out; j++) {
        void *keep = io->out[j]->data;
        memset(io->out[j], 0, sizeof *io->out[j]);
        io->out[j]->data = keep;
    }
    qr_status st = qr_op_infer(&io->k);
    if (st != QR_OK)
        return st;
    for (int j = 0; j < n->n_out; j++)
        if (qr_tensor_check_shape(io->out[j], e) != QR_OK)
            return QR_ERR;
    return QR_OK;
}

static qr_status node_fail(const qr_node *n, qr_error *e)
{
    qr_error_prefix(e, "node '%s' (%s)", n->name, n->op);
    return QR_ERR;
}

/* Whether node n (index ni) may write output 0 over input 0. */
static int inplace_ok(const qr_exec *x, const qr_node *n, int ni)
{
    const qr_value *in = n->n_in ? n->in[0] : NULL, *out = n->n_out ? n->out[0] : NULL;
    if (x->gelu && x->gelu[ni]) { /* an element at a time, read before written: y over x, where x dies */
        out = out_value(x, n, 0);
        return in && x->kind[in->id] == V_RUNTIME && x->last_use[in->id] == ni &&
               x->vt[in->id].dtype == x->vt[out->id].dtype && qr_tensor_same_shape(&x->vt[in->id], &x->vt[out->id]);
    }
    if (x->tlive && x->tlive[ni] && x->tslot[ni] == 2) /* its MatMul wrote it there (plan_folds) */
        return in && x->kind[in->id] == V_RUNTIME && x->last_use[in->id] == ni;
    if (!n->def->inplace || !in || !out || x->kind[in->id] != V_RUNTIME || x->last_use[in->id] != ni)
        return 0;
    for (int j = 1; j < n->n_out; j++)
        if (n->out[j] == in)
            return 0;
    const qr_tensor *a = &x->vt[in->id], *b = &x->vt[out->id];
    if (n->def->inplace == QR_INPLACE_VIEW)
        return a->dtype == b->dtype && qr_tensor_numel(a) == qr_tensor_numel(b);
    return a->dtype == b->dtype && qr_tensor_same_shape(a, b);
}

/* A planned arena block: offset, size, and the value living there. */
typedef struct block {
    size_t off, size;
    int value;
} block;

/* Index of the live block at offset off (live[] is sorted by offset), or -1. */
static int find_block(const block *b, int n, size_t off)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (b[mid].off == off)
            return mid;
        if (b[mid].off < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* The shapes of every value for these inputs, node by node, and what can be computed now (every
 * input known, or only its shape read, and a small result) computed; x->dynamic when a shape
 * depends on data not known before the run. */
static qr_status plan_shapes(qr_exec *x, const qr_tensor *inputs, qr_error *e)
{
    const qr_graph *g = x->g;
    drop_plan(x);
    x->dynamic = 0;
    for (int i = 0; i < x->nv; i++) {
        x->vt[i] = g->values[i]->t;
        if (x->kind[i] != V_CONST)
            x->vt[i].data = NULL;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        qr_tensor *t = &x->vt[g->inputs[i]->id];
        *t = inputs[i];
        t->data = NULL;
        x->plan_inputs[i] = inputs[i];
    }
    for (int ni = 0; ni < x->nn; ni++) {
        const qr_node *n = x->nodes[ni];
        node_io io;
        if (x->skip && x->skip[ni])
            continue; /* its output is its producer's (fuse_acts) */
        if (node_io_init(x, n, &io, e) != QR_OK)
            return QR_ERR;
        qr_status st = node_infer(n, &io, e);
        if (st == QR_NEED_DATA) {
            x->dynamic = 1;
            break;
        }
        if (st != QR_OK)
            return node_fail(n, e);
        /* Evaluate now when every input is known (or only its shape matters) and the result is small. */
        int known = !(x->gelu && x->gelu[ni]); /* its kernel is not the node's */
        for (int j = 0; j < n->n_in && known; j++)
            known = !n->in[j] || io.in[j]->data || op_shape_only(n);
        for (int j = 0; j < n->n_out && known; j++)
            known = out_value(x, n, j) && qr_tensor_numel(io.out[j]) <= PLAN_CONST_MAX_ELEMS;
        if (known) {
            for (int j = 0; j < n->n_out; j++) {
                if (qr_tensor_alloc(io.out[j], e) != QR_OK)
                    return node_fail(n, e);
                x->planned[out_value(x, n, j)->id] = io.out[j]->data;
                x->kind[out_value(x, n, j)->id] = V_PLANNED;
            }
            if (qr_op_run(&io.k) != QR_OK)
                return node_fail(n, e);
            x->node_done[ni] = 1;
        }
        node_io_free(n, &io);
    }
    return QR_OK;
}

/* Takes node ni's blocks that die there out of live[]: inputs read for the last time, outputs nobody reads. */
static void release_dead(const qr_exec *x, const qr_node *n, int ni, block *live, int *nlive_io)
{
    int nlive = *nlive_io, pre = x->pregelu_in && x->pregelu_in[ni];
    for (int j = 0; j < n->n_in + n->n_out + pre; j++) {
        /* (past the outputs: the GELU chain's input the node reads instead of its input 0) */
        const qr_value *v = j < n->n_in ? n->in[j] : j < n->n_in + n->n_out ? n->out[j - n->n_in] : x->pregelu_in[ni];
        int input = j < n->n_in || j == n->n_in + n->n_out;
        if (!v || x->kind[v->id] != V_RUNTIME || (input ? x->last_use[v->id] != ni : x->last_use[v->id] > ni))
            continue;
        int at = find_block(live, nlive, x->offset[v->id]);
        if (at < 0 || live[at].value != v->id)
            continue; /* released already (read twice by this node), or in the end region */
        memmove(live + at, live + at + 1, sizeof *live * (size_t)(nlive - at - 1));
        nlive--;
    }
    *nlive_io = nlive;
}

/* First-fit interval allocation over the node sequence. live[] holds the
 * blocks alive now, sorted by offset; a block is found by binary search
 * and released when its value's last reader ran. Values alive to the end
 * (graph outputs) are stacked in a region of their own after the reused
 * one, so live[] stays as small as what dies: no pass is quadratic in
 * the number of outputs. */
static qr_status plan_memory(qr_exec *x, qr_error *e)
{
    block *live = calloc((size_t)x->nv + 1, sizeof *live);
    int *perm = calloc((size_t)x->nv + 1, sizeof *perm);
    if (!live || !perm) {
        free(live);
        free(perm);
        return qr_errorf(e, "out of memory planning %d values", x->nv);
    }
    int nlive = 0, nperm = 0;
    size_t top = 0, sum = 0, perm_top = 0;
    /* inside a chain run by tiles [chain_a, chain_b), what dies there is released at its end: a
     * block given to a later output at another offset would lose rows not read yet (a tile's rows
     * are read by every node before the next tile's). Output 0 taking input 0's block, at the same
     * offset, is safe: its tile overwrites only rows read already. */
    int chain_a = -1, chain_b = -1, bands = 0;
    for (int ni = 0; ni < x->nn; ni++) {
        const qr_node *n = x->nodes[ni];
        if (x->skip && x->skip[ni])
            continue; /* nothing to place: its input is never written, its output is its producer's */
        if (x->tiled && x->tiled[ni]) {
            chain_a = ni;
            chain_b = ni + x->chain[ni];
            bands = 0;
        }
        if (x->banded && x->banded[ni]) { /* the same for bands: a node runs before the last band of the one before it */
            chain_a = ni;
            chain_b = ni + x->banded[ni];
            bands = 1;
        }
        int in_chain = ni >= chain_a && ni < chain_b;
        /* a band chain's link (its nodes' outputs but the last's) takes its window's rows alone
         * (bands_image), with a vector's bytes past the last row (a kernel's last load may pass
         * a row's end, as it may a value's in the arena) */
        int window = bands && in_chain && ni + 1 < chain_b;
        for (int j = 0; j < n->n_out; j++) {
            const qr_value *v = out_value(x, n, j);
            if (!v || x->kind[v->id] != V_RUNTIME || (j == 0 && x->mmsplit && x->mmsplit[ni]))
                continue; /* a split MatMul's: its Slices write their columns (plan_splits) */
            size_t size = align_up(qr_tensor_nbytes(&x->vt[v->id])), off = 0;
            if (window && j == 0) {
                const qr_band_geom *bg = &x->bgeom[ni];
                size_t rb = qr_tensor_nbytes(&x->vt[v->id]) / (size_t)(bg->images * bg->out_rows);
                size = align_up((size_t)x->bwcap[ni] * rb + EXEC_ALIGN);
            }
            int at = 0;
            if (size > budget(x)) {
                free(live);
                free(perm);
                return over_budget(x, v, &x->vt[v->id], size, e);
            }
            if (j == 0 && !window && inplace_ok(x, n, ni) && (at = find_block(live, nlive, x->offset[n->in[0]->id])) >= 0) {
                /* Output 0 takes over input 0's block, which dies here. */
                live[at].value = v->id;
                x->offset[v->id] = live[at].off;
                sum += size;
                continue;
            }
            if (j == 0 && x->tlive && x->tslot[ni] == 2)
                x->tlive[ni] = 0; /* not in the MatMul's buffer: the Transpose runs */
            if (x->last_use[v->id] >= x->nn) {
                x->offset[v->id] = perm_top; /* moved past the reused region below */
                perm[nperm++] = v->id;
                perm_top += size;
                sum += size;
            } else {
                for (at = 0; at < nlive; at++) {
                    if (live[at].off >= off + size)
                        break;
                    off = live[at].off + live[at].size;
                }
                memmove(live + at + 1, live + at, sizeof *live * (size_t)(nlive - at));
                live[at] = (block){off, size, v->id};
                nlive++;
                x->offset[v->id] = off;
                sum += size;
                if (off + size > top)
                    top = off + size;
            }
            if (top + perm_top > budget(x) || top + perm_top < top) {
                /* Checked before the arena exists: the tensor that tips it over is named. */
                free(live);
                free(perm);
                return over_budget(x, v, &x->vt[v->id], top + perm_top, e);
            }
        }
        if (!in_chain)
            release_dead(x, n, ni, live, &nlive);
        else if (ni == chain_b - 1)
            for (int c = chain_a; c < chain_b; c++)
                release_dead(x, x->nodes[c], c, live, &nlive);
    }
    for (int k = 0; k < nperm; k++)
        x->offset[perm[k]] += top;
    top += perm_top;
    free(perm);
    free(live);
    x->arena_size = top;
    x->arena = arena_take(align_up(top), &x->arena_cap);
    if (!x->arena)
        return qr_errorf(e, "out of memory planning %zu bytes", top);
    x->stats.arena_bytes = top;
    x->stats.sum_bytes = sum;
    return QR_OK;
}

/* Which chains run by tiles with the plan's shapes: none of their nodes evaluated while
 * planning, and a split qr_tiles_plan accepts. */
static void plan_tiles(qr_exec *x)
{
    x->stats.tiled_nodes = 0;
    for (int a = 0; x->chain && a < x->nn; a++) {
        x->tiled[a] = 0;
        if (!x->chain[a])
            continue;
        int ok = 1;
        for (int i = 0; i < x->chain[a]; i++) {
            x->chain_nodes[i] = x->nodes[a + i];
            ok = ok && !x->node_done[a + i];
        }
        x->tiled[a] = ok && qr_tiles_plan(x->chain_nodes, x->chain[a], x->vt, &x->tiles[a]);
        x->stats.tiled_nodes += x->tiled[a] ? x->chain[a] : 0;
    }
}

/* bands=auto runs the chains' runs of links (the values between their nodes) over four L2s
 * (MobileNetV2's at batch 64; at batch 1 one link passes 1 MB, Zen 4's and Zen 5's L2, and
 * banding it was slower). The last node's bands are as many rows as keep every link's band within
 * one L2 (1 MB where neither the system nor CPUID says): the core the process runs on, read at run
 * time (runtime/cpu.h). On Zen 4, bands of a quarter or half of it were no faster (docs/runtime.md,
 * "Stop 40: MobileNetV2 at batch 64"). */
static size_t band_bytes(void) { return qr_cpu_cache_bytes(2, (size_t)1 << 20); }

/* Rows of node i's input 0 that its output rows [0, rows) read past the top, by g (at most all). */
static int64_t band_in_rows(const qr_band_geom *g, int64_t rows)
{
    int64_t r = (rows - 1) * g->stride - g->pad + g->span + 1;
    return r < 1 ? 1 : r > g->in_rows ? g->in_rows : r;
}

static qr_status bands_image(qr_exec *x, int a, int64_t img, int run, qr_error *e);

/* Which band chains run by bands with the plan's shapes, and their nodes' geometry: runs of a
 * chain's nodes none evaluated while planning, whose op takes bands of these shapes, of the same
 * images, each reading the rows the one before it makes. bands=auto keeps the longest run of
 * links over four L2s' bytes of each. */
static void plan_bands(qr_exec *x, qr_error *e)
{
    int all = qr_options_get()->bands == QR_BANDS_ALL;
    x->stats.banded_nodes = 0;
    for (int a = 0; x->bchain && a < x->nn; a++)
        x->banded[a] = 0;
    for (int c = 0; x->bchain && c < x->nn; c++) {
        int count = x->bchain[c];
        if (count < 2)
            continue;
        /* ok[i]: node c + i takes bands and reads the rows node c + i - 1 makes (bdone as scratch) */
        int64_t *ok = x->bdone;
        for (int i = 0; i < count; i++) {
            const qr_node *n = x->nodes[c + i];
            qr_band_geom *g = &x->bgeom[c + i];
            node_io io;
            ok[i] = !x->node_done[c + i] && node_io_init(x, n, &io, e) == QR_OK && n->def->band(&io.k, g) &&
                    g->out_rows > 0 && g->images > 0;
        }
        for (int a = 0; a < count;) {
            if (!ok[a]) {
                a++;
                continue;
            }
            int b = a + 1; /* the run [a, b) */
            while (b < count && ok[b] && x->bgeom[c + b].images == x->bgeom[c + a].images &&
                   x->bgeom[c + b].in_rows == x->bgeom[c + b - 1].out_rows)
                b++;
            /* the part that pays: nodes [s, t) of the run */
            int s = a, t = b;
            if (!all) {
                int best = 0, bs = a;
                for (int i = a; i + 1 < b;) {
                    int j = i;
                    while (j + 1 < b && qr_tensor_nbytes(&x->vt[x->nodes[c + j]->out[0]->id]) > 4 * band_bytes())
                        j++;
                    if (j - i > best)
                        best = j - i, bs = i;
                    i = j > i ? j : i + 1;
                }
                s = bs;
                t = best ? bs + best + 1 : bs;
            }
            if (t - s >= 2) {
                /* the last node's rows per band: the most whose every link's band fits (all: 2) */
                int64_t rows = all ? 2 : x->bgeom[c + t - 1].out_rows;
                for (; !all && rows > 1; rows = rows * 3 / 4) {
                    int64_t r = rows, fits = 1;
                    for (int i = t - 1; i > s && fits; i--) {
                        const qr_band_geom *g = &x->bgeom[c + i];
                        r = band_in_rows(g, r);
                        size_t row_bytes = qr_tensor_nbytes(&x->vt[x->nodes[c + i - 1]->out[0]->id]) /
                                           (size_t)(g->images * g->in_rows);
                        fits = (size_t)r * row_bytes <= band_bytes();
                    }
                    if (fits)
                        break;
                }
                x->banded[c + s] = t - s;
                x->bstrip[c + s] = rows < 1 ? 1 : rows;
                x->stats.banded_nodes += t - s;
            }
            a = b;
        }
        c += count - 1;
    }
    /* each link's window: the most rows it holds at once (every image's bands are alike) */
    for (int a = 0; x->bchain && a < x->nn; a++) {
        if (!x->banded[a])
            continue;
        for (int i = 0; i < x->banded[a]; i++)
            x->bwcap[a + i] = 0;
        bands_image(x, a, 0, 0, e);
    }
}

/* Shape inference over the whole graph for the given input shapes; computes
 * small shape-only results (Shape, and arithmetic on constants) now, and lays
 * out the arena by liveness. Falls back to dynamic mode when a shape depends
 * on run-time data. */
static qr_status plan(qr_exec *x, const qr_tensor *inputs, qr_error *e)
{
    if (plan_shapes(x, inputs, e) != QR_OK)
        return QR_ERR;
    if (!x->dynamic) {
        plan_tiles(x);
        plan_bands(x, e);
    }
    plan_folds(x); /* none when dynamic; after the tiles (a Div run by tiles keeps its Transpose) */
    plan_splits(x);
    if (!x->dynamic && plan_memory(x, e) != QR_OK)
        return QR_ERR;
    x->have_plan = 1;
    return QR_OK;
}

static int same_input_shapes(const qr_exec *x, const qr_tensor *inputs)
{
    if (!x->have_plan)
        return 0;
    for (int i = 0; i < x->g->n_inputs; i++)
        if (inputs[i].dtype != x->plan_inputs[i].dtype || !qr_tensor_same_shape(&inputs[i], &x->plan_inputs[i]))
            return 0;
    return 1;
}

static void observe(qr_exec *x, const qr_node *n)
{
    if (!x->opts.observer)
        return;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j])
            x->opts.observer(x->opts.observer_user, n, n->out[j], &x->vt[n->out[j]->id]);
}

/* Every value's buffer for this run: constants', planned ones', the arena's (none yet when dynamic), the inputs'. */
static void bind_values(qr_exec *x, const qr_tensor *inputs)
{
    const qr_graph *g = x->g;
    for (int i = 0; i < x->nv; i++) {
        if (x->kind[i] == V_CONST)
            x->vt[i].data = g->values[i]->t.data;
        else if (x->kind[i] == V_PLANNED)
            x->vt[i].data = x->planned[i];
        else if (x->kind[i] == V_RUNTIME)
            x->vt[i].data = x->dynamic ? NULL : x->arena + x->offset[i];
    }
    for (int i = 0; i < g->n_inputs; i++) {
        qr_tensor *t = &x->vt[g->inputs[i]->id];
        *t = inputs[i];
    }
}

typedef struct gelu_job {
    const qr_f32_rows *table;
    const qr_gelu_consts *g;
    const float *x;
    float *y;
} gelu_job;

static void gelu_range(void *arg, int64_t lo, int64_t hi)
{
    const gelu_job *j = arg;
    qr_gelu_f32(j->table, j->g, j->x + lo, j->y + lo, hi - lo);
}

/* A GELU chain's pass (fuse_gelu) over x into y (x's shape, inferred by the chain's first node),
 * split across the threads by elements: each element alone, the same bits on any count. */
static qr_status run_gelu(qr_exec *x, const qr_gelu_consts *g, const qr_tensor *in, qr_tensor *out)
{
    gelu_job j = {.table = qr_f32_rows_best(), .g = g, .x = in->data, .y = out->data};
    qr_parallel_for(x->pool, qr_tensor_numel(out), 16384, gelu_range, &j); /* as elementwise.c */
    return QR_OK;
}

/* Slice node s of a split MatMul (plan_splits): the MatMul's kernel on its input as rows of K (one
 * product of every row, as unsplit), the weight's and bias's columns [c0, c0 + len) in place
 * (the weight's rows N apart), into the Slice's output: each output the same FMA chain as the
 * whole product's (qr_sgemm's sums run over k alone, however the columns are blocked or packed),
 * so the same bits, without the whole output's buffer or the Slice's copy. Timed as the Slice. */
static qr_status run_split(qr_exec *x, int s, const struct timespec *t0, qr_error *e)
{
    const qr_node *sn = x->nodes[s], *mn = x->nodes[x->scol[s]];
    qr_tensor *out = &x->vt[sn->out[0]->id];
    node_io io;
    qr_status st = node_io_init(x, mn, &io, e);
    if (st != QR_OK)
        return st;
    const qr_tensor *a = io.in[0], *w = io.in[1];
    int64_t k = w->dims[0], n = w->dims[1], len = out->dims[out->ndim - 1], c0 = x->scol0[s];
    qr_tensor av = *a, wv = *w, yv = *out, bv;
    int64_t wstr[2] = {n, 1};
    av.ndim = 2, av.dims[0] = qr_tensor_numel(a) / (k ? k : 1), av.dims[1] = k;
    wv.dims[1] = len, wv.data = (float *)w->data + c0;
    yv.ndim = 2, yv.dims[0] = av.dims[0], yv.dims[1] = len;
    io.in[0] = &av, io.in[1] = &wv, io.out[0] = &yv;
    io.k.in_strides[1] = wstr;
    if (io.k.bias) {
        bv = *io.k.bias;
        bv.ndim = 1, bv.dims[0] = len, bv.data = (float *)bv.data + c0;
        io.k.bias = &bv;
    }
    st = qr_op_run(&io.k);
    if (st == QR_OK && t0) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        x->prof[x->order[s]].seconds += (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
        x->prof[x->order[s]].runs++;
        x->prof[x->order[s]].macs += av.dims[0] * k * len;
    }
    node_io_free(mn, &io);
    return st == QR_OK ? QR_OK : node_fail(sn, e);
}

/* Runs node ni: its shapes, its outputs' buffers (allocated when dynamic, within the budget with
 * *live bytes in use; zeroed otherwise), its kernel, its profile and observer. An error names the
 * node (node_fail), except when its inputs and outputs cannot be set up. */
static qr_status run_node(qr_exec *x, int ni, size_t *live, qr_error *e)
{
    const qr_node *n = x->nodes[ni];
    node_io io;
    struct timespec t0;
    if (x->prof)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((x->tlive && x->tlive[ni]) || (x->mmsplit && x->mmsplit[ni])) /* folded (plan_folds, plan_splits) */
        return QR_OK;
    if (x->slive && x->slive[ni])
        return run_split(x, ni, x->prof ? &t0 : NULL, e);
    const node_prep *prep = x->prep && x->prep[ni].ok ? &x->prep[ni] : NULL;
    qr_status st = QR_OK;
    if (prep)
        node_io_prepared(x, prep, n, &io, e);
    else if ((st = node_io_init(x, n, &io, e)) != QR_OK)
        return st;
    int dt = x->divt ? x->divt[ni] : -1;
    if (dt >= 0 && x->tlive[dt]) { /* the Div of a folded Transpose's input, in its layout */
        const qr_tensor *src = &x->vt[x->nodes[dt]->in[0]->id];
        io.in[0] = src;
        x->dview = *io.out[0];
        x->dview.ndim = src->ndim;
        memcpy(x->dview.dims, src->dims, sizeof src->dims);
        io.out[0] = &x->dview;
    }
    for (int s = 0; x->mmfold && s < 3; s++) {
        int t = x->mmfold[3 * ni + s];
        if (t < 0 || !x->tlive[t])
            continue;
        if (s == 2) {
            io.k.out_strides = x->tstr[t];
            continue;
        }
        x->tview[s] = x->vt[x->nodes[t]->out[0]->id];
        const qr_node *d = x->tdiv[t] >= 0 ? x->nodes[x->tdiv[t]] : NULL;
        x->tview[s].data = x->vt[d ? d->out[0]->id : x->nodes[t]->in[0]->id].data;
        io.in[s] = &x->tview[s];
        io.k.in_strides[s] = x->tstr[t];
    }
    /* A static plan inferred every value's shape from these input shapes already (plan_shapes),
     * and no shape there depends on data: inferring again each run was ~3% of a small CNN's run.
     * An absent output's scratch tensor has no shape yet, so that node is inferred. */
    int infer = x->dynamic;
    for (int j = 0; j < n->n_out && !infer && !prep; j++)
        infer = !out_value(x, n, j);
    if (infer)
        st = node_infer(n, &io, e);
    if (st == QR_NEED_DATA)
        st = qr_errorf(e, "shape inference needs data that is not available");
    for (int j = 0; j < n->n_out && st == QR_OK; j++) {
        if (!n->out[j] || x->dynamic) {
            size_t need = *live + qr_tensor_nbytes(io.out[j]);
            if (need > budget(x) || need < *live) {
                st = over_budget(x, n->out[j] ? n->out[j] : NULL, io.out[j], need, e);
                break;
            }
            st = qr_tensor_alloc(io.out[j], e);
            if (n->out[j])
                *live += qr_tensor_nbytes(io.out[j]);
        } else if (!n->def->inplace && !(x->gelu && x->gelu[ni])) {
            /* Kernels get zeroed outputs in both modes (the arena is reused), unless they
             * write every element anyway (zeroing was 2% of an integer CNN's run); in-place
             * kernels write every element and may be reading this buffer. */
            if (prep ? prep->zero >> j & 1 : !n->def->writes_all || !n->def->writes_all(&io.k))
                memset(io.out[j]->data, 0, qr_tensor_nbytes(io.out[j]));
            else if (x->poison)
                memset(io.out[j]->data, 0xa5, qr_tensor_nbytes(io.out[j]));
        }
    }
    int supplied = st == QR_OK && x->opts.observer && x->opts.supplied &&
                   x->opts.supplied(x->opts.observer_user, n, io.out);
    if (st == QR_OK && x->gelu && x->gelu[ni])
        st = run_gelu(x, x->gelu[ni], io.in[0], io.out[0]);
    else if (st == QR_OK && !supplied)
        st = qr_op_run(&io.k);
    if (st == QR_OK && supplied && counted_op(n))
        x->nsupplied++;
    if (st == QR_OK && x->prof) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        x->prof[x->order[ni]].seconds += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        x->prof[x->order[ni]].runs++;
        x->prof[x->order[ni]].macs += supplied ? 0 : qr_op_macs(&io.k);
    }
    if (st == QR_OK)
        observe(x, n);
    if (!prep) /* (a prepared node has no scratch outputs) */
        node_io_free(n, &io);
    return st == QR_OK ? QR_OK : node_fail(n, e);
}

/* The chain of pointwise nodes starting at node a, by tiles (exec_tiles.h), on the plan's
 * shapes and buffers: each node's shapes are the plan's (same inputs), its kernel its own. */
static qr_status run_chain(qr_exec *x, int a, qr_error *e)
{
    int count = x->chain[a];
    for (int i = 0; i < count; i++) {
        x->chain_nodes[i] = x->nodes[a + i];
        x->chain_seconds[i] = 0;
    }
    struct timespec t0, t1;
    if (x->prof)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    qr_status st = qr_tiles_run(x->chain_nodes, count, x->vt, &x->tiles[a], x->pool, x->opts.kernel_user,
                                x->prof ? x->chain_seconds : NULL, e);
    if (st != QR_OK || !x->prof)
        return st;
    /* the chain's time, shared out as its nodes' kernels took it */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double all = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9, kern = 0;
    for (int i = 0; i < count; i++)
        kern += x->chain_seconds[i];
    for (int i = 0; i < count; i++) {
        x->prof[x->order[a + i]].seconds += kern > 0 ? all * x->chain_seconds[i] / kern : all / count;
        x->prof[x->order[a + i]].runs++;
    }
    return QR_OK;
}

/* Node ni's rows [r0, r1) of output 0 (rows of all its images, r1 within r0's image), its shapes
 * and buffers the plan's as run_bands set them up; its kernel time added to its profile. */
static qr_status run_band(qr_exec *x, int ni, int64_t r0, int64_t r1, int in0_cached, qr_error *e)
{
    const qr_node *n = x->nodes[ni];
    node_io io;
    struct timespec t0, t1;
    if (x->prof)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    if (node_io_init(x, n, &io, e) != QR_OK)
        return QR_ERR;
    io.k.band0 = r0;
    io.k.band1 = r1;
    io.k.band_in0_cached = in0_cached;
    qr_status st = qr_op_run(&io.k);
    node_io_free(n, &io);
    if (st != QR_OK)
        return node_fail(n, e);
    if (x->prof) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        x->prof[x->order[ni]].seconds += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    }
    return QR_OK;
}

/* The first row of node i's input 0 that its output rows from `done` on read, by g. */
static int64_t band_first_in_row(const qr_band_geom *g, int64_t done)
{
    int64_t r = done * g->stride - g->pad;
    return r < 0 ? 0 : r > g->in_rows ? g->in_rows : r;
}

/* The value node a + i of a band chain writes and node a + i + 1 reads (i + 1 < count). */
static qr_tensor *band_link(qr_exec *x, int a, int i)
{
    return &x->vt[x->nodes[a + i + 1]->in[0]->id];
}

/* One image's bands of the chain at place a (run_bands). For each band of the last node's output
 * rows, each node before it first makes the rows of its output the next one's band reads that it
 * has not made yet. A link (a value between two of the chain's nodes) lives in a window: before
 * its node makes new rows, the rows the next node's bands still read move to the window's start
 * and the rest are dropped, so a link's bytes are a few rows in one buffer reused band after band
 * (in L1 or L2), not its whole tensor written to L3 or memory and read back. The kernels see the
 * link's tensor at the address that puts its held rows in the window: they read and write only
 * the rows their band reads and makes. run = 0: no kernel runs; bwcap[i] becomes the most rows
 * link i holds at once. */
static qr_status bands_image(qr_exec *x, int a, int64_t img, int run, qr_error *e)
{
    int count = x->banded[a];
    const qr_band_geom *g = &x->bgeom[a], *last = &g[count - 1];
    int64_t *done = x->bdone, *need = x->bdone + count;
    for (int i = 0; i < count; i++)
        done[i] = 0, x->bwlo[a + i] = 0;
    for (int64_t o0 = 0;; o0 += x->bstrip[a]) {
        int whole = o0 >= last->out_rows; /* after the last band: every node's rows left */
        need[count - 1] = whole ? last->out_rows : o0 + x->bstrip[a] < last->out_rows ? o0 + x->bstrip[a]
                                                                                    : last->out_rows;
        for (int i = count - 1; i > 0; i--)
            need[i - 1] = whole ? g[i - 1].out_rows : band_in_rows(&g[i], need[i]);
        for (int i = 0; i < count; i++) {
            if (need[i] <= done[i])
                continue;
            if (i + 1 < count) {
                /* the rows the next node reads from its next band on stay (a stride may skip rows
                 * not made yet: then none), the window starts at the first */
                int64_t lo = band_first_in_row(&g[i + 1], done[i + 1]);
                lo = lo < done[i] ? lo : done[i];
                int64_t p = a + i;
                if (!run) {
                    x->bwcap[p] = need[i] - lo > x->bwcap[p] ? need[i] - lo : x->bwcap[p];
                } else {
                    qr_tensor *t = band_link(x, a, i);
                    size_t rb = qr_tensor_nbytes(t) / (size_t)(g[i].images * g[i].out_rows);
                    unsigned char *w = x->arena + x->offset[x->nodes[p + 1]->in[0]->id];
                    if (lo > x->bwlo[p])
                        memmove(w, w + (size_t)(lo - x->bwlo[p]) * rb, (size_t)(done[i] - lo) * rb);
                    x->bwlo[p] = lo;
                    if (x->bwfill[p] >= 0)
                        memset(w + (size_t)(done[i] - lo) * rb, (int)x->bwfill[p], (size_t)(need[i] - done[i]) * rb);
                    /* as integers: the address the window's rows are at in the whole tensor's layout
                     * is before the window (never read or written outside it) */
                    t->data = (void *)((uintptr_t)w - (size_t)(img * g[i].out_rows + lo) * rb);
                }
            }
            if (run && run_band(x, a + i, img * g[i].out_rows + done[i], img * g[i].out_rows + need[i], i > 0, e) != QR_OK)
                return QR_ERR;
            done[i] = need[i];
        }
        if (whole)
            return QR_OK;
    }
}

/* The band chain starting at place a (plan_bands), image by image (bands_image). Each node's kernel
 * is its own and writes each output element once, as a whole run does: the same bits. The rows no
 * band reads (a stride past the last window) are made at the end, so every value is whole. */
static qr_status run_bands(qr_exec *x, int a, qr_error *e)
{
    int count = x->banded[a];
    const qr_band_geom *g = &x->bgeom[a];
    /* shapes, output buffers (zeroed or poisoned as run_node would: the links' rows as they are
     * made) and the profile's counts */
    for (int i = 0; i < count; i++) {
        const qr_node *n = x->nodes[a + i];
        node_io io;
        if (node_io_init(x, n, &io, e) != QR_OK)
            return QR_ERR;
        qr_status st = node_infer(n, &io, e);
        int fill = st == QR_OK && (!n->def->writes_all || !n->def->writes_all(&io.k)) ? 0 : x->poison ? 0xa5 : -1;
        if (i + 1 < count)
            x->bwfill[a + i] = fill;
        else if (fill >= 0)
            memset(io.out[0]->data, fill, qr_tensor_nbytes(io.out[0]));
        if (st == QR_OK && x->prof) {
            x->prof[x->order[a + i]].runs++;
            x->prof[x->order[a + i]].macs += qr_op_macs(&io.k);
        }
        node_io_free(n, &io);
        if (st != QR_OK)
            return st == QR_NEED_DATA ? qr_errorf(e, "shape inference needs data that is not available")
                                      : node_fail(n, e);
    }
    qr_status st = QR_OK;
    for (int64_t img = 0; img < g[0].images && st == QR_OK; img++)
        st = bands_image(x, a, img, 1, e);
    for (int i = 0; i + 1 < count; i++) /* the plan's address again (bind_values') */
        band_link(x, a, i)->data = x->arena + x->offset[x->nodes[a + i + 1]->in[0]->id];
    return st;
}

/* Dynamic mode: frees what dies at node ni (inputs read for the last time, outputs nobody reads). */
static void free_dead(qr_exec *x, int ni, size_t *live)
{
    const qr_node *n = x->nodes[ni];
    int pre = x->pregelu_in && x->pregelu_in[ni];
    for (int j = 0; j < n->n_in + pre; j++) {
        /* (j == n_in: the GELU chain's input the node reads instead of its input 0, fuse_gelu) */
        const qr_value *v = j < n->n_in ? n->in[j] : x->pregelu_in[ni];
        if (v && x->kind[v->id] == V_RUNTIME && x->last_use[v->id] == ni && x->vt[v->id].data) {
            *live -= qr_tensor_nbytes(&x->vt[v->id]);
            qr_tensor_free(&x->vt[v->id]);
        }
    }
    for (int j = 0; j < n->n_out; j++) {
        qr_value *v = n->out[j];
        if (v && x->last_use[v->id] < 0) {
            *live -= qr_tensor_nbytes(&x->vt[v->id]);
            qr_tensor_free(&x->vt[v->id]);
        }
    }
}

qr_status qr_exec_run(qr_exec *x, const qr_tensor *inputs, qr_tensor *outputs, qr_error *e)
{
    const qr_graph *g = x->g;
    long spills0 = x->work_at->spills;
    x->nsupplied = 0;
    for (int i = 0; i < g->n_outputs; i++)
        memset(&outputs[i], 0, sizeof outputs[i]);
    if (check_inputs(x, inputs, e) != QR_OK)
        return QR_ERR;
    if (!same_input_shapes(x, inputs) && plan(x, inputs, e) != QR_OK) {
        drop_plan(x);
        return QR_ERR;
    }
    bind_values(x, inputs);
    if (!x->dynamic && !x->prep && !x->opts.observer && !x->opts.no_records)
        prepare_nodes(x, e);
    size_t live = 0, peak = 0;
    qr_status st = QR_OK;
    for (int ni = 0; ni < x->nn; ni++) {
        if (x->skip && x->skip[ni])
            continue; /* its producer applied it (fuse_acts) */
        if (x->node_done[ni]) {
            observe(x, x->nodes[ni]);
            continue;
        }
        if (!x->dynamic && x->banded && x->banded[ni]) {
            if ((st = run_bands(x, ni, e)) != QR_OK)
                break;
            ni += x->banded[ni] - 1;
            continue;
        }
        if (!x->dynamic && x->tiled && x->tiled[ni]) {
            if ((st = run_chain(x, ni, e)) != QR_OK)
                break;
            ni += x->chain[ni] - 1;
            continue;
        }
        if ((st = run_node(x, ni, &live, e)) != QR_OK)
            break;
        if (live > peak)
            peak = live;
        if (x->dynamic)
            free_dead(x, ni, &live);
    }
    for (int i = 0; i < g->n_outputs && st == QR_OK; i++) {
        const qr_tensor *t = &x->vt[g->outputs[i]->id];
        outputs[i] = *t;
        if ((st = qr_tensor_alloc(&outputs[i], e)) == QR_OK && qr_tensor_nbytes(t))
            memcpy(outputs[i].data, t->data, qr_tensor_nbytes(t));
    }
    if (x->dynamic) {
        /* Free whatever is still allocated (graph outputs, or everything after an error). */
        for (int i = 0; i < x->nv; i++)
            if (x->kind[i] == V_RUNTIME)
                qr_tensor_free(&x->vt[i]);
    }
    if (st != QR_OK)
        for (int i = 0; i < g->n_outputs; i++)
            qr_tensor_free(&outputs[i]);
    if (st == QR_OK) { /* samples: the first input's first axis (a batch), 1 without one */
        int64_t samples = g->n_inputs > 0 && inputs[0].ndim > 0 ? inputs[0].dims[0] : 1;
        if (x->opts.samples > 0) /* the caller's count: its first input is not a batch */
            samples = x->opts.samples;
        int64_t n = (int64_t)(x->ncounted - x->nsupplied) * samples;
        atomic_fetch_add(&node_samples, n);
        atomic_fetch_add(&node_samples_in[atomic_load(&account)], n);
    }
    x->stats.dynamic = x->dynamic;
    x->stats.peak_bytes = x->dynamic ? peak : x->arena_size;
    x->stats.work_bytes = x->work_at->cap;
    x->stats.cache_bytes = x->cache_total;
    x->stats.work_spills = x->work_at->spills - spills0;
    return st;
}
