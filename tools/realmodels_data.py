"""Synthetic calibration and test inputs with structure, shared by
tools/export_torchvision.py and tools/make_real_inputs.py (QRL-D, real models).

No data set can be downloaded here, so the images and sounds are made:

* images(): RGB in [0, 1], HxWx3. Each image is a sum of smoothed noise at
  four scales (4x4, 8x8, 16x16 and 32x32 grids upsampled bilinearly: large
  blobs down to fine texture, a 1/f-like spectrum as natural images have),
  a random colour gradient, 3-8 filled rectangles and discs of random colour
  (sharp edges, flat regions) and 0-4 thin dark strokes (text- and line-like
  structure), then a little per-pixel noise. Contrast and brightness vary per
  image, so the set covers dark, bright, flat and busy images.
* text_lines(): a light background with dark glyph-like blocks in rows
  (word boxes made of vertical and horizontal strokes) for the OCR models.
* speech_like(): mono 16 kHz float audio. Each clip is silence (low noise
  floor) interleaved with voiced segments (a glottal-pulse-like harmonic
  series, f0 90-260 Hz with vibrato and glide, formant-shaped by three
  resonances that move over time, amplitude envelope with attack/decay) and
  unvoiced bursts (band-passed noise, like fricatives); levels vary by 30 dB
  between clips.

Everything is deterministic in its seed.
"""
import numpy as np


def _upsample(grid, h, w):
    """Bilinear upsampling of a (gh, gw, c) grid to (h, w, c)."""
    gh, gw = grid.shape[:2]
    ys = np.linspace(0, gh - 1, h)
    xs = np.linspace(0, gw - 1, w)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, gh - 1)
    x1 = np.minimum(x0 + 1, gw - 1)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    a = grid[y0][:, x0]
    b = grid[y0][:, x1]
    c = grid[y1][:, x0]
    d = grid[y1][:, x1]
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def image(rng, h, w):
    img = np.zeros((h, w, 3), np.float64)
    for g, amp in ((4, 0.5), (8, 0.3), (16, 0.18), (32, 0.1)):
        img += amp * _upsample(rng.standard_normal((g, g, 3)), h, w)
    yy, xx = np.mgrid[0:h, 0:w]
    ang = rng.uniform(0, 2 * np.pi)
    grad = (np.cos(ang) * xx / w + np.sin(ang) * yy / h)[..., None]
    img += grad * rng.uniform(-0.5, 0.5, 3)
    img = 0.5 + 0.25 * img
    for _ in range(rng.integers(3, 9)):
        col = rng.uniform(0, 1, 3)
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(0.05, 0.3) * h, rng.uniform(0.05, 0.3) * w
        if rng.random() < 0.5:
            m = (np.abs(yy - cy) < ry) & (np.abs(xx - cx) < rx)
        else:
            m = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
        alpha = rng.uniform(0.6, 1.0)
        img[m] = (1 - alpha) * img[m] + alpha * col
    for _ in range(rng.integers(0, 5)):
        x0, y0, x1, y1 = rng.uniform(0, 1, 4) * [w, h, w, h]
        t = np.clip(((xx - x0) * (x1 - x0) + (yy - y0) * (y1 - y0)) /
                    max((x1 - x0) ** 2 + (y1 - y0) ** 2, 1e-6), 0, 1)
        d = np.hypot(xx - (x0 + t * (x1 - x0)), yy - (y0 + t * (y1 - y0)))
        m = d < rng.uniform(0.5, 2.5) * max(h, w) / 224
        img[m] = rng.uniform(0, 0.2)
    img = (img - 0.5) * rng.uniform(0.6, 1.4) + 0.5 + rng.uniform(-0.15, 0.15)
    img += rng.normal(0, 0.01, img.shape)
    return np.clip(img, 0, 1).astype(np.float32)


def images(n, h, w, seed):
    rng = np.random.default_rng(seed)
    return np.stack([image(rng, h, w) for _ in range(n)])


