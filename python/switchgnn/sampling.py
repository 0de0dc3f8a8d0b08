"""Plans for boundary sampling (BNS-GCN's ``p < 1``): one row per (boundary vertex, peer).

BNS-GCN samples, every epoch, a fraction of the rows each worker sends each peer and scales
what it sends peer ``j`` by ``1 / ratio[j]``, a factor per ordered pair of workers. A plain
plan sends one row per boundary vertex to every peer that needs it (a multicast, or copies of
one value), so it cannot carry a factor per receiving peer, and the receiver gets one sum over
every peer, so it cannot scale the gradients it sends back per peer either.

A *pair plan* is the plan of a derived graph with one vertex per (boundary vertex ``u``,
receiving peer ``j``), owned by ``u``'s owner, and an edge ``(u, j) -- (v, i)`` for every
edge ``u -- v`` between workers ``i`` and ``j``. Each derived vertex talks to one peer only:
the sender gives the row of ``(u, j)`` the pair's factor (0 where ``u`` is not in this epoch's
sample for ``j``), and the sum a receiver gets at ``(v, i)`` is peer ``i``'s alone, so the
backward pass can apply the same factor to what comes back. The exchange itself is unchanged
(any kind, loss recovery and exactly-once as for any plan). An unsampled row is a row of
zeros: the host kinds send it as a zero record (a record header, no lanes), and a partial sum
of such rows too, so the saving on the wire is had there; the in-network kinds still send its
chunks in full.

The map from derived vertices back to ``(vertex, peer)`` is saved beside the plan
(:data:`PAIRS_FILE`), written atomically and checked against the plan when read.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["PAIRS_FILE", "Pairs", "pair_graph", "read_pairs", "write_pairs"]

#: The file of a pair plan's folder that maps its vertices to (vertex, peer).
PAIRS_FILE = "sampling-pairs.npz"
#: Its format; a reader refuses any other.
PAIRS_FORMAT = "switchgnn-sampling-pairs/1"


class Pairs(NamedTuple):
    """A pair plan's vertices: derived vertex ``k`` is the row of ``vertex[k]`` (a vertex of
    the original graph) for worker ``peer[k]``, and is owned by ``owner[k]`` (``vertex``'s
    owner). Sorted by vertex, then peer."""

    vertex: np.ndarray
    peer: np.ndarray
    owner: np.ndarray


def pair_graph(num_vertices: int, src, dst, owner, workers=None):
    """The derived graph of :mod:`switchgnn.sampling` for a graph (``src -> dst`` edges, as
    :func:`switchgnn.prepare` takes them) split by ``owner`` among ``workers`` (by default
    one more than the largest owner). Returns
    ``(num_pairs, src, dst, owner, pairs)``: the derived graph's edges and owners, ready for
    :func:`switchgnn.prepare`, and :class:`Pairs` naming each derived vertex."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    owner = np.asarray(owner, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise ValueError(f"src and dst must be two lists of one length ({src.shape}, {dst.shape})")
    if len(owner) != num_vertices:
        raise ValueError(f"owner has {len(owner)} entries for {num_vertices} vertices")
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_vertices):
        raise ValueError(f"an edge names a vertex outside 0..{num_vertices}")
    cross = owner[src] != owner[dst]
    src, dst = src[cross], dst[cross]
    if workers is None:
        workers = int(owner.max()) + 1 if len(owner) else 0
    elif len(owner) and int(owner.max()) >= workers:
        raise ValueError(f"owner names worker {int(owner.max())} of {workers}")
    # A pair's key, vertex-major: sorting keys sorts by vertex, then peer.
    key_u = src * workers + owner[dst]
    key_v = dst * workers + owner[src]
    keys = np.unique(np.concatenate([key_u, key_v]))
    pairs = Pairs(vertex=keys // workers, peer=keys % workers, owner=owner[keys // workers])
    new_src = np.searchsorted(keys, key_u)
    new_dst = np.searchsorted(keys, key_v)
    return len(keys), new_src, new_dst, pairs.owner, pairs


def _plan_counts(plan) -> tuple:
    from . import plan_info

    info = plan_info(plan)
    return int(info["vertices"]), int(info["workers"])


def write_pairs(plan: "os.PathLike[str] | str", pairs: Pairs) -> Path:
    """Save ``pairs`` in the pair plan's folder ``plan`` (atomically: a temporary file renamed
    into place); returns its path."""
    folder = Path(plan)
    path = folder / PAIRS_FILE
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".sampling-pairs.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                format=np.array(PAIRS_FORMAT),
                vertex=pairs.vertex.astype(np.int64),
                peer=pairs.peer.astype(np.int64),
                owner=pairs.owner.astype(np.int64),
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return path


def read_pairs(plan: "os.PathLike[str] | str"):
    """The :class:`Pairs` of a pair plan, or ``None`` for a plain plan (no such file). Raises
    ``ValueError`` naming the file if it is of another format or does not fit the plan."""
    from . import owners

    path = Path(plan) / PAIRS_FILE
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            found = str(f["format"]) if "format" in f.files else "no format"
            arrays = {k: f[k] for k in ("vertex", "peer", "owner") if k in f.files}
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(f"{path}: not a readable pair map ({e})") from e
    if found != PAIRS_FORMAT:
        raise ValueError(f"{path}: format {found!r}, this build reads {PAIRS_FORMAT!r}")
    if len(arrays) != 3:
        raise ValueError(f"{path}: not a pair map (it lacks vertex, peer or owner)")
    pairs = Pairs(**arrays)
    vertices, workers = _plan_counts(plan)
    lengths = {len(pairs.vertex), len(pairs.peer), len(pairs.owner)}
    if lengths != {vertices}:
        raise ValueError(
            f"{path}: {sorted(lengths)} entries for a plan of {vertices} vertices (a pair map of "
            "another plan?)"
        )
    if not np.array_equal(owners(plan).astype(np.int64), pairs.owner):
        raise ValueError(f"{path}: its owners are not the plan's (a pair map of another plan?)")
    bad = (pairs.peer < 0) | (pairs.peer >= workers) | (pairs.peer == pairs.owner)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{path}: entry {k} sends vertex {int(pairs.vertex[k])} of worker "
            f"{int(pairs.owner[k])} to worker {int(pairs.peer[k])}, not a peer of {workers}"
        )
    return pairs
