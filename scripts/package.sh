#!/usr/bin/env bash
# Builds the plain release tarball for hosts without Python: bin/tokprof, lib/libtokprof.so,
# lib/libtokprof_decoder.so, include/tokprof/, share/doc/tokprof/ — the wheel's binaries, with
# the same glibc 2.28 floor (cmake/zig-glibc228.cmake; docs/RELEASE.md).
# Usage: scripts/package.sh [OUT_DIR]   (default dist/); prints the tarball's path.
# BUILD_DIR (default build-rel) is the build; zig comes from scripts/pyenv.sh's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
build=${BUILD_DIR:-build-rel}
pyenv=$(scripts/pyenv.sh)
scripts/deps-src.sh .deps
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/zig-glibc228.cmake \
    -DPython_EXECUTABLE="$pyenv/bin/python" -DTOKPROF_DEPS_SRC="$PWD/.deps" \
    -DTOKPROF_RELEASE_ONLY=ON -DTOKPROF_BUILD_KERNELS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
version=$(sed -n 's/^#define TOKPROF_VERSION_STRING "\(.*\)"/\1/p' include/tokprof/tokprof.h)
name=tokprof-$version-linux-x86_64
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage/$name" --strip >/dev/null
mkdir -p "$out"
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
