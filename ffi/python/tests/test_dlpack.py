"""DLPack on host memory (no GPU needed): capsules made and read by native code, both capsule
kinds, lifetimes (every managed tensor's deleter runs exactly once), and round trips with NumPy.
Host memory comes from weft_transport_host_alloc, which gives page-aligned host memory on a
machine without a driver (weft_host_alloc's pinned memory needs one)."""
import ctypes
import gc
import struct

import pytest

import weft
from weft import _dlpack


@pytest.fixture(autouse=True)
def no_leaks():
    gc.collect()
    before = _dlpack.live()
    yield
    gc.collect()
    assert _dlpack.live() == before, "a managed tensor's deleter did not run"


def host_f32(values, shape):
    t = weft.Tensor.host(shape, "f32")
    t.write_bytes(struct.pack(f"{len(values)}f", *values))
    return t


@pytest.mark.parametrize("max_version", [(1, 0), (1, 1), None], ids=["versioned", "versioned-1.1", "legacy"])
def test_a_weft_tensor_round_trips_through_a_capsule_zero_copy(max_version):
    t = host_f32([1.5, -2, 3, 4, 5, 6], (2, 3))
    cap = t.__dlpack__(max_version=max_version)
    name = b"dltensor_versioned" if max_version else b"dltensor"
    assert ctypes.pythonapi.PyCapsule_IsValid(ctypes.py_object(cap), name) == 1
    u = weft.from_dlpack(cap)
    assert (u.ptr, u.shape, u.strides, u.dtype, u.device) == (t.ptr, (2, 3), (3, 1), "f32", weft.Device(weft.CPU, 0))
    assert struct.unpack("6f", u.to_bytes()) == (1.5, -2, 3, 4, 5, 6)
    with pytest.raises(weft.ArgumentError, match="already consumed"):
        weft.from_dlpack(cap)
    t.close()  # the memory stays: u still holds the exported tensor
    assert struct.unpack("6f", u.to_bytes())[0] == 1.5
    u.close()


def test_an_unconsumed_capsule_frees_its_tensor_when_it_dies():
    t = host_f32([1, 2], (2,))
    before = _dlpack.live()
    cap = t.__dlpack__(max_version=(1, 0))
    assert _dlpack.live() == before + 1
    del cap
    gc.collect()
    assert _dlpack.live() == before


def test_from_dlpack_calls_the_producers_protocol():
    t = host_f32([7, 8, 9, 10], (4,))

    class Producer:
        calls = []

        def __dlpack_device__(self):
            return t.__dlpack_device__()

        def __dlpack__(self, **kw):
            Producer.calls.append(kw)
            return t.__dlpack__(**kw)

    u = weft.from_dlpack(Producer())
    assert Producer.calls == [{"stream": None, "max_version": (1, 0)}]  # host memory: no stream
    assert u.ptr == t.ptr
    u.close()


def test_strides_and_read_only_survive():
    t = host_f32(list(range(12)), (3, 4))
    view = weft.Tensor.wrap(t.ptr, (4, 3), "f32", t.device, strides=(1, 4), owner=t)
    u = weft.from_dlpack(view.__dlpack__(max_version=(1, 0)))
    assert (u.shape, u.strides, u.is_contiguous) == ((4, 3), (1, 4), False)
    with pytest.raises(weft.ArgumentError, match="must be contiguous"):
        u.to_bytes()
    u.close()


def test_protocol_arguments_are_checked():
    t = host_f32([1], (1,))
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not on device"):
        t.__dlpack__(dl_device=(weft.CUDA, 0))
    with pytest.raises(weft.ArgumentError, match="'stream' must be None for a tensor on cpu:0"):
        t.__dlpack__(stream=5)
    with pytest.raises(weft.ArgumentError, match="must implement __dlpack__"):
        weft.from_dlpack(object())
    with pytest.raises(weft.ArgumentError, match="must be a DLPack PyCapsule"):
        weft._dlpack.take(3, "test")
    t.close()
    with pytest.raises(weft.DisposedError):
        t.__dlpack__()


def test_a_newer_major_version_is_refused_and_still_freed():
    t = host_f32([1, 2], (2,))
    cap = t.__dlpack__(max_version=(1, 0))
    managed, versioned = _dlpack.take(cap, "test")
    version = (ctypes.c_uint32 * 2).from_address(managed)  # DLManagedTensorVersioned starts with its version
    version[0] = 2
    with pytest.raises(weft.UnsupportedError, match="DLPack version 2.0: weft reads version 1.x"):
        _dlpack.read(managed, versioned, "test")
    version[0] = 1
    _dlpack.delete(managed, versioned)


def test_numpy_round_trips_both_ways():
    np = pytest.importorskip("numpy", reason="NumPy is not installed for this Python: the NumPy round trip is skipped")
    if not hasattr(np, "from_dlpack"):
        pytest.skip(f"NumPy {np.__version__} has no from_dlpack")
    t = host_f32([1, 2, 3, 4, 5, 6], (2, 3))
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.ptr and a.shape == (2, 3) and a.dtype == np.float32
    a[1, 2] = 60
    assert struct.unpack("6f", t.to_bytes())[5] == 60
    src = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    u = weft.from_dlpack(src)
    assert (u.ptr, u.shape, u.strides, u.dtype) == (src.ctypes.data, (3, 2), (4, 2), "i32")
    with pytest.raises(weft.UnsupportedError, match="float64 tensor: weft takes bf16, f16, f32, i32, u8"):
        weft.from_dlpack(np.zeros(3))
    del a
    u.close()
