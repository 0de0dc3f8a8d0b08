"""Data and point-to-point helpers of the BNS-GCN-shaped trainer (gloo, CPU)."""

import json
import os

import dgl
import numpy as np
import torch
import torch.distributed as dist


class TransferTag:
    NODE = 0
    FEAT = 1
    DEG = 2


def load_data(path):
    """A gnn-benchmark npz: the symmetric graph with one self-loop per vertex (as BNS-GCN
    trains), dense features, labels and the Planetoid masks or a seeded 60/20/20 split."""
    z = np.load(path)
    n = int(z["adj_shape"][0])
    src = np.repeat(np.arange(n), np.diff(z["adj_indptr"]))
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(z["adj_indices"].astype(np.int64))),
                  num_nodes=n)
    g = dgl.add_self_loop(dgl.remove_self_loop(g))
    feat = np.zeros(tuple(z["attr_shape"]), dtype=np.float32)
    feat[np.repeat(np.arange(feat.shape[0]), np.diff(z["attr_indptr"])), z["attr_indices"]] = (
        z["attr_data"])
    g.ndata["feat"] = torch.from_numpy(feat)
    g.ndata["label"] = torch.from_numpy(z["labels"].astype(np.int64))
    if "train_mask" in z.files:
        masks = [z[m] for m in ("train_mask", "val_mask", "test_mask")]
    else:
        order = np.random.default_rng(0).permutation(n)
        masks = [np.isin(np.arange(n), part)
                 for part in np.split(order, [int(0.6 * n), int(0.8 * n)])]
    for name, mask in zip(("train_mask", "val_mask", "test_mask"), masks):
        g.ndata[name] = torch.from_numpy(np.asarray(mask, dtype=bool))
    return g


def graph_partition(args):
    """METIS parts in ``<part_path>/<graph_name>``, with BNS-GCN's meta.json beside them."""
    g = load_data(args.dataset)
    folder = os.path.join(args.part_path, args.graph_name)
    if not os.path.exists(os.path.join(folder, args.graph_name + ".json")):
        with g.local_scope():
            g.ndata["in_deg"] = g.in_degrees()
            g.ndata["out_deg"] = g.out_degrees()
            dgl.distributed.partition_graph(g, args.graph_name, args.n_partitions, folder,
                                            part_method="metis", balance_edges=False)
    meta = {"n_feat": g.ndata["feat"].shape[1], "n_class": int(g.ndata["label"].max()) + 1,
            "n_train": int(g.ndata["train_mask"].sum())}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)


def load_partition(args, rank):
    """Partition ``rank``'s graph, its vertices' data by plain names (``feat``, ``label``,
    ``in_deg``, ``out_deg``, the masks, ``inner_node``, ``part_id``, ``dgl.NID``) and its
    partition book; n_feat, n_class and n_train from meta.json into ``args``."""
    folder = os.path.join(args.part_path, args.graph_name)
    config = os.path.join(folder, args.graph_name + ".json")
    part, feats, _, gpb, _, _, _ = dgl.distributed.load_partition(config, rank)
    data = {key.split("/", 1)[1]: value for key, value in feats.items()}
    for mask in ("train_mask", "val_mask", "test_mask"):
        data[mask] = data[mask].bool()
    data[dgl.NID] = part.ndata[dgl.NID]
    data["part_id"] = part.ndata["part_id"]
    data["inner_node"] = part.ndata["inner_node"].bool()
    part.ndata.clear()
    part.edata.clear()
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    args.n_feat, args.n_class, args.n_train = meta["n_feat"], meta["n_class"], meta["n_train"]
    return part, data, gpb


def get_layer_size(n_feat, n_hidden, n_class, n_layers):
    return [n_feat] + [n_hidden] * (n_layers - 1) + [n_class]


def exchange_with_peers(send, recv_shape, dtype, tag):
    """Send ``send[j]`` to every peer ``j`` and receive one tensor of ``recv_shape[j]`` from
    each, peer after peer around the ring; entries for this rank stay ``None``."""
    rank, size = dist.get_rank(), dist.get_world_size()
    got = [None] * size
    for step in range(1, size):
        right, left = (rank + step) % size, (rank - step) % size
        got[left] = torch.empty(recv_shape[left], dtype=dtype)
        request = dist.isend(send[right].to(dtype).contiguous(), right, tag=tag)
        dist.recv(got[left], left, tag=tag)
        request.wait()
    return got


def data_transfer(data, recv_shape, tag, dtype=torch.float):
    return exchange_with_peers(data, recv_shape, dtype, tag)


def get_boundary(node_dict, gpb):
    """Per peer, the local rows it needs from this partition (its halo here), ascending."""
    rank, size = dist.get_rank(), dist.get_world_size()
    wanted, counts = [None] * size, [None] * size
    for j in range(size):
        if j != rank:
            start = gpb.partid2nids(j)[0].item()
            ids = node_dict[dgl.NID][node_dict["part_id"] == j] - start
            wanted[j] = torch.sort(ids)[0]
            counts[j] = torch.tensor([len(ids)])
    sizes = exchange_with_peers(counts, [(1,)] * size, torch.int64, TransferTag.NODE)
    shapes = [None if s is None else (int(s[0]),) for s in sizes]
    got = exchange_with_peers(wanted, shapes, torch.int64, TransferTag.NODE)
    return [None if b is None else torch.sort(b)[0] for b in got]
