#include <assert.h>
#include <stddef.h>
#include "op.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_common.h"
#include "options.h"

/* The tables of runtime/ops/, concatenated. Only ONNX's ops and the runtime's own: a layer
 * above (the quantizer) keeps its private ops in its own table. */
static const qr_op_def *const op_tables[] = {
    qr_ops_elementwise, qr_ops_conv, qr_ops_dense, qr_ops_shape, qr_ops_reduce, qr_ops_quant, qr_ops_misc,
};

#define MAX_OPS 256
static const qr_op_def *op_all[MAX_OPS];
static int op_count;
static pthread_once_t op_once = PTHREAD_ONCE_INIT;

/* Once per process, whichever thread asks first (executors look ops up from their workers). */
static void op_init(void)
{
    int n = 0;
    for (size_t t = 0; t < sizeof op_tables / sizeof op_tables[0]; t++)
        for (const qr_op_def *d = op_tables[t]; d->name; d++) {
            assert(n < MAX_OPS && "op table: raise MAX_OPS");
            op_all[n++] = d;
        }
    op_count = n;
}

const qr_op_def *qr_op_find_in(const qr_op_def *table, const char *domain, const char *name)
{
    if (!domain || strcmp(domain, "ai.onnx") == 0)
        domain = "";
    for (const qr_op_def *d = table; d->name; d++)
        if (strcmp(d->name, name) == 0 && strcmp(d->domain ? d->domain : "", domain) == 0)
            return d;
    return NULL;
}

const qr_op_def *qr_op_find(const char *domain, const char *name)
{
    pthread_once(&op_once, op_init);
    if (!domain || strcmp(domain, "ai.onnx") == 0)
        domain = "";
    for (int i = 0; i < op_count; i++) {
        const char *d = op_all[i]->domain ? op_all[i]->domain : "";
        if (strcmp(op_all[i]->name, name) == 0 && strcmp(d, domain) == 0)
            return op_all[i];
    }
    return NULL;
}

int qr_op_list(const qr_op_def *const **defs)
{
    pthread_once(&op_once, op_init);
    *defs = op_all;
    return op_count;
}

/* ---- input declarations (qr_op_def.ins) ---- */

typedef struct in_spec {
    char name[32];
    int optional;
    const char *types; /* NULL: any */
    int ntypes;
    int rmin, rmax;    /* -1: unchecked */
} in_spec;

/* Reads token number i of ins (the last one repeats when it ends in "..."); 0 when there is none. */
static int spec_at(const char *ins, int i, in_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->rmin = sp->rmax = -1;
    if (!ins)
        return 0;
    const char *s = ins, *tok = NULL;
    size_t len = 0;
    for (int k = 0;; k++) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        const char *end = strchr(s, ' ');
        if (!end)
            end = s + strlen(s);
        tok = s;
        len = (size_t)(end - s);
        s = end;
        if (k == i)
            goto found;
    }
    /* Past the last token: only a variadic last token applies. */
    if (!tok || len < 3 || strncmp(tok + len - 3, "...", 3) != 0)
        return 0;
found:
    if (len >= 3 && strncmp(tok + len - 3, "...", 3) == 0)
        len -= 3;
    size_t k = 0;
    while (k < len && tok[k] != '?' && tok[k] != ':' && k + 1 < sizeof sp->name) {
        sp->name[k] = tok[k];
        k++;
    }
    sp->name[k] = 0;
    while (k < len && tok[k] != '?' && tok[k] != ':')
        k++;
    if (k < len && tok[k] == '?') {
        sp->optional = 1;
        k++;
    }
    if (k < len && tok[k] == ':') {
        k++;
        sp->types = tok + k;
        while (k < len && !(tok[k] >= '0' && tok[k] <= '9'))
            k++, sp->ntypes++;
        if (k < len) {
            sp->rmin = sp->rmax = (int)strtol(tok + k, NULL, 10);
            while (k < len && tok[k] >= '0' && tok[k] <= '9')
                k++;
            if (k < len && tok[k] == '+')
                sp->rmax = 1 << 20;
            else if (k < len && tok[k] == '-')
                sp->rmax = (int)strtol(tok + k + 1, NULL, 10);
        }
    }
    return 1;
}

