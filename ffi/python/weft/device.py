"""GPUs as the native library sees them, and the stream hand-over every binding shares."""
from __future__ import annotations

import ctypes
from typing import NamedTuple, Optional

from . import _abi
from ._native import check, native
from .errors import ArgumentError, check_int


class DeviceInfo(NamedTuple):
    index: int
    name: str
    pci_bus_id: str
    total_memory: int
    free_memory: int
    sm_count: int
    compute_capability: tuple


def device_count() -> int:
    """GPUs this process can use; 0 (not an error) without a GPU or a driver."""
    n = ctypes.c_int32(0)
    check(native().weft_device_count(ctypes.byref(n)), "device_count")
    return n.value


def require_device(device: object, op: str, argument: str = "device") -> int:
    check_int(op, argument, device, 0)
    n = device_count()
    if device >= n:  # type: ignore[operator]
        raise ArgumentError(op, argument, f"must be < {n}, the number of GPUs on this machine (got {device})")
    return int(device)  # type: ignore[arg-type]


def device_info(device: int) -> DeviceInfo:
    require_device(device, "device_info")
    p = _abi.new(_abi.DeviceProps)
    check(native().weft_device_props(device, ctypes.addressof(p)), "device_info")
    return DeviceInfo(device, p.name.decode(), p.pci_bus_id.decode(), p.total_memory, p.free_memory, p.sm_count,
                      (p.cc_major, p.cc_minor))


def stream_order(device: int, producer: Optional[int], consumer: Optional[int]) -> None:
    """Makes `consumer`'s later work wait for `producer`'s queued work, on the GPU (no host wait).
    Streams are int handles of `device`; None or 0 is its legacy default stream."""
    check(native().weft_stream_order(device, producer or None, consumer or None), "stream_order")


def runtime_versions() -> dict:
    """{"weft": "0.1.0", "cuda_runtime": 13000, "driver": 0 without a driver, "abi": 4, "library": path}."""
    s, rt, drv = ctypes.c_char_p(), ctypes.c_int32(0), ctypes.c_int32(0)
    check(native().weft_version(ctypes.byref(s), ctypes.byref(rt), ctypes.byref(drv)), "runtime_versions")
    v = ctypes.c_int32(0)
    check(native().weft_abi_version(ctypes.byref(v)), "runtime_versions")
    return {"weft": (s.value or b"").decode(), "cuda_runtime": rt.value, "driver": drv.value, "abi": v.value,
            "library": native().path}
