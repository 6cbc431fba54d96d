#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "check.h"
#include "cpu.h"
#include "jit.h"
#include "sha256.h"

#ifndef QRL_VERSION
#define QRL_VERSION "dev"
#endif

#ifndef QRL_JIT_ID
#define QRL_JIT_ID "dev"
#endif

#define KEY_SYMBOL "qrl_module_key"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Strings with their terminating NUL, so that concatenations stay apart. */
static void hash_str(qc_sha256_ctx *h, const char *s)
{
    qc_sha256_update(h, s, strlen(s) + 1);
}

/* SHA-256 rather than a fast hash: two recipes with one key would share a
 * cache entry, so the key must not collide even for crafted sources. */
static void unit_key(const qc_unit *u, const qc_options *o, char *key, size_t n)
{
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    char buf[128];
    snprintf(buf, sizeof buf, "qrl %s jit %s abi %d gccjit %d.%d.%d opt %d", QRL_VERSION, QRL_JIT_ID, QR_RECIPE_ABI,
             gcc_jit_version_major(), gcc_jit_version_minor(), gcc_jit_version_patchlevel(), o ? o->opt_level : 0);
    hash_str(&h, buf);
    hash_str(&h, qc_cpu_flags());
    for (int i = 0; i < u->nfiles; i++) {
        hash_str(&h, u->files[i]->real);
        snprintf(buf, sizeof buf, "%zu", u->files[i]->src->len);
        hash_str(&h, buf);
        qc_sha256_update(&h, u->files[i]->src->text, u->files[i]->src->len);
    }
    unsigned char d[QC_SHA256_LEN];
    qc_sha256_final(&h, d);
    /* 128 bits of it: the name stays short and collisions stay out of reach. */
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    snprintf(key, n, "%s", hex);
}

static void release_result(void *r)
{
    gcc_jit_result_release(r);
}

/* Loads a shared object from verified bytes; NULL when it does not load or
 * does not carry key (reported to u->diags only when report is set). */
static qrl_module *load_so(qc_unit *u, const unsigned char *so, size_t len, const char *key, int report)
{
    char err[512];
    qc_dl *h = qc_dl_open(so, len, err, sizeof err);
    if (!h) {
        if (report)
            ql_error_file(&u->diags, NULL, "cannot load the compiled module: %s", err);
        return NULL;
    }
    const char *(*keyfn)(void) = (const char *(*)(void))qc_dl_sym(h, KEY_SYMBOL);
    qrl_module_entry_fn entry = (qrl_module_entry_fn)qc_dl_sym(h, QRL_MODULE_ENTRY);
    if (!keyfn || !entry || strcmp(keyfn(), key) != 0) {
        qc_dl_close(h);
        if (report)
            ql_error_file(&u->diags, NULL, "the compiled module is not the one asked for (key %s)", key);
        return NULL;
    }
    qrl_module *m;
    qr_error e;
    if (qr_module_load(entry, qc_dl_close, h, &m, &e) != QR_OK) {
        ql_error_file(&u->diags, NULL, "%s", e.msg);
        return NULL;
    }
    return m;
}

typedef enum { BYTES_OK, BYTES_JIT_ERROR, BYTES_NO_TEMP } bytes_status;

/* Compiles c into a shared object in a fresh private folder (mkdtemp: 0700,
 * an unguessable name), reads its bytes and removes it. libgccjit writes the
 * output by path, so the path must be one nobody else can prepare. */
static bytes_status compile_to_bytes(qc_unit *u, gcc_jit_context *c, unsigned char **so, size_t *len)
{
    const char *t = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/qrl-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/qrl-XXXXXX");
        if (!mkdtemp(dir))
            return BYTES_NO_TEMP;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/module.so", dir);
    gcc_jit_context_compile_to_file(c, GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY, path);
    const char *err = gcc_jit_context_get_first_error(c);
    bytes_status r = BYTES_OK;
    if (err) {
        ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s", err);
        r = BYTES_JIT_ERROR;
    } else if (qc_read_file(AT_FDCWD, path, (size_t)1 << 30, so, len) != 0) {
        ql_error_file(&u->diags, path, "cannot read the compiled module: %s", strerror(errno));
        r = BYTES_JIT_ERROR;
    }
    unlink(path);
    rmdir(dir);
    return r;
}

/* const char *qrl_module_key(void) { return "<key>"; } */
static void add_key_fn(gcc_jit_context *c, const char *key)
{
    gcc_jit_type *t = gcc_jit_context_get_type(c, GCC_JIT_TYPE_CONST_CHAR_PTR);
    gcc_jit_function *f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, t, KEY_SYMBOL, 0, NULL, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(f, NULL);
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_new_string_literal(c, key));
}

