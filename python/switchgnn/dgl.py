"""Plans from DGL partitions (``dgl.distributed.partition_graph``).

DGL reshuffles vertex ids so that partition ``i`` owns one contiguous range of them (its
``node_map``); each partition's graph holds its inner vertices' in-edges, with every vertex's
reshuffled global id in ``ndata[dgl.NID]``. The plan is made in those global ids, so a worker's
:attr:`switchgnn.Worker.boundary` is directly a set of DGL global ids.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from . import KINDS, prepare

__all__ = ["global_edges", "prepare_partitions"]


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


def prepare_partitions(
    part_config: "os.PathLike[str] | str",
    out_dir: "os.PathLike[str] | str",
    feature_dims,
    *,
    kinds=KINDS,
    **options,
) -> dict:
    """Write the plan of a DGL-partitioned graph (``part_config``: the JSON file
    ``partition_graph`` wrote) to ``out_dir``; see :func:`switchgnn.prepare` for the options.
    Self-loops (which BNS-GCN adds) are ignored: they never cross workers."""
    n, src, dst, owner = global_edges(part_config)
    return prepare(n, src, dst, owner, feature_dims, out_dir, kinds=kinds, **options)
