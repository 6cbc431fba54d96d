/* Pattern matching: where in a graph a compiled pattern (qr_pattern, from a
 * recipe module) applies. Nodes are matched from the pattern's root (the
 * node producing the value no other pattern node consumes) backwards
 * through its inputs. A value produced inside a match must have no other
 * consumer and not be a graph output, so that the match can be replaced as
 * a whole; optional inputs (b?) may be missing; `_` matches anything. */
#ifndef QR_MATCH_H
#define QR_MATCH_H

#include "graph.h"
#include "recipe.h"

#define QR_MATCH_MAX_VALUES QRL_PATTERN_MAX_VALUES
#define QR_MATCH_MAX_NODES QRL_PATTERN_MAX_NODES

typedef struct qr_match {
    const qr_pattern *pattern;
    qr_value *values[QR_MATCH_MAX_VALUES]; /* by pattern value index; NULL: a missing optional input */
    qr_node *nodes[QR_MATCH_MAX_NODES];    /* the graph nodes matched, root last */
    int nnodes;
} qr_match;

/* Called for each match; return nonzero to accept it (its nodes are then claimed). */
typedef int (*qr_match_fn)(void *user, const qr_match *m);

/* Finds the matches of p in g, in topological order of their roots, skipping
 * nodes with claimed[node->id] set and claiming the nodes of accepted matches.
 * The where-predicate runs with rt (a trap in it is an error). Returns the
 * number of accepted matches, or -1 with e set. */
int qr_match_pattern(const qr_graph *g, const qr_pattern *p, unsigned char *claimed, qrl_rt *rt, qr_match_fn fn,
                     void *user, qr_error *e);

#endif
