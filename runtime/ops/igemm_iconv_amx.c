/* The NHWC indirect GEMM (qr_iconv_fn, igemm.h) on AMX-INT8: tdpbusd multiplies a 16 x 64 tile
 * of u8 activations by a 64 x 16 tile of s8 weights into 16 x 16 int32 sums (16384 MACs an
 * instruction; the wrapping sums QRL's contract asks for, as vpdpbusd's).
 *
 * A: one tap of K a multiple of 64 (1 x 1 convolutions): where 16 rows' pointers are one run of a
 * stride (a block's pixels), the tiles load them where they are, no copy; other 16s (a padding
 * row, a ragged end) are gathered 64 bytes at a time. Else the call's rows are copied from their
 * row pointers into one buffer, [rows up to 32s][K up to 64s] with K = taps * k4, zero past m and
 * K (so a tile reads whole rows and the padding adds nothing); each row's taps are the row
 * pointers' k4 bytes one after another, the order of the weights' K. One copy serves all the
 * call's column tiles.
 * B: the panels as they are (qr_iconv_col): in a strip, one k group of 16 columns is 64 bytes and
 * the next group `step` bytes on, which is a tile's rows and stride, so no weights are repacked. A
 * ragged last 64 of K is copied into a zeroed 1 KB tile (its rows past K would be the next
 * strip's weights, or past the panels' end).
 * Blocking: 2 x 2 tiles of sums (32 rows x 32 columns), 2 A and 2 B tiles: the eight. Strips of 64
 * columns outer, blocks of 32 rows inner: a strip's weights (K * 64 bytes) stay in L2 while the
 * rows pass over them. The accumulators start from init (loaded from 16 rows of it), so the stored
 * tiles are the results: whole 16 x 16 tiles go straight to c, ragged ones under masks; or, with a
 * sink (qr_iconv_u8s8_amx_sink), a block's 32 x 64 sums go to an 8 KB buffer and the sink (the
 * convolution's rows epilogue) turns them into y's bytes while they are in L1, where the whole
 * block's int32 accumulator went to memory and was read back. Tiles are configured at each call
 * and released at its end (ldtilecfg is a thread's state; nothing else in QRL uses tiles). Only
 * called after qr_amx_usable(). */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "igemm.h"

#define TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw")))

/* The four accumulators (tile 0 rows 0-15, tile 1 rows 16-31 of columns 0-15; tiles 2, 3 those of
 * columns 16-31) stored into a block of sums 64 int32 a row; `down` the second 16 rows, `two` the
 * second 16 columns. */
TARGET static inline void store_block_sums(int32_t *sb, int down, int two)
{
    _tile_stored(0, sb, 256);
    if (down)
        _tile_stored(1, sb + 16 * 64, 256);
    if (two) {
        _tile_stored(2, sb + 16, 256);
        if (down)
            _tile_stored(3, sb + 16 * 64 + 16, 256);
    }
}

void qr_iconv_u8s8_6x64_avx512vnni(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                   const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1,
                                   int64_t n);

enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

static int amx_usable;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* CPUID.7.0:EDX bits 24 (AMX-TILE) and 25 (AMX-INT8), the OS enabling the tile state in XCR0
 * (bits 17, 18), and Linux granting this process the tile data (the permission is the process's,
 * asked once); AVX-512BW for the copies and the stores. */
static void amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & 1u << 24) || !(d & 1u << 25))
        return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & 1u << 27)) /* OSXSAVE: xgetbv may run */
        return;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 3u << 17) != 3u << 17)
        return;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return;
    __builtin_cpu_init();
    amx_usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

int qr_amx_usable(void)
{
    pthread_once(&amx_once, amx_probe);
    return amx_usable;
}

