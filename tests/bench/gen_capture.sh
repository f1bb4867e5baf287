#!/usr/bin/env bash
# Writes a large capture for decoder benchmarks: minillm --style hf on simgpu in zero-cost mode,
# ~105 kernel launches per step with the default 4 layers (95000 steps: ~10 million launches,
# ~70 MB, about 20 s). A large ring and a short flush interval keep the shim from dropping
# records although the simulated GPU takes no time.
# With a fourth argument `gpu`, GPU records too (simgpu's fake CUPTI, zero-cost kernels: about
# 0.5 KB per step more; 95000 steps: ~50 MB, the fleet tables' step_classes benchmark).
# usage: tests/bench/gen_capture.sh BUILD_DIR OUT_FILE [STEPS [gpu]]
set -euo pipefail
B=$(cd "$1" && pwd)
OUT=$2
STEPS=${3:-95000}
GPU=off
[ "${4:-}" = gpu ] && GPU=always
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
LD_LIBRARY_PATH=$B/tests/simgpu LD_PRELOAD=$B/shim/libtokprof.so TOKPROF_OUT=$W TOKPROF_GPU=$GPU \
    SIMGPU_ZERO=1 TOKPROF_RING_KB=65536 TOKPROF_FLUSH_MS=50 \
    "$B/kernels/minillm" --style hf --steps "$STEPS" >/dev/null
mkdir -p "$(dirname "$OUT")"
mv "$(ls "$W"/*.tokprof)" "$OUT"