static long count_nodes(const ql_node *n)
{
    if (!n)
        return 0;
    long k = 1 + count_nodes(n->a) + count_nodes(n->b) + count_nodes(n->c) + count_nodes(n->d);
    for (int i = 0; i < n->nkids; i++)
        k += count_nodes(n->kids[i]);
    return k;
}

/* libgccjit's time and memory grow with the code it is given: about 1 KB per
 * syntax node and 100 KB per function at -O2 (20,000 small functions took 47 s
 * and 2.4 GB). A shared recipe must not take the machine, so the unit is
 * measured first; the stdlib with a recipe is about 12,000 nodes and 130 items. */
#define QC_MAX_JIT_NODES 400000L
#define QC_MAX_JIT_ITEMS 2000

static int too_big(qc_unit *u)
{
    long nodes = 0;
    for (int i = 0; i < u->nitems; i++)
        nodes += count_nodes(u->items[i]->decl);
    if (nodes <= QC_MAX_JIT_NODES && u->nitems <= QC_MAX_JIT_ITEMS)
        return 0;
    const char *path = u->nfiles ? u->files[u->nfiles - 1]->src->path : NULL;
    if (nodes > QC_MAX_JIT_NODES)
        ql_error_file(&u->diags, path, "too much code to compile: %ld syntax nodes with its imports, the limit is %ld",
                      nodes, QC_MAX_JIT_NODES);
    else
        ql_error_file(&u->diags, path, "too much code to compile: %d items with its imports, the limit is %d",
                      u->nitems, QC_MAX_JIT_ITEMS);
    return 1;
}

qrl_module *qc_compile(qc_unit *u, const qc_options *o, qc_stats *st)
{
    qc_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    st->cache_hit = -1;
    unit_key(u, o, st->key, sizeof st->key);
    qc_cache cache;
    int cached = !(o && o->no_cache) && qc_cache_open(&cache, o ? o->cache_dir : NULL, &u->diags);
    if (cached) {
        double t0 = now_ms();
        unsigned char *so;
        size_t len;
        qc_entry_status es = qc_cache_get(&cache, st->key, &so, &len, &u->diags);
        if (es == QC_ENTRY_OK) {
            qrl_module *m = load_so(u, so, len, st->key, 0);
            free(so);
            if (m || u->diags.errors) {
                st->t_load = now_ms() - t0;
                st->cache_hit = m ? 1 : 0;
                qc_cache_close(&cache);
                return m;
            }
            es = QC_ENTRY_BAD; /* verified, yet not this key's module: rebuilt below */
        }
        st->cache_rebuilt = es == QC_ENTRY_BAD;
        st->cache_hit = 0;
    }
    if (too_big(u)) {
        if (cached)
            qc_cache_close(&cache);
        return NULL;
    }
    double t0 = now_ms();
    gcc_jit_context *c = qc_jit_build(u, &(qc_jit_opts){.opt_level = o ? o->opt_level : 0});
    if (!c) {
        if (cached)
            qc_cache_close(&cache);
        return NULL;
    }
    add_key_fn(c, st->key);
    qrl_module *m = NULL;
    bytes_status bs = BYTES_NO_TEMP;
    if (cached) {
        unsigned char *so = NULL;
        size_t len = 0;
        bs = compile_to_bytes(u, c, &so, &len);
        st->t_jit = now_ms() - t0;
        if (bs == BYTES_OK) {
            /* A cache that cannot be written costs the next run time, nothing else. */
            qc_cache_put(&cache, st->key, so, len);
            double t1 = now_ms();
            m = load_so(u, so, len, st->key, 1);
            st->t_load = now_ms() - t1;
        }
        free(so);
        qc_cache_close(&cache);
    }
    if (bs == BYTES_NO_TEMP) {
        /* No cache, or no private folder to compile into: in memory. */
        gcc_jit_result *r = gcc_jit_context_compile(c);
        st->t_jit = now_ms() - t0;
        if (!r) {
            ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s",
                          gcc_jit_context_get_first_error(c));
        } else {
            double t1 = now_ms();
            qrl_module_entry_fn entry = (qrl_module_entry_fn)gcc_jit_result_get_code(r, QRL_MODULE_ENTRY);
            qr_error e;
            if (qr_module_load(entry, release_result, r, &m, &e) != QR_OK)
                ql_error_file(&u->diags, NULL, "%s", e.msg);
            st->t_load = now_ms() - t1;
        }
    }
    gcc_jit_context_release(c);
    return m;
}
