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

/* Zero point k (of N * n_blocks, by column then block) of MatMulNBits n's packed zero points z. */
static int64_t nbits_zero(const qr_node *n, const qr_tensor *z, int64_t k)
{
    int64_t K = qr_attr_i(n, "K", 0), bs = qr_attr_i(n, "block_size", 0);
    int64_t nb = bs > 0 ? (K + bs - 1) / bs : 1, col = k / nb, b = k % nb;
    const uint8_t *zp = z->data;
    uint8_t byte = zp[col * ((nb + 1) / 2) + b / 2];
    return b % 2 ? byte >> 4 : byte & 15;
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

int qr_qweight_at(const qr_graph *g, int i, qr_qweight *w)
{
    const qr_node *n = g->nodes[i];
    int nbits = !strcmp(n->op, "MatMulNBits") && n->n_in >= 3 && n->in[1]->is_const && n->in[2]->is_const;
    if (!nbits && (strcmp(n->op, "DequantizeLinear") || n->n_in < 2 || !n->in[0]->is_const || !n->in[1]->is_const))
        return 0;
    /* a weight-only weight: a DequantizeLinear without zero points (all 0), maybe in blocks along
     * K, or a MatMulNBits (its codes unsigned, zero points 8 unless it has them) */
    const qr_tensor *s = nbits ? &n->in[2]->t : &n->in[1]->t;
    *w = (qr_qweight){.node = n, .name = nbits ? n->in[1]->name : n->out[0]->name, .nbits = nbits,
                      .dtype = nbits ? "u4" : qr_dtype_name(n->in[0]->t.dtype),
                      .axis = nbits ? 1 : s->ndim ? qr_attr_i(n, "axis", 1) : -1,
                      .block = qr_attr_i(n, "block_size", 0), .scale = s, .count = qr_tensor_numel(s)};
    return 1;
}

double qr_qweight_scale(const qr_qweight *w, int64_t k)
{
    return qr_get_f64(w->scale->data, w->scale->dtype, k);
}

int64_t qr_qweight_zero(const qr_qweight *w, int64_t k)
{
    const qr_node *n = w->node;
    int zi = w->nbits ? 3 : 2; /* the zero points' input */
    const qr_tensor *z = n->n_in > zi && n->in[zi] ? &n->in[zi]->t : NULL;
    if (w->nbits) /* uint8 [N][ceil(n_blocks / 2)], two to a byte, low nibble first */
        return z ? nbits_zero(n, z, k) : 8;
    if (z && z->data && k < qr_tensor_numel(z))
        return qr_get_i64(z->data, z->dtype, k);
    return 0;
}

void qr_qweights_json(FILE *f, const qr_quantized *q, const char *indent)
{
    int first = 1;
    const qr_graph *g = q->qdq;
    for (int i = 0; g && i < g->n_nodes; i++) {
        qr_qweight w;
        if (!qr_qweight_at(g, i, &w))
            continue;
        const qr_node *n = w.node;
        fprintf(f, "%s%s{\"value\": ", first ? "" : ",\n", indent);
        first = 0;
        qr_fput_json_str(f, w.name);
        if (w.nbits) {
            fprintf(f, ", \"format\": \"MatMulNBits\", \"node\": ");
            qr_fput_json_str(f, n->name ? n->name : "");
            fprintf(f, ", \"K\": %lld, \"N\": %lld", (long long)qr_attr_i(n, "K", 0), (long long)qr_attr_i(n, "N", 0));
        }
        fprintf(f, ", \"dtype\": \"%s\", \"axis\": %lld", w.dtype, (long long)w.axis);
        if (w.block)
            fprintf(f, ", \"block_size\": %lld", (long long)w.block);
        fprintf(f, ", \"scale\": [");
        for (int64_t k = 0; k < w.count; k++) {
            fprintf(f, "%s", k ? ", " : "");
            json_num(f, qr_qweight_scale(&w, k));
        }
        fprintf(f, "], \"zero_point\": [");
        for (int64_t k = 0; k < w.count; k++)
            fprintf(f, "%s%lld", k ? ", " : "", (long long)qr_qweight_zero(&w, k));
        fprintf(f, "]}");
    }
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
    qr_qweights_json(f, q, "    ");
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
