/* Elementwise ops: unary math and activations, binary arithmetic and
 * comparisons with numpy broadcasting, variadic Max/Min/Sum/Mean, Where,
 * Clip, Cast/CastLike, Identity, Dropout (inference).
 *
 * Floats compute in double and round once to the output type, which gives the
 * same bits as float arithmetic for + - * / and keeps the table small.
 * Integers compute in 64 bits with wrap-around (unsigned arithmetic), as the
 * narrower types do; division by zero is an error, never a SIGFPE. */
#include "ops_common.h"
#include "f32_rows.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define GRAIN 16384 /* elements per parallel chunk: below this, threads cost more than they give */

static int is_numeric(qr_dtype t)
{
    return qr_dtype_is_float(t) || qr_dtype_is_int(t);
}

static int is_signed_int(qr_dtype t)
{
    return qr_dtype_is_int(t) && qr_dtype_get(t)->is_signed;
}

static qr_status need_input(qr_kctx *k, int i)
{
    if (i >= k->n_in || !k->in[i])
        return QR_KERR(k, "input %d is required", i);
    return QR_OK;
}

/* ------------------------------------------------------------------ unary */

typedef struct uparams {
    double alpha, beta, gamma;
    int flag; /* Gelu: tanh approximation; IsInf: which signs */
} uparams;

typedef double (*ufn)(double x, const uparams *p);
typedef int64_t (*uifn)(int64_t x, const uparams *p);

