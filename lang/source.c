#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ql_source *index_lines(ql_source *s)
{
    int n = 1;
    for (size_t i = 0; i < s->len; i++)
        n += s->text[i] == '\n';
    s->line_start = malloc(sizeof(int) * (size_t)n);
    if (!s->line_start) {
        ql_source_free(s);
        return NULL;
    }
    s->nlines = 0;
    s->line_start[s->nlines++] = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->text[i] == '\n')
            s->line_start[s->nlines++] = (int)i + 1;
    return s;
}

ql_source *ql_source_from_text(const char *path, const char *text, size_t len)
{
    ql_source *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->path = strdup(path);
    s->text = malloc(len + 1);
    if (!s->path || !s->text) {
        ql_source_free(s);
        return NULL;
    }
    memcpy(s->text, text, len);
    s->text[len] = 0;
    s->len = len;
    return index_lines(s);
}

ql_source *ql_source_load(const char *path, const char **why, int *bad_line, int *bad_col)
{
    *bad_line = *bad_col = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        *why = strerror(errno);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    FILE *f = S_ISREG(sb.st_mode) && fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        *why = S_ISREG(sb.st_mode) ? strerror(errno) : S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file";
        close(fd);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += k;
        if (len > QL_SOURCE_MAX)
            break;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err || len > QL_SOURCE_MAX) {
        *why = !buf ? "out of memory" : err ? "read error" : "file too large (over 16 MiB)";
        free(buf);
        return NULL;
    }
    const char *nul = memchr(buf, 0, len);
    if (nul) { /* where: the line and column of the first one (columns count bytes) */
        *why = "not a text file (a NUL byte)";
        *bad_line = 1;
        const char *line = buf;
        for (const char *p = buf; p < nul; p++)
            if (*p == '\n')
                (*bad_line)++, line = p + 1;
        *bad_col = (int)(nul - line) + 1;
        free(buf);
        return NULL;
    }
    ql_source *s = ql_source_from_text(path, buf, len);
    free(buf);
    if (!s)
        *why = "out of memory";
    return s;
}

void ql_source_free(ql_source *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->text);
    free(s->line_start);
    free(s);
}

void ql_source_linecol(const ql_source *s, uint32_t offset, int *line, int *col)
{
    int lo = 0, hi = s->nlines - 1;
    while (lo < hi) { /* last line starting at or before offset */
        int mid = (lo + hi + 1) / 2;
        if ((uint32_t)s->line_start[mid] <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    *line = lo + 1;
    *col = (int)(offset - (uint32_t)s->line_start[lo]) + 1;
}

const char *ql_source_line(const ql_source *s, int line, int *len)
{
    if (line < 1 || line > s->nlines) {
        *len = 0;
        return "";
    }
    const char *p = s->text + s->line_start[line - 1];
    const char *nl = memchr(p, '\n', s->len - (size_t)(p - s->text));
    *len = nl ? (int)(nl - p) : (int)(s->len - (size_t)(p - s->text));
    if (*len > 0 && p[*len - 1] == '\r')
        (*len)--;
    return p;
}

ql_span ql_span_join(ql_span a, ql_span b)
{
    if (!a.src)
        return b;
    if (!b.src || a.src != b.src)
        return a;
    ql_span r = a;
    r.start = a.start < b.start ? a.start : b.start;
    r.end = a.end > b.end ? a.end : b.end;
    return r;
}
