/* rank = probe's subsets and estimate (probe.h). */
#include "probe.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void qr_probe_subsets(uint64_t seed, int runs, int nl, unsigned char *in)
{
    for (int r = 0; r < runs; r++)
        for (int i = 0; i < nl; i++) {
            uint64_t k = (uint64_t)r * (uint64_t)nl + (uint64_t)i + 1;
            in[(size_t)r * (size_t)nl + (size_t)i] = (unsigned char)(splitmix64(seed + k * 0x9E3779B97F4A7C15ull) >> 63);
        }
}

void qr_probe_energy(int nl, int runs, const unsigned char *in, const double *gram, double *energy,
                     double *biased)
{
    size_t w = (size_t)runs + 1, a = (size_t)runs;
    double all = gram[a * w + a], sumc = 0;
    for (size_t r = 0; r < a; r++) /* sum_r |c_r|^2 */
        sumc += gram[r * w + r] - gram[r * w + a] + all / 4;
    for (int i = 0; i < nl; i++) {
        /* |m_i|^2 = (4/R^2) sum_{r,s} s_ir s_is <c_r, c_s> */
        double m2 = 0;
        for (size_t r = 0; r < a; r++) {
            double sr = in[r * (size_t)nl + (size_t)i] ? 1 : -1, row = 0;
            for (size_t s = 0; s < a; s++) {
                double ss = in[s * (size_t)nl + (size_t)i] ? 1 : -1;
                double c = gram[r * w + s] - gram[r * w + a] / 2 - gram[s * w + a] / 2 + all / 4;
                row += ss * c;
            }
            m2 += sr * row;
        }
        m2 *= 4.0 / ((double)runs * (double)runs);
        /* the R terms x_r = 2 s_ir c_r: sum_r |x_r - m|^2 = 4 sum_r |c_r|^2 - R |m|^2; the mean's
         * variance is that over R (R - 1) */
        double var = (4 * sumc - (double)runs * m2) / ((double)runs * (double)(runs - 1));
        energy[i] = m2 - var;
        if (biased)
            biased[i] = m2;
    }
}

int qr_probe_energy_pairs(int nl, int runs, const unsigned char *in, const double *gram, double *energy)
{
    size_t n = (size_t)nl, w = (size_t)runs + 1;
    double *m = calloc(n * n + 1, sizeof *m), *v = calloc(n + 1, sizeof *v);
    unsigned char *row = malloc(n + 1);
    if (!m || !v || !row) {
        free(m), free(v), free(row);
        return -1;
    }
    /* the normal equations of the pairs r <= s (index runs: every layer on) */
    for (size_t r = 0; r < w; r++)
        for (size_t s = r; s < w; s++) {
            for (size_t i = 0; i < n; i++)
                row[i] = (r == (size_t)runs || in[r * n + i]) && (s == (size_t)runs || in[s * n + i]);
            for (size_t i = 0; i < n; i++) {
                if (!row[i])
                    continue;
                v[i] += gram[r * w + s];
                for (size_t j = 0; j < n; j++)
                    m[i * n + j] += row[j];
            }
        }
    /* a ridge of 1e-9 of the mean diagonal: a layer no pair tells apart from another gets their
     * mean instead of a singular system */
    double tr = 0;
    for (size_t i = 0; i < n; i++)
        tr += m[i * n + i];
    for (size_t i = 0; i < n; i++)
        m[i * n + i] += 1e-9 * tr / (double)n + 1e-300;
    /* Cholesky, m = L L^T in place (lower), then the two triangular solves */
    for (size_t j = 0; j < n; j++) {
        double d = m[j * n + j];
        for (size_t k = 0; k < j; k++)
            d -= m[j * n + k] * m[j * n + k];
        d = d > 0 ? sqrt(d) : 1e-150;
        m[j * n + j] = d;
        for (size_t i = j + 1; i < n; i++) {
            double s = m[i * n + j];
            for (size_t k = 0; k < j; k++)
                s -= m[i * n + k] * m[j * n + k];
            m[i * n + j] = s / d;
        }
    }
    for (size_t i = 0; i < n; i++) {
        double s = v[i];
        for (size_t k = 0; k < i; k++)
            s -= m[i * n + k] * v[k];
        v[i] = s / m[i * n + i];
    }
    for (size_t i = n; i-- > 0;) {
        double s = v[i];
        for (size_t k = i + 1; k < n; k++)
            s -= m[k * n + i] * v[k];
        v[i] = s / m[i * n + i];
    }
    memcpy(energy, v, sizeof *energy * n);
    free(m), free(v), free(row);
    return 0;
}
