/* rank = probe: each layer's effect on the outputs estimated from a fixed number of runs, whatever
 * the layer count (random-subset probing, a group-testing estimate). Run r (of R) quantizes each
 * probed layer i with probability 1/2 (in[r][i] = b_ir in {0, 1}, s_ir = 2 b_ir - 1), the other
 * layers f32; one more run quantizes every probed layer (e_all). To first order the output error
 * of run r is e_r = sum_i b_ir d_i (d_i: layer i's output error alone), so with c_r = e_r - e_all/2
 * = (1/2) sum_i s_ir d_i,
 *
 *   m_i = (2/R) sum_r s_ir c_r  =  d_i + (1/R) sum_{j != i} (sum_r s_ir s_jr) d_j,
 *
 * an unbiased estimate of d_i whose noise energy is about sum_{j != i} |d_j|^2 / R. Its energy
 * |m_i|^2 is biased up by that noise; the unbiased energy subtracts the sample variance of the R
 * terms 2 s_ir c_r over R. Only inner products of the runs' errors are needed: gram, the
 * (R+1) x (R+1) matrix <e_r, e_s> (index R: e_all). The recipe decides how many runs and rounds
 * (quantizer/qmeasure.c's probe_effects); this module draws the subsets and does the arithmetic. */
#ifndef QR_PROBE_H
#define QR_PROBE_H

#include <stdint.h>

/* The subsets of R runs over nl layers: in[r * nl + i] = 1 when run r quantizes layer i. Bit 63 of
 * splitmix64's output at state seed + (r * nl + i + 1) * 0x9E3779B97F4A7C15 (Steele, Lea and Flood,
 * "Fast splittable pseudorandom number generators", OOPSLA 2014): reproducible anywhere from the
 * seed (tests/unit/test_probe.c checks it against a Python copy). */
void qr_probe_subsets(uint64_t seed, int runs, int nl, unsigned char *in);

/* From gram ((R+1) x (R+1), row-major, index R the all-quantized run) and the subsets in: each
 * layer's estimated error energy, unbiased (energy[i], may be negative: below its noise) and the
 * plain |m_i|^2 (biased[i], NULL: not wanted). runs >= 2. */
void qr_probe_energy(int nl, int runs, const unsigned char *in, const double *gram, double *energy,
                     double *biased);

/* rank = probe_pairs: the energies E_i that fit every pair of runs' inner product,
 * <e_r, e_s> = sum_i b_ir b_is E_i (r <= s, the all-quantized run among them), in least squares: what
 * the inner products give when the layers' errors at the outputs are orthogonal (independent
 * rounding noise over many output elements) and add. (R + 1)(R + 2) / 2 equations for the nl
 * energies, so about sqrt(2 nl) runs tell them apart where the signs' estimate needs some nl; its
 * error comes from the errors' correlation and from what does not add. -1: out of memory. */
int qr_probe_energy_pairs(int nl, int runs, const unsigned char *in, const double *gram, double *energy);

#endif
