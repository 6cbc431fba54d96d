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
 * int32 path). igemm=portable forces NULL; igemm=avx512vnni, avxvnni
 * or avx2 picks that kernel when the CPU has it. */
qr_igemm_fn qr_igemm_u8s8(void);
/* qr_igemm_fn on rows widened to i16 beforehand: a holds m rows of k4 i16 values (-128..127), the
 * rest as qr_igemm_fn. Where a kernel widens each row's weights for every 8 columns (AVX2 without
 * VNNI), the caller widens the rows once a call instead (quant.c: the weights, into the workspace). */
typedef void (*qr_igemm16_fn)(int32_t *c, int64_t c_rs, const int16_t *a, const int32_t *init, int64_t m0,
                              int64_t m1, const uint8_t *b, int64_t k4, int64_t n);
/* fn's twin on i16 rows, or NULL where fn has none (every kernel but AVX2's) or the wide16 option is 0. */
qr_igemm16_fn qr_igemm_wide_twin(qr_igemm_fn fn);

/* Sets the igemm option (qr_options) for tests that compare the paths in one process:
 * "portable", an ISA's name, or NULL for the CPU's best. */
void qr_igemm_force(const char *isa);

/* Whether igemm=portable asks for the portable int32 path of every
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
 * compiler's version widens each byte to a word on its own), else the portable one; the igemm option
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

/* The same product with a starting value per column as well as per row, and a term per row
 * times a value per column:
 *   c[m][n] = init[m] + cinit[n] - rz[m] * csum[n] + sum_k a[m][k] * b[k][n]
 * (wrapping, layouts as above; cinit NULL: no column starts, rz NULL: no such term, csum then
 * unread), for a product of two computed operands, whose zero points correct each row and each
 * column (quant.c): rz holds a zero point per row of a (the dynamic recipes' per-token
 * activations), csum b's column sums, so its correction rz[m] * csum[n] is one product per
 * element, not a start per row or column. The AVX-512 VNNI kernel adds cinit and the product
 * where its sums start; the other ISAs' run their qr_igemm_fn and add them after. The igemm option
 * picks as for qr_igemm_u8s8 (NULL: portable forced, or no ISA); qr_igemm_u8s8_rc_isa as
 * qr_igemm_u8s8_isa. */
typedef void (*qr_igemm_rc_fn)(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                               const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                               int64_t k4, int64_t n, int64_t pitch);
qr_igemm_rc_fn qr_igemm_u8s8_rc(void);
/* qr_igemm_rc_fn on rows widened to i16 beforehand (a: rows of k4 i16 values, -128..127), the rest
 * as qr_igemm_rc_fn; fn's twin (AVX2's) or NULL as qr_igemm_wide_twin. */
typedef void (*qr_igemm_rc16_fn)(int32_t *c, int64_t c_rs, const int16_t *a, const int32_t *init, const int32_t *cinit,
                                 const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                                 int64_t k4, int64_t n, int64_t pitch);
qr_igemm_rc16_fn qr_igemm_rc_wide_twin(qr_igemm_rc_fn fn);
qr_igemm_rc_fn qr_igemm_u8s8_rc_isa(const char *isa); /* "amx" too (igemm_amx.c) */
/* fn, or the AMX-INT8 kernel in place of the AVX-512 VNNI one for a product of m rows (of one
 * call's matrices), k4 and n where it pays and AMX is chosen as for the convolutions (CPU and OS,
 * the igemm option not forcing another ISA, amx not 0). Its results are the same bits. The AMX
 * kernel reads a's rows from max(0, m1 - 16) on (a ragged last tile loads the 16 rows that end at
 * m1): rows of a before m0 must be readable, as a whole matrix's are (mmq_run). */
qr_igemm_rc_fn qr_igemm_u8s8_rc_for(qr_igemm_rc_fn fn, int64_t m, int64_t k4, int64_t n);
void qr_igemm_u8s8_rc_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                          const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                          int64_t k4, int64_t n, int64_t pitch);
/* b's layout for an rc kernel is [K4/4][pitch][4]: pitch columns per group of four k (the first
 * N16 of them read), pitch = qr_igemm_rc_pitch(fn, k4, n). That is N16, except for the AVX-512
 * VNNI kernel when N16 * 4 bytes is a multiple of 1 KB and K4 at least 64: then one more group of
 * 16 columns, so that the groups of a 32-column strip, which its tiles read again and again, do
 * not fall into a few L1 sets ([128,256] x [256,1024] per-row ran at 307 GMAC/s with groups 4 KB
 * apart, [.., 768] at 380; as qr_iconv_col's strips for convolutions). The other ISAs' take N16
 * only (given another pitch they run the reference). */
