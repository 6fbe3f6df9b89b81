"""Fused tensor-parallel plans (weft_tp_* in weft.h, lib/ops/tp.ts in TypeScript), without torch.

  ALL_GATHER_GEMM      a [m, K] per rank, b [K, n]       out [W m, n] = allgather(a) · b   (+ gathered [W m, K])
  GEMM_REDUCE_SCATTER  a [M, k], b [k, N]               out [M / W, N] = this rank's rows of Σ a · b
  GEMM_ALL_REDUCE      a [M, k], b [k, N]               out [M, N] = Σ over ranks a · b

b is row-major, or the transpose of a row-major matrix (b_nk: the weights layout, y = x · Wᵀ). The
Python ops take M = W · m (every rank the same rows), as torch.distributed's collectives do.

A plan is bound to its operands' addresses and to one stream (its TMA descriptors and copy streams
are built once). Creating one is collective: its workspace comes from the symmetric heap and its
zeroing is ordered before any peer's first launch by a barrier on the plan's stream.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple, Sequence

from . import _abi
from ._native import check, native
from .comm import NativeComm
from .errors import ArgumentError

ALL_GATHER_GEMM, GEMM_REDUCE_SCATTER, GEMM_ALL_REDUCE = 0, 1, 2  # WeftTpOp
OP_NAMES = {ALL_GATHER_GEMM: "all_gather_gemm", GEMM_REDUCE_SCATTER: "gemm_reduce_scatter",
            GEMM_ALL_REDUCE: "gemm_all_reduce"}
_B_NK = 1  # WEFT_GEMM_B_NK
_MOVERS = ["none", "ctas", "copy_engine", "none", "exchange"]


class Problem(NamedTuple):
    op: int
    m: int  # WeftTpParams.m: rows of out (all-gather) or of a (the others)
    n: int
    k: int
    b_nk: bool
    out_shape: tuple


def problem(op: int, world: int, a_shape: Sequence[int], b_shape: Sequence[int], b_nk: bool) -> Problem:
    """Validates one rank's operand shapes; b_shape is the logical [K, N] operand."""
    name = OP_NAMES[op]
    if len(a_shape) != 2:
        raise ArgumentError(name, "a", f"must be a matrix (got shape {tuple(a_shape)})")
    if len(b_shape) != 2:
        raise ArgumentError(name, "b", f"must be a matrix (got shape {tuple(b_shape)})")
    rows, k = a_shape
    bk, n = b_shape
    if min(rows, k, bk, n) < 1:
        raise ArgumentError(name, "a", f"and b must have no empty dimension (a {tuple(a_shape)}, b {tuple(b_shape)})")
    if bk != k:
        raise ArgumentError(name, "b", f"has {bk} rows but a has {k} columns (a @ b needs them equal)")
    if op == ALL_GATHER_GEMM:
        return Problem(op, world * rows, n, k, b_nk, (world * rows, n))
    if rows % world != 0:
        raise ArgumentError(name, "a", f"has {rows} rows, which do not split evenly over {world} ranks")
    out = (rows // world, n) if op == GEMM_REDUCE_SCATTER else (rows, n)
    return Problem(op, rows, n, k, b_nk, out)


class TpPlan:
    """One rank's plan for one Problem over fixed addresses on one stream; launch() as often as
    needed (each launch takes the next epoch; every rank launches its plans in the same order)."""

    def __init__(self, comm: NativeComm, p: Problem, *, a: int, b: int, out: int, gathered: int, stream: int,
                 barrier: bool = True):
        op = OP_NAMES[p.op]
        self.comm, self.problem, self.stream = comm, p, stream
        params = _abi.new(_abi.TpParams, op=p.op, flags=_B_NK if p.b_nk else 0, m=p.m, n=p.n, k=p.k, a=a, b=b,
                          out=out, gathered=gathered, stream=stream)
        choice = _abi.new(_abi.TpChoice)
        check(native().weft_tp_choose(comm.handle(op), ctypes.addressof(params), ctypes.addressof(choice)), op)
        self.choice = {
            "path": "fused" if choice.path == 1 else "sequential", "mover": _MOVERS[choice.mover],
            "tile_n": choice.tile_n, "workspace_bytes": int(choice.workspace_bytes),
            "reason": choice.reason.decode(errors="replace"),
        }
        self._ws_bytes = max(1, int(choice.workspace_bytes))
        self._ws = comm.alloc(self._ws_bytes, op)
        params.workspace, params.workspace_bytes = comm.heap_base + self._ws, self._ws_bytes
        handle = ctypes.c_void_p(0)
        try:
            check(native().weft_tp_plan_create(comm.handle(op), ctypes.addressof(params), ctypes.byref(handle)), op)
        except BaseException:
            comm.free(self._ws, self._ws_bytes)
            raise
        self._handle = int(handle.value)
        self._launch = _abi.new(_abi.OpLaunch)
        self._describe = comm.describer(op, collective=False)
        self._op = op
        # The plan zeroed its workspace on `stream`; a barrier on the same stream orders that before any
        # peer's first launch (each rank enters it only after its earlier work on the stream). With
        # barrier=False the caller enters it later (enter_barrier), before the plan's first launch:
        # ranks that one process drives make all their plans first, then enter every barrier.
        self.barrier_pending = True
        if barrier:
            self.enter_barrier()

    def enter_barrier(self) -> None:
        if not self.barrier_pending:
            return
        try:
            self.comm.barrier(self.stream, self._op)
        except BaseException:
            self.close()
            raise
        self.barrier_pending = False

    def launch(self) -> int:
        if not self._handle:
            raise ArgumentError(self._op, "plan", "was closed")
        if self.barrier_pending:
            raise ArgumentError(self._op, "plan", "was made with barrier=False and its barrier not yet entered")
        comm = self.comm
        comm.completion.poll()
        done, arrivals, seq = comm.completion.slot()
        self._launch.done, self._launch.seq, self._launch.arrivals = done, seq, arrivals
        check(native().weft_tp_plan_launch(self._handle, ctypes.addressof(self._launch)), self._op)
        comm.completion.track(seq, self._op, self._describe)
        return seq

    def close(self) -> None:
        """Waits for the plan's streams, frees it, and gives its workspace back. Every rank closes
        its plans in the same order. Idempotent."""
        if not self._handle:
            return
        h, self._handle = self._handle, 0
        try:
            check(native().weft_tp_plan_destroy(h), f"{self._op}.close")
        finally:
            self.comm.free(self._ws, self._ws_bytes)
