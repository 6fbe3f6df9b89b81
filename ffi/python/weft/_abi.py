"""The ctypes packing of every ABI struct in weft.h, in one module (the Python twin of lib/abi.ts).

ctypes lays a Structure out as the C compiler does (natural alignment, tail padding), and
tests/test_abi.py checks sizeof and every field offset against weft_abi_layout(), so an ABI change
is an edit here and a failing test, never a silent mismatch. Addresses are c_uint64 (or c_void_p
where weft.h still has a pointer); both are 8 bytes.
"""
from __future__ import annotations

import ctypes
from ctypes import c_char, c_double, c_int32, c_int64, c_uint8, c_uint32, c_uint64, c_void_p
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


# ---- communicator, symmetric heap, collectives (issue 3) -------------------------------------------


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
        ("max_ctas", c_int32),
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


# ---- GEMM engine (issue 4) -------------------------------------------------------------------------


class GemmParams(ctypes.Structure):
    c_name = "WeftGemmParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("a", c_void_p), ("b", c_void_p), ("c", c_void_p),
        ("m", c_int64), ("n", c_int64), ("k", c_int64), ("lda", c_int64), ("ldb", c_int64), ("ldc", c_int64),
        ("flags", c_uint32), ("tile_n", c_int32), ("cluster_m", c_int32), ("cluster_n", c_int32),
        ("group_m", c_int32), ("max_ctas", c_int32), ("done", c_void_p), ("seq", c_uint64),
        ("arrivals", c_void_p), ("stream", c_void_p),
    ]


class GemmChoice(ctypes.Structure):
    c_name = "WeftGemmChoice"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("tile_m", c_int32), ("tile_n", c_int32), ("tile_k", c_int32),
        ("cluster_m", c_int32), ("cluster_n", c_int32), ("group_m", c_int32), ("stages", c_int32),
        ("ctas", c_int32),
    ]


# ---- fused tensor-parallel ops over NVLink (issue 5) -----------------------------------------------


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


class TpLaunch(ctypes.Structure):
    c_name = "WeftTpLaunch"
    _fields_ = [("size", c_uint32), ("version", c_uint32), ("done", c_uint64), ("seq", c_uint64), ("arrivals", c_uint64)]


class TestingTpMachine(ctypes.Structure):
    c_name = "WeftTestingTpMachine"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("world", c_int32), ("rank", c_int32), ("sm_count", c_int32),
        ("sm_budget", c_int32), ("nodes", c_int32), ("shares_device", c_int32), ("slot_bytes", c_uint64),
    ]


# ---- inter-node: command FIFO, proxy, transport (issue 6) ------------------------------------------


class TransportParams(ctypes.Structure):
    c_name = "WeftTransportParams"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("rank", c_int32), ("world_size", c_int32), ("device", c_int32),
        ("same_host", c_int32), ("timeout_ms", c_uint32), ("reserved", c_uint32), ("provider", c_void_p),
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
        ("host_control", c_void_p), ("host_slots", c_void_p), ("device_control_host", c_void_p),
        ("device_control", c_void_p), ("device_slots", c_void_p), ("device_head", c_void_p),
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


# ---- DLPack hand-over (issue 27) -------------------------------------------------------------------


class DlpackDesc(ctypes.Structure):
    c_name = "WeftDlpackDesc"
    _fields_ = [
        ("size", c_uint32), ("version", c_uint32), ("data", c_uint64), ("device_type", c_int32),
        ("device_id", c_int32), ("ndim", c_int32), ("dtype", c_int32), ("dl_dtype", c_uint32),
        ("read_only", c_uint32), ("shape", c_int64 * DLPACK_MAX_NDIM), ("strides", c_int64 * DLPACK_MAX_NDIM),
    ]


#: Every ABI struct, in weft.h order.
ABI_STRUCTS = (
    DeviceProps, CommConfig, CommInfo, PeerHandle, CollectiveParams, NcclParams, GemmParams, GemmChoice,
    TpParams, TpChoice, TpLaunch, TestingTpMachine, TransportParams, TransportCounters, ProxyParams, ProxyCommand, ProxyFifo,
    ProxyStats, CommInterNode, DlpackDesc,
)


def new(cls: Type[S], version: int = 1, **values: object) -> S:
    """A zeroed struct with ``size`` and ``version`` filled, then ``values``."""
    s = cls()
    s.size = ctypes.sizeof(cls)
    s.version = version
    for name, value in values.items():
        setattr(s, name, value)
    return s


def layout(cls: Type[ctypes.Structure]) -> dict:
    """{"sizeof": n, "fields": {name: offset}} as weft_abi_layout() publishes it."""
    return {"sizeof": ctypes.sizeof(cls), "fields": {name: getattr(cls, name).offset for name, _ in cls._fields_}}
