#include "quantize.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "exec.h"
#include "ops/rint_div_avx512.h"
#include "accwidth.h"
#include "gridconv.h"
#include "intgraph.h"
#include "match.h"
#include "transform.h"
#include "op.h"
#include "options.h"
#include "ops/ops_common.h"
#include "passes.h"
#include "quantize_plan.h"
#include "dist.h"
#include "export_dynamic.h"
#include "mixed.h"
#include "weight_only.h"


/* A calibrator instance for a setting, with its arguments. (The symmetric
 * modifier reaches every calibrator's solve as t.symmetric.) The setting's
 * args function writes one value per argument of the call, which the checker
 * bounds by the calibrator's parameters (at most QRL_MAX_PARAMS). */
static qr_status new_calib(qr_qctx *q, const qr_setting *s, qr_calib **out)
{
    const qr_cal_desc *d = qr_module_calibrator(q->m, s->calibrator);
    if (!d)
        return qr_errorf(q->e, "recipe '%s': %s uses calibrator '%s', which the recipe's module does not define",
                         q->r->name, s->key, s->calibrator);
    double *values = calloc(QRL_MAX_PARAMS, sizeof *values);
    qr_status st = QR_OK;
    int n = s->nargs;
    if (!values)
        st = qr_errorf(q->e, "out of memory");
    else if (n > QRL_MAX_PARAMS)
        st = qr_errorf(q->e, "recipe '%s': %s passes calibrator '%s' more than %d arguments", q->r->name, s->key,
                       s->calibrator, QRL_MAX_PARAMS);
    if (st == QR_OK && s->args && n) {
        qrl_rt rt;
        qr_rt_init(&rt);
        s->args(&rt, values);
        st = qr_rt_status(&rt, q->e);
    }
    if (st == QR_OK)
        st = qr_calib_new(q->m, s->calibrator, n, s->argnames, values, out, q->e);
    free(values);
    return st;
}

const qr_fn_desc *qr_plan_hook(const qrl_module *m, const qr_recipe *r, qr_setting_id id, qr_error *e)
{
    const qr_setting *s = qr_recipe_setting(r, id);
    const char *key = qr_setting_defs[id].key, *name = s ? s->type : key;
    const qr_fn_desc *f = qr_module_fn(m, name);
    char have[256];
    if (f && !f->is_kernel && !strcmp(qr_fn_type_str(f, have, sizeof have), qr_setting_defs[id].choices))
        return f;
    if (f)
        qr_errorf(e, "recipe '%s': the %s hook '%s' is %s, not %s", r->name, key, name, have,
                  qr_setting_defs[id].choices);
    else if (s)
        qr_errorf(e, "recipe '%s': %s = %s names no fn of the module", r->name, key, name);
    else
        qr_errorf(e, "recipe '%s': the module has no fn %s, the policy hook the quantizer calls here (%s): "
                     "import \"qparams.qrl\" (the stdlib's), or name a fn of that type: %s = F",
                  r->name, key, qr_setting_defs[id].choices, key);
    return NULL;
}

qr_status qr_plan_narrow_qtype(const qrl_module *m, const qr_recipe *r, qr_dtype t, int axis, qrl_qtype *out,
                               qr_error *e)
{
    qrl_qtype full = qr_qtype_of(t, 0, axis);
    *out = full;
    out->narrow = 1;
    const qr_fn_desc *f = qr_plan_hook(m, r, QR_SET_NARROW_RANGE, e);
    if (!f)
        return QR_ERR;
    int64_t (*fn)(qrl_rt *, qrl_qtype, _Bool) = (int64_t(*)(qrl_rt *, qrl_qtype, _Bool))f->fn;
    qrl_rt rt;
    qr_rt_init(&rt);
    out->qmin = fn(&rt, *out, 0);
    out->qmax = fn(&rt, *out, 1);
    if (qr_rt_status(&rt, e) != QR_OK)
        return qr_error_prefix(e, "recipe '%s': narrow_range for %s", r->name, qr_dtype_name(t)), QR_ERR;
    if (out->qmin < full.qmin || out->qmax > full.qmax || out->qmin >= out->qmax)
        return qr_errorf(e, "recipe '%s': narrow_range (fn %s) gives %s the range %lld..%lld, not a range within "
                            "its %lld..%lld", r->name, f->name, qr_dtype_name(t), (long long)out->qmin,
                         (long long)out->qmax, (long long)full.qmin, (long long)full.qmax);
    return QR_OK;
}

qrl_qtype qr_plan_qtype(const qr_qctx *q, qr_dtype t, int narrow, int axis)
{
    qrl_qtype qt = qr_qtype_of(t, 0, axis);
    if (narrow && q->narrow[t].qmin < q->narrow[t].qmax) /* read_settings asked the hook for every type */
        qt.narrow = 1, qt.qmin = q->narrow[t].qmin, qt.qmax = q->narrow[t].qmax;
    return qt;
}

/* The policy hooks the plan calls as it goes, asked or found once: what narrow means for each
 * integer type (when a setting is narrow), the bias's type and, when a bias is quantized, its hook
 * (qr_plan_build_qdq). */
static qr_status read_hooks(qr_qctx *q)
{
    const qr_recipe *r = q->r;
    int narrow = 0;
    for (int i = 0; i < r->nsettings; i++)
        narrow |= (r->settings[i].mods & QR_MOD_NARROW) != 0;
    for (int t = 0; t < QR_DTYPE_COUNT; t++)
        q->narrow[t].qmin = 1, q->narrow[t].qmax = 0;
    static const qr_dtype ints[] = {QR_I4, QR_U4, QR_I8, QR_U8, QR_I16, QR_U16};
    for (size_t k = 0; narrow && k < sizeof ints / sizeof *ints; k++) {
        qrl_qtype qt;
        if (qr_plan_narrow_qtype(q->m, r, ints[k], -1, &qt, q->e) != QR_OK)
            return QR_ERR;
        q->narrow[ints[k]].qmin = qt.qmin, q->narrow[ints[k]].qmax = qt.qmax;
    }
    /* samples = F is asked for by name only when set: without it the outputs' sums are pooled */
    q->samples_fn = NULL;
    if (qr_recipe_setting(r, QR_SET_SAMPLES) && !(q->samples_fn = qr_plan_hook(q->m, r, QR_SET_SAMPLES, q->e)))
        return QR_ERR;
    q->calib_samples_fn = NULL;
    if (qr_recipe_setting(r, QR_SET_CALIBRATE_SAMPLES) &&
        !(q->calib_samples_fn = qr_plan_hook(q->m, r, QR_SET_CALIBRATE_SAMPLES, q->e)))
        return QR_ERR;
    const qr_setting *bias = qr_recipe_setting(r, QR_SET_BIAS);
    q->bias_dtype = bias ? qr_dtype_from_name(bias->type) : QR_I32;
    if (q->bias_dtype != QR_I32 && q->bias_dtype != QR_I16)
        return qr_errorf(q->e, "recipe '%s': bias = %s is not supported yet (i32 and i16 are)", r->name, bias->type);
    return QR_OK;
}

static qr_status read_settings(qr_qctx *q)
{
    const qr_recipe *r = q->r;
    q->act = qr_recipe_setting(r, QR_SET_ACTIVATION);
    q->wt = qr_recipe_setting(r, QR_SET_WEIGHT);
    q->in = qr_recipe_setting(r, QR_SET_INPUT);
    q->out = qr_recipe_setting(r, QR_SET_OUTPUT);
    for (int k = 0; k < 2; k++) {
        const qr_setting *s = k ? q->out : q->in;
        if (s && strcmp(s->type, q->act->type))
            return qr_errorf(q->e, "recipe '%s': %s must use the activation type %s, not %s", r->name, s->key,
                             q->act->type, s->type);
    }
    if (!q->act || !q->wt)
        return qr_errorf(q->e, "recipe '%s' must set activation and weight", r->name);
    q->act_dtype = qr_dtype_from_name(q->act->type);
    q->w_dtype = qr_dtype_from_name(q->wt->type);
    if (!qr_dtype_is_int(q->act_dtype) || !qr_dtype_is_int(q->w_dtype))
        return qr_errorf(q->e, "recipe '%s': unsupported integer type", r->name);
    if (q->act->mods & QR_MOD_PER_CHANNEL)
        return qr_errorf(q->e, "recipe '%s': activations are quantized per tensor (per_channel is for weights)",
                         r->name);
    q->act_narrow = (q->act->mods & QR_MOD_NARROW) != 0;
    q->act_sym = (q->act->mods & QR_MOD_SYMMETRIC) != 0;
    q->w_narrow = (q->wt->mods & QR_MOD_NARROW) != 0;
    q->w_per_channel = (q->wt->mods & QR_MOD_PER_CHANNEL) != 0;
    if (q->g->opset < 10)
        return qr_errorf(q->e, "the model's opset %d predates QuantizeLinear (opset 10)", q->g->opset);
    if (q->g->opset < 13)
        q->w_per_channel = 0; /* per-axis DequantizeLinear needs opset 13; the model's ops keep theirs */
    const qr_setting *acc = qr_recipe_setting(r, QR_SET_ACCUMULATE);
    if (read_hooks(q) != QR_OK)
        return QR_ERR;
    q->acc_bits = 32;
    if (acc) { /* iN, N from QR_ACC_MIN_BITS to 32: the checker's rule, again for a module built otherwise */
        char *end = NULL;
        long bits = acc->type[0] == 'i' ? strtol(acc->type + 1, &end, 10) : 0;
        if (!end || *end || bits < QR_ACC_MIN_BITS || bits > QR_ACC_MAX_BITS)
            return qr_errorf(q->e, "recipe '%s': accumulate = %s is not supported yet (i%d to i%d are)", r->name,
                             acc->type, QR_ACC_MIN_BITS, QR_ACC_MAX_BITS);
        q->acc_bits = (int)bits;
    }
    const qr_setting *ovf = qr_recipe_setting(r, QR_SET_OVERFLOW);
    q->acc_saturate = ovf && !strcmp(ovf->type, "saturate");
    q->acc_narrow = q->acc_bits < 32 || q->acc_saturate;
    const qr_setting *num = qr_recipe_setting(r, QR_SET_NUMERICS);
    if (num && !qr_setting_choice(QR_SET_NUMERICS, num->type))
        return qr_errorf(q->e, "recipe '%s': unknown numerics '%s'", r->name, num->type);
    q->numerics = num ? num->type : "onnx"; /* picks the patterns whose kernels implement it */
    const qr_setting *rnd = qr_recipe_setting(r, QR_SET_ROUNDING);
    q->round_away = rnd && !strcmp(rnd->type, "half_away");
    /* a calibrator the module lacks is reported before any work */
    qr_calib *c;
    if (new_calib(q, q->act, &c) != QR_OK)
        return QR_ERR;
    qr_calib_free(c);
    for (int k = 0; k < 2; k++) {
        const qr_setting *s = k ? q->out : q->in;
        if (s && new_calib(q, s, &c) != QR_OK)
            return QR_ERR;
        if (s)
            qr_calib_free(c);
    }
    for (int i = 0; i < r->nsettings; i++) { /* activation for ...: the checker's rules, and its calibrator */
        const qr_setting *s = &r->settings[i];
        if (s->id != QR_SET_ACTIVATION || !s->ntargets)
            continue;
        qr_dtype t = qr_dtype_from_name(s->type);
        if (t != QR_U8 && t != QR_I8 && t != QR_U16 && t != QR_I16)
            return qr_errorf(q->e, "recipe '%s': activation for %s = %s: activations are i8, u8, i16 or u16", r->name,
                             s->targets[0], s->type);
        if (s->mods & QR_MOD_PER_CHANNEL)
            return qr_errorf(q->e, "recipe '%s': activations are quantized per tensor (per_channel is for weights)",
                             r->name);
        if (new_calib(q, s, &c) != QR_OK)
            return QR_ERR;
        qr_calib_free(c);
    }
    for (int i = 0; i < r->nsettings; i++) { /* weight for ...: an integer type and its calibrator */
        const qr_setting *s = &r->settings[i];
        if (s->id != QR_SET_WEIGHT || !s->ntargets)
            continue;
        if (!qr_dtype_is_int(qr_dtype_from_name(s->type)))
            return qr_errorf(q->e, "recipe '%s': weight for %s = %s: weights are integers here", r->name,
                             s->targets[0], s->type);
        if (new_calib(q, s, &c) != QR_OK)
            return QR_ERR;
        qr_calib_free(c);
    }
    if (new_calib(q, q->wt, &c) != QR_OK)
        return QR_ERR;
    qr_calib_free(c);
    return QR_OK;
}

static int recipe_uses(const qr_recipe *r, const char *name)
{
    if (!r->nuse)
        return 1;
    for (int i = 0; i < r->nuse; i++)
        if (!strcmp(r->use[i], name))
            return 1;
    return 0;
}

static int uses_rule(const void *r, const char *op)
{
    return recipe_uses(r, op);
}

/* A message for the user about the plan (a node left in f32 and why). */
__attribute__((format(printf, 2, 3))) static qr_status plan_note(qr_qctx *q, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **v = realloc(q->notes, sizeof *v * (size_t)(q->nnotes + 1));
    if (!v || !(v[q->nnotes] = strdup(buf))) {
        if (v)
            q->notes = v;
        return qr_errorf(q->e, "out of memory");
    }
    q->notes = v;
    q->nnotes++;
    return QR_OK;
}

static void set_role(qr_qctx *q, const qr_value *v, qr_role_kind kind, int axis, int a, int b)
{
    qr_role *r = &q->roles[v->id];
    if (r->kind == QR_ROLE_WEIGHT || r->kind == QR_ROLE_BIAS)
        return; /* a weight stays a weight */
    if (kind == QR_ROLE_DYNAMIC) { /* quantized at run time for this match; another's static qparams stay */
        q->dyn[v->id] = axis == 1 ? DYN_ROW : DYN_TENSOR;
        if (r->kind == QR_ROLE_ACTIVATION || r->kind == QR_ROLE_OUTPUT)
            return;
    }
    *r = (qr_role){kind, axis, a, b};
}

static int file_act_type(qr_dtype t);

static int accept_match(void *user, const qr_match *m)
{
    qr_qctx *q = user;
    const qr_pattern *p = m->pattern;
    /* A loaded QDQ model: a match that would leave a tensor the file quantizes unrounded inside it
     * (a fused Conv + HardSwish over a file that quantizes the Conv's output) is not the file's
     * computation; the smaller patterns take those nodes. */
    for (int k = 0; q->o->from_file && k < m->nnodes - 1; k++) {
        const qr_value *v = m->nodes[k]->out[0];
        if (v && v->q && v->q->n == 1 && file_act_type(v->q->dtype))
            return 0;
    }
    for (int i = 0; i < p->nvalues; i++) {
        const qr_value *v = m->values[i];
        const qr_pat_value *pv = &p->values[i];
        if (!v || pv->role == QR_ROLE_NONE)
            continue;
        int a = pv->a >= 0 && m->values[pv->a] ? m->values[pv->a]->id : -1;
        int b = pv->b >= 0 && m->values[pv->b] ? m->values[pv->b]->id : -1;
        qr_role_kind role = pv->role;
        if ((role == QR_ROLE_WEIGHT || role == QR_ROLE_BIAS) && !v->is_const)
            role = QR_ROLE_ACTIVATION; /* only constants can be stored quantized */
        set_role(q, v, role, pv->axis, a, b);
    }
    q->nodes_pattern += m->nnodes;
    for (int k = 0; k < m->nnodes; k++)
        q->node_kind[m->nodes[k]->id] = 1;
    struct mrec *mv = realloc(q->matches, sizeof *mv * (size_t)(q->nmatches + 1));
    if (mv) {
        q->matches = mv;
        struct mrec *r = &q->matches[q->nmatches++];
        memset(r, 0, sizeof *r);
        r->p = p;
        for (int i = 0; i < p->nvalues && i < QR_MATCH_MAX_VALUES; i++)
            r->values[i] = m->values[i] ? m->values[i]->id : -1;
        for (int k = 0; k < m->nnodes && k < QR_MATCH_MAX_NODES; k++)
            r->nodes[r->nnodes++] = m->nodes[k]->id;
        r->out = m->nodes[m->nnodes - 1]->out[0]->id;
        for (int i = 0; i < p->nvalues && i < QR_MATCH_MAX_VALUES; i++)
            if (m->values[i] && m->values[i]->is_const)
                r->consts[r->nconsts++] = m->values[i]->id;
    }
    return 1;
}

/* The `activation for` setting that types the values of value's producer (by its name, else its
 * op); NULL: the recipe-wide activation setting. */
static const qr_setting *value_setting(const qr_qctx *q, int value)
{
    const qr_node *p = q->g->values[value]->producer;
    return p ? qr_recipe_setting_for(q->r, QR_SET_ACTIVATION, p->op, p->name) : NULL;
}

/* s's type and qtype from setting set (NULL: the recipe's activation setting). */
static void slot_type(qr_qctx *q, qr_slot *s, const qr_setting *set)
{
    s->set = set;
    s->dtype = set ? qr_dtype_from_name(set->type) : q->act_dtype;
    int narrow = set ? (set->mods & QR_MOD_NARROW) != 0 : q->act_narrow;
    s->qt = qr_plan_qtype(q, s->dtype, narrow, -1);
    s->qt.symmetric = set ? (set->mods & QR_MOD_SYMMETRIC) != 0 : q->act_sym;
}

/* A slot copies the qparams of slot `same`, so it has its type too. */
static void slot_same(qr_qctx *q, qr_slot *s, int same)
{
    s->same = same;
    if (same >= 0) {
        s->dtype = q->slots[same].dtype;
        s->qt = q->slots[same].qt;
        s->set = q->slots[same].set;
    }
}

qr_dtype qr_plan_value_dtype(const qr_qctx *q, int value)
{
    return value >= 0 && q->slot_of && q->slot_of[value] >= 0 ? q->slots[q->slot_of[value]].dtype : q->act_dtype;
}

static int add_slot(qr_qctx *q, int value, int kind, int same)
{
    if (q->slot_of[value] >= 0) {
        qr_slot *s = &q->slots[q->slot_of[value]];
        if (kind != SLOT_CALIBRATED) { /* an affine rule decides over a pattern's qr_role */
            s->kind = kind;
            if (kind == SLOT_SAME)
                slot_same(q, s, same);
            else
                s->same = same;
        }
        return q->slot_of[value];
    }
    qr_slot *v = realloc(q->slots, sizeof *v * (size_t)(q->nslots + 1));
    if (!v)
        return -1;
    q->slots = v;
    qr_slot *s = &q->slots[q->nslots];
    memset(s, 0, sizeof *s);
    s->value = value;
    s->kind = kind;
    s->same = same;
    s->lo = INFINITY;
    s->hi = -INFINITY;
    s->step16 = -1;
    s->effect16 = NAN;
    slot_type(q, s, value_setting(q, value));
    if (kind == SLOT_SAME)
        slot_same(q, s, same);
    q->slot_of[value] = q->nslots;
    return q->nslots++;
}

/* The recipe's patterns, higher priority first (stable), matched over the graph: each accepted
 * match claims its nodes and gives its values their roles (accept_match). A pattern's priority is
 * its `priority` clause, else what the pattern_priority hook (stdlib: its number of nodes, so
 * larger patterns fuse first) gives for its number of nodes. */
static qr_status match_patterns(qr_qctx *q)
{
    const qrl_module *m = q->m;
    int *order = calloc((size_t)m->npatterns + 1, sizeof *order);
    int64_t *prio = calloc((size_t)m->npatterns + 1, sizeof *prio);
    if (!order || !prio) {
        free(order), free(prio);
        return qr_errorf(q->e, "out of memory");
    }
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_status st = QR_OK;
    const qr_fn_desc *hook = NULL;
    for (int i = 0; i < m->npatterns && st == QR_OK; i++) {
        const qr_pattern *p = &m->patterns[i];
        order[i] = i;
        prio[i] = p->priority;
        if (p->priority >= 0 || !recipe_uses(q->r, p->name) || (p->numerics[0] && strcmp(p->numerics, q->numerics)))
            continue; /* stated, or not matched */
        if (!hook && !(hook = qr_plan_hook(m, q->r, QR_SET_PATTERN_PRIORITY, q->e))) {
            st = QR_ERR;
            break;
        }
        int64_t n = 0;
        for (int t = 0; t < p->nnodes; t++) /* a node's op alternatives are one node */
            n += t == 0 || p->nodes[t].out != p->nodes[t - 1].out;
        prio[i] = ((int64_t(*)(qrl_rt *, int64_t))hook->fn)(&rt, n);
        if ((st = qr_rt_status(&rt, q->e)) != QR_OK)
            qr_error_prefix(q->e, "recipe '%s': %s for pattern '%s' (%s)", q->r->name, hook->name, p->name, p->loc);
    }
    for (int i = 1; i < m->npatterns; i++) /* stable: higher priority first */
        for (int k = i; k > 0; k--) {
            int a = order[k - 1], b = order[k];
            if (prio[b] <= prio[a])
                break;
            order[k - 1] = b;
            order[k] = a;
        }
    for (int i = 0; i < m->npatterns && st == QR_OK; i++) {
        const qr_pattern *p = &m->patterns[order[i]];
        if (!recipe_uses(q->r, p->name) || (p->numerics[0] && strcmp(p->numerics, q->numerics)))
            continue; /* not used, or kernels of other numerics than the recipe's */
        if (qr_match_pattern(q->g, p, q->claimed, &rt, accept_match, q, q->e) < 0)
            st = QR_ERR;
    }
    free(order);
    free(prio);
    return st;
}

/* Whether every data input of n (constants aside) is a quantized value, at least one; *first: the
 * first one's slot. Integer and bool inputs are not data: they are shapes, indices, axes and
 * conditions (Reshape's shape, Slice's starts, Gather's indices, Where's condition), computed as
 * they are in the f32 graph, whether constant or not. */
static int data_inputs_quantized(const qr_qctx *q, const qr_node *n, int *first)
{
    int ok = 0;
    *first = -1;
    for (int j = 0; j < n->n_in; j++) {
        const qr_value *v = n->in[j];
        if (!v || v->is_const || (v->t.dtype != QR_UNDEF && !qr_dtype_is_float(v->t.dtype)))
            continue;
        if (q->slot_of[v->id] < 0)
            return 0;
        if (*first < 0)
            *first = q->slot_of[v->id];
        ok = 1;
    }
    return ok;
}

/* A fixed affine rule's qparams for n, from the rule's code; *valid 0 (with a note) when they do
 * not fit the activations' type, and n stays f32. */
static qr_status fixed_qparams(qr_qctx *q, const qr_affine *a, const qr_node *n, qrl_qparams *fixed, int *valid)
{
    qr_slot ty;
    slot_type(q, &ty, value_setting(q, n->out[0]->id));
    qrl_qtype qt = ty.qt;
    qr_aff_view av;
    qr_aff_view_init(&av, q->g, n);
    qrl_rt rt;
    qr_rt_init(&rt);
    a->qparams(&rt, &av.mt, &qt, &fixed->scale, &fixed->zero);
    if (qr_rt_status(&rt, q->e) != QR_OK || qr_match_status(&av.mt, q->e) != QR_OK) {
        qr_error_prefix(q->e, "affine rule for %s (%s), node '%s'", a->op, a->loc, n->name);
        return QR_ERR;
    }
    *valid = !(fixed->zero < qt.qmin || fixed->zero > qt.qmax || !(fixed->scale > 0) || !isfinite(fixed->scale));
    if (*valid)
        return QR_OK;
    return plan_note(q, "node '%s' (%s) stays f32: the affine rule at %s gives scale %g and zero point "
                        "%lld, not valid for %s%s (%lld..%lld)",
                     n->name, n->op, a->loc, fixed->scale, (long long)fixed->zero, qr_dtype_name(ty.dtype),
                     qt.narrow ? " narrow" : "", (long long)qt.qmin, (long long)qt.qmax);
}

