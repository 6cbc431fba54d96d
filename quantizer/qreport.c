#include "qreport.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fileio.h"
#include "mixed.h"
#include "qparams.h"
#include "text.h"

/* s inside a JSON string literal, or as HTML text: valid UTF-8 either way (runtime/text.h). */
static void esc(FILE *f, const char *s, int json)
{
    if (json) {
        qr_fput_json_chars(f, s);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int len = qr_utf8_len(p);
        if (len > 1)
            fwrite(p, 1, (size_t)len, f);
        else if (len == 0 || *p < 0x20 || *p == 0x7f)
            fputs("&#xfffd;", f);
        else if (*p == '<')
            fputs("&lt;", f);
        else if (*p == '>')
            fputs("&gt;", f);
        else if (*p == '&')
            fputs("&amp;", f);
        else if (*p == '"')
            fputs("&quot;", f);
        else
            fputc(*p, f);
        p += len > 1 ? len : 1;
    }
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

/* Whether the recipe's accumulator is narrow (accumulate = iN, N < 32, or overflow = saturate); if
 * so, says which to f, as a JSON field or an HTML paragraph. i32 wrapping reports say nothing. */
static int acc_narrow(const qr_quantized *q, FILE *f, int json)
{
    if (!q->acc_bits || (q->acc_bits == 32 && !q->acc_saturate))
        return 0;
    const char *how = q->acc_saturate ? "saturate" : "wrap";
    if (json)
        fprintf(f, "  \"accumulator\": {\"bits\": %d, \"overflow\": \"%s\"},\n", q->acc_bits, how);
    else
        fprintf(f, "<p>Accumulators: i%d, partial sums beyond the range %s (accumulate = i%d, overflow = %s); the "
                   "overflows are counted on the measured samples.</p>\n", q->acc_bits,
                q->acc_saturate ? "saturate" : "wrap around", q->acc_bits, how);
    return 1;
}

/* Choice c's figure of a layer in a JSON list: null for NaN (the choice is not open to it). */
static void choice_num(FILE *f, int c, double v, int whole)
{
    if (isnan(v))
        fprintf(f, "%snull", c ? ", " : "");
    else
        fprintf(f, whole ? "%s%.0f" : "%s%.17g", c ? ", " : "", v);
}

/* Mixed precision as JSON: the choices, each layer's bytes and output error energy per choice (the
 * measurements the assignment read), the points shown and which one ships. */
static void json_mixed(FILE *f, const qr_mixed_info *m)
{
    fprintf(f, "  \"mixed\": {\"budget\": {\"kind\": \"%s\", \"value\": %.17g}, \"front\": %d, \"signal\": %.17g, \"rest\": %.17g,\n"
               "    \"choose_samples\": %lld, \"heldout_samples\": %lld, \"measured_samples\": %lld, \"choices\": [",
            m->budget_kind, m->budget, m->front, m->signal, m->rest, (long long)m->choose_samples, (long long)m->heldout_samples,
            (long long)m->measured_samples);
    for (int c = 0; c < m->nchoices; c++)
        fprintf(f, "%s\"%s\"", c ? ", " : "", m->choices[c]);
    fprintf(f, "],\n    \"layers\": [\n");
    for (int l = 0; l < m->nlayers; l++) {
        const qr_mixed_layer *ly = &m->layers[l];
        fprintf(f, "      {\"weight\": \"");
        esc(f, ly->name, 1);
        fprintf(f, "\", \"node\": \"");
        esc(f, ly->node, 1);
        fprintf(f, "\", \"weights\": %.0f, \"macs\": %.17g, \"bytes\": [", ly->weights, ly->macs);
        for (int c = 0; c < m->nchoices; c++) /* null: a choice not open to this layer */
            choice_num(f, c, ly->bytes[c], 1);
        fprintf(f, "], \"error\": [");
        for (int c = 0; c < m->nchoices; c++)
            choice_num(f, c, ly->err2[c], 0);
        fprintf(f, "]");
        for (int c = 0; ly->bits && c < m->nchoices; c++) {
            fprintf(f, "%s", c ? "" : ", \"bits\": [");
            choice_num(f, c, ly->bits[c], 0);
        }
        fprintf(f, "%s}%s\n", ly->bits ? "]" : "", l + 1 < m->nlayers ? "," : "");
    }
    fprintf(f, "    ],\n    \"points\": [\n");
    for (int i = 0; i < m->npoints; i++) {
        const qr_mixed_point *p = &m->points[i];
        fprintf(f, "      {\"bytes\": %.0f, \"bits\": %.6g, \"predicted_sqnr_db\": ", p->bytes, p->bits);
        num(f, p->predicted);
        fprintf(f, ", \"measured_sqnr_db\": ");
        num(f, p->measured);
        fprintf(f, ", \"chosen\": %s, \"uniform\": %d, \"pick\": [", p->chosen ? "true" : "false", p->uniform);
        for (int l = 0; l < m->nlayers; l++)
            fprintf(f, "%s%d", l ? ", " : "", p->pick[l]);
        fprintf(f, "]}%s\n", i + 1 < m->npoints ? "," : "");
    }
    fprintf(f, "    ]},\n");
}

/* Mixed precision in the HTML: the front's shown points as an SVG plot (what the budget bounds,
 * bits or bytes, across; SQNR up:
 * predicted as circles, measured as squares; the chosen one filled red, the uniform ones labelled)
 * and a table. */
static void html_mixed(FILE *f, const qr_mixed_info *m)
{
    fprintf(f, "<h2>Mixed precision</h2>\n<p>Budget %s(%g) over %d %s; the Pareto front of %s against predicted "
               "output SQNR has %d points (predicted from each layer's own error on %lld samples; measured by running "
               "the assignment on %lld %s).</p>\n",
            m->budget_kind, m->budget, m->nlayers, m->layers && m->nlayers && m->layers[0].bits ? "layers" : "MatMul/Gemm weights",
            m->layers && m->nlayers && m->layers[0].bits ? "the layers' bits" : "model bytes", m->front, (long long)m->choose_samples,
            (long long)m->measured_samples, m->heldout_samples ? "held-out samples" : "calibration samples");
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < m->npoints; i++) {
        const qr_mixed_point *p = &m->points[i];
        x0 = fmin(x0, p->key), x1 = fmax(x1, p->key);
        double ys[2] = {p->predicted, p->measured};
        for (int k = 0; k < 2; k++)
            if (isfinite(ys[k]))
                y0 = fmin(y0, ys[k]), y1 = fmax(y1, ys[k]);
    }
    if (!(x1 > x0))
        x1 = x0 + 1;
    if (!(y1 > y0))
        y0 = isfinite(y0) ? y0 - 1 : 0, y1 = y0 + 2;
    const int w = 640, h = 320, l = 70, b = 40;
    double sx = (w - l - 20) / (x1 - x0), sy = (h - b - 20) / (y1 - y0);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-size=\"11\">\n", w, h);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/><line x1=\"%d\" y1=\"10\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"#333\"/>\n", l, h - b, w - 10, h - b, l, l, h - b);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s (%.4g to %.4g)</text>\n", (w + l) / 2, h - 8,
            !strcmp(m->budget_kind, "bits") ? "average bits by MACs" : "model bytes", x0, x1);
    fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">output SQNR dB</text>\n",
            (h - b) / 2, (h - b) / 2);
    for (int k = 0; k <= 4; k++) {
        double y = y0 + (y1 - y0) * k / 4;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", l - 4, h - b - (y - y0) * sy + 4, y);
    }
    for (int i = 0; i < m->npoints; i++) {
        const qr_mixed_point *p = &m->points[i];
        double x = l + (p->key - x0) * sx;
        const char *fill = p->chosen ? "#c0392b" : p->uniform >= 0 ? "#7d3c98" : "#2e86c1";
        if (isfinite(p->predicted))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" stroke=\"%s\"><title>%.0f bytes, "
                       "predicted %.2f dB</title></circle>\n", x, h - b - (p->predicted - y0) * sy, fill, p->bytes,
                    p->predicted);
        if (isfinite(p->measured))
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"><title>%.0f bytes, "
                       "measured %.2f dB</title></rect>\n", x - 3.5, h - b - (p->measured - y0) * sy - 3.5, fill,
                    p->bytes, p->measured);
        if (p->uniform >= 0 || p->chosen)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s%s</text>\n", x + 6, h - b - (p->measured - y0) * sy - 6,
                    p->chosen ? "chosen" : "all ", p->chosen ? "" : m->choices[p->uniform]);
    }
    fprintf(f, "</svg>\n<p>Circles: predicted; squares: measured. Red: the chosen assignment; purple: every layer "
               "the same type.</p>\n<table><tr><th>bytes</th><th>avg bits (by MACs)</th><th>predicted dB</th>"
               "<th>measured dB</th><th>layers</th></tr>\n");
    for (int i = 0; i < m->npoints; i++) {
        const qr_mixed_point *p = &m->points[i];
        fprintf(f, "<tr><td>%.0f</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td style=\"text-align:left\">", p->bytes,
                p->bits, p->predicted, p->measured);
        for (int c = 0, first = 1; c < m->nchoices; c++) {
            int n = 0;
            for (int k = 0; k < m->nlayers; k++)
                n += p->pick[k] == c;
            if (n)
                fprintf(f, "%s%d %s", first ? "" : ", ", n, m->choices[c]), first = 0;
        }
        fprintf(f, "%s%s</td></tr>\n", p->uniform >= 0 ? " (uniform)" : "", p->chosen ? " <b>(chosen)</b>" : "");
    }
    fprintf(f, "</table>\n");
}

