/* Shape-specialized NHWC convolution microkernels (iconv_jit.h).
 *
 * The generated function, for a tile of R rows by V 16-column vectors:
 *   for jb from j0 while jb < j1:                 V vectors, or fewer for the last columns
 *     for i0 in 0, R, 2R, ... < m:                rows past m reuse row m-1's pointers, not stored
 *       acc[r][v] = init[jb + 16v ...]            (masked past j1)
 *       for t < TAPS:                             a known trip count
 *         p[r] = a[(i0 + r) * TAPS + t]
 *         for g < K4/4:                           unrolled (fully up to UNROLL_ALL groups)
 *           x[r] = vpbroadcastd p[r][4g]
 *           y[v] = vmovdqu32 w_t[g][jb + 16v]
 *           acc[r][v] = vpdpbusd(acc[r][v], x[r], y[v])
 *       c[i0 + r][jb + 16v ...] = acc[r][v]      (masked past j1), or with an epilogue program
 *                                                 (vecmap.h) fused: y[i0 + r][jb + 16v ...] = its bytes,
 *                                                 acc through a stack array (acc_put, acc_get)
 * libgccjit 12 reaches no target builtin, so every AVX-512 instruction is an
 * extended asm whose operands GCC allocates (/work/shared/perf: "+v" works,
 * "=m" outputs crash it, a store is volatile with a "memory" clobber). The
 * loads read memory the function never writes, so they need no memory input. */
#include "iconv_jit.h"

#include <errno.h>
#include <fcntl.h>
#include <libgccjit.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache.h"
#include "jitrun.h"
#include "fileio.h"
#include "vecmap.h"
#include "cpu.h"
#include "sha256.h"

#ifndef QC_ICONV_JIT_ID
#define QC_ICONV_JIT_ID "dev" /* the Makefile passes the hash of this file and its header */
#endif

enum {
    MAX_ROWS = 8,
    MAX_VECS = 4,
    UNROLL_ALL = 16, /* k groups up to this many are unrolled completely */
    UNROLL = 8,      /* else this many per iteration, the rest after the loop */
};

/* An epilogue program (compiler/vecmap.h) parsed: instruction i's opcode, operands, type. */
typedef enum vop {
    V_ACC, V_TAB, V_CONST, V_ADDI, V_SUBI, V_MULI, V_MINI, V_MAXI, V_NEGI, V_CLAMPI, V_ADDF, V_SUBF, V_MULF,
    V_DIVF, V_MINF, V_MAXF, V_NEGF, V_ABSF, V_RINT, V_CLAMPF, V_CVTF, V_SATF_U8, V_SATF_I8, V_SATI_U8, V_SATI_I8,
    V_SKIP_U8, V_SKIP_I8, V_NOPS
} vop;

enum { VT_I32, VT_F32, VT_BYTE };

static const struct {
    const char *name;
    int nargs, in, out; /* operands' lane type (-1: none), the result's */
} vops[V_NOPS] = {
    [V_ACC] = {"acc", 0, -1, VT_I32},        [V_TAB] = {"tab", 1, -1, -1},         [V_CONST] = {"const", 1, -1, -1},
    [V_ADDI] = {"addi", 2, VT_I32, VT_I32},  [V_SUBI] = {"subi", 2, VT_I32, VT_I32}, [V_MULI] = {"muli", 2, VT_I32, VT_I32},
    [V_MINI] = {"mini", 2, VT_I32, VT_I32},  [V_MAXI] = {"maxi", 2, VT_I32, VT_I32}, [V_NEGI] = {"negi", 1, VT_I32, VT_I32},
    [V_CLAMPI] = {"clampi", 3, VT_I32, VT_I32}, [V_ADDF] = {"addf", 2, VT_F32, VT_F32}, [V_SUBF] = {"subf", 2, VT_F32, VT_F32},
    [V_MULF] = {"mulf", 2, VT_F32, VT_F32},  [V_DIVF] = {"divf", 2, VT_F32, VT_F32}, [V_MINF] = {"minf", 2, VT_F32, VT_F32},
    [V_MAXF] = {"maxf", 2, VT_F32, VT_F32},  [V_NEGF] = {"negf", 1, VT_F32, VT_F32}, [V_ABSF] = {"absf", 1, VT_F32, VT_F32},
    [V_RINT] = {"rint", 1, VT_F32, VT_F32},  [V_CLAMPF] = {"clampf", 3, VT_F32, VT_F32}, [V_CVTF] = {"cvtf", 1, VT_I32, VT_F32},
    [V_SATF_U8] = {"satf.u8", 1, VT_F32, VT_BYTE}, [V_SATF_I8] = {"satf.i8", 1, VT_F32, VT_BYTE},
    [V_SATI_U8] = {"sati.u8", 1, VT_I32, VT_BYTE}, [V_SATI_I8] = {"sati.i8", 1, VT_I32, VT_BYTE},
    [V_SKIP_U8] = {"skip.u8", 0, -1, VT_BYTE}, [V_SKIP_I8] = {"skip.i8", 0, -1, VT_BYTE},
};

typedef struct vinsn {
    vop op;
    int arg[3];
    uint32_t imm; /* V_TAB: the table; V_CONST: the bits */
    int type, dep; /* dep: reads the accumulator, so runs per row */
} vinsn;

/* The requantization tail satf(minf(maxf(addf(rint(x), Z), LO), HI)) with x = mulf(cvtf(i), M) and
 * M, Z, LO, HI read no accumulator (recipe qlinear's shape): where a column's M is finite, Z an
 * integer of at most 2^23 and LO, HI integers or infinities, its bytes are
 * round_even(clamp(x, A - Z, B - Z)) + Z, A and B the bounds LO, HI and the type's range make
 * together (match_fast): 4 instructions a row instead of 13. Other columns run the program. */
typedef struct vfast {
    int on;
    int s;                                 /* the tail's satf: the last instruction, or the epilogue's in a
                                            * program joined to a second stage (its y's element) */
    int x, m, z, lo, hi, i8;               /* the values the tail reads (hi -1: none, +inf), y's type i8 */
    unsigned char tail[QC_VEC_MAX_INSNS]; /* the instructions the fast form leaves out */
    /* a second stage's tail (vprog.stage), whose x is no product f32(i) * M: the column values whose
     * checks make x a number (x_nan_free): |small[k]| < 2^95, nonzero[k] neither 0 nor NaN */
    int nsmall, small[8], nnonzero, nonzero[4];
    /* the epilogue's tail in a joined program whose y is read once, by cvtf(subi(y, T)) (qadd's
     * f32(a - a_zero)): those two instructions (ysub, ycvt; -1: none) as the float
     * round_even(clamp(x, A - Z, B - Z)) + f32(Z - T) (emit_fast_rows) */
    int ysub, ycvt;
} vfast;

typedef struct vprog {
    vinsn in[QC_VEC_MAX_INSNS];
    int n, ntabs, skip; /* skip: reads the skip tensor (a fused kernel's two extra arguments) */
    vfast fast;
    /* a joined program's stage ending in the same tail, satf(maxf(addf(rint(x), Z), LO)) (the
     * stdlib's qadd: sat(max(round_even(real / y_scale) + y_zero, floor))), taken in the fast form
     * where the epilogue's is and the checks of both pass (stop 42) */
    vfast stage;
} vprog;

static void match_fast(vprog *p);

/* text -> *p; 0 when it is a whole, well-typed program whose last instruction is a byte */
static int parse_prog(const char *text, vprog *p)
{
    memset(p, 0, sizeof *p);
    p->fast.ysub = p->fast.ycvt = -1;
    const char *s = text;
    while (*s) {
        if (p->n == QC_VEC_MAX_INSNS)
            return -1;
        vinsn *x = &p->in[p->n];
        char name[16];
        int len = 0;
        if (sscanf(s, "%15s%n", name, &len) != 1)
            return -1;
        char *semi = strchr(name, ';');
        if (semi) { /* "acc;..." */
            len -= (int)strlen(semi);
            *semi = 0;
        }
        s += len;
        x->op = V_NOPS;
        for (int o = 0; o < V_NOPS; o++)
            if ((o == V_TAB || o == V_CONST) ? !strncmp(name, vops[o].name, strlen(vops[o].name)) &&
                                                   (name[strlen(vops[o].name)] == 'i' || name[strlen(vops[o].name)] == 'f') &&
                                                   !name[strlen(vops[o].name) + 1]
                                             : !strcmp(name, vops[o].name))
                x->op = (vop)o;
        if (x->op == V_NOPS)
            return -1;
        x->type = vops[x->op].out;
        if (x->op == V_TAB || x->op == V_CONST) {
            x->type = name[strlen(name) - 1] == 'f' ? VT_F32 : VT_I32;
            unsigned long v;
            char *end;
            while (*s == ' ')
                s++;
            v = strtoul(s, &end, x->op == V_CONST ? 16 : 10);
            if (end == s || v > 0xffffffffUL || (x->op == V_TAB && v >= 64))
                return -1;
            x->imm = (uint32_t)v;
            s = end;
            if (x->op == V_TAB && (int)v + 1 > p->ntabs)
                p->ntabs = (int)v + 1;
        }
        x->dep = x->op == V_ACC || x->op == V_SKIP_U8 || x->op == V_SKIP_I8;
        p->skip |= x->op == V_SKIP_U8 || x->op == V_SKIP_I8;
        for (int k = 0; k < vops[x->op].nargs && x->op != V_TAB && x->op != V_CONST; k++) {
            char *end;
            while (*s == ' ')
                s++;
            long a = strtol(s, &end, 10);
            /* a byte, held in i32 lanes, is its i32 (vecmap.h) */
            if (end == s || a < 0 || a >= p->n ||
                (p->in[a].type != vops[x->op].in && !(p->in[a].type == VT_BYTE && vops[x->op].in == VT_I32)))
                return -1;
            x->arg[k] = (int)a;
            x->dep |= p->in[a].dep;
            s = end;
        }
        if (*s == ';')
            s++;
        else if (*s)
            return -1;
        p->n++;
    }
    if (!(p->n > 0 && p->in[p->n - 1].type == VT_BYTE && p->in[p->n - 1].dep))
        return -1;
    match_fast(p);
    return 0;
}

/* Of binary instruction x, the operand that reads the accumulator into *chain and the one that
 * does not into *other; 0 when it is not one of each. */
static int split_operands(const vprog *p, const vinsn *x, int *chain, int *other)
{
    int a = x->arg[0], b = x->arg[1];
    if (p->in[a].dep == p->in[b].dep)
        return 0;
    *chain = p->in[a].dep ? a : b;
    *other = p->in[a].dep ? b : a;
    return 1;
}

/* The instruction `addi acc T` of the program (either order), T an i32 table and the accumulator
 * read by nothing else, with T's instruction in *tab; -1 when there is none. The fused kernel then
 * starts its sums at init + T instead of init and takes the addi's value to be the accumulator:
 * the same i32 values, the sums wrapping (vpdpbusd) as addi does. */
static int bias_fold(const vprog *p, int *tab)
{
    int uses[QC_VEC_MAX_INSNS] = {0};
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < vops[p->in[i].op].nargs && p->in[i].op != V_TAB && p->in[i].op != V_CONST; k++)
            uses[p->in[i].arg[k]]++;
    for (int i = 0; i < p->n; i++) {
        const vinsn *x = &p->in[i];
        if (x->op != V_ADDI)
            continue;
        for (int k = 0; k < 2; k++) {
            int a = x->arg[k], b = x->arg[1 - k];
            if (p->in[a].op == V_ACC && uses[a] == 1 && p->in[b].op == V_TAB && p->in[b].type == VT_I32) {
                *tab = b;
                return i;
            }
        }
    }
    return -1;
}

/* Sets p->fast when the program ends in the requantization tail (vfast) whose values nothing else
 * reads, or, in a program that reads a skip tensor (an epilogue joined to a second stage), when
 * the epilogue's y does (the tail's satf then read by the stage's instructions). Without NaNs
 * (none where M is finite and LO, HI are numbers) min, max and add are the same in either operand
 * order, up to the sign of a zero that the byte drops. Then p->stage when the stage ends in the
 * same tail too. */
static int match_tail(vprog *p, int s, int stage, vfast *out);

/* The epilogue's y (p->fast.s, in a joined program) read by nothing but subi(y, T), T no row value,
 * itself read by nothing but a cvtf: p->fast.ysub, ycvt. */
static void match_ysub(vprog *p)
{
    int uses[QC_VEC_MAX_INSNS] = {0}, user[QC_VEC_MAX_INSNS];
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < vops[p->in[i].op].nargs && p->in[i].op != V_TAB && p->in[i].op != V_CONST; k++) {
            uses[p->in[i].arg[k]]++;
            user[p->in[i].arg[k]] = i;
        }
    int s = p->fast.s;
    if (uses[s] != 1)
        return;
    int sub = user[s];
    if (p->in[sub].op != V_SUBI || p->in[sub].arg[0] != s || p->in[p->in[sub].arg[1]].dep || uses[sub] != 1)
        return;
    int cvt = user[sub];
    if (p->in[cvt].op != V_CVTF)
        return;
    p->fast.ysub = sub;
    p->fast.ycvt = cvt;
}

static void match_fast(vprog *p)
{
    if (match_tail(p, p->n - 1, 0, &p->fast) || !p->skip)
        return;
    for (int s = p->n - 2; s >= 0; s--)
        if ((p->in[s].op == V_SATF_U8 || p->in[s].op == V_SATF_I8) && match_tail(p, s, 0, &p->fast)) {
            if (!match_tail(p, p->n - 1, 1, &p->stage))
                memset(&p->stage, 0, sizeof p->stage);
            match_ysub(p);
            return;
        }
}

enum { NF_NO, NF_126, NF_127, NF_NUM }; /* x_nan_free: |x| < 2^126, < 2^127, a number, all finite or not */

/* What value x is without the column checks it adds to f: f32(i) * M with |M| < 2^95 is below 2^126
 * (|f32(i)| <= 2^31 for every i32), the sum of two such below 2^127, and such a value divided by a
 * D that is neither 0 nor NaN a number (an infinity perhaps, which the tail's clamp bounds). */
static int x_nan_free(const vprog *p, int x, vfast *f)
{
    const vinsn *in = p->in;
    int a, b;
    switch (in[x].op) {
    case V_MULF:
        if (!split_operands(p, &in[x], &a, &b) || in[a].op != V_CVTF || f->nsmall == 8)
            return NF_NO;
        f->small[f->nsmall++] = b;
        return NF_126;
    case V_ADDF:
        return x_nan_free(p, in[x].arg[0], f) == NF_126 && x_nan_free(p, in[x].arg[1], f) == NF_126 ? NF_127 : NF_NO;
    case V_DIVF:
        a = in[x].arg[0];
        b = in[x].arg[1];
        if (!in[a].dep || in[b].dep || f->nnonzero == 4)
            return NF_NO;
        if (x_nan_free(p, a, f) == NF_NO)
            return NF_NO;
        f->nonzero[f->nnonzero++] = b;
        return NF_NUM;
    default: return NF_NO;
    }
}

/* The tail at s into *out; stage: a joined program's last instruction, whose minf may be absent
 * and whose x is any value x_nan_free proves a number under column checks. */
