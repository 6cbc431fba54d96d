/* The model handle of include/qrl.h, shared by the files that implement the
 * API: runtime/api.c (load, run, walk) and the layers above that make models
 * (the quantizer's integer graph). Not part of the public API. */
#ifndef QR_API_MODEL_H
#define QR_API_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "graph.h"
#include "qrl.h"

struct qrl_model {
    qr_graph *g;
    qr_exec *x;
    int threads;
    int profile;
    void *kernel_user; /* qr_exec_opts.kernel_user of x */
    char *path;        /* the file it was loaded from (NULL for a wrapped graph) */
    int borrowed; /* g and the handle belong to another object (qrl_quantized_model): qrl_model_free leaves them */
    /* A loaded model's inference graph: a copy of g that qr_pass_nhwc_f32 rewrote (made with the
     * first executor; NULL when the pass changed nothing or the model is not loaded from a file).
     * The executor runs it, and the graph walk and the profile are its; g stays what was loaded
     * (its values, the dump, what qrl_quantize reads). */
    qr_graph *xg;
    int layout; /* try the pass (qrl_model_load) */
    int apart;  /* xg computes its samples apart (samples.h): a batch runs in parts (qrl_model_run) */
    size_t sample_peak; /* bytes live at once per sample in the last executor run (0: none yet) */
    /* model runs and executor runs since the profile started: a split batch is several executor
     * runs, and the profile counts the model's */
    int64_t prof_runs, prof_exec_runs;
};

/* The graph m's executor runs. */
static inline const qr_graph *qr_api_run_graph(const qrl_model *m)
{
    return m->xg ? m->xg : m->g;
}

/* Makes m->x again over m->g (after g changed, or to run otherwise), with kernel_user; on failure
 * the executor it had stays. */
qr_status qr_api_model_exec(qrl_model *m, int threads, int profile, qr_error *e);
/* A runtime tensor as the caller's: dtype as its ONNX code, the data handed over (b's, not copied). */
void qr_api_tensor_out(const qr_tensor *a, qrl_tensor *b);

/* A model over g, run with kernel_user for its kernels' calls (qr_exec_opts); g stays the caller's. */
qr_status qr_api_model_wrap(qr_graph *g, void *kernel_user, int threads, qrl_model **out, qr_error *e);
/* Frees a model made by qr_api_model_wrap. */
void qr_api_model_unwrap(qrl_model *m);
/* The runtime's view of a caller's tensor (the data stays the caller's). */
void qr_api_tensor_in(const qrl_tensor *a, qr_tensor *b);
/* Copies e's message into err[0..n) and returns 1 (what every failing API call returns). */
int qr_api_fail(const qr_error *e, char *err, size_t n);

#endif
