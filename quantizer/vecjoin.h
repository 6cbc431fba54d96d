/* A convolution's epilogue program and its second stage's joined into one program (the grammar of
 * compiler/vecmap.h), so that the fused convolution kernel computes the residual Add in its
 * registers: the stage's `in` of the convolution's y becomes the epilogue's last value (y's
 * element, in i32 lanes), its `in` of the other tensor the skip tensor's element (skip.u8,
 * skip.i8), each of its parameters a table after the epilogue's. Text only: every operation is
 * the two programs', which the compiler took from the recipe's kernels. */
#ifndef QI_VECJOIN_H
#define QI_VECJOIN_H

#include <stddef.h>
#include <stdint.h>

/* The most parameters a stage's program may read as tables. */
#define QI_JOIN_MAX_PARAMS 16

typedef struct qi_join_param {
    int param; /* the stage kernel's parameter */
    char kind; /* 'i': an i32 (pari), 'f': an f32 (parf), 'd': the f32 of an f64 (pard) */
} qi_join_param;

/* Writes into out (n bytes) the epilogue program ep followed by stage program st, st's values
 * renumbered: `in.T y_param` is ep's last value, `in.T skip_param` reads the skip tensor (its
 * type T), and parameter reads are tables tab0, tab0 + 1, ... (tab0: the epilogue's table count),
 * listed in params (*nparams of them, each once). 0 when st reads anything else, a parameter past
 * QI_JOIN_MAX_PARAMS, or out is too small. */
int qi_vec_join(const char *ep, const char *st, int y_param, int skip_param, int tab0, char *out, size_t n,
                qi_join_param *params, int *nparams);

/* The 32 bits table entry of a parameter of this kind holds, from its value (as the kernel's C
 * type: int32_t, float or double at v). */
uint32_t qi_join_bits(char kind, const void *v);

#endif
