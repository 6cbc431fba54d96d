/* The NHWC kernels (runtime/ops/nhwc.c) against naive loops written here over
 * the same image read as NCHW (index arithmetic, sums in int64 wrapped at the
 * end, AveragePool's mean rounded by rint of the f64 quotient), on random
 * shapes, windows, strides, dilations, asymmetric pads and ceil mode, with
 * values at the 8-bit extremes and output rows in several sub-ranges; and
 * against the NCHW ops themselves (ConvInteger with one group per channel,
 * MaxPool, AveragePool on u8 and i8) run through the op table; and the NHWC
 * convolution's gathered windows (few input channels) against ConvInteger. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "ops/conv_epilogue.h"
#include "ops/igemm.h"
#include "ops/nhwc.h"
#include "options.h"
#include "parallel.h"
#include "testutil.h"

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* A value in [lo, hi], the ends a quarter of the time each way (the extremes are tested). */
static int rnd_in(unsigned *s, int lo, int hi)
{
    unsigned r = rnd(s) % 8;
    return r == 0 ? lo : r == 1 ? hi : lo + (int)(rnd(s) % (unsigned)(hi - lo + 1));
}

/* One random geometry (windows of 1..5, strides 1..3, dilations 1..2, pads 0..k-1 on each side,
 * ceil mode for pools; C a multiple of 16 or not, 23 and 40 end in half a vector),
 * its output size as ONNX defines it; 0 when the window does not fit. */
typedef struct shape {
    int64_t C, H, W;
    int ceil_mode;
    qr_conv_geom g;
} shape;

static int make_shape(unsigned *s, int pool, shape *sh)
{
    static const int64_t Cs[] = {1, 3, 16, 17, 23, 32, 40, 96}, HWs[] = {1, 5, 7, 14};
    memset(sh, 0, sizeof *sh);
    sh->C = Cs[rnd(s) % 8];
    sh->H = HWs[rnd(s) % 4];
    sh->W = HWs[rnd(s) % 4];
    sh->ceil_mode = pool && rnd(s) % 2;
    qr_conv_geom *g = &sh->g;
    g->r = 2;
    g->big[0] = sh->H, g->big[1] = sh->W;
    for (int d = 0; d < 2; d++) {
        g->kernel[d] = 1 + rnd(s) % 5;
        g->stride[d] = 1 + rnd(s) % 3;
        g->dilation[d] = 1 + rnd(s) % 2;
        g->pad_begin[d] = rnd(s) % g->kernel[d];
        g->pad_end[d] = rnd(s) % g->kernel[d];
        int64_t span = g->big[d] + g->pad_begin[d] + g->pad_end[d] - (g->kernel[d] - 1) * g->dilation[d] - 1;
        if (span < 0)
            return 0;
        int64_t st = g->stride[d], out = (sh->ceil_mode ? (span + st - 1) / st : span / st) + 1;
        if (sh->ceil_mode && (out - 1) * st >= g->big[d] + g->pad_begin[d]) /* starts in the end pads */
            out--;
        g->small[d] = out;
    }
    g->kernel_n = g->kernel[0] * g->kernel[1];
    g->big_n = sh->H * sh->W;
    g->small_n = g->small[0] * g->small[1];
    return 1;
}

static const char *describe(const shape *sh)
{
    static char buf[256];
    const qr_conv_geom *g = &sh->g;
    snprintf(buf, sizeof buf, "C %lld %lldx%lld -> %lldx%lld, kernel %lldx%lld stride %lldx%lld dilation %lldx%lld "
             "pads %lld,%lld,%lld,%lld ceil %d", (long long)sh->C, (long long)sh->H, (long long)sh->W,
             (long long)g->small[0], (long long)g->small[1], (long long)g->kernel[0], (long long)g->kernel[1],
             (long long)g->stride[0], (long long)g->stride[1], (long long)g->dilation[0], (long long)g->dilation[1],
             (long long)g->pad_begin[0], (long long)g->pad_begin[1], (long long)g->pad_end[0],
             (long long)g->pad_end[1], sh->ceil_mode);
    return buf;
}

/* Output rows in pieces: [0, OH) whole, or cut at up to two random rows. */
static int row_cuts(unsigned *s, int64_t OH, int64_t *cuts)
{
    int n = 0;
    cuts[n++] = 0;
    int64_t a = OH ? (int64_t)(rnd(s) % (unsigned)(OH + 1)) : 0, b = OH ? (int64_t)(rnd(s) % (unsigned)(OH + 1)) : 0;
    if (a > b) {
        int64_t t = a;
        a = b, b = t;
    }
    if (rnd(s) % 4) {
        cuts[n++] = a;
        cuts[n++] = b;
    }
    cuts[n++] = OH;
    return n;
}

/* NCHW element (c, y, x) of an NHWC image */
#define AT(img, sh, c, y, x) ((img)[((y) * (sh)->W + (x)) * (sh)->C + (c)])

/* ---- depthwise ---- */

/* The definition: acc[oy][ox][c] = init[c] + sum over the window's taps inside the image of
 * (x - xz) w, in int64, wrapped to int32 at the end. xs holds the value of each x as its type
 * (i8 or u8), xz the zero point of that type. */
static int32_t dw_ref(const shape *sh, const int32_t *xv, int32_t xz, const int32_t *wv, const int32_t *init,
                      int64_t c, int64_t oy, int64_t ox)
{
    const qr_conv_geom *g = &sh->g;
    int64_t sum = init[c];
    for (int64_t ky = 0; ky < g->kernel[0]; ky++)
        for (int64_t kx = 0; kx < g->kernel[1]; kx++) {
            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
            int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];
            if (iy < 0 || iy >= sh->H || ix < 0 || ix >= sh->W)
                continue;
            sum += (int64_t)(AT(xv, sh, c, iy, ix) - xz) * wv[(c * g->kernel[0] + ky) * g->kernel[1] + kx];
        }
    return (int32_t)(uint32_t)(uint64_t)sum;
}

/* Every depthwise kernel this CPU runs is tested (the portable one always). */
static const char *const dw_isas[] = {"avx512vnni", "avx512vnni-ahead", "avx512vnni-pixels", "avx512f", "avx2", "portable"};

/* One random depthwise case on i8 or u8 activations: the kernel (rows in pieces, a pixel stride
 * past C whose extra lanes must stay untouched) against dw_ref. */
static void check_dw_case(unsigned *s, int signed8)
{
    shape sh;
    while (!make_shape(s, 0, &sh))
        ;
    const qr_conv_geom *g = &sh.g;
    int64_t C = sh.C, n = C * sh.H * sh.W, kn = g->kernel_n, OH = g->small[0], OW = g->small[1];
    int64_t ps = C + (rnd(s) % 2) * 3;
    uint8_t *xb = malloc((size_t)n + 1);
    int32_t *xv = malloc((size_t)n * sizeof(int32_t) + 1);
    int32_t *wk = malloc((size_t)(kn * C) * sizeof(int32_t)), *wv = malloc((size_t)(kn * C) * sizeof(int32_t));
    int32_t *init = malloc((size_t)C * sizeof(int32_t));
    int32_t *acc = malloc((size_t)(OH * OW * ps) * sizeof(int32_t) + 1);
    cr_assert(xb && xv && wk && wv && init && acc);
    for (int64_t i = 0; i < n; i++) { /* the value of the element as its type, and its byte */
        int v = signed8 ? rnd_in(s, -128, 127) : rnd_in(s, 0, 255);
        xv[i] = v;
        xb[i] = (uint8_t)v;
    }
    int32_t xz = signed8 ? rnd_in(s, -128, 127) : rnd_in(s, 0, 255);
    /* w - w_zero of 8-bit weights: -255 .. 255, or in half the cases within s8 (the VNNI kernel's
     * own path; it takes the AVX-512 one's for the others) */
    int s8w = rnd(s) % 2;
    for (int64_t c = 0; c < C; c++) {
        for (int64_t t = 0; t < kn; t++)
            wv[c * kn + t] = wk[t * C + c] = s8w ? rnd_in(s, -128, 127) : rnd_in(s, -255, 255);
        init[c] = rnd(s) % 2 ? (int32_t)(rnd(s) << 8 ^ rnd(s)) : INT32_MAX - (int32_t)(rnd(s) % 1000);
    }
    int64_t cuts[4];
    int nc = row_cuts(s, OH, cuts);
    for (size_t k = 0; k < sizeof dw_isas / sizeof dw_isas[0]; k++) {
        qr_nhwc_dw_fn fn = qr_nhwc_dw_u8_isa(dw_isas[k]);
        if (!fn)
            continue;
        for (int64_t i = 0; i < OH * OW * ps; i++)
            acc[i] = 0x5a5a5a5a;
        for (int i = 0; i + 1 < nc; i++)
            fn(acc + cuts[i] * OW * ps, ps, xb, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0), cuts[i],
               cuts[i + 1]);
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < ps; c++) {
                    int32_t got = acc[(oy * OW + ox) * ps + c];
                    int32_t want = c < C ? dw_ref(&sh, xv, xz, wv, init, c, oy, ox) : 0x5a5a5a5a;
                    cr_assert_eq(got, want, "%s %s %s: (%lld, %lld) channel %lld: %d, want %d", dw_isas[k],
                                 signed8 ? "i8" : "u8", describe(&sh), (long long)oy, (long long)ox, (long long)c,
                                 got, want);
                }
    }
    free(xb);
    free(xv);
    free(wk);
    free(wv);
    free(init);
    free(acc);
}

Test(nhwc, depthwise_matches_the_definition)
{
    for (size_t k = 0; k < sizeof dw_isas / sizeof dw_isas[0]; k++)
        if (!qr_nhwc_dw_u8_isa(dw_isas[k]))
            cr_log_info("this CPU has no %s: its depthwise kernel is not tested", dw_isas[k]);
    unsigned s = 1;
    for (int i = 0; i < 600; i++)
        check_dw_case(&s, i % 2);
}