/* Node n under an affine rule when one applies: its outputs' slots (same as the input, fixed, or
 * calibrated, as the rule's kind says), and the node claimed. */
static qr_status plan_affine(qr_qctx *q, const qr_node *n)
{
    int first;
    if (n->dead || q->claimed[n->id] || n->n_out < 1 || !n->out[0] || n->domain[0] ||
        !data_inputs_quantized(q, n, &first))
        return QR_OK;
    char why[768];
    qr_status st;
    const qr_affine *a = qr_module_affine_for(q->m, q->g, n, uses_rule, q->r, why, sizeof why, q->e, &st);
    if (st != QR_OK)
        return QR_ERR;
    if (!a)
        return why[0] ? plan_note(q, "node '%s' (%s) stays f32: %s", n->name, n->op, why) : QR_OK;
    if (a->kind == QR_AFF_SAME && a->elem && n->n_in < a->ninputs)
        return QR_OK;
    /* the runtime's affine ops take and give one integer type (an `activation for` setting may
     * type their inputs or output otherwise) */
    qr_slot ty;
    slot_type(q, &ty, value_setting(q, n->out[0]->id));
    qr_dtype want = a->kind == QR_AFF_SAME ? q->slots[first].dtype : ty.dtype;
    for (int j = 0; j < n->n_in; j++) {
        const qr_value *v = n->in[j];
        if (!v || v->is_const || q->slot_of[v->id] < 0 || q->slots[q->slot_of[v->id]].dtype == want)
            continue;
        return plan_note(q, "node '%s' (%s) stays f32: its input '%s' is %s and the rule at %s would make it %s",
                         n->name, n->op, v->name, qr_dtype_name(q->slots[q->slot_of[v->id]].dtype), a->loc,
                         qr_dtype_name(want));
    }
    qrl_qparams fixed = {1, 0};
    int valid = 1;
    if (a->kind == 1 && fixed_qparams(q, a, n, &fixed, &valid) != QR_OK)
        return QR_ERR;
    if (!valid)
        return QR_OK;
    int out = n->out[0]->id;
    int s = a->kind == QR_AFF_SAME ? add_slot(q, out, SLOT_SAME, first)
            : a->kind == QR_AFF_FIXED ? add_slot(q, out, SLOT_FIXED, -1)
                           : add_slot(q, out, SLOT_CALIBRATED, -1);
    if (s < 0)
        return qr_errorf(q->e, "out of memory");
    if (a->kind == QR_AFF_FIXED) {
        q->slots[s].qp = fixed;
        q->slots[s].solved = 1;
    }
    for (int j = 1; a->kind == QR_AFF_SAME && !a->elem && !a->table && j < n->n_out; j++) /* Split: every output */
        if (n->out[j] && add_slot(q, n->out[j]->id, SLOT_SAME, first) < 0)
            return qr_errorf(q->e, "out of memory");
    q->aff_of[n->id] = a;
    q->node_kind[n->id] = 2;
    q->claimed[n->id] = 1;
    q->nodes_affine++;
    return QR_OK;
}

/* The plan: patterns first, a calibrated slot for every activation and output they quantize, then
 * affine rules, node by node in order, for nodes whose data inputs are all quantized by then. */
static qr_status plan(qr_qctx *q)
{
    const qr_graph *g = q->g;
    if (match_patterns(q) != QR_OK)
        return QR_ERR;
    for (int i = 0; i < g->n_values; i++) {
        qr_role_kind rk = q->roles[i].kind;
        if (rk == QR_ROLE_ACTIVATION || rk == QR_ROLE_OUTPUT)
            if (add_slot(q, i, SLOT_CALIBRATED, -1) < 0)
                return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (plan_affine(q, g->nodes[i]) != QR_OK)
            return QR_ERR;
    for (int i = 0; i < g->n_values; i++) /* what DynamicQuantizeLinear and its per-row form compute */
        if (q->dyn[i] && (q->act_dtype != QR_U8 || q->act_narrow))
            return qr_errorf(q->e, "recipe '%s': value '%s' is quantized at run time (role dynamic), which is u8 "
                                   "over its range with 0 in it, as DynamicQuantizeLinear; the recipe's activations "
                                   "are %s%s", q->r->name, g->values[i]->name, qr_dtype_name(q->act_dtype),
                             q->act_narrow ? " narrow" : "");
    return QR_OK;
}

/* Whether value v is reached from the graph inputs through f32 nodes only:
 * one of the model's first quantized tensors (the recipe's `input` setting). */
static int first_quantized(const qr_qctx *q, const qr_value *v, unsigned char *seen)
{
    const qr_node *p = v->producer;
    if (!p)
        return 1;
    if (seen[p->id])
        return 1;
    seen[p->id] = 1;
    for (int j = 0; j < p->n_in; j++) {
        const qr_value *in = p->in[j];
        if (!in || in->is_const)
            continue;
        if (q->slot_of[in->id] >= 0 || !first_quantized(q, in, seen))
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ weights */

/* The weight setting of constant `value`: the `weight for` that names a node reading it (by its
 * name, else its op), else the recipe's. Readers that `weight for` gives different settings are an
 * error (one constant holds one set of integers). */
static qr_status weight_setting(const qr_qctx *q, const qr_value *v, const qr_setting **out)
{
    const qr_node *first = NULL;
    *out = q->wt;
    for (int i = 0; i < q->g->n_nodes; i++) {
        const qr_node *n = q->g->nodes[i];
        int reads = 0;
        for (int k = 0; k < n->n_in && !reads; k++)
            reads = n->in[k] == v;
        if (!reads)
            continue;
        const qr_setting *s = qr_recipe_setting_for(q->r, QR_SET_WEIGHT, n->op, n->name);
        s = s ? s : q->wt;
        if (first && s != *out)
            return qr_errorf(q->e, "weight '%s' is read by '%s' and '%s', which the recipe's weight settings give "
                                   "different types (a constant holds one set of integers)",
                             v->name, first->name ? first->name : first->op, n->name ? n->name : n->op);
        first = first ? first : n;
        *out = s;
    }
    return QR_OK;
}

/* Weight value id `value` (an f32 constant with a weight role) quantized as setting ws says into *w
 * (its scale and zero point arrays allocated): its axis the role's when ws is per channel. */
qr_status qr_plan_quantize_weight(qr_qctx *q, int value, const qr_setting *ws, qr_wquant *w)
{
    const qr_role *r = &q->roles[value];
    const qr_value *v = q->g->values[value];
    int per_channel = ws == q->wt ? q->w_per_channel : (ws->mods & QR_MOD_PER_CHANNEL) && q->g->opset >= 13;
    int axis = per_channel && r->axis >= 0 && r->axis < v->t.ndim ? r->axis : -1;
    int64_t n = qr_tensor_numel(&v->t);
    int nch = axis < 0 ? 1 : (int)v->t.dims[axis];
    int64_t inner = 1;
    for (int d = axis + 1; axis >= 0 && d < v->t.ndim; d++)
        inner *= v->t.dims[d];
    *w = (qr_wquant){.value = value, .axis = axis, .nch = nch, .dtype = qr_dtype_from_name(ws->type),
                     .narrow = (ws->mods & QR_MOD_NARROW) != 0};
    w->scale = calloc((size_t)nch, sizeof *w->scale);
    w->zero = calloc((size_t)nch, sizeof *w->zero);
    /* the weight reordered channel by channel in one pass (channel c holds n / nch values) */
    float *tmp = malloc(sizeof(float) * (size_t)(n + 1));
    if (!w->scale || !w->zero || !tmp) {
        free(tmp);
        return qr_errorf(q->e, "out of memory");
    }
    const float *data = v->t.data;
    int64_t per = n / nch, outer = inner * nch > 0 ? n / (inner * nch) : 0;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(data[j])) {
            free(tmp);
            return qr_errorf(q->e, "weight '%s' holds %s at element %lld: it cannot be quantized", v->name,
                             isnan(data[j]) ? "NaN" : "an infinity", (long long)j);
        }
    if (axis < 0)
        memcpy(tmp, data, sizeof *tmp * (size_t)n);
    else /* element (o, c, k) to channel c's block, a run of inner at a time (no division per element) */
        for (int64_t o = 0; o < outer; o++)
            for (int64_t c = 0; c < nch; c++)
                memcpy(tmp + c * per + o * inner, data + (o * nch + c) * inner, sizeof *tmp * (size_t)inner);
    qrl_qtype qt = qr_plan_qtype(q, w->dtype, w->narrow, axis);
    qt.symmetric = (ws->mods & QR_MOD_SYMMETRIC) != 0;
    for (int c = 0; c < nch; c++) {
        qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {per}, .data = tmp + (size_t)c * (size_t)per};
        qr_calib *cal;
        qrl_qparams qp;
        if (new_calib(q, ws, &cal) != QR_OK) {
            free(tmp);
            return QR_ERR;
        }
        qr_status st = qr_calib_observe(cal, &t, q->e);
        if (st == QR_OK)
            st = qr_calib_solve(cal, &qt, &qp, q->e);
        qr_calib_free(cal);
        if (st == QR_OK && (!isfinite(qp.scale) || !(qp.scale > 0)))
            st = qr_errorf(q->e, "the weight calibrator gives scale %g", qp.scale);
        if (st != QR_OK) {
            free(tmp);
            qr_error_prefix(q->e, "weight '%s'%s", v->name, nch > 1 ? " (a channel)" : "");
            return QR_ERR;
        }
        w->scale[c] = (float)qp.scale;
        w->zero[c] = (int32_t)qp.zero;
    }
    free(tmp);
    return QR_OK;
}

static qr_status quantize_weights(qr_qctx *q)
{
    const qr_graph *g = q->g;
    for (int i = 0; i < g->n_values; i++) {
        const qr_role *r = &q->roles[i];
        const qr_value *v = g->values[i];
        if (r->kind != QR_ROLE_WEIGHT || !v->is_const || v->t.dtype != QR_F32)
            continue;
        const qr_qinfo *fq = v->q;
        if (q->o->from_file && (!fq || fq->dtype == QR_I32 || (fq->n > 1 && (fq->axis < 0 || fq->axis >= v->t.ndim))))
            continue; /* the file keeps this weight in f32: so does its layer */
        const qr_setting *ws = q->wt;
        if (!q->o->from_file && weight_setting(q, v, &ws) != QR_OK)
            return QR_ERR;
        qr_wquant *wv = realloc(q->w, sizeof *wv * (size_t)(q->nw + 1));
        if (!wv)
            return qr_errorf(q->e, "out of memory");
        q->w = wv;
        qr_wquant *w = &q->w[q->nw++];
        if (q->o->from_file) { /* the file's integers: its scales, zero points and axis */
            const qr_qinfo *qi = fq;
            *w = (qr_wquant){.value = i, .axis = qi->n > 1 ? qi->axis : -1, .nch = qi->n, .dtype = qi->dtype,
                             .narrow = q->w_narrow};
            w->scale = malloc(sizeof *w->scale * (size_t)qi->n);
            w->zero = malloc(sizeof *w->zero * (size_t)qi->n);
            if (!w->scale || !w->zero)
                return qr_errorf(q->e, "out of memory");
            memcpy(w->scale, qi->scale, sizeof *w->scale * (size_t)qi->n);
            memcpy(w->zero, qi->zero, sizeof *w->zero * (size_t)qi->n);
            continue;
        }
        if (qr_plan_quantize_weight(q, i, ws, w) != QR_OK)
            return QR_ERR;
    }
    for (int i = 0; i < g->n_values; i++) {
        const qr_role *r = &q->roles[i];
        if (r->kind != QR_ROLE_BIAS || !g->values[i]->is_const || r->a < 0 || r->b < 0)
            continue;
        qr_bquant *bv = realloc(q->bias, sizeof *bv * (size_t)(q->nbias + 1));
        if (!bv)
            return qr_errorf(q->e, "out of memory");
        q->bias = bv;
        q->bias[q->nbias++] = (qr_bquant){i, r->a, r->b};
    }
    return QR_OK;
}

void qr_plan_count_weight(qr_quantized *res, qr_dtype t, int64_t n)
{
    res->weights++;
    res->weights_4bit += qr_dtype_is_packed(t);
    res->weight_bytes += (int64_t)qr_dtype_bytes(t, n);
    res->weight_f32_bytes += 4 * n;
}

const qr_wquant *qr_plan_weight(const qr_qctx *q, int value)
{
    for (int i = 0; i < q->nw; i++)
        if (q->w[i].value == value)
            return &q->w[i];
    return NULL;
}

int64_t qr_plan_round(float x, float scale, int64_t zero, int64_t qmin, int64_t qmax)
{
    float r = nearbyintf(x / scale);
    double v = (double)r + (double)zero;
    return v < qmin ? qmin : v > qmax ? qmax : (int64_t)v;
}

int64_t qr_plan_round_const(const qr_qctx *q, float x, float scale, int64_t zero, int64_t qmin, int64_t qmax)
{
    if (!q->round_away)
        return qr_plan_round(x, scale, zero, qmin, qmax);
    double v = (double)roundf(x / scale) + (double)zero;
    return v < qmin ? qmin : v > qmax ? qmax : (int64_t)v;
}

/* ONNX QuantizeLinear then DequantizeLinear: float division, round half to even, saturate (NaN
 * as 0, as QuantizeLinear takes it). In float and branch-free, so it vectorizes: rintf of a float
 * is qr_plan_round's nearbyintf, and adding the zero point is exact wherever the clamp does not
 * decide (the integers involved are far below 2^24). The portable path (quant=portable, or a CPU
 * without AVX-512). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void fake_quant_portable(
    const float *x, float *y, int64_t n, float scale, int64_t zero, int64_t qmin, int64_t qmax)
{
    const float z = (float)zero, lo = (float)qmin, hi = (float)qmax;
    for (int64_t i = 0; i < n; i++) {
        float q = x[i] / scale;
        q = q == q ? q : 0.0f;
        q = __builtin_rintf(q) + z;
        q = q <= lo ? lo : q >= hi ? hi : q;
        y[i] = (q - z) * scale;
    }
}

/* One vector of fake_quant_avx512. */
__attribute__((target("avx512f"))) static inline __m512 fake_quant_zmm(const qr_rint_div *rd, __m512 xv, __m512 zv,
                                                                       __m512 lov, __m512 hiv)
{
    __m512 q = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(qr_rint_div_zmm(rd, xv), zv), lov), hiv);
    return _mm512_mul_ps(_mm512_sub_ps(q, zv), rd->s);
}

/* Streams of whole vectors fake_quant_avx512 reads at once: calibration's activations come from
 * L3 or memory (MobileNetV2's are up to 43 MB at batch 9), and one stream leaves too few misses in
 * flight (qr_f32_range reads in four for the same reason). Eight took MobileNetV2's 48 samples
 * from 125 to 82 ms on the Intel Xeon (docs/quantizer.md, stop 50); four 111, sixteen 88. */
#define FQ_STREAMS 8

/* The same 16 at a time, rint(x / scale) as QuantizeLinear's AVX-512 loop takes it
 * (ops/rint_div_avx512.h: a product where it gives the division's bits). The rest is the portable
 * loop's operations in the same order (vmaxps/vminps clamp as its compares do, no NaN being left
 * and q never -0), so the same bits. The division was most of calibration's SimQuant on data in
 * cache (its 10 or so cycles a vector). Each element is its own: the whole vectors go in
 * FQ_STREAMS equal parts side by side, those left over after them, then the tail masked. */
__attribute__((target("avx512f"))) static void fake_quant_avx512(const float *x, float *y, int64_t n, float s,
                                                                 float z, float lo, float hi)
{
    const qr_rint_div rd = qr_rint_div_init(s);
    const __m512 zv = _mm512_set1_ps(z), lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
    int64_t nv = n / 16, per = nv / FQ_STREAMS;
    for (int64_t b = 0; b < per; b++) {
        __m512 v[FQ_STREAMS];
        for (int k = 0; k < FQ_STREAMS; k++) /* the loads first, all in flight together */
            v[k] = _mm512_loadu_ps(x + (k * per + b) * 16);
        for (int k = 0; k < FQ_STREAMS; k++)
            _mm512_storeu_ps(y + (k * per + b) * 16, fake_quant_zmm(&rd, v[k], zv, lov, hiv));
    }
    for (int64_t i = FQ_STREAMS * per * 16; i + 16 <= n; i += 16) /* plain loads and stores: masked ones are slow
                                                                      on Zen 5 */
        _mm512_storeu_ps(y + i, fake_quant_zmm(&rd, _mm512_loadu_ps(x + i), zv, lov, hiv));
    if (n % 16) {
        __mmask16 m = (__mmask16)((1u << (n % 16)) - 1);
        int64_t i = nv * 16;
        _mm512_mask_storeu_ps(y + i, m, fake_quant_zmm(&rd, _mm512_maskz_loadu_ps(m, x + i), zv, lov, hiv));
    }
}

void qr_plan_fake_quant(const float *x, float *y, int64_t n, float scale, int64_t zero, int64_t qmin, int64_t qmax)
{
    if (n >= 16 && !qr_options_get()->quant_portable && __builtin_cpu_supports("avx512f"))
        fake_quant_avx512(x, y, n, scale, (float)zero, (float)qmin, (float)qmax);
    else
        fake_quant_portable(x, y, n, scale, zero, qmin, qmax);
}

/* ------------------------------------------------------- the SimQuant op */

static qr_status simq_infer(qr_kctx *k)
{
    if (!k->in[0] || k->in[0]->dtype != QR_F32)
        return QR_KERR(k, "SimQuant takes an f32 tensor");
    qr_same_as(k->out[0], k->in[0]);
    if (k->n_out > 1 && k->out[1]) /* the scale this batch used, for the narrow accumulators (QrlAccSim) */
        return qr_set_out(k, 1, QR_F32, 0, NULL);
    return QR_OK;
}

/* One calibration worker: its own executor runs its batches, and its SimQuant nodes observe into
 * its own states (cal, one per calibrated slot) and ranges; calibrate() merges the workers'. */
typedef struct calib_worker {
    qr_qctx *q;
    qr_calib **cal; /* by slot: this worker's state (calibrated slots only) */
    double *lo, *hi; /* by slot: the range this worker saw */
    double *dlo, *dhi; /* by value id: the range of each dynamic value in the f32 pass (NULL: not observed) */
    int64_t first, last; /* its batches: [first, last) */
    int64_t at, count;   /* the batch running: its first sample's index among the calibration samples, its samples */
    qr_error err;
    qr_status st;
} calib_worker;

static qr_status simq_run(qr_kctx *k)
{
    calib_worker *w = k->user;
    if (!w)
        return QR_KERR(k, "SimQuant runs only inside the quantizer");
    qr_qctx *q = w->q;
    int si = (int)qr_attr_i(k->node, "slot", -1);
    if (si < 0 || si >= q->nslots)
        return QR_KERR(k, "SimQuant slot %d out of range", si);
    const qr_slot *s = &q->slots[si];
    const qr_tensor *x = k->in[0];
    int64_t n = qr_tensor_numel(x);
    const float *xd = x->data;
    float lo, hi;
    /* x made by a Clip with finite bounds: they let the range stop reading once both are met (most
     * of MobileNetV2's activations meet 0 and 6 within their first few percent), the same range. A
     * Relu's top, +inf, is never met: its output is read whole, as before. */
    qr_act a;
    const qr_node *p = k->node->in[0] ? k->node->in[0]->producer : NULL;
    if (p && qr_node_act(p, &a) && !a.relu && isfinite(a.lo) && isfinite(a.hi) && a.lo <= a.hi)
        qr_f32_range_within(xd, n, a.lo, a.hi, &lo, &hi);
    else
        qr_f32_range(xd, n, &lo, &hi);
    if (lo < w->lo[si])
        w->lo[si] = lo;
    if (hi > w->hi[si])
        w->hi[si] = hi;
    qrl_qparams qp = s->qp;
    /* calibrate = float: every calibrator observes the values with no activation rounded upstream, as
     * PyTorch's observers do, so a range still holds when the fallback sends the layers upstream
     * back to f32 (one rounded with a tight range upstream would have shrunk what it saw) */
    const qr_setting *cs = qr_recipe_setting(q->r, QR_SET_CALIBRATE);
    if (cs && cs->type && !strcmp(cs->type, "float")) {
        qr_status st = QR_OK;
        if (s->kind == SLOT_CALIBRATED) { /* fresh, then merged, as below: the same states at every W */
            qr_calib *b = NULL;
            st = qr_calib_fresh(w->cal[si], &b, k->err);
            if (st == QR_OK)
                st = qr_calib_observe_known(b, x, w->at, w->count, lo, hi, k->err);
            if (st == QR_OK)
                st = qr_calib_merge(w->cal[si], b, k->err);
            qr_calib_free(b);
        }
        if (k->n_out > 1 && k->out[1])
            *(float *)k->out[1]->data = 0; /* unrounded */
        if (st == QR_OK && k->out[0]->data != xd)
            memcpy(k->out[0]->data, xd, sizeof *xd * (size_t)n);
        return st;
    }
    if (s->kind == SLOT_CALIBRATED) {
        /* The batch into a fresh state, which chooses how this batch passes on quantized (what
         * every tensor sees downstream depends on its batch only, not on which worker ran it nor
         * on what that worker saw before) and is then merged into the worker's state: one
         * observe of the data per batch (a merge of minmax or histogram states is cheap). */
        qr_calib *b = NULL;
        qr_status st = qr_calib_fresh(w->cal[si], &b, k->err);
        if (st == QR_OK)
            st = qr_calib_observe_known(b, x, w->at, w->count, lo, hi, k->err);
        if (st == QR_OK)
            st = qr_calib_solve(b, &s->qt, &qp, k->err);
        if (st == QR_OK)
            st = qr_calib_merge(w->cal[si], b, k->err);
        qr_calib_free(b);
        if (st != QR_OK)
            return st;
    }
    if (k->n_out > 1 && k->out[1]) /* 0: unrounded (below) */
        *(float *)k->out[1]->data = qp.scale > 0 && isfinite((float)qp.scale) ? (float)qp.scale : 0;
    if (!(qp.scale > 0) || !isfinite(qp.scale) || !isfinite((float)qp.scale) || (float)qp.scale == 0) {
        /* a range no scale holds (values that overflow to infinity, say): this batch passes on
         * unrounded, and the final solve sends the tensor back to f32 with a note */
        if (s->kind != SLOT_CALIBRATED)
            return QR_KERR(k, "calibration chose scale %g", qp.scale);
        memcpy(k->out[0]->data, xd, sizeof *xd * (size_t)n);
        return QR_OK;
    }
    qr_plan_fake_quant(xd, k->out[0]->data, n, (float)qp.scale, qp.zero, s->qt.qmin, s->qt.qmax);
    return QR_OK;
}

const qr_op_def qr_ops_quantizer[] = {
    /* in place: it reads all of x (range, observe) before writing y[i] from x[i]; it writes every
     * element, so the executor need not zero y */
    {"SimQuant", "qrl", 1, 1, 1, 2, "slot:i", simq_infer, simq_run, 1, .writes_all = qr_op_writes_all},
    {"QrlAccSim", "qrl", 2, 5, 1, 1, QR_ACCSIM_ATTRS, qr_accsim_infer, qr_accsim_run, 0,
     .ins = "x:f w:f b?:f x_scale:f w_scale:f", .writes_all = qr_op_writes_all},
    {"QrlGridConv", "qrl", 2, 7, 1, 1, QR_GRIDCONV_ATTRS, qr_gridconv_infer, qr_gridconv_run, 0,
     .ins = "x:f w:q w_scale:f w_zero?:q x_scale:f x_zero?:q b?:f", .macs = qr_gridconv_macs,
     .writes_all = qr_op_writes_all, .samples = qr_op_samples_window},
    {0},
};

/* ----------------------------------------------------- graph surgery */

