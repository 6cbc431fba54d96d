/* Front-end fuzzing: input generation and the pipeline run (see fuzzgen.h). */
#include "fuzzgen.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"

#define FG_MAX_INPUT ((size_t)64 << 10) /* mutated inputs are cut here: bounded work per input */

/* ------------------------------------------------------------ randomness */

static uint64_t next64(fg_gen *g)
{
    /* splitmix64: small, fast, the same on every platform */
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static size_t rnd(fg_gen *g, size_t n)
{
    return n ? (size_t)(next64(g) % n) : 0;
}

/* True with probability 1/n. */
static int one_in(fg_gen *g, size_t n)
{
    return rnd(g, n) == 0;
}

#define PICK(g, arr) ((arr)[rnd((g), sizeof(arr) / sizeof((arr)[0]))])

/* ---------------------------------------------------------------- buffer */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "fuzzgen: out of memory\n");
            abort();
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Replaces [at, at + len) of b with s[0..n). */
static void splice(buf *b, size_t at, size_t len, const char *s, size_t n)
{
    buf t = {0};
    put(&t, b->p, at);
    put(&t, s, n);
    put(&t, b->p + at + len, b->n - at - len);
    free(b->p);
    *b = t;
}

/* ------------------------------------------------------------ the seeds */

void fg_free(fg_gen *g)
{
    for (int i = 0; i < g->nseeds; i++)
        free(g->seeds[i]);
    free(g->seeds);
    free(g->seed_len);
    memset(g, 0, sizeof *g);
}

void fg_add_seed(fg_gen *g, const char *text, size_t len)
{
    char **s = realloc(g->seeds, sizeof *s * (size_t)(g->nseeds + 1));
    size_t *l = realloc(g->seed_len, sizeof *l * (size_t)(g->nseeds + 1));
    char *copy = malloc(len + 1);
    if (s)
        g->seeds = s;
    if (l)
        g->seed_len = l;
    if (!s || !l || !copy) {
        fprintf(stderr, "fuzzgen: out of memory\n");
        abort();
    }
    memcpy(copy, text, len);
    copy[len] = 0;
    g->seeds[g->nseeds] = copy;
    g->seed_len[g->nseeds++] = len;
}

/* Probes: near-miss programs, each reaching diagnostics that mutations of the
 * seeds rarely produce (wrong arguments, misplaced histogram methods, bad
 * roles, lowerings and recipe settings, imports of odd files; the import
 * paths are relative to the project root, where the fuzzer runs). fg_init
 * adds them as seeds, so each is run as it is and then mutated. */
static const char *const probes[] = {
    "fn g(alpha: i64, beta: i64 = 2) -> i64 { return alpha + beta }\n"
    "fn nothing() { }\n"
    "const k = 1\n"
    "fn f(a: i64[], t: tensor<f32>) -> i64 {\n"
    "  let m = min(a = 1, 2)\n"
    "  let x = g(alphx = 1)\n"
    "  let y = g(alpha = 1, 2)\n"
    "  let z = g(1, alpha = 2)\n"
    "  let w = g(1, 2, 3)\n"
    "  let n = len(1)\n"
    "  let q = k()\n"
    "  let r = a[0, 1]\n"
    "  let s = g\n"
    "  let u = nothing()\n"
    "  let v = i32(t)\n"
    "  let e = nosuch.m(a = 1)\n"
    "  let h: tensor<f32> = t\n"
    "  return 0\n"
    "}\n",
    "import \"calibrators.qrl\"\n"
    "fn f() -> f64 {\n"
    "  let c = minmax\n"
    "  let d = minmax()\n"
    "  return 0.0\n"
    "}\n"
    "const a = b\n"
    "const b = 1\n"
    "const c: qtype = 1\n"
    "const d = f()\n"
    "kernel k() -> i64 { }\n"
    "fn arr(a: qtype[], t: tensor<bool>) { }\n",
    "calibrator c(t: qtype, p: f64 = 1.0) {\n"
    "  state lo: f64 = 0\n"
    "  state b: f64 = lo\n"
    "  state h: histogram(1, 2)\n"
    "  state g: histogram(8)\n"
    "  state q: qtype\n"
    "  state a: f64[]\n"
    "  state z: f64[4] = 0\n"
    "  observe(x: tensor<f32>) {\n"
    "    g.add(1.0)\n"
    "    g.merge(g)\n"
    "    lo = f64(i32(x))\n"
    "  }\n"
    "  merge(o) {\n"
    "    g.merge(1)\n"
    "    g.add_abs(o.g)\n"
    "  }\n"
    "  solve(t: i64) -> f64 {\n"
    "    g.add(t)\n"
    "    return 1.0\n"
    "  }\n"
    "}\n",
    "kernel kk(xq: tensor<i8>, xs: f64, xz: i32, yq: tensor<u8>, ys: f32, yz: i64) { }\n"
    "fn notk(x: i64) -> i64 { return x }\n"
    "fn pred() -> bool { return true }\n"
    "pattern p1 {\n"
    "  match y = Relu(x) where y.attr(\"a\", true) and pred()\n"
    "  match z = Relu(x)\n"
    "  quantize x: activation(1), b: bias, w: bias(1, 2), q: activation, x: weight\n"
    "  lower y = kk(x, a = x)\n"
    "}\n"
    "pattern p2 {\n"
    "  match {\n"
    "    y = Relu(y)\n"
    "    y = Relu(x)\n"
    "  }\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = kk(x)\n"
    "}\n"
    "pattern p3 {\n"
    "  match y = Relu(x)\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = kk\n"
    "}\n"
    "pattern p4 {\n"
    "  match y = Relu(x)\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = notk(x)\n"
    "}\n"
    "pattern p5 {\n"
    "  match y = Relu(x)\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = kk(x)\n"
    "}\n",
    "import \"calibrators.qrl\"\n"
    "affine Relu(x) -> same { y = x.foo }\n"
    "affine Sigmoid(x) -> requantize { y = x }\n"
    "affine Tanh -> same { y = 0 }\n"
    "recipe r {\n"
    "  activation = u8 zzzzzzzz by 1\n"
    "  weight = i8 symmetric by minmax() when sqnr < 1\n"
    "  bias = f32 by minmax()\n"
    "  accumulate = i32 symmetric\n"
    "  fallback = i8 when sqnr < 20\n"
    "  numerics = foo\n"
    "  use minmax\n"
    "}\n"
    "recipe r2 {\n"
    "  activation = u8\n"
    "  weight = i8 by minmax()\n"
    "  fallback = f32\n"
    "}\n",
    "import \"tests/diag/lib/helper.qrl\"\n"
    "import \"tests/diag/lib/user.qrl\"\n"
    "import \"tests/diag/import_cycle_a.qrl\"\n"
    "import \"/proc/self/cmdline\"\n"
    "import \"stdlib\"\n",
    "kernel kk(xq: tensor<i8>, xs: i32, xz: i32, yq: tensor<f32>, ys: f32, yz: u8) { }\n"
    "pattern p5 {\n"
    "  match y = Relu(x)\n"
    "  quantize x: activation, y: activation\n"
    "  lower y = kk(x)\n"
    "}\n"
    "pattern p6 {\n"
    "  match y = Conv(x, w, b)\n"
    "  quantize x: activation, w: bias(1, 2), b: bias, y: activation\n"
    "  lower y = kk(x, w, b)\n"
    "}\n",
    "import \"calibrators.qrl\"\n"
    "kernel kk(xq: tensor<i8>, xs: f32, xz: i32, yq: tensor<u8>, ys: f32, yz: i32, a: f64[]) {\n"
    "  a = a\n"
    "  var b = true\n"
    "  b += true\n"
    "}\n"
    "fn sized(a: i64[3]) { }\n"
    "affine Relu(x) -> same {\n"
    "  y = x\n"
    "  return 1\n"
    "}\n"
    "pattern p {\n"
    "  match y = Relu(x) where y.attr(1, 0) == 0 and y.attr(y.op, 0) == 0\n"
    "  quantize x: activation, y: weight(1)\n"
    "  lower y = kk(x)\n"
    "}\n"
    "recipe r {\n"
    "  activation = x\n"
    "  weight = i32 by minmax()\n"
    "  bias = i32\n"
    "  bias = i32\n"
    "  input = u8 symetric by minmax()\n"
    "}\n",
    /* recipes that derive: a shipped base, a chain, a budget beside an inherited fallback, and
     * each wrong base (unknown, not a recipe, itself, a cycle, one in error) */
    "import \"calibrators.qrl\"\n"
    "import \"recipes/int8.qrl\"\n"
    "import \"transforms.qrl\"\n"
    "kernel k() { }\n"
    "recipe a : int8 {\n"
    "  transform = equalize()\n"
    "}\n"
    "recipe b : a {\n"
    "  candidate = f32\n"
    "  budget = bits(8)\n"
    "}\n"
    "recipe c : minmax { }\n"
    "recipe d : int9 { }\n"
    "recipe e : e { }\n"
    "recipe f : g { }\n"
    "recipe g : f {\n"
    "  tolerance = 3\n"
    "}\n"
    "recipe h : k { }\n"
    "recipe i : bad {\n"
    "  validate = 0\n"
    "}\n"
    "recipe bad {\n"
    "  activation = u8 by nosuch()\n"
    "}\n",
};

