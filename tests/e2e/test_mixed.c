/* Mixed precision (QRL-I 5): a weight-only recipe with candidates and a budget, on a five-layer
 * chain (tools/make_mixed_models.py). tests/e2e/mixed_oracle.py recomputes with numpy each layer's
 * bytes and output error under each choice, brute-forces every assignment, and counts the budget
 * in the exported file; ONNX Runtime runs the export against QRL's run; an unreachable budget is
 * an error naming where the recipe sets it, with no output file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
    char cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_mixed_models.py' %s", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(mixed, .init = setup, .fini = teardown, .timeout = 300);

/* dir/tag.qrl: a weight-only recipe with int4 weights, block 32, and the lines of body. */
static void write_recipe(const char *tag, const char *body, char *path, size_t n)
{
    snprintf(path, n, "%s/%s.qrl", dir, tag);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nrecipe %s {\n  activation = f32\n"
               "  weight = i4 symmetric narrow by minmax(symmetric = true)\n  block = 32\n%s}\n", tag, body);
    fclose(f);
}

/* Quantizes the chain with recipe tag (body as write_recipe's), checks it with the numpy oracle,
 * and returns qrl's printout (malloc'd). */
static char *quantize_checked(const char *tag, const char *body)
{
    char recipe[4096], cmd[8192], *log, *out;
    write_recipe(tag, body, recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/mlp.onnx --recipe %s --calib %s/x.npy -o %s/%s.onnx --report %s/%s.json",
             tu_qrl(), dir, recipe, dir, dir, tag, dir, tag);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/mixed_oracle.py' %s/mlp.onnx %s/%s.onnx %s/%s.json %s/x.npy 32",
             tu_root(), dir, dir, tag, dir, tag, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s: %s\nqrl said:\n%s", tag, log, out);
    cr_assert(!strncmp(log, "ok ", 3), "%s: %s", tag, log);
    free(log);
    return out;
}

/* Of i4, i8 and f32 under an average of 8 bits (by MACs): numpy's knapsack's choice, the budget
 * held in the file, the front printed with the chosen row, measured on the held-out samples. */
Test(mixed, bits_budget_matches_brute_force)
{
    char *out = quantize_checked("bits8", "  candidate = i8 symmetric narrow by minmax(symmetric = true)\n"
                                          "  candidate = f32\n  budget = bits(8)\n  validate = 0.25\n");
    cr_assert(strstr(out, "mixed:     budget = bits(8) over 5 layers, choosing among i4 i8 f32"), "%s", out);
    cr_assert(strstr(out, "measured on 12 held-out ones"), "%s", out);
    cr_assert(strstr(out, "(chosen)") && strstr(out, "5 i4 (uniform)") && strstr(out, "5 f32 (uniform)"), "%s", out);
    free(out);
}

/* A budget in bytes, i4 or i8 only: the same checks, counted as the export's initializers. */
Test(mixed, bytes_budget_matches_brute_force)
{
    char *out = quantize_checked("bytes", "  candidate = i8 symmetric narrow by minmax(symmetric = true)\n"
                                          "  budget = bytes(7700)\n");
    cr_assert(strstr(out, "predicted on 48 samples, measured on 48 calibration ones"), "%s", out);
    free(out);
}

/* ONNX Runtime runs model tag.onnx on dir/x as QRL does: output `out` within tol of the largest. */
static void ort_agrees_on(const char *tag, const char *x, const char *out, double tol)
{
    char cmd[8192], *log, ref[4096], got[4096];
    snprintf(cmd, sizeof cmd, "%s run %s/%s.onnx -i %s/%s -o %s/qrl_%s && node '%s/tools/ort_run.js' %s/%s.onnx "
             "%s/%s -o %s/ort_%s", tu_qrl(), dir, tag, dir, x, dir, tag, tu_root(), dir, tag, dir, x, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(ref, sizeof ref, "%s/ort_%s/%s.npy", dir, tag, out);
    snprintf(got, sizeof got, "%s/qrl_%s/%s.npy", dir, tag, out);
    double d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < tol, "%s: ORT vs QRL: %g", tag, d);
}