static int type_ok(qr_dtype t, char c)
{
    switch (c) {
    case 'f': return qr_dtype_is_float(t);
    case 'i': return qr_dtype_is_int(t);
    case 'x': return t == QR_I32 || t == QR_I64;
    case 'q': return t == QR_U8 || t == QR_I8;
    case 'w': return t == QR_U8 || t == QR_I8 || t == QR_U16 || t == QR_I16;
    case 'b': return t == QR_BOOL;
    default: return 1;
    }
}

static const char *type_words(char c)
{
    switch (c) {
    case 'f': return "a float type";
    case 'i': return "an integer type";
    case 'x': return "int32 or int64";
    case 'q': return "uint8 or int8";
    case 'w': return "an 8- or 16-bit integer type";
    case 'b': return "bool";
    default: return "any type";
    }
}

/* "input 1 ('W')" for messages. */
static const char *in_label(int i, const in_spec *sp, char *buf, size_t n)
{
    if (sp->name[0])
        snprintf(buf, n, "input %d ('%s')", i, sp->name);
    else
        snprintf(buf, n, "input %d", i);
    return buf;
}

/* Input i is left out: an error unless the op declares it optional. */
static qr_status check_absent(const qr_op_def *d, int i, qr_error *e)
{
    in_spec sp;
    int have = spec_at(d->ins, i, &sp);
    if (i < d->min_in || (have && !sp.optional)) {
        char lab[64];
        return qr_errorf(e, "%s is required but left out (\"\")", in_label(i, &sp, lab, sizeof lab));
    }
    return QR_OK;
}

int qr_op_samples_window(const qr_node *n, int j)
{
    (void)n;
    return j == 0 ? QR_SAMPLES_EACH : QR_SAMPLES_WHOLE;
}

int qr_op_writes_all(const qr_kctx *k)
{
    (void)k;
    return 1;
}

qr_status qr_op_check_present(const qr_node *n, qr_error *e)
{
    for (int i = 0; n->def && i < n->n_in; i++)
        if (!n->in[i] && check_absent(n->def, i, e) != QR_OK)
            return QR_ERR;
    return QR_OK;
}

qr_status qr_op_check_inputs(const qr_kctx *k)
{
    const qr_op_def *d = k->node->def;
    if (!d)
        return QR_OK;
    for (int i = 0; i < k->n_in; i++) {
        const qr_tensor *t = k->in[i];
        in_spec sp;
        if (!t && check_absent(d, i, k->err) != QR_OK)
            return QR_ERR;
        if (t && qr_dtype_is_packed(t->dtype) && strcmp(d->name, "DequantizeLinear"))
            return QR_KERR(k, "input %d has type %s (packed 4-bit), which only DequantizeLinear reads", i,
                           qr_dtype_name(t->dtype));
        if (!t || !spec_at(d->ins, i, &sp))
            continue;
        char lab[64];
        if (sp.types && sp.ntypes && sp.types[0] != '*') {
            int ok = 0;
            for (int c = 0; c < sp.ntypes && !ok; c++)
                ok = type_ok(t->dtype, sp.types[c]);
            if (!ok) {
                char want[160] = "";
                for (int c = 0; c < sp.ntypes; c++)
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", c ? " or " : "",
                             type_words(sp.types[c]));
                return QR_KERR(k, "%s has type %s, expected %s", in_label(i, &sp, lab, sizeof lab),
                               qr_dtype_name(t->dtype), want);
            }
        }
        if (sp.rmin >= 0 && t->ndim >= 0 && (t->ndim < sp.rmin || t->ndim > sp.rmax)) {
            if (sp.rmax == sp.rmin)
                return QR_KERR(k, "%s has rank %d, expected %d", in_label(i, &sp, lab, sizeof lab), t->ndim, sp.rmin);
            if (sp.rmax >= 1 << 20)
                return QR_KERR(k, "%s has rank %d, expected %d or more", in_label(i, &sp, lab, sizeof lab), t->ndim,
                               sp.rmin);
            return QR_KERR(k, "%s has rank %d, expected %d to %d", in_label(i, &sp, lab, sizeof lab), t->ndim,
                           sp.rmin, sp.rmax);
        }
    }
    return QR_OK;
}

