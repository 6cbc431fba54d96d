/* The checker's expressions (see check.c): literals and constant folding of
 * integers, the typing of operators, calls (built-in, methods, user fns and
 * generics' instances), fields, indices, names and casts, and the types
 * written in the source (chk_type), with a histogram's bin count. */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

/* ----------------------------------------------------------- literals */

/* The value of an integer literal, possibly negated; 0 when n is not one. */
static int int_literal(const ql_node *n, int64_t *v)
{
    if (n->kind == QL_INT) {
        *v = n->ival > (uint64_t)INT64_MAX ? INT64_MIN : (int64_t)n->ival;
        return n->ival <= (uint64_t)INT64_MAX ? 1 : 2; /* 2: too big for i64 */
    }
    if (n->kind == QL_UNARY && n->op == QL_TOK_MINUS && n->a->kind == QL_INT) {
        if (n->a->ival > (uint64_t)INT64_MAX + 1)
            return 2;
        *v = n->a->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->a->ival;
        return 1;
    }
    return 0;
}

/* The value of an integer constant expression known at check time: literals, named constants,
 * and -, +, * of them (without overflow). Returns 0 when it is not one. */
static int const_int(const ql_node *n, int64_t *v, int depth)
{
    int64_t a, b;
    if (depth > 32)
        return 0;
    switch (n->kind) {
    case QL_INT: return int_literal(n, v) == 1;
    case QL_NAME: {
        const qc_sym *s = n->sym;
        return s && s->kind == QC_SYM_CONST && s->decl && s->decl->b && s->type && qc_is_int(s->type) &&
               const_int(s->decl->b, v, depth + 1);
    }
    case QL_UNARY:
        if (n->op != QL_TOK_MINUS || !const_int(n->a, &a, depth + 1))
            return 0;
        return !__builtin_sub_overflow((int64_t)0, a, v);
    case QL_BINARY:
        if (!const_int(n->a, &a, depth + 1) || !const_int(n->b, &b, depth + 1))
            return 0;
        switch (n->op) {
        case QL_TOK_PLUS: return !__builtin_add_overflow(a, b, v);
        case QL_TOK_MINUS: return !__builtin_sub_overflow(a, b, v);
        case QL_TOK_STAR: return !__builtin_mul_overflow(a, b, v);
        default: return 0;
        }
    default: return 0;
    }
}

/* Gives a literal expression its final type, pushing it down to the literal
 * leaves (1.0 / 256 as f32 makes both literals f32), and checks ranges. */
void chk_settle(ctx *c, ql_node *n, const qc_type *t)
{
    if (!n || !n->type || t->k == QC_ERROR)
        return;
    if (n->type->k != QC_INTLIT && n->type->k != QC_FLOATLIT)
        return;
    int64_t v;
    int lit = int_literal(n, &v);
    if (lit && qc_any_member(t, qc_is_int)) {
        char tb[64];
        if (lit == 2 || !qc_int_fits(v, t)) {
            if (lit == 2)
                chk_err(c, n, "integer literal does not fit in i64");
            else if (t->k == QC_TVAR) {
                const qc_type *m = t->members[0];
                for (int i = 0; i < t->nmembers && qc_int_fits(v, m); i++)
                    m = t->members[i];
                chk_err(c, n, "%lld does not fit in %s when %s = %s", (long long)v, t->name, t->name, TN(m, tb));
            } else
                chk_err(c, n, "%lld does not fit in %s", (long long)v, TN(t, tb));
        }
    }
    /* Integer-only operators on literals (1 << 3, 7 % 2, ~0) cannot become floats. */
    int int_op = n->kind == QL_UNARY ? n->op == QL_TOK_TILDE
               : n->kind == QL_BINARY && (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR || n->op == QL_TOK_AMP ||
                                          n->op == QL_TOK_PIPE || n->op == QL_TOK_CARET || n->op == QL_TOK_PERCENT);
    if (int_op && qc_any_member(t, qc_is_float)) {
        char tb[64], w[96];
        chk_when(t, qc_is_int, w, sizeof w);
        if (n->kind == QL_UNARY)
            chk_err(c, n, "'~' takes an integer, not %s%s", TN(t, tb), w);
        else
            chk_err(c, n, "operator %s takes integers, not %s%s", ql_tok_desc(n->op), TN(t, tb), w);
        n->type = &qc_error;
        return;
    }
    n->type = t;
    switch (n->kind) {
    case QL_UNARY: chk_settle(c, n->a, t); break;
    case QL_BINARY:
        if (n->op >= QL_TOK_EQ && n->op <= QL_TOK_GE) /* comparison of literals: settled apart */
            break;
        if (n->op == QL_TOK_SHL || n->op == QL_TOK_SHR) {
            chk_settle(c, n->a, t);
            chk_settle(c, n->b, &qc_i64);
            break;
        }
        chk_settle(c, n->a, t);
        chk_settle(c, n->b, t);
        break;
    default: break;
    }
}

/* Checks that a value of type `from` (expression n) can be used as `to`. */
int chk_convert(ctx *c, ql_node *n, const qc_type *from, const qc_type *to, const char *what)
{
    char a[64], b[64];
    if (!qc_widens(from, to) && (qc_has_tvar(from) || qc_has_tvar(to))) {
        /* the combination of the type variables' members it fails for */
        qc_tbind tb;
        int n_ = qc_tbind_vars(&tb, from, to);
        for (int k = 0; k < n_; k++) {
            qc_tbind_pick(&tb, k);
            const qc_type *f = qc_subst(c->ar, from, &tb), *t = qc_subst(c->ar, to, &tb);
            if (qc_widens(f, t))
                continue;
            char fa[64], ta[64], bind[128];
            int expl = qc_is_numeric(f) && qc_is_numeric(t) && f->k != QC_FLOATLIT && f->k != QC_INTLIT;
            chk_err(c, n, "%s has type %s, expected %s: %s does not convert to %s implicitly when %s%s%s%s", what,
                TN(from, a), TN(to, b), TN(f, fa), TN(t, ta), qc_tbind_name(&tb, bind, sizeof bind),
                expl ? "; convert explicitly with " : "", expl ? b : "", expl ? "(...)" : "");
            return 0;
        }
    }
    if (!qc_widens(from, to)) {
        if (qc_is_numeric(from) && qc_is_numeric(to) && from->k != QC_FLOATLIT && from->k != QC_INTLIT)
            chk_err(c, n, "%s has type %s, expected %s; convert explicitly with %s(...)", what, TN(from, a), TN(to, b),
                TN(to, b));
        else
            chk_err(c, n, "%s has type %s, expected %s", what, TN(from, a), TN(to, b));
        return 0;
    }
    chk_settle(c, n, to);
    return 1;
}

/* -------------------------------------------------------- expressions */


static const qc_type *set_type(ql_node *n, const qc_type *t)
{
    n->type = t;
    return t;
}

/* " (f32 when T = f32)": t's type variable's first member without ok, for a
 * message saying t fails ok; "" when t holds no variable or none fails. */
const char *chk_when(const qc_type *t, int (*ok)(const qc_type *), char *buf, int n)
{
    char tb[64];
    buf[0] = 0;
    while (t->k == QC_ARRAY || t->k == QC_TENSOR)
        t = t->elem;
    for (int i = 0; t->k == QC_TVAR && i < t->nmembers; i++)
        if (!ok(t->members[i])) {
            snprintf(buf, (size_t)n, " (%s when %s = %s)", TN(t->members[i], tb), t->name, TN(t->members[i], tb));
            break;
        }
    return buf;
}

