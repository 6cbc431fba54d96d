/* runtime/ops/requant_prog.h: which epilogue programs reduce to one requantization per channel,
 * and the reduced values' bytes against the program's own definition (compiler/vecmap.h's rules
 * written out in C: testutil.h tu_qlinear_byte) on channel values of
 * both signs, at the edges the reduction still takes, and on the ones it must refuse. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/requant_prog.h"
#include "testutil.h"

/* the stdlib's qlinear as the compiler writes it (tests/unit/test_vecmap.c the_stdlib_requantization):
 * tables m (0, f32), bias (1, i32), y_zero (2, i32), floor (3, f32), top (4, f32) */
static const char *const qlinear_u8 = "tabi 2;tabf 3;tabf 4;tabf 0;tabi 1;acc;addi 5 4;cvtf 6;mulf 7 3;rint 8;cvtf 0;"
                                      "addf 9 10;maxf 11 1;minf 12 2;satf.u8 13";
static const char *const qlinear_i8 = "tabi 2;tabf 3;tabf 4;tabf 0;tabi 1;acc;addi 5 4;cvtf 6;mulf 7 3;rint 8;cvtf 0;"
                                      "addf 9 10;maxf 11 1;minf 12 2;satf.i8 13";

static int avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

Test(requant_prog, the_stdlib_requantization_matches)
{
    qr_rqp p;
    cr_assert(qr_rqp_match(qlinear_u8, &p));
    cr_expect(p.has_bias && !p.i8);
    cr_expect(p.m.tab == 0 && p.m.is_f32 && !p.m.cvt);
    cr_expect(p.bias.tab == 1 && !p.bias.is_f32);
    cr_expect(p.z.tab == 2 && p.z.cvt && !p.z.is_f32);
    cr_expect(p.lo.tab == 3 && p.hi.tab == 4);
    cr_assert(qr_rqp_match(qlinear_i8, &p));
    cr_expect(p.i8);
}

Test(requant_prog, operand_orders_constants_and_no_bias)
{
    qr_rqp p;
    /* commuted operands, constant bounds (0 and 6 / 0.05 = 120), no bias */
    cr_assert(qr_rqp_match("acc;cvtf 0;tabf 0;mulf 2 1;rint 3;consti 3;cvtf 5;addf 6 4;constf 0;maxf 8 7;"
                           "constf 42f00000;minf 10 9;satf.u8 11",
                           &p));
    cr_expect(!p.has_bias);
    cr_expect(p.z.tab == -1 && p.z.bits == 3 && p.z.cvt);
    cr_expect(p.lo.tab == -1 && p.lo.bits == 0 && p.hi.bits == 0x42f00000u);
    /* the bias first in its addi */
    cr_assert(qr_rqp_match("tabi 0;acc;addi 0 1;cvtf 2;tabf 1;mulf 3 4;rint 5;tabf 2;addf 7 6;tabf 3;maxf 8 9;"
                           "tabf 4;minf 10 11;satf.i8 12",
                           &p));
    cr_expect(p.has_bias && p.bias.tab == 0 && p.i8);
}

