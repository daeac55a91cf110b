#!/usr/bin/env bash
# One sanitizer tree: configure it (host-only library, -O1 -g1), build what its label runs, and
# run `ctest -L <label>`. tests/run.sh (CI) runs both after the normal build.
#   tests/sanitize/run.sh asan [BUILD_DIR]   ASan+UBSan+LeakSanitizer: unit and multi-process tests
#   tests/sanitize/run.sh tsan [BUILD_DIR]   TSan: the CPU engine's tests (mp, api, core)
# BUILD_DIR defaults to build-asan / build-tsan. Reports go to files in BUILD_DIR/sanitizer-reports
# and any report fails the run, also one from a process whose exit status no test checks (a rank
# expected to fail, a straggler the launcher kills); the script prints them at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
kind=${1:-}
case $kind in
  asan) sanitize=address,undefined targets=all ;;  # the asan label spans every unit test folder
  tsan) sanitize=thread targets=tests-tsan ;;       # only the test programs labelled tsan
  *) echo "usage: tests/sanitize/run.sh asan|tsan [BUILD_DIR]" >&2; exit 2 ;;
esac
build=${2:-build-$kind}
here=$PWD/tests/sanitize

# -O1: a third of -O3's compile time under the sanitizers, as ASan recommends; -g1: file:line in
# the reports' stacks; asserts stay on.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DBRAID_ENABLE_CUDA=OFF -DBRAID_SANITIZE=$sanitize
cmake --build "$build" -j"$(nproc)" --target $targets

reports=$(cd "$build" && pwd)/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
# protect_shadow_gap=0: on a machine with a GPU the CUDA driver maps memory where ASan's shadow
# gap lies (the static CUDA runtime is still linked); without a driver it changes nothing.
export ASAN_OPTIONS="log_path=$reports/asan:detect_stack_use_after_return=1:strict_string_checks=1:protect_shadow_gap=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="log_path=$reports/tsan:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
status=0
ctest --test-dir "$build" -L "^$kind\$" --output-on-failure -j"$(nproc)" --timeout 900 || status=$?

found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
  for f in $found; do
    echo "==== $f"
    cat "$f"
  done
  echo "FAIL: $(echo "$found" | wc -l) sanitizer report(s) in $reports (file names end in the process id)" >&2
  status=1
fi
exit $status
