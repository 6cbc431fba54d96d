#include "tensor_io.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "onnx_import.h"

#define NPY_MAX_BYTES ((size_t)16 << 30)

/* Finds key in a numpy header dict ("{'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }") and returns a pointer to its value. The dict is walked
 * key by key, so a key-like text inside a string value (a decoy such as
 * 'descr': "'shape': (1,)") is never taken for a key. NULL when the key is
 * missing, given twice, or the dict is malformed. */
static const char *dict_value(const char *h, const char *key)
{
    const char *p = h, *found = NULL;
    size_t kl = strlen(key);
    while (*p == ' ')
        p++;
    if (*p++ != '{')
        return NULL;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\n')
            p++;
        if (*p == '}')
            return found;
        char q = *p++;
        if (q != '\'' && q != '"')
            return NULL;
        const char *k = p, *kend = strchr(p, q);
        if (!kend)
            return NULL;
        p = kend + 1;
        while (*p == ' ')
            p++;
        if (*p++ != ':')
            return NULL;
        while (*p == ' ')
            p++;
        if ((size_t)(kend - k) == kl && strncmp(k, key, kl) == 0) {
            if (found)
                return NULL;
            found = p;
        }
        /* Skip the value: a quoted string, a parenthesized tuple, or a bare word. */
        if (*p == '\'' || *p == '"') {
            const char *end = strchr(p + 1, *p);
            if (!end)
                return NULL;
            p = end + 1;
        } else if (*p == '(') {
            const char *end = strchr(p, ')');
            if (!end)
                return NULL;
            p = end + 1;
        } else {
            while (*p && *p != ',' && *p != '}')
                p++;
        }
        if (!*p)
            return NULL;
    }
}

/* The magic, the version and the header's length; *off is where the header starts. */
static qr_status npy_preamble(const unsigned char *buf, size_t len, const char *path, size_t *off, size_t *hl,
                              qr_error *e)
{
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return qr_errorf(e, "%s: not a .npy file (bad magic)", path);
    int major = buf[6];
    if (major == 1) {
        *hl = (size_t)buf[8] | (size_t)buf[9] << 8;
        *off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return qr_errorf(e, "%s: truncated .npy header", path);
        *hl = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        *off = 12;
    } else {
        return qr_errorf(e, "%s: unsupported .npy version %d", path, major);
    }
    if (*hl > 65536 || *off + *hl > len)
        return qr_errorf(e, "%s: truncated .npy header", path);
    return QR_OK;
}

/* The dtype of a descr value ('<f4', "|u1"...): little-endian, or any order for single bytes. */
static qr_status npy_descr(const char *d, const char *path, qr_dtype *dt, qr_error *e)
{
    char q = *d++;
    const char *dend = strchr(d, q);
    if (!dend || dend - d < 2 || dend - d > 8)
        return qr_errorf(e, "%s: malformed .npy header (descr)", path);
    char order = d[0];
    char code[8] = {0};
    memcpy(code, d + 1, (size_t)(dend - d - 1));
    if (order == '>' && strcmp(code, "i1") && strcmp(code, "u1") && strcmp(code, "b1"))
        return qr_errorf(e, "%s: big-endian data ('%c%s') is not supported", path, order, code);
    if (order != '<' && order != '|' && order != '=' && order != '>')
        return qr_errorf(e, "%s: malformed .npy header (descr)", path);
    *dt = QR_UNDEF;
    for (int k = 1; k < QR_DTYPE_COUNT; k++) {
        const char *npy = qr_dtype_get((qr_dtype)k)->npy;
        if (npy && strcmp(npy, code) == 0)
            *dt = (qr_dtype)k;
    }
    if (*dt == QR_UNDEF)
        return qr_errorf(e, "%s: numpy dtype '%s' is not supported", path, code);
    return QR_OK;
}

/* The dims of a shape value ((2, 3), (5,), ()) into t. */
static qr_status npy_shape(const char *p, const char *path, qr_tensor *t, qr_error *e)
{
    if (*p++ != '(')
        return qr_errorf(e, "%s: malformed .npy header (shape)", path);
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        if (!isdigit((unsigned char)*p) || t->ndim == QR_MAX_DIMS)
            return qr_errorf(e, "%s: malformed or unsupported .npy shape (at most %d dims)", path, QR_MAX_DIMS);
        char *end;
        long long v = strtoll(p, &end, 10);
        t->dims[t->ndim++] = v;
        p = end;
        while (*p == 'L')
            p++;
    }
    return QR_OK;
}

