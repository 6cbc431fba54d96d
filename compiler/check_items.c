/* The checker's items (see check.c): fns and kernels, calibrators, patterns
 * (roles, lowerings and their kernel's convention), affine rules, recipes
 * (their settings) and module consts; and the generics: a call's type
 * arguments, unified or written out, and the instances made from them. */
#include "check_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generic.h"
#include "recipe.h" /* QR_SETTINGS: the recipe settings table */
#include "qrl.h" /* qrl_op_known: the runtime's op table */

/* ------------------------------------------------------------- items */

static void params(ctx *c, ql_node *ps, int scalars_only, const char *owner)
{
    char a[64];
    if (ps && ps->nkids > QC_MAX_PARAMS)
        chk_err(c, ps->kids[QC_MAX_PARAMS], "%s takes at most %d parameters", owner, QC_MAX_PARAMS);
    for (int i = 0; ps && i < ps->nkids; i++) {
        ql_node *p = ps->kids[i];
        where w = c->w;
        c->w = W_CONST;
        const qc_type *t = p->type ? p->type : chk_type(c, p->a); /* fn signatures are checked first */
        c->w = w;
        if (scalars_only && !qc_is_scalar(t) && t->k != QC_ERROR) {
            chk_err(c, p->a, "a parameter of %s is a number or a bool, not %s", owner, TN(t, a));
            t = &qc_error;
        }
        if (p->b) {
            w = c->w;
            c->w = W_CONST;
            chk_convert(c, p->b, chk_expr(c, p->b, t), t, "the default value");
            c->w = w;
        }
        p->type = t;
        qc_sym *s = chk_declare(c, p->name, QC_SYM_PARAM, t, p);
        s->index = i;
        p->sym = s;
    }
}

/* A kernel's declared shapes (tensor<T>[.., M, K], checked as types by chk_type): the first
 * time an input's shape names a dimension binds it, an i64 the body reads (the runtime checks
 * every later use against it when the kernel is called); the output, the last tensor parameter,
 * names only bound dimensions, and takes its '..' from the inputs'. An epilogue's tensors have
 * its accumulator's shape: it declares none. */
static void kernel_shapes(ctx *c, ql_node *k)
{
    ql_node *ps = k->a;
    int out = -1, rest_in = 0;
    const ql_node *shaped = NULL;
    for (int i = 0; ps && i < ps->nkids; i++)
        if (ps->kids[i]->type && ps->kids[i]->type->k == QC_TENSOR)
            out = i;
    for (int i = 0; ps && i < ps->nkids; i++) {
        ql_node *tt = ps->kids[i]->a;
        if (!tt || tt->kind != QL_TYPE_TENSOR || !tt->flag)
            continue;
        shaped = shaped ? shaped : tt;
        for (int d = 0; d < tt->nkids; d++) {
            ql_node *dn = tt->kids[d];
            if (dn->kind == QL_DIM_REST) {
                if (i != out)
                    rest_in = 1;
                else if (!rest_in)
                    chk_err(c, dn, "the output's '..' is the inputs' leading dimensions, but no input's shape has '..'");
                continue;
            }
            if (dn->kind != QL_NAME)
                continue;
            qc_sym *b = chk_scope_find(c->sc, dn->name);
            if (b && b->kind == QC_SYM_DIM) {
                dn->sym = b;
                continue;
            }
            if (i == out) {
                chk_err(c, dn, "dimension '%s' of the output '%s' is no input's: name it in an input's shape", dn->name,
                        ps->kids[i]->name);
                continue;
            }
            b = chk_declare(c, dn->name, QC_SYM_DIM, &qc_i64, dn);
            if (b->kind != QC_SYM_DIM) /* the name of a parameter: reported */
                continue;
            b->index = c->nlocals++;
            b->dim_param = i;
            b->dim_pos = d;
            dn->sym = b;
        }
    }
    if (shaped && ps->nkids > 0 && !strcmp(ps->kids[0]->name, "acc") && ps->kids[0]->type &&
        ps->kids[0]->type->k == QC_TENSOR)
        chk_err(c, shaped, "an epilogue's tensors have its accumulator's shape: it declares none");
}

void chk_function(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    scope sc;
    chk_push_scope(c, &sc);
    c->w = n->kind == QL_KERNEL ? W_KERNEL : W_FN;
    c->fn = s;
    c->nlocals = 0;
    params(c, n->a, 0, "a function");
    if (n->kind == QL_KERNEL)
        kernel_shapes(c, n);
    c->ret = n->b ? n->b->type : &qc_void;
    if (n->kind == QL_KERNEL && n->b)
        chk_err(c, n->b, "a kernel returns nothing: it writes its output arrays or tensors");
    int returns = chk_block(c, n->c);
    if (!returns && c->ret->k != QC_VOID && c->ret->k != QC_ERROR) {
        ql_span end = n->c->span;
        end.start = end.end > 0 ? end.end - 1 : 0;
        ql_error(c->d, end, "missing return at the end of '%s' (it returns %s)", s->name,
                 qc_type_name(c->ret, (char[64]){0}, 64));
    }
    c->fn = NULL;
    c->ret = NULL;
    chk_pop_scope(c);
}

int chk_layer_calibrator(const ql_node *cal)
{
    for (int i = 0; cal && i < cal->nkids; i++)
        if (cal->kids[i]->kind == QL_SOLVE)
            return cal->kids[i]->b == NULL;
    return 0;
}

/* A layer calibrator's solve: solve(w: tensor<f64>, t: qtype, block: i64, scale: tensor<f64>,
 * zero: tensor<f64>), in this order (the quantizer passes them so). */
static void layer_solve_params(ctx *c, const ql_node *k)
{
    static const char *const want = "solve(w: tensor<f64>, t: qtype, block: i64, scale: tensor<f64>, zero: tensor<f64>)";
    const qc_type *ft = qc_tensor_of(c->ar, &qc_f64);
    const qc_type *types[5] = {ft, &qc_qtype, &qc_i64, ft, ft};
    int n = k->a ? k->a->nkids : 0, ok = n == 5;
    for (int i = 0; ok && i < 5; i++) {
        const qc_type *t = k->a->kids[i]->type;
        if (t && t->k == QC_ERROR)
            return; /* already reported */
        ok = t && qc_type_eq(t, types[i]);
    }
    if (!ok)
        chk_err(c, k, "a solve without a result is a layer calibrator's, which rounds a weight: %s", want);
}

void chk_calibrator(ctx *c, qc_sym *s)
{
    char a[64];
    ql_node *n = s->decl;
    scope sc;
    chk_push_scope(c, &sc);
    c->cal = n;
    c->w = W_CONST;
    params(c, n->a, 1, "a calibrator");
    ql_node *seen[4] = {0}; /* observe, merge, solve */
    /* State first: the bodies may use any field. */
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind != QL_STATE)
            continue;
        c->w = W_CONST;
        const qc_type *t = chk_type(c, k->a);
        if (t->k == QC_TENSOR || t->k == QC_QTYPE || t->k == QC_QPARAMS) {
            chk_err(c, k->a, "state is numbers, bools, sized arrays, histograms or grams, not %s", TN(t, a));
            t = &qc_error;
        }
        if (t->k == QC_ARRAY && !k->a->b) {
            chk_err(c, k->a, "a state array needs a size: %s[N]", TN(t->elem, a));
        }
        if (k->b) {
            if (t->k == QC_HIST || t->k == QC_GRAM || t->k == QC_ARRAY)
                chk_err(c, k->b, "%s state starts empty (zero); it takes no initial value", TN(t, a));
            else
                chk_convert(c, k->b, chk_expr(c, k->b, t), t, "the initial value");
        }
        qc_sym *st = chk_declare(c, k->name, QC_SYM_STATE, t, k);
        st->mutable_ = 1;
        k->sym = st;
    }
    qc_type *state_t = ql_alloc(c->ar, sizeof *state_t);
    state_t->k = QC_STATE;
    state_t->decl = n;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        int slot = k->kind == QL_OBSERVE ? 0 : k->kind == QL_MERGE ? 1 : k->kind == QL_SOLVE ? 2 : -1;
        if (slot < 0)
            continue;
        if (seen[slot]) {
            chk_err(c, k, "calibrator '%s' has two %s blocks", s->name, slot == 0 ? "observe" : slot == 1 ? "merge" : "solve");
            continue;
        }
        seen[slot] = k;
        scope fs;
        chk_push_scope(c, &fs);
        c->nlocals = 0;
        c->fn = NULL;
        if (slot == 0) {
            c->w = W_CONST;
            params(c, k->a, 0, "observe");
            c->w = W_OBSERVE;
            if (!k->a || k->a->nkids != 1 || !k->a->kids[0]->type || k->a->kids[0]->type->k != QC_TENSOR)
                chk_err(c, k, "observe takes one tensor: observe(x: tensor<f32>)");
            c->ret = &qc_void;
        } else if (slot == 1) {
            c->w = W_MERGE;
            qc_sym *o = chk_declare(c, k->name, QC_SYM_OTHER, state_t, k);
            k->sym = o;
            c->ret = &qc_void;
        } else if (!k->b) {
            c->w = W_CONST;
            params(c, k->a, 0, "solve");
            c->w = W_SOLVE;
            c->layer_solve = 1;
            layer_solve_params(c, k);
            c->ret = &qc_void;
        } else {
            c->w = W_CONST;
            params(c, k->a, 0, "solve");
            c->w = W_SOLVE;
            if (!k->a || k->a->nkids != 1 || !k->a->kids[0]->type || k->a->kids[0]->type->k != QC_QTYPE)
                chk_err(c, k, "solve takes the target type: solve(t: qtype) -> qparams");
            const qc_type *rt = chk_type(c, k->b);
            if (rt->k != QC_QPARAMS && rt->k != QC_ERROR)
                chk_err(c, k->b, "solve returns qparams, not %s", TN(rt, a));
            c->ret = &qc_qparams;
        }
        int returns = chk_block(c, k->c);
        c->layer_solve = 0;
        if (slot == 2 && k->b && !returns) {
            ql_span end = k->c->span;
            end.start = end.end > 0 ? end.end - 1 : 0;
            ql_error(c->d, end, "missing return at the end of solve (it returns qparams)");
        }
        chk_pop_scope(c);
    }
    if (!seen[0])
        chk_err_decl(c, n, "calibrator '%s' has no observe block", s->name);
    if (!seen[1])
        chk_err_decl(c, n, "calibrator '%s' has no merge block: its state could not be combined across threads", s->name);
    if (!seen[2])
        chk_err_decl(c, n, "calibrator '%s' has no solve block", s->name);
    c->cal = NULL;
    c->ret = NULL;
    chk_pop_scope(c);
}

static const char *op_hint(const char *op)
{
    const char *cands[512];
    int n = qrl_op_count();
    if (n > 512)
        n = 512;
    for (int i = 0; i < n; i++)
        cands[i] = qrl_op_name(i);
    return ql_suggest(op, cands, n);
}

void chk_op_name(ctx *c, ql_node *at, const char *op)
{
    if (qrl_op_known(op))
        return;
    const char *hint = op_hint(op);
    if (hint)
        chk_err(c, at, "unknown ONNX op '%s'; did you mean '%s'?", op, hint);
    else
        chk_err(c, at, "unknown ONNX op '%s'", op);
}

static qc_sym *value_sym(ctx *c, ql_node *at, const char *name)
{
    if (!strcmp(name, "_"))
        return NULL;
    qc_sym *s = chk_scope_find(c->sc, name);
    if (!s) {
        s = chk_new_sym(c, name, QC_SYM_VALUE, &qc_value, at);
        s->index = c->sc->n; /* the pattern's value table: in order of first appearance */
        if (s->index == QRL_PATTERN_MAX_VALUES) /* the matcher's table (quantizer/match.h) */
            chk_err(c, at, "'%s' is value %d of this pattern; a pattern names at most %d values", name, s->index + 1,
                QRL_PATTERN_MAX_VALUES);
        chk_scope_add(c, s);
    }
    return s;
}

