#!/usr/bin/env bash
# A rank program on several nodes of this machine (netns_lib.sh): NODES nodes x RANKS ranks.
#   nodes_run.sh NODES RANKS BUILD_DIR TIMEOUT -- program args...
# The program runs as a braid-launch rank would (BRAID_LAUNCH_RANK/NRANKS, BRAID_UNIQUE_ID of
# a fixed root on node 0). Exit: 0 when every rank exits 0 and prints OK; 77 (skipped) when
# namespaces cannot be made here (not root, no `ip`); 1 otherwise.
# NODES_RUN_EXPECT (optional): a text every rank's output must also contain (say, the TUNING log
# line that names the algorithm a test is about).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
nodes=$1 per=$2 build=$3 limit=$4; shift 5
NETNS_ID_TOOL="$build/tests/net/print_unique_id"
. "$here/netns_lib.sh"
netns_up "$nodes"
netns_start "$nodes" "$per" "$limit" -- "$@"
netns_wait
failures=0
for ((r = 0; r < nodes * per; r++)); do
  if [ "${NETNS_RC[$r]}" -ne 0 ] || ! grep -q "OK" "$NETNS_WORK/rank$r.log"; then
    echo "FAIL: rank $r (node $((r / per))) exited ${NETNS_RC[$r]}"; sed 's/^/  | /' "$NETNS_WORK/rank$r.log" | tail -40
    failures=$((failures + 1))
  elif [ -n "${NODES_RUN_EXPECT:-}" ] && ! grep -qF -- "$NODES_RUN_EXPECT" "$NETNS_WORK/rank$r.log"; then
    echo "FAIL: rank $r (node $((r / per))) never printed \"$NODES_RUN_EXPECT\""; sed 's/^/  | /' "$NETNS_WORK/rank$r.log" | tail -20
    failures=$((failures + 1))
  fi
done
echo "--- rank 0 (node 0):"; tail -5 "$NETNS_WORK/rank0.log"
[ "$failures" -eq 0 ] && { echo "PASS: $nodes nodes x $per ranks"; exit 0; }
exit 1
