"""The trainer's communication context, as BNS-GCN keeps it: ``buffer`` (halo rows in the
forward pass, their gradients back in the backward pass) and ``reducer`` (weight gradients
summed across workers), both over gloo. The model reads ``context.buffer`` when it runs, so a
trainer may put another buffer and reducer here before training."""

import torch
import torch.distributed as dist

from helper.timer.timer import comm_timer
from helper.utils import TransferTag, exchange_with_peers


class _HaloRows(torch.autograd.Function):
    """``cat([feat, halo rows peer by peer])``; backward returns each peer's halo gradients
    to it and adds what comes back into the rows it sent."""

    @staticmethod
    def forward(ctx, feat, buffer, layer):
        ctx.buffer, ctx.layer = buffer, layer
        rank, size = dist.get_rank(), dist.get_world_size()
        with comm_timer.timer(f"forward_{layer}"):
            send = [None if j == rank else feat.detach()[buffer.selected[j]] / buffer.ratio[j]
                    for j in range(size)]
            shapes = [None if j == rank else (buffer.recv_size[j], feat.shape[1])
                      for j in range(size)]
            got = exchange_with_peers(send, shapes, feat.dtype, TransferTag.FEAT)
        return torch.cat([feat] + [rows for rows in got if rows is not None])

    @staticmethod
    def backward(ctx, grad):
        buffer = ctx.buffer
        rank, size = dist.get_rank(), dist.get_world_size()
        with comm_timer.timer(f"backward_{ctx.layer}"):
            send, at = [None] * size, buffer.num_in
            for j in range(size):
                if j != rank:
                    send[j] = grad[at:at + buffer.recv_size[j]]
                    at += buffer.recv_size[j]
            shapes = [None if j == rank else (len(buffer.selected[j]), grad.shape[1])
                      for j in range(size)]
            got = exchange_with_peers(send, shapes, grad.dtype, TransferTag.FEAT)
        result = grad[:buffer.num_in].clone()
        for j in range(size):
            if j != rank:
                result.index_add_(0, buffer.selected[j], got[j] / buffer.ratio[j])
        return result, None, None


class Buffer:
    def init_buffer(self, num_in, ratio, f_send_shape, f_recv_shape, layer_size, use_pp=False,
                    backend="gloo"):
        self.num_in, self.ratio, self.recv_size = num_in, ratio, f_recv_shape
        self.selected = None

    def set_selected(self, selected):
        self.selected = selected

    def update(self, layer, feat):
        return _HaloRows.apply(feat, self, layer)


class Reducer:
    """Gradients kept from the parameters' hooks (divided by the global training count), summed
    across workers in one all-reduce before the optimiser steps."""

    def init(self, model):
        self.params = list(model.named_parameters())
        self.pending = {}

    def reduce(self, param, name, data, n_train):
        self.pending[name] = (param, data.detach() / n_train)

    def synchronize(self):
        ready = [self.pending[name] for name, _ in self.params if name in self.pending]
        self.pending = {}
        if not ready:
            return
        flat = torch.cat([grad.reshape(-1) for _, grad in ready])
        dist.all_reduce(flat)
        at = 0
        for param, grad in ready:
            param.grad = flat[at:at + grad.numel()].view_as(grad).clone()
            at += grad.numel()


buffer = Buffer()
reducer = Reducer()
