#!/bin/sh
# Counts the vector instructions (zmm/ymm registers, vpdpbusd) in the per-ISA clones of QRL's
# kernels, from objdump of the build's objects: a clone GCC left scalar (as -O2's "very cheap"
# cost model once did) shows 0 and a warning. Part of `make bench`; never fails.
# Usage: tools/check_vector_code.sh [BUILD_DIR]
B=${1:-build}
O=$B/obj/runtime
command -v objdump > /dev/null || { echo "vector code: objdump missing (binutils)"; exit 0; }
check() { # object symbol pattern
    n=$(objdump -d --no-show-raw-insn "$1" 2>/dev/null | awk -v s="<$2>:" '$2 == s {on = 1; next} /^$/ {on = 0} on' |
        grep -cE "$3")
    printf '  %-40s %5d  %s\n' "$2" "$n" "$([ "$n" -gt 0 ] && echo ok || echo 'WARNING: no vector code')"
}
echo "vector code (instructions on zmm/ymm registers, or vpdpbusd, per clone):"
check $O/ops/conv.o gemm_rows_f32.avx512f zmm
check $O/ops/conv.o gemm_rows_f32.avx2 ymm
check $O/ops/conv.o dw_padded_f32.avx512f 'zmm|ymm'
check $O/ops/igemm_avx512vnni.o tile_8x32 vpdpbusd
check $O/ops/igemm_avxvnni.o qr_igemm_u8s8_4x16_avxvnni vpdpbusd
check $O/ops/igemm_avx2.o qr_igemm_u8s8_4x8_avx2 vpmaddwd
check $O/ops/quant.o quantize_f32_8bit.avx512f 'zmm|ymm'
check $O/ops/quant.o dw_planes_padded.avx512f 'zmm|ymm'
check $O/ops/quant.o pack_image_u8.arch_x86_64_v4 'zmm|ymm'
check $O/ops/igemm_avx512vnni.o qr_igemm_interleave4_avx512bw 'vpunpck'
check $B/obj/quantizer/quantize.o qr_plan_fake_quant.avx512f 'zmm|ymm'
check $O/recipe.o t_min.avx512f 'zmm|ymm'
