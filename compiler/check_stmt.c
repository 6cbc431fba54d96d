/* The checker's statements (see check.c): assignments and what may be
 * assigned, let/var, if, loops, break/continue and return, blocks and their
 * control flow (a block that always returns, code after it unreachable). */
#include "check_int.h"

/* --------------------------------------------------------- statements */


static int is_lvalue_mutable(ctx *c, ql_node *n, const char **why)
{
    switch (n->kind) {
    case QL_NAME: {
        qc_sym *s = n->sym;
        if (!s)
            return 1; /* already reported */
        switch (s->kind) {
        case QC_SYM_LOCAL:
            *why = s->mutable_ ? NULL : "it is declared with let (use var for a variable)";
            return s->mutable_;
        case QC_SYM_STATE:
            if (c->w == W_SOLVE) {
                *why = "state is read only in solve";
                return 0;
            }
            return c->w == W_OBSERVE || c->w == W_MERGE;
        case QC_SYM_AFF_OUT: c->assigned_y = 1; return 1;
        case QC_SYM_LOOP: *why = "it is a loop variable"; return 0;
        case QC_SYM_PARAM: *why = "it is a parameter"; return 0;
        case QC_SYM_DIM: *why = "it is a dimension of a parameter's declared shape"; return 0;
        case QC_SYM_CONST: *why = "it is a constant"; return 0;
        case QC_SYM_OTHER: *why = "it is the other state (read only)"; return 0;
        default: *why = "it is not a variable"; return 0;
        }
    }
    case QL_INDEX: {
        const qc_type *t = n->a->type;
        if (t && t->k == QC_TENSOR && c->w != W_KERNEL) {
            const qc_sym *ts = n->a->kind == QL_NAME ? n->a->sym : NULL;
            if (c->w == W_SOLVE && c->layer_solve && ts && ts->kind == QC_SYM_PARAM)
                return 1; /* a layer calibrator's solve writes the weight, scales and zero points */
            *why = "tensors are written only in kernels and in a layer calibrator's solve (its parameters)";
            return 0;
        }
        if (n->a->kind == QL_NAME && n->a->sym && ((qc_sym *)n->a->sym)->kind == QC_SYM_STATE)
            return is_lvalue_mutable(c, n->a, why);
        if (n->a->kind == QL_FIELD) {
            *why = "the other state is read only";
            return 0;
        }
        return 1;
    }
    case QL_FIELD: *why = "fields of built-in values are read only"; return 0;
    default: *why = "it is not a variable"; return 0;
    }
}

static void assign(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *lt = chk_expr(c, n->a, NULL);
    const char *why = "it is not a variable";
    if (lt->k != QC_ERROR && !is_lvalue_mutable(c, n->a, &why)) {
        const char *what = n->a->kind == QL_NAME ? n->a->name : NULL;
        if (what)
            chk_err(c, n->a, "cannot assign to '%s': %s", what, why);
        else
            chk_err(c, n->a, "cannot assign to this: %s", why);
    }
    if (lt->k == QC_HIST || lt->k == QC_GRAM || lt->k == QC_TENSOR || (lt->k == QC_ARRAY && n->a->kind != QL_INDEX)) {
        chk_err(c, n->a, "a %s cannot be assigned as a whole", TN(lt, a));
        chk_expr(c, n->b, NULL);
        return;
    }
    const qc_type *rt = chk_expr(c, n->b, lt);
    if (n->op != QL_TOK_ASSIGN && !qc_is_numeric(lt)) {
        chk_err(c, n, "%s needs a number on the left, not %s", ql_tok_desc(n->op), TN(lt, a));
        return;
    }
    chk_convert(c, n->b, rt, lt, "the assigned value");
}

/* Names declared by a block's lets, announced before the statements so a
 * use that comes first is "used before its definition", not "unknown". */
static void announce_lets(ctx *c, ql_node *b)
{
    for (int i = 0; i < b->nkids; i++) {
        ql_node *s = b->kids[i];
        if (s->kind == QL_LET && !chk_scope_find(c->sc, s->name)) {
            qc_sym *sym = chk_new_sym(c, s->name, QC_SYM_LOCAL, &qc_error, s);
            sym->defined = 0;
            chk_scope_add(c, sym);
        }
    }
}

static int stmt(ctx *c, ql_node *n);

/* let / var: the declared type, or the value's when it has a run-time representation. */
static void let_stmt(ctx *c, ql_node *n)
{
    char a[64];
    const qc_type *dt = n->a ? chk_type(c, n->a) : NULL;
    if (dt && (dt->k == QC_HIST || dt->k == QC_GRAM || dt->k == QC_TENSOR)) {
        chk_err(c, n->a, "a local cannot be a %s", TN(dt, a));
        dt = &qc_error;
    }
    const qc_type *t = chk_value_expr(c, n->b, dt);
    if (dt)
        chk_convert(c, n->b, t, dt, "the initial value");
    else if (t->k == QC_VOID) {
        chk_err(c, n->b, "this has no value");
        t = &qc_error;
    } else if (t->k == QC_STR || t->k == QC_STATE || t->k == QC_VALUE) {
        /* no run-time representation: usable only where they appear */
        chk_err(c, n->b, "a local cannot be a %s", TN(t, a));
        t = &qc_error;
    }
    qc_sym *s = chk_declare(c, n->name, QC_SYM_LOCAL, dt ? dt : t, n);
    s->mutable_ = n->flag;
    s->index = c->nlocals++;
    n->sym = s;
}

