/* Which f32_rows.h table runs: the CPU's, or none when QRL_F32_ROWS=portable. */
#include "f32_rows.h"

#include <stdlib.h>
#include <string.h>

const qr_f32_rows *qr_f32_rows_best(void)
{
    const char *force = getenv("QRL_F32_ROWS");
    if (force && !strcmp(force, "portable"))
        return NULL;
    return qr_f32_rows_avx512();
}
