#!/usr/bin/env bash
# The real libcudart.so.13 on a machine without a GPU (or with one): the program's stdout, stderr
# and exit code are the same with and without the shim, and the capture lists its launches by
# name. Usage: real_cudart.sh PROGRAM SHIM TOKPROF WORKDIR
set -u
prog=$1 shim=$2 tokprof=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
env -u LD_LIBRARY_PATH "$prog" >"$work/out0" 2>"$work/err0"; rc0=$?
preload=${TOKPROF_TEST_PRELOAD_PREFIX:+$TOKPROF_TEST_PRELOAD_PREFIX:}$shim # tests/preload.py
env -u LD_LIBRARY_PATH LD_PRELOAD="$preload" TOKPROF_OUT="$work" "$prog" >"$work/out1" 2>"$work/err1"; rc1=$?
fail=0
[ "$rc0" = "$rc1" ] || { echo "FAIL: exit code $rc0 without the shim, $rc1 with it"; fail=1; }
cmp -s "$work/out0" "$work/out1" || { echo "FAIL: stdout differs"; diff "$work/out0" "$work/out1"; fail=1; }
# The program's own stderr is unchanged; the shim adds exactly one line of its own: GPU time
# (tier 2) is off, because the real libcupti.so.13 answers CUPTI_ERROR_UNKNOWN without a GPU.
grep -v '^tokprof\[[0-9]*\]: ' "$work/err1" >"$work/err1.prog"
cmp -s "$work/err0" "$work/err1.prog" || { echo "FAIL: stderr differs"; diff "$work/err0" "$work/err1.prog"; fail=1; }
n_ours=$(grep -c '^tokprof\[[0-9]*\]: ' "$work/err1")
if [ "$n_ours" != 0 ] && { [ "$n_ours" != 1 ] || ! grep -q 'GPU time off' "$work/err1"; }; then
    echo "FAIL: the shim printed $n_ours lines, want at most one GPU-time-off warning"; cat "$work/err1"; fail=1
fi
cap=$(ls "$work"/*.tokprof 2>/dev/null | head -1)
[ -n "$cap" ] || { echo "FAIL: no capture in $work"; exit 1; }
"$tokprof" dump "$cap" >"$work/dump.jsonl" || { echo "FAIL: tokprof dump exit $?"; fail=1; }
n_fill=$(grep '"type":"launch"' "$work/dump.jsonl" | grep -c '_Z11fill_kernelIfEvPT_S0_i')
n_scale=$(grep '"type":"launch"' "$work/dump.jsonl" | grep -c '_Z12scale_kernelPffi')
[ "$n_fill" = 4 ] && [ "$n_scale" = 4 ] || { echo "FAIL: launches by name: fill=$n_fill scale=$n_scale (want 4 and 4)"; fail=1; }
if [ "$n_ours" = 1 ]; then  # the capture says why GPU time is missing
    grep '"type":"gpu_info"' "$work/dump.jsonl" | tail -1 | grep -q '"status":"\(no_gpu\|no_cupti\|error\)"' ||
        { echo "FAIL: no gpu_info saying why GPU time is missing"; fail=1; }
fi
echo "exit codes $rc0/$rc1, launches fill=$n_fill scale=$n_scale"
exit $fail
