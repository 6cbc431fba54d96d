/* u8 x s8 -> s32 integer GEMM microkernels, one per instruction set, chosen
 * when first used by what the CPU reports (never by the build machine).
 *
 * c[m][n] = init[m] + sum_k a[m][k] * b[k][n], wrapping modulo 2^32 as an
 * exact sum wrapped at the end would (QRL's accumulation contract), with
 *   a: s8 weights, row-major [M][K4]  (K4 = K rounded up to 4, zero-filled)
 *   b: u8 activations packed [K4/4][N16][4]: for each group of four k, the
 *      four bytes of every column n together (N16 = N rounded up to 16).
 * This is the layout vpdpbusd reads: 16 columns of four u8 against four s8
 * broadcast from one weight row. */
#ifndef QR_IGEMM_H
#define QR_IGEMM_H

#include <stdint.h>

/* Rounds k up to the packing's multiple of 4 and n to 16. */
static inline int64_t qr_igemm_k4(int64_t k) { return (k + 3) & ~(int64_t)3; }
static inline int64_t qr_igemm_n16(int64_t n) { return (n + 15) & ~(int64_t)15; }

typedef void (*qr_igemm_fn)(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                            const uint8_t *b, int64_t k4, int64_t n);

/* The best u8s8 kernel this CPU runs (AVX-512 VNNI, AVX-VNNI, AVX2, in that
 * order), or NULL when it has none of them (then callers keep their portable
 * int32 path). QRL_IGEMM=portable forces NULL; QRL_IGEMM=avx512vnni, avxvnni
 * or avx2 picks that kernel when the CPU has it. */
qr_igemm_fn qr_igemm_u8s8(void);

/* What QRL_IGEMM (read once, at the first use) would choose, for tests that compare the paths in
 * one process: "portable", an ISA's name, or NULL to go back to QRL_IGEMM's choice. */
void qr_igemm_force(const char *isa);

/* Whether QRL_IGEMM=portable asks for the portable int32 path of every
 * integer convolution (the reference the fast paths are tested against). */
int qr_igemm_portable_forced(void);

/* The kernel of one instruction set ("avx512vnni", "avxvnni", "avx2"), NULL
 * when this CPU lacks it or the name is unknown (tests run each one there is). */
qr_igemm_fn qr_igemm_u8s8_isa(const char *isa);

/* The packing's words from four rows of bytes (one group of four k):
 * d[i] = (r0[i] | r1[i] << 8 | r2[i] << 16 | r3[i] << 24) ^ (flip * 0x01010101) for i < n,
 * flip 0x80 turning i8 into u8. */
typedef void (*qr_igemm_interleave_fn)(uint32_t *d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                                       const uint8_t *r3, int64_t n, uint8_t flip);
/* The AVX-512BW one when the CPU has it (byte and word unpacks, eight at a time where the
 * compiler's version widens each byte to a word on its own), else the portable one; QRL_IGEMM
 * picks as for qr_igemm_u8s8 ("portable" forces the reference). */
qr_igemm_interleave_fn qr_igemm_interleave4(void);
void qr_igemm_interleave4_ref(uint32_t *d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                              const uint8_t *r3, int64_t n, uint8_t flip);

/* Few rows (a batch of 1 through a fully connected layer): y[j] = init[j] + sum_k x[k] w[k][j]
 * for columns j in [j0, j1) (j0 a multiple of 16), wrapping as above, with
 *   x: u8 activations, k4 bytes (zero-filled past K),
 *   w: s8 weights packed [K4/4][N16][4], the four k of each column together,
 * four bytes of x broadcast against sixteen columns per vpdpbusd, where the GEMM above would
 * compute 16 columns for each real one. NULL unless the u8s8 kernel is AVX-512 VNNI's. */
typedef void (*qr_igemv_fn)(int32_t *y, const uint8_t *x, const int8_t *w, const int32_t *init, int64_t k4,
                            int64_t j0, int64_t j1, int64_t n);
qr_igemv_fn qr_igemv_u8s8(void);
void qr_igemv_u8s8_ref(int32_t *y, const uint8_t *x, const int8_t *w, const int32_t *init, int64_t k4, int64_t j0,
                       int64_t j1, int64_t n);

/* The portable reference of the same contract (tests compare every ISA's kernel with it). */
void qr_igemm_u8s8_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                       const uint8_t *b, int64_t k4, int64_t n);

#endif
