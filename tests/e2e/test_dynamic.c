/* Dynamic quantization end to end (QRL-H item 4): recipes/int8-dynamic.qrl (activations
 * quantized at run time per row, per token) and int8-dynamic-tensor.qrl (per tensor) through the
 * qrl command, on the small torch.onnx encoder (BERT layout) and decoder (GPT layout) of
 * tools/make_transformer_models.py. The oracles are independent of QRL: PyTorch's f32 outputs
 * and its quantize_dynamic's on samples never used to calibrate, ONNX Runtime on QRL's export
 * (with its graph optimizations, and without: the ONNX definition of the file), and MAC counts
 * derived by hand from the layer sizes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

/* A recipe importing the dynamic patterns, written to DIR/NAME (path: its path): recipe `rname`
 * with these settings and use list. */
static void write_recipe(const char *in, const char *name, const char *rname, const char *body, char *path,
                         size_t pathn)
{
    snprintf(path, pathn, "%s/%s", in, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nimport \"patterns_dynamic.qrl\"\nrecipe %s {\n%s}\n", rname, body);
    fclose(f);
}

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/tools/make_transformer_models.py' '%s' 2>&1 && cd '%s' && /usr/bin/python3 -c "
             "\"import numpy as np\nfor m in ('bert', 'gpt'):\n  x = np.load(m + '_test.npy')\n"
             "  for i in range(len(x)): np.save('%%s_one_%%d.npy' %% (m, i), x[i:i + 1])\"",
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(dynamic, .init = setup, .fini = teardown, .timeout = 900);

static const char *const models[] = {"bert", "gpt"};
static const char *const recipes[] = {"int8-dynamic", "int8-dynamic-tensor"}; /* per row, per tensor */

#define NTEST 16 /* test samples (make_transformer_models.py) */

/* qrl quantize MODEL with recipes/RECIPE.qrl: DIR/MODEL.RECIPE.onnx, .json (report), .txt (integer
 * graph); the log (malloc'd), exit status in *rc. */
static char *quantize(const char *model, const char *recipe, int *rc)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize '%s/%s.onnx' --recipe recipes/%s.qrl --calib '%s/%s_calib.npy' "
             "-o '%s/%s.%s.onnx' --report '%s/%s.%s.json' --int-graph '%s/%s.%s.txt'",
             tu_root(), tu_qrl(), dir, model, recipe, dir, model, dir, model, recipe, dir, model, recipe, dir, model,
             recipe);
    *rc = tu_run(cmd, &log);
    return log;
}

static double report_number(const char *model, const char *recipe, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.json", dir, model, recipe);
    return tu_json_number(path, key);
}

/* The recipe's integer graph on the test samples, one at a time as ORT runs them (a per-tensor
 * range depends on the batch; the decoder takes batches of one), quantizing in memory each time:
 * DIR/MODEL.RECIPE.qrl.npy, the outputs stacked. */
static void qrl_int_outputs(const char *model, const char *recipe)
{
    char cmd[4096], *log;
    for (int i = 0; i < NTEST; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s run '%s/%s.onnx' --recipe recipes/%s.qrl --calib '%s/%s_calib.npy' "
                 "-i '%s/%s_one_%d.npy' -o '%s/%s.%s.qrl_%d'",
                 tu_root(), tu_qrl(), dir, model, recipe, dir, model, dir, model, i, dir, model, recipe, i);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np, os\nouts = []\nfor i in range(%d):\n"
             "  d = '%s.%s.qrl_%%d' %% i\n  outs.append(np.load(os.path.join(d, os.listdir(d)[0])))\n"
             "np.save('%s.%s.qrl.npy', np.concatenate(outs))\"",
             dir, NTEST, model, recipe, model, recipe);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* ONNX Runtime on the export, the test samples one at a time: DIR/MODEL.RECIPE.ort[_plain]/0.npy.
 * plain: without graph optimizations (every node as the ONNX spec defines it). */
static void ort_outputs(const char *model, const char *recipe, int plain)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "%s node '%s/tools/ort_sqnr.js' --run '%s/%s.%s.onnx' '%s/%s.%s.ort%s' '%s/%s_test.npy'",
             plain ? "ORT_OPT_LEVEL=disabled" : "", tu_root(), dir, model, recipe, dir, model, recipe,
             plain ? "_plain" : "", dir, model);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* Multiply-accumulates per sample of the small models (seq 8, d 32, 4 heads of 8, ff 64, 2
 * layers): per layer Q, K, V and the output projection (4 x 8 x 32 x 32), the feed forward
 * (2 x 8 x 32 x 64), Q.K^T and P.V (2 x 4 heads x 8 x 8 x 8); the decoder adds its LM head
 * (8 x 32 x 50). */
#define LAYER_MACS (4.0 * 8 * 32 * 32 + 2.0 * 8 * 32 * 64 + 2.0 * 4 * 8 * 8 * 8)
#define BERT_MACS (2 * LAYER_MACS)
#define GPT_MACS (2 * LAYER_MACS + 8.0 * 32 * 50)

/* Every product on the integers (QRL-H: at least 95% of the MACs), attention's two-activation
 * products included; per row the integer graph quantizes with DynamicQuantizeRows, per tensor
 * with DynamicQuantizeLinear alone. */
