#!/usr/bin/env bash
# The test command (README, .ci/run): configure, build everything, run every test; then the two
# sanitizer trees beside BUILD_DIR (build-asan: ASan+UBSan on the unit and multi-process tests,
# build-tsan: TSan on the CPU engine's tests; tests/sanitize/run.sh). BRAID_SANITIZERS=0 skips them.
# GPU tests report SKIPPED on machines without a GPU; tests/gpu/run.sh runs them on one.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BRAID_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900 "$@"
if [ "${BRAID_SANITIZERS:-1}" != 0 ]; then
  parent=$(dirname "$build")
  tests/sanitize/run.sh asan "$parent/build-asan"
  tests/sanitize/run.sh tsan "$parent/build-tsan"
fi
