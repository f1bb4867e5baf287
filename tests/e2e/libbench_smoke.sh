#!/usr/bin/env bash
# libbench runs under the shim on simgpu (zero-cost mode) and its capture holds exactly the
# 2*N library calls it made (one per GEMM, although GemmEx calls cublasLtMatmul inside).
set -euo pipefail
bench=$1 sim=$2 shim=$3
tkp=$(dirname "$shim")/../decoder/tokprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
preload=${TOKPROF_TEST_PRELOAD_PREFIX:+$TOKPROF_TEST_PRELOAD_PREFIX:}$shim # tests/preload.py
SIMGPU_ZERO=1 LD_LIBRARY_PATH=$sim LD_PRELOAD=$preload TOKPROF_OUT=$work "$bench" 1000
n=$("$tkp" dump --type lib_call "$work"/libbench.*.tokprof | wc -l)
[ "$n" = 2000 ] || { echo "FAIL: $n lib_call records, expected 2000"; exit 1; }
echo "ok: $n lib_call records"
