#include "cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char flags[256];
static pthread_once_t flags_once = PTHREAD_ONCE_INIT;

/* Once per process: recipes may be compiled on several threads at once. */
static void flags_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    const char *level = "-march=x86-64";
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("ssse3"))
        level = "-march=x86-64-v2";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
        __builtin_cpu_supports("fma"))
        level = "-march=x86-64-v3";
    if (strcmp(level, "-march=x86-64-v3") == 0 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        level = "-march=x86-64-v4";
    int n = snprintf(flags, sizeof flags, "%s", level);
    if (__builtin_cpu_supports("avx512vnni"))
        n += snprintf(flags + n, sizeof flags - (size_t)n, " -mavx512vnni");
    if (__builtin_cpu_supports("avxvnni"))
        n += snprintf(flags + n, sizeof flags - (size_t)n, " -mavxvnni");
    (void)n;
#else
    snprintf(flags, sizeof flags, "-O2");
#endif
}

const char *qc_cpu_flags(void)
{
    pthread_once(&flags_once, flags_init);
    return flags;
}
