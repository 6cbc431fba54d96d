/* Transposes by runs and blocks (ops/permute.c) against a plain scalar reference: qr_permute_copy
 * for elements of 1, 2, 4 and 8 bytes over permutations of ranks 2 to 5 (the attention heads'
 * [S, B*H, hd] -> [B*H, hd, S] among them), odd sizes around the 16 x 16 tiles and 64 x 64 blocks,
 * dims of 1; qr_transpose_bytes with row strides wider than the rows, nothing written between
 * them. Random bytes, so both signs of i8 data. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/permute.h"

static uint32_t rng = 777;
static uint8_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (uint8_t)(rng >> 24);
}

/* want = src permuted, element by element: output index -> input offset by strides. */
static void reference(uint8_t *want, const uint8_t *src, int nd, const int64_t *dims, const int *perm, size_t es)
{
    int64_t is[8], od[8], idx[8] = {0}, n = 1;
    for (int k = nd - 1, s = 1; k >= 0; k--) {
        is[k] = s;
        s *= (int)dims[k];
    }
    for (int i = 0; i < nd; i++) {
        od[i] = dims[perm[i]];
        n *= od[i];
    }
    for (int64_t o = 0; o < n; o++) {
        int64_t in = 0;
        for (int i = 0; i < nd; i++)
            in += idx[i] * is[perm[i]];
        memcpy(want + (size_t)o * es, src + (size_t)in * es, es);
        for (int i = nd - 1; i >= 0 && ++idx[i] == od[i]; i--)
            idx[i] = 0;
    }
}

static void check(int nd, const int64_t *dims, const int *perm)
{
    static const size_t sizes[] = {1, 2, 4, 8};
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= dims[i];
    for (size_t si = 0; si < 4; si++) {
        size_t es = sizes[si], bytes = (size_t)n * es;
        uint8_t *src = malloc(bytes + 1), *got = malloc(bytes + 64), *want = malloc(bytes + 1);
        cr_assert(src && got && want);
        for (size_t i = 0; i < bytes; i++)
            src[i] = next();
        memset(got, 0xa5, bytes + 64);
        reference(want, src, nd, dims, perm, es);
        qr_permute_copy(got, src, nd, dims, perm, es);
        for (size_t i = 0; i < bytes; i++)
            cr_assert_eq(got[i], want[i], "rank %d dims[0] %lld perm[0] %d, %zu-byte elements: byte %zu", nd,
                         (long long)dims[0], perm[0], es, i);
        for (size_t i = bytes; i < bytes + 64; i++)
            cr_assert_eq(got[i], 0xa5, "wrote past the end");
        free(src);
        free(got);
        free(want);
    }
}

Test(permute, transposes_match_the_reference)
{
    check(2, (int64_t[]){1, 1}, (int[]){1, 0});
    check(2, (int64_t[]){3, 5}, (int[]){1, 0});
    check(2, (int64_t[]){16, 16}, (int[]){1, 0});
    check(2, (int64_t[]){17, 33}, (int[]){1, 0});
    check(2, (int64_t[]){64, 64}, (int[]){1, 0});
    check(2, (int64_t[]){129, 67}, (int[]){1, 0});
    check(2, (int64_t[]){200, 15}, (int[]){1, 0});
    check(3, (int64_t[]){128, 4, 64}, (int[]){1, 2, 0}); /* K^T per head: [S, B*H, hd] -> [B*H, hd, S] */
    check(3, (int64_t[]){37, 6, 17}, (int[]){1, 2, 0});
    check(3, (int64_t[]){128, 8, 64}, (int[]){1, 0, 2}); /* [S, B*H, hd] -> [B*H, S, hd]: runs */
    check(3, (int64_t[]){5, 1, 19}, (int[]){1, 0, 2});   /* only a copy */
    check(3, (int64_t[]){65, 3, 66}, (int[]){2, 1, 0});
    check(3, (int64_t[]){31, 47, 2}, (int[]){0, 2, 1});
    check(4, (int64_t[]){2, 33, 3, 17}, (int[]){0, 2, 1, 3});
    check(4, (int64_t[]){2, 3, 33, 81}, (int[]){0, 1, 3, 2});
    check(4, (int64_t[]){2, 1, 33, 17}, (int[]){2, 1, 3, 0});
    check(4, (int64_t[]){3, 20, 7, 18}, (int[]){0, 2, 3, 1}); /* NCHW -> NHWC */
    check(4, (int64_t[]){3, 7, 18, 20}, (int[]){0, 3, 1, 2}); /* NHWC -> NCHW */
    check(5, (int64_t[]){2, 3, 4, 5, 6}, (int[]){4, 0, 3, 1, 2});
    check(5, (int64_t[]){3, 1, 17, 2, 35}, (int[]){4, 2, 1, 0, 3});
}

Test(permute, byte_transpose_with_strides)
{
    static const int64_t sizes[] = {1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 129};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
            int64_t n = sizes[a], m = sizes[b], ss = m + 3, ds = n + 5;
            uint8_t *s = malloc((size_t)(n * ss)), *d = malloc((size_t)(m * ds));
            cr_assert(s && d);
            for (int64_t i = 0; i < n * ss; i++)
                s[i] = next();
            memset(d, 0xa5, (size_t)(m * ds));
            qr_transpose_bytes(d, ds, s, ss, n, m);
            for (int64_t j = 0; j < m; j++)
                for (int64_t i = 0; i < ds; i++)
                    cr_assert_eq(d[j * ds + i], i < n ? s[i * ss + j] : 0xa5, "n %lld m %lld: d[%lld][%lld]",
                                 (long long)n, (long long)m, (long long)j, (long long)i);
            free(s);
            free(d);
        }
}
