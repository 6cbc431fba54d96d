/* A short campaign of the model fuzzer (tests/fuzz/fuzz_models.c; `make
 * fuzz-models` runs the long one): mutants of the bundled model, the
 * bad-input fixtures, every regression seed in tests/fuzz/models/ and ONNX's
 * own operator tests, through import, passes and the executor. Under `make
 * test-asan` the fuzzer is built with ASan + UBSan, so a sanitizer report is
 * a crash too. QRL_FUZZ_MODELS_N overrides the count. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

Test(fuzz_models, short_campaign, .timeout = 900)
{
    char *dir = tu_tmpdir(), cmd[4096], *log;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/make_bad_models.py %s/bad", tu_root(), dir);
    int rc = tu_run(cmd, &log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    char bin[1024];
    snprintf(bin, sizeof bin, "%s", tu_qrl_bin());
    char *slash = strrchr(bin, '/');
    snprintf(slash ? slash + 1 : bin, sizeof bin - (size_t)(slash ? slash + 1 - bin : 0), "fuzz_models");
    const char *n = getenv("QRL_FUZZ_MODELS_N");
    snprintf(cmd, sizeof cmd,
             "cd %s && ASAN_OPTIONS=allocator_may_return_null=1 %s -n %s -t 60 -o %s/crashes "
             "examples/fmnist/fmnist_cnn.onnx $(find %s/bad -name '*.onnx' | sort) "
             "$(ls tests/fuzz/models/*.onnx 2>/dev/null) $(ls /usr/share/libonnx-testdata/data/node/*/model.onnx)",
             tu_root(), bin, n ? n : "2000", dir, dir);
    rc = tu_run(cmd, &log);
    const char *summary = strstr(log, "fuzz_models: ");
    cr_log_info("%s", summary ? summary : log);
    cr_assert_eq(rc, 0, "the fuzzer found crashes (mutants in %s/crashes):\n%s", dir, log);
    cr_assert(strstr(log, "0 crashed"), "%s", log);
    free(log);
    tu_rmdir(dir);
}
