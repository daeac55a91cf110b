#!/usr/bin/env bash
# Several nodes on one machine: NODES network namespaces joined by a bridge (in a namespace of
# its own), each node with its own address (10.231.X.N/24 on `bx0`) and BRAID_HOSTID, and
# RANKS ranks per node started inside them, so that ranks of different nodes meet only over
# the network (UCX over TCP: UCX_TLS=tcp).
#   nodes_run.sh NODES RANKS BUILD_DIR TIMEOUT -- program args...
# The program runs as a braid-launch rank would (BRAID_LAUNCH_RANK/NRANKS, BRAID_UNIQUE_ID of
# a fixed root on node 0). Exit: 0 when every rank exits 0 and prints OK; 77 (skipped) when
# namespaces cannot be made here (not root, no `ip`); 1 otherwise. Every namespace and veth
# is deleted at the end, also on failure or interrupt; every rank is bounded by TIMEOUT.
# NODES_RUN_EXPECT (optional): a text every rank's output must also contain (say, the TUNING log
# line that names the algorithm a test is about).
set -u
nodes=$1 per=$2 build=$3 limit=$4; shift 5
n=$((nodes * per))
command -v ip >/dev/null || { echo "SKIP: no ip command (iproute2)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
tag="bn$$"
net=$((($$ % 200) + 20))   # 10.231.<net>.0/24: one subnet per run
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ((i = 0; i < nodes; i++)); do ip netns del "$tag-n$i" 2>/dev/null; done
  ip netns del "$tag-sw" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
if ! ip netns add "$tag-sw" 2>"$work/err"; then echo "SKIP: cannot make a network namespace: $(cat "$work/err")"; exit 77; fi
ip -n "$tag-sw" link add br0 type bridge && ip -n "$tag-sw" link set br0 up || { echo "FAIL: bridge"; exit 1; }
for ((i = 0; i < nodes; i++)); do
  ns="$tag-n$i"
  ip netns add "$ns" || { echo "FAIL: netns add $ns"; exit 1; }
  ip link add "${tag}s$i" type veth peer name "${tag}d$i" || { echo "FAIL: veth"; exit 1; }
  ip link set "${tag}s$i" netns "$tag-sw" && ip link set "${tag}d$i" netns "$ns" || { echo "FAIL: moving veth ends"; exit 1; }
  ip -n "$tag-sw" link set "${tag}s$i" master br0 && ip -n "$tag-sw" link set "${tag}s$i" up
  ip -n "$ns" link set "${tag}d$i" name bx0 && ip -n "$ns" addr add "10.231.$net.$((i + 1))/24" dev bx0 &&
    ip -n "$ns" link set bx0 up && ip -n "$ns" link set lo up || { echo "FAIL: addressing $ns"; exit 1; }
done
export NCCL_SOCKET_IFNAME=bx0 UCX_TLS=tcp UCX_NET_DEVICES=bx0 NCCL_NVLS_ENABLE=0
port=$((20000 + $$ % 20000))
id=$(ip netns exec "$tag-n0" env NCCL_COMM_ID="10.231.$net.1:$port" "$build/tests/net/print_unique_id") ||
  { echo "FAIL: no unique id"; exit 1; }
for ((r = 0; r < n; r++)); do
  node=$((r / per))
  ip netns exec "$tag-n$node" env BRAID_HOSTID="node$node" BRAID_LAUNCH_RANK=$r BRAID_LAUNCH_NRANKS=$n \
    BRAID_UNIQUE_ID="$id" timeout -k 2 "$limit" "$@" > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
failures=0
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"; rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "OK" "$work/rank$r.log"; then
    echo "FAIL: rank $r (node $((r / per))) exited $rc"; sed 's/^/  | /' "$work/rank$r.log" | tail -40
    failures=$((failures + 1))
  elif [ -n "${NODES_RUN_EXPECT:-}" ] && ! grep -qF -- "$NODES_RUN_EXPECT" "$work/rank$r.log"; then
    echo "FAIL: rank $r (node $((r / per))) never printed \"$NODES_RUN_EXPECT\""; sed 's/^/  | /' "$work/rank$r.log" | tail -20
    failures=$((failures + 1))
  fi
done
pids=()
echo "--- rank 0 (node 0):"; tail -5 "$work/rank0.log"
[ "$failures" -eq 0 ] && { echo "PASS: $nodes nodes x $per ranks"; exit 0; }
exit 1
