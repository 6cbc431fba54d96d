/* Which tensor parameters a kernel touches the elements of: reads (or
 * writes) their values, as against using them for their type and shape alone
 * (t.numel, t.rank, t.dim(k), broadcast_index(t, u, i)'s first two
 * arguments). The runtime may then hand a kernel a tensor not all of whose
 * elements are made yet in a parameter it does not touch: the stdlib's
 * qlinear takes the convolution's input x for its type T alone, so a chain
 * of convolutions run band by band (runtime/exec.c) may give the epilogue an
 * input whose later rows are still to come (qr_fn_desc.param_reads,
 * registered through set_param_reads).
 *
 * The answer is conservative: a bit is clear only where the kernel's checked
 * code and the fns it calls (walked with what their parameters are bound to)
 * name the parameter in shape-only places; anything else, or a walk past its
 * bounds, sets it. */
#ifndef QC_READS_H
#define QC_READS_H

#include <stdint.h>

#include "check.h"

/* Bit i set: kernel item k's parameter i is a tensor whose elements it may
 * read or write; clear for a tensor it uses for its type and shape alone,
 * and for every parameter that is not a tensor. Every tensor's bit set when
 * the walk gives up; every bit when k is no kernel of a unit checked without
 * errors (a generic's instance, not the generic). */
uint64_t qc_param_reads(const qc_sym *k);

/* What the fill of channels-last kernel k's tables reads (compiler/elementwise.h: every statement
 * of its body but the last, the row walk; the runtime runs them with ew.fill 1 and no rows), for
 * the runtime to keep the tables from one call to the next while those values stay the same
 * (qr_fn_desc.fill_uses, set_fill_reads): *uses, bit i for each parameter it names at all (a
 * scalar's or an array's value, a tensor's shape); *elems, the tensors whose elements it reads.
 * The tables it writes are in neither. 0 (both 0) when k is no channels-last kernel, when its fill
 * writes anything but its tables, or when the walk gives up: its tables are then made on every
 * call. */
int qc_fill_reads(const qc_sym *k, uint64_t *uses, uint64_t *elems);

#endif