static void role(ctx *c, ql_node *r)
{
    ql_node *e = r->a;
    const char *fname = e->kind == QL_NAME ? e->name : e->kind == QL_CALL && e->a->kind == QL_NAME ? e->a->name : NULL;
    static const char *const roles[] = {"activation", "output", "weight", "bias", "real", "dynamic"};
    int known = 0;
    for (size_t i = 0; fname && i < sizeof roles / sizeof roles[0]; i++)
        known |= !strcmp(fname, roles[i]);
    if (!known) {
        const char *hint = fname ? ql_suggest(fname, roles, 6) : NULL;
        if (hint)
            chk_err(c, e, "unknown role '%s'; did you mean '%s'?", fname, hint);
        else
            chk_err(c, e, "a role is activation, output, weight, weight(axis = N), bias(x, w), real or dynamic");
        return;
    }
    e->type = &qc_role;
    if (e->kind == QL_NAME) {
        if (!strcmp(fname, "bias"))
            chk_err(c, e, "bias needs arguments: bias(x, w)");
        return;
    }
    if (!strcmp(fname, "weight")) {
        for (int i = 0; i < e->nkids; i++) {
            const char *an;
            ql_node *v = chk_arg_expr(e->kids[i], &an);
            if (!an || strcmp(an, "axis")) {
                chk_err(c, e->kids[i], "weight takes one named argument, axis = N");
                continue;
            }
            chk_convert(c, v, chk_expr(c, v, &qc_i64), &qc_i64, "the axis");
        }
    } else if (!strcmp(fname, "dynamic")) {
        /* the runtime reads per_row when the module registers the pattern: a literal, not an expression */
        for (int i = 0; i < e->nkids; i++) {
            const char *an;
            ql_node *v = chk_arg_expr(e->kids[i], &an);
            if (!an || strcmp(an, "per_row") || v->kind != QL_BOOL)
                chk_err(c, e->kids[i], "dynamic takes one named argument, per_row = true or false");
            else if (i > 0)
                chk_err(c, e->kids[i], "per_row is given twice");
        }
    } else if (!strcmp(fname, "bias")) {
        int want = 2;
        if (!chk_expect_args(c, e, fname, want, want))
            return;
        for (int i = 0; i < want; i++) {
            const qc_type *t = chk_expr(c, e->kids[i], NULL);
            if (t->k != QC_VALUE && t->k != QC_ERROR)
                chk_err(c, e->kids[i], "%s takes values of the pattern", fname);
        }
    } else {
        chk_err(c, e, "%s takes no arguments", fname);
    }
}

/* The role expression a pattern's quantize clause gives value `name`, or NULL. */
static const ql_node *role_of(const ql_node *pat, const char *name)
{
    for (int i = 0; i < pat->nkids; i++)
        if (pat->kids[i]->kind == QL_QUANTIZE)
            for (int r = 0; r < pat->kids[i]->nkids; r++)
                if (!strcmp(pat->kids[i]->kids[r]->name, name))
                    return pat->kids[i]->kids[r]->a;
    return NULL;
}

static const char *role_name(const ql_node *re)
{
    return re->kind == QL_NAME ? re->name : re->kind == QL_CALL && re->a->kind == QL_NAME ? re->a->name : "";
}

/* The lowering calling convention: `lower y = K(a, ...)` calls kernel K with,
 * for each value argument, its integer tensor, scale and zero point when the
 * pattern quantizes it (arrays of them for per-channel weights; a bias is its
 * i32 tensor alone), or its f32 tensor when it stays float; other arguments
 * as they are; and last the output y as tensor, scale and zero point. */
static void lower_convention(ctx *c, const ql_node *pat, ql_node *lower)
{
    char a[64], b[64];
    ql_node *cl = lower->a;
    const qc_sym *ks = cl->a->sym;
    const ql_node *kp = ks->decl->a;
    int np = kp ? kp->nkids : 0, p = 0;
    /* expected[i]: the type parameter i must have; NULL = any scalar (a constant argument) */
    const qc_type *want[128];
    const char *why[128];
    char whybuf[128][96]; /* the texts why[] points to; per call, so concurrent checks do not share them */
    int nw = 0;
    for (int j = 0; j < cl->nkids; j++) {
        const char *an;
        chk_expr(c, chk_arg_expr(cl->kids[j], &an), NULL);
    }
    for (int j = 0; j <= cl->nkids && nw < 120; j++) {
        const ql_node *e;
        const char *vname;
        if (j < cl->nkids) {
            const char *an;
            e = chk_arg_expr(cl->kids[j], &an);
            if (an) {
                chk_err(c, cl->kids[j], "lower passes arguments by position");
                return;
            }
            vname = e->kind == QL_NAME && e->sym && ((qc_sym *)e->sym)->kind == QC_SYM_VALUE ? e->name : NULL;
            if (!vname) {
                want[nw] = e->type;
                why[nw++] = "a constant argument";
                continue;
            }
        } else {
            e = lower;
            vname = lower->name;
        }
        const ql_node *re = role_of(pat, vname);
        const char *rn = re ? role_name(re) : NULL;
        if (!re) {
            if (j == cl->nkids) {
                chk_err(c, lower, "the lowered output '%s' needs a role in quantize (activation, output or real)", vname);
                return;
            }
            want[nw] = qc_tensor_of(c->ar, &qc_f32);
            snprintf(whybuf[nw], sizeof whybuf[nw], "'%s' is not quantized: it arrives as its f32 tensor", vname);
            why[nw] = whybuf[nw];
            nw++;
            continue;
        }
        if (!strcmp(rn, "real")) { /* a kernel's output in f32, not quantized: its tensor alone */
            if (j != cl->nkids) {
                chk_err(c, e, "'%s' is real: only the lowered output may be (an input that stays float has no role)",
                        vname);
                return;
            }
            want[nw] = qc_tensor_of(c->ar, &qc_f32);
            snprintf(whybuf[nw], sizeof whybuf[nw], "'%s' is real: its f32 tensor", vname);
            why[nw] = whybuf[nw];
            nw++;
            continue;
        }
        if (!strcmp(rn, "dynamic")) { /* quantized at run time: its integers, then its scales and zero points */
            if (j == cl->nkids) {
                chk_err(c, re, "'%s' is dynamic: only an input of the lowering may be (the output is activation, "
                              "output or real)", vname);
                return;
            }
            const qc_type *three[3] = {NULL, qc_tensor_of(c->ar, &qc_f32), qc_tensor_of(c->ar, &qc_i32)};
            static const char *const what[3] = {"integer tensor", "run-time scales", "run-time zero points"};
            for (int k = 0; k < 3; k++) {
                want[nw] = three[k];
                snprintf(whybuf[nw], sizeof whybuf[nw], "the %s of '%s' (dynamic)", what[k], vname);
                why[nw] = whybuf[nw];
                nw++;
            }
            continue;
        }
        if (!strcmp(rn, "bias")) {
            want[nw] = qc_tensor_of(c->ar, &qc_i32);
            snprintf(whybuf[nw], sizeof whybuf[nw], "'%s' is a bias: its i32 tensor", vname);
            why[nw] = whybuf[nw];
            nw++;
            continue;
        }
        int per_channel = !strcmp(rn, "weight") && re->kind == QL_CALL;
        const qc_type *three[3] = {NULL, per_channel ? qc_array_of(c->ar, &qc_f32, -1) : &qc_f32,
                                   per_channel ? qc_array_of(c->ar, &qc_i32, -1) : &qc_i32};
        static const char *const what[3] = {"integer tensor", "scale", "zero point"};
        for (int k = 0; k < 3; k++) {
            want[nw] = three[k]; /* NULL for the tensor: any integer tensor */
            snprintf(whybuf[nw], sizeof whybuf[nw], "the %s of '%s' (%s%s)", what[k], vname, rn,
                     per_channel ? ", per channel" : "");
            why[nw] = whybuf[nw];
            nw++;
        }
    }
    /* A first parameter `acc: tensor<i32>` receives the int32 accumulator the
     * runtime computes for the matched node (an epilogue kernel); `acc:
     * tensor<i64>` the int64 one of 16-bit activations. */
    int skip = np > 0 && !strcmp(kp->kids[0]->name, "acc") && kp->kids[0]->type &&
               (qc_type_eq(kp->kids[0]->type, qc_tensor_of(c->ar, &qc_i32)) ||
                qc_type_eq(kp->kids[0]->type, qc_tensor_of(c->ar, &qc_i64)));
    if (np - skip != nw) {
        chk_err(c, cl, "kernel '%s' takes %d parameter%s but this lowering passes %d (quantized values pass tensor, "
                   "scale and zero point; see the lowering convention in docs/language.md)",
            ks->generic ? ks->generic->name : ks->name, np - skip, np - skip == 1 ? "" : "s", nw);
        return;
    }
    for (p = 0; p < nw; p++) {
        const ql_node *kpar = kp->kids[p + skip];
        const qc_type *pt = kpar->type ? kpar->type : &qc_error;
        int ok;
        if (!want[p]) /* the integer tensor of a quantized value */
            ok = pt->k == QC_TENSOR && qc_is_int(pt->elem);
        else if (want[p]->k == QC_TENSOR || want[p]->k == QC_ARRAY)
            ok = qc_type_eq(pt, want[p]);
        else
            ok = qc_widens(want[p], pt);
        if (!ok && pt->k != QC_ERROR)
            chk_err(c, kpar, "parameter '%s' of kernel '%s' is %s, but pattern '%s' passes %s here (%s)",
                kpar->name, ks->generic ? ks->generic->name : ks->name, qc_type_name(pt, a, sizeof a), pat->name,
                want[p] ? qc_type_name(want[p], b, sizeof b) : "an integer tensor", why[p]);
    }
}

/* `lower y = k(...)` with k generic: one lowering per instance of k, in
 * order, so the runtime runs the one whose types the recipe chose. A copy
 * keeps its source lowering in d, to report its errors once. */
static void expand_lowers(ctx *c, ql_node *n)
{
    ql_node *list = ql_node_new(c->ar, QL_PATTERN, n->span);
    int any = 0;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        qc_sym *g = k->kind == QL_LOWER && k->a->kind == QL_CALL && k->a->a->kind == QL_NAME
                        ? chk_lookup(c, k->a->a, k->a->a->name, 0)
                        : NULL;
        if (g && g->kind == QC_SYM_GENERIC && k->a->a->d) { /* lower y = k<i8>(...): that instance alone */
            qc_sym *inst = chk_explicit_instance(c, k->a->a, g, NULL);
            if (inst) {
                k->a->a->name = inst->name;
                k->a->a->d = NULL;
            }
            ql_node_add(c->ar, list, k);
            continue;
        }
        if (!g || g->kind != QC_SYM_GENERIC || !g->ninstances) {
            ql_node_add(c->ar, list, k);
            continue;
        }
        any = 1;
        for (int j = 0; j < g->ninstances; j++) {
            ql_node *cl = qc_clone(c->ar, k);
            cl->a->a->name = g->instances[j]->name;
            cl->d = k;
            ql_node_add(c->ar, list, cl);
        }
    }
    if (any) {
        n->kids = list->kids;
        n->nkids = list->nkids;
        n->capkids = list->capkids;
    }
}

/* The match clause: at most the matcher's nodes and forms; each bound value once, declared before
 * the nodes' inputs are resolved (so later nodes may consume earlier ones); the binds' wheres. */
static void pattern_match(ctx *c, qc_sym *s, ql_node *k)
{
    /* the matcher's limits (quantizer/match.h) */
    if (k->nkids > QRL_PATTERN_MAX_NODES)
        chk_err(c, k->kids[QRL_PATTERN_MAX_NODES], "pattern '%s' lists %d nodes; a pattern matches at most %d",
            s->name, k->nkids, QRL_PATTERN_MAX_NODES);
    for (int b = 0, forms = 0; b < k->nkids; b++)
        for (int alt = 0; alt < k->kids[b]->nkids; alt++)
            if (++forms == QRL_PATTERN_MAX_FORMS + 1)
                chk_err(c, k->kids[b]->kids[alt], "pattern '%s' lists more than %d op forms (alternatives count)",
                    s->name, QRL_PATTERN_MAX_FORMS);
    for (int b = 0; b < k->nkids; b++) {
        ql_node *bind = k->kids[b];
        qc_sym *old = chk_scope_find(c->sc, bind->name);
        if (old && old->decl && old->decl->kind == QL_BIND) {
            chk_err(c, bind, "'%s' is produced twice in this pattern", bind->name);
            continue;
        }
        qc_sym *v = value_sym(c, bind, bind->name);
        if (v) {
            v->decl = bind;
            bind->sym = v;
        }
    }
    for (int b = 0; b < k->nkids; b++) {
        ql_node *bind = k->kids[b];
        for (int alt = 0; alt < bind->nkids; alt++) {
            ql_node *op = bind->kids[alt];
            chk_op_name(c, op, op->name);
            if (op->nkids > QRL_PATTERN_MAX_INPUTS)
                chk_err(c, op->kids[QRL_PATTERN_MAX_INPUTS], "%s lists %d inputs; a pattern's node lists at most %d",
                    op->name, op->nkids, QRL_PATTERN_MAX_INPUTS);
            for (int j = 0; j < op->nkids; j++) {
                ql_node *arg = op->kids[j];
                if (!strcmp(arg->name, bind->name))
                    chk_err(c, arg, "'%s' cannot be an input of the node that produces it", arg->name);
                arg->sym = value_sym(c, arg, arg->name);
            }
        }
    }
    for (int b = 0; b < k->nkids; b++)
        if (k->kids[b]->a)
            chk_convert(c, k->kids[b]->a, chk_expr(c, k->kids[b]->a, &qc_bool), &qc_bool, "a where clause");
}

