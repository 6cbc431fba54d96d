/* How fast AMX-INT8 (tdpbusd) would run MobileNetV2's 1 x 1 layers at batch 1, against the
 * VNNI kernels bench/iconv_ep.c times: a probe for docs/runtime.md "MobileNetV2 at batch 1 on
 * Intel (stop 46)", not a kernel of the runtime. u8 rows (K bytes a pixel, K padded to 64 with
 * zeros) times i8 weights packed once as tdpbusd's B tiles (16 rows of 4 k's x 16 channels),
 * 32 pixels x 32 channels a block (4 accumulator tiles, 2 A and 2 B tiles), the pixels padded to
 * 32 (extra rows computed, as a cost); then a float epilogue like the runtime's (the sum times a
 * per-channel multiplier plus bias, rounded, plus the zero point, clamped to [zero, 255]: Relu)
 * into u8. The sums are checked against a scalar loop. One thread; microseconds per layer, the
 * best of 15 rounds of 5 calls. Not part of `make bench`. Build and run (a CPU with amx_int8,
 * Linux 5.16 or later for the permission):
 *   cc -O2 -mamx-tile -mamx-int8 -mavx512f -mavx512bw bench/amx_1x1.c -o build/amx_1x1 &&
 *   bash tools/freeze.sh build/amx_1x1 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

typedef struct {
    int K, N, M, Kp, Mp, Np; /* Np: N padded to 32 (extra channels computed, as a cost) */
    uint8_t *a;    /* [Mp][Kp] */
    int8_t *w;     /* [K][N], for the reference */
    int8_t *b;     /* packed: [N / 16][Kp / 64][16 rows][64 bytes] */
    float *mul, *bias;
    int32_t *acc;  /* one block's sums, [32][32] */
    uint8_t *out;  /* [M][N] */
} layer;

static void make(layer *l, int K, int N, int M)
{
    l->K = K, l->N = N, l->M = M, l->Kp = (K + 63) / 64 * 64, l->Mp = (M + 31) / 32 * 32, l->Np = (N + 31) / 32 * 32;
    l->a = aligned_alloc(64, (size_t)l->Mp * l->Kp);
    memset(l->a, 0, (size_t)l->Mp * l->Kp);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            l->a[(size_t)m * l->Kp + k] = (uint8_t)next();
    l->w = malloc((size_t)K * N);
    for (int i = 0; i < K * N; i++)
        l->w[i] = (int8_t)next();
    l->b = aligned_alloc(64, (size_t)l->Np * l->Kp);
    memset(l->b, 0, (size_t)l->Np * l->Kp);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            int nb = n / 16, kb = k / 64, row = (k % 64) / 4;
            size_t at = (((size_t)nb * (l->Kp / 64) + kb) * 16 + row) * 64 + (n % 16) * 4 + k % 4;
            l->b[at] = l->w[(size_t)k * N + n];
        }
    l->mul = aligned_alloc(64, sizeof(float) * (size_t)l->Np);
    l->bias = aligned_alloc(64, sizeof(float) * (size_t)l->Np);
    for (int n = 0; n < l->Np; n++)
        l->mul[n] = 1e-4f + (float)(next() % 1000) * 1e-5f, l->bias[n] = (float)((int)(next() % 2000) - 1000);
    l->acc = aligned_alloc(64, sizeof(int32_t) * 32 * 32);
    l->out = malloc((size_t)l->Mp * l->Np);
}

static void configure(void)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++)
        c.rows[t] = 16, c.colsb[t] = 64;
    _tile_loadconfig(&c);
}

/* Rows [m, m + 32) x channels [n, n + 32): the sums into l->acc, then the epilogue. */
static void block(layer *l, int m, int n)
{
    int ks = l->Kp / 64;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const uint8_t *a = l->a + (size_t)m * l->Kp;
    const int8_t *b0 = l->b + (size_t)(n / 16) * ks * 1024, *b1 = b0 + (size_t)ks * 1024;
    for (int k = 0; k < ks; k++) {
        _tile_loadd(4, a + k * 64, l->Kp);
        _tile_loadd(5, a + 16 * l->Kp + k * 64, l->Kp);
        _tile_loadd(6, b0 + k * 1024, 64);
        _tile_loadd(7, b1 + k * 1024, 64);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, l->acc, 128);
    _tile_stored(1, l->acc + 16, 128);
    _tile_stored(2, l->acc + 16 * 32, 128);
    _tile_stored(3, l->acc + 16 * 32 + 16, 128);
    int rows = l->M - m < 32 ? l->M - m : 32;
    for (int h = 0; h < 2; h++) {
        __m512 mu = _mm512_loadu_ps(l->mul + n + 16 * h), bi = _mm512_loadu_ps(l->bias + n + 16 * h);
        for (int r = 0; r < rows; r++) {
            __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(l->acc + r * 32 + 16 * h));
            __m512i q = _mm512_cvtps_epi32(_mm512_fmadd_ps(s, mu, bi));
            q = _mm512_add_epi32(q, _mm512_set1_epi32(3));
            q = _mm512_max_epi32(q, _mm512_set1_epi32(3));
            _mm_storeu_si128((__m128i *)(l->out + (size_t)(m + r) * l->Np + n + 16 * h), _mm512_cvtusepi32_epi8(q));
        }
    }
}

static void run(layer *l)
{
    for (int n = 0; n < l->N; n += 32)
        for (int m = 0; m < l->M; m += 32)
            block(l, m, n);
}

/* The sums of the first block rows against a scalar loop (the epilogue's input). */
static int check(layer *l)
{
    for (int n = 0; n < l->N; n += 32)
        for (int m = 0; m < l->M; m += 32) {
            block(l, m, n);
            for (int r = 0; r < 32 && m + r < l->M; r++)
                for (int c = 0; c < 32 && n + c < l->N; c++) {
                    int32_t s = 0;
                    for (int k = 0; k < l->K; k++)
                        s += (int32_t)l->a[(size_t)(m + r) * l->Kp + k] * l->w[(size_t)k * l->N + n + c];
                    if (s != l->acc[r * 32 + c])
                        return 0;
                }
        }
    return 1;
}

int main(void)
{
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
        perror("arch_prctl(ARCH_REQ_XCOMP_PERM)");
        return 1;
    }
    configure();
    /* K, N, pixels: MobileNetV2's 1 x 1 layers (expansions and projections) */
    static const int shapes[][3] = {{16, 96, 12544}, {96, 24, 3136},  {24, 144, 3136}, {144, 24, 3136},
                                    {144, 32, 784},  {32, 192, 784},  {192, 32, 784},  {192, 64, 196},
                                    {64, 384, 196},  {384, 64, 196},  {384, 96, 196},  {96, 576, 196},
                                    {576, 96, 196},  {576, 160, 49},  {160, 960, 49},  {960, 160, 49},
                                    {960, 320, 49},  {320, 1280, 49}};
    printf("%6s %6s %7s %9s %8s %s\n", "K", "N", "pixels", "us", "GMAC/s", "sums");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        layer l;
        make(&l, shapes[i][0], shapes[i][1], shapes[i][2]);
        int ok = check(&l);
        double best = 1e30;
        for (int round = 0; round < 15; round++) {
            double t0 = now_us();
            for (int c = 0; c < 5; c++)
                run(&l);
            double t = (now_us() - t0) / 5;
            best = t < best ? t : best;
        }
        double macs = (double)l.K * l.N * l.M;
        printf("%6d %6d %7d %9.1f %8.1f %s\n", l.K, l.N, l.M, best, macs / best / 1e3, ok ? "exact" : "WRONG");
    }
    _tile_release();
    return 0;
}
