/* Shared by the grammar actions (qrl.y) and the driver (driver.c). */
#ifndef QP_PARSE_INT_H
#define QP_PARSE_INT_H

#include "parse.h"

#define QP_MAX_DEPTH 256 /* nesting of expressions, of types and of statements (blocks and else-if
                           * chains): keeps every recursive pass's stack bounded */

typedef struct qp_state {
    ql_arena *arena;
    ql_diags *diags;
    const ql_source *src;
    ql_node *root;
    int too_deep; /* reported once */
    int stop;     /* a version this parser does not know: the rest is not parsed */
} qp_state;

/* Node constructors used by the grammar's one-line actions. */
ql_node *qp_node(qp_state *ps, ql_kind k, ql_span sp);
ql_node *qp_tok(qp_state *ps, ql_kind k, const ql_token *t);
ql_node *qp_bin(qp_state *ps, ql_tok op, ql_node *a, ql_node *b);
ql_node *qp_un(qp_state *ps, const ql_token *op, ql_node *a);
ql_node *qp_fix(ql_node *n, ql_node *a, ql_node *b, ql_node *c); /* sets a, b, c (NULL keeps) */
ql_node *qp_add(qp_state *ps, ql_node *list, ql_node *kid);
/* `step then rest` (fallback = u16 then f32 when ...): rest, its d the steps before it in order (step
 * first), its span from step on */
ql_node *qp_step(qp_state *ps, ql_node *step, ql_node *rest);
ql_node *qp_named(qp_state *ps, ql_kind k, const ql_token *name, ql_span sp);
ql_node *qp_nest(qp_state *ps, ql_node *n); /* depth check for calls/indexing */
ql_node *qp_type_nest(qp_state *ps, ql_node *n); /* ... for array and tensor types */
/* E[dims]: a tensor type's declared shape, or an array type (one size) */
ql_node *qp_type_dims(qp_state *ps, ql_node *e, ql_node *dims, ql_span end);
ql_node *qp_block(ql_node *b);                    /* a block's depth: its deepest statement's */
ql_node *qp_stmt_nest(qp_state *ps, ql_node *n); /* depth check for if, for and while */

/* elementwise e in acc along axis -> y { channel c { ... } value } (lang/ast.h's ELEMENTWISE) */
ql_node *qp_elementwise(qp_state *ps, const ql_token *kw, const ql_token *elem, const ql_token *acc, ql_node *axis,
                        const ql_token *y, const ql_token *chan, ql_node *block, ql_node *value, const ql_token *end);

void qp_syntax_error(qp_state *ps, void *parser, int major, const ql_token *t);

#endif
