#!/usr/bin/env bash
# Copies what tests/gpu/run.sh needs from a CUDA build into a small folder of stripped
# binaries (the same layout), to carry to a GPU machine that builds nothing (a carry holds at
# most 64 MiB: see the sizes it prints).
#   tests/gpu/pack.sh BUILD_DIR DEST_DIR [--lean] [--ucx-cuda] [--nccl-tests NCCL_TESTS_BUILD]
#     then on the GPU machine: tests/gpu/run.sh DEST_DIR
#   --lean        leaves out the executor-only tests (gpu_executor_test, gpu_graph_abort_test,
#                 gpu_bench_executor: ~30 MB), which run.sh's executor-*, exec-graph and bench
#                 sections need, to make room for the rest.
#   --ucx-cuda    adds a UCX built with CUDA (PyPI's libucx-cu13 wheel, pip download) under
#                 DEST/ucx: run.sh's mp-net-device then runs its GPUDirect half (it finds
#                 DEST/ucx/libucx/lib/libucp.so.0 by itself; CUDA_UCX_LIB overrides it).
#   --nccl-tests  copies nccl-tests' *_perf from NCCL_TESTS_BUILD (../shared/tools/nccl-tests.sh
#                 DEST [mpi] built them) into DEST/nt.
set -eu
[ $# -ge 2 ] || { sed -n '2,15p' "$0"; exit 2; }
build="$1"; dest="$2"; shift 2
lean=0 ucx_cuda=0 nt_build=""
while [ $# -gt 0 ]; do
  case $1 in
    --lean) lean=1; shift ;;
    --ucx-cuda) ucx_cuda=1; shift ;;
    --nccl-tests) nt_build=$2; shift 2 ;;
    *) echo "pack.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# A build configured without UCX's headers has no network transport: mp-net-device would only
# say SKIP on the GPU machine, after the device time to get there was spent.
if grep -q '^BRAID_UCX_INCLUDE_DIR:PATH=.*NOTFOUND' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "pack.sh: WARNING: $build was configured without UCX's headers (apt install libucx-dev, then configure" \
       "again with -UBRAID_UCX_INCLUDE_DIR): across-host tests will be skipped" >&2
fi
rm -rf "$dest"; mkdir -p "$dest"
executor_only="tests/gpu/gpu_executor_test tests/gpu/gpu_graph_abort_test tests/gpu/gpu_bench_executor"
[ "$lean" = 1 ] && executor_only=""
for f in libbraid.so tests/launcher/braid-launch tests/mp/mp_rank tests/mp/faults_rank perf/braid-perf tools/braid-topo/braid-topo tools/braid-doctor/braid-doctor \
         $executor_only \
         tests/gpu/gpu_api_graph_abort tests/gpu/gpu_api_bad_input tests/gpu/gpu_api_async_error tests/gpu/gpu_api_self_sendrecv \
         tests/gpu/gpu_nccl_compare tests/gpu/gpu_call_cost tests/gpu/gpu_timeslice_probe tests/gpu/gpu_floor_probe tests/gpu/gpu_hop_probe tests/gpu/gpu_step_probe tests/gpu/gpu_fallback_auto tests/gpu/gpu_api_simulate; do
  [ -e "$build/$f" ] || { echo "pack.sh: $build/$f missing (skipped)"; continue; }
  mkdir -p "$dest/$(dirname "$f")"
  strip -o "$dest/$f" "$build/$f"
done
ln -sf libbraid.so "$dest/libnccl.so.2"

if [ "$ucx_cuda" = 1 ]; then
  # The wheel's shared libraries only (no static ones, no perftest plugin), stripped: ~5 MB.
  # libucm_cuda finds the wheel's own CUDA runtime through its RPATH ($ORIGIN/../../../libucx_cu13.libs).
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp" libucx-cu13
  python3 -m zipfile -e "$tmp"/libucx_cu13-*.whl "$tmp/x"
  u="$dest/ucx"
  mkdir -p "$u/libucx/lib/ucx" "$u/libucx/bin" "$u/libucx_cu13.libs"
  for l in libucp libuct libucs libucm libucs_signal; do strip --strip-unneeded -o "$u/libucx/lib/$l.so.0" "$tmp/x/libucx/lib/$l.so.0"; done
  for l in libuct_cuda libucm_cuda libuct_cma; do
    strip --strip-unneeded -o "$u/libucx/lib/ucx/$l.so.0" "$tmp/x/libucx/lib/ucx/$l.so.0"
  done
  strip --strip-unneeded -o "$u/libucx/bin/ucx_info" "$tmp/x/libucx/bin/ucx_info"
  for l in "$tmp"/x/libucx_cu13.libs/*; do strip --strip-unneeded -o "$u/libucx_cu13.libs/$(basename "$l")" "$l"; done
  echo "pack.sh: UCX with CUDA: $(cd "$tmp" && ls libucx_cu13-*.whl)"
fi

if [ -n "$nt_build" ]; then
  mkdir -p "$dest/nt"
  for t in all_reduce all_gather reduce_scatter broadcast sendrecv; do
    [ -e "$nt_build/${t}_perf" ] || { echo "pack.sh: $nt_build/${t}_perf missing (skipped)"; continue; }
    strip -o "$dest/nt/${t}_perf" "$nt_build/${t}_perf"
  done
fi
du -sh "$dest"/* | sort -h | tail -5
du -sh "$dest"