static void write_json(FILE *f, const qr_quantized *q, const char *model)
{
    fprintf(f, "{\n  \"model\": \"");
    esc(f, model, 1);
    fprintf(f, "\",\n  \"recipe\": \"");
    esc(f, q->recipe ? q->recipe : "", 1);
    fprintf(f, "\",\n  \"calibration_samples\": %lld,\n  \"calibration_ms\": ", (long long)q->samples);
    num(f, q->calib_ms);
    fprintf(f, ",\n  \"fp32_pass_ms\": ");
    num(f, q->fp32_ms);
    if (q->fp32_samples > 0) /* the pass ran on fewer (for the calibrate figure alone): fp32_pass_ms scaled */
        fprintf(f, ",\n  \"fp32_pass_samples\": %lld", (long long)q->fp32_samples);
    fprintf(f, ",\n  \"batch\": %d", q->batch);
    fprintf(f, ",\n  \"nodes\": {\"pattern\": %d, \"affine\": %d, \"f32\": %d},\n  \"fallbacks\": %d,\n"
               "  \"widened\": %d,\n", q->nodes_pattern, q->nodes_affine, q->nodes_float, q->fallbacks, q->widened);
    fprintf(f, "  \"validate_samples\": %lld,\n  \"validate_skipped\": %lld,\n  \"output_sqnr_db\": ",
            (long long)q->validate_samples, (long long)q->validate_skipped);
    num(f, q->output_sqnr);
    if (q->grad_passes > 0) /* rank = grad's passes: what their executors kept of the weights at most */
        fprintf(f, ",\n  \"grad\": {\"passes\": %lld, \"packing_bytes\": %lld, \"held_bytes\": %lld, \"segments\": %d, "
                   "\"energy\": %.17g, \"node_samples\": {\"f32\": %lld, \"qdq\": %lld, \"backward\": %lld}}",
                (long long)q->grad_passes, (long long)q->grad_packing_bytes, (long long)q->grad_held_bytes,
                q->grad_segments > 0 ? q->grad_segments : 1, q->grad_energy, (long long)q->grad_node_samples[0],
                (long long)q->grad_node_samples[1], (long long)q->grad_node_samples[2]);
    if (q->grad_peak_rank > 0) /* grad_peak_within: its estimates and what it chose */
        fprintf(f, ",\n  \"grad_peak\": {\"bytes\": %.0f, \"values_bytes\": %.0f, \"held_bytes\": %.0f, "
                   "\"f32_bytes\": %.0f, \"within\": %.17g, \"rank\": \"%s\"}",
                q->grad_peak_bytes, q->grad_peak_values, q->grad_peak_held, q->grad_peak_f32_bytes, q->grad_peak_within,
                q->grad_peak_rank == 1 ? "grad" : "effect");
    if (q->held_out_peak_samples > 0) /* validate_from = spread: what its streaming held at most */
        fprintf(f, ",\n  \"held_out_peak_samples\": %lld", (long long)q->held_out_peak_samples);
    fprintf(f, ",\n  \"output_sqnr_calibrate_db\": ");
    num(f, q->output_sqnr_calib);
    if (q->validate_samples > 0 && q->calib_figure_samples > 0) /* the calibration samples it is measured on */
        fprintf(f, ",\n  \"output_sqnr_calibrate_samples\": %lld", (long long)q->calib_figure_samples);
    if (q->output_samples) { /* samples = F: what judged the samples, and the pooled figure beside it */
        fprintf(f, ",\n  \"output_samples\": \"");
        esc(f, q->output_samples, 1);
        fprintf(f, "\",\n  \"output_sqnr_pooled_samples_db\": ");
        num(f, q->output_sqnr_energy);
    }
    fprintf(f, ",\n  \"output_cosine\": ");
    num(f, q->output_cosine);
    fprintf(f, ",\n  \"output_agreement\": ");
    num(f, q->output_agreement);
    fprintf(f, ",\n  \"top1_fp32\": ");
    num(f, q->top1_fp32);
    fprintf(f, ",\n  \"top1_int8\": ");
    num(f, q->top1_int8);
    fprintf(f, ",\n  \"output_nonfinite\": %lld,\n  \"macs_per_sample\": %.0f,\n  \"macs_int_per_sample\": %.0f,\n",
            (long long)q->output_nonfinite, q->macs, q->macs_int);
    /* the runs per phase, node-runs x samples (qr_exec_node_samples), against one f32 pass's */
    fprintf(f, "  \"runs\": {\"f32_pass_node_samples\": %lld, \"node_samples\": %lld, ", (long long)q->pass_node_samples,
            (long long)q->node_samples);
    /* issue 24's two units: f32 passes over the samples calibrated on (its bound: 3), validation
     * passes over those judged on, beside log2 of the tensors the search ranked */
    fprintf(f, "\"calibrate\": {\"samples\": %lld, \"pass_node_samples\": %lld, \"node_samples\": %lld, \"f32_passes\": ",
            (long long)q->samples, (long long)q->calibrate_pass_node_samples, (long long)q->calibrate_node_samples);
    num(f, q->calibrate_pass_node_samples > 0 ? (double)q->calibrate_node_samples / (double)q->calibrate_pass_node_samples
                                              : NAN);
    fprintf(f, "}, \"validate\": {\"samples\": %lld, \"pass_node_samples\": %lld, \"node_samples\": %lld, \"passes\": ",
            (long long)(q->validate_samples ? q->validate_samples : q->samples), (long long)q->validate_pass_node_samples,
            (long long)q->validate_node_samples);
    num(f, q->validate_pass_node_samples > 0 ? (double)q->validate_node_samples / (double)q->validate_pass_node_samples
                                             : NAN);
    fprintf(f, ", \"ranked\": %d, \"log2_ranked\": ", q->ranked);
    num(f, q->ranked > 0 ? log2((double)q->ranked) : NAN);
    fprintf(f, "}, \"phases\": [");
    for (int i = 0; i < q->nphases; i++) {
        const qr_phase_time *p = &q->phases[i];
        fprintf(f, "%s\n    {\"phase\": \"", i ? "," : "");
        esc(f, p->name, 1);
        fprintf(f, "\", \"node_samples\": %lld, \"f32_passes\": ", (long long)p->node_samples);
        num(f, q->pass_node_samples > 0 ? (double)p->node_samples / (double)q->pass_node_samples : NAN);
        fprintf(f, ", \"validate_node_samples\": %lld", (long long)p->validate_node_samples);
        fprintf(f, "}");
    }
    fprintf(f, "%s]},\n", q->nphases ? "\n  " : "");
    /* the fallback's measurements of the outputs, in order (search_samples: the tries on fewer) */
    fprintf(f, "  \"search_tries\": [");
    for (int i = 0; i < q->ntries; i++) {
        const qr_search_try *t = &q->tries[i];
        fprintf(f, "%s\n    {\"fallen_back\": %d, \"widened\": %d, \"samples\": %lld, \"ran\": %lld, \"holds\": %s, "
                   "%s\"output_sqnr_db\": ", i ? "," : "", t->fallen_back, t->widened, (long long)t->samples,
                (long long)t->ran, t->holds ? "true" : "false", t->dynamic ? "\"dynamic\": true, " : "");
        num(f, t->output_sqnr);
        if (!isnan(t->calibrate_sqnr)) { /* calibrate_samples = F: judged on the calibration samples too */
            fprintf(f, ", \"calibrate_sqnr_db\": ");
            num(f, t->calibrate_sqnr);
        }
        fprintf(f, "}");
    }
    fprintf(f, "%s],\n", q->ntries ? "\n  " : "");
    if (q->gave_up) /* only then: the reports of every other quantize as they were */
        fprintf(f, "  \"search_given_up\": true,\n");
    if (q->idle)
        fprintf(f, "  \"idle_to_f32\": true,\n");
    /* steps = measure: every layer quantized after each prefix of the transform chain */
    if (q->nsteps) {
        fprintf(f, "  \"steps\": [");
        for (int i = 0; i < q->nsteps; i++) {
            fprintf(f, "%s\n    {\"name\": \"", i ? "," : "");
            esc(f, q->steps[i].name, 1);
            fprintf(f, "\", \"calibrate_db\": ");
            num(f, q->steps[i].calibrate_db);
            fprintf(f, ", \"validate_db\": ");
            num(f, q->steps[i].validate_db);
            fprintf(f, "}");
        }
        fprintf(f, "\n  ],\n");
    }
    /* accumulate = iN or overflow = saturate: the accumulator, and per layer its partial sums and
     * overflows (fields absent for i32 wrapping, whose reports stay as they were) */
    int narrow = acc_narrow(q, f, 1);
    if (q->mixed)
        json_mixed(f, q->mixed);
    fprintf(f, "  \"layers\": [\n");
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        fprintf(f, "    {\"value\": \"");
        esc(f, l->value, 1);
        fprintf(f, "\", \"producer\": \"");
        esc(f, l->op, 1);
        fprintf(f, "\", \"how\": \"%s\", \"dynamic\": %s, \"per_row\": %s, \"dtype\": \"%s\", \"observed_min\": ",
                l->how, l->dynamic ? "true" : "false", l->dynamic == 2 ? "true" : "false", qr_dtype_name(l->dtype));
        num(f, l->lo);
        fprintf(f, ", \"observed_max\": ");
        num(f, l->hi);
        fprintf(f, ", \"scale\": ");
        num(f, l->scale);
        if (l->dynamic)
            fprintf(f, ", \"zero_point\": null, \"clip_min\": ");
        else
            fprintf(f, ", \"zero_point\": %lld, \"clip_min\": ", (long long)l->zero);
        num(f, (double)(l->qmin - l->zero) * l->scale);
        fprintf(f, ", \"clip_max\": ");
        num(f, (double)(l->qmax - l->zero) * l->scale);
        fprintf(f, ", \"sqnr_db\": ");
        num(f, l->sqnr);
        fprintf(f, ", \"sqnr_int_db\": ");
        num(f, l->sqnr_int);
        fprintf(f, ", \"sqnr_local_db\": ");
        num(f, l->sqnr_local);
        fprintf(f, ", \"effect_db\": ");
        num(f, l->effect);
        fprintf(f, ", \"macs_needing\": ");
        num(f, l->macs);
        fprintf(f, ", \"top1_delta_alone\": ");
        num(f, l->top1_delta);
        fprintf(f, ", \"clipped\": ");
        num(f, l->clipped);
        if (narrow && l->acc_on)
            fprintf(f, ", \"acc_sums\": %lld, \"acc_overflows\": %lld", (long long)l->acc_sums,
                    (long long)l->acc_overflows);
        else if (narrow)
            fprintf(f, ", \"acc_sums\": null, \"acc_overflows\": null");
        if (l->step16 >= 0) { /* fallback = u16 then f32: whether the step was open, its effect */
            fprintf(f, ", \"step16_open\": %s, \"effect16_db\": ", l->step16 ? "true" : "false");
            num(f, l->effect16);
        }
        fprintf(f, ", \"fallback\": %s, \"runs_as\": \"", l->fallback ? "true" : "false");
        esc(f, l->runs ? l->runs : "", 1);
        fprintf(f, "\"}%s\n", i + 1 < q->nlayers ? "," : "");
    }
    /* each quantized weight's scales and zero points (per channel along axis), as --qparams has them */
    fprintf(f, "  ],\n  \"weights\": [\n");
    qr_qweights_json(f, q, "    ");
    fprintf(f, "\n  ]\n}\n");
}