qr_node *qr_plan_new_node(qr_graph *g, const char *op, const char *domain, const char *name, int n_in, int n_out)
{
    qr_node *n = qr_graph_add_node(g, op, name, n_in, n_out);
    if (!n || !(n->domain = qr_arena_strdup(&g->arena, domain)))
        return NULL; /* out of memory: the graph marked */
    n->def = qr_op_find_in(qr_ops_quantizer, domain, op);
    if (!n->def)
        n->def = qr_op_find_in(qr_ops_intgraph, domain, op);
    if (!n->def)
        n->def = qr_op_find(domain, op);
    n->opset = domain[0] ? 1 : g->opset;
    return n;
}

/* Makes v's producer write a new value and returns it; v is then free to be
 * produced by an inserted node (consumers and the name stay on v). For a
 * graph input, the new value replaces v in every consumer instead. */
static qr_value *split_value(qr_graph *g, qr_value *v, const char *suffix, int *input_case)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", v->name, suffix);
    qr_value *w = qr_graph_new_value(g, name);
    if (!w)
        return NULL;
    w->t = v->t;
    w->t.data = NULL;
    if (v->producer) {
        qr_node *p = v->producer;
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] == v)
                p->out[j] = w;
        w->producer = p;
        v->producer = NULL;
        *input_case = 0;
    } else {
        qr_graph_replace_uses(g, v, w);
        *input_case = 1;
    }
    return w;
}

/* v (produced by node or input) -> [nodes] -> v: inserts SimQuant(slot). scale: NULL, or where
 * its second output goes, the scale each batch used (for narrow accumulators). */
static void insert_simquant(qr_graph *g, qr_value *v, int si, qr_value **scale)
{
    int input_case;
    qr_value *w = split_value(g, v, "_f32", &input_case);
    char name[512];
    snprintf(name, sizeof name, "simquant_%s", v->name);
    qr_node *n = w ? qr_plan_new_node(g, "SimQuant", "qrl", name, 1, scale ? 2 : 1) : NULL;
    if (!n)
        return; /* out of memory: the graph marked, build_sim reports it */
    qr_node_add_attr_i(g, n, "slot", si);
    if (scale) {
        snprintf(name, sizeof name, "%s_sim_scale", v->name);
        if ((*scale = qr_graph_new_value(g, name)))
            (*scale)->producer = n;
        n->out[1] = *scale;
    }
    if (input_case) { /* SimQuant(v) -> w; consumers already read w */
        n->in[0] = v;
        n->out[0] = w;
        w->producer = n;
    } else { /* producer -> w -> SimQuant -> v */
        n->in[0] = w;
        n->out[0] = v;
        v->producer = n;
    }
}

qr_value *qr_plan_const(qr_graph *g, const char *name, const qr_tensor *t)
{
    qr_value *v = qr_graph_new_value(g, name);
    qr_value_set_const(g, v, t);
    return v && v->is_const ? v : NULL;
}

/* The QDQ pair on v: Q(v_f32) -> v_quantized -> DQ -> v; returns v_quantized. */
static qr_value *insert_qdq(qr_graph *g, qr_value *v, const qr_slot *s, qr_dtype dt)
{
    int input_case;
    qr_value *w = split_value(g, v, "_f32", &input_case);
    if (!w)
        return NULL;
    qr_value *src = input_case ? v : w, *dst = input_case ? w : v;
    char name[512];
    float sc = (float)s->qp.scale;
    snprintf(name, sizeof name, "%s_scale", v->name);
    qr_tensor ts = {.dtype = QR_F32, .ndim = 0, .data = &sc};
    qr_value *scale = qr_plan_const(g, name, &ts);
    unsigned char zb[8] = {0};
    qr_set_i64(zb, dt, 0, s->qp.zero);
    qr_tensor tz = {.dtype = dt, .ndim = 0, .data = zb};
    snprintf(name, sizeof name, "%s_zero_point", v->name);
    qr_value *zero = qr_plan_const(g, name, &tz);
    snprintf(name, sizeof name, "%s_quantized", v->name);
    qr_value *qv = qr_graph_new_value(g, name);
    snprintf(name, sizeof name, "quantize_%s", v->name);
    qr_node *qn = qr_plan_new_node(g, "QuantizeLinear", "", name, 3, 1);
    snprintf(name, sizeof name, "dequantize_%s", v->name);
    qr_node *dn = qr_plan_new_node(g, "DequantizeLinear", "", name, 3, 1);
    if (!scale || !zero || !qv || !qn || !dn)
        return NULL;
    qn->in[0] = src;
    qn->in[1] = scale;
    qn->in[2] = zero;
    qn->out[0] = qv;
    qv->producer = qn;
    dn->in[0] = qv;
    dn->in[1] = scale;
    dn->in[2] = zero;
    dn->out[0] = dst;
    dst->producer = dn;
    return qv;
}

/* A constant weight or bias replaced by integers and a DequantizeLinear; returns the integers. */
static qr_value *attach_dq(qr_graph *g, qr_value *v, qr_value *qv, const float *scales, const void *zeros,
                           qr_dtype zt, int n, int axis);

static qr_value *insert_dq_const(qr_graph *g, qr_value *v, const qr_tensor *ints, const float *scales, const void *zeros,
                            qr_dtype zt, int n, int axis)
{
    char name[512];
    snprintf(name, sizeof name, "%s_quantized", v->name);
    return attach_dq(g, v, qr_plan_const(g, name, ints), scales, zeros, zt, n, axis);
}

/* The same with integers qv already made (a constant of g named v's name + "_quantized"). */
static qr_value *attach_dq(qr_graph *g, qr_value *v, qr_value *qv, const float *scales, const void *zeros,
                           qr_dtype zt, int n, int axis)
{
    char name[512];
    qr_tensor ts = {.dtype = QR_F32, .ndim = axis >= 0 ? 1 : 0, .dims = {n}, .data = (void *)scales};
    snprintf(name, sizeof name, "%s_scale", v->name);
    qr_value *scale = qr_plan_const(g, name, &ts);
    qr_tensor tz = {.dtype = zt, .ndim = axis >= 0 ? 1 : 0, .dims = {n}, .data = (void *)zeros};
    snprintf(name, sizeof name, "%s_zero_point", v->name);
    qr_value *zero = qr_plan_const(g, name, &tz);
    snprintf(name, sizeof name, "dequantize_%s", v->name);
    qr_node *dn = qr_plan_new_node(g, "DequantizeLinear", "", name, 3, 1);
    if (!qv || !scale || !zero || !dn)
        return NULL; /* out of memory: the graph marked, qr_plan_build_qdq reports it */
    /* v becomes the DequantizeLinear output: consumers and name unchanged */
    v->is_const = 0;
    v->t.data = NULL;
    dn->in[0] = qv;
    dn->in[1] = scale;
    dn->in[2] = zero;
    dn->out[0] = v;
    v->producer = dn;
    if (axis >= 0)
        qr_node_add_attr_i(g, dn, "axis", axis);
    return qv;
}

/* ------------------------------------------------------ calibration */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

double qr_plan_now_ms(void)
{
    return now_ms();
}

/* The process's CPU time (every thread's), ms. */
static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

void qr_plan_phase_start(qr_qctx *q)
{
    q->phase_ms = now_ms();
    q->phase_cpu_ms = cpu_ms();
    q->phase_runs = qr_exec_node_samples();
    q->phase_runs_validate = qr_exec_node_samples_in(QR_RUNS_VALIDATE);
}

/* The process's peak resident memory so far, bytes (0: unknown). */
static int64_t peak_rss(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return 0;
    return (int64_t)u.ru_maxrss * 1024; /* KiB on Linux */
}

void qr_plan_phase(qr_qctx *q, qr_quantized *res, const char *name)
{
    /* what the phase freed stays in the heap (main.c sets glibc's trim threshold high so that
     * repeated executors reuse it), where it would add to the next phase's peak: ResNet-18's
     * effects left 78 MB that the measurement of what ships then ran on top of */
    qr_plan_give_back_memory();
    double t = now_ms(), c = cpu_ms();
    int64_t runs = qr_exec_node_samples(), val = qr_exec_node_samples_in(QR_RUNS_VALIDATE);
    if (res->nphases < QR_MAX_PHASES)
        res->phases[res->nphases++] = (qr_phase_time){name,         t - q->phase_ms,     c - q->phase_cpu_ms,
                                                      peak_rss(),   runs - q->phase_runs, val - q->phase_runs_validate};
    q->phase_ms = t, q->phase_cpu_ms = c, q->phase_runs = runs, q->phase_runs_validate = val;
}

void qr_plan_clock(double *ms, double *cpu)
{
    *ms = now_ms(), *cpu = cpu_ms();
}

void qr_plan_phase_move(qr_quantized *res, const char *from, const char *to, double ms, double cpu, int64_t runs,
                        int64_t validate_runs)
{
    qr_phase_time *f = NULL, *t = NULL;
    for (int i = 0; i < res->nphases; i++) {
        if (!strcmp(res->phases[i].name, from))
            f = &res->phases[i];
        if (!strcmp(res->phases[i].name, to))
            t = &res->phases[i];
    }
    if (!f || !t || f == t || (ms == 0 && cpu == 0 && runs == 0))
        return;
    f->ms -= ms, f->cpu_ms -= cpu, f->node_samples -= runs, f->validate_node_samples -= validate_runs;
    t->ms += ms, t->cpu_ms += cpu, t->node_samples += runs, t->validate_node_samples += validate_runs;
}

/* A bar on a terminal only (stderr), with the time left at the rate so far. */
void qr_plan_progress(const qr_quant_opts *o, const char *what, int64_t done, int64_t total, double t0)
{
    if (!o->progress || !isatty(2))
        return;
    if (done > total)
        done = total;
    int w = 30, k = total ? (int)(w * done / total) : w;
    double left = done > 0 ? (now_ms() - t0) / 1e3 * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld", what, k, "==============================", w - k, "",
            (long long)done, (long long)total);
    if (done > 0 && done < total)
        fprintf(stderr, "  %d:%02d left ", (int)(left / 60), (int)left % 60);
    else
        fprintf(stderr, "%13s", "");
    if (done >= total)
        fprintf(stderr, "\n");
}

/* Samples per run: the model's own batch size when its inputs fix one (most shipped models
 * take exactly 1), else --batch. */
int qr_plan_batch(const qr_qctx *q)
{
    int64_t fixed = qr_graph_fixed_batch(q->g);
    if (fixed > 0)
        return (int)fixed;
    return q->o->batch > 0 ? q->o->batch : 32;
}

/* Samples [at, at + b) of every calibration input, as views. */
void qr_plan_slice_inputs(const qr_tensor *calib, int n, int64_t at, int64_t b, qr_tensor *in)
{
    for (int i = 0; i < n; i++) {
        size_t row = qr_tensor_nbytes(&calib[i]) / (size_t)(calib[i].dims[0] ? calib[i].dims[0] : 1);
        in[i] = calib[i];
        in[i].dims[0] = b;
        in[i].data = (char *)calib[i].data + (size_t)at * row;
    }
}

void qr_plan_give_back_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* One batch through x; the outputs are dropped. */
qr_status qr_plan_run_once(qr_exec *x, const qr_graph *g, const qr_tensor *in, qr_error *e)
{
    qr_tensor *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    if (!out)
        return qr_errorf(e, "out of memory");
    qr_status st = qr_exec_run(x, in, out, e);
    for (int i = 0; i < g->n_outputs; i++)
        qr_tensor_free(&out[i]);
    free(out);
    return st;
}

/* Runs g over the calibration samples in batches of qr_plan_batch, on W workers (W = --threads,
 * at most one per batch): worker k runs the contiguous batches [k * nb / W, (k + 1) * nb / W) on its
 * own executor (its own memory plan: the peak grows with W) and, when calibrating, observes into its
 * own states (w[k].cal). Which batches a worker runs depends only on W and the batch count, never
 * on timing. Threads left over when there are fewer batches than --threads go to the workers'
 * kernels. */
typedef struct batch_run {
    qr_qctx *q;
    const qr_graph *g;
    const qr_tensor *calib;
    int64_t count;
    int batch, kernel_threads;
    const char *what;
    int64_t share;        /* samples of this rank's batches, for the progress bar */
    double t0;            /* when the run started, for the time left */
    /* the f32 pass: the outputs of its first keep_nb batches go to keep ([keep_nb][n_outputs]: the
     * qctx's f32_out or calib_out), the rest are dropped */
    qr_tensor *keep;
    int keep_nb;
    _Atomic int64_t done; /* samples run, for the progress bar */
} batch_run;

static void spread_stream(const qr_quant_opts *o, const qr_tensor *calib, int64_t at, int64_t b, int64_t *from,
                          int64_t *to);
static void spread_unstream(const qr_quant_opts *o, int64_t from, int64_t to);

typedef struct worker_arg {
    batch_run *r;
    calib_worker *w;
    int index;
} worker_arg;

/* The range of f32 values t into [*lo, *hi]; NaN does not widen it (as DynamicQuantizeLinear's). */
static void fold_range(const qr_tensor *t, double *lo, double *hi)
{
    if (t->dtype != QR_F32 || !t->data)
        return;
    const float *v = t->data;
    for (int64_t i = 0, n = qr_tensor_numel(t); i < n; i++) {
        if (v[i] < *lo)
            *lo = v[i];
        if (v[i] > *hi)
            *hi = v[i];
    }
}

/* The f32 pass's observer: the range of each value the recipe quantizes at run time (for reports). */
static void observe_dynamic(void *user, const qr_node *n, const qr_value *v, qr_tensor *t)
{
    (void)n;
    calib_worker *w = user;
    if (v->id >= 0 && v->id < w->q->g->n_values && w->q->dyn[v->id])
        fold_range(t, &w->dlo[v->id], &w->dhi[v->id]);
}

static void *run_worker(void *p)
{
    worker_arg *a = p;
    batch_run *r = a->r;
    calib_worker *w = a->w;
    const qr_graph *g = r->g;
    qr_exec_opts eo = {.threads = r->kernel_threads, .kernel_user = w->cal ? w : NULL,
                       .observer = w->dlo ? observe_dynamic : NULL, .observer_user = w};
    qr_exec *x = NULL;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    w->st = in ? qr_exec_new(g, &eo, &x, &w->err) : qr_errorf(&w->err, "out of memory");
    for (int64_t k = w->first; k < w->last && w->st == QR_OK; k++) {
        int64_t at = k * r->batch, b = r->count - at < r->batch ? r->count - at : r->batch, from, to;
        spread_stream(r->q->o, r->calib, at, b, &from, &to);
        qr_plan_slice_inputs(r->calib, g->n_inputs, at, b, in);
        w->at = at, w->count = b;
        for (int i = 0; w->dlo && i < g->n_inputs; i++) /* inputs: no node reports them */
            if (w->q->dyn[g->inputs[i]->id])
                fold_range(&in[i], &w->dlo[g->inputs[i]->id], &w->dhi[g->inputs[i]->id]);
        if (k < r->keep_nb) /* the f32 pass: outputs the measurements read */
            w->st = qr_exec_run(x, in, &r->keep[k * g->n_outputs], &w->err);
        else
            w->st = qr_plan_run_once(x, g, in, &w->err);
        spread_unstream(r->q->o, from, to);
        int64_t done = (r->done += b);
        if (a->index == 0 && done < r->share) /* the caller's thread draws the bar */
            qr_plan_progress(r->q->o, r->what, done, r->share, r->t0);
    }
    qr_exec_free(x);
    free(in);
    return NULL;
}

/* What one rank's pass leaves, reduced over the ranks into rank 0's (runtime/dist.h): each slot's
 * observed range and calibrator state (calibrating), or the dynamic values' ranges (the f32 pass). */
typedef struct rank_state {
    qr_qctx *q;
    int calibrating, dyn;
} rank_state;

static qr_status pack_ranks(void *user, unsigned char **buf, size_t *len, size_t *cap, qr_error *e)
{
    rank_state *rs = user;
    qr_qctx *q = rs->q;
    for (int i = 0; rs->calibrating && i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        double range[2] = {s->lo, s->hi};
        unsigned char *b = realloc(*buf, *len + sizeof range > *cap ? (*cap = 2 * (*len + sizeof range)) : *cap);
        if (!b)
            return qr_errorf(e, "out of memory");
        *buf = b;
        memcpy(b + *len, range, sizeof range);
        *len += sizeof range;
        if (s->kind == SLOT_CALIBRATED && qr_calib_pack(s->cal, buf, len, cap, e) != QR_OK)
            return QR_ERR;
    }
    if (rs->dyn) {
        size_t n = sizeof *q->dyn_lo * (size_t)q->g->n_values;
        unsigned char *b = realloc(*buf, *len + 2 * n > *cap ? (*cap = *len + 2 * n) : *cap);
        if (!b)
            return qr_errorf(e, "out of memory");
        *buf = b;
        memcpy(b + *len, q->dyn_lo, n);
        memcpy(b + *len + n, q->dyn_hi, n);
        *len += 2 * n;
    }
    return QR_OK;
}

/* Merges a state another rank packed into this one's; or, set, takes it as this rank's own. */
static qr_status take_ranks(rank_state *rs, const unsigned char *buf, size_t n, int set, qr_error *e)
{
    qr_qctx *q = rs->q;
    size_t at = 0;
    for (int i = 0; rs->calibrating && i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        double range[2];
        if (n - at < sizeof range)
            return qr_errorf(e, "a calibration state received is truncated");
        memcpy(range, buf + at, sizeof range);
        at += sizeof range;
        s->lo = set || range[0] < s->lo ? range[0] : s->lo;
        s->hi = set || range[1] > s->hi ? range[1] : s->hi;
        if (s->kind != SLOT_CALIBRATED)
            continue;
        qr_calib *o = NULL;
        qr_status st = qr_calib_fresh(s->cal, &o, e);
        if (st == QR_OK)
            st = qr_calib_unpack(o, buf, n, &at, e);
        if (st == QR_OK && set) { /* rank 0's state as it is, not merged into a fresh one */
            qr_calib_free(s->cal);
            s->cal = o;
            o = NULL;
        } else if (st == QR_OK)
            st = qr_calib_merge(s->cal, o, e);
        qr_calib_free(o);
        if (st != QR_OK) {
            qr_error_prefix(e, "value '%s'", q->g->values[s->value]->name);
            return st;
        }
    }
    if (rs->dyn) {
        size_t k = (size_t)q->g->n_values;
        if (n - at != 2 * k * sizeof(double))
            return qr_errorf(e, "the f32 pass's ranges received have the wrong size");
        for (size_t i = 0; i < k; i++) {
            double lo, hi;
            memcpy(&lo, buf + at + i * sizeof lo, sizeof lo);
            memcpy(&hi, buf + at + (k + i) * sizeof hi, sizeof hi);
            q->dyn_lo[i] = set || lo < q->dyn_lo[i] ? lo : q->dyn_lo[i];
            q->dyn_hi[i] = set || hi > q->dyn_hi[i] ? hi : q->dyn_hi[i];
        }
    } else if (at != n)
        return qr_errorf(e, "a calibration state received has %zu bytes too many", n - at);
    return QR_OK;
}

static qr_status merge_ranks(void *user, const unsigned char *buf, size_t n, qr_error *e)
{
    return take_ranks(user, buf, n, 0, e);
}

static qr_status reduce_ranks(qr_qctx *q, int calibrating, int dyn, qr_status local)
{
    rank_state rs = {q, calibrating, dyn};
    qr_dist_reducer r = {&rs, pack_ranks, merge_ranks};
    qr_status st = qr_dist_reduce(&r, local, q->e);
    if (!calibrating && !dyn)
        return st;
    /* then rank 0's result to every rank (or its error), so that every rank measures and searches
     * with the same qparams (qmeasure.c spreads that work over the ranks) */
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    if (st == QR_OK && qr_dist_rank() == 0)
        st = pack_ranks(&rs, &buf, &len, &cap, q->e);
    st = qr_dist_bcast(0, &buf, &len, st, q->e);
    if (st == QR_OK && qr_dist_rank() != 0 && (st = take_ranks(&rs, buf, len, 1, q->e)) != QR_OK)
        qr_error_prefix(q->e, "rank %d: rank 0's calibration states", qr_dist_rank());
    free(buf);
    return st;
}

static qr_status run_batches(qr_qctx *q, const qr_graph *g, const qr_tensor *calib, int64_t count, int calibrating,
                             const char *what, double *ms)
{
    batch_run r = {.q = q, .g = g, .calib = calib, .count = count, .batch = qr_plan_batch(q), .what = what};
    if (!calibrating && g == q->g) /* at most one of the two is set (calibrate_on) */
        r.keep = q->f32_out ? q->f32_out : q->calib_out, r.keep_nb = q->f32_out ? q->f32_out_nb : q->calib_out_nb;
    /* one rank of several (mpirun): its contiguous share of the batches, split among its workers
     * as one process's are; the states are then reduced over the ranks (reduce_ranks) */
    int64_t b0, b1;
    qr_dist_share((count + r.batch - 1) / r.batch, &b0, &b1);
    int64_t nb = b1 - b0;
    r.share = (b1 * r.batch < count ? b1 * r.batch : count) - b0 * r.batch;
    int threads = q->o->threads > 1 ? q->o->threads : 1;
    int nw = nb < threads ? (int)nb : threads;
    if (nw < 1)
        nw = 1;
    r.kernel_threads = threads / nw;
    calib_worker *w = calloc((size_t)nw, sizeof *w);
    worker_arg *args = calloc((size_t)nw, sizeof *args);
    pthread_t *tid = calloc((size_t)nw, sizeof *tid);
    char *started = calloc((size_t)nw, 1);
    qr_status st = w && args && tid && started ? QR_OK : qr_errorf(q->e, "out of memory");
    for (int k = 0; st == QR_OK && k < nw; k++) {
        w[k] = (calib_worker){.q = q, .first = b0 + nb * k / nw, .last = b0 + nb * (k + 1) / nw};
        args[k] = (worker_arg){&r, &w[k], k};
        if (!calibrating && q->dyn_lo && g == q->g) { /* the f32 pass: the dynamic values' ranges */
            w[k].dlo = malloc(sizeof *w[k].dlo * (size_t)(g->n_values + 1));
            w[k].dhi = malloc(sizeof *w[k].dhi * (size_t)(g->n_values + 1));
            if (!w[k].dlo || !w[k].dhi)
                st = qr_errorf(q->e, "out of memory");
            for (int i = 0; st == QR_OK && i < g->n_values; i++)
                w[k].dlo[i] = INFINITY, w[k].dhi[i] = -INFINITY;
        }
        if (!calibrating)
            continue;
        w[k].cal = calloc((size_t)q->nslots + 1, sizeof *w[k].cal);
        w[k].lo = malloc(sizeof *w[k].lo * (size_t)(q->nslots + 1));
        w[k].hi = malloc(sizeof *w[k].hi * (size_t)(q->nslots + 1));
        if (!w[k].cal || !w[k].lo || !w[k].hi)
            st = qr_errorf(q->e, "out of memory");
        for (int i = 0; st == QR_OK && i < q->nslots; i++) {
            w[k].lo[i] = INFINITY;
            w[k].hi[i] = -INFINITY;
            if (q->slots[i].kind == SLOT_CALIBRATED)
                st = qr_calib_fresh(q->slots[i].cal, &w[k].cal[i], q->e);
        }
    }
    double t0 = r.t0 = now_ms();
    for (int k = 1; st == QR_OK && k < nw; k++)
        started[k] = pthread_create(&tid[k], NULL, run_worker, &args[k]) == 0;
    /* the f32 pass that keeps outputs for the fallback: worker 0 on a thread of its own too, so
     * that they live in that thread's malloc arena, apart from what the caller's thread allocates
     * and frees meanwhile (in the caller's heap they kept M-LSD tiny's freed memory from going
     * back: 48 MB more peak) */
    if (st == QR_OK && r.keep_nb > 0 && pthread_create(&tid[0], NULL, run_worker, &args[0]) == 0)
        pthread_join(tid[0], NULL);
    else if (st == QR_OK)
        run_worker(&args[0]);
    for (int k = 1; st == QR_OK && k < nw; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            run_worker(&args[k]); /* no thread: the same batches, on this one */
    }
    *ms = now_ms() - t0;
    for (int k = 0; st == QR_OK && k < nw; k++)
        if (w[k].st != QR_OK) {
            memcpy(q->e, &w[k].err, sizeof *q->e);
            st = QR_ERR;
        }
    if (st == QR_OK)
        qr_plan_progress(q->o, what, r.share, r.share, t0);
    /* Merged in worker order, into worker 0's states: one worker never calls merge. */
    for (int i = 0; st == QR_OK && calibrating && i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        for (int k = 0; k < nw; k++) {
            s->lo = w[k].lo[i] < s->lo ? w[k].lo[i] : s->lo;
            s->hi = w[k].hi[i] > s->hi ? w[k].hi[i] : s->hi;
        }
        if (s->kind != SLOT_CALIBRATED)
            continue;
        for (int k = 1; st == QR_OK && k < nw; k++)
            if ((st = qr_calib_merge(w[0].cal[i], w[k].cal[i], q->e)) != QR_OK)
                qr_error_prefix(q->e, "value '%s': merging the calibration of worker %d", q->g->values[s->value]->name,
                                k);
        if (st == QR_OK) {
            qr_calib_free(s->cal);
            s->cal = w[0].cal[i];
            w[0].cal[i] = NULL;
        }
    }
    for (int k = 0; st == QR_OK && k < nw; k++)
        for (int i = 0; w[k].dlo && i < g->n_values; i++) {
            q->dyn_lo[i] = w[k].dlo[i] < q->dyn_lo[i] ? w[k].dlo[i] : q->dyn_lo[i];
            q->dyn_hi[i] = w[k].dhi[i] > q->dyn_hi[i] ? w[k].dhi[i] : q->dyn_hi[i];
        }
    if (qr_dist_size() > 1) /* every rank takes part, failed or not: an error goes up the tree */
        st = reduce_ranks(q, calibrating, !calibrating && q->dyn_lo && g == q->g, st);
    for (int k = 0; w && k < nw; k++) {
        for (int i = 0; w[k].cal && i < q->nslots; i++)
            qr_calib_free(w[k].cal[i]);
        free(w[k].cal);
        free(w[k].lo);
        free(w[k].hi);
        free(w[k].dlo);
        free(w[k].dhi);
    }
    free(w);
    free(args);
    free(tid);
    free(started);
    qr_plan_give_back_memory();
    return st;
}

