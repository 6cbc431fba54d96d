/* Source files and spans. A span is a byte range of one source; line and
 * column (1-based, columns counted in bytes as gcc does) are computed on demand. */
#ifndef QL_SOURCE_H
#define QL_SOURCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ql_source {
    char *path;   /* as given (diagnostics print it) */
    char *text;   /* NUL-terminated contents */
    size_t len;
    int *line_start; /* byte offset of each line's first byte */
    int nlines;
} ql_source;

typedef struct ql_span {
    const ql_source *src;
    uint32_t start, end; /* [start, end) */
} ql_span;

/* Largest source accepted: recipes are small; this bounds work on hostile input. */
#define QL_SOURCE_MAX ((size_t)16 << 20)

/* NULL with *why set (a static message naming the problem) on failure; for a file with a NUL
 * byte, *bad_line and *bad_col give the first one's place (1-based; 0 for any other failure). */
ql_source *ql_source_load(const char *path, const char **why, int *bad_line, int *bad_col);
/* A source from memory (tests, fuzzing); text is copied. */
ql_source *ql_source_from_text(const char *path, const char *text, size_t len);
void ql_source_free(ql_source *s);

void ql_source_linecol(const ql_source *s, uint32_t offset, int *line, int *col);
/* The text of 1-based line `line` (without its newline) and its length. */
const char *ql_source_line(const ql_source *s, int line, int *len);

ql_span ql_span_join(ql_span a, ql_span b);

#endif
