/* The f32 FMA GEMM (runtime/ops/sgemm*.c): every ISA's kernel this CPU runs, under the blocked
 * driver, against a double-precision product (|err| <= K * 2^-23 * sum |a||b| + bias rounding,
 * an FMA chain's bound) and bit for bit against a plain loop of fmaf in k order (the contract:
 * the bits do not depend on the tiling, the ISA or the threads), on ragged M, N, K (1, 7, 31, 33,
 * 250, past the K block of 256), both signs, A in place and transposed (packed), with and without
 * bias, and on 1 and 2 threads. On a CPU without a kernel the comparisons are skipped and say so. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/sgemm.h"
#include "parallel.h"

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Uniform in (-2, 2), every bit of the mantissa used. */
static float rnd_f(unsigned *s) { return ((float)(rnd(s) & 0xffffff) / (float)(1 << 23) - 1.0f) * 2.0f; }

typedef struct shape {
    int64_t m, n, k;
} shape;

static const shape shapes[] = {
    {1, 1, 1},     {1, 7, 31},    {7, 1, 33},    {13, 33, 7},    {12, 32, 256}, {25, 65, 257},
    {31, 250, 33}, {49, 97, 600}, {100, 513, 9}, {250, 31, 250}, {3, 1100, 40}, {64, 70, 0}, {20, 33, 1024},
};

/* c = a * b (+ bias) through qr_sgemm with kernel kn on pool, A transposed in memory when ta, B
 * packed once beforehand (a constant weight: job.b_packed) when packed; checks it against fmaf in
 * k order (bits) and double (bound). */
static void check_shape_b(const qr_sgemm_kernel *kn, qr_pool *pool, shape s, int ta, int with_bias, unsigned seed,
                          int packed)
{
    int64_t m = s.m, n = s.n, k = s.k;
    float *a = malloc(sizeof(float) * (size_t)(m * k + 1)), *b = malloc(sizeof(float) * (size_t)(k * n + 1));
    float *bias = malloc(sizeof(float) * (size_t)m), *c = malloc(sizeof(float) * (size_t)(m * n));
    int threads = pool ? qr_pool_threads(pool) : 1;
    float *work = malloc(sizeof(float) * (size_t)(qr_sgemm_work(kn) * threads));
    float *pk = malloc(sizeof(float) * (size_t)(qr_sgemm_packed_size(kn, k, n) + 1));
    cr_assert(a && b && bias && c && work && pk);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = rnd_f(&seed);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = rnd_f(&seed);
    for (int64_t i = 0; i < m; i++)
        bias[i] = 8 * rnd_f(&seed);
    for (int64_t i = 0; i < m * n; i++)
        c[i] = NAN; /* every output is written */
    /* a(r, q) at a[r*k + q], or a[q*m + r] transposed */
    qr_sgemm_job j = {.a = a,
                      .b = b,
                      .bias = with_bias ? bias : NULL,
                      .c = c,
                      .a_rs = ta ? 1 : k,
                      .a_cs = ta ? m : 1,
                      .ldb = n,
                      .ldc = n,
                      .m = m,
                      .n = n,
                      .k = k};
    if (packed) {
        qr_sgemm_pack_b(kn, b, n, 1, k, n, pk);
        j.b_packed = pk;
    }
    qr_sgemm(pool, kn, &j, work);
    for (int64_t r = 0; r < m; r++)
        for (int64_t x = 0; x < n; x++) {
            float f = 0;
            double d = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
                float av = a[r * j.a_rs + q * j.a_cs], bv = b[q * n + x];
                f = fmaf(av, bv, f);
                d += (double)av * bv;
                mag += fabs((double)av * bv);
            }
            if (with_bias) {
                f += bias[r];
                d += bias[r];
                mag += fabs(f) + fabs((double)bias[r]);
            }
            float got = c[r * n + x];
            double tol = (double)(k + 1) * ldexp(1.0, -23) * mag;
            cr_assert(fabs(got - d) <= tol,
                      "%s m=%lld n=%lld k=%lld ta=%d packed=%d (%lld, %lld): %.9g vs %.17g (tol %.3g)", kn->isa,
                      (long long)m, (long long)n, (long long)k, ta, packed, (long long)r, (long long)x, got, d, tol);
            cr_assert(memcmp(&got, &f, sizeof f) == 0,
                      "%s m=%lld n=%lld k=%lld ta=%d packed=%d (%lld, %lld): %.9g, fmaf chain %.9g", kn->isa,
                      (long long)m, (long long)n, (long long)k, ta, packed, (long long)r, (long long)x, got, f);
        }
    free(a);
    free(b);
    free(bias);
    free(c);
    free(work);
    free(pk);
}

