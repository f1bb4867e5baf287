#!/usr/bin/env bash
# Builds unmodified llama.cpp (ggml-cuda) once, into a cache outside the checkout, for the
# tests/realstack llama.cpp workloads: llama-server, llama-bench and llama-simple, dynamically linked
# against libcudart.so.13 / libcublas.so.13 (never GGML_STATIC: a static runtime is invisible to any
# preload), one architecture (sm_90).
#   scripts/llamacpp.sh            build if the cache lacks it; prints the cache's path last
#   scripts/llamacpp.sh --path     print the cache's path (exit 1 if it is not complete)
# The cache holds src/ (the tree), build/bin/ (the binaries and libggml*.so), venv-gguf/ (the tree's
# own gguf-py and its PyPI dependencies: numpy, pyyaml, tqdm, requests) and tiny-llama-q8_0.gguf,
# the workloads' model (tests/realstack/llamacpp_model.py: written here, no download).
# The source is the llama.cpp tree that the pinned llama-cpp-python sdist on PyPI vendors, fetched
# as its users fetch it (pip download). The build takes 20-40 minutes on two cores (~140 CUDA
# translation units); the marker file .tokprof-complete is written last, so an interrupted build is
# resumed (ninja) and never taken for a finished one. TOKPROF_LLAMACPP_CACHE overrides the cache.
#
# Options: GGML_CUDA_FA=OFF compiles the FlashAttention template instances as empty stubs (about
# half of the build's time); llama.cpp then attends with mul_mat + soft_max, as it does on any GPU
# without FlashAttention. CUDA graphs, mmvq/mmq, cuBLAS and the VMM pool keep their defaults.
set -euo pipefail
VERSION=0.3.36
CACHE=${TOKPROF_LLAMACPP_CACHE:-$HOME/.cache/tokprof/llamacpp-$VERSION}
MARK="$CACHE/.tokprof-complete"
STAMP="llama-cpp-python==$VERSION sm_90 FA=OFF"
if [ "${1:-}" = "--path" ]; then
    [ "$(cat "$MARK" 2>/dev/null)" = "$STAMP" ] || exit 1
    echo "$CACHE"; exit 0
fi
if [ "$(cat "$MARK" 2>/dev/null)" = "$STAMP" ]; then echo "$CACHE"; exit 0; fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
start=$SECONDS
mkdir -p "$CACHE"
# One build at a time (two ninjas in one build folder corrupt it); a second caller waits for the
# first and then finds the marker.
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
    echo "llamacpp: another build holds $CACHE/.lock; waiting for it" >&2
    flock 9
fi
if [ "$(cat "$MARK" 2>/dev/null)" = "$STAMP" ]; then echo "$CACHE"; exit 0; fi
src="$CACHE/src"
if [ ! -f "$src/CMakeLists.txt" ]; then
    echo "llamacpp: fetching the llama-cpp-python $VERSION sdist (~75 MB) from PyPI" >&2
    dl=$(mktemp -d)
    pip download -q --no-deps --no-binary :all: --no-build-isolation \
        "llama-cpp-python==$VERSION" -d "$dl" >&2 \
        || pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$dl" >&2
    rm -rf "$src.tmp"; mkdir -p "$src.tmp"
    tar xzf "$dl/llama_cpp_python-$VERSION.tar.gz" -C "$src.tmp" \
        --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
    rm -rf "$dl" "$src"; mv "$src.tmp" "$src"
fi

# The model first: it needs no build (a few seconds; ~60 MB of venv)
if [ ! -f "$CACHE/tiny-llama-q8_0.gguf" ]; then
    [ -x "$CACHE/venv-gguf/bin/python" ] || python3 -m venv "$CACHE/venv-gguf"
    "$CACHE/venv-gguf/bin/pip" install -q "$src/gguf-py" >&2
    "$CACHE/venv-gguf/bin/python" "$(dirname "$0")/../tests/realstack/llamacpp_model.py" \
        "$CACHE/tiny-llama-q8_0.gguf.tmp"
    mv "$CACHE/tiny-llama-q8_0.gguf.tmp" "$CACHE/tiny-llama-q8_0.gguf"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# The executables link against libggml-cuda.so, which needs libcuda.so.1: a machine without a GPU
# driver has only the toolkit's stubs/libcuda.so (no .so.1 to resolve against), so their link
# leaves the driver's symbols to run time (--allow-shlib-undefined), where simgpu's or the real
# libcuda.so.1 provides them. A build folder configured before that flag gets it alone (any other
# change to its configuration, a compiler launcher included, would rebuild every object).
LDFLAGS_EXE="-Wl,--allow-shlib-undefined"
if [ ! -f "$CACHE/build/build.ninja" ]; then
    cmake -S "$src" -B "$CACHE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS_EXE" \
        -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF \
        -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_APP=OFF "${launcher[@]}" >&2
elif ! grep -q "^CMAKE_EXE_LINKER_FLAGS:STRING=$LDFLAGS_EXE\$" "$CACHE/build/CMakeCache.txt"; then
    # ggml puts ccache in front of its compilers when it finds one (GGML_CCACHE): a folder built
    # before ccache was installed keeps building without it
    cc=ON; grep -q ccache "$CACHE/build/build.ninja" || cc=OFF
    cmake -S "$src" -B "$CACHE/build" -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS_EXE" -DGGML_CCACHE=$cc >&2
fi
nice -n 15 cmake --build "$CACHE/build" -j "${TOKPROF_LLAMACPP_JOBS:-2}" \
    --target llama-server llama-bench llama-simple >&2

for l in libcudart.so.13 libcublas.so.13; do
    readelf -d "$CACHE/build/bin/libggml-cuda.so" | grep -q "NEEDED.*\[$l\]" \
        || { echo "llamacpp: libggml-cuda.so does not need $l (static runtime?)" >&2; exit 1; }
done
echo "$STAMP" > "$MARK"
echo "llamacpp: built in $((SECONDS - start)) s; $(du -sh "$CACHE" | cut -f1) in $CACHE" >&2
echo "$CACHE"
