/* The model fuzzer: mutants of real ONNX models through the runtime's import,
 * graph passes, dump and executor (with a small memory budget). `make
 * fuzz-models` runs a long campaign under AddressSanitizer + UBSan; `make test`
 * runs a short one (tests/unit/test_fuzz_models.c).
 *
 * Mutant K is made from seed file K % nseeds with a generator seeded by (seed,
 * K): the same command line gives the same mutants, and -p K writes one out.
 * Mutations are structural (on the unpacked protobuf: blank or dropped inputs,
 * dtypes, dims, attributes, cycles, duplicate names, truncated raw_data,
 * external data, opsets) and byte-level (flips, truncation, splices) on the
 * packed bytes.
 *
 * The mutants run in a child process, in batches; a crash (signal, sanitizer
 * report, or a mutant running past the time limit) ends the child, the parent
 * writes that mutant to the crash folder and starts a new child at the next
 * one. Exit status: 0 when no mutant crashed, 1 otherwise.
 *
 * usage: fuzz_models [-n N] [-s SEED] [-o CRASH_DIR] [-t SECONDS] [-p K -w FILE] SEED_MODELS...
 *   -n  mutants to run (default 100000)
 *   -s  random seed (default 1)
 *   -o  folder for crashing mutants (default fuzz-models-crashes)
 *   -t  time limit per mutant in seconds (default 20)
 *   -p K -w FILE  write mutant K to FILE and exit (to reproduce a finding)
 *   -r  run the given files as they are (no mutation), one per "mutant" */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dump.h"
#include "exec.h"
#include "onnx.pb-c.h"
#include "onnx_import.h"
#include "passes.h"

/* A small budget: mutants with absurd shapes must be refused, not run. */
#define FUZZ_MAX_MEMORY ((size_t)256 << 20)
#define FUZZ_MAX_INPUT_BYTES ((int64_t)1 << 20)

typedef struct seedfile {
    const char *path;
    unsigned char *data;
    size_t len;
} seedfile;

static seedfile *seeds;
static int nseeds;

/* ---- random numbers (splitmix64: tiny, deterministic) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rbelow(rng *r, size_t n)
{
    return n ? (size_t)(rnext(r) % n) : 0;
}

static int64_t interesting_int(rng *r)
{
    static const int64_t v[] = {0, 1, -1, 2, 3, 4, 7, 8, 16, 255, 256, -128, 127, 1 << 16, INT32_MAX, INT32_MIN,
                                (int64_t)1 << 31, (int64_t)1 << 32, ((int64_t)1 << 32) + 13, (int64_t)1 << 40,
                                INT64_MAX, INT64_MIN, INT64_MAX / 2, -((int64_t)1 << 40), 63, 64, -63, -64};
    if (rbelow(r, 4) == 0)
        return (int64_t)rnext(r);
    return v[rbelow(r, sizeof v / sizeof v[0])];
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        abort();
    return p;
}

/* ---- structured mutations on the unpacked model ----
 * protobuf-c's default allocator is malloc/free and every string and repeated
 * field is its own block, so replacing one with a malloc'd block keeps
 * onnx__model_proto__free_unpacked correct. */

/* A value name of the graph, or "" (an absent optional input). */
static const char *some_name(rng *r, const Onnx__GraphProto *g)
{
    size_t k = rbelow(r, 5);
    if (k == 0 && g->n_input)
        return g->input[rbelow(r, g->n_input)]->name;
    if (k == 1 && g->n_initializer)
        return g->initializer[rbelow(r, g->n_initializer)]->name;
    if (k == 2 && g->n_node) {
        const Onnx__NodeProto *n = g->node[rbelow(r, g->n_node)];
        if (n->n_output)
            return n->output[rbelow(r, n->n_output)];
    }
    if (k == 3)
        return "";
    return "no_such_value";
}

static void set_str(char **dst, const char *s)
{
    char *c = xstrdup(s ? s : "");
    free(*dst);
    *dst = c;
}

static int32_t some_dtype(rng *r)
{
    static const int32_t t[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 99, -1};
    return t[rbelow(r, sizeof t / sizeof t[0])];
}

