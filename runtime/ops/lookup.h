/* Table lookups of 8-bit integers (QrlLookup's common case: a 256-entry table of bytes, the form
 * Sigmoid, Tanh, GELU, ... take in the integer graph): y[i] = table[x[i] ^ flip], flip 0 for u8
 * indexes and 0x80 for i8 ones (x + 128 as a byte). One function per instruction set, chosen when
 * first used by what the CPU reports (never by the build machine); all give the same bytes. */
#ifndef QR_LOOKUP_H
#define QR_LOOKUP_H

#include <stdint.h>

typedef void (*qr_lookup8_fn)(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t table[256], uint8_t flip);

/* The plain loop, on every CPU. */
void qr_lookup8_portable(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t table[256], uint8_t flip);

/* With AVX-512 VBMI (vpermi2b: 64 lookups in two permutes and a blend), or NULL when this CPU
 * lacks it (the tests call it directly). */
qr_lookup8_fn qr_lookup8_avx512vbmi(void);

/* The best of the above this CPU runs. */
qr_lookup8_fn qr_lookup8_best(void);

#endif
