#!/usr/bin/env bash
# docs/BENCH.md "Real clients": tokens/s of the eager Llama decode loop (tests/realstack/workload.py)
# on simgpu without the shim, under it with TOKPROF_GPU=off, and under it with TOKPROF_GPU=always
# (every step's GPU records: the default until it became window:2/20), alternated run by run so drift hits all three alike; and the capture's bytes per launch.
# WORKLOAD=vllm: vLLM's offline generate() of 8 requests x 64 tokens instead (vllm_workload.py,
# eager, sync scheduling; output tokens/s of generate() alone), from the vLLM venv.
#
#   tests/realstack/bench_eager.sh [VENV]        RUNS (default 5) rounds, STEPS (default 64) steps
set -euo pipefail
cd "$(dirname "$0")/../.."
WORKLOAD=${WORKLOAD:-torch}
if [ "$WORKLOAD" = vllm ]; then
    VENV=${1:-${TOKPROF_VLLM_VENV:-$HOME/.cache/tokprof/venv-vllm-0.33.0}}
else
    VENV=${1:-${TOKPROF_TORCH_VENV:-$HOME/.cache/tokprof/venv-torch-2.15.0}}
fi
B=$PWD/build
RUNS=${RUNS:-5}
STEPS=${STEPS:-64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=$(python3 tests/realstack/overlay.py "$VENV" "$B/tests/simgpu" "$work/venv")
run() { # NAME [ENV...]
    local name=$1; shift
    mkdir -p "$work/$name"
    if [ "$WORKLOAD" = vllm ]; then # the settings of run_vllm.py (README.md, "vLLM")
        (cd "$work/$name" && env "$@" LD_LIBRARY_PATH="$B/tests/simgpu" PYTHONDONTWRITEBYTECODE=1 \
            SIMGPU_MEM=2G PYTHONPATH="$OLDPWD/tests/realstack" VLLM_USE_V2_MODEL_RUNNER=0 \
            VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 VLLM_CACHE_ROOT="$work/vllm-cache" \
            "$py" "$OLDPWD/tests/realstack/vllm_workload.py" offline --time "$work/$name.jsonl" >/dev/null 2>&1)
    else
        env "$@" LD_LIBRARY_PATH="$B/tests/simgpu" PYTHONDONTWRITEBYTECODE=1 \
            "$py" tests/realstack/workload.py eager --steps "$STEPS" --time "$work/$name.jsonl" >/dev/null 2>&1
    fi
}
for i in $(seq "$RUNS"); do
    run plain
    run gpuoff LD_PRELOAD="$B/shim/libtokprof.so" TOKPROF_OUT="$work/gpuoff" TOKPROF_GPU=off
    run default LD_PRELOAD="$B/shim/libtokprof.so" TOKPROF_OUT="$work/default" TOKPROF_GPU=always
done
python3 - "$work" "$B/decoder/tokprof" <<'PY'
import glob, json, os, statistics, subprocess, sys
work, tkp = sys.argv[1], sys.argv[2]
base = None
print("| run | tokens/s median (min-max) | vs without | capture bytes per launch |")
print("|---|---|---|---|")
for name, label in (("plain", "without the shim"), ("gpuoff", "shim, TOKPROF_GPU=off"), ("default", "shim, TOKPROF_GPU=always")):
    tps = [json.loads(l)["tokens_per_s"] for l in open(os.path.join(work, name + ".jsonl"))]
    med = statistics.median(tps)
    base = base or med
    caps = glob.glob(os.path.join(work, name, "*.tokprof"))
    bpl = ""
    if caps:
        launches = 0
        for line in subprocess.run([tkp, "dump", caps[0]], capture_output=True, text=True).stdout.splitlines():
            launches += '"type":"launch"' in line
        bpl = f"{os.path.getsize(caps[0]) / launches:.1f} ({os.path.getsize(caps[0])} B / {launches})"
    print(f"| {label} | {med:.1f} ({min(tps):.1f}-{max(tps):.1f}) | {med / base:.3f} | {bpl} |")
PY