/* qr_nhwc_dw_u8_rows: what each call of done sees in acc's first row, copied to its place. */
typedef struct dw_rows_seen {
    const int32_t *acc;
    int32_t *out;
    int64_t row, next, bad; /* row: OW * ps elements; next: the row expected; bad: rows out of order */
} dw_rows_seen;

static void dw_rows_copy(void *ctx, int64_t oy)
{
    dw_rows_seen *r = ctx;
    r->bad += oy != r->next;
    r->next = oy + 1;
    memcpy(r->out + oy * r->row, r->acc, (size_t)r->row * sizeof(int32_t));
}

/* A MobileNet-like depthwise layer: C channels of H x W, a 3 x 3 window at stride st, pads 1. */
static shape mobilenet_dw_shape(int64_t C, int64_t H, int64_t W, int64_t st)
{
    shape sh = {.C = C, .H = H, .W = W};
    sh.g = (qr_conv_geom){.r = 2, .big = {H, W}, .kernel = {3, 3}, .stride = {st, st}, .dilation = {1, 1},
                          .pad_begin = {1, 1}, .pad_end = {1, 1}, .kernel_n = 9};
    for (int d = 0; d < 2; d++)
        sh.g.small[d] = (sh.g.big[d] + 2 - 3) / st + 1;
    sh.g.big_n = H * W, sh.g.small_n = sh.g.small[0] * sh.g.small[1];
    return sh;
}

/* The rows one at a time (qr_nhwc_dw_u8_rows, as iconv_nhwc.c runs depthwise layers: each row made
 * in the same place, then handed over), on random geometries (dilations 2: the pixel kernel; weights
 * past s8: the AVX-512 one) and MobileNet-like 3 x 3 layers of ragged channels (17, 40, 100) and
 * widths 1 to 17 at strides 1 and 2, with and without the prefetching rows, the rows in pieces, a
 * pixel stride past C whose lanes stay untouched: every row once, in order, dw_ref's sums. */
Test(nhwc, depthwise_one_row_at_a_time_matches_the_definition)
{
    unsigned s = 31;
    for (int it = 0; it < 160; it++) {
        shape sh;
        int signed8 = it % 2;
        if (it % 2) {
            while (!make_shape(&s, 0, &sh))
                ;
        } else {
            static const int64_t Cs[] = {17, 40, 100, 32};
            sh = mobilenet_dw_shape(Cs[(it / 2) % 4], 1 + rnd(&s) % 9, 1 + (it / 2) % 17, 1 + (it / 4) % 2);
        }
        const qr_conv_geom *g = &sh.g;
        int64_t C = sh.C, n = C * sh.H * sh.W, kn = g->kernel_n, OH = g->small[0], OW = g->small[1];
        int64_t ps = C + (it % 3) * 5;
        uint8_t *xb = malloc((size_t)n + 1);
        int32_t *xv = malloc((size_t)n * sizeof(int32_t) + 1);
        int32_t *wk = malloc((size_t)(kn * C) * sizeof(int32_t)), *wv = malloc((size_t)(kn * C) * sizeof(int32_t));
        int32_t *init = malloc((size_t)C * sizeof(int32_t)), *acc = malloc((size_t)(OW * ps) * sizeof(int32_t) + 1);
        int32_t *out = malloc((size_t)(OH * OW * ps) * sizeof(int32_t) + 1);
        cr_assert(xb && xv && wk && wv && init && acc && out);
        for (int64_t i = 0; i < n; i++) {
            xv[i] = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
            xb[i] = (uint8_t)xv[i];
        }
        int32_t xz = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
        int s8w = it % 5 != 3;
        for (int64_t c = 0; c < C; c++) {
            for (int64_t t = 0; t < kn; t++)
                wv[c * kn + t] = wk[t * C + c] = s8w ? rnd_in(&s, -128, 127) : rnd_in(&s, -255, 255);
            init[c] = (int32_t)(rnd(&s) << 8 ^ rnd(&s));
        }
        for (int64_t i = 0; i < OW * ps; i++)
            acc[i] = 0x5a5a5a5a;
        for (int64_t i = 0; i < OH * OW * ps; i++)
            out[i] = 0x5a5a5a5a;
        int64_t cuts[4];
        int nc = row_cuts(&s, OH, cuts);
        dw_rows_seen seen = {.acc = acc, .out = out, .row = OW * ps};
        for (int i = 0; i + 1 < nc; i++) {
            seen.next = cuts[i];
            qr_nhwc_dw_u8_rows(acc, ps, xb, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0), cuts[i],
                               cuts[i + 1], it % 4 == 1, dw_rows_copy, &seen, NULL);
            cr_assert_eq(seen.next, cuts[i + 1], "%s: rows [%lld, %lld) ended at %lld", describe(&sh),
                         (long long)cuts[i], (long long)cuts[i + 1], (long long)seen.next);
        }
        cr_assert_eq(seen.bad, 0, "%s: rows out of order", describe(&sh));
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < ps; c++) {
                    int32_t got = out[(oy * OW + ox) * ps + c];
                    int32_t want = c < C ? dw_ref(&sh, xv, xz, wv, init, c, oy, ox) : 0x5a5a5a5a;
                    cr_assert_eq(got, want, "%s %s: (%lld, %lld) channel %lld: %d, want %d", signed8 ? "i8" : "u8",
                                 describe(&sh), (long long)oy, (long long)ox, (long long)c, got, want);
                }
        free(xb);
        free(xv);
        free(wk);
        free(wv);
        free(init);
        free(acc);
        free(out);
    }
}

/* The rows handed to done with a requantization given (qr_nhwc_dw_requant): which rows, copied. */
typedef struct dw_rq_seen {
    const int32_t *acc;
    int32_t *out;
    int64_t row;
    uint8_t *via_done; /* per output row: 1 when done was called for it */
} dw_rq_seen;

static void dw_rq_copy(void *ctx, int64_t oy)
{
    dw_rq_seen *r = ctx;
    r->via_done[oy]++;
    memcpy(r->out + oy * r->row, r->acc, (size_t)r->row * sizeof(int32_t));
}

/* The requantization in the kernel (qr_nhwc_dw_u8_rows with rq): on MobileNet-like 3 x 3 layers at
 * strides 1 and 2 (ragged channels, widths 1 to 17, rows in pieces, with and without the prefetching
 * rows) every row is y's bytes round_even(clamp(f32(sum + bias) * m, lo, hi)) + z of dw_ref's sums
 * (scales of both signs, bounds inside and at the type's ends, biases that make the sums wrap) and
 * done is not called for it; on other windows (random geometries) every row goes to done with
 * dw_ref's sums and y is untouched. On a CPU with AVX512-VBMI the 3 x 3 rows must take the kernel's
 * path; elsewhere every row goes to done. */
Test(nhwc, depthwise_requantized_in_the_kernel)
{
    unsigned s = 77;
    __builtin_cpu_init();
    int vbmi = qr_nhwc_dw_u8_isa("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
    int lines_seen = 0;
    for (int it = 0; it < 200; it++) {
        shape sh;
        int signed8 = it % 2, lines = it % 5 != 4;
        if (!lines) {
            while (!make_shape(&s, 0, &sh) || (sh.g.kernel[0] == 3 && sh.g.kernel[1] == 3))
                ;
        } else {
            static const int64_t Cs[] = {17, 40, 100, 32, 144};
            sh = mobilenet_dw_shape(Cs[(it / 2) % 5], 1 + rnd(&s) % 9, 1 + (it / 2) % 17, 1 + (it / 3) % 2);
        }
        const qr_conv_geom *g = &sh.g;
        int64_t C = sh.C, n = C * sh.H * sh.W, kn = g->kernel_n, OH = g->small[0], OW = g->small[1];
        uint8_t *xb = malloc((size_t)n + 1), *y = malloc((size_t)(OH * OW * C) + 1), *via = calloc((size_t)OH + 1, 1);
        int32_t *xv = malloc((size_t)n * sizeof(int32_t) + 1);
        int32_t *wk = malloc((size_t)(kn * C) * sizeof(int32_t)), *wv = malloc((size_t)(kn * C) * sizeof(int32_t));
        int32_t *init = malloc((size_t)C * sizeof(int32_t)), *acc = malloc((size_t)(OW * C) * sizeof(int32_t) + 1);
        int32_t *out = malloc((size_t)(OH * OW * C) * sizeof(int32_t) + 1);
        int32_t *bias = malloc((size_t)C * sizeof(int32_t)), *z = malloc((size_t)C * sizeof(int32_t));
        float *m = malloc((size_t)C * sizeof(float)), *lo = malloc((size_t)C * sizeof(float)),
              *hi = malloc((size_t)C * sizeof(float));
        cr_assert(xb && y && via && xv && wk && wv && init && acc && out && bias && z && m && lo && hi);
        for (int64_t i = 0; i < n; i++) {
            xv[i] = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
            xb[i] = (uint8_t)xv[i];
        }
        int32_t xz = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
        int tl = signed8 ? -128 : 0, th = signed8 ? 127 : 255;
        for (int64_t c = 0; c < C; c++) {
            for (int64_t t = 0; t < kn; t++)
                wv[c * kn + t] = wk[t * C + c] = rnd_in(&s, -128, 127);
            init[c] = (int32_t)(rnd(&s) % 20001) - 10000;
            /* now and then a bias that makes the sums wrap */
            bias[c] = c % 11 == 5 ? INT32_MAX - (int32_t)(rnd(&s) % 1000) : (int32_t)(rnd(&s) % 20001) - 10000;
            m[c] = (float)((int)(rnd(&s) % 2001) - 1000) * (c % 3 ? 1e-4f : 2e-2f);
            z[c] = rnd_in(&s, tl, th);
            int a = rnd_in(&s, tl, th), b = rnd_in(&s, tl, th);
            if (a > b) {
                int t = a;
                a = b, b = t;
            }
            lo[c] = (float)(a - z[c]);
            hi[c] = (float)(b - z[c]);
        }
        memset(y, 0x5a, (size_t)(OH * OW * C));
        for (int64_t i = 0; i < OH * OW * C; i++)
            out[i] = 0x5a5a5a5a;
        qr_nhwc_dw_requant rq = {.bias = bias, .z = z, .m = m, .lo = lo, .hi = hi, .y = y};
        int64_t cuts[4];
        int nc = row_cuts(&s, OH, cuts);
        dw_rq_seen seen = {.acc = acc, .out = out, .row = OW * C, .via_done = via};
        for (int i = 0; i + 1 < nc; i++)
            qr_nhwc_dw_u8_rows(acc, C, xb, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0), cuts[i],
                               cuts[i + 1], it % 4 == 1, dw_rq_copy, &seen, &rq);
        for (int64_t oy = 0; oy < OH; oy++) {
            cr_assert(via[oy] <= 1, "%s: row %lld handed to done %d times", describe(&sh), (long long)oy, via[oy]);
            if (lines && vbmi)
                cr_assert_eq(via[oy], 0, "%s: row %lld not requantized in the kernel", describe(&sh), (long long)oy);
            if (!lines)
                cr_assert_eq(via[oy], 1, "%s: row %lld not handed to done", describe(&sh), (long long)oy);
            lines_seen += !via[oy];
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t at = (oy * OW + ox) * C + c;
                    int32_t sum = dw_ref(&sh, xv, xz, wv, init, c, oy, ox);
                    if (via[oy]) {
                        cr_assert_eq(out[at], sum, "%s: (%lld, %lld) channel %lld: sum %d, want %d", describe(&sh),
                                     (long long)oy, (long long)ox, (long long)c, out[at], sum);
                        cr_assert_eq(y[at], 0x5a, "%s: y written where done was called", describe(&sh));
                        continue;
                    }
                    volatile float f = (float)(int32_t)((uint32_t)sum + (uint32_t)bias[c]) * m[c];
                    float cl = f < lo[c] ? lo[c] : f > hi[c] ? hi[c] : f;
                    uint8_t want = (uint8_t)(int32_t)((int32_t)rintf(cl) + z[c]);
                    cr_assert_eq(y[at], want, "%s %s: (%lld, %lld) channel %lld: %u, want %u", signed8 ? "i8" : "u8",
                                 describe(&sh), (long long)oy, (long long)ox, (long long)c, y[at], want);
                }
        }
        free(xb), free(y), free(via), free(xv), free(wk), free(wv), free(init), free(acc), free(out);
        free(bias), free(z), free(m), free(lo), free(hi);
    }
    if (vbmi)
        cr_assert(lines_seen > 0);
    else
        cr_log_info("this CPU has no AVX512-VBMI: the requantization in the kernel is not tested");
}

