#!/bin/sh
# Installs the Debian packages QRL needs to build, test and run its example,
# skipping the ones already present (g++ and pkgconf: tests/e2e/test_install.c builds
# C and C++ programs against the installed library). Runs apt-get only when something is missing.
set -e
PKGS="gcc g++ pkgconf make re2c lemon libgccjit-12-dev libcriterion-dev libprotobuf-c-dev protobuf-c-compiler
      libonnx-dev libonnx-testdata dataset-fashion-mnist python3-numpy python3-torch python3-onnx nodejs
      groff-base openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# npm comes with some nodejs builds (NodeSource) and is its own package in Debian's.
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