/* Why a and b, holding type variables, have no common type: " when T = f32"
 * (none for that member), or ": they meet at i16 when T = u8 but at i8 when
 * T = i8" (the type would depend on the member). "" without variables. */
static const char *common_when(ctx *c, const qc_type *a, const qc_type *b, char *buf, int n)
{
    qc_tbind b1, b2;
    const qc_type *r1 = NULL, *r2 = NULL;
    char x[128], y[128], ta[64], tb[64];
    buf[0] = 0;
    if (!qc_has_tvar(a) && !qc_has_tvar(b))
        return buf;
    int why = qc_common_why(a, b, &b1, &b2, &r1, &r2);
    if (why == 1)
        snprintf(buf, (size_t)n, " when %s", qc_tbind_name(&b1, x, sizeof x));
    else if (why == 2)
        snprintf(buf, (size_t)n, ": they meet at %s when %s but at %s when %s", TN(qc_subst(c->ar, r1, &b1), ta),
                 qc_tbind_name(&b1, x, sizeof x), TN(qc_subst(c->ar, r2, &b2), tb), qc_tbind_name(&b2, y, sizeof y));
    return buf;
}

static int is_bool(const qc_type *t)
{
    return t->k == QC_BOOL;
}

/* a == b where a type variable ranges over bool and numbers: each
 * combination of members compares two bools or two numbers. */
static const qc_type *equality_per_member(ctx *c, ql_node *n, const qc_type *l, const qc_type *r)
{
    qc_tbind tb;
    int count = qc_tbind_vars(&tb, l, r);
    for (int k = 0; k < count; k++) {
        qc_tbind_pick(&tb, k);
        const qc_type *a = qc_subst(c->ar, l, &tb), *b = qc_subst(c->ar, r, &tb);
        if ((a->k == QC_BOOL && b->k == QC_BOOL) ||
            (a->k != QC_BOOL && b->k != QC_BOOL && qc_is_numeric(a) && qc_is_numeric(b) && qc_common(a, b)))
            continue;
        char x[64], y[64], bind[128];
        chk_err(c, n, "mismatched types %s and %s for %s when %s; convert one explicitly", TN(l, x), TN(r, y),
            ql_tok_desc(n->op), qc_tbind_name(&tb, bind, sizeof bind));
        break;
    }
    return &qc_bool;
}

static int is_unsigned_int(const qc_type *t)
{
    return qc_is_int(t) && !qc_is_signed(t);
}

/* v.dtype == "f32", v.op == "Relu", v.read_by == "Softmax": the literal must name an element
 * type as `qrl dump` prints it, or an op of the runtime's table, or the predicate could never hold. */
static const qc_type *check_dtype_literal(ctx *c, ql_node *n)
{
    static const char *const names[] = {"f32", "f16", "f64", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64",
                                        "bool", "string"};
    ql_node *fld = n->a->kind == QL_FIELD ? n->a : n->b, *lit = n->a->kind == QL_STR ? n->a : n->b;
    if (fld->kind == QL_FIELD && lit->kind == QL_STR &&
        (!strcmp(fld->name, "op") || !strcmp(fld->name, "read_by") || !strcmp(fld->name, "feeds")))
        chk_op_name(c, lit, lit->name);
    if (fld->kind != QL_FIELD || strcmp(fld->name, "dtype") || lit->kind != QL_STR)
        return &qc_bool;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(lit->name, names[i]))
            return &qc_bool;
    const char *hint = ql_suggest(lit->name, names, (int)(sizeof names / sizeof *names));
    if (hint)
        chk_err(c, lit, "'%s' is not an element type; did you mean '%s'?", lit->name, hint);
    else
        chk_err(c, lit, "'%s' is not an element type (f32, f16, f64, u8, i8, u16, i16, u32, i32, u64, i64, bool, "
                        "string)", lit->name);
    return &qc_bool;
}

static const qc_type *binary(ctx *c, ql_node *n, const qc_type *want)
{
    char a[64], b[64];
    ql_tok op = n->op;
    if (op == QL_TOK_AND || op == QL_TOK_OR) {
        const qc_type *l = chk_expr(c, n->a, &qc_bool), *r = chk_expr(c, n->b, &qc_bool);
        chk_convert(c, n->a, l, &qc_bool, "the left operand");
        chk_convert(c, n->b, r, &qc_bool, "the right operand");
        return set_type(n, &qc_bool);
    }
    int cmp = op >= QL_TOK_EQ && op <= QL_TOK_GE;
    const qc_type *l = chk_expr(c, n->a, cmp ? NULL : want), *r = chk_expr(c, n->b, cmp ? NULL : want);
    if (l->k == QC_ERROR || r->k == QC_ERROR)
        return set_type(n, cmp ? &qc_bool : &qc_error);
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) && l->k == QC_STR && r->k == QC_STR &&
        n->a->kind != QL_STR && n->b->kind != QL_STR) {
        chk_err(c, n, "strings are compared with a string literal: %s", "attr(\"mode\", \"nearest\") == \"linear\"");
        return set_type(n, &qc_bool);
    }
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) && l->k == QC_STR && r->k == QC_STR)
        return set_type(n, check_dtype_literal(c, n));
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) && l->k == QC_BOOL && r->k == QC_BOOL)
        return set_type(n, &qc_bool);
    if (cmp && (op == QL_TOK_EQ || op == QL_TOK_NE) && (qc_any_member(l, is_bool) || qc_any_member(r, is_bool)) &&
        (l->k == QC_TVAR || r->k == QC_TVAR)) /* T: bool | u8: bools or numbers, per member */
        return set_type(n, equality_per_member(c, n, l, r));
    char w[160];
    if (op == QL_TOK_SHL || op == QL_TOK_SHR) {
        if (!qc_is_int(l) || !qc_is_int(r)) {
            if (!*chk_when(l, qc_is_int, w, sizeof w))
                chk_when(r, qc_is_int, w, sizeof w);
            chk_err(c, n, "shifts take integers, not %s and %s%s", TN(l, a), TN(r, b), w);
            return set_type(n, &qc_error);
        }
        chk_settle(c, n->b, r->k == QC_INTLIT ? &qc_i64 : r);
        return set_type(n, l);
    }
    if (!qc_is_numeric(l) || !qc_is_numeric(r)) {
        if (!*chk_when(l, qc_is_numeric, w, sizeof w))
            chk_when(r, qc_is_numeric, w, sizeof w);
        chk_err(c, n, "operator %s takes numbers, not %s and %s%s", ql_tok_desc(op), TN(l, a), TN(r, b), w);
        return set_type(n, cmp ? &qc_bool : &qc_error);
    }
    const qc_type *t = qc_common(l, r);
    qc_tbind b1, b2;
    const qc_type *r1, *r2;
    if (!t && cmp && qc_common_why(l, r, &b1, &b2, &r1, &r2) == 2)
        return set_type(n, &qc_bool); /* compared at a type that depends on T's member, but bool for each */
    if (!t) {
        chk_err(c, n, "mismatched types %s and %s for %s%s; convert one explicitly", TN(l, a), TN(r, b), ql_tok_desc(op),
            common_when(c, l, r, w, sizeof w));
        return set_type(n, cmp ? &qc_bool : &qc_error);
    }
    int bitwise = op == QL_TOK_AMP || op == QL_TOK_PIPE || op == QL_TOK_CARET;
    if ((bitwise || op == QL_TOK_PERCENT) && !qc_is_int(t)) {
        chk_err(c, n, "operator %s takes integers, not %s%s", ql_tok_desc(op), TN(t, a), chk_when(t, qc_is_int, w, sizeof w));
        return set_type(n, &qc_error);
    }
    if (cmp) {
        const qc_type *ct = t->k == QC_INTLIT || t->k == QC_FLOATLIT ? qc_default(t) : t;
        chk_settle(c, n->a, ct);
        chk_settle(c, n->b, ct);
        return set_type(n, &qc_bool);
    }
    if (t->k != QC_INTLIT && t->k != QC_FLOATLIT) {
        chk_settle(c, n->a, t);
        chk_settle(c, n->b, t);
    }
    int64_t v;
    if ((op == QL_TOK_SLASH || op == QL_TOK_PERCENT) && (t->k == QC_INTLIT || qc_any_member(t, qc_is_int)) && const_int(n->b, &v, 0) &&
        v == 0)
        chk_err(c, n->b, "integer %s by zero", op == QL_TOK_SLASH ? "division" : "remainder of a division");
    return set_type(n, t);
}

