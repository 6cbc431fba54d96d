/* Recipe transforms (`transform = smoothquant(alpha = 0.5)`): graph rewrites
 * before calibration that keep the model's real-number function and move
 * per-channel ranges out of an activation into the weights that read it.
 *
 * The recipe's transform (stdlib/transforms.qrl) says where (its match: the
 * root value y) and how much (scale(act, weight) per channel j of y's last
 * axis). This module is the mechanism: it runs the f32 model over the
 * calibration samples for act[j] = max |y[..., j]|, reads weight[j] = max
 * |w[j, :]| over y's readers, asks the recipe for s[j], and rewrites
 *   y's producer    LayerNormalization: scale[j] and bias[j] divided by s[j]; Conv: output
 *                   channel j's weights and bias (behind a Relu, or a Clip(c, 0, hi) which
 *                   gets a per-channel bound Min(., hi / s) after it)
 *   each reader     MatMul(y, W) or Gemm(y, W): W's row j (input channel j), Conv (any
 *                   groups): input channel j's kernels, multiplied by s[j]
 * so every reader computes what it did before, up to f32 rounding. A match
 * whose producer or readers are not of these forms (a reader that is an Add,
 * a weight shared with another node, y a graph output) is left alone with a
 * note; an s[j] that is not a positive finite number is an error naming the
 * transform's line.
 *
 * A transform with a bias function instead (bias(bias, error) -> f64: empirical bias correction)
 * matches layers y = Conv|MatMul|Gemm(x, W, b) with a constant W. This module measures E[x] per
 * input channel on the calibration samples (one f32 pass), asks the quantizer for W_q (the
 * recipe's own weight quantization), and gives the recipe, per output channel o, the layer's
 * bias b[o] and the expected error of its output, error[o] = sum over its inputs i of
 * (W_q - W)[o, i] E[x_i]; the recipe's answer is the new b[o]. A layer without a bias gets one (a
 * Conv's or Gemm's third input, an Add after a MatMul). Several transform settings run in the
 * recipe's order, each on the graph the one before left.
 *
 * A transform with a shift function (high-bias absorption) matches a Relu or Clip(c, 0, hi) after
 * such a producer: this module measures the smallest and largest pre-activation c per channel on
 * the calibration samples, asks the recipe for the amount a[j] >= 0, and moves it: the producer's
 * bias minus a, the Clip's per-channel bound minus a, each reader's (a Conv without padding) bias
 * plus W a.
 *
 * A transform with a flip function (a rounding optimizer, quantizer/rounding.h) matches the same
 * layers. This module collects each one's input rows on the calibration samples (a Conv's im2col
 * patches, per group; at most ROUND_FLOATS floats of them per layer, rows evenly spaced over the
 * samples and positions), asks the quantizer for each weight's nearest and other rounding, lets
 * rounding.h choose per weight with the recipe's answers, and writes each moved weight's other
 * rounding (a point of its grid) into the weight, so the quantizer's own rounding gives it back. */
#ifndef QR_TRANSFORM_H
#define QR_TRANSFORM_H

#include <stdint.h>

#include "graph.h"
#include "recipe.h"
#include "status.h"
#include "tensor.h"

typedef struct qr_transform_run {
    char **notes; /* malloc'd: each transform's summary, then one per value or layer it left alone */
    int nnotes;
    /* by value id (norig of them), malloc'd: a weight as it was before a rounding optimizer put it on
     * its grid, which a later bias correction measures the rounding's error from; NULL elsewhere */
    float **orig;
    int norig;
} qr_transform_run;

/* What a bias correction and a rounding optimizer need of the quantizer: the weights recipe r
 * quantizes in g (its plan and weight quantization, nothing calibrated), dequantized as the
 * export's integers give them back; deq[value id] is malloc'd, NULL for a value the recipe does not
 * quantize as a weight. With alt, (*alt)[value id] likewise holds each element's other rounding (up
 * where the recipe rounds down, and down where up; the value itself where it is on the grid or the
 * other is off its end). The caller frees each and the arrays. */
typedef qr_status (*qr_transform_weights_fn)(void *user, const qr_graph *g, float ***deq, float ***alt, qr_error *e);

/* Applies recipe r's transform settings to g in place, in the recipe's order (g is the quantizer's
 * own copy). calib: the calibration inputs (count samples of each, batch at a time); threads: the
 * f32 passes' kernels' and a rounding optimizer's (its Gram matrices and channels; the result does
 * not depend on them);
 * weights (with user) for a transform with a bias or flip function. *ref: a copy of g before its
 * first bias correction or rounding (the f32 function the quantized model is judged against), NULL
 * without one; the caller frees it and run's notes and weights (qr_transform_run_free). Nothing
 * happens without a setting. */
qr_status qr_transform_apply(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                             int64_t count, int batch, int threads, qr_transform_weights_fn weights, void *user,
                             qr_graph **ref, qr_transform_run *run, qr_error *e);
/* qr_transform_apply, and with step (non-NULL) called after each transform setting with g as that
 * setting left it, ref as qr_transform_apply would give it so far (NULL before the first bias
 * correction or rounding) and the transform's name: what the recipe's steps = measure measures
 * (quantize.c). An error from step ends the run as the transform's own would. */
typedef qr_status (*qr_transform_step_fn)(void *user, const qr_graph *g, const qr_graph *ref, const char *name,
                                          qr_error *e);
qr_status qr_transform_apply_steps(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                                   int64_t count, int batch, int threads, qr_transform_weights_fn weights, void *user,
                                   qr_transform_step_fn step, void *step_user, qr_graph **ref, qr_transform_run *run,
                                   qr_error *e);
void qr_transform_run_free(qr_transform_run *run);

#endif
