#!/usr/bin/env bash
# Writes the captures of tests/data/arch from a build (BUILD, default build/): minillm runs on
# the simulated GPU under the shim, and mkcapture's golden and torn. They were made once, with
# the build of commit 45becb7, and are checked in so that the expected outputs next to them stay
# the outputs of that binary; rerun this only to add a capture, never to refresh one.
set -euo pipefail
cd "$(dirname "$0")"
B=$(cd "${BUILD:-../../../build}" && pwd)
run() { # NAME ENV... -- MINILLM ARGS...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local d; d=$(mktemp -d)
  env LD_LIBRARY_PATH="$B/tests/simgpu" LD_PRELOAD="$B/shim/libtokprof.so" TOKPROF_OUT="$d" \
    "${envs[@]}" "$B/kernels/minillm" "$@" >/dev/null
  mv "$d"/*.tokprof "$name.tokprof"
  rm -rf "$d"
}
run vllm -- --steps 12 --style vllm
run slow SIMGPU_SLOW=paged_attention:40:8000 -- --steps 12 --style vllm
run moe -- --steps 6 --moe 8,2 --zipf 1.1 --batch 4
run moe_fused_graphs -- --steps 6 --moe-fused --graphs --sched async
run threads_driver -- --steps 4 --threads 4 --graphs --driver
run hf_exc -- --steps 6 --style hf --exc
# added later, each with the build named in README.md: vllm_v4 (main at 4467925), graphs_v5
[ -n "${V4:-}" ] && run vllm_v4 -- --steps 12 --style vllm
[ -n "${V5:-}" ] && run graphs_v5 -- --steps 12 --style vllm --graphs --sched async
"$B/tests/unit/mkcapture" golden golden.tokprof
"$B/tests/unit/mkcapture" torn torn.tokprof
ls -l *.tokprof
