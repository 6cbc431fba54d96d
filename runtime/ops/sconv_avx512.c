/* sconv.h's convolution: the plan and packing in C, the tiles and transposes with AVX-512F (only
 * called when qr_sconv_available says the CPU has it). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "sconv.h"
#include "act_avx512.h"

#include "op.h"
#include "options.h"

#define TARGET __attribute__((target("avx512f")))
#define NR QR_SCONV_NR

/* K per block: a panel's block (KC x 64 floats, 256 KB) stays in L2 while a row block's tiles pass
 * over it (a whole panel of ResNet-18's layer4, 1.2 MB, did not). */
#define KC 1024
/* K per block of a 1 x 1 layer of at least KC1_MIN_C input channels (qr_sconv_plan). */
#define KC1 128
#define KC1_MIN_C 256
/* Output pixels per row block: its sums (64 channels each, 64 KB) stay in L1/L2 between K blocks. */
#define BLK_PIX 256

int qr_sconv_available(void)
{
    const char *s = qr_options_get()->sgemm;
    if (s[0] && strcmp(s, "avx512") != 0)
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/* The kernel positions [k0, k1) whose input index o * s - pad + k * d falls inside [0, n) (none:
 * k0 == k1); they are consecutive, the index growing with k. */
static void inside(int64_t o, int64_t s, int64_t pad, int64_t d, int64_t kn, int64_t n, int64_t *k0, int64_t *k1)
{
    int64_t a = kn, b = kn;
    for (int64_t k = 0; k < kn; k++) {
        int64_t i = o * s - pad + k * d;
        if (i >= 0 && i < n) {
            a = a == kn ? k : a;
            b = k + 1;
        }
    }
    *k0 = a, *k1 = a == kn ? a : b;
}

/* The border columns and their packs (qr_sconv.edge): for one K block of a layer that may stay in
 * L2 (the thin tiles' case), with some border, columns inside between the border columns, and at
 * most QR_SCONV_ECOLS border columns; not for fewer than 16 input channels, where a tap is too
 * little work for the border columns' tiles of their own (the Fashion-MNIST CNN's 1 -> 16 stem at
 * batch 64: 0.239 ms with them, 0.223 without). */
static void edge_plan(qr_sconv *p)
{
    int64_t oxl = p->OW, oxr = 0, k0, k1;
    for (int64_t ox = 0; ox < p->OW; ox++) {
        inside(ox, p->s1, p->pl, p->d1, p->KW, p->W, &k0, &k1);
        if (k0 == 0 && k1 == p->KW) {
            oxl = ox < oxl ? ox : oxl;
            oxr = ox + 1;
        }
    }
    int rows = 0; /* some output row's window leaves the image */
    for (int64_t oy = 0; oy < p->OH && !rows; oy++) {
        inside(oy, p->s0, p->pt, p->d0, p->KH, p->H, &k0, &k1);
        rows = k0 != 0 || k1 != p->KH;
    }
    int64_t ncols = oxl < oxr ? oxl + p->OW - oxr : 0;
    if (p->C < 16 || p->nchunks != 1 || qr_sconv_weight_floats(p) * (int64_t)sizeof(float) > 512 * 1024 || oxl >= oxr ||
        ncols > QR_SCONV_ECOLS || (ncols == 0 && !rows))
        return;
    p->edge = 1, p->oxl = oxl, p->oxr = oxr, p->necols = (int)ncols;
    int64_t off = qr_sconv_weight_floats(p);
    for (int e = 0; e < p->necols; e++) {
        int64_t ox = e < oxl ? e : oxr + (e - oxl);
        p->ecol[e] = ox;
        inside(ox, p->s1, p->pl, p->d1, p->KW, p->W, &p->ekx0[e], &p->ekx1[e]);
        p->epack[e] = off;
        off += p->panels * p->KH * (p->ekx1[e] - p->ekx0[e]) * p->C * NR;
    }
    p->eflag = off;
}

int qr_sconv_plan(qr_sconv *p, const qr_conv_geom *g, int64_t c, int64_t m)
{
    memset(p, 0, sizeof *p);
    if (g->r != 2)
        return 0;
    p->C = c, p->M = m, p->H = g->big[0], p->W = g->big[1], p->OH = g->small[0], p->OW = g->small[1];
    p->KH = g->kernel[0], p->KW = g->kernel[1], p->s0 = g->stride[0], p->s1 = g->stride[1];
    p->d0 = g->dilation[0], p->d1 = g->dilation[1], p->pt = g->pad_begin[0], p->pl = g->pad_begin[1];
    int64_t need_h = (p->OH - 1) * p->s0 + (p->KH - 1) * p->d0 + 1, need_w = (p->OW - 1) * p->s1 + (p->KW - 1) * p->d1 + 1;
    p->Hp = p->pt + p->H > need_h ? p->pt + p->H : need_h;
    p->Wp = p->pl + p->W > need_w ? p->pl + p->W : need_w;
    p->K = c * p->KH * p->KW;
    p->panels = (m + NR - 1) / NR;
    if (p->OH <= 0 || p->OW <= 0 || p->K <= 0 || m <= 0)
        return 0;
    /* the runs of K in (ky, kx, c) order, cut at multiples of KC */
    int n = 0;
    int64_t q = 0;
    int runs_per_row = p->d1 == 1 ? 1 : (int)p->KW;
    /* a 1 x 1 of 256 input channels or more in K blocks of KC1: a panel's block (32 KB) stays in L1
     * while the row block's tiles pass over it, where a block of KC streamed from L2 for every tile
     * (MobileNetV2's 320 -> 1280 on 7 x 7 0.250 -> 0.218 ms, its 960 -> 320 0.187 -> 0.157; from 128
     * input channels its 160 -> 960 took 128 + 32 and lost; docs/runtime.md, stop 51). The chain
     * goes through memory between blocks: the same bits. */
    const int64_t kc = p->KH == 1 && p->KW == 1 && c >= KC1_MIN_C ? KC1 : KC;
    for (int64_t ky = 0; ky < p->KH; ky++)
        for (int r = 0; r < runs_per_row; r++) {
            int64_t off = (ky * p->d0 * p->Wp + r * p->d1) * c, len = p->d1 == 1 ? p->KW * c : c;
            while (len > 0) {
                int64_t room = kc - q % kc, take = len < room ? len : room;
                if (n == QR_SCONV_PIECES)
                    return 0;
                if (q % kc == 0)
                    p->chunk[p->nchunks++] = n;
                p->piece[n].off = off, p->piece[n].len = take;
                n++;
                off += take, len -= take, q += take;
            }
        }
    p->npieces = n;
    p->chunk[p->nchunks] = n;
    edge_plan(p);
    return 1;
}

int64_t qr_sconv_weight_floats(const qr_sconv *p)
{
    return p->panels * (p->K + 1) * NR;
}

int64_t qr_sconv_packed_floats(const qr_sconv *p)
{
    return p->edge ? p->eflag + 16 : qr_sconv_weight_floats(p);
}

void qr_sconv_pack(const qr_sconv *p, const float *w, const float *bias, float *dst)
{
    int64_t kk = p->KH * p->KW;
    for (int64_t pn = 0; pn < p->panels; pn++) {
        float *d = dst + pn * (p->K + 1) * NR;
        for (int64_t t = 0; t < kk; t++)
            for (int64_t c = 0; c < p->C; c++)
                for (int64_t j = 0; j < NR; j++) {
                    int64_t mo = pn * NR + j;
                    d[(t * p->C + c) * NR + j] = mo < p->M ? w[(mo * p->C + c) * kk + t] : 0.0f;
                }
        for (int64_t j = 0; j < NR; j++) {
            int64_t mo = pn * NR + j;
            d[p->K * NR + j] = bias && mo < p->M ? bias[mo] : 0.0f;
        }
    }
    if (!p->edge)
        return;
    for (int e = 0; e < p->necols; e++) {
        int64_t nkx = p->ekx1[e] - p->ekx0[e];
        for (int64_t pn = 0; pn < p->panels; pn++) {
            float *d = dst + p->epack[e] + pn * p->KH * nkx * p->C * NR;
            for (int64_t ky = 0; ky < p->KH; ky++)
                for (int64_t kx = 0; kx < nkx; kx++)
                    for (int64_t c = 0; c < p->C; c++)
                        for (int64_t j = 0; j < NR; j++) {
                            int64_t mo = pn * NR + j, t = ky * p->KW + p->ekx0[e] + kx;
                            d[((ky * nkx + kx) * p->C + c) * NR + j] = mo < p->M ? w[(mo * p->C + c) * kk + t] : 0.0f;
                        }
        }
    }
    int finite = 1;
    for (int64_t i = 0; i < p->M * p->C * kk && finite; i++)
        finite = isfinite(w[i]);
    memset(dst + p->eflag, 0, 16 * sizeof(float));
    dst[p->eflag] = (float)finite;
}

int64_t qr_sconv_image_floats(const qr_sconv *p)
{
    /* + 16: the transposes' last masked vectors stay inside */
    return p->Hp * p->Wp * p->C + 16;
}

int64_t qr_sconv_block_rows(const qr_sconv *p, int64_t nimg)
{
    int64_t rb = BLK_PIX / p->OW;
    rb = rb < 1 ? 1 : rb;
    return rb < nimg * p->OH ? rb : nimg * p->OH;
}

int64_t qr_sconv_block_floats(const qr_sconv *p)
{
    return qr_sconv_block_rows(p, 1) * p->OW * NR + 16 * NR;
}

/* The 16 x 16 transpose of r0..r15 in place (r(j) becomes column j): unpacks of floats, then of
 * pairs, then two shuffles of 128-bit lanes. */
#define TRANSPOSE16 \
    __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1); \
    __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3); \
    __m512 t4 = _mm512_unpacklo_ps(r4, r5), t5 = _mm512_unpackhi_ps(r4, r5); \
    __m512 t6 = _mm512_unpacklo_ps(r6, r7), t7 = _mm512_unpackhi_ps(r6, r7); \
    __m512 t8 = _mm512_unpacklo_ps(r8, r9), t9 = _mm512_unpackhi_ps(r8, r9); \
    __m512 t10 = _mm512_unpacklo_ps(r10, r11), t11 = _mm512_unpackhi_ps(r10, r11); \
    __m512 t12 = _mm512_unpacklo_ps(r12, r13), t13 = _mm512_unpackhi_ps(r12, r13); \
    __m512 t14 = _mm512_unpacklo_ps(r14, r15), t15 = _mm512_unpackhi_ps(r14, r15); \
    r0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))); \
    r1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))); \
    r2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3))); \
    r3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3))); \
    r4 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t4), _mm512_castps_pd(t6))); \
    r5 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t4), _mm512_castps_pd(t6))); \
    r6 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t5), _mm512_castps_pd(t7))); \
    r7 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t5), _mm512_castps_pd(t7))); \
    r8 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t8), _mm512_castps_pd(t10))); \
    r9 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t8), _mm512_castps_pd(t10))); \
    r10 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t9), _mm512_castps_pd(t11))); \
    r11 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t9), _mm512_castps_pd(t11))); \
    r12 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t12), _mm512_castps_pd(t14))); \
    r13 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t12), _mm512_castps_pd(t14))); \
    r14 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t13), _mm512_castps_pd(t15))); \
    r15 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t13), _mm512_castps_pd(t15))); \
    t0 = _mm512_shuffle_f32x4(r0, r4, 0x88), t4 = _mm512_shuffle_f32x4(r0, r4, 0xdd); \
    t8 = _mm512_shuffle_f32x4(r8, r12, 0x88), t12 = _mm512_shuffle_f32x4(r8, r12, 0xdd); \
    t1 = _mm512_shuffle_f32x4(r1, r5, 0x88), t5 = _mm512_shuffle_f32x4(r1, r5, 0xdd); \
    t9 = _mm512_shuffle_f32x4(r9, r13, 0x88), t13 = _mm512_shuffle_f32x4(r9, r13, 0xdd); \
    t2 = _mm512_shuffle_f32x4(r2, r6, 0x88), t6 = _mm512_shuffle_f32x4(r2, r6, 0xdd); \
    t10 = _mm512_shuffle_f32x4(r10, r14, 0x88), t14 = _mm512_shuffle_f32x4(r10, r14, 0xdd); \
    t3 = _mm512_shuffle_f32x4(r3, r7, 0x88), t7 = _mm512_shuffle_f32x4(r3, r7, 0xdd); \
    t11 = _mm512_shuffle_f32x4(r11, r15, 0x88), t15 = _mm512_shuffle_f32x4(r11, r15, 0xdd); \
    r0 = _mm512_shuffle_f32x4(t0, t8, 0x88), r8 = _mm512_shuffle_f32x4(t0, t8, 0xdd); \
    r4 = _mm512_shuffle_f32x4(t4, t12, 0x88), r12 = _mm512_shuffle_f32x4(t4, t12, 0xdd); \
    r1 = _mm512_shuffle_f32x4(t1, t9, 0x88), r9 = _mm512_shuffle_f32x4(t1, t9, 0xdd); \
    r5 = _mm512_shuffle_f32x4(t5, t13, 0x88), r13 = _mm512_shuffle_f32x4(t5, t13, 0xdd); \
    r2 = _mm512_shuffle_f32x4(t2, t10, 0x88), r10 = _mm512_shuffle_f32x4(t2, t10, 0xdd); \
    r6 = _mm512_shuffle_f32x4(t6, t14, 0x88), r14 = _mm512_shuffle_f32x4(t6, t14, 0xdd); \
    r3 = _mm512_shuffle_f32x4(t3, t11, 0x88), r11 = _mm512_shuffle_f32x4(t3, t11, 0xdd); \
    r7 = _mm512_shuffle_f32x4(t7, t15, 0x88), r15 = _mm512_shuffle_f32x4(t7, t15, 0xdd);