/* Tick values for an axis over [lo, hi]: a step of 1, 2 or 5 times a power of ten, about n ticks. */
static double tick_step(double lo, double hi, int n)
{
    double span = hi - lo > 0 ? hi - lo : 1, raw = span / (n > 1 ? n : 1), p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* A horizontal axis at y from x0 to x1 for values [lo, hi], its ticks' numbers and its title. */
static void x_axis(FILE *f, double x0, double x1, double y, double lo, double hi, const char *title)
{
    double sx = (x1 - x0) / (hi - lo > 0 ? hi - lo : 1), step = tick_step(lo, hi, 6);
    fprintf(f, "<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x0, y, x1, y);
    for (double v = ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
        double x = x0 + (v - lo) * sx, t = fabs(v) < step * 1e-9 ? 0 : v;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "font-size=\"10\" text-anchor=\"middle\">%.4g</text>\n", x, y, x, y + 4, x, y + 15, t);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text></g>\n",
            (x0 + x1) / 2, y + 30, title);
}

/* A vertical axis at x from y0 (bottom) to y1 (top) for values [lo, hi], with its title turned. */
static void y_axis(FILE *f, double x, double y0, double y1, double lo, double hi, const char *title)
{
    double sy = (y0 - y1) / (hi - lo > 0 ? hi - lo : 1), step = tick_step(lo, hi, 4);
    fprintf(f, "<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, y0, x, y1);
    for (double v = ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
        double y = y0 - (v - lo) * sy;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "font-size=\"10\" text-anchor=\"end\">%.3g</text>\n", x - 4, y, x, y, x - 6, y + 3, v);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">%s</text></g>\n", x - 52, (y0 + y1) / 2, x - 52, (y0 + y1) / 2, title);
}

/* Horizontal bars of SQNR per tensor; red under 20 dB. */
static void svg_sqnr(FILE *f, const qr_quantized *q)
{
    int h = 22 * q->nlayers + 40, w = 720, left = 320;
    double top = 60;
    for (int i = 0; i < q->nlayers; i++)
        if (isfinite(q->layers[i].sqnr) && q->layers[i].sqnr > top)
            top = q->layers[i].sqnr;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"SQNR per tensor\">\n", w, h);
    for (int db = 0; db <= (int)top; db += 10) {
        double x = left + (w - left - 20) * db / top;
        fprintf(f, "<line x1=\"%.1f\" y1=\"10\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d dB</text>\n",
                x, x, h - 25, x, h - 12, db);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">SQNR against "
               "f32 (dB)</text>\n", left + (w - left - 20) / 2.0, h - 1);
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        double v = isfinite(l->sqnr) ? l->sqnr : top;
        double y = 12 + 22 * i, bw = (w - left - 20) * (v < 0 ? 0 : v) / top;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", left - 6, y + 12);
        esc(f, l->value, 0);
        if (l->dynamic) { /* nothing fixed to measure: its quantization follows each run's range */
            fprintf(f, "</text><text x=\"%d\" y=\"%.1f\" font-size=\"11\">%s (not measured)</text>\n", left + 4,
                    y + 12, l->how);
            continue;
        }
        fprintf(f, "</text><rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"16\" fill=\"%s\"><title>%.1f dB</title>"
                   "</rect>\n",
                left, y, bw, l->fallback ? "#999" : v < 20 ? "#c0392b" : "#2e86c1", v);
    }
    fprintf(f, "</svg>\n");
}