def text_line(rng, h, w, rows=None):
    img = np.full((h, w, 3), rng.uniform(0.75, 1.0), np.float64)
    img += 0.05 * _upsample(rng.standard_normal((4, 8, 3)), h, w)
    ink = rng.uniform(0, 0.3, 3)
    if rows is None:
        rows = rng.integers(1, max(2, h // 24) + 1)
    for r in range(rows):
        top = int((r + 0.15) * h / rows)
        gh = int(rng.uniform(0.4, 0.7) * h / rows)
        x = int(rng.uniform(0, 0.08) * w)
        while x < w - 4:
            gw = int(rng.uniform(0.3, 0.9) * gh) + 2
            for _ in range(rng.integers(1, 4)):  # strokes of one glyph
                if rng.random() < 0.5:
                    sx = x + rng.integers(0, max(gw - 1, 1))
                    img[top:top + gh, sx:sx + max(1, gh // 8)] = ink
                else:
                    sy = top + rng.integers(0, max(gh - 1, 1))
                    img[sy:sy + max(1, gh // 8), x:x + gw] = ink
            x += gw + int(rng.uniform(0.1, 0.3) * gh)
            if rng.random() < 0.15:
                x += gh  # space between words
    img += rng.normal(0, 0.02, img.shape)
    return np.clip(img, 0, 1).astype(np.float32)


def text_lines(n, h, w, seed, rows=None):
    rng = np.random.default_rng(seed)
    return np.stack([text_line(rng, h, w, rows) for _ in range(n)])


def _resonate(x, f, bw, sr):
    """Two-pole resonator (formant) at f Hz with bandwidth bw Hz."""
    r = np.exp(-np.pi * bw / sr)
    a1, a2 = -2 * r * np.cos(2 * np.pi * f / sr), r * r
    y = np.zeros_like(x)
    y1 = y2 = 0.0
    for i in range(len(x)):
        y0 = x[i] - a1 * y1 - a2 * y2
        y[i] = y0
        y2, y1 = y1, y0
    return y * (1 - r)


def speech_like_clip(rng, samples, sr=16000):
    out = rng.normal(0, 1e-3, samples)  # noise floor (silence)
    t = 0
    while t < samples:
        t += int(rng.uniform(0.03, 0.25) * sr)  # silence
        seg = int(rng.uniform(0.08, 0.4) * sr)
        if t >= samples:
            break
        seg = min(seg, samples - t)
        tt = np.arange(seg) / sr
        env = np.minimum(1, tt / 0.02) * np.minimum(1, (seg / sr - tt) / 0.04)
        if rng.random() < 0.7:  # voiced
            f0 = rng.uniform(90, 260) * (1 + rng.uniform(-0.2, 0.2) * tt / max(tt[-1], 1e-3))
            f0 *= 1 + 0.02 * np.sin(2 * np.pi * 5.5 * tt)
            ph = 2 * np.pi * np.cumsum(f0) / sr
            src = sum(np.sin(k * ph) / k for k in range(1, 30))
            y = np.zeros(seg)
            for f, bw in ((rng.uniform(300, 900), 80), (rng.uniform(900, 2400), 120),
                          (rng.uniform(2400, 3500), 200)):
                y += _resonate(src, f, bw, sr)
        else:  # unvoiced burst
            y = _resonate(rng.standard_normal(seg), rng.uniform(2500, 6000), 1500, sr)
        y = y / (np.abs(y).max() + 1e-9) * env * rng.uniform(0.3, 1.0)
        out[t:t + seg] += y
        t += seg
    return out * 10 ** (rng.uniform(-30, 0) / 20)


def speech_like(n, samples, seed, sr=16000):
    rng = np.random.default_rng(seed)
    return np.stack([speech_like_clip(rng, samples, sr) for _ in range(n)]).astype(np.float32)
