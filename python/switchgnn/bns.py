"""The communication context of BNS-GCN-style full-graph trainers, through switchgnn.

BNS-GCN (and PipeGCN, which shares its skeleton) keeps its communication in two objects:
``ctx.buffer``, whose ``update(layer, feat)`` returns the local rows followed by halo copies
received from the peers (and sends the halo gradients back in the backward pass), and
``ctx.reducer``, which all-reduces the weight gradients. :class:`Buffer` and :class:`Reducer`
here have the same method names and arguments.

The switch returns *sums of remote neighbours* rather than halo copies, so the per-epoch graph
changes in two places, both served by helpers here:

- :func:`construct_graph`: one *virtual source* per local boundary vertex (the rows that
  ``update`` appends), with one edge virtual → vertex, instead of one source per halo vertex;
- :func:`construct_out_norm`: the virtual sources' out-norm is 1, because every sender already
  divided its rows by its own out-norm (the Buffer does it, with the norm given here).

Everything else in the training script stays: the GCN layer still computes
``h_U / out_norm``, sums over the per-epoch graph and divides by ``in_norm``. BNS-GCN's
``use_pp`` precomputation sends raw features outside the buffer; :func:`precompute` does it
through the buffer instead.

The buffer reports its communication time through BNS-GCN's ``comm_timer`` (its
``helper.timer.timer`` module) when the trainer has one, so the ``Comm(s)`` column counts the
switch's exchanges; and a failed exchange names the trainer's epoch (counted as the trainer
counts it: a training forward pass of the first exchanged layer starts one).

Boundary sampling (BNS's ``p < 1``) needs a pair plan (:mod:`switchgnn.sampling`,
``switchgnn.dgl.serve(..., sampling=True)``): each row is sent per receiving peer, so the buffer
gives it that pair's factor ``1 / ratio`` (or 0 where the epoch's sample left it out), and
scales what comes back per peer in the backward pass, as BNS-GCN does. With a plain plan the
buffer refuses ``p < 1``. Attention (GAT) is refused: it needs each halo vertex's own row, and
the switch returns sums.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Optional, Sequence

import numpy as np
import torch

from . import SwitchgnnError, Worker
from .sampling import read_pairs

__all__ = ["Buffer", "Reducer", "construct_graph", "construct_out_norm", "precompute"]

#: The module BNS-GCN keeps its communication timer in (``comm_timer``, a ``CommTimer``).
BNS_TIMER_MODULE = "helper.timer.timer"


def _bns_comm_timer():
    """BNS-GCN's ``comm_timer`` if the trainer imported it, else ``None``."""
    module = sys.modules.get(BNS_TIMER_MODULE)
    return getattr(module, "comm_timer", None)


class _Exchange(torch.autograd.Function):
    """``cat([feat, sums])``: forward sends the scaled boundary rows and appends each boundary
    vertex's sum of remote rows; backward sends the sums' gradients back (the transposed
    exchange) and adds them into the boundary rows' gradients. ``factor`` (pair plans only)
    weighs each (vertex, peer) row: this epoch's sample."""

    @staticmethod
    def forward(ctx, feat, buffer, layer, factor):
        ctx.buffer, ctx.layer, ctx.rows, ctx.factor = buffer, layer, feat.shape[0], factor
        local = buffer.on(feat.device)
        with buffer.communicating(layer, backward=False):
            rows = feat.detach()[local] / buffer.out_norm.to(feat.device)[local, None]
            rows = buffer.per_pair(rows, factor)
            sums = buffer.worker.exchange(layer, rows.cpu().numpy())
            sums = buffer.per_vertex(torch.from_numpy(sums).to(feat.device, feat.dtype), None)
        return torch.cat([feat, sums])

    @staticmethod
    def backward(ctx, grad):
        buffer = ctx.buffer
        grad_feat = grad[: ctx.rows].clone()
        with buffer.communicating(ctx.layer, backward=True):
            sent = buffer.per_pair(grad[ctx.rows :], None)
            back = buffer.worker.exchange(
                ctx.layer, sent.contiguous().cpu().numpy(), backward=True
            )
            back = torch.from_numpy(back).to(grad.device, grad.dtype)
            back = buffer.per_vertex(back, ctx.factor)
        local = buffer.on(grad.device)
        grad_feat.index_add_(0, local, back / buffer.out_norm.to(grad.device)[local, None])
        return grad_feat, None, None, None


