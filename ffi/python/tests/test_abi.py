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


# ABI structs of ops the Python binding does not drive yet: each is named here on purpose, so a new
# C struct is either bound in weft/_abi.py or listed with its reason, never silently missing.
NOT_BOUND = {
    # MoE expert parallelism: the torch custom ops come with the grouped GEMM (weft.torch._ops).
    "WeftMoeRouteParams", "WeftMoeDispatchParams", "WeftMoeDispatchChoice",
    "WeftMoeCombineParams", "WeftMoeCombineChoice",
    # Decoder layers (examples/serve drives them from TS; no torch op wraps them).
    "WeftEmbeddingParams", "WeftRmsNormParams", "WeftRopeParams", "WeftSwigluParams",
    "WeftKvAppendParams", "WeftCacheAttentionParams", "WeftSampleParams",
    # Attention and ring attention: the torch custom op comes with the two-GPU ring measurement.
    "WeftAttentionParams", "WeftAttentionChoice", "WeftRingAttentionParams", "WeftRingAttentionChoice",
    # The grouped GEMM and the MoE expert GEMMs (issue 26 phase 2): bound with the torch custom ops.
    "WeftGroupedGemmParams", "WeftGroupedGemmChoice", "WeftMoeExpertGemmParams", "WeftMoeExpertGemmChoice",
}


def test_c_publishes_a_layout_for_every_python_struct_and_no_others():
    bound = sorted(s.c_name for s in _abi.ABI_STRUCTS)
    assert sorted(set(c_layout()) - NOT_BOUND) == bound
    assert not NOT_BOUND & set(bound), "a struct listed as not bound is bound: drop it from NOT_BOUND"


@pytest.mark.parametrize("struct", _abi.ABI_STRUCTS, ids=lambda s: s.c_name)
def test_sizeof_and_every_offset_match_c(struct):
    assert _abi.layout(struct) == c_layout()[struct.c_name]


def test_new_fills_size_and_version():
    s = _abi.new(_abi.TpLaunch, seq=7)
    assert (s.size, s.version, s.seq) == (ctypes.sizeof(_abi.TpLaunch), 1, 7)
