// fabric_endpoint.cpp — a libfabric transport's endpoint: choosing the provider, opening and closing
// the fabric, domain, CQ, AV and endpoint, exchanging addresses, registering regions (fabric_transport.hpp).
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport/fabric_transport.hpp"
#include "transport/libfabric.hpp"
#include "transport/live_counters.hpp"

#include "info_log.hpp"
#include "status.hpp"
#include "transport/transport.hpp"

namespace weft {

#ifndef WEFT_HAVE_FABRIC_HEADERS

std::unique_ptr<Transport> open_fabric_transport(const TransportOptions&) {
  WEFT_FAIL(WEFT_E_UNSUPPORTED,
            "this libweft.so was built without libfabric headers (rdma/fabric.h): install "
            "libfabric-dev and rebuild to use the inter-node transport");
}

#else

namespace fabric_transport {

FabricTransport::FabricTransport(const TransportOptions& o) : Transport(o) {
  try {
    open();
  } catch (...) {
    close();
    throw;
  }
  live_counters().transports.fetch_add(1);
}

FabricTransport::~FabricTransport() {
  close();
  live_counters().transports.fetch_sub(1);
}

void FabricTransport::connect(const std::vector<std::vector<uint8_t>>& addresses) {
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

int FabricTransport::register_region(void* base, uint64_t bytes, int device) {
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

void FabricTransport::deregister_region(int region) {
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

const std::vector<uint8_t>& FabricTransport::region_descriptor(int region) const {
  WEFT_REQUIRE(region >= 1 && region < int(regions_.size()) && regions_[region].mr,
               "region %d is not registered (user regions start at 1)", region);
  return regions_[region].descriptor;
}

void FabricTransport::connect_region(int region, const std::vector<std::vector<uint8_t>>& descriptors) {
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

uint64_t FabricTransport::region_bytes(int region) const {
  if (region < 0 || region >= int(regions_.size()) || !regions_[region].mr) return 0;
  return regions_[region].bytes;
}

uint64_t FabricTransport::remote_region_bytes(int peer, int region) const {
  if (region < 0 || region >= int(regions_.size()) || !regions_[region].mr) return 0;
  const auto& remote = regions_[region].remote;
  if (peer < 0 || peer >= int(remote.size()) || !remote[peer].valid) return 0;
  return remote[peer].bytes;
}

void FabricTransport::open() {
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
  if (info_log_enabled())
    std::fprintf(stderr, "weft: rank %d transport: libfabric %s provider %s (fabric %s, domain %s, FI_HMEM %s)\n",
                 rank(), fabric::version_string().c_str(), provider_.c_str(),
                 info_->fabric_attr->name ? info_->fabric_attr->name : "?",
                 info_->domain_attr->name ? info_->domain_attr->name : "?", hmem_ ? "yes" : "no");
}

bool FabricTransport::select(const std::string& name, bool hmem, bool delivery_complete) {
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

std::string FabricTransport::available_providers() {
  std::string out;
  for (const Provider& p : rdm_rma_providers()) out += (out.empty() ? "" : ", ") + p.name;
  return out.empty() ? "none" : out;
}

void FabricTransport::close() {
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

void FabricTransport::register_memory(Region& r, void* base, uint64_t bytes, int device) {
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

void FabricTransport::close_region(Region& r) {
  if (r.mr) {
    (void)fi_close(&r.mr->fid);
    live_counters().regions.fetch_sub(1);
  }
  r = Region{};
}

uint64_t FabricTransport::remote_base(void* base) const {
  return (mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(base) : 0;
}

Region& FabricTransport::user_region(int region) {
  WEFT_REQUIRE(region >= 1 && region < int(regions_.size()) && regions_[region].mr,
               "region %d is not registered (user regions start at 1)", region);
  return regions_[region];
}

const RemoteRegion& FabricTransport::remote_region(int peer, int region) {
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

}  // namespace fabric_transport

std::unique_ptr<Transport> open_fabric_transport(const TransportOptions& options) {
  WEFT_REQUIRE(options.world_size >= 1, "world_size must be >= 1 (got %d)", options.world_size);
  WEFT_REQUIRE(options.rank >= 0 && options.rank < options.world_size,
               "rank %d is outside [0, %d)", options.rank, options.world_size);
  WEFT_REQUIRE(options.timeout_ms > 0, "timeout_ms must be > 0");
  return std::make_unique<fabric_transport::FabricTransport>(options);
}

#endif

}  // namespace weft
