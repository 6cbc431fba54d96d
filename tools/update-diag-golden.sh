#!/bin/sh
# Regenerates tests/diag/*.expected from the current build: the diagnostics
# `qrl check` prints for each tests/diag/*.qrl. Review the diff before committing.
# Usage: tools/update-diag-golden.sh [BUILD_DIR]
B=${1:-build}
cd "$(dirname "$0")/.." || exit 1
for f in tests/diag/*.qrl; do
    QRL_STDLIB=stdlib "$B/qrl" check "$f" > /dev/null 2> "${f%.qrl}.expected"
done
echo "updated $(ls tests/diag/*.qrl | wc -l) expected files"