static void ort_agrees(const char *tag)
{
    ort_agrees_on(tag, "x.npy", "Y", 1e-5);
}

/* dir/x64.npy: the first 64 of the bundled CNN's calibration images. */
static void fmnist_x64(void)
{
    char cmd[8192], *log;
    const char *data = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import numpy as np; np.save('%s/x64.npy', "
             "np.load('%s/calib_images.npy')[:64])\"", dir, data);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* ONNX Runtime runs the mixed export (INT4 and INT8 DequantizeLinear side by side) as QRL does;
 * and the same recipe with --weight-format matmulnbits (its 4-bit layers as MatMulNBits, whose
 * padded blocks count in the budget), whose HTML report plots the front as well-formed SVG. */
Test(mixed, ort_runs_the_export)
{
    const char *body = "  candidate = i8 symmetric narrow by minmax(symmetric = true)\n  candidate = f32\n  budget = bits(7)\n";
    char *out = quantize_checked("ort", body), recipe[4096], cmd[8192], *log;
    free(out);
    ort_agrees("ort");
    write_recipe("nbits", body, recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/mlp.onnx --recipe %s --calib %s/x.npy -o %s/nbits.onnx --report "
             "%s/nbits.html --weight-format matmulnbits && /usr/bin/python3 -c \"import onnx, re, xml.etree.ElementTree "
             "as ET; print(sorted(set(n.op_type for n in onnx.load('%s/nbits.onnx').graph.node))); h = "
             "open('%s/nbits.html').read(); s = h[h.index('<h2>Mixed precision'):]; "
             "s = ET.fromstring(re.search('<svg.*?</svg>', s, re.S).group(0)); print('svg', len(s.findall("
             "'{http://www.w3.org/2000/svg}rect')))\"", tu_qrl(), dir, recipe, dir, dir, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "'MatMulNBits'") && strstr(log, "\nsvg "), "%s", log);
    cr_assert(!strstr(log, "\nsvg 0\n"), "the plot has no measured points: %s", log);
    free(log);
    ort_agrees("nbits");
}

/* A budget below the smallest assignment: one error naming the recipe's line and column, the
 * smallest size there is, and no output file. */
Test(mixed, unreachable_budget_is_an_error_at_its_place)
{
    char recipe[4096], cmd[8192], *log, want[4200], path[4096];
    write_recipe("small", "  candidate = i8 symmetric narrow by minmax(symmetric = true)\n  budget = bytes(5000)\n",
                 recipe, sizeof recipe);
    snprintf(path, sizeof path, "%s/small.onnx", dir);
    snprintf(cmd, sizeof cmd, "%s quantize %s/mlp.onnx --recipe %s --calib %s/x.npy -o %s 2>&1", tu_qrl(), dir,
             recipe, dir, path);
    cr_assert_neq(tu_run(cmd, &log), 0, "%s", log);
    /* line 7, column 12: bytes(5000); 5952 bytes: every layer i4 (5792) and the bias B2 (160) */
    snprintf(want, sizeof want, "%s:7:12: budget = bytes(5000) cannot be met: the smallest assignment, every layer i4, "
             "takes 5952 bytes", recipe);
    cr_assert(strstr(log, want), "%s", log);
    cr_assert(!strstr(strstr(log, "error") + 5, "error"), "one error: %s", log);
    FILE *f = fopen(path, "r");
    cr_assert(!f, "no output file");
    free(log);
}

/* dir/tag.qrl: an integer recipe (u8 activations, i8 weights per channel) with the lines of body. */
static void write_int_recipe(const char *tag, const char *body, char *path, size_t n)
{
    snprintf(path, n, "%s/%s.qrl", dir, tag);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\nrecipe %s {\n"
               "  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
               "  bias = i32\n%s}\n", tag, body);
    fclose(f);
}

/* The bundled CNN quantized with integer recipe tag (body: its lines past the types) on 256 of its
 * calibration images into dir/tag.onnx and dir/tag.json: what qrl printed. */
