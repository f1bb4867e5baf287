#!/usr/bin/env bash
# Sets up, builds, and runs every test with ctest. Non-zero on any failure.
# In CI (CI=true) warnings are errors and the whole suite runs again under ASan+UBSan, but for
# the tests labelled no_sanitize (each one's CMakeLists.txt says why).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
if [ -n "${CI:-}" ] || [ -n "${TOKPROF_TEST_SANITIZE:-}" ]; then
    BUILD_DIR=build-asan scripts/build.sh -DTOKPROF_SANITIZE=ON
    (cd build-asan && ctest --output-on-failure -j "$(nproc)" -LE no_sanitize)
fi
