/* MaxPool and AveragePool on NHWC 8-bit activations (the integer graph's
 * layout between its convolutions, quantizer/layout.c): the same integers as
 * conv.c's native pools, a vector of channels at a time (nhwc.h). */
#include "pool_nhwc.h"

#include "conv_geom.h"
#include "nhwc.h"
#include "../parallel.h"

/* The geometry of x (N x H x W x C) read as the pool's NCHW input; a MaxPool may take x as NCHW
 * (attribute x_nchw: the pool after a convolution that stays NCHW, quantizer/layout.c), its
 * output NHWC all the same. */
static qr_status pool_geom(qr_kctx *k, const qr_tensor *x, qr_conv_geom *g)
{
    if (x->ndim != 4 || (x->dtype != QR_U8 && x->dtype != QR_I8))
        return QR_KERR(k, "an NHWC pool takes 4-D u8 or i8 input, not %d-D %s", x->ndim, qr_dtype_name(x->dtype));
    qr_tensor v = *x;
    if (!qr_attr_i(k->node, "x_nchw", 0)) {
        v.dims[1] = x->dims[3];
        v.dims[2] = x->dims[1];
        v.dims[3] = x->dims[2];
    }
    return qr_conv_geom_init(k, &v, NULL, QR_WIN_POOL, g);
}

static int64_t pool_channels(const qr_kctx *k, const qr_tensor *x)
{
    return x->dims[qr_attr_i(k->node, "x_nchw", 0) ? 1 : 3];
}

qr_status qr_pool_infer_nhwc(qr_kctx *k)
{
    qr_conv_geom g;
    const qr_tensor *x = k->in[0];
    if (pool_geom(k, x, &g) != QR_OK)
        return QR_ERR;
    int64_t dims[4] = {x->dims[0], g.small[0], g.small[1], pool_channels(k, x)};
    return qr_set_out(k, 0, x->dtype, 4, dims);
}

typedef struct pool_job {
    const qr_conv_geom *g;
    const qr_tensor *x;
    qr_tensor *y;
    int is_max, include_pad;
    int64_t c, rows; /* channels; output rows per task */
    int64_t img, oyb0, oyb1; /* a band (k->band0/1): its image and output rows, else img < 0 (all rows) */
    uint8_t *scratch; /* x_nchw: per slot, the task's input rows transposed */
    size_t scratch_bytes;
} pool_job;

static void pool_rows(void *arg, int64_t t0, int64_t t1, int slot)
{
    const pool_job *j = arg;
    const qr_conv_geom *g = j->g;
    int64_t c = j->c, per = (j->oyb1 - j->oyb0 + j->rows - 1) / j->rows;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = j->img >= 0 ? j->img : t / per, oy0 = j->oyb0 + t % per * j->rows;
        int64_t oy1 = oy0 + j->rows < j->oyb1 ? oy0 + j->rows : j->oyb1;
        const uint8_t *x = (const uint8_t *)j->x->data + n * g->big_n * c;
        uint8_t *y = (uint8_t *)j->y->data + n * g->small_n * c; /* the image's: the kernels write rows oy0 .. oy1 of it */
        int u8 = j->x->dtype == QR_U8;
        uint8_t *s = j->scratch + (size_t)slot * j->scratch_bytes;
        if (j->scratch && u8)
            qr_nhwc_maxpool_nchw_u8(y, x, c, g, oy0, oy1, s);
        else if (j->scratch)
            qr_nhwc_maxpool_nchw_i8((int8_t *)y, (const int8_t *)x, c, g, oy0, oy1, s);
        else if (j->is_max && u8)
            qr_nhwc_maxpool_u8(y, x, c, g, oy0, oy1);
        else if (j->is_max)
            qr_nhwc_maxpool_i8((int8_t *)y, (const int8_t *)x, c, g, oy0, oy1);
        else if (u8)
            qr_nhwc_avgpool_u8(y, x, c, g, j->include_pad, oy0, oy1);
        else
            qr_nhwc_avgpool_i8((int8_t *)y, (const int8_t *)x, c, g, j->include_pad, oy0, oy1);
    }
}

/* The pool's run plan (op.h qr_kplan_get): its geometry and attributes, from the node and x's shape
 * alone (looked up on every run they were a tenth of the bundled CNN's two MaxPools at batch 1). */
