/* u8 x s8 integer GEMM: the portable reference and the per-ISA table; see igemm.h. */
#include "igemm.h"
#include "options.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qr_igemm_u8s8_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                   int64_t m1, const uint8_t *b, int64_t k4, int64_t n);
void qr_igemm_u8s8_4x16_avxvnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0,
                                int64_t m1, const uint8_t *b, int64_t k4, int64_t n);
void qr_igemm_u8s8_6x8_avx2(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                            const uint8_t *b, int64_t k4, int64_t n);
void qr_igemm_i16s8_6x8_avx2(int32_t *c, int64_t c_rs, const int16_t *a, const int32_t *init, int64_t m0,
                             int64_t m1, const uint8_t *b, int64_t k4, int64_t n);
void qr_iconv_u8s8_6x64_avx512vnni(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                   const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1,
                                   int64_t n);
void qr_iconv_u8s8_4x16_avxvnni(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);
void qr_iconv_u8s8_6x8_avx2(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                            const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);
void qr_iconv_i16s8_6x8_avx2(int32_t *c, int64_t c_rs, const int16_t *const *a, int64_t taps, int64_t m,
                             const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n);

void qr_igemm_u8s8_rc_8x32_avx512vnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init,
                                      const int32_t *cinit, const int32_t *rz, const int32_t *csum, int64_t m0,
                                      int64_t m1, const uint8_t *b, int64_t k4, int64_t n, int64_t pitch);
void qr_igemm_u8s8_rc_amx(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                          const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                          int64_t k4, int64_t n, int64_t pitch);
void qr_igemm_pack_b_avx512vnni(uint8_t *dst, const uint8_t *src, int64_t src_rs, int64_t k, int64_t n, uint8_t flip,
                                int32_t *colsum, int64_t pitch);
void qr_igemm_pack_a_avx512vnni(int8_t *dst, const uint8_t *src, int64_t src_rs, int64_t rows, int64_t k,
                                uint8_t flip, int32_t *rowsum);

void qr_igemm_u8s8_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, int64_t m0, int64_t m1,
                       const uint8_t *b, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n);
    for (int64_t m = m0; m < m1; m++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t s = (uint32_t)init[m];
            for (int64_t q = 0; q < k4; q++)
                s += (uint32_t)((int32_t)a[m * k4 + q] * (int32_t)b[((q >> 2) * n16 + j) * 4 + (q & 3)]);
            c[m * c_rs + j] = (int32_t)s;
        }
}

/* The kernels without column starts, then the columns' and the per-row products' added (wrapping). */
static void add_cinit(int32_t *c, int64_t c_rs, const int32_t *cinit, const int32_t *rz, const int32_t *csum,
                      int64_t m0, int64_t m1, int64_t n)
{
    for (int64_t m = m0; cinit && m < m1; m++)
        for (int64_t j = 0; j < n; j++)
            c[m * c_rs + j] = (int32_t)((uint32_t)c[m * c_rs + j] + (uint32_t)cinit[j]);
    for (int64_t m = m0; rz && m < m1; m++)
        for (int64_t j = 0; j < n; j++)
            c[m * c_rs + j] = (int32_t)((uint32_t)c[m * c_rs + j] - (uint32_t)rz[m] * (uint32_t)csum[j]);
}

void qr_igemm_u8s8_rc_ref(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                          const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b,
                          int64_t k4, int64_t n, int64_t pitch)
{
    for (int64_t m = m0; m < m1; m++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t s = (uint32_t)init[m];
            for (int64_t q = 0; q < k4; q++)
                s += (uint32_t)((int32_t)a[m * k4 + q] * (int32_t)b[((q >> 2) * pitch + j) * 4 + (q & 3)]);
            c[m * c_rs + j] = (int32_t)s;
        }
    add_cinit(c, c_rs, cinit, rz, csum, m0, m1, n);
}

