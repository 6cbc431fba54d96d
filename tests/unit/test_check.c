/* The checker's generics: a generic's body is checked once with its type
 * parameters as type variables (compiler/types.c's TVAR), an operation
 * allowed when it is allowed for every member. The relations on type
 * variables against values derived by hand from the language's rules for
 * each member (docs/language.md, Types); then whole units. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/check.h"
#include "testutil.h"

static ql_arena ar;

static void setup(void)
{
    memset(&ar, 0, sizeof ar);
}

static void teardown(void)
{
    ql_arena_free(&ar);
}

static const qc_type *tvar(const char *name, const qc_type *a, const qc_type *b)
{
    const qc_type *m[2] = {a, b};
    return qc_tvar_new(&ar, name, m, b ? 2 : 1);
}

TestSuite(types_tvar, .init = setup, .fini = teardown);

Test(types_tvar, predicates_hold_for_every_member)
{
    const qc_type *t = tvar("T", &qc_u8, &qc_i8), *f = tvar("F", &qc_i32, &qc_f32);
    cr_assert(qc_is_int(t));
    cr_assert(!qc_is_signed(t)); /* u8 is not */
    cr_assert(!qc_is_int(f) && !qc_is_float(f) && qc_is_numeric(f));
    cr_assert(qc_any_member(f, qc_is_float) && qc_any_member(f, qc_is_int));
    cr_assert(qc_int_fits(100, t) && !qc_int_fits(200, t) && !qc_int_fits(-1, t));
}

Test(types_tvar, widening_for_every_member)
{
    const qc_type *t = tvar("T", &qc_u8, &qc_i8);
    cr_assert(qc_widens(t, t));
    cr_assert(qc_widens(t, &qc_i16));  /* u8 -> i16, i8 -> i16 */
    cr_assert(!qc_widens(t, &qc_i8));  /* u8 -> i8 loses */
    cr_assert(!qc_widens(t, &qc_u16)); /* i8 -> u16 loses */
    cr_assert(!qc_widens(&qc_i8, t));  /* i8 -> u8 loses */
    cr_assert(qc_widens(&qc_intlit, t));
    cr_assert(qc_widens(qc_tensor_of(&ar, t), qc_tensor_of(&ar, t)));
    cr_assert(!qc_widens(qc_tensor_of(&ar, t), qc_tensor_of(&ar, &qc_u8)));
    /* two variables are two types, whatever their members */
    cr_assert(!qc_type_eq(t, tvar("U", &qc_u8, &qc_i8)));
}

Test(types_tvar, common_type_is_the_same_for_every_member)
{
    const qc_type *t = tvar("T", &qc_u8, &qc_i8), *u = tvar("U", &qc_i32, &qc_i64);
    cr_assert_eq(qc_common(t, t), t);           /* u8 + u8 is u8, i8 + i8 is i8 */
    cr_assert_eq(qc_common(t, &qc_intlit), t);  /* a literal takes T */
    cr_assert_eq(qc_common(t, &qc_i32), &qc_i32);
    cr_assert_eq(qc_common(&qc_i16, t), &qc_i16);
    cr_assert_eq(qc_common(t, u), u);           /* every (T, U) meets at U's member */
    cr_assert_null(qc_common(t, &qc_i8));       /* i16 for u8, i8 for i8 */
    cr_assert_null(qc_common(t, &qc_f32));      /* no common type at all */
    qc_tbind b1, b2;
    const qc_type *r1 = NULL, *r2 = NULL;
    char n1[64], n2[64];
    cr_assert_eq(qc_common_why(t, &qc_i8, &b1, &b2, &r1, &r2), 2);
    cr_assert_str_eq(qc_tbind_name(&b1, n1, sizeof n1), "T = u8");
    cr_assert_str_eq(qc_tbind_name(&b2, n2, sizeof n2), "T = i8");
    cr_assert_eq(r1, &qc_i16);
    cr_assert_eq(r2, &qc_i8);
    cr_assert_eq(qc_common_why(t, &qc_f32, &b1, &b2, &r1, &r2), 1);
    cr_assert_str_eq(qc_tbind_name(&b1, n1, sizeof n1), "T = u8");
}

Test(types_tvar, substitution)
{
    const qc_type *t = tvar("T", &qc_u8, &qc_i8);
    qc_tbind b;
    cr_assert_eq(qc_tbind_vars(&b, qc_tensor_of(&ar, t), &qc_i32), 2);
    qc_tbind_pick(&b, 1);
    char n[64];
    cr_assert_str_eq(qc_type_name(qc_subst(&ar, qc_tensor_of(&ar, t), &b), n, sizeof n), "tensor<i8>");
    cr_assert_str_eq(qc_type_name(t, n, sizeof n), "T");
}

/* ---- units ---- */