/* ------------------------------------------- run-time quantization */

/* A node op(ins) -> one new f32 value named NAME_suffix; NULL when out of memory (the graph marked). */
static qr_value *dyn_node(qr_graph *g, const char *op, const qr_value *x, const char *suffix, int n_in, qr_value *a,
                          qr_value *b, qr_value *c)
{
    char name[512];
    snprintf(name, sizeof name, "%s_%s", x->name, suffix);
    qr_value *out = qr_graph_new_value(g, name);
    snprintf(name, sizeof name, "%s_%s_node", x->name, suffix);
    qr_node *n = out ? qr_plan_new_node(g, op, "", name, n_in, 1) : NULL;
    if (!n)
        return NULL;
    qr_value *in[3] = {a, b, c};
    for (int j = 0; j < n_in; j++) {
        if (!in[j])
            return NULL;
        n->in[j] = in[j];
    }
    n->out[0] = out;
    out->producer = n;
    return out;
}

static qr_value *f32_const(qr_graph *g, const qr_value *x, const char *suffix, float v)
{
    char name[512];
    snprintf(name, sizeof name, "%s_%s", x->name, suffix);
    qr_tensor t = {.dtype = QR_F32, .ndim = 0, .data = &v};
    return qr_plan_const(g, name, &t);
}

/* x's minimum or maximum along its last axis, kept as [..., 1] (axes an attribute before opset 18). */
static qr_value *dyn_reduce(qr_graph *g, const char *op, qr_value *x, const char *suffix)
{
    int64_t last = -1;
    qr_value *axes = NULL;
    if (g->opset >= 18) {
        char name[512];
        snprintf(name, sizeof name, "%s_%s_axes", x->name, suffix);
        qr_tensor t = {.dtype = QR_I64, .ndim = 1, .dims = {1}, .data = &last};
        axes = qr_plan_const(g, name, &t);
    }
    qr_value *r = dyn_node(g, op, x, suffix, axes ? 2 : 1, x, axes, NULL);
    if (r && !axes)
        qr_node_add_attr_ints(g, r->producer, "axes", 1, &last);
    return r;
}

/* x fake-quantized at run time as the integer graph quantizes it (DynamicQuantizeLinear's formula):
 * u8 over [min(0, min x), max(0, max x)], scale range / 255 (1 for a range of 0), zero point
 * round(clamp(-min / scale, 0, 255)), x as saturate(round(x / scale) + zero), all in f32 and half
 * to even. Per tensor that is DynamicQuantizeLinear then DequantizeLinear; per row (of the last
 * axis) the same formula in standard ops over ReduceMin and ReduceMax keeping that axis, so other
 * runtimes run the export. Returns the dequantized value. */
static qr_value *dyn_quant(qr_graph *g, qr_value *x, int per_row)
{
    char name[512];
    if (!per_row) {
        qr_value *o[3];
        static const char *const suf[3] = {"dynamic_quantized", "dynamic_scale", "dynamic_zero_point"};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s_%s", x->name, suf[k]);
            if (!(o[k] = qr_graph_new_value(g, name)))
                return NULL;
        }
        snprintf(name, sizeof name, "dynamic_quantize_%s", x->name);
        qr_node *n = qr_plan_new_node(g, "DynamicQuantizeLinear", "", name, 1, 3);
        if (!n)
            return NULL;
        n->in[0] = x;
        for (int k = 0; k < 3; k++)
            n->out[k] = o[k], o[k]->producer = n;
        return dyn_node(g, "DequantizeLinear", x, "dynamic_dequantized", 3, o[0], o[1], o[2]);
    }
    qr_value *z = f32_const(g, x, "dynamic_0", 0.0f), *one = f32_const(g, x, "dynamic_1", 1.0f),
             *top = f32_const(g, x, "dynamic_255", 255.0f);
    qr_value *lo = dyn_node(g, "Min", x, "dynamic_lo", 2, dyn_reduce(g, "ReduceMin", x, "dynamic_min"), z, NULL);
    qr_value *hi = dyn_node(g, "Max", x, "dynamic_hi", 2, dyn_reduce(g, "ReduceMax", x, "dynamic_max"), z, NULL);
    qr_value *range = dyn_node(g, "Sub", x, "dynamic_range", 2, hi, lo, NULL);
    qr_value *empty = dyn_node(g, "Equal", x, "dynamic_empty", 2, range, z, NULL);
    qr_value *scale = dyn_node(g, "Where", x, "dynamic_scale", 3, empty, one,
                               dyn_node(g, "Div", x, "dynamic_step", 2, range, top, NULL));
    qr_value *zf = dyn_node(g, "Sub", x, "dynamic_zero_real", 2, z, dyn_node(g, "Div", x, "dynamic_lo_steps", 2, lo,
                                                                              scale, NULL), NULL);
    qr_value *zero = dyn_node(g, "Round", x, "dynamic_zero_point", 1, dyn_node(g, "Clip", x, "dynamic_zero_clip", 3, zf, z,
                                                                              top), NULL, NULL);
    qr_value *steps = dyn_node(g, "Round", x, "dynamic_steps", 1, dyn_node(g, "Div", x, "dynamic_ratio", 2, x, scale,
                                                                           NULL), NULL, NULL);
    qr_value *qx = dyn_node(g, "Clip", x, "dynamic_quantized", 3, dyn_node(g, "Add", x, "dynamic_shifted", 2, steps,
                                                                           zero, NULL), z, top);
    return dyn_node(g, "Mul", x, "dynamic_dequantized", 2, dyn_node(g, "Sub", x, "dynamic_centered", 2, qx, zero, NULL),
                    scale, NULL);
}

/* Each value a match quantizes at run time gets its run-time quantization in d, and the match's
 * own nodes read the dequantized value; every other reader keeps reading the f32 value. */
static qr_status insert_dynamic(qr_qctx *q, qr_graph *d)
{
    const qr_graph *g = q->g;
    for (int v = 0; v < g->n_values; v++) {
        if (!q->dyn[v] || q->dyn_f32[v])
            continue;
        qr_value *x = d->values[v], *xd = dyn_quant(d, x, q->dyn[v] == DYN_ROW);
        if (!xd)
            return qr_graph_check_oom(d, q->e) != QR_OK ? QR_ERR : qr_errorf(q->e, "out of memory");
        for (int i = 0; i < q->nmatches; i++) {
            const struct mrec *r = &q->matches[i];
            int dynamic_here = 0;
            for (int k = 0; k < r->p->nvalues && k < QR_MATCH_MAX_VALUES; k++)
                dynamic_here |= r->values[k] == v && r->p->values[k].role == QR_ROLE_DYNAMIC;
            for (int k = 0; dynamic_here && k < r->nnodes; k++) { /* the clone's nodes are the original's, in order */
                qr_node *n = d->nodes[r->nodes[k]];
                for (int j = 0; j < n->n_in; j++)
                    if (n->in[j] == x)
                        n->in[j] = xd;
            }
        }
    }
    return QR_OK;
}

/* ------------------------------------------------------------- main */

static void qctx_free(qr_qctx *q)
{
    for (int i = 0; i < q->nslots; i++)
        qr_calib_free(q->slots[i].cal);
    free(q->slots);
    for (int i = 0; i < q->nw; i++) {
        free(q->w[i].scale);
        free(q->w[i].zero);
    }
    free(q->w);
    free(q->bias);
    free(q->matches);
    free(q->claimed);
    free(q->node_kind);
    free(q->aff_of);
    free(q->top1);
    for (int i = 0; i < q->nnotes; i++)
        free(q->notes[i]);
    free(q->notes);
    free(q->roles);
    free(q->slot_of);
    free(q->dyn);
    free(q->dyn_f32);
    free(q->dyn_sqnr);
    free(q->dyn_effect);
    free(q->dyn_macs);
    free(q->dyn_lo);
    free(q->dyn_hi);
    free(q->qval);
    free(q->qnode);
    for (int i = 0; q->f32_out && i < q->f32_out_nb * q->g->n_outputs; i++)
        qr_tensor_free(&q->f32_out[i]);
    free(q->f32_out);
    for (int i = 0; q->calib_out && i < q->calib_out_nb * q->g->n_outputs; i++)
        qr_tensor_free(&q->calib_out[i]);
    free(q->calib_out);
    qr_plan_drop_rounded(q);
}

/* The plan's arrays for q->g, no value with a slot yet; 0 when out of memory (qctx_free frees
 * what was allocated). */
static int qctx_alloc(qr_qctx *q)
{
    const qr_graph *g = q->g;
    q->claimed = calloc((size_t)g->n_nodes + 1, 1);
    q->node_kind = calloc((size_t)g->n_nodes + 1, sizeof *q->node_kind);
    q->aff_of = calloc((size_t)g->n_nodes + 1, sizeof *q->aff_of);
    q->roles = calloc((size_t)g->n_values + 1, sizeof *q->roles);
    q->slot_of = malloc(sizeof *q->slot_of * (size_t)(g->n_values + 1));
    q->dyn = calloc((size_t)g->n_values + 1, 1);
    q->dyn_f32 = calloc((size_t)g->n_values + 1, 1);
    q->dyn_sqnr = malloc(sizeof *q->dyn_sqnr * (size_t)(g->n_values + 1));
    q->dyn_effect = malloc(sizeof *q->dyn_effect * (size_t)(g->n_values + 1));
    q->dyn_macs = malloc(sizeof *q->dyn_macs * (size_t)(g->n_values + 1));
    if (!q->claimed || !q->node_kind || !q->aff_of || !q->roles || !q->slot_of || !q->dyn || !q->dyn_f32 ||
        !q->dyn_sqnr || !q->dyn_effect || !q->dyn_macs)
        return 0;
    for (int i = 0; i < g->n_values; i++)
        q->dyn_sqnr[i] = q->dyn_effect[i] = q->dyn_macs[i] = NAN;
    for (int i = 0; i < g->n_values; i++)
        q->slot_of[i] = -1;
    return 1;
}

int qr_plan_match_dyn_f32(const qr_qctx *q, const struct mrec *r)
{
    for (int i = 0; i < r->p->nvalues && i < QR_MATCH_MAX_VALUES; i++)
        if (r->p->values[i].role == QR_ROLE_DYNAMIC && r->values[i] >= 0 && q->dyn_f32[r->values[i]])
            return 1;
    return 0;
}

/* Whether match r runs in f32: a value it quantizes at run time went to f32, its output's slot
 * falls back, or, when its output is real (never quantized: no slot of its own), the slot of an
 * activation it reads does; without its integer input the layer has no integer product to run. */
static int match_falls_back(const qr_qctx *q, const struct mrec *r)
{
    if (qr_plan_match_dyn_f32(q, r))
        return 1;
    int s = q->slot_of[r->out];
    if (s >= 0)
        return q->slots[s].fallback;
    if (!r->p->nlowers || r->p->values[r->p->lowers[0].out].role != QR_ROLE_REAL)
        return 0;
    for (int i = 0; i < r->p->nvalues && i < QR_MATCH_MAX_VALUES; i++) {
        int a = r->p->values[i].role == QR_ROLE_ACTIVATION && r->values[i] >= 0 ? q->slot_of[r->values[i]] : -1;
        if (a >= 0 && q->slots[a].fallback)
            return 1;
    }
    return 0;
}

int qr_plan_const_falls_back(const qr_qctx *q, int value)
{
    for (int i = 0; i < q->nmatches; i++) {
        const struct mrec *r = &q->matches[i];
        if (!match_falls_back(q, r))
            continue;
        for (int k = 0; k < r->nconsts; k++)
            if (r->consts[k] == value)
                return 1;
    }
    return 0;
}

/* The id of a value insert_qdq or insert_dq_const added, -1 when it did not fit in memory
 * (the graph is marked and qr_plan_build_qdq fails). */
static int id_of(const qr_value *v)
{
    return v ? v->id : -1;
}

/* A bias correction makes up for its layer's weight rounding (transform.c): it corrects the bias of
 * the layer's Conv or Gemm, or of the Add of its separate bias, in place or as a new constant, and
 * gives a layer without one a bias (an Add of its own after a MatMul). Learned rounding moves the f32
 * weights themselves (in place) to where rounding to nearest gives its choice. Both rewrite only
 * layers whose weights the recipe quantizes: a match of its patterns binds each as a constant weight
 * (the MatMul and the Add of its bias are one match). A layer whose weight the fallback keeps in f32 has no rounding to make up for or
 * choose, so in d the nodes of its match read their constants from before those transforms again
 * (q->ref's node of the same name: its values keep their ids in g), no bias where it had none, and an
 * Add q->ref lacks adds zeros. */
static void restore_biases(const qr_qctx *q, qr_graph *d)
{
    const qr_graph *g = q->g, *ref = q->ref;
    for (int m = 0; m < q->nmatches; m++) {
        const struct mrec *r = &q->matches[m];
        int w = -1;
        for (int i = 0; i < r->p->nvalues && i < QR_MATCH_MAX_VALUES && w < 0; i++)
            if (r->p->values[i].role == QR_ROLE_WEIGHT && r->values[i] >= 0 && g->values[r->values[i]]->is_const)
                w = r->values[i];
        if (w < 0 || (q->qval[w] >= 0 && !qr_plan_const_falls_back(q, w)))
            continue;
        for (int t = 0; t < r->nnodes; t++) {
            const qr_node *gn = g->nodes[r->nodes[t]], *rn = NULL;
            for (int i = 0; gn->name && gn->name[0] && i < ref->n_nodes && !rn; i++)
                if (ref->nodes[i]->name && !strcmp(ref->nodes[i]->name, gn->name))
                    rn = ref->nodes[i];
            qr_node *dn = d->nodes[gn->id]; /* the clone keeps g's nodes first, in order */
            for (int k = 0; k < gn->n_in; k++) {
                const qr_value *now = gn->in[k], *was = rn && k < rn->n_in ? rn->in[k] : NULL;
                if (!now || !now->is_const || (now->id == w && !was))
                    continue;
                if (!rn) { /* the correction's own Add (transform.c's names) */
                    if (strstr(now->name, "_corrected_bias"))
                        qr_value_alloc_const(d, d->values[now->id], &now->t);
                } else if (was && was->id == now->id) { /* corrected in place: d's copy gets the data back */
                    int same_shape = was->is_const && was->t.dtype == now->t.dtype &&
                                     qr_tensor_numel(&was->t) == qr_tensor_numel(&now->t);
                    if (same_shape && memcmp(was->t.data, now->t.data, qr_tensor_nbytes(&was->t)))
                        qr_value_set_const(d, d->values[now->id], &was->t);
                } else {
                    dn->in[k] = was ? d->values[was->id] : NULL;
                    if (!was && k == gn->n_in - 1)
                        dn->n_in = k;
                }
            }
        }
    }
}

/* Weight i of q->w rounded to its integers as its qparams say: a constant of q->wround_g, kept
 * across qr_plan_build_qdq's builds and shared (read-only) with the graphs they make. The
 * fallback rebuilds the QDQ graph for every try and every layer's effect, each weight's qparams
 * unchanged (ResNet-18's 11.7 M weights were rounded again each time: half the search's time);
 * a weight is rounded again only when its type, range, scales or zero points are not those its
 * integers were rounded with (mixed precision's alternatives). NULL when out of memory. */
static const qr_value *rounded_weight(qr_qctx *q, int i)
{
    const qr_wquant *w = &q->w[i];
    const qr_value *ov = q->g->values[w->value];
    qrl_qtype qt = qr_plan_qtype(q, w->dtype, w->narrow, w->axis);
    if (!q->wround_g && !(q->wround_g = qr_graph_new()))
        return NULL;
    if (q->nwround < q->nw) {
        struct qr_wround *r = realloc(q->wround, sizeof *r * (size_t)q->nw);
        if (!r)
            return NULL;
        memset(r + q->nwround, 0, sizeof *r * (size_t)(q->nw - q->nwround));
        q->wround = r, q->nwround = q->nw;
    }
    struct qr_wround *c = &q->wround[i];
    size_t ns = sizeof *w->scale * (size_t)w->nch, nz = sizeof *w->zero * (size_t)w->nch;
    if (c->ints && c->dtype == w->dtype && c->qmin == qt.qmin && c->qmax == qt.qmax && c->axis == w->axis &&
        c->nch == w->nch && !memcmp(c->scale, w->scale, ns) && !memcmp(c->zero, w->zero, nz))
        return c->ints;
    free(c->scale), free(c->zero);
    c->scale = malloc(ns + 1), c->zero = malloc(nz + 1);
    c->nch = -1; /* matches no weight until rounded below */
    if (!c->ints)
        c->ints = qr_graph_new_value(q->wround_g, ov->name);
    qr_tensor t = {.dtype = w->dtype, .ndim = ov->t.ndim};
    memcpy(t.dims, ov->t.dims, sizeof t.dims);
    void *data = c->ints && c->scale && c->zero ? qr_value_alloc_const(q->wround_g, c->ints, &t) : NULL;
    if (!data)
        return NULL; /* rounded again next time */
    memcpy(c->scale, w->scale, ns);
    memcpy(c->zero, w->zero, nz);
    c->dtype = w->dtype, c->qmin = qt.qmin, c->qmax = qt.qmax, c->axis = w->axis, c->nch = w->nch;
    int64_t n = qr_tensor_numel(&ov->t), inner = w->axis < 0 ? n : 1;
    for (int k = w->axis + 1; w->axis >= 0 && k < ov->t.ndim; k++)
        inner *= ov->t.dims[k];
    const float *src = ov->t.data;
    /* a run of inner elements at a time shares its channel (no division per element) */
    for (int64_t j0 = 0; j0 < n; j0 += inner) {
        int ch = w->axis < 0 ? 0 : (int)((j0 / inner) % w->nch);
        float sc = w->scale[ch];
        int64_t z = w->zero[ch];
        if (w->dtype == QR_I8)
            for (int64_t j = j0; j < j0 + inner; j++)
                ((int8_t *)data)[j] = (int8_t)qr_plan_round_const(q, src[j], sc, z, qt.qmin, qt.qmax);
        else
            for (int64_t j = j0; j < j0 + inner; j++)
                qr_set_i64(data, w->dtype, j, qr_plan_round_const(q, src[j], sc, z, qt.qmin, qt.qmax));
    }
    return c->ints;
}

void qr_plan_drop_rounded(qr_qctx *q)
{
    for (int i = 0; i < q->nwround; i++)
        free(q->wround[i].scale), free(q->wround[i].zero);
    free(q->wround);
    qr_graph_free(q->wround_g);
    q->wround = NULL, q->wround_g = NULL, q->nwround = 0;
}

