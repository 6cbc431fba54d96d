#!/usr/bin/python3
"""The table of `make bench` (bench/run.sh): QRL's times next to ONNX Runtime's and PyTorch's
from the same run, as ratios against QRL-M's targets, and bench/results.json with every number.

Usage: /usr/bin/python3 bench/report.py BENCH_DIR RESULTS.json MODEL...
BENCH_DIR holds what bench/run.sh wrote: peak.json and per model NAME.qrl_f32.json,
NAME.qrl_int8.json, NAME.ort_f32.json, NAME.ort_int8.json, NAME.quantize.json and, where PyTorch
runs the model, NAME.torch.json.

Targets (QRL-M, one thread, batch 1 and 64; QRL int8 is its fastest form, the kernels compiled per
layer (--iconv-jit) where that column was measured): QRL int8 at least 1.5x as fast as ONNX Runtime
int8, or at 95% of the measured VNNI peak where ONNX Runtime already runs at 80% of it; QRL int8
at least 2.5x as fast as QRL f32; QRL f32 at least as fast as ONNX Runtime f32; ResNet-18's
convolutions at 80% of the VNNI peak or more. Apart from them, QRL-E's: the calibration pass of
`qrl quantize` at most 1.5x one f32 pass over the same samples (both as quantize reports them). Speed-ups are "how
many times faster" (> 1: QRL ahead).

The transformers (bert, gpt; vit, swin: accuracy only) have QRL-H's targets instead, printed "met" or
"missed" (or "not measured" when a column is empty, e.g. a recipe that does not quantize the
model yet): per file NAME.qrl_f32.json, NAME.qrl_int8.json and NAME.qrl_int8_dynamic.json (qrl
bench --recipe: the 'int8' rows), NAME.ort_f32.json, NAME.ort_int8.json,
NAME.ort_int8_dynamic.json (ORT on each export), NAME.torch.json (PyTorch f32 and
quantize_dynamic) and NAME.sqnr.json (tools/transformer_sqnr.py). One thread, batch 1, 8 and 64 (gpt 1):
QRL int8 (static, dynamic) at least 1.5x as fast as ORT on the same export and 2x as fast as QRL
f32; QRL f32 within 1.1x of ORT f32 (and QRL-M's targets on the same rows at batch 1 and 64,
printed apart: int8 static 1.5x ORT and 2.5x QRL f32, f32 at least ORT's speed). Accuracy on the 16 test samples: recipes/int8.qrl within
3 dB of PyTorch quantize_dynamic's output SQNR, recipes/int8-dynamic.qrl at most 0.5 dB below
it, each with at least 95% of the MACs in integers.
"""
import json
import os
import platform
import sys



def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def row(rows, batch, threads):
    for r in rows or []:
        if r["batch"] == batch and r["threads"] == threads:
            return r
    return None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = {}
            for line in f:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
        return "%s (family %s, model %s)" % (info.get("model name", "?"), info.get("cpu family", "?"),
                                             info.get("model", "?"))
    except OSError:
        return platform.processor() or "unknown"


def verdict(ok):
    return "ok" if ok else "MISSED"


TRANSFORMERS = ("bert", "gpt", "gpt_outliers", "vit", "swin")
RECIPES = (("int8", "static", 3.0), ("int8_dynamic", "dynamic", 0.5))  # file tag, name, dB allowed below PyTorch


def vrow(rows, batch, threads, variant):
    for r in rows or []:
        if r["batch"] == batch and r["threads"] == threads and r.get("variant", variant) == variant:
            return r
    return None


