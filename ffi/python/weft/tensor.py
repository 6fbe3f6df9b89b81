"""weft.Tensor: a strided view of device (or host) memory that weft allocated, wraps, or took from
another runtime through DLPack, and hands to any DLPack consumer (torch, JAX, CuPy, NumPy).

  t = weft.Tensor.empty((4, 8), "f32", device=0)     # weft_malloc'd; freed by close() or GC
  x = torch.from_dlpack(t)                          # zero copy; t's memory lives until x is gone
  u = weft.from_dlpack(x, stream=s)                 # zero copy; x's pending work ordered before s

Streams: ``stream`` is the CUDA stream (an int handle, 0 = legacy default) whose queued work a
consumer must wait for, or None when nothing is pending. ``__dlpack__(stream=c)`` makes stream c wait
for it on the GPU (weft_stream_order) before handing the tensor over; the host never waits.
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

from . import _abi, _dlpack
from ._native import check, native
from .dtype import BY_CODE, DTYPES, describe_dl_dtype, dtype as check_dtype
from .errors import ArgumentError, DisposedError, UnsupportedError, check_int

CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13  # DLDeviceType
_HOST_TYPES = (CPU, CUDA_HOST)
_COPY_DEFAULT = 0
_DEVICE_NAMES = {CPU: "cpu", CUDA: "cuda", CUDA_HOST: "cuda_host", CUDA_MANAGED: "cuda_managed"}


class Device(NamedTuple):
    type: int  # DLDeviceType
    index: int

    def __str__(self) -> str:
        return f"{_DEVICE_NAMES.get(self.type, self.type)}:{self.index}"


def check_shape(shape: object, op: str, argument: str = "shape") -> Tuple[int, ...]:
    if not isinstance(shape, (tuple, list)) or len(shape) > _abi.DLPACK_MAX_NDIM:
        raise ArgumentError(op, argument, f"must be a tuple of at most {_abi.DLPACK_MAX_NDIM} sizes (got {shape!r})")
    return tuple(check_int(op, f"{argument}[{i}]", d, 0) for i, d in enumerate(shape))


def compact_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def _stream_handle(stream: Optional[int], op: str) -> Optional[int]:
    """A DLPack stream argument for CUDA as a cudaStream_t value (None: nothing to order with)."""
    if stream is None:
        return 0  # the protocol's default: the legacy default stream
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise ArgumentError(op, "stream", f"must be an int CUDA stream handle or None (got {type(stream).__name__})")
    if stream == 0:
        raise ArgumentError(op, "stream", "0 is ambiguous for CUDA: pass 1 for the legacy default stream, 2 for "
                            "the per-thread default stream, or a stream handle")
    if stream == -1:
        return None  # the consumer asked for no synchronization
    return 0 if stream == 1 else stream


class Tensor:
    """A strided tensor over memory at ``ptr``; see the module docstring."""

    def __init__(self, ptr: int, shape: Sequence[int], dtype: str, device: Device, *,
                 strides: Optional[Sequence[int]] = None, release: Optional[Callable[[], None]] = None,
                 stream: Optional[int] = None, read_only: bool = False, owner: object = None):
        self._ptr = int(ptr)
        self.shape = tuple(int(d) for d in shape)
        self.strides = tuple(int(s) for s in strides) if strides is not None else compact_strides(self.shape)
        self.dtype = dtype
        self.device = device
        self.stream = stream
        self.read_only = read_only
        self._owner = owner
        # Runs once: at close() (or after it, when the last DLPack consumer lets go), or when the
        # Tensor is garbage-collected (freeing device memory is safe then: cudaFree waits for the
        # device's work), or at exit.
        self._finalizer = weakref.finalize(self, release) if release is not None else None
        self._exports = 0
        self._lock = threading.Lock()

    # ---- making tensors --------------------------------------------------------------------------

    @classmethod
    def empty(cls, shape: Sequence[int], dtype: str, device: int = 0) -> "Tensor":
        """Uninitialized device memory from weft_malloc."""
        op = "Tensor.empty"
        shape = check_shape(shape, op)
        d = check_dtype(dtype, op)
        check_int(op, "device", device, 0)
        nbytes = max(1, _numel(shape) * d.bytes)
        out = ctypes.c_void_p(0)
        check(native().weft_malloc(device, nbytes, ctypes.byref(out)), op)
        ptr = int(out.value)
        return cls(ptr, shape, d.name, Device(CUDA, device), release=lambda: native().weft_free(ptr))

    @classmethod
    def host(cls, shape: Sequence[int], dtype: str) -> "Tensor":
        """Zero-filled, page-aligned host memory (weft_transport_host_alloc: pinned and mapped into
        the GPUs when there are any, plain host memory when there are none)."""
        op = "Tensor.host"
        shape = check_shape(shape, op)
        d = check_dtype(dtype, op)
        host, dev = ctypes.c_void_p(0), ctypes.c_void_p(0)
        check(native().weft_transport_host_alloc(max(1, _numel(shape) * d.bytes), ctypes.byref(host), ctypes.byref(dev)), op)
        ptr = int(host.value)
        return cls(ptr, shape, d.name, Device(CPU, 0), release=lambda: native().weft_transport_host_free(ptr))

    @classmethod
    def wrap(cls, ptr: int, shape: Sequence[int], dtype: str, device: Device, *, strides: Optional[Sequence[int]] = None,
             owner: object = None, stream: Optional[int] = None) -> "Tensor":
        """Views memory weft does not own; ``owner`` (kept referenced) is whatever keeps it alive."""
        op = "Tensor.wrap"
        check_int(op, "ptr", ptr, 1)
        shape = check_shape(shape, op)
        d = check_dtype(dtype, op)
        if not isinstance(device, Device):
            raise ArgumentError(op, "device", f"must be a weft.Device (got {device!r})")
        if strides is not None:
            strides = check_shape(strides, op, "strides")
            if len(strides) != len(shape):
                raise ArgumentError(op, "strides", f"has {len(strides)} entries but shape has {len(shape)}")
        return cls(ptr, shape, d.name, device, strides=strides, owner=owner, stream=stream)

    # ---- properties ------------------------------------------------------------------------------

    @property
    def ptr(self) -> int:
        self._guard("Tensor.ptr")
        return self._ptr

    @property
    def numel(self) -> int:
        return _numel(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].bytes

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def is_contiguous(self) -> bool:
        return all(s == c for s, c, d in zip(self.strides, compact_strides(self.shape), self.shape) if d > 1)

    @property
    def closed(self) -> bool:
        return self._ptr == 0

    def _guard(self, op: str) -> None:
        if self._ptr == 0:
            raise DisposedError(op, f"Tensor {self.shape} {self.dtype}")

    # ---- host transfers ----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The bytes of a contiguous tensor (device memory is copied synchronously)."""
        op = "Tensor.to_bytes"
        self._guard(op)
        self._require_contiguous(op)
        if self.device.type in _HOST_TYPES:
            return ctypes.string_at(self._ptr, self.nbytes)
        buf = ctypes.create_string_buffer(max(1, self.nbytes))
        check(native().weft_memcpy(ctypes.addressof(buf), self._ptr, self.nbytes, _COPY_DEFAULT, None), op)
        return buf.raw[: self.nbytes]

    def write_bytes(self, data: bytes) -> "Tensor":
        op = "Tensor.write_bytes"
        self._guard(op)
        self._require_contiguous(op)
        if self.read_only:
            raise ArgumentError(op, "self", "is read-only (its DLPack producer said so)")
        if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != self.nbytes:
            raise ArgumentError(op, "data", f"must be {self.nbytes} bytes (got {len(data) if hasattr(data, '__len__') else data!r})")
        src = ctypes.create_string_buffer(bytes(data), max(1, self.nbytes))
        if self.device.type in _HOST_TYPES:
            ctypes.memmove(self._ptr, src, self.nbytes)
        else:
            check(native().weft_memcpy(self._ptr, ctypes.addressof(src), self.nbytes, _COPY_DEFAULT, None), op)
        return self

    def _require_contiguous(self, op: str) -> None:
        if not self.is_contiguous:
            raise ArgumentError(op, "self", f"must be contiguous (strides {self.strides} for shape {self.shape})")

    # ---- DLPack ------------------------------------------------------------------------------------

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (self.device.type, self.device.index)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> object:
        op = "Tensor.__dlpack__"
        self._guard(op)
        if copy:
            raise BufferError(f"{op}: weft exports without copying (copy=True asked for a copy)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"{op}: the tensor is on {self.device}, not on device {tuple(dl_device)}")
        if self.device.type == CUDA:
            consumer = _stream_handle(stream, op)
            if consumer is not None and self.stream is not None and consumer != self.stream:
                check(native().weft_stream_order(self.device.index, self.stream or None, consumer or None), op)
        elif stream is not None:
            raise ArgumentError(op, "stream", f"must be None for a tensor on {self.device} (got {stream!r})")
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        desc = _abi.new(_abi.DlpackDesc, data=self._ptr, device_type=self.device.type, device_id=self.device.index,
                        ndim=len(self.shape), dtype=DTYPES[self.dtype].code, read_only=int(self.read_only))
        for i, (d, s) in enumerate(zip(self.shape, self.strides)):
            desc.shape[i], desc.strides[i] = d, s
        with self._lock:
            self._exports += 1
        try:
            return _dlpack.export(desc, versioned, owner=self, on_release=self._export_released, op=op)
        except BaseException:
            self._export_released()
            raise

    def _export_released(self) -> None:
        with self._lock:
            self._exports -= 1
            last = self._exports == 0 and self._ptr == 0
        if last:
            self._let_go()

    def _let_go(self) -> None:
        self._owner = None
        if self._finalizer is not None:
            self._finalizer()

    # ---- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Frees what this tensor owns (its allocation, or the DLPack producer's tensor). Idempotent.
        Consumers that imported it through DLPack keep the memory alive until they drop it."""
        with self._lock:
            self._ptr = 0
            now = self._exports == 0
        if now:
            self._let_go()

    def __enter__(self) -> "Tensor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = ", closed" if self.closed else ""
        return f"weft.Tensor({list(self.shape)}, {self.dtype}, {self.device}{state})"


def from_dlpack(obj: Any, *, stream: Optional[int] = None) -> Tensor:
    """A weft Tensor over any DLPack producer's memory, zero copy: an object with ``__dlpack__``
    (torch, JAX, CuPy, NumPy, weft) or an unconsumed DLPack capsule. For CUDA memory, ``stream`` is
    the stream weft will use it on (an int handle; None or 0 = the legacy default stream): the
    producer orders its pending work before it."""
    op = "weft.from_dlpack"
    if type(obj).__name__ == "PyCapsule":
        capsule, handle = obj, None
    else:
        if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
            raise ArgumentError(op, "obj", f"must implement __dlpack__ and __dlpack_device__ (got {type(obj).__name__})")
        dev_type, _ = obj.__dlpack_device__()
        handle = None
        if int(dev_type) in (CUDA, CUDA_MANAGED):
            if stream is not None:
                check_int(op, "stream", stream, 0)
            handle = int(stream or 0)
        protocol_stream = None if handle is None else (handle or 1)  # 1: the legacy default stream
        try:
            capsule = obj.__dlpack__(stream=protocol_stream, max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0's max_version argument
            capsule = obj.__dlpack__(stream=protocol_stream)
    managed, versioned = _dlpack.take(capsule, op)
    try:
        desc = _dlpack.read(managed, versioned, op)
        if desc.dtype not in BY_CODE:
            raise UnsupportedError(f"a {describe_dl_dtype(desc.dl_dtype)} tensor: weft takes {', '.join(DTYPES)}",
                                   code="E_UNSUPPORTED", op=op)
    except BaseException:
        _dlpack.delete(managed, versioned, op)
        raise
    shape = tuple(desc.shape[i] for i in range(desc.ndim))
    strides = tuple(desc.strides[i] for i in range(desc.ndim))
    device = Device(desc.device_type, desc.device_id)
    if device.type in (CUDA, CUDA_MANAGED) and handle is None:
        handle = 0
    return Tensor(desc.data, shape, BY_CODE[desc.dtype].name, device, strides=strides, stream=handle,
                  read_only=bool(desc.read_only), release=lambda: _dlpack.delete(managed, versioned))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