static double u_neg(double x, const uparams *p) { (void)p; return -x; }
static double u_abs(double x, const uparams *p) { (void)p; return fabs(x); }
static double u_sqrt(double x, const uparams *p) { (void)p; return sqrt(x); }
static double u_exp(double x, const uparams *p) { (void)p; return exp(x); }
static double u_log(double x, const uparams *p) { (void)p; return log(x); }
static double u_erf(double x, const uparams *p) { (void)p; return erf(x); }
static double u_tanh(double x, const uparams *p) { (void)p; return tanh(x); }
static double u_floor(double x, const uparams *p) { (void)p; return floor(x); }
static double u_ceil(double x, const uparams *p) { (void)p; return ceil(x); }
static double u_round(double x, const uparams *p) { (void)p; return nearbyint(x); } /* half to even */
static double u_recip(double x, const uparams *p) { (void)p; return 1.0 / x; }
static double u_sin(double x, const uparams *p) { (void)p; return sin(x); }
static double u_cos(double x, const uparams *p) { (void)p; return cos(x); }
static double u_tan(double x, const uparams *p) { (void)p; return tan(x); }
static double u_asin(double x, const uparams *p) { (void)p; return asin(x); }
static double u_acos(double x, const uparams *p) { (void)p; return acos(x); }
static double u_atan(double x, const uparams *p) { (void)p; return atan(x); }
static double u_sinh(double x, const uparams *p) { (void)p; return sinh(x); }
static double u_cosh(double x, const uparams *p) { (void)p; return cosh(x); }
static double u_asinh(double x, const uparams *p) { (void)p; return asinh(x); }
static double u_acosh(double x, const uparams *p) { (void)p; return acosh(x); }
static double u_atanh(double x, const uparams *p) { (void)p; return atanh(x); }
static double u_relu(double x, const uparams *p) { (void)p; return x > 0 ? x : (x == x ? 0 : x); }
static double u_sigmoid(double x, const uparams *p)
{
    (void)p;
    /* Two forms so that exp never overflows. */
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static double u_sign(double x, const uparams *p) { (void)p; return x > 0 ? 1 : x < 0 ? -1 : x; }
static double u_leaky(double x, const uparams *p) { return x >= 0 ? x : p->alpha * x; }
static double u_elu(double x, const uparams *p) { return x >= 0 ? x : p->alpha * (exp(x) - 1); }
static double u_celu(double x, const uparams *p) { return fmax(0, x) + fmin(0, p->alpha * (exp(x / p->alpha) - 1)); }
static double u_selu(double x, const uparams *p) { return p->gamma * (x > 0 ? x : p->alpha * (exp(x) - 1)); }
static double u_thresh(double x, const uparams *p) { return x > p->alpha ? x : 0; }
static double u_softsign(double x, const uparams *p) { (void)p; return x / (1 + fabs(x)); }
static double u_softplus(double x, const uparams *p)
{
    (void)p;
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double u_mish(double x, const uparams *p) { return x * tanh(u_softplus(x, p)); }
/* max(0, min(1, v)) with NaN kept, as ONNX's reference (numpy) keeps it; fmax/fmin would drop it */
static double clamp01(double v) { return v > 1 ? 1 : v < 0 ? 0 : v; }
static double u_hardsigmoid(double x, const uparams *p) { return clamp01(p->alpha * x + p->beta); }
static double u_hardswish(double x, const uparams *p) { (void)p; return x * clamp01(x / 6 + 0.5); }
static double u_shrink(double x, const uparams *p)
{
    return x < -p->alpha ? x + p->beta : x > p->alpha ? x - p->beta : 0;
}
static double u_gelu(double x, const uparams *p)
{
    if (p->flag)
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}
static double u_isnan(double x, const uparams *p) { (void)p; return isnan(x); }
static double u_isinf(double x, const uparams *p)
{
    return isinf(x) && ((x > 0 && (p->flag & 1)) || (x < 0 && (p->flag & 2)));
}
static double u_not(double x, const uparams *p) { (void)p; return x == 0; }

/* Integer forms, wrapping like the narrow types (results are stored truncated). */
static int64_t ui_neg(int64_t x, const uparams *p) { (void)p; return (int64_t)(0 - (uint64_t)x); }
static int64_t ui_abs(int64_t x, const uparams *p) { (void)p; return x < 0 ? (int64_t)(0 - (uint64_t)x) : x; }
static int64_t ui_relu(int64_t x, const uparams *p) { (void)p; return x > 0 ? x : 0; }
static int64_t ui_sign(int64_t x, const uparams *p) { (void)p; return x > 0 ? 1 : x < 0 ? -1 : 0; }
static int64_t ui_not(int64_t x, const uparams *p) { (void)p; return x == 0; }

enum { U_FLOAT = 1, U_INT = 2, U_UINT = 4, U_BOOL = 8, U_OUT_BOOL = 16 };
#define U_NUM (U_FLOAT | U_INT | U_UINT)

typedef struct unary_def {
    const char *name;
    ufn f;
    uifn fi; /* NULL: integer inputs compute through f in double */
    int types;
} unary_def;

static const unary_def unary_defs[] = {
    {"Neg", u_neg, ui_neg, U_FLOAT | U_INT},
    {"Abs", u_abs, ui_abs, U_NUM},
    {"Sqrt", u_sqrt, NULL, U_FLOAT},
    {"Exp", u_exp, NULL, U_FLOAT},
    {"Log", u_log, NULL, U_FLOAT},
    {"Erf", u_erf, NULL, U_FLOAT},
    {"Tanh", u_tanh, NULL, U_FLOAT},
    {"Floor", u_floor, NULL, U_FLOAT},
    {"Ceil", u_ceil, NULL, U_FLOAT},
    {"Round", u_round, NULL, U_FLOAT},
    {"Reciprocal", u_recip, NULL, U_FLOAT},
    {"Sin", u_sin, NULL, U_FLOAT},
    {"Cos", u_cos, NULL, U_FLOAT},
    {"Tan", u_tan, NULL, U_FLOAT},
    {"Asin", u_asin, NULL, U_FLOAT},
    {"Acos", u_acos, NULL, U_FLOAT},
    {"Atan", u_atan, NULL, U_FLOAT},
    {"Sinh", u_sinh, NULL, U_FLOAT},
    {"Cosh", u_cosh, NULL, U_FLOAT},
    {"Asinh", u_asinh, NULL, U_FLOAT},
    {"Acosh", u_acosh, NULL, U_FLOAT},
    {"Atanh", u_atanh, NULL, U_FLOAT},
    {"Relu", u_relu, ui_relu, U_FLOAT | U_INT},
    {"Sigmoid", u_sigmoid, NULL, U_FLOAT},
    {"Sign", u_sign, ui_sign, U_NUM},
    {"LeakyRelu", u_leaky, NULL, U_FLOAT},
    {"Elu", u_elu, NULL, U_FLOAT},
    {"Celu", u_celu, NULL, U_FLOAT},
    {"Selu", u_selu, NULL, U_FLOAT},
    {"ThresholdedRelu", u_thresh, NULL, U_FLOAT},
    {"Softsign", u_softsign, NULL, U_FLOAT},
    {"Softplus", u_softplus, NULL, U_FLOAT},
    {"Mish", u_mish, NULL, U_FLOAT},
    {"HardSigmoid", u_hardsigmoid, NULL, U_FLOAT},
    {"HardSwish", u_hardswish, NULL, U_FLOAT},
    {"Shrink", u_shrink, NULL, U_NUM},
    {"Gelu", u_gelu, NULL, U_FLOAT},
    {"IsNaN", u_isnan, NULL, U_FLOAT | U_OUT_BOOL},
    {"IsInf", u_isinf, NULL, U_FLOAT | U_OUT_BOOL},
    {"Not", u_not, ui_not, U_BOOL | U_OUT_BOOL},
};

static const unary_def *unary_find(const char *op)
{
    for (size_t i = 0; i < sizeof unary_defs / sizeof unary_defs[0]; i++)
        if (strcmp(unary_defs[i].name, op) == 0)
            return &unary_defs[i];
    return NULL;
}

static int type_allowed(qr_dtype t, int types)
{
    if (qr_dtype_is_float(t))
        return types & U_FLOAT;
    if (t == QR_BOOL)
        return types & U_BOOL;
    if (qr_dtype_is_int(t))
        return types & (is_signed_int(t) ? U_INT : U_UINT);
    return 0;
}

static qr_status unary_infer(qr_kctx *k)
{
    const unary_def *d = unary_find(k->node->op);
    if (!d)
        return QR_KERR(k, "no unary kernel"); /* the table and unary_defs disagree */
    if (need_input(k, 0) != QR_OK)
        return QR_ERR;
    if (!type_allowed(k->in[0]->dtype, d->types))
        return QR_KERR(k, "input type %s is not supported", qr_dtype_name(k->in[0]->dtype));
    qr_same_as(k->out[0], k->in[0]);
    if (d->types & U_OUT_BOOL)
        k->out[0]->dtype = QR_BOOL;
    return QR_OK;
}

static void unary_params(const qr_node *n, uparams *p)
{
    const char *op = n->op;
    memset(p, 0, sizeof *p);
    if (strcmp(op, "LeakyRelu") == 0)
        p->alpha = qr_attr_f(n, "alpha", 0.01f);
    else if (strcmp(op, "Elu") == 0 || strcmp(op, "Celu") == 0 || strcmp(op, "ThresholdedRelu") == 0)
        p->alpha = qr_attr_f(n, "alpha", 1.0f);
    else if (strcmp(op, "Selu") == 0) {
        p->alpha = qr_attr_f(n, "alpha", 1.67326319217681884765625f);
        p->gamma = qr_attr_f(n, "gamma", 1.05070102214813232421875f);
    } else if (strcmp(op, "HardSigmoid") == 0) {
        p->alpha = qr_attr_f(n, "alpha", 0.2f);
        p->beta = qr_attr_f(n, "beta", 0.5f);
    } else if (strcmp(op, "Shrink") == 0) {
        p->alpha = qr_attr_f(n, "lambd", 0.5f);
        p->beta = qr_attr_f(n, "bias", 0.0f);
    } else if (strcmp(op, "Gelu") == 0) {
        p->flag = strcmp(qr_attr_s(n, "approximate", "none"), "tanh") == 0;
    } else if (strcmp(op, "IsInf") == 0) {
        p->flag = (qr_attr_i(n, "detect_positive", 1) ? 1 : 0) | (qr_attr_i(n, "detect_negative", 1) ? 2 : 0);
    }
}

typedef struct unary_job {
    const unary_def *d;
    uparams p;
    const qr_tensor *x;
    qr_tensor *y;
    const qr_f32_rows *fr; /* vector kernels (Erf, Tanh), NULL: the portable loops */
    int sigmoid_vec;       /* Sigmoid by qr_sigmoid_f32_avx2 (f32_rows.h) */
} unary_job;

static void unary_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_job *j = arg;
    const qr_tensor *x = j->x;
    qr_tensor *y = j->y;
    ufn f = j->d->f;
    if (x->dtype == QR_F32 && y->dtype == QR_F32 && f == u_relu) { /* inline, so it vectorizes */
        const float *xs = x->data;
        float *ys = y->data;
        for (int64_t i = lo; i < hi; i++)
            ys[i] = xs[i] > 0 || xs[i] != xs[i] ? xs[i] : 0.0f;
    } else if (x->dtype == QR_F32 && y->dtype == QR_F32 && (f == u_hardsigmoid || f == u_hardswish)) {
        /* MobileNetV3's gates and activations: the call per element was most of its int8 time,
         * then the scalar loop 22% of its f32 time; the vector kernel gives the same bits */
        const float *xs = (const float *)x->data + lo;
        float *ys = (float *)y->data + lo;
        double a = j->p.alpha, b = j->p.beta;
        if (j->fr)
            j->fr->hard(xs, ys, hi - lo, a, b, f == u_hardswish);
        else if (f == u_hardsigmoid)
            for (int64_t i = 0; i < hi - lo; i++)
                ys[i] = (float)clamp01(a * xs[i] + b);
        else
            for (int64_t i = 0; i < hi - lo; i++)
                ys[i] = (float)(xs[i] * clamp01((double)xs[i] / 6 + 0.5));
    } else if (x->dtype == QR_F32 && y->dtype == QR_F32 && f == u_sigmoid && j->sigmoid_vec) {
        qr_sigmoid_f32_avx2((const float *)x->data + lo, (float *)y->data + lo, hi - lo);
    } else if (x->dtype == QR_F32 && y->dtype == QR_F32 && (f == u_erf || f == u_tanh) && j->fr) {
        (f == u_erf ? j->fr->erf : j->fr->tanh)((const float *)x->data + lo, (float *)y->data + lo, hi - lo);
    } else if (x->dtype == QR_F32 && y->dtype == QR_F32) {
        const float *xs = x->data;
        float *ys = y->data;
        for (int64_t i = lo; i < hi; i++)
            ys[i] = (float)f(xs[i], &j->p);
    } else if (qr_dtype_is_float(x->dtype)) {
        for (int64_t i = lo; i < hi; i++)
            qr_set_f64(y->data, y->dtype, i, f(qr_get_f64(x->data, x->dtype, i), &j->p));
    } else if (j->d->fi) {
        for (int64_t i = lo; i < hi; i++)
            qr_set_i64(y->data, y->dtype, i, j->d->fi(qr_get_i64(x->data, x->dtype, i), &j->p));
    } else {
        for (int64_t i = lo; i < hi; i++)
            qr_set_f64(y->data, y->dtype, i, f(qr_get_f64(x->data, x->dtype, i), &j->p));
    }
}

static qr_status unary_run(qr_kctx *k)
{
    unary_job j = {.d = unary_find(k->node->op), .x = k->in[0], .y = k->out[0], .fr = qr_f32_rows_best(),
                   .sigmoid_vec = qr_sigmoid_f32_vector()};
    unary_params(k->node, &j.p);
    qr_parallel_for(k->pool, qr_tensor_numel(j.x), GRAIN, unary_range, &j);
    return QR_OK;
}

/* ------------------------------------------------------ broadcast engine */

/* Binary functions: floats in double; integers in int64 (u64 as its bits,
 * with `uns` set). An integer function returns 0 on a domain error. */
typedef struct bparams {
    int fmod;   /* Mod */
    int left;   /* BitShift */
    int uns;    /* u64 operands */
} bparams;

typedef double (*bfn)(double a, double b, const bparams *p);
typedef int (*bifn)(int64_t a, int64_t b, const bparams *p, int64_t *r);

typedef struct binary_def {
    const char *name;
    bfn f;
    bifn fi;
    int types;       /* U_* flags accepted for the inputs */
    int mixed_types; /* Pow: the exponent may have another type */
} binary_def;

static double b_first(double a, double b, const bparams *p) { (void)b; (void)p; return a; }
static double b_add(double a, double b, const bparams *p) { (void)p; return a + b; }
static double b_sub(double a, double b, const bparams *p) { (void)p; return a - b; }
static double b_mul(double a, double b, const bparams *p) { (void)p; return a * b; }
static double b_div(double a, double b, const bparams *p) { (void)p; return a / b; }
static double b_pow(double a, double b, const bparams *p) { (void)p; return pow(a, b); }
static double b_max(double a, double b, const bparams *p) { (void)p; return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double b_min(double a, double b, const bparams *p) { (void)p; return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double b_mod(double a, double b, const bparams *p)
{
    double r = fmod(a, b);
    if (!p->fmod && r != 0 && (r < 0) != (b < 0))
        r += b; /* numpy.mod: the sign of the divisor */
    return r;
}
static double b_eq(double a, double b, const bparams *p) { (void)p; return a == b; }
static double b_lt(double a, double b, const bparams *p) { (void)p; return a < b; }
static double b_gt(double a, double b, const bparams *p) { (void)p; return a > b; }
static double b_le(double a, double b, const bparams *p) { (void)p; return a <= b; }
static double b_ge(double a, double b, const bparams *p) { (void)p; return a >= b; }

static int bi_first(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)b; (void)p; *r = a; return 1; }
static int bi_add(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = (int64_t)((uint64_t)a + (uint64_t)b); return 1; }
static int bi_sub(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = (int64_t)((uint64_t)a - (uint64_t)b); return 1; }
static int bi_mul(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = (int64_t)((uint64_t)a * (uint64_t)b); return 1; }
static int bi_div(int64_t a, int64_t b, const bparams *p, int64_t *r)
{
    if (b == 0)
        return 0;
    if (p->uns)
        *r = (int64_t)((uint64_t)a / (uint64_t)b);
    else
        *r = b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; /* INT64_MIN / -1 wraps instead of trapping */
    return 1;
}
static int bi_mod(int64_t a, int64_t b, const bparams *p, int64_t *r)
{
    if (b == 0)
        return 0;
    if (p->uns) {
        *r = (int64_t)((uint64_t)a % (uint64_t)b);
        return 1;
    }
    int64_t m = b == -1 ? 0 : a % b;
    if (!p->fmod && m != 0 && (m < 0) != (b < 0))
        m += b; /* Python's %: the sign of the divisor */
    *r = m;
    return 1;
}
static int bi_pow(int64_t a, int64_t b, const bparams *p, int64_t *r)
{
    (void)p;
    if (b < 0) { /* the integer part of a fraction */
        *r = a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
        return a != 0;
    }
    uint64_t base = (uint64_t)a, acc = 1;
    for (uint64_t e = (uint64_t)b; e; e >>= 1, base *= base)
        if (e & 1)
            acc *= base;
    *r = (int64_t)acc;
    return 1;
}
static int icmp(int64_t a, int64_t b, const bparams *p)
{
    if (p->uns)
        return (uint64_t)a < (uint64_t)b ? -1 : (uint64_t)a > (uint64_t)b;
    return a < b ? -1 : a > b;
}
static int bi_max(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) >= 0 ? a : b; return 1; }
static int bi_min(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) <= 0 ? a : b; return 1; }
static int bi_eq(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = a == b; return 1; }
static int bi_lt(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) < 0; return 1; }
static int bi_gt(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) > 0; return 1; }
static int bi_le(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) <= 0; return 1; }
static int bi_ge(int64_t a, int64_t b, const bparams *p, int64_t *r) { *r = icmp(a, b, p) >= 0; return 1; }
static int bi_and(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = a && b; return 1; }
static int bi_or(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = a || b; return 1; }
static int bi_xor(int64_t a, int64_t b, const bparams *p, int64_t *r) { (void)p; *r = !a != !b; return 1; }
static int bi_shift(int64_t a, int64_t b, const bparams *p, int64_t *r)
{
    uint64_t x = (uint64_t)a, s = (uint64_t)b;
    *r = s >= 64 ? 0 : (int64_t)(p->left ? x << s : x >> s);
    return 1;
}

