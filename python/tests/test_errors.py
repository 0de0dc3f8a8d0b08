"""Bad input and failures: clear errors, quickly."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import switchgnn
from conftest import WORKERS, remote_sums, run_threads, seeded_graph


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wrong_rank_is_refused_at_once(seeded_plan):
    for rank in (WORKERS, 99, -1):
        started = time.monotonic()
        with pytest.raises(ValueError, match=f"rank {rank} is not a worker"):
            switchgnn.Worker(seeded_plan["dir"], rank, "127.0.0.1:9")
        assert time.monotonic() - started < 1.0


def test_no_switch_raises_within_the_join_timeout(seeded_plan):
    address = f"127.0.0.1:{free_udp_port()}"
    started = time.monotonic()
    with pytest.raises(switchgnn.SwitchgnnError, match="did not answer"):
        switchgnn.Worker(seeded_plan["dir"], 0, address, join_timeout=1.5)
    assert time.monotonic() - started < 5.0


def test_a_switch_that_dies_mid_job_is_named(seeded_plan):
    switch = switchgnn.Switch(seeded_plan["dir"], peer_timeout=2.0)
    rows = np.ones((seeded_plan["n"], 24), dtype=np.float32)

    def join(rank):
        return switchgnn.Worker(seeded_plan["dir"], rank, switch.address, peer_timeout=2.0)

    workers = run_threads(WORKERS, join)
    switch.stop()
    started = time.monotonic()

    def exchange(rank):
        w = workers[rank]
        with pytest.raises(switchgnn.SwitchgnnError) as failed:
            w.exchange(0, rows[w.boundary])
        return str(failed.value)

    messages = run_threads(WORKERS, exchange)
    assert time.monotonic() - started < 8.0
    for rank, message in enumerate(messages):
        assert f"worker {rank}" in message, message


def test_shapes_and_types_are_checked(seeded_plan):
    switch = switchgnn.Switch(seeded_plan["dir"])

    def worker(rank):
        with switchgnn.Worker(seeded_plan["dir"], rank, switch.address) as w:
            b = len(w.boundary)
            with pytest.raises(ValueError, match="boundary rows of width 24"):
                w.exchange(0, np.zeros((b, 23), dtype=np.float32))
            with pytest.raises(ValueError, match="boundary rows"):
                w.exchange(0, np.zeros((b + 1, 24), dtype=np.float32))
            with pytest.raises(ValueError, match="layer 5 is not in the plan"):
                w.exchange(5, np.zeros((b, 24), dtype=np.float32))
            with pytest.raises(ValueError, match="float32"):
                w.exchange(0, np.zeros((b, 24), np.float32), out=np.zeros((b, 24)))
            with pytest.raises(ValueError, match="float32"):
                w.all_reduce(np.zeros(3))
            # The refusals sent nothing: a real exchange still works for everyone.
            w.exchange(0, np.zeros((b, 24), dtype=np.float32))
            # A value that is not finite has no fixed-point scale: every worker is told (one
            # worker's NaN makes the group's agreed bound infinite for all), and the next
            # all-reduce works.
            values = np.ones(100, dtype=np.float32)
            if rank == 1:
                values[70] = np.nan
            with pytest.raises(switchgnn.SwitchgnnError, match="finite"):
                w.all_reduce(values)
            total = np.ones(100, dtype=np.float32)
            w.all_reduce(total)
            assert np.array_equal(total, np.full(100, WORKERS, dtype=np.float32))

    run_threads(WORKERS, worker)
    switch.wait(timeout=30)


def test_bad_graphs_are_refused_by_name(tmp_path):
    n, src, dst = seeded_graph(50, 100)
    owner = np.arange(n) % 2
    with pytest.raises(ValueError, match="lack their reverse"):
        switchgnn.prepare(n, src[: len(src) // 2], dst[: len(dst) // 2], owner, [8], tmp_path)
    with pytest.raises(ValueError, match="repeats 1 edges"):
        switchgnn.prepare(n, np.r_[src, src[:1]], np.r_[dst, dst[:1]], owner, [8], tmp_path)
    with pytest.raises(ValueError, match=r"edge 0 \(50, "):
        switchgnn.prepare(n, np.r_[50, src], np.r_[0, dst], owner, [8], tmp_path)
    with pytest.raises(ValueError, match=r"owner\[3\] = -1"):
        bad = owner.copy()
        bad[3] = -1
        switchgnn.prepare(n, src, dst, bad, [8], tmp_path)
    with pytest.raises(ValueError, match="unknown exchange kind `hybird`"):
        switchgnn.prepare(n, src, dst, owner, [8], tmp_path, kinds=["hybird"])
    with pytest.raises(ValueError, match="must hold integers"):
        switchgnn.prepare(n, src.astype(float), dst, owner, [8], tmp_path)
    # symmetrize=True takes the half edge list as the undirected graph.
    summary = switchgnn.prepare(
        n, src[: len(src) // 2], dst[: len(dst) // 2], owner, [8], tmp_path, symmetrize=True
    )
    assert summary["workers"] == 2


def test_a_plan_without_a_kind_says_so(tmp_path):
    n, src, dst = seeded_graph(60, 200)
    switchgnn.prepare(n, src, dst, np.arange(n) % 2, [8], tmp_path, kinds=["switchgnn"])
    with pytest.raises(ValueError, match="has no host exchange plans"):
        switchgnn.Switch(tmp_path, "host")
    with pytest.raises(switchgnn.SwitchgnnError, match="cannot read the plan"):
        switchgnn.Switch(tmp_path / "missing")


WORKER_SCRIPT = """
import sys, numpy as np, switchgnn
plan, rank, address, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = np.random.default_rng(11).standard_normal((int(sys.argv[5]), 16)).astype(np.float32)
with switchgnn.Worker(plan, rank, address, loss=0.01, seed=rank) as w:
    np.save(out, w.exchange(0, rows[w.boundary]))
    np.save(out + ".boundary.npy", w.boundary)
