"""DLPack capsules over the native hand-over (weft_dlpack_export / _import / _delete in
ffi/src/dlpack.cpp): native code makes and reads the managed tensors; this module only wraps their
addresses in PyCapsules and follows the Python protocol's naming rules.

  "dltensor_versioned" / "dltensor"        an unconsumed capsule (DLManagedTensorVersioned / legacy)
  "used_dltensor_versioned" / "used_..."   a consumer took it and now owes the deleter call

A capsule that dies unconsumed calls the deleter itself (its destructor). What keeps an exported
tensor's memory alive is held in _KEEP until the native deleter's release callback drops it; that
callback may come from any thread that drops the consumer's tensor (ctypes takes the GIL)."""
from __future__ import annotations

import atexit
import ctypes
import itertools
import threading
from ctypes import c_char_p, c_int, c_void_p
from typing import Callable, Dict, Optional, Tuple

from . import _abi
from ._native import DLPACK_RELEASE, check, native
from .errors import ArgumentError

VERSIONED = 1  # WEFT_DLPACK_VERSIONED
FREE_DATA = 2  # WEFT_DLPACK_FREE_DATA

# Capsule names must outlive every capsule that carries them: module constants.
_VERSIONED_NAME = b"dltensor_versioned"
_LEGACY_NAME = b"dltensor"
_USED_VERSIONED_NAME = b"used_dltensor_versioned"
_USED_LEGACY_NAME = b"used_dltensor"

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_PyCapsule_SetName = ctypes.pythonapi.PyCapsule_SetName
_PyCapsule_SetName.restype = c_int
_PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
_PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
_PyCapsule_GetName.restype = c_char_p
_PyCapsule_GetName.argtypes = [ctypes.py_object]

# The destructor receives the dying capsule: it must not be turned into a Python reference again,
# so these two see it as a plain address.
_PYFUNC = ctypes.PYFUNCTYPE
_is_valid_raw = _PYFUNC(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer_raw = _PYFUNC(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))

_KEEP: Dict[int, Tuple[object, Optional[Callable[[], None]]]] = {}
_KEEP_LOCK = threading.Lock()
_keys = itertools.count(1)


def _release(ctx: Optional[int]) -> None:
    # Called by the native deleter. Never raises: there is no caller to raise to.
    try:
        with _KEEP_LOCK:
            entry = _KEEP.pop(int(ctx or 0), None)
        if entry is not None and entry[1] is not None:
            entry[1]()
    except BaseException:  # noqa: BLE001 - interpreter teardown, a failing release hook
        pass


def _capsule_destructor(address: Optional[int]) -> None:
    try:
        for name, flags in ((_VERSIONED_NAME, VERSIONED), (_LEGACY_NAME, 0)):
            if _is_valid_raw(address, name):
                native().weft_dlpack_delete(_get_pointer_raw(address, name), flags)
                return
    except BaseException:  # noqa: BLE001
        pass


_RELEASE = DLPACK_RELEASE(_release)
_exported = False  # whether any capsule went out through _RELEASE (then the library is loaded)


def _forget_release() -> None:
    # At exit a consumer may drop its view after the interpreter stops running ctypes callbacks (a
    # JAX array of weft memory: JAX frees its buffers last), and calling _RELEASE then crashes the
    # process. From here on the deleters skip it; what _KEEP holds goes with the process.
    if not _exported:
        return
    try:
        native().weft_dlpack_forget_release(_RELEASE)
    except BaseException:  # noqa: BLE001 - the exit goes on either way
        pass


atexit.register(_forget_release)
_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)(_capsule_destructor)
_DESTRUCTOR_ADDRESS = ctypes.cast(_DESTRUCTOR, c_void_p).value


def export(desc: _abi.DlpackDesc, versioned: bool, owner: object, on_release: Optional[Callable[[], None]] = None,
           op: str = "__dlpack__") -> object:
    """A new capsule for `desc`. `owner` stays referenced, and `on_release` runs once, when the
    consumer calls the deleter (or the capsule dies unconsumed)."""
    global _exported
    _exported = True
    key = next(_keys)
    with _KEEP_LOCK:
        _KEEP[key] = (owner, on_release)
    out = c_void_p(0)
    try:
        check(native().weft_dlpack_export(ctypes.addressof(desc), VERSIONED if versioned else 0, _RELEASE, key,
                                          ctypes.byref(out)), op)
    except BaseException:
        with _KEEP_LOCK:
            _KEEP.pop(key, None)
        raise
    return _PyCapsule_New(out.value, _VERSIONED_NAME if versioned else _LEGACY_NAME, _DESTRUCTOR_ADDRESS)


def take(capsule: object, op: str) -> Tuple[int, bool]:
    """Consumes a capsule: (managed tensor address, versioned). The caller owes weft_dlpack_delete."""
    if type(capsule).__name__ != "PyCapsule":
        raise ArgumentError(op, "capsule", f"must be a DLPack PyCapsule (got {type(capsule).__name__})")
    for name, used, versioned in ((_VERSIONED_NAME, _USED_VERSIONED_NAME, True), (_LEGACY_NAME, _USED_LEGACY_NAME, False)):
        if _PyCapsule_IsValid(capsule, name):
            managed = _PyCapsule_GetPointer(capsule, name)
            if _PyCapsule_SetName(capsule, used) != 0:
                raise ArgumentError(op, "capsule", "could not be marked as consumed")
            return int(managed), versioned
    got = _PyCapsule_GetName(capsule)
    rule = "was already consumed" if got and got.startswith(b"used_") else f"is named {got!r}, not a DLPack tensor"
    raise ArgumentError(op, "capsule", rule)


def read(managed: int, versioned: bool, op: str) -> _abi.DlpackDesc:
    desc = _abi.new(_abi.DlpackDesc)
    check(native().weft_dlpack_import(managed, VERSIONED if versioned else 0, ctypes.addressof(desc)), op)
    return desc


def delete(managed: int, versioned: bool, op: str = "dlpack delete") -> None:
    check(native().weft_dlpack_delete(managed, VERSIONED if versioned else 0), op)


def live() -> int:
    """Managed tensors exported by weft whose deleter has not run (leak checks)."""
    n = ctypes.c_int64(0)
    check(native().weft_dlpack_live(ctypes.byref(n)), "dlpack live")
    return n.value
