/* The host CPU as compiler flags: libgccjit ignores -march=native, and the
 * machines differ (AVX-512 with or without VNNI, AVX-VNNI, ...). */
#ifndef QC_CPU_H
#define QC_CPU_H

/* "-march=x86-64-v4 -mavx512vnni" or the like, for the CPU running now. */
const char *qc_cpu_flags(void);

#endif
