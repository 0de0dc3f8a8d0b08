"""Plans from DGL partitions (``dgl.distributed.partition_graph``).

DGL reshuffles vertex ids so that partition ``i`` owns one contiguous range of them (its
``node_map``); each partition's graph holds its inner vertices' in-edges, with every vertex's
reshuffled global id in ``ndata[dgl.NID]``. The plan is made in those global ids, so a worker's
:attr:`switchgnn.Worker.boundary` is directly a set of DGL global ids.

A launcher of a BNS-GCN-style trainer needs two lines: :func:`serve` writes the plan beside the
partitions (the feature width from the folder's ``meta.json``, as BNS-GCN's partitioning writes
it, or from the partitions' own features) and starts the switch; the workers get its
:attr:`~switchgnn.Switch.plan` and :attr:`~switchgnn.Switch.address`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from . import KINDS, Switch, prepare
from .sampling import PAIRS_FILE, pair_graph, write_pairs

__all__ = [
    "feature_width",
    "global_edges",
    "layer_widths",
    "part_config",
    "prepare_partitions",
    "serve",
    "SOFTWARE_SWITCH_KIND",
]

#: Where :func:`prepare_partitions` writes the plan unless told: this folder, beside the
#: partitions' own.
PLAN_FOLDER = "switchgnn-plan"
#: Where it writes a pair plan (``sampling=True``) unless told.
SAMPLING_PLAN_FOLDER = "switchgnn-plan-sampling"


def part_config(partitions: "os.PathLike[str] | str") -> Path:
    """The JSON file ``partition_graph`` wrote: ``partitions`` itself, or the one such file in
    the folder ``partitions`` (BNS-GCN's ``<part_path>/<graph_name>``, which also holds its
    ``meta.json``)."""
    path = Path(partitions)
    if not path.is_dir():
        return path
    found = [p for p in sorted(path.glob("*.json")) if p.name != "meta.json"]
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise ValueError(
            f"{path}: expected one partition config (the .json that partition_graph writes) "
            f"besides meta.json, found {names}; pass the config file itself"
        )
    return found[0]


def feature_width(partitions: "os.PathLike[str] | str") -> int:
    """The input features' width: ``n_feat`` of the ``meta.json`` beside the partition config
    (BNS-GCN's partitioning writes ``{"n_feat", "n_class", "n_train"}`` there), or else the
    width of partition 0's ``feat`` node data."""
    config = part_config(partitions)
    meta = config.parent / "meta.json"
    if meta.exists():
        values = json.loads(meta.read_text())
        if "n_feat" not in values:
            raise ValueError(f"{meta} has no n_feat (BNS-GCN writes n_feat, n_class, n_train)")
        return int(values["n_feat"])
    import dgl

    node_feats, _ = dgl.distributed.load_partition_feats(str(config), 0, load_edges=False)
    widths = {k: v.shape[1] for k, v in node_feats.items() if k.split("/")[-1] == "feat"}
    if len(widths) != 1:
        raise ValueError(
            f"{config}: no meta.json beside it and no single 'feat' node data in partition 0 "
            f"(found {sorted(node_feats)}); give feature_dims"
        )
    return int(next(iter(widths.values())))


def global_edges(part_config: "os.PathLike[str] | str"):
    """The whole graph's edges in DGL's reshuffled global ids, and the owner of every vertex,
    read back from every partition (each edge once: the in-edges of each partition's inner
    vertices). Returns ``(num_vertices, src, dst, owner)``."""
    import dgl

    config = json.loads(Path(part_config).read_text())
    parts = int(config["num_parts"])
    node_map = config["node_map"]
    ranges = node_map[next(iter(node_map))] if isinstance(node_map, dict) else node_map
    ranges = np.asarray(ranges, dtype=np.int64)
    if ranges.ndim != 2 or len(ranges) != parts:
        raise ValueError(
            f"{part_config}: expected a node_map with one [start, end) range per partition "
            "(a homogeneous graph partitioned with reshuffling)"
        )
    num_vertices = int(ranges[-1, 1])
    owner = np.repeat(np.arange(parts, dtype=np.int64), ranges[:, 1] - ranges[:, 0])
    src, dst = [], []
    for part in range(parts):
        graph = dgl.distributed.load_partition(str(part_config), part)[0]
        ids = graph.ndata[dgl.NID]
        inner = graph.ndata["inner_node"].bool()
        u, v = graph.edges()
        mine = inner[v]
        src.append(ids[u[mine]].numpy().astype(np.int64))
        dst.append(ids[v[mine]].numpy().astype(np.int64))
    return num_vertices, np.concatenate(src), np.concatenate(dst), owner


def layer_widths(partitions, hidden: int, layers: int) -> list:
    """The width each layer exchanges in a BNS-GCN-style model of ``layers`` aggregating
    layers: the input features' (:func:`feature_width`; with ``use_pp``, the precomputation's
    exchange), then ``hidden`` for every other layer. This is BNS-GCN's
    ``layer_size[:n_layers - n_linear]``, the list its ``init_buffer`` gets."""
    if int(layers) < 1 or int(hidden) < 1:
        raise ValueError(f"layers ({layers}) and hidden ({hidden}) must be at least 1")
    return [feature_width(partitions)] + [int(hidden)] * (int(layers) - 1)


def prepare_partitions(
    partitions: "os.PathLike[str] | str",
    out_dir: "Optional[os.PathLike[str] | str]" = None,
    feature_dims=None,
    *,
    hidden: Optional[int] = None,
    layers: Optional[int] = None,
    kinds=KINDS,
    sampling: bool = False,
    **options,
) -> dict:
    """Write the plan of a DGL-partitioned graph to ``out_dir`` (by default ``switchgnn-plan``
    in the partitions' folder); see :func:`switchgnn.prepare` for the options. ``partitions``
    is the JSON file ``partition_graph`` wrote or its folder. The widths are ``feature_dims``,
    or else :func:`layer_widths` of ``hidden`` and ``layers`` (the feature width read from the
    folder). Self-loops (which BNS-GCN adds) are ignored: they never cross workers. The
    summary's ``plan`` is the folder written.

    ``sampling=True`` writes a pair plan instead (:mod:`switchgnn.sampling`: one row per
    boundary vertex and receiving peer, by default in ``switchgnn-plan-sampling``), which
    BNS-GCN's boundary sampling (``p < 1``) needs; at ``p = 1`` the plain plan sends fewer
    rows wherever a vertex has neighbours on several peers."""
    config = part_config(partitions)
    if feature_dims is None:
        if hidden is None or layers is None:
            raise ValueError("give feature_dims, or hidden and layers (the feature width is read)")
        feature_dims = layer_widths(config, hidden, layers)
    elif hidden is not None or layers is not None:
        raise ValueError("give feature_dims or hidden and layers, not both")
    folder = SAMPLING_PLAN_FOLDER if sampling else PLAN_FOLDER
    out = Path(out_dir) if out_dir is not None else config.parent / folder
    n, src, dst, owner = global_edges(config)
    workers = int(json.loads(config.read_text())["num_parts"])
    if sampling:
        n, src, dst, owner, pairs = pair_graph(n, src, dst, owner, workers)
    options.setdefault("workers", workers)
    summary = prepare(n, src, dst, owner, feature_dims, out, kinds=kinds, **options)
    if sampling:
        write_pairs(out, pairs)
    else:
        # A pair map left by an earlier pair plan in this folder would describe another plan.
        (out / PAIRS_FILE).unlink(missing_ok=True)
    summary["plan"] = os.fspath(out)
    summary["sampling"] = bool(sampling)
    return summary


#: What :func:`serve`'s switch runs by default: host-only pre-aggregation (each worker sends
#: the owner of each remote destination one partial sum), forwarded by the switch. A software
#: switch costs per packet, and the in-network kinds send a packet per boundary vertex (per 64
#: lanes) where this kind packs rows into full frames: measured under BNS-GCN (hidden 16,
#: docs/python.md), Amazon-Computers x 4 took 0.83-0.87x gloo's epoch with it and 1.11-1.21x
#: with ``switchgnn``. A Tofino runs the in-network kinds at line rate; that is where they pay.
SOFTWARE_SWITCH_KIND = "host-reduce"


def serve(
    partitions: "os.PathLike[str] | str",
    *,
    hidden: int,
    layers: int,
    kind: str = SOFTWARE_SWITCH_KIND,
    out_dir: "Optional[os.PathLike[str] | str]" = None,
    sampling: bool = False,
    chip: Optional[str] = None,
    **switch_options,
) -> Switch:
    """The launcher's line: the plan of ``partitions`` for ``layers`` aggregating layers of
    width ``hidden`` (:func:`prepare_partitions`, the one ``kind``), and its switch, serving
    in a thread of this process. Give the workers ``switch.plan``, ``switch.address`` and
    ``switch.kind``; the other keywords go to :class:`switchgnn.Switch`.

    The default kind is :data:`SOFTWARE_SWITCH_KIND`, the fastest through this software
    switch; ``kind="switchgnn"`` runs SwitchGNN's in-switch aggregation instead.
    ``sampling=True`` (BNS-GCN's ``--sampling-rate`` below 1) serves a pair plan
    (:mod:`switchgnn.sampling`). ``kind="hybrid"`` or ``"auto"`` weighs the kinds on ``chip``
    (see :func:`switchgnn.prepare`; by default the smallest real chip that hosts the workers)."""
    verdict = {} if chip is None else {"chip": chip}
    summary = prepare_partitions(
        partitions, out_dir, hidden=hidden, layers=layers, kinds=[kind], sampling=sampling,
        **verdict,
    )
    return Switch(summary["plan"], kind, **switch_options)
