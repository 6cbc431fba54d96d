#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: qrl <command> [options]\n"
    "\n"
    "commands (qrl COMMAND --help describes each option):\n"
    "  dump MODEL.onnx                      print the graph as text (ops, dtypes, shapes, attributes)\n"
    "  run  MODEL.onnx [-i|--input [NAME=]FILE]... [-o|--output-dir DIR] [--batch B] [--threads N]\n"
    "                 [--stats] [--profile] [--qdq-recipe R.qrl]\n"
    "                                       run the model; inputs .npy or .pb (ONNX TensorProto),\n"
    "                                       unnamed inputs bind in graph-input order; writes every\n"
    "                                       output to DIR/<output name>.npy (DIR defaults to .)\n"
    "                                       in slices of B samples (default 64) when they allow\n"
    "  run  MODEL.onnx --recipe R.qrl [--recipe-name NAME] --calib C.npy... [--calib-count N]\n"
    "                 -i FILE... [-o DIR]\n"
    "                                       quantize in memory, run the recipe's integer graph\n"
    "  eval MODEL.onnx --data X.npy... --labels Y.npy [--batch B] [--threads N]\n"
    "                 [--recipe R.qrl [--recipe-name NAME] --calib C.npy... [--calib-count N]]\n"
    "                                       top-1 accuracy of a classifier (fp32 vs int8 with a recipe)\n"
    "  quantize MODEL.onnx --recipe R.qrl --calib X.npy... -o|--output OUT.onnx [--calib-count N]\n"
    "                 [--batch B] [--threads N] [--recipe-name NAME] [--qparams Q.json]\n"
    "                 [--report R.html|R.json] [--int-graph G.txt] [--transformed T.onnx] [--labels Y.npy]\n"
    "                 [--no-cache] [--quiet] [--weight-format qdq|matmulnbits] [--external-data] [--profile]\n"
    "                                       quantize with a recipe; writes a QDQ ONNX model\n"
    "  bench MODEL.onnx [--recipe R.qrl [--recipe-name NAME] --calib C.npy... [--calib-count N]]\n"
    "                 [--batch 1,64] [--threads 1,2] [--min-time SEC] [--json FILE] [--profile] [--qdq-recipe R.qrl]\n"
    "                                       inference time per batch and thread count, f32 and int8\n"
    "  check FILE.qrl... [--dump-ast] [--time] [--no-cache]\n"
    "                                       compile recipe files and print their diagnostics\n"
    "\n"
    "options of every command:\n"
    "  --max-memory SIZE  memory budget for the tensors of a run (run, eval, quantize, bench), e.g. 512M\n"
    "                   or 4G; a model needing more is refused when planned, naming the tensor\n"
    "                   (default: half the RAM)\n"
    "  --max-recipe-time SECONDS  how long one call of recipe code (a calibrator, kernel or rule) may\n"
    "                   run before it stops with an error at its loop (default 60; 0: no limit)\n"
    "  --kernels auto|portable|avx2|avxvnni|avx512vnni  which kernels run (run, eval, quantize,\n"
    "                   bench): the CPU's fastest (auto), every op's portable C (portable), or the\n"
    "                   integer kernels of one instruction set the CPU has; the integer kernels' results\n"
    "                   are the same, f32 ones (so calibration's ranges) may differ in the last bits\n"
    "  --iconv-jit      compile the missing integer convolution kernels specialized to each layer's\n"
    "                   shape before the layers run (AVX-512 VNNI CPUs; 0.1 to 0.5 s per distinct\n"
    "                   layer, once: then kept in the module cache), so the first run is the fast one;\n"
    "                   by default (--option iconv-jit=auto) the cached ones run and the missing ones\n"
    "                   are compiled in the background for later runs (quantize: iconv-jit=cached, the\n"
    "                   cached ones only, nothing compiled); iconv-jit=0: none. Same results\n"
    "  --option NAME=VALUE  set one run-time switch, e.g. fuse=0, nhwc=all, poison=1: the tests'\n"
    "                   second paths, which give the same integer results (docs/runtime.md,\n"
    "                   \"Switches\", lists them and their values); repeatable, the last one wins\n"
    "  -h, --help       this text (after a command: that command's)\n"
    "  --version        print the version\n"
    "\n"
    "exit status: 0 success, 1 an error (a diagnostic on stderr), 2 a usage error\n";

