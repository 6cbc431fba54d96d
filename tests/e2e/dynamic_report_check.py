#!/usr/bin/python3
"""Checks what --qparams and --report say of the tensors a dynamic recipe quantizes at run time
(tests/e2e/test_dynamic.c). Usage: dynamic_report_check.py QPARAMS.json REPORT.json RANGES.json
PER_ROW
RANGES.json: the f32 range each dynamically quantized input had on the calibration samples, as
tools/make_dynamic_cnn.py computed it with PyTorch; PER_ROW: how many of them the recipe quantizes
per row. Every one must be listed in both files as dynamic, without scale, zero point or clip
range, with that observed range; prints what differs and exits 1."""
import json
import math
import sys


def close(a, b):
    return a is not None and math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)  # the report prints 6 digits


def main():
    qp, rep, ranges, per_row = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(
        open(sys.argv[3])), int(sys.argv[4])
    bad = []
    for name, entries in (("qparams", qp["activations"]), ("report", rep["layers"])):
        dyn = [e for e in entries if e.get("dynamic") is True]
        if len(dyn) != len(ranges):
            bad.append("%s: %d dynamic entries, expected %d" % (name, len(dyn), len(ranges)))
        rows = sum(1 for e in dyn if e.get("per_row") is True)
        if rows != per_row:
            bad.append("%s: %d per row, expected %d" % (name, rows, per_row))
        for e in dyn:
            want = "dynamic per row" if e.get("per_row") else "dynamic per tensor"
            if e.get("how") != want:
                bad.append("%s: %s how %r" % (name, e["value"], e.get("how")))
            for k in ("scale", "zero_point", "clip_min", "clip_max", "sqnr_db"):
                if e.get(k, None) is not None:
                    bad.append("%s: %s has %s %r" % (name, e["value"], k, e[k]))
            if e.get("dtype") != "u8":
                bad.append("%s: %s dtype %r" % (name, e["value"], e.get("dtype")))
        left = list(ranges)
        for e in dyn:
            hit = [r for r in left if close(e.get("observed_min"), r["min"]) and close(e.get("observed_max"), r["max"])]
            if not hit:
                bad.append("%s: %s observed [%r, %r], in none of %r" % (name, e["value"], e.get("observed_min"),
                                                                           e.get("observed_max"), left))
            else:
                left.remove(hit[0])
        for e in entries:
            if e.get("dynamic") is not True and e.get("dynamic") is not False:
                bad.append("%s: %s says nothing of dynamic" % (name, e["value"]))
    print("\n".join(bad) if bad else "ok")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
