// signal.cuh — epoch-tagged 64-bit signals between GPUs (and between a GPU and the host).
//
// Contract:
//   - A signal is a uint64_t in memory that every party can address: the symmetric heap (peers map
//     it over NVLink) or pinned host-mapped memory (the host reads it with plain loads).
//   - Writers publish with release semantics at system scope: every store the writing thread made
//     before sys::signal_store() (and, after a __syncthreads(), every store its CTA made) is visible
//     to whoever observes the new value with sys::signal_load().
//   - Values only grow. Each launch of an op advances its epoch, and a waiter waits for
//     `value >= epoch`, so no signal is ever reset between runs.
//   - Every wait is bounded: sys::wait_at_least() spins with __nanosleep backoff, polls the
//     budget's abort words (a host-mapped word the host raises with weft_comm_abort, and a word the
//     peers raise when they give up), and gives up after `budget` nanoseconds (globaltimer) with a
//     WaitResult that the caller reports (rank, peer, stage) instead of hanging the GPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::sys {

enum class WaitResult : int { kOk = 0, kTimeout = 1, kAborted = 2 };

struct WaitBudget {
  uint64_t timeout_ns;          // 0 = default (see kDefaultTimeoutNs)
  const volatile uint64_t* abort;  // optional: non-zero means "give up now" (host-written)
  const uint64_t* peer_abort = nullptr;  // optional: give up once this word reaches abort_at
  uint64_t abort_at = 0;
};

constexpr uint64_t kDefaultTimeoutNs = 10ull * 1000 * 1000 * 1000;  // 10 s

__device__ __forceinline__ uint64_t signal_load(const uint64_t* addr);
__device__ __forceinline__ void signal_store(uint64_t* addr, uint64_t value);
// signal_store for a caller that has just fenced at system scope (__threadfence_system) with its
// data complete: the fence and this relaxed store form a release pattern, so no second system fence
// (each costs ~1-2 us on Hopper: bench/repro/finish-cost.cu).
__device__ __forceinline__ void signal_store_fenced(uint64_t* addr, uint64_t value);
__device__ __forceinline__ void signal_add(uint64_t* addr, uint64_t value);
// Atomic add with acquire-release semantics at system scope; returns the old value. The caller that
// sees the last increment of a group also sees everything the other incrementers released.
__device__ __forceinline__ uint64_t signal_fetch_add(uint64_t* addr, uint64_t value);
// The same two at device scope, for words only this GPU reads (its SMs, or its copy engines'
// stream waits): no system-scope fence on the way.
__device__ __forceinline__ void device_signal_store(uint64_t* addr, uint64_t value);
__device__ __forceinline__ uint64_t device_signal_fetch_add(uint64_t* addr, uint64_t value);
// A release add whose old value nobody needs (red): the thread does not wait for it.
__device__ __forceinline__ void device_signal_add(uint64_t* addr, uint64_t value);
// 16 bytes with ld / st.volatile (relaxed, system scope; a load is never served from a line an
// earlier use left in L1): payloads that travel beside a signal, and flagged words (flagged.cuh).
__device__ __forceinline__ uint4 load_volatile16(const void* src);
__device__ __forceinline__ void store_volatile16(void* dst, const uint4& v);
// A descriptor line: a 64-byte struct whose last 8 bytes are its epoch signal (the collectives'
// PairDesc, MoE dispatch's Desc). Its payload, the first 48 bytes, moves as three 16-byte volatile
// accesses: the writer stores it and then signal_store()s the epoch (release, so the payload is
// ordered before it); the reader loads it only after its signal_load() of the epoch saw the value.
// Bytes 48..55 are padding and do not travel.
template <class Line>
__device__ __forceinline__ void store_line_payload(Line* dst, const Line& src);
template <class Line>
__device__ __forceinline__ Line load_line_payload(const Line* src);
__device__ __forceinline__ uint64_t globaltimer_ns();
__device__ inline WaitResult wait_at_least(const uint64_t* addr, uint64_t target, WaitBudget budget);
// Whether either of the budget's abort words says "give up" (for loops that poll on their own).
__device__ inline bool aborted(const WaitBudget& budget);
// The general form: wait until done(value) holds, bounded the same way (for values that are not
// monotonic, e.g. written with a per-parity tag).
template <class Done>
__device__ inline WaitResult wait_until(const uint64_t* addr, Done done, WaitBudget budget);

}  // namespace weft::sys

#include "impl/signal.cuh"