static const binary_def binary_defs[] = {
    {"Add", b_add, bi_add, U_NUM, 0},
    {"Sub", b_sub, bi_sub, U_NUM, 0},
    {"Mul", b_mul, bi_mul, U_NUM, 0},
    {"Div", b_div, bi_div, U_NUM, 0},
    {"Pow", b_pow, bi_pow, U_NUM, 1},
    {"Mod", b_mod, bi_mod, U_NUM, 0},
    {"Max", b_max, bi_max, U_NUM, 0},
    {"Min", b_min, bi_min, U_NUM, 0},
    {"Sum", b_add, bi_add, U_NUM, 0},
    {"Mean", b_add, bi_add, U_FLOAT, 0},
    {"PRelu", NULL, NULL, U_NUM, 0}, /* computed by prelu_run; listed for type checks */
    {"Equal", b_eq, bi_eq, U_NUM | U_BOOL | U_OUT_BOOL, 0},
    {"Less", b_lt, bi_lt, U_NUM | U_OUT_BOOL, 0},
    {"Greater", b_gt, bi_gt, U_NUM | U_OUT_BOOL, 0},
    {"LessOrEqual", b_le, bi_le, U_NUM | U_OUT_BOOL, 0},
    {"GreaterOrEqual", b_ge, bi_ge, U_NUM | U_OUT_BOOL, 0},
    {"And", NULL, bi_and, U_BOOL | U_OUT_BOOL, 0},
    {"Or", NULL, bi_or, U_BOOL | U_OUT_BOOL, 0},
    {"Xor", NULL, bi_xor, U_BOOL | U_OUT_BOOL, 0},
    {"BitShift", NULL, bi_shift, U_UINT, 0},
};

