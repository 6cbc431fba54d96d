#include "qrlfuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"

static const char *const dict[] = {
    "calibrator", "pattern", "affine", "kernel", "fn", "recipe", "import", "const", "state", "observe", "merge",
    "solve", "match", "where", "quantize", "lower", "same", "fixed", "table", "requantize", "use", "by", "when",
    "let", "var", "if", "else", "for", "in", "while", "return", "break", "continue", "and", "or", "not", "true",
    "false", "sat", "tensor", "qtype", "qparams", "histogram", "bool", "i8", "u8", "i16", "u16", "i32", "i64", "f32",
    "f64", "(", ")", "[", "]", "{", "}", "<", ">", "..", "->", "=>", "=", "+=", "-=", "*=", "/=", "==", "!=", "<=",
    ">=", "!", "~", "<<", ">>", "&", "|", "^", "+", "-", "*", "/", "%", ",", ":", ";", ".", "?", "_", "x", "y", "t",
    "o", "h", "minmax", "Conv", "Relu", "activation", "weight(axis = 0)", "bias(x, w)", "\"s\"", "\"calibrators.qrl\"",
    "0", "1", "-1", "255", "0x1F", "0b11", "1e9", "3.5", "0x1.8p3", "9999999999999999999", "2147483648", "inf",
    "nan", "len(a)", "x.numel", "h.add_abs(x)", "\n", "\n", "\n", " ", "#c\n", "/*", "*/",
};
#define NDICT (sizeof dict / sizeof dict[0])

static unsigned rnd(qf_gen *g, unsigned n)
{
    g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (unsigned)((g->rng >> 33) % n) : 0;
}

void qf_init(qf_gen *g, unsigned long long seed)
{
    memset(g, 0, sizeof *g);
    g->rng = seed * 2654435761ull + 1;
}

int qf_add_seed_file(qf_gen *g, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = b ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!b)
        return 0;
    b[got] = 0;
    g->seeds = realloc(g->seeds, sizeof *g->seeds * (size_t)(g->nseeds + 1));
    g->seed_len = realloc(g->seed_len, sizeof *g->seed_len * (size_t)(g->nseeds + 1));
    g->seeds[g->nseeds] = b;
    g->seed_len[g->nseeds++] = got;
    return 1;
}

void qf_free(qf_gen *g)
{
    for (int i = 0; i < g->nseeds; i++)
        free(g->seeds[i]);
    free(g->seeds);
    free(g->seed_len);
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* One mutation of text in place (as a new buffer). */
static void mutate(qf_gen *g, buf *b)
{
    size_t n = b->n;
    switch (rnd(g, 7)) {
    case 0: /* flip bits */
        for (int k = 0, m = 1 + (int)rnd(g, 4); k < m && n; k++)
            b->p[rnd(g, (unsigned)n)] ^= (char)(1u << rnd(g, 8));
        break;
    case 1: { /* delete a range */
        if (!n)
            break;
        size_t at = rnd(g, (unsigned)n), len = 1 + rnd(g, 40);
        if (at + len > n)
            len = n - at;
        memmove(b->p + at, b->p + at + len, n - at - len + 1);
        b->n -= len;
        break;
    }
    case 2: { /* duplicate a range */
        if (!n)
            break;
        size_t at = rnd(g, (unsigned)n), len = 1 + rnd(g, 60);
        if (at + len > n)
            len = n - at;
        char *copy = malloc(len);
        memcpy(copy, b->p + at, len);
        buf t = {0};
        put(&t, b->p, at + len);
        put(&t, copy, len);
        put(&t, b->p + at + len, n - at - len);
        free(copy);
        free(b->p);
        *b = t;
        break;
    }
    default: { /* insert dictionary tokens */
        size_t at = n ? rnd(g, (unsigned)n + 1) : 0;
        buf t = {0};
        put(&t, b->p ? b->p : "", at);
        for (int k = 0, m = 1 + (int)rnd(g, 3); k < m; k++) {
            puts_(&t, dict[rnd(g, NDICT)]);
            puts_(&t, " ");
        }
        put(&t, b->p ? b->p + at : "", n - at);
        free(b->p);
        *b = t;
        break;
    }
    }
}

char *qf_next(qf_gen *g, size_t *len)
{
    buf b = {0};
    unsigned mode = rnd(g, 10);
    if (mode < 6 && g->nseeds) { /* a mutated seed */
        int s = (int)rnd(g, (unsigned)g->nseeds);
        put(&b, g->seeds[s], g->seed_len[s]);
        /* mostly one mutation: inputs close to valid reach the checker and compiler */
        for (int k = 0, m = rnd(g, 3) ? 1 : 2 + (int)rnd(g, 3); k < m; k++)
            mutate(g, &b);
    } else if (mode < 8 && g->nseeds > 1) { /* two seeds spliced */
        int s1 = (int)rnd(g, (unsigned)g->nseeds), s2 = (int)rnd(g, (unsigned)g->nseeds);
        size_t a = rnd(g, (unsigned)g->seed_len[s1] + 1), c = rnd(g, (unsigned)g->seed_len[s2] + 1);
        put(&b, g->seeds[s1], a);
        put(&b, g->seeds[s2] + c, g->seed_len[s2] - c);
    } else if (mode < 9) { /* random tokens */
        for (int k = 0, m = (int)rnd(g, 200); k < m; k++) {
            puts_(&b, dict[rnd(g, NDICT)]);
            puts_(&b, " ");
        }
    } else { /* deep nesting */
        static const char *const open[] = {"(", "-", "{", "[", "not "};
        const char *o = open[rnd(g, 5)];
        puts_(&b, "fn f(x: i64) -> i64 { return ");
        for (int k = 0, m = 100 + (int)rnd(g, 2000); k < m; k++)
            puts_(&b, o);
        puts_(&b, "x }\n");
    }
    if (!b.p)
        put(&b, "", 0);
    *len = b.n;
    return b.p;
}

const char *qf_run(const char *text, size_t len, const char *stdlib_dir, int compile, qf_stats *st)
{
    static char why[256];
    qc_unit *u = qc_unit_new(stdlib_dir);
    if (!u)
        return "out of memory";
    st->inputs++;
    qc_file *root = qc_unit_load_text(u, "fuzz.qrl", text, len);
    if (root && !u->diags.errors) {
        st->parsed++;
        qc_check(u);
        if (!u->diags.errors) {
            st->checked++;
            if (compile) {
                qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
                if (m)
                    st->compiled++;
                qr_module_free(m);
            }
        }
    }
    const char *bad = NULL;
    for (int i = 0; i < u->diags.n && !bad; i++) {
        const ql_diag *d = &u->diags.v[i];
        if (!d->msg || !d->msg[0]) {
            bad = "a diagnostic without a message";
        } else if (d->span.src && (d->span.start > d->span.end || d->span.end > d->span.src->len)) {
            snprintf(why, sizeof why, "a span outside its source: [%u, %u) of %zu: %s", d->span.start, d->span.end,
                     d->span.src->len, d->msg);
            bad = why;
        } else if (strstr(d->msg, "internal compiler error")) {
            snprintf(why, sizeof why, "%s", d->msg);
            bad = why;
        }
    }
    /* Printing must work too (source line and caret for every span). */
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        ql_diags_print(&u->diags, null);
        fclose(null);
    }
    qc_unit_free(u);
    return bad;
}