/* The real range l's integers represent: a dynamic tensor's covers what each run holds (and 0), so
 * here the range it was seen with (0 when none was). */
static void clip_range(const qr_qlayer *l, double *a, double *b)
{
    if (l->dynamic) {
        *a = isfinite(l->lo) ? fmin(l->lo, 0) : 0;
        *b = isfinite(l->hi) ? fmax(l->hi, 0) : 0;
        return;
    }
    *a = (double)(l->qmin - l->zero) * l->scale;
    *b = (double)(l->qmax - l->zero) * l->scale;
}

/* Per tensor: the observed range (blue) inside the representable one (grey; a dynamic tensor's
 * follows each run's range). */
static void svg_ranges(FILE *f, const qr_quantized *q)
{
    int h = 22 * q->nlayers + 60, w = 720, left = 320;
    double lo = 0, hi = 0;
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        double a, b;
        clip_range(l, &a, &b);
        lo = fmin(lo, fmin(a, isfinite(l->lo) ? l->lo : 0));
        hi = fmax(hi, fmax(b, isfinite(l->hi) ? l->hi : 0));
    }
    if (hi - lo <= 0)
        hi = lo + 1;
    double sx = (w - left - 20) / (hi - lo);
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"ranges per tensor\">\n", w, h);
    double x0 = left + (0 - lo) * sx;
    fprintf(f, "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\" stroke-dasharray=\"2,2\"/>\n", x0, x0,
            h - 54);
    x_axis(f, left, left + (hi - lo) * sx, h - 52, lo, hi, "real value of the tensor");
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        double y = 6 + 22 * i, a, b;
        clip_range(l, &a, &b);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", left - 6, y + 12);
        esc(f, l->value, 0);
        fprintf(f, "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"16\" fill=\"#ddd\"/>", left + (a - lo) * sx,
                y, (b - a) * sx);
        if (isfinite(l->lo) && isfinite(l->hi))
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\" fill=\"#2e86c1\"><title>observed %.4g .. "
                       "%.4g</title></rect>",
                    left + (l->lo - lo) * sx, y + 4, (l->hi - l->lo) * sx, l->lo, l->hi);
        fputc('\n', f);
    }
    fprintf(f, "</svg>\n");
}

