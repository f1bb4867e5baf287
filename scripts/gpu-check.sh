#!/usr/bin/env bash
# GPU validation: proves tokprof on a real GPU against CUDA's own view, in one prepared command
# that ends within 8 minutes. Results go to docs/VALIDATION.md by hand.
#
#   scripts/gpu-check.sh [--out DIR] [--dry]
#
# The GPU machine has nvcc, CMake, PyTorch, transformers and Triton but no package registry, so
# the shim and the CLI are built here (they need only glibc) and travel in build/; only the CUDA
# workloads are compiled there, for sm_90. Without a GPU (or with --dry) it checks prerequisites,
# states what it would run, and exits 0 (a ctest).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/gpu-check
DRY=0
while [ $# -gt 0 ]; do
    case "$1" in
    --out) OUT=$2; shift 2 ;;
    --dry) DRY=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
LOG=$OUT/gpu-check.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
have() { command -v "$1" >/dev/null 2>&1; }
pyhas() { python3 -c "import $1" >/dev/null 2>&1; }

if [ $DRY = 0 ] && ! (have nvidia-smi && nvidia-smi -L >/dev/null 2>&1); then
    say "gpu-check: no GPU visible (nvidia-smi): dry mode"
    DRY=1
fi

SHIM=$ROOT/build/shim/libtokprof.so
TKP=$ROOT/build/decoder/tokprof
say "== prerequisites"
missing=0
for t in nvcc python3; do
    if have $t; then say "  $t: $(command -v $t)"; else say "  $t: MISSING"; missing=1; fi
done
for f in "$SHIM" "$TKP"; do
    if [ -x "$f" ] || [ -f "$f" ]; then say "  $(basename "$f"): $f"
    else say "  $(basename "$f"): MISSING (run scripts/build.sh on a machine with the -dev packages and carry build/)"; missing=1; fi
done
for m in torch transformers triton; do
    if pyhas $m; then say "  python $m: yes"; else say "  python $m: no (the PyTorch part is skipped)"; fi
done
have nsys && say "  nsys: $(command -v nsys)" || say "  nsys: no (GPU durations are compared with torch.profiler only)"

MODES=("vllm_sync:--style vllm --sched sync" "vllm_async_graphs:--style vllm --sched async --graphs"
       "llamacpp:--style llamacpp" "hf:--style hf" "moe:--moe 8,2 --zipf 1.1 --batch 4"
       "driver:--driver" "threads:--threads 4")
if [ $DRY = 1 ]; then
    say "== dry mode: what a GPU run does"
    say "  1. nvcc -arch=sm_90 kernels/minillm.cu, kernels/launchloop.cu into $OUT/bin"
    say "  2. minillm --check (numerics against the CPU reference) for: ${MODES[*]%%:*}"
    say "  3. each mode under LD_PRELOAD=$SHIM: steps and kernels per step against minillm's"
    say "     own log (tests/system/gpu/compare_capture.py); GPU durations against nsys when present"
    say "  4. tests/system/gpu/torch_generate.py: a small random Llama, generate(64 tokens), eager and CUDA"
    say "     graphs, under the shim and under torch.profiler: kernel counts, per-kernel GPU time,"
    say "     Triton launches seen, steps == generated tokens"
    say "  5. cost: minillm tokens/s with and without the shim (stream; CUPTI on and off); launchloop"
    say "     ns/launch with and without it, and within one process (paired)"
    say "  6. the default of TOKPROF_GPU (docs/OPERATIONS.md, \"GPU time\"): launchloop ns/launch and"
    say "     minillm (vllm async graphs; hf eager) tokens/s, median of 3, with TOKPROF_GPU=off,"
    say "     window:2/20 (the default) and always, and the GPU records each wrote"
    [ $missing = 0 ] || say "  (prerequisites above are missing: a GPU run would stop at them)"
    say "gpu-check: dry mode done"
    exit 0
fi
[ $missing = 0 ] || { say "gpu-check: prerequisites missing"; exit 2; }

say "== GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
say "== build (sm_90)"
BIN=$OUT/bin
mkdir -p "$BIN"
nvcc -O2 -std=c++17 -cudart shared -arch=sm_90 -o "$BIN/minillm" kernels/minillm.cu \
    -lcublas -lcublasLt -ldl -lpthread >>"$LOG" 2>&1 || { say "build of minillm failed (see $LOG)"; exit 1; }
nvcc -O2 -std=c++17 -cudart shared -arch=sm_90 -o "$BIN/launchloop" kernels/launchloop.cu >>"$LOG" 2>&1

