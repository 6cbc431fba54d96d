/* Int4 (QRL-I): packed 4-bit tensors (QR_I4, QR_U4) against numpy's packing, and models with
 * INT4/UINT4 blocked DequantizeLinear (K = 37, blocks of 16: a ragged last block of 5) feeding
 * MatMul and Gemm (transB = 1), run by QRL against numpy's result and by ONNX Runtime against
 * QRL's. The models and the oracles come from tools/make_int4_models.py, which packs with numpy. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "tensor.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_int4_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(int4, .init = setup, .fini = teardown, .timeout = 300);

/* values_T.npy (int8 or uint8) packed by qr_set_i64 must be numpy's packed_T.bin byte for byte,
 * and qr_get_i64 / qr_get_f64 of numpy's bytes must give the values back. */
static void check_packing(const char *name, qr_dtype t)
{
    char path[4096];
    qr_tensor v;
    qr_error e = {{0}};
    snprintf(path, sizeof path, "%s/values_%s.npy", dir, name);
    cr_assert_eq(qr_npy_read(path, &v, &e), QR_OK, "%s", e.msg);
    int64_t n = qr_tensor_numel(&v);
    cr_assert(n % 2 == 1, "an odd count tests the last byte's empty high nibble");
    size_t nb = qr_dtype_bytes(t, n);
    cr_assert_eq(nb, (size_t)(n + 1) / 2);
    snprintf(path, sizeof path, "%s/packed_%s.bin", dir, name);
    char *want = tu_slurp(path);
    uint8_t *got = calloc(nb, 1);
    memset(got, 0xa5, nb); /* the high nibble of the last byte must be cleared by nobody but the packer */
    got[nb - 1] = 0;
    for (int64_t i = 0; i < n; i++)
        qr_set_i64(got, t, i, qr_get_i64(v.data, v.dtype, i));
    cr_assert(memcmp(got, want, nb) == 0, "%s: QRL's packing differs from numpy's", name);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(qr_get_i64(want, t, i), qr_get_i64(v.data, v.dtype, i), "%s element %lld", name, (long long)i);
        cr_assert_eq(qr_get_f64(want, t, i), qr_get_f64(v.data, v.dtype, i), "%s element %lld", name, (long long)i);
    }
    /* qr_set_f64 saturates to the type's range */
    qr_set_f64(got, t, 0, 100.0);
    cr_assert_eq(qr_get_i64(got, t, 0), t == QR_I4 ? 7 : 15);
    qr_set_f64(got, t, 1, -100.0);
    cr_assert_eq(qr_get_i64(got, t, 1), t == QR_I4 ? -8 : 0);
    free(got);
    free(want);
    qr_tensor_free(&v);
}

Test(int4, packing_matches_numpy)
{
    check_packing("i4", QR_I4);
    check_packing("u4", QR_U4);
    cr_assert_eq(qr_dtype_from_onnx(22), QR_I4);
    cr_assert_eq(qr_dtype_from_onnx(21), QR_U4);
    cr_assert_eq(qr_dtype_bits(QR_I4), 4);
    cr_assert_eq(qr_dtype_bits(QR_I16), 16);
    cr_assert_str_eq(qr_dtype_name(QR_U4), "u4");
}

/* `qrl run` of the model within 1e-5 (relative to the output's largest value) of numpy's result,
 * then ONNX Runtime's run of the same file within the same of QRL's. ORT fuses DequantizeLinear
 * + MatMul into MatMulNBits, which by default (session.qdq_matmulnbits_accuracy_level 4)
 * quantizes the activations to int8: tools/ort_run.js sets level 0 (f32 activations), the
 * model's own arithmetic. */
/* `qrl run` of dir/model.onnx on x.npy within 1e-5 of the largest |ref| of dir/ref, then ONNX
 * Runtime's run of the file within the same of QRL's. */
