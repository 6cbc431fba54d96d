#include "compile.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "jit.h"

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

/* Two FNV-1a hashes with different seeds: 128 bits against accidental collisions. */
typedef struct hasher {
    uint64_t a, b;
} hasher;

static void hash_bytes(hasher *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 0x100000001b3ull;
        h->b = (h->b ^ s[i]) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
}

static void hash_str(hasher *h, const char *s)
{
    hash_bytes(h, s, strlen(s) + 1);
}

static void unit_key(const qc_unit *u, const qc_options *o, char *key, size_t n)
{
    hasher h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    char buf[128];
    snprintf(buf, sizeof buf, "qrl %s jit %s abi %d gccjit %d.%d.%d opt %d", QRL_VERSION, QRL_JIT_ID, QR_RECIPE_ABI,
             gcc_jit_version_major(), gcc_jit_version_minor(), gcc_jit_version_patchlevel(), o ? o->opt_level : 0);
    hash_str(&h, buf);
    hash_str(&h, qc_cpu_flags());
    for (int i = 0; i < u->nfiles; i++) {
        hash_str(&h, u->files[i]->real);
        hash_bytes(&h, u->files[i]->src->text, u->files[i]->src->len);
    }
    snprintf(key, n, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
}

char *qc_cache_dir(const char *override)
{
    char buf[PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (override)
        snprintf(buf, sizeof buf, "%s", override);
    else if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/qrl", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/qrl", home);
    else
        return NULL;
    /* mkdir -p */
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return NULL;
    return strdup(buf);
}

static void release_dl(void *h)
{
    dlclose(h);
}

static void release_result(void *r)
{
    gcc_jit_result_release(r);
}

/* Loads a cached module; NULL (and removes the file) when it is not ours. */
static qrl_module *load_cached(qc_unit *u, const char *path, const char *key, qc_stats *st)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    const char *(*keyfn)(void) = (const char *(*)(void))dlsym(h, KEY_SYMBOL);
    qrl_module_entry_fn entry = (qrl_module_entry_fn)dlsym(h, QRL_MODULE_ENTRY);
    if (!keyfn || !entry || strcmp(keyfn(), key) != 0) {
        dlclose(h);
        return NULL;
    }
    qrl_module *m;
    qr_error e;
    if (qr_module_load(entry, release_dl, h, &m, &e) != QR_OK) {
        ql_error_file(&u->diags, NULL, "%s", e.msg);
        return NULL;
    }
    (void)st;
    return m;
}

/* const char *qrl_module_key(void) { return "<key>"; } */
static void add_key_fn(gcc_jit_context *c, const char *key)
{
    gcc_jit_type *t = gcc_jit_context_get_type(c, GCC_JIT_TYPE_CONST_CHAR_PTR);
    gcc_jit_function *f = gcc_jit_context_new_function(c, NULL, GCC_JIT_FUNCTION_EXPORTED, t, KEY_SYMBOL, 0, NULL, 0);
    gcc_jit_block *b = gcc_jit_function_new_block(f, NULL);
    gcc_jit_block_end_with_return(b, NULL, gcc_jit_context_new_string_literal(c, key));
}

qrl_module *qc_compile(qc_unit *u, const qc_options *o, qc_stats *st)
{
    qc_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    st->cache_hit = -1;
    unit_key(u, o, st->key, sizeof st->key);
    char *dir = o && o->no_cache ? NULL : qc_cache_dir(o ? o->cache_dir : NULL);
    char path[PATH_MAX] = "", tmp[PATH_MAX + 32] = "";
    if (dir) {
        snprintf(path, sizeof path, "%s/%s.so", dir, st->key);
        double t0 = now_ms();
        struct stat sb;
        if (stat(path, &sb) == 0) {
            qrl_module *m = load_cached(u, path, st->key, st);
            if (m) {
                st->t_load = now_ms() - t0;
                st->cache_hit = 1;
                free(dir);
                return m;
            }
            unlink(path); /* corrupt or foreign: rebuild below */
            st->cache_rebuilt = 1;
        }
        st->cache_hit = 0;
    }
    double t0 = now_ms();
    gcc_jit_context *c = qc_jit_build(u, &(qc_jit_opts){.opt_level = o ? o->opt_level : 0});
    if (!c) {
        free(dir);
        return NULL;
    }
    add_key_fn(c, st->key);
    qrl_module *m = NULL;
    qr_error e;
    if (dir) {
        /* A temporary name in the same folder, then rename: readers never see half a file. */
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        gcc_jit_context_compile_to_file(c, GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY, tmp);
        const char *err = gcc_jit_context_get_first_error(c);
        st->t_jit = now_ms() - t0;
        if (err) {
            ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s", err);
            unlink(tmp);
        } else if (rename(tmp, path) != 0) {
            unlink(tmp);
            ql_error_file(&u->diags, path, "cannot write the compiled module: %s", strerror(errno));
        } else {
            double t1 = now_ms();
            m = load_cached(u, path, st->key, st);
            st->t_load = now_ms() - t1;
            if (!m && !u->diags.errors)
                ql_error_file(&u->diags, path, "cannot load the compiled module: %s", dlerror());
        }
    } else {
        gcc_jit_result *r = gcc_jit_context_compile(c);
        st->t_jit = now_ms() - t0;
        if (!r) {
            ql_error_file(&u->diags, NULL, "internal compiler error (libgccjit): %s",
                          gcc_jit_context_get_first_error(c));
        } else {
            double t1 = now_ms();
            qrl_module_entry_fn entry = (qrl_module_entry_fn)gcc_jit_result_get_code(r, QRL_MODULE_ENTRY);
            if (qr_module_load(entry, release_result, r, &m, &e) != QR_OK)
                ql_error_file(&u->diags, NULL, "%s", e.msg);
            st->t_load = now_ms() - t1;
        }
    }
    gcc_jit_context_release(c);
    free(dir);
    return m;
}