typedef struct pool_plan {
    qr_conv_geom g;
    int64_t c;
    int include_pad, x_nchw;
} pool_plan;

static const char pool_plan_what[] = "NHWC pool's run plan";

qr_status qr_pool_run_nhwc(qr_kctx *k, int is_max)
{
    int fresh;
    pool_plan *p = qr_kplan_get(k, sizeof *p, pool_plan_what, &fresh);
    if (!p)
        return QR_ERR;
    if (fresh) {
        if (pool_geom(k, k->in[0], &p->g) != QR_OK)
            return QR_ERR;
        p->c = pool_channels(k, k->in[0]);
        p->include_pad = (int)qr_attr_i(k->node, "count_include_pad", 0);
        p->x_nchw = qr_attr_i(k->node, "x_nchw", 0) != 0;
        qr_kplan_ready(k, p);
    } else if (k->in[0]->ndim != 4 || (k->in[0]->dtype != QR_U8 && k->in[0]->dtype != QR_I8))
        return QR_KERR(k, "an NHWC pool takes 4-D u8 or i8 input"); /* (the plan's shapes: never) */
    const qr_conv_geom *gp = &p->g;
    qr_conv_geom g = *gp;
    /* tasks of about 16 KB of output rows */
    int64_t c = p->c, row_bytes = g.small[1] * c, rows = row_bytes > 0 ? 16384 / row_bytes : 1;
    pool_job j = {&g, k->in[0], k->out[0], is_max, p->include_pad, c, rows > 1 ? rows : 1, -1, 0, g.small[0]};
    if (g.small[0] <= 0)
        return QR_OK;
    int64_t images = k->in[0]->dims[0];
    if (k->band1 > 0) { /* a band of output rows (one image's, k->band0/1): the rows of x it reads are all
                         * the kernels read of it (a band chain's link holds those alone) */
        int64_t OH = g.small[0];
        j.img = k->band0 / OH;
        j.oyb0 = k->band0 - j.img * OH;
        j.oyb1 = k->band1 - j.img * OH;
        if (j.img >= images || j.oyb0 < 0 || j.oyb1 <= j.oyb0 || j.oyb1 > OH)
            return QR_KERR(k, "an NHWC pool's band of rows [%lld, %lld) is not within one image", (long long)k->band0,
                           (long long)k->band1);
        images = 1;
    }
    if (p->x_nchw) {
        if (!is_max)
            return QR_KERR(k, "only MaxPool reads NCHW input here (x_nchw)");
        j.scratch_bytes = (qr_nhwc_maxpool_nchw_scratch(c, &g, j.rows) + 64) / 64 * 64; /* never 0 */
        if (!(j.scratch = qr_kwork(k, qr_pool_threads(k->pool), (int64_t)j.scratch_bytes, 1,
                                   "NHWC MaxPool's input rows, transposed")))
            return QR_ERR;
    }
    int64_t per = (j.oyb1 - j.oyb0 + j.rows - 1) / j.rows;
    qr_parallel_for_slots(k->pool, images * per, 1, pool_rows, &j);
    return QR_OK;
}

int qr_pool_band_nhwc(qr_kctx *k, qr_band_geom *bg)
{
    const qr_tensor *x = k->n_in >= 1 ? k->in[0] : NULL;
    if (!x || x->ndim != 4 || (x->dtype != QR_U8 && x->dtype != QR_I8))
        return 0;
    qr_conv_geom g;
    qr_error e, *keep = k->err;
    k->err = &e; /* a geometry it cannot take is no band, not an error */
    qr_status st = pool_geom(k, x, &g);
    k->err = keep;
    if (st != QR_OK || g.r != 2)
        return 0;
    /* an NCHW input (x_nchw) is no NHWC rows of a node before it: in_rows 0, the pool only starts a chain */
    int nchw = qr_attr_i(k->node, "x_nchw", 0) != 0;
    *bg = (qr_band_geom){x->dims[0], g.small[0], nchw ? 0 : g.big[0], g.stride[0], g.pad_begin[0],
                         (g.kernel[0] - 1) * g.dilation[0]};
    return 1;
}
