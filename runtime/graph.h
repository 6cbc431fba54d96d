/* The graph IR: values (type, shape, optional constant data, optional
 * quantization info) and nodes kept in topological order. All names, nodes,
 * attributes and constant data live in the graph's arena. */
#ifndef QR_GRAPH_H
#define QR_GRAPH_H

#include "arena.h"
#include "status.h"
#include "tensor.h"

struct qr_op_def;

/* Quantization parameters of a value (filled by the quantizer, read by backends). */
typedef struct qr_qinfo {
    qr_dtype dtype;      /* integer storage type */
    int axis;            /* -1: per tensor */
    int n;               /* number of scales/zero points (1 or the axis length) */
    float *scale;
    int32_t *zero;
    double clip_min, clip_max;
    qr_dtype acc;        /* accumulator type of the op producing it, QR_UNDEF if none */
} qr_qinfo;

typedef struct qr_node qr_node;

typedef struct qr_value {
    const char *name;
    /* dtype and shape; ndim < 0 means unknown rank, dims[i] < 0 an unknown dim.
     * t.data is the constant data (in the graph arena) when is_const. */
    qr_tensor t;
    const char *dim_param[QR_MAX_DIMS]; /* symbolic dim names of graph inputs/outputs */
    int is_const;
    struct qr_blob *blob; /* t.data's block when it is a large constant's own (QR_BLOB_MIN), else NULL */
    int is_input;  /* a graph input fed at run time */
    int is_output;
    qr_qinfo *q;
    qr_node *producer; /* NULL for inputs and constants */
    int id;            /* index in graph->values */
} qr_value;

/* ONNX AttributeProto.AttributeType codes. */
typedef enum qr_attr_kind {
    QR_ATTR_UNDEF = 0,
    QR_ATTR_FLOAT = 1,
    QR_ATTR_INT = 2,
    QR_ATTR_STRING = 3,
    QR_ATTR_TENSOR = 4,
    QR_ATTR_GRAPH = 5,
    QR_ATTR_FLOATS = 6,
    QR_ATTR_INTS = 7,
    QR_ATTR_STRINGS = 8,
} qr_attr_kind;

typedef struct qr_attr {
    const char *name;
    qr_attr_kind kind;
    int64_t i;
    float f;
    const char *s;
    qr_tensor t;
    int n; /* element count of ints/floats/strs */
    int64_t *ints;
    float *floats;
    const char **strs;
} qr_attr;

struct qr_node {
    const char *name;
    const char *op;
    const char *domain; /* "" for the default ONNX domain */
    int opset;          /* opset version of the node's domain */
    int n_in, n_out, n_attr;
    qr_value **in;  /* in[i] == NULL: optional input left out */
    qr_value **out;
    qr_attr *attr;
    const struct qr_op_def *def;
    int id;
    int dead; /* removed by a pass; qr_graph_compact drops it */
};

typedef struct qr_graph {
    qr_arena arena;
    qr_value **values;
    int n_values, cap_values;
    qr_node **nodes;
    int n_nodes, cap_nodes;
    qr_value **inputs; /* run-time inputs, in declaration order (initializers excluded) */
    int n_inputs;
    qr_value **outputs;
    int n_outputs;
    int opset;         /* default-domain opset */
    const char *name;
    const char *producer;
    /* the model's metadata_props, in the arena: n_meta key/value pairs (what made it: qrl.*) */
    const char **meta_key, **meta_val;
    int n_meta;
    /* name -> value hash (open addressing, size a power of two) */
    qr_value **index;
    int index_cap;
} qr_graph;

/* An empty graph; NULL when out of memory. */
qr_graph *qr_graph_new(void);
void qr_graph_free(qr_graph *g);
/* Out of memory: the builders below return NULL (or leave the node or value unchanged) when an
 * allocation fails, and mark the graph; whoever builds a graph checks the mark where it reports
 * errors. qr_graph_check_oom turns it into the error "out of memory". */
int qr_graph_oom(const qr_graph *g);
qr_status qr_graph_check_oom(const qr_graph *g, qr_error *e);

/* Sets metadata key to val (copied into g's arena; a key set before is replaced). */
qr_status qr_graph_set_meta(qr_graph *g, const char *key, const char *val);

qr_value *qr_graph_find(const qr_graph *g, const char *name);
/* A new value with a unique name (name is made unique if taken). Unknown type. NULL on out-of-memory. */
qr_value *qr_graph_new_value(qr_graph *g, const char *name);
/* Appends a node; inputs/outputs arrays are allocated and zeroed. NULL on out-of-memory. */
qr_node *qr_graph_add_node(qr_graph *g, const char *op, const char *name, int n_in, int n_out);
/* Makes v a constant holding a copy of t (data copied into the arena); on out-of-memory (or v
 * NULL) nothing changes but the graph's mark. */
