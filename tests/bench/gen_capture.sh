#!/usr/bin/env bash
# Writes a large capture for decoder benchmarks: minillm --style hf on simgpu in zero-cost mode,
# ~105 kernel launches per step with the default 4 layers (95000 steps: ~10 million launches,
# ~70 MB, about 20 s). A large ring and a short flush interval keep the shim from dropping
# records although the simulated GPU takes no time.
# usage: tests/bench/gen_capture.sh BUILD_DIR OUT_FILE [STEPS]
set -euo pipefail
B=$(cd "$1" && pwd)
OUT=$2
STEPS=${3:-95000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
LD_LIBRARY_PATH=$B/tests/simgpu LD_PRELOAD=$B/shim/libtokprof.so TOKPROF_OUT=$W TOKPROF_GPU=off \
    SIMGPU_ZERO=1 TOKPROF_RING_KB=65536 TOKPROF_FLUSH_MS=50 \
    "$B/kernels/minillm" --style hf --steps "$STEPS" >/dev/null
mkdir -p "$(dirname "$OUT")"
mv "$(ls "$W"/*.tokprof)" "$OUT"
