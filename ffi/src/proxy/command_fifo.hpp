// command_fifo.hpp — the host side of the GPU→CPU command FIFO (layout: cuda/primitives/
// proxy_command.h). Many producers push, one consumer (the proxy thread) takes commands in ticket
// order.
//
// A FIFO has one ticket counter. Host producers claim tickets with a CAS on the control block's
// head word, and only when the slots are free, so a claimed ticket is always filled (a producer
// that times out has claimed nothing). A FIFO made for device producers keeps its counter in
// device memory instead (device-scope atomicAdd; see fifo.cuh for why not mapped host memory);
// host code never pushes into that one. The proxy drains both kinds the same way.
#pragma once

#include <chrono>
#include <cstdint>

#include "primitives/proxy_command.h"
#include "transport/host_memory.hpp"

namespace weft::proxy {

using Clock = std::chrono::steady_clock;

class CommandFifo {
 public:
  enum class Producers { kHost, kDevice };

  // capacity: a power of two in [2, 2^20]. kDevice needs a GPU (device >= 0).
  CommandFifo(uint32_t capacity, Producers producers, int device);
  ~CommandFifo();
  CommandFifo(const CommandFifo&) = delete;
  CommandFifo& operator=(const CommandFifo&) = delete;

  uint32_t capacity() const { return capacity_; }
  Producers producers() const { return producers_; }
  FifoControl* control() const { return static_cast<FifoControl*>(memory_.host()); }
  Command* slots() const;
  // Device aliases (nullptr without a GPU), and the device-memory ticket counter of a kDevice FIFO.
  void* control_device() const;
  void* slots_device() const;
  uint64_t* device_head() const { return device_head_; }

  // ---- producers (host threads) ----
  // Claims n consecutive tickets (n <= capacity), writes the n commands (their headers are set
  // here) and commits each. Waits while the FIFO is full until `deadline`, then throws
  // WEFT_E_TIMEOUT; throws the proxy's error once one is recorded. Returns the first ticket.
  uint64_t push(const Command* commands, uint32_t n, Clock::time_point deadline);

  // ---- the consumer (one thread) ----
  // Copies up to `max` committed commands, in ticket order from the consumer's position, into
  // `out` and returns how many. It does not free their slots: call release() after.
  uint32_t peek(Command* out, uint32_t max);
  // Frees the slots of the n commands last peeked (publishes the new tail).
  void release(uint32_t n);
  void publish_completed(uint64_t completed);
  void publish_error(int status);
  uint64_t claimed() const;  // host FIFOs: tickets claimed so far

 private:
  uint32_t capacity_;
  Producers producers_;
  HostMemory memory_;
  uint64_t* device_head_ = nullptr;
  uint64_t next_ = 0;  // consumer: next ticket to take
};

}  // namespace weft::proxy
