#!/usr/bin/python3
"""The qparams of a QDQ ONNX model, read with onnx alone: the oracle of the installed C example
(examples/c/qparams_backend.c, tests/e2e/test_install.c). One line per quantized tensor, by the
name the model before quantization gave it, as the example prints them:

    NAME  DTYPE  axis=A  scale=S[,S...]  zero_point=Z[,Z...]

A tensor's name is the output of the DequantizeLinear that gives it back in float, except for a
graph input, which a QuantizeLinear reads directly (its DequantizeLinear's output is new)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DTYPES = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64"}


def main(path):
    g = onnx.load(path).graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    inputs = {i.name for i in g.input}
    lines = {}
    for d in g.node:
        if d.op_type != "DequantizeLinear" or d.input[1] not in inits:
            continue
        x = d.input[0]
        if x in inits:
            name, dtype = d.output[0], inits[x].data_type
        else:
            q = producer.get(x)
            if q is None or q.op_type != "QuantizeLinear":
                continue
            name = q.input[0] if q.input[0] in inputs else d.output[0]
            zp = inits.get(q.input[2]) if len(q.input) > 2 else None
            dtype = zp.data_type if zp is not None else 2
        scale = numpy_helper.to_array(inits[d.input[1]]).astype(np.float32).reshape(-1)
        if len(d.input) > 2 and d.input[2] in inits:
            zero = numpy_helper.to_array(inits[d.input[2]]).astype(np.int64).reshape(-1)
        else:
            zero = np.zeros(scale.shape, np.int64)
        axis = -1
        if numpy_helper.to_array(inits[d.input[1]]).ndim > 0:
            axis = next((a.i for a in d.attribute if a.name == "axis"), 1)
        lines[name] = "%s\t%s\taxis=%d\tscale=%s\tzero_point=%s" % (
            name, DTYPES.get(dtype, "?"), axis, ",".join("%.9g" % float(s) for s in scale),
            ",".join("%d" % int(z) for z in zero))
    for name in sorted(lines):
        print(lines[name])


if __name__ == "__main__":
    main(sys.argv[1])
