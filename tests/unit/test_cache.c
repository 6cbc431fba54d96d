/* The compiled-module cache under attack: planted modules (their ELF
 * constructor must never run), truncated, corrupted and linked entries,
 * FIFOs, folders and entries that others may write or own, read-only and
 * missing folders, a symbolic link planted at a predictable temp name. Each
 * test has its own $XDG_CACHE_HOME in a fresh folder. Also SHA-256 against
 * the FIPS 180 vectors. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../compiler/cache.h"
#include "../../compiler/check.h"
#include "../../compiler/compile.h"
#include "../../compiler/sha256.h"
#include "recipe.h"
#include "testutil.h"

static char *dir;
static char xdg[700], cache[720], src_path[700], marker[700];

static const char *SRC = "fn answer() -> i64 { return 42 }\n";

static void setup(void)
{
    dir = tu_tmpdir();
    cr_assert(dir);
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    snprintf(cache, sizeof cache, "%s/qrl", xdg);
    snprintf(src_path, sizeof src_path, "%s/c.qrl", dir);
    snprintf(marker, sizeof marker, "%s/PWNED", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    FILE *f = fopen(src_path, "w");
    cr_assert(f);
    fputs(SRC, f);
    fclose(f);
}

static void teardown(void)
{
    tu_rmdir(dir);
}

TestSuite(cache, .init = setup, .fini = teardown);

typedef struct result {
    qrl_module *m;
    qc_stats st;
    int errors, warnings;
    char text[2048]; /* the diagnostics as printed */
} result;

/* Compiles src_path with the default cache ($XDG_CACHE_HOME/qrl), or none. */
static int compile(result *r, int no_cache)
{
    memset(r, 0, sizeof *r);
    char stdlib[600];
    snprintf(stdlib, sizeof stdlib, "%s/stdlib", tu_root());
    qc_unit *u = qc_unit_new(stdlib);
    if (!u)
        return -1;
    qc_unit_load(u, src_path);
    if (!u->diags.errors)
        qc_check(u);
    if (!u->diags.errors)
        r->m = qc_compile(u, &(qc_options){.no_cache = no_cache}, &r->st);
    r->errors = u->diags.errors;
    for (int i = 0; i < u->diags.n; i++)
        r->warnings += u->diags.v[i].sev == QL_WARNING;
    FILE *f = fmemopen(r->text, sizeof r->text - 1, "w");
    if (f) {
        ql_diags_print(&u->diags, f);
        fclose(f);
    }
    qc_unit_free(u);
    return r->m && !r->errors ? 0 : -1;
}

/* Compiles, checks the module computes 42, frees it; returns the result. */
static void compile_ok(result *r)
{
    int rc = compile(r, 0);
    cr_assert(!tu_file_exists(marker), "a planted module ran");
    cr_assert_eq(rc, 0, "compile failed:\n%s", r->text);
    const qr_fn_desc *d = qr_module_fn(r->m, "answer");
    cr_assert(d);
    qrl_rt rt;
    qr_rt_init(&rt);
    cr_assert_eq(((int64_t(*)(qrl_rt *))d->fn)(&rt), 42);
    qr_module_free(r->m);
    r->m = NULL;
}

/* The key the cache will use for SRC. */
static void key_of_src(char *key, size_t n)
{
    result r;
    cr_assert_eq(compile(&r, 1), 0, "%s", r.text);
    qr_module_free(r.m);
    snprintf(key, n, "%s", r.st.key);
}

/* The cache file that holds key's entry, whatever its name (the first
 * file in the cache folder named after key, temp files aside). */
static int entry_path(const char *key, char *out, size_t n)
{
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '^%s' | grep -v tmp | head -n 1", cache, key);
    char *o = NULL;
    tu_run(cmd, &o);
    int ok = o && *o;
    if (ok) {
        o[strcspn(o, "\n")] = 0;
        snprintf(out, n, "%s/%s", cache, o);
    }
    free(o);
    return ok ? 0 : -1;
}

static void entry_names(const char *key, char *qmod, char *oldso, size_t n)
{
    char name[100];
    qc_cache_entry_name(key, name, sizeof name);
    snprintf(qmod, n, "%s/%s", cache, name);
    snprintf(oldso, n, "%s/%s.so", cache, key); /* the name older versions dlopen'ed */
}

/* Builds a shared object whose constructor creates the marker file and that
 * answers key to the old cache's key check: what an attacker plants. */
