// flagged.cuh — data that carries its own arrival flag: 16-byte words {data, flag, data, flag}, the
// format of NCCL's LL protocol. A writer stores the whole word with one 16-byte store; each 8-byte
// half {data, flag} is written and read as a unit, so a reader that sees the flag in both halves also
// sees both data words. No fence and no separate flag store are needed, at the price of half the
// bytes being flags: worth it only for messages so small that the fence and the flag's round trip
// cost more than the bytes (decode all-reduce at m <= 32: gemm_exchange.cuh).
//
// Contract:
//   - The flag must differ from anything the word held before this use: callers alternate buffers
//     by epoch parity and derive the flag from the epoch (sys::flag_of), never 0.
//   - Loads are volatile (not cached in L1), so a poll sees a peer's later store.
#pragma once

#include <cstdint>

#include "signal.cuh"

namespace weft::sys {

__device__ __forceinline__ void store_flagged(void* dst, uint32_t lo, uint32_t hi, uint32_t flag) {
  store_volatile16(dst, make_uint4(lo, flag, hi, flag));
}

__device__ __forceinline__ uint4 load_flagged(const void* src) { return load_volatile16(src); }

// Both halves carry `flag`: v.x and v.z are this use's data.
__device__ __forceinline__ bool flagged_ready(const uint4& v, uint32_t flag) { return v.y == flag && v.w == flag; }

// A 32-bit flag for launch `epoch`: a mix of the epoch, so that neither stale data nor a small count
// left in a reused buffer is likely to match it; never 0.
__device__ __forceinline__ uint32_t flag_of(uint64_t epoch) {
  const uint32_t h = uint32_t((epoch * 0x9E3779B97F4A7C15ull) >> 32);
  return h != 0 ? h : 1u;
}

}  // namespace weft::sys