static int match_tail(vprog *p, int s, int stage, vfast *out)
{
    vfast f = {.s = s, .hi = -1, .m = -1, .ysub = -1, .ycvt = -1};
    int h, g, add, r, x, c;
    const vinsn *in = p->in;
    if (in[s].op != V_SATF_U8 && in[s].op != V_SATF_I8)
        return 0;
    f.i8 = in[s].op == V_SATF_I8;
    h = in[s].arg[0];
    if (in[h].op == V_MINF) {
        if (!split_operands(p, &in[h], &g, &f.hi))
            return 0;
    } else if (stage) {
        g = h;
    } else {
        return 0;
    }
    if (in[g].op != V_MAXF || !split_operands(p, &in[g], &add, &f.lo) || in[add].op != V_ADDF ||
        !split_operands(p, &in[add], &r, &f.z) || in[r].op != V_RINT)
        return 0;
    x = in[r].arg[0];
    if (stage) {
        if (x_nan_free(p, x, &f) == NF_NO)
            return 0;
    } else if (in[x].op != V_MULF || !split_operands(p, &in[x], &c, &f.m) || in[c].op != V_CVTF) {
        return 0;
    }
    int uses[QC_VEC_MAX_INSNS] = {0};
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < vops[in[i].op].nargs && in[i].op != V_TAB && in[i].op != V_CONST; k++)
            uses[in[i].arg[k]]++;
    if (uses[h] != 1 || uses[g] != 1 || uses[add] != 1 || uses[r] != 1)
        return 0;
    f.x = x;
    f.tail[s] = f.tail[h] = f.tail[g] = f.tail[add] = f.tail[r] = 1;
    f.on = 1;
    *out = f;
    return 1;
}

typedef struct gen {
    gcc_jit_context *c;
    gcc_jit_function *fn;
    gcc_jit_type *t_void, *t_i64, *t_i32, *t_u16, *t_u8, *t_i8, *t_u64, *v16;
    gcc_jit_type *p_i32, *p_u8c, *pp_u8c, *p_i8c, *p_i32c;
    gcc_jit_param *prm[14];
    int row; /* the tile's row whose instructions are being emitted (a skip load's) */
    int64_t taps, k4, n, n16, groups;
    int rows, vecs;
    gcc_jit_lvalue *i0, *jb, *t, *wt, *kk, *wk, *nrows;
    gcc_jit_lvalue *arow[MAX_ROWS], *p[MAX_ROWS], *x[MAX_ROWS], *acc[MAX_ROWS][MAX_VECS], *y[MAX_VECS];
    gcc_jit_lvalue *mask;
    int nblocks;
    const vprog *ep;        /* the fused epilogue; NULL: the accumulator is stored */
    gcc_jit_lvalue **val;   /* the program's values: vals[0], or a tile vector's in the packed tail */
    gcc_jit_lvalue *vals[MAX_VECS][QC_VEC_MAX_INSNS], *tab[64], *kmask;
    /* the fast tail's column values (vfast) per vector of a tile, set once per strip of the fused kernel */
    gcc_jit_lvalue *fa[MAX_VECS], *fb[MAX_VECS], *fz[MAX_VECS], *fok[MAX_VECS], *ft0, *ft1;
    /* the same for a joined program's stage (vprog.stage); its checks are and'ed into fok */
    gcc_jit_lvalue *sa[MAX_VECS], *sb[MAX_VECS], *sz[MAX_VECS];
    gcc_jit_lvalue *fzt[MAX_VECS]; /* f32(Z - T) of vfast.ysub */
    /* the packed tail (emit_packed_rows), where the CPU has AVX-512BW: per strip whether it may run
     * (pok) and its constants, per row the vectors' rounded values rr and their pack */
    int packed;
    gcc_jit_lvalue *pok, *pai[MAX_VECS], *pbi[MAX_VECS], *pz01, *pz23, *pa8, *pb8, *pidx, *bmask, *ft2;
    /* per strip, which steps of the packed tail change no stored byte (emit_lean_check): 0 none,
     * 1 the clamp to [A, B] (A and B T's bounds, which the pack's saturation already gives), 2 that
     * and Z's add (Z 0); MobileNetV2's Relu6 expansions are 2, its projections 1 */
    gcc_jit_lvalue *plean, *lbad_ab, *lbad_z;
    gcc_jit_lvalue *rr[MAX_VECS], *p01, *p23, *pout;
    gcc_jit_param *p_tabs;
    /* the fused kernel's bias folded into the accumulators' start (bias_fold): the program's addi
     * of the accumulator and an i32 table (fold, -1: none), that table (fold_tab), and per vector of
     * a strip init + the table, made once per strip (binit) */
    int fold, fold_tab;
    gcc_jit_lvalue *binit[MAX_VECS];
    /* the fused kernel's accumulators between the tile's k loop and its epilogue: a stack array of
     * v16 and its address (acc_put, acc_get) */
    gcc_jit_lvalue *accs, *accsp;
    /* the tile being emitted ends in a half vector (emit_picks): its last vector's sums are 8 lanes
     * of ymm (the 8 above them zero), half the vpdpbusd cost on Zen 4's 256-bit pipes */
    int half;
    int nlocals; /* numbers the locals one block makes several of */
} gen;

enum { P_C, P_CRS, P_A, P_TAPS, P_M, P_W, P_INIT, P_K4, P_J0, P_J1, P_N, P_TABS, P_S, P_SRS };

static gcc_jit_rvalue *prm(gen *g, int i) { return gcc_jit_param_as_rvalue(g->prm[i]); }
static gcc_jit_rvalue *rv(gcc_jit_lvalue *l) { return gcc_jit_lvalue_as_rvalue(l); }
static gcc_jit_rvalue *lng(gen *g, int64_t v) { return gcc_jit_context_new_rvalue_from_long(g->c, g->t_i64, (long)v); }

static gcc_jit_rvalue *bin(gen *g, enum gcc_jit_binary_op op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_binary_op(g->c, NULL, op, gcc_jit_rvalue_get_type(a), a, b);
}

static gcc_jit_rvalue *cmp(gen *g, enum gcc_jit_comparison op, gcc_jit_rvalue *a, gcc_jit_rvalue *b)
{
    return gcc_jit_context_new_comparison(g->c, NULL, op, a, b);
}

/* &base[idx] */
static gcc_jit_rvalue *addr(gen *g, gcc_jit_rvalue *base, gcc_jit_rvalue *idx)
{
    return gcc_jit_lvalue_get_address(gcc_jit_context_new_array_access(g->c, NULL, base, idx), NULL);
}

static gcc_jit_block *block(gen *g)
{
    char name[32];
    snprintf(name, sizeof name, "b%d", g->nblocks++);
    return gcc_jit_function_new_block(g->fn, name);
}

static gcc_jit_lvalue *local(gen *g, gcc_jit_type *t, const char *fmt, int a, int b)
{
    char name[32];
    snprintf(name, sizeof name, fmt, a, b);
    return gcc_jit_function_new_local(g->fn, NULL, t, name);
}

/* x = vpbroadcastd disp(base[, idx]) */
static void asm_bcast(gen *g, gcc_jit_block *b, gcc_jit_lvalue *x, gcc_jit_rvalue *base, gcc_jit_rvalue *idx, int64_t disp)
{
    (void)g;
    char t[96];
    snprintf(t, sizeof t, idx ? "vpbroadcastd %lld(%%1,%%2), %%0" : "vpbroadcastd %lld(%%1), %%0", (long long)disp);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=v", x);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", base);
    if (idx)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "r", idx);
}

/* y = vmovdqu32 disp(base), zeroing the lanes mask leaves out when there is one */
static void asm_load(gen *g, gcc_jit_block *b, gcc_jit_lvalue *y, gcc_jit_rvalue *base, int64_t disp, gcc_jit_rvalue *mask)
{
    (void)g;
    char t[96];
    snprintf(t, sizeof t, mask ? "vmovdqu32 %lld(%%1), %%0%%{%%2%%}%%{z%%}" : "vmovdqu32 %lld(%%1), %%0",
             (long long)disp);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=v", y);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", base);
    if (mask)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", mask);
}

/* op v, disp(base) (vmovdqu32: the 16 dwords; vpmovdb: their low bytes), only the lanes of mask
 * when there is one */
static void asm_store(gen *g, gcc_jit_block *b, const char *op, gcc_jit_rvalue *v, gcc_jit_rvalue *base, int64_t disp,
                      gcc_jit_rvalue *mask)
{
    (void)g;
    char t[96];
    snprintf(t, sizeof t, mask ? "%s %%0, %lld(%%1)%%{%%2%%}" : "%s %%0, %lld(%%1)", op, (long long)disp);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_set_volatile_flag(e, 1);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", v);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", base);
    if (mask)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", mask);
    gcc_jit_extended_asm_add_clobber(e, "memory");
}

/* A fused kernel's tile ends its k loop by storing its accumulators to gen.accs, and its epilogue
 * reads each back where it is used: kept in registers from the loop on into the epilogue, whose
 * temporaries and column values need registers of their own beside them, the accumulators' live
 * ranges crossed that pressure and GCC's allocator (libgccjit 12) spilled part of them inside the
 * k loop itself: 25-26 zmm stack loads and stores and 20-30 register moves an iteration of 192 or
 * 384 vpdpbusd of a 6 x 4 tile (ResNet-18's 3 x 3 shapes, the stdlib's qlinear program), none
 * with this (docs/runtime.md, stop 46). */
static void acc_put(gen *g, gcc_jit_block *b, int r, int v)
{
    asm_store(g, b, "vmovdqu32", rv(g->acc[r][v]), rv(g->accsp), 64 * (MAX_VECS * r + v), NULL);
}

/* acc[r][v] = its slot; the "memory" clobber orders the load after acc_put's store (and keeps the
 * two apart: a load with no memory operand could be moved above it) */
static void acc_get(gen *g, gcc_jit_block *b, int r, int v)
{
    char t[64];
    snprintf(t, sizeof t, "vmovdqu32 %d(%%1), %%0", 64 * (MAX_VECS * r + v));
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=v", g->acc[r][v]);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", rv(g->accsp));
    gcc_jit_extended_asm_add_clobber(e, "memory");
}

/* The low bytes of v's 16 dwords to disp(base), only the lanes of mask when there is one: vpmovdb
 * into tmp's xmm, then a store (vpmovdb with a memory operand was the slowest instruction of the
 * rows epilogue on Zen 5: a third of its samples). */
static void asm_store_bytes(gen *g, gcc_jit_block *b, gcc_jit_rvalue *v, gcc_jit_lvalue *tmp, gcc_jit_rvalue *base,
                            int64_t disp, gcc_jit_rvalue *mask)
{
    (void)g;
    char t[128];
    snprintf(t, sizeof t, mask ? "vpmovdb %%1, %%x0\n\tvmovdqu8 %%x0, %lld(%%2)%%{%%3%%}" : "vpmovdb %%1, %%x0\n\tvmovdqu8 %%x0, %lld(%%2)",
             (long long)disp);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_set_volatile_flag(e, 1);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", tmp);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", v);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", base);
    if (mask)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", mask);
    gcc_jit_extended_asm_add_clobber(e, "memory");
}

/* acc += the four u8 of x times the four s8 of y in each lane, wrapping */
static void asm_dot(gen *g, gcc_jit_block *b, gcc_jit_lvalue *acc, gcc_jit_rvalue *x, gcc_jit_rvalue *y)
{
    (void)g;
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, "vpdpbusd %2, %1, %0");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "+v", acc);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", x);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", y);
}

/* The half vector's forms of asm_load and asm_dot (gen.half): y's low 8 dwords from disp(base),
 * acc's low 8 lanes += their products; a ymm write zeroes lanes 8..15, which the tile's columns
 * never reach (the strip's mask has at most 8 lanes there). */
static void asm_load_half(gen *g, gcc_jit_block *b, gcc_jit_lvalue *y, gcc_jit_rvalue *base, int64_t disp)
{
    (void)g;
    char t[96];
    snprintf(t, sizeof t, "vmovdqu32 %lld(%%1), %%t0", (long long)disp);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=v", y);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "r", base);
}

static void asm_dot_half(gen *g, gcc_jit_block *b, gcc_jit_lvalue *acc, gcc_jit_rvalue *x, gcc_jit_rvalue *y)
{
    (void)g;
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, "vpdpbusd %t2, %t1, %t0");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "+v", acc);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", x);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", y);
}

/* out = the template over inputs in[0..nin) ("v" operands, or "r" for GPR constants when
 * gpr[i]); early: the output is written before the last input is read; kmask: a mask temporary
 * is operand nin + 1... see the templates: outputs are %0 (the value) and %1 (a mask) when kmask. */
static void asm_vec(gen *g, gcc_jit_block *b, const char *tmpl, gcc_jit_lvalue *out, int early, int kmask,
                    gcc_jit_rvalue *const *in, int nin)
{
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, tmpl);
    gcc_jit_extended_asm_add_output_operand(e, NULL, early ? "=&v" : "=v", out);
    if (kmask)
        gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    for (int i = 0; i < nin; i++)
        gcc_jit_extended_asm_add_input_operand(e, NULL, gcc_jit_rvalue_get_type(in[i]) == g->v16 ? "v" : "r", in[i]);
}

/* x = the 32 bits in every lane */
static void vconst(gen *g, gcc_jit_block *b, gcc_jit_lvalue *x, uint32_t bits)
{
    gcc_jit_rvalue *c = gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, (int)bits);
    asm_vec(g, b, "vpbroadcastd %1, %0", x, 0, 0, &c, 1);
}

/* Instruction i of the epilogue into g->val[i]: a table's vector v of the tile (columns
 * jb + 16 v ..., masked past j1 when last), the accumulator acc, or an operation. Each template is
 * the scalar code's operation (compiler/jit_expr.c) in the operand order that gives its NaN
 * cases (vecmap.h); AT&T order: the last operand is the destination. */
