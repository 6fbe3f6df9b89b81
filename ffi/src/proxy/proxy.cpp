#include "proxy/proxy.hpp"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "proxy/cpu_affinity.hpp"
#include "info_log.hpp"
#include "status.hpp"
#include "transport/live_counters.hpp"

namespace weft::proxy {

namespace {

// Tokens handed to the transport: lane in the top byte, ticket below (tickets stay < 2^56).
constexpr uint64_t kNoToken = ~uint64_t{0};
uint64_t token(size_t lane, uint64_t ticket) { return (uint64_t(lane) << 56) | ticket; }
size_t token_lane(uint64_t t) { return static_cast<size_t>(t >> 56); }
uint64_t token_ticket(uint64_t t) { return t & ((uint64_t{1} << 56) - 1); }

}  // namespace

Proxy::Proxy(Transport& transport, const ProxyOptions& options)
    : transport_(transport), options_(options) {
  WEFT_REQUIRE(transport.connected(), "the transport must be connected before its proxy starts");
  WEFT_REQUIRE(options.batch >= 1 && options.batch <= 4096, "batch must be in [1, 4096] (got %u)",
               options.batch);
  WEFT_REQUIRE(options.max_inflight >= 1 && options.max_inflight <= (1u << 20),
               "max_inflight must be in [1, 1048576] (got %u)", options.max_inflight);
  WEFT_REQUIRE(options.timeout_ms > 0, "timeout_ms must be > 0");
  auto make_lane = [&](CommandFifo::Producers producers) {
    auto lane = std::make_unique<Lane>();
    lane->fifo = std::make_unique<CommandFifo>(options.fifo_slots, producers, options.device);
    lane->done.assign(options.max_inflight, 0);
    lanes_.push_back(std::move(lane));
  };
  make_lane(CommandFifo::Producers::kHost);
  if (options.device >= 0) make_lane(CommandFifo::Producers::kDevice);
  batch_.resize(options.batch);
  thread_ = std::thread([this] { run(); });
}

Proxy::~Proxy() { stop(); }

void Proxy::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  thread_.join();
  // Device producers are invisible from here (their counter is in device memory): their lane's
  // error word is set regardless, so a kernel still pushing gives up instead of waiting.
  for (auto& lane : lanes_)
    if (lane->fifo->producers() == CommandFifo::Producers::kDevice)
      lane->fifo->publish_error(WEFT_E_TRANSPORT);
  for (auto& lane : lanes_)
    if (lane->completed < lane->dispatched || lane->fifo->claimed() > lane->dispatched)
      record_error(WEFT_E_TRANSPORT,
                   format("the proxy was stopped with %llu commands incomplete",
                          (unsigned long long)(std::max(lane->fifo->claimed(), lane->dispatched) -
                                               lane->completed)));
}

std::string Proxy::error_message() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_message_;
}

ProxyStats Proxy::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  ProxyStats s = stats_;
  s.pushed = lanes_[0]->fifo->claimed();
  return s;
}

void Proxy::record_error(int code, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_code_.load() != 0) return;
    error_message_ = message;
    error_code_.store(code ? code : WEFT_E_INTERNAL, std::memory_order_release);
  }
  for (auto& lane : lanes_) lane->fifo->publish_error(error_code_.load());
  if (info_log_enabled())
    std::fprintf(stderr, "weft: rank %d proxy failed (%d): %s\n", transport_.rank(), code,
                 message.c_str());
}

void Proxy::validate(const Command& c, const char* kind, uint64_t index) const {
  // The command's name for a message, formatted only when a check fails (the proxy thread validates
  // every device command it takes).
  const auto where = [&] {
    return index == kUnnumbered ? std::string(kind) : weft::format("%s %llu", kind, (unsigned long long)index);
  };
  uint8_t op = header_opcode(c.header);
  WEFT_REQUIRE(op >= kOpPut && op <= kOpLast, "%s: opcode %u is not a proxy command", where().c_str(), op);
  if (op == kOpFence || op == kOpBarrier) return;
  WEFT_REQUIRE(c.peer < uint32_t(transport_.world_size()), "%s: peer %u is not a rank (world size %d)",
               where().c_str(), c.peer, transport_.world_size());
  bool signals = op == kOpSignal || (c.flags & kFlagSignal);
  if (op == kOpPut) {
    WEFT_REQUIRE(c.src_region >= 1 && c.dst_region >= 1,
                 "%s: src_region and dst_region must be user regions (>= 1; region 0 is the "
                 "transport's own)",
                 where().c_str());
    uint64_t src = transport_.region_bytes(c.src_region);
    uint64_t dst = transport_.remote_region_bytes(c.peer, c.dst_region);
    WEFT_REQUIRE(src > 0, "%s: src_region %u is not registered", where().c_str(), c.src_region);
    WEFT_REQUIRE(dst > 0, "%s: dst_region %u has no descriptor for rank %u", where().c_str(), c.dst_region,
                 c.peer);
    WEFT_REQUIRE(c.src_offset <= src && c.bytes <= src - c.src_offset,
                 "%s: source bytes [%llu, +%llu) are outside src_region %u (%llu bytes)", where().c_str(),
                 (unsigned long long)c.src_offset, (unsigned long long)c.bytes, c.src_region,
                 (unsigned long long)src);
    WEFT_REQUIRE(c.dst_offset <= dst && c.bytes <= dst - c.dst_offset,
                 "%s: destination bytes [%llu, +%llu) are outside dst_region %u of rank %u (%llu "
                 "bytes)",
                 where().c_str(), (unsigned long long)c.dst_offset, (unsigned long long)c.bytes, c.dst_region,
                 c.peer, (unsigned long long)dst);
  }
  if (signals) {
    WEFT_REQUIRE(c.signal_region >= 1, "%s: signal_region must be a user region (>= 1)", where().c_str());
    uint64_t bytes = transport_.remote_region_bytes(c.peer, c.signal_region);
    WEFT_REQUIRE(bytes > 0, "%s: signal_region %u has no descriptor for rank %u", where().c_str(),
                 c.signal_region, c.peer);
    WEFT_REQUIRE(c.signal_offset % 8 == 0 && c.signal_offset <= bytes && bytes - c.signal_offset >= 8,
                 "%s: signal_offset %llu must be 8-byte aligned and inside signal_region %u (%llu "
                 "bytes)",
                 where().c_str(), (unsigned long long)c.signal_offset, c.signal_region,
                 (unsigned long long)bytes);
  }
}

