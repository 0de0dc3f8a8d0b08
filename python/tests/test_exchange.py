"""Workers in threads through the software switch: every exchange kind, forward and backward,
with and without loss, against a float64 reference; bit-equal across kinds."""

from __future__ import annotations

import numpy as np
import pytest

import switchgnn
from conftest import WORKERS, cora_graph, error_bound, remote_sums, run_threads, seeded_graph


def values_for(n: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, width)).astype(np.float32)


def run_job(plan: dict, kind: str, loss: float):
    """One job: per layer a forward exchange of seeded rows, then the backward exchange of
    layer 1 on other rows; each worker's outputs and stats."""
    n, widths = plan["n"], [layer["width"] for layer in plan["summary"]["layers"]]
    forward = [values_for(n, w, seed=10 + i) for i, w in enumerate(widths)]
    backward = values_for(n, widths[1], seed=99)
    switch = switchgnn.Switch(plan["dir"], kind, loss=loss, seed=1)

    def worker(rank):
        with switchgnn.Worker(plan["dir"], rank, switch.address, kind, loss=loss, seed=rank) as w:
            b = w.boundary
            got = [w.exchange(layer, forward[layer][b]) for layer in range(len(widths))]
            got.append(w.exchange(1, backward[b], backward=True))
            return b, got, w.stats()

    results = run_threads(WORKERS, worker)
    report = switch.wait(timeout=30)
    assert report is not None, "the switch did not end after every worker's goodbye"
    return forward + [backward], results, report


def check_exact(plan: dict, inputs, results) -> float:
    """Every output within the fixed-point bound of the float64 reference; the worst error."""
    n, src, dst, owner = plan["n"], plan["src"], plan["dst"], plan["owner"]
    contributions = plan["summary"]["contributions"]
    worst = 0.0
    for rank, (boundary, outputs, stats) in enumerate(results):
        expected = np.flatnonzero(
            (owner == rank) & np.isin(np.arange(n), dst[owner[src] != owner[dst]])
        )
        assert np.array_equal(boundary, expected), f"worker {rank}'s boundary"
        for values, got in zip(inputs, outputs):
            reference = remote_sums(n, src, dst, owner, values, boundary)
            largest = float(np.abs(values).max())
            err = np.abs(got.astype(np.float64) - reference)
            assert np.all(err <= error_bound(contributions, largest, reference)), (
                f"worker {rank}: error {err.max():.3g} beyond the fixed-point bound"
            )
            worst = max(worst, float(err.max(initial=0.0)))
        assert stats["totals"]["exchanges"] == len(inputs)
    return worst


@pytest.mark.parametrize("loss", [0.0, 0.01])
def test_every_kind_is_exact_and_bit_equal(seeded_plan, loss):
    outputs = {}
    for kind in switchgnn.KINDS:
        inputs, results, report = run_job(seeded_plan, kind, loss)
        check_exact(seeded_plan, inputs, results)
        assert report["counters"]["exchanges_completed"] == 3
        outputs[kind] = [got for _, got_list, _ in results for got in got_list]
    first = outputs["switchgnn"]
    for kind, got in outputs.items():
        assert all(np.array_equal(a, b) for a, b in zip(first, got)), f"{kind} differs bitwise"


def test_loss_changes_no_bit(seeded_plan):
    _, clean, _ = run_job(seeded_plan, "switchgnn", 0.0)
    _, lossy, report = run_job(seeded_plan, "switchgnn", 0.05)
    for (_, a, _), (_, b, stats) in zip(clean, lossy):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    retransmits = sum(s["totals"]["retransmits"] + s["totals"]["fetches_sent"] for _, _, s in lossy)
    assert retransmits > 0, "5% loss needed no recovery at all"


@pytest.mark.parametrize("loss", [0.0, 0.01])
def test_cora_every_kind(tmp_path, loss):
    n, src, dst = cora_graph()
    owner = np.random.default_rng(5).integers(0, WORKERS, n)
    summary = switchgnn.prepare(n, src, dst, owner, [16, 7], tmp_path)
    plan = dict(dir=tmp_path, n=n, src=src, dst=dst, owner=owner, summary=summary)
    assert summary["vertices"] == 2708 and summary["workers"] == WORKERS
    outputs = {}
    for kind in switchgnn.KINDS:
        inputs, results, _ = run_job(plan, kind, loss)
        check_exact(plan, inputs, results)
        outputs[kind] = [got for _, got_list, _ in results for got in got_list]
    for kind, got in outputs.items():
        assert all(np.array_equal(a, b) for a, b in zip(outputs["host"], got)), kind


