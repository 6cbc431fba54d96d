#include "wino_nchw.h"

#include <immintrin.h>
#include <string.h>

#include "options.h"
#include "parallel.h"
#include "sgemm.h"
#include "wino.h"

/* At least this many tiles an image (wino.h's layers take the same floor, conv.c's WINO_MIN_TILES):
 * its weights are 16/9 of the direct kernel's and stream once per chunk of tiles. */
#define MIN_TILES 48
/* A chunk's transformed inputs and products about this many bytes (16 x (C + M) floats a tile): whole
 * images for ResNet-18's layers. Chunks of 1 MB (to stay in L2, as wino.h's) ran its f32 pass in
 * 44.2-45.2 ms on Zen 3, 4 MB in 40.7-41.0 (before the GEMMs took U packed once), whole images
 * 41.8-42.1: the products' GEMM rows fill their tiles, and each chunk's 16 products start their
 * panels again. */
#define CHUNK_BYTES (4096 * 1024)

int qr_wino_nchw_takes(const qr_conv_geom *g, int64_t c, int64_t m, int64_t group)
{
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    return kn && !strcmp(kn->isa, "avx2") && qr_options_get()->no_winograd != 1 && group == 1 && g->r == 2 &&
           g->kernel[0] == 3 && g->kernel[1] == 3 && g->stride[0] == 1 && g->stride[1] == 1 &&
           g->dilation[0] == 1 && g->dilation[1] == 1 && c >= 16 && m >= 16 &&
           ((g->small[0] + 1) / 2) * ((g->small[1] + 1) / 2) >= MIN_TILES;
}

typedef struct job {
    const qr_conv_geom *g;
    int64_t C, M, TW, ty0, nt, ldv;     /* tile rows from ty0, nt tiles, ldv floats a row of V and MM */
    const float *x;                     /* this image's [C][H][W] */
    float *v, *mm, *y;                  /* V [16][C][ldv], MM [16][ldv][M]; y this image's [M][OH][OW] */
    float *rows;                        /* per thread: 4 padded input rows, B^T d's 4, evens and odds */
    int64_t rows_len;
    const float *bias;
    const qr_act *act;
} job;

/* The transforms run only where the AVX2 GEMM does (qr_wino_nchw_takes), in its vectors. */
#define TARGET __attribute__((target("avx2")))

/* ev[k] = src[2k] and od[k] = src[2k + 1] for k < n (src holds 2n floats). */
TARGET static void evens_odds(const float *src, int64_t n, float *ev, float *od)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 a = _mm256_loadu_ps(src + 2 * k), b = _mm256_loadu_ps(src + 2 * k + 8);
        _mm256_storeu_ps(ev + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8)));
        _mm256_storeu_ps(od + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8)));
    }
    for (; k < n; k++)
        ev[k] = src[2 * k], od[k] = src[2 * k + 1];
}

/* V = B^T d B for channels [c0, c1) of the chunk's tiles: B^T d down the four input rows of a tile
 * row at once, then the columns' pairs from those rows' even and odd elements. Vectors of 8 and
 * scalar tails do the same operations in the same order: the bits do not depend on the position. */
