/* The compiler end to end: QRL source -> libgccjit -> native code, compared
 * with C references: integer arithmetic and overflow, rounding modes on ties
 * and negative values, saturating conversions, loops, bounds checks, the
 * stdlib calibrators against the same computation in C, and the cache. */
#include <criterion/criterion.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../compiler/cache.h"
#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "histogram.h"
#include "tensor_io.h"
#include "recipe.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
    dir = tu_tmpdir();
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(jit, .init = setup, .fini = teardown);

/* Writes src to DIR/name, its path into path. */
static void write_src(const char *name, const char *src, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(src, f);
    fclose(f);
}

/* Compiles source (written to DIR/name) in memory; fails the test on any diagnostic. */
static qrl_module *compile_text(const char *name, const char *src, const qc_options *o, qc_stats *st)
{
    char path[600];
    write_src(name, src, path, sizeof path);
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load(u, path);
    if (!u->diags.errors)
        qc_check(u);
    qrl_module *m = NULL;
    qc_options def = {.no_cache = 1};
    if (!u->diags.errors)
        m = qc_compile(u, o ? o : &def, st);
    if (u->diags.errors) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mf = open_memstream(&buf, &len);
        ql_diags_print(&u->diags, mf);
        fclose(mf);
        cr_assert_fail("compile failed:\n%s", buf);
    }
    qc_unit_free(u);
    cr_assert(m);
    return m;
}

/* A node of op `op` reading one fresh value, writing another (attributes added by the test). */
static qr_node *one_node(qr_graph *g, const char *op)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%d", op, g->n_nodes);
    qr_node *n = qr_graph_add_node(g, op, name, 1, 1);
    n->in[0] = qr_graph_new_value(g, "");
    n->out[0] = qr_graph_new_value(g, "");
    n->out[0]->producer = n;
    return n;
}

/* Fn name's C function, once its registered type is the one written (tu_fn). */
static void *fn(qrl_module *m, const char *name, const char *type)
{
    return tu_fn(m, name, type)->fn;
}

/* What a fn of every parameter kind registers: its result and its parameters by name, kind and
 * element type, as the source declares them (written out here by hand). */
static const char typed_src[] =
    "fn scalars(a: bool, b: i8, c: u8, d: i16, e: u16, f: i32, g: i64, h: f32, k: f64) -> bool { return a }\n"
    "fn arrays(a: bool[], b: u8[], c: i64[], d: f32[]) -> f64 { return f64(len(c)) }\n"
    "fn tensors(x: tensor<u8>, y: tensor<i32>, z: tensor<f32>) -> i64 { return x.numel + y.rank }\n"
    "fn records(t: qtype, p: qparams) -> qparams { return qparams(p.scale * 2.0, p.zero + t.bits) }\n"
    "fn pass(t: qtype) -> qtype { return t }\n"
    "fn nothing(x: f64) { }\n"
    "fn none() -> i8 { return 7 }\n"
    "kernel copy(x: tensor<i8>, s: f32[], y: tensor<i8>) {\n"
    "  for i in 0 .. x.numel { y[i] = x[i] }\n"
    "}\n";

#define P(name, kind, elem) {name, QR_PARAM_##kind, elem}
#define RES(kind, elem) {NULL, QR_PARAM_##kind, elem}
static const struct {
    const char *fn;
    qr_param_desc result;
    int n;
    qr_param_desc params[9];
} typed_want[] = {
    {"scalars", RES(SCALAR, QR_BOOL), 9,
     {P("a", SCALAR, QR_BOOL), P("b", SCALAR, QR_I8), P("c", SCALAR, QR_U8), P("d", SCALAR, QR_I16),
      P("e", SCALAR, QR_U16), P("f", SCALAR, QR_I32), P("g", SCALAR, QR_I64), P("h", SCALAR, QR_F32),
      P("k", SCALAR, QR_F64)}},
    {"arrays", RES(SCALAR, QR_F64), 4,
     {P("a", ARRAY, QR_BOOL), P("b", ARRAY, QR_U8), P("c", ARRAY, QR_I64), P("d", ARRAY, QR_F32)}},
    {"tensors", RES(SCALAR, QR_I64), 3, {P("x", TENSOR, QR_U8), P("y", TENSOR, QR_I32), P("z", TENSOR, QR_F32)}},
    {"records", RES(QPARAMS, QR_UNDEF), 2, {P("t", QTYPE, QR_UNDEF), P("p", QPARAMS, QR_UNDEF)}},
    {"pass", RES(QTYPE, QR_UNDEF), 1, {P("t", QTYPE, QR_UNDEF)}},
    {"nothing", RES(VOID, QR_UNDEF), 1, {P("x", SCALAR, QR_F64)}},
    {"none", RES(SCALAR, QR_I8), 0, {{0}}},
    {"copy", RES(VOID, QR_UNDEF), 3, {P("x", TENSOR, QR_I8), P("s", ARRAY, QR_F32), P("y", TENSOR, QR_I8)}},
};
#undef P
#undef RES

Test(jit, fns_register_typed_parameters_and_results)
{
    qrl_module *m = compile_text("typed.qrl", typed_src, NULL, NULL);
    for (size_t f = 0; f < sizeof typed_want / sizeof *typed_want; f++) {
        const qr_fn_desc *d = qr_module_fn(m, typed_want[f].fn);
        cr_assert(d, "%s", typed_want[f].fn);
        cr_assert_eq(d->is_kernel, !strcmp(d->name, "copy"), "%s", d->name);
        cr_assert(d->result.name == NULL && d->result.kind == typed_want[f].result.kind &&
                      d->result.elem == typed_want[f].result.elem,
                  "%s's result: kind %d elem %d", d->name, d->result.kind, d->result.elem);
        cr_assert_eq(d->nparams, typed_want[f].n, "%s", d->name);
        for (int i = 0; i < d->nparams; i++) {
            const qr_param_desc *h = &d->params[i], *w = &typed_want[f].params[i];
            cr_assert(!strcmp(h->name, w->name) && h->kind == w->kind && h->elem == w->elem,
                      "%s's parameter %d: %s kind %d elem %d", d->name, i, h->name, h->kind, h->elem);
        }
        cr_assert(qr_fn_type_is(d, typed_want[f].result, typed_want[f].n, typed_want[f].params), "%s", d->name);
    }
    /* the descriptors say how to call them: qtype and qparams by value both ways */
    qrl_rt rt;
    qr_rt_init(&rt);
    qrl_qparams (*records)(qrl_rt *, qrl_qtype, qrl_qparams) = fn(m, "records", "qparams(qtype,qparams)");
    qrl_qtype (*pass)(qrl_rt *, qrl_qtype) = fn(m, "pass", "qtype(qtype)");
    qrl_qtype t = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams q = records(&rt, t, (qrl_qparams){0.25, 3});
    cr_assert(q.scale == 0.5 && q.zero == 11, "%g %lld", q.scale, (long long)q.zero);
    qrl_qtype t2 = pass(&rt, t);
    cr_assert(t2.bits == 8 && t2.qmax == 255 && t2.axis == -1 && !t2.is_signed);
    int64_t (*tensors)(qrl_rt *, qrl_tview *, qrl_tview *, qrl_tview *) =
        fn(m, "tensors", "i64(tensor<u8>,tensor<i32>,tensor<f32>)");
    qrl_tview v = {.data = NULL, .numel = 6, .rank = 2, .dims = {2, 3}};
    cr_assert_eq(tensors(&rt, &v, &v, &v), 8);
    cr_assert_eq(rt.failed, 0);
    qr_module_free(m);
}

/* A lookup of the wrong type is refused, and the message says both types as the recipe writes them. */
Test(jit, fn_lookup_of_the_wrong_type_is_refused)
{
    qrl_module *m = compile_text("typed.qrl", typed_src, NULL, NULL);
    qr_error e;
    qr_param_desc f64 = {NULL, QR_PARAM_SCALAR, QR_F64}, i64 = {NULL, QR_PARAM_SCALAR, QR_I64};
    cr_assert_null(qr_module_fn_typed(m, "nothing", f64, 1, &f64, &e));
    cr_assert_str_eq(e.msg, "function 'nothing' is void(f64), not f64(f64)");
    cr_assert_null(qr_module_fn_typed(m, "none", i64, 0, NULL, &e)); /* i8 is not i64 */
    cr_assert_str_eq(e.msg, "function 'none' is i8(), not i64()");
    qr_param_desc arr = {NULL, QR_PARAM_ARRAY, QR_I64};
    cr_assert_null(qr_module_fn_typed(m, "tensors", i64, 1, &arr, &e));
    cr_assert_str_eq(e.msg, "function 'tensors' is i64(tensor<u8>,tensor<i32>,tensor<f32>), not i64(i64[])");
    qr_param_desc ten = {NULL, QR_PARAM_TENSOR, QR_I8}, vd = {NULL, QR_PARAM_VOID, QR_UNDEF};
    cr_assert_null(qr_module_fn_typed(m, "copy", vd, 1, &ten, &e));
    cr_assert_str_eq(e.msg, "kernel 'copy' is void(tensor<i8>,f32[],tensor<i8>), not void(tensor<i8>)");
    cr_assert_null(qr_module_fn_typed(m, "nope", vd, 0, NULL, &e));
    cr_assert_str_eq(e.msg, "the module has no function 'nope'");
    char buf[128];
    cr_assert_str_eq(qr_fn_type_str(qr_module_fn(m, "scalars"), buf, sizeof buf),
                     "bool(bool,i8,u8,i16,u16,i32,i64,f32,f64)");
    cr_assert_str_eq(qr_fn_type_str(qr_module_fn(m, "records"), buf, sizeof buf), "qparams(qtype,qparams)");
    cr_assert_str_eq(qr_fn_type_str(qr_module_fn(m, "arrays"), buf, 12), "f64(bool[],"); /* truncated */
    /* the right type is found */
    qr_param_desc qt = {NULL, QR_PARAM_QTYPE, QR_UNDEF};
    cr_assert(qr_module_fn_typed(m, "pass", qt, 1, &qt, &e));
    qr_module_free(m);
}

/* Entries that register types no function has (or no kernel: a lowering cannot pass a qtype): each
 * module is refused as it loads. */
static void dummy_fn(void) {}
static void param_void(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_SCALAR, QR_F64);
    im->add_fn_param(m, "x", QR_PARAM_VOID, QR_UNDEF);
}
static void tensor_of_bool(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_TENSOR, QR_BOOL);
}
static void scalar_f16(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_SCALAR, QR_F16);
}
static void qtype_with_elem(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_QTYPE, QR_I8);
}
static void kernel_returning(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k", (void *)dummy_fn, 1, QR_PARAM_SCALAR, QR_I32);
}
static void kernel_taking_qtype(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "k", (void *)dummy_fn, 1, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "t", QR_PARAM_QTYPE, QR_UNDEF);
}
static void param_first(qrl_module *m, const qrl_imports *im)
{
    im->add_fn_param(m, "x", QR_PARAM_SCALAR, QR_I32);
}
static void bad_kind(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_VOID, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_KIND_COUNT, QR_I32);
}
static void good(qrl_module *m, const qrl_imports *im)
{
    im->add_fn(m, "f", (void *)dummy_fn, 0, QR_PARAM_QPARAMS, QR_UNDEF);
    im->add_fn_param(m, "x", QR_PARAM_ARRAY, QR_BOOL);
    im->add_fn_param(m, "t", QR_PARAM_QTYPE, QR_UNDEF);
}