int64_t qr_igemm_rc_pitch(qr_igemm_rc_fn fn, int64_t k4, int64_t n);
/* The AVX-512 VNNI rc kernel on b packed in panels: each 32 columns' groups of four k one after
 * another, [N32/32][K4/4][32][4] (zero past N16), k4 * N32 bytes a matrix; the other arguments as
 * qr_igemm_rc_fn's (pitch not read). A strip's lines are then one run: the hardware's prefetchers
 * fetch them where the rows' layout put each on another 4 KiB page, and they spread over L1's sets
 * (quant.c packs a constant B of more than 32 columns so for this kernel). */
void qr_igemm_u8s8_rc_panels_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init,
                                        const int32_t *cinit, const int32_t *rz, const int32_t *csum, int64_t m0,
                                        int64_t m1, const uint8_t *b, int64_t k4, int64_t n, int64_t pitch);
/* That kernel where fn is the AVX-512 VNNI rc kernel; NULL for the others (rows only). */
qr_igemm_rc_fn qr_igemm_rc_panels_for(qr_igemm_rc_fn fn);
static inline int64_t qr_igemm_n32(int64_t n) { return (n + 31) / 32 * 32; }
/* dst (k4 * N32 bytes) = src, a packing [K4/4][pitch][4] (its first N16 columns read), in panels. */
void qr_igemm_rc_panels(uint8_t *dst, const uint8_t *src, int64_t k4, int64_t n, int64_t pitch);

/* Packs a row-major matrix of bytes src [k][n] (rows src_rs bytes apart) as the kernels' b,
 * [K4/4][pitch][4] (pitch >= N16, a multiple of 16; columns N16 .. pitch not written), each
 * byte ^ flip (0x80 turns i8 into u8), 0 past row k and column n up to N16.
 * colsum[j] = the sum of column j's k packed bytes as u8 (NULL: not wanted). dst holds
 * qr_igemm_k4(k) * pitch bytes. */
typedef void (*qr_igemm_pack_b_fn)(uint8_t *dst, const uint8_t *src, int64_t src_rs, int64_t k, int64_t n,
                                   uint8_t flip, int32_t *colsum, int64_t pitch);
/* The rows of a, from a row-major matrix of bytes src [rows][k] (rows src_rs bytes apart):
 * dst[i * k4 + q] = src[i][q] ^ flip for q < k, 0 up to k4 = qr_igemm_k4(k) (flip 0x80 turns u8
 * into s8); dst NULL: not written. rowsum[i] = the sum of row i's k bytes ^ flip as s8 (NULL: not
 * wanted). */
typedef void (*qr_igemm_pack_a_fn)(int8_t *dst, const uint8_t *src, int64_t src_rs, int64_t rows, int64_t k,
                                   uint8_t flip, int32_t *rowsum);
/* The AVX-512 VNNI ones when the CPU has it (the sums by vpdpbusd against ones), else the
 * portable ones (igemm=portable forces them). */
qr_igemm_pack_b_fn qr_igemm_pack_b(void);
qr_igemm_pack_a_fn qr_igemm_pack_a(void);
void qr_igemm_pack_b_ref(uint8_t *dst, const uint8_t *src, int64_t src_rs, int64_t k, int64_t n, uint8_t flip,
                         int32_t *colsum, int64_t pitch);
void qr_igemm_pack_a_ref(int8_t *dst, const uint8_t *src, int64_t src_rs, int64_t rows, int64_t k, uint8_t flip,
                         int32_t *rowsum);

/* The portable reference of the same contract (tests compare every ISA's kernel with it). */
void qr_igemm_u8s8_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                       const uint8_t *b, int64_t k4, int64_t n);

