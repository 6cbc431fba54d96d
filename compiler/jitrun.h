/* Every libgccjit compilation of the process goes through these calls, so that a fatal signal
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT) leaves none of its scratch behind:
 *  - libgccjit makes its scratch folder (libgccjit-XXXXXX) and its driver's files in the folder
 *    libiberty's choose_tmpdir picks from TMPDIR at the process's FIRST compilation, and keeps for
 *    the process's life. That first compilation here runs with TMPDIR set to a private folder
 *    (TMPDIR/qrl-jit-XXXXXX), which qr_scratch_dir_set (runtime/fileio.h) has the signal handlers
 *    remove with what it holds; it is removed between compilations and made again (by name:
 *    refused unless it is this user's 0700 folder) by the next, and removed at exit;
 *  - libgccjit's embedded driver replaces the process's SIGINT/SIGTERM/SIGHUP handlers with its own
 *    (which kills the process without running ours) and sets them to SIG_IGN for a moment (a
 *    signal then is lost). When a gcc driver program is installed, it runs as a process of its own
 *    instead (gcc_jit_context_set_bool_use_external_driver): nothing in this process is touched.
 *    Without one, the embedded driver runs and qrl's handlers are put back after each compilation.
 * A program that used libgccjit before libqrl keeps its own TMPDIR choice. */
#ifndef QC_JITRUN_H
#define QC_JITRUN_H

#include <libgccjit.h>

gcc_jit_result *qc_jit_compile(gcc_jit_context *c);
void qc_jit_compile_to_file(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path);

/* c compiled to path in a child process (fork): libgccjit's working set (its collector's heap,
 * its code's pages: 90 to 400 MB for a recipe's kernels) is the child's, given back when it ends,
 * never resident in this one. 0 when compiled; -1 when not, with libgccjit's first error (or how
 * the child ended) in err; 1 when no child could be started (nothing was tried: compile in the
 * process). c is left as it was for this process (the child compiled a copy of it). */
int qc_jit_compile_to_file_apart(gcc_jit_context *c, enum gcc_jit_output_kind kind, const char *path, char *err,
                                 size_t n);

/* The process's first compilation registers libgccjit's own exit handlers, which must not run
 * while a compilation is under way (they tear down what it uses: a crash, or "compilation
 * terminated" and exit status 1). Exit handlers run in the reverse order of their registration,
 * so a module that compiles on a thread of its own cannot stop it from an atexit handler it
 * registered before that first compilation. qc_jit_setup makes the first compilation (an empty
 * one, as it was) in the caller's thread, and registers after it the handler that runs every
 * qc_jit_at_exit function (last added first): a thread started after qc_jit_setup is stopped by
 * one of them before libgccjit's handlers run. Up to 8 functions; one added twice runs once. */
void qc_jit_setup(void);
void qc_jit_at_exit(void (*fn)(void));

/* The private folder libgccjit's scratch goes into, made at the first compilation (or here, with
 * make); NULL when there is none. A compilation's own output folder goes in it too. */
const char *qc_jit_scratch_dir(int make);
/* The folder is removed between compilations (when empty): a caller that used it for a folder of
 * its own calls this once that is gone. */
void qc_jit_scratch_idle(void);

#endif
