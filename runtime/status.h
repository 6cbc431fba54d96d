/* Errors are values: a function that can fail on user input returns a qr_status
 * and writes one human-readable sentence into a qr_error. */
#ifndef QR_STATUS_H
#define QR_STATUS_H

#include <stdarg.h>

typedef enum qr_status {
    QR_OK = 0,
    QR_ERR = 1,       /* failure; the qr_error holds the message */
    QR_NEED_DATA = 2, /* shape inference needs the data of an input that is not known yet */
} qr_status;

typedef struct qr_error {
    char msg[1024];
} qr_error;

/* Formats the message into e (when e is not NULL) and returns QR_ERR. */
qr_status qr_errorf(qr_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
qr_status qr_verrorf(qr_error *e, const char *fmt, va_list ap);
/* Prepends "prefix: " to the message already in e (adds context on the way up). */
void qr_error_prefix(qr_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
