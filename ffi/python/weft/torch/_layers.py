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

from .. import _tp
from ..errors import ArgumentError
from . import _impl
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

    def warm(self, tokens: int) -> list:
        """At ``tokens`` rows (every rank's rows together), on this rank's stream: makes the plans of
        this layer's fused ops, forward and backward, without entering their barriers (returned, for
        the caller to enter), and runs the backward's matmuls once. See warm_up()."""
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

    def warm(self, tokens: int) -> list:
        n, k, w, shard = *self.weight.shape, self.weight, tokens // self.comm.world_size
        plans = [_unentered_plan(self, _tp.ALL_GATHER_GEMM, (shard, k), w.t(), True),  # forward
                 _unentered_plan(self, _tp.GEMM_REDUCE_SCATTER, (tokens, n), w, False)]  # dx
        _empty(self, tokens, n).t() @ _empty(self, tokens, k)  # dW = dyᵀ · allgather(x)
        return plans


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

    def warm(self, tokens: int) -> list:
        n, k, w, shard = *self.weight.shape, self.weight, tokens // self.comm.world_size
        if self.reduce == "all":
            plans = [_unentered_plan(self, _tp.GEMM_ALL_REDUCE, (tokens, k), w.t(), False)]  # forward
            _empty(self, tokens, n) @ w  # dx = dy · W_r
        else:
            plans = [_unentered_plan(self, _tp.GEMM_REDUCE_SCATTER, (tokens, k), w.t(), False),  # forward
                     _unentered_plan(self, _tp.ALL_GATHER_GEMM, (shard, n), w, True)]  # dx
        _empty(self, tokens, n).t() @ _empty(self, tokens, k)  # dW = allgather(dy)ᵀ · x
        return plans


def _unentered_plan(layer: _ParallelLinear, op_code: int, a_shape: tuple, b: torch.Tensor, keep: bool) -> _tp.TpPlan:
    """The plan the op will find at its first call with an `a` of a_shape, made with its barrier not
    yet entered (warm_up enters it)."""
    return _impl._entry(layer.comm, op_code, _empty(layer, *a_shape), b, keep, barrier=False)[0].plan


def _empty(layer: _ParallelLinear, rows: int, cols: int) -> torch.Tensor:
    return torch.empty(rows, cols, device=layer.comm.device, dtype=torch.bfloat16)


def warm_up(layers, tokens: int) -> None:
    """Where one process drives several ranks on one GPU (weft.torch.local), call this once before
    the first training step, with every weft layer of every rank (modules are searched) and the
    step's token count (all ranks' rows together).

    Why: in one process the ranks' ops are issued by one thread (the ranks' backward steps by torch's
    one autograd thread for the GPU), so a rank's fused kernel waits on the GPU for the next rank's
    launch while that thread goes on through the ranks' other work. Whatever in that work waits for
    the running kernels holds the launch they wait for, and both stall for the communicator's timeout:
    the first matmul of a shape, where cuBLAS loads a library of kernels (cuLibraryLoadData waits
    until no kernel of the context runs; seen on one H200 in the reduce-scatter layer's dW matmul),
    and the making of a fused op's plan (device allocations, side streams, a graph of copies), whose
    barrier with the peers waits on the GPU. Here the backward's matmuls run once and every rank's
    plans are made before any barrier is entered; then the barriers, rank after rank, in the order
    each rank made its plans. Later steps of the same token count find the plans. One process per
    rank (torchrun) does not need it."""
    if not isinstance(tokens, int) or tokens <= 0:
        raise ArgumentError("warm_up", "tokens", f"must be a positive int (got {tokens!r})")
    seen, made = [], {}
    for item in layers:
        for m in (item.modules() if isinstance(item, torch.nn.Module) else [item]):
            if isinstance(m, _ParallelLinear) and m not in seen:
                if tokens % m.comm.world_size != 0:
                    raise ArgumentError("warm_up", "tokens", f"must split evenly over {m.comm.world_size} ranks "
                                        f"(got {tokens})")
                seen.append(m)
                with m.comm.use():
                    made.setdefault(id(m.comm), (m.comm, []))[1].extend(m.warm(tokens))
    # Every rank made the same plans in the same order: enter the i-th barrier of each rank together.
    for i in range(max((len(plans) for _, plans in made.values()), default=0)):
        for comm, plans in made.values():
            if i < len(plans):
                with comm.use():
                    plans[i].enter_barrier()
    for comm, _ in made.values():  # each rank's stream once
        with comm.use():
            torch.cuda.current_stream(comm.device).synchronize()
