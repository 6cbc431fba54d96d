/* The per-op and per-node time table of a profiling run (qrl run --profile, qrl bench --profile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct op_row {
    const char *op;
    int nodes;
    double seconds, macs;
} op_row;

/* a node's figures and, from a call of their own (qrl.h), its op and name */
typedef struct node_row {
    double seconds, macs;
    int64_t runs;
    const char *op, *name;
} node_row;

static const node_row *sort_prof;

static int by_node_time(const void *a, const void *b)
{
    double ta = sort_prof[*(const int *)a].seconds, tb = sort_prof[*(const int *)b].seconds;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

static int by_op_time(const void *a, const void *b)
{
    double ta = ((const op_row *)a)->seconds, tb = ((const op_row *)b)->seconds;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

static void gmacs(FILE *f, double macs, double seconds)
{
    if (macs > 0 && seconds > 0)
        fprintf(f, " %9.1f", macs / seconds * 1e-9);
    else
        fprintf(f, " %9s", "-");
}

int cli_print_profile(FILE *f, const qrl_model *m, int top)
{
    qrl_node_profile probe;
    int n = 0, nops = 0, ran = 0;
    while (qrl_model_profile(m, n, &probe) == 0) /* the graph that ran: not the walk's (qrl.h) */
        n++;
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    op_row *ops = calloc((size_t)n + 1, sizeof *ops);
    node_row *p = calloc((size_t)n + 1, sizeof *p);
    if (!order || !ops || !p) {
        free(order);
        free(ops);
        free(p);
        fprintf(stderr, "qrl: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) { /* left zero (not run) when m does not profile */
        qrl_node_profile np = {0};
        if (qrl_model_profile(m, i, &np) == 0 && qrl_model_profile_node(m, i, &p[i].op, &p[i].name) == 0)
            p[i].seconds = np.seconds, p[i].macs = np.macs, p[i].runs = np.runs;
    }
    double total = 0, macs = 0;
    int64_t runs = 0;
    for (int i = 0; i < n; i++) {
        if (!p[i].runs)
            continue;
        order[ran++] = i;
        total += p[i].seconds;
        macs += p[i].macs;
        runs = p[i].runs > runs ? p[i].runs : runs;
        int k = 0;
        while (k < nops && strcmp(ops[k].op, p[i].op))
            k++;
        if (k == nops)
            ops[nops++].op = p[i].op;
        ops[k].nodes++;
        ops[k].seconds += p[i].seconds;
        ops[k].macs += p[i].macs;
    }
    fprintf(f, "profile: %d nodes ran %lld time%s, %.3f ms per run in nodes", ran, (long long)runs, runs == 1 ? "" : "s",
            runs ? total / (double)runs * 1e3 : 0.0);
    if (macs > 0)
        fprintf(f, ", %.1f MMAC per run in convolutions and matrix products (%.1f GMAC/s)", macs / (double)runs * 1e-6,
                total > 0 ? macs / total * 1e-9 : 0.0);
    fprintf(f, "\nby op:\n  %-24s %5s %10s %6s %9s\n", "op", "nodes", "ms/run", "%", "GMAC/s");
    qsort(ops, (size_t)nops, sizeof *ops, by_op_time);
    for (int k = 0; k < nops; k++) {
        fprintf(f, "  %-24s %5d %10.3f %6.1f", ops[k].op, ops[k].nodes, ops[k].seconds / (double)runs * 1e3,
                total > 0 ? 100.0 * ops[k].seconds / total : 0.0);
        gmacs(f, ops[k].macs, ops[k].seconds);
        fputc('\n', f);
    }
    sort_prof = p;
    qsort(order, (size_t)ran, sizeof *order, by_node_time);
    int shown = top > 0 && top < ran ? top : ran;
    /* names in full: the fused nodes' names differ only at their ends ("...features.3/conv/conv.2/Conv") */
    int width = 40;
    for (int r = 0; r < shown; r++) {
        const char *name = p[order[r]].name;
        int len = name ? (int)strlen(name) : 0;
        width = len > width ? (len < 100 ? len : 100) : width;
    }
    fprintf(f, "by node (%s%d):\n  %-*s %-18s %10s %6s %9s %9s\n", shown < ran ? "the slowest " : "all ", shown,
            width, "node", "op", "ms/run", "%", "MMAC", "GMAC/s");
    for (int r = 0; r < shown; r++) {
        int i = order[r];
        const char *name = p[i].name;
        double per = (double)p[i].runs;
        fprintf(f, "  %-*.*s %-18.18s %10.3f %6.1f", width, width, name && name[0] ? name : "(unnamed)", p[i].op,
                p[i].seconds / per * 1e3, total > 0 ? 100.0 * p[i].seconds / total : 0.0);
        if (p[i].macs > 0)
            fprintf(f, " %9.2f", p[i].macs / per * 1e-6);
        else
            fprintf(f, " %9s", "-");
        gmacs(f, p[i].macs, p[i].seconds);
        fputc('\n', f);
    }
    /* which convolutions could run kernels compiled for their shape (iconv-jit): a first run's are
     * still compiling, a later run's come from the module cache */
    qrl_shape_kernels sk;
    qrl_shape_kernel_counts(&sk);
    if (sk.loaded + sk.compiled + sk.pending > 0)
        fprintf(f, "shape kernels (iconv-jit): %ld loaded from the module cache, %ld compiled (%ld in the background), "
                "%ld still compiling\n", sk.loaded, sk.compiled, sk.background, sk.pending);
    free(order);
    free(ops);
    free(p);
    return 0;
}
