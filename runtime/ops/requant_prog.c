/* The per-channel requantization of an epilogue's vector program (requant_prog.h). */
#include "requant_prog.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

enum { RQP_MAX = 96 }; /* vecmap.h's QC_VEC_MAX_INSNS */

typedef struct insn {
    char op[12];
    int nargs, arg[3];
    uint32_t imm; /* tab's table, const's bits */
} insn;

static const struct {
    const char *name;
    int nargs; /* -1: tab or const with an immediate */
} ops[] = {
    {"acc", 0},   {"tabi", -1},  {"tabf", -1},  {"consti", -1}, {"constf", -1}, {"addi", 2},     {"subi", 2},
    {"muli", 2},  {"mini", 2},   {"maxi", 2},   {"negi", 1},    {"clampi", 3},  {"addf", 2},     {"subf", 2},
    {"mulf", 2},  {"divf", 2},   {"minf", 2},   {"maxf", 2},    {"negf", 1},    {"absf", 1},     {"rint", 1},
    {"clampf", 3}, {"cvtf", 1},  {"satf.u8", 1}, {"satf.i8", 1}, {"sati.u8", 1}, {"sati.i8", 1},
};

/* prog's instructions into in; their count, or -1 when it does not parse (or reads a skip tensor) */
static int parse(const char *s, insn *in)
{
    int n = 0;
    while (*s) {
        while (*s == ' ')
            s++;
        size_t len = strcspn(s, " ;");
        if (n == RQP_MAX || len == 0 || len >= sizeof in[n].op)
            return -1;
        insn *x = &in[n];
        memcpy(x->op, s, len);
        x->op[len] = 0;
        s += len;
        x->nargs = -2;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            if (!strcmp(x->op, ops[o].name))
                x->nargs = ops[o].nargs;
        if (x->nargs == -2)
            return -1;
        char *end;
        if (x->nargs == -1) {
            unsigned long v = strtoul(s, &end, x->op[0] == 'c' ? 16 : 10);
            if (end == s || v > 0xffffffffUL || (x->op[0] == 't' && v >= 64))
                return -1;
            x->imm = (uint32_t)v;
            s = end;
        }
        for (int k = 0; k < x->nargs; k++) {
            long a = strtol(s, &end, 10);
            if (end == s || a < 0 || a >= n)
                return -1;
            x->arg[k] = (int)a;
            s = end;
        }
        while (*s == ' ')
            s++;
        if (*s == ';')
            s++;
        else if (*s)
            return -1;
        n++;
    }
    return n;
}

/* Whether value v reads the accumulator. */
static int dep(const insn *in, int v)
{
    if (!strcmp(in[v].op, "acc"))
        return 1;
    for (int k = 0; k < in[v].nargs; k++)
        if (dep(in, in[v].arg[k]))
            return 1;
    return 0;
}

/* Value v as a leaf of type f32 (want_f32) or i32: a table, a constant, or (f32) cvtf of an i32 one. */
static int leaf(const insn *in, int v, int want_f32, qr_rqp_leaf *l)
{
    const insn *x = &in[v];
    memset(l, 0, sizeof *l);
    if (want_f32 && !strcmp(x->op, "cvtf")) {
        if (!leaf(in, x->arg[0], 0, l))
            return 0;
        l->cvt = 1;
        return 1;
    }
    int tab = x->op[0] == 't', f = x->op[strlen(x->op) - 1] == 'f';
    if (x->nargs != -1 || f != want_f32)
        return 0;
    l->tab = tab ? (int)x->imm : -1;
    l->bits = tab ? 0 : x->imm;
    l->is_f32 = f;
    return 1;
}

/* x is op(a, b) with one operand reading the accumulator: it into *chain, the other a leaf into *l. */
static int split(const insn *in, int v, const char *op, int want_f32, int *chain, qr_rqp_leaf *l)
{
    const insn *x = &in[v];
    if (strcmp(x->op, op))
        return 0;
    for (int k = 0; k < 2; k++)
        if (dep(in, x->arg[k]) && !dep(in, x->arg[1 - k]) && leaf(in, x->arg[1 - k], want_f32, l)) {
            *chain = x->arg[k];
            return 1;
        }
    return 0;
}