int cli_fail(const char *msg)
{
    char safe[2 * CLI_ERRLEN]; /* names from a model may hold a newline or an escape sequence */
    fprintf(stderr, "qrl: error: %s\n", qrl_text_printable(msg, safe, sizeof safe));
    return 1;
}

void cli_error_prefix(char *err, const char *fmt, ...)
{
    char pre[512], old[CLI_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err, sizeof old);
    size_t n = strlen(pre);
    if (n > CLI_ERRLEN - 3)
        n = CLI_ERRLEN - 3;
    memcpy(err, pre, n);
    memcpy(err + n, ": ", 2);
    size_t m = strnlen(old, sizeof old), room = CLI_ERRLEN - n - 3;
    memcpy(err + n + 2, old, m < room ? m : room);
    err[n + 2 + (m < room ? m : room)] = 0;
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

void cli_tensors_free(qrl_tensor *t, int n)
{
    for (int i = 0; t && i < n; i++)
        qrl_tensor_free(&t[i]);
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

int cli_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    /* ranks of one job on this machine share its cores (mpirun sets the count) */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long ranks = local ? strtol(local, NULL, 10) : 1;
    if (ranks > 1)
        n /= ranks;
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* "4096", "512K", "64M", "4G", "1T" (binary units) into bytes; 0 when malformed or zero. */
static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return 0;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v > (SIZE_MAX >> shift))
        return 0;
    return (size_t)v << shift;
}

/* Started by mpirun as one rank of several: the ranks run qrl-mpi beside this binary, the same
 * program with the MPI transport (so qrl itself never depends on MPI). 0 to go on here (alone,
 * or this is qrl-mpi), else the exit status. */
static int exec_mpi(char **argv)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (qrl_dist_linked() || !size || strtol(size, NULL, 10) <= 1)
        return 0;
    char self[4096] = "qrl-mpi";
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        strcpy(slash ? slash + 1 : self, "qrl-mpi");
        execv(self, argv);
    }
    fprintf(stderr, "qrl: started by mpirun as one of %s ranks, but this qrl was built without Open MPI (%s: %s); "
                    "install libopenmpi-dev (tools/install-deps.sh) and rebuild\n",
            size, self, strerror(errno));
    return 1;
}

/* Takes the options of every command that set run-time switches out of argv, left to right (a
 * later one wins): --kernels NAME and --iconv-jit for users, --option NAME=VALUE for any switch
 * (the tests' second paths; docs/runtime.md, "Switches"). The switches come from the command
 * line alone: no variable of the environment sets one. 0, or 2 after a usage error. */
static int iconv_jit_given; /* --iconv-jit or --option iconv-jit=...: quantize's own default then stands aside */

static int options_from_args(int *argc, char **argv)
{
    char err[256];
    for (int i = 1; i < *argc; i++) {
        int take = 0;
        if (!strcmp(argv[i], "--kernels")) {
            if (i + 1 >= *argc || qrl_set_option("kernels", argv[i + 1], err, sizeof err)) {
                fprintf(stderr, "qrl: --kernels: %s\n(see qrl --help)\n",
                        i + 1 >= *argc ? "needs auto, portable, avx2, avxvnni or avx512vnni" : err);
                return 2;
            }
            take = 2;
        } else if (!strcmp(argv[i], "--iconv-jit")) {
            qrl_set_option("iconv-jit", "1", err, sizeof err);
            iconv_jit_given = 1;
            take = 1;
        } else if (!strcmp(argv[i], "--option")) {
            const char *nv = i + 1 < *argc ? argv[i + 1] : NULL, *eq = nv ? strchr(nv, '=') : NULL;
            char name[64];
            if (!eq || eq == nv || (size_t)(eq - nv) >= sizeof name) {
                fprintf(stderr, "qrl: --option: needs NAME=VALUE, not '%.64s' (docs/runtime.md, \"Switches\")\n"
                                "(see qrl --help)\n", nv ? nv : "");
                return 2;
            }
            snprintf(name, sizeof name, "%.*s", (int)(eq - nv), nv);
            iconv_jit_given |= !strcmp(name, "iconv-jit");
            if (qrl_set_option(name, eq + 1, err, sizeof err)) {
                fprintf(stderr, "qrl: --option: %s\n(see qrl --help)\n", err);
                return 2;
            }
            take = 2;
        }
        if (take) { /* argv[argc] stays NULL */
            memmove(argv + i, argv + i + take, sizeof *argv * (size_t)(*argc - i - take + 1));
            *argc -= take;
            i--;
        }
    }
    return 0;
}