static const binary_def first_def = {"(first)", b_first, bi_first, U_NUM | U_BOOL, 0};

static const binary_def *binary_find(const char *op)
{
    for (size_t i = 0; i < sizeof binary_defs / sizeof binary_defs[0]; i++)
        if (strcmp(binary_defs[i].name, op) == 0)
            return &binary_defs[i];
    return NULL;
}

/* One application y = f(a, b) with broadcasting. The outer dims are walked
 * with qr_iter; the last dim is a tight loop with per-input stride 0 or 1. */
typedef struct bin_job {
    const binary_def *d;
    bparams p;
    const qr_tensor *a, *b;
    qr_tensor *y;
    int64_t inner, sa, sb; /* last-dim length and input strides on it */
    int64_t astr[QR_MAX_DIMS], bstr[QR_MAX_DIMS];
    int outer_nd;
    int failed; /* an integer domain error (division by zero) */
} bin_job;

/* The four arithmetic ops on f32 rows, inline so they vectorize. Computing
 * in float gives the result the double path rounds to: double's 53 bits are
 * more than 2 x 24 + 2, so rounding twice cannot differ. Returns 0 for any
 * other op. */
#define F32_LOOP(EXPR)                                                                                        \
    do {                                                                                                      \
        if (sa == 1 && sb == 1)                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                                 \
                float u = xa[i], v = xb[i];                                                                   \
                y[i] = EXPR;                                                                                  \
            }                                                                                                 \
        else if (sa == 1 && sb == 0)                                                                          \
            for (int64_t i = 0; i < n; i++) {                                                                 \
                float u = xa[i], v = xb[0];                                                                   \
                y[i] = EXPR;                                                                                  \
            }                                                                                                 \
        else if (sa == 0 && sb == 1) /* a gate times features ([1,C,1,1] * [1,C,H,W]) */                    \
            for (int64_t i = 0; i < n; i++) {                                                                 \
                float u = xa[0], v = xb[i];                                                                   \
                y[i] = EXPR;                                                                                  \
            }                                                                                                 \
        else                                                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                                 \
                float u = xa[i * sa], v = xb[i * sb];                                                         \
                y[i] = EXPR;                                                                                  \
            }                                                                                                 \
    } while (0)

/* One clone per vector width, picked by the CPU at load time (SSE2 alone was the default);
 * no contraction, so every clone gives the double path's bits. */
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off"))) static int
f32_arith(bfn f, const float *xa, int64_t sa, const float *xb, int64_t sb, float *y, int64_t n)
{
    if (f == b_add)
        F32_LOOP(u + v);
    else if (f == b_sub)
        F32_LOOP(u - v);
    else if (f == b_mul)
        F32_LOOP(u * v);
    else if (f == b_div)
        F32_LOOP(u / v);
    else
        return 0;
    return 1;
}
#undef F32_LOOP

