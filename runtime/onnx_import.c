#include "onnx_import.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "onnx.pb-c.h"
#include "op.h"

#define MAX_MODEL_BYTES ((size_t)2 << 30)
/* Initializers' raw_data of this size or more are left out of what protobuf-c unpacks and
 * copied from the model's bytes straight into the graph (strip_model). */
#define STRIP_MIN_BYTES 4096

/* Where an initializer's raw_data lies in the model's bytes, when strip_model left it out. */
typedef struct raw_ref {
    size_t off, len;
    int stripped;
} raw_ref;

typedef struct importer {
    const char *path;
    char *dir;      /* folder of the model, for external data */
    char *realdir;  /* its canonical form, to refuse paths that escape it */
    qr_graph *g;
    qr_error *e;
    const unsigned char *bytes; /* the model as serialized */
    int mapped;                 /* bytes is a mapping of the file (its pages are given back as read) */
    raw_ref *raws;              /* per initializer, in order (n_raws of them) */
    size_t n_raws;
} importer;

/* ---- tensors ---- */

/* The path of the file open as fd, as the kernel knows it (symbolic links resolved), malloc'd;
 * NULL with errno set when there is no /proc. */
static char *opened_path(int fd)
{
    char link[64], buf[PATH_MAX + 1];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    if (n < 0 || n >= (ssize_t)sizeof buf - 1) {
        if (n >= 0)
            errno = ENAMETOOLONG;
        return NULL;
    }
    buf[n] = 0;
    return strdup(buf);
}

/* Reads external data into t (allocated here, after the file is known to hold
 * the bytes: a tensor's declared size is never allocated on trust). */
static qr_status read_external(importer *im, const Onnx__TensorProto *tp, const char *what, qr_tensor *t,
                               size_t nbytes)
{
    const char *loc = NULL;
    long long off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
        if (!k || !v)
            continue;
        char *end;
        if (strcmp(k, "location") == 0) {
            loc = v;
        } else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (!*v || *end || x < 0 || errno == ERANGE)
                return qr_errorf(im->e, "%s: %s: external data %s '%s' is not a non-negative integer",
                                 im->path, what, k, v);
            *(k[0] == 'o' ? &off : &len) = x;
        }
    }
    if (!loc || !*loc)
        return qr_errorf(im->e, "%s: %s: external data has no location", im->path, what);
    if (loc[0] == '/')
        return qr_errorf(im->e, "%s: %s: external data location '%s' is an absolute path", im->path, what, loc);
    size_t n = strlen(im->dir) + strlen(loc) + 2;
    char *full = malloc(n), *real = NULL;
    if (!full)
        return qr_errorf(im->e, "%s: %s: out of memory", im->path, what);
    snprintf(full, n, "%s/%s", im->dir, loc);
    qr_status st = QR_OK;
    /* Opened once, then the file actually opened is checked: a path checked first and opened after
     * could be a symbolic link swapped in between, naming a file outside the folder.
     * O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int fd = open(full, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            st = qr_errorf(im->e, "%s: %s: external data file '%s' not found", im->path, what, loc);
        else
            st = qr_errorf(im->e, "%s: %s: cannot open external data file '%s': %s", im->path, what, loc,
                           strerror(errno));
        goto out;
    }
    real = opened_path(fd);
    if (!real) {
        st = qr_errorf(im->e, "%s: %s: cannot tell where external data file '%s' is (/proc/self/fd: %s)", im->path,
                       what, loc, strerror(errno));
        goto out;
    }
    size_t rl = strlen(im->realdir);
    if (strncmp(real, im->realdir, rl) != 0 || (real[rl] != '/' && strcmp(im->realdir, "/") != 0)) {
        st = qr_errorf(im->e, "%s: %s: external data location '%s' is outside the model's folder (it is '%s')",
                       im->path, what, loc, real);
        goto out;
    }
    if (len >= 0 && (size_t)len != nbytes) {
        st = qr_errorf(im->e, "%s: %s: external data length %lld does not match the tensor's %zu bytes",
                       im->path, what, len, nbytes);
        goto out;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = qr_errorf(im->e, "%s: %s: cannot open external data file '%s'", im->path, what, loc);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = qr_errorf(im->e, "%s: %s: external data location '%s' is not a regular file", im->path, what, loc);
        goto out;
    }
    if ((unsigned long long)off > (unsigned long long)sb.st_size ||
        (unsigned long long)sb.st_size - (unsigned long long)off < nbytes) {
        st = qr_errorf(im->e, "%s: %s: external data file '%s' is too short (need %zu bytes at offset %lld, it has %lld)",
                       im->path, what, loc, nbytes, off, (long long)sb.st_size);
        goto out;
    }
    qr_error sub;
    if (qr_tensor_alloc(t, &sub) != QR_OK) {
        st = qr_errorf(im->e, "%s: %s: %s", im->path, what, sub.msg);
        goto out;
    }
    for (size_t got = 0; got < nbytes;) {
        ssize_t k = pread(fd, (char *)t->data + got, nbytes - got, (off_t)(off + (long long)got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            st = qr_errorf(im->e, "%s: %s: cannot read external data file '%s'", im->path, what, loc);
            break;
        }
        got += (size_t)k;
    }
out:
    if (fd >= 0)
        close(fd);
    free(full);
    free(real);
    return st;
}

/* Fills t's type and shape (no data) from a TensorProto. */
static qr_status tensor_header(importer *im, const Onnx__TensorProto *tp, const char *what, qr_tensor *t)
{
    memset(t, 0, sizeof *t);
    qr_dtype dt = qr_dtype_from_onnx(tp->data_type);
    if (dt == QR_UNDEF || dt == QR_STRING)
        return qr_errorf(im->e, "%s: %s: tensor data type %d is not supported", im->path, what, (int)tp->data_type);
    if (tp->n_dims > QR_MAX_DIMS)
        return qr_errorf(im->e, "%s: %s: rank %zu is not supported (at most %d)", im->path, what, tp->n_dims, QR_MAX_DIMS);
    t->dtype = dt;
    t->ndim = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++)
        t->dims[i] = tp->dims[i];
    qr_error sub;
    if (qr_tensor_check_shape(t, &sub) != QR_OK)
        return qr_errorf(im->e, "%s: %s: %s", im->path, what, sub.msg);
    return QR_OK;
}

