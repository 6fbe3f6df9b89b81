"""The ctypes packing of every ABI struct in weft.h, in one module (the Python twin of lib/abi.ts and lib/abi/).

ctypes lays a Structure out as the C compiler does (natural alignment, tail padding), and
tests/test_abi.py checks sizeof and every field offset against weft_abi_layout(), so an ABI change
is an edit here and a failing test, never a silent mismatch. Addresses are c_uint64, as in weft.h.
ENUMS holds weft.h's enums and constants by their C names; the test checks them, and the tables the
package reads (errors.STATUS, dtype codes, the TP and DLPack constants) against them.
"""
from __future__ import annotations

import ctypes
from ctypes import c_char, c_double, c_float, c_int32, c_int64, c_uint8, c_uint32, c_uint64
from typing import Type, TypeVar

S = TypeVar("S", bound=ctypes.Structure)

DLPACK_MAX_NDIM = 8


class DeviceProps(ctypes.Structure):
    c_name = "WeftDeviceProps"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("name", c_char * 256), ("pci_bus_id", c_char * 32),
        ("total_memory", c_uint64), ("free_memory", c_uint64), ("sm_count", c_int32), ("cc_major", c_int32),
        ("cc_minor", c_int32), ("l2_bytes", c_int32), ("smem_per_block_optin", c_int32), ("clock_khz", c_int32),
        ("memory_clock_khz", c_int32), ("memory_bus_width", c_int32),
    ]


class OpLaunch(ctypes.Structure):
    c_name = "WeftOpLaunch"
    _fields_ = [("size", c_uint32), ("version", c_uint32), ("done", c_uint64), ("seq", c_uint64), ("arrivals", c_uint64)]


# ---- communicator, symmetric heap, collectives -----------------------------------------------------


class CommConfig(ctypes.Structure):
    c_name = "WeftCommConfig"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("device", c_int32), ("rank", c_int32),
        ("world_size", c_int32), ("sm_budget", c_int32), ("heap_bytes", c_uint64), ("staged_bytes", c_uint64),
        ("timeout_ns", c_uint64),
    ]


class CommInfo(ctypes.Structure):
    c_name = "WeftCommInfo"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("heap_base", c_uint64), ("heap_bytes", c_uint64),
        ("arena_base", c_uint64), ("arena_bytes", c_uint64), ("staged_bytes", c_uint64), ("sm_count", c_int32),
        ("max_ctas", c_int32), ("shares_device", c_int32), ("reserved", c_int32),
    ]


class PeerHandle(ctypes.Structure):
    c_name = "WeftPeerHandle"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("process_token", c_uint64), ("device", c_int32),
        ("rank", c_int32), ("arena_base", c_uint64), ("arena_bytes", c_uint64), ("ipc", c_uint8 * 64),
    ]


class CollectiveParams(ctypes.Structure):
    c_name = "WeftCollectiveParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("kind", c_int32), ("dtype", c_int32), ("count", c_uint64),
        ("input", c_uint64), ("output", c_uint64), ("root", c_int32), ("ctas", c_int32), ("algorithm", c_int32),
        ("reserved", c_int32), ("send_counts", c_uint64), ("recv_counts", c_uint64), ("stream", c_uint64),
        ("done", c_uint64), ("seq", c_uint64), ("arrivals", c_uint64),
    ]


class NcclParams(ctypes.Structure):
    c_name = "WeftNcclParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("kind", c_int32), ("dtype", c_int32), ("count", c_uint64),
        ("inputs", c_uint64), ("outputs", c_uint64), ("streams", c_uint64), ("root", c_int32),
        ("reserved", c_int32),
    ]


# ---- GEMM engine -----------------------------------------------------------------------------------


class GemmParams(ctypes.Structure):
    c_name = "WeftGemmParams"
    c_version = 2
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("a", c_uint64), ("b", c_uint64), ("c", c_uint64),
        ("m", c_int64), ("n", c_int64), ("k", c_int64), ("lda", c_int64), ("ldb", c_int64), ("ldc", c_int64),
        ("flags", c_uint32), ("tile_n", c_int32), ("cluster_m", c_int32), ("cluster_n", c_int32),
        ("group_m", c_int32), ("max_ctas", c_int32), ("stream", c_uint64),
    ]


