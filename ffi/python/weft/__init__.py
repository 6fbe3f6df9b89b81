"""weft from Python: the same C ABI as the TypeScript layer (libweft.so through ctypes, no compiled
extension), DLPack both ways, and, in ``weft.torch``, communicators, fused tensor-parallel ops and
autograd layers for PyTorch. Importing ``weft`` loads libweft.so and checks its ABI version; it
never imports torch."""
from __future__ import annotations

from ._native import ABI_VERSION, native as _load
from .device import DeviceInfo, device_count, device_info, runtime_versions, stream_order
from .dtype import DTYPES
from .errors import (
    ArgumentError, CudaError, DeviceError, DisposedError, LibraryError, OutOfMemoryError, PeerError, TimeoutError,
    TransportError, UnsupportedError, WeftError,
)
from .tensor import CPU, CUDA, CUDA_HOST, Device, Tensor, from_dlpack

__version__ = "0.1.0"

_load()  # load now: a missing or mismatched library is an ImportError (LibraryError) at import

__all__ = [
    "ABI_VERSION", "ArgumentError", "CPU", "CUDA", "CUDA_HOST", "CudaError", "DTYPES", "Device", "DeviceError",
    "DeviceInfo", "DisposedError", "LibraryError", "OutOfMemoryError", "PeerError", "Tensor", "TimeoutError",
    "TransportError", "UnsupportedError", "WeftError", "device_count", "device_info", "from_dlpack",
    "runtime_versions", "stream_order",
]
