#!/usr/bin/env bash
# Faults across nodes (issue 15 item 5), on several nodes of this machine (netns_lib.sh):
#   faults_run.sh BUILD_DIR die|link-down|abort
#   die        2 nodes x 2 ranks in a loop of all-reduces; rank 3 (node 1) is killed after
#              300 ms: every survivor returns ncclRemoteError naming rank 3 within 5 s.
#   link-down  2 nodes x 1 rank in a loop of all-reduces; node 1's link goes down after 1 s:
#              both ranks return ncclRemoteError within 10 s of it (nothing closes a
#              connection then: keepalive and the liveness mesh must notice).
#   abort      2 nodes x 1 rank: 20 rounds of ncclCommAbort from another thread while rank 0
#              is blocked in a collective (each round a new communicator by ncclCommSplit,
#              so a UCX worker made and closed each time): the call returns within 1 s.
# Exit 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
build=$1 what=$2
NETNS_ID_TOOL="$build/tests/net/print_unique_id"
rankprog="$build/tests/mp/faults_rank"
. "$here/netns_lib.sh"
now() { date +%s%N; }
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
show() { for f in "$NETNS_WORK"/rank*.log; do echo "--- $(basename "$f"):"; tail -8 "$f" | sed 's/^/  | /'; done; }
# A survivor's report: it learned (rc 6, naming WHO) within LIMIT ns of T0.
learned() {  # RANK T0 LIMIT_NS WHO
  local log="$NETNS_WORK/rank$1.log" t
  t=$(sed -n 's/^LEARNED \([0-9]*\) rc=6 .*/\1/p' "$log" | head -1)
  if [ -z "$t" ]; then bad "rank $1 did not return ncclRemoteError"; return; fi
  if ! grep -q "^LEARNED .*rank $4" "$log"; then bad "rank $1's error does not name rank $4: $(grep ^LEARNED "$log")"; fi
  local ms=$(((t - $2) / 1000000))
  echo "rank $1 knew after $ms ms: $(grep '^LEARNED' "$log" | cut -c1-220)"
  [ $((t - $2)) -le "$3" ] || bad "rank $1 took $ms ms"
}
case "$what" in
  die)
    netns_up 2
    netns_start 2 2 60 -- "$rankprog" die allreduce 3 300000
    netns_wait
    death=$(sed -n 's/^DEATH \([0-9]*\)$/\1/p' "$NETNS_WORK/rank3.log" | head -1)
    [ -n "$death" ] || bad "the victim did not die on time"
    for r in 0 1 2; do
      [ "${NETNS_RC[$r]}" -eq 0 ] && grep -q '^OK' "$NETNS_WORK/rank$r.log" || bad "rank $r exited ${NETNS_RC[$r]}"
      [ -n "$death" ] && learned "$r" "$death" 5000000000 3
    done ;;
  link-down)
    netns_up 2
    netns_start 2 1 60 -- "$rankprog" die allreduce -1 0
    sleep 1
    down=$(now)
    netns_link 1 down
    netns_wait
    for r in 0 1; do
      [ "${NETNS_RC[$r]}" -eq 0 ] && grep -q '^OK' "$NETNS_WORK/rank$r.log" || bad "rank $r exited ${NETNS_RC[$r]}"
      learned "$r" "$down" 10000000000 $((1 - r))
    done ;;
  abort)
    netns_up 2
    netns_start 2 1 120 -- "$rankprog" abort-thread collective 20
    netns_wait
    for r in 0 1; do
      [ "${NETNS_RC[$r]}" -eq 0 ] && grep -q '^OK' "$NETNS_WORK/rank$r.log" || bad "rank $r exited ${NETNS_RC[$r]}"
    done
    grep -h "worst\|abort" "$NETNS_WORK/rank0.log" | tail -3 ;;
  *) echo "usage: faults_run.sh BUILD_DIR die|link-down|abort"; exit 2 ;;
esac
[ "$failures" -eq 0 ] && { echo "PASS: $what"; exit 0; }
show
exit 1