static void rc_avxvnni(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                       const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b, int64_t k4,
                       int64_t n, int64_t pitch)
{
    if (pitch != qr_igemm_n16(n)) { /* its kernel reads N16 columns a group */
        qr_igemm_u8s8_rc_ref(c, c_rs, a, init, cinit, rz, csum, m0, m1, b, k4, n, pitch);
        return;
    }
    qr_igemm_u8s8_4x16_avxvnni(c, c_rs, a, init, m0, m1, b, k4, n);
    add_cinit(c, c_rs, cinit, rz, csum, m0, m1, n);
}

static void rc_avx2(int32_t *c, int64_t c_rs, const int8_t *a, const int32_t *init, const int32_t *cinit,
                    const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b, int64_t k4,
                    int64_t n, int64_t pitch)
{
    if (pitch != qr_igemm_n16(n)) {
        qr_igemm_u8s8_rc_ref(c, c_rs, a, init, cinit, rz, csum, m0, m1, b, k4, n, pitch);
        return;
    }
    qr_igemm_u8s8_6x8_avx2(c, c_rs, a, init, m0, m1, b, k4, n);
    add_cinit(c, c_rs, cinit, rz, csum, m0, m1, n);
}

static void rc16_avx2(int32_t *c, int64_t c_rs, const int16_t *a, const int32_t *init, const int32_t *cinit,
                      const int32_t *rz, const int32_t *csum, int64_t m0, int64_t m1, const uint8_t *b, int64_t k4,
                      int64_t n, int64_t pitch)
{
    assert(pitch == qr_igemm_n16(n)); /* B packed as qr_igemm_rc_pitch has it for rc_avx2 */
    (void)pitch;
    qr_igemm_i16s8_6x8_avx2(c, c_rs, a, init, m0, m1, b, k4, n);
    add_cinit(c, c_rs, cinit, rz, csum, m0, m1, n);
}

qr_igemm_rc16_fn qr_igemm_rc_wide_twin(qr_igemm_rc_fn fn)
{
    return fn == rc_avx2 && !qr_options_get()->no_wide16 ? rc16_avx2 : NULL;
}

int64_t qr_igemm_rc_pitch(qr_igemm_rc_fn fn, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n);
    /* the AMX kernel's the same: a constant B packed once serves both (the choice goes by rows) */
    return (fn == qr_igemm_u8s8_rc_8x32_avx512vnni || fn == qr_igemm_u8s8_rc_amx) && n16 % 256 == 0 && k4 >= 64
               ? n16 + 16
               : n16;
}

qr_igemm_rc_fn qr_igemm_rc_panels_for(qr_igemm_rc_fn fn)
{
    return fn == qr_igemm_u8s8_rc_8x32_avx512vnni ? qr_igemm_u8s8_rc_panels_avx512vnni : NULL;
}

void qr_igemm_rc_panels(uint8_t *dst, const uint8_t *src, int64_t k4, int64_t n, int64_t pitch)
{
    int64_t kq = k4 / 4, n16 = qr_igemm_n16(n);
    for (int64_t s = 0; s * 32 < n16; s++)
        for (int64_t q = 0; q < kq; q++) {
            uint8_t *d = dst + (s * kq + q) * 128;
            size_t w = (size_t)(n16 - 32 * s >= 32 ? 32 : n16 - 32 * s) * 4; /* the last panel may be 16 wide */
            memcpy(d, src + (q * pitch + 32 * s) * 4, w);
            memset(d + w, 0, 128 - w);
        }
}

void qr_igemm_pack_b_ref(uint8_t *dst, const uint8_t *src, int64_t src_rs, int64_t k, int64_t n, uint8_t flip,
                         int32_t *colsum, int64_t pitch)
{
    int64_t k4 = qr_igemm_k4(k), n16 = qr_igemm_n16(n);
    for (int64_t q = 0; q < k4; q++)
        for (int64_t j = 0; j < n16; j++)
            dst[((q >> 2) * pitch + j) * 4 + (q & 3)] = q < k && j < n ? src[q * src_rs + j] ^ flip : 0;
    for (int64_t j = 0; colsum && j < n; j++) {
        uint32_t s = 0;
        for (int64_t q = 0; q < k; q++)
            s += (uint8_t)(src[q * src_rs + j] ^ flip);
        colsum[j] = (int32_t)s;
    }
}