/* dst[j * ds + i] = src[i * ss + j] for i < rows, j < cols, 16 x 16 at a time: full blocks with
 * plain loads and stores, the edges masked (nothing outside rows x cols is read or written). */
TARGET static void transpose(const float *src, int64_t ss, float *dst, int64_t ds, int64_t rows, int64_t cols)
{
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
        int ni = rows - i0 < 16 ? (int)(rows - i0) : 16;
        __mmask16 mi = (__mmask16)((1u << ni) - 1);
        const float *sb = src + i0 * ss;
        for (int64_t j0 = 0; j0 < cols; j0 += 16) {
            int nj = cols - j0 < 16 ? (int)(cols - j0) : 16;
            float *dj = dst + j0 * ds + i0;
            if (ni == 16 && nj == 16) {
                __m512 r0 = _mm512_loadu_ps(sb + 0 * ss + j0);
                __m512 r1 = _mm512_loadu_ps(sb + 1 * ss + j0);
                __m512 r2 = _mm512_loadu_ps(sb + 2 * ss + j0);
                __m512 r3 = _mm512_loadu_ps(sb + 3 * ss + j0);
                __m512 r4 = _mm512_loadu_ps(sb + 4 * ss + j0);
                __m512 r5 = _mm512_loadu_ps(sb + 5 * ss + j0);
                __m512 r6 = _mm512_loadu_ps(sb + 6 * ss + j0);
                __m512 r7 = _mm512_loadu_ps(sb + 7 * ss + j0);
                __m512 r8 = _mm512_loadu_ps(sb + 8 * ss + j0);
                __m512 r9 = _mm512_loadu_ps(sb + 9 * ss + j0);
                __m512 r10 = _mm512_loadu_ps(sb + 10 * ss + j0);
                __m512 r11 = _mm512_loadu_ps(sb + 11 * ss + j0);
                __m512 r12 = _mm512_loadu_ps(sb + 12 * ss + j0);
                __m512 r13 = _mm512_loadu_ps(sb + 13 * ss + j0);
                __m512 r14 = _mm512_loadu_ps(sb + 14 * ss + j0);
                __m512 r15 = _mm512_loadu_ps(sb + 15 * ss + j0);
                TRANSPOSE16
                _mm512_storeu_ps(dj + 0 * ds, r0);
                _mm512_storeu_ps(dj + 1 * ds, r1);
                _mm512_storeu_ps(dj + 2 * ds, r2);
                _mm512_storeu_ps(dj + 3 * ds, r3);
                _mm512_storeu_ps(dj + 4 * ds, r4);
                _mm512_storeu_ps(dj + 5 * ds, r5);
                _mm512_storeu_ps(dj + 6 * ds, r6);
                _mm512_storeu_ps(dj + 7 * ds, r7);
                _mm512_storeu_ps(dj + 8 * ds, r8);
                _mm512_storeu_ps(dj + 9 * ds, r9);
                _mm512_storeu_ps(dj + 10 * ds, r10);
                _mm512_storeu_ps(dj + 11 * ds, r11);
                _mm512_storeu_ps(dj + 12 * ds, r12);
                _mm512_storeu_ps(dj + 13 * ds, r13);
                _mm512_storeu_ps(dj + 14 * ds, r14);
                _mm512_storeu_ps(dj + 15 * ds, r15);
                continue;
            }
            __mmask16 mj = (__mmask16)((1u << nj) - 1);
            __m512 r0 = 0 < ni ? _mm512_maskz_loadu_ps(mj, sb + 0 * ss + j0) : _mm512_setzero_ps();
            __m512 r1 = 1 < ni ? _mm512_maskz_loadu_ps(mj, sb + 1 * ss + j0) : _mm512_setzero_ps();
            __m512 r2 = 2 < ni ? _mm512_maskz_loadu_ps(mj, sb + 2 * ss + j0) : _mm512_setzero_ps();
            __m512 r3 = 3 < ni ? _mm512_maskz_loadu_ps(mj, sb + 3 * ss + j0) : _mm512_setzero_ps();
            __m512 r4 = 4 < ni ? _mm512_maskz_loadu_ps(mj, sb + 4 * ss + j0) : _mm512_setzero_ps();
            __m512 r5 = 5 < ni ? _mm512_maskz_loadu_ps(mj, sb + 5 * ss + j0) : _mm512_setzero_ps();
            __m512 r6 = 6 < ni ? _mm512_maskz_loadu_ps(mj, sb + 6 * ss + j0) : _mm512_setzero_ps();
            __m512 r7 = 7 < ni ? _mm512_maskz_loadu_ps(mj, sb + 7 * ss + j0) : _mm512_setzero_ps();
            __m512 r8 = 8 < ni ? _mm512_maskz_loadu_ps(mj, sb + 8 * ss + j0) : _mm512_setzero_ps();
            __m512 r9 = 9 < ni ? _mm512_maskz_loadu_ps(mj, sb + 9 * ss + j0) : _mm512_setzero_ps();
            __m512 r10 = 10 < ni ? _mm512_maskz_loadu_ps(mj, sb + 10 * ss + j0) : _mm512_setzero_ps();
            __m512 r11 = 11 < ni ? _mm512_maskz_loadu_ps(mj, sb + 11 * ss + j0) : _mm512_setzero_ps();
            __m512 r12 = 12 < ni ? _mm512_maskz_loadu_ps(mj, sb + 12 * ss + j0) : _mm512_setzero_ps();
            __m512 r13 = 13 < ni ? _mm512_maskz_loadu_ps(mj, sb + 13 * ss + j0) : _mm512_setzero_ps();
            __m512 r14 = 14 < ni ? _mm512_maskz_loadu_ps(mj, sb + 14 * ss + j0) : _mm512_setzero_ps();
            __m512 r15 = 15 < ni ? _mm512_maskz_loadu_ps(mj, sb + 15 * ss + j0) : _mm512_setzero_ps();
            TRANSPOSE16
            if (0 < nj)
                _mm512_mask_storeu_ps(dj + 0 * ds, mi, r0);
            if (1 < nj)
                _mm512_mask_storeu_ps(dj + 1 * ds, mi, r1);
            if (2 < nj)
                _mm512_mask_storeu_ps(dj + 2 * ds, mi, r2);
            if (3 < nj)
                _mm512_mask_storeu_ps(dj + 3 * ds, mi, r3);
            if (4 < nj)
                _mm512_mask_storeu_ps(dj + 4 * ds, mi, r4);
            if (5 < nj)
                _mm512_mask_storeu_ps(dj + 5 * ds, mi, r5);
            if (6 < nj)
                _mm512_mask_storeu_ps(dj + 6 * ds, mi, r6);
            if (7 < nj)
                _mm512_mask_storeu_ps(dj + 7 * ds, mi, r7);
            if (8 < nj)
                _mm512_mask_storeu_ps(dj + 8 * ds, mi, r8);
            if (9 < nj)
                _mm512_mask_storeu_ps(dj + 9 * ds, mi, r9);
            if (10 < nj)
                _mm512_mask_storeu_ps(dj + 10 * ds, mi, r10);
            if (11 < nj)
                _mm512_mask_storeu_ps(dj + 11 * ds, mi, r11);
            if (12 < nj)
                _mm512_mask_storeu_ps(dj + 12 * ds, mi, r12);
            if (13 < nj)
                _mm512_mask_storeu_ps(dj + 13 * ds, mi, r13);
            if (14 < nj)
                _mm512_mask_storeu_ps(dj + 14 * ds, mi, r14);
            if (15 < nj)
                _mm512_mask_storeu_ps(dj + 15 * ds, mi, r15);
        }
    }
}

/* dst[3 j + c] = src[c * ss + j] for j < n: three channel rows interleaved (an RGB first layer's
 * input), 16 pixels in two permutes per output vector where the 16 x 16 transpose of 3 rows
 * cost 4% of MobileNetV3-small. */