Test(dynamic, every_product_runs_on_integers_per_row_and_per_tensor)
{
    const double macs[] = {BERT_MACS, GPT_MACS};
    char path[1024];
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < 2; r++) {
            int rc;
            char *log = quantize(models[m], recipes[r], &rc);
            cr_assert_eq(rc, 0, "%s %s: %s", models[m], recipes[r], log);
            double total = report_number(models[m], recipes[r], "macs_per_sample"),
                   ints = report_number(models[m], recipes[r], "macs_int_per_sample");
            cr_expect_float_eq(total, macs[m], 0.5, "%s: %.0f MACs per sample, by hand %.0f", models[m], total,
                               macs[m]);
            cr_expect_geq(ints, 0.95 * total, "%s %s: %.0f of %.0f MACs in integers\n%s", models[m], recipes[r], ints,
                          total, log);
            cr_log_info("%s %s: %.1f%% of MACs in integers", models[m], recipes[r], 100 * ints / total);
            snprintf(path, sizeof path, "%s/%s.%s.txt", dir, models[m], recipes[r]);
            char *ig = tu_slurp(path);
            cr_expect_eq(strstr(ig, "DynamicQuantizeRows(") != NULL, r == 0, "%s %s: per %s, the integer graph %s",
                         models[m], recipes[r], r == 0 ? "row" : "tensor",
                         r == 0 ? "has no DynamicQuantizeRows" : "quantizes rows");
            cr_expect(strstr(ig, "MatMulInteger("), "%s %s: no MatMulInteger", models[m], recipes[r]);
            free(ig);
            free(log);
        }
}

/* QRL-H's target: output SQNR on samples never used to calibrate, against PyTorch's f32 outputs,
 * at least PyTorch quantize_dynamic's minus 0.5 dB; the integer graph and ONNX Runtime on the
 * export (with its own fusions: the per-tensor export's groups become DynamicQuantizeMatMul). */
Test(dynamic, sqnr_at_least_pytorch_dynamic)
{
    char ref[1024], dyn[1024], got[1024];
    for (int m = 0; m < 2; m++) {
        snprintf(ref, sizeof ref, "%s/%s_test_f32.npy", dir, models[m]);
        snprintf(dyn, sizeof dyn, "%s/%s_test_torch_dynamic.npy", dir, models[m]);
        double torch_db = tu_npy_sqnr(ref, dyn);
        for (int r = 0; r < 2; r++) {
            int rc;
            char *log = quantize(models[m], recipes[r], &rc);
            cr_assert_eq(rc, 0, "%s", log);
            free(log);
            qrl_int_outputs(models[m], recipes[r]);
            ort_outputs(models[m], recipes[r], 0);
            snprintf(got, sizeof got, "%s/%s.%s.qrl.npy", dir, models[m], recipes[r]);
            double qrl_db = tu_npy_sqnr(ref, got);
            snprintf(got, sizeof got, "%s/%s.%s.ort/0.npy", dir, models[m], recipes[r]);
            double ort_db = tu_npy_sqnr(ref, got);
            cr_log_info("%s %s: QRL %.1f dB, ORT on the export %.1f dB, PyTorch quantize_dynamic %.1f dB", models[m],
                        recipes[r], qrl_db, ort_db, torch_db);
            cr_expect_geq(qrl_db, torch_db - 0.5, "%s %s: the integer graph gives %.1f dB, PyTorch dynamic %.1f",
                          models[m], recipes[r], qrl_db, torch_db);
            cr_expect_geq(ort_db, torch_db - 0.5, "%s %s: ORT on the export gives %.1f dB, PyTorch dynamic %.1f",
                          models[m], recipes[r], ort_db, torch_db);
        }
    }
}

/* The int8 initializers of DIR/MODEL.TAG.onnx (onnx, independent of QRL's reader). */
static int int8_initializers(const char *model, const char *tag)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx\nm = onnx.load('%s/%s.%s.onnx')\n"
             "print(sum(t.data_type == onnx.TensorProto.INT8 for t in m.graph.initializer))\"",
             dir, model, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    int n = atoi(log);
    free(log);
    return n;
}

/* A dynamic recipe's fallback on the decoder with outlier features (tools/make_transformer_models.py's
 * gpt_outliers), where int8-dynamic alone gives ONNX Runtime about 21 dB on the test samples:
 * `fallback = f32 when output_sqnr < 35` sends some of its 17 values quantized at run time back to
 * f32 (not all: the note counts them), their matches' weights with them (fewer int8 initializers in
 * the file). The oracle: ONNX Runtime on each export, on the 16 test samples (used neither to
 * calibrate nor to validate), against PyTorch's f32 outputs: within 3 dB of the target (33.5
 * measured: the 8 held-out samples judged it at 35.9), where the recipe without the line is under 25. */