static int64_t some_dim(rng *r)
{
    static const int64_t d[] = {0, 1, 2, 3, 4, -1, -2, 1 << 20, (int64_t)1 << 31, (int64_t)1 << 40, INT64_MAX, INT64_MIN};
    return d[rbelow(r, sizeof d / sizeof d[0])];
}

static void mutate_tensor(rng *r, Onnx__TensorProto *t)
{
    switch (rbelow(r, 7)) {
    case 0:
        t->data_type = some_dtype(r);
        break;
    case 1:
        if (t->n_dims)
            t->dims[rbelow(r, t->n_dims)] = some_dim(r);
        break;
    case 2: /* add or drop a dim */
        if (rbelow(r, 2) && t->n_dims) {
            t->n_dims--;
        } else {
            t->dims = xrealloc(t->dims, sizeof *t->dims * (t->n_dims + 1));
            t->dims[t->n_dims++] = some_dim(r);
        }
        break;
    case 3: /* truncated raw_data */
        if (t->has_raw_data && t->raw_data.len)
            t->raw_data.len = rbelow(r, t->raw_data.len);
        break;
    case 4: { /* external data, at places inside and outside the folder */
        static const char *loc[] = {"data.bin", "fifo", "", "../data.bin", "/dev/zero", "nope.bin", "sub/../data.bin",
                                    ".", "data.bin\n"};
        static const char *num[] = {"0", "4", "-1", "18446744073709551615", "9223372036854775807", "x", "", "1e3"};
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        size_t ne = 1 + rbelow(r, 3);
        for (size_t i = 0; i < t->n_external_data; i++)
            onnx__string_string_entry_proto__free_unpacked(t->external_data[i], NULL);
        t->external_data = xrealloc(t->external_data, sizeof *t->external_data * ne);
        t->n_external_data = ne;
        for (size_t i = 0; i < ne; i++) {
            Onnx__StringStringEntryProto *e = malloc(sizeof *e);
            if (!e)
                abort();
            onnx__string_string_entry_proto__init(e);
            static const char *keys[] = {"location", "offset", "length"};
            e->key = xstrdup(i == 0 ? "location" : keys[rbelow(r, 3)]);
            e->value = xstrdup(strcmp(e->key, "location") == 0 ? loc[rbelow(r, sizeof loc / sizeof loc[0])]
                                                                : num[rbelow(r, sizeof num / sizeof num[0])]);
            t->external_data[i] = e;
        }
        break;
    }
    case 5: /* typed fields instead of raw data */
        if (t->has_raw_data) {
            t->has_raw_data = 0;
            if (rbelow(r, 2) && !t->n_float_data) {
                t->n_float_data = rbelow(r, 5);
                t->float_data = xrealloc(t->float_data, sizeof(float) * (t->n_float_data + 1));
                for (size_t i = 0; i < t->n_float_data; i++)
                    t->float_data[i] = (float)interesting_int(r);
            }
        }
        break;
    default: /* data values: indices and shapes are read from initializers */
        if (t->has_raw_data && t->raw_data.len >= 8) {
            size_t at = rbelow(r, t->raw_data.len / 8) * 8;
            int64_t v = interesting_int(r);
            if (t->data_type == 6 || t->data_type == 1) {
                int32_t w = (int32_t)v;
                memcpy(t->raw_data.data + at, &w, 4);
            } else {
                memcpy(t->raw_data.data + at, &v, 8);
            }
        }
        break;
    }
}

