// between_nodes.cuh — device pieces every kernel that crosses nodes through the proxy is built from:
// where things are in the staging (layout and topology: hierarchical.h), one put+signal command
// into the proxy's device lane, a bounded wait for a peer node's signal, and copies / sums that
// read the receive staging with system-scope loads.
//
// Contract:
//   - put_signal() is called by ONE thread. Every store the command's bytes depend on (the CTA's
//     writes into the send staging) must precede it in that thread's view (__syncthreads first);
//     it issues the system fence itself. The peer's signal word [this node][index] is raised to
//     `epoch` after the bytes have landed (transport ordering, proxy_command.h). It fails at once
//     (kAborted, status = the proxy's WEFT_E_*) when the proxy has already failed.
//   - proxy_failed() tells whether the proxy has failed (its error word), for a last check after
//     a rank's exchange: a proxy that died after taking a command may never have sent it.
//   - await_signal() is called by ONE thread: it waits until signal word [src_node][index] of this
//     rank's receive staging reaches `epoch`, with __nanosleep backoff, bounded by timeout_ns, and
//     stops early when the proxy has failed (status = its WEFT_E_*), an optional abort word reaches
//     abort_epoch, or the host declared a rank failed (kAborted with status 0; declared() names it).
//     Pass the result to the CTA with __syncthreads_or before reading data.
//   - copy_in()/sum_in() are move.cuh's copy_out()/sum_out() with ld.volatile loads (relaxed,
//     system scope): a receive slot is reused every second op, and a weak load could be served
//     from a line an earlier op left in the GPU's caches. sum_in() adds in the same order with
//     the same rounding as sum_out(), so equal inputs give equal bits on every rank.
#pragma once

#include <cstdint>
#include <type_traits>

#include "collectives/hierarchical.h"
#include "collectives/move.cuh"
#include "collectives/protocol.cuh"
#include "primitives/fifo.cuh"
#include "primitives/signal.cuh"

namespace weft::coll::inter {

// ---- reading the receive staging ----------------------------------------------------------------
// Bytes the peer's NIC (or its proxy) wrote into host memory are loaded with ld.volatile (relaxed,
// system scope) rather than move.cuh's ld.global.cg: the same slot is reused every second op, and
// a weak load may be served from a line an earlier op left in the GPU's caches.

__device__ __forceinline__ uint4 ld_sys16(const char* p) { return sys::load_volatile16(p); }

template <int kBytes>
__device__ __forceinline__ uint32_t ld_sys(const char* p) {
  uint32_t v;
  if constexpr (kBytes == 4) {
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  } else if constexpr (kBytes == 2) {
    uint16_t h;
    asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(h) : "l"(p) : "memory");
    v = h;
  } else {
    uint16_t h;
    asm volatile("ld.volatile.global.u8 %0, [%1];" : "=h"(h) : "l"(p) : "memory");
    v = h;
  }
  return v;
}

template <int kUnit, class Dst>
__device__ inline void copy_in_units(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  for (uint64_t i = w.id; i < bytes / kUnit; i += w.count) {
    const uint32_t v = ld_sys<kUnit>(src + i * kUnit);
    for (uint32_t d = 0; d < ndst; ++d) mem::st<kUnit>(dst(d) + i * kUnit, v);
  }
}

// copy_out() with system-scope loads: dst(i), i < ndst, each receive `bytes` bytes of src.
template <class Dst>
__device__ inline void copy_in(const char* src, Dst dst, uint32_t ndst, uint64_t bytes, Workers w) {
  uint64_t bits = reinterpret_cast<uintptr_t>(src) | bytes;
  for (uint32_t d = 0; d < ndst; ++d) bits |= reinterpret_cast<uintptr_t>(dst(d));
  if ((bits & 15) == 0) {
    for (uint64_t i = w.id; i < bytes / 16; i += w.count) {
      const uint4 v = ld_sys16(src + i * 16);
      for (uint32_t d = 0; d < ndst; ++d) mem::st16(dst(d) + i * 16, v);
    }
  } else if ((bits & 3) == 0) {
    copy_in_units<4>(src, dst, ndst, bytes, w);
  } else if ((bits & 1) == 0) {
    copy_in_units<2>(src, dst, ndst, bytes, w);
  } else {
    copy_in_units<1>(src, dst, ndst, bytes, w);
  }
}

template <typename T>
__device__ __forceinline__ float ld_sys_elem(const char* p) {
  const uint32_t v = ld_sys<sizeof(T)>(p);
  if constexpr (sizeof(T) == 4) return __uint_as_float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__ushort_as_bfloat16(uint16_t(v)));
  else return __half2float(__ushort_as_half(uint16_t(v)));
}