class GemmChoice(ctypes.Structure):
    c_name = "WeftGemmChoice"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("tile_m", c_int32), ("tile_n", c_int32), ("tile_k", c_int32),
        ("cluster_m", c_int32), ("cluster_n", c_int32), ("group_m", c_int32), ("stages", c_int32),
        ("ctas", c_int32),
    ]


# ---- fused tensor-parallel ops ---------------------------------------------------------------------


class TpParams(ctypes.Structure):
    c_name = "WeftTpParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("op", c_int32), ("flags", c_uint32), ("m", c_int64),
        ("n", c_int64), ("k", c_int64), ("a", c_uint64), ("b", c_uint64), ("out", c_uint64),
        ("gathered", c_uint64), ("path", c_int32), ("mover", c_int32), ("comm_ctas", c_int32),
        ("tile_n", c_int32), ("group_m", c_int32), ("reserved", c_int32), ("workspace", c_uint64),
        ("workspace_bytes", c_uint64), ("stream", c_uint64),
    ]


class TpChoice(ctypes.Structure):
    c_name = "WeftTpChoice"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("path", c_int32), ("mover", c_int32),
        ("comm_ctas", c_int32), ("gemm_ctas", c_int32), ("tile_n", c_int32), ("group_m", c_int32),
        ("chunk_rows", c_int32), ("fused_available", c_int32), ("workspace_bytes", c_uint64),
        ("predicted_fused_us", c_double), ("predicted_sequential_us", c_double), ("reason", c_char * 128),
    ]


class TestingTpMachine(ctypes.Structure):
    c_name = "WeftTestingTpMachine"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("world", c_int32), ("rank", c_int32), ("sm_count", c_int32),
        ("sm_budget", c_int32), ("nodes", c_int32), ("shares_device", c_int32), ("slot_bytes", c_uint64),
    ]


# ---- inter-node: transport, command FIFO and proxy, multi-node communicator ------------------------


class TransportParams(ctypes.Structure):
    c_name = "WeftTransportParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("rank", c_int32), ("world_size", c_int32), ("device", c_int32),
        ("same_host", c_int32), ("timeout_ms", c_uint32), ("reserved", c_uint32), ("provider", c_uint64),
    ]


class TransportCounters(ctypes.Structure):
    c_name = "WeftTransportCounters"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("transports", c_int64), ("regions", c_int64),
        ("proxy_threads", c_int64), ("host_buffers", c_int64),
    ]


class ProxyParams(ctypes.Structure):
    c_name = "WeftProxyParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("fifo_slots", c_uint32), ("batch", c_uint32),
        ("max_inflight", c_uint32), ("timeout_ms", c_uint32), ("device", c_int32), ("reserved", c_uint32),
    ]


class ProxyCommand(ctypes.Structure):
    c_name = "WeftProxyCommand"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("opcode", c_uint32), ("flags", c_uint32), ("peer", c_int32),
        ("src_region", c_int32), ("dst_region", c_int32), ("signal_region", c_int32), ("src_offset", c_uint64),
        ("dst_offset", c_uint64), ("bytes", c_uint64), ("signal_offset", c_uint64), ("signal_value", c_uint64),
        ("cookie", c_uint64),
    ]


class ProxyFifo(ctypes.Structure):
    c_name = "WeftProxyFifo"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("capacity", c_uint32), ("slot_bytes", c_uint32),
        ("host_control", c_uint64), ("host_slots", c_uint64), ("device_control_host", c_uint64),
        ("device_control", c_uint64), ("device_slots", c_uint64), ("device_head", c_uint64),
    ]


class ProxyStats(ctypes.Structure):
    c_name = "WeftProxyStats"
    _fields_ = [("size", c_uint32), ("version", c_uint32)] + [
        (name, c_uint64) for name in (
            "pushed", "consumed", "completed", "puts", "signals", "fences", "barriers", "passes", "idle_sleeps",
            "max_batch", "transport_writes", "transport_bytes", "transport_signal_writes")
    ]


class CommInterNode(ctypes.Structure):
    c_name = "WeftCommInterNode"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("rank", c_int32), ("world_size", c_int32), ("node", c_int32),
        ("nodes", c_int32), ("send_region", c_int32), ("recv_region", c_int32), ("send_staging", c_uint64),
        ("send_bytes", c_uint64), ("recv_staging", c_uint64), ("recv_bytes", c_uint64), ("slot_bytes", c_uint64),
        ("fifo_slots", c_uint64), ("fifo_head", c_uint64), ("fifo_control", c_uint64), ("fifo_capacity", c_uint32),
        ("reserved", c_uint32),
    ]


