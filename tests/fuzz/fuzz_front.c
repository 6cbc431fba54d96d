/* The front-end fuzzer: mutated and generated recipes through the lexer,
 * parser, checker and (one in COMPILE_EVERY inputs) the compiler, with the
 * checks of tests/support/fuzzgen.h. `make fuzz` runs a long campaign under
 * AddressSanitizer + UBSan. A crash kills the process (after printing the
 * input), so reaching the summary line means there was none.
 *
 * usage: fuzz_front [-n ITERATIONS] [-s SEED] [-c COMPILE_EVERY] [-p K] SEED_FILES...
 *   -n  inputs to run (default 100000)
 *   -s  random seed (default 1): the same seed and seed files give the same inputs
 *   -c  compile one input in every COMPILE_EVERY (0: never; default 500)
 *   -p  print input number K (from 0) and exit, to reproduce a finding
 * Imports resolve in ./stdlib: run it from the project root. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuzzgen.h"

static fg_gen gen;

static void say(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(2, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

/* Prints the input being run, if any: the process is dying. */
static void report_crash(void)
{
    const char *text = gen.cur;
    if (!text)
        return;
    gen.cur = NULL;
    char head[96];
    int n = snprintf(head, sizeof head, "\nfuzz_front: crashed on input %ld; the input:\n", gen.cur_index);
    say(head, (size_t)n);
    say(text, gen.cur_len);
    say("\n--- end of input ---\n", 22);
}

#if defined(__SANITIZE_ADDRESS__)
/* The sanitizers print their report, then call this before exiting. */
void __sanitizer_set_death_callback(void (*callback)(void));
#else
static void on_signal(int sig)
{
    report_crash();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

static void progress(const fg_stats *st)
{
    fprintf(stderr, "fuzz_front: %ld inputs: %ld parsed clean, %ld checked clean, %ld compiled\n", st->inputs,
            st->parsed, st->checked, st->compiled);
}

static int usage(void)
{
    fprintf(stderr, "usage: fuzz_front [-n ITERATIONS] [-s SEED] [-c COMPILE_EVERY] [-p K] SEED_FILES...\n");
    return 2;
}

int main(int argc, char **argv)
{
    long n = 100000, every = 500, print = -1;
    unsigned long long seed = 1;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        const char *o = argv[i];
        char *end;
        if (i + 1 >= argc || strlen(o) != 2 || !strchr("nscp", o[1]))
            return usage();
        long long v = strtoll(argv[i + 1], &end, 10);
        if (!argv[i + 1][0] || *end || v < 0)
            return usage();
        switch (o[1]) {
        case 'n': n = (long)v; break;
        case 's': seed = (unsigned long long)v; break;
        case 'c': every = (long)v; break;
        default: print = (long)v; break;
        }
    }
    fg_init(&gen, seed);
    for (; i < argc; i++)
        if (!fg_add_seed_file(&gen, argv[i]))
            fprintf(stderr, "fuzz_front: cannot read seed file %s\n", argv[i]);
    if (print >= 0) {
        for (long k = 0; k <= print; k++) {
            size_t len;
            char *text = fg_next(&gen, &len);
            if (k == print)
                fwrite(text, 1, len, stdout);
            free(text);
        }
        fg_free(&gen);
        return 0;
    }
    atexit(report_crash); /* libgccjit exits on an internal error of GCC */
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_death_callback(report_crash);
#else
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
        signal(sigs[k], on_signal);
#endif
    fg_stats st = {0};
    char *bad_text = NULL;
    size_t bad_len = 0;
    time_t t0 = time(NULL);
    const char *bad = fg_campaign(&gen, n, every, "stdlib", &st, &bad_text, &bad_len, progress);
    if (bad) {
        fprintf(stderr, "fuzz_front: input %ld (seed %llu): %s\n--- input ---\n", st.inputs - 1, seed, bad);
        fwrite(bad_text, 1, bad_len, stderr);
        fprintf(stderr, "\n--- end of input ---\n");
        free(bad_text);
        fg_free(&gen);
        return 1;
    }
    printf("%ld inputs: %ld parsed clean, %ld checked clean, %ld compiled; 0 crashes\n", st.inputs, st.parsed,
           st.checked, st.compiled);
    fprintf(stderr, "fuzz_front: %ld diagnostics in %lds\n", st.diags, (long)(time(NULL) - t0));
    fg_free(&gen);
    return 0;
}
