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
#include "jitrun.h"
#include "check.h"
#include "cpu.h"
#include "jit.h"
#include "reach.h"
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

/* used[k] for file f and every file it imports, directly or not. */
static void mark_file(const qc_unit *u, const qc_file *f, unsigned char *used)
{
    for (int k = 0; k < u->nfiles; k++) {
        if (u->files[k] != f)
            continue;
        if (used[k])
            return;
        used[k] = 1;
        break;
    }
    for (int i = 0; i < f->nimports; i++)
        mark_file(u, f->imports[i], used);
}

/* A part of the module: its items, how it is compiled, and once loaded its
 * entry and what unloads it. */
typedef struct part {
    const char *name;
    unsigned char *items; /* by item index */
    int nitems, level, fns_private;
    qrl_module_entry_fn entry;
    int64_t abi; /* the QR_RECIPE_ABI its code was compiled for (qrl_module_abi) */
    void (*release)(void *);
    void *handle;
} part;

/* SHA-256 rather than a fast hash: two recipes with one key would share a
 * cache entry, so the key must not collide even for crafted sources. A part's
 * code depends on its items, on the files they come from and on what those
 * import (names resolve through imports only), so the key hashes those files
 * and the list of items: a recipe that reaches the same kernels shares them. */
static void part_key(const qc_unit *u, const qc_options *o, const part *p, char *key, size_t n)
{
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    char buf[160];
    snprintf(buf, sizeof buf, "qrl %s jit %s abi %d gccjit %d.%d.%d opt %d part %s -O%d", QRL_VERSION, QRL_JIT_ID,
             QR_RECIPE_ABI, gcc_jit_version_major(), gcc_jit_version_minor(), gcc_jit_version_patchlevel(),
             o ? o->opt_level : 0, p->name, p->level);
    hash_str(&h, buf);
    hash_str(&h, qc_cpu_flags());
    unsigned char *used = calloc((size_t)u->nfiles + 1, 1);
    for (int i = 0; i < u->nitems; i++)
        if (p->items[i] && used)
            mark_file(u, u->items[i]->file, used);
    for (int i = 0; i < u->nfiles; i++) {
        if (used && !used[i])
            continue;
        hash_str(&h, u->files[i]->real);
        snprintf(buf, sizeof buf, "%zu", u->files[i]->src->len);
        hash_str(&h, buf);
        qc_sha256_update(&h, u->files[i]->src->text, u->files[i]->src->len);
    }
    free(used);
    for (int i = 0; i < u->nitems; i++)
        if (p->items[i]) {
            snprintf(buf, sizeof buf, "%d", (int)u->items[i]->kind);
            hash_str(&h, buf);
            hash_str(&h, u->items[i]->name);
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

/* Opens a shared object from verified bytes into p (entry, release, handle);
 * -1 when it does not load or does not carry key (reported to u->diags only
 * when report is set). */
static int load_part(qc_unit *u, const unsigned char *so, size_t len, const char *key, int report, part *p)
{
    char err[512];
    qc_dl *h = qc_dl_open(so, len, err, sizeof err);
    if (!h) {
        if (report)
            ql_error_file(&u->diags, NULL, "cannot load the compiled module: %s", err);
        return -1;
    }
    const char *(*keyfn)(void) = (const char *(*)(void))qc_dl_sym(h, KEY_SYMBOL);
    qrl_module_entry_fn entry = (qrl_module_entry_fn)qc_dl_sym(h, QRL_MODULE_ENTRY);
    int64_t (*abifn)(void) = (int64_t (*)(void))qc_dl_sym(h, QRL_MODULE_ABI);
    if (!keyfn || !entry || strcmp(keyfn(), key) != 0) {
        qc_dl_close(h);
        if (report)
            ql_error_file(&u->diags, NULL, "the compiled module is not the one asked for (key %s)", key);
        return -1;
    }
    /* a module of another recipe ABI (or of a QRL before modules said theirs) reads its imports
     * with another layout: never run (a cached one is rebuilt) */
    int64_t abi = abifn ? abifn() : -1;
    if (abi != QR_RECIPE_ABI) {
        qc_dl_close(h);
        if (report)
            ql_error_file(&u->diags, NULL, "the compiled module was built for recipe module ABI %lld, and this QRL's is %d",
                          (long long)abi, QR_RECIPE_ABI);
        return -1;
    }
    p->entry = entry;
    p->abi = abi;
    p->release = qc_dl_close;
    p->handle = h;
    return 0;
}

typedef enum { BYTES_OK, BYTES_JIT_ERROR, BYTES_NO_TEMP } bytes_status;

/* Compiles c into a shared object in a fresh private folder (mkdtemp: 0700,
 * an unguessable name), reads its bytes and removes it. libgccjit writes the
 * output by path, so the path must be one nobody else can prepare. With so
 * NULL, c is only checked (its caller added -fsyntax-only): nothing is read. */
static bytes_status compile_to_bytes(qc_unit *u, gcc_jit_context *c, unsigned char **so, size_t *len)
{
    /* in the process's folder for libgccjit's scratch (compiler/jitrun.h): a fatal signal removes it */
    const char *t = qc_jit_scratch_dir(1);
    if (!t)
        t = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/qrl-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/qrl-XXXXXX");
        if (!mkdtemp(dir))
            return BYTES_NO_TEMP;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/module.so", dir);
    enum gcc_jit_output_kind kind = so ? GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY : GCC_JIT_OUTPUT_KIND_ASSEMBLER;
    /* in a child process, so that libgccjit's working set is never this one's: a first quantize
     * peaked at 2 to 4 times the second's (docs/quantizer.md, "The cold first quantize's peak
     * (stop 46)") */
    char msg[1024];
    int apart = qc_jit_compile_to_file_apart(c, kind, path, msg, sizeof msg);
    if (apart > 0)
        qc_jit_compile_to_file(c, kind, path);
    const char *err = apart < 0 ? msg : apart > 0 ? gcc_jit_context_get_first_error(c) : NULL;
    bytes_status r = BYTES_OK;
    if (err) {
        ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s", err);
        r = BYTES_JIT_ERROR;
    } else if (so && qc_read_file(AT_FDCWD, path, (size_t)1 << 30, so, len) != 0) {
        ql_error_file(&u->diags, path, "cannot read the compiled module: %s", strerror(errno));
        r = BYTES_JIT_ERROR;
    }
    unlink(path);
    rmdir(dir);
    qc_jit_scratch_idle();
    return r;
}

/* const char *qrl_module_key(void) { return "<key>"; } and int64_t qrl_module_abi(void) { return
 * QR_RECIPE_ABI; } */
static void add_key_fns(gcc_jit_context *c, const char *key)
{
    gcc_jit_type *t = gcc_jit_context_get_type(c, GCC_JIT_TYPE_CONST_CHAR_PTR);
    gcc_jit_function *f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, t, KEY_SYMBOL, 0, NULL, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(f, NULL);
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_new_string_literal(c, key));
    gcc_jit_type *l = gcc_jit_context_get_int_type(c, 8, 1);
    f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, l, QRL_MODULE_ABI, 0, NULL, 0);
    b = gcc_jit_function_new_block(f, NULL);
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_new_rvalue_from_long(c, l, QR_RECIPE_ABI));
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

