#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ARGS 64

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* An output name made safe as a file name: path separators and oddities
 * become '_'; a name too long for a file name (NAME_MAX is 255 with ".npy"
 * and a temporary suffix to fit) keeps its first 180 characters and gets a
 * hash of the whole name, so different long names stay different. */
static void file_name_for(const char *name, char *buf, size_t n)
{
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char c = name[k];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '-' || (c == '.' && k > 0);
        buf[k] = ok ? c : '_';
    }
    buf[k] = 0;
    if (!k)
        snprintf(buf, n, "output");
    if (strlen(name) > 200 && n > 200)
        snprintf(buf + 180, n - 180, "-%016llx", (unsigned long long)name_hash(name));
}

/* The names taken so far, as an open-addressing set (a model may list thousands of outputs, one
 * name many times: a scan of all before each would be quadratic, its retries cubic). */
typedef struct name_set {
    const char **slot;
    size_t cap;
} name_set;

/* Adds name unless it is there: 1 when added, 0 when taken (or without memory: then nothing is
 * ever taken, and names stay as sanitized). */
static int name_set_add(name_set *s, const char *name)
{
    if (!s->slot)
        return 1;
    size_t i = (size_t)name_hash(name) & (s->cap - 1);
    for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
        if (!strcmp(s->slot[i], name))
            return 0;
    s->slot[i] = name;
    return 1;
}

/* File names of all outputs, distinct: a name that sanitizes to one already
 * taken (a/b and a_b) gets its hash appended, and its output's index when
 * that is taken too, never overwriting the other. */
static void output_file_names(const qrl_model *m, char (*names)[256])
{
    int n = qrl_model_num_outputs(m);
    name_set taken = {NULL, 16};
    while (taken.cap < 2 * (size_t)n + 16)
        taken.cap *= 2;
    taken.slot = calloc(taken.cap, sizeof *taken.slot);
    for (int j = 0; j < n; j++) {
        const char *name = qrl_model_output(m, j);
        file_name_for(name, names[j], sizeof names[j]);
        for (int tries = 0; !name_set_add(&taken, names[j]); tries++) {
            char base[256];
            file_name_for(name, base, sizeof base);
            base[200] = 0;
            snprintf(names[j], sizeof names[j], "%s-%08llx", base, (unsigned long long)(name_hash(name) & 0xffffffffu));
            if (tries)
                snprintf(names[j] + strlen(names[j]), sizeof names[j] - strlen(names[j]), "-%d", j + tries - 1);
        }
    }
    free(taken.slot);
}

typedef struct run_args {
    const char *model, *outdir, *recipe, *recipe_name, *qdq_recipe;
    char *in_spec[MAX_ARGS], *calib[MAX_ARGS];
    int nin, ncalib, threads, stats, calib_count, profile, batch;
} run_args;

