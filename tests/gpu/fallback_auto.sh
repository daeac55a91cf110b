#!/usr/bin/env bash
# BRAID_BACKEND=auto and BRAID_SHADOW on one GPU (issue 14), for tests/gpu/run.sh:
#   tests/gpu/fallback_auto.sh PART BUILD_DIR REAL_LIBNCCL
# PART:
#   auto         gpu_fallback_auto devapi under auto (the real NCCL serves ncclTeamWorld, logged
#                at INFO) and under braid (it fails as braid's own); shadow (every collective x
#                type x op, STRICT: no mismatch); perturb (a planted mismatch caught, named in a
#                WARN line, STRICT's ncclInternalError); capture (refused with a WARN line)
#   shadow-cost  braid-perf all-reduce (float, 1 rank) at 8 B, 1 MB, 64 MB with BRAID_SHADOW=1
#                and without: time per call each way, checked results
#   nccl-tests   nccl-tests 2.19.6 (built here by ../shared/tools/nccl-tests.sh) with one rank
#                under LD_PRELOAD=libbraid.so, BRAID_BACKEND=nccl and =auto: every test's own
#                check passes (never -D: its device kernels use NVLink multicast)
#   torch        tests/gpu/torch_dropin.py at world size 1 with BRAID_SHADOW=1 STRICT
set -u
part=$1 build=$2 real=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
[ -n "$real" ] && export BRAID_NCCL_LIBRARY="$real"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then echo "SKIP: no GPU"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prog="$build/tests/gpu/gpu_fallback_auto"
fails=0
pass() { echo "SUMMARY $1 PASS${2:+ ($2)}"; }
failed() { echo "SUMMARY $1 FAIL${2:+ ($2)}"; fails=$((fails + 1)); }
run() {  # LABEL TIMEOUT ENV... -- CMD...: output in $work/LABEL.log, status in $work/LABEL.rc
  local label=$1 t=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout "$t" "$@" > "$work/$label.log" 2>&1
  echo $? > "$work/$label.rc"
  sed "s/^/  [$label] /" "$work/$label.log" | grep -E "SUMMARY|FAIL|WARN|BRAID_SHADOW|served by" | head -20
}
rc_of() { cat "$work/$1.rc"; }

case $part in
auto)
  run devapi-auto 60 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT -- "$prog" devapi
  [ "$(rc_of devapi-auto)" = 0 ] && grep -q "ncclTeamWorld: served by the real NCCL" "$work/devapi-auto.log" &&
    pass "auto: ncclTeamWorld served by the real NCCL" || failed "auto: ncclTeamWorld" "rc $(rc_of devapi-auto)"
  run devapi-braid 60 BRAID_BACKEND=braid -- "$prog" devapi
  [ "$(rc_of devapi-braid)" = 0 ] && pass "braid: ncclTeamWorld refused" || failed "braid: ncclTeamWorld refused"
  run shadow 300 BRAID_SHADOW=1 BRAID_SHADOW_STRICT=1 NCCL_DEBUG=WARN -- "$prog" shadow
  if [ "$(rc_of shadow)" = 0 ] && ! grep -q "BRAID_SHADOW: shadow check" "$work/shadow.log"; then
    pass "shadow: every collective x type x op, no mismatch"
  else failed "shadow" "rc $(rc_of shadow), $(grep -c 'BRAID_SHADOW: shadow check' "$work/shadow.log") mismatch lines"; fi
  run perturb 60 BRAID_SHADOW=1 BRAID_SHADOW_STRICT=1 BRAID_SHADOW_TEST_PERTURB=5 NCCL_DEBUG=WARN -- "$prog" perturb
  if [ "$(rc_of perturb)" = 0 ] &&
     grep -qE "WARN BRAID_SHADOW: shadow check #1 ncclAllReduce count 1024 float sum rank 0: 1 of 1024 elements differ .* index 5: braid .* NCCL " "$work/perturb.log"; then
    pass "perturb: the planted mismatch caught, named, STRICT's ncclInternalError"
  else failed "perturb" "rc $(rc_of perturb)"; fi
  run capture 60 BRAID_SHADOW=1 NCCL_DEBUG=WARN -- "$prog" capture
  if [ "$(rc_of capture)" = 0 ] && [ "$(grep -c 'CUDA graph: refused' "$work/capture.log")" = 1 ]; then
    pass "capture: the shadow refused once, logged; the graph ran"
  else failed "capture" "rc $(rc_of capture)"; fi
  ;;