void qr_igemm_pack_a_ref(int8_t *dst, const uint8_t *src, int64_t src_rs, int64_t rows, int64_t k, uint8_t flip,
                         int32_t *rowsum)
{
    int64_t k4 = qr_igemm_k4(k);
    for (int64_t i = 0; i < rows; i++) {
        uint32_t s = 0;
        for (int64_t q = 0; q < k4; q++) {
            int8_t v = q < k ? (int8_t)(src[i * src_rs + q] ^ flip) : 0;
            if (dst)
                dst[i * k4 + q] = v;
            s += (uint32_t)(int32_t)v;
        }
        if (rowsum)
            rowsum[i] = (int32_t)s;
    }
}

/* The definition, one sum at a time. */
void qr_iconv_u8s8_ref(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m, const int8_t *w,
                       const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), step;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = j0; j < j1 && j < n; j++) {
            uint32_t s = (uint32_t)init[j];
            const int8_t *wj = qr_iconv_col(w, taps * k4, n16, j, &step);
            for (int64_t t = 0; t < taps; t++)
                for (int64_t k = 0; k < k4; k++) {
                    int64_t q = t * k4 + k;
                    s += (uint32_t)((int32_t)a[i * taps + t][k] * (int32_t)wj[(q >> 2) * step + (q & 3)]);
                }
            c[i * c_rs + j] = (int32_t)s;
        }
}

/* Plain C for CPUs without the ISAs: a tile of 4 rows x 16 columns in uint32 sums (wrapping by
 * definition), each group of four k read once for the tile. */
static void iconv_u8s8_portable(int32_t *c, int64_t c_rs, const uint8_t *const *a, int64_t taps, int64_t m,
                                const int8_t *w, const int32_t *init, int64_t k4, int64_t j0, int64_t j1, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), step;
    if (j1 > n)
        j1 = n;
    for (int64_t j = j0; j < j1; j += 16) {
        int cols = j1 - j < 16 ? (int)(j1 - j) : 16;
        const int8_t *wj = qr_iconv_col(w, taps * k4, n16, j, &step);
        for (int64_t i = 0; i < m; i += 4) {
            int rows = m - i < 4 ? (int)(m - i) : 4;
            uint32_t s[4][16] = {{0}};
            for (int r = 0; r < rows; r++)
                for (int v = 0; v < cols; v++)
                    s[r][v] = (uint32_t)init[j + v];
            for (int64_t t = 0; t < taps; t++) {
                const int8_t *wt = wj + t * (k4 / 4) * step;
                for (int r = 0; r < rows; r++) {
                    const uint8_t *ar = a[(i + r) * taps + t];
                    for (int64_t q = 0; q < k4 / 4; q++) {
                        /* four activations against sixteen columns' four weights: independent sums */
                        int32_t x0 = ar[4 * q], x1 = ar[4 * q + 1], x2 = ar[4 * q + 2], x3 = ar[4 * q + 3];
                        const int8_t *wq = wt + q * step;
                        for (int v = 0; v < 16; v++)
                            s[r][v] += (uint32_t)(x0 * wq[4 * v] + x1 * wq[4 * v + 1] + x2 * wq[4 * v + 2] +
                                                  x3 * wq[4 * v + 3]);
                    }
                }
            }
            for (int r = 0; r < rows; r++)
                for (int v = 0; v < cols; v++)
                    c[(i + r) * c_rs + j + v] = (int32_t)s[r][v];
        }
    }
}

void qr_iconv_pack_w(int8_t *dst, const int8_t *w, int64_t taps, int64_t cin, int64_t k4, int64_t n,
                     int64_t w_tap_stride, int64_t w_c_stride, int64_t w_n_stride)
{
    int64_t n16 = qr_igemm_n16(n), step;
    for (int64_t j = 0; j < n16; j++) {
        int8_t *d = (int8_t *)qr_iconv_col(dst, taps * k4, n16, j, &step);
        for (int64_t t = 0; t < taps; t++)
            for (int64_t k = 0; k < k4; k++) {
                int64_t q = t * k4 + k;
                d[(q >> 2) * step + (q & 3)] = k < cin && j < n ? w[t * w_tap_stride + k * w_c_stride + j * w_n_stride] : 0;
            }
    }
}