Test(jit, registering_a_type_no_function_has_is_refused)
{
    qrl_module_entry_fn bad[] = {param_void,       tensor_of_bool,      scalar_f16,  qtype_with_elem,
                                 kernel_returning, kernel_taking_qtype, param_first, bad_kind};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qrl_module *m = NULL;
        qr_error e;
        cr_assert_eq(qr_module_load(bad[i], QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_ERR, "entry %zu", i);
        cr_assert(strstr(e.msg, "a function's type the runtime does not take"), "%s", e.msg);
        cr_assert_null(m);
    }
    qrl_module *m = NULL;
    qr_error e;
    cr_assert_eq(qr_module_load(good, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    char buf[64];
    cr_assert_str_eq(qr_fn_type_str(qr_module_fn(m, "f"), buf, sizeof buf), "qparams(bool[],qtype)");
    qr_module_free(m);
}

/* activation for ...: a setting's targets; the recipe-wide setting is the one without any, and a
 * node named outranks its op. */
static void targeted(qrl_module *m, const qrl_imports *im)
{
    im->add_recipe(m, "r", NULL, 0);
    im->add_setting(m, "r", "activation", "u8", 0, "", NULL, 0.0);
    im->add_setting(m, "r", "activation", "u16", 0, "", NULL, 0.0);
    im->add_setting_target(m, "r", "Softmax", 0);
    im->add_setting_target(m, "r", "LayerNormalization", 0);
    im->add_setting(m, "r", "activation", "i16", 0, "", NULL, 0.0);
    im->add_setting_target(m, "r", "/enc/Softmax", 1);
}
static void target_without_setting(qrl_module *m, const qrl_imports *im)
{
    im->add_recipe(m, "r", NULL, 0);
    im->add_setting_target(m, "r", "Softmax", 0);
}
static void target_bad_kind(qrl_module *m, const qrl_imports *im)
{
    im->add_recipe(m, "r", NULL, 0);
    im->add_setting(m, "r", "activation", "u16", 0, "", NULL, 0.0);
    im->add_setting_target(m, "r", "Softmax", 2);
}

Test(jit, settings_for_chosen_ops_and_nodes)
{
    qrl_module *m = NULL;
    qr_error e;
    cr_assert_eq(qr_module_load(targeted, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    const qr_recipe *r = qr_module_recipe(m, "r");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_ACTIVATION)->type, "u8");
    cr_assert_str_eq(qr_recipe_setting_for(r, QR_SET_ACTIVATION, "Softmax", "/enc/Softmax")->type, "i16");
    cr_assert_str_eq(qr_recipe_setting_for(r, QR_SET_ACTIVATION, "Softmax", "/dec/Softmax")->type, "u16");
    cr_assert_str_eq(qr_recipe_setting_for(r, QR_SET_ACTIVATION, "LayerNormalization", "x")->type, "u16");
    cr_assert_null(qr_recipe_setting_for(r, QR_SET_ACTIVATION, "MatMul", "/enc/MatMul"));
    cr_assert_null(qr_recipe_setting_for(r, QR_SET_WEIGHT, "Softmax", "/enc/Softmax"));
    qr_module_free(m);
    qrl_module_entry_fn bad[] = {target_without_setting, target_bad_kind};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = NULL;
        cr_assert_eq(qr_module_load(bad[i], QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_ERR, "entry %zu", i);
        cr_assert_null(m);
    }
}

Test(jit, integer_arithmetic_wraps)
{
    qrl_module *m = compile_text("ints.qrl",
                                 "fn add8(a: i8, b: i8) -> i8 { return a + b }\n"
                                 "fn mul32(a: i32, b: i32) -> i32 { return a * b }\n"
                                 "fn neg64(a: i64) -> i64 { return -a }\n"
                                 "fn div64(a: i64, b: i64) -> i64 { return a / b }\n"
                                 "fn rem32(a: i32, b: i32) -> i32 { return a % b }\n"
                                 "fn subu8(a: u8, b: u8) -> u8 { return a - b }\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    int8_t (*add8)(qrl_rt *, int8_t, int8_t) = fn(m, "add8", "i8(i8,i8)");
    int32_t (*mul32)(qrl_rt *, int32_t, int32_t) = fn(m, "mul32", "i32(i32,i32)");
    int64_t (*neg64)(qrl_rt *, int64_t) = fn(m, "neg64", "i64(i64)");
    int64_t (*div64)(qrl_rt *, int64_t, int64_t) = fn(m, "div64", "i64(i64,i64)");
    int32_t (*rem32)(qrl_rt *, int32_t, int32_t) = fn(m, "rem32", "i32(i32,i32)");
    uint8_t (*subu8)(qrl_rt *, uint8_t, uint8_t) = fn(m, "subu8", "u8(u8,u8)");
    cr_assert_eq(add8(&rt, 127, 1), -128);
    cr_assert_eq(add8(&rt, -100, -100), 56);
    cr_assert_eq(mul32(&rt, 65536, 65536), 0);
    cr_assert_eq(mul32(&rt, 123456, -7), -864192);
    cr_assert_eq(neg64(&rt, INT64_MIN), INT64_MIN);
    cr_assert_eq(div64(&rt, INT64_MIN, -1), INT64_MIN);
    cr_assert_eq(div64(&rt, -7, 2), -3);
    cr_assert_eq(rem32(&rt, -7, 2), -1);
    cr_assert_eq(rem32(&rt, INT32_MIN, -1), 0);
    cr_assert_eq(subu8(&rt, 1, 2), 255);
    cr_assert_eq(rt.failed, 0);
    /* Division by zero traps with the source location. */
    cr_assert_eq(div64(&rt, 1, 0), 0);
    cr_assert_neq(rt.failed, 0);
    cr_assert(strstr(rt.msg, "ints.qrl:4:42: runtime error: integer division by zero"), "%s", rt.msg);
    qr_module_free(m);
}

Test(jit, shifts_outside_the_width_are_defined)
{
    qrl_module *m = compile_text("shifts.qrl",
                                 "fn shl(a: i32, n: i64) -> i32 { return a << n }\n"
                                 "fn shr(a: i32, n: i64) -> i32 { return a >> n }\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    int32_t (*shl)(qrl_rt *, int32_t, int64_t) = fn(m, "shl", "i32(i32,i64)");
    int32_t (*shr)(qrl_rt *, int32_t, int64_t) = fn(m, "shr", "i32(i32,i64)");
    cr_assert_eq(shl(&rt, 1, 31), INT32_MIN);
    cr_assert_eq(shl(&rt, 1, 32), 0);
    cr_assert_eq(shl(&rt, 1, -1), 0);
    cr_assert_eq(shr(&rt, -8, 1), -4);
    cr_assert_eq(shr(&rt, -8, 40), -1);
    cr_assert_eq(shr(&rt, 8, 40), 0);
    qr_module_free(m);
}

static double ref_half_up(double x)
{
    double f = floor(x);
    return x - f >= 0.5 ? f + 1 : f;
}

Test(jit, rounding_modes_on_ties_and_negatives)
{
    qrl_module *m = compile_text("round.qrl",
                                 "fn even(x: f64) -> f64 { return round_even(x) }\n"
                                 "fn away(x: f64) -> f64 { return round_away(x) }\n"
                                 "fn up(x: f64) -> f64 { return round_up(x) }\n"
                                 "fn down(x: f64) -> f64 { return floor(x) }\n"
                                 "fn even32(x: f32) -> f32 { return round_even(x) }\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    double (*even)(qrl_rt *, double) = fn(m, "even", "f64(f64)");
    double (*away)(qrl_rt *, double) = fn(m, "away", "f64(f64)");
    double (*up)(qrl_rt *, double) = fn(m, "up", "f64(f64)");
    double (*down)(qrl_rt *, double) = fn(m, "down", "f64(f64)");
    float (*even32)(qrl_rt *, float) = fn(m, "even32", "f32(f32)");
    const double xs[] = {-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -2.4999, 2.5001, 0.49999999999999994,
                         -0.49999999999999994, 4503599627370495.5, 1e300, -1e300, 0.0, -0.0, 7.0, -7.0, 123.456};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        cr_assert_eq(even(&rt, x), nearbyint(x), "round_even(%.17g): %.17g vs %.17g", x, even(&rt, x), nearbyint(x));
        cr_assert_eq(away(&rt, x), round(x), "round_away(%.17g): %.17g vs %.17g", x, away(&rt, x), round(x));
        cr_assert_eq(up(&rt, x), ref_half_up(x), "round_up(%.17g): %.17g vs %.17g", x, up(&rt, x), ref_half_up(x));
        cr_assert_eq(down(&rt, x), floor(x), "floor(%.17g)", x);
        cr_assert_eq(even32(&rt, (float)x), nearbyintf((float)x), "round_even f32(%.9g)", (float)x);
    }
    qr_module_free(m);
}

Test(jit, conversions_saturate)
{
    qrl_module *m = compile_text("conv.qrl",
                                 "fn f2i8(x: f64) -> i8 { return i8(x) }\n"
                                 "fn f2i64(x: f64) -> i64 { return i64(x) }\n"
                                 "fn sat8(x: i64) -> i8 { return sat<i8>(x) }\n"
                                 "fn satu8(x: i32) -> u8 { return sat<u8>(x) }\n"
                                 "fn wrap8(x: i64) -> i8 { return i8(x) }\n"
                                 "fn f32u8(x: f32) -> u8 { return sat<u8>(x) }\n"
                                 "fn f32i16(x: f32) -> i16 { return i16(x) }\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    int8_t (*f2i8)(qrl_rt *, double) = fn(m, "f2i8", "i8(f64)");
    int64_t (*f2i64)(qrl_rt *, double) = fn(m, "f2i64", "i64(f64)");
    int8_t (*sat8)(qrl_rt *, int64_t) = fn(m, "sat8", "i8(i64)");
    uint8_t (*satu8)(qrl_rt *, int32_t) = fn(m, "satu8", "u8(i32)");
    int8_t (*wrap8)(qrl_rt *, int64_t) = fn(m, "wrap8", "i8(i64)");
    cr_assert_eq(f2i8(&rt, 1e10), 127);
    cr_assert_eq(f2i8(&rt, -1e10), -128);
    cr_assert_eq(f2i8(&rt, NAN), 0);
    cr_assert_eq(f2i8(&rt, 127.9), 127);
    cr_assert_eq(f2i8(&rt, -128.9), -128);
    cr_assert_eq(f2i8(&rt, -2.7), -2);
    cr_assert_eq(f2i64(&rt, 1e30), INT64_MAX);
    cr_assert_eq(f2i64(&rt, -1e30), INT64_MIN);
    cr_assert_eq(f2i64(&rt, -INFINITY), INT64_MIN);
    cr_assert_eq(sat8(&rt, 1000), 127);
    cr_assert_eq(sat8(&rt, -1000), -128);
    cr_assert_eq(sat8(&rt, -5), -5);
    cr_assert_eq(satu8(&rt, -1), 0);
    cr_assert_eq(satu8(&rt, 300), 255);
    cr_assert_eq(wrap8(&rt, 300), 44);
    /* narrow targets from f32: clamped in f32 with selects, then truncated */
    uint8_t (*f32u8)(qrl_rt *, float) = fn(m, "f32u8", "u8(f32)");
    int16_t (*f32i16)(qrl_rt *, float) = fn(m, "f32i16", "i16(f32)");
    const float fx[] = {NAN, INFINITY, -INFINITY, -0.5f, -0.0f, 0.9f, 254.99f, 255.0f, 255.7f, 1e20f, 77.5f};
    const uint8_t fu8[] = {0, 255, 0, 0, 0, 0, 254, 255, 255, 255, 77};
    const int16_t fi16[] = {0, 32767, -32768, 0, 0, 0, 254, 255, 255, 32767, 77};
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        cr_assert_eq(f32u8(&rt, fx[i]), fu8[i], "sat<u8>(%g) = %d", (double)fx[i], f32u8(&rt, fx[i]));
        cr_assert_eq(f32i16(&rt, fx[i]), fi16[i], "i16(%g) = %d", (double)fx[i], f32i16(&rt, fx[i]));
    }
    cr_assert_eq(f32i16(&rt, -32768.9f), -32768);
    cr_assert_eq(f32i16(&rt, -7.9f), -7);
    qr_module_free(m);
}

/* min and max: a NaN on one side gives the other, ties give the second operand (so the sign
 * of a zero is b's), integers compare as integers; the same inside a loop GCC vectorizes. */
Test(jit, min_and_max_take_the_number_over_nan)
{
    qrl_module *m = compile_text("minmax.qrl",
                                 "fn mx(a: f32, b: f32) -> f32 { return max(a, b) }\n"
                                 "fn mn(a: f64, b: f64) -> f64 { return min(a, b) }\n"
                                 "fn imx(a: i32, b: i32) -> i32 { return max(a, b) }\n"
                                 "fn vmx(a: f32[], b: f32[], o: f32[]) { for i in 0 .. len(a) { o[i] = max(a[i], b[i]) } }\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    float (*mx)(qrl_rt *, float, float) = fn(m, "mx", "f32(f32,f32)");
    double (*mn)(qrl_rt *, double, double) = fn(m, "mn", "f64(f64,f64)");
    int32_t (*imx)(qrl_rt *, int32_t, int32_t) = fn(m, "imx", "i32(i32,i32)");
    cr_assert_eq(mx(&rt, NAN, 1.0f), 1.0f);
    cr_assert_eq(mx(&rt, 1.0f, NAN), 1.0f);
    cr_assert(isnan(mx(&rt, NAN, NAN)));
    cr_assert_eq(mx(&rt, 2.0f, -3.0f), 2.0f);
    cr_assert_eq(mx(&rt, -3.0f, 2.0f), 2.0f);
    cr_assert(signbit(mx(&rt, 0.0f, -0.0f)) && !signbit(mx(&rt, -0.0f, 0.0f)));
    cr_assert_eq(mn(&rt, NAN, -1.0), -1.0);
    cr_assert_eq(mn(&rt, -1.0, NAN), -1.0);
    cr_assert_eq(mn(&rt, 2.0, -3.0), -3.0);
    cr_assert(!signbit(mn(&rt, -0.0, 0.0)) && signbit(mn(&rt, 0.0, -0.0)));
    cr_assert_eq(imx(&rt, -7, 5), 5);
    cr_assert_eq(imx(&rt, INT32_MIN, -1), -1);
    enum { N = 67 }; /* vector iterations and a tail */
    float a[N], b[N], o[N];
    for (int i = 0; i < N; i++) {
        a[i] = i % 3 == 0 ? NAN : (float)(i % 7) - 3.0f;
        b[i] = i % 5 == 0 ? NAN : (float)(i % 4) - 1.5f;
    }
    qrl_array fa = {a, N}, fb = {b, N}, fo = {o, N};
    void (*vmx)(qrl_rt *, qrl_array *, qrl_array *, qrl_array *) = fn(m, "vmx", "void(f32[],f32[],f32[])");
    vmx(&rt, &fa, &fb, &fo);
    for (int i = 0; i < N; i++) {
        float want = isnan(a[i]) ? b[i] : isnan(b[i]) ? a[i] : a[i] > b[i] ? a[i] : b[i];
        cr_assert(isnan(want) ? isnan(o[i]) : o[i] == want, "element %d: max(%g, %g) = %g", i, (double)a[i],
                  (double)b[i], (double)o[i]);
    }
    qr_module_free(m);
}

/* round_even is rint: a module refuses to load under another rounding mode. */
Test(jit, module_load_needs_round_to_nearest)
{
    char path[600];
    snprintf(path, sizeof path, "%s/r.qrl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("fn even(x: f64) -> f64 { return round_even(x) }\n", f);
    fclose(f);
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    qc_unit_load(u, path);
    qc_check(u);
    cr_assert_eq(u->diags.errors, 0);
    fesetround(FE_UPWARD);
    qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    fesetround(FE_TONEAREST);
    cr_assert_null(m);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    ql_diags_print(&u->diags, mf);
    fclose(mf);
    cr_assert(strstr(buf, "round-to-nearest"), "%s", buf);
    free(buf);
    qc_unit_free(u);
}

Test(jit, loops_and_bounds_checks)
{
    qrl_module *m = compile_text("loops.qrl",
                                 "fn sum(a: f32[]) -> f64 {\n"
                                 "  var s = 0.0\n"
                                 "  for i in 0 .. len(a) { s += f64(a[i]) }\n"
                                 "  return s\n"
                                 "}\n"
                                 "fn get(a: f32[], i: i64) -> f32 { return a[i] }\n"
                                 "fn odd_sum(n: i64) -> i64 {\n"
                                 "  var s = 0\n"
                                 "  var i = 0\n"
                                 "  while true {\n"
                                 "    i += 1\n"
                                 "    if i > n { break }\n"
                                 "    if i % 2 == 0 { continue }\n"
                                 "    s += i\n"
                                 "  }\n"
                                 "  return s\n"
                                 "}\n"
                                 "kernel scale(x: f32[], k: f32, out: f32[]) {\n"
                                 "  for i in 0 .. len(x) { out[i] = x[i] * k }\n"
                                 "}\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    float data[5] = {1, 2, 3, 4, 5.5f}, out[5] = {0};
    qrl_array a = {data, 5}, o = {out, 5}, shorto = {out, 3};
    double (*sum)(qrl_rt *, qrl_array *) = fn(m, "sum", "f64(f32[])");
    float (*get)(qrl_rt *, qrl_array *, int64_t) = fn(m, "get", "f32(f32[],i64)");
    int64_t (*odd_sum)(qrl_rt *, int64_t) = fn(m, "odd_sum", "i64(i64)");
    void (*scale)(qrl_rt *, qrl_array *, float, qrl_array *) = fn(m, "scale", "void(f32[],f32,f32[])");
    cr_assert_float_eq(sum(&rt, &a), 15.5, 1e-12);
    cr_assert_eq(odd_sum(&rt, 10), 25);
    cr_assert_float_eq(get(&rt, &a, 4), 5.5f, 0);
    scale(&rt, &a, 2.0f, &o);
    cr_assert_float_eq(out[4], 11.0f, 0);
    cr_assert_eq(rt.failed, 0);
    get(&rt, &a, 5);
    cr_assert(strstr(rt.msg, "loops.qrl:6:44: runtime error: index 5 is out of bounds (length 5)"), "%s", rt.msg);
    /* out is shorter than x: its index is not proven by the loop, so it is checked */
    qr_rt_init(&rt);
    scale(&rt, &a, 2.0f, &shorto);
    cr_assert(strstr(rt.msg, "index 3 is out of bounds (length 3)"), "%s", rt.msg);
    qr_module_free(m);
}

/* An innermost loop whose indices are the loop variable plus an invariant offset runs a copy
 * without their checks when a test before the loop proves them in range (jit_loops.c, loop
 * versioning). Every way that test can fail must still give the checked loop's results and
 * traps: an offset past the end, a negative one, a negative start, an offset that wraps, and a
 * trap inside a called fn. */
Test(jit, versioned_loops_keep_results_and_traps)
{
    qrl_module *m = compile_text("versioned.qrl",
                                 "kernel window(x: f32[], off: i64, lo: i64, hi: i64, out: f32[]) {\n"
                                 "  for k in lo .. hi {\n"
                                 "    let i = off + k\n"
                                 "    out[k - lo] = x[i] * 2.0 + x[off]\n"
                                 "  }\n"
                                 "}\n"
                                 "fn at(a: f32[], i: i64) -> f32 { return a[i] }\n"
                                 "fn twice(v: f32) -> f32 { return v * 2.0 }\n"
                                 "kernel through_fn(x: f32[], off: i64, out: f32[]) {\n"
                                 "  for k in 0 .. len(out) { out[k] = twice(at(x, k + off)) }\n"
                                 "}\n",
                                 NULL, NULL);
    void (*window)(qrl_rt *, qrl_array *, int64_t, int64_t, int64_t, qrl_array *) =
        fn(m, "window", "void(f32[],i64,i64,i64,f32[])");
    void (*through_fn)(qrl_rt *, qrl_array *, int64_t, qrl_array *) = fn(m, "through_fn", "void(f32[],i64,f32[])");
    float data[5] = {1, -2, 3, -4, 5}, out[8];
    qrl_array x = {data, 5}, o = {out, 8}, o3 = {out, 3};
    qrl_rt rt;
    /* in range: the proven copy; out[j] = 2 x[off + lo + j] + x[off] */
    qr_rt_init(&rt);
    memset(out, 0, sizeof out);
    window(&rt, &x, 1, 0, 3, &o);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert(out[0] == -4 - 2 && out[1] == 6 - 2 && out[2] == -8 - 2 && out[3] == 0);
    /* a negative start with the sum in range: the checked copy, same results */
    qr_rt_init(&rt);
    memset(out, 0, sizeof out);
    window(&rt, &x, 3, -2, 1, &o);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert(out[0] == -4 - 4 && out[1] == 6 - 4 && out[2] == -8 - 4 && out[3] == 0);
    /* past the end: the elements before the bad index are written, then it traps */
    qr_rt_init(&rt);
    memset(out, 0, sizeof out);
    window(&rt, &x, 3, 0, 3, &o);
    cr_assert(strstr(rt.msg, "versioned.qrl:4:21: runtime error: index 5 is out of bounds (length 5)"), "%s", rt.msg);
    cr_assert(out[0] == -8 - 4 && out[1] == 10 - 4 && out[2] == 0);
    /* a negative offset */
    qr_rt_init(&rt);
    window(&rt, &x, -1, 0, 2, &o);
    cr_assert(strstr(rt.msg, "index -1 is out of bounds (length 5)"), "%s", rt.msg);
    /* an offset whose sum with k wraps around */
    qr_rt_init(&rt);
    window(&rt, &x, INT64_MAX, 0, 2, &o);
    cr_assert(strstr(rt.msg, "is out of bounds (length 5)"), "%s", rt.msg);
    /* the invariant index x[off] alone out of range */
    qr_rt_init(&rt);
    window(&rt, &x, 5, -5, -4, &o);
    cr_assert(strstr(rt.msg, "index 5 is out of bounds (length 5)"), "%s", rt.msg);
    /* a called fn's trap leaves the loop at once */
    qr_rt_init(&rt);
    memset(out, 0, sizeof out);
    through_fn(&rt, &x, 3, &o3);
    cr_assert(strstr(rt.msg, "versioned.qrl:7:43: runtime error: index 5 is out of bounds (length 5)"), "%s", rt.msg);
    cr_assert(out[0] == -8 && out[1] == 10 && out[2] == 0);
    qr_rt_init(&rt);
    through_fn(&rt, &x, 2, &o3);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert(out[0] == 6 && out[1] == -8 && out[2] == 10);
    qr_module_free(m);
}

/* Short proven loops whose body only stores run in blocks of 32, the last moved back to overlap
 * (compiler/jit_loops.c): every trip length around the block and the cut-off gives the loop's results,
 * a store to a computed index keeps the last iteration's value, and a body that reads what it
 * stores (here a counter) runs each iteration exactly once. */
Test(jit, overlapping_blocks_give_each_iteration_once)
{
    qrl_module *m = compile_text("blocks.qrl",
                                 "kernel requant(x: i32[], s: f32, y: u8[]) {\n"
                                 "  for k in 0 .. len(y) { y[k] = sat<u8>(round_even(f32(x[k]) * s) + 7.0) }\n"
                                 "}\n"
                                 "kernel last(x: i32[], y: u8[]) {\n"
                                 "  for k in 0 .. len(x) { y[k % 5] = sat<u8>(x[k]) }\n"
                                 "}\n"
                                 "kernel count(x: i32[], y: u8[], c: i64[]) {\n"
                                 "  for k in 0 .. len(y) {\n"
                                 "    y[k] = sat<u8>(x[k])\n"
                                 "    c[0] = c[0] + 1\n"
                                 "  }\n"
                                 "}\n",
                                 NULL, NULL);
    void (*requant)(qrl_rt *, qrl_array *, float, qrl_array *) = fn(m, "requant", "void(i32[],f32,u8[])");
    void (*last)(qrl_rt *, qrl_array *, qrl_array *) = fn(m, "last", "void(i32[],u8[])");
    void (*count)(qrl_rt *, qrl_array *, qrl_array *, qrl_array *) = fn(m, "count", "void(i32[],u8[],i64[])");
    static const int64_t lens[] = {1, 31, 32, 33, 49, 100, 196, 255, 256, 300};
    int32_t x[300];
    uint8_t y[301]; /* one past the longest, to see a stray store */
    unsigned seed = 3;
    for (int i = 0; i < 300; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (int32_t)(seed >> 12) % 2000 - 1000;
    }
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        int64_t n = lens[t];
        qrl_array xa = {x, n}, ya = {y, n};
        qrl_rt rt;
        qr_rt_init(&rt);
        memset(y, 0xee, sizeof y);
        requant(&rt, &xa, 0.37f, &ya);
        cr_assert_eq(rt.failed, 0, "%s", rt.msg);
        for (int64_t i = 0; i < n; i++) {
            float v = rintf((float)x[i] * 0.37f) + 7.0f;
            uint8_t want = v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
            cr_assert_eq(y[i], want, "length %lld, element %lld: %d, not %d", (long long)n, (long long)i, y[i], want);
        }
        cr_assert_eq(y[n], 0xee, "length %lld: a store past the end", (long long)n);
        memset(y, 0, sizeof y);
        qrl_array y5 = {y, 5};
        last(&rt, &xa, &y5);
        for (int64_t r = 0; r < 5 && r < n; r++) {
            int64_t k = (n - 1 - r) / 5 * 5 + r; /* the last k with k % 5 == r */
            uint8_t want = x[k] < 0 ? 0 : x[k] > 255 ? 255 : (uint8_t)x[k];
            cr_assert_eq(y[r], want, "length %lld, y[%lld] = %d, not x[%lld] = %d", (long long)n, (long long)r, y[r],
                         (long long)k, want);
        }
        int64_t c = 0;
        qrl_array ca = {&c, 1};
        count(&rt, &xa, &ya, &ca);
        cr_assert_eq(c, n, "length %lld: the body ran %lld times", (long long)n, (long long)c);
    }
    qr_module_free(m);
}

/* ---------------------------------------------------------------- calibrators */

static qrl_module *stdlib_calibrators(void)
{
    return compile_text("cal.qrl", "import \"calibrators.qrl\"\n", NULL, NULL);
}

static void random_data(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        double u = ((seed >> 8) & 0xffffff) / 16777216.0;
        x[i] = (float)((u - 0.3) * 4.0 * (i % 7 == 0 ? 3 : 1));
    }
}

static qr_tensor vec(float *x, int64_t n)
{
    return (qr_tensor){.dtype = QR_F32, .ndim = 1, .dims = {n}, .data = x};
}

Test(jit, minmax_matches_c)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 10000 };
    static float x[N];
    random_data(x, N, 7);
    qr_calib *c;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "minmax", 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
    qr_tensor t = vec(x, N);
    cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < N; i++) {
        lo = fmin(lo, x[i]);
        hi = fmax(hi, x[i]);
    }
    /* u8 asymmetric: scale (hi - lo) / 255, zero = round_half_even(-lo / scale) */
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &u8, &qp, &e), QR_OK, "%s", e.msg);
    double scale = (hi - fmin(lo, 0)) / 255.0;
    cr_assert_float_eq(qp.scale, scale, 1e-15);
    cr_assert_eq(qp.zero, (int64_t)nearbyint(0 - fmin(lo, 0) / scale));
    /* i8 symmetric (the recipe's modifier, t.symmetric): zero 0, scale max|x| / 127.5 */
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
    i8.symmetric = 1;
    cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
    cr_assert_float_eq(qp.scale, fmax(fabs(lo), fabs(hi)) / 127.5, 1e-15);
    cr_assert_eq(qp.zero, 0);
    /* i8 asymmetric: the range on [-128, 127], zero = round_half_even(-128 - lo / scale) */
    i8.symmetric = 0;
    cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
    double s8 = (fmax(hi, 0) - fmin(lo, 0)) / 255;
    cr_assert_float_eq(qp.scale, s8, 1e-15);
    cr_assert_eq(qp.zero, (int64_t)nearbyint(-128 - fmin(lo, 0) / s8));
    qr_calib_free(c);
    qr_module_free(m);
}