TARGET static void inputs(void *arg, int64_t c0, int64_t c1, int slot)
{
    const job *j = arg;
    const qr_conv_geom *g = j->g;
    const int64_t H = g->big[0], W = g->big[1], pt = g->pad_begin[0], pl = g->pad_begin[1];
    const int64_t TW = j->TW, wp = 2 * TW + 2, cs = j->C * j->ldv;
    float *r = j->rows + slot * j->rows_len, *d[4] = {r, r + wp, r + 2 * wp, r + 3 * wp};
    float *R[4] = {r + 4 * wp, r + 5 * wp, r + 6 * wp, r + 7 * wp}, *E = r + 8 * wp, *O = E + TW + 1;
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = j->x + c * H * W;
        for (int64_t ty = j->ty0; ty < j->ty0 + j->nt / TW; ty++) {
            for (int i = 0; i < 4; i++) { /* the padded rows: zeros, the row's pixels in place */
                int64_t iy = 2 * ty - pt + i, lo = pl < wp ? pl : wp, hi = pl + W < wp ? pl + W : wp;
                memset(d[i], 0, (size_t)wp * sizeof(float));
                if (iy >= 0 && iy < H && hi > lo)
                    memcpy(d[i] + lo, xc + iy * W + (lo - pl), (size_t)(hi - lo) * sizeof(float));
            }
            int64_t p = 0;
            for (; p + 8 <= wp; p += 8) { /* B^T d */
                __m256 a0 = _mm256_loadu_ps(d[0] + p), a1 = _mm256_loadu_ps(d[1] + p);
                __m256 a2 = _mm256_loadu_ps(d[2] + p), a3 = _mm256_loadu_ps(d[3] + p);
                _mm256_storeu_ps(R[0] + p, _mm256_sub_ps(a0, a2));
                _mm256_storeu_ps(R[1] + p, _mm256_add_ps(a1, a2));
                _mm256_storeu_ps(R[2] + p, _mm256_sub_ps(a2, a1));
                _mm256_storeu_ps(R[3] + p, _mm256_sub_ps(a1, a3));
            }
            for (; p < wp; p++) {
                R[0][p] = d[0][p] - d[2][p];
                R[1][p] = d[1][p] + d[2][p];
                R[2][p] = d[2][p] - d[1][p];
                R[3][p] = d[1][p] - d[3][p];
            }
            int64_t t0 = (ty - j->ty0) * TW;
            for (int i = 0; i < 4; i++) { /* (B^T d) B: tile tx's columns are 2 tx .. 2 tx + 3 */
                evens_odds(R[i], TW + 1, E, O);
                float *v0 = j->v + (4 * i * j->C + c) * j->ldv + t0, *v1 = v0 + cs, *v2 = v1 + cs, *v3 = v2 + cs;
                int64_t tx = 0;
                for (; tx + 8 <= TW; tx += 8) {
                    __m256 e = _mm256_loadu_ps(E + tx), e1 = _mm256_loadu_ps(E + tx + 1);
                    __m256 o = _mm256_loadu_ps(O + tx), o1 = _mm256_loadu_ps(O + tx + 1);
                    _mm256_storeu_ps(v0 + tx, _mm256_sub_ps(e, e1));
                    _mm256_storeu_ps(v1 + tx, _mm256_add_ps(o, e1));
                    _mm256_storeu_ps(v2 + tx, _mm256_sub_ps(e1, o));
                    _mm256_storeu_ps(v3 + tx, _mm256_sub_ps(o, o1));
                }
                for (; tx < TW; tx++) {
                    v0[tx] = E[tx] - E[tx + 1];
                    v1[tx] = O[tx] + E[tx + 1];
                    v2[tx] = E[tx + 1] - O[tx];
                    v3[tx] = O[tx] - O[tx + 1];
                }
            }
        }
    }
}

/* The activation on 8 values, as qr_act_apply on each (NaN kept, -0 to +0 by Relu). */
TARGET static inline __m256 act8(const qr_act *a, __m256 v)
{
    if (a->relu)
        return _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LE_OQ));
    __m256 lo = _mm256_set1_ps(a->lo), hi = _mm256_set1_ps(a->hi);
    v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

/* Y = A^T M A (+ bias, then act) for tiles [t0, t1) of the chunk, 8 output channels a vector
 * (the last ones one at a time: the same operations), each tile's outputs inside OH x OW written
 * to their channels' planes. */
