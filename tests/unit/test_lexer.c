/* The lexer: token kinds and values, spans, newline-terminated statements,
 * and lexical errors. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../lang/lexer.h"

typedef struct lexed {
    ql_source *src;
    ql_arena arena;
    ql_diags diags;
    ql_token t[256];
    int n;
} lexed;

static lexed *lex(const char *text)
{
    lexed *l = calloc(1, sizeof *l);
    l->src = ql_source_from_text("t.qrl", text, strlen(text));
    ql_arena_init(&l->arena);
    ql_diags_init(&l->diags);
    ql_lexer lx;
    ql_lexer_init(&lx, l->src, &l->arena, &l->diags);
    do
        ql_lex(&lx, &l->t[l->n]);
    while (l->t[l->n++].kind != QL_TOK_EOF && l->n < 256);
    return l;
}

static void done(lexed *l)
{
    ql_diags_free(&l->diags);
    ql_arena_free(&l->arena);
    ql_source_free(l->src);
    free(l);
}

static void expect_kinds(lexed *l, const ql_tok *want, int n)
{
    cr_assert_eq(l->n, n, "got %d tokens, expected %d", l->n, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(l->t[i].kind, want[i], "token %d: got %s, expected %s", i, ql_tok_desc(l->t[i].kind),
                     ql_tok_desc(want[i]));
}

Test(lexer, keywords_identifiers_and_operators)
{
    lexed *l = lex("calibrator mm(x: f32) { a += b << 2 -> c => d .. e }");
    const ql_tok want[] = {QL_TOK_CALIBRATOR, QL_TOK_IDENT, QL_TOK_LP, QL_TOK_IDENT, QL_TOK_COLON, QL_TOK_F32,
                           QL_TOK_RP, QL_TOK_LBRACE, QL_TOK_IDENT, QL_TOK_PLUSEQ, QL_TOK_IDENT, QL_TOK_SHL,
                           QL_TOK_INT, QL_TOK_ARROW, QL_TOK_IDENT, QL_TOK_FATARROW, QL_TOK_IDENT, QL_TOK_DOTDOT,
                           QL_TOK_IDENT, QL_TOK_RBRACE, QL_TOK_SEMI, QL_TOK_EOF};
    expect_kinds(l, want, sizeof want / sizeof want[0]);
    cr_assert_str_eq(l->t[1].s, "mm");
    cr_assert_eq(l->diags.n, 0);
    done(l);
}

/* '<' right after a name and before "type>(" opens type arguments (k<i8>(x));
 * with a space, or not followed by a call, it is a comparison. */
Test(lexer, type_arguments_or_less_than)
{
    lexed *l = lex("k<i8>(x) k<T,u8>(x) a<b a < b>(c) a<b>c");
    const ql_tok want[] = {QL_TOK_IDENT, QL_TOK_TLT, QL_TOK_I8, QL_TOK_GT, QL_TOK_LP, QL_TOK_IDENT, QL_TOK_RP,
                           QL_TOK_IDENT, QL_TOK_TLT, QL_TOK_IDENT, QL_TOK_COMMA, QL_TOK_U8, QL_TOK_GT, QL_TOK_LP,
                           QL_TOK_IDENT, QL_TOK_RP, QL_TOK_IDENT, QL_TOK_LT, QL_TOK_IDENT, QL_TOK_IDENT, QL_TOK_LT,
                           QL_TOK_IDENT, QL_TOK_GT, QL_TOK_LP, QL_TOK_IDENT, QL_TOK_RP, QL_TOK_IDENT, QL_TOK_LT,
                           QL_TOK_IDENT, QL_TOK_GT, QL_TOK_IDENT, QL_TOK_SEMI, QL_TOK_EOF};
    expect_kinds(l, want, sizeof want / sizeof want[0]);
    cr_assert_eq(l->diags.n, 0);
    done(l);
}

