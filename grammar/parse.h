/* The QRL parser: Lemon grammar qrl.y (generated into build/gen/qrl.c)
 * driven by the re2c lexer. */
#ifndef QP_PARSE_H
#define QP_PARSE_H

#include "../lang/arena.h"
#include "../lang/ast.h"
#include "../lang/diag.h"
#include "../lang/source.h"

/* The language version this parser implements: a file may state the one it needs (`qrl 1`,
 * docs/language.md); a newer one is an error. Raised when the language changes in a way an
 * older qrl cannot read. */
#define QP_LANG_VERSION 1

/* The module's AST (nodes in ar), or NULL when nothing could be parsed.
 * Errors go to d; a non-NULL result may still come with errors (recovery). */
ql_node *qp_parse(const ql_source *src, ql_arena *ar, ql_diags *d);

#endif