/* Indirect GEMM over NHWC activations (an implicit convolution): for rows i < m and columns j in [j0, j1)
 * (j0 a multiple of 16, j1 <= n),
 *   c[i * c_rs + j] = init[j] + sum_{t < taps} sum_{k < k4} a[i * taps + t][k] * w[t * k4 + k][j]
 * wrapping modulo 2^32 (QRL's accumulation contract: an exact sum wrapped at the end), with
 *   a: m * taps row pointers, each to k4 readable u8 bytes (one window position's input channels, padded to a multiple of 4;
 *      a padding position points to a row holding the input zero point),
 *   w: s8 weights packed in strips of 64 columns (qr_iconv_col), each strip [taps * k4 / 4][its columns][4], the four k of
 *      each column together,
 *   init: n int32 starting values (bias with the zero-point corrections folded in),
 *   k4: a multiple of 4, > 0; taps >= 1; m >= 0; n16 = qr_igemm_n16(n) columns in the panels.
 * Only columns [j0, j1) of rows [0, m) are written; j0 is a multiple of 64 (a strip's first column). */
typedef void (*qr_iconv_fn)(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                            const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);
qr_iconv_fn qr_iconv_u8s8(void);                 /* best for this CPU (the igemm option as for qr_igemm_u8s8); never NULL: the portable one when no ISA fits */
qr_iconv_fn qr_iconv_u8s8_for(int64_t taps, int64_t k4, int64_t n); /* as qr_iconv_u8s8, AMX only for a layer it takes (K >= 64 bytes, n >= 64) */
qr_iconv_fn qr_iconv_u8s8_isa(const char *isa);  /* "amx", "avx512vnni", "avxvnni", "avx2", "portable"; NULL when the CPU lacks it */
/* qr_iconv_fn on activations widened to i16 beforehand: a's rows hold k4 i16 values (0..255), the
 * rest as qr_iconv_fn. Where a kernel widens each activation for every 8 columns it computes (AVX2
 * without VNNI: vpmaddwd takes i16), the caller widens the input once instead. */
typedef void (*qr_iconv16_fn)(int32_t *c, int64_t c_rs, const int16_t *const *a, int64_t taps, int64_t m,
                              const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);
/* fn's twin on i16 activations, or NULL where fn has none (every kernel but AVX2's) or the wide16
 * option is 0 (qr_options: the tests compare both on one CPU). */
qr_iconv16_fn qr_iconv_wide_twin(qr_iconv_fn fn);
/* Whether this CPU and OS run AMX-INT8 tiles: CPUID's AMX-TILE and AMX-INT8, XCR0's tile state, and
 * the kernel's permission for this process (arch_prctl, asked once). With it and no ISA forced
 * (igemm option) and amx not 0, qr_iconv_u8s8 is the AMX kernel and no specialized (JIT) convolution
 * kernels are handed out: the AMX one runs every dense NHWC convolution, the epilogue after it. */
int qr_amx_usable(void);
/* Configures the calling thread's tiles as both AMX kernels use them (eight of 16 x 64 bytes); the
 * kernel releases them (_tile_release) when its call ends. Only after qr_amx_usable(). */
void qr_amx_tiles_16x64(void);
void qr_iconv_u8s8_ref(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m, const int8_t *w,
                       const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);

/* The AMX kernel (the one qr_iconv_u8s8_isa("amx") gives), and the same sums handed to an epilogue a
 * block at a time while they are in L1: for each block of up to 32 rows from i0 and one strip's
 * columns [j0, j0 + cols) (up to 64, j0 a multiple of 64), sink(ctx, acc, acc_rs, i0, rows, j0, cols)
 * with acc[r * acc_rs + q] = row i0 + r's sum + init of column j0 + q, as qr_iconv_fn would have
 * written c (here not written, but for the memory fallback: then c gets the sums and one sink call
 * covers all rows). Only after qr_amx_usable(). */
typedef void (*qr_iconv_sink)(void *ctx, const int32_t *acc, int64_t acc_rs, int64_t i0, int64_t rows, int64_t j0,
                              int64_t cols);
void qr_iconv_u8s8_amx(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m, const int8_t *w,
                       const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);
void qr_iconv_u8s8_amx_sink(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                            const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n,
                            qr_iconv_sink sink, void *ctx);

