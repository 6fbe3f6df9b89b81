"""Element types: weft's names (as in lib/dtype.ts), their WeftDtype codes, sizes, and DLPack's
DLDataType (code | bits << 8 | lanes << 16, as WeftDlpackDesc.dl_dtype packs it)."""
from __future__ import annotations

from typing import NamedTuple

from .errors import ArgumentError


class DType(NamedTuple):
    name: str
    code: int  # WeftDtype in weft.h
    bytes: int
    float: bool
    dl_dtype: int


DTYPES = {
    "bf16": DType("bf16", 0, 2, True, 4 | 16 << 8 | 1 << 16),
    "f16": DType("f16", 1, 2, True, 2 | 16 << 8 | 1 << 16),
    "f32": DType("f32", 2, 4, True, 2 | 32 << 8 | 1 << 16),
    "i32": DType("i32", 3, 4, False, 0 | 32 << 8 | 1 << 16),
    "u8": DType("u8", 4, 1, False, 1 | 8 << 8 | 1 << 16),
}
BY_CODE = {d.code: d for d in DTYPES.values()}
SUM_DTYPES = ("bf16", "f16", "f32")

_DL_CODES = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat", 5: "complex", 6: "bool"}


def dtype(name: object, op: str, argument: str = "dtype") -> DType:
    if not isinstance(name, str) or name not in DTYPES:
        raise ArgumentError(op, argument, f"must be one of {', '.join(DTYPES)} (got {name!r})")
    return DTYPES[name]


def describe_dl_dtype(packed: int) -> str:
    """'float64', 'int8x4', ... for a packed DLDataType (error messages)."""
    code, bits, lanes = packed & 0xFF, (packed >> 8) & 0xFF, packed >> 16
    name = f"{_DL_CODES.get(code, f'code{code}')}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"