Test(dynamic, the_fallback_sends_run_time_values_of_a_decoder_to_f32)
{
    char path[1024], cmd[4096], ref[1024], got[1024], *log;
    int rc;
    free(quantize("gpt_outliers", "int8-dynamic", &rc));
    cr_assert_eq(rc, 0);
    write_recipe(dir, "dynfb.qrl", "dynfb",
                 "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = "
                 "true)\n  fallback = f32 when output_sqnr < 35\n  outputs = worst\n  samples = sample_balanced_lower\n"
                 "  validate = 0.25\n  validate_from = spread\n"
                 "  use conv_dynamic, linear_dynamic_rows, matmul_dynamic_rows, gemm_dynamic_rows, gemm_n_dynamic_rows,\n"
                 "      matmul_act_div_dynamic_rows, matmul_act_scaled_dynamic_rows, matmul_act_dynamic_rows\n",
                 path, sizeof path);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize '%s/gpt_outliers.onnx' --recipe '%s' --calib '%s/gpt_outliers_calib.npy' "
             "-o '%s/gpt_outliers.dynfb.onnx'", tu_root(), tu_qrl(), dir, path, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    const char *note = "note: recipe 'dynfb': the fallback sent ";
    const char *at = strstr(log, note);
    int sent = at ? atoi(at + strlen(note)) : -1;
    cr_expect(at && strstr(at, " of the 17 values quantized at run time to f32") && sent > 0 && sent < 17, "%s", log);
    cr_expect(!strstr(log, "misses its fallback condition"), "%s", log);
    free(log);
    int w_all = int8_initializers("gpt_outliers", "int8-dynamic"), w_fb = int8_initializers("gpt_outliers", "dynfb");
    cr_expect(w_fb > 0 && w_fb < w_all, "int8 weights: %d with the fallback, %d without", w_fb, w_all);
    snprintf(ref, sizeof ref, "%s/gpt_outliers_test_f32.npy", dir);
    ort_outputs("gpt_outliers", "int8-dynamic", 0);
    ort_outputs("gpt_outliers", "dynfb", 0);
    snprintf(got, sizeof got, "%s/gpt_outliers.int8-dynamic.ort/0.npy", dir);
    double all = tu_npy_sqnr(ref, got);
    snprintf(got, sizeof got, "%s/gpt_outliers.dynfb.ort/0.npy", dir);
    double fb = tu_npy_sqnr(ref, got);
    cr_log_info("gpt_outliers, ORT on unseen samples: int8-dynamic %.1f dB; with the fallback (%d of 17 in f32) %.1f dB",
                all, sent, fb);
    cr_expect_lt(all, 25.0, "int8-dynamic alone: %.1f dB", all);
    cr_expect_geq(fb, 32.0, "with the fallback at 35 dB: %.1f dB on unseen samples", fb);
}

/* The shipped recipes' margin (recipes/int8-dynamic-margin.qrl: int8-dynamic-fallback.qrl judged at
 * 32 dB instead of 25) on the outlier decoder: its held-out judge passes the 25 dB recipe's export
 * at 26.2 dB (1 of 17 values back), and ONNX Runtime on the 16 test samples against PyTorch's f32
 * outputs gives it 21.8; the margin sends more back (3 measured) and that export holds 25 on them
 * (25.6 measured). The oracle is PyTorch's f32 run; nothing here was judged on the test samples. */
Test(dynamic, the_margin_recipe_holds_the_target_on_unseen_samples)
{
    static const char *const recipes[2] = {"int8-dynamic-fallback", "int8-dynamic-margin"};
    int sent[2];
    double db[2];
    for (int r = 0; r < 2; r++) {
        int rc;
        char *log = quantize("gpt_outliers", recipes[r], &rc), ref[1024], got[1024];
        cr_assert_eq(rc, 0, "%s", log);
        const char *note = "the fallback sent ", *at = strstr(log, note);
        sent[r] = at ? atoi(at + strlen(note)) : -1;
        cr_expect(at && strstr(at, " of the 17 values quantized at run time to f32"), "%s", log);
        free(log);
        ort_outputs("gpt_outliers", recipes[r], 0);
        snprintf(ref, sizeof ref, "%s/gpt_outliers_test_f32.npy", dir);
        snprintf(got, sizeof got, "%s/gpt_outliers.%s.ort/0.npy", dir, recipes[r]);
        db[r] = tu_npy_sqnr(ref, got);
    }
    cr_log_info("gpt_outliers, ORT on unseen samples: %s %.1f dB (%d of 17 in f32), %s %.1f dB (%d)", recipes[0], db[0],
                sent[0], recipes[1], db[1], sent[1]);
    cr_expect_gt(sent[1], sent[0], "the margin sends more back: %d against %d", sent[1], sent[0]);
    cr_expect_geq(db[1], 25.0, "int8-dynamic-margin on unseen samples: %.1f dB", db[1]);
}

/* The export says what QRL's integer graph computes: ORT without its graph optimizations runs the
 * file's DynamicQuantizeLinear (or the per-row formula in standard ops), DequantizeLinear and
 * float products as ONNX defines them. They are not the same bits: the export's products are
 * float sums of dequantized values, the integer graph's exact int32 sums scaled once, so a value
 * differs in its last bits, and a run-time range that moves by one ulp can move a rounding by a
 * step. The encoder's outputs agree to about 135 dB; in the decoder such steps happen and grow
 * through its layers and LM head (about 48 dB per tensor, 51 per row, 40 for the worst sample). */
