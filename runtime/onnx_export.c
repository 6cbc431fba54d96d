#include "onnx_export.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "dtype.h"
#include "fileio.h"
#include "onnx.pb-c.h"

#ifndef QRL_VERSION
#define QRL_VERSION "dev"
#endif

typedef struct ex {
    qr_arena ar;
    const qr_graph *g;
} ex;

/* x = a new T in the arena, initialized; the function returns NULL when it does not fit (every
 * proto is built into the arena: qr_onnx_save reports out of memory once). */
#define NEW(x, T, init)                                                                                               \
    do {                                                                                                              \
        if (!((x) = qr_arena_alloc(&c->ar, sizeof(T))))                                                               \
            return NULL;                                                                                              \
        init(x);                                                                                                      \
    } while (0)

/* NULL when out of memory (the arena marked). */
static char *str(ex *c, const char *s)
{
    return qr_arena_strdup(&c->ar, s ? s : "");
}

static Onnx__TensorProto *tensor(ex *c, const char *name, const qr_tensor *t)
{
    Onnx__TensorProto *tp;
    NEW(tp, Onnx__TensorProto, onnx__tensor_proto__init);
    tp->name = str(c, name);
    tp->n_dims = (size_t)t->ndim;
    tp->dims = qr_arena_memdup(&c->ar, t->dims, sizeof(int64_t) * (size_t)(t->ndim ? t->ndim : 1));
    tp->has_data_type = 1;
    tp->data_type = qr_dtype_get(t->dtype)->onnx;
    tp->has_raw_data = 1;
    tp->raw_data.len = qr_tensor_nbytes(t);
    tp->raw_data.data = t->data; /* little-endian, as ONNX raw_data: no copy needed */
    return tp;
}

static Onnx__ValueInfoProto *value_info(ex *c, const qr_value *v)
{
    Onnx__ValueInfoProto *vi;
    Onnx__TypeProto *tp;
    Onnx__TypeProto__Tensor *tt;
    NEW(vi, Onnx__ValueInfoProto, onnx__value_info_proto__init);
    NEW(tp, Onnx__TypeProto, onnx__type_proto__init);
    NEW(tt, Onnx__TypeProto__Tensor, onnx__type_proto__tensor__init);
    vi->name = str(c, v->name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    if (v->t.dtype != QR_UNDEF) {
        tt->has_elem_type = 1;
        tt->elem_type = qr_dtype_get(v->t.dtype)->onnx;
    }
    if (v->t.ndim >= 0) {
        Onnx__TensorShapeProto *sp;
        NEW(sp, Onnx__TensorShapeProto, onnx__tensor_shape_proto__init);
        tt->shape = sp;
        sp->n_dim = (size_t)v->t.ndim;
        if (!(sp->dim = qr_arena_alloc(&c->ar, sizeof *sp->dim * (size_t)(v->t.ndim + 1))))
            return NULL;
        for (int d = 0; d < v->t.ndim; d++) {
            NEW(sp->dim[d], Onnx__TensorShapeProto__Dimension, onnx__tensor_shape_proto__dimension__init);
            if (v->t.dims[d] >= 0) {
                sp->dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                sp->dim[d]->dim_value = v->t.dims[d];
            } else if (v->dim_param[d]) {
                sp->dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                sp->dim[d]->dim_param = str(c, v->dim_param[d]);
            }
        }
    }
    return vi;
}

static Onnx__AttributeProto *attribute(ex *c, const qr_attr *a)
{
    Onnx__AttributeProto *ap;
    NEW(ap, Onnx__AttributeProto, onnx__attribute_proto__init);
    ap->name = str(c, a->name);
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->kind;
    switch (a->kind) {
    case QR_ATTR_FLOAT:
        ap->has_f = 1;
        ap->f = a->f;
        break;
    case QR_ATTR_INT:
        ap->has_i = 1;
        ap->i = a->i;
        break;
    case QR_ATTR_STRING:
        ap->has_s = 1;
        ap->s.data = (uint8_t *)str(c, a->s);
        ap->s.len = strlen(a->s ? a->s : "");
        break;
    case QR_ATTR_TENSOR: ap->t = tensor(c, "", &a->t); break;
    case QR_ATTR_FLOATS:
        ap->n_floats = (size_t)a->n;
        ap->floats = a->floats;
        break;
    case QR_ATTR_INTS:
        ap->n_ints = (size_t)a->n;
        ap->ints = a->ints;
        break;
    case QR_ATTR_STRINGS:
        ap->n_strings = (size_t)a->n;
        if (!(ap->strings = qr_arena_alloc(&c->ar, sizeof *ap->strings * (size_t)(a->n + 1))))
            return NULL;
        for (int i = 0; i < a->n; i++) {
            ap->strings[i].data = (uint8_t *)str(c, a->strs[i]);
            ap->strings[i].len = strlen(a->strs[i]);
        }
        break;
    default: break;
    }
    return ap;
}

/* The opset imports: the default domain, and each other domain used (as many as the nodes have).
 * NULL when out of memory. */
static Onnx__ModelProto *opset_imports(ex *c, Onnx__ModelProto *m)
{
    const qr_graph *g = c->g;
    const char **domains = malloc(sizeof *domains * ((size_t)g->n_nodes + 1));
    int64_t *versions = malloc(sizeof *versions * ((size_t)g->n_nodes + 1));
    if (!domains || !versions) {
        free(domains);
        free(versions);
        return NULL;
    }
    domains[0] = "";
    versions[0] = g->opset;
    int nd = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        if (n->dead)
            continue;
        int k = 0;
        while (k < nd && strcmp(domains[k], n->domain))
            k++;
        if (k == nd) {
            domains[nd] = n->domain;
            versions[nd++] = n->opset;
        } else if (k < nd && n->opset > versions[k]) {
            versions[k] = n->opset;
        }
    }
    m->n_opset_import = (size_t)nd;
    m->opset_import = qr_arena_alloc(&c->ar, sizeof *m->opset_import * (size_t)nd);
    for (int k = 0; m->opset_import && k < nd; k++) {
        Onnx__OperatorSetIdProto *op = qr_arena_alloc(&c->ar, sizeof *op);
        if (!(m->opset_import[k] = op))
            break;
        onnx__operator_set_id_proto__init(op);
        op->domain = str(c, domains[k]);
        op->has_version = 1;
        op->version = versions[k];
    }
    free(domains);
    free(versions);
    return c->ar.oom ? NULL : m;
}

