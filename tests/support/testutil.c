#include "testutil.h"
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "op.h"
#include "options.h"
#include "recipe.h"
#include "tensor_io.h"

qr_value *tu_input(qr_graph *g, const char *name, int ndim, const int64_t *dims)
{
    qr_value *v = qr_graph_new_value(g, name);
    v->t.dtype = QR_F32;
    qr_tensor_set_shape(&v->t, ndim, dims);
    v->is_input = 1;
    qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * (size_t)(g->n_inputs + 1));
    if (g->n_inputs)
        memcpy(in, g->inputs, sizeof *in * (size_t)g->n_inputs);
    in[g->n_inputs++] = v;
    g->inputs = in;
    return v;
}

qr_value *tu_const_f32(qr_graph *g, const char *name, int ndim, const int64_t *dims, const float *data)
{
    qr_tensor t = {.dtype = QR_F32};
    qr_tensor_set_shape(&t, ndim, dims);
    t.data = (void *)data;
    qr_value *v = qr_graph_new_value(g, name);
    qr_value_set_const(g, v, &t);
    return v;
}

qr_node *tu_node(qr_graph *g, const char *op, const char *name, int nin, qr_value **in, int nout)
{
    qr_node *n = qr_graph_add_node(g, op, name, nin, nout);
    n->def = qr_op_find("", op);
    n->attr = qr_arena_alloc(&g->arena, sizeof *n->attr * 16);
    if (!g->opset)
        g->opset = 17;
    n->opset = g->opset;
    for (int i = 0; i < nin; i++)
        n->in[i] = in[i];
    for (int j = 0; j < nout; j++) {
        char buf[200];
        snprintf(buf, sizeof buf, "%s_out%d", name, j);
        n->out[j] = qr_graph_new_value(g, buf);
        n->out[j]->producer = n;
    }
    return n;
}

static qr_attr *new_attr(qr_graph *g, qr_node *n, const char *name, qr_attr_kind k)
{
    /* a fresh array one longer (other helpers size it exactly), the new attribute cleared */
    qr_attr *v = qr_arena_alloc(&g->arena, sizeof *v * (size_t)(n->n_attr + 1));
    if (n->n_attr)
        memcpy(v, n->attr, sizeof *v * (size_t)n->n_attr);
    n->attr = v;
    qr_attr *a = &n->attr[n->n_attr++];
    memset(a, 0, sizeof *a);
    a->name = qr_arena_strdup(&g->arena, name);
    a->kind = k;
    return a;
}

void tu_attr_int(qr_graph *g, qr_node *n, const char *name, int64_t v)
{
    new_attr(g, n, name, QR_ATTR_INT)->i = v;
}

void tu_attr_float(qr_graph *g, qr_node *n, const char *name, float v)
{
    new_attr(g, n, name, QR_ATTR_FLOAT)->f = v;
}

void tu_attr_ints(qr_graph *g, qr_node *n, const char *name, int count, const int64_t *v)
{
    qr_attr *a = new_attr(g, n, name, QR_ATTR_INTS);
    a->n = count;
    a->ints = qr_arena_memdup(&g->arena, v, sizeof *v * (size_t)count);
}

void tu_output(qr_graph *g, qr_value *v)
{
    qr_value **o = qr_arena_alloc(&g->arena, sizeof *o * (size_t)(g->n_outputs + 1));
    if (g->n_outputs)
        memcpy(o, g->outputs, sizeof *o * (size_t)g->n_outputs);
    o[g->n_outputs++] = v;
    v->is_output = 1;
    g->outputs = o;
}

