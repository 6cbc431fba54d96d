/* Text from outside (a model's names, paths, strings in files) as it may be printed to a terminal
 * or stored in JSON: a name may hold a newline, an escape sequence or bytes that are not UTF-8. */
#ifndef QR_TEXT_H
#define QR_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* The length of the valid UTF-8 sequence at s (1 to 4, no overlong forms or surrogates), 0 when
 * the bytes there are not one. */
int qr_utf8_len(const unsigned char *s);
/* s with every control character, DEL and byte that is not valid UTF-8 written as \xHH (and a
 * backslash as \\), into out (truncated to n); returns out. */
char *qr_text_printable(const char *s, char *out, size_t n);
/* The same, to f. */
void qr_fput_printable(FILE *f, const char *s);
/* s as a JSON string literal: quotes, backslashes and control characters escaped, each byte
 * that is not valid UTF-8 as U+FFFD, so the file is valid JSON whatever s holds. */
void qr_fput_json_str(FILE *f, const char *s);
/* The same without the quotes (inside a literal being written). */
void qr_fput_json_chars(FILE *f, const char *s);

#endif
