#!/usr/bin/env bash
# The table of docs/baseline.md "Judged against it (the chip model's bounds)": each in-network
# kind's lower bound over the best host-only kind's, and the planner's pick, from `switchgnn
# analyze` on six shipped graphs at one layer of width 128, on a Tofino 1 (8 and 32 workers), a
# Tofino 2 with internal ports only and with 96 ports looped (32), and the ideal switch (32).
# Printed as the doc's markdown rows.
#
#   bash scripts/judged-table.sh [WORK_DIR]     # release build; a few minutes of analysis
#
# Needs ../shared/datasets.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --release -q --manifest-path "$root/Cargo.toml"
exec python3 - "$root" "${1:-}" <<'PY'
import json, os, subprocess, sys, tempfile
root, work = sys.argv[1], sys.argv[2] or tempfile.mkdtemp()
os.makedirs(work, exist_ok=True)
binary = os.path.join(root, "target", "release", "switchgnn")
data = os.path.join(root, "..", "shared", "datasets")
graphs = [("Cora", "cora.npz"), ("Amazon-Computers", "amazon-computers.npz"),
          ("Coauthor-CS", "coauthor-cs.npz"), ("Amazon-Photo", "amazon-photo.npz"),
          ("Tolokers", "yandex/tolokers.npz"), ("Squirrel", "yandex/squirrel.npz")]
columns = [("tofino1-32", 8, 0), ("tofino1-32", 32, 0), ("tofino2", 32, 0), ("tofino2", 32, 96),
           ("ideal", 32, 0)]

def analyze(path, chip, workers, looped):
    """One analysis (cached in the work folder): its JSON row."""
    out = os.path.join(work, f"{os.path.basename(path)}-{chip}-{workers}-{looped}.json")
    if not os.path.exists(out):
        args = [binary, "analyze", os.path.join(data, path), "--workers", str(workers),
                "--width", "128", "--chip", chip, "--json"]
        if chip != "ideal":
            args += ["--loopback-ports", str(looped)]
        with open(out, "w") as f:
            subprocess.run(args, check=True, stdout=f, stderr=subprocess.DEVNULL)
    return json.load(open(out))[0]

def ratio(verdict):
    return verdict["in_network"]["seconds"] / verdict["host_exchange"]["seconds"]

def fmt(x):
    return f"{x:.3g}"

print("| graph | tofino1-32, 8 workers: switchgnn / reduce / pick | tofino1-32, 32: switchgnn / "
      "reduce / pick | tofino2, 32: switchgnn / reduce / pick | tofino2, 96 ports looped, 32: "
      "switchgnn / pick | ideal, 32: switchgnn / reduce / pick |")
print("|---|---|---|---|---|---|")
for name, path in graphs:
    cells = []
    for chip, workers, looped in columns:
        r = analyze(path, chip, workers, looped)
        if r["best_host_only"]["kind"] != "host-hybrid":
            print(f"note: {name}, {chip} {workers}: the best host-only kind is "
                  f"{r['best_host_only']['kind']}", file=sys.stderr)
        sg, red, pick = fmt(ratio(r["verdict"])), fmt(ratio(r["reduce"])), r["pick"]["kind"]
        cells.append(f"{sg} / {pick}" if looped else f"{sg} / {red} / {pick}")
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
