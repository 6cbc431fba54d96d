/* SHA-256 (FIPS 180-4), for verifying compiled-module cache entries and
 * keying them. Small and dependency-free; checked against the standard's
 * test vectors in tests/unit/test_cache.c. */
#ifndef QC_SHA256_H
#define QC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define QC_SHA256_LEN 32

typedef struct qc_sha256_ctx {
    uint32_t h[8];
    uint64_t nbytes;      /* total message length so far */
    unsigned char buf[64]; /* a partial block */
    size_t nbuf;
} qc_sha256_ctx;

void qc_sha256_init(qc_sha256_ctx *s);
void qc_sha256_update(qc_sha256_ctx *s, const void *p, size_t n);
void qc_sha256_final(qc_sha256_ctx *s, unsigned char out[QC_SHA256_LEN]);
/* Non-zero: the portable code even where the CPU has the SHA extensions (the tests check both). */
extern int qc_sha256_portable;
/* One call: the digest of p[0..n). */
void qc_sha256(const void *p, size_t n, unsigned char out[QC_SHA256_LEN]);

#endif
