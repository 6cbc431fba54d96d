/* The process's run-time switches, in one struct: which kernels run (the CPU's fastest, the
 * portable ones, one ISA's), whether convolutions get kernels compiled for their shape, and the
 * tests' second paths (no fusion, NCHW, another epilogue form or work split, poisoned outputs).
 * Kernels and passes read it here and never the environment. It is filled once, at process
 * start, from qrl's command line alone (--kernels, --iconv-jit, --option NAME=VALUE), each
 * through qrl_set_option (qr_options_parse): no environment variable sets a switch. Tests set its
 * fields with qr_options_set. Every setting gives the same integer results; the f32
 * kernels' portable paths may round differently (docs/runtime.md, "Switches"). */
#ifndef QR_OPTIONS_H
#define QR_OPTIONS_H

#include "status.h"

typedef enum qr_nhwc_mode {
    QR_NHWC_AUTO = 0, /* convolutions faster channels last run so (quantizer/layout.c) */
    QR_NHWC_OFF,      /* the integer graph stays NCHW (the reference NHWC is tested against) */
    QR_NHWC_ALL,      /* every convolution that can, faster or not (the tests') */
} qr_nhwc_mode;

typedef enum qr_epilogue_mode {
    QR_EPILOGUE_AUTO = 0, /* the fastest form the epilogue has */
    QR_EPILOGUE_TURN,     /* NHWC blocks turned to rows for the tile kernel */
    QR_EPILOGUE_ROWS,     /* the channels-last kernel, not fused into a specialized convolution */
    QR_EPILOGUE_WHOLE,    /* a MatMul's or Gemm's epilogue by the whole-tensor kernel */
} qr_epilogue_mode;

typedef enum qr_iconv_jit_mode {
    QR_ICONV_JIT_AUTO = 0, /* kernels from the module cache; missing ones compiled in the background */
    QR_ICONV_JIT_OFF,      /* the generic kernels only */
    QR_ICONV_JIT_WAIT,     /* a missing kernel is compiled before its layer runs (benchmarks) */
    QR_ICONV_JIT_CACHED,   /* kernels from the module cache; missing ones not compiled (qrl quantize) */
} qr_iconv_jit_mode;

typedef enum qr_split_mode {
    QR_SPLIT_AUTO = 0, /* blocks of pixels or parts of the channels, by shape */
    QR_SPLIT_ROWS,     /* blocks of pixels only */
    QR_SPLIT_COLS,     /* parts of the channels (at least two, on one thread too) */
} qr_split_mode;

typedef enum qr_effects_mode {
    QR_EFFECTS_DOWNSTREAM = 0, /* the fallback's effect runs start at the layer (quantizer/qmeasure.c) */
    QR_EFFECTS_WHOLE,          /* each runs the whole model (the reference the tests compare with) */
    QR_EFFECTS_CUT,            /* start at the layer, and a layer it cannot is an error (the tests') */
} qr_effects_mode;

typedef enum qr_bands_mode {
    QR_BANDS_AUTO = 0, /* the default: chains of NHWC convolutions whose links pass 4 MB run by bands of
                        * rows (exec.c; docs/runtime.md, stops 35 and 36) */
    QR_BANDS_OFF,      /* every node over its whole output */
    QR_BANDS_ALL,      /* every chain that can, in bands of two rows (the tests') */
} qr_bands_mode;

typedef enum qr_parts_mode {
    QR_PARTS_AUTO = 0, /* an f32 CNN's batch in parts by api.c's part_size rule */
    QR_PARTS_WHOLE,    /* the batch at once */
    QR_PARTS_1,        /* parts of 1, 2, 4 or 8 samples (the tests' and the measurements') */
    QR_PARTS_2,
    QR_PARTS_4,
    QR_PARTS_8,
} qr_parts_mode;

