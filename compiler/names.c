/* Open-addressed string index; see names.h. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "../lang/arena.h"

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int qc_names_find(const qc_names *h, struct qc_sym *const *v, const char *name)
{
    if (!h->cap)
        return -1;
    for (unsigned i = hash(name) & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        int p = h->slot[i];
        if (!p)
            return -1;
        if (strcmp(v[p - 1]->name, name) == 0)
            return p - 1;
    }
}

static void put(int *slot, unsigned cap, const char *name, int pos)
{
    unsigned i = hash(name) & (cap - 1);
    while (slot[i])
        i = (i + 1) & (cap - 1);
    slot[i] = pos + 1;
}

int qc_names_add(qc_names *h, struct qc_sym *const *v, int pos)
{
    if (qc_names_find(h, v, v[pos]->name) >= 0)
        return 0;
    if ((unsigned)(h->n + 1) * 2 > h->cap) { /* at most half full */
        unsigned cap = h->cap ? h->cap * 2 : 16;
        int *slot = h->ar ? ql_alloc(h->ar, cap * sizeof *slot) : calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (unsigned i = 0; i < h->cap; i++)
            if (h->slot[i])
                put(slot, cap, v[h->slot[i] - 1]->name, h->slot[i] - 1);
        if (!h->ar)
            free(h->slot);
        h->slot = slot;
        h->cap = cap;
    }
    put(h->slot, h->cap, v[pos]->name, pos);
    h->n++;
    return 0;
}

void qc_names_free(qc_names *h)
{
    struct ql_arena *ar = h->ar;
    if (!ar)
        free(h->slot);
    memset(h, 0, sizeof *h);
    h->ar = ar;
}