/* Per layer (each quantized activation's producer): the outputs' SQNR with that layer alone
 * quantized (the fallback's effect, a bar) and the error its layer alone adds (the local SQNR, a
 * black mark). Lower is more sensitive. 0 when nothing was measured. */
static int svg_sensitivity(FILE *f, const qr_quantized *q)
{
    double top = 0;
    int any = 0;
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        if (isfinite(l->effect))
            top = fmax(top, l->effect), any = 1;
        if (isfinite(l->sqnr_local))
            top = fmax(top, l->sqnr_local), any = 1;
    }
    if (!any)
        return 0;
    top = top > 10 ? ceil(top / 10) * 10 : 10;
    int h = 22 * q->nlayers + 56, w = 720, left = 320;
    double sx = (w - left - 20) / top;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"sensitivity per layer\">\n", w, h);
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        double y = 6 + 22 * i;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", left - 6, y + 12);
        esc(f, l->value, 0);
        fprintf(f, "</text>");
        if (isfinite(l->effect))
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"16\" fill=\"%s\"><title>outputs %.2f dB with "
                       "this layer alone quantized</title></rect>",
                    left, y, fmax(l->effect, 0) * sx, l->fallback ? "#999" : "#e67e22", l->effect);
        if (isfinite(l->sqnr_local))
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"3\" height=\"20\" fill=\"#000\"><title>local %.2f dB</title>"
                       "</rect>", left + fmax(l->sqnr_local, 0) * sx - 1.5, y - 2, l->sqnr_local);
        if (!isfinite(l->effect) && !isfinite(l->sqnr_local))
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">not measured</text>", left + 4, y + 12);
        fputc('\n', f);
    }
    x_axis(f, left, left + top * sx, h - 50, 0, top, "SQNR (dB) against f32");
    fprintf(f, "</svg>\n");
    return 1;
}