qr_status qr_plan_build_qdq(qr_qctx *q, qr_quantized *res)
{
    const qr_graph *g = q->g;
    qr_graph *d = qr_graph_clone_shared(g);
    if (!d)
        return qr_errorf(q->e, "out of memory");
    res->qdq = d;
    free(q->qval);
    if (!(q->qval = malloc(sizeof *q->qval * (size_t)(g->n_values + 1))))
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < g->n_values; i++)
        q->qval[i] = -1;
    for (int i = 0; i < q->nslots; i++)
        if (!q->slots[i].fallback)
            q->qval[q->slots[i].value] = id_of(insert_qdq(d, d->values[q->slots[i].value], &q->slots[i], q->slots[i].dtype));
    for (int i = 0; i < q->nw; i++) {
        const qr_wquant *w = &q->w[i];
        if (qr_plan_const_falls_back(q, w->value))
            continue;
        const qr_value *ov = g->values[w->value], *ints = rounded_weight(q, i);
        if (!ints)
            return qr_errorf(q->e, "out of memory");
        char name[512];
        snprintf(name, sizeof name, "%s_quantized", ov->name);
        qr_value *qv = qr_graph_new_value(d, name);
        if (qv && qr_value_share_const(d, qv, ints, q->e) != QR_OK)
            return QR_ERR;
        unsigned char *zeros = calloc((size_t)w->nch, qr_dtype_size(w->dtype));
        for (int c = 0; zeros && c < w->nch; c++)
            qr_set_i64(zeros, w->dtype, c, w->zero[c]);
        if (zeros)
            q->qval[w->value] = id_of(attach_dq(d, d->values[w->value], qv, w->scale, zeros, w->dtype, w->nch, w->axis));
        free(zeros);
        qr_plan_count_weight(res, w->dtype, qr_tensor_numel(&ov->t));
    }
    for (int i = 0; i < q->nbias; i++) {
        const qr_bquant *b = &q->bias[i];
        if (qr_plan_const_falls_back(q, b->value))
            continue;
        const qr_value *ov = g->values[b->value];
        const qr_wquant *w = qr_plan_weight(q, b->w);
        int xs = q->slot_of[b->x];
        if (!w || xs < 0 || q->slots[xs].fallback || ov->t.dtype != QR_F32 || ov->t.ndim != 1) /* x in f32: so is the bias */
            continue;
        int64_t n = ov->t.dims[0];
        if (w->nch != 1 && w->nch != n)
            continue;
        if (!q->bias_fn && !(q->bias_fn = qr_plan_hook(q->m, q->r, QR_SET_BIAS_QPARAMS, q->e)))
            return QR_ERR;
        /* per-tensor weights give a per-tensor bias: no axis (per-axis DequantizeLinear needs opset 13) */
        int pc = w->nch > 1;
        qr_dtype bt = q->bias_dtype;
        qrl_qtype bq = qr_qtype_of(bt, 0, pc ? 0 : -1);
        qr_tensor ints = {.dtype = bt, .ndim = 1, .dims = {n}};
        float *scales = malloc(sizeof(float) * (size_t)n);
        int32_t *zeros = calloc((size_t)n, sizeof *zeros); /* wide enough for i16 and i32 */
        if (!scales || !zeros || qr_tensor_alloc(&ints, q->e) != QR_OK) {
            free(scales);
            free(zeros);
            return qr_errorf(q->e, "out of memory");
        }
        /* each channel's qparams from the hook (stdlib: x.scale * w.scale, zero point 0) */
        qrl_qparams (*hook)(qrl_rt *, qrl_qparams, qrl_qparams, qrl_qtype) =
            (qrl_qparams(*)(qrl_rt *, qrl_qparams, qrl_qparams, qrl_qtype))q->bias_fn->fn;
        const float *src = ov->t.data;
        qr_status st = QR_OK;
        for (int64_t c = 0; c < n && st == QR_OK; c++) {
            int wc = w->nch == 1 ? 0 : (int)c;
            qrl_qparams xq = {(float)q->slots[xs].qp.scale, q->slots[xs].qp.zero}, wq = {w->scale[wc], w->zero[wc]};
            qrl_rt rt;
            qr_rt_init(&rt);
            qrl_qparams p = hook(&rt, xq, wq, bq);
            if ((st = qr_rt_status(&rt, q->e)) != QR_OK) {
                qr_error_prefix(q->e, "recipe '%s': %s for bias '%s' channel %lld", q->r->name, q->bias_fn->name,
                                ov->name, (long long)c);
                break;
            }
            scales[c] = (float)p.scale;
            if (!(scales[c] > 0) || !isfinite(scales[c]) || p.zero < bq.qmin || p.zero > bq.qmax) {
                st = qr_errorf(q->e, "recipe '%s': %s gives bias '%s' channel %lld scale %g and zero point %lld: not a "
                                     "positive finite scale and a zero point of %s", q->r->name, q->bias_fn->name,
                               ov->name, (long long)c, p.scale, (long long)p.zero, qr_dtype_name(bt));
                break;
            }
            qr_set_i64(zeros, bt, c, p.zero);
            qr_set_i64(ints.data, bt, c, qr_plan_round_const(q, src[c], scales[c], p.zero, bq.qmin, bq.qmax));
        }
        if (st == QR_OK)
            q->qval[b->value] = id_of(insert_dq_const(d, d->values[b->value], &ints, scales, zeros, bt, pc ? (int)n : 1,
                                                      pc ? 0 : -1));
        free(scales);
        free(zeros);
        qr_tensor_free(&ints);
        if (st != QR_OK)
            return QR_ERR; /* res->qdq holds d */
    }
    if (q->ref)
        restore_biases(q, d);
    if (insert_dynamic(q, d) != QR_OK)
        return QR_ERR;
    qr_node **orig = malloc(sizeof *orig * (size_t)(g->n_nodes + 1));
    free(q->qnode);
    if (!orig || !(q->qnode = malloc(sizeof *q->qnode * (size_t)(g->n_nodes + 1)))) {
        free(orig);
        return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) /* the clone keeps the original's nodes first, in order */
        orig[i] = d->nodes[i];
    if (qr_graph_check_oom(d, q->e) != QR_OK || qr_graph_toposort(d, q->e) != QR_OK) {
        free(orig);
        qr_error_prefix(q->e, "building the QDQ graph");
        return QR_ERR;
    }
    for (int i = 0; i < g->n_nodes; i++)
        q->qnode[i] = orig[i]->id;
    free(orig);
    return QR_OK;
}

static qr_status check_calib(const qr_graph *g, const qr_tensor *calib, qr_error *e)
{
    if (g->n_inputs < 1)
        return qr_errorf(e, "the model has no inputs to calibrate with");
    for (int i = 0; i < g->n_inputs; i++) {
        const qr_value *v = g->inputs[i];
        if (calib[i].ndim < 1 || calib[i].dims[0] < 1)
            return qr_errorf(e, "the calibration set is empty (input '%s')", v->name);
        if (calib[i].dims[0] != calib[0].dims[0])
            return qr_errorf(e, "the calibration sets hold %lld samples for '%s' but %lld for '%s'",
                             (long long)calib[0].dims[0], g->inputs[0]->name, (long long)calib[i].dims[0], v->name);
        if (calib[i].dtype != v->t.dtype)
            return qr_errorf(e, "the calibration data is %s but input '%s' is %s", qr_dtype_name(calib[i].dtype),
                             v->name, qr_dtype_name(v->t.dtype));
        /* A NaN or an infinity would reach every range downstream (minmax gives an infinite scale, a
         * histogram a NaN one) and every SQNR the fallback ranks by: refused, where it is. */
        if (calib[i].dtype == QR_F32) {
            const float *d = calib[i].data;
            int64_t n = qr_tensor_numel(&calib[i]), per = n / calib[i].dims[0];
            for (int64_t k = 0; k < n; k++) {
                if (!isfinite(d[k]))
                    return qr_errorf(e, "the calibration data for input '%s' holds %s at sample %lld (element %lld of "
                                     "its %lld): calibration needs finite numbers",
                                     v->name, isnan(d[k]) ? "NaN" : "an infinity", (long long)(k / per),
                                     (long long)(k % per), (long long)per);
                /* a mapped file's pages leave once read: the passes read them again from the page
                 * cache, as they need them (the whole file resident was MobileNetV3-small's peak) */
                if ((k + 1) % per == 0)
                    qr_data_release(d, (size_t)(k + 1 - per) * sizeof *d, (size_t)per * sizeof *d);
            }
        }
    }
    return QR_OK;
}

/* The activation slots' calibrators: the recipe's `input` setting for the model's first quantized
 * tensors, `output` for its outputs, `activation` for the rest. */

/* The calibrators' states count against the memory budget (--max-memory) with what quantization
 * holds (the model's constants, the calibration data): each calibrated tensor's merged state, each
 * calibration worker's own, and per worker one batch's fresh state and a merge's scratch (about
 * as large: a histogram's bins). Checked as the states are made, so that a budget too small
 * stops before the rest is allocated; the error names the calibrator, the tensors and the bytes. */
static qr_status states_fit(qr_qctx *q, const qr_tensor *calib, int64_t count, int done, int total,
                            size_t sum, size_t max, const qr_calib *last)
{
    int64_t batch = qr_plan_batch(q), nb = batch > 0 ? (count + batch - 1) / batch : 1;
    int threads = q->o->threads > 1 ? q->o->threads : 1;
    int nw = nb < threads ? (int)(nb > 0 ? nb : 1) : threads;
    /* the slots not made yet, as large as the last one */
    size_t all = sum + qr_calib_bytes(last) * (size_t)(total - done);
    size_t need = all * (size_t)(1 + nw) + max * 2 * (size_t)nw;
    size_t budget = qr_exec_default_max_memory(), held = qr_plan_held_bytes(q->g, calib);
    if (held <= budget && need <= budget - held)
        return QR_OK;
    return qr_errorf(q->e, "calibrator '%s': the calibration states of %d tensors need %zu bytes (%zu for the "
                     "last one made; a merged state per tensor, and each of %d calibration workers' own and one "
                     "batch's), with the %zu bytes of constants and calibration data: over the budget of %zu bytes "
                     "(--max-memory)", qr_calib_name(last), total, need, qr_calib_bytes(last), nw, held, budget);
}

static qr_status new_calibrators(qr_qctx *q, const qr_tensor *calib, int64_t count)
{
    unsigned char *seen = calloc((size_t)q->g->n_nodes + 1, 1);
    if (!seen)
        return qr_errorf(q->e, "out of memory");
    qr_status st = QR_OK;
    int total = 0, done = 0;
    size_t sum = 0, max = 0;
    for (int i = 0; i < q->nslots; i++)
        total += q->slots[i].kind == SLOT_CALIBRATED;
    for (int i = 0; st == QR_OK && i < q->nslots; i++)
        if (q->slots[i].kind == SLOT_CALIBRATED) {
            const qr_setting *s = q->act;
            const qr_value *v = q->g->values[q->slots[i].value];
            if (q->in) {
                memset(seen, 0, (size_t)q->g->n_nodes + 1);
                if (first_quantized(q, v, seen))
                    s = q->in;
            }
            if (q->out && v->is_output)
                s = q->out;
            if (q->slots[i].set) /* activation for the op or node that produces it */
                s = q->slots[i].set;
            q->slots[i].qt.symmetric = (s->mods & QR_MOD_SYMMETRIC) != 0;
            q->slots[i].calset = s;
            st = new_calib(q, s, &q->slots[i].cal);
            if (st == QR_OK) {
                size_t b = qr_calib_bytes(q->slots[i].cal);
                sum += b;
                max = b > max ? b : max;
                st = states_fit(q, calib, count, ++done, total, sum, max, q->slots[i].cal);
            }
        }
    free(seen);
    return st;
}

/* The scale value of slot si's SimQuant in the simulated graph (through "same as" chains). */
static qr_value *sim_scale(const qr_qctx *q, int si, qr_value **scales)
{
    for (int hops = 0; si >= 0 && q->slots[si].kind == SLOT_SAME && hops <= q->nslots; hops++)
        si = q->slots[si].same;
    return si >= 0 && q->slots[si].kind != SLOT_SAME ? scales[si] : NULL;
}

/* Conv, Gemm or MatMul node n of g becomes QrlAccSim(x, w, b?, xs, ws): the recipe's accumulator
 * on the integers its fake-quantized operands hold. A Gemm stays as it is when A is transposed or
 * C is not one value, or one per output column (the integer graph's kernel adds none other). */
static void to_accsim(const qr_qctx *q, qr_graph *g, qr_node *n, qr_value *xs, qr_value *ws)
{
    int conv = !strcmp(n->op, "Conv"), gemm = !strcmp(n->op, "Gemm");
    qr_value *b = (conv || gemm) && n->n_in > 2 ? n->in[2] : NULL;
    const qr_tensor *w = &n->in[1]->t;
    int64_t cols = gemm && w->ndim == 2 ? w->dims[qr_attr_i(n, "transB", 0) ? 0 : 1] : 0;
    if (gemm && (qr_attr_i(n, "transA", 0) || w->ndim != 2 ||
                 (b && (b->t.ndim < 0 || (qr_tensor_numel(&b->t) != 1 && qr_tensor_numel(&b->t) != cols)))))
        return;
    qr_value **in = qr_arena_alloc(&g->arena, sizeof *in * 5);
    if (!in)
        return; /* out of memory: as the graph's other allocations, found by qr_graph_check_oom */
    in[0] = n->in[0];
    in[1] = n->in[1];
    in[2] = b;
    in[3] = xs;
    in[4] = ws;
    n->in = in;
    n->n_in = 5;
    n->op = "QrlAccSim";
    n->domain = "qrl";
    n->opset = 1;
    n->def = qr_op_find_in(qr_ops_quantizer, "qrl", "QrlAccSim");
    qr_node_add_attr_i(g, n, "bits", q->acc_bits);
    qr_node_add_attr_i(g, n, "saturate", q->acc_saturate);
    qr_node_add_attr_i(g, n, "conv", conv);
    qr_node_add_attr_i(g, n, "gemm", gemm);
}

/* The axis of a product's weight along its output channels: 0 for a Conv ([M, C, ...]) and a Gemm
 * with transB ([N, K]), 1 for a MatMul and another Gemm ([K, N]). */
static int out_axis(const qr_node *n)
{
    return !strcmp(n->op, "Conv") || (!strcmp(n->op, "Gemm") && qr_attr_i(n, "transB", 0)) ? 0 : 1;
}

/* accumulate = iN: node n of the simulated graph, a Conv or MatMul of a match whose operands are
 * quantized (an activation by a weight or by another activation), becomes QrlAccSim, which keeps
 * its accumulator as the integer graph's QrlAccInteger does (quantizer/accwidth.h). */
static void narrow_sim(const qr_qctx *q, qr_graph *sim, qr_node *n, qr_value **scales)
{
    const qr_node *o = q->g->nodes[n->id];
    int conv = !strcmp(o->op, "Conv");
    if (n->dead || (!conv && strcmp(o->op, "MatMul") && strcmp(o->op, "Gemm")) || o->n_in < 2 || !o->in[0] ||
        !o->in[1])
        return;
    int in_match = 0;
    for (int k = 0; k < q->nmatches && !in_match; k++)
        for (int j = 0; j < q->matches[k].nnodes && !in_match; j++)
            in_match = q->matches[k].nodes[j] == o->id;
    int xv = o->in[0]->id, wv = o->in[1]->id;
    qr_value *xs = in_match && !q->dyn[xv] && q->slot_of[xv] >= 0 ? sim_scale(q, q->slot_of[xv], scales) : NULL;
    const qr_wquant *w = qr_plan_weight(q, wv);
    qr_value *ws = NULL;
    char name[512];
    if (w && (w->axis < 0 || w->axis == out_axis(o))) { /* per tensor, or per output channel */
        float *sc = malloc(sizeof *sc * (size_t)(w->nch + 1));
        if (!sc)
            return;
        for (int c = 0; c < w->nch; c++)
            sc[c] = w->scale[c];
        qr_tensor t = {.dtype = QR_F32, .ndim = 1, .dims = {w->nch}, .data = sc};
        snprintf(name, sizeof name, "%s_sim_scale", o->in[1]->name);
        ws = qr_plan_const(sim, name, &t);
        free(sc);
    } else if (!w && !strcmp(o->op, "MatMul") && !q->dyn[wv] && q->slot_of[wv] >= 0) { /* two activations */
        ws = sim_scale(q, q->slot_of[wv], scales);
    }
    if (xs && ws) /* else not on integers (nor on QrlAccInteger in the integer graph) */
        to_accsim(q, sim, n, xs, ws);
}

/* The QDQ graph as measurements run it (per tensor SQNR, the fallback's ranking): a copy (*owned,
 * the caller frees it) whose Convs of quantized inputs by quantized weights run on the integer
 * kernels (QrlGridConv, gridconv.h: the sums of the same products, without their f32 rounding),
 * or with accumulate = iN whose matched Conv and MatMul nodes keep their accumulators narrow
 * (QrlAccSim, their operands' scales from their DequantizeLinears). The export stays ONNX's. */
qr_status qr_plan_measured_qdq(const qr_qctx *q, const qr_graph *qdq, const qr_graph **g, qr_graph **owned)
{
    *g = qdq;
    *owned = NULL;
    qr_graph *c = qr_graph_clone_shared(qdq);
    if (!c)
        return qr_errorf(q->e, "out of memory");
    if (!q->acc_narrow)
        qr_gridconv_lower(c);
    for (int k = 0; q->acc_narrow && k < q->nmatches; k++)
        for (int j = 0; j < q->matches[k].nnodes; j++) {
            const qr_node *o = q->g->nodes[q->matches[k].nodes[j]];
            int at = q->qnode[o->id];
            qr_node *n = at >= 0 && at < c->n_nodes ? c->nodes[at] : NULL;
            if (!n || n->dead || (strcmp(o->op, "Conv") && strcmp(o->op, "MatMul") && strcmp(o->op, "Gemm")) ||
                n->n_in < 2 || !n->in[0] || !n->in[1])
                continue;
            const qr_node *xd = n->in[0]->producer, *wd = n->in[1]->producer;
            if (!xd || !wd || strcmp(xd->op, "DequantizeLinear") || strcmp(wd->op, "DequantizeLinear") || xd->n_in < 2 ||
                wd->n_in < 2 || !xd->in[1] || !wd->in[1] || qr_tensor_numel(&xd->in[1]->t) != 1)
                continue;
            int64_t nw = qr_tensor_numel(&wd->in[1]->t), axis = qr_attr_i(wd, "axis", 1);
            if (nw != 1 && axis != out_axis(n)) /* one scale per output channel, or one */
                continue;
            to_accsim(q, c, n, xd->in[1], wd->in[1]);
        }
    qr_status st = qr_graph_check_oom(c, q->e);
    if (st == QR_OK)
        *g = *owned = c;
    else
        qr_graph_free(c);
    return st;
}

/* A large 8-bit weight of the simulated graph as its integers and a DequantizeLinear: the values
 * qr_plan_fake_quant gives ((q - z) * scale, q = rint(w / scale) + z clamped), computed when a
 * run reaches them instead of held in f32 beside the model's weights (a quarter of the memory). */
static qr_status sim_weight_dq(qr_qctx *q, qr_graph *sim, const qr_wquant *w, int64_t inner, qrl_qtype qt)
{
    qr_value *v = sim->values[w->value];
    int64_t n = qr_tensor_numel(&v->t);
    qr_tensor ints = {.dtype = w->dtype, .ndim = v->t.ndim};
    memcpy(ints.dims, v->t.dims, sizeof ints.dims);
    if (qr_tensor_alloc(&ints, q->e) != QR_OK)
        return QR_ERR;
    unsigned char *zeros = calloc((size_t)w->nch, qr_dtype_size(w->dtype));
    const float *src = v->t.data;
    int64_t run = w->axis < 0 ? n : inner; /* elements in a row that share a channel */
    for (int64_t j0 = 0; j0 < n; j0 += run) {
        int c = w->axis < 0 ? 0 : (int)((j0 / inner) % w->nch);
        const float sc = w->scale[c], z = (float)w->zero[c], lo = (float)qt.qmin, hi = (float)qt.qmax;
        for (int64_t j = j0; j < j0 + run; j++) {
            float x = src[j] / sc;
            x = x == x ? x : 0.0f;
            x = __builtin_rintf(x) + z;
            x = x <= lo ? lo : x >= hi ? hi : x;
            if (w->dtype == QR_I8) /* the only two types it is called for */
                ((int8_t *)ints.data)[j] = (int8_t)x;
            else
                ((uint8_t *)ints.data)[j] = (uint8_t)x;
        }
    }
    for (int c = 0; zeros && c < w->nch; c++)
        qr_set_i64(zeros, w->dtype, c, w->zero[c]);
    qr_value *dv = zeros ? insert_dq_const(sim, v, &ints, w->scale, zeros, w->dtype, w->nch, w->axis) : NULL;
    free(zeros);
    qr_tensor_free(&ints);
    return dv ? QR_OK : qr_errorf(q->e, "out of memory");
}

/* The simulated graph: fake-quantized weights, SimQuant on calibrated and fixed slots. */
static qr_status build_sim(qr_qctx *q, qr_graph **out)
{
    qr_graph *sim = qr_graph_clone_shared(q->g);
    if (!(*out = sim))
        return qr_errorf(q->e, "out of memory");
    int nodes = sim->n_nodes; /* the model's nodes (narrow_sim maps them to q->g's by id) */
    for (int i = 0; i < q->nw; i++) {
        const qr_wquant *w = &q->w[i];
        qr_value *v = sim->values[w->value];
        int64_t n = qr_tensor_numel(&v->t), inner = 1;
        for (int k = w->axis + 1; w->axis >= 0 && k < v->t.ndim; k++)
            inner *= v->t.dims[k];
        qrl_qtype qt = qr_plan_qtype(q, w->dtype, w->narrow, w->axis);
        if ((w->dtype == QR_I8 || w->dtype == QR_U8) && qr_tensor_nbytes(&v->t) >= QR_BLOB_MIN) {
            if (sim_weight_dq(q, sim, w, inner, qt) != QR_OK)
                return QR_ERR;
            continue;
        }
        float *d = qr_value_writable(sim, v); /* its own copy: the weights are shared with q->g */
        if (!d)
            return qr_errorf(q->e, "out of memory");
        for (int64_t j = 0; j < n; j++) {
            int c = w->axis < 0 ? 0 : (int)((j / inner) % w->nch);
            qr_plan_fake_quant(&d[j], &d[j], 1, w->scale[c], w->zero[c], qt.qmin, qt.qmax);
        }
    }
    qr_value **scales = q->acc_narrow ? calloc((size_t)q->nslots + 1, sizeof *scales) : NULL;
    if (q->acc_narrow && !scales)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++)
        if (q->slots[i].kind != SLOT_SAME)
            insert_simquant(sim, sim->values[q->slots[i].value], i, scales ? &scales[i] : NULL);
    for (int k = 0; scales && k < nodes; k++)
        narrow_sim(q, sim, sim->nodes[k], scales);
    free(scales);
    qr_status st = qr_graph_check_oom(sim, q->e);
    if (st == QR_OK)
        st = qr_graph_toposort(sim, q->e);
    if (st != QR_OK)
        qr_error_prefix(q->e, "building the simulated graph");
    return st;
}

/* "same as" chains end at a calibrated or fixed slot: each takes its qparams. */
static void resolve_same(qr_qctx *q)
{
    for (int i = 0; i < q->nslots; i++) {
        int k = i, hops = 0;
        while (q->slots[k].kind == SLOT_SAME && hops++ <= q->nslots)
            k = q->slots[k].same;
        q->slots[i].qp = q->slots[k].qp;
        if (q->slots[i].kind == SLOT_SAME)
            q->slots[i].same = k;
    }
}

/* What ships is what is checked: the recipe's `tolerance = dB` bounds how much SQNR a tensor may
 * lose in the integer graph against the QDQ simulation (what the export describes); beyond it,
 * no export (a rule or kernel computes something else than its op). */
static qr_status check_agreement(qr_qctx *q, const qr_quantized *res)
{
    const qr_setting *tol = qr_recipe_setting(q->r, QR_SET_TOLERANCE);
    if (!tol)
        return QR_OK;
    double t = tol->value;
    /* in graph order: the first tensor apart is the cause, those after it inherit its error */
    for (int k = 0; k < q->g->n_nodes; k++) {
        const qr_node *n = q->g->nodes[k];
        int si = !n->dead && n->n_out > 0 && n->out[0] ? q->slot_of[n->out[0]->id] : -1;
        const qr_slot *s = si >= 0 ? &q->slots[si] : NULL;
        if (!s || s->fallback || q->qval[s->value] < 0 || s->ise2 <= 0)
            continue;
        double sim = qr_plan_sqnr(s), ints = 10.0 * log10(s->isx2 / s->ise2);
        if (isfinite(sim) && ints < sim - t) {
            const qr_value *v = q->g->values[s->value];
            const char *runs = res->ig->runs[s->value];
            return qr_errorf(q->e, "recipe '%s': tensor '%s' (%s, runs as %s) has %.1f dB in the integer graph but "
                                   "%.1f dB in the QDQ simulation the export describes, more than the recipe's "
                                   "tolerance of %g dB apart",
                             q->r->name, v->name, v->producer ? v->producer->op : "input", runs ? runs : "f32", ints,
                             sim, t);
        }
    }
    return QR_OK;
}

/* Under mpirun, after every rank solved rank 0's states: whether they all hold rank 0's qparams
 * (a calibrator whose typed layout left part of its state out would solve otherwise on the others,
 * and their measurements would not be rank 0's). A 64-bit FNV-1a of every slot's scale, zero point
 * and fallback. */
static qr_status same_qparams(qr_qctx *q)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < q->nslots; i++) {
        const qr_slot *s = &q->slots[i];
        int64_t v[3] = {s->qp.zero, s->fallback, 0};
        memcpy(&v[2], &s->qp.scale, sizeof v[2]);
        const unsigned char *b = (const unsigned char *)v;
        for (size_t k = 0; k < sizeof v; k++)
            h = (h ^ b[k]) * 0x100000001b3ULL;
    }
    const unsigned char *d = (const unsigned char *)&h;
    const char *what = "the qparams solved from rank 0's calibration states: a calibrator's add_state layout "
                       "misses part of its state";
    return qr_dist_same(&d, &what, 1, sizeof h, q->e);
}

/* Calibration over the samples, then the QDQ graph, its measurement against f32 and the
 * recipe's fallback (which rebuilds the QDQ graph without the tensors that fail it). */
static qr_status calibrate_on(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count,
                              const qr_tensor *judge, int64_t njudge);

/* How many of count samples the recipe's validate = f would hold out (the last ones; whole batches
 * of a fixed-batch model, at least one when f > 0): 0 without validate. */
