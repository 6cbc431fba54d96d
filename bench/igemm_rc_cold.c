/* GMAC/s of the AVX-512 VNNI rc kernel (qr_igemm_rc_fn, igemm.h; AMD's path, amx=0), on B packed in
 * rows and in panels (qr_igemm_u8s8_rc_panels_avx512vnni, a constant B's packing), on bench bert's
 * shapes (d 256, feed-forward 1024, 128 tokens a sample) at batch 1 and 64, called as quant.c's
 * mmq_rows_ep calls it: tasks of 64 rows, each into one buffer of 64 rows (the thread's slot), the
 * static recipe's column starts. Two ways: "hot", the same B on every call (in L2 after the first,
 * as in a product of many tasks), and "cold", 4 MB of other bytes written before each product (not
 * timed), so B, A and the buffer come from L3, as bert's weights (3.2 MB) do at batch 1 in the
 * model, and B one of two copies in turns (a product's B is not the previous product's). The kernel's time only; one thread; the best of 5 rounds of at least 0.1 s. Not part of
 * `make bench`. Build and run (after `make`):
 *   cc -O2 -Iruntime bench/igemm_rc_cold.c build/libqrl.a -lpthread -lm -o build/igemm_rc_cold &&
 *   bash tools/freeze.sh build/igemm_rc_cold */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/igemm.h"

#define TRASH (4 << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned lcg(unsigned *x)
{
    return *x = *x * 1103515245u + 12345u;
}

int main(void)
{
    qr_igemm_rc_fn fn = qr_igemm_u8s8_rc_isa("avx512vnni");
    if (!fn) {
        printf("no AVX-512 VNNI here\n");
        return 0;
    }
    /* M x K x N: in_proj, out_proj, linear1, linear2 at batch 1 and 64; attention's Q K^T and P V
     * of one head */
    const int64_t shapes[][3] = {{128, 256, 768},  {128, 256, 256},  {128, 256, 1024},  {128, 1024, 256},
                                 {8192, 256, 768}, {8192, 256, 256}, {8192, 256, 1024}, {8192, 1024, 256},
                                 {128, 64, 128},   {128, 128, 64}};
    char *trash = malloc(TRASH);
    if (!trash)
        return 1;
    unsigned long long check = 0;
    printf("GMAC/s %-9s %6s %10s %10s %10s %10s\n", "M x K x N", "pitch", "hot rows", "hot panels", "cold rows",
           "cold panels");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], k4 = qr_igemm_k4(shapes[s][1]), n = shapes[s][2];
        int64_t pitch = qr_igemm_rc_pitch(fn, k4, n);
        int8_t *a = malloc((size_t)(m * k4));
        int64_t rows_bytes = k4 * pitch, pan_bytes = k4 * qr_igemm_n32(n);
        uint8_t *b2 = malloc((size_t)(2 * (rows_bytes + pan_bytes)));
        int32_t *init = malloc(sizeof(int32_t) * (size_t)m), *cinit = malloc(sizeof(int32_t) * (size_t)n),
                *buf = malloc(sizeof(int32_t) * (size_t)(64 * n));
        if (!a || !b2 || !init || !cinit || !buf)
            return 1;
        unsigned x = 7;
        for (int64_t i = 0; i < m * k4; i++)
            a[i] = (int8_t)(lcg(&x) >> 16);
        /* [rows][panels][rows][panels]: two copies of each packing */
        for (int64_t i = 0; i < rows_bytes; i++)
            b2[i] = b2[rows_bytes + pan_bytes + i] = (uint8_t)(lcg(&x) >> 16);
        qr_igemm_rc_panels(b2 + rows_bytes, b2, k4, n, pitch);
        memcpy(b2 + 2 * rows_bytes + pan_bytes, b2 + rows_bytes, (size_t)pan_bytes);
        for (int64_t i = 0; i < m; i++)
            init[i] = (int32_t)lcg(&x);
        for (int64_t j = 0; j < n; j++)
            cinit[j] = (int32_t)lcg(&x);
        double gmacs[4];
        for (int mode = 0; mode < 4; mode++) {
            int cold = mode / 2, panels = mode % 2;
            qr_igemm_rc_fn f = panels ? qr_igemm_u8s8_rc_panels_avx512vnni : fn;
            double best = 1e30;
            for (int round = 0; round < 5; round++) {
                int calls = 0;
                double t0 = now(), tk = 0;
                do {
                    if (cold) {
                        memset(trash, calls, TRASH);
                        check += (unsigned char)trash[calls % TRASH];
                    }
                    const uint8_t *b = b2 + (cold ? calls % 2 : 0) * (rows_bytes + pan_bytes) + panels * rows_bytes;
                    double t1 = now();
                    for (int64_t r = 0; r < m; r += 64) {
                        int64_t r1 = r + 64 < m ? r + 64 : m;
                        f(buf, n, a + r * k4, init + r, cinit, NULL, NULL, 0, r1 - r, b, k4, n, pitch);
                        check += (uint32_t)buf[(r1 - r - 1) * n + n - 1];
                    }
                    tk += now() - t1;
                    calls++;
                } while (now() - t0 < 0.1);
                if (tk / calls < best)
                    best = tk / calls;
            }
            gmacs[mode] = (double)m * (double)shapes[s][1] * (double)n / best * 1e-9;
        }
        printf("%5lldx%4lldx%5lld %6lld %10.1f %10.1f %10.1f %10.1f\n", (long long)m, (long long)shapes[s][1],
               (long long)n, (long long)pitch, gmacs[0], gmacs[1], gmacs[2], gmacs[3]);
        free(a), free(b2), free(init), free(cinit), free(buf);
    }
    printf("(check %llu)\n", check);
    free(trash);
    return 0;
}
