/* qparams_backend: what a back end (a code generator, an accelerator's compiler) needs from QRL,
 * through the public C API alone: every tensor of the ORIGINAL model, by its name there, with the
 * dtype, scale(s) and zero point(s) it was quantized to.
 *
 *   qparams_backend MODEL.onnx RECIPE.qrl CALIB.npy... [-o OUT.onnx]
 *       quantizes MODEL with RECIPE, calibrating on the CALIB files (one .npy per model input,
 *       or NAME=FILE), prints the qparams, and writes the QDQ model to OUT.onnx when asked
 *       (ONNX Runtime runs it; the same scales and zero points are in its initializers).
 *
 * One line per tensor of the model, in graph order (inputs, then each node's inputs and
 * outputs), tab-separated:
 *
 *   NAME  DTYPE  axis=A  scale=S[,S...]  zero_point=Z[,Z...]     a quantized tensor
 *   NAME  f32                                                   a tensor left in float
 *
 * The names are the model's, not the integer graph's: QRL's integer graph renames what it
 * lowers ("x_quantized", "x_nhwc" for a tensor it keeps channels-last, "x_f32" for the float
 * value before a QuantizeLinear), and qrl_quantized_qparams maps back.
 *
 * Build against an installed QRL (make install):
 *   cc qparams_backend.c $(pkg-config --cflags --libs qrl) -o qparams_backend
 * The recipes are installed in $(pkg-config --variable=recipedir qrl). */
#include <qrl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dtype_name(int onnx)
{
    switch (onnx) {
    case 1: return "f32";
    case 2: return "u8";
    case 3: return "i8";
    case 4: return "u16";
    case 5: return "i16";
    case 6: return "i32";
    case 7: return "i64";
    case 10: return "f16";
    case 11: return "f64";
    case 16: return "bf16";
    default: return "?";
    }
}

/* The names printed so far: a tensor read by several nodes is printed once. */
typedef struct seen {
    const char **names;
    int n, cap;
} seen;

static int first_time(seen *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name))
            return 0;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        const char **p = realloc(s->names, (size_t)cap * sizeof *p);
        if (!p)
            return 1; /* print it again rather than lose it */
        s->names = p;
        s->cap = cap;
    }
    s->names[s->n++] = name;
    return 1;
}

static void print_tensor(const qrl_quantized *q, seen *s, const char *name)
{
    qrl_quant qp;
    if (!name || !first_time(s, name))
        return;
    if (qrl_quantized_qparams(q, name, &qp) != 0) {
        printf("%s\tf32\n", name);
        return;
    }
    printf("%s\t%s\taxis=%d\tscale=", name, dtype_name(qp.dtype), qp.axis);
    if (qp.count == 0)
        printf("dynamic"); /* quantized at run time: no fixed scale */
    for (int i = 0; i < qp.count; i++)
        printf("%s%.9g", i ? "," : "", qp.scale[i]);
    printf("\tzero_point=");
    if (qp.count == 0)
        printf("dynamic");
    for (int i = 0; i < qp.count; i++)
        printf("%s%d", i ? "," : "", (int)qp.zero_point[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    char err[1024];
    const char *out = NULL;
    if (argc >= 4 && !strcmp(argv[argc - 2], "-o")) {
        out = argv[argc - 1];
        argc -= 2;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.onnx RECIPE.qrl CALIB.npy... [-o OUT.onnx]\n", argv[0]);
        return 2;
    }
    qrl_model *m = NULL;
    qrl_quantized *q = NULL;
    qrl_recipe *r = NULL;
    qrl_tensor *calib = NULL;
    int status = 1, ninputs = 0;
    /* The model as the back end sees it, the recipe (its imports come from the installed
     * stdlib), the calibration samples (checked against the model's inputs), and the quantization. */
    if (qrl_model_load(argv[1], 0, &m, err, sizeof err) != 0 ||
        qrl_recipe_compile(argv[2], 0, stderr, &r, err, sizeof err) != 0)
        goto fail;
    ninputs = qrl_model_num_inputs(m);
    calib = calloc((size_t)ninputs + 1, sizeof *calib);
    if (!calib) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    if (qrl_model_read_inputs(m, argv[1], "calibration", argc - 3, &argv[3], 1, calib, err, sizeof err) != 0 ||
        qrl_quantize(m, r, calib, NULL, &q, err, sizeof err) != 0)
        goto fail;
    if (out && qrl_quantized_save(q, out, err, sizeof err) != 0)
        goto fail;

    /* Walk the model the back end compiles, naming tensors as it does. */
    seen s = {0};
    for (int i = 0; i < qrl_model_num_inputs(m); i++)
        print_tensor(q, &s, qrl_model_input(m, i));
    for (int n = 0; n < qrl_model_num_nodes(m); n++) {
        for (int i = 0; i < qrl_node_num_inputs(m, n); i++)
            print_tensor(q, &s, qrl_node_input(m, n, i));
        for (int i = 0; i < qrl_node_num_outputs(m, n); i++)
            print_tensor(q, &s, qrl_node_output(m, n, i));
    }
    free(s.names);
    status = 0;
fail:
    if (status)
        fprintf(stderr, "qparams_backend: %s\n", err);
    for (int i = 0; calib && i < ninputs; i++)
        qrl_tensor_free(&calib[i]);
    free(calib);
    qrl_quantized_free(q);
    qrl_recipe_free(r);
    qrl_model_free(m);
    return status;
}
