#!/usr/bin/env bash
# The fault tests on device memory (issue 12's device variants), for tests/gpu/run.sh:
#   tests/gpu/faults_device.sh BUILD_DIR
# Each run is tests/mp/faults_rank through braid-launch with --memory device; it prints one
# SUMMARY line per run and exits non-zero when any failed (77 without a GPU).
set -u
build="$1"
launch="$build/tests/launcher/braid-launch"
prog="$build/tests/mp/faults_rank"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
rc_all=0

# run LABEL NP TIMEOUT ENV... -- ARGS...: the ranks' output in $tmp, the launcher's exit code.
run() {
  local label="$1" np="$2" t="$3"; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$launch" -np "$np" -t "$t" -- "$prog" "$@" --memory device >"$tmp" 2>&1
  local rc=$?
  [ $rc -eq 77 ] && { echo "SUMMARY SKIP (no GPU)"; exit 77; }
  echo "--- $label (rc=$rc)"
  grep -E 'FAIL|RESULT|LEARNED|DEATH|SUMMARY|hang report' "$tmp" | cut -c1-400 | head -20
  return $rc
}
verdict() {  # verdict LABEL OK(0/1) NOTE
  if [ "$2" = 0 ]; then echo "SUMMARY $1 PASS $3"; else rc_all=1; echo "SUMMARY $1 FAIL $3"; tail -15 "$tmp"; fi
}

# A rank killed while the others run device all-reduces: every survivor's kernels stop and
# ncclCommGetAsyncError says ncclRemoteError naming it, within 5 s.
for np in 2 4; do
  run "death np=$np" "$np" 60 NCCL_DEBUG=WARN -- die allreduce $((np - 1)) 300000
  # The victim's SIGKILL makes the launcher's exit code non-zero: judge by the survivors.
  death=$(grep -m1 -oE 'DEATH [0-9]+' "$tmp" | awk '{print $2}')
  worst=0; ok=0
  [ "$(grep -c '^\(\[rank [0-9]*\] \)\?OK' "$tmp")" -eq $((np - 1)) ] || ok=1
  while read -r t; do
    d=$(( (t - death) / 1000000 )); [ "$d" -gt "$worst" ] && worst=$d
  done < <(grep -oE 'LEARNED [0-9]+' "$tmp" | awk '{print $2}')
  learned=$(grep -c 'LEARNED' "$tmp")
  [ -z "$death" ] || [ "$learned" -ne $((np - 1)) ] || [ "$worst" -gt 5000 ] && ok=1
  grep 'LEARNED' "$tmp" | grep -qv "rank $((np - 1))" && ok=1
  verdict "death np=$np" $ok "(${learned} survivors knew within ${worst} ms)"
done

# Mismatched calls with BRAID_CHECK_CALLS=1: every rank gets ncclInvalidUsage (from the call,
# or from ncclCommGetAsyncError once its kernels were stopped).
for kind in coll count bcast-root; do
  run "mismatch $kind" 2 60 BRAID_CHECK_CALLS=1 -- mismatch "$kind"
  rc=$?
  n=$(grep -c 'RESULT rc=5 ' "$tmp")
  [ $rc -eq 0 ] && [ "$n" -eq 2 ]; verdict "mismatch $kind" $? "($n of 2 ranks got ncclInvalidUsage)"
done

# An abort from another thread while the first device call waits for its peer's connections.
run "abort connect" 2 120 -- abort-thread connect 20
verdict "abort connect" $? "$(grep -m1 -oE 'worst abort [0-9.]+ s worst return [0-9.]+ s' "$tmp")"

# A rank that destroys its communicator one all-reduce early: the others' kernels stop, and
# each names it (ncclRemoteError) within seconds, not at the hang report.
for np in 2 4; do
  run "leave np=$np" "$np" 60 -- leave $((np - 1)) 3
  rc=$?
  n=$(grep -c "LEARNED .* rank $((np - 1)) (pid [0-9]*) destroyed its communicator" "$tmp")
  [ $rc -eq 0 ] && [ "$n" -eq $((np - 1)) ]; verdict "leave np=$np" $? "($n of $((np - 1)) ranks named the leaver)"
done

# A late rank: the others' kernels wait; their report says so.
run "hang" 4 60 BRAID_HANG_TIMEOUT=1 -- hang
rc=$?
grep -q 'hang report (rank 2, no progress for' "$tmp" && grep -q 'rank 1 idle after #1' "$tmp" || rc=1
verdict "hang report" $rc ""

# What the call check costs per 8-byte all-reduce (2 ranks as threads of one process).
for c in -1 0 1; do
  BRAID_CHECK_CALLS=$c "$launch" -np 1 -t 60 -- "$prog" call-cost 5000 --memory device >"$tmp" 2>&1
  grep -oE 'SUMMARY .*' "$tmp" || { rc_all=1; tail -5 "$tmp"; }
done
exit $rc_all