static void emit_insn(gen *g, gcc_jit_block *b, int i, gcc_jit_lvalue *acc, int v, gcc_jit_rvalue *mask, gcc_jit_lvalue *t0,
                      gcc_jit_lvalue *t1)
{
    const vinsn *x = &g->ep->in[i];
    gcc_jit_lvalue *out = g->val[i];
    gcc_jit_rvalue *a[4];
    for (int k = 0; k < vops[x->op].nargs && x->op != V_TAB && x->op != V_CONST; k++)
        a[k] = rv(g->val[x->arg[k]]);
    static const char *const two[V_NOPS] = {
        [V_ADDI] = "vpaddd %2, %1, %0", [V_SUBI] = "vpsubd %2, %1, %0", [V_MULI] = "vpmulld %2, %1, %0",
        [V_MINI] = "vpminsd %2, %1, %0", [V_MAXI] = "vpmaxsd %2, %1, %0", [V_ADDF] = "vaddps %2, %1, %0",
        [V_SUBF] = "vsubps %2, %1, %0", [V_MULF] = "vmulps %2, %1, %0", [V_DIVF] = "vdivps %2, %1, %0",
    };
    if (i == g->fold) { /* the bias is in the accumulator already (bias_fold) */
        gcc_jit_block_add_assignment(b, NULL, out, rv(acc));
        return;
    }
    switch (x->op) {
    case V_ACC: gcc_jit_block_add_assignment(b, NULL, out, rv(acc)); return;
    case V_TAB: asm_load(g, b, out, addr(g, rv(g->tab[x->imm]), rv(g->jb)), 64 * v, mask); return;
    case V_CONST: vconst(g, b, out, x->imm); return;
    case V_SKIP_U8: /* the skip tensor's bytes of this row and vector, widened as i32(b[i]) is */
    case V_SKIP_I8: {
        gcc_jit_rvalue *row = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->i0), lng(g, g->row));
        gcc_jit_rvalue *at = addr(g, prm(g, P_S), bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, row, prm(g, P_SRS)), rv(g->jb)));
        const char *op = x->op == V_SKIP_U8 ? "vpmovzxbd" : "vpmovsxbd";
        char t[96];
        snprintf(t, sizeof t, mask ? "%s %d(%%1), %%0%%{%%2%%}%%{z%%}" : "%s %d(%%1), %%0", op, 16 * v);
        gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
        gcc_jit_extended_asm_add_output_operand(e, NULL, "=v", out);
        gcc_jit_extended_asm_add_input_operand(e, NULL, "r", at);
        if (mask)
            gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", mask);
        return;
    }
    case V_MINF: /* (a < b ? a : b), then a where b is NaN */
    case V_MAXF:
        asm_vec(g, b, x->op == V_MINF ? "vminps %3, %2, %0\n\tvcmpunordps %3, %3, %1\n\tvmovaps %2, %0%{%1%}"
                                      : "vmaxps %3, %2, %0\n\tvcmpunordps %3, %3, %1\n\tvmovaps %2, %0%{%1%}",
                out, 1, 1, a, 2);
        return;
    case V_CLAMPI: asm_vec(g, b, "vpmaxsd %2, %1, %0\n\tvpminsd %3, %0, %0", out, 1, 0, a, 3); return;
    case V_CLAMPF: /* lo_ok = a < lo ? lo : a; lo_ok > hi ? hi : lo_ok */
        asm_vec(g, b, "vmaxps %1, %2, %0\n\tvminps %0, %3, %0", out, 1, 0, a, 3);
        return;
    case V_NEGI: asm_vec(g, b, "vpxord %0, %0, %0\n\tvpsubd %1, %0, %0", out, 1, 0, a, 1); return;
    case V_NEGF:
    case V_ABSF:
        vconst(g, b, t0, x->op == V_NEGF ? 0x80000000u : 0x7fffffffu);
        a[1] = rv(t0);
        asm_vec(g, b, x->op == V_NEGF ? "vpxord %2, %1, %0" : "vpandd %2, %1, %0", out, 0, 0, a, 2);
        return;
    case V_RINT: asm_vec(g, b, "vrndscaleps $8, %1, %0", out, 0, 0, a, 1); return; /* nearest even, as rintf */
    case V_CVTF: asm_vec(g, b, "vcvtdq2ps %1, %0", out, 0, 0, a, 1); return;
    case V_SATF_U8:
    case V_SATF_I8: /* clamped as the narrow float-to-int conversion does, NaN 0, truncated */
        vconst(g, b, t0, x->op == V_SATF_U8 ? 0x00000000u : 0xc3000000u); /* 0, -128 */
        vconst(g, b, t1, x->op == V_SATF_U8 ? 0x437f0000u : 0x42fe0000u); /* 255, 127 */
        a[1] = rv(t0);
        a[2] = rv(t1);
        asm_vec(g, b, "vminps %2, %4, %0\n\tvmaxps %0, %3, %0\n\tvcmpordps %0, %0, %1\n\tvcvttps2dq %0, %0%{%1%}%{z%}",
                out, 1, 1, a, 3);
        return;
    case V_SATI_U8:
    case V_SATI_I8:
        vconst(g, b, t0, x->op == V_SATI_U8 ? 0u : 0xffffff80u);
        vconst(g, b, t1, x->op == V_SATI_U8 ? 255u : 127u);
        a[1] = rv(t0);
        a[2] = rv(t1);
        asm_vec(g, b, "vpmaxsd %2, %1, %0\n\tvpminsd %3, %0, %0", out, 1, 0, a, 3);
        return;
    default: asm_vec(g, b, two[x->op], out, 0, 0, a, 2); return;
    }
}

/* The fast tail's locals (vfast), when the program has one. */
static void fast_locals(gen *g)
{
    if (!g->ep->fast.on)
        return;
    for (int v = 0; v < MAX_VECS; v++) {
        g->fa[v] = local(g, g->v16, "fa%d", v, 0);
        g->fb[v] = local(g, g->v16, "fb%d", v, 0);
        g->fz[v] = local(g, g->v16, "fz%d", v, 0);
        g->fok[v] = local(g, g->t_i32, "fok%d", v, 0);
    }
    g->ft0 = local(g, g->v16, "ft0", 0, 0);
    g->ft1 = local(g, g->v16, "ft1", 0, 0);
    for (int v = 0; g->ep->fast.ysub >= 0 && v < MAX_VECS; v++)
        g->fzt[v] = local(g, g->v16, "fzt%d", v, 0);
    for (int v = 0; g->ep->stage.on && v < MAX_VECS; v++) {
        g->sa[v] = local(g, g->v16, "sa%d", v, 0);
        g->sb[v] = local(g, g->v16, "sb%d", v, 0);
        g->sz[v] = local(g, g->v16, "sz%d", v, 0);
    }
    if (!g->packed)
        return;
    for (int v = 0; v < MAX_VECS; v++) {
        g->pai[v] = local(g, g->v16, "pai%d", v, 0);
        g->pbi[v] = local(g, g->v16, "pbi%d", v, 0);
        g->rr[v] = local(g, g->v16, "rr%d", v, 0);
        for (int i = 0; i < g->ep->n; i++)
            if (v)
                g->vals[v][i] = local(g, g->v16, "v%d_%d", i, v);
    }
    g->pok = local(g, g->t_i32, "pok", 0, 0);
    g->plean = local(g, g->t_i32, "plean", 0, 0);
    g->lbad_ab = local(g, g->t_i32, "lbad_ab", 0, 0);
    g->lbad_z = local(g, g->t_i32, "lbad_z", 0, 0);
    g->bmask = local(g, g->t_u64, "bmask", 0, 0);
    g->ft2 = local(g, g->v16, "ft2", 0, 0);
    static const char *const names[] = {"pz01", "pz23", "pa8", "pb8", "pidx", "p01", "p23", "pout"};
    gcc_jit_lvalue **at[] = {&g->pz01, &g->pz23, &g->pa8, &g->pb8, &g->pidx, &g->p01, &g->p23, &g->pout};
    for (int i = 0; i < 8; i++)
        *at[i] = gcc_jit_function_new_local(g->fn, NULL, g->v16, names[i]);
}

/* The packed tail's check of vector v of a strip, after its emit_fast_setup (M in val): pok keeps
 * the lanes where |M| < 1 and |Z| <= 2^14, and the fast tail's. |M| < 1 bounds x = f32(i) * M
 * below 2^31 (i an i32): round_even(x) converts to i32 exactly, where the fast tail clamps x
 * first. Also A and B as i32 (pai, pbi: A - Z and B - Z are integers of f32, Z the i32 fz). */
static void emit_packed_check(gen *g, gcc_jit_block *b, int v)
{
    const vfast *f = &g->ep->fast;
    vconst(g, b, g->ft0, 0x3f800000u); /* 1.0 */
    vconst(g, b, g->ft1, 1u << 14);
    gcc_jit_lvalue *ok = local(g, g->t_i32, "pok_%d_%d", g->nblocks, v);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL,
                                                             "vpslld $1, %3, %1\n\t" /* |M| (by its bits: M finite here) */
                                                             "vpsrld $1, %1, %1\n\t"
                                                             "vcmpltps %4, %1, %2\n\t"
                                                             "vpabsd %5, %1\n\t"
                                                             "vpcmpud $2, %6, %1, %2%{%2%}\n\t"
                                                             "kmovw %2, %0");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", ok);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", g->ft2);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    gcc_jit_rvalue *in[] = {rv(g->val[f->m]), rv(g->ft0), rv(g->fz[v]), rv(g->ft1)};
    for (int i = 0; i < 4; i++)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "v", in[i]);
    gcc_jit_block_add_assignment_op(b, NULL, g->pok, GCC_JIT_BINARY_OP_BITWISE_AND,
                                    bin(g, GCC_JIT_BINARY_OP_BITWISE_AND, rv(ok), rv(g->fok[v])));
    gcc_jit_rvalue *ia[2] = {rv(g->fa[v]), rv(g->fz[v])}, *ib[2] = {rv(g->fb[v]), rv(g->fz[v])};
    asm_vec(g, b, "vcvtps2dq %{rn-sae%}, %1, %0\n\tvpaddd %2, %0, %0", g->pai[v], 1, 0, ia, 2);
    asm_vec(g, b, "vcvtps2dq %{rn-sae%}, %1, %0\n\tvpaddd %2, %0, %0", g->pbi[v], 1, 0, ib, 2);
}

/* out = the bytes of four i32 vectors v0..v3 as the packed tail packs a row's (saturated to i16, then
 * to T: vpackssdw works per 128-bit lane, so lane L holds the dwords 4L..4L+3 of v0, v1, v2, v3 in
 * turn, a 4 x 4 transpose of 4-byte groups away from the vectors' order); with z: Z's words added
 * (saturating) after the first pack. two: v2, v3 not packed (the words of v0, v1 twice). */
static void emit_pack_bytes(gen *g, gcc_jit_block *b, gcc_jit_lvalue *out, gcc_jit_rvalue *const *v, int two,
                            gcc_jit_rvalue *z01, gcc_jit_rvalue *z23)
{
    gcc_jit_rvalue *in01[3] = {v[0], v[1], z01}, *in23[3] = {v[2], v[3], z23};
    asm_vec(g, b, z01 ? "vpackssdw %2, %1, %0\n\tvpaddsw %3, %0, %0" : "vpackssdw %2, %1, %0", g->p01, 1, 0, in01,
            z01 ? 3 : 2);
    if (!two)
        asm_vec(g, b, z23 ? "vpackssdw %2, %1, %0\n\tvpaddsw %3, %0, %0" : "vpackssdw %2, %1, %0", g->p23, 1, 0, in23,
                z23 ? 3 : 2);
    gcc_jit_rvalue *inb[2] = {rv(g->p01), rv(two ? g->p01 : g->p23)};
    asm_vec(g, b, g->ep->fast.i8 ? "vpacksswb %2, %1, %0" : "vpackuswb %2, %1, %0", out, 0, 0, inb, 2);
}

/* The packed tail's constants of a strip of nv >= 2 vectors (after emit_packed_check of each): Z's
 * words and A's and B's bytes in the packed order (emit_pack_bytes), the permutation that
 * undoes it and the byte mask of the strip's columns. */
static void emit_packed_setup(gen *g, gcc_jit_block *b, int nv)
{
    gcc_jit_rvalue *z[MAX_VECS], *a[MAX_VECS], *bb[MAX_VECS];
    for (int v = 0; v < MAX_VECS; v++) {
        int u = v < nv ? v : nv - 1;
        z[v] = rv(g->fz[u]);
        a[v] = rv(g->pai[u]);
        bb[v] = rv(g->pbi[u]);
    }
    gcc_jit_rvalue *in01[2] = {z[0], z[1]}, *in23[2] = {z[2], z[3]};
    asm_vec(g, b, "vpackssdw %2, %1, %0", g->pz01, 0, 0, in01, 2);
    asm_vec(g, b, "vpackssdw %2, %1, %0", g->pz23, 0, 0, in23, 2);
    emit_pack_bytes(g, b, g->pa8, a, nv <= 2, NULL, NULL);
    emit_pack_bytes(g, b, g->pb8, bb, nv <= 2, NULL, NULL);
    /* dword 4v + L of the row's bytes is dword 4L + v of the pack */
    gcc_jit_rvalue *idx[16];
    for (int i = 0; i < 16; i++)
        idx[i] = gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 4 * (i % 4) + i / 4);
    gcc_jit_block_add_assignment(b, NULL, g->pidx, gcc_jit_context_new_rvalue_from_vector(g->c, NULL, g->v16, 16, idx));
    int sh = 16 * (nv - 1);
    gcc_jit_rvalue *m = gcc_jit_context_new_cast(g->c, NULL, rv(g->mask), g->t_u64);
    gcc_jit_block_add_assignment(
        b, NULL, g->bmask,
        bin(g, GCC_JIT_BINARY_OP_BITWISE_OR,
            bin(g, GCC_JIT_BINARY_OP_LSHIFT, m, gcc_jit_context_new_rvalue_from_int(g->c, g->t_u64, sh)),
            gcc_jit_context_new_rvalue_from_long(g->c, g->t_u64, (long)((1ull << sh) - 1))));
}

/* bad |= the lanes (of mask, or all) where the template's compare of x and y holds, as bits */
static void lean_lanes(gen *g, gcc_jit_block *b, const char *cmp_tmpl, gcc_jit_rvalue *x, gcc_jit_rvalue *y,
                       gcc_jit_rvalue *mask, gcc_jit_lvalue *bad)
{
    char t[128];
    snprintf(t, sizeof t, "%s%s\n\tkmovw %%1, %%0", cmp_tmpl, mask ? "%{%4%}" : "");
    gcc_jit_lvalue *bits = local(g, g->t_i32, "lb_%d_%d", g->nblocks, g->nlocals++);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, t);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", bits);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", x);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", y);
    if (mask)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", mask);
    gcc_jit_block_add_assignment_op(b, NULL, bad, GCC_JIT_BINARY_OP_BITWISE_OR, rv(bits));
}

/* The packed tail's lean steps of a strip of nv vectors (after emit_packed_check of each), into
 * plean: on the strip's stored lanes, A and B T's bounds (vpackuswb / vpacksswb saturate to them:
 * the clamp keeps every byte) and Z 0 (its saturating add keeps every word). Lanes masked off are
 * never stored, so they are not looked at. */
static void emit_lean_check(gen *g, gcc_jit_block *b, int nv)
{
    int i8 = g->ep->fast.i8;
    gcc_jit_block_add_assignment(b, NULL, g->lbad_ab, gcc_jit_context_zero(g->c, g->t_i32));
    gcc_jit_block_add_assignment(b, NULL, g->lbad_z, gcc_jit_context_zero(g->c, g->t_i32));
    vconst(g, b, g->ft0, i8 ? 0xffffff80u : 0u);   /* T's lowest */
    vconst(g, b, g->ft1, i8 ? 0x7fu : 0xffu);      /* and highest */
    for (int v = 0; v < nv; v++) {
        gcc_jit_rvalue *mask = v == nv - 1 ? rv(g->mask) : NULL;
        lean_lanes(g, b, "vpcmpd $4, %3, %2, %1", rv(g->pai[v]), rv(g->ft0), mask, g->lbad_ab);
        lean_lanes(g, b, "vpcmpd $4, %3, %2, %1", rv(g->pbi[v]), rv(g->ft1), mask, g->lbad_ab);
        lean_lanes(g, b, "vptestmd %3, %2, %1", rv(g->fz[v]), rv(g->fz[v]), mask, g->lbad_z);
    }
    gcc_jit_rvalue *zero = gcc_jit_context_zero(g->c, g->t_i32);
    gcc_jit_rvalue *ab_ok = cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->lbad_ab), zero);
    gcc_jit_rvalue *z_ok = cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->lbad_z), zero);
    gcc_jit_type *t_bool = gcc_jit_context_get_type(g->c, GCC_JIT_TYPE_BOOL);
    /* 0, 1 or 2 as above: ab_ok + (ab_ok and z_ok) */
    gcc_jit_rvalue *l1 = gcc_jit_context_new_cast(g->c, NULL, ab_ok, g->t_i32);
    gcc_jit_rvalue *l2 = gcc_jit_context_new_cast(
        g->c, NULL, gcc_jit_context_new_binary_op(g->c, NULL, GCC_JIT_BINARY_OP_LOGICAL_AND, t_bool, ab_ok, z_ok), g->t_i32);
    gcc_jit_block_add_assignment(b, NULL, g->plean, bin(g, GCC_JIT_BINARY_OP_PLUS, l1, l2));
}

