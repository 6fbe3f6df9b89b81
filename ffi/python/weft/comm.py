"""One rank's native communicator, without torch: the handle, its symmetric heap and completion
ring, and launches of collectives on a caller's stream. Creation and teardown are collective and
come in phases, so that one process can drive several ranks without threads (weft.torch.local) and
a process group can drive one rank through its store (the caller moves the exported bytes):

  c = NativeComm(device=0, rank=r, world_size=W)      # every rank
  blob = c.export()                                   # -> every other rank
  c.import_peer(blob_of_rank_q) for each q != r       # then
  c.connect()                                         # collectives may run
  ...
  c.synchronize(); (barrier) c.close_peers(); (barrier) c.destroy()
"""
from __future__ import annotations

import ctypes
from typing import Optional

from . import _abi, _failure
from ._completion import Completion
from ._heap import HeapAllocator
from ._native import check, native
from .device import require_device
from .errors import ArgumentError, DisposedError, check_int

ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, ALL_TO_ALL, BROADCAST, BARRIER = range(6)  # WeftCollectiveKind
KIND_NAMES = {ALL_GATHER: "all_gather", REDUCE_SCATTER: "reduce_scatter", ALL_REDUCE: "all_reduce", BARRIER: "barrier"}
_MAX_RANKS = 32


