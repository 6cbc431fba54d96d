/* Large and hostile recipe files (QRL-G items 3 and 4): checking stays linear
 * (200,000 lets took minutes when each name was found by a scan), and a unit
 * too large for libgccjit is refused before it is compiled (20,000 small
 * functions took 47 s and 2.4 GB; 80,000 ran the machine out of memory).
 * Time bounds are generous for CI and ASan: the quadratic checker took
 * minutes, the linear one well under a second. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "testutil.h"

#define BOUND_S 20.0

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A growing text buffer. */
typedef struct { char *p; size_t n, cap; } buf;

static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    cr_assert(k >= 0 && (size_t)k < sizeof tmp);
    if (b->n + (size_t)k + 1 > b->cap) {
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->n, tmp, (size_t)k + 1);
    b->n += (size_t)k;
}

static qc_unit *load(const buf *b)
{
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    cr_assert(u);
    cr_assert(qc_unit_load_text(u, "big.qrl", b->p, b->n));
    return u;
}

static char *diags(qc_unit *u)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ql_diags_print(&u->diags, f);
    fclose(f);
    return text;
}

/* Loads and checks; asserts it is clean and within the bound. */
static qc_unit *check_clean(const buf *b, const char *what)
{
    double t0 = now();
    qc_unit *u = load(b);
    qc_check(u);
    double s = now() - t0;
    char *d = diags(u);
    cr_assert_eq(u->diags.errors, 0, "%s: %s", what, d);
    free(d);
    cr_assert_lt(s, BOUND_S, "%s: load and check took %.1f s", what, s);
    return u;
}

/* Compiles (in memory); asserts the refusal names the limit, quickly. */
static void assert_refused(qc_unit *u, const char *what, const char *expect)
{
    double t0 = now();
    qrl_module *m = qc_compile(u, &(qc_options){.no_cache = 1}, NULL);
    double s = now() - t0;
    cr_assert_null(m, "%s compiled", what);
    char *d = diags(u);
    cr_assert(strstr(d, "big.qrl: error: too much code to compile") && strstr(d, expect), "%s: %s", what, d);
    free(d);
    cr_assert_lt(s, 5.0, "%s: the refusal took %.1f s", what, s);
}

Test(large_recipes, many_lets_check_linear_and_refused, .timeout = 300)
{
    buf b = {0};
    put(&b, "fn k(x: f32) -> f32 {\n");
    for (int i = 0; i < 200000; i++)
        put(&b, "  let v%d = x + %d.0\n", i, i);
    put(&b, "  return v199999 + v0\n}\n");
    qc_unit *u = check_clean(&b, "200,000 lets");
    assert_refused(u, "200,000 lets", "syntax nodes with its imports, the limit is 400000");
    qc_unit_free(u);
    free(b.p);
}

Test(large_recipes, many_functions_check_linear_and_refused, .timeout = 300)
{
    buf b = {0};
    put(&b, "fn g0(x: f32) -> f32 { return x }\n");
    for (int i = 1; i < 50000; i++)
        put(&b, "fn g%d(x: f32) -> f32 { return g%d(x) + 1.0 }\n", i, i - 1);
    qc_unit *u = check_clean(&b, "50,000 functions");
    assert_refused(u, "50,000 functions", "syntax nodes with its imports, the limit is 400000");
    qc_unit_free(u);
    free(b.p);
}

/* Few nodes, many functions: each costs libgccjit about 100 KB. */
Test(large_recipes, too_many_items_refused)
{
    buf b = {0};
    for (int i = 0; i < 2500; i++)
        put(&b, "fn g%d(x: f32) -> f32 { return x }\n", i);
    qc_unit *u = check_clean(&b, "2,500 functions");
    assert_refused(u, "2,500 functions", "items with its imports, the limit is 2000");
    qc_unit_free(u);
    free(b.p);
}

/* Many lets in many nested blocks, with shadowing across scopes: the index
 * must find the innermost definition, as the scan did. */
Test(large_recipes, shadowing_through_indexed_scopes)
{
    buf b = {0};
    put(&b, "fn k(x: i64) -> i64 {\n  var s = 0\n");
    for (int i = 0; i < 40; i++)
        put(&b, "  let a%d = %d\n", i, i);
    put(&b, "  if x > 0 {\n");
    for (int i = 0; i < 40; i++)
        put(&b, "    let a%d = %d.5\n", i, i);
    put(&b, "    s = s + a3\n  }\n  return s\n}\n");
    qc_unit *u = load(&b);
    qc_check(u);
    char *d = diags(u);
    /* a3 inside the block is the f64 one: adding it to an i64 var is an error */
    cr_assert(u->diags.errors > 0 && strstr(d, "big.qrl:84:9: error: mismatched types i64 and f64"), "%s", d);
    free(d);
    qc_unit_free(u);
    free(b.p);
}

Test(large_recipes, duplicate_item_found_by_the_index)
{
    buf b = {0};
    for (int i = 0; i < 100; i++)
        put(&b, "fn g%d(x: f32) -> f32 { return x }\n", i);
    put(&b, "fn g57(x: f32) -> f32 { return x }\n");
    qc_unit *u = load(&b);
    qc_check(u);
    char *d = diags(u);
    cr_assert(strstr(d, "big.qrl:101:") && strstr(d, "'g57' is defined twice") &&
              strstr(d, "big.qrl:58:"), "%s", d);
    free(d);
    qc_unit_free(u);
    free(b.p);
}

/* Nested calls of a generic fn: each call types its arguments to learn T, so
 * typing them again at every level took 2^depth (24 levels: 2.6 s); an
 * argument typed already keeps its type. */
Test(large_recipes, nested_generic_calls_check_in_polynomial_time, .timeout = 60)
{
    buf b = {0};
    put(&b, "fn id<T: u8 | i8 | i16 | i32>(v: T) -> T {\n  return v\n}\nfn f(x: i8) -> i8 {\n  return ");
    for (int i = 0; i < 150; i++)
        put(&b, "id(");
    put(&b, "x");
    for (int i = 0; i < 150; i++)
        put(&b, ")");
    put(&b, "\n}\n");
    qc_unit *u = check_clean(&b, "150 nested generic calls");
    qc_unit_free(u);
    free(b.p);
}

/* Each instance copies its generic's code: 70 generics of 64 instances would
 * be 4480 copies; the 65th generic is refused, once each after it. */
Test(large_recipes, generic_instances_bounded_per_unit)
{
    buf b = {0};
    for (int i = 0; i < 70; i++)
        put(&b, "fn g%d<T: u8 | i8 | i16 | u16 | i32 | i64 | f32 | f64, U: u8 | i8 | i16 | u16 | i32 | i64 | f32 | f64>"
                "(x: T, y: U) -> f64 {\n  return f64(x) + f64(y)\n}\n", i);
    qc_unit *u = load(&b);
    qc_check(u);
    char *d = diags(u);
    cr_assert_eq(u->diags.errors, 6, "%s", d);
    cr_assert(strstr(d, "big.qrl:193:4: error: 'g64' has 64 instances, which make 4160 with the generics before it; "
                        "a recipe with its imports has at most 4096"), "%s", d);
    free(d);
    qc_unit_free(u);
    free(b.p);
}
