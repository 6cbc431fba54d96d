#include "reach.h"

#include <string.h>

#include "check.h"
#include "recipe.h"

/* The index of item s, or -1 (affine rules share names, so they are not looked up here). */
static int index_of(const qc_unit *u, const qc_sym *s)
{
    int i = qc_names_find(&u->item_names, u->items, s->name);
    return i >= 0 && u->items[i] == s ? i : -1;
}

static void walk(const qc_unit *u, const ql_node *n, unsigned char *mark);

/* A kernel's tile kernel (an element-wise epilogue's) goes wherever the kernel goes: the runtime
 * calls it in the kernel's place. */
static void mark_tile(const qc_unit *u, const qc_sym *k, unsigned char *mark)
{
    char name[512];
    for (int v = 0; v < 2; v++) { /* k.tile, k.nhwc */
        int named = v ? qr_nhwc_name(k->name, name, sizeof name) : qr_tile_name(k->name, name, sizeof name);
        int i = named == 0 ? qc_names_find(&u->item_names, u->items, name) : -1;
        if (i >= 0 && !mark[i]) {
            mark[i] = 1;
            walk(u, u->items[i]->decl, mark);
        }
    }
}

static void walk(const qc_unit *u, const ql_node *n, unsigned char *mark)
{
    if (!n)
        return;
    const qc_sym *s = n->sym;
    if (s && (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL || s->kind == QC_SYM_CALIBRATOR ||
              s->kind == QC_SYM_CONST || s->kind == QC_SYM_TRANSFORM)) {
        int i = index_of(u, s);
        if (i >= 0 && !mark[i]) {
            mark[i] = 1;
            walk(u, s->decl, mark);
            if (s->kind == QC_SYM_KERNEL)
                mark_tile(u, s, mark);
        }
    }
    walk(u, n->a, mark);
    walk(u, n->b, mark);
    walk(u, n->c, mark);
    walk(u, n->d, mark);
    for (int i = 0; i < n->nkids; i++)
        walk(u, n->kids[i], mark);
}

void qc_reach_calls(const qc_unit *u, int idx, unsigned char *mark)
{
    walk(u, u->items[idx]->decl, mark);
}

int qc_reach_is_hook(const qc_sym *s)
{
    int id = s->kind == QC_SYM_FN ? qr_setting_find(s->name) : -1;
    return id >= 0 && qr_setting_defs[id].kind == QR_SK_HOOK;
}

/* Whether recipe r uses the pattern or affine rule named name: every one without a use list. */
static int uses(const ql_node *r, const char *name)
{
    int lists = 0;
    for (int i = 0; i < r->nkids; i++) {
        const ql_node *k = r->kids[i];
        if (k->kind != QL_USE)
            continue;
        lists = 1;
        for (int j = 0; j < k->nkids; j++)
            if (k->kids[j]->name && !strcmp(k->kids[j]->name, name))
                return 1;
    }
    return !lists;
}

/* The recipes a module offers: the root file's (an imported file's recipes are bases a recipe of it
 * derives from, already in its settings), or, when it has none, every file's. */
static int offered(const qc_unit *u, const qc_sym *s, int root_has)
{
    return s->kind == QC_SYM_RECIPE && (!root_has || s->file == u->files[u->nfiles - 1]);
}

int qc_reach(const qc_unit *u, unsigned char *emit)
{
    int recipes = 0, root_has = 0;
    for (int i = 0; i < u->nitems; i++) {
        recipes += u->items[i]->kind == QC_SYM_RECIPE;
        root_has |= u->items[i]->kind == QC_SYM_RECIPE && u->items[i]->file == u->files[u->nfiles - 1];
    }
    if (!recipes) {
        memset(emit, 1, (size_t)u->nitems);
        return 0;
    }
    for (int i = 0; i < u->nitems; i++) {
        const qc_sym *s = u->items[i];
        int want = offered(u, s, root_has);
        for (int r = 0; !want && r < u->nitems && (s->kind == QC_SYM_PATTERN || s->kind == QC_SYM_AFFINE); r++)
            want = offered(u, u->items[r], root_has) && uses(u->items[r]->decl, s->name);
        want |= qc_reach_is_hook(s); /* the quantizer calls it by name */
        if (want) {
            emit[i] = 1;
            qc_reach_calls(u, i, emit);
        }
    }
    return 1;
}
