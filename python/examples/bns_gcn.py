"""A BNS-GCN-shaped full-graph GCN trainer in DGL, with its communication context either the
stock one (halo copies over torch.distributed / gloo, as BNS-GCN does with p = 1) or
switchgnn's (sums of remote neighbours through the software switch), chosen by one flag:

    python python/examples/bns_gcn.py --exchange stock
    python python/examples/bns_gcn.py --exchange switchgnn

Like BNS-GCN: the graph gets self-loops and is partitioned by dgl.distributed.partition_graph;
one process per partition (torch.multiprocessing, gloo); the first layer's aggregation is
precomputed once (BNS-GCN's use_pp); each epoch a 2-layer GCN runs forward over the per-epoch
graph (local vertices plus the buffer's extra rows), the loss is a sum over local training
vertices, and the reducer sums weight gradients divided by the global number of training
vertices. ``--reference`` also trains the same model on the whole graph in one process and
prints both runs' losses side by side.

The lines that differ between the two modes are marked ``# switchgnn:``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import dgl.function as fn  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ----------------------------------------------------------------------------------------------
# The stock communication context: halo copies over gloo, as BNS-GCN's Buffer / Reducer do.


def ring_exchange(send: dict, recv_shapes: dict, dtype) -> dict:
    """Send ``send[j]`` to every peer ``j`` and receive a tensor of ``recv_shapes[j]`` from
    each, in BNS-GCN's ring order."""
    rank, size = dist.get_rank(), dist.get_world_size()
    got = {}
    for i in range(1, size):
        right, left = (rank + i) % size, (rank - i) % size
        got[left] = torch.empty(recv_shapes[left], dtype=dtype)
        request = dist.isend(send[right].to(dtype).contiguous(), right)
        dist.recv(got[left], left)
        request.wait()
    return got


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat, buffer):
        ctx.buffer, ctx.rows = buffer, feat.shape[0]
        width = feat.shape[1]
        send = {j: feat.detach()[b] for j, b in buffer.boundary.items()}
        shapes = {j: (len(h), width) for j, h in buffer.halo.items()}
        got = ring_exchange(send, shapes, feat.dtype)
        return torch.cat([feat] + [got[j] for j in sorted(got)])

    @staticmethod
    def backward(ctx, grad):
        buffer = ctx.buffer
        grad_feat = grad[: ctx.rows].clone()
        width = grad.shape[1]
        send, at = {}, ctx.rows
        for j in sorted(buffer.halo):
            send[j] = grad[at : at + len(buffer.halo[j])]
            at += len(buffer.halo[j])
        shapes = {j: (len(b), width) for j, b in buffer.boundary.items()}
        got = ring_exchange(send, shapes, grad.dtype)
        for j, rows in got.items():
            grad_feat.index_add_(0, buffer.boundary[j], rows)
        return grad_feat, None


class StockBuffer:
    """Halo copies: ``update`` returns the local rows followed by every halo vertex's row, peer
    by peer; its backward returns the halo rows' gradients to their owners."""

    def __init__(self, halo: dict, boundary: dict):
        self.halo, self.boundary = halo, boundary

    def init_buffer(self, num_in, ratio, f_send_shape, f_recv_shape, layer_size, use_pp=False,
                    backend="gloo"):
        self.num_in = num_in

    def set_selected(self, selected):
        pass

    def update(self, layer, feat):
        return _HaloExchange.apply(feat, self)


class StockReducer:
    def init(self, model):
        self._params = list(model.named_parameters())
        self._pending = {}

    def reduce(self, param, name, data, n_train):
        self._pending[name] = (param, data.detach() / n_train)

    def synchronize(self):
        for name, _ in self._params:
            if name in self._pending:
                param, grad = self._pending.pop(name)
                dist.all_reduce(grad, op=dist.ReduceOp.SUM)
                param.grad = grad


class Context:
    buffer = None
    reducer = None


ctx = Context()


# ----------------------------------------------------------------------------------------------
# The model: BNS-GCN's GCN layer, aggregation first, over a ('_U', '_E', '_V') graph.


class GCNLayer(nn.Module):
    def __init__(self, width_in, width_out, use_pp):
        super().__init__()
        self.linear = nn.Linear(width_in, width_out)
        self.use_pp = use_pp

    def forward(self, graph, feat, in_norm, out_norm):
        if self.use_pp:
            return self.linear(feat)
        with graph.local_scope():
            graph.nodes["_U"].data["h"] = feat / out_norm[:, None]
            graph["_E"].update_all(fn.copy_u("h", "m"), fn.sum("m", "h"), etype="_E")
            return self.linear(graph.nodes["_V"].data["h"] / in_norm[:, None])


