#!/usr/bin/env bash
# The GPU test run (issue 4 item 4), for a machine with at least one GPU. Builds nothing: it
# runs what the build folder holds (a path, absolute or relative to the current folder or to
# this repository; default build-gpu).
#   tests/gpu/run.sh [BUILD_DIR]
# Environment: BUDGET (seconds for the whole run, default 480), BENCH=quick|full|off (the
# executor micro-benchmark, default quick), LIMIT_<SECTION> (per-section limits, below),
# SECTIONS=a,b,... (only these sections; default all),
# NCCL_REAL_LIB (the real libnccl.so.2; found automatically otherwise).
#
# Sections, most important first; each has its own time limit and never outlives the budget:
#   mp-device     API-level correctness on device memory: tests/mp/mp_rank `collectives
#                 --memory device`, every collective, type, op, in/out of place, counts 0 1 7
#                 4097 (+1000003 fp32/int64): 1, 2, 3, 4 rank processes (MPS off: served by rank
#                 0's process, issue 16, most in one pass; BRAID_SERVED=0, _FUSE=0 and
#                 _LOCAL=0 once each) and 8 ranks as threads on
#                 GPU(s) (rank % GPUs); host staging forced (NCCL_P2P_DISABLE=1) for 2
#                 processes and 4 threads; 8 processes with small counts; and the `abort`
#                 scenario (2 processes: the leader alone, `abort`; a served rank alone, `abort 1`).
#   mp-net-device device-memory collectives across emulated hosts on GPU 0 (issue 15): every
#                 pair of rank processes its own BRAID_HOSTID (tests/net/emulated_host.sh), UCX
#                 over TCP on lo; 2 hosts x 2 ranks (every collective, type, op, counts 0 1 7
#                 4097 +1000003) and 2 x 1, against the float64 reference; the per-peer
#                 transport INFO lines; NCCL_PROTO=LL and LL128 run with Simple and say so;
#                 the tree (NCCL_ALGO). With CUDA_UCX_LIB (a CUDA-built UCX's libucp.so.0;
#                 BUILD/ucx/libucx/lib/libucp.so.0 by default: tests/gpu/pack.sh --ucx-cuda):
#                 without an RDMA device braid stages by default (checked, logged); with
#                 BRAID_GPUDIRECT=1, GPUDirect: FIFO slots in device memory handed to UCX, the
#                 same runs (counts 0-4097: with MPS off its large calls time-slice).
#                 Prints what `ucx_info` shows here. SKIP where UCX is missing.
#   faults        tests/gpu/faults_device.sh: a rank killed among device all-reduces (2, 4
#                 processes), a rank that leaves one all-reduce early (2, 4 processes),
#                 mismatches with BRAID_CHECK_CALLS=1, abort during connection
#                 setup, a hang report, the call check's cost per 8-byte all-reduce.
#   doctor        tests/gpu/doctor_device.sh: braid-doctor's full run (JSON, plot) within 60 s,
#                 its D2D within 15% of cudaMemcpy beside it, pinned H2D above pageable, the IPC
#                 and storage parts ran, braid's and NCCL's all-reduce rows.
#   fallback      tests/gpu/fallback_device.sh: BRAID_BACKEND=nccl through braid-perf (1 rank)
#                 beside braid and the real NCCL directly: results checked, time per 8-byte call.
#   fallback-auto tests/gpu/fallback_auto.sh auto: BRAID_BACKEND=auto serves ncclTeamWorld from
#                 the real NCCL (braid refuses it under =braid); BRAID_SHADOW=1 STRICT over every
#                 collective x type x op (1 rank): no mismatch; a planted mismatch
#                 (BRAID_SHADOW_TEST_PERTURB) caught and named; graph capture refused, logged.
#   shadow-cost   fallback_auto.sh shadow-cost: braid-perf all-reduce at 8 B, 1 MB, 64 MB with
#                 and without BRAID_SHADOW=1.
#   nccl-tests-fb fallback_auto.sh nccl-tests: nccl-tests (built here) with 1 rank under
#                 BRAID_BACKEND=nccl and =auto, each test's own check.
#   torch-shadow  torch_dropin.py at world size 1 with BRAID_SHADOW=1 STRICT under LD_PRELOAD.
#   nccl-compare  braid vs the real NCCL, 1 rank each, in one process (gpu_nccl_compare):
#                 bitwise outputs, all-reduce 8 B..1 GB, CPU time per call, comm memory.
#   nccl-cmp-N    the same comparison of outputs with N = 2, 4, 8 ranks, one per GPU, where
#                 the machine has N GPUs.
#   call-cost     gpu_call_cost: host cost of the CUDA calls on the enqueue path, tiny copies.
#   async-error   gpu_api_async_error: a kernel fault reported by ncclCommGetAsyncError.
#   api-self      gpu_api_self_sendrecv: send/recv pairs to oneself run as copies (1 rank, at
#                 copy speed; mixed groups with a peer, 2 ranks as threads).
#   api-simulate  gpu_api_simulate: ncclGroupSimulateEnd and the TUNING log name the protocol
#                 a send/recv launch runs (Simple under NCCL_PROTO=LL,Simple; LL under =LL).
#   timeslice     gpu_timeslice_probe: a round trip between two processes on GPU 0, five ways
#                 (spinning kernels, stream memory operations, with a kernel or a copy, one
#                 side working), with MPS as it is (issue 16; not yet run on a GPU).
#   api-graph     CUDA graph (100 replays; also an in-place all-to-all) and abort within 1 s
#                 through the API (2 threads).
#   torch         PyTorch drop-in (torch_dropin.py, LD_PRELOAD), world sizes 2 and 4 on GPU 0.
#   executor-P    gpu_executor_test for protocol P = LL, LL128, Simple: the executor alone
#                 (ranks as threads), every collective, type and op, 1/2/4/8 ranks; Simple's
#                 section also runs the WorkCache test and the host-staged LL/LL128 test.
#   exec-graph    gpu_graph_abort_test: the executor's graph/abort/group tests, per protocol.
#   mp-proto      mp_rank collectives through the API with NCCL_PROTO=LL (4 threads) and LL128
#                 (2 threads), and LL128 staged (NCCL_P2P_DISABLE=1): Simple runs, logged.
#   bench         gpu_bench_executor: all-reduce, all-gather, reduce-scatter, sendrecv on 2/4/8
#                 ranks (threads) vs cudaMemcpy, and the 2-rank 8-byte all-reduce latency in
#                 each protocol (ring and direct).
# A summary table comes last (also in gpu-logs/summary.txt). Logs: $OUT/gpu-logs (when OUT
# is set, as on the device machine) or a temporary folder; one file per section.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

