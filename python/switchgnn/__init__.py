"""switchgnn from Python: in-network aggregation of the boundary exchange of full-graph GNN
training, through a (software) programmable switch.

The pieces, all driving the same Rust code as the ``switchgnn`` command:

- :func:`prepare` writes a plan directory for a graph given as an edge list and the owner of
  every vertex (a partition made elsewhere, e.g. by DGL); :func:`switchgnn.dgl.prepare_partitions`
  does it from a DGL partition folder;
- :class:`Switch` runs the software switch of one job (and its all-reduce service) in a thread
  of this process;
- :class:`Worker` is one worker of the job: :meth:`Worker.exchange` sends the rows of its
  boundary vertices and returns, for each of them, the sum of its remote neighbours' rows;
  :meth:`Worker.all_reduce` sums a vector across workers, bit-identical on every worker;
- :mod:`switchgnn.bns` is the drop-in ``Buffer`` / ``Reducer`` of BNS-GCN-style DGL trainers.

The module links no libtorch: a process that imported torch loads no second copy.

Every exchange is exact up to fixed point: workers agree on the largest magnitude sent, and a
decoded sum of ``n`` terms is within ``n / (2 f)`` of the float sum (``f`` the scale factor,
``Worker.stats()["totals"]["worst_error_bound"]`` reports the bound), and bit-identical
whatever the exchange kind, loss or retransmission.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional, Sequence

import numpy as np

from . import _native
from ._native import SwitchgnnError, __version__

__all__ = [
    "KINDS",
    "Switch",
    "SwitchgnnError",
    "Worker",
    "owners",
    "plan_info",
    "prepare",
    "__version__",
]

#: The exchange kinds a plan from Python carries by default: SwitchGNN's in-switch aggregation
#: over the plan's blocks, the host exchange (every worker sends copies to every peer), G3's
#: balanced host rounds, host-only pre-aggregation (one partial sum per remote destination,
#: sent to its owner), the host hybrid (per ordered worker pair, raw copies or partial sums,
#: whichever is fewer rows), the host two-level exchange (a rack's partial sums for another
#: rack summed by a proxy worker of the rack; one rack without racks given), the strawman
#: (first-come aggregators) and pre-aggregated partial sums summed in the switch. Two more need
#: the planner's verdict on a chip (:func:`prepare`'s ``chip``): ``hybrid`` (per unit,
#: multicast or pre-aggregation) and ``auto`` (the planner's pick per layer).
KINDS = (
    "switchgnn",
    "host",
    "g3",
    "host-reduce",
    "host-hybrid",
    "host-two-level",
    "strawman",
    "reduce",
)


def _ids(values, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must hold integers, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.int64)


def _check_writable_float32(array, what: str) -> None:
    """Refuse what cannot be written in place by the native module."""
    if not (
        isinstance(array, np.ndarray)
        and array.dtype == np.float32
        and array.flags.c_contiguous
        and array.flags.writeable
    ):
        raise ValueError(f"{what} must be a writable C-contiguous float32 numpy array")


def _secret(secret) -> Optional[bytes]:
    if secret is None or isinstance(secret, bytes):
        return secret
    if isinstance(secret, str):
        return secret.encode()
    raise TypeError(f"secret must be str or bytes, not {type(secret).__name__}")


def prepare(
    num_vertices: int,
    src,
    dst,
    owner,
    feature_dims: Sequence[int],
    out_dir: "os.PathLike[str] | str",
    *,
    workers: Optional[int] = None,
    switch_memory: str = "100MB",
    kinds: Iterable[str] = KINDS,
    order: str = "priority-bfs",
    order_seed: int = 0,
    name: str = "python",
    symmetrize: bool = False,
    chip: Optional[str] = None,
    loopback_ports="spare",
    gbps: float = 100.0,
    host_packet_ns: float = 20.0,
) -> dict:
    """Write the plan of a job to ``out_dir`` and return a summary.

    ``src`` and ``dst`` list the graph's edges (both directions of every undirected edge, as
    DGL stores them; self-loops are ignored, since they never cross workers); ``owner[v]`` is
    the worker that holds vertex ``v``; ``feature_dims`` the width each layer exchanges. The
    exchange sums each vertex's remote neighbours once over an undirected graph, so an edge
    list with repeats or with edges lacking their reverse is refused (``symmetrize=True``
    adds the missing reverses instead). The plans of every kind in ``kinds`` are saved, with
    every worker's shard, so neither the switch nor a worker needs the graph again: the folder
    is the one ``switchgnn prepare`` and ``switchgnn shard`` write, and the command runs on it.

    ``hybrid`` and ``auto`` (the planner's pick per layer) need the planner's verdict on a
    chip: ``chip`` (``tofino1-32``, ``tofino1-64``, ``tofino2`` or ``ideal``; by default the
    smallest real chip that hosts the workers, as ``switchgnn prepare`` takes), with
    ``loopback_ports`` front-panel ports looped back as recirculation paths (a number, or
    ``"spare"``: every port no worker needs), hosts on ``gbps`` links costing
    ``host_packet_ns`` per packet. Naming a chip records the verdict for any ``kinds``; the
    summary's layers then carry the pick and every candidate's lower bound (``predicted_s``).
    """
    summary = _native.prepare(
        int(num_vertices),
        _ids(src, "src"),
        _ids(dst, "dst"),
        _ids(owner, "owner"),
        [int(w) for w in feature_dims],
        os.fspath(out_dir),
        workers=None if workers is None else int(workers),
        switch_memory=str(switch_memory),
        kinds=[str(k) for k in kinds],
        order=order,
        order_seed=int(order_seed),
        name=name,
        symmetrize=bool(symmetrize),
        chip=chip,
        loopback_ports=str(loopback_ports),
        gbps=float(gbps),
        host_packet_ns=float(host_packet_ns),
    )
    return json.loads(summary)


def plan_info(plan: "os.PathLike[str] | str") -> dict:
    """What a plan directory holds: workers, vertices, edges, feature dims, the kinds whose
    plans were saved, and the fixed-point term count (``None`` before the folder is sharded)."""
    return json.loads(_native.plan_info(os.fspath(plan)))


def owners(plan: "os.PathLike[str] | str") -> np.ndarray:
    """The owner of every vertex of a plan (``uint32``)."""
    return _native.owners(os.fspath(plan))


class Switch:
    """The software switch of one job, with its all-reduce service, serving in a thread of
    this process until every worker has said goodbye (:meth:`wait`) or it is stopped.

    ``kind`` is the exchange every worker of the job runs; ``loss`` drops that share of the
    switch's datagrams (seeded by ``seed``), to see the protocol recover; ``join_timeout`` is
    how long, from the first worker's hello, it waits for every other worker to join (before
    the first hello it waits as long as the workers take to load), ``peer_timeout`` how long
    a silent worker is given before the job fails naming it. With ``secret`` (16 bytes at
    least) only workers that prove they hold the same secret are admitted (an HMAC
    challenge).
    """

    def __init__(
        self,
        plan,
        kind: str = "switchgnn",
        *,
        address: str = "127.0.0.1:0",
        job: int = 1,
        loss: float = 0.0,
        seed: int = 0,
        join_timeout: float = 20.0,
        peer_timeout: float = 10.0,
        switch_memory: Optional[str] = None,
        secret: "Optional[str | bytes]" = None,
    ):
        self._native = _native.Switch(
            os.fspath(plan),
            kind,
            address=address,
            job=job,
            loss=loss,
            seed=seed,
            join_timeout=join_timeout,
            peer_timeout=peer_timeout,
            switch_memory=switch_memory,
            secret=_secret(secret),
        )

    @classmethod
    def from_job(cls, path, *, switch_memory: Optional[str] = None) -> "Switch":
        """The switch of a job file, as ``switchgnn switch --job`` reads it: the plan (written
        by :func:`prepare`), exchange kind (``mode``), address, timeouts, link, faults and
        ``secret_file``. UDP only."""
        switch = cls.__new__(cls)
        switch._native = _native.Switch.from_job(os.fspath(path), switch_memory=switch_memory)
        return switch

    @property
    def address(self) -> str:
        """Where workers connect (``host:port``)."""
        return self._native.address

    @property
    def plan(self) -> str:
        """The plan folder it serves (a worker of the job opens the same folder)."""
        return os.fspath(self._native.plan)

    @property
    def kind(self) -> str:
        """The exchange kind it serves: give its workers the same (``Worker(..., kind)``)."""
        return self._native.kind

    @property
    def running(self) -> bool:
        return self._native.running

    def wait(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Wait until every worker has said goodbye; the switch's report, or ``None`` if
        ``timeout`` seconds passed first. Raises :class:`SwitchgnnError` if the job failed."""
        report = self._native.wait(timeout)
        return None if report is None else json.loads(report)

    def stop(self) -> Optional[dict]:
        """Stop serving now; the report. Raises :class:`SwitchgnnError` if the job had
        failed."""
        report = self._native.stop()
        return None if report is None else json.loads(report)

    def __enter__(self) -> "Switch":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.stop()
        else:
            # The block's own exception says more than the switch's view of it.
            try:
                self.stop()
            except SwitchgnnError:
                pass


