/* The tutorial of docs/language.md: its two examples are the files in
 * examples/recipes/ (checked verbatim here), they compile, and they compute
 * what the tutorial says, against the same arithmetic in C. The table of
 * supported ops in docs/runtime.md is the op table and the stdlib's patterns
 * and affine rules, row for row. And what docs/language.md says recipes do
 * (accumulators, numerics, fixed qparams) is what quantizing does. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "onnx_import.h"
#include "op.h"
#include "passes.h"
#include "quantize.h"
#include "recipe.h"
#include "testutil.h"

static qrl_module *compile_file(const char *rel)
{
    char err[1200];
    qrl_module *m = tu_compile(rel, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

Test(docs, tutorial_examples_are_in_the_text)
{
    char *doc = tu_slurp_root("docs/language.md");
    const char *files[] = {"examples/recipes/meanstd.qrl", "examples/recipes/scale_pattern.qrl"};
    for (int i = 0; i < 2; i++) {
        char *src = tu_slurp_root(files[i]);
        cr_assert(strstr(doc, src), "docs/language.md does not show %s as it is", files[i]);
        free(src);
    }
    free(doc);
}

Test(docs, meanstd_calibrator_matches_c)
{
    qrl_module *m = compile_file("examples/recipes/meanstd.qrl");
    enum { N = 5000 };
    static float x[N];
    unsigned seed = 3;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(((seed >> 8) & 0xffff) / 65536.0 * 2.0 + 0.5);
    }
    const char *names[1] = {"k"};
    const double vals[1] = {2.0};
    qr_calib *one, *a, *b;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &one, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &a, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "meanstd", 1, names, vals, &b, &e), QR_OK, "%s", e.msg);
    qr_tensor all = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = x};
    qr_tensor p1 = {.dtype = QR_F32, .ndim = 2, .dims = {10, 100}, .data = x};
    qr_tensor p2 = {.dtype = QR_F32, .ndim = 1, .dims = {N - 1000}, .data = x + 1000};
    cr_assert_eq(qr_calib_observe(one, &all, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(a, &p1, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(b, &p2, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_merge(a, b, &e), QR_OK, "%s", e.msg);
    double n = N, s = 0, ss = 0;
    for (int i = 0; i < N; i++) {
        s += x[i];
        ss += (double)x[i] * x[i];
    }
    double mean = s / n, sd = sqrt(fmax(ss / n - mean * mean, 0)), lo = mean - 2 * sd, hi = mean + 2 * sd;
    /* u8 (unsigned): asymmetric over [min(lo,0), max(hi,0)] */
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams q1, q2;
    cr_assert_eq(qr_calib_solve(one, &u8, &q1, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_solve(a, &u8, &q2, &e), QR_OK, "%s", e.msg);
    double scale = (fmax(hi, 0) - fmin(lo, 0)) / 255.0;
    cr_assert_float_eq(q1.scale, scale, 1e-12 * scale, "one pass %.17g, C %.17g", q1.scale, scale);
    cr_assert_float_eq(q2.scale, scale, 1e-12 * scale, "merged %.17g, C %.17g", q2.scale, scale);
    cr_assert_eq(q1.zero, (int64_t)nearbyint(-fmin(lo, 0) / scale));
    cr_assert_eq(q1.zero, q2.zero);
    qr_calib_free(one);
    qr_calib_free(a);
    qr_calib_free(b);
    qr_module_free(m);
}