static void check_shape(const qr_sgemm_kernel *kn, qr_pool *pool, shape s, int ta, int with_bias, unsigned seed)
{
    check_shape_b(kn, pool, s, ta, with_bias, seed, 0);
}

static const char *const isas[] = {"avx512", "avx2", "ref"};

/* B packed once (a MatMul's constant weight, stop 47): the tiles read its panels at fixed
 * strides (the AVX-512 tile without a table of row offsets, prefetching the panel ahead; with A
 * transposed, A's packed tile at constant offsets too), on ragged M (past the few-rows kernel and
 * the 12-row tiles), ragged N (panels of 1..31 real columns), K past the 256 of a block (the sums
 * through c between blocks; K 1024 and 2048: A's rows 4 KB apart, copied apart by the driver; 700 and
 * 515 rows: C's rows over 256 KB, split in row blocks, stop 53), both
 * signs, with and without bias, A in place and transposed, 1 and 2 threads: the bits of the fmaf
 * chain, as B in place. */
Test(sgemm, packed_b_matches_fma_chain_on_ragged_shapes)
{
    static const shape ps[] = {{4, 1, 1},     {5, 33, 7},     {13, 31, 257},  {12, 32, 256}, {25, 65, 300},
                               {49, 97, 600}, {128, 256, 64}, {100, 513, 9},  {250, 31, 250}, {64, 70, 0},
                               {30, 65, 1024}, {13, 40, 2048}, {700, 100, 300}, {515, 256, 520}};
    qr_pool *pool = qr_pool_new(2);
    cr_assert(pool);
    int tested = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn) {
            cr_log_info("sgemm: this CPU has no %s kernel, skipped", isas[i]);
            continue;
        }
        tested++;
        unsigned seed = 29;
        for (size_t s = 0; s < sizeof ps / sizeof ps[0]; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int t = 0; t < 2; t++)
                    check_shape_b(kn, t ? pool : NULL, ps[s], ta, (int)(s + ta) % 2, seed += 101, 1);
    }
    cr_assert(tested >= 1);
    qr_pool_free(pool);
}

Test(sgemm, kernels_match_fma_chain_and_double_on_ragged_shapes)
{
    int tested = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn) {
            cr_log_info("sgemm: this CPU has no %s kernel, skipped", isas[i]);
            continue;
        }
        tested++;
        unsigned seed = 7;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int ta = 0; ta < 2; ta++)
                check_shape(kn, NULL, shapes[s], ta, (int)(s + ta) % 2, seed += 101);
    }
    cr_assert(tested >= 1); /* the reference runs everywhere */
}

/* Two threads split rows and column blocks differently from one; each output is the same chain,
 * so the bits are too (check_shape compares both with the same fmaf loop; here also c itself). */
