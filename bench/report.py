#!/usr/bin/python3
"""The table of `make bench` (bench/run.sh): QRL's times next to ONNX Runtime's and PyTorch's
from the same run, as ratios against QRL-E's targets, and bench/results.json with every number.

Usage: /usr/bin/python3 bench/report.py BENCH_DIR RESULTS.json MODEL...
BENCH_DIR holds what bench/run.sh wrote: peak.json and per model NAME.qrl_f32.json,
NAME.qrl_int8.json, NAME.ort_f32.json, NAME.ort_int8.json, NAME.quantize.json and, where PyTorch
runs the model, NAME.torch.json.

Targets (one thread): QRL int8 at least 2x as fast as ONNX Runtime int8 at batch 64 and 1.3x at
batch 1; QRL int8 at least 2.5x as fast as QRL f32; QRL f32 within 1.25x of ONNX Runtime f32;
the convolutions at 50% of the measured VNNI peak or more; the calibration pass of `qrl quantize`
at most 1.5x one f32 pass over the same samples (both as quantize reports them). Speed-ups are "how many times faster" (> 1: QRL ahead).
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


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    d, out, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    peak = load(os.path.join(d, "peak.json")) or {}
    vnni = peak.get("vnni_gmacs")
    results = {"machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "peak": peak}, "models": {}, "targets": []}
    print("\nmachine: %s, %s cores; one core's peak: u8s8 VNNI %s GMAC/s, f32 FMA %s GFLOP-pairs/s" %
          (results["machine"]["cpu"], os.cpu_count(), vnni, peak.get("fma_gflop_pairs")))
    print("times: median ms per batch; speed-up = peer time / QRL time (> 1: QRL faster)")
    hdr = ("%-13s %5s %3s | %9s %9s %7s | %9s %7s | %9s %7s | %9s %7s | %9s %9s %7s | %7s %6s" %
           ("model", "batch", "thr", "QRL int8", "ORT int8", "vs ORT", "int8 jit", "vs ORT", "QRL f32", "i8/f32",
            "ORT f32", "f32/ORT", "torch f32", "FX int8", "vs FX", "GMAC/s", "%peak"))
    print("(GMAC/s: QRL int8's convolutions and matrix products; %peak: of the VNNI peak times the threads;"
          " int8 jit: QRL_ICONV_JIT=1, convolutions on kernels compiled per layer with the epilogue fused)")
    print(hdr)
    print("-" * len(hdr))
    targets, calib_rows, notes = [], [], []
    for name in models:
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
                need = 2.0 if batch == 64 else 1.3
                if r["int8_vs_ort_int8"] is not None:
                    targets.append((name, "int8 >= %.1fx ORT int8 at batch %d" % (need, batch),
                                    r["int8_vs_ort_int8"], r["int8_vs_ort_int8"] >= need))
                if r["int8_vs_qrl_f32"] is not None:
                    targets.append((name, "int8 >= 2.5x QRL f32 at batch %d" % batch, r["int8_vs_qrl_f32"],
                                    r["int8_vs_qrl_f32"] >= 2.5))
                if r["f32_over_ort_f32"] is not None:
                    targets.append((name, "f32 <= 1.25x ORT f32 time at batch %d" % batch, r["f32_over_ort_f32"],
                                    r["f32_over_ort_f32"] <= 1.25))
                if batch == 64 and r["int8_gemm_peak_share"] is not None:
                    targets.append((name, "convolutions >= 50% of the VNNI peak at batch 64",
                                    r["int8_gemm_peak_share"], r["int8_gemm_peak_share"] >= 0.5))
        if qz.get("calib_ms") and qz.get("fp32_pass_ms"):
            r = qz["calib_ms"] / qz["fp32_pass_ms"]
            m["calibration"] = dict(qz, ratio=r, quantize_over_pass=qz["quantize_s"] * 1e3 / qz["fp32_pass_ms"])
            calib_rows.append((name, qz["samples"], qz["calib_ms"], qz["fp32_pass_ms"], r, qz["quantize_s"]))
            targets.append((name, "calibration <= 1.5x one f32 pass (%d samples)" % qz["samples"], r, r <= 1.5))
        results["models"][name] = m
    for n in notes:
        print("note: " + n)
    print("\nqrl quantize (1 thread): the calibration pass against one f32 pass over the same samples, and the"
          " whole command")
    for name, n, cms, pms, r, qs in calib_rows:
        print("  %-13s %5d samples: calibration %8.0f ms, f32 pass %8.0f ms, ratio %5.2f; quantize %7.1f s (%.0fx the pass)"
              % (name, n, cms, pms, r, qs, qs * 1e3 / pms))
    print("\ntargets (one thread):")
    for name, what, v, ok in targets:
        print("  %-13s %-52s %8.2f  %s" % (name, what, v, verdict(ok)))
        results["targets"].append({"model": name, "target": what, "value": v, "met": bool(ok)})
    met = sum(1 for t in targets if t[3])
    print("%d of %d targets met" % (met, len(targets)))
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, out)
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