Test(dynamic, integer_graph_agrees_with_ort_on_the_export)
{
    const double floor[] = {100.0, 45.0};
    char a[1024], b[1024];
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < 2; r++) {
            int rc;
            char *log = quantize(models[m], recipes[r], &rc);
            cr_assert_eq(rc, 0, "%s", log);
            free(log);
            qrl_int_outputs(models[m], recipes[r]);
            ort_outputs(models[m], recipes[r], 1);
            snprintf(a, sizeof a, "%s/%s.%s.ort_plain/0.npy", dir, models[m], recipes[r]);
            snprintf(b, sizeof b, "%s/%s.%s.qrl.npy", dir, models[m], recipes[r]);
            double db = tu_npy_sqnr(a, b);
            cr_log_info("%s %s: QRL's integer graph against ORT without optimizations on the export: %.1f dB",
                        models[m], recipes[r], db);
            cr_expect_geq(db, floor[m], "%s %s: the integer graph and the export's ONNX definition differ: %.1f dB",
                          models[m], recipes[r], db);
        }
}

/* qrl run of the per-row export itself: its float chains of per-row quantization (ReduceMin,
 * ReduceMax, ..., Round, Clip) and each MatMul by an i8 weight (or by attention's per-tensor second
 * operand) run as DynamicQuantizeRows and MatMulInteger (runtime/pass_dynrows.c): no ReduceMax or
 * f32 MatMul is left in the profile, and the outputs agree with ONNX Runtime's run of the file's
 * ONNX definition (no optimizations) as the recipe's own integer graph does above, and with the
 * recipe's integer graph in memory. */
Test(dynamic, qrl_runs_the_per_row_export_on_integers)
{
    const double floor[] = {100.0, 45.0};
    char a[1024], b[1024];
    for (int m = 0; m < 2; m++) {
        int rc;
        char *log = quantize(models[m], recipes[0], &rc);
        cr_assert_eq(rc, 0, "%s", log);
        free(log);
        log = tu_sh("cd '%s' && %s run %s.%s.onnx -i %s_one_0.npy -o %s.file_prof --profile", dir, tu_qrl(),
                    models[m], recipes[0], models[m], models[m]);
        cr_assert(strstr(log, "DynamicQuantizeRows") && strstr(log, "QrlMatMulScaled"), "%s", log);
        cr_assert(!strstr(log, "ReduceMax") && !strstr(log, "  MatMul "), "%s: float chains left:\n%s", models[m], log);
        /* the feed-forward's GELU chain (Div, Erf, Add, Mul, Mul) runs inside the DynamicQuantizeRows
         * that reads it (exec.c fuse_gelu): no node of it is timed */
        cr_expect(!strstr(log, "  Div ") && !strstr(log, "  Erf "), "%s: the GELU chain ran apart:\n%s", models[m], log);
        free(log);
        /* the products fused with their scaling (QrlMatMulScaled) give the chain's bytes (fuse=0:
         * MatMulInteger, Cast, Mul, Mul, Add), by 1 and 2 threads */
        log = tu_sh("cd '%s' && %s run %s.%s.onnx -i %s_one_0.npy -o %s.file_chain --option fuse=0 && "
                    "%s run %s.%s.onnx -i %s_one_0.npy -o %s.file_two --threads 2 && "
                    "cmp %s.file_chain/*.npy %s.file_prof/*.npy && cmp %s.file_chain/*.npy %s.file_two/*.npy && echo same",
                    dir, tu_qrl(), models[m], recipes[0], models[m], models[m], tu_qrl(), models[m], recipes[0],
                    models[m], models[m], models[m], models[m], models[m], models[m]);
        cr_expect(strstr(log, "same"), "%s: the fused products and the chain differ:\n%s", models[m], log);
        free(log);
        log = tu_sh("cd '%s' && %s run %s.%s.onnx -i %s_one_0.npy -o %s.file_chain --option fuse=0 --profile", dir,
                    tu_qrl(), models[m], recipes[0], models[m], models[m]);
        cr_expect(strstr(log, "MatMulInteger") && !strstr(log, "QrlMatMulScaled"), "%s: fuse=0 fused:\n%s", models[m], log);
        free(log);
        log = tu_sh("cd '%s' && for i in $(seq 0 %d); do %s run %s.%s.onnx -i %s_one_$i.npy -o %s.file_$i || exit 1; "
                    "done && /usr/bin/python3 -c \"import numpy as np, os\nouts = []\nfor i in range(%d):\n"
                    "  d = '%s.file_%%d' %% i\n  outs.append(np.load(os.path.join(d, os.listdir(d)[0])))\n"
                    "np.save('%s.file.npy', np.concatenate(outs))\"",
                    dir, NTEST - 1, tu_qrl(), models[m], recipes[0], models[m], models[m], NTEST, models[m], models[m]);
        free(log);
        ort_outputs(models[m], recipes[0], 1);
        qrl_int_outputs(models[m], recipes[0]);
        snprintf(a, sizeof a, "%s/%s.%s.ort_plain/0.npy", dir, models[m], recipes[0]);
        snprintf(b, sizeof b, "%s/%s.file.npy", dir, models[m]);
        double db = tu_npy_sqnr(a, b);
        cr_log_info("%s: qrl run of the export against ORT on its ONNX definition: %.1f dB", models[m], db);
        cr_expect_geq(db, floor[m], "%s: qrl run of the export and its ONNX definition differ: %.1f dB", models[m], db);
        snprintf(a, sizeof a, "%s/%s.%s.qrl.npy", dir, models[m], recipes[0]);
        db = tu_npy_sqnr(a, b);
        cr_log_info("%s: qrl run of the export against the recipe's integer graph: %.1f dB", models[m], db);
        cr_expect_geq(db, floor[m], "%s: qrl run of the export and the integer graph differ: %.1f dB", models[m], db);
    }
}

