"""One worker of the BNS-GCN-shaped trainer: BNS-GCN's run() in outline (boundary and halo
bookkeeping over gloo, ``use_pp``'s precomputed first layer, per epoch a fresh sample of the
boundary and the per-epoch ('_U', '_E', '_V') graph, the loss a sum over local training
vertices, gradients through the reducer), on the CPU, with figures for the tests and the bench.
"""
import json
import numpy as np
import torch
import torch.distributed as dist
import time
import dgl
import dgl.function as fn
import torch.nn as nn
import torch.nn.functional as F

from helper import context as ctx
from helper.timer.timer import comm_timer
from helper.utils import (TransferTag, data_transfer, get_boundary, get_layer_size, load_data,
                          load_partition)


class GCNLayer(nn.Module):
    def __init__(self, width_in, width_out, use_pp):
        super().__init__()
        self.linear = nn.Linear(width_in, width_out)
        self.use_pp = use_pp

    def forward(self, graph, feat, in_norm, out_norm):
        if self.training and self.use_pp:
            return self.linear(feat)
        with graph.local_scope():
            if self.training:
                graph.nodes['_U'].data['h'] = feat / out_norm[:, None]
                graph['_E'].update_all(fn.copy_u('h', 'm'), fn.sum('m', 'h'), etype='_E')
                return self.linear(graph.nodes['_V'].data['h'] / in_norm[:, None])
            # Evaluation: the whole graph in one process.
            graph.ndata['h'] = feat / graph.out_degrees().float().sqrt()[:, None]
            graph.update_all(fn.copy_u('h', 'm'), fn.sum('m', 'h'))
            return self.linear(graph.ndata['h'] / graph.in_degrees().float().sqrt()[:, None])


class GCN(nn.Module):
    def __init__(self, layer_size, use_pp, dropout):
        super().__init__()
        self.layers = nn.ModuleList(GCNLayer(a, b, use_pp and i == 0)
                                    for i, (a, b) in enumerate(zip(layer_size, layer_size[1:])))
        self.use_pp, self.dropout = use_pp, dropout

    def forward(self, g, feat, in_norm=None, out_norm=None):
        h = feat
        for i, layer in enumerate(self.layers):
            h = F.dropout(h, self.dropout, self.training)
            if self.training and (i > 0 or not self.use_pp):
                h = ctx.buffer.update(i, h)
            h = layer(g, h, in_norm, out_norm)
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h


def get_in_out_graph(graph, node_dict):
    """The local graph (edges among inner vertices) and the halo's edges into inner ones."""
    inner = node_dict['inner_node']
    in_graph = dgl.node_subgraph(graph, inner, store_ids=False)
    u, v = graph.edges()
    keep = ~inner[u] & inner[v]
    out_graph = dgl.graph((u[keep], v[keep]), num_nodes=graph.num_nodes())
    return in_graph, out_graph


def get_pos(node_dict, gpb):
    """Per peer, its vertex (peer-local id) -> the local id of that halo vertex here, or -1."""
    rank, size = dist.get_rank(), dist.get_world_size()
    pos = [None] * size
    for j in range(size):
        if j != rank:
            start = gpb.partid2nids(j)[0].item()
            table = torch.full((len(gpb.partid2nids(j)),), -1, dtype=torch.int64)
            local = torch.nonzero(node_dict['part_id'] == j).reshape(-1)
            table[node_dict[dgl.NID][local] - start] = local
            pos[j] = table
    return pos


def get_send_size(boundary, prob):
    rank = dist.get_rank()
    sizes = [0 if j == rank else int(prob * len(b)) for j, b in enumerate(boundary)]
    ratio = [0 if j == rank else (sizes[j] / len(b) if len(b) else 1.0)
             for j, b in enumerate(boundary)]
    return sizes, ratio


def get_recv_size(node_dict, prob):
    rank, size = dist.get_rank(), dist.get_world_size()
    return [0 if j == rank else int(prob * int((node_dict['part_id'] == j).sum()))
            for j in range(size)]


