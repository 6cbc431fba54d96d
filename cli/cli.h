/* The qrl command: one function per subcommand; main.c dispatches. Every
 * feature is a call of the public API (qrl.h); this folder sees nothing else. */
#ifndef QRL_CLI_H
#define QRL_CLI_H

#include <stdio.h>

#include "qrl.h"

/* The size of an error message buffer (the runtime's messages are at most this long). */
#define CLI_ERRLEN 1024

int cli_dump(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_bench(int argc, char **argv);

/* Compiles the recipe (printing its diagnostics) and quantizes m (loaded from
 * model) in memory, calibrating on the --calib files (specs as
 * qrl_model_read_inputs takes them); opts and flags (QRL_QUANTIZE_*) give the rest. Returns 0, or the
 * exit status 1 after printing the diagnostics or the error. The caller frees
 * *r and *q (either may be set on failure). */
int cli_quantize_in_memory(const char *model, const qrl_model *m, const char *recipe, int no_cache, int ncalib,
                           char *const *calib, const qrl_quantize_opts *opts, int flags, qrl_recipe **r,
                           qrl_quantized **q);

/* Prints "qrl: error: <message>" to stderr and returns the exit status 1. */
int cli_fail(const char *msg);
/* Prepends "prefix: " to the message in err[0..CLI_ERRLEN) (context on the way up). */
void cli_error_prefix(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A model ready to run: a QDQ model's pairs lowered by the recipe's rules
 * (stdlib/qdq.qrl unless another is given) into its integer graph. */
typedef struct cli_runnable {
    qrl_model *m;      /* as loaded (a QDQ model: stripped to its float graph) */
    qrl_quantized *q;  /* a QDQ model's integer graph, or NULL */
    qrl_model *run;    /* what runs: m, or q's integer graph */
} cli_runnable;
/* Loads path (threads: the kernels' worker threads) and lowers it when it is a QDQ model; 0 or 1 with err set. */
int cli_load_runnable(const char *path, const char *qdq_recipe, int threads, cli_runnable *r, char *err);
void cli_runnable_free(cli_runnable *r);
/* Prints the profile of m's runs (QRL_RUN_PROFILE): time per op type and per node, the top
 * slowest nodes (all when top <= 0), GMAC/s of convolutions and matrix products. Returns 0 or 1. */
int cli_print_profile(FILE *f, const qrl_model *m, int top);
/* Frees the data of t[0..n). */
void cli_tensors_free(qrl_tensor *t, int n);
/* Parses a positive integer option value. */
int cli_parse_int(const char *s, int lo, int hi, int *out);
/* The online cores (1 when unknown, at most 256): the default --threads of
 * commands whose results do not depend on the thread count (qrl quantize: for
 * calibrators whose merge is exact; see docs/quantizer.md). */
int cli_default_threads(void);

#endif