/* Run-time quantization is DynamicQuantizeLinear's formula, u8: a recipe with other activations
 * stops with the value and the type, and writes nothing. */
Test(dynamic, dynamic_role_needs_u8_activations)
{
    char path[1024], cmd[4096], out[1024], *log;
    write_recipe(dir, "i8.qrl", "i8_dynamic",
                 "  activation = i8 symmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                 "  use linear_dynamic\n",
                 path, sizeof path);
    snprintf(out, sizeof out, "%s/i8.onnx", dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize '%s/bert.onnx' --recipe '%s' --calib '%s/bert_calib.npy' -o '%s'",
             tu_root(), tu_qrl(), dir, path, dir, out);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "quantized at run time") && strstr(log, "u8") && strstr(log, "i8"), "%s", log);
    cr_expect(!tu_file_exists(out), "a failed quantize wrote %s", out);
    free(log);
}

/* A Linear reading another Linear's output directly: the first one's output is the second one's
 * dynamic input, and both count as integer MACs (the input's run-time quantization does not
 * hide its producer's kernel). */
Test(dynamic, back_to_back_linears_both_count)
{
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \"import numpy as np, onnx; from onnx import helper as h, numpy_helper as nh, "
             "TensorProto as T\nr = np.random.default_rng(1)\n"
             "w = [nh.from_array(r.normal(size=s).astype(np.float32), n) for n, s in "
             "(('w1', (8, 16)), ('b1', (16,)), ('w2', (16, 4)), ('b2', (4,)))]\n"
             "n = [h.make_node('MatMul', ['x', 'w1'], ['m1']), h.make_node('Add', ['m1', 'b1'], ['h']), "
             "h.make_node('MatMul', ['h', 'w2'], ['m2']), h.make_node('Add', ['m2', 'b2'], ['y'])]\n"
             "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, ['N', 3, 8])], "
             "[h.make_tensor_value_info('y', T.FLOAT, ['N', 3, 4])], w)\n"
             "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), 'two.onnx')\n"
             "np.save('two_calib.npy', r.normal(size=(8, 3, 8)).astype(np.float32))\"",
             dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (int r = 0; r < 2; r++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize '%s/two.onnx' --recipe recipes/%s.qrl --calib '%s/two_calib.npy' "
                 "-o '%s/two.%s.onnx' --report '%s/two.%s.json'",
                 tu_root(), tu_qrl(), dir, recipes[r], dir, dir, recipes[r], dir, recipes[r]);
        int rc = tu_run(cmd, &log);
        cr_assert_eq(rc, 0, "%s", log);
        double total = report_number("two", recipes[r], "macs_per_sample"),
               ints = report_number("two", recipes[r], "macs_int_per_sample");
        cr_expect_float_eq(total, 3.0 * 8 * 16 + 3.0 * 16 * 4, 0.5, "%.0f MACs per sample", total);
        cr_expect_float_eq(ints, total, 0.5, "%s: %.0f of %.0f MACs in integers\n%s", recipes[r], ints, total, log);
        free(log);
    }
}

/* ------------------------------------------------------------ convolutions */

/* tools/make_dynamic_cnn.py's CNN: five Convs (stride 2, dilation 2 with group 2, a 3x1 kernel with
 * stride (1, 2), a depthwise, a pointwise; with and without bias) and a Linear, random weights of
 * both signs; its oracle of the dynamic quantization (numpy/torch from the ONNX definitions). */
static char *cdir;

