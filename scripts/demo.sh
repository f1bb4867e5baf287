#!/usr/bin/env bash
# The main job, end to end: install what is missing for the build (nothing the tests need), build,
# run the minillm decode loop under tokprof (on a real GPU when nvidia-smi sees one, else on the
# simulated GPU), explain the capture, and write the HTML report.
#   scripts/demo.sh                     minillm, vLLM-style async decode loop, 16 steps
#   scripts/demo.sh -- ARGS...          other minillm options, e.g. -- --style hf --steps 20
#   scripts/demo.sh --real              the smallest real client (PyTorch eager, tests/realstack)
#                                       when its venv exists; says how to make it when not
set -euo pipefail
cd "$(dirname "$0")/.."
real=0
case "${1:-}" in
    --real) real=1; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
venv=${TOKPROF_TORCH_VENV:-$HOME/.cache/tokprof/venv-torch-2.15.0}
if [ $real = 1 ] && [ ! -e "$venv/.tokprof-complete" ]; then
    echo "demo --real: no PyTorch venv at $venv. Make it (~5.6 GB download, minutes) with"
    echo "    TOKPROF_SKIP_VLLM=1 scripts/setup.sh --tests    (the vLLM venv, 9.4 GB more, left out)"
    echo "or name one with torch==2.15.0 and transformers: TOKPROF_TORCH_VENV=DIR scripts/demo.sh --real"
    exit 1
fi
start=$SECONDS
# A short demo times every step; production's default times 2 of every 20 (TOKPROF_GPU, README).
export TOKPROF_GPU=${TOKPROF_GPU:-always}
scripts/setup.sh
B=$PWD/build
# A build/ that the tests configured keeps its tests; a fresh one builds without them (no criterion).
if grep -qs '^TOKPROF_TESTS:BOOL=ON' "$B/CMakeCache.txt"; then
    scripts/build.sh >/dev/null
else
    TOKPROF_TESTS=OFF scripts/build.sh >/dev/null
fi
out=${DEMO_OUT:-$B/demo}
rm -rf "$out" && mkdir -p "$out"
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--style vllm --sched async --steps 16)

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi

if [ $real = 1 ]; then
    # tests/realstack/workload.py eager: a tiny transformers Llama built in code (no download),
    # 1 prefill + 8 decode steps, each ending with the sampled ids copied to the host
    wl=(tests/realstack/workload.py eager --steps 8)
    if [ $gpu = 1 ]; then
        echo "== PyTorch eager on the GPU ($(nvidia-smi -L | head -1)) under tokprof"
        python=$venv/bin/python
        env=()
    else
        echo "== PyTorch eager on the simulated GPU (no GPU here: tests/simgpu) under tokprof"
        # torch finds its CUDA libraries by RPATH, which LD_LIBRARY_PATH cannot override: a
        # throw-away overlay of the venv whose NVIDIA libraries are simgpu's (the venv itself is
        # never changed), as tests/realstack does
        python=$(python3 tests/realstack/overlay.py "$venv" "$B/tests/simgpu" "$out/venv")
        env=(LD_LIBRARY_PATH="$B/tests/simgpu" TRITON_LIBCUDA_PATH="$B/tests/simgpu"
             SIMGPU_LOG="$out/truth.%p.jsonl" PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
             TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false)
    fi
    echo "   python ${wl[*]}"
    env "${env[@]}" "$B/decoder/tokprof" run -o "$out" -- "$python" "${wl[@]}"
    # the process that used CUDA (the largest capture, should python have started others)
    cap=$(ls -S "$out"/*.tokprof | head -1)
    if [ $gpu = 0 ]; then
        echo
        echo "== the simulator's own count (its truth log), to hold the summary's 'launches' against:"
        echo "   $(cat "$out"/truth.*.jsonl | grep -c '"kind":"kernel"') kernels executed by simgpu"
    fi
else
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
fi

echo
echo "== tokprof summary $cap"
"$B/decoder/tokprof" summary "$cap"
"$B/decoder/tokprof" report -o "$out/report.html" "$cap"
echo
echo "The capture: $cap  (tokprof dump it, or tokprof help for more)"
echo "The report:  $out/report.html  (open it in a browser)"
echo "On your own host, first: $B/decoder/tokprof doctor   (what a capture there will do)"
echo "demo: done in $((SECONDS - start)) s"
