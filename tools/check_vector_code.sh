#!/bin/sh
# Counts the vector instructions (zmm/ymm registers, vpdpbusd, vfmadd) in the per-ISA clones of QRL's
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
check $O/ops/sgemm_avx512.o qr_sgemm_tile_12x32_avx512 vfmadd
check $O/ops/sgemm_avx512.o qr_sgemm_wide_3x128_avx512 vfmadd
check $O/ops/sgemm_avx2.o qr_sgemm_tile_6x16_avx2 vfmadd
check $O/ops/conv.o dw_runs_f32.avx512f 'zmm|ymm'
check $O/ops/igemm_avx512vnni.o strip vpdpbusd  # tile_8x32, tile_8x16 and tile_4 inline here
check $O/ops/igemm_avx512vnni.o strip64 vpdpbusd
check $O/ops/igemm_avx512vnni.o qr_igemv_u8s8_avx512vnni vpdpbusd
check $O/ops/igemm_avxvnni.o qr_igemm_u8s8_4x16_avxvnni vpdpbusd
check $O/ops/igemm_avx2.o tile_6 vpmaddwd  # qr_igemm_u8s8_6x8_avx2 calls it
check $O/ops/igemm_avx2.o tile_6_wide vpmaddwd  # qr_igemm_i16s8_6x8_avx2's (rows as i16)
check $O/ops/igemm_iconv_avx2.o tile_6_wide vpmaddwd  # qr_iconv_i16s8_6x8_avx2's (input as i16)
check $O/ops/window_avx2.o qr_dw_taps_f32_avx2 'vmulps.*ymm'
check $O/ops/sigmoid_avx2.o qr_sigmoid_f32_avx2 'vfmadd.*ymm'
check $O/ops/conv.o act_post_f32.avx2 ymm
check $O/ops/quant.o quantize_f32_8bit.avx512f 'zmm|ymm'
check $O/ops/quant.o dequantize_8bit_f32.avx512f 'zmm|ymm'
check $O/ops/quant.o dw_planes_runs.avx512f 'zmm|ymm'
check $O/ops/quant.o pack_image_u8.arch_x86_64_v4 'zmm|ymm'
check $O/ops/nhwc.o dw_avx512 'vpmulld.*zmm'
check $O/ops/igemm_iconv_avx512vnni.o tile_6x4 vpdpbusd
check $O/ops/iconv_nhwc.o turn16_avx512 zmm
check $O/ops/nhwc.o dw_avx2 'vpmulld.*ymm'
check $O/ops/nhwc.o qr_nhwc_maxpool_u8.arch_x86_64_v4 'zmm|ymm'
check $O/ops/nhwc.o qr_nhwc_avgpool_u8.arch_x86_64_v4 'zmm|ymm'
check $O/ops/igemm_avx512vnni.o qr_igemm_interleave4_avx512bw 'vpunpck'
check $B/obj/quantizer/quantize.o fake_quant_avx512 zmm  # qr_plan_fake_quant dispatches to it at run time
check $O/recipe.o fold_min.avx512f 'zmm|ymm'  # t_min (not a clone) calls it
# The recipes' JIT-compiled epilogue tile kernels (stdlib qlinear, tfl_linear): the example
# quantized with int8.qrl and int8-tflite.qrl into a cache of this script's own, whose modules
# (each .qmod holds an ELF object after its header) are then read.
C=$(mktemp -d)
for r in int8 int8-tflite; do
    XDG_CACHE_HOME=$C "$B/qrl" quantize examples/fmnist/fmnist_cnn.onnx --recipe recipes/$r.qrl \
        --calib "$B/data/calib_images.npy" --calib-count 16 -o "$C/$r.onnx" > /dev/null 2>&1
done
jit_check() { # symbol prefix, pattern
    for f in "$C"/qrl/*.qmod; do
        off=$(grep -obUaP '\x7fELF' "$f" 2> /dev/null | head -1 | cut -d: -f1)
        [ -n "$off" ] || continue
        tail -c +$((off + 1)) "$f" > "$C/module.so"
        sym=$(nm "$C/module.so" 2> /dev/null | awk -v p="$1" '$3 ~ "^"p {print $3; exit}')
        [ -n "$sym" ] || continue
        check "$C/module.so" "$sym" "$2"
        return
    done
    printf '  %-40s %5s  %s\n' "$1*" - "WARNING: not compiled (quantizing the example failed)"
}
jit_check qrl_kernel_qlinear_tile_u8 'zmm|ymm'
jit_check qrl_kernel_tfl_linear_tile 'zmm|ymm'
rm -rf "$C"