class Worker:
    """One worker of a job, connected to its switch (``switch``: ``host:port``) on creation.

    The plan fixes which vertices are whose: :attr:`vertices` are this worker's own (global
    ids, ascending) and :attr:`boundary` those with a neighbour on another worker, whose rows
    every exchange sends and receives.

    ``allreduce`` says where :meth:`all_reduce` runs: ``"switch"`` sums in the switch's own
    slots (SwitchML's protocol: fixed point at the scale the largest magnitude of any worker
    allows, so within ``world / (2·scale)`` of the float sum, bit-identical on every worker);
    ``"tcp"`` through the service beside it (float sums in rank order, in float64).
    """

    def __init__(
        self,
        plan,
        rank: int,
        switch: str,
        kind: str = "switchgnn",
        *,
        job: int = 1,
        bind: str = "127.0.0.1:0",
        loss: float = 0.0,
        seed: int = 0,
        join_timeout: float = 20.0,
        peer_timeout: float = 10.0,
        secret: "Optional[str | bytes]" = None,
        allreduce: str = "switch",
    ):
        self._native = _native.Worker(
            os.fspath(plan),
            int(rank),
            switch,
            kind,
            job=job,
            bind=bind,
            loss=loss,
            seed=seed,
            join_timeout=join_timeout,
            peer_timeout=peer_timeout,
            secret=_secret(secret),
            allreduce=allreduce,
        )
        self.boundary = self._native.boundary
        self.vertices = self._native.vertices

    @classmethod
    def from_job(cls, path, rank: int, *, switch: Optional[str] = None) -> "Worker":
        """Worker ``rank`` of a job file, as ``switchgnn train --job`` reads it: the plan,
        exchange kind, switch address (or ``switch``), bind address, timeouts, link, faults
        and ``secret_file``. UDP only."""
        worker = cls.__new__(cls)
        worker._native = _native.Worker.from_job(os.fspath(path), int(rank), switch=switch)
        worker.boundary = worker._native.boundary
        worker.vertices = worker._native.vertices
        return worker

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def world(self) -> int:
        return self._native.world

    @property
    def widths(self) -> list:
        """The width each layer exchanges."""
        return self._native.widths

    @property
    def plan(self) -> str:
        """The plan folder this worker joined with."""
        return os.fspath(self._native.plan)

    def exchange(self, layer: int, rows, backward: bool = False, out=None) -> np.ndarray:
        """Exchange one layer: ``rows`` holds one row per boundary vertex (in the order of
        :attr:`boundary`, the layer's width wide); returns, per boundary vertex, the sum of
        its remote neighbours' rows. ``backward`` marks the transposed exchange of gradients.
        ``out`` (a C-contiguous ``float32`` array of the same shape) is filled in place and
        returned instead of a new array. Every worker of the job must make the same calls in
        the same order."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if out is None:
            out = np.empty(rows.shape, dtype=np.float32)
        else:
            _check_writable_float32(out, "out")
        self._native.exchange_into(int(layer), rows, out, bool(backward))
        return out

    def all_reduce(self, values, op: str = "sum") -> np.ndarray:
        """Sum (or, with ``op="max"``, take the maximum of) ``values`` across every worker,
        in place: ``values`` must be a writable C-contiguous ``float32`` array (any shape).
        Every worker gets the same bits: in the switch, the fixed-point sum (or the exact
        maximum); over tcp, the rank-ordered sum in float64, rounded once."""
        _check_writable_float32(values, "values")
        self._native.all_reduce(values.reshape(-1), op)
        return values

    def stats(self) -> dict:
        """Counters of the exchanges and all-reduces so far (and of the socket, once
        closed)."""
        return json.loads(self._native.stats())

    def close(self) -> None:
        """Say goodbye to the switch and the all-reduce service."""
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