# ---- internal parts, run by this script under `timeout` (see below) ------------------------
if [ "${1:-}" = "--part" ]; then
  part="$2"; build="$3"; limit="${SECTION_LIMIT:-$4}"
  end=$((SECONDS + limit - 3))
  left() { echo $((end - SECONDS)); }
  launch="$build/tests/launcher/braid-launch"; rankprog="$build/tests/mp/mp_rank"
  rc_all=0; tmpf="$(mktemp)"
  wrap=()  # put before the rank program (mp-net-device: the emulated host)
  trap 'rm -f "$tmpf"' EXIT
  # A check of the last run's log: PASS when PATTERN (grep -E) is in it, FAIL otherwise, and
  # "not checked" when that run was cut for time (run_one emptied the log and failed already).
  logged() {  # NAME PATTERN [WHAT TO SAY ON FAILURE]
    if [ ! -s "$tmpf" ]; then echo "SUMMARY $1 not checked (its run did not run)"
    elif grep -qE "$2" "$tmpf"; then echo "SUMMARY $1 PASS"
    else rc_all=1; echo "SUMMARY $1 FAIL${3:+ ($3)}"; fi
  }
  # One run: LABEL LIMIT NP ENV -- mp_rank arguments. NP=1 with --threads N runs N ranks as
  # threads of one process (on one GPU, processes are time-sliced; threads run together).
  run_one() {
    local label="$1" t="$2" np="$3" envs="$4"; shift 5
    [ "$(left)" -lt "$t" ] && t=$(left)
    # A run that is cut leaves "$tmpf" empty: the checks that grep it after say "not checked".
    if [ "$t" -lt 10 ]; then echo "SUMMARY $label not run (no time left)"; rc_all=1; : > "$tmpf"; return; fi
    local t0=$SECONDS rc runs st
    echo "--- $label: ${envs:+$envs }mp_rank $* (limit ${t}s)"
    env $envs "$launch" -np "$np" -t "$t" -- "${wrap[@]}" "$rankprog" "$@" >"$tmpf" 2>&1
    rc=$?
    # Keep the log short: failures, warnings, staging and protocol notes, and the totals.
    grep -E 'WRONG|FAIL|SKIP|WARN|runs,|braid-launch|stages|LL128 asked' "$tmpf" | head -40; grep 'progress:' "$tmpf" | tail -2
    [ $rc -ne 0 ] && { echo "... last lines:"; tail -25 "$tmpf"; }
    runs="$(grep -oE '^(\[rank 0\] )?[0-9]+ runs, [0-9]+ wrong' "$tmpf" | tail -1 | sed 's/^\[rank 0\] //')"
    case $rc in 0) st=PASS ;; 124) st="TIMEOUT(${t}s)" ;; *) st="FAIL(rc=$rc)" ;; esac
    [ $rc -ne 0 ] && rc_all=1
    echo "SUMMARY $label $st $((SECONDS - t0))s ${runs:-}"
  }
  case "$part" in
    mp-device)
      echo "--- abort: 2 processes, rank 1 never joins the all-reduce (limit 20s)"
      "$launch" -np 2 -t 20 -- "$rankprog" abort --memory device >"$tmpf" 2>&1
      rc=$?
      tail -20 "$tmpf"
      case $rc in
        0) echo "SUMMARY abort PASS $(grep -m1 -oE 'abort [0-9.]+s drain [0-9.]+s' "$tmpf")" ;;
        77) echo "SUMMARY SKIP (no GPU)"; rm -f "$tmpf"; exit 77 ;;
        *) rc_all=1; echo "SUMMARY abort FAIL(rc=$rc)" ;;
      esac
      echo "--- abort 1: 2 processes, rank 1 (served by rank 0's process when MPS is off) alone in an all-reduce"
      "$launch" -np 2 -t 20 -- "$rankprog" abort 1 --memory device >"$tmpf" 2>&1
      rc=$?; tail -3 "$tmpf"
      if [ $rc = 0 ]; then echo "SUMMARY abort 1 PASS $(grep -m1 -oE 'abort [0-9.]+s drain [0-9.]+s' "$tmpf")"
      else rc_all=1; echo "SUMMARY abort 1 FAIL(rc=$rc)"; fi
      full=(collectives 0,1,7,4097 all --big 1000003 --memory device)
      run_one "np=1" 25 1 "" -- "${full[@]}"
      # Processes sharing GPU 0: with MPS off, rank 0's process runs the others' GPU work
      # (src/api/served.h) and says so at INFO; with MPS on, each runs its own.
      mps=$(pgrep -f nvidia-cuda-mps-control >/dev/null && echo on || echo off)
      run_one "np=2" 35 2 "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT" -- "${full[@]}"
      if [ $mps = on ] || grep -q "runs the GPU work of ranks 1" "$tmpf"; then echo "SUMMARY served (MPS $mps) PASS"
      else rc_all=1; echo "SUMMARY served FAIL (MPS off and no 'runs the GPU work of ranks 1' at INFO)"; fi
      # ... and launches both ranks' lanes of a collective as one kernel (BRAID_SERVED_FUSE).
      if [ $mps = on ] || grep -q "runs a collective of its GPU's 2 ranks as one kernel" "$tmpf"; then echo "SUMMARY fused (MPS $mps) PASS"
      else rc_all=1; echo "SUMMARY fused FAIL (MPS off and no 'as one kernel' at INFO)"; fi
      # ... and a collective of which every rank is there as one pass over their buffers (BRAID_SERVED_LOCAL).
      if [ $mps = on ] || grep -qE "runs a collective of its GPU's 2 ranks \([A-Za-z]+\) as one pass" "$tmpf"; then echo "SUMMARY one pass (MPS $mps) PASS"
      else rc_all=1; echo "SUMMARY one pass FAIL (MPS off and no 'as one pass' at INFO)"; fi
      run_one "np=2 BRAID_SERVED_FUSE=0" 35 2 "BRAID_SERVED_FUSE=0" -- collectives 0,1,7,4097 --memory device
      run_one "np=2 BRAID_SERVED_LOCAL=0" 35 2 "BRAID_SERVED_LOCAL=0" -- collectives 0,1,7,4097 all --memory device
      run_one "np=3" 45 3 "" -- "${full[@]}"
      run_one "np=4" 75 4 "" -- "${full[@]}"
      # Served off: each process runs its own kernels, time-sliced without MPS; braid must say so
      # (and must not under MPS, where their kernels run together).
      run_one "np=2 BRAID_SERVED=0" 35 2 "BRAID_SERVED=0 NCCL_DEBUG=WARN" -- collectives 0,1,7 --memory device
      if [ $mps = off ] && grep -q "shares GPU" "$tmpf"; then echo "SUMMARY time-slice warning PASS"
      elif [ $mps = on ] && ! grep -q "shares GPU" "$tmpf"; then echo "SUMMARY no time-slice warning under MPS PASS"
      else rc_all=1; echo "SUMMARY time-slice warning FAIL (MPS $mps; 'shares GPU' at NCCL_DEBUG=WARN: $(grep -c 'shares GPU' "$tmpf"))"; fi
      run_one "threads=8" 60 1 "" -- --threads 8 "${full[@]}"
      # Host staging (pinned shared host memory), forced: across processes and in one process.
      # With MPS off no rank is served then (a serving process cannot map staged FIFOs): each
      # process runs its own kernels, time-sliced, so fewer counts; braid must say why at INFO.
      if [ $mps = on ]; then
        run_one "staged np=2" 40 2 "NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=P2P" -- "${full[@]}"
      else
        run_one "staged np=2 (time-sliced)" 40 2 "NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P" -- collectives 0,1,7 --memory device
        if grep -q "stages FIFOs in host memory (NCCL_P2P_DISABLE=1), which a serving process cannot map" "$tmpf"; then
          echo "SUMMARY staged: served off, logged PASS"
        else rc_all=1; echo "SUMMARY staged: served off, logged FAIL (no INFO line saying why no rank is served)"; fi
      fi
      run_one "staged threads=4" 25 1 "NCCL_P2P_DISABLE=1" -- --threads 4 collectives 0,1,7,4097 all --memory device
      # Eight processes through CUDA IPC: float32 and int64 only, counts 7 and 4097 (processes
      # on one GPU take turns in time slices; 0,1,7 of every type took over 60 s).
      run_one "np=8 small" 45 8 "" -- collectives 7,4097 --memory device
      exit $rc_all ;;
    mp-net-device)
      if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then echo "SUMMARY SKIP (no GPU)"; exit 77; fi
      # braid counts the ranks on a GPU per host, so it sees 2 on GPU 0 where 4 are: the blocks cap
      # (NCCL_MAX_CTAS) keeps 4 ranks' kernels within the H200's 132 SMs (should MPS run).
      export NCCL_SOCKET_IFNAME=lo UCX_TLS=tcp UCX_NET_DEVICES=lo EMULATED_RANKS_PER_HOST=2 NCCL_MAX_CTAS=32
      if command -v ucx_info >/dev/null 2>&1; then
        echo "--- ucx_info -v; ucx_info -d (transports and devices, counted)"
        ucx_info -v 2>&1 | head -3
        ucx_info -d 2>&1 | grep -E "Transport:|Device:|Memory domain:|memory types" | sort | uniq -c | head -40
      else echo "--- ucx_info: not on PATH"; fi
      wrap=("$repo/tests/net/emulated_host.sh")
      small=(collectives 7,4097 --memory device)
      run_one "2 hosts x 2, NET/P2P INFO" 60 4 "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,P2P" -- "${small[@]}"
      if grep -qE "UCX is not installed|built without UCX" "$tmpf"; then
        echo "SUMMARY SKIP (no UCX: $(grep -m1 -oE '(UCX is not installed|built without UCX)[^.(]*' "$tmpf"))"; exit 77
      fi
      grep -m2 -E "transport: rank 0 -> rank [23]|CUDA memory support|pinned host memory for" "$tmpf"
      logged "per-peer transport logged" "rank 0 -> rank 2: other host: UCX" "no 'rank 0 -> rank 2: other host: UCX' at INFO NET,P2P"
      grep -m1 -oE "UCX (here has no CUDA memory support|reports CUDA memory support)" "$tmpf" | sed 's/^/SUMMARY /'
      # The matrix, staged or (GPUDirect) not: 2 x 2 with every count, 2 x 1, and the double binary
      # tree across the two hosts (all-reduce and broadcast; the rest as tuned).
      matrix() {  # LABEL-SUFFIX ENV [MORE-ARGS for 2 x 2]
        run_one "2 hosts x 2$1" 200 4 "$2" -- collectives 0,1,7,4097 all ${3:-} --memory device
        run_one "2 hosts x 1$1" 60 2 "$2 EMULATED_RANKS_PER_HOST=1" -- collectives 0,1,7,4097 all --memory device
        run_one "2 hosts x 2 tree$1" 60 4 "$2 NCCL_ALGO=allreduce:tree;broadcast:tree NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING" -- collectives 0,1,7,4097 all --memory device
        logged "tree chosen (TUNING)$1" "AllReduce.*tree|tree.*AllReduce" "no all-reduce tree at INFO TUNING"
      }
      matrix "" "" "--big 1000003"
      # LL and LL128 do not cross hosts (transport/select.h): asked for, they run with Simple, logged.
      run_one "2 hosts x 2 NCCL_PROTO=LL" 50 4 "NCCL_PROTO=LL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL" -- "${small[@]}"
      logged "LL fallback logged" "LL asked, but this communicator has ranks on other hosts"
      run_one "2 hosts x 2 NCCL_PROTO=LL128" 50 4 "NCCL_PROTO=LL128 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL,TUNING" -- "${small[@]}"
      logged "LL128 fallback logged" "LL128 asked|LL128 runs only over same-GPU and NVLink hops"
      # GPUDirect: a UCX built with CUDA (CUDA_UCX_LIB, its libucp.so.0; e.g. the libucx-cu13
      # wheel's) takes the FIFO slots in device memory; UCX moves them over TCP with cuda_copy.
      # tests/gpu/pack.sh --ucx-cuda puts one beside the binaries.
      [ -z "${CUDA_UCX_LIB:-}" ] && [ -e "$build/ucx/libucx/lib/libucp.so.0" ] && CUDA_UCX_LIB=$build/ucx/libucx/lib/libucp.so.0
      if [ -n "${CUDA_UCX_LIB:-}" ]; then
        # This machine has no RDMA device: by default braid stages anyway (select.h GpuDirect::NoRdma,
        # checked first); BRAID_GPUDIRECT=1 takes the GPUDirect path over TCP, to test it.
        cuda_ucx="BRAID_UCX_LIBRARY=$CUDA_UCX_LIB LD_LIBRARY_PATH=$(dirname "$CUDA_UCX_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UCX_TLS=tcp,cuda_copy"
        gdr="$cuda_ucx BRAID_GPUDIRECT=1"
        ucxbin="$(dirname "$CUDA_UCX_LIB")/../bin/ucx_info"
        [ -x "$ucxbin" ] && { echo "--- $ucxbin -v; -d (memory domains and transports)"; env $gdr "$ucxbin" -v | head -2;
          env $gdr "$ucxbin" -d | grep -E "Transport:|Memory domain:|memory types" | sort | uniq -c | head -20; }
        run_one "2 hosts x 2 CUDA UCX, no RDMA: staged" 40 4 "$cuda_ucx NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET" -- "${small[@]}"
        if [ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then echo "SUMMARY GPUDirect default not checked (an RDMA device is here)"
        else logged "GPUDirect off without RDMA, logged" "but no RDMA device is here" "no 'but no RDMA device is here' at INFO NET"; fi
        run_one "2 hosts x 2 GPUDirect, NET INFO" 60 4 "$gdr NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,P2P,ALLOC" -- "${small[@]}"
        grep -m3 -E "UCX [0-9]|CUDA memory support|device memory \(slots" "$tmpf"
        logged "GPUDirect slots in device memory" "handed to UCX as CUDA memory: GPUDirect" "no 'handed to UCX as CUDA memory' at INFO"
        # Without the 1000003-element counts: with MPS off, UCX's copies of device slots run in each
        # process's own context, and the emulated hosts' kernels share the GPU by time slices
        # (issue 16's ~ms per switch): one such call took 8-13 s (session 14). Their speed is
        # perf/ucx_device_vs_nccl.sh's, under MPS, where nccl-tests checks the results.
        matrix " GPUDirect" "$gdr"
        run_one "2 hosts x 2 BRAID_GPUDIRECT=0" 40 4 "$gdr BRAID_GPUDIRECT=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET" -- "${small[@]}"
        logged "GPUDirect off, logged" "but BRAID_GPUDIRECT=0"
      else echo "SUMMARY GPUDirect not run (CUDA_UCX_LIB unset: no UCX with CUDA support given)"; fi
      exit $rc_all ;;
    mp-proto)
      # The API with each protocol forced (NCCL_PROTO naming one), ranks as threads on one
      # GPU; and LL128 asked where FIFOs are staged in host memory: it must run with Simple
      # and say so (the tuner's WARN when NCCL_PROTO leaves nothing else, or the executor's
      # INFO when a tuned LL128 call meets a staged connection).
      # (The executor sections cover every protocol in depth; these cover the API's plumbing.)
      small=(collectives 0,1,7,4097 all --memory device)
      run_one "LL threads=4" 40 1 "NCCL_PROTO=LL" -- --threads 4 "${small[@]}"
      run_one "LL128 threads=2" 30 1 "NCCL_PROTO=LL128" -- --threads 2 "${small[@]}"
      run_one "LL128 staged threads=2" 30 1 "NCCL_PROTO=LL128 NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL" -- --threads 2 "${small[@]}"
      if grep -qE "LL128 asked|LL128 runs only over same-GPU and NVLink hops" "$tmpf"; then
        echo "SUMMARY LL128 staged fallback logged PASS"
      else rc_all=1; echo "SUMMARY LL128 staged fallback logged FAIL (neither the tuner's WARN nor the executor's INFO)"; fi
      exit $rc_all ;;
    torch)
      rm -f "$tmpf"; trap - EXIT
      exec python3 "$here/torch_dropin.py" --lib "$build/libbraid.so" --worlds 2,4 --timeout $(((limit - 5) / 2)) ;;
  esac
  echo "unknown part $part"; exit 2