static char *quantize_fmnist(const char *tag, const char *body)
{
    char recipe[4096], cmd[8192], *out;
    const char *data = getenv("QRL_DATA") ? getenv("QRL_DATA") : "build/data";
    write_int_recipe(tag, body, recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/examples/fmnist/fmnist_cnn.onnx --recipe %s --calib %s/calib_images.npy "
             "--calib-count 256 -o %s/%s.onnx --report %s/%s.json", tu_qrl(), tu_root(), recipe, data, dir, tag, dir,
             tag);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    return out;
}

/* mixed_int_oracle.py's verdict on f32 model and dir/tag.onnx with its report (out: what qrl said). */
static char *int_oracle(const char *model, const char *tag, const char *out)
{
    char cmd[8192], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/mixed_int_oracle.py' %s %s/%s.onnx %s/%s.json", tu_root(),
             model, dir, tag, dir, tag);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    return log;
}

/* An integer recipe (int8's types) with candidate = f32 and budget = bits(12) on the bundled CNN:
 * the layers' effects (the fallback's rank = effect runs) and the budget choose which Conv and
 * Gemm layers stay f32. tests/e2e/mixed_int_oracle.py recomputes each layer's MACs from the
 * model's shapes, brute-forces the assignment on the report's figures, and counts the export's
 * MAC-weighted bits. */
Test(mixed, integer_layers_in_f32_under_a_bits_budget)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    char *out = quantize_fmnist("int", "  candidate = f32\n  tolerance = 3\n  budget = bits(12)\n  validate = 0.25\n");
    cr_assert(strstr(out, "mixed:     budget = bits(12) over 5 layers, choosing among i8 f32") &&
              strstr(out, "measured on 64 held-out ones") && strstr(out, "(chosen)"), "%s", out);
    char *log = int_oracle(model, "int", out);
    cr_assert(!strncmp(log, "ok ", 3) && strstr(log, "f32"), "some layer stays f32 under 12 bits: %s", log);
    free(log);
    free(out);
}

/* An integer recipe choosing per layer among its types (W8A8), 4-bit weights (W4A8), 16-bit output
 * activations (W8A16) and f32, under bits(5.2) (a layer's bits: its weights' times its output's over
 * 8, f32 32; MAC-weighted): mixed_int_oracle.py recomputes the MACs and the bits, brute-forces every
 * assignment from the report's per-choice errors to QRL's choice (which mixes all four on this CNN),
 * finds each layer's chosen types in the export (an INT4 or INT8 DequantizeLinear or an f32
 * weight, a uint8 or uint16 QuantizeLinear on what it writes) and counts the budget there; ONNX
 * Runtime runs the export to QRL's own outputs. */
Test(mixed, integer_candidates_4_8_16_bits_and_f32)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    char *out = quantize_fmnist("int4816", "  candidate = i4 symmetric narrow per_channel by minmax(symmetric = true)\n"
                                           "  candidate_activation = u16 asymmetric by minmax()\n  candidate = f32\n"
                                           "  tolerance = 3\n  budget = bits(5.2)\n  validate = 0.25\n");
    cr_assert(strstr(out, "mixed:     budget = bits(5.2) over 5 layers, choosing among i8 i4 a:u16 f32") &&
              strstr(out, "5 a:u16 (uniform)") && strstr(out, "(chosen)"), "%s", out);
    char *log = int_oracle(model, "int4816", out);
    cr_assert(!strncmp(log, "ok ", 3) && strstr(log, " i4") && strstr(log, "a:u16") && strstr(log, "f32") &&
              strstr(log, "closed 0"), "every kind of choice in the chosen one, each open to every layer: %s", log);
    free(log);
    fmnist_x64();
    ort_agrees_on("int4816", "x64.npy", "logits", 1e-5);
    free(out);
}

/* The QDQ graphs keep each weight's integers across their builds and round a weight again only when
 * its qparams change (quantize.c, rounded_weight): mixed precision builds every layer at i8 and at
 * i4 (each with its own scales) and then the chosen mix, so a layer chosen at i8 was last rounded
 * at i4 and the other way round. On the residual CNN (its weights the f32 model's own, no
 * folding) under bits(6): the oracle (tests/e2e/weight_ints_oracle.py) finds every weight of the
 * export, INT8 and INT4 alike, to be numpy's rounding (half to even, saturated) of the f32 weight
 * with the export's own scales and zero points; and the chosen mix holds both types. */
