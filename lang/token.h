/* Tokens of the QRL language. One X-macro list gives the enum, the names
 * used in diagnostics, and (in grammar/) the mapping to the parser's codes. */
#ifndef QL_TOKEN_H
#define QL_TOKEN_H

#include <stdint.h>

#include "source.h"

/* X(name, "how a diagnostic shows it") */
#define QL_TOKENS(X)                                                                                  \
    X(IDENT, "identifier") X(INT, "integer literal") X(FLOAT, "float literal") X(STRING, "string")    \
    X(SEMI, "end of statement") X(LP, "'('") X(RP, "')'") X(LB, "'['") X(RB, "']'")                   \
    X(LBRACE, "'{'") X(RBRACE, "'}'") X(COMMA, "','") X(COLON, "':'") X(DOT, "'.'")                  \
    X(DOTDOT, "'..'") X(ARROW, "'->'") X(FATARROW, "'=>'") X(QUESTION, "'?'") X(ASSIGN, "'='")       \
    X(PLUSEQ, "'+='") X(MINUSEQ, "'-='") X(STAREQ, "'*='") X(SLASHEQ, "'/='") X(PLUS, "'+'")        \
    X(MINUS, "'-'") X(STAR, "'*'") X(SLASH, "'/'") X(PERCENT, "'%'") X(SHL, "'<<'") X(SHR, "'>>'")   \
    X(AMP, "'&'") X(PIPE, "'|'") X(CARET, "'^'") X(TILDE, "'~'") X(EQ, "'=='") X(NE, "'!='")        \
    X(LT, "'<'") X(LE, "'<='") X(GT, "'>'") X(GE, "'>='") X(TLT, "'<'")                              \
    QL_KEYWORDS(X)

/* Keywords: X(NAME, "'spelling'"); the spelling is the lower-case name. */
#define QL_KEYWORDS(X)                                                                                \
    X(IMPORT, "'import'") X(CONST, "'const'") X(FN, "'fn'") X(KERNEL, "'kernel'")                    \
    X(CALIBRATOR, "'calibrator'") X(STATE, "'state'") X(OBSERVE, "'observe'") X(MERGE, "'merge'")    \
    X(SOLVE, "'solve'") X(PATTERN, "'pattern'") X(MATCH, "'match'") X(WHERE, "'where'")              \
    X(QUANTIZE, "'quantize'") X(LOWER, "'lower'") X(AFFINE, "'affine'") X(SAME, "'same'")            \
    X(FIXED, "'fixed'") X(TABLE, "'table'") X(REQUANTIZE, "'requantize'") X(RECIPE, "'recipe'")      \
    X(USE, "'use'") X(BY, "'by'") X(WHEN, "'when'") X(LET, "'let'") X(VAR, "'var'") X(IF, "'if'")    \
    X(ELSE, "'else'") X(FOR, "'for'") X(IN, "'in'") X(WHILE, "'while'") X(RETURN, "'return'")        \
    X(BREAK, "'break'") X(CONTINUE, "'continue'") X(TRUE, "'true'") X(FALSE, "'false'")              \
    X(AND, "'and'") X(OR, "'or'") X(NOT, "'not'") X(SAT, "'sat'") X(TENSOR, "'tensor'")              \
    X(QTYPE, "'qtype'") X(QPARAMS, "'qparams'") X(HISTOGRAM, "'histogram'") X(BOOL, "'bool'")        \
    X(I4, "'i4'") X(U4, "'u4'") X(I8, "'i8'") X(U8, "'u8'") X(I16, "'i16'") X(U16, "'u16'") X(I32, "'i32'") X(I64, "'i64'")      \
    X(F32, "'f32'") X(F64, "'f64'") X(ELEMENTWISE, "'elementwise'") X(ALONG, "'along'")    \
    X(CHANNEL, "'channel'") X(TRANSFORM, "'transform'") X(GRAM, "'gram'") X(THEN, "'then'")

typedef enum ql_tok {
    QL_TOK_EOF = 0,
#define QL_TOK_ENUM(n, s) QL_TOK_##n,
    QL_TOKENS(QL_TOK_ENUM)
#undef QL_TOK_ENUM
    QL_TOK_COUNT
} ql_tok;

typedef struct ql_token {
    ql_tok kind;
    ql_span span;
    uint64_t i;    /* INT: the value (as written; the checker fits it to a type) */
    double f;      /* FLOAT */
    const char *s; /* IDENT: the name; STRING: the unescaped text (arena) */
    int slen;      /* STRING: length (may contain no NUL: rejected by the lexer) */
} ql_token;

/* "identifier", "'('", "'calibrator'", ... */
const char *ql_tok_desc(ql_tok t);
/* Keyword for an identifier spelling, or QL_TOK_IDENT. */
ql_tok ql_keyword(const char *s, int len);

#endif