"""


def test_two_processes(tmp_path):
    n, src, dst = seeded_graph(200, 900, seed=2)
    owner = np.random.default_rng(8).integers(0, 2, n)
    switchgnn.prepare(n, src, dst, owner, [16], tmp_path / "plan")
    switch = switchgnn.Switch(tmp_path / "plan", loss=0.01)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, str(tmp_path / "plan"), str(rank),
             switch.address, str(tmp_path / f"out{rank}.npy"), str(n)]
        )
        for rank in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=60) == 0
    assert switch.wait(timeout=30) is not None
    rows = np.random.default_rng(11).standard_normal((n, 16)).astype(np.float32)
    for rank in range(2):
        got = np.load(tmp_path / f"out{rank}.npy")
        boundary = np.load(tmp_path / f"out{rank}.npy.boundary.npy")
        reference = remote_sums(n, src, dst, owner, rows, boundary)
        assert np.allclose(got, reference, atol=1e-4)


def test_a_secret_admits_only_workers_that_hold_it(seeded_plan):
    secret = "a shared secret of enough bytes"
    switch = switchgnn.Switch(seeded_plan["dir"], secret=secret)
    started = time.monotonic()
    with pytest.raises(switchgnn.SwitchgnnError, match="does not verify"):
        switchgnn.Worker(seeded_plan["dir"], 0, switch.address, secret="not the switch's secret")
    with pytest.raises(switchgnn.SwitchgnnError, match="secret"):
        switchgnn.Worker(seeded_plan["dir"], 0, switch.address)
    assert time.monotonic() - started < 3.0
    with pytest.raises(ValueError, match="too short"):
        switchgnn.Worker(seeded_plan["dir"], 0, switch.address, secret="short")
    rows = np.ones((seeded_plan["n"], 24), dtype=np.float32)

    def worker(rank):
        with switchgnn.Worker(seeded_plan["dir"], rank, switch.address, secret=secret.encode()) as w:
            return w.exchange(0, rows[w.boundary])

    run_threads(WORKERS, worker)
    report = switch.wait(timeout=30)
    assert report["jobs"][0]["control"]["bad_proofs"] == 1
    assert report["jobs"][0]["control"]["admitted"] == WORKERS


def test_job_files_configure_both_sides(seeded_plan, tmp_path):
    (tmp_path / "secret").write_text("the job file's secret, 32 bytes\n")
    job = tmp_path / "job.toml"
    job.write_text(
        f'job = 7\nplan = "{seeded_plan["dir"]}"\nmode = "host"\nswitch = "127.0.0.1:0"\n'
        f'world = {WORKERS}\nbind = "127.0.0.1:0"\nsecret_file = "secret"\n'
        "[faults]\nloss = 0.01\n"
    )
    switch = switchgnn.Switch.from_job(job)
    rows = np.random.default_rng(2).standard_normal((seeded_plan["n"], 24)).astype(np.float32)

    def worker(rank):
        with switchgnn.Worker.from_job(job, rank, switch=switch.address) as w:
            return w.boundary, w.exchange(0, rows[w.boundary])

    results = run_threads(WORKERS, worker)
    report = switch.wait(timeout=30)
    assert report["jobs"][0]["control"]["challenges"] >= WORKERS
    n, src, dst, owner = (seeded_plan[k] for k in ("n", "src", "dst", "owner"))
    for boundary, got in results:
        assert np.allclose(got, remote_sums(n, src, dst, owner, rows, boundary), atol=1e-4)
    # A job file for another world size than the plan's is refused by name.
    other = tmp_path / "other.toml"
    other.write_text(job.read_text().replace(f"world = {WORKERS}", "world = 3"))
    with pytest.raises(ValueError, match="world = 3, but the plan"):
        switchgnn.Switch.from_job(other)
