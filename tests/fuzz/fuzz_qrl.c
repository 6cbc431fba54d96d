/* The long fuzz campaign (`make fuzz`): mutated and random recipes through
 * lexer, parser, checker and compiler.
 * Usage: fuzz_qrl [-n ITERATIONS] [-s SEED] [-c COMPILE_EVERY] [-l STDLIB] SEED_FILES... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qrlfuzz.h"

int main(int argc, char **argv)
{
    long n = 100000, every = 500;
    unsigned long long seed = 1;
    const char *stdlib = "stdlib";
    qf_gen g;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "fuzz_qrl: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "-n"))
            n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-s"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-c"))
            every = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-l"))
            stdlib = argv[i + 1];
        else {
            fprintf(stderr, "fuzz_qrl: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    qf_init(&g, seed);
    for (; i < argc; i++)
        if (!qf_add_seed_file(&g, argv[i]))
            fprintf(stderr, "fuzz_qrl: cannot read seed %s\n", argv[i]);
    qf_stats st = {0};
    time_t t0 = time(NULL);
    long next_compile = 0; /* compile the first clean input after every `every` inputs */
    for (long k = 0; k < n; k++) {
        size_t len;
        char *text = qf_next(&g, &len);
        long compiled = st.compiled;
        const char *bad = qf_run(text, len, stdlib, every > 0 && k >= next_compile, &st);
        if (st.compiled > compiled)
            next_compile = k + every;
        if (bad) {
            fprintf(stderr, "fuzz_qrl: input %ld: %s\n--- input ---\n%s\n--- end ---\n", k, bad, text);
            free(text);
            qf_free(&g);
            return 1;
        }
        free(text);
        if (k && k % 10000 == 0)
            fprintf(stderr, "fuzz_qrl: %ld inputs (%lds)\n", k, (long)(time(NULL) - t0));
    }
    printf("%ld inputs: %ld parsed clean, %ld checked clean, %ld compiled; 0 crashes (%lds)\n", st.inputs, st.parsed,
           st.checked, st.compiled, (long)(time(NULL) - t0));
    qf_free(&g);
    return 0;
}
