/* What the CPU the process runs on is, read at run time (never the build machine's): its cache
 * sizes, which size the runtime's bands and batch parts, and a one-line description for
 * benchmarks. The ISA checks (AVX-512, VNNI, VBMI) stay beside the kernels that need them
 * (__builtin_cpu_supports). */
#ifndef QR_CPU_H
#define QR_CPU_H

#include <stddef.h>

/* Bytes of the data cache at level 1, 2 or 3 that one core sees: CPUID's (leaf 4 on Intel,
 * 0x8000001D on AMD; an L3 is the one cache its complex shares), else the system's (sysconf: glibc
 * sums an AMD socket's L3s), else fallback. */
size_t qr_cpu_cache_bytes(int level, size_t fallback);

/* "vendor family F model M, L1d 32 KB, L2 1024 KB, L3 32768 KB, avx512 vnni" into buf. */
void qr_cpu_describe(char *buf, size_t n);

#endif
