/* rank = probe's estimate (quantizer/probe.h) against independent oracles: its subsets against a
 * Python copy of splitmix64; its per-layer energies, computed from the runs' inner products only,
 * against numpy's computation from the runs' error vectors themselves (the definition: m_i, its
 * energy, the sample variance of its terms); and on an exactly linear model (each run's error the
 * sum of its layers' own errors) the estimate of each layer's energy against that energy, within
 * the noise the estimator's theory gives, the error shrinking as the runs grow. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

TestSuite(probe, .init = setup, .fini = teardown, .timeout = 120);

static void save(const char *name, qr_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    char path[1024];
    qr_error e = {{0}};
    qr_tensor t = {.dtype = dt, .ndim = ndim};
    memcpy(t.dims, dims, sizeof *dims * (size_t)ndim);
    t.data = (void *)data;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
}

static qr_tensor load(const char *name) { return tu_npy_load(dir, name); }

static void python(const char *code)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 -c \"%s\"", dir, code);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static double gauss(unsigned *seed)
{
    double u = 0;
    for (int k = 0; k < 12; k++) { /* Irwin-Hall: near enough a normal for test data */
        *seed = *seed * 1103515245u + 12345u;
        u += (double)(*seed >> 8 & 0xffffff) / 16777216.0;
    }
    return u - 6;
}

/* gram ((runs+1)^2) of the rows of e ((runs+1) x dim). */
static void gram_of(const double *e, int runs, int dim, double *gram)
{
    int w = runs + 1;
    for (int a = 0; a < w; a++)
        for (int b = 0; b < w; b++) {
            double s = 0;
            for (int k = 0; k < dim; k++)
                s += e[a * dim + k] * e[b * dim + k];
            gram[a * w + b] = s;
        }
}

Test(probe, subsets_are_splitmix64_as_python_computes_it)
{
    enum { RUNS = 7, NL = 23 };
    unsigned char in[RUNS * NL];
    qr_probe_subsets(0x51ED27A5ull + 1, RUNS, NL, in);
    python("import numpy as np\n"
           "M = (1 << 64) - 1\n"
           "def mix(z):\n"
           "  z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M\n"
           "  z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M\n"
           "  return z ^ (z >> 31)\n"
           "seed, R, n = 0x51ED27A5 + 1, 7, 23\n"
           "b = [[mix((seed + (r * n + i + 1) * 0x9E3779B97F4A7C15) & M) >> 63 for i in range(n)] for r in range(R)]\n"
           "np.save('b.npy', np.array(b, dtype=np.uint8))\n");
    qr_tensor b = load("b");
    cr_assert_eq(qr_tensor_numel(&b), RUNS * NL);
    cr_assert_eq(memcmp(b.data, in, sizeof in), 0, "the subsets differ from Python's splitmix64");
    int ones = 0;
    for (int k = 0; k < RUNS * NL; k++)
        ones += in[k];
    cr_assert(ones > RUNS * NL / 4 && ones < RUNS * NL * 3 / 4, "%d of %d quantized: not about half", ones, RUNS * NL);
    qr_tensor_free(&b);
}

/* A model that is not linear (each run's error: its layers' errors plus a product of two of them,
 * and a run-dependent term), so that the estimate is no layer's energy: numpy computes m_i from
 * the error vectors, the C estimate from their inner products. */