TARGET static void interleave3(const float *src, int64_t ss, float *dst, int64_t n)
{
    static int32_t ia[3][16], ic[3][16];
    static __mmask16 mc[3];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) { /* the same values from any thread */
        for (int k = 0; k < 3; k++) {
            __mmask16 m = 0;
            for (int i = 0; i < 16; i++) {
                int g = 16 * k + i, px = g / 3, ch = g % 3;
                ia[k][i] = ch == 1 ? 16 + px : px; /* a[px] or b[px] */
                ic[k][i] = px;
                m |= ch == 2 ? (__mmask16)(1u << i) : 0;
            }
            mc[k] = m;
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    for (int64_t j = 0; j < n; j += 16) {
        int r = n - j < 16 ? (int)(n - j) : 16;
        __mmask16 m = (__mmask16)((1u << r) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, src + j), b = _mm512_maskz_loadu_ps(m, src + ss + j);
        __m512 c = _mm512_maskz_loadu_ps(m, src + 2 * ss + j);
        for (int k = 0; k < 3; k++) {
            __m512 t = _mm512_permutex2var_ps(a, _mm512_loadu_si512(ia[k]), b);
            t = _mm512_mask_permutexvar_ps(t, mc[k], _mm512_loadu_si512(ic[k]), c);
            int left = 3 * r - 16 * k;
            if (left >= 16)
                _mm512_storeu_ps(dst + 3 * j + 16 * k, t);
            else if (left > 0)
                _mm512_mask_storeu_ps(dst + 3 * j + 16 * k, (__mmask16)((1u << left) - 1), t);
        }
    }
}

void qr_sconv_image_rows(const qr_sconv *p, const float *x, int x_nhwc, float *xp, int64_t r0, int64_t r1)
{
    const int64_t C = p->C, rowf = p->Wp * C;
    for (int64_t r = r0; r < r1; r++) {
        float *d = xp + r * rowf;
        int64_t iy = r - p->pt;
        if (iy < 0 || iy >= p->H) {
            memset(d, 0, (size_t)rowf * sizeof(float));
            continue;
        }
        memset(d, 0, (size_t)(p->pl * C) * sizeof(float));
        memset(d + (p->pl + p->W) * C, 0, (size_t)((p->Wp - p->pl - p->W) * C) * sizeof(float));
        if (x_nhwc || C == 1) /* one channel: the plane's row is the channels-last row */
            memcpy(d + p->pl * C, x + iy * p->W * C, (size_t)(p->W * C) * sizeof(float));
        else if (C == 3) /* [C][W] (plane stride H * W) -> [W][C] */
            interleave3(x + iy * p->W, p->H * p->W, d + p->pl * C, p->W);
        else
            transpose(x + iy * p->W, p->H * p->W, d + p->pl * C, C, C, p->W);
    }
}

/* x * HardSigmoid(x) on 16 floats as elementwise.c computes them: alpha * x + beta in double,
 * clamped with NaN kept, rounded to float, times x in float. */
TARGET static inline __attribute__((always_inline)) __m512d hsig_pd(__m512d x, __m512d a, __m512d b)
{
    const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
    __m512d v = _mm512_add_pd(_mm512_mul_pd(a, x), b);
    v = _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, one, _CMP_GT_OQ), one);
    return _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, zero, _CMP_LT_OQ), zero);
}

TARGET static inline __attribute__((always_inline)) __m512 hswish_zmm(__m512 x, const qr_sconv_epi *e)
{
    const __m512d a = _mm512_set1_pd(e->alpha), b = _mm512_set1_pd(e->beta);
    __m256 lo = _mm512_castps512_ps256(x), hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
    __m256 gl = _mm512_cvtpd_ps(hsig_pd(_mm512_cvtps_pd(lo), a, b)), gh = _mm512_cvtpd_ps(hsig_pd(_mm512_cvtps_pd(hi), a, b));
    __m512 g = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(gl)), _mm256_castps_pd(gh), 1));
    return _mm512_mul_ps(x, g);
}

/* The epilogue of one sum vector (pixel j, vector v): bias, the residual, act, hard swish. */
#define EPI(a, j, v, masked)                                                                                 \
    do {                                                                                                     \
        if (bias)                                                                                            \
            a = _mm512_add_ps(a, _mm512_loadu_ps(bias + 16 * (v)));                                          \
        if (epi && epi->res) {                                                                               \
            const float *r_ = acc + (j) * ldc + 16 * (v) + roff;                                             \
            a = _mm512_add_ps(a, (masked) ? _mm512_maskz_loadu_ps(ml, r_) : _mm512_loadu_ps(r_));           \
        }                                                                                                    \
        if (act)                                                                                             \
            a = qr_act_zmm(act, a);                                                                          \
        if (epi && epi->hswish)                                                                              \
            a = hswish_zmm(a, epi);                                                                          \
    } while (0)

/* The tile: R output pixels (their windows at x + po[j] in the padded image) by V vectors of 16
 * output channels; sums started from 0 (or from acc when load), FMA over the pieces [pc, pc + np)
 * with the panel's weights from w, stored to acc (pixel j's at acc + j * NR), + bias and act when
 * last. Named registers: an array made GCC copy them (sgemm_avx512.c). */
#define PIX(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(j) __m512 a##j##0, a##j##1, a##j##2, a##j##3;
#define LD(j, v) (v == V - 1 ? _mm512_maskz_loadu_ps(ml, acc + j * ldc + 16 * v) : _mm512_loadu_ps(acc + j * ldc + 16 * v))
#define INIT(j)                                                                                              \
    if (j < R) {                                                                                             \
        a##j##0 = load ? LD(j, 0) : _mm512_setzero_ps();                                                     \
        a##j##1 = V > 1 && load ? LD(j, 1) : _mm512_setzero_ps();                                            \
        a##j##2 = V > 2 && load ? LD(j, 2) : _mm512_setzero_ps();                                            \
        a##j##3 = V > 3 && load ? LD(j, 3) : _mm512_setzero_ps();                                            \
    }
#define FMA(j)                                                                                               \
    if (j < R) {                                                                                             \
        __m512 b = _mm512_set1_ps(x##j[q]);                                                                  \
        a##j##0 = _mm512_fmadd_ps(b, w0, a##j##0);                                                           \
        if (V > 1)                                                                                           \
            a##j##1 = _mm512_fmadd_ps(b, w1, a##j##1);                                                       \
        if (V > 2)                                                                                           \
            a##j##2 = _mm512_fmadd_ps(b, w2, a##j##2);                                                       \
        if (V > 3)                                                                                           \
            a##j##3 = _mm512_fmadd_ps(b, w3, a##j##3);                                                       \
    }
#define PTR(j) const float *x##j = j < R ? xb + po[j] : xb;
#define FIN1(j, v)                                                                                           \
    if (fin)                                                                                                 \
        EPI(a##j##v, j, v, v == V - 1);                                                                      \
    if (v == V - 1)                                                                                          \
        _mm512_mask_storeu_ps(acc + j * ldc + 16 * v, ml, a##j##v);                                          \
    else                                                                                                     \
        _mm512_storeu_ps(acc + j * ldc + 16 * v, a##j##v);
#define FIN(j)                                                                                               \
    if (j < R) {                                                                                             \
        FIN1(j, 0)                                                                                           \
        if (V > 1) {                                                                                         \
            FIN1(j, 1)                                                                                       \
        }                                                                                                    \
        if (V > 2) {                                                                                         \
            FIN1(j, 2)                                                                                       \
        }                                                                                                    \
        if (V > 3) {                                                                                         \
            FIN1(j, 3)                                                                                       \
        }                                                                                                    \
    }

TARGET static inline __attribute__((always_inline)) void tile(const int PF, const int V, const int R, const float *x,
                                                              const int64_t *po,
                                                              const qr_sconv_piece *pc, int np, const float *w,
                                                              float *acc, int64_t ldc, __mmask16 ml, int load,
                                                              const float *bias, const qr_act *act,
                                                              const qr_sconv_epi *epi, ptrdiff_t roff, const char *pf,
                                                              int64_t pfs)
{
    const int fin = bias || act || epi;
    PIX(DECL)
    PIX(INIT)
    for (int i = 0; i < np; i++) {
        const float *xb = x + pc[i].off;
        PIX(PTR)
        const int64_t len = pc[i].len;
        for (int64_t q = 0; q < len; q++, w += NR) {
            if (PF) {
                _mm_prefetch(pf, _MM_HINT_T1);
                pf += pfs;
            }
            __m512 w0 = _mm512_loadu_ps(w);
            __m512 w1 = V > 1 ? _mm512_loadu_ps(w + 16) : w0;
            __m512 w2 = V > 2 ? _mm512_loadu_ps(w + 32) : w0;
            __m512 w3 = V > 3 ? _mm512_loadu_ps(w + 48) : w0;
            PIX(FMA)
        }
    }
    PIX(FIN)
}

typedef void (*tile_fn)(const float *x, const int64_t *po, const qr_sconv_piece *pc, int np, const float *w, float *acc,
                        int64_t ldc, __mmask16 ml, int load, const float *bias, const qr_act *act,
                        const qr_sconv_epi *epi, ptrdiff_t roff, const char *pf, int64_t pfs);

/* Pixels per tile for V vectors: V * R sums of the 32 zmm, with room for V weights and a broadcast. */
static const int rmax[5] = {0, 12, 12, 8, 6};

#define FN(v, r)                                                                                             \
    TARGET static void tile_##v##_##r(const float *x, const int64_t *po, const qr_sconv_piece *pc, int np,    \
                                      const float *w, float *acc, int64_t ldc, __mmask16 ml, int load,       \
                                      const float *bias, const qr_act *act, const qr_sconv_epi *epi,         \
                                      ptrdiff_t roff, const char *pf, int64_t pfs)                           \
    {                                                                                                        \
        tile(1, v, r, x, po, pc, np, w, acc, ldc, ml, load, bias, act, epi, roff, pf, pfs);                  \
    }                                                                                                        \
    TARGET static void tilen_##v##_##r(const float *x, const int64_t *po, const qr_sconv_piece *pc, int np,   \
                                       const float *w, float *acc, int64_t ldc, __mmask16 ml, int load,      \
                                       const float *bias, const qr_act *act, const qr_sconv_epi *epi,        \
                                       ptrdiff_t roff, const char *pf, int64_t pfs)                          \
    {                                                                                                        \
        tile(0, v, r, x, po, pc, np, w, acc, ldc, ml, load, bias, act, epi, roff, pf, pfs);                  \
    }
#define FNS(v) FN(v, 1) FN(v, 2) FN(v, 3) FN(v, 4) FN(v, 5) FN(v, 6) FN(v, 7) FN(v, 8) FN(v, 9) FN(v, 10) FN(v, 11) FN(v, 12)
FNS(1)
FNS(2)
FN(3, 1) FN(3, 2) FN(3, 3) FN(3, 4) FN(3, 5) FN(3, 6) FN(3, 7) FN(3, 8)
FN(4, 1) FN(4, 2) FN(4, 3) FN(4, 4) FN(4, 5) FN(4, 6)

#define ROWFN(v) {NULL, tile_##v##_1, tile_##v##_2, tile_##v##_3, tile_##v##_4, tile_##v##_5, tile_##v##_6
static const tile_fn tiles[5][13] = {
    {NULL},
    ROWFN(1), tile_1_7, tile_1_8, tile_1_9, tile_1_10, tile_1_11, tile_1_12},
    ROWFN(2), tile_2_7, tile_2_8, tile_2_9, tile_2_10, tile_2_11, tile_2_12},
    ROWFN(3), tile_3_7, tile_3_8},
    ROWFN(4)},
};
#define ROWFNN(v) {NULL, tilen_##v##_1, tilen_##v##_2, tilen_##v##_3, tilen_##v##_4, tilen_##v##_5, tilen_##v##_6
/* the same without the weights' prefetch (a layer whose packed weights stay in L2) */
static const tile_fn tilesn[5][13] = {
    {NULL},
    ROWFNN(1), tilen_1_7, tilen_1_8, tilen_1_9, tilen_1_10, tilen_1_11, tilen_1_12},
    ROWFNN(2), tilen_2_7, tilen_2_8, tilen_2_9, tilen_2_10, tilen_2_11, tilen_2_12},
    ROWFNN(3), tilen_3_7, tilen_3_8},
    ROWFNN(4)},
};