/* MobileNet's layers (3x3, stride 1 and 2, pads 1, C a multiple of 16, and 17 for a partial
 * vector; 960 and 700 channels, whose weights the VNNI kernel takes in slices of 128) with sums
 * that wrap: every pixel is interior or border in a known way. */
Test(nhwc, depthwise_3x3_layers_and_wrapping_sums)
{
    unsigned s = 7;
    static const int64_t cfg[][4] = {{32, 14, 14, 1}, {96, 14, 14, 2}, {144, 7, 7, 2}, {17, 9, 8, 1}, {80, 6, 5, 1},
                                     {208, 7, 9, 1}, {576, 5, 4, 2}, {960, 7, 7, 1}, {700, 6, 5, 2}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++)
        for (int v = 0; v < 4; v++) {
            int signed8 = v & 1, s8w = v >> 1;
            shape sh = {.C = cfg[k][0], .H = cfg[k][1], .W = cfg[k][2]};
            qr_conv_geom *g = &sh.g;
            g->r = 2;
            for (int d = 0; d < 2; d++) {
                g->big[d] = d ? sh.W : sh.H;
                g->kernel[d] = 3, g->stride[d] = cfg[k][3], g->dilation[d] = 1;
                g->pad_begin[d] = g->pad_end[d] = 1;
                g->small[d] = (g->big[d] + 2 - 3) / g->stride[d] + 1;
            }
            g->kernel_n = 9;
            int64_t C = sh.C, n = C * sh.H * sh.W, OH = g->small[0], OW = g->small[1];
            uint8_t *xb = malloc((size_t)n);
            int32_t *xv = malloc((size_t)n * sizeof(int32_t)), wk[9 * 960], wv[9 * 960], init[960];
            int32_t *acc = malloc((size_t)(OH * OW * C) * sizeof(int32_t));
            cr_assert(xb && xv && acc);
            for (int64_t i = 0; i < n; i++) { /* extremes: the largest products */
                xv[i] = signed8 ? (rnd(&s) % 2 ? 127 : -128) : (rnd(&s) % 2 ? 255 : 0);
                xb[i] = (uint8_t)xv[i];
            }
            for (int64_t c = 0; c < C; c++) {
                for (int t = 0; t < 9; t++) /* the extremes, of 8-bit weights or of s8 ones (VNNI) */
                    wv[c * 9 + t] = wk[t * C + c] = rnd(&s) % 2 ? (s8w ? 127 : 255) : (s8w ? -128 : -255);
                init[c] = c % 2 ? INT32_MAX - 5 : INT32_MIN + 5; /* one product past either end wraps */
            }
            int32_t xz = signed8 ? -128 : 255;
            int wrapped = 0;
            for (size_t k = 0; k < sizeof dw_isas / sizeof dw_isas[0]; k++) {
                qr_nhwc_dw_fn fn = qr_nhwc_dw_u8_isa(dw_isas[k]);
                if (!fn)
                    continue;
                fn(acc, C, xb, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0), 0, OH);
                for (int64_t oy = 0; oy < OH; oy++)
                    for (int64_t ox = 0; ox < OW; ox++)
                        for (int64_t c = 0; c < C; c++) {
                            int32_t got = acc[(oy * OW + ox) * C + c];
                            int32_t want = dw_ref(&sh, xv, xz, wv, init, c, oy, ox);
                            wrapped += (c % 2) ? want < 0 : want > 0;
                            cr_assert_eq(got, want, "%s %s (%lld, %lld) channel %lld: %d, want %d", dw_isas[k],
                                         describe(&sh), (long long)oy, (long long)ox, (long long)c, got, want);
                        }
            }
            cr_assert(wrapped > 0, "some sums wrap");
            free(xb);
            free(xv);
            free(acc);
        }
}

/* The four-taps-a-dword VNNI kernel's other geometries: windows of 5 to 8 columns (two groups of
 * four taps, the second part padding), unequal pads wider than half a window, stride 2 and 3,
 * odd sizes, channels that are no multiple of 16, zero points and weights of both signs, the rows
 * cut in pieces; and a layer whose rows do not fit its stack (1024 channels, 40 wide), which
 * takes the pixel kernel. Every kernel this CPU has against dw_ref. */
Test(nhwc, depthwise_wide_windows_and_ragged_shapes)
{
    unsigned s = 11;
    /* C, H, W, KH, KW, stride y, stride x, pad top, left, bottom, right */
    static const int64_t cfg[][11] = {{40, 9, 11, 5, 5, 2, 2, 2, 2, 2, 2}, {17, 8, 9, 7, 7, 1, 1, 3, 3, 3, 3},
                                      {24, 6, 13, 3, 8, 1, 1, 1, 4, 0, 3},  {33, 7, 10, 5, 6, 3, 2, 4, 5, 1, 0},
                                      {72, 5, 7, 1, 5, 1, 3, 0, 2, 0, 2},   {1024, 3, 40, 3, 3, 1, 1, 1, 1, 1, 1}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++)
        for (int signed8 = 0; signed8 < 2; signed8++) {
            const int64_t *f = cfg[k];
            shape sh = {.C = f[0], .H = f[1], .W = f[2]};
            qr_conv_geom *g = &sh.g;
            g->r = 2;
            for (int d = 0; d < 2; d++) {
                g->big[d] = d ? sh.W : sh.H;
                g->kernel[d] = f[3 + d], g->stride[d] = f[5 + d], g->dilation[d] = 1;
                g->pad_begin[d] = f[7 + d], g->pad_end[d] = f[9 + d];
                g->small[d] = (g->big[d] + g->pad_begin[d] + g->pad_end[d] - g->kernel[d]) / g->stride[d] + 1;
            }
            g->kernel_n = g->kernel[0] * g->kernel[1];
            g->big_n = sh.H * sh.W, g->small_n = g->small[0] * g->small[1];
            int64_t C = sh.C, n = C * sh.H * sh.W, kn = g->kernel_n, OH = g->small[0], OW = g->small[1];
            uint8_t *xb = malloc((size_t)n);
            int32_t *xv = malloc((size_t)n * sizeof(int32_t)), *wk = malloc((size_t)(kn * C) * sizeof(int32_t));
            int32_t *wv = malloc((size_t)(kn * C) * sizeof(int32_t)), *init = malloc((size_t)C * sizeof(int32_t));
            int32_t *acc = malloc((size_t)(OH * OW * C) * sizeof(int32_t));
            cr_assert(xb && xv && wk && wv && init && acc);
            for (int64_t i = 0; i < n; i++) {
                xv[i] = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
                xb[i] = (uint8_t)xv[i];
            }
            int32_t xz = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 1, 254);
            for (int64_t c = 0; c < C; c++) {
                for (int64_t t = 0; t < kn; t++)
                    wv[c * kn + t] = wk[t * C + c] = rnd_in(&s, -128, 127);
                init[c] = (int32_t)(rnd(&s) << 8 ^ rnd(&s));
            }
            int64_t cuts[4];
            int nc = row_cuts(&s, OH, cuts);
            for (size_t i = 0; i < sizeof dw_isas / sizeof dw_isas[0]; i++) {
                qr_nhwc_dw_fn fn = qr_nhwc_dw_u8_isa(dw_isas[i]);
                if (!fn)
                    continue;
                for (int64_t e = 0; e < OH * OW * C; e++)
                    acc[e] = 0x5a5a5a5a;
                for (int c = 0; c + 1 < nc; c++)
                    fn(acc + cuts[c] * OW * C, C, xb, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0),
                       cuts[c], cuts[c + 1]);
                for (int64_t oy = 0; oy < OH; oy++)
                    for (int64_t ox = 0; ox < OW; ox++)
                        for (int64_t c = 0; c < C; c++) {
                            int32_t got = acc[(oy * OW + ox) * C + c], want = dw_ref(&sh, xv, xz, wv, init, c, oy, ox);
                            cr_assert_eq(got, want, "%s %s %s: (%lld, %lld) channel %lld: %d, want %d", dw_isas[i],
                                         signed8 ? "i8" : "u8", describe(&sh), (long long)oy, (long long)ox,
                                         (long long)c, got, want);
                        }
            }
            free(xb);
            free(xv);
            free(wk);
            free(wv);
            free(init);
            free(acc);
        }
}