Test(requant_prog, other_programs_do_not_match)
{
    static const char *const bad[] = {
        "",
        "acc;sati.u8 0",
        /* no rint */
        "acc;cvtf 0;tabf 0;mulf 1 2;tabf 1;addf 3 4;tabf 2;maxf 5 6;tabf 3;minf 7 8;satf.u8 9",
        /* min and max swapped */
        "acc;cvtf 0;tabf 0;mulf 1 2;rint 3;tabf 1;addf 4 5;tabf 2;minf 6 7;tabf 3;maxf 8 9;satf.u8 10",
        /* the zero point reads the accumulator */
        "acc;cvtf 0;tabf 0;mulf 1 2;rint 3;addf 4 3;tabf 2;maxf 5 6;tabf 3;minf 7 8;satf.u8 9",
        /* the scale reads the accumulator */
        "acc;cvtf 0;mulf 1 1;rint 2;tabf 0;addf 3 4;tabf 1;maxf 5 6;tabf 2;minf 7 8;satf.u8 9",
        /* a zero point computed from two tables */
        "acc;cvtf 0;tabf 0;mulf 1 2;rint 3;tabf 1;tabf 2;addf 5 6;addf 4 7;tabf 3;maxf 8 9;tabf 4;minf 10 11;satf.u8 12",
        /* the sum shifted by a subtraction, not an addi */
        "acc;tabi 0;subi 0 1;cvtf 2;tabf 1;mulf 3 4;rint 5;tabf 2;addf 6 7;tabf 3;maxf 8 9;tabf 4;minf 10 11;satf.u8 12",
        /* not a program: unknown opcode, operand out of range, trailing text */
        "acc;cvtq 0",
        "acc;cvtf 3",
        "acc;cvtf 0 x",
        /* a joined program reading a skip tensor */
        "skip.u8;acc;cvtf 1;tabf 0;mulf 2 3;rint 4;tabf 1;addf 5 6;tabf 2;maxf 7 8;tabf 3;minf 9 10;satf.u8 11",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qr_rqp p;
        cr_expect_eq(qr_rqp_match(bad[i], &p), 0, "matched: %s", bad[i]);
    }
    qr_rqp p;
    cr_expect_eq(qr_rqp_match(NULL, &p), 0);
    /* a value off the chain (dead) changes nothing */
    cr_expect(qr_rqp_match("acc;cvtf 0;tabf 0;mulf 1 2;rint 3;tabf 1;addf 4 5;tabf 2;maxf 6 7;tabf 3;minf 8 9;"
                           "negf 1;satf.u8 10",
                           &p));
}

/* the reduced form a kernel runs: round_even(clamp(f32(acc + bias) * m, lo, hi)) + z, its low byte */
static uint8_t reduced_byte(int32_t acc, int32_t bias, float m, float lo, float hi, int32_t z)
{
    volatile float x = (float)(int32_t)((uint32_t)acc + (uint32_t)bias) * m;
    float c = x < lo ? lo : x > hi ? hi : x;
    return (uint8_t)(int32_t)((int64_t)rintf(c) + z);
}