/* The tile configuration both AMX kernels use (palette 1): eight tiles of 16 rows of 64 bytes. */
typedef struct tilecfg {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* A constant in memory, not a local filled before the load: GCC 12 does not see ldtilecfg read its
 * operand, and in a function of its own dropped the stores to a local (the tiles then fault). */
static const tilecfg tiles_16x64 __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

TARGET void qr_amx_tiles_16x64(void)
{
    _tile_loadconfig(&tiles_16x64);
}

/* The calling thread's A buffer, grown as needed: the thread's pointer (_Thread_local, where leak
 * checkers see it) and a key whose destructor frees it when the thread ends. */
static pthread_key_t buf_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;
static _Thread_local uint8_t *buf_at;
static _Thread_local size_t buf_cap;

static void make_key(void)
{
    key_ok = pthread_key_create(&buf_key, free) == 0;
}

static uint8_t *a_buffer(size_t bytes)
{
    if (buf_cap >= bytes)
        return buf_at;
    pthread_once(&key_once, make_key);
    if (!key_ok)
        return NULL;
    size_t cap = (bytes + 65535) & ~(size_t)65535;
    uint8_t *p = aligned_alloc(64, cap);
    if (!p)
        return NULL;
    free(buf_at);
    buf_at = p, buf_cap = cap;
    pthread_setspecific(buf_key, p);
    return p;
}


/* The 16 x 64-byte block whose rows are all init[j .. j + 16) (cols of them, 0 past): an
 * accumulator tile loaded from it starts at the bias, so the stored tiles are the sums + init
 * (wrapping, as adding after would) and no pass adds it. */
TARGET static void init_rows(int32_t *d, const int32_t *init, int64_t cols)
{
    __mmask16 k = cols >= 16 ? (__mmask16)0xffff : cols > 0 ? (__mmask16)((1u << cols) - 1) : 0;
    __m512i iv = _mm512_maskz_loadu_epi32(k, init);
    for (int r = 0; r < 16; r++)
        _mm512_store_si512(d + 16 * r, iv);
}

/* Rows r < rows and columns < cols (<= 16) of a 16 x 16 block of sums (rows 16 apart) into c. */
TARGET static void store_masked(int32_t *c, int64_t c_rs, const int32_t *sums, int64_t rows, int64_t cols)
{
    __mmask16 k = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    for (int64_t r = 0; r < rows; r++)
        _mm512_mask_storeu_epi32(c + r * c_rs, k, _mm512_load_si512(sums + 16 * r));
}

/* Whether rows i .. i + 16 of a are one run of a row stride (*d): a tile then loads them in place,
 * no copy. One tap, K a multiple of 64 (a tile row reads K bytes and no more). */
static int rows_strided(const uint8_t *const *a, int64_t i, int64_t *d)
{
    /* as addresses: the pointers may be into different objects (the padding row) */
    intptr_t p0 = (intptr_t)a[i], st = (intptr_t)a[i + 1] - p0;
    if (st <= 0)
        return 0;
    for (int r = 2; r < 16; r++)
        if ((intptr_t)a[i + r] - p0 != st * r)
            return 0;
    *d = st;
    return 1;
}

/* The sums of rows [0, m) and columns [j0, j1) (see qr_iconv_fn), then either into c (sink NULL)
 * or, a block of 32 rows x one strip of up to 64 columns at a time, to sink while they are in L1
 * (qr_iconv_sink). */
TARGET static void amx_run(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                           const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n,
                           qr_iconv_sink sink, void *ctx)
{
    if (j1 > n)
        j1 = n;
    if (m <= 0 || j1 <= j0)
        return;
    int64_t K = taps * k4, full = K / 64, kt = (K + 63) / 64, kp = kt * 64, mp = (m + 31) / 32 * 32;
    int64_t n16 = qr_igemm_n16(n);
    /* one tap of whole 64s: the tiles read the rows where they are when they are a run (1 x 1
     * convolutions' pixels), else from the copy */
    int direct = taps == 1 && K % 64 == 0 && m >= 16;
    uint8_t *buf = direct ? a_buffer(2048 + 4096 + 8192) : a_buffer((size_t)(mp * kp) + 2048 + 4096 + 8192);
    if (!buf) { /* no memory for the copy: the same sums by VNNI (no sink: the caller's epilogue runs) */
        qr_iconv_u8s8_6x64_avx512vnni(c, c_rs, a, taps, m, w, init, k4, j0, j1, n);
        if (sink)
            sink(ctx, c + j0, c_rs, 0, m, j0, j1 - j0);
        return;
    }
    uint8_t *rows = buf + 2048 + 4096 + 8192;
    if (direct) {
        rows = NULL;
    } else if (k4 % 64 == 0) { /* whole vectors, inline: a memcpy call per tap was most of layer1's time (K 576, n 64) */
        for (int64_t i = 0; i < m; i++) {
            uint8_t *d = rows + i * kp;
            for (int64_t t = 0; t < taps; t++, d += k4)
                for (int64_t o = 0; o < k4; o += 64)
                    _mm512_store_si512((void *)(d + o), _mm512_loadu_si512((const void *)(a[i * taps + t] + o)));
        }
    } else {
        /* a tap's k4 bytes as 64-byte moves, the last under a mask (no call a tap: 16- and 32-byte
         * taps of 3 x 3 layers were a memcpy each), then zeros to the row's end */
        int64_t kl = k4 % 64 ? k4 % 64 : 64, kb = k4 - kl;
        __mmask64 km = kl == 64 ? ~(__mmask64)0 : (((__mmask64)1 << kl) - 1);
        for (int64_t i = 0; i < m; i++) {
            uint8_t *d = rows + i * kp;
            for (int64_t t = 0; t < taps; t++, d += k4) {
                const uint8_t *src = a[i * taps + t];
                for (int64_t o = 0; o < kb; o += 64)
                    _mm512_storeu_si512((void *)(d + o), _mm512_loadu_si512((const void *)(src + o)));
                _mm512_mask_storeu_epi8(d + kb, km, _mm512_maskz_loadu_epi8(km, src + kb));
            }
            for (int64_t o = K; o < kp; o += 64) /* the row's zeros past K, to its 64s' end */
                _mm512_mask_storeu_epi8(rows + i * kp + o, kp - o >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (kp - o)) - 1),
                                        _mm512_setzero_si512());
        }
    }
    if (rows)
        memset(rows + m * kp, 0, (size_t)((mp - m) * kp));
    int8_t *tail = (int8_t *)buf;              /* 2 x 1 KB: the ragged last 64 of K of a column pair */
    int32_t *irows = (int32_t *)(buf + 2048);  /* 4 x 1 KB: init's rows, a strip's four 16 columns */
    int32_t *sums = (int32_t *)(buf + 6144);   /* 32 x 64: a block's sums for the sink, or a ragged tile's */
    /* direct: two 16-row tiles' 64 bytes of rows that are not a run */
    _Alignas(64) uint8_t last[32 * 64];

    qr_amx_tiles_16x64();
    for (int64_t s0 = j0; s0 < j1; s0 += 64) {
        int64_t se = s0 + 64 < j1 ? s0 + 64 : j1; /* the strip's columns [s0, se) */
        for (int q = 0; q < 4; q++)
            init_rows(irows + 256 * q, init + s0 + 16 * q, se - s0 - 16 * q);
        for (int64_t i = 0; i < m; i += 32) {
            int down = i + 16 < m; /* a second row tile with rows to store */
            int64_t r0 = m - i < 16 ? m - i : 16, r1 = m - i - 16 < 16 ? m - i - 16 : 16;
            const uint8_t *a0, *a1;
            int64_t s_a0, s_a1;
            if (rows) {
                a0 = rows + i * kp, a1 = a0 + 16 * kp, s_a0 = s_a1 = kp;
            } else {
                /* rows in place where 16 of them are a run, else copied (K bytes each) */
                const uint8_t *src[2];
                int64_t st[2];
                for (int h = 0; h < 2; h++) {
                    int64_t ih = i + 16 * h, nr = h ? r1 : r0;
                    if (h && !down) {
                        src[h] = last, st[h] = 64; /* not read */
                        continue;
                    }
                    if (nr == 16 && rows_strided(a, ih, &st[h])) {
                        src[h] = a[ih];
                        continue;
                    }
                    /* ragged or not a run: gathered 64 bytes a step (below) */
                    src[h] = NULL, st[h] = 0;
                }
                a0 = src[0], a1 = src[1], s_a0 = st[0], s_a1 = st[1];
            }
            for (int64_t j = s0; j < se; j += 32) {
                int two = j + 16 < se; /* a second column tile with columns to store */
                int64_t step;
                const int8_t *wj = qr_iconv_col(w, K, n16, j, &step);
                if (full < kt) {
                    memset(tail, 0, 2048);
                    for (int64_t q = full * 16; q < K / 4; q++) {
                        memcpy(tail + (q - full * 16) * 64, wj + q * step, 64);
                        if (two)
                            memcpy(tail + 1024 + (q - full * 16) * 64, wj + 64 + q * step, 64);
                    }
                }
                const int32_t *iv = irows + 256 * ((j - s0) / 16);
                _tile_loadd(0, iv, 64);
                _tile_loadd(1, iv, 64);
                _tile_loadd(2, iv + 256, 64);
                _tile_loadd(3, iv + 256, 64);
                for (int64_t q = 0; q < kt; q++) {
                    const int8_t *b0 = q < full ? wj + q * 16 * step : tail;
                    int64_t bs = q < full ? step : 64;
                    const uint8_t *x0 = a0, *x1 = a1;
                    int64_t sx0 = s_a0, sx1 = s_a1;
                    if (!rows && !a0) { /* gather 16 rows' q-th 64 bytes */
                        for (int r = 0; r < 16; r++)
                            _mm512_store_si512((void *)(last + 64 * r),
                                               r < r0 ? _mm512_loadu_si512((const void *)(a[i + r] + q * 64))
                                                      : _mm512_setzero_si512());
                        x0 = last, sx0 = 64;
                    } else if (a0)
                        x0 = a0 + q * 64;
                    if (down) {
                        if (!rows && !a1) {
                            for (int r = 0; r < 16; r++)
                                _mm512_store_si512((void *)(last + 1024 + 64 * r),
                                                   r < r1 ? _mm512_loadu_si512((const void *)(a[i + 16 + r] + q * 64))
                                                          : _mm512_setzero_si512());
                            x1 = last + 1024, sx1 = 64;
                        } else
                            x1 = a1 + q * 64;
                    }
                    _tile_loadd(4, x0, sx0);
                    _tile_loadd(6, b0, bs);
                    _tile_dpbusd(0, 4, 6);
                    if (down) {
                        _tile_loadd(5, x1, sx1);
                        _tile_dpbusd(1, 5, 6);
                    }
                    if (two) {
                        _tile_loadd(7, q < full ? b0 + 64 : tail + 1024, bs);
                        _tile_dpbusd(2, 4, 7);
                        if (down)
                            _tile_dpbusd(3, 5, 7);
                    }
                }
                int64_t c0 = se - j < 16 ? se - j : 16, c1 = se - j - 16 < 16 ? se - j - 16 : 16;
                if (sink) { /* the block's sums, 64 columns a row, for the sink */
                    int32_t *sb = sums + (j - s0);
                    store_block_sums(sb, down, two);
                    continue;
                }
                /* into c: whole tiles straight, ragged ones under masks */
                int32_t *cij = c + i * c_rs + j;
                for (int t = 0; t < 4; t++) {
                    int64_t nr = t & 1 ? r1 : r0, nc = t & 2 ? c1 : c0;
                    if ((t & 1 && !down) || (t & 2 && !two))
                        continue;
                    int32_t *ct = cij + (t & 1 ? 16 * c_rs : 0) + (t & 2 ? 16 : 0);
                    if (nr == 16 && nc == 16) {
                        switch (t) {
                        case 0: _tile_stored(0, ct, c_rs * 4); break;
                        case 1: _tile_stored(1, ct, c_rs * 4); break;
                        case 2: _tile_stored(2, ct, c_rs * 4); break;
                        default: _tile_stored(3, ct, c_rs * 4); break;
                        }
                        continue;
                    }
                    switch (t) {
                    case 0: _tile_stored(0, sums, 64); break;
                    case 1: _tile_stored(1, sums, 64); break;
                    case 2: _tile_stored(2, sums, 64); break;
                    default: _tile_stored(3, sums, 64); break;
                    }
                    store_masked(ct, c_rs, sums, nr, nc);
                }
            }
            if (sink)
                sink(ctx, sums, 64, i, m - i < 32 ? m - i : 32, s0, se - s0);
        }
    }
    _tile_release();
}