uint64_t Proxy::push(const Command* commands, uint32_t n, uint32_t timeout_ms) {
  WEFT_REQUIRE(commands && n >= 1, "push needs at least one command");
  if (int code = error_code())
    WEFT_FAIL(code, "the proxy has failed: %s", error_message().c_str());
  WEFT_REQUIRE(!stop_.load(), "the proxy is stopped");
  {
    std::lock_guard<std::recursive_mutex> lock(transport_.lock());
    for (uint32_t i = 0; i < n; ++i) validate(commands[i], "command", i);
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  try {
    return lanes_[0]->fifo->push(commands, n, deadline);
  } catch (const Error& e) {
    if (int code = error_code())
      WEFT_FAIL(code, "the proxy has failed: %s", error_message().c_str());
    throw;
  }
}

void Proxy::wait(uint64_t ticket, uint32_t timeout_ms) {
  CommandFifo& fifo = *lanes_[0]->fifo;
  WEFT_REQUIRE(ticket < fifo.claimed(), "ticket %llu has not been pushed (%llu so far)",
               (unsigned long long)ticket, (unsigned long long)fifo.claimed());
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::atomic_ref<uint64_t> completed(fifo.control()->completed);
  for (uint32_t spins = 0;; ++spins) {
    if (completed.load(std::memory_order_acquire) > ticket) return;
    if (int code = error_code())
      WEFT_FAIL(code, "the proxy has failed: %s", error_message().c_str());
    if (Clock::now() >= deadline)
      WEFT_FAIL(WEFT_E_TIMEOUT, "command %llu did not complete within %u ms (%llu of %llu done)",
                (unsigned long long)ticket, timeout_ms,
                (unsigned long long)completed.load(), (unsigned long long)fifo.claimed());
    if (spins < 128) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void Proxy::run() {
  (void)pin_thread_near_device(options_.device);  // best effort; its description of the CPUs is unused
  live_counters().proxy_threads.fetch_add(1);
  // Idle backoff: spin while work arrives back to back, then yield, then sleep with a growing
  // period capped at 100 us: the bound on how late an idle proxy notices a new command. The sleep
  // is on the transport's wait object where it has one, so incoming writes (which need this
  // rank's progress) wake it at once. Timer slack 1 us: Linux's default 50 us would stretch every
  // short sleep.
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  uint32_t idle = 0;
  uint64_t sleep_us = 2;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool busy = false;
    try {
      busy = pass();
    } catch (const Error& e) {
      record_error(e.code, e.message);
    } catch (const std::exception& e) {
      record_error(WEFT_E_INTERNAL, std::string("internal: ") + e.what());
    }
    if (error_code()) break;
    if (busy) {
      idle = 0;
      sleep_us = 2;
      continue;
    }
    ++idle;
    if (idle < 64) continue;
    if (idle < 256) {
      sched_yield();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.idle_sleeps;
    }
    transport_.wait_for_activity(static_cast<uint32_t>(sleep_us));
    sleep_us = std::min<uint64_t>(sleep_us * 2, 100);
  }
  live_counters().proxy_threads.fetch_sub(1);
  exited_.store(true);
}

bool Proxy::pass() {
  std::lock_guard<std::recursive_mutex> lock(transport_.lock());
  bool busy = false;
  if (!paused_.load(std::memory_order_relaxed))
    for (size_t l = 0; l < lanes_.size(); ++l) busy |= drain(l);
  done_tokens_.clear();
  busy |= transport_.progress(done_tokens_);
  for (uint64_t t : done_tokens_)
    if (t != kNoToken) complete(token_lane(t), token_ticket(t));
  for (size_t l = 0; l < lanes_.size(); ++l) busy |= advance_blocked(l);
  if (busy) {
    std::lock_guard<std::mutex> s(stats_mu_);
    ++stats_.passes;
  }
  return busy;
}

bool Proxy::drain(size_t l) {
  Lane& lane = *lanes_[l];
  if (lane.blocked) return false;
  uint64_t inflight = lane.dispatched - lane.completed;
  uint32_t room = static_cast<uint32_t>(
      std::min<uint64_t>(options_.batch, options_.max_inflight - inflight));
  if (room == 0) return false;
  uint32_t n = lane.fifo->peek(batch_.data(), room);
  if (n == 0) return false;
  uint32_t taken = 0;
  uint64_t puts = 0, signals = 0, fences = 0, barriers = 0;
  for (; taken < n; ++taken) {
    const Command& c = batch_[taken];
    uint64_t ticket = lane.dispatched;
    uint8_t op = header_opcode(c.header);
    if (lane.fifo->producers() == CommandFifo::Producers::kDevice) validate(c, "device command", ticket);
    ++lane.dispatched;
    dispatch(l, c, ticket);
    puts += op == kOpPut;
    signals += op == kOpSignal || (op == kOpPut && (c.flags & kFlagSignal));
    fences += op == kOpFence;
    barriers += op == kOpBarrier;
    if (lane.blocked) {
      ++taken;
      break;  // nothing after a fence or barrier starts before it completes
    }
  }
  lane.fifo->release(taken);
  std::lock_guard<std::mutex> s(stats_mu_);
  stats_.consumed += taken;
  stats_.puts += puts;
  stats_.signals += signals;
  stats_.fences += fences;
  stats_.barriers += barriers;
  stats_.max_batch = std::max<uint64_t>(stats_.max_batch, taken);
  return true;
}

void Proxy::dispatch(size_t l, const Command& c, uint64_t ticket) {
  Lane& lane = *lanes_[l];
  switch (header_opcode(c.header)) {
    case kOpPut:
      if (c.flags & kFlagSignal) {
        transport_.write(int(c.peer), c.src_region, c.src_offset, c.dst_region, c.dst_offset,
                         c.bytes, kNoToken);
        transport_.signal(int(c.peer), c.signal_region, c.signal_offset, c.signal_value,
                          token(l, ticket));
      } else {
        transport_.write(int(c.peer), c.src_region, c.src_offset, c.dst_region, c.dst_offset,
                         c.bytes, token(l, ticket));
      }
      break;
    case kOpSignal:
      transport_.signal(int(c.peer), c.signal_region, c.signal_offset, c.signal_value,
                        token(l, ticket));
      break;
    case kOpFence:
    case kOpBarrier:
      lane.blocked = true;
      lane.blocking_op = header_opcode(c.header);
      lane.barrier_started = false;
      break;
    default:
      WEFT_FAIL(WEFT_E_INVALID, "command %llu has opcode %u", (unsigned long long)ticket,
                header_opcode(c.header));
  }
}

// A fence or barrier at ticket `dispatched - 1` starts once everything before it is complete.
bool Proxy::advance_blocked(size_t l) {
  Lane& lane = *lanes_[l];
  if (!lane.blocked) return false;
  uint64_t ticket = lane.dispatched - 1;
  if (lane.completed < ticket) return false;
  if (lane.blocking_op == kOpFence) {
    lane.blocked = false;
    complete(l, ticket);
    return true;
  }
  int me = transport_.rank();
  if (!lane.barrier_started) {
    lane.barrier_started = true;
    lane.barrier_epoch = ++barriers_started_;
    lane.barrier_deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
    for (int p = 0; p < transport_.world_size(); ++p)
      if (p != me)
        transport_.signal(p, 0, Transport::barrier_word_offset(me), lane.barrier_epoch, kNoToken);
    return true;
  }
  std::string missing;
  for (int p = 0; p < transport_.world_size(); ++p)
    if (p != me && transport_.load_control_word(Transport::barrier_word_offset(p)) < lane.barrier_epoch)
      missing += (missing.empty() ? "" : ", ") + std::to_string(p);
  if (missing.empty()) {
    lane.blocked = false;
    complete(l, ticket);
    return true;
  }
  if (Clock::now() >= lane.barrier_deadline)
    WEFT_FAIL(WEFT_E_TIMEOUT, "rank %d: barrier %llu timed out after %u ms waiting for rank(s) %s",
              me, (unsigned long long)lane.barrier_epoch, options_.timeout_ms, missing.c_str());
  return false;
}

void Proxy::complete(size_t l, uint64_t ticket) {
  Lane& lane = *lanes_[l];
  size_t n = lane.done.size();
  lane.done[ticket % n] = 1;
  uint64_t before = lane.completed;
  while (lane.completed < lane.dispatched && lane.done[lane.completed % n]) {
    lane.done[lane.completed % n] = 0;
    ++lane.completed;
  }
  if (lane.completed != before) {
    lane.fifo->publish_completed(lane.completed);
    std::lock_guard<std::mutex> s(stats_mu_);
    stats_.completed += lane.completed - before;
  }
}

}  // namespace weft::proxy
