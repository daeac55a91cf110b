#!/usr/bin/env bash
# braid's host-memory all-reduce across emulated nodes beside Open MPI's on the same nodes
# (issue 15): NODES network namespaces joined by a bridge over veth (tests/net/netns_lib.sh),
# PER ranks in each; float sum, out of place. Open MPI runs twice, with the UCX PML over TCP
# (UCX_TLS=tcp) and with ob1 over its TCP BTL (tcp,self), both bound to the namespaces'
# interface (bx0). One table: bytes, the three times (us), braid's time over each, and the
# issue's target against the faster MPI (>= 64 KB: braid no slower; below: at most 1.2x).
#
#   perf/netns_vs_mpi.sh [--build-dir DIR] [--nodes 2] [--per 2] [-b 8] [-e 64M] [-n 20] [-w 5]
#                        [--repeat R]      (R rounds, interleaved; each time is the median)
#
# mpirun starts ranks on "hosts" through a launch agent of its own (plm_rsh_agent): a script that
# takes the host (a node's address, 10.231.X.N) and runs the command in that node's namespace,
# the way ssh would run it on another machine. mpirun itself runs in node 0's namespace. Its
# ranks yield the core when idle (mpi_yield_when_idle 1: what Open MPI does by itself when it
# knows a node is oversubscribed; it cannot tell here, the "hosts" share this machine's cores,
# and ranks spinning without yielding took 4-16 ms per call at 8 B on 2 cores).
# Needs root, ip, UCX (libucp.so.0), mpirun and mpicc, a built braid-perf: otherwise exit 77
# (skipped), saying why. Raw outputs: DIR/perf/netns_vs_mpi/.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build nodes=2 per=2 min_bytes=8 max_bytes=64M iters=20 warmup=5 repeat=1
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --per) per=$2; shift 2 ;;
    -b) min_bytes=$2; shift 2 ;;
    -e) max_bytes=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "netns_vs_mpi: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip command (iproute2)"
ldconfig -p 2>/dev/null | grep -q 'libucp\.so\.0' || skip "UCX is not installed (libucp.so.0; apt install libucx0)"
command -v mpirun >/dev/null && command -v mpicc >/dev/null ||
  skip "no mpirun/mpicc (apt-get install -y openmpi-bin libopenmpi-dev)"
braid_perf=$build/perf/braid-perf
[ -x "$braid_perf" ] && [ -x "$build/tests/net/print_unique_id" ] ||
  skip "no braid-perf or print_unique_id in $build (ninja -C $build braid-perf print_unique_id)"

to_bytes() {
  case $1 in
    *[kK]) echo $((${1%[kK]} * 1024)) ;;
    *[mM]) echo $((${1%[mM]} * 1024 * 1024)) ;;
    *) echo "$1" ;;
  esac
}
out=$build/perf/netns_vs_mpi
mkdir -p "$out"
bench=$out/mpi_allreduce_bench
mpicc -O2 -Wall -Wextra -o "$bench" "$here/mpi_allreduce_bench.c" || { echo "FAIL: mpicc"; exit 1; }

NETNS_ID_TOOL=$build/tests/net/print_unique_id
. "$repo/tests/net/netns_lib.sh"  # its EXIT trap deletes every namespace, also on failure
netns_up "$nodes"
subnet=10.231.$NETNS_NET

# The launch agent: "agent HOST command words..." as mpirun calls ssh. HOST is a node's address;
# the words are one shell command line, run by a shell in that node's namespace.
agent=$NETNS_WORK/netns_agent.sh
cat >"$agent" <<EOF
#!/bin/sh
host=\$1; shift
node=\$((\${host##*.} - 1))
case \$host in $subnet.*) ;; *) echo "netns_agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "$NETNS_TAG-n\$node" sh -c "\$*"
EOF
chmod +x "$agent"
hosts=$(for ((i = 0; i < nodes; i++)); do printf '%s%s:%d' "$([ $i -gt 0 ] && echo ,)" "$subnet.$((i + 1))" "$per"; done)
nranks=$((nodes * per))

run_mpi() {  # run_mpi ob1|ucx OUTFILE
  local pml
  if [ "$1" = ob1 ]; then pml=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include bx0)
  else pml=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl self -x UCX_TLS=tcp -x UCX_NET_DEVICES=bx0); fi
  ip netns exec "$NETNS_TAG-n0" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout -k 5 600 mpirun --host "$hosts" -np "$nranks" --map-by slot --bind-to none \
    --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include bx0 --mca mpi_yield_when_idle 1 "${pml[@]}" \
    "$bench" -b "$(to_bytes "$min_bytes")" -e "$(to_bytes "$max_bytes")" -f 2 -n "$iters" -w "$warmup" >"$2" 2>&1 ||
    { echo "FAIL: mpirun ($1): $(tail -5 "$2")"; exit 1; }
}
run_braid() {  # run_braid OUTFILE: rank 0's output
  netns_start "$nodes" "$per" 600 -- "$braid_perf" --memory host --coll allreduce -d float -o sum \
    -b "$min_bytes" -e "$max_bytes" -f 2 -n "$iters" -w "$warmup" -c 1
  netns_wait
  local r
  for ((r = 0; r < nranks; r++)); do
    [ "${NETNS_RC[$r]}" -eq 0 ] || { echo "FAIL: braid-perf rank $r exited ${NETNS_RC[$r]}:"; tail -5 "$NETNS_WORK/rank$r.log"; exit 1; }
  done
  cp "$NETNS_WORK/rank0.log" "$1"
}
# "size time" rows of braid-perf's table (out of place) and of the MPI bench (same layout).
rows() { awk '/^ *[0-9]/ { print $1, $6 }' "$1"; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((k = 1; k <= repeat; k++)); do
  run_braid "$out/braid.$k.txt"
  run_mpi ob1 "$out/ob1.$k.txt"
  run_mpi ucx "$out/ucx.$k.txt"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The median per size of each column over the rounds.
median() {  # median KIND: "size time" lines
  for ((k = 1; k <= repeat; k++)); do rows "$out/$1.$k.txt"; done |
    sort -n -k1,1 -k2,2g | awk '{ t[$1] = t[$1] " " $2; n[$1]++ } END {
      for (s in t) { split(substr(t[s], 2), v, " "); print s, v[int((n[s] + 1) / 2)] } }' | sort -n -k1,1
}
printf '# netns_vs_mpi: %s, %s, %s cores, load %s -> %s; %d nodes x %d ranks over veth; all-reduce float sum,\n' \
  "$(date '+%Y-%m-%d %H:%M')" "$(hostname)" "$(nproc)" "$load_before" "$load_after" "$nodes" "$per"
printf '# out of place, -n %s -w %s, median of %s round(s); times in us; target vs the faster MPI\n' "$iters" "$warmup" "$repeat"
printf '%10s  %10s  %10s  %10s  %9s  %9s  %s\n' bytes braid ob1 ucx braid/ob1 braid/ucx target
join <(median braid) <(median ob1) | join - <(median ucx) | sort -n -k1,1 | awk '{
  best = ($3 < $4) ? $3 : $4; limit = ($1 >= 65536) ? 1.0 : 1.2
  target = ($2 <= limit * best) ? "ok" : "MISSED"
  printf "%10d  %10.1f  %10.1f  %10.1f  %9.2f  %9.2f  %s (<= %.1fx)\n", $1, $2, $3, $4, $2 / $3, $2 / $4, target, limit }'
echo "# raw outputs: $out"
