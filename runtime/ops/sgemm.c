/* f32 GEMM: the portable reference kernel, the per-ISA table and the blocked driver every kernel
 * runs under (B packed when enough rows pass over it, A when its rows are not contiguous in k);
 * see sgemm.h. */
#include "sgemm.h"

#include "op.h"
#include "options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void qr_sgemm_tile_12x32_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff,
                                int64_t kc, float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias,
                                const struct qr_act *act);
void qr_sgemm_row_32_avx512(const float *a, int64_t acs, const float *bp, int64_t k, int64_t x0, int64_t x1, float *c,
                            const float *bias, const struct qr_act *act);
void qr_sgemm_wide_3x128_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff,
                                int64_t kc, float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias,
                                const struct qr_act *act);
void qr_sgemm_add_cols_avx512(float *c, int64_t ldc, int64_t rows, int64_t w, const float *b);
void qr_sgemm_tile_cols_12x32_avx512(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff,
                                     int64_t kc, float *c, int64_t ldc, int rows, int cols, int load_c,
                                     const float *bias, const struct qr_act *act, const float *col_bias);
void qr_sgemm_pack_bt_32_avx512(const float *b, int64_t b_cs, int64_t k, int w, float *dst);
void qr_sgemm_tile_6x16_avx2(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff,
                             int64_t kc, float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias,
                                const struct qr_act *act);

#define REF_MR 4
#define REF_NR 16

static void tile_ref(const float *ap, int64_t ars, int64_t acs, const float *bp, const int64_t *boff, int64_t kc,
                     float *c, int64_t ldc, int rows, int cols, int load_c, const float *bias, const qr_act *act)
{
    for (int r = 0; r < rows; r++)
        for (int x = 0; x < cols; x++) {
            float s = load_c ? c[r * ldc + x] : 0.0f;
            for (int64_t q = 0; q < kc; q++)
                s = fmaf(ap[q * acs + r * ars], bp[(boff ? boff[q] : q * REF_NR) + x], s);
            if (bias)
                s += bias[r];
            c[r * ldc + x] = act ? qr_act_apply(act, s) : s;
        }
}

/* K per block: the B block (KC x NC) stays in L2 while every row tile passes over it, a tile's A
 * (mr x KC) in L1 while it passes over the block's panels. */
#define SG_KC 256
#define SG_NC 512
/* Rows of a work item from which B's block is packed (fewer rows read B in place: for 32 rows
 * of a block in L2 that measured faster, for 64 rows of a 7 MB im2col slower). */
#define SG_PACK_ROWS 48
/* Bytes of C's rows in a row block of a product of several K blocks on a packed B (qr_sgemm):
 * 128 and 256 KB measured alike on bert's linear2 at batch 8, 256 KB 12% faster at batch 64 */
#define SG_C_BYTES (256 * 1024)
/* Floats between A's rows when the driver copies them (a row of K block plus 64 bytes) */
#define SG_A_PAD 16

int64_t qr_sgemm_work(const qr_sgemm_kernel *kn)
{
    int64_t nc = (SG_NC + kn->nr - 1) / kn->nr * kn->nr;
    /* B's block, A's tile (64-byte aligned; its rows SG_KC + SG_A_PAD apart when copied), a table of
     * K offsets (int64) */
    return (int64_t)SG_KC * nc + (SG_KC + SG_A_PAD) * kn->mr + 16 + 2 * SG_KC;
}

typedef struct sg_run {
    const qr_sgemm_kernel *kn;
    const qr_sgemm_job *j;
    float *work;
    int64_t per_slot, mb, nc, row_blocks, kc_n; /* kc_n: K blocks */
} sg_run;

/* c[r][x] += b[x] for rows x w values (a fused Add: the sums' rounding, then the Add's), in the
 * kernel's vectors when it has them. */
