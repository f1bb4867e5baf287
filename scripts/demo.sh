#!/usr/bin/env bash
# The main job, end to end: install what is missing, build, run the minillm decode loop under
# tokprof (on a real GPU when nvidia-smi sees one, else on the simulated GPU), and explain the
# capture. Options: pass minillm options after --, e.g. scripts/demo.sh -- --style hf --steps 20
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
B=$PWD/build
out=${DEMO_OUT:-$B/demo}
rm -rf "$out" && mkdir -p "$out"
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--style vllm --sched async --steps 16)

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
if [ $gpu = 1 ]; then
    echo "== minillm on the GPU ($(nvidia-smi -L | head -1)) under tokprof"
    env=()
else
    echo "== minillm on the simulated GPU (no GPU here: tests/simgpu) under tokprof"
    env=(LD_LIBRARY_PATH="$B/tests/simgpu" SIMGPU_LOG="$out/truth.jsonl")
fi
echo "   minillm ${args[*]}"
env "${env[@]}" "$B/decoder/tokprof" run -o "$out" -- "$B/kernels/minillm" "${args[@]}" \
    --log "$out/minillm.jsonl" --verbose
cap=$(ls "$out"/minillm.*.tokprof)

if [ $gpu = 0 ]; then
    echo
    echo "== GPU time per step on the simulated GPU: busy = sum of kernel times, checked against"
    echo "   the cost model (tests/simgpu/README.md); span = first start to last end"
    python3 tests/simgpu/truth.py steps --counts "$out/minillm.jsonl" "$out/truth.jsonl"
fi

echo
echo "== tokprof summary $cap"
"$B/decoder/tokprof" summary "$cap"
echo
echo "The capture: $cap  (tokprof dump it, or tokprof help for more)"