class GCN(nn.Module):
    def __init__(self, widths, dropout):
        super().__init__()
        self.layers = nn.ModuleList(
            GCNLayer(widths[i], widths[i + 1], use_pp=i == 0) for i in range(len(widths) - 1)
        )
        self.dropout = dropout

    def forward(self, graph, feat, in_norm, out_norm):
        h = feat
        for i, layer in enumerate(self.layers):
            h = F.dropout(h, self.dropout, self.training)
            if i > 0 and ctx.buffer is not None:
                h = ctx.buffer.update(i, h)
            h = layer(graph, h, in_norm, out_norm)
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h


def aggregate(graph, feat, in_norm, out_norm):
    """GCN's normalised sum once: BNS-GCN's precomputed first layer."""
    with graph.local_scope():
        graph.nodes["_U"].data["h"] = feat / out_norm[:, None]
        graph["_E"].update_all(fn.copy_u("h", "m"), fn.sum("m", "h"), etype="_E")
        return graph.nodes["_V"].data["h"] / in_norm[:, None]


# ----------------------------------------------------------------------------------------------
# Data


def load_graph(path):
    """A gnn-benchmark npz (Cora, CiteSeer, ...): the symmetric graph with BNS-GCN's
    self-loops, features, labels, Planetoid masks (or a seeded 60/20/20 split)."""
    z = np.load(path)
    n = int(z["adj_shape"][0])
    src = np.repeat(np.arange(n), np.diff(z["adj_indptr"]))
    graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(z["adj_indices"].astype(np.int64))),
                      num_nodes=n)
    graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    feat = np.zeros(tuple(z["attr_shape"]), dtype=np.float32)
    rows = np.repeat(np.arange(feat.shape[0]), np.diff(z["attr_indptr"]))
    feat[rows, z["attr_indices"]] = z["attr_data"]
    graph.ndata["feat"] = torch.from_numpy(feat)
    graph.ndata["label"] = torch.from_numpy(z["labels"].astype(np.int64))
    if "train_mask" in z.files:
        masks = [z[m] for m in ("train_mask", "val_mask", "test_mask")]
    else:
        order = np.random.default_rng(0).permutation(n)
        cut = [int(0.6 * n), int(0.8 * n)]
        masks = [np.isin(np.arange(n), part) for part in np.split(order, cut)]
    for name, mask in zip(("train_mask", "val_mask", "test_mask"), masks):
        graph.ndata[name] = torch.from_numpy(mask.astype(bool))
    graph.ndata["in_deg"] = graph.in_degrees()
    graph.ndata["out_deg"] = graph.out_degrees()
    return graph


def full_graph_view(graph):
    """The whole graph as a ('_U', '_E', '_V') graph over the same vertices (the reference)."""
    u, v = graph.edges()
    n = graph.num_nodes()
    return dgl.heterograph({("_U", "_E", "_V"): (u, v)}, num_nodes_dict={"_U": n, "_V": n})


# ----------------------------------------------------------------------------------------------
# One worker


def stock_context(part, inner, ids, start, node_map):
    """BNS-GCN's halo bookkeeping: per peer, the halo vertices it owns (our local ids, by global
    id) and the local rows it needs from us; the per-epoch graph with every halo vertex as a
    source after the local ones."""
    halo_local = torch.nonzero(~inner).reshape(-1)
    halo_ids = ids[halo_local]
    owner = torch.bucketize(halo_ids, torch.tensor([r[1] for r in node_map]), right=True)
    rank, size = dist.get_rank(), dist.get_world_size()
    halo, need = {}, {}
    for j in range(size):
        if j == rank:
            continue
        mine = owner == j
        order = torch.argsort(halo_ids[mine])
        halo[j] = halo_local[mine][order]
        need[j] = halo_ids[mine][order] - node_map[j][0]
    counts = ring_exchange({j: torch.tensor([len(need[j])]) for j in need},
                           {j: (1,) for j in need}, torch.int64)
    wanted = ring_exchange(need, {j: (int(c[0]),) for j, c in counts.items()}, torch.int64)
    boundary = {j: w for j, w in wanted.items()}
    # Sources: local vertices, then halo vertices peer by peer.
    num_in = int(inner.sum())
    position = torch.full((part.num_nodes(),), -1, dtype=torch.int64)
    position[:num_in] = torch.arange(num_in)
    at = num_in
    for j in sorted(halo):
        position[halo[j]] = torch.arange(at, at + len(halo[j]))
        at += len(halo[j])
    u, v = part.edges()
    keep = inner[v]
    graph = dgl.heterograph({("_U", "_E", "_V"): (position[u[keep]], v[keep])},
                            num_nodes_dict={"_U": at, "_V": num_in})
    return StockBuffer(halo, boundary), StockReducer(), graph


