"""Pair plans (switchgnn.sampling): the derived graph, its map saved beside the plan and checked
when read, and an exchange through the switch that gives every (vertex, peer) row its own
factor and returns each peer's sum apart — against a float64 reference of the per-pair sums."""

from __future__ import annotations

import numpy as np
import pytest

import switchgnn
from conftest import WORKERS, error_bound, run_threads, seeded_graph
from switchgnn.sampling import PAIRS_FILE, pair_graph, read_pairs, write_pairs


@pytest.fixture(scope="module")
def pair_plan(tmp_path_factory):
    n, src, dst = seeded_graph()
    owner = np.random.default_rng(3).integers(0, WORKERS, n)
    m, psrc, pdst, powner, pairs = pair_graph(n, src, dst, owner, WORKERS)
    out = tmp_path_factory.mktemp("pair-plan")
    summary = switchgnn.prepare(m, psrc, pdst, powner, [8], out,
                                kinds=["host-reduce", "switchgnn", "host"],
                                workers=WORKERS)
    write_pairs(out, pairs)
    return dict(dir=out, n=n, src=src, dst=dst, owner=owner, pairs=pairs, summary=summary)


def test_every_derived_vertex_is_one_vertex_for_one_peer(pair_plan):
    n, src, dst, owner, pairs = (pair_plan[k] for k in ("n", "src", "dst", "owner", "pairs"))
    cross = owner[src] != owner[dst]
    # Exactly the (vertex, peer) pairs with a neighbour of the vertex on the peer.
    expected = sorted(set(zip(src[cross].tolist(), owner[dst[cross]].tolist())))
    assert list(zip(pairs.vertex.tolist(), pairs.peer.tolist())) == expected
    assert np.array_equal(pairs.owner, owner[pairs.vertex])
    assert (pairs.peer != pairs.owner).all()
    assert read_pairs(pair_plan["dir"]) is not None


@pytest.mark.parametrize("kind,loss", [("host-reduce", 0.0), ("host-reduce", 0.2),
                                       ("switchgnn", 0.2)])
def test_each_peer_sum_comes_apart_with_its_factor(pair_plan, kind, loss):
    """Rows of (u, j) scaled by a factor per (u, j); the sum at (v, i) must be peer i's part of
    v's sum only, each term with its own factor — in-switch aggregation too, and with loss
    (the pair plan is a plan like any other to the switch and the engines)."""
    n, src, dst, owner, pairs = (pair_plan[k] for k in ("n", "src", "dst", "owner", "pairs"))
    rng = np.random.default_rng(5)
    values = rng.standard_normal((n, 8)).astype(np.float32)
    factor = rng.choice([0.0, 2.5, 10.0], size=len(pairs.vertex)).astype(np.float32)
    rows = values[pairs.vertex] * factor[:, None]
    key = {(int(u), int(j)): k for k, (u, j) in enumerate(zip(pairs.vertex, pairs.peer))}
    reference = np.zeros((len(pairs.vertex), 8))
    for u, v in zip(src.tolist(), dst.tolist()):
        if owner[u] != owner[v]:
            reference[key[(v, int(owner[u]))]] += rows[key[(u, int(owner[v]))]]
    switch = switchgnn.Switch(pair_plan["dir"], kind, loss=loss, seed=1)

    def worker(rank):
        with switchgnn.Worker(pair_plan["dir"], rank, switch.address, kind, loss=loss,
                              seed=rank) as w:
            assert w.plan == str(pair_plan["dir"])
            return w.boundary, w.exchange(0, rows[w.boundary]), w.stats()

    results = run_threads(WORKERS, worker)
    assert switch.wait(timeout=30) is not None
    largest = float(np.abs(rows).max())
    if loss:
        recovered = sum(s["totals"]["retransmits"] + s["totals"]["fetches_sent"]
                        for _, _, s in results)
        assert recovered > 0, "20% loss needed no recovery"
    for rank, (boundary, got, _) in enumerate(results):
        assert (pairs.owner[boundary] == rank).all()
        want = reference[boundary]
        bound = error_bound(pair_plan["summary"]["contributions"], largest, want)
        assert np.all(np.abs(got - want) <= bound), f"worker {rank}"


def test_a_pair_map_that_does_not_fit_is_refused(pair_plan, tmp_path):
    import shutil

    folder = tmp_path / "plan"
    shutil.copytree(pair_plan["dir"], folder)
    pairs = pair_plan["pairs"]
    write_pairs(folder, pairs._replace(vertex=pairs.vertex[:-1], peer=pairs.peer[:-1],
                                       owner=pairs.owner[:-1]))
    with pytest.raises(ValueError, match="a pair map of another plan"):
        read_pairs(folder)
    bad = pairs.peer.copy()
    bad[3] = pairs.owner[3]
    write_pairs(folder, pairs._replace(peer=bad))
    with pytest.raises(ValueError, match="entry 3 sends vertex"):
        read_pairs(folder)
    np.savez(folder / PAIRS_FILE, format=np.array("something-else/9"), vertex=pairs.vertex,
             peer=pairs.peer, owner=pairs.owner)
    with pytest.raises(ValueError, match="format 'something-else/9'"):
        read_pairs(folder)
    (folder / PAIRS_FILE).write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable pair map"):
        read_pairs(folder)
    assert not list(folder.glob(".sampling-pairs.*")), "a temporary file was left behind"


def test_a_plain_plan_has_no_pair_map(seeded_plan):
    assert read_pairs(seeded_plan["dir"]) is None


@pytest.mark.parametrize("kind", ["host", "host-reduce"])
def test_unsampled_rows_cost_a_record_header(pair_plan, kind):
    """A row left out of the sample is all zeros: the host kinds send it as a zero record (a
    record header, no lanes), and a partial sum of such rows too — BNS-GCN's saving on the
    wire. Nine rows in ten left out: under half the bytes, every sum still exact."""
    n, src, dst, owner, pairs = (pair_plan[k] for k in ("n", "src", "dst", "owner", "pairs"))
    rng = np.random.default_rng(11)
    full = rng.standard_normal((len(pairs.vertex), 8)).astype(np.float32) + 3.0
    sampled = full * (rng.random(len(pairs.vertex)) < 0.1)[:, None]
    sent = {}
    for name, rows in [("full", full), ("sampled", sampled)]:
        switch = switchgnn.Switch(pair_plan["dir"], kind)

        def worker(rank):
            with switchgnn.Worker(pair_plan["dir"], rank, switch.address, kind) as w:
                return w.boundary, w.exchange(0, rows[w.boundary]), w.stats()

        results = run_threads(WORKERS, worker)
        assert switch.wait(timeout=30) is not None
        key = {(int(u), int(j)): k for k, (u, j) in enumerate(zip(pairs.vertex, pairs.peer))}
        reference = np.zeros(rows.shape)
        for u, v in zip(src.tolist(), dst.tolist()):
            if owner[u] != owner[v]:
                reference[key[(v, int(owner[u]))]] += rows[key[(u, int(owner[v]))]]
        largest = float(np.abs(rows).max())
        for boundary, got, _ in results:
            bound = error_bound(pair_plan["summary"]["contributions"], largest, reference[boundary])
            assert np.all(np.abs(got - reference[boundary]) <= bound), name
        sent[name] = sum(s["totals"]["bytes_sent"] for _, _, s in results)
    assert sent["sampled"] < 0.5 * sent["full"], sent