/* Nothing observed (an empty or all-NaN tensor): scale 1, zero 0 for every target type, through
 * qparams.qrl's from_range (which said scale 1e-12 for lo = inf > hi = -inf, inf when symmetric). */
Test(jit, minmax_of_nothing_is_scale_1_zero_0)
{
    qrl_module *m = stdlib_calibrators();
    float nan_only[3] = {NAN, NAN, NAN};
    qr_tensor t = vec(nan_only, 3);
    const char *names[1] = {"symmetric"};
    for (int sym = 0; sym < 2; sym++) {
        const double vals[1] = {sym};
        qr_calib *c;
        qr_error e;
        cr_assert_eq(qr_calib_new(m, "minmax", 1, names, vals, &c, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
        qrl_qtype ts[2] = {qr_qtype_of(QR_U8, 0, -1), qr_qtype_of(QR_I8, 0, -1)};
        for (int k = 0; k < 2; k++) {
            qrl_qparams qp;
            cr_assert_eq(qr_calib_solve(c, &ts[k], &qp, &e), QR_OK, "%s", e.msg);
            cr_assert(qp.scale == 1.0 && qp.zero == 0, "symmetric=%d type %d: %g %lld", sym, k, qp.scale,
                      (long long)qp.zero);
        }
        qr_calib_free(c);
    }
    qr_module_free(m);
}

/* c's state as qr_calib_pack writes it (a fresh buffer the caller frees). */
static unsigned char *packed(const qr_calib *c, size_t *len)
{
    unsigned char *buf = NULL;
    size_t cap = 0;
    qr_error e;
    *len = 0;
    cr_assert_eq(qr_calib_pack(c, &buf, len, &cap, &e), QR_OK, "%s", e.msg);
    return buf;
}

/* minmax observing x: once as the quantizer's SimQuant does (its range from qr_f32_range, handed
 * in: x.min() and x.max() read no data) and once reading x (the 16-lane folds); the two states
 * packed hold the same bytes. Lengths around the 16 lanes, NaNs, infinities and zeros of both
 * signs (where the order of comparisons would show: mixed, and +0 before -0, where the order in
 * which qr_f32_range merges its four streams would); the range checked against a plain loop too.
 * Broken on purpose (qr_f32_range's tail keeping a value equal to the current one, `<=`/`>=`; its
 * streams merged keeping the later one on a tie, stop 48): the zeros' signs differ and the states
 * do not match. */
Test(jit, known_range_gives_the_states_reading_gives)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 1000 };
    static float x[N];
    const int64_t lens[] = {0, 1, 15, 16, 17, 33, 999, 1000};
    for (int pattern = 0; pattern < 5; pattern++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int64_t n = lens[li];
            random_data(x, N, 3 + (unsigned)pattern);
            for (int64_t i = 0; i < n; i++) {
                if (pattern == 1 && i % 5 == 0) /* NaNs among the values */
                    x[i] = NAN;
                if (pattern == 2) /* zeros of both signs, and nothing else */
                    x[i] = (i * 7 + 3) % 3 ? 0.0f : -0.0f;
                if (pattern == 3 && i % 11 == 4) /* infinities */
                    x[i] = i % 2 ? INFINITY : -INFINITY;
                if (pattern == 4) /* +0 then -0: each lane's first zero in its first quarter, so the
                                   * order qr_f32_range merges its streams in shows */
                    x[i] = i < n / 2 ? 0.0f : -0.0f;
            }
            float lo, hi;
            qr_f32_range(x, n, &lo, &hi);
            float plo = INFINITY, phi = -INFINITY; /* the values (a zero's sign aside) */
            for (int64_t i = 0; i < n; i++)
                if (x[i] == x[i])
                    plo = fminf(plo, x[i]), phi = fmaxf(phi, x[i]);
            cr_assert(lo == plo && hi == phi, "pattern %d n %lld: range [%g, %g], the values' [%g, %g]", pattern,
                      (long long)n, lo, hi, plo, phi);
            qr_calib *read, *known;
            qr_error e;
            cr_assert_eq(qr_calib_new(m, "minmax", 0, NULL, NULL, &read, &e), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_calib_fresh(read, &known, &e), QR_OK, "%s", e.msg);
            qr_tensor t = vec(x, n);
            cr_assert_eq(qr_calib_observe_samples(read, &t, 0, 1, &e), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_calib_observe_known(known, &t, 0, 1, lo, hi, &e), QR_OK, "%s", e.msg);
            size_t la, lb;
            unsigned char *a = packed(read, &la), *b = packed(known, &lb);
            cr_assert(la == lb && la > 0 && !memcmp(a, b, la), "pattern %d n %lld: the states differ", pattern,
                      (long long)n);
            free(a);
            free(b);
            qr_calib_free(read);
            qr_calib_free(known);
        }
    qr_module_free(m);
}

/* The range as its definition reads it (x.min() and x.max(): the stdlib's fold, one element at a
 * time): 16 lanes, element i in lane i % 16 (the tail's in lane 0 after the whole vectors), a
 * value replacing the lane's only when strictly less (more), the lanes then merged in order
 * keeping the earlier on a tie. The sign of a zero comes out of that order. */
static void range_by_definition(const float *x, int64_t n, float *lo, float *hi)
{
    float l[16], h[16];
    for (int k = 0; k < 16; k++)
        l[k] = INFINITY, h[k] = -INFINITY;
    int64_t nv = n / 16 * 16;
    for (int64_t i = 0; i < n; i++) {
        int k = i < nv ? (int)(i % 16) : 0;
        if (x[i] < l[k])
            l[k] = x[i];
        if (x[i] > h[k])
            h[k] = x[i];
    }
    for (int k = 1; k < 16; k++) {
        if (l[k] < l[0])
            l[0] = l[k];
        if (h[k] > h[0])
            h[0] = h[k];
    }
    *lo = l[0], *hi = h[0];
}

/* Data within [blo, bhi] (NaN aside), as a Clip's output: pattern 0 random values clipped to the
 * bounds (both met within the first few elements); 1 the same with NaNs, the bounds met only in
 * the last hundred elements; 2 bounds 0 and 6, zeros of both signs: -0 in lanes 1-15 from the
 * start, lane 0's first zero (+0) only at element 16 * 5000 (after the first look), 6 at element
 * 7; 3 the bounds never met, the range set by the first vectors of the second and third blocks
 * (elements 16 * 1024 + 3 and 16 * 3072 + 9); 4 bounds -3 and 0, the same zeros as 2 but at the
 * top (-0 first in lane 0 at element 16 * 3000, +0 in the other lanes); 5 a Relu's bounds, 0 and
 * +inf, both met early (+inf at element 40). */
static void clipped_data(float *x, int64_t n, int pattern, float *blo, float *bhi)
{
    random_data(x, (int)n, 11 + (unsigned)pattern);
    float b[6][2] = {{-1, 2}, {-2, 3}, {0, 6}, {-100, 100}, {-3, 0}, {0, INFINITY}};
    *blo = b[pattern][0], *bhi = b[pattern][1];
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * (pattern == 2 || pattern == 5 ? 2.0f : 1.0f);
        if (pattern == 1 || pattern == 3)
            v = fminf(fmaxf(v, *blo * 0.99f), *bhi * 0.99f); /* inside: the bounds placed below */
        v = v < *blo ? *blo : v > *bhi ? *bhi : v;
        if (pattern == 1 && i % 13 == 5)
            v = NAN;
        if (pattern == 2 && v == 0) /* the clip's zeros: -0 outside lane 0, lane 0's comes late */
            v = i % 16 ? -0.0f : 0.5f;
        if (pattern == 2 && i % 16 == 0 && i == 16 * 5000)
            v = 0.0f;
        if (pattern == 4 && v == 0)
            v = i % 16 ? 0.0f : -1.0f;
        if (pattern == 4 && i == 16 * 3000)
            v = -0.0f;
        x[i] = v;
    }
    if (pattern == 1 && n >= 100)
        x[n - 100] = *blo, x[n - 37] = *bhi;
    if (pattern == 2 && n > 7)
        x[7] = 6.0f;
    if (pattern == 5 && n > 40)
        x[40] = INFINITY;
    if (pattern == 3 && n > 16 * 3072 + 9) /* the range only at the first vectors of the second and third blocks */
        x[16 * 1024 + 3] = -50.0f, x[16 * 3072 + 9] = 50.0f;
}

/* qr_f32_range_within (calibration's SimQuant on a Relu's or Clip's output) gives the range its
 * definition gives, bit for bit (a zero's sign included), wherever the bounds are met and whether
 * or not it stops early: ragged sizes around its first look (1024 vectors) and the doubled blocks
 * after it, NaNs, zeros of both signs at either bound, infinite bounds. Broken on purpose: the
 * zero bound taken as decided when any lane holds a zero (patterns 2 and 4 give the other sign),
 * a vector skipped after each look (pattern 3). */
Test(jit, range_within_bounds_is_the_definitions)
{
    enum { N = 16 * 9000 + 13 };
    static float x[N];
    const int64_t lens[] = {0, 1, 15, 16, 17, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 16 * 1024 + 17, 16 * 3072 + 5,
                            16 * 5000 + 3, 16 * 5001, 100003, N};
    for (int pattern = 0; pattern < 6; pattern++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int64_t n = lens[li];
            float blo, bhi, lo, hi, dlo, dhi, rlo, rhi;
            clipped_data(x, n, pattern, &blo, &bhi);
            range_by_definition(x, n, &dlo, &dhi);
            qr_f32_range_within(x, n, blo, bhi, &lo, &hi);
            qr_f32_range(x, n, &rlo, &rhi);
            cr_assert(!memcmp(&lo, &dlo, sizeof lo) && !memcmp(&hi, &dhi, sizeof hi),
                      "pattern %d n %lld: [%g, %g] (signbits %d %d), the definition's [%g, %g] (%d %d)", pattern,
                      (long long)n, lo, hi, !!signbit(lo), !!signbit(hi), dlo, dhi, !!signbit(dlo), !!signbit(dhi));
            cr_assert(!memcmp(&rlo, &dlo, sizeof lo) && !memcmp(&rhi, &dhi, sizeof hi),
                      "pattern %d n %lld: qr_f32_range [%g, %g], the definition's [%g, %g]", pattern, (long long)n,
                      rlo, rhi, dlo, dhi);
        }
}

/* It stops reading once both bounds are held (the contract broken on purpose past that point
 * shows what it did not read), and not before: with one bound held it reads to the end. Broken
 * on purpose (stopping when either bound is held) the second half fails. */
Test(jit, range_within_stops_once_both_bounds_are_held)
{
    enum { N = 16 * 4096 + 3 };
    static float x[N];
    for (int64_t i = 0; i < N; i++)
        x[i] = (float)(i % 100) / 25.0f; /* 0 to 3.96, 0 at element 0 */
    x[5] = 4.0f;
    x[N - 20] = 9.0f; /* beyond the bound 4, after the first look */
    float lo, hi;
    qr_f32_range_within(x, N, 0.0f, 4.0f, &lo, &hi);
    cr_assert(lo == 0 && !signbit(lo) && hi == 4.0f, "both held in the first block: [%g, %g], not [0, 4]", lo, hi);
    x[5] = 3.5f; /* 4 never held: read to the end */
    qr_f32_range_within(x, N, 0.0f, 4.0f, &lo, &hi);
    cr_assert(lo == 0 && hi == 9.0f, "only 0 held: [%g, %g], not [0, 9]", lo, hi);
    x[5] = 4.0f, x[0] = 0.25f; /* 0 held only where lane 0 is not: the zero's sign undecided, read on */
    for (int64_t i = 0; i < N; i += 16)
        if (x[i] == 0)
            x[i] = 0.25f;
    x[N - 19] = -1.0f;
    qr_f32_range_within(x, N, 0.0f, 4.0f, &lo, &hi);
    cr_assert(lo == -1.0f && hi == 9.0f, "0 outside lane 0: [%g, %g], not [-1, 9]", lo, hi);
}

/* The range handed in holds for that one observe only: SimQuant then rounds the tensor in place,
 * and the next batch may come in the same buffer. After an observe given x's range, x changed in
 * place is read again by the next observe (the same buffer and length): its state is what a
 * calibrator that never saw the old values gives. Broken on purpose (the range left set after the
 * call): the second state holds the old range. */