static void build_evil(const char *key, char *so, size_t n)
{
    char c[700];
    snprintf(c, sizeof c, "%s/evil.c", dir);
    snprintf(so, n, "%s/evil.so", dir);
    FILE *f = fopen(c, "w");
    cr_assert(f);
    fprintf(f,
            "#include <fcntl.h>\n#include <unistd.h>\n"
            "__attribute__((constructor)) static void pwn(void) { close(open(\"%s\", O_CREAT | O_WRONLY, 0644)); }\n"
            "const char *qrl_module_key(void) { return \"%s\"; }\n"
            "void qrl_module_entry(void *m, void *imports) { (void)m; (void)imports; }\n",
            marker, key);
    fclose(f);
    char cmd[2200], *out = NULL;
    snprintf(cmd, sizeof cmd, "gcc -shared -fPIC -o '%s' '%s' 2>&1", so, c);
    cr_assert_eq(tu_run(cmd, &out), 0, "cannot build the planted module: %s", out);
    free(out);
    /* The attack is real: loading it runs the constructor. */
    pid_t p = fork();
    if (p == 0)
        _exit(dlopen(so, RTLD_NOW | RTLD_LOCAL) ? 0 : 1);
    int status;
    waitpid(p, &status, 0);
    cr_assert(tu_file_exists(marker), "the planted module's constructor does not work");
    unlink(marker);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    cr_assert_eq(system(cmd), 0);
}

static void mkdir_cache(mode_t mode)
{
    cr_assert_eq(mkdir(xdg, 0700), 0);
    cr_assert_eq(mkdir(cache, 0700), 0);
    cr_assert_eq(chmod(cache, mode), 0);
}

/* ------------------------------------------------------------------ SHA-256 */

static void hex(const unsigned char *d, char *out)
{
    for (int i = 0; i < QC_SHA256_LEN; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* The standard's vectors, with the SHA extensions where the CPU has them and with the portable code. */
static void sha256_vectors(void);

Test(cache, sha256_fips180_vectors)
{
    sha256_vectors();
    qc_sha256_portable = 1;
    sha256_vectors();
    qc_sha256_portable = 0;
}

static void sha256_vectors(void)
{
    unsigned char d[QC_SHA256_LEN];
    char h[65];
    qc_sha256("abc", 3, d);
    hex(d, h);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    qc_sha256("", 0, d);
    hex(d, h);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    qc_sha256(m448, strlen(m448), d);
    hex(d, h);
    cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu";
    qc_sha256(m896, strlen(m896), d);
    hex(d, h);
    cr_assert_str_eq(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* A million 'a', fed in uneven pieces: the buffering across blocks. */
    static char a[1000000];
    memset(a, 'a', sizeof a);
    qc_sha256_ctx s;
    qc_sha256_init(&s);
    for (size_t i = 0, k = 1; i < sizeof a; i += k, k = k % 131 + 7)
        qc_sha256_update(&s, a + i, i + k <= sizeof a ? k : sizeof a - i);
    qc_sha256_final(&s, d);
    hex(d, h);
    cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* The key names the code generator by a hash of its sources (Makefile: JIT_SRC, JIT_ID): every
 * compiler/jit*.c and jit*.h, in name order, then compile.c, cache.c and runtime/recipe.h. The
 * code generator is several files (jit.c, jit_expr.c, ...): one the Makefile left out would
 * change nothing in the key, and the cache would go on serving modules an older code generator
 * built. So the hash is recomputed here from the files on disk and must be make's; and make,
 * asked what a change of each jit file would do, must rebuild compile.o (where the key is). */
static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void hash_file(qc_sha256_ctx *h, const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    char buf[8192];
    for (size_t k; (k = fread(buf, 1, sizeof buf, f)) > 0;)
        qc_sha256_update(h, buf, k);
    fclose(f);
}

/* make in the project root, outside the make running the suite (its jobserver, its -k). */
#define MAKE_ALONE "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "

/* Adds folder/name to names[*n] for each file of folder whose name ends in one of exts (and does not
 * start with skip). */
static void add_folder(const char *folder, const char *const *exts, const char *skip, char **names, int *n)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", tu_root(), folder);
    DIR *d = opendir(path);
    cr_assert(d, "%s: %s", path, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        int ok = 0;
        for (int k = 0; exts[k]; k++)
            ok |= len > strlen(exts[k]) && !strcmp(e->d_name + len - strlen(exts[k]), exts[k]);
        if (!ok || (skip && !strncmp(e->d_name, skip, strlen(skip))))
            continue;
        cr_assert_lt(*n, 128);
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        names[(*n)++] = strdup(path);
    }
    closedir(d);
}

/* Adds runtime/name and, once each, the runtime headers it includes ("x.h"), transitively. */
static void add_with_includes(const char *name, char **names, int *n)
{
    char rel[300];
    snprintf(rel, sizeof rel, "runtime/%s", name);
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], rel))
            return;
    cr_assert_lt(*n, 128);
    names[(*n)++] = strdup(rel);
    char *src = tu_slurp_root(rel);
    for (char *p = src; (p = strstr(p, "#include \"")); p += 10) {
        char inc[200];
        if (sscanf(p + 10, "%199[^\"]", inc) == 1)
            add_with_includes(inc, names, n);
    }
    free(src);
}

