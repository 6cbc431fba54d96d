/* Binding input files to a model's inputs: "NAME=FILE" by name, a bare
 * "FILE" to the next input not yet bound, in declaration order. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dump.h"
#include "exec.h"
#include "tensor_io.h"

qr_status cli_bind_inputs(const char *model, const qr_graph *g, const char *flag, int n, char *const *specs,
                          int samples, qr_tensor *inputs, qr_error *e)
{
    int *bound = calloc((size_t)g->n_inputs + 1, sizeof *bound);
    if (!bound)
        return qr_errorf(e, "out of memory");
    qr_status st = QR_OK;
    for (int k = 0, next = 0; k < n && st == QR_OK; k++) {
        const char *spec = specs[k], *eq = strchr(spec, '='), *file = eq ? eq + 1 : spec;
        int slot = -1;
        if (eq) {
            for (int j = 0; j < g->n_inputs; j++)
                if (strlen(g->inputs[j]->name) == (size_t)(eq - spec) &&
                    !strncmp(g->inputs[j]->name, spec, (size_t)(eq - spec)))
                    slot = j;
            if (slot < 0) {
                st = qr_errorf(e, "%s: the model has no input named '%.*s'", model, (int)(eq - spec), spec);
                break;
            }
        } else {
            while (next < g->n_inputs && bound[next])
                next++;
            slot = next;
            if (slot >= g->n_inputs) {
                st = qr_errorf(e, "%s: more input files than graph inputs (%d)", model, g->n_inputs);
                break;
            }
        }
        if (bound[slot]) {
            st = qr_errorf(e, "input '%s' is given twice", g->inputs[slot]->name);
            break;
        }
        bound[slot] = 1;
        if (qr_tensor_read_file(file, &inputs[slot], e) != QR_OK)
            st = QR_ERR;
        else if ((samples ? qr_exec_check_samples : qr_exec_check_input)(g->inputs[slot], &inputs[slot], e) != QR_OK) {
            qr_error_prefix(e, "%s does not fit %s", file, model);
            st = QR_ERR;
        }
    }
    for (int j = 0; st == QR_OK && j < g->n_inputs; j++)
        if (!bound[j]) {
            char tb[160];
            st = qr_errorf(e, "%s: missing input '%s' (%s); pass it with %s %s=FILE", model, g->inputs[j]->name,
                           qr_value_type_str(g->inputs[j], tb, sizeof tb), flag, g->inputs[j]->name);
        }
    free(bound);
    return st;
}
