#!/usr/bin/env bash
# Sets up, builds, and runs every test with ctest. Non-zero on any failure.
# In CI (CI=true) warnings are errors and the whole suite runs again under ASan+UBSan, but for
# the tests labelled no_sanitize (each one's CMakeLists.txt says why), and the tests labelled tsan
# run once more in a ThreadSanitizer build (TOKPROF_TEST_TSAN=1 outside CI). Tests labelled `extra`
# (variants of a workload CI already runs, e.g. two of the six vLLM runs) are left out unless
# TOKPROF_TEST_EXTRA=1: they would put CI over its time budget (tests/realstack/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
scripts/build.sh
if [ -n "${TOKPROF_TEST_EXTRA:-}" ]; then
    (cd build && ctest --output-on-failure -j "$(nproc)")
else
    (cd build && ctest --output-on-failure -j "$(nproc)" -LE extra)
fi
if [ -n "${CI:-}" ] || [ -n "${TOKPROF_TEST_TSAN:-}" ]; then
    # ThreadSanitizer, for the tests labelled tsan only (threads racing in the shim): it builds
    # just what they run, the shim, the CLI, simgpu's runtime, driver and CUPTI and their programs.
    cmake -S . -B build-tsan -DTOKPROF_TSAN=ON ${CI:+-DTOKPROF_WERROR=ON} >/dev/null
    cmake --build build-tsan -j "$(nproc)" --target tokprof_shim tokprof simgpu_cuda simgpu_cudart \
        simgpu_cupti shim_first_launch shim_unit_ring_publish
    (cd build-tsan && ctest --output-on-failure -j "$(nproc)" -L tsan)
fi
if [ -n "${CI:-}" ] || [ -n "${TOKPROF_TEST_SANITIZE:-}" ]; then
    BUILD_DIR=build-asan scripts/build.sh -DTOKPROF_SANITIZE=ON
    (cd build-asan && ctest --output-on-failure -j "$(nproc)" -LE no_sanitize)
fi
