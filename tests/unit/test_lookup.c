/* Table lookups (ops/lookup.c) and QrlLookup (quantizer/intgraph.c) against a plain scalar
 * reference: y[i] = table[x[i] - min(x's type)]. The byte kernels on every path this CPU runs (the
 * portable loop, AVX-512 VBMI when present), u8 and i8 indexes, every one of the 256 values, a
 * table of 256 distinct bytes (a wrong entry shows), odd lengths around the 64-byte vector and the
 * 128-byte step, unaligned starts, and the bytes past the end left alone. QrlLookup itself with
 * 8- and 16-bit indexes and 1-, 2- and 4-byte entries. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/lookup.h"
#include "quantize_plan.h"

static uint32_t rng = 12345;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* A permutation of 0..255, so every index reads a different byte. */
static void permutation(uint8_t *t)
{
    for (int i = 0; i < 256; i++)
        t[i] = (uint8_t)i;
    for (int i = 255; i > 0; i--) {
        int j = (int)(next() % (uint32_t)(i + 1));
        uint8_t s = t[i];
        t[i] = t[j];
        t[j] = s;
    }
}

static const int64_t lengths[] = {0, 1, 2, 3, 15, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 383, 1000, 4099};

static void check_kernel(qr_lookup8_fn f, const char *name)
{
    uint8_t table[256];
    enum { MAXN = 4099, PAD = 64 };
    uint8_t *x = malloc(MAXN + 8), *y = malloc(MAXN + 8 + PAD);
    cr_assert(x && y);
    for (int round = 0; round < 4; round++) {
        permutation(table);
        for (int is_i8 = 0; is_i8 < 2; is_i8++)
            for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
                for (int start = 0; start < 4; start++) {
                    int64_t n = lengths[li];
                    uint8_t *xs = x + start, *ys = y + (3 - start);
                    /* every value first (as far as n goes), then random ones */
                    for (int64_t i = 0; i < n; i++)
                        xs[i] = i < 256 ? (uint8_t)(i * 167 + round) : (uint8_t)next();
                    memset(y, 0xa5, MAXN + 8 + PAD);
                    f(xs, ys, n, table, is_i8 ? 0x80 : 0);
                    for (int64_t i = 0; i < n; i++) {
                        int idx = is_i8 ? (int)(int8_t)xs[i] + 128 : (int)xs[i];
                        cr_assert_eq(ys[i], table[idx], "%s %s n=%lld start=%d: y[%lld] = %d, table[%d] = %d", name,
                                     is_i8 ? "i8" : "u8", (long long)n, start, (long long)i, ys[i], idx, table[idx]);
                    }
                    for (int64_t i = n; i < n + PAD && ys + i < y + MAXN + 8 + PAD; i++)
                        cr_assert_eq(ys[i], 0xa5, "%s wrote past the end (n=%lld, at %lld)", name, (long long)n,
                                     (long long)i);
                }
    }
    free(x);
    free(y);
}

Test(lookup, portable_bytes_match_the_reference)
{
    check_kernel(qr_lookup8_portable, "portable");
}

Test(lookup, avx512vbmi_bytes_match_the_reference)
{
    qr_lookup8_fn f = qr_lookup8_avx512vbmi();
    if (!f)
        cr_skip_test("this CPU lacks AVX-512 VBMI");
    check_kernel(f, "avx512vbmi");
}

Test(lookup, best_bytes_match_the_reference)
{
    check_kernel(qr_lookup8_best(), "best");
}

/* QrlLookup on x (dtype xt, n values from raw) with a table of entries of type tt. */
static void check_op(qr_dtype xt, qr_dtype tt, int64_t n)
{
    const qr_op_def *d = qr_op_find_in(qr_ops_intgraph, "qrl", "QrlLookup");
    cr_assert(d);
    size_t xsz = qr_dtype_size(xt), tsz = qr_dtype_size(tt);
    int64_t entries = (int64_t)1 << (8 * xsz);
    qr_tensor x = {.dtype = xt, .ndim = 3, .dims = {1, 1, n}}, t = {.dtype = tt, .ndim = 1, .dims = {entries}};
    qr_error e = {{0}};
    cr_assert_eq(qr_tensor_alloc(&x, &e), QR_OK);
    cr_assert_eq(qr_tensor_alloc(&t, &e), QR_OK);
    uint8_t *tb = t.data, *xb = x.data;
    for (size_t i = 0; i < (size_t)entries * tsz; i++)
        tb[i] = (uint8_t)next();
    for (int64_t i = 0; i < n; i++)
        for (size_t b = 0; b < xsz; b++) /* every low byte first, then random */
            xb[(size_t)i * xsz + b] = i < 256 && b == 0 ? (uint8_t)(i * 167) : (uint8_t)next();
    qr_value vx = {.t = x}, vt = {.t = t, .is_const = 1};
    qr_value *vp[2] = {&vx, &vt};
    qr_node node = {.name = "t", .op = "QrlLookup", .domain = "qrl", .opset = 17, .n_in = 2, .n_out = 1, .def = d,
                    .in = vp};
    qr_tensor y = {0}, *yo = &y;
    const qr_tensor *in[2] = {&x, &t};
    qr_kctx k = {.node = &node, .opset = 17, .n_in = 2, .n_out = 1, .in = in, .out = &yo, .err = &e};
    cr_assert_eq(d->infer(&k), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_tensor_alloc(&y, &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    cr_assert_eq(y.dtype, tt);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx;
        switch (xt) {
        case QR_U8: idx = ((const uint8_t *)x.data)[i]; break;
        case QR_I8: idx = (int64_t)((const int8_t *)x.data)[i] + 128; break;
        case QR_U16: idx = ((const uint16_t *)x.data)[i]; break;
        default: idx = (int64_t)((const int16_t *)x.data)[i] + 32768; break;
        }
        cr_assert(!memcmp((const uint8_t *)y.data + (size_t)i * tsz, tb + (size_t)idx * tsz, tsz),
                  "%s -> %s, n=%lld: element %lld (index %lld)", qr_dtype_name(xt), qr_dtype_name(tt), (long long)n,
                  (long long)i, (long long)idx);
    }
    qr_tensor_free(&x);
    qr_tensor_free(&t);
    qr_tensor_free(&y);
}

Test(lookup, qrl_lookup_every_index_and_entry_type)
{
    const qr_dtype xs[] = {QR_U8, QR_I8, QR_U16, QR_I16};
    const qr_dtype ts[] = {QR_U8, QR_I8, QR_I16, QR_I32, QR_F32};
    for (size_t a = 0; a < sizeof xs / sizeof *xs; a++)
        for (size_t b = 0; b < sizeof ts / sizeof *ts; b++) {
            check_op(xs[a], ts[b], 1);
            check_op(xs[a], ts[b], 131);
            check_op(xs[a], ts[b], 1029);
        }
}
