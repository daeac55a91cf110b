#!/bin/sh
# braid-perf over braid itself on host memory, end to end: ranks as threads of one process and as
# processes, every result checked, --json and --plot written; bad flags and an unwritable plot
# give the documented exit statuses. A few seconds on 2 cores.
# usage: perf_threads_e2e.sh BRAID_PERF WORK_DIR
set -u
perf=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() {  # run NAME ARGS...: stdout in $work/NAME.out, stderr in $work/NAME.err, status in $status
  name=$1; shift
  "$perf" "$@" >"$work/$name.out" 2>"$work/$name.err"
  status=$?
}

# Every result row checked with #wrong 0 out of place ($9) and in place ($13); $2 rows expected.
expect_rows_right() {
  rows=$(awk '/^ *[0-9]/ { n++; if ($9 != "0" || $13 != "0") bad++ } END { print n + 0, bad + 0 }' "$work/$1.out")
  [ "$rows" = "$2 0" ] || fail "$1: rows and wrong rows '$rows', expected '$2 0'"
  grep -q "Out of bounds values : 0 OK" "$work/$1.out" || fail "$1: no clean footer"
}

# A PNG: signature, then IHDR with the width of two 640-pixel panels and height 420.
expect_png() {
  [ -s "$1" ] || { fail "$1: no plot"; return; }
  sig=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
  [ "$sig" = "89504e470d0a1a0a" ] || fail "$1: PNG signature '$sig'"
  ihdr=$(od -An -tx1 -j12 -N12 "$1" | tr -d ' \n')
  [ "$ihdr" = "4948445200000500000001a4" ] || fail "$1: IHDR type/width/height '$ihdr', expected 1280x420"
}

show() { for f in "$work/$1.out" "$work/$1.err"; do echo "--- $f"; tail -n 20 "$f"; done; }

# 1. Threads on host memory (host-only ranks of one process), with the JSON report and a plot.
run threads --ranks threads --memory host -np 3 -b 8 -e 64K -c 1 -n 2 -w 1 -T 120 \
    --json "$work/threads.json" --plot "$work/threads.png"
[ "$status" -eq 0 ] || { fail "threads: exit status $status"; show threads; }
expect_rows_right threads 14
grep -q "^# ranks: 3 threads of one process, host memory$" "$work/threads.out" || fail "threads: no ranks line"
grep -q "^# nThread 3 nGpus 1 " "$work/threads.out" || fail "threads: parameters line should say nThread 3"
[ "$(grep -c '^#  Rank ' "$work/threads.out")" -eq 3 ] || fail "threads: expected 3 'Rank' lines"
grep -q '"ranks_as": "threads"' "$work/threads.json" || fail "threads: JSON has no ranks_as threads"
grep -q '"library": "braid"' "$work/threads.json" || fail "threads: JSON should name the library braid"
expect_png "$work/threads.png"

# 2. Processes, drawing the threads run beside (--plot-compare).
run processes --ranks processes --memory host -np 2 -b 8 -e 64K -c 1 -n 2 -w 1 -T 120 \
    --json "$work/processes.json" --plot "$work/processes.png" --plot-compare "$work/threads.json"
[ "$status" -eq 0 ] || { fail "processes: exit status $status"; show processes; }
expect_rows_right processes 14
grep -q "^# ranks: 2 processes, host memory$" "$work/processes.out" || fail "processes: no ranks line"
grep -q "^# nThread 1 nGpus 1 " "$work/processes.out" || fail "processes: parameters line should say nThread 1"
grep -q '"ranks_as": "processes"' "$work/processes.json" || fail "processes: JSON has no ranks_as processes"
grep -q "WARNING" "$work/processes.out" && fail "processes: host memory shares no GPU, yet a warning"
expect_png "$work/processes.png"

# 3. Without --ranks on host memory: processes, as before.
run default --memory host -np 2 -b 8 -e 1K -n 1 -w 0 -T 120
[ "$status" -eq 0 ] || { fail "default: exit status $status"; show default; }
grep -q "^# ranks: 2 processes, host memory$" "$work/default.out" || fail "default: host memory should be processes"

# 4. A plot that cannot be written: status 3 after the table, with the reason.
run badplot --ranks threads --memory host -np 2 -b 8 -e 64 -n 1 -w 0 -T 120 --plot "$work/no-such-dir/p.png"
[ "$status" -eq 3 ] || fail "badplot: exit status $status, expected 3"
grep -q "Out of bounds values : 0 OK" "$work/badplot.out" || fail "badplot: the table should still be printed"
grep -q -- "--plot: cannot create $work/no-such-dir/p.png: No such file or directory" "$work/badplot.err" ||
  { fail "badplot: no reason on stderr"; show badplot; }

# 5. Bad usage is status 2, before any rank starts.
run badranks --ranks fibers
[ "$status" -eq 2 ] || fail "badranks: exit status $status, expected 2"
grep -q "ranks wants threads or processes" "$work/badranks.err" || fail "badranks: no message"
run badcompare --memory host --plot "$work/x.png" --plot-compare "$work/missing.json"
[ "$status" -eq 2 ] || fail "badcompare: exit status $status, expected 2"
grep -q "cannot open $work/missing.json" "$work/badcompare.err" || fail "badcompare: no message"
BRAID_LAUNCH_RANK=0 BRAID_LAUNCH_NRANKS=1 "$perf" --ranks threads >"$work/asrank.out" 2>"$work/asrank.err"
status=$?
[ "$status" -eq 2 ] || fail "asrank: exit status $status, expected 2"
grep -q "already makes this process one rank" "$work/asrank.err" || fail "asrank: no message"

if [ "$failures" -eq 0 ]; then
  echo "perf_threads_e2e: all passed"
  rm -rf "$work"
  exit 0
fi
echo "perf_threads_e2e: $failures failure(s); outputs kept in $work"
exit 1