TARGET static void outputs(void *arg, int64_t t0, int64_t t1)
{
    const job *j = arg;
    const int64_t OH = j->g->small[0], OW = j->g->small[1], TW = j->TW, M = j->M, plane = OH * OW;
    const int64_t ldm = j->ldv * M;
    for (int64_t t = t0; t < t1; t++) {
        const float *mt = j->mm + t * M;
        int64_t oy = 2 * (j->ty0 + t / TW), ox = 2 * (t % TW);
        int rows = oy + 1 < OH ? 2 : 1, cols = ox + 1 < OW ? 2 : 1;
        float *yt = j->y + oy * OW + ox;
        int64_t o = 0;
        for (; o + 8 <= M; o += 8) {
            __m256 v[16];
            for (int xi = 0; xi < 16; xi++)
                v[xi] = _mm256_loadu_ps(mt + xi * ldm + o);
            __m256 s00 = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), v[8]);
            __m256 s01 = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), v[9]);
            __m256 s02 = _mm256_add_ps(_mm256_add_ps(v[2], v[6]), v[10]);
            __m256 s03 = _mm256_add_ps(_mm256_add_ps(v[3], v[7]), v[11]);
            __m256 s10 = _mm256_sub_ps(_mm256_sub_ps(v[4], v[8]), v[12]);
            __m256 s11 = _mm256_sub_ps(_mm256_sub_ps(v[5], v[9]), v[13]);
            __m256 s12 = _mm256_sub_ps(_mm256_sub_ps(v[6], v[10]), v[14]);
            __m256 s13 = _mm256_sub_ps(_mm256_sub_ps(v[7], v[11]), v[15]);
            __m256 bv = j->bias ? _mm256_loadu_ps(j->bias + o) : _mm256_setzero_ps();
            __m256 y[4] = {_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s00, s01), s02), bv),
                           _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s01, s02), s03), bv),
                           _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s10, s11), s12), bv),
                           _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s11, s12), s13), bv)};
            float out[4][8];
            for (int q = 0; q < 4; q++)
                _mm256_storeu_ps(out[q], j->act ? act8(j->act, y[q]) : y[q]);
            for (int i = 0; i < 8; i++) {
                float *yo = yt + (o + i) * plane;
                yo[0] = out[0][i];
                if (cols > 1)
                    yo[1] = out[1][i];
                if (rows > 1) {
                    yo[OW] = out[2][i];
                    if (cols > 1)
                        yo[OW + 1] = out[3][i];
                }
            }
        }
        for (; o < M; o++) {
            const float *m = mt + o;
            float s00 = m[0] + m[4 * ldm] + m[8 * ldm], s01 = m[ldm] + m[5 * ldm] + m[9 * ldm];
            float s02 = m[2 * ldm] + m[6 * ldm] + m[10 * ldm], s03 = m[3 * ldm] + m[7 * ldm] + m[11 * ldm];
            float s10 = m[4 * ldm] - m[8 * ldm] - m[12 * ldm], s11 = m[5 * ldm] - m[9 * ldm] - m[13 * ldm];
            float s12 = m[6 * ldm] - m[10 * ldm] - m[14 * ldm], s13 = m[7 * ldm] - m[11 * ldm] - m[15 * ldm];
            float bo = j->bias ? j->bias[o] : 0.0f;
            float y[4] = {s00 + s01 + s02 + bo, s01 - s02 - s03 + bo, s10 + s11 + s12 + bo, s11 - s12 - s13 + bo};
            for (int q = 0; q < 4; q++)
                y[q] = j->act ? qr_act_apply(j->act, y[q]) : y[q];
            float *yo = yt + o * plane;
            yo[0] = y[0];
            if (cols > 1)
                yo[1] = y[1];
            if (rows > 1) {
                yo[OW] = y[2];
                if (cols > 1)
                    yo[OW + 1] = y[3];
            }
        }
    }
}

qr_status qr_wino_packed_weights(qr_kctx *k, const qr_sgemm_kernel *kn, const float *w, int64_t c, int64_t m,
                                 float **packed)
{
    /* the packings, then at [16 * pf] 1.0 when every weight is finite, else 0 */
    const int64_t pf = qr_sgemm_packed_size(kn, c, m), total = 16 * pf + 16;
    int fresh = 1, keep = qr_kinput_fixed(k, 1);
    float *p = keep ? qr_kcache_get(k, (size_t)total * sizeof(float), "Winograd weights", &fresh)
                    : qr_kscratch(k, total, 1, sizeof(float), "Winograd weights");
    *packed = NULL;
    if (!p)
        return QR_ERR;
    if (fresh) {
        float *u = qr_kwork(k, qr_wino_u_floats(c, m), 1, sizeof(float), "Winograd weights before packing");
        if (!u) {
            qr_kcache_done(k, p);
            return QR_ERR;
        }
        p[16 * pf] = (float)qr_wino_weights(w, c, m, u);
        for (int64_t xi = 0; xi < 16; xi++)
            qr_sgemm_pack_b(kn, u + xi * c * m, m, 1, c, m, p + xi * pf);
    }
    if (p[16 * pf] == 0.0f)
        qr_kcache_done(k, p);
    else
        *packed = p;
    return QR_OK;
}