void qr_iconv_colsums(int32_t *s, const int8_t *w, int64_t taps, int64_t k4, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n), step;
    for (int64_t j = 0; j < n; j++) {
        uint32_t sum = 0;
        const int8_t *wj = qr_iconv_col(w, taps * k4, n16, j, &step);
        for (int64_t q = 0; q < taps * k4; q++)
            sum += (uint32_t)(int32_t)wj[(q >> 2) * step + (q & 3)];
        s[j] = (int32_t)sum;
    }
}

void qr_igemv_u8s8_avx512vnni(int32_t *y, const uint8_t *x, const int8_t *w, const int32_t *init, int64_t k4,
                              int64_t j0, int64_t j1, int64_t n);

void qr_igemv_u8s8_ref(int32_t *y, const uint8_t *x, const int8_t *w, const int32_t *init, int64_t k4, int64_t j0,
                       int64_t j1, int64_t n)
{
    int64_t n16 = qr_igemm_n16(n);
    for (int64_t j = j0; j < j1 && j < n; j++) {
        uint32_t s = (uint32_t)init[j];
        for (int64_t q = 0; q < k4; q++)
            s += (uint32_t)((int32_t)x[q] * (int32_t)w[((q >> 2) * n16 + j) * 4 + (q & 3)]);
        y[j] = (int32_t)s;
    }
}

qr_igemv_fn qr_igemv_u8s8(void)
{
    return qr_igemm_u8s8() == qr_igemm_u8s8_8x32_avx512vnni ? qr_igemv_u8s8_avx512vnni : NULL;
}

void qr_igemm_interleave4_avx512bw(uint32_t *d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                                   const uint8_t *r3, int64_t n, uint8_t flip);

void qr_igemm_interleave4_ref(uint32_t *d, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
                              const uint8_t *r3, int64_t n, uint8_t flip)
{
    uint32_t x = flip * 0x01010101u;
    for (int64_t i = 0; i < n; i++)
        d[i] = ((uint32_t)r0[i] | (uint32_t)r1[i] << 8 | (uint32_t)r2[i] << 16 | (uint32_t)r3[i] << 24) ^ x;
}

static int has_avx512vnni(void)
{
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}

static int has_avxvnni(void)
{
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2");
}

static int has_avx2(void)
{
    return __builtin_cpu_supports("avx2");
}

/* Best first: the first whose features the CPU reports runs. */
static const struct {
    const char *isa;
    int (*cpu_has)(void);
    qr_igemm_fn fn;
    qr_iconv_fn iconv; /* the NHWC indirect GEMM of the same ISA */
    qr_igemm_rc_fn rc; /* fn with column starting values */
} kernels[] = {
    {"avx512vnni", has_avx512vnni, qr_igemm_u8s8_8x32_avx512vnni, qr_iconv_u8s8_6x64_avx512vnni,
     qr_igemm_u8s8_rc_8x32_avx512vnni},
    {"avxvnni", has_avxvnni, qr_igemm_u8s8_4x16_avxvnni, qr_iconv_u8s8_4x16_avxvnni, rc_avxvnni},
    {"avx2", has_avx2, qr_igemm_u8s8_6x8_avx2, qr_iconv_u8s8_6x8_avx2, rc_avx2},
};

qr_igemm_fn qr_igemm_u8s8_isa(const char *isa)
{
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].isa, isa))
            return kernels[i].cpu_has() ? kernels[i].fn : NULL;
    return NULL;
}

/* The igemm option (qr_options): "portable", an ISA's name, or NULL for the CPU's best. */
static const char *forced_choice(void)
{
    const char *c = qr_options_get()->igemm;
    return c[0] ? c : NULL;
}

void qr_igemm_force(const char *isa)
{
    qr_options o = *qr_options_get();
    memset(o.igemm, 0, sizeof o.igemm);
    snprintf(o.igemm, sizeof o.igemm, "%s", isa ? isa : "");
    qr_options_set(&o);
}

