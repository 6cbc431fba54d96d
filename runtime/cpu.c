#include "cpu.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QR_CPU_X86 1
#endif

#ifdef QR_CPU_X86
/* The deterministic cache parameters leaf (Intel 4, AMD 0x8000001D): the data or unified cache of
 * this level, ways x partitions x line x sets. */
static size_t cpuid_cache_bytes(int level)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    unsigned leaf = 4;
    if (b == 0x68747541) { /* "Auth"enticAMD */
        if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x8000001D)
            return 0;
        leaf = 0x8000001D;
    } else if (a < 4) {
        return 0;
    }
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        unsigned type = a & 31;
        if (type == 0)
            break;
        if ((int)((a >> 5) & 7) != level || type == 2) /* 2: instruction cache */
            continue;
        size_t ways = ((b >> 22) & 0x3ff) + 1, parts = ((b >> 12) & 0x3ff) + 1, line = (b & 0xfff) + 1;
        return ways * parts * line * ((size_t)c + 1);
    }
    return 0;
}
#endif

size_t qr_cpu_cache_bytes(int level, size_t fallback)
{
    static size_t cache[4];
    if (level < 1 || level > 3)
        return fallback;
    if (!cache[level]) {
        size_t s = 0;
#ifdef QR_CPU_X86
        s = cpuid_cache_bytes(level);
#endif
        if (!s) {
            int name = level == 1 ? _SC_LEVEL1_DCACHE_SIZE : level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE;
            long v = sysconf(name);
            s = v > 0 ? (size_t)v : 0;
        }
        cache[level] = s ? s : (size_t)-1;
    }
    return cache[level] == (size_t)-1 ? fallback : cache[level];
}

void qr_cpu_describe(char *buf, size_t n)
{
    char vendor[13] = "unknown";
    unsigned family = 0, model = 0;
    int avx512 = 0, vnni = 0;
#ifdef QR_CPU_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(vendor, &b, 4);
        memcpy(vendor + 4, &d, 4);
        memcpy(vendor + 8, &c, 4);
        vendor[12] = 0;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        family = (a >> 8) & 15;
        model = (a >> 4) & 15;
        if (family == 15)
            family += (a >> 20) & 0xff;
        if (family >= 6)
            model |= ((a >> 16) & 15) << 4;
    }
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f");
    vnni = __builtin_cpu_supports("avx512vnni");
#endif
    snprintf(buf, n, "%s family %u model %u, L1d %zu KB, L2 %zu KB, L3 %zu KB%s%s", vendor, family, model,
             qr_cpu_cache_bytes(1, 0) >> 10, qr_cpu_cache_bytes(2, 0) >> 10, qr_cpu_cache_bytes(3, 0) >> 10,
             avx512 ? ", avx512" : "", vnni ? " vnni" : "");
}
