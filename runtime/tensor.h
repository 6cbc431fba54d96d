/* A tensor is a dtype, a shape and a pointer to C-order data. The struct does
 * not own its data: whoever allocated it frees it (the graph arena for
 * constants, the executor for activations, the caller for outputs). */
#ifndef QR_TENSOR_H
#define QR_TENSOR_H

#include <stdint.h>
#include <stddef.h>

#include "dtype.h"
#include "status.h"

#define QR_MAX_DIMS 8
/* Refuse tensors beyond this many bytes: an absurd shape is an error, not a crash. */
#define QR_MAX_TENSOR_BYTES ((int64_t)1 << 33) /* 8 GiB: a third of the machines we run on */

typedef struct qr_tensor {
    qr_dtype dtype;
    int ndim;
    int64_t dims[QR_MAX_DIMS];
    void *data; /* NULL when only the type and shape are known */
} qr_tensor;

int64_t qr_tensor_numel(const qr_tensor *t);
size_t qr_tensor_nbytes(const qr_tensor *t);
/* Checks every dim is >= 0 and the size is below QR_MAX_TENSOR_BYTES. */
qr_status qr_tensor_check_shape(const qr_tensor *t, qr_error *e);
/* The same without the size limit: the rank, every dim >= 0, the element count within int64. */
qr_status qr_tensor_check_dims(const qr_tensor *t, qr_error *e);
void qr_tensor_set_shape(qr_tensor *t, int ndim, const int64_t *dims);
int qr_tensor_same_shape(const qr_tensor *a, const qr_tensor *b);
/* Row-major strides in elements. */
void qr_tensor_strides(const qr_tensor *t, int64_t *strides);
/* "f32[1,3,224,224]" into buf. */
const char *qr_tensor_type_str(const qr_tensor *t, char *buf, size_t n);
/* malloc'd data of the right size (zeroed); QR_ERR if too large or out of memory. */
qr_status qr_tensor_alloc(qr_tensor *t, qr_error *e);
void qr_tensor_free(qr_tensor *t);
/* data (inside the mapping [base, base+len)) is a tensor's: qr_data_free unmaps the mapping.
 * in_file: a file's mapping (its pages are page cache), else anonymous memory. On failure the
 * mapping is unmapped. */
qr_status qr_tensor_adopt_map(void *data, void *base, size_t len, int in_file, qr_error *e);
/* Whether data is a tensor's mapping of a file (qr_tensor_adopt_map with in_file). */
int qr_data_in_file(const void *data);
/* Bytes [from, from + len) of data, when data is a tensor's mapping of a file, leave the process's
 * memory (its resident set): the page cache keeps them, and a later read maps them again. Nothing
 * for other data (anonymous or malloc'd memory would lose its contents). For a run that walks a
 * mapped input a slice at a time. */
void qr_data_release(const void *data, size_t from, size_t len);
/* Frees tensor data: munmap for adopted mappings, else free. */
void qr_data_free(void *data);

#endif
