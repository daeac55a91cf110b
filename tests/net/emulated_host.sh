#!/usr/bin/env bash
# Runs a rank program as if on a host of its own: ranks r / PER (EMULATED_RANKS_PER_HOST,
# default 1) share one, named by BRAID_HOSTID and NCCL_HOSTID (the real NCCL's equivalent), so
# that braid (and NCCL) treat the others as other hosts while all run on this machine. The rank
# comes from braid-launch (BRAID_LAUNCH_RANK) or Open MPI (OMPI_COMM_WORLD_RANK).
#   emulated_host.sh PROGRAM ARGS...
# Meant for loopback (NCCL_SOCKET_IFNAME=lo, UCX_TLS=tcp, UCX_NET_DEVICES=lo): no root needed,
# unlike netns_lib.sh, but nothing keeps the "hosts" from meeting through shared memory, so the
# rank programs' transports decide alone what crosses the "network".
set -u
per="${EMULATED_RANKS_PER_HOST:-1}"
rank="${BRAID_LAUNCH_RANK:-${OMPI_COMM_WORLD_RANK:-}}"
if [ -z "$rank" ] || [ "$per" -lt 1 ] 2>/dev/null; then
  echo "emulated_host.sh: no rank (BRAID_LAUNCH_RANK or OMPI_COMM_WORLD_RANK) or a bad EMULATED_RANKS_PER_HOST=$per" >&2
  exit 2
fi
host="emulated-host-$((rank / per))"
export BRAID_HOSTID="$host" NCCL_HOSTID="$host"
exec "$@"
