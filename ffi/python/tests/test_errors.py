"""Native status codes become the matching WeftError subclass with the native file:line message,
mirroring lib/errors.ts; the classes also derive from the Python builtins that mean the same."""
import builtins
import ctypes
import re

import pytest

import weft
from weft import errors
from weft._native import check, native


def test_a_failing_call_becomes_the_matching_error_with_the_native_message():
    out = ctypes.c_void_p(0)
    with pytest.raises(weft.DeviceError) as info:
        check(native().weft_malloc(1 << 20, 16, ctypes.byref(out)), "weft_malloc")
    e = info.value
    assert isinstance(e, weft.WeftError)
    assert (e.code, e.op) == ("E_NO_DEVICE", "weft_malloc")
    assert re.search(r"\.cpp:\d+: device 1048576 is out of range", e.native_message)
    assert str(e).startswith("weft_malloc: ")


def test_null_out_pointers_are_rejected_not_dereferenced():
    with pytest.raises(weft.WeftError, match="out_count must not be NULL") as info:
        check(native().weft_device_count(None), "weft_device_count")
    assert info.value.code == "E_INVALID"


@pytest.mark.parametrize("status, code, cls", [
    (-1, "E_INVALID", weft.WeftError), (-2, "E_CUDA", weft.CudaError), (-3, "E_NO_DEVICE", weft.DeviceError),
    (-4, "E_OOM", weft.OutOfMemoryError), (-5, "E_TIMEOUT", weft.TimeoutError), (-6, "E_PEER", weft.PeerError),
    (-7, "E_UNSUPPORTED", weft.UnsupportedError), (-8, "E_TRANSPORT", weft.TransportError),
    (-9, "E_INTERNAL", weft.WeftError), (-42, "E_INTERNAL", weft.WeftError),
])
def test_every_status_maps_to_its_class(status, code, cls):
    e = errors.error_from_status(status, "op", "x.cpp:1: why")
    assert type(e) is cls and e.code == code and e.native_message == "x.cpp:1: why"
    assert str(errors.error_from_status(status, "op", "")) == f"op: failed with status {status} and no message"


def test_status_codes_match_weft_h():
    assert errors.STATUS == {"OK": 0, "E_INVALID": -1, "E_CUDA": -2, "E_NO_DEVICE": -3, "E_OOM": -4, "E_TIMEOUT": -5,
                             "E_PEER": -6, "E_UNSUPPORTED": -7, "E_TRANSPORT": -8, "E_INTERNAL": -9}


def test_classes_keep_generic_handlers_working():
    assert issubclass(weft.ArgumentError, ValueError)
    assert issubclass(weft.TimeoutError, builtins.TimeoutError)
    assert issubclass(weft.LibraryError, ImportError)
    e = weft.ArgumentError("Tensor.empty", "shape", "must be positive")
    assert (e.argument, e.code, str(e)) == ("shape", "E_INVALID", "Tensor.empty: argument 'shape' must be positive")
    assert weft.DisposedError("Tensor.ptr", "Tensor").code == "E_DISPOSED"