Test(docs, scale_pattern_kernel_matches_c)
{
    qrl_module *m = compile_file("examples/recipes/scale_pattern.qrl");
    const qr_fn_desc *d = tu_fn(m, "scale_kernel", "void(tensor<u8>,f32,i32,tensor<f32>,tensor<u8>,f32,i32)");
    cr_assert(d->is_kernel);
    void (*k)(qrl_rt *, qrl_tview *, float, int32_t, qrl_tview *, qrl_tview *, float, int32_t) = d->fn;
    uint8_t xi[256], yi[256];
    float c = 0.37f;
    for (int i = 0; i < 256; i++)
        xi[i] = (uint8_t)i;
    qrl_tview x = {.data = xi, .numel = 256, .rank = 1, .dims = {256}};
    qrl_tview cv = {.data = &c, .numel = 1, .rank = 0};
    qrl_tview y = {.data = yi, .numel = 256, .rank = 1, .dims = {256}};
    qrl_rt rt;
    qr_rt_init(&rt);
    float xs = 0.05f, ys = 0.02f;
    k(&rt, &x, xs, 128, &cv, &y, ys, 10);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    float mult = xs * c / ys;
    for (int i = 0; i < 256; i++) {
        float v = nearbyintf((float)(i - 128) * mult) + 10.0f;
        uint8_t want = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
        cr_assert_eq(yi[i], want, "x=%d: %d vs %d", i, yi[i], want);
    }
    /* the generic entry the runtime calls: the same kernel, arguments by pointer */
    uint8_t yg[256];
    qrl_tview yv = {.data = yg, .numel = 256, .rank = 1, .dims = {256}};
    int32_t xz = 128, yz = 10;
    void *args[7] = {&x, &xs, &xz, &cv, &yv, &ys, &yz};
    cr_assert(d->call);
    d->call(&rt, args);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert_arr_eq(yg, yi, sizeof yi);
    qr_module_free(m);
}

/* ---- docs/runtime.md's table of supported ops ---- */

static void cat(char *b, size_t n, const char *s)
{
    size_t at = strlen(b);
    cr_assert_lt(at + strlen(s), n, "row too long");
    memcpy(b + at, s, strlen(s) + 1);
}

static int op_in(const char *ops, const char *op) /* ops: "Conv|ConvTranspose" */
{
    size_t n = strlen(op);
    for (const char *p = ops; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, op, n))
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* The row docs/runtime.md must have for op: its domain, the stdlib patterns
 * that match it, the affine rules for it in source order. */
static void op_row(const qrl_module *m, const qr_op_def *d, char *row, size_t n)
{
    char pats[1024] = "", affs[2048] = "";
    for (int i = 0; i < m->npatterns; i++) {
        int hit = 0;
        for (int k = 0; k < m->patterns[i].nnodes; k++)
            hit |= op_in(m->patterns[i].nodes[k].ops, d->name);
        if (hit) {
            cat(pats, sizeof pats, pats[0] ? ", `" : "`");
            cat(pats, sizeof pats, m->patterns[i].name);
            cat(pats, sizeof pats, "`");
        }
    }
    for (int i = 0; i < m->naffines && !d->domain[0]; i++) {
        const qr_affine *a = &m->affines[i];
        if (strcmp(a->op, d->name))
            continue;
        static const char *const kinds[] = {"same", "fixed", "requantize"};
        cat(affs, sizeof affs, affs[0] ? "; " : "");
        cat(affs, sizeof affs, kinds[a->kind]);
        cat(affs, sizeof affs, a->elem ? " (body)" : a->table ? " (table)" : "");
        cat(affs, sizeof affs, a->in_f32 ? " in f32" : "");
        if (a->cond && a->cond[0]) {
            cat(affs, sizeof affs, " if `");
            for (const char *c = a->cond; *c; c++) /* a table cell: | escaped */
                cat(affs, sizeof affs, *c == '|' ? "\\|" : (char[]){*c, 0});
            cat(affs, sizeof affs, "`");
        }
    }
    snprintf(row, n, "| %s | %s | %s | %s |", d->name, d->domain[0] ? d->domain : "ai.onnx", pats[0] ? pats : "",
             affs[0] ? affs : "");
}