/* Thin first layers (1 or 3 input channels at stride 1, K at most one block: the Fashion-MNIST
 * CNN's 1 -> 16 and the small ResNet's 3 -> 16 stems): a tile's pixels are consecutive pixels of one
 * output row, pixel j's window XS = C floats after pixel j - 1's, so the tile reads every pixel's
 * value at a constant offset from one pointer per run of K. The general tile keeps a pointer per
 * pixel, and for runs of 3 or 9 values its 12 pointers, reloaded from the stack every run, cost more
 * than the FMAs (the 1 -> 16 stem at 31 GMAC/s). The same FMA chain in the same order: the same
 * bits. */
#define FMAX(j)                                                                                              \
    if (j < R && V == 1) {                                                                                   \
        a##j##0 = fma_bcast(w0, xb + q + j * XS, a##j##0);                                                   \
    } else if (j < R) {                                                                                      \
        __m512 b = _mm512_set1_ps(xb[q + j * XS]);                                                           \
        a##j##0 = _mm512_fmadd_ps(b, w0, a##j##0);                                                           \
        if (V > 1)                                                                                           \
            a##j##1 = _mm512_fmadd_ps(b, w1, a##j##1);                                                       \
        if (V > 2)                                                                                           \
            a##j##2 = _mm512_fmadd_ps(b, w2, a##j##2);                                                       \
        if (V > 3)                                                                                           \
            a##j##3 = _mm512_fmadd_ps(b, w3, a##j##3);                                                       \
    }

/* a + w * (*x broadcast), the broadcast a memory operand of the FMA: with one vector of channels and
 * pixels 1 or 3 floats apart, GCC kept each value in a register for the next pixel's step and
 * broadcast it from there (vbroadcastss xmm -> zmm and a vmovaps per pixel: two more vector uops
 * per FMA, the stems' tiles bound on them). The same fused multiply-add: the same bits. */
TARGET static inline __attribute__((always_inline)) __m512 fma_bcast(__m512 w, const float *x, __m512 a)
{
    __asm__("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(a) : "v"(w), "m"(*x));
    return a;
}

TARGET static inline __attribute__((always_inline)) void xtile(const int V, const int R, const int XS, const float *x,
                                                               const qr_sconv_piece *pc, int np, const float *w,
                                                               float *acc, int64_t ldc, __mmask16 ml,
                                                               const float *bias, const qr_act *act,
                                                               const qr_sconv_epi *epi, ptrdiff_t roff)
{
    const int fin = bias || act || epi, load = 0;
    PIX(DECL)
    PIX(INIT)
    for (int i = 0; i < np; i++) {
        const float *xb = x + pc[i].off;
        const int64_t len = pc[i].len;
        for (int64_t q = 0; q < len; q++, w += NR) {
            __m512 w0 = _mm512_loadu_ps(w);
            __m512 w1 = V > 1 ? _mm512_loadu_ps(w + 16) : w0;
            __m512 w2 = V > 2 ? _mm512_loadu_ps(w + 32) : w0;
            __m512 w3 = V > 3 ? _mm512_loadu_ps(w + 48) : w0;
            PIX(FMAX)
        }
    }
    PIX(FIN)
}

typedef void (*xtile_fn)(const float *x, const qr_sconv_piece *pc, int np, const float *w, float *acc, int64_t ldc,
                         __mmask16 ml, const float *bias, const qr_act *act, const qr_sconv_epi *epi, ptrdiff_t roff);

#define XFN(xs, v, r)                                                                                        \
    TARGET static void xtile_##xs##_##v##_##r(const float *x, const qr_sconv_piece *pc, int np, const float *w, \
                                              float *acc, int64_t ldc, __mmask16 ml, const float *bias,     \
                                              const qr_act *act, const qr_sconv_epi *epi, ptrdiff_t roff)   \
    {                                                                                                        \
        xtile(v, r, xs, x, pc, np, w, acc, ldc, ml, bias, act, epi, roff);                                   \
    }
#define XFNS12(xs, v) XFN(xs, v, 1) XFN(xs, v, 2) XFN(xs, v, 3) XFN(xs, v, 4) XFN(xs, v, 5) XFN(xs, v, 6) \
    XFN(xs, v, 7) XFN(xs, v, 8) XFN(xs, v, 9) XFN(xs, v, 10) XFN(xs, v, 11) XFN(xs, v, 12)
#define XFNS(xs) XFNS12(xs, 1) XFNS12(xs, 2) XFN(xs, 3, 1) XFN(xs, 3, 2) XFN(xs, 3, 3) XFN(xs, 3, 4) \
    XFN(xs, 3, 5) XFN(xs, 3, 6) XFN(xs, 3, 7) XFN(xs, 3, 8) XFN(xs, 4, 1) XFN(xs, 4, 2) XFN(xs, 4, 3)  \
    XFN(xs, 4, 4) XFN(xs, 4, 5) XFN(xs, 4, 6)
XFNS(1)
XFNS(3)
XFNS(16)
XFNS(32)
XFNS(64)
XFNS(6)

#define XROW6(xs, v) xtile_##xs##_##v##_1, xtile_##xs##_##v##_2, xtile_##xs##_##v##_3, xtile_##xs##_##v##_4, \
    xtile_##xs##_##v##_5, xtile_##xs##_##v##_6
#define XROW12(xs, v) XROW6(xs, v), xtile_##xs##_##v##_7, xtile_##xs##_##v##_8, xtile_##xs##_##v##_9, \
    xtile_##xs##_##v##_10, xtile_##xs##_##v##_11, xtile_##xs##_##v##_12
#define XTABLE(xs) {{NULL}, {NULL, XROW12(xs, 1)}, {NULL, XROW12(xs, 2)}, \
    {NULL, XROW6(xs, 3), xtile_##xs##_3_7, xtile_##xs##_3_8}, {NULL, XROW6(xs, 4)}}
/* [XS 1, 3, 16, 32, 64, 6][V][R] */
static const xtile_fn xtiles[6][5][13] = {XTABLE(1), XTABLE(3), XTABLE(16), XTABLE(32), XTABLE(64), XTABLE(6)};

/* After the tiles: an NCHW output's row block, [pixels][64], transposed into the panel's channels,
 * each a contiguous run of the rows' pixels. */
TARGET static void thin_done(const qr_sconv *p, const float *blk, float *y, int64_t panel, int64_t oy0, int64_t oy1,
                             int nhwc, int64_t nch)
{
    if (nhwc)
        return;
    int64_t ohw = p->OH * p->OW;
    transpose(blk, NR, y + panel * NR * ohw + oy0 * p->OW, ohw, (oy1 - oy0) * p->OW, nch);
}

/* The runs of K of kernel rows [ky0, ky1) (nkx kernel columns from the first one taken) of a window
 * in an image of rows rw floats apart, from the window's first taken value: (ky1 - ky0) * (1 or nkx)
 * runs. */
static int rows_pieces(const qr_sconv *p, int64_t rw, int64_t ky0, int64_t ky1, int64_t nkx, qr_sconv_piece *pc)
{
    int np = 0;
    for (int64_t ky = ky0; ky < ky1 && nkx > 0; ky++) {
        int64_t o = (ky - ky0) * p->d0 * rw;
        if (p->d1 == 1)
            pc[np++] = (qr_sconv_piece){o, nkx * p->C};
        else
            for (int64_t kx = 0; kx < nkx; kx++)
                pc[np++] = (qr_sconv_piece){o + kx * p->d1 * p->C, p->C};
    }
    return np;
}

/* thin_edges on the channels-last images themselves (xp: image i at xp + i * xp_img, [H][W][C]),
 * without the padded copy: every tile takes only the taps inside the image, the inside columns'
 * as thin_edges does, a border column's in runs of its rows with the same kernel rows inside
 * (thin_edges reads the others as the copy's zeros). The same FMA chains but for those products
 * of a weight with a zero border (w finite: +-0, which leaves a nonzero sum as it was: the bits
 * of thin_edges but for the sign of a zero sum, as qr_sconv.edge says). The copy, a write and a
 * read of every image, was 5-7% of the small ResNet's f32 time at batch 64 (`perf record`). */
TARGET static void thin_edges_direct(const qr_sconv *p, const float *xp, int64_t xp_img, const float *packed,
                                     int64_t panel, int64_t oy0, int64_t oy1, float *acc, int64_t ldc, int V, int R,
                                     __mmask16 ml, const xtile_fn *fx, const float *bias, const qr_act *act,
                                     const qr_sconv_epi *epi, ptrdiff_t roff)
{
    const int64_t C = p->C, OW = p->OW, rw = p->W * C;
    const float *wp = packed + panel * (p->K + 1) * NR;
    const int64_t nin = p->oxr - p->oxl, nt = (nin + R - 1) / R, rb = nin / nt, rx = nin % nt;
    qr_sconv_piece pc[QR_SCONV_PIECES];
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t ly = oy % p->OH, ky0, ky1;
        inside(ly, p->s0, p->pt, p->d0, p->KH, p->H, &ky0, &ky1);
        /* no kernel row inside (np 0): the tiles store 0 + bias, as thin_edges's */
        int np = rows_pieces(p, rw, ky0, ky1, p->KW, pc);
        /* the first inside row's value under the first column's window */
        int64_t row = np ? oy / p->OH * xp_img + (ly * p->s0 - p->pt + ky0 * p->d0) * rw : 0;
        const float *w = wp + (np ? ky0 : 0) * p->KW * C * NR;
        for (int64_t t = 0, ox = p->oxl; t < nt; t++) {
            int r = (int)(rb + (t < rx));
            fx[r](xp + row + (np ? (ox * p->s1 - p->pl) * C : 0), pc, np, w, acc + ((oy - oy0) * OW + ox) * ldc, ldc,
                  ml, bias, act, epi, roff);
            ox += r;
        }
    }
    for (int e = 0; e < p->necols; e++) {
        const int64_t ox = p->ecol[e], kx0 = p->ekx0[e], nkx = p->ekx1[e] - kx0;
        const float *we = packed + p->epack[e] + panel * p->KH * nkx * C * NR;
        for (int64_t oy = oy0; oy < oy1;) {
            /* a run of rows of one image with the same kernel rows inside, in tiles of up to R */
            int64_t ly = oy % p->OH, ky0, ky1, k0, k1, n = 1;
            inside(ly, p->s0, p->pt, p->d0, p->KH, p->H, &ky0, &ky1);
            while (oy + n < oy1 && ly + n < p->OH) {
                inside(ly + n, p->s0, p->pt, p->d0, p->KH, p->H, &k0, &k1);
                if (k0 != ky0 || k1 != ky1)
                    break;
                n++;
            }
            int np = rows_pieces(p, rw, ky0, ky1, nkx, pc);
            const float *w = we + (np ? ky0 : 0) * nkx * C * NR;
            int64_t col = (ox * p->s1 - p->pl + kx0 * p->d1) * C;
            const int64_t ct = (n + R - 1) / R, cb = n / ct, cx = n % ct;
            for (int64_t t = 0; t < ct; t++) {
                int r = (int)(cb + (t < cx));
                int64_t po[12];
                for (int j = 0; j < r; j++)
                    po[j] = np ? (oy + j) / p->OH * xp_img + ((ly + j) * p->s0 - p->pt + ky0 * p->d0) * rw + col : 0;
                tilesn[V][r](xp, po, pc, np, w, acc + ((oy - oy0) * OW + ox) * ldc, OW * ldc, ml, 0, bias, act, epi,
                             roff, NULL, 0);
                oy += r, ly += r;
            }
        }
    }
}

