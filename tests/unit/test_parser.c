/* The parser: the AST of the language sketch against a golden dump, error
 * recovery, and the nesting limit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../../grammar/parse.h"
#include "testutil.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

typedef struct parsed {
    ql_source *src;
    ql_arena arena;
    ql_diags diags;
    ql_node *ast;
} parsed;

static void parse_text(parsed *p, const char *text)
{
    p->src = ql_source_from_text("t.qrl", text, strlen(text));
    ql_arena_init(&p->arena);
    ql_diags_init(&p->diags);
    p->ast = qp_parse(p->src, &p->arena, &p->diags);
}

static void parsed_free(parsed *p)
{
    ql_diags_free(&p->diags);
    ql_arena_free(&p->arena);
    ql_source_free(p->src);
}

Test(parser, sketch_matches_golden_ast)
{
    char path[600];
    size_t n, m;
    snprintf(path, sizeof path, "%s/tests/golden/sketch.qrl", tu_root());
    char *text = slurp(path, &n);
    snprintf(path, sizeof path, "%s/tests/golden/sketch.ast", tu_root());
    char *want = slurp(path, &m);
    parsed p;
    parse_text(&p, text);
    cr_assert_eq(p.diags.n, 0, "%s", p.diags.n ? p.diags.v[0].msg : "");
    char *got = NULL;
    size_t glen = 0;
    FILE *f = open_memstream(&got, &glen);
    ql_ast_dump(p.ast, f);
    fclose(f);
    cr_assert_str_eq(got, want, "AST differs from tests/golden/sketch.ast (regenerate: build/qrl check "
                                "tests/golden/sketch.qrl --dump-ast > tests/golden/sketch.ast)");
    free(got);
    free(text);
    free(want);
    parsed_free(&p);
}

Test(parser, recovers_and_reports_each_broken_statement)
{
    parsed p;
    parse_text(&p, "fn f() -> i32 {\n  let a = 1 +\n  let b = )\n  return a\n}\n"
                   "fn g() -> i32 {\n  return 1 1\n}\n"
                   "fn h() -> i32 { return 2 }\n");
    cr_assert_geq(p.diags.errors, 2);
    cr_assert(p.ast, "recovery keeps a tree");
    /* The declarations after the errors are still there. */
    int fns = 0;
    for (int i = 0; i < p.ast->nkids; i++)
        fns += p.ast->kids[i]->kind == QL_FN;
    cr_assert_geq(fns, 2, "got %d fns", fns);
    parsed_free(&p);
}

Test(parser, precedence)
{
    parsed p;
    parse_text(&p, "const X: i32 = 1 + 2 * 3 << 1 == 14 and not false\n");
    cr_assert_eq(p.diags.n, 0);
    const ql_node *e = p.ast->kids[0]->b;
    cr_assert_eq(e->kind, QL_BINARY);
    cr_assert_eq(e->op, QL_TOK_AND);
    cr_assert_eq(e->a->op, QL_TOK_EQ);
    cr_assert_eq(e->a->a->op, QL_TOK_SHL);
    cr_assert_eq(e->a->a->a->op, QL_TOK_PLUS);
    cr_assert_eq(e->a->a->a->b->op, QL_TOK_STAR);
    parsed_free(&p);
}

Test(parser, deep_nesting_is_an_error_not_a_crash)
{
    static char text[200000];
    strcpy(text, "const X: i32 = ");
    size_t k = strlen(text);
    for (int i = 0; i < 50000; i++)
        text[k++] = '(';
    text[k++] = '1';
    for (int i = 0; i < 50000; i++) {
        text[k++] = '+';
        text[k++] = '1';
    }
    text[k] = 0;
    parsed p;
    parse_text(&p, text);
    cr_assert_gt(p.diags.errors, 0);
    parsed_free(&p);
}

Test(parser, long_left_chain_is_cut_at_the_depth_limit)
{
    static char text[100000];
    strcpy(text, "const X: i32 = 1");
    size_t k = strlen(text);
    for (int i = 0; i < 20000; i++) {
        text[k++] = '+';
        text[k++] = '1';
    }
    text[k] = 0;
    parsed p;
    parse_text(&p, text);
    cr_assert_eq(p.diags.errors, 1);
    cr_assert(strstr(p.diags.v[0].msg, "nested more than"));
    parsed_free(&p);
}

