#include "proxy/command_fifo.hpp"

#include <cuda_runtime_api.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "device_guard.hpp"
#include "status.hpp"

namespace weft::proxy {

namespace {

template <typename T>
std::atomic_ref<T> word(T& w) {
  return std::atomic_ref<T>(w);
}

}  // namespace

CommandFifo::CommandFifo(uint32_t capacity, Producers producers, int device)
    : capacity_(capacity), producers_(producers), memory_(fifo_bytes(capacity)) {
  WEFT_REQUIRE(capacity >= 2 && capacity <= (1u << 20) && (capacity & (capacity - 1)) == 0,
               "fifo_slots must be a power of two in [2, 1048576] (got %u)", capacity);
  if (producers == Producers::kDevice) {
    WEFT_REQUIRE(device >= 0 && memory_.device(), "a device-fed FIFO needs a GPU (device %d)", device);
    DeviceGuard g(device);
    WEFT_CUDA(cudaMalloc(reinterpret_cast<void**>(&device_head_), sizeof(uint64_t)));
    cudaError_t e = cudaMemset(device_head_, 0, sizeof(uint64_t));
    if (e != cudaSuccess) {
      (void)cudaFree(device_head_);
      device_head_ = nullptr;
      WEFT_CUDA(e);
    }
  }
}

CommandFifo::~CommandFifo() {
  if (device_head_) (void)cudaFree(device_head_);
}

Command* CommandFifo::slots() const {
  return reinterpret_cast<Command*>(static_cast<char*>(memory_.host()) + kSlotsOffset);
}

void* CommandFifo::control_device() const { return memory_.device(); }

void* CommandFifo::slots_device() const {
  return memory_.device() ? static_cast<char*>(memory_.device()) + kSlotsOffset : nullptr;
}

uint64_t CommandFifo::push(const Command* commands, uint32_t n, Clock::time_point deadline) {
  WEFT_REQUIRE(producers_ == Producers::kHost, "host code cannot push into a device-fed FIFO");
  WEFT_REQUIRE(n >= 1 && n <= capacity_, "a push of %u commands does not fit a FIFO of %u slots", n,
               capacity_);
  FifoControl* c = control();
  auto head = word(c->head);
  auto tail = word(c->tail);
  uint64_t first = head.load(std::memory_order_relaxed);
  for (uint32_t spins = 0;; ++spins) {
    int64_t err = word(c->error).load(std::memory_order_acquire);
    if (err != 0)
      WEFT_FAIL(static_cast<int>(err), "the proxy has failed (status %lld): see its error",
                static_cast<long long>(err));
    // Acquire on tail: the proxy's copies out of the slots we are about to reuse happen before
    // our writes into them.
    if (first + n - tail.load(std::memory_order_acquire) <= capacity_) {
      if (head.compare_exchange_weak(first, first + n, std::memory_order_relaxed)) break;
      continue;  // another producer moved head; `first` now holds its value
    }
    if (Clock::now() >= deadline)
      WEFT_FAIL(WEFT_E_TIMEOUT,
                "the command FIFO stayed full (%u slots, %llu consumed): the proxy is stalled or "
                "paused",
                capacity_, static_cast<unsigned long long>(tail.load()));
    // Full: the proxy frees slots at network speed, so yield first, then sleep briefly.
    if (spins < 64) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
    first = head.load(std::memory_order_relaxed);
  }
  Command* s = slots();
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t t = first + i;
    Command& slot = s[t & (capacity_ - 1)];
    const Command& src = commands[i];
    // Body first (bytes 8..63), header last with release: the consumer's acquire load of the
    // header makes the whole body visible.
    std::memcpy(reinterpret_cast<char*>(&slot) + 8, reinterpret_cast<const char*>(&src) + 8,
                sizeof(Command) - 8);
    word(slot.header).store(command_header(t, header_opcode(src.header)), std::memory_order_release);
  }
  return first;
}

uint32_t CommandFifo::peek(Command* out, uint32_t max) {
  Command* s = slots();
  uint32_t n = 0;
  while (n < max) {
    uint64_t t = next_ + n;
    Command& slot = s[t & (capacity_ - 1)];
    uint64_t h = word(slot.header).load(std::memory_order_acquire);
    if (!header_commits(h, t)) break;
    std::memcpy(&out[n], &slot, sizeof(Command));
    out[n].header = h;
    ++n;
  }
  return n;
}

void CommandFifo::release(uint32_t n) {
  next_ += n;
  word(control()->tail).store(next_, std::memory_order_release);
}

void CommandFifo::publish_completed(uint64_t completed) {
  word(control()->completed).store(completed, std::memory_order_release);
}

void CommandFifo::publish_error(int status) {
  int64_t expected = 0;
  word(control()->error).compare_exchange_strong(expected, status, std::memory_order_release);
}


uint64_t CommandFifo::claimed() const { return word(control()->head).load(std::memory_order_relaxed); }

}  // namespace weft::proxy