static const qc_type *unary(ctx *c, ql_node *n, const qc_type *want)
{
    char a[64];
    if (n->op == QL_TOK_NOT) {
        const qc_type *t = chk_expr(c, n->a, &qc_bool);
        chk_convert(c, n->a, t, &qc_bool, "the operand of 'not'");
        return set_type(n, &qc_bool);
    }
    const qc_type *t = chk_expr(c, n->a, want);
    if (t->k == QC_ERROR)
        return set_type(n, t);
    char w[96];
    if (n->op == QL_TOK_TILDE && !qc_is_int(t)) {
        chk_err(c, n, "'~' takes an integer, not %s%s", TN(t, a), chk_when(t, qc_is_int, w, sizeof w));
        return set_type(n, &qc_error);
    }
    if (!qc_is_numeric(t)) {
        chk_err(c, n, "'-' takes a number, not %s%s", TN(t, a), chk_when(t, qc_is_numeric, w, sizeof w));
        return set_type(n, &qc_error);
    }
    for (int i = 0; n->op == QL_TOK_MINUS && t->k == QC_TVAR && i < t->nmembers; i++)
        if (is_unsigned_int(t->members[i])) {
            chk_err(c, n, "'-' on %s, which is unsigned %s when %s = %s; convert to a signed type first", TN(t, a),
                TN(t->members[i], w), t->name, TN(t->members[i], w));
            return set_type(n, &qc_error);
        }
    if (n->op == QL_TOK_MINUS && qc_is_int(t) && !qc_is_signed(t)) {
        chk_err(c, n, "'-' on unsigned %s; convert to a signed type first", TN(t, a));
        return set_type(n, &qc_error);
    }
    return set_type(n, t);
}

/* The positional or named argument i of a call: returns its expression and name (or NULL). */
ql_node *chk_arg_expr(ql_node *arg, const char **name)
{
    if (arg->kind == QL_NAMED_ARG) {
        *name = arg->name;
        return arg->a;
    }
    *name = NULL;
    return arg;
}

int chk_expect_args(ctx *c, ql_node *call, const char *fname, int lo, int hi)
{
    for (int i = 0; i < call->nkids; i++)
        if (call->kids[i]->kind == QL_NAMED_ARG) {
            chk_err(c, call->kids[i], "%s takes no named arguments", fname);
            return 0;
        }
    if (call->nkids < lo || call->nkids > hi) {
        if (lo == hi)
            chk_err(c, call, "%s takes %d argument%s, not %d", fname, lo, lo == 1 ? "" : "s", call->nkids);
        else
            chk_err(c, call, "%s takes %d to %d arguments, not %d", fname, lo, hi, call->nkids);
        return 0;
    }
    return 1;
}

static void note_call(ctx *c, qc_sym *callee)
{
    qc_sym *f = c->fn;
    if (!f)
        return;
    for (int i = 0; i < f->ncallees; i++)
        if (f->callees[i] == callee)
            return;
    if (f->ncallees == f->capcallees) {
        int cap = f->capcallees ? f->capcallees * 2 : 4;
        qc_sym **v = ql_alloc(c->ar, sizeof *v * (size_t)cap);
        if (f->ncallees)
            memcpy(v, f->callees, sizeof *v * (size_t)f->ncallees);
        f->callees = v;
        f->capcallees = cap;
    }
    f->callees[f->ncallees++] = callee;
}

/* Arguments against a parameter list (PARAMS node): positional first, then
 * named; defaults fill the rest. */
void chk_args(ctx *c, ql_node *call, const char *what, const ql_node *params)
{
    int np = params ? params->nkids : 0, seen_named = 0;
    unsigned char given[QC_MAX_PARAMS] = {0};
    if (np > QC_MAX_PARAMS)
        np = QC_MAX_PARAMS; /* more are reported at the declaration */
    for (int i = 0; i < call->nkids; i++) {
        const char *name;
        ql_node *e = chk_arg_expr(call->kids[i], &name);
        int at = -1;
        if (name) {
            seen_named = 1;
            for (int j = 0; j < np; j++)
                if (strcmp(params->kids[j]->name, name) == 0)
                    at = j;
            if (at < 0) {
                const char *cands[QC_MAX_PARAMS];
                for (int j = 0; j < np; j++)
                    cands[j] = params->kids[j]->name;
                const char *hint = ql_suggest(name, cands, np);
                if (hint)
                    chk_err(c, call->kids[i], "%s has no parameter '%s'; did you mean '%s'?", what, name, hint);
                else
                    chk_err(c, call->kids[i], "%s has no parameter '%s'", what, name);
                chk_expr(c, e, NULL);
                continue;
            }
        } else {
            if (seen_named) {
                chk_err(c, call->kids[i], "a positional argument cannot follow named ones");
                chk_expr(c, e, NULL);
                continue;
            }
            if (i >= np) {
                chk_err(c, call->kids[i], "too many arguments to %s (it takes %d)", what, np);
                chk_expr(c, e, NULL);
                break;
            }
            at = i;
        }
        if (given[at]) {
            chk_err(c, call->kids[i], "parameter '%s' of %s is given twice", params->kids[at]->name, what);
            continue;
        }
        given[at] = 1;
        const qc_type *pt = params->kids[at]->type ? params->kids[at]->type : &qc_error;
        const qc_type *t = chk_expr(c, e, pt);
        char msg[160];
        snprintf(msg, sizeof msg, "argument '%s'", params->kids[at]->name);
        chk_convert(c, e, t, pt, msg);
    }
    for (int j = 0; j < np; j++)
        if (!given[j] && !params->kids[j]->b)
            chk_err(c, call, "missing argument '%s' of %s", params->kids[j]->name, what);
}

static const qc_type *numeric_arg(ctx *c, ql_node *e, const qc_type *want, const char *fname)
{
    char a[64];
    const qc_type *t = chk_expr(c, e, want);
    if (!qc_is_numeric(t)) {
        chk_err(c, e, "%s takes numbers, not %s", fname, TN(t, a));
        return &qc_error;
    }
    return t;
}

/* min, max and clamp: numbers of one common type. */
static const qc_type *call_min_max(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    int na = strcmp(f, "clamp") ? 2 : 3;
    if (!chk_expect_args(c, n, f, na, na))
        return set_type(n, &qc_error);
    const qc_type *t = numeric_arg(c, k[0], want, f);
    for (int i = 1; i < na; i++) {
        const qc_type *u = numeric_arg(c, k[i], want, f);
        const qc_type *m = qc_common(t, u);
        if (!m) {
            char b[64], w[160];
            chk_err(c, n, "%s of mismatched types %s and %s%s; convert one explicitly", f, TN(t, a), TN(u, b),
                common_when(c, t, u, w, sizeof w));
            return set_type(n, &qc_error);
        }
        t = m;
    }
    if (t->k != QC_INTLIT && t->k != QC_FLOATLIT)
        for (int i = 0; i < na; i++)
            chk_settle(c, k[i], t);
    return set_type(n, t);
}