/* Which items go into which part: with a recipe, what it reaches (reach.h),
 * else everything. Kernels and the fns they call (compiled again, privately)
 * make the kernel part; the rest is the code part, which registers the fns.
 * Returns the number of parts, 0 when out of memory. */
static int split(qc_unit *u, const qc_options *o, part *parts, int *reach)
{
    size_t n = (size_t)u->nitems + 1;
    unsigned char *emit = calloc(n, 1);
    part code = {.name = "code", .items = calloc(n, 1), .level = o && o->opt_level ? o->opt_level : 1};
    part kern = {.name = "kernels", .items = calloc(n, 1), .level = 3, .fns_private = 1};
    if (!emit || !code.items || !kern.items) {
        free(emit);
        free(code.items);
        free(kern.items);
        return 0;
    }
    *reach = qc_reach(u, emit);
    for (int i = 0; i < u->nitems; i++) {
        qc_symkind k = u->items[i]->kind;
        if (!emit[i] || k == QC_SYM_CONST)
            continue;
        if (k == QC_SYM_KERNEL) {
            kern.items[i] = 1;
            qc_reach_calls(u, i, kern.items);
        } else if (k == QC_SYM_FN) {
            /* a library: every fn, registered (with a recipe, those it calls, and the policy hooks) */
            if (!*reach || qc_reach_is_hook(u->items[i])) {
                code.items[i] = 1;
                qc_reach_calls(u, i, code.items);
            }
        } else {
            code.items[i] = 1;
            qc_reach_calls(u, i, code.items);
        }
    }
    free(emit);
    for (int i = 0; i < u->nitems; i++) { /* what the walks marked that the part does not compile */
        qc_symkind k = u->items[i]->kind;
        code.items[i] &= k != QC_SYM_KERNEL && k != QC_SYM_CONST;
        kern.items[i] &= k == QC_SYM_KERNEL || k == QC_SYM_FN;
        code.nitems += code.items[i];
        kern.nitems += kern.items[i];
    }
    int np = 0;
    if (code.nitems || !kern.nitems) /* an empty unit still makes a module */
        parts[np++] = code;
    else
        free(code.items);
    if (kern.nitems)
        parts[np++] = kern;
    else
        free(kern.items);
    return np;
}

