#!/bin/sh
# braid-perf end to end on one rank with the fake NCCL (fake_nccl_one_rank.cc) preloaded:
# every collective, type and op must check clean; corrupted outputs must be reported as wrong
# with exit status 1; --json must write a parsable file.
# usage: perf_fake_smoke.sh BRAID_PERF FAKE_NCCL_LIBRARY WORK_DIR
set -u
perf=$1 fake=$2 work=$3
mkdir -p "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() {  # run NAME ARGS... : output in $work/NAME.out, status in $status
  name=$1; shift
  LD_PRELOAD=$fake "$perf" "$@" >"$work/$name.out" 2>&1
  status=$?
}

expect_clean() {
  name=$1
  [ "$status" -eq 0 ] || fail "$name: exit status $status"
  grep -q "Out of bounds values : 0 OK" "$work/$name.out" || fail "$name: no clean footer"
  grep -q "Avg bus bandwidth" "$work/$name.out" || fail "$name: no bandwidth line"
}

# 1. Every type and op of all-reduce, out of place and in place.
run types_ops -np 1 --memory host -d all -o all -b 0 -e 4K -f 8 -n 2 -w 1
expect_clean types_ops
rows=$(grep -c '^ *[0-9]' "$work/types_ops.out")
# 12 types x 6 ops x sizes 0, 1, 8, 64, 512, 4096 (after 0 comes 1, then the factor)
[ "$rows" -eq 432 ] || fail "types_ops: $rows result rows, expected 432"

# 2. Every collective, with a root.
for coll in allreduce allgather reducescatter broadcast reduce alltoall gather scatter sendrecv; do
  run "coll_$coll" -np 1 --memory host --coll "$coll" -d all -b 1 -e 64K -f 16 -n 1 -w 0 -r 0
  expect_clean "coll_$coll"
done
grep -q ' none ' "$work/coll_broadcast.out" || fail "broadcast rows should show redop none"

# 3. Wrong results are counted, reported and fail the run with status 1.
FAKE_NCCL_CORRUPT=1 run corrupt -np 1 --memory host -b 1K -e 4K -n 1 -w 0
[ "$status" -eq 1 ] || fail "corrupt: exit status $status, expected 1"
grep -q "Out of bounds values : 6 FAILED" "$work/corrupt.out" || fail "corrupt: footer should count 6 failures"
grep -q "wrong elements" "$work/corrupt.out" || fail "corrupt: no mismatch description"

# 4. Checking off: N/A instead of counts, and a clean exit even with corrupt results.
FAKE_NCCL_CORRUPT=1 run nocheck -np 1 --memory host -b 1K -e 1K -n 1 -w 0 -c 0
[ "$status" -eq 0 ] || fail "nocheck: exit status $status"
grep -q "N/A" "$work/nocheck.out" || fail "nocheck: no N/A column"

# 5. An op the library refuses is reported and skipped; the others still run; status 3.
FAKE_NCCL_REFUSE_AVG=1 run refuse -np 1 --memory host -o all -b 8 -e 64 -n 1 -w 0
[ "$status" -eq 3 ] || fail "refuse: exit status $status, expected 3"
grep -q "float avg: not run" "$work/refuse.out" || fail "refuse: no 'not run' line"
grep -q "Series not run       : 1 FAILED" "$work/refuse.out" || fail "refuse: footer should count 1 series"
[ "$(grep -c ' mulsum ' "$work/refuse.out")" -eq 4 ] || fail "refuse: premulsum rows missing after the skipped op"

# 6. JSON report.
rm -f "$work/report.json"
run json -np 1 --memory host -b 8 -e 64 -n 1 -w 0 --json "$work/report.json"
expect_clean json
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r["results"]) == 4, r["results"]; assert r["out_of_bounds"]["okay"] is True' \
    "$work/report.json" || fail "json: report does not parse or is incomplete"
else
  [ -s "$work/report.json" ] || fail "json: no report"
fi

# 7. Bad usage: status 2 and a message.
run usage --memory host -d float128
[ "$status" -eq 2 ] || fail "usage: exit status $status, expected 2"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; outputs in $work"
  exit 1
fi
echo "braid-perf smoke test with the fake NCCL: all checks passed"
