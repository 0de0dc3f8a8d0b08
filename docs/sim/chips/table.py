#!/usr/bin/env python3
"""The README's table from run.sh's outputs: each kind's time per epoch over the best host-only
kind's, on the real chip and on the ideal switch. Usage: table.py OUT_DIR (run.sh's $OUT)."""
import collections
import csv
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/sims-chips"
graphs = [("cora", "Cora"), ("amazon-computers", "Amazon-Computers"), ("tolokers", "Tolokers"),
          ("reddit-like-quarter", "reddit-like at ¼ scale")]
print("| graph | workers | chip | best host-only: kind, ms (bound) | switchgnn ÷ it (bound by) "
      "| reduce ÷ it | pick ÷ it (kinds picked) |")
print("|---|---|---|---|---|---|---|")
for name, label in graphs:
    for chip in ["ideal", "real"]:
        base = f"{out}/{name}-{chip}"
        rows = {}
        for line in open(f"{base}.txt"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 10 or not cells[0].isdigit():
                continue
            rows[(int(cells[0]), cells[3])] = cells
        bound_by = collections.defaultdict(collections.Counter)
        picked = collections.defaultdict(set)
        for r in csv.DictReader(open(f"{base}/runs.csv")):
            bound_by[(int(r["workers"]), r["mode"])][r["bound_by"]] += int(r["bound_ns"])
            if r["mode"] == "auto":
                picked[int(r["workers"])].add(r["kind"])
        for workers in sorted({w for w, _ in rows}):
            best = rows[(workers, "host")][7]
            b = rows[(workers, best)]
            by = bound_by[(workers, "switchgnn")].most_common(1)[0][0]
            pick = rows[(workers, "auto")]
            print(f"| {label} | {workers} | {b[1]} | {best}, {b[4]} ({b[5]}) "
                  f"| {rows[(workers, 'switchgnn')][8]} ({by}) | {rows[(workers, 'reduce')][8]} "
                  f"| {pick[8]} ({', '.join(sorted(picked[workers]))}) |")