/* select(condition, a, b): a and b of one common type. */
static const qc_type *call_select(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    if (!chk_expect_args(c, n, f, 3, 3))
        return set_type(n, &qc_error);
    chk_convert(c, k[0], chk_expr(c, k[0], &qc_bool), &qc_bool, "the condition of select");
    const qc_type *t = chk_expr(c, k[1], want), *u = chk_expr(c, k[2], want), *m = qc_common(t, u);
    if (!m) {
        char b[64], w[160];
        chk_err(c, n, "select between mismatched types %s and %s%s", TN(t, a), TN(u, b), common_when(c, t, u, w, sizeof w));
        return set_type(n, &qc_error);
    }
    chk_settle(c, k[1], m);
    chk_settle(c, k[2], m);
    return set_type(n, m);
}

/* The float functions of one argument (rounding, sqrt, exp, ...), and abs and pow; NULL for
 * another name. */
static const qc_type *call_math(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    if (!strcmp(f, "abs")) {
        if (!chk_expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        return set_type(n, numeric_arg(c, k[0], want, f));
    }
    static const char *const float1[] = {"floor", "ceil", "trunc", "round_even", "round_away", "round_up",
                                         "sqrt", "exp", "log", "log2", "tanh", "erf", "isnan", "isinf"};
    for (size_t i = 0; i < sizeof float1 / sizeof float1[0]; i++) {
        if (strcmp(f, float1[i]))
            continue;
        if (!chk_expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        const qc_type *t = chk_expr(c, k[0], want && qc_is_float(want) ? want : NULL);
        if (t->k == QC_INTLIT || t->k == QC_FLOATLIT) /* a literal takes the wanted float type */
            t = want && (want->k == QC_F32 || want->k == QC_F64) ? want : &qc_f64;
        if (!qc_is_float(t) && t->k != QC_ERROR) {
            char w[96];
            chk_err(c, k[0], "%s takes a float, not %s%s; convert with f32(...) or f64(...)", f, TN(t, a),
                chk_when(t, qc_is_float, w, sizeof w));
            return set_type(n, &qc_error);
        }
        t = t->k == QC_FLOATLIT ? qc_default(t) : t;
        chk_settle(c, k[0], t);
        return set_type(n, !strcmp(f, "isnan") || !strcmp(f, "isinf") ? &qc_bool : t);
    }
    if (!strcmp(f, "pow")) {
        if (!chk_expect_args(c, n, f, 2, 2))
            return set_type(n, &qc_error);
        const qc_type *t = chk_expr(c, k[0], NULL), *u = chk_expr(c, k[1], NULL), *m = qc_common(t, u);
        if (m && m->k == QC_INTLIT)
            m = &qc_f64;
        if (!m || !qc_is_float(m)) {
            chk_err(c, n, "pow takes floats");
            return set_type(n, &qc_error);
        }
        m = qc_default(m);
        chk_settle(c, k[0], m);
        chk_settle(c, k[1], m);
        return set_type(n, m);
    }
    return NULL;
}

/* broadcast_index, len and qparams; NULL for another name. */
static const qc_type *call_index_len_qparams(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    (void)want;
    if (!strcmp(f, "broadcast_index")) { /* broadcast_index(a, y, i): a's element that y[i] reads */
        if (!chk_expect_args(c, n, f, 3, 3))
            return set_type(n, &qc_error);
        for (int i = 0; i < 2; i++) {
            const qc_type *t = chk_expr(c, k[i], NULL);
            if (t->k != QC_TENSOR && t->k != QC_ERROR)
                chk_err(c, k[i], "broadcast_index takes two tensors and an index, not %s", TN(t, a));
        }
        chk_convert(c, k[2], chk_expr(c, k[2], &qc_i64), &qc_i64, "the index");
        return set_type(n, &qc_i64);
    }
    if (!strcmp(f, "len")) {
        if (!chk_expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        const qc_type *t = chk_expr(c, k[0], NULL);
        if (t->k != QC_ARRAY && t->k != QC_ERROR)
            chk_err(c, k[0], "len takes an array, not %s", TN(t, a));
        return set_type(n, &qc_i64);
    }
    if (!strcmp(f, "qparams")) {
        if (!chk_expect_args(c, n, f, 2, 2))
            return set_type(n, &qc_error);
        chk_convert(c, k[0], chk_expr(c, k[0], &qc_f64), &qc_f64, "the scale");
        chk_convert(c, k[1], chk_expr(c, k[1], &qc_i64), &qc_i64, "the zero point");
        return set_type(n, &qc_qparams);
    }
    return NULL;
}

/* What an affine rule reads of its node: attr, attr_ints, value(input); NULL for another name. */
static const qc_type *call_affine(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    ql_node **k = n->kids;
    (void)want;
    /* An affine rule's node: attr("alpha", 0.01), attr("mode", "nearest"), attr_ints("pads"). */
    if (!strcmp(f, "attr") || !strcmp(f, "attr_ints")) {
        int na = !strcmp(f, "attr") ? 2 : 1;
        if (!chk_in_affine_rule(c)) {
            chk_err(c, n, "%s(...) reads the node an affine rule is applied to: it is only allowed in affine rules%s", f,
                na == 2 ? " (in a pattern, v.attr(name, default))" : "");
            return set_type(n, &qc_error);
        }
        if (!chk_expect_args(c, n, f, na, na))
            return set_type(n, &qc_error);
        const qc_type *nt = chk_expr(c, k[0], NULL);
        if (k[0]->kind != QL_STR) {
            chk_err(c, k[0], "the attribute name must be a string literal");
            return set_type(n, &qc_error);
        }
        (void)nt;
        if (na == 1)
            return set_type(n, qc_array_of(c->ar, &qc_i64, -1));
        const qc_type *dt = qc_default(chk_expr(c, k[1], NULL));
        chk_settle(c, k[1], dt);
        if (dt->k == QC_STR && k[1]->kind != QL_STR)
            chk_err(c, k[1], "a string attribute's default must be a string literal");
        else if (dt->k != QC_I64 && dt->k != QC_F64 && dt->k != QC_STR && dt->k != QC_ERROR) {
            chk_err(c, k[1], "an attribute default is an integer, a float or a string");
            dt = &qc_error;
        }
        return set_type(n, dt);
    }
    /* value(c) in an affine rule: the node's input c as a scalar constant (NaN when it is none). */
    if (!strcmp(f, "value") && chk_in_affine_rule(c)) {
        if (!chk_expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        qc_sym *s = k[0]->kind == QL_NAME ? chk_lookup(c, k[0], k[0]->name, 1) : NULL;
        if (!s || s->kind != QC_SYM_AFF_IN) {
            if (s || k[0]->kind != QL_NAME)
                chk_err(c, k[0], "value takes one of the rule's inputs");
            return set_type(n, &qc_error);
        }
        k[0]->sym = s;
        set_type(k[0], &qc_i32);
        return set_type(n, &qc_f64);
    }
    return NULL;
}

/* A pattern's predicates on its bound values: const, present, rank, dim, value. */
static const qc_type *call_predicate(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    char a[64];
    ql_node **k = n->kids;
    (void)want;
    int na = strcmp(f, "dim") ? 1 : 2;
    if (c->w != W_PATTERN) {
        chk_err(c, n, "%s(...) is a pattern predicate: it is only allowed in a pattern's where clause", f);
        return set_type(n, &qc_error);
    }
    if (!chk_expect_args(c, n, f, na, na))
        return set_type(n, &qc_error);
    const qc_type *t = chk_expr(c, k[0], NULL);
    if (t->k != QC_VALUE && t->k != QC_ERROR)
        chk_err(c, k[0], "%s takes a value bound by the pattern, not %s", f, TN(t, a));
    if (na == 2)
        chk_convert(c, k[1], chk_expr(c, k[1], &qc_i64), &qc_i64, "the axis");
    return set_type(n, !strcmp(f, "const") || !strcmp(f, "present") ? &qc_bool
                        : !strcmp(f, "value")                        ? &qc_f64
                                                                     : &qc_i64);
}

/* The channels-last epilogue's tables (compiler/elementwise.c), which user code cannot name:
 * ew.bits(v), a scalar's bits as i64; ew.from_bits(bits, v), those bits read back as v's type
 * (v is only typed, never run); ew.ubits(v), v's bits when it is a scalar, else 0. */
static const qc_type *call_bits(ctx *c, ql_node *n, const char *f)
{
    char a[64];
    int from = !strcmp(f, "ew.from_bits");
    if (!strcmp(f, "ew.ubits")) { /* a uniform of the value: any type, bits only of a scalar */
        if (!chk_expect_args(c, n, f, 1, 1))
            return set_type(n, &qc_error);
        const qc_type *t = chk_expr(c, n->kids[0], NULL);
        if (t->k == QC_INTLIT || t->k == QC_FLOATLIT)
            chk_settle(c, n->kids[0], qc_default(t));
        return set_type(n, &qc_i64);
    }
    if (!chk_expect_args(c, n, f, from ? 2 : 1, from ? 2 : 1))
        return set_type(n, &qc_error);
    if (from)
        chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_i64), &qc_i64, "the bits");
    ql_node *v = n->kids[from];
    const qc_type *t = chk_expr(c, v, NULL);
    if (t->k == QC_INTLIT || t->k == QC_FLOATLIT) {
        t = qc_default(t);
        chk_settle(c, v, t);
    }
    if (t->k != QC_ERROR && !qc_is_scalar(t) && from) /* ew.bits of the same let said so */
        return set_type(n, &qc_error);
    if (t->k != QC_ERROR && !qc_is_scalar(t)) {
        chk_err(c, v, "a channel let of an element-wise epilogue is a number or a bool, not %s: the runtime keeps "
                      "one value of it per channel", TN(t, a));
        return set_type(n, &qc_error);
    }
    return set_type(n, from ? t : &qc_i64);
}

/* min, max, abs, rounding, math, len, qparams, and the pattern predicates. */
static const qc_type *builtin_call(ctx *c, ql_node *n, const char *f, const qc_type *want)
{
    if (!strcmp(f, "ew.bits") || !strcmp(f, "ew.from_bits") || !strcmp(f, "ew.ubits"))
        return call_bits(c, n, f);
    if (!strcmp(f, "min") || !strcmp(f, "max") || !strcmp(f, "clamp"))
        return call_min_max(c, n, f, want);
    if (!strcmp(f, "select"))
        return call_select(c, n, f, want);
    const qc_type *t = call_math(c, n, f, want);
    if (!t)
        t = call_index_len_qparams(c, n, f, want);
    if (!t)
        t = call_affine(c, n, f, want);
    if (t)
        return t;
    if (!strcmp(f, "const") || !strcmp(f, "present") || !strcmp(f, "rank") || !strcmp(f, "dim") ||
        !strcmp(f, "value"))
        return call_predicate(c, n, f, want);
    chk_err(c, n, "'%s' cannot be called here", f);
    return set_type(n, &qc_error);
}

/* Methods of built-in types: tensors, histograms, pattern values. */
static const qc_type *method_call(ctx *c, ql_node *n, const qc_type *recv, const char *m)
{
    char a[64];
    ql_node *obj = n->a->a;
    if (recv->k == QC_TENSOR) {
        int reduction = !strcmp(m, "min") || !strcmp(m, "max") || !strcmp(m, "absmax") || !strcmp(m, "sum") ||
                        !strcmp(m, "quantile");
        if (reduction && !qc_type_eq(recv->elem, &qc_f32)) {
            chk_err(c, n, "%s() reduces tensor<f32> (what calibrators observe), not %s", m, TN(recv, a));
            return set_type(n, &qc_f64);
        }
        if (!strcmp(m, "min") || !strcmp(m, "max") || !strcmp(m, "absmax") || !strcmp(m, "sum")) {
            chk_expect_args(c, n, m, 0, 0);
            return set_type(n, &qc_f64);
        }
        if (!strcmp(m, "dim")) {
            if (chk_expect_args(c, n, m, 1, 1))
                chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_i64), &qc_i64, "the axis");
            return set_type(n, &qc_i64);
        }
        if (!strcmp(m, "quantile")) {
            if (chk_expect_args(c, n, m, 1, 1))
                chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_f64), &qc_f64, "the fraction");
            return set_type(n, &qc_f64);
        }
    } else if (recv->k == QC_HIST) {
        if (!strcmp(m, "add") || !strcmp(m, "add_abs")) {
            if (c->w != W_OBSERVE)
                chk_err(c, n, "a histogram is filled only in observe");
            if (chk_expect_args(c, n, m, 1, 3)) {
                const qc_type *t = chk_expr(c, n->kids[0], NULL);
                if (t->k != QC_TENSOR && t->k != QC_ERROR)
                    chk_err(c, n->kids[0], "%s takes a tensor, not %s", m, TN(t, a));
                if (n->nkids == 2)
                    chk_err(c, n, "%s takes a tensor, or a tensor and the flat range [from, to) of its elements", m);
                for (int i = 1; i < n->nkids; i++)
                    chk_convert(c, n->kids[i], chk_expr(c, n->kids[i], &qc_i64), &qc_i64, i == 1 ? "from" : "to");
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "merge")) {
            if (c->w != W_MERGE)
                chk_err(c, n, "histograms are merged only in merge");
            if (chk_expect_args(c, n, m, 1, 1)) {
                const qc_type *t = chk_expr(c, n->kids[0], NULL);
                if (t->k != QC_HIST && t->k != QC_ERROR)
                    chk_err(c, n->kids[0], "merge takes a histogram, not %s", TN(t, a));
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "quantile") || !strcmp(m, "bin") || !strcmp(m, "edge")) {
            const qc_type *want = strcmp(m, "quantile") ? &qc_i64 : &qc_f64;
            if (chk_expect_args(c, n, m, 1, 1))
                chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], want), want, "the argument");
            return set_type(n, &qc_f64);
        }
    } else if (recv->k == QC_GRAM) {
        if (!strcmp(m, "add")) {
            if (c->w != W_OBSERVE)
                chk_err(c, n, "a gram is filled only in observe");
            if (chk_expect_args(c, n, m, 1, 1)) {
                const qc_type *t = chk_expr(c, n->kids[0], NULL);
                if (!(t->k == QC_TENSOR && qc_type_eq(t->elem, &qc_f32)) && t->k != QC_ERROR)
                    chk_err(c, n->kids[0], "add takes a tensor<f32> (the layer's input rows), not %s", TN(t, a));
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "merge")) {
            if (c->w != W_MERGE)
                chk_err(c, n, "grams are merged only in merge");
            if (chk_expect_args(c, n, m, 1, 1)) {
                const qc_type *t = chk_expr(c, n->kids[0], NULL);
                if (t->k != QC_GRAM && t->k != QC_ERROR)
                    chk_err(c, n->kids[0], "merge takes a gram, not %s", TN(t, a));
            }
            return set_type(n, &qc_void);
        }
        if (!strcmp(m, "at")) {
            if (chk_expect_args(c, n, m, 2, 2))
                for (int i = 0; i < 2; i++)
                    chk_convert(c, n->kids[i], chk_expr(c, n->kids[i], &qc_i64), &qc_i64, "the index");
            return set_type(n, &qc_f64);
        }
        if (!strcmp(m, "inverse_factor")) {
            if (c->w != W_SOLVE)
                chk_err(c, n, "inverse_factor is computed only in solve");
            if (chk_expect_args(c, n, m, 2, 2)) {
                chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_f64), &qc_f64, "the scale");
                chk_convert(c, n->kids[1], chk_expr(c, n->kids[1], &qc_f64), &qc_f64, "the damping");
            }
            return set_type(n, qc_tensor_of(c->ar, &qc_f64));
        }
    } else if (recv->k == QC_VALUE) {
        if (!strcmp(m, "dim")) {
            if (chk_expect_args(c, n, m, 1, 1))
                chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_i64), &qc_i64, "the axis");
            return set_type(n, &qc_i64);
        }
        if (!strcmp(m, "attr_ints")) {
            /* v.attr_ints("axes"): an int-list attribute of v's producer (empty when absent) */
            if (!chk_expect_args(c, n, m, 1, 1))
                return set_type(n, &qc_error);
            chk_expr(c, n->kids[0], NULL);
            if (n->kids[0]->kind != QL_STR)
                chk_err(c, n->kids[0], "the attribute name must be a string literal");
            return set_type(n, qc_array_of(c->ar, &qc_i64, -1));
        }
        if (!strcmp(m, "attr")) {
            /* v.attr("group", 1): the default's type is the attribute's */
            if (!chk_expect_args(c, n, m, 2, 2))
                return set_type(n, &qc_error);
            const qc_type *nt = chk_expr(c, n->kids[0], NULL);
            if (nt->k != QC_STR)
                chk_err(c, n->kids[0], "the attribute name must be a string");
            if (n->kids[0]->kind != QL_STR)
                chk_err(c, n->kids[0], "the attribute name must be a string literal");
            const qc_type *dt = qc_default(chk_expr(c, n->kids[1], NULL));
            chk_settle(c, n->kids[1], dt);
            if (dt->k != QC_I64 && dt->k != QC_F64 && dt->k != QC_ERROR) {
                chk_err(c, n->kids[1], "an attribute default is an integer or a float");
                dt = &qc_error;
            }
            return set_type(n, dt);
        }
    }
    (void)obj;
    chk_err(c, n->a, "%s has no method '%s'", TN(recv, a), m);
    return set_type(n, &qc_error);
}