static Onnx__NodeProto *node(ex *c, const qr_node *n)
{
    Onnx__NodeProto *np;
    NEW(np, Onnx__NodeProto, onnx__node_proto__init);
    np->name = str(c, n->name);
    np->op_type = str(c, n->op);
    np->domain = str(c, n->domain);
    np->input = qr_arena_alloc(&c->ar, sizeof *np->input * (size_t)(n->n_in + 1));
    np->output = qr_arena_alloc(&c->ar, sizeof *np->output * (size_t)(n->n_out + 1));
    np->attribute = qr_arena_alloc(&c->ar, sizeof *np->attribute * (size_t)(n->n_attr + 1));
    if (!np->input || !np->output || !np->attribute)
        return NULL;
    np->n_input = (size_t)n->n_in;
    for (int j = 0; j < n->n_in; j++)
        np->input[j] = str(c, n->in[j] ? n->in[j]->name : "");
    np->n_output = (size_t)n->n_out;
    for (int j = 0; j < n->n_out; j++)
        np->output[j] = str(c, n->out[j] ? n->out[j]->name : "");
    np->n_attribute = (size_t)n->n_attr;
    for (int k = 0; k < n->n_attr; k++)
        np->attribute[k] = attribute(c, &n->attr[k]);
    return np;
}

/* The live nodes, then as initializers the constants some node reads or the graph outputs. */
static Onnx__GraphProto *nodes_and_initializers(ex *c, Onnx__GraphProto *gp)
{
    const qr_graph *g = c->g;
    if (!(gp->node = qr_arena_alloc(&c->ar, sizeof *gp->node * (size_t)(g->n_nodes + 1))))
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && !(gp->node[gp->n_node++] = node(c, g->nodes[i])))
            return NULL;
    gp->initializer = qr_arena_alloc(&c->ar, sizeof *gp->initializer * (size_t)(g->n_values + 1));
    unsigned char *used = qr_arena_alloc(&c->ar, (size_t)g->n_values + 1);
    if (!gp->initializer || !used)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++)
            if (g->nodes[i]->in[j])
                used[g->nodes[i]->in[j]->id] = 1;
    for (int i = 0; i < g->n_outputs; i++)
        used[g->outputs[i]->id] = 1;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->is_const && used[i])
            gp->initializer[gp->n_initializer++] = tensor(c, g->values[i]->name, &g->values[i]->t);
    return gp;
}

static Onnx__GraphProto *inputs_and_outputs(ex *c, Onnx__GraphProto *gp)
{
    const qr_graph *g = c->g;
    gp->input = qr_arena_alloc(&c->ar, sizeof *gp->input * (size_t)(g->n_inputs + 1));
    gp->output = qr_arena_alloc(&c->ar, sizeof *gp->output * (size_t)(g->n_outputs + 1));
    if (!gp->input || !gp->output)
        return NULL;
    for (int i = 0; i < g->n_inputs; i++)
        gp->input[gp->n_input++] = value_info(c, g->inputs[i]);
    for (int i = 0; i < g->n_outputs; i++)
        gp->output[gp->n_output++] = value_info(c, g->outputs[i]);
    return gp;
}