/* A stride-1, undilated convolution on AMX that reads its input where it is, no row pointers and no
 * copy a row (qr_iconv_u8s8_amx_direct): the input padded once a run (qr_iconv_amx_pad) into images
 * of Hp x Wp pixels of k4 bytes, Hp = OH + KH - 1 and Wp = OW + KW - 1, xz (the input's zero point)
 * where the window leaves the image. Output pixel (oy, ox)'s window row ky is then the KW * k4
 * bytes from padded pixel (oy + ky, ox), and 16 pixels along a padded row are 16 runs k4 bytes
 * apart: a tile's rows, overlapping. The kernel runs over the padded pixel grid ("flat" pixels
 * f = (img * Hp + oy) * Wp + ox) and hands the sink only the real ones (oy < OH, ox < OW), as runs
 * of pixels along an output row. */
typedef struct qr_amx_direct {
    const uint8_t *xp; /* nimg x Hp x Wp x k4 bytes, then qr_iconv_amx_slack bytes */
    int64_t OH, OW, KH, KW, Hp, Wp, k4;
    int64_t piece; /* bytes a tile row takes of a window row: a multiple of 4 dividing KW * k4 */
} qr_amx_direct;
/* The piece for a window row of kw_bytes (the largest of 64, 48, 32 dividing it), 0 where none does
 * (the layer then takes the row pointers' path). */
int64_t qr_iconv_amx_piece(int64_t kw_bytes);
/* Bytes the padded input holds past its last image: the tiles of a last ragged row read there. */
int64_t qr_iconv_amx_slack(int64_t k4, int64_t KW);
/* Output pixels [r0, r0 + rows) (real, (img * OH + oy) * OW + ox) and columns [j0, j1) of n; each run
 * of up to 32 rows along an output row and one strip's columns goes to sink(ctx, acc, acc_rs, i0,
 * rows, j0, cols) with i0 from r0, as qr_iconv_u8s8_amx_sink's (sink NULL: into c, rows c_rs apart
 * from r0's). w: the panels of K = KH * KW * k4 (taps in (ky, kx) order); init as qr_iconv_fn's.
 * Only after qr_amx_usable(). */
void qr_iconv_u8s8_amx_direct(const qr_amx_direct *d, int64_t r0, int64_t rows, const int8_t *w, const int32_t *init,
                              int64_t j0, int64_t j1, int64_t n, int32_t *c, int64_t c_rs, qr_iconv_sink sink,
                              void *ctx);
/* Whether AMX is chosen for convolutions (CPU, OS, the igemm and amx options): the direct kernel's
 * condition beside the layer's geometry. */
int qr_iconv_amx_chosen(void);

/* The panels' columns come in strips of 64 (the last one narrower: n16 is a multiple of 16), each
 * strip's K = taps * k4 rows contiguous, so that the weights a 64-column tile streams over its whole
 * K are one run of memory. With one row of all n16 columns per k group instead, a strip's k groups
 * were n16 * 4 bytes apart and fell in a few cache sets: ResNet-18's 3x3 512-channel layers
 * (strips of 295 KB) ran at 144 GMAC/s against 339 in strips (1 thread, a Xeon with 2 MB of L2).
 * Returns where column j's first k group is in panels w of K rows and n16 columns, and sets *step
 * to the bytes from one k group of j to the next. */
static inline const int8_t *qr_iconv_col(const int8_t *w, int64_t K, int64_t n16, int64_t j, int64_t *step)
{
    int64_t s0 = j / 64 * 64, ws = n16 - s0 < 64 ? n16 - s0 : 64;
    *step = ws * 4;
    return w + s0 * K + (j - s0) * 4;
}

/* The panels qr_iconv_fn reads, from a strided weight array: for t < taps, k < k4, j < n16, with
 * q = t * k4 + k, qr_iconv_col(dst, taps * k4, n16, j, &step)[q / 4 * step + q % 4]
 *   = w[t * w_tap_stride + k * w_c_stride + j * w_n_stride]
 * where k < cin and j < n, 0 elsewhere (cin <= k4, k4 a multiple of 4). dst holds taps * k4 * n16 bytes.
 * ONNX's [M][C][kh][kw] weights of one group: w_tap_stride 1 (taps t = y * kw + x), w_c_stride kh * kw,
 * w_n_stride C * kh * kw. */
