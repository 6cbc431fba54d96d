/* Histograms for calibration that merge exactly. The range is [0, 2^e] for
 * |x| histograms and [-2^e, 2^e] for signed ones, with a fixed bin count;
 * when a larger value arrives, e grows and groups of bins are summed (the
 * new bins are unions of old ones, so no count is split). Two histograms
 * merge by growing the smaller range the same way and adding counts: the
 * result does not depend on how the data was split or in which order it
 * came, so threads and processes calibrate to the same numbers as one run. */
#ifndef QR_HISTOGRAM_H
#define QR_HISTOGRAM_H

#include <stdint.h>

#include "status.h"

#define QR_HIST_MAX_BINS (1 << 24)

typedef struct qr_hist {
    int64_t bins;   /* even */
    int is_abs;     /* |x| histogram over [0, 2^e] */
    int e;          /* range exponent; INT32_MIN while only zeros were seen */
    double *count;  /* bins entries */
    double total;   /* values counted (non-finite values are not) */
    double skipped; /* NaN and infinities seen */
    double min, max; /* the smallest and largest value added, before |x| (NaN ignored,
                      * infinities kept, as tensor min/max); inf and -inf before any */
} qr_hist;

/* bins must be even, 2 .. QR_HIST_MAX_BINS. */
qr_status qr_hist_init(qr_hist *h, int64_t bins, int is_abs, qr_error *e);
void qr_hist_free(qr_hist *h);
void qr_hist_add_f32(qr_hist *h, const float *x, int64_t n);
/* Adds o's counts into h (same bins and kind). */
qr_status qr_hist_merge(qr_hist *h, const qr_hist *o, qr_error *e);

double qr_hist_lo(const qr_hist *h);
double qr_hist_hi(const qr_hist *h);
double qr_hist_width(const qr_hist *h);
double qr_hist_bin(const qr_hist *h, int64_t i);   /* 0 outside [0, bins) */
double qr_hist_edge(const qr_hist *h, int64_t i);  /* left edge of bin i */
/* The value below which a fraction q (0..1) of the counted values lie,
 * interpolated linearly inside its bin. 0 for an empty histogram. */
double qr_hist_quantile(const qr_hist *h, double q);

#endif