static void add_cols(const qr_sgemm_kernel *kn, float *c, int64_t ldc, int64_t rows, int64_t w, const float *b)
{
    if (kn->add_cols) {
        kn->add_cols(c, ldc, rows, w, b);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < w; x++)
            c[r * ldc + x] += b[x];
}

/* Work items [i0, i1): item i is row block i % row_blocks of column block i / row_blocks. */
static void sg_items(void *arg, int64_t i0, int64_t i1, int slot)
{
    const sg_run *R = arg;
    const qr_sgemm_job *j = R->j;
    const int mr = R->kn->mr, nr = R->kn->nr;
    float *bpk = R->work + slot * R->per_slot;
    float *apk = bpk + (SG_KC * ((R->nc + nr - 1) / nr * nr) + 15) / 16 * 16;
    /* where B's rows of the K block are (roff, from j->b); a packed panel's need no table */
    int64_t *roff = (int64_t *)(void *)(apk + (SG_KC + SG_A_PAD) * mr);
    for (int64_t it = i0; it < i1; it++) {
        int64_t m0 = it % R->row_blocks * R->mb, m1 = m0 + R->mb < j->m ? m0 + R->mb : j->m;
        int64_t n0 = it / R->row_blocks * R->nc, n1 = n0 + R->nc < j->n ? n0 + R->nc : j->n;
        int64_t panels = (n1 - n0 + nr - 1) / nr, tiles = (m1 - m0 + mr - 1) / mr;
        /* B packed when enough rows pass over it to pay for the copy, else read in place */
        int pack = m1 - m0 >= SG_PACK_ROWS && !j->b_packed;
        for (int64_t kb = 0; kb < R->kc_n; kb++) {
            /* K blocks of equal size (their bounds depend on K alone) */
            int64_t q0 = j->k * kb / R->kc_n, q1 = j->k * (kb + 1) / R->kc_n, kc = q1 - q0;
            for (int64_t q = 0; q < kc; q++)
                roff[q] = j->b_rows ? j->b_rows[q0 + q] : (q0 + q) * j->ldb;
            for (int64_t p = 0; pack && p < panels; p++) { /* B's columns [n0 + p*nr, +nr) as kc x nr */
                int64_t x0 = n0 + p * nr, w = n1 - x0 < nr ? n1 - x0 : nr;
                float *d = bpk + p * kc * nr;
                const float *src = j->b + x0;
                if (w == 32 && nr == 32) /* a copy of constant size: vector moves, not a call */
                    for (int64_t q = 0; q < kc; q++)
                        memcpy(d + q * 32, src + roff[q], 32 * sizeof(float));
                else if (w == 16 && nr == 16)
                    for (int64_t q = 0; q < kc; q++)
                        memcpy(d + q * 16, src + roff[q], 16 * sizeof(float));
                else
                    for (int64_t q = 0; q < kc; q++)
                        for (int64_t x = 0; x < nr; x++)
                            d[q * nr + x] = x < w ? src[roff[q] + x] : 0;
            }
            const float *bias = kb == R->kc_n - 1 ? j->bias : NULL;
            const qr_act *act = kb == R->kc_n - 1 ? j->act : NULL;
            for (int64_t t = 0; t < tiles; t++) {
                /* tiles of equal rows (12 + 4 did a third of 16 rows at a third of the speed) */
                int64_t r0 = m0 + (m1 - m0) * t / tiles;
                int rows = (int)(m0 + (m1 - m0) * (t + 1) / tiles - r0);
                /* A's rows [r0, +rows) read in place when each is contiguous in k, else packed as kc x mr */
                const float *ap = j->a + r0 * j->a_rs + q0 * j->a_cs;
                int64_t ars = j->a_rs, acs = j->a_cs;
                if (acs == 1 && (ars * (int64_t)sizeof(float)) % 4096 == 0 && ars > 0 && panels > 1) {
                    /* rows a multiple of 4 KB apart fall in one set of L1 (64 sets of 64-byte lines on
                     * the x86 cores we know): twelve of them and B's lines evicted each other (bert's
                     * K = 1024: 86.7 GMAC/s, the same rows 1040 floats apart 95.7, stop 47); copied
                     * SG_KC + SG_A_PAD apart, once for all the block's panels */
                    for (int r = 0; r < rows; r++)
                        memcpy(apk + r * (SG_KC + SG_A_PAD), ap + r * ars, (size_t)kc * sizeof(float));
                    /* the next tile's rows asked for while this one's panels run: each row in a
                     * page of its own, which the hardware prefetchers do not follow (an attention's
                     * queries 8 KB apart at batch 8: Q.K^T 10% faster, stop 53) */
                    if (t + 1 < tiles) {
                        int64_t n0r = m0 + (m1 - m0) * (t + 1) / tiles, n1r = m0 + (m1 - m0) * (t + 2) / tiles;
                        for (int64_t r = n0r; r < n1r; r++)
                            for (int64_t q = 0; q < kc; q += 16)
                                __builtin_prefetch(j->a + r * ars + (q0 + q) * acs, 0, 3);
                    }
                    ap = apk, ars = SG_KC + SG_A_PAD;
                } else if (acs != 1) {
                    for (int64_t q = 0; q < kc; q++)
                        for (int r = 0; r < rows; r++)
                            apk[q * mr + r] = ap[q * acs + r * ars];
                    ap = apk, ars = 1, acs = mr;
                }
                for (int64_t p = 0; p < panels; p++) {
                    int64_t x0 = n0 + p * nr, w = n1 - x0 < nr ? n1 - x0 : nr;
                    const float *bp = j->b_packed ? j->b_packed + (x0 / nr * j->k + q0) * nr
                                      : pack      ? bpk + p * kc * nr
                                                  : j->b + x0;
                    const int64_t *bo = pack || j->b_packed ? NULL : roff;
                    float *cp = j->c + r0 * j->ldc + x0;
                    const float *rb = bias ? bias + r0 : NULL;
                    if (j->col_bias && kb == R->kc_n - 1 && R->kn->tile_cols)
                        R->kn->tile_cols(ap, ars, acs, bp, bo, kc, cp, j->ldc, rows, (int)w, kb > 0, rb, act,
                                         j->col_bias + x0);
                    else
                        R->kn->tile(ap, ars, acs, bp, bo, kc, cp, j->ldc, rows, (int)w, kb > 0, rb, act);
                    if (j->col_bias && kb == R->kc_n - 1 && !R->kn->tile_cols) /* the tile is in L1 */
                        add_cols(R->kn, cp, j->ldc, rows, w, j->col_bias + x0);
                }
            }
        }
    }
}