# ---- DLPack hand-over ------------------------------------------------------------------------------


class DlpackDesc(ctypes.Structure):
    c_name = "WeftDlpackDesc"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("data", c_uint64), ("device_type", c_int32),
        ("device_id", c_int32), ("ndim", c_int32), ("dtype", c_int32), ("dl_dtype", c_uint32),
        ("read_only", c_uint32), ("shape", c_int64 * DLPACK_MAX_NDIM), ("strides", c_int64 * DLPACK_MAX_NDIM),
    ]


# ---- decoder layers (nn) ---------------------------------------------------------------------------


def _params(c_name: str, *fields: tuple, version: int = 1) -> type:
    """A Params struct of weft.h: size, version, then `fields`; `version` is the one its _INIT sets."""
    head = [("size", c_uint32), ("version", c_uint32)]
    return type(c_name[4:], (ctypes.Structure,), {"c_name": c_name, "c_version": version, "_fields_": head + list(fields)})


EmbeddingParams = _params("WeftEmbeddingParams", ("table", c_uint64), ("ids", c_uint64), ("out", c_uint64), ("rows", c_int64),
                          ("vocab", c_int64), ("dim", c_int64), ("stream", c_uint64))
RmsNormParams = _params("WeftRmsNormParams", ("x", c_uint64), ("residual", c_uint64), ("weight", c_uint64), ("out", c_uint64),
                        ("rows", c_int64), ("dim", c_int64), ("eps", c_float), ("reserved", c_uint32), ("stream", c_uint64))
RopeParams = _params("WeftRopeParams", ("x", c_uint64), ("positions", c_uint64), ("rows", c_int64), ("heads", c_int64),
                     ("head_dim", c_int64), ("row_stride", c_int64), ("theta", c_float), ("reserved", c_uint32),
                     ("stream", c_uint64))
SwigluParams = _params("WeftSwigluParams", ("x", c_uint64), ("out", c_uint64), ("rows", c_int64), ("dim", c_int64),
                       ("stream", c_uint64))
KvAppendParams = _params("WeftKvAppendParams", ("k", c_uint64), ("v", c_uint64), ("k_cache", c_uint64), ("v_cache", c_uint64),
                         ("slot_ids", c_uint64), ("positions", c_uint64), ("rows", c_int64), ("width", c_int64),
                         ("src_stride", c_int64), ("slots", c_int64), ("max_seq", c_int64), ("stream", c_uint64))
CacheAttentionParams = _params("WeftCacheAttentionParams", ("q", c_uint64), ("k_cache", c_uint64), ("v_cache", c_uint64),
                               ("slot_ids", c_uint64), ("positions", c_uint64), ("out", c_uint64), ("rows", c_int64),
                               ("heads", c_int64), ("kv_heads", c_int64), ("head_dim", c_int64), ("q_stride", c_int64),
                               ("out_stride", c_int64), ("slots", c_int64), ("max_seq", c_int64), ("scale", c_float),
                               ("reserved", c_uint32), ("stream", c_uint64))
SampleParams = _params("WeftSampleParams", ("logits", c_uint64), ("dtype", c_int32), ("reserved", c_int32), ("rows", c_int64),
                       ("vocab", c_int64), ("row_stride", c_int64), ("temperature", c_uint64), ("top_k", c_uint64),
                       ("top_p", c_uint64), ("seed", c_uint64), ("counter", c_uint64), ("tokens", c_uint64),
                       ("logprobs", c_uint64), ("stream", c_uint64), version=2)


#: Every ABI struct, in weft.h order.
ABI_STRUCTS = (
    DeviceProps, OpLaunch, CommConfig, CommInfo, PeerHandle, CollectiveParams, NcclParams, GemmParams, GemmChoice,
    TpParams, TpChoice, TestingTpMachine, TransportParams, TransportCounters, ProxyParams, ProxyCommand, ProxyFifo,
    ProxyStats, CommInterNode, DlpackDesc, EmbeddingParams, RmsNormParams, RopeParams, SwigluParams, KvAppendParams,
    CacheAttentionParams, SampleParams,
)