def run_worker(rank, args, config, switch_address, port, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.parts)
    part, node_feat, _, gpb, _, _, _ = dgl.distributed.load_partition(config, rank)
    inner = part.ndata["inner_node"].bool()
    ids = part.ndata[dgl.NID]
    node_map = [tuple(int(x) for x in gpb.partid2nids(j)[[0, -1]]) for j in range(args.parts)]
    node_map = [(s, e + 1) for s, e in node_map]
    start, num_in = node_map[rank][0], int(inner.sum())
    assert torch.equal(ids[:num_in], torch.arange(start, start + num_in)), "inner vertices first"
    data = {k.split("/", 1)[1]: v for k, v in node_feat.items()}
    feat, label = data["feat"], data["label"]
    in_norm = data["in_deg"].float().sqrt()
    out_norm_inner = data["out_deg"].float().sqrt()

    if args.exchange == "switchgnn":
        import switchgnn                                                  # switchgnn:
        from switchgnn import bns                                         # switchgnn:
        worker = switchgnn.Worker(args.plan, rank, switch_address, args.kind,  # switchgnn:
                                  allreduce=args.allreduce)               # switchgnn:
        ctx.buffer, ctx.reducer = bns.Buffer(worker, ids[:num_in]), bns.Reducer(worker)  # switchgnn:
        graph = bns.construct_graph(dgl.node_subgraph(part, inner), ctx.buffer)  # switchgnn:
        out_norm = bns.construct_out_norm(out_norm_inner, ctx.buffer)     # switchgnn:
    else:
        ctx.buffer, ctx.reducer, graph = stock_context(part, inner, ids, start, node_map)
        halo_deg = ctx.buffer.update(0, data["out_deg"].float()[:, None])[num_in:, 0]
        out_norm = torch.cat([out_norm_inner, halo_deg.sqrt()])

    n_train = int(args.n_train)
    widths = [feat.shape[1], args.hidden, args.classes]
    torch.manual_seed(args.seed)
    model = GCN(widths, args.dropout)
    ctx.reducer.init(model)
    for name, param in model.named_parameters():
        param.register_hook(lambda grad, p=param, n=name: ctx.reducer.reduce(p, n, grad, n_train))
    ctx.buffer.init_buffer(num_in, [1.0] * args.parts, None, None, widths[:-1], use_pp=True,
                           backend="gloo")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # BNS-GCN's use_pp: the first layer's aggregation, once.
    with torch.no_grad():
        feat = aggregate(graph, ctx.buffer.update(0, feat), in_norm, out_norm)

    train, val, test = (data[m].bool() for m in ("train_mask", "val_mask", "test_mask"))
    history = []
    started = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        logits = model(graph, feat, in_norm, out_norm)
        loss = F.cross_entropy(logits[train], label[train], reduction="sum")
        optimizer.zero_grad()
        loss.backward()
        ctx.reducer.synchronize()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            predicted = model(graph, feat, in_norm, out_norm).argmax(1)
        figures = torch.tensor([loss.item()] + [
            float((predicted[m] == label[m]).sum()) for m in (train, val, test)
        ] + [float(m.sum()) for m in (train, val, test)], dtype=torch.float64)
        dist.all_reduce(figures)
        record = dict(epoch=epoch, loss=float(figures[0]) / n_train,
                      train_acc=float(figures[1] / figures[4]), val_acc=float(figures[2] / figures[5]),
                      test_acc=float(figures[3] / figures[6]))
        history.append(record)
        if rank == 0 and (epoch % 10 == 0 or epoch == args.epochs - 1):
            print(f"[{args.exchange}] epoch {epoch:3d} loss {record['loss']:.6f} "
                  f"train {record['train_acc']:.3f} val {record['val_acc']:.3f} "
                  f"test {record['test_acc']:.3f}", flush=True)
    seconds = time.perf_counter() - started
    if args.exchange == "switchgnn":
        stats = worker.stats()["totals"]
        worker.close()
    else:
        stats = {}
    if rank == 0:
        results.put(dict(history=history, seconds=seconds, exchange_stats=stats))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------