/* A product of few rows (kn->wide): column blocks [i0, i1) of wide_cols, B and A in place. */
static void sg_wide(void *arg, int64_t i0, int64_t i1, int slot)
{
    const sg_run *R = arg;
    const qr_sgemm_job *j = R->j;
    int64_t *roff = (int64_t *)(void *)(R->work + slot * R->per_slot);
    for (int64_t kb = 0; kb < R->kc_n; kb++) {
        int64_t q0 = j->k * kb / R->kc_n, q1 = j->k * (kb + 1) / R->kc_n, kc = q1 - q0;
        for (int64_t q = 0; q < kc; q++)
            roff[q] = j->b_rows ? j->b_rows[q0 + q] : (q0 + q) * j->ldb;
        for (int64_t it = i0; it < i1; it++) {
            int64_t x0 = it * R->kn->wide_cols, w = j->n - x0 < R->kn->wide_cols ? j->n - x0 : R->kn->wide_cols;
            R->kn->wide(j->a + q0 * j->a_cs, j->a_rs, j->a_cs, j->b + x0, roff, kc, j->c + x0, j->ldc, (int)j->m,
                        (int)w, kb > 0, kb == R->kc_n - 1 ? j->bias : NULL, kb == R->kc_n - 1 ? j->act : NULL);
        }
    }
}