static void bin_rows(bin_job *j, int64_t row_lo, int64_t row_hi)
{
    const qr_tensor *a = j->a, *b = j->b;
    qr_tensor *y = j->y;
    int use_float = qr_dtype_is_float(a->dtype);
    int f32 = a->dtype == QR_F32 && b->dtype == QR_F32 && y->dtype == QR_F32;
    qr_iter it;
    qr_tensor shape = {0};
    shape.ndim = j->outer_nd;
    memcpy(shape.dims, y->dims, sizeof(int64_t) * (size_t)j->outer_nd);
    qr_iter_init(&it, &shape, 2);
    memcpy(it.stride[0], j->astr, sizeof j->astr);
    memcpy(it.stride[1], j->bstr, sizeof j->bstr);
    /* Position the iterator at row_lo. */
    int64_t r = row_lo;
    for (int d = j->outer_nd - 1; d >= 0; d--) {
        it.idx[d] = r % it.dims[d];
        r /= it.dims[d];
        it.off[0] += it.idx[d] * it.stride[0][d];
        it.off[1] += it.idx[d] * it.stride[1][d];
    }
    for (int64_t row = row_lo; row < row_hi; row++, qr_iter_next(&it)) {
        int64_t ia = it.off[0], ib = it.off[1], iy = row * j->inner;
        if (f32 && f32_arith(j->d->f, (const float *)a->data + ia, j->sa, (const float *)b->data + ib, j->sb,
                             (float *)y->data + iy, j->inner)) {
            /* done inline */
        } else if (f32) {
            const float *xa = a->data, *xb = b->data;
            float *ys = y->data;
            for (int64_t i = 0; i < j->inner; i++)
                ys[iy + i] = (float)j->d->f(xa[ia + i * j->sa], xb[ib + i * j->sb], &j->p);
        } else if (use_float) {
            for (int64_t i = 0; i < j->inner; i++) {
                double v = j->d->f(qr_get_f64(a->data, a->dtype, ia + i * j->sa),
                                   qr_get_f64(b->data, b->dtype, ib + i * j->sb), &j->p);
                qr_set_f64(y->data, y->dtype, iy + i, v);
            }
        } else if (qr_dtype_is_float(b->dtype)) { /* Pow of an integer base by a float exponent */
            for (int64_t i = 0; i < j->inner; i++) {
                double v = pow(qr_get_f64(a->data, a->dtype, ia + i * j->sa),
                               qr_get_f64(b->data, b->dtype, ib + i * j->sb));
                qr_set_f64(y->data, y->dtype, iy + i, v);
            }
        } else {
            for (int64_t i = 0; i < j->inner; i++) {
                int64_t v;
                if (!j->d->fi(qr_get_i64(a->data, a->dtype, ia + i * j->sa),
                              qr_get_i64(b->data, b->dtype, ib + i * j->sb), &j->p, &v)) {
                    j->failed = 1;
                    v = 0;
                }
                qr_set_i64(y->data, y->dtype, iy + i, v);
            }
        }
    }
}

static void bin_range(void *arg, int64_t lo, int64_t hi)
{
    bin_rows(arg, lo, hi);
}

/* y = f(a, b); y's shape is the broadcast of a and b (a may be y itself). */
static qr_status bin_apply(qr_kctx *k, const binary_def *d, const bparams *p, const qr_tensor *a, const qr_tensor *b,
                           qr_tensor *y)
{
    bin_job j = {.d = d, .p = *p, .a = a, .b = b, .y = y};
    int nd = y->ndim;
    int64_t n = qr_tensor_numel(y);
    if (n == 0)
        return QR_OK;
    int64_t as[QR_MAX_DIMS], bs[QR_MAX_DIMS];
    qr_broadcast_strides(a, y, as);
    qr_broadcast_strides(b, y, bs);
    j.inner = nd ? y->dims[nd - 1] : 1;
    j.sa = nd ? as[nd - 1] : 0;
    j.sb = nd ? bs[nd - 1] : 0;
    j.outer_nd = nd ? nd - 1 : 0;
    /* outer dims that continue the row in both inputs (each input's stride there the row's length
     * times its element stride: contiguous, or broadcast along both) join it, while the row stays
     * within a parallel chunk: a 28 x 28 image less a scalar was 28 calls of 28 elements, about
     * 1 us of the bundled CNN's 18 at batch 1 for its Sub and Div */
    while (j.outer_nd > 0 && j.inner * y->dims[j.outer_nd - 1] <= GRAIN && as[j.outer_nd - 1] == j.sa * j.inner &&
           bs[j.outer_nd - 1] == j.sb * j.inner) {
        j.inner *= y->dims[j.outer_nd - 1];
        j.outer_nd--;
    }
    memcpy(j.astr, as, sizeof as);
    memcpy(j.bstr, bs, sizeof bs);
    j.p.uns = a->dtype == QR_U64;
    int64_t rows = n / j.inner;
    /* Rows in parallel only when each carries enough work; a job's rows are
     * independent, and `a == y` reads and writes the same element only. */
    int64_t grain = j.inner >= GRAIN ? 1 : GRAIN / j.inner;
    if (j.d->fi && !qr_dtype_is_float(a->dtype))
        qr_parallel_for(NULL, rows, grain, bin_range, &j); /* serial: `failed` is shared */
    else
        qr_parallel_for(k->pool, rows, grain, bin_range, &j);
    if (j.failed)
        return QR_KERR(k, "integer division by zero");
    return QR_OK;
}

static qr_status check_types(qr_kctx *k, const binary_def *d, int from, int to)
{
    qr_dtype t = k->in[from]->dtype;
    for (int i = from; i < to; i++) {
        if (need_input(k, i) != QR_OK)
            return QR_ERR;
        qr_dtype ti = k->in[i]->dtype;
        if (!type_allowed(ti, d->types))
            return QR_KERR(k, "input %d has type %s, which %s does not take", i, qr_dtype_name(ti), d->name);
        if (ti != t && !(d->mixed_types && i == 1))
            return QR_KERR(k, "input %d has type %s but input %d has %s", i, qr_dtype_name(ti), from,
                           qr_dtype_name(t));
    }
    if (d->mixed_types && k->n_in > 1 && !is_numeric(k->in[1]->dtype))
        return QR_KERR(k, "input 1 has type %s", qr_dtype_name(k->in[1]->dtype));
    return QR_OK;
}

static qr_status nary_infer(qr_kctx *k)
{
    const binary_def *d = binary_find(k->node->op);
    if (!d)
        return QR_KERR(k, "no binary kernel");
    if (k->n_in < 1 || need_input(k, 0) != QR_OK)
        return QR_ERR;
    if (check_types(k, d, 0, k->n_in) != QR_OK)
        return QR_ERR;
    if (qr_broadcast_shapes(k, k->in, k->n_in, k->out[0]) != QR_OK)
        return QR_ERR;
    k->out[0]->dtype = d->types & U_OUT_BOOL ? QR_BOOL : k->in[0]->dtype;
    return QR_OK;
}