Test(probe, energies_match_numpy_from_the_error_vectors)
{
    enum { RUNS = 12, NL = 9, DIM = 40 };
    unsigned char in[(RUNS + 1) * NL];
    qr_probe_subsets(99, RUNS, NL, in);
    memset(in + RUNS * NL, 1, NL);
    double d[NL * DIM], e[(RUNS + 1) * DIM], gram[(RUNS + 1) * (RUNS + 1)], en[NL], bi[NL];
    unsigned seed = 5;
    for (int i = 0; i < NL; i++)
        for (int k = 0; k < DIM; k++)
            d[i * DIM + k] = gauss(&seed) * (i + 1) * (i % 2 ? -0.3 : 0.2); /* both signs, unequal sizes */
    for (int r = 0; r <= RUNS; r++)
        for (int k = 0; k < DIM; k++) {
            double s = 0;
            for (int i = 0; i < NL; i++)
                s += in[r * NL + i] ? d[i * DIM + k] : 0;
            s += in[r * NL + 0] && in[r * NL + 3] ? d[0 * DIM + k] * d[3 * DIM + k] : 0; /* an interaction */
            e[r * DIM + k] = s + 0.05 * gauss(&seed);
        }
    gram_of(e, RUNS, DIM, gram);
    qr_probe_energy(NL, RUNS, in, gram, en, bi);
    int64_t de[2] = {RUNS + 1, DIM}, di[2] = {RUNS + 1, NL};
    save("e", QR_F64, 2, de, e);
    save("in", QR_U8, 2, di, in);
    python("import numpy as np\n"
           "e = np.load('e.npy'); b = np.load('in.npy').astype(np.float64); R = e.shape[0] - 1\n"
           "c = e[:R] - e[R] / 2; s = 2 * b[:R] - 1\n"
           "x = 2 * s[:, :, None] * c[:, None, :]\n"
           "m = x.mean(axis=0)\n"
           "m2 = (m * m).sum(axis=1)\n"
           "var = ((x - m[None]) ** 2).sum(axis=2).sum(axis=0) / (R - 1)\n"
           "np.save('m2.npy', m2); np.save('u.npy', m2 - var / R)\n");
    qr_tensor m2 = load("m2"), u = load("u");
    for (int i = 0; i < NL; i++) {
        double want = ((double *)m2.data)[i], unb = ((double *)u.data)[i];
        cr_assert(fabs(bi[i] - want) <= 1e-9 * fabs(want) + 1e-12, "layer %d: |m|^2 %g, numpy %g", i, bi[i], want);
        cr_assert(fabs(en[i] - unb) <= 1e-9 * fabs(want) + 1e-12, "layer %d: unbiased %g, numpy %g", i, en[i], unb);
    }
    qr_tensor_free(&m2), qr_tensor_free(&u);
}

/* Exactly linear: e_r = sum_i b_ir d_i. Each estimate is within 5 standard deviations of the
 * layer's energy |d_i|^2, the deviation from the theory (m_i = d_i + n_i, E|n_i|^2 = S_i / R,
 * S_i = sum_{j != i} |d_j|^2: sd about 2 |d_i| sqrt(S_i / R) + S_i / R), and the worst error over
 * the layers at 1024 runs is at most a quarter of the one at 16. */
Test(probe, linear_model_estimates_each_layers_energy_as_runs_grow)
{
    enum { NL = 10, DIM = 24, MAXR = 1024 };
    double d[NL * DIM], true2[NL], tot = 0;
    unsigned seed = 11;
    for (int i = 0; i < NL; i++) {
        true2[i] = 0;
        for (int k = 0; k < DIM; k++) {
            d[i * DIM + k] = gauss(&seed) * (i < 2 ? 3.0 : 1.0 / (1 + i)); /* two dominate, as on PP-OCR det */
            true2[i] += d[i * DIM + k] * d[i * DIM + k];
        }
        tot += true2[i];
    }
    double *e = malloc(sizeof *e * (MAXR + 1) * DIM), *gram = malloc(sizeof *gram * (MAXR + 1) * (MAXR + 1));
    unsigned char *in = malloc((MAXR + 1) * NL);
    double worst[2] = {0, 0};
    const int rs[2] = {16, MAXR};
    for (int t = 0; t < 2; t++) {
        int R = rs[t];
        qr_probe_subsets(7, R, NL, in);
        memset(in + (size_t)R * NL, 1, NL);
        for (int r = 0; r <= R; r++)
            for (int k = 0; k < DIM; k++) {
                double s = 0;
                for (int i = 0; i < NL; i++)
                    s += in[r * NL + i] ? d[i * DIM + k] : 0;
                e[r * DIM + k] = s;
            }
        gram_of(e, R, DIM, gram);
        double en[NL];
        qr_probe_energy(NL, R, in, gram, en, NULL);
        for (int i = 0; i < NL; i++) {
            double S = tot - true2[i], sd = 2 * sqrt(true2[i] * S / R) + S / R, err = fabs(en[i] - true2[i]);
            cr_assert(err <= 5 * sd, "R %d, layer %d: estimate %g, energy %g (sd %g)", R, i, en[i], true2[i], sd);
            worst[t] = fmax(worst[t], err);
        }
    }
    cr_assert(worst[1] <= worst[0] / 4, "the worst error at %d runs %g, at 16 %g: not shrinking", MAXR, worst[1],
              worst[0]);
    free(e), free(gram), free(in);
}

/* rank = probe_pairs: the least-squares energies against numpy's lstsq of the same system built
 * from the error vectors (each pair's inner product computed by numpy), on the non-linear runs of
 * energies_match_numpy_from_the_error_vectors. */