def transformers(d, names, results):
    """QRL-H's rows: the times at batch 1, 8 and 64 on one thread, the accuracy table, and the targets
    as (model, what, value, met) with met None where a number is missing; then QRL-M's targets on
    the same rows (batch 1 and 64: int8 static 1.5x ORT and 2.5x QRL f32, f32 at ORT's speed)."""
    targets, m_targets = [], []
    timed = [n for n in names if n in TRANSFORMERS and n not in ("gpt_outliers", "vit", "swin")]
    hdr = ("%-5s %5s | %9s %9s %7s | %9s %9s %7s | %9s %7s %7s | %9s %7s | %9s %9s %7s" %
           ("model", "batch", "int8", "ORT int8", "vs ORT", "int8 dyn", "ORT dyn", "vs ORT", "QRL f32", "st/f32",
            "dyn/f32", "ORT f32", "f32/ORT", "torch f32", "torch dyn", "vs dyn"))
    if timed:
        print("\ntransformers (QRL-H), 1 thread: median ms per batch; int8 = the recipe's integer graph"
              " (qrl bench --recipe), ORT = ONNX Runtime on that recipe's export; speed-up = peer time / QRL time;"
              " vs dyn: PyTorch quantize_dynamic's time / QRL int8 static's")
        print(hdr)
        print("-" * len(hdr))

    def ms(v):
        return "%9.3f" % v["ms_median"] if v else "%9s" % "-"

    def ratio(v):
        return "%7.2f" % v if v is not None else "%7s" % "-"

    def over(a, b):  # b's time / a's time: how many times faster a is
        return b["ms_median"] / a["ms_median"] if a and b else None

    acc = []
    for name in names:
        if name not in TRANSFORMERS:
            continue
        tch = load(os.path.join(d, name + ".torch.json")) or {}
        sq = load(os.path.join(d, name + ".sqnr.json"))
        m = {"kind": "transformer", "qrl_f32": (load(os.path.join(d, name + ".qrl_f32.json")) or {}).get("results"),
             "ort_f32": (load(os.path.join(d, name + ".ort_f32.json")) or {}).get("results"),
             "torch_f32": tch.get("fp32"), "torch_dynamic_int8": tch.get("dynamic_int8"),
             "torch_engine": tch.get("engine"), "accuracy": sq, "ratios": []}
        for tag, _, _ in RECIPES:
            m["qrl_" + tag] = (load(os.path.join(d, "%s.qrl_%s.json" % (name, tag))) or {}).get("results")
            m["ort_" + tag] = (load(os.path.join(d, "%s.ort_%s.json" % (name, tag))) or {}).get("results")
        results["models"][name] = m
        if sq:
            acc.append((name, sq))
        if name in ("gpt_outliers", "vit", "swin"):  # accuracy only
            continue
        for batch in ((1,) if name == "gpt" else (1, 8, 64)):
            f, g = vrow(m["qrl_f32"], batch, 1, "fp32"), vrow(m["ort_f32"], batch, 1, None)
            t, td = vrow(m["torch_f32"], batch, 1, None), vrow(m["torch_dynamic_int8"], batch, 1, None)
            q = {tag: (vrow(m["qrl_" + tag], batch, 1, "int8"), vrow(m["ort_" + tag], batch, 1, None))
                 for tag, _, _ in RECIPES}
            r = {"batch": batch, "threads": 1, "f32_over_ort_f32": f["ms_median"] / g["ms_median"] if f and g else None}
            for tag, _, _ in RECIPES:
                a, b = q[tag]
                r[tag + "_vs_ort"] = over(a, b)
                r[tag + "_vs_qrl_f32"] = over(a, f)
                r[tag + "_vs_torch_dynamic"] = over(a, td)
            m["ratios"].append(r)
            print("%-5s %5d | %s %s %s | %s %s %s | %s %s %s | %s %s | %s %s %s" %
                  (name, batch, ms(q["int8"][0]), ms(q["int8"][1]), ratio(r["int8_vs_ort"]),
                   ms(q["int8_dynamic"][0]), ms(q["int8_dynamic"][1]), ratio(r["int8_dynamic_vs_ort"]),
                   ms(f), ratio(r["int8_vs_qrl_f32"]), ratio(r["int8_dynamic_vs_qrl_f32"]), ms(g),
                   ratio(r["f32_over_ort_f32"]), ms(t), ms(td), ratio(r["int8_vs_torch_dynamic"])))
            for tag, kind, _ in RECIPES if batch in (1, 8) else ():  # QRL-H's: batch 1 and 8
                v = r[tag + "_vs_ort"]
                targets.append((name, "int8 %s >= 1.5x ORT on its export, batch %d" % (kind, batch), v,
                                None if v is None else v >= 1.5))
                v = r[tag + "_vs_qrl_f32"]
                targets.append((name, "int8 %s >= 2x QRL f32, batch %d" % (kind, batch), v,
                                None if v is None else v >= 2.0))
            v = r["f32_over_ort_f32"]
            if batch in (1, 8):
                targets.append((name, "f32 <= 1.1x ORT f32 time, batch %d" % batch, v,
                                None if v is None else v <= 1.1))
            if batch in (1, 64):  # QRL-M's own, on every model of make bench: batch 1 and 64
                v = r["int8_vs_ort"]
                m_targets.append((name, "int8 static >= 1.5x ORT int8, batch %d" % batch, v,
                                  None if v is None else v >= 1.5))
                v = r["int8_vs_qrl_f32"]
                m_targets.append((name, "int8 static >= 2.5x QRL f32, batch %d" % batch, v,
                                  None if v is None else v >= 2.5))
                v = 1 / r["f32_over_ort_f32"] if r["f32_over_ort_f32"] else None
                m_targets.append((name, "f32 >= ORT f32, batch %d (ORT time / QRL time)" % batch, v,
                                  None if v is None else v >= 1.0))
    if acc:
        print("\ntransformer accuracy: output SQNR on the 16 test samples against PyTorch f32 (QRL: the recipe's"
              " integer graph; ORT: on QRL's export; PyTorch: quantize_dynamic, engine %s); MACs: the share in"
              " integers" % (acc[0][1].get("torch", {}).get("engine")))
        hdr = "%-5s %-24s | %7s %7s %8s | %6s %6s | %9s" % ("model", "recipe", "QRL dB", "ORT dB", "torch dB",
                                                            "MACs", "torch", "quantize")
        print(hdr)
        print("-" * len(hdr))
    for name, sq in acc:
        t = sq.get("torch", {})
        tdb = t.get("dynamic_sqnr")
        tm = t.get("dynamic_int_macs_per_sample")
        tshare = tm / sq["macs_per_sample"] if tm is not None and sq.get("macs_per_sample") else None

        def db(v):
            return "%7.1f" % v if isinstance(v, (int, float)) else "%7s" % "-"

        def pct(v):
            return "%5.1f%%" % (100 * v) if v is not None else "%6s" % "-"

        rows = {os.path.basename(r["recipe"]): r for r in sq.get("recipes", [])}
        for tag, kind, allowed in RECIPES:
            rname = tag.replace("_", "-") + ".qrl"
            r = rows.get(rname, {})
            print("%-5s %-24s | %s %s %8s | %s %s | %9s" %
                  (name, "recipes/" + rname, db(r.get("qrl_sqnr")), db(r.get("ort_sqnr")), db(tdb).strip(),
                   pct(r.get("mac_share")), pct(tshare),
                   "%8.1fs" % r["quantize_s"] if "quantize_s" in r and "error" not in r else "%9s" % "-"))
            for k in ("error", "qrl_error", "ort_error"):
                if r.get(k):
                    print("      %s" % r[k])
            qm, bm = r.get("qrl_macs_per_sample"), sq.get("macs_per_sample")
            if qm and bm and abs(qm - bm) > 0.01 * bm:
                print("      note: qrl quantize counts %.3g MACs per sample, qrl bench's profile of the f32 model %.3g"
                      % (qm, bm))
            v = r.get("qrl_sqnr") - tdb if r.get("qrl_sqnr") is not None and tdb is not None else None
            targets.append((name, "%s SQNR >= PyTorch dynamic - %.1f dB (QRL - PyTorch, dB)" % (kind, allowed), v,
                            None if v is None else v >= -allowed))
            v = r.get("mac_share")
            targets.append((name, "%s keeps >= 95%% of MACs in integers (%%)" % kind, None if v is None else 100 * v,
                            None if v is None else v >= 0.95))
        for rname, r in rows.items():  # recipes beyond the targets' (gpt_outliers: int8-smooth.qrl)
            if rname in [tag.replace("_", "-") + ".qrl" for tag, _, _ in RECIPES]:
                continue
            print("%-5s %-24s | %s %s %8s | %s %s | %9s" %
                  (name, "recipes/" + rname, db(r.get("qrl_sqnr")), db(r.get("ort_sqnr")), db(tdb).strip(),
                   pct(r.get("mac_share")), pct(tshare),
                   "%8.1fs" % r["quantize_s"] if "quantize_s" in r and "error" not in r else "%9s" % "-"))
        if t.get("dynamic_sqnr_qnnpack") is not None:
            print("      (PyTorch dynamic on qnnpack, 8-bit activations: %.1f dB; QRL f32 against PyTorch f32: %s dB)"
                  % (t["dynamic_sqnr_qnnpack"], db(sq.get("qrl_f32_sqnr")).strip()))
    return targets, m_targets