/* The module cache's key hashes every source that shapes generated code: the front end (compiler/
 * but iconv_jit, which has its own key; lang/; grammar/) and runtime/recipe.h with every runtime
 * header it includes, read here from the folders and the includes themselves. */
Test(cache, jit_id_hashes_code_generator_sources)
{
    char path[1200], cmd[3000];
    char *names[128];
    int n = 0;
    static const char *const ch[] = {".c", ".h", NULL}, *const lang[] = {".c", ".h", ".re", NULL},
                             *const grammar[] = {".c", ".h", ".y", NULL};
    add_folder("compiler", ch, "iconv_jit.", names, &n);
    add_folder("lang", lang, NULL, names, &n);
    add_folder("grammar", grammar, NULL, names, &n);
    add_with_includes("recipe.h", names, &n);
    qsort(names, (size_t)n, sizeof *names, by_name);
    cr_assert_geq(n, 50, "the front end's sources and recipe.h's headers: %d found", n);
    /* among them what the key once left out (QRL-L) */
    static const char *const must[] = {"compiler/types.c", "compiler/generic.c", "compiler/check_expr.c",
                                       "compiler/jit_items.c", "runtime/tensor.h", "runtime/dtype.h",
                                       "grammar/qrl.y", "lang/lexer.re"};
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= !strcmp(names[i], must[k]);
        cr_assert(found, "%s is not among the hashed sources", must[k]);
    }
    qc_sha256_ctx h;
    qc_sha256_init(&h);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", tu_root(), names[i]);
        hash_file(&h, path);
    }
    unsigned char dg[QC_SHA256_LEN];
    char want[65];
    qc_sha256_final(&h, dg);
    hex(dg, want);
    want[16] = 0;
    char *out = NULL;
    snprintf(cmd, sizeof cmd, MAKE_ALONE "'%s' -s jit-id", tu_root());
    cr_assert_eq(tu_run(cmd, &out), 0, "%s: %s", cmd, out);
    out[strcspn(out, "\n")] = 0;
    cr_assert_str_eq(out, want, "make's JIT_ID is not the hash of the code generator's sources");
    free(out);

    /* The build the suite runs from ($QRL_BIN's folder): when it is up to date, a change of any
     * source of it must rebuild compile.o, with the new key. */
    char b[1024];
    snprintf(b, sizeof b, "%s", tu_qrl_bin());
    char *slash = strrchr(b, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(b, sizeof b, "build");
    snprintf(cmd, sizeof cmd, MAKE_ALONE "'%s' -q 'B=%s' '%s/obj/compiler/compile.o'", tu_root(), b, b);
    if (tu_run(cmd, NULL) != 0) {
        cr_log_info("%s/obj/compiler/compile.o is not up to date: what a change rebuilds is not checked", b);
    } else {
        for (int i = 0; i < n; i++) {
            snprintf(cmd, sizeof cmd, MAKE_ALONE "'%s' -n 'B=%s' -W '%s' '%s/obj/compiler/compile.o'",
                     tu_root(), b, names[i], b);
            cr_assert_eq(tu_run(cmd, &out), 0, "%s: %s", cmd, out);
            cr_assert(strstr(out, "-DQRL_JIT_ID="), "a change of %s does not rebuild compile.o: %s",
                      names[i], out);
            free(out);
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
}

/* ------------------------------------------------------------------ attacks */

Test(cache, folder_created_0700_entries_private)
{
    snprintf(xdg, sizeof xdg, "%s/a/b", dir);
    snprintf(cache, sizeof cache, "%s/qrl", xdg);
    setenv("XDG_CACHE_HOME", xdg, 1);
    result r;
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 0);
    struct stat st;
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "cache folder mode %o", (unsigned)(st.st_mode & 0777));
    cr_assert_eq(stat(xdg, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "created parent mode %o", (unsigned)(st.st_mode & 0777));
    char e[800];
    cr_assert_eq(entry_path(r.st.key, e, sizeof e), 0);
    cr_assert_eq(stat(e, &st), 0);
    cr_assert_eq(st.st_mode & 0077, 0, "entry mode %o", (unsigned)(st.st_mode & 0777));
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 1);
    cr_assert_eq(r.warnings, 0, "%s", r.text);
}