#define VALIDATED_MARK "validated by libgccjit\n"

/* qrl check, kernels not in the cache: their context is built and given to
 * libgccjit for its own checks and trees only (-fsyntax-only: no optimization,
 * no code; 10 ms instead of a second at -O3). Checked code can fail nowhere
 * else but in libgccjit itself. A marker entry (never loaded: it holds no
 * code) spares the next check; the first quantize compiles them. Returns 1
 * when validated, -1 on an error, 0 when it could not (no private folder). */
static int validate(qc_unit *u, qc_cache *cache, int cached, part *p, qc_part_stats *ps)
{
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    hash_str(&h, "validated");
    hash_str(&h, ps->key);
    unsigned char d[QC_SHA256_LEN];
    qc_sha256_final(&h, d);
    char mkey[33];
    for (int i = 0; i < 16; i++)
        snprintf(mkey + 2 * i, 3, "%02x", d[i]);
    unsigned char *mark;
    size_t len;
    if (cached && qc_cache_get(cache, mkey, &mark, &len, &u->diags) == QC_ENTRY_OK) {
        int same = len == strlen(VALIDATED_MARK) && !memcmp(mark, VALIDATED_MARK, len);
        free(mark);
        if (same) {
            ps->validated = 2;
            return 1;
        }
    }
    if (too_big(u))
        return -1;
    double t0 = now_ms();
    gcc_jit_context *c = qc_jit_build(u, &(qc_jit_opts){.opt_level = p->level, .items = p->items, .fns_private = 1});
    if (!c)
        return -1;
    add_key_fns(c, ps->key);
    gcc_jit_context_set_int_option(c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL, 0);
    gcc_jit_context_add_command_line_option(c, "-fsyntax-only");
    bytes_status bs = compile_to_bytes(u, c, NULL, NULL);
    gcc_jit_context_release(c);
    ps->t_jit = now_ms() - t0;
    if (bs == BYTES_NO_TEMP)
        return 0;
    if (bs != BYTES_OK)
        return -1;
    ps->validated = 1;
    if (cached)
        qc_cache_put(cache, mkey, (const unsigned char *)VALIDATED_MARK, strlen(VALIDATED_MARK));
    return 1;
}

/* Finds p in the cache or compiles it (storing it), or for qrl check
 * validates a kernel part: 0 when p is loaded, 1 validated, -1 on an error. */
static int obtain(qc_unit *u, qc_cache *cache, int cached, int check_only, part *p, qc_part_stats *ps)
{
    if (cached) {
        double t0 = now_ms();
        unsigned char *so;
        size_t len;
        qc_entry_status es = qc_cache_get(cache, ps->key, &so, &len, &u->diags);
        if (es == QC_ENTRY_OK) {
            int rc = load_part(u, so, len, ps->key, 0, p);
            free(so);
            if (rc == 0 || u->diags.errors) {
                ps->t_load = now_ms() - t0;
                ps->cache_hit = rc == 0 ? 1 : 0;
                return rc;
            }
            es = QC_ENTRY_BAD; /* verified, yet not this key's module: rebuilt below */
        }
        ps->cache_rebuilt = es == QC_ENTRY_BAD;
        ps->cache_hit = 0;
    }
    if (check_only && p->fns_private) {
        int v = validate(u, cache, cached, p, ps);
        if (v)
            return v;
    }
    if (too_big(u))
        return -1;
    double t0 = now_ms();
    gcc_jit_context *c = qc_jit_build(
        u, &(qc_jit_opts){.opt_level = p->level, .items = p->items, .fns_private = p->fns_private});
    if (!c)
        return -1;
    add_key_fns(c, ps->key);
    int rc = -1;
    bytes_status bs = BYTES_NO_TEMP;
    if (cached) {
        unsigned char *so = NULL;
        size_t len = 0;
        bs = compile_to_bytes(u, c, &so, &len);
        ps->t_jit = now_ms() - t0;
        if (bs == BYTES_OK) {
            /* A cache that cannot be written costs the next run time, nothing else. */
            qc_cache_put(cache, ps->key, so, len);
            double t1 = now_ms();
            rc = load_part(u, so, len, ps->key, 1, p);
            ps->t_load = now_ms() - t1;
        }
        free(so);
    }
    if (bs == BYTES_NO_TEMP) {
        /* No cache, or no private folder to compile into: in memory. */
        gcc_jit_result *r = qc_jit_compile(c);
        ps->t_jit = now_ms() - t0;
        if (!r) {
            ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s",
                          gcc_jit_context_get_first_error(c));
        } else {
            p->entry = (qrl_module_entry_fn)gcc_jit_result_get_code(r, QRL_MODULE_ENTRY);
            int64_t (*abifn)(void) = (int64_t (*)(void))gcc_jit_result_get_code(r, QRL_MODULE_ABI);
            p->abi = abifn ? abifn() : -1;
            p->release = release_result;
            p->handle = r;
            rc = 0;
        }
    }
    gcc_jit_context_release(c);
    return rc;
}

