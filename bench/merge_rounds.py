#!/usr/bin/python3
"""bench/merge_rounds.py OUT ROUND.json...: one timing file from the rounds `make bench` takes in
turns (bench/run.sh: every CNN's QRL and ORT speed commands run ROUNDS times, one after the other,
so that a ratio compares times taken minutes apart at most, not one tool's whole run against the
next's: on the Zen 5 VMs a run's speed drifts by 10-25% within minutes, docs/runtime.md "Stop 57").

For each configuration (variant, batch, threads), the round whose median time is the median of the
rounds' is kept as it is (its GMAC/s and images/s belong to its median); its `runs` become the sum
over the rounds, `ms_min` the least of them, and `rounds` their number. The files are `qrl bench
--json`'s or tools/ort_bench.js's (the same results list); the other keys come from the first."""
import json
import os
import sys


def key(r):
    return (r.get("variant"), r.get("batch"), r.get("threads"))


def merge(docs):
    out = dict(docs[0])
    by = {}
    order = []
    for d in docs:
        for r in d.get("results", []):
            k = key(r)
            if k not in by:
                by[k] = []
                order.append(k)
            by[k].append(r)
    results = []
    for k in order:
        rs = sorted(by[k], key=lambda r: r["ms_median"])
        kept = dict(rs[(len(rs) - 1) // 2])  # the lower median of an even count
        kept["runs"] = sum(r.get("runs", 0) for r in rs)
        kept["ms_min"] = min(r.get("ms_min", r["ms_median"]) for r in rs)
        kept["rounds"] = len(rs)
        results.append(kept)
    out["results"] = results
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: bench/merge_rounds.py OUT ROUND.json...")
    docs = []
    for p in sys.argv[2:]:
        try:
            with open(p) as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as e:
            print("bench: %s: skipped (%s)" % (p, e), file=sys.stderr)
    if not docs:  # no round wrote its file: the column stays empty, as with one failed run
        sys.exit("bench: no round of %s" % os.path.basename(sys.argv[1]))
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(merge(docs), f)
    os.replace(tmp, sys.argv[1])


if __name__ == "__main__":
    main()
