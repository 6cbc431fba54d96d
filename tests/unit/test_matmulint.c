/* MatMulInteger and QLinearMatMul against an independent oracle: numpy's results from the ONNX
 * definitions (tools/make_matmulint_cases.py: exact int64 sums wrapped to int32, and
 * QLinearMatMul's requantization), on every path this CPU has: the portable int32 loops
 * (igemm=portable) and each ISA's u8s8 microkernel with its zero-point corrections
 * (quant.c's mmq_run, the GEMV), serially and on two threads. Operands of both signs, u8 and i8
 * mixed on either side, zero points at the types' ends and absent, odd K, M and N, batch and head
 * dims broadcast either way, 1-D operands, constant-shaped weights and sums past int32, and A's
 * zero points one per row of each matrix ([..., M, 1], the dynamic recipes' per-token
 * activations: the kernels correct each row in their sums). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/igemm.h"
#include "tensor_io.h"
#include "testutil.h"

#define MAX_IN 8

/* One case's inputs, read from its .npy files (NULL where the node leaves an input out). */
typedef struct mm_case {
    char name[64], op[32];
    qr_tensor t[MAX_IN], y;
    int n_in;
    const qr_tensor *in[MAX_IN];
} mm_case;

static int read_npy(const char *dir, const char *cname, const char *input, qr_tensor *t)
{
    char path[512];
    qr_error e;
    snprintf(path, sizeof path, "%s/%s/%s.npy", dir, cname, input);
    if (!tu_file_exists(path))
        return 0;
    cr_assert_eq(qr_npy_read(path, t, &e), QR_OK, "%s: %s", path, e.msg);
    return 1;
}

static void load_case(const char *dir, mm_case *c)
{
    static const char *const mmi[] = {"a", "b", "a_zero_point", "b_zero_point"};
    static const char *const qlin[] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
                                       "y_zero_point"};
    int q = !strcmp(c->op, "QLinearMatMul");
    const char *const *names = q ? qlin : mmi;
    int n = q ? 8 : 4;
    c->n_in = 0;
    for (int i = 0; i < n; i++) {
        c->in[i] = read_npy(dir, c->name, names[i], &c->t[i]) ? &c->t[i] : NULL;
        if (c->in[i])
            c->n_in = i + 1;
    }
    cr_assert(read_npy(dir, c->name, "y", &c->y), "%s: no y.npy", c->name);
}

static void free_case(mm_case *c)
{
    for (int i = 0; i < MAX_IN; i++)
        if (c->in[i])
            qr_tensor_free(&c->t[i]);
    qr_tensor_free(&c->y);
}

/* The node through the op table (infer, then run on a poisoned output) on pool (NULL: serially). */
static void run_case(const mm_case *c, qr_pool *pool, qr_tensor *y)
{
    const qr_op_def *d = qr_op_find("", c->op);
    cr_assert(d);
    qr_node n = {.name = "n", .op = c->op, .domain = "", .opset = 13, .n_in = c->n_in, .n_out = 1, .def = d};
    qr_tensor *out[1] = {y};
    qr_error e;
    qr_kctx k = {.node = &n, .opset = 13, .n_in = c->n_in, .n_out = 1, .in = c->in, .out = out, .err = &e,
                 .pool = pool};
    memset(y, 0, sizeof *y);
    cr_assert_eq(qr_op_infer(&k), QR_OK, "%s: %s", c->name, e.msg);
    cr_assert_eq(qr_tensor_alloc(y, &e), QR_OK);
    memset(y->data, 0xa5, (size_t)qr_tensor_nbytes(y)); /* an element left unwritten fails */
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s: %s", c->name, e.msg);
}

static void assert_same(const mm_case *c, const qr_tensor *y, const char *path, int threads)
{
    cr_assert_eq(y->dtype, c->y.dtype, "%s on %s", c->name, path);
    cr_assert(qr_tensor_same_shape(y, &c->y), "%s on %s: shape", c->name, path);
    int64_t n = qr_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t got = qr_get_i64(y->data, y->dtype, i), want = qr_get_i64(c->y.data, c->y.dtype, i);
        cr_assert_eq(got, want, "%s on %s, %d thread(s): element %lld is %lld, numpy says %lld", c->name, path,
                     threads, (long long)i, (long long)got, (long long)want);
    }
}

