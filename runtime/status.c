#include "status.h"

#include <stdio.h>
#include <string.h>

qr_status qr_verrorf(qr_error *e, const char *fmt, va_list ap)
{
    if (e)
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return QR_ERR;
}

qr_status qr_errorf(qr_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qr_verrorf(e, fmt, ap);
    va_end(ap);
    return QR_ERR;
}

void qr_error_prefix(qr_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char pre[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(pre);
    if (n > sizeof e->msg - 3)
        n = sizeof e->msg - 3;
    memcpy(e->msg, pre, n);
    memcpy(e->msg + n, ": ", 2);
    size_t m = strlen(old), room = sizeof e->msg - n - 3;
    memcpy(e->msg + n + 2, old, m < room ? m : room);
    e->msg[n + 2 + (m < room ? m : room)] = 0;
}
