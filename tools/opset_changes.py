#!/usr/bin/python3
"""Lists, for every default-domain op in QRL's op table, the ONNX schema
versions up to a target opset (13 unless given), from onnx.defs: the ops whose
form or meaning changed between an old model's opset and the target are the
ones runtime/opset_upgrade.c must consider.

    opset_changes.py [TO]

The op list is read from the op-table rows of runtime/ops/*.c (rows and the
UNARY/BINARY/VARIADIC/REDUCE_ROW macros)."""
import glob
import os
import re
import sys

import onnx.defs as D


def table_ops(root):
    ops = set()
    for f in glob.glob(os.path.join(root, "runtime", "ops", "*.c")):
        src = open(f).read()
        ops |= set(re.findall(r'\{"([A-Z][A-Za-z0-9]+)", ""', src))
        ops |= set(re.findall(r'(?:UNARY|BINARY|VARIADIC|REDUCE_ROW)\("([A-Z][A-Za-z0-9]+)"', src))
    return sorted(ops)


def versions(op, to):
    out = []
    for v in range(1, to + 1):
        try:
            s = D.get_schema(op, v, "")
        except Exception:  # not defined at v (yet)
            continue
        if s.since_version not in out:
            out.append(s.since_version)
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    to = int(sys.argv[1]) if len(sys.argv) > 1 else 13
    for op in table_ops(root):
        vs = versions(op, to)
        later = [v for v in vs if v > 7]
        print("%-28s versions %-22s %s" % (op, vs, "changed after 7: %s" % later if later else ""))


if __name__ == "__main__":
    main()
