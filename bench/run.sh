#!/bin/sh
# Inference benchmark of `make bench` (QRL-E), in one run on this machine: for the bundled
# Fashion-MNIST CNN, a small ResNet with residual Adds (tools/make_bench_models.py) and
# torchvision ResNet-18 and MobileNetV2 (random weights, tools/export_torchvision.py):
#   QRL int8 (the all-int8 export of recipes/int8-minmax.qrl, run on QRL's generic integer kernels, iconv-jit=0; the
#   quantize time and SQNR lines are recipes/int8.qrl's, with its fallback), the same with
#   --iconv-jit --option bands=auto (kernels compiled per layer, the epilogue fused, chains of
#   convolutions over large links run band by band) and QRL f32                - qrl bench
#   ONNX Runtime (onnxruntime-node) on the same f32 model and on QRL's export  - tools/ort_bench.js
#   PyTorch f32 and FX post-training int8 (not for the CNN: ONNX only)         - tools/torch_bench.py
#   the u8s8 VNNI and f32 FMA peak of one core                                 - bench/peak.c
# at batch 1 and 64, 1 and 2 threads (QRL's and ORT's commands in BENCH_ROUNDS turns, 3 by default,
# each configuration's median round kept: bench/merge_rounds.py), and `qrl quantize`: its calibration pass against one f32
# pass over the same samples (as it reports them), and its whole time. bench/report.py prints the table of ratios against the targets
# and writes bench/results.json. Measures; never pass/fail.
# QRL-H's transformers (tools/make_transformer_models.py --size bench, random weights, in
# BUILD_DIR/bench/tf): bert, a BERT-layout encoder (x [batch, 128, 256] f32, batch 1, 8 and 64) and
# gpt, a GPT-layout decoder (ids [1, 64] i64, fixed batch 1: batch 1 only), one thread:
#   accuracy first, tools/transformer_sqnr.py: `qrl quantize` with recipes/int8.qrl and
#   recipes/int8-dynamic.qrl (the exports, the MAC share, the quantize time), the output SQNR on
#   the 16 test samples of QRL's integer graph, of ORT on the export and of PyTorch's
#   quantize_dynamic;
#   then the times: QRL int8 static and dynamic (each recipe's integer graph: qrl bench --recipe),
#   QRL f32, ORT on each export and on the f32 model, PyTorch f32 and quantize_dynamic.
# A missing recipe or a failed quantize leaves its columns empty with a one-line message; the
# run goes on. vit (torchvision ViT-B/32) and swin (torchvision Swin-T) add the accuracy row only (no
# times); so does gpt_outliers (gpt with outlier LayerNorm channels: recipes/int8.qrl, int8-smooth.qrl
# and int8-dynamic.qrl, SmoothQuant's case).
# int4 (QRL-I), one thread, batch 1: one MatMul of LLM shapes (K x N = 4096 x 4096, 4096 x 11008,
# random weights rounded to int4 in blocks of 32, tools/make_nbits_models.py) as MatMulNBits at
# accuracy_level 0 (f32 activations) and 4 (int8 activations), on QRL's int4 kernels and on ONNX
# Runtime, against QRL's int8 GEMV on the same MatMul (recipes/int8-dynamic.qrl's integer graph:
# int8 weights per column, activations quantized per row at run time).
# Usage: bench/run.sh [BUILD_DIR] [MIN_TIME_SECONDS] [MODEL...]
#   models: fmnist_cnn small_resnet resnet18 mobilenet_v2 bert gpt int4 (default: all), vit, swin, gpt_outliers
#   e.g. the transformer rows alone: sh bench/run.sh build 1.0 bert gpt  (make bench-transformers)
set -e
B=${1:-build}
MIN=${2:-1.0}
# the CNN speed rows: how many turns MIN is shared among (bench/merge_rounds.py)
ROUNDS=${BENCH_ROUNDS:-3}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
MODELS=${*:-fmnist_cnn small_resnet resnet18 mobilenet_v2 bert gpt int4}
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
D=$B/bench
RM=$B/realmodels
mkdir -p "$D"
export NODE_PATH=$B/npm/node_modules
TF=$D/tf
CNNS=
for name in $MODELS; do
    case $name in bert | gpt | gpt_outliers | vit | swin | int4) ;; *) CNNS="$CNNS $name" ;; esac
