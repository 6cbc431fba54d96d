/* Front-end fuzzing, shared by the short fuzz test (tests/unit/test_fuzz.c)
 * and the long campaign (`make fuzz`, tests/fuzz/fuzz_front.c).
 *
 * fg_next builds deterministic inputs from the seed files: byte flips,
 * deleted, duplicated and swapped ranges, dictionary tokens inserted or
 * replacing a token, lines moved between seeds, two seeds spliced, random
 * token streams, randomly generated programs (syntactically plausible, so
 * they reach the checker and the compiler; among their recipes ones that
 * derive, `recipe NAME : BASE`, from a recipe of the program or of an
 * imported file, through chains around the 64-deep limit, and from bases
 * that are unknown, not recipes, themselves, in a cycle, defined later or
 * in error) and deep nesting at and around
 * the parser's limits. Besides the seed files, built-in probes (near-miss
 * programs for diagnostics that mutations rarely reach) are seeds too. The
 * first nseeds inputs are the seeds unchanged.
 *
 * fg_run takes one input through qc_unit_load_text, qc_check and, when
 * asked and the check was clean, qc_compile; it prints the diagnostics and
 * the syntax tree (to /dev/null) and checks that every diagnostic is well
 * formed. A crash anywhere ends the process, so finishing means none. */
#ifndef FUZZGEN_H
#define FUZZGEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct fg_stats {
    long inputs;   /* run */
    long parsed;   /* parsed (with imports) without errors */
    long checked;  /* ... and checked without errors */
    long compiled; /* ... and compiled to a module */
    long diags;    /* diagnostics seen */
} fg_stats;

typedef struct fg_gen {
    uint64_t rng;
    char **seeds;
    size_t *seed_len;
    int nseeds;
    long produced; /* inputs built so far */
    /* The input fg_campaign is running (NULL between inputs), for a crash report. */
    const char *cur;
    size_t cur_len;
    long cur_index;
} fg_gen;

/* A generator with the built-in probes as its first seeds. */
void fg_init(fg_gen *g, uint64_t seed);
void fg_free(fg_gen *g);
/* Adds a seed (copied). */
void fg_add_seed(fg_gen *g, const char *text, size_t len);
/* Adds a file's contents as a seed; 0 when it cannot be read. */
int fg_add_seed_file(fg_gen *g, const char *path);
/* Adds every *.qrl file of dir, in name order; returns how many. */
int fg_add_seed_dir(fg_gen *g, const char *dir);

/* The next input (malloc'd, NUL-terminated; *len excludes the NUL, and the
 * text may hold other NUL bytes). */
char *fg_next(fg_gen *g, size_t *len);

/* Runs one input (named fuzz.qrl; imports resolve in stdlib_dir). Compiles
 * when compile is set and the input checked clean. Returns NULL when all
 * went well, else a description of the problem (static storage): a
 * diagnostic without a message, a span outside its source, an internal
 * compiler error, or a clean check that did not compile. */
const char *fg_run(const char *text, size_t len, const char *stdlib_dir, int compile, fg_stats *st);

/* A campaign of n inputs from g. A compile is due at every compile_every-th
 * input (0: never); it goes to the first input from there on that checks
 * clean, so about n / compile_every inputs are compiled. On a problem
 * returns its description and, when bad is not NULL, the input (malloc'd,
 * *bad_len its length); NULL when all n went well. progress, when not NULL,
 * is called every 10000 inputs. */
const char *fg_campaign(fg_gen *g, long n, long compile_every, const char *stdlib_dir, fg_stats *st, char **bad,
                        size_t *bad_len, void (*progress)(const fg_stats *st));

#endif
