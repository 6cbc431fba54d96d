/* Generics (see generic.h): instances are clones of the declaration with the
 * type parameters substituted, so the code generator needs to know nothing
 * of type parameters beyond this file (the checker checks the declaration
 * itself too, with type variables: check_items.c, chk_generic). */
#include "generic.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const qc_type *t;
    ql_tok tok;
} scalars[] = {
    {&qc_bool, QL_TOK_BOOL}, {&qc_i8, QL_TOK_I8},   {&qc_u8, QL_TOK_U8},   {&qc_i16, QL_TOK_I16}, {&qc_u16, QL_TOK_U16},
    {&qc_i32, QL_TOK_I32},   {&qc_i64, QL_TOK_I64}, {&qc_f32, QL_TOK_F32}, {&qc_f64, QL_TOK_F64},
};

const qc_type *qc_generic_member(const ql_node *type)
{
    for (size_t i = 0; type && type->kind == QL_TYPE && i < sizeof scalars / sizeof *scalars; i++)
        if (scalars[i].tok == type->op)
            return scalars[i].t;
    return NULL;
}

int qc_generic_count(const ql_node *decl)
{
    const ql_node *tp = decl->d;
    if (!tp || tp->nkids > QC_GENERIC_MAX_PARAMS)
        return 0;
    int n = 1;
    for (int i = 0; i < tp->nkids; i++) {
        n *= tp->kids[i]->nkids;
        if (n > QC_GENERIC_MAX_INSTANCES)
            return 0;
    }
    return n;
}

/* The member of parameter i in instance k. */
static const ql_node *member_of(const ql_node *tp, int k, int i)
{
    int stride = 1;
    for (int j = tp->nkids - 1; j > i; j--)
        stride *= tp->kids[j]->nkids;
    return tp->kids[i]->kids[(k / stride) % tp->kids[i]->nkids];
}

typedef struct subst {
    const ql_node *tp;
    const qc_type **args;
} subst;

static const qc_type *param_type(const subst *s, const char *name)
{
    for (int i = 0; s && name && i < s->tp->nkids; i++)
        if (!strcmp(s->tp->kids[i]->name, name))
            return s->args[i];
    return NULL;
}

static ql_node *type_node(ql_arena *ar, const qc_type *t, const ql_node *at)
{
    ql_node *n = ql_node_new(ar, QL_TYPE, at->span);
    n->depth = at->depth;
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
        if (scalars[i].t == t)
            n->op = scalars[i].tok;
    return n;
}

static ql_node *clone(ql_arena *ar, const ql_node *n, const subst *s)
{
    if (!n)
        return NULL;
    const qc_type *t;
    if (n->kind == QL_TYPE && n->op == QL_TOK_IDENT && (t = param_type(s, n->name)))
        return type_node(ar, t, n);
    /* T(x): a conversion to T's member, as i32(x) */
    if (n->kind == QL_CALL && n->a && n->a->kind == QL_NAME && n->nkids == 1 && n->kids[0]->kind != QL_NAMED_ARG &&
        (t = param_type(s, n->a->name))) {
        ql_node *c = ql_node_new(ar, QL_CAST, n->span);
        c->depth = n->depth;
        c->a = type_node(ar, t, n->a);
        c->b = clone(ar, n->kids[0], s);
        return c;
    }
    ql_node *c = ql_alloc(ar, sizeof *c);
    *c = *n;
    c->type = NULL;
    c->sym = NULL;
    c->a = clone(ar, n->a, s);
    c->b = clone(ar, n->b, s);
    c->c = clone(ar, n->c, s);
    c->d = clone(ar, n->d, s);
    c->kids = NULL;
    c->nkids = c->capkids = 0;
    for (int i = 0; i < n->nkids; i++)
        ql_node_add(ar, c, clone(ar, n->kids[i], s));
    c->span = n->span; /* ql_node_add widens it */
    return c;
}

ql_node *qc_clone(ql_arena *ar, const ql_node *n)
{
    return clone(ar, n, NULL);
}

ql_node *qc_generic_instance(ql_arena *ar, const ql_node *decl, int k, const qc_type **args)
{
    const ql_node *tp = decl->d;
    char name[512], tb[32];
    int len = snprintf(name, sizeof name, "%s<", decl->name);
    for (int i = 0; i < tp->nkids; i++) {
        args[i] = qc_generic_member(member_of(tp, k, i));
        len += snprintf(name + len, sizeof name - (size_t)(len < (int)sizeof name ? len : (int)sizeof name - 1),
                        "%s%s", i ? "," : "", qc_type_name(args[i], tb, sizeof tb));
    }
    if (len < (int)sizeof name - 1)
        strcat(name, ">");
    subst s = {tp, args};
    ql_node *c = clone(ar, decl, &s);
    c->d = NULL;
    size_t nl = strlen(name) + 1;
    char *nm = ql_alloc(ar, nl);
    memcpy(nm, name, nl);
    c->name = nm;
    return c;
}

int qc_generic_index(const ql_node *decl, const qc_type *const *args)
{
    const ql_node *tp = decl->d;
    int k = 0;
    for (int i = 0; i < tp->nkids; i++) {
        int at = -1;
        for (int j = 0; j < tp->kids[i]->nkids && at < 0; j++)
            if (args[i] && qc_type_eq(qc_generic_member(tp->kids[i]->kids[j]), args[i]))
                at = j;
        if (at < 0)
            return -1;
        k = k * tp->kids[i]->nkids + at;
    }
    return k;
}

const char *qc_generic_set(const ql_node *decl, int i, char *buf, int n)
{
    const ql_node *p = decl->d->kids[i];
    char tb[32];
    int len = 0;
    buf[0] = 0;
    for (int j = 0; j < p->nkids && len < n; j++)
        len += snprintf(buf + len, (size_t)(n - len), "%s%s", j ? " | " : "",
                        qc_type_name(qc_generic_member(p->kids[j]), tb, sizeof tb));
    return buf;
}

const char *qc_generic_args(const ql_node *decl, int k, char *buf, int n)
{
    const ql_node *tp = decl->d;
    char tb[32];
    int len = 0;
    buf[0] = 0;
    for (int i = 0; i < tp->nkids && len < n; i++)
        len += snprintf(buf + len, (size_t)(n - len), "%s%s = %s", i ? ", " : "", tp->kids[i]->name,
                        qc_type_name(qc_generic_member(member_of(tp, k, i)), tb, sizeof tb));
    return buf;
}
