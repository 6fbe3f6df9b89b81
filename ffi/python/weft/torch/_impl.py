"""The real implementations behind the custom ops: torch tensors in, torch tensors out, every launch
on the current stream.

Collectives stage through cached symmetric buffers where weft needs symmetric memory (an input that
already lives in the heap, from comm.empty(), is used in place). A fused plan is bound to fixed
addresses (its TMA descriptors and copy streams are built once), so each plan owns its `a` input
buffer and its outputs: a call copies `a` in and the outputs out, on the same stream. The weights
`b` are used in place: a plan is cached per (op, shapes, layout, weight tensor, stream), and holds a
reference to the weight, which training updates in place. The copies cost memory bandwidth (about
2 · M · n bytes for all_gather_gemm's output); see the README's "From PyTorch" notes.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch

from .. import _tp
from ..comm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from ..dtype import DTYPES, SUM_DTYPES
from ..errors import ArgumentError
from ._comm import Communicator, lookup


def _tensor(comm: Communicator, t: object, name: str, op: str, dtypes: Tuple[str, ...]) -> str:
    if not isinstance(t, torch.Tensor):
        raise ArgumentError(op, name, f"must be a torch.Tensor (got {type(t).__name__})")
    if t.device != comm.device:
        raise ArgumentError(op, name, f"is on {t.device} but rank {comm.rank}'s communicator is on {comm.device}")
    dtype = comm.dtype_name(t.dtype, op)
    if dtype not in dtypes:
        raise ArgumentError(op, name, f"must be {' or '.join(dtypes)} (got {t.dtype})")
    return dtype


# ---- collectives ------------------------------------------------------------------------------------


def all_gather(comm_id: int, x: torch.Tensor) -> torch.Tensor:
    op = "all_gather"
    comm = lookup(comm_id, op)
    dtype = _tensor(comm, x, "x", op, tuple(DTYPES))
    if x.dim() == 0:
        raise ArgumentError(op, "x", "must have at least one dimension (blocks are stacked along dim 0)")
    shape = (comm.world_size * x.shape[0], *x.shape[1:])
    if x.numel() == 0:
        return x.new_empty(shape)
    stream = comm.current_stream(op)
    x = x.contiguous()
    out = comm.scratch((op, x.dtype, x.numel(), stream), comm.world_size * x.numel(), x.dtype, op)
    comm.native.collective(ALL_GATHER, DTYPES[dtype].code, x.numel(), x.data_ptr(), out.data_ptr(), stream, op)
    return out.view(shape).clone()


def reduce_scatter(comm_id: int, x: torch.Tensor) -> torch.Tensor:
    op = "reduce_scatter"
    comm = lookup(comm_id, op)
    dtype = _tensor(comm, x, "x", op, SUM_DTYPES)
    w = comm.world_size
    if x.dim() == 0 or x.shape[0] % w != 0:
        raise ArgumentError(op, "x", f"must have a first dimension that splits evenly over {w} ranks (got {tuple(x.shape)})")
    out = x.new_empty((x.shape[0] // w, *x.shape[1:]))
    if x.numel() == 0:
        return out
    stream = comm.current_stream(op)
    src = x if comm.is_symmetric(x) else _staged(comm, (op, x.dtype, x.numel(), stream), x, op)
    comm.native.collective(REDUCE_SCATTER, DTYPES[dtype].code, out.numel(), src.data_ptr(), out.data_ptr(), stream, op)
    return out


def all_reduce(comm_id: int, x: torch.Tensor) -> torch.Tensor:
    op = "all_reduce"
    comm = lookup(comm_id, op)
    dtype = _tensor(comm, x, "x", op, SUM_DTYPES)
    if x.numel() == 0:
        return x.new_empty(x.shape)
    stream = comm.current_stream(op)
    key = (op, x.dtype, x.numel(), stream)
    if comm.is_symmetric(x):
        src, dst = x, comm.scratch(key, x.numel(), x.dtype, op)
    else:
        src = dst = _staged(comm, key, x, op)  # in place in the staging buffer
    comm.native.collective(ALL_REDUCE, DTYPES[dtype].code, x.numel(), src.data_ptr(), dst.data_ptr(), stream, op)
    return dst.view(x.shape).clone()


def _staged(comm: Communicator, key: tuple, x: torch.Tensor, op: str) -> torch.Tensor:
    buf = comm.scratch(key, x.numel(), x.dtype, op)
    buf.view(x.shape).copy_(x)
    return buf


# ---- fused tensor-parallel GEMMs ----------------------------------------------------------------------


class _Entry(NamedTuple):
    plan: _tp.TpPlan
    a: torch.Tensor
    out: torch.Tensor
    gathered: Optional[torch.Tensor]
    b: torch.Tensor  # referenced: the plan reads it in place

    def close(self) -> None:
        self.plan.close()


def _b_operand(b: torch.Tensor, op: str) -> bool:
    """b_nk for the logical [K, N] operand b: False when b is row-major, True when it is the
    transpose of a row-major [N, K] (W.t(), the weights layout)."""
    if b.dim() != 2:
        raise ArgumentError(op, "b", f"must be a matrix (got shape {tuple(b.shape)})")
    if b.data_ptr() % 16 != 0:
        raise ArgumentError(op, "b", f"must start on a 16-byte boundary (TMA), but starts at {b.data_ptr():#x}")
    if b.is_contiguous():
        return False
    if b.t().is_contiguous():
        return True
    raise ArgumentError(op, "b", f"must be row-major [K, N] or the transpose of a row-major [N, K] (W.t()); got shape "
                        f"{tuple(b.shape)} with strides {b.stride()}")


def _poisoned(shape: tuple, comm: Communicator) -> torch.Tensor:
    # A plan's output buffer starts as NaN: an element a launch failed to write shows up in its first
    # result instead of passing for data.
    return torch.full(shape, float("nan"), dtype=torch.bfloat16, device=comm.device)


def _entry(comm: Communicator, op_code: int, a: torch.Tensor, b: torch.Tensor, keep: bool,
           barrier: bool = True) -> Tuple[_Entry, _tp.Problem]:
    op = _tp.OP_NAMES[op_code]
    _tensor(comm, a, "a", op, ("bf16",))
    _tensor(comm, b, "b", op, ("bf16",))
    b_nk = _b_operand(b, op)
    p = _tp.problem(op_code, comm.world_size, tuple(a.shape), tuple(b.shape), b_nk)
    stream = comm.current_stream(op)

    def make() -> _Entry:
        a_buf = torch.empty(tuple(a.shape), dtype=torch.bfloat16, device=comm.device)
        gathered = None
        if op_code == _tp.ALL_GATHER_GEMM:
            out = _poisoned(p.out_shape, comm)
            gathered = _poisoned((p.m, p.k), comm) if keep else None
        else:
            out = comm.symmetric(p.out_shape[0] * p.out_shape[1], torch.bfloat16, op).view(p.out_shape)
            out.fill_(float("nan"))
        plan = _tp.TpPlan(comm.native, p, a=a_buf.data_ptr(), b=b.data_ptr(), out=out.data_ptr(),
                          gathered=gathered.data_ptr() if gathered is not None else 0, stream=stream,
                          barrier=barrier)
        return _Entry(plan, a_buf, out, gathered, b)

    return comm.plan((op, p, b.data_ptr(), stream, keep), make), p


def all_gather_gemm(comm_id: int, a: torch.Tensor, b: torch.Tensor, keep: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    comm = lookup(comm_id, "all_gather_gemm")
    e, _ = _entry(comm, _tp.ALL_GATHER_GEMM, a, b, keep)
    e.a.copy_(a)
    e.plan.launch()
    return e.out.clone(), (e.gathered.clone() if e.gathered is not None else a.new_empty(0))


def gemm_reduce_scatter(comm_id: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _summed(_tp.GEMM_REDUCE_SCATTER, comm_id, a, b)


def gemm_all_reduce(comm_id: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _summed(_tp.GEMM_ALL_REDUCE, comm_id, a, b)


def _summed(op_code: int, comm_id: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """GEMM + reduce-scatter or all-reduce: `a` copied in, the symmetric output copied out."""
    e, _ = _entry(lookup(comm_id, _tp.OP_NAMES[op_code]), op_code, a, b, False)
    e.a.copy_(a)
    e.plan.launch()
    return e.out.clone()