static qc_unit *check(const char *src)
{
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    cr_assert(u);
    cr_assert(qc_unit_load_text(u, "g.qrl", src, strlen(src)));
    qc_check(u);
    return u;
}

static char *diags(qc_unit *u)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ql_diags_print(&u->diags, f);
    fclose(f);
    return text;
}

/* The generic's own body carries T; its instances their members. */
Test(check_generic, body_checked_with_type_variables)
{
    qc_unit *u = check("fn add_one<T: u8 | i8 | i16>(v: T) -> T {\n  return v + T(1)\n}\n");
    char *d = diags(u);
    cr_assert_eq(u->diags.n, 0, "%s", d);
    const ql_node *ret = qc_find_item(u, "add_one")->decl->c->kids[0];
    cr_assert(ret->a->type, "the generic's body was not checked");
    cr_assert_eq(ret->a->type->k, QC_TVAR);
    cr_assert_str_eq(ret->a->type->name, "T");
    cr_assert_eq(qc_find_item(u, "add_one<i16>")->decl->c->kids[0]->a->type->k, QC_I16);
    free(d);
    qc_unit_free(u);
}

/* Errors come from the one check: each once, naming the member, with no
 * note of an instance (which the per-instance check would add). */
Test(check_generic, errors_once_without_instance_notes)
{
    qc_unit *u = check("fn takes_i8(v: i8) -> i32 {\n  return i32(v)\n}\n"
                       "fn f<T: u8 | i8>(v: T) -> i32 {\n  return i32(-v) + takes_i8(v)\n}\n");
    char *d = diags(u);
    cr_assert_eq(u->diags.errors, 2, "%s", d);
    cr_assert_eq(u->diags.n, 2, "%s", d);
    cr_assert(strstr(d, "g.qrl:5:14: error: '-' on T, which is unsigned u8 when T = u8"), "%s", d);
    cr_assert(strstr(d, "g.qrl:5:29: error: argument 'v' has type T, expected i8: u8 does not convert to i8"), "%s", d);
    cr_assert_null(strstr(d, "instance"), "%s", d);
    free(d);
    qc_unit_free(u);
}

/* The stdlib's generics (kernels.qrl, the patterns' lowerings) pass the one
 * check, and no instance finds an error it missed. */
Test(check_generic, stdlib_generics_pass)
{
    qc_unit *u = check("import \"patterns.qrl\"\nimport \"patterns_tflite.qrl\"\nimport \"kernels.qrl\"\n");
    char *d = diags(u);
    cr_assert_eq(u->diags.n, 0, "%s", d);
    int generics = 0;
    for (int i = 0; i < u->nitems; i++)
        if (u->items[i]->kind == QC_SYM_GENERIC) {
            generics++;
            cr_assert_eq(u->items[i]->failed, 0, "%s", u->items[i]->name);
            cr_assert(u->items[i]->decl->d->kids[0]->type && u->items[i]->decl->d->kids[0]->type->k == QC_TVAR);
        }
    cr_assert_geq(generics, 6);
    free(d);
    qc_unit_free(u);
}

/* Recipe inheritance (docs/language.md, "Recipes that derive from another"): a derived recipe's
 * effective lines are its base's, but every line of a key it writes (a setting by name, `transform`
 * and `candidate` as one key each, `activation for` and `weight for` apart from `activation` and
 * `weight`, `use`), in the base's order, then its own. What each line should be is read off the
 * rule by hand: the base's nodes themselves where inherited, the derived one's where written. */
static const ql_node *line(const ql_node *r, const char *name, int for_, int nth)
{
    for (int i = 0; i < r->nkids; i++) {
        const ql_node *k = r->kids[i];
        if (k->kind == QL_SETTING && !strcmp(k->name, name) && !k->b == !for_ && nth-- == 0)
            return k;
    }
    return NULL;
}

static int count_lines(const ql_node *r, ql_kind kind, const char *name, int for_)
{
    int n = 0;
    for (int i = 0; i < r->nkids; i++)
        n += r->kids[i]->kind == kind && (kind == QL_USE || (!strcmp(r->kids[i]->name, name) && !r->kids[i]->b == !for_));
    return n;
}

