/* Which kernels are pointwise: with all their tensor operands of one shape,
 * element i of every tensor they write depends only on element i of each
 * tensor they read and on their other (scalar or array) parameters, so any
 * permutation of the elements (NCHW to NHWC) commutes with the kernel. The
 * runtime may then run such a kernel on tensors in another layout
 * (qr_fn_desc.is_pointwise, registered through set_pointwise).
 *
 * The answer is a conservative proof from the kernel's checked code and the
 * fns it calls (docs/language.md, "Pointwise kernels"; the rules are listed
 * in pointwise.c): 1 means proven, 0 means not proven, never "not
 * pointwise for sure". */
#ifndef QC_POINTWISE_H
#define QC_POINTWISE_H

#include "check.h"

/* Whether kernel item k (of a unit checked without errors; a generic's
 * instance, not the generic) is proven pointwise. */
int qc_pointwise(const qc_sym *k);

#endif
