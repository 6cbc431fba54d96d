/* The integer matrix products on AMX-INT8 (runtime/ops/igemm_amx.c): the kernel alone and
 * MatMulInteger through it, against naive int64 loops written here (sums wrapped to int32 at the
 * end, QRL's accumulation contract), and against the AVX-512 VNNI kernel it stands in for
 * (amx=0): the same bits. Where the CPU (or OS) has no AMX-INT8 the kernel's half is skipped and
 * says so; the op's half then checks the VNNI path alone. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/conv_epilogue.h"
#include "ops/igemm.h"
#include "testutil.h"

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static int32_t wrap32(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)v;
}

/* B (u8, k x n row-major) as the rc kernels read it: [K4/4][pitch][4], zero past k and n. */
static void pack_b(uint8_t *p, const uint8_t *b, int64_t k, int64_t n, int64_t pitch)
{
    memset(p, 0, (size_t)(qr_igemm_k4(k) * pitch));
    for (int64_t q = 0; q < k; q++)
        for (int64_t j = 0; j < n; j++)
            p[((q >> 2) * pitch + j) * 4 + (q & 3)] = b[q * n + j];
}

/* The rc contract, c[i][j] = init[i] + cinit[j] - rz[i] * csum[j] + sum_k a[i][k] b[k][j], on rows
 * of 1 to 97 (tiles of 16 and pairs of 32, and their ragged ends), K around the 64-byte tile row
 * (4 .. 260, and one of 66000 whose sums wrap int32), N around the 16-column tiles and 32-column
 * pairs, B packed N16 and wider (the padded pitch), column starts and per-row zero-point terms
 * alone and together; each product in two calls (the row ranges threads get: the second starts
 * past row 0, so a ragged tile there loads rows of the first range). Columns past n in c's rows
 * stay as they were. */
Test(igemm_amx, rc_kernel_matches_a_naive_loop_on_ragged_shapes)
{
    qr_igemm_rc_fn amx = qr_igemm_u8s8_rc_isa("amx");
    if (!amx) {
        cr_log_info("this CPU (or OS) has no AMX-INT8: nothing to compare");
        return;
    }
    static const int64_t ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 97};
    static const int64_t ks[] = {4, 60, 64, 68, 124, 256, 260};
    static const int64_t ns[] = {1, 16, 17, 31, 32, 33, 48, 100, 256};
    unsigned seed = 47;
    int ran = 0;
    for (size_t x = 0; x < sizeof ms / sizeof ms[0]; x++)
        for (size_t y = 0; y < sizeof ks / sizeof ks[0] + 1; y++)
            for (size_t z = 0; z < sizeof ns / sizeof ns[0]; z++) {
                int big = y == sizeof ks / sizeof ks[0]; /* K 66000: the products' sums wrap */
                if (big && (x % 5 != 3 || z % 4 != 0))
                    continue;
                int64_t m = ms[x], k = big ? 66000 : ks[y], n = ns[z], k4 = qr_igemm_k4(k), n16 = qr_igemm_n16(n);
                int64_t pitch = (x + y + z) % 2 ? n16 + 16 : n16, crs = n + 3;
                int8_t *a = calloc((size_t)(m * k4), 1);
                uint8_t *b = malloc((size_t)(k * n)), *bp = malloc((size_t)(k4 * pitch));
                int32_t *init = malloc(sizeof(int32_t) * (size_t)m), *rz = malloc(sizeof(int32_t) * (size_t)m),
                        *cinit = malloc(sizeof(int32_t) * (size_t)n), *csum = malloc(sizeof(int32_t) * (size_t)n),
                        *c = malloc(sizeof(int32_t) * (size_t)(m * crs));
                cr_assert(a && b && bp && init && rz && cinit && csum && c);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t q = 0; q < k; q++) /* big: all -128 by 255, the sums' extreme */
                        a[i * k4 + q] = big ? -128 : (int8_t)(rnd(&seed) & 0xff);
                for (int64_t i = 0; i < k * n; i++)
                    b[i] = big ? 255 : (uint8_t)(rnd(&seed) & 0xff);
                pack_b(bp, b, k, n, pitch);
                for (int64_t i = 0; i < m; i++) {
                    init[i] = (int32_t)rnd(&seed) - (1 << 23);
                    rz[i] = (int32_t)(rnd(&seed) & 0x1ff) - 256;
                }
                for (int64_t j = 0; j < n; j++) {
                    cinit[j] = (int32_t)rnd(&seed) - (1 << 23);
                    csum[j] = (int32_t)(rnd(&seed) << 8); /* large: rz * csum wraps */
                }
                for (int mode = 0; mode < 3; mode++) {
                    const int32_t *ci = mode != 1 ? cinit : NULL, *r = mode != 0 ? rz : NULL;
                    memset(c, 0xa5, sizeof(int32_t) * (size_t)(m * crs));
                    int64_t half = m / 2 + (int64_t)(seed % 3);
                    half = half > m ? m : half;
                    amx(c, crs, a, init, ci, r, csum, 0, half, bp, k4, n, pitch);
                    amx(c, crs, a, init, ci, r, csum, half, m, bp, k4, n, pitch);
                    for (int64_t i = 0; i < m; i++) {
                        for (int64_t j = 0; j < n; j++) {
                            int64_t s = (int64_t)init[i] + (ci ? ci[j] : 0) - (r ? (int64_t)r[i] * csum[j] : 0);
                            if (big) /* every product the same: the sum by hand */
                                s += (int64_t)k * -128 * 255;
                            else
                                for (int64_t q = 0; q < k; q++)
                                    s += (int64_t)a[i * k4 + q] * b[q * n + j];
                            cr_assert_eq(c[i * crs + j], wrap32(s), "%lldx%lldx%lld pitch %lld mode %d at %lld,%lld",
                                         (long long)m, (long long)k, (long long)n, (long long)pitch, mode,
                                         (long long)i, (long long)j);
                        }
                        for (int64_t j = n; j < crs; j++)
                            cr_assert_eq((uint32_t)c[i * crs + j], 0xa5a5a5a5u, "%lldx%lldx%lld: column %lld written",
                                         (long long)m, (long long)k, (long long)n, (long long)j);
                    }
                    ran++;
                }
                free(a), free(b), free(bp), free(init), free(rz), free(cinit), free(csum), free(c);
            }
    cr_assert_gt(ran, 900);
}