static void cnn_setup(void)
{
    cdir = tu_tmpdir();
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_dynamic_cnn.py' '%s' 2>&1", tu_root(), cdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void cnn_teardown(void)
{
    tu_rmdir(cdir);
}

TestSuite(dynamic_cnn, .init = cnn_setup, .fini = cnn_teardown, .timeout = 600);

/* Multiply-accumulates per sample by hand (16x16 input): c1 8x8x8 outputs of 3x3x3, c2 8x8x8 of
 * 4x3x3 (group 2), c3 16x8x4 of 8x3x1, c4 16x8x4 of 3x3 (depthwise), c5 12x8x4 of 16, the Linear
 * 10 of 12. */
#define CNN_MACS (512.0 * 27 + 512.0 * 36 + 512.0 * 24 + 512.0 * 9 + 384.0 * 16 + 10.0 * 12)

/* qrl quantize the CNN with recipes/RECIPE.qrl (or the recipe file PATH): CDIR/cnn.TAG.onnx, .json
 * (report), .txt (integer graph), .qp.json (qparams); then QRL's integer graph on the test batch
 * (CDIR/cnn.TAG.qrl/y.npy) and ONNX Runtime on the export, optimized and not
 * (CDIR/cnn.TAG.ort/y.npy, .ort_plain/y.npy). */
static void cnn_quantize_and_run(const char *recipe, const char *tag)
{
    char cmd[4096], rpath[1024], *log;
    if (strchr(recipe, '/'))
        snprintf(rpath, sizeof rpath, "%s", recipe);
    else
        snprintf(rpath, sizeof rpath, "recipes/%s.qrl", recipe);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize '%s/cnn.onnx' --recipe '%s' --calib '%s/cnn_calib.npy' -o '%s/cnn.%s.onnx' "
             "--report '%s/cnn.%s.json' --int-graph '%s/cnn.%s.txt' --qparams '%s/cnn.%s.qp.json' && "
             "%s run '%s/cnn.onnx' --recipe '%s' --calib '%s/cnn_calib.npy' -i '%s/cnn_test.npy' -o '%s/cnn.%s.qrl' && "
             "node tools/ort_run.js '%s/cnn.%s.onnx' '%s/cnn_test.npy' -o '%s/cnn.%s.ort' && "
             "ORT_OPT_LEVEL=disabled node tools/ort_run.js '%s/cnn.%s.onnx' '%s/cnn_test.npy' -o '%s/cnn.%s.ort_plain'",
             tu_root(), tu_qrl(), cdir, rpath, cdir, cdir, tag, cdir, tag, cdir, tag, cdir, tag, tu_qrl(), cdir, rpath,
             cdir, cdir, cdir, tag, cdir, tag, cdir, cdir, tag, cdir, tag, cdir, cdir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", recipe, log);
    free(log);
}

static double cnn_sqnr(const char *ref, const char *tag, const char *got)
{
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/%s", cdir, ref);
    snprintf(b, sizeof b, "%s/cnn.%s.%s/y.npy", cdir, tag, got);
    return tu_npy_sqnr(a, b);
}

/* The export's operators, in order, one a line (onnx, independent of QRL's reader). */
static char *cnn_export_ops(const char *tag)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx\nm = onnx.load('%s/cnn.%s.onnx')\nonnx.checker.check_model(m)\n"
             "print('\\n'.join(n.op_type for n in m.graph.node))\"",
             cdir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    return log;
}

static int count_lines(const char *s, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = s; (p = strstr(p, line)); p += len)
        n += (p == s || p[-1] == '\n') && (p[len] == '\n' || !p[len]);
    return n;
}

/* Both dynamic recipes quantize every Conv at run time per tensor (a Conv has no per-row choice),
 * the Linear per tensor or per row: every MAC runs on integers, as ConvInteger in the integer graph
 * (QrlConvKernel: ConvInteger with the kernel as its epilogue) and in the export (DynamicQuantizeLinear, ConvInteger, Cast, Mul, Add: ONNX Runtime's
 * quantize_dynamic form, no float Conv left); QRL's integer graph and ONNX Runtime on the export
 * both give the oracle's outputs, up to the last bits of the f32 arithmetic. */
Test(dynamic_cnn, convs_quantized_at_run_time_match_the_oracle_in_qrl_and_ort)
{
    static const char *const oracle[] = {"cnn_test_dynamic_rows.npy", "cnn_test_dynamic.npy"};
    for (int r = 0; r < 2; r++) {
        cnn_quantize_and_run(recipes[r], recipes[r]);
        char path[1024];
        snprintf(path, sizeof path, "%s/cnn.%s.json", cdir, recipes[r]);
        double total = tu_json_number(path, "macs_per_sample"), ints = tu_json_number(path, "macs_int_per_sample");
        cr_expect_float_eq(total, CNN_MACS, 0.5, "%.0f MACs per sample, by hand %.0f", total, CNN_MACS);
        cr_expect_float_eq(ints, total, 0.5, "%s: %.0f of %.0f MACs in integers", recipes[r], ints, total);
        snprintf(path, sizeof path, "%s/cnn.%s.txt", cdir, recipes[r]);
        char *ig = tu_slurp(path), *ops = cnn_export_ops(recipes[r]);
        int nconv = 0; /* ConvInteger with qconv_dynamic as its epilogue, fused */
        for (const char *p = ig; (p = strstr(p, "_qconv_dynamic_/c")); p++)
            nconv += !strncmp(strchr(p, ':') ? strchr(p, ':') : p, ": qrl.QrlConvKernel(", 20);
        cr_expect_eq(nconv, 5, "%s: %d Convs run as ConvInteger + qconv_dynamic\n%s", recipes[r], nconv, ig);
        cr_expect_eq(count_lines(ops, "ConvInteger"), 5, "%s: the export's ops:\n%s", recipes[r], ops);
        cr_expect_eq(count_lines(ops, "Conv"), 0, "%s: a float Conv left in the export:\n%s", recipes[r], ops);
        cr_expect_geq(count_lines(ops, "DynamicQuantizeLinear"), 5, "%s", ops);
        free(ig);
        free(ops);
        double q = cnn_sqnr(oracle[r], recipes[r], "qrl"), o = cnn_sqnr(oracle[r], recipes[r], "ort"),
               p = cnn_sqnr(oracle[r], recipes[r], "ort_plain"), f = cnn_sqnr("cnn_test_f32.npy", recipes[r], "qrl");
        cr_log_info("cnn %s: against the oracle QRL %.1f dB, ORT %.1f dB (without optimizations %.1f dB); "
                    "QRL against f32 %.1f dB",
                    recipes[r], q, o, p, f);
        cr_expect_geq(q, 100.0, "%s: QRL's integer graph against the oracle: %.1f dB", recipes[r], q);
        cr_expect_geq(o, 100.0, "%s: ORT on the export against the oracle: %.1f dB", recipes[r], o);
        cr_expect_geq(p, 100.0, "%s: ORT without optimizations against the oracle: %.1f dB", recipes[r], p);
    }
}