fi

# ---- set-up -------------------------------------------------------------------------------
arg="${1:-build-gpu}"
if [ -d "$arg" ]; then build="$(cd "$arg" && pwd)"
elif [ -d "$repo/$arg" ]; then build="$(cd "$repo/$arg" && pwd)"
else echo "run.sh: no build folder $arg"; exit 2; fi
logs="${OUT:-$(mktemp -d)}/gpu-logs"
mkdir -p "$logs"
budget="${BUDGET:-480}"
deadline=$((SECONDS + budget))
export NCCL_NVLS_ENABLE=0   # never NVLink multicast
# Ranks of one process share a GPU's hardware queues (8 by default): two ranks' streams on
# one queue could serialise their kernels while each waits for the other.
export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-32}"
# Programs linked against braid find it as libnccl.so.2 through this folder first (their
# RUNPATH names the build machine's path; the real NCCL must never be picked up instead).
libdir="$(mktemp -d)"
trap 'rm -rf "$libdir"' EXIT
ln -s "$build/libbraid.so" "$libdir/libnccl.so.2"
export LD_LIBRARY_PATH="$libdir:$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

find_real_nccl() {
  local c cands=("${NCCL_REAL_LIB:-}" /usr/local/cuda/lib/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2
                 /usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2)
  local py
  py="$(timeout 20 python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)" &&
    cands+=("$py/lib/libnccl.so.2")
  while read -r c; do cands+=("$c"); done < <(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF}')
  for c in "${cands[@]}"; do
    [ -n "$c" ] && [ -f "$c" ] || continue
    c="$(readlink -f "$c")"
    grep -qa 'BRAID_INIT_TIMEOUT' "$c" && continue   # braid itself (libnccl.so.2 is its soname too)
    echo "$c"; return 0
  done
  return 1
}