static const qc_type *call(ctx *c, ql_node *n, const qc_type *want)
{
    ql_node *f = n->a;
    if (f->kind == QL_FIELD) {
        const qc_type *recv = chk_expr(c, f->a, NULL);
        if (recv->k == QC_ERROR) {
            for (int i = 0; i < n->nkids; i++)
                chk_expr(c, n->kids[i], NULL);
            return set_type(n, &qc_error);
        }
        return method_call(c, n, recv, f->name);
    }
    if (f->kind != QL_NAME) {
        chk_err(c, f, "this cannot be called");
        return set_type(n, &qc_error);
    }
    const qc_type *tv = f->d ? NULL : chk_tparam(c, f->name);
    if (tv && n->nkids == 1 && n->kids[0]->kind != QL_NAMED_ARG) { /* T(x): a conversion, as i32(x) */
        char a[64], b[64];
        const qc_type *from = chk_expr(c, n->kids[0], NULL);
        if (from->k == QC_ERROR)
            return set_type(n, tv);
        if (!qc_is_scalar(from)) {
            chk_err(c, n->kids[0], "cannot convert %s to %s", TN(from, a), TN(tv, b));
            return set_type(n, &qc_error);
        }
        chk_settle(c, n->kids[0], qc_default(from));
        return set_type(n, tv);
    }
    qc_sym *s = chk_lookup(c, f, f->name, 0);
    if (!s && chk_is_builtin_fn(f->name))
        return builtin_call(c, n, f->name, want);
    if (!s) {
        chk_lookup(c, f, f->name, 1);
        for (int i = 0; i < n->nkids; i++) {
            const char *nm;
            chk_expr(c, chk_arg_expr(n->kids[i], &nm), NULL);
        }
        return set_type(n, &qc_error);
    }
    qc_tbind tb = {0};
    if (f->d && s->kind != QC_SYM_GENERIC) {
        chk_err(c, f->d, "'%s' has no type parameters", f->name);
        s = NULL;
    } else if (s->kind == QC_SYM_GENERIC)
        s = f->d ? chk_explicit_instance(c, f, s, &tb) : chk_instance_for_call(c, n, s, &tb);
    if (!s) {
        for (int i = 0; i < n->nkids; i++) {
            const char *nm;
            chk_expr(c, chk_arg_expr(n->kids[i], &nm), NULL);
        }
        return set_type(n, &qc_error);
    }
    f->sym = s;
    if (s->kind == QC_SYM_FN || s->kind == QC_SYM_KERNEL || s->kind == QC_SYM_GENERIC) {
        if (c->w == W_CONST || c->w == W_RECIPE) { /* (patterns and affine rules may call fns) */
            chk_err(c, f, "'%s' cannot be called here: %s", f->name,
                c->w == W_CONST ? "constant expressions call no functions" : "a recipe's settings call no functions");
            return set_type(n, &qc_error);
        }
        if (s->decl->kind == QL_KERNEL && c->w != W_KERNEL) {
            chk_err(c, f, "kernel '%s' is run by the runtime (from a pattern's lower), not called", f->name);
            return set_type(n, &qc_error);
        }
        char what[160];
        snprintf(what, sizeof what, "'%s'", s->name);
        if (s->kind == QC_SYM_GENERIC) {
            /* called from a generic with its type variables (first(x), x: tensor<T>): the
             * callee's own signature with its parameters bound to the caller's types */
            const ql_node *ps = s->decl->a;
            ql_node *bound = ps ? ql_node_new(c->ar, QL_PARAMS, ps->span) : NULL;
            for (int i = 0; ps && i < ps->nkids; i++) {
                ql_node *p = ql_alloc(c->ar, sizeof *p);
                *p = *ps->kids[i];
                p->type = p->type ? qc_subst(c->ar, p->type, &tb) : NULL;
                ql_node_add(c->ar, bound, p);
            }
            chk_args(c, n, what, bound);
            return set_type(n, s->decl->b && s->decl->b->type ? qc_subst(c->ar, s->decl->b->type, &tb) : &qc_void);
        }
        note_call(c, s);
        chk_args(c, n, what, s->decl->a);
        return set_type(n, s->decl->b ? s->decl->b->type : &qc_void);
    }
    if (s->kind == QC_SYM_CALIBRATOR) {
        chk_err(c, f, "calibrator '%s' is used in a recipe (activation = i8 by %s(...)), not called", f->name, f->name);
        return set_type(n, &qc_error);
    }
    chk_err(c, f, "'%s' is not a function", f->name);
    return set_type(n, &qc_error);
}

