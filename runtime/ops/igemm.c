/* u8 x s8 integer GEMM: the portable reference and the per-ISA table; see igemm.h. */
#include "igemm.h"

#include <stdlib.h>
#include <string.h>

void qr_igemm_u8s8_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                              const uint8_t *b, int64_t k4, int64_t n);

void qr_igemm_u8s8_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                       const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n);
    for (int64_t m = m0; m < m1; m++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t s = (uint32_t)init[m];
            for (int64_t q = 0; q < k4; q++)
                s += (uint32_t)((int32_t)a[m * k4 + q] * (int32_t)b[((q >> 2) * n16 + j) * 4 + (q & 3)]);
            c[m * c_rs + j] = (int32_t)s;
        }
}

qr_igemm_fn qr_igemm_u8s8(void)
{
    const char *force = getenv("QRL_IGEMM");
    if (force && !strcmp(force, "portable"))
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        return qr_igemm_u8s8_avx512vnni;
    return NULL;
}
