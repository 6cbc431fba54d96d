/* Helpers shared by the Criterion suites: building small graphs by hand,
 * running the qrl command, temporary folders. */
#ifndef QR_TESTUTIL_H
#define QR_TESTUTIL_H

#include "graph.h"
#include "op.h"
#include "parallel.h"
#include "tensor.h"

/* A graph input of type f32 with the given shape. */
qr_value *tu_input(qr_graph *g, const char *name, int ndim, const int64_t *dims);
/* A constant f32 tensor; data copied. */
qr_value *tu_const_f32(qr_graph *g, const char *name, int ndim, const int64_t *dims, const float *data);
/* A node of a registered op with inputs in[0..nin) and fresh outputs named "<name>_out<j>". */
qr_node *tu_node(qr_graph *g, const char *op, const char *name, int nin, qr_value **in, int nout);
void tu_attr_int(qr_graph *g, qr_node *n, const char *name, int64_t v);
void tu_attr_float(qr_graph *g, qr_node *n, const char *name, float v);
void tu_attr_ints(qr_graph *g, qr_node *n, const char *name, int count, const int64_t *v);
void tu_output(qr_graph *g, qr_value *v);

/* Runs a shell command, capturing stdout+stderr (malloc'd) and the exit status. */
int tu_run(const char *cmd, char **output);
/* Runs the shell command fmt (printf-style) and returns its output (malloc'd); the test fails
 * unless it exits with status 0. */
char *tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* tu_qrl: the qrl command, for a shell line: the binary ($QRL_BIN, else build/qrl) in single
 * quotes, then --option poison=1 (outputs the executor does not zero start as 0xA5 bytes, so an
 * unwritten one fails a test instead of reading zeros). tu_qrl_bin: the binary's path alone.
 * tu_root: the project root ($QRL_ROOT, else .). */
const char *tu_qrl(void);
const char *tu_qrl_bin(void);
const char *tu_root(void);
/* A fresh temporary folder (malloc'd path); tu_rmdir removes it and its files. */
char *tu_tmpdir(void);
void tu_rmdir(char *dir);
int tu_file_exists(const char *path);
/* tools/make_transformer_models.py's small models into dir (the test fails if it fails). */
void tu_make_transformer_models(const char *dir);
/* A whole file, NUL-terminated (malloc'd); the test fails when it cannot be read. tu_slurp_root:
 * a path relative to the project root. */
char *tu_slurp(const char *path);
char *tu_slurp_root(const char *rel);
/* The number a JSON file (a report, qparams) holds under "key": its first occurrence; the test
 * fails without one. */
double tu_json_number(const char *path, const char *key);
/* SQNR in dB of the .npy test against the .npy ref, computed by numpy over all elements (test
 * reshaped to ref's shape): 10 log10(sum ref^2 / sum (ref - test)^2). */
double tu_npy_sqnr(const char *ref, const char *test);
/* max |ref - test| / max |ref| of two .npy files, by numpy. */
double tu_npy_rel_diff(const char *ref, const char *test);
/* The largest |a - b| over two f32 .npy files of the same shape (the test fails otherwise). */
double tu_npy_max_diff(const char *a, const char *b);
/* dir/name.npy written from t, or read into a tensor the caller frees with qr_tensor_free (the
 * test fails if it cannot). */
void tu_npy_save(const char *dir, const char *name, const qr_tensor *t);
qr_tensor tu_npy_load(const char *dir, const char *name);
/* Writes text to dir/name (the test fails if it cannot). */
void tu_write_file(const char *dir, const char *name, const char *text);
/* Count of files in dir (non-recursive, . and .. excluded). */
int tu_count_files(const char *dir);

/* One node of the op table run alone: domain/op at opset with the given attributes, inputs and
 * fused activation (NULL: none), shape inference then the kernel; the output, which the caller
 * frees with qr_tensor_free (the test fails if the op is unknown or either step fails). */
qr_tensor tu_op_run(const char *domain, const char *op, int opset, qr_attr *attrs, int nattr, const qr_tensor **in,
                    int nin, qr_pool *pool, const qr_act *act);
/* The next value of a seeded linear congruential sequence (0..32767): test data that is the same
 * on every machine, whatever the C library's rand(). */
unsigned tu_lcg(unsigned *seed);
/* The kernels' tests' fused activations applied to v: act 0 none, 1 Relu, 2 Clip(-0.5, 0.7). */
float tu_act_ref(int act, float v);

/* Fills x[0..n) with what a quantizing loop must get right, from a seed made of n and zero: NaN,
 * -0, +0, infinities, exact halves of the scale s (ties), values of +-1e6 order that saturate, and
 * values of both signs in range: (-200 .. 200) * in_range_unit. */
void tu_quant_inputs(float *x, int64_t n, int64_t zero, float s, float in_range_unit);

/* Sets one run-time switch of qr_options (options.h) by name, as qrl_set_option: "fuse" "0" keeps
 * every node apart, "nhwc" "" goes back to the default; the test fails on an unknown one. Every
 * test process starts with the defaults and poison on ("poison" "1"): an element a kernel leaves
 * unwritten reads 0xA5 bytes, not zeros. */
void tu_option(const char *name, const char *value);

/* Compiles a recipe file (path absolute or relative to the project root) with the stdlib; NULL
 * with the first diagnostic in err on failure. Through the test binary's own module cache, fresh
 * for each run of it ($QRL_TEST_MODULE_CACHE, testutil.c), else in memory. */
struct qrl_module *tu_compile(const char *rel, char *err, size_t n);

/* A file (or folder) the tests of one run of a test binary share, made once: several tests that
 * would each make it alike (the same model quantized by the same command) read one, and each still
 * asserts on what it reads. The path of name in the run's shared folder (malloc'd; made by the
 * PRE_ALL hook, removed after the last test). The first test that asks makes it: make(out, user)
 * writes out, a path beside it, which is then renamed to the path; a lock keeps tests run in
 * parallel from making it twice, and a maker that fails leaves nothing under the name (the next
 * test that asks tries again). A test must not change what it is given. */
char *tu_shared(const char *name, void (*make)(const char *out, void *user), void *user);

/* Function or kernel name of m, checked through the runtime's typed lookup (qr_module_fn_typed)
 * against its type written as a recipe writes types, "f64(f64[],tensor<u8>,qtype)" or
 * "void(i32)"; the test fails with the lookup's message when the type differs. */
const struct qr_fn_desc *tu_fn(const struct qrl_module *m, const char *name, const char *type);

/* The stdlib's qlinear (kernels.qrl: min(max(round_even(f32(acc + bias) * m) + f32(y_zero), floor), top),
 * then sat<T>) written out in C with the vector programs' rules (compiler/vecmap.h): i32 wraps, min is
 * a < b ? a : b and max a > b ? a : b, each giving a where b is NaN (tu_vmin, tu_vmax); sat<T> gives 0
 * for NaN, else clamps to T's range and truncates. y's byte, T i8 when i8. The oracle the generated
 * epilogues and the depthwise kernel's requantization are held to. */
float tu_vmin(float a, float b);
float tu_vmax(float a, float b);
uint8_t tu_qlinear_byte(int32_t acc, float m, int32_t bias, int32_t yz, float lo, float hi, int i8);

#endif
