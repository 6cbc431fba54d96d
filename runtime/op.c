#include "op.h"

#include <string.h>

#include "ops/ops_common.h"

/* The tables of runtime/ops/, concatenated. */
static const qr_op_def *const op_tables[] = {
    qr_ops_elementwise, qr_ops_conv, qr_ops_dense, qr_ops_shape, qr_ops_reduce, qr_ops_quant, qr_ops_quantizer, qr_ops_intgraph,
    qr_ops_misc,
};

#define MAX_OPS 256
static const qr_op_def *op_all[MAX_OPS];
static int op_count = -1;

static void op_init(void)
{
    if (op_count >= 0)
        return;
    int n = 0;
    for (size_t t = 0; t < sizeof op_tables / sizeof op_tables[0]; t++)
        for (const qr_op_def *d = op_tables[t]; d->name && n < MAX_OPS; d++)
            op_all[n++] = d;
    op_count = n;
}

const qr_op_def *qr_op_find(const char *domain, const char *name)
{
    op_init();
    if (!domain || strcmp(domain, "ai.onnx") == 0)
        domain = "";
    for (int i = 0; i < op_count; i++) {
        const char *d = op_all[i]->domain ? op_all[i]->domain : "";
        if (strcmp(op_all[i]->name, name) == 0 && strcmp(d, domain) == 0)
            return op_all[i];
    }
    return NULL;
}

int qr_op_list(const qr_op_def *const **defs)
{
    op_init();
    *defs = op_all;
    return op_count;
}
