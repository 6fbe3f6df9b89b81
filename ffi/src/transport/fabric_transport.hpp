// fabric_transport.hpp — the Transport interface over libfabric RDM endpoints (FI_RMA): the state of
// one endpoint and how its writes and signals are ordered. fabric_endpoint.cpp opens, connects and
// registers; fabric_writes.cpp posts writes and signals, reaps completions and fails cleanly.
//
// Provider choice (automatic): efa > verbs;ofi_rxm > shm (only when every rank is on this host, and
// libfabric >= 1.18) > tcp;ofi_rxm. WEFT_FABRIC_PROVIDER, or TransportOptions::provider, forces one
// by name. With a GPU, a provider offering FI_HMEM is asked for first.
//
// How a signal is ordered after its data. Every write is posted with FI_DELIVERY_COMPLETE: its
// completion means the bytes are visible in the target's memory, not merely sent. A signal to
// peer p is an 8-byte write posted only once every data write to p submitted before it has
// completed (verbs and efa also qualify without FI_DELIVERY_COMPLETE: their write completion
// comes from the target NIC's acknowledgement). This is the one scheme that is correct on all
// four providers:
//   - efa (SRD) delivers RMA writes out of order, so "post the signal after the data" alone
//     would let the flag overtake its data; only the data's completion proves arrival.
//   - fi_writemsg(FI_FENCE) is not offered by tcp;ofi_rxm or shm (caps lack FI_FENCE).
//   - write-with-immediate (FI_REMOTE_CQ_DATA) needs the target to consume a receive completion
//     and store the flag itself: it adds a CPU step at the target and a receive queue to size.
// Its cost is one round trip between a burst of data and its signal. Signals to one word are
// coalesced (one in flight per word, the newest value next), so a stream of put+signal commands
// is not limited to one signal per round trip.
//
// drop_writes_for_testing(N) (weft_testing_transport_drop_writes, tests only) reports every Nth
// data write as delivered without sending it, so that tests can show their ordering checks do catch
// a signal that overtakes its data.
//
// Progress is driven by the caller (the proxy thread) through progress(): rxm's data progress is
// manual, so incoming writes land only while the target's proxy polls its CQ too.
#pragma once

#include "transport/libfabric.hpp"  // defines WEFT_HAVE_FABRIC_HEADERS where rdma/fabric.h is found

#ifdef WEFT_HAVE_FABRIC_HEADERS

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "status.hpp"
#include "transport/host_memory.hpp"
#include "transport/transport.hpp"

namespace weft::fabric_transport {

using Clock = std::chrono::steady_clock;
using fabric::api;
using fabric::error_text;
using fabric::kApiVersion;
using fabric::Provider;
using fabric::rdm_rma_providers;

constexpr uint32_t kSignalSlots = 4096;              // 8-byte signal sources in flight at once
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;    // verbs caps one message at 2^31 - 1
constexpr char kAddressMagic[8] = {'w', 'e', 'f', 't', 'a', 'd', 'r', '1'};
constexpr char kRegionMagic[8] = {'w', 'e', 'f', 't', 'r', 'e', 'g', '1'};

// Providers whose plain (transmit) completion of an RMA write already means the target acked the
// data into memory, for when FI_DELIVERY_COMPLETE cannot be requested: RC (verbs) and SRD (efa)
// acknowledge a write only after the remote NIC has placed it.
inline bool completion_implies_delivery(const std::string& provider) {
  return provider.rfind("verbs", 0) == 0 || provider.rfind("efa", 0) == 0;
}

#define FI_CALL(call, what)                                         \
  do {                                                              \
    long rc_ = static_cast<long>(call);                             \
    if (rc_ != 0) WEFT_FAIL(WEFT_E_TRANSPORT, "%s", error_text(what, rc_).c_str()); \
  } while (0)

struct AddressHeader {
  char magic[8];
  char provider[48];
  int32_t rank;
  uint32_t addrlen;
  uint64_t control_addr;
  uint64_t control_bytes;
  uint64_t control_key;
};

struct RegionDescriptor {
  char magic[8];
  int32_t rank;
  int32_t region;
  uint64_t addr;
  uint64_t bytes;
  uint64_t key;
};

struct Region {
  void* base = nullptr;
  uint64_t bytes = 0;
  int device = -1;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  std::vector<uint8_t> descriptor;
  std::vector<RemoteRegion> remote;  // by rank
};

// A completion handle for a caller's token: a write split into chunks completes with its last.
struct Request {
  uint64_t token;
  uint32_t remaining;
};

struct Op {
  fi_context2 ctx;  // first: the provider's scratch space (FI_CONTEXT2 mode); &op == &op.ctx
  enum Kind : uint8_t { kData, kSignal } kind = kData;
  bool live = false;
  bool posted = false;
  int peer = 0;
  uint64_t data_seq = 0;  // kData: position among the data writes to `peer`
  Request* request = nullptr;
  uint64_t word = 0;      // kSignal: region << 48 | offset
  uint32_t slot = 0;      // kSignal: source slot in the control region
  void* local = nullptr;
  void* desc = nullptr;
  uint64_t bytes = 0;
  uint64_t remote_addr = 0;
  uint64_t key = 0;
  Clock::time_point submitted;
};

struct PendingSignal {
  uint64_t after_data;  // data writes to the peer submitted before this signal
  int region;
  uint64_t offset;
  uint64_t value;
  uint64_t token;
};

struct WordState {
  bool in_flight = false;
  uint64_t in_flight_value = 0;
  std::vector<uint64_t> in_flight_tokens;
  bool has_next = false;
  uint64_t next_value = 0;
  std::vector<uint64_t> next_tokens;
};

struct Peer {
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint64_t data_submitted = 0;
  uint64_t data_delivered = 0;        // every data write with seq < this has completed
  std::set<uint64_t> delivered_ahead;  // completed seqs above the watermark (out-of-order providers)
  std::deque<PendingSignal> signals;
  std::unordered_map<uint64_t, WordState> words;
};

inline uint64_t word_key(int region, uint64_t offset) { return (uint64_t(region) << 48) | offset; }

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(const TransportOptions& o);
  ~FabricTransport() override;
  std::string info_json() const override { return info_json_; }
  const std::vector<uint8_t>& local_address() const override { return address_; }
  bool connected() const override { return connected_; }
  void connect(const std::vector<std::vector<uint8_t>>& addresses) override;
  int register_region(void* base, uint64_t bytes, int device) override;
  void deregister_region(int region) override;
  const std::vector<uint8_t>& region_descriptor(int region) const override;
  void connect_region(int region, const std::vector<std::vector<uint8_t>>& descriptors) override;
  uint64_t region_bytes(int region) const override;
  uint64_t remote_region_bytes(int peer, int region) const override;
  void write(int peer, int src_region, uint64_t src_offset, int dst_region, uint64_t dst_offset, uint64_t bytes,
             uint64_t token) override;
  void signal(int peer, int region, uint64_t offset, uint64_t value, uint64_t token) override;
  uint64_t load_control_word(uint64_t offset) const override;
  bool progress(std::vector<uint64_t>& done) override;
  void wait_for_activity(uint32_t max_us) override;
  void drop_writes_for_testing(uint64_t every) override;
  TransportStats stats() const override;

