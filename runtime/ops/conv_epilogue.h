/* An integer convolution whose int32 outputs go to an epilogue instead of
 * memory: ConvInteger's accumulator, handed over in blocks of rows (output
 * channels) by columns (output positions) while they are in cache, for the
 * epilogue to write y. The quantizer's fused conv nodes run the recipe's
 * tile kernels this way (quantizer/intgraph.c). */
#ifndef QR_CONV_EPILOGUE_H
#define QR_CONV_EPILOGUE_H

#include <stdint.h>

#include "../op.h"
#include "conv_geom.h"
#include "igemm.h"
#include "requant_prog.h"

/* One block of image n's accumulator: element (r, k) is acc[r * acc_rs + k], output channel
 * c0 + r, and goes to y's element y_off + r * y_rs + k, y the node's output (N x M x spatial), or
 * when y_block is set, that buffer (rows x y_rs elements: an NHWC convolution turns it into its
 * output's rows itself). */
typedef struct qr_acc_block {
    const int32_t *acc;
    int64_t acc_rs, rows, cols, c0, y_off, y_rs;
    void *y_block;
} qr_acc_block;

/* Called from worker threads, on disjoint blocks; an error stops the convolution (its message
 * goes to e, which the caller owns for this call). */
typedef struct qr_acc_epilogue {
    qr_status (*run)(const struct qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e);
    void *user;
    /* A second, element-wise stage (NHWC only; NULL: none): once a block's y is made, elements
     * [off, off + len) of the flat y, in y_rows (y_size bytes each), go to it, and it writes the
     * node's output there (a residual Add after the convolution). */
    qr_status (*then)(const struct qr_acc_epilogue *ep, const void *y_rows, int64_t off, int64_t len, qr_error *e);
    size_t y_size;
    /* Blocks with channels last (NHWC only; NULL: none, run gets them turned): element (r, k) is
     * position r's channel c0 + k, the tile kernel's channels-last form (the recipe's per-channel
     * values were computed once, into tables, before the convolution ran). */
    qr_status (*run_rows)(const struct qr_acc_epilogue *ep, const qr_acc_block *b, qr_error *e);
    /* The same epilogue's vector form (compiler/vecmap.h; NULL: none) and its tables, one int32
     * per output channel each: a dense NHWC convolution may run it fused into a kernel
     * specialized to its shape (qr_iconv_specialized_ep) instead of run_rows (with a second
     * stage, into y rows the stage then reads). */
    const char *vprog;
    const int32_t *const *vtabs;
    /* The epilogue and the second stage joined into one program (NULL: none), which reads the
     * stage's other tensor, skip (channels last, y's shape and 8-bit type), and writes the node's
     * output: a dense NHWC convolution whose kernel specialized to its shape takes it runs neither
     * run_rows nor then (the residual Add in the kernel's registers). jtabs: its tables. */
    const char *jprog;
    const int32_t *const *jtabs;
    const uint8_t *skip;
} qr_acc_epilogue;

/* ConvInteger's checks and output shape, y of type t. x, x_zero, w, w_zero: ConvInteger's inputs
 * (zero points may be NULL); its attributes are k->node's. */
qr_status qr_convint_infer_as(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                              const qr_tensor *wzp, qr_dtype t);

/* ConvInteger of these inputs with every block of its accumulator handed to ep, which writes
 * k->out[0]. wconst: w and x_zero are graph constants (the packed weights are kept). */
qr_status qr_convint_run_epilogue(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                                  const qr_tensor *wzp, int wconst, const qr_acc_epilogue *ep);

/* The same on NHWC activations: x is N x H x W x C, the output N x OH x OW x M (ConvInteger's
 * attributes, 2-D only; group 1 with weight zero point 0, or depthwise). The blocks the epilogue
 * gets are as above (rows are channels), each with y_block set. */
qr_status qr_convint_infer_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                                const qr_tensor *wzp, qr_dtype t);

/* The most taps whose window offsets a qr_nhwc_plan keeps (a 4 x 4 window): 9 RUN_BLOCK + 1 times. */
#define QR_NHWC_PLAN_TAPS 16

/* What qr_convint_run_nhwc derives from its node's attributes and its operands' shapes alone, kept
 * in the node's run plan (op.h qr_kplan_get) across runs of one shape: the geometry, the checks of
 * attributes and of the weights' zero point, the specialized kernels looked up (by shape and
 * epilogue program, under the JIT's lock), the windows' tap offsets. The caller zeroes it when the
 * plan is fresh and sets wzp_fixed; the convolution fills the rest on that run. */
typedef struct qr_nhwc_plan {
    int ready;     /* filled on an earlier run of these shapes */
    int wzp_fixed; /* (the caller's) the weights' zero point is the same on every run of the executor */
    int wzp_zero;  /* it was checked to be all zero */
    int depthwise, x_nchw, gather, taps_kept, one_by_one;
    qr_conv_geom g;
    int64_t k4, cs, oy0, oy1, ox0, ox1;
    qr_iconv_fn fn;                    /* NULL: none yet (asked again: the JIT may still compile it) */
    const char *ep_prog[2];            /* the epilogue programs fused kernels were found for */
    qr_iconv_ep_fn ep_fn[2];
    const char *rows_prog;             /* the program the rows epilogue was found for */
    qr_rows_ep_fn rows_fn;
    const char *rq_prog; /* depthwise: the program rq_ok and rq were matched from (qr_rqp_match) */
    int rq_ok;
    qr_rqp rq;
    int64_t tap_off[9 * QR_NHWC_PLAN_TAPS]; /* the taps' offsets, then RUN_BLOCK windows' (window_setup) */
} qr_nhwc_plan;

/* plan: the node's run plan (qr_nhwc_plan), or NULL: everything derived on this run. */
qr_status qr_convint_run_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *xzp, const qr_tensor *w,
                              const qr_tensor *wzp, int wconst, const qr_acc_epilogue *ep, qr_nhwc_plan *plan);
/* Whether qr_convint_run_nhwc of these operands can compute a band of output rows alone
 * (k->band0/1), and its geometry (op.h); one whose input is read NCHW only as a chain's first
 * node (in_rows 0). */
int qr_convint_band_nhwc(qr_kctx *k, const qr_tensor *x, const qr_tensor *w, qr_band_geom *bg);

/* MatMulInteger's checks (8-bit operands) and output shape, y of type t. */
qr_status qr_matmulint_infer_as(qr_kctx *k, const qr_tensor *a, const qr_tensor *azp, const qr_tensor *b,
                                 const qr_tensor *bzp, qr_dtype t);
/* MatMulInteger of these inputs (8-bit, as its int32 accumulator takes them) with the accumulator
 * handed to ep->run_rows in blocks of whole rows of the output's matrices ([rows, N]: channels
 * last; y_off the block's first element) while they are in cache, so no int32 tensor is made
 * where the microkernels run; elsewhere (the GEMV, the portable loops) one block of all rows.
 * bconst: b and its zero point are graph constants (the packing is kept). */
qr_status qr_matmulint_run_epilogue(qr_kctx *k, const qr_tensor *a, const qr_tensor *azp, const qr_tensor *b,
                                    const qr_tensor *bzp, int bconst, const qr_acc_epilogue *ep);

#endif