/* All zero: the defaults. */
typedef struct qr_options {
    char igemm[16];        /* integer GEMM and convolution: "" the CPU's best, "portable", or
                            * avx2, avxvnni, avx512vnni (when the CPU has it) */
    char sgemm[16];        /* f32 GEMM: "" the CPU's best, "portable", or avx512, avx2, ref */
    int quant_portable;    /* QuantizeLinear's and the fake quantization's portable loops, not the AVX-512 ones */
    int window_portable;   /* f32 window kernels (pools, depthwise): the portable loops */
    int f32_rows_portable; /* f32 row kernels (softmax, norms, ...): the portable ones */
    int iconv_jit;         /* a qr_iconv_jit_mode: NHWC integer convolutions on kernels compiled for their shape */
    int no_fuse;           /* no fusion: every node runs alone (the reference fusion is tested against) */
    int nhwc;              /* a qr_nhwc_mode */
    int epilogue;          /* a qr_epilogue_mode */
    int split;             /* a qr_split_mode */
    int poison;            /* outputs the executor does not zero start as 0xA5 bytes */
    int effects;           /* a qr_effects_mode */
    int bands;             /* a qr_bands_mode */
    int parts;             /* a qr_parts_mode */
    int gather_rows;       /* first layers' windows copied a pixel's row at a time, not by columns
                            * or output columns (runtime/ops/iconv_nhwc.c gather_cols_avx512,
                            * gather_stack; the tests' second path) */
    int no_winograd;       /* 1: f32 3 x 3 stride-1 channels-last convolutions direct, not by Winograd
                            * F(2x2, 3x3) (runtime/ops/wino.h: other numerics); 2 (all): by Winograd from
                            * 16 input channels on every CPU (conv.c's wino_min_channels) */
    int no_amx;            /* amx=0: integer convolutions on the AVX-512 VNNI kernels (JIT ones too) where the
                            * CPU has AMX-INT8 (runtime/ops/igemm_iconv_amx.c); the same sums */
    int no_wide16;         /* wide16=0: the AVX2 integer kernels widen each operand to i16 in their tiles, not
                            * once a call beforehand: the NHWC input (qr_iconv_wide_twin), the NCHW
                            * ConvInteger's weights (qr_igemm_wide_twin), the matrix products' A rows
                            * (qr_igemm_rc_wide_twin); the same sums */
    int f32_split_all;     /* channels-last f32 convolutions of few MACs split on the threads too,
                            * not run on one (the tests' path: the same bits either way) */
    int held_ghost;        /* every take of a held-out unit joined by a second holder that drops it before
                            * the run reads it (the tests' forced interleaving of two workers on a batch) */
    int halves_whole;      /* halves=whole: the effects' and the measurement of what ships' batches run
                            * whole, not in halves (quantizer/qmeasure.c; the tests' reference: the
                            * same sums either way) */
    int arena_pages;       /* arena-pages: 0 (auto) an executor's arenas of 2 MiB or more in 2 MiB pages
                            * where fresh pages fault in slowly (runtime/exec.c qr_exec_arena_huge),
                            * 1 (4k) never, 2 (2m) always (the tests': both paths on any machine) */
} qr_options;

/* The process's options (never NULL). Read without a lock: set them before runs start. */
const qr_options *qr_options_get(void);
/* Replaces them (NULL: the defaults). */
void qr_options_set(const qr_options *o);
/* A count of the changes to what the kernels choose by: every qr_options_set and every
 * qr_options_touch (a process-wide kernel choice changed: the JIT's specializers). What a kernel
 * chose once and kept (a node's run plan, qr_kplan_get) is chosen again when it differs. */
unsigned qr_options_epoch(void);
void qr_options_touch(void);

/* Sets option name of *o from its text value; QR_ERR with a message naming the option and the
 * values it takes. Names: kernels (auto, portable, avx2, avxvnni, avx512vnni: portable is every
 * kernel's portable path, an ISA the integer kernels'), iconv-jit (auto, 0, 1), and the tests' igemm,
 * sgemm, quant, window, f32-rows, fuse, nhwc, epilogue, split, poison, effects, bands, parts, gather,
 * winograd, amx (auto, 0), wide16 (auto, 0), f32-split (auto, all), held-ghost (0, 1), halves (auto, whole). An empty value is the default. An unknown name's
 * message lists the names. */
qr_status qr_options_parse(qr_options *o, const char *name, const char *value, qr_error *e);

#endif