Test(jit, known_range_is_forgotten_after_its_observe)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 100 };
    static float x[N];
    random_data(x, N, 5);
    qr_tensor t = vec(x, N);
    float lo, hi;
    qr_f32_range(x, N, &lo, &hi);
    qr_calib *first, *next, *oracle;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "minmax", 0, NULL, NULL, &first, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_fresh(first, &next, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_fresh(first, &oracle, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe_known(first, &t, 0, 1, lo, hi, &e), QR_OK, "%s", e.msg);
    for (int i = 0; i < N; i++) /* changed in place, into [-0.5, 0.5] */
        x[i] = (float)(i % 11) / 10.0f - 0.5f;
    cr_assert_eq(qr_calib_observe(next, &t, &e), QR_OK, "%s", e.msg);
    static float copy[N];
    memcpy(copy, x, sizeof copy);
    qr_tensor c = vec(copy, N);
    cr_assert_eq(qr_calib_observe(oracle, &c, &e), QR_OK, "%s", e.msg);
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams qn, qo;
    cr_assert_eq(qr_calib_solve(next, &u8, &qn, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_solve(oracle, &u8, &qo, &e), QR_OK, "%s", e.msg);
    /* the hand-derived qparams of [-0.5, 0.5] on u8: scale 1 / 255, zero round(0.5 * 255) = 128 */
    cr_assert(qo.scale == (double)(0.5f - -0.5f) / 255 && qo.zero == 128, "oracle: %.9g %lld", qo.scale,
              (long long)qo.zero);
    cr_assert(qn.scale == qo.scale && qn.zero == qo.zero, "after the known observe: scale %.9g zero %lld, the "
              "values' %.9g %lld", qn.scale, (long long)qn.zero, qo.scale, (long long)qo.zero);
    qr_calib_free(first);
    qr_calib_free(next);
    qr_calib_free(oracle);
    qr_module_free(m);
}

/* percentile: observe in three parts and merge == one pass == the C histogram. */
Test(jit, percentile_histogram_merges_exactly_and_matches_c)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 30000 };
    static float x[N];
    random_data(x, N, 11);
    const char *names[1] = {"p"};
    const double vals[1] = {99.0};
    qr_calib *whole, *parts[3];
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "percentile", 1, names, vals, &whole, &e), QR_OK, "%s", e.msg);
    qr_tensor all = vec(x, N);
    cr_assert_eq(qr_calib_observe(whole, &all, &e), QR_OK, "%s", e.msg);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(qr_calib_new(m, "percentile", 1, names, vals, &parts[k], &e), QR_OK, "%s", e.msg);
        /* uneven parts, the largest values last, so the range grows while merging */
        int from = k == 0 ? 0 : k == 1 ? 1000 : 21000, to = k == 0 ? 1000 : k == 1 ? 21000 : N;
        qr_tensor t = vec(x + from, to - from);
        cr_assert_eq(qr_calib_observe(parts[k], &t, &e), QR_OK, "%s", e.msg);
    }
    cr_assert_eq(qr_calib_merge(parts[2], parts[0], &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_merge(parts[2], parts[1], &e), QR_OK, "%s", e.msg);
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
    qrl_qparams a, b;
    cr_assert_eq(qr_calib_solve(whole, &i8, &a, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_solve(parts[2], &i8, &b, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(a.scale, b.scale, "merged %.17g vs one pass %.17g", b.scale, a.scale);
    /* The same computation in C: a 2048-bin |x| histogram, the 99th percentile, symmetric. */
    qr_hist h;
    cr_assert_eq(qr_hist_init(&h, 2048, 1, &e), QR_OK);
    qr_hist_add_f32(&h, x, N);
    double amax = qr_hist_quantile(&h, 0.99);
    qr_hist_free(&h);
    cr_assert_float_eq(a.scale, amax / 127.5, 1e-15, "qrl %.17g vs C %.17g", a.scale, amax / 127.5);
    /* and the quantile is close to the exact one */
    static float sorted[N];
    for (int i = 0; i < N; i++)
        sorted[i] = fabsf(x[i]);
    int cmpf(const void *p, const void *q);
    qsort(sorted, N, sizeof *sorted, cmpf);
    cr_assert(fabs(amax - sorted[(int)(0.99 * N)]) < 0.01 * sorted[N - 1], "%g vs %g", amax, sorted[(int)(0.99 * N)]);
    for (int k = 0; k < 3; k++)
        qr_calib_free(parts[k]);
    qr_calib_free(whole);
    qr_module_free(m);
}

int cmpf(const void *p, const void *q)
{
    float a = *(const float *)p, b = *(const float *)q;
    return a < b ? -1 : a > b;
}

Test(jit, entropy_and_mse_calibrators_run)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 20000 };
    static float x[N];
    random_data(x, N, 5);
    qr_tensor t = vec(x, N);
    const char *cals[] = {"entropy", "mse", "moving_average"};
    for (int k = 0; k < 3; k++) {
        qr_calib *c;
        qr_error e;
        cr_assert_eq(qr_calib_new(m, cals[k], 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
        qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
        qrl_qparams qp;
        cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
        /* a clipping threshold between a tenth of the range and all of it */
        double amax = 0;
        for (int i = 0; i < N; i++)
            amax = fmax(amax, fabs(x[i]));
        cr_assert(qp.scale > amax / 1275.0 && qp.scale <= amax * 1.0001 / 127.5 * 2, "%s: scale %g (amax %g)", cals[k],
                  qp.scale, amax);
        qr_calib_free(c);
    }
    qr_module_free(m);
}

/* merge reads the other state's arrays: o.s[i] directly and o.s passed to a fn (both were an
 * internal compiler error: o.s was the array struct, not its address). Observing 1..4 into one
 * state and 10..40 into another, the merged sums are 110 and the count 8. */
Test(jit, merge_reads_the_other_states_arrays)
{
    const char *src = "fn add_all(s: f64[], o: f64[]) {\n"
                      "  for i in 0 .. len(s) { s[i] += o[i] }\n"
                      "}\n"
                      "calibrator sums() {\n"
                      "  state s: f64[2]\n"
                      "  state n: f64[1]\n"
                      "  observe(x: tensor<f32>) {\n"
                      "    s[0] += x.sum()\n"
                      "    s[1] += x.sum()\n"
                      "    n[0] += f64(x.numel)\n"
                      "  }\n"
                      "  merge(o) {\n"
                      "    add_all(s, o.s)\n"
                      "    n[0] += o.n[0]\n"
                      "  }\n"
                      "  solve(t: qtype) -> qparams { return qparams(s[0] + s[1] * 1000.0, i64(n[0])) }\n"
                      "}\n";
    qrl_module *m = compile_text("sums.qrl", src, NULL, NULL);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    qr_tensor ta = vec(a, 4), tb = vec(b, 4);
    qr_calib *c, *d;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "sums", 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_new(m, "sums", 0, NULL, NULL, &d, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(c, &ta, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(d, &tb, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_merge(c, d, &e), QR_OK, "%s", e.msg);
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &u8, &qp, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qp.scale, 110.0 + 110.0 * 1000.0, "%.17g", qp.scale);
    cr_assert_eq(qp.zero, 8);
    qr_calib_free(c);
    qr_calib_free(d);
    qr_module_free(m);
}

/* x.quantile(q) is numpy's nanquantile: by hand on five values (one NaN), and numpy itself on
 * 2001 random ones with NaN and infinities at eleven fractions; q outside [0, 1] is clamped. */
Test(jit, tensor_quantile_is_numpys_nanquantile)
{
    qrl_module *m = compile_text("tq.qrl", "fn q(x: tensor<f32>, p: f64) -> f64 { return x.quantile(p) }\n", NULL, NULL);
    double (*q)(qrl_rt *, const qrl_tview *, double) = fn(m, "q", "f64(tensor<f32>,f64)");
    qrl_rt rt;
    qr_rt_init(&rt);
    float small[5] = {3, -1, NAN, 7, 2}; /* sorted: -1 2 3 7 */
    qrl_tview t = {.data = small, .numel = 5, .rank = 1, .dims = {5}};
    cr_assert_eq(q(&rt, &t, 0.5), 2.5);
    cr_assert_eq(q(&rt, &t, 0.0), -1.0);
    cr_assert_eq(q(&rt, &t, 1.0), 7.0);
    cr_assert_eq(q(&rt, &t, 2.0), 7.0);
    cr_assert_float_eq(q(&rt, &t, 0.9), 5.8, 1e-12); /* position 2.7: 3 + 0.7 * (7 - 3) */
    t.numel = 0;
    cr_assert_eq(q(&rt, &t, 0.5), 0.0);
    enum { N = 2001 };
    static float x[N];
    random_data(x, N, 23);
    x[7] = NAN, x[900] = INFINITY, x[1500] = -INFINITY, x[1501] = x[1502];
    qr_tensor xt = {.dtype = QR_F32, .ndim = 1, .dims = {N}, .data = x};
    char path[700], cmd[2000], *out = NULL;
    snprintf(path, sizeof path, "%s/quantile_x.npy", dir);
    qr_error e;
    cr_assert_eq(qr_npy_write(path, &xt, &e), QR_OK, "%s", e.msg);
    static const double fr[11] = {0, 0.001, 0.1, 0.25, 0.333, 0.5, 0.6, 0.75, 0.9, 0.9995, 1};
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import numpy as np; x = np.load('%s').astype(np.float64); "
             "print(' '.join(repr(float(np.nanquantile(x, q))) for q in [0, 0.001, 0.1, 0.25, 0.333, 0.5, 0.6, 0.75, "
             "0.9, 0.9995, 1]))\"", path);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    char *p = out;
    t = (qrl_tview){.data = x, .numel = N, .rank = 1, .dims = {N}};
    for (int i = 0; i < 11; i++) {
        double want = strtod(p, &p), got = q(&rt, &t, fr[i]);
        cr_assert(got == want || (isnan(got) && isnan(want)), "q = %g: %.17g, numpy %.17g", fr[i], got, want);
    }
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    free(out);
    qr_module_free(m);
}

/* stdlib/stats.qrl against the same sums in C: mean_of and mean_abs_dev ignore NaN; moments of
 * three uneven parts merged equal the moments of the three observed into one state, and are
 * [count, sum, sum of |x - its part's mean|, min, max]; laplace_clip solves x e^x = 3 4^bits
 * (Banner et al.'s optimum) and is within 0.01 of their table. */
Test(jit, stats_helpers_match_c)
{
    qrl_module *m = compile_text("st.qrl", "import \"stats.qrl\"\n", NULL, NULL);
    double (*mean_of)(qrl_rt *, const qrl_tview *) = fn(m, "mean_of", "f64(tensor<f32>)");
    double (*mad)(qrl_rt *, const qrl_tview *, double) = fn(m, "mean_abs_dev", "f64(tensor<f32>,f64)");
    void (*add)(qrl_rt *, qrl_array *, const qrl_tview *) = fn(m, "moments_add", "void(f64[],tensor<f32>)");
    void (*merge)(qrl_rt *, qrl_array *, qrl_array *) = fn(m, "moments_merge", "void(f64[],f64[])");
    double (*clip)(qrl_rt *, int64_t) = fn(m, "laplace_clip", "f64(i64)");
    qrl_rt rt;
    qr_rt_init(&rt);
    enum { N = 3000 };
    static float x[N];
    random_data(x, N, 17);
    x[5] = NAN;
    x[2500] = NAN;
    int cut[4] = {0, 100, 2100, N};
    double one[5] = {0}, merged[5] = {0}, parts[3][5] = {{0}};
    qrl_array a_one = {one, 5}, a_merged = {merged, 5};
    double want[5] = {0, 0, 0, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        qrl_tview t = {.data = x + cut[k], .numel = cut[k + 1] - cut[k], .rank = 1, .dims = {cut[k + 1] - cut[k]}};
        double n = 0, sum = 0, dev = 0;
        for (int i = cut[k]; i < cut[k + 1]; i++)
            if (!isnan(x[i])) {
                n++;
                sum += x[i];
                want[3] = fmin(want[3], x[i]);
                want[4] = fmax(want[4], x[i]);
            }
        for (int i = cut[k]; i < cut[k + 1]; i++)
            if (!isnan(x[i]))
                dev += fabs(x[i] - sum / n);
        cr_assert_float_eq(mean_of(&rt, &t), sum / n, 1e-12 * fabs(sum / n), "part %d", k);
        cr_assert_float_eq(mad(&rt, &t, sum / n), dev / n, 1e-12 * dev / n, "part %d", k);
        want[0] += n;
        want[1] += sum;
        want[2] += dev;
        qrl_array a_part = {parts[k], 5};
        add(&rt, &a_one, &t);
        add(&rt, &a_part, &t);
        merge(&rt, &a_merged, &a_part);
    }
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    for (int i = 0; i < 5; i++) {
        cr_assert_float_eq(one[i], want[i], 1e-12 * fabs(want[i]), "moment %d: %.17g, C %.17g", i, one[i], want[i]);
        cr_assert_eq(merged[i], one[i], "moment %d: merged %.17g, one state %.17g", i, merged[i], one[i]);
    }
    const double table[9] = {1.05, 1.86, 2.83, 3.89, 5.03, 6.2, 7.41, 8.64, 9.89};
    for (int bits = 0; bits <= 8; bits++) {
        double a = clip(&rt, bits);
        cr_assert_float_eq(a * exp(a), 3 * pow(4, bits), 1e-12 * 3 * pow(4, bits), "bits %d: %.17g", bits, a);
        cr_assert(fabs(a - table[bits]) < 0.01, "bits %d: %.4f, the paper %.2f", bits, a, table[bits]);
    }
    qr_module_free(m);
}

/* h.min and h.max: the smallest and largest value added, before |x| for add_abs (NaN ignored,
 * -inf kept, as x.min()), combined by merge, inf and -inf before any value; against C. */
Test(jit, histogram_min_and_max_are_the_values_extremes)
{
    const char *src = "calibrator ext(abs: bool = true) {\n"
                      "  state h: histogram(64)\n"
                      "  observe(x: tensor<f32>) {\n"
                      "    if abs { h.add_abs(x) } else { h.add(x) }\n"
                      "  }\n"
                      "  merge(o) { h.merge(o.h) }\n"
                      "  solve(t: qtype) -> qparams {\n"
                      "    if t.signed { return qparams(h.min, 0) }\n"
                      "    return qparams(h.max, 0)\n"
                      "  }\n"
                      "}\n";
    qrl_module *m = compile_text("ext.qrl", src, NULL, NULL);
    float a[4] = {1.5f, NAN, -2.25f, 0.5f}, b[3] = {7.0f, -0.75f, NAN}, c[2] = {-INFINITY, 3.0f};
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1), u8 = qr_qtype_of(QR_U8, 0, -1);
    const char *names[1] = {"abs"};
    for (int abs = 0; abs < 2; abs++) {
        const double vals[1] = {abs};
        qr_calib *x, *y, *z;
        qr_error e;
        qrl_qparams lo, hi;
        cr_assert_eq(qr_calib_new(m, "ext", 1, names, vals, &x, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_new(m, "ext", 1, names, vals, &y, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_new(m, "ext", 1, names, vals, &z, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &i8, &lo, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &u8, &hi, &e), QR_OK, "%s", e.msg);
        cr_assert(lo.scale == INFINITY && hi.scale == -INFINITY, "empty: %g %g", lo.scale, hi.scale);
        qr_tensor ta = vec(a, 4), tb = vec(b, 3), tc = vec(c, 2);
        cr_assert_eq(qr_calib_observe(x, &ta, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(y, &tb, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &i8, &lo, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &u8, &hi, &e), QR_OK, "%s", e.msg);
        cr_assert(lo.scale == -2.25 && hi.scale == 1.5, "abs=%d, one tensor: %g %g", abs, lo.scale, hi.scale);
        cr_assert_eq(qr_calib_merge(x, y, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &i8, &lo, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &u8, &hi, &e), QR_OK, "%s", e.msg);
        cr_assert(lo.scale == -2.25 && hi.scale == 7.0, "abs=%d, merged: %g %g", abs, lo.scale, hi.scale);
        cr_assert_eq(qr_calib_observe(z, &tc, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_merge(x, z, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_solve(x, &i8, &lo, &e), QR_OK, "%s", e.msg);
        cr_assert(lo.scale == -INFINITY, "abs=%d, -inf: %g", abs, lo.scale);
        qr_calib_free(x);
        qr_calib_free(y);
        qr_calib_free(z);
    }
    qr_module_free(m);
}

/* ----------------------------------------------------------------------- cache */

Test(jit, cache_miss_hit_and_corrupt_entry)
{
    char cache[700];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    qc_options o = {.cache_dir = cache};
    qc_stats st;
    const char *src = "fn answer() -> i64 { return 42 }\n";
    qrl_module *m = compile_text("c.qrl", src, &o, &st);
    cr_assert_eq(st.cache_hit, 0);
    qr_module_free(m);
    m = compile_text("c.qrl", src, &o, &st);
    cr_assert_eq(st.cache_hit, 1);
    int64_t (*answer)(qrl_rt *) = fn(m, "answer", "i64()");
    qrl_rt rt;
    qr_rt_init(&rt);
    cr_assert_eq(answer(&rt), 42);
    qr_module_free(m);
    /* Corrupt the entry: detected, rebuilt, and the answer is still right. */
    char path[800], name[100];
    qc_cache_entry_name(st.key, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", cache, name);
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    fseek(f, 100, SEEK_SET);
    fputs("garbage garbage garbage", f);
    fclose(f);
    truncate(path, 2000);
    m = compile_text("c.qrl", src, &o, &st);
    cr_assert_eq(st.cache_hit, 0);
    cr_assert_eq(st.cache_rebuilt, 1);
    answer = fn(m, "answer", "i64()");
    cr_assert_eq(answer(&rt), 42);
    qr_module_free(m);
    /* A foreign module under this key: also rebuilt. */
    char other_key[40];
    qrl_module *m2 = compile_text("d.qrl", "fn answer() -> i64 { return 7 }\n", &o, &st);
    snprintf(other_key, sizeof other_key, "%s", st.key);
    qr_module_free(m2);
    m = compile_text("c.qrl", src, &o, &st);
    cr_assert_eq(st.cache_hit, 1);
    qr_module_free(m);
    char other[800];
    qc_cache_entry_name(other_key, name, sizeof name);
    snprintf(other, sizeof other, "%s/%s", cache, name);
    cr_assert_eq(rename(other, path), 0);
    m = compile_text("c.qrl", src, &o, &st);
    cr_assert_eq(st.cache_rebuilt, 1);
    answer = fn(m, "answer", "i64()");
    cr_assert_eq(answer(&rt), 42);
    qr_module_free(m);
}

/* ------------------------------------------------------------- fixed point */

static qrl_module *compile_path(const char *rel);

/* gemmlowp's reference, in C. */
static int32_t ref_srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * b;
    int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

static int32_t ref_rdbpot(int32_t x, int e)
{
    int32_t mask = (int32_t)((1ll << e) - 1), rem = x & mask, thr = (mask >> 1) + (x < 0);
    return (x >> e) + (rem > thr);
}

static int32_t ref_mbqm(int32_t x, int32_t m, int shift)
{
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    return ref_rdbpot(ref_srdhm((int32_t)((uint32_t)x * (1u << left)), m), right);
}

Test(jit, fixed_point_numerics_match_gemmlowp)
{
    qrl_module *m = compile_text("fx.qrl", "import \"numerics.qrl\"\n", NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    int32_t (*srdhm)(qrl_rt *, int32_t, int32_t) = fn(m, "srdhm", "i32(i32,i32)");
    int32_t (*rdbpot)(qrl_rt *, int32_t, int32_t) = fn(m, "rounding_divide_by_pot", "i32(i32,i32)");
    int32_t (*mbqm)(qrl_rt *, int32_t, int32_t, int32_t) =
        fn(m, "multiply_by_quantized_multiplier", "i32(i32,i32,i32)");
    int32_t (*mant)(qrl_rt *, double) = fn(m, "multiplier_mantissa", "i32(f64)");
    int32_t (*shift)(qrl_rt *, double) = fn(m, "multiplier_shift", "i32(f64)");
    const int32_t edge[] = {0, 1, -1, 2, -2, 3, -3, 1 << 30, -(1 << 30), INT32_MAX, INT32_MIN, 12345, -12345};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++)
            cr_assert_eq(srdhm(&rt, edge[i], edge[k]), ref_srdhm(edge[i], edge[k]), "srdhm(%d, %d)", edge[i], edge[k]);
    unsigned seed = 99;
    for (int n = 0; n < 20000; n++) {
        seed = seed * 1664525u + 1013904223u;
        int32_t x = (int32_t)seed >> (seed % 20);
        seed = seed * 1664525u + 1013904223u;
        int32_t y = (int32_t)(seed | 0x40000000u) & 0x7fffffff;
        int e = (int)(seed % 31);
        cr_assert_eq(srdhm(&rt, x, y), ref_srdhm(x, y));
        cr_assert_eq(rdbpot(&rt, x, e), ref_rdbpot(x, e), "rdbpot(%d, %d)", x, e);
        int sh = (int)(seed % 12) - 8;
        cr_assert_eq(mbqm(&rt, x >> 8, y, sh), ref_mbqm(x >> 8, y, sh), "mbqm(%d, %d, %d)", x >> 8, y, sh);
    }
    /* QuantizeMultiplier: m = mantissa * 2^(shift - 31), mantissa in [2^30, 2^31) */
    const double ms[] = {0.5, 0.75, 1.0 / 3, 0.0012345, 1.5, 3.999999, 0.2499999999};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        int32_t q = mant(&rt, ms[i]);
        int s = shift(&rt, ms[i]);
        cr_assert(q >= (1 << 30), "mantissa %d for %g", q, ms[i]);
        cr_assert_float_eq(ldexp(q, s - 31), ms[i], ms[i] * 1e-9, "%g -> %d * 2^(%d - 31)", ms[i], q, s);
    }
    cr_assert_eq(rt.failed, 0);
    qr_module_free(m);
}

/* TFLite's QuantizeMultiplier (tensorflow/lite/kernels/internal/quantization_util.cc), in C. */
static void ref_quantize_multiplier(double m, int32_t *q, int *shift)
{
    if (m == 0) {
        *q = 0, *shift = 0;
        return;
    }
    double f = frexp(m, shift);
    int64_t fixed = (int64_t)round(f * (double)(1ll << 31)); /* TfLiteRound: half away from zero */
    if (fixed == (1ll << 31))
        fixed /= 2, ++*shift;
    if (*shift < -31)
        *shift = 0, fixed = 0;
    *q = (int32_t)fixed;
}

/* The TFLite integer kernels of stdlib/patterns_tflite.qrl, through the
 * generic entry the runtime calls, against TFLite's per-channel conv
 * epilogue written in C: acc + bias, MultiplyByQuantizedMultiplier with the
 * channel's (mantissa, shift) from f64(s_x) * f64(s_w[c]) / f64(s_y), plus
 * the output offset, clamped to the Relu range [max(-128, z_y), 127]. */
Test(jit, tflite_conv_epilogue_is_bit_exact)
{
    qrl_module *m = compile_path("stdlib/patterns_tflite.qrl");
    const qr_fn_desc *d = qr_module_fn(m, "tfl_linear");
    cr_assert(d && d->call);
    enum { C = 5, HW = 7, N = 2, E = N * C * HW };
    int32_t acc[E], bias[C], wz[C] = {0};
    int8_t x[1] = {0}, w[1] = {0}, y[E];
    float ws[C], xs = 0.0173f, ys = 0.0419f;
    int32_t xz = -3, yz = -17;
    unsigned seed = 7;
    for (int i = 0; i < E; i++) {
        seed = seed * 1664525u + 1013904223u;
        acc[i] = (int32_t)(seed % 400001) - 200000;
    }
    for (int c = 0; c < C; c++) {
        seed = seed * 1664525u + 1013904223u;
        bias[c] = (int32_t)(seed % 2001) - 1000;
        ws[c] = 0.001f + (float)(seed % 1000) * 1e-5f;
    }
    qrl_tview tacc = {.data = acc, .numel = E, .rank = 4, .dims = {N, C, 1, HW}};
    qrl_tview tx = {.data = x, .numel = 1, .rank = 1, .dims = {1}}, tw = tx;
    tw.data = w;
    qrl_tview tb = {.data = bias, .numel = C, .rank = 1, .dims = {C}};
    qrl_tview ty = {.data = y, .numel = E, .rank = 4, .dims = {N, C, 1, HW}};
    qrl_array aws = {ws, C}, awz = {wz, C};
    int64_t axis = 1; /* NCHW: channels on axis 1 */
    double relu_lo = 0.0, relu_hi = INFINITY; /* a fused Relu's range of real values */
    void *args[] = {&tacc, &tx, &xs, &xz, &tw, &aws, &awz, &tb, &axis, &relu_lo, &relu_hi, &ty, &ys, &yz};
    qrl_rt rt;
    qr_rt_init(&rt);
    d->call(&rt, args);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    int lo = yz > -128 ? yz : -128, clamped = 0;
    for (int i = 0; i < E; i++) {
        int c = (i / HW) % C, shift;
        int32_t q;
        ref_quantize_multiplier((double)xs * (double)ws[c] / (double)ys, &q, &shift);
        int32_t v = ref_mbqm(acc[i] + bias[c], q, shift) + yz;
        v = v < lo ? lo : v > 127 ? 127 : v;
        clamped += v == lo || v == 127;
        cr_assert_eq(y[i], v, "element %d (channel %d): %d, TFLite %d", i, c, y[i], v);
    }
    cr_assert(clamped > 0 && clamped < E, "the data must reach the clamp and stay inside it too");
    qr_module_free(m);
}

/* TFLite's int8 Add (reference_integer_ops/add.h and its Prepare), in C,
 * against tfl_add_kernel: both inputs shifted left 20 bits and scaled to
 * twice the larger input scale, summed, scaled to the output. */
Test(jit, tflite_add_is_bit_exact)
{
    qrl_module *m = compile_path("stdlib/patterns_tflite.qrl");
    const qr_fn_desc *d = qr_module_fn(m, "tfl_add_kernel");
    cr_assert(d && d->call);
    int8_t a[256], b[256], y[256];
    for (int i = 0; i < 256; i++)
        a[i] = (int8_t)(i - 128), b[i] = (int8_t)((i * 37) % 256 - 128);
    float as = 0.031f, bs = 0.0127f, ys = 0.0452f;
    int32_t az = 5, bz = -9, yz = 3;
    qrl_tview ta = {.data = a, .numel = 256, .rank = 1, .dims = {256}}, tb = ta, ty = ta;
    tb.data = b;
    ty.data = y;
    void *args[] = {&ta, &as, &az, &tb, &bs, &bz, &ty, &ys, &yz};
    qrl_rt rt;
    qr_rt_init(&rt);
    d->call(&rt, args);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    double twice = 2 * fmax((double)as, (double)bs);
    int32_t qa, qb, qy;
    int sa, sb, sy;
    ref_quantize_multiplier((double)as / twice, &qa, &sa);
    ref_quantize_multiplier((double)bs / twice, &qb, &sb);
    ref_quantize_multiplier(twice / ((double)(1 << 20) * (double)ys), &qy, &sy);
    for (int i = 0; i < 256; i++) {
        int32_t va = ref_mbqm((a[i] - az) * (1 << 20), qa, sa), vb = ref_mbqm((b[i] - bz) * (1 << 20), qb, sb);
        int32_t v = ref_mbqm(va + vb, qy, sy) + yz;
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        cr_assert_eq(y[i], v, "a=%d b=%d: %d, TFLite %d", a[i], b[i], y[i], v);
    }
    qr_module_free(m);
}

/* ------------------------------------------- patterns, affine rules, recipes */

static qrl_module *compile_path(const char *rel)
{
    char err[1200];
    qrl_module *m = tu_compile(rel, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

Test(jit, recipe_settings_are_registered)
{
    qrl_module *m = compile_path("recipes/int8.qrl");
    const qr_recipe *r = qr_module_recipe(m, "int8");
    cr_assert(r);
    const qr_setting *a = qr_recipe_setting(r, QR_SET_ACTIVATION), *w = qr_recipe_setting(r, QR_SET_WEIGHT);
    cr_assert(a && w);
    cr_assert_str_eq(a->type, "u8");
    cr_assert_eq(a->mods, QR_MOD_ASYMMETRIC);
    cr_assert_str_eq(a->calibrator, "minmax");
    cr_assert_eq(a->nargs, 0);
    cr_assert_eq(w->mods, QR_MOD_SYMMETRIC | QR_MOD_PER_CHANNEL);
    cr_assert(w->nargs == 1 && !strcmp(w->argnames[0], "symmetric"));
    qrl_rt rt;
    qr_rt_init(&rt);
    double v[4] = {0};
    w->args(&rt, v);
    cr_assert_eq(v[0], 1.0);
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_NUMERICS)->type, "onnx");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_ACCUMULATE)->type, "i32");
    cr_assert(r->fallback);
    cr_assert_eq(r->fallback(&rt, 15.0, 40.0, 1.0, 1.0), 1);
    cr_assert_eq(r->fallback(&rt, 30.0, 40.0, 1.0, 1.0), 0);
    /* affine rules of the stdlib come along */
    qr_graph *g = qr_graph_new();
    qr_node *rn = one_node(g, "Relu"), *sn = one_node(g, "Sigmoid");
    qr_status st;
    const qr_affine *relu = qr_module_affine_for(m, g, rn, NULL, NULL, NULL, 0, NULL, &st);
    const qr_affine *sig = qr_module_affine_for(m, g, sn, NULL, NULL, NULL, 0, NULL, &st);
    cr_assert(relu && relu->kind == QR_AFF_SAME && relu->elem);
    qr_aff_view av;
    qr_aff_view_init(&av, g, rn);
    int32_t x[1] = {5}, z[1] = {10};
    double sc[1] = {0.1};
    cr_assert_eq(relu->elem(&rt, &av.mt, x, z, sc), 10);
    x[0] = 20;
    cr_assert_eq(relu->elem(&rt, &av.mt, x, z, sc), 20);
    cr_assert(sig && sig->kind == QR_AFF_FIXED && sig->qparams && sig->table);
    double scale;
    int64_t zero;
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1), u8 = qr_qtype_of(QR_U8, 0, -1);
    qr_aff_view_init(&av, g, sn);
    sig->qparams(&rt, &av.mt, &i8, &scale, &zero); /* [0, 1]: TFLite's 1/256 at qmin */
    cr_assert_eq(scale, 1.0 / 256);
    cr_assert_eq(zero, -128);
    sig->qparams(&rt, &av.mt, &u8, &scale, &zero);
    cr_assert_eq(scale, 1.0 / 256);
    cr_assert_eq(zero, 0);
    cr_assert_float_eq(sig->table(&rt, &av.mt, 0.0), 0.5, 1e-15);
    cr_assert_float_eq(sig->table(&rt, &av.mt, 2.0), 1 / (1 + exp(-2.0)), 1e-15);
    cr_assert_eq(qr_module_affine_for(m, g, one_node(g, "MaxPool"), NULL, NULL, NULL, 0, NULL, &st)->kind, QR_AFF_SAME);
    cr_assert_eq(qr_module_affine_for(m, g, one_node(g, "Concat"), NULL, NULL, NULL, 0, NULL, &st)->kind, 2);
    cr_assert_eq(rt.failed, 0);
    qr_graph_free(g);
    qr_module_free(m);
}

/* Affine rules read the node: attributes with defaults, where clauses, fixed qparams per type. */
Test(jit, affine_rules_read_the_node)
{
    qrl_module *m = compile_path("recipes/int8.qrl");
    qr_graph *g = qr_graph_new();
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_status st;
    char why[512];
    qr_aff_view av;
    /* LeakyRelu's alpha: 0.01 by default, the node's when it has one */
    qr_node *lr = one_node(g, "LeakyRelu"), *lr2 = one_node(g, "LeakyRelu");
    qr_node_add_attr_f(g, lr2, "alpha", 0.2f);
    const qr_affine *a = qr_module_affine_for(m, g, lr, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && a->table);
    qr_aff_view_init(&av, g, lr);
    cr_assert_float_eq(a->table(&rt, &av.mt, -2.0), -0.02, 1e-9);
    qr_aff_view_init(&av, g, lr2);
    cr_assert_float_eq(a->table(&rt, &av.mt, -2.0), -0.4, 1e-6);
    cr_assert_float_eq(a->table(&rt, &av.mt, 3.0), 3.0, 1e-9);
    /* HardSigmoid as PyTorch exports it: alpha 1/6 */
    qr_node *hs = one_node(g, "HardSigmoid");
    qr_node_add_attr_f(g, hs, "alpha", 1.0f / 6);
    qr_node_add_attr_f(g, hs, "beta", 0.5f);
    a = qr_module_affine_for(m, g, hs, NULL, NULL, why, sizeof why, NULL, &st);
    qr_aff_view_init(&av, g, hs);
    cr_assert_float_eq(a->table(&rt, &av.mt, 1.5), 0.75, 1e-6);
    cr_assert_float_eq(a->table(&rt, &av.mt, -4.0), 0.0, 1e-9);
    /* Tanh: [-1, 1] with real 0 in the middle of any type (u8: 128), never an out-of-range zero point */
    qr_node *th = one_node(g, "Tanh");
    a = qr_module_affine_for(m, g, th, NULL, NULL, why, sizeof why, NULL, &st);
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1), n8 = qr_qtype_of(QR_I8, 1, -1);
    double scale;
    int64_t zero;
    a->qparams(&rt, &av.mt, &u8, &scale, &zero);
    cr_assert_eq(zero, 128);
    cr_assert_eq(scale, 1.0 / 128);
    a->qparams(&rt, &av.mt, &n8, &scale, &zero);
    cr_assert_eq(zero, 0);
    cr_assert_float_eq(scale * 127, 1.0, 0.01);
    /* Resize: nearest on the integers as they are; cubic requantized, on the integers; tf_crop_and_resize
     * (which extrapolates a real value) in f32 */
    qr_node *rz = one_node(g, "Resize"), *rc = one_node(g, "Resize"), *rt2 = one_node(g, "Resize");
    qr_node_add_attr_s(g, rc, "mode", "cubic");
    qr_node_add_attr_s(g, rt2, "mode", "cubic");
    qr_node_add_attr_s(g, rt2, "coordinate_transformation_mode", "tf_crop_and_resize");
    a = qr_module_affine_for(m, g, rz, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && a->kind == QR_AFF_SAME && !a->in_f32);
    a = qr_module_affine_for(m, g, rc, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && a->kind == QR_AFF_REQUANTIZE && !a->in_f32);
    a = qr_module_affine_for(m, g, rt2, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && a->kind == QR_AFF_REQUANTIZE && a->in_f32);
    /* AveragePool counting explicit pads: on the integers (the integer graph pads with the zero point);
     * pads from auto_pad: f32 */
    qr_node *ap = one_node(g, "AveragePool"), *ap2 = one_node(g, "AveragePool");
    int64_t pads[4] = {0, 1, 0, 1};
    qr_node_add_attr_i(g, ap, "count_include_pad", 1);
    qr_node_add_attr_ints(g, ap, "pads", 4, pads);
    qr_node_add_attr_i(g, ap2, "count_include_pad", 1);
    qr_node_add_attr_ints(g, ap2, "pads", 4, pads);
    qr_node_add_attr_s(g, ap2, "auto_pad", "SAME_UPPER");
    a = qr_module_affine_for(m, g, ap, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && !a->in_f32);
    a = qr_module_affine_for(m, g, ap2, NULL, NULL, why, sizeof why, NULL, &st);
    cr_assert(a && a->in_f32);
    cr_assert_eq(rt.failed, 0);
    qr_graph_free(g);
    qr_module_free(m);
}

/* A where clause that holds for no node: the op stays f32, and why names the rule and its condition. */
Test(jit, affine_where_none_applies)
{
    qrl_module *m = compile_text("where.qrl", "affine Resize(x) where attr(\"mode\", \"nearest\") == \"nearest\" -> same\n", NULL, NULL);
    qr_graph *g = qr_graph_new();
    qr_node *rc = one_node(g, "Resize");
    qr_node_add_attr_s(g, rc, "mode", "linear");
    qr_status st;
    char why[512];
    cr_assert_null(qr_module_affine_for(m, g, rc, NULL, NULL, why, sizeof why, NULL, &st));
    cr_assert_eq(st, QR_OK);
    cr_assert(strstr(why, ":1:8: where attr(\"mode\", \"nearest\") == \"nearest\" does not hold"), "%s", why);
    qr_graph_free(g);
    qr_module_free(m);
}

Test(jit, pattern_description_and_where_predicate)
{
    qrl_module *m = compile_path("examples/recipes/scale_pattern.qrl");
    const qr_pattern *p = qr_module_pattern(m, "const_scale");
    cr_assert(p);
    cr_assert_eq(p->nvalues, 3);
    cr_assert_str_eq(p->values[0].name, "y");
    cr_assert_eq(p->values[0].role, QR_ROLE_ACTIVATION);
    cr_assert_str_eq(p->values[1].name, "x");
    cr_assert_str_eq(p->values[2].name, "c");
    cr_assert_eq(p->values[2].role, QR_ROLE_NONE);
    cr_assert_eq(p->nnodes, 1);
    cr_assert_eq(p->nodes[0].out, 0);
    cr_assert_str_eq(p->nodes[0].ops, "Mul");
    cr_assert(p->nodes[0].ninputs == 2 && p->nodes[0].inputs[0].value == 1 && p->nodes[0].inputs[1].value == 2 &&
              !p->nodes[0].inputs[0].optional && !p->nodes[0].inputs[1].optional);
    cr_assert_eq(p->nlowers, 1);
    cr_assert_str_eq(p->lowers[0].kernel, "scale_kernel");
    /* its arguments typed: values 1 (x) and 2 (c) of the pattern */
    cr_assert_eq(p->lowers[0].nargs, 2);
    cr_assert(p->lowers[0].args[0].kind == QR_LOWER_VALUE && p->lowers[0].args[0].index == 1);
    cr_assert(p->lowers[0].args[1].kind == QR_LOWER_VALUE && p->lowers[0].args[1].index == 2);
    cr_assert_eq(p->lowers[0].out, 0);
    /* where const(c) and c.rank == 0, on a real graph */
    qr_graph *g = qr_graph_new();
    const int64_t d[1] = {4};
    const float cv = 0.5f;
    qr_value *xv = tu_input(g, "x", 1, d);
    qr_value *c0 = tu_const_f32(g, "c", 0, d, &cv);
    qr_value *c1 = tu_const_f32(g, "c1", 1, (const int64_t[]){1}, &cv);
    qr_value *ins[2] = {xv, c0};
    qr_value *yv = tu_node(g, "Mul", "mul", 2, ins, 1)->out[0];
    qrl_rt rt;
    qr_rt_init(&rt);
    qr_value *vals[3] = {yv, xv, c0};
    qrl_match mt = {g, vals, 3, NULL, NULL, NULL};
    cr_assert_eq(p->where(&rt, &mt), 1);
    vals[2] = c1; /* rank 1: no */
    cr_assert_eq(p->where(&rt, &mt), 0);
    vals[2] = xv; /* not constant: no */
    cr_assert_eq(p->where(&rt, &mt), 0);
    qr_graph_free(g);
    qr_module_free(m);
}

/* A generic fn and kernel: one instance per member of T's set, each with
 * T's own arithmetic (hand-derived values), the fn's instance picked by the
 * argument's type or written out (wrap<i8>); a lowering of the generic kernel
 * lists both instances, in the set's order, so the runtime picks the one the
 * recipe's types fit, and shift<i8> lowers to that instance alone. */
Test(jit, generics_instantiate_per_member)
{
    qrl_module *m = compile_text("generic.qrl",
                                 "fn first<T: u8 | i8>(x: tensor<T>) -> i32 { return i32(x[0]) }\n"
                                 "fn wrap<T: u8 | i8>(v: i32) -> T { return T(v) }\n"
                                 "fn add_one<T: u8 | i8 | i16>(v: T) -> T { return v + T(1) }\n"
                                 "kernel shift<T: u8 | i8>(x: tensor<T>, x_scale: f32, x_zero: i32, d: i64,\n"
                                 "                         y: tensor<T>, y_scale: f32, y_zero: i32) {\n"
                                 "  for i in 0 .. y.numel {\n"
                                 "    y[i] = sat<T>(first(x) + i32(x[i]) - i32(x[0]) + i32(d))\n"
                                 "  }\n"
                                 "}\n"
                                 "pattern p {\n"
                                 "  match y = Relu(x)\n"
                                 "  quantize x: activation, y: activation\n"
                                 "  lower y = shift(x, 100)\n"
                                 "}\n"
                                 "fn wrapped() -> i32 { return i32(wrap<i8>(200)) + i32(wrap<u8>(300)) }\n"
                                 "pattern p8 {\n"
                                 "  match y = Sigmoid(x)\n"
                                 "  quantize x: activation, y: activation\n"
                                 "  lower y = shift<i8>(x, 1)\n"
                                 "}\n",
                                 NULL, NULL);
    qrl_rt rt;
    qr_rt_init(&rt);
    uint8_t (*wrap_u8)(qrl_rt *, int32_t) = fn(m, "wrap<u8>", "u8(i32)");
    int8_t (*wrap_i8)(qrl_rt *, int32_t) = fn(m, "wrap<i8>", "i8(i32)");
    cr_assert_eq(wrap_u8(&rt, 300), 44); /* T(v) wraps as u8(v) and i8(v) do */
    cr_assert_eq(wrap_i8(&rt, 200), -56);
    uint8_t (*add_u8)(qrl_rt *, uint8_t) = fn(m, "add_one<u8>", "u8(u8)");
    int8_t (*add_i8)(qrl_rt *, int8_t) = fn(m, "add_one<i8>", "i8(i8)");
    int16_t (*add_i16)(qrl_rt *, int16_t) = fn(m, "add_one<i16>", "i16(i16)");
    cr_assert_eq(add_u8(&rt, 255), 0);
    cr_assert_eq(add_i8(&rt, 127), -128);
    cr_assert_eq(add_i16(&rt, 127), 128);
    cr_assert_null(qr_module_fn(m, "add_one"), "a generic itself is not compiled");
    /* sat<T> saturates to each instance's range */
    const char *names[2] = {"shift<u8>", "shift<i8>"};
    for (int k = 0; k < 2; k++) {
        const qr_fn_desc *d = tu_fn(m, names[k], k ? "void(tensor<i8>,f32,i32,i64,tensor<i8>,f32,i32)"
                                                   : "void(tensor<u8>,f32,i32,i64,tensor<u8>,f32,i32)");
        cr_assert(d->call, "%s", names[k]);
        int8_t xi[3] = {-100, 0, 20}, yi[3];
        uint8_t xu[3] = {10, 100, 200}, yu[3];
        qrl_tview tx = {.data = k ? (void *)xi : (void *)xu, .numel = 3, .rank = 1, .dims = {3}}, ty = tx;
        ty.data = k ? (void *)yi : (void *)yu;
        float sc = 1;
        int32_t z = 0;
        int64_t dd = 100;
        void *args[] = {&tx, &sc, &z, &dd, &ty, &sc, &z};
        d->call(&rt, args);
        cr_assert_eq(rt.failed, 0, "%s", rt.msg);
        if (k) { /* x + 100 within [-128, 127] */
            cr_assert_eq(yi[0], 0);
            cr_assert_eq(yi[1], 100);
            cr_assert_eq(yi[2], 120);
        } else { /* within [0, 255] */
            cr_assert_eq(yu[0], 110);
            cr_assert_eq(yu[1], 200);
            cr_assert_eq(yu[2], 255);
        }
    }
    const qr_pattern *p = qr_module_pattern(m, "p");
    cr_assert(p);
    cr_assert_eq(p->nlowers, 2);
    cr_assert_str_eq(p->lowers[0].kernel, "shift<u8>");
    cr_assert_str_eq(p->lowers[1].kernel, "shift<i8>");
    /* value 1, then a constant numbered on across the clauses: 0, then 1 */
    for (int i = 0; i < 2; i++)
        cr_assert(p->lowers[i].nargs == 2 && p->lowers[i].args[0].kind == QR_LOWER_VALUE &&
                      p->lowers[i].args[0].index == 1 && p->lowers[i].args[1].kind == QR_LOWER_CONST &&
                      p->lowers[i].args[1].index == i,
                  "lowering %d", i);
    /* type arguments written out: that instance alone */
    int32_t (*wrapped)(qrl_rt *) = fn(m, "wrapped", "i32()");
    cr_assert_eq(wrapped(&rt), -56 + 44);
    const qr_pattern *p8 = qr_module_pattern(m, "p8");
    cr_assert(p8);
    cr_assert_eq(p8->nlowers, 1);
    cr_assert_str_eq(p8->lowers[0].kernel, "shift<i8>");
    qr_module_free(m);
}

/* entropy against NVIDIA's algorithm in numpy (tools/ref_entropy.py) */
Test(jit, entropy_matches_the_reference_implementation, .timeout = 120)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 20000 };
    static float x[N];
    /* a long-tailed signed distribution (Laplace-like), so clipping pays */
    unsigned seed = 17;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        double u = ((seed >> 8) & 0xffffff) / 16777216.0 * 0.999 + 0.0005;
        x[i] = (float)(u < 0.5 ? log(2 * u) : -log(2 - 2 * u));
    }
    qr_tensor t = vec(x, N);
    char path[700], cmd[1200], *log;
    snprintf(path, sizeof path, "%s/ent.npy", dir);
    qr_error e;
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/ref_entropy.py %s 256 128", tu_root(), path);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    double want = atof(log);
    free(log);
    const char *names[1] = {"bins"};
    const double vals[1] = {256};
    qr_calib *c;
    cr_assert_eq(qr_calib_new(m, "entropy", 1, names, vals, &c, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
    double amax = qp.scale * 127.5; /* symmetric: scale = amax / 127.5 */
    cr_assert_float_eq(amax, want, 1e-9 * want, "QRL entropy amax %.12g, reference %.12g", amax, want);
    qr_calib_free(c);
    qr_module_free(m);
}

/* moving_average: the exponential moving average of per-batch min and max, in C */
Test(jit, moving_average_matches_c)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 3000, B = 500 };
    static float x[N];
    random_data(x, N, 23);
    const char *names[1] = {"momentum"};
    const double vals[1] = {0.1};
    qr_calib *c;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "moving_average", 1, names, vals, &c, &e), QR_OK, "%s", e.msg);
    double lo = 0, hi = 0;
    for (int b = 0; b < N / B; b++) {
        qr_tensor t = vec(x + b * B, B);
        cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
        double mn = INFINITY, mx = -INFINITY;
        for (int i = 0; i < B; i++) {
            mn = fmin(mn, x[b * B + i]);
            mx = fmax(mx, x[b * B + i]);
        }
        lo = b == 0 ? mn : lo + 0.1 * (mn - lo);
        hi = b == 0 ? mx : hi + 0.1 * (mx - hi);
    }
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &u8, &qp, &e), QR_OK, "%s", e.msg);
    double scale = (fmax(hi, 0) - fmin(lo, 0)) / 255.0;
    cr_assert_float_eq(qp.scale, scale, 1e-12 * scale, "qrl %.17g vs C %.17g", qp.scale, scale);
    cr_assert_eq(qp.zero, (int64_t)nearbyint(-fmin(lo, 0) / scale));
    qr_calib_free(c);
    qr_module_free(m);
}

