#!/usr/bin/env bash
# Device-memory all-reduce across emulated hosts on one GPU (issue 15): braid over UCX
# (host-staged GPU FIFOs, the UCX proxy over TCP on lo) beside the real NCCL's socket transport,
# in the same run, with the unmodified nccl-tests (all_reduce_perf, 8 B-64 MB), ranks as MPI
# processes sharing GPU 0 under MPS. For the GPU machine (mpirun, the real NCCL, nccl-tests).
#   perf/ucx_device_vs_nccl.sh BRAID_DIR NCCL_TESTS_TOOLS OUT_DIR
# BRAID_DIR holds libbraid.so; NCCL_TESTS_TOOLS a folder with tools/nccl-tests.sh and
# third_party/nccl-tests (../shared's layout). Each rank gets its host from
# tests/net/emulated_host.sh (BRAID_HOSTID and NCCL_HOSTID = its host, r / PER).
# Runs (logs OUT_DIR/all_reduce-np<N>-<label>.log; OUT_DIR/summary.txt; the table at the end):
#   braid-2x2   braid, 2 hosts x 2 ranks (ranks of a host over CUDA IPC, hosts over UCX)
#   braid-4x1   braid, 4 hosts x 1 rank: every hop over UCX
#   nccl-4x1    the real NCCL, 4 hosts x 1 rank, NCCL_NET=Socket on lo, P2P and SHM off
#   nccl-2x2    the same with 2 ranks per host: NCCL refuses two ranks of one host on one GPU
#               ("Duplicate GPU"); kept to show it does (rc and the error in its log)
#   braid-2x1, nccl-2x1   2 hosts x 1 rank each
#   braid-*-gdr   with CUDA_UCX_LIB (a CUDA-built UCX's libucp.so.0): braid's FIFO slots in
#               device memory handed to UCX (GPUDirect, forced with BRAID_GPUDIRECT=1: without an
#               RDMA device braid stages by default; UCX_TLS=tcp,cuda_copy)
#   braid-2x1-ctasN   with CTAS_SWEEP="2 4 8 ...": braid 2 x 1 with NCCL_MAX_CTAS=N each, 4 MB-64 MB
#               (how many channels the network path wants: the tuner gives it up to the cap)
# NCCL_NVLS_ENABLE=0 always; nccl-tests' -D (NVLink multicast kernels) is never passed.
# Environment: DEADLINE (seconds, default 500), ARGS (nccl-tests size flags, default
# -b 8 -e 64M -f 2; -D refused), NT_BIN (nccl-tests binaries to reuse), CTAS_SWEEP (above), BRAID_MAX_CTAS (braid's
# blocks per rank, default 32: see run()), REAL_NCCL (the real
# libnccl.so.2's folder, put first on LD_LIBRARY_PATH for the nccl runs; default: whatever
# nccl-tests was linked against).
set -u
here="$(cd "$(dirname "$0")" && pwd)"; repo="$(cd "$here/.." && pwd)"
braid="$(cd "$1" && pwd)"; tools="$(cd "$2" && pwd)"; out="$3"
mkdir -p "$out"
start=$SECONDS; deadline=${DEADLINE:-500}
summary="$out/summary.txt"; : > "$summary"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case " ${ARGS:-} " in *" -D"*|*"--device_implementation"*)
  echo "ucx_device_vs_nccl.sh: ARGS may not set -D/--device_implementation (NVLink multicast kernels)" >&2; exit 2 ;;
esac
lib="$braid/libbraid.so"
[ -f "$lib" ] || { echo "ucx_device_vs_nccl.sh: no $lib" >&2; exit 2; }
hostwrap="$repo/tests/net/emulated_host.sh"

nt="${NT_BIN:-$out/.bin}"
if [ ! -x "$nt/all_reduce_perf" ]; then
  if ! bash "$tools/tools/nccl-tests.sh" "$nt" mpi > "$out/build.log" 2>&1; then
    echo "nccl-tests build failed:"; tail -20 "$out/build.log"; exit 1
  fi
fi