int qr_igemm_portable_forced(void)
{
    const char *force = forced_choice();
    return force && !strcmp(force, "portable");
}

qr_igemm_fn qr_igemm_u8s8(void)
{
    const char *force = forced_choice();
    if (qr_igemm_portable_forced())
        return NULL;
    if (force && qr_igemm_u8s8_isa(force))
        return qr_igemm_u8s8_isa(force);
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].cpu_has())
            return kernels[i].fn;
    return NULL;
}

qr_igemm_rc_fn qr_igemm_u8s8_rc_isa(const char *isa)
{
    if (!strcmp(isa, "amx"))
        return qr_amx_usable() ? qr_igemm_u8s8_rc_amx : NULL;
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].isa, isa))
            return kernels[i].cpu_has() ? kernels[i].rc : NULL;
    return NULL;
}

qr_igemm_rc_fn qr_igemm_u8s8_rc(void)
{
    qr_igemm_fn fn = qr_igemm_u8s8();
    for (size_t i = 0; fn && i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].fn == fn)
            return kernels[i].rc;
    return NULL;
}

/* The packings' AVX-512 versions go with the AVX-512 VNNI kernel: what runs with another is
 * not worth one of its own. */
qr_igemm_pack_b_fn qr_igemm_pack_b(void)
{
    return qr_igemm_u8s8() == qr_igemm_u8s8_8x32_avx512vnni ? qr_igemm_pack_b_avx512vnni : qr_igemm_pack_b_ref;
}

qr_igemm_pack_a_fn qr_igemm_pack_a(void)
{
    return qr_igemm_u8s8() == qr_igemm_u8s8_8x32_avx512vnni ? qr_igemm_pack_a_avx512vnni : qr_igemm_pack_a_ref;
}

/* AMX-INT8 for the convolutions when the CPU and the OS give it, the kernels are not forced to an
 * ISA, and the amx option does not turn it off. */
static int amx_chosen(void)
{
    const char *force = forced_choice();
    return (!force || !strcmp(force, "amx")) && !qr_options_get()->no_amx && qr_amx_usable();
}

int qr_iconv_amx_chosen(void)
{
    return amx_chosen();
}

/* Where AMX takes a layer: K = taps x k4 bytes (k4: a tap's bytes, a multiple of 4) of at least one
 * 64-byte tile row and at least 64 output channels. Under that, a tile's row is mostly zero padding
 * and the per-call row copy costs more than the tiles give: MobileNetV2's 16- to 32-byte 1 x 1
 * expansions at batch 64 took 19.0 / 6.4 / 2.2 ms on AMX against 8.2 / 4.1 / 1.6 on the fused
 * shape kernels (K 16, 24, 32; its K 64 ones 1.1 against 1.5), so such layers keep the VNNI path. */
static int amx_takes(int64_t taps, int64_t k4, int64_t n)
{
    return taps * k4 >= 64 && n >= 64 && amx_chosen();
}

/* Where AMX takes a matrix product from the AVX-512 VNNI kernel: rows for one tile (16), K of at
 * least one 64-byte tile row, and at least 32 columns (two column tiles). */
qr_igemm_rc_fn qr_igemm_u8s8_rc_for(qr_igemm_rc_fn fn, int64_t m, int64_t k4, int64_t n)
{
    return fn == qr_igemm_u8s8_rc_8x32_avx512vnni && m >= 16 && k4 >= 64 && n >= 32 && amx_chosen()
               ? qr_igemm_u8s8_rc_amx
               : fn;
}

qr_iconv_fn qr_iconv_u8s8_isa(const char *isa)
{
    if (!strcmp(isa, "portable"))
        return iconv_u8s8_portable;
    if (!strcmp(isa, "amx"))
        return qr_amx_usable() ? qr_iconv_u8s8_amx : NULL;
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].isa, isa))
            return kernels[i].cpu_has() ? kernels[i].iconv : NULL;
    return NULL;
}

/* The best kernel for this CPU but AMX (the VNNI one where the CPU has it) */
static qr_iconv_fn iconv_u8s8_vector(void)
{
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].cpu_has())
            return kernels[i].iconv;
    return iconv_u8s8_portable;
}

