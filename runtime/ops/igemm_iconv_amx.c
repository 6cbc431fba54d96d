/* The NHWC indirect GEMM (qr_iconv_fn, igemm.h) on AMX-INT8: tdpbusd multiplies a 16 x 64 tile
 * of u8 activations by a 64 x 16 tile of s8 weights into 16 x 16 int32 sums (16384 MACs an
 * instruction; the wrapping sums QRL's contract asks for, as vpdpbusd's).
 *
 * A: the block's rows are copied from their row pointers into one buffer, [rows up to 32s][K up
 * to 64s] with K = taps * k4, zero past m and K (so a tile reads whole rows and the padding adds
 * nothing); each row's taps are the row pointers' k4 bytes one after another, the order of the
 * weights' K. One copy per call serves all its column tiles (ResNet-18's layers have 64 to 512).
 * B: the panels as they are (qr_iconv_col): in a strip, one k group of 16 columns is 64 bytes and
 * the next group `step` bytes on, which is a tile's rows and stride, so no weights are repacked. A
 * ragged last 64 of K is copied into a zeroed 1 KB tile (its rows past K would be the next
 * strip's weights, or past the panels' end).
 * Blocking: 2 x 2 tiles of sums (32 rows x 32 columns), 2 A and 2 B tiles: the eight tiles.
 * Column pairs outer, row pairs inner: a pair's weights (K * 32 bytes) stay in L2 while the rows
 * pass over them. The sums go through a 1 KB buffer to c, init added (wrapping), ragged rows and
 * columns under masks. Tiles are configured at each call and released at its end (ldtilecfg is a
 * thread's state; nothing else in QRL uses tiles). Only called after qr_amx_usable(). */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "igemm.h"

#define TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw")))

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

typedef struct tilecfg {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* Rows i < rows of c's 16 columns from j (cols of them stored) = the tile's sums + init. */
TARGET static void store_tile(int32_t *c, int64_t c_rs, const int32_t *sums, const int32_t *init, int64_t rows,
                              int64_t cols)
{
    __mmask16 k = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    __m512i iv = _mm512_maskz_loadu_epi32(k, init);
    for (int64_t r = 0; r < rows; r++)
        _mm512_mask_storeu_epi32(c + r * c_rs, k, _mm512_add_epi32(_mm512_load_si512(sums + 16 * r), iv));
}

TARGET void qr_iconv_u8s8_amx(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                              const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n)
{
    if (j1 > n)
        j1 = n;
    if (m <= 0 || j1 <= j0)
        return;
    int64_t K = taps * k4, full = K / 64, kt = (K + 63) / 64, kp = kt * 64, mp = (m + 31) / 32 * 32;
    int64_t n16 = qr_igemm_n16(n);
    uint8_t *buf = a_buffer((size_t)(mp * kp) + 2048);
    if (!buf) { /* no memory for the copy: the same sums by VNNI */
        qr_iconv_u8s8_6x64_avx512vnni(c, c_rs, a, taps, m, w, init, k4, j0, j1, n);
        return;
    }
    if (k4 % 64 == 0) { /* whole vectors, inline: a memcpy call per tap was most of layer1's time (K 576, n 64) */
        for (int64_t i = 0; i < m; i++) {
            uint8_t *d = buf + i * kp;
            for (int64_t t = 0; t < taps; t++, d += k4)
                for (int64_t o = 0; o < k4; o += 64)
                    _mm512_store_si512((void *)(d + o), _mm512_loadu_si512((const void *)(a[i * taps + t] + o)));
        }
    } else {
        for (int64_t i = 0; i < m; i++) {
            uint8_t *d = buf + i * kp;
            for (int64_t t = 0; t < taps; t++)
                memcpy(d + t * k4, a[i * taps + t], (size_t)k4);
            memset(d + K, 0, (size_t)(kp - K));
        }
    }
    memset(buf + m * kp, 0, (size_t)((mp - m) * kp));
    int8_t *tail = (int8_t *)(buf + mp * kp); /* 2 x 1 KB: the ragged last 64 of K of a column pair */

    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    int32_t sums[256] __attribute__((aligned(64)));
    for (int64_t j = j0; j < j1; j += 32) {
        int two = j + 16 < j1; /* a second column tile with columns to store */
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
        for (int64_t i = 0; i < m; i += 32) {
            const uint8_t *ai = buf + i * kp;
            int down = i + 16 < m; /* a second row tile with rows to store */
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t q = 0; q < kt; q++) {
                const int8_t *b0 = q < full ? wj + q * 16 * step : tail;
                int64_t bs = q < full ? step : 64;
                _tile_loadd(4, ai + q * 64, kp);
                _tile_loadd(6, b0, bs);
                _tile_dpbusd(0, 4, 6);
                if (down) {
                    _tile_loadd(5, ai + 16 * kp + q * 64, kp);
                    _tile_dpbusd(1, 5, 6);
                }
                if (two) {
                    _tile_loadd(7, q < full ? b0 + 64 : tail + 1024, bs);
                    _tile_dpbusd(2, 4, 7);
                    if (down)
                        _tile_dpbusd(3, 5, 7);
                }
            }
            int64_t r0 = m - i < 16 ? m - i : 16, r1 = m - i - 16 < 16 ? m - i - 16 : 16;
            int64_t c0 = j1 - j < 16 ? j1 - j : 16, c1 = j1 - j - 16 < 16 ? j1 - j - 16 : 16;
            _tile_stored(0, sums, 64);
            store_tile(c + i * c_rs + j, c_rs, sums, init + j, r0, c0);
            if (down) {
                _tile_stored(1, sums, 64);
                store_tile(c + (i + 16) * c_rs + j, c_rs, sums, init + j, r1, c0);
            }
            if (two) {
                _tile_stored(2, sums, 64);
                store_tile(c + i * c_rs + j + 16, c_rs, sums, init + j + 16, r0, c1);
                if (down) {
                    _tile_stored(3, sums, 64);
                    store_tile(c + (i + 16) * c_rs + j + 16, c_rs, sums, init + j + 16, r1, c1);
                }
            }
        }
    }
    _tile_release();
}