static void mutate_value_info(rng *r, Onnx__ValueInfoProto *vi)
{
    Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return;
    Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    Onnx__TensorShapeProto *sh = tt->shape;
    switch (rbelow(r, 4)) {
    case 0:
        tt->has_elem_type = 1;
        tt->elem_type = some_dtype(r);
        break;
    case 1:
        if (sh && sh->n_dim) {
            Onnx__TensorShapeProto__Dimension *d = sh->dim[rbelow(r, sh->n_dim)];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
                free(d->dim_param);
            if (rbelow(r, 3) == 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = xstrdup(rbelow(r, 2) ? "N" : "");
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = some_dim(r);
            }
        }
        break;
    case 2: /* drop the shape: unknown rank */
        if (sh) {
            onnx__tensor_shape_proto__free_unpacked(sh, NULL);
            tt->shape = NULL;
        }
        break;
    default: /* drop or add a dim */
        if (sh && sh->n_dim && rbelow(r, 2)) {
            protobuf_c_message_free_unpacked(&sh->dim[--sh->n_dim]->base, NULL);
        } else if (sh && sh->n_dim < 10) {
            Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
            if (!d)
                abort();
            onnx__tensor_shape_proto__dimension__init(d);
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = rbelow(r, 4);
            sh->dim = xrealloc(sh->dim, sizeof *sh->dim * (sh->n_dim + 1));
            sh->dim[sh->n_dim++] = d;
        }
        break;
    }
}

static void mutate_attr(rng *r, Onnx__AttributeProto *a)
{
    switch (rbelow(r, 7)) {
    case 0: /* the wrong kind */
        a->has_type = 1;
        a->type = (Onnx__AttributeProto__AttributeType)rbelow(r, 15);
        break;
    case 1:
        a->i = interesting_int(r);
        break;
    case 2: /* empty lists and strings */
        a->n_ints = a->n_floats = 0;
        free(a->s.data);
        a->s.data = NULL;
        a->s.len = 0;
        a->has_s = 1;
        break;
    case 3:
        if (a->n_ints)
            a->ints[rbelow(r, a->n_ints)] = interesting_int(r);
        else
            a->i = interesting_int(r);
        break;
    case 4: /* a list one longer or shorter */
        if (a->n_ints && rbelow(r, 2)) {
            a->n_ints--;
        } else {
            a->ints = xrealloc(a->ints, sizeof *a->ints * (a->n_ints + 1));
            a->ints[a->n_ints++] = interesting_int(r);
        }
        break;
    case 5: {
        static const float f[] = {0.0f, -1.0f, 1e30f, -1e30f, 1e-30f, __builtin_nanf(""), __builtin_inff(), 0.5f};
        a->f = f[rbelow(r, sizeof f / sizeof f[0])];
        if (a->n_floats)
            a->floats[rbelow(r, a->n_floats)] = f[rbelow(r, sizeof f / sizeof f[0])];
        break;
    }
    default:
        if (a->t)
            mutate_tensor(r, a->t);
        else if (a->has_s) {
            static const char *s[] = {"", "constant", "reflect", "edge", "wrap", "linear", "nearest", "cubic", "DCR",
                                      "CRD", "RIGHT", "LEFT", "NOTSET", "SAME_UPPER", "VALID", "xx"};
            free(a->s.data);
            a->s.data = (uint8_t *)xstrdup(s[rbelow(r, sizeof s / sizeof s[0])]);
            a->s.len = strlen((char *)a->s.data);
        }
        break;
    }
}

