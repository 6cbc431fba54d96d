#include "match.h"

#include <stdlib.h>
#include <string.h>

typedef struct mctx {
    const qr_graph *g;
    const qr_pattern *p;
    const unsigned char *claimed;
    qr_match m;
    unsigned char bound[QR_MATCH_MAX_VALUES];
    int producer_of[QR_MATCH_MAX_VALUES]; /* value index -> 1 when a pattern node produces it */
} mctx;

static int op_listed(const char *ops, const char *op)
{
    size_t n = strlen(op);
    for (const char *s = ops; *s;) {
        const char *bar = strchr(s, '|');
        size_t len = bar ? (size_t)(bar - s) : strlen(s);
        if (len == n && !strncmp(s, op, n))
            return 1;
        if (!bar)
            break;
        s = bar + 1;
    }
    return 0;
}

static int node_used(const mctx *c, const qr_node *n)
{
    for (int i = 0; i < c->m.nnodes; i++)
        if (c->m.nodes[i] == n)
            return 1;
    return 0;
}

static int bind_value(mctx *c, int idx, qr_value *v)
{
    if (idx < 0 || idx >= QR_MATCH_MAX_VALUES)
        return 0;
    if (c->bound[idx])
        return c->m.values[idx] == v;
    c->bound[idx] = 1;
    c->m.values[idx] = v;
    return 1;
}

static int match_value(mctx *c, int idx, qr_value *v);

/* The inputs of graph node n against one alternative's inputs (a value each, optional or not, or any). */
static int match_inputs(mctx *c, const qr_pat_node *alt, const qr_node *n)
{
    int k = 0;
    for (; k < alt->ninputs; k++) {
        qr_value *in = k < n->n_in ? n->in[k] : NULL;
        const qr_pat_input *pi = &alt->inputs[k];
        if (pi->value < 0)
            continue; /* "_": any input */
        if (!in) {
            if (!pi->optional || !bind_value(c, pi->value, NULL))
                return 0;
        } else if (!match_value(c, pi->value, in)) {
            return 0;
        }
    }
    /* More inputs than the pattern names: not this op's form. */
    for (; k < n->n_in; k++)
        if (n->in[k])
            return 0;
    return 1;
}

/* Binds value idx to v; when a pattern node produces idx, v's producer must match it. */
static int match_value(mctx *c, int idx, qr_value *v)
{
    int was_bound = idx >= 0 && idx < QR_MATCH_MAX_VALUES && c->bound[idx];
    if (!bind_value(c, idx, v))
        return 0;
    if (was_bound || !c->producer_of[idx])
        return 1;
    /* Internal to the match: replaceable only if nothing else reads it (reads by the match's other
     * nodes, as HardSigmoid(c) and Mul(c, s) both read a Conv's c, are counted when it is whole:
     * internal_reads_ok). */
    qr_node *n = v->producer;
    if (!n || n->dead || c->claimed[n->id] || node_used(c, n) || v->is_output ||
        c->m.nnodes >= QR_MATCH_MAX_NODES - 1) /* the root's slot stays free */
        return 0;
    for (int a = 0; a < c->p->nnodes; a++) {
        const qr_pat_node *alt = &c->p->nodes[a];
        if (alt->out != idx || n->domain[0] || !op_listed(alt->ops, n->op) || n->out[0] != v)
            continue;
        mctx save = *c;
        c->m.nodes[c->m.nnodes++] = n;
        if (match_inputs(c, alt, n))
            return 1;
        *c = save;
    }
    return 0;
}

/* Every read of a value the match computes inside (the outputs of its nodes but the root) is by a
 * node of the match: otherwise replacing the match would take a value from another reader. */
static int internal_reads_ok(const mctx *c, const qr_node *root)
{
    for (int i = 0; i < c->m.nnodes; i++) {
        const qr_node *n = c->m.nodes[i];
        if (n == root)
            continue;
        const qr_value *v = n->out[0];
        int inside = 0;
        for (int k = 0; k < c->m.nnodes; k++)
            for (int j = 0; j < c->m.nodes[k]->n_in; j++)
                inside += c->m.nodes[k]->in[j] == v;
        if (qr_graph_use_count(c->g, v) != inside)
            return 0;
    }
    return 1;
}

/* A match may quantize only real numbers: a value its quantize clause makes an activation or an
 * output (a computed weight or bias becomes an activation) must be f32. Integer values are shape
 * and index arithmetic, which the pattern's where clause must leave out (v.dtype == "f32"). */