static void usage(void)
{
    printf("usage: qrl run MODEL.onnx [-i [NAME=]FILE]... [-o DIR] [--batch B] [--threads N] [--stats]\n"
           "               [--profile] [--qdq-recipe R.qrl]\n"
           "               [--recipe R.qrl [--recipe-name NAME] --calib [NAME=]C.npy... [--calib-count N]]\n"
           "  -i, --input [NAME=]FILE  an input: .npy or ONNX TensorProto .pb; without NAME= it binds\n"
           "                  to the next graph input in order\n"
           "  -o, --output-dir DIR  where the outputs go (default .)\n"
           "  --batch B       run the inputs B samples at a time (default 0: all at once), see below\n"
           "  --threads N     worker threads of the kernels (default 1)\n"
           "  --calib-count N  calibrate on the first N samples only (with --recipe)\n"
           "  --recipe-name NAME  which recipe of the --recipe file (default: its first)\n"
           "Each graph output is written to DIR/<name>.npy (DIR is created if missing)\n"
           "(characters other than letters, digits, '_', '-', '.' become '_').\n"
           "--stats also prints the run time, the memory plan (arena vs. sum of all\n"
           "intermediate tensors) and the kernels' workspace.\n"
           "--profile prints the time of each op type and node of the run (shape inference,\n"
           "output allocation and kernel), with GMAC/s for convolutions and matrix products.\n"
           "A QDQ model (QuantizeLinear/DequantizeLinear pairs) runs on integers, lowered by the\n"
           "patterns and affine rules of stdlib/qdq.qrl, or of --qdq-recipe R.qrl.\n"
           "With --recipe and --calib the model is quantized in memory (as `qrl eval --recipe`\n"
           "does) and its integer graph, the recipe's own kernels and tables, runs instead.\n"
           "Inputs that all hold the same number of samples along their first axis, more than\n"
           "--batch, where the model's inputs declare that axis free, run in slices of B samples\n"
           "and each output is the slices' outputs concatenated: the same bits as one run, as long\n"
           "as the model treats the samples independently (`qrl eval` and calibration assume it\n"
           "too; it is not the default because a model may mix samples and still keep the first\n"
           "axis: a sequence-first transformer, a Softmax over axis 0). Otherwise, or when an\n"
           "output does not follow the slices (its first axis is not the slice's samples) or the\n"
           "graph quantizes at run time (a dynamic recipe's range spans the batch), the inputs run\n"
           "as one batch, as with --batch 0.\n"
           "Memory (qrl --max-memory SIZE): a .npy input is mapped, not read. In slices the run holds\n"
           "one slice of the inputs, its outputs (written to the files a slice at a time) and the\n"
           "run's tensors, which must fit the budget together: an input file larger than the budget\n"
           "runs with --batch. Inputs over the budget without --batch, a --batch that does not fit\n"
           "(the message says which does) or one sample that does not are errors, and nothing is\n"
           "written.\n");
}

/* Fills a from the command line: -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, run_args *ra)
{
    *ra = (run_args){.outdir = ".", .threads = 1, .batch = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "-i") || !strcmp(a, "--input")) {
            if (++i == argc)
                return cli_usage_error("run", "%s needs a file", a);
            if (ra->nin == MAX_ARGS)
                return cli_usage_error("run", "too many inputs");
            ra->in_spec[ra->nin++] = argv[i];
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output-dir")) {
            if (++i == argc || !argv[i][0]) /* "" would write into / */
                return cli_usage_error("run", "%s needs a directory", a);
            ra->outdir = argv[i];
        } else if (!strcmp(a, "--batch")) {
            if (++i == argc || !cli_parse_int(argv[i], 0, 1 << 30, &ra->batch))
                return cli_usage_error("run", "--batch needs a number of samples (0: all at once)");
        } else if (!strcmp(a, "--threads")) {
            if (++i == argc || !cli_parse_int(argv[i], 1, 256, &ra->threads))
                return cli_usage_error("run", "--threads needs a number from 1 to 256");
        } else if (!strcmp(a, "--recipe")) {
            if (++i == argc)
                return cli_usage_error("run", "--recipe needs a file");
            ra->recipe = argv[i];
        } else if (!strcmp(a, "--recipe-name")) {
            if (++i == argc)
                return cli_usage_error("run", "--recipe-name needs a name");
            ra->recipe_name = argv[i];
        } else if (!strcmp(a, "--calib")) {
            if (++i == argc)
                return cli_usage_error("run", "--calib needs a file");
            if (ra->ncalib == MAX_ARGS)
                return cli_usage_error("run", "too many --calib files");
            ra->calib[ra->ncalib++] = argv[i];
        } else if (!strcmp(a, "--calib-count")) {
            if (++i == argc || !cli_parse_int(argv[i], 1, 1 << 30, &ra->calib_count))
                return cli_usage_error("run", "--calib-count needs a positive number");
        } else if (!strcmp(a, "--stats")) {
            ra->stats = 1;
        } else if (!strcmp(a, "--profile")) {
            ra->profile = 1;
        } else if (!strcmp(a, "--qdq-recipe")) {
            if (++i == argc)
                return cli_usage_error("run", "--qdq-recipe needs a recipe file");
            ra->qdq_recipe = argv[i];
        } else if (a[0] == '-' || ra->model) {
            return cli_usage_error("run", "unexpected argument '%s'", a);
        } else {
            ra->model = a;
        }
    }
    if (!ra->model)
        return cli_usage_error("run", "missing MODEL.onnx");
    if (!ra->recipe != !ra->ncalib)
        return cli_usage_error("run", "--recipe and --calib go together");
    if (ra->recipe_name && !ra->recipe)
        return cli_usage_error("run", "--recipe-name needs --recipe");
    return -1;
}

