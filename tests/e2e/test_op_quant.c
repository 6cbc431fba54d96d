/* Differential tests per op (QRL-D item 6). For every op of the stdlib's
 * patterns and affine rules, a tiny model (tools/make_op_models.py, made at
 * test time into BUILD/op_quant/) is quantized with each recipe below and
 * run four ways:
 *   (a) ONNX Runtime on the fp32 model: the reference,
 *   (b) ONNX Runtime on the exported QDQ model,
 *   (c) `qrl run` on the exported model,
 *   (d) `qrl run --recipe`: the recipe's integer graph;
 * (tools/ort_run.js runs every ORT model in one node process; the qrl
 * commands run two at a time). tools/fakequant_ref.py compares them: SQNR of
 * b, c, d against a, the largest differences between the paths in output
 * quantization steps, and each path against an independent numpy fake-quant
 * oracle of the exported graph fed with that path's own inputs to the op.
 *
 * Checks per case and recipe (the names the expected-failures list uses):
 *   quantize        `qrl quantize` succeeds
 *   quantized       no node, island or fallback in f32, no tensor the report
 *                   says runs in f32 in the integer graph (unless the case
 *                   says staying f32 is fine: fallback_ok in cases.tsv)
 *   ort-export      SQNR(b) >= the case's bound, b within 1 step of the oracle
 *   qrl-run-export  SQNR(c) >= bound, c within 1 step of b and of the oracle
 *   intgraph        SQNR(d) >= bound, d within 1 step of b and of the oracle
 *                   (TFLite numerics: within 2 steps of the oracle, not
 *                   compared with b: its rounding is TFLite's)
 * tests/e2e/op_quant_expected_failures.txt lists the checks known to fail,
 * with their symptom; a listed check that passes fails the test (strict
 * xfail), so the list shrinks as fixes land. The table of every case is
 * printed and written to BUILD/op_quant_table.txt.
 * QRL_TEST_QUICK=1 (make test-asan) runs a few cases with two recipes. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static const struct recipe {
    const char *name, *file;
    int onnx_numerics;
} recipes[] = {
    /* u8 asymmetric; as int8.qrl ships but calibrating on every sample (its validate lines dropped:
     * make_op_models.py's calibration samples include the test samples, so that the op is measured,
     * not how well the calibration samples predict the test ones' range) */
    {"int8", "recipes/int8.qrl", 1},
    {"int8-percentile", "recipes/int8-percentile.qrl", 1},    /* i8 symmetric */
    {"int8-tflite", "recipes/int8-tflite.qrl", 0},            /* i8 asymmetric, narrow weights, TFLite numerics */
    {"i8-asym-minmax", "tests/recipes/i8-asym-minmax.qrl", 1}, /* i8 asymmetric, ONNX numerics */
    {"i8-narrow", "tests/recipes/i8-narrow.qrl", 1},          /* i8 narrow (-127..127) symmetric */
};
#define NRECIPES ((int)(sizeof recipes / sizeof recipes[0]))

static const char *const quick_cases[] = {"conv2d", "gemm_transb1", "add_same", "relu", "sigmoid", "maxpool",
                                          "concat_ranges"};
static const char *const quick_recipes[] = {"int8", "int8-tflite"};

static const char *const checks[] = {"quantize", "quantized", "ort-export", "qrl-run-export", "intgraph"};
#define NCHECKS 5

#define MAX_CASES 128

static int quick(void)
{
    const char *q = getenv("QRL_TEST_QUICK");
    return q && *q == '1';
}

static int recipe_runs(int r)
{
    if (!quick())
        return 1;
    for (size_t i = 0; i < sizeof quick_recipes / sizeof quick_recipes[0]; i++)
        if (!strcmp(recipes[r].name, quick_recipes[i]))
            return 1;
    return 0;
}

/* The build folder: where the qrl binary is. */
static void build_dir(char *buf, size_t n)
{
    snprintf(buf, n, "%s", tu_qrl_bin());
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(buf, n, ".");
}

/* QRL_OPQ_DIR moves it (the mutation check runs a second suite beside the first). */
static void work_dir(char *buf, size_t n)
{
    const char *d = getenv("QRL_OPQ_DIR");
    char b[1024];
    build_dir(b, sizeof b);
    if (d && *d)
        snprintf(buf, n, "%s", d);
    else
        snprintf(buf, n, "%s/op_quant", b);
}