/* Fills t (type, shape, malloc'd data) from a TensorProto. */
static qr_status tensor_from_proto(importer *im, const Onnx__TensorProto *tp, const char *what, qr_tensor *t)
{
    if (tensor_header(im, tp, what, t) != QR_OK)
        return QR_ERR;
    qr_error sub;
    qr_dtype dt = t->dtype;
    int64_t n = qr_tensor_numel(t);
    size_t nbytes = qr_tensor_nbytes(t);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(im, tp, what, t, nbytes);
    /* The data's length is checked before the declared shape is allocated: a
     * few bytes of model must not be able to ask for gigabytes. */
    size_t have;
    if (tp->has_raw_data) {
        if (tp->raw_data.len != nbytes)
            return qr_errorf(im->e, "%s: %s: raw_data has %zu bytes, expected %zu for %s", im->path, what,
                             tp->raw_data.len, nbytes, qr_dtype_name(dt));
    } else {
        switch (dt) {
        case QR_F32: have = tp->n_float_data; break;
        case QR_F64: have = tp->n_double_data; break;
        case QR_I64: have = tp->n_int64_data; break;
        case QR_U32: case QR_U64: have = tp->n_uint64_data; break;
        default: have = tp->n_int32_data; break;
        }
        if (qr_dtype_is_packed(dt))
            n = (n + 1) / 2; /* int32_data holds the packed bytes, two 4-bit values each */
        if (have != (size_t)n)
            return qr_errorf(im->e, "%s: %s: has %zu values, expected %lld for its shape", im->path, what, have,
                             (long long)n);
    }
    if (qr_tensor_alloc(t, &sub) != QR_OK)
        return qr_errorf(im->e, "%s: %s: %s", im->path, what, sub.msg);
    qr_status st = QR_OK;
    if (tp->has_raw_data) {
        if (nbytes)
            memcpy(t->data, tp->raw_data.data, nbytes); /* little-endian host, as ONNX stores it */
    } else {
        for (int64_t i = 0; i < n; i++) {
            switch (dt) {
            case QR_F32: ((float *)t->data)[i] = tp->float_data[i]; break;
            case QR_F64: ((double *)t->data)[i] = tp->double_data[i]; break;
            case QR_I64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
            case QR_U32: ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
            case QR_U64: ((uint64_t *)t->data)[i] = tp->uint64_data[i]; break;
            case QR_F16: ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i]; break;
            case QR_I4: case QR_U4: ((uint8_t *)t->data)[i] = (uint8_t)tp->int32_data[i]; break;
            default: qr_set_i64(t->data, dt, i, tp->int32_data[i]); break;
            }
        }
    }
    if (st != QR_OK)
        qr_tensor_free(t);
    return st;
}

/* The graph's records (names, nodes, values) did not fit in memory. */
static qr_status out_of_memory(importer *im)
{
    return qr_errorf(im->e, "%s: out of memory", im->path);
}

/* The value a constant named name defines (new, or one only named so far). */
static qr_status const_value(importer *im, const char *name, const char *what, qr_value **out)
{
    qr_value *v = qr_graph_find(im->g, name);
    if (v && (v->is_const || v->producer))
        return qr_errorf(im->e, "%s: %s: the name '%s' is defined twice", im->path, what, name);
    if (!v && !(v = qr_graph_new_value(im->g, name)))
        return out_of_memory(im);
    *out = v;
    return QR_OK;
}

/* An initializer whose raw_data strip_model left out: its bytes are copied from the model
 * straight into the graph's constant (no protobuf copy, no tensor between), and a mapped model's
 * pages are given back at once, so the import holds the weights once, not three times. */
