#!/usr/bin/env python3
"""Tables from perf/nccl_tests_mps.sh's logs: per collective and rank count, the out-of-place
time (us) of each run beside the others, size by size, and the tuner's time over the best forced
protocol's.
    perf/nccl_tests_table.py LOG_DIR [COLL ...]"""
import os
import re
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(\S+)")


def read(path):
    rows = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                rows[int(m.group(1))] = (float(m.group(3)), m.group(4))
    return rows


def main():
    logs = sys.argv[1]
    runs = {}
    for name in sorted(os.listdir(logs)):
        m = re.match(r"(\w+?)-np(\d+)-(.+)\.log$", name)
        if m:
            runs.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = read(os.path.join(logs, name))
    wanted = sys.argv[2:]
    for (coll, np), by in sorted(runs.items()):
        if wanted and coll not in wanted:
            continue
        labels = [l for l in ["tuner", "LL", "LL128", "Simple", "braid", "nccl"] if l in by] + \
                 sorted(l for l in by if l not in ("tuner", "LL", "LL128", "Simple", "braid", "nccl"))
        sizes = sorted({s for l in labels for s in by[l]})
        if not sizes:
            continue
        print(f"\n{coll}, {np} rank{'s' if np > 1 else ''}, out-of-place us" +
              (" (tuner / best of LL, LL128, Simple)" if "tuner" in by else ""))
        print("| bytes | " + " | ".join(labels) + (" | tuner/best |" if "tuner" in by else " |"))
        print("|---:" * (len(labels) + 1 + ("tuner" in by)) + "|")
        for s in sizes:
            cells, wrong = [], []
            for l in labels:
                v = by[l].get(s)
                cells.append(f"{v[0]:.2f}" if v else "-")
                if v and v[1] not in ("0", "N/A"):
                    wrong.append(f"{l}:{v[1]} wrong")
            line = f"| {s} | " + " | ".join(cells)
            if "tuner" in by:
                forced = [by[p][s][0] for p in ("LL", "LL128", "Simple") if p in by and s in by[p]]
                t = by["tuner"].get(s)
                line += f" | {t[0] / min(forced):.2f}" if t and forced else " | -"
            print(line + " |" + (" " + ", ".join(wrong) if wrong else ""))


main()
