// fabric_writes.cpp — a libfabric transport's traffic: writes split into chunks, signals ordered after
// their data and coalesced per word, completions, deadlines and failure (fabric_transport.hpp says how
// a signal is ordered after its data, and why).
#include "transport/libfabric.hpp"  // defines WEFT_HAVE_FABRIC_HEADERS where rdma/fabric.h is found

#ifdef WEFT_HAVE_FABRIC_HEADERS

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport/fabric_transport.hpp"
#include "transport/live_counters.hpp"

namespace weft::fabric_transport {

void FabricTransport::write(int peer, int src_region, uint64_t src_offset, int dst_region, uint64_t dst_offset,
                            uint64_t bytes, uint64_t token) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  check_usable();
  Region& src = user_region(src_region);
  const RemoteRegion& dst = remote_region(peer, dst_region);
  WEFT_REQUIRE(src_offset <= src.bytes && bytes <= src.bytes - src_offset,
               "source [%llu, +%llu) is outside region %d (%llu bytes)",
               (unsigned long long)src_offset, (unsigned long long)bytes, src_region,
               (unsigned long long)src.bytes);
  WEFT_REQUIRE(dst_offset <= dst.bytes && bytes <= dst.bytes - dst_offset,
               "destination [%llu, +%llu) is outside region %d of rank %d (%llu bytes)",
               (unsigned long long)dst_offset, (unsigned long long)bytes, dst_region, peer,
               (unsigned long long)dst.bytes);
  if (bytes == 0) {
    done_now_.push_back(token);
    return;
  }
  uint64_t chunks = (bytes + max_chunk_ - 1) / max_chunk_;
  Request* req = new_request(token, static_cast<uint32_t>(chunks));
  Peer& p = peers_[peer];
  for (uint64_t off = 0; off < bytes; off += max_chunk_) {
    Op& op = new_op();
    op.kind = Op::kData;
    op.peer = peer;
    op.data_seq = p.data_submitted++;
    op.request = req;
    op.local = static_cast<char*>(src.base) + src_offset + off;
    op.desc = src.desc;
    op.bytes = std::min(max_chunk_, bytes - off);
    op.remote_addr = dst.addr + dst_offset + off;
    op.key = dst.key;
    queue_.push_back(&op);
  }
  stats_writes_ += chunks;
  stats_bytes_ += bytes;
  post_queued();
}

void FabricTransport::signal(int peer, int region, uint64_t offset, uint64_t value, uint64_t token) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  check_usable();
  const RemoteRegion& dst = remote_region(peer, region);
  WEFT_REQUIRE(offset % 8 == 0 && offset <= dst.bytes && dst.bytes - offset >= 8,
               "signal word at offset %llu of region %d of rank %d must be 8-byte aligned and "
               "inside the region (%llu bytes)",
               (unsigned long long)offset, region, peer, (unsigned long long)dst.bytes);
  Peer& p = peers_[peer];
  p.signals.push_back(PendingSignal{p.data_submitted, region, offset, value, token});
  ++stats_signals_;
  release_signals(peer);
  post_queued();
}

uint64_t FabricTransport::load_control_word(uint64_t offset) const {
  auto* w = reinterpret_cast<uint64_t*>(static_cast<char*>(control_.host()) + offset);
  return std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire);
}

bool FabricTransport::progress(std::vector<uint64_t>& done) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  check_usable();
  bool any = !done_now_.empty();
  done.insert(done.end(), done_now_.begin(), done_now_.end());
  done_now_.clear();
  fi_cq_entry entries[64];
  for (;;) {
    ssize_t n = fi_cq_read(cq_, entries, 64);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) fail_from_cq();
    if (n < 0) fail(WEFT_E_TRANSPORT, error_text("fi_cq_read", n));
    any = true;
    for (ssize_t i = 0; i < n; ++i) complete(*static_cast<Op*>(entries[i].op_context));
    if (n < 64) break;
  }
  any |= post_queued();
  done.insert(done.end(), done_now_.begin(), done_now_.end());
  done_now_.clear();
  check_deadlines();
  return any;
}

