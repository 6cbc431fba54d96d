/* The graph as readable, stable text: one line per input, constant, node and
 * output, with dtypes, shapes and attributes. Golden tests compare it. */
#ifndef QR_DUMP_H
#define QR_DUMP_H

#include <stdio.h>

#include "graph.h"

void qr_graph_dump(const qr_graph *g, FILE *f);
/* "f32[N,1,28,28]" with symbolic names, "?" for unknown dims, "f32[*]" for unknown rank. */
const char *qr_value_type_str(const qr_value *v, char *buf, size_t n);

#endif