Test(check_derive, written_keys_replace_the_base_lines_and_the_rest_is_inherited)
{
    qc_unit *u = check("import \"calibrators.qrl\"\nimport \"patterns.qrl\"\nimport \"transforms.qrl\"\n"
                       "recipe base {\n"
                       "  activation = u8 asymmetric by minmax()\n"
                       "  activation for Softmax = u16 asymmetric by minmax()\n"
                       "  activation for LayerNormalization = u16 asymmetric by minmax()\n"
                       "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                       "  transform = equalize()\n"
                       "  transform = bias_correct(strength = 1.0)\n"
                       "  use conv, gemm\n"
                       "  tolerance = 3\n"
                       "}\n"
                       "recipe derived : base {\n"
                       "  tolerance = 5\n"
                       "  transform = bias_correct(strength = 0.5)\n"
                       "  activation for Softmax = u8 asymmetric by minmax()\n"
                       "}\n"
                       "recipe alias : derived {\n}\n"
                       "recipe deeper : alias {\n  use conv\n  activation = i8 symmetric by minmax(symmetric = true)\n}\n");
    char *d = diags(u);
    cr_assert_eq(u->diags.n, 0, "%s", d);
    const qc_sym *base = qc_find_item(u, "base"), *der = qc_find_item(u, "derived"), *alias = qc_find_item(u, "alias"),
                 *deeper = qc_find_item(u, "deeper");
    const ql_node *b = base->decl, *e = der->decl;
    cr_assert_null(base->own, "a recipe without a base keeps its node");
    cr_assert_eq(der->base, base);
    cr_assert_eq(b->nkids, 8);
    /* derived: activation, weight and use inherited (the base's own nodes), in the base's order; then its
     * own three lines; the base's two `activation for` lines and two transforms are gone */
    cr_assert_eq(e->nkids, 6, "%d lines", e->nkids);
    cr_assert_eq(e->kids[0], line(b, "activation", 0, 0));
    cr_assert_eq(e->kids[1], line(b, "weight", 0, 0));
    cr_assert_eq(e->kids[2]->kind, QL_USE);
    cr_assert_eq(e->kids[2]->nkids, 2);
    cr_assert_eq(e->kids[3], der->own->kids[0]);
    cr_assert_eq(line(e, "tolerance", 0, 0)->a->ival, 5);
    cr_assert_eq(count_lines(e, QL_SETTING, "transform", 0), 1);
    cr_assert_eq(line(e, "transform", 0, 0)->a->kids[0]->a->fval, 0.5); /* strength = 0.5 */
    cr_assert_eq(count_lines(e, QL_SETTING, "activation", 1), 1);
    cr_assert_str_eq(line(e, "activation", 1, 0)->b->kids[0]->name, "Softmax");
    cr_assert_eq(line(e, "activation", 1, 0)->a->a->op, QL_TOK_U8);
    /* alias writes nothing: derived's lines, the same nodes */
    cr_assert_eq(alias->decl->nkids, e->nkids);
    for (int i = 0; i < e->nkids; i++)
        cr_assert_eq(alias->decl->kids[i], e->kids[i]);
    /* deeper: through alias and derived; its use and activation replace theirs */
    const ql_node *x = deeper->decl;
    cr_assert_eq(x->nkids, 6);
    cr_assert_eq(count_lines(x, QL_USE, NULL, 0), 1);
    cr_assert_eq(x->kids[x->nkids - 2]->kind, QL_USE);
    cr_assert_eq(x->kids[x->nkids - 2]->nkids, 1);
    cr_assert_eq(line(x, "activation", 0, 0)->a->a->op, QL_TOK_I8);
    cr_assert_eq(line(x, "activation", 1, 0), line(e, "activation", 1, 0));
    cr_assert_eq(line(x, "weight", 0, 0), line(b, "weight", 0, 0));
    free(d);
    qc_unit_free(u);
}

/* A derived recipe's lines are checked once, where they are written; what only the mix gets wrong
 * (a budget beside an inherited fallback) is said at the inherited line, with a note at the base's
 * name in the derived recipe. A recipe whose base is unknown says nothing more (no "does not say how
 * activations are quantized"), nor do those deriving from it. */
Test(check_derive, the_mix_is_checked_and_a_failed_base_says_nothing_more)
{
    qc_unit *u = check("import \"calibrators.qrl\"\nimport \"patterns.qrl\"\n"
                       "recipe base {\n"
                       "  activation = u8 asymmetric by minmax()\n"
                       "  weight = i8 symmetric per_channel by minmax(symmetric = true)\n"
                       "  fallback = f32 when sqnr < 20\n"
                       "}\n"
                       "recipe mixed : base {\n  candidate = f32\n  budget = bits(8)\n}\n"
                       "recipe lost : bsae {\n}\n"
                       "recipe after : lost {\n}\n");
    char *d = diags(u);
    cr_assert_eq(u->diags.errors, 2, "%s", d);
    cr_assert(strstr(d, "g.qrl:6:3: error: a budget decides which layers stay f32: a fallback condition cannot also"),
              "%s", d);
    cr_assert(strstr(d, "g.qrl:8:16: note: in recipe 'mixed', which takes that line from 'base'"), "%s", d);
    cr_assert(strstr(d, "g.qrl:12:15: error: unknown recipe 'bsae'; did you mean 'base'?"), "%s", d);
    cr_assert_null(strstr(d, "does not say"), "%s", d);
    free(d);
    qc_unit_free(u);
}