/* Each output into outdir/<fnames[j]>.npy, all or nothing: after a failure the files this run
 * created are removed (never a file that was there before). */
static int write_outputs(const char *outdir, int nout, const qrl_tensor *outputs, char (*fnames)[256], char *err)
{
    char **written = calloc((size_t)nout + 1, sizeof *written);
    if (!written) {
        snprintf(err, CLI_ERRLEN, "out of memory");
        return 1;
    }
    int nwritten = 0, st = 0;
    for (int j = 0; j < nout && st == 0; j++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", outdir, fnames[j]);
        struct stat sb;
        int existed = lstat(path, &sb) == 0;
        if (qrl_tensor_write_npy(path, &outputs[j], err, CLI_ERRLEN) != 0) {
            for (int k = 0; k < nwritten; k++)
                if (written[k])
                    unlink(written[k]);
            st = 1;
            break;
        }
        written[nwritten++] = existed ? NULL : strdup(path);
    }
    for (int k = 0; k < nwritten; k++)
        free(written[k]);
    free(written);
    return st;
}

/* The samples every input holds along its first axis when the run may go in slices of them (see
 * usage): each input has a first axis of that one size, the model declares none of them fixed (an
 * input of a fixed batch takes it whole), and m quantizes nothing at run time (a range over the
 * whole batch): neither the recipe that made it (q, or NULL) nor an ONNX DynamicQuantizeLinear of
 * its own (a dynamic export runs as its ONNX ops). 0 otherwise. */
static int64_t shared_batch(const qrl_model *m, const qrl_quantized *q, const qrl_tensor *in, int nin)
{
    qrl_quant_summary s = {0};
    if (q)
        qrl_quantized_summary(q, &s);
    if (s.dynamic)
        return 0;
    for (int k = 0; k < qrl_model_num_nodes(m); k++)
        if (!strcmp(qrl_node_op(m, k), "DynamicQuantizeLinear"))
            return 0;
    int64_t n = 0;
    for (int i = 0; i < nin; i++) {
        qrl_value_info v;
        if (in[i].ndim < 1 || (i && in[i].dims[0] != n) || !qrl_dtype_size(in[i].dtype))
            return 0;
        if (qrl_value_get(m, qrl_model_input(m, i), &v) == 0 && v.ndim >= 1 && v.dims[0] >= 0)
            return 0;
        n = in[i].dims[0];
    }
    return n;
}

/* Bytes of one sample of t: an element of its first axis. */
static size_t sample_bytes(const qrl_tensor *t)
{
    size_t b = qrl_dtype_size(t->dtype);
    for (int d = 1; d < t->ndim; d++)
        b *= (size_t)t->dims[d];
    return b;
}

/* The bytes of every input's data: what a run of them all holds. */
static size_t inputs_bytes(const qrl_tensor *in, int nin)
{
    size_t b = 0;
    for (int i = 0; i < nin; i++)
        b += qrl_tensor_numel(&in[i]) * qrl_dtype_size(in[i].dtype);
    return b;
}

/* The input file of the largest sample, for the messages. */
static const char *input_file(const run_args *ra, const qrl_tensor *in, int nin)
{
    int best = 0;
    for (int i = 1; i < nin && i < ra->nin; i++)
        if (sample_bytes(&in[i]) > sample_bytes(&in[best]))
            best = i;
    const char *spec = best < ra->nin ? ra->in_spec[best] : "the input", *eq = strchr(spec, '=');
    return eq ? eq + 1 : spec;
}

/* What one sample costs a run (*per): its inputs' bytes, its outputs' and the run's tensors (the
 * plan's arena, or the peak of a dynamic run), from a run of sample 0 alone. 0; 1 on an error (err
 * set; a sample over the budget on its own is worded with the file and the sizes); -1 when the
 * outputs do not follow the samples (the caller runs the inputs whole). */