static int64_t validate_wanted(const qr_recipe *r, int64_t count, int64_t fixed)
{
    const qr_setting *vs = qr_recipe_setting(r, QR_SET_VALIDATE);
    double frac = vs ? vs->value : 0;
    int64_t nval = (int64_t)floor((double)count * frac), step = fixed > 1 ? fixed : 1;
    nval -= nval % step;
    if (frac > 0 && nval < step)
        nval = step;
    return nval;
}

/* The recipe's validate_least = n (0: none): the fewest samples validate may hold out. */
static int64_t validate_least(const qr_recipe *r)
{
    const qr_setting *s = qr_recipe_setting(r, QR_SET_VALIDATE_LEAST);
    return s ? (int64_t)s->value : 0;
}

/* How many of count samples validate holds out: validate_wanted, or none when that is fewer than
 * the recipe's validate_least (a file too small to judge on held-out samples: everything calibrates
 * and judges, and calibrate() says so). */
static int64_t validate_count(const qr_recipe *r, int64_t count, int64_t fixed)
{
    int64_t nval = validate_wanted(r, count, fixed);
    return nval < validate_least(r) ? 0 : nval;
}

static int spread_stream_held(const qr_quant_opts *o, int on);
static int64_t spread_watch_held(const qr_quant_opts *o, int on);

static qr_status calibrate(qr_qctx *q, qr_quantized *res, const qr_tensor *calib)
{
    const qr_graph *g = q->g;
    int64_t count = calib->dims[0];
    if (q->o->calib_count > 0 && q->o->calib_count < count)
        count = q->o->calib_count;
    int64_t fixed = qr_graph_fixed_batch(g);
    if (fixed > 1) { /* whole batches only */
        if (count < fixed)
            return qr_errorf(q->e, "the model takes batches of exactly %lld samples (input '%s'), the calibration "
                                   "set has %lld", (long long)fixed, g->inputs[0]->name, (long long)count);
        count -= count % fixed;
    }
    /* validate = f: the last f of the samples are held out, for the fallback's decisions and the
     * output SQNR; whole batches of a fixed-batch model */
    const qr_setting *vs = qr_recipe_setting(q->r, QR_SET_VALIDATE);
    double frac = vs ? vs->value : 0;
    int64_t nval = validate_count(q->r, count, fixed), step = fixed > 1 ? fixed : 1;
    if (frac > 0 && count - nval < step)
        return qr_errorf(q->e, "recipe '%s': validate = %g of %lld calibration samples leaves none to calibrate on",
                         q->r->name, frac, (long long)count);
    int64_t want = validate_wanted(q->r, count, fixed), least = validate_least(q->r);
    if (nval == 0 && want > 0) { /* validate_least: the file is too small to hold out enough */
        int64_t need = count; /* the fewest samples whose split holds out validate_least */
        while (validate_wanted(q->r, need, fixed) < least && need < INT64_MAX / 2)
            need += step;
        res->validate_skipped = want;
        if (plan_note(q, "recipe '%s': validate = %g of %lld calibration samples holds out %lld, fewer than its "
                         "validate_least = %lld: none is held out, and the fallback's decisions and the output "
                         "SQNR are judged on the %lld samples calibrated on (%lld or more hold out enough)",
                      q->r->name, frac, (long long)count, (long long)want, (long long)least, (long long)count,
                      (long long)need) != QR_OK)
            return QR_ERR;
    }
    count -= nval;
    qr_tensor *val = calloc((size_t)g->n_inputs + 1, sizeof *val);
    if (!val)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < g->n_inputs; i++) { /* samples [count, count + nval) of each input, as views */
        size_t row = qr_tensor_nbytes(&calib[i]) / (size_t)(calib[i].dims[0] ? calib[i].dims[0] : 1);
        val[i] = calib[i];
        val[i].dims[0] = nval;
        val[i].data = (char *)calib[i].data + (size_t)count * row;
    }
    int nodes = qr_exec_count_nodes(g);
    res->pass_node_samples = (int64_t)nodes * (count + nval);
    res->calibrate_pass_node_samples = (int64_t)nodes * count;
    res->validate_pass_node_samples = (int64_t)nodes * (nval ? nval : count);
    qr_status st = calibrate_on(q, res, calib, count, nval ? val : calib, nval ? nval : count);
    spread_stream_held(q->o, 0); /* after an error too: whatever reads the copy next finds them there */
    res->validate_samples = nval;
    free(val);
    return st;
}

/* Where the f32 pass records the ranges of the values quantized at run time (none: nothing). */
static qr_status new_dyn_ranges(qr_qctx *q)
{
    int any = 0;
    for (int i = 0; i < q->g->n_values && !any; i++)
        any = q->dyn[i] != DYN_NONE;
    if (!any || q->dyn_lo)
        return QR_OK;
    q->dyn_lo = malloc(sizeof *q->dyn_lo * (size_t)(q->g->n_values + 1));
    q->dyn_hi = malloc(sizeof *q->dyn_hi * (size_t)(q->g->n_values + 1));
    if (!q->dyn_lo || !q->dyn_hi)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->g->n_values; i++)
        q->dyn_lo[i] = INFINITY, q->dyn_hi[i] = -INFINITY;
    return QR_OK;
}

static void spread_hold(const qr_quant_opts *o, const qr_tensor *calib, int hold);
static void spread_drop(const qr_quant_opts *o, const qr_tensor *calib, int64_t keep);

/* The f32 pass whose outputs of the first keep_cal batches (ncal samples) are kept (q->calib_out)
 * for the output SQNR on the calibration samples, and for calibrate_samples' judge. */
static qr_status calib_f32_pass(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count, int64_t ncal,
                                int keep_cal)
{
    if (!(q->calib_out = calloc((size_t)keep_cal * (size_t)q->g->n_outputs + 1, sizeof *q->calib_out)))
        return qr_errorf(q->e, "out of memory");
    q->calib_out_nb = keep_cal;
    /* over the samples the figure is measured on alone, unless values quantized at run time
     * want their ranges over all (for the report); its time scaled to all, and said so */
    int64_t nrun = q->dyn_lo ? count : ncal;
    qr_status st = run_batches(q, q->g, calib, nrun, 0, "fp32     ", &res->fp32_ms);
    if (st != QR_OK)
        return st;
    if (nrun < count)
        res->fp32_ms *= (double)count / (double)nrun, res->fp32_samples = nrun;
    qr_plan_phase(q, res, "fp32 pass");
    return QR_OK;
}

/* A step figure's run (q->steps_only): every layer the recipe quantizes quantized, the integer
 * graph's outputs against f32 on the judge samples (when held out) and on the calibration samples
 * output_sqnr_calib is measured on; no fallback. */
static qr_status step_outputs(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count,
                              const qr_tensor *judge, int64_t njudge)
{
    qr_status st = qr_plan_build_qdq(q, res);
    if (st == QR_OK && !res->ig && (st = qr_intgraph_build(q, res->qdq, &res->ig, q->e)) != QR_OK)
        qr_error_prefix(q->e, "recipe '%s'", q->r->name);
    int was = qr_exec_account(QR_RUNS_VALIDATE);
    if (st == QR_OK && judge != calib)
        st = qr_measure_output_sqnr(q, res, judge, njudge, &q->step_val);
    qr_exec_account(was);
    if (st == QR_OK)
        st = qr_measure_output_sqnr(q, res, calib, judge != calib ? qr_measure_calib_figure_samples(q, count) : count,
                                    &q->step_cal);
    return st;
}

/* Calibration on count samples of calib, then the fallback's decisions and every SQNR on the
 * judge samples (held out, or the same ones). */
static qr_status calibrate_on(qr_qctx *q, qr_quantized *res, const qr_tensor *calib, int64_t count,
                              const qr_tensor *judge, int64_t njudge)
{
    const qr_graph *g = q->g;
    qr_graph *sim = NULL;
    qr_plan_phase_start(q);
    qr_status st = new_calibrators(q, calib, count);
    /* judged on the samples it calibrates on: the f32 pass keeps the outputs the fallback's first
     * try is judged against (the same as the local measurement's f32 run gives); it then runs
     * after calibration, so that they are not held through it (M-LSD tiny's 48 MB were its peak) */
    int keep = !q->steps_only && judge == calib ? qr_measure_kept_batches(q, njudge) : 0;
    /* judged on other samples: the f32 pass runs after the fallback instead, keeping the outputs
     * the output SQNR on the calibration samples is measured against (its only reader before
     * then: the dynamic values' ranges, for the report) */
    int64_t ncal = judge != calib ? qr_measure_calib_figure_samples(q, count) : count;
    int keep_cal = !q->steps_only && judge != calib ? qr_measure_calib_batches(q, ncal) : 0;
    if (st == QR_OK)
        st = build_sim(q, &sim);
    if (st == QR_OK)
        st = new_dyn_ranges(q);
    /* the local measurement's f32 run over all of them is the f32 pass too, when nothing is
     * quantized at run time (the f32 pass observes those values' ranges) */
    int64_t kb = qr_plan_batch(q);
    q->f32_in_measure = keep > 0 && !q->dyn_lo && (int64_t)keep * kb >= count ? keep : 0;
    if (q->f32_in_measure)
        keep = 0;
    if (st == QR_OK && keep > 0 && !(q->f32_out = calloc((size_t)keep * (size_t)g->n_outputs + 1, sizeof *q->f32_out)))
        st = qr_errorf(q->e, "out of memory");
    /* a step figure's run reads no f32 pass but for the dynamic values' ranges */
    if (st == QR_OK && !keep && !q->f32_in_measure && !keep_cal && (!q->steps_only || q->dyn_lo))
        st = run_batches(q, g, calib, count, 0, "fp32     ", &res->fp32_ms);
    if (!keep && !q->f32_in_measure && !keep_cal)
        qr_plan_phase(q, res, "fp32 pass");
    /* nothing to calibrate where every activation is quantized at run time (a dynamic recipe): the
     * calibration run would compute the f32 pass again (M-LSD large: 11 of its 56 s) */
    if (st == QR_OK && q->nslots > 0)
        st = run_batches(q, sim, calib, count, 1, "calibrate", &res->calib_ms);
    qr_graph_free(sim);
    /* Final choice: every calibrated slot solves over all it saw. */
    for (int i = 0; st == QR_OK && i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        if (s->kind == SLOT_CALIBRATED && (st = qr_calib_solve(s->cal, &s->qt, &s->qp, q->e)) != QR_OK)
            qr_error_prefix(q->e, "value '%s'", g->values[s->value]->name);
        else if (s->kind == SLOT_CALIBRATED && (!isfinite(s->qp.scale) || !(s->qp.scale > 0) ||
                                               !isfinite((float)s->qp.scale) || (float)s->qp.scale == 0)) {
            /* one tensor that cannot be calibrated stays f32; the rest goes on */
            st = plan_note(q, "value '%s' stays f32: the calibrator gives scale %g for the range it saw, [%g, %g]",
                           g->values[s->value]->name, s->qp.scale, s->lo, s->hi);
            s->fallback = 1;
            s->qp = (qrl_qparams){1.0, 0};
        }
    }
    if (st != QR_OK)
        return st;
    resolve_same(q);
    for (int i = 0; i < q->nslots; i++) /* the export stores f32 scales: what runs uses them too */
        q->slots[i].qp.scale = (float)q->slots[i].qp.scale;
    if (qr_dist_size() > 1 && (st = same_qparams(q)) != QR_OK)
        return st;
    res->samples = count;
    res->batch = qr_plan_batch(q);
    res->acc_bits = q->acc_bits;
    res->acc_saturate = q->acc_saturate;
    qr_plan_phase(q, res, "calibration");
    if (q->steps_only)
        return step_outputs(q, res, calib, count, judge, njudge);
    if (keep > 0) { /* the f32 pass, its outputs kept */
        q->f32_out_nb = keep;
        if ((st = run_batches(q, g, calib, count, 0, "fp32     ", &res->fp32_ms)) != QR_OK)
            return st;
        qr_plan_phase(q, res, "fp32 pass");
    }
    /* calibrate_samples = F: the fallback judges its tries on the first ncal calibration samples
     * too; their f32 pass runs before it (below otherwise), and they stay in memory through it */
    int cal_judge = judge != calib && q->calib_samples_fn && q->r->fallback && ncal > 0;
    if (cal_judge && keep_cal > 0 && (st = calib_f32_pass(q, res, calib, count, ncal, keep_cal)) != QR_OK)
        return st;
    q->cal_in = cal_judge ? calib : NULL, q->cal_n = cal_judge ? ncal : 0;
    /* the fallback reads the held-out samples alone (and those): validate_from = spread's copy of
     * the calibrating ones leaves memory until the passes over them below */
    spread_drop(q->o, calib, q->cal_n);
    /* and, through the fallback and the measurement of what ships, the held-out ones a batch at a
     * time (each run takes its batch's: qr_plan_take_inputs) */
    spread_stream_held(q->o, 1);
    spread_watch_held(q->o, 1);
    st = qr_plan_build_qdq(q, res);
    int was = qr_exec_account(QR_RUNS_VALIDATE); /* the fallback runs on the judge samples */
    if (st == QR_OK)
        st = qr_plan_fallback(q, res, judge, njudge);
    qr_exec_account(was);
    q->cal_in = NULL, q->cal_n = 0;
    if (st != QR_OK)
        return st;
    qr_plan_drop_rounded(q); /* what ships holds its weights' integers; the others' go */
    /* the passes over the calibration samples below: the f32 pass (streamed, run_batches) and the
     * output SQNR on the first ncal of them, which stay */
    spread_drop(q->o, calib, ncal);
    res->output_sqnr_calib = res->output_sqnr;
    if (res->mixed && judge == calib) /* mixed precision measured its points on the calibration samples */
        res->mixed->heldout_samples = 0;
    /* nothing quantized: the output SQNR on the calibration samples needs no f32 outputs (inf), and
     * no value is quantized at run time, whose ranges the pass observes: no pass (res->fp32_ms 0) */
    if (keep_cal > 0 && !q->dyn_lo && qr_measure_computes_reference(q, res))
        keep_cal = 0;
    if (keep_cal > 0 && !cal_judge && (st = calib_f32_pass(q, res, calib, count, ncal, keep_cal)) != QR_OK)
        return st;
    if (judge != calib && (st = qr_measure_output_sqnr(q, res, calib, ncal, &res->output_sqnr_calib)) != QR_OK)
        return st;
    res->calib_figure_samples = judge != calib ? qr_measure_figure_count(q, ncal) : count;
    if (judge != calib)
        qr_plan_phase(q, res, "outputs on the calibration samples");
    spread_hold(q->o, calib, 0); /* the measurement of what ships runs on the judge samples */
    /* each tensor as it ships: cumulative error in the QDQ simulation and in the integer graph
     * (measured beside the local measurement already when the fallback's first try held) */
    for (int i = 0; res->ig && !q->shipped && i < res->ig->naccs; i++) /* the narrow accumulators count this run */
        res->ig->accs[i].sums = res->ig->accs[i].overflows = 0;
    for (int i = 0; i < q->nslots; i++)
        q->slots[i].acc_on = 0, q->slots[i].acc_sums = q->slots[i].acc_over = 0;
    was = qr_exec_account(QR_RUNS_VALIDATE);
    if (!q->shipped)
        st = qr_measure_shipped(q, res, judge, njudge);
    qr_exec_account(was);
    if (st != QR_OK)
        return st;
    qr_plan_phase(q, res, "measurement of what ships");
    /* what ships against the recipe's own condition on the outputs: the fallback meets it by
     * sending layers and values quantized at run time to f32, unless nothing it may send back
     * does (a condition no output meets); the values it sent back, counted */
    int ndyn = 0, ndyn_f32 = 0;
    for (int i = 0; q->dyn && i < q->g->n_values; i++)
        ndyn += q->dyn[i] != 0, ndyn_f32 += q->dyn[i] && q->dyn_f32[i];
    if (q->r->fallback && ndyn && (st = plan_note(q, "recipe '%s': the fallback sent %d of the %d values quantized at "
                                                     "run time to f32", q->r->name, ndyn_f32, ndyn)) != QR_OK)
        return st;
    if (q->r->fallback && !qr_measure_outputs_meet(q, res)) {
        st = plan_note(q, "recipe '%s': what ships misses its fallback condition on the outputs (output SQNR %.1f dB)",
                       q->r->name, res->output_sqnr);
        if (st != QR_OK)
            return st;
    }
    for (int i = 0; res->ig && i < res->ig->naccs; i++) {
        const qr_acc_counter *c = &res->ig->accs[i];
        int si = c->value >= 0 ? q->slot_of[c->value] : -1;
        if (si >= 0) {
            q->slots[si].acc_on = 1;
            q->slots[si].acc_sums += c->sums;
            q->slots[si].acc_over += c->overflows;
        }
    }
    res->held_out_peak_samples = spread_watch_held(q->o, 0);
    res->effects_copied_bytes = q->effects_copied_bytes;
    res->effects_run_samples = q->effects_run_samples, res->shipped_run_samples = q->shipped_run_samples;
    spread_stream_held(q->o, 0);
    res->top1_fp32 = res->top1_int8 = NAN;
    if (q->o->labels) {
        spread_hold(q->o, calib, 1);
        if (!(q->top1 = calloc((size_t)q->nslots + 1, sizeof *q->top1)))
            return qr_errorf(q->e, "out of memory");
        if ((st = qr_measure_top1(q, res, calib, q->o->labels, count, q->top1)) != QR_OK)
            return st;
    }
    /* under mpirun every rank took part in the measurements and the search (qmeasure.c) and holds
     * the same decisions; rank 0 alone exports */
    res->calib_only = qr_dist_rank() != 0;
    return check_agreement(q, res);
}

/* The activation types a loaded QDQ model may use. */
static int file_act_type(qr_dtype t)
{
    return t == QR_U8 || t == QR_I8 || t == QR_U16 || t == QR_I16;
}

/* A loaded QDQ model (qr_qdq_strip): every slot takes the file's qparams; a slot the file leaves
 * in f32 stays f32, and a tensor the file quantizes that no rule claims keeps its Q/DQ pair. */
static qr_status take_file_qparams(qr_qctx *q)
{
    const qr_graph *g = q->g;
    for (int i = 0; i < g->n_values; i++) {
        const qr_value *v = g->values[i];
        if (!v->is_const && v->q && v->q->n == 1 && file_act_type(v->q->dtype) && q->slot_of[i] < 0 &&
            (v->producer || v->is_input) && add_slot(q, i, SLOT_FIXED, -1) < 0)
            return qr_errorf(q->e, "out of memory");
    }
    for (int i = 0; i < q->nslots; i++) {
        qr_slot *s = &q->slots[i];
        const qr_qinfo *qi = g->values[s->value]->q;
        s->kind = SLOT_FIXED;
        s->solved = 1;
        if (qi && qi->n == 1 && file_act_type(qi->dtype)) {
            s->qp = (qrl_qparams){qi->scale[0], qi->zero[0]};
            s->dtype = qi->dtype; /* the file's type, tensor by tensor */
            s->qt = qr_qtype_of(qi->dtype, 0, -1);
        } else {
            s->fallback = 1;
        }
    }
    return QR_OK;
}

/* The activation types of a stripped QDQ model: 8 or 16 bits, tensor by tensor (a recipe's
 * `activation for` mixes them); the most common one stands for the recipe's activation type. */
static qr_status file_act_dtype(qr_qctx *q)
{
    const qr_graph *g = q->g;
    int count[QR_DTYPE_COUNT] = {0};
    q->act_dtype = QR_UNDEF;
    for (int i = 0; i < g->n_values; i++) {
        const qr_value *v = g->values[i];
        if (v->is_const || !v->q || !file_act_type(v->q->dtype))
            continue;
        if (++count[v->q->dtype] > (q->act_dtype == QR_UNDEF ? 0 : count[q->act_dtype]))
            q->act_dtype = v->q->dtype;
    }
    if (q->act_dtype == QR_UNDEF)
        return qr_errorf(q->e, "the model has no quantized activations");
    q->act_narrow = 0;
    q->w_per_channel = 1;
    return QR_OK;
}

/* Each quantized tensor, for reports and the quantization-info JSON. */
static qr_status fill_layers(const qr_qctx *q, qr_quantized *res)
{
    const qr_graph *g = q->g;
    int ndyn = 0;
    for (int i = 0; i < g->n_values; i++)
        ndyn += q->dyn[i] != DYN_NONE;
    res->layers = calloc((size_t)(q->nslots + ndyn) + 1, sizeof *res->layers);
    if (!res->layers)
        return qr_errorf(q->e, "out of memory");
    for (int i = 0; i < q->nslots; i++) {
        const qr_slot *s = &q->slots[i];
        const qr_value *v = g->values[s->value];
        qr_qlayer *l = &res->layers[res->nlayers++];
        l->value = res->qdq->values[s->value]->name;
        l->op = v->producer ? v->producer->op : "input";
        l->how = s->kind == SLOT_CALIBRATED ? "calibrated" : s->kind == SLOT_FIXED ? "fixed" : "same";
        l->dtype = s->dtype;
        l->lo = s->kind == SLOT_SAME ? q->slots[s->same].lo : s->lo;
        l->hi = s->kind == SLOT_SAME ? q->slots[s->same].hi : s->hi;
        l->scale = s->qp.scale;
        l->zero = s->qp.zero;
        l->qmin = s->qt.qmin;
        l->qmax = s->qt.qmax;
        l->sqnr = qr_plan_sqnr(s);
        l->sqnr_local = qr_plan_local_sqnr(s);
        l->effect = s->effect;
        l->macs = s->macs;
        l->top1_delta = q->top1 ? q->top1[i] : NAN;
        l->sqnr_int = s->fallback || q->qval[s->value] < 0 ? NAN
                      : s->ise2 <= 0 ? INFINITY : 10.0 * log10(s->isx2 / s->ise2);
        l->clipped = s->n > 0 ? s->clipped / s->n : 0;
        l->acc_on = s->acc_on;
        l->acc_sums = s->acc_sums;
        l->acc_overflows = s->acc_over;
        l->fallback = s->fallback;
        l->step16 = s->step16;
        l->effect16 = s->effect16;
        l->runs = s->fallback ? "f32 (fallback)"
                  : res->ig->runs[s->value] ? res->ig->runs[s->value]
                  : v->producer ? "f32, then quantized" : "quantized input";
    }
    for (int i = 0; i < g->n_values; i++) { /* quantized at run time: no qparams to show, a range seen */
        if (q->dyn[i] == DYN_NONE)
            continue;
        const qr_value *v = g->values[i];
        int rows = q->dyn[i] == DYN_ROW, seen = q->dyn_lo && q->dyn_lo[i] <= q->dyn_hi[i];
        res->layers[res->nlayers++] = (qr_qlayer){
            .value = res->qdq->values[i]->name, .op = v->producer ? v->producer->op : "input",
            .how = rows ? "dynamic per row" : "dynamic per tensor", .dynamic = rows ? 2 : 1, .dtype = q->act_dtype,
            .lo = seen ? q->dyn_lo[i] : NAN, .hi = seen ? q->dyn_hi[i] : NAN, .scale = NAN, .qmin = 0, .qmax = 255,
            .sqnr = NAN, .sqnr_local = q->dyn_sqnr[i], .effect = q->dyn_effect[i], .macs = q->dyn_macs[i], .top1_delta = NAN, .sqnr_int = NAN,
            .step16 = -1, .effect16 = NAN, .fallback = q->dyn_f32[i],
            .runs = q->dyn_f32[i] ? "f32 (fallback)"
                    : rows        ? "quantized at run time, per row (DynamicQuantizeRows)"
                                  : "quantized at run time, per tensor (DynamicQuantizeLinear)"};
        res->ndynamic++;
    }
    res->recipe = q->r->name;
    res->nodes_pattern = q->nodes_pattern;
    res->nodes_affine = q->nodes_affine;
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++)
        live += !g->nodes[i]->dead;
    res->nodes_float = live - q->nodes_pattern - q->nodes_affine;
    return QR_OK;
}

