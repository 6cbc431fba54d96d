"""The oracle of tests/unit/test_wino.c: a 3 x 3 stride-1 convolution of channels-last images in
float64, and the scale of Winograd F(2x2, 3x3)'s rounding error for each output.

Usage: wino_ref.py DIR PT PL PB PR
Reads DIR/x.npy (f32 [N][H][W][C]), DIR/w.npy (f32 [M][C][3][3]) and, when present, DIR/b.npy
([M]) and DIR/res.npy ([N][OH][OW][M]); writes DIR/ref.npy, the float64 sums (+ b + res; no
activation), and DIR/scale.npy, both f64 [N][OH][OW][M]. The scale is each output's sum of
magnitudes through the transforms (|A^T| (sum over c of (|G| |g| |G^T|) * (|B^T| |d| |B|)) |A|,
plus |b| and |res|): every rounding of the input transform, the products' chains over C and the
output transform is at most a unit roundoff of a partial sum whose magnitude this bounds."""
import sys

import numpy as np

d = sys.argv[1]
pt, pl, pb, pr = (int(v) for v in sys.argv[2:6])
x = np.load(f"{d}/x.npy").astype(np.float64)
w = np.load(f"{d}/w.npy").astype(np.float64)
N, H, W, C = x.shape
M = w.shape[0]
OH, OW = H + pt + pb - 2, W + pl + pr - 2
xp = np.zeros((N, H + pt + pb + 2, W + pl + pr + 2, C))  # one more row and column for odd sizes
xp[:, pt:pt + H, pl:pl + W, :] = x
ref = np.zeros((N, OH, OW, M))
for ky in range(3):
    for kx in range(3):
        ref += np.einsum("nhwc,mc->nhwm", xp[:, ky:ky + OH, kx:kx + OW, :], w[:, :, ky, kx])
scale = np.zeros_like(ref)
try:
    b = np.load(f"{d}/b.npy").astype(np.float64)
    ref += b
    scale += np.abs(b)
except FileNotFoundError:
    pass
try:
    r = np.load(f"{d}/res.npy").astype(np.float64)
    ref += r
    scale += np.abs(r)
except FileNotFoundError:
    pass
Bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
At = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)
U = np.einsum("ia,mcab,jb->ijcm", np.abs(G), np.abs(w), np.abs(G))
TH, TW = (OH + 1) // 2, (OW + 1) // 2
for ty in range(TH):
    for tx in range(TW):
        patch = np.abs(xp[:, 2 * ty:2 * ty + 4, 2 * tx:2 * tx + 4, :])  # [N][4][4][C]
        V = np.einsum("ia,nabc,jb->nijc", np.abs(Bt), patch, np.abs(Bt))
        Mx = np.einsum("nijc,ijcm->nijm", V, U)
        Y = np.einsum("pi,nijm,qj->npqm", np.abs(At), Mx, np.abs(At))
        h, wd = min(2, OH - 2 * ty), min(2, OW - 2 * tx)
        scale[:, 2 * ty:2 * ty + h, 2 * tx:2 * tx + wd, :] += Y[:, :h, :wd, :]
np.save(f"{d}/ref.npy", ref)
np.save(f"{d}/scale.npy", scale)
