#!/usr/bin/python3
"""Calibration and test inputs for the npm models tools/fetch_real_models.sh
fetches (QRL-D real-model evaluation). Generators: tools/realmodels_data.py.

Usage: /usr/bin/python3 tools/make_real_inputs.py [DIR] [--calib N] [--test N] [--only calib|test]
                                               [--test-seed S]
DIR defaults to build/realmodels; writes DIR/<model>_calib.npy and
DIR/<model>_test.npy (first axis: samples; each sample is fed as x[i:i+1]).
The calibration split is drawn from seeds 1000 to 1600, the test split from
2000 to 2600, so no test sample is a calibration one. --only writes one split
(e.g. more unseen samples in a directory of their own, with --test 32; DIR
must then hold, or link to, oww_melspec.onnx and oww_embedding.onnx).
--test-seed S draws the test split from seeds S to S + 600 instead (a fresh
unseen set, none of whose seeds calibration or an earlier set used: stop 36's
build/rm32b took 3000).
The openWakeWord features come from running the fp32 front-end models in
ONNX Runtime (node tools/ort_sqnr.js --run, build/npm/node_modules).

Model            input (per sample)         what it expects / what is made
ppocr_det        x [1,3,320,320] f32 NCHW   PaddleOCR det: image/255, ImageNet mean/std
                                            (0.485,0.456,0.406 / 0.229,0.224,0.225); H, W
                                            multiples of 32. Half text pages (rows of
                                            glyph-like strokes), half structured images.
ppocr_rec        x [1,3,48,320] f32 NCHW    PaddleOCR rec: (image/255 - 0.5)/0.5 in [-1,1],
                                            height 48; one text line per image.
ppocr_cls        x [1,3,48,192] f32 NCHW    PaddleOCR angle classifier: [-1,1], 48x192;
                                            text lines, half of them rotated 180 degrees.
blazeface        input:0 [1,128,128,3] NHWC MediaPipe BlazeFace front: RGB in [-1,1].
                                            Structured images (blobs, discs, edges).
mlsd_tiny        input_image_with_alpha:0   M-LSD tiny (keijiro's Barracuda port): RGB in
                 [1,320,320,4] NHWC         [0,255] plus a constant alpha channel of 1
                                            (Preprocess.compute); the model normalizes
                                            itself. Structured images with strokes.
oww_melspec      input [1,32000] f32        openWakeWord mel front end: 2 s of 16 kHz PCM
                                            on the int16 scale (+-32767), as openWakeWord
                                            feeds it. Speech-like synthetic clips.
oww_embedding    input_1 [1,76,32,1] f32    76 mel frames x 32 bins, melspec output/10 + 2
                                            (openWakeWord's scaling), from the clips above.
oww_hey_jarvis   x.1 [1,16,96] f32          16 consecutive embeddings (stride 8 frames) of
oww_hey_mycroft  [1,16,96] f32              one clip, from the embedding model above.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import realmodels_data as rd  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)).astype(np.float32)


def ort_run(model, x, tmp):
    np.save(tmp + "_in.npy", x.astype(np.float32))
    env = dict(os.environ, NODE_PATH=os.path.join(ROOT, "build", "npm", "node_modules"))
    subprocess.run(["node", os.path.join(ROOT, "tools", "ort_sqnr.js"), "--run", model, tmp + "_out",
                    tmp + "_in.npy"], check=True, env=env, stdout=subprocess.DEVNULL)
    return np.load(os.path.join(tmp + "_out", "0.npy"))


def make(d, split, n, seed):
    """All models' inputs for one split (calib or test)."""
    out = {}
    half = n // 2
    pages = rd.text_lines(half, 320, 320, seed)
    imgs = rd.images(n - half, 320, 320, seed + 100)
    out["ppocr_det"] = nchw((np.concatenate([pages, imgs]) - MEAN) / STD)
    lines = rd.text_lines(n, 48, 320, seed + 200, rows=1)
    out["ppocr_rec"] = nchw((lines - 0.5) / 0.5)
    cls = rd.text_lines(n, 48, 192, seed + 300, rows=1)
    cls[1::2] = cls[1::2, ::-1, ::-1]
    out["ppocr_cls"] = nchw((cls - 0.5) / 0.5)
    out["blazeface"] = (rd.images(n, 128, 128, seed + 400) * 2 - 1).astype(np.float32)
    rgb = rd.images(n, 320, 320, seed + 500) * 255
    out["mlsd_tiny"] = np.concatenate([rgb, np.ones(rgb.shape[:3] + (1,), np.float32)], -1).astype(np.float32)
    audio = rd.speech_like(n, 32000, seed + 600) * 32767
    out["oww_melspec"] = audio.astype(np.float32)
    tmp = os.path.join(d, "tmp_" + split)
    mel = ort_run(os.path.join(d, "oww_melspec.onnx"), audio, tmp + "_mel")  # [n,1,1,frames,32]
    mel = mel.reshape(n, -1, 32) / 10 + 2
    frames = mel.shape[1]
    starts = [frames - 76 - 8 * k for k in range(15, -1, -1)]  # 16 windows, stride 8, ending at the last frame
    assert starts[0] >= 0, "clip too short for 16 embeddings"
    windows = np.stack([mel[:, s:s + 76] for s in starts], 1)  # [n,16,76,32]
    out["oww_embedding"] = windows[:, -1, :, :, None].astype(np.float32)
    emb = ort_run(os.path.join(d, "oww_embedding.onnx"), windows.reshape(-1, 76, 32, 1), tmp + "_emb")
    emb = emb.reshape(n, 16, 96).astype(np.float32)
    out["oww_hey_jarvis"] = emb
    out["oww_hey_mycroft"] = emb
    for k, v in out.items():
        np.save(os.path.join(d, "%s_%s.npy" % (k, split)), v)
        print("%s_%s.npy %s range [%.3g, %.3g]" % (k, split, list(v.shape), v.min(), v.max()))


def main():
    args = sys.argv[1:]
    counts = {"--calib": 64, "--test": 8, "--test-seed": 2000}
    for k in counts:
        if k in args:
            i = args.index(k)
            counts[k] = int(args[i + 1])
            del args[i:i + 2]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i:i + 2]
        if only not in ("calib", "test"):
            sys.exit("make_real_inputs: --only takes calib or test, not '%s'" % only)
    d = args[0] if args else os.path.join("build", "realmodels")
    if counts["--test-seed"] != 2000 and abs(counts["--test-seed"] - 1000) <= 600:
        sys.exit("make_real_inputs: --test-seed %d overlaps the calibration seeds, 1000 to 1600"
                 % counts["--test-seed"])
    for split, seed in (("calib", 1000), ("test", counts["--test-seed"])):
        if only in (None, split):
            make(d, split, counts["--" + split], seed)


if __name__ == "__main__":
    main()
