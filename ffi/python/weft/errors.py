"""Every failure weft reports is a WeftError: a stable ``code``, the operation that failed, and (when
it came from native code) the native message with its file:line. The classes mirror lib/errors.ts;
where a Python builtin means the same thing, the class derives from it too (ArgumentError is a
ValueError, TimeoutError a builtins.TimeoutError, LibraryError an ImportError), so generic handlers
keep working."""
from __future__ import annotations

import builtins
from typing import Optional

# Status codes of weft.h (enum WeftStatus), by name.
STATUS = {
    "OK": 0,
    "E_INVALID": -1,
    "E_CUDA": -2,
    "E_NO_DEVICE": -3,
    "E_OOM": -4,
    "E_TIMEOUT": -5,
    "E_PEER": -6,
    "E_UNSUPPORTED": -7,
    "E_TRANSPORT": -8,
    "E_INTERNAL": -9,
}


class WeftError(Exception):
    """Base of every weft error. ``code`` is a weft.h status name ("E_INVALID", ...) or one of the
    binding's own ("E_LIBRARY_MISSING", "E_LIBRARY_LOAD", "E_ABI_MISMATCH", "E_DISPOSED")."""

    def __init__(self, message: str, *, code: str, op: str, native_message: Optional[str] = None):
        super().__init__(f"{op}: {message}")
        self.code = code
        self.op = op
        self.native_message = native_message


class ArgumentError(WeftError, ValueError):
    """An argument broke a documented rule. The message names the argument and the rule."""

    def __init__(self, op: str, argument: str, rule: str):
        super().__init__(f"argument '{argument}' {rule}", code="E_INVALID", op=op)
        self.argument = argument


class DisposedError(WeftError):
    """A resource was used after close()."""

    def __init__(self, op: str, what: str):
        super().__init__(f"{what} was used after close()", code="E_DISPOSED", op=op)


class LibraryError(WeftError, ImportError):
    """libweft.so is missing, would not load, or has the wrong ABI version."""


class CudaError(WeftError):
    """The CUDA runtime or driver failed."""


class DeviceError(WeftError):
    """No GPU, no driver, or a device index out of range."""


class OutOfMemoryError(WeftError):
    """A device, pinned-host or symmetric-heap allocation failed."""


class TimeoutError(WeftError, builtins.TimeoutError):  # noqa: A001 - mirrors lib/errors.ts
    """A bounded wait ran out: a GPU spin, the rendezvous store, the proxy."""


class PeerError(WeftError):
    """A peer rank is gone, reported failure, or made a different call."""


class UnsupportedError(WeftError):
    """A valid request that this build or machine cannot serve."""


class TransportError(WeftError):
    """The inter-node transport failed."""


_BY_STATUS = {
    STATUS["E_INVALID"]: ("E_INVALID", WeftError),
    STATUS["E_CUDA"]: ("E_CUDA", CudaError),
    STATUS["E_NO_DEVICE"]: ("E_NO_DEVICE", DeviceError),
    STATUS["E_OOM"]: ("E_OOM", OutOfMemoryError),
    STATUS["E_TIMEOUT"]: ("E_TIMEOUT", TimeoutError),
    STATUS["E_PEER"]: ("E_PEER", PeerError),
    STATUS["E_UNSUPPORTED"]: ("E_UNSUPPORTED", UnsupportedError),
    STATUS["E_TRANSPORT"]: ("E_TRANSPORT", TransportError),
    STATUS["E_INTERNAL"]: ("E_INTERNAL", WeftError),
}


def error_from_status(status: int, op: str, native_message: str) -> WeftError:
    """The WeftError subclass matching a native status, carrying weft_last_error()'s text."""
    code, cls = _BY_STATUS.get(status, ("E_INTERNAL", WeftError))
    text = native_message or f"failed with status {status} and no message"
    return cls(text, code=code, op=op, native_message=native_message)


def check_int(op: str, name: str, value: object, lo: int, hi: int = 2**63 - 1) -> int:
    """value as an int in [lo, hi], or an ArgumentError naming the argument and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ArgumentError(op, name, f"must be an integer in [{lo}, {hi}] (got {value!r})")
    return value
