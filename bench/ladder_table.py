#!/usr/bin/python3
"""One markdown table per model from bench/j_ladder.sh's runs: a row per recipe
with integer MACs, layers to f32, the summary's calibrate and validate figures,
ONNX Runtime's worst output SQNR on each unseen set (bold under 25 dB), CPU
seconds and peak MB. Usage: ladder_table.py OUTDIR "DIR..." RECIPE..."""
import os
import sys


def rows(out, recipe):
    name = os.path.basename(recipe)[:-4] if recipe.endswith(".qrl") else recipe
    got = {}
    path = os.path.join(out, name, "table.tsv")
    if os.path.exists(path):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            got[f[0]] = f
    return name, got


def cell_db(v):
    try:
        return "**%s**" % v if float(v) < 25.0 else v
    except ValueError:
        return v


def main():
    out, dirs, recipes = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
    runs = [rows(out, r) for r in recipes]
    models = []
    for _, got in runs:
        models += [m for m in got if m not in models]
    sets = [os.path.basename(d.rstrip("/")) for d in dirs]
    for m in models:
        print("\n#### %s\n" % m)
        print("| recipe | integer MACs | to f32 | calibrate dB | validate dB | %s | CPU s | peak MB |"
              % " | ".join(sets))
        print("|---" * (7 + len(sets)) + "|")
        for name, got in runs:
            f = got.get(m)
            if not f:
                print("| %s | (not run) |" % name)
                continue
            if len(f) < 8:
                print("| %s | %s |" % (name, " ".join(f[1:])))
                continue
            dbs = [cell_db(v) for v in f[8:8 + len(sets)]]
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, f[5], f[4], f[6], f[7], " | ".join(dbs), f[1], f[3]))


if __name__ == "__main__":
    main()
