/* The checker (see check.h). One pass collects every file's items; a second
 * checks each item's body with nested scopes; a last one refuses recursion.
 * This file holds the diagnostics helpers, scopes and name lookup, the
 * recursion check and the entry, qc_check; the expressions and types are in
 * check_expr.c, the statements in check_stmt.c, the items and generics'
 * instances in check_items.c (their shared context: check_int.h). */
#include "check_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void chk_err(ctx *c, const ql_node *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ql_error(c->d, n->span, "%s", buf);
    const ql_node *own = c->derived ? c->derived->own : NULL;
    if (own && (n->span.src != own->span.src || n->span.start < own->span.start || n->span.start >= own->span.end))
        ql_note(c->d, own->a->span, "in recipe '%s', which takes that line from '%s'", c->derived->name,
                c->derived->base->name);
}

/* An error at a declaration's name (the whole declaration is too much to underline). */
void chk_err_decl(ctx *c, const ql_node *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ql_error(c->d, n->name_span.src ? n->name_span : n->span, "%s", buf);
}

ql_span chk_decl_span(const ql_node *n)
{
    return n->name_span.src ? n->name_span : n->span;
}

qc_sym *chk_new_sym(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl)
{
    qc_sym *s = ql_alloc(c->ar, sizeof *s);
    s->name = name;
    s->kind = k;
    s->type = t;
    s->decl = decl;
    s->file = c->file;
    s->defined = 1;
    return s;
}

/* ------------------------------------------------------------- scopes */

void chk_push_scope(ctx *c, scope *s)
{
    memset(s, 0, sizeof *s);
    s->idx.ar = c->ar; /* a scope's arrays are the arena's: qc_check's out-of-memory jump frees nothing */
    s->up = c->sc;
    c->sc = s;
}

void chk_pop_scope(ctx *c)
{
    qc_names_free(&c->sc->idx);
    c->sc = c->sc->up;
}

enum { SCOPE_SCAN_MAX = 8 };

qc_sym *chk_scope_find(const scope *s, const char *name)
{
    if (s->indexed) {
        int i = qc_names_find(&s->idx, s->v, name);
        return i < 0 ? NULL : s->v[i];
    }
    for (int i = s->n - 1; i >= 0; i--)
        if (strcmp(s->v[i]->name, name) == 0)
            return s->v[i];
    return NULL;
}

void chk_scope_add(ctx *c, qc_sym *s)
{
    scope *sc = c->sc;
    if (sc->n == sc->cap) {
        int cap = sc->cap ? sc->cap * 2 : 8;
        qc_sym **v = ql_alloc(c->ar, sizeof *v * (size_t)cap);
        if (!v)
            return;
        if (sc->n)
            memcpy(v, sc->v, sizeof *v * (size_t)sc->n);
        sc->v = v;
        sc->cap = cap;
    }
    sc->v[sc->n++] = s;
    if (sc->n <= SCOPE_SCAN_MAX)
        return;
    /* Names are unique within a scope, so the index and a scan agree; out of
     * memory for the index only costs speed. */
    int ok = 1;
    for (int i = sc->indexed ? sc->n - 1 : 0; i < sc->n && ok; i++)
        ok = qc_names_add(&sc->idx, sc->v, i) == 0;
    sc->indexed = ok;
    if (!ok)
        qc_names_free(&sc->idx);
}

/* Declares name in the innermost scope; a second declaration there is an error. */
qc_sym *chk_declare(ctx *c, const char *name, qc_symkind k, const qc_type *t, ql_node *decl)
{
    qc_sym *old = chk_scope_find(c->sc, name);
    if (old && old->defined) {
        chk_err(c, decl, "'%s' is already defined in this scope", name);
        if (old->decl)
            ql_note(c->d, chk_decl_span(old->decl), "'%s' was defined here", name);
        return old;
    }
    if (old) { /* announced by the block pre-scan: this is its definition */
        old->kind = k;
        old->type = t;
        old->decl = decl;
        old->defined = 1;
        return old;
    }
    qc_sym *s = chk_new_sym(c, name, k, t, decl);
    chk_scope_add(c, s);
    return s;
}