static const qc_type *field(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *t = chk_expr(c, n->a, NULL);
    const char *m = n->name;
    qc_sym *base = n->a->kind == QL_NAME ? n->a->sym : NULL;
    if (base && base->kind == QC_SYM_AFF_IN) {
        if (!strcmp(m, "zero"))
            return set_type(n, &qc_i32);
        if (!strcmp(m, "scale"))
            return set_type(n, &qc_f64);
        chk_err(c, n, "an affine input has .zero and .scale, not '.%s'", m);
        return set_type(n, &qc_error);
    }
    switch (t->k) {
    case QC_ERROR: return set_type(n, t);
    case QC_TENSOR:
        if (!strcmp(m, "numel") || !strcmp(m, "rank"))
            return set_type(n, &qc_i64);
        if (!strcmp(m, "first") || !strcmp(m, "samples")) {
            if (c->w != W_OBSERVE)
                chk_err(c, n, "'.%s' tells a calibrator's observe which calibration samples it sees", m);
            return set_type(n, &qc_i64);
        }
        break;
    case QC_ARRAY:
        if (!strcmp(m, "len"))
            return set_type(n, &qc_i64);
        break;
    case QC_HIST:
        if (!strcmp(m, "count") || !strcmp(m, "lo") || !strcmp(m, "hi") || !strcmp(m, "width") || !strcmp(m, "min") ||
            !strcmp(m, "max"))
            return set_type(n, &qc_f64);
        if (!strcmp(m, "bins"))
            return set_type(n, &qc_i64);
        break;
    case QC_GRAM:
        if (!strcmp(m, "dim"))
            return set_type(n, &qc_i64);
        if (!strcmp(m, "rows"))
            return set_type(n, &qc_f64);
        break;
    case QC_QTYPE: {
        int i = qc_qtype_field(m);
        if (i >= 0)
            return set_type(n, i < QC_QTYPE_INTS ? &qc_i64 : &qc_bool);
        break;
    }
    case QC_QPARAMS:
        if (!strcmp(m, "scale"))
            return set_type(n, &qc_f64);
        if (!strcmp(m, "zero"))
            return set_type(n, &qc_i64);
        break;
    case QC_VALUE:
        if (!strcmp(m, "rank"))
            return set_type(n, &qc_i64);
        if (!strcmp(m, "const") || !strcmp(m, "present"))
            return set_type(n, &qc_bool);
        if (!strcmp(m, "op") || !strcmp(m, "dtype") || !strcmp(m, "read_by") || !strcmp(m, "feeds"))
            return set_type(n, &qc_str);
        break;
    case QC_STATE: {
        const ql_node *cal = t->decl;
        for (int i = 0; i < cal->nkids; i++)
            if (cal->kids[i]->kind == QL_STATE && !strcmp(cal->kids[i]->name, m)) {
                n->sym = cal->kids[i]->sym;
                return set_type(n, cal->kids[i]->sym ? ((qc_sym *)cal->kids[i]->sym)->type : &qc_error);
            }
        const char *cands[64];
        int nc = 0;
        for (int i = 0; i < cal->nkids && nc < 64; i++)
            if (cal->kids[i]->kind == QL_STATE)
                cands[nc++] = cal->kids[i]->name;
        const char *hint = ql_suggest(m, cands, nc);
        if (hint)
            chk_err(c, n, "the state has no field '%s'; did you mean '%s'?", m, hint);
        else
            chk_err(c, n, "the state has no field '%s'", m);
        return set_type(n, &qc_error);
    }
    default: break;
    }
    chk_err(c, n, "%s has no field '%s'", TN(t, a), m);
    return set_type(n, &qc_error);
}

