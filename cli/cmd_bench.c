/* qrl bench: inference time of a model as loaded (f32, or a QDQ model's integer graph) and of
 * the recipe's integer graph, per batch size and thread count, on seeded random inputs. Each
 * configuration runs once to plan and warm up, then until --min-time has passed (at least three
 * runs); the median and the fastest run are reported, with the GMAC/s of the convolutions and
 * matrix products (from the executor's profile). Measures; never pass/fail: bench/run.sh puts
 * the numbers next to ONNX Runtime's and PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define MAX_ARGS 64
#define MAX_LIST 16

typedef struct bench_row {
    const char *variant;
    int batch, threads, runs;
    double ms_median, ms_min, gmacs, macs_per_run;
} bench_row;

/* "1,64" -> {1, 64}; 0 on a malformed list. */
static int parse_list(const char *s, int lo, int hi, int *out)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST || !cli_parse_int(w, lo, hi, &out[n]))
            return 0;
        n++;
    }
    return n;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seeded inputs of g for one batch: the declared shape with a free (or matching) first
 * dimension set to batch; floats uniform in [0, 1), integers in [0, 8). */
static int make_inputs(const char *model, const qrl_model *m, int batch, qrl_tensor *in, char *err)
{
    unsigned seed = 12345;
    for (int i = 0; i < qrl_model_num_inputs(m); i++) {
        qrl_value_info v;
        qrl_value_get(m, qrl_model_input(m, i), &v);
        qrl_tensor *t = &in[i];
        memset(t, 0, sizeof *t);
        t->dtype = v.dtype;
        t->ndim = v.ndim;
        if (t->ndim < 1) {
            snprintf(err, CLI_ERRLEN, "%s: input '%s' has no known rank: bench needs its shape", model, v.name);
            return 1;
        }
        for (int d = 0; d < t->ndim; d++) {
            int64_t n = v.dims[d];
            if (d == 0 && n < 0)
                n = batch;
            else if (d == 0 && n != batch) {
                snprintf(err, CLI_ERRLEN, "%s: input '%s' has a fixed batch of %lld: use --batch %lld", model, v.name,
                         (long long)n, (long long)n);
                return 1;
            } else if (n < 0) {
                snprintf(err, CLI_ERRLEN, "%s: input '%s' has a free dimension %d (%s): bench needs it fixed", model,
                         v.name, d, v.dim_param[d] ? v.dim_param[d] : "unknown");
                return 1;
            }
            t->dims[d] = n;
        }
        if (qrl_tensor_alloc(t, err, CLI_ERRLEN) != 0)
            return 1;
        int64_t n = qrl_tensor_numel(t);
        int is_float = qrl_dtype_is_float(t->dtype);
        for (int64_t k = 0; k < n; k++) {
            seed = seed * 1664525u + 1013904223u;
            double u = (double)(seed >> 8) / 16777216.0;
            qrl_tensor_set_f64(t, k, is_float ? u : (double)(int)(u * 8));
        }
    }
    return 0;
}

/* Seconds the profile has counted so far in the nodes that multiply-accumulate. */
static double gemm_seconds(const qrl_model *m)
{
    double s = 0;
    qrl_node_profile p;
    for (int i = 0; qrl_model_profile(m, i, &p) == 0; i++)
        s += p.macs > 0 ? p.seconds : 0;
    return s;
}

/* Configures m (threads, with or without the executor's profile), runs it once (the plan, the
 * packed weights and the kernels the run asked to be compiled are made there and not counted), then
 * until min_time seconds have passed, at least three runs: each run's ms into (*vals)[i], or with
 * profile the seconds its convolutions and matrix products took, sorted. */