qr_status qr_wino_nchw_run(qr_kctx *k, const qr_conv_geom *g, int64_t c, int64_t m, const float *x, const float *w,
                           const float *b, float *y, int64_t n_img, const qr_act *act, int *done)
{
    *done = 0;
    const qr_sgemm_kernel *kn = qr_sgemm_best();
    const int64_t OH = g->small[0], OW = g->small[1], TH = (OH + 1) / 2, TW = (OW + 1) / 2;
    /* chunks of whole tile rows, at least MIN_TILES each (so the GEMMs' rows fill their tiles), the
     * rows shared out evenly */
    int64_t rows = CHUNK_BYTES / (16 * (c + m) * (int64_t)sizeof(float) * TW), least = (MIN_TILES + TW - 1) / TW;
    rows = rows < least ? least : rows;
    int64_t chunks = TH / rows > 1 ? TH / rows : 1, most = (TH + chunks - 1) / chunks;
    const int64_t ldv = most * TW, slots = qr_pool_threads(k->pool), rows_len = 8 * (2 * TW + 2) + 2 * (TW + 1);
    /* under a memory budget (--max-memory) that the direct GEMM's smaller workspace fits and this
     * one's does not, the direct GEMM (the Fashion-MNIST CNN's probe run at 600 KB: 16 x (16 + 32)
     * floats a tile against its padded planes) */
    const int64_t pf = qr_sgemm_packed_size(kn, c, m);
    size_t need = (size_t)(16 * pf + 16 + 16 * c * m + 16 * (c + m) * ldv + slots * (rows_len + qr_sgemm_work(kn))) *
                  sizeof(float);
    if (!qr_kwork_fits(k, 1, (int64_t)need, 1))
        return QR_OK;
    float *packed;
    if (qr_wino_packed_weights(k, kn, w, c, m, &packed) != QR_OK)
        return QR_ERR;
    if (!packed)
        return QR_OK;
    float *v = qr_kwork(k, 16 * c, ldv, sizeof(float), "Winograd inputs");
    float *mm = v ? qr_kwork(k, 16 * m, ldv, sizeof(float), "Winograd products") : NULL;
    float *rw = mm ? qr_kwork(k, slots, rows_len, sizeof(float), "Winograd rows") : NULL;
    float *work = rw ? qr_kwork(k, slots, qr_sgemm_work(kn), sizeof(float), "packed GEMM panels") : NULL;
    if (!work) {
        qr_kcache_done(k, packed);
        return QR_ERR;
    }
    job j = {.g = g, .C = c, .M = m, .TW = TW, .ldv = ldv, .v = v, .mm = mm, .rows = rw,
             .rows_len = rows_len, .bias = b, .act = act};
    for (int64_t n = 0; n < n_img; n++) {
        j.x = x + n * c * g->big_n, j.y = y + n * m * g->small_n;
        for (int64_t ch = 0; ch < chunks; ch++) {
            j.ty0 = ch * TH / chunks;
            j.nt = ((ch + 1) * TH / chunks - j.ty0) * TW;
            qr_parallel_for_slots(k->pool, c, 4, inputs, &j);
            for (int64_t xi = 0; xi < 16; xi++) { /* M[xi] [tiles][M] = V[xi]^T . U[xi] */
                qr_sgemm_job sj = {.a = v + xi * c * ldv, .a_rs = 1, .a_cs = ldv, .m = j.nt, .k = c, .n = m,
                                   .b_packed = packed + xi * pf, .c = mm + xi * ldv * m, .ldc = m};
                qr_sgemm(k->pool, kn, &sj, work);
            }
            qr_parallel_for(k->pool, j.nt, 8, outputs, &j);
        }
    }
    qr_kcache_done(k, packed);
    *done = 1;
    return QR_OK;
}