def select_node(boundary, send_size):
    """This epoch's sample of each peer's boundary rows (all of them, shuffled, at p = 1)."""
    rank = dist.get_rank()
    return [None if j == rank else b[torch.randperm(len(b))[:send_size[j]]]
            for j, b in enumerate(boundary)]


def construct_graph(in_graph, out_graph, pos, one_hops):
    """The epoch's ('_U', '_E', '_V') graph: sources are the local vertices, then the sampled
    halo vertices peer by peer (in the order their rows arrive), destinations the local ones."""
    u, v = in_graph.edges()
    sources, dests, total = [u], [v], in_graph.num_nodes()
    for j, hops in enumerate(one_hops):
        if hops is None or len(hops) == 0:
            continue
        local = pos[j][hops]
        src, dst = out_graph.out_edges(local)
        order = torch.full((out_graph.num_nodes(),), -1, dtype=torch.int64)
        order[local] = torch.arange(total, total + len(local))
        sources.append(order[src])
        dests.append(dst)
        total += len(local)
    return dgl.heterograph({('_U', '_E', '_V'): (torch.cat(sources), torch.cat(dests))},
                           num_nodes_dict={'_U': total, '_V': in_graph.num_nodes()})


def construct_out_norm(num, norm, pos, one_hops):
    parts = [norm[:num]] + [norm[pos[j][hops]] for j, hops in enumerate(one_hops)
                            if hops is not None]
    return torch.cat(parts)


def halo_rows(node_dict, boundary, pos, values, dtype):
    """``values`` (one row per local vertex) extended to the halo: every peer's rows for the
    halo vertices it owns here, placed at their local ids."""
    rank, size = dist.get_rank(), dist.get_world_size()
    send = [None if j == rank else values[b] for j, b in enumerate(boundary)]
    halo = [None if j == rank else int((node_dict['part_id'] == j).sum()) for j in range(size)]
    shapes = [None if h is None else (h,) + tuple(values.shape[1:]) for h in halo]
    got = data_transfer(send, shapes, tag=TransferTag.DEG, dtype=dtype)
    full = torch.zeros((len(node_dict['part_id']),) + tuple(values.shape[1:]), dtype=dtype)
    full[:len(values)] = values
    for j, rows in enumerate(got):
        if rows is not None:
            mine = pos[j] >= 0
            full[pos[j][mine]] = rows
    return full


def collect_out_degree(node_dict, boundary, pos):
    return halo_rows(node_dict, boundary, pos, node_dict['out_deg'], torch.int64)


def precompute(part, graph, node_dict, boundary, model, gpb, pos):
    """use_pp: GCN's normalised sum over in-neighbours once, with the halo's raw features."""
    if model != 'gcn':
        raise NotImplementedError(f'this trainer precomputes for gcn only, not {model}')
    feat = halo_rows(node_dict, boundary, pos, node_dict['feat'], torch.float32)
    u, v = graph.edges()
    keep = node_dict['inner_node'][v]
    whole = dgl.heterograph({('_U', '_E', '_V'): (u[keep], v[keep])},
                            num_nodes_dict={'_U': graph.num_nodes(), '_V': part.num_nodes()})
    with whole.local_scope():
        whole.nodes['_U'].data['h'] = feat / node_dict['out_deg'].float().sqrt()[:, None]
        whole['_E'].update_all(fn.copy_u('h', 'm'), fn.sum('m', 'h'), etype='_E')
        return whole.nodes['_V'].data['h'] / node_dict['in_deg'].float().sqrt()[:, None]


def reduce_hook(param, name, n_train):
    def hook(grad):
        ctx.reducer.reduce(param, name, grad, n_train)
    return hook


def evaluate(model, args):
    """Accuracy of the whole graph's predictions on the test vertices (rank 0, one process)."""
    g = load_data(args.dataset)
    model.eval()
    with torch.no_grad():
        predicted = model(g, g.ndata['feat']).argmax(1)
    test = g.ndata['test_mask']
    return float((predicted[test] == g.ndata['label'][test]).float().mean())