static int run(int argc, char **argv);

int main(int argc, char **argv)
{
    int rc = exec_mpi(argv);
    if (rc)
        return rc;
    char err[1024];
    if (qrl_dist_start(&argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "qrl: %s\n", err);
        return 1;
    }
    rc = run(argc, argv);
    qrl_shape_kernels_stop(); /* before exit's handlers: libgccjit's own may run before the library's */
    qrl_dist_end(rc);
    return rc;
}

static int run(int argc, char **argv)
{
#ifdef __GLIBC__
    /* A quantize builds and frees an executor for every candidate its fallback measures, each
     * with the same large activation buffers: glibc would map and unmap them each time (a page
     * fault per page, zeroed by the kernel). Kept in the heap instead, they are reused: qrl
     * quantize of MobileNetV2, 1 thread, 35.8 -> 28.2 s at the same peak memory (2.2 GB); ResNet-18
     * 15.2 -> 14.1 s. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    /* Interrupted writes must not leave temporary files behind. */
    qrl_cleanup_on_signals();
    int st = options_from_args(&argc, argv);
    if (st)
        return st;
#ifdef __GLIBC__
    /* A quantize gives each phase's freed memory back at its end (malloc_trim), which reaches the
     * main heap's top only: the free top of a thread's arena stays resident, and which arena a
     * phase's new threads take is timing, so ResNet-18's peak (measurement of what ships, --threads
     * 1) was 176 MiB in some runs and 205 in others. One arena for every thread: 174 in each, the
     * same time (docs/quantizer.md, stop 38). */
    if (argc > 1 && !strcmp(argv[1], "quantize"))
        mallopt(M_ARENA_MAX, 1);
#endif
    /* A quantize compiles no shape kernel (iconv-jit=cached; the cache's still load): the search's
     * tries ask for kernels of graphs that never ship, and libgccjit's code and heap stayed resident
     * under the measurements -- PP-OCR cls's peak 99 -> 52 MB, its CPU 1.9 -> 0.8 s, the export
     * byte-identical (docs/quantizer.md, stop 42). The exported model's own runs compile its kernels
     * in the background, as any run does. */
    if (argc > 1 && !strcmp(argv[1], "quantize") && !iconv_jit_given) {
        char err[256];
        qrl_set_option("iconv-jit", "cached", err, sizeof err);
    }
    /* --max-memory applies to every command that runs a model: taken out here. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-memory") != 0)
            continue;
        size_t b = i + 1 < argc ? parse_size(argv[i + 1]) : 0;
        if (!b) {
            fprintf(stderr, "qrl: --max-memory needs a size such as 512M or 4G\n(see qrl --help)\n");
            return 2;
        }
        qrl_set_max_memory(b);
        memmove(argv + i, argv + i + 2, sizeof *argv * (size_t)(argc - i - 1)); /* keeps argv[argc] == NULL */
        argc -= 2;
        i--;
    }
    for (int i = 1; i < argc; i++) { /* --max-recipe-time too */
        if (strcmp(argv[i], "--max-recipe-time") != 0)
            continue;
        char *end = NULL;
        double sec = i + 1 < argc ? strtod(argv[i + 1], &end) : -1;
        if (!end || *end || !(sec >= 0) || sec > 1e9) {
            fprintf(stderr, "qrl: --max-recipe-time needs a number of seconds (0: no limit)\n(see qrl --help)\n");
            return 2;
        }
        qrl_set_recipe_time_limit(sec);
        memmove(argv + i, argv + i + 2, sizeof *argv * (size_t)(argc - i - 1));
        argc -= 2;
        i--;
    }
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
        printf("qrl %s\n", qrl_version());
        return 0;
    }
    if (qrl_dist_size() > 1 && strcmp(cmd, "quantize")) {
        if (qrl_dist_rank() == 0)
            fprintf(stderr, "qrl: qrl %s runs in one process; under mpirun only qrl quantize runs (docs/distributed.md)\n",
                    cmd);
        return 2;
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
    if (!strcmp(cmd, "bench"))
        return cli_bench(argc - 1, argv + 1);
    fprintf(stderr, "qrl: unknown command '%s'\n(see qrl --help)\n", cmd);
    return 2;
}