static void run_both(const char *model, const char *ref_name)
{
    char cmd[8192], *log, ref[4096], got[4096];
    snprintf(cmd, sizeof cmd, "%s run %s/%s.onnx -i %s/x.npy -o %s/qrl_%s", tu_qrl(), dir, model, dir, dir, model);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(ref, sizeof ref, "%s/%s", dir, ref_name);
    snprintf(got, sizeof got, "%s/qrl_%s/Y.npy", dir, model);
    double d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < 1e-5, "%s: QRL vs numpy: %g", model, d);
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/%s.onnx %s/x.npy -o %s/ort_%s", tu_root(), dir, model, dir,
             dir, model);
    cr_assert_eq(tu_run(cmd, &log), 0, "onnxruntime-node failed: %s", log);
    free(log);
    snprintf(ref, sizeof ref, "%s/ort_%s/Y.npy", dir, model);
    d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < 1e-5, "%s: ORT vs QRL: %g", model, d);
}

static void check_model(const char *model)
{
    char ref[256];
    snprintf(ref, sizeof ref, "%s_y.npy", model);
    run_both(model, ref);
}

/* A packed tensor read by another op than DequantizeLinear: an error naming the node and type. */
Test(int4, transpose_of_a_packed_tensor_is_refused)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "%s run %s/int4_transpose.onnx -i %s/x.npy -o %s/bad", tu_qrl(), dir, dir, dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "has type i4 (packed 4-bit), which only DequantizeLinear reads"), "%s", log);
    cr_assert(!strstr(log, "Sanitizer"), "%s", log);
    free(log);
}

Test(int4, blocked_dequantize_matmul_in_qrl_and_ort)
{
    check_model("dq_matmul");
}

Test(int4, blocked_dequantize_gemm_transb_in_qrl_and_ort)
{
    check_model("dq_gemm");
}

/* Weight-only quantization (activation = f32) of f32_chain.onnx (MatMul, Gemm, Gemm transB with
 * alpha; K 37, 40, 24: ragged last blocks) by the recipe `body` (or the file `file`): numpy's RTN
 * (tests/e2e/int4_rtn_oracle.py) must give the export's integers, scales and zero points bit for
 * bit, numpy's f32 ops on the dequantized weights QRL's run of the export, and ONNX Runtime's run
 * of it QRL's. */
static void check_weight_only(const char *tag, const char *file, const char *body, const char *mode, int block,
                              int nbits)
{
    char cmd[8192], *log, recipe[4096], ref[256];
    if (file) {
        snprintf(recipe, sizeof recipe, "%s/%s", tu_root(), file);
    } else {
        snprintf(recipe, sizeof recipe, "%s/%s.qrl", dir, tag);
        FILE *f = fopen(recipe, "w");
        cr_assert(f);
        fprintf(f, "import \"calibrators.qrl\"\nrecipe %s {\n  activation = f32\n%s}\n", tag, body);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s quantize %s/f32_chain.onnx --recipe %s --calib %s/x.npy -o %s/%s.onnx", tu_qrl(),
             dir, recipe, dir, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "3 quantized (weight-only"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/int4_rtn_oracle.py' %s/f32_chain.onnx %s/%s.onnx %s %d %s/x.npy "
             "%s/%s_numpy.npy", tu_root(), dir, dir, tag, mode, block, dir, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s", tag, log);
    cr_assert(strstr(log, "ok 3"), "%s: %s", tag, log);
    free(log);
    if (nbits) { /* the same integers as com.microsoft MatMulNBits: what runs from here on */
        snprintf(cmd, sizeof cmd, "%s quantize %s/f32_chain.onnx --recipe %s --calib %s/x.npy -o %s/%s.onnx "
                 "--weight-format matmulnbits && /usr/bin/python3 -c \"import onnx; "
                 "print([n.op_type for n in onnx.load('%s/%s.onnx').graph.node])\"", tu_qrl(), dir, recipe, dir, dir,
                 tag, dir, tag);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, "['MatMulNBits', 'MatMulNBits', 'MatMulNBits']"), "%s", log);
        free(log);
    }
    snprintf(ref, sizeof ref, "%s_numpy.npy", tag);
    run_both(tag, ref);
}

Test(int4, w4_rtn_recipe_blocks_of_32_match_numpy_and_ort)
{
    check_weight_only("w4_rtn", "recipes/w4-rtn.qrl", NULL, "sym", 32, 0);
}

/* The MatMulNBits form (--weight-format matmulnbits) of the same integers: QRL's MatMulNBits
 * kernel against numpy's f32 ops on the dequantized weights, ONNX Runtime's against QRL's. */