TARGET void qr_iconv_u8s8_amx(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                              const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n)
{
    amx_run(c, c_rs, a, taps, m, w, init, k4, j0, j1, n, NULL, NULL);
}

void qr_iconv_u8s8_amx_sink(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                            const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n,
                            qr_iconv_sink sink, void *ctx)
{
    amx_run(c, c_rs, a, taps, m, w, init, k4, j0, j1, n, sink, ctx);
}

/* The direct kernel's tile shapes (qr_iconv_u8s8_amx_direct): sums 0-3 of 16 x 64 bytes, A tiles 4
 * and 5 of 16 rows of a piece's bytes, B tiles 6 and 7 of piece / 4 rows of 64 bytes. Constants, as
 * tiles_16x64 (GCC 12 and ldtilecfg's operand). */
#define DIRECT_CFG(P)                                                                                                 \
    {                                                                                                                  \
        .palette = 1, .colsb = {64, 64, 64, 64, P, P, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, P / 4, P / 4},         \
    }
static const tilecfg tiles_direct[3] __attribute__((aligned(64))) = {DIRECT_CFG(32), DIRECT_CFG(48), DIRECT_CFG(64)};

int64_t qr_iconv_amx_piece(int64_t kw_bytes)
{
    return kw_bytes % 64 == 0 ? 64 : kw_bytes % 48 == 0 ? 48 : kw_bytes % 32 == 0 ? 32 : 0;
}