/* mse: the clipping threshold minimizing the squared error over the |x|
 * histogram (bin centres), searched over `steps` thresholds, in C */
Test(jit, mse_matches_c)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 20000 };
    static float x[N];
    random_data(x, N, 29);
    qr_calib *c;
    qr_error e;
    const char *names[2] = {"bins", "steps"};
    const double vals[2] = {512, 64};
    cr_assert_eq(qr_calib_new(m, "mse", 2, names, vals, &c, &e), QR_OK, "%s", e.msg);
    qr_tensor t = vec(x, N);
    cr_assert_eq(qr_calib_observe(c, &t, &e), QR_OK, "%s", e.msg);
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
    qr_hist h;
    cr_assert_eq(qr_hist_init(&h, 512, 1, &e), QR_OK);
    qr_hist_add_f32(&h, x, N);
    double levels = 255.0 / 2.0, best = qr_hist_hi(&h), best_err = INFINITY; /* data has negatives: half range */
    for (int s = 1; s <= 64; s++) {
        double clip = qr_hist_hi(&h) * s / 64.0, scale = clip / levels, err = 0;
        for (int b = 0; b < 512; b++) {
            double n = qr_hist_bin(&h, b), v = qr_hist_edge(&h, b) + qr_hist_width(&h) / 2, d;
            if (n <= 0)
                continue;
            d = v > clip ? v - clip : v - nearbyint(v / scale) * scale;
            err += n * d * d;
        }
        if (err < best_err) {
            best_err = err;
            best = clip;
        }
    }
    qr_hist_free(&h);
    cr_assert_float_eq(qp.scale, best / 127.5, 1e-12, "qrl %.17g vs C %.17g", qp.scale, best / 127.5);
    qr_calib_free(c);
    qr_module_free(m);
}