/* Asymmetric weights have a zero point per output channel, which ONNX Runtime's ConvInteger
 * refuses: the export keeps DynamicQuantizeLinear -> DequantizeLinear -> Conv (ORT runs it in
 * float, the same values), while QRL's integer graph still runs ConvInteger. */
Test(dynamic_cnn, asymmetric_weights_keep_the_qdq_form)
{
    char path[1024];
    write_recipe(cdir, "asym.qrl", "asym_dynamic",
                 "  activation = u8 asymmetric by minmax()\n  weight = i8 asymmetric per_channel by minmax()\n"
                 "  use conv_dynamic, gemm_dynamic\n",
                 path, sizeof path);
    cnn_quantize_and_run(path, "asym");
    char *ops = cnn_export_ops("asym");
    cr_expect_eq(count_lines(ops, "ConvInteger"), 0, "%s", ops);
    cr_expect_eq(count_lines(ops, "Conv"), 5, "%s", ops);
    free(ops);
    snprintf(path, sizeof path, "%s/cnn.asym.txt", cdir);
    char *ig = tu_slurp(path);
    cr_expect(strstr(ig, "_qconv_dynamic_/c1/Conv_output_0: qrl.QrlConvKernel("), "the integer graph:\n%s", ig);
    free(ig);
    char ref[1024];
    snprintf(ref, sizeof ref, "cnn.asym.qrl/y.npy");
    double o = cnn_sqnr(ref, "asym", "ort_plain"), f32 = cnn_sqnr("cnn_test_f32.npy", "asym", "qrl");
    cr_log_info("cnn, asymmetric weights: QRL against ORT on the QDQ export %.1f dB, against f32 %.1f dB", o, f32);
    cr_expect_geq(o, 80.0, "QRL's integer graph and ORT on the export: %.1f dB", o);
}

/* The MACs each value quantized at run time keeps on the integers (the report's macs_needing, which
 * order = per_mac divides its error by), by hand from the layer sizes (CNN_MACS's terms): the input
 * feeds c1, c1's output c2, and so on, the Linear's input its 120. */
Test(dynamic_cnn, report_counts_the_macs_each_run_time_value_keeps)
{
    char path[1024], cmd[4096], *log;
    write_recipe(cdir, "fbmacs.qrl", "dyn_fallback",
                 "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = "
                 "true)\n  fallback = f32 when output_sqnr < 5\n  use conv_dynamic, gemm_dynamic\n",
                 path, sizeof path);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s quantize '%s/cnn.onnx' --recipe '%s' --calib '%s/cnn_calib.npy' -o '%s/cnn.macs.onnx' "
             "--report '%s/cnn.macs.json' --quiet && /usr/bin/python3 -c \"import json\n"
             "r = json.load(open('%s/cnn.macs.json'))\n"
             "print(sorted(int(l['macs_needing']) for l in r['layers'] if l.get('dynamic')))\"",
             tu_root(), tu_qrl(), cdir, path, cdir, cdir, cdir, cdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_expect(strstr(log, "[120, 4608, 6144, 12288, 13824, 18432]"), "by hand: 512 x 27, 512 x 36, 512 x 24, 512 x 9, "
              "384 x 16 and 10 x 12; the report: %s", log);
    free(log);
}

/* The SQNR against f32 of the dynamic recipes next to static int8 (recipes/int8.qrl, calibrated on
 * cnn_calib.npy) on the same CNN: logged for docs/quantizer.md; dynamic is at least static's. */
Test(dynamic_cnn, sqnr_next_to_static_int8)
{
    cnn_quantize_and_run("int8", "int8");
    cnn_quantize_and_run("int8-dynamic-tensor", "dyn");
    double s = cnn_sqnr("cnn_test_f32.npy", "int8", "qrl"), d = cnn_sqnr("cnn_test_f32.npy", "dyn", "qrl"),
           so = cnn_sqnr("cnn_test_f32.npy", "int8", "ort"), dd = cnn_sqnr("cnn_test_f32.npy", "dyn", "ort");
    cr_log_info("cnn against f32: dynamic per tensor QRL %.1f dB (ORT %.1f), static int8 QRL %.1f dB (ORT %.1f)", d,
                dd, s, so);
    cr_expect_geq(d, s, "dynamic %.1f dB, static %.1f dB", d, s);
}

/* The reports list what is quantized at run time (QRL-H item 4): in --qparams and --report's JSON
 * every dynamic input as dynamic (per tensor, or per row for int8-dynamic's Linear), without a
 * scale, zero point or clip range, with the range PyTorch saw on the calibration samples
 * (tests/e2e/dynamic_report_check.py); the HTML report lists them too; the summary counts them. */