Test(matmulint, every_path_matches_numpy)
{
    char *dir = tu_tmpdir(), cmd[1024], *log = NULL;
    cr_assert(dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_matmulint_cases.py' '%s'", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "make_matmulint_cases.py failed: %s", log);
    free(log);
    char list[512];
    snprintf(list, sizeof list, "%s/cases.tsv", dir);
    FILE *f = fopen(list, "r");
    cr_assert(f);
    static const char *const paths[] = {"portable", "avx512vnni", "avxvnni", "avx2"};
    qr_pool *two = qr_pool_new(2);
    int cases = 0, fast = 0;
    mm_case c;
    memset(&c, 0, sizeof c);
    while (fscanf(f, "%63s %31s", c.name, c.op) == 2) {
        load_case(dir, &c);
        cases++;
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            if (p > 0 && !qr_igemm_u8s8_isa(paths[p]))
                continue; /* this CPU lacks it */
            qr_igemm_force(paths[p]);
            fast += p > 0;
            for (int threads = 1; threads <= 2; threads++) {
                qr_tensor y;
                run_case(&c, threads == 2 ? two : NULL, &y);
                assert_same(&c, &y, paths[p], threads);
                qr_tensor_free(&y);
            }
        }
        qr_igemm_force(NULL);
        free_case(&c);
        memset(&c, 0, sizeof c);
    }
    fclose(f);
    qr_pool_free(two);
    cr_assert_geq(cases, 25, "only %d cases in %s", cases, list);
    if (!fast)
        cr_log_info("no u8s8 microkernel on this CPU: only the portable path was compared");
    tu_rmdir(dir);
}

/* A node keeps its constant B packed across runs (qr_kcache_get), and its row count picks the path
 * each run: the GEMV (up to QR_GEMV_MAX_ROWS rows), the AVX-512 VNNI kernel on B in panels of 32
 * columns, AMX from 16 rows. The GEMV's packing and the panels of a B of 64 columns are the same
 * size, so a panels run after a GEMV run once read the GEMV's bytes as panels (the bundled CNN's
 * classifier, batches of 5 to 15 after a batch of 1: logits off by up to 19). Runs of 1, 8, 1, 12,
 * 3 and 16 rows through one kept buffer, each against the definition's int64 sums. */
Test(matmulint, a_kept_packing_is_read_only_by_the_path_that_made_it)
{
    enum { K = 260, N = 64, MAXR = 16 };
    static const int rows[] = {1, 8, 1, 12, 3, 16};
    qr_tensor b = {.dtype = QR_I8, .ndim = 2, .dims = {K, N}}, za = {.dtype = QR_U8, .ndim = 0};
    qr_error e;
    cr_assert_eq(qr_tensor_alloc(&b, &e), QR_OK);
    cr_assert_eq(qr_tensor_alloc(&za, &e), QR_OK);
    uint32_t s = 12345;
    for (int64_t i = 0; i < K * N; i++)
        ((int8_t *)b.data)[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
    *(uint8_t *)za.data = 131;
    qr_value vb = {.name = "b", .is_const = 1}, vz = {.name = "za", .is_const = 1}, va = {.name = "a"};
    qr_value *vin[3] = {&va, &vb, &vz};
    const qr_op_def *d = qr_op_find("", "MatMulInteger");
    cr_assert(d);
    qr_node n = {.name = "n", .op = "MatMulInteger", .domain = "", .opset = 13, .n_in = 3, .n_out = 1, .def = d,
                 .in = vin};
    qr_kcache cache = {0};
    const char *const paths[] = {NULL, "avx512vnni"}; /* the CPU's choice (AMX here from 16 rows), and VNNI's */
    for (size_t p = 0; p < 2; p++) {
        if (paths[p] && !qr_igemm_u8s8_isa(paths[p]))
            continue;
        qr_igemm_force(paths[p]);
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            int m = rows[r];
            qr_tensor a = {.dtype = QR_U8, .ndim = 2, .dims = {m, K}}, y;
            cr_assert_eq(qr_tensor_alloc(&a, &e), QR_OK);
            for (int64_t i = 0; i < m * K; i++)
                ((uint8_t *)a.data)[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 24);
            const qr_tensor *in[3] = {&a, &b, &za};
            qr_tensor *out[1] = {&y};
            qr_kctx k = {.node = &n, .opset = 13, .n_in = 3, .n_out = 1, .in = in, .out = out, .err = &e,
                         .cache = &cache};
            memset(&y, 0, sizeof y);
            cr_assert_eq(qr_op_infer(&k), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_tensor_alloc(&y, &e), QR_OK);
            cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < N; j++) {
                    int64_t want = 0;
                    for (int q = 0; q < K; q++)
                        want += ((int64_t)((uint8_t *)a.data)[i * K + q] - 131) * ((int8_t *)b.data)[q * N + j];
                    cr_assert_eq(((int32_t *)y.data)[i * N + j], (int32_t)want,
                                 "path %s, run %zu (%d rows): row %d column %d is %d, the sums say %lld",
                                 paths[p] ? paths[p] : "default", r, m, i, j, ((int32_t *)y.data)[i * N + j],
                                 (long long)want);
                }
            qr_tensor_free(&a);
            qr_tensor_free(&y);
        }
    }
    qr_igemm_force(NULL);
    free(cache.data), free(cache.keep), free(cache.plan);
    qr_tensor_free(&b);
    qr_tensor_free(&za);
}