void FabricTransport::wait_for_activity(uint32_t max_us) {
  if (wait_fd_ >= 0) {
    fid* fids[] = {&cq_->fid};
    int ready;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (!ep_ || failed_code_) return;
      // fi_trywait says whether blocking on the fd is safe (nothing left to progress first).
      ready = fi_trywait(fabric_, fids, 1);
    }
    if (ready != FI_SUCCESS) return;
    pollfd p{wait_fd_, POLLIN, 0};
    timespec t{0, static_cast<long>(max_us) * 1000};
    (void)ppoll(&p, 1, &t, nullptr);
    return;
  }
  timespec t{0, static_cast<long>(max_us) * 1000};
  nanosleep(&t, nullptr);
}

void FabricTransport::drop_writes_for_testing(uint64_t every) {
  fault_drop_write_ = every;
  fault_writes_ = 0;
}

TransportStats FabricTransport::stats() const {
  return TransportStats{stats_writes_, stats_bytes_, stats_signals_, stats_signal_writes_};
}

Op& FabricTransport::new_op() {
  Op* op;
  if (!free_ops_.empty()) {
    op = free_ops_.back();
    free_ops_.pop_back();
  } else {
    ops_.emplace_back();
    op = &ops_.back();
  }
  *op = Op{};
  op->live = true;
  op->submitted = Clock::now();
  ++live_ops_;
  return *op;
}

void FabricTransport::free_op(Op& op) {
  op.live = false;
  --live_ops_;
  free_ops_.push_back(&op);
}

Request* FabricTransport::new_request(uint64_t token, uint32_t chunks) {
  Request* r = new Request{token, chunks};
  requests_.insert(r);
  return r;
}

