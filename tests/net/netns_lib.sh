# Several nodes on one machine, for tests (sourced by nodes_run.sh and faults_run.sh):
# network namespaces joined by a bridge in a namespace of its own, each node with its own
# address (10.231.X.N/24 on `bx0`) and BRAID_HOSTID, ranks started inside them so that ranks of
# different nodes meet only over the network (UCX over TCP: UCX_TLS=tcp). Everything made here
# is deleted on exit, also on failure or interrupt.
#   netns_up NODES                      namespaces (exit 77, skipped, when they cannot be made)
#   netns_start NODES PER LIMIT -- cmd  ranks r = node*PER + local, each bounded by LIMIT s;
#                                       logs in $NETNS_WORK/rank<r>.log, pids in NETNS_PIDS
#   netns_wait                          exit codes into NETNS_RC
#   netns_link NODE up|down             that node's link
NETNS_TAG="bn$$"
NETNS_NET=$((($$ % 200) + 20))
NETNS_NODES=0
NETNS_PIDS=()
NETNS_RC=()
NETNS_WORK=$(mktemp -d)
netns_cleanup() {
  local p i
  for p in "${NETNS_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ((i = 0; i < NETNS_NODES; i++)); do ip netns del "$NETNS_TAG-n$i" 2>/dev/null; done
  ip netns del "$NETNS_TAG-sw" 2>/dev/null
  rm -rf "$NETNS_WORK"
}
trap netns_cleanup EXIT
trap 'exit 1' INT TERM

netns_up() {
  local nodes=$1 i ns
  command -v ip >/dev/null || { echo "SKIP: no ip command (iproute2)"; exit 77; }
  [ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
  # Ranks on other nodes meet over UCX, opened at run time: without it every init fails (its
  # message says what to install), which is the library's behaviour, not what these tests test.
  ldconfig -p 2>/dev/null | grep -q 'libucp\.so\.0' || { echo "SKIP: UCX is not installed (libucp.so.0; apt install libucx0)"; exit 77; }
  if ! ip netns add "$NETNS_TAG-sw" 2>"$NETNS_WORK/err"; then
    echo "SKIP: cannot make a network namespace: $(cat "$NETNS_WORK/err")"; exit 77
  fi
  ip -n "$NETNS_TAG-sw" link add br0 type bridge && ip -n "$NETNS_TAG-sw" link set br0 up || { echo "FAIL: bridge"; exit 1; }
  for ((i = 0; i < nodes; i++)); do
    ns="$NETNS_TAG-n$i"
    ip netns add "$ns" || { echo "FAIL: netns add $ns"; exit 1; }
    NETNS_NODES=$((i + 1))
    ip link add "${NETNS_TAG}s$i" type veth peer name "${NETNS_TAG}d$i" || { echo "FAIL: veth"; exit 1; }
    ip link set "${NETNS_TAG}s$i" netns "$NETNS_TAG-sw" && ip link set "${NETNS_TAG}d$i" netns "$ns" ||
      { echo "FAIL: moving veth ends"; exit 1; }
    ip -n "$NETNS_TAG-sw" link set "${NETNS_TAG}s$i" master br0 && ip -n "$NETNS_TAG-sw" link set "${NETNS_TAG}s$i" up
    ip -n "$ns" link set "${NETNS_TAG}d$i" name bx0 && ip -n "$ns" addr add "10.231.$NETNS_NET.$((i + 1))/24" dev bx0 &&
      ip -n "$ns" link set bx0 up && ip -n "$ns" link set lo up || { echo "FAIL: addressing $ns"; exit 1; }
  done
  export NCCL_SOCKET_IFNAME=bx0 UCX_TLS=tcp UCX_NET_DEVICES=bx0 NCCL_NVLS_ENABLE=0
}

netns_start() {
  local nodes=$1 per=$2 limit=$3 r node id port
  shift 4
  port=$((20000 + $$ % 20000))
  id=$(ip netns exec "$NETNS_TAG-n0" env NCCL_COMM_ID="10.231.$NETNS_NET.1:$port" "$NETNS_ID_TOOL") ||
    { echo "FAIL: no unique id"; exit 1; }
  for ((r = 0; r < nodes * per; r++)); do
    node=$((r / per))
    ip netns exec "$NETNS_TAG-n$node" env BRAID_HOSTID="node$node" BRAID_LAUNCH_RANK=$r BRAID_LAUNCH_NRANKS=$((nodes * per)) \
      BRAID_UNIQUE_ID="$id" timeout -k 2 "$limit" "$@" > "$NETNS_WORK/rank$r.log" 2>&1 &
    NETNS_PIDS+=($!)
  done
}

netns_wait() {
  local r
  NETNS_RC=()
  for ((r = 0; r < ${#NETNS_PIDS[@]}; r++)); do
    wait "${NETNS_PIDS[$r]}"
    NETNS_RC+=($?)
  done
  NETNS_PIDS=()
}

netns_link() { ip -n "$NETNS_TAG-n$1" link set bx0 "$2"; }