qr_iconv_fn qr_iconv_u8s8(void)
{
    const char *force = forced_choice();
    if (force && qr_iconv_u8s8_isa(force))
        return qr_iconv_u8s8_isa(force);
    return amx_chosen() ? qr_iconv_u8s8_amx : iconv_u8s8_vector();
}

qr_iconv_fn qr_iconv_u8s8_for(int64_t taps, int64_t k4, int64_t n)
{
    const char *force = forced_choice();
    if (force && qr_iconv_u8s8_isa(force))
        return qr_iconv_u8s8_isa(force);
    return amx_takes(taps, k4, n) ? qr_iconv_u8s8_amx : iconv_u8s8_vector();
}

qr_iconv16_fn qr_iconv_wide_twin(qr_iconv_fn fn)
{
    return fn == qr_iconv_u8s8_6x8_avx2 && !qr_options_get()->no_wide16 ? qr_iconv_i16s8_6x8_avx2 : NULL;
}

qr_igemm16_fn qr_igemm_wide_twin(qr_igemm_fn fn)
{
    return fn == qr_igemm_u8s8_6x8_avx2 && !qr_options_get()->no_wide16 ? qr_igemm_i16s8_6x8_avx2 : NULL;
}

qr_igemm_interleave_fn qr_igemm_interleave4(void)
{
    const char *force = forced_choice();
    __builtin_cpu_init();
    if (!qr_igemm_portable_forced() && (!force || !strcmp(force, "avx512vnni")) &&
        __builtin_cpu_supports("avx512bw"))
        return qr_igemm_interleave4_avx512bw;
    return qr_igemm_interleave4_ref;
}

/* Set by the API before any model runs, read by convolutions on worker threads. */
static qr_iconv_specializer iconv_specializer;

/* The specialized kernels are AVX-512 VNNI code: not when the integer kernels are forced to
 * another ISA or the portable ones (--kernels), whose results they would stand in for. */
static int specialized_allowed(void)
{
    const char *force = forced_choice();
    return !qr_igemm_portable_forced() && (!force || !strcmp(force, "avx512vnni") || !strcmp(force, "amx"));
}

void qr_iconv_set_specializer(qr_iconv_specializer f)
{
    __atomic_store_n(&iconv_specializer, f, __ATOMIC_RELEASE);
    qr_options_touch();
}

int qr_iconv_specializing(void)
{
    return __atomic_load_n(&iconv_specializer, __ATOMIC_ACQUIRE) && specialized_allowed() &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

qr_iconv_fn qr_iconv_specialized(int64_t taps, int64_t k4, int64_t n)
{
    qr_iconv_specializer f = __atomic_load_n(&iconv_specializer, __ATOMIC_ACQUIRE);
    return f && specialized_allowed() && !amx_takes(taps, k4, n) ? f(taps, k4, n) : NULL;
}

static qr_iconv_ep_specializer iconv_ep_specializer;

void qr_iconv_set_ep_specializer(qr_iconv_ep_specializer f)
{
    __atomic_store_n(&iconv_ep_specializer, f, __ATOMIC_RELEASE);
    qr_options_touch();
}

qr_iconv_ep_fn qr_iconv_specialized_ep(int64_t taps, int64_t k4, int64_t n, const char *prog)
{
    qr_iconv_ep_specializer f = __atomic_load_n(&iconv_ep_specializer, __ATOMIC_ACQUIRE);
    return f && prog && specialized_allowed() && !amx_takes(taps, k4, n) ? f(taps, k4, n, prog) : NULL;
}

static qr_rows_ep_specializer rows_ep_specializer;

void qr_rows_ep_set_specializer(qr_rows_ep_specializer f)
{
    __atomic_store_n(&rows_ep_specializer, f, __ATOMIC_RELEASE);
    qr_options_touch();
}

qr_rows_ep_fn qr_rows_ep_specialized(const char *prog)
{
    qr_rows_ep_specializer f = __atomic_load_n(&rows_ep_specializer, __ATOMIC_ACQUIRE);
    return f && prog && specialized_allowed() ? f(prog) : NULL;
}
