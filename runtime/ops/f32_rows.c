/* Which f32_rows.h table runs: the CPU's, or none when qr_options asks for the portable ones. */
#include "f32_rows.h"

#include "options.h"

#include <stdlib.h>
#include <string.h>

const qr_f32_rows *qr_f32_rows_best(void)
{
    if (qr_options_get()->f32_rows_portable)
        return NULL;
    return qr_f32_rows_avx512();
}