Test(dynamic_cnn, reports_list_run_time_quantization)
{
    for (int r = 0; r < 2; r++) {
        char cmd[4096], *log;
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && %s quantize '%s/cnn.onnx' --recipe recipes/%s.qrl --calib '%s/cnn_calib.npy' "
                 "-o '%s/r.onnx' --qparams '%s/r.qp.json' --report '%s/r.json' && %s quantize '%s/cnn.onnx' "
                 "--recipe recipes/%s.qrl --calib '%s/cnn_calib.npy' -o '%s/r.onnx' --report '%s/r.html' && "
                 "/usr/bin/python3 tests/e2e/dynamic_report_check.py '%s/r.qp.json' '%s/r.json' "
                 "'%s/cnn_calib_ranges.json' %d",
                 tu_root(), tu_qrl(), cdir, recipes[r], cdir, cdir, cdir, cdir, tu_qrl(), cdir, recipes[r], cdir, cdir,
                 cdir, cdir, cdir, cdir, r == 0 ? 1 : 0);
        cr_expect_eq(tu_run(cmd, &log), 0, "%s: %s", recipes[r], log);
        cr_expect(strstr(log, "0 activations, 6 quantized at run time (dynamic), 6 weights"), "%s: %s", recipes[r],
                  log);
        free(log);
        snprintf(cmd, sizeof cmd, "%s/r.html", cdir);
        char *html = tu_slurp(cmd);
        cr_expect(strstr(html, "<td>/LeakyRelu_output_0</td><td>LeakyRelu</td><td>dynamic per tensor</td><td>u8</td>"),
                  "%s: the HTML report does not list /LeakyRelu_output_0 as dynamic", recipes[r]);
        cr_expect(strstr(html, r == 0 ? "<td>dynamic per row</td>" : "<td>x</td><td>input</td><td>dynamic per tensor"),
                  "%s: the HTML report", recipes[r]);
        free(html);
    }
}

/* A dynamic recipe's fallback sends values quantized at run time to f32, each with the matches that
 * read it so (their weights too), until the outputs meet its condition, and a note counts them.
 * The CNN quantized per tensor at run time is 30-40 dB from f32: a condition of 200 dB takes all 6
 * back (the export, read with onnx: no DynamicQuantizeLinear, no ConvInteger, and ONNX Runtime on
 * it gives f32's outputs), one of 5 dB none (all 5 ConvIntegers stay); neither misses. A condition
 * no output meets (a cosine under 2) sends all 6 back and says that what ships misses it. With
 * search_floor = 100 (every try of the 200 dB condition under it) the search gives up at once. */
Test(dynamic_cnn, the_fallback_sends_values_quantized_at_run_time_to_f32)
{
    static const char *const conds[4] = {"output_sqnr < 200", "output_sqnr < 5", "output_cosine < 2",
                                         "output_sqnr < 200\n  search_floor = 100"};
    static const char *const tags[4] = {"fb200", "fb5", "fbnever", "fbfloor"};
    static const int back[4] = {6, 0, 6, 6};
    int ntries[4] = {0};
    for (int t = 0; t < 4; t++) {
        char path[1024], body[512], note[256], *log;
        snprintf(body, sizeof body,
                 "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = "
                 "true)\n  fallback = f32 when %s\n  use conv_dynamic, gemm_dynamic\n",
                 conds[t]);
        write_recipe(cdir, "fb.qrl", "dyn_fallback", body, path, sizeof path);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "cd '%s' && %s quantize '%s/cnn.onnx' --recipe '%s' --calib '%s/cnn_calib.npy' -o '%s/cnn.%s.onnx' --profile",
                 tu_root(), tu_qrl(), cdir, path, cdir, cdir, tags[t]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        for (const char *p = log; (p = strstr(p, " run-time values in f32 on ")); p++)
            ntries[t]++;
        snprintf(note, sizeof note, "note: recipe 'dyn_fallback': the fallback sent %d of the 6 values quantized at run time to f32",
                 back[t]);
        cr_expect(strstr(log, note), "%s: %s", conds[t], log);
        cr_expect_eq(strstr(log, "note: recipe 'dyn_fallback': what ships misses its fallback condition on the outputs") != NULL,
                     t == 2, "%s: %s", conds[t], log);
        free(log);
        char *ops = cnn_export_ops(tags[t]);
        cr_expect_eq(count_lines(ops, "DynamicQuantizeLinear"), back[t] ? 0 : 6, "%s", ops);
        cr_expect_eq(count_lines(ops, "ConvInteger"), back[t] ? 0 : 5, "%s", ops);
        free(ops);
    }
    /* search_floor as the slots' search reads it: outputs under it with every value quantized and
     * with the worse half in f32 send every one back at once (tries 0, 3, 6), no effects or bisection */
    cr_expect_eq(ntries[3], 3, "search_floor: %d tries", ntries[3]);
    cr_expect_gt(ntries[0], 3, "without it: %d tries", ntries[0]);
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "cd '%s' && node tools/ort_run.js '%s/cnn.fb200.onnx' '%s/cnn_test.npy' -o '%s/cnn.fb200.ort'",
             tu_root(), cdir, cdir, cdir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    double db = cnn_sqnr("cnn_test_f32.npy", "fb200", "ort");
    cr_expect_geq(db, 100.0, "every value back in f32: ORT on the export %.1f dB from f32", db);
}
