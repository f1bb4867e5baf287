#!/usr/bin/env bash
# Throughput of `tokprof check`: a large simgpu capture (minillm --style hf, many steps) checked
# with a 10-assertion spec on one core. Prints records/s for the reader alone (bench_reader) and
# for `tokprof check`, and the monitor's state (its table's last line and --explain's total).
# scripts/bench.sh's decode section runs the same spec on the 10-million-launch capture.
# usage: tests/e2e/spec/bench_check.sh [BUILD_DIR] [STEPS]
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
STEPS=${2:-3000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
LD_LIBRARY_PATH=$B/tests/simgpu LD_PRELOAD=$B/shim/libtokprof.so TOKPROF_OUT=$W \
  "$B/kernels/minillm" --style hf --steps "$STEPS" >/dev/null
CAP=$(ls "$W"/*.tokprof)
cat >"$W/bench.tks" <<'SPEC'
class attn = r.kind == kernel and r.name =~ /attention/;
class gemm = r.op =~ /Gemm|Matmul/;
class argmax = r.kind == kernel and r.name =~ /ArgMax/;
class d2h = r.kind == memcpy and r.dir == "DtoH";
assert deadline [step]: s.dur <= 30ms;
assert p99 [run, skip 5 steps]: p99(s.dur in steps) < 25ms;
assert attn [step, when s.phase == "decode"]: count(attn in s) == 4;
assert lm_head [record]: argmax -> once in step gemm;
assert mid_sync [step]: count(d2h in s where r.pos < s.len - 1) == 0;
assert idle [step, warn]: idle_frac(s) < 0.9;
assert gap [step]: s.start - prev(s.end) <= 5ms;
assert kern [step]: max(r.dur in s where attn) <= 1ms;
assert launches [step]: s.launches < 1000;
assert mean [run]: mean(s.gpu_dur in steps) < 30ms;
SPEC
N=$("$B/decoder/tokprof" summary --json "$CAP" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["launches"]+d["copies"]+d["syncs"])')
t() { local s e; s=$(date +%s.%N); taskset -c 0 "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); echo "$e - $s" | bc; }
R=$( ("$B/decoder/tokprof" check --json "$W/bench.tks" "$CAP" 2>/dev/null || true) | wc -l)
TOTAL=$( ("$B/decoder/tokprof" check "$W/bench.tks" "$CAP" 2>/dev/null || true) | tail -1 | awk '{print $1}')
TS=$(t "$B/tests/bench/bench_reader" "$CAP")
TC=$(t "$B/decoder/tokprof" check "$W/bench.tks" "$CAP")
echo "capture: $(du -h "$CAP" | cut -f1), $TOTAL records (host launches+copies+syncs: $N), $STEPS decode steps"
echo "reader alone (bench_reader):  ${TS}s = $(echo "$TOTAL / $TS" | bc) records/s"
echo "tokprof check, 10 assertions: ${TC}s = $(echo "$TOTAL / $TC" | bc) records/s ($R JSON lines)"
("$B/decoder/tokprof" check "$W/bench.tks" "$CAP" 2>/dev/null || true) | tail -1 | sed 's/.*; state/state/'
"$B/decoder/tokprof" check --explain "$W/bench.tks" | tail -1
