"""Moving a communicator's set-up bytes between the ranks of a torch process group, through its
c10d store (the rendezvous torch.distributed already made: no port of weft's own). Every wait is
bounded, names the ranks that are missing, and stops at once when another rank reported failure."""
from __future__ import annotations

import os
import socket
import time
from typing import Dict, List, Tuple

from ..errors import PeerError, TimeoutError

_generations: Dict[Tuple[int, ...], int] = {}


def next_prefix(ranks: Tuple[int, ...]) -> str:
    """Store keys of the next communicator over these global ranks (every rank makes its
    communicators in the same order, so they agree on it)."""
    gen = _generations.get(ranks, 0)
    _generations[ranks] = gen + 1
    return f"weft/comm/{'-'.join(map(str, ranks))}/{gen}"


def node_id() -> str:
    """Which host this rank is on: WEFT_NODE_ID when set, else the hostname (as lib/bootstrap.ts)."""
    return os.environ.get("WEFT_NODE_ID") or socket.gethostname()


class StoreRendezvous:
    def __init__(self, store: object, rank: int, world: int, timeout_s: float, op: str):
        self.store, self.rank, self.world, self.timeout_s, self.op = store, rank, world, timeout_s, op

    def all_gather(self, name: str, blob: bytes) -> List[bytes]:
        keys = [f"{name}/{r}" for r in range(self.world)]
        self.store.set(keys[self.rank], blob)
        self._wait(name, keys)
        return [bytes(self.store.get(k)) for k in keys]

    def barrier(self, name: str) -> None:
        self.all_gather(name, b"")

    def abort(self, message: str) -> None:
        """Tells the other ranks' waits that this rank failed (best effort)."""
        try:
            self.store.set("abort", f"rank {self.rank}: {message}"[:4000])
        except Exception:  # noqa: BLE001 - the store itself may be what failed
            pass

    def _wait(self, name: str, keys: List[str]) -> None:
        deadline = time.monotonic() + self.timeout_s
        pause = 1e-3
        while not self.store.check(keys):
            if self.store.check(["abort"]):
                raise PeerError(f"another rank failed while setting up the communicator: "
                                f"{bytes(self.store.get('abort')).decode(errors='replace')}", code="E_PEER", op=self.op)
            if time.monotonic() > deadline:
                missing = [r for r, k in enumerate(keys) if not self.store.check([k])]
                raise TimeoutError(f"rank {self.rank} waited {self.timeout_s:g} s at '{name}' for ranks {missing} "
                                   "(did they make the same call? are they alive?)", code="E_TIMEOUT", op=self.op)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