static int sample_cost(qrl_model *m, const run_args *ra, const qrl_tensor *in, int nin, int nout, size_t budget,
                       size_t *per, char *err)
{
    qrl_tensor *sin = calloc((size_t)nin + 1, sizeof *sin), *sout = calloc((size_t)nout + 1, sizeof *sout);
    size_t in1 = 0, out1 = 0;
    int st = 0;
    if (!sin || !sout) {
        snprintf(err, CLI_ERRLEN, "out of memory");
        st = 1;
    }
    for (int i = 0; i < nin && !st; i++) {
        sin[i] = in[i];
        sin[i].dims[0] = 1;
        in1 += sample_bytes(&in[i]);
    }
    if (!st && qrl_model_run(m, sin, sout, err, CLI_ERRLEN) != 0) {
        char why[CLI_ERRLEN];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, CLI_ERRLEN, "%s: one sample (%zu bytes) cannot run within the budget of %zu bytes "
                 "(--max-memory): %s", input_file(ra, in, nin), in1, budget, why);
        st = 1;
    }
    for (int j = 0; j < nout && !st; j++) {
        if (sout[j].ndim < 1 || sout[j].dims[0] != 1)
            st = -1;
        out1 += qrl_tensor_numel(&sout[j]) * qrl_dtype_size(sout[j].dtype);
    }
    if (sin && sout)
        cli_tensors_free(sout, nout);
    free(sin);
    free(sout);
    qrl_model_profile_reset(m); /* the probe is not this run's */
    if (st)
        return st;
    qrl_run_stats rs;
    qrl_model_stats(m, &rs);
    size_t act = rs.dynamic ? rs.peak_bytes : rs.arena_bytes;
    *per = in1 + out1 + act;
    if (*per > budget) {
        snprintf(err, CLI_ERRLEN, "%s: one sample takes %zu bytes to run (%zu of input, %zu of outputs, %zu of the "
                 "run's tensors), over the budget of %zu bytes (--max-memory)", input_file(ra, in, nin), *per, in1,
                 out1, act, budget);
        return 1;
    }
    return 0;
}

/* The outputs written a slice at a time: each file's header once the first slice gives the types. */
typedef struct out_files {
    qrl_output **f;
    qrl_tensor *shape; /* each output's dtype and dims over all n samples (no data) */
} out_files;

/* Runs m on in (n samples along the first axis) batch samples at a time, each slice's outputs
 * appended to their files in dir, the slice's input pages given back (a mapped .npy: the run holds
 * a slice of it, not the file). 0 with the files committed to the caller's output group; 1 on an
 * error (err set); -1 when an output does not follow the slices (its first axis is not the slice's
 * samples, or its type or other axes change between slices): the caller runs the inputs whole.
 * Nothing is left behind unless 0. */
static int run_in_slices(qrl_model *m, const qrl_tensor *in, int nin, int64_t n, int64_t batch, const char *dir,
                         char (*fnames)[256], qrl_tensor *shape, int nout, int *runs, char *err)
{
    qrl_tensor *sin = calloc((size_t)nin + 1, sizeof *sin), *sout = calloc((size_t)nout + 1, sizeof *sout);
    qrl_output **f = calloc((size_t)nout + 1, sizeof *f);
    int st = 0;
    *runs = 0;
    if (!sin || !sout || !f) {
        snprintf(err, CLI_ERRLEN, "out of memory");
        st = 1;
    }
    for (int64_t s = 0; s < n && !st; s += batch, ++*runs) {
        int64_t k = n - s < batch ? n - s : batch;
        for (int i = 0; i < nin; i++) { /* a view of the slice: C order keeps a sample's elements together */
            sin[i] = in[i];
            sin[i].dims[0] = k;
            sin[i].data = (char *)in[i].data + (size_t)s * sample_bytes(&in[i]);
        }
        if (qrl_model_run(m, sin, sout, err, CLI_ERRLEN) != 0) {
            st = 1;
            break;
        }
        for (int i = 0; i < nin; i++)
            qrl_tensor_release(&in[i], (size_t)s * sample_bytes(&in[i]), (size_t)k * sample_bytes(&in[i]));
        for (int j = 0; j < nout && !st; j++) {
            qrl_tensor *o = &sout[j], *w = &shape[j];
            if (o->ndim < 1 || o->dims[0] != k)
                st = -1;
            else if (!s) {
                *w = *o;
                w->dims[0] = n;
                w->data = NULL;
                char path[4096];
                snprintf(path, sizeof path, "%s/%s.npy", dir, fnames[j]);
                st = qrl_output_open(path, &f[j], err, CLI_ERRLEN) != 0 ||
                     qrl_tensor_write_npy_header(qrl_output_stream(f[j]), w, err, CLI_ERRLEN) != 0;
            } else if (o->dtype != w->dtype || o->ndim != w->ndim ||
                       memcmp(o->dims + 1, w->dims + 1, (size_t)(o->ndim - 1) * sizeof *o->dims))
                st = -1;
            if (!st && fwrite(o->data, 1, (size_t)k * sample_bytes(w), qrl_output_stream(f[j])) != (size_t)k * sample_bytes(w)) {
                snprintf(err, CLI_ERRLEN, "%s/%s.npy: cannot write", dir, fnames[j]);
                st = 1;
            }
        }
        cli_tensors_free(sout, nout);
    }
    for (int j = 0; f && j < nout; j++)
        if (f[j] && (st || qrl_output_commit(f[j], err, CLI_ERRLEN) != 0)) {
            if (st)
                qrl_output_abort(f[j]);
            st = st ? st : 1;
        }
    free(f);
    free(sin);
    free(sout);
    return st;
}

