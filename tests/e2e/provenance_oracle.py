#!/usr/bin/python3
"""The oracle of tests/e2e/test_provenance.c: reads an export's metadata with the onnx package and
checks it against hashes computed here from the documented definitions (docs/quantizer.md,
"Provenance"), never from QRL's own code:
  qrl.recipe_sha256       SHA-256 over the recipe's files in load order (a depth-first walk of
                          `import "..."` lines: every import before its importer, in the order
                          written, each file once), each as its size in decimal, "\\n", its bytes
  qrl.calibration_sha256  SHA-256 of the first N calibration samples' raw little-endian f32 bytes
  qrl.calibration_samples N
  qrl.validate_samples    V: of the N, those the recipe's validate held out (given, not derived)

Usage: provenance_oracle.py MODEL.onnx RECIPE.qrl STDLIB_DIR CALIB.npy RECIPE_NAME N V
Prints "OK" or what differs."""
import hashlib
import os
import re
import sys

import numpy as np
import onnx


def recipe_sha256(path, stdlib):
    order, seen = [], set()

    def visit(p):
        real = os.path.realpath(p)
        if real in seen:
            return
        seen.add(real)
        text = open(p, "rb").read()
        for imp in re.findall(rb'^\s*import\s+"([^"]+)"', text, re.M):
            near = os.path.join(os.path.dirname(p), imp.decode())
            visit(near if os.path.exists(near) else os.path.join(stdlib, imp.decode()))
        order.append(text)

    visit(path)
    h = hashlib.sha256()
    for t in order:
        h.update(b"%d\n" % len(t))
        h.update(t)
    return h.hexdigest()


def main(model, recipe, stdlib, calib, name, n, v):
    meta = {p.key: p.value for p in onnx.load(model).metadata_props}
    x = np.load(calib)[: int(n)]
    want = {"qrl.recipe": name, "qrl.recipe_sha256": recipe_sha256(recipe, stdlib),
            "qrl.calibration_sha256": hashlib.sha256(np.ascontiguousarray(x, "<f4").tobytes()).hexdigest(),
            "qrl.calibration_samples": str(int(n)), "qrl.validate_samples": str(int(v))}
    bad = ["%s: %r, expected %r" % (k, meta.get(k), v) for k, v in want.items() if meta.get(k) != v]
    if not meta.get("qrl.version"):
        bad.append("no qrl.version")
    print("; ".join(bad) if bad else "OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
