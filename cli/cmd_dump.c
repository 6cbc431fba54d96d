#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dump.h"

int cli_dump(int argc, char **argv)
{
    const char *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: qrl dump MODEL.onnx\n"
                   "Prints the graph after import and passes (Identity/Dropout removed, constants folded,\n"
                   "BatchNormalization folded): inputs, constants, nodes with output types and attributes.\n");
            return 0;
        }
        if (argv[i][0] == '-' || model)
            return cli_usage_error("dump", "unexpected argument '%s'", argv[i]);
        model = argv[i];
    }
    if (!model)
        return cli_usage_error("dump", "missing MODEL.onnx");
    qr_graph *g;
    qr_error e;
    if (cli_load_model(model, &g, &e) != QR_OK)
        return cli_fail(&e);
    qr_graph_dump(g, stdout);
    qr_graph_free(g);
    return 0;
}