/* The parent's failures (it cannot assert) go to a file every test reports. */
static void prep_error(const char *wd, const char *fmt, const char *detail)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/prepare.err", wd);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, fmt, detail ? detail : "");
        fputc('\n', f);
        fclose(f);
    }
}

/* -------------------------------------------------------------- cases */

typedef struct opcase {
    char name[64];
    double sqnr_min;
    int fallback_ok;
    char inputs[256];  /* comma-separated */
    char outputs[256]; /* checked outputs, comma-separated */
    char desc[256];
} opcase;

static int read_cases(const char *wd, opcase *cs, int max)
{
    char path[1200], line[2048];
    snprintf(path, sizeof path, "%s/models/cases.tsv", wd);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *field[6] = {0}, *p = line;
        for (int k = 0; k < 6 && p; k++) {
            field[k] = p;
            p = strchr(p, '\t');
            if (p)
                *p++ = 0;
        }
        if (!field[5])
            continue;
        opcase *c = &cs[n++];
        snprintf(c->name, sizeof c->name, "%s", field[0]);
        c->sqnr_min = atof(field[1]);
        c->fallback_ok = !strcmp(field[2], "fallback_ok");
        snprintf(c->inputs, sizeof c->inputs, "%s", field[3]);
        snprintf(c->outputs, sizeof c->outputs, "%s", field[4]);
        snprintf(c->desc, sizeof c->desc, "%s", field[5]);
    }
    if (f)
        fclose(f);
    return n;
}

/* " flag NAME=DIR/PREFIX_NAME.npy" for every input of c. */
static void bind_args(const opcase *c, const char *flag, const char *cdir, const char *prefix, char *out, size_t n)
{
    char names[256];
    snprintf(names, sizeof names, "%s", c->inputs);
    size_t k = 0;
    out[0] = 0;
    for (char *s = strtok(names, ","); s; s = strtok(NULL, ","))
        k += (size_t)snprintf(out + k, k < n ? n - k : 0, " %s%s%s=%s/%s_%s.npy", flag, *flag ? " " : "", s, cdir,
                              prefix, s);
}

/* ------------------------------------------------------------ results */

enum { C_QUANTIZE, C_QUANTIZED, C_SQNR_B, C_SQNR_C, C_SQNR_D, C_STEP_CB, C_STEP_DB, C_OR_B, C_OR_C, C_OR_D, C_NOTE,
       NCOLS };

typedef struct row {
    char run[512];
    char cell[NCOLS][256];
    double v[NCOLS];
} row;

static int read_results(const char *wd, row *rows, int max)
{
    char path[1200], line[4096];
    snprintf(path, sizeof path, "%s/results.tsv", wd);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "run\t", 4))
            continue;
        row *r = &rows[n];
        memset(r, 0, sizeof *r);
        char *p = line, *t = strchr(p, '\t');
        if (!t)
            continue;
        *t = 0;
        snprintf(r->run, sizeof r->run, "%s", p);
        p = t + 1;
        for (int k = 0; k < NCOLS && p; k++) {
            t = k + 1 < NCOLS ? strchr(p, '\t') : NULL;
            if (t)
                *t = 0;
            snprintf(r->cell[k], sizeof r->cell[k], "%s", p);
            r->v[k] = !strcmp(p, "nan") ? NAN : !strcmp(p, "inf") ? INFINITY : atof(p);
            p = t ? t + 1 : NULL;
        }
        n++;
    }
    if (f)
        fclose(f);
    return n;
}

static const row *find_row(const row *rows, int n, const char *cs, const char *recipe)
{
    char tail[256];
    snprintf(tail, sizeof tail, "/runs/%s/%s", cs, recipe);
    for (int i = 0; i < n; i++) {
        size_t a = strlen(rows[i].run), b = strlen(tail);
        if (a >= b && !strcmp(rows[i].run + a - b, tail))
            return &rows[i];
    }
    return NULL;
}

