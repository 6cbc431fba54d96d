/* The qparams JSON and the integer graph's text (qparams.h); they were the
 * qrl command's, and are the library's so that every caller writes the same. */
#include "qparams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dump.h"
#include "fileio.h"
#include "text.h"
#include "intgraph.h"

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* Every quantized tensor of the QDQ graph: activations (scale, zero point,
 * range; those quantized at run time as dynamic, without scale and zero point,
 * with the range the calibration samples gave them) and weights (per
 * channel; a dynamic Conv's too, whose DequantizeLinear the export replaced
 * by ConvInteger and left dead in the graph). Backends read the same from
 * include/qrl.h. */
qr_status qr_qparams_write(const char *path, const qr_quantized *q, const char *recipe, qr_error *e)
{
    qr_atomic_file af;
    if (qr_atomic_open(&af, path, e) != QR_OK)
        return QR_ERR;
    FILE *f = af.f;
    fprintf(f, "{\n  \"recipe\": ");
    qr_fput_json_str(f, recipe);
    fprintf(f, ",\n  \"calibration_samples\": %lld,\n  \"activations\": [\n", (long long)q->samples);
    for (int i = 0; i < q->nlayers; i++) {
        const qr_qlayer *l = &q->layers[i];
        fprintf(f, "    {\"value\": ");
        qr_fput_json_str(f, l->value);
        fprintf(f, ", \"producer\": ");
        qr_fput_json_str(f, l->op);
        fprintf(f, ", \"how\": ");
        qr_fput_json_str(f, l->how);
        fprintf(f, ", \"dynamic\": %s, \"per_row\": %s", l->dynamic ? "true" : "false", l->dynamic == 2 ? "true" : "false");
        fprintf(f, ", \"dtype\": \"%s\", \"scale\": ", qr_dtype_name(l->dtype));
        json_num(f, l->scale); /* null when dynamic: computed on every run */
        fprintf(f, ", \"zero_point\": ");
        if (l->dynamic)
            fputs("null", f);
        else
            fprintf(f, "%lld", (long long)l->zero);
        fprintf(f, ", \"qmin\": %lld, \"qmax\": %lld, \"observed_min\": ", (long long)l->qmin, (long long)l->qmax);
        json_num(f, l->lo);
        fprintf(f, ", \"observed_max\": ");
        json_num(f, l->hi);
        fprintf(f, ", \"clip_min\": ");
        json_num(f, (double)(l->qmin - l->zero) * l->scale);
        fprintf(f, ", \"clip_max\": ");
        json_num(f, (double)(l->qmax - l->zero) * l->scale);
        fprintf(f, ", \"sqnr_db\": ");
        json_num(f, l->sqnr);
        fprintf(f, ", \"fallback\": %s}%s\n", l->fallback ? "true" : "false", i + 1 < q->nlayers ? "," : "");
    }
    fprintf(f, "  ],\n  \"weights\": [\n");
    int first = 1;
    const qr_graph *g = q->qdq;
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        if (strcmp(n->op, "DequantizeLinear") || n->n_in < 3 || !n->in[0]->is_const || !n->in[1]->is_const)
            continue;
        const qr_tensor *s = &n->in[1]->t, *z = &n->in[2]->t;
        fprintf(f, "%s    {\"value\": ", first ? "" : ",\n");
        first = 0;
        qr_fput_json_str(f, n->out[0]->name);
        fprintf(f, ", \"dtype\": \"%s\", \"axis\": %lld, \"scale\": [", qr_dtype_name(n->in[0]->t.dtype),
                (long long)(s->ndim ? qr_attr_i(n, "axis", 1) : -1));
        for (int64_t k = 0; k < qr_tensor_numel(s); k++) {
            fprintf(f, "%s", k ? ", " : "");
            json_num(f, qr_get_f64(s->data, s->dtype, k));
        }
        fprintf(f, "], \"zero_point\": [");
        for (int64_t k = 0; k < qr_tensor_numel(z); k++)
            fprintf(f, "%s%lld", k ? ", " : "", (long long)qr_get_i64(z->data, z->dtype, k));
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
    return qr_atomic_commit(&af, e);
}

qr_status qr_intgraph_write(const char *path, const qr_quantized *q, qr_error *e)
{
    qr_atomic_file af;
    if (!q->ig) /* before the file is opened: no partial output */
        return qr_errorf(e, "%s: a weight-only recipe makes no integer graph (the QDQ model runs as written)", path);
    if (qr_atomic_open(&af, path, e) != QR_OK)
        return QR_ERR;
    qr_graph_dump(q->ig->g, af.f);
    return qr_atomic_commit(&af, e);
}