def train_reference(graph, args):
    """The same model and settings on the whole graph in one process."""
    torch.manual_seed(args.seed)
    widths = [graph.ndata["feat"].shape[1], args.hidden, args.classes]
    model = GCN(widths, args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    view = full_graph_view(graph)
    in_norm = graph.ndata["in_deg"].float().sqrt()
    out_norm = graph.ndata["out_deg"].float().sqrt()
    feat = aggregate(view, graph.ndata["feat"], in_norm, out_norm)
    label = graph.ndata["label"]
    masks = [graph.ndata[m] for m in ("train_mask", "val_mask", "test_mask")]
    n_train = int(masks[0].sum())
    saved, ctx.buffer = ctx.buffer, None
    history = []
    for epoch in range(args.epochs):
        model.train()
        logits = model(view, feat, in_norm, out_norm)
        loss = F.cross_entropy(logits[masks[0]], label[masks[0]], reduction="sum") / n_train
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            predicted = model(view, feat, in_norm, out_norm).argmax(1)
        accs = [int((predicted[m] == label[m]).sum()) / int(m.sum()) for m in masks]
        history.append(dict(epoch=epoch, loss=float(loss), train_acc=accs[0], val_acc=accs[1],
                            test_acc=accs[2]))
    ctx.buffer = saved
    return history


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    here = Path(__file__).resolve()
    shared = os.environ.get("SWITCHGNN_DATASETS", here.parents[3] / "shared" / "datasets")
    default_data = Path(shared) / "cora.npz"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default=str(default_data), help="a gnn-benchmark npz file")
    p.add_argument("--parts", type=int, default=4, help="workers (partitions)")
    p.add_argument("--exchange", choices=["stock", "switchgnn"], default="switchgnn")
    p.add_argument("--kind", default="switchgnn",
                   help="switchgnn's exchange kind: switchgnn, host, g3, strawman or reduce")
    p.add_argument("--allreduce", choices=["switch", "tcp"], default="switch",
                   help="where switchgnn's gradient all-reduce runs")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partition", choices=["metis", "random"], default="metis")
    p.add_argument("--reference", action="store_true",
                   help="also train on the whole graph in one process and compare")
    p.add_argument("--out", help="write the per-epoch figures as JSON here")
    args = p.parse_args(argv)
    if not Path(args.dataset).exists():
        sys.exit(f"error: {args.dataset} not found (give --dataset PATH to a gnn-benchmark npz)")

    graph = load_graph(args.dataset)
    args.classes = int(graph.ndata["label"].max()) + 1
    args.n_train = int(graph.ndata["train_mask"].sum())
    with tempfile.TemporaryDirectory() as tmp:
        dgl.distributed.partition_graph(graph, "graph", args.parts, tmp,
                                        part_method=args.partition, balance_edges=False)
        config = os.path.join(tmp, "graph.json")
        switch = None
        if args.exchange == "switchgnn":
            import switchgnn
            import switchgnn.dgl

            args.plan = os.path.join(tmp, "plan")
            switchgnn.dgl.prepare_partitions(config, args.plan,
                                             [graph.ndata["feat"].shape[1], args.hidden],
                                             kinds=[args.kind])
            switch = switchgnn.Switch(args.plan, args.kind)
        results = mp.get_context("spawn").SimpleQueue()
        port = free_port()
        mp.spawn(run_worker, args=(args, config, switch and switch.address, port, results),
                 nprocs=args.parts, join=True)
        outcome = results.get()
        if switch is not None:
            report = switch.wait(timeout=30)
            if report is None:
                sys.exit("error: the switch did not finish within 30 s of the workers")
            outcome["switch"] = report["counters"]
    outcome["args"] = {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str))}
    if args.reference:
        outcome["reference"] = train_reference(graph, args)
        worst = max(abs(a["loss"] - b["loss"]) / abs(b["loss"])
                    for a, b in zip(outcome["history"], outcome["reference"]))
        last, ref = outcome["history"][-1], outcome["reference"][-1]
        print(f"against one process: worst relative loss difference {worst:.2e}; test accuracy "
              f"{last['test_acc']:.4f} vs {ref['test_acc']:.4f}")
    print(f"{args.epochs} epochs in {outcome['seconds']:.2f} s ({args.exchange} exchange)")
    if args.out:
        Path(args.out).write_text(json.dumps(outcome, indent=1))


if __name__ == "__main__":
    main()
