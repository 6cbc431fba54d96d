/* Copies of strided views of tensors by runs: Transpose's permutations and Slice's boxes. */
#ifndef QR_PERMUTE_H
#define QR_PERMUTE_H

#include <stddef.h>
#include <stdint.h>

/* dst = src (ndim dims, elements of es bytes) with its axes permuted: output axis i is input axis
 * perm[i]. Axes of size 1 are dropped and axes that stay neighbours in order are merged first;
 * then the innermost run is copied whole when the last axis stays last, else the input's last
 * axis and the output's are transposed in blocks (both read and written a cache line at a time). */
void qr_permute_copy(void *dst, const void *src, int ndim, const int64_t *dims, const int *perm, size_t es);

/* d[j * ds + i] = s[i * ss + j] for i < n, j < m: a byte matrix of n rows of m (row stride ss)
 * transposed into m rows of n (row stride ds), in SSE2 16 x 16 tiles within 64 x 64 blocks. */
void qr_transpose_bytes(uint8_t *d, int64_t ds, const uint8_t *s, int64_t ss, int64_t n, int64_t m);

#endif