/* ---- pools ---- */

/* The definitions on values as their type: the maximum of the window's pixels inside the image
 * (the type's minimum for none); the sum over them divided by the count (inside the image, or
 * inside the padded image), rounded half to even by rint, clamped, 0 for a count of 0. */
static int pool_ref(const shape *sh, const int32_t *xv, int is_max, int include_pad, int lo, int hi, int64_t c,
                    int64_t oy, int64_t ox)
{
    const qr_conv_geom *g = &sh->g;
    int64_t sum = 0, count = 0;
    int m = lo;
    for (int64_t ky = 0; ky < g->kernel[0]; ky++)
        for (int64_t kx = 0; kx < g->kernel[1]; kx++) {
            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
            int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];
            int in_pads = iy >= -g->pad_begin[0] && iy < sh->H + g->pad_end[0] && ix >= -g->pad_begin[1] &&
                          ix < sh->W + g->pad_end[1];
            if (iy < 0 || iy >= sh->H || ix < 0 || ix >= sh->W) {
                count += include_pad && in_pads;
                continue;
            }
            int v = AT(xv, sh, c, iy, ix);
            m = v > m ? v : m;
            sum += v;
            count++;
        }
    if (is_max)
        return m;
    if (count == 0)
        return 0;
    double q = rint((double)sum / (double)count);
    return q < lo ? lo : q > hi ? hi : (int)q;
}

/* One pool case (kind 0 MaxPool, 1 AveragePool, 2 AveragePool with count_include_pad, 3 MaxPool of
 * the image given as NCHW, qr_nhwc_maxpool_nchw_*) of shape sh on random values. */
static void check_pool_shape(unsigned *s, const shape *shp, int signed8, int kind)
{
    const shape sh = *shp;
    const qr_conv_geom *g = &sh.g;
    int64_t C = sh.C, n = C * sh.H * sh.W, OH = g->small[0], OW = g->small[1];
    int lo = signed8 ? -128 : 0, hi = signed8 ? 127 : 255;
    uint8_t *xb = malloc((size_t)n + 1), *y = malloc((size_t)(OH * OW * C) + 1);
    int32_t *xv = malloc((size_t)n * sizeof(int32_t) + 1);
    cr_assert(xb && xv && y);
    for (int64_t i = 0; i < n; i++) {
        xv[i] = rnd_in(s, lo, hi);
        xb[i] = (uint8_t)xv[i];
    }
    memset(y, 0x5a, (size_t)(OH * OW * C));
    int64_t cuts[4];
    int nc = row_cuts(s, OH, cuts);
    uint8_t *xn = NULL, *scratch = NULL;
    if (kind == 3) { /* the NCHW image and scratch for the largest piece, exactly (ASan sees overruns) */
        int64_t most = 0;
        for (int i = 0; i + 1 < nc; i++)
            most = cuts[i + 1] - cuts[i] > most ? cuts[i + 1] - cuts[i] : most;
        xn = malloc((size_t)n + 1);
        scratch = malloc(qr_nhwc_maxpool_nchw_scratch(C, g, most) + 1);
        cr_assert(xn && scratch);
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < sh.H * sh.W; p++)
                xn[c * sh.H * sh.W + p] = xb[p * C + c];
    }
    for (int i = 0; i + 1 < nc; i++) {
        if (kind == 3 && signed8)
            qr_nhwc_maxpool_nchw_i8((int8_t *)y, (const int8_t *)xn, C, g, cuts[i], cuts[i + 1], scratch);
        else if (kind == 3)
            qr_nhwc_maxpool_nchw_u8(y, xn, C, g, cuts[i], cuts[i + 1], scratch);
        else if (kind == 0 && signed8)
            qr_nhwc_maxpool_i8((int8_t *)y, (const int8_t *)xb, C, g, cuts[i], cuts[i + 1]);
        else if (kind == 0)
            qr_nhwc_maxpool_u8(y, xb, C, g, cuts[i], cuts[i + 1]);
        else if (signed8)
            qr_nhwc_avgpool_i8((int8_t *)y, (const int8_t *)xb, C, g, kind == 2, cuts[i], cuts[i + 1]);
        else
            qr_nhwc_avgpool_u8(y, xb, C, g, kind == 2, cuts[i], cuts[i + 1]);
    }
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++)
            for (int64_t c = 0; c < C; c++) {
                uint8_t b = y[(oy * OW + ox) * C + c];
                int got = signed8 ? (int)(int8_t)b : (int)b;
                int want = pool_ref(&sh, xv, kind == 0 || kind == 3, kind == 2, lo, hi, c, oy, ox);
                cr_assert_eq(got, want, "%s %s %s: (%lld, %lld) channel %lld: %d, want %d",
                             kind == 3 ? "MaxPool of NCHW" : kind ? "AveragePool" : "MaxPool", signed8 ? "i8" : "u8",
                             describe(&sh), (long long)oy, (long long)ox, (long long)c, got, want);
            }
    free(xn);
    free(scratch);
    free(xb);
    free(xv);
    free(y);
}

static void check_pool_case(unsigned *s, int signed8, int kind)
{
    shape sh;
    while (!make_shape(s, 1, &sh))
        ;
    check_pool_shape(s, &sh, signed8, kind);
}

Test(nhwc, maxpool_matches_the_definition)
{
    unsigned s = 3;
    for (int i = 0; i < 600; i++)
        check_pool_case(&s, i % 2, 0);
}

Test(nhwc, maxpool_of_nchw_matches_the_definition)
{
    unsigned s = 23;
    for (int i = 0; i < 600; i++)
        check_pool_case(&s, i % 2, 3);
}

/* A 2-D pool geometry without dilation or ceil mode. */
static shape pool_shape(int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh_, int64_t sw, int64_t dw,
                        int64_t pad)
{
    shape sh = {.C = C, .H = H, .W = W};
    qr_conv_geom *g = &sh.g;
    g->r = 2;
    g->big[0] = H, g->big[1] = W;
    g->kernel[0] = kh, g->kernel[1] = kw, g->stride[0] = sh_, g->stride[1] = sw;
    g->dilation[0] = 1, g->dilation[1] = dw;
    g->pad_begin[0] = g->pad_begin[1] = g->pad_end[0] = g->pad_end[1] = pad;
    g->small[0] = (H + 2 * pad - kh) / sh_ + 1;
    g->small[1] = (W + 2 * pad - (kw - 1) * dw - 1) / sw + 1;
    g->kernel_n = kh * kw, g->big_n = H * W, g->small_n = g->small[0] * g->small[1];
    return sh;
}

/* MaxPool's separable rows at the bench models' pools (the small CNN's 2x2 stride 2 over 16 and 32
 * channels, ResNet-18's 3x3 stride 2 pads 1 over 64), rows longer than its stack row (chunks of
 * output pixels), windows of all 2000 or 100 channels too wide for it (slices of channels, with
 * one or 57 output pixels a chunk), and a window wider than the whole stack row (one output at a
 * time); u8 and i8, NHWC and NCHW input. */
Test(nhwc, maxpool_bench_shapes_chunks_and_slices)
{
    const shape shapes[] = {
        pool_shape(16, 28, 28, 2, 2, 2, 2, 1, 0),   pool_shape(32, 14, 14, 2, 2, 2, 2, 1, 0),
        pool_shape(64, 112, 112, 3, 3, 2, 2, 1, 1), pool_shape(96, 3, 300, 3, 3, 1, 1, 1, 1),
        pool_shape(5, 4, 4000, 2, 3, 1, 2, 1, 1),   pool_shape(2000, 3, 5, 3, 5, 1, 1, 2, 3),
        pool_shape(100, 2, 300, 1, 2, 1, 1, 199, 0), pool_shape(2, 2, 16500, 1, 2, 1, 3, 16400, 0),
    };
    unsigned s = 21;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int signed8 = 0; signed8 < 4; signed8++) /* and from NCHW */
            check_pool_shape(&s, &shapes[i], signed8 % 2, signed8 / 2 * 3);
}

Test(nhwc, avgpool_matches_the_definition)
{
    unsigned s = 5;
    for (int i = 0; i < 800; i++)
        check_pool_case(&s, i % 2, 1 + (i / 2) % 2);
}

/* Means that are exact halves round to the even neighbour, negative ones too (the floor of the
 * quotient, not its truncation): 2x1 windows over pairs of known sums. */
Test(nhwc, avgpool_rounds_halves_to_even)
{
    static const int pairs[][2] = {{0, 1}, {1, 2}, {2, 3}, {-1, 0}, {-2, -1}, {-3, -2}, {-128, -127}, {126, 127}};
    enum { N = sizeof pairs / sizeof pairs[0] };
    shape sh = {.C = N, .H = 2, .W = 1};
    qr_conv_geom *g = &sh.g;
    g->r = 2;
    g->big[0] = 2, g->big[1] = 1, g->small[0] = 1, g->small[1] = 1;
    g->kernel[0] = 2, g->kernel[1] = 1, g->stride[0] = g->stride[1] = 1, g->dilation[0] = g->dilation[1] = 1;
    g->kernel_n = 2;
    int8_t x[2 * N], y[N];
    for (int c = 0; c < N; c++)
        x[c] = (int8_t)pairs[c][0], x[N + c] = (int8_t)pairs[c][1];
    qr_nhwc_avgpool_i8(y, x, N, g, 0, 0, 1);
    static const int want[N] = {0, 2, 2, 0, -2, -2, -128, 126};
    for (int c = 0; c < N; c++)
        cr_assert_eq(y[c], want[c], "(%d + %d) / 2: %d, want %d", pairs[c][0], pairs[c][1], y[c], want[c]);
}