/* Outcome of one check: 1 passed, 0 failed (symptom in sym), -1 not run. */
static int evaluate(const opcase *c, const struct recipe *rc, const row *r, int check, char *sym, size_t n)
{
    sym[0] = 0;
    if (!r) {
        snprintf(sym, n, "no result");
        return check == 0 ? 0 : -1;
    }
    int quantized_ok = !strcmp(r->cell[C_QUANTIZE], "yes");
    if (check == 0) {
        if (!quantized_ok)
            snprintf(sym, n, "qrl quantize failed (%s)", r->cell[C_NOTE]);
        return quantized_ok;
    }
    if (!quantized_ok)
        return -1;
    if (check == 1) {
        if (c->fallback_ok || !strcmp(r->cell[C_QUANTIZED], "yes"))
            return 1;
        snprintf(sym, n, "left in f32 (a node, an f32 island or a fallback)");
        return 0;
    }
    int p = check - 2; /* 0 ort-export, 1 qrl-run-export, 2 intgraph */
    double sq = r->v[C_SQNR_B + p], orc = r->v[C_OR_B + p];
    /* TFLite numerics: the integer graph rounds as TFLite does (up to 1 step off ONNX per requantization, so
     * ops after the pre Conv see other inputs); it is held to the oracle fed with its own inputs, not to ORT */
    double step_tol = rc->onnx_numerics || p < 2 ? 1.001 : 2.001;
    double agree = p == 1 ? r->v[C_STEP_CB] : p == 2 && rc->onnx_numerics ? r->v[C_STEP_DB] : NAN;
    size_t k = 0;
    if (isnan(sq))
        k += (size_t)snprintf(sym + k, n - k, "no output; ");
    else if (sq < c->sqnr_min)
        k += (size_t)snprintf(sym + k, n - k, "SQNR %.1f dB < %.0f; ", sq, c->sqnr_min);
    if (!isnan(agree) && agree > step_tol)
        k += (size_t)snprintf(sym + k, n - k, "%.0f steps from ORT on the export; ", agree);
    if (!isnan(orc) && orc > step_tol)
        k += (size_t)snprintf(sym + k, n - k, "%.0f steps from the numpy oracle; ", orc);
    if (k >= 2 && k < n)
        sym[k - 2] = 0;
    return k == 0;
}

/* ----------------------------------------------------- expected failures */

typedef struct xfail {
    char cs[64], recipe[64], check[32];
} xfail;

static int read_xfails(xfail *x, int max)
{
    char path[1200], line[1024];
    snprintf(path, sizeof path, "%s/tests/e2e/op_quant_expected_failures.txt", tu_root());
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "%63s %63s %31s", x[n].cs, x[n].recipe, x[n].check) == 3)
            n++;
    }
    if (f)
        fclose(f);
    return n;
}

static int is_xfail(const xfail *x, int n, const char *cs, const char *recipe, const char *check)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(x[i].cs, cs) && !strcmp(x[i].recipe, recipe) && !strcmp(x[i].check, check))
            return 1;
    return 0;
}

/* -------------------------------------------------- the batched runs */

static void table(const char *wd, const opcase *cs, int ncases)
{
    static row rows[MAX_CASES * 8];
    static xfail xf[1024];
    int nrows = read_results(wd, rows, MAX_CASES * 8), nx = read_xfails(xf, 1024);
    char path[1200], b[1024];
    build_dir(b, sizeof b);
    snprintf(path, sizeof path, "%s/op_quant_table.txt", b);
    FILE *f = fopen(path, "w");
    char head[512];
    snprintf(head, sizeof head, "%-20s | %-15s | %14s | %18s | %13s | %13s | %s\n", "case", "recipe",
             "SQNR ort-export", "SQNR qrl-run-export", "SQNR intgraph", "max step diff", "oracle steps b/c/d; verdict");
    fputs(head, stdout);
    if (f)
        fputs(head, f);
    for (int i = 0; i < ncases; i++)
        for (int r = 0; r < NRECIPES; r++) {
            if (!recipe_runs(r))
                continue;
            const row *w = find_row(rows, nrows, cs[i].name, recipes[r].name);
            char verdict[256] = "", sym[512];
            size_t k = 0;
            for (int c = 0; c < NCHECKS; c++) {
                int ok = evaluate(&cs[i], &recipes[r], w, c, sym, sizeof sym);
                int xf_ = is_xfail(xf, nx, cs[i].name, recipes[r].name, checks[c]);
                if (ok == 0 || (ok == 1 && xf_))
                    k += (size_t)snprintf(verdict + k, k < sizeof verdict ? sizeof verdict - k : 0, "%s%s%s",
                                          k ? "," : "", checks[c], ok == 0 ? (xf_ ? "(xfail)" : "(FAIL)") : "(XPASS)");
            }
            char line[1400];
            if (!w || strcmp(w->cell[C_QUANTIZE], "yes"))
                snprintf(line, sizeof line, "%-20s | %-15s | %14s | %18s | %13s | %13s | %s\n", cs[i].name,
                         recipes[r].name, "-", "-", "-", "-", verdict[0] ? verdict : "ok");
            else
                snprintf(line, sizeof line, "%-20s | %-15s | %14s | %18s | %13s | %13s | %s/%s/%s; %s%s%s\n",
                         cs[i].name, recipes[r].name, w->cell[C_SQNR_B], w->cell[C_SQNR_C], w->cell[C_SQNR_D],
                         w->cell[C_STEP_DB], w->cell[C_OR_B], w->cell[C_OR_C], w->cell[C_OR_D],
                         verdict[0] ? verdict : "ok", strcmp(w->cell[C_NOTE], "-") ? "; " : "",
                         strcmp(w->cell[C_NOTE], "-") ? w->cell[C_NOTE] : "");
            fputs(line, stdout);
            if (f)
                fputs(line, f);
        }
    if (f)
        fclose(f);
    fflush(stdout);
}

