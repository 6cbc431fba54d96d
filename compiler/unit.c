#define _GNU_SOURCE /* dladdr */
#include "unit.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../grammar/parse.h"
#include "elementwise.h"
#include "../lang/lexer.h"

#define MAX_IMPORT_DEPTH 64

qc_unit *qc_unit_new(const char *stdlib_dir)
{
    qc_unit *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    ql_arena_init(&u->arena);
    ql_diags_init(&u->diags);
    u->stdlib_dir = stdlib_dir ? strdup(stdlib_dir) : NULL;
    return u;
}

void qc_unit_free(qc_unit *u)
{
    if (!u)
        return;
    for (int i = 0; i < u->nfiles; i++) {
        ql_source_free(u->files[i]->src);
        free(u->files[i]->real);
        free(u->files[i]->imports);
        free(u->files[i]);
    }
    free(u->files);
    qc_names_free(&u->item_names);
    qc_names_free(&u->affine_names);
    free(u->stdlib_dir);
    ql_diags_free(&u->diags);
    ql_arena_free(&u->arena);
    free(u);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static qc_file *find_loaded(qc_unit *u, const char *real)
{
    for (int i = 0; i < u->nfiles; i++)
        if (strcmp(u->files[i]->real, real) == 0)
            return u->files[i];
    return NULL;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir of path (without the trailing '/'), malloc'd; "." when none. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The file an import names: relative to the importer's folder, then the stdlib, then the shipped
 * recipes beside it (<stdlib>/../recipes: recipes/ in the source tree, <prefix>/share/qrl/recipes
 * installed), so that a user's recipe anywhere can derive from int8.qrl by `import "int8.qrl"`. */
static char *resolve(qc_unit *u, const char *importer, const char *name)
{
    char buf[PATH_MAX];
    if (name[0] == '/')
        return is_file(name) ? strdup(name) : NULL;
    char *dir = dir_of(importer);
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    free(dir);
    if (is_file(buf))
        return strdup(buf);
    if (u->stdlib_dir) {
        snprintf(buf, sizeof buf, "%s/%s", u->stdlib_dir, name);
        if (is_file(buf))
            return strdup(buf);
        snprintf(buf, sizeof buf, "%s/../recipes/%s", u->stdlib_dir, name);
        if (is_file(buf))
            return strdup(buf);
    }
    return NULL;
}

static qc_file *load(qc_unit *u, const char *path, const ql_node *from, int depth);
static qc_file *add_file(qc_unit *u, ql_source *src, const char *real, int depth, const ql_node *from);
static int has_qrl_suffix(const char *p);
static int is_utf8(const char *text, size_t len);

static void load_imports(qc_unit *u, qc_file *f, int depth)
{
    for (int i = 0; f->ast && i < f->ast->nkids; i++) {
        ql_node *im = f->ast->kids[i];
        if (im->kind != QL_IMPORT)
            continue;
        if (!im->name || !im->name[0] || memchr(im->name, 0, (size_t)im->slen) != NULL) {
            ql_error(&u->diags, im->span, "import needs a file name");
            continue;
        }
        if (!has_qrl_suffix(im->name)) {
            /* Before looking: nor does it tell whether such a file exists. */
            ql_error(&u->diags, im->span, "cannot import '%s': not a .qrl file", im->name);
            continue;
        }
        char *path = resolve(u, f->src->path, im->name);
        if (!path) {
            if (u->stdlib_dir)
                ql_error(&u->diags, im->span, "cannot find '%s' (looked next to this file, in %s and in %s/../recipes)",
                         im->name, u->stdlib_dir, u->stdlib_dir);
            else
                ql_error(&u->diags, im->span, "cannot find '%s' next to this file", im->name);
            continue;
        }
        qc_file *dep = load(u, path, im, depth + 1);
        free(path);
        if (dep) {
            qc_file **v = realloc(f->imports, sizeof *v * (size_t)(f->nimports + 1));
            if (v) {
                f->imports = v;
                f->imports[f->nimports++] = dep;
            }
        }
    }
}

static qc_file *load(qc_unit *u, const char *path, const ql_node *from, int depth)
{
    char real[PATH_MAX];
    const char *why = NULL;
    if (!realpath(path, real)) {
        if (from)
            ql_error(&u->diags, from->span, "cannot open '%s'", path);
        else
            ql_error_file(&u->diags, path, "cannot open: no such file");
        return NULL;
    }
    qc_file *seen = find_loaded(u, real);
    if (seen) {
        if (seen->loading) {
            ql_error(&u->diags, from->span, "import cycle: '%s' is already being imported", from->name);
            return NULL;
        }
        return seen; /* imported twice (a diamond): once is enough */
    }
    if (depth > MAX_IMPORT_DEPTH) {
        ql_error(&u->diags, from->span, "imports nested more than %d deep", MAX_IMPORT_DEPTH);
        return NULL;
    }
    /* An import names QRL source: anything else (import "/etc/shadow") is not
     * even opened, since its diagnostics would print its lines. realpath:
     * a "x.qrl" link to another file does not count. */
    if (from && !has_qrl_suffix(real)) {
        ql_error(&u->diags, from->span, "cannot import '%s': not a .qrl file", from->name);
        return NULL;
    }
    int bad_line, bad_col;
    ql_source *src = ql_source_load(path, &why, &bad_line, &bad_col);
    if (!src) {
        char at[PATH_MAX + 48];
        if (bad_line > 0) /* the place of what is wrong, as every diagnostic gives it: file:line:col */
            snprintf(at, sizeof at, "%s:%d:%d", path, bad_line, bad_col);
        if (from && bad_line > 0)
            ql_error(&u->diags, from->span, "cannot read '%s': %s at line %d, column %d", path, why, bad_line,
                     bad_col);
        else if (from)
            ql_error(&u->diags, from->span, "cannot read '%s': %s", path, why);
        else
            ql_error_file(&u->diags, bad_line > 0 ? at : path, "cannot read: %s", why);
        return NULL;
    }
    if (from && !is_utf8(src->text, src->len)) {
        ql_error(&u->diags, from->span, "cannot import '%s': not QRL source (not UTF-8 text)", from->name);
        ql_source_free(src);
        return NULL;
    }
    return add_file(u, src, real, depth, from);
}

static int has_qrl_suffix(const char *p)
{
    size_t n = strlen(p);
    return n > 4 && strcmp(p + n - 4, ".qrl") == 0;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int is_utf8(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text, *end = s + len;
    while (s < end) {
        unsigned c = *s;
        int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || end - s <= n)
            return n == 0;
        unsigned cp = n == 0 ? c : c & (0x3f >> n);
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i] & 0x3f);
        }
        static const unsigned min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        s += n + 1;
    }
    return 1;
}