/* ---- transposes ---- */

Test(nhwc, transposes_invert_each_other)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 5}, {16, 49}, {17, 196}, {96, 130}, {200, 3}};
    unsigned s = 9;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t C = shapes[k][0], HW = shapes[k][1], n = C * HW;
        uint8_t *a = malloc((size_t)n), *b = malloc((size_t)n), *c = malloc((size_t)n);
        cr_assert(a && b && c);
        for (int64_t i = 0; i < n; i++)
            a[i] = (uint8_t)rnd(&s);
        int64_t cuts[4];
        int nc = row_cuts(&s, HW, cuts);
        for (int i = 0; i + 1 < nc; i++)
            qr_nhwc_to_nchw_u8(b, a, C, HW, cuts[i], cuts[i + 1]);
        for (int64_t p = 0; p < HW; p++)
            for (int64_t ch = 0; ch < C; ch++)
                cr_assert_eq(b[ch * HW + p], a[p * C + ch], "C %lld HW %lld: pixel %lld channel %lld", (long long)C,
                             (long long)HW, (long long)p, (long long)ch);
        nc = row_cuts(&s, HW, cuts);
        for (int i = 0; i + 1 < nc; i++)
            qr_nchw_to_nhwc_u8(c, b, C, HW, cuts[i], cuts[i + 1]);
        cr_assert_arr_eq(c, a, (size_t)n, "C %lld HW %lld: back to NHWC", (long long)C, (long long)HW);
        free(a);
        free(b);
        free(c);
    }
}

/* ---- against the NCHW ops ---- */

/* Runs op on the given inputs (serially); out is allocated here (free with qr_tensor_free). */
static void run_op(const char *op, qr_attr *attrs, int nattr, const qr_tensor **in, int nin, qr_tensor *out)
{
    const qr_op_def *d = qr_op_find("", op);
    cr_assert(d, "op %s is registered", op);
    qr_node n = {.name = "t", .op = op, .domain = "", .opset = 19, .n_in = nin, .n_out = 1, .n_attr = nattr,
                 .attr = attrs, .def = d};
    memset(out, 0, sizeof *out);
    qr_tensor *outs[1] = {out};
    qr_error e;
    qr_kctx k = {.node = &n, .opset = 19, .n_in = nin, .n_out = 1, .in = in, .out = outs, .err = &e};
    cr_assert_eq(d->infer(&k), QR_OK, "%s: %s", op, e.msg);
    cr_assert_eq(qr_tensor_alloc(out, &e), QR_OK);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s: %s", op, e.msg);
}

/* The attributes of sh's windows (pools add ceil_mode and count_include_pad). */
typedef struct win_attrs {
    int64_t ks[2], st[2], dl[2], pd[4];
    qr_attr a[7];
    int n;
} win_attrs;

static void set_win_attrs(win_attrs *w, const shape *sh, int64_t group, int include_pad)
{
    const qr_conv_geom *g = &sh->g;
    for (int d = 0; d < 2; d++) {
        w->ks[d] = g->kernel[d], w->st[d] = g->stride[d], w->dl[d] = g->dilation[d];
        w->pd[d] = g->pad_begin[d], w->pd[2 + d] = g->pad_end[d];
    }
    w->n = 0;
    w->a[w->n++] = (qr_attr){.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = w->ks};
    w->a[w->n++] = (qr_attr){.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = w->st};
    w->a[w->n++] = (qr_attr){.name = "dilations", .kind = QR_ATTR_INTS, .n = 2, .ints = w->dl};
    w->a[w->n++] = (qr_attr){.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = w->pd};
    if (group)
        w->a[w->n++] = (qr_attr){.name = "group", .kind = QR_ATTR_INT, .i = group};
    else {
        w->a[w->n++] = (qr_attr){.name = "ceil_mode", .kind = QR_ATTR_INT, .i = sh->ceil_mode};
        if (include_pad >= 0)
            w->a[w->n++] = (qr_attr){.name = "count_include_pad", .kind = QR_ATTR_INT, .i = include_pad};
    }
}

/* ConvInteger with one group per channel (quant.c's depthwise paths: runs at strides 1 and 2,
 * planes otherwise), per-channel weight zero points, bias 0, against the NHWC kernel on the same
 * image transposed. */
Test(nhwc, depthwise_matches_convinteger)
{
    unsigned s = 11;
    for (int it = 0; it < 200; it++) {
        int signed8 = it % 2;
        shape sh;
        while (!make_shape(&s, 0, &sh))
            ;
        const qr_conv_geom *g = &sh.g;
        int64_t C = sh.C, H = sh.H, W = sh.W, kn = g->kernel_n, OH = g->small[0], OW = g->small[1];
        uint8_t *xn = malloc((size_t)(C * H * W)), *xh = malloc((size_t)(C * H * W));
        int8_t *w = malloc((size_t)(C * kn)), wz[96];
        int32_t *wk = malloc((size_t)(C * kn) * sizeof(int32_t)), init[96] = {0};
        int32_t *acc = malloc((size_t)(OH * OW * C) * sizeof(int32_t) + 1);
        cr_assert(xn && xh && w && wk && acc);
        for (int64_t i = 0; i < C * H * W; i++)
            xn[i] = (uint8_t)(signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255));
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++)
                xh[i * C + c] = xn[c * H * W + i];
        for (int64_t c = 0; c < C; c++) {
            wz[c] = (int8_t)rnd_in(&s, -128, 127);
            for (int64_t t = 0; t < kn; t++) {
                w[c * kn + t] = (int8_t)rnd_in(&s, -128, 127);
                wk[t * C + c] = w[c * kn + t] - wz[c];
            }
        }
        int32_t xz = signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255);
        uint8_t xzb = (uint8_t)xz;
        qr_tensor tx = {.dtype = signed8 ? QR_I8 : QR_U8, .ndim = 4, .dims = {1, C, H, W}, .data = xn};
        qr_tensor tw = {.dtype = QR_I8, .ndim = 4, .dims = {C, 1, g->kernel[0], g->kernel[1]}, .data = w};
        qr_tensor txz = {.dtype = tx.dtype, .ndim = 0, .data = &xzb};
        qr_tensor twz = {.dtype = QR_I8, .ndim = 1, .dims = {C}, .data = wz};
        const qr_tensor *in[4] = {&tx, &tw, &txz, &twz};
        win_attrs wa;
        set_win_attrs(&wa, &sh, C, -1);
        qr_tensor y;
        run_op("ConvInteger", wa.a, wa.n, in, 4, &y);
        cr_assert(y.dims[2] == OH && y.dims[3] == OW, "%s: the op's output is %lldx%lld", describe(&sh),
                  (long long)y.dims[2], (long long)y.dims[3]);
        qr_nhwc_dw_u8(acc, C, xh, C, g, wk, init, signed8 ? 0x80 : 0, xz + (signed8 ? 128 : 0), 0, OH, 0);
        const int32_t *yv = y.data;
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < OH * OW; i++)
                cr_assert_eq(acc[i * C + c], yv[c * OH * OW + i], "%s %s: pixel %lld channel %lld: %d, op %d",
                             signed8 ? "i8" : "u8", describe(&sh), (long long)i, (long long)c, acc[i * C + c],
                             yv[c * OH * OW + i]);
        qr_tensor_free(&y);
        free(xn);
        free(xh);
        free(w);
        free(wk);
        free(acc);
    }
}

/* MaxPool and AveragePool (count_include_pad 0 and 1) on u8 and i8 NCHW images (conv.c's native
 * 8-bit paths) against the NHWC kernels on the same image transposed. */
Test(nhwc, pools_match_the_ops)
{
    unsigned s = 13;
    for (int it = 0; it < 300; it++) {
        int signed8 = it % 2, kind = (it / 2) % 3;
        shape sh;
        while (!make_shape(&s, 1, &sh))
            ;
        const qr_conv_geom *g = &sh.g;
        int64_t C = sh.C, H = sh.H, W = sh.W, OH = g->small[0], OW = g->small[1];
        uint8_t *xn = malloc((size_t)(C * H * W)), *xh = malloc((size_t)(C * H * W));
        uint8_t *yh = malloc((size_t)(OH * OW * C) + 1);
        cr_assert(xn && xh && yh);
        for (int64_t i = 0; i < C * H * W; i++)
            xn[i] = (uint8_t)(signed8 ? rnd_in(&s, -128, 127) : rnd_in(&s, 0, 255));
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++)
                xh[i * C + c] = xn[c * H * W + i];
        qr_tensor tx = {.dtype = signed8 ? QR_I8 : QR_U8, .ndim = 4, .dims = {1, C, H, W}, .data = xn};
        const qr_tensor *in[1] = {&tx};
        win_attrs wa;
        set_win_attrs(&wa, &sh, 0, kind ? kind - 1 : -1);
        qr_tensor y;
        run_op(kind ? "AveragePool" : "MaxPool", wa.a, wa.n, in, 1, &y);
        cr_assert(y.dims[2] == OH && y.dims[3] == OW, "%s: the op's output is %lldx%lld", describe(&sh),
                  (long long)y.dims[2], (long long)y.dims[3]);
        if (kind == 0 && signed8)
            qr_nhwc_maxpool_i8((int8_t *)yh, (const int8_t *)xh, C, g, 0, OH);
        else if (kind == 0)
            qr_nhwc_maxpool_u8(yh, xh, C, g, 0, OH);
        else if (signed8)
            qr_nhwc_avgpool_i8((int8_t *)yh, (const int8_t *)xh, C, g, kind == 2, 0, OH);
        else
            qr_nhwc_avgpool_u8(yh, xh, C, g, kind == 2, 0, OH);
        const uint8_t *yv = y.data;
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < OH * OW; i++)
                cr_assert_eq(yh[i * C + c], yv[c * OH * OW + i], "%s %s %s: pixel %lld channel %lld: %d, op %d",
                             kind ? "AveragePool" : "MaxPool", signed8 ? "i8" : "u8", describe(&sh), (long long)i,
                             (long long)c, yh[i * C + c], yv[c * OH * OW + i]);
        qr_tensor_free(&y);
        free(xn);
        free(xh);
        free(yh);
    }
}

