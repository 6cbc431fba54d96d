/* The epilogue and second-stage programs joined (vecjoin.h). */
#include "vecjoin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most instructions a stage's program is read for (compiler/vecmap.h's bound; the JIT refuses
 * a joined program past it). */
#define JOIN_MAX 96

typedef struct out_buf {
    char *s;
    size_t n, len;
    int ok, count;
} out_buf;

static void put(out_buf *o, const char *fmt, ...)
{
    if (!o->ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->s + o->len, o->n - o->len, fmt, ap);
    va_end(ap);
    if (w < 0 || o->len + (size_t)w >= o->n)
        o->ok = 0;
    else
        o->len += (size_t)w;
}

/* An instruction: put it, ';' first when one came before; its number in the joined program. */
static int insn(out_buf *o, const char *fmt, ...)
{
    if (!o->ok)
        return -1;
    if (o->count)
        put(o, ";");
    va_list ap;
    va_start(ap, fmt);
    char tmp[128];
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof tmp)
        o->ok = 0;
    put(o, "%s", tmp);
    return o->ok ? o->count++ : -1;
}

/* The table of parameter p read as kind k: its number after tab0, added once. */
static int param_table(qi_join_param *ps, int *np, int p, char k, int tab0)
{
    for (int i = 0; i < *np; i++)
        if (ps[i].param == p && ps[i].kind == k)
            return tab0 + i;
    if (*np >= QI_JOIN_MAX_PARAMS)
        return -1;
    ps[*np] = (qi_join_param){p, k};
    return tab0 + (*np)++;
}

int qi_vec_join(const char *ep, const char *st, int y_param, int skip_param, int tab0, char *out, size_t n,
                qi_join_param *params, int *nparams)
{
    out_buf o = {out, n, 0, n > 0, 0};
    *nparams = 0;
    if (!n)
        return 0;
    out[0] = 0;
    /* the epilogue as it is, counting its instructions */
    for (const char *s = ep; *s && o.ok;) {
        const char *e = strchr(s, ';');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        insn(&o, "%.*s", (int)len, s);
        s += len + (e != NULL);
    }
    int y = o.count - 1, map[JOIN_MAX], ns = 0;
    if (y < 0)
        return 0;
    for (const char *s = st; *s && o.ok; ns++) {
        const char *e = strchr(s, ';');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char text[128], op[16];
        if (len >= sizeof text || ns >= JOIN_MAX)
            return 0;
        memcpy(text, s, len);
        text[len] = 0;
        s += len + (e != NULL);
        int at = 0;
        if (sscanf(text, "%15s%n", op, &at) != 1)
            return 0;
        const char *rest = text + at;
        char *end;
        if (!strncmp(op, "in.", 3) && (!strcmp(op + 3, "u8") || !strcmp(op + 3, "i8"))) {
            long p = strtol(rest, &end, 10);
            if (end == rest || *end)
                return 0;
            if (p == y_param)
                map[ns] = y; /* y's element: the epilogue's byte, held in i32 lanes */
            else if (p == skip_param)
                map[ns] = insn(&o, "skip.%s", op + 3);
            else
                return 0;
        } else if (!strcmp(op, "pari") || !strcmp(op, "parf") || !strcmp(op, "pard")) {
            long p = strtol(rest, &end, 10);
            int t = end == rest || *end || p < 0 ? -1 : param_table(params, nparams, (int)p, op[3], tab0);
            if (t < 0 || t >= 64)
                return 0;
            map[ns] = insn(&o, "tab%c %d", op[3] == 'i' ? 'i' : 'f', t);
        } else if (!strcmp(op, "consti") || !strcmp(op, "constf")) {
            map[ns] = insn(&o, "%s", text); /* its immediate is bits, not a value's number */
        } else if (!strcmp(op, "acc") || !strncmp(op, "tab", 3) || !strncmp(op, "skip", 4)) {
            return 0; /* a stage reads none of these */
        } else {
            char line[128];
            int w = snprintf(line, sizeof line, "%s", op);
            while (*rest) {
                while (*rest == ' ')
                    rest++;
                if (!*rest)
                    break;
                long a = strtol(rest, &end, 10);
                if (end == rest || a < 0 || a >= ns || w < 0 || (size_t)w >= sizeof line)
                    return 0;
                w += snprintf(line + w, sizeof line - (size_t)w, " %d", map[a]);
                rest = end;
            }
            if (w < 0 || (size_t)w >= sizeof line)
                return 0;
            map[ns] = insn(&o, "%s", line);
        }
        if (map[ns] < 0)
            return 0;
    }
    return o.ok && ns > 0;
}

uint32_t qi_join_bits(char kind, const void *v)
{
    uint32_t bits;
    if (kind == 'd') {
        float f = (float)*(const double *)v; /* as C converts: what the scalar code's f32(x) does */
        memcpy(&bits, &f, 4);
    } else {
        memcpy(&bits, v, 4); /* an int32_t's or a float's */
    }
    return bits;
}
