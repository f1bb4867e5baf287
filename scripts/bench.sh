#!/usr/bin/env bash
# Benchmarks behind docs/BENCH.md. Prints a markdown table of what it measured; run it on an idle
# machine and paste the table (with the machine) into docs/BENCH.md.
#
#   scripts/bench.sh            all
#   scripts/bench.sh launch     ns added per launch (simgpu zero-cost mode): with vs without shim,
#                               and within one process, hooked vs libcudart's own launch in
#                               alternating bursts (NP launches, default 1 000 000), with its
#                               control; one core, SCHED_FIFO as root (LAUNCH_PIN overrides)
#   scripts/bench.sh launchcg   instructions per launch the shim adds (callgrind, application
#                               thread, launchloop 120 000 minus 20 000 launches, with minus without
#                               shim, TOKPROF_GPU=off): the launch path's figure on a loaded machine;
#                               also with TOKPROF_STEP=kernel:RE (a regex no kernel matches)
#   scripts/bench.sh bytes      bytes per launch on disk for minillm --style vllm / hf / vllm --graphs
#                               (RUNS runs each, median; BEFORE_SHIM=other/libtokprof.so alternates),
#                               and with GPU records (--style vllm, TOKPROF_GPU=off against always):
#                               bytes per launch and per GPU record; TIME_NS=Q with host times to
#                               Q ns (TOKPROF_TIME_NS)
#   scripts/bench.sh libcall    ns added per cublasLtMatmul (cached descriptors) and cublasGemmEx
#   scripts/bench.sh stacks     ns per launch with TOKPROF_STACKS off / sample:1000 / sample:1, and
#                               capture size with stacks
#   scripts/bench.sh gpu        ns per launch with GPU time (CUPTI, simgpu's fake) on vs off, and
#                               the memory CUPTI's activity buffers took (gpu_info peak)
#   scripts/bench.sh writer     the writer thread: records/s per core of its CPU time without and
#                               with GPU records (minillm --style hf, SIMGPU_ZERO, 3000 steps),
#                               callgrind instructions per ring event and per GPU record, and
#                               drops of launchloop launching without pause (loss onset)
#   scripts/bench.sh decode     decoder records/s on one core over a 10M-launch capture: reader,
#                               summary (and its peak RSS), check; Python json.load for scale
#   scripts/bench.sh decodecpu  decoder records per second of user CPU (issue 32) on the 10M-launch
#                               captures without and with GPU records (made once, kept in
#                               BENCH_DIR, default /tmp/tokprof-bench): the reader (per record and
#                               in bulk), summary, table steps, check with the project's spec and
#                               with tests/bench/user10.spec, user10b.spec and user10c.spec
#                               (three users' specs);
#                               CG=1 adds callgrind instructions per
#                               record on 2000-step captures; BEFORE=DIR alternates with another
#                               build (e.g. main's) run by run
#   scripts/bench.sh tables     tokprof table steps / step_classes against tokprof summary on the
#                               10-million-launch captures, without and with GPU records: CPU
#                               seconds (median of RUNS, one core), rows/s (issue 21's target)
#   scripts/bench.sh whatif     tokprof whatif against summary on the same two captures: CPU seconds,
#                               steps/s, peak RSS (issue 30)
#   scripts/bench.sh import     tokprof import of a ~1 GB Kineto trace (the shared H100 trace's events
#                               repeated COPIES times, default 200: tests/bench/gen_trace.py), plain
#                               and gzip: MB/s and events/s on one core (user+sys CPU), peak RSS
#   scripts/bench.sh alwayson   minillm --style vllm --sched async --graphs, AO_STEPS steps (100k):
#                               tokens/s and peak RSS without the shim, stream mode, flight mode
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

# The 10-million-launch captures (minillm --style hf, 95000 steps, made once and kept in
# build/bench/): their paths, without GPU records and with (tests/bench/gen_capture.sh).
hf95k() {
    local g cap
    for g in "" gpu; do
        cap=$B/bench/hf95k${g:+-gpu}.tokprof
        [ -s "$cap" ] || tests/bench/gen_capture.sh "$B" "$cap" 95000 $g >&2
        echo "$cap"
    done
}

