/* Channels-last twins of a graph's 4-D values, shared by the two layout passes (the integer
 * graph's, quantizer/layout.c, and the f32 graph's, runtime/pass_nhwc_f32.c): a value converted to
 * NHWC gets a twin "<name>_nhwc" with its dims permuted; a Transpose makes a twin the first time an
 * NHWC reader needs one, and at the end gives the NCHW form back to every value some NCHW reader or
 * the graph's outputs still read. So a region of NHWC nodes has no transpose inside. */
#ifndef QR_TWINS_H
#define QR_TWINS_H

#include "graph.h"

#define QR_TWINS_SUFFIX "_nhwc"

extern const int64_t qr_twins_to_nhwc[4], qr_twins_to_nchw[4];

typedef struct qr_twins {
    qr_graph *g;
    qr_value **twin; /* by value id: its NHWC twin, or NULL */
    int ntwin;       /* the values the graph had when the pass began */
} qr_twins;

/* 0, or -1 out of memory. */
int qr_twins_init(qr_twins *T, qr_graph *g);
void qr_twins_free(qr_twins *T);

/* Whether v (a value of the graph before the pass) has a twin. */
int qr_twins_has(const qr_twins *T, const qr_value *v);

/* A new value shaped as v with its dims in perm's order (qparams copied), named v's + "_nhwc"; not
 * recorded as v's twin. NULL out of memory. */
qr_value *qr_twins_new_value(qr_twins *T, const qr_value *v, const int64_t *perm);

/* n (a node of the graph before the pass) writes its output's NHWC twin from now on, recorded as
 * the twin; the NCHW value is left without a producer (qr_twins_restore_nchw gives it one if read).
 * The twin, or NULL out of memory. */
qr_value *qr_twins_write_twin(qr_twins *T, qr_node *n);

/* A Transpose by perm from from into to (to's producer). NULL out of memory. */
qr_node *qr_twins_transpose(qr_twins *T, qr_value *from, qr_value *to, const int64_t *perm);

/* v's NHWC twin, made by a Transpose the first time. NULL out of memory. */
qr_value *qr_twins_nhwc_of(qr_twins *T, qr_value *v);

/* Every value of the graph before the pass left without its producer that a live node or the
 * graph's outputs still read: back from its twin by one Transpose. 0, or -1 out of memory. */
int qr_twins_restore_nchw(qr_twins *T);

#endif