/* One chart per quantized weight: its scales along its axis (a line over the channels, or the
 * blocks), and the zero points when any is not 0. */
static int svg_weights(FILE *f, const qr_quantized *q)
{
    const qr_graph *g = q->qdq;
    int any = 0;
    for (int i = 0; g && i < g->n_nodes; i++) {
        qr_qweight wt;
        if (!qr_qweight_at(g, i, &wt))
            continue;
        if (!any)
            fprintf(f, "<table><tr><th>weight</th><th>type</th><th>axis</th><th>scales</th><th>smallest scale</th>"
                       "<th>largest scale</th><th>zero points</th></tr>\n");
        any = 1;
        double lo = INFINITY, hi = -INFINITY;
        int64_t zlo = INT64_MAX, zhi = INT64_MIN;
        for (int64_t k = 0; k < wt.count; k++) {
            double v = qr_qweight_scale(&wt, k);
            int64_t z = qr_qweight_zero(&wt, k);
            lo = fmin(lo, v), hi = fmax(hi, v);
            zlo = z < zlo ? z : zlo, zhi = z > zhi ? z : zhi;
        }
        fprintf(f, "<tr><td>");
        esc(f, wt.name, 0);
        fprintf(f, "</td><td>%s</td><td>%lld%s</td><td>%lld</td><td>%.5g</td><td>%.5g</td><td>", wt.dtype,
                (long long)wt.axis, wt.block ? " (blocks)" : "", (long long)wt.count, lo, hi);
        if (zlo == zhi)
            fprintf(f, "all %lld", (long long)zlo);
        else
            fprintf(f, "%lld .. %lld", (long long)zlo, (long long)zhi);
        fprintf(f, "</td></tr>\n");
    }
    if (!any)
        return 0;
    fprintf(f, "</table>\n");
    for (int i = 0; i < g->n_nodes; i++) {
        qr_qweight wt;
        if (!qr_qweight_at(g, i, &wt) || wt.count < 2) /* one scale: the table says it */
            continue;
        int w = 720, h = 170, left = 80, right = 20, topm = 24, bottom = 52;
        double hi = 0;
        for (int64_t k = 0; k < wt.count; k++)
            hi = fmax(hi, qr_qweight_scale(&wt, k));
        hi = hi > 0 ? hi * 1.05 : 1;
        double x0 = left, x1 = w - right, y0 = h - bottom, y1 = topm, n = (double)(wt.count - 1);
        fprintf(f, "<svg class=\"weight\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"scales of ", w, h);
        esc(f, wt.name, 0);
        fprintf(f, "\"><text x=\"%d\" y=\"14\" font-size=\"12\">", left);
        esc(f, wt.name, 0);
        fprintf(f, " (%s)</text>\n<polyline fill=\"none\" stroke=\"#2e86c1\" points=\"", wt.dtype);
        for (int64_t k = 0; k < wt.count; k++)
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", x0 + (x1 - x0) * (double)k / n,
                    y0 - (y0 - y1) * qr_qweight_scale(&wt, k) / hi);
        fprintf(f, "\"/>\n");
        char title[96];
        if (wt.block)
            snprintf(title, sizeof title, "scale index (channel, then block of %lld along axis %lld)", (long long)wt.block,
                     (long long)wt.axis);
        else
            snprintf(title, sizeof title, "channel (index along axis %lld)", (long long)wt.axis);
        x_axis(f, x0, x1, y0, 0, n, title);
        y_axis(f, x0, y0, y1, 0, hi, "scale");
        fprintf(f, "</svg>\n");
    }
    return 1;
}