static int timed_runs(qrl_model *m, int threads, int profile, qrl_tensor *in, qrl_tensor *out, int nout,
                      double min_time, double **vals, int *n, char *err)
{
    *vals = NULL;
    *n = 0;
    if (qrl_model_configure(m, threads, profile ? QRL_RUN_PROFILE : 0, err, CLI_ERRLEN) != 0 ||
        qrl_model_run(m, in, out, err, CLI_ERRLEN) != 0)
        return 1;
    cli_tensors_free(out, nout);
    /* the kernels it asked to be compiled in the background (iconv-jit=auto) would replace the
     * generic ones during the timed runs: those time the steady state instead */
    qrl_shape_kernels_wait();
    qrl_model_profile_reset(m);
    double *v = NULL, start = now_s();
    int cap = 0, runs = 0;
    while (runs < 3 || now_s() - start < min_time) {
        if (runs == cap) {
            double *grown = realloc(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *v);
            if (!grown) {
                free(v);
                snprintf(err, CLI_ERRLEN, "out of memory");
                return 1;
            }
            v = grown;
        }
        double t0 = now_s(), g0 = profile ? gemm_seconds(m) : 0;
        if (qrl_model_run(m, in, out, err, CLI_ERRLEN) != 0) {
            free(v);
            return 1;
        }
        v[runs++] = profile ? gemm_seconds(m) - g0 : (now_s() - t0) * 1e3;
        cli_tensors_free(out, nout);
    }
    qsort(v, (size_t)runs, sizeof *v, cmp_double);
    *vals = v;
    *n = runs;
    return 0;
}

static double median(const double *v, int n) { return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

/* Times model m at one batch size and thread count into r; profile: also prints where the
 * profiled runs' time went (the warm-up run left out). The timed runs run without the executor's
 * profile (a clock read around every node: 3% of a small CNN's batch-1 run, which ONNX Runtime's
 * rows do not pay); the GMAC/s of the convolutions and products come from profiled runs after
 * them, for half the time. */
static int time_model(const char *model, qrl_model *m, int batch, int threads, double min_time, int profile,
                      bench_row *r, char *err)
{
    int nin = qrl_model_num_inputs(m), nout = qrl_model_num_outputs(m);
    qrl_tensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + 1, sizeof *out);
    double *ms = NULL, *gemm_s = NULL; /* per run: its time; per profiled run: its convolutions' and products' */
    int runs = 0, pruns = 0, st = 1;
    if (!in || !out) {
        snprintf(err, CLI_ERRLEN, "out of memory");
        goto done;
    }
    if (make_inputs(model, m, batch, in, err) != 0 || timed_runs(m, threads, 0, in, out, nout, min_time, &ms, &runs, err) != 0 ||
        timed_runs(m, threads, 1, in, out, nout, min_time / 2, &gemm_s, &pruns, err) != 0)
        goto done;
    double macs = 0;
    qrl_node_profile p;
    for (int i = 0; qrl_model_profile(m, i, &p) == 0; i++)
        macs += p.macs > 0 ? p.macs : 0;
    if (profile && cli_print_profile(stdout, m, 20) != 0)
        goto done;
    double gemm = median(gemm_s, pruns);
    r->batch = batch;
    r->threads = threads;
    r->runs = runs;
    r->ms_median = median(ms, runs);
    r->ms_min = ms[0];
    r->macs_per_run = macs / pruns;
    /* the median run's: a run another process preempted does not drag it down as a mean would */
    r->gmacs = gemm > 0 ? r->macs_per_run / gemm * 1e-9 : 0;
    st = 0;
done:
    cli_tensors_free(in, nin);
    cli_tensors_free(out, nout);
    free(in);
    free(out);
    free(ms);
    free(gemm_s);
    return st;
}

/* s as a JSON string (null for NULL). */
static void json_str(FILE *f, const char *s)
{
    if (!s)
        fputs("null", f);
    else
        qrl_fput_json_string(f, s);
}