/* Which products AMX takes (qr_igemm_u8s8_rc_for): bert's projections and attention's products,
 * not those under one tile of rows, K or two of columns, and none under amx=0 or another ISA
 * forced. */
Test(igemm_amx, dispatch_takes_the_shapes_that_pay)
{
    qr_igemm_rc_fn vnni = qr_igemm_u8s8_rc_isa("avx512vnni"), amx = qr_igemm_u8s8_rc_isa("amx");
    if (!vnni || !amx) {
        cr_log_info("no AVX-512 VNNI or no AMX-INT8 here: nothing to dispatch");
        return;
    }
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 1024, 256, 768), amx);
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 128, 64, 128), amx);
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 15, 256, 768), vnni);
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 128, 60, 768), vnni);
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 128, 256, 31), vnni);
    qr_igemm_rc_fn other = qr_igemm_u8s8_rc_isa("avx2");
    if (other)
        cr_assert_eq(qr_igemm_u8s8_rc_for(other, 1024, 256, 768), other);
    tu_option("amx", "0");
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 1024, 256, 768), vnni);
    tu_option("amx", "");
    qr_igemm_force("avx512vnni");
    cr_assert_eq(qr_igemm_u8s8_rc_for(vnni, 1024, 256, 768), vnni);
    qr_igemm_force(NULL);
    cr_assert_eq(qr_igemm_u8s8_rc(), vnni); /* the others' choice is as before */
    cr_assert_eq(qr_igemm_rc_pitch(amx, 256, 256), qr_igemm_rc_pitch(vnni, 256, 256));
    cr_assert_eq(qr_igemm_rc_pitch(amx, 64, 100), qr_igemm_rc_pitch(vnni, 64, 100));
}

/* MatMulInteger (a [batch, M, K], b [K, N] constant or not) with zero points on both operands: a
 * scalar or one per row of a (the dynamic recipes' [batch, M, 1]) and b's scalar; u8 and i8 on
 * both sides. On AMX (the default where the CPU has it), on AVX-512 VNNI (amx=0) and on the
 * portable path, by 1 and 2 threads, against the naive int64 loop: all the same int32s. */