class Buffer:
    """BNS-GCN's feature buffer, over a :class:`switchgnn.Worker`.

    ``inner_ids`` are the global ids (the plan's, e.g. DGL's reshuffled ids) of the local
    rows ``update`` receives, in row order; the worker's boundary vertices must be among them.

    ``comm_timer`` receives the time of every exchange as BNS-GCN's ``CommTimer`` does
    (``forward_<layer>``, ``backward_<layer>``); by default BNS-GCN's own
    (``helper.timer.timer.comm_timer``) when the trainer imported it. :attr:`comm_seconds`
    totals the time either way.
    """

    def __init__(self, worker: Worker, inner_ids, comm_timer=None):
        self.worker = worker
        self.comm_timer = comm_timer
        #: Seconds spent in exchanges so far (sending, waiting, receiving, converting).
        self.comm_seconds = 0.0
        #: The trainer's epoch: training forward passes started so far, less one (-1 before
        #: the first: ``use_pp``'s precomputation).
        self.epoch = -1
        self._first_layer = 0
        if isinstance(inner_ids, torch.Tensor):
            inner_ids = inner_ids.detach().cpu().numpy()
        inner = np.asarray(inner_ids, dtype=np.int64)
        plan = getattr(worker, "plan", None)
        #: A pair plan's map of its vertices (:mod:`switchgnn.sampling`), or ``None``.
        self.pairs = read_pairs(plan) if plan is not None else None
        boundary = np.asarray(worker.boundary, dtype=np.int64)
        if self.pairs is not None:
            if (self.pairs.owner[boundary] != worker.rank).any():
                raise ValueError(
                    f"{plan}: worker {worker.rank}'s rows include another worker's vertices "
                    "(a pair map of another plan?)"
                )
            # Each derived row is (vertex, peer): the rows of one vertex, peer by peer.
            boundary, row = np.unique(self.pairs.vertex[boundary], return_inverse=True)
            self._pair_row = torch.from_numpy(row.astype(np.int64))
            self._pair_peer = torch.from_numpy(self.pairs.peer[worker.boundary].astype(np.int64))
        order = np.argsort(inner, kind="stable")
        at = np.searchsorted(inner[order], boundary)
        found = (at < len(inner)) & (inner[order][np.minimum(at, len(inner) - 1)] == boundary)
        if not found.all():
            missing = boundary[~found][:5].tolist()
            raise ValueError(
                f"worker {worker.rank}'s boundary vertices {missing} are not among the local "
                "rows (inner_ids): is the plan for this partition?"
            )
        #: Local row of each boundary vertex, in the worker's boundary order.
        self.local = torch.from_numpy(order[at])
        self.num_in = len(inner)
        self.out_norm: Optional[torch.Tensor] = None
        self._layers = 0
        self._local_on: dict = {}
        self._ratio: Optional[list] = None
        #: Per derived row of a pair plan, this epoch's factor (``None``: every row, as is).
        self._factor: Optional[torch.Tensor] = None

    def on(self, device) -> torch.Tensor:
        """:attr:`local` on ``device`` (kept per device: CUDA trainers index on the GPU)."""
        key = str(device)
        if key not in self._local_on:
            self._local_on[key] = self.local.to(device)
        return self._local_on[key]

    @property
    def num_virtual(self) -> int:
        """The rows ``update`` appends: one per local boundary vertex."""
        return len(self.local)

    def init_buffer(
        self,
        num_in: int,
        ratio: Sequence[float],
        f_send_shape: Sequence[int],
        f_recv_shape: Sequence[int],
        layer_size: Sequence[int],
        use_pp: bool = False,
        backend: str = "switchgnn",
    ) -> None:
        """BNS-GCN's setup call. The switch's plan decides what is sent and received, so
        ``f_send_shape`` and ``f_recv_shape`` are not needed; ``ratio`` is BNS-GCN's per peer
        (``int(p * n) / n`` of the ``n`` rows this worker has for that peer; this worker's own
        entry is ignored): 1 everywhere unless the plan is a pair plan, which sampling needs.
        ``num_in`` is the number of local rows, ``layer_size`` (the widths the layers exchange)
        the plan's."""
        if num_in != self.num_in:
            raise ValueError(f"num_in {num_in}, but the buffer was made for {self.num_in} rows")
        world = getattr(self.worker, "world", len(ratio))
        if len(ratio) != world:
            raise ValueError(f"ratio has {len(ratio)} entries for {world} workers")
        sampled = [
            (peer, r) for peer, r in enumerate(ratio) if peer != self.worker.rank and r != 1
        ]
        if sampled and self.pairs is None:
            peer, r = sampled[0]
            raise ValueError(
                f"boundary sampling (ratio {r} for peer {peer}, sampling rate p < 1) needs a "
                "pair plan, which sends each row per receiving peer: this plan sends one row "
                "to every peer. Serve one with switchgnn.dgl.serve(..., sampling=True) (or "
                "prepare_partitions(..., sampling=True)), or train with p = 1"
            )
        self._ratio = [float(r) for r in ratio]
        widths = [int(w) for w in layer_size]
        planned = list(getattr(self.worker, "widths", widths))
        if widths != planned:
            raise ValueError(
                f"the layers exchange widths {widths}, but the plan was made for {planned}: "
                "prepare it with the trainer's hidden width and layer count "
                "(switchgnn.dgl.serve(..., hidden=n_hidden, layers=n_layers - n_linear))"
            )
        self._layers = len(widths)
        self.use_pp = use_pp
        self._first_layer = 1 if use_pp else 0

    def set_selected(self, selected) -> None:
        """BNS-GCN's per-epoch sample: ``selected[j]`` the local rows sent to peer ``j`` this
        epoch (``None`` for this worker). A pair plan sends each of them with the pair's
        factor ``1 / ratio[j]`` and every other row of that pair as zeros; a plain plan sends
        every row, which is the sample at ``p = 1``."""
        if self.pairs is None:
            return
        if self._ratio is None:
            raise RuntimeError("set_selected before init_buffer: the buffer has no ratio yet")
        if len(selected) != len(self._ratio):
            raise ValueError(f"selected has {len(selected)} entries for {len(self._ratio)} workers")
        rows = self.local[self._pair_row]
        factor = torch.zeros(len(rows), dtype=torch.float32)
        for peer, chosen in enumerate(selected):
            if peer == self.worker.rank or chosen is None:
                continue
            chosen = torch.as_tensor(chosen, dtype=torch.int64).cpu()
            if len(chosen) and (chosen.min() < 0 or chosen.max() >= self.num_in):
                raise ValueError(
                    f"selected[{peer}] names local row {int(chosen.max())} of {self.num_in}"
                )
            ratio = self._ratio[peer]
            mask = torch.zeros(self.num_in, dtype=torch.bool)
            mask[chosen] = True
            of_peer = self._pair_peer == peer
            if ratio > 0:
                factor[of_peer] = mask[rows[of_peer]].to(torch.float32) / ratio
        self._factor = factor

    def per_pair(self, rows: torch.Tensor, factor: Optional[torch.Tensor]) -> torch.Tensor:
        """Pair plans: rows per local boundary vertex -> rows per (vertex, peer), times
        ``factor`` when given. A plain plan's rows are its vertices' already."""
        if self.pairs is None:
            return rows
        out = rows[self._pair_row.to(rows.device)]
        if factor is not None:
            out = out * factor.to(rows.device, rows.dtype)[:, None]
        return out

    def per_vertex(self, rows: torch.Tensor, factor: Optional[torch.Tensor]) -> torch.Tensor:
        """Pair plans: rows per (vertex, peer), times ``factor`` when given, summed per local
        boundary vertex. A plain plan's rows are its vertices' already."""
        if self.pairs is None:
            return rows
        if factor is not None:
            rows = rows * factor.to(rows.device, rows.dtype)[:, None]
        out = torch.zeros((self.num_virtual, rows.shape[1]), dtype=rows.dtype, device=rows.device)
        return out.index_add_(0, self._pair_row.to(rows.device), rows)

    def update(self, layer: int, feat: torch.Tensor) -> torch.Tensor:
        """``cat([feat, sums])``: the local rows, then per local boundary vertex (in the order
        of :func:`construct_graph`'s virtual sources) the sum of its remote neighbours' rows,
        each already divided by its sender's out-norm. Differentiable: its backward runs the
        transposed exchange. Every worker must call it for the same layers in the same order."""
        self._check(feat)
        if layer == self._first_layer and torch.is_grad_enabled() and feat.requires_grad:
            self.epoch += 1
        return _Exchange.apply(feat, self, layer, self._factor)

    def update_all_rows(self, layer: int, feat: torch.Tensor) -> torch.Tensor:
        """:meth:`update` with every boundary row sent as it is, whatever the epoch's sample:
        BNS-GCN's ``use_pp`` precomputation uses the whole halo."""
        self._check(feat)
        return _Exchange.apply(feat, self, layer, None)

    def _check(self, feat: torch.Tensor) -> None:
        if self.out_norm is None:
            raise RuntimeError(
                "the buffer has no out-norm to scale the rows it sends: call "
                "switchgnn.bns.construct_out_norm(out_norm, buffer) first"
            )
        if feat.shape[0] != self.num_in:
            raise ValueError(f"update got {feat.shape[0]} rows, the buffer has {self.num_in}")

    def when(self, layer: int, backward: bool) -> str:
        """Where the trainer stands, in its own terms: ``epoch 12, layer 1 backward``."""
        step = f"layer {layer} {'backward' if backward else 'forward'}"
        if self.epoch < 0:
            return f"before the first epoch (use_pp's precomputation), {step}"
        return f"epoch {self.epoch}, {step}"

    @contextmanager
    def communicating(self, layer: int, backward: bool):
        """Time one exchange into :attr:`comm_seconds` and the trainer's ``comm_timer``; a
        failure is raised again naming the trainer's epoch."""
        timer = self.comm_timer if self.comm_timer is not None else _bns_comm_timer()
        name = f"{'backward' if backward else 'forward'}_{layer}"
        # BNS-GCN's CommTimer keeps (start, end) per name in `_time` and refuses a name twice
        # in one epoch; entered directly there, so that an evaluation pass through the buffer
        # gets a name of its own. Any other timer is used as a context manager.
        entries = getattr(timer, "_time", None)
        started = time.time()
        try:
            if timer is not None and not isinstance(entries, dict):
                with timer.timer(name):
                    yield
            else:
                yield
        except SwitchgnnError as e:
            raise SwitchgnnError(
                f"worker {self.worker.rank}, {self.when(layer, backward)}: {e}"
            ) from e
        finally:
            ended = time.time()
            self.comm_seconds += ended - started
        if isinstance(entries, dict):
            unique, n = name, 1
            while unique in entries:
                n += 1
                unique = f"{name}#{n}"
            entries[unique] = (started, ended)


