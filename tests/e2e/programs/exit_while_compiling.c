/* A program using libqrl the way a back end or a service might: it loads an int8 QDQ model, lowers
 * it (stdlib/qdq.qrl), runs it once and returns from main after DELAY_MS milliseconds without
 * freeing anything or calling qrl_shape_kernels_stop. On an AVX-512 VNNI CPU the run asks for its
 * layers' kernels (iconv-jit=auto), which a background thread compiles into the module cache: the
 * return lands while it compiles. It must exit 0 (test_lib_exit.c).
 *
 *   exit_while_compiling MODEL.onnx INPUT.npy DELAY_MS */
#define _POSIX_C_SOURCE 200809L
#include <qrl.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    char err[1024];
    qrl_model *m = NULL;
    qrl_quantized *q = NULL;
    qrl_tensor in[1], out[1] = {{0}};
    /* the background compilation is the VNNI path's: AMX, where the CPU has it, asks for none */
    if (argc != 4 || qrl_set_option("amx", "0", err, sizeof err) != 0 || qrl_model_load(argv[1], 1, &m, err, sizeof err) != 0 ||
        qrl_model_lower_qdq(m, NULL, stderr, &q, err, sizeof err) != 0 ||
        qrl_model_read_inputs(m, argv[1], "-i", 1, &argv[2], 0, in, err, sizeof err) != 0 ||
        qrl_model_run(qrl_quantized_model(q, err, sizeof err), in, out, err, sizeof err) != 0) {
        fprintf(stderr, "exit_while_compiling: %s\n", argc == 4 ? err : "usage: MODEL.onnx INPUT.npy DELAY_MS");
        return 2;
    }
    long ms = atol(argv[3]);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    return 0;
}