/* The fast tail's column values from the channel values M, Z, LO, HI (computed in b), and whether
 * every lane may take it: fok = 0xffff when M is finite (M - M is +0), Z is an integer
 * (f32(round_even(Z)) == Z) of at most 2^23 (so A - Z and B - Z are exact), LO and HI are numbers
 * and A, B integers. A = clamp(min(LO, HI), lo_T, hi_T), B = clamp(HI, lo_T, hi_T): without NaNs,
 * clamp(clamp(v, LO, HI), lo_T, hi_T) is clamp(v, A, B), and for v integer and A, B integers
 * clamp(round_even(x) + Z, A, B) = round_even(clamp(x, A - Z, B - Z)) + Z. Lanes masked off read
 * zeros, which pass. fa = A - Z, fb = B - Z, fz = Z as i32. */
static void emit_tail_setup(gen *g, gcc_jit_block *b, const vfast *f, gcc_jit_lvalue *fa, gcc_jit_lvalue *fb,
                            gcc_jit_lvalue *fz, gcc_jit_lvalue *fok)
{
    /* small asm statements, constants in vectors: libgccjit 12 crashed on this as one statement
     * (14 operands), and on GPR constants in statements of several outputs */
    gcc_jit_rvalue *Z = rv(g->val[f->z]), *LO = rv(g->val[f->lo]);
    gcc_jit_rvalue *M = f->m >= 0 ? rv(g->val[f->m]) : Z, *HI;
    if (f->hi >= 0) {
        HI = rv(g->val[f->hi]);
    } else { /* a stage's tail without its min: min(v, +inf) */
        gcc_jit_lvalue *inf = local(g, g->v16, "hi_%d_%d", g->nblocks, g->nlocals++);
        vconst(g, b, inf, 0x7f800000u);
        HI = rv(inf);
    }
    gcc_jit_rvalue *zin[1] = {Z};
    asm_vec(g, b, "vcvtps2dq %{rn-sae%}, %1, %0", fz, 0, 0, zin, 1);
    vconst(g, b, g->ft1, 1u << 23);
    /* the checks of M (finite: M - M is +0), when the tail has one, then Z an integer of at most
     * 2^23, LO and HI numbers */
    static const char *const check_m = "vsubps %3, %3, %1\n\t"
                                       "vptestnmd %1, %1, %2\n\t";
    static const char *const check_z = "vcvtdq2ps %5, %1\n\t"
                                       "vcmpeqps %4, %1, %2%{%2%}\n\t"
                                       "vpabsd %5, %1\n\t"
                                       "vpcmpud $2, %8, %1, %2%{%2%}\n\t"
                                       "vcmpordps %7, %6, %2%{%2%}\n\t"
                                       "kmovw %2, %0";
    char text[512];
    snprintf(text, sizeof text, "%s%s", f->m >= 0 ? check_m : "kxnorw %2, %2, %2\n\t", check_z);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL, text);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", fok);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", g->ft0);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    gcc_jit_rvalue *in1[] = {M, Z, rv(fz), LO, HI, rv(g->ft1)};
    for (int i = 0; i < 6; i++)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "v", in1[i]);
    /* A = clamp(min(LO, HI), lo_T, hi_T) into fa, B = clamp(HI, lo_T, hi_T) into fb */
    vconst(g, b, g->ft0, f->i8 ? 0xc3000000u : 0u);          /* -128, 0 */
    vconst(g, b, g->ft1, f->i8 ? 0x42fe0000u : 0x437f0000u); /* 127, 255 */
    e = gcc_jit_block_add_extended_asm(b, NULL,
                                       "vminps %3, %2, %0\n\t"
                                       "vmaxps %4, %0, %0\n\t"
                                       "vminps %5, %0, %0\n\t"
                                       "vmaxps %4, %3, %1\n\t"
                                       "vminps %5, %1, %1");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", fa);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", fb);
    gcc_jit_rvalue *in2[] = {LO, HI, rv(g->ft0), rv(g->ft1)};
    for (int i = 0; i < 4; i++)
        gcc_jit_extended_asm_add_input_operand(e, NULL, "v", in2[i]);
    /* A and B integers */
    gcc_jit_lvalue *ok2 = local(g, g->t_i32, "fok2_%d_%d", g->nblocks, g->nlocals++);
    e = gcc_jit_block_add_extended_asm(b, NULL,
                                       "vrndscaleps $8, %3, %1\n\t"
                                       "vcmpeqps %1, %3, %2\n\t"
                                       "vrndscaleps $8, %4, %1\n\t"
                                       "vcmpeqps %1, %4, %2%{%2%}\n\t"
                                       "kmovw %2, %0");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", ok2);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", g->ft0);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(fa));
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(fb));
    gcc_jit_block_add_assignment_op(b, NULL, fok, GCC_JIT_BINARY_OP_BITWISE_AND, rv(ok2));
    gcc_jit_rvalue *ina[2] = {rv(fa), Z}, *inb[2] = {rv(fb), Z};
    asm_vec(g, b, "vsubps %2, %1, %0", fa, 0, 0, ina, 2);
    asm_vec(g, b, "vsubps %2, %1, %0", fb, 0, 0, inb, 2);
}

/* The epilogue's tail (vprog.fast) of vector v (emit_tail_setup). */
static void emit_fast_setup(gen *g, gcc_jit_block *b, int v)
{
    emit_tail_setup(g, b, &g->ep->fast, g->fa[v], g->fb[v], g->fz[v], g->fok[v]);
}

/* A joined program's stage tail (vprog.stage) of vector v, its lanes masked off by mask (or none),
 * its checks and'ed into fok[v]: the row then takes both fast tails or neither. The checks of
 * x_nan_free: |S| < 2^95 (by its bits, a NaN's above infinity's) and D != 0 (ordered, so not NaN);
 * lanes masked off pass. */
static void emit_stage_setup(gen *g, gcc_jit_block *b, int v, gcc_jit_rvalue *mask)
{
    const vfast *f = &g->ep->stage;
    gcc_jit_lvalue *ok = local(g, g->t_i32, "sok_%d_%d", g->nblocks, g->nlocals++);
    emit_tail_setup(g, b, f, g->sa[v], g->sb[v], g->sz[v], ok);
    vconst(g, b, g->ft1, 0x6f000000u); /* 2^95 */
    for (int k = 0; k < f->nsmall + f->nnonzero; k++) {
        int small = k < f->nsmall;
        gcc_jit_lvalue *okk = local(g, g->t_i32, "sok_%d_%d", g->nblocks, g->nlocals++);
        gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(
            b, NULL,
            small ? "vpslld $1, %3, %1\n\tvpsrld $1, %1, %1\n\tvcmpltps %4, %1, %2\n\tkmovw %2, %0"
                  : "vpxord %1, %1, %1\n\tvcmpneq_oqps %1, %3, %2\n\tkmovw %2, %0");
        gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", okk);
        gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", g->ft0);
        gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
        gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(g->val[small ? f->small[k] : f->nonzero[k - f->nsmall]]));
        gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(g->ft1));
        gcc_jit_block_add_assignment_op(b, NULL, ok, GCC_JIT_BINARY_OP_BITWISE_AND, rv(okk));
    }
    if (mask) {
        gcc_jit_rvalue *off = bin(g, GCC_JIT_BINARY_OP_BITWISE_XOR, gcc_jit_context_new_cast(g->c, NULL, mask, g->t_i32),
                                  gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff));
        gcc_jit_block_add_assignment_op(b, NULL, ok, GCC_JIT_BINARY_OP_BITWISE_OR, off);
    }
    gcc_jit_block_add_assignment_op(b, NULL, g->fok[v], GCC_JIT_BINARY_OP_BITWISE_AND, rv(ok));
}

/* The fast tail's f32(y - T) for vfast.ysub, from the strip's setup of vector v: fzt = f32(Z - T),
 * its lanes checked |Z - T| <= 2^24 into fok[v] (Z - T wraps in i32 as subi does; with |Z| <= 2^23
 * the wrapped value is that small only when the true one is). y - T is then the integer r + (Z - T),
 * r = round_even(clamp(x, A - Z, B - Z)) exact in f32 (|r| <= 2^23 + 255), and the float sum is that
 * integer rounded once, as cvtf rounds it. Lanes masked off (zeros) pass. */
static void emit_ysub_setup(gen *g, gcc_jit_block *b, int v)
{
    gcc_jit_rvalue *in[2] = {rv(g->fz[v]), rv(g->val[g->ep->in[g->ep->fast.ysub].arg[1]])};
    asm_vec(g, b, "vpsubd %2, %1, %0", g->fzt[v], 0, 0, in, 2);
    vconst(g, b, g->ft1, 1u << 24);
    gcc_jit_lvalue *ok = local(g, g->t_i32, "yok_%d_%d", g->nblocks, g->nlocals++);
    gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(b, NULL,
                                                             "vpabsd %3, %1\n\t"
                                                             "vpcmpud $2, %4, %1, %2\n\t"
                                                             "kmovw %2, %0");
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=r", ok);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&v", g->ft0);
    gcc_jit_extended_asm_add_output_operand(e, NULL, "=&Yk", g->kmask);
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(g->fzt[v]));
    gcc_jit_extended_asm_add_input_operand(e, NULL, "v", rv(g->ft1));
    gcc_jit_block_add_assignment_op(b, NULL, g->fok[v], GCC_JIT_BINARY_OP_BITWISE_AND, rv(ok));
    gcc_jit_rvalue *z = rv(g->fzt[v]);
    asm_vec(g, b, "vcvtdq2ps %1, %0", g->fzt[v], 0, 0, &z, 1);
}

static void emit_ysub_row(gen *g, gcc_jit_block *b, int v, gcc_jit_lvalue *out)
{
    gcc_jit_rvalue *a[4] = {rv(g->val[g->ep->fast.x]), rv(g->fa[v]), rv(g->fb[v]), rv(g->fzt[v])};
    asm_vec(g, b, "vmaxps %2, %1, %0\n\tvminps %3, %0, %0\n\tvrndscaleps $8, %0, %0\n\tvaddps %4, %0, %0", out, 1, 0, a, 4);
}

/* A fast tail of one row: y's lanes round_even(clamp(x, fa, fb)) + fz into out. */
static void emit_tail_row(gen *g, gcc_jit_block *b, const vfast *f, gcc_jit_lvalue *fa, gcc_jit_lvalue *fb,
                          gcc_jit_lvalue *fz, gcc_jit_lvalue *out)
{
    gcc_jit_rvalue *a[4] = {rv(g->val[f->x]), rv(fa), rv(fb), rv(fz)};
    asm_vec(g, b, "vmaxps %2, %1, %0\n\tvminps %3, %0, %0\n\tvcvtps2dq %{rn-sae%}, %0, %0\n\tvpaddd %4, %0, %0", out, 1, 0,
            a, 4);
}

/* The instructions of a row (those that read the accumulator acc), y's lanes in val[n - 1]; fast:
 * through the fast tail, whose bytes are its satf's value (then read by what follows it). */
static void emit_row_insns(gen *g, gcc_jit_block *b, gcc_jit_lvalue *acc, int v, gcc_jit_rvalue *mask, gcc_jit_lvalue *t0,
                           gcc_jit_lvalue *t1, int fast)
{
    const vfast *f = &g->ep->fast, *st = &g->ep->stage;
    for (int i = 0; i < g->ep->n; i++)
        if (fast && f->ysub >= 0 && (i == f->s || i == f->ysub))
            continue; /* in ycvt's */
        else if (fast && i == f->ycvt)
            emit_ysub_row(g, b, v, g->val[i]);
        else if (fast && i == f->s)
            emit_tail_row(g, b, f, g->fa[v], g->fb[v], g->fz[v], g->val[i]);
        else if (fast && st->on && i == st->s)
            emit_tail_row(g, b, st, g->sa[v], g->sb[v], g->sz[v], g->val[i]);
        else if (g->ep->in[i].dep && !(fast && (f->tail[i] || (st->on && st->tail[i]))))
            emit_insn(g, b, i, acc, v, mask, t0, t1);
}

/* The rows of vector v of the tile from block b (rows past nrows skipped) on to next_v. */
static void emit_vec_rows(gen *g, gcc_jit_block *b, int v, gcc_jit_rvalue *mask, gcc_jit_lvalue *t0, gcc_jit_lvalue *t1,
                          gcc_jit_block *next_v, int fast)
{
    for (int r = 0; r < g->rows; r++) {
        if (r) {
            gcc_jit_block *in = block(g);
            gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_GT, rv(g->nrows), lng(g, r)), in, next_v);
            b = in;
        }
        g->row = r;
        acc_get(g, b, r, v);
        emit_row_insns(g, b, g->acc[r][v], v, mask, t0, t1, fast);
        gcc_jit_rvalue *row = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->i0), lng(g, r));
        gcc_jit_rvalue *dst = addr(g, prm(g, P_C), bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, row, prm(g, P_CRS)), rv(g->jb)));
        asm_store_bytes(g, b, rv(g->val[g->ep->n - 1]), t0, dst, 16 * v, mask); /* y's bytes */
    }
    gcc_jit_block_end_with_jump(b, NULL, next_v);
}

/* The packed tail of the tile's nv >= 2 vectors from block b on to advance, where every lane of the
 * strip passed its check (pok): per row, each vector's program up to x and r = round_even(x) as i32
 * (exact: |x| < 2^31), then the row's nv vectors at once: packed to i16 with saturation, Z added
 * (saturating), packed to T with saturation, clamped to [A, B] in bytes, put back in column order
 * (vpermd) and stored by one store of 16 nv bytes (full: all the strip's columns, 2 or 4 vectors: an
 * unmasked one, as masked stores of full strips looked slower at batch 64; else masked by bmask). Its
 * bytes are the fast tail's,
 * round_even(clamp(x, A - Z, B - Z)) + Z = clamp(r + Z, A, B) (A, B, Z integers): with |Z| <= 2^14,
 * a word saturated at +-2^15 stays past [A, B] on its side after Z is added, so clamp(sat8(sat16(sat16(r)
 * + Z)), A, B) = clamp(r + Z, A, B), [A, B] lying inside T's range. lean (the strip's plean): 1 leaves
 * the clamp out, 2 Z's add too, the stored bytes the same (emit_lean_check): on Zen 4 each 512-bit
 * instruction of the tail takes the vector pipes' time from the dot products (16 -> 96 at 112 x
 * 112, 4 vpdpbusd a vector: 142 -> 123 us with 4 of a row's 20 left out). */
