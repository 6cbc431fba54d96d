/* Diagnostics in the style of gcc and clang:
 *
 *   file.qrl:3:9: error: unknown name 'minmx'; did you mean 'minmax'?
 *       3 |   let s = minmx(x)
 *         |           ^~~~~
 *
 * Collected in order of emission; printing is separate so tests can compare
 * them with golden files. */
#ifndef QL_DIAG_H
#define QL_DIAG_H

#include <stdio.h>

#include "source.h"

typedef enum ql_severity { QL_ERROR, QL_WARNING, QL_NOTE } ql_severity;

typedef struct ql_diag {
    ql_severity sev;
    ql_span span; /* span.src NULL: no location (e.g. a file that cannot be opened) */
    char *msg;
    const char *path; /* when span.src is NULL: the file the message is about, or NULL (owned) */
} ql_diag;

typedef struct ql_diags {
    ql_diag *v;
    int n, cap;
    int errors;
    int max_errors; /* stop recording errors after this many (0 = 50) */
    int repeating;  /* the last error repeated an earlier one: its notes are dropped too */
} ql_diags;

void ql_diags_init(ql_diags *d);
void ql_diags_free(ql_diags *d);

#if defined(__GNUC__)
#define QL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define QL_PRINTF(a, b)
#endif

void ql_error(ql_diags *d, ql_span sp, const char *fmt, ...) QL_PRINTF(3, 4);
void ql_note(ql_diags *d, ql_span sp, const char *fmt, ...) QL_PRINTF(3, 4);
/* An error about a whole file (cannot open it, ...). */
void ql_error_file(ql_diags *d, const char *path, const char *fmt, ...) QL_PRINTF(3, 4);
/* A warning about a whole file or folder: printed, but not an error. */
void ql_warning_file(ql_diags *d, const char *path, const char *fmt, ...) QL_PRINTF(3, 4);
/* Drops every diagnostic from index n on (those about a file found not to be
 * QRL source, whose text must not be shown). */
void ql_diags_truncate(ql_diags *d, int n);
/* True once max_errors errors were recorded: callers may stop early. */
int ql_diags_full(const ql_diags *d);

/* Prints every diagnostic with its source line and a caret under the span. */
void ql_diags_print(const ql_diags *d, FILE *f);

/* The candidate closest to name by edit distance, if close enough to be a
 * likely typo (NULL otherwise). For "did you mean" hints. */
const char *ql_suggest(const char *name, const char *const *cands, int n);

#endif