int64_t qr_iconv_amx_slack(int64_t k4, int64_t KW)
{
    return (32 + KW) * k4 + 64;
}

/* The runs of real pixels among flat pixels [f, fe) (sums rows from f, 64 a row), to the sink or c */
static void direct_emit(const qr_amx_direct *d, const int32_t *sums, int64_t f, int64_t fe, int64_t r0, int64_t s0,
                        int64_t cols, int32_t *c, int64_t c_rs, qr_iconv_sink sink, void *ctx)
{
    int64_t img_px = d->Hp * d->Wp;
    for (int64_t g = f; g < fe;) {
        int64_t img = g / img_px, rem = g - img * img_px, oy = rem / d->Wp, ox = rem - oy * d->Wp;
        if (oy >= d->OH) { /* the image's last KH - 1 padded rows */
            g = (img + 1) * img_px;
            continue;
        }
        if (ox >= d->OW) { /* a row's last KW - 1 padded pixels */
            g += d->Wp - ox;
            continue;
        }
        int64_t run = d->OW - ox < fe - g ? d->OW - ox : fe - g, i0 = (img * d->OH + oy) * d->OW + ox - r0;
        const int32_t *src = sums + (g - f) * 64;
        if (sink)
            sink(ctx, src, 64, i0, run, s0, cols);
        else
            for (int64_t r = 0; r < run; r++)
                memcpy(c + (i0 + r) * c_rs + s0, src + r * 64, (size_t)cols * sizeof *c);
        g += run;
    }
}

