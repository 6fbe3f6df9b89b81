"""weft for PyTorch: communicators over a torch process group (or several ranks in one process),
symmetric tensors as torch tensors, the fused tensor-parallel ops and collectives as torch custom
ops (torch.ops.weft.*, traceable by torch.compile), and autograd layers built from them.

  import weft.torch as wt
  comm = wt.Communicator.from_process_group()          # under torchrun, after init_process_group
  y = comm.all_gather_gemm(x_shard, w.t())              # allgather(x) · wᵀ, one kernel
  layer = wt.ColumnParallelLinear(4096, 14336, comm)    # forward and backward on the fused ops
"""
try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - exercised on machines without torch
    raise ImportError("weft.torch needs PyTorch (torch >= 2.4 with CUDA); `import weft` works without it") from e

from . import _ops  # noqa: F401  (registers torch.ops.weft.*)
from ._comm import Communicator, local
from ._layers import ColumnParallelLinear, RowParallelLinear, warm_up


def all_gather(x: "_torch.Tensor", comm: Communicator) -> "_torch.Tensor":
    """Blocks of every rank's x stacked along dim 0 (differentiable)."""
    return _torch.ops.weft.all_gather(x, comm.id)


def reduce_scatter(x: "_torch.Tensor", comm: Communicator) -> "_torch.Tensor":
    """This rank's block (along dim 0) of the sum over ranks of x (differentiable)."""
    return _torch.ops.weft.reduce_scatter(x, comm.id)


def all_reduce(x: "_torch.Tensor", comm: Communicator) -> "_torch.Tensor":
    """The sum over ranks of x, on every rank; a new tensor (differentiable)."""
    return _torch.ops.weft.all_reduce(x, comm.id)


__all__ = ["ColumnParallelLinear", "Communicator", "RowParallelLinear", "all_gather", "all_reduce", "local",
           "reduce_scatter", "warm_up"]