Test(int4, w4_rtn_as_matmulnbits_matches_numpy_and_ort)
{
    check_weight_only("w4_rtn_nbits", "recipes/w4-rtn.qrl", NULL, "sym", 32, 1);
}

Test(int4, i4_blocks_of_16_as_matmulnbits_match_numpy_and_ort)
{
    check_weight_only("w4s16_nbits", NULL, "  weight = i4 symmetric narrow by minmax(symmetric = true)\n  block = 16\n", "sym",
                      16, 1);
}

Test(int4, u4_zero_points_as_matmulnbits_match_numpy_and_ort)
{
    check_weight_only("w4a16_nbits", NULL, "  weight = u4 asymmetric by minmax()\n  block = 16\n", "asym", 16, 1);
}

Test(int4, i4_symmetric_blocks_of_16_match_numpy_and_ort)
{
    check_weight_only("w4s16", NULL, "  weight = i4 symmetric narrow by minmax(symmetric = true)\n  block = 16\n", "sym", 16, 0);
}

Test(int4, u4_asymmetric_blocks_with_zero_points_match_numpy_and_ort)
{
    check_weight_only("w4a16", NULL, "  weight = u4 asymmetric by minmax()\n  block = 16\n", "asym", 16, 0);
}

/* weight for: the two Gemms take i8, the MatMul keeps i4, all in the recipe's blocks of 16 (the
 * oracle's ",Gemm=sym8"); with the `for` setting ignored the oracle's types fail. */
Test(int4, weight_for_gemm_keeps_8_bits_beside_4_bit_blocks)
{
    check_weight_only("w4_for", NULL, "  weight = i4 symmetric narrow by minmax(symmetric = true)\n"
                      "  weight for Gemm = i8 symmetric narrow by minmax(symmetric = true)\n  block = 16\n",
                      "sym,Gemm=sym8", 16, 0);
}

/* --qparams lists weight-only weights: in blocks with u4 zero points (DequantizeLinear and
 * MatMulNBits), and i4 without zero points; the oracle reads them from the export. */
Test(int4, qparams_json_lists_weight_only_weights)
{
    static const char *const forms[][2] = {{"  weight = u4 asymmetric by minmax()\n  block = 16\n", ""},
                                           {"  weight = u4 asymmetric by minmax()\n  block = 16\n",
                                            " --weight-format matmulnbits"},
                                           {"  weight = i4 symmetric narrow by minmax(symmetric = true)\n"
                                            "  block = 32\n", " --weight-format matmulnbits"},
                                           {"  weight = i8 symmetric narrow per_channel by minmax(symmetric = true)\n",
                                            ""}};
    for (int i = 0; i < 4; i++) {
        char text[1024];
        snprintf(text, sizeof text, "import \"calibrators.qrl\"\nrecipe qj {\n  activation = f32\n%s}\n", forms[i][0]);
        tu_write_file(dir, "qj.qrl", text);
        char *log = tu_sh("cd %s && %s quantize f32_chain.onnx --recipe qj.qrl --calib x.npy -o qj%d.onnx --qparams "
                          "qj%d.json%s && /usr/bin/python3 '%s/tests/e2e/qparams_oracle.py' qj%d.onnx qj%d.json",
                          dir, tu_qrl(), i, i, forms[i][1], tu_root(), i, i);
        cr_assert(strstr(log, "ok 3"), "form %d: %s", i, log);
        free(log);
    }
}

Test(int4, i8_weight_only_per_channel_matches_numpy_and_ort)
{
    check_weight_only("w8ch", NULL, "  weight = i8 symmetric narrow per_channel by minmax(symmetric = true)\n", "sym8", 0, 0);
}

/* MatMulNBits files as ONNX Runtime's quantizer writes them (tools/make_nbits_models.py: numpy's
 * RTN and packing), run by QRL on its int4 kernels at accuracy_level 0 (f32 activations) and 4
 * (int8 activations, each row quantized per block as MLAS does): against numpy's oracle of each
 * numerics within 1e-5 of the largest |y| (the integer sums are exact; what is left is the f32
 * order of the per-block terms), ONNX Runtime's run of the same file against QRL's within the
 * same (at level 4 ORT's int8 activations are QRL's, so only that order differs), and
 * --kernels portable against the CPU's kernels bit for bit. */