/* head, n times open, middle, n times close, tail. */
static char *repeat(const char *head, const char *open, int n, const char *middle, const char *close, const char *tail)
{
    size_t len = strlen(head) + (strlen(open) + strlen(close)) * (size_t)n + strlen(middle) + strlen(tail) + 1;
    char *text = malloc(len), *p = text;
    p += sprintf(p, "%s", head);
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s", open);
    p += sprintf(p, "%s", middle);
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s", close);
    sprintf(p, "%s", tail);
    return text;
}

/* Parses text; it must give `errors` errors, the first saying `msg`, and a tree the dump can walk. */
static void expect_nesting(char *text, int errors, const char *msg)
{
    parsed p;
    parse_text(&p, text);
    cr_assert_eq(p.diags.errors, errors, "%s", p.diags.n ? p.diags.v[0].msg : "no error");
    if (errors)
        cr_assert(strstr(p.diags.v[0].msg, msg), "%s", p.diags.v[0].msg);
    FILE *null = fopen("/dev/null", "w");
    ql_ast_dump(p.ast, null);
    fclose(null);
    parsed_free(&p);
    free(text);
}

/* Else-if chains and array or tensor types nest without brackets: they are
 * bounded like expressions (100000 else-ifs once overflowed the checker's stack). */
Test(parser, statements_and_types_are_cut_at_the_depth_limit)
{
    expect_nesting(repeat("fn f(x: bool) {\n  if x {}", " else if x {}", 255, "", "", "\n}\n"), 0, NULL);
    expect_nesting(repeat("fn f(x: bool) {\n  if x {}", " else if x {}", 256, "", "", "\n}\n"), 1,
                   "statement nested more than 256 levels deep");
    expect_nesting(repeat("fn f(x: bool) {\n  if x {}", " else if x {}", 100000, "", "", "\n}\n"), 1,
                   "statement nested more than");
    /* blocks inside a chain inside blocks: the depths add up */
    expect_nesting(repeat("fn f(x: bool) {\n", "if x {} else if x {} else if x {\n", 100, "", "}\n", "}\n"), 1,
                   "statement nested more than");
    expect_nesting(repeat("fn f(a: i64", "[]", 256, "", "", ") {}\n"), 0, NULL);
    expect_nesting(repeat("fn f(a: i64", "[]", 100000, "", "", ") {}\n"), 1, "type nested more than");
    expect_nesting(repeat("fn f(a: ", "tensor<", 100000, "f32", " >", ") {}\n"), 1, "type nested more than");
}

/* recipe NAME : BASE { ... }: the base as the recipe's a (a NAME, its span the base's name), with or
 * without lines of its own; a missing base name is a syntax error at the '{'. */
Test(parser, a_recipe_names_the_recipe_it_derives_from)
{
    parsed p;
    parse_text(&p, "recipe best : int8 {\n  tolerance = 5\n}\nrecipe alias : best {\n}\nrecipe plain {\n  tolerance = 3\n}\n");
    cr_assert_eq(p.diags.n, 0, "%s", p.diags.n ? p.diags.v[0].msg : "");
    cr_assert_eq(p.ast->nkids, 3);
    const ql_node *best = p.ast->kids[0], *alias = p.ast->kids[1], *plain = p.ast->kids[2];
    cr_assert_eq(best->kind, QL_RECIPE);
    cr_assert_str_eq(best->name, "best");
    cr_assert(best->a && best->a->kind == QL_NAME);
    cr_assert_str_eq(best->a->name, "int8");
    cr_assert_eq(best->a->span.start, 14);
    cr_assert_eq(best->a->span.end, 18);
    cr_assert_eq(best->nkids, 1);
    cr_assert_str_eq(alias->a->name, "best");
    cr_assert_eq(alias->nkids, 0);
    cr_assert_null(plain->a);
    parsed_free(&p);
    parse_text(&p, "recipe best : {\n}\n");
    cr_assert_gt(p.diags.errors, 0);
    int line, col;
    ql_source_linecol(p.src, p.diags.v[0].span.start, &line, &col);
    cr_assert_eq(line, 1);
    cr_assert_eq(col, 15, "col %d: %s", col, p.diags.v[0].msg);
    parsed_free(&p);
}