/* Everything, once, in the parent process: models, the qrl runs (two at a
 * time), ONNX Runtime (one node process), the comparison (one python). */
static int prepare(opcase *cs)
{
    char wd[1024], cmd[8192], *log = NULL;
    work_dir(wd, sizeof wd);
    if (!getenv("ORT_NODE_MODULE")) { /* run alone: the one `make ort` installs next to the qrl binary */
        char b[1024], ort[PATH_MAX + 64], real[PATH_MAX];
        build_dir(b, sizeof b);
        if (realpath(b, real)) {
            snprintf(ort, sizeof ort, "%s/npm/node_modules/onnxruntime-node", real);
            setenv("ORT_NODE_MODULE", ort, 1);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/runs' '%s/jobs' && sed '/^  validate/d' '%s/recipes/int8.qrl' "
             "> '%s/int8-all.qrl'", wd, wd, wd, tu_root(), wd);
    if (tu_run(cmd, NULL) != 0)
        return 0;
    int k = snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_op_models.py' '%s/models'", tu_root(), wd);
    const char *only = getenv("QRL_OPQ_CASES"); /* space-separated case names */
    if (only && *only)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " %s", only);
    for (size_t i = 0; (!only || !*only) && quick() && i < sizeof quick_cases / sizeof quick_cases[0]; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " %s", quick_cases[i]);
    if (tu_run(cmd, &log) != 0) {
        prep_error(wd, "make_op_models.py failed: %s", log);
        free(log);
        return 0;
    }
    free(log);
    int ncases = read_cases(wd, cs, MAX_CASES);
    if (!ncases) {
        prep_error(wd, "no cases in models/cases.tsv%s", "");
        return 0;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/ort.txt", wd);
    FILE *ort = fopen(path, "w");
    snprintf(path, sizeof path, "%s/compare.tsv", wd);
    FILE *cmp = fopen(path, "w");
    if (!ort || !cmp) {
        prep_error(wd, "cannot write in %s", wd);
        return 0;
    }
    int njobs = 0;
    for (int i = 0; i < ncases; i++) {
        char cdir[1200], calib[8192], test[8192], ort_in[8192]; /* 20 inputs: concat_wide */
        snprintf(cdir, sizeof cdir, "%s/models/%s", wd, cs[i].name);
        bind_args(&cs[i], "--calib", cdir, "calib", calib, sizeof calib);
        bind_args(&cs[i], "-i", cdir, "test", test, sizeof test);
        bind_args(&cs[i], "", cdir, "test", ort_in, sizeof ort_in);
        fprintf(ort, "%s/model.onnx%s -o %s/ref\n", cdir, ort_in, cdir);
        for (int r = 0; r < NRECIPES; r++) {
            if (!recipe_runs(r))
                continue;
            char rdir[1400], job[1600], rfile[1300];
            snprintf(rdir, sizeof rdir, "%s/runs/%s/%s", wd, cs[i].name, recipes[r].name);
            if (r == 0) /* int8.qrl calibrating on every sample */
                snprintf(rfile, sizeof rfile, "%s/int8-all.qrl", wd);
            else
                snprintf(rfile, sizeof rfile, "%s", recipes[r].file);
            snprintf(job, sizeof job, "%s/jobs/%04d.sh", wd, njobs++);
            FILE *j = fopen(job, "w");
            if (!j) {
                prep_error(wd, "cannot write %s", job);
                return 0;
            }
            fprintf(j,
                    "cd '%s' || exit 1\nqrl() { %s \"$@\"; }\nR='%s'\nmkdir -p \"$R\"\n"
                    "qrl quantize %s/model.onnx --recipe %s%s -o \"$R/export.onnx\" --report \"$R/report.json\" >\"$R/quantize.log\" 2>&1\n"
                    "echo $? >\"$R/quantize.rc\"\n"
                    "if [ -f \"$R/export.onnx\" ]; then\n"
                    "  qrl run \"$R/export.onnx\"%s -o \"$R/qrl_run_export\" >\"$R/qrl_run_export.log\" 2>&1\n"
                    "  echo $? >\"$R/qrl_run_export.rc\"\n"
                    "  qrl run %s/model.onnx --recipe %s%s%s -o \"$R/intgraph\" >\"$R/intgraph.log\" 2>&1\n"
                    "  echo $? >\"$R/intgraph.rc\"\n"
                    "fi\n",
                    tu_root(), tu_qrl(), rdir, cdir, rfile, calib, test, cdir, rfile, calib, test);
            fclose(j);
            fprintf(ort, "%s/export.onnx%s -o %s/ort_export\n", rdir, ort_in, rdir);
            fprintf(cmp, "%s\t%s\t%s\n", cdir, rdir, cs[i].outputs);
        }
    }
    fclose(ort);
    fclose(cmp);
    /* the qrl commands, two at a time */
    snprintf(cmd, sizeof cmd, "ls '%s'/jobs/*.sh | xargs -P 2 -n 1 sh", wd);
    if (tu_run(cmd, &log) != 0)
        prep_error(wd, "qrl jobs: %s", log);
    free(log);
    /* ONNX Runtime: the fp32 references and the exports, one process (a missing export fails alone) */
    snprintf(cmd, sizeof cmd, "node '%s/tools/ort_run.js' --batch '%s/ort.txt' >'%s/ort.log' 2>&1", tu_root(), wd, wd);
    if (tu_run(cmd, NULL) != 0 && tu_run("node -e \"require(process.env.ORT_NODE_MODULE || 'onnxruntime-node')\"",
                                         &log) != 0) {
        prep_error(wd, "onnxruntime-node does not load (make ort installs it): %s", log);
        free(log);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/fakequant_ref.py' compare '%s/compare.tsv' '%s/results.tsv'",
             tu_root(), wd, wd);
    if (tu_run(cmd, &log) != 0) {
        prep_error(wd, "fakequant_ref.py compare failed: %s", log);
        free(log);
        return 0;
    }
    free(log);
    table(wd, cs, ncases);
    return ncases;
}

typedef struct param {
    opcase c;
} param;

ParameterizedTestParameters(op_quant, each_case)
{
    static opcase cs[MAX_CASES];
    static int n = -1;
    if (n < 0)
        n = prepare(cs);
    if (n <= 0) { /* one case that reports why */
        param *p = cr_malloc(sizeof *p);
        memset(p, 0, sizeof *p);
        snprintf(p->c.name, sizeof p->c.name, "(prepare)");
        return cr_make_param_array(param, p, 1);
    }
    param *p = cr_malloc(sizeof *p * (size_t)n);
    for (int i = 0; i < n; i++)
        p[i].c = cs[i];
    return cr_make_param_array(param, p, (size_t)n);
}

static void report_prepare_errors(const char *wd)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/prepare.err", wd);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    cr_assert(0, "preparing the op cases failed: %s", buf);
}

