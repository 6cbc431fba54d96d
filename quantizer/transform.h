/* Recipe transforms (`transform = smoothquant(alpha = 0.5)`): graph rewrites
 * before calibration that keep the model's real-number function and move
 * per-channel ranges out of an activation into the weights that read it.
 *
 * The recipe's transform (stdlib/transforms.qrl) says where (its match: the
 * root value y) and how much (scale(act, weight) per channel j of y's last
 * axis). This module is the mechanism: it runs the f32 model over the
 * calibration samples for act[j] = max |y[..., j]|, reads weight[j] = max
 * |w[j, :]| over y's readers, asks the recipe for s[j], and rewrites
 *   y's producer    LayerNormalization: scale[j] and bias[j] divided by s[j]
 *   each reader     MatMul(y, W) or Gemm(y, W): W's row j (input channel j)
 *                   multiplied by s[j]
 * so every reader computes what it did before, up to f32 rounding. A match
 * whose producer or readers are not of these forms (a reader that is an Add,
 * a weight shared with another node, y a graph output) is left alone with a
 * note; an s[j] that is not a positive finite number is an error naming the
 * transform's line. */
#ifndef QR_TRANSFORM_H
#define QR_TRANSFORM_H

#include <stdint.h>

#include "graph.h"
#include "recipe.h"
#include "status.h"
#include "tensor.h"

typedef struct qr_transform_run {
    int matched;       /* values the match found */
    int rescaled;      /* of them, rewritten */
    double s_min, s_max; /* the factors given to the rewritten values' channels */
    char **notes;      /* malloc'd: the summary, then one per value left alone */
    int nnotes;
} qr_transform_run;

/* Applies recipe r's transform setting to g in place (g is the quantizer's own copy). calib: the
 * calibration inputs (count samples of each, batch at a time). Nothing happens without the setting.
 * The caller frees run->notes (qr_transform_run_free). */
qr_status qr_transform_apply(qr_graph *g, const qrl_module *m, const qr_recipe *r, const qr_tensor *calib,
                             int64_t count, int batch, qr_transform_run *run, qr_error *e);
void qr_transform_run_free(qr_transform_run *run);

#endif