static int by_row(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(docs, op_table_lists_every_op_and_its_stdlib_rules)
{
    char dir[] = "/tmp/qrl_docs_XXXXXX", path[600], err[1200];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/all.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("import \"patterns.qrl\"\nimport \"patterns_tflite.qrl\"\nimport \"patterns_dynamic.qrl\"\nimport \"affine.qrl\"\n", f);
    fclose(f);
    qrl_module *m = tu_compile(path, err, sizeof err);
    remove(path);
    remove(dir);
    cr_assert(m, "%s", err);
    const qr_op_def *const *defs;
    int n = qr_op_list(&defs), nrows = 0;
    char **want = calloc((size_t)n, sizeof *want);
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= !strcmp(defs[j]->name, defs[i]->name) && !strcmp(defs[j]->domain ? defs[j]->domain : "",
                                                                  defs[i]->domain ? defs[i]->domain : "");
        if (dup)
            continue;
        qr_op_def d = *defs[i];
        d.domain = d.domain ? d.domain : "";
        want[nrows] = malloc(4096);
        op_row(m, &d, want[nrows++], 4096);
    }
    qsort(want, (size_t)nrows, sizeof *want, by_row);
    /* the rows between the header's separator and the first line that is not a row */
    char *doc = tu_slurp_root("docs/runtime.md");
    const char *head = strstr(doc, "| op | domain | stdlib patterns | stdlib affine rules |\n|---|---|---|---|\n");
    cr_assert(head, "docs/runtime.md has no table of supported ops");
    const char *p = strchr(strchr(head, '\n') + 1, '\n') + 1;
    char all[65536] = "";
    for (int i = 0; i < nrows; i++) {
        cat(all, sizeof all, want[i]);
        cat(all, sizeof all, "\n");
    }
    int row = 0, bad = 0;
    for (; *p == '|'; row++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (row >= nrows || strlen(want[row]) != len || strncmp(want[row], p, len)) {
            cr_log_info("docs/runtime.md row %d: %.*s\n   expected: %s", row + 1, (int)len, p,
                        row < nrows ? want[row] : "(no more ops)");
            bad++;
        }
        p += len + (e != NULL);
    }
    if (bad || row != nrows)
        cr_log_info("the table docs/runtime.md should have:\n%s", all);
    cr_assert(!bad && row == nrows, "docs/runtime.md's op table: %d rows differ, %d rows for %d ops", bad, row, nrows);
    for (int i = 0; i < nrows; i++)
        free(want[i]);
    free(want);
    free(doc);
    qr_module_free(m);
}

/* ---- docs/language.md's claims about recipes, on the bundled Fashion-MNIST CNN ---- */

static qrl_module *last_module; /* of the last quantize_text; freed by the next and by done() */

static void done(qr_quantized *q)
{
    qr_quantized_free(q);
    qr_module_free(last_module);
    last_module = NULL;
}

/* Compiles text as a recipe file and quantizes the CNN with it on seeded
 * random samples; the status, *q on success (free with done), the message in e. */
static qr_status quantize_text(const char *text, qr_quantized **q, qr_error *e)
{
    qr_module_free(last_module);
    char dir[] = "/tmp/qrl_docs_XXXXXX", path[600], err[1200] = "";
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/r.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    qrl_module *m = tu_compile(path, err, sizeof err); /* qrl check accepts every recipe here */
    remove(path);
    remove(dir);
    cr_assert(m, "%s", err);
    char model[600];
    snprintf(model, sizeof model, "%s/examples/fmnist/fmnist_cnn.onnx", tu_root());
    qr_graph *g;
    cr_assert_eq(qr_onnx_load(model, &g, e), QR_OK, "%s", e->msg);
    cr_assert_eq(qr_graph_optimize(g, e), QR_OK, "%s", e->msg);
    qr_tensor x = {.dtype = QR_F32, .ndim = 4, .dims = {8, 1, 28, 28}};
    cr_assert_eq(qr_tensor_alloc(&x, e), QR_OK);
    unsigned seed = 7;
    for (int i = 0; i < 8 * 28 * 28; i++) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)x.data)[i] = (float)((seed >> 8) & 0xffff) / 65536.0f;
    }
    qr_quant_opts o = {.module = m, .batch = 8, .threads = 1};
    *q = NULL;
    qr_status st = qr_quantize(g, &x, &o, q, e);
    qr_tensor_free(&x);
    qr_graph_free(g);
    last_module = m;
    return st;
}

#define HEAD "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"

/* "bias: i32; qrl check accepts i16 and i64, qrl quantize refuses them"; "accumulate: iN for N from
 * 8 to 32; qrl check also accepts i64, which qrl quantize refuses" */