static void check_nbits(const char *name, const char *spec)
{
    char cmd[8192], *log, ref[4096], got[4096], port[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_nbits_models.py' %s %s %s", tu_root(), dir, name, spec);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    for (int level = 0; level <= 4; level += 4) {
        snprintf(cmd, sizeof cmd, "%s run %s/%s_l%d.onnx -i %s/%s_x.npy -o %s/qrl_%s_%d && %s run --kernels portable "
                 "%s/%s_l%d.onnx -i %s/%s_x.npy -o %s/port_%s_%d", tu_qrl(), dir, name, level, dir, name, dir, name,
                 level, tu_qrl(), dir, name, level, dir, name, dir, name, level);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        free(log);
        snprintf(ref, sizeof ref, "%s/%s_y%d.npy", dir, name, level);
        snprintf(got, sizeof got, "%s/qrl_%s_%d/Y.npy", dir, name, level);
        snprintf(port, sizeof port, "%s/port_%s_%d/Y.npy", dir, name, level);
        double d = tu_npy_rel_diff(ref, got);
        cr_assert(d >= 0 && d < 1e-5, "%s level %d: QRL vs numpy: %g", name, level, d);
        cr_assert_eq(tu_npy_rel_diff(got, port), 0.0, "%s level %d: --kernels portable differs", name, level);
        snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' %s/%s_l%d.onnx %s/%s_x.npy -o %s/ort_%s_%d", tu_root(), dir,
                 name, level, dir, name, dir, name, level);
        cr_assert_eq(tu_run(cmd, &log), 0, "onnxruntime-node failed: %s", log);
        free(log);
        snprintf(ref, sizeof ref, "%s/ort_%s_%d/Y.npy", dir, name, level);
        d = tu_npy_rel_diff(ref, got);
        cr_assert(d >= 0 && d < 1e-5, "%s level %d: ORT vs QRL: %g", name, level, d);
    }
    /* the two numerics differ by A's int8 rounding: far more than the tolerance, so each check
     * above saw the numerics it names */
    snprintf(ref, sizeof ref, "%s/%s_y0.npy", dir, name);
    snprintf(got, sizeof got, "%s/qrl_%s_4/Y.npy", dir, name);
    cr_assert(tu_npy_rel_diff(ref, got) > 1e-4, "%s: level 4 ran f32 activations", name);
}

Test(int4, matmulnbits_kernels_one_row_zero_points_ragged)
{
    check_nbits("nb_zp", "200 70 32 1 --zp --seed 1");
}

Test(int4, matmulnbits_kernels_rows_symmetric_odd_k)
{
    check_nbits("nb_sym", "37 21 16 6 --seed 2");
}

Test(int4, matmulnbits_kernels_blocks_of_128)
{
    check_nbits("nb_128", "300 40 128 4 --zp --seed 3");
}

/* recipes/w4a8-dynamic.qrl (compute = int8): `qrl quantize --weight-format matmulnbits` states the
 * int8 activations as each MatMulNBits' accuracy_level 4; QRL's run of the export and ONNX
 * Runtime's agree within 1e-5 of max |y| and both differ from w4-rtn.qrl's f32 activations (the
 * same integers) by the activations' rounding. Without matmulnbits the DequantizeLinear form
 * cannot state it: refused, naming the node and the option. */