/* The thin tiles without the border's taps (qr_sconv.edge): each row's inside columns [oxl, oxr)
 * in tiles of consecutive pixels over the kernel rows inside the image (their weights a slice of
 * the panel's: K runs ky-major), then each border column's pixels of the block's rows, R at a time
 * (pixels a row apart: the general tile with its pixel offsets, sums OW pixels apart), over the
 * kernel columns inside the image from the column's own packed weights; their kernel rows outside
 * the image are read as the padded copy's zeros. */
TARGET static void thin_edges(const qr_sconv *p, const float *xp, int64_t xp_img, int direct, const float *packed,
                              int64_t panel, int64_t oy0, int64_t oy1, float *acc, int64_t ldc, int V, int R,
                              __mmask16 ml, const xtile_fn *fx, const float *bias, const qr_act *act,
                              const qr_sconv_epi *epi, ptrdiff_t roff)
{
    if (direct) {
        thin_edges_direct(p, xp, xp_img, packed, panel, oy0, oy1, acc, ldc, V, R, ml, fx, bias, act, epi, roff);
        return;
    }
    const int64_t C = p->C, OW = p->OW, ys = p->s0 * p->Wp * C, xs = p->s1 * C;
    const int rpr = p->d1 == 1 ? 1 : (int)p->KW; /* runs of K per kernel row */
    const float *wp = packed + panel * (p->K + 1) * NR;
    const int64_t nin = p->oxr - p->oxl, nt = (nin + R - 1) / R, rb = nin / nt, rx = nin % nt;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t ly = oy % p->OH, ky0, ky1;
        inside(ly, p->s0, p->pt, p->d0, p->KH, p->H, &ky0, &ky1);
        const float *xr = xp + oy / p->OH * xp_img + ly * ys;
        const qr_sconv_piece *pc = p->piece + ky0 * rpr;
        const float *w = wp + ky0 * p->KW * C * NR;
        int np = (int)(ky1 - ky0) * rpr;
        for (int64_t t = 0, ox = p->oxl; t < nt; t++) {
            int r = (int)(rb + (t < rx));
            fx[r](xr + ox * xs, pc, np, w, acc + ((oy - oy0) * OW + ox) * ldc, ldc, ml, bias, act, epi, roff);
            ox += r;
        }
    }
    const int64_t rows = oy1 - oy0, ct = (rows + R - 1) / R, cb = rows / ct, cx = rows % ct;
    for (int e = 0; e < p->necols; e++) {
        const int64_t ox = p->ecol[e], kx0 = p->ekx0[e], nkx = p->ekx1[e] - kx0;
        qr_sconv_piece pc[QR_SCONV_PIECES];
        int np = 0;
        for (int64_t ky = 0; ky < p->KH && nkx > 0; ky++) {
            if (p->d1 == 1)
                pc[np++] = (qr_sconv_piece){(ky * p->d0 * p->Wp + kx0) * C, nkx * C};
            else
                for (int64_t kx = kx0; kx < kx0 + nkx; kx++)
                    pc[np++] = (qr_sconv_piece){(ky * p->d0 * p->Wp + kx * p->d1) * C, C};
        }
        const float *w = packed + p->epack[e] + panel * p->KH * nkx * C * NR;
        int64_t ly = oy0 % p->OH, rowoff = oy0 / p->OH * xp_img + ly * ys;
        for (int64_t t = 0, oy = oy0; t < ct; t++) {
            int r = (int)(cb + (t < cx));
            int64_t po[12];
            for (int j = 0; j < r; j++) { /* row oy + j's pixel: (image, row) walked without a division */
                po[j] = rowoff + ox * xs;
                rowoff += ys;
                if (++ly == p->OH)
                    ly = 0, rowoff = (oy + j + 1) / p->OH * xp_img;
            }
            tilesn[V][r](xp, po, pc, np, w, acc + ((oy - oy0) * OW + ox) * ldc, OW * ldc, ml, 0, bias, act, epi, roff,
                         NULL, 0);
            oy += r;
        }
    }
}

/* The xtiles' row of xtiles[] for a panel of V vectors (-1: the general tiles). Tiles of 12 pixels
 * (one or two vectors) over weights that may stay in L2 (the packed layer at most 512 KB) run
 * without the prefetch (qr_sconv_block); one K block and pixels 1, 3, 16 or 32 floats apart (the
 * last two only in the 12-pixel tiles of small layers, which need the registers: the small
 * ResNet's 16- and 32-channel layers), or 64 apart at stride 1 in a layer whose weights stay in L2
 * (the xtiles do not prefetch them): the small ResNet's 64 -> 64 on 8 x 8, whose border taps (16%
 * of a 3 x 3's on 8 x 8) the thin path's edge columns skip, where the general tile multiplied them
 * by the padded zeros (2.70 -> 2.35-2.54 ms at batch 64). Not at stride 2: its 32 -> 64 onto 8 x 8
 * (one border column) took 1.73-1.91 ms in rows of 4 + 3 pixels against 1.42-1.44 in the general
 * 6-pixel tiles. Pixels 6 floats apart: an RGB stem at stride 2 (MobileNetV2's 3 -> 32 on 224 x 224,
 * whose 12-pixel general tiles reloaded their pointers: 0.272 -> 0.236-0.240 ms; stop 51). */
static int thin_xi(const qr_sconv *p, int V)
{
    const int64_t xs1 = p->s1 * p->C;
    const int l2 = qr_sconv_weight_floats(p) * (int64_t)sizeof(float) <= 512 * 1024, small = V <= 2 && l2;
    return xs1 == 1                        ? 0
           : xs1 == 3                      ? 1
           : xs1 == 6                      ? 5
           : small && xs1 == 16            ? 2
           : small && xs1 == 32            ? 3
           : l2 && p->s1 == 1 && xs1 == 64 ? 4
                                           : -1;
}

int qr_sconv_reads_inside(const qr_sconv *p, const float *packed)
{
    if (p->nchunks != 1 || !p->edge || packed[p->eflag] == 0.0f)
        return 0;
    for (int64_t pn = 0; pn < p->panels; pn++) {
        int64_t nch = p->M - pn * NR < NR ? p->M - pn * NR : NR;
        if (thin_xi(p, (int)((nch + 15) / 16)) < 0)
            return 0;
    }
    return 1;
}