/* numerics onnx | tflite | pytorch; priority N; each said once (k is clause i of pattern n). */
static void pattern_setting(ctx *c, qc_sym *s, ql_node *n, int i)
{
    ql_node *k = n->kids[i];
    static const char *const modes[] = {"onnx", "tflite", "pytorch"};
    int ok = 0, numerics = !strcmp(k->name, "numerics"), priority = !strcmp(k->name, "priority");
    for (int j = 0; numerics && k->a->kind == QL_NAME && j < 3; j++)
        ok |= !strcmp(k->a->name, modes[j]);
    if (!numerics && !priority)
        chk_err(c, k, "a pattern has match, where, quantize, lower, numerics and priority clauses, not '%s'", k->name);
    else if (numerics && !ok)
        chk_err(c, k->a, "numerics is onnx, tflite or pytorch");
    else if (priority && (k->a->kind != QL_INT || k->a->ival > 1000))
        chk_err(c, k->a, "priority is a whole number from 0 to 1000");
    for (int j = 0; j < i; j++)
        if (n->kids[j]->kind == QL_SETTING && !strcmp(n->kids[j]->name, k->name))
            chk_err(c, k, "pattern '%s' states its %s twice", s->name, k->name);
}

/* quantize v: role, ...: values of the pattern, one role each. */
static void pattern_roles(ctx *c, ql_node *k)
{
    for (int r = 0; r < k->nkids; r++) {
        ql_node *rn = k->kids[r];
        qc_sym *v = chk_scope_find(c->sc, rn->name);
        if (!v) {
            chk_err(c, rn, "'%s' is not a value of this pattern", rn->name);
            continue;
        }
        for (int q = 0; q < r; q++)
            if (!strcmp(k->kids[q]->name, rn->name))
                chk_err(c, rn, "'%s' is given two roles", rn->name);
        rn->sym = v;
        role(c, rn);
    }
}

/* lower y = kernel(args): every lower clause computes the same value, with a kernel. *lower is the
 * first clause seen. */
static void pattern_lower(ctx *c, qc_sym *s, ql_node *k, ql_node **lower)
{
    if (*lower && strcmp((*lower)->name, k->name)) {
        chk_err(c, k, "every lower clause of pattern '%s' computes the same value ('%s', not '%s')", s->name,
            (*lower)->name, k->name);
        return;
    }
    if (!*lower)
        *lower = k;
    qc_sym *v = chk_scope_find(c->sc, k->name);
    if (!v)
        chk_err(c, k, "'%s' is not a value of this pattern", k->name);
    ql_node *cl = k->a;
    if (cl->kind != QL_CALL || cl->a->kind != QL_NAME) {
        chk_err(c, cl, "lower runs a kernel: lower y = kernel(args)");
        return;
    }
    qc_sym *ks = chk_lookup(c, cl->a, cl->a->name, 1);
    if (!ks || (ks->kind == QC_SYM_GENERIC && cl->a->d)) /* a generic's type arguments were reported */
        return;
    if (ks->kind != QC_SYM_KERNEL) {
        chk_err(c, cl->a, "'%s' is not a kernel", cl->a->name);
        return;
    }
    cl->a->sym = ks;
}

/* Each lowering follows the convention; a generic's lowering with errors keeps its other
 * instances quiet. */
static void pattern_conventions(ctx *c, ql_node *n)
{
    const ql_node *failed = NULL;
    for (int i = 0; i < n->nkids; i++)
        if (n->kids[i]->kind == QL_LOWER && n->kids[i]->a->kind == QL_CALL && n->kids[i]->a->a->sym) {
            int mark = c->d->n, errors = c->d->errors;
            lower_convention(c, n, n->kids[i]);
            if (n->kids[i]->d && n->kids[i]->d == failed)
                ql_diags_truncate(c->d, mark);
            else if (n->kids[i]->d && c->d->errors > errors)
                failed = n->kids[i]->d;
        }
}

void chk_pattern(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    expand_lowers(c, n);
    scope sc;
    chk_push_scope(c, &sc);
    c->w = W_PATTERN;
    ql_node *match = NULL, *lower = NULL;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind != QL_MATCH)
            continue;
        if (match)
            chk_err(c, k, "pattern '%s' has two match clauses; list several nodes in one: match { ... }", s->name);
        else
            pattern_match(c, s, match = k);
    }
    if (!match)
        chk_err_decl(c, n, "pattern '%s' has no match clause", s->name);
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind == QL_WHERE)
            chk_convert(c, k->a, chk_expr(c, k->a, &qc_bool), &qc_bool, "a where clause");
        else if (k->kind == QL_SETTING)
            pattern_setting(c, s, n, i);
        else if (k->kind == QL_QUANTIZE)
            pattern_roles(c, k);
        else if (k->kind == QL_LOWER)
            pattern_lower(c, s, k, &lower);
        else if (k->kind == QL_FN)
            chk_err_decl(c, k, "a pattern has no functions ('%s'); a transform has one, scale", k->name);
    }
    pattern_conventions(c, n);
    if (match && !lower)
        chk_err_decl(c, n, "pattern '%s' has no lower clause (which kernel runs it)", s->name);
    chk_pop_scope(c);
}

/* The one function of transform s: scale(...) -> f64 (a rescaling: the factor of channel j),
 * bias(...) -> f64 (a bias correction: the new bias of output channel o) or flip(...) -> f64 (a
 * rounding optimizer: whether one weight moves to its other rounding). Its parameters are f64
 * statistics, each at most once, by name: act, weight, source, mean for scale (QR_TRANSFORM_ACT ...),
 * bias, error for bias (QR_TRANSFORM_BIAS, QR_TRANSFORM_ERROR), sweep, change, mean, size for flip. */
static void transform_scale(ctx *c, qc_sym *s, ql_node *fn)
{
    scope fs;
    chk_push_scope(c, &fs);
    c->nlocals = 0;
    c->fn = NULL;
    c->w = W_CONST;
    int kind = !strcmp(fn->name, "bias") ? 1 : !strcmp(fn->name, "flip") ? 2 : !strcmp(fn->name, "shift") ? 3 : 0;
    static const char *const fnames[4] = {"scale", "bias", "flip", "shift"};
    params(c, fn->a, 0, fnames[kind]);
    static const char *const stats[4][6] = {{"act", "weight", "source", "mean", "clip", "groups"},
                                            {"bias", "error", NULL, NULL, NULL, NULL},
                                            {"sweep", "change", "mean", "size", NULL, NULL},
                                            {"low", "high", "clip", NULL, NULL, NULL}};
    int ok = (kind || !strcmp(fn->name, "scale")) && fn->a && fn->a->nkids >= 1 && fn->a->nkids <= 6;
    for (int i = 0; ok && i < fn->a->nkids; i++) {
        const ql_node *p = fn->a->kids[i];
        int known = 0;
        for (int k = 0; k < 6; k++)
            known |= stats[kind][k] && !strcmp(p->name, stats[kind][k]);
        ok = known && !p->b && p->type && p->type->k == QC_F64;
        for (int k = 0; ok && k < i; k++)
            ok = strcmp(fn->a->kids[k]->name, p->name) != 0;
    }
    const qc_type *rt = fn->b ? chk_type(c, fn->b) : &qc_void;
    if ((!ok || rt->k != QC_F64) && kind == 1)
        chk_err_decl(c, fn, "transform '%s': bias(...) -> f64 gives the new bias of output channel o of a matched "
            "layer from f64 statistics named as parameters: bias (its bias now, 0 without one), error (the expected "
            "error its quantized weight adds to the channel, sum of (W_q - W) * E[x] over its inputs)", s->name);
    else if ((!ok || rt->k != QC_F64) && kind == 2)
        chk_err_decl(c, fn, "transform '%s': flip(...) -> f64 says whether one weight of a matched layer moves to "
            "its other rounding (a positive answer moves it), from f64 statistics named as parameters: sweep (the "
            "sweeps over the channel before this one), change (what the move changes the channel's output error by), "
            "mean (what it changes the error's mean part by), size (the move's own term)", s->name);
    else if ((!ok || rt->k != QC_F64) && kind == 3)
        chk_err_decl(c, fn, "transform '%s': shift(...) -> f64 gives the amount (>= 0) moved out of channel j of a "
            "matched activation into its readers' biases, from f64 statistics named as parameters: low and high (the "
            "smallest and largest value of its pre-activation on the calibration samples), clip (the upper bound of "
            "a Clip after it, inf without)", s->name);
    else if (!ok || rt->k != QC_F64)
        chk_err_decl(c, fn, "transform '%s' has one function, scale(...) -> f64, the factor channel j of the matched "
            "value is divided by, from f64 statistics of the channel named as parameters: act (its largest |value| "
            "on the calibration samples), weight (its readers' largest |weight| for it), source (its producer's "
            "largest |weight| for it), mean (its mean |value| on the calibration samples), clip (the upper bound of "
            "a Clip between, inf without), groups (the largest group count of the Convs reading it); or bias(...) -> f64 (a bias correction), flip(...) -> f64 (a rounding "
            "optimizer) or shift(...) -> f64 (a high-bias absorption)", s->name);
    c->w = W_FN;
    c->ret = &qc_f64;
    int returns = chk_block(c, fn->c);
    if (!returns) {
        ql_span end = fn->c->span;
        end.start = end.end > 0 ? end.end - 1 : 0;
        ql_error(c->d, end, "missing return at the end of %s (it returns f64)", fnames[kind]);
    }
    c->ret = NULL;
    chk_pop_scope(c);
}

/* A transform: a match (as a pattern's, without roles or lowerings) whose root value is rescaled,
 * parameters a recipe sets (numbers and bools), and scale(act, weight). The match's where clauses
 * cannot read the parameters (they run while matching, before a recipe's values exist). */
void chk_transform(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    scope ms;
    chk_push_scope(c, &ms);
    c->w = W_PATTERN;
    c->transform = n;
    ql_node *match = NULL, *fn = NULL;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (k->kind == QL_MATCH) {
            if (match)
                chk_err(c, k, "transform '%s' has two match clauses; list several nodes in one: match { ... }", s->name);
            else
                pattern_match(c, s, match = k);
        } else if (k->kind == QL_WHERE) {
            chk_convert(c, k->a, chk_expr(c, k->a, &qc_bool), &qc_bool, "a where clause");
        } else if (k->kind == QL_FN) {
            if (fn)
                chk_err_decl(c, k, "transform '%s' has two functions; it has one, scale, bias, flip or shift", s->name);
            else
                fn = k;
        } else {
            chk_err(c, k, "a transform has match, where and scale clauses, not %s",
                k->kind == QL_QUANTIZE ? "quantize" : k->kind == QL_LOWER ? "lower" : k->name ? k->name : "this");
        }
    }
    c->transform = NULL;
    if (!match)
        chk_err_decl(c, n, "transform '%s' has no match clause (which value it rescales)", s->name);
    chk_pop_scope(c);
    scope ps;
    chk_push_scope(c, &ps);
    c->cal = n; /* its parameters are read from the recipe's values, as a calibrator's */
    c->w = W_CONST;
    params(c, n->a, 1, "a transform");
    if (fn)
        transform_scale(c, s, fn);
    else
        chk_err_decl(c, n, "transform '%s' has no function: scale(act: f64, weight: f64) -> f64 { ... } or "
                     "bias(bias: f64, error: f64) -> f64 { ... } or flip(change: f64, ...) -> f64 { ... } or "
                     "shift(low: f64, ...) -> f64 { ... }", s->name);
    c->cal = NULL;
    chk_pop_scope(c);
}