static qr_status add_stripped_const(importer *im, const Onnx__TensorProto *tp, const raw_ref *raw, const char *what)
{
    qr_tensor t;
    qr_value *v;
    if (tensor_header(im, tp, what, &t) != QR_OK)
        return QR_ERR;
    size_t nbytes = qr_tensor_nbytes(&t);
    if (raw->len != nbytes)
        return qr_errorf(im->e, "%s: %s: raw_data has %zu bytes, expected %zu for %s", im->path, what, raw->len,
                         nbytes, qr_dtype_name(t.dtype));
    if (const_value(im, tp->name, what, &v) != QR_OK)
        return QR_ERR;
    void *data = qr_value_alloc_const(im->g, v, &t);
    if (!data)
        return qr_errorf(im->e, "%s: %s: out of memory: constant '%s' needs %zu bytes", im->path, what, v->name,
                         nbytes);
    memcpy(data, im->bytes + raw->off, nbytes); /* little-endian host, as ONNX stores it */
    if (im->mapped) {
        /* the whole pages it spans: dropped from this process (still page cache) */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)(im->bytes + raw->off);
        uintptr_t lo = (a + page - 1) & ~(page - 1), hi = (a + nbytes) & ~(page - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    return QR_OK;
}

static qr_status add_const(importer *im, const char *name, const qr_tensor *t, const char *what)
{
    qr_value *v;
    if (const_value(im, name, what, &v) != QR_OK)
        return QR_ERR;
    if (qr_value_try_set_const(im->g, v, t, im->e) != QR_OK) {
        qr_error_prefix(im->e, "%s: %s", im->path, what);
        return QR_ERR;
    }
    return QR_OK;
}

/* ---- types ---- */

static qr_status read_type(importer *im, const Onnx__ValueInfoProto *vi, qr_value *v, const char *what)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp)
        return QR_OK; /* no type given: inferred later */
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return qr_errorf(im->e, "%s: %s '%s': only tensor types are supported", im->path, what, vi->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    qr_dtype dt = tt->has_elem_type ? qr_dtype_from_onnx(tt->elem_type) : QR_UNDEF;
    if (tt->has_elem_type && (dt == QR_UNDEF || dt == QR_STRING))
        return qr_errorf(im->e, "%s: %s '%s': element type %d is not supported", im->path, what, vi->name,
                         (int)tt->elem_type);
    v->t.dtype = dt;
    if (!tt->shape) {
        v->t.ndim = -1;
        return QR_OK;
    }
    if (tt->shape->n_dim > QR_MAX_DIMS)
        return qr_errorf(im->e, "%s: %s '%s': rank %zu is not supported (at most %d)", im->path, what, vi->name,
                         tt->shape->n_dim, QR_MAX_DIMS);
    v->t.ndim = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        v->t.dims[i] = -1;
        v->dim_param[i] = NULL;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return qr_errorf(im->e, "%s: %s '%s': dimension %zu is negative", im->path, what, vi->name, i);
            v->t.dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param[0]) {
            if (!(v->dim_param[i] = qr_arena_strdup(&im->g->arena, d->dim_param)))
                return out_of_memory(im);
        }
    }
    /* Declared shapes feed shape inference as they are: the same limits as a
     * tensor's, with unknown dims left out (a huge dim next to a 0 would
     * otherwise pass as an empty tensor and overflow every product of dims). */
    qr_tensor known = v->t;
    for (int i = 0; i < known.ndim; i++)
        if (known.dims[i] <= 0)
            known.dims[i] = 1;
    qr_error sub;
    if (qr_tensor_check_shape(&known, &sub) != QR_OK)
        return qr_errorf(im->e, "%s: %s '%s': %s", im->path, what, vi->name, sub.msg);
    return QR_OK;
}

/* ---- attributes ---- */