Test(igemm_amx, matmul_integer_matches_a_naive_loop_with_both_zero_points)
{
    const int cases[][4] = {{1, 128, 256, 96}, {2, 17, 64, 33},  {1, 97, 100, 50}, {4, 16, 64, 128},
                            {1, 65, 260, 256}, {3, 40, 68, 40},  {1, 33, 1024, 64}, {2, 96, 64, 32}};
    static const char *const paths[] = {"", "0", "portable"};
    unsigned seed = 5;
    qr_pool *two = qr_pool_new(2);
    cr_assert(two);
    const qr_op_def *d = qr_op_find("", "MatMulInteger");
    cr_assert(d);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int B = cases[c][0], M = cases[c][1], K = cases[c][2], N = cases[c][3];
        qr_dtype at = c % 2 ? QR_I8 : QR_U8, bt = c % 3 == 2 ? QR_U8 : QR_I8;
        int per_row = c % 4 != 1;
        uint8_t *ad = malloc((size_t)(B * M * K)), *bd = malloc((size_t)(K * N)), *azd = malloc((size_t)(B * M)), bz;
        int32_t *want = malloc(sizeof(int32_t) * (size_t)(B * M * N));
        cr_assert(ad && bd && azd && want);
        for (int i = 0; i < B * M * K; i++)
            ad[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int i = 0; i < K * N; i++)
            bd[i] = (uint8_t)(rnd(&seed) & 0xff);
        for (int i = 0; i < B * M; i++)
            azd[i] = (uint8_t)(rnd(&seed) & 0xff);
        bz = (uint8_t)(rnd(&seed) & 0xff);
        /* the values as their types read them */
#define AV(i) (at == QR_U8 ? (int64_t)ad[i] : (int64_t)(int8_t)ad[i])
#define BV(i) (bt == QR_U8 ? (int64_t)bd[i] : (int64_t)(int8_t)bd[i])
#define AZ(i) (at == QR_U8 ? (int64_t)azd[i] : (int64_t)(int8_t)azd[i])
        int64_t zb = bt == QR_U8 ? bz : (int8_t)bz;
        for (int bi = 0; bi < B; bi++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    int64_t za = AZ(per_row ? bi * M + i : 0), s = 0;
                    for (int q = 0; q < K; q++)
                        s += (AV((bi * M + i) * K + q) - za) * (BV(q * N + j) - zb);
                    want[(bi * M + i) * N + j] = wrap32(s);
                }
        qr_tensor a = {.dtype = at, .ndim = 3, .dims = {B, M, K}, .data = ad};
        qr_tensor b = {.dtype = bt, .ndim = 2, .dims = {K, N}, .data = bd};
        qr_tensor az = per_row ? (qr_tensor){.dtype = at, .ndim = 3, .dims = {B, M, 1}, .data = azd}
                               : (qr_tensor){.dtype = at, .ndim = 0, .data = azd};
        qr_tensor bzt = {.dtype = bt, .ndim = 0, .data = &bz};
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
            for (int threads = 1; threads <= 2; threads++) {
                if (p == 2)
                    qr_igemm_force("portable");
                else
                    tu_option("amx", paths[p]);
                qr_node n = {.name = "n", .op = "MatMulInteger", .domain = "", .opset = 13, .n_in = 4, .n_out = 1,
                             .def = d};
                const qr_tensor *in[4] = {&a, &b, &az, &bzt};
                qr_tensor y, *out[1] = {&y};
                qr_error e;
                qr_kctx k = {.node = &n, .opset = 13, .n_in = 4, .n_out = 1, .in = in, .out = out, .err = &e,
                             .pool = threads == 2 ? two : NULL};
                memset(&y, 0, sizeof y);
                cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
                cr_assert_eq(qr_tensor_alloc(&y, &e), QR_OK);
                cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
                for (int64_t x = 0; x < (int64_t)B * M * N; x++)
                    cr_assert_eq(((int32_t *)y.data)[x], want[x], "case %zu (%dx%dx%dx%d), amx=%s%s, %d threads, element %lld",
                                 c, B, M, K, N, p == 2 ? "-" : paths[p], p == 2 ? " portable" : "", threads,
                                 (long long)x);
                qr_tensor_free(&y);
                qr_igemm_force(NULL);
                tu_option("amx", "");
            }
        free(ad), free(bd), free(azd), free(want);
    }
    qr_pool_free(two);
}