/* The whole model as protos in c's arena; NULL when out of memory. */
static Onnx__ModelProto *model(ex *c)
{
    Onnx__ModelProto *m;
    Onnx__GraphProto *gp;
    NEW(m, Onnx__ModelProto, onnx__model_proto__init);
    NEW(gp, Onnx__GraphProto, onnx__graph_proto__init);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->producer_name = str(c, "qrl");
    m->producer_version = str(c, QRL_VERSION);
    m->graph = gp;
    if (c->g->n_meta) { /* what made the model (qrl.*, api/quantize.c) and what it carried */
        m->metadata_props = qr_arena_alloc(&c->ar, sizeof *m->metadata_props * (size_t)c->g->n_meta);
        for (int i = 0; m->metadata_props && i < c->g->n_meta; i++) {
            Onnx__StringStringEntryProto *p;
            NEW(p, Onnx__StringStringEntryProto, onnx__string_string_entry_proto__init);
            p->key = str(c, c->g->meta_key[i]);
            p->value = str(c, c->g->meta_val[i]);
            m->metadata_props[m->n_metadata_props++] = p;
        }
    }
    gp->name = str(c, c->g->name && *c->g->name ? c->g->name : "qrl");
    if (!opset_imports(c, m) || !nodes_and_initializers(c, gp) || !inputs_and_outputs(c, gp))
        return NULL;
    return c->ar.oom ? NULL : m; /* a name or a part of a node's that did not fit */
}

/* Bytes of one file written so far, told to a progress caller at least every 1/64 of the file. */
typedef struct bytes_told {
    const qr_export_progress *p;
    const char *file;
    int64_t done, total, next;
} bytes_told;

static void tell(bytes_told *t, int64_t more)
{
    t->done += more;
    if (!t->p || !t->p->fn || (t->done < t->next && t->done < t->total))
        return;
    t->next = t->done + (t->total / 64 > 0 ? t->total / 64 : 1);
    t->p->fn(t->p->ctx, t->file, t->done < t->total ? t->done : t->total, t->total);
}

/* protobuf-c's output, appended to a file as it is serialized. */
typedef struct file_out {
    ProtobufCBuffer base;
    FILE *f;
    int failed;
    bytes_told told;
} file_out;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_out *o = (file_out *)b;
    if (!o->failed && len && fwrite(data, 1, len, o->f) != len)
        o->failed = 1;
    if (!o->failed)
        tell(&o->told, (int64_t)len);
}

/* m serialized into path, atomically. Streamed to the file: the weights go from the graph's memory
 * (raw_data points there) to the file, with no serialized copy of the model in memory (as large
 * as its weights: a third of a 300M-parameter decoder's peak in qrl quantize). */
static qr_status pack_and_write(const Onnx__ModelProto *m, const char *path, const qr_export_progress *p,
                                qr_error *e)
{
    qr_atomic_file af;
    qr_status st = qr_atomic_open(&af, path, e);
    if (st != QR_OK)
        return st;
    file_out o = {.base = {.append = file_append}, .f = af.f, .told = {.p = p, .file = "model"}};
    if (p)
        o.told.total = (int64_t)onnx__model_proto__get_packed_size(m);
    onnx__model_proto__pack_to_buffer(m, &o.base);
    if (o.failed) {
        qr_atomic_abort(&af);
        return qr_errorf(e, "%s: write failed", path);
    }
    return qr_atomic_commit(&af, e);
}

/* Initializers of at least this many bytes go to the external data file (onnx's own default
 * size_threshold); smaller ones stay in the model, where a reader needs no second file for them. */
#define EXT_MIN_BYTES 1024
/* Offsets in the data file: 4096-aligned for tensors of 1 MB or more (ONNX Runtime maps those in
 * place when aligned to the page), else 64-aligned. */
#define EXT_PAGE_BYTES ((size_t)1 << 20)

static size_t ext_align(size_t at, size_t nbytes)
{
    size_t a = nbytes >= EXT_PAGE_BYTES ? 4096 : 64;
    return (at + a - 1) / a * a;
}

/* Moves m's initializers of EXT_MIN_BYTES or more into the file data_path (written atomically,
 * padded to their offsets), each TensorProto pointing at it: location (its name, which lies
 * beside the model), offset, length. */