void fg_init(fg_gen *g, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->rng = seed;
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        fg_add_seed(g, probes[i], strlen(probes[i]));
}

int fg_add_seed_file(fg_gen *g, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    buf b = {0};
    char chunk[4096];
    for (size_t k; (k = fread(chunk, 1, sizeof chunk, f)) > 0;)
        put(&b, chunk, k);
    int ok = !ferror(f);
    fclose(f);
    if (ok)
        fg_add_seed(g, b.p ? b.p : "", b.n);
    free(b.p);
    return ok;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fg_add_seed_dir(fg_gen *g, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char **names = NULL;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len <= 4 || strcmp(de->d_name + len - 4, ".qrl"))
            continue;
        char **v = realloc(names, sizeof *v * (size_t)(n + 1));
        if (!v)
            break;
        names = v;
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, (size_t)n, sizeof *names, by_name); /* the same order on every machine */
    int added = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        added += fg_add_seed_file(g, path);
        free(names[i]);
    }
    free(names);
    return added;
}

/* ------------------------------------------------------------ dictionary */

static const char *const dict[] = {
    /* keywords */
    "calibrator", "pattern", "affine", "kernel", "fn", "recipe", "import", "const", "state", "observe", "merge",
    "solve", "match", "where", "quantize", "lower", "same", "fixed", "table", "requantize", "use", "by", "when",
    "let", "var", "if", "else", "for", "in", "while", "return", "break", "continue", "sat", "tensor", "qtype",
    "qparams", "histogram", "i8", "u8", "i16", "u16", "u32", "i32", "i64", "f32", "f64", "bool", "and", "or", "not",
    "true", "false",
    /* operators and punctuation */
    "(", ")", "[", "]", "{", "}", "<", ">", "..", "->", "=>", "=", "+=", "-=", "*=", "/=", "==", "!=", "<=", ">=",
    "!", "~", "<<", ">>", "&", "|", "^", "+", "-", "*", "/", "%", ",", ":", ";", ".", "?", "_",
    /* literals */
    "\"str\"", "\"\"", "\"a\\nb\"", "\"\\q\"", "\"calibrators.qrl\"", "\"transB\"", "0", "1", "-1", "255", "0x1F",
    "0b11", "1e9", "3.5", "0x1.8p3", "9999999999999999999", "18446744073709551616", "9223372036854775808",
    "2147483648", "1e999", "1e-999", "0.0", "inf", "nan", "pi",
    /* names the stdlib and the checker know */
    "x", "y", "t", "o", "h", "v", "acc", "lo", "hi", "minmax", "percentile", "Conv", "Relu", "Gemm", "activation",
    "weight", "bias", "output", "symmetric", "asymmetric", "narrow", "per_channel", "numerics", "fallback", "sqnr",
    "min", "max", "clamp", "select", "len", "dim", "rank", "present", "numel", "attr", "zero", "scale", "bits",
    "weight(axis = 0)", "bias(x, w)", "len(a)", "x.numel", "h.add_abs(x)", "o.lo", "t.signed", "x.min()",
    /* layout */
    "\n", "\n", "\n", "\n", " ", "\t", "#c\n", "/*", "*/", "/* c */",
};

/* Literals near the edges of every type, and numbers the lexer must refuse. */
static const char *const numbers[] = {
    "0", "1", "2", "-1", "7", "8", "15", "16", "31", "32", "63", "64", "65", "127", "128", "-128", "-129", "255",
    "256", "32767", "32768", "-32768", "65535", "65536", "2147483647", "2147483648", "-2147483648", "4294967295",
    "4294967296", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "0x7f", "0xff", "0xFFFFFFFFFFFFFFFF", "0x10000000000000000", "0b1", "0b", "0x", "0x1p",
    "1e", "1e+", "1.5e-", "0.5", "1.0", "3.5", "1e-3", "1e308", "1e309", "1e-320", "0x1.fffffffffffffp1023",
    "4.9e-324", "12abc", "1_000", "00", "007", "1.", ".5",
};

/* ---------------------------------------------------------- mutations */