TARGET void qr_sconv_block(const qr_sconv *p, const float *xp, int64_t xp_img, int x_direct, const float *packed,
                           int has_bias, const qr_act *act, float *blk, float *y, int64_t panel, int64_t oy0,
                           int64_t oy1, int nhwc, const qr_sconv_epi *epi)
{
    const ptrdiff_t roff = epi && epi->res ? epi->res - y : 0;
    const int64_t C = p->C, OW = p->OW, mrem = p->M - panel * NR;
    const int64_t nch = mrem < NR ? mrem : NR, npix = (oy1 - oy0) * OW;
    const int V = (int)((nch + 15) / 16), R = rmax[V];
    const __mmask16 ml = (__mmask16)(0xffffu >> (16 * V - nch));
    /* channels last: the sums go to y's pixels in place (M apart), else to the row block */
    float *acc = nhwc ? y + oy0 * OW * p->M + panel * NR : blk;
    const int64_t ldc = nhwc ? p->M : NR;
    /* the block's pixels in tiles of nearly equal size, across row ends (each pixel its own window
     * offset): ResNet-18's 7 x 7 layer4 in 5- and 6-pixel tiles, not 4 + 3 a row */
    const int64_t ntiles = (npix + R - 1) / R, base = npix / ntiles, extra = npix % ntiles;
    const float *wp = packed + panel * (p->K + 1) * NR, *bias = has_bias ? wp + p->K * NR : NULL;
    /* The tiles prefetch the next K block's weights (the next panel's first after the last), a
     * cache line per FMA step: the first tile over a block would otherwise wait on memory for them
     * (ResNet-18's 46 MB of weights do not stay in L3), 73 GMAC/s on layer4 without. */
    const char *pf_end = (const char *)(packed + (panel + 2 < p->panels ? panel + 2 : p->panels) * (p->K + 1) * NR);
    /* tiles of 12 pixels (one or two vectors) over weights that may stay in L2 (the packed layer at
     * most 512 KB) run without the prefetch: its pointer and step left registers for the 12 pixel
     * pointers (a 16 -> 16 3 x 3 layer reloaded three of them every FMA step). Tiles of 6 or 8 pixels
     * keep it: a large model's small layers, ResNet-18's 147 KB of layer1, come from memory at batch 1. */
    const int small = V <= 2 && qr_sconv_weight_floats(p) * (int64_t)sizeof(float) <= 512 * 1024;
    const int xi = thin_xi(p, V);
    const int thin = p->nchunks == 1 && xi >= 0;
    if (thin && p->edge && packed[p->eflag] != 0.0f) {
        thin_edges(p, xp, xp_img, x_direct, packed, panel, oy0, oy1, acc, ldc, V, R, ml, xtiles[xi][V], bias, act, epi,
                   roff);
        thin_done(p, blk, y, panel, oy0, oy1, nhwc, nch);
        return;
    }
    if (thin) { /* each row in tiles of its own */
        const int64_t nt = (OW + R - 1) / R, rb = OW / nt, rx = OW % nt;
        const xtile_fn *fx = xtiles[xi][V];
        for (int64_t oy = oy0, px = 0; oy < oy1; oy++) {
            const float *xr = xp + oy / p->OH * xp_img + (oy % p->OH) * p->s0 * p->Wp * C;
            for (int64_t t = 0, ox = 0; t < nt; t++) {
                int r = (int)(rb + (t < rx));
                fx[r](xr + ox * p->s1 * C, p->piece, p->npieces, wp, acc + px * ldc, ldc, ml, bias, act, epi, roff);
                px += r, ox += r;
            }
        }
    }
    for (int ch = 0; ch < p->nchunks && !thin; ch++) {
        int c0 = p->chunk[ch], c1 = p->chunk[ch + 1], last = ch + 1 == p->nchunks;
        /* the chunk's first weight row: the runs before it */
        int64_t q0 = 0, qn = 0;
        for (int i = 0; i < c0; i++)
            q0 += p->piece[i].len;
        for (int i = c0; i < c1; i++)
            qn += p->piece[i].len;
        const float *w = wp + q0 * NR;
        const char *pf = (const char *)(w + qn * NR);
        /* the next block's bytes spread evenly over this block's FMA steps */
        int64_t qnext = 0;
        int n0 = last ? 0 : c1, n1 = last ? p->chunk[1] : p->chunk[ch + 2];
        for (int i = n0; i < n1; i++)
            qnext += p->piece[i].len;
        if (last) /* the next panel's first block, after this panel's biases */
            pf += NR * sizeof(float);
        int64_t step = (qnext * NR * (int64_t)sizeof(float) + ntiles * qn - 1) / (ntiles * qn);
        const int64_t xs = p->s1 * C, ys = p->s0 * p->Wp * C;
        int64_t px = 0, ox = 0, img = oy0 / p->OH, ly = oy0 % p->OH, rowoff = img * xp_img + ly * ys;
        for (int64_t t = 0; t < ntiles; t++) {
            int r = (int)(base + (t < extra));
            int64_t po[12];
            for (int j = 0; j < r; j++) { /* pixel px + j's window: (image, oy, ox) walked without a division */
                po[j] = rowoff + ox * xs;
                if (++ox == OW) {
                    ox = 0, rowoff += ys;
                    if (++ly == p->OH)
                        ly = 0, rowoff = ++img * xp_img;
                }
            }
            int64_t pfs = pf + qn * step <= pf_end ? step : 0;
            (small ? tilesn : tiles)[V][r](xp, po, p->piece + c0, c1 - c0, w, acc + px * ldc, ldc, ml, ch > 0, last ? bias : NULL,
                        last ? act : NULL, last ? epi : NULL, roff, pf, pfs);
            pf += pfs * qn;
            px += r;
        }
    }
    thin_done(p, blk, y, panel, oy0, oy1, nhwc, nch);
}

/* ---- depthwise (group = C = M): the same image, panels of 64 channels ---- */

int64_t qr_sconv_dw_packed_floats(const qr_sconv *p)
{
    return p->panels * (p->KH * p->KW + 1) * NR;
}

void qr_sconv_dw_pack(const qr_sconv *p, const float *w, const float *bias, float *dst)
{
    int64_t kk = p->KH * p->KW;
    for (int64_t pn = 0; pn < p->panels; pn++) {
        float *d = dst + pn * (kk + 1) * NR;
        for (int64_t t = 0; t <= kk; t++)
            for (int64_t j = 0; j < NR; j++) {
                int64_t c = pn * NR + j;
                d[t * NR + j] = c >= p->M ? 0.0f : t < kk ? w[c * kk + t] : bias ? bias[c] : 0.0f;
            }
    }
}

/* The body of both depthwise tiles: R pixels x V vectors of channels, each output one FMA chain
 * over the taps in order, ADDR the address of pixel j's tap t. */
#define DW_TILE_BODY(V, R, ADDR)                                                                              \
    {                                                                                                         \
        __m512 s[R][V];                                                                                       \
        _Pragma("GCC unroll 4") for (int j = 0; j < R; j++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) s[j][v] = _mm512_setzero_ps();                \
        for (int64_t t = 0; t < taps; t++) {                                                                  \
            const float *wt = w + t * NR;                                                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                               \
            {                                                                                                 \
                __m512 wv = _mm512_loadu_ps(wt + 16 * v);                                                     \
                _Pragma("GCC unroll 4") for (int j = 0; j < R; j++) s[j][v] =                                 \
                    _mm512_fmadd_ps(_mm512_loadu_ps((ADDR) + 16 * v), wv, s[j][v]);                           \
            }                                                                                                 \
        }                                                                                                     \
        _Pragma("GCC unroll 4") for (int j = 0; j < R; j++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                               \
            {                                                                                                 \
                __m512 a = s[j][v];                                                                           \
                EPI(a, j, v, v == V - 1);                                                                     \
                if (v == V - 1)                                                                               \
                    _mm512_mask_storeu_ps(acc + j * ldc + 16 * v, ml, a);                                     \
                else                                                                                          \
                    _mm512_storeu_ps(acc + j * ldc + 16 * v, a);                                              \
            }                                                                                                 \
    }

/* R pixels (windows at x + po[j]) by V vectors of channels: FMA chains from 0 over the taps in
 * (ky, kx) order, + bias, act, to acc (pixel j at acc + j * NR). Lanes past the channels compute
 * whatever the image holds there and are never stored to the output. */
#define DW_TILE(V, R)                                                                                          \
    TARGET static void dw_tile_##V##_##R(const float *x, const int64_t *po, const int64_t *toff, int64_t taps, \
                                         const float *w, float *acc, int64_t ldc, __mmask16 ml,                \
                                         const float *bias, const qr_act *act, const qr_sconv_epi *epi,        \
                                         ptrdiff_t roff)                                                       \
    DW_TILE_BODY(V, R, x + po[j] + toff[t])
DW_TILE(1, 1) DW_TILE(1, 4) DW_TILE(2, 1) DW_TILE(2, 4) DW_TILE(3, 1) DW_TILE(3, 4) DW_TILE(4, 1) DW_TILE(4, 4)

typedef void (*dw_tile_fn)(const float *x, const int64_t *po, const int64_t *toff, int64_t taps, const float *w,
                           float *acc, int64_t ldc, __mmask16 ml, const float *bias, const qr_act *act,
                           const qr_sconv_epi *epi, ptrdiff_t roff);
static const dw_tile_fn dw_tiles[5][2] = {
    {NULL, NULL}, {dw_tile_1_1, dw_tile_1_4}, {dw_tile_2_1, dw_tile_2_4}, {dw_tile_3_1, dw_tile_3_4},
    {dw_tile_4_1, dw_tile_4_4}};

/* The 4-pixel tile of DW_TILE for a 3-wide undilated window at horizontal stride S (1 or 2),
 * the pixels consecutive in one row: each kernel row's 3 + 3 S input vectors are loaded once and
 * shared by the pixels whose windows overlap (pixel j's tap kx is input column S j + kx), where
 * DW_TILE loads each of the 12 taps' vectors: 6 or 9 loads for 12 FMAs instead of 12 (its loads
 * and the weights' were more than the FMAs). A vector of channels at a time, each output the same
 * FMA chain over the taps in (ky, kx) order: the same bits. */
TARGET static inline __attribute__((always_inline)) void dw_row3(const int V, const int S, const float *x,
                                                                 const int64_t *toff, int64_t kh, const float *w,
                                                                 float *acc, int64_t ldc, __mmask16 ml,
                                                                 const float *bias, const qr_act *act,
                                                                 const qr_sconv_epi *epi, ptrdiff_t roff,
                                                                 int64_t xs)
{
    for (int v = 0; v < V; v++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t ky = 0; ky < kh; ky++) {
            const float *r = x + toff[3 * ky] + 16 * v, *wt = w + 3 * ky * NR + 16 * v;
            const __m512 w0 = _mm512_loadu_ps(wt), w1 = _mm512_loadu_ps(wt + NR), w2 = _mm512_loadu_ps(wt + 2 * NR);
            /* input column i of the row: r + i * C (xs / S floats) */
            const int64_t c = xs / S;
            __m512 i0 = _mm512_loadu_ps(r), i1 = _mm512_loadu_ps(r + c), i2 = _mm512_loadu_ps(r + 2 * c);
            __m512 i3 = _mm512_loadu_ps(r + 3 * c), i4 = _mm512_loadu_ps(r + 4 * c), i5 = _mm512_loadu_ps(r + 5 * c);
            if (S == 1) {
                s0 = _mm512_fmadd_ps(i0, w0, s0), s1 = _mm512_fmadd_ps(i1, w0, s1);
                s2 = _mm512_fmadd_ps(i2, w0, s2), s3 = _mm512_fmadd_ps(i3, w0, s3);
                s0 = _mm512_fmadd_ps(i1, w1, s0), s1 = _mm512_fmadd_ps(i2, w1, s1);
                s2 = _mm512_fmadd_ps(i3, w1, s2), s3 = _mm512_fmadd_ps(i4, w1, s3);
                s0 = _mm512_fmadd_ps(i2, w2, s0), s1 = _mm512_fmadd_ps(i3, w2, s1);
                s2 = _mm512_fmadd_ps(i4, w2, s2), s3 = _mm512_fmadd_ps(i5, w2, s3);
            } else {
                __m512 i6 = _mm512_loadu_ps(r + 6 * c), i7 = _mm512_loadu_ps(r + 7 * c);
                __m512 i8 = _mm512_loadu_ps(r + 8 * c);
                s0 = _mm512_fmadd_ps(i0, w0, s0), s1 = _mm512_fmadd_ps(i2, w0, s1);
                s2 = _mm512_fmadd_ps(i4, w0, s2), s3 = _mm512_fmadd_ps(i6, w0, s3);
                s0 = _mm512_fmadd_ps(i1, w1, s0), s1 = _mm512_fmadd_ps(i3, w1, s1);
                s2 = _mm512_fmadd_ps(i5, w1, s2), s3 = _mm512_fmadd_ps(i7, w1, s3);
                s0 = _mm512_fmadd_ps(i2, w2, s0), s1 = _mm512_fmadd_ps(i4, w2, s1);
                s2 = _mm512_fmadd_ps(i6, w2, s2), s3 = _mm512_fmadd_ps(i8, w2, s3);
            }
        }
        const int last = v == V - 1;
        EPI(s0, 0, v, last);
        EPI(s1, 1, v, last);
        EPI(s2, 2, v, last);
        EPI(s3, 3, v, last);
        if (last) {
            _mm512_mask_storeu_ps(acc + 16 * v, ml, s0), _mm512_mask_storeu_ps(acc + ldc + 16 * v, ml, s1);
            _mm512_mask_storeu_ps(acc + 2 * ldc + 16 * v, ml, s2), _mm512_mask_storeu_ps(acc + 3 * ldc + 16 * v, ml, s3);
        } else {
            _mm512_storeu_ps(acc + 16 * v, s0), _mm512_storeu_ps(acc + ldc + 16 * v, s1);
            _mm512_storeu_ps(acc + 2 * ldc + 16 * v, s2), _mm512_storeu_ps(acc + 3 * ldc + 16 * v, s3);
        }
    }
}