INT4_SHAPES = ("4096x4096", "4096x11008")


def int4(d, names, results):
    """QRL-I's int4 GEMV rows (batch 1, one thread): QRL's int4 kernels at accuracy_level 0 and 4,
    QRL's int8 GEMV (recipes/int8-dynamic.qrl) and ONNX Runtime's MatMulNBits on the same files;
    the targets as (shape, what, value, met), met None where a number is missing."""
    if "int4" not in names:
        return []

    def t(shape, what):
        rows = (load(os.path.join(d, "int4.%s.%s.json" % (shape, what))) or {}).get("results")
        r = vrow(rows, 1, 1, "int8" if what == "qrl_int8" else ("fp32" if what.startswith("qrl") else None))
        return r["ms_median"] if r else None

    def f(v):
        return "%8.3f" % v if v is not None else "%8s" % "-"

    def ratio(a, b):  # b / a: how many times faster a is
        return b / a if a and b else None

    print("\nint4 GEMV (QRL-I; batch 1, one thread; median ms): MatMulNBits blocks of 32 at accuracy_level 0"
          " (f32 activations) and 4 (int8); int8 = QRL's int8 GEMV of the same MatMul (int8-dynamic.qrl)")
    hdr = "%-11s | %8s %8s %8s | %8s %8s | %9s %9s %9s" % ("K x N", "QRL l4", "QRL l0", "QRL int8", "ORT l4",
                                                            "ORT l0", "int8/l4", "ORT4/l4", "ORT0/l0")
    print(hdr)
    print("-" * len(hdr))
    targets = []
    for shape in INT4_SHAPES:
        q4, q0, q8, o4, o0 = (t(shape, w) for w in ("qrl_l4", "qrl_l0", "qrl_int8", "ort_l4", "ort_l0"))
        r8, r4, r0 = ratio(q4, q8), ratio(q4, o4), ratio(q0, o0)
        print("%-11s | %s %s %s | %s %s | %9s %9s %9s" % (shape, f(q4), f(q0), f(q8), f(o4), f(o0),
              *("%.2f" % v if v is not None else "-" for v in (r8, r4, r0))))
        results["models"]["int4_" + shape] = {"kind": "int4_gemv", "qrl_l4": q4, "qrl_l0": q0, "qrl_int8": q8,
                                              "ort_l4": o4, "ort_l0": o0}
        targets.append((shape, "QRL int4 (level 4) >= 1.5x QRL's int8 GEMV", r8, None if r8 is None else r8 >= 1.5))
        targets.append((shape, "QRL int4 (level 4) >= ORT MatMulNBits level 4", r4, None if r4 is None else r4 >= 1.0))
    return targets