static void mutate_node(rng *r, Onnx__GraphProto *g, size_t ni)
{
    Onnx__NodeProto *n = g->node[ni];
    switch (rbelow(r, 9)) {
    case 0: /* an input blanked: an absent optional input, maybe in a required place */
        if (n->n_input)
            set_str(&n->input[rbelow(r, n->n_input)], "");
        break;
    case 1: /* an input dropped */
        if (n->n_input)
            free(n->input[--n->n_input]);
        break;
    case 2: /* an input added */
        n->input = xrealloc(n->input, sizeof *n->input * (n->n_input + 1));
        n->input[n->n_input++] = xstrdup(some_name(r, g));
        break;
    case 3: /* rewired: cycles, dangling names, self loops */
        if (n->n_input)
            set_str(&n->input[rbelow(r, n->n_input)], some_name(r, g));
        break;
    case 4: /* an output renamed: duplicate definitions */
        if (n->n_output)
            set_str(&n->output[rbelow(r, n->n_output)], some_name(r, g));
        break;
    case 5: /* an attribute dropped */
        if (n->n_attribute) {
            size_t k = rbelow(r, n->n_attribute);
            onnx__attribute_proto__free_unpacked(n->attribute[k], NULL);
            n->attribute[k] = n->attribute[--n->n_attribute];
        }
        break;
    case 6: { /* an attribute added (perhaps one the op has, with any kind) */
        static const char *names[] = {"axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group",
                                      "to", "mode", "value", "split", "keepdims", "starts", "ends", "shape", "blocksize",
                                      "auto_pad", "scales", "k", "batch_dims", "output_shape", "output_padding"};
        Onnx__AttributeProto *a = malloc(sizeof *a);
        if (!a)
            abort();
        onnx__attribute_proto__init(a);
        a->name = xstrdup(names[rbelow(r, sizeof names / sizeof names[0])]);
        a->has_type = 1;
        a->type = (Onnx__AttributeProto__AttributeType)(1 + rbelow(r, 8));
        a->i = interesting_int(r);
        a->f = (float)interesting_int(r);
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
            a->n_ints = rbelow(r, 9);
            a->ints = xrealloc(NULL, sizeof *a->ints * (a->n_ints + 1));
            for (size_t i = 0; i < a->n_ints; i++)
                a->ints[i] = rbelow(r, 3) ? (int64_t)rbelow(r, 4) : interesting_int(r);
        } else if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
            a->has_s = 1;
        }
        n->attribute = xrealloc(n->attribute, sizeof *n->attribute * (n->n_attribute + 1));
        n->attribute[n->n_attribute++] = a;
        break;
    }
    case 7: /* the op swapped for another one of the model (same inputs, other semantics) */
        if (g->n_node > 1)
            set_str(&n->op_type, g->node[rbelow(r, g->n_node)]->op_type);
        break;
    default:
        if (n->n_attribute)
            mutate_attr(r, n->attribute[rbelow(r, n->n_attribute)]);
        break;
    }
}

static void mutate_model(rng *r, Onnx__ModelProto *m)
{
    Onnx__GraphProto *g = m->graph;
    if (!g)
        return;
    int k = (int)rbelow(r, 16);
    if (k < 8 && g->n_node) {
        mutate_node(r, g, rbelow(r, g->n_node));
    } else if (k < 10 && g->n_initializer) {
        mutate_tensor(r, g->initializer[rbelow(r, g->n_initializer)]);
    } else if (k < 12 && (g->n_input || g->n_output || g->n_value_info)) {
        size_t which = rbelow(r, 3);
        if (which == 0 && g->n_input)
            mutate_value_info(r, g->input[rbelow(r, g->n_input)]);
        else if (which == 1 && g->n_output)
            mutate_value_info(r, g->output[rbelow(r, g->n_output)]);
        else if (g->n_value_info)
            mutate_value_info(r, g->value_info[rbelow(r, g->n_value_info)]);
    } else if (k == 12 && m->n_opset_import) {
        static const int64_t v[] = {0, 1, 6, 7, 9, 10, 11, 12, 13, 17, 18, 19, 21, 22, -1, ((int64_t)1 << 32) + 13};
        m->opset_import[rbelow(r, m->n_opset_import)]->version = v[rbelow(r, sizeof v / sizeof v[0])];
    } else if (k == 13 && g->n_node > 1) { /* nodes reordered: the import must sort them */
        size_t a = rbelow(r, g->n_node), b = rbelow(r, g->n_node);
        Onnx__NodeProto *t = g->node[a];
        g->node[a] = g->node[b];
        g->node[b] = t;
    } else if (k == 14 && g->n_output) { /* outputs renamed or repeated */
        set_str(&g->output[rbelow(r, g->n_output)]->name, some_name(r, g));
    } else if (g->n_node) { /* a node dropped: its outputs dangle */
        size_t a = rbelow(r, g->n_node);
        onnx__node_proto__free_unpacked(g->node[a], NULL);
        g->node[a] = g->node[--g->n_node];
    }
}

/* ---- byte-level mutations on the packed model ---- */

