/* Recipe fuzzing shared by the short fuzz test (tests/unit/test_fuzz.c) and
 * the long campaign (`make fuzz`, tests/fuzz/fuzz_qrl.c): deterministic
 * mutations of seed recipes and random token streams, run through lexer,
 * parser, checker and (some of them) the compiler; every diagnostic must be
 * well formed. A crash anywhere ends the process, so finishing means none. */
#ifndef QRLFUZZ_H
#define QRLFUZZ_H

#include <stddef.h>

typedef struct qf_stats {
    long inputs, parsed, checked, compiled;
} qf_stats;

typedef struct qf_gen {
    unsigned long long rng;
    char **seeds;
    size_t *seed_len;
    int nseeds;
} qf_gen;

void qf_init(qf_gen *g, unsigned long long seed);
/* Adds the file's contents as a seed; returns 0 when it cannot be read. */
int qf_add_seed_file(qf_gen *g, const char *path);
void qf_free(qf_gen *g);
/* The next input (malloc'd, NUL-terminated; *len without the NUL). */
char *qf_next(qf_gen *g, size_t *len);
/* Runs one input through the pipeline (compile when asked and clean).
 * Returns NULL when every diagnostic was well formed, else a static message. */
const char *qf_run(const char *text, size_t len, const char *stdlib_dir, int compile, qf_stats *st);

#endif
