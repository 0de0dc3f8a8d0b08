"""Shared helpers of the Python package's tests: graphs, workers in threads, the float64
reference and the fixed-point error bound."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

import switchgnn

ROOT = Path(__file__).resolve().parents[2]
DATASETS = Path(os.environ.get("SWITCHGNN_DATASETS", ROOT.parent / "shared" / "datasets"))
WORKERS = 4


def symmetric_edges(n: int, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every distinct non-loop pair, as DGL stores an undirected graph."""
    u, v = pairs[:, 0], pairs[:, 1]
    keep = u != v
    both = np.concatenate([np.stack([u[keep], v[keep]], 1), np.stack([v[keep], u[keep]], 1)])
    both = np.unique(both, axis=0)
    return both[:, 0].astype(np.int64), both[:, 1].astype(np.int64)


def seeded_graph(n: int = 300, m: int = 1500, seed: int = 7):
    rng = np.random.default_rng(seed)
    src, dst = symmetric_edges(n, rng.integers(0, n, size=(m, 2)))
    return n, src, dst


def dataset(name: str) -> Path:
    """A shared dataset's path; skips with the reason when the folder is absent, except under
    CI=true, where a missing dataset fails the test."""
    path = DATASETS / name
    if not path.exists():
        why = f"{path} not found (the shared datasets live in ../shared/datasets or $SWITCHGNN_DATASETS)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must have it")
        pytest.skip(why)
    return path


def cora_graph():
    z = np.load(dataset("cora.npz"))
    indptr, indices = z["adj_indptr"], z["adj_indices"]
    n = int(z["adj_shape"][0])
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return n, src, indices.astype(np.int64)


def remote_sums(n, src, dst, owner, values, vertices) -> np.ndarray:
    """Float64 sums of each vertex's neighbours owned by other workers: the reference."""
    cross = owner[src] != owner[dst]
    total = np.zeros((n, values.shape[1]), dtype=np.float64)
    np.add.at(total, dst[cross], values[src[cross]].astype(np.float64))
    return total[vertices]


def error_bound(contributions: int, largest: float, reference: np.ndarray) -> np.ndarray:
    """What the fixed point allows: ``n`` terms each rounded at a scale of at least
    ``(2^31 - 1 - n) / (2 n largest)``, plus the rounding of the decoded sum to float32."""
    n = max(contributions, 1)
    per_sum = n * n * largest / (2**31 - 1 - n)
    return per_sum + np.abs(reference) * 2.0**-23


def run_threads(count: int, body):
    """``body(rank)`` in ``count`` threads; their results by rank, or the first error raised."""
    results: dict = {}
    errors: dict = {}

    def run(rank):
        try:
            results[rank] = body(rank)
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            errors[rank] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[min(errors)]
    return [results[r] for r in range(count)]


@pytest.fixture(scope="session")
def seeded_plan(tmp_path_factory):
    n, src, dst = seeded_graph()
    owner = np.random.default_rng(3).integers(0, WORKERS, n)
    out = tmp_path_factory.mktemp("seeded-plan")
    summary = switchgnn.prepare(n, src, dst, owner, [24, 70], out)
    return dict(dir=out, n=n, src=src, dst=dst, owner=owner, summary=summary)