static const char *kind_name(qr_attr_kind k)
{
    static const char *names[] = {"undefined", "f", "i", "s", "t", "graph", "floats", "ints", "strings"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unsupported";
}

/* Checks an attribute against the op's schema ("name:kind ..."): a known name
 * with the wrong kind is an error; names the schema does not list are kept but unused. */
static qr_status check_attr(importer *im, const qr_node *n, const qr_attr *a)
{
    const char *s = n->def->attrs;
    size_t nl = strlen(a->name);
    while (s && *s) {
        while (*s == ' ')
            s++;
        const char *colon = strchr(s, ':'), *end = strchr(s, ' ');
        if (!colon)
            break;
        if (!end)
            end = s + strlen(s);
        if ((size_t)(colon - s) == nl && strncmp(s, a->name, nl) == 0) {
            size_t kl = (size_t)(end - colon - 1);
            const char *want = colon + 1, *have = kind_name(a->kind);
            if (strlen(have) != kl || strncmp(want, have, kl) != 0)
                return qr_errorf(im->e, "%s: node '%s' (%s): attribute '%s' should be of kind '%.*s', not '%s'",
                                 im->path, n->name, n->op, a->name, (int)kl, want, have);
            return QR_OK;
        }
        s = end;
    }
    return QR_OK;
}

static qr_status read_attr(importer *im, qr_node *n, const Onnx__AttributeProto *ap, qr_attr *a)
{
    qr_arena *ar = &im->g->arena;
    if (!(a->name = qr_arena_strdup(ar, ap->name ? ap->name : "")))
        return out_of_memory(im);
    a->kind = ap->has_type ? (qr_attr_kind)ap->type : QR_ATTR_UNDEF;
    if (ap->ref_attr_name && ap->ref_attr_name[0])
        return qr_errorf(im->e, "%s: node '%s' (%s): attribute '%s' refers to a function attribute, which is not supported",
                         im->path, n->name, n->op, a->name);
    switch (a->kind) {
    case QR_ATTR_FLOAT: a->f = ap->f; break;
    case QR_ATTR_INT: a->i = ap->i; break;
    case QR_ATTR_STRING: a->s = qr_arena_strndup(ar, (const char *)ap->s.data, ap->s.len); break;
    case QR_ATTR_FLOATS:
        a->n = (int)ap->n_floats;
        a->floats = qr_arena_memdup(ar, ap->floats, ap->n_floats * sizeof(float));
        break;
    case QR_ATTR_INTS:
        a->n = (int)ap->n_ints;
        a->ints = qr_arena_memdup(ar, ap->ints, ap->n_ints * sizeof(int64_t));
        break;
    case QR_ATTR_STRINGS:
        a->n = (int)ap->n_strings;
        a->strs = qr_arena_alloc(ar, sizeof(char *) * (ap->n_strings + 1));
        for (size_t i = 0; a->strs && i < ap->n_strings; i++)
            a->strs[i] = qr_arena_strndup(ar, (const char *)ap->strings[i].data, ap->strings[i].len);
        break;
    case QR_ATTR_TENSOR: {
        if (!ap->t)
            return qr_errorf(im->e, "%s: node '%s' (%s): attribute '%s' has no tensor", im->path, n->name, n->op, a->name);
        char what[300];
        snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", n->name, n->op, a->name);
        qr_tensor t;
        if (tensor_from_proto(im, ap->t, what, &t) != QR_OK)
            return QR_ERR;
        a->t = t;
        a->t.data = qr_arena_try_memdup(ar, t.data, qr_tensor_nbytes(&t));
        qr_tensor_free(&t);
        if (!a->t.data)
            return qr_errorf(im->e, "%s: %s: out of memory (%zu bytes)", im->path, what, qr_tensor_nbytes(&a->t));
        break;
    }
    default:
        return qr_errorf(im->e, "%s: node '%s' (%s): attribute '%s' has unsupported kind %s", im->path, n->name,
                         n->op, a->name, kind_name(a->kind));
    }
    return ar->oom ? out_of_memory(im) : QR_OK;
}

/* ---- Constant nodes become constant values ---- */

static qr_status import_constant(importer *im, const Onnx__NodeProto *np, const char *name)
{
    if (np->n_output != 1 || np->n_attribute != 1)
        return qr_errorf(im->e, "%s: node '%s' (Constant): needs exactly one output and one attribute", im->path, name);
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = ap->name ? ap->name : "";
    char what[300];
    snprintf(what, sizeof what, "node '%s' (Constant): attribute '%s'", name, an);
    qr_tensor t = {0};
    qr_error sub;
    if (strcmp(an, "value") == 0 && ap->t) {
        if (tensor_from_proto(im, ap->t, what, &t) != QR_OK)
            return QR_ERR;
    } else if (strcmp(an, "value_float") == 0 || strcmp(an, "value_int") == 0) {
        t.dtype = an[6] == 'f' ? QR_F32 : QR_I64;
        t.ndim = 0;
        if (qr_tensor_alloc(&t, &sub) != QR_OK)
            return qr_errorf(im->e, "%s: %s: %s", im->path, what, sub.msg);
        if (t.dtype == QR_F32)
            ((float *)t.data)[0] = ap->f;
        else
            ((int64_t *)t.data)[0] = ap->i;
    } else if (strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0) {
        int fl = an[6] == 'f';
        t.dtype = fl ? QR_F32 : QR_I64;
        t.ndim = 1;
        t.dims[0] = (int64_t)(fl ? ap->n_floats : ap->n_ints);
        if (qr_tensor_alloc(&t, &sub) != QR_OK)
            return qr_errorf(im->e, "%s: %s: %s", im->path, what, sub.msg);
        if (t.dims[0])
            memcpy(t.data, fl ? (void *)ap->floats : (void *)ap->ints, (size_t)t.dims[0] * (fl ? 4 : 8));
    } else {
        return qr_errorf(im->e, "%s: %s: this form of Constant is not supported", im->path, what);
    }
    qr_status st = add_const(im, np->output[0], &t, what);
    qr_tensor_free(&t);
    return st;
}

/* ---- nodes ---- */

static qr_value *value_for(importer *im, const char *name)
{
    qr_value *v = qr_graph_find(im->g, name);
    return v ? v : qr_graph_new_value(im->g, name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static qr_status import_node(importer *im, const Onnx__NodeProto *np, size_t index, int opset_of_domain)
{
    char autoname[64];
    const char *name = np->name && np->name[0] ? np->name : NULL;
    if (!name) {
        snprintf(autoname, sizeof autoname, "#%zu", index);
        name = autoname;
    }
    const char *op = np->op_type ? np->op_type : "";
    const char *domain = np->domain ? np->domain : "";
    if (strcmp(domain, "ai.onnx") == 0)
        domain = "";
    if (!*domain && strcmp(op, "Constant") == 0)
        return import_constant(im, np, name);
    const qr_op_def *def = qr_op_find(domain, op);
    if (!def)
        return qr_errorf(im->e, "%s: node '%s': unknown op '%s%s%s'", im->path, name, domain, *domain ? "." : "", op);
    if (opset_of_domain < 0)
        return qr_errorf(im->e, "%s: node '%s' (%s): domain '%s' is not imported by the model", im->path, name, op, domain);
    /* Trailing empty names are optional inputs left out. */
    size_t nin = np->n_input, nout = np->n_output;
    while (nin && !np->input[nin - 1][0])
        nin--;
    while (nout && !np->output[nout - 1][0])
        nout--;
    if ((int)nin < def->min_in || (int)nin > def->max_in)
        return qr_errorf(im->e, "%s: node '%s' (%s): has %zu inputs, expected %d to %d", im->path, name, op, nin,
                         def->min_in, def->max_in);
    if ((int)nout < def->min_out || (int)nout > def->max_out)
        return qr_errorf(im->e, "%s: node '%s' (%s): has %zu outputs, expected %d to %d", im->path, name, op, nout,
                         def->min_out, def->max_out);
    qr_node *n = qr_graph_add_node(im->g, op, name, (int)nin, (int)nout);
    if (!n || !(n->domain = qr_arena_strdup(&im->g->arena, domain)))
        return out_of_memory(im);
    n->def = def;
    n->opset = opset_of_domain;
    for (size_t i = 0; i < nin; i++)
        if (np->input[i][0] && !(n->in[i] = value_for(im, np->input[i])))
            return out_of_memory(im);
    qr_error sub;
    if (qr_op_check_present(n, &sub) != QR_OK)
        return qr_errorf(im->e, "%s: node '%s' (%s): %s", im->path, name, op, sub.msg);
    for (size_t i = 0; i < nout; i++) {
        if (!np->output[i][0])
            continue;
        qr_value *v = value_for(im, np->output[i]);
        if (!v)
            return out_of_memory(im);
        if (v->is_const || v->producer || v->is_input)
            return qr_errorf(im->e, "%s: node '%s' (%s): output '%s' is already defined", im->path, name, op,
                             np->output[i]);
        v->producer = n;
        n->out[i] = v;
    }
    n->attr = qr_arena_alloc(&im->g->arena, sizeof *n->attr * (np->n_attribute + 1));
    if (!n->attr)
        return out_of_memory(im);
    n->n_attr = (int)np->n_attribute;
    for (size_t i = 0; i < np->n_attribute; i++) {
        if (read_attr(im, n, np->attribute[i], &n->attr[i]) != QR_OK)
            return QR_ERR;
        if (check_attr(im, n, &n->attr[i]) != QR_OK)
            return QR_ERR;
    }
    /* Duplicates by sorting names: a node with very many attributes must not cost n^2. */
    const char **names = malloc(sizeof *names * (np->n_attribute + 1));
    if (!names)
        return qr_errorf(im->e, "%s: node '%s' (%s): out of memory", im->path, name, op);
    for (size_t i = 0; i < np->n_attribute; i++)
        names[i] = n->attr[i].name;
    qsort(names, np->n_attribute, sizeof *names, cmp_str);
    for (size_t i = 1; i < np->n_attribute; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            qr_status st = qr_errorf(im->e, "%s: node '%s' (%s): attribute '%s' is given twice", im->path, name, op,
                                     names[i]);
            free(names);
            return st;
        }
    free(names);
    return QR_OK;
}

/* Before opset 7, binary ops broadcast only with broadcast=1, aligning B at `axis` of A.
 * That equals numpy broadcasting when B's trailing dim lands on A's last dim. */
static qr_status check_legacy_broadcast(importer *im, const qr_node *n)
{
    if (n->opset >= 7 || qr_attr_i(n, "broadcast", 0) != 1 || !qr_node_attr(n, "axis") || n->n_in != 2 ||
        strcmp(n->op, "Gemm") == 0)
        return QR_OK;
    const qr_value *a = n->in[0], *b = n->in[1];
    int64_t axis = qr_attr_i(n, "axis", 0);
    if (!a || !b || a->t.ndim < 0 || b->t.ndim < 0)
        return qr_errorf(im->e, "%s: node '%s' (%s): legacy broadcast with axis needs inputs of known rank", im->path,
                         n->name, n->op);
    if (axis < 0)
        axis += a->t.ndim;
    if (axis + b->t.ndim != a->t.ndim)
        return qr_errorf(im->e, "%s: node '%s' (%s): legacy broadcast at axis %lld of a rank-%d input is not supported",
                         im->path, n->name, n->op, (long long)axis, a->t.ndim);
    return QR_OK;
}

/* The opset version a model imports for a domain; -1 when it imports none.
 * Versions are int64 in the protobuf: anything beyond int range is kept as
 * INT_MAX (refused as unsupported), never truncated (2^32+13 is not 13). */
static int64_t opset_for(const Onnx__ModelProto *m, const char *domain)
{
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
        if (strcmp(d, "ai.onnx") == 0)
            d = "";
        if (strcmp(d, domain) == 0)
            return m->opset_import[i]->version;
    }
    return -1;
}

/* Ops whose only ONNX schema version is 1 (up to opset 21): an opset-1 model means today's op. */
static int unchanged_since_opset1(const char *op)
{
    static const char *const ops[] = {"GlobalAveragePool", "GlobalMaxPool", "Not", "Softplus", "Softsign"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op, ops[i]) == 0)
            return 1;
    return 0;
}

/* The default-domain opset; below QR_OPSET_MIN only ops whose schema never changed since opset 1
 * are taken. */
static qr_status graph_opset(importer *im, const Onnx__ModelProto *m, int *out)
{
    const Onnx__GraphProto *gp = m->graph;
    int64_t opset64 = opset_for(m, "");
    if (opset64 < 0)
        opset64 = m->n_opset_import ? -1 : QR_OPSET_MIN;
    if (opset64 < 1 || opset64 > QR_OPSET_MAX)
        return qr_errorf(im->e, "%s: opset_import: default-domain opset %lld is not supported (%d to %d)", im->path,
                         (long long)opset64, QR_OPSET_MIN, QR_OPSET_MAX);
    int opset = (int)opset64;
    for (size_t i = 0; opset < QR_OPSET_MIN && i < gp->n_node; i++) {
        const char *op = gp->node[i]->op_type ? gp->node[i]->op_type : "";
        const char *dom = gp->node[i]->domain ? gp->node[i]->domain : "";
        if ((*dom && strcmp(dom, "ai.onnx") != 0) || !unchanged_since_opset1(op))
            return qr_errorf(im->e,
                             "%s: opset_import: default-domain opset %d is not supported (%d to %d; older only for ops "
                             "unchanged since opset 1, and '%s' has changed)",
                             im->path, opset, QR_OPSET_MIN, QR_OPSET_MAX, op);
    }
    *out = opset;
    return QR_OK;
}

/* Unknown ops first: the most useful thing to say about a model we cannot run. */
static qr_status check_ops_known(importer *im, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *dom = np->domain && strcmp(np->domain, "ai.onnx") ? np->domain : "";
        const char *op = np->op_type ? np->op_type : "";
        if ((*dom || strcmp(op, "Constant") != 0) && !qr_op_find(dom, op)) {
            char autoname[32];
            snprintf(autoname, sizeof autoname, "#%zu", i);
            return qr_errorf(im->e, "%s: node '%s': unknown op '%s%s%s'", im->path,
                             np->name && np->name[0] ? np->name : autoname, dom, *dom ? "." : "", op);
        }
    }
    return QR_OK;
}

