"""The fallback's `order = per_mac` rederived from its report (tests/e2e/test_quantize.c).

Usage: /usr/bin/python3 tests/e2e/permac_oracle.py MODEL.onnx REPORT.json

Greedy knapsack over additive noise, written from the rule in docs/quantizer.md, not from
the C: each ranked layer's noise is 10^(-effect_db/10); its cost the MACs, counted here from
the ONNX weights and output shapes, of the Convs it feeds or produces that are still on the
integers; the layer with the most noise per MAC goes next (cost 0 first). Prints the order,
and exits 1 unless the layers the report says fell back are the first k of it.
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def main(model_path, report_path):
    m = shape_inference.infer_shapes(onnx.load(model_path))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dims = {v.name: [d.dim_value or 1 for d in v.type.tensor_type.shape.dim]
            for v in list(m.graph.value_info) + list(m.graph.output)}
    convs = []  # (MACs a sample, the activations it reads or writes)
    for n in m.graph.node:
        if n.op_type == "Conv":
            k = w[n.input[1]]
            macs = int(np.prod(dims[n.output[0]][1:])) * int(np.prod(k.shape[1:]))
            convs.append((macs, {n.input[0], n.output[0]}))
    r = json.load(open(report_path))
    ranked = [l for l in r["layers"] if l["effect_db"] is not None]
    noise = {l["value"]: 10 ** (-l["effect_db"] / 10) for l in ranked}
    alive = [True] * len(convs)
    order, left = [], set(noise)
    while left:
        def score(v):
            cost = sum(c[0] for i, c in enumerate(convs) if alive[i] and v in c[1])
            return (-1, 0) if noise[v] <= 0 else (float("inf"), noise[v]) if cost == 0 else (noise[v] / cost, 0)
        v = max(sorted(left), key=score)
        order.append(v)
        left.discard(v)
        alive = [a and v not in c[1] for a, c in zip(alive, convs)]
    fell = {l["value"] for l in r["layers"] if l["fallback"]}
    print("order", ",".join(order), "fell", ",".join(sorted(fell)))
    return 0 if fell == set(order[:len(fell)]) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