Test(int4, w4a8_dynamic_states_int8_activations_as_accuracy_level_4)
{
    char cmd[8192], *log, ref[4096], got[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_nbits_models.py' %s w4a8 200 70 32 3 --seed 4 --no-ref",
             tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "%s quantize %s/w4a8_f32.onnx --recipe '%s/recipes/w4a8-dynamic.qrl' --calib %s/w4a8_x.npy "
             "-o %s/w4a8_qdq.onnx", tu_qrl(), dir, tu_root(), dir, dir);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "compute = int8 needs its weight as a MatMulNBits (--weight-format matmulnbits)"), "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "test ! -e %s/w4a8_qdq.onnx", dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "a refused quantize left its output");
    free(log);
    const char *recipes[2] = {"w4a8-dynamic", "w4-rtn"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s quantize %s/w4a8_f32.onnx --recipe '%s/recipes/%s.qrl' --calib %s/w4a8_x.npy -o "
                 "%s/%s.onnx --weight-format matmulnbits && /usr/bin/python3 -c \"import onnx; print([(n.op_type, "
                 "[a.i for a in n.attribute if a.name == 'accuracy_level']) for n in onnx.load('%s/%s.onnx').graph.node])\" "
                 "&& %s run %s/%s.onnx -i %s/w4a8_x.npy -o %s/qrl_%s && node '%s/tools/ort_run.js' %s/%s.onnx "
                 "%s/w4a8_x.npy -o %s/ort_%s", tu_qrl(), dir, tu_root(), recipes[i], dir, dir, recipes[i], dir,
                 recipes[i], tu_qrl(), dir, recipes[i], dir, dir, recipes[i], tu_root(), dir, recipes[i], dir, dir,
                 recipes[i]);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        cr_assert(strstr(log, i == 0 ? "[('MatMulNBits', [4]), ('Add', [])]" : "[('MatMulNBits', []), ('Add', [])]"),
                  "%s: %s", recipes[i], log);
        free(log);
        snprintf(ref, sizeof ref, "%s/ort_%s/Y.npy", dir, recipes[i]);
        snprintf(got, sizeof got, "%s/qrl_%s/Y.npy", dir, recipes[i]);
        double d = tu_npy_rel_diff(ref, got);
        cr_assert(d >= 0 && d < 1e-5, "%s: ORT vs QRL: %g", recipes[i], d);
    }
    snprintf(ref, sizeof ref, "%s/qrl_w4-rtn/Y.npy", dir);
    snprintf(got, sizeof got, "%s/qrl_w4a8-dynamic/Y.npy", dir);
    cr_assert(tu_npy_rel_diff(ref, got) > 1e-4, "compute = int8 ran f32 activations");
}

/* compute = int8 without blocks (it quantizes activations per block of K): a recipe error at the
 * value, with its line and caret. */
Test(int4, compute_int8_needs_weight_only_blocks)
{
    char path[4096], cmd[8192], *log;
    snprintf(path, sizeof path, "%s/c8.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nrecipe c8 {\n  activation = f32\n  weight = i4 symmetric narrow by "
               "minmax(symmetric = true)\n  compute = int8\n}\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s check %s", tu_qrl(), path);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "c8.qrl:5:13: error: compute = int8 is for weight-only recipes in blocks"), "%s", log);
    cr_assert(strstr(log, "^~~~"), "%s", log);
    free(log);
}

/* The opset-21 form, DequantizeLinear(INT4 weight with zero points, blocks of 16 along K = 37)
 * into MatMul, runs as the MatMulNBits of the same integers on the int4 kernels (the profile
 * names it, and no DequantizeLinear is left), with the result blocked_dequantize_matmul checks
 * against numpy; --kernels portable gives the same bits. */
Test(int4, blocked_dequantize_matmul_runs_on_the_int4_kernels)
{
    char cmd[8192], *log, a[4096], b[4096];
    snprintf(cmd, sizeof cmd, "%s run %s/dq_matmul.onnx -i %s/x.npy -o %s/fused --profile && %s run --kernels portable "
             "%s/dq_matmul.onnx -i %s/x.npy -o %s/fused_port", tu_qrl(), dir, dir, dir, tu_qrl(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "MatMulNBits") && !strstr(log, "DequantizeLinear"), "%s", log);
    free(log);
    snprintf(a, sizeof a, "%s/fused/Y.npy", dir);
    snprintf(b, sizeof b, "%s/fused_port/Y.npy", dir);
    cr_assert_eq(tu_npy_rel_diff(a, b), 0.0);
    snprintf(b, sizeof b, "%s/dq_matmul_y.npy", dir);
    double d = tu_npy_rel_diff(b, a);
    cr_assert(d >= 0 && d < 1e-5, "QRL vs numpy: %g", d);
}

/* 520 rows: at f32 the weights dequantized into panels for the f32 GEMM (quant.c, MNB_GEMM_ROWS) */
Test(int4, matmulnbits_many_rows_on_the_f32_gemm)
{
    check_nbits("nb_520", "300 70 32 520 --zp --seed 5");
}
