/* .npy read/write: round trips for every dtype, and the errors for bad files. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "onnx_import.h"
#include "tensor_io.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_tmpdir(); }
static void teardown(void) { tu_rmdir(dir); }

TestSuite(tensor_io, .init = setup, .fini = teardown);

Test(tensor_io, roundtrip_every_dtype)
{
    const qr_dtype types[] = {QR_F32, QR_F64, QR_I8, QR_U8, QR_I16, QR_I32, QR_I64, QR_BOOL, QR_U16, QR_F16};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        qr_tensor t = {.dtype = types[k], .ndim = 3, .dims = {2, 3, 4}}, r;
        qr_error e;
        cr_assert_eq(qr_tensor_alloc(&t, &e), QR_OK);
        for (int i = 0; i < 24; i++)
            qr_set_f64(t.data, t.dtype, i, types[k] == QR_BOOL ? i % 2 : i - 5);
        char path[512];
        snprintf(path, sizeof path, "%s/t%zu.npy", dir, k);
        cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_npy_read(path, &r, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(r.dtype, t.dtype);
        cr_assert(qr_tensor_same_shape(&r, &t));
        cr_assert_eq(memcmp(r.data, t.data, qr_tensor_nbytes(&t)), 0, "dtype %s", qr_dtype_name(t.dtype));
        qr_tensor_free(&t);
        qr_tensor_free(&r);
    }
}

Test(tensor_io, scalar_and_1d_headers_match_numpy)
{
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {5}}, s = {.dtype = QR_I64, .ndim = 0};
    qr_error e;
    qr_tensor_alloc(&t, &e);
    qr_tensor_alloc(&s, &e);
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/v.npy", dir);
    snprintf(p2, sizeof p2, "%s/s.npy", dir);
    cr_assert_eq(qr_npy_write(p1, &t, &e), QR_OK);
    cr_assert_eq(qr_npy_write(p2, &s, &e), QR_OK);
    unsigned char *buf;
    size_t len;
    cr_assert_eq(qr_read_file(p1, 1 << 20, &buf, &len, &e), QR_OK);
    cr_assert(strstr((char *)buf + 10, "'shape': (5,)"), "header: %s", buf + 10);
    cr_assert_eq((len - 5 * 4) % 64, 0, "data is 64-byte aligned");
    free(buf);
    cr_assert_eq(qr_read_file(p2, 1 << 20, &buf, &len, &e), QR_OK);
    cr_assert(strstr((char *)buf + 10, "'shape': ()"), "header: %s", buf + 10);
    free(buf);
    qr_tensor_free(&t);
    qr_tensor_free(&s);
}

static const char *parse_error(const char *bytes, size_t len)
{
    static qr_error e;
    qr_tensor t;
    if (qr_npy_parse((const unsigned char *)bytes, len, "x.npy", &t, &e) == QR_OK) {
        qr_tensor_free(&t);
        return NULL;
    }
    return e.msg;
}

#define HDR(dict) "\x93NUMPY\x01\x00" dict

static const char *with_len(const char *dict, size_t data_bytes, size_t *len)
{
    static char buf[512];
    size_t n = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)n;
    buf[9] = 0;
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, 0, data_bytes);
    *len = 10 + n + data_bytes;
    return buf;
}

Test(tensor_io, errors_name_the_problem)
{
    size_t len;
    const char *m;
    m = parse_error("not numpy at all", 16);
    cr_assert(m && strstr(m, "x.npy: not a .npy file"), "%s", m);
    const char *b = with_len("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "Fortran"), "%s", m);
    b = with_len("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", 15, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "truncated") && strstr(m, "15 data bytes, expected 16"), "%s", m);
    b = with_len("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 4, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "big-endian"), "%s", m);
    b = with_len("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", 8, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "'c8' is not supported"), "%s", m);
    b = with_len("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000000), }\n", 0, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "too large"), "%s", m);
    b = with_len("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }\n", 0, &len);
    m = parse_error(b, len);
    cr_assert(m && strstr(m, "shape"), "%s", m);
    m = parse_error(HDR("\x40\x00{'descr'"), 17);
    cr_assert(m && strstr(m, "truncated .npy header"), "%s", m);
}

Test(tensor_io, unknown_extension)
{
    qr_tensor t;
    qr_error e;
    cr_assert_eq(qr_tensor_read_file("data.csv", &t, &e), QR_ERR);
    cr_assert(strstr(e.msg, "data.csv: unknown tensor file type"), "%s", e.msg);
}

Test(tensor_io, atomic_write_leaves_nothing_on_failure)
{
    qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {3}};
    qr_error e;
    qr_tensor_alloc(&t, &e);
    char path[512];
    snprintf(path, sizeof path, "%s/missing-folder/out.npy", dir);
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_ERR);
    cr_assert(strstr(e.msg, "missing-folder/out.npy"), "%s", e.msg);
    cr_assert_eq(tu_count_files(dir), 0);
    qr_tensor_free(&t);
}

/* Keys are read from the dict's structure: a key-like text inside a string
 * value is not a key (it fooled a strstr-based reader into the wrong shape). */
