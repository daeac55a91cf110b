#!/usr/bin/env bash
# Copies what tests/gpu/run.sh needs from a CUDA build into a small folder of stripped
# binaries (the same layout), to carry to a GPU machine that builds nothing.
#   tests/gpu/pack.sh BUILD_DIR DEST_DIR      then on the GPU machine: tests/gpu/run.sh DEST_DIR
set -eu
build="$1"; dest="$2"
rm -rf "$dest"; mkdir -p "$dest"
for f in libbraid.so tests/launcher/braid-launch tests/mp/mp_rank tests/mp/faults_rank perf/braid-perf tools/braid-topo/braid-topo tools/braid-doctor/braid-doctor \
         tests/gpu/gpu_executor_test tests/gpu/gpu_graph_abort_test tests/gpu/gpu_bench_executor \
         tests/gpu/gpu_api_graph_abort tests/gpu/gpu_api_bad_input tests/gpu/gpu_api_async_error tests/gpu/gpu_api_self_sendrecv \
         tests/gpu/gpu_nccl_compare tests/gpu/gpu_call_cost tests/gpu/gpu_timeslice_probe tests/gpu/gpu_hop_probe tests/gpu/gpu_step_probe tests/gpu/gpu_fallback_auto tests/gpu/gpu_api_simulate; do
  [ -e "$build/$f" ] || { echo "pack.sh: $build/$f missing (skipped)"; continue; }
  mkdir -p "$dest/$(dirname "$f")"
  strip -o "$dest/$f" "$build/$f"
done
ln -sf libbraid.so "$dest/libnccl.so.2"
du -sh "$dest"