/* A relative XDG_CACHE_HOME is invalid (the XDG base directory spec: ignored): the cache is
 * $HOME/.cache/qrl, and nothing is made under the working folder. */
Test(cache, relative_xdg_cache_home_is_ignored)
{
    char home[700], rel[800], cwd[4096];
    snprintf(home, sizeof home, "%s/home", dir);
    cr_assert_eq(mkdir(home, 0700), 0);
    const char *old_home = getenv("HOME");
    char *saved = old_home ? strdup(old_home) : NULL;
    cr_assert(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0);
    setenv("HOME", home, 1);
    setenv("XDG_CACHE_HOME", "rel", 1);
    result r;
    compile_ok(&r);
    snprintf(cache, sizeof cache, "%s/.cache/qrl", home);
    snprintf(rel, sizeof rel, "%s/rel", dir);
    struct stat st;
    cr_expect_eq(stat(cache, &st), 0, "the cache is under $HOME");
    cr_expect_neq(stat(rel, &st), 0, "no folder made from the relative path");
    cr_assert_eq(chdir(cwd), 0);
    if (saved)
        setenv("HOME", saved, 1);
    free(saved);
}

/* A module planted under the entry's name, as a bare shared object (at the
 * old and the new name): never loaded, its constructor never runs. */
Test(cache, planted_module_never_runs)
{
    char key[40], evil[700], qmod[800], oldso[800];
    key_of_src(key, sizeof key);
    build_evil(key, evil, sizeof evil);
    mkdir_cache(0700);
    entry_names(key, qmod, oldso, sizeof qmod);
    copy_file(evil, qmod);
    copy_file(evil, oldso);
    result r;
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker), "the planted module ran");
    cr_assert_eq(r.st.cache_hit, 0);
    cr_assert_eq(r.st.cache_rebuilt, 1);
    /* The rebuilt entry is ours: the next run is a hit, still without the planted code. */
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 1);
    cr_assert(!tu_file_exists(marker), "the planted module ran");
}

/* A module under the right key in a well-formed entry, but compiled for another recipe module ABI
 * (or by a QRL from before modules said theirs: no qrl_module_abi): its entry would read the import
 * table with another layout, so it never runs; the entry is rebuilt, and the next run is a hit. */
Test(cache, module_of_another_abi_rebuilt)
{
    char key[40];
    key_of_src(key, sizeof key);
    mkdir_cache(0700);
    static const char *const abi_fn[] = {"int64_t qrl_module_abi(void) { return %d - 1; }\n",
                                         "int64_t qrl_module_abi(void) { return %d + 1; }\n", "/* %d: none */\n"};
    for (int i = 0; i < 3; i++) {
        char c[700], so[700], cmd[2200], *out = NULL;
        snprintf(c, sizeof c, "%s/stale.c", dir);
        snprintf(so, sizeof so, "%s/stale.so", dir);
        FILE *f = fopen(c, "w");
        cr_assert(f);
        fprintf(f, "#include <fcntl.h>\n#include <stdint.h>\n#include <unistd.h>\n"
                   "const char *qrl_module_key(void) { return \"%s\"; }\n", key);
        fprintf(f, abi_fn[i], QR_RECIPE_ABI);
        fprintf(f, "void qrl_module_entry(void *m, void *imports) { (void)m; (void)imports; "
                   "close(open(\"%s\", O_CREAT | O_WRONLY, 0644)); }\n", marker);
        fclose(f);
        snprintf(cmd, sizeof cmd, "gcc -shared -fPIC -o '%s' '%s' 2>&1", so, c);
        cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
        free(out);
        unsigned char *bytes;
        size_t len;
        cr_assert_eq(qc_read_file(AT_FDCWD, so, (size_t)1 << 24, &bytes, &len), 0);
        qc_cache qc;
        ql_diags d;
        ql_diags_init(&d);
        cr_assert_eq(qc_cache_open(&qc, NULL, &d), 1);
        cr_assert_eq(qc_cache_put(&qc, key, bytes, len), 0);
        qc_cache_close(&qc);
        ql_diags_free(&d);
        free(bytes);
        result r;
        compile_ok(&r); /* fails if the stale entry ran */
        cr_assert_eq(r.st.cache_hit, 0, "case %d: the stale module was loaded", i);
        cr_assert_eq(r.st.cache_rebuilt, 1, "case %d", i);
        compile_ok(&r);
        cr_assert_eq(r.st.cache_hit, 1, "case %d", i);
    }
}

