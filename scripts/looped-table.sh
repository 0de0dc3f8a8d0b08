#!/usr/bin/env bash
# The looped-ports table of docs/baseline.md ("Looped ports: the whole chip"): every shipped
# graph simulated at 32 workers on a tofino2 and at 8 on a tofino1-32, idle ports looped, with
# the planner's pick, SwitchGNN, reduce, the hybrid and the best host-only kind side by side;
# printed as the doc's markdown rows (ratios against the best host-only kind of the same run).
#
#   bash scripts/looped-table.sh [WORK_DIR]     # release build; under a minute of simulation
#
# Needs ../shared/datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
cargo build --release -q
python3 - "$work" target/release/switchgnn ../shared/datasets <<'PY'
import csv, os, subprocess, sys
work, binary, data = sys.argv[1:]
graphs = [("Cora", "cora.npz"), ("CiteSeer", "citeseer.npz"),
          ("Amazon-Computers", "amazon-computers.npz"), ("Amazon-Photo", "amazon-photo.npz"),
          ("Coauthor-CS", "coauthor-cs.npz"), ("Facebook", "musae/facebook"),
          ("Actor", "yandex/actor.npz"), ("Chameleon", "yandex/chameleon.npz"),
          ("Minesweeper", "yandex/minesweeper.npz"), ("Squirrel", "yandex/squirrel.npz"),
          ("Tolokers", "yandex/tolokers.npz")]

def run(path, workers, chip, out):
    """One simulation (cached in `out`): the ratios of the table's columns."""
    if not os.path.exists(os.path.join(out, "runs.csv")):
        subprocess.run([binary, "simulate", os.path.join(data, path), "--workers", str(workers),
                        "--chip", chip, "--loopback-ports", "spare", "--switch-memory", "100MB",
                        "--feature-dims", "128", "--modes",
                        "best-host,auto,switchgnn,reduce,hybrid", "--result-timeout-us", "5000",
                        "--jobs", "1", "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
    rows = {r["mode"]: r for r in csv.DictReader(open(os.path.join(out, "runs.csv")))}
    f = lambda mode, key: float(rows[mode][key])
    ratio = lambda mode, key: f(mode, key) / f("best-host", key)
    return dict(pick=rows["auto"]["kind"], bound=ratio("auto", "bound_ns"),
                sim=ratio("auto", "comm_ns"), sg_bound=ratio("switchgnn", "bound_ns"),
                sg_sim=ratio("switchgnn", "comm_ns"),
                pick_over=f("auto", "comm_ns") / f("auto", "bound_ns"),
                best_over=f("best-host", "comm_ns") / f("best-host", "bound_ns"),
                best=rows["best-host"]["kind"])

print("| graph | tofino2, 32, 96 looped: pick | bound | simulated | SwitchGNN bound / simulated "
      "| simulated ÷ bound: pick, best host-only | tofino1-32, 8, 24 looped: pick | bound | "
      "simulated | SwitchGNN bound / simulated |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, path in graphs:
    a = run(path, 32, "tofino2", os.path.join(work, f"tofino2-{name}"))
    b = run(path, 8, "tofino1-32", os.path.join(work, f"tofino1-{name}"))
    for r in (a, b):
        if r["best"] != "host-hybrid":
            print(f"note: {name}: the best host-only kind is {r['best']}", file=sys.stderr)
    print(f"| {name} | {a['pick']} | {a['bound']:.2f} | {a['sim']:.2f} | {a['sg_bound']:.2f} / "
          f"{a['sg_sim']:.2f} | {a['pick_over']:.2f}, {a['best_over']:.2f} | {b['pick']} | "
          f"{b['bound']:.2f} | {b['sim']:.2f} | {b['sg_bound']:.2f} / {b['sg_sim']:.2f} |")
PY
