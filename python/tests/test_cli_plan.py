"""A plan folder made by the command line (`switchgnn prepare`, then `switchgnn shard`) opens
in Python: its kinds and term count come from the folder's own files, and workers in threads
exchange through a Python switch on it, within the fixed-point bound of a float64 reference."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import switchgnn
from conftest import ROOT, error_bound, remote_sums, run_threads, seeded_graph, symmetric_edges


def switchgnn_binary() -> Path:
    """The `switchgnn` command: $SWITCHGNN_BIN, else the debug build in $CARGO_TARGET_DIR or
    the checkout's target/. Skips when none is built, except under CI=true, where that fails."""
    candidates = []
    if os.environ.get("SWITCHGNN_BIN"):
        candidates.append(Path(os.environ["SWITCHGNN_BIN"]))
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "switchgnn")
    candidates.append(ROOT / "target" / "debug" / "switchgnn")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    why = f"no switchgnn binary at {', '.join(map(str, candidates))} (cargo build, or set SWITCHGNN_BIN)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def cli(exe: Path, *args: str) -> str:
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"switchgnn {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def test_a_plan_from_the_command_line_runs_in_python(tmp_path):
    exe = switchgnn_binary()
    n, src, dst = seeded_graph(n=200, m=900, seed=11)
    # A path through every vertex, so that the edge list names all of them.
    path = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    src, dst = symmetric_edges(n, np.concatenate([np.stack([src, dst], 1), path]))
    edges = tmp_path / "graph.txt"
    once = src < dst
    np.savetxt(edges, np.stack([src[once], dst[once]], 1), fmt="%d")
    plan = tmp_path / "plan"
    width = 12
    cli(exe, "prepare", str(edges), "--workers", "2", "--feature-dims", str(width),
        "--exchange", "switch", "--out", str(plan))
    cli(exe, "shard", "--plan", str(plan), "--dataset", str(edges), "--exchange", "switch,host")

    info = switchgnn.plan_info(plan)
    assert info["workers"] == 2 and info["vertices"] == n
    assert info["kinds"] == ["switchgnn", "host"]
    owner = switchgnn.owners(plan).astype(np.int64)
    cross = owner[src] != owner[dst]
    most = np.bincount(dst[cross], minlength=n).max()
    assert info["contributions"] == most

    values = np.random.default_rng(5).standard_normal((n, width)).astype(np.float32)
    for kind in ["switchgnn", "host"]:
        switch = switchgnn.Switch(plan, kind)
        assert switch.kind == kind

        def worker(rank):
            with switchgnn.Worker(plan, rank, switch.address, switch.kind) as w:
                b = w.boundary
                return b, w.exchange(0, values[b])

        results = run_threads(2, worker)
        assert switch.wait(timeout=30) is not None
        for boundary, got in results:
            reference = remote_sums(n, src, dst, owner, values, boundary)
            bound = error_bound(info["contributions"], float(np.abs(values).max()), reference)
            assert np.all(np.abs(got.astype(np.float64) - reference) <= bound), kind