/* A well-formed entry (right key, right hash) for the planted module in a
 * folder others may write: the folder is not used at all, one warning. */
Test(cache, writable_folder_ignored_with_one_warning)
{
    char key[40], evil[700], qmod[800], oldso[800];
    key_of_src(key, sizeof key);
    build_evil(key, evil, sizeof evil);
    mkdir_cache(0700);
    qc_cache c;
    ql_diags d;
    ql_diags_init(&d);
    cr_assert_eq(qc_cache_open(&c, NULL, &d), 1);
    unsigned char *so;
    size_t len;
    cr_assert_eq(qc_read_file(AT_FDCWD, evil, 1 << 24, &so, &len), 0);
    cr_assert_eq(qc_cache_put(&c, key, so, len), 0);
    free(so);
    qc_cache_close(&c);
    ql_diags_free(&d);
    entry_names(key, qmod, oldso, sizeof qmod);
    copy_file(evil, oldso);
    cr_assert_eq(chmod(cache, 0777), 0);
    int files = tu_count_files(cache);
    result r;
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker), "a module from a world-writable cache ran");
    cr_assert_eq(r.st.cache_hit, -1, "the cache was used");
    cr_assert_eq(r.warnings, 1, "%s", r.text);
    cr_assert(strstr(r.text, "writable by group or others"), "%s", r.text);
    cr_assert_eq(tu_count_files(cache), files, "something was written to the distrusted folder");
    /* Group-writable is no better; and the warning is not repeated. */
    cr_assert_eq(chmod(cache, 0770), 0);
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker));
    cr_assert_eq(r.st.cache_hit, -1);
    cr_assert_eq(r.warnings, 0, "warned twice:\n%s", r.text);
}

/* The same well-formed planted entry, writable by others, in a good folder. */
Test(cache, writable_entry_ignored)
{
    char key[40], evil[700], qmod[800], oldso[800];
    key_of_src(key, sizeof key);
    build_evil(key, evil, sizeof evil);
    mkdir_cache(0700);
    qc_cache c;
    ql_diags d;
    ql_diags_init(&d);
    cr_assert_eq(qc_cache_open(&c, NULL, &d), 1);
    unsigned char *so;
    size_t len;
    cr_assert_eq(qc_read_file(AT_FDCWD, evil, 1 << 24, &so, &len), 0);
    cr_assert_eq(qc_cache_put(&c, key, so, len), 0);
    free(so);
    qc_cache_close(&c);
    ql_diags_free(&d);
    entry_names(key, qmod, oldso, sizeof qmod);
    copy_file(evil, oldso);
    cr_assert_eq(chmod(qmod, 0666), 0);
    cr_assert_eq(chmod(oldso, 0666), 0);
    result r;
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker), "a world-writable entry ran");
    cr_assert_eq(r.st.cache_hit, 0);
    cr_assert_eq(r.st.cache_rebuilt, 1);
    cr_assert_eq(r.warnings, 1, "%s", r.text);
    /* Replaced by a private entry of our own. */
    struct stat st;
    cr_assert_eq(stat(qmod, &st), 0);
    cr_assert_eq(st.st_mode & 0077, 0);
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 1);
}

/* As root, QRL ran a module another user planted: entries and folders
 * owned by someone else are not trusted. */