Test(sgemm, one_and_two_threads_give_identical_bits)
{
    qr_pool *pool = qr_pool_new(2);
    cr_assert(pool);
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    if (!kn) {
        cr_log_info("sgemm: no FMA kernel on this CPU, 2-thread check on the reference");
        kn = qr_sgemm_isa("ref");
    }
    static const shape big[] = {{250, 1100, 300}, {33, 2000, 17}, {600, 49, 520}, {2, 3000, 300}};
    for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
        int64_t m = big[s].m, n = big[s].n, k = big[s].k;
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
        float *c1 = malloc(sizeof(float) * (size_t)(m * n)), *c2 = malloc(sizeof(float) * (size_t)(m * n));
        float *work = malloc(sizeof(float) * (size_t)(qr_sgemm_work(kn) * 2));
        cr_assert(a && b && c1 && c2 && work);
        unsigned seed = 3 + (unsigned)s;
        for (int64_t i = 0; i < m * k; i++)
            a[i] = rnd_f(&seed);
        for (int64_t i = 0; i < k * n; i++)
            b[i] = rnd_f(&seed);
        qr_sgemm_job j = {.a = a, .b = b, .c = c1, .a_rs = k, .a_cs = 1, .ldb = n, .ldc = n, .m = m, .n = n, .k = k};
        qr_sgemm(NULL, kn, &j, work);
        j.c = c2;
        qr_sgemm(pool, kn, &j, work);
        cr_assert(memcmp(c1, c2, sizeof(float) * (size_t)(m * n)) == 0, "%s %lldx%lldx%lld: 1 and 2 threads differ",
                  kn->isa, (long long)m, (long long)n, (long long)k);
        free(a);
        free(b);
        free(c1);
        free(c2);
        free(work);
    }
    check_shape(kn, pool, (shape){250, 1100, 300}, 0, 1, 11);
    check_shape(kn, pool, (shape){97, 70, 513}, 1, 0, 12);
    check_shape(kn, pool, (shape){3, 1000, 600}, 1, 1, 13);
    qr_pool_free(pool);
}

/* A product of one row with B packed (a Gemm's constant weight at batch 1: kn->row, every K in
 * one register chain, four panels side by side): against fmaf in k order (bits) and double
 * (bound) on ragged N and K (a ragged last group of panels and a ragged last panel, K past the
 * tiles' block), both signs, with a bias; with a fused activation and a column bias (a Gemm's C),
 * the bits of the tiles' path (the same kernel without its row function); 2 threads the same. */