void qr_value_set_const(qr_graph *g, qr_value *v, const qr_tensor *t);
/* The same for data whose size a model decides: an error naming v when memory runs out (v unchanged). */
qr_status qr_value_try_set_const(qr_graph *g, qr_value *v, const qr_tensor *t, qr_error *e);
/* Makes v a constant of t's type and shape and returns its data, zeroed, for the caller to fill
 * (the importer copies a weight there once); NULL (v unchanged) when memory runs out. */
void *qr_value_alloc_const(qr_graph *g, qr_value *v, const qr_tensor *t);

/* Constants of QR_BLOB_MIN bytes or more (the weights) keep their data in a block of their own, an
 * anonymous mapping counted by references, rather than in the arena: qr_graph_clone_shared gives
 * the copy the same blocks, so the quantizer's graphs (QDQ, integer, simulated) hold a model's
 * weights once, and a graph freed gives its weights' memory back at once (the arena keeps all
 * of it until the graph is freed). A block is made read-only when it is shared, so a write
 * through a shared constant faults instead of changing another graph: write a constant of a
 * shared copy through qr_value_writable. */
#define QR_BLOB_MIN ((size_t)64 * 1024)
/* v's constant data, writable and v's own: a block still shared is copied first, one that every
 * copy has let go is made writable again (NULL when out of memory). */
void *qr_value_writable(qr_graph *g, qr_value *v);
/* v (of g) becomes a constant of src's type, shape and data (src a constant of any graph): a large
 * one's block shared (read-only from then on), a small one copied; QR_ERR out of memory. */
qr_status qr_value_share_const(qr_graph *g, qr_value *v, const qr_value *src, qr_error *e);

/* A deep copy (values, constants, nodes, attributes) in a new arena; NULL when out of memory. */
qr_graph *qr_graph_clone(const qr_graph *g);
/* The same, but the large constants' blocks are shared with g (see QR_BLOB_MIN), not copied: for a
 * copy that rewrites the graph around its weights (nodes, new constants) rather than the weights. */
qr_graph *qr_graph_clone_shared(const qr_graph *g);
/* Adds attributes to a node built with qr_graph_add_node (copied into the arena); on
 * out-of-memory (or n NULL) nothing changes but the graph's mark. */
void qr_node_add_attr_i(qr_graph *g, qr_node *n, const char *name, int64_t v);
void qr_node_add_attr_f(qr_graph *g, qr_node *n, const char *name, float v);
void qr_node_add_attr_s(qr_graph *g, qr_node *n, const char *name, const char *v);
void qr_node_add_attr_ints(qr_graph *g, qr_node *n, const char *name, int count, const int64_t *v);
/* A copy of attribute a (of any kind) under the name `name`. */
void qr_node_add_attr_as(qr_graph *g, qr_node *n, const char *name, const qr_attr *a);

/* Orders nodes topologically (stable for already-sorted graphs); refuses cycles
 * and values used before anything produces them. */
qr_status qr_graph_toposort(qr_graph *g, qr_error *e);
/* Marks dead, until none is left, every node whose outputs no live node reads
 * and no graph output is (qr_graph_compact then drops them). */
void qr_graph_drop_unused(qr_graph *g);
/* Drops dead nodes and values no node, input or output refers to (a dropped large constant lets
 * its block go: its data is NULL from then on). */
void qr_graph_compact(qr_graph *g);
/* The batch size every input fixes in its first dimension (the same for all), or 0 when any
 * input leaves it open (symbolic or unknown). */
int64_t qr_graph_fixed_batch(const qr_graph *g);
/* Replaces every use of `from` by `to` (node inputs and graph outputs). */
void qr_graph_replace_uses(qr_graph *g, qr_value *from, qr_value *to);
/* Number of nodes reading v. */
int qr_graph_use_count(const qr_graph *g, const qr_value *v);

int qr_value_shape_known(const qr_value *v);

const qr_attr *qr_node_attr(const qr_node *n, const char *name);
int64_t qr_attr_i(const qr_node *n, const char *name, int64_t def);
float qr_attr_f(const qr_node *n, const char *name, float def);
const char *qr_attr_s(const qr_node *n, const char *name, const char *def);
/* Element count, or -1 when the attribute is absent. */
int qr_attr_ints(const qr_node *n, const char *name, const int64_t **v);
int qr_attr_floats(const qr_node *n, const char *name, const float **v);
/* Optional input i, or NULL when absent or out of range. */
qr_value *qr_node_input(const qr_node *n, int i);

#endif