Test(tensor_io, header_decoy_key_in_a_string)
{
    size_t len;
    const char *b = with_len("{'note': \"'shape': (100,), 'fortran_order': True\", 'descr': '<f4', "
                             "'fortran_order': False, 'shape': (1,), }\n", 4, &len);
    qr_tensor t;
    qr_error e;
    cr_assert_eq(qr_npy_parse((const unsigned char *)b, len, "x.npy", &t, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(t.ndim, 1);
    cr_assert_eq(t.dims[0], 1);
    qr_tensor_free(&t);
    /* A key given twice is malformed, not "the first one wins". */
    b = with_len("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (2,), }\n", 8, &len);
    const char *m = parse_error(b, len);
    cr_assert(m && strstr(m, "malformed"), "%s", m);
}

/* A signal in the middle of a write removes the temporary file (qrl installs
 * the handler at start): nothing is left behind in the output folder. */
Test(tensor_io, temp_file_removed_on_sigterm)
{
    char *d = tu_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/out.npy", d);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        qr_atomic_cleanup_on_signals();
        qr_atomic_file a;
        qr_error e;
        if (qr_atomic_open(&a, path, &e) != QR_OK)
            _exit(3);
        fputs("partial", a.f);
        fflush(a.f);
        raise(SIGTERM);
        _exit(4); /* not reached */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "child status %d", status);
    cr_assert_eq(tu_count_files(d), 0, "a temporary file was left in %s", d);
    tu_rmdir(d);
}

/* dir/<pb>: a TensorProto of six f32 whose data is external, at loc (tools-free: onnx in Python). */
static void external_tensor(const char *pb, const char *loc)
{
    char cmd[2048], *log;
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import sys, numpy as np\nfrom onnx import numpy_helper, TensorProto\n"
             "t = numpy_helper.from_array(np.ones(6, np.float32), \"w\")\nt.ClearField(\"raw_data\")\n"
             "t.data_location = TensorProto.EXTERNAL\n"
             "for k, v in ((\"location\", sys.argv[2]), (\"offset\", \"0\"), (\"length\", \"24\")):\n"
             "    e = t.external_data.add(); e.key, e.value = k, v\n"
             "open(sys.argv[1], \"wb\").write(t.SerializeToString())' '%s/%s' '%s'",
             dir, pb, loc);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
}

/* dir/<name>: six f32 of value v. */
static void six_floats(const char *name, float v)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    float x[6] = {v, v, v, v, v, v};
    fwrite(x, sizeof x, 1, f);
    fclose(f);
}

/* A symbolic link in the tensor's folder that names a file outside it is refused, naming the
 * location, the tensor and where it leads; one that stays inside is read. */
Test(tensor_io, external_data_through_a_link_out_of_the_folder_is_refused)
{
    char p[700], q[700];
    snprintf(p, sizeof p, "%s/m", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    six_floats("outside.bin", 7);
    six_floats("m/data.bin", 1);
    snprintf(p, sizeof p, "%s/m/out.bin", dir);
    cr_assert_eq(symlink("../outside.bin", p), 0);
    snprintf(p, sizeof p, "%s/m/in.bin", dir);
    cr_assert_eq(symlink("data.bin", p), 0);
    external_tensor("m/out.pb", "out.bin");
    external_tensor("m/in.pb", "in.bin");
    qr_tensor t;
    qr_error e;
    snprintf(p, sizeof p, "%s/m/out.pb", dir);
    cr_assert_eq(qr_onnx_load_tensor(p, &t, NULL, &e), QR_ERR);
    snprintf(q, sizeof q, "%s/m/out.pb: tensor: external data location 'out.bin' is outside the model's folder (it is '", dir);
    cr_expect(strstr(e.msg, q) && strstr(e.msg, "/outside.bin')"), "%s", e.msg);
    snprintf(p, sizeof p, "%s/m/in.pb", dir);
    cr_assert_eq(qr_onnx_load_tensor(p, &t, NULL, &e), QR_OK, "%s", e.msg);
    cr_expect_eq(((float *)t.data)[5], 1.0f);
    qr_tensor_free(&t);
}

static volatile int swapping;
static char swap_a[700], swap_b[700];

/* Exchanges a folder and a symbolic link to a folder outside, atomically, as fast as it can. */
static void *swapper(void *arg)
{
    (void)arg;
    while (swapping)
        syscall(SYS_renameat2, AT_FDCWD, swap_a, AT_FDCWD, swap_b, 2 /* RENAME_EXCHANGE */);
    return NULL;
}

/* The race of a path checked, then opened: m/sub, a folder of the tensor's folder, is swapped again
 * and again with a symbolic link to a folder outside (renameat2 RENAME_EXCHANGE) while the tensor
 * is read. A read either fails or gives the inside file's values (1), never the outside one's (7).
 * realpath() then open() gave 7 (the link swapped in after the check). */
Test(tensor_io, external_data_swapped_for_a_link_cannot_escape, .timeout = 120)
{
    char p[700];
    snprintf(p, sizeof p, "%s/m", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/m/sub", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/out", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    six_floats("m/sub/w.bin", 1);
    six_floats("out/w.bin", 7);
    snprintf(p, sizeof p, "%s/m/alt", dir);
    cr_assert_eq(symlink("../out", p), 0);
    external_tensor("m/t.pb", "sub/w.bin");
    snprintf(swap_a, sizeof swap_a, "%s/m/sub", dir);
    snprintf(swap_b, sizeof swap_b, "%s/m/alt", dir);
    swapping = 1;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, swapper, NULL), 0);
    snprintf(p, sizeof p, "%s/m/t.pb", dir);
    int ok = 0, refused = 0, escaped = 0;
    for (int i = 0; i < 20000 && !escaped; i++) {
        qr_tensor t;
        qr_error e;
        if (qr_onnx_load_tensor(p, &t, NULL, &e) == QR_OK) {
            ok++;
            escaped += ((float *)t.data)[0] != 1.0f;
            qr_tensor_free(&t);
        } else
            refused++;
    }
    swapping = 0;
    pthread_join(th, NULL);
    cr_expect_eq(escaped, 0, "a read gave the outside file's values (%d read, %d refused)", ok, refused);
    cr_expect(ok > 0 && refused > 0, "%d read, %d refused: the swap happened", ok, refused);
}
