"""weft's ops as torch custom ops (torch.ops.weft.*), each with a fake (meta) implementation so that
torch.compile traces them without graph breaks. ``comm`` is a Communicator's ``id``: an int, so the
schema stays plain and a compiled graph holds it as a constant.

Adding an op (ring_attention, moe_*) is one `_define` block: the schema comes from the type hints,
the real body calls weft/torch/_impl.py, the fake body only computes output shapes.
"""

from typing import Callable, Tuple

import torch

from . import _impl
from ._comm import lookup

Tensor = torch.Tensor


def _define(name: str, fake: Callable) -> Callable[[Callable], object]:
    def register(real: Callable) -> object:
        op = torch.library.custom_op(f"weft::{name}", mutates_args=())(real)
        op.register_fake(fake)
        return op

    return register


def _world(comm: int) -> int:
    return lookup(comm, "weft op").world_size


# ---- collectives (differentiable: each is the other's backward) -------------------------------------


@_define("all_gather", lambda x, comm: x.new_empty((_world(comm) * x.shape[0], *x.shape[1:])))
def all_gather(x: Tensor, comm: int) -> Tensor:
    return _impl.all_gather(comm, x)


@_define("reduce_scatter", lambda x, comm: x.new_empty((x.shape[0] // _world(comm), *x.shape[1:])))
def reduce_scatter(x: Tensor, comm: int) -> Tensor:
    return _impl.reduce_scatter(comm, x)


@_define("all_reduce", lambda x, comm: x.new_empty(x.shape))
def all_reduce(x: Tensor, comm: int) -> Tensor:
    return _impl.all_reduce(comm, x)


def _keep_comm(ctx, inputs, output) -> None:
    ctx.comm = inputs[1]


torch.library.register_autograd("weft::all_gather", lambda ctx, g: (reduce_scatter(g, ctx.comm), None),
                                setup_context=_keep_comm)
torch.library.register_autograd("weft::reduce_scatter", lambda ctx, g: (all_gather(g, ctx.comm), None),
                                setup_context=_keep_comm)
torch.library.register_autograd("weft::all_reduce", lambda ctx, g: (all_reduce(g, ctx.comm), None),
                                setup_context=_keep_comm)


# ---- fused tensor-parallel GEMMs (b: the logical [K, N] operand, row-major or W.t()) ------------------


def _ag_gemm_fake(a: Tensor, b: Tensor, comm: int, keep_gathered: bool) -> Tuple[Tensor, Tensor]:
    m = _world(comm) * a.shape[0]
    gathered = a.new_empty((m, a.shape[1])) if keep_gathered else a.new_empty(0)
    return a.new_empty((m, b.shape[1])), gathered


@_define("all_gather_gemm", _ag_gemm_fake)
def all_gather_gemm(a: Tensor, b: Tensor, comm: int, keep_gathered: bool) -> Tuple[Tensor, Tensor]:
    return _impl.all_gather_gemm(comm, a, b, keep_gathered)


@_define("gemm_reduce_scatter", lambda a, b, comm: a.new_empty((a.shape[0] // _world(comm), b.shape[1])))
def gemm_reduce_scatter(a: Tensor, b: Tensor, comm: int) -> Tensor:
    return _impl.gemm_reduce_scatter(comm, a, b)


@_define("gemm_all_reduce", lambda a, b, comm: a.new_empty((a.shape[0], b.shape[1])))
def gemm_all_reduce(a: Tensor, b: Tensor, comm: int) -> Tensor:
    return _impl.gemm_all_reduce(comm, a, b)
