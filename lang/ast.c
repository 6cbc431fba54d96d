#include "ast.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
#define KN(k, s) s,
    QL_NODE_KINDS(KN)
#undef KN
};

const char *ql_kind_name(ql_kind k)
{
    return k < QL_KIND_COUNT ? kind_names[k] : "?";
}

ql_node *ql_node_new(ql_arena *ar, ql_kind kind, ql_span span)
{
    ql_node *n = ql_alloc(ar, sizeof *n);
    n->kind = kind;
    n->span = span;
    return n;
}

ql_node *ql_node_add(ql_arena *ar, ql_node *n, ql_node *kid)
{
    if (!n || !kid)
        return n;
    if (n->nkids == n->capkids) {
        int cap = n->capkids ? n->capkids * 2 : 4;
        ql_node **k = ql_alloc(ar, sizeof *k * (size_t)cap);
        if (n->nkids)
            memcpy(k, n->kids, sizeof *k * (size_t)n->nkids);
        n->kids = k;
        n->capkids = cap;
    }
    n->kids[n->nkids++] = kid;
    n->span = ql_span_join(n->span, kid->span);
    return n;
}

ql_node *ql_node_tok(ql_arena *ar, ql_kind kind, const ql_token *t)
{
    ql_node *n = ql_node_new(ar, kind, t->span);
    n->name = t->s;
    n->slen = t->slen;
    n->ival = t->i;
    n->fval = t->f;
    n->op = t->kind;
    return n;
}

ql_node *ql_node_bin(ql_arena *ar, ql_tok op, ql_node *a, ql_node *b)
{
    ql_node *n = ql_node_new(ar, QL_BINARY, ql_span_join(a->span, b->span));
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

ql_node *ql_node_un(ql_arena *ar, ql_tok op, ql_span sp, ql_node *a)
{
    ql_node *n = ql_node_new(ar, QL_UNARY, ql_span_join(sp, a->span));
    n->op = op;
    n->a = a;
    return n;
}

ql_node *ql_node_extend(ql_node *n, ql_span sp)
{
    if (n)
        n->span = ql_span_join(n->span, sp);
    return n;
}

int ql_call_param(const ql_node *params, const ql_node *arg, int i, const ql_node **value)
{
    *value = arg;
    if (arg->kind != QL_NAMED_ARG)
        return i;
    *value = arg->a;
    for (int k = 0; params && k < params->nkids; k++)
        if (!strcmp(params->kids[k]->name, arg->name))
            return k;
    return -1;
}

static void dump_str(const char *s, int len, FILE *f)
{
    fputc('"', f);
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 32 || c >= 127)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void dump(const ql_node *n, int depth, const char *role, FILE *f)
{
    int line = 0, col = 0;
    if (n->span.src)
        ql_source_linecol(n->span.src, n->span.start, &line, &col);
    fprintf(f, "%*s%s%s", depth * 2, "", role, ql_kind_name(n->kind));
    switch (n->kind) {
    case QL_INT: fprintf(f, " %llu", (unsigned long long)n->ival); break;
    case QL_FLOAT: {
        /* Shortest form that reads back as the same double. */
        char buf[40];
        snprintf(buf, sizeof buf, "%.15g", n->fval);
        if (strtod(buf, NULL) != n->fval)
            snprintf(buf, sizeof buf, "%.17g", n->fval);
        fprintf(f, " %s", buf);
        break;
    }
    case QL_BOOL: fprintf(f, " %s", n->ival ? "true" : "false"); break;
    case QL_STR:
    case QL_IMPORT:
        fputc(' ', f);
        dump_str(n->name ? n->name : "", n->slen, f);
        break;
    case QL_TYPE:
        fprintf(f, " %s", n->op == QL_TOK_IDENT && n->name ? n->name : ql_tok_desc(n->op));
        break;
    case QL_UNARY:
    case QL_BINARY:
    case QL_ASSIGN: fprintf(f, " %s", ql_tok_desc(n->op)); break;
    default:
        if (n->name)
            fprintf(f, " %s", n->name);
        break;
    }
    if (n->flag)
        fprintf(f, " %s", n->kind == QL_LET ? "mutable" : "optional");
    fprintf(f, " @%d:%d\n", line, col);
    const ql_node *fixed[4] = {n->a, n->b, n->c, n->d};
    static const char *const roles[4] = {"a: ", "b: ", "c: ", "d: "};
    for (int i = 0; i < 4; i++)
        if (fixed[i])
            dump(fixed[i], depth + 1, roles[i], f);
    for (int i = 0; i < n->nkids; i++)
        dump(n->kids[i], depth + 1, "", f);
}

void ql_ast_dump(const ql_node *n, FILE *f)
{
    if (n)
        dump(n, 0, "", f);
}
