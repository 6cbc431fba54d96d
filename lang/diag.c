#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void ql_diags_init(ql_diags *d)
{
    memset(d, 0, sizeof *d);
}

void ql_diags_free(ql_diags *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->v[i].msg);
        free((char *)d->v[i].path);
    }
    free(d->v);
    ql_diags_init(d);
}

void ql_diags_truncate(ql_diags *d, int n)
{
    for (int i = n < 0 ? 0 : n; i < d->n; i++) {
        d->errors -= d->v[i].sev == QL_ERROR;
        free(d->v[i].msg);
        free((char *)d->v[i].path);
    }
    if (n >= 0 && n < d->n)
        d->n = n;
}

int ql_diags_full(const ql_diags *d)
{
    return d->errors >= (d->max_errors ? d->max_errors : 50);
}

/* Whether an error with this span and message was said already: code the
 * compiler checks twice (an element-wise epilogue's kernel and its tile
 * kernel, compiler/elementwise.h) reports it once, with the first one's notes. */
static int repeated(const ql_diags *d, ql_span sp, const char *msg)
{
    for (int i = 0; i < d->n; i++) {
        const ql_diag *g = &d->v[i];
        if (g->sev == QL_ERROR && g->span.src == sp.src && g->span.start == sp.start && g->span.end == sp.end &&
            !strcmp(g->msg, msg))
            return 1;
    }
    return 0;
}

static void add(ql_diags *d, ql_severity sev, ql_span sp, const char *path, const char *fmt, va_list ap)
{
    if (sev == QL_ERROR && ql_diags_full(d))
        return;
    if (sev == QL_NOTE && d->n && d->v[d->n - 1].sev == QL_ERROR && ql_diags_full(d))
        return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (sev != QL_NOTE)
        d->repeating = sev == QL_ERROR && sp.src && repeated(d, sp, buf);
    if (d->repeating)
        return;
    if (sev == QL_ERROR)
        d->errors++; /* counted even when it cannot be stored: out of memory still fails the compile */
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        ql_diag *v = realloc(d->v, sizeof *v * (size_t)cap);
        if (!v)
            return; /* a lost diagnostic beats a crash; the error count still rises */
        d->v = v;
        d->cap = cap;
    }
    ql_diag *g = &d->v[d->n];
    g->msg = strdup(buf);
    if (!g->msg)
        return;
    g->sev = sev;
    g->span = sp;
    g->path = path ? strdup(path) : NULL; /* may be NULL on OOM: printed as "qrl" */
    d->n++;
}

void ql_error(ql_diags *d, ql_span sp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(d, QL_ERROR, sp, NULL, fmt, ap);
    va_end(ap);
}

void ql_note(ql_diags *d, ql_span sp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(d, QL_NOTE, sp, NULL, fmt, ap);
    va_end(ap);
}

void ql_error_file(ql_diags *d, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ql_span none = {0};
    add(d, QL_ERROR, none, path, fmt, ap);
    va_end(ap);
}

void ql_warning_file(ql_diags *d, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ql_span none = {0};
    add(d, QL_WARNING, none, path, fmt, ap);
    va_end(ap);
}

static const char *sev_name(ql_severity s)
{
    return s == QL_ERROR ? "error" : s == QL_WARNING ? "warning" : "note";
}

/* Source line, then a caret at the start and tildes to the end of the span
 * (clipped to that line). Tabs are kept in the marker line so it lines up, and a
 * UTF-8 character (in a string or comment, or a stray one) takes one place in it:
 * the continuation bytes get none. */
static void print_excerpt(const ql_span *sp, FILE *f)
{
    int line, col;
    ql_source_linecol(sp->src, sp->start, &line, &col);
    int len;
    const char *text = ql_source_line(sp->src, line, &len);
    fprintf(f, "%5d | %.*s\n      | ", line, len, text);
    int c0 = col - 1;
    int width = (int)(sp->end - sp->start);
    if (width < 1)
        width = 1;
    if (c0 + width > len)
        width = len - c0 > 1 ? len - c0 : 1;
    for (int i = 0; i < c0 && i < len; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80)
            fputc(text[i] == '\t' ? '\t' : ' ', f);
    fputc('^', f);
    for (int i = 1; i < width; i++)
        if (c0 + i >= len || ((unsigned char)text[c0 + i] & 0xC0) != 0x80)
            fputc('~', f);
    fputc('\n', f);
}

void ql_diags_print(const ql_diags *d, FILE *f)
{
    for (int i = 0; i < d->n; i++) {
        const ql_diag *g = &d->v[i];
        if (!g->span.src) {
            fprintf(f, "%s: %s: %s\n", g->path ? g->path : "qrl", sev_name(g->sev), g->msg);
            continue;
        }
        int line, col;
        ql_source_linecol(g->span.src, g->span.start, &line, &col);
        fprintf(f, "%s:%d:%d: %s: %s\n", g->span.src->path, line, col, sev_name(g->sev), g->msg);
        print_excerpt(&g->span, f);
    }
}

/* Edits from a to b: insertions, deletions, substitutions and swaps of two neighbours (optimal
 * string alignment), so "f23" is one edit from "f32". */
static int edit_distance(const char *a, const char *b, int limit)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 64 || lb > 64 || abs(la - lb) > limit)
        return limit + 1;
    int d[65][65];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            int best = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *ql_suggest(const char *name, const char *const *cands, int n)
{
    /* A third of the name's length, at least 1, at most 3 edits. */
    int len = (int)strlen(name), limit = len / 3;
    limit = limit < 1 ? 1 : limit > 3 ? 3 : limit;
    const char *best = NULL;
    int bestd = limit + 1;
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        int dist = edit_distance(name, cands[i], limit);
        if (dist < bestd) {
            bestd = dist;
            best = cands[i];
        }
    }
    return best;
}