TARGET void qr_iconv_u8s8_amx_direct(const qr_amx_direct *d, int64_t r0, int64_t rows, const int8_t *w,
                                     const int32_t *init, int64_t j0, int64_t j1, int64_t n, int32_t *c, int64_t c_rs,
                                     qr_iconv_sink sink, void *ctx)
{
    if (j1 > n)
        j1 = n;
    if (rows <= 0 || j1 <= j0)
        return;
    int64_t OH = d->OH, OW = d->OW, Wp = d->Wp, img_px = d->Hp * Wp, k4 = d->k4, P = d->piece;
    int64_t KWB = d->KW * k4, K = d->KH * KWB, pieces = KWB / P, n16 = qr_igemm_n16(n);
    /* the flat pixels of the first and past the last real one */
    int64_t l = r0 + rows - 1, i0 = r0 / (OH * OW), i1 = l / (OH * OW);
    int64_t F0 = i0 * img_px + (r0 % (OH * OW)) / OW * Wp + r0 % OW;
    int64_t F1 = i1 * img_px + (l % (OH * OW)) / OW * Wp + l % OW + 1;
    _Alignas(64) int32_t irows[4 * 256];   /* init's rows, a strip's four 16 columns */
    _Alignas(64) int32_t sums[2][32 * 64]; /* 32 flat pixels' sums of a strip: this block's, the last one's */
    _tile_loadconfig(&tiles_direct[P == 64 ? 2 : P == 48 ? 1 : 0]);
    for (int64_t s0 = j0; s0 < j1; s0 += 64) {
        int64_t se = s0 + 64 < j1 ? s0 + 64 : j1;
        for (int q = 0; q < 4; q++)
            init_rows(irows + 256 * q, init + s0 + 16 * q, se - s0 - 16 * q);
        /* the last block's sums go to the sink while the tiles make this block's: emitted after its
         * tile products are issued and before their stores, the epilogue's vector work runs beside
         * them, where emitting each block after its own stores left the tiles idle meanwhile (the
         * stores wait for the products, the epilogue for the stores, the next products for both) */
        int64_t pend = -1; /* the block whose sums wait in sums[cur ^ 1] */
        int cur = 0;
        for (int64_t f = F0; f < F1; f += 32) {
            int down = f + 16 < F1;
            for (int64_t j = s0; j < se; j += 32) {
                int two = j + 16 < se;
                int64_t step;
                const int8_t *wj = qr_iconv_col(w, K, n16, j, &step);
                const int32_t *iv = irows + 256 * ((j - s0) / 16);
                _tile_loadd(0, iv, 64);
                _tile_loadd(1, iv, 64);
                _tile_loadd(2, iv + 256, 64);
                _tile_loadd(3, iv + 256, 64);
                for (int64_t ky = 0; ky < d->KH; ky++)
                    for (int64_t q = 0; q < pieces; q++) {
                        const uint8_t *x0 = d->xp + (f + ky * Wp) * k4 + q * P;
                        const int8_t *b0 = wj + (ky * KWB + q * P) / 4 * step;
                        _tile_loadd(4, x0, k4);
                        _tile_loadd(6, b0, step);
                        _tile_dpbusd(0, 4, 6);
                        if (down) {
                            _tile_loadd(5, x0 + 16 * k4, k4);
                            _tile_dpbusd(1, 5, 6);
                        }
                        if (two) {
                            _tile_loadd(7, b0 + 64, step);
                            _tile_dpbusd(2, 4, 7);
                            if (down)
                                _tile_dpbusd(3, 5, 7);
                        }
                    }
                if (pend >= 0) {
                    direct_emit(d, sums[cur ^ 1], pend, pend + 32 < F1 ? pend + 32 : F1, r0, s0, se - s0, c, c_rs,
                                sink, ctx);
                    pend = -1;
                }
                store_block_sums(sums[cur] + (j - s0), down, two);
            }
            pend = f;
            cur ^= 1;
        }
        if (pend >= 0)
            direct_emit(d, sums[cur ^ 1], pend, pend + 32 < F1 ? pend + 32 : F1, r0, s0, se - s0, c, c_rs, sink, ctx);
    }
    _tile_release();
}