static qr_status import_initializers(importer *im, const Onnx__GraphProto *gp)
{
    if (gp->n_sparse_initializer)
        return qr_errorf(im->e, "%s: sparse_initializer: sparse tensors are not supported", im->path);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", tp->name ? tp->name : "");
        if (!tp->name || !tp->name[0])
            return qr_errorf(im->e, "%s: initializer %zu has no name", im->path, i);
        const raw_ref *raw = i < im->n_raws && im->raws[i].stripped ? &im->raws[i] : NULL;
        if (raw && !(tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
            if (add_stripped_const(im, tp, raw, what) != QR_OK)
                return QR_ERR;
            continue;
        }
        qr_tensor t;
        if (tensor_from_proto(im, tp, what, &t) != QR_OK)
            return QR_ERR;
        qr_status st = add_const(im, tp->name, &t, what);
        qr_tensor_free(&t);
        if (st != QR_OK)
            return st;
    }
    return QR_OK;
}

/* The run-time inputs: those without an initializer (which gives a default, a constant). */
static qr_status import_inputs(importer *im, const Onnx__GraphProto *gp)
{
    qr_graph *g = im->g;
    g->inputs = qr_arena_alloc(&g->arena, sizeof *g->inputs * (gp->n_input + 1));
    if (!g->inputs)
        return out_of_memory(im);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !vi->name[0])
            return qr_errorf(im->e, "%s: graph input %zu has no name", im->path, i);
        qr_value *v = qr_graph_find(g, vi->name);
        if (v && v->is_const)
            continue; /* an input with an initializer: its default is used (a constant) */
        if (v)
            return qr_errorf(im->e, "%s: graph input '%s' is declared twice", im->path, vi->name);
        if (!(v = qr_graph_new_value(g, vi->name)))
            return out_of_memory(im);
        if (read_type(im, vi, v, "graph input") != QR_OK)
            return QR_ERR;
        if (!vi->type || v->t.dtype == QR_UNDEF)
            return qr_errorf(im->e, "%s: graph input '%s' has no tensor type", im->path, vi->name);
        v->is_input = 1;
        g->inputs[g->n_inputs++] = v;
    }
    return QR_OK;
}