static void emit_packed_rows(gen *g, gcc_jit_block *b, int nv, int full, int lean, gcc_jit_lvalue *t0, gcc_jit_lvalue *t1,
                             gcc_jit_block *advance)
{
    const vfast *f = &g->ep->fast;
    for (int v = 0; v < nv; v++) {
        g->val = g->vals[v];
        for (int i = 0; i < g->ep->n; i++)
            if (!g->ep->in[i].dep)
                emit_insn(g, b, i, NULL, v, v == nv - 1 ? rv(g->mask) : NULL, t0, t1);
    }
    for (int r = 0; r < g->rows; r++) {
        if (r) {
            gcc_jit_block *in = block(g);
            gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_GT, rv(g->nrows), lng(g, r)), in, advance);
            b = in;
        }
        gcc_jit_rvalue *q[MAX_VECS];
        g->row = r;
        for (int v = 0; v < nv; v++) {
            g->val = g->vals[v];
            acc_get(g, b, r, v);
            for (int i = 0; i < g->ep->n; i++)
                if (g->ep->in[i].dep && !f->tail[i])
                    emit_insn(g, b, i, g->acc[r][v], v, v == nv - 1 ? rv(g->mask) : NULL, t0, t1);
            gcc_jit_rvalue *x = rv(g->val[f->x]);
            asm_vec(g, b, "vcvtps2dq %{rn-sae%}, %1, %0", g->rr[v], 0, 0, &x, 1);
        }
        g->val = g->vals[0];
        for (int v = 0; v < MAX_VECS; v++)
            q[v] = rv(g->rr[v < nv ? v : nv - 1]);
        emit_pack_bytes(g, b, g->pout, q, nv <= 2, lean < 2 ? rv(g->pz01) : NULL, lean < 2 ? rv(g->pz23) : NULL);
        gcc_jit_rvalue *in[4] = {rv(g->pout), rv(g->pa8), rv(g->pb8), rv(g->pidx)}, *inp[2] = {rv(g->pout), rv(g->pidx)};
        if (lean)
            asm_vec(g, b, "vpermd %1, %2, %0", g->pout, 0, 0, inp, 2);
        else
            asm_vec(g, b,
                    f->i8 ? "vpmaxsb %2, %1, %0\n\tvpminsb %3, %0, %0\n\tvpermd %0, %4, %0"
                          : "vpmaxub %2, %1, %0\n\tvpminub %3, %0, %0\n\tvpermd %0, %4, %0",
                    g->pout, 1, 0, in, 4);
        gcc_jit_rvalue *row = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->i0), lng(g, r));
        gcc_jit_rvalue *dst = addr(g, prm(g, P_C), bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, row, prm(g, P_CRS)), rv(g->jb)));
        gcc_jit_extended_asm *e = gcc_jit_block_add_extended_asm(
            b, NULL, !full ? "vmovdqu8 %0, (%1)%{%2%}" : nv == 4 ? "vmovdqu64 %0, (%1)" : "vmovdqu %t0, (%1)");
        gcc_jit_extended_asm_set_volatile_flag(e, 1);
        /* vmovdqu (VEX) reaches ymm0-15 only: "x" keeps the register there */
        gcc_jit_extended_asm_add_input_operand(e, NULL, full && nv != 4 ? "x" : "v", rv(g->pout));
        gcc_jit_extended_asm_add_input_operand(e, NULL, "r", dst);
        if (!full)
            gcc_jit_extended_asm_add_input_operand(e, NULL, "Yk", rv(g->bmask));
        gcc_jit_extended_asm_add_clobber(e, "memory");
    }
    gcc_jit_block_end_with_jump(b, NULL, advance);
}

/* The packed tail's three forms by the strip's plean (emit_lean_check), from block b on to advance. */
static void emit_packed_forms(gen *g, gcc_jit_block *b, int nv, int full, gcc_jit_lvalue *t0, gcc_jit_lvalue *t1,
                              gcc_jit_block *advance)
{
    gcc_jit_block *form[3] = {block(g), block(g), block(g)}, *not0 = block(g);
    gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->plean), gcc_jit_context_zero(g->c, g->t_i32)),
                                       form[0], not0);
    gcc_jit_block_end_with_conditional(not0, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->plean), gcc_jit_context_one(g->c, g->t_i32)),
                                       form[1], form[2]);
    for (int lean = 0; lean < 3; lean++)
        emit_packed_rows(g, form[lean], nv, full, lean, t0, t1, advance);
}

/* The fused epilogue of the tile's nv vectors from block b: per vector, the instructions that do
 * not read the accumulator once, then per row (rows past nrows skipped) the others and y's
 * bytes, through the fast tail where the strip's check (emit_strip_setup) let the vector's lanes
 * take it; through the packed tail (emit_packed_rows) when the strip's lanes all passed its check;
 * returns the block that continues. */
static gcc_jit_block *emit_epilogue(gen *g, gcc_jit_block *b, int nv, gcc_jit_block *advance)
{
    gcc_jit_lvalue *t0 = local(g, g->v16, "k0_%d", g->nblocks, 0), *t1 = local(g, g->v16, "k1_%d", g->nblocks, 0);
    if (g->packed && nv >= 2) {
        gcc_jit_block *packed = block(g), *each = block(g);
        gcc_jit_block_end_with_conditional(
            b, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->pok), gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff)),
            packed, each);
        if (nv == 2 || nv == 4) {
            gcc_jit_block *full = block(g), *part = block(g);
            gcc_jit_block_end_with_conditional(
                packed, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->mask), gcc_jit_context_new_rvalue_from_int(g->c, g->t_u16, 0xffff)),
                full, part);
            emit_packed_forms(g, full, nv, 1, t0, t1, advance);
            emit_packed_forms(g, part, nv, 0, t0, t1, advance);
        } else {
            emit_packed_forms(g, packed, nv, 0, t0, t1, advance);
        }
        b = each;
    }
    for (int v = 0; v < nv; v++) {
        gcc_jit_rvalue *mask = v == nv - 1 ? rv(g->mask) : NULL;
        gcc_jit_block *next_v = v + 1 < nv ? block(g) : advance;
        for (int i = 0; i < g->ep->n; i++)
            if (!g->ep->in[i].dep)
                emit_insn(g, b, i, NULL, v, mask, t0, t1);
        if (g->ep->fast.on) {
            gcc_jit_block *fast = block(g), *slow = block(g);
            gcc_jit_block_end_with_conditional(
                b, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->fok[v]), gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff)),
                fast, slow);
            emit_vec_rows(g, fast, v, mask, t0, t1, next_v, 1);
            emit_vec_rows(g, slow, v, mask, t0, t1, next_v, 0);
        } else {
            emit_vec_rows(g, b, v, mask, t0, t1, next_v, 0);
        }
        b = next_v;
    }
    return b;
}

/* Groups [g0, g0 + cnt) of one tap for nv vectors: activations at p[r] + idx + 4 (g - g0), weights at
 * wbase + (g - g0) * step + 64 v (wbase at the strip's group g0; step: the strip's bytes per group). */
static void emit_groups(gen *g, gcc_jit_block *b, int nv, int64_t step, int64_t cnt, gcc_jit_rvalue *idx,
                        gcc_jit_rvalue *wbase)
{
    for (int64_t q = 0; q < cnt; q++) {
        for (int v = 0; v < nv; v++)
            if (g->half && v == nv - 1)
                asm_load_half(g, b, g->y[v], wbase, q * step + 64 * v);
            else
                asm_load(g, b, g->y[v], wbase, q * step + 64 * v, NULL);
        for (int r = 0; r < g->rows; r++) {
            asm_bcast(g, b, g->x[r], rv(g->p[r]), idx, 4 * q);
            for (int v = 0; v < nv; v++)
                (g->half && v == nv - 1 ? asm_dot_half : asm_dot)(g, b, g->acc[r][v], rv(g->x[r]), rv(g->y[v]));
        }
    }
}

/* From block b, the strip's lane mask of its last vector (min(j1 - (jb + 16 (nv - 1)), 16) lanes)
 * and, with a fast tail, each vector's check and column values (emit_fast_setup): once per strip
 * of nv vectors at jb rather than once per row tile, the values the same for every tile. Returns
 * the block that continues. */
static gcc_jit_block *emit_strip_setup(gen *g, gcc_jit_block *b, int nv)
{
    gcc_jit_context *c = g->c;
    gcc_jit_rvalue *left = bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, P_J1), bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->jb), lng(g, 16 * (nv - 1))));
    gcc_jit_rvalue *lanes = gcc_jit_context_new_cast(c, NULL, left, g->t_i32);
    gcc_jit_rvalue *bits = bin(g, GCC_JIT_BINARY_OP_MINUS,
                               bin(g, GCC_JIT_BINARY_OP_LSHIFT, gcc_jit_context_one(c, g->t_i32), lanes),
                               gcc_jit_context_one(c, g->t_i32));
    gcc_jit_block *full = block(g), *part = block(g), *go = block(g);
    gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_GE, left, lng(g, 16)), full, part);
    gcc_jit_block_add_assignment(full, NULL, g->mask, gcc_jit_context_new_rvalue_from_int(c, g->t_u16, 0xffff));
    gcc_jit_block_end_with_jump(full, NULL, go);
    gcc_jit_block_add_assignment(part, NULL, g->mask, gcc_jit_context_new_cast(c, NULL, bits, g->t_u16));
    gcc_jit_block_end_with_jump(part, NULL, go);
    b = go;
    if (g->fold >= 0) { /* the sums' start: init + the bias table, once per strip */
        gcc_jit_lvalue *t = local(g, g->v16, "bt_%d", g->nblocks, 0);
        gcc_jit_rvalue *init = addr(g, prm(g, P_INIT), rv(g->jb));
        gcc_jit_rvalue *tab = addr(g, rv(g->tab[g->ep->in[g->fold_tab].imm]), rv(g->jb));
        for (int v = 0; v < nv; v++) {
            gcc_jit_rvalue *mask = v == nv - 1 ? rv(g->mask) : NULL;
            asm_load(g, b, g->binit[v], init, 64 * v, mask);
            asm_load(g, b, t, tab, 64 * v, mask);
            gcc_jit_rvalue *in[2] = {rv(g->binit[v]), rv(t)};
            asm_vec(g, b, "vpaddd %2, %1, %0", g->binit[v], 0, 0, in, 2);
        }
    }
    if (!g->ep || !g->ep->fast.on)
        return b;
    gcc_jit_lvalue *t0 = local(g, g->v16, "s0_%d", g->nblocks, 0), *t1 = local(g, g->v16, "s1_%d", g->nblocks, 0);
    int packed = g->packed && nv >= 2;
    if (packed)
        gcc_jit_block_add_assignment(b, NULL, g->pok, gcc_jit_context_new_rvalue_from_int(c, g->t_i32, 0xffff));
    for (int v = 0; v < nv; v++) {
        for (int i = 0; i < g->ep->n; i++)
            if (!g->ep->in[i].dep)
                emit_insn(g, b, i, NULL, v, v == nv - 1 ? rv(g->mask) : NULL, t0, t1);
        emit_fast_setup(g, b, v);
        if (g->ep->fast.ysub >= 0)
            emit_ysub_setup(g, b, v);
        if (g->ep->stage.on)
            emit_stage_setup(g, b, v, v == nv - 1 ? rv(g->mask) : NULL);
        if (packed)
            emit_packed_check(g, b, v);
    }
    if (packed) {
        emit_packed_setup(g, b, nv);
        emit_lean_check(g, b, nv);
    }
    return b;
}

/* The tile of nv vectors at (i0, jb), from block b to block done; jb is the first column of a strip
 * of the panels (igemm.h qr_iconv_col) whose k groups are step bytes apart. */
static void emit_tile(gen *g, gcc_jit_block *b, int nv, int64_t step, gcc_jit_block *done)
{
    gcc_jit_context *c = g->c;
    gcc_jit_rvalue *init = addr(g, prm(g, P_INIT), rv(g->jb));
    for (int r = 0; r < g->rows; r++)
        for (int v = 0; v < nv; v++)
            if (g->fold >= 0)
                gcc_jit_block_add_assignment(b, NULL, g->acc[r][v], rv(g->binit[v]));
            else
                asm_load(g, b, g->acc[r][v], init, 64 * v, v == nv - 1 ? rv(g->mask) : NULL);
    /* w_t at jb: its strip's rows of tap 0 */
    gcc_jit_block_add_assignment(b, NULL, g->wt,
                                 addr(g, prm(g, P_W), bin(g, GCC_JIT_BINARY_OP_MULT, rv(g->jb), lng(g, g->taps * g->k4))));
    gcc_jit_block_add_assignment(b, NULL, g->t, lng(g, 0));
    gcc_jit_block *tap = block(g);
    gcc_jit_block_end_with_jump(b, NULL, tap);
    b = tap;
    for (int r = 0; r < g->rows; r++)
        gcc_jit_block_add_assignment(b, NULL, g->p[r], rv(gcc_jit_context_new_array_access(c, NULL, rv(g->arow[r]), rv(g->t))));
    int64_t groups = g->groups;
    if (groups <= UNROLL_ALL) {
        emit_groups(g, b, nv, step, groups, NULL, rv(g->wt));
    } else {
        int64_t iters = groups / UNROLL, rest = groups % UNROLL;
        gcc_jit_block_add_assignment(b, NULL, g->kk, lng(g, 0));
        gcc_jit_block_add_assignment(b, NULL, g->wk, rv(g->wt));
        gcc_jit_block *body = block(g), *after = block(g);
        gcc_jit_block_end_with_jump(b, NULL, body);
        emit_groups(g, body, nv, step, UNROLL, rv(g->kk), rv(g->wk));
        gcc_jit_block_add_assignment_op(body, NULL, g->kk, GCC_JIT_BINARY_OP_PLUS, lng(g, 4 * UNROLL));
        gcc_jit_block_add_assignment(body, NULL, g->wk, addr(g, rv(g->wk), lng(g, UNROLL * step)));
        gcc_jit_block_end_with_conditional(body, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(g->kk), lng(g, 4 * UNROLL * iters)),
                                           body, after);
        b = after;
        if (rest)
            emit_groups(g, b, nv, step, rest, rv(g->kk), rv(g->wk));
    }
    gcc_jit_block_add_assignment(b, NULL, g->wt, addr(g, rv(g->wt), lng(g, groups * step)));
    gcc_jit_block_add_assignment_op(b, NULL, g->t, GCC_JIT_BINARY_OP_PLUS, lng(g, 1));
    gcc_jit_block *store = block(g);
    gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(g->t), lng(g, g->taps)), tap, store);
    b = store;
    gcc_jit_block *advance = block(g);
    if (g->ep) {
        for (int r = 0; r < g->rows; r++)
            for (int v = 0; v < nv; v++)
                acc_put(g, b, r, v);
        emit_epilogue(g, b, nv, advance);
        gcc_jit_block_end_with_jump(advance, NULL, done);
        return;
    }
    /* rows past m were computed from row m-1's pointers: only nrows are stored */
    for (int r = 0; r < g->rows; r++) {
        gcc_jit_rvalue *row = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->i0), lng(g, r));
        gcc_jit_rvalue *dst = addr(g, prm(g, P_C), bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, row, prm(g, P_CRS)), rv(g->jb)));
        for (int v = 0; v < nv; v++)
            asm_store(g, b, "vmovdqu32", rv(g->acc[r][v]), dst, 64 * v, v == nv - 1 ? rv(g->mask) : NULL);
        if (r + 1 < g->rows) {
            gcc_jit_block *next = block(g);
            gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_GT, rv(g->nrows), lng(g, r + 1)), next, advance);
            b = next;
        }
    }
    gcc_jit_block_end_with_jump(b, NULL, advance);
    gcc_jit_block_end_with_jump(advance, NULL, done);
}