done
$PY -c 'import torchvision' 2> /dev/null || {
    echo "bench: installing python3-torchvision (the torchvision models)" >&2
    apt-get install -y python3-torchvision > /dev/null
}
cc -O2 -Wall -Wextra -Werror bench/peak.c -o "$D/peak"
"$D/peak" > "$D/peak.json"
echo "peak (one core): $(cat "$D/peak.json")"
sh tools/check_vector_code.sh "$B"
if [ -n "$CNNS" ]; then
    [ -f "$D/small_resnet.onnx" ] || $PY tools/make_bench_models.py "$D" > /dev/null
    [ -f "$RM/resnet18_dyn.onnx" ] && [ -f "$RM/mobilenet_v2_dyn.onnx" ] || $PY tools/export_torchvision.py "$RM" > /dev/null
fi
case " $MODELS " in *" vit "*) VIT=--vit ;; *) VIT= ;; esac
case " $MODELS " in *" swin "*) SWIN=--swin ;; *) SWIN= ;; esac
case " $MODELS " in *" bert "* | *" gpt "* | *" gpt_outliers "* | *" vit "* | *" swin "*)
    [ -f "$TF/bert.onnx" ] && [ -f "$TF/gpt.onnx" ] && [ -f "$TF/gpt_outliers.onnx" ] &&
        { [ -z "$VIT" ] || [ -f "$TF/vit.onnx" ]; } &&
        { [ -z "$SWIN" ] || [ -f "$TF/swin.onnx" ]; } ||
        $PY tools/make_transformer_models.py "$TF" --size bench $VIT $SWIN > "$TF.log" 2>&1 ||
        { echo "bench: tools/make_transformer_models.py failed (see $TF.log)" >&2; exit 1; } ;;
esac

# out FILE CMD...: CMD's stdout to FILE when CMD succeeds; else no FILE and a one-line message
out() {
    f=$1
    shift
    if "$@" > "$f.tmp" 2> "$f.err"; then
        mv "$f.tmp" "$f"
        rm -f "$f.err"
    else
        rm -f "$f" "$f.tmp"
        echo "bench: $(basename "$f" .json) failed (its column stays empty): $(grep -m1 -i error "$f.err" ||
            tail -n 1 "$f.err")" >&2
    fi
}

# A transformer (bert, gpt; vit, swin: accuracy only), one thread; every step may fail without
# stopping the run.
transformer() {
    name=$1
    f32=$TF/$name.onnx calib=$TF/${name}_calib.npy
    # one sample's shape; gpt: fixed batch 1, i64 ids over its vocabulary
    shape=$($PY -c "import numpy; print(','.join(map(str, numpy.load('$calib', mmap_mode='r').shape[1:])))")
    batches=1,8,64 vocab=8
    if [ "$name" = gpt ]; then
        batches=1
        vocab=$($PY -c "import torch; print(torch.load('$TF/gpt.pt')['tok.weight'].shape[0])")
    fi
    echo "== $name"
    # accuracy, and the exports $TF/$name.int8.onnx, $TF/$name.int8-dynamic.onnx
    rm -f "$TF/$name".int8*.onnx
    # gpt_outliers (SmoothQuant's case): the stock recipe, the same after smoothquant, dynamic
    recipes=
    [ "$name" = gpt_outliers ] &&
        recipes="--recipe recipes/int8.qrl --recipe recipes/int8-smooth.qrl --recipe recipes/int8-dynamic.qrl"
    $PY tools/transformer_sqnr.py "$name" "$TF" --qrl "$B/qrl" --json "$D/$name.sqnr.json" $recipes ||
        { rm -f "$D/$name.sqnr.json"; echo "bench: tools/transformer_sqnr.py failed on $name" >&2; }
    case $name in gpt_outliers | vit | swin) return 0 ;; esac
    rm -f "$D/$name.qrl_f32.json"
    $B/qrl bench "$f32" --batch $batches --threads 1 --min-time "$MIN" --json "$D/$name.qrl_f32.json" ||
        echo "bench: qrl bench failed on $name f32 (its column stays empty)" >&2
    out "$D/$name.ort_f32.json" node tools/ort_bench.js "$f32" "$shape" $batches 1 "$MIN" $vocab
    for tag in int8 int8-dynamic; do
        j=$(echo $tag | tr - _)
        rm -f "$D/$name.qrl_$j.json" "$D/$name.ort_$j.json"
        if [ ! -f "$TF/$name.$tag.onnx" ]; then
            echo "bench: no $name export with recipes/$tag.qrl (missing or quantize failed): its columns stay empty" >&2
            continue
        fi
        # the recipe's integer graph (the 'int8' rows; its 'fp32' rows are a second f32 measurement)
        $B/qrl bench "$f32" --recipe "recipes/$tag.qrl" --calib "$calib" --batch $batches --threads 1 \
            --min-time "$MIN" --json "$D/$name.qrl_$j.json" 2> "$D/$name.qrl_$j.err" ||
            echo "bench: qrl bench --recipe recipes/$tag.qrl failed on $name (its column stays empty): $(tail -n 1 \
                "$D/$name.qrl_$j.err")" >&2
        out "$D/$name.ort_$j.json" node tools/ort_bench.js "$TF/$name.$tag.onnx" "$shape" $batches 1 "$MIN" $vocab
    done
    out "$D/$name.torch.json" $PY tools/torch_bench.py "$name" "$TF/$name.pt" "$calib" $batches 1 "$MIN"
}

