/* Which f32_rows.h table runs: the CPU's, or none when qr_options asks for the portable ones. */
#include "f32_rows.h"

#include "options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const qr_f32_rows *qr_f32_rows_best(void)
{
    if (qr_options_get()->f32_rows_portable)
        return NULL;
    return qr_f32_rows_avx512();
}

void qr_gelu_f32(const qr_f32_rows *table, const qr_gelu_consts *g, const float *x, float *y, int64_t n)
{
    if (table) {
        table->gelu(x, y, n, g);
        return;
    }
    const float *c = g->c;
    if (g->tanh_form)
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], u = v + c[0] * (v * (v * v));
            y[i] = c[3] * (v * (c[2] + (float)tanh((double)(c[1] * u))));
        }
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = ((float)erf((double)(x[i] / c[0])) + c[1]) * x[i] * c[2];
}