/* True when the first diagnostic since diags index n0 is at or before src's
 * first token: the file does not even start like QRL (a config file, a key,
 * a password database), so it is not QRL source. */
static int fails_at_first_token(qc_unit *u, const ql_source *src, int n0)
{
    if (u->diags.n <= n0)
        return 0;
    ql_diags scratch;
    ql_diags_init(&scratch);
    ql_lexer lx;
    ql_token t;
    ql_lexer_init(&lx, src, &u->arena, &scratch);
    ql_lex(&lx, &t);
    ql_diags_free(&scratch);
    for (int i = n0; i < u->diags.n; i++)
        if (u->diags.v[i].span.src == src)
            return u->diags.v[i].span.start <= t.span.start;
    return 0;
}

/* Registers a loaded source (taking it), parses it and loads its imports. */
static qc_file *add_file(qc_unit *u, ql_source *src, const char *real, int depth, const ql_node *from)
{
    const char *path = src->path;
    qc_file *f = calloc(1, sizeof *f);
    char *rdup = strdup(real);
    if (f && rdup && u->nfiles == u->capfiles) {
        int cap = u->capfiles ? 2 * u->capfiles : 8;
        qc_file **v = realloc(u->files, sizeof *v * (size_t)cap);
        if (v) {
            u->files = v;
            u->capfiles = cap;
        }
    }
    if (!f || !rdup || u->nfiles == u->capfiles) {
        ql_error_file(&u->diags, path, "out of memory");
        free(f);
        free(rdup);
        ql_source_free(src);
        return NULL;
    }
    f->src = src;
    f->real = rdup;
    f->loading = 1;
    double t0 = now_ms();
    int n0 = u->diags.n;
    f->ast = qp_parse(src, &u->arena, &u->diags);
    qc_elementwise_lower(f->ast, &u->arena, &u->diags);
    u->t_parse += now_ms() - t0;
    /* An imported file that is not QRL source: its diagnostics would show its
     * text to whoever wrote the import, so one error at the import instead. */
    if (from && fails_at_first_token(u, src, n0)) {
        ql_diags_truncate(&u->diags, n0);
        ql_error(&u->diags, from->span, "cannot import '%s': not QRL source (it does not start with a declaration)",
                 from->name);
        ql_source_free(src);
        free(rdup);
        free(f);
        return NULL;
    }
    /* Registered before its imports (so a cycle finds it), moved after them below. */
    u->files[u->nfiles++] = f;
    load_imports(u, f, depth);
    f->loading = 0;
    int at = 0;
    while (u->files[at] != f)
        at++;
    memmove(&u->files[at], &u->files[at + 1], sizeof *u->files * (size_t)(u->nfiles - at - 1));
    u->files[u->nfiles - 1] = f;
    return f;
}

