// transport.hpp — the small interface the proxy drives: one endpoint per rank, registered memory
// regions, one-sided writes and ordered signals, polled completions. The libfabric implementation
// is fabric_transport.hpp (fabric_endpoint.cpp, fabric_writes.cpp); a native libibverbs RC transport can sit behind the same interface.
//
// Addressing. Ranks are 0..world_size-1. A region is a block of registered memory, identified by a
// small index that is the same on every rank when ranks register collectively in the same order.
// Region 0 is the transport's own control region (barrier words, signal sources); user regions
// start at 1. Remote bytes are named (peer, region, offset).
//
// Ordering contract (what the proxy relies on):
//   - write(): the bytes land at the peer some time before the op's completion is reported.
//   - signal(): an 8-byte store of `value` into the peer's signal word that becomes visible only
//     after (a) every write() to that peer submitted before it has landed, and (b) any earlier
//     signal to the same word. Values only grow: when several signals to one word are pending,
//     the largest is stored and all of them complete together.
//   - Completions come back through poll() as the tokens passed in, in any order.
//   - Every op completes, fails, or times out (TransportOptions::timeout_ms): poll() throws
//     weft::Error with WEFT_E_PEER / WEFT_E_TIMEOUT / WEFT_E_TRANSPORT naming the peer.
//
// Threading: one thread at a time. The proxy thread owns the transport while it runs; other calls
// (register, info) take the same lock (lock()).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace weft {

struct TransportOptions {
  int rank = 0;
  int world_size = 1;
  int device = -1;           // GPU whose memory may be registered (FI_HMEM); -1: host memory only
  bool same_host = false;    // every rank is on this host: the shm provider qualifies
  uint32_t timeout_ms = 30000;
  std::string provider;      // "" = automatic
};

struct TransportStats {
  uint64_t writes = 0;         // provider write ops (chunks) submitted for data
  uint64_t bytes = 0;          // data bytes submitted
  uint64_t signals = 0;        // signals requested
  uint64_t signal_writes = 0;  // signal writes posted (fewer than signals when coalesced)
};

struct RemoteRegion {
  uint64_t addr = 0;   // what the peer's provider wants as the target address of byte 0
  uint64_t bytes = 0;
  uint64_t key = 0;
  bool valid = false;
};

class Transport {
 public:
  virtual ~Transport() = default;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const TransportOptions& options() const { return options_; }
  std::recursive_mutex& lock() { return mu_; }

  // {"provider": ..., ...}: what was chosen and why, for logs and `weft info`.
  virtual std::string info_json() const = 0;

  // This rank's endpoint address (and its control region), to be exchanged with every rank.
  virtual const std::vector<uint8_t>& local_address() const = 0;
  // Every rank's address in rank order (this rank's included).
  virtual void connect(const std::vector<std::vector<uint8_t>>& addresses) = 0;
  virtual bool connected() const = 0;

  // device < 0: host memory; otherwise memory of that GPU (FI_HMEM; UNSUPPORTED without it).
  virtual int register_region(void* base, uint64_t bytes, int device) = 0;
  virtual void deregister_region(int region) = 0;
  virtual const std::vector<uint8_t>& region_descriptor(int region) const = 0;
  // Every rank's descriptor of `region` in rank order.
  virtual void connect_region(int region, const std::vector<std::vector<uint8_t>>& descriptors) = 0;
  // Bounds for validation: local bytes of a region, remote bytes at a peer (0 when unknown).
  virtual uint64_t region_bytes(int region) const = 0;
  virtual uint64_t remote_region_bytes(int peer, int region) const = 0;

  virtual void write(int peer, int src_region, uint64_t src_offset, int dst_region,
                     uint64_t dst_offset, uint64_t bytes, uint64_t token) = 0;
  virtual void signal(int peer, int region, uint64_t offset, uint64_t value, uint64_t token) = 0;

  // The word at `offset` of this rank's control region that rank `peer` raises for barriers.
  static uint64_t barrier_word_offset(int peer) { return uint64_t(peer) * 8; }
  // Acquire load of a word in this rank's control region.
  virtual uint64_t load_control_word(uint64_t offset) const = 0;

  // Makes progress (posts queued ops, reaps completions, checks deadlines); appends the tokens of
  // ops that completed to `done`. Returns whether anything happened.
  virtual bool progress(std::vector<uint64_t>& done) = 0;
  // Blocks the calling thread for at most max_us, returning early when the provider has something
  // to progress (an incoming write landing in this rank's memory needs this rank's progress on
  // providers with manual progress). Call without holding lock().
  virtual void wait_for_activity(uint32_t max_us) = 0;
  virtual TransportStats stats() const = 0;

  // Fault injection for tests only (weft_testing_transport_drop_writes): from now on every `every`th
  // data write is reported delivered but never sent, so a test can prove that a receiver's checks
  // catch a signal that arrives without its data. 0 turns it off. Call under lock().
  virtual void drop_writes_for_testing(uint64_t every) = 0;

 protected:
  explicit Transport(TransportOptions o) : options_(std::move(o)) {}
  TransportOptions options_;
  std::recursive_mutex mu_;
};

// Opens the libfabric transport. Throws WEFT_E_UNSUPPORTED when this build has no libfabric
// headers, libfabric.so.1 is missing, or no provider qualifies (the message lists what exists).
std::unique_ptr<Transport> open_fabric_transport(const TransportOptions& options);

}  // namespace weft
