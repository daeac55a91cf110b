#!/usr/bin/env bash
# The GPU test run (issue 4 item 4), for a machine with at least one GPU. Builds nothing:
# it runs what the build folder holds (default: build-gpu next to this repository).
#   tests/gpu/run.sh [BUILD_DIR]        BENCH=quick|full|off (default quick)
# Sections run in order; each one's status and time go into the summary table printed last.
# Logs go to $OUT (when set, as on the device machine) or to a temporary folder.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build-gpu}"
logs="${OUT:-$(mktemp -d)}/gpu-logs"
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0   # never NVLink multicast
# Ranks of one process share a GPU's hardware queues (8 by default): two ranks' streams on
# one queue could serialise their kernels while each waits for the other. More queues make
# such a collision less likely (not seen so far; the executor preloads its kernels against
# the lazy-loading deadlock, which was seen).
export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-32}"
bench="${BENCH:-quick}"

declare -a rows
section() {  # section NAME TIMEOUT_S COMMAND...
  local name="$1" limit="$2"; shift 2
  local log="$logs/$name.log" t0=$SECONDS status
  echo "=== $name: $*"
  timeout --signal=KILL "$limit" "$@" >"$log" 2>&1
  local rc=$?
  case $rc in
    0) status=PASS
       grep -qE '^\[  PASSED  \] 0 tests' "$log" && status=SKIP ;;
    77) status=SKIP ;;
    137) status="TIMEOUT(${limit}s)" ;;
    *) status="FAIL(rc=$rc)" ;;
  esac
  grep -E "^SUMMARY|^\[  (FAILED|SKIPPED) |FAILED TEST" "$log" | head -20
  [ "$status" = PASS ] || tail -40 "$log"
  local notes
  notes="$(grep -E '^SUMMARY' "$log" | sed 's/^SUMMARY //' | paste -sd ';' - | cut -c1-150)"
  rows+=("$(printf '%-14s %-16s %6ss  %s' "$name" "$status" "$((SECONDS - t0))" "$notes")")
}
skip() { rows+=("$(printf '%-14s %-16s %6s   %s' "$1" "NOT-YET" "-" "$2")"); }

echo "=== device"
nvidia-smi -L 2>&1 | head -8 || true

# 1. Correctness: every collective, type and op, in and out of place, 1/2/4/8 ranks.
section correctness "${LIMIT_CORRECTNESS:-420}" "$build/tests/gpu/gpu_executor_test"
# 2. CUDA graph capture + 100 replays, abort with a missing peer, grouped launches.
section graph-abort "${LIMIT_GRAPH:-120}" "$build/tests/gpu/gpu_graph_abort_test"
# 3. Comparison with the real NCCL (dlopen of libnccl.so.2): needs the communicator path.
skip nccl-compare "needs ncclAllReduce on device memory (api + executor glue)"
# 4. PyTorch drop-in smoke test with LD_PRELOAD=libbraid.so.
skip torch-dropin "needs the communicator path on device memory"
# 5. Micro-benchmark: 1-rank copy, 2/4/8-rank all-reduce on one GPU, against cudaMemcpy.
case "$bench" in
  quick) section bench "${LIMIT_BENCH:-200}" "$build/tests/gpu/gpu_bench_executor" --quick ;;
  full) section bench 400 "$build/tests/gpu/gpu_bench_executor" ;;
  *) skip bench "BENCH=$bench" ;;
esac
[ -f "$logs/bench.log" ] && { echo "=== bench table"; grep -vE "^SUMMARY" "$logs/bench.log"; }

echo
echo "=== summary"
printf '%-14s %-16s %7s  %s\n' section status time notes
for r in "${rows[@]}"; do echo "$r"; done