Test(sgemm, one_row_on_packed_b_is_the_fma_chain)
{
    static const int64_t ns[] = {1, 7, 31, 33, 100, 129, 1000}, ks[] = {1, 33, 257, 1280};
    qr_pool *pool = qr_pool_new(2);
    cr_assert(pool);
    qr_act relu = {.relu = 1}, clip = {.relu = 0, .lo = -0.5f, .hi = 0.7f};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn)
            continue;
        if (!kn->row)
            cr_log_info("sgemm: %s has no row function (the tiles run)", kn->isa);
        qr_sgemm_kernel tiles_only = *kn;
        tiles_only.row = NULL;
        unsigned seed = 5;
        for (size_t a_ = 0; a_ < sizeof ns / sizeof ns[0]; a_++)
            for (size_t b_ = 0; b_ < sizeof ks / sizeof ks[0]; b_++) {
                int64_t n = ns[a_], k = ks[b_];
                float *a = malloc(sizeof(float) * (size_t)k), *b = malloc(sizeof(float) * (size_t)(k * n));
                float *pk = malloc(sizeof(float) * (size_t)qr_sgemm_packed_size(kn, k, n));
                float *cb = malloc(sizeof(float) * (size_t)n), *c = malloc(sizeof(float) * (size_t)n);
                float *c2 = malloc(sizeof(float) * (size_t)n), *c3 = malloc(sizeof(float) * (size_t)n);
                float *work = malloc(sizeof(float) * (size_t)(qr_sgemm_work(kn) * 2));
                cr_assert(a && b && pk && cb && c && c2 && c3 && work);
                for (int64_t q = 0; q < k; q++)
                    a[q] = rnd_f(&seed);
                for (int64_t q = 0; q < k * n; q++)
                    b[q] = rnd_f(&seed);
                for (int64_t x = 0; x < n; x++)
                    cb[x] = 4 * rnd_f(&seed), c[x] = c2[x] = c3[x] = NAN;
                float bias = 8 * rnd_f(&seed);
                qr_sgemm_pack_b(kn, b, n, 1, k, n, pk);
                qr_sgemm_job j = {.a = a, .bias = &bias, .c = c, .a_rs = k, .a_cs = 1, .ldb = n, .ldc = n, .m = 1,
                                  .n = n, .k = k, .b_packed = pk};
                qr_sgemm(NULL, kn, &j, work);
                for (int64_t x = 0; x < n; x++) {
                    float f = 0;
                    double d = 0, mag = 0;
                    for (int64_t q = 0; q < k; q++) {
                        f = fmaf(a[q], b[q * n + x], f);
                        d += (double)a[q] * b[q * n + x];
                        mag += fabs((double)a[q] * b[q * n + x]);
                    }
                    f += bias;
                    d += bias;
                    mag += fabs((double)bias) + fabs(d);
                    cr_assert(fabs(c[x] - d) <= (double)(k + 1) * ldexp(1.0, -23) * mag,
                              "%s 1x%lldx%lld packed: %lld: %.9g vs %.17g", kn->isa, (long long)n, (long long)k,
                              (long long)x, c[x], d);
                    cr_assert(memcmp(&c[x], &f, sizeof f) == 0, "%s 1x%lldx%lld packed: %lld: %.9g, fmaf chain %.9g",
                              kn->isa, (long long)n, (long long)k, (long long)x, c[x], f);
                }
                /* a fused activation, then a column bias without one, against the tiles' bits */
                for (int v = 0; v < 3; v++) {
                    j.act = v == 0 ? &relu : v == 1 ? &clip : NULL;
                    j.col_bias = v == 2 ? cb : NULL;
                    j.c = c;
                    qr_sgemm(NULL, kn, &j, work);
                    j.c = c2;
                    qr_sgemm(NULL, &tiles_only, &j, work);
                    j.c = c3;
                    qr_sgemm(pool, kn, &j, work);
                    cr_assert(memcmp(c, c2, sizeof(float) * (size_t)n) == 0, "%s 1x%lldx%lld packed, epilogue %d: "
                              "the row function and the tiles differ", kn->isa, (long long)n, (long long)k, v);
                    cr_assert(memcmp(c, c3, sizeof(float) * (size_t)n) == 0, "%s 1x%lldx%lld packed, epilogue %d: "
                              "1 and 2 threads differ", kn->isa, (long long)n, (long long)k, v);
                }
                free(a);
                free(b);
                free(pk);
                free(cb);
                free(c);
                free(c2);
                free(c3);
                free(work);
            }
    }
    qr_pool_free(pool);
}

/* A fused activation (qr_sgemm_job.act: Relu, or Clip's bounds) gives the bits of the product
 * without it, then qr_act_apply on every output: each kernel's store path (full and ragged tiles,
 * the few-rows kernel, K past one block so only the last block's store applies it), NaN kept. */
Test(sgemm, fused_activation_is_the_product_then_relu_or_clip)
{
    static const qr_act acts[] = {{1, 0, 0}, {0, 0.0f, 6.0f}, {0, -0.5f, 0.25f}, {0, 1.0f, -1.0f}};
    static const shape sh[] = {{1, 300, 40}, {3, 129, 300}, {13, 33, 7}, {25, 65, 257}, {100, 513, 9}};
    int tested = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn)
            continue;
        tested++;
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            int64_t m = sh[s].m, n = sh[s].n, k = sh[s].k;
            float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
            float *bias = malloc(sizeof(float) * (size_t)m), *c0 = malloc(sizeof(float) * (size_t)(m * n));
            float *c1 = malloc(sizeof(float) * (size_t)(m * n));
            float *work = malloc(sizeof(float) * (size_t)qr_sgemm_work(kn));
            cr_assert(a && b && bias && c0 && c1 && work);
            unsigned seed = 41 + (unsigned)s;
            for (int64_t q = 0; q < m * k; q++)
                a[q] = rnd_f(&seed);
            for (int64_t q = 0; q < k * n; q++)
                b[q] = rnd_f(&seed);
            for (int64_t r = 0; r < m; r++)
                bias[r] = 2 * rnd_f(&seed);
            b[n / 2] = NAN; /* column n / 2 is NaN in every row */
            qr_sgemm_job j = {.a = a, .b = b, .bias = bias, .c = c0, .a_rs = k, .a_cs = 1, .ldb = n, .ldc = n,
                              .m = m, .n = n, .k = k};
            qr_sgemm(NULL, kn, &j, work);
            for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++) {
                j.c = c1;
                j.act = &acts[t];
                qr_sgemm(NULL, kn, &j, work);
                j.act = NULL;
                int clamped = 0;
                for (int64_t q = 0; q < m * n; q++) {
                    float want = qr_act_apply(&acts[t], c0[q]);
                    clamped += want != c0[q];
                    cr_assert(memcmp(&c1[q], &want, sizeof want) == 0, "%s %lldx%lldx%lld act %zu element %lld: %g vs %g",
                              kn->isa, (long long)m, (long long)n, (long long)k, t, (long long)q, c1[q], want);
                }
                cr_assert(clamped > 0, "act %zu changed nothing: the test would not see it missing", t);
                cr_assert(isnan(c1[n / 2]), "NaN is kept");
            }
            free(a);
            free(b);
            free(bias);
            free(c0);
            free(c1);
            free(work);
        }
    }
    cr_assert(tested >= 1);
}