class NativeComm:
    """See the module docstring. Every argument is validated before it crosses the ABI."""

    def __init__(self, *, device: int, rank: int, world_size: int, sm_budget: int = 0, heap_bytes: int = 1 << 30,
                 staged_bytes: int = 1 << 20, timeout_s: float = 10.0):
        op = "Communicator.create"
        check_int(op, "world_size", world_size, 1, _MAX_RANKS)
        check_int(op, "rank", rank, 0, world_size - 1)
        check_int(op, "sm_budget", sm_budget, 0, 1 << 16)
        check_int(op, "heap_bytes", heap_bytes, 1, 1 << 46)
        check_int(op, "staged_bytes", staged_bytes, 1, 1 << 30)
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 3600:
            raise ArgumentError(op, "timeout_s", f"must be a number of seconds in (0, 3600] (got {timeout_s!r})")
        require_device(device, op)
        self.device, self.rank, self.world_size, self.timeout_s = device, rank, world_size, float(timeout_s)
        cfg = _abi.new(_abi.CommConfig, device=device, rank=rank, world_size=world_size, sm_budget=sm_budget,
                       heap_bytes=heap_bytes, staged_bytes=staged_bytes, timeout_ns=int(timeout_s * 1e9))
        handle = ctypes.c_void_p(0)
        check(native().weft_comm_create(ctypes.addressof(cfg), ctypes.byref(handle)), op)
        self._handle: Optional[int] = int(handle.value)
        try:
            info = _abi.new(_abi.CommInfo)
            check(native().weft_comm_info(self._handle, ctypes.addressof(info)), op)
            self.heap_base, self.heap_bytes = int(info.heap_base), int(info.heap_bytes)
            self.staged_bytes, self.max_ctas, self.sm_count = int(info.staged_bytes), info.max_ctas, info.sm_count
            self.heap = HeapAllocator(self.heap_bytes)
            self.completion = Completion(device, timeout_s=timeout_s + 30)
        except BaseException:
            native().weft_comm_destroy(self._handle)
            raise
        self._imported = {rank}
        self._connected = False
        self._describe = {}

    # ---- set-up phases ---------------------------------------------------------------------------

    def export(self) -> bytes:
        """This rank's WeftPeerHandle bytes, for every other rank's import_peer()."""
        h = _abi.new(_abi.PeerHandle)
        check(native().weft_comm_export(self.handle("Communicator.create"), ctypes.addressof(h)), "Communicator.create")
        return ctypes.string_at(ctypes.addressof(h), ctypes.sizeof(h))

    def import_peer(self, blob: bytes) -> None:
        op = "Communicator.create"
        size = ctypes.sizeof(_abi.PeerHandle)
        if not isinstance(blob, (bytes, bytearray)) or len(blob) != size:
            raise ArgumentError(op, "blob", f"must be the {size} bytes of a peer's export() (got {len(blob) if isinstance(blob, (bytes, bytearray)) else type(blob).__name__})")
        h = _abi.PeerHandle.from_buffer_copy(bytes(blob))
        if h.size != size or not 0 <= h.rank < self.world_size or h.rank in self._imported:
            raise ArgumentError(op, "blob", f"is not a new peer of this {self.world_size}-rank group (rank {h.rank}, "
                                f"size field {h.size})")
        check(native().weft_comm_import(self.handle(op), ctypes.addressof(h)), op)
        self._imported.add(h.rank)

    def connect(self) -> None:
        op = "Communicator.create"
        missing = sorted(set(range(self.world_size)) - self._imported)
        if missing:
            raise ArgumentError(op, "peers", f"ranks {missing} were not imported before connect()")
        check(native().weft_comm_connect(self.handle(op)), op)
        self._connected = True

    # ---- launches ----------------------------------------------------------------------------------

    def handle(self, op: str) -> int:
        if self._handle is None:
            raise DisposedError(op, f"Communicator (rank {self.rank})")
        return self._handle

    def collective(self, kind: int, dtype_code: int, count: int, input_ptr: int, output_ptr: int, stream: int,
                   op: str) -> int:
        """Launches one collective on `stream` and returns its sequence number (no wait)."""
        self.handle(op)
        self.completion.poll()
        done, arrivals, seq = self.completion.slot()
        params = _abi.new(_abi.CollectiveParams, kind=kind, dtype=dtype_code, count=count, input=input_ptr,
                          output=output_ptr, stream=stream, done=done, seq=seq, arrivals=arrivals)
        check(native().weft_collective(self._handle, ctypes.addressof(params)), op)
        self.completion.track(seq, op, self.describer(op, collective=True))
        return seq

    def barrier(self, stream: int, op: str = "barrier") -> int:
        return self.collective(BARRIER, 4, 0, 0, 0, stream, op)

    def describer(self, op: str, collective: bool):
        key = (op, collective)
        d = self._describe.get(key)
        if d is None:
            make = _failure.collective if collective else _failure.tp
            d = self._describe[key] = make(self.rank, self.timeout_s, op)
        return d

    def poll(self) -> None:
        """Raises the first failure among this rank's finished launches (see weft/_completion.py)."""
        if self._handle is not None:
            self.completion.poll()

    def synchronize(self, timeout_s: Optional[float] = None) -> None:
        """Waits for every launch made so far; raises the first failure."""
        if self._handle is not None:
            self.completion.wait_all(timeout_s)

    # ---- symmetric heap ----------------------------------------------------------------------------

    def alloc(self, nbytes: int, op: str) -> int:
        """A symmetric range's offset. Every rank makes the same alloc() calls in the same order."""
        self.handle(op)
        return self.heap.alloc(nbytes, op)

    def free(self, offset: int, nbytes: int) -> None:
        if self._handle is not None:
            self.heap.free(offset, nbytes)

    def owns(self, ptr: int, nbytes: int) -> bool:
        """True when [ptr, ptr + nbytes) lies in this rank's symmetric heap."""
        return self._handle is not None and self.heap_base <= ptr and ptr + nbytes <= self.heap_base + self.heap_bytes

    # ---- teardown (collective: barrier between the phases) -----------------------------------------

    def close_peers(self) -> None:
        if self._handle is not None:
            check(native().weft_comm_close_peers(self._handle), "Communicator.close")

    def destroy(self) -> None:
        """Frees the arena and the handle; every peer must have closed its mappings. Idempotent."""
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        try:
            check(native().weft_comm_destroy(h), "Communicator.close")
        finally:
            self.completion.close()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __repr__(self) -> str:
        return f"NativeComm(rank {self.rank} of {self.world_size}, device {self.device}{', closed' if self.closed else ''})"
