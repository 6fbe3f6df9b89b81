"""What a failed launch's reason word means, as exceptions (the wording follows lib/comm.ts and
lib/ops/tp.ts, so a failure reads the same from Bun and from Python)."""
from __future__ import annotations

from . import _abi
from ._completion import Describer, decode_reason
from .errors import STATUS, PeerError, TimeoutError, WeftError

_STAGE_WAIT = {
    1: "to enter the same collective (did it make this call? is it alive?)",
    3: "to finish its part of the collective",
    4: "to deliver its staged data",
    6: "(on another node) to deliver its data through the proxy (did it make this call? is it alive?)",
}
_FIELDS = {
    1: "the collective (one rank called a different one)",
    2: "the dtype",
    3: "the element count",
    4: "the CTA count",
    5: "the root",
    6: "the world size",
    7: "the algorithm",
    8: "the call sequence (one rank made more or fewer collective calls than the other)",
    9: "the all-to-all counts",
}
_ENGINE_STAGE = {
    1: "the producer, waiting for a peer's data (all-gather: its rows of A; reduce-scatter and all-reduce with the "
       "copy-engine mover: its partials of this rank's rows)",
    2: "a consumer (shared-memory pipeline)",
    3: "the epilogue, waiting for a tile's owner to store it or for the peers to enter the launch",
    4: "the end of the kernel, waiting for the peers to finish adding (or for this rank's copies to land)",
}


def collective(rank: int, timeout_s: float, op: str) -> Describer:
    def describe(reason: int, seq: int) -> Exception:
        code, stage, field, peer = decode_reason(reason)
        who = f"rank {rank}"
        if code == STATUS["E_TIMEOUT"]:
            wait = _STAGE_WAIT.get(stage, f"(stage {stage})")
            return TimeoutError(f"{who} waited {timeout_s:g} s for rank {peer} {wait}", code="E_TIMEOUT", op=op)
        if code == STATUS["E_INVALID"]:
            return PeerError(f"{who} and rank {peer} made different calls: {_FIELDS.get(field, f'field {field}')} "
                             "differs. Every rank must make the same collective calls, in the same order, with the "
                             "same sizes and dtypes", code="E_PEER", op=op)
        if stage == _abi.ENUMS["WeftCollectiveStage"]["WEFT_STAGE_ABORTED"]:
            if field == _abi.ENUMS["WeftAbortSource"]["WEFT_ABORT_HOST"]:
                return PeerError(f"{who} stopped: rank {peer} was declared failed (weft_comm_abort)", code="E_PEER", op=op)
            return PeerError(f"{who} stopped because another rank failed this op (its own error says why)",
                             code="E_PEER", op=op)
        return WeftError(f"{who}: the GPU reported status {code} at stage {stage} with rank {peer}",
                         code="E_INTERNAL", op=op)

    return describe


def tp(rank: int, timeout_s: float, op: str) -> Describer:
    fallback = collective(rank, timeout_s, op)

    def describe(reason: int, seq: int) -> Exception:
        code, stage, _, _ = decode_reason(reason)
        if code < 0:  # the sequential path's collective failed
            return fallback(reason, seq)
        where = _ENGINE_STAGE.get(stage, f"stage {stage}")
        if code in (1, 2):
            what = "a shared-memory barrier wait" if code == 1 else "a wait for a peer's signal"
            return TimeoutError(f"rank {rank}: {what} ran out ({timeout_s:g} s) in {where}. Every rank must make the "
                                "same calls in the same order", code="E_TIMEOUT", op=op)
        return WeftError(f"rank {rank}: launch {seq} failed (code {code}, {where})", code="E_INTERNAL", op=op)

    return describe
