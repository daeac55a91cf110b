#!/usr/bin/env bash
# The unmodified nccl-tests on one GPU, ranks as MPI processes sharing it under MPS (issue 13's
# measurement): braid under LD_PRELOAD with each protocol forced (NCCL_PROTO) and with the
# tuner's choice, 2/4/8 processes; then 1 rank, braid beside the real NCCL in the same run.
# For the GPU machine (it has mpicc and the real NCCL); builds nccl-tests there first.
#   perf/nccl_tests_mps.sh BRAID_DIR NCCL_TESTS_TOOLS OUT_DIR
# BRAID_DIR holds libbraid.so (a build, or tests/gpu/pack.sh's copy); NCCL_TESTS_TOOLS is a
# folder with tools/nccl-tests.sh and third_party/nccl-tests (../shared's layout); logs go to
# OUT_DIR/<coll>-np<N>-<proto>.log, and OUT_DIR/summary.txt gets one line per run.
# Environment: DEADLINE (seconds from start; runs that would pass it are skipped, default 500),
# COLLS, NPS, PROTOS (space-separated; defaults: every collective, 2 4 8, tuner LL LL128 Simple),
# GRAPH_NPS (all-reduce also under nccl-tests' -G 20, CUDA graphs: GPU time without the host's;
# default "2 4"; empty: none), ALGO_RUNS (all-reduce 8 B-1 MB with PROTO/ALGO forced; default LL/direct
# LL/twoshot Simple/direct), ARGS (nccl-tests size flags; default -b 8 -e 64M -f 2), EXTRA_ENV
# (VAR=VALUE ... given to every rank, e.g. NCCL_MIN_CTAS=8), NCCL_EXTRA_ENV (the same for the real
# NCCL's runs instead, e.g. empty where EXTRA_ENV turns on logging), SUFFIX (added to the run labels),
# NT_BIN (where nccl-tests' binaries are kept between runs; default: built in OUT_DIR, removed),
# MPS=on|off (default on: started here unless it runs; off: issue 16's served ranks, MPS must not
# be running, and GRAPH_NPS defaults to none since capture is refused there), NCCL_HEADERS (a
# folder holding nccl.h, nccl_device.h and nccl_device/, for a GPU machine whose CUDA toolkit has
# none: the build then uses a CUDA_HOME overlay with them; carry the build machine's), MPIRUN_ARGS
# (more mpirun flags, e.g. --bind-to none).
set -u
braid="$(cd "$1" && pwd)"; tools="$(cd "$2" && pwd)"; out="$3"
mkdir -p "$out"
start=$SECONDS; deadline=${DEADLINE:-500}
summary="$out/summary.txt"; : > "$summary"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# nccl-tests' -D 3/4 ("device implementation") kernels use NVLink multicast (multimem): never on
# these shared machines. braid lacks the device API they need anyway; refuse the flag outright.
case " ${ARGS:-} " in *" -D"*|*"--device_implementation"*)
  echo "nccl_tests_mps.sh: ARGS may not set -D/--device_implementation (NVLink multicast kernels)" >&2; exit 2 ;;
esac
lib="$braid/libbraid.so"
[ -f "$lib" ] || { echo "nccl_tests_mps.sh: no $lib" >&2; exit 2; }