Test(docs, accumulators_other_than_i32_are_refused_when_quantizing)
{
    /* bias = i16 is taken (docs/language.md, policy hooks: tests/e2e/test_hooks.c) */
    const char *set[] = {"accumulate = i64", "bias = i64"};
    for (int i = 0; i < 2; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 HEAD "recipe r {\n  activation = u8 asymmetric by minmax()\n"
                      "  weight = i8 symmetric per_channel by minmax()\n  %s\n}\n",
                 set[i]);
        qr_quantized *q;
        qr_error e;
        cr_assert_eq(quantize_text(text, &q, &e), QR_ERR, "%s was taken", set[i]);
        char want[64];
        snprintf(want, sizeof want, "%s is not supported yet", set[i]);
        cr_assert(strstr(e.msg, want), "%s: %s", set[i], e.msg);
    }
    done(NULL);
}

/* "numerics picks the patterns: a pattern that states numerics applies only to recipes that say
 * the same, a recipe that says none is onnx; no stdlib pattern states pytorch" */
static int patterned_nodes(const char *numerics)
{
    char text[1024];
    snprintf(text, sizeof text,
             HEAD "recipe r {\n  activation = u8 asymmetric by minmax()\n"
                  "  weight = i8 symmetric per_channel by minmax()\n  %s\n}\n",
             numerics);
    qr_quantized *q;
    qr_error e;
    cr_assert_eq(quantize_text(text, &q, &e), QR_OK, "%s: %s", numerics, e.msg);
    int n = q->nodes_pattern;
    done(q);
    return n;
}

Test(docs, numerics_selects_the_patterns)
{
    int onnx = patterned_nodes("numerics = onnx"), none = patterned_nodes("");
    cr_assert_gt(onnx, 0);
    cr_assert_eq(none, onnx, "without numerics %d nodes by patterns, with onnx %d", none, onnx);
    cr_assert_eq(patterned_nodes("numerics = tflite"), 0);
    cr_assert_eq(patterned_nodes("numerics = pytorch"), 0);
}

/* "the stdlib's kernels also take u16 and i16 activations: Conv, Gemm and MatMul then lower to
 * the *_wide kernels, whose accumulator is int64" */
Test(docs, sixteen_bit_activations_have_stdlib_kernels)
{
    qr_quantized *q;
    qr_error e;
    cr_assert_eq(quantize_text(HEAD "recipe r {\n  activation = i16 symmetric by minmax()\n"
                                    "  weight = i8 symmetric per_channel by minmax()\n}\n",
                               &q, &e),
                 QR_OK, "%s", e.msg);
    done(q);
}

/* "fixed(t => qparams(...)): a zero point outside the recipe's type (or a scale that is not a
 * positive number) leaves the node in f32 with a note naming the rule" */
static qr_quantized *fixed_relu(const char *qparams, qr_error *e)
{
    char text[1024];
    snprintf(text, sizeof text,
             "import \"calibrators.qrl\"\nimport \"patterns.qrl\"\n"
             "affine Relu(x) -> fixed(t => %s) table(v => max(v, 0.0))\n"
             "recipe r {\n  activation = u8 asymmetric by minmax()\n"
             "  weight = i8 symmetric per_channel by minmax()\n  use conv, gemm, Relu\n}\n",
             qparams);
    qr_quantized *q;
    cr_assert_eq(quantize_text(text, &q, e), QR_OK, "%s", e->msg);
    return q;
}

Test(docs, fixed_zero_point_outside_the_type_leaves_the_node_in_f32)
{
    qr_error e;
    qr_quantized *ok = fixed_relu("qparams(0.05, 0)", &e);
    cr_assert_eq(ok->nnotes, 0, "%s", ok->nnotes ? ok->notes[0] : "");
    int affine = ok->nodes_affine;
    cr_assert_gt(affine, 0);
    done(ok);
    const char *bad[] = {"qparams(0.05, 256)", "qparams(0.05, -1)", "qparams(0.0, 0)"};
    for (int i = 0; i < 3; i++) {
        qr_quantized *q = fixed_relu(bad[i], &e);
        cr_assert_lt(q->nodes_affine, affine, "%s", bad[i]);
        cr_assert_gt(q->nnotes, 0, "%s: no note", bad[i]);
        cr_assert(strstr(q->notes[0], "stays f32: the affine rule at ") && strstr(q->notes[0], "r.qrl:3:") &&
                      strstr(q->notes[0], "not valid for u8 (0..255)"),
                  "%s: %s", bad[i], q->notes[0]);
        done(q);
    }
}