/* qr_matmulint_run_epilogue (MatMulInteger with its sums handed over in blocks of rows, what the
 * fused QrlMatMulKernel runs): every element of the accumulator reaches the epilogue exactly once,
 * at its own place (the block's y_off), with the naive int64 loop's value wrapped to int32. Shapes
 * whose rows split into 64-row tasks with ragged ends, several matrices (one product of their rows, and a
 * B matrix for each: products apart), a K whose sums wrap, and
 * few rows (the GEMV, one block of all rows); zero points scalar and per row; u8 and i8; on AMX
 * (where there is one), VNNI (amx=0) and the portable path, by 1 and 2 threads; B computed, and
 * constant (packed into the node's cache on one run, read from it on the next: on VNNI in panels
 * where K4 >= 64 and N > 32, a last panel of 16 columns too, and a constant B per matrix). */
typedef struct ep_record {
    int32_t *got;
    int *seen;
    int64_t total;
    int bad;
} ep_record;

static ep_record record;

static qr_status record_rows(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    (void)ep, (void)e;
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t c = 0; c < b->cols; c++) {
            int64_t at = b->y_off + r * b->y_rs + b->c0 + c;
            if (at < 0 || at >= record.total) {
                __atomic_store_n(&record.bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            record.got[at] = b->acc[r * b->acc_rs + c];
            __atomic_add_fetch(&record.seen[at], 1, __ATOMIC_RELAXED);
        }
    return QR_OK;
}

static qr_status ep_run(qr_kctx *k)
{
    qr_acc_epilogue ep = {.run_rows = record_rows};
    return qr_matmulint_run_epilogue(k, k->in[0], k->in[2], k->in[1], k->in[3], 0, &ep);
}

/* The same with B a constant: packed on the first run into the node's cache and read from it after
 * (in panels for the AVX-512 VNNI kernel where K4 >= 64 and N > 32: quant.c, igemm.h). */
static qr_status ep_run_const(qr_kctx *k)
{
    qr_acc_epilogue ep = {.run_rows = record_rows};
    return qr_matmulint_run_epilogue(k, k->in[0], k->in[2], k->in[1], k->in[3], 1, &ep);
}

Test(igemm_amx, matmul_epilogue_blocks_match_a_naive_loop)
{
    const int cases[][4] = {{1, 128, 256, 96}, {2, 17, 64, 33}, {1, 197, 100, 50}, {3, 70, 68, 40},
                            {1, 65, 66000, 20}, {1, 3, 64, 70}, {2, 130, 32, 1}, {4, 16, 64, 128}};
    static const char *const paths[] = {"", "0", "portable"};
    unsigned seed = 11;
    qr_pool *two = qr_pool_new(2);
    cr_assert(two);
    qr_op_def d = {.name = "MatMulEpilogue", .run = ep_run}, dc = {.name = "MatMulEpilogue", .run = ep_run_const};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int B = cases[c][0], M = cases[c][1], K = cases[c][2], N = cases[c][3];
        qr_dtype at = c % 2 ? QR_I8 : QR_U8, bt = c % 3 == 2 ? QR_U8 : QR_I8;
        int per_row = c % 4 == 0 || c == 3, gemv = c == 5; /* case 5: 3 rows, i8 B with zero 0 (the GEMV) */
        int nb = c == 3 || c == 6 || c == 7 ? B : 1; /* a B matrix per A matrix (attention's): not one product */
        uint8_t *ad = malloc((size_t)B * M * K), *bd = malloc((size_t)nb * K * N), *azd = malloc((size_t)(B * M)), bz;
        int64_t total = (int64_t)B * M * N;
        int32_t *want = malloc(sizeof(int32_t) * (size_t)total);
        record.got = malloc(sizeof(int32_t) * (size_t)total);
        record.seen = malloc(sizeof(int) * (size_t)total);
        record.total = total;
        cr_assert(ad && bd && azd && want && record.got && record.seen);
        for (int64_t i = 0; i < (int64_t)B * M * K; i++) /* K 66000: all 255 or -128, so the sums wrap */
            ad[i] = K > 60000 ? (at == QR_U8 ? 255 : 0x80) : (uint8_t)(rnd(&seed) & 0xff);
        for (int64_t i = 0; i < (int64_t)nb * K * N; i++)
            bd[i] = K > 60000 ? 0x7f : (uint8_t)(rnd(&seed) & 0xff);
        for (int i = 0; i < B * M; i++)
            azd[i] = K > 60000 ? 0 : (uint8_t)(rnd(&seed) & 0xff);
        bz = gemv ? 0 : K > 60000 ? 0x80 : (uint8_t)(rnd(&seed) & 0xff); /* K 66000: 255 (-128 - 127) a term */
        int64_t zb = bt == QR_U8 ? bz : (int8_t)bz;
        for (int bi = 0; bi < B; bi++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    int64_t za = AZ(per_row ? bi * M + i : 0), s = 0;
                    for (int q = 0; q < K; q++)
                        s += (AV(((int64_t)bi * M + i) * K + q) - za) *
                             (BV((nb > 1 ? (int64_t)bi * K * N : 0) + (int64_t)q * N + j) - zb);
                    want[((int64_t)bi * M + i) * N + j] = wrap32(s);
                }
        if (K > 60000)
            cr_assert((int64_t)want[0] != (int64_t)K * 255 * 255, "case %zu: the sums wrap", c);
        qr_tensor a = {.dtype = at, .ndim = 3, .dims = {B, M, K}, .data = ad};
        qr_tensor b = nb > 1 ? (qr_tensor){.dtype = bt, .ndim = 3, .dims = {B, K, N}, .data = bd}
                             : (qr_tensor){.dtype = bt, .ndim = 2, .dims = {K, N}, .data = bd};
        qr_tensor az = per_row ? (qr_tensor){.dtype = at, .ndim = 3, .dims = {B, M, 1}, .data = azd}
                               : (qr_tensor){.dtype = at, .ndim = 0, .data = azd};
        qr_tensor bzt = {.dtype = bt, .ndim = 0, .data = &bz};
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
            for (int threads = 1; threads <= 2; threads++) {
                if (p == 2)
                    qr_igemm_force("portable");
                else
                    tu_option("amx", paths[p]);
                /* run 0: B computed; 1 and 2: B constant, packed on run 1, from the cache on run 2 */
                qr_kcache cache;
                memset(&cache, 0, sizeof cache);
                for (int run = 0; run < 3; run++) {
                    qr_node n = {.name = "n", .op = "MatMulEpilogue", .domain = "", .opset = 13, .n_in = 4, .n_out = 1,
                                 .def = run ? &dc : &d};
                    const qr_tensor *in[4] = {&a, &b, &az, &bzt};
                    qr_tensor y = {.dtype = QR_U8, .ndim = 0}, *out[1] = {&y};
                    qr_error e;
                    qr_kctx k = {.node = &n, .opset = 13, .n_in = 4, .n_out = 1, .in = in, .out = out, .err = &e,
                                 .pool = threads == 2 ? two : NULL, .cache = run ? &cache : NULL};
                    memset(record.seen, 0, sizeof(int) * (size_t)total);
                    record.bad = 0;
                    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
                    cr_assert(!record.bad, "case %zu: a block past the output", c);
                    for (int64_t x = 0; x < total; x++) {
                        cr_assert_eq(record.seen[x], 1, "case %zu (%dx%dx%dx%d), amx=%s%s, %d threads: element %lld reached the epilogue %d times",
                                     c, B, M, K, N, p == 2 ? "-" : paths[p], p == 2 ? " portable" : "", threads, (long long)x,
                                     record.seen[x]);
                        cr_assert_eq(record.got[x], want[x], "case %zu (%dx%dx%dx%d), amx=%s%s, %d threads, run %d, element %lld",
                                     c, B, M, K, N, p == 2 ? "-" : paths[p], p == 2 ? " portable" : "", threads, run,
                                     (long long)x);
                    }
                }
                free(cache.data);
                qr_igemm_force(NULL);
                tu_option("amx", "");
            }
        free(ad), free(bd), free(azd), free(want), free(record.got), free(record.seen);
    }
    qr_pool_free(two);
}