def construct_graph(in_graph, buffer: Buffer):
    """The per-epoch graph BNS-GCN builds with ``dgl.heterograph({('_U', '_E', '_V'): ...})``,
    for the switch: sources ``_U`` are the local vertices followed by one virtual source per
    local boundary vertex, destinations ``_V`` the local vertices; the edges are
    ``in_graph``'s plus one virtual → boundary vertex each."""
    import dgl  # only the training script's environment has DGL

    u, v = in_graph.edges()
    virtual = torch.arange(buffer.num_virtual, dtype=u.dtype, device=u.device)
    virtual += in_graph.num_nodes()
    local = buffer.on(v.device).to(v.dtype)
    graph = dgl.heterograph(
        {("_U", "_E", "_V"): (torch.cat([u, virtual]), torch.cat([v, local]))},
        num_nodes_dict={"_U": in_graph.num_nodes() + buffer.num_virtual, "_V": in_graph.num_nodes()},
        idtype=u.dtype,
        device=u.device,
    )
    return graph


def construct_out_norm(out_norm: torch.Tensor, buffer: Buffer) -> torch.Tensor:
    """The out-norm of every source of :func:`construct_graph`: the local vertices' own, then 1
    for each virtual source (its rows were divided by their senders' norms). The buffer keeps
    ``out_norm`` to scale the rows it sends. ``out_norm`` may run on past the local rows, as
    BNS-GCN's does once ``collect_out_degree`` appended the halo's degrees: its first rows are
    the local vertices' (DGL puts a partition's inner vertices first)."""
    if out_norm.shape[0] < buffer.num_in:
        raise ValueError(f"out_norm has {out_norm.shape[0]} rows, the buffer {buffer.num_in}")
    out_norm = out_norm[: buffer.num_in]
    # Layers without an out-norm (GraphSAGE's mean over in-neighbours) pass ones.
    buffer.out_norm = out_norm.detach().to(torch.float32)
    ones = torch.ones(buffer.num_virtual, dtype=out_norm.dtype, device=out_norm.device)
    return torch.cat([out_norm, ones])