/* The loaded parts of one module, released together. */
typedef struct bundle {
    int n;
    void (*release[QC_MAX_PARTS])(void *);
    void *handle[QC_MAX_PARTS];
} bundle;

static void release_bundle(void *h)
{
    bundle *b = h;
    for (int i = 0; i < b->n; i++)
        b->release[i](b->handle[i]);
    free(b);
}

/* One module of the loaded parts: the first part's entry through qr_module_load, then the others'
 * entries register into it. The parts are released with the module, or here on failure. */
static qrl_module *assemble(qc_unit *u, part *parts, int np)
{
    void (*release)(void *) = parts[0].release;
    void *handle = parts[0].handle;
    if (np > 1) {
        bundle *b = calloc(1, sizeof *b);
        if (!b) {
            for (int i = 0; i < np; i++)
                parts[i].release(parts[i].handle);
            ql_error_file(&u->diags, NULL, "out of memory");
            return NULL;
        }
        for (int i = 0; i < np; i++)
            b->release[b->n] = parts[i].release, b->handle[b->n++] = parts[i].handle;
        release = release_bundle;
        handle = b;
    }
    qrl_module *m;
    qr_error e;
    if (qr_module_load(parts[0].entry, parts[0].abi, release, handle, &m, &e) != QR_OK) {
        ql_error_file(&u->diags, NULL, "%s", e.msg);
        return NULL;
    }
    for (int i = 1; i < np && !m->bad; i++) {
        if (parts[i].abi != QR_RECIPE_ABI) { /* load_part refused such a part already: never run one */
            qr_module_free(m);
            ql_error_file(&u->diags, NULL, "the compiled module was built for recipe module ABI %lld, and this QRL's is %d",
                          (long long)parts[i].abi, QR_RECIPE_ABI);
            return NULL;
        }
        parts[i].entry(m, qr_recipe_imports());
    }
    if (m->bad) {
        qr_module_free(m);
        ql_error_file(&u->diags, NULL, "registering the module failed: out of memory, or it names a calibrator it "
                                       "did not register or more parameters than the calibrator declared");
        return NULL;
    }
    return m;
}

qrl_module *qc_compile(qc_unit *u, const qc_options *o, qc_stats *st)
{
    qc_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    st->cache_hit = -1;
    part parts[QC_MAX_PARTS];
    int np = split(u, o, parts, &st->reach);
    if (!np) {
        ql_error_file(&u->diags, NULL, "out of memory");
        return NULL;
    }
    qc_cache cache;
    int cached = !(o && o->no_cache) && qc_cache_open(&cache, o ? o->cache_dir : NULL, &u->diags);
    int ok = 1, loaded = 0, check_only = o && o->check_only, i = 0;
    for (; i < np && ok; i++) {
        qc_part_stats *ps = &st->parts[st->nparts++];
        ps->name = parts[i].name;
        ps->items = parts[i].nitems;
        ps->opt_level = parts[i].level;
        ps->cache_hit = -1;
        part_key(u, o, &parts[i], ps->key, sizeof ps->key);
        int rc = obtain(u, &cache, cached, check_only, &parts[i], ps);
        ok = rc >= 0;
        if (rc == 0)
            parts[loaded++] = parts[i]; /* the loaded ones first; a validated part is left out */
        else
            free(parts[i].items);
        st->t_jit += ps->t_jit;
        st->t_load += ps->t_load;
        st->cache_rebuilt |= ps->cache_rebuilt;
        if (cached)
            st->cache_hit = st->cache_hit == 0 || (ps->cache_hit == 0 && ps->validated != 2) ? 0 : 1;
    }
    if (np)
        snprintf(st->key, sizeof st->key, "%s", st->parts[0].key);
    if (cached)
        qc_cache_close(&cache);
    qrl_module *m = NULL;
    if (ok && loaded) {
        double t0 = now_ms();
        m = assemble(u, parts, loaded);
        st->t_load += now_ms() - t0;
    } else {
        for (int k = 0; k < loaded; k++)
            parts[k].release(parts[k].handle);
    }
    for (int k = 0; k < loaded; k++)
        free(parts[k].items);
    for (; i < np; i++) /* not reached after an error */
        free(parts[i].items);
    return m;
}
