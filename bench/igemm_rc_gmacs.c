/* GMAC/s of the integer matrix products' kernels (qr_igemm_rc_fn, igemm.h) on bert's shapes: AMX-INT8
 * (runtime/ops/igemm_amx.c) against AVX-512 VNNI, called as MatMulInteger calls them (quant.c
 * mmq_rows: tasks of 64 rows), with the dynamic recipes' per-row zero points (rz) or the static
 * ones' column starts. One thread; the best of 7 rounds, each at least 0.2 s of calls. The sums of
 * the two kernels are compared (the same bits). Not part of `make bench`. Build and run (after `make`):
 *   cc -O2 -Iruntime bench/igemm_rc_gmacs.c build/libqrl.a -lpthread -lm -o build/igemm_rc_gmacs &&
 *   bash tools/freeze.sh build/igemm_rc_gmacs */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/igemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double run(qr_igemm_rc_fn fn, int32_t *c, const int8_t *a, const int32_t *init, const int32_t *cinit,
                  const int32_t *rz, const int32_t *csum, int64_t m, const uint8_t *b, int64_t k4, int64_t n,
                  int64_t pitch)
{
    double best = 1e30;
    for (int round = 0; round < 7; round++) {
        int calls = 0;
        double t0 = now(), t;
        do {
            for (int64_t r = 0; r < m; r += 64)
                fn(c, n, a, init, cinit, rz, csum, r, r + 64 < m ? r + 64 : m, b, k4, n, pitch);
            calls++;
        } while ((t = now() - t0) < 0.2);
        if (t / calls < best)
            best = t / calls;
    }
    return best;
}

int main(void)
{
    qr_igemm_rc_fn amx = qr_igemm_u8s8_rc_isa("amx"), vnni = qr_igemm_u8s8_rc_isa("avx512vnni");
    if (!amx || !vnni) {
        printf("no AMX-INT8 or no AVX-512 VNNI here\n");
        return 0;
    }
    /* M x K x N: bert at batch 8 (1024 tokens): in_proj, out_proj, linear1, linear2; attention's
     * Q K^T and P V per head (128 x 64 x 128, 128 x 128 x 64); batch 1 (128 tokens) */
    const int64_t shapes[][3] = {{1024, 256, 768}, {1024, 256, 256}, {1024, 256, 1024}, {1024, 1024, 256},
                                 {128, 64, 128},   {128, 128, 64},   {128, 256, 1024},  {128, 1024, 256}};
    printf("%-18s %4s %12s %12s %7s\n", "M x K x N", "rz", "VNNI GMAC/s", "AMX GMAC/s", "AMX/VNNI");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], k4 = qr_igemm_k4(shapes[s][1]), n = shapes[s][2];
        int64_t pitch = qr_igemm_rc_pitch(vnni, k4, n);
        int8_t *a = malloc((size_t)(m * k4));
        uint8_t *b = malloc((size_t)(k4 * pitch));
        int32_t *init = malloc(sizeof(int32_t) * (size_t)m), *rz = malloc(sizeof(int32_t) * (size_t)m),
                *cinit = malloc(sizeof(int32_t) * (size_t)n), *csum = malloc(sizeof(int32_t) * (size_t)n),
                *c1 = malloc(sizeof(int32_t) * (size_t)(m * n)), *c2 = malloc(sizeof(int32_t) * (size_t)(m * n));
        if (!a || !b || !init || !rz || !cinit || !csum || !c1 || !c2)
            return 1;
        unsigned x = 7;
        for (int64_t i = 0; i < m * k4; i++)
            a[i] = (int8_t)((x = x * 1103515245u + 12345u) >> 16);
        for (int64_t i = 0; i < k4 * pitch; i++)
            b[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
        for (int64_t i = 0; i < m; i++)
            init[i] = (int32_t)(x = x * 1103515245u + 12345u), rz[i] = (int32_t)(x >> 24);
        for (int64_t j = 0; j < n; j++)
            cinit[j] = (int32_t)(x = x * 1103515245u + 12345u), csum[j] = (int32_t)(x >> 12);
        for (int per_row = 1; per_row >= 0; per_row--) {
            const int32_t *ci = per_row ? NULL : cinit, *r = per_row ? rz : NULL;
            double tv = run(vnni, c1, a, init, ci, r, csum, m, b, k4, n, pitch);
            double ta = run(amx, c2, a, init, ci, r, csum, m, b, k4, n, pitch);
            double macs = (double)m * (double)shapes[s][1] * (double)n;
            printf("%5lldx%4lldx%5lld %4s %12.1f %12.1f %7.2f%s\n", (long long)m, (long long)shapes[s][1],
                   (long long)n, per_row ? "yes" : "no", macs / tv * 1e-9, macs / ta * 1e-9, tv / ta,
                   memcmp(c1, c2, sizeof(int32_t) * (size_t)(m * n)) ? "  SUMS DIFFER" : "");
        }
        free(a), free(b), free(init), free(rz), free(cinit), free(csum), free(c1), free(c2);
    }
    return 0;
}