/* l2: the range minimizing the squared rounding error over the signed histogram.
 * Against tools/ref_l2.py: the same search in numpy gives the same qparams, and,
 * independently, the raw values quantized with them (numpy's rounding and clamp)
 * have a mean squared error within 1% of the best of a brute-force grid of ranges
 * and under minmax's (the outliers cost more clipped than kept: l2 clips the tails
 * only so far, which minmax does not at all). Data of both signs, skewed (a Laplace of scale 1 below
 * 0 and 3 above) with a few far outliers on each side, for u8 (each end clipped on
 * its own) and i8 symmetric (the magnitude alone). */
static void l2_case(qrl_module *m, const float *x, int n, qr_dtype dt, int symmetric, const char *tname)
{
    char path[700], cmd[1400], *log;
    snprintf(path, sizeof path, "%s/l2_%s.npy", dir, tname);
    qr_tensor t = vec((float *)x, n);
    qr_error e;
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
    const char *names[2] = {"bins", "steps"};
    const double vals[2] = {512, 16};
    qr_calib *c;
    cr_assert_eq(qr_calib_new(m, "l2", 2, names, vals, &c, &e), QR_OK, "%s", e.msg);
    /* in two batches merged, as calibration runs it */
    qr_calib *c2;
    cr_assert_eq(qr_calib_new(m, "l2", 2, names, vals, &c2, &e), QR_OK, "%s", e.msg);
    qr_tensor a = vec((float *)x, n / 3), b = vec((float *)x + n / 3, n - n / 3);
    cr_assert_eq(qr_calib_observe(c, &a, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(c2, &b, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_merge(c, c2, &e), QR_OK, "%s", e.msg);
    qrl_qtype qt = qr_qtype_of(dt, 0, -1);
    qt.symmetric = symmetric;
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &qt, &qp, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/ref_l2.py %s 512 16 %s %.17g %lld", tu_root(), path, tname,
             qp.scale, (long long)qp.zero);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    double ref_scale, mse, mse_minmax, mse_best;
    long long ref_zero;
    cr_assert_eq(sscanf(log, "%lf %lld %lf %lf %lf", &ref_scale, &ref_zero, &mse, &mse_minmax, &mse_best), 5, "%s", log);
    free(log);
    cr_assert_float_eq(qp.scale, ref_scale, 1e-9 * ref_scale, "%s: QRL scale %.17g, reference %.17g", tname, qp.scale,
                       ref_scale);
    cr_assert_eq(qp.zero, ref_zero, "%s: QRL zero %lld, reference %lld", tname, (long long)qp.zero, ref_zero);
    cr_assert(mse <= 1.01 * mse_best, "%s: mse %.6g, grid's best %.6g", tname, mse, mse_best);
    cr_assert(mse < 0.99 * mse_minmax, "%s: mse %.6g, minmax's %.6g", tname, mse, mse_minmax);
    qr_calib_free(c);
    qr_calib_free(c2);
    /* widen = 0.25: the ends a quarter of the way back to the observed ones */
    const char *wn[3] = {"bins", "steps", "widen"};
    const double wv[3] = {512, 16, 0.25};
    cr_assert_eq(qr_calib_new(m, "l2", 3, wn, wv, &c, &e), QR_OK, "%s", e.msg);
    qr_tensor all = vec((float *)x, n);
    cr_assert_eq(qr_calib_observe(c, &all, &e), QR_OK, "%s", e.msg);
    qrl_qparams wq;
    cr_assert_eq(qr_calib_solve(c, &qt, &wq, &e), QR_OK, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/ref_l2.py %s 512 16 %s %.17g %lld 0.25", tu_root(), path,
             tname, wq.scale, (long long)wq.zero);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    cr_assert_eq(sscanf(log, "%lf %lld %lf %lf %lf", &ref_scale, &ref_zero, &mse, &mse_minmax, &mse_best), 5, "%s", log);
    free(log);
    cr_assert_float_eq(wq.scale, ref_scale, 1e-9 * ref_scale, "%s, widen: QRL scale %.17g, reference %.17g", tname,
                       wq.scale, ref_scale);
    cr_assert_eq(wq.zero, ref_zero, "%s, widen: QRL zero %lld, reference %lld", tname, (long long)wq.zero, ref_zero);
    cr_assert(wq.scale > qp.scale, "%s: widen's scale %.6g, l2's %.6g", tname, wq.scale, qp.scale);
    qr_calib_free(c);
}

Test(jit, l2_matches_the_reference_and_the_brute_force_optimum, .timeout = 120)
{
    qrl_module *m = stdlib_calibrators();
    enum { N = 20000 };
    static float x[N];
    unsigned seed = 41;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        double u = ((seed >> 8) & 0xffffff) / 16777216.0 * 0.999 + 0.0005;
        x[i] = (float)(u < 0.5 ? log(2 * u) : -3.0 * log(2 - 2 * u));
    }
    for (int i = 0; i < 6; i++) /* far outliers: minmax spends its range on them */
        x[i * 997] = i % 2 ? -45.0f - (float)i : 90.0f + (float)i;
    l2_case(m, x, N, QR_U8, 0, "u8");
    l2_case(m, x, N, QR_I8, 1, "i8s");
    qr_module_free(m);
}


/* extreme: per sample (index 0 of the first axis) its maximum and minimum; the range's top is the largest
 * maximum plus k times its distance above the maxima's median, the bottom likewise. Observed in batches
 * merged, as calibration runs it. */
static qrl_qparams extreme_ends(qrl_module *m, float *x, int64_t samples, int64_t per, int batches, double k,
                                double cap, int ratio, double above, int bottom, qr_dtype dt)
{
    const char *names[5] = {"k", "cap", "ratio", "above", "bottom"};
    const double vals[5] = {k, cap, ratio, above, bottom};
    qr_calib *c, *b;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "extreme", 5, names, vals, &c, &e), QR_OK, "%s", e.msg);
    for (int i = 0; i < batches; i++) {
        int64_t s0 = samples * i / batches, s1 = samples * (i + 1) / batches;
        qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {s1 - s0, per}, .data = x + s0 * per};
        cr_assert_eq(qr_calib_new(m, "extreme", 5, names, vals, &b, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_observe(b, &t, &e), QR_OK, "%s", e.msg);
        cr_assert_eq(qr_calib_merge(c, b, &e), QR_OK, "%s", e.msg);
        qr_calib_free(b);
    }
    qrl_qtype qt = qr_qtype_of(dt, 0, -1);
    qt.symmetric = dt == QR_I8; /* i8: symmetric, the magnitude alone */
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &qt, &qp, &e), QR_OK, "%s", e.msg);
    qr_calib_free(c);
    return qp;
}

static qrl_qparams extreme_gated(qrl_module *m, float *x, int64_t samples, int64_t per, int batches, double k,
                                 double cap, int ratio, double above, qr_dtype dt)
{
    return extreme_ends(m, x, samples, per, batches, k, cap, ratio, above, 1, dt);
}

static qrl_qparams extreme_qparams(qrl_module *m, float *x, int64_t samples, int64_t per, int batches, double k,
                                   double cap, int ratio, qr_dtype dt)
{
    return extreme_gated(m, x, samples, per, batches, k, cap, ratio, 0.0, dt);
}

/* By hand: 4 samples of 2 values, maxima 1 2 3 10 (median 2.5), minima -1 -0.5 -2 0.25 (median -0.75).
 * k = 1: top 10 + 7.5 = 17.5, bottom -2 - 1.25 = -3.25; u8 scale 20.75 / 255, zero round(3.25 / scale)
 * = round(39.94) = 40. k = 0 is minmax: [-2, 10]. Every sample at or above 0 keeps the bottom at 0. In
 * one batch or in four, the same. */
Test(jit, extreme_by_hand)
{
    qrl_module *m = stdlib_calibrators();
    float x[8] = {-1, 1, 2, -0.5f, -2, 3, 10, 0.25f};
    for (int batches = 1; batches <= 4; batches *= 4) {
        qrl_qparams qp = extreme_qparams(m, x, 4, 2, batches, 1.0, 256, 0, QR_U8);
        cr_assert_float_eq(qp.scale, 20.75 / 255, 1e-15, "%d batches: scale %.17g", batches, qp.scale);
        cr_assert_eq(qp.zero, 40);
        qp = extreme_qparams(m, x, 4, 2, batches, 0.0, 256, 0, QR_U8);
        cr_assert_float_eq(qp.scale, 12.0 / 255, 1e-15, "k = 0: scale %.17g", qp.scale);
        cr_assert_eq(qp.zero, (int64_t)nearbyint(2.0 / (12.0 / 255)));
        /* ratio, k = 0.5: top 10 * (10 / 2.5)^0.5 = 20; bottom from -min (1 0.5 2 -0.25: largest 2, median
         * 0.75) -2 * (2 / 0.75)^0.5 = -3.26599; zero round(3.26599 / (23.26599 / 255)) = round(35.80) = 36 */
        qp = extreme_qparams(m, x, 4, 2, batches, 0.5, 256, 1, QR_U8);
        double lo = 2 * sqrt(2 / 0.75);
        cr_assert_float_eq(qp.scale, (20 + lo) / 255, 1e-15, "ratio: scale %.17g", qp.scale);
        cr_assert_eq(qp.zero, 36);
        /* above = 3: the maxima spread 10 / 2.5 = 4 times (headroom: top 17.5), the minima 2 / 0.75 = 2.67
         * times (none: bottom -2); scale 19.5 / 255, zero round(2 / scale) = round(26.15) = 26. above = 5:
         * neither end, minmax's [-2, 10]. */
        qp = extreme_gated(m, x, 4, 2, batches, 1.0, 256, 0, 3.0, QR_U8);
        cr_assert_float_eq(qp.scale, 19.5 / 255, 1e-15, "above 3: scale %.17g", qp.scale);
        cr_assert_eq(qp.zero, 26);
        qp = extreme_gated(m, x, 4, 2, batches, 1.0, 256, 0, 5.0, QR_U8);
        cr_assert_float_eq(qp.scale, 12.0 / 255, 1e-15, "above 5: scale %.17g", qp.scale);
        cr_assert_eq(qp.zero, (int64_t)nearbyint(2.0 / (12.0 / 255)));
        /* bottom = false: the top alone takes headroom. k = 1, above 0: top 17.5, bottom minmax's -2 (scale
         * 19.5 / 255, zero 26, as above = 3); above = 5 gates the top too: minmax's [-2, 10]. */
        qp = extreme_ends(m, x, 4, 2, batches, 1.0, 256, 0, 0.0, 0, QR_U8);
        cr_assert_float_eq(qp.scale, 19.5 / 255, 1e-15, "top only: scale %.17g", qp.scale);
        cr_assert_eq(qp.zero, 26);
        qp = extreme_ends(m, x, 4, 2, batches, 1.0, 256, 0, 5.0, 0, QR_U8);
        cr_assert_float_eq(qp.scale, 12.0 / 255, 1e-15, "top only, above 5: scale %.17g", qp.scale);
    }
    float p[8] = {1, 2, 0.5f, 4, 2, 3, 3, 20}; /* maxima 2 4 3 20 (median 3.5), minima 1 0.5 2 3 */
    qrl_qparams qp = extreme_qparams(m, p, 4, 2, 1, 2.0, 256, 0, QR_U8);
    cr_assert_float_eq(qp.scale, (20 + 2 * 16.5) / 255.0, 1e-15, "positive: scale %.17g", qp.scale);
    cr_assert_eq(qp.zero, 0);
    qr_module_free(m);
}

/* Against numpy: 40 samples of 300 values of both signs, each sample's amplitude log-normal (a few loud),
 * observed in 3 batches merged. The range from numpy's per-sample max and min and np.median, for u8 and
 * for i8 symmetric; with cap = 8 (fewer kept than half the samples) the median's stand-in is the 8th
 * largest maximum (smallest minimum); with ratio, each end (m / median)^k times the largest m. Gated by
 * `above` (the last two: between the two ends' spreads m / median, so one end takes headroom and the other
 * keeps minmax's), an end takes headroom only where m > above * median. */
Test(jit, extreme_matches_numpy)
{
    qrl_module *m = stdlib_calibrators();
    enum { S = 40, P = 300 };
    static float x[S * P];
    unsigned seed = 53;
    for (int s = 0; s < S; s++) {
        seed = seed * 1664525u + 1013904223u;
        double u = ((seed >> 8) & 0xffffff) / 16777216.0 * 0.998 + 0.001;
        double amp = exp(0.8 * sqrt(-2 * log(u)) * (s % 2 ? 1 : -1) * 0.7);
        for (int i = 0; i < P; i++) {
            seed = seed * 1664525u + 1013904223u;
            double v = ((seed >> 8) & 0xffffff) / 16777216.0;
            x[s * P + i] = (float)(amp * (v - 0.35) * 3.0);
        }
    }
    char path[700], cmd[1600], *log;
    snprintf(path, sizeof path, "%s/extreme.npy", dir);
    qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {S, P}, .data = x};
    qr_error e;
    cr_assert_eq(qr_npy_write(path, &t, &e), QR_OK, "%s", e.msg);
    /* the last two: bottom = false (top-only headroom), ungated and gated between the ends' spreads */
    const double ks[7] = {1.5, 0.7, 0.8, 0.8, 1.5, 0.4, 0.6}, caps[7] = {256, 8, 256, 256, 8, 256, 256};
    double above_at[7] = {0, 0, 0, 0, 0, 0, 0};
    int one_end = 0;
    for (int j = 0; j < 7; j++) {
        int ratio = j == 2 || j == 3 || j == 5, bottom = j < 5;
        if (j == 3 || j == 4 || j == 6) { /* above between the two ends' spreads (numpy's): one end gated, the other not */
            snprintf(cmd, sizeof cmd,
                     "/usr/bin/python3 -c \"import numpy as np; x = np.load('%s').astype(np.float64); cap = %d\n"
                     "mid = lambda a: np.median(a) if len(a) < 2 * cap else np.sort(a)[::-1][cap - 1]\n"
                     "r = [a.max() / mid(a) for a in (x.max(axis=1), -x.min(axis=1))]\n"
                     "print('%%.17g' %% np.sqrt(r[0] * r[1]))\"",
                     path, (int)caps[j]);
            cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
            cr_assert_eq(sscanf(log, "%lf", &above_at[j]), 1, "%s", log);
            free(log);
        }
        qrl_qparams u8 = extreme_ends(m, x, S, P, 3, ks[j], caps[j], ratio, above_at[j], bottom, QR_U8);
        qrl_qparams i8 = extreme_ends(m, x, S, P, 3, ks[j], caps[j], ratio, above_at[j], bottom, QR_I8);
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import numpy as np; x = np.load('%s').astype(np.float64); k, cap, ratio, above, bottom = %g, %d, %d, %.17g, %d\n"
                 "mx, mn = x.max(axis=1), -x.min(axis=1)\n"
                 "mid = lambda a: np.median(a) if len(a) < 2 * cap else np.sort(a)[::-1][cap - 1]\n"
                 "gate = lambda a: above <= 0 or (a.max() > 0 and mid(a) > 0 and a.max() > above * mid(a))\n"
                 "end = lambda a: a.max() if not gate(a) else a.max() * (a.max() / mid(a)) ** k if ratio and mid(a) > 0 else a.max() + k * (a.max() - mid(a))\n"
                 "hi = end(mx); lo = -end(mn) if bottom else -mn.max()\n"
                 "a, b = min(lo, 0), max(hi, 0); s = (b - a) / 255; z = int(np.clip(np.round(-a / s), 0, 255))\n"
                 "print('%%.17g %%d %%.17g %%d' %% (s, z, max(-a, b) / 127.5, int(gate(mx)) + int(gate(mn))))\"",
                 path, ks[j], (int)caps[j], ratio, above_at[j], bottom);
        cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
        double s, s8;
        long long z;
        int gated;
        cr_assert_eq(sscanf(log, "%lf %lld %lf %d", &s, &z, &s8, &gated), 4, "%s", log);
        free(log);
        one_end += (j == 3 || j == 4 || j == 6) && gated == 1;
        cr_assert_float_eq(u8.scale, s, 1e-12 * s, "k %g cap %g: u8 scale %.17g, numpy %.17g", ks[j], caps[j],
                           u8.scale, s);
        cr_assert_eq(u8.zero, z, "k %g cap %g: u8 zero %lld, numpy %lld", ks[j], caps[j], (long long)u8.zero, z);
        cr_assert_float_eq(i8.scale, s8, 1e-12 * s8, "k %g cap %g: i8 scale %.17g, numpy %.17g", ks[j], caps[j],
                           i8.scale, s8);
        cr_assert_eq(i8.zero, 0);
    }
    cr_assert_eq(one_end, 3, "each gated case has one end with headroom and one without");
    qr_module_free(m);
}
/* Calibrator arguments and the fallback of settings listed after many use
 * lines (they were kept only for the first 16 items of a recipe). */
Test(jit, recipe_settings_after_many_use_lines)
{
    char src[4096] = "import \"calibrators.qrl\"\nimport \"patterns.qrl\"\nrecipe r {\n";
    for (int i = 0; i < 20; i++)
        strcat(src, "  use conv\n");
    strcat(src, "  activation = u8 asymmetric by percentile(p = 50.0)\n"
                "  weight = i8 symmetric by minmax(symmetric = true)\n"
                "  fallback = f32 when sqnr < 20\n}\n");
    qrl_module *m = compile_text("many_uses.qrl", src, NULL, NULL);
    const qr_recipe *r = qr_module_recipe(m, "r");
    cr_assert(r);
    qrl_rt rt;
    qr_rt_init(&rt);
    double v[4] = {0};
    const qr_setting *a = qr_recipe_setting(r, QR_SET_ACTIVATION), *w = qr_recipe_setting(r, QR_SET_WEIGHT);
    cr_assert(a && a->args && w && w->args);
    a->args(&rt, v);
    cr_assert_eq(v[0], 50.0);
    w->args(&rt, v);
    cr_assert_eq(v[0], 1.0);
    cr_assert(r->fallback);
    cr_assert_eq(r->fallback(&rt, 15.0, 40.0, 1.0, 1.0), 1);
    cr_assert_eq(rt.failed, 0);
    qr_module_free(m);
}