declare -a ROWS
row() { ROWS+=("$*"); say "  $*"; }
say "== 1-3. minillm modes: numerics, capture vs minillm's log"
for m in "${MODES[@]}"; do
    name=${m%%:*}; args=${m#*:}
    d=$OUT/$name; rm -rf "$d"; mkdir -p "$d"
    chk=$(timeout 60 "$BIN/minillm" $args --check 2>&1 | grep -E "PASS|FAIL|skipped" | head -1)
    timeout 60 env LD_PRELOAD="$SHIM" TOKPROF_OUT="$d" TOKPROF_GPU=always "$BIN/minillm" $args --steps 32 \
        --log "$d/minillm.jsonl" >"$d/out.txt" 2>&1
    cap=$(ls "$d"/*.tokprof 2>/dev/null | head -1)
    cmp="no capture"
    if [ -n "$cap" ]; then
        "$TKP" dump "$cap" >"$d/dump.jsonl" 2>>"$LOG"
        cmp=$(python3 tests/system/gpu/compare_capture.py "$d/dump.jsonl" "$d/minillm.jsonl" 2>&1 | tail -1)
    fi
    row "$name | numerics: ${chk:-none} | capture: $cmp"
    if have nsys; then
        timeout 120 nsys profile -q -t cuda --cuda-graph-trace=node -o "$d/nsys" -f true \
            "$BIN/minillm" $args --steps 32 >/dev/null 2>>"$LOG" &&
        nsys stats -q --report cuda_gpu_kern_sum --format csv -o "$d/nsys" "$d/nsys.nsys-rep" >/dev/null 2>>"$LOG" &&
        row "$name | nsys per-kernel: $(python3 tests/system/gpu/compare_nsys.py "$d/dump.jsonl" "$d"/nsys_cuda_gpu_kern_sum.csv 2>&1 | tail -1)"
    fi
done

if pyhas torch && pyhas transformers; then
    say "== 4. PyTorch generate(): shim vs torch.profiler"
    for mode in eager graphs; do
        d=$OUT/torch_$mode; rm -rf "$d"; mkdir -p "$d"
        timeout 150 python3 tests/system/gpu/torch_generate.py --mode $mode --tokens 64 --profile "$d/prof.json" \
            >"$d/prof.txt" 2>&1
        timeout 150 env LD_PRELOAD="$SHIM" TOKPROF_OUT="$d" TOKPROF_GPU=always python3 tests/system/gpu/torch_generate.py \
            --mode $mode --tokens 64 >"$d/run.txt" 2>&1
        cap=$(ls -S "$d"/*.tokprof 2>/dev/null | head -1)
        if [ -n "$cap" ]; then
            "$TKP" dump "$cap" >"$d/dump.jsonl" 2>>"$LOG"
            row "torch $mode | $(python3 tests/system/gpu/compare_torch.py "$d/dump.jsonl" "$d/prof.json" 64 2>&1 | tail -1)"
        else
            row "torch $mode | no capture ($(tail -1 "$d/run.txt"))"
        fi
    done
fi

say "== 5. cost (minillm --style vllm --sched async --graphs, 400 steps)"
tps() { grep -o '[0-9.]* tokens/s' | awk '{print $1}'; }
a=$("$BIN/minillm" --style vllm --sched async --graphs --steps 400 | tps)
b=$(env LD_PRELOAD="$SHIM" TOKPROF_OUT="$OUT" TOKPROF_GPU=off "$BIN/minillm" --style vllm --sched async --graphs --steps 400 | tps)
c=$(env LD_PRELOAD="$SHIM" TOKPROF_OUT="$OUT" TOKPROF_GPU=always "$BIN/minillm" --style vllm --sched async --graphs --steps 400 | tps)
row "tokens/s | without $a | shim, no CUPTI $b | shim + CUPTI $c"
l0=$("$BIN/launchloop" 300000 5000 20000 | awk '{print $1}')
l1=$(env LD_PRELOAD="$SHIM" TOKPROF_OUT="$OUT" TOKPROF_GPU=off "$BIN/launchloop" 300000 5000 20000 | awk '{print $1}')
row "ns/launch (real GPU) | without $l0 | with shim $l1"
# Within one process: hooked vs libcudart's own __cudaLaunchKernel in alternating bursts
# (docs/BENCH.md, "the shim's cost measured within one process").
lp=$(env LD_PRELOAD="$SHIM" TOKPROF_OUT="$OUT" TOKPROF_GPU=off "$BIN/launchloop" 300000 5000 20000 paired)
row "ns/launch added (real GPU, within one process) | $lp"

# The figures that decide TOKPROF_GPU's default (docs/OPERATIONS.md, "GPU time"): what CUPTI
# activity tracing costs a launch-bound program, always against the default window (2 steps of
# every 20 timed; CUPTI's API callbacks stay subscribed on every launch outside it) and off.
say "== 6. TOKPROF_GPU: off / window:2/20 (default) / always, median of 3"
med() { sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "?")}'; }
gpurecs() { "$TKP" summary --json "$1" 2>/dev/null | python3 -c \
    'import json,sys; g=json.load(sys.stdin)["gpu"]; print(g.get("timed_steps"), "of", g.get("token_steps"), "steps timed")' 2>/dev/null; }
for m in off window:2/20 always; do
    d=$OUT/gpu_${m//[:\/]/_}; rm -rf "$d"; mkdir -p "$d"
    ll=$(for i in 1 2 3; do env LD_PRELOAD="$SHIM" TOKPROF_OUT="$d" TOKPROF_GPU=$m \
        "$BIN/launchloop" 300000 5000 20000 | awk '{print $1}'; done | med)
    tv=$(for i in 1 2 3; do rm -f "$d"/minillm.*.tokprof; env LD_PRELOAD="$SHIM" TOKPROF_OUT="$d" \
        TOKPROF_GPU=$m "$BIN/minillm" --style vllm --sched async --graphs --steps 400 | tps; done | med)
    cap=$(ls "$d"/minillm.*.tokprof 2>/dev/null | head -1)
    th=$(for i in 1 2 3; do env LD_PRELOAD="$SHIM" TOKPROF_OUT="$d/hf" TOKPROF_GPU=$m \
        "$BIN/minillm" --style hf --steps 100 | tps; done | med)
    row "TOKPROF_GPU=$m | launchloop ns/launch $ll | minillm vllm async graphs tokens/s $tv ($( [ -n "$cap" ] && gpurecs "$cap")) | minillm hf eager tokens/s $th"
done

say
say "== gpu-check summary ($(date -u +%F), logs in $OUT)"
printf '%s\n' "${ROWS[@]}" | tee -a "$LOG"