Test(mixed, weight_integers_follow_their_qparams_across_builds)
{
    char recipe[4096], cmd[8192], *out, *log;
    write_int_recipe("wints", "  candidate = i4 symmetric narrow per_channel by minmax(symmetric = true)\n"
                              "  budget = bits(6)\n  validate = 0.25\n", recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/res.onnx --recipe %s --calib %s/xr.npy -o %s/wints.onnx", tu_qrl(), dir,
             recipe, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/weight_ints_oracle.py' %s/res.onnx %s/wints.onnx",
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    cr_assert(!strncmp(log, "ok ", 3) && strstr(log, ":i4") && strstr(log, ":i8"),
              "both types among the weights: %s\nqrl said:\n%s", log, out);
    free(log);
    free(out);
}

/* A residual CNN (tools/make_mixed_models.py's res.onnx): the 16-bit choice is open to the layers
 * whose output only a Conv, the model's output or the first operand of a residual Add reads (B, C,
 * D), not to A, whose output the Add reads beside C's (two layers' choices never meet in one Add),
 * as mixed_int_oracle.py's rule says from the f32 graph; under bits(15.2) C writes u16 into the Add
 * (qadd_mixed: 16-bit plus 8-bit into 8-bit): the oracle's checks, and ONNX Runtime runs the
 * export to QRL's outputs. */
Test(mixed, integer_16_bit_choice_where_its_readers_take_it)
{
    char recipe[4096], cmd[8192], *out, *log;
    write_int_recipe("res16", "  candidate = i4 symmetric narrow per_channel by minmax(symmetric = true)\n"
                              "  candidate_activation = u16 asymmetric by minmax()\n  candidate = f32\n"
                              "  budget = bits(15.2)\n  validate = 0.25\n", recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/res.onnx --recipe %s --calib %s/xr.npy -o %s/res16.onnx --report "
             "%s/res16.json", tu_qrl(), dir, recipe, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/e2e/mixed_int_oracle.py' %s/res.onnx %s/res16.onnx "
             "%s/res16.json", tu_root(), dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s\nqrl said:\n%s", log, out);
    cr_assert(!strncmp(log, "ok ", 3) && strstr(log, "i8 a:u16 f32 bits") && strstr(log, "closed 1"),
              "%s", log);
    free(log);
    ort_agrees_on("res16", "xr.npy", "Y", 1e-5);
    free(out);
}

/* The residual Add reading a 16-bit layer output runs on integers: with {i8, a:u16} under bits(16)
 * every layer open to 16 bits takes it, so C writes u16 into the Add beside A's u8, which
 * patterns.qrl lowers to qadd_mixed (16-bit plus 8-bit into 8-bit); the recipe's own integer graph
 * (`qrl run --recipe`, which runs it: its profile names the kernel) gives ONNX Runtime's outputs on
 * the export within 1e-5, and the oracle finds the types in the file. */
Test(mixed, integer_16_bit_output_into_a_residual_add)
{
    char recipe[4096], cmd[8192], *out, *log, ref[4096], got[4096];
    write_int_recipe("resadd", "  candidate_activation = u16 asymmetric by minmax()\n  budget = bits(16)\n"
                               "  validate = 0.25\n", recipe, sizeof recipe);
    snprintf(cmd, sizeof cmd, "%s quantize %s/res.onnx --recipe %s --calib %s/xr.npy -o %s/resadd.onnx --report "
             "%s/resadd.json", tu_qrl(), dir, recipe, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    char model[4096];
    snprintf(model, sizeof model, "%s/res.onnx", dir);
    log = int_oracle(model, "resadd", out);
    cr_assert(!strncmp(log, "ok i8 a:u16 a:u16 a:u16 ", 24), "A in i8 (its output meets C's in the Add), the rest "
              "u16: %s", log);
    free(log);
    ort_agrees_on("resadd", "xr.npy", "Y", 1e-5);
    snprintf(cmd, sizeof cmd, "%s run %s/res.onnx --recipe %s --calib %s/xr.npy -i %s/xr.npy -o %s/rec_resadd --profile",
             tu_qrl(), dir, recipe, dir, dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(strstr(log, "qadd_mixed"), "the Add runs qadd_mixed: %s", log);
    free(log);
    snprintf(ref, sizeof ref, "%s/ort_resadd/Y.npy", dir);
    snprintf(got, sizeof got, "%s/rec_resadd/Y.npy", dir);
    double d = tu_npy_rel_diff(ref, got);
    cr_assert(d >= 0 && d < 1e-5, "ORT on the export vs the recipe's integer graph: %g", d);
    free(out);
}

/* The 16-bit choice re-solves the observations of the calibrator that calibrated each tensor:
 * candidate_activation naming another is an error at quantize time that says so, with no output. */
Test(mixed, integer_16_bit_choice_needs_the_same_calibrator)
{
    char recipe[4096], cmd[8192], *out, path[4096];
    write_int_recipe("cal16", "  candidate_activation = u16 asymmetric by percentile(p = 99.9)\n  budget = bits(12)\n",
                     recipe, sizeof recipe);
    snprintf(path, sizeof path, "%s/cal16.onnx", dir);
    snprintf(cmd, sizeof cmd, "%s quantize %s/res.onnx --recipe %s --calib %s/xr.npy -o %s 2>&1", tu_qrl(), dir, recipe,
             dir, path);
    cr_assert_neq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "candidate_activation's calibrator percentile is not the one that calibrated") &&
              strstr(out, "activation's minmax"), "%s", out);
    cr_assert(!tu_file_exists(path), "a failed quantize left %s", path);
    free(out);
}

/* budget = bytes(N) with integer activations: a layer's cost is its weights' bytes, so at the size of
 * the all-i8 model (115584 bytes, the front's uniform i8 point) the 16-bit outputs cost nothing and
 * the bundled CNN takes them everywhere: the oracle's brute force over the report's errors with the
 * bytes rule picks the same, the file's weights fit the budget, its held-out SQNR beats the uniform
 * i8 point's by 2 dB at the same size (QRL-I), and ONNX Runtime runs it to QRL's outputs. */
Test(mixed, integer_choices_under_a_bytes_budget)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    char *out = quantize_fmnist("bytes8", "  candidate = i4 symmetric narrow per_channel by minmax(symmetric = true)\n"
                               "  candidate_activation = u16 asymmetric by minmax()\n  candidate = f32\n"
                               "  tolerance = 3\n  budget = bytes(115584)\n  validate = 0.25\n");
    cr_assert(strstr(out, "budget = bytes(115584) over 5 layers") && strstr(out, "115584    8.000"), "%s", out);
    double uniform8 = 0, chosen = 0;
    const char *u = strstr(out, "5 i8 (uniform)"), *c = strstr(out, "(chosen)");
    cr_assert(u && c, "%s", out);
    while (u > out && u[-1] != '\n')
        u--;
    while (c > out && c[-1] != '\n')
        c--;
    double b, bits, pred;
    cr_assert_eq(sscanf(u, "%lf %lf %lf %lf", &b, &bits, &pred, &uniform8), 4, "%s", u);
    cr_assert_eq(sscanf(c + (*c == '*'), "%lf %lf %lf %lf", &b, &bits, &pred, &chosen), 4, "%s", c);
    cr_assert(b <= 115584 && chosen >= uniform8 + 2, "chosen %g bytes at %g dB, all i8 %g dB", b, chosen, uniform8);
    char *log = int_oracle(model, "bytes8", out);
    cr_assert(!strncmp(log, "ok ", 3) && strstr(log, "a:u16"), "%s", log);
    free(log);
    fmnist_x64();
    /* every layer's output 16-bit: a step is 1/65535 of its range, and ORT dequantizes them to f32
     * where QRL keeps integers: a few steps apart at most */
    ort_agrees_on("bytes8", "x64.npy", "logits", 1e-4);
    free(out);
}
