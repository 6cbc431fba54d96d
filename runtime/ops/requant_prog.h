/* The per-channel requantization an epilogue's vector program (compiler/vecmap.h) reduces to,
 * for kernels that requantize their sums while those are still in registers (the AVX-512 VNNI
 * depthwise, nhwc.h's qr_nhwc_dw_requant).
 *
 * A program of the recipes' qlinear shape,
 *   y = satf(minf(maxf(addf(rint(mulf(cvtf(addi(acc, B)), M)), Z), LO), HI))
 * (the addi optional, each of minf, maxf, addf, mulf and addi in either operand order), whose
 * B, M, Z, LO and HI read no accumulator and are each a table, a constant, or cvtf of an i32
 * table or constant, is matched (qr_rqp_match). Its channels' values are then reduced
 * (qr_rqp_fill) to what a kernel runs: for a channel whose M is finite, Z an integer of at most
 * 2^23 and LO, HI numbers, with A = clamp(min(LO, HI), lo_T, hi_T), B' = clamp(HI, lo_T, hi_T)
 * integers (T y's type), y's bytes are
 *   round_even(clamp(f32(acc + B) * M, A - Z, B' - Z)) + Z
 * exactly (the same reduction as the JIT's fast tail, compiler/iconv_jit.c emit_tail_setup),
 * an integer inside T's range, so its low byte is y's byte. The policy (scales, zero points,
 * clamps, rounding) stays the recipe's: this only evaluates its program. */
#ifndef QR_REQUANT_PROG_H
#define QR_REQUANT_PROG_H

#include <stdint.h>

/* Where one of the program's column values comes from. */
typedef struct qr_rqp_leaf {
    int tab;      /* the table read, or -1: the constant bits */
    uint32_t bits; /* the constant's bits */
    int is_f32;   /* the value is f32 (tabf, constf), else i32 (tabi, consti) */
    int cvt;      /* cvtf of the i32 value */
} qr_rqp_leaf;

typedef struct qr_rqp {
    int has_bias, i8;
    qr_rqp_leaf bias, m, z, lo, hi;
} qr_rqp;

/* 1 and *out when prog (vecmap.h's text) has the shape above; 0 when it has not, or does not parse. */
int qr_rqp_match(const char *prog, qr_rqp *out);

/* The values of channels [0, n) from tables tabs (column c reads tabs[t][c]): bias[c] (0 without
 * the addi), m[c] = M, lo[c] = A - Z, hi[c] = B' - Z, z[c] = Z as i32. 1 when every channel
 * passes the checks above; 0 (the arrays then unspecified) when one does not. Needs AVX-512F:
 * the caller checks the CPU. */
int qr_rqp_fill(const qr_rqp *p, const int32_t *const *tabs, int64_t n, int32_t *bias, float *m, float *lo, float *hi,
                int32_t *z);

#endif