static int write_json(const char *path, const char *model, const char *recipe, const bench_row *rows, int n,
                      char *err)
{
    qrl_output *o;
    if (qrl_output_open(path, &o, err, CLI_ERRLEN) != 0)
        return 1;
    FILE *f = qrl_output_stream(o);
    char cpu[256];
    qrl_cpu_describe(cpu, sizeof cpu);
    fputs("{\"cpu\": ", f);
    json_str(f, cpu);
    fputs(", \"model\": ", f);
    json_str(f, model);
    fputs(", \"recipe\": ", f);
    json_str(f, recipe);
    fputs(", \"results\": [", f);
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        fprintf(f,
                "%s\n  {\"variant\": \"%s\", \"batch\": %d, \"threads\": %d, \"runs\": %d, \"ms_median\": %.4f, "
                "\"ms_min\": %.4f, \"images_per_s\": %.2f, \"macs_per_image\": %.0f, \"gemm_gmacs\": %.2f}",
                i ? "," : "", r->variant, r->batch, r->threads, r->runs, r->ms_median, r->ms_min,
                r->ms_median > 0 ? r->batch * 1e3 / r->ms_median : 0.0, r->macs_per_run / r->batch, r->gmacs);
    }
    fprintf(f, "\n]}\n");
    return qrl_output_commit(o, err, CLI_ERRLEN);
}

typedef struct bench_args {
    const char *model, *recipe, *recipe_name, *json, *qdq_recipe;
    char *calib[MAX_ARGS];
    int ncalib, calib_count, batches[MAX_LIST], threads[MAX_LIST], nb, nt, profile;
    double min_time;
} bench_args;

static void usage(void)
{
    printf("usage: qrl bench MODEL.onnx [--recipe R.qrl [--recipe-name NAME] --calib [NAME=]C.npy...\n"
           "                 [--calib-count N]] [--batch 1,64] [--threads 1,2] [--min-time SEC] [--json FILE] [--profile]\n"
           "                 [--qdq-recipe R.qrl]\n"
           "Times the model as loaded (f32; a QDQ model runs its integer graph) and, with --recipe,\n"
           "the recipe's integer graph of it, on seeded random inputs: for each batch size and\n"
           "thread count one warm-up run, then runs until SEC seconds (default 1) have passed,\n"
           "at least three. Prints the median and fastest ms per batch, images/s and the GMAC/s of\n"
           "the convolutions and matrix products; --json writes the same numbers. --profile prints\n"
           "where each configuration's timed runs spent their time, per op type and node.\n"
           "--recipe-name NAME picks a recipe of the --recipe file (default: its first).\n");
}

