#!/usr/bin/python3
"""One markdown table per model from bench/j_ladder.sh's (or bench/j_sets.sh's)
runs: a row per recipe with integer MACs, layers to f32, the summary's
calibrate and validate figures, ONNX Runtime's worst output SQNR on each
unseen set (bold under 25 dB; "-" where the recipe was not measured on it),
CPU seconds and peak MB.

Usage: ladder_table.py OUTDIR "DIR..." RECIPE...
       ladder_table.py --runs OUTDIR "DIR..." [--runs OUTDIR "DIR..."]... RECIPE...
OUTDIR/NAME/table.tsv holds a run of recipe NAME (a .qrl path's base name) on
the sets DIR... With several --runs, a recipe's row gathers its figures on
every set of every run that has it; the quantize's columns are those of the
first such run (the same recipe, model and calibration file quantize the same
graph: the integer MACs and dB agree between runs, the seconds vary)."""
import os
import sys


def cell_db(v):
    try:
        return "**%s**" % v if float(v) < 25.0 else v
    except ValueError:
        return v


def load(out, name):
    got = {}
    path = os.path.join(out, name, "table.tsv")
    if os.path.exists(path):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            got[f[0]] = f
    return got


def main():
    args = sys.argv[1:]
    runs = []
    if args and args[0] != "--runs":
        runs.append((args[0], args[1].split()))
        args = args[2:]
    while args and args[0] == "--runs":
        runs.append((args[1], args[2].split()))
        args = args[3:]
    names = [os.path.basename(r)[:-4] if r.endswith(".qrl") else r for r in args]
    sets = []
    for _, dirs in runs:
        for d in dirs:
            if os.path.basename(d.rstrip("/")) not in sets:
                sets.append(os.path.basename(d.rstrip("/")))
    table = {}  # (name, model) -> (quantize columns, {set: dB})
    models = []
    for out, dirs in runs:
        here = [os.path.basename(d.rstrip("/")) for d in dirs]
        for name in names:
            for m, f in load(out, name).items():
                if m not in models:
                    models.append(m)
                q, dbs = table.setdefault((name, m), (f[:8], {}))
                for s, v in zip(here, f[8:]):
                    dbs.setdefault(s, v)
    for m in models:
        print("\n#### %s\n" % m)
        print("| recipe | integer MACs | to f32 | calibrate dB | validate dB | %s | CPU s | peak MB |"
              % " | ".join(sets))
        print("|---" * (7 + len(sets)) + "|")
        for name in names:
            if (name, m) not in table:
                continue
            q, dbs = table[(name, m)]
            if len(q) < 8:
                print("| %s | %s |" % (name, " ".join(q[1:])))
                continue
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, q[5], q[4], q[6], q[7], " | ".join(cell_db(dbs.get(s, "-")) for s in sets), q[1], q[3]))


if __name__ == "__main__":
    main()