int qr_rqp_match(const char *prog, qr_rqp *out)
{
    insn in[RQP_MAX];
    int n = prog ? parse(prog, in) : -1, v;
    if (n <= 0)
        return 0;
    /* from y back to the accumulator; values off this chain are read by nothing that reaches y */
    qr_rqp p = {0};
    const insn *s = &in[n - 1];
    if (strcmp(s->op, "satf.u8") && strcmp(s->op, "satf.i8"))
        return 0;
    p.i8 = !strcmp(s->op, "satf.i8");
    v = s->arg[0];
    if (!split(in, v, "minf", 1, &v, &p.hi) || !split(in, v, "maxf", 1, &v, &p.lo) ||
        !split(in, v, "addf", 1, &v, &p.z) || strcmp(in[v].op, "rint"))
        return 0;
    v = in[v].arg[0];
    if (!split(in, v, "mulf", 1, &v, &p.m) || strcmp(in[v].op, "cvtf"))
        return 0;
    v = in[v].arg[0];
    p.has_bias = split(in, v, "addi", 0, &v, &p.bias);
    if (strcmp(in[v].op, "acc"))
        return 0;
    *out = p;
    return 1;
}

/* Leaf l's 16 lanes at channels [c, c + 16) (lanes past n by mask km: zeros), as f32 or i32 bits. */
static __attribute__((target("avx512f"))) __m512i leaf_at(const qr_rqp_leaf *l, const int32_t *const *tabs, int64_t c,
                                                           __mmask16 km)
{
    __m512i v = l->tab >= 0 ? _mm512_maskz_loadu_epi32(km, tabs[l->tab] + c)
                            : _mm512_maskz_mov_epi32(km, _mm512_set1_epi32((int32_t)l->bits));
    return l->cvt ? _mm512_castps_si512(_mm512_cvtepi32_ps(v)) : v;
}

/* The checks and values as emit_tail_setup's (compiler/iconv_jit.c), 16 channels at once. */
__attribute__((target("avx512f"))) int qr_rqp_fill(const qr_rqp *p, const int32_t *const *tabs, int64_t n,
                                                   int32_t *bias, float *m, float *lo, float *hi, int32_t *z)
{
    const __m512 lo_t = _mm512_set1_ps(p->i8 ? -128.0f : 0.0f), hi_t = _mm512_set1_ps(p->i8 ? 127.0f : 255.0f);
    const __m512i big = _mm512_set1_epi32(1 << 23);
    for (int64_t c = 0; c < n; c += 16) {
        __mmask16 km = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);
        __m512 M = _mm512_castsi512_ps(leaf_at(&p->m, tabs, c, km)), Z = _mm512_castsi512_ps(leaf_at(&p->z, tabs, c, km));
        __m512 LO = _mm512_castsi512_ps(leaf_at(&p->lo, tabs, c, km)), HI = _mm512_castsi512_ps(leaf_at(&p->hi, tabs, c, km));
        __m512i zi = _mm512_cvt_roundps_epi32(Z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        /* M finite (M - M is +0, NaN otherwise), Z an integer of at most 2^23, LO and HI numbers */
        __mmask16 ok = _mm512_cmp_ps_mask(_mm512_sub_ps(M, M), _mm512_setzero_ps(), _CMP_EQ_OQ);
        ok &= _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(zi), Z, _CMP_EQ_OQ);
        ok &= _mm512_cmple_epu32_mask(_mm512_abs_epi32(zi), big);
        ok &= _mm512_cmp_ps_mask(LO, HI, _CMP_ORD_Q);
        /* A = clamp(min(LO, HI), lo_T, hi_T), B = clamp(HI, lo_T, hi_T), both integers */
        __m512 A = _mm512_min_ps(_mm512_max_ps(_mm512_min_ps(LO, HI), lo_t), hi_t);
        __m512 B = _mm512_min_ps(_mm512_max_ps(HI, lo_t), hi_t);
        ok &= _mm512_cmp_ps_mask(_mm512_roundscale_ps(A, _MM_FROUND_TO_NEAREST_INT), A, _CMP_EQ_OQ);
        ok &= _mm512_cmp_ps_mask(_mm512_roundscale_ps(B, _MM_FROUND_TO_NEAREST_INT), B, _CMP_EQ_OQ);
        if ((ok & km) != km)
            return 0;
        __m512i b = p->has_bias ? leaf_at(&p->bias, tabs, c, km) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(bias + c, km, b);
        _mm512_mask_storeu_ps(m + c, km, M);
        _mm512_mask_storeu_ps(lo + c, km, _mm512_sub_ps(A, Z));
        _mm512_mask_storeu_ps(hi + c, km, _mm512_sub_ps(B, Z));
        _mm512_mask_storeu_epi32(z + c, km, zi);
    }
    return 1;
}
