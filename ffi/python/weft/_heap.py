"""The symmetric heap's allocator (the twin of lib/heap.ts): deterministic first-fit over a sorted
free list, so the same sequence of allocations gives the same offsets on every rank, and a peer
finds rank r's copy at peer_base[r] + offset.

The free list after a set of frees does not depend on their order (ranges coalesce), so ranks may
free in different orders; what every rank must share is the set of live allocations at each
allocation. Frees can come from a DLPack deleter on another thread, hence the lock."""
from __future__ import annotations

import threading
from typing import List, Tuple

from .errors import OutOfMemoryError

#: Allocations start on 256-byte boundaries: 16-byte vector and TMA alignment with room to spare.
ALIGNMENT = 256


def _round(size: int) -> int:
    return max(ALIGNMENT, -(-size // ALIGNMENT) * ALIGNMENT)


class HeapAllocator:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self._free: List[List[int]] = [[0, nbytes]]  # [offset, size], sorted, never adjacent
        self._lock = threading.Lock()
        self.live = 0

    def alloc(self, size: int, op: str) -> int:
        need = _round(size)
        with self._lock:
            for i, r in enumerate(self._free):
                if r[1] >= need:
                    offset = r[0]
                    r[0] += need
                    r[1] -= need
                    if r[1] == 0:
                        del self._free[i]
                    self.live += 1
                    return offset
            free, largest = self._stats()
        raise OutOfMemoryError(f"the symmetric heap has no free range of {need} bytes ({free} of {self.nbytes} bytes "
                               f"free, largest range {largest}); create the communicator with a larger heap_bytes",
                               code="E_OOM", op=op)

    def free(self, offset: int, size: int) -> None:
        need = _round(size)
        with self._lock:
            i = next((j for j, r in enumerate(self._free) if r[0] > offset), len(self._free))
            self._free.insert(i, [offset, need])
            if i + 1 < len(self._free) and offset + need == self._free[i + 1][0]:
                self._free[i][1] += self._free[i + 1][1]
                del self._free[i + 1]
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == offset:
                self._free[i - 1][1] += self._free[i][1]
                del self._free[i]
            self.live -= 1

    def _stats(self) -> Tuple[int, int]:
        return sum(r[1] for r in self._free), max((r[1] for r in self._free), default=0)

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return self._stats()[0]
