#!/usr/bin/env bash
# Installs what the build and the tests need on Debian 12 and checks the CUDA 13 toolkit.
# Idempotent: installs only what is missing; says precisely what it cannot fix.
set -euo pipefail

PKGS=(build-essential cmake pkg-config python3 libzstd-dev zstd libmsgpack-dev libunwind-dev
      libcriterion-dev binutils chromium clang libclang-rt-14-dev python3-venv dpkg-dev zlib1g-dev
      clickhouse-server clickhouse-client libcap2-bin libncurses-dev tmux curl)
# chromium: headless render of tokprof report (tests/e2e/analysis); clang and libclang-rt: libFuzzer
# for tests/fuzz/run_fuzz.sh (its CTest run is skipped without them); python3-venv and dpkg-dev
# (dpkg-source): the release build and the Python API tests (scripts/pyenv.sh, scripts/deps-src.sh)
# and the chdb and torch venvs below; zlib1g-dev: gzip tables (libz.a, linked statically);
# clickhouse-server/-client (18.16): the fleet tests start their own two servers (the package's
# service is not used); libcap2-bin: setcap, for the
# secure-execution test (tests/system/security, security_secure)
# libncurses-dev: tokprof top's screen; tmux, curl: the live tests (a real terminal, scrapes of
# tokprof serve; prometheus_client's parser from PyPI in a venv)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# chdb (a current ClickHouse engine, from PyPI) for tests/system/fleet's fleet_chdb, in its own venv
CHDB_VENV=${TOKPROF_CHDB_VENV:-/opt/tokprof-chdb-venv}
if ! "$CHDB_VENV/bin/python3" -c 'import chdb' 2>/dev/null; then
    echo "setup: installing chdb into $CHDB_VENV" >&2
    python3 -m venv "$CHDB_VENV"
    "$CHDB_VENV/bin/pip" install -q 'chdb==4.4.0'
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
# zig, scikit-build-core, auditwheel, pyarrow (PyPI) for tests/system/release and tests/e2e/python
"$(dirname "$0")/pyenv.sh" >/dev/null

# A cached venv of real clients, made once: pinned requirements, outside the checkout so every
# worktree and build shares it, never modified after creation (the tests point its NVIDIA runtime
# libraries at simgpu's fakes through a symlinked overlay of their own). The marker file is written
# last, so a half-made venv (an interrupted pip) is made again. Prints its time and size.
make_venv() { # VENV REQUIREMENTS
    local venv=$1 reqs=$2 start=$SECONDS
    [ "$(cat "$venv/.tokprof-complete" 2>/dev/null)" = "$reqs" ] && return 0
    echo "setup: creating $venv ($reqs)" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086  # the requirements are words
    "$venv/bin/pip" install --quiet --disable-pip-version-check $reqs
    echo "$reqs" > "$venv/.tokprof-complete"
    echo "setup: $venv made in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1)" >&2
}

# tests/realstack and simgpu_exports: unmodified PyTorch (CUDA 13 wheels), transformers and Triton.
# About 5.6 GB; the tests skip with one line where it is absent. TOKPROF_SKIP_TORCH=1 skips it.
[ -n "${TOKPROF_SKIP_TORCH:-}" ] ||
    make_venv "${TOKPROF_TORCH_VENV:-$HOME/.cache/tokprof/venv-torch-2.15.0}" "torch==2.15.0 transformers==5.24.0"

# tests/realstack's realstack_vllm_* tests (tests/realstack/README.md, "vLLM"): vllm==0.33.0 pins
# torch==2.14.0 (CUDA 13 wheels), hence a venv of its own. 9.4 GB, made in 832 s here (download
# included, on a loaded 2-core machine). TOKPROF_SKIP_VLLM=1 (or TOKPROF_SKIP_TORCH=1) skips it; its tests then skip with one line.
[ -n "${TOKPROF_SKIP_TORCH:-}${TOKPROF_SKIP_VLLM:-}" ] ||
    make_venv "${TOKPROF_VLLM_VENV:-$HOME/.cache/tokprof/venv-vllm-0.33.0}" "vllm==0.33.0"
exit 0