if [ "$what" = all ] || [ "$what" = launch ]; then
    # Where the timed runs go: one core (taskset -c 1) and, as root, SCHED_FIFO, so that other
    # tenants' work (builds, other jobs) stays off the measured core; the shim's writer thread
    # inherits both and drains in the pauses (a burst of 5000 fits its ring: nothing is dropped,
    # which is checked). LAUNCH_PIN overrides it ("" runs unpinned).
    pin_default="taskset -c 1"
    [ "$(id -u)" = 0 ] && command -v chrt >/dev/null && pin_default="chrt -f 20 taskset -c 1"
    read -r -a PIN <<<"${LAUNCH_PIN-$pin_default}"
    nodrops() { # the one capture in $work: no record dropped
        local cap dropped
        cap=$(ls "$work"/launchloop.*.tokprof | head -1)
        dropped=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])')
        [ "$dropped" = 0 ] || echo "warning: $dropped records dropped in run $i" >&2
        rm -f "$work"/*.tokprof
    }
    # 1. Between processes: launchloop without and with the shim, alternated so that drift of the
    # machine hits both alike. Launches come in bursts of 5000 with 20 ms pauses (untimed), as a
    # serving loop's do, with the default ring: the writer drains between bursts and nothing is
    # dropped, so this is the record path, not the drop path. Each process's figure moves by
    # several ns with where its code and data fall, more than the shim's cost on this VM.
    # 2. Within one process (launchloop's `paired` mode): bursts alternate between the hooked
    # __cudaLaunchKernel and libcudart's own (dlsym on its handle, which no preload interposes),
    # and the process prints the median over pairs of (hooked - direct) per launch; the control is
    # the same run without the shim, where both are libcudart's (0 but for noise).
    paired() { # launchloop's paired line ("H ns/launch hooked, D direct, A added (...)") -> A D H
        sed -n 's/^\([-0-9.]*\) ns\/launch hooked, \([-0-9.]*\) direct, \([-0-9.]*\) added.*/\3 \2 \1/p' "$1"
    }
    NP=${NP:-1000000}
    : >"$work/base"; : >"$work/shim"; : >"$work/pair"; : >"$work/null"; : >"$work/pdirect"; : >"$work/phooked"
    for i in $(seq "$RUNS"); do
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM "${PIN[@]}" "$B/kernels/launchloop" "$N" 5000 20000 |
            awk '{print $1}' >>"$work/base"
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=off \
            "${PIN[@]}" "$B/kernels/launchloop" "$N" 5000 20000 | awk '{print $1}' >>"$work/shim"
        nodrops
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=off \
            "${PIN[@]}" "$B/kernels/launchloop" "$NP" 5000 20000 paired >"$work/p.out"
        nodrops
        SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM "${PIN[@]}" "$B/kernels/launchloop" "$NP" 5000 20000 paired \
            >"$work/n.out"
        read -r added direct hooked < <(paired "$work/p.out")
        echo "$added" >>"$work/pair"; echo "$direct" >>"$work/pdirect"; echo "$hooked" >>"$work/phooked"
        read -r added direct hooked < <(paired "$work/n.out")
        echo "$added" >>"$work/null"
    done
    b=$(median <"$work/base"); s=$(median <"$work/shim")
    echo "| launch path (simgpu zero-cost, median of $RUNS runs, ${PIN[*]:-unpinned}) | without shim | with shim | added |"
    echo "|---|---|---|---|"
    printf '| between processes, ns per launch (%s launches a run) | %s | %s | %.1f |\n' "$N" "$b" "$s" \
        "$(echo "$s - $b" | bc -l)"
    printf '| within one process, ns per launch (%s launches a run, pairs of 5000: hooked - direct) | %s | %s | **%s** |\n' \
        "$NP" "$(median <"$work/pdirect")" "$(median <"$work/phooked")" "$(median <"$work/pair")"
    printf '| control: the same pairs without the shim (both libcudart'"'"'s) | | | %s |\n\n' "$(median <"$work/null")"
    echo "runs without:       $(tr '\n' ' ' <"$work/base")" >&2
    echo "runs with:          $(tr '\n' ' ' <"$work/shim")" >&2
    echo "paired, added:      $(tr '\n' ' ' <"$work/pair")" >&2
    echo "control, added:     $(tr '\n' ' ' <"$work/null")" >&2
fi

