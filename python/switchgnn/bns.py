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
``h_U / out_norm``, sums over the per-epoch graph and divides by ``in_norm``.

Sampling (BNS's boundary ratio ``p < 1``) is refused: a plan fixes which rows cross the switch,
and cannot follow a fresh sample every epoch.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from . import Worker

__all__ = ["Buffer", "Reducer", "construct_graph", "construct_out_norm"]


class _Exchange(torch.autograd.Function):
    """``cat([feat, sums])``: forward sends the scaled boundary rows and appends each boundary
    vertex's sum of remote rows; backward sends the sums' gradients back (the transposed
    exchange) and adds them into the boundary rows' gradients."""

    @staticmethod
    def forward(ctx, feat, buffer, layer):
        ctx.buffer, ctx.layer, ctx.rows = buffer, layer, feat.shape[0]
        local = buffer.on(feat.device)
        rows = feat.detach()[local] / buffer.out_norm.to(feat.device)[local, None]
        sums = buffer.worker.exchange(layer, rows.cpu().numpy())
        return torch.cat([feat, torch.from_numpy(sums).to(feat.device, feat.dtype)])

    @staticmethod
    def backward(ctx, grad):
        buffer = ctx.buffer
        grad_feat = grad[: ctx.rows].clone()
        back = buffer.worker.exchange(
            ctx.layer, grad[ctx.rows :].contiguous().cpu().numpy(), backward=True
        )
        back = torch.from_numpy(back).to(grad.device, grad.dtype)
        local = buffer.on(grad.device)
        grad_feat.index_add_(0, local, back / buffer.out_norm.to(grad.device)[local, None])
        return grad_feat, None, None


class Buffer:
    """BNS-GCN's feature buffer, over a :class:`switchgnn.Worker`.

    ``inner_ids`` are the global ids (the plan's, e.g. DGL's reshuffled ids) of the local
    rows ``update`` receives, in row order; the worker's boundary vertices must be among them.
    """

    def __init__(self, worker: Worker, inner_ids):
        self.worker = worker
        if isinstance(inner_ids, torch.Tensor):
            inner_ids = inner_ids.detach().cpu().numpy()
        inner = np.asarray(inner_ids, dtype=np.int64)
        order = np.argsort(inner, kind="stable")
        at = np.searchsorted(inner[order], worker.boundary)
        found = (at < len(inner)) & (inner[order][np.minimum(at, len(inner) - 1)] == worker.boundary)
        if not found.all():
            missing = worker.boundary[~found][:5].tolist()
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
        ``f_send_shape`` and ``f_recv_shape`` are not needed; ``ratio`` must be 1 for every
        peer (no sampling), ``num_in`` the number of local rows."""
        if num_in != self.num_in:
            raise ValueError(f"num_in {num_in}, but the buffer was made for {self.num_in} rows")
        sampled = [r for r in ratio if r not in (0, 1)]
        if sampled:
            raise ValueError(
                f"boundary sampling ratio {sampled[0]} < 1 is not supported by the switch: its "
                "plan fixes which rows cross it and cannot follow a per-epoch sample (use p = 1)"
            )
        self._layers = len(layer_size)
        self.use_pp = use_pp

    def set_selected(self, selected) -> None:
        """BNS-GCN's per-epoch choice of boundary rows: with ``p = 1`` every row is sent, which
        is what the plan does; nothing to record."""

    def update(self, layer: int, feat: torch.Tensor) -> torch.Tensor:
        """``cat([feat, sums])``: the local rows, then per local boundary vertex (in the order
        of :func:`construct_graph`'s virtual sources) the sum of its remote neighbours' rows,
        each already divided by its sender's out-norm. Differentiable: its backward runs the
        transposed exchange. Every worker must call it for the same layers in the same order."""
        if self.out_norm is None:
            raise RuntimeError(
                "the buffer has no out-norm to scale the rows it sends: call "
                "switchgnn.bns.construct_out_norm(out_norm, buffer) first"
            )
        if feat.shape[0] != self.num_in:
            raise ValueError(f"update got {feat.shape[0]} rows, the buffer has {self.num_in}")
        return _Exchange.apply(feat, self, layer)


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
    ``out_norm`` to scale the rows it sends."""
    if out_norm.shape[0] != buffer.num_in:
        raise ValueError(f"out_norm has {out_norm.shape[0]} rows, the buffer {buffer.num_in}")
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
