/* Models older than opset 13 (QRL-D item 4): `qrl quantize` upgrades them
 * (runtime/opset_upgrade.c) and exports an opset-13 QDQ model with weights
 * per channel. tools/make_old_opset_models.py writes a small CNN at opsets 9,
 * 10, 11 and 12 (Slice, Pad, Clip, Split, Squeeze, Unsqueeze, Softmax on axis
 * 1 of a rank-4 tensor, Upsample/Resize, Conv, Gemm in their old forms); each
 * is quantized with recipes/int8.qrl (calibrating on every sample: its validate lines dropped, so
 * that what is measured is the upgrade and the export, not the fallback's judging on a few held-out
 * samples of the small calibration file) and its export must
 *   - pass the ONNX checker (full_check) with opset_import 13,
 *   - hold per-axis DequantizeLinear (an axis attribute, 1-D scales) for
 *     every Conv and Gemm weight and bias (4 weights: 8 nodes),
 *   - run in ONNX Runtime within 25 dB SQNR of the fp32 model there
 *     (tools/ort_sqnr.js; the calibrated ranges make 29-34 dB). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

Test(opset_quant, old_opsets_quantize_per_channel, .timeout = 600)
{
    char *dir = tu_tmpdir(), cmd[4096], *out = NULL;
    cr_assert(dir);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/tools/make_old_opset_models.py' '%s' && sed '/^  validate/d' '%s/recipes/int8.qrl' > "
             "'%s/int8-all.qrl'",
             tu_root(), dir, tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    free(out);
    static const int opsets[] = {9, 10, 11, 12};
    for (size_t i = 0; i < sizeof opsets / sizeof opsets[0]; i++) {
        int v = opsets[i];
        snprintf(cmd, sizeof cmd,
                 "%s quantize '%s/opset%d.onnx' --recipe '%s/int8-all.qrl' --calib '%s/calib.npy' "
                 "-o '%s/q%d.onnx'",
                 tu_qrl(), dir, v, dir, dir, dir, v);
        int rc = tu_run(cmd, &out);
        cr_expect_eq(rc, 0, "opset %d: qrl quantize failed: %s", v, out);
        free(out);
        if (rc != 0)
            continue;

        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_old_opset_models.py' --check '%s/q%d.onnx'",
                 tu_root(), dir, v);
        cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
        int per_axis = -1, opset = -1;
        const char *p = strstr(out, "\"per_axis_dq\": ");
        cr_expect(strstr(out, "\"checker\": \"ok\""), "opset %d: the export fails the ONNX checker: %s", v, out);
        cr_expect(p && sscanf(p, "\"per_axis_dq\": %d", &per_axis) == 1 && per_axis == 8,
                  "opset %d: %d per-axis DequantizeLinear, expected 8: %s", v, per_axis, out);
        p = strstr(out, "\"opset\": [");
        cr_expect(p && sscanf(p, "\"opset\": [%d]", &opset) == 1 && opset == 13, "opset %d: exported as %s", v, out);
        free(out);

        snprintf(cmd, sizeof cmd, "node '%s/tools/ort_sqnr.js' '%s/opset%d.onnx' '%s/q%d.onnx' '%s/test.npy'",
                 tu_root(), dir, v, dir, v, dir);
        rc = tu_run(cmd, &out);
        cr_assert_eq(rc, 0, "opset %d: onnxruntime-node failed (make ort installs it): %s", v, out);
        double sqnr = -1;
        p = strstr(out, "\"sqnr_db\":");
        cr_assert(p && sscanf(p, "\"sqnr_db\":%lf", &sqnr) == 1, "%s", out);
        printf("opset %d: export at opset %d, %d per-axis DequantizeLinear, ONNX Runtime SQNR %.1f dB\n", v, opset,
               per_axis, sqnr);
        cr_expect_geq(sqnr, 25.0, "opset %d: SQNR %.1f dB in ONNX Runtime: %s", v, sqnr, out);
        free(out);
    }
    tu_rmdir(dir);
}