typedef void (*dw_row_fn)(const float *x, const int64_t *toff, int64_t kh, const float *w, float *acc, int64_t ldc,
                          __mmask16 ml, const float *bias, const qr_act *act, const qr_sconv_epi *epi, ptrdiff_t roff,
                          int64_t xs);
#define DW_ROW(V, S)                                                                                          \
    TARGET static void dw_row_##V##_##S(const float *x, const int64_t *toff, int64_t kh, const float *w,     \
                                        float *acc, int64_t ldc, __mmask16 ml, const float *bias,            \
                                        const qr_act *act, const qr_sconv_epi *epi, ptrdiff_t roff, int64_t xs) \
    {                                                                                                         \
        dw_row3(V, S, x, toff, kh, w, acc, ldc, ml, bias, act, epi, roff, xs);                                \
    }
DW_ROW(1, 1) DW_ROW(2, 1) DW_ROW(3, 1) DW_ROW(4, 1) DW_ROW(1, 2) DW_ROW(2, 2) DW_ROW(3, 2) DW_ROW(4, 2)
/* [S - 1][V] */
static const dw_row_fn dw_rows[2][5] = {{NULL, dw_row_1_1, dw_row_2_1, dw_row_3_1, dw_row_4_1},
                                        {NULL, dw_row_1_2, dw_row_2_2, dw_row_3_2, dw_row_4_2}};

/* The tile of DW_TILE with each pixel's taps at their own addresses (tp[j * taps + t]): a window
 * that leaves the unpadded image (x_direct) reads its outside taps from dw_zeros, as the padded
 * copy's border would give them (the same FMA chain, so the same bits, NaN or infinite weights
 * included). */
static const float dw_zeros[NR] __attribute__((aligned(64)));
#define DW_TILE_PTR(V, R)                                                                                     \
    TARGET static void dw_ptile_##V##_##R(const float *const *tp, int64_t taps, const float *w, float *acc,   \
                                          int64_t ldc, __mmask16 ml, const float *bias, const qr_act *act,    \
                                          const qr_sconv_epi *epi, ptrdiff_t roff)                            \
    DW_TILE_BODY(V, R, tp[j * taps + t])
DW_TILE_PTR(1, 1) DW_TILE_PTR(1, 4) DW_TILE_PTR(2, 1) DW_TILE_PTR(2, 4) DW_TILE_PTR(3, 1) DW_TILE_PTR(3, 4)
DW_TILE_PTR(4, 1) DW_TILE_PTR(4, 4)

typedef void (*dw_ptile_fn)(const float *const *tp, int64_t taps, const float *w, float *acc, int64_t ldc,
                            __mmask16 ml, const float *bias, const qr_act *act, const qr_sconv_epi *epi,
                            ptrdiff_t roff);
static const dw_ptile_fn dw_ptiles[5][2] = {
    {NULL, NULL}, {dw_ptile_1_1, dw_ptile_1_4}, {dw_ptile_2_1, dw_ptile_2_4}, {dw_ptile_3_1, dw_ptile_3_4},
    {dw_ptile_4_1, dw_ptile_4_4}};

/* Pixel (iy0, ix0)'s window's tap addresses in the unpadded image x (a panel's first channel),
 * dw_zeros for those outside it. */
static void dw_taps(const qr_sconv *p, const float *x, int64_t iy0, int64_t ix0, const float **tp)
{
    for (int64_t ky = 0, t = 0; ky < p->KH; ky++) {
        int64_t iy = iy0 + ky * p->d0;
        if (iy < 0 || iy >= p->H) { /* a row of padding */
            for (int64_t kx = 0; kx < p->KW; kx++)
                tp[t++] = dw_zeros;
            continue;
        }
        const float *row = x + iy * p->W * p->C;
        for (int64_t kx = 0, ix = ix0; kx < p->KW; kx++, t++, ix += p->d1)
            tp[t] = ix >= 0 && ix < p->W ? row + ix * p->C : dw_zeros;
    }
}

void qr_sconv_dw_block(const qr_sconv *p, const float *xp, int x_direct, const float *packed, int has_bias,
                       const qr_act *act, float *blk, float *y, int64_t panel, int64_t oy0, int64_t oy1, int nhwc,
                       const qr_sconv_epi *epi)
{
    const ptrdiff_t roff = epi && epi->res ? epi->res - y : 0;
    const int64_t C = p->C, OW = p->OW, taps = p->KH * p->KW, nch = p->M - panel * NR < NR ? p->M - panel * NR : NR;
    const int V = (int)((nch + 15) / 16);
    const __mmask16 ml = (__mmask16)(0xffffu >> (16 * V - nch));
    float *acc = nhwc ? y + oy0 * OW * p->M + panel * NR : blk;
    const int64_t ldc = nhwc ? p->M : NR;
    const float *wp = packed + panel * (taps + 1) * NR, *bias = has_bias ? wp + taps * NR : NULL;
    /* the padded image's row, or (x_direct) the image's own */
    const int64_t rowf = (x_direct ? p->W : p->Wp) * C;
    int64_t toff[QR_SCONV_DW_TAPS];
    for (int64_t t = 0; t < taps; t++)
        toff[t] = (t / p->KW) * p->d0 * rowf + (t % p->KW) * p->d1 * C;
    const float *x = xp + panel * NR;
    int64_t npix = (oy1 - oy0) * OW;
    /* Window origins walked without a division: in the padded image (its border included), or in
     * the image itself, where a window may start outside it. Pixel (oy, ox)'s window lies inside
     * when its row's does and xlo <= ox <= xhi. */
    const int64_t pt = x_direct ? p->pt : 0, pl = x_direct ? p->pl : 0, xs = p->s1 * C, ys = p->s0 * rowf;
    const int64_t ylast = p->H - 1 - (p->KH - 1) * p->d0, xlast = p->W - 1 - (p->KW - 1) * p->d1;
    const int64_t xlo = x_direct ? (pl + p->s1 - 1) / p->s1 : 0;
    const int64_t xhi = !x_direct ? OW - 1 : xlast + pl >= 0 ? (xlast + pl) / p->s1 : -1;
    int64_t oy = oy0, ox = 0, iy0 = oy0 * p->s0 - pt, rowoff = iy0 * rowf - pl * C;
    int row_in = !x_direct || (iy0 >= 0 && iy0 <= ylast);
    /* 3-wide undilated windows at stride 1 or 2 (MobileNetV2's): the row tile sharing inputs */
    const dw_row_fn row3 = p->KW == 3 && p->d1 == 1 && (p->s1 == 1 || p->s1 == 2) ? dw_rows[p->s1 - 1][V] : NULL;
    for (int64_t px = 0; px < npix; px += 4) {
        int r = npix - px < 4 ? (int)(npix - px) : 4, inside = 0;
        int64_t po[4], iy[4], ix[4];
        if (r == 4 && row_in && ox >= xlo && ox + 3 <= xhi && ox + 3 < OW) { /* most tiles: one row, inside */
            po[0] = rowoff + ox * xs, po[1] = po[0] + xs, po[2] = po[1] + xs, po[3] = po[2] + xs;
            if (row3)
                row3(x + po[0], toff, p->KH, wp, acc + px * ldc, ldc, ml, bias, act, epi, roff, xs);
            else
                dw_tiles[V][1](x, po, toff, taps, wp, acc + px * ldc, ldc, ml, bias, act, epi, roff);
            if ((ox += 4) == OW) {
                ox = 0, oy++, iy0 += p->s0, rowoff += ys;
                row_in = !x_direct || (iy0 >= 0 && iy0 <= ylast);
            }
            continue;
        }
        for (int j = 0; j < r; j++) {
            po[j] = rowoff + ox * xs, iy[j] = iy0, ix[j] = ox * p->s1 - pl;
            inside += row_in && ox >= xlo && ox <= xhi;
            if (++ox == OW) {
                ox = 0, oy++, iy0 += p->s0, rowoff += ys;
                row_in = !x_direct || (iy0 >= 0 && iy0 <= ylast);
            }
        }
        if (r == 4 && inside == 4) {
            dw_tiles[V][1](x, po, toff, taps, wp, acc + px * ldc, ldc, ml, bias, act, epi, roff);
        } else if (inside == r) {
            for (int j = 0; j < r; j++)
                dw_tiles[V][0](x, po + j, toff, taps, wp, acc + (px + j) * ldc, ldc, ml, bias, act, epi, roff);
        } else { /* a window leaves the image: each tap at its own address */
            const float *tp[4 * QR_SCONV_DW_TAPS];
            for (int j = 0; j < r; j++)
                dw_taps(p, x, iy[j], ix[j], tp + j * taps);
            if (r == 4)
                dw_ptiles[V][1](tp, taps, wp, acc + px * ldc, ldc, ml, bias, act, epi, roff);
            else
                for (int j = 0; j < r; j++)
                    dw_ptiles[V][0](tp + j * taps, taps, wp, acc + (px + j) * ldc, ldc, ml, bias, act, epi, roff);
        }
    }
    if (nhwc)
        return;
    int64_t ohw = p->OH * OW;
    transpose(blk, NR, y + panel * NR * ohw + oy0 * OW, ohw, npix, nch);
}

/* NV vectors of channels from c (masks m0..m3 for a ragged last block; the full blocks pass
 * constants, so their loads and stores are plain) of the window at (iy0, ix0) into out. NV is a
 * constant: a layer of 16 channels loads and compares one vector a tap, not four (the Fashion-MNIST
 * CNN's first pool 0.18 -> 0.06 ms at batch 64). max(v, a) is v > a ? v : a, a when either is NaN or
 * both are zeros: the window's first maximum, as the definition's strict > takes it. */