int64_t qr_sgemm_packed_size(const qr_sgemm_kernel *kn, int64_t k, int64_t n)
{
    return (n + kn->nr - 1) / kn->nr * kn->nr * k;
}

void qr_sgemm_pack_b(const qr_sgemm_kernel *kn, const float *b, int64_t b_rs, int64_t b_cs, int64_t k, int64_t n,
                     float *dst)
{
    const int nr = kn->nr;
    for (int64_t x0 = 0; x0 < n; x0 += nr, dst += k * nr) {
        int64_t w = n - x0 < nr ? n - x0 : nr;
        if (b_rs == 1 && kn->pack_bt) {
            kn->pack_bt(b + x0 * b_cs, b_cs, k, (int)w, dst);
            continue;
        }
        if (b_rs == 1) {
            /* B's columns contiguous (a transposed B: an attention's keys read in place): column
             * by column, each read once in order, the panel's stores in L1; a row at a time would
             * step b_cs between every two reads */
            for (int64_t x = 0; x < nr; x++) {
                const float *col = b + (x0 + x) * b_cs;
                for (int64_t q = 0; q < k; q++)
                    dst[q * nr + x] = x < w ? col[q] : 0.0f;
            }
            continue;
        }
        for (int64_t q = 0; q < k; q++)
            for (int64_t x = 0; x < nr; x++)
                dst[q * nr + x] = x < w ? b[q * b_rs + (x0 + x) * b_cs] : 0.0f;
    }
}

/* Column blocks [i0, i1) of SG_ROW_COLS of a one-row product on packed B (kn->row). */
#define SG_ROW_COLS 128
static void sg_row(void *arg, int64_t i0, int64_t i1, int slot)
{
    (void)slot;
    const sg_run *R = arg;
    const qr_sgemm_job *j = R->j;
    int64_t x0 = i0 * SG_ROW_COLS, x1 = i1 * SG_ROW_COLS < j->n ? i1 * SG_ROW_COLS : j->n;
    R->kn->row(j->a, j->a_cs, j->b_packed, j->k, x0, x1, j->c, j->bias, j->act);
    if (j->col_bias)
        add_cols(R->kn, j->c + x0, j->ldc, 1, x1 - x0, j->col_bias + x0);
}

