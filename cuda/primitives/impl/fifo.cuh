// Implementation of fifo.cuh. Read the contract there.
#pragma once

namespace weft::proxy {

namespace detail {

__device__ __forceinline__ const uint64_t* control_word(const FifoDevice& f, size_t byte_offset) {
  return reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(f.control) + byte_offset);
}

// Waits until load(word) satisfies `ready`, polling the proxy's error word and the budget.
template <typename Ready>
__device__ inline sys::WaitResult bounded_wait(const FifoDevice& f, const uint64_t* word, Ready ready,
                                               int64_t* status, sys::WaitBudget budget) {
  if (ready(sys::signal_load(word))) return sys::WaitResult::kOk;
  const uint64_t limit = budget.timeout_ns ? budget.timeout_ns : sys::kDefaultTimeoutNs;
  const uint64_t start = sys::globaltimer_ns();
  const uint64_t* error = control_word(f, offsetof(FifoControl, error));
  // The proxy frees slots at network speed (microseconds): poll every ~1 us once warmed up.
  unsigned sleep_ns = 64;
  for (uint32_t spins = 0;; ++spins) {
    if (ready(sys::signal_load(word))) return sys::WaitResult::kOk;
    __nanosleep(sleep_ns);
    if (sleep_ns < 1024) sleep_ns <<= 1;
    if ((spins & 15) == 15) {
      const int64_t e = static_cast<int64_t>(sys::signal_load(error));
      if (e != 0) {
        if (status) *status = e;
        return sys::WaitResult::kAborted;
      }
      if (sys::aborted(budget)) return sys::WaitResult::kAborted;
      if (sys::globaltimer_ns() - start > limit) return sys::WaitResult::kTimeout;
    }
  }
}

}  // namespace detail

namespace thread {

__device__ inline sys::WaitResult push(const FifoDevice& fifo, const Command& command, uint64_t* ticket,
                                       int64_t* status, sys::WaitBudget budget) {
  const uint64_t t = atomicAdd(fifo.head, 1ull);
  if (ticket) *ticket = t;
  // Backpressure: slot t % capacity is free once the proxy has taken ticket t - capacity.
  const uint64_t* tail = detail::control_word(fifo, offsetof(FifoControl, tail));
  const sys::WaitResult room = detail::bounded_wait(
      fifo, tail, [&](uint64_t consumed) { return t < consumed + fifo.capacity; }, status, budget);
  if (room != sys::WaitResult::kOk) return room;
  Command* slot = fifo.slots + (t & (fifo.capacity - 1));
  // Body: bytes 8..63 as seven 64-bit words, plain stores into the host mapping.
  const uint64_t* src = reinterpret_cast<const uint64_t*>(&command);
  volatile uint64_t* dst = reinterpret_cast<volatile uint64_t*>(slot);
#pragma unroll
  for (int w = 1; w < 8; ++w) dst[w] = src[w];
  // Header last: the release orders the body before it for whoever acquires the header.
  sys::signal_store(&slot->header, command_header(t, header_opcode(command.header)));
  return sys::WaitResult::kOk;
}

__device__ inline sys::WaitResult wait_done(const FifoDevice& fifo, uint64_t ticket, int64_t* status,
                                            sys::WaitBudget budget) {
  const uint64_t* completed = detail::control_word(fifo, offsetof(FifoControl, completed));
  return detail::bounded_wait(
      fifo, completed, [&](uint64_t done) { return done > ticket; }, status, budget);
}

}  // namespace thread

}  // namespace weft::proxy
