/* The QRL lexer; re2c turns this file into build/gen/lexer.c. See lexer.h. */
#include "lexer.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const tok_desc[] = {
    "end of file",
#define DESC(n, s) s,
    QL_TOKENS(DESC)
#undef DESC
};

const char *ql_tok_desc(ql_tok t)
{
    return t < QL_TOK_COUNT ? tok_desc[t] : "?";
}

ql_tok ql_keyword(const char *s, int len)
{
    static const struct { const char *word; ql_tok tok; } kw[] = {
#define KW(n, s) {s, QL_TOK_##n},
        QL_KEYWORDS(KW)
#undef KW
    };
    /* The spelling is the description without its quotes. */
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if ((int)strlen(kw[i].word) == len + 2 && memcmp(kw[i].word + 1, s, (size_t)len) == 0)
            return kw[i].tok;
    return QL_TOK_IDENT;
}

void ql_lexer_init(ql_lexer *lx, const ql_source *src, ql_arena *arena, ql_diags *diags)
{
    memset(lx, 0, sizeof *lx);
    lx->src = src;
    lx->arena = arena;
    lx->diags = diags;
    lx->cur = (const unsigned char *)src->text;
    lx->lim = lx->cur + src->len;
    lx->last = QL_TOK_SEMI; /* nothing to terminate at the start */
}

static ql_span span_of(const ql_lexer *lx, const unsigned char *a, const unsigned char *b)
{
    const unsigned char *base = (const unsigned char *)lx->src->text;
    ql_span s = {lx->src, (uint32_t)(a - base), (uint32_t)(b - base)};
    return s;
}

/* Whether a statement may end after a token of this kind. */
static int ends_statement(ql_tok t)
{
    switch (t) {
    case QL_TOK_IDENT: case QL_TOK_INT: case QL_TOK_FLOAT: case QL_TOK_STRING:
    case QL_TOK_RP: case QL_TOK_RB: case QL_TOK_RBRACE: case QL_TOK_QUESTION:
    case QL_TOK_RETURN: case QL_TOK_BREAK: case QL_TOK_CONTINUE: case QL_TOK_TRUE: case QL_TOK_FALSE:
    case QL_TOK_SAME: case QL_TOK_REQUANTIZE: case QL_TOK_QTYPE: case QL_TOK_QPARAMS: case QL_TOK_GRAM:
    case QL_TOK_BOOL: case QL_TOK_I4: case QL_TOK_U4: case QL_TOK_I8: case QL_TOK_U8: case QL_TOK_I16: case QL_TOK_U16:
    case QL_TOK_I32: case QL_TOK_I64: case QL_TOK_F32: case QL_TOK_F64:
        return 1;
    default:
        return 0;
    }
}

static int in_brackets(const ql_lexer *lx)
{
    return lx->depth > 0 && lx->nest[lx->depth - 1] != '{';
}

static void open_bracket(ql_lexer *lx, char c, ql_span sp)
{
    if (lx->depth == QL_MAX_NESTING) {
        if (!lx->nesting_reported)
            ql_error(lx->diags, sp, "brackets nested more than %d deep", QL_MAX_NESTING);
        lx->nesting_reported = 1;
        return;
    }
    lx->nest[lx->depth++] = c;
}

static void close_bracket(ql_lexer *lx, char open)
{
    /* Pop to the matching opener; a stray closer leaves the stack alone
     * (the parser reports it). */
    for (int d = lx->depth - 1; d >= 0; d--)
        if (lx->nest[d] == open) {
            lx->depth = d;
            return;
        }
}

/* Decodes a string literal body [a, b) (between the quotes) into the arena. */
static void string_value(ql_lexer *lx, const unsigned char *a, const unsigned char *b, ql_token *t)
{
    char *out = ql_alloc(lx->arena, (size_t)(b - a) + 1);
    if (!out)
        return; /* out of memory, outside a parse (qc_unit_lex_ms): the token keeps no text */
    int n = 0;
    for (const unsigned char *p = a; p < b; p++) {
        if (*p != '\\') {
            out[n++] = (char)*p;
            continue;
        }
        const unsigned char *esc = p++;
        if (p >= b) { /* an unterminated string ending in a backslash */
            ql_error(lx->diags, span_of(lx, esc, esc + 1), "a string cannot end with '\\'");
            break;
        }
        switch (*p) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case 'r': out[n++] = '\r'; break;
        case '\\': out[n++] = '\\'; break;
        case '"': out[n++] = '"'; break;
        default:
            ql_error(lx->diags, span_of(lx, esc, p + 1), "unknown escape sequence '\\%c' in string",
                     *p >= 32 && *p < 127 ? *p : '?');
            break;
        }
    }
    t->s = out;
    t->slen = n;
}