void qr_sgemm(qr_pool *pool, const qr_sgemm_kernel *kn, const qr_sgemm_job *j, float *work)
{
    if (j->m <= 0 || j->n <= 0)
        return;
    if (kn->row && j->m == 1 && j->b_packed && j->k > 0) {
        sg_run R = {.kn = kn, .j = j};
        int64_t blocks = (j->n + SG_ROW_COLS - 1) / SG_ROW_COLS;
        if (pool && blocks > 1)
            qr_parallel_for_slots(pool, blocks, 1, sg_row, &R);
        else
            sg_row(&R, 0, blocks, 0);
        return;
    }
    if (kn->wide && j->m <= kn->wide_rows && j->b) {
        sg_run R = {.kn = kn, .j = j, .work = work, .per_slot = qr_sgemm_work(kn)};
        R.kc_n = j->k > 0 ? (j->k + SG_KC - 1) / SG_KC : 1;
        int64_t blocks = (j->n + kn->wide_cols - 1) / kn->wide_cols;
        if (pool && blocks > 1)
            qr_parallel_for_slots(pool, blocks, 1, sg_wide, &R);
        else
            sg_wide(&R, 0, blocks, 0);
        if (j->col_bias)
            add_cols(kn, j->c, j->ldc, j->m, j->n, j->col_bias);
        return;
    }
    sg_run R = {.kn = kn, .j = j, .work = work, .per_slot = qr_sgemm_work(kn)};
    R.kc_n = j->k > 0 ? (j->k + SG_KC - 1) / SG_KC : 1; /* K = 0: one empty block stores 0 (+ bias) */
    /* column blocks of about SG_NC, of equal size in whole panels */
    int64_t panels = (j->n + kn->nr - 1) / kn->nr, col_blocks = (j->n + SG_NC - 1) / SG_NC;
    R.nc = (panels + col_blocks - 1) / col_blocks * kn->nr;
    col_blocks = (j->n + R.nc - 1) / R.nc;
    /* rows in blocks when the columns give the threads too few items (repacking B per row block
     * costs one copy of the block per mb rows' FMAs over it) */
    int threads = pool ? qr_pool_threads(pool) : 1;
    int64_t want = threads > 1 ? 4 * threads : 1, row_blocks = 1;
    if (col_blocks < want) {
        row_blocks = (want + col_blocks - 1) / col_blocks;
        int64_t most = (j->m + 4 * kn->mr - 1) / (4 * kn->mr); /* at least four tiles of rows each */
        row_blocks = row_blocks < most ? row_blocks : most;
        row_blocks = row_blocks > 0 ? row_blocks : 1;
    }
    int64_t tiles = (j->m + kn->mr - 1) / kn->mr;
    if (R.kc_n > 1 && j->b_packed) {
        /* C's rows of a block go through memory between K blocks: at most SG_C_BYTES of them a
         * row block, so they stay in L2 beside A's and B's blocks (B packed once is only read
         * again per row block; bert's linear2, 1024 x 1024 x 256 at batch 8, had its 1 MB of C
         * back from L3 three times, stop 53) */
        int64_t cap_tiles = SG_C_BYTES / (R.nc * (int64_t)sizeof(float)) / kn->mr;
        cap_tiles = cap_tiles > 4 ? cap_tiles : 4;
        int64_t need = (tiles + cap_tiles - 1) / cap_tiles;
        row_blocks = row_blocks > need ? row_blocks : need;
    }
    R.mb = (tiles + row_blocks - 1) / row_blocks * kn->mr;
    R.row_blocks = (j->m + R.mb - 1) / R.mb;
    int64_t items = R.row_blocks * col_blocks;
    if (pool && items > 1)
        qr_parallel_for_slots(pool, items, 1, sg_items, &R);
    else
        sg_items(&R, 0, items, 0);
}

static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static int has_any(void) { return 1; }

/* Best first: the first whose features the CPU reports runs (the reference is never picked). */
static const struct {
    int (*cpu_has)(void);
    qr_sgemm_kernel kn;
} kernels[] = {
    {has_avx512, {"avx512", 12, 32, qr_sgemm_tile_12x32_avx512, qr_sgemm_wide_3x128_avx512, 3, 128,
                  qr_sgemm_row_32_avx512, qr_sgemm_add_cols_avx512, qr_sgemm_tile_cols_12x32_avx512,
                  qr_sgemm_pack_bt_32_avx512}},
    {has_avx2, {"avx2", 6, 16, qr_sgemm_tile_6x16_avx2, NULL, 0, 0, NULL}},
    {has_any, {"ref", REF_MR, REF_NR, tile_ref, NULL, 0, 0, NULL}},
};
#define N_FAST (sizeof kernels / sizeof kernels[0] - 1)

const qr_sgemm_kernel *qr_sgemm_isa(const char *isa)
{
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].kn.isa, isa))
            return kernels[i].cpu_has() ? &kernels[i].kn : NULL;
    return NULL;
}

const qr_sgemm_kernel *qr_sgemm_best(void)
{
    const char *force = qr_options_get()->sgemm;
    if (!strcmp(force, "portable"))
        return NULL;
    if (force[0] && qr_sgemm_isa(force))
        return qr_sgemm_isa(force);
    __builtin_cpu_init();
    for (size_t i = 0; i < N_FAST; i++)
        if (kernels[i].cpu_has())
            return &kernels[i].kn;
    return NULL;
}
