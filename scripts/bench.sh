#!/usr/bin/env bash
# Benchmarks behind docs/BENCH.md. Prints a markdown table of what it measured; run it on an idle
# machine and paste the table (with the machine) into docs/BENCH.md.
#
#   scripts/bench.sh            all
#   scripts/bench.sh launch     ns added per launch (simgpu zero-cost mode, with vs without shim)
#   scripts/bench.sh bytes      bytes per launch on disk for minillm --style vllm / hf
#   scripts/bench.sh libcall    ns added per cublasLtMatmul (cached descriptors) and cublasGemmEx
#   scripts/bench.sh gpu        ns per launch with GPU time (CUPTI, simgpu's fake) on vs off, and
#                               the memory CUPTI's activity buffers took (gpu_info peak)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/kernels/launchloop ] || scripts/build.sh >/dev/null
B=$PWD/build
SIM=$B/tests/simgpu
SHIM=$B/shim/libtokprof.so
TKP=$B/decoder/tokprof
RUNS=${RUNS:-7}
N=${N:-300000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
what=${1:-all}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

if [ "$what" = all ] || [ "$what" = launch ]; then
    # Alternate the two so that drift of the machine hits both alike. Launches come in bursts of
    # 5000 with 20 ms pauses (untimed), as a serving loop's do, with the default ring: the writer
    # drains between bursts and nothing is dropped, so this is the record path, not the drop path.
    : >"$work/base"; : >"$work/shim"
    for i in $(seq "$RUNS"); do
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM "$B/kernels/launchloop" "$N" 5000 20000 |
            awk '{print $1}' >>"$work/base"
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work \
            TOKPROF_GPU=off "$B/kernels/launchloop" "$N" 5000 20000 | awk '{print $1}' >>"$work/shim"
        cap=$(ls "$work"/launchloop.*.tokprof | head -1)
        dropped=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])')
        [ "$dropped" = 0 ] || echo "warning: $dropped records dropped in run $i" >&2
        rm -f "$work"/*.tokprof
    done
    b=$(median <"$work/base"); s=$(median <"$work/shim")
    echo "| launch path (simgpu zero-cost, $N launches, median of $RUNS) | without shim | with shim | added |"
    echo "|---|---|---|---|"
    printf '| ns per launch | %s | %s | %.1f |\n\n' "$b" "$s" "$(echo "$s - $b" | bc -l)"
    echo "runs without: $(tr '\n' ' ' <"$work/base")" >&2
    echo "runs with:    $(tr '\n' ' ' <"$work/shim")" >&2
fi

if [ "$what" = all ] || [ "$what" = bytes ]; then
    echo "| capture size (minillm on simgpu) | launches | graph launches | bytes | bytes per launch |"
    echo "|---|---|---|---|---|"
    for style in "vllm" "hf" "vllm --graphs"; do
        d="$work/bytes"; rm -rf "$d"; mkdir -p "$d"
        LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$d "$B/kernels/minillm" --style $style \
            --steps 400 >/dev/null
        cap=$(ls "$d"/minillm.*.tokprof)
        read -r launches glaunches < <("$TKP" summary --json "$cap" |
            python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["launches"], j["graph_launches"])')
        bytes=$(stat -c %s "$cap")
        printf '| `--style %s --steps 400` | %s | %s | %s | %.2f |\n' "$style" "$launches" "$glaunches" \
            "$bytes" "$(echo "$bytes / ($launches + $glaunches)" | bc -l)"
    done
fi

if [ "$what" = all ] || [ "$what" = gpu ]; then
    # Tier 2 on simgpu: the fake libcupti.so.13 calls our callback per launch and builds one
    # activity record per kernel, as CUPTI does; its own cost is in the figure (a real CUPTI's
    # is not: measure that on a GPU). Launch records with TOKPROF_GPU=off against always.
    : >"$work/off"; : >"$work/on"; : >"$work/peak"
    for i in $(seq "$RUNS"); do
        for m in off always; do
            SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=$m \
                "$B/kernels/launchloop" "$N" 5000 20000 | awk '{print $1}' >>"$work/$([ $m = off ] && echo off || echo on)"
            cap=$(ls "$work"/launchloop.*.tokprof | head -1)
            [ $m = always ] && "$TKP" dump "$cap" | grep '"type":"gpu_info"' | tail -1 |
                python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["buffer_bytes_peak"], j["records"], j["dropped"])' >>"$work/peak"
            rm -f "$work"/*.tokprof
        done
    done
    o=$(median <"$work/off"); g=$(median <"$work/on")
    read -r peak recs drops < <(sort -g "$work/peak" | tail -1)
    echo "| GPU time (simgpu fake CUPTI, $N launches, median of $RUNS) | TOKPROF_GPU=off | always | added | CUPTI buffers peak | GPU records | dropped |"
    echo "|---|---|---|---|---|---|---|"
    printf '| ns per launch | %s | %s | %.1f | %s B | %s | %s |\n\n' "$o" "$g" "$(echo "$g - $o" | bc -l)" "$peak" "$recs" "$drops"
    echo "runs off:    $(tr '\n' ' ' <"$work/off")" >&2
    echo "runs always: $(tr '\n' ' ' <"$work/on")" >&2
fi

if [ "$what" = all ] || [ "$what" = libcall ]; then
    # ns per library call, with vs without shim: cublasLtMatmul with descriptors made once (the
    # descriptor cache hits) and bf16 cublasGemmEx (cuBLAS makes Lt descriptors and calls
    # cublasLtMatmul inside: nested hooks and cache updates included). Library kernels' launches
    # are recorded too (one per call here), so "added" includes one launch record.
    LN=${LN:-200000}
    : >"$work/lb"; : >"$work/ls"
    for i in $(seq "$RUNS"); do
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM "$B/tests/e2e/libbench" "$LN" >>"$work/lb"
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_RING_KB=262144 \
            TOKPROF_BUFFER_MB=1024 "$B/tests/e2e/libbench" "$LN" >>"$work/ls"
        rm -f "$work"/*.tokprof
    done
    lb1=$(awk '{print $1}' "$work/lb" | median); ls1=$(awk '{print $1}' "$work/ls" | median)
    lb2=$(awk '{print $2}' "$work/lb" | median); ls2=$(awk '{print $2}' "$work/ls" | median)
    echo "| library calls (simgpu zero-cost, $LN calls, median of $RUNS) | without shim | with shim | added |"
    echo "|---|---|---|---|"
    printf '| ns per cublasLtMatmul (cached descriptors) | %s | %s | %.1f |\n' "$lb1" "$ls1" "$(echo "$ls1 - $lb1" | bc -l)"
    printf '| ns per cublasGemmEx (bf16, via cublasLtMatmul) | %s | %s | %.1f |\n\n' "$lb2" "$ls2" "$(echo "$ls2 - $lb2" | bc -l)"
fi
