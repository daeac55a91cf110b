#!/usr/bin/env bash
# Issue 6: braid against NCCL on one host with several GPUs.
#   perf/multigpu.sh BUILD_DIR [tests|perf|all]   (on the GPU machine; the build is carried)
# A device call runs 10 minutes at most, and the tests alone take about 5: give `tests` one
# call and `perf` (steps 2 and 3) the next; `all` (the default) runs the three in turn.
# 1. tests/gpu/run.sh with every GPU (correctness against the float64 reference and NCCL)
# 2. braid-perf over braid and over the real NCCL (same program, same inputs; results unchecked
#    unless CHECK=1: the host reference of 4 GB outputs takes minutes), one rank per
#    GPU: all-reduce, all-gather, reduce-scatter, broadcast, sendrecv, 8 B to 2 GB by factors
#    of 4 and 4 GB, and the ratio braid/NCCL per size
# 3. nvidia-smi topo -m beside braid-topo's matrix; NCCL's topology dump beside braid's
# Everything lands in $OUT (or a temporary folder) and a summary is printed last.
set -u
export NCCL_NVLS_ENABLE=0   # never NVLink multicast
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
part="${2:-all}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)
echo "=== $(date -u +%F) $(nvidia-smi -L 2>/dev/null | head -1) x $ngpus"
if [ "$ngpus" -lt 2 ]; then echo "needs at least 2 GPUs (found $ngpus): only the single-GPU parts run"; fi

# The real NCCL: the toolkit's, or the PyTorch wheel's (nvidia.nccl is a namespace package).
real=""
wheel="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
for cand in /usr/local/cuda/lib/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 ${wheel:+"$wheel/lib/libnccl.so.2"}; do
  [ -e "$cand" ] && { real="$cand"; break; }
done
echo "real NCCL: ${real:-not found}"

# 1. Correctness on all GPUs.
if [ "$part" = tests ] || [ "$part" = all ]; then
  BUDGET="${BUDGET:-560}" "$repo/tests/gpu/run.sh" "$build" > "$out/gpu-run.log" 2>&1
  echo "tests/gpu/run.sh exit $?"; sed -n '/^=== key numbers/,$p' "$out/gpu-run.log"
fi
[ "$part" = tests ] && exit 0

# 2. Side by side.
np=$(( ngpus > 0 ? ngpus : 1 ))
perf="$build/perf/braid-perf"
table="$out/multigpu-perf.txt"
: > "$table"
# 8 B..2 GB by factors of 4, then 4 GB (the next factor of 4 would pass it); one output file.
sweep() {  # sweep LIBRARY_DIR OUTPUT
  local range rc=0
  : > "$2"
  for range in "-b 8 -e 2G" "-b 4G -e 4G"; do
    # shellcheck disable=SC2086  # the range is two flags
    LD_LIBRARY_PATH="$1" timeout "${LIMIT_PERF:-90}" "$perf" --coll "$coll" -np "$np" --memory device $range -f 4 \
      -w 5 -n 20 -c "${CHECK:-0}" >> "$2" 2>&1 || rc=$?
  done
  return $rc
}
for coll in allreduce allgather reducescatter broadcast sendrecv; do
  t0=$SECONDS
  sweep "$build" "$out/braid-$coll.txt"
  echo "braid $coll: exit $? in $((SECONDS - t0)) s; $(grep -E 'Out of bounds|Avg bus' "$out/braid-$coll.txt" | tr -s ' ' | paste -sd ';' -)"
  if [ -n "$real" ]; then
    t0=$SECONDS
    sweep "$(dirname "$real")" "$out/nccl-$coll.txt"
    echo "nccl  $coll: exit $? in $((SECONDS - t0)) s; $(grep -E 'Out of bounds|Avg bus' "$out/nccl-$coll.txt" | tr -s ' ' | paste -sd ';' -)"
  fi
  # size, braid time, NCCL time, braid busbw, NCCL busbw, ratio of times (out-of-place columns)
  awk -v coll="$coll" 'FNR==NR && $1 ~ /^[0-9]+$/ {b[$1]=$6; bb[$1]=$8; next}
       $1 ~ /^[0-9]+$/ && ($1 in b) {printf "%-14s %12s %10s %10s %8s %8s %6.2f\n", coll, $1, b[$1], $6, bb[$1], $8, (b[$1]>0?$6/b[$1]:0)}' \
      "$out/braid-$coll.txt" "$out/nccl-$coll.txt" 2>/dev/null >> "$table"
done

# 3. Topology views.
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
"$build/tools/braid-topo/braid-topo" --ranks "$np" --dump "$out/braid-topo.xml" > "$out/braid-topo.txt" 2>&1
if [ -n "$real" ]; then
  NCCL_TOPO_DUMP_FILE="$out/nccl-topo.xml" LD_LIBRARY_PATH="$(dirname "$real")" timeout 120 "$perf" -np "$np" \
    --memory device -b 8 -e 8 -n 1 -w 0 > /dev/null 2>&1
fi

echo "=== nvidia-smi topo -m";  cat "$out/nvidia-smi-topo.txt"
echo "=== braid-topo";          head -40 "$out/braid-topo.txt"
echo "=== braid vs NCCL (out of place): coll, bytes, braid us, NCCL us, braid busbw, NCCL busbw, NCCL/braid speed"
cat "$table"