# The int4 GEMV rows: per shape, QRL and ORT on MatMulNBits at levels 0 and 4, QRL int8 dynamic.
int4_gemv() {
    I4=$D/int4
    mkdir -p "$I4"
    echo "== int4 (GEMV, batch 1, one thread)"
    for shape in 4096x4096 4096x11008; do
        k=${shape%x*} n=${shape#*x}
        [ -f "$I4/$shape.l4.onnx" ] || { $PY tools/make_nbits_models.py "$I4" "$shape" "$k" "$n" 32 1 --no-ref &&
            mv "$I4/${shape}_l0.onnx" "$I4/$shape.l0.onnx" && mv "$I4/${shape}_l4.onnx" "$I4/$shape.l4.onnx"; } ||
            { echo "bench: tools/make_nbits_models.py failed on $shape" >&2; continue; }
        for l in 0 4; do
            rm -f "$D/int4.$shape.qrl_l$l.json"
            $B/qrl bench "$I4/$shape.l$l.onnx" --batch 1 --threads 1 --min-time "$MIN" \
                --json "$D/int4.$shape.qrl_l$l.json" > /dev/null ||
                echo "bench: qrl bench failed on int4 $shape level $l (its column stays empty)" >&2
            out "$D/int4.$shape.ort_l$l.json" node tools/ort_bench.js "$I4/$shape.l$l.onnx" "$k" 1 1 "$MIN"
        done
        rm -f "$D/int4.$shape.qrl_int8.json"
        $B/qrl bench "$I4/${shape}_f32.onnx" --recipe recipes/int8-dynamic.qrl --calib "$I4/${shape}_x.npy" --batch 1 \
            --threads 1 --min-time "$MIN" --json "$D/int4.$shape.qrl_int8.json" > /dev/null 2>&1 ||
            echo "bench: qrl bench --recipe recipes/int8-dynamic.qrl failed on int4 $shape (its column stays empty)" >&2
    done
}

# name, f32 model, calibration samples, one sample's shape, torch model (- for none), its state dict
model_row() {
    case $1 in
    fmnist_cnn) echo "examples/fmnist/fmnist_cnn.onnx $B/data/calib_images.npy 1,28,28 - -" ;;
    small_resnet) echo "$D/small_resnet.onnx $D/small_resnet_calib.npy 3,32,32 small_resnet $D/small_resnet.pt" ;;
    resnet18 | mobilenet_v2) echo "$RM/${1}_dyn.onnx $RM/tv_calib.npy 3,224,224 $1 $RM/$1.pt" ;;
    *) echo "bench: unknown model $1" >&2; exit 2 ;;
    esac
}