nt="${NT_BIN:-$out/.bin}"  # NT_BIN: a folder of nccl-tests binaries to reuse (built there if absent)
if [ ! -x "$nt/all_reduce_perf" ]; then
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  if [ ! -f "$cuda_home/include/nccl.h" ] && [ -n "${NCCL_HEADERS:-}" ]; then  # the toolkit has no NCCL headers
    overlay="$out/.cuda_home"; mkdir -p "$overlay/include"
    for x in "$cuda_home"/*; do [ "$(basename "$x")" = include ] || ln -sfn "$x" "$overlay/"; done
    ln -sf "$cuda_home"/include/* "$overlay/include/"
    cp -r "$NCCL_HEADERS"/nccl* "$overlay/include/"
    export CUDA_HOME="$overlay"
  fi
  if ! bash "$tools/tools/nccl-tests.sh" "$nt" mpi > "$out/build.log" 2>&1; then
    echo "nccl-tests build failed:"; tail -20 "$out/build.log"; exit 1
  fi
  echo "nccl-tests built in $((SECONDS - start)) s"
fi

# MPS for the processes sharing GPU 0 (started here unless it runs already; stopped at the end).
mps_started=0
if [ "${MPS:-on}" = off ]; then
  if pgrep -f nvidia-cuda-mps-control >/dev/null 2>&1; then
    echo "nccl_tests_mps.sh: MPS=off, but MPS runs here; stop it first (echo quit | nvidia-cuda-mps-control)" >&2; exit 2
  fi
  GRAPH_NPS=${GRAPH_NPS-}
elif ! pgrep -f nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && mps_started=1 && sleep 1
fi
trap '[ $mps_started = 1 ] && echo quit | nvidia-cuda-mps-control' EXIT
echo "MPS: $(pgrep -f nvidia-cuda-mps-control >/dev/null && echo running || echo NOT running)"

# One run: LABEL NP PRELOAD(0/1) PROTO BINARY EXTRA-ARGS...
run() {
  local label="$1${SUFFIX:-}" np="$2" preload="$3" proto="$4" bin="$5"; shift 5
  local left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 25 ]; then echo "$label skipped (deadline)" | tee -a "$summary"; return; fi
  local envs=(-x NCCL_TESTS_DEVICE=0 -x NCCL_NVLS_ENABLE=0) kv
  local extra="${EXTRA_ENV:-}"
  [ "$preload" = 1 ] || extra="${NCCL_EXTRA_ENV-$extra}"
  for kv in $extra; do envs+=(-x "$kv"); done
  [ "$preload" = 1 ] && envs+=(-x LD_PRELOAD="$lib")
  case "$proto" in
    tuner|nccl) ;;
    */*) envs+=(-x NCCL_PROTO="${proto%/*}" -x NCCL_ALGO="${proto#*/}") ;;  # PROTO/ALGO, e.g. LL/direct
    *) envs+=(-x NCCL_PROTO="$proto") ;;
  esac
  local t0=$SECONDS rc
  # shellcheck disable=SC2086  # ARGS is a list of flags
  timeout $((left < 90 ? left : 90)) mpirun --oversubscribe ${MPIRUN_ARGS:-} -np "$np" "${envs[@]}" "$nt/$bin" -g 1 ${ARGS:--b 8 -e 64M -f 2} "$@" \
    > "$out/$label.log" 2>&1
  rc=$?
  echo "$label rc=$rc $((SECONDS - t0))s $(grep -E 'Out of bounds values|Avg bus bandwidth' "$out/$label.log" | tr -s ' ' | paste -sd ';' -)" |
    tee -a "$summary"
}

for coll in ${COLLS:-all_reduce all_gather reduce_scatter broadcast sendrecv}; do
  for np in ${NPS:-2 4 8}; do
    for proto in ${PROTOS:-tuner LL LL128 Simple}; do run "$coll-np$np-$proto" "$np" 1 "$proto" "${coll}_perf"; done
  done
  # 1 rank: braid and the real NCCL (no LD_PRELOAD), one after the other.
  run "$coll-np1-braid" 1 1 tuner "${coll}_perf"
  run "$coll-np1-nccl" 1 0 nccl "${coll}_perf"
  [ "$coll" = all_reduce ] || continue
  for np in ${NPS:-2 4 8}; do  # one-hop and two-hop algorithms below 1 MB, forced
    for pa in ${ALGO_RUNS-LL/direct LL/twoshot Simple/direct}; do
      run "all_reduce-np$np-${pa/\//-}" "$np" 1 "$pa" all_reduce_perf -b 8 -e 1M
    done
  done
  for np in ${GRAPH_NPS-2 4}; do
    for proto in ${PROTOS:-tuner LL LL128 Simple}; do run "all_reduce-np$np-$proto-graph" "$np" 1 "$proto" all_reduce_perf -G 20; done
  done
done
[ -z "${NT_BIN:-}" ] && rm -rf "$nt"
echo "done in $((SECONDS - start)) s"