static qr_status nary_run(qr_kctx *k)
{
    const binary_def *d = binary_find(k->node->op);
    bparams p = {0};
    qr_tensor *y = k->out[0];
    if (strcmp(d->name, "Mod") == 0)
        p.fmod = qr_attr_i(k->node, "fmod", 0) != 0;
    if (strcmp(d->name, "BitShift") == 0)
        p.left = strcmp(qr_attr_s(k->node, "direction", ""), "LEFT") == 0;
    if (k->n_in == 2 && strcmp(d->name, "Mean") != 0)
        return bin_apply(k, d, &p, k->in[0], k->in[1], y);
    /* Variadic: broadcast the first input into y, then fold the others in. */
    if (bin_apply(k, &first_def, &p, k->in[0], k->in[0], y) != QR_OK)
        return QR_ERR;
    for (int i = 1; i < k->n_in; i++)
        if (bin_apply(k, d, &p, y, k->in[i], y) != QR_OK)
            return QR_ERR;
    if (strcmp(d->name, "Mean") == 0) {
        int64_t n = qr_tensor_numel(y);
        for (int64_t i = 0; i < n; i++)
            qr_set_f64(y->data, y->dtype, i, qr_get_f64(y->data, y->dtype, i) / k->n_in);
    }
    return QR_OK;
}

static qr_status bitshift_infer(qr_kctx *k)
{
    const char *dir = qr_attr_s(k->node, "direction", "");
    if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
        return QR_KERR(k, "direction must be LEFT or RIGHT, not '%s'", dir);
    return nary_infer(k);
}

static qr_status mod_infer(qr_kctx *k)
{
    qr_status st = nary_infer(k);
    if (st == QR_OK && qr_dtype_is_float(k->in[0]->dtype) && !qr_attr_i(k->node, "fmod", 0))
        return QR_KERR(k, "floating-point Mod needs fmod=1");
    return st;
}

/* PRelu: slope broadcasts to X (unidirectionally). Before opset 7 a 1-D
 * slope of X's channel count is per channel, i.e. shaped [C, 1, ..., 1]. */
static const qr_tensor *prelu_slope(qr_kctx *k, qr_tensor *view)
{
    const qr_tensor *x = k->in[0], *s = k->in[1];
    if (k->opset >= 7 || s->ndim != 1 || x->ndim < 2 || s->dims[0] != x->dims[1] || s->dims[0] == 1)
        return s;
    *view = *s;
    view->ndim = x->ndim - 1;
    for (int d = 1; d < view->ndim; d++)
        view->dims[d] = 1;
    return view;
}

static qr_status prelu_infer(qr_kctx *k)
{
    if (need_input(k, 0) != QR_OK || need_input(k, 1) != QR_OK)
        return QR_ERR;
    qr_tensor view;
    const qr_tensor *ins[2] = {k->in[0], prelu_slope(k, &view)};
    qr_kctx k2 = *k;
    k2.in = ins;
    qr_status st = nary_infer(&k2);
    if (st != QR_OK)
        return st;
    if (!qr_tensor_same_shape(k->out[0], k->in[0]))
        return QR_KERR(k, "slope does not broadcast to the shape of X");
    return QR_OK;
}

static double b_prelu(double x, double s, const bparams *p) { (void)p; return x < 0 ? s * x : x; }
static int bi_prelu(int64_t x, int64_t s, const bparams *p, int64_t *r)
{
    (void)p;
    *r = x < 0 ? (int64_t)((uint64_t)s * (uint64_t)x) : x;
    return 1;
}

static qr_status prelu_run(qr_kctx *k)
{
    static const binary_def d = {"PRelu", b_prelu, bi_prelu, U_NUM, 0};
    bparams p = {0};
    qr_tensor view;
    return bin_apply(k, &d, &p, k->in[0], prelu_slope(k, &view), k->out[0]);
}

/* ------------------------------------------------------------------ Where */

static qr_status where_infer(qr_kctx *k)
{
    for (int i = 0; i < 3; i++)
        if (need_input(k, i) != QR_OK)
            return QR_ERR;
    if (k->in[0]->dtype != QR_BOOL)
        return QR_KERR(k, "condition has type %s, expected bool", qr_dtype_name(k->in[0]->dtype));
    if (k->in[1]->dtype != k->in[2]->dtype)
        return QR_KERR(k, "X has type %s but Y has %s", qr_dtype_name(k->in[1]->dtype), qr_dtype_name(k->in[2]->dtype));
    if (k->in[1]->dtype == QR_STRING)
        return QR_KERR(k, "string tensors are not supported");
    if (qr_broadcast_shapes(k, k->in, 3, k->out[0]) != QR_OK)
        return QR_ERR;
    k->out[0]->dtype = k->in[1]->dtype;
    return QR_OK;
}

static qr_status where_run(qr_kctx *k)
{
    qr_tensor *y = k->out[0];
    int64_t n = qr_tensor_numel(y);
    size_t es = qr_dtype_size(y->dtype);
    qr_iter it;
    qr_iter_init(&it, y, 3);
    for (int i = 0; i < 3; i++)
        qr_broadcast_strides(k->in[i], y, it.stride[i]);
    const uint8_t *c = k->in[0]->data;
    const char *xs = k->in[1]->data, *ys = k->in[2]->data;
    char *out = y->data;
    if (es == 4 && y->ndim > 0 && n > 0) {
        /* rows of the last dim, each input's stride along it 0 or 1: a select GCC vectorizes
         * (a causal mask over attention scores) */
        int r = y->ndim;
        int64_t inner = y->dims[r - 1], sc = it.stride[0][r - 1], sx = it.stride[1][r - 1], sy = it.stride[2][r - 1];
        qr_tensor outer = {.ndim = r - 1};
        memcpy(outer.dims, y->dims, sizeof(int64_t) * (size_t)(r - 1));
        qr_iter ot;
        qr_iter_init(&ot, &outer, 3);
        for (int i = 0; i < 3; i++)
            memcpy(ot.stride[i], it.stride[i], sizeof(int64_t) * (size_t)(r - 1));
        for (int64_t row = 0; row < n / inner; row++, qr_iter_next(&ot)) {
            const uint8_t *cr = c + ot.off[0];
            const uint32_t *xr = (const uint32_t *)(const void *)xs + ot.off[1];
            const uint32_t *yr = (const uint32_t *)(const void *)ys + ot.off[2];
            uint32_t *o = (uint32_t *)(void *)out + row * inner;
            for (int64_t i = 0; i < inner; i++)
                o[i] = cr[i * sc] ? xr[i * sx] : yr[i * sy];
        }
        return QR_OK;
    }
    for (int64_t i = 0; i < n; i++, qr_iter_next(&it)) {
        const char *src = c[it.off[0]] ? xs + it.off[1] * (int64_t)es : ys + it.off[2] * (int64_t)es;
        memcpy(out + i * (int64_t)es, src, es);
    }
    return QR_OK;
}