static int is_word(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The token around position at: [*s, *e). */
static void token_at(const buf *b, size_t at, size_t *s, size_t *e)
{
    *s = *e = at;
    if (at >= b->n)
        return;
    if (is_word((unsigned char)b->p[at])) {
        while (*s > 0 && is_word((unsigned char)b->p[*s - 1]))
            (*s)--;
        while (*e < b->n && is_word((unsigned char)b->p[*e]))
            (*e)++;
    } else if (b->p[at] == '"') {
        *e = at + 1;
        while (*e < b->n && b->p[*e] != '"' && b->p[*e] != '\n')
            (*e)++;
        if (*e < b->n && b->p[*e] == '"')
            (*e)++;
    } else {
        *e = at + 1;
    }
}

/* [*s, *e): the line holding position at, with its newline. */
static void line_at(const buf *b, size_t at, size_t *s, size_t *e)
{
    *s = *e = at;
    while (*s > 0 && b->p[*s - 1] != '\n')
        (*s)--;
    while (*e < b->n && b->p[*e] != '\n')
        (*e)++;
    if (*e < b->n)
        (*e)++;
}

static void mutate(fg_gen *g, buf *b)
{
    size_t n = b->n;
    switch (rnd(g, 13)) {
    case 0: /* flip bits */
        for (size_t k = 0, m = 1 + rnd(g, 4); k < m && n; k++)
            b->p[rnd(g, n)] ^= (char)(1u << rnd(g, 8));
        break;
    case 1: { /* set bytes, now and then to ones the lexer must refuse */
        static const char special[] = {0, '\n', '"', '\\', '#', '\r', '\t', (char)0x80, (char)0xff, '@', '$', '`'};
        for (size_t k = 0, m = 1 + rnd(g, 3); k < m && n; k++)
            b->p[rnd(g, n)] = one_in(g, 2) ? special[rnd(g, sizeof special)] : (char)rnd(g, 256);
        break;
    }
    case 2: { /* delete a range */
        if (!n)
            break;
        size_t at = rnd(g, n), len = 1 + rnd(g, one_in(g, 4) ? 400 : 20);
        if (len > n - at)
            len = n - at;
        splice(b, at, len, "", 0);
        break;
    }
    case 3: { /* duplicate a range */
        if (!n)
            break;
        size_t at = rnd(g, n), len = 1 + rnd(g, one_in(g, 4) ? 400 : 40);
        if (len > n - at)
            len = n - at;
        char *copy = malloc(len);
        memcpy(copy, b->p + at, len);
        splice(b, at + len, 0, copy, len);
        free(copy);
        break;
    }
    case 4: { /* swap two ranges */
        if (n < 4)
            break;
        size_t x[4];
        for (int k = 0; k < 4; k++)
            x[k] = rnd(g, n + 1);
        for (int i = 1; i < 4; i++) /* sort: [x0, x1) and [x2, x3) */
            for (int k = i; k > 0 && x[k - 1] > x[k]; k--) {
                size_t t = x[k];
                x[k] = x[k - 1];
                x[k - 1] = t;
            }
        buf t = {0};
        put(&t, b->p, x[0]);
        put(&t, b->p + x[2], x[3] - x[2]);
        put(&t, b->p + x[1], x[2] - x[1]);
        put(&t, b->p + x[0], x[1] - x[0]);
        put(&t, b->p + x[3], n - x[3]);
        free(b->p);
        *b = t;
        break;
    }
    case 5:
    case 6: { /* insert dictionary tokens */
        size_t at = rnd(g, n + 1);
        buf t = {0};
        for (size_t k = 0, m = 1 + rnd(g, 3); k < m; k++) {
            puts_(&t, PICK(g, dict));
            if (!one_in(g, 4))
                puts_(&t, " ");
        }
        splice(b, at, 0, t.p, t.n);
        free(t.p);
        break;
    }
    case 7:
    case 8: { /* replace a token: by a dictionary token, a number or another token of this text */
        if (!n)
            break;
        size_t s, e, s2, e2;
        token_at(b, rnd(g, n), &s, &e);
        const char *with;
        size_t wlen;
        char tmp[300];
        switch (rnd(g, 3)) {
        case 0: with = PICK(g, dict); wlen = strlen(with); break;
        case 1: with = PICK(g, numbers); wlen = strlen(with); break;
        default:
            token_at(b, rnd(g, n), &s2, &e2);
            wlen = e2 - s2 < sizeof tmp ? e2 - s2 : sizeof tmp - 1;
            memcpy(tmp, b->p + s2, wlen);
            with = tmp;
            break;
        }
        splice(b, s, e - s, with, wlen);
        break;
    }
    case 9: { /* a line: deleted, duplicated or moved */
        if (!n)
            break;
        size_t s, e, s2, e2;
        line_at(b, rnd(g, n), &s, &e);
        size_t len = e - s;
        char *line = malloc(len + 1);
        memcpy(line, b->p + s, len);
        int op = (int)rnd(g, 3);
        if (op != 1)
            splice(b, s, len, "", 0);
        if (op != 0 && b->n) {
            line_at(b, rnd(g, b->n), &s2, &e2);
            splice(b, s2, 0, line, len);
        } else if (op != 0) {
            splice(b, 0, 0, line, len);
        }
        free(line);
        break;
    }
    case 10: { /* a line of another seed */
        if (!g->nseeds)
            break;
        int k = (int)rnd(g, (size_t)g->nseeds);
        buf other = {g->seeds[k], g->seed_len[k], 0};
        if (!other.n)
            break;
        size_t s, e, s2, e2;
        line_at(&other, rnd(g, other.n), &s, &e);
        char *line = malloc(e - s + 2);
        memcpy(line, other.p + s, e - s);
        size_t len = e - s;
        if (!len || line[len - 1] != '\n')
            line[len++] = '\n';
        if (n) {
            line_at(b, rnd(g, n), &s2, &e2);
            splice(b, one_in(g, 2) ? s2 : e2, 0, line, len);
        } else {
            put(b, line, len);
        }
        free(line);
        break;
    }
    case 11: { /* a long name or number, at and around the lexer's limits */
        static const int lens[] = {127, 128, 129, 255, 256, 257, 1000};
        static const char fill[] = "a9_x";
        char run[1000];
        int len = lens[rnd(g, sizeof lens / sizeof lens[0])];
        memset(run, fill[rnd(g, 4)], (size_t)len);
        splice(b, rnd(g, n + 1), 0, run, (size_t)len);
        break;
    }
    default: /* cut short */
        if (n)
            b->n = rnd(g, n), b->p[b->n] = 0;
        break;
    }
}

/* ------------------------------------------------- generated programs */

/* Random programs that mostly type-check: typed expressions over the names
 * in scope, statements, functions, kernels, calibrators, affine rules,
 * patterns and recipes. Now and then something wrong on purpose. */

enum { T_BOOL, T_I8, T_U8, T_I16, T_U16, T_I32, T_I64, T_F32, T_F64, NSCALAR };
static const char *const tname[] = {"bool", "i8", "u8", "i16", "u16", "i32", "i64", "f32", "f64"};

enum { K_SCALAR, K_ARRAY, K_TENSOR, K_HIST, K_QTYPE, K_QPARAMS, K_OTHER /* merge's o */, K_AFFIN };

typedef struct var {
    char name[16];
    int kind, t;
    int mut;      /* may be assigned */
    int readonly; /* arrays and tensors: elements read only */
    int state;    /* calibrator state */
} var;

typedef struct fnsig {
    char name[16];
    int ret; /* -1: none */
    int np;
    int pk[4], pt[4]; /* kind and element type of each parameter */
    char pn[4][16];   /* and its name */
} fnsig;

typedef struct prog {
    fg_gen *g;
    buf *b;
    var v[96];
    int nv;
    fnsig fns[8];
    int nfns;
    int loops;
    int ids;
    int where; /* 0 fn, 1 kernel, 2 observe, 3 merge, 4 solve, 5 affine, 6 table, 7 const */
    int indent;
    char recipes[8][16]; /* the recipes written so far: bases a derived recipe may name */
    int nrecipes;
    char items[8][16]; /* other items written so far (kernels, patterns, calibrators): bases that are not recipes */
    int nitems;
} prog;

static void note_name(char (*names)[16], int *n, const char *fmt, int id)
{
    if (*n < 8)
        snprintf(names[(*n)++], 16, fmt, id);
}

static int is_int_t(int t) { return t >= T_I8 && t <= T_I64; }
static int is_float_t(int t) { return t == T_F32 || t == T_F64; }
static int is_signed_t(int t) { return t == T_I8 || t == T_I16 || t == T_I32 || t == T_I64 || is_float_t(t); }

static void newline(prog *p)
{
    puts_(p->b, "\n");
    for (int i = 0; i < p->indent; i++)
        puts_(p->b, "  ");
}

/* A fresh name: prefix and a number. */
static void fresh(prog *p, const char *prefix, char name[16])
{
    snprintf(name, 16, "%s%d", prefix, p->ids++);
}

/* Brings name into scope. */
static var *push_var(prog *p, const char *name, int kind, int t, int mut)
{
    if (p->nv == (int)(sizeof p->v / sizeof p->v[0]))
        p->nv--; /* full: the last one is forgotten */
    var *v = &p->v[p->nv++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->kind = kind;
    v->t = t;
    v->mut = mut;
    return v;
}

static var *add_var(prog *p, const char *prefix, int kind, int t, int mut)
{
    char name[16];
    fresh(p, prefix, name);
    return push_var(p, name, kind, t, mut);
}

static var *find_var(prog *p, int kind, int t, int mut)
{
    int cand[96], n = 0;
    for (int i = 0; i < p->nv; i++)
        if (p->v[i].kind == kind && (t < 0 || p->v[i].t == t) && (!mut || p->v[i].mut))
            cand[n++] = i;
    return n ? &p->v[cand[rnd(p->g, (size_t)n)]] : NULL;
}

static void texpr(prog *p, int t, int d);

/* A call of f: arguments by position or, now and then, by name. */
static void call_fn(prog *p, const fnsig *f, int d)
{
    int named = one_in(p->g, 4);
    putf(p->b, "%s(", f->name);
    for (int i = 0; i < f->np; i++) {
        if (i)
            puts_(p->b, ", ");
        if (named)
            putf(p->b, "%s = ", f->pn[i]);
        var *a = f->pk[i] == K_SCALAR ? NULL : find_var(p, f->pk[i], f->pt[i], 0);
        if (a)
            puts_(p->b, a->name);
        else
            texpr(p, f->pt[i], d - 1);
    }
    puts_(p->b, ")");
}

static void literal(prog *p, int t)
{
    fg_gen *g = p->g;
    if (one_in(g, 40)) { /* out of range or of the wrong kind */
        puts_(p->b, PICK(g, numbers));
        return;
    }
    if (t == T_BOOL) {
        puts_(p->b, one_in(g, 2) ? "true" : "false");
    } else if (is_float_t(t)) {
        static const char *const f[] = {"0.5", "1.0", "2.0", "0.25", "1e-3", "3.5", "100.0", "1", "0", "inf", "pi"};
        puts_(p->b, PICK(g, f));
    } else {
        static const int lim[] = {0, 127, 255, 32767, 65535, 1 << 30, 1 << 30};
        putf(p->b, "%d", (int)rnd(g, one_in(g, 8) ? (size_t)lim[t - T_I8 + 1] + 1 : 10));
    }
}

/* An expression of scalar type t, at most d levels deep. */
static void texpr(prog *p, int t, int d)
{
    fg_gen *g = p->g;
    buf *b = p->b;
    if (d <= 0 || one_in(g, 4)) {
        var *v = find_var(p, K_SCALAR, t, 0);
        if (v && !one_in(g, 3))
            puts_(b, v->name);
        else
            literal(p, t);
        return;
    }
    if (one_in(g, 60)) { /* a scalar of another type: the checker objects */
        texpr(p, (int)rnd(g, NSCALAR), d - 1);
        return;
    }
    int other = (int)rnd(g, NSCALAR);
    switch (rnd(g, 12)) {
    case 0: /* parentheses */
        puts_(b, "(");
        texpr(p, t, d - 1);
        puts_(b, ")");
        return;
    case 1: /* a conversion */
        if (t == T_BOOL && !one_in(g, 4))
            break;
        if (is_int_t(t) && one_in(g, 2)) {
            putf(b, "sat<%s>(", tname[t]);
        } else {
            putf(b, "%s(", tname[t]);
        }
        texpr(p, other == T_BOOL && one_in(g, 2) ? T_I32 : other, d - 1);
        puts_(b, ")");
        return;
    case 2: { /* select */
        puts_(b, "select(");
        texpr(p, T_BOOL, d - 1);
        puts_(b, ", ");
        texpr(p, t, d - 1);
        puts_(b, ", ");
        texpr(p, t, d - 1);
        puts_(b, ")");
        return;
    }
    case 3: { /* a user function */
        int cand[8], n = 0;
        for (int i = 0; i < p->nfns; i++)
            if (p->fns[i].ret == t)
                cand[n++] = i;
        if (!n || p->where == 7)
            break;
        call_fn(p, &p->fns[cand[rnd(g, (size_t)n)]], d);
        return;
    }
    case 4: { /* array and tensor elements; a tensor also by one index per dimension */
        var *a = find_var(p, one_in(g, 2) ? K_ARRAY : K_TENSOR, t, 0);
        if (!a || t == T_BOOL)
            break;
        putf(b, "%s[", a->name);
        for (size_t i = 0, m = a->kind == K_TENSOR && one_in(g, 3) ? 2 + rnd(g, 3) : 1; i < m; i++) {
            if (i)
                puts_(b, ", ");
            texpr(p, T_I64, d - 1);
        }
        puts_(b, "]");
        return;
    }
    default: break;
    }
    if (t == T_BOOL) {
        static const char *const cmp[] = {"==", "!=", "<", "<=", ">", ">="};
        switch (rnd(g, 6)) {
        case 0:
        case 1: {
            int u = (int)rnd(g, NSCALAR);
            texpr(p, u, d - 1);
            putf(b, " %s ", u == T_BOOL ? (one_in(g, 2) ? "==" : "!=") : PICK(g, cmp));
            texpr(p, u, d - 1);
            return;
        }
        case 2:
            texpr(p, T_BOOL, d - 1);
            puts_(b, one_in(g, 2) ? " and " : " or ");
            texpr(p, T_BOOL, d - 1);
            return;
        case 3:
            puts_(b, "not ");
            texpr(p, T_BOOL, d - 1);
            return;
        case 4:
            putf(b, "%s(", one_in(g, 2) ? "isnan" : "isinf");
            texpr(p, one_in(g, 2) ? T_F32 : T_F64, d - 1);
            puts_(b, ")");
            return;
        default: {
            var *q = p->where == 4 ? find_var(p, K_QTYPE, -1, 0) : NULL;
            if (q) {
                putf(b, "%s.%s", q->name, one_in(g, 2) ? "signed" : "narrow");
                return;
            }
            literal(p, t);
            return;
        }
        }
    }
    if (is_int_t(t)) {
        static const char *const ops[] = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"};
        switch (rnd(g, 8)) {
        case 0:
        case 1:
        case 2: {
            const char *op = PICK(g, ops);
            texpr(p, t, d - 1);
            putf(b, " %s ", op);
            if (!strcmp(op, "<<") || !strcmp(op, ">>"))
                putf(b, "%d", (int)rnd(g, 70));
            else
                texpr(p, t, d - 1);
            return;
        }
        case 3:
            if (is_signed_t(t)) {
                puts_(b, "-");
                texpr(p, t, d - 1);
            } else {
                puts_(b, "~");
                texpr(p, t, d - 1);
            }
            return;
        case 4:
        case 5: {
            static const char *const f[] = {"min", "max", "clamp", "abs"};
            const char *fn = PICK(g, f);
            int na = !strcmp(fn, "clamp") ? 3 : !strcmp(fn, "abs") ? 1 : 2;
            putf(b, "%s(", fn);
            for (int i = 0; i < na; i++) {
                if (i)
                    puts_(b, ", ");
                texpr(p, t, d - 1);
            }
            puts_(b, ")");
            return;
        }
        default:
            if (t == T_I64) { /* sizes and fields */
                var *a = find_var(p, K_ARRAY, -1, 0), *x = find_var(p, K_TENSOR, -1, 0);
                var *q = find_var(p, K_QTYPE, -1, 0), *h = find_var(p, K_HIST, -1, 0);
                var *qp = find_var(p, K_QPARAMS, -1, 0);
                switch (rnd(g, 6)) {
                case 0: if (a) { putf(b, one_in(g, 2) ? "len(%s)" : "%s.len", a->name); return; } break;
                case 1: if (x) { putf(b, "%s.%s", x->name, one_in(g, 2) ? "numel" : "rank"); return; } break;
                case 2: if (x) { putf(b, "%s.dim(", x->name); texpr(p, T_I64, d - 1); puts_(b, ")"); return; } break;
                case 3: if (q) { static const char *const fq[] = {"bits", "qmin", "qmax", "axis"}; putf(b, "%s.%s", q->name, PICK(g, fq)); return; } break;
                case 4: if (h) { putf(b, "%s.bins", h->name); return; } break;
                default: if (qp) { putf(b, "%s.zero", qp->name); return; } break;
                }
            }
            if (t == T_I32 && p->where == 5) {
                var *x = find_var(p, K_AFFIN, -1, 0);
                if (x) {
                    putf(b, "%s.zero", x->name);
                    return;
                }
            }
            texpr(p, t, d - 1);
            return;
        }
    }
    /* floats */
    static const char *const ops[] = {"+", "-", "*", "/"};
    switch (rnd(g, 8)) {
    case 0:
    case 1:
    case 2:
        texpr(p, t, d - 1);
        putf(b, " %s ", PICK(g, ops));
        texpr(p, t, d - 1);
        return;
    case 3:
        puts_(b, "-");
        texpr(p, t, d - 1);
        return;
    case 4: {
        static const char *const f[] = {"floor", "ceil", "trunc", "round_even", "round_away", "round_up", "sqrt",
                                        "exp", "log", "log2", "tanh", "erf", "abs"};
        putf(b, "%s(", PICK(g, f));
        texpr(p, t, d - 1);
        puts_(b, ")");
        return;
    }
    case 5: {
        static const char *const f[] = {"min", "max", "clamp", "pow"};
        const char *fn = PICK(g, f);
        int na = !strcmp(fn, "clamp") ? 3 : 2;
        putf(b, "%s(", fn);
        for (int i = 0; i < na; i++) {
            if (i)
                puts_(b, ", ");
            texpr(p, t, d - 1);
        }
        puts_(b, ")");
        return;
    }
    default:
        if (t == T_F64) {
            var *x = find_var(p, K_TENSOR, T_F32, 0), *h = find_var(p, K_HIST, -1, 0);
            var *qp = find_var(p, K_QPARAMS, -1, 0), *o = find_var(p, K_OTHER, -1, 0);
            var *ai = p->where == 5 ? find_var(p, K_AFFIN, -1, 0) : NULL;
            switch (rnd(g, 6)) {
            case 0:
                if (x && p->where >= 2 && p->where <= 4) {
                    static const char *const m[] = {"min", "max", "absmax", "sum"};
                    putf(b, "%s.%s()", x->name, PICK(g, m));
                    return;
                }
                break;
            case 1:
                if (h) {
                    static const char *const m[] = {"quantile", "bin", "edge"};
                    const char *mm = PICK(g, m);
                    putf(b, "%s.%s(", h->name, mm);
                    texpr(p, strcmp(mm, "quantile") ? T_I64 : T_F64, d - 1);
                    puts_(b, ")");
                    return;
                }
                break;
            case 2:
                if (h) {
                    static const char *const m[] = {"count", "lo", "hi", "width"};
                    putf(b, "%s.%s", h->name, PICK(g, m));
                    return;
                }
                break;
            case 3:
                if (qp) {
                    putf(b, "%s.scale", qp->name);
                    return;
                }
                break;
            case 4:
                if (o) { /* merge: a field of the other state */
                    for (int i = 0; i < p->nv; i++)
                        if (p->v[i].state && p->v[i].kind == K_SCALAR && p->v[i].t == T_F64) {
                            putf(b, "%s.%s", o->name, p->v[i].name);
                            return;
                        }
                }
                break;
            default:
                if (ai) {
                    putf(b, "%s.scale", ai->name);
                    return;
                }
                break;
            }
        }
        texpr(p, t, d - 1);
        return;
    }
}

static void tblock(prog *p, int d);

static void tstmt(prog *p, int d)
{
    fg_gen *g = p->g;
    buf *b = p->b;
    newline(p);
    int t = (int)rnd(g, NSCALAR);
    switch (rnd(g, 10)) {
    case 0:
    case 1: { /* let and var */
        int mut = one_in(g, 2), typed = one_in(g, 2);
        char name[16];
        fresh(p, "l", name);
        putf(b, "%s %s", mut ? "var" : "let", name);
        if (typed)
            putf(b, ": %s", tname[t]);
        puts_(b, " = ");
        texpr(p, t, 3);
        /* Untyped, a literal initializer makes it i64 or f64: only these types are sure. */
        if (typed || t == T_I64 || t == T_F64 || t == T_BOOL)
            push_var(p, name, K_SCALAR, t, mut);
        return;
    }
    case 2:
    case 3: { /* assignment */
        var *v = find_var(p, K_SCALAR, -1, 1);
        if (v) {
            static const char *const ops[] = {"=", "=", "+=", "-=", "*=", "/="};
            const char *op = v->t == T_BOOL ? "=" : PICK(g, ops);
            putf(b, "%s %s ", v->name, op);
            texpr(p, v->t, 3);
            return;
        }
        var *a = find_var(p, p->where == 1 && one_in(g, 2) ? K_TENSOR : K_ARRAY, -1, 0);
        if (a && !a->readonly && a->t != T_BOOL) {
            putf(b, "%s[", a->name);
            texpr(p, T_I64, 2);
            puts_(b, "] = ");
            texpr(p, a->t, 3);
            return;
        }
        putf(b, "let u%d = ", p->ids++);
        texpr(p, T_I64, 2);
        return;
    }
    case 4: /* if */
        if (d <= 0)
            break;
        puts_(b, "if ");
        texpr(p, T_BOOL, 3);
        puts_(b, " ");
        tblock(p, d - 1);
        if (one_in(g, 2)) {
            puts_(b, " else ");
            if (one_in(g, 3)) {
                puts_(b, "if ");
                texpr(p, T_BOOL, 2);
                puts_(b, " ");
            }
            tblock(p, d - 1);
        }
        return;
    case 5: { /* for */
        if (d <= 0)
            break;
        int it = one_in(g, 3) ? T_I32 : T_I64;
        char name[16];
        fresh(p, "i", name);
        putf(b, "for %s in ", name);
        texpr(p, it, 2);
        puts_(b, " .. ");
        var *a = find_var(p, K_ARRAY, -1, 0);
        if (a && it == T_I64 && one_in(g, 2))
            putf(b, "len(%s)", a->name);
        else
            texpr(p, it, 2);
        puts_(b, " ");
        int nv = p->nv;
        push_var(p, name, K_SCALAR, it, 0);
        p->loops++;
        tblock(p, d - 1);
        p->loops--;
        p->nv = nv;
        return;
    }
    case 6: /* while */
        if (d <= 0)
            break;
        puts_(b, "while ");
        texpr(p, T_BOOL, 2);
        puts_(b, " ");
        p->loops++;
        tblock(p, d - 1);
        p->loops--;
        return;
    case 7: /* break, continue (and now and then outside a loop) */
        if (p->loops || one_in(g, 20)) {
            puts_(b, one_in(g, 2) ? "break" : "continue");
            return;
        }
        break;
    case 8: { /* calls for their effect */
        var *h = find_var(p, K_HIST, -1, 0), *x = find_var(p, K_TENSOR, T_F32, 0);
        var *o = find_var(p, K_OTHER, -1, 0);
        if (p->where == 2 && h && x) {
            putf(b, "%s.%s(%s)", h->name, one_in(g, 2) ? "add" : "add_abs", x->name);
            return;
        }
        if (p->where == 3 && h && o) {
            putf(b, "%s.merge(%s.%s)", h->name, o->name, h->name);
            return;
        }
        for (int i = 0; i < p->nfns && p->where == 0; i++)
            if (p->fns[i].ret < 0) {
                call_fn(p, &p->fns[i], 3);
                return;
            }
        break;
    }
    case 9: { /* qparams */
        if (p->where != 0 && p->where != 4)
            break;
        char name[16];
        fresh(p, "qp", name);
        putf(b, "let %s = qparams(", name);
        texpr(p, T_F64, 2);
        puts_(b, ", ");
        texpr(p, T_I64, 2);
        puts_(b, ")");
        push_var(p, name, K_QPARAMS, T_F64, 0);
        return;
    }
    default: break;
    }
    /* otherwise a variable */
    char name[16];
    fresh(p, "w", name);
    putf(b, "var %s: %s = ", name, tname[t]);
    texpr(p, t, 2);
    push_var(p, name, K_SCALAR, t, 1);
}

static void tblock(prog *p, int d)
{
    int nv = p->nv;
    puts_(p->b, "{");
    p->indent++;
    for (size_t k = 0, m = rnd(p->g, 4); k < m; k++)
        tstmt(p, d);
    p->indent--;
    newline(p);
    puts_(p->b, "}");
    p->nv = nv;
}

static void gen_fn(prog *p)
{
    fg_gen *g = p->g;
    if (p->nfns == 8)
        return;
    fnsig *f = &p->fns[p->nfns];
    snprintf(f->name, sizeof f->name, "f%d", p->ids++);
    f->ret = one_in(g, 4) ? -1 : (int)rnd(g, NSCALAR);
    f->np = (int)rnd(g, 4);
    p->nv = 0;
    p->where = 0;
    putf(p->b, "\nfn %s(", f->name);
    for (int i = 0; i < f->np; i++) {
        f->pk[i] = one_in(g, 4) ? K_ARRAY : K_SCALAR;
        f->pt[i] = (int)rnd(g, NSCALAR);
        var *v = add_var(p, "p", f->pk[i], f->pt[i], 0);
        v->readonly = 1;
        snprintf(f->pn[i], sizeof f->pn[i], "%s", v->name);
        putf(p->b, "%s%s: %s%s", i ? ", " : "", v->name, tname[f->pt[i]], f->pk[i] == K_ARRAY ? "[]" : "");
    }
    puts_(p->b, ")");
    if (f->ret >= 0)
        putf(p->b, " -> %s", tname[f->ret]);
    puts_(p->b, " {");
    p->indent = 1;
    for (size_t k = 0, m = rnd(g, 6); k < m; k++)
        tstmt(p, 2);
    if (f->ret >= 0 && !one_in(g, 30)) {
        newline(p);
        puts_(p->b, "return ");
        texpr(p, f->ret, 3);
    }
    p->indent = 0;
    puts_(p->b, "\n}\n");
    p->nfns++; /* callable from later items only: no recursion */
}

static void gen_kernel(prog *p)
{
    fg_gen *g = p->g;
    p->nv = 0;
    p->where = 1;
    note_name(p->items, &p->nitems, "k%d", p->ids);
    putf(p->b, "\nkernel k%d(", p->ids++);
    int np = 1 + (int)rnd(g, 4);
    for (int i = 0; i < np; i++) {
        int k = (int)rnd(g, 3), t = 1 + (int)rnd(g, NSCALAR - 1);
        var *v = add_var(p, "a", k == 0 ? K_SCALAR : k == 1 ? K_ARRAY : K_TENSOR, t, 0);
        if (k == 0)
            putf(p->b, "%s%s: %s", i ? ", " : "", v->name, tname[t]);
        else if (k == 1)
            putf(p->b, "%s%s: %s[]", i ? ", " : "", v->name, tname[t]);
        else
            putf(p->b, "%s%s: tensor<%s>", i ? ", " : "", v->name, tname[t]);
    }
    puts_(p->b, ") {");
    p->indent = 1;
    for (size_t k = 0, m = 1 + rnd(g, 4); k < m; k++)
        tstmt(p, 2);
    p->indent = 0;
    puts_(p->b, "\n}\n");
}

static void gen_calibrator(prog *p)
{
    fg_gen *g = p->g;
    p->nv = 0;
    p->where = 7;
    note_name(p->items, &p->nitems, "c%d", p->ids);
    putf(p->b, "\ncalibrator c%d", p->ids++);
    int np = (int)rnd(g, 3);
    if (np || one_in(g, 2)) {
        puts_(p->b, "(");
        for (int i = 0; i < np; i++) {
            int t = one_in(g, 2) ? T_F64 : (int)rnd(g, NSCALAR);
            var *v = add_var(p, "q", K_SCALAR, t, 0);
            putf(p->b, "%s%s: %s", i ? ", " : "", v->name, tname[t]);
            if (one_in(g, 2)) {
                puts_(p->b, " = ");
                literal(p, t);
            }
        }
        puts_(p->b, ")");
    }
    puts_(p->b, " {\n");
    int nstate = 1 + (int)rnd(g, 3), hist = 0;
    for (int i = 0; i < nstate; i++) {
        int r = (int)rnd(g, 6);
        if (r == 0 && !hist) {
            var *v = add_var(p, "h", K_HIST, T_F64, 0);
            v->state = 1;
            putf(p->b, "  state %s: histogram(%d)\n", v->name, one_in(g, 8) ? 0 : 1 << (1 + rnd(g, 11)));
            hist = 1;
        } else if (r == 1) {
            int t = (int)rnd(g, NSCALAR);
            var *v = add_var(p, "s", K_ARRAY, t, 0);
            v->state = 1;
            putf(p->b, "  state %s: %s[%d]\n", v->name, tname[t], 1 + (int)rnd(g, 16));
        } else {
            int t = one_in(g, 2) ? T_F64 : (int)rnd(g, NSCALAR);
            var *v = add_var(p, "s", K_SCALAR, t, 1);
            v->state = 1;
            putf(p->b, "  state %s: %s", v->name, tname[t]);
            if (one_in(g, 2)) {
                puts_(p->b, " = ");
                literal(p, t);
            }
            puts_(p->b, "\n");
        }
    }
    int nv = p->nv;
    for (int part = 0; part < 3; part++) {
        if (one_in(g, 25))
            continue; /* a part missing */
        p->nv = nv;
        for (int i = 0; i < p->nv; i++) /* state: read only in solve */
            if (p->v[i].state) {
                p->v[i].readonly = part == 2;
                p->v[i].mut = p->v[i].kind == K_SCALAR && part != 2;
            }
        p->indent = 1;
        if (part == 0) {
            p->where = 2;
            var *x = add_var(p, "x", K_TENSOR, T_F32, 0);
            x->readonly = 1;
            putf(p->b, "  observe(%s: tensor<f32>) {", x->name);
        } else if (part == 1) {
            p->where = 3;
            var *o = add_var(p, "o", K_OTHER, T_F64, 0);
            putf(p->b, "  merge(%s) {", o->name);
        } else {
            p->where = 4;
            var *t = add_var(p, "t", K_QTYPE, T_I64, 0);
            putf(p->b, "  solve(%s: qtype) -> qparams {", t->name);
        }
        p->indent = 2;
        for (size_t k = 0, m = rnd(g, 4); k < m; k++)
            tstmt(p, 2);
        if (part == 2) {
            newline(p);
            puts_(p->b, "return qparams(");
            texpr(p, T_F64, 3);
            puts_(p->b, ", ");
            texpr(p, T_I64, 2);
            puts_(p->b, ")");
        }
        puts_(p->b, "\n  }\n");
    }
    p->indent = 0;
    puts_(p->b, "}\n");
}

static const char *const ops[] = {"Relu", "Sigmoid", "Tanh", "Clip", "MaxPool", "Add", "Mul", "Concat", "Conv",
                                  "Gemm", "MatMul", "Softmax", "HardSwish", "LeakyRelu", "Reshape", "Relux", "Foo"};

static void gen_affine(prog *p)
{
    fg_gen *g = p->g;
    p->nv = 0;
    putf(p->b, "\naffine %s", PICK(g, ops));
    int nin = (int)rnd(g, 3);
    if (nin || one_in(g, 3)) {
        puts_(p->b, "(");
        for (int i = 0; i < nin; i++) {
            char name[16];
            fresh(p, "x", name);
            putf(p->b, "%s%s%s", i ? ", " : "", name, one_in(g, 5) ? "?" : "");
            push_var(p, name, K_AFFIN, T_I32, 0);  /* x.zero, x.scale */
            push_var(p, name, K_SCALAR, T_I32, 0); /* the element: an i32 */
        }
        puts_(p->b, ")");
    }
    int res = (int)rnd(g, 3);
    if (res == 0) {
        puts_(p->b, " -> same");
        if (nin && !one_in(g, 3)) {
            p->where = 5;
            push_var(p, "y", K_SCALAR, T_I32, 1);
            p->indent = 1;
            puts_(p->b, " {");
            for (size_t k = 0, m = rnd(g, 3); k < m; k++)
                tstmt(p, 1);
            newline(p);
            puts_(p->b, "y = ");
            texpr(p, T_I32, 3);
            p->indent = 0;
            puts_(p->b, "\n}");
        }
    } else {
        if (res == 1) {
            puts_(p->b, " -> fixed(");
            p->where = 7;
            p->nv = 0;
            texpr(p, T_F64, 2);
            puts_(p->b, ", ");
            texpr(p, T_I64, 1);
            puts_(p->b, ")");
        } else {
            puts_(p->b, " -> requantize");
        }
        if (!one_in(g, 6)) {
            p->where = 6;
            p->nv = 0;
            char name[16];
            fresh(p, "v", name);
            push_var(p, name, K_SCALAR, T_F64, 0);
            putf(p->b, " table(%s => ", name);
            texpr(p, T_F64, 3);
            puts_(p->b, ")");
        }
    }
    puts_(p->b, "\n");
}

static void gen_pattern_recipe(prog *p)
{
    fg_gen *g = p->g;
    /* A pattern with a kernel that follows the lowering convention (or not quite). */
    int id = p->ids++;
    int bias = one_in(g, 2), pc = one_in(g, 2), relu = one_in(g, 2);
    putf(p->b, "\nkernel kk%d(%sxq: tensor<%s>, xs: f32, xz: i32, wq: tensor<i8>, ws: f32%s, wz: i32%s", id,
         one_in(g, 3) ? "acc: tensor<i32>, " : "", one_in(g, 2) ? "u8" : "i8", pc ? "[]" : "", pc ? "[]" : "");
    if (bias)
        puts_(p->b, ", b: tensor<i32>");
    if (one_in(g, 8))
        puts_(p->b, ", extra: f32");
    puts_(p->b, ", yq: tensor<u8>, ys: f32, yz: i32) {\n");
    if (one_in(g, 2))
        puts_(p->b, "  for i in 0 .. yq.numel {\n    yq[i] = sat<u8>(i32(xq[i]) + yz)\n  }\n");
    puts_(p->b, "}\n");
    note_name(p->items, &p->nitems, "pp%d", id);
    putf(p->b, "\npattern pp%d {\n", id);
    if (relu)
        putf(p->b, "  match {\n    c = %s(x, w%s)%s\n    y = Relu(c)\n  }\n", PICK(g, ops), bias ? ", b?" : "",
             one_in(g, 2) ? " where const(w)" : "");
    else
        putf(p->b, "  match y = %s(x, w%s) where const(w)%s\n", PICK(g, ops), bias ? ", b" : "",
             one_in(g, 2) ? " and w.rank == 2 and y.attr(\"transB\", 0) == 1" : "");
    if (one_in(g, 3))
        puts_(p->b, "  where present(x) and rank(x) >= 1 and dim(x, 0) > 0\n");
    if (one_in(g, 3)) {
        static const char *const w[] = {"y.op == \"Conv\"", "\"Relu\" != y.op", "\"a\" == \"a\"", "x.dim(0) > 1",
                                        "w.rank == 4 and w.const", "y.attr(\"alpha\", 0.5) < 1.0"};
        putf(p->b, "  where %s\n", PICK(g, w));
    }
    putf(p->b, "  quantize x: activation, w: weight%s%s, y: %s\n", pc ? "(axis = " : "", pc ? (one_in(g, 2) ? "0)" : "1)") : "",
         bias ? (one_in(g, 2) ? "activation, b: bias(x, w)" : "output, b: bias(x, w)") : "activation");
    putf(p->b, "  lower y = kk%d(x, w%s)\n}\n", id, bias ? ", b" : "");
    if (one_in(g, 2)) {
        static const char *const cal[] = {"minmax()", "minmax(symmetric = true)", "percentile(p = 99.9)",
                                          "entropy()", "mse()", "nosuch()", "minmax(1)", "minmax(q = 1)"};
        int affine = one_in(g, 2);
        putf(p->b, "\nimport \"calibrators.qrl\"\n%srecipe rr%d {\n  activation = %s by %s\n  weight = i8 %s by %s\n",
             affine ? "import \"affine.qrl\"\n" : "", id, one_in(g, 2) ? "u8 asymmetric" : "i8 symmetric", PICK(g, cal),
             one_in(g, 2) ? "symmetric per_channel" : "symmetric", PICK(g, cal));
        if (one_in(g, 2))
            puts_(p->b, "  bias = i32\n  accumulate = i32\n");
        if (one_in(g, 3))
            puts_(p->b, "  numerics = onnx\n");
        if (one_in(g, 3))
            puts_(p->b, "  fallback = f32 when sqnr < 20\n");
        putf(p->b, "  use pp%d%s\n}\n", id, affine ? ", Relu" : "");
        note_name(p->recipes, &p->nrecipes, "rr%d", id);
    }
}

/* The lines a derived recipe writes in place of its base's: settings, the repeatable keys
 * (transform, candidate, activation for, use) and lines that only make sense together with the
 * base's (a budget beside an inherited fallback). */
static void derived_body(prog *p)
{
    fg_gen *g = p->g;
    static const char *const lines[] = {
        "activation = u8 asymmetric by minmax()", "activation = i8 symmetric by percentile(p = 99.9)",
        "weight = i8 symmetric per_channel by minmax(symmetric = true)", "weight = i4 symmetric by minmax()",
        "fallback = f32 when sqnr < 20", "fallback = u16 then f32 when output_sqnr < 30", "fallback = f32",
        "validate = 0", "validate = 0.25", "validate_from = spread", "tolerance = 3", "numerics = onnx",
        "accumulate = i16", "bias = i32", "candidate = f32", "candidate = i4", "budget = bits(6)",
        "transform = equalize()", "transform = bias_correct(strength = 1.0)", "transform = nosuch()",
        "activation for Softmax = u16", "weight for MatMul = i4 symmetric by minmax()", "use Relu",
        "search_samples = 16", "samples = sample_balanced_lower", "activation = f32", "block = 32",
        "activation = u8 by", "weight ="};
    for (size_t k = 0, m = rnd(g, 5); k < m; k++)
        putf(p->b, "  %s\n", PICK(g, lines));
}

/* Recipes that derive (`recipe NAME : BASE { ... }`): from a recipe of this program or of a
 * shipped file, through chains (up to past the 64-deep limit), and wrong on purpose: an unknown
 * base, itself, a cycle of two or more, a base that is another kind of item, a base defined after
 * it, a base that is in error. */
static void gen_derived(prog *p)
{
    fg_gen *g = p->g;
    /* bases in other files: small ones mostly (a program that checks clean may be compiled, and
     * a shipped recipe brings the stdlib's patterns and kernels: seconds of libgccjit each), one
     * whose own base its file does not import, a fn, and now and then a shipped one */
    static const char *const files[][2] = {{"tests/diag/lib/base_recipe.qrl", "lib_base"},
                                           {"tests/diag/lib/base_recipe.qrl", "lib_base"},
                                           {"tests/diag/lib/derives_unimported.qrl", "lib_derived"},
                                           {"tests/diag/lib/helper.qrl", "helper"}};
    static const char *const shipped[][2] = {{"recipes/int8.qrl", "int8"}, {"recipes/int8-best.qrl", "int8_best"},
                                             {"recipes/w4a8.qrl", "w4a8"}, {"recipes/int8-tflite.qrl", "int8_tflite"}};
    static const char *const odd[] = {"int9", "minmax", "equalize", "Relu", "sat", "recipe", "_", "r"};
    int id = p->ids++, later = 0;
    char base[64];
    switch (rnd(g, 9)) {
    case 0: /* a recipe of this program, or else one written now */
        if (!p->nrecipes) {
            putf(p->b, "\n%srecipe rb%d {\n  activation = u8 asymmetric by minmax()\n  weight = i8 symmetric by minmax()\n}\n",
                 one_in(g, 4) ? "" : "import \"calibrators.qrl\"\n", id);
            note_name(p->recipes, &p->nrecipes, "rb%d", id);
        }
        snprintf(base, sizeof base, "%s", p->recipes[rnd(g, (size_t)p->nrecipes)]);
        break;
    case 1: { /* a recipe of another file, imported (or, now and then, not) */
        const char *const *f = one_in(g, 8) ? PICK(g, shipped) : PICK(g, files);
        if (!one_in(g, 5))
            putf(p->b, "\nimport \"%s\"\n", f[0]);
        snprintf(base, sizeof base, "%s", f[1]);
        break;
    }
    case 2: /* unknown, or another kind of item */
        snprintf(base, sizeof base, "%s", p->nitems && one_in(g, 2) ? p->items[rnd(g, (size_t)p->nitems)] : PICK(g, odd));
        if (!strcmp(base, "minmax") && one_in(g, 2))
            puts_(p->b, "\nimport \"calibrators.qrl\"\n");
        break;
    case 3: /* itself */
        snprintf(base, sizeof base, "d%d", id);
        break;
    case 4: { /* a cycle of n: d_id_0 : d_id_1 : ... : d_id_0 */
        int n = 2 + (int)rnd(g, 3);
        for (int i = 0; i < n; i++) {
            putf(p->b, "\nrecipe d%d_%d : d%d_%d {\n", id, i, id, (i + 1) % n);
            derived_body(p);
            puts_(p->b, "}\n");
        }
        snprintf(base, sizeof base, "d%d_%d", id, (int)rnd(g, (size_t)n));
        break;
    }
    case 5: { /* a chain from a base of its own, around the 64-deep limit */
        static const int depths[] = {1, 2, 3, 63, 64, 65, 66, 100};
        int n = PICK(g, depths);
        putf(p->b, "\nimport \"calibrators.qrl\"\nrecipe d%d_0 {\n  activation = u8 asymmetric by minmax()\n"
                   "  weight = i8 symmetric by minmax()\n}\n", id);
        for (int i = 1; i <= n; i++) {
            putf(p->b, "recipe d%d_%d : d%d_%d {\n", id, i, id, i - 1);
            if (one_in(g, 8))
                derived_body(p);
            puts_(p->b, "}\n");
        }
        snprintf(base, sizeof base, "d%d_%d", id, n);
        break;
    }
    case 6: /* a base written after the recipe deriving from it */
        snprintf(base, sizeof base, "d%d_later", id);
        later = 1;
        break;
    case 7: /* a base in error: an unknown calibrator, a bad setting */
        putf(p->b, "\nrecipe d%d_bad {\n  activation = u8 by nosuch()\n  weight = i9\n}\n", id);
        snprintf(base, sizeof base, "d%d_bad", id);
        break;
    default: /* a chain of two through this program's recipes */
        if (p->nrecipes) {
            putf(p->b, "\nrecipe d%d_mid : %s {\n", id, p->recipes[rnd(g, (size_t)p->nrecipes)]);
            derived_body(p);
            puts_(p->b, "}\n");
            snprintf(base, sizeof base, "d%d_mid", id);
        } else {
            snprintf(base, sizeof base, "nosuch%d", id);
        }
        break;
    }
    putf(p->b, "\nrecipe d%d :%s%s {\n", id, one_in(g, 10) ? "" : " ", base);
    derived_body(p);
    puts_(p->b, "}\n");
    if (later) {
        putf(p->b, "\nimport \"calibrators.qrl\"\nrecipe %s {\n  activation = u8 asymmetric by minmax()\n"
                   "  weight = i8 symmetric by minmax()\n}\n", base);
    }
    note_name(p->recipes, &p->nrecipes, "d%d", id);
}

static void gen_program(fg_gen *g, buf *b)
{
    prog p = {.g = g, .b = b};
    if (one_in(g, 4)) {
        static const char *const libs[] = {"calibrators.qrl", "qparams.qrl", "numerics.qrl", "affine.qrl"};
        putf(b, "import \"%s\"\n", PICK(g, libs));
    }
    if (one_in(g, 3)) {
        p.where = 7;
        putf(b, "const k%d: %s = ", p.ids++, tname[T_I64]);
        texpr(&p, T_I64, 2);
        puts_(b, "\n");
    }
    for (size_t k = 0, m = 1 + rnd(g, 4); k < m; k++) {
        switch (rnd(g, 9)) {
        case 0:
        case 1:
        case 2: gen_fn(&p); break;
        case 3: gen_kernel(&p); break;
        case 4:
        case 5: gen_calibrator(&p); break;
        case 6: gen_affine(&p); break;
        case 7: gen_derived(&p); break;
        default: gen_pattern_recipe(&p); break;
        }
    }
}

/* --------------------------------------------------------- deep nesting */

static void gen_nesting(fg_gen *g, buf *b)
{
    /* Depths at and around the lexer's bracket limit and the parser's
     * nesting limit (200 and 256), and far beyond. */
    static const int depths[] = {199, 200, 201, 254, 255, 256, 257, 258, 300, 1000, 5000};
    int depth = one_in(g, 4) ? 1 + (int)rnd(g, 3000) : PICK(g, depths);
    switch (one_in(g, 3) ? rnd(g, 4) : 4) { /* statements and types nest without brackets too */
    case 0:
        puts_(b, "fn f(x: bool) {\n  if x {}");
        for (int i = 0; i < depth; i++)
            puts_(b, " else if x {}");
        puts_(b, "\n}\n");
        return;
    case 1:
        puts_(b, "fn f(x: bool) {\n");
        for (int i = 0; i < depth / 3 + 1; i++)
            puts_(b, one_in(g, 2) ? "while x { if x {} else if x {\n" : "for i in 0 .. 1 { if x {\n");
        for (int i = 0; i < depth / 3 + 1; i++)
            puts_(b, "}}\n");
        puts_(b, "}\n");
        return;
    case 2:
        puts_(b, "fn f(a: i64");
        for (int i = 0; i < depth; i++)
            puts_(b, one_in(g, 8) ? "[2]" : "[]");
        puts_(b, ") {}\n");
        return;
    case 3:
        puts_(b, "fn f(a: ");
        for (int i = 0; i < depth; i++)
            puts_(b, "tensor<");
        puts_(b, "f32");
        for (int i = 0; i < depth; i++)
            puts_(b, " >");
        puts_(b, ") {}\n");
        return;
    default: break;
    }
    static const char *const wrap[] = {"", "qparams(", "const(", "i32(", "sat<i8>(", "f(", "min(", "a[", "(", "-"};
    static const char *const close[] = {"", ", 0)", ")", ")", ")", ")", ", 1)", "]", ")", ""};
    int w = (int)rnd(g, sizeof wrap / sizeof wrap[0]);
    int ctx = (int)rnd(g, 4);
    if (ctx == 0)
        puts_(b, "const c = ");
    else if (ctx == 1)
        puts_(b, "fn f(x: i64) -> i64 {\n  return ");
    else if (ctx == 2)
        puts_(b, "pattern p {\n  match y = Conv(x, w) where ");
    else
        puts_(b, "fn f(x: i64) -> i64 {\n  ");
    puts_(b, wrap[w]);
    int kind = (int)rnd(g, 12);
    switch (kind) {
    case 0: for (int i = 0; i < depth; i++) puts_(b, "("); puts_(b, "1"); for (int i = 0; i < depth; i++) puts_(b, ")"); break;
    case 1: for (int i = 0; i < depth; i++) puts_(b, "-"); puts_(b, "1"); break;
    case 2: for (int i = 0; i < depth; i++) puts_(b, "not "); puts_(b, "true"); break;
    case 3: puts_(b, "1"); for (int i = 0; i < depth; i++) puts_(b, one_in(g, 2) ? "+1" : "*2"); break;
    case 4: puts_(b, "x"); for (int i = 0; i < depth; i++) puts_(b, "()"); break;
    case 5: puts_(b, "x"); for (int i = 0; i < depth; i++) puts_(b, ".a"); break;
    case 6: puts_(b, "x"); for (int i = 0; i < depth; i++) puts_(b, "[0]"); break;
    case 7: for (int i = 0; i < depth; i++) puts_(b, "f("); puts_(b, "1"); for (int i = 0; i < depth; i++) puts_(b, ")"); break;
    case 8: for (int i = 0; i < depth; i++) puts_(b, "{"); for (int i = 0; i < depth; i++) puts_(b, "}"); break;
    case 9: for (int i = 0; i < depth; i++) puts_(b, "["); for (int i = 0; i < depth; i++) puts_(b, "]"); break;
    case 10: for (int i = 0; i < depth; i++) puts_(b, "i32("); puts_(b, "1"); for (int i = 0; i < depth; i++) puts_(b, ")"); break;
    default: /* unbalanced: openers only */
        for (int i = 0; i < depth; i++) {
            static const char *const o[] = {"(", "[", "{", "-", "~", "not ", "if x ", "while "};
            puts_(b, o[rnd(g, one_in(g, 2) ? 1 : 8)]);
        }
        break;
    }
    puts_(b, close[w]);
    if (ctx != 0)
        puts_(b, "\n}");
    if (ctx == 2)
        puts_(b, "\n");
    puts_(b, "\n");
}

/* Wide structures, at and around the fixed bounds of the checker and the
 * code generator (64 parameters, 16 recipe items, ...): many parameters,
 * arguments, states, bindings, use lines, items. */
static void gen_wide(fg_gen *g, buf *b)
{
    static const int widths[] = {15, 16, 17, 63, 64, 65, 70, 127, 128, 129, 300};
    int n = one_in(g, 4) ? 1 + (int)rnd(g, 400) : PICK(g, widths);
    switch (rnd(g, 7)) {
    case 0: /* a function of n parameters, called */
        puts_(b, "fn g(");
        for (int i = 0; i < n; i++)
            putf(b, "%sp%d: %s%s", i ? ", " : "", i, one_in(g, 8) ? "f64" : "i64", one_in(g, 4) ? "" : " = 1");
        putf(b, ") -> i64 {\n  return p%d\n}\nfn f() -> i64 {\n  return g(", n - 1);
        for (int i = 0, m = (int)rnd(g, (size_t)n + 2); i < m; i++)
            putf(b, "%s%s", i ? ", " : "", one_in(g, 3) ? "2" : "3");
        putf(b, ") + g(p%d = 4)\n}\n", (int)rnd(g, (size_t)n + 1));
        break;
    case 1: /* a calibrator of n parameters and n states, used by a recipe */
        puts_(b, "import \"patterns.qrl\"\ncalibrator c(");
        for (int i = 0; i < n; i++)
            putf(b, "%sq%d: f64 = %d.5", i ? ", " : "", i, i);
        puts_(b, ") {\n");
        for (int i = 0; i < n; i++)
            putf(b, "  state s%d: f64 = q%d\n", i, one_in(g, 2) ? i : 0);
        putf(b, "  observe(x: tensor<f32>) { s0 = x.min() }\n  merge(o) { s%d = o.s%d }\n"
                "  solve(t: qtype) -> qparams { return qparams(s0 + 1.0, 0) }\n}\n", n - 1, n - 1);
        puts_(b, "recipe r {\n");
        for (int i = 0, m = (int)rnd(g, 40); i < m; i++)
            puts_(b, "  use conv\n");
        putf(b, "  activation = u8 by c(q%d = 2.0)\n  weight = i8 symmetric by c(", (int)rnd(g, (size_t)n + 1));
        for (int i = 0, m = (int)rnd(g, (size_t)n + 2); i < m; i++)
            putf(b, "%s1.0", i ? ", " : "");
        puts_(b, ")\n  fallback = f32 when sqnr < 10\n}\n");
        break;
    case 2: { /* a pattern of n bindings, each with a predicate */
        puts_(b, "kernel k(xq: tensor<u8>, xs: f32, xz: i32, yq: tensor<u8>, ys: f32, yz: i32) { }\n"
                 "pattern p {\n  match {\n");
        for (int i = 0; i < n; i++)
            putf(b, "    v%d = Relu(%s%d) where rank(v%d) == %d\n", i + 1, i ? "v" : "x", i, i + 1, i % 5);
        putf(b, "  }\n  quantize x0: activation, v%d: activation\n  lower v%d = k(x0)\n}\n", n, n);
        break;
    }
    case 3: /* a kernel of n parameters, lowered to */
        puts_(b, "kernel k(");
        for (int i = 0; i < n; i++)
            putf(b, "%sa%d: %s", i ? ", " : "", i, i % 3 == 0 ? "tensor<i8>" : i % 3 == 1 ? "f32" : "i32");
        puts_(b, ") { }\npattern p {\n  match y = Conv(x, w) where const(w)\n"
                 "  quantize x: activation, w: weight, y: activation\n  lower y = k(x, w");
        for (int i = 0, m = (int)rnd(g, (size_t)n); i < m; i++)
            puts_(b, ", 1");
        puts_(b, ")\n}\n");
        break;
    case 4: /* a built-in called with n arguments */
        putf(b, "fn f() -> f64 {\n  return %s(", one_in(g, 2) ? "min" : "clamp");
        for (int i = 0; i < n; i++)
            putf(b, "%s%d.0", i ? ", " : "", i);
        puts_(b, ")\n}\n");
        break;
    case 5: /* n items */
        for (int i = 0; i < n; i++)
            putf(b, "fn f%d(x: i64) -> i64 { return %s }\n", i, i ? "x + 1" : "x");
        break;
    default: /* n locals and n loops in sequence */
        puts_(b, "fn f(x: i64) -> i64 {\n  var s = x\n");
        for (int i = 0; i < n; i++)
            putf(b, "  let l%d = s + %d\n  for j%d in 0 .. l%d { s += j%d }\n", i, i, i, i, i);
        puts_(b, "  return s\n}\n");
        break;
    }
}

/* ------------------------------------------------------------- fg_next */

char *fg_next(fg_gen *g, size_t *len)
{
    buf b = {0};
    long k = g->produced++;
    if (k < g->nseeds) { /* every seed once as it is: each error of tests/diag at least once */
        put(&b, g->seeds[k], g->seed_len[k]);
        *len = b.n;
        return b.p ? b.p : calloc(1, 1);
    }
    size_t mode = rnd(g, 100);
    if (mode < 50 && g->nseeds) { /* a mutated seed: mostly one change, so close to valid */
        int s = (int)rnd(g, (size_t)g->nseeds);
        put(&b, g->seeds[s], g->seed_len[s]);
        for (size_t i = 0, m = one_in(g, 2) ? 1 : 2 + rnd(g, one_in(g, 4) ? 16 : 4); i < m; i++)
            mutate(g, &b);
    } else if (mode < 60 && g->nseeds) { /* two seeds spliced, at lines or anywhere */
        int s1 = (int)rnd(g, (size_t)g->nseeds), s2 = (int)rnd(g, (size_t)g->nseeds);
        buf a = {g->seeds[s1], g->seed_len[s1], 0}, c = {g->seeds[s2], g->seed_len[s2], 0};
        size_t x = rnd(g, a.n + 1), y = rnd(g, c.n + 1), e;
        if (one_in(g, 2)) {
            if (x < a.n)
                line_at(&a, x, &x, &e);
            if (y < c.n)
                line_at(&c, y, &y, &e);
        }
        put(&b, a.p, x);
        put(&b, c.p + y, c.n - y);
        if (one_in(g, 3))
            mutate(g, &b);
    } else if (mode < 68) { /* random tokens */
        for (size_t i = 0, m = rnd(g, one_in(g, 8) ? 2000 : 120); i < m; i++) {
            puts_(&b, PICK(g, dict));
            if (!one_in(g, 5))
                puts_(&b, " ");
        }
    } else if (mode < 95) { /* a generated program */
        gen_program(g, &b);
        if (one_in(g, 3))
            for (size_t i = 0, m = 1 + rnd(g, 2); i < m; i++)
                mutate(g, &b);
    } else if (one_in(g, 2)) { /* deep nesting */
        gen_nesting(g, &b);
    } else { /* wide structures */
        gen_wide(g, &b);
    }
    if (b.n > FG_MAX_INPUT)
        b.n = FG_MAX_INPUT, b.p[b.n] = 0;
    if (!b.p)
        put(&b, "", 0);
    *len = b.n;
    return b.p;
}

/* ------------------------------------------------------------- fg_run */

static FILE *devnull(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    return f;
}

const char *fg_run(const char *text, size_t len, const char *stdlib_dir, int compile, fg_stats *st)
{
    static char why[1400];
    qc_unit *u = qc_unit_new(stdlib_dir);
    if (!u)
        return "out of memory";
    st->inputs++;
    const char *bad = NULL;
    qc_file *root = qc_unit_load_text(u, "fuzz.qrl", text, len);
    int front = -1; /* diagnostics before compiling: all from the front end, so each located or about a file */
    if (root && !u->diags.errors) {
        st->parsed++;
        qc_check(u);
        if (!u->diags.errors) {
            st->checked++;
            if (compile) {
                front = u->diags.n;
                qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
                if (m) {
                    st->compiled++;
                    qr_module_free(m);
                } else {
                    snprintf(why, sizeof why, "checked clean but did not compile: %s",
                             u->diags.n ? u->diags.v[0].msg : "(no diagnostic)");
                    bad = why;
                }
            }
        }
    }
    if (front < 0)
        front = u->diags.n;
    st->diags += u->diags.n;
    for (int i = 0; i < u->diags.n && !bad; i++) {
        const ql_diag *d = &u->diags.v[i];
        int ours = 0;
        for (int k = 0; k < u->nfiles && d->span.src; k++)
            ours |= u->files[k]->src == d->span.src;
        if (!d->msg || !d->msg[0]) {
            snprintf(why, sizeof why, "diagnostic %d has no message", i);
            bad = why;
        } else if (i < front && !d->span.src && !d->path) {
            snprintf(why, sizeof why, "diagnostic %d has neither a location nor a file: %s", i, d->msg);
            bad = why;
        } else if (d->span.src && !ours) {
            snprintf(why, sizeof why, "diagnostic %d points into no source of the unit: %s", i, d->msg);
            bad = why;
        } else if (d->span.src && (d->span.start > d->span.end || d->span.end > d->span.src->len)) {
            snprintf(why, sizeof why, "diagnostic %d has span [%u, %u) outside its source of %zu bytes: %s", i,
                     (unsigned)d->span.start, (unsigned)d->span.end, d->span.src->len, d->msg);
            bad = why;
        } else if (strstr(d->msg, "internal compiler error")) {
            snprintf(why, sizeof why, "%s", d->msg);
            bad = why;
        }
    }
    /* What qrl check prints must work too: every excerpt and caret, and the tree (--dump-ast). */
    FILE *null = devnull();
    if (null) {
        ql_diags_print(&u->diags, null);
        for (int i = 0; i < u->nfiles; i++)
            ql_ast_dump(u->files[i]->ast, null);
    }
    qc_unit_free(u);
    return bad;
}

const char *fg_campaign(fg_gen *g, long n, long compile_every, const char *stdlib_dir, fg_stats *st, char **bad,
                        size_t *bad_len, void (*progress)(const fg_stats *st))
{
    int due = 0;
    for (long k = 0; k < n; k++) {
        if (compile_every > 0 && k % compile_every == 0)
            due = 1;
        size_t len;
        char *text = fg_next(g, &len);
        long compiled = st->compiled;
        g->cur = text;
        g->cur_len = len;
        g->cur_index = k;
        const char *why = fg_run(text, len, stdlib_dir, due, st);
        g->cur = NULL;
        if (st->compiled > compiled)
            due = 0;
        if (why) {
            if (bad) {
                *bad = text;
                *bad_len = len;
            } else {
                free(text);
            }
            return why;
        }
        free(text);
        if (progress && (k + 1) % 10000 == 0)
            progress(st);
    }
    return NULL;
}
