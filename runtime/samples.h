/* Whether a graph computes the samples of its batch (axis 0 of its inputs) apart from each other,
 * so that a run may go sample by sample (qrl_model_run: an f32 CNN's activations then stay in
 * cache from layer to layer instead of going through memory for the whole batch). */
#ifndef QR_SAMPLES_H
#define QR_SAMPLES_H

#include "graph.h"

/* 1 when every live node is one whose outputs' sample i depends on its inputs' sample i alone, the
 * same computation whatever the batch (convolutions, pools, element-wise ops without a broadcast
 * over the batch, Flatten and Transpose that keep axis 0, Gemm of a constant B), and the graph's
 * inputs and outputs all have axis 0 as their batch. */
int qr_graph_samples_apart(const qr_graph *g);

#endif
