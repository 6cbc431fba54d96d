#include "histogram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"

_Static_assert(QR_HIST_MAX_BINS == QRL_MAX_HIST_BINS, "the checker's bound on bins is the runtime's");

qr_status qr_hist_init(qr_hist *h, int64_t bins, int is_abs, qr_error *e)
{
    memset(h, 0, sizeof *h);
    if (bins < 2 || bins > QR_HIST_MAX_BINS || bins % 2)
        return qr_errorf(e, "a histogram needs an even number of bins from 2 to %d, not %lld", QR_HIST_MAX_BINS,
                         (long long)bins);
    h->count = calloc((size_t)bins, sizeof *h->count);
    if (!h->count)
        return qr_errorf(e, "out of memory for a %lld-bin histogram", (long long)bins);
    h->bins = bins;
    h->is_abs = is_abs;
    h->e = INT32_MIN;
    h->min = INFINITY;
    h->max = -INFINITY;
    return QR_OK;
}

void qr_hist_free(qr_hist *h)
{
    free(h->count);
    memset(h, 0, sizeof *h);
}

double qr_hist_hi(const qr_hist *h)
{
    return h->e == INT32_MIN ? 0 : ldexp(1.0, h->e);
}

double qr_hist_lo(const qr_hist *h)
{
    return h->is_abs ? 0 : -qr_hist_hi(h);
}

double qr_hist_width(const qr_hist *h)
{
    return (qr_hist_hi(h) - qr_hist_lo(h)) / (double)h->bins;
}

double qr_hist_bin(const qr_hist *h, int64_t i)
{
    return i >= 0 && i < h->bins ? h->count[i] : 0;
}

double qr_hist_edge(const qr_hist *h, int64_t i)
{
    return qr_hist_lo(h) + (double)i * qr_hist_width(h);
}

/* Grows the range to 2^e (e > h->e), in place: with s = e - h->e, the values
 * of old bin k (counted from the bin holding 0) land in new bin floor(k / 2^s).
 * Bins move toward the one holding 0, so walking outward from it never
 * overwrites a count not yet moved. */
static void grow(qr_hist *h, int e)
{
    if (h->e == INT32_MIN) { /* only zeros so far: they stay in the bin holding 0 */
        h->e = e;
        return;
    }
    int s = e - h->e > 62 ? 62 : e - h->e;
    int64_t n = h->bins, zero = h->is_abs ? 0 : n / 2;
    double *c = h->count;
    for (int64_t i = zero; i < n; i++) {
        double v = c[i];
        c[i] = 0;
        c[zero + ((i - zero) >> s)] += v;
    }
    for (int64_t i = zero - 1; i >= 0; i--) {
        int64_t k = zero - i; /* bin i is at offset -k: floor(-k / 2^s) = -ceil(k / 2^s) */
        double v = c[i];
        c[i] = 0;
        c[zero - ((k + ((int64_t)1 << s) - 1) >> s)] += v;
    }
    h->e = e;
}

/* The smallest e with |v| < 2^e (or == for the top edge, kept in the last bin). */
static int exponent_for(double a)
{
    int e;
    double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    return m == 0.5 ? e - 1 : e;
}

static int64_t bin_of(const qr_hist *h, double v)
{
    double lo = qr_hist_lo(h), w = qr_hist_width(h);
    int64_t i = w > 0 ? (int64_t)floor((v - lo) / w) : (h->is_abs ? 0 : h->bins / 2);
    return i < 0 ? 0 : i >= h->bins ? h->bins - 1 : i;
}

void qr_hist_add_f32(qr_hist *h, const float *x, int64_t n)
{
    double amax = 0, lo = h->min, hi = h->max;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], a = fabs(v);
        if (isfinite(a) && a > amax)
            amax = a;
        lo = v < lo ? v : lo; /* NaN compares false */
        hi = v > hi ? v : hi;
    }
    h->min = lo;
    h->max = hi;
    if (amax > 0) {
        int e = exponent_for(amax);
        if (h->e == INT32_MIN || e > h->e)
            grow(h, e);
    }
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        if (!isfinite(v)) {
            h->skipped++;
            continue;
        }
        h->count[bin_of(h, h->is_abs ? fabs(v) : v)]++;
        h->total++;
    }
}

qr_status qr_hist_merge(qr_hist *h, const qr_hist *o, qr_error *e)
{
    if (o->bins != h->bins || o->is_abs != h->is_abs)
        return qr_errorf(e, "cannot merge a %lld-bin histogram into a %lld-bin one", (long long)o->bins,
                         (long long)h->bins);
    qr_hist tmp = *o;
    tmp.count = malloc(sizeof *tmp.count * (size_t)o->bins);
    if (!tmp.count)
        return qr_errorf(e, "out of memory merging histograms");
    memcpy(tmp.count, o->count, sizeof *tmp.count * (size_t)o->bins);
    if (tmp.e != INT32_MIN && (h->e == INT32_MIN || tmp.e > h->e))
        grow(h, tmp.e);
    if (h->e != INT32_MIN && (tmp.e == INT32_MIN || h->e > tmp.e))
        grow(&tmp, h->e);
    for (int64_t i = 0; i < h->bins; i++)
        h->count[i] += tmp.count[i];
    h->total += o->total;
    h->skipped += o->skipped;
    h->min = o->min < h->min ? o->min : h->min;
    h->max = o->max > h->max ? o->max : h->max;
    free(tmp.count);
    return QR_OK;
}

double qr_hist_quantile(const qr_hist *h, double q)
{
    if (h->total <= 0)
        return 0;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    double target = q * h->total, acc = 0;
    for (int64_t i = 0; i < h->bins; i++) {
        if (acc + h->count[i] >= target && h->count[i] > 0) {
            double frac = (target - acc) / h->count[i];
            return qr_hist_edge(h, i) + frac * qr_hist_width(h);
        }
        acc += h->count[i];
    }
    return qr_hist_hi(h);
}