void chk_affine(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    scope sc;
    chk_push_scope(c, &sc);
    if (!qrl_op_known(n->name)) {
        const char *hint = op_hint(n->name);
        if (hint)
            chk_err_decl(c, n, "unknown ONNX op '%s'; did you mean '%s'?", n->name, hint);
        else
            chk_err_decl(c, n, "unknown ONNX op '%s'", n->name);
    }
    if (n->nkids > QRL_AFFINE_MAX_INPUTS) /* the runtime's view of the node (qr_aff_view) */
        chk_err(c, n->kids[QRL_AFFINE_MAX_INPUTS], "affine %s names %d inputs; an affine rule names at most %d", n->name,
            n->nkids, QRL_AFFINE_MAX_INPUTS);
    for (int i = 0; i < n->nkids; i++) {
        ql_node *arg = n->kids[i];
        qc_sym *in = chk_declare(c, arg->name, QC_SYM_AFF_IN, &qc_i32, arg);
        in->index = i;
        arg->sym = in;
    }
    if (n->b) { /* where: over the node's attributes and shapes */
        c->w = W_AFF_PRED;
        chk_convert(c, n->b, chk_expr(c, n->b, &qc_bool), &qc_bool, "a where clause");
    }
    ql_node *res = n->a;
    if (res->kind == QL_AFF_FIXED && !res->b) { /* fixed(t => qparams for the recipe's type t) */
        scope fs;
        chk_push_scope(c, &fs);
        qc_sym *t = chk_declare(c, res->name, QC_SYM_TABLE_VAR, &qc_qtype, res);
        res->sym = t;
        c->w = W_FIXED;
        const qc_type *qt = chk_expr(c, res->a, NULL);
        if (qt->k != QC_QPARAMS && qt->k != QC_ERROR) {
            char a[64];
            chk_err(c, res->a, "fixed(%s => ...) gives the output's qparams, not %s", res->name, TN(qt, a));
        }
        chk_pop_scope(c);
    } else if (res->kind == QL_AFF_FIXED) {
        c->w = W_AFF_PRED; /* constants, and the node's attributes */
        chk_convert(c, res->a, chk_expr(c, res->a, &qc_f64), &qc_f64, "the scale");
        chk_convert(c, res->b, chk_expr(c, res->b, &qc_i64), &qc_i64, "the zero point");
    }
    ql_node *body = n->c;
    if (body && body->kind == QL_AFF_F32 && res->kind == QL_AFF_FIXED)
        chk_err(c, body, "fixed output qparams need a table(v => ...) computing the op, not 'in f32'");
    if (body && body->kind == QL_BLOCK) {
        if (res->kind == QL_AFF_REQUANTIZE)
            chk_err(c, body, "requantize takes no body: the runtime requantizes to the output's qparams");
        if (!n->nkids)
            chk_err(c, body, "a body needs the op's inputs named: affine %s(x) -> ...", n->name);
        scope bs;
        chk_push_scope(c, &bs);
        qc_sym *y = chk_declare(c, "y", QC_SYM_AFF_OUT, &qc_i32, body);
        y->mutable_ = 1;
        c->w = W_AFFINE;
        c->assigned_y = 0;
        c->nlocals = 0;
        chk_block(c, body);
        if (!c->assigned_y)
            chk_err(c, body, "the body never assigns the output y");
        chk_pop_scope(c);
    } else if (body && body->kind == QL_TABLE) {
        scope bs;
        chk_push_scope(c, &bs);
        qc_sym *v = chk_declare(c, body->name, QC_SYM_TABLE_VAR, &qc_f64, body);
        body->sym = v;
        c->w = W_TABLE;
        const qc_type *t = chk_expr(c, body->a, &qc_f64);
        chk_convert(c, body->a, t, &qc_f64, "the table's value");
        chk_pop_scope(c);
    } else if (!body && res->kind == QL_AFF_FIXED) {
        chk_err(c, res, "fixed output qparams need a table(v => ...) computing the op");
    }
    chk_pop_scope(c);
}

/* accumulate = iN where N is not a value type (i14 is a name to the parser): N when it is a
 * width the runtime takes (QR_ACC_MIN_BITS..QR_ACC_MAX_BITS), -1 for another iN, 0 for no iN. */
static int acc_width(const ql_node *t)
{
    if ((t->kind != QL_NAME && (t->kind != QL_TYPE || t->op != QL_TOK_IDENT)) || !t->name || t->name[0] != 'i' ||
        t->name[1] < '1' || t->name[1] > '9')
        return 0;
    char *end;
    long n = strtol(t->name + 1, &end, 10);
    if (*end)
        return 0;
    return n >= QR_ACC_MIN_BITS && n <= QR_ACC_MAX_BITS ? (int)n : -1;
}

/* fallback = u16 then f32 when ...: the steps before f32 (q->d), one 16-bit activation type alone:
 * a layer's output goes to 16 bits first, its own calibrator's observations solved again (its
 * modifiers kept), and to f32 only when that fails. Other settings take no steps. */