static qr_status import_nodes(importer *im, const Onnx__ModelProto *m, int opset)
{
    const Onnx__GraphProto *gp = m->graph;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *dom = np->domain && strcmp(np->domain, "ai.onnx") ? np->domain : "";
        int64_t v = *dom ? opset_for(m, dom) : opset;
        if (v > INT_MAX)
            return qr_errorf(im->e, "%s: opset_import: opset %lld of domain '%s' is not supported", im->path,
                             (long long)v, dom);
        if (import_node(im, np, i, (int)v) != QR_OK)
            return QR_ERR;
    }
    return QR_OK;
}

/* The types value_info and the outputs declare for values nodes produce. */
static qr_status import_outputs(importer *im, const Onnx__GraphProto *gp)
{
    qr_graph *g = im->g;
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        qr_value *v = vi->name ? qr_graph_find(g, vi->name) : NULL;
        if (v && !v->is_const && !v->is_input && read_type(im, vi, v, "value_info") != QR_OK)
            return QR_ERR;
    }
    if (!gp->n_output)
        return qr_errorf(im->e, "%s: the graph has no outputs", im->path);
    g->outputs = qr_arena_alloc(&g->arena, sizeof *g->outputs * gp->n_output);
    if (!g->outputs)
        return out_of_memory(im);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        qr_value *v = vi->name ? qr_graph_find(g, vi->name) : NULL;
        if (!v)
            return qr_errorf(im->e, "%s: graph output '%s' is not produced by any node", im->path,
                             vi->name ? vi->name : "");
        if (!v->is_const && !v->is_input && read_type(im, vi, v, "graph output") != QR_OK)
            return QR_ERR;
        v->is_output = 1;
        g->outputs[g->n_outputs++] = v;
    }
    return QR_OK;
}