static const qc_type *index_expr(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *t = chk_expr(c, n->a, NULL);
    for (int i = 0; i < n->nkids; i++) {
        const qc_type *it = chk_expr(c, n->kids[i], &qc_i64);
        char w[96];
        if (!qc_is_int(it) && it->k != QC_ERROR)
            chk_err(c, n->kids[i], "an index is an integer, not %s%s", TN(it, a), chk_when(it, qc_is_int, w, sizeof w));
        else
            chk_settle(c, n->kids[i], it->k == QC_INTLIT ? &qc_i64 : it);
    }
    if (t->k == QC_ERROR)
        return set_type(n, t);
    if (t->k != QC_ARRAY && t->k != QC_TENSOR) {
        chk_err(c, n->a, "%s cannot be indexed", TN(t, a));
        return set_type(n, &qc_error);
    }
    if (t->k == QC_ARRAY && n->nkids != 1) {
        chk_err(c, n, "an array takes one index, not %d", n->nkids);
        return set_type(n, &qc_error);
    }
    return set_type(n, t->elem);
}

static const qc_type *name_expr(ctx *c, ql_node *n)
{
    if (n->d) {
        chk_err(c, n, "type arguments come with a call: %s<...>(...)", n->name);
        return set_type(n, &qc_error);
    }
    qc_sym *s = chk_lookup(c, n, n->name, 1);
    if (!s)
        return set_type(n, &qc_error);
    n->sym = s;
    switch (s->kind) {
    case QC_SYM_FN:
    case QC_SYM_KERNEL:
    case QC_SYM_GENERIC:
        chk_err(c, n, "'%s' is a function: call it with (...)", n->name);
        return set_type(n, &qc_error);
    case QC_SYM_CALIBRATOR:
    case QC_SYM_PATTERN:
    case QC_SYM_RECIPE:
    case QC_SYM_TRANSFORM:
        chk_err(c, n, "'%s' is a %s, not a value", n->name,
            s->kind == QC_SYM_CALIBRATOR ? "calibrator" : s->kind == QC_SYM_PATTERN ? "pattern"
            : s->kind == QC_SYM_TRANSFORM ? "transform" : "recipe");
        return set_type(n, &qc_error);
    case QC_SYM_CONST:
        if (!s->type) {
            chk_err(c, n, "constant '%s' is used before its definition", n->name);
            return set_type(n, &qc_error);
        }
        break;
    case QC_SYM_STATE:
        if (c->w == W_CONST) {
            chk_err(c, n, "state '%s' is not a constant", n->name);
            return set_type(n, &qc_error);
        }
        break;
    case QC_SYM_LOCAL:
    case QC_SYM_LOOP:
    case QC_SYM_DIM:
        if (c->w == W_CONST) {
            chk_err(c, n, "'%s' is not a constant", n->name);
            return set_type(n, &qc_error);
        }
        break;
    default: break;
    }
    return set_type(n, s->type ? s->type : &qc_error);
}

static const qc_type *cast(ctx *c, ql_node *n)
{
    char a[64], b[64];
    const qc_type *to = chk_type(c, n->a);
    const qc_type *from = chk_expr(c, n->b, NULL);
    if (from->k == QC_ERROR || to->k == QC_ERROR)
        return set_type(n, to);
    if (!qc_is_scalar(from)) {
        chk_err(c, n->b, "cannot convert %s to %s", TN(from, a), TN(to, b));
        return set_type(n, &qc_error);
    }
    if (n->kind == QL_SAT && !qc_is_int(to)) {
        char w[96];
        chk_err(c, n->a, "sat<...> converts to an integer type, not %s%s", TN(to, a), chk_when(to, qc_is_int, w, sizeof w));
        return set_type(n, &qc_error);
    }
    chk_settle(c, n->b, qc_default(from));
    return set_type(n, to);
}

const qc_type *chk_expr(ctx *c, ql_node *n, const qc_type *want)
{
    switch (n->kind) {
    case QL_INT:
        if (n->ival > (uint64_t)INT64_MAX + 1)
            chk_err(c, n, "integer literal does not fit in i64");
        return set_type(n, &qc_intlit);
    case QL_FLOAT: return set_type(n, &qc_floatlit);
    case QL_BOOL: return set_type(n, &qc_bool);
    case QL_STR: return set_type(n, &qc_str);
    case QL_NAME: return name_expr(c, n);
    case QL_UNARY: return unary(c, n, want);
    case QL_BINARY: return binary(c, n, want);
    case QL_CALL: return call(c, n, want);
    case QL_FIELD: return field(c, n);
    case QL_INDEX: return index_expr(c, n);
    case QL_CAST:
    case QL_SAT: return cast(c, n);
    case QL_NAMED_ARG:
        chk_err(c, n, "a named argument is only allowed in a call");
        return set_type(n, &qc_error);
    default:
        chk_err(c, n, "expected an expression");
        return set_type(n, &qc_error);
    }
}

