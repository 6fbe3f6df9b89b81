"""The only module that loads libweft.so: finds it (WEFT_LIBRARY, then the repository's build/
output, then the checkout a wheel was built from), declares every symbol the binding calls in one
table, refuses a library of another ABI version, and turns status codes into WeftErrors.

WEFT_TRACE_FFI=1 wraps every symbol: each call is logged to stderr and p50/p99 per symbol are
printed at exit. When unset, the raw ctypes functions are used and tracing costs nothing.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import time
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_float, c_int32, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .errors import LibraryError, error_from_status

#: weft.h WEFT_ABI_VERSION this package was written against.
ABI_VERSION = 6

#: WeftDlpackRelease: void (*)(void* ctx).
DLPACK_RELEASE = CFUNCTYPE(None, c_void_p)

_i32p = POINTER(c_int32)
_vpp = POINTER(c_void_p)

# name: argument types. Every function returns int status except weft_last_error. Struct arguments
# are passed as their address (ctypes.addressof), so they are c_void_p here.
SYMBOLS: Dict[str, List[object]] = {
    # library
    "weft_abi_version": [_i32p],
    "weft_last_error": [],
    "weft_version": [POINTER(c_char_p), _i32p, _i32p],
    "weft_abi_layout": [POINTER(c_char_p)],
    # devices and topology
    "weft_device_count": [_i32p],
    "weft_device_props": [c_int32, c_void_p],  # WeftDeviceProps*
    "weft_peer_enable": [c_int32, c_int32],
    "weft_device_synchronize": [c_int32],
    # memory
    "weft_malloc": [c_int32, c_uint64, _vpp],
    "weft_free": [c_void_p],
    "weft_host_alloc": [c_uint64, _vpp, _vpp],
    "weft_host_free": [c_void_p],
    "weft_memset": [c_void_p, c_int32, c_uint64, c_void_p],
    "weft_memcpy": [c_void_p, c_void_p, c_uint64, c_int32, c_void_p],  # dst, src, bytes, WeftCopyKind, stream
    "weft_transport_host_alloc": [c_uint64, _vpp, _vpp],
    "weft_transport_host_free": [c_void_p],
    # streams and events
    "weft_stream_create": [c_int32, _vpp],
    "weft_stream_destroy": [c_void_p],
    "weft_stream_synchronize": [c_void_p],
    "weft_stream_order": [c_int32, c_void_p, c_void_p],  # device, producer, consumer
    # test support
    "weft_fill_random": [c_void_p, c_int32, c_uint64, c_uint64, c_float, c_float, c_void_p],
    # communicator, symmetric heap, collectives (issue 3)
    "weft_comm_create": [c_void_p, _vpp],  # const WeftCommConfig*, WeftComm**
    "weft_comm_info": [c_void_p, c_void_p],  # comm, WeftCommInfo*
    "weft_comm_export": [c_void_p, c_void_p],  # comm, WeftPeerHandle*
    "weft_comm_import": [c_void_p, c_void_p],  # comm, const WeftPeerHandle*
    "weft_comm_connect": [c_void_p],
    "weft_comm_close_peers": [c_void_p],
    "weft_comm_destroy": [c_void_p],
    "weft_collective": [c_void_p, c_void_p],  # comm, const WeftCollectiveParams*
    # fused tensor-parallel ops (issue 5)
    "weft_tp_choose": [c_void_p, c_void_p, c_void_p],  # comm, const WeftTpParams*, WeftTpChoice*
    "weft_tp_plan_create": [c_void_p, c_void_p, _vpp],  # comm, const WeftTpParams*, WeftTpPlan**
    "weft_tp_plan_launch": [c_void_p, c_void_p],  # plan, const WeftOpLaunch*
    "weft_tp_plan_destroy": [c_void_p],
    # DLPack hand-over (issue 27)
    "weft_dlpack_export": [c_void_p, c_uint32, DLPACK_RELEASE, c_void_p, _vpp],  # desc, flags, release, ctx, out
    "weft_dlpack_import": [c_void_p, c_uint32, c_void_p],  # managed, flags, WeftDlpackDesc*
    "weft_dlpack_delete": [c_void_p, c_uint32],
    "weft_dlpack_live": [POINTER(c_int64)],
    "weft_dlpack_forget_release": [DLPACK_RELEASE],
}

_BUILD_HINT = ("Build it with `npm run build` (or `cmake -S ffi -B build -G Ninja && cmake --build build`) "
               "in the weft repository, or point WEFT_LIBRARY at an existing libweft.so.")


def library_candidates() -> List[Path]:
    """The build outputs searched after WEFT_LIBRARY, in order: the repository this package sits in
    (ffi/python/weft -> the repo root), then the checkout an installed wheel was built from."""
    roots = [Path(__file__).resolve().parents[3]]
    try:
        from . import _where  # written into wheels by the in-tree build backend

        roots.append(Path(_where.REPO_ROOT))
    except ImportError:
        pass
    out: List[Path] = []
    for root in roots:
        for p in (root / "build" / "libweft.so", root / "build" / "Release" / "libweft.so"):
            if p not in out:
                out.append(p)
    return out


class Native:
    """The loaded library: one attribute per symbol of SYMBOLS, plus where it came from."""

    def __init__(self, path: str, lib: ctypes.CDLL, functions: Dict[str, Callable[..., int]]):
        self.path = path
        self.lib = lib
        for name, fn in functions.items():
            setattr(self, name, fn)


def _open() -> Native:
    forced = os.environ.get("WEFT_LIBRARY")
    if forced:
        if not os.path.exists(forced):
            raise LibraryError(f"WEFT_LIBRARY is set to '{forced}', which does not exist. Unset WEFT_LIBRARY to use "
                               "the build output, or point it at a libweft.so.", code="E_LIBRARY_MISSING", op="load")
        path = forced
    else:
        found = [p for p in library_candidates() if p.exists()]
        if not found:
            looked = ", ".join(str(p) for p in library_candidates())
            raise LibraryError(f"libweft.so was not found (looked in {looked}). {_BUILD_HINT}",
                               code="E_LIBRARY_MISSING", op="load")
        path = str(found[0])
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryError(f"'{path}' could not be loaded as libweft.so ({e}). It may be damaged, built for another "
                           f"machine, or not a shared library. {_BUILD_HINT}", code="E_LIBRARY_LOAD", op="load") from e
    functions: Dict[str, Callable[..., int]] = {}
    missing = []
    for name, argtypes in SYMBOLS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.argtypes = argtypes
        fn.restype = c_char_p if name == "weft_last_error" else c_int32
        functions[name] = fn
    version = c_int32(0)
    if "weft_abi_version" in functions:
        functions["weft_abi_version"](ctypes.byref(version))
    if missing or version.value != ABI_VERSION:
        why = f"has ABI version {version.value}" if version.value != ABI_VERSION else f"lacks {', '.join(missing)}"
        raise LibraryError(f"'{path}' {why} but this package needs ABI version {ABI_VERSION}: the library and the "
                           "Python package are from different versions. Rebuild with `npm run build`.",
                           code="E_ABI_MISMATCH", op="load")
    if os.environ.get("WEFT_TRACE_FFI") == "1":
        functions = _traced(functions)
    return Native(path, lib, functions)


_loaded: Optional[Native] = None


def native() -> Native:
    """The loaded library; loads it on first use and raises LibraryError if it cannot."""
    global _loaded
    if _loaded is None:
        _loaded = _open()
    return _loaded


def last_error() -> str:
    raw = native().weft_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def check(status: int, op: str) -> None:
    """Raises the WeftError matching a non-zero status, with weft_last_error()'s message."""
    if status != 0:
        raise error_from_status(status, op, last_error())


