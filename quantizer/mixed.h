/* Mixed precision. Integer recipes (qmeasure.c: each Conv/Gemm/MatMul computes as the recipe's
 * types, another weight type, 16-bit output activations or f32, under bits(N) of arithmetic) share
 * the front and the choice below (qr_mixed_choose) and the info the reports print.
 *
 * Weight-only recipes (mixed.c): each MatMul/Gemm weight takes one of the recipe's
 * choices (weight = ... and every candidate = ..., f32 among them when a candidate says so) so that
 * the model meets the recipe's budget (bits(N): the weights' average storage bits, weighted by
 * their layers' MACs; bytes(N): the model's size) with the least predicted output error.
 *
 * Sensitivity: one run per layer and choice, that layer alone quantized, on the samples the
 * recipe does not hold out: the outputs' error energy e[l][c]. The prediction adds them (errors of
 * different layers taken as independent). The assignment: the Pareto front over (cost, predicted
 * error), a multiple-choice knapsack solved exactly by merging the layers' choices one layer at a
 * time and dropping dominated points (thinned to 4096 points per step when it grows past them);
 * the chosen point is the front's least error within the budget. Some front points, the chosen
 * one and each uniform assignment (every layer the same choice) are then built and run for real
 * on the held-out samples (validate = f): their measured SQNR. */
#ifndef QR_MIXED_H
#define QR_MIXED_H

#include "quantize.h"

typedef struct qr_mixed_point {
    double bytes;     /* the model's bytes (every constant the graph reads) */
    double bits;      /* by MACs: the weights' average storage bits (codes, scales, zero points), or the layers'
                       * arithmetic bits (qr_mixed_layer.bits) */
    double predicted; /* dB: the outputs' SQNR the per-layer errors predict (the choosing samples) */
    double measured;  /* dB: measured by a run on the held-out samples; NaN when not run */
    double key;       /* what the budget bounds: bits or bytes (the points are shown by it) */
    int chosen;       /* the assignment that ships */
    int uniform;      /* -1, or the choice every layer takes */
    int *pick;        /* by layer: its choice */
} qr_mixed_point;

typedef struct qr_mixed_layer {
    char *name;    /* the weight's name */
    char *node;    /* the node reading it */
    double macs;   /* per sample */
    double weights; /* K * N */
    double *bytes; /* by choice: its constants' bytes */
    double *err2;  /* by choice: the outputs' error energy with this layer alone so (choosing samples) */
    /* by choice: an integer recipe's layer's arithmetic bits (its weights' bits times its output's
     * over 8; f32 32), what bits(N) averages; NULL: the weights' storage bits, 8 bytes / weights.
     * A choice not open to the layer has NaN bytes, bits and error. */
    double *bits;
} qr_mixed_layer;

typedef struct qr_mixed_info {
    int nchoices;
    char **choices; /* "i4", "i8", "f32": the weight setting's type first, then the candidates' */
    int nlayers;
    qr_mixed_layer *layers;
    int npoints; /* the points shown: some of the front, the chosen one, the uniform ones; by bytes */
    qr_mixed_point *points;
    int front;          /* the Pareto front's points in all */
    char budget_kind[8]; /* bits or bytes */
    double budget;
    double signal;      /* the f32 outputs' energy on the choosing samples */
    double rest;        /* the error no layer's choice changes (other quantized tensors'), in every prediction */
    int64_t choose_samples, heldout_samples; /* heldout 0: every figure on the same samples */
    int64_t measured_samples;                 /* the samples the measured SQNRs are on */
} qr_mixed_info;

void qr_mixed_info_free(qr_mixed_info *m);

/* Runs point p's assignment for real: sets p->measured (and, for the chosen one, keeps what
 * ships); called for the chosen point last. */
typedef qr_status (*qr_mixed_run_fn)(void *user, qr_mixed_point *p);
/* The Pareto front of mi's layers and choices (cost[l * nchoices + c], err[...] alike: the error
 * energy the layer adds in that choice; a cost not finite: the choice is not open to the layer;
 * rest: the error every assignment has), the least-error point whose cost is within bound chosen
 * (none: no point is chosen), the points shown added to mi->points (the figures from mi's layers'
 * bytes, MACs and errors, base_bytes the rest of the model's) and each run by run. */
qr_status qr_mixed_choose(qr_mixed_info *mi, const double *cost, const double *err, double rest, double base_bytes,
                          double bound, qr_mixed_run_fn run, void *user, qr_error *e);

#endif