static uint32_t seed = 7;
static uint32_t next(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

enum { N = 80 };

/* tables[5][N] of channels of both signs, Relu and Clip bounds, and the edges the reduction takes:
 * products overflowing to infinities, zero points of +-2^23, bounds outside the type or crossed,
 * no bounds, the rounding's ties */
static void tables(int32_t t[5][N], int i8)
{
    for (int c = 0; c < N; c++) {
        float m = (float)((int)(next() % 2001) - 1000) * 3e-5f, lo = -INFINITY, hi = INFINITY;
        int32_t bias = (int32_t)(next() % 200001) - 100000, yz = (int32_t)(next() % 256) - (i8 ? 128 : 0);
        if (c % 3 == 0)
            lo = (float)yz;
        if (c % 4 == 1)
            lo = (float)(yz - 30), hi = (float)(yz + 40);
        if (c >= 48) {
            static const float ms[] = {1e30f, -1e30f, 0.0f, -0.0f, 3e-45f, 1.5f, 0.5f, -0.25f};
            int k = c - 48;
            m = k < 8 ? ms[k] : m;
            yz = k == 8 ? 1 << 23 : k == 9 ? -(1 << 23) : k == 10 ? 300 : yz;
            lo = k == 11 ? 400.0f : k == 12 ? 50.0f : k == 13 ? -1e9f : lo;
            hi = k == 11 ? 500.0f : k == 12 ? 20.0f : k == 13 ? 1e9f : k == 14 ? -300.0f : hi;
        }
        memcpy(&t[0][c], &m, 4);
        t[1][c] = bias;
        t[2][c] = yz;
        memcpy(&t[3][c], &lo, 4);
        memcpy(&t[4][c], &hi, 4);
    }
}

Test(requant_prog, reduced_values_give_the_programs_bytes)
{
    if (!avx512())
        cr_skip_test("no AVX-512F");
    for (int i8 = 0; i8 < 2; i8++) {
        qr_rqp p;
        cr_assert(qr_rqp_match(i8 ? qlinear_i8 : qlinear_u8, &p));
        int32_t t[5][N];
        tables(t, i8);
        const int32_t *tabs[5] = {t[0], t[1], t[2], t[3], t[4]};
        int32_t bias[N], z[N];
        float m[N], lo[N], hi[N];
        /* every length (the masked last vector) */
        for (int n = 1; n <= N; n += n < 20 ? 1 : 13)
            cr_assert(qr_rqp_fill(&p, tabs, n, bias, m, lo, hi, z), "%s: %d channels refused", i8 ? "i8" : "u8", n);
        cr_assert(qr_rqp_fill(&p, tabs, N, bias, m, lo, hi, z));
        for (int c = 0; c < N; c++) {
            float tm, tlo, thi;
            memcpy(&tm, &t[0][c], 4);
            memcpy(&tlo, &t[3][c], 4);
            memcpy(&thi, &t[4][c], 4);
            for (int k = 0; k < 400; k++) {
                int32_t acc = k < 6 ? (int32_t[]){INT32_MIN, INT32_MAX, 0, -1, 1, -100000}[k]
                              : k < 200 ? (int32_t)(next() << 8 ^ next())
                                        : (int32_t)(next() % 4001) - 2000 - t[1][c]; /* near zero: the ties */
                uint8_t want = tu_qlinear_byte(acc, tm, t[1][c], t[2][c], tlo, thi, i8);
                uint8_t got = reduced_byte(acc, bias[c], m[c], lo[c], hi[c], z[c]);
                cr_assert_eq(got, want, "%s channel %d (m %g bias %d z %d lo %g hi %g) acc %d: %u, want %u",
                             i8 ? "i8" : "u8", c, (double)tm, t[1][c], t[2][c], (double)tlo, (double)thi, acc, got,
                             want);
            }
        }
    }
}

/* One channel the reduction cannot take refuses the whole layer, wherever it lies. */
Test(requant_prog, a_channel_it_cannot_take_refuses)
{
    if (!avx512())
        cr_skip_test("no AVX-512F");
    qr_rqp p;
    cr_assert(qr_rqp_match(qlinear_u8, &p));
    int32_t bias[N], z[N];
    float m[N], lo[N], hi[N];
    for (int bad = 0; bad < 9; bad++)
        for (int at = 0; at < N; at += 37) {
            int32_t t[5][N];
            tables(t, 0);
            float v;
            switch (bad) {
            case 0: v = NAN; memcpy(&t[0][at], &v, 4); break;
            case 1: v = INFINITY; memcpy(&t[0][at], &v, 4); break;
            case 2: v = -INFINITY; memcpy(&t[0][at], &v, 4); break;
            case 3: t[2][at] = (1 << 23) + 1; break;
            case 4: t[2][at] = INT32_MIN; break;
            case 5: v = NAN; memcpy(&t[3][at], &v, 4); break;
            case 6: v = NAN; memcpy(&t[4][at], &v, 4); break;
            case 7: v = 3.5f; memcpy(&t[3][at], &v, 4); break;
            default: v = 100.25f; memcpy(&t[4][at], &v, 4); break;
            }
            const int32_t *tabs[5] = {t[0], t[1], t[2], t[3], t[4]};
            cr_expect_eq(qr_rqp_fill(&p, tabs, N, bias, m, lo, hi, z), 0, "case %d at channel %d taken", bad, at);
            /* the same channel past n is not read */
            if (at > 0)
                cr_expect_eq(qr_rqp_fill(&p, tabs, at, bias, m, lo, hi, z), 1, "case %d: %d channels refused", bad, at);
        }
}
