/* Timing of the NHWC depthwise kernel (runtime/ops/nhwc.c) on MobileNetV2's 3x3 depthwise
 * layers, one thread, against the NCHW path (ConvInteger with one group per channel through the
 * op table, serially: quant.c's depthwise runs) on the same layer in the same run. Not a test.
 *   make && cc -O2 -Iinclude -Iruntime -Ibuild/gen tools/nhwc_dw_timing.c build/libqrl.a \
 *       -lprotobuf-c -L/usr/lib/gcc/x86_64-linux-gnu/12 -lgccjit -ldl -lm -lpthread -o build/nhwc_dw_timing
 *   build/nhwc_dw_timing
 * Prints GMAC/s (OH * OW * C * 9 multiply-accumulates per call) over the thread's CPU time (the machine
 * is shared), the best of 7 rounds of >= 0.1 s. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op.h"
#include "ops/nhwc.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct layer {
    int64_t H, W, C, stride;
} layer;

typedef struct run_ctx {
    const layer *l;
    qr_conv_geom g;
    uint8_t *xh, *xn;
    int8_t *w;
    int32_t *wk, *init, *acc;
    uint8_t xz;
    const qr_op_def *def;
} run_ctx;

static void run_nhwc(run_ctx *r)
{
    qr_nhwc_dw_u8(r->acc, r->l->C, r->xh, r->l->C, &r->g, r->wk, r->init, 0, r->xz, 0, r->g.small[0], 0);
}

static void run_nchw(run_ctx *r)
{
    const layer *l = r->l;
    int64_t ks[2] = {3, 3}, st[2] = {l->stride, l->stride}, pd[4] = {1, 1, 1, 1};
    qr_attr a[4] = {{.name = "kernel_shape", .kind = QR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "strides", .kind = QR_ATTR_INTS, .n = 2, .ints = st},
                    {.name = "pads", .kind = QR_ATTR_INTS, .n = 4, .ints = pd},
                    {.name = "group", .kind = QR_ATTR_INT, .i = l->C}};
    qr_tensor tx = {.dtype = QR_U8, .ndim = 4, .dims = {1, l->C, l->H, l->W}, .data = r->xn};
    qr_tensor tw = {.dtype = QR_I8, .ndim = 4, .dims = {l->C, 1, 3, 3}, .data = r->w};
    qr_tensor txz = {.dtype = QR_U8, .ndim = 0, .data = &r->xz};
    const qr_tensor *in[3] = {&tx, &tw, &txz};
    qr_node n = {.name = "dw", .op = "ConvInteger", .domain = "", .opset = 17, .n_in = 3, .n_out = 1, .n_attr = 4,
                 .attr = a, .def = r->def};
    qr_tensor y = {.dtype = QR_I32, .ndim = 4, .dims = {1, l->C, r->g.small[0], r->g.small[1]}, .data = r->acc};
    qr_tensor *outs[1] = {&y};
    qr_error e;
    static qr_kwork_arena work; /* kept across calls, as the executor keeps a node's */
    qr_kctx k = {.node = &n, .opset = 17, .n_in = 3, .n_out = 1, .in = in, .out = outs, .err = &e, .work = &work};
    if (r->def->run(&k) != QR_OK) {
        fprintf(stderr, "ConvInteger: %s\n", e.msg);
        exit(1);
    }
}

static double gmacs(run_ctx *r, void (*fn)(run_ctx *))
{
    double macs = (double)(r->g.small[0] * r->g.small[1] * r->l->C * 9), best = 0;
    for (int round = 0; round < 7; round++) {
        long n = 0;
        double t0 = now(), t;
        do {
            fn(r);
            n++;
        } while ((t = now() - t0) < 0.1);
        double v = macs * (double)n / t * 1e-9;
        best = v > best ? v : best;
    }
    return best;
}

int main(void)
{
    static const layer layers[] = {{112, 112, 32, 1}, {112, 112, 96, 2}, {56, 56, 144, 2}, {56, 56, 144, 1},
                                   {28, 28, 192, 1}, {14, 14, 384, 1}, {14, 14, 576, 1}, {7, 7, 960, 1}};
    unsigned s = 1;
    printf("%-22s %10s %10s\n", "layer (HxWxC stride)", "NHWC", "NCHW op");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const layer *l = &layers[i];
        run_ctx r = {.l = l, .xz = 3, .def = qr_op_find("", "ConvInteger")};
        qr_conv_geom *g = &r.g;
        g->r = 2;
        for (int d = 0; d < 2; d++) {
            g->big[d] = d ? l->W : l->H;
            g->kernel[d] = 3, g->stride[d] = l->stride, g->dilation[d] = 1, g->pad_begin[d] = g->pad_end[d] = 1;
            g->small[d] = (g->big[d] - 1) / l->stride + 1;
        }
        g->kernel_n = 9;
        int64_t n = l->H * l->W * l->C, on = g->small[0] * g->small[1] * l->C;
        r.xh = malloc((size_t)n), r.xn = malloc((size_t)n), r.w = malloc((size_t)(9 * l->C));
        r.wk = malloc((size_t)(9 * l->C) * sizeof(int32_t)), r.init = calloc((size_t)l->C, sizeof(int32_t));
        r.acc = malloc((size_t)on * sizeof(int32_t));
        for (int64_t j = 0; j < n; j++)
            r.xh[j] = r.xn[j] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
        for (int64_t j = 0; j < 9 * l->C; j++)
            r.wk[j] = r.w[j] = (int8_t)((s = s * 1103515245u + 12345u) >> 16);
        printf("%4lldx%-4lldx%-4lld s%lld      %10.1f %10.1f\n", (long long)l->H, (long long)l->W, (long long)l->C,
               (long long)l->stride, gmacs(&r, run_nhwc), gmacs(&r, run_nchw));
        free(r.xh), free(r.xn), free(r.w), free(r.wk), free(r.init), free(r.acc);
    }
    return 0;
}