/* ------------------------------------------------------- what is compiled */

/* A unit with a recipe compiles what the recipe reaches: its patterns (here
 * only conv, by `use`) and their kernels at -O3 in a part of their own, the
 * calibrators its settings name, the fns they call; the rest of the stdlib it
 * imports is checked, not compiled. The same imports without a recipe compile
 * everything. */
Test(jit, only_what_the_recipe_reaches_is_compiled)
{
    const char *src = "import \"calibrators.qrl\"\n"
                      "import \"affine.qrl\"\n"
                      "import \"patterns.qrl\"\n"
                      "fn not_called(x: f64) -> f64 { return x }\n"
                      "recipe only_conv {\n"
                      "  use conv, Relu\n"
                      "  activation = u8 asymmetric by minmax()\n"
                      "  weight     = i8 symmetric per_channel by minmax(symmetric = true)\n"
                      "  numerics   = onnx\n"
                      "}\n";
    qc_stats st;
    qrl_module *m = compile_text("reach.qrl", src, NULL, &st);
    cr_assert_eq(st.reach, 1);
    cr_assert_eq(st.nparts, 2);
    cr_assert_str_eq(st.parts[0].name, "code");
    cr_assert_eq(st.parts[0].opt_level, 1);
    cr_assert_str_eq(st.parts[1].name, "kernels");
    cr_assert_eq(st.parts[1].opt_level, 3);
    cr_assert(qr_module_recipe(m, "only_conv"));
    cr_assert(qr_module_calibrator(m, "minmax"));
    cr_assert_null(qr_module_calibrator(m, "percentile"));
    cr_assert_null(qr_module_calibrator(m, "entropy"));
    cr_assert(qr_module_pattern(m, "conv"));
    cr_assert_null(qr_module_pattern(m, "add"));
    cr_assert_null(qr_module_fn(m, "not_called"));
    cr_assert_null(qr_module_fn(m, "qadd<u8>"));
    /* conv's kernels come from the kernel part and run: (100 + 0) * (0.5 * 0.25 / 1) = 12.5, to even 12, + 3 */
    const qr_fn_desc *k = qr_module_fn(m, "qlinear<u8>");
    cr_assert(k && k->is_kernel == 1 && k->call);
    /* its parameters, typed and named as stdlib/kernels.qrl declares them (the instance's T = u8) */
    static const struct { const char *name; qr_param_kind kind; qr_dtype elem; } want[14] = {
        {"acc", QR_PARAM_TENSOR, QR_I32}, {"x", QR_PARAM_TENSOR, QR_U8}, {"x_scale", QR_PARAM_SCALAR, QR_F32},
        {"x_zero", QR_PARAM_SCALAR, QR_I32}, {"w", QR_PARAM_TENSOR, QR_I8}, {"w_scale", QR_PARAM_ARRAY, QR_F32},
        {"w_zero", QR_PARAM_ARRAY, QR_I32}, {"b", QR_PARAM_TENSOR, QR_I32}, {"axis", QR_PARAM_SCALAR, QR_I64},
        {"lo", QR_PARAM_SCALAR, QR_F64}, {"hi", QR_PARAM_SCALAR, QR_F64}, {"y", QR_PARAM_TENSOR, QR_U8},
        {"y_scale", QR_PARAM_SCALAR, QR_F32}, {"y_zero", QR_PARAM_SCALAR, QR_I32}};
    cr_assert_eq(k->nparams, 14);
    for (int i = 0; i < 14; i++)
        cr_assert(!strcmp(k->params[i].name, want[i].name) && k->params[i].kind == want[i].kind &&
                      k->params[i].elem == want[i].elem,
                  "parameter %d: %s %d %d", i, k->params[i].name, k->params[i].kind, k->params[i].elem);
    const qr_fn_desc *k8 = qr_module_fn(m, "qlinear<i8>");
    cr_assert(k8 && k8->nparams == 14 && k8->params[1].elem == QR_I8 && k8->params[11].elem == QR_I8);
    cr_assert(qr_module_fn(m, "qlinear<i8>"));
    int32_t acc_d[1] = {100}, bias_d[1] = {0}, w_zero_d[1] = {0};
    uint8_t x_d[1] = {0}, y_d[1] = {0};
    int8_t w_d[1] = {0};
    float w_scale_d[1] = {0.25f}, x_scale = 0.5f, y_scale = 1.0f;
    int32_t x_zero = 0, y_zero = 3;
    int64_t axis = -1;
    double lo = -INFINITY, hi = INFINITY;
    qrl_tview acc = {.data = acc_d, .numel = 1, .rank = 2, .dims = {1, 1}};
    qrl_tview x = {.data = x_d, .numel = 1, .rank = 2, .dims = {1, 1}};
    qrl_tview w = {.data = w_d, .numel = 1, .rank = 2, .dims = {1, 1}};
    qrl_tview b = {.data = bias_d, .numel = 1, .rank = 1, .dims = {1}};
    qrl_tview y = {.data = y_d, .numel = 1, .rank = 2, .dims = {1, 1}};
    qrl_array w_scale = {w_scale_d, 1}, w_zero = {w_zero_d, 1};
    void *args[14] = {&acc, &x, &x_scale, &x_zero, &w, &w_scale, &w_zero, &b, &axis, &lo, &hi, &y, &y_scale, &y_zero};
    qrl_rt rt;
    qr_rt_init(&rt);
    k->call(&rt, args);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    cr_assert_eq(y_d[0], 15);

    /* qlinear is element-wise, so it has a tile kernel: its 14 parameters, then c0, rows, cols,
     * acc_rs, y_off, y_rs. A 2 x 3 block of channels 1 and 2 (acc rows padded to 4), into y rows of
     * 5 from element 1; by hand: channel 1 m = 0.5 * 0.5 = 0.25, bias 10; channel 2 m = 0.5, bias -20:
     * round_even((a + bias) * m) + 3, saturated to u8. */
    const qr_fn_desc *t = qr_module_tile(m, k);
    cr_assert(t && t->nparams == 20 && !strcmp(t->name, "qlinear.tile<u8>") && !strcmp(t->params[14].name, "c0"));
    cr_assert(t->is_tile && t->tile_axis_param == 8, "its rows are channels of parameter 8 (axis): %d", t->tile_axis_param);
    cr_assert(!k->is_tile);
    cr_assert(qr_module_tile(m, k8));
    int32_t tacc_d[8] = {-10, 2, 30, 999, -300, 21, 520, 999}, tb_d[3] = {0, 10, -20};
    uint8_t ty_d[10];
    memset(ty_d, 77, sizeof ty_d);
    float tw_scale_d[3] = {0.25f, 0.5f, 1.0f};
    qrl_tview tacc = {.data = tacc_d, .numel = 8, .rank = 1, .dims = {8}};
    qrl_tview tb = {.data = tb_d, .numel = 3, .rank = 1, .dims = {3}};
    qrl_tview ty = {.data = ty_d, .numel = 10, .rank = 1, .dims = {10}};
    qrl_array tw_scale = {tw_scale_d, 3};
    int64_t c0 = 1, rows = 2, cols = 3, acc_rs = 4, y_off = 1, y_rs = 5;
    void *targs[20] = {&tacc, &x, &x_scale, &x_zero, &w, &tw_scale, &w_zero, &tb, &axis, &lo, &hi, &ty, &y_scale,
                       &y_zero, &c0, &rows, &cols, &acc_rs, &y_off, &y_rs};
    qr_rt_init(&rt);
    t->call(&rt, targs);
    cr_assert_eq(rt.failed, 0, "%s", rt.msg);
    static const uint8_t twant[10] = {77, 3, 6, 13, 77, 77, 0, 3, 253, 77};
    for (int i = 0; i < 10; i++)
        cr_assert_eq(ty_d[i], twant[i], "y[%d] = %d, not %d", i, ty_d[i], twant[i]);
    qr_graph *g = qr_graph_new();
    qr_status status;
    cr_assert(qr_module_affine_for(m, g, one_node(g, "Relu"), NULL, NULL, NULL, 0, NULL, &status));
    cr_assert_null(qr_module_affine_for(m, g, one_node(g, "Sigmoid"), NULL, NULL, NULL, 0, NULL, &status));
    qr_graph_free(g);
    qr_module_free(m);

    /* Without the recipe: every calibrator, pattern, kernel and fn. */
    m = compile_text("all.qrl", "import \"calibrators.qrl\"\nimport \"patterns.qrl\"\n"
                                "fn not_called(x: f64) -> f64 { return x }\n", NULL, &st);
    cr_assert_eq(st.reach, 0);
    cr_assert(qr_module_calibrator(m, "percentile"));
    cr_assert(qr_module_pattern(m, "add"));
    cr_assert(qr_module_fn(m, "qadd<u8>"));
    cr_assert(qr_module_fn(m, "not_called"));
    cr_assert(qr_module_fn(m, "bound")); /* a fn only kernels call: registered by the code part */
    qr_module_free(m);
}

/* The kernel part's key covers only the files its kernels come from (and their
 * imports) and which kernels: two recipes reaching the same stdlib kernels
 * share one cache entry for them, and each has its own code part. */
Test(jit, recipes_share_the_cached_kernel_part)
{
    char cache[700];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    qc_options o = {.cache_dir = cache};
    const char *head = "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n";
    char a[1000], b[1000];
    snprintf(a, sizeof a, "%srecipe a {\n  use conv\n  activation = u8 by minmax()\n  weight = i8 symmetric by minmax()\n}\n",
             head);
    snprintf(b, sizeof b, "%srecipe b {\n  use conv\n  activation = u8 by percentile(99.9)\n"
             "  weight = i8 symmetric by minmax()\n}\n", head);
    qc_stats st;
    qr_module_free(compile_text("a.qrl", a, &o, &st));
    cr_assert_eq(st.nparts, 2);
    cr_assert_eq(st.parts[0].cache_hit, 0);
    cr_assert_eq(st.parts[1].cache_hit, 0);
    char kernels_key[40];
    snprintf(kernels_key, sizeof kernels_key, "%s", st.parts[1].key);
    qrl_module *m = compile_text("b.qrl", b, &o, &st);
    cr_assert_eq(st.parts[0].cache_hit, 0, "b's code part is its own");
    cr_assert_eq(st.parts[1].cache_hit, 1, "b compiled the kernels a stored");
    cr_assert_str_eq(st.parts[1].key, kernels_key);
    cr_assert_eq(st.cache_hit, 0);
    cr_assert(qr_module_calibrator(m, "percentile") && qr_module_fn(m, "qlinear<u8>"));
    qr_module_free(m);
    qr_module_free(compile_text("b.qrl", b, &o, &st));
    cr_assert_eq(st.cache_hit, 1);
    cr_assert_eq(tu_count_files(cache), 3);
    /* Another kernel reached: another kernel entry. */
    snprintf(b, sizeof b, "%srecipe b {\n  use conv, add\n  activation = u8 by minmax()\n"
             "  weight = i8 symmetric by minmax()\n}\n", head);
    qr_module_free(compile_text("b.qrl", b, &o, &st));
    cr_assert_eq(st.parts[1].cache_hit, 0);
    cr_assert_str_neq(st.parts[1].key, kernels_key);
}

/* qrl check (check_only) validates a kernel part that is not cached instead
 * of compiling it: the module has no kernels, a marker entry spares the next
 * check. Quantizing compiles the kernels; a check then loads them. */
Test(jit, check_validates_kernels_quantize_compiles_them)
{
    char cache[700];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    const char *src = "import \"calibrators.qrl\"\nimport \"affine.qrl\"\nimport \"patterns.qrl\"\n"
                      "recipe a {\n  use conv\n  activation = u8 by minmax()\n  weight = i8 symmetric by minmax()\n}\n";
    qc_options check = {.cache_dir = cache, .check_only = 1}, full = {.cache_dir = cache};
    qc_stats st;
    qrl_module *m = compile_text("a.qrl", src, &check, &st);
    cr_assert_eq(st.nparts, 2);
    cr_assert_eq(st.parts[1].validated, 1);
    cr_assert_eq(st.cache_hit, 0);
    cr_assert(qr_module_recipe(m, "a"));
    cr_assert_null(qr_module_fn(m, "qlinear<u8>"));
    qr_module_free(m);
    cr_assert_eq(tu_count_files(cache), 2, "the code part and the kernels' marker");
    m = compile_text("a.qrl", src, &check, &st);
    cr_assert_eq(st.parts[1].validated, 2);
    cr_assert_eq(st.cache_hit, 1);
    qr_module_free(m);
    m = compile_text("a.qrl", src, &full, &st);
    cr_assert_eq(st.parts[0].cache_hit, 1);
    cr_assert_eq(st.parts[1].cache_hit, 0);
    cr_assert_eq(st.parts[1].validated, 0);
    cr_assert(qr_module_fn(m, "qlinear<u8>"));
    qr_module_free(m);
    m = compile_text("a.qrl", src, &check, &st);
    cr_assert_eq(st.parts[1].cache_hit, 1);
    cr_assert_eq(st.parts[1].validated, 0);
    cr_assert(qr_module_fn(m, "qlinear<u8>"), "a check loads kernels that are cached");
    qr_module_free(m);
    /* In memory (no cache): validated every time. */
    check.no_cache = 1;
    m = compile_text("a.qrl", src, &check, &st);
    cr_assert_eq(st.parts[1].validated, 1);
    cr_assert_null(qr_module_fn(m, "qlinear<u8>"));
    qr_module_free(m);
}

/* A module compiled for another recipe module ABI is refused before its entry runs (it would read
 * the import table with another layout), naming both ABIs; what it came with is released. */
static int entry_ran, released;
static void abi_entry(qrl_module *m, const qrl_imports *im)
{
    (void)m;
    (void)im;
    entry_ran = 1;
}
static void abi_release(void *h)
{
    (void)h;
    released = 1;
}

Test(jit, a_module_of_another_abi_is_refused)
{
    const int64_t abis[] = {QR_RECIPE_ABI - 1, QR_RECIPE_ABI + 1, -1};
    for (int i = 0; i < 3; i++) {
        qrl_module *m = NULL;
        qr_error e;
        entry_ran = released = 0;
        cr_assert_eq(qr_module_load(abi_entry, abis[i], abi_release, NULL, &m, &e), QR_ERR);
        char want[200];
        snprintf(want, sizeof want, "built for recipe module ABI %lld, and this QRL's is %d", (long long)abis[i],
                 QR_RECIPE_ABI);
        cr_assert(strstr(e.msg, want), "%s", e.msg);
        cr_assert(!entry_ran && released && !m);
    }
    qrl_module *m = NULL;
    qr_error e;
    cr_assert_eq(qr_module_load(abi_entry, QR_RECIPE_ABI, NULL, NULL, &m, &e), QR_OK, "%s", e.msg);
    cr_assert(entry_ran);
    qr_module_free(m);
}

/* A recipe's number settings arrive typed (recipe.h's QR_SETTINGS; not text read back): 0.1 is
 * the double 0.1, a count its integer; a choice arrives as its name. */
Test(jit, number_settings_arrive_typed)
{
    qrl_module *m = compile_text("typed.qrl",
                                 "import \"calibrators.qrl\"\nrecipe r {\n  activation = u8 by minmax()\n"
                                 "  weight = i8 symmetric by minmax(symmetric = true)\n  tolerance = 0.1\n"
                                 "  validate = 0.3\n  measure_samples = 300\n  effect_samples = 4\n  search_samples = 16\n"
                                 "  numerics = tflite\n  rounding = half_away\n  rank = gain\n  outputs = worst\n"
                                 "  validate_from = spread\n  validate_least = 8\n  effect_macs = 2e12\n  search_floor = 4.5\n}\n",
                                 NULL, NULL);
    const qr_recipe *r = qr_module_recipe(m, "r");
    cr_assert(r);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_TOLERANCE)->value, 0.1);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_VALIDATE)->value, 0.3);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_MEASURE_SAMPLES)->value, 300.0);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_EFFECT_SAMPLES)->value, 4.0);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_SEARCH_SAMPLES)->value, 16.0);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_VALIDATE_LEAST)->value, 8.0);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_EFFECT_MACS)->value, 2e12);
    cr_assert_eq(qr_recipe_setting(r, QR_SET_SEARCH_FLOOR)->value, 4.5);
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_NUMERICS)->type, "tflite");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_ROUNDING)->type, "half_away");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_RANK)->type, "gain");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_OUTPUTS)->type, "worst");
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_VALIDATE_FROM)->type, "spread");
    cr_assert_null(qr_recipe_setting(r, QR_SET_BLOCK));
    cr_assert_str_eq(qr_recipe_setting(r, QR_SET_TOLERANCE)->key, "tolerance");
    qr_module_free(m);
}

/* A choice outside its list names the list's values; an unknown key far from every one lists them
 * all (the table's order). */
Test(jit, setting_errors_name_what_the_table_allows)
{
    char path[600], cmd[1400], *log;
    write_src("bad.qrl",
              "import \"calibrators.qrl\"\nrecipe r {\n  activation = u8 by minmax()\n  weight = i8 by minmax()\n"
              "  numerics = tensorrt\n  rounding = up\n  zzzzzzzz = 1\n  rank = fisher\n  outputs = mean\n"
              "  validate_from = middle\n  validate_least = 0\n  effect_macs = 0.5\n  steps = always\n"
              "  search_floor = low\n}\n",
              path, sizeof path);
    snprintf(cmd, sizeof cmd, "QRL_STDLIB='%s/stdlib' %s check --no-cache '%s' 2>&1", tu_root(), tu_qrl(), path);
    cr_assert_eq(tu_run(cmd, &log), 1, "%s", log);
    cr_assert(strstr(log, ":5:14: error: numerics is onnx, tflite or pytorch\n"), "%s", log);
    cr_assert(strstr(log, ":6:14: error: rounding is half_even or half_away\n"), "%s", log);
    cr_assert(strstr(log, ":8:10: error: rank is effect, gain, probe, probe_pairs or grad\n"), "%s", log);
    cr_assert(strstr(log, ":9:13: error: outputs is pooled or worst\n"), "%s", log);
    cr_assert(strstr(log, ":10:19: error: validate_from is end, spread or stagger\n"), "%s", log);
    cr_assert(strstr(log, ":13:11: error: steps is skip or measure\n"), "%s", log);
    cr_assert(strstr(log, ":14:18: error: search_floor is a number of dB: search_floor = 5\n"), "%s", log);
    cr_assert(strstr(log, ":11:20: error: validate_least is a number of samples, 1 to 1000000: validate_least = 8\n"),
              "%s", log);
    cr_assert(strstr(log, ":12:17: error: effect_macs is a number of multiply-accumulates, at least 1: effect_macs = "
                          "2e12\n"),
              "%s", log);
    cr_assert(strstr(log, ":7:3: error: unknown recipe setting 'zzzzzzzz' (activation, weight, bias, accumulate, "
                          "numerics, fallback, input, output, tolerance, rounding, transform, validate, "
                          "measure_samples, effect_samples, effect_macs, block, rank, order, outputs, overflow, candidate, "
                          "budget, compute, candidate_activation, search_samples, bias_qparams, narrow_range, "
                          "pattern_priority, samples, calibrate, validate_from, validate_least, speculate, "
                          "calibrate_figure_samples, calibrate_samples, steps, probe_runs, probe_rounds, "
                          "probe_hold, grad_directions, grad_exact, grad_exact_below, fallback_activation, fallback_calibrate, search_floor, grad_exact_near, grad_exact_kept_below, grad_exact_at, grad_peak_within, grad_segments, search_start, idle)\n"),
              "%s", log);
    free(log);
}