/* ---- convolutions over few channels (iconv_nhwc.c's gathered windows) ---- */

/* The epilogue: the int32 sums as they are, of blocks turned (rows are channels). */
static qr_status copy_sums(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    (void)ep, (void)e;
    int32_t *y = b->y_block;
    for (int64_t r = 0; r < b->rows; r++)
        memcpy(y + r * b->y_rs, b->acc + r * b->acc_rs, (size_t)b->cols * sizeof *y);
    return QR_OK;
}

/* How check_conv's epilogue runs (conv_run): the forms iconv_nhwc.c hands blocks over in. */
enum { EP_SUMS, EP_TURNED, EP_TURNED_THEN, EP_ROWS, EP_ROWS_THEN, EP_FORMS };
static const char *const ep_names[EP_FORMS] = {"sums", "turned", "turned, second stage", "channels last",
                                               "channels last, second stage"};
static int ep_form;
static int32_t *ep_out; /* the node's output, which a channels-last block without y_block writes */

/* The sums plus 3 x their channel, of turned blocks (rows are channels c0 + r): what shows that
 * a block of channels from mid-layer says which it is. */
static qr_status turned_sums(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    (void)ep, (void)e;
    int32_t *y = b->y_block;
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t k = 0; k < b->cols; k++)
            y[b->y_off + r * b->y_rs + k] = b->acc[r * b->acc_rs + k] + 3 * (int32_t)(b->c0 + r);
    return QR_OK;
}

/* The same of channels-last blocks (element (r, k) is channel c0 + k), into the output itself
 * unless the block has its own y. */
static qr_status rows_sums(const qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e)
{
    (void)ep, (void)e;
    int32_t *y = b->y_block ? b->y_block : ep_out;
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t k = 0; k < b->cols; k++)
            y[b->y_off + r * b->y_rs + k] = b->acc[r * b->acc_rs + k] + 3 * (int32_t)(b->c0 + k);
    return QR_OK;
}

/* The second stage: the output's elements [off, off + len) are y's plus 1. */
static qr_status then_plus1(const qr_acc_epilogue *ep, const void *y_rows, int64_t off, int64_t len, qr_error *e)
{
    (void)ep, (void)e;
    const int32_t *y = y_rows;
    for (int64_t i = 0; i < len; i++)
        ep_out[off + i] = y[i] + 1;
    return QR_OK;
}

static qr_status conv_infer(qr_kctx *k)
{
    return qr_convint_infer_nhwc(k, k->in[0], k->in[2], k->in[1], NULL, QR_I32);
}

static const qr_tensor *conv_wzp; /* the weights' zero points conv_run passes (NULL: none) */

static qr_status conv_run(qr_kctx *k)
{
    qr_acc_epilogue ep = {.run = ep_form == EP_SUMS ? copy_sums : turned_sums};
    if (ep_form == EP_ROWS || ep_form == EP_ROWS_THEN)
        ep.run_rows = rows_sums;
    if (ep_form == EP_TURNED_THEN || ep_form == EP_ROWS_THEN) {
        ep.then = then_plus1;
        ep.y_size = sizeof(int32_t);
    }
    ep_out = k->out[0]->data;
    return qr_convint_run_nhwc(k, k->in[0], k->in[2], k->in[1], conv_wzp, 0, &ep, NULL);
}

/* A convolution of group 1 over C channels (C < 16: the gathered rows), N images (blocks span
 * them), M output channels, i8 or u8 activations with a random zero point, x NHWC or NCHW (x_nchw),
 * on pool's threads, its epilogue of the given form: its sums are ConvInteger's bit for bit (the
 * forms but EP_SUMS add 3 x the channel, their second stage 1). */
static void check_conv(unsigned *s, const shape *shp, int64_t N, int64_t M, int signed8, int x_nchw, qr_pool *pool,
                       int form)
{
    const shape sh = *shp;
    const qr_conv_geom *g = &sh.g;
    int64_t C = sh.C, H = sh.H, W = sh.W, kn = g->kernel_n;
    int64_t OH = g->small[0], OW = g->small[1], nx = N * C * H * W;
    uint8_t *xn = malloc((size_t)nx), *xh = malloc((size_t)nx);
    int8_t *w = malloc((size_t)(M * C * kn));
    cr_assert(xn && xh && w);
    for (int64_t i = 0; i < nx; i++)
        xn[i] = (uint8_t)(signed8 ? rnd_in(s, -128, 127) : rnd_in(s, 0, 255));
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++)
                xh[(n * H * W + i) * C + c] = xn[(n * C + c) * H * W + i];
    for (int64_t i = 0; i < M * C * kn; i++)
        w[i] = (int8_t)rnd_in(s, -128, 127);
    uint8_t xzb = (uint8_t)(signed8 ? rnd_in(s, -128, 127) : rnd_in(s, 0, 255));
    qr_tensor tx = {.dtype = signed8 ? QR_I8 : QR_U8, .ndim = 4, .dims = {N, C, H, W}, .data = xn};
    qr_tensor tw = {.dtype = QR_I8, .ndim = 4, .dims = {M, C, g->kernel[0], g->kernel[1]}, .data = w};
    qr_tensor txz = {.dtype = tx.dtype, .ndim = 0, .data = &xzb};
    const qr_tensor *in[3] = {&tx, &tw, &txz};
    win_attrs wa;
    set_win_attrs(&wa, &sh, 1, -1);
    qr_tensor want;
    run_op("ConvInteger", wa.a, wa.n, in, 3, &want);
    cr_assert(want.dims[2] == OH && want.dims[3] == OW);

    qr_tensor th = tx;
    if (!x_nchw) {
        th.dims[1] = H, th.dims[2] = W, th.dims[3] = C;
        th.data = xh;
    }
    wa.a[wa.n++] = (qr_attr){.name = "x_nchw", .kind = QR_ATTR_INT, .i = x_nchw};
    static const qr_op_def def = {.name = "conv", .domain = "qrl", .infer = conv_infer, .run = conv_run};
    qr_node node = {.name = "t", .op = "conv", .domain = "qrl", .opset = 1, .n_in = 3, .n_out = 1,
                    .n_attr = wa.n, .attr = wa.a, .def = &def};
    const qr_tensor *gin[3] = {&th, &tw, &txz};
    qr_tensor got = {0}, *outs[1] = {&got};
    qr_error e;
    qr_kctx k = {.node = &node, .opset = 1, .n_in = 3, .n_out = 1, .in = gin, .out = outs, .err = &e, .pool = pool};
    cr_assert_eq(def.infer(&k), QR_OK, "%s", e.msg);
    cr_assert(got.dims[1] == OH && got.dims[2] == OW && got.dims[3] == M);
    cr_assert_eq(qr_tensor_alloc(&got, &e), QR_OK);
    ep_form = form;
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s", e.msg);
    const int32_t *yv = want.data, *yh = got.data;
    int then = form == EP_TURNED_THEN || form == EP_ROWS_THEN;
    static const char *const split_names[] = {"auto", "rows", "cols"};
    const char *split = split_names[qr_options_get()->split];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < OH * OW; i++) {
                int32_t w = yv[(n * M + m) * OH * OW + i] + (form == EP_SUMS ? 0 : 3 * (int32_t)m) + then;
                cr_assert_eq(yh[(n * OH * OW + i) * M + m], w,
                             "%s %s, N %lld M %lld, %d threads, split %s, epilogue %s, %s: image %lld pixel %lld "
                             "channel %lld: %d, op %d", signed8 ? "i8" : "u8", x_nchw ? "NCHW" : "NHWC",
                             (long long)N, (long long)M, qr_pool_threads(pool), split,
                             ep_names[form], describe(&sh), (long long)n, (long long)i, (long long)m,
                             yh[(n * OH * OW + i) * M + m], w);
            }
    qr_tensor_free(&want);
    qr_tensor_free(&got);
    free(xn);
    free(xh);
    free(w);
}

/* Both gathers: by columns (gather_cols_avx512, where the CPU has AVX512-VBMI, the rows are
 * undilated and stride x rows is at most 32) and a pixel's row at a time (gather=rows). */
static void check_gathered(unsigned *s, const shape *shp, int64_t N, int64_t M, int signed8, int x_nchw, qr_pool *pool)
{
    for (int rows = 0; rows < 2; rows++) {
        tu_option("gather", rows ? "rows" : "");
        check_conv(s, shp, N, M, signed8, x_nchw, pool, EP_SUMS);
    }
    tu_option("gather", "");
}

/* Random geometries (windows 1..5, strides 1..3, dilations 1..2, pads), C of 1 to 15, 1 to 3
 * images, 1 to 40 output channels; every fifth image 150 to 350 pixels wide (long runs, cut by
 * gather_rows' stack rows). */