int chk_item_visible(const ctx *c, const qc_sym *s)
{
    for (int i = 0; i < c->u->nfiles; i++)
        if (c->u->files[i] == s->file)
            return c->visible[i];
    return 0;
}

qc_sym *qc_find_item(const qc_unit *u, const char *name)
{
    int i = qc_names_find(&u->item_names, u->items, name);
    return i < 0 ? NULL : u->items[i];
}

static const struct { const char *name; const qc_type *type; } builtin_consts[] = {
    {"inf", &qc_f64}, {"nan", &qc_f64}, {"pi", &qc_f64},
};

/* Built-in functions; the typing is in check_builtin. */
static const char *const builtin_fns[] = {
    "min", "max", "abs", "clamp", "select", "floor", "ceil", "trunc", "round_even", "round_away", "round_up",
    "sqrt", "exp", "log", "log2", "tanh", "erf", "pow", "isnan", "isinf", "len", "qparams", "const", "rank",
    "dim", "present", "value", "attr", "attr_ints", "broadcast_index",
    "ew.bits", "ew.from_bits", "ew.ubits", /* the channels-last epilogue's tables: no user can write these names */
};

int chk_in_affine_rule(const ctx *c)
{
    return c->w == W_AFFINE || c->w == W_TABLE || c->w == W_AFF_PRED || c->w == W_FIXED;
}

int chk_is_builtin_fn(const char *name)
{
    for (size_t i = 0; i < sizeof builtin_fns / sizeof builtin_fns[0]; i++)
        if (strcmp(builtin_fns[i], name) == 0)
            return 1;
    return 0;
}

/* Every name the current position can see, for "did you mean". */
static const char *suggest(ctx *c, const char *name)
{
    const char *cands[512];
    int n = 0;
    for (scope *s = c->sc; s; s = s->up)
        for (int i = 0; i < s->n && n < 512; i++)
            cands[n++] = s->v[i]->name;
    for (int i = 0; i < c->u->nitems && n < 512; i++)
        if (c->u->items[i]->kind != QC_SYM_AFFINE && chk_item_visible(c, c->u->items[i]))
            cands[n++] = c->u->items[i]->name;
    for (size_t i = 0; i < sizeof builtin_fns / sizeof builtin_fns[0] && n < 512; i++)
        if (!strchr(builtin_fns[i], '.')) /* the compiler's own: not to suggest */
            cands[n++] = builtin_fns[i];
    for (size_t i = 0; i < sizeof builtin_consts / sizeof builtin_consts[0] && n < 512; i++)
        cands[n++] = builtin_consts[i].name;
    return ql_suggest(name, cands, n);
}

static qc_sym *builtin_const(ctx *c, const char *name)
{
    for (size_t i = 0; i < sizeof builtin_consts / sizeof builtin_consts[0]; i++)
        if (strcmp(builtin_consts[i].name, name) == 0)
            return chk_new_sym(c, builtin_consts[i].name, QC_SYM_BUILTIN, builtin_consts[i].type, NULL);
    return NULL;
}

/* Resolves a name; reports unknown names (with a hint) and uses before definition. */
qc_sym *chk_lookup(ctx *c, ql_node *at, const char *name, int report)
{
    qc_sym *pending = NULL;
    for (scope *s = c->sc; s; s = s->up) {
        qc_sym *sym = chk_scope_find(s, name);
        if (sym && sym->defined)
            return sym;
        if (sym && !pending)
            pending = sym;
    }
    qc_sym *item = qc_find_item(c->u, name);
    if (item && chk_item_visible(c, item))
        return item;
    qc_sym *b = builtin_const(c, name);
    if (b)
        return b;
    if (!report)
        return NULL;
    if (pending) {
        chk_err(c, at, "'%s' is used before its definition", name);
        if (pending->decl)
            ql_note(c->d, chk_decl_span(pending->decl), "'%s' is defined here", name);
        return NULL;
    }
    if (item) {
        chk_err(c, at, "'%s' is defined in %s, which this file does not import", name, item->file->src->path);
        return NULL;
    }
    for (int i = 0; c->transform && c->transform->a && i < c->transform->a->nkids; i++)
        if (c->transform->a->kids[i]->name && !strcmp(c->transform->a->kids[i]->name, name)) {
            chk_err(c, at, "'%s' is a parameter of transform '%s': a where clause tests the graph while it is "
                           "matched, before a recipe gives the parameters their values", name, c->transform->name);
            return NULL;
        }
    const char *hint = suggest(c, name);
    if (hint)
        chk_err(c, at, "unknown name '%s'; did you mean '%s'?", name, hint);
    else
        chk_err(c, at, "unknown name '%s'", name);
    return NULL;
}

