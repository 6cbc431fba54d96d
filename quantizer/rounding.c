#include "rounding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gram.h"

void qr_round_gram(qr_pool *pool, const float *x, int64_t rows, int64_t k, float *h)
{
    if (rows <= 0) {
        memset(h, 0, sizeof *h * (size_t)(k * k));
        return;
    }
    qr_gram_xtx(pool, x, rows, k, h);
    float inv = (float)(1.0 / (double)rows);
    for (int64_t i = 0; i < k * k; i++)
        h[i] *= inv;
}

void qr_round_gram_add(const float *x, int64_t rows, int64_t k, double *h, float *tmp)
{
    if (rows <= 0)
        return;
    qr_gram_xtx(NULL, x, rows, k, tmp);
    for (int64_t i = 0; i < k * k; i++)
        h[i] += tmp[i];
}

/* Coordinate descent on one channel from round-to-nearest; g holds H dw at nearest on entry, st
 * (zeroed) gets the channel's own sums. */
static qr_status channel(const qr_round_ask *ask, const float *h, const double *mu, int64_t k, const float *w,
                         const float *near, const float *alt, float *out, double *g, qr_round_stats *st, qr_error *e)
{
    double f = 0, m = 0;
    for (int64_t i = 0; i < k; i++) {
        double dw = (double)near[i] - (double)w[i];
        f += dw * g[i];
        m += dw * mu[i];
        out[i] = near[i];
    }
    st->before += f;
    st->mean_before += m * m;
    qrl_rt rt;
    qr_rt_init(&rt);
    int sweep = 0, moved = 1;
    for (; moved && sweep < ask->max_sweeps; sweep++) {
        moved = 0;
        for (int64_t i = 0; i < k; i++) {
            float other = out[i] == near[i] ? alt[i] : near[i];
            if (other == out[i])
                continue;
            double d = (double)other - (double)out[i], hii = h[i * k + i];
            double change = 2 * d * g[i] + d * d * hii, dm = 2 * d * mu[i] * m + d * d * mu[i] * mu[i];
            double yes = ask->flip(&rt, ask->params, sweep, change, dm, d * d * hii);
            if (qr_rt_status(&rt, e) != QR_OK)
                return QR_ERR;
            if (!(yes > 0))
                continue;
            const float *hi = h + i * k; /* row i is column i: H is symmetric */
            for (int64_t t = 0; t < k; t++)
                g[t] += d * hi[t];
            f += change;
            m += d * mu[i];
            out[i] = other;
            moved++;
        }
    }
    st->capped += moved > 0;
    st->sweeps = sweep > st->sweeps ? sweep : st->sweeps;
    for (int64_t i = 0; i < k; i++)
        st->moved += out[i] != near[i];
    st->after += f;
    st->mean_after += m * m;
    return QR_OK;
}

/* The channels of a group on the pool's threads: each slot its own H dw and error, each channel
 * its own stats, summed in channel order after (the same sums at any thread count). */
typedef struct group_job {
    const qr_round_ask *ask;
    const float *h, *w, *near, *alt, *g0;
    const double *mu;
    float *out;
    int64_t k;
    double *g;            /* per slot, k */
    qr_round_stats *per;  /* per channel */
    int *failed;          /* per channel: the slot whose error says why, or -1 */
    qr_error *errs;       /* per slot */
} group_job;

static void group_range(void *arg, int64_t begin, int64_t end, int slot)
{
    group_job *j = arg;
    int64_t k = j->k;
    double *g = j->g + slot * k;
    for (int64_t o = begin; o < end; o++) {
        for (int64_t i = 0; i < k; i++)
            g[i] = j->g0[o * k + i];
        if (channel(j->ask, j->h, j->mu, k, j->w + o * k, j->near + o * k, j->alt + o * k, j->out + o * k, g,
                    &j->per[o], &j->errs[slot]) != QR_OK) {
            j->failed[o] = slot;
            return; /* the slot's error holds this channel's message */
        }
    }
}

qr_status qr_round_group(const qr_round_ask *ask, const float *h, const double *mu, int64_t k, int64_t channels,
                         const float *w, const float *near, const float *alt, float *out, qr_round_stats *st,
                         qr_error *e)
{
    int slots = qr_pool_threads(ask->pool);
    /* H dw of every channel at once: (channels x k) dw times H, one GEMM */
    float *dw = malloc(sizeof *dw * (size_t)(channels * k + 1)), *g0 = malloc(sizeof *g0 * (size_t)(channels * k + 1));
    group_job j = {.ask = ask, .h = h, .w = w, .near = near, .alt = alt, .g0 = g0, .mu = mu, .out = out, .k = k};
    j.g = malloc(sizeof *j.g * (size_t)(slots * k + 1));
    j.per = calloc((size_t)channels + 1, sizeof *j.per);
    j.failed = calloc((size_t)channels + 1, sizeof *j.failed);
    j.errs = calloc((size_t)slots + 1, sizeof *j.errs);
    qr_status s = QR_OK;
    if (!dw || !g0 || !j.g || !j.per || !j.failed || !j.errs) {
        s = qr_errorf(e, "out of memory");
    } else {
        for (int64_t i = 0; i < channels * k; i++)
            dw[i] = near[i] - w[i];
        qr_gram_gemm(ask->pool, dw, k, 1, h, g0, channels, k, k);
        for (int64_t o = 0; o < channels; o++)
            j.failed[o] = -1;
        qr_parallel_for_slots(ask->pool, channels, 1, group_range, &j);
        for (int64_t o = 0; o < channels && s == QR_OK; o++) {
            if (j.failed[o] >= 0) { /* the first failing channel's message, whichever slot ran it */
                s = qr_errorf(e, "%s", j.errs[j.failed[o]].msg);
                break;
            }
            const qr_round_stats *p = &j.per[o];
            st->before += p->before, st->after += p->after;
            st->mean_before += p->mean_before, st->mean_after += p->mean_after;
            st->moved += p->moved, st->capped += p->capped;
            st->sweeps = p->sweeps > st->sweeps ? p->sweeps : st->sweeps;
        }
    }
    free(dw), free(g0), free(j.g), free(j.per), free(j.failed), free(j.errs);
    return s;
}
