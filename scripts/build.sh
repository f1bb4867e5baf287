#!/usr/bin/env bash
# Configures and builds into build/ (BUILD_DIR to change). Extra arguments go to cmake.
# TOKPROF_TESTS=OFF builds what ships and the demo only (no criterion needed: scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
extra=(-DTOKPROF_TESTS="${TOKPROF_TESTS:-ON}")
[ -n "${CI:-}" ] && extra+=(-DTOKPROF_WERROR=ON)
cmake -S . -B "$BUILD_DIR" "${extra[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