/* --------------------------------------------------------- recursion */

static int find_cycle(ctx *c, qc_sym *s, qc_sym **stack, int depth)
{
    if (s->mark == 2)
        return 0;
    if (s->mark == 1) {
        char path[512];
        int len = 0, from = depth - 1;
        while (from > 0 && stack[from] != s)
            from--;
        for (int i = from; i < depth && len < (int)sizeof path - 64; i++)
            len += snprintf(path + len, sizeof path - (size_t)len, "%s -> ", stack[i]->name);
        snprintf(path + len, sizeof path - (size_t)len, "%s", s->name);
        chk_err_decl(c, s->decl, "recursion is not allowed: %s", path);
        return 1;
    }
    if (depth >= 256)
        return 0;
    s->mark = 1;
    stack[depth] = s;
    for (int i = 0; i < s->ncallees; i++)
        if (find_cycle(c, s->callees[i], stack, depth + 1))
            break;
    s->mark = 2;
    return 0;
}

/* --------------------------------------------------------------- main */

void chk_add_item(ctx *c, qc_sym *s)
{
    qc_unit *u = c->u;
    /* several affine rules may cover one op (the first whose where holds
     * applies), so only the other items clash */
    qc_sym *o = s->kind == QC_SYM_AFFINE ? NULL : qc_find_item(u, s->name);
    if (o) {
        chk_err_decl(c, s->decl, "'%s' is defined twice", s->name);
        ql_note(c->d, chk_decl_span(o->decl), "the first definition is here");
        return;
    }
    if (chk_is_builtin_fn(s->name) && s->kind != QC_SYM_AFFINE) {
        chk_err_decl(c, s->decl, "'%s' is a built-in function; choose another name", s->name);
        return;
    }
    if (u->nitems == u->capitems) {
        int cap = u->capitems ? u->capitems * 2 : 32;
        qc_sym **v = ql_alloc(c->ar, sizeof *v * (size_t)cap);
        if (u->nitems)
            memcpy(v, u->items, sizeof *v * (size_t)u->nitems);
        u->items = v;
        u->capitems = cap;
    }
    u->items[u->nitems++] = s;
    qc_names *idx = s->kind == QC_SYM_AFFINE ? &u->affine_names : &u->item_names;
    int first = qc_names_find(idx, u->items, s->name);
    if (first >= 0) { /* another rule for the op: chained after the first */
        s->next_same = u->items[first]->next_same;
        u->items[first]->next_same = s;
    } else if (qc_names_add(idx, u->items, u->nitems - 1) != 0) {
        u->nitems--;
        chk_err_decl(c, s->decl, "out of memory");
    }
}

static void collect(ctx *c, qc_file *f)
{
    c->file = f;
    for (int i = 0; f->ast && i < f->ast->nkids; i++) {
        ql_node *n = f->ast->kids[i];
        qc_symkind k;
        switch (n->kind) {
        case QL_CONST: k = QC_SYM_CONST; break;
        case QL_FN: k = n->d ? QC_SYM_GENERIC : QC_SYM_FN; break;
        case QL_KERNEL: k = n->d ? QC_SYM_GENERIC : QC_SYM_KERNEL; break;
        case QL_CALIBRATOR: k = QC_SYM_CALIBRATOR; break;
        case QL_PATTERN: k = QC_SYM_PATTERN; break;
        case QL_AFFINE: k = QC_SYM_AFFINE; break;
        case QL_RECIPE: k = QC_SYM_RECIPE; break;
        case QL_TRANSFORM: k = QC_SYM_TRANSFORM; break;
        default: continue;
        }
        if (!n->name)
            continue;
        qc_sym *s = chk_new_sym(c, n->name, k, NULL, n);
        n->sym = s;
        int before = c->u->nitems;
        chk_add_item(c, s);
        if (k == QC_SYM_GENERIC && c->u->nitems > before)
            chk_instantiate(c, s);
    }
}