ParameterizedTest(param *p, op_quant, each_case, .timeout = 600)
{
    char wd[1024];
    work_dir(wd, sizeof wd);
    report_prepare_errors(wd);
    cr_assert(strcmp(p->c.name, "(prepare)"), "no cases were prepared");
    static row rows[MAX_CASES * 8];
    static xfail xf[1024];
    int nrows = read_results(wd, rows, MAX_CASES * 8), nx = read_xfails(xf, 1024);
    for (int r = 0; r < NRECIPES; r++) {
        if (!recipe_runs(r))
            continue;
        const row *w = find_row(rows, nrows, p->c.name, recipes[r].name);
        for (int c = 0; c < NCHECKS; c++) {
            char sym[512];
            int ok = evaluate(&p->c, &recipes[r], w, c, sym, sizeof sym);
            int x = is_xfail(xf, nx, p->c.name, recipes[r].name, checks[c]);
            if (ok == 0 && !x)
                cr_expect(0, "%s (%s) with %s, %s: %s [files: %s/runs/%s/%s]", p->c.name, p->c.desc, recipes[r].name,
                          checks[c], sym, wd, p->c.name, recipes[r].name);
            if (ok == 1 && x)
                cr_expect(0, "%s with %s, %s: passes now; remove it from tests/e2e/op_quant_expected_failures.txt",
                          p->c.name, recipes[r].name, checks[c]);
        }
    }
}