Test(cache, foreign_owner_ignored)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to give files to another user");
    char key[40], evil[700], qmod[800], oldso[800];
    key_of_src(key, sizeof key);
    build_evil(key, evil, sizeof evil);
    mkdir_cache(0700);
    qc_cache c;
    ql_diags d;
    ql_diags_init(&d);
    cr_assert_eq(qc_cache_open(&c, NULL, &d), 1);
    unsigned char *so;
    size_t len;
    cr_assert_eq(qc_read_file(AT_FDCWD, evil, 1 << 24, &so, &len), 0);
    cr_assert_eq(qc_cache_put(&c, key, so, len), 0);
    free(so);
    qc_cache_close(&c);
    ql_diags_free(&d);
    entry_names(key, qmod, oldso, sizeof qmod);
    copy_file(evil, oldso);
    cr_assert_eq(chown(qmod, 65534, 65534), 0);
    cr_assert_eq(chown(oldso, 65534, 65534), 0);
    result r;
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker), "another user's entry ran");
    cr_assert_eq(r.st.cache_rebuilt, 1);
    cr_assert_eq(r.warnings, 1, "%s", r.text);
    cr_assert(strstr(r.text, "owned by uid 65534"), "%s", r.text);
    /* The whole folder given away, holding the planted entry again. */
    ql_diags_init(&d);
    cr_assert_eq(qc_cache_open(&c, NULL, &d), 1);
    cr_assert_eq(qc_read_file(AT_FDCWD, evil, 1 << 24, &so, &len), 0);
    cr_assert_eq(qc_cache_put(&c, key, so, len), 0);
    free(so);
    qc_cache_close(&c);
    ql_diags_free(&d);
    cr_assert_eq(chown(cache, 65534, 65534), 0);
    compile_ok(&r);
    cr_assert(!tu_file_exists(marker), "a module in another user's folder ran");
    cr_assert_eq(r.st.cache_hit, -1);
}

/* Truncated: rebuilt, no crash, on this run and the next. */
Test(cache, truncated_entry_rebuilt)
{
    result r;
    compile_ok(&r);
    char e[800];
    cr_assert_eq(entry_path(r.st.key, e, sizeof e), 0);
    struct stat st;
    cr_assert_eq(stat(e, &st), 0);
    off_t sizes[] = {st.st_size / 2, st.st_size - 1, 64, 0};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(truncate(e, sizes[i]), 0);
        compile_ok(&r);
        cr_assert_eq(r.st.cache_hit, 0, "truncated to %ld: loaded", (long)sizes[i]);
        cr_assert_eq(r.st.cache_rebuilt, 1);
        compile_ok(&r);
        cr_assert_eq(r.st.cache_hit, 1);
    }
}

/* An entry truncated while its module is loaded (another process rebuilding
 * or a full disk): the loaded code does not live in the cache file. */
Test(cache, entry_truncated_while_loaded)
{
    result r;
    compile_ok(&r);
    cr_assert_eq(compile(&r, 0), 0, "%s", r.text);
    cr_assert_eq(r.st.cache_hit, 1);
    char e[800];
    cr_assert_eq(entry_path(r.st.key, e, sizeof e), 0);
    cr_assert_eq(truncate(e, 0), 0);
    const qr_fn_desc *d = qr_module_fn(r.m, "answer");
    cr_assert(d);
    qrl_rt rt;
    qr_rt_init(&rt);
    cr_assert_eq(((int64_t(*)(qrl_rt *))d->fn)(&rt), 42);
    qr_module_free(r.m);
}

/* One flipped byte anywhere: rebuilt, not loaded. */
Test(cache, corrupted_byte_rebuilt)
{
    result r;
    compile_ok(&r);
    char e[800];
    cr_assert_eq(entry_path(r.st.key, e, sizeof e), 0);
    struct stat st;
    cr_assert_eq(stat(e, &st), 0);
    /* In the code or data past the ELF headers: dlopen alone would not notice. */
    off_t at[] = {st.st_size / 2, st.st_size - 200, 20};
    for (int i = 0; i < 3; i++) {
        int fd = open(e, O_RDWR);
        cr_assert(fd >= 0);
        unsigned char b;
        cr_assert_eq(pread(fd, &b, 1, at[i]), 1);
        b ^= 0x01;
        cr_assert_eq(pwrite(fd, &b, 1, at[i]), 1);
        close(fd);
        compile_ok(&r);
        cr_assert_eq(r.st.cache_hit, 0, "byte %ld flipped: loaded", (long)at[i]);
        cr_assert_eq(r.st.cache_rebuilt, 1);
        compile_ok(&r);
        cr_assert_eq(r.st.cache_hit, 1);
    }
}