/* --stats: the run's time and its memory plan. */
static void print_stats(const qrl_model *m, double ms, int threads, int runs, int batch)
{
    qrl_run_stats st;
    qrl_model_stats(m, &st);
    printf("time: %.2f ms (plan + run + write, %d thread%s", ms, threads, threads > 1 ? "s" : "");
    if (runs > 1)
        printf(", %d runs of up to %d samples", runs, batch);
    printf(")\n");
    if (st.dynamic)
        printf("memory: dynamic (data-dependent shapes), peak %zu bytes live, %zu bytes in all intermediates\n",
               st.peak_bytes, st.sum_bytes);
    else
        printf("memory: arena %zu bytes for %zu bytes of intermediates (%.1f%%)\n", st.arena_bytes, st.sum_bytes,
               st.sum_bytes ? 100.0 * (double)st.arena_bytes / (double)st.sum_bytes : 0.0);
    printf("workspace: %zu bytes of kernel scratch, kept across runs\n", st.work_bytes);
    int banded = qrl_model_banded_nodes(m);
    if (banded)
        printf("bands: %d nodes run in chains by bands of rows\n", banded);
}

int cli_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    cli_runnable r;
    char err[CLI_ERRLEN];
    if (cli_load_runnable(a.model, a.qdq_recipe, a.threads, &r, err) != 0)
        return cli_fail(err);
    qrl_recipe *rcp = NULL;
    qrl_quantized *qz = NULL;
    if (a.recipe) {
        qrl_quantize_opts qo = {.recipe_name = a.recipe_name, .threads = a.threads, .calib_count = a.calib_count};
        int st = cli_quantize_in_memory(a.model, r.m, a.recipe, 0, a.ncalib, a.calib, &qo, 0, &rcp, &qz);
        if (st) {
            qrl_quantized_free(qz);
            qrl_recipe_free(rcp);
            cli_runnable_free(&r);
            return st;
        }
    }
    /* the model as loaded (a QDQ model: its integer graph), or the recipe's integer graph of it */
    qrl_model *rm = qz ? qrl_quantized_model(qz, err, sizeof err) : r.run;
    int nin = qrl_model_num_inputs(r.m), nout = rm ? qrl_model_num_outputs(rm) : 0;
    rc = 1;
    qrl_tensor *inputs = calloc((size_t)nin + 1, sizeof *inputs);
    qrl_tensor *outputs = calloc((size_t)nout + 1, sizeof *outputs);
    char (*fnames)[256] = calloc((size_t)nout + 1, sizeof *fnames);
    if (!inputs || !outputs || !fnames) {
        fprintf(stderr, "qrl: out of memory\n");
        goto out;
    }
    if (qrl_model_read_inputs(r.m, a.model, "-i", a.nin, a.in_spec, 0, inputs, err, sizeof err) != 0) {
        rc = cli_fail(err);
        goto out;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int runs = 1, st = !rm || qrl_model_configure(rm, a.threads, a.profile ? QRL_RUN_PROFILE : 0, err, sizeof err) != 0;
    int64_t n = st ? 0 : shared_batch(rm, qz ? qz : r.q, inputs, nin);
    size_t budget = qrl_max_memory(), held = inputs_bytes(inputs, nin), per = 0;
    /* the run holds its inputs (--max-memory counts them with its tensors): a slice of a mapped
     * .npy at a time when the samples may go in slices (--batch), else all of them */
    int sliced = 0;
    if (!st && n > 1 && ((a.batch > 0 && n > a.batch) || held > budget)) {
        st = sample_cost(rm, &a, inputs, nin, nout, budget, &per, err);
        size_t fit = per ? budget / per : 0;
        if (!st && !a.batch) {
            snprintf(err, sizeof err, "%s: its %lld samples take %zu bytes, over the budget of %zu bytes "
                     "(--max-memory): --batch %zu runs them in slices within it (one sample takes %zu bytes to run; "
                     "the same outputs when the model treats its samples independently)", input_file(&a, inputs, nin),
                     (long long)n, held, budget, fit, per);
            st = 1;
        } else if (!st && (size_t)a.batch > fit) {
            snprintf(err, sizeof err, "%s: --batch %d takes %zu bytes to run (%zu per sample: its inputs, outputs and "
                     "the run's tensors), over the budget of %zu bytes (--max-memory); at most --batch %zu fits",
                     input_file(&a, inputs, nin), a.batch, per * (size_t)a.batch, per, budget, fit);
            st = 1;
        }
        sliced = !st;
        if (st < 0) /* the outputs do not follow the samples: run whole, within the budget or not at all */
            st = 0;
    }
    if (!st && !sliced && held > budget) {
        snprintf(err, sizeof err, "%s: the inputs take %zu bytes, over the budget of %zu bytes (--max-memory)%s",
                 input_file(&a, inputs, nin), held, budget,
                 n > 1 ? "; they cannot run in slices (the outputs do not follow the samples)"
                       : "; they cannot run in slices (see qrl run --help, --batch)");
        st = 1;
    }
    if (rm)
        output_file_names(rm, fnames);
    if (!st && sliced) {
        /* outputs all or nothing, written a slice at a time */
        if (qrl_make_dirs(a.outdir, err, sizeof err) != 0)
            st = 1;
        if (!st) {
            qrl_outputs_begin();
            st = run_in_slices(rm, inputs, nin, n, a.batch, a.outdir, fnames, outputs, nout, &runs, err);
            if (st < 0)
                memset(outputs, 0, (size_t)nout * sizeof *outputs);
            if (st == 0 && qrl_outputs_commit(err, sizeof err) != 0)
                st = 1;
            if (st)
                qrl_outputs_abort();
        }
        if (st < 0) { /* the outputs do not follow the slices: the try is not this run's */
            qrl_model_profile_reset(rm);
            sliced = 0;
            if (held > budget) {
                snprintf(err, sizeof err, "%s: the inputs take %zu bytes, over the budget of %zu bytes (--max-memory), "
                         "and cannot run in slices (the outputs do not follow the samples)", input_file(&a, inputs, nin),
                         held, budget);
                st = 1;
            } else
                st = 0;
        }
    }
    if (!st && !sliced) {
        runs = 1;
        st = qrl_model_run(rm, inputs, outputs, err, sizeof err) != 0;
        if (!st && (qrl_make_dirs(a.outdir, err, sizeof err) != 0 || write_outputs(a.outdir, nout, outputs, fnames, err) != 0))
            st = 2;
    }
    if (st) {
        if (st == 1)
            cli_error_prefix(err, "%s", a.model);
        rc = cli_fail(err);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int j = 0; j < nout; j++) {
        char tb[160];
        printf("%s: %s -> %s/%s.npy\n", qrl_model_output(rm, j), qrl_tensor_type_str(&outputs[j], tb, sizeof tb),
               a.outdir, fnames[j]);
    }
    if (a.stats)
        print_stats(rm, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, a.threads, runs,
                    a.batch);
    rc = a.profile ? cli_print_profile(stdout, rm, 30) : 0;
out:
    cli_tensors_free(inputs, nin);
    cli_tensors_free(outputs, nout);
    free(fnames);
    free(inputs);
    free(outputs);
    qrl_quantized_free(qz);
    qrl_recipe_free(rcp);
    cli_runnable_free(&r);
    return rc;
}
