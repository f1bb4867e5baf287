#!/usr/bin/env bash
# Installs what is missing on Debian 12 and checks the CUDA 13 toolkit, in tiers, so that nothing
# is downloaded that the command being run does not use:
#   scripts/setup.sh            the build and the demo: compiler, CMake, zstd, msgpack-c, libunwind
#   scripts/setup.sh --tests    all of the above, and what every test tier needs (below)
# Idempotent: installs only what is missing, says what each download is for and its size before it
# starts, and says precisely what it cannot fix. TOKPROF_SKIP_TORCH=1 / TOKPROF_SKIP_VLLM=1 leave the
# large Python environments out (their tests then skip with one line).
set -euo pipefail
tests=0
case "${1:-}" in
    --tests) tests=1 ;;
    "") ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown option '$1' (scripts/setup.sh [--tests])" >&2; exit 2 ;;
esac

# The build and the demo (a few MB of Debian packages on a machine with a compiler).
PKGS=(build-essential cmake pkg-config python3 libzstd-dev zstd libmsgpack-dev libunwind-dev
      binutils zlib1g-dev)
# The test tiers: criterion (unit tests); chromium (headless render of tokprof report,
# tests/e2e/analysis); clang and libclang-rt (libFuzzer for tests/fuzz/run_fuzz.sh); python3-venv
# and dpkg-dev (the release build and the Python API tests: scripts/pyenv.sh, scripts/deps-src.sh,
# and the venvs below); clickhouse-server/-client (18.16: the fleet tests start their own servers);
# libcap2-bin (setcap, tests/system/security); libncurses-dev (tokprof top's screen); tmux, curl
# (the live tests).
TEST_PKGS=(libcriterion-dev chromium clang libclang-rt-14-dev python3-venv dpkg-dev
           clickhouse-server clickhouse-client libcap2-bin libncurses-dev tmux curl)
[ $tests = 1 ] && PKGS+=("${TEST_PKGS[@]}")

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    size=$(apt-get install -s --no-install-recommends "${missing[@]}" 2>/dev/null | grep -c '^Inst ' || true)
    echo "setup: installing ${missing[*]} ($size Debian packages with their dependencies)" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
problems=()
[ -x "$CUDA_HOME/bin/nvcc" ] || problems+=("nvcc not found at $CUDA_HOME/bin/nvcc: install the CUDA 13 toolkit (cuda-toolkit-13-0) or set CUDA_HOME")
for h in cuda.h cuda_runtime_api.h cupti.h cublas_v2.h cublasLt.h cudnn.h; do
    [ -f "$CUDA_HOME/include/$h" ] || problems+=("$CUDA_HOME/include/$h missing: install the toolkit package that provides it (cupti: cuda-cupti-dev-13-0, cudnn: cudnn9-cuda-13)")
done
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    [ -e "$CUDA_HOME/lib64/$l" ] || problems+=("$CUDA_HOME/lib64/$l missing: install libcublas-dev-13-0 / cuda-cudart-dev-13-0")
done
if [ ${#problems[@]} -gt 0 ]; then
    printf 'setup: %s\n' "${problems[@]}" >&2
    exit 1
fi
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
    v=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
    [ "${v:-0}" -ge 13 ] || { echo "setup: nvcc $v found, tokprof needs CUDA 13" >&2; exit 1; }
fi
[ $tests = 1 ] || exit 0

# The Python environments below are made concurrently (their downloads and unpacking overlap;
# on a fresh machine the two large venvs alone took 445 s and 894 s one after the other).
make_chdb() {
    # chdb (a current ClickHouse engine, from PyPI, ~150 MB) for tests/system/fleet's system_fleet_chdb
    local venv=${TOKPROF_CHDB_VENV:-/opt/tokprof-chdb-venv}
    "$venv/bin/python3" -c 'import chdb' 2>/dev/null && return 0
    echo "setup: installing chdb 4.4.0 (~150 MB, for system_fleet_chdb) into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'chdb==4.4.0'
}

# A cached venv of real clients, made once: pinned requirements, outside the checkout so every
# worktree and build shares it, never modified after creation (the tests point its NVIDIA runtime
# libraries at simgpu's fakes through a symlinked overlay of their own). The marker file is written
# last, so a half-made venv (an interrupted pip) is made again. Prints its time and size.
make_venv() { # VENV REQUIREMENTS WHAT
    local venv=$1 reqs=$2 what=$3 start=$SECONDS
    [ "$(cat "$venv/.tokprof-complete" 2>/dev/null)" = "$reqs" ] && return 0
    echo "setup: creating $venv ($reqs: $what)" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086  # the requirements are words
    "$venv/bin/pip" install --quiet --disable-pip-version-check $reqs
    echo "$reqs" > "$venv/.tokprof-complete"
    echo "setup: $venv made in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1)" >&2
}

jobs_=()
make_chdb & jobs_+=("$!:chdb")
# zig, scikit-build-core, auditwheel, pyarrow (PyPI, ~250 MB) for tests/system/release and
# tests/e2e/python
{ "$(dirname "$0")/pyenv.sh" >/dev/null; } & jobs_+=("$!:pyenv")
# tests/realstack and simgpu_exports: unmodified PyTorch (CUDA 13 wheels), transformers and Triton.
if [ -z "${TOKPROF_SKIP_TORCH:-}" ]; then
    make_venv "${TOKPROF_TORCH_VENV:-$HOME/.cache/tokprof/venv-torch-2.15.0}" "torch==2.15.0 transformers==5.24.0" \
        "~5.6 GB, for tests/realstack" & jobs_+=("$!:torch venv")
fi
# tests/realstack's realstack_vllm_* tests (tests/realstack/README.md, "vLLM"): vllm==0.33.0 pins
# torch==2.14.0 (CUDA 13 wheels), hence a venv of its own.
if [ -z "${TOKPROF_SKIP_TORCH:-}${TOKPROF_SKIP_VLLM:-}" ]; then
    make_venv "${TOKPROF_VLLM_VENV:-$HOME/.cache/tokprof/venv-vllm-0.33.0}" "vllm==0.33.0" \
        "~9.4 GB, for tests/realstack's vLLM tests" & jobs_+=("$!:vLLM venv")
fi
failed=0
for j in "${jobs_[@]}"; do
    wait "${j%%:*}" || { echo "setup: making the ${j#*:} failed" >&2; failed=1; }
done
exit $failed
