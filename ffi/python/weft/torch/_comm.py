"""weft.torch.Communicator: one rank of a group of GPUs on one host, for torch programs.

  comm = Communicator.from_process_group()           # under torchrun: one rank per process
  comms = weft.torch.local([0, 0])                    # several ranks in this process (tests)

Ops run on torch's current CUDA stream of the communicator's device, so they are ordered with the
surrounding torch work and nothing waits on the host. Ranks of one process that share a GPU must
each run on their own stream (their kernels wait for each other): local() gives every rank one,
``comm.stream``, and ``with comm.use():`` makes it current. A device-side failure (a peer that
never came, a timeout) is raised by the next op on the communicator, or by synchronize().

Set-up, teardown, plan creation and symmetric allocation are collective: every rank makes the same
calls in the same order (as with any torch.distributed collective).
"""
from __future__ import annotations

import contextlib
import itertools
import warnings
from typing import Dict, Iterator, List, Optional, Sequence

import torch

from .. import _tp
from ..comm import NativeComm
from ..device import device_info
from ..errors import ArgumentError, UnsupportedError, WeftError
from ..tensor import CUDA, Device, Tensor
from ._rendezvous import StoreRendezvous, next_prefix, node_id

DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.int32: "i32",
               torch.uint8: "u8"}
#: More cached plans than this on one communicator gets a warning (each has its own workspace).
PLAN_WARNING = 64

_REGISTRY: Dict[int, "Communicator"] = {}
_ids = itertools.count(1)


def lookup(comm_id: int, op: str) -> "Communicator":
    """The live communicator behind a custom op's ``comm`` argument."""
    c = _REGISTRY.get(int(comm_id))  # (a traced graph may hand it over as a SymInt)
    if c is None:
        raise ArgumentError(op, "comm", f"{comm_id} is not an open weft communicator of this process")
    return c


