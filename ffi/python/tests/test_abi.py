"""Every ABI struct's ctypes packing (weft/_abi.py) against the C compiler's layout, as
test/abi.test.ts checks lib/abi.ts: an ABI change is one edit in _abi.py and a failing test here."""
import ctypes
import json

import pytest

from weft import _abi
from weft._native import check, native


def c_layout() -> dict:
    out = ctypes.c_char_p()
    check(native().weft_abi_layout(ctypes.byref(out)), "weft_abi_layout")
    return json.loads(out.value)


def test_c_publishes_a_layout_for_every_python_struct_and_no_others():
    assert sorted(c_layout()) == sorted(s.c_name for s in _abi.ABI_STRUCTS)


@pytest.mark.parametrize("struct", _abi.ABI_STRUCTS, ids=lambda s: s.c_name)
def test_sizeof_and_every_offset_match_c(struct):
    assert _abi.layout(struct) == c_layout()[struct.c_name]


def test_new_fills_size_and_version():
    s = _abi.new(_abi.TpLaunch, seq=7)
    assert (s.size, s.version, s.seq) == (ctypes.sizeof(_abi.TpLaunch), 1, 7)