static void mutate_bytes(rng *r, unsigned char **buf, size_t *len)
{
    unsigned char *b = *buf;
    size_t n = *len;
    int rounds = 1 + (int)rbelow(r, 4);
    for (int i = 0; i < rounds && n; i++) {
        /* Half the edits land in the first 4 KB, where a model's structure usually is. */
        size_t at = rbelow(r, rbelow(r, 2) && n > 4096 ? 4096 : n);
        switch (rbelow(r, 5)) {
        case 0: b[at] ^= (unsigned char)(1u << rbelow(r, 8)); break;
        case 1: b[at] = (unsigned char)rnext(r); break;
        case 2: n = at + 1; break; /* truncated */
        case 3: { /* a varint made huge */
            static const unsigned char big[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
            size_t k = n - at < sizeof big ? n - at : sizeof big;
            memcpy(b + at, big, k);
            break;
        }
        default: { /* a run of bytes copied elsewhere */
            size_t from = rbelow(r, n), k = 1 + rbelow(r, 16);
            if (from + k <= n && at + k <= n)
                memmove(b + at, b + from, k);
            break;
        }
        }
    }
    *len = n;
}

/* Mutant K into a malloc'd buffer. */
static void make_mutant(uint64_t seed, long k, unsigned char **out, size_t *outlen)
{
    const seedfile *sf = &seeds[k % nseeds];
    rng r = {seed * 0x2545f4914f6cdd1dull + (uint64_t)k};
    rnext(&r);
    unsigned char *buf = NULL;
    size_t len = 0;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, sf->len, sf->data);
    if (m && rbelow(&r, 8)) {
        int rounds = 1 + (int)rbelow(&r, 3);
        for (int i = 0; i < rounds; i++)
            mutate_model(&r, m);
    }
    if (m) {
        len = onnx__model_proto__get_packed_size(m);
        buf = malloc(len ? len : 1);
        if (!buf)
            abort();
        onnx__model_proto__pack(m, buf);
        onnx__model_proto__free_unpacked(m, NULL);
    } else {
        len = sf->len;
        buf = malloc(len ? len : 1);
        if (!buf)
            abort();
        memcpy(buf, sf->data, len);
    }
    if (rbelow(&r, 4) == 0)
        mutate_bytes(&r, &buf, &len);
    *out = buf;
    *outlen = len;
}

/* ---- running one mutant ---- */

typedef struct counts {
    long ran, loaded, executed;
} counts;

static void fill_input(rng *r, qr_tensor *t)
{
    size_t n = qr_tensor_nbytes(t);
    unsigned char *p = t->data;
    if (qr_dtype_is_int(t->dtype) || t->dtype == QR_BOOL) {
        int64_t count = qr_tensor_numel(t);
        for (int64_t i = 0; i < count; i++)
            qr_set_i64(p, t->dtype, i, (int64_t)rbelow(r, 4) - (rbelow(r, 8) == 0));
    } else if (t->dtype == QR_F32) {
        for (size_t i = 0; i + 4 <= n; i += 4) {
            float v = (float)((int)rbelow(r, 200) - 100) / 25.0f;
            memcpy(p + i, &v, 4);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            p[i] = (unsigned char)rbelow(r, 256);
    }
}

static void run_mutant(const char *path, const unsigned char *buf, size_t len, long k, counts *c)
{
    qr_error e;
    qr_graph *g = NULL;
    c->ran++;
    if (qr_onnx_load_buffer(buf, len, path, &g, &e) != QR_OK)
        return;
    c->loaded++;
    if (qr_graph_optimize(g, &e) != QR_OK) {
        qr_graph_free(g);
        return;
    }
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        qr_graph_dump(g, null);
        fclose(null);
    }
    qr_exec_opts o = {.threads = 1, .max_memory = FUZZ_MAX_MEMORY};
    qr_exec *x = NULL;
    if (qr_exec_new(g, &o, &x, &e) != QR_OK) {
        qr_graph_free(g);
        return;
    }
    rng r = {(uint64_t)k * 7919u + 17u};
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    int ok = in && out;
    for (int i = 0; ok && i < g->n_inputs; i++) {
        const qr_value *v = g->inputs[i];
        in[i].dtype = v->t.dtype;
        in[i].ndim = v->t.ndim < 0 ? 2 : v->t.ndim;
        for (int d = 0; d < in[i].ndim; d++)
            in[i].dims[d] = v->t.ndim < 0 || v->t.dims[d] < 0 ? 2 : v->t.dims[d];
        qr_error sub;
        ok = qr_tensor_check_shape(&in[i], &sub) == QR_OK && qr_dtype_size(in[i].dtype) &&
             (int64_t)qr_tensor_nbytes(&in[i]) <= FUZZ_MAX_INPUT_BYTES && qr_tensor_alloc(&in[i], &sub) == QR_OK;
        if (ok)
            fill_input(&r, &in[i]);
    }
    if (ok) {
        /* Twice: the second run reuses the plan. */
        for (int rep = 0; rep < 2; rep++) {
            if (qr_exec_run(x, in, out, &e) != QR_OK)
                break;
            if (rep == 0)
                c->executed++;
            for (int i = 0; i < g->n_outputs; i++)
                qr_tensor_free(&out[i]);
        }
    }
    for (int i = 0; in && i < g->n_inputs; i++)
        qr_tensor_free(&in[i]);
    free(in);
    free(out);
    qr_exec_free(x);
    qr_graph_free(g);
}

