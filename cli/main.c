#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "onnx_import.h"
#include "passes.h"

static const char usage[] =
    "usage: qrl <command> [options]\n"
    "\n"
    "commands:\n"
    "  dump MODEL.onnx                      print the graph as text (ops, dtypes, shapes, attributes)\n"
    "  run  MODEL.onnx [-i [NAME=]FILE]... [-o DIR] [--threads N] [--stats]\n"
    "                                       run the model; inputs .npy or .pb (ONNX TensorProto),\n"
    "                                       unnamed inputs bind in graph-input order; writes every\n"
    "                                       output to DIR/<output name>.npy (DIR defaults to .)\n"
    "  run  MODEL.onnx --recipe R.qrl --calib C.npy -i FILE... [-o DIR]\n"
    "                                       quantize in memory, run the recipe's integer graph\n"
    "  eval MODEL.onnx --data X.npy --labels Y.npy [--batch B] [--threads N]\n"
    "                 [--recipe R.qrl --calib C.npy]\n"
    "                                       top-1 accuracy of a classifier (fp32 vs int8 with a recipe)\n"
    "  quantize MODEL.onnx --recipe R.qrl --calib X.npy -o OUT.onnx [--qparams Q.json]\n"
    "                                       quantize with a recipe; writes a QDQ ONNX model\n"
    "  check FILE.qrl... [--dump-ast] [--time]\n"
    "                                       compile recipe files and print their diagnostics\n"
    "\n"
    "options:\n"
    "  -h, --help       this text\n"
    "  --version        print the version\n";

int cli_fail(const qr_error *e)
{
    fprintf(stderr, "qrl: error: %s\n", e->msg);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "qrl %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see qrl --help)\n");
    return 2;
}

qr_status cli_load_model(const char *path, qr_graph **g, qr_error *e)
{
    if (qr_onnx_load(path, g, e) != QR_OK)
        return QR_ERR;
    if (qr_graph_optimize(*g, e) != QR_OK) {
        qr_error_prefix(e, "%s", path);
        qr_graph_free(*g);
        *g = NULL;
        return QR_ERR;
    }
    return QR_OK;
}

int cli_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return 0;
    *out = (int)v;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("qrl %s\n", QRL_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "dump"))
        return cli_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval"))
        return cli_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "check"))
        return cli_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize"))
        return cli_quantize(argc - 1, argv + 1);
    fprintf(stderr, "qrl: unknown command '%s'\n(see qrl --help)\n", cmd);
    return 2;
}