/* A row tile's pointer rows from block b (those past m at row m - 1, and nrows of them real);
 * returns the block that continues. */
static gcc_jit_block *emit_row_setup(gen *g, gcc_jit_block *b)
{
    gcc_jit_rvalue *left = bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, P_M), rv(g->i0));
    gcc_jit_block *few = block(g), *many = block(g), *set = block(g);
    gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_LT, left, lng(g, g->rows)), few, many);
    gcc_jit_block_add_assignment(few, NULL, g->nrows, left);
    gcc_jit_block_end_with_jump(few, NULL, set);
    gcc_jit_block_add_assignment(many, NULL, g->nrows, lng(g, g->rows));
    gcc_jit_block_end_with_jump(many, NULL, set);
    for (int r = 0; r < g->rows; r++) {
        gcc_jit_rvalue *row = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->i0), lng(g, r));
        gcc_jit_rvalue *at = addr(g, prm(g, P_A), bin(g, GCC_JIT_BINARY_OP_MULT, row, lng(g, g->taps)));
        if (r) {
            gcc_jit_block *in = block(g), *past = block(g), *join = block(g);
            gcc_jit_block_end_with_conditional(set, NULL, cmp(g, GCC_JIT_COMPARISON_LT, lng(g, r), rv(g->nrows)), in, past);
            gcc_jit_block_add_assignment(in, NULL, g->arow[r], at);
            gcc_jit_block_end_with_jump(in, NULL, join);
            gcc_jit_block_add_assignment(past, NULL, g->arow[r], rv(g->arow[r - 1]));
            gcc_jit_block_end_with_jump(past, NULL, join);
            set = join;
        } else {
            gcc_jit_block_add_assignment(set, NULL, g->arow[r], at);
        }
    }
    return set;
}

/* Every row tile of the nv vectors at jb, from block b, then jb past them and on to after: the
 * strip's weights stay in cache while all the rows pass over them (a layer of few pixels and a
 * large K, ResNet-18's 7x7 ones, streamed all its weights once per row tile the other way round). */
static void emit_rows(gen *g, gcc_jit_block *b, int nv, int64_t step, gcc_jit_block *after)
{
    gcc_jit_block *rows = block(g), *body = block(g), *adv = block(g);
    b = emit_strip_setup(g, b, nv);
    gcc_jit_block_add_assignment(b, NULL, g->i0, lng(g, 0));
    gcc_jit_block_end_with_jump(b, NULL, rows);
    gcc_jit_block_end_with_conditional(rows, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(g->i0), prm(g, P_M)), body, adv);
    /* Tiles of R rows, and of R - 1 where the rows left fit the tiles they need that way: the same
     * number of tiles with no row computed for nothing (a 7 x 7 image's 49 rows: 4 tiles of 6 and 5
     * of 5, not 9 of 6 whose last computes 5 rows past m) */
    int big = g->rows;
    gcc_jit_rvalue *left = bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, P_M), rv(g->i0));
    gcc_jit_rvalue *tiles = bin(g, GCC_JIT_BINARY_OP_DIVIDE, bin(g, GCC_JIT_BINARY_OP_PLUS, left, lng(g, big - 1)), lng(g, big));
    gcc_jit_block *small_tile = block(g), *big_tile = block(g);
    gcc_jit_block_end_with_conditional(body, NULL,
                                       cmp(g, GCC_JIT_COMPARISON_LE, left, bin(g, GCC_JIT_BINARY_OP_MULT, tiles, lng(g, big - 1))),
                                       small_tile, big_tile);
    for (int sz = big - 1; sz <= big; sz++) {
        gcc_jit_block *next = block(g);
        g->rows = sz;
        emit_tile(g, emit_row_setup(g, sz < big ? small_tile : big_tile), nv, step, next);
        gcc_jit_block_add_assignment_op(next, NULL, g->i0, GCC_JIT_BINARY_OP_PLUS, lng(g, sz));
        gcc_jit_block_end_with_jump(next, NULL, rows);
    }
    g->rows = big;
    gcc_jit_block_add_assignment_op(adv, NULL, g->jb, GCC_JIT_BINARY_OP_PLUS, lng(g, 16 * nv));
    gcc_jit_block_end_with_jump(adv, NULL, after);
}

/* From block pick: the widest tile of at most top vectors the columns left fill (more than
 * 16 (nv - 1) of them take nv vectors), over a strip of step bytes per k group; half: where at most
 * 16 (nv - 1) + 8 columns are left, the tile's last vector is a half one (gen.half). */
static void emit_picks(gen *g, gcc_jit_block *pick, int top, int64_t step, int half, gcc_jit_block *done)
{
    gcc_jit_rvalue *cols_left = bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, P_J1), rv(g->jb));
    for (int nv = top; nv >= 1; nv--) {
        gcc_jit_block *tile = block(g);
        if (nv == 1) {
            gcc_jit_block_end_with_jump(pick, NULL, tile);
        } else {
            gcc_jit_block *other = block(g);
            gcc_jit_block_end_with_conditional(pick, NULL, cmp(g, GCC_JIT_COMPARISON_GT, cols_left, lng(g, 16 * (nv - 1))), tile, other);
            pick = other;
        }
        if (half) {
            gcc_jit_block *whole = block(g), *halved = block(g);
            gcc_jit_block_end_with_conditional(tile, NULL, cmp(g, GCC_JIT_COMPARISON_LE, cols_left, lng(g, 16 * (nv - 1) + 8)),
                                               halved, whole);
            g->half = 1;
            emit_rows(g, halved, nv, step, done);
            g->half = 0;
            tile = whole;
        }
        emit_rows(g, tile, nv, step, done);
    }
}

/* Whether n's last 16-column vector is computed as a half one (gen.half): 1 to 8 columns in it, and
 * the CPU has AVX-512VL's ymm forms of vpdpbusd and vmovdqu32. */
static int n_half(int64_t n)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return n % 16 >= 1 && n % 16 <= 8 && __builtin_cpu_supports("avx512vl");
#else
    (void)n;
    return 0;
#endif
}

void qc_iconv_jit_tile(int64_t taps, int64_t k4, int64_t n, int *rows, int *vecs)
{
    (void)taps;
    (void)k4;
    /* accumulators rows * vecs, plus vecs weights and a broadcast, within 32 zmm; rows also need one
     * pointer register each */
    int64_t nv = (n + 15) / 16;
    *vecs = nv >= MAX_VECS ? MAX_VECS : (int)nv;
    *rows = *vecs == 4 ? 6 : *vecs == 3 ? 8 : 8;
}

/* The types both generated functions use. */
static void gen_types(gen *g)
{
    gcc_jit_context *c = g->c;
    g->t_void = gcc_jit_context_get_type(c, GCC_JIT_TYPE_VOID);
    g->t_i64 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_LONG);
    g->t_i32 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT);
    g->t_u16 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UNSIGNED_SHORT);
    g->t_u8 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UNSIGNED_CHAR);
    g->t_i8 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_SIGNED_CHAR);
    g->t_u64 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UNSIGNED_LONG_LONG);
    g->v16 = gcc_jit_type_get_vector(g->t_i32, 16);
    g->p_i32 = gcc_jit_type_get_pointer(g->t_i32);
    g->p_i32c = gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->t_i32));
    g->p_u8c = gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->t_u8));
}

static void build(gen *g)
{
    gcc_jit_context *c = g->c;
    gen_types(g);
    g->pp_u8c = gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->p_u8c));
    g->p_i8c = gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->t_i8));
    /* fused (qr_iconv_ep_fn): y's bytes for c, then the tables and the skip tensor's rows */
    static const char *const names[] = {"c", "c_rs", "a", "taps", "m", "w", "init", "k4", "j0", "j1", "n", "tabs", "s", "s_rs"};
    gcc_jit_type *pp_i32c = gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->p_i32c));
    gcc_jit_type *types[] = {g->ep ? gcc_jit_type_get_pointer(g->t_u8) : g->p_i32, g->t_i64, g->pp_u8c, g->t_i64, g->t_i64, g->p_i8c,
                             g->p_i32c, g->t_i64, g->t_i64, g->t_i64, g->t_i64, pp_i32c, g->p_u8c, g->t_i64};
    int np = g->ep ? 14 : 11;
    for (int i = 0; i < np; i++)
        g->prm[i] = gcc_jit_context_new_param(c, NULL, types[i], names[i]);
    g->fn = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, g->t_void, "qr_iconv", np, g->prm, 0);
    g->i0 = local(g, g->t_i64, "i0", 0, 0);
    g->jb = local(g, g->t_i64, "jb", 0, 0);
    g->t = local(g, g->t_i64, "t", 0, 0);
    g->kk = local(g, g->t_i64, "kk", 0, 0);
    g->nrows = local(g, g->t_i64, "nrows", 0, 0);
    g->wt = local(g, g->p_i8c, "wt", 0, 0);
    g->wk = local(g, g->p_i8c, "wk", 0, 0);
    g->mask = local(g, g->t_u16, "mask", 0, 0);
    for (int r = 0; r < g->rows; r++) {
        g->arow[r] = local(g, g->pp_u8c, "arow%d", r, 0);
        g->p[r] = local(g, g->p_u8c, "p%d", r, 0);
        g->x[r] = local(g, g->v16, "x%d", r, 0);
        for (int v = 0; v < g->vecs; v++)
            g->acc[r][v] = local(g, g->v16, "acc%d_%d", r, v);
    }
    for (int v = 0; v < g->vecs; v++)
        g->y[v] = local(g, g->v16, "y%d", v, 0);
    if (g->ep) {
        g->kmask = local(g, g->t_u16, "kmask", 0, 0);
        g->val = g->vals[0];
        for (int i = 0; i < g->ep->n; i++)
            g->val[i] = local(g, g->v16, "v%d", i, 0);
        for (int t = 0; t < g->ep->ntabs; t++)
            g->tab[t] = local(g, g->p_i32c, "tab%d", t, 0);
        fast_locals(g);
        for (int v = 0; g->fold >= 0 && v < g->vecs; v++)
            g->binit[v] = local(g, g->v16, "binit%d", v, 0);
        g->accs = gcc_jit_function_new_local(g->fn, NULL, gcc_jit_context_new_array_type(c, NULL, g->v16, MAX_ROWS * MAX_VECS),
                                             "accs");
        g->accsp = local(g, gcc_jit_type_get_pointer(g->v16), "accsp", 0, 0);
    }

    gcc_jit_block *entry = block(g), *cols = block(g), *pick = block(g), *out = block(g);
    gcc_jit_block_add_assignment(entry, NULL, g->i0, lng(g, 0));
    for (int t = 0; g->ep && t < g->ep->ntabs; t++)
        gcc_jit_block_add_assignment(entry, NULL, g->tab[t],
                                     rv(gcc_jit_context_new_array_access(c, NULL, prm(g, P_TABS), lng(g, t))));
    gcc_jit_block_add_assignment(entry, NULL, g->jb, prm(g, P_J0));
    if (g->ep) /* once: libgccjit 12 crashed on the array's address as an asm operand in each load */
        gcc_jit_block_add_assignment(entry, NULL, g->accsp, addr(g, rv(g->accs), lng(g, 0)));
    gcc_jit_block_end_with_jump(entry, NULL, cols);
    gcc_jit_block_end_with_conditional(cols, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(g->jb), prm(g, P_J1)), pick, out);
    /* strips of 64 columns, the last one narrower when n16 is not a multiple of 64 */
    int64_t full = g->n16 / 64, last = g->n16 % 64;
    /* n's last vector holds 1 to 8 columns: the last strip's tiles end in a half vector (an N of 24,
     * MobileNetV2's thin projections, computed 32 columns' products for 24) */
    int half = n_half(g->n);
    if (full && last) {
        gcc_jit_block *in_full = block(g), *in_last = block(g);
        gcc_jit_rvalue *end = bin(g, GCC_JIT_BINARY_OP_PLUS, rv(g->jb), lng(g, 64));
        gcc_jit_block_end_with_conditional(pick, NULL, cmp(g, GCC_JIT_COMPARISON_LE, end, lng(g, g->n16)), in_full, in_last);
        emit_picks(g, in_full, MAX_VECS, 64 * 4, 0, cols);
        emit_picks(g, in_last, (int)(last / 16), last * 4, half, cols);
    } else {
        emit_picks(g, pick, full ? MAX_VECS : (int)(last / 16), full ? 64 * 4 : last * 4, half, cols);
    }
    gcc_jit_block_end_with_void_return(out, NULL);
}

/* The rows epilogue (qr_rows_ep_fn): for each 16 columns jj of [0, cols), masked past cols,
 * the instructions that do not read the accumulator once (tables at c0 + jj), then per row r the
 * accumulator's lanes at acc + r * acc_rs + jj, the rest, and y's bytes at y + r * y_rs + jj. */
enum { R_Y, R_YRS, R_ACC, R_ACCRS, R_ROWS, R_COLS, R_C0, R_TABS };

/* The row loop of a column from block b on to next (fast: through the fast tail). */
static void rows_loop(gen *g, gcc_jit_block *b, gcc_jit_lvalue *jj, gcc_jit_lvalue *r, gcc_jit_lvalue *accv,
                      gcc_jit_rvalue *mask, gcc_jit_lvalue *t0, gcc_jit_lvalue *t1, gcc_jit_block *next, int fast)
{
    gcc_jit_block *row = block(g);
    gcc_jit_block_add_assignment(b, NULL, r, lng(g, 0));
    gcc_jit_block_end_with_conditional(b, NULL, cmp(g, GCC_JIT_COMPARISON_GT, prm(g, R_ROWS), lng(g, 0)), row, next);
    gcc_jit_rvalue *at = bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, rv(r), prm(g, R_ACCRS)), rv(jj));
    asm_load(g, row, accv, addr(g, prm(g, R_ACC), at), 0, mask);
    emit_row_insns(g, row, accv, 0, mask, t0, t1, fast);
    gcc_jit_rvalue *to = bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, rv(r), prm(g, R_YRS)), rv(jj));
    asm_store_bytes(g, row, rv(g->val[g->ep->n - 1]), t0, addr(g, prm(g, R_Y), to), 0, mask);
    gcc_jit_block_add_assignment_op(row, NULL, r, GCC_JIT_BINARY_OP_PLUS, lng(g, 1));
    gcc_jit_block_end_with_conditional(row, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(r), prm(g, R_ROWS)), row, next);
}