class Reducer:
    """BNS-GCN's gradient reducer, over the worker's all-reduce (in the switch process):
    ``reduce`` (from each parameter's hook) keeps the gradient divided by ``n_train``;
    ``synchronize`` (before ``optimizer.step()``) sums them all across workers in one round
    and sets every ``param.grad`` to the sum, bit-identical on every worker."""

    def __init__(self, worker: Worker):
        self.worker = worker
        self._params: list = []
        self._pending: dict = {}

    def init(self, model: torch.nn.Module) -> None:
        self._params = list(model.named_parameters())
        self._pending = {}

    def reduce(self, param, name: str, data: torch.Tensor, n_train: int) -> None:
        self._pending[name] = (param, data.detach() / n_train)

    def synchronize(self) -> None:
        # One round, in the model's parameter order, which every worker shares.
        ready = [(name, *self._pending[name]) for name, _ in self._params if name in self._pending]
        self._pending = {}
        if not ready:
            return
        flat = torch.cat([g.reshape(-1).to(torch.float32).cpu() for _, _, g in ready])
        values = flat.numpy().copy()
        self.worker.all_reduce(values)
        summed = torch.from_numpy(values)
        at = 0
        for _, param, grad in ready:
            size = grad.numel()
            param.grad = summed[at : at + size].view_as(grad).to(grad.device, grad.dtype).clone()
            at += size