/* visible[i] = 1 for f and every file it imports, directly or not. */
static void mark_visible(qc_unit *u, qc_file *f, unsigned char *vis)
{
    for (int i = 0; i < u->nfiles; i++)
        if (u->files[i] == f) {
            if (vis[i])
                return;
            vis[i] = 1;
        }
    for (int i = 0; i < f->nimports; i++)
        mark_visible(u, f->imports[i], vis);
}

void chk_enter_file(ctx *c, qc_file *f)
{
    c->file = f;
    memset(c->visible, 0, (size_t)c->u->nfiles);
    mark_visible(c->u, f, c->visible);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int qc_check(qc_unit *u)
{
    double t0 = now_ms();
    int before = u->diags.errors;
    ctx c = {.u = u, .ar = &u->arena, .d = &u->diags};
    unsigned char *visible = c.visible = calloc((size_t)u->nfiles + 1, 1);
    if (!visible)
        return 1;
    /* Out of memory anywhere below jumps back here (lang/arena.h): everything the checker
     * made is the arena's but the visibility marks. */
    jmp_buf oom, *outer = u->arena.on_oom;
    if (setjmp(oom)) {
        u->arena.on_oom = outer;
        free(visible);
        ql_error_file(&u->diags, u->nfiles ? u->files[0]->src->path : "qrl", "out of memory");
        return u->diags.errors - before;
    }
    u->arena.on_oom = &oom;
    for (int i = 0; i < u->nfiles; i++)
        collect(&c, u->files[i]);
    chk_recipe_bases(&c); /* the recipes' effective settings, which reach.c and the code generator read */
    /* Function signatures first: calls anywhere need their parameter types. */
    for (int i = 0; i < u->nitems; i++) {
        qc_sym *s = u->items[i];
        if (s->kind != QC_SYM_FN && s->kind != QC_SYM_KERNEL && (s->kind != QC_SYM_GENERIC || !s->ninstances))
            continue;
        c.file = s->file;
        c.tparams = s->kind == QC_SYM_GENERIC ? s->decl->d : NULL;
        memset(c.visible, 0, (size_t)u->nfiles);
        mark_visible(u, s->file, c.visible);
        c.w = W_CONST;
        int mark = u->diags.n;
        for (int p = 0; s->decl->a && p < s->decl->a->nkids; p++) {
            ql_node *pn = s->decl->a->kids[p];
            c.shape_ok = s->decl->kind == QL_KERNEL;
            pn->type = chk_type(&c, pn->a);
            c.shape_ok = 0;
        }
        if (s->decl->b)
            chk_type(&c, s->decl->b);
        chk_instance_done(&c, s, mark);
        c.tparams = NULL;
    }
    for (int i = 0; i < u->nitems && !ql_diags_full(&u->diags); i++) {
        qc_sym *s = u->items[i];
        c.file = s->file;
        memset(c.visible, 0, (size_t)u->nfiles);
        mark_visible(u, s->file, c.visible);
        switch (s->kind) {
        case QC_SYM_CONST: chk_const_item(&c, s); break;
        case QC_SYM_FN:
        case QC_SYM_KERNEL: {
            int mark = u->diags.n;
            chk_function(&c, s);
            chk_instance_done(&c, s, mark);
            break;
        }
        case QC_SYM_GENERIC: chk_generic(&c, s); break;
        case QC_SYM_CALIBRATOR: chk_calibrator(&c, s); break;
        case QC_SYM_PATTERN: chk_pattern(&c, s); break;
        case QC_SYM_AFFINE: chk_affine(&c, s); break;
        case QC_SYM_RECIPE: chk_recipe(&c, s); break;
        case QC_SYM_TRANSFORM: chk_transform(&c, s); break;
        default: break;
        }
    }
    qc_sym *stack[256];
    for (int i = 0; i < u->nitems; i++)
        if (u->items[i]->kind == QC_SYM_FN || u->items[i]->kind == QC_SYM_KERNEL)
            find_cycle(&c, u->items[i], stack, 0);
    u->arena.on_oom = outer;
    free(c.visible);
    u->t_check += now_ms() - t0;
    return u->diags.errors - before;
}