static void rows_column(gen *g, gcc_jit_block *b, gcc_jit_lvalue *jj, gcc_jit_lvalue *r, gcc_jit_lvalue *accv,
                        gcc_jit_rvalue *mask, gcc_jit_block *next)
{
    gcc_jit_lvalue *t0 = local(g, g->v16, "t0_%d", g->nblocks, 0), *t1 = local(g, g->v16, "t1_%d", g->nblocks, 0);
    gcc_jit_block_add_assignment(b, NULL, g->jb, bin(g, GCC_JIT_BINARY_OP_PLUS, prm(g, R_C0), rv(jj)));
    for (int i = 0; i < g->ep->n; i++)
        if (!g->ep->in[i].dep)
            emit_insn(g, b, i, NULL, 0, mask, t0, t1);
    if (!g->ep->fast.on) {
        rows_loop(g, b, jj, r, accv, mask, t0, t1, next, 0);
        return;
    }
    gcc_jit_block *fast = block(g), *slow = block(g);
    emit_fast_setup(g, b, 0);
    gcc_jit_block_end_with_conditional(
        b, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->fok[0]), gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff)), fast,
        slow);
    rows_loop(g, fast, jj, r, accv, mask, t0, t1, next, 1);
    rows_loop(g, slow, jj, r, accv, mask, t0, t1, next, 0);
}

/* 64 columns at jj (all real) from block b on to next: where every lane passes the packed tail's
 * check (emit_packed_check, the values once for the 64), each row's four vectors packed into one
 * 64-byte store as emit_packed_rows does; else four columns of rows_column. */
static void rows_group(gen *g, gcc_jit_block *b, gcc_jit_lvalue *jj, gcc_jit_lvalue *r, gcc_jit_lvalue *accv,
                       gcc_jit_lvalue *const *acc4, gcc_jit_block *next)
{
    const vfast *f = &g->ep->fast;
    gcc_jit_lvalue *t0 = local(g, g->v16, "g0_%d", g->nblocks, 0), *t1 = local(g, g->v16, "g1_%d", g->nblocks, 0);
    gcc_jit_block_add_assignment(b, NULL, g->jb, bin(g, GCC_JIT_BINARY_OP_PLUS, prm(g, R_C0), rv(jj)));
    gcc_jit_block_add_assignment(b, NULL, g->mask, gcc_jit_context_new_rvalue_from_int(g->c, g->t_u16, 0xffff));
    gcc_jit_block_add_assignment(b, NULL, g->pok, gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff));
    for (int v = 0; v < MAX_VECS; v++) {
        g->val = g->vals[v];
        for (int i = 0; i < g->ep->n; i++)
            if (!g->ep->in[i].dep)
                emit_insn(g, b, i, NULL, v, NULL, t0, t1);
        emit_fast_setup(g, b, v);
        emit_packed_check(g, b, v);
    }
    g->val = g->vals[0];
    emit_packed_setup(g, b, MAX_VECS);
    gcc_jit_block *packed = block(g), *each = block(g), *row = block(g);
    gcc_jit_block_end_with_conditional(
        b, NULL, cmp(g, GCC_JIT_COMPARISON_EQ, rv(g->pok), gcc_jit_context_new_rvalue_from_int(g->c, g->t_i32, 0xffff)), packed,
        each);
    gcc_jit_block_add_assignment(packed, NULL, r, lng(g, 0));
    gcc_jit_block_end_with_conditional(packed, NULL, cmp(g, GCC_JIT_COMPARISON_GT, prm(g, R_ROWS), lng(g, 0)), row, next);
    gcc_jit_rvalue *at = bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, rv(r), prm(g, R_ACCRS)), rv(jj));
    gcc_jit_rvalue *q[MAX_VECS];
    for (int v = 0; v < MAX_VECS; v++) {
        g->val = g->vals[v];
        asm_load(g, row, acc4[v], addr(g, prm(g, R_ACC), at), 64 * v, NULL);
        for (int i = 0; i < g->ep->n; i++)
            if (g->ep->in[i].dep && !f->tail[i])
                emit_insn(g, row, i, acc4[v], v, NULL, t0, t1);
        gcc_jit_rvalue *x = rv(g->val[f->x]);
        asm_vec(g, row, "vcvtps2dq %{rn-sae%}, %1, %0", g->rr[v], 0, 0, &x, 1);
        q[v] = rv(g->rr[v]);
    }
    g->val = g->vals[0];
    emit_pack_bytes(g, row, g->pout, q, 0, rv(g->pz01), rv(g->pz23));
    gcc_jit_rvalue *in[4] = {rv(g->pout), rv(g->pa8), rv(g->pb8), rv(g->pidx)};
    asm_vec(g, row,
            f->i8 ? "vpmaxsb %2, %1, %0\n\tvpminsb %3, %0, %0\n\tvpermd %0, %4, %0"
                  : "vpmaxub %2, %1, %0\n\tvpminub %3, %0, %0\n\tvpermd %0, %4, %0",
            g->pout, 1, 0, in, 4);
    gcc_jit_rvalue *to = bin(g, GCC_JIT_BINARY_OP_PLUS, bin(g, GCC_JIT_BINARY_OP_MULT, rv(r), prm(g, R_YRS)), rv(jj));
    asm_store(g, row, "vmovdqu64", rv(g->pout), addr(g, prm(g, R_Y), to), 0, NULL);
    gcc_jit_block_add_assignment_op(row, NULL, r, GCC_JIT_BINARY_OP_PLUS, lng(g, 1));
    gcc_jit_block_end_with_conditional(row, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(r), prm(g, R_ROWS)), row, next);
    /* the columns one vector at a time, as without the pack */
    gcc_jit_lvalue *jv = local(g, g->t_i64, "jv_%d", g->nblocks, 0);
    for (int v = 0; v < MAX_VECS; v++) {
        gcc_jit_block *after = v + 1 < MAX_VECS ? block(g) : next;
        gcc_jit_block_add_assignment(each, NULL, jv, bin(g, GCC_JIT_BINARY_OP_PLUS, rv(jj), lng(g, 16 * v)));
        rows_column(g, each, jv, r, accv, NULL, after);
        each = after;
    }
}

static void build_rows(gen *g)
{
    gcc_jit_context *c = g->c;
    gen_types(g);
    static const char *const names[] = {"y", "y_rs", "acc", "acc_rs", "rows", "cols", "c0", "tabs"};
    gcc_jit_type *types[] = {gcc_jit_type_get_pointer(g->t_u8), g->t_i64, g->p_i32c, g->t_i64, g->t_i64, g->t_i64,
                             g->t_i64, gcc_jit_type_get_pointer(gcc_jit_type_get_const(g->p_i32c))};
    for (int i = 0; i < 8; i++)
        g->prm[i] = gcc_jit_context_new_param(c, NULL, types[i], names[i]);
    g->fn = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, g->t_void, "qr_iconv", 8, g->prm, 0);
    g->jb = local(g, g->t_i64, "jb", 0, 0);
    g->mask = local(g, g->t_u16, "mask", 0, 0);
    g->kmask = local(g, g->t_u16, "kmask", 0, 0);
    g->val = g->vals[0];
    for (int i = 0; i < g->ep->n; i++)
        g->val[i] = local(g, g->v16, "v%d", i, 0);
    for (int t = 0; t < g->ep->ntabs; t++)
        g->tab[t] = local(g, g->p_i32c, "tab%d", t, 0);
    fast_locals(g);
    gcc_jit_lvalue *jj = local(g, g->t_i64, "jj", 0, 0), *r = local(g, g->t_i64, "r", 0, 0);
    gcc_jit_lvalue *accv = local(g, g->v16, "accv", 0, 0);
    gcc_jit_block *entry = block(g), *cols = block(g), *pick = block(g), *full = block(g), *part = block(g),
                  *advance = block(g), *out = block(g), *pick16 = pick;
    for (int t = 0; t < g->ep->ntabs; t++)
        gcc_jit_block_add_assignment(entry, NULL, g->tab[t],
                                     rv(gcc_jit_context_new_array_access(c, NULL, prm(g, R_TABS), lng(g, t))));
    gcc_jit_block_add_assignment(entry, NULL, jj, lng(g, 0));
    gcc_jit_block_end_with_jump(entry, NULL, cols);
    gcc_jit_block_end_with_conditional(cols, NULL, cmp(g, GCC_JIT_COMPARISON_LT, rv(jj), prm(g, R_COLS)), pick, out);
    gcc_jit_rvalue *left = bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, R_COLS), rv(jj));
    if (g->packed) { /* 64 columns left: packed by the row (rows_group) */
        gcc_jit_lvalue *acc4[MAX_VECS];
        for (int v = 0; v < MAX_VECS; v++)
            acc4[v] = local(g, g->v16, "acc4_%d", v, 0);
        gcc_jit_block *group = block(g), *advance64 = block(g);
        pick16 = block(g);
        gcc_jit_block_end_with_conditional(pick, NULL, cmp(g, GCC_JIT_COMPARISON_GE, left, lng(g, 64)), group, pick16);
        rows_group(g, group, jj, r, accv, acc4, advance64);
        gcc_jit_block_add_assignment_op(advance64, NULL, jj, GCC_JIT_BINARY_OP_PLUS, lng(g, 64));
        gcc_jit_block_end_with_jump(advance64, NULL, cols);
    }
    gcc_jit_block_end_with_conditional(pick16, NULL, cmp(g, GCC_JIT_COMPARISON_GE, left, lng(g, 16)), full, part);
    rows_column(g, full, jj, r, accv, NULL, advance); /* 16 real columns: no masks */
    gcc_jit_rvalue *bits = bin(g, GCC_JIT_BINARY_OP_MINUS,
                               bin(g, GCC_JIT_BINARY_OP_LSHIFT, lng(g, 1), bin(g, GCC_JIT_BINARY_OP_MINUS, prm(g, R_COLS), rv(jj))),
                               lng(g, 1));
    gcc_jit_block_add_assignment(part, NULL, g->mask, gcc_jit_context_new_cast(c, NULL, bits, g->t_u16));
    rows_column(g, part, jj, r, accv, rv(g->mask), advance);
    gcc_jit_block_add_assignment_op(advance, NULL, jj, GCC_JIT_BINARY_OP_PLUS, lng(g, 16));
    gcc_jit_block_end_with_jump(advance, NULL, cols);
    gcc_jit_block_end_with_void_return(out, NULL);
}

/* The packed tail's byte and word instructions (vpackssdw, vpaddsw, vpmaxub, vmovdqu8 of 64 bytes) */
static int cpu_bw(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

static int cpu_ok(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

static int shape_ok(int64_t taps, int64_t k4, int64_t n)
{
    /* displacements are 32-bit: a tap's packed weights must stay well inside that */
    return taps >= 1 && k4 >= 4 && k4 % 4 == 0 && n >= 1 && taps <= 1 << 16 && k4 <= 1 << 20 && n <= 1 << 20 &&
           k4 / 4 * ((n + 15) / 16 * 64) <= (int64_t)1 << 30;
}

#define KEY_SYMBOL "qr_iconv_key"

/* const char *qr_iconv_key(void) { return "<key>"; }: a cached object proves which kernel it holds */
static void add_key_fn(gcc_jit_context *c, const char *key)
{
    gcc_jit_type *t = gcc_jit_context_get_type(c, GCC_JIT_TYPE_CONST_CHAR_PTR);
    gcc_jit_function *f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, t, KEY_SYMBOL, 0, NULL, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(f, NULL);
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_new_string_literal(c, key));
}

/* A kernel as the table and the loader hold it: qr_iconv_fn, or qr_iconv_ep_fn with a program. */
typedef void (*any_fn)(void);

static gcc_jit_context *new_context(int64_t taps, int64_t k4, int64_t n, const vprog *ep)
{
    gcc_jit_context *c = gcc_jit_context_acquire();
    if (!c)
        return NULL;
    gcc_jit_context_set_int_option(c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL, 3);
    gcc_jit_context_set_bool_print_errors_to_stderr(c, 0);
    char flags[512];
    snprintf(flags, sizeof flags, "%s -mavx512f -mavx512vnni", qc_cpu_flags());
    for (char *save = NULL, *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save))
        gcc_jit_context_add_command_line_option(c, w);
    gen g = {.c = c, .taps = taps, .k4 = k4, .n = n, .n16 = (n + 15) / 16 * 16, .groups = k4 / 4, .ep = ep,
             .fold = -1, .fold_tab = -1};
    g.packed = ep && ep->fast.on && ep->fast.s == ep->n - 1 && cpu_bw(); /* the tail's bytes are y's */
    if (taps == 0) { /* the rows epilogue of ep (qc_rows_ep_jit) */
        build_rows(&g);
        return c;
    }
    qc_iconv_jit_tile(taps, k4, n, &g.rows, &g.vecs);
    if (ep)
        g.fold = bias_fold(ep, &g.fold_tab);
    build(&g);
    return c;
}

/* The cache key of a shape's kernel: everything the code depends on (this generator's sources, the
 * libgccjit, the CPU's flags, the shape, its tile and the epilogue's program), as 128 bits of
 * SHA-256 in hex. */
static void shape_key(int64_t taps, int64_t k4, int64_t n, const char *prog, char *key, size_t len)
{
    int rows, vecs;
    qc_iconv_jit_tile(taps, k4, n, &rows, &vecs);
    char buf[320];
    snprintf(buf, sizeof buf, "qrl iconv %s gccjit %d.%d.%d cpu %s taps %lld k4 %lld n %lld tile %dx%d ep %d:", QC_ICONV_JIT_ID,
             gcc_jit_version_major(), gcc_jit_version_minor(), gcc_jit_version_patchlevel(), qc_cpu_flags(),
             (long long)taps, (long long)k4, (long long)n, rows, vecs, prog != NULL);
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    qc_sha256_update(&h, buf, strlen(buf));
    if (prog)
        qc_sha256_update(&h, prog, strlen(prog));
    unsigned char d[QC_SHA256_LEN];
    qc_sha256_final(&h, d);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    snprintf(key, len, "%s-%s", taps ? "iconv" : "rowsep", hex); /* rowsep: a rows epilogue (taps 0) */
}

/* The kernel from a shared object's bytes when it carries key: its handle, or NULL. */
static qc_dl *load(const unsigned char *so, size_t len, const char *key, any_fn *fn)
{
    char err[256];
    qc_dl *h = qc_dl_open(so, len, err, sizeof err);
    if (!h)
        return NULL;
    const char *(*keyfn)(void) = (const char *(*)(void))qc_dl_sym(h, KEY_SYMBOL);
    *fn = (any_fn)qc_dl_sym(h, "qr_iconv");
    if (!keyfn || !*fn || strcmp(keyfn(), key) != 0) {
        *fn = NULL;
        qc_dl_close(h);
        return NULL;
    }
    return h;
}

/* c as a shared object's bytes, compiled in a fresh private folder (libgccjit writes by path:
 * mkdtemp's 0700 folder is one nobody else can prepare); 0 on success. */
