#include "options.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static qr_options options;
static unsigned epoch;

unsigned qr_options_epoch(void)
{
    return __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
}

void qr_options_touch(void)
{
    __atomic_add_fetch(&epoch, 1, __ATOMIC_ACQ_REL);
}

const qr_options *qr_options_get(void)
{
    return &options;
}

void qr_options_set(const qr_options *o)
{
    if (o)
        options = *o;
    else
        memset(&options, 0, sizeof options);
    qr_options_touch();
}

_Static_assert(sizeof ((qr_options *)0)->igemm == sizeof ((qr_options *)0)->sgemm, "string fields of one size");

#define INT_FIELD(f) offsetof(qr_options, f), -1
#define STR_FIELD(f) -1, offsetof(qr_options, f)

/* Each option's values, the default first: an int field gets the index of the value given (the
 * enums of options.h are in this order), a string field the value ("" for the default). */
typedef struct option_def {
    const char *name;
    const char *values[6];
    ptrdiff_t int_at, str_at;
} option_def;

static const option_def defs[] = {
    {"kernels", {"auto", "portable", "avx2", "avxvnni", "avx512vnni"}, -1, -1},
    {"iconv-jit", {"auto", "0", "1", "cached"}, INT_FIELD(iconv_jit)},
    {"igemm", {"auto", "portable", "avx2", "avxvnni", "avx512vnni"}, STR_FIELD(igemm)},
    {"sgemm", {"auto", "portable", "avx512", "avx2", "ref"}, STR_FIELD(sgemm)},
    {"quant", {"auto", "portable"}, INT_FIELD(quant_portable)},
    {"window", {"auto", "portable"}, INT_FIELD(window_portable)},
    {"f32-rows", {"auto", "portable"}, INT_FIELD(f32_rows_portable)},
    {"fuse", {"1", "0"}, INT_FIELD(no_fuse)},
    {"nhwc", {"auto", "0", "all"}, INT_FIELD(nhwc)},
    {"epilogue", {"auto", "turn", "rows", "whole"}, INT_FIELD(epilogue)},
    {"split", {"auto", "rows", "cols"}, INT_FIELD(split)},
    {"poison", {"0", "1"}, INT_FIELD(poison)},
    {"effects", {"downstream", "whole", "cut"}, INT_FIELD(effects)},
    {"bands", {"auto", "0", "all"}, INT_FIELD(bands)},
    {"parts", {"auto", "whole", "1", "2", "4", "8"}, INT_FIELD(parts)},
    {"gather", {"auto", "rows"}, INT_FIELD(gather_rows)},
    {"winograd", {"auto", "0", "all"}, INT_FIELD(no_winograd)},
    {"amx", {"auto", "0"}, INT_FIELD(no_amx)},
    {"wide16", {"auto", "0"}, INT_FIELD(no_wide16)},
    {"f32-split", {"auto", "all"}, INT_FIELD(f32_split_all)},
    {"held-ghost", {"0", "1"}, INT_FIELD(held_ghost)},
    {"halves", {"auto", "whole"}, INT_FIELD(halves_whole)},
    {"arena-pages", {"auto", "4k", "2m"}, INT_FIELD(arena_pages)},
};

/* dst (a string field) holds s and zeros after it: equal options compare equal bytewise. */
static void set_str(char *dst, const char *s)
{
    memset(dst, 0, sizeof ((qr_options *)0)->igemm);
    snprintf(dst, sizeof ((qr_options *)0)->igemm, "%s", s);
}

/* kernels: portable is every kernel's portable path, an ISA the integer kernels' (the f32 ones
 * keep the CPU's best), auto all of them the CPU's best. */
static void set_kernels(qr_options *o, int v, const char *word)
{
    int portable = v == 1;
    set_str(o->igemm, v == 0 ? "" : word);
    set_str(o->sgemm, portable ? "portable" : "");
    o->quant_portable = o->window_portable = o->f32_rows_portable = portable;
}

qr_status qr_options_parse(qr_options *o, const char *name, const char *value, qr_error *e)
{
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        const option_def *d = &defs[i];
        if (strcmp(d->name, name) != 0)
            continue;
        char list[128] = "";
        for (int v = 0; v < 6 && d->values[v]; v++) {
            if (!strcmp(value, d->values[v]) || (v == 0 && !value[0])) {
                if (d->int_at >= 0)
                    *(int *)((char *)o + d->int_at) = v;
                else if (d->str_at >= 0)
                    set_str((char *)o + d->str_at, v == 0 ? "" : d->values[v]);
                else
                    set_kernels(o, v, d->values[v]);
                return QR_OK;
            }
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s%s", v ? ", " : "", d->values[v]);
        }
        return qr_errorf(e, "option %s takes %s, not '%.64s'", name, list, value);
    }
    char names[256] = "";
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", defs[i].name);
    }
    return qr_errorf(e, "no option named '%.64s' (the options: %s)", name, names);
}
