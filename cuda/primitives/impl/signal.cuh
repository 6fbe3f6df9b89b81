// Implementation of signal.cuh. Read the contract there.
#pragma once

namespace weft::sys {

__device__ __forceinline__ uint64_t signal_load(const uint64_t* addr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

__device__ __forceinline__ void signal_store(uint64_t* addr, uint64_t value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ void signal_store_fenced(uint64_t* addr, uint64_t value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ void signal_add(uint64_t* addr, uint64_t value) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ uint64_t signal_fetch_add(uint64_t* addr, uint64_t value) {
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(addr), "l"(value) : "memory");
  return old;
}

__device__ __forceinline__ void device_signal_store(uint64_t* addr, uint64_t value) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ uint64_t device_signal_fetch_add(uint64_t* addr, uint64_t value) {
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(addr), "l"(value) : "memory");
  return old;
}

__device__ __forceinline__ void device_signal_add(uint64_t* addr, uint64_t value) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ uint4 load_volatile16(const void* src) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(src)
               : "memory");
  return v;
}

__device__ __forceinline__ void store_volatile16(void* dst, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

template <class Line>
__device__ __forceinline__ void assert_descriptor_line() {
  static_assert(sizeof(Line) == 64 && alignof(Line) == 64 && offsetof(Line, epoch) == 56,
                "a descriptor line is one aligned 64-byte line: 48 payload bytes, padding, the epoch last");
}

template <class Line>
__device__ __forceinline__ void store_line_payload(Line* dst, const Line& src) {
  assert_descriptor_line<Line>();
  const uint4* from = reinterpret_cast<const uint4*>(&src);
  uint4* to = reinterpret_cast<uint4*>(dst);
  store_volatile16(to + 0, from[0]);
  store_volatile16(to + 1, from[1]);
  store_volatile16(to + 2, from[2]);
}

template <class Line>
__device__ __forceinline__ Line load_line_payload(const Line* src) {
  assert_descriptor_line<Line>();
  Line t;
  uint4* to = reinterpret_cast<uint4*>(&t);
  const uint4* from = reinterpret_cast<const uint4*>(src);
  to[0] = load_volatile16(from + 0);
  to[1] = load_volatile16(from + 1);
  to[2] = load_volatile16(from + 2);
  return t;
}

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline bool aborted(const WaitBudget& budget) {
  return (budget.abort && *budget.abort) || (budget.peer_abort && signal_load(budget.peer_abort) >= budget.abort_at);
}

__device__ inline WaitResult wait_at_least(const uint64_t* addr, uint64_t target, WaitBudget budget) {
  if (signal_load(addr) >= target) return WaitResult::kOk;
  const uint64_t limit = budget.timeout_ns ? budget.timeout_ns : kDefaultTimeoutNs;
  const uint64_t start = globaltimer_ns();
  // Backoff: start hot (NVLink round trips are ~1 us), settle at 1 us between polls so that a long
  // wait does not flood the fabric with remote loads.
  unsigned sleep_ns = 32;
  for (uint32_t spins = 0;; ++spins) {
    if (signal_load(addr) >= target) return WaitResult::kOk;
    __nanosleep(sleep_ns);
    if (sleep_ns < 1024) sleep_ns <<= 1;
    // The timer and the abort word are checked every 64 polls: both cost a memory round trip.
    if ((spins & 63) == 63) {
      if (aborted(budget)) return WaitResult::kAborted;
      if (globaltimer_ns() - start > limit) return WaitResult::kTimeout;
    }
  }
}

template <class Done>
__device__ inline WaitResult wait_until(const uint64_t* addr, Done done, WaitBudget budget) {
  if (done(signal_load(addr))) return WaitResult::kOk;
  const uint64_t limit = budget.timeout_ns ? budget.timeout_ns : kDefaultTimeoutNs;
  const uint64_t start = globaltimer_ns();
  unsigned sleep_ns = 32;
  for (uint32_t spins = 0;; ++spins) {
    if (done(signal_load(addr))) return WaitResult::kOk;
    __nanosleep(sleep_ns);
    if (sleep_ns < 1024) sleep_ns <<= 1;
    if ((spins & 63) == 63) {
      if (aborted(budget)) return WaitResult::kAborted;
      if (globaltimer_ns() - start > limit) return WaitResult::kTimeout;
    }
  }
}

}  // namespace weft::sys