static qr_status import_graph(importer *im, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    qr_graph *g = im->g;
    if (!gp)
        return qr_errorf(im->e, "%s: the model has no graph", im->path);
    if (graph_opset(im, m, &g->opset) != QR_OK)
        return QR_ERR;
    g->name = qr_arena_strdup(&g->arena, gp->name ? gp->name : "");
    g->producer = qr_arena_strdup(&g->arena, m->producer_name ? m->producer_name : "");
    if (!g->name || !g->producer)
        return out_of_memory(im);
    for (size_t i = 0; i < m->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *p = m->metadata_props[i];
        if (p && p->key && qr_graph_set_meta(g, p->key, p->value ? p->value : "") != QR_OK)
            return out_of_memory(im);
    }
    if (check_ops_known(im, gp) != QR_OK || import_initializers(im, gp) != QR_OK || import_inputs(im, gp) != QR_OK ||
        import_nodes(im, m, g->opset) != QR_OK || import_outputs(im, gp) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < g->n_nodes; i++)
        if (check_legacy_broadcast(im, g->nodes[i]) != QR_OK)
            return QR_ERR;
    if (qr_graph_oom(g))
        return out_of_memory(im);
    if (qr_graph_toposort(g, im->e) != QR_OK) {
        qr_error_prefix(im->e, "%s", im->path);
        return QR_ERR;
    }
    return QR_OK;
}

/* ---- the model's bytes without its weights ----
 *
 * protobuf-c copies every bytes field it unpacks, so unpacking a model whole holds its weights
 * twice (the bytes read, the unpacked raw_data), and the graph's constants made a third copy:
 * 3x the file at the peak. strip_model writes the model's protobuf again without the payloads of
 * the initializers' raw_data of STRIP_MIN_BYTES or more (each left as an empty raw_data) and
 * notes where each lies, so protobuf-c unpacks only the graph's structure and the importer
 * copies each weight once, from the model's bytes into the graph (add_stripped_const). It reads
 * the wire format only as far as ModelProto.graph (field 7), GraphProto.initializer (5) and
 * TensorProto.raw_data (9); every other field is copied as it is. Anything it cannot read makes
 * it give up, and the model is unpacked whole as before (protobuf-c reports what is wrong). */
typedef struct stripper {
    const unsigned char *base;
    unsigned char *out;
    size_t n, cap;
    raw_ref *raws;
    size_t n_raws, cap_raws;
} stripper;

static int read_varint(const unsigned char *p, size_t n, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < n; shift += 7) {
        unsigned char b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

static int put(stripper *s, const void *p, size_t n)
{
    if (s->cap - s->n < n) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->n < n)
            cap *= 2;
        unsigned char *o = realloc(s->out, cap);
        if (!o)
            return 0;
        s->out = o, s->cap = cap;
    }
    if (n)
        memcpy(s->out + s->n, p, n);
    s->n += n;
    return 1;
}