void qr_iconv_pack_w(int8_t *dst, const int8_t *w, int64_t taps, int64_t cin, int64_t k4, int64_t n,
                     int64_t w_tap_stride, int64_t w_c_stride, int64_t w_n_stride);

/* s[j] = sum over all taps * k4 of the packed weights of column j, for j < n: what an input zero point
 * zx contributes to a column is zx * s[j] (padding rows hold zx too, so the correction holds at every
 * pixel); init[j] = bias[j] - zx * s[j], wrapping as the sums do. */
void qr_iconv_colsums(int32_t *s, const int8_t *w, int64_t taps, int64_t k4, int64_t n);

/* A kernel of qr_iconv_fn's contract specialized to one shape (its taps, k4 and n are then the only
 * ones it may be called with), or NULL when there is none. The runtime cannot see the compiler that
 * makes them: the API registers one (iconv-jit=1, api/). */
typedef qr_iconv_fn (*qr_iconv_specializer)(int64_t taps, int64_t k4, int64_t n);
/* Registers f (NULL unregisters); kernels handed out before stay the specializer's to free. */
void qr_iconv_set_specializer(qr_iconv_specializer f);

/* A specialized kernel with the recipe's epilogue fused (phase 2 of the item 5): the same
 * contract, but it writes y's bytes, y[i * y_rs + j] for rows i < m and columns j in [j0, j1),
 * from the accumulator by the epilogue's program (compiler/vecmap.h), whose tables are tabs[t]
 * (n int32 lanes each, indexed by column) -- no int32 block in memory between. A program that
 * reads the skip tensor (skip.u8, skip.i8: a residual Add joined to the epilogue) reads its bytes
 * s[i * s_rs + j] of the same rows and columns; others ignore s and s_rs (NULL, 0). */
typedef void (*qr_iconv_ep_fn)(uint8_t *y, int64_t y_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                               const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n,
                               const int32_t *const *tabs, const uint8_t *s, int64_t s_rs);
typedef qr_iconv_ep_fn (*qr_iconv_ep_specializer)(int64_t taps, int64_t k4, int64_t n, const char *prog);
void qr_iconv_set_ep_specializer(qr_iconv_ep_specializer f);
/* The registered one's kernel for this shape and program, NULL when there is none. */
qr_iconv_ep_fn qr_iconv_specialized_ep(int64_t taps, int64_t k4, int64_t n, const char *prog);
/* The recipe's epilogue alone, by its program (compiler/vecmap.h), over a channels-last block:
 * y[r * y_rs + j] = the program's bytes of acc[r * acc_rs + j] for rows r < rows and columns
 * j < cols, its tables read at column c0 + j (tabs[t]: one int32 lane per output channel). What a
 * convolution runs instead of the channels-last kernel (qr_acc_epilogue.run_rows) when its
 * epilogue has a vector form and the API registered a compiler for them: 16 lanes an
 * instruction, where GCC's vectorizer made 8-lane code with 64-bit tables. */
typedef void (*qr_rows_ep_fn)(uint8_t *y, int64_t y_rs, const int32_t *acc, int64_t acc_rs, int64_t rows,
                              int64_t cols, int64_t c0, const int32_t *const *tabs);
typedef qr_rows_ep_fn (*qr_rows_ep_specializer)(const char *prog);
void qr_rows_ep_set_specializer(qr_rows_ep_specializer f);
/* The registered one's function for prog; NULL when there is none or the kernels are forced to
 * an ISA other than AVX-512 VNNI (qr_options.igemm: --kernels portable, avx2, avxvnni). */
qr_rows_ep_fn qr_rows_ep_specialized(const char *prog);
/* The registered specializer's kernel for this shape, NULL when none is registered or it has none:
 * asked once per layer, when its weights are packed. */
qr_iconv_fn qr_iconv_specialized(int64_t taps, int64_t k4, int64_t n);
/* Whether NHWC convolutions get such kernels here: a specializer is registered (iconv-jit not 0),
 * the kernels are not forced to another ISA, and the CPU has AVX-512 VNNI (quantizer/layout.c
 * then runs every convolution channels last). */
int qr_iconv_specializing(void);

#endif