static void write_html(FILE *f, const qr_quantized *q, const char *model)
{
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>QRL quantization report</title>\n"
               "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
               "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}"
               "td:first-child,th:first-child,td:nth-child(2){text-align:left}.bad{color:#c0392b}</style>"
               "</head><body>\n<h1>Quantization report</h1>\n<p>Model <b>");
    esc(f, model, 0);
    fprintf(f, "</b>, recipe <b>");
    esc(f, q->recipe ? q->recipe : "", 0);
    fprintf(f, "</b>. %lld calibration samples in %.0f ms (one f32 pass: %.0f ms). Nodes: %d by patterns, %d by "
               "affine rules, %d in f32. %d weight tensors quantized (%d of them 4-bit): %lld bytes of integers, 4-bit ones "
               "packed two to a byte, against %lld in f32; %d tensors fell back to f32, %d went to 16 bits; %d activations are "
               "quantized at run time (dynamic: no calibrated scale; the range shown is the calibration samples').</p>\n",
            (long long)q->samples, q->calib_ms, q->fp32_ms, q->nodes_pattern, q->nodes_affine, q->nodes_float,
            q->weights, q->weights_4bit, (long long)q->weight_bytes, (long long)q->weight_f32_bytes, q->fallbacks,
            q->widened, q->ndynamic);
    if (q->validate_samples > 0 && q->calib_figure_samples > 0 && q->calib_figure_samples < q->samples)
        fprintf(f, "<p>The fallback's decisions and the output SQNR, %.1f dB, were judged on %lld held-out samples, "
                   "never calibrated on; on the first %lld of the %lld calibration samples (the recipe's "
                   "calibrate_figure_samples) the output SQNR is %.1f dB.</p>\n",
                q->output_sqnr, (long long)q->validate_samples, (long long)q->calib_figure_samples,
                (long long)q->samples, q->output_sqnr_calib);
    else if (q->validate_samples > 0) /* the recipe's validate: both figures */
        fprintf(f, "<p>The fallback's decisions and the output SQNR, %.1f dB, were judged on %lld held-out samples, "
                   "never calibrated on; on the %lld calibration samples the output SQNR is %.1f dB.</p>\n",
                q->output_sqnr, (long long)q->validate_samples, (long long)q->samples, q->output_sqnr_calib);
    else if (q->validate_skipped > 0)
        fprintf(f, "<p class=\"bad\">The fallback's decisions and the output SQNR, %.1f dB, were judged on the %lld "
                   "samples calibrated on: the recipe's validate would hold out %lld, fewer than its validate_least, so "
                   "none was held out.</p>\n",
                q->output_sqnr, (long long)q->samples, (long long)q->validate_skipped);
    if (q->nsteps) { /* steps = measure */
        fprintf(f, "<h2>What each transform bought</h2>\n<p>The output SQNR against f32 with every layer the recipe "
                   "quantizes quantized (before the fallback), after each prefix of the recipe's transform chain; the "
                   "validate column is on the held-out samples.</p>\n<table><tr><th>after</th><th>calibrate dB</th>"
                   "<th>validate dB</th></tr>\n");
        for (int i = 0; i < q->nsteps; i++) {
            fprintf(f, "<tr><td>%s", i > 1 ? "+ " : "");
            esc(f, q->steps[i].name, 0);
            fprintf(f, "</td><td>%.1f</td><td>%.1f</td></tr>\n", q->steps[i].calibrate_db, q->steps[i].validate_db);
        }
        fprintf(f, "</table>\n");
    }
    fprintf(f, "<h2>SQNR of each quantized tensor against f32</h2>\n<p>Signal-to-quantization-noise ratio measured "
               "on calibration data, with every quantization upstream applied (simulated in f32; the table also "
               "gives it for the integer graph's own kernels). Red: under 20 dB; grey: fell back to f32.</p>\n");
    if (q->mixed)
        html_mixed(f, q->mixed);
    svg_sqnr(f, q);
    fprintf(f, "<h2>Ranges</h2>\n<p>Grey: the range the integers can represent; blue: the values observed; the "
               "dashed line is 0.</p>\n");
    svg_ranges(f, q);
    fprintf(f, "<h2>Sensitivity per layer</h2>\n<p>Per quantized tensor, the model's outputs' SQNR against f32 with "
               "its layer alone quantized (bars: the effect the recipe's fallback ranked layers by; grey: fell back to "
               "f32) and the error the layer alone adds (black marks: the local SQNR, its inputs f32). Lower is more "
               "sensitive.</p>\n");
    if (!svg_sensitivity(f, q))
        fprintf(f, "<p>Not measured: the recipe's fallback ranked no layer.</p>\n");
    fprintf(f, "<h2>Weights</h2>\n<p>Each quantized weight's (and bias's) scales along its axis (per output "
               "channel; in blocks for block-wise weights) and its zero points.</p>\n");
    if (!svg_weights(f, q))
        fprintf(f, "<p>No weight is quantized.</p>\n");
    int narrow = acc_narrow(q, f, 0);
    fprintf(f, "<h2>Tensors</h2>\n<table><tr><th>tensor</th><th>producer</th><th>how</th><th>type</th><th>observed "
               "min</th><th>observed max</th><th>scale</th><th>zero point</th><th>SQNR dB</th><th>SQNR dB, integer graph</th>"
               "<th>clipped</th>%s"
               "<th>fallback</th><th>top-1 alone (points)</th><th>runs as (integer graph)</th></tr>\n",
            narrow ? "<th>accumulator overflows (of its partial sums)</th>" : "");
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        fprintf(f, "<tr><td>");
        esc(f, l->value, 0);
        fprintf(f, "</td><td>");
        esc(f, l->op, 0);
        if (l->dynamic) /* scale and zero point are each run's: none to show, nor an SQNR of fixed ones */
            fprintf(f, "</td><td>%s</td><td>%s</td><td>%.5g</td><td>%.5g</td><td>at run time</td><td>at run time</td>"
                       "<td>-</td>",
                    l->how, qr_dtype_name(l->dtype), l->lo, l->hi);
        else
            fprintf(f, "</td><td>%s</td><td>%s</td><td>%.5g</td><td>%.5g</td><td>%.5g</td><td>%lld</td><td%s>%.1f</td>",
                    l->how, qr_dtype_name(l->dtype), l->lo, l->hi, l->scale, (long long)l->zero,
                    l->sqnr < 20 ? " class=\"bad\"" : "", l->sqnr);
        if (isnan(l->sqnr_int))
            fprintf(f, "<td>-</td>");
        else
            fprintf(f, "<td%s>%.1f</td>", l->sqnr_int < 20 ? " class=\"bad\"" : "", l->sqnr_int);
        fprintf(f, "<td>%.3f%%</td>", 100 * l->clipped);
        if (narrow && l->acc_on)
            fprintf(f, "<td%s>%lld of %lld</td>", l->acc_overflows ? " class=\"bad\"" : "", (long long)l->acc_overflows,
                    (long long)l->acc_sums);
        else if (narrow)
            fprintf(f, "<td>-</td>");
        fprintf(f, "<td>%s</td>", l->fallback ? "f32" : "");
        if (isnan(l->top1_delta))
            fprintf(f, "<td>-</td>");
        else
            fprintf(f, "<td>%+.2f</td>", l->top1_delta);
        fprintf(f, "<td style=\"text-align:left\">");
        esc(f, l->runs ? l->runs : "", 0);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n<p>Made by qrl.</p>\n</body></html>\n");
}

qr_status qr_report_write(const qr_quantized *q, const char *model, const char *path, qr_error *e)
{
    qr_atomic_file af;
    if (qr_atomic_open(&af, path, e) != QR_OK)
        return QR_ERR;
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json"))
        write_json(af.f, q, model);
    else
        write_html(af.f, q, model);
    return qr_atomic_commit(&af, e);
}