declare -a rows
section() {  # section NAME LIMIT_S COMMAND...
  local name="$1" limit="$2"; shift 2
  if [ -n "${SECTIONS:-}" ] && [[ ",$SECTIONS," != *",$name,"* ]]; then return; fi  # not asked for
  local log="$logs/$name.log" t0=$SECONDS status left=$((deadline - SECONDS - 5))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 15 ]; then
    rows+=("$(printf '%-13s %-15s %6s   %s' "$name" "NO-TIME" "-" "budget of ${budget}s spent")"); return
  fi
  if [[ "$1" == */* && ! -x "$1" ]]; then
    rows+=("$(printf '%-13s %-15s %6s   %s' "$name" "MISSING" "-" "$1 not built")"); return
  fi
  echo "=== $name (limit ${limit}s): $*"
  SECTION_LIMIT="$limit" timeout -k 5 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  case $rc in
    0) status=PASS
       grep -qE '^\[  PASSED  \] 0 tests' "$log" && status=SKIP ;;
    77) status=SKIP ;;
    124|137) status="TIMEOUT(${limit}s)" ;;
    *) status="FAIL(rc=$rc)" ;;
  esac
  grep -E "^SUMMARY|^\[  (FAILED|SKIPPED) |FAILED TEST" "$log" | head -20
  case $status in PASS|SKIP) ;; *) tail -30 "$log" ;; esac
  local notes
  notes="$(grep -E '^SUMMARY' "$log" | sed 's/^SUMMARY //' | paste -sd ';' - | cut -c1-400)"
  [ -z "$notes" ] && [ "$status" = SKIP ] && notes="$(grep -m1 -iE 'skip' "$log" | cut -c1-150)"
  rows+=("$(printf '%-13s %-15s %5ss   %s' "$name" "$status" "$((SECONDS - t0))" "$notes")")
}
skip() { rows+=("$(printf '%-13s %-15s %6s   %s' "$1" "NOT-RUN" "-" "$2")"); }

echo "=== device, build, libraries"
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv,noheader 2>&1 | head -8
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "build: $build   (budget ${budget}s, logs $logs)"
echo "mp_rank links: $(ldd "$build/tests/mp/mp_rank" 2>/dev/null | grep -E 'nccl|braid' | tr -s ' \t' ' ')"
real_nccl="$(find_real_nccl)" || real_nccl=""
echo "real NCCL: ${real_nccl:-not found}"

# 1. API-level correctness on device memory, rank processes through braid-launch.
section mp-device "${LIMIT_MP:-260}" bash "$here/run.sh" --part mp-device "$build" "${LIMIT_MP:-260}"
# 1a. Device memory across 2 emulated hosts (UCX over loopback TCP), issue 15.
section mp-net-device "${LIMIT_NET_DEVICE:-300}" bash "$here/run.sh" --part mp-net-device "$build" "${LIMIT_NET_DEVICE:-300}"
# 1b. Faults on device memory: a dead peer, mismatches (BRAID_CHECK_CALLS=1), an abort during
#     connection setup, a hang report, and the cost of the call check.
section faults "${LIMIT_FAULTS:-120}" bash "$here/faults_device.sh" "$build"
# 1c. braid-doctor on this machine; BRAID_BACKEND=nccl against the real NCCL.
section doctor "${LIMIT_DOCTOR:-100}" bash "$here/doctor_device.sh" "$build" "$logs/doctor"
[ -n "$real_nccl" ] && section fallback "${LIMIT_FALLBACK:-60}" bash "$here/fallback_device.sh" "$build" "$real_nccl"
# 1d. BRAID_BACKEND=auto and BRAID_SHADOW (issue 14), 1 rank on GPU 0.
if [ -n "$real_nccl" ]; then
  section fallback-auto "${LIMIT_FALLBACK_AUTO:-240}" bash "$here/fallback_auto.sh" auto "$build" "$real_nccl"
  section shadow-cost "${LIMIT_SHADOW_COST:-120}" bash "$here/fallback_auto.sh" shadow-cost "$build" "$real_nccl"
  section nccl-tests-fb "${LIMIT_NCCL_TESTS_FB:-400}" bash "$here/fallback_auto.sh" nccl-tests "$build" "$real_nccl"
  section torch-shadow "${LIMIT_TORCH_SHADOW:-150}" bash "$here/fallback_auto.sh" torch "$build" "$real_nccl"
else
  skip fallback-auto "no real libnccl.so.2 found (set NCCL_REAL_LIB)"
fi
# 2. braid against the real NCCL (1 rank each), with the 1-rank measurements; then, where there
#    are enough GPUs, 2, 4 and 8 ranks (one per GPU, ncclCommInitAll in one process).
if [ -n "$real_nccl" ]; then
  section nccl-compare "${LIMIT_COMPARE:-90}" "$build/tests/gpu/gpu_nccl_compare" \
    --braid "$(readlink -f "$build/libbraid.so")" --nccl "$real_nccl"
  for n in 2 4 8; do
    [ "$n" -le "$ngpus" ] || continue
    section "nccl-cmp-$n" "${LIMIT_COMPARE_N:-120}" "$build/tests/gpu/gpu_nccl_compare" \
      --braid "$(readlink -f "$build/libbraid.so")" --nccl "$real_nccl" --ranks "$n"
  done
else
  skip nccl-compare "no real libnccl.so.2 found (set NCCL_REAL_LIB)"
fi
section call-cost "${LIMIT_CALL_COST:-30}" "$build/tests/gpu/gpu_call_cost"
# 3. CUDA graph + 100 replays and abort through the API (2 ranks as threads on GPU 0).
section api-graph "${LIMIT_API_GRAPH:-60}" "$build/tests/gpu/gpu_api_graph_abort"
section api-bad-input "${LIMIT_BAD_INPUT:-30}" "$build/tests/gpu/gpu_api_bad_input"
section async-error "${LIMIT_ASYNC_ERROR:-30}" "$build/tests/gpu/gpu_api_async_error"
section api-self "${LIMIT_API_SELF:-40}" "$build/tests/gpu/gpu_api_self_sendrecv"
section api-simulate "${LIMIT_API_SIMULATE:-30}" "$build/tests/gpu/gpu_api_simulate"
section timeslice "${LIMIT_TIMESLICE:-90}" "$build/tests/gpu/gpu_timeslice_probe" 1000
# 4. PyTorch drop-in with LD_PRELOAD=libbraid.so, 2 and 4 processes on GPU 0.
if python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' >/dev/null 2>&1; then
  section torch "${LIMIT_TORCH:-90}" bash "$here/run.sh" --part torch "$build" "${LIMIT_TORCH:-90}"
else
  skip torch "python3 cannot import torch"
fi
# 5. The executor alone (ranks as threads, no communicator): correctness per protocol (each
#    its own section, so that a hang in one leaves the others' results), graph/abort, bench.
for proto in LL LL128 Simple; do
  filter="Ranks/ExecutorTest.Matrix/${proto}_*"
  [ "$proto" = Simple ] && filter="$filter:WorkCache.*:ExecutorStaged.*"
  section "executor-$proto" "${LIMIT_CORRECTNESS:-120}" "$build/tests/gpu/gpu_executor_test" --gtest_filter="$filter"
done
section exec-graph "${LIMIT_GRAPH:-60}" "$build/tests/gpu/gpu_graph_abort_test"
section mp-proto "${LIMIT_MP_PROTO:-100}" bash "$here/run.sh" --part mp-proto "$build" "${LIMIT_MP_PROTO:-100}"
case "${BENCH:-quick}" in
  quick) section bench "${LIMIT_BENCH:-120}" "$build/tests/gpu/gpu_bench_executor" --quick ;;
  full) section bench "${LIMIT_BENCH:-300}" "$build/tests/gpu/gpu_bench_executor" ;;
  *) skip bench "BENCH=${BENCH}" ;;
esac
[ -f "$logs/bench.log" ] && { echo "=== executor bench table"; grep -vE "^SUMMARY" "$logs/bench.log" | tail -60; }

{
  echo
  echo "=== key numbers"
  [ -f "$logs/nccl-compare.log" ] &&
    grep -E '^(braid|nccl) ' "$logs/nccl-compare.log" && sed -n '/^1-rank all-reduce/,/^host time/p' "$logs/nccl-compare.log"
  for f in mp-device mp-net-device mp-proto api-graph torch; do
    [ -f "$logs/$f.log" ] && grep -E '^SUMMARY' "$logs/$f.log" | sed "s/^SUMMARY/$f:/"
  done
  echo
  echo "=== summary ($((SECONDS))s of ${budget}s)"
  printf '%-13s %-15s %6s   %s\n' section status time notes
  for r in "${rows[@]}"; do echo "$r"; done
} | tee "$logs/summary.txt"
