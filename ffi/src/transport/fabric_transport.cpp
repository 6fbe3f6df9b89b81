// fabric_transport.cpp — the Transport interface over libfabric RDM endpoints (FI_RMA).
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
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <unordered_map>

#include "status.hpp"
#include "transport/host_memory.hpp"
#include "transport/libfabric.hpp"
#include "transport/live_counters.hpp"
#include "transport/transport.hpp"

namespace weft {

#ifndef WEFT_HAVE_FABRIC_HEADERS

std::unique_ptr<Transport> open_fabric_transport(const TransportOptions&) {
  WEFT_FAIL(WEFT_E_UNSUPPORTED,
            "this libweft.so was built without libfabric headers (rdma/fabric.h): install "
            "libfabric-dev and rebuild to use the inter-node transport");
}

#else

namespace {

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
bool completion_implies_delivery(const std::string& provider) {
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

uint64_t word_key(int region, uint64_t offset) { return (uint64_t(region) << 48) | offset; }

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(const TransportOptions& o) : Transport(o) {
    try {
      open();
    } catch (...) {
      close();
      throw;
    }
    live_counters().transports.fetch_add(1);
  }

  ~FabricTransport() override {
    close();
    live_counters().transports.fetch_sub(1);
  }

  std::string info_json() const override { return info_json_; }
  const std::vector<uint8_t>& local_address() const override { return address_; }
  bool connected() const override { return connected_; }

  void connect(const std::vector<std::vector<uint8_t>>& addresses) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    WEFT_REQUIRE(!connected_, "the transport is connected already");
    WEFT_REQUIRE(int(addresses.size()) == world_size(),
                 "connect needs %d addresses (one per rank), got %zu", world_size(),
                 addresses.size());
    std::vector<uint8_t> raw;
    std::vector<RemoteRegion> control(world_size());
    for (int r = 0; r < world_size(); ++r) {
      const auto& a = addresses[r];
      AddressHeader h{};
      if (a.size() < sizeof h || std::memcmp(a.data(), kAddressMagic, 8) != 0)
        WEFT_FAIL(WEFT_E_INVALID, "address %d is not a weft transport address", r);
      std::memcpy(&h, a.data(), sizeof h);
      h.provider[sizeof h.provider - 1] = 0;
      if (provider_ != h.provider)
        WEFT_FAIL(WEFT_E_TRANSPORT,
                  "rank %d uses provider '%s' but rank %d uses '%s': every rank must pick the "
                  "same one (set WEFT_FABRIC_PROVIDER on all ranks)",
                  r, h.provider, rank(), provider_.c_str());
      if (h.rank != r) WEFT_FAIL(WEFT_E_INVALID, "address %d belongs to rank %d", r, h.rank);
      if (h.addrlen != addrlen_ || a.size() != sizeof h + h.addrlen)
        WEFT_FAIL(WEFT_E_INVALID, "address of rank %d has %u address bytes, expected %zu", r,
                  h.addrlen, addrlen_);
      raw.insert(raw.end(), a.begin() + sizeof h, a.end());
      control[r] = RemoteRegion{h.control_addr, h.control_bytes, h.control_key, true};
    }
    std::vector<fi_addr_t> out(world_size(), FI_ADDR_UNSPEC);
    int n = fi_av_insert(av_, raw.data(), world_size(), out.data(), 0, nullptr);
    if (n != world_size())
      WEFT_FAIL(WEFT_E_TRANSPORT, "fi_av_insert took %d of %d addresses", n, world_size());
    for (int r = 0; r < world_size(); ++r) peers_[r].addr = out[r];
    regions_[0].remote = control;
    connected_ = true;
  }