static void number_value(ql_lexer *lx, const unsigned char *a, const unsigned char *b, ql_token *t)
{
    char buf[128];
    size_t n = (size_t)(b - a);
    ql_span sp = span_of(lx, a, b);
    if (n >= sizeof buf) {
        ql_error(lx->diags, sp, "number literal too long");
        return;
    }
    memcpy(buf, a, n);
    buf[n] = 0;
    errno = 0;
    char *end;
    if (t->kind == QL_TOK_FLOAT) {
        t->f = strtod(buf, &end);
        if (errno == ERANGE && (t->f > 1 || t->f < -1))
            ql_error(lx->diags, sp, "float literal out of range");
        return;
    }
    int base = n > 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X') ? 16
             : n > 2 && buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B') ? 2 : 10;
    t->i = strtoull(base == 10 ? buf : buf + 2, &end, base);
    if (errno == ERANGE)
        ql_error(lx->diags, sp, "integer literal does not fit in 64 bits");
}

/* Whether the character before p ends a name (no space between them). */
static int idc_before(const ql_lexer *lx, const unsigned char *p)
{
    return p > (const unsigned char *)lx->src->text && (isalnum(p[-1]) || p[-1] == '_');
}

void ql_lex(ql_lexer *lx, ql_token *t)
{
    const unsigned char *tok;
    memset(t, 0, sizeof *t);
    for (;;) {
        tok = lx->cur;
        if (lx->cur >= lx->lim) {
            /* A statement ends at the end of the file too. */
            t->kind = ends_statement(lx->last) ? QL_TOK_SEMI : QL_TOK_EOF;
            t->span = span_of(lx, lx->lim, lx->lim);
            lx->last = t->kind;
            return;
        }
        const unsigned char *YYMARKER = NULL, *YYCTXMARKER = NULL;
        (void)YYMARKER;
        (void)YYCTXMARKER;
#define TOKEN(k)                                                                                      \
    do {                                                                                              \
        t->kind = QL_TOK_##k;                                                                         \
        goto done;                                                                                    \
    } while (0)
        /*!re2c
        re2c:define:YYCTYPE = "unsigned char";
        re2c:define:YYCURSOR = "lx->cur";
        re2c:define:YYLIMIT = "lx->lim";
        re2c:yyfill:enable = 0;
        re2c:eof = 0;

        dig  = [0-9];
        hex  = [0-9a-fA-F];
        id   = [a-zA-Z_][a-zA-Z0-9_]*;
        exp  = [eE] [+-]? dig+;
        idc  = [a-zA-Z0-9_];

        $ { continue; }

        [ \t\r]+ { continue; }
        "#" [^\n\x00]* { continue; }
        "/*" {
            /* Block comments do not nest; an unterminated one runs to the end. */
            const unsigned char *p = lx->cur;
            while (p + 1 < lx->lim && !(p[0] == '*' && p[1] == '/'))
                p++;
            if (p + 1 >= lx->lim) {
                ql_error(lx->diags, span_of(lx, tok, tok + 2), "unterminated comment");
                lx->cur = lx->lim;
                continue;
            }
            const unsigned char *nl = memchr(lx->cur, '\n', (size_t)(p - lx->cur));
            lx->cur = p + 2;
            if (nl && !in_brackets(lx) && ends_statement(lx->last)) {
                t->kind = QL_TOK_SEMI;
                t->span = span_of(lx, nl, nl + 1);
                lx->last = QL_TOK_SEMI;
                return;
            }
            continue;
        }
        "\n" {
            if (!in_brackets(lx) && ends_statement(lx->last)) {
                t->kind = QL_TOK_SEMI;
                t->span = span_of(lx, tok, lx->cur);
                lx->last = QL_TOK_SEMI;
                return;
            }
            continue;
        }

        id {
            /* After '.', a keyword is a field or method name (h.merge(o.h)). */
            t->kind = lx->last == QL_TOK_DOT ? QL_TOK_IDENT : ql_keyword((const char *)tok, (int)(lx->cur - tok));
            if (t->kind == QL_TOK_IDENT) {
                if (lx->cur - tok > 255) {
                    ql_error(lx->diags, span_of(lx, tok, lx->cur), "identifier longer than 255 characters");
                    continue;
                }
                t->s = ql_strndup(lx->arena, (const char *)tok, (size_t)(lx->cur - tok));
            }
            goto done;
        }

        dig+ | "0" [xX] hex+ | "0" [bB] [01]+ { t->kind = QL_TOK_INT; goto number; }
        dig+ "." dig+ exp? | dig+ exp | "0" [xX] hex+ ("." hex*)? [pP] [+-]? dig+ { t->kind = QL_TOK_FLOAT; goto number; }
        "0" [xXbB] | dig+ "." dig+ [eE] [+-]? | dig+ [eE] [+-]? {
            ql_error(lx->diags, span_of(lx, tok, lx->cur), "malformed number literal");
            while (lx->cur < lx->lim && (isalnum(*lx->cur) || *lx->cur == '_'))
                lx->cur++;
            t->kind = QL_TOK_INT; /* stands in for the number: no follow-on syntax errors */
            goto done;
        }

        ["] ([^"\\\n\x00] | "\\" [^\n\x00])* ["] {
            t->kind = QL_TOK_STRING;
            string_value(lx, tok + 1, lx->cur - 1, t);
            goto done;
        }
        ["] ([^"\\\n\x00] | "\\" [^\n\x00])* "\\"? {
            ql_error(lx->diags, span_of(lx, tok, lx->cur), "unterminated string");
            t->kind = QL_TOK_STRING; /* what there is of it, so the statement still parses */
            string_value(lx, tok + 1, lx->cur, t);
            goto done;
        }

        "(" { open_bracket(lx, '(', span_of(lx, tok, lx->cur)); TOKEN(LP); }
        ")" { close_bracket(lx, '('); TOKEN(RP); }
        "[" { open_bracket(lx, '[', span_of(lx, tok, lx->cur)); TOKEN(LB); }
        "]" { close_bracket(lx, '['); TOKEN(RB); }
        "{" { open_bracket(lx, '{', span_of(lx, tok, lx->cur)); TOKEN(LBRACE); }
        "}" { close_bracket(lx, '{'); TOKEN(RBRACE); }
        ";" { TOKEN(SEMI); }
        "," { TOKEN(COMMA); }
        ":" { TOKEN(COLON); }
        "." { TOKEN(DOT); }
        ".." { TOKEN(DOTDOT); }
        "->" { TOKEN(ARROW); }
        "=>" { TOKEN(FATARROW); }
        "?" { TOKEN(QUESTION); }
        "=" { TOKEN(ASSIGN); }
        "+=" { TOKEN(PLUSEQ); }
        "-=" { TOKEN(MINUSEQ); }
        "*=" { TOKEN(STAREQ); }
        "/=" { TOKEN(SLASHEQ); }
        "+" { TOKEN(PLUS); }
        "-" { TOKEN(MINUS); }
        "*" { TOKEN(STAR); }
        "/" { TOKEN(SLASH); }
        "%" { TOKEN(PERCENT); }
        "<<" { TOKEN(SHL); }
        ">>" { TOKEN(SHR); }
        "&" { TOKEN(AMP); }
        "|" { TOKEN(PIPE); }
        "^" { TOKEN(CARET); }
        "~" { TOKEN(TILDE); }
        "!" { TOKEN(NOT); }
        "==" { TOKEN(EQ); }
        "!=" { TOKEN(NE); }
        "<" { TOKEN(LT); }
        /* k<i8>(: a generic's type arguments, written right after its name
         * and before a call (a valid comparison is never name<name>( ). */
        "<" / id ("," id)* ">(" {
            if (lx->last == QL_TOK_IDENT && idc_before(lx, tok))
                TOKEN(TLT);
            TOKEN(LT);
        }
        "<=" { TOKEN(LE); }
        ">" { TOKEN(GT); }
        ">=" { TOKEN(GE); }

        [\x80-\xff]+ {
            ql_error(lx->diags, span_of(lx, tok, lx->cur), "non-ASCII characters are only allowed in strings and comments");
            continue;
        }
        * {
            unsigned c = tok[0];
            if (c >= 32 && c < 127)
                ql_error(lx->diags, span_of(lx, tok, lx->cur), "unexpected character '%c'", (int)c);
            else
                ql_error(lx->diags, span_of(lx, tok, lx->cur), "unexpected byte 0x%02x", c);
            continue;
        }
        */
    number:
        number_value(lx, tok, lx->cur, t);
        /* "12abc": a number running into a name is a typo, not two tokens. */
        if (lx->cur < lx->lim && (isalnum(*lx->cur) || *lx->cur == '_')) {
            const unsigned char *e = lx->cur;
            while (e < lx->lim && (isalnum(*e) || *e == '_'))
                e++;
            ql_error(lx->diags, span_of(lx, lx->cur, e), "invalid suffix '%.*s' on number literal",
                     (int)(e - lx->cur), (const char *)lx->cur);
            lx->cur = e;
        }
    done:
        t->span = span_of(lx, tok, lx->cur);
        lx->last = t->kind;
        return;
#undef TOKEN
    }
}
