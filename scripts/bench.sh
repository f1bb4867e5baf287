#!/usr/bin/env bash
# Benchmarks behind docs/BENCH.md. Prints a markdown table of what it measured; run it on an idle
# machine and paste the table (with the machine) into docs/BENCH.md.
#
#   scripts/bench.sh            all
#   scripts/bench.sh launch     ns added per launch (simgpu zero-cost mode, with vs without shim)
#   scripts/bench.sh bytes      bytes per launch on disk for minillm --style vllm / hf
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/kernels/launchloop ] || scripts/build.sh >/dev/null
B=$PWD/build
SIM=$B/tests/simgpu
SHIM=$B/shim/libtokprof.so
TKP=$B/decoder/tokprof
RUNS=${RUNS:-7}
N=${N:-2000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
what=${1:-all}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

if [ "$what" = all ] || [ "$what" = launch ]; then
    # Alternate the two so that drift of the machine hits both alike. The ring is sized so that
    # nothing is dropped: this measures the record path, not the drop path.
    : >"$work/base"; : >"$work/shim"
    for i in $(seq "$RUNS"); do
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM "$B/kernels/launchloop" "$N" | awk '{print $1}' >>"$work/base"
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_RING_KB=262144 \
            TOKPROF_BUFFER_MB=1024 "$B/kernels/launchloop" "$N" | awk '{print $1}' >>"$work/shim"
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