/* Every line of the expected-failures list names a real case, recipe and check. */
Test(op_quant, expected_failures_name_real_checks)
{
    opcase *cs = calloc(MAX_CASES, sizeof *cs);
    xfail *xf = calloc(1024, sizeof *xf);
    char *dir = tu_tmpdir(), cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_op_models.py' '%s/models'", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    int n = 0, nx = read_xfails(xf, 1024);
    {
        char path[1200], line[2048];
        snprintf(path, sizeof path, "%s/models/cases.tsv", dir);
        FILE *f = fopen(path, "r");
        while (f && n < MAX_CASES && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\t\n")] = 0;
            snprintf(cs[n++].name, sizeof cs[0].name, "%s", line);
        }
        if (f)
            fclose(f);
    }
    cr_assert_gt(n, 40, "make_op_models.py wrote %d cases", n);
    for (int i = 0; i < nx; i++) {
        int c = 0, r = 0, k = 0;
        for (int j = 0; j < n; j++)
            c |= !strcmp(cs[j].name, xf[i].cs);
        for (int j = 0; j < NRECIPES; j++)
            r |= !strcmp(recipes[j].name, xf[i].recipe);
        for (int j = 0; j < NCHECKS; j++)
            k |= !strcmp(checks[j], xf[i].check);
        cr_expect(c && r && k, "op_quant_expected_failures.txt: '%s %s %s' names no case, recipe or check", xf[i].cs,
                  xf[i].recipe, xf[i].check);
    }
    tu_rmdir(dir);
    free(cs);
    free(xf);
}

/* The suite can fail: with a stdlib copy whose Sigmoid rule computes 1 / (1 + exp(-1.1 v)) and whose
 * LeakyRelu default slope is 0.02, the same checks run on those two cases (this binary, again, in
 * its own folder) and report both. */
Test(op_quant, a_mutated_stdlib_fails, .timeout = 600)
{
    char *dir = tu_tmpdir(), cmd[8192], *log;
    cr_assert(dir);
    snprintf(cmd, sizeof cmd,
             "cp -r '%s/stdlib' '%s/stdlib' && /usr/bin/python3 -c \"import sys; p = sys.argv[1]; s = open(p).read(); "
             "t = s.replace('exp(-v)', 'exp(-1.1 * v)').replace('0.01) * v', '0.02) * v'); "
             "assert t.count('1.1 * v') == 1 and t.count('0.02) * v') == 1; open(p, 'w').write(t)\" "
             "'%s/stdlib/affine.qrl'",
             tu_root(), dir, dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    /* a clean environment: Criterion's own variables would make the inner run a worker of this one */
    char self[PATH_MAX];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(sn, 0);
    self[sn] = 0;
    const char *keep[] = {"PATH", "HOME", "QRL_BIN", "QRL_ROOT", "QRL_DATA", "ORT_NODE_MODULE"};
    int k = snprintf(cmd, sizeof cmd, "env -i");
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (getenv(keep[i]))
            k += snprintf(cmd + k, sizeof cmd - (size_t)k, " %s='%s'", keep[i], getenv(keep[i]));
    snprintf(cmd + k, sizeof cmd - (size_t)k,
             " QRL_STDLIB='%s/stdlib' QRL_OPQ_DIR='%s/opq' QRL_OPQ_CASES='sigmoid leakyrelu' XDG_CACHE_HOME='%s/cache' "
             "'%s' --filter 'op_quant/each_case' --jobs 1 2>&1",
             dir, dir, dir, self);
    int rc = tu_run(cmd, &log);
    cr_assert_neq(rc, 0, "the suite passed with a wrong stdlib:\n%s", log);
    cr_assert(strstr(log, "sigmoid (") && strstr(log, "steps from the numpy oracle"), "%s", log);
    free(log);
    tu_rmdir(dir);
}