shadow-cost)
  perf="$build/perf/braid-perf"
  for size in 8 1048576 67108864; do
    iters=2000; [ "$size" -ge 67108864 ] && iters=100
    for mode in off on; do
      shadow=0; [ "$mode" = on ] && shadow=1
      run "perf-$size-$mode" 120 BRAID_SHADOW=$shadow -- "$perf" -np 1 --memory device -d float -o sum \
        -b "$size" -e "$size" -n "$iters" -w 20 -c 1 --json "$work/perf-$size-$mode.json"
      [ "$(rc_of "perf-$size-$mode")" = 0 ] || failed "braid-perf $size B shadow $mode" "rc $(rc_of "perf-$size-$mode")"
    done
  done
  python3 - "$work" <<'PY'
import json, os, sys
w = sys.argv[1]
def t(label):
    try:
        r = json.load(open(os.path.join(w, label + ".json")))["results"][0]
        return r["out_of_place"]["time"], r["out_of_place"]["nwrong"] + r["in_place"]["nwrong"]
    except Exception:
        return None
for size in (8, 1048576, 67108864):
    off, on = t("perf-%d-off" % size), t("perf-%d-on" % size)
    if off is None or on is None:
        print("SUMMARY shadow cost %d B: no report" % size); continue
    print("SUMMARY shadow cost %d B: %.2f us without, %.2f us with BRAID_SHADOW=1 (+%.2f us, x%.2f); wrong %d/%d"
          % (size, off[0], on[0], on[0] - off[0], on[0] / off[0] if off[0] else 0, off[1], on[1]))
PY
  ;;
nccl-tests)
  # NT_BIN: nccl-tests binaries built elsewhere (a GPU machine without ../shared); else built here.
  if [ -n "${NT_BIN:-}" ]; then
    ln -s "$(readlink -f "$NT_BIN")" "$work/nt"
  else
    tools=$(cd "$here/../.." && cd ../shared/tools 2>/dev/null && pwd) || tools=""
    [ -x "$tools/nccl-tests.sh" ] || { echo "SKIP: ../shared/tools/nccl-tests.sh not found (or set NT_BIN)"; exit 77; }
    bash "$tools/nccl-tests.sh" "$work/nt" > "$work/build.log" 2>&1 || { tail -20 "$work/build.log"; failed "nccl-tests build"; exit 1; }
  fi
  for backend in nccl auto; do
    for t in all_reduce all_gather broadcast reduce reduce_scatter alltoall sendrecv gather scatter; do
      bin="$work/nt/${t}_perf"
      [ -x "$bin" ] || continue
      # Never -D (device implementation: NVLink multicast kernels).
      run "nt-$backend-$t" 120 LD_PRELOAD="$(readlink -f "$build/libbraid.so")" BRAID_BACKEND=$backend -- \
        "$bin" -g 1 -b 8 -e 8M -f 8 -c 1 -n 5 -w 2
      log="$work/nt-$backend-$t.log"
      if [ "$(rc_of "nt-$backend-$t")" = 0 ] && grep -qE "Out of bounds values : 0 OK" "$log"; then
        pass "nccl-tests $t BRAID_BACKEND=$backend" "$(grep -E 'Avg bus bandwidth' "$log" | tr -s ' ')"
      else failed "nccl-tests $t BRAID_BACKEND=$backend" "rc $(rc_of "nt-$backend-$t")"; tail -15 "$log"; fi
    done
  done
  ;;
torch)
  NCCL_DEBUG=${NCCL_DEBUG:-WARN} BRAID_SHADOW=1 BRAID_SHADOW_STRICT=1 timeout 120 python3 "$here/torch_dropin.py" --lib "$build/libbraid.so" --worlds 1 --timeout 100
  exit $?
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
[ "$fails" -eq 0 ]
