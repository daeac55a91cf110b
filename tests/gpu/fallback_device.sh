#!/usr/bin/env bash
# BRAID_BACKEND=nccl on a GPU (issue 14), for tests/gpu/run.sh's `fallback` section:
#   tests/gpu/fallback_device.sh BUILD_DIR REAL_LIBNCCL
# braid-perf, 1 rank on GPU 0, 8-byte all-reduce (20000 iterations after 1000 warm-up, checked),
# three ways in one run: braid; BRAID_BACKEND=nccl (braid-perf still bound to braid, every call
# forwarded); the real NCCL directly (LD_LIBRARY_PATH, as perf/README.md says). Passes when all
# three give right results and the forwarded run logged that the real NCCL served it; prints the
# time per call of each (the forwarder's cost is the 2nd minus the 3rd; bound: 0.2 us).
set -u
build=$1 real=$2
perf="$build/perf/braid-perf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NCCL_NVLS_ENABLE=0
args=(-np 1 --memory device -b 8 -e 8 -n 20000 -w 1000 -c 1)
fails=0
one() {  # LABEL ENV... -- (runs braid-perf with args, JSON to $work/LABEL.json)
  local label=$1; shift
  env "$@" timeout 60 "$perf" "${args[@]}" --json "$work/$label.json" > "$work/$label.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || { echo "SUMMARY fallback $label FAIL (exit $rc)"; tail -20 "$work/$label.log"; fails=$((fails + 1)); }
}
for round in 1 2; do
  one "braid$round" BRAID_BACKEND=braid
  one "forwarded$round" BRAID_BACKEND=nccl BRAID_NCCL_LIBRARY="$real" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
  one "real$round" LD_LIBRARY_PATH="$(dirname "$real")"
done
if grep -q "BRAID_BACKEND=nccl: every call goes to the real NCCL" "$work/forwarded1.log"; then
  echo "SUMMARY fallback forwarded-to-real PASS"
else
  echo "SUMMARY fallback forwarded-to-real FAIL (no INFO line saying so)"; fails=$((fails + 1))
fi
python3 - "$work" <<'PY'
import json, sys, os
w = sys.argv[1]
def t(label):
    try:
        r = json.load(open(os.path.join(w, label + ".json")))["results"][0]
        return r["out_of_place"]["time"], r["in_place"]["time"], r["out_of_place"]["nwrong"] + r["in_place"]["nwrong"]
    except Exception as e:
        return None
for rnd in (1, 2):
    row = {k: t(k + str(rnd)) for k in ("braid", "forwarded", "real")}
    if any(v is None for v in row.values()):
        print("SUMMARY fallback times round %d FAIL (a run left no report)" % rnd); continue
    wrong = sum(v[2] for v in row.values())
    print("SUMMARY fallback 8B us/call round %d: braid %.2f/%.2f, forwarded %.2f/%.2f, real %.2f/%.2f (out/in place); forwarding adds %.2f us; wrong %d"
          % (rnd, row["braid"][0], row["braid"][1], row["forwarded"][0], row["forwarded"][1], row["real"][0], row["real"][1],
             (row["forwarded"][0] + row["forwarded"][1] - row["real"][0] - row["real"][1]) / 2, wrong))
PY
[ "$fails" -eq 0 ]
