/* .npy read/write: round trips for every dtype, and the errors for bad files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
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