#: weft.h's enums and constants by their C names, as weft_abi_layout() publishes them (lib/abi/enums.ts too).
ENUMS = {
    "WeftStatus": {"WEFT_OK": 0, "WEFT_E_INVALID": -1, "WEFT_E_CUDA": -2, "WEFT_E_NO_DEVICE": -3, "WEFT_E_OOM": -4,
                   "WEFT_E_TIMEOUT": -5, "WEFT_E_PEER": -6, "WEFT_E_UNSUPPORTED": -7, "WEFT_E_TRANSPORT": -8,
                   "WEFT_E_INTERNAL": -9},
    "WeftCopyKind": {"WEFT_COPY_DEFAULT": 0, "WEFT_COPY_H2D": 1, "WEFT_COPY_D2H": 2, "WEFT_COPY_D2D": 3},
    "WeftDtype": {"WEFT_BF16": 0, "WEFT_F16": 1, "WEFT_F32": 2, "WEFT_I32": 3, "WEFT_U8": 4},
    "WeftGemmFlags": {"WEFT_GEMM_B_NK": 1, "WEFT_GEMM_OUT_F32": 2},
    "WeftGemmFailure": {"WEFT_GEMM_FAIL_BARRIER_TIMEOUT": 1, "WEFT_GEMM_FAIL_HOOK_WAIT": 2},
    "WeftGemmStage": {"WEFT_GEMM_STAGE_PRODUCER": 1, "WEFT_GEMM_STAGE_CONSUMER": 2, "WEFT_GEMM_STAGE_EPILOGUE": 3,
                      "WEFT_GEMM_STAGE_FINISH": 4},
    "WeftAbi": {"WEFT_ABI_VERSION": 6},
    "WeftCollectiveKind": {"WEFT_ALL_GATHER": 0, "WEFT_REDUCE_SCATTER": 1, "WEFT_ALL_REDUCE": 2,
                           "WEFT_ALL_TO_ALL": 3, "WEFT_BROADCAST": 4, "WEFT_BARRIER": 5},
    "WeftAlgorithm": {"WEFT_ALGO_AUTO": 0, "WEFT_ALGO_STAGED": 1, "WEFT_ALGO_DIRECT": 2},
    "WeftCollectiveStage": {"WEFT_STAGE_ENTRY": 1, "WEFT_STAGE_CHECK": 2, "WEFT_STAGE_DONE": 3,
                            "WEFT_STAGE_STAGED": 4, "WEFT_STAGE_ABORTED": 5, "WEFT_STAGE_REMOTE": 6},
    "WeftAbortSource": {"WEFT_ABORT_PEER": 0, "WEFT_ABORT_HOST": 1},
    "WeftCollectiveField": {"WEFT_FIELD_KIND": 1, "WEFT_FIELD_DTYPE": 2, "WEFT_FIELD_COUNT": 3, "WEFT_FIELD_CTAS": 4,
                            "WEFT_FIELD_ROOT": 5, "WEFT_FIELD_WORLD": 6, "WEFT_FIELD_ALGORITHM": 7,
                            "WEFT_FIELD_EPOCH": 8, "WEFT_FIELD_PAIR_COUNT": 9},
    "WeftTpOp": {"WEFT_TP_ALL_GATHER_GEMM": 0, "WEFT_TP_GEMM_REDUCE_SCATTER": 1, "WEFT_TP_GEMM_ALL_REDUCE": 2},
    "WeftTpPath": {"WEFT_TP_PATH_AUTO": 0, "WEFT_TP_PATH_FUSED": 1, "WEFT_TP_PATH_SEQUENTIAL": 2},
    "WeftTpMover": {"WEFT_TP_MOVER_AUTO": 0, "WEFT_TP_MOVER_CTAS": 1, "WEFT_TP_MOVER_COPY_ENGINE": 2,
                    "WEFT_TP_MOVER_NONE": 3, "WEFT_TP_MOVER_EXCHANGE": 4},
    "WeftTpFailure": {"WEFT_TP_FAIL_BARRIER": 1, "WEFT_TP_FAIL_PEER_WAIT": 2, "WEFT_TP_FAIL_STAGE_MISSING": 3},
    "WeftProxyOpcode": {"WEFT_PROXY_PUT": 1, "WEFT_PROXY_SIGNAL": 2, "WEFT_PROXY_FENCE": 3, "WEFT_PROXY_BARRIER": 4},
    "WeftProxyFlags": {"WEFT_PROXY_FLAG_SIGNAL": 1},
    "WeftDlpackDevice": {"WEFT_DLPACK_CPU": 1, "WEFT_DLPACK_CUDA": 2, "WEFT_DLPACK_CUDA_HOST": 3,
                         "WEFT_DLPACK_CUDA_MANAGED": 13},
    "WeftDlpackFlags": {"WEFT_DLPACK_VERSIONED": 1, "WEFT_DLPACK_FREE_DATA": 2},
    "WeftDlpackLimits": {"WEFT_DLPACK_MAX_NDIM": 8},
    "WeftMoeFlags": {"WEFT_MOE_ROUTE": 1, "WEFT_MOE_NORMALIZE": 2},
    "WeftMoeLimits": {"WEFT_MOE_MAX_EXPERTS": 1024, "WEFT_MOE_BLOCK_ROWS": 128},
    "WeftMoeFailure": {"WEFT_MOE_FAIL_TIMEOUT": 1, "WEFT_MOE_FAIL_ABORTED": 2, "WEFT_MOE_FAIL_MISMATCH": 3,
                       "WEFT_MOE_FAIL_BAD_EXPERT": 4, "WEFT_MOE_FAIL_PEER_BAD_EXPERT": 5,
                       "WEFT_MOE_FAIL_CAPACITY": 6, "WEFT_MOE_FAIL_NO_LAYOUT": 7},
    "WeftMoeStage": {"WEFT_MOE_STAGE_ENTRY": 1, "WEFT_MOE_STAGE_LAYOUT": 2, "WEFT_MOE_STAGE_ARRIVALS": 3,
                     "WEFT_MOE_STAGE_BARRIER": 4, "WEFT_MOE_STAGE_READY": 5, "WEFT_MOE_STAGE_RETURN": 6},
    "WeftMoeField": {"WEFT_MOE_FIELD_EXPERTS": 1, "WEFT_MOE_FIELD_TOPK": 2, "WEFT_MOE_FIELD_HIDDEN": 3,
                     "WEFT_MOE_FIELD_WORLD": 4, "WEFT_MOE_FIELD_CAPACITY": 5, "WEFT_MOE_FIELD_MAX_TOKENS": 6,
                     "WEFT_MOE_FIELD_EPOCH": 7},
    "WeftMoeExpertFlags": {"WEFT_MOE_W_NK": 1, "WEFT_MOE_SWIGLU": 2},
    "WeftMoeMover": {"WEFT_MOE_MOVER_AUTO": 0, "WEFT_MOE_MOVER_PUSH": 1, "WEFT_MOE_MOVER_PULL": 2},
    "WeftGroupedGemmFailure": {"WEFT_GROUPED_FAIL_OFFSETS": 3},
    "WeftAttentionFlags": {"WEFT_ATTENTION_CAUSAL": 1},
    "WeftAttentionFailure": {"WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT": 1, "WEFT_ATTENTION_FAIL_PEER_WAIT": 2,
                             "WEFT_ATTENTION_FAIL_SEQLENS": 3},
    "WeftAttentionStage": {"WEFT_ATTENTION_STAGE_PRODUCER": 1, "WEFT_ATTENTION_STAGE_CONSUMER": 2,
                           "WEFT_ATTENTION_STAGE_FINISH": 3},
    "WeftRingLayout": {"WEFT_RING_ZIGZAG": 0, "WEFT_RING_CONTIGUOUS": 1},
    "WeftRingMover": {"WEFT_RING_MOVER_AUTO": 0, "WEFT_RING_MOVER_COPY_ENGINE": 1, "WEFT_RING_MOVER_CTAS": 2},
}



def new(cls: Type[S], version: int = 0, **values: object) -> S:
    """A zeroed struct with ``size`` and ``version`` (the class's ``c_version``, else 1) filled, then ``values``."""
    s = cls()
    s.size = ctypes.sizeof(cls)
    s.version = version or getattr(cls, "c_version", 1)
    for name, value in values.items():
        setattr(s, name, value)
    return s


def layout(cls: Type[ctypes.Structure]) -> dict:
    """{"sizeof": n, "fields": {name: offset}} as weft_abi_layout() publishes it."""
    return {"sizeof": ctypes.sizeof(cls), "fields": {name: getattr(cls, name).offset for name, _ in cls._fields_}}