/* ------------------------------------------------------------------- Clip */

static qr_status clip_infer(qr_kctx *k)
{
    if (need_input(k, 0) != QR_OK)
        return QR_ERR;
    qr_dtype t = k->in[0]->dtype;
    if (!is_numeric(t))
        return QR_KERR(k, "input type %s is not supported", qr_dtype_name(t));
    for (int i = 1; i < k->n_in; i++) {
        const qr_tensor *b = k->in[i];
        if (!b)
            continue;
        if (b->dtype != t)
            return QR_KERR(k, "%s has type %s, expected %s", i == 1 ? "min" : "max", qr_dtype_name(b->dtype),
                           qr_dtype_name(t));
        if (qr_tensor_numel(b) != 1)
            return QR_KERR(k, "%s must be a scalar", i == 1 ? "min" : "max");
    }
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

static void clip_f32(const float *x, float *y, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

static qr_status clip_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0], *tmin = k->n_in > 1 ? k->in[1] : NULL, *tmax = k->n_in > 2 ? k->in[2] : NULL;
    qr_tensor *y = k->out[0];
    int64_t n = qr_tensor_numel(x);
    if (qr_dtype_is_float(x->dtype)) {
        double lo = -INFINITY, hi = INFINITY;
        if (k->opset < 11) {
            lo = qr_attr_f(k->node, "min", -FLT_MAX);
            hi = qr_attr_f(k->node, "max", FLT_MAX);
        }
        if (tmin)
            lo = qr_get_f64(tmin->data, tmin->dtype, 0);
        if (tmax)
            hi = qr_get_f64(tmax->data, tmax->dtype, 0);
        if (x->dtype == QR_F32 && y->dtype == QR_F32) { /* f32 bounds are exact in float: the same result */
            clip_f32(x->data, y->data, n, (float)lo, (float)hi);
            return QR_OK;
        }
        for (int64_t i = 0; i < n; i++) {
            double v = qr_get_f64(x->data, x->dtype, i);
            v = v < lo ? lo : v; /* min > max gives max, as numpy.clip does */
            v = v > hi ? hi : v;
            qr_set_f64(y->data, y->dtype, i, v);
        }
        return QR_OK;
    }
    bparams p = {.uns = x->dtype == QR_U64};
    for (int64_t i = 0; i < n; i++) {
        int64_t v = qr_get_i64(x->data, x->dtype, i);
        if (tmin && icmp(v, qr_get_i64(tmin->data, tmin->dtype, 0), &p) < 0)
            v = qr_get_i64(tmin->data, tmin->dtype, 0);
        if (tmax && icmp(v, qr_get_i64(tmax->data, tmax->dtype, 0), &p) > 0)
            v = qr_get_i64(tmax->data, tmax->dtype, 0);
        qr_set_i64(y->data, y->dtype, i, v);
    }
    return QR_OK;
}

/* ------------------------------------------------------------------- Cast */

static qr_status cast_to(qr_kctx *k, qr_dtype to)
{
    const qr_tensor *x = k->in[0];
    if (to == QR_UNDEF || to == QR_STRING)
        return QR_KERR(k, "cannot cast to this type");
    if (x->dtype == QR_STRING || x->dtype == QR_UNDEF)
        return QR_KERR(k, "cannot cast from type %s", qr_dtype_name(x->dtype));
    qr_same_as(k->out[0], x);
    k->out[0]->dtype = to;
    return QR_OK;
}

static qr_status cast_infer(qr_kctx *k)
{
    if (need_input(k, 0) != QR_OK)
        return QR_ERR;
    int64_t code = qr_attr_i(k->node, "to", -1);
    qr_dtype to = code > 0 && code <= INT32_MAX ? qr_dtype_from_onnx((int)code) : QR_UNDEF; /* no narrowing */
    if (to == QR_UNDEF || to == QR_STRING)
        return QR_KERR(k, "cast to ONNX type %lld is not supported", (long long)code);
    return cast_to(k, to);
}

static qr_status castlike_infer(qr_kctx *k)
{
    if (need_input(k, 0) != QR_OK || need_input(k, 1) != QR_OK)
        return QR_ERR;
    return cast_to(k, k->in[1]->dtype);
}

static qr_status cast_run(qr_kctx *k)
{
    const qr_tensor *x = k->in[0];
    qr_tensor *y = k->out[0];
    int64_t n = qr_tensor_numel(x);
    if (x->dtype == y->dtype) {
        memcpy(y->data, x->data, qr_tensor_nbytes(x));
    } else if (y->dtype == QR_BOOL) {
        uint8_t *b = y->data;
        for (int64_t i = 0; i < n; i++)
            b[i] = qr_dtype_is_float(x->dtype) ? qr_get_f64(x->data, x->dtype, i) != 0
                                               : qr_get_i64(x->data, x->dtype, i) != 0;
    } else if (x->dtype == QR_F32 && y->dtype == QR_F16) {
        const float *xs = x->data; /* direct, so f32 -> f16 rounds once */
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)y->data)[i] = qr_float_to_half(xs[i]);
    } else if (x->dtype == QR_I32 && y->dtype == QR_F32) {
        /* an integer product's sums (MatMulInteger, ConvInteger) to f32: one rounding, as through
         * double, in a loop the compiler vectorizes */
        const int32_t *xs = x->data;
        float *ys = y->data;
        for (int64_t i = 0; i < n; i++)
            ys[i] = (float)xs[i];
    } else if (qr_dtype_is_float(x->dtype) || qr_dtype_is_float(y->dtype)) {
        /* u64/i64 -> float goes through double; float -> int saturates (NaN -> 0). */
        for (int64_t i = 0; i < n; i++)
            qr_set_f64(y->data, y->dtype, i, qr_get_f64(x->data, x->dtype, i));
    } else {
        for (int64_t i = 0; i < n; i++) /* integer -> integer wraps, like numpy's astype */
            qr_set_i64(y->data, y->dtype, i, qr_get_i64(x->data, x->dtype, i));
    }
    return QR_OK;
}