/* Fills ba from the command line: -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, bench_args *ba)
{
    *ba = (bench_args){.batches = {1}, .threads = {1}, .nb = 1, .nt = 1, .min_time = 1.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--recipe")) {
            if (++i == argc)
                return cli_usage_error("bench", "--recipe needs a file");
            ba->recipe = argv[i];
        } else if (!strcmp(a, "--recipe-name")) {
            if (++i == argc)
                return cli_usage_error("bench", "--recipe-name needs a name");
            ba->recipe_name = argv[i];
        } else if (!strcmp(a, "--calib")) {
            if (++i == argc)
                return cli_usage_error("bench", "--calib needs a file");
            if (ba->ncalib == MAX_ARGS)
                return cli_usage_error("bench", "too many --calib files");
            ba->calib[ba->ncalib++] = argv[i];
        } else if (!strcmp(a, "--calib-count")) {
            if (++i == argc || !cli_parse_int(argv[i], 1, 1 << 30, &ba->calib_count))
                return cli_usage_error("bench", "--calib-count needs a positive number");
        } else if (!strcmp(a, "--batch")) {
            if (++i == argc || !(ba->nb = parse_list(argv[i], 1, 1 << 16, ba->batches)))
                return cli_usage_error("bench", "--batch needs sizes from 1 to 65536, e.g. 1,64");
        } else if (!strcmp(a, "--threads")) {
            if (++i == argc || !(ba->nt = parse_list(argv[i], 1, 256, ba->threads)))
                return cli_usage_error("bench", "--threads needs counts from 1 to 256, e.g. 1,2");
        } else if (!strcmp(a, "--min-time")) {
            char *end = NULL;
            ba->min_time = ++i < argc ? strtod(argv[i], &end) : -1;
            if (!end || *end || !(ba->min_time >= 0) || ba->min_time > 3600)
                return cli_usage_error("bench", "--min-time needs seconds from 0 to 3600");
        } else if (!strcmp(a, "--json")) {
            if (++i == argc || !argv[i][0])
                return cli_usage_error("bench", "--json needs a file");
            ba->json = argv[i];
        } else if (!strcmp(a, "--profile")) {
            ba->profile = 1;
        } else if (!strcmp(a, "--qdq-recipe")) {
            if (++i == argc)
                return cli_usage_error("bench", "--qdq-recipe needs a recipe file");
            ba->qdq_recipe = argv[i];
        } else if (a[0] == '-' || ba->model) {
            return cli_usage_error("bench", "unexpected argument '%s'", a);
        } else {
            ba->model = a;
        }
    }
    if (!ba->model)
        return cli_usage_error("bench", "missing MODEL.onnx");
    if (!ba->recipe != !ba->ncalib)
        return cli_usage_error("bench", "--recipe and --calib go together");
    if (ba->recipe_name && !ba->recipe)
        return cli_usage_error("bench", "--recipe-name needs --recipe");
    return -1;
}

int cli_bench(int argc, char **argv)
{
    bench_args ba;
    int rc = parse_args(argc, argv, &ba);
    if (rc >= 0)
        return rc;
    const char *model = ba.model, *recipe = ba.recipe;
    const int nb = ba.nb, nt = ba.nt, *batches = ba.batches, *threads = ba.threads;
    cli_runnable r;
    char err[CLI_ERRLEN];
    if (cli_load_runnable(model, ba.qdq_recipe, 1, &r, err) != 0)
        return cli_fail(err);
    qrl_recipe *rcp = NULL;
    qrl_quantized *qz = NULL;
    qrl_model *qm = NULL;
    rc = 1;
    bench_row *rows = calloc((size_t)(2 * nb * nt), sizeof *rows);
    if (!rows) {
        rc = cli_fail("out of memory");
        goto out;
    }
    if (recipe) {
        qrl_quantize_opts qo = {.recipe_name = ba.recipe_name, .threads = threads[nt - 1], .calib_count = ba.calib_count};
        if ((rc = cli_quantize_in_memory(model, r.m, recipe, 0, ba.ncalib, ba.calib, &qo, 0, &rcp, &qz)) != 0)
            goto out;
        rc = 1;
        if (!(qm = qrl_quantized_model(qz, err, sizeof err))) {
            rc = cli_fail(err);
            goto out;
        }
    }
    const char *loaded = r.q ? "qdq-int" : "fp32";
    char cpu[256];
    qrl_cpu_describe(cpu, sizeof cpu);
    printf("cpu:   %s\nmodel: %s\n%-8s %6s %7s %6s %11s %11s %11s %11s %9s\n", cpu, model, "variant", "batch", "threads", "runs",
           "ms median", "ms min", "images/s", "MMAC/image", "GMAC/s");
    int n = 0;
    for (int v = 0; v < (qz ? 2 : 1); v++)
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < nt; t++) {
                bench_row *row = &rows[n];
                row->variant = v ? "int8" : loaded;
                if (time_model(model, v ? qm : r.run, batches[b], threads[t], ba.min_time, ba.profile, row, err) != 0) {
                    rc = cli_fail(err);
                    goto out;
                }
                printf("%-8s %6d %7d %6d %11.3f %11.3f %11.1f %11.2f %9.1f\n", row->variant, row->batch, row->threads,
                       row->runs, row->ms_median, row->ms_min, row->batch * 1e3 / row->ms_median,
                       row->macs_per_run / row->batch * 1e-6, row->gmacs);
                fflush(stdout);
                n++;
            }
    if (ba.json && write_json(ba.json, model, recipe, rows, n, err) != 0) {
        rc = cli_fail(err);
        goto out;
    }
    rc = 0;
out:
    free(rows);
    qrl_quantized_free(qz);
    qrl_recipe_free(rcp);
    cli_runnable_free(&r);
    return rc;
}
