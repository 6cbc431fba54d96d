#!/bin/sh
# QRL against ONNX Runtime on tools/make_matmulint_models.py's models: ROUNDS rounds, each
# timing every model in QRL (tools/matmulint_bench.c) then in ONNX Runtime (tools/ort_bench_npy.js),
# alternating so that both see the same moments of a shared machine; prints the best of the rounds
# per model, runtime and thread count, QRL's GMAC/s and the ratio ORT ms / QRL ms.
# Usage: tools/matmulint_compare.sh BUILD_DIR MODELS_DIR [ROUNDS [THREADS...]]
#   (needs BUILD_DIR/matmulint_bench and `make ort`; BENCH_MIN_TIME as the two tools take it)
B=$1
M=$2
ROUNDS=${3:-3}
shift 3 2>/dev/null
THREADS=${*:-1}
export ORT_NODE_MODULE="${ORT_NODE_MODULE:-$(cd "$B" && pwd)/npm/node_modules/onnxruntime-node}"
out=$(mktemp)
r=0
while [ $r -lt "$ROUNDS" ]; do
    for f in "$M"/*.onnx; do
        c=$(basename "$f" .onnx)
        for t in $THREADS; do
            "$B/matmulint_bench" "$f" "$t" "$M/${c}"_?.npy | sed "s/^/qrl $c /" >> "$out"
            node "$(dirname "$0")/ort_bench_npy.js" "$f" "$t" "$M/${c}"_?.npy | sed "s/^/ort $c /" >> "$out"
        done
    done
    r=$((r + 1))
done
printf "%-14s %7s %10s %10s %9s %8s\n" model threads "qrl ms" "ort ms" "GMAC/s" ort/qrl
# lines: "qrl CASE MODEL threads T: MS ms, G GMAC/s (...)" and "ort CASE MODEL threads T: MS ms (...)"
awk '{ key = $2 " " substr($5, 1, length($5) - 1); ms = $6 + 0;
       if ($1 == "qrl") { if (!(key in q) || ms < q[key]) { q[key] = ms; g[key] = ms > 0 ? $(NF - 1) / ms * 1e-6 : 0 } }
       else if (!(key in o) || ms < o[key]) o[key] = ms }
     END { for (k in q) { split(k, a, " "); printf "%-14s %7s %10.3f %10.3f %9.1f %8.2f\n", a[1], a[2], q[k], o[k], g[k], o[k] / q[k] } }' \
    "$out" | sort
rm -f "$out"