def run(graph, node_dict, gpb, args):
    torch.set_num_threads(1)
    rank, size = dist.get_rank(), dist.get_world_size()
    in_graph, out_graph = get_in_out_graph(graph, node_dict)

    boundary = get_boundary(node_dict, gpb)
    layer_size = get_layer_size(args.n_feat, args.n_hidden, args.n_class, args.n_layers)
    torch.manual_seed(args.seed)
    model = GCN(layer_size, args.use_pp, args.dropout)
    ctx.reducer.init(model)
    for name, param in model.named_parameters():
        param.register_hook(reduce_hook(param, name, args.n_train))

    labels = node_dict['label']
    train_mask = node_dict['train_mask']
    pos = get_pos(node_dict, gpb)
    send_size, ratio = get_send_size(boundary, args.sampling_rate)
    recv_size = get_recv_size(node_dict, args.sampling_rate)
    ctx.buffer.init_buffer(in_graph.num_nodes(), ratio, send_size, recv_size,
                           layer_size[:args.n_layers - args.n_linear], use_pp=args.use_pp,
                           backend=args.backend)

    node_dict['out_deg'] = collect_out_degree(node_dict, boundary, pos)
    if args.use_pp:
        node_dict['feat'] = precompute(in_graph, graph, node_dict, boundary, args.model, gpb, pos)

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    recv_shape = [None if j == rank else (s,) for j, s in enumerate(recv_size)]
    feat = node_dict['feat']
    in_norm = node_dict['in_deg'].float().sqrt()
    out_norm = node_dict['out_deg'].float().sqrt()
    losses, epoch_s, comm_s, reduce_s = [], [], [], []
    torch.manual_seed(args.seed + 1 + rank)
    for epoch in range(args.n_epochs):

        t0 = time.time()
        selected = select_node(boundary, send_size)
        one_hops = data_transfer(selected, recv_shape, tag=TransferTag.NODE, dtype=torch.long)
        ctx.buffer.set_selected(selected)

        g = construct_graph(in_graph, out_graph, pos, one_hops)

        model.train()
        if args.model == 'gcn':
            out_norm_ = construct_out_norm(g.num_nodes('_V'), out_norm, pos, one_hops)
            logits = model(g, feat, in_norm, out_norm_)
        else:
            raise NotImplementedError(f'this trainer trains gcn only, not {args.model}')
        loss = F.cross_entropy(logits[train_mask], labels[train_mask], reduction='sum')
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        pre_reduce = time.time()
        ctx.reducer.synchronize()
        reduce_s.append(time.time() - pre_reduce)
        optimizer.step()
        epoch_s.append(time.time() - t0)
        comm_s.append(comm_timer.tot_time())
        losses.append(loss.item())
        comm_timer.clear()
        if (epoch + 1) % args.log_every == 0:
            print('Process {:03d} | Epoch {:05d} | Time(s) {:.4f} | Comm(s) {:.4f} | '
                  'Reduce(s) {:.4f} | Loss {:.4f}'.format(
                      rank, epoch, np.mean(epoch_s[5:] or epoch_s), np.mean(comm_s[5:] or comm_s),
                      np.mean(reduce_s[5:] or reduce_s), loss.item() / max(1, int(train_mask.sum()))),
                  flush=True)

    # The figures, once training is over: the global loss of every epoch, and rank 0's times.
    total = torch.tensor(losses, dtype=torch.float64)
    dist.all_reduce(total)
    if rank == 0 and args.out:
        figures = dict(loss=(total / args.n_train).tolist(), epoch_s=epoch_s, comm_s=comm_s,
                       reduce_s=reduce_s, test_acc=evaluate(model, args))
        with open(args.out, 'w') as f:
            json.dump(figures, f)


def init_processes(rank, size, args):
    dist.init_process_group(args.backend, init_method=f'tcp://127.0.0.1:{args.port}',
                            rank=rank, world_size=size)
    g, node_dict, gpb = load_partition(args, rank)
    run(g, node_dict, gpb, args)

    # Every rank leaves together: rank 0 evaluates after training, and a rank that tore its
    # group down meanwhile left rank 0's teardown hanging now and then (1 run in 6 on Cora).
    dist.barrier()
    dist.destroy_process_group()
