"""Tensor-parallel linear layers with autograd, the sequence-parallel pattern of Megatron-LM and
torch's async-TP, where the fused ops are each other's backward:

  ColumnParallelLinear  y [W m, n] = allgather(x [m, K]) · Wᵀ        (W_r: [n, K], n = N / W)
      backward          dx = reduce_scatter(dy · W_r)                 gemm_reduce_scatter
                        dW_r = dyᵀ · allgather(x)                     the gathered x, kept from forward
  RowParallelLinear     y [M / W, N] = reduce_scatter(x [M, k] · W_rᵀ)  (W_r: [N, k], k = K / W)
                        (or y [M, N] = all_reduce(...), reduce="all")
      backward          dx = allgather(dy) · W_r                      all_gather_gemm, keeping allgather(dy)
                        dW_r = allgather(dy)ᵀ · x

Inputs are sharded along their first dimension (rank r holds rows r·m ... (r+1)·m - 1); leading
dimensions other than the last are flattened into rows. No bias (add one after the layer).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from ..errors import ArgumentError
from ._comm import Communicator


class _ColumnParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, comm: int) -> torch.Tensor:
        out, gathered = torch.ops.weft.all_gather_gemm(x, weight.t(), comm, True)
        ctx.save_for_backward(gathered, weight)
        ctx.comm = comm
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gathered, weight = ctx.saved_tensors
        grad_x = torch.ops.weft.gemm_reduce_scatter(grad, weight, ctx.comm) if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ gathered if ctx.needs_input_grad[1] else None
        return grad_x, grad_w, None


class _RowParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, comm: int, scatter: bool) -> torch.Tensor:
        op = torch.ops.weft.gemm_reduce_scatter if scatter else torch.ops.weft.gemm_all_reduce
        ctx.save_for_backward(x, weight)
        ctx.comm, ctx.scatter = comm, scatter
        return op(x, weight.t(), comm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        if ctx.scatter:
            grad_x, full = torch.ops.weft.all_gather_gemm(grad, weight, ctx.comm, True)
        else:
            grad_x, full = grad @ weight, grad  # the all-reduced output is replicated: so is its gradient
        grad_w = full.t() @ x if ctx.needs_input_grad[1] else None
        return (grad_x if ctx.needs_input_grad[0] else None), grad_w, None, None


def _shard(full: torch.Tensor, comm: Communicator, dim: int, op: str) -> torch.Tensor:
    if full.dim() != 2 or full.shape[dim] % comm.world_size != 0:
        raise ArgumentError(op, "weight", f"must be a matrix whose dim {dim} splits evenly over {comm.world_size} "
                            f"ranks (got {tuple(full.shape)})")
    return full.chunk(comm.world_size, dim=dim)[comm.rank].to(device=comm.device, dtype=torch.bfloat16).contiguous()


class _ParallelLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, comm: Communicator, shard_dim: int,
                 weight: Optional[torch.Tensor], op: str):
        super().__init__()
        if not isinstance(comm, Communicator):
            raise ArgumentError(op, "comm", f"must be a weft.torch.Communicator (got {type(comm).__name__})")
        self.in_features, self.out_features, self.comm = in_features, out_features, comm
        if weight is None:
            full = torch.empty(out_features, in_features)
            torch.nn.init.kaiming_uniform_(full, a=math.sqrt(5))  # torch.nn.Linear's default
        else:
            full = weight.detach()
            if tuple(full.shape) != (out_features, in_features):
                raise ArgumentError(op, "weight", f"must be the full [{out_features}, {in_features}] matrix "
                                    f"(got {tuple(full.shape)})")
        self.weight = torch.nn.Parameter(_shard(full, comm, shard_dim, op))

    def warm_backward(self, tokens: int) -> None:
        """Runs, once, the local matmuls of this layer's backward at ``tokens`` rows (the gathered
        count: every rank's rows together), on this rank's stream. See warm_up()."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.comm.rank} of " \
               f"{self.comm.world_size}, weight shard {tuple(self.weight.shape)}"


class ColumnParallelLinear(_ParallelLinear):
    """y = allgather(x) · Wᵀ with W's rows split over the ranks (see the module docstring).
    ``weight``: the full [out_features, in_features] matrix to take this rank's rows from (the same
    on every rank), or None for torch.nn.Linear's initialisation (seed every rank alike)."""

    def __init__(self, in_features: int, out_features: int, comm: Communicator, *, weight: Optional[torch.Tensor] = None):
        super().__init__(in_features, out_features, comm, 0, weight, "ColumnParallelLinear")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        y = _ColumnParallel.apply(rows, self.weight, self.comm.id)
        return y.reshape(self.comm.world_size * x.shape[0], *x.shape[1:-1], y.shape[-1])

    def warm_backward(self, tokens: int) -> None:
        n, k = self.weight.shape
        _empty(self, tokens, n).t() @ _empty(self, tokens, k)  # dW = dyᵀ · allgather(x)


class RowParallelLinear(_ParallelLinear):
    """y = reduce_scatter(x · Wᵀ) (``reduce="scatter"``, default) or all_reduce(x · Wᵀ)
    (``reduce="all"``), with W's columns split over the ranks (see the module docstring)."""

    def __init__(self, in_features: int, out_features: int, comm: Communicator, *, reduce: str = "scatter",
                 weight: Optional[torch.Tensor] = None):
        if reduce not in ("scatter", "all"):
            raise ArgumentError("RowParallelLinear", "reduce", f"must be 'scatter' or 'all' (got {reduce!r})")
        super().__init__(in_features, out_features, comm, 1, weight, "RowParallelLinear")
        self.reduce = reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        y = _RowParallel.apply(rows, self.weight, self.comm.id, self.reduce == "scatter")
        lead = x.shape[0] // self.comm.world_size if self.reduce == "scatter" else x.shape[0]
        return y.reshape(lead, *x.shape[1:-1], y.shape[-1])

    def warm_backward(self, tokens: int) -> None:
        n, k = self.weight.shape
        if self.reduce == "all":
            _empty(self, tokens, n) @ self.weight  # dx = dy · W_r
        _empty(self, tokens, n).t() @ _empty(self, tokens, k)  # dW = allgather(dy)ᵀ · x


def _empty(layer: _ParallelLinear, rows: int, cols: int) -> torch.Tensor:
    return torch.empty(rows, cols, device=layer.comm.device, dtype=torch.bfloat16)


def warm_up(layers, tokens: int) -> None:
    """Where one process drives several ranks on one GPU (weft.torch.local), call this once before
    the first training step, with every weft layer of every rank (modules are searched) and the
    step's token count (all ranks' rows together).

    Why: the first matmul of a shape can make cuBLAS load a library of kernels (cuLibraryLoadData),
    and loading code into a context waits until no kernel of that context runs. In one process, the
    ranks' backward steps run on torch's one autograd thread for the GPU, so a rank's fused kernel,
    already waiting on the GPU for the next rank's launch, holds that load, and the launch it waits
    for comes after the load on the same thread: a stall for the communicator's timeout (seen on one
    H200 in the reduce-scatter layer's dW matmul). Running the backward's matmuls once here, before
    any fused kernel waits, makes the loads then. One process per rank (torchrun) does not need it."""
    seen = []
    for item in layers:
        for m in (item.modules() if isinstance(item, torch.nn.Module) else [item]):
            if isinstance(m, _ParallelLinear) and m not in seen:
                seen.append(m)
                with m.comm.use():
                    m.warm_backward(tokens)
    for comm in {id(m.comm): m.comm for m in seen}.values():  # each rank's stream once
        with comm.use():
            torch.cuda.current_stream(comm.device).synchronize()
