#!/bin/sh
# The fallback's ranking (rank = effect, probe, gain) per model (QRL-J, stop 41): one qrl quantize
# per model with --profile: CPU seconds (user+sys, /usr/bin/time -v), the effects phase's CPU
# seconds (the ranking: --profile's "effects" line), the layers sent to f32, the integer MAC
# share, the summary's output SQNR on the validate part, ONNX Runtime's on the unseen samples
# (tools/ort_sqnr.js; the worst output), and, given a reference directory of the same table's
# runs (REF: e.g. rank = effect's), the Spearman correlation of the layers' effect_db against
# the reference's over the layers both ranked. Measures; never pass/fail.
# Usage: bench/rank_table.sh [--test-dir DIR] [--ref REFDIR] QRL RECIPE OUTDIR MODEL...
#   MODEL as in bench/fallback_table.sh (a name in build/realmodels, or tv:N)
set -e
TESTDIR= REF=
while :; do
    case $1 in
    --test-dir) TESTDIR=$2; shift 2 ;;
    --ref) REF=$2; shift 2 ;;
    *) break ;;
    esac
done
QRL=$1 RECIPE=$2 OUT=$3
shift 3
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
printf 'model\tcpu_s\teffects_cpu_s\tto_f32\tint_macs\tvalidate_db\tunseen_db\tspearman\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    log=$OUT/$n.log
    test=${TESTDIR:-$d}/${data}_test.npy
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" --profile \
        -o "$OUT/$n.onnx" --report "$OUT/$n.json" > "$log" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$log"; continue; }
    cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$log")
    eff=$(awk '$1 == "effects" {print $3}' "$log")
    f32=$(sed -n 's/.*; \([0-9]*\) tensors\{0,1\} fell back.*/\1/p' "$log")
    macs=$(sed -n 's/.* dB against f32.*; \([0-9.]*%\) of .*/\1/p' "$log")
    val=$(sed -n 's/^output: *SQNR \([-0-9.inf]*\) dB.*/\1/p' "$log")
    unseen=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$test" |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f" % min(x["sqnr_db"] for x in r["outputs"]))')
    rho=-
    if [ -n "$REF" ] && [ -f "$REF/$n.json" ]; then
        rho=$(/usr/bin/python3 - "$REF/$n.json" "$OUT/$n.json" <<'PY'
import json, sys
import numpy as np
def eff(p):
    return {l["value"]: l["effect_db"] for l in json.load(open(p))["layers"] if l.get("effect_db") is not None}
# the layers the reference ranked; one this run ranked with no effect_db (null: rank = probe's
# estimate below its noise, +inf) ties last
a, b = eff(sys.argv[1]), eff(sys.argv[2])
ks = list(a)
b = {k: b.get(k, float("inf")) for k in ks}
def ranks(v):  # +inf (below the estimate's noise) ties last; average ranks for ties
    v = np.array([x if np.isfinite(x) else 1e9 for x in v])
    o = v.argsort(kind="stable"); r = np.empty(len(v)); r[o] = np.arange(len(v))
    for u in np.unique(v):
        r[v == u] = r[v == u].mean()
    return r
if len(ks) < 3:
    print("-")
else:
    print("%.2f (%d)" % (np.corrcoef(ranks([a[k] for k in ks]), ranks([b[k] for k in ks]))[0, 1], len(ks)))
PY
)
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$cpu" "${eff:--}" "$f32" "$macs" "$val" "$unseen" "$rho"
done
