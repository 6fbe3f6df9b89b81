"""How the host learns that a launch finished or failed without waiting for it (the twin of
lib/completion.ts, minus the event loop; device side: cuda/primitives/completion.cuh).

A ring of slots on one device: two 64-bit words of pinned, host-mapped memory each (done: the last
published sequence number, bit 63 set on failure; reason: why) and two 32-bit arrival counters in
device memory. A launch takes a slot, the kernel's last CTA publishes there, and the host reads the
words with plain loads. In a torch program the stream already orders the work, so nothing waits
for a launch: failures are collected by poll() at the next call on the communicator, or by
wait_all() (synchronize, close), and raised there, much as CUDA reports asynchronous errors."""
from __future__ import annotations

import ctypes
import time
from collections import deque
from typing import Callable, Deque, Optional, Tuple

from ._native import check, native
from .errors import ArgumentError, TimeoutError, WeftError

FAILED = 1 << 63
#: Device bytes per slot: WeftOpLaunch's four 32-bit words (0 between launches).
_ARRIVAL_BYTES = 16

#: Turns a failed launch's reason word into the exception to raise.
Describer = Callable[[int, int], Exception]


class Completion:
    def __init__(self, device: int, slots: int = 4096, timeout_s: float = 60.0):
        if not 1 <= slots <= 1 << 20:
            raise ArgumentError("Completion", "slots", f"must be in [1, 2^20] (got {slots})")
        self.device = device
        self.slots = slots
        self.timeout_s = timeout_s
        host, dev = ctypes.c_void_p(0), ctypes.c_void_p(0)
        check(native().weft_host_alloc(slots * 16, ctypes.byref(host), ctypes.byref(dev)), "Completion")
        arrivals = ctypes.c_void_p(0)
        status = native().weft_malloc(device, slots * _ARRIVAL_BYTES, ctypes.byref(arrivals))
        if status != 0:
            native().weft_host_free(host)
            check(status, "Completion")
        self._host, self._dev, self._arrivals = int(host.value), int(dev.value), int(arrivals.value)
        self._words = (ctypes.c_uint64 * (2 * slots)).from_address(self._host)
        ctypes.memset(self._host, 0, slots * 16)
        check(native().weft_memset(self._arrivals, 0, slots * _ARRIVAL_BYTES, None), "Completion")
        self._issued = [0] * slots
        self._next = 1
        self._pending: Deque[Tuple[int, str, Optional[Describer]]] = deque()
        self._closed = False

    def slot(self) -> Tuple[int, int, int]:
        """(done, arrivals, seq) for the next launch. When the ring is full of unfinished launches it
        waits (bounded) for the oldest: a slot is never shared by two launches in flight."""
        if self._closed:
            raise WeftError("the communicator's completion ring was closed", code="E_DISPOSED", op="launch")
        seq = self._next
        self._next += 1
        index = seq % self.slots
        previous = self._issued[index]
        if previous and not self._finished(index, previous):
            self._spin(index, previous, "launch")
        self.poll(until=previous)
        self._issued[index] = seq
        return self._dev + index * 16, self._arrivals + index * _ARRIVAL_BYTES, seq

    def track(self, seq: int, op: str, describe: Optional[Describer]) -> None:
        """Launch `seq` was made: its failure, if any, is raised by a later poll()."""
        self._pending.append((seq, op, describe))

    def poll(self, until: int = 0) -> None:
        """Settles finished launches in order; raises the first failure. Launches up to `until`
        are known to be finished (their slot is about to be reused)."""
        while self._pending:
            seq, op, describe = self._pending[0]
            index = seq % self.slots
            if seq > until and not self._finished(index, seq):
                return
            self._pending.popleft()
            word = self._words[2 * index]
            if word & FAILED:
                reason = int(self._words[2 * index + 1])
                raise describe(reason, seq) if describe else _generic(reason, op)

    def wait_all(self, timeout_s: Optional[float] = None) -> None:
        """Waits (bounded) for every tracked launch; raises the first failure."""
        while self._pending:
            seq, op, _ = self._pending[0]
            self._spin(seq % self.slots, seq, op, timeout_s)
            self.poll(until=seq)

    def _finished(self, index: int, seq: int) -> bool:
        return (self._words[2 * index] & ~FAILED) >= seq

    def _spin(self, index: int, seq: int, op: str, timeout_s: Optional[float] = None) -> None:
        limit = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        pause = 1e-6
        while not self._finished(index, seq):
            if time.monotonic() > deadline:
                raise TimeoutError(f"launch {seq} on device {self.device} did not report completion within {limit:g} s "
                                   "(the kernel never ran, or the GPU is wedged)", code="E_TIMEOUT", op=op)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Frees the ring. Callers wait for (or give up on) their launches first. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        self._words = None
        check(native().weft_free(self._arrivals), "Completion.close")
        check(native().weft_host_free(self._host), "Completion.close")


def decode_reason(reason: int) -> Tuple[int, int, int, int]:
    """(code, stage, field, peer) of a failed launch's reason word (bits 0..31 signed, 32..39,
    40..47, 48..63)."""
    low = reason & 0xFFFFFFFF
    code = low - (1 << 32) if low & 0x80000000 else low
    return code, (reason >> 32) & 0xFF, (reason >> 40) & 0xFF, reason >> 48


def _generic(reason: int, op: str) -> WeftError:
    code, stage, _, _ = decode_reason(reason)
    return WeftError(f"the GPU reported failure (status {code}, stage {stage})", code="E_INTERNAL", op=op)
