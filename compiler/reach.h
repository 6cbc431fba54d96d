/* What of a checked unit gets compiled. A unit with a recipe needs only what
 * its recipes reach when a model is quantized: the recipes (the root file's,
 * when it has one: an imported file's recipes are bases), the patterns and
 * affine rules they use (every one, without a use list), the calibrators
 * their settings name, the kernels those patterns lower to, and every
 * function and constant that code calls or reads. The rest was checked, so
 * it has no error left for compiling to find; it is not compiled. A unit
 * without a recipe (a library file checked alone) is compiled whole. */
#ifndef QC_REACH_H
#define QC_REACH_H

#include "unit.h"

/* Sets emit[i] (u->nitems bytes, zeroed by the caller) for each item to
 * compile. Returns 1 when u has a recipe (emit is then its reach), 0 when
 * every item is marked. */
int qc_reach(const qc_unit *u, unsigned char *emit);

/* Sets mark[k] for every function, kernel, calibrator and constant the code
 * of item idx names, directly or through the ones it marks. */
void qc_reach_calls(const qc_unit *u, int idx, unsigned char *mark);

/* Whether s is a stdlib policy hook: a fn named as a hook setting is (bias_qparams, narrow_range,
 * pattern_priority; recipe.h's QR_SK_HOOK), which the quantizer calls by name, so with a recipe it
 * is compiled and registered like the code a recipe reaches. */
int qc_reach_is_hook(const struct qc_sym *s);

#endif