static void fallback_steps(ctx *c, ql_node *setting, int kind)
{
    ql_node *q = setting->a;
    if (q->d && kind != 2) {
        chk_err(c, q->d, "only the fallback takes steps ('then'): fallback = u16 then f32 when sqnr < 20");
        return;
    }
    for (ql_node *st = q->d; st; st = st->d) {
        ql_node *t = st->a;
        if (st != q->d) {
            chk_err(c, st, "the fallback has one step before f32 (fallback = u16 then f32 when ...), not more");
            return;
        }
        if (t->kind == QL_TYPE && t->op == QL_TOK_IDENT) {
            static const char *const types[] = {"u16", "i16"};
            const char *hint = ql_suggest(t->name, types, 2);
            chk_err(c, t, "unknown type '%s'; the fallback's step before f32 is u16 or i16 (16-bit activations)%s%s%s",
                    t->name, hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
        } else if (t->kind == QL_TYPE && (t->op == QL_TOK_I4 || t->op == QL_TOK_U4)) {
            chk_err(c, t, "the fallback's step before f32 is u16 or i16 (16-bit activations), not %s",
                    t->op == QL_TOK_I4 ? "i4" : "u4");
        } else {
            char a[64];
            const qc_type *ty = chk_type(c, t);
            if (ty->k != QC_U16 && ty->k != QC_I16 && ty->k != QC_ERROR)
                chk_err(c, t, "the fallback's step before f32 is u16 or i16 (16-bit activations), not %s", TN(ty, a));
        }
        for (int i = 0; i < st->nkids; i++)
            chk_err(c, st->kids[i], "a fallback step takes no modifiers: a tensor keeps its own, its calibrator's "
                                    "observations solved again for 16 bits");
    }
}

static void qspec(ctx *c, ql_node *setting, int kind)
{
    /* kind 0: activation/weight (int type, modifiers, by calibrator); 1: a type only; 2: fallback */
    char a[64];
    ql_node *q = setting->a;
    int acc = !strcmp(setting->name, "accumulate");
    const char *acc_is = acc ? "is iN for N from 8 to 32 (i8, i14, i16, i32) or i64" : "is i16, i32 or i64";
    if (acc && q->kind == QL_NAME) { /* accumulate = i14: a name to the parser */
        int bits = acc_width(q);
        if (bits < 0)
            chk_err(c, q, "accumulate %s, not %s", acc_is, q->name);
        else if (!bits)
            chk_err(c, q, "unknown type '%s'; accumulate %s", q->name, acc_is);
        return;
    }
    if (q->kind != QL_QSPEC) {
        chk_err(c, q, "%s takes a type%s", setting->name,
            kind == 0 ? " and a calibrator: i8 symmetric by minmax()" : kind == 2 ? ": f32 when sqnr < 20" : "");
        return;
    }
    const qc_type *t;
    /* a candidate is a weight type mixed precision may pick (or f32: the layer's weight stays f32) */
    int cand = !strcmp(setting->name, "candidate");
    int weight = cand || !strcmp(setting->name, "weight"), act = !strcmp(setting->name, "activation");
    const char *quant_to = cand ? "is i4, u4, i8, u8, i16, u16 or f32 (the weight stays f32)"
                         : weight ? "is quantized to i4, u4, i8, u8, i16 or u16" : act
                         ? "is quantized to i8, u8, i16 or u16, or stays f32 (weight-only)" : "is quantized to i8, u8, i16 or u16";
    if (acc && acc_width(q->a) != 0) { /* accumulate = i14: a width of 8 to 32 bits (QR_ACC_MIN_BITS..) */
        int bits = acc_width(q->a);
        if (bits < 0)
            chk_err(c, q->a, "accumulate %s, not %s", acc_is, q->a->name);
        t = &qc_error; /* no value type of its own: the JIT passes its name */
    } else if (q->a->kind == QL_TYPE && q->a->op == QL_TOK_IDENT) { /* a name where the type goes: i3, u7 */
        static const char *const wtypes[] = {"i4", "u4", "i8", "u8", "i16", "u16"};
        static const char *const types[] = {"i8", "u8", "i16", "u16", "i32", "i64", "f32"};
        const char *hint = weight ? ql_suggest(q->a->name, wtypes, 6)
                                  : ql_suggest(q->a->name, types, kind == 0 ? 4 : kind == 1 ? 6 : 7);
        chk_err(c, q->a, "unknown type '%s'; %s %s%s%s%s", q->a->name, setting->name,
                kind == 0 ? quant_to : kind == 1 ? acc_is : "runs in f32",
                hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
        t = &qc_error;
    } else if (q->a->kind == QL_TYPE && (q->a->op == QL_TOK_I4 || q->a->op == QL_TOK_U4)) {
        t = q->a->op == QL_TOK_I4 ? &qc_i4 : &qc_u4; /* no value type: chk_type would refuse it */
        if (!weight)
            chk_err(c, q->a, "%s %s, not %s: 4-bit types are for weights", setting->name,
                    kind == 0 ? quant_to : kind == 1 ? acc_is : "runs in f32", TN(t, a));
        q->a->type = t;
        t = weight ? t : &qc_error;
    } else {
        t = chk_type(c, q->a);
    }
    int f32_act = (act || cand) && t->k == QC_F32; /* activation = f32: weight-only, nothing calibrated */
    if (kind == 0 && t->k != QC_I8 && t->k != QC_U8 && t->k != QC_I16 && t->k != QC_U16 && t->k != QC_I4 &&
        t->k != QC_U4 && !f32_act && t->k != QC_ERROR)
        chk_err(c, q->a, "%s %s, not %s", setting->name, quant_to, TN(t, a));
    if (kind == 1 && acc && t->k == QC_I8) /* an 8-bit accumulator: i8 is a value type too */
        t = &qc_error;
    if (kind == 1 && t->k != QC_I32 && t->k != QC_I64 && t->k != QC_I16 && t->k != QC_ERROR)
        chk_err(c, q->a, "%s %s, not %s", setting->name, acc_is, TN(t, a));
    if (kind == 2 && t->k != QC_F32 && t->k != QC_ERROR)
        chk_err(c, q->a, q->d ? "the fallback's last step is f32, not %s" : "the fallback runs in f32, not %s", TN(t, a));
    static const char *const mods[] = {"symmetric", "asymmetric", "narrow", "per_channel", "per_tensor"};
    for (int i = 0; i < q->nkids && f32_act; i++)
        chk_err(c, q->kids[i], "%s = f32 takes no modifiers: %s", setting->name,
                cand ? "the weight stays f32" : "activations stay f32");
    for (int i = 0; i < q->nkids && !f32_act; i++) {
        const char *m = q->kids[i]->name;
        int ok = 0;
        for (int j = 0; j < 5; j++)
            ok |= !strcmp(m, mods[j]);
        if (kind != 0 && acc && (!strcmp(m, "wrap") || !strcmp(m, "saturate")))
            chk_err(c, q->kids[i], "accumulate takes no modifiers; the overflow policy is a setting: overflow = %s", m);
        else if (kind != 0)
            chk_err(c, q->kids[i], "%s takes no modifiers", setting->name);
        else if (!ok) {
            const char *hint = ql_suggest(m, mods, 5);
            if (hint)
                chk_err(c, q->kids[i], "unknown modifier '%s'; did you mean '%s'?", m, hint);
            else
                chk_err(c, q->kids[i], "unknown modifier '%s' (symmetric, asymmetric, narrow, per_channel, per_tensor)", m);
        }
    }
    if (q->b && f32_act) {
        chk_err(c, q->b, "%s = f32 takes no calibrator: %s", setting->name,
                cand ? "the weight stays f32" : "activations stay f32");
    } else if (q->b) {
        if (kind != 0) {
            chk_err(c, q->b, "%s takes no calibrator", setting->name);
        } else {
            ql_node *cl = q->b;
            ql_node *fname = cl->kind == QL_CALL ? cl->a : cl;
            qc_sym *cs = fname->kind == QL_NAME ? chk_lookup(c, fname, fname->name, 1) : NULL;
            if (fname->kind != QL_NAME)
                chk_err(c, cl, "by names a calibrator: by minmax() or by percentile(p = 99.9)");
            else if (cs && cs->kind != QC_SYM_CALIBRATOR)
                chk_err(c, fname, "'%s' is not a calibrator", fname->name);
            else if (cs) {
                fname->sym = cs;
                if (!weight && chk_layer_calibrator(cs->decl))
                    chk_err(c, fname, "'%s' is a layer calibrator (it rounds a weight from the layer's inputs): "
                                      "only weight = ... can use it", fname->name);
                if (cl->kind == QL_CALL) {
                    char what[160];
                    snprintf(what, sizeof what, "calibrator '%s'", cs->name);
                    c->w = W_CONST;
                    chk_args(c, cl, what, cs->decl->a);
                    for (int i = 0; i < cl->nkids; i++) {
                        const char *name;
                        const ql_node *e = chk_arg_expr(cl->kids[i], &name);
                        const ql_node *ps = cs->decl->a;
                        if (!name && ps && i < ps->nkids)
                            name = ps->kids[i]->name;
                        if (name)
                            chk_hist_bins_arg(c, cs->decl, name, e);
                    }
                    c->w = W_RECIPE;
                }
            }
        }
    } else if (kind == 0 && !f32_act) {
        chk_err(c, q, "%s needs a calibrator: ... by minmax()", setting->name);
    }
    fallback_steps(c, setting, kind);
    if (q->c) {
        if (kind != 2) {
            chk_err(c, q->c, "only the fallback takes a condition");
        } else {
            scope ms;
            chk_push_scope(c, &ms);
            chk_declare(c, "sqnr", QC_SYM_BUILTIN, &qc_f64, q->c);        /* the layer's own SQNR in dB */
            chk_declare(c, "output_sqnr", QC_SYM_BUILTIN, &qc_f64, q->c); /* the model's outputs' SQNR in dB */
            chk_declare(c, "output_cosine", QC_SYM_BUILTIN, &qc_f64, q->c); /* their cosine similarity */
            chk_declare(c, "output_agreement", QC_SYM_BUILTIN, &qc_f64, q->c); /* argmax agreement, 0 to 1 */
            chk_convert(c, q->c, chk_expr(c, q->c, &qc_bool), &qc_bool, "the fallback condition");
            chk_pop_scope(c);
        }
    } else if (kind == 2) {
        chk_err(c, q, "the fallback needs a condition: f32 when sqnr < 20, or f32 when output_sqnr < 30");
    }
}

/* transform = NAME or NAME(args): a transform, its arguments checked against its parameters. */
static void recipe_transform(ctx *c, ql_node *k)
{
    ql_node *cl = k->a;
    ql_node *fname = cl->kind == QL_CALL ? cl->a : cl;
    qc_sym *ts = fname->kind == QL_NAME ? chk_lookup(c, fname, fname->name, 1) : NULL;
    if (fname->kind != QL_NAME) {
        chk_err(c, cl, "transform names a transform: transform = smoothquant(alpha = 0.5)");
        return;
    }
    if (!ts)
        return;
    if (ts->kind != QC_SYM_TRANSFORM) {
        chk_err(c, fname, "'%s' is not a transform", fname->name);
        return;
    }
    fname->sym = ts;
    if (cl->kind == QL_CALL) {
        char what[160];
        snprintf(what, sizeof what, "transform '%s'", ts->name);
        c->w = W_CONST;
        chk_args(c, cl, what, ts->decl->a);
        c->w = W_RECIPE;
    }
}

/* "a, b or c" of a setting's space-separated choices. */
static void choice_list(const char *choices, char *out, size_t n)
{
    out[0] = 0;
    int count = 0;
    for (const char *w = choices; *w; w += strcspn(w, " "), w += *w == ' ')
        count++;
    int i = 0;
    for (const char *w = choices; *w; w += strcspn(w, " "), w += *w == ' ', i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%.*s", i == 0 ? "" : i == count - 1 ? " or " : ", ", (int)strcspn(w, " "), w);
    }
}

/* A value-only setting (recipe.h's QR_SETTINGS: a number or a choice) checked against its entry. */
static void setting_value(ctx *c, const ql_node *k, qr_setting_id id)
{
    const qr_setting_def *d = &qr_setting_defs[id];
    const ql_node *v = k->a;
    unsigned long long lo = (unsigned long long)d->lo, hi = (unsigned long long)d->hi; /* ival is unsigned */
    double f = v->kind == QL_INT ? (double)v->ival : v->kind == QL_FLOAT ? v->fval : -1;
    switch (d->kind) {
    case QR_SK_COUNT: /* measure_samples = 256, effect_samples = 8, search_samples = 16, validate_least = 8,
                       * calibrate_figure_samples = 16 */
        if ((v->kind != QL_INT || v->ival < lo || v->ival > hi) &&
            (id == QR_SET_PROBE_RUNS || id == QR_SET_PROBE_ROUNDS || id == QR_SET_PROBE_HOLD ||
             id == QR_SET_GRAD_DIRECTIONS || id == QR_SET_GRAD_EXACT || id == QR_SET_GRAD_EXACT_NEAR ||
             id == QR_SET_GRAD_SEGMENTS))
            chk_err(c, v, "%s is a count, %llu to %llu: %s", k->name, lo, hi,
                    id == QR_SET_PROBE_RUNS         ? "probe_runs = 8"
                    : id == QR_SET_PROBE_ROUNDS     ? "probe_rounds = 2"
                    : id == QR_SET_PROBE_HOLD       ? "probe_hold = 8"
                    : id == QR_SET_GRAD_DIRECTIONS ? "grad_directions = 4"
                    : id == QR_SET_GRAD_EXACT_NEAR ? "grad_exact_near = 4"
                    : id == QR_SET_GRAD_SEGMENTS   ? "grad_segments = 8"
                                                    : "grad_exact = 0");
        else if (v->kind != QL_INT || v->ival < lo || v->ival > hi)
            chk_err(c, v, "%s is a number of samples, %llu to %llu: %s", k->name, lo, hi,
                    id == QR_SET_MEASURE_SAMPLES   ? "measure_samples = 256"
                    : id == QR_SET_SEARCH_SAMPLES ? "search_samples = 16"
                    : id == QR_SET_VALIDATE_LEAST ? "validate_least = 8"
                    : id == QR_SET_CALIBRATE_FIGURE_SAMPLES ? "calibrate_figure_samples = 16"
                                                  : "effect_samples = 8");
        break;
    case QR_SK_POW2: /* block = 32: weights quantized in blocks of 32 along the reduction axis */
        if (v->kind != QL_INT || v->ival < lo || v->ival > hi || (v->ival & (v->ival - 1)))
            chk_err(c, v, "block is the number of weights along the reduction axis that share a scale, "
                          "a power of two from %llu to %llu: block = 32", lo, hi);
        break;
    case QR_SK_FRACTION: /* validate = 0.25: the share of the calibration samples held out */
        if ((v->kind != QL_INT && v->kind != QL_FLOAT) || !(f >= d->lo && f < d->hi))
            chk_err(c, v, "validate is the share of the calibration samples held out to judge the fallback on, "
                          "from %llu to below %llu: validate = 0.25", lo, hi);
        break;
    case QR_SK_NUMBER: /* tolerance = 3: dB the integer graph may lose against the QDQ simulation */
        if (id == QR_SET_EFFECT_MACS && ((v->kind != QL_INT && v->kind != QL_FLOAT) || !(f >= d->lo)))
            chk_err(c, v, "effect_macs is a number of multiply-accumulates, at least %llu: effect_macs = 2e12", lo);
        else if (id == QR_SET_SEARCH_FLOOR && v->kind != QL_INT && v->kind != QL_FLOAT)
            chk_err(c, v, "search_floor is a number of dB: search_floor = 5");
        else if (id == QR_SET_GRAD_EXACT_BELOW && ((v->kind != QL_INT && v->kind != QL_FLOAT) || !(f >= d->lo)))
            chk_err(c, v, "grad_exact_below is a number of dB, at least %llu: grad_exact_below = 32", lo);
        else if (id == QR_SET_GRAD_EXACT_KEPT_BELOW && ((v->kind != QL_INT && v->kind != QL_FLOAT) || !(f >= d->lo)))
            chk_err(c, v, "grad_exact_kept_below is a number of dB, at least %llu: grad_exact_kept_below = 40", lo);
        else if (id == QR_SET_GRAD_PEAK_WITHIN && ((v->kind != QL_INT && v->kind != QL_FLOAT) || !(f >= d->lo)))
            chk_err(c, v, "grad_peak_within is a multiple of the f32 run's memory, at least %llu: grad_peak_within = 2", lo);
        else if ((v->kind != QL_INT && v->kind != QL_FLOAT) || (v->kind == QL_FLOAT && !(v->fval >= d->lo)))
            chk_err(c, v, "tolerance is a number of dB: tolerance = 3");
        break;
    case QR_SK_CHOICE: { /* numerics = onnx; rounding = half_even */
        if (v->kind != QL_NAME || !qr_setting_choice(id, v->name)) {
            char list[160];
            choice_list(d->choices, list, sizeof list);
            chk_err(c, v, "%s is %s", d->key, list);
        }
        break;
    }
    default: break;
    }
}

/* fn f's type as qr_fn_type_str writes it ("i64(qtype,bool)"); 0 when a type in it is an error
 * (already reported). */
static int fn_type_str(const qc_sym *f, char *buf, size_t n)
{
    char t[64];
    const ql_node *ps = f->decl->a;
    const qc_type *r = f->decl->b ? f->decl->b->type : &qc_void;
    if (!r || r->k == QC_ERROR)
        return 0;
    size_t len = (size_t)snprintf(buf, n, "%s(", r->k == QC_VOID ? "void" : qc_type_name(r, t, sizeof t));
    for (int i = 0; ps && i < ps->nkids && len < n; i++) {
        const qc_type *pt = ps->kids[i]->type;
        if (!pt || pt->k == QC_ERROR)
            return 0;
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "," : "", qc_type_name(pt, t, sizeof t));
    }
    if (len < n)
        snprintf(buf + len, n - len, ")");
    return 1;
}

/* bias_qparams = F (narrow_range, pattern_priority, samples): a policy hook names a fn of the
 * module of the hook's type, which the quantizer calls in place of the stdlib's fn of the
 * setting's name (samples: in place of its own pooled sums). The type is checked here and again
 * when the module loads (qr_plan_hook). */
static void recipe_hook(ctx *c, const ql_node *k)
{
    ql_node *v = k->a;
    const qr_setting_def *d = &qr_setting_defs[qr_setting_find(k->name)];
    qc_sym *f = v->kind == QL_NAME ? chk_lookup(c, v, v->name, 1) : NULL;
    char have[256];
    if (v->kind != QL_NAME && (!strcmp(d->key, "samples") || !strcmp(d->key, "calibrate_samples")))
        /* the stdlib has no fn of their name: name one it has */
        chk_err(c, v, "%s names a fn of type %s that reduces each sample's output SQNR: %s = sample_balanced "
                      "(stdlib/qparams.qrl: sample_mean, sample_p10, sample_normalized, ...)", d->key, d->choices, d->key);
    else if (v->kind != QL_NAME)
        chk_err(c, v, "%s names a fn of type %s: %s = my_%s", d->key, d->choices, d->key, d->key);
    else if (f && f->kind != QC_SYM_FN)
        chk_err(c, v, "'%s' is not a fn; %s names a fn of type %s", v->name, d->key, d->choices);
    else if (f && fn_type_str(f, have, sizeof have) && strcmp(have, d->choices))
        chk_err(c, v, "the %s hook '%s' is %s, not %s", d->key, v->name, have, d->choices);
    else if (f)
        v->sym = f; /* the code reaches it: compiled */
}

/* budget = bits(N) or bytes(N): mixed precision's budget, a positive number (bits: at most 32). */
static void recipe_budget(ctx *c, const ql_node *k)
{
    const ql_node *cl = k->a, *fname = cl->kind == QL_CALL ? cl->a : NULL;
    const ql_node *v = fname && cl->nkids == 1 ? cl->kids[0] : NULL;
    double f = v && v->kind == QL_INT ? (double)v->ival : v && v->kind == QL_FLOAT ? v->fval : -1;
    if (!fname || fname->kind != QL_NAME || !qr_setting_choice(QR_SET_BUDGET, fname->name))
        chk_err(c, fname && fname->kind == QL_NAME ? fname : cl,
                "budget is bits(N), the average bits a weight stores (weighted by the MACs of its layer), or "
                "bytes(N), the model's size: budget = bits(6)");
    else if (!(f > 0) || (!strcmp(fname->name, "bits") && f > 32))
        chk_err(c, v ? v : cl, "%s takes one number, %s: budget = %s", fname->name,
                !strcmp(fname->name, "bits") ? "above 0 and at most 32" : "above 0",
                !strcmp(fname->name, "bits") ? "bits(6)" : "bytes(2.5e6)");
}

/* The bits a weight of type t stores, and the type's name (0, NULL: not a weight type). */
static int qtype_bits(const ql_node *t, const char **name)
{
    static const struct { ql_tok op; int bits; const char *name; } types[] = {
        {QL_TOK_I4, 4, "i4"},   {QL_TOK_U4, 4, "u4"},   {QL_TOK_I8, 8, "i8"},   {QL_TOK_U8, 8, "u8"},
        {QL_TOK_I16, 16, "i16"}, {QL_TOK_U16, 16, "u16"}, {QL_TOK_F32, 32, "f32"}};
    for (size_t i = 0; t && t->kind == QL_TYPE && i < sizeof types / sizeof *types; i++)
        if (t->op == types[i].op) {
            if (name)
                *name = types[i].name;
            return types[i].bits;
        }
    return 0;
}

/* Mixed precision (candidate = ..., candidate_activation = ..., budget = ...): both or neither, no type
 * twice, types the recipe's kind takes, and a budget in bits that the narrowest type can meet. */
static void recipe_mixed(ctx *c, const ql_node *n, const ql_node *act, const ql_node *wgt, const ql_node *budget,
                         int weight_only)
{
    const ql_node *first = NULL;
    int narrowest = wgt && wgt->a->kind == QL_QSPEC ? qtype_bits(wgt->a->a, NULL) : 0;
    for (int i = 0; i < n->nkids; i++) {
        const ql_node *k = n->kids[i];
        if (k->kind != QL_SETTING || strcmp(k->name, "candidate") || k->a->kind != QL_QSPEC)
            continue;
        if (!first)
            first = k;
        const ql_node *t = k->a->a;
        const char *tname = NULL;
        int bits = qtype_bits(t, &tname);
        if (bits && (!narrowest || bits < narrowest))
            narrowest = bits;
        /* integer layers: the integer kernels take i8 containers (i4 weights unpack into them) */
        if (!weight_only && bits && bits != 32 && t->op != QL_TOK_I4 && t->op != QL_TOK_I8)
            chk_err(c, t, "with integer activations a candidate is a weight type the integer kernels take (i4 or "
                          "i8) or f32, not %s (16-bit activations: candidate_activation = u16 asymmetric by "
                          "minmax())", tname);
        for (int j = 0; j < i; j++) { /* the same type twice: one of them would never be told apart */
            const ql_node *o = n->kids[j];
            int same_key = o->kind == QL_SETTING && !o->b && (!strcmp(o->name, "candidate") || o == wgt);
            if (same_key && bits && o->a->kind == QL_QSPEC && o->a->a->kind == QL_TYPE && o->a->a->op == t->op) {
                chk_err(c, t, "candidate %s is already a choice (one type, one way to quantize it)", tname);
                ql_note(c->d, o->span, "given here");
                break;
            }
        }
    }
    /* candidate_activation = u16 ...: a layer's output in 16 bits, with integer activations of 8 */
    const ql_node *act16 = NULL;
    for (int i = 0; i < n->nkids && !act16; i++)
        if (n->kids[i]->kind == QL_SETTING && !n->kids[i]->b && !strcmp(n->kids[i]->name, "candidate_activation") &&
            n->kids[i]->a->kind == QL_QSPEC)
            act16 = n->kids[i];
    if (act16) {
        const ql_node *t = act16->a->a, *at = act && act->a->kind == QL_QSPEC ? act->a->a : NULL;
        int abits = at ? qtype_bits(at, NULL) : 0;
        if (weight_only)
            chk_err(c, act16, "candidate_activation gives a layer 16-bit activations in an integer recipe; this "
                              "one is weight-only (activation = f32)");
        else if (t->kind == QL_TYPE && t->op != QL_TOK_U16 && t->op != QL_TOK_I16)
            chk_err(c, t, "candidate_activation is a 16-bit activation type, u16 or i16: the layers that take it "
                          "write 16-bit values");
        else if (abits && abits != 8)
            chk_err(c, act16, "candidate_activation needs 8-bit activations (activation = u8 or i8): it is the "
                              "16-bit choice beside them");
        if (!first)
            first = act16;
    }
    if (first && !budget)
        chk_err(c, first, "a candidate needs a budget to choose by: budget = bits(6) or budget = bytes(2.5e6)");
    if (budget && !first)
        chk_err(c, budget, "a budget needs candidates to choose among: candidate = i8 symmetric by minmax()");
    for (int i = 0; first && !weight_only && i < n->nkids; i++)
        if (n->kids[i]->kind == QL_SETTING && !strcmp(n->kids[i]->name, "fallback")) {
            chk_err(c, n->kids[i], "a budget decides which layers stay f32: a fallback condition cannot also "
                                   "(drop one of them)");
            break;
        }
    const ql_node *cl = budget ? budget->a : NULL;
    if (first && cl && cl->kind == QL_CALL && cl->a->kind == QL_NAME && !strcmp(cl->a->name, "bits") &&
        cl->nkids == 1 && narrowest) {
        const ql_node *v = cl->kids[0];
        double f = v->kind == QL_INT ? (double)v->ival : v->kind == QL_FLOAT ? v->fval : 0;
        if (f > 0 && f < narrowest)
            chk_err(c, v, "budget = bits(%g) cannot be met: the narrowest choice stores %d bits a weight (and its "
                          "scales more)", f, narrowest);
    }
}

/* Setting i of recipe n names the ops and nodes it applies to (activation for LayerNormalization,
 * "/enc/Softmax" = u16 ...; weight for "/head/MatMul" = i8 ...): only activation and weight do;
 * each op is a known one and each target is named once per setting in the recipe; the type is an
 * integer one (an f32 value is the fallback's business; the weight's qspec rules say so of weights). */
static void setting_targets(ctx *c, const ql_node *n, int i)
{
    ql_node *k = n->kids[i];
    int is_weight = !strcmp(k->name, "weight");
    if (strcmp(k->name, "activation") && !is_weight) {
        chk_err(c, k->b, "only activation and weight take 'for' (the type of the values chosen ops or nodes "
                         "produce, or of the weights they read), not %s", k->name);
        return;
    }
    for (int t = 0; t < k->b->nkids; t++) {
        ql_node *x = k->b->kids[t];
        if (x->kind == QL_NAME)
            chk_op_name(c, x, x->name);
        else if (!x->name[0])
            chk_err(c, x, "an empty node name");
        for (int j = 0; j <= i; j++) {
            const ql_node *o = n->kids[j];
            if (o->kind != QL_SETTING || !o->b || strcmp(o->name, k->name))
                continue;
            for (int u = 0; u < (j == i ? t : o->b->nkids); u++) {
                const ql_node *y = o->b->kids[u];
                if (y->kind == x->kind && !strcmp(y->name, x->name)) {
                    chk_err(c, x, "%s '%s' already has its %s type", x->kind == QL_NAME ? "op" : "node", x->name,
                            k->name);
                    ql_note(c->d, y->span, "given here");
                    j = i + 1;
                    break;
                }
            }
        }
    }
    const ql_node *q = k->a;
    if (!is_weight && q->kind == QL_QSPEC && q->a->kind == QL_TYPE && q->a->op == QL_TOK_F32) /* weight's qspec says it */
        chk_err(c, q->a, "activation for chosen ops is i8, u8, i16 or u16, not f32 (values stay f32 by the fallback, "
                         "or when no pattern quantizes them)");
}

/* ------------------------------------------------ recipe inheritance */

#define MAX_RECIPE_DEPTH 64 /* recipe a : b, b : c, ...: bounds the resolution's recursion */

/* Whether recipe lines a and b are of one key, the unit a derived recipe replaces: `use`; a setting
 * by its name (every `transform` line is one key, every `candidate` line one); `activation for` and
 * `weight for` lines each a key apart from `activation` and `weight`. */
static int same_key(const ql_node *a, const ql_node *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == QL_USE)
        return 1;
    return a->kind == QL_SETTING && !strcmp(a->name, b->name) && !a->b == !b->b;
}

