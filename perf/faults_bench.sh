#!/usr/bin/env bash
# How fast braid's ranks learn of a death, and what aborting costs (issue 12's measurements):
#   perf/faults_bench.sh [BUILD_DIR] [RUNS] [--memory device]
# RUNS times (default 100): a random collective among 4 or 8 ranks, a random victim killed a
# random 0-20 ms into the loop; the time from its death until the last survivor's call has
# failed naming it. Then the abort-from-another-thread rounds (worst abort and worst return of
# the blocked call). Prints the distribution; exits 1 if any run missed the 5 s target.
set -u
build="${1:-build}"; runs="${2:-100}"; shift $(( $# > 2 ? 2 : $# ))
launch="$build/tests/launcher/braid-launch"; prog="$build/tests/mp/faults_rank"
colls=(allreduce allgather reducescatter broadcast reduce alltoall gather scatter sendrecv)
tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
times=(); bad=0
for ((i = 0; i < runs; i++)); do
  n=$(( (RANDOM % 2) ? 8 : 4 )); victim=$(( RANDOM % n )); delay=$(( RANDOM % 20000 ))
  coll=${colls[$(( RANDOM % ${#colls[@]} ))]}
  "$launch" -np "$n" -t 60 -- "$prog" die "$coll" "$victim" "$delay" "$@" >"$tmp" 2>&1
  death=$(grep -m1 -oE 'DEATH [0-9]+' "$tmp" | awk '{print $2}')
  learned=$(grep -oE 'LEARNED [0-9]+' "$tmp" | awk '{print $2}' | sort -n | tail -1)
  survivors=$(grep -c 'LEARNED' "$tmp")
  if [ -z "$death" ] || [ -z "$learned" ] || [ "$survivors" -ne $((n - 1)) ]; then
    bad=$((bad + 1)); echo "run $i ($coll, $n ranks, rank $victim after $delay us): incomplete"; tail -5 "$tmp"; continue
  fi
  us=$(( (learned - death) / 1000 ))
  [ "$us" -gt 5000000 ] && bad=$((bad + 1))
  times+=("$us")
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
k=${#sorted[@]}
if [ "$k" -gt 0 ]; then
  echo "death known by every survivor, ${k} runs (us): median ${sorted[$((k / 2))]}, p90 ${sorted[$((k * 9 / 10))]}, worst ${sorted[$((k - 1))]}"
fi
for point in collective connect group; do
  "$launch" -np 2 -t 120 -- "$prog" abort-thread "$point" 100 "$@" 2>&1 | grep -m1 'SUMMARY' | sed 's/^\[rank 0\] //'
done
echo "runs that missed or did not complete: $bad"
[ "$bad" -eq 0 ]