static qr_status write_external(ex *c, Onnx__ModelProto *m, const char *data_path, const char *location,
                                const qr_export_progress *p, qr_error *e)
{
    Onnx__GraphProto *gp = m->graph;
    qr_atomic_file af;
    if (qr_atomic_open(&af, data_path, e) != QR_OK)
        return QR_ERR;
    static const unsigned char zeros[4096];
    size_t at = 0;
    bytes_told told = {.p = p, .file = "data"};
    for (size_t i = 0; p && i < gp->n_initializer; i++) /* the file's size, its padding included */
        if (gp->initializer[i]->raw_data.len >= EXT_MIN_BYTES)
            told.total = (int64_t)(ext_align((size_t)told.total, gp->initializer[i]->raw_data.len) +
                                   gp->initializer[i]->raw_data.len);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        size_t n = tp->raw_data.len, off = ext_align(at, n);
        if (n < EXT_MIN_BYTES)
            continue;
        if (fwrite(zeros, 1, off - at, af.f) != off - at || fwrite(tp->raw_data.data, 1, n, af.f) != n) {
            qr_atomic_abort(&af);
            return qr_errorf(e, "%s: write failed", data_path);
        }
        tell(&told, (int64_t)(off + n - at));
        at = off + n;
        char num[2][32];
        snprintf(num[0], sizeof num[0], "%zu", off);
        snprintf(num[1], sizeof num[1], "%zu", n);
        const char *kv[3][2] = {{"location", location}, {"offset", num[0]}, {"length", num[1]}};
        tp->external_data = qr_arena_alloc(&c->ar, sizeof *tp->external_data * 3);
        for (int k = 0; tp->external_data && k < 3; k++) {
            Onnx__StringStringEntryProto *p = qr_arena_alloc(&c->ar, sizeof *p);
            if (!p)
                break;
            onnx__string_string_entry_proto__init(p);
            p->key = str(c, kv[k][0]);
            p->value = str(c, kv[k][1]);
            tp->external_data[tp->n_external_data++] = p;
        }
        if (c->ar.oom || tp->n_external_data != 3) {
            qr_atomic_abort(&af);
            return qr_errorf(e, "%s: out of memory", data_path);
        }
        tp->has_data_location = 1;
        tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        tp->has_raw_data = 0;
        tp->raw_data.len = 0;
        tp->raw_data.data = NULL;
    }
    return qr_atomic_commit(&af, e);
}

/* m as path, its large initializers first moved to path + ".data" (write_external). */
static qr_status save_external(ex *c, Onnx__ModelProto *m, const char *path, const qr_export_progress *p,
                               qr_error *e)
{
    size_t n = strlen(path) + 8;
    char *data_path = malloc(n);
    if (!data_path)
        return qr_errorf(e, "%s: out of memory", path);
    snprintf(data_path, n, "%s.data", path);
    const char *slash = strrchr(data_path, '/');
    /* the location is relative to the model's folder, where readers resolve it */
    qr_status st = write_external(c, m, data_path, slash ? slash + 1 : data_path, p, e);
    free(data_path);
    return st == QR_OK ? pack_and_write(m, path, p, e) : st;
}

qr_status qr_onnx_save_ext(const qr_graph *g, const char *path, int external, qr_error *e)
{
    return qr_onnx_save_limit(g, path, external, QR_ONNX_MAX_PROTO_BYTES, e);
}

qr_status qr_onnx_save_limit(const qr_graph *g, const char *path, int external, size_t limit, qr_error *e)
{
    return qr_onnx_save_progress(g, path, external, limit, NULL, e);
}

qr_status qr_onnx_save_progress(const qr_graph *g, const char *path, int external, size_t limit,
                                const qr_export_progress *progress, qr_error *e)
{
    ex cx = {.g = g}, *c = &cx;
    qr_arena_init(&c->ar);
    Onnx__ModelProto *m = model(c);
    if (!m) {
        qr_arena_free(&c->ar);
        return qr_errorf(e, "%s: out of memory", path);
    }
    qr_status st;
    /* protobuf's limit: past 2 GB no reader can parse the model, so its data goes beside it */
    if (external || onnx__model_proto__get_packed_size(m) > limit) {
        int own = !qr_atomic_group_open(); /* the model and its data all or nothing */
        if (own)
            qr_atomic_group_begin();
        st = save_external(c, m, path, progress, e);
        if (own && st == QR_OK)
            st = qr_atomic_group_commit(e);
        else if (own)
            qr_atomic_group_abort();
    } else {
        st = pack_and_write(m, path, progress, e);
    }
    qr_arena_free(&c->ar);
    return st;
}

qr_status qr_onnx_save(const qr_graph *g, const char *path, qr_error *e)
{
    return qr_onnx_save_ext(g, path, 0, e);
}