def transformer_targets(results, targets, flag, noun, title):
    """Prints the transformer rows' targets (met, missed or not measured) under title and records
    them in results, marked with flag."""
    if not targets:
        return
    print("\n" + title + ":")
    for name, what, v, ok in targets:
        print("  %-5s %-62s %8s  %s" % (name, what, "%.2f" % v if v is not None else "-",
                                        "not measured" if ok is None else "met" if ok else "missed"))
        results["targets"].append({"model": name, "target": what, "value": v, "met": ok, flag: True})
    measured = [t for t in targets if t[3] is not None]
    print("%d of %d measured %s targets met; %d not measured" %
          (sum(1 for t in measured if t[3]), len(measured), noun, len(targets) - len(measured)))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    d, out, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    peak = load(os.path.join(d, "peak.json")) or {}
    vnni = peak.get("vnni_gmacs")
    results = {"machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "peak": peak}, "models": {}, "targets": []}
    print("\nmachine: %s, %s cores; one core's peak: u8s8 VNNI %s GMAC/s, f32 FMA %s GFLOP-pairs/s" %
          (results["machine"]["cpu"], os.cpu_count(), vnni, peak.get("fma_gflop_pairs")))
    cnns = [n for n in models if n not in TRANSFORMERS and n != "int4"]
    if cnns:
        print("times: median ms per batch (QRL and ORT: the median of the rounds run in turns); speed-up = peer time / QRL time (> 1: QRL faster)")
    hdr = ("%-13s %5s %3s | %9s %9s %7s | %9s %7s | %9s %7s | %9s %7s | %9s %9s %7s | %7s %6s" %
           ("model", "batch", "thr", "QRL int8", "ORT int8", "vs ORT", "int8 jit", "vs ORT", "QRL f32", "i8/f32",
            "ORT f32", "f32/ORT", "torch f32", "FX int8", "vs FX", "GMAC/s", "%peak"))
    if cnns:
        print("(GMAC/s: QRL int8's convolutions and matrix products; %peak: of the VNNI peak times the threads;"
              " int8 jit: --iconv-jit --option bands=auto, convolutions on kernels compiled per layer with the epilogue"
              " fused, chains over links past 4 MB band by band)")
        print(hdr)
        print("-" * len(hdr))
    targets, calib_targets, calib_rows, notes = [], [], [], []
    for name in cnns:
        q32 = (load(os.path.join(d, name + ".qrl_f32.json")) or {}).get("results")
        q8 = (load(os.path.join(d, name + ".qrl_int8.json")) or {}).get("results")
        q8j = (load(os.path.join(d, name + ".qrl_int8_jit.json")) or {}).get("results")
        o32 = (load(os.path.join(d, name + ".ort_f32.json")) or {}).get("results")
        o8 = (load(os.path.join(d, name + ".ort_int8.json")) or {}).get("results")
        tch = load(os.path.join(d, name + ".torch.json")) or {}
        qz = load(os.path.join(d, name + ".quantize.json")) or {}
        m = {"qrl_f32": q32, "qrl_int8": q8, "qrl_int8_jit": q8j, "ort_f32": o32, "ort_int8": o8, "torch_f32": tch.get("fp32"),
             "fx_int8": tch.get("fx_int8"), "torch_engine": tch.get("engine"), "quantize": qz, "ratios": []}
        if tch.get("fx_int8_error"):
            m["fx_int8_error"] = tch["fx_int8_error"]
            notes.append("%s: PyTorch FX int8 (%s) failed: %s" % (name, tch.get("engine"), tch["fx_int8_error"]))
        for batch in (1, 64):
            for threads in (1, 2):
                a, b, j = row(q8, batch, threads), row(o8, batch, threads), row(q8j, batch, threads)
                f, g = row(q32, batch, threads), row(o32, batch, threads)
                t, x = row(m["torch_f32"], batch, threads), row(m["fx_int8"], batch, threads)
                if not a:
                    continue
                r = {"batch": batch, "threads": threads,
                     "int8_vs_ort_int8": b["ms_median"] / a["ms_median"] if b else None,
                     "int8_jit_vs_ort_int8": b["ms_median"] / j["ms_median"] if b and j else None,
                     "int8_vs_qrl_f32": f["ms_median"] / a["ms_median"] if f else None,
                     "f32_over_ort_f32": f["ms_median"] / g["ms_median"] if f and g else None,
                     "int8_vs_fx_int8": x["ms_median"] / a["ms_median"] if x else None,
                     "int8_gemm_gmacs": a.get("gemm_gmacs"),
                     "int8_gemm_peak_share": a.get("gemm_gmacs") / (vnni * threads) if vnni and a.get("gemm_gmacs")
                     else None}
                m["ratios"].append(r)

                def ms(v):
                    return "%9.3f" % v["ms_median"] if v else "%9s" % "-"

                def ratio(v):
                    return "%7.2f" % v if v is not None else "%7s" % "-"

                print("%-13s %5d %3d | %s %s %s | %s %s | %s %s | %s %s | %s %s %s | %7.1f %5.1f%%" %
                      (name, batch, threads, ms(a), ms(b), ratio(r["int8_vs_ort_int8"]), ms(j),
                       ratio(r["int8_jit_vs_ort_int8"]), ms(f),
                       ratio(r["int8_vs_qrl_f32"]), ms(g), ratio(r["f32_over_ort_f32"]), ms(t), ms(x),
                       ratio(r["int8_vs_fx_int8"]), a.get("gemm_gmacs", 0),
                       100 * (r["int8_gemm_peak_share"] or 0)))
                if threads != 1:
                    continue
                best = j or a  # QRL int8's fastest form: kernels compiled per layer where measured
                form = "int8 jit" if j else "int8"
                macs = best.get("macs_per_image")
                if b:
                    v = b["ms_median"] / best["ms_median"]
                    ort_share = macs * batch / (b["ms_median"] * 1e6) / vnni if macs and vnni else None
                    if ort_share is not None and ort_share >= 0.8:  # ORT already near the peak: 95% of it
                        share = macs * batch / (best["ms_median"] * 1e6) / vnni
                        targets.append((name, "%s >= 95%% of the VNNI peak at batch %d (ORT at %.0f%%)" %
                                        (form, batch, 100 * ort_share), share, share >= 0.95))
                    else:
                        targets.append((name, "%s >= 1.5x ORT int8 at batch %d" % (form, batch), v, v >= 1.5))
                if f:
                    v = f["ms_median"] / best["ms_median"]
                    targets.append((name, "%s >= 2.5x QRL f32 at batch %d" % (form, batch), v, v >= 2.5))
                if r["f32_over_ort_f32"] is not None:
                    v = 1 / r["f32_over_ort_f32"]
                    targets.append((name, "f32 >= ORT f32 at batch %d (ORT time / QRL time)" % batch, v, v >= 1.0))
                share = best.get("gemm_gmacs") / vnni if vnni and best.get("gemm_gmacs") else None
                if name == "resnet18" and share is not None:
                    targets.append((name, "%s convolutions >= 80%% of the VNNI peak at batch %d" % (form, batch),
                                    share, share >= 0.8))
        if qz.get("calib_ms") and qz.get("fp32_pass_ms"):
            r = qz["calib_ms"] / qz["fp32_pass_ms"]
            m["calibration"] = dict(qz, ratio=r, quantize_over_pass=qz["quantize_s"] * 1e3 / qz["fp32_pass_ms"])
            calib_rows.append((name, qz["samples"], qz["calib_ms"], qz["fp32_pass_ms"], r, qz["quantize_s"]))
            calib_targets.append((name, "calibration <= 1.5x one f32 pass (%d samples)" % qz["samples"], r, r <= 1.5))
        results["models"][name] = m
    for n in notes:
        print("note: " + n)
    if calib_rows:
        print("\nqrl quantize (1 thread): the calibration pass against one f32 pass over the same samples, and the"
              " whole command")
    for name, n, cms, pms, r, qs in calib_rows:
        print("  %-13s %5d samples: calibration %8.0f ms, f32 pass %8.0f ms, ratio %5.2f; quantize %7.1f s (%.0fx the pass)"
              % (name, n, cms, pms, r, qs, qs * 1e3 / pms))
    tf_targets, tf_m_targets = transformers(d, models, results)
    i4_targets = int4(d, models, results)
    if targets:
        print("\nQRL-M's targets on the CNNs (one thread):")
    for name, what, v, ok in targets:
        print("  %-13s %-52s %8.2f  %s" % (name, what, v, verdict(ok)))
        results["targets"].append({"model": name, "target": what, "value": v, "met": bool(ok)})
    if targets:
        met = sum(1 for t in targets if t[3])
        print("%d of %d QRL-M CNN targets met" % (met, len(targets)))
    if calib_targets:
        print("\nQRL-E's calibration targets (one thread):")
    for name, what, v, ok in calib_targets:
        print("  %-13s %-52s %8.2f  %s" % (name, what, v, verdict(ok)))
        results["targets"].append({"model": name, "target": what, "value": v, "met": bool(ok), "qrl_e": True})
    if calib_targets:
        print("%d of %d calibration targets met" % (sum(1 for t in calib_targets if t[3]), len(calib_targets)))
    transformer_targets(results, tf_m_targets, "qrl_m", "QRL-M transformer",
                        "QRL-M's targets on the transformers (one thread; gpt runs at batch 1 only: its ids are [1, 64])")
    transformer_targets(results, tf_targets, "qrl_h", "transformer", "transformer targets (QRL-H, one thread)")
    if i4_targets:
        print("\nint4 targets (QRL-I, batch 1, one thread):")
    for shape, what, v, ok in i4_targets:
        print("  %-11s %-50s %8s  %s" % (shape, what, "%.2f" % v if v is not None else "-",
                                         "not measured" if ok is None else "met" if ok else "missed"))
        results["targets"].append({"model": "int4_" + shape, "target": what, "value": v, "met": ok, "qrl_i": True})
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, out)
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
