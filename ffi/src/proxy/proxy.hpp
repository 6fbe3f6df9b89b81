// proxy.hpp — the per-rank proxy thread: drains command FIFOs, drives the transport, publishes
// completions and failures (DESIGN.md "Inter-node").
//
// Lifecycle: the constructor creates the FIFOs and starts the thread; stop() (or the destructor)
// ends it. Neither ever blocks for longer than a bounded time, even with transfers in flight:
// stop() does not wait for remote completion (flush first when that matters: push a fence and
// wait for it).
//
// Lanes: the host lane is fed by host threads (push()); with a GPU there is also a device lane fed
// by kernels (cuda/primitives/fifo.cuh). Each lane has its own tickets, completion watermark and
// fence ordering; the transport's ordering (a signal after all earlier data to that peer) spans
// both.
//
// Failure: the first error (transport failure, dead peer, invalid device-pushed command, timeout)
// is recorded with its code and message, published in every FIFO's error word, and ends the
// thread. Every later push and wait fails with it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/command_fifo.hpp"
#include "transport/transport.hpp"
#include "weft.h"

namespace weft::proxy {

struct ProxyOptions {
  uint32_t fifo_slots = 1024;
  uint32_t batch = 64;          // commands taken per pass
  uint32_t max_inflight = 4096; // commands dispatched and not yet complete, per lane
  uint32_t timeout_ms = 30000;  // barrier waits; transport ops use the transport's own bound
  int device = -1;
};

struct ProxyStats {
  uint64_t pushed = 0;     // host lane: tickets claimed
  uint64_t consumed = 0;   // all lanes: commands taken from the FIFOs
  uint64_t completed = 0;  // all lanes: commands complete
  uint64_t puts = 0, signals = 0, fences = 0, barriers = 0;
  uint64_t passes = 0;     // loop iterations that did work
  uint64_t idle_sleeps = 0;
  uint64_t max_batch = 0;
};

class Proxy {
 public:
  Proxy(Transport& transport, const ProxyOptions& options);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Idempotent. Joins the thread; commands still incomplete are failed (error word set). Frees
  // nothing: the FIFOs live until the Proxy is destroyed. Kernels still pushing into the device
  // lane must have finished before that (abort() first to release them).
  void stop();
  // Records `message` as the proxy's error (WEFT_E_TRANSPORT) if none is recorded yet: the thread
  // ends, every FIFO's error word is set, and GPU threads waiting in fifo.cuh give up.
  void abort(const std::string& message) { record_error(WEFT_E_TRANSPORT, message); }

  // Host lane. Validates each command (throws WEFT_E_INVALID naming the field), then pushes all
  // n or none, waiting at most timeout_ms for room. Returns the first ticket.
  uint64_t push(const Command* commands, uint32_t n, uint32_t timeout_ms);
  // Waits until every host-lane ticket <= `ticket` is complete.
  void wait(uint64_t ticket, uint32_t timeout_ms);
  void set_paused(bool paused) { paused_.store(paused); }

  CommandFifo& host_fifo() { return *lanes_[0]->fifo; }
  CommandFifo* device_fifo() { return lanes_.size() > 1 ? lanes_[1]->fifo.get() : nullptr; }
  Transport& transport() { return transport_; }
  int device() const { return options_.device; }
  // Throws WEFT_E_INVALID naming `where` and the field when c is not a valid command here.
  void validate_command(const Command& c, const char* where) const { validate(c, where, kUnnumbered); }

  int error_code() const { return error_code_.load(std::memory_order_acquire); }
  std::string error_message() const;
  ProxyStats stats() const;

 private:
  struct Lane {
    std::unique_ptr<CommandFifo> fifo;
    std::vector<uint8_t> done;     // ring of max_inflight flags, by ticket
    uint64_t completed = 0;        // every ticket < completed is done
    uint64_t dispatched = 0;       // tickets taken from the FIFO
    bool blocked = false;          // a fence or barrier at ticket `dispatched - 1` waits
    uint8_t blocking_op = kOpNone;
    bool barrier_started = false;
    uint64_t barrier_epoch = 0;
    Clock::time_point barrier_deadline;
  };

  void run();
  bool pass();
  bool drain(size_t lane_index);
  bool advance_blocked(size_t lane_index);
  void dispatch(size_t lane_index, const Command& c, uint64_t ticket);
  void complete(size_t lane_index, uint64_t ticket);
  void record_error(int code, const std::string& message);
  static constexpr uint64_t kUnnumbered = ~uint64_t{0};
  // Throws WEFT_E_INVALID naming the command ("<kind> <index>", or just kind when kUnnumbered).
  void validate(const Command& c, const char* kind, uint64_t index) const;

  Transport& transport_;
  ProxyOptions options_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Command> batch_;
  std::vector<uint64_t> done_tokens_;
  uint64_t barriers_started_ = 0;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> exited_{false};
  std::atomic<bool> paused_{false};
  std::atomic<int> error_code_{0};
  mutable std::mutex error_mu_;
  std::string error_message_;

  mutable std::mutex stats_mu_;
  ProxyStats stats_;
};

}  // namespace weft::proxy