/* ---- stdlib/README.md and recipes/README.md are current ---- */

/* Every *.qrl file of folder (relative to the root) is named `file` in text. */
static void names_every_file(const char *text, const char *folder, const char *doc)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tu_root(), folder);
    DIR *d = opendir(path);
    cr_assert(d, "cannot list %s", path);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".qrl"))
            continue;
        char want[300];
        snprintf(want, sizeof want, "`%s`", de->d_name);
        cr_assert(strstr(text, want), "%s does not name %s/%s", doc, folder, de->d_name);
        n++;
    }
    closedir(d);
    cr_assert_gt(n, 0, "no .qrl files in %s", path);
}

Test(docs, readmes_name_every_file_calibrator_and_pattern)
{
    char *stdlib = tu_slurp_root("stdlib/README.md"), *recipes = tu_slurp_root("recipes/README.md");
    names_every_file(stdlib, "stdlib", "stdlib/README.md");
    names_every_file(recipes, "recipes", "recipes/README.md");
    char dir[] = "/tmp/qrl_docs_XXXXXX", path[600], err[1200];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/all.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("import \"calibrators.qrl\"\nimport \"patterns.qrl\"\nimport \"patterns_tflite.qrl\"\n"
          "import \"patterns_dynamic.qrl\"\nimport \"patterns_fused.qrl\"\nimport \"patterns_real.qrl\"\n", f);
    fclose(f);
    qrl_module *m = tu_compile(path, err, sizeof err);
    remove(path);
    remove(dir);
    cr_assert(m, "%s", err);
    cr_assert_geq(m->ncals, 5);
    for (int i = 0; i < m->ncals + m->npatterns; i++) {
        const char *name = i < m->ncals ? m->cals[i].name : m->patterns[i - m->ncals].name;
        char want[300];
        snprintf(want, sizeof want, "`%s`", name);
        cr_assert(strstr(stdlib, want), "stdlib/README.md does not name the %s %s",
                  i < m->ncals ? "calibrator" : "pattern", name);
    }
    qr_module_free(m);
    free(stdlib);
    free(recipes);
}

/* ---- every built-in function of the checker is in docs/language.md ---- */

static int word_at(const char *text, const char *p, size_t n)
{
    int before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    return before && !(isalnum((unsigned char)p[n]) || p[n] == '_');
}

Test(docs, language_reference_names_every_builtin)
{
    char *src = tu_slurp_root("compiler/check.c"), *doc = tu_slurp_root("docs/language.md");
    const char *sec = strstr(doc, "\n## Built-in functions"), *end = sec ? strstr(sec + 1, "\n## ") : NULL;
    cr_assert(sec && end, "docs/language.md has no section 'Built-in functions'");
    int n = 0;
    const char *tables[] = {"builtin_fns[] = {", "builtin_consts[] = {"};
    for (int t = 0; t < 2; t++) {
        const char *p = strstr(src, tables[t]);
        cr_assert(p, "compiler/check.c has no %s", tables[t]);
        const char *stop = strstr(p, "};");
        for (p = strchr(p, '"'); p && p < stop; p = strchr(p + 1, '"')) {
            const char *q = strchr(p + 1, '"');
            size_t len = (size_t)(q - p - 1);
            char name[64], call[70];
            cr_assert_lt(len, sizeof name);
            memcpy(name, p + 1, len);
            name[len] = 0;
            snprintf(call, sizeof call, "%s(", name);
            int found = 0;
            for (const char *w = sec; !found && (w = strstr(w, name)) && w < end; w++)
                found = word_at(doc, w, len); /* in the section, as a word */
            for (const char *w = doc; !found && (w = strstr(w, call)); w++)
                found = word_at(doc, w, len); /* or called anywhere (the pattern predicates) */
            cr_assert(found, "docs/language.md does not describe the built-in '%s' of compiler/check.c", name);
            n++;
            p = q;
        }
    }
    cr_assert_geq(n, 30, "found %d built-ins", n);
    free(src);
    free(doc);
}