/* A call as a statement: a kernel's or method's result must be used, a fn's may be dropped. */
static void expr_stmt(ctx *c, ql_node *n)
{
    if (n->a->kind != QL_CALL) {
        chk_err(c, n, "this expression does nothing (a statement is a call, an assignment or a declaration)");
        chk_expr(c, n->a, NULL);
        return;
    }
    const qc_type *t = chk_expr(c, n->a, NULL);
    if (t->k != QC_VOID && t->k != QC_ERROR && n->a->a->kind == QL_NAME && n->a->a->sym &&
        ((qc_sym *)n->a->a->sym)->decl && ((qc_sym *)n->a->a->sym)->decl->kind == QL_FN)
        return; /* a function's result may be dropped */
    if (t->k != QC_VOID && t->k != QC_ERROR)
        chk_err(c, n, "the result of this call is unused");
}

/* for v in lo .. hi: integer bounds of one type, v declared in the loop's own scope. */
static void for_stmt(ctx *c, ql_node *n)
{
    char a[64], b[64];
    const qc_type *lo = chk_expr(c, n->a, NULL), *hi = chk_expr(c, n->b, NULL);
    const qc_type *t = qc_common(lo, hi);
    if (!t || !qc_is_int(t)) {
        if (lo->k != QC_ERROR && hi->k != QC_ERROR)
            chk_err(c, n, "a for loop runs over integers, not %s .. %s", TN(lo, a), TN(hi, b));
        t = &qc_i64;
    }
    t = qc_default(t);
    chk_settle(c, n->a, t);
    chk_settle(c, n->b, t);
    scope sc;
    chk_push_scope(c, &sc);
    qc_sym *v = chk_declare(c, n->name, QC_SYM_LOOP, t, n);
    v->index = c->nlocals++;
    n->sym = v;
    c->loops++;
    chk_block(c, n->c);
    c->loops--;
    chk_pop_scope(c);
}

/* return [value]: a value exactly when the function has a result. */
static void return_stmt(ctx *c, ql_node *n)
{
    char a[64];
    if (c->w == W_AFFINE || c->w == W_OBSERVE || c->w == W_MERGE) {
        if (n->a) {
            chk_err(c, n->a, "%s returns nothing", c->w == W_AFFINE ? "an affine body" : "this");
            chk_expr(c, n->a, NULL);
        }
        return;
    }
    if (!c->ret || c->ret->k == QC_VOID) {
        if (n->a) {
            chk_err(c, n->a, "this function returns nothing (declare its result with -> TYPE)");
            chk_expr(c, n->a, NULL);
        }
        return;
    }
    if (!n->a) {
        chk_err(c, n, "return needs a value of type %s", TN(c->ret, a));
        return;
    }
    chk_convert(c, n->a, chk_expr(c, n->a, c->ret), c->ret, "the returned value");
}

/* Checks statement n; 1 when nothing after it in its block can run (it returns or jumps). */
static int stmt(ctx *c, ql_node *n)
{
    switch (n->kind) {
    case QL_LET: let_stmt(c, n); return 0;
    case QL_ASSIGN: assign(c, n); return 0;
    case QL_EXPR_STMT: expr_stmt(c, n); return 0;
    case QL_IF: {
        chk_convert(c, n->a, chk_expr(c, n->a, &qc_bool), &qc_bool, "the condition");
        int t = chk_block(c, n->b);
        int e = 0;
        if (n->c)
            e = n->c->kind == QL_IF ? stmt(c, n->c) : chk_block(c, n->c);
        return t && e && n->c;
    }
    case QL_WHILE:
        chk_convert(c, n->a, chk_expr(c, n->a, &qc_bool), &qc_bool, "the condition");
        c->loops++;
        chk_block(c, n->c);
        c->loops--;
        return 0;
    case QL_FOR: for_stmt(c, n); return 0;
    case QL_RETURN: return_stmt(c, n); return 1;
    case QL_BREAK:
    case QL_CONTINUE:
        if (!c->loops)
            chk_err(c, n, "'%s' outside a loop", n->kind == QL_BREAK ? "break" : "continue");
        return 1; /* what follows in the block is unreachable */
    case QL_BLOCK: return chk_block(c, n);
    default: chk_err(c, n, "expected a statement"); return 0;
    }
}

int chk_block(ctx *c, ql_node *b)
{
    scope sc;
    chk_push_scope(c, &sc);
    announce_lets(c, b);
    int ends = 0, reported = 0;
    for (int i = 0; i < b->nkids; i++) {
        if (ends && !reported) {
            chk_err(c, b->kids[i], "unreachable statement");
            reported = 1;
        }
        int r = stmt(c, b->kids[i]);
        /* break/continue end the block but not the function */
        if (b->kids[i]->kind == QL_BREAK || b->kids[i]->kind == QL_CONTINUE)
            ends = ends ? ends : 2;
        else if (r)
            ends = 1;
    }
    chk_pop_scope(c);
    return ends == 1;
}