static qr_status quantize(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, qr_quantized **out,
                          qr_error *e, int transformed, const qr_graph *ref);

/* The QDQ graph as the file says it: dynamically quantized Convs in ONNX Runtime's integer
 * operators (export_dynamic.h). */
static qr_status export_form(const qr_qctx *q, qr_graph *d, qr_error *e)
{
    int n = qr_export_dynamic_convs(d), wide = 0;
    if (n < 0)
        return qr_graph_check_oom(d, e) != QR_OK ? QR_ERR : qr_errorf(e, "out of memory");
    for (int i = 0; i < q->nslots; i++)
        wide |= !q->slots[i].fallback && (q->slots[i].dtype == QR_U16 || q->slots[i].dtype == QR_I16);
    for (int i = 0; i < q->nw; i++) /* a 4-bit weight that stays quantized (W4A8) */
        wide |= qr_dtype_is_packed(q->w[i].dtype) && !qr_plan_const_falls_back(q, q->w[i].value);
    for (int i = 0; i < q->nbias; i++) /* bias = i16 */
        wide |= q->bias_dtype == QR_I16 && q->qval[q->bias[i].value] >= 0;
    /* QuantizeLinear and DequantizeLinear take 16-bit and 4-bit integers from opset 21 */
    if (wide && qr_pass_raise_opset(d, 21, e) != QR_OK)
        return QR_ERR;
    return n ? qr_graph_toposort(d, e) : QR_OK;
}

/* qr_transform_weights_fn: the plan and weight quantization of recipe o->recipe on g (nothing
 * calibrated), each weight dequantized as the export's integers give it back, and with alt each
 * element's other rounding. An element within 1/1000 of a step of the grid has none (moving it a
 * whole step is no rounding choice), nor has one at an end of its channel's range (its smallest or
 * largest w or |w|): those stay where they are, or the scale the rewrite is quantized with moves. */
static qr_status preview_weights(void *user, const qr_graph *g, float ***deq, float ***alt, qr_error *e)
{
    const qr_quant_opts *o = user;
    *deq = NULL;
    if (alt)
        *alt = NULL;
    qr_qctx q = {.g = g, .m = o->module, .o = o, .e = e};
    q.r = o->recipe ? qr_module_recipe(o->module, o->recipe) : &o->module->recipes[0];
    float **d = calloc((size_t)g->n_values + 1, sizeof *d);
    float **a = alt ? calloc((size_t)g->n_values + 1, sizeof *a) : NULL;
    qr_status st = d && (a || !alt) && qctx_alloc(&q) ? QR_OK : qr_errorf(e, "out of memory");
    if (st == QR_OK)
        st = read_settings(&q);
    if (st == QR_OK)
        st = plan(&q);
    if (st == QR_OK)
        st = quantize_weights(&q);
    for (int i = 0; st == QR_OK && i < q.nw; i++) {
        const qr_wquant *w = &q.w[i];
        const qr_value *v = g->values[w->value];
        int64_t n = qr_tensor_numel(&v->t), inner = 1;
        for (int k = w->axis + 1; w->axis >= 0 && k < v->t.ndim; k++)
            inner *= v->t.dims[k];
        qrl_qtype qt = qr_plan_qtype(&q, w->dtype, w->narrow, w->axis);
        const float *src = v->t.data;
        float *out = d[w->value] = malloc(sizeof *out * (size_t)(n + 1));
        float *other = a ? a[w->value] = malloc(sizeof *other * (size_t)(n + 1)) : NULL;
        if (!out || (a && !other)) {
            st = qr_errorf(e, "out of memory");
            break;
        }
        float *lo = other ? malloc(sizeof *lo * (size_t)(2 * w->nch + 1)) : NULL, *hi = lo ? lo + w->nch : NULL;
        if (other && !lo) {
            st = qr_errorf(e, "out of memory");
            break;
        }
        for (int c = 0; lo && c < w->nch; c++)
            lo[c] = INFINITY, hi[c] = -INFINITY;
        for (int64_t j = 0; lo && j < n; j++) { /* each channel's range, whose ends keep their rounding */
            int c = w->axis < 0 ? 0 : (int)((j / inner) % w->nch);
            lo[c] = fminf(lo[c], src[j]), hi[c] = fmaxf(hi[c], src[j]);
        }
        for (int64_t j = 0; j < n; j++) {
            int c = w->axis < 0 ? 0 : (int)((j / inner) % w->nch);
            int64_t k = qr_plan_round_const(&q, src[j], w->scale[c], w->zero[c], qt.qmin, qt.qmax);
            out[j] = (float)((double)(k - w->zero[c]) * w->scale[c]);
            if (!other)
                continue;
            double at = (double)src[j] / w->scale[c] + (double)w->zero[c];
            float a = fabsf(src[j]);
            int end = src[j] == lo[c] || src[j] == hi[c] || a == fabsf(lo[c]) || a == fabsf(hi[c]);
            int64_t k2 = end || fabs(at - (double)k) < 1e-3 ? k : at > (double)k ? k + 1 : k - 1;
            k2 = k2 < qt.qmin || k2 > qt.qmax ? k : k2;
            other[j] = (float)((double)(k2 - w->zero[c]) * w->scale[c]);
        }
        free(lo);
    }
    qctx_free(&q);
    if (st != QR_OK) {
        for (int i = 0; i < g->n_values; i++) {
            free(d ? d[i] : NULL);
            free(a ? a[i] : NULL);
        }
        free(d);
        free(a);
        return QR_ERR;
    }
    *deq = d;
    if (alt)
        *alt = a;
    return QR_OK;
}

/* The figures of one step of the recipe's transform chain (steps = measure): g as the chain's prefix
 * left it, quantized by the recipe with every layer it quantizes (calibration as the recipe's, no
 * fallback), judged against ref (NULL: g itself, whose f32 function the transforms before any bias
 * correction or rounding keep). */
static qr_status step_figure(const qr_graph *g, const qr_graph *ref, const qr_tensor *calib, const qr_quant_opts *o,
                             qr_step_figure *out, qr_error *e)
{
    qr_qctx q = {.g = g, .ref = ref, .m = o->module, .o = o, .e = e, .steps_only = 1};
    q.step_val = q.step_cal = NAN;
    q.r = qr_module_recipe(o->module, o->recipe);
    qr_quantized *res = calloc(1, sizeof *res);
    qr_status st = res && qctx_alloc(&q) ? QR_OK : qr_errorf(e, "out of memory");
    if (st == QR_OK)
        st = read_settings(&q);
    if (st == QR_OK)
        st = plan(&q);
    if (st == QR_OK)
        st = quantize_weights(&q);
    if (st == QR_OK)
        st = calibrate(&q, res, calib);
    if (st == QR_OK) {
        out->calibrate_db = q.step_cal;
        out->validate_db = res->validate_samples > 0 ? q.step_val : NAN;
    }
    qctx_free(&q);
    qr_quantized_free(res);
    return st;
}

typedef struct step_run {
    const qr_tensor *calib;
    qr_quant_opts o; /* the recipe by name, no progress bar */
    qr_step_figure *steps;
    int n;
} step_run;

/* qr_transform_step_fn: the figures after a step, added to the list */
static qr_status step_measure(void *user, const qr_graph *g, const qr_graph *ref, const char *name, qr_error *e)
{
    step_run *sr = user;
    qr_step_figure *v = realloc(sr->steps, sizeof *v * (size_t)(sr->n + 1));
    if (!v)
        return qr_errorf(e, "out of memory");
    sr->steps = v;
    v[sr->n] = (qr_step_figure){.name = name};
    if (step_figure(g, ref, sr->calib, &sr->o, &v[sr->n], e) != QR_OK) {
        qr_error_prefix(e, "the figures after step '%s' (steps = measure)", name);
        return QR_ERR;
    }
    sr->n++;
    return QR_OK;
}

/* The recipe's transforms on a copy of g, then the quantization of that copy, which the result
 * keeps; the transforms' notes go first. With steps = measure, the figures of every prefix of the
 * chain go with it (a calibration and two measurements of the outputs each, before the fallback:
 * the steps' own effect; the transforms run once). */
static qr_status quantize_transformed(const qr_graph *g, const qr_recipe *r, const qr_tensor *calib,
                                      const qr_quant_opts *o, qr_quantized **out, qr_error *e)
{
    int64_t count = calib[0].dims[0], fixed = qr_graph_fixed_batch(g);
    if (o->calib_count > 0 && o->calib_count < count)
        count = o->calib_count;
    if (fixed > 1)
        count -= count % fixed; /* whole batches (calibration says so when none is left) */
    /* the samples validate holds out judge the result: the transforms (a bias correction's mean
     * input, learned rounding's rows) see only those the calibration sees (when validate leaves
     * none, calibration says so) */
    int64_t nval = validate_count(r, count, fixed);
    if (nval > 0 && count - nval >= (fixed > 1 ? fixed : 1))
        count -= nval;
    int batch = fixed > 0 ? (int)fixed : o->batch > 0 ? o->batch : 32;
    qr_graph *tg = qr_graph_clone(g);
    qr_transform_run run;
    if (!tg)
        return qr_errorf(e, "out of memory");
    qr_quant_opts po = *o;
    po.recipe = r->name;
    qr_graph *ref = NULL;
    /* a weight-only recipe measures its outputs in one pass of its own: no step figures; nor in a
     * distributed job, whose ranks calibrate together */
    const qr_setting *ss = qr_recipe_setting(r, QR_SET_STEPS);
    int steps = ss && ss->type && !strcmp(ss->type, "measure") && !qr_weight_only_recipe(r) && qr_dist_size() == 1;
    step_run sr = {.calib = calib, .o = po};
    sr.o.progress = 0;
    if ((steps && step_measure(&sr, g, NULL, "none", e) != QR_OK) ||
        qr_transform_apply_steps(tg, o->module, r, calib, count, batch, o->threads, preview_weights, &po,
                                 steps ? step_measure : NULL, &sr, &ref, &run, e) != QR_OK ||
        quantize(tg, calib, o, out, e, 1, ref) != QR_OK) {
        free(sr.steps);
        qr_transform_run_free(&run);
        qr_graph_free(tg);
        qr_graph_free(ref);
        return QR_ERR;
    }
    qr_quantized *res = *out;
    res->transformed = tg;
    res->reference = ref;
    res->steps = sr.steps;
    res->nsteps = sr.n;
    char **v = realloc(run.notes, sizeof *v * (size_t)(run.nnotes + res->nnotes + 1));
    if (v) {
        if (res->nnotes)
            memcpy(v + run.nnotes, res->notes, sizeof *v * (size_t)res->nnotes);
        free(res->notes);
        res->notes = v;
        res->nnotes += run.nnotes;
        run.notes = NULL;
        run.nnotes = 0;
    }
    qr_transform_run_free(&run);
    return QR_OK;
}

/* Without --batch, a batch holds up to 32 samples, fewer where one batch's planned activations
 * would pass this: calibration runs a batch per worker, and the measurements run the f32 model,
 * the QDQ simulation and the integer graph side by side, each with its batch's memory. Swin-T at 32
 * samples took 2.8 GB where 8 took 1.2 GB, and less time. */
#define AUTO_BATCH_BYTES ((size_t)64 << 20)

/* The bytes one sample takes through g on an executor of its own: its planned arena, or its peak
 * when it runs in dynamic mode. 0 when the probe fails (calibration then reports the error). */
static size_t sample_bytes(const qr_graph *g, const qr_tensor *calib)
{
    qr_exec *x = NULL;
    qr_error e;
    qr_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
    size_t one = 0;
    if (in && qr_exec_new(g, NULL, &x, &e) == QR_OK) {
        qr_plan_slice_inputs(calib, g->n_inputs, 0, 1, in);
        qr_exec_stats st;
        if (qr_plan_run_once(x, g, in, &e) == QR_OK) {
            qr_exec_get_stats(x, &st);
            one = st.dynamic ? st.peak_bytes : st.arena_bytes;
        }
    }
    qr_exec_free(x);
    free(in);
    return one;
}

/* What quantization holds besides its runs: the model's constants and the calibration data in
 * memory (a mapped .npy's pages are page cache the kernel may drop: not counted). */
size_t qr_plan_held_bytes(const qr_graph *g, const qr_tensor *calib)
{
    size_t n = 0;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->is_const && g->values[i]->t.data)
            n += qr_tensor_nbytes(&g->values[i]->t);
    for (int i = 0; i < g->n_inputs; i++)
        if (!qr_data_in_file(calib[i].data))
            n += qr_tensor_nbytes(&calib[i]);
    return n;
}

/* The batch within the memory budget (--max-memory, per process: per rank under mpirun). Runs
 * of one batch each go side by side: calibration's workers (--threads), the measurements' three
 * graphs (f32, QDQ simulation, integer graph). Without --batch: up to 32 samples, fewer where one
 * batch's activations would pass AUTO_BATCH_BYTES or the budget's share of a run, a power of two; with --batch, a
 * batch that cannot fit is an error. One sample that cannot fit is an error naming the sizes. */
static qr_status choose_batch(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, int *batch,
                              size_t *run_bytes, qr_error *e)
{
    *batch = o->batch > 0 ? o->batch : 32;
    for (int i = 0; i < g->n_inputs; i++) /* a sample 0 to run; quantize's check_calib words the errors */
        if (calib[i].ndim < 1 || calib[i].dims[0] < 1 || calib[i].dtype != g->inputs[i]->t.dtype)
            return QR_OK;
    if (qr_graph_fixed_batch(g) == 1 && g->n_inputs > 0) /* its own batch of one: what a run takes */
        *run_bytes = sample_bytes(g, calib);
    if (qr_graph_fixed_batch(g) > 0 || g->n_inputs < 1 || calib[0].ndim < 1 || calib[0].dims[0] < 2)
        return QR_OK; /* qr_plan_batch takes the model's own batch */
    size_t budget = qr_exec_default_max_memory(), held = qr_plan_held_bytes(g, calib);
    int runs = o->threads > 3 ? o->threads : 3;
    if (held >= budget)
        return qr_errorf(e, "the model's constants and the calibration data in memory take %zu bytes, over the budget "
                         "of %zu bytes (--max-memory)", held, budget);
    size_t one = sample_bytes(g, calib);
    if (!one) { /* the probe failed (a sample over the budget on its own): calibration reports the error */
        *batch = o->batch > 0 ? o->batch : 1;
        return QR_OK;
    }
    size_t per = (budget - held) / (size_t)runs;
    if (one > per)
        return qr_errorf(e, "one sample's activations take %zu bytes per run, and %d runs go side by side (--threads "
                         "workers, at least the measurements' 3 graphs): with the %zu bytes of constants and "
                         "calibration data, batch 1 needs %zu bytes, over the budget of %zu bytes (--max-memory)",
                         one, runs, held, held + one * (size_t)runs, budget);
    size_t fit = per / one;
    if (o->batch > 0) {
        if ((size_t)o->batch > fit)
            return qr_errorf(e, "--batch %d needs %zu bytes of activations per run (%zu per sample), %d runs side by "
                             "side and %zu bytes held: over the budget of %zu bytes (--max-memory); at most --batch "
                             "%zu fits", o->batch, one * (size_t)o->batch, one, runs, held, budget, fit);
        *run_bytes = one * (size_t)o->batch;
        return QR_OK;
    }
    size_t cap = AUTO_BATCH_BYTES / one < fit ? AUTO_BATCH_BYTES / one : fit;
    /* A power of two: calibration's SimQuant rounds each batch with that batch's own qparams, so the
     * batch moves the ranges and the decisions; a batch that followed the arena byte for byte let a
     * planner's change move a model's quantization (PP-OCRv4 rec: an in-place Softmax, 16 -> 22). */
    int b = 1;
    while (b < 32 && (size_t)b * 2 <= cap)
        b *= 2;
    *batch = b;
    *run_bytes = one * (size_t)*batch;
    return QR_OK;
}

/* validate_from = spread: the samples validate holds out are spaced evenly through the count used
 * (unit j of vu, a sample or a fixed-batch model's whole batch, is unit floor((j + 1) units / vu) - 1:
 * every k-th, the last one held out; validate_from = stagger: that unit less j modulo its stratum's
 * size). Everything downstream (calibrate(), the transforms, mixed precision) holds out the tail,
 * so the count samples of every input, and the labels, are copied calibrating units first, then
 * held-out ones, each in file order: the same two sets everywhere.
 * The inputs' copy is a mapping of its own, so that its calibrating part can leave memory while
 * the fallback and the measurement of what ships use the held-out part alone, and be copied
 * again for the passes over the calibration samples after them (spread_hold): ResNet-18's 48
 * calibrating images are 29 MB. */
typedef struct qr_spread {
    const qr_tensor *src; /* the caller's inputs */
    qr_tensor *copy;      /* n inputs' copies (what quantize() is given) */
    int n;
    int64_t *order;       /* order[u]: the source unit copied to unit u */
    int64_t ncal;         /* units that calibrate: [0, ncal) of the copy */
    size_t *unit;         /* bytes of a unit, per input */
    char *mapped;         /* per input: the copy is an anonymous mapping (else malloc'd, kept whole) */
    int64_t units, step;  /* units in the copy (ncal calibrating, then the held-out ones), samples a unit */
    /* per unit: it is in the copies. A unit leaves with the whole pages among its bytes; the
     * calibrating ones come and go (spread_hold, spread_stream), the held-out ones too while the
     * fallback and the measurement of what ships read them (spread_stream_held) */
    unsigned char *filled;
    /* spread_stream_held: the held-out units are in the copies only while a run holds them
     * (qr_plan_take_inputs): held[u - ncal] runs hold unit u (the fallback's workers take the same
     * batches at once: the effects' workers, side by side's groups), under mu */
    int stream_held, mu_made;
    int *held;
    /* --option held-ghost=1: every take is joined by a second holder of the same units that
     * drops them before the run reads them (the interleaving two effect workers on one batch may
     * make, forced): a drop that let a unit go with a holder left shows as zeros read (the tests) */
    int ghost;
    /* held-out units in the copies now, and the most at once while watched (the fallback and the
     * measurement of what ships: spread_watch_held), for the report */
    int64_t held_in, held_peak;
    int watch;
    pthread_mutex_t mu;
} qr_spread;

static void spread_free(qr_spread *sp)
{
    if (!sp)
        return;
    for (int i = 0; sp->copy && i < sp->n; i++)
        qr_tensor_free(&sp->copy[i]);
    if (sp->mu_made)
        pthread_mutex_destroy(&sp->mu);
    free(sp->copy), free(sp->order), free(sp->unit), free(sp->mapped), free(sp->filled), free(sp->held), free(sp);
}

/* The units of [from, to) not in the copies copied from the source (whose mapped file's pages then
 * leave the resident set: the page cache keeps them for a later copy or read). Units of different
 * ranges may be filled at once (calibration's workers): each writes its own units' bytes alone. */
static void spread_fill(qr_spread *sp, int64_t from, int64_t to)
{
    for (int i = 0; i < sp->n; i++) {
        const qr_tensor *src = &sp->src[i];
        /* each unit's pages of the file leave as soon as copied, not after the whole copy: the file
         * and the copy were held whole together (BlazeFace back's 50 MB file: its peak) */
        for (int64_t u = from; u < to; u++) {
            if (sp->filled[u])
                continue;
            memcpy((char *)sp->copy[i].data + (size_t)u * sp->unit[i],
                   (const char *)src->data + (size_t)sp->order[u] * sp->unit[i], sp->unit[i]);
            qr_data_release(src->data, (size_t)sp->order[u] * sp->unit[i], sp->unit[i]);
        }
    }
    for (int64_t u = from; u < to; u++) {
        sp->held_in += u >= sp->ncal && !sp->filled[u];
        sp->filled[u] = 1;
    }
    if (sp->watch && sp->held_in > sp->held_peak)
        sp->held_peak = sp->held_in;
}

/* Units [from, to) leave the copies: the whole pages inside their bytes (a page shared with a unit
 * outside stays, never written here); each of them then counts as gone (read again as zeros where
 * a page left). A copy that is not a mapping of its own stays whole. */
static void spread_release(qr_spread *sp, int64_t from, int64_t to)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int any = 0;
    for (int i = 0; i < sp->n && to > from; i++) {
        size_t a = ((size_t)from * sp->unit[i] + pg - 1) / pg * pg, b = (size_t)to * sp->unit[i] / pg * pg;
        if (sp->mapped[i] && b > a) {
            madvise((char *)sp->copy[i].data + a, b - a, MADV_DONTNEED);
            any = 1;
        }
    }
    for (int64_t u = from; any && u < to; u++) {
        sp->held_in -= u >= sp->ncal && sp->filled[u];
        sp->filled[u] = 0;
    }
}

/* on 1: the count of held-out units in the copies at once starts (from those in them now); on 0:
 * it stops. Returns the most held-out samples in memory at once while it ran (0 without a spread). */
static int64_t spread_watch_held(const qr_quant_opts *o, int on)
{
    qr_spread *sp = o->spread;
    if (!sp)
        return 0;
    if (on) {
        sp->held_in = 0;
        for (int64_t u = sp->ncal; u < sp->units; u++)
            sp->held_in += sp->filled[u];
        sp->held_peak = sp->held_in;
    }
    sp->watch = on;
    return sp->held_peak * sp->step;
}

/* hold 0: the calibrating units of calib, when it is o's spread copy, leave memory (the whole
 * pages among them; a page shared with the first held-out unit stays); hold 1: they are copied
 * again. Nothing when calib is other samples. */
static void spread_hold(const qr_quant_opts *o, const qr_tensor *calib, int hold)
{
    qr_spread *sp = o->spread;
    if (!sp || calib != sp->copy)
        return;
    if (hold)
        spread_fill(sp, 0, sp->ncal);
    else
        spread_release(sp, 0, sp->ncal);
}

/* The units of calib's first keep samples (o's spread copy) in the copies, the calibrating units
 * after them not: the passes that follow read those alone (the fallback's calibrate_samples judge,
 * the output SQNR on the calibration samples: 16 of ResNet-18's 48 calibrating images). */
static void spread_drop(const qr_quant_opts *o, const qr_tensor *calib, int64_t keep)
{
    qr_spread *sp = o->spread;
    if (!sp || calib != sp->copy)
        return;
    int64_t ku = (keep + sp->step - 1) / sp->step;
    if (ku > sp->ncal)
        ku = sp->ncal;
    spread_fill(sp, 0, ku);
    spread_release(sp, ku, sp->ncal);
}

/* Calibration's passes over calib (o's spread copy) take the calibrating units a batch needs as it
 * runs (samples [at, at + b)) and let them go after it (spread_unstream): the file is read again
 * from the page cache instead of held copied whole through calibration and the f32 pass (MobileNetV3-
 * small's 64 images, 38 MB). *from, *to: the units it copied, which the batch's end lets go (none
 * when they were in the copies already, or calib is other samples). */
static void spread_stream(const qr_quant_opts *o, const qr_tensor *calib, int64_t at, int64_t b, int64_t *from,
                          int64_t *to)
{
    qr_spread *sp = o->spread;
    *from = *to = 0;
    if (!sp || calib != sp->copy || b < 1)
        return;
    int64_t u0 = at / sp->step, u1 = (at + b + sp->step - 1) / sp->step;
    if (u1 > sp->ncal)
        u1 = sp->ncal;
    while (u0 < u1 && sp->filled[u0]) /* held already: they stay */
        u0++;
    while (u1 > u0 && sp->filled[u1 - 1])
        u1--;
    int some = 0;
    for (int64_t u = u0; u < u1; u++)
        some |= sp->filled[u];
    spread_fill(sp, u0, u1);
    if (!some) /* a held unit among them: they all stay (the batch's end would take it too) */
        *from = u0, *to = u1;
}

static void spread_unstream(const qr_quant_opts *o, int64_t from, int64_t to)
{
    if (o->spread && to > from)
        spread_release(o->spread, from, to);
}