  int register_region(void* base, uint64_t bytes, int device) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    WEFT_REQUIRE(base && bytes > 0, "a region needs a base address and bytes > 0");
    WEFT_REQUIRE(regions_.size() < 255, "at most 254 regions can be registered at once");
    if (device >= 0 && !hmem_)
      WEFT_FAIL(WEFT_E_UNSUPPORTED,
                "provider %s cannot register GPU memory (no FI_HMEM): stage through pinned host "
                "memory instead",
                provider_.c_str());
    int index = 1;
    while (index < int(regions_.size()) && regions_[index].mr) ++index;
    if (index == int(regions_.size())) regions_.emplace_back();
    Region& r = regions_[index];
    r = Region{};
    register_memory(r, base, bytes, device);
    RegionDescriptor d{};
    std::memcpy(d.magic, kRegionMagic, 8);
    d.rank = rank();
    d.region = index;
    d.addr = remote_base(base);
    d.bytes = bytes;
    d.key = fi_mr_key(r.mr);
    r.descriptor.assign(reinterpret_cast<uint8_t*>(&d), reinterpret_cast<uint8_t*>(&d) + sizeof d);
    return index;
  }

  void deregister_region(int region) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Region& r = user_region(region);
    for (const Op& op : ops_)
      if (op.live && op.kind == Op::kData && op.local >= r.base &&
          static_cast<char*>(op.local) < static_cast<char*>(r.base) + r.bytes)
        WEFT_FAIL(WEFT_E_INVALID,
                  "region %d still has writes in flight: wait for them (proxy flush) first%s",
                  region, failed_code_ ? ", or close the failed transport, which releases it" : "");
    close_region(r);
  }

  const std::vector<uint8_t>& region_descriptor(int region) const override {
    WEFT_REQUIRE(region >= 1 && region < int(regions_.size()) && regions_[region].mr,
                 "region %d is not registered (user regions start at 1)", region);
    return regions_[region].descriptor;
  }

  void connect_region(int region, const std::vector<std::vector<uint8_t>>& descriptors) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Region& r = user_region(region);
    WEFT_REQUIRE(int(descriptors.size()) == world_size(),
                 "region %d needs %d descriptors (one per rank), got %zu", region, world_size(),
                 descriptors.size());
    std::vector<RemoteRegion> remote(world_size());
    for (int p = 0; p < world_size(); ++p) {
      RegionDescriptor d{};
      const auto& blob = descriptors[p];
      if (blob.size() != sizeof d || std::memcmp(blob.data(), kRegionMagic, 8) != 0)
        WEFT_FAIL(WEFT_E_INVALID, "descriptor %d is not a weft region descriptor", p);
      std::memcpy(&d, blob.data(), sizeof d);
      if (d.rank != p || d.region != region)
        WEFT_FAIL(WEFT_E_INVALID,
                  "descriptor %d describes region %d of rank %d, expected region %d of rank %d: "
                  "ranks must register regions in the same order",
                  p, d.region, d.rank, region, p);
      remote[p] = RemoteRegion{d.addr, d.bytes, d.key, true};
    }
    r.remote = std::move(remote);
  }

  uint64_t region_bytes(int region) const override {
    if (region < 0 || region >= int(regions_.size()) || !regions_[region].mr) return 0;
    return regions_[region].bytes;
  }

  uint64_t remote_region_bytes(int peer, int region) const override {
    if (region < 0 || region >= int(regions_.size()) || !regions_[region].mr) return 0;
    const auto& remote = regions_[region].remote;
    if (peer < 0 || peer >= int(remote.size()) || !remote[peer].valid) return 0;
    return remote[peer].bytes;
  }

  void write(int peer, int src_region, uint64_t src_offset, int dst_region, uint64_t dst_offset,
             uint64_t bytes, uint64_t token) override {
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

  void signal(int peer, int region, uint64_t offset, uint64_t value, uint64_t token) override {
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

  uint64_t load_control_word(uint64_t offset) const override {
    auto* w = reinterpret_cast<uint64_t*>(static_cast<char*>(control_.host()) + offset);
    return std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire);
  }

  bool progress(std::vector<uint64_t>& done) override {
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

  void wait_for_activity(uint32_t max_us) override {
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

  void drop_writes_for_testing(uint64_t every) override {
    fault_drop_write_ = every;
    fault_writes_ = 0;
  }

  TransportStats stats() const override {
    return TransportStats{stats_writes_, stats_bytes_, stats_signals_, stats_signal_writes_};
  }

 private:
  // ---- setup and teardown ----

  void open() {
    const auto& fi = api();
    std::string forced = options_.provider;
    if (forced.empty()) {
      const char* env = std::getenv("WEFT_FABRIC_PROVIDER");
      if (env && *env) forced = env;
    }
    std::vector<std::string> candidates;
    if (!forced.empty()) candidates = {forced};
    else {
      candidates = {"efa", "verbs;ofi_rxm"};
      // shm before 1.18 loses an RMA delivery-complete response under load when the target polls
      // with pauses (the proxy's idle backoff), after which it accepts no more writes: reproduced
      // with libfabric 1.17 in plain C (bench/repro/shm-stall.c). Forcing it remains possible.
      if (options_.same_host && api().version() >= FI_VERSION(1, 18)) candidates.push_back("shm");
      candidates.push_back("tcp;ofi_rxm");
    }
    std::string tried;
    for (const auto& name : candidates) {
      if (select(name, options_.device >= 0, true) || (options_.device >= 0 && select(name, false, true)) ||
          (completion_implies_delivery(name) && select(name, false, false)))
        break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!info_)
      WEFT_FAIL(WEFT_E_UNSUPPORTED,
                "no libfabric provider offers reliable RMA with delivery completion here (tried %s%s). "
                "Providers on this machine: %s",
                tried.c_str(), forced.empty() ? "" : ", forced by WEFT_FABRIC_PROVIDER",
                available_providers().c_str());

    provider_ = info_->fabric_attr->prov_name;
    hmem_ = (info_->caps & FI_HMEM) != 0;
    mr_mode_ = info_->domain_attr->mr_mode;
    max_chunk_ = std::min<uint64_t>(kMaxChunk, info_->ep_attr->max_msg_size);
    FI_CALL(fi.fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    FI_CALL(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = 4096;
    // A file descriptor to sleep on when idle: with manual progress (rxm, shm) an incoming write
    // lands only while this rank progresses, so an idle proxy must wake when data arrives rather
    // than on a timer (a 100 us timer capped tcp;ofi_rxm at ~0.3 GB/s for 64 KiB writes here).
    cq_attr.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0 || !cq_) {
      cq_ = nullptr;
      cq_attr.wait_obj = FI_WAIT_NONE;
      FI_CALL(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
    } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
      wait_fd_ = -1;
    }
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = static_cast<size_t>(world_size());
    FI_CALL(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
    FI_CALL(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    FI_CALL(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    FI_CALL(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    FI_CALL(fi_enable(ep_), "fi_enable");
    std::vector<uint8_t> name(256);
    size_t len = name.size();
    int rc = fi_getname(&ep_->fid, name.data(), &len);
    if (rc == -FI_ETOOSMALL) {
      name.resize(len);
      rc = fi_getname(&ep_->fid, name.data(), &len);
    }
    FI_CALL(rc, "fi_getname");
    name.resize(len);
    addrlen_ = len;

    peers_.resize(world_size());
    // Region 0: this rank's barrier words (one per rank) and the sources of signal writes.
    control_ = HostMemory(uint64_t(world_size()) * 8 + uint64_t(kSignalSlots) * 8);
    regions_.emplace_back();
    register_memory(regions_[0], control_.host(), control_.bytes(), -1);
    for (uint32_t s = 0; s < kSignalSlots; ++s) free_slots_.push_back(kSignalSlots - 1 - s);

    AddressHeader h{};
    std::memcpy(h.magic, kAddressMagic, 8);
    std::snprintf(h.provider, sizeof h.provider, "%s", provider_.c_str());
    h.rank = rank();
    h.addrlen = static_cast<uint32_t>(len);
    h.control_addr = remote_base(control_.host());
    h.control_bytes = control_.bytes();
    h.control_key = fi_mr_key(regions_[0].mr);
    address_.assign(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof h);
    address_.insert(address_.end(), name.begin(), name.end());

    info_json_ = format(
        "{\"provider\":\"%s\",\"fabric\":\"%s\",\"domain\":\"%s\",\"libfabric\":\"%s\","
        "\"hmem\":%s,\"deliveryComplete\":%s,\"mrMode\":%d,\"dataProgress\":\"%s\","
        "\"maxMessage\":%llu,\"waitFd\":%s,\"rank\":%d,\"worldSize\":%d}",
        provider_.c_str(), info_->fabric_attr->name ? info_->fabric_attr->name : "",
        info_->domain_attr->name ? info_->domain_attr->name : "",
        fabric::version_string().c_str(), hmem_ ? "true" : "false",
        delivery_complete_ ? "true" : "false", mr_mode_,
        info_->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual",
        (unsigned long long)info_->ep_attr->max_msg_size, wait_fd_ >= 0 ? "true" : "false", rank(),
        world_size());
    const char* log = std::getenv("WEFT_LOG");
    if (log && (std::strcmp(log, "info") == 0 || std::strcmp(log, "debug") == 0))
      std::fprintf(stderr, "weft: rank %d transport: libfabric %s provider %s (fabric %s, domain %s, FI_HMEM %s)\n",
                   rank(), fabric::version_string().c_str(), provider_.c_str(),
                   info_->fabric_attr->name ? info_->fabric_attr->name : "?",
                   info_->domain_attr->name ? info_->domain_attr->name : "?", hmem_ ? "yes" : "no");
  }

  // Asks for `name` with the capabilities the proxy needs; keeps the first match.
  bool select(const std::string& name, bool hmem, bool delivery_complete) {
    const auto& fi = api();
    fi_info* hints = fi.dupinfo(nullptr);
    if (!hints) WEFT_FAIL(WEFT_E_OOM, "fi_dupinfo failed");
    hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE | (hmem ? FI_HMEM : 0);
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_ENDPOINT | FI_MR_HMEM;
    // Every call into the domain is serialized by this transport's lock (lock()).
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (delivery_complete) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    hints->fabric_attr->prov_name = strdup(name.c_str());
    fi_info* info = nullptr;
    int rc = fi.getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info);
    fi.freeinfo(hints);
    if (rc != 0 || !info) return false;
    // Keep the first entry only (the provider's preferred interface; FI_TCP_IFACE and friends
    // narrow it).
    info_ = fi.dupinfo(info);
    fi.freeinfo(info);
    if (!info_) return false;
    delivery_complete_ = delivery_complete;
    return true;
  }

  static std::string available_providers() {
    std::string out;
    for (const Provider& p : rdm_rma_providers()) out += (out.empty() ? "" : ", ") + p.name;
    return out.empty() ? "none" : out;
  }

  void close() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    // The endpoint goes first: once it is closed no DMA can touch registered memory.
    if (ep_) (void)fi_close(&ep_->fid);
    ep_ = nullptr;
    for (auto& r : regions_) close_region(r);
    regions_.clear();
    if (av_) (void)fi_close(&av_->fid);
    if (cq_) (void)fi_close(&cq_->fid);
    if (domain_) (void)fi_close(&domain_->fid);
    if (fabric_) (void)fi_close(&fabric_->fid);
    av_ = nullptr;
    cq_ = nullptr;
    domain_ = nullptr;
    fabric_ = nullptr;
    if (info_) api().freeinfo(info_);
    info_ = nullptr;
    for (Request* r : requests_) delete r;
    requests_.clear();
  }

  void register_memory(Region& r, void* base, uint64_t bytes, int device) {
    iovec iov{base, bytes};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_WRITE | FI_REMOTE_WRITE;
    attr.requested_key = next_key_++;
    attr.iface = device >= 0 ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
    if (device >= 0) attr.device.cuda = device;
    FI_CALL(fi_mr_regattr(domain_, &attr, 0, &r.mr), "fi_mr_regattr");
    live_counters().regions.fetch_add(1);
    if (mr_mode_ & FI_MR_ENDPOINT) {
      FI_CALL(fi_mr_bind(r.mr, &ep_->fid, 0), "fi_mr_bind");
      FI_CALL(fi_mr_enable(r.mr), "fi_mr_enable");
    }
    r.base = base;
    r.bytes = bytes;
    r.device = device;
    r.desc = fi_mr_desc(r.mr);
  }

  void close_region(Region& r) {
    if (r.mr) {
      (void)fi_close(&r.mr->fid);
      live_counters().regions.fetch_sub(1);
    }
    r = Region{};
  }

  // The target address the peer's provider expects for byte 0 of a region.
  uint64_t remote_base(void* base) const {
    return (mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(base) : 0;
  }

  Region& user_region(int region) {
    WEFT_REQUIRE(region >= 1 && region < int(regions_.size()) && regions_[region].mr,
                 "region %d is not registered (user regions start at 1)", region);
    return regions_[region];
  }

  const RemoteRegion& remote_region(int peer, int region) {
    WEFT_REQUIRE(connected_, "the transport is not connected: exchange addresses first");
    WEFT_REQUIRE(peer >= 0 && peer < world_size(), "peer %d is not a rank (world size %d)", peer,
                 world_size());
    WEFT_REQUIRE(region >= 0 && region < int(regions_.size()) && regions_[region].mr,
                 "region %d is not registered", region);
    const auto& remote = regions_[region].remote;
    WEFT_REQUIRE(peer < int(remote.size()) && remote[peer].valid,
                 "region %d has no descriptor for rank %d: exchange region descriptors first",
                 region, peer);
    return remote[peer];
  }

  // ---- ops ----

  Op& new_op() {
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

  void free_op(Op& op) {
    op.live = false;
    --live_ops_;
    free_ops_.push_back(&op);
  }

  Request* new_request(uint64_t token, uint32_t chunks) {
    Request* r = new Request{token, chunks};
    requests_.insert(r);
    return r;
  }

  // Posts queued ops in order until the provider pushes back (-FI_EAGAIN: its queue is full until
  // completions are reaped; progress() retries). Returns whether any was posted. Not re-entered:
  // completions reaped elsewhere only queue more ops.
  bool post_queued() {
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

  void complete(Op& op) {
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

  // Moves signals whose data has landed to their word's state; posts where the word is idle.
  void release_signals(int peer) {
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

  void post_signal(int peer, uint64_t key) {
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

  // ---- failure ----

  [[noreturn]] void fail(int code, const std::string& message) {
    failed_code_ = code;
    failed_message_ = message;
    WEFT_FAIL(code, "%s", message.c_str());
  }

  void check_usable() {
    if (failed_code_) WEFT_FAIL(failed_code_, "%s", failed_message_.c_str());
    WEFT_REQUIRE(ep_, "the transport is closed");
  }

  [[noreturn]] void fail_from_cq() {
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

  void check_deadlines() {
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

  // ---- state ----

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

}  // namespace

std::unique_ptr<Transport> open_fabric_transport(const TransportOptions& options) {
  WEFT_REQUIRE(options.world_size >= 1, "world_size must be >= 1 (got %d)", options.world_size);
  WEFT_REQUIRE(options.rank >= 0 && options.rank < options.world_size,
               "rank %d is outside [0, %d)", options.rank, options.world_size);
  WEFT_REQUIRE(options.timeout_ms > 0, "timeout_ms must be > 0");
  return std::make_unique<FabricTransport>(options);
}

#endif

}  // namespace weft