 private:
  void open();
  // Asks for `name` with the capabilities the proxy needs; keeps the first match.
  bool select(const std::string& name, bool hmem, bool delivery_complete);
  static std::string available_providers();
  void close();
  void register_memory(Region& r, void* base, uint64_t bytes, int device);
  void close_region(Region& r);
  // The target address the peer's provider expects for byte 0 of a region.
  uint64_t remote_base(void* base) const;
  Region& user_region(int region);
  const RemoteRegion& remote_region(int peer, int region);
  Op& new_op();
  void free_op(Op& op);
  Request* new_request(uint64_t token, uint32_t chunks);
  // Posts queued ops in order until the provider pushes back (-FI_EAGAIN: its queue is full until
  // completions are reaped; progress() retries). Returns whether any was posted. Not re-entered:
  // completions reaped elsewhere only queue more ops.
  bool post_queued();
  void complete(Op& op);
  // Moves signals whose data has landed to their word's state; posts where the word is idle.
  void release_signals(int peer);
  void post_signal(int peer, uint64_t key);
  [[noreturn]] void fail(int code, const std::string& message);
  void check_usable();
  [[noreturn]] void fail_from_cq();
  void check_deadlines();

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::string provider_;
  std::string info_json_;
  bool hmem_ = false;
  bool delivery_complete_ = false;
  int mr_mode_ = 0;
  uint64_t max_chunk_ = kMaxChunk;
  size_t addrlen_ = 0;
  std::vector<uint8_t> address_;
  bool connected_ = false;
  uint64_t next_key_ = 1;
  int wait_fd_ = -1;  // the CQ's wait object, when the provider offers one

  HostMemory control_;
  std::vector<Region> regions_;  // [0] = control region
  std::vector<Peer> peers_;
  std::vector<uint32_t> free_slots_;
  std::deque<std::pair<int, uint64_t>> slot_waiters_;  // (peer, word) waiting for a source slot
  bool posting_ = false;
  uint64_t fault_drop_write_ = 0;  // drop every Nth data write (drop_writes_for_testing; tests only)
  uint64_t fault_writes_ = 0;

  std::deque<Op> ops_;  // stable addresses: the provider holds &op.ctx until completion
  std::vector<Op*> free_ops_;
  size_t live_ops_ = 0;
  std::set<Request*> requests_;
  std::deque<Op*> queue_;  // submitted, not yet accepted by the provider
  std::vector<uint64_t> done_now_;

  int failed_code_ = 0;
  std::string failed_message_;
  Clock::time_point last_deadline_check_{};

  uint64_t stats_writes_ = 0, stats_bytes_ = 0, stats_signals_ = 0, stats_signal_writes_ = 0;
};

}  // namespace weft::fabric_transport

#endif  // WEFT_HAVE_FABRIC_HEADERS
