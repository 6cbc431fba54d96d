#include "tensor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int64_t qr_tensor_numel(const qr_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->dims[i];
    return n;
}

size_t qr_tensor_nbytes(const qr_tensor *t)
{
    return qr_dtype_bytes(t->dtype, qr_tensor_numel(t));
}

qr_status qr_tensor_check_shape(const qr_tensor *t, qr_error *e)
{
    if (t->ndim < 0 || t->ndim > QR_MAX_DIMS)
        return qr_errorf(e, "rank %d is not supported (at most %d)", t->ndim, QR_MAX_DIMS);
    int64_t bytes = (int64_t)(qr_dtype_size(t->dtype) ? qr_dtype_size(t->dtype) : 1);
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0)
            return qr_errorf(e, "dimension %d is negative (%lld)", i, (long long)t->dims[i]);
        if (t->dims[i] > 0 && bytes > QR_MAX_TENSOR_BYTES / t->dims[i])
            return qr_errorf(e, "shape is too large (over %lld bytes)", (long long)QR_MAX_TENSOR_BYTES);
        bytes *= t->dims[i] ? t->dims[i] : 1;
    }
    return QR_OK;
}

qr_status qr_tensor_check_dims(const qr_tensor *t, qr_error *e)
{
    if (t->ndim < 0 || t->ndim > QR_MAX_DIMS)
        return qr_errorf(e, "rank %d is not supported (at most %d)", t->ndim, QR_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0)
            return qr_errorf(e, "dimension %d is negative (%lld)", i, (long long)t->dims[i]);
        if (__builtin_mul_overflow(n, t->dims[i], &n))
            return qr_errorf(e, "shape is too large (over %lld elements)", (long long)INT64_MAX);
    }
    return QR_OK;
}

void qr_tensor_set_shape(qr_tensor *t, int ndim, const int64_t *dims)
{
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = dims[i];
}

int qr_tensor_same_shape(const qr_tensor *a, const qr_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

void qr_tensor_strides(const qr_tensor *t, int64_t *strides)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= t->dims[i];
    }
}

const char *qr_tensor_type_str(const qr_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", qr_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < n; i++) {
        if (t->dims[i] < 0)
            k += (size_t)snprintf(buf + k, n - k, "%s?", i ? "," : "");
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

qr_status qr_tensor_alloc(qr_tensor *t, qr_error *e)
{
    if (qr_tensor_check_shape(t, e) != QR_OK)
        return QR_ERR;
    size_t n = qr_tensor_nbytes(t);
    t->data = calloc(n ? n : 1, 1);
    if (!t->data)
        return qr_errorf(e, "out of memory allocating %zu bytes", n);
    return QR_OK;
}

/* Tensor data that lives in a memory mapping (a mapped .npy, a folder of shards) rather than in
 * malloc'd memory: qr_data_free unmaps it. A short list: a run maps a few calibration inputs. */
typedef struct data_map {
    void *data, *base;
    size_t len;
    int in_file; /* a file's pages (page cache), not anonymous memory */
} data_map;
static data_map *maps;
static int nmaps, capmaps;
static pthread_mutex_t maps_mu = PTHREAD_MUTEX_INITIALIZER;

qr_status qr_tensor_adopt_map(void *data, void *base, size_t len, int in_file, qr_error *e)
{
    pthread_mutex_lock(&maps_mu);
    if (nmaps == capmaps) {
        int cap = capmaps ? 2 * capmaps : 8;
        data_map *m = realloc(maps, sizeof *m * (size_t)cap);
        if (!m) {
            pthread_mutex_unlock(&maps_mu);
            munmap(base, len);
            return qr_errorf(e, "out of memory");
        }
        maps = m, capmaps = cap;
    }
    maps[nmaps++] = (data_map){data, base, len, in_file};
    pthread_mutex_unlock(&maps_mu);
    return QR_OK;
}

int qr_data_in_file(const void *data)
{
    int in = 0;
    pthread_mutex_lock(&maps_mu);
    for (int i = 0; data && i < nmaps; i++)
        if (maps[i].data == data)
            in = maps[i].in_file;
    pthread_mutex_unlock(&maps_mu);
    return in;
}

void qr_data_release(const void *data, size_t from, size_t len)
{
    pthread_mutex_lock(&maps_mu);
    for (int i = 0; data && i < nmaps; i++)
        if (maps[i].data == data && maps[i].in_file) {
            /* the whole pages inside [from, from + len): a page shared with a sample still to come
             * stays (it would only be read again) */
            size_t pg = (size_t)sysconf(_SC_PAGESIZE);
            uintptr_t a = (uintptr_t)data + from, b = a + len, base = (uintptr_t)maps[i].base;
            a = (a + pg - 1) / pg * pg;
            b = b / pg * pg;
            if (b > base + maps[i].len)
                b = (base + maps[i].len) / pg * pg;
            if (b > a)
                madvise((void *)a, b - a, MADV_DONTNEED);
        }
    pthread_mutex_unlock(&maps_mu);
}

void qr_data_free(void *data)
{
    if (!data)
        return;
    pthread_mutex_lock(&maps_mu);
    for (int i = 0; i < nmaps; i++)
        if (maps[i].data == data) {
            data_map m = maps[i];
            maps[i] = maps[--nmaps];
            if (!nmaps) { /* nothing mapped is left: no list to report as a leak */
                free(maps);
                maps = NULL, capmaps = 0;
            }
            pthread_mutex_unlock(&maps_mu);
            munmap(m.base, m.len);
            return;
        }
    pthread_mutex_unlock(&maps_mu);
    free(data);
}

void qr_tensor_free(qr_tensor *t)
{
    qr_data_free(t->data);
    t->data = NULL;
}