def test_out_is_filled_in_place(seeded_plan):
    switch = switchgnn.Switch(seeded_plan["dir"])
    rows = values_for(seeded_plan["n"], 24, seed=4)

    def worker(rank):
        with switchgnn.Worker(seeded_plan["dir"], rank, switch.address) as w:
            out = np.full((len(w.boundary), 24), np.nan, dtype=np.float32)
            got = w.exchange(0, rows[w.boundary], out=out)
            assert got is out
            assert not np.isnan(out).any()
            again = w.exchange(0, rows[w.boundary])
            assert np.array_equal(again, out)

    run_threads(WORKERS, worker)
    switch.wait(timeout=30)


def fixed_point_sum(parts):
    """The in-switch sum, computed here: each group of values at the power-of-two scale that
    its largest magnitude on any worker allows for len(parts) contributions, rounded half away
    from zero, summed exactly, scaled back. Groups: ceil(len / 64) values, 1 to 64."""
    n = len(parts)
    out = np.zeros(parts[0].shape, dtype=np.float32)
    group = min(64, max(1, -(-len(out) // 64)))
    for at in range(0, len(out), group):
        sl = slice(at, at + group)
        bound = max(float(np.max(np.abs(p[sl]))) for p in parts)
        factor = 2.0 ** np.floor(np.log2((2**31 - 1 - n) / (n * bound)))
        total = np.zeros(len(out[sl]), dtype=np.int64)
        for p in parts:
            v = p[sl].astype(np.float64) * factor
            total += (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)
        out[sl] = (total / factor).astype(np.float32)
    return out


@pytest.mark.parametrize("via", ["switch", "tcp"])
def test_all_reduce_is_exact_and_identical(seeded_plan, via):
    switch = switchgnn.Switch(seeded_plan["dir"])
    parts = [values_for(1, 1000, seed=50 + r)[0] for r in range(WORKERS)]

    def worker(rank):
        with switchgnn.Worker(
            seeded_plan["dir"], rank, switch.address, allreduce=via
        ) as w:
            total = parts[rank].copy()
            w.all_reduce(total)
            most = parts[rank].reshape(10, 100).copy()
            w.all_reduce(most, op="max")
            return total, most

    results = run_threads(WORKERS, worker)
    switch.wait(timeout=30)
    if via == "tcp":
        expected = np.zeros(1000, dtype=np.float64)
        for p in parts:
            expected += p
        expected = expected.astype(np.float32)
    else:
        expected = fixed_point_sum(parts)
    for total, most in results:
        assert np.array_equal(total, expected)
        assert np.array_equal(most.reshape(-1), np.max(parts, axis=0))

@pytest.fixture(scope="module")
def judged_plan(tmp_path_factory):
    """The seeded graph's plan with the planner's verdict on a Tofino 1 (32 ports, the idle
    ones looped): what `hybrid` and `auto` need."""
    n, src, dst = seeded_graph()
    owner = np.random.default_rng(3).integers(0, WORKERS, n)
    out = tmp_path_factory.mktemp("judged-plan")
    summary = switchgnn.prepare(n, src, dst, owner, [24, 70], out, kinds=["hybrid", "auto"],
                                chip="tofino1-32")
    return dict(dir=out, n=n, src=src, dst=dst, owner=owner, summary=summary)


def test_the_planners_kinds_run_from_python_exact(judged_plan):
    summary = judged_plan["summary"]
    assert summary["chip"].startswith("tofino1-32"), summary["chip"]
    for layer in summary["layers"]:
        # Every candidate weighed, the pick among them and no slower than any by its bound.
        bounds = layer["predicted_s"]
        assert {"host", "host-reduce", "switchgnn", "hybrid"} <= set(bounds), bounds
        assert bounds[layer["pick"]] == min(bounds.values()), layer
    for kind in ["hybrid", "auto"]:
        inputs, results, report = run_job(judged_plan, kind, 0.01)
        check_exact(judged_plan, inputs, results)
        assert report["counters"]["exchanges_completed"] == 3


def test_a_verdict_needs_a_chip_that_exists(tmp_path):
    n, src, dst = seeded_graph(60, 200)
    owner = np.arange(n) % 2
    with pytest.raises(ValueError, match="tofino9"):
        switchgnn.prepare(n, src, dst, owner, [8], tmp_path / "a", kinds=["hybrid"],
                          chip="tofino9")
    with pytest.raises(ValueError, match="loopback_ports `many`"):
        switchgnn.prepare(n, src, dst, owner, [8], tmp_path / "b", kinds=["auto"],
                          loopback_ports="many")