/* An expression whose literals get their default types (let x = 3 is i64). */
const qc_type *chk_value_expr(ctx *c, ql_node *n, const qc_type *want)
{
    const qc_type *t = chk_expr(c, n, want);
    if (t->k == QC_INTLIT || t->k == QC_FLOATLIT) {
        t = want && qc_widens(t, want) ? want : qc_default(t);
        chk_settle(c, n, t);
    }
    return t;
}

/* -------------------------------------------------------------- types */

/* A histogram's number of bins known at check time (a constant, or the default of the calibrator
 * parameter it names) is even and in range, as the runtime requires. */
static void check_bins(ctx *c, const ql_node *at, int64_t v)
{
    if (v < 2 || v > QRL_MAX_HIST_BINS || v % 2)
        chk_err(c, at, "a histogram needs an even number of bins from 2 to %d, not %lld", QRL_MAX_HIST_BINS, (long long)v);
}

static void hist_bins(ctx *c, const ql_node *e)
{
    int64_t v;
    if (const_int(e, &v, 0)) {
        check_bins(c, e, v);
        return;
    }
    const qc_sym *s = e->kind == QL_NAME ? e->sym : NULL;
    if (s && s->kind == QC_SYM_PARAM && s->decl && s->decl->b && const_int(s->decl->b, &v, 0))
        check_bins(c, s->decl->b, v);
}

/* In a recipe's `by cal(..., bins = N)`: a constant argument for a parameter that sizes one of the
 * calibrator's histograms is checked as its default is. */
void chk_hist_bins_arg(ctx *c, const ql_node *cal, const char *param, const ql_node *arg)
{
    int64_t v;
    if (!const_int(arg, &v, 0))
        return;
    for (int i = 0; i < cal->nkids; i++) {
        const ql_node *k = cal->kids[i];
        if (k->kind == QL_STATE && k->a && k->a->kind == QL_TYPE_HIST && k->a->nkids == 1 &&
            k->a->kids[0]->kind == QL_NAME && !strcmp(k->a->kids[0]->name, param)) {
            check_bins(c, arg, v);
            return;
        }
    }
}

/* The type variable of the generic being checked named name, or NULL. */
const qc_type *chk_tparam(const ctx *c, const char *name)
{
    for (int i = 0; c->tparams && name && i < c->tparams->nkids; i++)
        if (!strcmp(c->tparams->kids[i]->name, name))
            return c->tparams->kids[i]->type;
    return NULL;
}

/* tensor<T>[.., M, 4]: names, integers and a leading '..', on a kernel's parameter only (what the
 * names mean is the kernel's: check_items.c, kernel_shapes). */
static void tensor_shape(ctx *c, const ql_node *n)
{
    if (!c->shape_ok) {
        chk_err(c, n, "only a kernel's tensor parameter declares a shape");
        return;
    }
    if (n->nkids > QR_MAX_DIMS)
        chk_err(c, n->kids[QR_MAX_DIMS], "a tensor has at most %d dimensions", QR_MAX_DIMS);
    for (int i = 0; i < n->nkids; i++) {
        const ql_node *d = n->kids[i];
        if (d->kind == QL_DIM_REST && i > 0)
            chk_err(c, d, "'..' stands for the leading dimensions: it comes first");
        else if (d->kind != QL_NAME && d->kind != QL_INT && d->kind != QL_DIM_REST)
            chk_err(c, d, "a dimension is a name, an integer or '..'");
    }
}

/* A constant integer expression (literals, consts and calibrator params
 * are taken at face value only when literal). */
const qc_type *chk_type(ctx *c, ql_node *n)
{
    char a[64];
    if (!n)
        return &qc_error;
    const qc_type *t = &qc_error;
    switch (n->kind) {
    case QL_TYPE:
        switch (n->op) {
        case QL_TOK_BOOL: t = &qc_bool; break;
        case QL_TOK_I8: t = &qc_i8; break;
        case QL_TOK_U8: t = &qc_u8; break;
        case QL_TOK_I16: t = &qc_i16; break;
        case QL_TOK_U16: t = &qc_u16; break;
        case QL_TOK_I32: t = &qc_i32; break;
        case QL_TOK_I64: t = &qc_i64; break;
        case QL_TOK_F32: t = &qc_f32; break;
        case QL_TOK_F64: t = &qc_f64; break;
        case QL_TOK_QTYPE: t = &qc_qtype; break;
        case QL_TOK_QPARAMS: t = &qc_qparams; break;
        case QL_TOK_GRAM:
            if (!c->cal || c->w != W_CONST) {
                chk_err(c, n, "a gram is calibrator state: declare it with 'state NAME: gram'");
                break;
            }
            t = &qc_gram;
            break;
        case QL_TOK_I4:
        case QL_TOK_U4: /* a setting's storage type; values live in a container (i8, u8) */
            chk_err(c, n, "'%s' is a 4-bit storage type, for a recipe setting (weight = %s symmetric ...); "
                          "values of code are %s or wider",
                    n->op == QL_TOK_I4 ? "i4" : "u4", n->op == QL_TOK_I4 ? "i4" : "u4", n->op == QL_TOK_I4 ? "i8" : "u8");
            t = &qc_error;
            break;
        case QL_TOK_IDENT:
            t = chk_tparam(c, n->name);
            if (!t) {
                chk_err(c, n, "unknown type '%s'", n->name); /* not a type parameter of this fn */
                t = &qc_error;
            }
            break;
        default: break;
        }
        break;
    case QL_TYPE_ARRAY: {
        const qc_type *e = chk_type(c, n->a);
        if (!qc_is_scalar(e) && e->k != QC_ERROR) {
            chk_err(c, n->a, "array elements are numbers or bools, not %s", TN(e, a));
            e = &qc_error;
        }
        int64_t len = -1;
        if (n->b) {
            if (c->cal == NULL || c->w != W_CONST) {
                chk_err(c, n->b, "only calibrator state arrays have a size; write %s[] for an array parameter", TN(e, a));
            } else {
                const qc_type *lt = chk_expr(c, n->b, &qc_i64);
                chk_convert(c, n->b, lt, &qc_i64, "an array size");
                len = 0; /* known at instantiation, from the calibrator's parameters */
            }
        }
        t = qc_array_of(c->ar, e, len);
        break;
    }
    case QL_TYPE_TENSOR: {
        const qc_type *e = chk_type(c, n->a);
        if (!qc_is_numeric(e) && e->k != QC_ERROR) {
            char w[96];
            chk_err(c, n->a, "tensor elements are numbers, not %s%s", TN(e, a), chk_when(e, qc_is_numeric, w, sizeof w));
            e = &qc_error;
        }
        t = qc_tensor_of(c->ar, e);
        if (n->flag)
            tensor_shape(c, n);
        break;
    }
    case QL_TYPE_HIST:
        if (!c->cal || c->w != W_CONST) {
            chk_err(c, n, "a histogram is calibrator state: declare it with 'state NAME: histogram(bins)'");
            break;
        }
        if (n->nkids < 1 || n->nkids > 1) {
            chk_err(c, n, "histogram takes one argument (the number of bins), not %d", n->nkids);
            break;
        }
        chk_convert(c, n->kids[0], chk_expr(c, n->kids[0], &qc_i64), &qc_i64, "the number of bins");
        hist_bins(c, n->kids[0]);
        t = &qc_hist;
        break;
    default: chk_err(c, n, "expected a type"); break;
    }
    n->type = t;
    return t;
}