for name in $MODELS; do
    case $name in bert | gpt | gpt_outliers | vit | swin) transformer "$name"; continue ;; int4) int4_gemv; continue ;; esac
    set -- $(model_row "$name")
    f32=$1 calib=$2 shape=$3 tname=$4 state=$5
    q8=$D/$name.int8.onnx
    echo "== $name"
    t0=$(date +%s.%N)
    # one thread, as the target and the table say (quantize defaults to every core)
    $B/qrl quantize "$f32" --recipe recipes/int8.qrl --calib "$calib" -o "$D/$name.int8-fallback.onnx" --threads 1 \
        > "$D/$name.quantize.txt"
    t1=$(date +%s.%N)
    # the speed rows run the all-integer export (recipes/int8-minmax.qrl: every layer int8, no
    # fallback), QRL and ORT alike: int8.qrl's fallback leaves a model's sensitive layers f32 (half
    # of MobileNetV2's MACs with random weights), which would time f32 kernels as int8
    $B/qrl quantize "$f32" --recipe recipes/int8-minmax.qrl --calib "$calib" -o "$q8" --threads 1 \
        > "$D/$name.quantize_all8.txt"
    # "calibration: N samples in X ms (one fp32 pass: Y ms, ratio R)"
    cal=$(sed -n 's/^calibration: \([0-9]*\) samples in \([0-9.]*\) ms (one fp32 pass: \([0-9.]*\) ms.*/\1 \2 \3/p' \
        "$D/$name.quantize.txt")
    set -- $cal
    echo "{\"quantize_s\": $(awk "BEGIN { print $t1 - $t0 }"), \"samples\": $1, \"calib_ms\": $2, \"fp32_pass_ms\": $3}" \
        > "$D/$name.quantize.json"
    grep -E "^(calibration|output):" "$D/$name.quantize.txt"
    echo "all-int8 export (the speed rows): $(grep -E "^output:" "$D/$name.quantize_all8.txt")"
    # the speed rows in ROUNDS turns of MIN / ROUNDS seconds each, QRL's and ORT's commands one after
    # the other, each configuration's median round kept (bench/merge_rounds.py): one command's whole
    # run against the next's compared times taken minutes apart on a VM that drifts within minutes
    rmin=$(awk "BEGIN { print $MIN / $ROUNDS }")
    for r in $(seq "$ROUNDS"); do
        $B/qrl bench "$f32" --batch 1,64 --threads 1,2 --min-time "$rmin" --json "$D/$name.qrl_f32.r$r.json"
        # the generic kernels alone (by default, iconv-jit=auto, kernels compiled in the background
        # would replace them during the timed runs)
        $B/qrl bench "$q8" --option iconv-jit=0 --batch 1,64 --threads 1,2 --min-time "$rmin" \
            --json "$D/$name.qrl_int8.r$r.json"
        # phase 2: kernels compiled per layer shape, the epilogue fused (compiled before the timed
        # runs); chains of convolutions whose links pass 4 MB band by band (bands=auto, the default
        # since stop 36, when the compiler shows the epilogues take their convolution's input for its
        # type alone; said here as well so the row means the same in older builds; the same bits on
        # the four CNNs: docs/runtime.md, stops 35 and 36)
        $B/qrl bench --iconv-jit --option bands=auto "$q8" --batch 1,64 --threads 1,2 --min-time "$rmin" \
            --json "$D/$name.qrl_int8_jit.r$r.json"
        node tools/ort_bench.js "$f32" "$shape" 1,64 1,2 "$rmin" > "$D/$name.ort_f32.r$r.json"
        node tools/ort_bench.js "$q8" "$shape" 1,64 1,2 "$rmin" > "$D/$name.ort_int8.r$r.json"
    done
    for t in qrl_f32 qrl_int8 qrl_int8_jit ort_f32 ort_int8; do
        $PY bench/merge_rounds.py "$D/$name.$t.json" "$D/$name.$t".r*.json
        rm -f "$D/$name.$t".r*.json
    done
    if [ "$tname" != - ]; then
        $PY tools/torch_bench.py "$tname" "$state" "$calib" 1,64 1,2 "$MIN" > "$D/$name.torch.json" ||
            echo "bench: PyTorch failed on $name (its column stays empty)" >&2
    else
        rm -f "$D/$name.torch.json"
    fi
done
$PY bench/report.py "$D" bench/results.json $MODELS
