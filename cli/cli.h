/* The qrl command: one function per subcommand; main.c dispatches. */
#ifndef QRL_CLI_H
#define QRL_CLI_H

#include <stdio.h>

#include "exec.h"
#include "graph.h"
#include "quantize.h"
#include "recipe.h"
#include "status.h"
#include "tensor.h"

int cli_dump(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_bench(int argc, char **argv);

/* Compiles a recipe file (and its imports), printing its diagnostics; NULL on errors. */
qrl_module *cli_compile_recipe(const char *path, int no_cache);
/* Compiles the recipe and quantizes g (loaded from model) in memory,
 * calibrating on the --calib files (specs as cli_bind_inputs takes them);
 * opts gives everything but the module. Returns 0, or the exit status 1
 * after printing the diagnostics or the error. The caller frees *mod and *q
 * (either may be set on failure). */
int cli_quantize_in_memory(const char *model, const qr_graph *g, const char *recipe, int no_cache, int ncalib,
                           char *const *calib, const qr_quant_opts *opts, qrl_module **mod, qr_quantized **q);

/* Prints "qrl: <message>" to stderr and returns the exit status 1. */
int cli_fail(const qr_error *e);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Loads a model and runs the graph passes. */
qr_status cli_load_model(const char *path, qr_graph **g, qr_error *e);
/* A model ready to run: a QDQ model's pairs lowered by the recipe's rules
 * (stdlib/qdq.qrl unless another is given) into its integer graph. */
struct qr_quantized;
typedef struct cli_runnable {
    qr_graph *g;               /* as loaded (a QDQ model: stripped to its float graph) */
    qrl_module *mod;           /* the recipe a QDQ model is lowered with */
    struct qr_quantized *q;    /* its integer graph */
    const qr_graph *run;       /* what runs: g, or the integer graph */
    void *kernel_user;         /* for qr_exec_opts: the integer graph's kernel calls */
} cli_runnable;
qr_status cli_load_runnable(const char *path, const char *qdq_recipe, cli_runnable *r, qr_error *e);
void cli_runnable_free(cli_runnable *r);
/* Reads the files of specs ("NAME=FILE" or "FILE", the next unbound input)
 * into inputs[0..g->n_inputs), checked against the inputs' types; every
 * input must be bound (flag names the option in the message). samples: the
 * files are sample sets (any count along the first dimension). */
qr_status cli_bind_inputs(const char *model, const qr_graph *g, const char *flag, int n, char *const *specs,
                          int samples, qr_tensor *inputs, qr_error *e);
/* Prints the profile p of graph g (qr_exec_profile): time per op type and per node, the top
 * slowest nodes (all when top <= 0), GMAC/s of convolutions and matrix products. Returns 0 or 1. */
int cli_print_profile(FILE *f, const qr_graph *g, const qr_node_prof *p, int top);
/* Parses a positive integer option value. */
int cli_parse_int(const char *s, int lo, int hi, int *out);
/* The online cores (1 when unknown, at most 256): the default --threads of
 * commands whose results do not depend on the thread count (qrl quantize: for
 * calibrators whose merge is exact; see docs/quantizer.md). */
int cli_default_threads(void);

#endif