/* on 1: the held-out units of o's spread copy leave memory and come back only for the runs that
 * take them (qr_plan_take_inputs, qr_plan_drop_inputs), one batch at a time: the fallback and the
 * measurement of what ships read them so (BlazeFace back's 16 held-out images are 12.4 MiB, M-LSD
 * tiny's 25 MiB, held whole through both before). on 0: all of them in the copy again, for readers
 * that read them where they are. Between phases only: no run holds them then. */
static int spread_stream_held(const qr_quant_opts *o, int on)
{
    qr_spread *sp = o->spread;
    if (!sp || !sp->held || sp->stream_held == on)
        return sp ? sp->stream_held : 0;
    sp->stream_held = on;
    if (on)
        spread_release(sp, sp->ncal, sp->units);
    else
        spread_fill(sp, sp->ncal, sp->units);
    return !on;
}

int qr_plan_stream_held(const qr_qctx *q, int on)
{
    return spread_stream_held(q->o, on);
}

/* The held-out units of o's spread copy among samples [at, at + b) of calib (the copy, or a view
 * into it such as the held-out samples'): [*u0, *u1), empty when calib is other samples. */
static void held_units(const qr_spread *sp, const qr_tensor *calib, int64_t at, int64_t b, int64_t *u0, int64_t *u1)
{
    *u0 = *u1 = 0;
    if (!sp || !sp->held || !calib || b < 1 || !sp->copy[0].data)
        return;
    const char *base = sp->copy[0].data, *p = calib[0].data;
    size_t bytes = qr_tensor_nbytes(&sp->copy[0]), row = sp->unit[0] / (size_t)sp->step;
    if (!p || p < base || p >= base + bytes || row == 0)
        return;
    int64_t s0 = (int64_t)((size_t)(p - base) / row) + at;
    int64_t a = s0 / sp->step, z = (s0 + b + sp->step - 1) / sp->step;
    *u0 = a > sp->ncal ? a : sp->ncal;
    *u1 = z < sp->units ? z : sp->units;
}

void qr_plan_take_inputs(const qr_qctx *q, const qr_tensor *calib, int n, int64_t at, int64_t b, qr_tensor *in)
{
    qr_spread *sp = q->o->spread;
    int64_t u0, u1;
    held_units(sp, calib, at, b, &u0, &u1);
    if (u1 > u0) {
        pthread_mutex_lock(&sp->mu);
        for (int64_t u = u0; u < u1; u++)
            if (sp->held[u - sp->ncal]++ == 0 && !sp->filled[u])
                spread_fill(sp, u, u + 1);
        for (int64_t u = u0; sp->ghost && u < u1; u++) /* the ghost's take: it holds them too */
            sp->held[u - sp->ncal]++;
        pthread_mutex_unlock(&sp->mu);
        if (sp->ghost) /* and lets them go first */
            qr_plan_drop_inputs(q, calib, at, b);
    }
    qr_plan_slice_inputs(calib, n, at, b, in);
}

void qr_plan_drop_inputs(const qr_qctx *q, const qr_tensor *calib, int64_t at, int64_t b)
{
    qr_spread *sp = q->o->spread;
    int64_t u0, u1;
    held_units(sp, calib, at, b, &u0, &u1);
    if (u1 <= u0)
        return;
    pthread_mutex_lock(&sp->mu);
    for (int64_t u = u0; u < u1; u++)
        if (--sp->held[u - sp->ncal] == 0 && sp->stream_held)
            spread_release(sp, u, u + 1);
    pthread_mutex_unlock(&sp->mu);
}

/* Zeroed memory for t's data as an anonymous mapping the tensor owns (*mapped 1), else malloc'd. */
static qr_status spread_alloc(qr_tensor *t, char *mapped, qr_error *e)
{
    size_t n = qr_tensor_nbytes(t);
    void *p = n ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    *mapped = 0;
    if (p == MAP_FAILED)
        return qr_tensor_alloc(t, e);
    if (qr_tensor_adopt_map(p, p, n, 0, e) != QR_OK) /* it unmaps p */
        return QR_ERR;
    t->data = p;
    *mapped = 1;
    return QR_OK;
}

/* The copy (*out) for validate_from = spread; nothing (*out NULL) for end, without validate, or when
 * the split leaves none to calibrate on (calibration says so). */
static qr_status spread_validate(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, qr_spread **out,
                                 qr_tensor *labels, qr_error *e)
{
    *out = NULL;
    const qr_recipe *r = o->recipe ? qr_module_recipe(o->module, o->recipe)
                         : o->module->nrecipes ? &o->module->recipes[0]
                                               : NULL;
    const qr_setting *from = r ? qr_recipe_setting(r, QR_SET_VALIDATE_FROM) : NULL;
    if (!from || (strcmp(from->type, "spread") && strcmp(from->type, "stagger")) || !calib)
        return QR_OK;
    int stagger = !strcmp(from->type, "stagger");
    int64_t count = calib[0].dims[0], fixed = qr_graph_fixed_batch(g), step = fixed > 1 ? fixed : 1;
    if (o->calib_count > 0 && o->calib_count < count)
        count = o->calib_count;
    count -= count % step;
    int64_t nval = validate_count(r, count, fixed), units = count / step, vu = nval / step;
    if (nval == 0 || count - nval < step)
        return QR_OK;
    if (check_calib(g, calib, e) != QR_OK) /* in file order, so that an error names the file's sample */
        return QR_ERR;
    qr_spread *sp = calloc(1, sizeof *sp);
    char *held = calloc((size_t)units, 1);
    if (sp) {
        sp->src = calib, sp->n = g->n_inputs, sp->ncal = units - vu, sp->units = units, sp->step = step;
        sp->filled = calloc((size_t)units + 1, 1);
        sp->order = malloc(sizeof *sp->order * (size_t)units);
        sp->copy = calloc((size_t)g->n_inputs + 1, sizeof *sp->copy);
        sp->unit = calloc((size_t)g->n_inputs + 1, sizeof *sp->unit);
        sp->mapped = calloc((size_t)g->n_inputs + 1, 1);
        sp->held = calloc((size_t)vu + 1, sizeof *sp->held);
        sp->mu_made = pthread_mutex_init(&sp->mu, NULL) == 0;
        sp->ghost = qr_options_get()->held_ghost;
    }
    if (!sp || !held || !sp->order || !sp->copy || !sp->unit || !sp->mapped || !sp->filled || !sp->held ||
        !sp->mu_made) {
        spread_free(sp), free(held);
        return qr_errorf(e, "out of memory");
    }
    /* the j-th of vu strata of the units: spread holds out its last unit; stagger the one j before
     * it (modulo the stratum), so that a file with a period that divides the strata's size (PP-OCR
     * cls: every odd sample upside down) gives the judge every phase of it, not one */
    for (int64_t j = 0; j < vu; j++) {
        int64_t a = j * units / vu, b = (j + 1) * units / vu;
        held[b - 1 - (stagger ? j % (b - a) : 0)] = 1;
    }
    int64_t n = 0;
    for (int k = 0; k < 2; k++)
        for (int64_t u = 0; u < units; u++)
            if (held[u] == k)
                sp->order[n++] = u;
    free(held);
    /* what the batch's probe freed goes back first: the copy is a mapping of its own, which would
     * not reuse it (ResNet-18: calibration's peak 164 -> 179 MiB without this) */
    qr_plan_give_back_memory();
    qr_status st = QR_OK;
    for (int i = 0; i <= g->n_inputs && st == QR_OK; i++) { /* the inputs, then the labels */
        const qr_tensor *src = i < g->n_inputs ? &calib[i] : o->labels;
        qr_tensor *dst = i < g->n_inputs ? &sp->copy[i] : labels;
        if (!src)
            continue;
        if (src->dims[0] < count) {
            st = qr_errorf(e, "%lld labels for %lld calibration samples", (long long)src->dims[0], (long long)count);
            break;
        }
        size_t row = qr_tensor_nbytes(src) / (size_t)(src->dims[0] ? src->dims[0] : 1), unit = row * (size_t)step;
        *dst = *src;
        dst->dims[0] = count;
        dst->data = NULL;
        if ((st = i < g->n_inputs ? spread_alloc(dst, &sp->mapped[i], e) : qr_tensor_alloc(dst, e)) != QR_OK)
            break;
        if (i < g->n_inputs) {
            sp->unit[i] = unit;
            continue;
        }
        for (int64_t u = 0; u < units; u++)
            memcpy((char *)dst->data + (size_t)u * unit, (const char *)src->data + (size_t)sp->order[u] * unit, unit);
    }
    if (st != QR_OK) {
        spread_free(sp);
        qr_tensor_free(labels);
        return QR_ERR;
    }
    /* the file's mapping (a .npy read by the CLI) leaves the resident set once copied: the copy is
     * what runs (ResNet-18's 64 images held twice were 38 MB of its peak). Only the held-out units
     * are copied now: the calibrating ones come as the passes over them need them (spread_stream,
     * spread_hold), never all of them at once where the passes stream them (calibration, the f32
     * pass) */
    spread_fill(sp, sp->ncal, units);
    for (int i = 0; i < g->n_inputs; i++)
        qr_data_release(calib[i].data, 0, qr_tensor_nbytes(&calib[i]));
    *out = sp;
    return QR_OK;
}

/* Under mpirun each rank counted the runs it made (its share of the batches, and what every rank
 * runs whole): the job's runs are their sums, gathered onto every rank (res NULL: this rank failed,
 * `local`; every rank calls this once, so that none waits). Counts are exact in a double below 2^53. */
static qr_status sum_ranks_runs(qr_quantized *res, qr_status local, qr_error *e)
{
    enum { N = 3 + 2 * QR_MAX_PHASES };
    int size = qr_dist_size();
    double *all = calloc((size_t)N * (size_t)size, sizeof *all);
    int64_t *counts = calloc((size_t)size, sizeof *counts);
    if (!all || !counts) {
        free(all), free(counts);
        return qr_errorf(e, "out of memory");
    }
    for (int r = 0; r < size; r++)
        counts[r] = N;
    double *mine = all + (size_t)qr_dist_rank() * N;
    if (res) {
        mine[0] = (double)res->node_samples, mine[1] = (double)res->calibrate_node_samples;
        mine[2] = (double)res->validate_node_samples;
        for (int i = 0; i < res->nphases; i++)
            mine[3 + 2 * i] = (double)res->phases[i].node_samples,
                    mine[4 + 2 * i] = (double)res->phases[i].validate_node_samples;
    }
    qr_status st = qr_dist_allgather(all, counts, local, e);
    if (st == QR_OK && res) {
        int64_t sum[N] = {0};
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++)
                sum[i] += (int64_t)all[(size_t)r * N + (size_t)i];
        res->node_samples = sum[0], res->calibrate_node_samples = sum[1], res->validate_node_samples = sum[2];
        for (int i = 0; i < res->nphases; i++)
            res->phases[i].node_samples = sum[3 + 2 * i], res->phases[i].validate_node_samples = sum[4 + 2 * i];
    }
    free(all), free(counts);
    return st;
}

qr_status qr_quantize(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, qr_quantized **out,
                      qr_error *e)
{
    qr_quant_opts po = *o;
    if (!po.from_file && choose_batch(g, calib, o, &po.batch, &po.run_bytes, e) != QR_OK)
        return QR_ERR;
    qr_spread *sp = NULL;
    qr_tensor labels = {0};
    if (!po.from_file && spread_validate(g, calib, o, &sp, &labels, e) != QR_OK)
        return QR_ERR;
    if (sp && o->labels)
        po.labels = &labels;
    po.spread = sp;
    int64_t runs = qr_exec_node_samples(), val = qr_exec_node_samples_in(QR_RUNS_VALIDATE);
    int was = qr_exec_account(QR_RUNS_CALIBRATE);
    qr_status st = quantize(g, sp ? sp->copy : calib, &po, out, e, 0, NULL);
    qr_exec_account(was);
    if (st == QR_OK) {
        (*out)->node_samples = qr_exec_node_samples() - runs;
        (*out)->validate_node_samples = qr_exec_node_samples_in(QR_RUNS_VALIDATE) - val;
        (*out)->calibrate_node_samples = (*out)->node_samples - (*out)->validate_node_samples;
    }
    if (qr_dist_size() > 1) {
        qr_status sst = sum_ranks_runs(st == QR_OK ? *out : NULL, st, e);
        if (st == QR_OK && sst != QR_OK) {
            qr_quantized_free(*out);
            *out = NULL;
        }
        st = st == QR_OK ? sst : st;
    }
    spread_free(sp);
    if (sp)
        qr_plan_give_back_memory(); /* the copy's memory, before the caller's next steps (the export) */
    if (labels.data)
        qr_tensor_free(&labels);
    return st;
}

static qr_status quantize_recipe(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, const qr_recipe *r,
                                 qr_quantized **out, qr_error *e, const qr_graph *ref);
static qr_status quantize_two_ranges(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o,
                                     const qr_recipe *r, qr_quantized **out, qr_error *e, const qr_graph *ref);

static qr_status quantize(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, qr_quantized **out,
                          qr_error *e, int transformed, const qr_graph *ref)
{
    if (!o->from_file && check_calib(g, calib, e) != QR_OK)
        return QR_ERR;
    if (!o->from_file && g->opset < 13) {
        /* per-axis DequantizeLinear needs opset 13: quantize an upgraded copy, which the result keeps */
        qr_graph *up = qr_graph_upgraded(g, 13, e);
        if (!up || quantize(up, calib, o, out, e, transformed, ref) != QR_OK) {
            qr_graph_free(up);
            return QR_ERR;
        }
        (*out)->upgraded = up;
        return QR_OK;
    }
    qr_qctx q = {.g = g, .ref = ref, .m = o->module, .o = o, .e = e};
    q.r = o->recipe ? qr_module_recipe(o->module, o->recipe) : o->module->nrecipes ? &o->module->recipes[0] : NULL;
    if (!q.r && o->recipe) { /* name the ones there are: the user mistyped one, or has the wrong file */
        char names[512] = "";
        for (int i = 0; i < o->module->nrecipes; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     o->module->recipes[i].name);
        return qr_errorf(e, "no recipe named '%s' (the file has %s)", o->recipe, names[0] ? names : "none");
    }
    if (!q.r)
        return qr_errorf(e, "the module has no recipe");
    if (qr_weight_only_recipe(q.r)) { /* activation = f32: weights only, nothing calibrated */
        if (o->from_file)
            return qr_errorf(e, "recipe '%s' is weight-only (activation = f32): it cannot lower a QDQ model", q.r->name);
        for (int i = 0; !transformed && i < q.r->nsettings; i++) {
            const qr_transform *t = q.r->settings[i].id == QR_SET_TRANSFORM
                                        ? qr_module_transform(o->module, q.r->settings[i].calibrator) : NULL;
            if (t && (t->bias || t->flip)) /* they measure the integer weights' errors, which blocks change */
                return qr_errorf(e, "recipe '%s': transform %s corrects %s; a weight-only recipe takes rescalings only",
                                 q.r->name, t->match.name, t->bias ? "biases" : "roundings");
        }
        spread_hold(o, calib, 1); /* read where they are: all of them in the copy */
        if (!transformed && qr_recipe_setting(q.r, QR_SET_TRANSFORM))
            return quantize_transformed(g, q.r, calib, o, out, e);
        return qr_weight_only(g, ref, calib, o, q.r, out, e);
    }
    const qr_setting *ws = qr_recipe_setting(q.r, QR_SET_WEIGHT);
    const qr_cal_desc *wc = ws && ws->calibrator ? qr_module_calibrator(o->module, ws->calibrator) : NULL;
    if (wc && wc->layer) /* it sees a layer's rows and rounds its weight: no qparams for a pattern to use */
        return qr_errorf(e, "recipe '%s': weight calibrator '%s' is a layer calibrator (it rounds a weight from the "
                            "layer's inputs): only weight-only recipes (activation = f32) can use it", q.r->name, wc->name);
    /* the transforms read the calibrating samples where they are: all of them in the copy */
    if (!transformed && !o->from_file && qr_recipe_setting(q.r, QR_SET_TRANSFORM)) {
        spread_hold(o, calib, 1);
        return quantize_transformed(g, q.r, calib, o, out, e);
    }
    if (!o->from_file && q.r->fallback && qr_recipe_setting(q.r, QR_SET_FALLBACK_ACTIVATION))
        return quantize_two_ranges(g, calib, o, q.r, out, e, ref);
    return quantize_recipe(g, calib, o, q.r, out, e, ref);
}

/* Without fallback_activation: q.r's quantize, once the transforms are applied. */
static qr_status quantize_recipe(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o, const qr_recipe *r,
                                 qr_quantized **out, qr_error *e, const qr_graph *ref)
{
    qr_qctx q = {.g = g, .ref = ref, .m = o->module, .o = o, .e = e, .r = r};
    qr_quantized *res = calloc(1, sizeof *res);
    if (res)
        res->top1_fp32 = res->top1_int8 = NAN;
    if (!qctx_alloc(&q) || !res) {
        free(res);
        qctx_free(&q);
        return qr_errorf(e, "out of memory");
    }
    qr_status st = read_settings(&q);
    if (st == QR_OK && o->from_file)
        st = file_act_dtype(&q);
    if (st == QR_OK)
        st = plan(&q);
    if (st == QR_OK)
        st = quantize_weights(&q);
    if (st == QR_OK && o->from_file) {
        if ((st = take_file_qparams(&q)) == QR_OK) {
            resolve_same(&q);
            st = qr_plan_build_qdq(&q, res);
        }
    } else if (st == QR_OK)
        st = calibrate(&q, res, calib);
    if (st == QR_OK && res->calib_only) { /* a rank other than 0 of a distributed job */
        qctx_free(&q);
        *out = res;
        return QR_OK;
    }
    if (st == QR_OK && !res->ig && (st = qr_intgraph_build(&q, res->qdq, &res->ig, e)) != QR_OK)
        qr_error_prefix(e, "recipe '%s'", q.r->name);
    if (st == QR_OK)
        st = fill_layers(&q, res);
    if (st == QR_OK) /* the file only: the integer graph and the measures are made */
        st = export_form(&q, res->qdq, e);
    if (st == QR_OK) {
        res->notes = q.notes; /* the result owns them now */
        res->nnotes = q.nnotes;
        q.notes = NULL;
        q.nnotes = 0;
    }
    qctx_free(&q);
    if (st != QR_OK) {
        qr_quantized_free(res);
        return QR_ERR;
    }
    *out = res;
    return QR_OK;
}

/* One of a fallback_activation recipe's two runs (which 0: the fallback's, its activation and
 * calibrate lines replaced by fallback_activation and fallback_calibrate; 1: the recipe's own),
 * both without those two lines; out's settings are its own (free them), the rest r's. */
static qr_status ranges_recipe(const qr_recipe *r, int which, qr_recipe *out, qr_error *e)
{
    const qr_setting *fa = qr_recipe_setting(r, QR_SET_FALLBACK_ACTIVATION);
    const qr_setting *fc = qr_recipe_setting(r, QR_SET_FALLBACK_CALIBRATE);
    *out = *r;
    if (!(out->settings = calloc((size_t)r->nsettings + 1, sizeof *out->settings)))
        return qr_errorf(e, "out of memory");
    int n = 0;
    for (int i = 0; i < r->nsettings; i++) {
        qr_setting s = r->settings[i];
        if (!s.ntargets && (s.id == QR_SET_FALLBACK_ACTIVATION || s.id == QR_SET_FALLBACK_CALIBRATE))
            continue;
        if (which == 0 && !s.ntargets && s.id == QR_SET_ACTIVATION)
            s = *fa, s.id = QR_SET_ACTIVATION;
        else if (which == 0 && fc && !s.ntargets && s.id == QR_SET_CALIBRATE)
            continue; /* fallback_calibrate's, below */
        out->settings[n++] = s;
    }
    if (which == 0 && fc) {
        out->settings[n] = *fc;
        out->settings[n++].id = QR_SET_CALIBRATE;
    }
    out->nsettings = n;
    return QR_OK;
}

static qr_status add_note(qr_quantized *res, const char *note, qr_error *e)
{
    char **v = realloc(res->notes, sizeof *v * (size_t)(res->nnotes + 2));
    if (!v || !(v[res->nnotes] = strdup(note))) {
        if (v)
            res->notes = v;
        return qr_errorf(e, "out of memory");
    }
    res->notes = v;
    res->nnotes++;
    return QR_OK;
}

/* fallback_activation = ...: the fallback searches with fallback_activation's ranges (and
 * fallback_calibrate's observations); where that leaves every layer on the integers, the model
 * is quantized again with the recipe's own activation line, and that ships when its fallback too
 * leaves every layer on the integers (judged as always: the recipe's condition on its samples).
 * Which calibrator, in what order, is the recipe's: C only runs the two and keeps one. A
 * search that keeps layers in f32 ships as it is, so a model the fallback decides for keeps the
 * fallback's ranges and pays for one run; a model wholly on the integers pays for two. */
static qr_status quantize_two_ranges(const qr_graph *g, const qr_tensor *calib, const qr_quant_opts *o,
                                     const qr_recipe *r, qr_quantized **out, qr_error *e, const qr_graph *ref)
{
    qr_recipe rr[2] = {{0}, {0}};
    qr_quantized *res[2] = {NULL, NULL};
    qr_status st = ranges_recipe(r, 0, &rr[0], e);
    if (st == QR_OK)
        st = quantize_recipe(g, calib, o, &rr[0], &res[0], e, ref);
    /* every rank of a distributed job holds the search's decisions (qmeasure.c): they all run again */
    int second = st == QR_OK && res[0]->fallbacks == 0 && res[0]->widened == 0;
    if (second) {
        spread_hold(o, calib, 0); /* the second's calibration streams them again, as the first's did */
        if ((st = ranges_recipe(r, 1, &rr[1], e)) == QR_OK)
            st = quantize_recipe(g, calib, o, &rr[1], &res[1], e, ref);
    }
    int keep = res[1] && res[1]->fallbacks == 0 && res[1]->widened == 0 ? 1 : 0;
    char note[512];
    const qr_setting *fa = qr_recipe_setting(r, QR_SET_FALLBACK_ACTIVATION), *a = qr_recipe_setting(r, QR_SET_ACTIVATION);
    note[0] = 0;
    if (st == QR_OK && !second)
        snprintf(note, sizeof note, "recipe '%s': the fallback kept %d layer%s in f32 with fallback_activation's "
                 "ranges (%s): those ship", r->name, res[0]->fallbacks + res[0]->widened,
                 res[0]->fallbacks + res[0]->widened == 1 ? "" : "s", fa->calibrator);
    else if (st == QR_OK && second)
        snprintf(note, sizeof note, "recipe '%s': every layer stayed on the integers with fallback_activation's "
                 "ranges (%s, output SQNR %.1f dB); with activation's (%s) %s (%.1f dB): %s's ship", r->name,
                 fa->calibrator, res[0]->output_sqnr, a->calibrator,
                 keep ? "too" : "the fallback kept layers in f32", res[1]->output_sqnr,
                 keep ? a->calibrator : fa->calibrator);
    if (st == QR_OK && !res[keep]->calib_only)
        st = add_note(res[keep], note, e);
    qr_quantized_free(res[1 - keep]);
    free(rr[0].settings);
    free(rr[1].settings);
    if (st != QR_OK) {
        qr_quantized_free(res[keep]);
        return QR_ERR;
    }
    *out = res[keep];
    return QR_OK;
}

void qr_quantized_free(qr_quantized *q)
{
    if (!q)
        return;
    qr_graph_free(q->qdq);
    qr_intgraph_free(q->ig);
    qr_graph_free(q->upgraded);
    qr_graph_free(q->transformed);
    qr_graph_free(q->reference);
    qr_mixed_info_free(q->mixed);
    free(q->layers);
    free(q->tries);
    free(q->steps);
    for (int i = 0; i < q->nnotes; i++)
        free(q->notes[i]);
    free(q->notes);
    free(q);
}
