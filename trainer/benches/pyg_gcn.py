"""PyTorch Geometric's GCN on a graph exported by trainer/benches/reference.rs.

Reads <dir>/meta.json and the raw little-endian arrays beside it, trains the model of the
Kipf & Welling example (GCNConv layers with cached normalisation, dropout on every layer's input,
ReLU, Adam with weight decay on the first layer only) and prints one JSON line: the epoch time
(forward + backward + optimiser step) for each way of passing the graph, and the test accuracy at
the epoch of best validation accuracy.

Graph modes:
  edge_index  the usual PyG path: gather and scatter over an edge list
  csr         a torch.sparse_csr adjacency passed instead of edge_index (one sparse product)
"""

import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv


def array(folder, name, dtype):
    return torch.from_numpy(np.fromfile(f"{folder}/{name}", dtype=dtype))


class GCN(torch.nn.Module):
    def __init__(self, dims, dropout):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            GCNConv(a, b, cached=True) for a, b in zip(dims[:-1], dims[1:])
        )
        self.dropout = dropout

    def forward(self, x, graph):
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv(x, graph)
            if i < last:
                x = x.relu()
        return x


def run(meta, x, y, split, graph):
    torch.manual_seed(meta["seed"])
    dims = [meta["features"]] + [meta["hidden"]] * (meta["layers"] - 1) + [meta["classes"]]
    model = GCN(dims, meta["dropout"])
    opt = torch.optim.Adam(
        [
            dict(params=model.convs[0].parameters(), weight_decay=meta["weight_decay"]),
            dict(params=model.convs[1:].parameters(), weight_decay=0.0),
        ],
        lr=meta["lr"],
    )
    train, val, test = split
    times, best = [], (-1.0, 0.0)
    for epoch in range(meta["warmup"] + meta["epochs"]):
        started = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x, graph)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - started
        if epoch >= meta["warmup"]:
            times.append(elapsed)
        model.eval()
        with torch.no_grad():
            pred = model(x, graph).argmax(-1)
        acc = [float((pred[s] == y[s]).float().mean()) if len(s) else 0.0 for s in (val, test)]
        if acc[0] > best[0]:
            best = (acc[0], acc[1])
    return {"median_seconds": float(np.median(times)), "mean_seconds": float(np.mean(times)),
            "test_accuracy": best[1]}


def main():
    folder = sys.argv[1]
    with open(f"{folder}/meta.json") as f:
        meta = json.load(f)
    torch.set_num_threads(meta["threads"])
    n, width = meta["vertices"], meta["features"]

    rowptr = array(folder, "rowptr.i64", np.int64)
    col = array(folder, "col.i64", np.int64)
    fptr = array(folder, "feature_rowptr.i64", np.int64)
    fcol = array(folder, "feature_col.i64", np.int64)
    fval = array(folder, "feature_val.f32", np.float32)
    # The same preprocessing as the Rust side: rows divided by their sums where asked.
    if meta["row_normalise"]:
        counts = fptr[1:] - fptr[:-1]
        sums = torch.zeros(n).index_add_(0, torch.repeat_interleave(torch.arange(n), counts), fval)
        scale = torch.where(sums == 0, torch.zeros_like(sums), 1.0 / sums)
        fval = fval * torch.repeat_interleave(scale, counts)
    x = torch.sparse_csr_tensor(fptr, fcol, fval, (n, width)).to_dense()
    y = array(folder, "labels.i64", np.int64)
    split = [array(folder, f"{s}.i64", np.int64) for s in ("train", "val", "test")]

    rows = torch.repeat_interleave(torch.arange(n), rowptr[1:] - rowptr[:-1])
    edge_index = torch.stack([rows, col])
    adj = torch.sparse_csr_tensor(rowptr, col, torch.ones(len(col)), (n, n))

    results = {}
    widest = max([meta["hidden"], meta["classes"]])
    # gather/scatter keeps one message per edge and layer; skip it where that would not fit.
    if (len(col) + n) * widest * 4 * 3 <= meta["edge_index_budget_bytes"]:
        results["edge_index"] = run(meta, x, y, split, edge_index)
    results["csr"] = run(meta, x, y, split, adj)
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "results": results}))


if __name__ == "__main__":
    main()
