"""Epoch time of a BNS-GCN-shaped trainer through switchgnn against the same trainer over gloo.

The trainer is python/tests/bns_trainer (BNS-GCN's layout on the CPU); the switch run is that
trainer with docs/python.md's diff applied, read from the docs, once per exchange kind in
``--kinds`` (the diff's ``serve`` given ``kind=``; by default serve's own kind, host-only
pre-aggregation through the switch, and SwitchGNN's in-switch aggregation). All run in this
invocation on the same partitions, in turn within each round (stock, then each kind), and each
reports rank 0's mean epoch time over the epochs after the fifth, as BNS-GCN does. Printed per
graph: the figures of every round, the means, and each kind / gloo. ``--sampling-rate``
below 1 samples the boundary in every run (BNS-GCN's ``p``; gloo then sends only the sampled
rows, the switch a pair plan's every row, unsampled ones as zeros). Run it in the DGL
environment (scripts/dgl.sh) after building the package optimised (scripts/python.sh):

    $(bash scripts/dgl.sh)/bin/python python/benches/bns_epoch.py

A bench, not a test: the figures depend on the machine and what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))
from recipe import trainer_copy  # noqa: E402

SHARED = Path(os.environ.get("SWITCHGNN_DATASETS", HERE.parents[3] / "shared" / "datasets"))
CASES = {"cora": ("cora.npz", 2), "amazon-computers": ("amazon-computers.npz", 4)}
SKIP = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def switch_copy(folder: Path, kind: str) -> Path:
    """The trainer with the docs' diff, its switch serving ``kind``."""
    trainer_copy(folder, with_switchgnn=True)
    main = folder / "main.py"
    lines = main.read_text().split("\n")
    at = [i for i, line in enumerate(lines) if "switchgnn.dgl.serve(" in line and "hidden=" in line]
    if len(at) != 1:
        sys.exit("the docs' diff no longer calls switchgnn.dgl.serve(..., hidden=...) once")
    lines[at[0]] = lines[at[0]].replace("hidden=", f"kind={kind!r}, hidden=", 1)
    main.write_text("\n".join(lines))
    return folder


def run(folder: Path, data: Path, parts: int, args, out: Path, partition: bool) -> dict:
    command = [sys.executable, "main.py", "--dataset", str(data), "--part-path",
               str(folder.parent / "parts"), "--n-partitions", str(parts), "--n-epochs",
               str(args.epochs), "--n-hidden", str(args.hidden), "--n-layers", str(args.layers),
               "--use-pp", "--port", str(free_port()), "--out", str(out), "--log-every",
               str(args.epochs + 1), "--sampling-rate", str(args.sampling_rate)]
    if not partition:
        command.append("--skip-partition")
    env = dict(os.environ, DGLBACKEND="pytorch")
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{folder.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    figures = json.loads(out.read_text())
    times = figures["epoch_s"][SKIP:]
    comm = figures["comm_s"][SKIP:]
    return dict(epoch=sum(times) / len(times), comm=sum(comm) / len(comm))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--rounds", type=int, default=2, help="rounds per graph (stock, then each kind)")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--kinds", nargs="+", default=["host-reduce", "switchgnn"],
                   help="exchange kinds the switch runs, each its own run per round")
    p.add_argument("--sampling-rate", type=float, default=1.0,
                   help="BNS-GCN's boundary sampling rate p, for every run (below 1, the "
                        "switch runs serve a pair plan)")
    args = p.parse_args(argv)
    if args.epochs <= SKIP:
        sys.exit(f"--epochs must exceed {SKIP} (the first {SKIP} are not timed)")
    import switchgnn

    print(f"switchgnn {switchgnn.__version__} from {Path(switchgnn.__file__).parent}; "
          f"{args.epochs} epochs (mean of those after the {SKIP}th), hidden {args.hidden}, "
          f"{args.layers} layers, use_pp, sampling rate {args.sampling_rate}", flush=True)
    for case in args.cases:
        name, parts = CASES[case]
        data = SHARED / name
        if not data.exists():
            sys.exit(f"{data} not found (the shared datasets, or $SWITCHGNN_DATASETS)")
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            stock = trainer_copy(tmp / "stock", with_switchgnn=False)
            switches = {kind: switch_copy(tmp / kind, kind) for kind in args.kinds}
            rounds = []
            for r in range(args.rounds):
                gloo = run(stock, data, parts, args, tmp / "stock.json", partition=r == 0)
                ours = {kind: run(folder, data, parts, args, tmp / f"{kind}.json", partition=False)
                        for kind, folder in switches.items()}
                rounds.append((gloo, ours))
                line = "; ".join(f"{kind} {o['epoch'] * 1e3:.1f} ms/epoch (comm "
                                 f"{o['comm'] * 1e3:.1f} ms), {o['epoch'] / gloo['epoch']:.3f}x"
                                 for kind, o in ours.items())
                print(f"{case} x {parts} round {r}: gloo {gloo['epoch'] * 1e3:.1f} ms/epoch "
                      f"(comm {gloo['comm'] * 1e3:.1f} ms); {line}", flush=True)
            gloo = sum(g["epoch"] for g, _ in rounds) / len(rounds)
            means = "; ".join(
                f"{kind} {m * 1e3:.1f} ms/epoch, {kind} / gloo = {m / gloo:.3f}"
                for kind in args.kinds
                for m in [sum(o[kind]["epoch"] for _, o in rounds) / len(rounds)])
            print(f"{case} x {parts}: gloo {gloo * 1e3:.1f} ms/epoch; {means}", flush=True)


if __name__ == "__main__":
    main()