/* An entry that is a symbolic link (even to a good entry) is not followed. */
Test(cache, symlink_entry_ignored)
{
    result r;
    compile_ok(&r);
    char e[800], elsewhere[800];
    cr_assert_eq(entry_path(r.st.key, e, sizeof e), 0);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", dir);
    cr_assert_eq(rename(e, elsewhere), 0);
    cr_assert_eq(symlink(elsewhere, e), 0);
    struct stat before, after;
    cr_assert_eq(stat(elsewhere, &before), 0);
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 0, "a symbolic link was loaded");
    cr_assert_eq(r.st.cache_rebuilt, 1);
    cr_assert_eq(r.warnings, 1, "%s", r.text);
    cr_assert(strstr(r.text, "symbolic link"), "%s", r.text);
    /* Replaced by a file; the link's target is untouched. */
    cr_assert_eq(lstat(e, &after), 0);
    cr_assert(S_ISREG(after.st_mode));
    cr_assert_eq(stat(elsewhere, &after), 0);
    cr_assert_eq(after.st_mtime, before.st_mtime);
    cr_assert_eq(after.st_size, before.st_size);
}

/* A FIFO in place of the entry: no hang (the timeout fails the test). */
Test(cache, fifo_entry_no_hang, .timeout = 60)
{
    char key[40], qmod[800], oldso[800];
    key_of_src(key, sizeof key);
    mkdir_cache(0700);
    entry_names(key, qmod, oldso, sizeof qmod);
    cr_assert_eq(mkfifo(qmod, 0600), 0);
    cr_assert_eq(mkfifo(oldso, 0600), 0);
    result r;
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 0);
    cr_assert_eq(r.st.cache_rebuilt, 1);
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 1);
}

/* The old temp name "<key>.so.tmp.<pid>" was predictable and the compiler
 * wrote through a link planted there: the victim file must stay as it was. */
Test(cache, temp_file_does_not_follow_planted_symlink)
{
    char key[40];
    key_of_src(key, sizeof key);
    mkdir_cache(0700);
    char victim[700], link[900];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    cr_assert(f);
    fputs("precious\n", f);
    fclose(f);
    cr_assert_eq(chmod(victim, 0644), 0);
    snprintf(link, sizeof link, "%s/%s.so.tmp.%ld", cache, key, (long)getpid());
    cr_assert_eq(symlink(victim, link), 0);
    char qmod[800], oldso[800];
    entry_names(key, qmod, oldso, sizeof qmod);
    snprintf(link, sizeof link, "%s.tmp.%ld", qmod, (long)getpid());
    cr_assert_eq(symlink(victim, link), 0);
    result r;
    compile_ok(&r);
    struct stat st;
    cr_assert_eq(stat(victim, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "the victim was made mode %o", (unsigned)(st.st_mode & 0777));
    cr_assert_eq(st.st_size, 9, "the victim was overwritten");
    compile_ok(&r);
    cr_assert_eq(r.st.cache_hit, 1);
}

/* A read-only cache folder: compile works, silently, nothing stored. */
static void readonly_case(void)
{
    result r;
    int rc = compile(&r, 0);
    if (r.m)
        qr_module_free(r.m);
    if (rc != 0 || r.errors || r.warnings || r.text[0]) {
        fprintf(stderr, "read-only cache: rc %d, diagnostics:\n%s", rc, r.text);
        _exit(1);
    }
    _exit(0);
}

Test(cache, readonly_folder_costs_time_only)
{
    mkdir_cache(0500);
    int as_other = geteuid() == 0; /* root writes anywhere: test as nobody */
    if (as_other) {
        cr_assert_eq(chmod(dir, 0755), 0);
        cr_assert_eq(chmod(xdg, 0755), 0);
        cr_assert_eq(chmod(src_path, 0644), 0);
        cr_assert_eq(chown(cache, 65534, 65534), 0);
    }
    for (int round = 0; round < 2; round++) {
        fflush(NULL);
        pid_t p = fork();
        cr_assert(p >= 0);
        if (p == 0) {
            if (as_other && (setgid(65534) != 0 || setuid(65534) != 0))
                _exit(2);
            readonly_case();
        }
        int status;
        cr_assert_eq(waitpid(p, &status, 0), p);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: status %d", round, status);
    }
    cr_assert_eq(tu_count_files(cache), 0);
}