qr_status qr_op_infer(qr_kctx *k)
{
    if (qr_op_check_inputs(k) != QR_OK)
        return QR_ERR;
    return k->node->def->infer(k);
}

void *qr_kscratch(qr_kctx *k, int64_t rows, int64_t cols, size_t elem, const char *what)
{
    int64_t count;
    size_t bytes;
    int ovf = rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &count) ||
              __builtin_mul_overflow((size_t)count, elem, &bytes) || bytes == SIZE_MAX;
    if (ovf || (k->scratch_max && bytes > k->scratch_max)) {
        char size[40];
        if (ovf)
            snprintf(size, sizeof size, "more than %zu", SIZE_MAX - 1);
        else
            snprintf(size, sizeof size, "%zu", bytes);
        QR_KERR(k, "out of memory budget: its %s needs %s bytes, over the budget of %zu bytes (--max-memory)", what,
                size, k->scratch_max);
        return NULL;
    }
    void *p = malloc(bytes + 1);
    if (!p)
        QR_KERR(k, "out of memory: its %s needs %zu bytes", what, bytes);
    return p;
}

/* The cost model of the kernels, by op: the profiler's mechanism, not a quantization decision. */
double qr_op_macs(const qr_kctx *k)
{
    const char *op = k->node->op;
    if (k->node->def && k->node->def->macs)
        return k->node->def->macs(k);
    if (k->node->domain && k->node->domain[0])
        return 0;
    if (k->n_out < 1 || !k->out[0] || k->n_in < 2)
        return 0;
    double y = (double)qr_tensor_numel(k->out[0]);
    int qlinear = !strcmp(op, "QLinearConv") || !strcmp(op, "QLinearMatMul");
    const qr_tensor *a = k->in[0], *w = k->in[qlinear ? 3 : 1];
    if (!a || !w || w->ndim < 1 || a->ndim < 1)
        return 0;
    if (!strcmp(op, "Conv") || !strcmp(op, "ConvInteger") || !strcmp(op, "QLinearConv")) /* per output: C/group x kernel */
        return w->dims[0] > 0 ? y * (double)qr_tensor_numel(w) / (double)w->dims[0] : 0;
    if (!strcmp(op, "ConvTranspose")) /* per input element: C_out/group x kernel */
        return w->dims[0] > 0 ? (double)qr_tensor_numel(a) * (double)qr_tensor_numel(w) / (double)w->dims[0] : 0;
    if (!strcmp(op, "MatMul") || !strcmp(op, "MatMulInteger") || !strcmp(op, "QLinearMatMul"))
        return y * (double)a->dims[a->ndim - 1];
    if (!strcmp(op, "Gemm") && a->ndim == 2)
        return y * (double)a->dims[qr_attr_i(k->node, "transA", 0) ? 0 : 1];
    return 0;
}

void *qr_kcache_get(qr_kctx *k, size_t bytes, const char *what, int *fresh)
{
    /* the name too: two layouts of one size (the GEMV's packing and the VNNI kernel's panels of a
     * B of 32 k columns) must never be read as each other when a node's row count picks another path */
    if (k->cache && k->cache->data && k->cache->bytes == bytes && k->cache->what && !strcmp(k->cache->what, what)) {
        *fresh = 0;
        return k->cache->data;
    }
    /* what the executor it shares with keeps (the same graph and threads: the same bytes); never
     * freed nor written here */
    if (k->shared && k->shared->data && k->shared->bytes == bytes && k->shared->what && !strcmp(k->shared->what, what) &&
        !(k->cache && k->cache->data)) {
        *fresh = 0;
        return k->shared->data;
    }
    void *p = qr_kscratch(k, 1, (int64_t)bytes, 1, what);
    if (!p)
        return NULL;
    *fresh = 1;
    size_t had = k->cache && k->cache->data ? k->cache->bytes : 0;
    if (k->cache && (!k->cache_total || *k->cache_total - had + bytes <= (k->cache_max ? k->cache_max : QR_KCACHE_MAX))) {
        free(k->cache->data);
        k->cache->data = p;
        k->cache->bytes = bytes;
        k->cache->what = what;
        if (k->cache_total)
            *k->cache_total += bytes - had;
    }
    return p;
}