/* The header's dict (NUL-terminated): t's dtype and shape. */
static qr_status npy_header(const char *h, const char *path, qr_tensor *t, qr_error *e)
{
    const char *d = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"), *sh = dict_value(h, "shape");
    if (!d || !fo || !sh || (*d != '\'' && *d != '"'))
        return qr_errorf(e, "%s: malformed .npy header (needs descr, fortran_order and shape)", path);
    if (strncmp(fo, "True", 4) == 0)
        return qr_errorf(e, "%s: Fortran-order arrays are not supported; save it in C order (np.ascontiguousarray)",
                         path);
    if (strncmp(fo, "False", 5) != 0)
        return qr_errorf(e, "%s: malformed .npy header (fortran_order)", path);
    if (npy_descr(d, path, &t->dtype, e) != QR_OK)
        return QR_ERR;
    return npy_shape(sh, path, t, e);
}

/* t's data from the have bytes after the header: its shape within limits, enough bytes. */
static qr_status npy_data(const unsigned char *data, size_t have, const char *path, qr_tensor *t, qr_error *e)
{
    if (qr_tensor_check_shape(t, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        return QR_ERR;
    }
    size_t need = qr_tensor_nbytes(t);
    if (have < need) {
        char ts[160];
        return qr_errorf(e, "%s: truncated: %zu data bytes, expected %zu for %s", path, have, need,
                         qr_tensor_type_str(t, ts, sizeof ts));
    }
    if (qr_tensor_alloc(t, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        return QR_ERR;
    }
    memcpy(t->data, data, need);
    if (t->dtype == QR_BOOL)
        for (size_t i = 0; i < need; i++)
            ((unsigned char *)t->data)[i] = ((unsigned char *)t->data)[i] != 0;
    return QR_OK;
}

qr_status qr_npy_parse(const unsigned char *buf, size_t len, const char *path, qr_tensor *t, qr_error *e)
{
    memset(t, 0, sizeof *t);
    size_t off = 0, hl = 0;
    if (npy_preamble(buf, len, path, &off, &hl, e) != QR_OK)
        return QR_ERR;
    char *h = malloc(hl + 1); /* the dict as a C string */
    if (!h)
        return qr_errorf(e, "out of memory");
    memcpy(h, buf + off, hl);
    h[hl] = 0;
    qr_status st = npy_header(h, path, t, e);
    free(h);
    return st == QR_OK ? npy_data(buf + off + hl, len - off - hl, path, t, e) : st;
}

qr_status qr_npy_read(const char *path, qr_tensor *t, qr_error *e)
{
    unsigned char *buf;
    size_t len;
    memset(t, 0, sizeof *t);
    if (qr_read_file(path, NPY_MAX_BYTES, &buf, &len, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        return QR_ERR;
    }
    qr_status st = qr_npy_parse(buf, len, path, t, e);
    free(buf);
    return st;
}

qr_status qr_npy_write(const char *path, const qr_tensor *t, qr_error *e)
{
    const char *code = qr_dtype_get(t->dtype)->npy;
    if (!code)
        return qr_errorf(e, "%s: dtype %s cannot be written as .npy", path, qr_dtype_name(t->dtype));
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     qr_dtype_size(t->dtype) == 1 ? '|' : '<', code);
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld,%s", (long long)t->dims[i],
                      i + 1 < t->ndim ? " " : "");
    if (t->ndim > 1)
        n--; /* numpy writes (2, 3), and (5,) for one dim */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* Pad with spaces so the data starts 64-byte aligned; end with a newline. */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char hdr[10];
    size_t hl = (size_t)n + pad + 1;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (unsigned char)(hl & 0xff);
    hdr[9] = (unsigned char)(hl >> 8);
    qr_atomic_file a;
    if (qr_atomic_open(&a, path, e) != QR_OK)
        return QR_ERR; /* the message names the path */
    fwrite(hdr, 1, 10, a.f);
    fwrite(dict, 1, (size_t)n, a.f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', a.f);
    fputc('\n', a.f);
    if (qr_tensor_nbytes(t))
        fwrite(t->data, 1, qr_tensor_nbytes(t), a.f);
    return qr_atomic_commit(&a, e);
}

qr_status qr_tensor_read_file(const char *path, qr_tensor *t, qr_error *e)
{
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".npy") == 0)
        return qr_npy_read(path, t, e);
    if (n > 3 && strcmp(path + n - 3, ".pb") == 0)
        return qr_onnx_load_tensor(path, t, NULL, e);
    memset(t, 0, sizeof *t);
    return qr_errorf(e, "%s: unknown tensor file type (expected .npy or .pb)", path);
}
