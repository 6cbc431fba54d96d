/* The vector form of an element-wise epilogue's value (docs/language.md,
 * "Element-wise epilogues"): when every operation of the value, with the fns
 * it calls inlined, maps to one or a few 16-lane AVX-512 instructions on i32
 * or f32 lanes, the value as a straight-line program the shape-specialized
 * convolution kernels (compiler/iconv_jit.c) run on their accumulator
 * registers, so no int32 block goes to memory between the dot products and
 * y. The program is text, registered with the channels-last kernel
 * (qr_fn_desc.vector_epilogue) and so kept in the module's cached object.
 *
 * Grammar: instructions separated by ';', each an opcode and operands
 * separated by spaces; instruction i's result is value i, and an operand is
 * the number of an earlier value:
 *   acc                the accumulator (i32)
 *   tabi T | tabf T    table T of the channels-last kernel (ew.tab<T>), i32 or f32 lanes
 *   consti X | constf X   the 32 bits X (hex) in every lane
 *   addi subi muli mini maxi A B  |  negi A  |  clampi A LO HI     i32, wrapping
 *   addf subf mulf divf minf maxf A B  |  negf absf rint A  |  clampf A LO HI   f32
 *   cvtf A             f32 of an i32 (round to nearest even)
 *   satf.u8 satf.i8 A  an f32 to the type: NaN 0, clamped, truncated
 *   sati.u8 sati.i8 A  an i32 to the type, clamped
 * The last instruction is y's element, a satf/sati of y's type. Every
 * operation is the scalar code's, bit for bit (jit_expr.c): min and max
 * choose as `a < b ? a : b` then pass a NaN b's a, clamp as min(max) in
 * that order, f32 arithmetic is never contracted into fused multiply-adds. */
#ifndef QC_VECMAP_H
#define QC_VECMAP_H

#include <stddef.h>

#include "check.h"

/* The most instructions a program has (the generator's bound too). */
#define QC_VEC_MAX_INSNS 96

/* Writes k's program into buf (n bytes) and returns 1 when channels-last kernel k (an item
 * named "<kernel>.nhwc", of a unit checked without errors) has a vector form; 0 when an
 * operation has none or the program does not fit. */
int qc_vecmap(const qc_sym *k, char *buf, size_t n);

/* The vector form of a pointwise kernel's element (qr_fn_desc.vector_epilogue of a kernel
 * registered pointwise: a second stage, the residual Add after a convolution, fused into the
 * convolution's kernel): for a kernel whose body is layer lets, then
 * `for i in 0 .. y.numel { y[i] = value }` (alone, or in an `if` of `x.numel == y.numel` tests
 * that returns after it: the form where every tensor has y's shape, the only one a stage runs).
 * The program has the grammar above without acc and tables, and these operands:
 *   in.u8 P | in.i8 P   element i of the kernel's 8-bit tensor parameter P (in i32 lanes)
 *   pari P | parf P     the kernel's i32 or f32 scalar parameter P in every lane
 *   pard P              the f32 of its f64 parameter P (as C converts)
 * A byte value is its i32 where one is read. The runtime makes it a fused kernel's part by
 * renumbering (quantizer/vecjoin.h): one `in` the epilogue's y, the other the skip tensor's
 * bytes (skip.u8, skip.i8), each parameter a table of its bits. 1 when k has such a form. */
int qc_vecmap_stage(const qc_sym *k, char *buf, size_t n);

#endif