static int writes_key(const ql_node *own, const ql_node *k)
{
    for (int i = 0; i < own->nkids; i++)
        if (same_key(own->kids[i], k))
            return 1;
    return 0;
}

/* s's effective recipe: its base's (itself resolved first) lines of every key s does not write, in
 * the base's order, then s's own lines. 0 when s's base could not be taken (s->failed). */
static int recipe_resolve(ctx *c, qc_sym *s, int depth)
{
    if (s->mark == 2)
        return !s->failed;
    ql_node *own = s->decl, *bn = own->a;
    if (!bn) {
        s->mark = 2;
        return 1;
    }
    s->mark = 1;
    chk_enter_file(c, s->file);
    qc_sym *b = chk_lookup(c, bn, bn->name, 0);
    int ok = 0;
    if (!b) {
        /* the lookup's own message (unknown name, did you mean, defined in a file not imported),
         * said of a recipe */
        qc_sym *item = qc_find_item(c->u, bn->name);
        if (item && item->kind == QC_SYM_RECIPE)
            chk_err(c, bn, "recipe '%s' is defined in %s, which this file does not import", bn->name,
                    item->file->src->path);
        else {
            const char *names[256];
            int n = 0;
            for (int i = 0; i < c->u->nitems && n < 256; i++)
                if (c->u->items[i]->kind == QC_SYM_RECIPE && c->u->items[i] != s &&
                    chk_item_visible(c, c->u->items[i]))
                    names[n++] = c->u->items[i]->name;
            const char *hint = ql_suggest(bn->name, names, n);
            if (hint)
                chk_err(c, bn, "unknown recipe '%s'; did you mean '%s'?", bn->name, hint);
            else
                chk_err(c, bn, "unknown recipe '%s': a recipe derives from a recipe of its file or of one it "
                               "imports (import \"int8.qrl\")", bn->name);
        }
    } else if (b->kind != QC_SYM_RECIPE) {
        static const char *const what[] = {
            [QC_SYM_CONST] = "a const", [QC_SYM_FN] = "a fn", [QC_SYM_KERNEL] = "a kernel",
            [QC_SYM_CALIBRATOR] = "a calibrator", [QC_SYM_PATTERN] = "a pattern", [QC_SYM_AFFINE] = "an affine rule",
            [QC_SYM_TRANSFORM] = "a transform", [QC_SYM_GENERIC] = "a generic fn or kernel",
            [QC_SYM_BUILTIN] = "a built-in constant"};
        const char *w = (size_t)b->kind < sizeof what / sizeof *what && what[b->kind] ? what[b->kind] : "no recipe";
        chk_err(c, bn, "'%s' is %s, not a recipe: a recipe derives from another recipe", bn->name, w);
        if (b->decl)
            ql_note(c->d, chk_decl_span(b->decl), "'%s' is defined here", bn->name);
    } else if (b == s || b->mark == 1) {
        s->base = b;
        char path[512];
        int len = snprintf(path, sizeof path, "%s : %s", s->name, b->name);
        for (const qc_sym *t = b; t != s && t->base && len < (int)sizeof path - 64; t = t->base)
            len += snprintf(path + len, sizeof path - (size_t)len, " : %s", t->base->name);
        chk_err(c, bn, "recipe '%s' derives from itself: %s", s->name, path);
    } else if (depth >= MAX_RECIPE_DEPTH) {
        chk_err(c, bn, "recipes derive from one another more than %d deep", MAX_RECIPE_DEPTH);
    } else {
        s->base = b;
        bn->sym = b;
        ok = recipe_resolve(c, b, depth + 1);
        chk_enter_file(c, s->file);
    }
    s->mark = 2;
    s->failed = !ok;
    if (!ok)
        return 0;
    const ql_node *be = b->decl;
    ql_node *e = ql_node_new(c->ar, QL_RECIPE, own->span);
    e->name = own->name;
    e->name_span = own->name_span;
    e->a = own->a;
    e->sym = s;
    for (int i = 0; i < be->nkids; i++)
        if (!writes_key(own, be->kids[i]))
            ql_node_add(c->ar, e, be->kids[i]);
    for (int i = 0; i < own->nkids; i++)
        ql_node_add(c->ar, e, own->kids[i]);
    s->own = own;
    s->decl = e;
    return 1;
}