class Communicator:
    """See the module docstring. Made by from_process_group() or local(), never directly."""

    def __init__(self, native: NativeComm, *, rendezvous: Optional[StoreRendezvous], stream: Optional[torch.cuda.Stream]):
        self.native = native
        self.id = next(_ids)
        self.rank, self.world_size = native.rank, native.world_size
        self.device = torch.device("cuda", native.device)
        #: This rank's own stream (local() ranks), or None: ops run on torch's current stream.
        self.stream = stream
        self._rendezvous = rendezvous
        self._group: List[Communicator] = [self]
        self._last_stream: Optional[int] = None
        self._plans: Dict[tuple, object] = {}
        self._scratch: Dict[tuple, torch.Tensor] = {}
        self._closed = False
        _REGISTRY[self.id] = self

    # ---- creation ----------------------------------------------------------------------------------

    @classmethod
    def from_process_group(cls, group: object = None, *, heap_bytes: int = 1 << 30, staged_bytes: int = 1 << 20,
                           sm_budget: int = 0, timeout_s: float = 10.0, store_timeout_s: float = 300.0,
                           device: Optional[int] = None) -> "Communicator":
        """This process's rank of `group` (default: the world), rendezvous through the group's c10d
        store. Call torch.cuda.set_device(local_rank) first, as for NCCL. Every rank calls it."""
        import torch.distributed as dist

        op = "Communicator.from_process_group"
        if not dist.is_available() or not dist.is_initialized():
            raise ArgumentError(op, "group", "needs torch.distributed to be initialized (dist.init_process_group)")
        group = group if group is not None else dist.group.WORLD
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise ArgumentError(op, "group", "does not contain this process")
        ranks = tuple(dist.get_process_group_ranks(group))
        store = dist.PrefixStore(next_prefix(ranks), dist.distributed_c10d._get_default_store())
        rv = StoreRendezvous(store, rank, world, store_timeout_s, op)
        dev = torch.cuda.current_device() if device is None else torch.device("cuda", device).index
        native: Optional[NativeComm] = None
        try:
            nodes = rv.all_gather("node", node_id().encode())
            if len(set(nodes)) > 1:
                raise UnsupportedError(f"the group spans {len(set(nodes))} hosts; weft.torch communicators are one "
                                       "host's GPUs for now (WEFT_NODE_ID or the hostname tells hosts apart)",
                                       code="E_UNSUPPORTED", op=op)
            native = NativeComm(device=dev, rank=rank, world_size=world, sm_budget=sm_budget, heap_bytes=heap_bytes,
                                staged_bytes=staged_bytes, timeout_s=timeout_s)
            blobs = rv.all_gather("handles", native.export())
            for r, blob in enumerate(blobs):
                if r != rank:
                    native.import_peer(blob)
            native.connect()
            rv.barrier("ready")
        except BaseException as e:
            rv.abort(str(e))
            if native is not None:
                native.close_peers()
                native.destroy()
            raise
        return cls(native, rendezvous=rv, stream=None)

    @classmethod
    def _local(cls, devices: Sequence[int], *, sm_budget: Optional[int], heap_bytes: int, staged_bytes: int,
               timeout_s: float) -> List["Communicator"]:
        op = "weft.torch.local"
        if not isinstance(devices, (list, tuple)) or not devices:
            raise ArgumentError(op, "devices", f"must be a non-empty list of GPU indices (got {devices!r})")
        devs = [torch.device("cuda", d).index if not isinstance(d, torch.device) else d.index for d in devices]
        natives: List[NativeComm] = []
        try:
            for rank, d in enumerate(devs):
                share = sm_budget
                if share is None:  # ranks that share a GPU split its SMs, so their kernels are co-resident
                    share = device_info(d).sm_count // devs.count(d) if devs.count(d) > 1 else 0
                natives.append(NativeComm(device=d, rank=rank, world_size=len(devs), sm_budget=share,
                                          heap_bytes=heap_bytes, staged_bytes=staged_bytes, timeout_s=timeout_s))
            blobs = [n.export() for n in natives]
            for n in natives:
                for r, blob in enumerate(blobs):
                    if r != n.rank:
                        n.import_peer(blob)
            for n in natives:
                n.connect()
        except BaseException:
            for step in (NativeComm.close_peers, NativeComm.destroy):
                for n in natives:
                    try:
                        step(n)
                    except Exception:  # noqa: BLE001 - the creation error is the one to report
                        pass
            raise
        comms = [cls(n, rendezvous=None, stream=torch.cuda.Stream(device=n.device)) for n in natives]
        for c in comms:
            c._group = comms
        return comms

    # ---- streams -----------------------------------------------------------------------------------

    def use(self) -> contextlib.AbstractContextManager:
        """Makes this rank's stream (local ranks) current, and its device: ``with comm.use(): ...``."""
        if self.stream is not None:
            return torch.cuda.stream(self.stream)
        return torch.cuda.device(self.device)

    def current_stream(self, op: str) -> int:
        """The cudaStream_t this rank's next op runs on: torch's current stream of its device."""
        self._guard(op)
        s = torch.cuda.current_stream(self.device).cuda_stream
        for other in self._group:
            if other is not self and other.device == self.device and other._last_stream == s:
                raise ArgumentError(op, "stream", f"is the stream rank {other.rank} ran on: ranks of one process that "
                                    "share a GPU need one stream each (their kernels wait for each other); run each "
                                    "rank's work inside `with comm.use():`")
        self._last_stream = s
        self.native.poll()
        return s

    # ---- symmetric memory --------------------------------------------------------------------------

    def empty(self, shape: Sequence[int], dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """A torch tensor in the symmetric heap (the same offset on every rank), uninitialized.
        Every rank allocates and drops symmetric tensors in the same order; the range goes back to
        the heap when the last reference to the tensor goes."""
        op = "Communicator.empty"
        self._guard(op)
        self.dtype_name(dtype, op)
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ArgumentError(op, "shape", f"must have no negative size (got {shape})")
        numel = 1
        for d in shape:
            numel *= d
        return self.symmetric(numel, dtype, op).view(shape) if numel else torch.empty(shape, dtype=dtype, device=self.device)

    def symmetric(self, numel: int, dtype: torch.dtype, op: str) -> torch.Tensor:
        """A 1-D symmetric torch tensor of numel elements (through DLPack, zero copy)."""
        name = self.dtype_name(dtype, op)
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        native = self.native
        offset = native.alloc(nbytes, op)
        view = Tensor(native.heap_base + offset, (numel,), name, Device(CUDA, native.device),
                      release=lambda: native.free(offset, nbytes))
        try:
            t = torch.from_dlpack(view)
        finally:
            view.close()  # the range now lives as long as the torch tensor
        return t

    def is_symmetric(self, t: torch.Tensor) -> bool:
        return t.is_contiguous() and self.native.owns(t.data_ptr(), t.numel() * t.element_size())

    def scratch(self, key: tuple, numel: int, dtype: torch.dtype, op: str) -> torch.Tensor:
        """A cached symmetric buffer for one (purpose, size, dtype, stream): collectives stage torch
        tensors here. Allocated collectively on first use, kept until clear_cache() or close()."""
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = self.symmetric(numel, dtype, op)
        return buf

    def plan(self, key: tuple, make) -> object:
        entry = self._plans.get(key)
        if entry is None:
            entry = self._plans[key] = make()
            if len(self._plans) == PLAN_WARNING:
                warnings.warn(f"weft: {PLAN_WARNING} fused-op plans are cached on rank {self.rank}: each distinct "
                              "(op, shape, weight tensor, stream) makes one, with its own symmetric workspace. Pass "
                              "the same weight tensors each step, or call clear_cache() on every rank.", stacklevel=3)
        return entry

    @staticmethod
    def dtype_name(dtype: torch.dtype, op: str) -> str:
        name = DTYPE_NAMES.get(dtype)
        if name is None:
            raise ArgumentError(op, "dtype", f"must be one of {', '.join(map(str, DTYPE_NAMES))} (got {dtype})")
        return name

    # ---- ops (the custom ops in weft/torch/_ops.py; every rank makes the same calls) ----------------

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.weft.all_gather(x, self.id)

    def reduce_scatter(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.weft.reduce_scatter(x, self.id)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.weft.all_reduce(x, self.id)

    def all_gather_gemm(self, a: torch.Tensor, b: torch.Tensor, *, return_gathered: bool = False):
        out, gathered = torch.ops.weft.all_gather_gemm(a, b, self.id, return_gathered)
        return (out, gathered) if return_gathered else out

    def gemm_reduce_scatter(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.ops.weft.gemm_reduce_scatter(a, b, self.id)

    def gemm_all_reduce(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.ops.weft.gemm_all_reduce(a, b, self.id)

    def plan_choices(self) -> List[dict]:
        """What each cached fused plan runs (path, mover, tile), for reports."""
        return [dict(e.plan.choice, op=_tp.OP_NAMES[e.plan.problem.op]) for e in self._plans.values()]

    # ---- completion and teardown -------------------------------------------------------------------

    def synchronize(self) -> None:
        """Waits for this rank's launches so far (bounded) and raises the first failure."""
        self._guard("Communicator.synchronize")
        self.native.synchronize()

    def clear_cache(self) -> None:
        """Frees the cached plans and staging buffers (collective: every rank at the same point)."""
        self._guard("Communicator.clear_cache")
        plans, self._plans = list(self._plans.values()), {}
        self._scratch = {}
        for e in plans:
            e.close()

    def close(self) -> None:
        """Collective teardown: every rank calls it (for local() ranks, one call closes them all).
        Waits for the launches, frees plans, then barrier, unmap the peers, barrier, free."""
        group = [c for c in self._group if not c._closed]
        if not group:
            return
        errors: List[BaseException] = []

        def step(f) -> None:
            try:
                f()
            except BaseException as e:  # noqa: BLE001 - teardown goes on; the first error is raised
                errors.append(e)

        for c in group:
            step(c.native.synchronize)
        for c in group:
            step(c.clear_cache)
            c._closed = True
            _REGISTRY.pop(c.id, None)
            if c.native.heap.live:
                warnings.warn(f"weft: rank {c.rank} closes with {c.native.heap.live} symmetric tensor(s) from empty() "
                              "still referenced: their memory is freed now and must not be used", stacklevel=2)
        if self._rendezvous is not None:
            step(lambda: self._rendezvous.barrier("dispose"))
        for c in group:
            step(c.native.close_peers)
        if self._rendezvous is not None:
            step(lambda: self._rendezvous.barrier("unmapped"))
        for c in group:
            step(c.native.destroy)
        if errors:
            raise errors[0]

    def _guard(self, op: str) -> None:
        if self._closed:
            raise WeftError(f"Communicator (rank {self.rank}) was used after close()", code="E_DISPOSED", op=op)

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "local" if self._rendezvous is None else "process group"
        return f"weft.torch.Communicator(rank {self.rank} of {self.world_size}, {self.device}, {kind}" + \
            (", closed)" if self._closed else ")")


def local(devices: Sequence[int], *, sm_budget: Optional[int] = None, heap_bytes: int = 1 << 30,
          staged_bytes: int = 1 << 20, timeout_s: float = 10.0) -> List[Communicator]:
    """Several ranks in this process, rank i on GPU devices[i] (the same GPU may repeat: then each
    rank gets floor(SMs / ranks on it) unless sm_budget says otherwise). Run each rank's work inside
    ``with comm.use():``; close any one of them to close them all."""
    return Communicator._local(devices, sm_budget=sm_budget, heap_bytes=heap_bytes, staged_bytes=staged_bytes,
                               timeout_s=timeout_s)


def iter_open() -> Iterator[Communicator]:
    return iter(list(_REGISTRY.values()))