/* samples = F's fns in stdlib/qparams.qrl, on samples whose SQNRs are chosen (x2 = e2 * 10^(dB/10),
 * each with its own e2, in no order): 37, 10, 55, 20, 46, 28 and 0 dB, and one sample with neither
 * energy nor error, which is skipped. By hand: the mean 196 / 7 = 28; sorted 0 10 20 28 37 46 55,
 * numpy's linear quantiles at (n - 1) q: the median 28, the 10th percentile at 0.6, 6, the 25th at
 * 1.5, 15; the worst 0; pooled, the sums' ratio; normalized, 7 over the sum of 10^(-dB/10);
 * balanced, 8 over the sum of each error over its energy or 1% of the mean energy if more. A sample without error is inf (200 dB in a mean and
 * between two values of a quantile),
 * error on a zero signal -inf; no sample to judge, or none with an error, inf. The fns may write over
 * their arrays, so each call gets fresh ones. */
Test(jit, sample_reductions_as_numpy)
{
    qrl_module *m = compile_text("s.qrl",
                                 "import \"qparams.qrl\"\n"
                                 "fn q25(x2: f64[], e2: f64[]) -> f64 {\n  return sample_quantile(x2, e2, 0.25)\n}\n"
                                 "fn floor0(x2: f64[], e2: f64[]) -> f64 {\n  return sample_floored(x2, e2, 0.0)\n}\n"
                                 "fn floor9(x2: f64[], e2: f64[]) -> f64 {\n  return sample_floored(x2, e2, 9.0)\n}\n",
                                 NULL, NULL);
    typedef double (*red)(qrl_rt *, qrl_array *, qrl_array *);
    const char *names[] = {"sample_mean", "sample_median", "sample_p10",      "q25",    "sample_worst",
                           "sample_pooled", "sample_normalized", "sample_balanced", "floor0", "floor9"};
    red f[10];
    for (int i = 0; i < 10; i++)
        f[i] = (red)fn(m, names[i], "f64(f64[],f64[])");
    static const double db[8] = {37, 10, 55, 20, 0, 46, 28, 0}, e2[8] = {2, 0.5, 1, 3, 7, 1, 0.25, 0};
    double x2[8], sx = 0, se = 0, ratio = 0, bal = 0;
    for (int i = 0; i < 8; i++) {
        x2[i] = i == 7 ? 0 : e2[i] * pow(10, db[i] / 10);
        sx += x2[i], se += e2[i];
        ratio += i == 7 ? 0 : pow(10, -db[i] / 10);
    }
    for (int i = 0; i < 8; i++) /* balanced: each over its energy, at least 1% of the mean's (8 samples) */
        bal += e2[i] / fmax(x2[i], 0.01 * sx / 8);
    /* floor 0 is normalized; at 9 times the mean energy (above the loudest sample's) every error
     * counts alike: the pooled figure plus 10 log10(9) */
    const double want[10] = {28, 28, 6, 15, 0, 10 * log10(sx / se), 10 * log10(7 / ratio), 10 * log10(8 / bal),
                             10 * log10(7 / ratio), 10 * log10(9 * sx / se)};
    for (int i = 0; i < 10; i++) {
        double a[8], b[8];
        memcpy(a, x2, sizeof a), memcpy(b, e2, sizeof b);
        qrl_array xa = {a, 8}, ea = {b, 8};
        qrl_rt rt;
        qr_rt_init(&rt);
        double got = f[i](&rt, &xa, &ea);
        cr_assert_eq(qr_rt_status(&rt, &(qr_error){0}), QR_OK, "%s", names[i]);
        cr_assert_float_eq(got, want[i], 1e-9, "%s: %.12g, not %.12g", names[i], got, want[i]);
    }
    /* the edges: {5, 0} exact and {1, 1} 0 dB; {0, 1} -inf and {1, 1}; all exact; one nothing; none */
    static const double ex[4][2][2] = {{{5, 1}, {0, 1}}, {{0, 1}, {1, 1}}, {{5, 3}, {0, 0}}, {{0, 0}, {0, 0}}};
    static const int en[4] = {2, 2, 2, 1};
    const double inf = INFINITY, edge[5][10] = {
                                     {100, 100, 20, 50, 0, 10 * log10(6.0), 10 * log10(2.0), 10 * log10(2.0),
                                      10 * log10(2.0), 10 * log10(54.0)},
                                     {-inf, -inf, -inf, -inf, -inf, 10 * log10(0.5), -inf, 10 * log10(2 / (1 / 0.005 + 1)),
                                      -inf, 10 * log10(4.5)},
                                     {inf, inf, inf, inf, inf, inf, inf, inf, inf, inf},
                                     {inf, inf, inf, inf, inf, inf, inf, inf, inf, inf},
                                     {inf, inf, inf, inf, inf, inf, inf, inf, inf, inf}};
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 10; i++) {
            double a[2] = {0}, b[2] = {0};
            for (int s = 0; k < 4 && s < en[k]; s++)
                a[s] = ex[k][0][s], b[s] = ex[k][1][s];
            qrl_array xa = {a, k < 4 ? en[k] : 0}, ea = {b, k < 4 ? en[k] : 0};
            qrl_rt rt;
            qr_rt_init(&rt);
            double got = f[i](&rt, &xa, &ea);
            cr_assert(got == edge[k][i] || fabs(got - edge[k][i]) < 1e-9, "edge %d, %s: %g, not %g", k, names[i], got,
                      edge[k][i]);
        }
    qr_module_free(m);
}

/* A lower bound's cases against numpy (the cases' want) and against the figure it bounds (ref): never
 * above it, equal to it in cases 2 and 4 (one sample; no spread). Case 0 is filled here with
 * sample_reductions_as_numpy's 8 samples (one with neither energy nor error). */
typedef struct bound_case {
    int n;
    double x2[8], e2[8], want;
} bound_case;

static void check_lower_bound(const char *lower_name, const char *ref_name, bound_case *c, size_t nc)
{
    qrl_module *m = compile_text("s.qrl", "import \"qparams.qrl\"\n", NULL, NULL);
    typedef double (*red)(qrl_rt *, qrl_array *, qrl_array *);
    red lower = (red)fn(m, lower_name, "f64(f64[],f64[])");
    red ref = (red)fn(m, ref_name, "f64(f64[],f64[])");
    static const double db[8] = {37, 10, 55, 20, 0, 46, 28, 0};
    double e8[8] = {2, 0.5, 1, 3, 7, 1, 0.25, 0};
    for (int i = 0; i < 8; i++) {
        c[0].x2[i] = i == 7 ? 0 : e8[i] * pow(10, db[i] / 10);
        c[0].e2[i] = e8[i];
    }
    for (size_t k = 0; k < nc; k++) {
        double a[8], b[8];
        memcpy(a, c[k].x2, sizeof a), memcpy(b, c[k].e2, sizeof b);
        qrl_array xa = {a, c[k].n}, ea = {b, c[k].n};
        qrl_rt rt;
        qr_rt_init(&rt);
        double got = lower(&rt, &xa, &ea);
        cr_assert_eq(qr_rt_status(&rt, &(qr_error){0}), QR_OK, "%s case %zu", lower_name, k);
        cr_assert(got == c[k].want || fabs(got - c[k].want) < 1e-9, "%s case %zu: %.12g, not %.12g", lower_name, k,
                  got, c[k].want);
        memcpy(a, c[k].x2, sizeof a), memcpy(b, c[k].e2, sizeof b);
        double r_db = ref(&rt, &xa, &ea);
        cr_assert(got <= r_db || got == r_db, "%s case %zu: %g above %s's %g", lower_name, k, got, ref_name, r_db);
        if (k == 2 || k == 4)
            cr_assert(fabs(got - r_db) < 1e-9, "%s case %zu: %g, %s %g", lower_name, k, got, ref_name, r_db);
    }
    qr_module_free(m);
}

/* sample_balanced_lower (stdlib/qparams.qrl) is sample_balanced's mean ratio (each sample's error over
 * its energy, at least 1% of the mean sample's) at its one-sided 95% upper bound, mean + 1.645
 * standard errors (standard deviation with n - 1, over sqrt(n)), in dB. The figures are numpy's
 * (np.maximum(x2, 0.01 * x2.mean()), r.std(ddof=1)): sample_reductions_as_numpy's 8 samples (one
 * with neither energy nor error) 22.1259579657; {0.01, 0.03} over 1, by hand: mean 0.02, standard
 * error 0.01, -10 log10(0.03645) = 14.3830246735; one sample, no spread: sample_balanced's,
 * -10 log10(0.0025); a zero-energy sample with error judged against 1% of the mean (0.5):
 * ratios {0.01, 1, 0.004}, 0.5428407797; equal ratios: no margin; all errors zero: inf; error on no
 * signal at all: -inf; no sample: inf. */
Test(jit, sample_balanced_lower_as_numpy)
{
    const double inf = INFINITY;
    bound_case c[] = {
        {8, {0}, {0}, 22.12595796565005},
        {2, {1, 1}, {0.01, 0.03}, 14.383024673460065},
        {1, {4}, {0.01}, 26.020599913279625},
        {3, {100, 0, 50}, {1, 0.5, 0.2}, 0.542840779723877},
        {4, {1, 2, 4, 8}, {0.01, 0.02, 0.04, 0.08}, 20.0},
        {2, {5, 3}, {0, 0}, inf},
        {2, {0, 0}, {0, 1}, -inf},
        {0, {0}, {0}, inf},
    };
    check_lower_bound("sample_balanced_lower", "sample_balanced", c, sizeof c / sizeof *c);
}

/* sample_pooled_lower (stdlib/qparams.qrl) is the pooled ratio R = sum e2 / sum x2 at its one-sided
 * 95% upper bound: R + 1.645 standard errors of the ratio estimator (the residuals e2 - R x2, their
 * standard deviation with n - 1, over sqrt(n) and over the mean energy), in dB. The figures are
 * numpy's (r = e.sum() / x.sum(); r + 1.645 * (e - r * x).std(ddof=1) / sqrt(n) / x.mean()):
 * sample_reductions_as_numpy's 8 samples 39.6712916357 (pooled 43.95); {0.01, 0.03} over 1, by
 * hand: R 0.02, residuals -+0.01, standard error 0.01, -10 log10(0.03645); one sample, no spread:
 * the pooled figure, -10 log10(0.0025); a zero-energy sample with error counts by its error,
 * 17.0220359527; errors proportional to the energies: no margin, 20 dB; one loud sample with ten
 * times the others' error ratio, 19.8732853981 (pooled 20.12; sample_balanced_lower 21.58: the quiet
 * ones carry it); all errors zero: inf; error and no energy at all: -inf; no sample: inf. */
Test(jit, sample_pooled_lower_as_numpy)
{
    const double inf = INFINITY;
    bound_case c[] = {
        {8, {0}, {0}, 39.67129163566335},
        {2, {1, 1}, {0.01, 0.03}, 14.383024673460065},
        {1, {4}, {0.01}, 26.020599913279625},
        {3, {100, 0, 50}, {1, 0.5, 0.2}, 17.0220359526805},
        {4, {1, 2, 4, 8}, {0.01, 0.02, 0.04, 0.08}, 20.0},
        {4, {1, 1, 1, 100}, {0.001, 0.001, 0.001, 1}, 19.873285398115407},
        {2, {5, 3}, {0, 0}, inf},
        {2, {0, 0}, {0, 1}, -inf},
        {0, {0}, {0}, inf},
    };
    check_lower_bound("sample_pooled_lower", "sample_pooled", c, sizeof c / sizeof *c);
}

/* l2_checked: l2's range kept only where, fitted on the even samples it has no more error on the odd
 * ones than minmax's (and the other way round), else minmax's. Against tools/ref_l2_checked.py (the
 * rule again in numpy on tools/ref_l2.py's search, and the same decision from the raw values'
 * errors): 16 samples of Laplace values (both signs), observed as calibration does, in batches of 4
 * whose x.first and x.samples say which samples they hold, each into a fresh state then merged, and
 * again merged in another order (a second worker's batches first: the same qparams). "holds": every
 * sample alike, l2 clips the tails and is kept; "tail": samples 1 and 5 twice as loud, so the even
 * half's fit clips what the odd half reaches, and minmax's range is chosen though l2's of all clips. */
static void l2_checked_case(qrl_module *m, const float *x, int64_t samples, int64_t per, qr_dtype dt, int symmetric,
                            const char *tname, const char *what, int want_l2)
{
    char path[700], cmd[1400], *log;
    snprintf(path, sizeof path, "%s/l2c_%s.npy", dir, what);
    qr_tensor all = {.dtype = QR_F32, .ndim = 2, .dims = {samples, per}, .data = (float *)x};
    qr_error e;
    cr_assert_eq(qr_npy_write(path, &all, &e), QR_OK, "%s", e.msg);
    qrl_qtype qt = qr_qtype_of(dt, 0, -1);
    qt.symmetric = symmetric;
    qrl_qparams qp[2];
    for (int order = 0; order < 2; order++) {
        qr_calib *c;
        cr_assert_eq(qr_calib_new(m, "l2_checked", 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
        for (int64_t k = 0; k < samples / 4; k++) {
            int64_t b = order ? (k + 2) % (samples / 4) : k; /* order 1: batches 2.. then 0, 1 */
            qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {4, per}, .data = (float *)x + b * 4 * per};
            qr_calib *f;
            cr_assert_eq(qr_calib_fresh(c, &f, &e), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_calib_observe_samples(f, &t, 4 * b, 4, &e), QR_OK, "%s", e.msg);
            cr_assert_eq(qr_calib_merge(c, f, &e), QR_OK, "%s", e.msg);
            qr_calib_free(f);
        }
        cr_assert_eq(qr_calib_solve(c, &qt, &qp[order], &e), QR_OK, "%s", e.msg);
        qr_calib_free(c);
    }
    cr_assert_eq(qp[1].scale, qp[0].scale, "%s %s: %.17g merged in another order, %.17g", what, tname, qp[1].scale,
                 qp[0].scale);
    cr_assert_eq(qp[1].zero, qp[0].zero);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/ref_l2_checked.py %s 2048 16 %s 0.25 0", tu_root(), path,
             tname);
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    double ref_scale, l2_scale, mm_scale;
    long long ref_zero;
    int chose, raw_chose;
    cr_assert_eq(sscanf(log, "%lf %lld %d %d %lf %lf", &ref_scale, &ref_zero, &chose, &raw_chose, &l2_scale, &mm_scale),
                 6, "%s", log);
    free(log);
    cr_assert_float_eq(qp[0].scale, ref_scale, 1e-9 * ref_scale, "%s %s: QRL scale %.17g, reference %.17g", what,
                       tname, qp[0].scale, ref_scale);
    cr_assert_eq(qp[0].zero, ref_zero, "%s %s: QRL zero %lld, reference %lld", what, tname, (long long)qp[0].zero,
                 ref_zero);
    cr_assert_eq(chose, want_l2, "%s %s: the reference chose %s", what, tname, chose ? "l2" : "minmax");
    cr_assert_eq(raw_chose, chose, "%s %s: the raw values' errors decide otherwise", what, tname);
    cr_assert(l2_scale < 0.9 * mm_scale, "%s %s: l2's scale %.6g, minmax's %.6g: l2 clips nothing to judge", what,
              tname, l2_scale, mm_scale);
}

Test(jit, l2_checked_keeps_l2_only_where_it_holds_on_the_other_half, .timeout = 240)
{
    qrl_module *m = stdlib_calibrators();
    enum { S = 16, PER = 20000 };
    static float x[S * PER];
    unsigned seed = 43;
    for (int i = 0; i < S * PER; i++) {
        seed = seed * 1664525u + 1013904223u;
        double u = ((seed >> 8) & 0xffffff) / 16777216.0 * 0.999999 + 0.0000005;
        x[i] = (float)(u < 0.5 ? log(2 * u) : -log(2 - 2 * u));
    }
    l2_checked_case(m, x, S, PER, QR_U8, 0, "u8", "holds", 1);
    l2_checked_case(m, x, S, PER, QR_I8, 1, "i8s", "holds", 1);
    for (int s = 1; s < S; s += 4) /* samples 1 and 5: louder */
        for (int i = 0; s <= 5 && i < PER; i++)
            x[s * PER + i] *= 2.0f;
    l2_checked_case(m, x, S, PER, QR_U8, 0, "u8", "tail", 0);
    l2_checked_case(m, x, S, PER, QR_I8, 1, "i8s", "tail", 0);
    /* a weight (one observe, no samples): one half holds nothing, minmax's range */
    qr_calib *c;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "l2_checked", 0, NULL, NULL, &c, &e), QR_OK, "%s", e.msg);
    qr_tensor w = vec(x, PER);
    cr_assert_eq(qr_calib_observe(c, &w, &e), QR_OK, "%s", e.msg);
    qrl_qtype i8 = qr_qtype_of(QR_I8, 0, -1);
    i8.symmetric = 1;
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &i8, &qp, &e), QR_OK, "%s", e.msg);
    double amax = 0;
    for (int i = 0; i < PER; i++)
        amax = fmax(amax, fabs(x[i]));
    cr_assert_float_eq(qp.scale, amax / 127.5, 1e-12, "a weight: %.17g, minmax's %.17g", qp.scale, amax / 127.5);
    qr_calib_free(c);
    qr_module_free(m);
}

/* x.first and x.samples as observe sees them, and h.add(x, from, to) over a part of x: the counts
 * of the part alone; a part outside x is a runtime error, not a read past it. */
Test(jit, observe_sees_its_samples_and_adds_part_of_a_tensor)
{
    qrl_module *m = compile_text("part.qrl",
                                 "calibrator part(from: i64 = 0, to: i64 = 0) {\n"
                                 "  state h: histogram(8)\n"
                                 "  state first: i64 = -1\n"
                                 "  state samples: i64 = -1\n"
                                 "  observe(x: tensor<f32>) {\n"
                                 "    first = x.first\n"
                                 "    samples = x.samples\n"
                                 "    h.add(x, from, to)\n"
                                 "  }\n"
                                 "  merge(o) { h.merge(o.h) }\n"
                                 "  solve(t: qtype) -> qparams { return qparams(h.count + 0.5 * h.max, first * 10 + samples) }\n"
                                 "}\n",
                                 NULL, NULL);
    float x[6] = {-1, 2, 3, 4, -5, 6};
    qr_tensor t = {.dtype = QR_F32, .ndim = 2, .dims = {3, 2}, .data = x};
    const char *names[2] = {"from", "to"};
    const double vals[2] = {2, 4}, bad[2] = {2, 7};
    qr_calib *c;
    qr_error e;
    cr_assert_eq(qr_calib_new(m, "part", 2, names, vals, &c, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe_samples(c, &t, 6, 3, &e), QR_OK, "%s", e.msg);
    qrl_qtype u8 = qr_qtype_of(QR_U8, 0, -1);
    qrl_qparams qp;
    cr_assert_eq(qr_calib_solve(c, &u8, &qp, &e), QR_OK, "%s", e.msg);
    cr_assert_float_eq(qp.scale, 2 + 0.5 * 4, 1e-12, "count and max of x[2 .. 4]: %g", qp.scale); /* 3 and 4 */
    cr_assert_eq(qp.zero, 63, "first 6, samples 3: %lld", (long long)qp.zero);
    qr_calib_free(c);
    cr_assert_eq(qr_calib_new(m, "part", 2, names, bad, &c, &e), QR_OK, "%s", e.msg);
    cr_assert_eq(qr_calib_observe(c, &t, &e), QR_ERR);
    cr_assert(strstr(e.msg, "index 7 is out of bounds (length 6)"), "%s", e.msg);
    qr_calib_free(c);
    qr_module_free(m);
}