Test(nhwc, gathered_convolutions_match_convinteger)
{
    static const int64_t Cs[] = {1, 2, 3, 4, 7, 15};
    unsigned s = 17;
    qr_pool *two = qr_pool_new(2);
    for (int it = 0; it < 240; it++) {
        int x_nchw = (it / 2) % 2;
        shape sh;
        while (!make_shape(&s, 0, &sh) || (!x_nchw && sh.g.kernel_n == 1)) /* one tap of NHWC is no gather */
            ;
        sh.C = Cs[rnd(&s) % 6];
        qr_conv_geom *g = &sh.g;
        if (it % 5 == 0) {
            sh.W = g->big[1] = 150 + rnd(&s) % 200;
            g->small[1] = (sh.W + g->pad_begin[1] + g->pad_end[1] - (g->kernel[1] - 1) * g->dilation[1] - 1) /
                              g->stride[1] + 1;
            g->big_n = sh.H * sh.W, g->small_n = g->small[0] * g->small[1];
        }
        int64_t N = 1 + rnd(&s) % 3, M = 1 + rnd(&s) % 40;
        check_gathered(&s, &sh, N, M, it % 2, x_nchw, it % 3 ? NULL : two);
    }
    qr_pool_free(two);
}

/* A geometry of 3x3 windows, stride 1 or 2, pads 1, dilation 1. */
static shape square3(int64_t C, int64_t HW, int64_t stride)
{
    shape sh = {.C = C, .H = HW, .W = HW};
    int64_t o = (HW + 2 - 3) / stride + 1;
    sh.g = (qr_conv_geom){.r = 2, .big = {HW, HW}, .small = {o, o}, .kernel = {3, 3}, .stride = {stride, stride},
                          .dilation = {1, 1}, .pad_begin = {1, 1}, .pad_end = {1, 1}, .big_n = HW * HW,
                          .small_n = o * o, .kernel_n = 9};
    return sh;
}

/* The bench models' stems at their sizes: ResNet-18's 7x7 stride 2 pads 3 over 3 channels of
 * 224 x 224 (64 outputs), the small CNN's 3x3 pads 1 over one channel of 28 x 28 (16 outputs),
 * the small ResNet's over 3 of 32 x 32 (16), MobileNetV2's stride 2 over 3 channels, here of
 * 31 x 33 (21 outputs: a ragged vector); 3 x 3 over one channel of 27 x 29 (21 outputs), 4 x 3 over
 * 8 (32 rows a window, the column gather's most); a 3 x 3 stride 3 over 10 (90: a row at a time
 * under gather=auto too);
 * a 23 x 23 window over 15 channels (too many window rows for gather_rows' stack rows: the byte
 * loop), and a left pad wider than the window. */
Test(nhwc, gathered_stems_match_convinteger)
{
    unsigned s = 19;
    qr_pool *two = qr_pool_new(2);
    shape r = {.C = 3, .H = 224, .W = 224}, f = {.C = 1, .H = 28, .W = 28};
    r.g = (qr_conv_geom){.r = 2, .big = {224, 224}, .small = {112, 112}, .kernel = {7, 7}, .stride = {2, 2},
                         .dilation = {1, 1}, .pad_begin = {3, 3}, .pad_end = {3, 3}, .big_n = 224 * 224,
                         .small_n = 112 * 112, .kernel_n = 49};
    f.g = (qr_conv_geom){.r = 2, .big = {28, 28}, .small = {28, 28}, .kernel = {3, 3}, .stride = {1, 1},
                         .dilation = {1, 1}, .pad_begin = {1, 1}, .pad_end = {1, 1}, .big_n = 28 * 28,
                         .small_n = 28 * 28, .kernel_n = 9};
    shape wide = {.C = 15, .H = 26, .W = 25}, padded = {.C = 3, .H = 6, .W = 7};
    wide.g = (qr_conv_geom){.r = 2, .big = {26, 25}, .small = {5, 3}, .kernel = {23, 23}, .stride = {1, 2},
                            .dilation = {1, 1}, .pad_begin = {1, 2}, .pad_end = {0, 1}, .big_n = 26 * 25,
                            .small_n = 5 * 3, .kernel_n = 23 * 23};
    padded.g = (qr_conv_geom){.r = 2, .big = {6, 7}, .small = {8, 18}, .kernel = {2, 2}, .stride = {1, 1},
                              .dilation = {1, 1}, .pad_begin = {2, 12}, .pad_end = {1, 0}, .big_n = 6 * 7,
                              .small_n = 8 * 18, .kernel_n = 4};
    shape sr = square3(3, 32, 1), mv = square3(3, 31, 2), odd = {.C = 1, .H = 27, .W = 29};
    mv.W = mv.g.big[1] = 33, mv.g.small[1] = 17, mv.g.big_n = 31 * 33, mv.g.small_n = 16 * 17;
    odd.g = (qr_conv_geom){.r = 2, .big = {27, 29}, .small = {27, 29}, .kernel = {3, 3}, .stride = {1, 1},
                           .dilation = {1, 1}, .pad_begin = {1, 1}, .pad_end = {1, 1}, .big_n = 27 * 29,
                           .small_n = 27 * 29, .kernel_n = 9};
    shape tall = {.C = 8, .H = 11, .W = 13}, s3 = {.C = 10, .H = 12, .W = 19};
    tall.g = (qr_conv_geom){.r = 2, .big = {11, 13}, .small = {11, 13}, .kernel = {4, 3}, .stride = {1, 1},
                            .dilation = {1, 1}, .pad_begin = {1, 1}, .pad_end = {2, 1}, .big_n = 11 * 13,
                            .small_n = 11 * 13, .kernel_n = 12};
    s3.g = (qr_conv_geom){.r = 2, .big = {12, 19}, .small = {4, 7}, .kernel = {3, 3}, .stride = {3, 3},
                          .dilation = {1, 1}, .pad_begin = {0, 1}, .pad_end = {0, 1}, .big_n = 12 * 19,
                          .small_n = 4 * 7, .kernel_n = 9};
    for (int it = 0; it < 4; it++) {
        check_gathered(&s, &sr, 3, 16, it % 2, 1, it / 2 ? two : NULL);
        check_gathered(&s, &mv, 2, 21, it % 2, 1, it / 2 ? two : NULL);
        check_gathered(&s, &odd, 2, 21, it % 2, it / 2, it / 2 ? two : NULL);
        check_gathered(&s, &tall, 2, 40, it % 2, it % 3 == 0, it / 2 ? two : NULL);
        check_gathered(&s, &s3, 3, 16, it % 2, it / 2, it / 2 ? two : NULL);
        check_gathered(&s, &r, 1, 64, it % 2, 1, it / 2 ? two : NULL);
        check_gathered(&s, &f, 5, 16, it % 2, it / 2, it / 2 ? two : NULL);
        check_gathered(&s, &wide, 2, 24, it % 2, it / 2, it / 2 ? two : NULL);
        check_gathered(&s, &padded, 2, 8, it % 2, it / 2, it / 2 ? two : NULL);
    }
    qr_pool_free(two);
}

/* A geometry from its window, strides, pads (begin, end) and image size, undilated. */
static shape geom(int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sy, int64_t sx, int64_t pt,
                  int64_t pl, int64_t pb, int64_t pr)
{
    shape sh = {.C = C, .H = H, .W = W};
    int64_t oh = (H + pt + pb - kh) / sy + 1, ow = (W + pl + pr - kw) / sx + 1;
    sh.g = (qr_conv_geom){.r = 2, .big = {H, W}, .small = {oh, ow}, .kernel = {kh, kw}, .stride = {sy, sx},
                          .dilation = {1, 1}, .pad_begin = {pt, pl}, .pad_end = {pb, pr}, .big_n = H * W,
                          .small_n = oh * ow, .kernel_n = kh * kw};
    return sh;
}

/* Windows gathered by output columns (iconv_nhwc.c's gather_stack: windows taller than the
 * vertical stride, rows of more than 32 bytes a pixel for the column gather): the ResNet stem's
 * 7 x 7 stride 2 pads 3 over 3 channels of small images (blocks of several images: pieces), 8
 * wide windows (no word spilling past a segment), strides 1 to 3 across, pads wider than the
 * window, one image on two threads (blocks cut mid-row: pieces of part of one output row), x NCHW
 * and NHWC, i8 and u8, ragged output channels; 2 and 4 channels too (rows over 64 pixels);
 * against ConvInteger and gather=rows. */
Test(nhwc, stacked_windows_match_convinteger)
{
    unsigned s = 23;
    qr_pool *two = qr_pool_new(2);
    const shape shapes[] = {
        geom(3, 19, 23, 7, 7, 2, 2, 3, 3, 3, 3), geom(3, 224, 224, 7, 7, 2, 2, 3, 3, 3, 3),
        geom(5, 13, 30, 5, 8, 2, 3, 2, 1, 1, 4), geom(12, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1),
        geom(3, 8, 9, 4, 5, 3, 3, 0, 6, 2, 0), geom(3, 17, 40, 6, 2, 1, 2, 5, 1, 0, 1),
        geom(2, 70, 75, 7, 7, 2, 2, 3, 3, 3, 3), geom(4, 67, 90, 5, 6, 2, 1, 2, 1, 3, 2),
    };
    static const int64_t Ns[] = {3, 1, 2, 4, 2, 1, 2, 1}, Ms[] = {64, 64, 21, 70, 8, 33, 19, 40};
    for (int it = 0; it < 4; it++)
        for (int i = 0; i < (int)(sizeof shapes / sizeof *shapes); i++)
            check_gathered(&s, &shapes[i], Ns[i], Ms[i], it % 2, (it + i) % 2 || i == 1,
                           it / 2 ? two : NULL);
    qr_pool_free(two);
}

/* The output channels cut into parts of whole 64-channel strips, one task each (iconv_nhwc.c's
 * channel_parts: split=cols forces it, on one thread too), give the same sums as blocks of
 * pixels (split=rows) and as the choice by shape: 2 to 4 strips, ragged (80, 200: a last
 * strip of 16 or 8 channels) or not (128), every epilogue form (turned and channels last, with a
 * second stage on whole rows of y and without), one image and three (blocks spanning them), the
 * dense rows and the gathered ones (3 input channels), 1 and 2 threads. */
