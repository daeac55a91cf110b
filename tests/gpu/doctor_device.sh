#!/usr/bin/env bash
# braid-doctor on a GPU machine (issue 18's GPU tests), for tests/gpu/run.sh's `doctor` section:
#   tests/gpu/doctor_device.sh BUILD_DIR OUT_DIR
# 1. The full run (--json, --plot) ends within 60 s with exit 0 or 1 (warnings are the
#    machine's; 2 is an error of the doctor or the machine), and its report is printed.
# 2. Its D2D copy is within 15% of a plain cudaMemcpy measured beside it (CuPy, 256 MiB,
#    best of 20); H2D from pinned memory beats pageable; the IPC and storage parts ran (the
#    storage mode is named); the braid and NCCL all-reduce rows are both there.
# Lines "SUMMARY <check> PASS|FAIL ..." for run.sh's table.
set -u
build=$1 out=${2:-$(mktemp -d)}
mkdir -p "$out"
doctor="$build/tools/braid-doctor/braid-doctor"
[ -x "$doctor" ] || { echo "SUMMARY doctor FAIL (no $doctor)"; exit 1; }
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 90 "$doctor" --json "$out/doctor.json" --plot "$out/doctor.png" > "$out/doctor.txt" 2>&1
rc=$?
cat "$out/doctor.txt"
took=$((SECONDS - t0))
if [ "$rc" -le 1 ] && [ "$took" -le 60 ]; then echo "SUMMARY doctor run PASS (exit $rc, ${took}s)"
else echo "SUMMARY doctor run FAIL (exit $rc, ${took}s)"; fi
python3 - "$out/doctor.json" <<'PY'
failed = 0
import json, sys
d = json.load(open(sys.argv[1]))
figs = d.get("figures", [])
def find(pred):
    return [f for f in figs if pred(f)]
def say(name, ok, detail):
    global failed
    failed += 0 if ok else 1
    print("SUMMARY doctor %s %s (%s)" % (name, "PASS" if ok else "FAIL", detail))
# A plain cudaMemcpy beside the doctor's D2D: 256 MiB device to device, best of 20.
try:
    import cupy as cp
    n = 256 << 20
    a = cp.empty(n, dtype=cp.uint8); b = cp.empty(n, dtype=cp.uint8)
    s = cp.cuda.Stream(non_blocking=True)
    best = 0.0
    for i in range(22):
        e0 = cp.cuda.Event(); e1 = cp.cuda.Event()
        e0.record(s); cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, n, 3, s.ptr); e1.record(s); e1.synchronize()
        ms = cp.cuda.get_elapsed_time(e0, e1)
        if i >= 2: best = max(best, n / (ms * 1e-3) / 1e9)
    d2d = find(lambda f: "D2D" in f["path"])
    if d2d:
        mine = max(f["best"] for f in d2d)
        ratio = mine / best
        say("D2D vs cudaMemcpy", 0.85 <= ratio <= 1.15, "doctor %.0f GB/s, cudaMemcpy %.0f GB/s, ratio %.2f (%s)" % (mine, best, ratio, d2d[0]["unit"]))
    else:
        say("D2D vs cudaMemcpy", False, "no D2D figure")
except Exception as e:
    say("D2D vs cudaMemcpy", False, "cupy: %s" % e)
pinned = find(lambda f: "H2D" in f["path"] and "pinned" in f["path"])
pageable = find(lambda f: "H2D" in f["path"] and "pageable" in f["path"])
if pinned and pageable:
    say("H2D pinned beats pageable", pinned[0]["best"] > pageable[0]["best"], "%.1f vs %.1f %s" % (pinned[0]["best"], pageable[0]["best"], pinned[0]["unit"]))
else:
    say("H2D pinned beats pageable", False, "figures missing")
ipc = find(lambda f: f["section"] == "ipc")
say("IPC ran", len(ipc) > 0, "; ".join("%s %.3g %s" % (f["path"], f["best"], f["unit"]) for f in ipc) or "no ipc figure")
st = find(lambda f: f["section"] == "storage")
say("storage ran", len(st) > 0, "; ".join("%s %.3g %s: %s" % (f["path"], f["best"], f["unit"], f.get("verdict", "")) for f in st)[:400] or "no storage figure")
coll = find(lambda f: f["section"] == "collectives")
names = [f["path"] for f in coll]
say("braid and NCCL rows", any("braid" in p for p in names) and any("NCCL" in p for p in names), ", ".join(names) or "none")
for s in d.get("skipped", []):
    print("skipped: %s: %s" % (s["part"], s["reason"]))
sys.exit(1 if failed else 0)
PY
prc=$?
[ "$rc" -le 1 ] && [ "$took" -le 60 ] && [ "$prc" -eq 0 ]
