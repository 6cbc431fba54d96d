/* A compilation unit: a root .qrl file and every file it imports, parsed.
 * Imports resolve relative to the importing file, then in the stdlib folder;
 * each file is loaded once (by real path); cycles are errors. */
#ifndef QC_UNIT_H
#define QC_UNIT_H

#include "../lang/arena.h"
#include "../lang/ast.h"
#include "../lang/diag.h"
#include "../lang/source.h"
#include "names.h"

typedef struct qc_file {
    ql_source *src;
    ql_node *ast;     /* NULL when the file could not be read or parsed */
    char *real;       /* realpath, the file's identity */
    int loading;      /* on the import stack: importing it again is a cycle */
    struct qc_file **imports; /* files this one imports, in order */
    int nimports;
} qc_file;

typedef struct qc_unit {
    ql_arena arena;   /* ASTs and names of every file */
    ql_diags diags;
    qc_file **files;  /* in load order: every import before its importer */
    int nfiles, capfiles;
    char *stdlib_dir; /* NULL: no stdlib fallback */
    /* Module-level symbols of every file (filled by the checker, in the arena). */
    struct qc_sym **items;
    int nitems, capitems;
    qc_names item_names;   /* items but affine rules, by name (unique: a second one is an error) */
    qc_names affine_names; /* the first affine rule of each op; later ones follow next_same */
    /* Times in ms, for qrl check --time. */
    double t_parse, t_check;
} qc_unit;

qc_unit *qc_unit_new(const char *stdlib_dir);
void qc_unit_free(qc_unit *u);
/* Loads path and its imports; the root file is the last of u->files. Returns
 * the root (NULL if it could not be read); errors are in u->diags. */
qc_file *qc_unit_load(qc_unit *u, const char *path);

/* The same with the root's text given (tests, fuzzing): path names it in
 * diagnostics and its folder anchors relative imports. */
qc_file *qc_unit_load_text(qc_unit *u, const char *path, const char *text, size_t len);

/* Time to lex every file of the unit again, alone (for qrl check --time), ms. */
double qc_unit_lex_ms(const qc_unit *u);

/* The stdlib folder: $QRL_STDLIB, else the one beside the shared library or executable
 * this code runs in (<dir>/../stdlib, ../../stdlib, ../share/qrl/stdlib or
 * ../../share/qrl/stdlib: the source tree, or an installed prefix), else the source
 * tree's it was built from, else NULL. malloc'd. */
char *qc_default_stdlib(void);

#endif