# ---- WEFT_TRACE_FFI --------------------------------------------------------------------------------


def _traced(functions: Dict[str, Callable[..., int]]) -> Dict[str, Callable[..., int]]:
    samples: Dict[str, List[float]] = {name: [] for name in functions}

    def wrap(name: str, fn: Callable[..., int]) -> Callable[..., int]:
        def call(*args: object) -> int:
            t0 = time.perf_counter()
            r = fn(*args)
            dt = time.perf_counter() - t0
            samples[name].append(dt)
            sys.stderr.write(f"[weft ffi] {name}({', '.join(map(_fmt, args))}) -> {_fmt(r)} {dt * 1e6:.1f}us\n")
            return r

        return call

    def report() -> None:
        rows = []
        for name, s in samples.items():
            if not s:
                continue
            s.sort()
            q = lambda p: s[min(len(s) - 1, int(p * len(s)))] * 1e6  # noqa: E731
            rows.append(f"  {name:<28} calls {len(s):>7}  p50 {q(0.5):>8.1f}us  p99 {q(0.99):>8.1f}us")
        sys.stderr.write("[weft ffi] per-symbol latency\n" + "\n".join(rows) + "\n")

    atexit.register(report)
    return {name: wrap(name, fn) for name, fn in functions.items()}


def _fmt(a: object) -> str:
    if isinstance(a, int) and a > 0xFFFFFFFF:
        return hex(a)
    return type(a).__name__ if hasattr(a, "_type_") or hasattr(a, "_obj") else repr(a)