bool FabricTransport::post_queued() {
  if (posting_) return false;
  posting_ = true;
  bool any = false;
  while (!queue_.empty()) {
    Op& op = *queue_.front();
    iovec iov{op.local, op.bytes};
    fi_rma_iov rma{op.remote_addr, op.bytes, op.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &op.desc;
    msg.iov_count = 1;
    msg.addr = peers_[op.peer].addr;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = &op.ctx;
    uint64_t flags = FI_COMPLETION | (delivery_complete_ ? FI_DELIVERY_COMPLETE : 0);
    if (fault_drop_write_ && op.kind == Op::kData &&
        ++fault_writes_ % fault_drop_write_ == 0) {
      // Fault injection: the write is reported delivered but never sent (tests prove that the
      // receiver's checks catch a signal without its data).
      queue_.pop_front();
      complete(op);
      any = true;
      continue;
    }
    ssize_t rc = fi_writemsg(ep_, &msg, flags);
    if (rc == -FI_EAGAIN) break;
    if (rc != 0) {
      posting_ = false;
      fail(WEFT_E_TRANSPORT, format("rank %d -> rank %d: %s", rank(), op.peer,
                                    error_text("fi_writemsg", rc).c_str()));
    }
    op.posted = true;
    queue_.pop_front();
    any = true;
  }
  posting_ = false;
  return any;
}

void FabricTransport::complete(Op& op) {
  Peer& p = peers_[op.peer];
  if (op.kind == Op::kData) {
    if (op.data_seq == p.data_delivered) {
      ++p.data_delivered;
      while (!p.delivered_ahead.empty() && *p.delivered_ahead.begin() == p.data_delivered) {
        p.delivered_ahead.erase(p.delivered_ahead.begin());
        ++p.data_delivered;
      }
    } else {
      p.delivered_ahead.insert(op.data_seq);
    }
    Request* req = op.request;
    if (--req->remaining == 0) {
      done_now_.push_back(req->token);
      requests_.erase(req);
      delete req;
    }
    int peer = op.peer;
    free_op(op);
    release_signals(peer);
  } else {
    int peer = op.peer;
    uint64_t word = op.word;
    free_slots_.push_back(op.slot);
    free_op(op);
    if (!slot_waiters_.empty()) {
      auto [wp, wk] = slot_waiters_.front();
      slot_waiters_.pop_front();
      post_signal(wp, wk);
    }
    WordState& w = p.words[word];
    for (uint64_t t : w.in_flight_tokens) done_now_.push_back(t);
    w.in_flight_tokens.clear();
    w.in_flight = false;
    if (w.has_next) {
      if (w.next_value <= w.in_flight_value) {
        for (uint64_t t : w.next_tokens) done_now_.push_back(t);
        w.next_tokens.clear();
        w.has_next = false;
      } else {
        post_signal(peer, word);
      }
    }
    if (!w.in_flight && !w.has_next) p.words.erase(word);
  }
}

void FabricTransport::release_signals(int peer) {
  Peer& p = peers_[peer];
  while (!p.signals.empty() && p.signals.front().after_data <= p.data_delivered) {
    const PendingSignal& s = p.signals.front();
    uint64_t key = word_key(s.region, s.offset);
    WordState& w = p.words[key];
    if (!w.has_next) {
      w.has_next = true;
      w.next_value = s.value;
    } else {
      w.next_value = std::max(w.next_value, s.value);
    }
    w.next_tokens.push_back(s.token);
    p.signals.pop_front();
    if (!w.in_flight) post_signal(peer, key);
  }
}

void FabricTransport::post_signal(int peer, uint64_t key) {
  WordState& w = peers_[peer].words[key];
  if (w.in_flight || !w.has_next) return;
  if (free_slots_.empty()) {
    slot_waiters_.emplace_back(peer, key);  // posted when a signal completes and frees its slot
    return;
  }
  int region = static_cast<int>(key >> 48);
  uint64_t offset = key & ((uint64_t{1} << 48) - 1);
  const RemoteRegion& dst = remote_region(peer, region);
  uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  auto* src = reinterpret_cast<uint64_t*>(static_cast<char*>(control_.host()) +
                                          uint64_t(world_size()) * 8 + uint64_t(slot) * 8);
  *src = w.next_value;
  Op& op = new_op();
  op.kind = Op::kSignal;
  op.peer = peer;
  op.word = key;
  op.slot = slot;
  op.local = src;
  op.desc = regions_[0].desc;
  op.bytes = 8;
  op.remote_addr = dst.addr + offset;
  op.key = dst.key;
  w.in_flight = true;
  w.in_flight_value = w.next_value;
  w.in_flight_tokens.swap(w.next_tokens);
  w.next_tokens.clear();
  w.has_next = false;
  ++stats_signal_writes_;
  queue_.push_back(&op);
}

void FabricTransport::fail(int code, const std::string& message) {
  failed_code_ = code;
  failed_message_ = message;
  WEFT_FAIL(code, "%s", message.c_str());
}

void FabricTransport::check_usable() {
  if (failed_code_) WEFT_FAIL(failed_code_, "%s", failed_message_.c_str());
  WEFT_REQUIRE(ep_, "the transport is closed");
}

void FabricTransport::fail_from_cq() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(cq_, &err, 0);
  if (rc < 0) fail(WEFT_E_TRANSPORT, error_text("fi_cq_readerr", rc));
  const Op* op = static_cast<const Op*>(err.op_context);
  char detail[256] = {};
  const char* prov = fi_cq_strerror(cq_, err.prov_errno, err.err_data, detail, sizeof detail);
  int code = WEFT_E_TRANSPORT;
  switch (err.err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ETIMEDOUT:
    case FI_EIO:
    case FI_ESHUTDOWN:
      code = WEFT_E_PEER;
      break;
    default:
      break;
  }
  fail(code, format("rank %d -> rank %d: a %s of %llu bytes failed: %s (%s)", rank(),
                    op ? op->peer : -1, op && op->kind == Op::kSignal ? "signal" : "write",
                    op ? (unsigned long long)op->bytes : 0ull, api().strerror(err.err),
                    prov ? prov : ""));
}

void FabricTransport::check_deadlines() {
  auto now = Clock::now();
  if (now - last_deadline_check_ < std::chrono::milliseconds(50)) return;
  last_deadline_check_ = now;
  auto limit = std::chrono::milliseconds(options_.timeout_ms);
  for (const Op& op : ops_) {
    if (!op.live || now - op.submitted <= limit) continue;
    size_t posted = 0;
    for (const Op& o : ops_) posted += o.live && o.posted;
    fail(WEFT_E_TIMEOUT,
         format("rank %d -> rank %d: a %s of %llu bytes did not complete within %u ms (%s; %zu "
                "ops posted, %zu waiting for the provider): the peer may be gone or not making "
                "progress",
                rank(), op.peer, op.kind == Op::kSignal ? "signal" : "write",
                (unsigned long long)op.bytes, options_.timeout_ms,
                op.posted ? "posted" : "never accepted by the provider", posted, queue_.size()));
  }
}

}  // namespace weft::fabric_transport

#endif  // WEFT_HAVE_FABRIC_HEADERS