TARGET static inline __attribute__((always_inline)) void maxpool_block(const int NV, const qr_conv_geom *g,
                                                                      const float *x, float *out, int64_t C,
                                                                      int64_t c, int64_t iy0, int64_t ix0,
                                                                      __mmask16 m0, __mmask16 m1, __mmask16 m2,
                                                                      __mmask16 m3)
{
    const int64_t H = g->big[0], W = g->big[1], KH = g->kernel[0], KW = g->kernel[1];
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    for (int64_t ky = 0; ky < KH; ky++) {
        int64_t iy = iy0 + ky * g->dilation[0];
        if (iy < 0 || iy >= H)
            continue;
        for (int64_t kx = 0; kx < KW; kx++) {
            int64_t ix = ix0 + kx * g->dilation[1];
            if (ix < 0 || ix >= W)
                continue;
            const float *v = x + (iy * W + ix) * C + c;
            a0 = _mm512_max_ps(_mm512_maskz_loadu_ps(m0, v), a0);
            if (NV > 1)
                a1 = _mm512_max_ps(_mm512_maskz_loadu_ps(m1, v + 16), a1);
            if (NV > 2)
                a2 = _mm512_max_ps(_mm512_maskz_loadu_ps(m2, v + 32), a2);
            if (NV > 3)
                a3 = _mm512_max_ps(_mm512_maskz_loadu_ps(m3, v + 48), a3);
        }
    }
    _mm512_mask_storeu_ps(out + c, m0, a0);
    if (NV > 1)
        _mm512_mask_storeu_ps(out + c + 16, m1, a1);
    if (NV > 2)
        _mm512_mask_storeu_ps(out + c + 32, m2, a2);
    if (NV > 3)
        _mm512_mask_storeu_ps(out + c + 48, m3, a3);
}

/* The window inside the image: its taps at x + toff[t] (NV vectors from c, masks as above). */
TARGET static inline __attribute__((always_inline)) void maxpool_inside(const int NV, const float *x, float *out,
                                                                       const int64_t *toff, int64_t taps,
                                                                       __mmask16 m0, __mmask16 m1, __mmask16 m2,
                                                                       __mmask16 m3)
{
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    for (int64_t t = 0; t < taps; t++) {
        const float *v = x + toff[t];
        a0 = _mm512_max_ps(_mm512_maskz_loadu_ps(m0, v), a0);
        if (NV > 1)
            a1 = _mm512_max_ps(_mm512_maskz_loadu_ps(m1, v + 16), a1);
        if (NV > 2)
            a2 = _mm512_max_ps(_mm512_maskz_loadu_ps(m2, v + 32), a2);
        if (NV > 3)
            a3 = _mm512_max_ps(_mm512_maskz_loadu_ps(m3, v + 48), a3);
    }
    _mm512_mask_storeu_ps(out, m0, a0);
    if (NV > 1)
        _mm512_mask_storeu_ps(out + 16, m1, a1);
    if (NV > 2)
        _mm512_mask_storeu_ps(out + 32, m2, a2);
    if (NV > 3)
        _mm512_mask_storeu_ps(out + 48, m3, a3);
}

/* n output pixels of 2 x 2 windows inside the image, xs floats apart (stride x C), the taps o1, o2,
 * o3 floats after each window's first, C whole vectors: the four offsets in registers and no
 * per-pixel tests (the Fashion-MNIST CNN's pools, C 16 and 32, where the generic pixel's loop over
 * a table of taps and masked loads cost 38 cycles an output pixel on Zen 4). The same maxima in the
 * same order as maxpool_inside: the same bits. */
TARGET static void maxpool_row_2x2(const float *x, float *out, int64_t n, int64_t C, int64_t xs, int64_t o1,
                                   int64_t o2, int64_t o3)
{
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    for (int64_t i = 0; i < n; i++, x += xs, out += C)
        for (int64_t c = 0; c < C; c += 16) {
            __m512 a = _mm512_max_ps(_mm512_loadu_ps(x + c), ninf);
            a = _mm512_max_ps(_mm512_loadu_ps(x + o1 + c), a);
            a = _mm512_max_ps(_mm512_loadu_ps(x + o2 + c), a);
            a = _mm512_max_ps(_mm512_loadu_ps(x + o3 + c), a);
            _mm512_storeu_ps(out + c, a);
        }
}

TARGET void qr_sconv_maxpool_nhwc(const qr_conv_geom *g, int64_t C, const float *x, float *y, int64_t oy0, int64_t oy1)
{
    const int64_t H = g->big[0], W = g->big[1], OW = g->small[1], KH = g->kernel[0], KW = g->kernel[1];
    /* The window walks KH rows side by side, too many streams for the hardware prefetcher once the
     * image is out of cache (ResNet-18's 64 images of 112x112x64 ran at ~5 GB/s): each output
     * pixel prefetches, in each row it reads, the stride's new bytes about 2 KB past its window
     * (3x faster there; a prefetch never faults, and these stay inside the row). */
    const int64_t fs = (int64_t)sizeof(float), step = g->stride[1] * C * fs, rowb = W * C * fs;
    const int64_t ahead = (2048 + step - 1) / step * step, imgb = H * rowb;
    /* rows shorter than the distance ahead: the hardware prefetcher follows them (the Fashion-MNIST
     * CNN's rows of 28 x 16 floats: its first pool 0.100-0.107 -> 0.065 ms without at batch 64) */
    const int pf = rowb > ahead;
    /* the ragged last block's vectors and masks */
    const int64_t n = C % 64;
    const int nv = (int)((n + 15) / 16);
    const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
    const __mmask16 m2 = n >= 48 ? 0xffff : n <= 32 ? 0 : (__mmask16)((1u << (n - 32)) - 1);
    const __mmask16 m3 = n <= 48 ? 0 : (__mmask16)((1u << (n - 48)) - 1);
    /* a window inside the image: its taps' offsets from its first, in window order */
    int64_t toff[64];
    const int64_t taps = KH * KW;
    const int fast = taps <= 64;
    for (int64_t t = 0; fast && t < taps; t++)
        toff[t] = ((t / KW) * g->dilation[0] * W + (t % KW) * g->dilation[1]) * C;
    const int64_t ylast = H - 1 - (KH - 1) * g->dilation[0], xlast = W - 1 - (KW - 1) * g->dilation[1];
    /* 2 x 2 windows over whole vectors without the prefetch: the row's inside windows [oxa, oxb)
     * by maxpool_row_2x2 */
    const int64_t s1 = g->stride[1], pl = g->pad_begin[1];
    const int two = taps == 4 && KW == 2 && C % 16 == 0 && !pf;
    const int64_t oxa = (pl + s1 - 1) / s1, oxb = xlast + pl < 0 ? 0 : (xlast + pl) / s1 + 1;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        const int64_t iy0 = oy * g->stride[0] - g->pad_begin[0];
        const int rows_in = fast && iy0 >= 0 && iy0 <= ylast;
        const int64_t ra = rows_in && two ? oxa : OW, rb = ra < OW && oxb < OW ? oxb : OW;
        if (ra < rb)
            maxpool_row_2x2(x + (iy0 * W + ra * s1 - pl) * C, y + (oy * OW + ra) * C, rb - ra, C, s1 * C, toff[1],
                            toff[2], toff[3]);
        for (int64_t ox = 0; ox < OW; ox++) {
            if (ox == ra && ra < rb)
                ox = rb;
            if (ox >= OW)
                break;
            float *out = y + (oy * OW + ox) * C;
            int64_t ix0 = ox * s1 - pl;
            for (int64_t ky = 0; ky < KH && pf; ky++) {
                int64_t iy = iy0 + ky * g->dilation[0];
                if (iy < 0 || iy >= H)
                    continue;
                int64_t b0 = iy * rowb + (ix0 + (KW - 1) * g->dilation[1] + 1) * C * fs + ahead;
                int64_t b1 = b0 + step < imgb ? b0 + step : imgb;
                for (int64_t b = b0 < 0 ? 0 : b0; b < b1; b += 64)
                    _mm_prefetch((const char *)x + b, _MM_HINT_T0);
            }
            if (rows_in && ix0 >= 0 && ix0 <= xlast) { /* most windows: no bounds per tap */
                const float *w0 = x + (iy0 * W + ix0) * C;
                int64_t c = 0;
                for (; c + 64 <= C; c += 64)
                    maxpool_inside(4, w0 + c, out + c, toff, taps, 0xffff, 0xffff, 0xffff, 0xffff);
                if (nv == 1)
                    maxpool_inside(1, w0 + c, out + c, toff, taps, m0, 0, 0, 0);
                else if (nv == 2)
                    maxpool_inside(2, w0 + c, out + c, toff, taps, m0, m1, 0, 0);
                else if (nv == 3)
                    maxpool_inside(3, w0 + c, out + c, toff, taps, m0, m1, m2, 0);
                else if (nv == 4)
                    maxpool_inside(4, w0 + c, out + c, toff, taps, m0, m1, m2, m3);
                continue;
            }
            int64_t c = 0;
            for (; c + 64 <= C; c += 64)
                maxpool_block(4, g, x, out, C, c, iy0, ix0, 0xffff, 0xffff, 0xffff, 0xffff);
            if (nv == 1)
                maxpool_block(1, g, x, out, C, c, iy0, ix0, m0, 0, 0, 0);
            else if (nv == 2)
                maxpool_block(2, g, x, out, C, c, iy0, ix0, m0, m1, 0, 0);
            else if (nv == 3)
                maxpool_block(3, g, x, out, C, c, iy0, ix0, m0, m1, m2, 0);
            else if (nv == 4)
                maxpool_block(4, g, x, out, C, c, iy0, ix0, m0, m1, m2, m3);
        }
    }
}

/* The mean of each channel of one NHWC image [n][C] as global_f32 takes it of a plane: the sum in
 * double over 8 chains (pixel p in chain p % 8, the last n % 8 pixels in chain 0), the chains
 * added in its order, divided once; 8 channels a vector (s: 8 * C doubles of scratch). */
TARGET void qr_sconv_gap_nhwc(const float *x, float *y, int64_t n, int64_t C, double *s)
{
    const int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < 8 * C; i++)
        s[i] = 0;
    for (int64_t p = 0; p < n; p++) {
        double *sl = s + (p < n8 ? p % 8 : 0) * C;
        const float *xp = x + p * C;
        int64_t c = 0;
        for (; c + 8 <= C; c += 8)
            _mm512_storeu_pd(sl + c, _mm512_add_pd(_mm512_loadu_pd(sl + c), _mm512_cvtps_pd(_mm256_loadu_ps(xp + c))));
        for (; c < C; c++)
            sl[c] += xp[c];
    }
    for (int64_t c = 0; c < C; c++) {
        double t = ((s[c] + s[C + c]) + (s[2 * C + c] + s[3 * C + c])) +
                   ((s[4 * C + c] + s[5 * C + c]) + (s[6 * C + c] + s[7 * C + c]));
        y[c] = (float)(t / (double)n);
    }
}