/* ------------------------------------------------------ Identity, Dropout */

static qr_status identity_infer(qr_kctx *k)
{
    if (need_input(k, 0) != QR_OK)
        return QR_ERR;
    if (k->in[0]->dtype == QR_STRING)
        return QR_KERR(k, "string tensors are not supported");
    qr_same_as(k->out[0], k->in[0]);
    return QR_OK;
}

static qr_status identity_run(qr_kctx *k)
{
    memcpy(k->out[0]->data, k->in[0]->data, qr_tensor_nbytes(k->in[0]));
    return QR_OK;
}

/* Inference Dropout is the identity with an all-true mask. Training mode with
 * a non-zero ratio draws random masks, which a deterministic runtime refuses. */
static qr_status dropout_infer(qr_kctx *k)
{
    if (identity_infer(k) != QR_OK)
        return QR_ERR;
    if (k->n_in > 2 && k->in[2]) {
        const qr_tensor *tm = k->in[2], *r = k->n_in > 1 ? k->in[1] : NULL;
        if (tm->dtype != QR_BOOL || qr_tensor_numel(tm) != 1)
            return QR_KERR(k, "training_mode must be a bool scalar");
        if (!tm->data || (r && !r->data))
            return QR_NEED_DATA;
        double ratio = r ? qr_get_f64(r->data, r->dtype, 0) : 0.5;
        if (((const uint8_t *)tm->data)[0] && ratio != 0)
            return QR_KERR(k, "training mode with ratio %g is random; QRL runs inference only", ratio);
    }
    if (k->n_out > 1 && k->out[1]) {
        qr_same_as(k->out[1], k->in[0]);
        k->out[1]->dtype = QR_BOOL;
    }
    return QR_OK;
}

static qr_status dropout_run(qr_kctx *k)
{
    identity_run(k);
    if (k->n_out > 1 && k->out[1])
        memset(k->out[1]->data, 1, qr_tensor_nbytes(k->out[1]));
    return QR_OK;
}

/* ------------------------------------------------------------------ table */

#define UNARY(name, attrs) {name, "", 1, 1, 1, 1, attrs, unary_infer, unary_run, 1, .pointwise = 1}
#define BINARY(name, attrs) {name, "", 2, 2, 1, 1, attrs, nary_infer, nary_run, 1, .pointwise = 1}
/* Any number of inputs, as Concat (the executor sizes its argument arrays by the widest node). */
#define VARIADIC(name) {name, "", 1, 4096, 1, 1, "", nary_infer, nary_run, 0, .ins = "data..."}

const qr_op_def qr_ops_elementwise[] = {
    UNARY("Neg", ""),
    UNARY("Abs", ""),
    UNARY("Sqrt", ""),
    UNARY("Exp", ""),
    UNARY("Log", ""),
    UNARY("Erf", ""),
    UNARY("Tanh", ""),
    UNARY("Floor", ""),
    UNARY("Ceil", ""),
    UNARY("Round", ""),
    UNARY("Reciprocal", ""),
    UNARY("Sin", ""),
    UNARY("Cos", ""),
    UNARY("Tan", ""),
    UNARY("Asin", ""),
    UNARY("Acos", ""),
    UNARY("Atan", ""),
    UNARY("Sinh", ""),
    UNARY("Cosh", ""),
    UNARY("Asinh", ""),
    UNARY("Acosh", ""),
    UNARY("Atanh", ""),
    UNARY("Relu", ""),
    UNARY("Sigmoid", ""),
    UNARY("Sign", ""),
    UNARY("LeakyRelu", "alpha:f"),
    UNARY("Elu", "alpha:f"),
    UNARY("Celu", "alpha:f"),
    UNARY("Selu", "alpha:f gamma:f"),
    UNARY("ThresholdedRelu", "alpha:f"),
    UNARY("Softsign", ""),
    UNARY("Softplus", ""),
    UNARY("Mish", ""),
    UNARY("HardSigmoid", "alpha:f beta:f"),
    UNARY("HardSwish", ""),
    UNARY("Shrink", "lambd:f bias:f"),
    UNARY("Gelu", "approximate:s"),
    UNARY("IsNaN", ""),
    UNARY("IsInf", "detect_negative:i detect_positive:i"),
    UNARY("Not", ""),
    BINARY("Add", "broadcast:i axis:i"),
    BINARY("Sub", "broadcast:i axis:i"),
    BINARY("Mul", "broadcast:i axis:i"),
    BINARY("Div", "broadcast:i axis:i"),
    BINARY("Pow", "broadcast:i axis:i"),
    {"Mod", "", 2, 2, 1, 1, "fmod:i", mod_infer, nary_run, 0, .ins = "A B"},
    {"BitShift", "", 2, 2, 1, 1, "direction:s", bitshift_infer, nary_run, 0, .ins = "X:i Y:i"},
    BINARY("Equal", "broadcast:i axis:i"),
    BINARY("Less", "broadcast:i axis:i"),
    BINARY("Greater", "broadcast:i axis:i"),
    BINARY("LessOrEqual", ""),
    BINARY("GreaterOrEqual", ""),
    BINARY("And", "broadcast:i axis:i"),
    BINARY("Or", "broadcast:i axis:i"),
    BINARY("Xor", "broadcast:i axis:i"),
    VARIADIC("Max"),
    VARIADIC("Min"),
    VARIADIC("Sum"),
    VARIADIC("Mean"),
    {"PRelu", "", 2, 2, 1, 1, "", prelu_infer, prelu_run, 1, .ins = "X slope"},
    {"Where", "", 3, 3, 1, 1, "", where_infer, where_run, 0, .ins = "condition:b X Y",
     .writes_all = qr_op_writes_all, .pointwise = 1},
    {"Clip", "", 1, 3, 1, 1, "min:f max:f", clip_infer, clip_run, 1, .ins = "input min?:0-1 max?:0-1",
     .samples = qr_op_samples_window},
    {"Cast", "", 1, 1, 1, 1, "to:i saturate:i", cast_infer, cast_run, 0},
    {"CastLike", "", 2, 2, 1, 1, "saturate:i", castlike_infer, cast_run, 0, .ins = "input target_type"},
    {"Identity", "", 1, 1, 1, 1, "", identity_infer, identity_run, 0},
    {"Dropout", "", 1, 3, 1, 2, "ratio:f is_test:i seed:i", dropout_infer, dropout_run, 0, .ins = "data ratio?:0 training_mode?:b0"},
    {0},
};