def precompute(in_graph, node_dict, buffer: Buffer, model: str = "gcn") -> torch.Tensor:
    """BNS-GCN's ``use_pp`` step through the switch: the first layer's aggregation, once, of
    ``node_dict['feat']`` over the local graph ``in_graph`` plus each boundary vertex's sum of
    remote neighbours (exchanged as layer 0). ``gcn``: the sum of ``h / sqrt(out_deg)`` over
    in-neighbours divided by ``sqrt(in_deg)``; ``graphsage``: the features followed by the mean
    over in-neighbours (the sum divided by ``in_deg``). ``node_dict`` holds BNS-GCN's
    ``feat``, ``in_deg`` and ``out_deg`` (whose first rows are the local vertices'). Also sets
    the buffer's out-norm for the layers that follow (ones for GraphSAGE, which has none).
    GAT is refused: attention needs each halo vertex's own row."""
    import dgl.function as fn

    if model == "gat":
        raise ValueError(
            "GAT cannot train through the switch: attention weighs each halo vertex's own row "
            "against its destination's, and the switch returns only sums of remote rows"
        )
    if model not in ("gcn", "graphsage"):
        raise ValueError(f"unknown model {model!r} (gcn or graphsage)")
    feat = node_dict["feat"]
    in_deg = node_dict["in_deg"][: buffer.num_in].to(feat.dtype)
    if model == "gcn":
        norm = construct_out_norm(node_dict["out_deg"].to(feat.dtype).sqrt(), buffer)
        in_norm = in_deg.sqrt()
    else:
        ones = torch.ones(buffer.num_in, dtype=feat.dtype, device=feat.device)
        norm = construct_out_norm(ones, buffer)
        in_norm = in_deg
    graph = construct_graph(in_graph, buffer)
    with torch.no_grad(), graph.local_scope():
        graph.nodes["_U"].data["h"] = buffer.update_all_rows(0, feat) / norm[:, None]
        graph["_E"].update_all(fn.copy_u("h", "m"), fn.sum("m", "h"), etype="_E")
        summed = graph.nodes["_V"].data["h"] / in_norm[:, None]
    return summed if model == "gcn" else torch.cat([feat, summed], dim=1)