int tu_run(const char *cmd, char **output)
{
    char *full = malloc(strlen(cmd) + 16);
    sprintf(full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t k; p && (k = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += k;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = p ? pclose(p) : -1;
    if (output)
        *output = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

char *tu_sh(const char *fmt, ...)
{
    char cmd[8192], *out;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = tu_run(cmd, &out);
    cr_assert_eq(rc, 0, "`%s` exited with %d:\n%s", cmd, rc, out);
    return out;
}

const char *tu_qrl_bin(void)
{
    const char *b = getenv("QRL_BIN");
    return b && *b ? b : "build/qrl";
}

const char *tu_qrl(void)
{
    static char cmd[4200];
    if (!cmd[0]) {
        const char *b = tu_qrl_bin();
        cr_assert(!strchr(b, '\'') && strlen(b) < 4096, "QRL_BIN cannot be quoted: %s", b);
        snprintf(cmd, sizeof cmd, "'%s' --option poison=1", b);
    }
    return cmd;
}

const char *tu_root(void)
{
    const char *r = getenv("QRL_ROOT");
    return r && *r ? r : ".";
}

char *tu_tmpdir(void)
{
    char *d = strdup("/tmp/qrl-test-XXXXXX");
    return mkdtemp(d) ? d : NULL;
}

void tu_rmdir(char *dir)
{
    if (!dir)
        return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
}

int tu_file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

int tu_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || (e->d_name[1] && (e->d_name[1] != '.' || e->d_name[2]));
    if (d)
        closedir(d);
    return n;
}

/* One module cache for the whole run of a test binary, made fresh before its first test and removed
 * after its last: what tu_compile compiles was compiled by this build (as in memory), yet a recipe
 * that several tests compile (recipes/int8.qrl and the stdlib's kernels: seconds of libgccjit
 * each) is compiled once per binary. The hooks run in Criterion's runner process; each test's
 * process inherits its environment. A test that wants a cold compile says so (qc_compile with
 * no_cache, as test_cache and test_jit's cache tests do). */
#define TU_MODULE_CACHE "QRL_TEST_MODULE_CACHE"
static char *run_cache;
/* The folder of the files the tests of one run share (tu_shared), made and removed with the cache. */
#define TU_SHARED "QRL_TEST_SHARED"
static char *run_shared;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    run_cache = tu_tmpdir();
    if (run_cache)
        setenv(TU_MODULE_CACHE, run_cache, 1);
    run_shared = tu_tmpdir();
    if (run_shared)
        setenv(TU_SHARED, run_shared, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    unsetenv(TU_MODULE_CACHE);
    tu_rmdir(run_cache);
    run_cache = NULL;
    unsetenv(TU_SHARED);
    tu_rmdir(run_shared);
    run_shared = NULL;
}

char *tu_shared(const char *name, void (*make)(const char *out, void *user), void *user)
{
    const char *d = getenv(TU_SHARED);
    cr_assert(d && *d, "no $%s (the test binary's PRE_ALL hook sets it)", TU_SHARED);
    size_t n = strlen(d) + strlen(name) + 64;
    char *path = malloc(n), *tmp = malloc(n), *lock = malloc(n);
    cr_assert(path && tmp && lock);
    snprintf(path, n, "%s/%s", d, name);
    snprintf(lock, n, "%s/.lock", d);
    /* one maker at a time (Criterion's --jobs runs tests in parallel); a maker that fails ends its
     * process, which lets the lock go and leaves no file under the name */
    int fd = open(lock, O_CREAT | O_RDWR, 0600);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock %s", lock);
    if (access(path, F_OK) != 0) {
        snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
        make(tmp, user);
        cr_assert(access(tmp, F_OK) == 0, "%s: its maker wrote nothing", name);
        cr_assert(rename(tmp, path) == 0, "cannot rename %s to %s", tmp, path);
    }
    close(fd);
    free(tmp);
    free(lock);
    return path;
}

struct qrl_module *tu_compile(const char *rel, char *err, size_t n)
{
    char path[600], stdlib[600];
    if (rel[0] == '/')
        snprintf(path, sizeof path, "%s", rel);
    else
        snprintf(path, sizeof path, "%s/%s", tu_root(), rel);
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load(u, path);
    if (!u->diags.errors)
        qc_check(u);
    const char *cache = getenv(TU_MODULE_CACHE);
    qc_options o = cache && *cache ? (qc_options){.cache_dir = cache} : (qc_options){.no_cache = 1};
    qrl_module *m = u->diags.errors ? NULL : qc_compile(u, &o, NULL);
    snprintf(err, n, "%s: %s", rel, u->diags.n ? u->diags.v[0].msg : "cannot compile");
    qc_unit_free(u);
    return m;
}

char *tu_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
    cr_assert(s && n >= 0 && fread(s, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    fclose(f);
    return s;
}

double tu_json_number(const char *path, const char *key)
{
    char pat[256];
    char *r = tu_slurp(path);
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *s = strstr(r, pat);
    double v = -1;
    cr_assert(s && sscanf(s + strlen(pat), "%lf", &v) == 1, "%s has no %s", path, key);
    free(r);
    return v;
}

/* expr of r (ref) and t (test), two .npy files as float64 arrays of r's shape, by numpy. */
static double npy_stat(const char *ref, const char *test, const char *expr)
{
    char cmd[4096], *log;
    double v = 0;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np; r = np.load('%s').astype(np.float64); "
             "t = np.load('%s').astype(np.float64).reshape(r.shape); print(%s)\"",
             ref, test, expr);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert(sscanf(log, "%lf", &v) == 1, "%s", log);
    free(log);
    return v;
}

double tu_npy_sqnr(const char *ref, const char *test)
{
    return npy_stat(ref, test, "10 * np.log10((r * r).sum() / ((r - t) ** 2).sum())");
}

double tu_npy_rel_diff(const char *ref, const char *test)
{
    return npy_stat(ref, test, "np.abs(r - t).max() / np.abs(r).max()");
}

double tu_npy_max_diff(const char *a, const char *b)
{
    qr_tensor ta, tb;
    qr_error e;
    cr_assert_eq(qr_npy_read(a, &ta, &e), QR_OK, "%s: %s", a, e.msg);
    cr_assert_eq(qr_npy_read(b, &tb, &e), QR_OK, "%s: %s", b, e.msg);
    cr_assert(qr_tensor_same_shape(&ta, &tb), "%s and %s differ in shape", a, b);
    cr_assert(ta.dtype == QR_F32 && tb.dtype == QR_F32, "%s and %s: f32 expected", a, b);
    double m = 0;
    for (int64_t i = 0; i < qr_tensor_numel(&ta); i++)
        m = fmax(m, fabs((double)((float *)ta.data)[i] - ((float *)tb.data)[i]));
    qr_tensor_free(&ta);
    qr_tensor_free(&tb);
    return m;
}

void tu_write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

char *tu_slurp_root(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tu_root(), rel);
    return tu_slurp(path);
}

/* One type of a written signature at *s (advanced past it), independently of the runtime's names. */
static qr_param_desc parse_type(const char **s)
{
    static const struct { const char *name; qr_dtype t; } scalars[] = {
        {"bool", QR_BOOL}, {"i8", QR_I8},   {"u8", QR_U8},   {"i16", QR_I16}, {"u16", QR_U16},
        {"i32", QR_I32},   {"i64", QR_I64}, {"f32", QR_F32}, {"f64", QR_F64}};
    static const struct { const char *name; qr_param_kind k; } others[] = {
        {"void", QR_PARAM_VOID}, {"qtype", QR_PARAM_QTYPE}, {"qparams", QR_PARAM_QPARAMS}};
    qr_param_desc p = {NULL, QR_PARAM_SCALAR, QR_UNDEF};
    int tensor = !strncmp(*s, "tensor<", 7);
    if (tensor)
        *s += 7;
    size_t n = strcspn(*s, "[]<>(),");
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (!tensor && strlen(others[i].name) == n && !strncmp(*s, others[i].name, n))
            p.kind = others[i].k;
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
        if (strlen(scalars[i].name) == n && !strncmp(*s, scalars[i].name, n))
            p.elem = scalars[i].t;
    cr_assert(p.kind != QR_PARAM_SCALAR || p.elem != QR_UNDEF, "tu_fn: unknown type at '%s'", *s);
    *s += n;
    if (tensor) {
        cr_assert(**s == '>', "tu_fn: expected '>' at '%s'", *s);
        ++*s;
        p.kind = QR_PARAM_TENSOR;
    } else if (!strncmp(*s, "[]", 2)) {
        *s += 2;
        p.kind = QR_PARAM_ARRAY;
    }
    return p;
}

const struct qr_fn_desc *tu_fn(const struct qrl_module *m, const char *name, const char *type)
{
    const char *s = type;
    qr_param_desc result = parse_type(&s), params[QRL_MAX_PARAMS];
    int n = 0;
    cr_assert(*s == '(', "tu_fn: expected '(' at '%s' in %s", s, type);
    for (s++; *s && *s != ')'; n++) {
        cr_assert(n < QRL_MAX_PARAMS);
        params[n] = parse_type(&s);
        if (*s == ',')
            s++;
    }
    cr_assert(*s == ')' && !s[1], "tu_fn: expected ')' at the end of %s", type);
    qr_error e;
    const qr_fn_desc *d = qr_module_fn_typed(m, name, result, n, params, &e);
    cr_assert(d, "%s", e.msg);
    return d;
}

void tu_make_transformer_models(const char *dir)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tools/make_transformer_models.py' '%s' 2>&1", tu_root(), dir);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

void tu_option(const char *name, const char *value)
{
    qr_options o = *qr_options_get();
    qr_error e;
    cr_assert_eq(qr_options_parse(&o, name, value, &e), QR_OK, "%s", e.msg);
    qr_options_set(&o);
}

/* Every test process: poison on (as tu_qrl's --option poison=1 is for the qrl it runs). */
__attribute__((constructor)) static void tu_options_start(void)
{
    qr_options o = {0};
    o.poison = 1;
    qr_options_set(&o);
}

void tu_npy_save(const char *dir, const char *name, const qr_tensor *t)
{
    char path[1024];
    qr_error e = {{0}};
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(qr_npy_write(path, t, &e), QR_OK, "%s: %s", path, e.msg);
}

qr_tensor tu_npy_load(const char *dir, const char *name)
{
    char path[1024];
    qr_error e = {{0}};
    qr_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(qr_npy_read(path, &t, &e), QR_OK, "%s: %s", path, e.msg);
    return t;
}

qr_tensor tu_op_run(const char *domain, const char *op, int opset, qr_attr *attrs, int nattr, const qr_tensor **in,
                    int nin, qr_pool *pool, const qr_act *act)
{
    const qr_op_def *d = qr_op_find(domain, op);
    cr_assert(d, "no op %s", op);
    qr_node n = {.name = "t", .op = op, .domain = domain, .opset = opset, .n_in = nin, .n_out = 1, .n_attr = nattr,
                 .attr = attrs, .def = d};
    qr_tensor out;
    memset(&out, 0, sizeof out);
    qr_tensor *outs[1] = {&out};
    qr_error e = {{0}};
    qr_kctx k = {.node = &n, .opset = opset, .n_in = nin, .n_out = 1, .in = in, .out = outs, .err = &e, .pool = pool,
                 .act = act};
    cr_assert_eq(d->infer(&k), QR_OK, "%s: %s", op, e.msg);
    cr_assert_eq(qr_tensor_alloc(&out, &e), QR_OK, "%s: %s", op, e.msg);
    cr_assert_eq(qr_op_run(&k), QR_OK, "%s: %s", op, e.msg);
    return out;
}

float tu_act_ref(int act, float v)
{
    if (act == 1)
        return v <= 0 ? 0.0f : v;
    if (act == 2)
        return v < -0.5f ? -0.5f : v > 0.7f ? 0.7f : v;
    return v;
}

unsigned tu_lcg(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 16;
}

void tu_quant_inputs(float *x, int64_t n, int64_t zero, float s, float in_range_unit)
{
    unsigned seed = (unsigned)n * 7u + (unsigned)zero;
    for (int64_t i = 0; i < n; i++) {
        unsigned v = tu_lcg(&seed) % 64;
        x[i] = v == 0   ? NAN
               : v == 1 ? -0.0f
               : v == 2 ? 0.0f
               : v == 3 ? INFINITY
               : v == 4 ? -INFINITY
               : v < 16 ? ((float)((int)(tu_lcg(&seed) % 601) - 300) + 0.5f) * s
               : v < 20 ? (float)((int)(tu_lcg(&seed) % 2001) - 1000) * 1e3f
                        : (float)((int)(tu_lcg(&seed) % 40001) - 20000) / 100.0f * in_range_unit;
    }
}

float tu_vmin(float a, float b) { return isnan(b) ? a : a < b ? a : b; }
float tu_vmax(float a, float b) { return isnan(b) ? a : a > b ? a : b; }

uint8_t tu_qlinear_byte(int32_t acc, float m, int32_t bias, int32_t yz, float lo, float hi, int i8)
{
    volatile float x = (float)(int32_t)((uint32_t)acc + (uint32_t)bias) * m; /* volatile: no contraction */
    float v = tu_vmin(tu_vmax(rintf(x) + (float)yz, lo), hi);
    if (isnan(v))
        return 0;
    float tl = i8 ? -128.0f : 0.0f, th = i8 ? 127.0f : 255.0f;
    v = v > th ? th : v < tl ? tl : v;
    return i8 ? (uint8_t)(int8_t)truncf(v) : (uint8_t)truncf(v);
}
