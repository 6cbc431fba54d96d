#include <stdio.h>
#include <string.h>

#include "cli.h"

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
    qrl_model *m;
    char err[CLI_ERRLEN];
    if (qrl_model_load(model, 0, &m, err, sizeof err) != 0)
        return cli_fail(err);
    qrl_model_dump(m, stdout);
    qrl_model_free(m);
    return 0;
}