/* A column bias (qr_sgemm_job.col_bias: a MatMul's fused Add) gives the bits of the product
 * without it, then one f32 add of b[x] per output: each kernel's vector add and the portable loop,
 * B in place and packed, the tiles, the few-rows kernel and the one-row function, ragged N around
 * the sixteen-column vectors, both signs, 1 and 2 threads. */
Test(sgemm, column_bias_is_the_product_then_one_add)
{
    static const shape cs[] = {{1, 1, 5}, {2, 17, 40}, {3, 130, 33}, {5, 16, 300}, {13, 33, 7}, {50, 100, 257},
                               {64, 15, 64}};
    qr_pool *pool = qr_pool_new(2);
    cr_assert(pool);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn)
            continue;
        unsigned seed = 17;
        for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
            int64_t m = cs[s].m, n = cs[s].n, k = cs[s].k;
            float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
            float *pk = malloc(sizeof(float) * (size_t)qr_sgemm_packed_size(kn, k, n));
            float *cb = malloc(sizeof(float) * (size_t)n), *c0 = malloc(sizeof(float) * (size_t)(m * n));
            float *c = malloc(sizeof(float) * (size_t)(m * n));
            float *work = malloc(sizeof(float) * (size_t)(qr_sgemm_work(kn) * 2));
            cr_assert(a && b && pk && cb && c0 && c && work);
            for (int64_t q = 0; q < m * k; q++)
                a[q] = rnd_f(&seed);
            for (int64_t q = 0; q < k * n; q++)
                b[q] = rnd_f(&seed);
            for (int64_t x = 0; x < n; x++)
                cb[x] = 8 * rnd_f(&seed);
            qr_sgemm_pack_b(kn, b, n, 1, k, n, pk);
            for (int packed = 0; packed < 2; packed++)
                for (int t = 0; t < 2; t++) {
                    qr_sgemm_job j = {.a = a, .b = b, .c = c0, .a_rs = k, .a_cs = 1, .ldb = n, .ldc = n, .m = m,
                                      .n = n, .k = k, .b_packed = packed ? pk : NULL};
                    qr_sgemm(t ? pool : NULL, kn, &j, work);
                    j.c = c;
                    j.col_bias = cb;
                    for (int64_t q = 0; q < m * n; q++)
                        c[q] = NAN;
                    qr_sgemm(t ? pool : NULL, kn, &j, work);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t x = 0; x < n; x++) {
                            float want = c0[r * n + x] + cb[x];
                            cr_assert(memcmp(&c[r * n + x], &want, sizeof want) == 0,
                                      "%s %lldx%lldx%lld%s, %d threads: [%lld][%lld] %.9g, product + bias %.9g",
                                      kn->isa, (long long)m, (long long)n, (long long)k, packed ? " packed" : "",
                                      t + 1, (long long)r, (long long)x, c[r * n + x], want);
                        }
                }
            free(a);
            free(b);
            free(pk);
            free(cb);
            free(c0);
            free(c);
            free(work);
        }
    }
    qr_pool_free(pool);
}