void chk_recipe_bases(ctx *c)
{
    for (int i = 0; i < c->u->nitems; i++)
        if (c->u->items[i]->kind == QC_SYM_RECIPE)
            recipe_resolve(c, c->u->items[i], 0);
}

/* Whether recipe line k is s's own (not inherited). */
static int own_line(const qc_sym *s, const ql_node *k)
{
    if (!s->own)
        return 1;
    for (int i = 0; i < s->own->nkids; i++)
        if (s->own->kids[i] == k)
            return 1;
    return 0;
}

void chk_recipe(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    const char *keys[QR_NSETTINGS];
    char all_keys[QR_NSETTINGS * 32] = ""; /* every key of QR_SETTINGS, comma-separated (each under 30) */
    for (int j = 0; j < QR_NSETTINGS; j++) {
        keys[j] = qr_setting_defs[j].key;
        size_t len = strlen(all_keys);
        snprintf(all_keys + len, sizeof all_keys - len, "%s%s", j ? ", " : "", keys[j]);
    }
    c->w = W_RECIPE;
    for (int i = 0; i < n->nkids; i++) {
        ql_node *k = n->kids[i];
        if (!own_line(s, k)) /* checked with the recipe it is written in */
            continue;
        if (k->kind == QL_USE) {
            for (int j = 0; j < k->nkids; j++) {
                ql_node *nm = k->kids[j];
                qc_sym *ps = chk_lookup(c, nm, nm->name, 0);
                int is_affine = 0;
                int first = qc_names_find(&c->u->affine_names, c->u->items, nm->name);
                for (qc_sym *t = first < 0 ? NULL : c->u->items[first]; t && !is_affine; t = t->next_same)
                    is_affine = chk_item_visible(c, t);
                if (ps && ps->kind == QC_SYM_PATTERN)
                    nm->sym = ps;
                else if (!is_affine) {
                    if (ps)
                        chk_err(c, nm, "'%s' is not a pattern or an affine rule", nm->name);
                    else
                        chk_lookup(c, nm, nm->name, 1);
                }
            }
            continue;
        }
        int key = qr_setting_find(k->name);
        if (k->b) { /* activation (weight) for Op, "node" = ...: its own checks */
            setting_targets(c, n, i);
            if (key != QR_SET_ACTIVATION && key != QR_SET_WEIGHT)
                continue;
        }
        /* transforms chain, in their order; candidates add up */
        for (int j = 0; j < i && key != QR_SET_TRANSFORM && key != QR_SET_CANDIDATE && !k->b; j++)
            if (n->kids[j]->kind == QL_SETTING && !n->kids[j]->b && !strcmp(n->kids[j]->name, k->name)) {
                chk_err(c, k, "'%s' is set twice", k->name);
                ql_note(c->d, n->kids[j]->span, "first set here");
            }
        if (key < 0) {
            const char *hint = ql_suggest(k->name, keys, QR_NSETTINGS);
            if (hint)
                chk_err(c, k, "unknown recipe setting '%s'; did you mean '%s'?", k->name, hint);
            else
                chk_err(c, k, "unknown recipe setting '%s' (%s)", k->name, all_keys);
            continue;
        }
        switch (qr_setting_defs[key].kind) {
        case QR_SK_TRANSFORM: recipe_transform(c, k); break; /* transform = smoothquant(alpha = 0.5) */
        case QR_SK_QSPEC: qspec(c, k, 0); break;
        case QR_SK_BUDGET: recipe_budget(c, k); break; /* budget = bits(6) */
        case QR_SK_HOOK: recipe_hook(c, k); break; /* bias_qparams = coarse_bias */
        case QR_SK_ACC: qspec(c, k, 1); break;
        case QR_SK_FALLBACK: qspec(c, k, 2); break;
        default: setting_value(c, k, (qr_setting_id)key); break;
        }
    }
    /* The rest judges the lines together, inherited ones too: an error at an inherited line is
     * said to be the derived recipe's (its own lines make the mix). */
    c->derived = s->own ? s : NULL;
    /* weight-only (activation = f32) and what needs it: blocks and 4-bit weights */
    const ql_node *setting[QR_NSETTINGS] = {0};
    for (int i = 0; i < n->nkids; i++) {
        int key = n->kids[i]->kind == QL_SETTING && !n->kids[i]->b ? qr_setting_find(n->kids[i]->name) : -1;
        if (key >= 0 && !setting[key])
            setting[key] = n->kids[i];
    }
    const ql_node *act = setting[QR_SET_ACTIVATION], *wgt = setting[QR_SET_WEIGHT], *blk = setting[QR_SET_BLOCK];
    const ql_node *at = act && act->a->kind == QL_QSPEC ? act->a->a : NULL;
    int weight_only = at && at->kind == QL_TYPE && at->op == QL_TOK_F32;
    if (!weight_only && blk)
        chk_err(c, blk->a, "block needs activation = f32 (weight-only): integer kernels take one weight "
                           "scale per output channel");
    /* compute = int8: the blocked weights' products on activations quantized per block of K at run
     * time (MatMulNBits' accuracy_level 4), so it needs the blocks */
    const ql_node *cmp = setting[QR_SET_COMPUTE];
    if (cmp && cmp->a->kind == QL_NAME && !strcmp(cmp->a->name, "int8") && (!weight_only || !blk))
        chk_err(c, cmp->a, "compute = int8 is for weight-only recipes in blocks (activation = f32, block = 32): "
                           "the activations are quantized per block of K at run time");
    if (weight_only && wgt && wgt->a->kind == QL_QSPEC)
        for (int i = 0; i < wgt->a->nkids; i++)
            if (!strcmp(wgt->a->kids[i]->name, "per_tensor") && blk)
                chk_err(c, wgt->a->kids[i], "per_tensor contradicts block = %lld", (long long)blk->a->ival);
    recipe_mixed(c, n, act, wgt, setting[QR_SET_BUDGET], weight_only);
    /* samples = F reduces the per-sample figures of the integer graph's outputs that the fallback
     * and the summary judge; weight-only recipes and mixed precision measure their outputs apart */
    const ql_node *smp = setting[QR_SET_SAMPLES];
    if (smp && weight_only)
        chk_err(c, smp->a, "samples judges the integer graph's outputs sample by sample; this recipe is "
                           "weight-only (activation = f32), whose outputs are judged pooled");
    else if (smp && setting[QR_SET_BUDGET])
        chk_err(c, smp->a, "samples judges the fallback's outputs sample by sample; mixed precision (budget) "
                           "judges its choices pooled: drop one of them");
    /* calibrate_samples = F judges the fallback's tries on the calibration samples as well, beside
     * the held-out ones validate sets apart: the same measurement as samples = F's */
    const ql_node *cs = setting[QR_SET_CALIBRATE_SAMPLES];
    if (cs && weight_only)
        chk_err(c, cs->a, "calibrate_samples judges the integer graph's outputs sample by sample; this recipe is "
                          "weight-only (activation = f32), whose outputs are judged pooled");
    else if (cs && setting[QR_SET_BUDGET])
        chk_err(c, cs->a, "calibrate_samples judges the fallback's tries; mixed precision (budget) makes no tries: "
                          "drop one of them");
    else if (cs && !setting[QR_SET_FALLBACK])
        chk_err(c, cs->a, "calibrate_samples judges the fallback's tries on the calibration samples; this recipe has "
                          "no fallback: fallback = f32 when output_sqnr < 25");
    /* fallback_activation = ...: the ranges the fallback searches with, the recipe's own activation
     * line shipping only where that search keeps every layer on the integers (so the same type:
     * the two runs quantize the same tensors); fallback_calibrate: how its calibrator observes */
    const ql_node *fa = setting[QR_SET_FALLBACK_ACTIVATION], *fcal = setting[QR_SET_FALLBACK_CALIBRATE];
    const ql_node *fat = fa && fa->a->kind == QL_QSPEC ? fa->a->a : NULL;
    const char *an = NULL, *fan = NULL;
    if (fa && !setting[QR_SET_FALLBACK])
        chk_err(c, fa->a, "fallback_activation gives the ranges the fallback searches with; this recipe has no "
                          "fallback: fallback = f32 when output_sqnr < 25");
    else if (fa && weight_only)
        chk_err(c, fa->a, "fallback_activation calibrates integer activations; this recipe is weight-only "
                          "(activation = f32)");
    else if (fat && at && qtype_bits(fat, &fan) && qtype_bits(at, &an) && strcmp(fan, an))
        chk_err(c, fat, "fallback_activation is %s, activation %s: the two runs quantize the same tensors with "
                        "the same type, only their ranges differ", fan, an);
    if (fcal && !fa)
        chk_err(c, fcal->a, "fallback_calibrate says what fallback_activation's calibrator observes; this recipe "
                            "has no fallback_activation (calibrate says it for activation's)");
    /* fallback = u16 then f32 when ...: widens 8-bit activations; the 16-bit layers are ordered for
     * f32 by their effect measured at 16 bits, which rank = gain's estimate does not give */
    const ql_node *fb = setting[QR_SET_FALLBACK], *rank = setting[QR_SET_RANK];
    if (fb && fb->a->kind == QL_QSPEC && fb->a->d) {
        int abits = at ? qtype_bits(at, NULL) : 0;
        if (weight_only)
            chk_err(c, fb->a->d, "a 16-bit fallback step widens integer activations; this recipe is weight-only "
                                 "(activation = f32)");
        else if (abits && abits != 8)
            chk_err(c, fb->a->d, "the fallback's 16-bit step needs 8-bit activations (activation = u8 or i8): it "
                                 "widens them");
        if (rank && rank->a->kind == QL_NAME && !strcmp(rank->a->name, "gain"))
            chk_err(c, rank->a, "rank = gain cannot order a 16-bit fallback step's layers for f32 (their effect at "
                                "16 bits is measured, rank = effect's runs): drop one of them");
    }
    for (int i = 0; i < n->nkids && setting[QR_SET_CANDIDATE]; i++)
        if (n->kids[i]->kind == QL_SETTING && n->kids[i]->b && !strcmp(n->kids[i]->name, "weight")) {
            chk_err(c, n->kids[i]->b, "weight for cannot be used with candidate: the mixed precision search "
                                      "chooses every layer's weight type");
            ql_note(c->d, setting[QR_SET_CANDIDATE]->span, "candidate given here");
            break;
        }
    for (int j = QR_SET_ACTIVATION; j <= QR_SET_WEIGHT && !s->failed; j++)
        if (!setting[j])
            chk_err_decl(c, n, "recipe '%s' does not say how %ss are quantized (%s = ...)", s->name, keys[j], keys[j]);
    c->derived = NULL;
}

