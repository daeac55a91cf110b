#!/usr/bin/env bash
# braid's host-memory all-reduce beside Open MPI's MPI_Allreduce on this machine (issue 3,
# "Measure"): float sum, out of place, 8 B to 64 MB, for 2 and 4 ranks. Prints time and busbw
# of both and the ratio braid/MPI of the times (below 1: braid is faster).
#
#   perf/compare-mpi.sh [--build-dir DIR] [--ranks "2 4"] [-b 8] [-e 64M] [-n 20] [-w 5]
#
# Needs a built braid-perf (it builds one in DIR if there is none) and mpicc/mpirun (it installs
# Debian's openmpi-bin and libopenmpi-dev with apt-get when they are missing and it runs as root).
# Raw outputs are kept in DIR/perf/compare-mpi/. Targets (issue 3): braid at least as fast as
# Open MPI from 1 MB up, and within 2x of it at 8 B; the last column says where they are met.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build_dir=$repo/build
ranks_list="2 4"
min_bytes=8
max_bytes=64M
iters=20
warmup=5

die() { echo "compare-mpi: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    -b) min_bytes=$2; shift 2 ;;
    -e) max_bytes=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# Sizes as plain bytes for the MPI benchmark (braid-perf reads the suffixes itself).
to_bytes() {
  local v=$1
  case $v in
    *[kK]) echo $(( ${v%[kK]} * 1024 )) ;;
    *[mM]) echo $(( ${v%[mM]} * 1024 * 1024 )) ;;
    *[gG]) echo $(( ${v%[gG]} * 1024 * 1024 * 1024 )) ;;
    *) echo "$v" ;;
  esac
}
min_b=$(to_bytes "$min_bytes")
max_b=$(to_bytes "$max_bytes")

# ---- Open MPI ---------------------------------------------------------------------------------
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  [ "$(id -u)" -eq 0 ] || die "mpicc/mpirun missing; install openmpi-bin and libopenmpi-dev (needs root)"
  echo "compare-mpi: installing Open MPI (openmpi-bin libopenmpi-dev)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >&2
fi

out_dir=$build_dir/perf/compare-mpi
mkdir -p "$out_dir"
bench=$out_dir/mpi_allreduce_bench
mpicc -O2 -Wall -Wextra -o "$bench" "$here/mpi_allreduce_bench.c"

# ---- braid-perf -------------------------------------------------------------------------------
braid_perf=$build_dir/perf/braid-perf
if [ ! -x "$braid_perf" ]; then
  echo "compare-mpi: building braid-perf in $build_dir" >&2
  cmake -S "$repo" -B "$build_dir" -G Ninja >&2
  cmake --build "$build_dir" --target braid-perf -j 2 >&2
fi

# Root is allowed (CI containers run as root); 4 ranks on 2 cores need --oversubscribe.
# Unbound, like braid-perf's ranks, so that neither side gets pinned cores the other lacks.
mpirun_args=(--allow-run-as-root --oversubscribe --bind-to none)

run_mpi() {  # run_mpi NRANKS OUTFILE
  if mpirun "${mpirun_args[@]}" -np "$1" "$bench" -b "$min_b" -e "$max_b" -f 2 -n "$iters" -w "$warmup" >"$2" 2>&1; then
    return 0
  fi
  # Containers often forbid the cross-memory attach that Open MPI's shared-memory transport
  # uses for large messages; retry with its copy-in/copy-out path, and say so.
  echo "compare-mpi: mpirun failed (see $2); retrying with btl_vader_single_copy_mechanism=none" >&2
  mpirun "${mpirun_args[@]}" --mca btl_vader_single_copy_mechanism none -np "$1" "$bench" \
    -b "$min_b" -e "$max_b" -f 2 -n "$iters" -w "$warmup" >"$2" 2>&1 || die "MPI benchmark failed: $(tail -5 "$2")"
  echo "# note: Open MPI ran with btl_vader_single_copy_mechanism=none" >>"$2"
}

run_braid() {  # run_braid NRANKS OUTFILE
  "$braid_perf" -np "$1" --memory host --coll allreduce -d float -o sum -b "$min_bytes" -e "$max_bytes" -f 2 \
    -n "$iters" -w "$warmup" -c 1 >"$2" 2>&1 || die "braid-perf failed: $(tail -5 "$2")"
}

# Rows of both tables: "size time busbw" from the out-of-place columns.
rows() { awk '/^ *[0-9]/ { print $1, $6, $8 }' "$1"; }

printf '# compare-mpi: %s, %s, %s cores; all-reduce float sum, out of place; time in us, busbw in GB/s\n' \
  "$(date '+%Y-%m-%d %H:%M')" "$(hostname)" "$(nproc)"
printf '# %5s  %10s  %10s  %8s  %10s  %8s  %11s  %s\n' ranks size mpi_time mpi_busbw braid_time braid_bw \
  "braid/mpi" target
for n in $ranks_list; do
  mpi_out=$out_dir/mpi_np$n.txt
  braid_out=$out_dir/braid_np$n.txt
  run_mpi "$n" "$mpi_out"
  run_braid "$n" "$braid_out"
  join <(rows "$mpi_out" | sort -k1,1) <(rows "$braid_out" | sort -k1,1) | sort -n -k1,1 |
    awk -v n="$n" '{
      size = $1; ratio = ($2 > 0) ? $4 / $2 : 0
      target = "-"
      if (size >= 1048576) target = (ratio <= 1.0) ? "ok (<=1)" : "MISSED (<=1)"
      else if (size == 8) target = (ratio <= 2.0) ? "ok (<=2)" : "MISSED (<=2)"
      printf "  %5d  %10d  %10.2f  %8.2f  %10.2f  %8.2f  %11.2f  %s\n", n, size, $2, $3, $4, $5, ratio, target
    }'
done
echo "# raw outputs: $out_dir"