/* An attention's Q.K^T as the strided MatMul runs it (stop 53): A's rows (the queries) 8 KB apart,
 * copied by the driver with the next tile's rows prefetched, and B transposed (the keys, one
 * column of B a row of the source 8 KB on) packed by qr_sgemm_pack_b with the next columns'
 * lines prefetched; ragged M (tiles of 11 and 12 rows, a last tile of 1), N (16 + 13 real columns
 * in a panel), K (a last group of 6 of 16; past a block of 256), both signs, 1 and 2 threads,
 * every ISA: the bits of the fmaf chain and within its bound of the double product. */
Test(sgemm, attention_keys_transposed_and_queries_8kb_apart)
{
    static const shape as[] = {{128, 128, 64}, {37, 45, 70}, {133, 29, 16}, {25, 128, 300}, {1, 7, 5}};
    const int64_t ld = 2048; /* floats between two queries' and two keys' rows */
    qr_pool *pool = qr_pool_new(2);
    cr_assert(pool);
    int tested = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const qr_sgemm_kernel *kn = qr_sgemm_isa(isas[i]);
        if (!kn)
            continue;
        tested++;
        for (size_t s = 0; s < sizeof as / sizeof as[0]; s++) {
            int64_t m = as[s].m, n = as[s].n, k = as[s].k;
            float *a = malloc(sizeof(float) * (size_t)(m * ld)), *b = malloc(sizeof(float) * (size_t)(n * ld));
            float *c = malloc(sizeof(float) * (size_t)(m * n));
            float *pk = malloc(sizeof(float) * (size_t)qr_sgemm_packed_size(kn, k, n));
            float *work = malloc(sizeof(float) * (size_t)(qr_sgemm_work(kn) * 2));
            cr_assert(a && b && c && pk && work);
            unsigned seed = 41 + (unsigned)s;
            for (int64_t e = 0; e < m * ld; e++)
                a[e] = rnd_f(&seed);
            for (int64_t e = 0; e < n * ld; e++)
                b[e] = rnd_f(&seed);
            for (int t = 0; t < 2; t++) {
                for (int64_t e = 0; e < m * n; e++)
                    c[e] = NAN;
                qr_sgemm_pack_b(kn, b, 1, ld, k, n, pk); /* B(q, x) = keys[x][q] */
                qr_sgemm_job j = {.a = a, .c = c, .a_rs = ld, .a_cs = 1, .ldc = n, .m = m, .n = n, .k = k,
                                  .b_packed = pk};
                qr_sgemm(t ? pool : NULL, kn, &j, work);
                for (int64_t r = 0; r < m; r++)
                    for (int64_t x = 0; x < n; x++) {
                        float f = 0;
                        double d = 0, mag = 0;
                        for (int64_t q = 0; q < k; q++) {
                            float av = a[r * ld + q], bv = b[x * ld + q];
                            f = fmaf(av, bv, f);
                            d += (double)av * bv;
                            mag += fabs((double)av * bv);
                        }
                        float got = c[r * n + x];
                        cr_assert(fabs(got - d) <= (double)(k + 1) * ldexp(1.0, -23) * mag,
                                  "%s %lldx%lldx%lld threads %d (%lld, %lld): %.9g vs %.17g", kn->isa, (long long)m,
                                  (long long)n, (long long)k, t + 1, (long long)r, (long long)x, got, d);
                        cr_assert(memcmp(&got, &f, sizeof f) == 0,
                                  "%s %lldx%lldx%lld threads %d (%lld, %lld): %.9g, fmaf chain %.9g", kn->isa,
                                  (long long)m, (long long)n, (long long)k, t + 1, (long long)r, (long long)x, got, f);
                    }
            }
            free(a);
            free(b);
            free(c);
            free(pk);
            free(work);
        }
    }
    cr_assert(tested >= 1);
    qr_pool_free(pool);
}
