#!/usr/bin/env bash
# The test command (README, .ci/run): configure, build everything, run every test.
# GPU tests report SKIPPED on machines without a GPU; tests/gpu/run.sh runs them on one.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BRAID_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900 "$@"