qc_file *qc_unit_load(qc_unit *u, const char *path)
{
    return load(u, path, NULL, 0);
}

qc_file *qc_unit_load_text(qc_unit *u, const char *path, const char *text, size_t len)
{
    ql_source *src = ql_source_from_text(path, text, len);
    if (!src) {
        ql_error_file(&u->diags, path, "out of memory");
        return NULL;
    }
    /* Its identity: a name no real file has, so imports of path itself still resolve on disk. */
    char id[PATH_MAX + 16];
    snprintf(id, sizeof id, "<memory>%s", path);
    return add_file(u, src, id, 0, NULL);
}

/* The stdlib beside file (a binary or library, links followed): the first folder of
 * <its folder>/../stdlib, ../../stdlib (build/qrl, build/asan/qrl, build/libqrl.so in the source
 * tree), ../share/qrl/stdlib and ../../share/qrl/stdlib (installed in <prefix>/bin, <prefix>/lib
 * or a multiarch <prefix>/lib/<triplet>); NULL when none is. malloc'd. */
static char *stdlib_beside(const char *file)
{
    static const char *const rel[] = {"/../stdlib", "/../../stdlib", "/../share/qrl/stdlib", "/../../share/qrl/stdlib"};
    char real[PATH_MAX], buf[PATH_MAX + 32], dirreal[PATH_MAX];
    struct stat st;
    if (!realpath(file, real))
        return NULL;
    char *dir = dir_of(real);
    if (!dir)
        return NULL;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", dir, rel[i]);
        if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode) && realpath(buf, dirreal)) {
            free(dir);
            return strdup(dirreal);
        }
    }
    free(dir);
    return NULL;
}

char *qc_default_stdlib(void)
{
    const char *env = getenv("QRL_STDLIB");
    if (env && *env)
        return strdup(env);
    /* Beside the shared library this code was loaded from (an installed libqrl.so in a program
     * that knows nothing of QRL), then beside the running executable (qrl, which links
     * libqrl.a; dladdr names an executable by its argv[0], which may be relative). */
    Dl_info info;
    char *dir = NULL;
    if (dladdr((void *)qc_default_stdlib, &info) && info.dli_fname && info.dli_fname[0] == '/')
        dir = stdlib_beside(info.dli_fname);
    if (!dir)
        dir = stdlib_beside("/proc/self/exe");
    if (dir)
        return dir;
    /* A program built in the tree (the tests), or one linked with an installed libqrl.a. */
#ifdef QRL_SOURCE_STDLIB
    struct stat st;
    if (stat(QRL_SOURCE_STDLIB, &st) == 0 && S_ISDIR(st.st_mode))
        return strdup(QRL_SOURCE_STDLIB);
#endif
    return NULL;
}

double qc_unit_lex_ms(const qc_unit *u)
{
    double t0 = now_ms();
    for (int i = 0; i < u->nfiles; i++) {
        ql_arena ar;
        ql_diags d;
        ql_arena_init(&ar);
        ql_diags_init(&d);
        ql_lexer lx;
        ql_lexer_init(&lx, u->files[i]->src, &ar, &d);
        ql_token t;
        do
            ql_lex(&lx, &t);
        while (t.kind != QL_TOK_EOF);
        ql_diags_free(&d);
        ql_arena_free(&ar);
    }
    return now_ms() - t0;
}