// sum_out() with system-scope loads: dst(i)[k] = sum over q < nsrc, in order, of src(q)[k] (fp32
// accumulation from 0, the same order and rounding as sum_out, so equal inputs give equal bits).
template <typename T, class Src, class Dst>
__device__ inline void sum_in(Src src, uint32_t nsrc, Dst dst, uint32_t ndst, uint64_t n, Workers w) {
  constexpr int L = Lanes<T>::kCount;
  uint64_t bits = 0;
  for (uint32_t q = 0; q < nsrc; ++q) bits |= reinterpret_cast<uintptr_t>(src(q));
  for (uint32_t d = 0; d < ndst; ++d) bits |= reinterpret_cast<uintptr_t>(dst(d));
  const uint64_t nvec = (bits & 15) == 0 ? n / L : 0;
  for (uint64_t v = w.id; v < nvec; v += w.count) {
    float acc[L];
#pragma unroll
    for (int l = 0; l < L; ++l) acc[l] = 0.0f;
    for (uint32_t q = 0; q < nsrc; ++q) add_lanes<T>(acc, ld_sys16(src(q) + v * 16));
    const uint4 out = pack_lanes<T>(acc);
    for (uint32_t d = 0; d < ndst; ++d) mem::st16(dst(d) + v * 16, out);
  }
  for (uint64_t i = nvec * L + w.id; i < n; i += w.count) {
    float acc = 0.0f;
    for (uint32_t q = 0; q < nsrc; ++q) acc += ld_sys_elem<T>(src(q) + i * sizeof(T));
    for (uint32_t d = 0; d < ndst; ++d) store_elem<T>(dst(d) + i * sizeof(T), acc);
  }
}

// ---- topology and staging -------------------------------------------------------------------------

// The i-th other node, i < nodes - 1, starting after this one (so that no node is everyone's first).
__device__ __forceinline__ uint32_t other_node(const InterNode& x, uint32_t i) {
  return (x.node + 1 + i) % x.nodes;
}

__device__ __forceinline__ uint32_t global_rank(const InterNode& x, uint32_t node, uint32_t local) {
  return node * x.local_size + local;
}

__device__ __forceinline__ uint64_t send_offset(const InterNode& x, uint32_t parity, uint32_t slot) {
  return (uint64_t(parity) * x.nodes + slot) * x.slot_bytes;
}

__device__ __forceinline__ uint64_t recv_offset(const InterNode& x, uint32_t parity, uint32_t src_node) {
  return internode_signal_bytes(x.nodes) + (uint64_t(parity) * x.nodes + src_node) * x.slot_bytes;
}


__device__ __forceinline__ const uint64_t* signal_word(const InterNode& x, uint32_t src_node, uint32_t index) {
  return reinterpret_cast<const uint64_t*>(x.recv) + (uint64_t(src_node) * kMaxCtas + index);
}

__device__ __forceinline__ const uint64_t* proxy_error_word(const InterNode& x) {
  return reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(x.fifo.control) +
                                          offsetof(proxy::FifoControl, error));
}

__device__ __forceinline__ int64_t proxy_failed(const InterNode& x) {
  return static_cast<int64_t>(sys::signal_load(proxy_error_word(x)));
}

__device__ inline sys::WaitResult put_signal(const InterNode& x, uint32_t peer_rank, uint64_t src, uint64_t dst,
                                             uint64_t bytes, uint32_t index, uint64_t epoch, uint64_t timeout_ns,
                                             int64_t* status) {
  proxy::Command cmd{};
  cmd.header = proxy::kOpPut;
  cmd.peer = peer_rank;
  cmd.src_region = x.send_region;
  cmd.dst_region = x.recv_region;
  cmd.signal_region = x.recv_region;
  cmd.flags = proxy::kFlagSignal;
  cmd.src_offset = src;
  cmd.dst_offset = dst;
  cmd.bytes = bytes;
  cmd.signal_offset = (uint64_t(x.node) * kMaxCtas + index) * 8;
  cmd.signal_value = epoch;
  cmd.cookie = (epoch << 16) | index;
  // A failed proxy drains nothing: fail now instead of leaving the command (and the peer) waiting.
  const int64_t failed = static_cast<int64_t>(sys::signal_load(proxy_error_word(x)));
  if (failed != 0) {
    if (status) *status = failed;
    return sys::WaitResult::kAborted;
  }
  // The CTA's staging stores (ordered before this thread by the caller's __syncthreads) reach
  // host memory before the command's header does.
  __threadfence_system();
  return proxy::thread::push(x.fifo, cmd, nullptr, status, sys::WaitBudget{timeout_ns, nullptr});
}

// 0, or the rank the host declared failed + 1 (weft_comm_abort).
__device__ __forceinline__ uint32_t declared(const InterNode& x) { return x.host_abort ? uint32_t(*x.host_abort) : 0u; }

__device__ inline sys::WaitResult await_signal(const InterNode& x, uint32_t src_node, uint32_t index, uint64_t epoch,
                                               uint64_t timeout_ns, const uint64_t* abort_word, uint64_t abort_epoch,
                                               int64_t* status) {
  const uint64_t* w = signal_word(x, src_node, index);
  if (sys::signal_load(w) >= epoch) return sys::WaitResult::kOk;
  const uint64_t* error = proxy_error_word(x);
  const uint64_t start = sys::globaltimer_ns();
  // Arrivals come at network speed (tens of microseconds): ~1 us polls of host memory over PCIe.
  unsigned sleep_ns = 64;
  for (uint32_t spins = 1;; ++spins) {
    if (sys::signal_load(w) >= epoch) return sys::WaitResult::kOk;
    if ((spins & 15) == 0) {
      if (abort_word && sys::signal_load(abort_word) >= abort_epoch) return sys::WaitResult::kAborted;
      if (declared(x) != 0) return sys::WaitResult::kAborted;
      const int64_t e = static_cast<int64_t>(sys::signal_load(error));
      if (e != 0) {
        if (status) *status = e;
        return sys::WaitResult::kAborted;
      }
      if (sys::globaltimer_ns() - start > timeout_ns) return sys::WaitResult::kTimeout;
    }
    __nanosleep(sleep_ns);
    if (sleep_ns < 1024) sleep_ns <<= 1;
  }
}

}  // namespace weft::coll::inter