Test(lexer, number_literals)
{
    lexed *l = lex("42 0x1F 0b101 1.5 2e3 1.25e-2 0x1.8p1 0..3");
    cr_assert_eq(l->t[0].i, 42u);
    cr_assert_eq(l->t[1].i, 31u);
    cr_assert_eq(l->t[2].i, 5u);
    cr_assert_eq(l->t[3].kind, QL_TOK_FLOAT);
    cr_assert_float_eq(l->t[3].f, 1.5, 0);
    cr_assert_float_eq(l->t[4].f, 2000.0, 0);
    cr_assert_float_eq(l->t[5].f, 0.0125, 1e-18);
    cr_assert_float_eq(l->t[6].f, 3.0, 0);
    /* "0..3" is a range, not a float */
    cr_assert_eq(l->t[7].kind, QL_TOK_INT);
    cr_assert_eq(l->t[8].kind, QL_TOK_DOTDOT);
    cr_assert_eq(l->t[9].kind, QL_TOK_INT);
    cr_assert_eq(l->diags.n, 0);
    done(l);
}

Test(lexer, string_escapes)
{
    lexed *l = lex("\"a\\tb\\n\\\"q\\\\\"");
    cr_assert_eq(l->t[0].kind, QL_TOK_STRING);
    cr_assert_eq(l->t[0].slen, 7);
    cr_assert(memcmp(l->t[0].s, "a\tb\n\"q\\", 7) == 0);
    done(l);
}

Test(lexer, newline_ends_statement_only_after_an_operand)
{
    /* After 'x' a newline ends the statement; after '+' and inside ( ) it does not. */
    lexed *l = lex("let a = x\nlet b = x +\n  y\nf(a,\n  b\n)\n");
    const ql_tok want[] = {QL_TOK_LET, QL_TOK_IDENT, QL_TOK_ASSIGN, QL_TOK_IDENT, QL_TOK_SEMI,
                           QL_TOK_LET, QL_TOK_IDENT, QL_TOK_ASSIGN, QL_TOK_IDENT, QL_TOK_PLUS, QL_TOK_IDENT, QL_TOK_SEMI,
                           QL_TOK_IDENT, QL_TOK_LP, QL_TOK_IDENT, QL_TOK_COMMA, QL_TOK_IDENT, QL_TOK_RP, QL_TOK_SEMI,
                           QL_TOK_EOF};
    expect_kinds(l, want, sizeof want / sizeof want[0]);
    done(l);
}

Test(lexer, comments)
{
    lexed *l = lex("a # line comment\n/* block\n comment */ b");
    const ql_tok want[] = {QL_TOK_IDENT, QL_TOK_SEMI, QL_TOK_IDENT, QL_TOK_SEMI, QL_TOK_EOF};
    expect_kinds(l, want, sizeof want / sizeof want[0]);
    done(l);
}

Test(lexer, keyword_after_dot_is_a_name)
{
    lexed *l = lex("h.merge(o.h)");
    cr_assert_eq(l->t[2].kind, QL_TOK_IDENT);
    cr_assert_str_eq(l->t[2].s, "merge");
    done(l);
}

Test(lexer, spans_give_line_and_column)
{
    lexed *l = lex("fn f() {\n  return 12\n}");
    /* tokens: fn f ( ) { return 12 ; } ; EOF -- "12" is the 7th */
    int line, col;
    ql_source_linecol(l->src, l->t[6].span.start, &line, &col);
    cr_assert_eq(line, 2);
    cr_assert_eq(col, 10);
    cr_assert_eq(l->t[6].span.end - l->t[6].span.start, 2u);
    done(l);
}

Test(lexer, errors_are_reported_and_skipped)
{
    lexed *l = lex("a $ b \"open\n/* never closed");
    cr_assert_eq(l->diags.errors, 3, "got %d errors", l->diags.errors);
    cr_assert(strstr(l->diags.v[0].msg, "unexpected character '$'"));
    cr_assert(strstr(l->diags.v[1].msg, "unterminated string"));
    cr_assert(strstr(l->diags.v[2].msg, "unterminated comment"));
    done(l);
}

Test(lexer, embedded_nul_is_an_error_not_the_end)
{
    static const char text[] = {'a', 0, 'b'};
    ql_source *src = ql_source_from_text("t.qrl", text, 3);
    ql_arena ar;
    ql_diags d;
    ql_arena_init(&ar);
    ql_diags_init(&d);
    ql_lexer lx;
    ql_lexer_init(&lx, src, &ar, &d);
    ql_token t;
    int idents = 0;
    do {
        ql_lex(&lx, &t);
        idents += t.kind == QL_TOK_IDENT;
    } while (t.kind != QL_TOK_EOF);
    cr_assert_eq(idents, 2);
    cr_assert_eq(d.errors, 1);
    ql_diags_free(&d);
    ql_arena_free(&ar);
    ql_source_free(src);
}