/* A new 64-byte aligned buffer of bytes for one of a node's kept slots (*slot, its size and name),
 * the one it held freed, counted against the executor's kept bytes; past those, a workspace buffer
 * for this run alone (the slot unchanged). NULL with the error set. */
static void *slot_take(qr_kctx *k, void **slot, size_t *slot_bytes, const char **slot_what, size_t bytes,
                       const char *what)
{
    size_t had = *slot ? (*slot_bytes + 63) / 64 * 64 : 0, padded = (bytes + 63) / 64 * 64;
    if (bytes == 0 || (k->cache_total && *k->cache_total - had + padded > (k->cache_max ? k->cache_max : QR_KCACHE_MAX)))
        return qr_kwork(k, 1, (int64_t)bytes, 1, what);
    if (k->scratch_max && bytes > k->scratch_max) /* the budget's message */
        return qr_kscratch(k, 1, (int64_t)bytes, 1, what);
    void *p = aligned_alloc(64, padded);
    if (!p) {
        QR_KERR(k, "out of memory: its %s needs %zu bytes", what, bytes);
        return NULL;
    }
    free(*slot);
    *slot = p;
    *slot_bytes = bytes;
    *slot_what = what;
    if (k->cache_total)
        *k->cache_total += padded - had;
    return p;
}

void *qr_kkeep_get(qr_kctx *k, size_t bytes, const char *what, int *fresh)
{
    qr_kcache *s = k->cache;
    *fresh = 1;
    if (s && s->keep && s->keep_bytes == bytes && s->keep_what == what) {
        *fresh = 0;
        return s->keep;
    }
    if (!s)
        return qr_kwork(k, 1, (int64_t)bytes, 1, what);
    return slot_take(k, &s->keep, &s->keep_bytes, &s->keep_what, bytes, what);
}

/* The shapes a run plan is made from, as one number: the dtype, rank and dims of every input that
 * is not a constant (a constant's are the same on every run of the executor). */
static uint64_t plan_shapes_key(const qr_kctx *k)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)k->n_in;
    for (int i = 0; i < k->n_in; i++) {
        const qr_tensor *t = k->in[i];
        if (!t || qr_kinput_const(k, i))
            continue;
        h = (h ^ ((uint64_t)t->dtype << 32 | (uint32_t)t->ndim)) * 0x100000001b3ull;
        for (int d = 0; d < t->ndim; d++)
            h = (h ^ (uint64_t)t->dims[d]) * 0x100000001b3ull;
    }
    return h;
}

void *qr_kplan_get(qr_kctx *k, size_t bytes, const char *what, int *fresh)
{
    qr_kcache *s = k->plan_static ? k->cache : NULL;
    unsigned epoch = qr_options_epoch();
    *fresh = 1;
    if (!s)
        return qr_kwork(k, 1, (int64_t)bytes, 1, what);
    if (s->plan && s->plan_ready && s->plan_bytes == bytes && s->plan_what == what && s->plan_epoch == epoch) {
        if (plan_shapes_key(k) != s->plan_shapes) { /* a bug of the executor's, not of the input */
            fprintf(stderr,
                    "qrl: internal error: node '%s' (%s): its %s was made for other input shapes and not dropped "
                    "(runtime/exec.c drop_plan)\n",
                    k->node->name ? k->node->name : "", k->node->op, what);
            abort();
        }
        *fresh = 0;
        return s->plan;
    }
    s->plan_ready = 0;
    void *p = s->plan && s->plan_bytes == bytes && s->plan_what == what
                  ? s->plan
                  : slot_take(k, &s->plan, &s->plan_bytes, &s->plan_what, bytes, what);
    if (p && p == s->plan) {
        s->plan_epoch = epoch;
        s->plan_shapes = plan_shapes_key(k);
    }
    return p;
}

void qr_kplan_ready(qr_kctx *k, const void *p)
{
    if (k->plan_static && k->cache && p && k->cache->plan == p)
        k->cache->plan_ready = 1;
}

/* Frees p unless it is the buffer slot keeps (a kernel context without the slot got a fresh one). */
static void slot_done(const qr_kcache *slot, void *p)
{
    if (!slot || slot->data != p)
        free(p);
}

