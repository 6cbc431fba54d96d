#!/usr/bin/python3
"""Why a quantized model keeps the MACs it keeps in f32, from `qrl quantize --report R.json`.

Usage: /usr/bin/python3 tools/why_f32.py [--target DB] REPORT.json...

Reads each layer's effect_db (the outputs' SQNR with that layer alone quantized, as the recipe's
ranking measured it on its effect samples) and macs_needing (the MACs per sample that run on the
integers only while it is quantized) and prints, per report, one line:

* model: the report's model; int: the integer share of MACs that ships; out: its output SQNR;
* alone: the layers whose own effect is under the target (--target, default 25 dB): none of them
  can be int8 even with every other layer in f32. Their MACs (macs_needing summed, a bound: a
  layer's match can need several values) are a floor on what must stay f32;
* all-int8: the outputs' SQNR the effects predict with every measured layer quantized, adding their
  errors as powers (independent errors add; the search measures, this only reads);
* budget: how many times the target's error power that sum is: with 1.0x or less nothing has to
  go back; with more, layers must go back until the rest fits, the most error per MAC first
  (order = per_mac's greedy knapsack, which the search measures);
* back: how many of the measured layers, taken most error per MAC first, go back before the rest's
  predicted error fits the target, against how many the search sent back.

A reading of measured figures, no measurement of its own: where the search's measured tries
differ from the additive prediction (errors that cancel or compound), what shipped is the truth.
"""
import json
import math
import sys


def read(path, target):
    r = json.load(open(path))
    total = r.get("macs_per_sample") or 0.0
    ints = r.get("macs_int_per_sample") or 0.0
    layers = [l for l in r["layers"] if not l.get("dynamic")]
    budget = 10 ** (-target / 10)
    measured = [l for l in layers if l.get("effect_db") is not None]
    noise = lambda l: 0.0 if l["effect_db"] is None or l["effect_db"] == float("inf") else 10 ** (-l["effect_db"] / 10)
    alone = [l for l in measured if l["effect_db"] < target]
    alone_macs = sum(l.get("macs_needing") or 0 for l in alone)
    all_noise = sum(noise(l) for l in measured)
    # greedy knapsack over additive noise: back to f32 the most noise per MAC first (free ones first)
    left = sorted(measured, key=lambda l: -noise(l) / max(l.get("macs_needing") or 0, 1e-9))
    rest = all_noise
    back = set()
    for l in left:
        if rest <= budget:
            break
        rest -= noise(l)
        back.add(l["value"])
    return {
        "model": r["model"].split("/")[-1],
        "int": 100.0 * ints / total if total else 0.0,
        "out": r.get("output_sqnr_db"),
        "alone": len(alone),
        "alone_macs": 100.0 * alone_macs / total if total else 0.0,
        "all_int8": 10 * math.log10(1 / all_noise) if all_noise > 0 else float("inf"),
        "budget": all_noise / budget,
        "back": len(back),
        "fell_back": sum(1 for l in layers if l.get("fallback")),
        "layers": len(layers),
        "measured": len(measured),
    }


def main():
    args = sys.argv[1:]
    target = 25.0
    if args[:1] == ["--target"]:
        target = float(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    print("%-20s %6s %6s %15s %9s %9s %14s" % ("model", "int %", "out dB", "alone (MACs <=)", "all-int8", "budget",
                                                 "back (search)"))
    for p in args:
        w = read(p, target)
        out = "-" if w["out"] is None else "%.1f" % w["out"]
        print("%-20s %6.1f %6s %4d (%6.1f%%) %8.1f %8.1fx %6d (%5d)" % (w["model"], w["int"], out, w["alone"],
                                                                        w["alone_macs"], w["all_int8"], w["budget"],
                                                                        w["back"], w["fell_back"]))


if __name__ == "__main__":
    main()
