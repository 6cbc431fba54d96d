#include "tensor_io.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* t's dtype and shape from the preamble and header at buf; *data_off is where the data starts. */
static qr_status npy_head(const unsigned char *buf, size_t len, const char *path, qr_tensor *t, size_t *data_off,
                          qr_error *e)
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
    *data_off = off + hl;
    return st;
}

qr_status qr_npy_parse(const unsigned char *buf, size_t len, const char *path, qr_tensor *t, qr_error *e)
{
    size_t off;
    if (npy_head(buf, len, path, t, &off, e) != QR_OK)
        return QR_ERR;
    return npy_data(buf + off, len - off, path, t, e);
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

qr_status qr_npy_write_header(FILE *f, const qr_tensor *t, qr_error *e)
{
    const char *code = qr_dtype_get(t->dtype)->npy;
    if (!code)
        return qr_errorf(e, "dtype %s cannot be written as .npy", qr_dtype_name(t->dtype));
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
    fwrite(hdr, 1, 10, f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    return QR_OK;
}

qr_status qr_npy_write(const char *path, const qr_tensor *t, qr_error *e)
{
    if (!qr_dtype_get(t->dtype)->npy)
        return qr_errorf(e, "%s: dtype %s cannot be written as .npy", path, qr_dtype_name(t->dtype));
    qr_atomic_file a;
    if (qr_atomic_open(&a, path, e) != QR_OK)
        return QR_ERR; /* the message names the path */
    qr_npy_write_header(a.f, t, e);
    if (qr_tensor_nbytes(t))
        fwrite(t->data, 1, qr_tensor_nbytes(t), a.f);
    return qr_atomic_commit(&a, e);
}

/* A read-only mapping of the whole file at path: its pages are page cache, read as touched and
 * dropped under memory pressure; read-only, it counts against no RLIMIT_DATA (ulimit -d). */
static qr_status map_file(const char *path, unsigned char **base, size_t *len, qr_error *e)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO without a writer: no wait */
    if (fd < 0)
        return qr_errorf(e, "%s: cannot open", path);
    struct stat sb;
    qr_status st = QR_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = qr_errorf(e, "%s: not a regular file", path);
    else if (sb.st_size == 0)
        st = qr_errorf(e, "%s: empty file (not a .npy file)", path);
    else if ((uintmax_t)sb.st_size > SIZE_MAX)
        st = qr_errorf(e, "%s: too large to map", path);
    *len = (size_t)sb.st_size;
    if (st == QR_OK) {
        void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            st = qr_errorf(e, "%s: cannot map the file", path);
        else
            *base = p;
    }
    close(fd);
    return st;
}

qr_status qr_npy_map(const char *path, qr_tensor *t, qr_error *e)
{
    unsigned char *base = NULL;
    size_t len = 0, off;
    memset(t, 0, sizeof *t);
    if (map_file(path, &base, &len, e) != QR_OK)
        return QR_ERR;
    qr_status st = npy_head(base, len, path, t, &off, e);
    if (st == QR_OK && qr_tensor_check_dims(t, e) != QR_OK) { /* no size limit: the data stays on disk */
        qr_error_prefix(e, "%s", path);
        st = QR_ERR;
    }
    size_t need = st == QR_OK ? qr_tensor_nbytes(t) : 0, align = st == QR_OK ? qr_dtype_size(t->dtype) : 1;
    if (st == QR_OK && len - off < need) {
        char ts[160];
        st = qr_errorf(e, "%s: truncated: %zu data bytes, expected %zu for %s", path, len - off, need,
                       qr_tensor_type_str(t, ts, sizeof ts));
    }
    if (st == QR_OK && (t->dtype == QR_BOOL || ((uintptr_t)(base + off) % (align ? align : 1)))) {
        /* bools are normalized to 0/1, misaligned data is copied: read as a whole */
        qr_tensor c;
        st = qr_npy_parse(base, len, path, &c, e);
        munmap(base, len);
        *t = c;
        return st;
    }
    if (st != QR_OK) {
        munmap(base, len);
        memset(t, 0, sizeof *t);
        return QR_ERR;
    }
    t->data = base + off;
    return qr_tensor_adopt_map(t->data, base, len, 1, e);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the .npy files in dir (hidden files left out), sorted bytewise; *n of them. */
static qr_status shard_names(const char *dir, char ***names, int *n, qr_error *e)
{
    DIR *d = opendir(dir);
    *names = NULL;
    *n = 0;
    if (!d)
        return qr_errorf(e, "%s: cannot open the folder", dir);
    int cap = 0;
    qr_status st = QR_OK;
    for (struct dirent *de; st == QR_OK && (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l < 5 || strcmp(de->d_name + l - 4, ".npy"))
            continue;
        if (*n == cap) {
            char **g = realloc(*names, sizeof *g * (size_t)(cap = cap ? 2 * cap : 16));
            if (!g) {
                st = qr_errorf(e, "out of memory");
                break;
            }
            *names = g;
        }
        size_t pl = strlen(dir) + l + 2;
        if (!((*names)[*n] = malloc(pl)))
            st = qr_errorf(e, "out of memory");
        else
            snprintf((*names)[(*n)++], pl, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (st == QR_OK && !*n)
        st = qr_errorf(e, "%s: the folder holds no .npy files (calibration shards)", dir);
    if (st == QR_OK)
        qsort(*names, (size_t)*n, sizeof **names, by_name);
    return st;
}

/* Whether shard s holds samples of first's dtype and shape (all dims but the first). */
static qr_status shard_fits(const char *path, const qr_tensor *s, const char *first_path, const qr_tensor *first,
                            qr_error *e)
{
    int same = s->ndim >= 1 && s->ndim == first->ndim && s->dtype == first->dtype;
    for (int k = 1; same && k < s->ndim; k++)
        same = s->dims[k] == first->dims[k];
    if (same)
        return QR_OK;
    char a[160], b[160];
    if (s->ndim < 1)
        return qr_errorf(e, "%s: a scalar, not samples along a first dimension", path);
    return qr_errorf(e, "%s: holds %s but %s (the first shard) holds %s; every shard needs the same dtype and the "
                     "same dims after the first", path, qr_tensor_type_str(s, a, sizeof a), first_path,
                     qr_tensor_type_str(first, b, sizeof b));
}

qr_status qr_npy_read_shards(const char *dir, qr_tensor *t, qr_error *e)
{
    char **names;
    int n;
    memset(t, 0, sizeof *t);
    qr_status st = shard_names(dir, &names, &n, e);
    qr_tensor *sh = st == QR_OK ? calloc((size_t)n, sizeof *sh) : NULL;
    if (st == QR_OK && !sh)
        st = qr_errorf(e, "out of memory");
    int64_t rows = 0;
    /* every shard's header first (mapped, not read), so a bad one is named before any copying */
    for (int i = 0; st == QR_OK && i < n; i++) {
        if ((st = qr_npy_map(names[i], &sh[i], e)) == QR_OK && (st = shard_fits(names[i], &sh[i], names[0], &sh[0], e)) == QR_OK)
            rows += sh[i].dims[0];
    }
    if (st == QR_OK && rows == 0)
        st = qr_errorf(e, "%s: the shards hold no samples", dir);
    if (st == QR_OK) {
        *t = sh[0];
        t->dims[0] = rows;
        size_t len = qr_tensor_nbytes(t);
        /* one stream of the samples in name order; NORESERVE: the pages are taken as they are filled */
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            st = qr_errorf(e, "%s: out of memory for %zu bytes of samples", dir, len);
            t->data = NULL;
        } else {
            t->data = p;
            size_t at = 0;
            for (int i = 0; i < n; i++) {
                size_t b = qr_tensor_nbytes(&sh[i]);
                memcpy((char *)p + at, sh[i].data, b);
                at += b;
                qr_tensor_free(&sh[i]); /* its pages leave as soon as they are copied */
            }
            st = qr_tensor_adopt_map(p, p, len, 0, e);
        }
    }
    if (st != QR_OK)
        memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++) {
        if (sh)
            qr_tensor_free(&sh[i]);
        free(names[i]);
    }
    free(sh);
    free(names);
    return st;
}

qr_status qr_tensor_read_calib(const char *path, qr_tensor *t, qr_error *e)
{
    struct stat sb;
    size_t n = strlen(path);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return qr_npy_read_shards(path, t, e);
    if (n > 4 && strcmp(path + n - 4, ".npy") == 0)
        return qr_npy_map(path, t, e);
    return qr_tensor_read_file(path, t, e);
}

qr_status qr_tensor_read_input(const char *path, qr_tensor *t, qr_error *e)
{
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".npy") == 0)
        return qr_npy_map(path, t, e);
    return qr_tensor_read_file(path, t, e);
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