void chk_const_item(ctx *c, qc_sym *s)
{
    ql_node *n = s->decl;
    c->w = W_CONST;
    const qc_type *dt = n->a ? chk_type(c, n->a) : NULL;
    if (dt && !qc_is_scalar(dt) && dt->k != QC_ERROR) {
        char a[64];
        chk_err(c, n->a, "a constant is a number or a bool, not %s", TN(dt, a));
        dt = &qc_error;
    }
    const qc_type *t = chk_value_expr(c, n->b, dt);
    if (dt)
        chk_convert(c, n->b, t, dt, "the value");
    s->type = dt ? dt : t;
}

/* ------------------------------------------------------------ generics */

/* Binds the type parameters that type node pt mentions from t, an argument's
 * type; 0 after reporting two different types for one parameter. */
static int unify(ctx *c, const ql_node *call, const qc_sym *g, const ql_node *pt, const qc_type *t, const char *arg,
                 const qc_type **bound, const char **from)
{
    const ql_node *tp = g->decl->d;
    if (!pt || !t || t->k == QC_ERROR)
        return 1;
    if ((pt->kind == QL_TYPE_TENSOR && t->k == QC_TENSOR) || (pt->kind == QL_TYPE_ARRAY && t->k == QC_ARRAY))
        return unify(c, call, g, pt->a, t->elem, arg, bound, from);
    if (pt->kind != QL_TYPE || pt->op != QL_TOK_IDENT || t->k == QC_INTLIT || t->k == QC_FLOATLIT || !qc_is_scalar(t))
        return 1;
    for (int i = 0; i < tp->nkids; i++) {
        if (strcmp(tp->kids[i]->name, pt->name))
            continue;
        if (!bound[i]) {
            bound[i] = t;
            from[i] = arg;
        } else if (!qc_type_eq(bound[i], t)) {
            char a[64], b[64];
            chk_err(c, call, "'%s' is called with %s = %s (argument '%s') and %s = %s (argument '%s'); one %s is one type",
                g->name, tp->kids[i]->name, TN(bound[i], a), from[i], tp->kids[i]->name, TN(t, b), arg,
                tp->kids[i]->name);
            return 0;
        }
    }
    return 1;
}

/* Whether type t (a member, or the caller's type variable: each of its
 * members) is in tparam's set; else ", which is i16 when T = i16" in why. */
static int in_set(const ql_node *tparam, const qc_type *t, char *why, int n)
{
    why[0] = 0;
    if (t->k == QC_TVAR) {
        for (int m = 0; m < t->nmembers; m++)
            if (!in_set(tparam, t->members[m], why, n)) {
                char tb[64];
                snprintf(why, (size_t)n, ", which is %s when %s = %s", TN(t->members[m], tb), t->name, TN(t->members[m], tb));
                return 0;
            }
        return 1;
    }
    for (int j = 0; j < tparam->nkids; j++)
        if (qc_type_eq(qc_generic_member(tparam->kids[j]), t))
            return 1;
    return 0;
}

/* The instance of generic g whose type arguments are args; g itself when an
 * argument holds the caller's type variables (a call inside a generic's
 * body, checked once for every member), with tb binding g's parameters. */
static qc_sym *instance_of(qc_sym *g, const qc_type *const *args, qc_tbind *tb)
{
    const ql_node *tp = g->decl->d;
    int abstract = 0;
    for (int i = 0; i < tp->nkids; i++)
        abstract |= qc_has_tvar(args[i]);
    if (!g->ninstances)
        return NULL;
    if (abstract && tb) {
        tb->n = tp->nkids;
        for (int i = 0; i < tp->nkids; i++) {
            tb->var[i] = tp->kids[i]->type;
            tb->to[i] = args[i];
        }
        return g;
    }
    int k = abstract ? -1 : qc_generic_index(g->decl, args);
    return k >= 0 && k < g->ninstances ? g->instances[k] : NULL;
}

/* The instance of generic g that name's type arguments (k<i8>) name. */
qc_sym *chk_explicit_instance(ctx *c, ql_node *name, qc_sym *g, qc_tbind *tb)
{
    const ql_node *tp = g->decl->d, *ta = name->d;
    if (ta->nkids != tp->nkids) {
        chk_err(c, ta, "'%s' takes %d type argument%s, not %d", g->name, tp->nkids, tp->nkids == 1 ? "" : "s", ta->nkids);
        return NULL;
    }
    const qc_type *args[QC_GENERIC_MAX_PARAMS];
    for (int i = 0; i < ta->nkids; i++) {
        char set[128], a[64], why[96];
        args[i] = chk_type(c, ta->kids[i]);
        if (args[i]->k == QC_ERROR)
            return NULL;
        if (!in_set(tp->kids[i], args[i], why, sizeof why)) {
            chk_err(c, ta->kids[i], "'%s' takes %s = %s, not %s%s", g->name, tp->kids[i]->name,
                qc_generic_set(g->decl, i, set, sizeof set), TN(args[i], a), why);
            return NULL;
        }
    }
    return instance_of(g, args, tb);
}

/* The instance of generic g that call n's arguments select: each type
 * parameter takes the type of the arguments whose parameter mentions it. */
qc_sym *chk_instance_for_call(ctx *c, ql_node *n, qc_sym *g, qc_tbind *tb)
{
    const ql_node *tp = g->decl->d, *ps = g->decl->a;
    int np = ps ? ps->nkids : 0, mark = c->d->n, errors = c->d->errors;
    const qc_type *bound[QC_GENERIC_MAX_PARAMS] = {0}, *types[QC_MAX_PARAMS] = {0};
    const char *from[QC_GENERIC_MAX_PARAMS] = {0};
    ql_node *at[QC_MAX_PARAMS] = {0};
    int ok = 1;
    /* the arguments' types, quietly: chk_args types them again, for real. An
     * argument typed already (an outer call's quiet pass) keeps its type, so
     * nested generic calls are typed a quadratic number of times, not 2^depth. */
    for (int i = 0; i < n->nkids && i < QC_MAX_PARAMS; i++) {
        const char *nm;
        ql_node *e = chk_arg_expr(n->kids[i], &nm);
        int p = i;
        if (nm)
            for (p = 0; p < np && strcmp(ps->kids[p]->name, nm); p++)
                ;
        const qc_type *t = e->type ? e->type : chk_expr(c, e, NULL);
        if (p < np && p < QC_MAX_PARAMS)
            types[p] = t, at[p] = n->kids[i];
    }
    ql_diags_truncate(c->d, mark);
    c->d->errors = errors;
    for (int p = 0; p < np && p < QC_MAX_PARAMS && ok; p++)
        ok = unify(c, n, g, ps->kids[p]->a, types[p], ps->kids[p]->name, bound, from);
    if (!ok)
        return NULL;
    for (int i = 0; i < tp->nkids; i++) {
        char set[128], a[64], why[96];
        if (!bound[i]) {
            chk_err(c, n->a, "no argument of this call tells the type %s of '%s' (%s)", tp->kids[i]->name, g->name,
                qc_generic_set(g->decl, i, set, sizeof set));
            return NULL;
        }
        int p = 0;
        while (p < np && p < QC_MAX_PARAMS && strcmp(ps->kids[p]->name, from[i]))
            p++;
        if (!in_set(tp->kids[i], bound[i], why, sizeof why)) {
            chk_err(c, p < np && p < QC_MAX_PARAMS && at[p] ? at[p] : n, "'%s' takes %s = %s, not %s%s (argument '%s')",
                g->name, tp->kids[i]->name, qc_generic_set(g->decl, i, set, sizeof set), TN(bound[i], a), why, from[i]);
            return NULL;
        }
    }
    return instance_of(g, bound, tb);
}

/* An instance's diagnostics are its generic's, and said once: the first
 * instance with errors reports them, with a note naming its type arguments;
 * the other instances are checked quietly (their errors would repeat the
 * same lines). mark: the number of diagnostics before this part of s. */
void chk_instance_done(ctx *c, qc_sym *s, int mark)
{
    qc_sym *g = s->generic;
    if (s->kind == QC_SYM_GENERIC) { /* its own check, once for every member: errors leave its instances quiet */
        for (int i = mark; i < c->d->n; i++)
            if (c->d->v[i].sev == QL_ERROR)
                s->failed = -1;
        return;
    }
    if (!g)
        return;
    if (g->failed && g->failed != s->index + 1) {
        ql_diags_truncate(c->d, mark);
        return;
    }
    int errs = 0;
    for (int i = mark; i < c->d->n; i++)
        errs |= c->d->v[i].sev == QL_ERROR;
    if (errs && !g->failed) {
        char a[128];
        g->failed = s->index + 1;
        ql_note(c->d, chk_decl_span(g->decl), "in '%s', the instance of '%s' for %s", s->name, g->name,
                qc_generic_args(g->decl, s->index, a, sizeof a));
    }
}

/* The instances of generic g, after it as items: each an ordinary fn or
 * kernel, named by its type arguments. */
void chk_instantiate(ctx *c, qc_sym *g)
{
    ql_node *n = g->decl, *tp = n->d;
    char tb[64];
    int errors = c->d->errors;
    for (int i = 0; i < tp->nkids; i++) {
        ql_node *p = tp->kids[i];
        for (int j = 0; j < i; j++)
            if (!strcmp(tp->kids[j]->name, p->name))
                chk_err_decl(c, p, "'%s' has two type parameters named '%s'", g->name, p->name);
        for (int k = 0; k < p->nkids; k++)
            for (int j = 0; j < k; j++)
                if (p->kids[j]->op == p->kids[k]->op)
                    chk_err(c, p->kids[k], "%s lists %s twice", p->name, TN(qc_generic_member(p->kids[k]), tb));
    }
    if (c->d->errors > errors)
        return;
    int count = qc_generic_count(n);
    if (!count) {
        long combos = 1;
        for (int i = 0; i < tp->nkids && combos <= 1L << 40; i++)
            combos *= tp->kids[i]->nkids;
        if (tp->nkids > QC_GENERIC_MAX_PARAMS)
            chk_err_decl(c, n, "'%s' has %d type parameters; a generic has at most %d", g->name, tp->nkids,
                     QC_GENERIC_MAX_PARAMS);
        else
            chk_err_decl(c, n, "'%s' has %ld instances (one per combination of its type parameters' members); a generic "
                     "has at most %d", g->name, combos, QC_GENERIC_MAX_INSTANCES);
        return;
    }
    if (c->ninstances + count > QC_GENERIC_MAX_UNIT_INSTANCES) {
        chk_err_decl(c, n, "'%s' has %d instances, which make %d with the generics before it; a recipe with its imports "
                 "has at most %d", g->name, count, c->ninstances + count, QC_GENERIC_MAX_UNIT_INSTANCES);
        return;
    }
    c->ninstances += count;
    for (int i = 0; i < tp->nkids; i++) { /* the type variables its body is checked with */
        const qc_type *m[QC_GENERIC_MAX_INSTANCES];
        for (int j = 0; j < tp->kids[i]->nkids; j++)
            m[j] = qc_generic_member(tp->kids[i]->kids[j]);
        tp->kids[i]->type = qc_tvar_new(c->ar, tp->kids[i]->name, m, tp->kids[i]->nkids);
    }
    g->instances = ql_alloc(c->ar, sizeof *g->instances * (size_t)count);
    for (int k = 0; k < count; k++) {
        const qc_type *args[QC_GENERIC_MAX_PARAMS];
        ql_node *d = qc_generic_instance(c->ar, n, k, args);
        qc_sym *s = chk_new_sym(c, d->name, n->kind == QL_KERNEL ? QC_SYM_KERNEL : QC_SYM_FN, NULL, d);
        s->generic = g;
        s->index = k;
        d->sym = s;
        g->instances[g->ninstances++] = s;
        chk_add_item(c, s);
    }
}

/* A generic's body, checked once with its type parameters as type
 * variables (its signature was, with the other functions'): an operation
 * passes when it is valid for every member, and its errors name the member
 * it fails for. Its instances are then checked quietly, for the types the
 * code generator reads; an error one of them still finds is reported with
 * a note naming it (chk_instance_done). */
void chk_generic(ctx *c, qc_sym *g)
{
    if (!g->ninstances) /* refused by chk_instantiate */
        return;
    int mark = c->d->n;
    c->tparams = g->decl->d;
    chk_function(c, g);
    c->tparams = NULL;
    chk_instance_done(c, g, mark);
}
