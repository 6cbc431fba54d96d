/* wino.h's transforms: the weights' in C (double), the inputs' and outputs' with AVX-512F, 16
 * channels a vector (the last vector masked), only called where the CPU has AVX-512F. */
#include <immintrin.h>
#include <math.h>

#include "wino.h"
#include "act_avx512.h"

#define TARGET __attribute__((target("avx512f")))

int64_t qr_wino_u_floats(int64_t c, int64_t m) { return 16 * c * m; }

int qr_wino_weights(const float *w, int64_t c, int64_t m, float *u)
{
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    int finite = 1;
    for (int64_t o = 0; o < m; o++)
        for (int64_t ci = 0; ci < c; ci++) {
            const float *g = w + (o * c + ci) * 9;
            double t[4][3]; /* G g */
            for (int i = 0; i < 4; i++)
                for (int b = 0; b < 3; b++) {
                    t[i][b] = G[i][0] * g[b] + G[i][1] * g[3 + b] + G[i][2] * g[6 + b];
                }
            for (int i = 0; i < 9; i++)
                finite &= isfinite(g[i]) != 0;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    u[((int64_t)(4 * i + j) * c + ci) * m + o] =
                        (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
    return finite;
}

TARGET void qr_wino_input(const qr_wino *p, const float *x, float *v, int64_t ldv, int64_t tb, int64_t t0, int64_t t1)
{
    const int64_t C = p->C, per = p->TH * p->TW;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / per, ty = (t / p->TW) % p->TH, tx = t % p->TW;
        int64_t y0 = 2 * ty - p->pt, x0 = 2 * tx - p->pl;
        const float *row[4][4]; /* NULL: outside the image, zeros */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                int64_t iy = y0 + i, ix = x0 + j;
                row[i][j] = iy >= 0 && iy < p->H && ix >= 0 && ix < p->W ? x + ((n * p->H + iy) * p->W + ix) * C : NULL;
            }
        float *vt = v + (t - tb) * C;
        for (int64_t c = 0; c < C; c += 16) {
            __mmask16 mk = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
            __m512 d[4][4], r[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    d[i][j] = row[i][j] ? _mm512_maskz_loadu_ps(mk, row[i][j] + c) : _mm512_setzero_ps();
            for (int j = 0; j < 4; j++) { /* B^T d */
                r[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
                r[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
                r[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
                r[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
            }
            for (int i = 0; i < 4; i++) { /* (B^T d) B */
                float *o = vt + 4 * i * ldv + c;
                _mm512_mask_storeu_ps(o, mk, _mm512_sub_ps(r[i][0], r[i][2]));
                _mm512_mask_storeu_ps(o + ldv, mk, _mm512_add_ps(r[i][1], r[i][2]));
                _mm512_mask_storeu_ps(o + 2 * ldv, mk, _mm512_sub_ps(r[i][2], r[i][1]));
                _mm512_mask_storeu_ps(o + 3 * ldv, mk, _mm512_sub_ps(r[i][1], r[i][3]));
            }
        }
    }
}

TARGET void qr_wino_output(const qr_wino *p, const float *m, int64_t ldm, int64_t tb, int64_t t0, int64_t t1,
                           const float *bias, const float *res, const qr_act *act, float *y)
{
    const int64_t M = p->M, per = p->TH * p->TW;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / per, ty = (t / p->TW) % p->TH, tx = t % p->TW;
        int64_t oy = 2 * ty, ox = 2 * tx;
        int rows = oy + 1 < p->OH ? 2 : 1, cols = ox + 1 < p->OW ? 2 : 1;
        const float *mt = m + (t - tb) * M;
        for (int64_t o = 0; o < M; o += 16) {
            __mmask16 mk = M - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (M - o)) - 1);
            __m512 s[2][4];
            for (int j = 0; j < 4; j++) { /* A^T M */
                __m512 m0 = _mm512_maskz_loadu_ps(mk, mt + j * ldm + o);
                __m512 m1 = _mm512_maskz_loadu_ps(mk, mt + (4 + j) * ldm + o);
                __m512 m2 = _mm512_maskz_loadu_ps(mk, mt + (8 + j) * ldm + o);
                __m512 m3 = _mm512_maskz_loadu_ps(mk, mt + (12 + j) * ldm + o);
                s[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
                s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
            }
            __m512 b = bias ? _mm512_maskz_loadu_ps(mk, bias + o) : _mm512_setzero_ps();
            for (int a = 0; a < rows; a++) {
                __m512 yv[2] = {_mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]), /* (A^T M) A */
                                _mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3])};
                for (int q = 0; q < cols; q++) {
                    int64_t at = ((n * p->OH + oy + a) * p->OW + ox + q) * M + o;
                    __m512 v = yv[q];
                    if (bias)
                        v = _mm512_add_ps(v, b);
                    if (res)
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, res + at));
                    if (act)
                        v = qr_act_zmm(act, v);
                    _mm512_mask_storeu_ps(y + at, mk, v);
                }
            }
        }
    }
}