/* ---- the campaign ---- */

/* Shared with the child: the mutant it is running, and its counts. */
typedef struct shared {
    volatile long current;
    volatile long done;
    counts c;
} shared;

static int read_whole(const char *path, unsigned char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            }
            b = nb;
        }
    }
    fclose(f);
    if (!b)
        return -1;
    *data = b;
    *len = n;
    return 0;
}

static int write_whole(const char *path, const unsigned char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int usage(void)
{
    fprintf(stderr, "usage: fuzz_models [-n N] [-s SEED] [-o CRASH_DIR] [-t SECONDS] [-p K -w FILE] [-r] SEED_MODELS...\n");
    return 2;
}

/* The mutants are loaded from a scratch folder holding a small data file and a FIFO,
 * which external-data locations name. */
static char workdir[] = "/tmp/qrl-fuzz-models-XXXXXX";
static char model_path[sizeof workdir + 32];

static void make_workdir(void)
{
    if (!mkdtemp(workdir)) {
        perror("fuzz_models: mkdtemp");
        exit(2);
    }
    char p[sizeof workdir + 32];
    snprintf(p, sizeof p, "%s/data.bin", workdir);
    unsigned char zeros[4096] = {0};
    write_whole(p, zeros, sizeof zeros);
    snprintf(p, sizeof p, "%s/fifo", workdir);
    if (mkfifo(p, 0600) != 0)
        perror("fuzz_models: mkfifo");
    snprintf(model_path, sizeof model_path, "%s/mutant.onnx", workdir);
}

static void remove_workdir(void)
{
    char p[sizeof workdir + 32];
    snprintf(p, sizeof p, "%s/data.bin", workdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/fifo", workdir);
    unlink(p);
    rmdir(workdir);
}

/* In raw mode, whether each seed loaded (shared with the parent). */
static unsigned char *loaded_flags;

static void child_loop(shared *sh, uint64_t seed, long from, long n, int raw, int limit)
{
    for (long k = from; k < n; k++) {
        sh->current = k;
        alarm((unsigned)limit);
        unsigned char *buf;
        size_t len;
        if (raw) {
            buf = seeds[k % nseeds].data;
            len = seeds[k % nseeds].len;
        } else {
            make_mutant(seed, k, &buf, &len);
        }
        counts c = sh->c;
        run_mutant(model_path, buf, len, k, &c);
        if (raw && loaded_flags)
            loaded_flags[k % nseeds] = c.loaded > sh->c.loaded;
        sh->c = c;
        if (!raw)
            free(buf);
        sh->done = k + 1;
    }
    alarm(0);
}

/* Runs mutants (or, raw, the seeds as they are) 0..n-1 in child processes,
 * restarting after each crash; returns the number of crashes. */
static long campaign(shared *sh, uint64_t seed, long n, int raw, int limit, const char *crash_dir)
{
    long crashes = 0, next = 0;
    sh->done = 0;
    while (next < n) {
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fuzz_models: fork");
            exit(2);
        }
        if (pid == 0) {
            child_loop(sh, seed, next, n, raw, limit);
            _exit(0);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && sh->done >= n)
            break;
        long k = sh->current;
        crashes++;
        const char *why = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "timed out" : "crashed";
        mkdir(crash_dir, 0755);
        char p[4096];
        snprintf(p, sizeof p, "%s/mutant-%llu-%ld.onnx", crash_dir, (unsigned long long)seed, k);
        if (raw)
            write_whole(p, seeds[k % nseeds].data, seeds[k % nseeds].len);
        else {
            unsigned char *buf;
            size_t len;
            make_mutant(seed, k, &buf, &len);
            write_whole(p, buf, len);
            free(buf);
        }
        fprintf(stderr, "fuzz_models: mutant %ld (seed file %s) %s (status %d); written to %s\n", k,
                seeds[k % nseeds].path, why, status, p);
        sh->c.ran++;
        next = k + 1;
    }
    return crashes;
}

int main(int argc, char **argv)
{
    long n = 100000, print = -1;
    uint64_t seed = 1;
    int limit = 20, raw = 0;
    const char *crash_dir = "fuzz-models-crashes", *write_to = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-r") == 0) {
            raw = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        const char *v = argv[++i];
        if (strcmp(o, "-n") == 0)
            n = atol(v);
        else if (strcmp(o, "-s") == 0)
            seed = strtoull(v, NULL, 10);
        else if (strcmp(o, "-o") == 0)
            crash_dir = v;
        else if (strcmp(o, "-t") == 0)
            limit = atoi(v);
        else if (strcmp(o, "-p") == 0)
            print = atol(v);
        else if (strcmp(o, "-w") == 0)
            write_to = v;
        else
            return usage();
    }
    if (i >= argc || limit < 1)
        return usage();
    for (; i < argc; i++) {
        seedfile s = {.path = argv[i]};
        if (read_whole(argv[i], &s.data, &s.len) != 0) {
            fprintf(stderr, "fuzz_models: cannot read %s\n", argv[i]);
            return 2;
        }
        seeds = xrealloc(seeds, sizeof *seeds * (size_t)(nseeds + 1));
        seeds[nseeds++] = s;
    }
    if (raw)
        n = nseeds;
    if (print >= 0) {
        unsigned char *buf;
        size_t len;
        make_mutant(seed, print, &buf, &len);
        int rc = write_whole(write_to ? write_to : "mutant.onnx", buf, len);
        free(buf);
        fprintf(stderr, "fuzz_models: mutant %ld of seed %s written\n", print, seeds[print % nseeds].path);
        return rc ? 2 : 0;
    }
    make_workdir();
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("fuzz_models: mmap");
        return 2;
    }
    memset(sh, 0, sizeof *sh);
    long crashes = 0;
    if (!raw) {
        /* Every seed runs as it is first (the regression seeds of tests/fuzz/models are
         * crashes of the past); seeds that do not load (ops QRL lacks, say) are then
         * dropped: their mutants would mostly stop at the same error. */
        loaded_flags = mmap(NULL, (size_t)nseeds, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (loaded_flags == MAP_FAILED) {
            perror("fuzz_models: mmap");
            return 2;
        }
        memset(loaded_flags, 0, (size_t)nseeds);
        crashes += campaign(sh, seed, nseeds, 1, limit, crash_dir);
        int k = 0, all = nseeds;
        for (int s = 0; s < all; s++)
            k += loaded_flags[s];
        if (k) {
            k = 0;
            for (int s = 0; s < all; s++)
                if (loaded_flags[s])
                    seeds[k++] = seeds[s];
                else
                    free(seeds[s].data);
            nseeds = k;
        }
        fprintf(stderr, "fuzz_models: %d seed models ran as they are (%ld crashed); %d load, mutating those\n", all,
                crashes, nseeds);
        munmap(loaded_flags, (size_t)all);
        loaded_flags = NULL;
        memset(sh, 0, sizeof *sh);
    }
    crashes += campaign(sh, seed, n, raw, limit, crash_dir);
    remove_workdir();
    fprintf(stderr, "fuzz_models: %ld mutants of %d seed models: %ld loaded, %ld ran; %ld crashed\n", sh->c.ran, nseeds,
            sh->c.loaded, sh->c.executed, crashes);
    return crashes ? 1 : 0;
}
