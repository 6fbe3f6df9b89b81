"""weft from Python: the same C ABI as the TypeScript layer (libweft.so through ctypes, no compiled
extension), DLPack both ways, and, in ``weft.torch``, communicators, fused tensor-parallel ops and
autograd layers for PyTorch. Importing ``weft`` loads libweft.so and checks its ABI version; it
never imports torch."""
from __future__ import annotations

import os as _os
import sys as _sys
import warnings as _warnings

# Loading libweft.so asks the driver for 32 hardware work queues per device (ffi/src/work_queues.cpp:
# the copy-engine movers' side streams need them), which only counts before the process's first CUDA
# context. Checked before loading, as loading sets the variable.
_late = ("CUDA_DEVICE_MAX_CONNECTIONS" not in _os.environ and "torch" in _sys.modules
         and getattr(getattr(_sys.modules["torch"], "cuda", None), "is_initialized", lambda: False)())

from ._native import ABI_VERSION, native as _load  # noqa: E402
from .device import DeviceInfo, device_count, device_info, runtime_versions, stream_order
from .dtype import DTYPES
from .errors import (
    ArgumentError, CudaError, DeviceError, DisposedError, LibraryError, OutOfMemoryError, PeerError, TimeoutError,
    TransportError, UnsupportedError, WeftError,
)
from .tensor import CPU, CUDA, CUDA_HOST, Device, Tensor, from_dlpack

__version__ = "0.1.0"

_load()  # load now: a missing or mismatched library is an ImportError (LibraryError) at import
if _late:
    _warnings.warn("weft was imported after torch initialized CUDA, so CUDA_DEVICE_MAX_CONNECTIONS=32 (the "
                   "hardware queues weft's copy-engine side streams need) came too late: import weft before the first "
                   "CUDA call, or set CUDA_DEVICE_MAX_CONNECTIONS=32 in the environment", stacklevel=2)

__all__ = [
    "ABI_VERSION", "ArgumentError", "CPU", "CUDA", "CUDA_HOST", "CudaError", "DTYPES", "Device", "DeviceError",
    "DeviceInfo", "DisposedError", "LibraryError", "OutOfMemoryError", "PeerError", "Tensor", "TimeoutError",
    "TransportError", "UnsupportedError", "WeftError", "device_count", "device_info", "from_dlpack",
    "runtime_versions", "stream_order",
]
