"""Every ABI struct's ctypes packing (weft/_abi.py) against the C compiler's layout, every struct's
_INIT, and every enum and constant of weft.h against weft/_abi.ENUMS and the tables the package reads,
as test/abi.test.ts checks lib/: an ABI change is one edit in _abi.py and a failing test here."""
import ctypes
import json

import pytest

from weft import _abi, _dlpack, _tp, dtype, errors
from weft._native import ABI_VERSION, check, native


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
    # Attention and ring attention: the torch custom op comes with the two-GPU ring measurement.
    "WeftAttentionParams", "WeftAttentionChoice", "WeftRingAttentionParams", "WeftRingAttentionChoice",
    # The grouped GEMM and the MoE expert GEMMs: bound with the torch custom ops.
    "WeftGroupedGemmParams", "WeftGroupedGemmChoice", "WeftMoeExpertGemmParams", "WeftMoeExpertGemmChoice",
}


def test_c_publishes_a_layout_for_every_python_struct_and_no_others():
    bound = sorted(s.c_name for s in _abi.ABI_STRUCTS)
    assert sorted(set(c_layout()["structs"]) - NOT_BOUND) == bound
    assert not NOT_BOUND & set(bound), "a struct listed as not bound is bound: drop it from NOT_BOUND"


@pytest.mark.parametrize("struct", _abi.ABI_STRUCTS, ids=lambda s: s.c_name)
def test_sizeof_every_offset_and_the_init_match_c(struct):
    c = c_layout()["structs"][struct.c_name]
    assert _abi.layout(struct) == {"sizeof": c["sizeof"], "fields": c["fields"]}
    assert c["init"] == {"size": c["sizeof"], "version": _abi.new(struct).version}


def test_every_enum_and_constant_matches_c():
    assert c_layout()["enums"] == _abi.ENUMS


def test_the_packages_own_tables_agree_with_weft_h():
    enums = c_layout()["enums"]
    assert {f"WEFT_{k}": v for k, v in errors.STATUS.items()} == enums["WeftStatus"]
    assert {f"WEFT_{d.name.upper()}": d.code for d in dtype.DTYPES.values()} == enums["WeftDtype"]
    assert (_tp.ALL_GATHER_GEMM, _tp.GEMM_REDUCE_SCATTER, _tp.GEMM_ALL_REDUCE) == tuple(enums["WeftTpOp"].values())
    assert (_dlpack.VERSIONED, _dlpack.FREE_DATA) == tuple(enums["WeftDlpackFlags"].values())
    assert enums["WeftAbi"]["WEFT_ABI_VERSION"] == ABI_VERSION


def test_new_fills_size_and_version():
    s = _abi.new(_abi.OpLaunch, seq=7)
    assert (s.size, s.version, s.seq) == (ctypes.sizeof(_abi.OpLaunch), 1, 7)
    assert _abi.new(_abi.GemmParams).version == 2
    assert _abi.new(_abi.SampleParams).version == 2