static int compile_to_bytes(gcc_jit_context *c, unsigned char **so, size_t *len)
{
    /* in the process's folder for libgccjit's scratch (compiler/jitrun.h): a fatal signal removes it */
    const char *t = qc_jit_scratch_dir(1);
    if (!t)
        t = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/qrl-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/qrl-XXXXXX");
        if (!mkdtemp(dir))
            return -1;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/iconv.so", dir);
    qc_jit_compile_to_file(c, GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY, path);
    int rc = gcc_jit_context_get_first_error(c) || qc_read_file(AT_FDCWD, path, (size_t)1 << 28, so, len) != 0 ? -1 : 0;
    unlink(path);
    rmdir(dir);
    qc_jit_scratch_idle();
    return rc;
}

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* the worker: a request was queued, or stop */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* a compilation ended */

/* The on-disk module cache (compiler/cache.h) when it is usable: a shape compiles once per machine,
 * not once per process. Opened at the first compilation, closed by qc_iconv_jit_release. */
static qc_cache cache = {.dirfd = -1};
static int cache_tried, cache_readonly;
static long n_compiled, n_loaded, n_background; /* under table_lock, like the cache */
static int background;                           /* qc_iconv_jit_set_background */
static int no_compile;                           /* qc_iconv_jit_set_compile */

static qc_cache *open_cache(void)
{
    if (!cache_tried) {
        cache_tried = 1;
        ql_diags d;
        ql_diags_init(&d);
        if (!qc_cache_open(&cache, NULL, &d))
            cache.dirfd = -1; /* a distrusted cache is the recipe compiler's to report */
        ql_diags_free(&d);
        /* read-only: its kernels are used, the missing ones not compiled in the background */
        cache_readonly = cache.dirfd >= 0 && faccessat(cache.dirfd, ".", W_OK, AT_EACCESS) != 0;
    }
    return cache.dirfd >= 0 ? &cache : NULL;
}

/* A request the generator takes on this CPU: its program parsed into *ep and its key; 0 then. */
static int prepare(int64_t taps, int64_t k4, int64_t n, const char *prog, vprog *ep, char *key, size_t len)
{
    if (!cpu_ok() || (taps ? !shape_ok(taps, k4, n) : !prog) || (prog && parse_prog(prog, ep) != 0) ||
        (!taps && ep->skip)) /* the rows epilogue alone has no skip tensor */
        return -1;
    shape_key(taps, k4, n, prog, key, len);
    return 0;
}

/* The kernel of key from the cache, loaded; NULL when it has none (or a bad one). */
static qc_dl *from_cache(qc_cache *cc, const char *key, any_fn *fn)
{
    unsigned char *so = NULL;
    size_t len = 0;
    ql_diags d;
    ql_diags_init(&d);
    qc_entry_status es = qc_cache_get(cc, key, &so, &len, &d);
    ql_diags_free(&d);
    qc_dl *dl = es == QC_ENTRY_OK ? load(so, len, key, fn) : NULL;
    free(so);
    return dl;
}

/* Compiles the kernel of key (into the cache cc when there is one, else in memory). Sets exactly
 * one of *dl and *res on success, NULL *fn on failure; *stored: the cache took it. Runs without
 * table_lock (a compilation takes 0.1 to 0.5 s): the cache's folder and path stay as they are
 * until qc_iconv_jit_release, which no compilation outlives. */
static void build_kernel(int64_t taps, int64_t k4, int64_t n, const vprog *ep, const char *key, qc_cache *cc,
                         any_fn *fn, qc_dl **dl, gcc_jit_result **res, int *stored)
{
    *fn = NULL;
    *dl = NULL;
    *res = NULL;
    *stored = 0;
    gcc_jit_context *c = new_context(taps, k4, n, ep);
    if (!c)
        return;
    add_key_fn(c, key);
    unsigned char *so = NULL;
    size_t len = 0;
    if (cc && compile_to_bytes(c, &so, &len) == 0) {
        *stored = qc_cache_put(cc, key, so, len) == 0; /* an unwritable cache costs the next process a compilation */
        *dl = load(so, len, key, fn);
        free(so);
    }
    if (!*dl) {
        gcc_jit_result *r = qc_jit_compile(c);
        if (r && !(*fn = (any_fn)gcc_jit_result_get_code(r, "qr_iconv"))) {
            gcc_jit_result_release(r);
            r = NULL;
        }
        *res = r;
    }
    gcc_jit_context_release(c);
}

int qc_iconv_jit_dump_asm(int64_t taps, int64_t k4, int64_t n, const char *prog, const char *path)
{
    vprog ep;
    if (!cpu_ok() || !shape_ok(taps, k4, n) || (prog && parse_prog(prog, &ep) != 0))
        return -1;
    gcc_jit_context *c = new_context(taps, k4, n, prog ? &ep : NULL);
    if (!c)
        return -1;
    qc_jit_compile_to_file(c, GCC_JIT_OUTPUT_KIND_ASSEMBLER, path);
    int bad = gcc_jit_context_get_first_error(c) != NULL;
    gcc_jit_context_release(c);
    return bad ? -1 : 0;
}

/* The process-wide table: one entry per shape asked for, failures included. Entries are freed
 * only by qc_iconv_jit_release, after the worker has stopped. */
typedef enum entry_state {
    E_DONE,      /* fn is the kernel, or NULL for good */
    E_QUEUED,    /* waiting for the background worker: the generic kernel meanwhile */
    E_COMPILING, /* being compiled, by the worker or by a caller without background */
} entry_state;

typedef struct entry {
    int64_t taps, k4, n;
    char *prog;          /* the fused epilogue's program; NULL: none */
    gcc_jit_result *res; /* compiled in memory, or */
    qc_dl *dl;           /* loaded from the cache's bytes; both NULL when it did not compile */
    any_fn fn;
    entry_state state;
} entry;

static entry *table;
static size_t table_len, table_cap;
static int at_exit_set;

/* The background worker: one thread that compiles queued entries in the order they were asked
 * for, into the cache. Started by the first queued request; stopped by qc_iconv_jit_stop or
 * _release (at exit too), which wait for the compilation under way (or one, when it has
 * compiled none) and drop the queue. */
static pthread_t worker;
static int worker_on, worker_stop; /* under table_lock */

static void finish(size_t i, any_fn fn, qc_dl *dl, gcc_jit_result *res)
{
    table[i].fn = fn;
    table[i].dl = dl;
    table[i].res = res;
    table[i].state = E_DONE;
    pthread_cond_broadcast(&done_cv);
}

static void stop_worker(void);

static void *worker_main(void *arg)
{
    (void)arg;
    /* below the process's own threads: the model runs on the generic kernels meanwhile, and
     * should not lose a core to its next run's kernels (Linux: a thread has its own nice value) */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0) {
        /* not allowed: it compiles at the process's priority */
    }
    pthread_mutex_lock(&table_lock);
    /* asked to stop, it ends after the compilation under way -- or, when it has compiled nothing
     * yet (a short process: the model ran before this thread got a core), after one: every process
     * that asks leaves a kernel in the cache, and its exit waits for one compilation at most */
    for (int done = 0;; done++) {
        size_t i = 0;
        while (i < table_len && table[i].state != E_QUEUED)
            i++;
        if (worker_stop && (done > 0 || i == table_len))
            break;
        if (i == table_len) {
            done--;
            pthread_cond_wait(&work_cv, &table_lock);
            continue;
        }
        table[i].state = E_COMPILING;
        int64_t taps = table[i].taps, k4 = table[i].k4, n = table[i].n;
        const char *prog = table[i].prog; /* freed by the release, which first stops this thread */
        qc_cache *cc = open_cache();
        pthread_mutex_unlock(&table_lock);
        any_fn fn = NULL;
        qc_dl *dl = NULL;
        gcc_jit_result *res = NULL;
        int stored = 0, built = 0;
        vprog ep;
        char key[64];
        /* a fatal signal (SIGINT...) that arrives meanwhile waits for the compilation's scratch to
         * go (runtime/fileio.h; this thread blocks those signals); after one, nothing starts */
        if (cc && qr_scratch_enter() == 0) {
            if (prepare(taps, k4, n, prog, &ep, key, sizeof key) == 0) {
                build_kernel(taps, k4, n, prog ? &ep : NULL, key, cc, &fn, &dl, &res, &stored);
                built = 1;
            }
            qr_scratch_leave();
        }
        pthread_mutex_lock(&table_lock);
        if (built) {
            n_compiled++;
            n_background++;
            if (!stored)
                cache_readonly = 1; /* it could not be written after all: queue nothing more */
        }
        finish(i, fn, dl, res);
    }
    pthread_mutex_unlock(&table_lock);
    return NULL;
}

/* Under table_lock: 0 when the worker runs. It blocks every signal, so the handlers run on the
 * process's other threads (runtime/fileio.h: qr_scratch_enter). */
static int start_worker(void)
{
    if (worker_on)
        return 0;
    /* libgccjit's exit handlers, registered by the process's first compilation, must not run while
     * this thread compiles: that compilation is made here, before the thread starts, and the
     * release (which stops the thread) runs at exit before them (compiler/jitrun.h) */
    qc_jit_at_exit(qc_iconv_jit_release);
    qc_jit_setup();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    worker_on = pthread_create(&worker, NULL, worker_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return worker_on ? 0 : -1;
}

static void stop_worker(void)
{
    pthread_mutex_lock(&table_lock);
    int on = worker_on;
    worker_stop = 1;
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&table_lock);
    if (on)
        pthread_join(worker, NULL);
    pthread_mutex_lock(&table_lock);
    worker_on = worker_stop = 0;
    /* the queue is dropped: out of the table, so a later request queues its shape again */
    size_t kept = 0;
    for (size_t i = 0; i < table_len; i++)
        if (table[i].state == E_QUEUED)
            free(table[i].prog);
        else
            table[kept++] = table[i];
    table_len = kept;
    pthread_cond_broadcast(&done_cv); /* a request waiting for a dropped one looks again */
    pthread_mutex_unlock(&table_lock);
}

static any_fn lookup(int64_t taps, int64_t k4, int64_t n, const char *prog)
{
    any_fn fn = NULL;
    pthread_mutex_lock(&table_lock);
    int bg = background;
again:
    for (size_t i = 0; i < table_len; i++)
        if (table[i].taps == taps && table[i].k4 == k4 && table[i].n == n &&
            (prog ? table[i].prog && !strcmp(table[i].prog, prog) : !table[i].prog)) {
            /* without background, a request waits for the compilation of its shape (another
             * thread's, or one queued before the switch), as a first request would; then looks
             * again (a stop may have dropped the queue: the table moved) */
            if (!bg && table[i].state != E_DONE && (table[i].state != E_QUEUED || start_worker() == 0)) {
                pthread_cond_wait(&done_cv, &table_lock);
                goto again;
            }
            fn = table[i].fn;
            pthread_mutex_unlock(&table_lock);
            return fn;
        }
    if (table_len == table_cap) {
        size_t cap = table_cap ? 2 * table_cap : 16;
        entry *t = realloc(table, cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&table_lock);
            return NULL;
        }
        table = t;
        table_cap = cap;
    }
    if (!at_exit_set)
        at_exit_set = atexit(qc_iconv_jit_release) == 0;
    char *copy = prog ? strdup(prog) : NULL;
    if (prog && !copy) {
        pthread_mutex_unlock(&table_lock);
        return NULL;
    }
    size_t i = table_len++;
    table[i] = (entry){taps, k4, n, copy, NULL, NULL, NULL, E_DONE};
    vprog ep;
    char key[64];
    if (prepare(taps, k4, n, prog, &ep, key, sizeof key) != 0) {
        pthread_mutex_unlock(&table_lock);
        return NULL; /* remembered, not retried */
    }
    qc_cache *cc = open_cache();
    qc_dl *dl = cc ? from_cache(cc, key, &fn) : NULL;
    if (dl) {
        n_loaded++;
        finish(i, fn, dl, NULL);
    } else if (bg) {
        /* the caller runs its generic kernel; later calls get this one once it is compiled. With no
         * cache to keep it in, or a read-only one, there is nothing to compile for */
        if (cc && !cache_readonly && !no_compile && start_worker() == 0) {
            table[i].state = E_QUEUED;
            pthread_cond_signal(&work_cv);
        }
        fn = NULL;
    } else {
        table[i].state = E_COMPILING;
        pthread_mutex_unlock(&table_lock);
        gcc_jit_result *res;
        int stored;
        build_kernel(taps, k4, n, prog ? &ep : NULL, key, cc, &fn, &dl, &res, &stored);
        pthread_mutex_lock(&table_lock);
        n_compiled++;
        finish(i, fn, dl, res);
    }
    pthread_mutex_unlock(&table_lock);
    return fn;
}

void qc_iconv_jit_stop(void)
{
    stop_worker();
}

void qc_iconv_jit_wait(void)
{
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_len; i++)
        if (table[i].state != E_DONE && worker_on) {
            pthread_cond_wait(&done_cv, &table_lock);
            i = (size_t)-1; /* from the start: the table may have moved */
        }
    pthread_mutex_unlock(&table_lock);
}

void qc_iconv_jit_set_background(int on)
{
    pthread_mutex_lock(&table_lock);
    background = on != 0;
    pthread_mutex_unlock(&table_lock);
}

void qc_iconv_jit_set_compile(int on)
{
    pthread_mutex_lock(&table_lock);
    no_compile = on == 0;
    pthread_mutex_unlock(&table_lock);
}

qr_iconv_fn qc_iconv_jit(int64_t taps, int64_t k4, int64_t n)
{
    return (qr_iconv_fn)lookup(taps, k4, n, NULL);
}

qr_iconv_ep_fn qc_iconv_jit_ep(int64_t taps, int64_t k4, int64_t n, const char *prog)
{
    return prog ? (qr_iconv_ep_fn)lookup(taps, k4, n, prog) : NULL;
}

qr_rows_ep_fn qc_rows_ep_jit(const char *prog)
{
    return prog ? (qr_rows_ep_fn)lookup(0, 0, 0, prog) : NULL; /* taps 0: no convolution's shape */
}

void qc_iconv_jit_release(void)
{
    stop_worker(); /* the compilation under way ends (into the cache); the queue is dropped */
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_len; i++) {
        if (table[i].res)
            gcc_jit_result_release(table[i].res);
        else if (table[i].dl)
            qc_dl_close(table[i].dl);
        free(table[i].prog);
    }
    free(table);
    table = NULL;
    table_len = table_cap = 0;
    qc_cache_close(&cache);
    cache_tried = cache_readonly = 0;
    pthread_mutex_unlock(&table_lock);
}

void qc_iconv_jit_counts(long *compiled, long *loaded)
{
    pthread_mutex_lock(&table_lock);
    *compiled = n_compiled;
    *loaded = n_loaded;
    pthread_mutex_unlock(&table_lock);
}

void qc_iconv_jit_stats(qc_iconv_jit_stat *s)
{
    pthread_mutex_lock(&table_lock);
    s->compiled = n_compiled;
    s->background = n_background;
    s->loaded = n_loaded;
    s->queued = 0;
    for (size_t i = 0; i < table_len; i++)
        s->queued += table[i].state != E_DONE;
    pthread_mutex_unlock(&table_lock);
}