void qr_kcache_done(qr_kctx *k, void *p)
{
    if (!k->shared || k->shared->data != p)
        slot_done(k->cache, p);
}

/* An allocation past the arena's buffer, freed when its node ends. */
typedef struct qr_kwork_spill {
    struct qr_kwork_spill *next;
    max_align_t align[];
} qr_kwork_spill;

enum { KWORK_ALIGN = 64 };

int qr_kwork_fits(const qr_kctx *k, int64_t rows, int64_t cols, size_t elem)
{
    int64_t count;
    size_t bytes;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &count) ||
        __builtin_mul_overflow((size_t)count, elem, &bytes) || bytes > SIZE_MAX / 2)
        return 0;
    size_t padded = (bytes + KWORK_ALIGN - 1) / KWORK_ALIGN * KWORK_ALIGN;
    return !k->scratch_max || !k->work || k->work->need + padded <= k->scratch_max;
}

void *qr_kwork(qr_kctx *k, int64_t rows, int64_t cols, size_t elem, const char *what)
{
    qr_kwork_arena *a = k->work;
    assert(a && "qr_kwork outside qr_op_run");
    int64_t count;
    size_t bytes;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &count) ||
        __builtin_mul_overflow((size_t)count, elem, &bytes) || bytes > SIZE_MAX / 2)
        return qr_kscratch(k, rows, cols, elem, what); /* reports the size */
    size_t padded = (bytes + KWORK_ALIGN - 1) / KWORK_ALIGN * KWORK_ALIGN;
    if (k->scratch_max && a->need + padded > k->scratch_max)
        return qr_kscratch(k, 1, (int64_t)(a->need + padded), 1, what); /* reports the budget */
    a->need += padded;
    if (a->used + padded <= a->cap) {
        void *p = a->base + a->used;
        a->used += padded;
        return p;
    }
    qr_kwork_spill *sp = aligned_alloc(KWORK_ALIGN, (sizeof *sp + KWORK_ALIGN - 1) / KWORK_ALIGN * KWORK_ALIGN + padded);
    if (!sp) {
        QR_KERR(k, "out of memory: its %s needs %zu bytes", what, bytes);
        return NULL;
    }
    sp->next = a->spill;
    a->spill = sp;
    a->spills++;
    return (unsigned char *)sp + (sizeof *sp + KWORK_ALIGN - 1) / KWORK_ALIGN * KWORK_ALIGN;
}

/* The node's spills are freed; the buffer grows to the largest need seen, for the next run. */
static void kwork_end(qr_kwork_arena *a)
{
    while (a->spill) {
        qr_kwork_spill *next = a->spill->next;
        free(a->spill);
        a->spill = next;
    }
    if (a->need > a->high)
        a->high = a->need;
    if (a->high > a->cap) {
        unsigned char *grown = aligned_alloc(KWORK_ALIGN, a->high);
        if (grown) { /* else the next run spills again */
            free(a->base);
            a->base = grown;
            a->cap = a->high;
        }
    }
    a->used = a->need = 0;
}

qr_status qr_op_run(qr_kctx *k)
{
    qr_kwork_arena own = {0}, *outer = k->work;
    if (!outer)
        k->work = &own;
    qr_kwork_arena *a = k->work;
    a->used = a->need = 0;
    qr_status st = k->node->def->run(k);
    if (outer) {
        kwork_end(a);
    } else {
        while (own.spill) {
            qr_kwork_spill *next = own.spill->next;
            free(own.spill);
            own.spill = next;
        }
        k->work = NULL;
    }
    return st;
}

void qr_kwork_arena_free(qr_kwork_arena *a)
{
    free(a->base);
    *a = (qr_kwork_arena){0};
}

int qr_kinput_const(const qr_kctx *k, int i)
{
    return i >= 0 && i < k->n_in && k->node->in && i < k->node->n_in && k->node->in[i] && k->node->in[i]->is_const;
}

int qr_kinput_fixed(const qr_kctx *k, int i)
{
    if (qr_kinput_const(k, i))
        return 1;
    const qr_value *v = i >= 0 && i < k->n_in && k->node->in && i < k->node->n_in ? k->node->in[i] : NULL;
    return v && k->fixed && v->id >= 0 && k->fixed[v->id];
}
