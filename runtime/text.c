#include "text.h"

int qr_utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* overlong three- and four-byte forms, UTF-16 surrogates, past U+10FFFF */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

/* Appends the printable form of s to out[*k..n), or writes it to f when f is set. */
static void printable(const char *s, FILE *f, char *out, size_t n, size_t *k)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int len = qr_utf8_len(p);
        char esc[8];
        const char *piece = esc;
        size_t pl;
        if (len == 1 && *p >= 0x20 && *p != 0x7f && *p != '\\')
            piece = (const char *)p, pl = 1;
        else if (len > 1)
            piece = (const char *)p, pl = (size_t)len;
        else if (*p == '\\')
            pl = (size_t)snprintf(esc, sizeof esc, "\\\\");
        else
            pl = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *p);
        p += len > 1 ? len : 1;
        if (f)
            fwrite(piece, 1, pl, f);
        else
            for (size_t i = 0; i < pl && *k + 1 < n; i++)
                out[(*k)++] = piece[i];
    }
}

char *qr_text_printable(const char *s, char *out, size_t n)
{
    size_t k = 0;
    if (n == 0)
        return out;
    printable(s ? s : "", NULL, out, n, &k);
    out[k] = 0;
    return out;
}

void qr_fput_printable(FILE *f, const char *s)
{
    printable(s ? s : "", f, NULL, 0, NULL);
}

void qr_fput_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    qr_fput_json_chars(f, s);
    fputc('"', f);
}

void qr_fput_json_chars(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        int len = qr_utf8_len(p);
        if (len == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (len > 1) {
            fwrite(p, 1, (size_t)len, f);
            p += len;
        } else {
            if (*p == '"' || *p == '\\')
                fprintf(f, "\\%c", *p);
            else if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
            p++;
        }
    }
}
