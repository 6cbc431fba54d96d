/* Timing of a model's integer matrix products in QRL on .npy inputs (tools/make_matmulint_models.py
 * makes the models; tools/ort_bench_npy.js times the same files in ONNX Runtime). Not a test.
 *   make build/qrl && cc -O2 -Iinclude tools/matmulint_bench.c build/libqrl.a -lprotobuf-c \
 *       -L/usr/lib/gcc/x86_64-linux-gnu/12 -lgccjit -ldl -lm -lpthread -o build/matmulint_bench
 *   build/matmulint_bench MODEL.onnx THREADS X.npy...
 * One warm-up run, then runs for at least 0.5 s ($BENCH_MIN_TIME seconds when set); prints the fastest run's ms (wall clock: the
 * machine is shared, so the fastest is the least disturbed) and GMAC/s, counting M * K * N per
 * MatMulInteger or QLinearMatMul node and output matrix. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qrl.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* M * K * N summed over the batch of every integer product in the graph. */
static double model_macs(const qrl_model *m)
{
    double macs = 0;
    for (int i = 0; i < qrl_model_num_nodes(m); i++) {
        const char *op = qrl_node_op(m, i);
        int qlin = !strcmp(op, "QLinearMatMul");
        if (strcmp(op, "MatMulInteger") && !qlin)
            continue;
        qrl_value_info a, y;
        if (qrl_value_get(m, qrl_node_input(m, i, 0), &a) || qrl_value_get(m, qrl_node_output(m, i, 0), &y) ||
            a.ndim < 1)
            continue;
        double n = 1;
        for (int d = 0; d < y.ndim; d++)
            n *= (double)y.dims[d];
        macs += n * (double)a.dims[a.ndim - 1];
    }
    return macs;
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc < 3) {
        fprintf(stderr, "usage: matmulint_bench MODEL.onnx THREADS X.npy...\n");
        return 2;
    }
    qrl_model *m;
    if (qrl_model_load(argv[1], atoi(argv[2]), &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int nin = qrl_model_num_inputs(m), nout = qrl_model_num_outputs(m);
    if (argc - 3 != nin) {
        fprintf(stderr, "the model has %d inputs, %d files given\n", nin, argc - 3);
        return 2;
    }
    qrl_tensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + 1, sizeof *out);
    for (int i = 0; i < nin; i++)
        if (qrl_tensor_read_npy(argv[3 + i], &in[i], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    const char *mt = getenv("BENCH_MIN_TIME");
    double best = 1e30, t0 = now(), min_time = mt ? atof(mt) : 0.5;
    int runs = 0;
    for (int r = 0; r < 1 || now() - t0 < min_time || runs < 4; r++) {
        double t = now();
        if (qrl_model_run(m, in, out, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        t = now() - t;
        for (int o = 0; o < nout; o++)
            qrl_tensor_free(&out[o]);
        if (r > 0 && t < best) /* run 0 is the warm-up: plans, packs constants, grows the workspace */
            best = t;
        runs += r > 0;
    }
    double macs = model_macs(m);
    printf("%s threads %s: %.3f ms, %.1f GMAC/s (%d runs, %.0f MACs)\n", argv[1], argv[2], best * 1e3,
           macs / best * 1e-9, runs, macs);
    for (int i = 0; i < nin; i++)
        qrl_tensor_free(&in[i]);
    free(in);
    free(out);
    qrl_model_free(m);
    return 0;
}
