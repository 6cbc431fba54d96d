#include "dump.h"
#include "text.h"

#include <stdlib.h>
#include <string.h>

const char *qr_value_type_str(const qr_value *v, char *buf, size_t n)
{
    if (v->t.ndim < 0) {
        snprintf(buf, n, "%s[*]", qr_dtype_name(v->t.dtype));
        return buf;
    }
    size_t k = (size_t)snprintf(buf, n, "%s[", qr_dtype_name(v->t.dtype));
    for (int i = 0; i < v->t.ndim && k < n; i++) {
        const char *sep = i ? "," : "";
        if (v->t.dims[i] >= 0)
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", sep, (long long)v->t.dims[i]);
        else if (v->dim_param[i]) {
            char pb[128];
            k += (size_t)snprintf(buf + k, n - k, "%s%s", sep, qr_text_printable(v->dim_param[i], pb, sizeof pb));
        }
        else
            k += (size_t)snprintf(buf + k, n - k, "%s?", sep);
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

static void dump_attr(const qr_attr *a, FILE *f)
{
    char tb[160];
    qr_fput_printable(f, a->name);
    fputc('=', f);
    switch (a->kind) {
    case QR_ATTR_FLOAT: fprintf(f, "%.9g", a->f); break;
    case QR_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case QR_ATTR_STRING: fputc('"', f), qr_fput_printable(f, a->s), fputc('"', f); break;
    case QR_ATTR_TENSOR: fprintf(f, "tensor %s", qr_tensor_type_str(&a->t, tb, sizeof tb)); break;
    case QR_ATTR_FLOATS:
    case QR_ATTR_INTS:
    case QR_ATTR_STRINGS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++) {
            if (i)
                fputc(',', f);
            if (a->kind == QR_ATTR_FLOATS)
                fprintf(f, "%.9g", a->floats[i]);
            else if (a->kind == QR_ATTR_INTS)
                fprintf(f, "%lld", (long long)a->ints[i]);
            else
                fputc('"', f), qr_fput_printable(f, a->strs[i]), fputc('"', f);
        }
        fputc(']', f);
        break;
    default: fprintf(f, "?"); break;
    }
}

static void dump_qinfo(const qr_qinfo *q, FILE *f)
{
    fprintf(f, " q(%s", qr_dtype_name(q->dtype));
    if (q->axis >= 0)
        fprintf(f, " axis=%d", q->axis);
    fprintf(f, " scale=%.9g zero=%d", q->n ? q->scale[0] : 0.f, q->n ? q->zero[0] : 0);
    if (q->n > 1)
        fprintf(f, " (+%d channels)", q->n - 1);
    if (q->acc != QR_UNDEF)
        fprintf(f, " acc=%s", qr_dtype_name(q->acc));
    fprintf(f, ")");
}

void qr_graph_dump(const qr_graph *g, FILE *f)
{
    char tb[256];
    /* names come from the file: printed with control characters and bad UTF-8 escaped */
    fputs("graph \"", f), qr_fput_printable(f, g->name);
    fprintf(f, "\" opset %d producer \"", g->opset), qr_fput_printable(f, g->producer), fputs("\"\n", f);
    for (int i = 0; i < g->n_meta; i++) {
        fputs("meta   ", f), qr_fput_printable(f, g->meta_key[i]);
        fputs(" = ", f), qr_fput_printable(f, g->meta_val[i]), fputc('\n', f);
    }
    for (int i = 0; i < g->n_inputs; i++) {
        fputs("input  ", f), qr_fput_printable(f, g->inputs[i]->name);
        fprintf(f, ": %s\n", qr_value_type_str(g->inputs[i], tb, sizeof tb));
    }
    for (int i = 0; i < g->n_values; i++) {
        const qr_value *v = g->values[i];
        if (!v->is_const)
            continue;
        fputs("const  ", f), qr_fput_printable(f, v->name);
        fprintf(f, ": %s", qr_value_type_str(v, tb, sizeof tb));
        int64_t n = qr_tensor_numel(&v->t);
        if (n <= 8) {
            fprintf(f, " = {");
            for (int64_t k = 0; k < n; k++)
                fprintf(f, "%s%.9g", k ? ", " : "", qr_get_f64(v->t.data, v->t.dtype, k));
            fprintf(f, "}");
        }
        fputc('\n', f);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const qr_node *n = g->nodes[i];
        fputs("node   ", f), qr_fput_printable(f, n->name), fputs(": ", f), qr_fput_printable(f, n->domain);
        fputs(n->domain[0] ? "." : "", f), qr_fput_printable(f, n->op), fputc('(', f);
        for (int j = 0; j < n->n_in; j++)
            fputs(j ? ", " : "", f), qr_fput_printable(f, n->in[j] ? n->in[j]->name : "_");
        fprintf(f, ") -> ");
        for (int j = 0; j < n->n_out; j++) {
            const qr_value *o = n->out[j];
            fprintf(f, "%s", j ? ", " : "");
            if (!o) {
                fprintf(f, "_");
                continue;
            }
            qr_fput_printable(f, o->name);
            fprintf(f, ": %s", qr_value_type_str(o, tb, sizeof tb));
            if (o->q)
                dump_qinfo(o->q, f);
        }
        if (n->n_attr) {
            /* Sorted by name so the text does not depend on the exporter's order (every one of them:
             * a node may have any number; without memory for the order, as stored). */
            int na = n->n_attr;
            const qr_attr **order = malloc((size_t)na * sizeof *order);
            if (!order) {
                fprintf(f, " {");
                for (int j = 0; j < na; j++) {
                    if (j)
                        fprintf(f, ", ");
                    dump_attr(&n->attr[j], f);
                }
                fprintf(f, "}\n");
                continue;
            }
            for (int j = 0; j < na; j++)
                order[j] = &n->attr[j];
            for (int a = 1; a < na; a++)
                for (int b = a; b > 0 && strcmp(order[b - 1]->name, order[b]->name) > 0; b--) {
                    const qr_attr *t = order[b];
                    order[b] = order[b - 1];
                    order[b - 1] = t;
                }
            fprintf(f, " {");
            for (int j = 0; j < na; j++) {
                if (j)
                    fprintf(f, ", ");
                dump_attr(order[j], f);
            }
            fprintf(f, "}");
            free(order);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        fputs("output ", f), qr_fput_printable(f, g->outputs[i]->name);
        fprintf(f, ": %s\n", qr_value_type_str(g->outputs[i], tb, sizeof tb));
    }
}
