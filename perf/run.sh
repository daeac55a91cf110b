#!/usr/bin/env bash
# braid's main job in one command: build (if needed), then braid-perf with its defaults:
# all-reduce from 8 B to 64 MB across 4 ranks, on GPUs when there are any (as threads of one
# process when there are fewer GPUs than ranks, else a process per rank), otherwise on host
# memory (processes), with every result checked. Extra arguments go to braid-perf (--ranks,
# --plot FILE.png, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [ ! -x "$build/perf/braid-perf" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target braid-perf
fi
export NCCL_NVLS_ENABLE=0
exec "$build/perf/braid-perf" "$@"