Test(probe, pairs_match_numpy_lstsq)
{
    enum { RUNS = 12, NL = 9, DIM = 40 };
    unsigned char in[(RUNS + 1) * NL];
    qr_probe_subsets(3, RUNS, NL, in);
    memset(in + RUNS * NL, 1, NL);
    double d[NL * DIM], e[(RUNS + 1) * DIM], gram[(RUNS + 1) * (RUNS + 1)], en[NL];
    unsigned seed = 21;
    for (int i = 0; i < NL; i++)
        for (int k = 0; k < DIM; k++)
            d[i * DIM + k] = gauss(&seed) * (i + 1) * (i % 2 ? -0.3 : 0.2);
    for (int r = 0; r <= RUNS; r++)
        for (int k = 0; k < DIM; k++) {
            double s = 0;
            for (int i = 0; i < NL; i++)
                s += in[r * NL + i] ? d[i * DIM + k] : 0;
            s += in[r * NL + 1] && in[r * NL + 2] ? d[1 * DIM + k] * d[2 * DIM + k] : 0;
            e[r * DIM + k] = s + 0.05 * gauss(&seed);
        }
    gram_of(e, RUNS, DIM, gram);
    cr_assert_eq(qr_probe_energy_pairs(NL, RUNS, in, gram, en), 0);
    int64_t de[2] = {RUNS + 1, DIM}, di[2] = {RUNS + 1, NL};
    save("e", QR_F64, 2, de, e);
    save("in", QR_U8, 2, di, in);
    python("import numpy as np\n"
           "e = np.load('e.npy'); b = np.load('in.npy').astype(np.float64); w = e.shape[0]\n"
           "rows = []; rhs = []\n"
           "for r in range(w):\n"
           "  for s in range(r, w):\n"
           "    rows.append(b[r] * b[s]); rhs.append(e[r] @ e[s])\n"
           "E = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]\n"
           "np.save('E.npy', E)\n");
    qr_tensor E = load("E");
    double top = 0;
    for (int i = 0; i < NL; i++)
        top = fmax(top, fabs(((double *)E.data)[i]));
    for (int i = 0; i < NL; i++) {
        double want = ((double *)E.data)[i];
        cr_assert(fabs(en[i] - want) <= 1e-6 * top, "layer %d: %g, numpy %g", i, en[i], want);
    }
    qr_tensor_free(&E);
}

/* Layers whose errors are orthogonal (disjoint output elements) and add: the pairs give each
 * layer's energy exactly with 12 runs for 20 layers (91 pairs; no two layers in the same runs: two
 * that are cannot be told apart, and share their sum), where the signs' estimate is off by its
 * noise. */
Test(probe, pairs_exact_on_orthogonal_errors)
{
    enum { RUNS = 12, NL = 20, PER = 6 };
    unsigned char in[(RUNS + 1) * NL];
    qr_probe_subsets(5, RUNS, NL, in);
    memset(in + RUNS * NL, 1, NL);
    for (int i = 0; i < NL; i++)
        for (int j = 0; j < i; j++) {
            int same = 1;
            for (int r = 0; r < RUNS; r++)
                same &= in[r * NL + i] == in[r * NL + j];
            cr_assert(!same, "layers %d and %d are in the same runs: another seed", i, j);
        }
    double d[NL * PER], true2[NL], e[(RUNS + 1) * NL * PER], gram[(RUNS + 1) * (RUNS + 1)], en[NL], sg[NL];
    unsigned seed = 8;
    for (int i = 0; i < NL; i++) {
        true2[i] = 0;
        for (int k = 0; k < PER; k++) {
            d[i * PER + k] = gauss(&seed) * (i < 3 ? 4.0 : 1.0);
            true2[i] += d[i * PER + k] * d[i * PER + k];
        }
    }
    for (int r = 0; r <= RUNS; r++)
        for (int i = 0; i < NL; i++)
            for (int k = 0; k < PER; k++)
                e[(r * NL + i) * PER + k] = in[r * NL + i] ? d[i * PER + k] : 0;
    gram_of(e, RUNS, NL * PER, gram);
    cr_assert_eq(qr_probe_energy_pairs(NL, RUNS, in, gram, en), 0);
    qr_probe_energy(NL, RUNS, in, gram, sg, NULL);
    double worst_signs = 0;
    for (int i = 0; i < NL; i++) {
        cr_assert(fabs(en[i] - true2[i]) <= 1e-6 * true2[i] + 1e-9, "layer %d: %g, its energy %g", i, en[i],
                  true2[i]);
        worst_signs = fmax(worst_signs, fabs(sg[i] - true2[i]) / true2[i]);
    }
    cr_assert_gt(worst_signs, 0.1, "the signs' estimate is exact here too (%g): the test does not tell them apart",
                 worst_signs);
}