static int roles_fit(const mctx *c, const qr_node *root, qr_error *e)
{
    const qr_pattern *p = c->p;
    for (int i = 0; i < p->nvalues && i < QR_MATCH_MAX_VALUES; i++) {
        const qr_value *v = c->m.values[i];
        qr_role_kind r = p->values[i].role;
        if (!v || r == QR_ROLE_NONE || r == QR_ROLE_SAME || ((r == QR_ROLE_WEIGHT || r == QR_ROLE_BIAS) && v->is_const))
            continue;
        if (v->t.dtype == QR_UNDEF || qr_dtype_is_float(v->t.dtype)) /* undef: not inferred, not known integer */
            continue;
        qr_errorf(e, "%s: pattern '%s' matches node '%s' (%s), whose %s '%s' is %s: a pattern quantizes real "
                     "numbers only; its where clause can test %s.dtype == \"f32\"",
                  p->loc && p->loc[0] ? p->loc : "?", p->name, root->name, root->op, p->values[i].name, v->name,
                  qr_dtype_name(v->t.dtype), p->values[i].name);
        return 0;
    }
    return 1;
}

int qr_match_pattern(const qr_graph *g, const qr_pattern *p, unsigned char *claimed, qrl_rt *rt, qr_match_fn fn,
                     void *user, qr_error *e)
{
    /* the checker keeps patterns within these (compiler/check_items.c); a module built otherwise is refused */
    int nbound = 0; /* nodes the pattern matches: its distinct outputs (alternatives share one) */
    for (int a = 0; a < p->nnodes; a++) {
        int seen = 0;
        for (int b = 0; b < a && !seen; b++)
            seen = p->nodes[b].out == p->nodes[a].out;
        nbound += !seen;
    }
    if (p->nvalues > QR_MATCH_MAX_VALUES || nbound > QR_MATCH_MAX_NODES || p->nnodes > QRL_PATTERN_MAX_FORMS)
        return qr_errorf(e, "pattern '%s' is too large (%d values, %d nodes, %d op forms; at most %d, %d, %d)",
                         p->name, p->nvalues, nbound, p->nnodes, QR_MATCH_MAX_VALUES, QR_MATCH_MAX_NODES,
                         QRL_PATTERN_MAX_FORMS),
               -1;
    mctx base = {.g = g, .p = p, .claimed = claimed};
    for (int a = 0; a < p->nnodes; a++)
        if (p->nodes[a].out >= 0 && p->nodes[a].out < QR_MATCH_MAX_VALUES)
            base.producer_of[p->nodes[a].out] = 1;
    /* The root: a produced value that no pattern node reads. */
    int root = -1;
    for (int a = p->nnodes - 1; a >= 0 && root < 0; a--) {
        int out = p->nodes[a].out, read = 0;
        for (int b = 0; b < p->nnodes && !read; b++)
            for (int k = 0; k < p->nodes[b].ninputs && !read; k++)
                read = p->nodes[b].inputs[k].value == out;
        if (!read)
            root = out;
    }
    if (root < 0)
        return qr_errorf(e, "pattern '%s' has no root node (its nodes form a cycle)", p->name), -1;
    int accepted = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        qr_node *n = g->nodes[i];
        if (n->dead || claimed[n->id] || n->n_out < 1 || !n->out[0])
            continue;
        for (int a = 0; a < p->nnodes; a++) {
            const qr_pat_node *alt = &p->nodes[a];
            if (alt->out != root || n->domain[0] || !op_listed(alt->ops, n->op))
                continue;
            mctx c = base;
            c.m.pattern = p;
            bind_value(&c, root, n->out[0]);
            if (!match_inputs(&c, alt, n))
                continue;
            c.m.nodes[c.m.nnodes++] = n;
            if (!internal_reads_ok(&c, n))
                continue;
            if (p->where) {
                qrl_array arrays[QRL_MATCH_ARRAYS];
                int narrays = 0;
                qrl_match view = {g, c.m.values, p->nvalues, NULL, arrays, &narrays};
                int ok = (int)p->where(rt, &view);
                if (qr_rt_status(rt, e) != QR_OK || qr_match_status(&view, e) != QR_OK) {
                    qr_error_prefix(e, "%s: pattern '%s' at node '%s'", p->loc, p->name, n->name);
                    return -1;
                }
                if (!ok)
                    continue;
            }
            if (!roles_fit(&c, n, e))
                return -1;
            if (fn(user, &c.m)) {
                for (int k = 0; k < c.m.nnodes; k++)
                    claimed[c.m.nodes[k]->id] = 1;
                accepted++;
                break;
            }
        }
    }
    return accepted;
}