mps_started=0
if ! pgrep -f nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && mps_started=1 && sleep 1
fi
trap '[ $mps_started = 1 ] && echo quit | nvidia-cuda-mps-control' EXIT
echo "MPS: $(pgrep -f nvidia-cuda-mps-control >/dev/null && echo running || echo NOT running)" | tee -a "$summary"
command -v ucx_info >/dev/null 2>&1 && { ucx_info -v | head -2; ucx_info -d | grep -E "Transport:" | sort | uniq -c; } >> "$summary"

# One run: LABEL NP PER braid|nccl|braid-gdr
run() {
  local label="$1" np="$2" per="$3" who="$4"
  local left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 25 ]; then echo "$label skipped (deadline)" | tee -a "$summary"; return; fi
  local envs=(-x NCCL_TESTS_DEVICE=0 -x NCCL_NVLS_ENABLE=0 -x EMULATED_RANKS_PER_HOST="$per" -x NCCL_SOCKET_IFNAME=lo)
  if [ "$who" = braid-gdr ]; then
    envs+=(-x BRAID_GPUDIRECT=1 -x BRAID_UCX_LIBRARY="$CUDA_UCX_LIB" -x LD_LIBRARY_PATH="$(dirname "$CUDA_UCX_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
           -x LD_PRELOAD="$lib" -x UCX_TLS=tcp,cuda_copy -x UCX_NET_DEVICES=lo -x NCCL_MAX_CTAS="${BRAID_MAX_CTAS:-32}")
  elif [ "$who" = braid ]; then
    # braid counts ranks per GPU per host: emulated hosts hide that 4 ranks share GPU 0, and
    # under MPS their kernels must fit its SMs together (132 on an H200): BRAID_MAX_CTAS a rank.
    envs+=(-x LD_PRELOAD="$lib" -x UCX_TLS=tcp -x UCX_NET_DEVICES=lo -x NCCL_MAX_CTAS="${BRAID_MAX_CTAS:-32}")
  else
    envs+=(-x NCCL_NET=Socket -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1)
    [ -n "${REAL_NCCL:-}" ] && envs+=(-x LD_LIBRARY_PATH="$REAL_NCCL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
  local t0=$SECONDS rc
  # shellcheck disable=SC2086  # ARGS is a list of flags
  # --bind-to none: with 2 ranks Open MPI binds each to one core, where braid's UCX proxies
  # (transport/ucx_proxies.h) and NCCL's socket threads would share it (session 15: braid 1.5x
  # NCCL's time bound, 0.5-0.6x unbound; NCCL itself 29 ms bound, 24 ms unbound at 64 MB).
  timeout $((left < 150 ? left : 150)) mpirun --oversubscribe --bind-to none -np "$np" "${envs[@]}" "$hostwrap" "$nt/all_reduce_perf" \
    -g 1 ${ARGS:--b 8 -e 64M -f 2} > "$out/all_reduce-np$np-$label.log" 2>&1
  rc=$?
  echo "$label rc=$rc $((SECONDS - t0))s $(grep -E 'Out of bounds values|Avg bus bandwidth|Duplicate GPU' "$out/all_reduce-np$np-$label.log" |
    tr -s ' ' | head -3 | paste -sd ';' -)" | tee -a "$summary"
}

for c in ${CTAS_SWEEP:-}; do BRAID_MAX_CTAS=$c ARGS="-b 4M -e 64M -f 4 -n 10 -w 3" run "braid-2x1-ctas$c" 2 1 braid; done
# Each shape: braid staged, braid GPUDirect (with CUDA_UCX_LIB), NCCL; cheapest shape first.
gdr() { [ -n "${CUDA_UCX_LIB:-}" ] && run "$1" "$2" "$3" braid-gdr; }
run braid-2x1 2 1 braid; gdr braid-2x1-gdr 2 1; run nccl-2x1 2 1 nccl
run braid-4x1 4 1 braid; gdr braid-4x1-gdr 4 1; run nccl-4x1 4 1 nccl
run braid-2x2 4 2 braid; gdr braid-2x2-gdr 4 2; run nccl-2x2 4 2 nccl
python3 "$here/nccl_tests_table.py" "$out" all_reduce | tee -a "$summary"
[ -z "${NT_BIN:-}" ] && rm -rf "$nt"
echo "done in $((SECONDS - start)) s"