static size_t varint_bytes(uint64_t v, unsigned char *b)
{
    size_t k = 0;
    do {
        b[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return k;
}

/* level 0: a ModelProto, 1: its GraphProto, 2: an initializer's TensorProto. */
static int strip_message(stripper *s, const unsigned char *p, size_t n, int level)
{
    raw_ref *mine = NULL;
    if (level == 2) { /* this initializer's slot, in the order protobuf-c will list them */
        if (s->n_raws == s->cap_raws) {
            size_t cap = s->cap_raws ? 2 * s->cap_raws : 64;
            raw_ref *r = realloc(s->raws, sizeof *r * cap);
            if (!r)
                return 0;
            s->raws = r, s->cap_raws = cap;
        }
        mine = &s->raws[s->n_raws++];
        *mine = (raw_ref){0, 0, 0};
    }
    for (size_t pos = 0; pos < n;) {
        size_t start = pos;
        uint64_t tag, len;
        if (!read_varint(p, n, &pos, &tag))
            return 0;
        unsigned field = (unsigned)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (!read_varint(p, n, &pos, &len))
                return 0;
            break;
        case 1:
        case 5: {
            size_t k = (tag & 7) == 1 ? 8 : 4;
            if (n - pos < k)
                return 0;
            pos += k;
            break;
        }
        case 2: {
            if (!read_varint(p, n, &pos, &len) || len > n - pos)
                return 0;
            const unsigned char *body = p + pos;
            pos += len;
            if (level == 2 && field == 9 && len >= STRIP_MIN_BYTES) {
                *mine = (raw_ref){(size_t)(body - s->base), len, 1};
                unsigned char empty[2] = {(unsigned char)tag, 0}; /* tag 9/2 is one byte: 0x4a */
                if (!put(s, empty, 2))
                    return 0;
                continue;
            }
            if (level == 2 && field == 9) /* a later raw_data replaces an earlier one */
                *mine = (raw_ref){0, 0, 0};
            if ((level == 0 && field == 7) || (level == 1 && field == 5)) {
                /* the submessage rewritten, behind room for its length's varint (10 bytes at
                 * most), then moved up against the varint actually written */
                unsigned char hdr[10];
                size_t at, tn = varint_bytes(tag, hdr);
                if (!put(s, hdr, tn))
                    return 0;
                at = s->n;
                if (!put(s, hdr, sizeof hdr) || !strip_message(s, body, len, level + 1))
                    return 0;
                size_t sub = s->n - at - sizeof hdr, ln = varint_bytes(sub, hdr);
                memmove(s->out + at + ln, s->out + at + sizeof hdr, sub);
                memcpy(s->out + at, hdr, ln);
                s->n = at + ln + sub;
                continue;
            }
            break;
        }
        default: /* groups (deprecated) and invalid wire types: left to protobuf-c */
            return 0;
        }
        if (!put(s, p + start, pos - start))
            return 0;
    }
    return 1;
}

/* protobuf-c returns NULL both for malformed data and when an allocation
 * fails; this allocator tells the two apart, so out of memory is reported as such. */
static void *pb_alloc(void *data, size_t size)
{
    void *p = malloc(size);
    if (!p)
        *(int *)data = 1;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    free(p);
}

static qr_status load_bytes(const unsigned char *data, size_t len, int mapped, const char *path, qr_graph **out,
                            qr_error *e);

/* Reads the whole file, for a file that cannot be mapped. */
static qr_status load_read(const char *path, qr_graph **out, qr_error *e)
{
    unsigned char *buf;
    size_t len;
    if (qr_read_file(path, MAX_MODEL_BYTES, &buf, &len, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        return QR_ERR;
    }
    qr_status st = load_bytes(buf, len, 0, path, out, e);
    free(buf);
    return st;
}

/* Imports the model serialized in data (a mapping of its file when mapped). */
static qr_status load_bytes(const unsigned char *data, size_t len, int mapped, const char *path, qr_graph **out,
                            qr_error *e)
{
    *out = NULL;
    int oom = 0;
    ProtobufCAllocator pa = {.alloc = pb_alloc, .free = pb_free, .allocator_data = &oom};
    stripper s = {.base = data};
    int stripped = strip_message(&s, data, len, 0);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&pa, stripped ? s.n : len, stripped ? s.out : data);
    free(s.out);
    if (!m && oom) {
        free(s.raws);
        return qr_errorf(e, "%s: out of memory reading the model (%zu bytes)", path, len);
    }
    if (!m && stripped) { /* let protobuf-c name what is wrong in the model as it is */
        stripped = 0;
        m = onnx__model_proto__unpack(&pa, len, data);
    }
    if (!m) {
        free(s.raws);
        return qr_errorf(e, "%s: not a valid ONNX model (the protobuf data is malformed or truncated)", path);
    }
    importer im = {.path = path, .e = e, .bytes = data, .mapped = mapped};
    if (stripped)
        im.raws = s.raws, im.n_raws = s.n_raws;
    im.dir = qr_path_dir(path);
    im.realdir = realpath(im.dir, NULL);
    if (!im.realdir)
        im.realdir = strdup(im.dir);
    im.g = qr_graph_new();
    qr_status st = im.g ? import_graph(&im, m) : qr_errorf(e, "%s: out of memory", path);
    onnx__model_proto__free_unpacked(m, &pa);
    free(s.raws);
    free(im.dir);
    free(im.realdir);
    if (st != QR_OK) {
        qr_graph_free(im.g);
        return st;
    }
    *out = im.g;
    return QR_OK;
}

qr_status qr_onnx_load_buffer(const void *data, size_t len, const char *path, qr_graph **out, qr_error *e)
{
    return load_bytes(data, len, 0, path, out, e);
}

/* The file is mapped rather than read: the weights' pages are copied into the graph and given
 * back one tensor at a time (add_stripped_const), so they never add up to a second copy. */
qr_status qr_onnx_load(const char *path, qr_graph **out, qr_error *e)
{
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return qr_errorf(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return qr_errorf(e, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len > MAX_MODEL_BYTES) {
        close(fd);
        return qr_errorf(e, "%s: file is too large (%zu bytes, limit %zu)", path, len, MAX_MODEL_BYTES);
    }
    if (len == 0) { /* nothing to map: an empty buffer (protobuf-c's error) */
        close(fd);
        return load_bytes((const unsigned char *)"", 0, 0, path, out, e);
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) /* a file system that cannot map: read it as before */
        return load_read(path, out, e);
    madvise(p, len, MADV_SEQUENTIAL);
    qr_status st = load_bytes(p, len, 1, path, out, e);
    munmap(p, len);
    return st;
}

qr_status qr_onnx_load_tensor(const char *path, qr_tensor *t, char **name, qr_error *e)
{
    unsigned char *buf;
    size_t len;
    memset(t, 0, sizeof *t);
    if (name)
        *name = NULL;
    if (qr_read_file(path, MAX_MODEL_BYTES, &buf, &len, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        return QR_ERR;
    }
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp)
        return qr_errorf(e, "%s: not a valid ONNX TensorProto (malformed or truncated)", path);
    importer im = {.path = path, .e = e};
    im.dir = qr_path_dir(path);
    im.realdir = realpath(im.dir, NULL);
    if (!im.realdir)
        im.realdir = strdup(im.dir);
    qr_status st = tensor_from_proto(&im, tp, "tensor", t);
    if (st == QR_OK && name && tp->name)
        *name = strdup(tp->name);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    free(im.dir);
    free(im.realdir);
    return st;
}