Test(nhwc, channel_parts_match_convinteger)
{
    static const char *const splits[] = {"cols", "rows", NULL};
    const struct {
        shape sh;
        int64_t M;
        int x_nchw;
    } cases[] = {{square3(32, 14, 1), 80, 0}, {square3(24, 7, 1), 200, 0}, {square3(40, 9, 2), 128, 0},
                 {square3(3, 12, 1), 80, 1}};
    unsigned s = 23;
    qr_pool *two = qr_pool_new(2);
    for (int sp = 0; sp < 3; sp++) {
        tu_option("split", splits[sp] ? splits[sp] : "");
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int form = EP_TURNED; form < EP_FORMS; form++)
                for (int it = 0; it < 4; it++)
                    check_conv(&s, &cases[c].sh, it % 2 ? 3 : 1, cases[c].M, (int)(c + form) % 2, cases[c].x_nchw,
                               it / 2 ? two : NULL, form);
    }
    tu_option("split", "");
    qr_pool_free(two);
}

/* Dense convolutions of 16 or more channels (window_rows: runs of interior windows pointed at a
 * step of the stride, up to 8 taps in one vector, 9 to 16 in two, more a window at a time; border
 * windows position by position) on random geometries (windows 1 to 5 a side, strides 1 to 3,
 * dilations 1 and 2, pads), widths up to 17 and wider rows, one to three images, 1 and 2 threads,
 * against ConvInteger. */
Test(nhwc, dense_windows_match_convinteger)
{
    unsigned s = 37;
    qr_pool *two = qr_pool_new(2);
    for (int it = 0; it < 90; it++) {
        shape sh;
        while (!make_shape(&s, 0, &sh) || sh.C < 16)
            ;
        qr_conv_geom *g = &sh.g;
        if (it % 3 == 0) { /* a wider row: long runs of interior windows */
            sh.W = g->big[1] = 17 + rnd(&s) % 20;
            g->small[1] = (sh.W + g->pad_begin[1] + g->pad_end[1] - (g->kernel[1] - 1) * g->dilation[1] - 1) /
                              g->stride[1] + 1;
            g->big_n = sh.H * sh.W, g->small_n = g->small[0] * g->small[1];
        }
        int64_t N = 1 + rnd(&s) % 3, M = 1 + rnd(&s) % 40;
        check_conv(&s, &sh, N, M, it % 2, 0, it % 3 == 1 ? two : NULL, it % 4 < 2 ? EP_ROWS : EP_TURNED);
    }
    qr_pool_free(two);
}

/* 1 x 1 convolutions (window_rows_1x1 where there is no padding: a pointer a pixel, stepped by the
 * stride along a row, blocks spanning rows and images): widths 1 to 17, strides 1 and 2 in either
 * direction, C not a multiple of 16 (17, 24, 100) or one (16), ragged M, one to three images, i8
 * and u8, the turned and channels-last epilogues, 1 and 2 threads; and 1 x 1 windows with a pad
 * (the general loop's padding row), against ConvInteger. */
Test(nhwc, pointwise_convolutions_match_convinteger)
{
    static const int64_t Cs[] = {16, 17, 24, 100};
    unsigned s = 29;
    qr_pool *two = qr_pool_new(2);
    for (int it = 0; it < 48; it++) {
        shape sh = {.C = Cs[it % 4], .H = 1 + rnd(&s) % 17, .W = 1 + (it * 5 + rnd(&s) % 3) % 17};
        if (it % 8 == 0)
            sh.W = 1;
        qr_conv_geom *g = &sh.g;
        g->r = 2;
        for (int d = 0; d < 2; d++) {
            g->big[d] = d ? sh.W : sh.H;
            g->kernel[d] = 1, g->dilation[d] = 1;
            g->stride[d] = 1 + (it / 4 + d) % 2 * (rnd(&s) % 2);
            g->pad_begin[d] = it % 6 == 5 && d == it % 2 ? 1 : 0; /* some padded: the general loop */
            g->pad_end[d] = g->pad_begin[d];
            g->small[d] = (g->big[d] + g->pad_begin[d] + g->pad_end[d] - 1) / g->stride[d] + 1;
        }
        g->kernel_n = 1;
        g->big_n = sh.H * sh.W, g->small_n = g->small[0] * g->small[1];
        int64_t N = 1 + rnd(&s) % 3, M = 1 + rnd(&s) % 70;
        check_conv(&s, &sh, N, M, it % 2, 0, it % 3 == 2 ? two : NULL, it % 4 < 2 ? EP_ROWS : EP_TURNED);
    }
    qr_pool_free(two);
}

/* AMX-INT8 (runtime/ops/igemm_iconv_amx.c) and the AVX-512 VNNI kernels it stands in for (amx=0)
 * on ResNet-18's kinds of layers at small sizes, against ConvInteger: 3 x 3 over 64 channels
 * (K 576, nine whole 64s), stride 2 over 128 to 200 outputs (ragged strips of 64), the 1 x 1
 * stride-2 downsample (one tap), 24 and 40 channels (K 216 and 360: a ragged last 64 of K), pixels
 * not a multiple of 16 (7 x 7 = 49, 5 x 5 = 25 and the blocks' ends), M 1, 17, 40, 130; i8 and u8
 * inputs with random zero points, both signs of weights; the channels-last and turned epilogues;
 * 1 and 2 threads, split by rows and by channels. Where the CPU has no AMX the VNNI half runs. */
Test(nhwc, amx_and_vnni_convolutions_match_convinteger)
{
    if (!qr_amx_usable())
        cr_log_info("this CPU (or OS) has no AMX-INT8: the amx=0 half runs alone");
    shape pw = {.C = 64, .H = 13, .W = 13};
    pw.g = (qr_conv_geom){.r = 2, .big = {13, 13}, .small = {7, 7}, .kernel = {1, 1}, .stride = {2, 2},
                          .dilation = {1, 1}, .big_n = 169, .small_n = 49, .kernel_n = 1};
    const struct {
        shape sh;
        int64_t M;
    } cases[] = {{square3(64, 7, 1), 64}, {square3(64, 9, 2), 130}, {pw, 128}, {square3(24, 11, 1), 40},
                 {square3(40, 5, 1), 17}, {square3(128, 4, 1), 200}, {square3(16, 6, 2), 1}};
    static const char *const splits[] = {"", "cols"};
    unsigned s = 41;
    qr_pool *two = qr_pool_new(2);
    for (int amx = 0; amx < 2; amx++) {
        if (!amx && !qr_amx_usable())
            continue;
        tu_option("amx", amx ? "0" : "");
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int it = 0; it < 4; it++) {
                tu_option("split", splits[it / 2]);
                check_conv(&s, &cases[c].sh, 1 + (int64_t)(c + it) % 2, cases[c].M, (int)(c + it) % 2, 0,
                           it % 2 ? two : NULL, it % 2 ? EP_ROWS : EP_TURNED);
            }
    }
    tu_option("split", "");
    tu_option("amx", "");
    qr_pool_free(two);
}

/* The dense NHWC kernels take weights of zero point 0 only: zero points of 0 (i8, u8 and i32
 * tensors: the byte scan and the generic loop) give ConvInteger's sums, and one that is not 0,
 * first, last or alone in its tensor, is an error, not sums without it. */
Test(nhwc, dense_weight_zero_points_must_be_zero)
{
    unsigned s = 29;
    const int64_t M = 40;
    const qr_dtype types[] = {QR_I8, QR_U8, QR_I32};
    int32_t zp[40];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int bad = -1; bad < 3; bad++) { /* -1: all 0; else which one is not 0 */
            int64_t n = bad == 2 ? 1 : M, at = bad == 0 ? 0 : n - 1;
            size_t es = qr_dtype_size(types[t]);
            memset(zp, 0, sizeof zp);
            if (bad >= 0) {
                if (es == 1)
                    ((uint8_t *)zp)[at] = types[t] == QR_I8 ? 0xff : 1; /* -1 and 1 */
                else
                    zp[at] = 1 << 20; /* no low byte: a byte test of i32s would miss it */
            }
            qr_tensor twz = {.dtype = types[t], .ndim = 1, .dims = {n}, .data = zp};
            conv_wzp = &twz;
            shape sh = square3(32, 6, 1);
            if (bad < 0) {
                check_conv(&s, &sh, 1, M, 0, 0, NULL, EP_SUMS);
                continue;
            }
            uint8_t x[6 * 6 * 32] = {0}, xz = 0;
            int8_t w[40 * 32 * 9] = {0};
            qr_tensor tx = {.dtype = QR_U8, .ndim = 4, .dims = {1, 6, 6, 32}, .data = x};
            qr_tensor tw = {.dtype = QR_I8, .ndim = 4, .dims = {M, 32, 3, 3}, .data = w};
            qr_tensor txz = {.dtype = QR_U8, .ndim = 0, .data = &xz};
            win_attrs wa;
            set_win_attrs(&wa, &sh, 1, -1);
            static const qr_op_def def = {.name = "conv", .domain = "qrl", .infer = conv_infer, .run = conv_run};
            qr_node node = {.name = "t", .op = "conv", .domain = "qrl", .opset = 1, .n_in = 3, .n_out = 1,
                            .n_attr = wa.n, .attr = wa.a, .def = &def};
            const qr_tensor *gin[3] = {&tx, &tw, &txz};
            qr_tensor got = {0}, *outs[1] = {&got};
            qr_error e = {0};
            qr_kctx k = {.node = &node, .opset = 1, .n_in = 3, .n_out = 1, .in = gin, .out = outs, .err = &e};
            cr_assert_eq(def.infer(&k), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_tensor_alloc(&got, &e), QR_OK);
            ep_form = EP_SUMS;
            cr_assert_eq(qr_op_run(&k), QR_ERR, "%s zero point %lld of %lld not 0: the run went on",
                         qr_dtype_name(types[t]), (long long)at, (long long)n);
            cr_assert(strstr(e.msg, "zero point 0"), "%s", e.msg);
            qr_tensor_free(&got);
        }
    conv_wzp = NULL;
}