if [ "$what" = all ] || [ "$what" = launchcg ]; then
    # Instructions are the same however loaded the machine is; wall time is not. The difference of
    # two run lengths takes out start-up and exit; with minus without shim leaves the shim's.
    cg() { # launches, preload or empty, clock[, TOKPROF_STEP] -> instructions of main()
        (cd "$work" && env ${2:+LD_PRELOAD=$2} ${4:+TOKPROF_STEP=$4} TOKPROF_OUT=$work TOKPROF_GPU=off TOKPROF_CLOCK=$3 \
            SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM valgrind --tool=callgrind --toggle-collect=main \
            --callgrind-out-file="$work/cg.out" "$B/kernels/launchloop" "$1" 5000 20000 >/dev/null 2>&1)
        callgrind_annotate "$work/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
        rm -f "$work"/cg.out "$work"/*.tokprof
    }
    echo "| launch path, callgrind (launchloop 120 000 - 20 000 launches, TOKPROF_GPU=off) | instructions per launch without shim | with shim | added by the shim |"
    echo "|---|---|---|---|"
    for clk in auto monotonic auto:kernel; do
        step=; [ "$clk" = auto:kernel ] && clk=auto step='kernel:^nomatch$'
        b=$(( ($(cg 120000 "" $clk) - $(cg 20000 "" $clk)) ))
        w=$(( ($(cg 120000 "$SHIM" $clk "$step") - $(cg 20000 "$SHIM" $clk "$step")) ))
        printf '| TOKPROF_CLOCK=%s%s | %.1f | %.1f | **%.1f** |\n' "$clk" "${step:+, TOKPROF_STEP=$step}" \
            "$(echo "$b / 100000" | bc -l)" "$(echo "$w / 100000" | bc -l)" "$(echo "($w - $b) / 100000" | bc -l)"
    done
    echo
fi

if [ "$what" = all ] || [ "$what" = bytes ]; then
    # Bytes move with the host's timing jitter (that is what the times encode): RUNS runs each,
    # the median (min-max). BEFORE_SHIM=path/libtokprof.so (e.g. main's build) alternates that
    # shim with this one run by run and prints both.
    # TIME_NS=Q writes host times to Q ns (TOKPROF_TIME_NS; docs/OPERATIONS.md "Budgets").
    shims="$SHIM"; [ -n "${BEFORE_SHIM:-}" ] && shims="$BEFORE_SHIM $SHIM"
    shimkey() { echo "$1" | md5sum | cut -c1-8; } # a shim's path as a file name part
    export TOKPROF_TIME_NS=${TIME_NS:-1}
    echo "| capture size (minillm on simgpu, tier 1: TOKPROF_GPU=off, TOKPROF_TIME_NS=$TOKPROF_TIME_NS, 400 steps, median of $RUNS) | shim | launches | graph launches | bytes | bytes per launch or graph launch |"
    echo "|---|---|---|---|---|---|"
    for style in "vllm" "hf" "vllm --graphs"; do
        for s in $shims; do : >"$work/bytes.$(shimkey "$s")"; done
        for i in $(seq "$RUNS"); do
            for s in $shims; do
                d="$work/bytes"; rm -rf "$d"; mkdir -p "$d"
                LD_LIBRARY_PATH=$SIM LD_PRELOAD=$s TOKPROF_OUT=$d TOKPROF_GPU=off "$B/kernels/minillm" \
                    --style $style --steps 400 >/dev/null
                cap=$(ls "$d"/minillm.*.tokprof)
                read -r launches glaunches < <("$TKP" summary --json "$cap" |
                    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["launches"], j["graph_launches"])')
                echo "$(stat -c %s "$cap") $launches $glaunches" >>"$work/bytes.$(shimkey "$s")"
            done
        done
        for s in $shims; do
            f="$work/bytes.$(shimkey "$s")"
            read -r launches glaunches < <(awk 'NR==1 {print $2, $3}' "$f")
            b=$(awk '{print $1}' "$f" | median)
            printf '| `--style %s` | %s | %s | %s | %s | **%.2f** (%.2f-%.2f) |\n' "$style" "$s" "$launches" \
                "$glaunches" "$b" "$(echo "$b / ($launches + $glaunches)" | bc -l)" \
                "$(awk -v n=$((launches + glaunches)) 'NR==1 || $1<m {m=$1} END {print m/n}' "$f")" \
                "$(awk -v n=$((launches + glaunches)) '$1>m {m=$1} END {print m/n}' "$f")"
        done
    done
    echo
    # With GPU records (tier 2, simgpu's fake CUPTI): the same capture with TOKPROF_GPU=off and
    # always, run after run; bytes per GPU record = (bytes with - bytes without) / GPU records
    # (GPU_RUN, GPU_TMPL, the copies, GPU_INFO: what GPU time adds to the file).
    echo "| capture size with GPU records (minillm --style vllm, 400 steps, median of $RUNS) | shim | launches | GPU records | bytes, GPU off | bytes, GPU on | bytes per launch, GPU on | **bytes per GPU record** |"
    echo "|---|---|---|---|---|---|---|---|"
    for s in $shims; do h=$(shimkey "$s"); : >"$work/goff.$h"; : >"$work/gon.$h"; done
    for i in $(seq "$RUNS"); do
        for s in $shims; do
            h=$(shimkey "$s")
            for m in off always; do
                d="$work/gbytes"; rm -rf "$d"; mkdir -p "$d"
                LD_LIBRARY_PATH=$SIM LD_PRELOAD=$s TOKPROF_OUT=$d TOKPROF_GPU=$m "$B/kernels/minillm" \
                    --style vllm --steps 400 >/dev/null
                cap=$(ls "$d"/minillm.*.tokprof)
                launches=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["launches"])')
                grecs=0
                [ $m = always ] && grecs=$("$TKP" dump --type gpu_info "$cap" | tail -1 |
                    python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
                echo "$(stat -c %s "$cap") $launches $grecs" >>"$work/$([ $m = off ] && echo goff || echo gon).$h"
            done
        done
    done
    for s in $shims; do
        h=$(shimkey "$s")
        boff=$(awk '{print $1}' "$work/goff.$h" | median); bon=$(awk '{print $1}' "$work/gon.$h" | median)
        read -r launches grecs < <(awk 'NR==1 {print $2, $3}' "$work/gon.$h")
        printf '| `--style vllm` | %s | %s | %s | %s | %s | %.2f | **%.2f** |\n' "$s" "$launches" "$grecs" \
            "$boff" "$bon" "$(echo "$bon / $launches" | bc -l)" "$(echo "($bon - $boff) / $grecs" | bc -l)"
    done
    unset TOKPROF_TIME_NS
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

if [ "$what" = all ] || [ "$what" = writer ]; then
    # The writer's CPU time is its own thread's (CLOCK_THREAD_CPUTIME_ID, the TOKPROF_LOG=debug
    # line "writer: E ring events, G GPU records, T ms CPU"): records per second of one core,
    # whatever else the machine runs. Median of RUNS.
    : >"$work/woff"; : >"$work/won"
    for i in $(seq "$RUNS"); do
        for m in off always; do
            line=$(SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=$m \
                TOKPROF_LOG=debug "$B/kernels/minillm" --style hf --steps 3000 2>&1 >/dev/null | grep 'writer:')
            cap=$(ls "$work"/minillm.*.tokprof | head -1)
            launches=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["launches"])')
            echo "$line" | awk -v l="$launches" '{e=$3; g=$6; t=$9/1000; printf "%d %d %d %.4f\n", e, g, l, t}' \
                >>"$work/$([ $m = off ] && echo woff || echo won)"
            rm -f "$work"/*.tokprof
        done
    done
    echo "| writer thread (minillm --style hf --steps 3000, SIMGPU_ZERO, median of $RUNS) | ring events | GPU records | writer CPU ms | records/s per core | launches/s per core |"
    echo "|---|---|---|---|---|---|"
    for m in off always; do
        f="$work/$([ $m = off ] && echo woff || echo won)"
        awk '{printf "%d %d %d %.4f %.0f\n", $1, $2, $3, $4, ($1 + $2) / $4}' "$f" | sort -k5 -g |
            awk -v m=$m '{a[NR]=$0} END {split(a[int((NR+1)/2)], x, " ");
                printf "| TOKPROF_GPU=%s | %d | %d | %.1f | %.1f M | %.2f M |\n", m, x[1], x[2], x[4]*1000, x[5]/1e6, x[3]/x[4]/1e6}'
    done
    echo
    # Loss onset: launchloop launching 2M times without pause, as fast as simgpu lets it.
    echo "| launchloop, 2M launches without pause (SIMGPU_ZERO) | launches/s | dropped |"
    echo "|---|---|---|"
    for m in off always; do
        ns=$(SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=$m \
            "$B/kernels/launchloop" 2000000 2000000 0 | awk '{print $1}')
        cap=$(ls "$work"/launchloop.*.tokprof | head -1)
        d=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])')
        printf '| TOKPROF_GPU=%s | %.2f M | %s |\n' "$m" "$(echo "1000 / $ns" | bc -l)" "$d"
        rm -f "$work"/*.tokprof
    done
    echo
    if command -v valgrind >/dev/null; then
        # Instructions, not time: the same on a loaded machine. The writer thread of one run
        # (--style hf --steps 300, GPU on); a ring large enough that nothing is dropped under
        # valgrind. Per GPU record: tkp_gpuenc_encode less CUPTI's own cuptiActivityGetNextRecord.
        (cd "$work" && SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work \
            TOKPROF_GPU=always TOKPROF_RING_KB=65536 valgrind --tool=callgrind --separate-threads=yes \
            "$B/kernels/minillm" --style hf --steps 300 >/dev/null 2>&1)
        w=$(grep -l writer_main "$work"/callgrind.out.*-0* | head -1)
        callgrind_annotate --inclusive=yes "$w" 2>/dev/null >"$work/incl"
        get() { grep -E "$1" "$work/incl" | head -1 | awk '{gsub(",","",$1); print $1}'; }
        cap=$(ls "$work"/minillm.*.tokprof | head -1)
        recs=$("$TKP" dump --type gpu_info "$cap" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
        ev=$(( $(get ':tkp_rings_drain ') ))
        launches=$("$TKP" summary --json "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["launches"])')
        echo "| writer, callgrind (minillm --style hf --steps 300, GPU on) | per launch (all of the writer) | per launch: drain and encode of ring events | per GPU record | zstd per launch |"
        echo "|---|---|---|---|---|"
        printf '| instructions | %.0f | %.0f | %.0f | %.0f |\n\n' \
            "$(echo "$(get 'PROGRAM TOTALS') / $launches" | bc -l)" "$(echo "$ev / $launches" | bc -l)" \
            "$(echo "($(get ':tkp_gpuenc_encode ') - $(get ':cuptiActivityGetNextRecord ')) / $recs" | bc -l)" \
            "$(echo "$(get ':compress_chunk ') / $launches" | bc -l)"
        rm -f "$work"/callgrind.out.* "$work"/*.tokprof
    fi
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
            TOKPROF_BUFFER_MB=1024 TOKPROF_GPU=off "$B/tests/e2e/libbench" "$LN" >>"$work/ls"
        rm -f "$work"/*.tokprof
    done
    lb1=$(awk '{print $1}' "$work/lb" | median); ls1=$(awk '{print $1}' "$work/ls" | median)
    lb2=$(awk '{print $2}' "$work/lb" | median); ls2=$(awk '{print $2}' "$work/ls" | median)
    echo "| library calls (simgpu zero-cost, $LN calls, median of $RUNS) | without shim | with shim | added |"
    echo "|---|---|---|---|"
    printf '| ns per cublasLtMatmul (cached descriptors) | %s | %s | %.1f |\n' "$lb1" "$ls1" "$(echo "$ls1 - $lb1" | bc -l)"
    printf '| ns per cublasGemmEx (bf16, via cublasLtMatmul) | %s | %s | %.1f |\n\n' "$lb2" "$ls2" "$(echo "$ls2 - $lb2" | bc -l)"
fi

if [ "$what" = all ] || [ "$what" = stacks ]; then
    # TOKPROF_STACKS: launchloop (its launch site is ~6 frames deep) with stacks off, sampled one
    # launch in 1000, and every launch (sample:1: the cost of one unwind + interning, per launch).
    # Then the capture size of minillm --steps 400 (vllm) with stacks off, first:4, sample:1000,
    # sample:10 (stacks are interned: a launch pays 1-2 bytes for its id; STACK and MODULE
    # records are repeated in each chunk that uses them).
    : >"$work/s_off"; : >"$work/s_1000"; : >"$work/s_1"
    for i in $(seq "$RUNS"); do
        for m in off sample:1000 sample:1; do
            SIMGPU_ZERO=1 LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$work TOKPROF_GPU=off \
                TOKPROF_STACKS=$m "$B/kernels/launchloop" "$N" 5000 20000 |
                awk '{print $1}' >>"$work/s_${m#sample:}"
            rm -f "$work"/*.tokprof
        done
    done
    o=$(median <"$work/s_off"); k=$(median <"$work/s_1000"); a=$(median <"$work/s_1")
    echo "| stacks (simgpu zero-cost, $N launches, median of $RUNS) | off | sample:1000 | sample:1 |"
    echo "|---|---|---|---|"
    printf '| ns per launch | %s | %s | %s |\n' "$o" "$k" "$a"
    printf '| added per launch vs off | | %.1f | %.1f |\n\n' "$(echo "$k - $o" | bc -l)" "$(echo "$a - $o" | bc -l)"
    echo "| capture size with stacks (minillm --steps 400, vllm) | bytes | vs off |"
    echo "|---|---|---|"
    off_bytes=0
    for m in off first:4 sample:1000 sample:10; do
        d="$work/sbytes"; rm -rf "$d"; mkdir -p "$d"
        LD_LIBRARY_PATH=$SIM LD_PRELOAD=$SHIM TOKPROF_OUT=$d TOKPROF_GPU=always TOKPROF_STACKS=$m \
            "$B/kernels/minillm" --steps 400 >/dev/null
        bytes=$(stat -c %s "$d"/minillm.*.tokprof)
        [ "$m" = off ] && off_bytes=$bytes
        printf '| `TOKPROF_STACKS=%s` | %s | %+.1f%% |\n' "$m" "$bytes" \
            "$(echo "100 * ($bytes - $off_bytes) / $off_bytes" | bc -l)"
    done
    echo
fi

if [ "$what" = all ] || [ "$what" = decode ]; then
    # Decoder throughput on one core (taskset -c 0) over a ~10-million-launch capture (minillm
    # --style hf, 95000 steps, made once and kept in build/bench/): the reader alone, `tokprof
    # summary` with its peak RSS, `tokprof check` with tests/e2e/spec's 10-assertion spec, and the
    # same capture as Chrome trace JSON merely loaded by Python's json module, for scale.
    # DECODE_JSON=0 skips the JSON step (it needs ~1.5 GB of disk and ~8 GB of memory).
    DCAP=$B/bench/hf95k.tokprof
    [ -s "$DCAP" ] || tests/bench/gen_capture.sh "$B" "$DCAP" 95000
    sed -n '/<<.SPEC.$/,/^SPEC$/p' tests/e2e/spec/bench_check.sh | sed '1d;$d' >"$work/bench.tks"
    recs=$("$B/tests/bench/bench_reader" "$DCAP" | awk '{print $1}')
    launches=$("$TKP" summary --json "$DCAP" | python3 -c 'import json,sys; print(json.load(sys.stdin)["launches"])')
    : >"$work/rd"; : >"$work/sum"; : >"$work/chk"
    for i in $(seq "$RUNS"); do
        taskset -c 0 "$B/tests/bench/bench_reader" "$DCAP" | awk '{print $5}' >>"$work/rd"
        taskset -c 0 /usr/bin/time -f '%e %M' -o "$work/t" "$TKP" summary "$DCAP" >/dev/null
        tail -1 "$work/t" >>"$work/sum"
        taskset -c 0 /usr/bin/time -f '%e %M' -o "$work/t" "$TKP" check "$work/bench.tks" "$DCAP" \
            >/dev/null 2>&1 || true # the spec's bounds fail on simgpu: only the time counts
        tail -1 "$work/t" >>"$work/chk" # time -o writes "Command exited with non-zero status 1" first
    done
    rd=$(median <"$work/rd")
    ts=$(awk '{print $1}' "$work/sum" | median); rss=$(awk '{print $2}' "$work/sum" | sort -g | tail -1)
    tc=$(awk '{print $1}' "$work/chk" | median); crss=$(awk '{print $2}' "$work/chk" | sort -g | tail -1)
    state=$("$TKP" check --explain "$work/bench.tks" | tail -1)
    echo "| decode ($launches launches, $recs records, $(du -m "$DCAP" | cut -f1) MB; one core, median of $RUNS) | seconds | records/s | peak RSS |"
    echo "|---|---|---|---|"
    printf '| reader alone (tests/bench/bench_reader) | %s | %.0f | |\n' "$rd" "$(echo "$recs / $rd" | bc -l)"
    printf '| `tokprof summary` | %s | %.0f | %s MB |\n' "$ts" "$(echo "$recs / $ts" | bc -l)" "$((rss / 1024))"
    printf '| `tokprof check`, 10 assertions (%s) | %s | %.0f | %s MB |\n' "$state" "$tc" \
        "$(echo "$recs / $tc" | bc -l)" "$((crss / 1024))"
    if [ "${DECODE_JSON:-1}" != 0 ]; then
        # tokprof export writes Chrome trace events; Python only parses the file (one run)
        "$TKP" export --format chrome -o "$work/trace.json" "$DCAP" >/dev/null
        /usr/bin/time -f '%e %M' -o "$work/t" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
            "$work/trace.json"
        read -r tj jrss <"$work/t"
        printf '| Python `json.load` of the same as Chrome JSON (%s MB, one run) | %s | %.0f | %s MB |\n' \
            "$(du -m "$work/trace.json" | cut -f1)" "$tj" "$(echo "$recs / $tj" | bc -l)" "$((jrss / 1024))"
        printf '\njson.load / tokprof summary: %.1fx the time\n' "$(echo "$tj / $ts" | bc -l)"
        rm -f "$work/trace.json"
    fi
    echo
fi

if [ "$what" = all ] || [ "$what" = decodecpu ]; then
    # Records per second of user CPU (issue 32): wall time on a shared 2-core VM waits for the core,
    # user time does not. One core (taskset -c 0), median of RUNS, the commands alternated run by
    # run. The captures are made once by tests/bench/gen_capture.sh and kept in BENCH_DIR (a capture
    # is format-compatible with later decoders: delete the directory to make them again).
    BD=${BENCH_DIR:-/tmp/tokprof-bench}
    mkdir -p "$BD"
    for g in "" gpu; do
        cap=$BD/hf95k${g:+-gpu}.tokprof
        [ -s "$cap" ] || tests/bench/gen_capture.sh "$B" "$cap" 95000 $g
    done
    sed -n '/<<.SPEC.$/,/^SPEC$/p' tests/e2e/spec/bench_check.sh | sed '1d;$d' >"$work/bench.tks"
    dc_cmd() { # what, capture, build -> the command
        case $1 in
        reader) echo "$3/tests/bench/bench_reader $2" ;;
        bulk) echo "$3/tests/bench/bench_reader --bulk $2" ;;
        summary) echo "$3/decoder/tokprof summary $2" ;;
        steps) echo "$3/decoder/tokprof table steps -o /dev/null $2" ;;
        check) echo "$3/decoder/tokprof check $work/bench.tks $2" ;;
        user10) echo "$3/decoder/tokprof check tests/bench/user10.spec $2" ;;
        user10b) echo "$3/decoder/tokprof check tests/bench/user10b.spec $2" ;;
        user10c) echo "$3/decoder/tokprof check tests/bench/user10c.spec $2" ;;
        esac
    }
    DC_WHAT=${DC_WHAT:-reader bulk summary steps check user10 user10b user10c}
    # BEFORE: another build (its decoder/tokprof and tests/bench/bench_reader), run alternately
    # with this one, command by command: on a shared VM only such pairs compare
    builds=("$B")
    [ -n "${BEFORE:-}" ] && builds=("$BEFORE" "$B")
    echo "| records per user-CPU second, one core, median of $RUNS (load average at start: $(cut -d' ' -f1 /proc/loadavg)) | records | $(for w in $DC_WHAT; do printf '%s | ' "$w"; done)"
    echo "|---|---|$(for w in $DC_WHAT; do printf -- '---|'; done)"
    for g in "" gpu; do
        cap=$BD/hf95k${g:+-gpu}.tokprof
        recs=$("$B/tests/bench/bench_reader" "$cap" | awk '{print $1}')
        for b in "${!builds[@]}"; do for w in $DC_WHAT; do : >"$work/dc_${b}_$w"; done; done
        for i in $(seq "$RUNS"); do
            for w in $DC_WHAT; do
                for b in "${!builds[@]}"; do
                    # check exits 1 or 3 when the spec fails on simgpu: only the time counts
                    # shellcheck disable=SC2046
                    taskset -c 0 /usr/bin/time -f '%U %S' -o "$work/t" $(dc_cmd "$w" "$cap" "${builds[$b]}") \
                        >/dev/null 2>&1 || true
                    tail -1 "$work/t" | awk '{print $1}' >>"$work/dc_${b}_$w"
                done
            done
        done
        for b in "${!builds[@]}"; do
            row="| $(basename "$cap") ($(du -m "$cap" | cut -f1) MB)${BEFORE:+, $([ "$b" = 0 ] && echo before || echo after)} | $recs |"
            for w in $DC_WHAT; do
                u=$(median <"$work/dc_${b}_$w")
                row="$row $(awk -v r="$recs" -v u="$u" 'BEGIN { printf "%.1f M (%.3f s)", r / u / 1e6, u }') |"
            done
            echo "$row"
        done
    done
    if [ "${CG:-0}" = 1 ]; then
        # callgrind: instructions per record, on 2000-step captures (the whole process)
        echo
        echo "| callgrind instructions per record (2000 steps) | records | $(for w in $DC_WHAT; do printf '%s | ' "$w"; done)"
        echo "|---|---|$(for w in $DC_WHAT; do printf -- '---|'; done)"
        for g in "" gpu; do
            cap=$BD/hf2k${g:+-gpu}.tokprof
            [ -s "$cap" ] || tests/bench/gen_capture.sh "$B" "$cap" 2000 $g
            recs=$("$B/tests/bench/bench_reader" "$cap" | awk '{print $1}')
            for b in "${!builds[@]}"; do
                row="| $(basename "$cap")${BEFORE:+, $([ "$b" = 0 ] && echo before || echo after)} | $recs |"
                for w in $DC_WHAT; do
                    # shellcheck disable=SC2046
                    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
                        $(dc_cmd "$w" "$cap" "${builds[$b]}") >/dev/null 2>"$work/cg.err" || true
                    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/cg.err")
                    row="$row $(awk -v r="$recs" -v i="$ir" 'BEGIN { printf "%.0f", i / r }') |"
                done
                echo "$row"
            done
        done
    fi
    echo
fi

if [ "$what" = all ] || [ "$what" = tables ]; then
    # The fleet tables cost no more than summary (issue 21): the three commands alternated run by
    # run on one core, user+sys CPU seconds (instructions: callgrind, docs/BENCH.md).
    caps=$(hf95k)
    echo "| fleet tables (one core, CPU s, median of $RUNS) | summary | table steps | table step_classes | steps rows/s | step_classes rows/s |"
    echo "|---|---|---|---|---|---|"
    for cap in $caps; do
        for c in sum steps sc; do : >"$work/tb_$c"; done
        for i in $(seq "$RUNS"); do
            for c in sum steps sc; do
                case $c in
                sum) a=(summary) ;; steps) a=(table steps -o /dev/null) ;;
                sc) a=(table step_classes -o /dev/null) ;;
                esac
                taskset -c 0 /usr/bin/time -f '%U %S' -o "$work/t" "$TKP" "${a[@]}" "$cap" >/dev/null
                awk '{print $1 + $2}' "$work/t" >>"$work/tb_$c"
            done
        done
        rs=$("$TKP" table steps --compress none -o - "$cap" | tail -n +2 | wc -l)
        rc=$("$TKP" table step_classes --compress none -o - "$cap" | tail -n +2 | wc -l)
        s=$(median <"$work/tb_sum"); t=$(median <"$work/tb_steps"); u=$(median <"$work/tb_sc")
        printf '| %s (%s) | %.2f | %.2f (%.3fx) | %.2f (%.3fx) | %.0f | %.0f |\n' \
            "$(basename "$cap")" "$(du -m "$cap" | cut -f1) MB" "$s" "$t" "$(echo "$t / $s" | bc -l)" \
            "$u" "$(echo "$u / $s" | bc -l)" "$(echo "$rs / $t" | bc -l)" "$(echo "$rc / $u" | bc -l)"
    done
    echo
fi

if [ "$what" = all ] || [ "$what" = whatif ]; then
    # tokprof whatif (issue 30) against summary on the 10-million-launch captures: one core, user+sys
    # CPU seconds, median of RUNS, alternated; steps/s = the capture's steps / whatif's seconds.
    caps=$(hf95k)
    echo "| whatif --scale attention=0.5 (one core, CPU s, median of $RUNS) | summary | whatif | x summary | steps/s | peak RSS |"
    echo "|---|---|---|---|---|---|"
    for cap in $caps; do
        : >"$work/wi_sum"; : >"$work/wi_w"
        for i in $(seq "$RUNS"); do
            taskset -c 0 /usr/bin/time -f '%U %S' -o "$work/t" "$TKP" summary "$cap" >/dev/null
            awk '{print $1 + $2}' "$work/t" >>"$work/wi_sum"
            taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$work/t" "$TKP" whatif --scale attention=0.5 \
                "$cap" >/dev/null
            awk '{print $1 + $2}' "$work/t" >>"$work/wi_w"
            rss=$(awk '{print $3}' "$work/t")
        done
        n=$("$TKP" steps --json "$cap" | grep -o '"kind":"token"' | wc -l)
        s=$(median <"$work/wi_sum"); w=$(median <"$work/wi_w")
        printf '| %s (%s) | %.2f | %.2f | %.2fx | %.0f | %s MB |\n' "$(basename "$cap")" \
            "$(du -m "$cap" | cut -f1) MB" "$s" "$w" "$(echo "$w / $s" | bc -l)" \
            "$(echo "$n / $w" | bc -l)" "$((rss / 1024))"
    done
    echo
fi

if [ "$what" = all ] || [ "$what" = import ]; then
    # one core: the importer is one thread; CPU time (user + sys), not wall time, on a shared VM
    python3 tests/bench/gen_trace.py "$work/big.json" --copies "${COPIES:-200}"
    gzip -1 -c "$work/big.json" >"$work/big.json.gz"
    bytes=$(stat -c %s "$work/big.json")
    echo "| input | JSON MB | events | CPU s (median of ${IMPORT_RUNS:-3}) | MB/s | events/s | peak RSS |"
    echo "|---|---|---|---|---|---|---|"
    for f in big.json big.json.gz; do
        : >"$work/cpu"
        for i in $(seq "${IMPORT_RUNS:-3}"); do
            /usr/bin/time -f "%U %S %M" -o "$work/t" "$TKP" import --json "$work/$f" -o "$work/big.tokprof" >"$work/rep"
            awk '{print $1 + $2}' "$work/t" >>"$work/cpu"
            rss=$(awk '{print $3}' "$work/t")
        done
        cpu=$(median <"$work/cpu")
        events=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"])' "$work/rep")
        awk -v f="$f" -v b="$bytes" -v e="$events" -v c="$cpu" -v r="$rss" 'BEGIN {
            printf "| %s | %.0f | %d | %.2f | %.0f | %.2f M | %.0f MB |\n", f, b / 1e6, e, c, b / 1e6 / c,
                e / c / 1e6, r / 1024 }'
    done
fi

if [ "$what" = all ] || [ "$what" = alwayson ]; then
    # The always-on cost: a decode loop with CUDA graphs and async scheduling (a vLLM-like steady
    # state) for AO_STEPS steps, interleaved runs, median tokens/s and the largest peak RSS
    # (getrusage maxrss via /usr/bin/time; minillm and simgpu grow on their own, the shim's part
    # is the difference). GPU time off: CUPTI is a separate cost (section gpu).
    AO_STEPS=${AO_STEPS:-100000}
    AO_RUNS=${AO_RUNS:-3}
    for m in none stream flight; do : >"$work/ao_$m"; done
    for i in $(seq "$AO_RUNS"); do
        for m in none stream flight; do
            rm -rf "$work/ao_out"
            if [ $m = none ]; then e=(env LD_LIBRARY_PATH="$SIM")
            else e=(env LD_LIBRARY_PATH="$SIM" LD_PRELOAD="$SHIM" TOKPROF_OUT="$work/ao_out"
                    TOKPROF_GPU=off TOKPROF_MODE=$m); fi
            "${e[@]}" /usr/bin/time -f '%M' -o "$work/t" "$B/kernels/minillm" --style vllm \
                --sched async --graphs --steps "$AO_STEPS" |
                sed -n 's/.* = \([0-9.]*\) tokens\/s.*/\1/p' | tr '\n' ' ' >>"$work/ao_$m"
            echo "$(cat "$work/t")" >>"$work/ao_$m"
        done
    done
    base=$(awk '{print $1}' "$work/ao_none" | median)
    echo "| always-on: minillm vllm async graphs, $AO_STEPS steps, median of $AO_RUNS | tokens/s | vs no shim | peak RSS |"
    echo "|---|---|---|---|"
    for m in none stream flight; do
        t=$(awk '{print $1}' "$work/ao_$m" | median); r=$(awk '{print $2}' "$work/ao_$m" | sort -g | tail -1)
        printf '| %s | %.0f | %.2f%% | %s MB |\n' "$m" "$t" "$(echo "100 * $t / $base" | bc -l)" "$((r / 1024))"
    done
    echo
fi
